#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The pod ingress ACL over every way into a pod, with node xp-x up --xdp:
#
#   xp-b 10.244.0.11 ---(pod_egress: bpf_redirect_peer, checked at tc)---+
#   xp-c 10.244.0.12 (injects as xp-b: same way, after xp-b's egress)    |
#   node xp-x stack 192.168.77.1 --> [pi-xp-a] tc (defers) ==veth==> [eth0 XDP ACL] xp-a 10.244.0.10 fd00::a
#   xp-r 10.244.1.10 fd00:1::a (node xp-y) == wire0 ==> [wire0 XDP] --XDP_REDIRECT--> [pi-xp-a] ==> [eth0 XDP ACL]
#
# xp-a denies UDP port 7001 from each source (one rule each) and allows
# port 7002 (counted). Every denied packet must be dropped and counted
# exactly once, where docs/datapath.md says: at tc for bpf_redirect_peer,
# in XDP on eth0 for the node stack and the uplink. ip_forward is off.
# xp-y's end of the wire checksums in software, as a real wire's frames
# are complete; with offload on, its frames wait for their checksum and
# must take the tc way (last part).
. "$(dirname "$0")/lib.sh"
require_root
EXPECT=77
PREFIX=xp-
X=xp-x
Y=xp-y
A4=10.244.0.10
A6=fd00::a
NODE4=192.168.77.1
COUNT=20
links_before=$(tcx_links)

if [ "$(pi -j features | jq -r .veth_xdp)" != true ]; then
	skip all "no native XDP on veth on this kernel"
	exit 0
fi
if ! command -v ethtool >/dev/null; then
	skip all "needs ethtool (make deps)"
	exit 0
fi

# An uplink that runs someone else's XDP program: refused, theirs kept,
# nothing of ours left.
ip netns add xp-f
ip -n xp-f link add up0 type veth peer name up1
ip -n xp-f link set up0 xdpdrv obj "$BUILD/xdp.bpf.o" sec xdp
foreign=$(ip -n xp-f -d link show up0 | grep -o 'prog/xdp id [0-9]*')
check foreign_xdp_attached test -n "$foreign"
check_fails foreign_xdp_refused pi -N xp-f node up --uplink up0 --xdp
expect_eq foreign_xdp_kept "$(ip -n xp-f -d link show up0 | grep -o 'prog/xdp id [0-9]*')" "$foreign"
check foreign_xdp_nothing_left test ! -e /sys/fs/bpf/podinject/xp-f
ip netns del xp-f

make_wire $X $Y
ethtool_y() { in_ns $Y ethtool -K wire0 tx "$1" >/dev/null 2>&1; }
# xdp_name NS DEV: name of the XDP program on DEV, empty if none; fails
# when the device cannot be read, so that "none" is never a mistake.
xdp_name() {
	local out
	out=$(ip -n "$1" -d link show "$2") || return 1
	grep -o 'prog/xdp id [0-9]* name [a-z_]*' <<<"$out" | awk '{print $NF}'
}
no_xdp() { local n; n=$(xdp_name "$1" "$2") && [ -z "$n" ]; }
prog_gone() { bpftool prog show >/dev/null && ! bpftool prog show id "$1" >/dev/null 2>&1; }
check wire_full_checksums ethtool_y off
for n in $X $Y; do
	in_ns $n sysctl -qw net.ipv4.ip_forward=0 net.ipv6.conf.all.forwarding=0
done
check up_x_xdp node_up $X --uplink wire0 --xdp
check up_y node_up $Y --uplink wire0
check node_show_xdp sh -c "$PI -N $X -j node show | jq -e '.xdp == true'"
expect_eq uplink_has_xdp "$(xdp_name $X wire0)" xdp_uplink
check pod_a pi -N $X pod add xp-a --ip $A4 --ip6 $A6
check pod_b pi -N $X pod add xp-b --ip 10.244.0.11 --ip6 fd00::b
check pod_c pi -N $X pod add xp-c --ip 10.244.0.12 --ip6 fd00::c
check pod_r pi -N $Y pod add xp-r --ip 10.244.1.10 --ip6 fd00:1::a
expect_eq eth0_has_acl "$(xdp_name xp-a eth0)" xdp_pod_ingress
check pod_show_xdp sh -c "$PI -N $X -j pod show xp-a | jq -e '.xdp.prog_id > 0'"
prog_a=$(pi -N $X -j pod show xp-a | jq .xdp.prog_id)
prog_b=$(pi -N $X -j pod show xp-b | jq .xdp.prog_id)

