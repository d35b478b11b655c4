# SPDX-License-Identifier: GPL-2.0
# Shared helpers for integration tests. Each test script makes its own
# nodes, pods and namespaces under a short unique prefix and tears them
# down on exit, whatever happened.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${PODINJECT_BUILD:-$ROOT/build}
PI=$BUILD/podinject
PINET=$BUILD/pinet
SUITE=$(basename "$0" .sh)

pass() { echo "PASS $SUITE/$1"; }
fail() { echo "FAIL $SUITE/$1: $2"; }
skip() { echo "SKIP $SUITE/$1: $2"; }

# check NAME CMD...: one test line from a command's exit status; the last
# line of its output is the reason when it fails.
check() {
	local name=$1 out
	shift
	if out=$("$@" 2>&1); then
		pass "$name"
	else
		fail "$name" "$(echo "$out" | tail -n 1)"
	fi
}

# check_fails NAME CMD...: the command must fail.
check_fails() {
	local name=$1 out
	shift
	if out=$("$@" 2>&1); then
		fail "$name" "succeeded but should not: $(echo "$out" | tail -n 1)"
	else
		pass "$name"
	fi
}

# expect_eq NAME GOT WANT
expect_eq() {
	if [ "$2" = "$3" ]; then pass "$1"; else fail "$1" "got '$2', want '$3'"; fi
}

pi() { "$PI" "$@"; }
in_ns() { local ns=$1; shift; ip netns exec "$ns" "$@"; }

node_up() {
	local n=$1
	shift
	"$PI" -N "$n" node up "$@" >/dev/null
}

# The stats of a pod as JSON: pod_stat NODE POD FIELD (a jq path)
pod_stat() {
	"$PI" -N "$1" -j pod show "$2" | jq -r ".stats$3"
}

cleanup_all() {
	local n
	# Without a prefix the patterns below would match everyone's.
	[ -n "${PREFIX:-}" ] || return 0
	for n in $(ls /sys/fs/bpf/podinject 2>/dev/null | grep "^$PREFIX"); do
		"$PI" -N "$n" node down >/dev/null 2>&1
	done
	for n in $(ip netns list | awk '{print $1}' | grep "^$PREFIX" || true); do
		ip netns del "$n" 2>/dev/null
	done
	kill $(jobs -p) 2>/dev/null
	wait 2>/dev/null
}

require_root() {
	if [ "$(id -u)" != 0 ]; then
		skip all "needs root"
		exit 0
	fi
}

# Two nodes with a veth wire between them, each with an address on it and
# a route to the other node's pod range through it.
#   make_wire NODE_A NODE_B
make_wire() {
	local a=$1 b=$2
	ip netns add "$a"
	ip netns add "$b"
	ip -n "$a" link add wire0 type veth peer name wire0 netns "$b"
	# No duplicate address detection on the wire: a tentative link-local
	# address would hold up neighbour discovery for the first packets.
	ip netns exec "$a" sysctl -qw net.ipv6.conf.wire0.accept_dad=0
	ip netns exec "$b" sysctl -qw net.ipv6.conf.wire0.accept_dad=0
	ip -n "$a" addr add 192.168.77.1/24 dev wire0
	ip -n "$b" addr add 192.168.77.2/24 dev wire0
	ip -n "$a" addr add fd77::1/64 dev wire0 nodad
	ip -n "$b" addr add fd77::2/64 dev wire0 nodad
	ip -n "$a" link set wire0 up
	ip -n "$b" link set wire0 up
	ip -n "$a" route add 10.244.1.0/24 via 192.168.77.2
	ip -n "$b" route add 10.244.0.0/24 via 192.168.77.1
	ip -n "$a" -6 route add fd00:1::/64 via fd77::2
	ip -n "$b" -6 route add fd00:0::/64 via fd77::1
}

# The ids of a node's programs (datapath and injection), for checking after
# `node down` that no link of theirs is left; other tests' links do not
# count.
node_prog_ids() {
	local f
	for f in /sys/fs/bpf/podinject/$1/prog_* /sys/fs/bpf/podinject/$1/inject/prog_*; do
		[ -e "$f" ] && bpftool prog show pinned "$f" -j | jq .id
	done
}
links_of_progs() {
	local ids
	ids=$(printf '%s,' "$@")
	bpftool link list -j 2>/dev/null | jq "[.[] | select(.prog_id as \$p | [${ids%,}] | index(\$p))] | length"
}

tcx_links() { bpftool link list -j 2>/dev/null | jq '[.[] | select(.type == "tcx" or .type == 11 or .type == "netkit" or .type == 13)] | length'; }

trap cleanup_all EXIT
