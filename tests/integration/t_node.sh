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
PREFIX=${PREFIX:-ni-}
N=${PREFIX}n

check up node_up $N ${NODE_ARGS:-}
in_ns $N sysctl -qw net.ipv4.ip_forward=0 net.ipv6.conf.all.forwarding=0
expect_eq attach_mode "$(pi -N $N -j node show | jq -r .attach)" "${WANT_ATTACH:-$(pi -j features | jq -r .attach)}"
check pod_add_a pi -N $N pod add ${PREFIX}a --ip 10.244.0.10 --ip6 fd00::a
check pod_add_b pi -N $N pod add ${PREFIX}b --ip 10.244.0.11/32 --ip6 fd00::b/128
check pod_add_c pi -N $N pod add ${PREFIX}c --ip 10.244.0.12 --ip6 fd00::c
expect_eq forward_off "$(in_ns $N sysctl -n net.ipv4.ip_forward)" 0

check ping_v4 in_ns ${PREFIX}a ping -c 2 -W 2 -i 0.2 10.244.0.11
check ping_v6 in_ns ${PREFIX}a ping -6 -c 2 -W 2 -i 0.2 fd00::b

tcp_pair() {	# tcp_pair FAMILY_FLAG SERVER_POD ADDR
	local flag=$1 srv=$2 addr=$3 res
	in_ns "$srv" "$PINET" tcp-server $flag 7000 --count 1 --sink --timeout 5000 >/tmp/$PREFIX$$.srv &
	sleep 0.3
	res=$(in_ns ${PREFIX}a "$PINET" tcp-connect $flag --timeout 3000 "$addr" 7000 --send 1000000) || return 1
	wait $!
	grep -q "conn-done bytes 1000000" /tmp/$PREFIX$$.srv || { cat /tmp/$PREFIX$$.srv; return 1; }
	rm -f /tmp/$PREFIX$$.srv
}
check tcp_v4 tcp_pair "" ${PREFIX}b 10.244.0.11
check tcp_v6 tcp_pair -6 ${PREFIX}b fd00::b

# Counters: a's egress and b's ingress saw the traffic.
eg=$(pod_stat $N ${PREFIX}a .egress_packets)
ig=$(pod_stat $N ${PREFIX}b .ingress_packets)
check counters_moved test "$eg" -gt 10 -a "$ig" -gt 10

# Spoofing: c sends with a's source address; b must receive nothing, and
# c's spoof counter counts every datagram.
in_ns ${PREFIX}b "$PINET" udp-recv 7001 10 1500 >/tmp/$PREFIX$$.udp &
sleep 0.3
in_ns ${PREFIX}c "$PINET" udp-send --bind 10.244.0.10 10.244.0.11 7001 10 >/dev/null
wait $!
expect_eq spoof_not_delivered "$(head -n 1 /tmp/$PREFIX$$.udp)" "received 0"
expect_eq spoof_counted "$(pod_stat $N ${PREFIX}c .drops.spoofed)" 10
in_ns ${PREFIX}b "$PINET" udp-recv -6 7001 10 1500 >/tmp/$PREFIX$$.udp &
sleep 0.3
in_ns ${PREFIX}c "$PINET" udp-send -6 --bind fd00::a fd00::b 7001 10 >/dev/null
wait $!
expect_eq spoof_v6_not_delivered "$(head -n 1 /tmp/$PREFIX$$.udp)" "received 0"
expect_eq spoof_v6_counted "$(pod_stat $N ${PREFIX}c .drops.spoofed)" 20
rm -f /tmp/$PREFIX$$.udp

# Policy: a may not reach c on TCP 7000 (nor c's v6 address at all);
# everything else still works. Counters count the denied packets.
id1=$(pi -N $N -j policy add ${PREFIX}a deny to 10.244.0.12/32 proto tcp port 7000 | jq .id)
id2=$(pi -N $N -j policy add ${PREFIX}a egress deny to fd00::c/128 | jq .id)
check policy_listed test "$(pi -N $N -j policy list ${PREFIX}a | jq length)" = 2
check_fails policy_denied_tcp in_ns ${PREFIX}a "$PINET" tcp-connect --timeout 1000 10.244.0.12 7000
check_fails policy_denied_v6 in_ns ${PREFIX}a ping -6 -c 1 -W 1 fd00::c
check policy_other_dest in_ns ${PREFIX}a ping -c 1 -W 2 10.244.0.12
check policy_other_pod tcp_pair "" ${PREFIX}b 10.244.0.11
rule_pk=$(pi -N $N -j policy list ${PREFIX}a | jq ".[] | select(.id == $id1) | .packets")
check policy_rule_counted test "$rule_pk" -ge 1
check policy_drops_counted test "$(pod_stat $N ${PREFIX}a .drops.policy)" -ge 2
check policy_del pi -N $N policy del ${PREFIX}a "$id1"
check policy_del_restores tcp_pair "" ${PREFIX}c 10.244.0.12
check policy_del_v6 pi -N $N policy del ${PREFIX}a egress "$id2"
check policy_del_v6_restores in_ns ${PREFIX}a ping -6 -c 1 -W 2 fd00::c

# JSON for every list and show
check json_pod_list sh -c "$PI -N $N -j pod list | jq -e 'length == 3'"
check json_pod_show sh -c "$PI -N $N -j pod show ${PREFIX}a | jq -e '.ipv6 == \"fd00::a\"'"
check json_node_show sh -c "$PI -N $N -j node show | jq -e '.pods == 3'"
check json_policy_list sh -c "$PI -N $N -j policy list | jq -e 'length == 0'"

# pod del and node down leave nothing behind
check pod_del pi -N $N pod del ${PREFIX}c
check pod_del_netns_gone sh -c "! ip netns list | grep -qw ${PREFIX}c"
check pod_del_dev_gone sh -c "! ip -n $N link show pi-${PREFIX}c 2>/dev/null"
check pod_del_pins_gone sh -c "! ls /sys/fs/bpf/podinject/$N | grep -q ${PREFIX}c"
check pod_del_endpoint_gone sh -c "$PI -N $N -j pod list | jq -e 'length == 2'"
ids=$(node_prog_ids $N)
check down pi -N $N node down
check down_netns_gone sh -c "! ip netns list | grep -E -q '^(${PREFIX}n|${PREFIX}a|${PREFIX}b)( |$)'"
check down_pins_gone test ! -e /sys/fs/bpf/podinject/$N
expect_eq down_no_links_left "$(links_of_progs $ids)" 0