# The ACL is held by a link in the node's pins. Root in the pod owns eth0
# and may run ip there, but can neither take the ACL off nor put its own
# program in its place (tc leaves the node stack's packets to the ACL);
# every check below runs after these attempts.
XPA_LINK=/sys/fs/bpf/podinject/$X/link_xdp_pod_$(pi -N $X -j pod show xp-a | jq .host_ifindex)
expect_eq acl_held_by_link "$(bpftool link show pinned $XPA_LINK -j | jq .prog_id)" "$prog_a"
check_fails pod_root_cannot_detach in_ns xp-a ip link set dev eth0 xdp off
check_fails pod_root_cannot_replace in_ns xp-a ip -force link set dev eth0 xdpdrv obj "$BUILD/xdp.bpf.o" sec xdp
check_fails pod_root_cannot_add_generic in_ns xp-a ip -force link set dev eth0 xdpgeneric obj "$BUILD/xdp.bpf.o" sec xdp
expect_eq acl_kept_on_eth0 "$(ip -n xp-a -j link show eth0 | jq '.[0].xdp.prog.id')" "$prog_a"
check pod_check_acl pi -N $X pod check xp-a

# Paths warm (neighbours on the wire resolved) before anything is counted.
for i in 1 2 3 4 5; do
	in_ns xp-r ping -c 1 -W 1 $A4 >/dev/null 2>&1 &&
	in_ns xp-r ping -6 -c 1 -W 1 $A6 >/dev/null 2>&1 && break
done
check ping_local in_ns xp-b ping -c 1 -W 2 $A4
check ping_uplink_v4 in_ns xp-r ping -c 1 -W 2 $A4
check ping_uplink_v6 in_ns xp-r ping -6 -c 1 -W 2 $A6
check ping_stack in_ns $X ping -c 1 -W 2 -I $NODE4 $A4

# The XDP way routes too: xp-y takes one off the TTL, xp-x's xdp_uplink
# another, so 2 arrives with none left and goes the tc way, which drops
# it as ttl; 3 reaches the pod through XDP_REDIRECT.
xdp_ttl() { pi -N $X -j pod show xp-a | jq .xdp.uplink_redirects; }
t0=$(pod_stat $X xp-a .drops.ttl); u0=$(xdp_ttl)
# (the sender's TTL by sysctl, not ping -t: busybox's ping, the lab's,
# keeps the hop limit of IPv6 as it is)
ttl_of_r() { in_ns xp-r sysctl -qw net.ipv4.ip_default_ttl=$1 net.ipv6.conf.eth0.hop_limit=$1; }
ttl_of_r 2
check ttl_2_not_delivered_v4 sh -c "! ip netns exec xp-r ping -c 1 -W 1 $A4 >/dev/null"
check ttl_2_not_delivered_v6 sh -c "! ip netns exec xp-r ping -6 -c 1 -W 1 $A6 >/dev/null"
expect_num ttl_2_dropped_as_ttl "$(sub "$(pod_stat $X xp-a .drops.ttl)" "$t0")" 2
ttl_of_r 3
check ttl_3_delivered_v4 in_ns xp-r ping -c 1 -W 2 $A4
check ttl_3_delivered_v6 in_ns xp-r ping -6 -c 1 -W 2 $A6
expect_num ttl_3_xdp_redirected "$(sub "$(xdp_ttl)" "$u0")" 2
ttl_of_r 64

