#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# One node, three pods, ip_forward off: only the BPF datapath can deliver.
#
#   a 10.244.0.10 fd00::a --+
#   b 10.244.0.11 fd00::b --+-- node n (pod_egress: source check, policy,
#   c 10.244.0.12 fd00::c --+   bpf_redirect_peer)
#
# c also tries to send with a's address (spoofing). Names carry the
# suite's prefix (ni-, or nc- when t_node_clsact.sh runs it).
. "$(dirname "$0")/lib.sh"
require_root
EXPECT=62
PREFIX=${PREFIX:-ni-}
N=${PREFIX}n

check up node_up $N ${NODE_ARGS:-}
in_ns $N sysctl -qw net.ipv4.ip_forward=0 net.ipv6.conf.all.forwarding=0
# The mode a node picks on its own is what this kernel is known to have
# (tests/kernels.txt), not what the probe says: the probe decides it.
want_attach=${WANT_ATTACH:-$("$ROOT/tests/known-features.sh" attach)}
if [ -n "$want_attach" ]; then
	expect_eq attach_mode "$(pi -N $N -j node show | jq -r .attach)" "$want_attach"
else
	skip attach_mode "kernel $(uname -r) is not in tests/kernels.txt"
fi
check pod_add_a pi -N $N pod add ${PREFIX}a --ip 10.244.0.10 --ip6 fd00::a
check pod_add_b pi -N $N pod add ${PREFIX}b --ip 10.244.0.11/32 --ip6 fd00::b/128
check pod_add_c pi -N $N pod add ${PREFIX}c --ip 10.244.0.12 --ip6 fd00::c
expect_eq forward_off "$(in_ns $N sysctl -n net.ipv4.ip_forward)" 0

check ping_v4 in_ns ${PREFIX}a ping -c 2 -W 2 -i 0.2 10.244.0.11
check ping_v6 in_ns ${PREFIX}a ping -6 -c 2 -W 2 -i 0.2 fd00::b

tcp_pair() {	# tcp_pair FAMILY_FLAG SERVER_POD ADDR
	local flag=$1 srv=$2 addr=$3 res
	in_ns "$srv" "$PINET" tcp-server $flag 7000 --count 1 --sink --timeout 5000 >/tmp/$PREFIX$$.srv &
	wait_tcp_listen "$srv" 7000 >/dev/null
	res=$(in_ns ${PREFIX}a "$PINET" tcp-connect $flag --timeout 3000 "$addr" 7000 --send 1000000) || return 1
	wait $!
	grep -q "conn-done bytes 1000000" /tmp/$PREFIX$$.srv || { cat /tmp/$PREFIX$$.srv; return 1; }
	rm -f /tmp/$PREFIX$$.srv
}
check tcp_v4 tcp_pair "" ${PREFIX}b 10.244.0.11
check tcp_v6 tcp_pair -6 ${PREFIX}b fd00::b

# Counters: 25 datagrams from a to b move a's egress counter by exactly
# 25 and b's ingress by exactly 25. b's pod-wide ingress counter also sees
# the host side's own multicast (MLD) now and then, so an allow rule for
# exactly these datagrams counts them there.
rule_pk() { pi -N $N -j policy list "$1" | jq ".[] | select(.id == $2) | .packets"; }
r=$(pi -N $N -j policy add ${PREFIX}b ingress allow from 10.244.0.10/32 proto udp port 7002 | jq .id)
in_ns ${PREFIX}b "$PINET" udp-recv 7002 25 3000 >/tmp/$PREFIX$$.udp &
check counters_receiver_listens wait_udp_listen ${PREFIX}b 7002
eg0=$(pod_stat $N ${PREFIX}a .egress_packets)
sent=$(in_ns ${PREFIX}a "$PINET" udp-send 10.244.0.11 7002 25)
wait $!
expect_eq counters_traffic "$sent, $(head -n 1 /tmp/$PREFIX$$.udp)" "sent 25, received 25"
expect_num counters_egress_exact "$(sub "$(pod_stat $N ${PREFIX}a .egress_packets)" "$eg0")" 25
expect_num counters_ingress_rule_exact "$(rule_pk ${PREFIX}b "$r")" 25
pi -N $N policy del ${PREFIX}b ingress all >/dev/null

