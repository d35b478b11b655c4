#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Which node a command finds, and when a node's pins may go.
#  - A host node (`node up --host`) belongs to the network namespace it was
#    made in; its pins are keyed by that namespace, so a runtime in another
#    namespace of the machine (a kind node, a nested runtime) gets a node
#    of its own under the same name and never sees, nor wipes, this one.
#  - `node down` removes pins only of a node that is provably broken: never
#    on an error that says nothing about the node (another namespace's node,
#    out of open files).
#  - A host node whose namespace is gone is found stale and swept by the
#    next `node up`, from the machine's PID namespace only (from another,
#    the processes that hold a namespace may be out of sight); one pinned
#    before the keying (NAME, not NAME@COOKIE) still serves its own
#    namespace.
#  - A failed `node up` in clsact mode takes its filter off the uplink in
#    the node's namespace.
# Namespaces that hold a host node are entered with nsenter, which keeps
# the mounts (and so /sys/fs/bpf): `ip netns exec` remounts /sys.
source "$(dirname "$0")/lib.sh"
require_root
EXPECT=51
PREFIX=nd-
N=${PREFIX}n
WPID=
MPID=
cleanup() {
	local ns
	if [ -n "$WPID" ] && kill -0 "$WPID" 2>/dev/null; then
		nsenter -t "$WPID" -n "$PI" -N ${PREFIX}w node down >/dev/null 2>&1
		kill "$WPID"
	fi
	if [ -n "$MPID" ] && kill -0 "$MPID" 2>/dev/null; then
		nsenter --net=/proc/$MPID/root/tmp/${PREFIX}mnt$$/ns "$PI" -N ${PREFIX}m node down >/dev/null 2>&1
		kill "$MPID"
	fi
	[ -e /run/netns/${PREFIX}h ] &&
		nsenter --net=/run/netns/${PREFIX}h "$PI" -N $N node down >/dev/null 2>&1
	[ -e /run/netns/${PREFIX}k ] &&
		nsenter --net=/run/netns/${PREFIX}k "$PI" -N ${PREFIX}q node down >/dev/null 2>&1
	cleanup_all
	"$PI" -N ${PREFIX}s node up --host >/dev/null 2>&1	# sweeps what is stale
	"$PI" -N ${PREFIX}s node down >/dev/null 2>&1
}
trap cleanup EXIT
cleanup

ip netns add ${PREFIX}h		# a kind node's namespace
ip netns add ${PREFIX}o		# another namespace of the machine
XH="nsenter --net=/run/netns/${PREFIX}h"
XO="nsenter --net=/run/netns/${PREFIX}o"
pods_of() {	# pods_of NSENTER... : the pod count of node $N seen from there
	"$@" "$PI" -N $N -j node show 2>/dev/null | jq -r .pods
}
pin_dir_of() { "$@" "$PI" -N $N -j node show 2>/dev/null | jq -r .pin_dir; }

check up_in_ns $XH "$PI" -N $N node up --host
check pod_a $XH "$PI" -N $N pod add ${PREFIX}a --ip 10.244.6.10
check pod_b $XH "$PI" -N $N pod add ${PREFIX}b --ip 10.244.6.11
check ping_before in_ns ${PREFIX}a ping -c 1 -W 2 10.244.6.11
dir_h=$(pin_dir_of $XH)
expect_eq pin_dir_keyed "$(basename "$dir_h" | grep -c "^$N@[0-9][0-9]*$")" 1

# `node down` from the root namespace and from another one: not their node.
check_fails down_from_root pi -N $N node down
check_fails down_from_other $XO "$PI" -N $N node down
check_fails down_force_from_other $XO "$PI" -N $N node down --force
expect_eq down_elsewhere_kept "$(pods_of $XH)" 2
check ping_after_down_elsewhere in_ns ${PREFIX}a ping -c 1 -W 2 10.244.6.11

# Out of open files (opening the node's pins fails half-way): says
# nothing of the node, which stays.
check_fails down_emfile $XH prlimit --nofile=12 "$PI" -N $N node down
expect_eq down_emfile_kept "$(pods_of $XH)" 2

# A host node of the same name in the root namespace: its own pins, its own
# pods; taking it down leaves the other namespace's node alone.
check up_in_root pi -N $N node up --host
expect_eq root_own_node "$(pods_of)" 0
check root_dir_differs test "$(pin_dir_of)" != "$dir_h"
check_fails root_up_again pi -N $N node up --host
check down_in_root pi -N $N node down
expect_eq down_in_root_other_kept "$(pods_of $XH)" 2
check ping_after_root_down in_ns ${PREFIX}a ping -c 1 -W 2 10.244.6.11

# A node pinned before host nodes were keyed (PI_PIN_ROOT/NAME): still its
# namespace's node; from elsewhere not up, never wiped, and another host
# node of the name can be made beside it.
mv "$dir_h" /sys/fs/bpf/podinject/$N
expect_eq legacy_found_in_ns "$(pods_of $XH)" 2
check_fails legacy_show_from_root pi -N $N node show
check_fails legacy_down_from_root pi -N $N node down
check_fails legacy_up_again_in_ns $XH "$PI" -N $N node up --host
check legacy_up_beside pi -N $N node up --host
check legacy_down_beside pi -N $N node down
expect_eq legacy_kept "$(pods_of $XH)" 2
check ping_legacy in_ns ${PREFIX}a ping -c 1 -W 2 10.244.6.11
# ... and of another build, as a v0.1 node is (its version made 4 here):
# from elsewhere still not up, and not wiped even by `node down --force`
# (before, the version was checked first, and --force removed the pins of
# a node whose pods live in another namespace).
lcfg=/sys/fs/bpf/podinject/$N/node_config
lcfg_was=$(bpftool map lookup pinned $lcfg key 0 0 0 0 -j | jq -r '.value | join(" ")')
bpftool map update pinned $lcfg key 0 0 0 0 value \
	$(bpftool map lookup pinned $lcfg key 0 0 0 0 -j | jq -r '.value | .[:44] + ["4", "0", "0", "0"] + .[48:] | join(" ")')