rule() {	# rule ARGS...: adds an ingress rule to xp-a, prints its id
	pi -N $X -j policy add xp-a ingress "$@" | jq .id
}
r_local=$(rule deny from 10.244.0.11/32 proto udp port 7001)
r_up4=$(rule deny from 10.244.1.10/32 proto udp port 7001)
r_up6=$(rule deny from fd00:1::a/128 proto udp port 7001)
r_stack=$(rule deny from $NODE4/32 proto udp port 7001)
r_allow=$(rule allow from 10.244.0.0/16 proto udp port 7002)
r_allow_stack=$(rule allow from $NODE4/32 proto udp port 7002)
r_allow6=$(rule allow from fd00:1::/64 proto udp port 7002)
rule_pk() { pi -N $X -j policy list xp-a | jq ".[] | select(.id == $1) | .packets"; }
xdp_stat() { pi -N $X -j pod show xp-a | jq ".xdp.$1"; }
drops() { pod_stat $X xp-a .drops[\"ingress-policy\"]; }

# send FROM SRC DST PORT: COUNT datagrams, then a moment for the veth NAPI
# the XDP path goes through to finish.
send() {
	in_ns "$1" "$PINET" udp-send --bind "$2" "$3" "$4" $COUNT >/dev/null
	sleep 0.2
}

# Denied, one way in at a time; counters read in between say where each
# packet was dropped.
in_ns xp-a "$PINET" udp-recv 7001 1000 6000 >/tmp/xp$$.d4 &
rd4=$!
in_ns xp-a "$PINET" udp-recv -6 7001 1000 6000 >/tmp/xp$$.d6 &
rd6=$!
sleep 0.3
d0=$(drops); x0=$(xdp_stat acl_drops); u0=$(xdp_stat uplink_redirects)
send xp-b 10.244.0.11 $A4 7001
d1=$(drops); x1=$(xdp_stat acl_drops); u1=$(xdp_stat uplink_redirects)
expect_eq local_denied_at_tc "$((d1 - d0)) $((x1 - x0))" "$COUNT 0"
expect_eq local_rule_counted "$(rule_pk $r_local)" $COUNT

send xp-r 10.244.1.10 $A4 7001
d2=$(drops); x2=$(xdp_stat acl_drops); u2=$(xdp_stat uplink_redirects)
expect_eq uplink_v4_denied_in_xdp "$((d2 - d1)) $((x2 - x1))" "$COUNT $COUNT"
expect_eq uplink_v4_xdp_redirected "$((u2 - u1))" $COUNT
expect_eq uplink_v4_rule_counted "$(rule_pk $r_up4)" $COUNT

send xp-r fd00:1::a $A6 7001
d3=$(drops); x3=$(xdp_stat acl_drops); u3=$(xdp_stat uplink_redirects)
expect_eq uplink_v6_denied_in_xdp "$((d3 - d2)) $((x3 - x2))" "$COUNT $COUNT"
expect_eq uplink_v6_xdp_redirected "$((u3 - u2))" $COUNT
expect_eq uplink_v6_rule_counted "$(rule_pk $r_up6)" $COUNT

send $X $NODE4 $A4 7001
d4=$(drops); x4=$(xdp_stat acl_drops); u4=$(xdp_stat uplink_redirects)
expect_eq stack_denied_in_xdp "$((d4 - d3)) $((x4 - x3)) $((u4 - u3))" "$COUNT $COUNT 0"
expect_eq stack_rule_counted "$(rule_pk $r_stack)" $COUNT

# Injected as xp-b: xp-b's egress, then xp-a's ingress ACL at tc.
check inject_allow pi -N $X inject allow xp-c --as xp-b
send xp-c 10.244.0.11 $A4 7001
d5=$(drops); x5=$(xdp_stat acl_drops)
expect_eq injected_denied_at_tc "$((d5 - d4)) $((x5 - x4))" "$COUNT 0"
expect_eq injected_rule_counted "$(rule_pk $r_local)" $((2 * COUNT))

wait $rd4 $rd6
expect_eq denied_none_arrived_v4 "$(head -n 1 /tmp/xp$$.d4)" "received 0"
expect_eq denied_none_arrived_v6 "$(head -n 1 /tmp/xp$$.d6)" "received 0"

# Allowed: every datagram arrives, each allow rule counts each once.
in_ns xp-a "$PINET" udp-recv 7002 $((3 * COUNT)) 6000 >/tmp/xp$$.a4 &
ra4=$!
in_ns xp-a "$PINET" udp-recv -6 7002 $COUNT 6000 >/tmp/xp$$.a6 &
ra6=$!
sleep 0.3
u5=$(xdp_stat uplink_redirects)
send xp-b 10.244.0.11 $A4 7002
send xp-r 10.244.1.10 $A4 7002
send xp-r fd00:1::a $A6 7002
send $X $NODE4 $A4 7002
wait $ra4 $ra6
expect_eq allowed_v4_all_arrived "$(head -n 1 /tmp/xp$$.a4)" "received $((3 * COUNT))"
expect_eq allowed_v6_all_arrived "$(head -n 1 /tmp/xp$$.a6)" "received $COUNT"
check allowed_from_local grep -q "from 10.244.0.11 count $COUNT" /tmp/xp$$.a4
check allowed_from_uplink grep -q "from 10.244.1.10 count $COUNT" /tmp/xp$$.a4
check allowed_from_stack grep -q "from $NODE4 count $COUNT" /tmp/xp$$.a4
expect_eq allow_rule_counted_once "$(rule_pk $r_allow)" $((2 * COUNT))
expect_eq allow_stack_rule_counted_once "$(rule_pk $r_allow_stack)" $COUNT
expect_eq allow_v6_rule_counted_once "$(rule_pk $r_allow6)" $COUNT
expect_eq allowed_uplink_xdp_redirected "$(($(xdp_stat uplink_redirects) - u5))" $((2 * COUNT))
expect_eq drops_total "$(drops)" $((5 * COUNT))
rm -f /tmp/xp$$.*

# TCP through both XDP paths, intact (GRO, frames built from XDP).
tcp_to_a() {	# tcp_to_a FROM_NS [--bind SRC]
	local from=$1
	shift
	in_ns xp-a "$PINET" tcp-server 7100 --count 1 --sink --timeout 6000 >/tmp/xp$$.srv &
	local s=$!
	wait_tcp_listen xp-a 7100 >/dev/null
	in_ns "$from" "$PINET" tcp-connect "$@" --timeout 4000 $A4 7100 --send 2000000 >/dev/null || return 1
	wait $s
	grep -q "conn-done bytes 2000000" /tmp/xp$$.srv
}
check tcp_from_uplink tcp_to_a xp-r
check tcp_from_stack tcp_to_a $X --bind $NODE4
rm -f /tmp/xp$$.srv

# A peer that leaves checksums to offload (a veth): its frames cannot be
# redirected as XDP frames, they go the tc way and still arrive, checked
# once at tc.
check wire_partial_checksums ethtool_y on
in_ns xp-a "$PINET" udp-recv 7002 $COUNT 6000 >/tmp/xp$$.p &
rp=$!
sleep 0.3
u6=$(xdp_stat uplink_redirects); a6=$(rule_pk $r_allow)
send xp-r 10.244.1.10 $A4 7002
wait $rp
expect_eq partial_csum_all_arrived "$(head -n 1 /tmp/xp$$.p)" "received $COUNT"
expect_eq partial_csum_not_redirected "$(($(xdp_stat uplink_redirects) - u6))" 0
expect_eq partial_csum_rule_counted_once "$(($(rule_pk $r_allow) - a6))" $COUNT
check tcp_from_uplink_partial_csum tcp_to_a xp-r
rm -f /tmp/xp$$.*

# netkit has no XDP: such pods keep tc enforcement only.
if [ "$(pi -j features | jq -r .netkit)" = true ]; then
	check pod_netkit pi -N $X pod add xp-k --ip 10.244.0.13 --dev netkit
	check netkit_no_xdp sh -c "$PI -N $X -j pod show xp-k | jq -e '.xdp == null'"
else
	skip pod_netkit "no netkit on this kernel"
	skip netkit_no_xdp "no netkit on this kernel"
fi

# Nothing left: the ACL goes with pod del, the uplink's with node down.
XPB_IFINDEX=$($PI -N $X -j pod show xp-b | jq .host_ifindex)
# An ACL taken off by someone who may (CAP_SYS_ADMIN, by its link) is
# found by pod check.
check acl_detached_by_admin bpftool link detach pinned /sys/fs/bpf/podinject/$X/link_xdp_pod_$XPB_IFINDEX
check_fails pod_check_acl_gone pi -N $X pod check xp-b
check pod_del_b pi -N $X pod del xp-b
check pod_del_prog_gone prog_gone $prog_b
check pod_del_pin_gone test ! -e /sys/fs/bpf/podinject/$X/prog_xdp_pod_$XPB_IFINDEX
check pod_del_link_pin_gone test ! -e /sys/fs/bpf/podinject/$X/link_xdp_pod_$XPB_IFINDEX
check down_x pi -N $X node down
check down_y pi -N $Y node down
check down_uplink_xdp_detached no_xdp $X wire0
check down_acl_prog_gone prog_gone $prog_a
check down_pins_gone test ! -e /sys/fs/bpf/podinject/$X
expect_eq down_no_tcx_links "$(tcx_links)" "$links_before"
ip netns del $X
ip netns del $Y