# Spoofing: c sends with a's source address; b must receive nothing, and
# c's spoof counter counts every datagram.
# "Not delivered" means something only with a listener, datagrams sent
# and a drop counter that moved by as many.
in_ns ${PREFIX}b "$PINET" udp-recv 7001 10 1500 >/tmp/$PREFIX$$.udp &
check spoof_receiver_listens wait_udp_listen ${PREFIX}b 7001
sent=$(in_ns ${PREFIX}c "$PINET" udp-send --bind 10.244.0.10 10.244.0.11 7001 10)
wait $!
expect_eq spoof_not_delivered "$sent, $(head -n 1 /tmp/$PREFIX$$.udp)" "sent 10, received 0"
expect_eq spoof_counted "$(pod_stat $N ${PREFIX}c .drops.spoofed)" 10
in_ns ${PREFIX}b "$PINET" udp-recv -6 7001 10 1500 >/tmp/$PREFIX$$.udp &
check spoof_v6_receiver_listens wait_udp_listen ${PREFIX}b 7001 -6
sent=$(in_ns ${PREFIX}c "$PINET" udp-send -6 --bind fd00::a fd00::b 7001 10)
wait $!
expect_eq spoof_v6_not_delivered "$sent, $(head -n 1 /tmp/$PREFIX$$.udp)" "sent 10, received 0"
expect_eq spoof_v6_counted "$(pod_stat $N ${PREFIX}c .drops.spoofed)" 20
rm -f /tmp/$PREFIX$$.udp

# Policy: a may not reach c on TCP 7000 (nor c's v6 address at all);
# everything else still works. Counters count the denied packets.
id1=$(pi -N $N -j policy add ${PREFIX}a deny to 10.244.0.12/32 proto tcp port 7000 | jq .id)
id2=$(pi -N $N -j policy add ${PREFIX}a egress deny to fd00::c/128 | jq .id)
check policy_listed test "$(pi -N $N -j policy list ${PREFIX}a | jq length)" = 2
# c listens on 7000, so without the rule the connection would succeed;
# with it the SYNs vanish: a timeout, not a refusal.
ip netns exec ${PREFIX}c "$PINET" tcp-server 7000 --count 1 --timeout 3000 >/dev/null 2>&1 &
srv=$!
check policy_denied_tcp_listener wait_tcp_listen ${PREFIX}c 7000
expect_eq policy_denied_tcp "$(in_ns ${PREFIX}a "$PINET" tcp-connect --timeout 1000 10.244.0.12 7000 2>/dev/null)" timeout
kill $srv 2>/dev/null
wait $srv 2>/dev/null
check_fails policy_denied_v6 in_ns ${PREFIX}a ping -6 -c 1 -W 1 fd00::c
check policy_other_dest in_ns ${PREFIX}a ping -c 1 -W 2 10.244.0.12
check policy_other_pod tcp_pair "" ${PREFIX}b 10.244.0.11
# Exact counts: 5 SYNs (one each: no retransmission within 200 ms) and one
# echo request, each denied once by its rule.
pk0=$(rule_pk ${PREFIX}a "$id1")
pk2=$(rule_pk ${PREFIX}a "$id2")
pd0=$(pod_stat $N ${PREFIX}a .drops.policy)
sent=$(in_ns ${PREFIX}a "$PINET" tcp-syn --bind 10.244.0.10 --timeout 200 10.244.0.12 7000 5 2>/dev/null)
in_ns ${PREFIX}a ping -6 -c 1 -W 1 fd00::c >/dev/null 2>&1
expect_eq policy_syns_sent "$sent" "sent 5"
expect_num policy_rule_counted "$(sub "$(rule_pk ${PREFIX}a "$id1")" "$pk0")" 5
expect_num policy_v6_rule_counted "$(sub "$(rule_pk ${PREFIX}a "$id2")" "$pk2")" 1
expect_num policy_drops_counted "$(sub "$(pod_stat $N ${PREFIX}a .drops.policy)" "$pd0")" 6
check policy_del pi -N $N policy del ${PREFIX}a "$id1"
check policy_del_restores tcp_pair "" ${PREFIX}c 10.244.0.12
check policy_del_v6 pi -N $N policy del ${PREFIX}a egress "$id2"
check policy_del_v6_restores in_ns ${PREFIX}a ping -6 -c 1 -W 2 fd00::c

# Rules that cannot be read fail the commands that show them, with the
# reason: an empty list would tell the one explaining a drop that no rule
# of the pod made it, and an export would lose the rule on its apply.
# a's egress reference is made to name slots past the table's end (a
# failing read), then put back.
id3=$(pi -N $N -j policy add ${PREFIX}a deny to 10.244.0.99/32 | jq .id)
a_key=$(printf '%08x' $(( $(pi -N $N -j pod show ${PREFIX}a | jq .id) * 2 )) |
	sed -E 's/(..)(..)(..)(..)/\4 \3 \2 \1/')
refs_pin="$(node_pin_dir $N)/policy_refs"
ref_was=$(bpftool -j map lookup pinned "$refs_pin" key hex $a_key | jq -r '.value | join(" ")')
bpftool map update pinned "$refs_pin" key hex $a_key value 0xfe 0xff 0x05 0x00 \
	$(echo "$ref_was" | cut -d' ' -f5-8)
