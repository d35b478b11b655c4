#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Two nodes joined by a veth wire, ip_forward off on both:
#
#   tw-a 10.244.0.10 fd00::a            tw-b 10.244.1.10 fd00:1::a
#        |                                    |
#   node tw-x --- wire0 192.168.77.1 === 192.168.77.2 wire0 --- node tw-y
#
# pod -> pod_egress -> bpf_redirect_neigh(wire0) -> wire -> uplink_ingress
# -> bpf_redirect_peer -> pod; and back the same way.
. "$(dirname "$0")/lib.sh"
require_root
EXPECT=31
PREFIX=tw-
X=tw-x
Y=tw-y

make_wire $X $Y
for n in $X $Y; do
	in_ns $n sysctl -qw net.ipv4.ip_forward=0 net.ipv6.conf.all.forwarding=0
done
check up_x node_up $X --uplink wire0
check up_y node_up $Y --uplink wire0
check pod_a pi -N $X pod add tw-a --ip 10.244.0.10 --ip6 fd00::a
check pod_b pi -N $Y pod add tw-b --ip 10.244.1.10 --ip6 fd00:1::a
check pod_a2 pi -N $X pod add tw-a2 --ip 10.244.0.11 --ip6 fd00::b

check ping_v4 in_ns tw-a ping -c 2 -W 2 -i 0.2 10.244.1.10
check ping_v6 in_ns tw-a ping -6 -c 2 -W 2 -i 0.2 fd00:1::a
check ping_node_addr in_ns tw-a ping -c 1 -W 2 192.168.77.1

in_ns tw-b "$PINET" tcp-server 7100 --count 2 --sink --timeout 8000 >/tmp/tw$$.srv &
srv=$!
wait_tcp_listen tw-b 7100 >/dev/null
check tcp_v4 in_ns tw-a "$PINET" tcp-connect --timeout 3000 10.244.1.10 7100 --send 2000000
check tcp_v4_second_pod in_ns tw-a2 "$PINET" tcp-connect --timeout 3000 10.244.1.10 7100 --send 1000
wait $srv
check tcp_v4_server_saw_pod_source grep -q "accept 10.244.0.10 " /tmp/tw$$.srv
in_ns tw-b "$PINET" tcp-server -6 7101 --count 1 --sink --timeout 8000 >/tmp/tw$$.srv &
srv=$!
wait_tcp_listen tw-b 7101 >/dev/null
check tcp_v6 in_ns tw-a "$PINET" tcp-connect -6 --timeout 3000 fd00:1::a 7101 --send 2000000
wait $srv
check tcp_v6_intact grep -q "conn-done bytes 2000000" /tmp/tw$$.srv
rm -f /tmp/tw$$.srv

# The wire carried the traffic: 20 datagrams from tw-a reach tw-b through
# x's uplink and y's uplink_ingress, counted by an allow rule for exactly
# them at tw-b's ingress (the pod-wide counter also sees MLD).
rule_pk() { pi -N "$1" -j policy list "$2" | jq ".[] | select(.id == $3) | .packets"; }
r=$(pi -N $Y -j policy add tw-b ingress allow from 10.244.0.10/32 proto udp port 7200 | jq .id)
in_ns tw-b "$PINET" udp-recv 7200 20 3000 >/tmp/tw$$.udp &
check uplink_receiver_listens wait_udp_listen tw-b 7200
sent=$(in_ns tw-a "$PINET" udp-send 10.244.1.10 7200 20)
wait $!
expect_eq uplink_delivered "$sent, $(head -n 1 /tmp/tw$$.udp)" "sent 20, received 20"
expect_num uplink_delivered_counted "$(rule_pk $Y tw-b "$r")" 20

# Spoofed towards the uplink: tw-a sends as 10.244.0.99 (no pod's) and as
# tw-a2 to tw-b on the other node; nothing leaves x, tw-a's spoof counter
# counts every datagram, and tw-b's rule for spoofed sources sees none.
r2=$(pi -N $Y -j policy add tw-b ingress allow from 10.244.0.0/24 proto udp port 7201 | jq .id)
in_ns tw-b "$PINET" udp-recv 7201 20 1500 >/tmp/tw$$.udp &
check spoof_receiver_listens wait_udp_listen tw-b 7201
sp0=$(pod_stat $X tw-a .drops.spoofed)
sent=$(in_ns tw-a "$PINET" udp-send --bind 10.244.0.99 10.244.1.10 7201 10)
sent2=$(in_ns tw-a "$PINET" udp-send --bind 10.244.0.11 10.244.1.10 7201 10)
wait $!
expect_eq spoof_to_uplink_not_delivered "$sent, $sent2, $(head -n 1 /tmp/tw$$.udp)" "sent 10, sent 10, received 0"
expect_num spoof_to_uplink_counted "$(sub "$(pod_stat $X tw-a .drops.spoofed)" "$sp0")" 20
expect_num spoof_to_uplink_never_reached "$(rule_pk $Y tw-b "$r2")" 0
in_ns tw-b "$PINET" udp-recv -6 7201 10 1500 >/tmp/tw$$.udp &
check spoof_v6_receiver_listens wait_udp_listen tw-b 7201 -6
sp0=$(pod_stat $X tw-a .drops.spoofed)
sent=$(in_ns tw-a "$PINET" udp-send -6 --bind fd00::99 fd00:1::a 7201 10)
wait $!
expect_eq spoof_v6_to_uplink_not_delivered "$sent, $(head -n 1 /tmp/tw$$.udp)" "sent 10, received 0"
expect_num spoof_v6_to_uplink_counted "$(sub "$(pod_stat $X tw-a .drops.spoofed)" "$sp0")" 10
pi -N $Y policy del tw-b ingress all >/dev/null
rm -f /tmp/tw$$.udp
check json_uplink sh -c "$PI -N $X -j node show | jq -e '.uplink.name == \"wire0\"'"

# A policy on x's pod holds across nodes too.
id=$(pi -N $X -j policy add tw-a deny to 10.244.1.0/24 proto icmp | jq .id)
check_fails policy_cross_node in_ns tw-a ping -c 1 -W 1 10.244.1.10
check policy_cross_node_v6_unaffected in_ns tw-a ping -6 -c 1 -W 2 fd00:1::a
pi -N $X policy del tw-a "$id" >/dev/null

ids=$(node_prog_ids $X; node_prog_ids $Y)
expect_hooked hooked_before_down "$(pi -N $X -j node show | jq -r .attach)" $ids
check down_x pi -N $X node down
check down_y pi -N $Y node down
check down_keeps_adopted_netns ip netns exec $X true
expect_unhooked down_uplink_detached $ids
ip netns del $X
ip netns del $Y