check_fails legacy_old_down_force_from_root pi -N $N node down --force
check_fails legacy_old_down_force_from_other $XO "$PI" -N $N node down --force
check legacy_old_kept test -e $lcfg
expect_eq legacy_old_said "$(pi -N $N node show 2>&1 | grep -c 'is not up in this network namespace')" 1
bpftool map update pinned $lcfg key 0 0 0 0 value $lcfg_was
expect_eq legacy_old_back "$(pods_of $XH)" 2

# A host node whose namespace is deleted (the kind node's container
# recreated): stale, and the next `node up` anywhere removes its pins. The
# kernel tears a namespace down asynchronously, so this waits for it.
ip netns add ${PREFIX}k
XK="nsenter --net=/run/netns/${PREFIX}k"
check stale_up $XK "$PI" -N ${PREFIX}q node up --host
check stale_pod $XK "$PI" -N ${PREFIX}q pod add ${PREFIX}c --ip 10.244.6.12
dir_k=$(basename "$($XK "$PI" -N ${PREFIX}q -j node show | jq -r .pin_dir)")
ip netns del ${PREFIX}k
swept() {
	for _ in $(seq 50); do
		"$PI" -N ${PREFIX}s node up --host >/dev/null 2>&1
		"$PI" -N ${PREFIX}s node down >/dev/null 2>&1
		[ -n "$dir_k" ] && [ ! -e "/sys/fs/bpf/podinject/$dir_k" ] && return 0
		sleep 0.1
	done
	echo "/sys/fs/bpf/podinject/$dir_k is still there"
	return 1
}
check stale_swept swept
check stale_pod_netns_kept ip netns pids ${PREFIX}c
expect_eq live_not_swept "$(pods_of $XH)" 2
check legacy_down_in_ns $XH "$PI" -N $N node down
check legacy_pins_gone test ! -e /sys/fs/bpf/podinject/$N

# A host node whose namespace only a process holds (no bind mount), seen
# from another PID namespace, where that process is out of sight (a kind
# node's runtime, seen from a sibling sharing the machine's bpffs): not
# stale from there, so a node up there leaves it.
unshare -n sleep 600 &
WPID=$!
for _ in $(seq 50); do
	[ "$(stat -L -c %i /proc/$WPID/ns/net 2>/dev/null)" != "$(stat -L -c %i /proc/self/ns/net)" ] && break
	sleep 0.1
done
XW="nsenter -t $WPID -n"
check hidden_up $XW "$PI" -N ${PREFIX}w node up --host
dir_w=$(basename "$($XW "$PI" -N ${PREFIX}w -j node show | jq -r .pin_dir)")
check hidden_sweep_elsewhere unshare -p -f --mount-proc sh -c \
	"'$PI' -N ${PREFIX}s node up --host >/dev/null && '$PI' -N ${PREFIX}s node down >/dev/null"
check hidden_node_kept test -n "$dir_w" -a -e "/sys/fs/bpf/podinject/$dir_w"
check hidden_down $XW "$PI" -N ${PREFIX}w node down
kill $WPID
wait $WPID 2>/dev/null
WPID=

# A host node whose namespace only a bind mount holds, in a mount
# namespace of its own (a runtime's private netns directory) with no
# process in the network namespace: alive, so the next node up keeps it.
M=/tmp/${PREFIX}mnt$$
unshare -m --propagation private sh -c "mkdir -p $M && mount -t tmpfs none $M &&
	touch $M/ns && unshare --net=$M/ns true && exec sleep 600" &
MPID=$!
for _ in $(seq 50); do
	[ -e /proc/$MPID/root$M/ns ] && grep -q " $M/ns " /proc/$MPID/mountinfo 2>/dev/null && break
	sleep 0.1
done
XM="nsenter --net=/proc/$MPID/root$M/ns"
check private_mount_up $XM "$PI" -N ${PREFIX}m node up --host
dir_m=$(basename "$($XM "$PI" -N ${PREFIX}m -j node show | jq -r .pin_dir)")
check private_mount_sweep sh -c "'$PI' -N ${PREFIX}s node up --host >/dev/null && '$PI' -N ${PREFIX}s node down >/dev/null"
check private_mount_node_kept test -n "$dir_m" -a -e "/sys/fs/bpf/podinject/$dir_m"
check private_mount_down $XM "$PI" -N ${PREFIX}m node down
kill $MPID
wait $MPID 2>/dev/null
MPID=
rmdir $M 2>/dev/null

# A failed `node up` in clsact mode (the uplink runs another XDP program,
# found after the uplink's filter is attached) leaves no filter on the
# uplink, which is inside the node's namespace, and no qdisc.
U=${PREFIX}u
ip netns add $U
ip -n $U link add up0 type veth peer name up1
ip -n $U link set up0 xdpdrv obj "$BUILD/xdp.bpf.o" sec xdp
check_fails clsact_up_fails pi -N $U node up --uplink up0 --xdp --attach clsact
expect_eq clsact_no_filter_left "$(tc -n $U filter show dev up0 ingress | wc -l)" 0
# nor the clsact qdisc node up made for it (before: it stayed, empty)
expect_eq clsact_no_qdisc_left "$(tc -n $U qdisc show dev up0 | grep -c clsact)" 0
check clsact_nothing_pinned test ! -e /sys/fs/bpf/podinject/$U