fails_saying() {	# fails_saying TEXT CMD...: exits non-zero and says TEXT
	local text=$1 out
	shift
	out=$("$@" 2>&1 >/dev/null) && { echo "exit 0"; return; }
	echo "$out" | grep -q -- "$text" && echo failed || echo "said: $out"
}
expect_eq policy_unreadable_list "$(fails_saying 'cannot read its egress rules' pi -N $N policy list ${PREFIX}a)" failed
expect_eq policy_unreadable_list_all "$(fails_saying 'cannot read its egress rules' pi -N $N -j policy list)" failed
expect_eq policy_unreadable_export "$(fails_saying "pod '${PREFIX}a': cannot read its egress rules" pi -N $N export)" failed
bpftool map update pinned "$refs_pin" key hex $a_key value $ref_was
expect_eq policy_readable_again "$(pi -N $N -j policy list ${PREFIX}a | jq -c '[.[].id]')" "[$id3]"
pi -N $N policy del ${PREFIX}a "$id3"

# JSON for every list and show
check json_pod_list sh -c "$PI -N $N -j pod list | jq -e 'length == 3'"
check json_pod_show sh -c "$PI -N $N -j pod show ${PREFIX}a | jq -e '.ipv6 == \"fd00::a\"'"
check json_node_show sh -c "$PI -N $N -j node show | jq -e '.pods == 3'"
check json_policy_list sh -c "$PI -N $N -j policy list | jq -e 'length == 0'"

# pod del and node down leave nothing behind
# Pins are named by the host side's ifindex: seen before, gone after.
c_ifx=$(pi -N $N -j pod show ${PREFIX}c | jq -r .host_ifindex)
c_pins() { ls /sys/fs/bpf/podinject/$N | grep -c "_${c_ifx}\(_\|$\)"; }
check pod_del_pins_before test "$(c_pins)" -gt 0
check pod_del pi -N $N pod del ${PREFIX}c
check pod_del_netns_gone sh -c "! ip netns list | grep -qw ${PREFIX}c"
check pod_del_dev_gone sh -c "! ip -n $N link show pi-${PREFIX}c 2>/dev/null"
expect_eq pod_del_pins_gone "$(c_pins)" 0
check pod_del_endpoint_gone sh -c "$PI -N $N -j pod list | jq -e 'length == 2'"
# pod del took c's programs off its host side; node down takes the rest.
# Links (tcx) and cls_bpf filters (clsact) are both counted, and first
# seen where the mode puts them, so that "0 left" is not 0 == 0.
mode=$(pi -N $N -j node show | jq -r .attach)
ids=$(node_prog_ids $N)
expect_hooked down_hooked_before "$mode" $ids
check down pi -N $N node down
check down_netns_gone sh -c "! ip netns list | grep -E -q '^(${PREFIX}n|${PREFIX}a|${PREFIX}b)( |$)'"
check down_pins_gone test ! -e /sys/fs/bpf/podinject/$N
expect_unhooked down_no_links_left $ids

# The same in a namespace the node adopted (kept by node down, with its
# uplink): nothing of the node may stay on its devices.
ip netns add ${PREFIX}m
ip -n ${PREFIX}m link add up0 type veth peer name up1
ip -n ${PREFIX}m link set up0 up
check adopted_up node_up ${PREFIX}m --uplink up0 ${NODE_ARGS:-}
check adopted_pod pi -N ${PREFIX}m pod add ${PREFIX}d --ip 10.244.0.13
ids=$(node_prog_ids ${PREFIX}m)
expect_hooked adopted_hooked_before "$mode" $ids
check adopted_down pi -N ${PREFIX}m node down
check adopted_netns_kept ip netns exec ${PREFIX}m true
expect_unhooked adopted_no_links_left $ids
# The uplink's clsact qdisc, when node up made it (clsact), goes with node
# down (before, it stayed, empty); a tcx node makes none. One that was
# there before node up stays, as does one that another program's filter
# came onto meanwhile, with that filter, whatever the mode.
uplink_qdiscs() { tc -n ${PREFIX}m qdisc show dev up0 | grep -c clsact; }
expect_eq adopted_uplink_qdisc_gone "$(uplink_qdiscs)" 0
tc -n ${PREFIX}m qdisc add dev up0 clsact
node_up ${PREFIX}m --uplink up0 ${NODE_ARGS:-}
pi -N ${PREFIX}m node down >/dev/null
expect_eq adopted_uplink_qdisc_theirs_kept "$(uplink_qdiscs)" 1
tc -n ${PREFIX}m qdisc del dev up0 clsact
node_up ${PREFIX}m --uplink up0 ${NODE_ARGS:-}
fpin=/sys/fs/bpf/${PREFIX}foreign
rm -rf "$fpin"; mkdir -p "$fpin"
"$BUILD/tcx-attach" attach-tc "$BUILD/foreign.bpf.o" foreign_count ${PREFIX}m up0 egress "$fpin" 7
pi -N ${PREFIX}m node down >/dev/null
expect_eq adopted_uplink_qdisc_shared_kept "$(uplink_qdiscs) $(tc -n ${PREFIX}m filter show dev up0 egress | grep -c foreign_count)" "1 1"
rm -rf "$fpin"
ip netns del ${PREFIX}m
