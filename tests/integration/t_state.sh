#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# A node's pinned state carries the ABI version of the build that made it.
# A node of another version is refused by every command, with an error
# that says what to do, and nothing of it changes; `node down --force`
# removes its pins and links. Checked with a node whose recorded version is
# rewritten, and with a node made by a real older build of podinject (the
# last commit before the version existed), when git history is at hand.
source "$(dirname "$0")/lib.sh"
require_root
EXPECT=32
PREFIX=st-
N=${PREFIX}n
OLD_COMMIT=eabdf44
cleanup() {
	cleanup_all
	[ -n "${OLD:-}" ] && rm -rf "$OLD"
}
trap cleanup EXIT
cleanup

snapshot() {	# what a node is: its pins and their ids, its namespaces
	ls -R /sys/fs/bpf/podinject/$1 2>/dev/null
	ip netns list | grep "^$PREFIX" | sort
}

# refused NAME NODE CMD...: exit 1, the ABI error, nothing changed
refused() {
	local name=$1 node=$2 before out rc
	shift 2
	before=$(snapshot $node)
	out=$("$PI" -N $node "$@" 2>&1)
	rc=$?
	if [ $rc != 1 ]; then
		fail "$name" "exit $rc, want 1: $out"
	elif ! echo "$out" | grep -q "another podinject build.*node down"; then
		fail "$name" "no ABI error: $out"
	elif [ "$before" != "$(snapshot $node)" ]; then
		fail "$name" "the node changed"
	else
		pass "$name"
	fi
}

# rewrite_abi NODE: node_config's version field (bytes 44-47) set to 1
rewrite_abi() {
	local cfg=/sys/fs/bpf/podinject/$1/node_config val
	val=$(bpftool map lookup pinned $cfg key 0 0 0 0 -j | jq -r '.value | .[:44] + ["0x01", "0", "0", "0"] + .[48:] | join(" ")')
	bpftool map update pinned $cfg key 0 0 0 0 value $val
}

check up pi -N $N node up
check pod pi -N $N pod add ${PREFIX}a --ip 10.244.0.10
ids=$(node_prog_ids $N)
check rewrite_version rewrite_abi $N
refused abi_pod_list $N pod list
refused abi_pod_add $N pod add ${PREFIX}b --ip 10.244.0.11
refused abi_pod_del $N pod del ${PREFIX}a
refused abi_policy_add $N policy add ${PREFIX}a egress deny
refused abi_node_show $N node show
refused abi_node_down $N node down
check abi_pod_netns_kept ip netns pids ${PREFIX}a
check force_down pi -N $N node down --force
check force_pins_gone test ! -e /sys/fs/bpf/podinject/$N
expect_unhooked force_unhooked $ids
check force_leaves_pod_netns ip netns pids ${PREFIX}a
ip netns del ${PREFIX}a
ip netns del $N 2>/dev/null
check up_again pi -N $N node up
check down_again pi -N $N node down

# The same in clsact mode, where the programs run as filters on the
# devices and removing the pins alone left them running.
C=${PREFIX}k
check clsact_up pi -N $C node up --attach clsact
check clsact_pod pi -N $C pod add ${PREFIX}e --ip 10.244.0.14
ids=$(node_prog_ids $C)
expect_hooked clsact_hooked_before clsact $ids
check clsact_rewrite_version rewrite_abi $C
check clsact_force_down pi -N $C node down --force
check clsact_force_pins_gone test ! -e /sys/fs/bpf/podinject/$C
expect_unhooked clsact_force_unhooked $ids
ip netns del ${PREFIX}e
ip netns del $C 2>/dev/null

# A node made by a real build from before the version.
OLD_CHECKS="old_build old_up old_pod old_abi_pod_list old_abi_pod_add old_abi_node_down old_still_works_for_its_build old_down_by_its_build old_gone"
skip_old() {
	local c
	for c in $OLD_CHECKS; do skip "$c" "$1"; done
	exit 0
}
if ! git -C "$ROOT" cat-file -e "$OLD_COMMIT^{commit}" 2>/dev/null || ! command -v make >/dev/null; then
	skip_old "no git history with $OLD_COMMIT (or no make) here"
fi
OLD=$(mktemp -d /tmp/${PREFIX}old.XXXXXX)
git -C "$ROOT" archive "$OLD_COMMIT" | tar -x -C "$OLD"
if ! make -C "$OLD" -s build/podinject >/dev/null 2>&1; then
	fail old_build "cannot build $OLD_COMMIT"
	OLD_CHECKS=${OLD_CHECKS#old_build }
	skip_old "no older build"
fi
pass old_build
O=${PREFIX}o
check old_up "$OLD/build/podinject" -N $O node up
check old_pod "$OLD/build/podinject" -N $O pod add ${PREFIX}c --ip 10.244.0.12
refused old_abi_pod_list $O pod list
refused old_abi_pod_add $O pod add ${PREFIX}d --ip 10.244.0.13
refused old_abi_node_down $O node down
check old_still_works_for_its_build "$OLD/build/podinject" -N $O pod show ${PREFIX}c
check old_down_by_its_build "$OLD/build/podinject" -N $O node down
check old_gone test ! -e /sys/fs/bpf/podinject/$O
