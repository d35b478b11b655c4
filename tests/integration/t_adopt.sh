#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Pods podinject did not create: a namespace and a veth pair made with
# plain `ip` commands, as a CNI plugin would, are adopted into a node; they
# get policy, injection and probes; `pod del` takes podinject's programs and
# state away and leaves the namespace and devices, and succeeds quietly
# when they are gone already. Then the same on a node that is the host's
# own namespace (`node up --host`), where podinject leaves every other
# device alone.
#
#   ad-n (node)                              ad-x ("ad-ns/web-1")
#     pi-ad-a  <-> ad-a 10.244.0.10          ens5 10.244.0.50 fd00::50
#     pi-ad-b  <-> ad-b 10.244.0.11
#     vx-web  <====== veth, made by ip ======> ens5  (+ a foreign tcx program)
source "$(dirname "$0")/lib.sh"
require_root
EXPECT=76
PREFIX=ad-
N=${PREFIX}n
H=${PREFIX}h
POD=ad-ns/web-1
pin=/sys/fs/bpf/${PREFIX}foreign
cleanup() {
	cleanup_all
	ip link del adh-web 2>/dev/null
	"$PI" -N $H node down >/dev/null 2>&1
	rm -rf $pin /tmp/$PREFIX$$.*
}
trap cleanup EXIT
cleanup

# A pod made the way a CNI plugin makes one: its own interface name, its
# addresses, a gateway route with a permanent neighbour, a host route.
make_foreign_pod() {	# make_foreign_pod NODE_NS NETNS HOSTDEV IFNAME IP4 IP6
	local node=$1 ns=$2 dev=$3 ifn=$4 a4=$5 a6=$6 mac
	ip netns add "$ns"
	if [ "$node" = host ]; then
		ip link add "$dev" type veth peer name "$ifn" netns "$ns"
		ip link set "$dev" up
		mac=$(cat /sys/class/net/$dev/address)
	else
		ip -n "$node" link add "$dev" type veth peer name "$ifn" netns "$ns"
		ip -n "$node" link set "$dev" up
		mac=$(ip netns exec "$node" cat /sys/class/net/$dev/address)
		ip -n "$node" route add "$a4/32" dev "$dev"
		ip -n "$node" -6 route add "$a6/128" dev "$dev"
	fi
	ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.accept_dad=0
	ip -n "$ns" link set lo up
	ip -n "$ns" addr add "$a4/32" dev "$ifn"
	ip -n "$ns" addr add "$a6/128" dev "$ifn" nodad
	ip -n "$ns" link set "$ifn" up
	ip -n "$ns" neigh add 169.254.1.1 lladdr "$mac" dev "$ifn" nud permanent
	ip -n "$ns" route add default via 169.254.1.1 dev "$ifn" onlink
	ip -n "$ns" neigh add fe80::1 lladdr "$mac" dev "$ifn" nud permanent
	ip -n "$ns" -6 route add default via fe80::1 dev "$ifn" onlink
}

# udp_count FROM_NS TO_NS DST PORT N [--bind SRC]: datagrams that arrive
udp_count() {
	local from=$1 to=$2 dst=$3 port=$4 n=$5 rpid six=
	shift 5
	case $dst in *:*) six=-6 ;; esac
	in_ns "$to" "$PINET" udp-recv $six "$port" "$n" 2000 >/tmp/$PREFIX$$.u &
	rpid=$!
	sleep 0.3
	in_ns "$from" "$PINET" udp-send "$@" "$dst" "$port" "$n" >/dev/null
	wait $rpid
	head -n 1 /tmp/$PREFIX$$.u | awk '{print $2}'
}

check node_up node_up $N
# Only podinject's datapath may deliver here: with the node's stack
# forwarding (a new namespace takes the host's ip_forward, which a CNI
# plugin may have turned on), the check that a deleted pod's traffic no
# longer passes would measure the kernel instead.
ip netns exec $N sysctl -qw net.ipv4.ip_forward=0 net.ipv6.conf.all.forwarding=0
check pod_a pi -N $N pod add ${PREFIX}a --ip 10.244.0.10 --ip6 fd00::a
check pod_b pi -N $N pod add ${PREFIX}b --ip 10.244.0.11 --ip6 fd00::b
make_foreign_pod $N ${PREFIX}x vx-web ens5 10.244.0.50 fd00::50
mkdir -p $pin
if [ "$(pi -N $N -j node show | jq -r .attach)" = tcx ]; then
	check foreign_attach "$BUILD/tcx-attach" attach "$BUILD/foreign.bpf.o" foreign_count $N vx-web ingress $pin
else
	check foreign_attach "$BUILD/tcx-attach" attach-tc "$BUILD/foreign.bpf.o" foreign_count $N vx-web ingress $pin 50
fi

# Bad adoptions are refused with exit 2 and change nothing.
expect_rc() { local want=$1; shift; "$@" >/dev/null 2>&1; echo $?; }
expect_eq adopt_no_netns "$(expect_rc 2 pi -N $N pod adopt $POD --netns ${PREFIX}none --dev vx-web)" 2
expect_eq adopt_no_dev "$(expect_rc 2 pi -N $N pod adopt $POD --netns ${PREFIX}x --dev vx-none)" 2
expect_eq adopt_wrong_ifname "$(expect_rc 2 pi -N $N pod adopt $POD --netns ${PREFIX}x --dev vx-web --ifname lo)" 2
# An ifindex names a device only in its own namespace. A decoy in another
# namespace with the number of vx-web's peer, whose own peer (in a third
# namespace) has vx-web's number, is not vx-web's peer: adopted with
# vx-web, the decoy's address would be the source check of the pod
# behind vx-web, which could then speak as the decoy's.
ens5_if=$(ip netns exec ${PREFIX}x cat /sys/class/net/ens5/ifindex)
vxweb_if=$(ip netns exec $N cat /sys/class/net/vx-web/ifindex)
ip netns add ${PREFIX}y
ip netns add ${PREFIX}z
ip -n ${PREFIX}y link add decoy index $ens5_if type veth peer name decoyp index $vxweb_if netns ${PREFIX}z
ip -n ${PREFIX}y addr add 10.244.0.77/32 dev decoy
ip -n ${PREFIX}y link set decoy up
expect_eq adopt_decoy_numbers "$(ip netns exec ${PREFIX}y cat /sys/class/net/decoy/ifindex) $(ip netns exec ${PREFIX}z cat /sys/class/net/decoyp/ifindex)" "$ens5_if $vxweb_if"
expect_eq adopt_peer_elsewhere "$(expect_rc 2 pi -N $N pod adopt $POD --netns ${PREFIX}y --dev vx-web)/$(expect_rc 2 pi -N $N pod adopt $POD --netns ${PREFIX}y --dev vx-web --ifname decoy)" 2/2
expect_eq adopt_peer_elsewhere_said "$(pi -N $N pod adopt $POD --netns ${PREFIX}y --dev vx-web 2>&1 >/dev/null)" \
	"error: device 'vx-web' on node '$N' has its peer in another namespace than '${PREFIX}y'"
ip netns del ${PREFIX}z
ip netns del ${PREFIX}y
expect_eq adopt_not_a_pair "$(expect_rc 2 pi -N $N pod adopt $POD --netns ${PREFIX}x --dev lo)" 2
expect_eq adopt_address_in_use "$(expect_rc 2 pi -N $N pod adopt $POD --netns ${PREFIX}x --dev vx-web --ip 10.244.0.10)" 2
expect_eq adopt_bad_name "$(expect_rc 2 pi -N $N pod adopt 'a b' --netns ${PREFIX}x --dev vx-web)" 2
expect_eq adopt_refused_leave_nothing "$(pi -N $N -j pod list | jq length)" 2

# The adoption itself: addresses and interface read from the pod.
check adopt pi -N $N pod adopt $POD --netns ${PREFIX}x --dev vx-web
j=$("$PI" -N $N -j pod show $POD)
expect_eq adopt_name "$(echo "$j" | jq -r .name)" "$POD"
expect_eq adopt_ifname "$(echo "$j" | jq -r .ifname)" ens5
expect_eq adopt_addresses "$(echo "$j" | jq -r '.ipv4 + " " + .ipv6')" "10.244.0.50 fd00::50"
expect_eq adopt_flag "$(echo "$j" | jq -r .adopted)" true
expect_eq adopt_twice_refused "$(expect_rc 2 pi -N $N pod adopt other --netns ${PREFIX}x --dev vx-web)" 2
if [ "$(pi -N $N -j node show | jq -r .attach)" = tcx ]; then
	expect_eq adopt_beside_foreign "$("$BUILD/tcx-attach" query $N vx-web ingress)" "foreign_count pod_egress"
else
	skip adopt_beside_foreign "clsact node: the chain order is the filters' priorities"
fi
before=$("$BUILD/tcx-attach" counter $pin)

# Traffic both ways, v4 and v6, through the reference datapath.
expect_eq traffic_to_adopted "$(udp_count ${PREFIX}a ${PREFIX}x 10.244.0.50 7000 5)" 5
expect_eq traffic_from_adopted "$(udp_count ${PREFIX}x ${PREFIX}a 10.244.0.10 7000 5)" 5
expect_eq traffic_from_adopted_v6 "$(udp_count ${PREFIX}x ${PREFIX}a fd00::a 7000 5)" 5
check foreign_still_runs test "$("$BUILD/tcx-attach" counter $pin)" -gt "$before"

# Policy: the adopted pod's own rule, counted exactly.
check policy_add pi -N $N policy add $POD egress deny to 10.244.0.10/32 proto udp port 7001
expect_eq policy_denies "$(udp_count ${PREFIX}x ${PREFIX}a 10.244.0.10 7001 6)" 0
expect_eq policy_rule_counted "$("$PI" -N $N -j policy list $POD | jq '.[0].packets')" 6
expect_eq policy_other_port "$(udp_count ${PREFIX}x ${PREFIX}a 10.244.0.10 7002 4)" 4

# Injection as the adopted pod, and by it.
check inject_as_adopted pi -N $N inject allow ${PREFIX}a --as $POD
expect_eq inject_as_adopted_delivered "$(udp_count ${PREFIX}a ${PREFIX}b 10.244.0.11 7003 5 --bind 10.244.0.50)" 5
expect_eq inject_as_adopted_counted "$("$PI" -N $N -j inject stats | jq --arg p "$POD" '[.[] | select(.as == $p) | .packets] | add')" 5
check policy_add_b pi -N $N policy add $POD egress deny to 10.244.0.11/32 proto udp port 7007
expect_eq inject_as_adopted_policy "$(udp_count ${PREFIX}a ${PREFIX}b 10.244.0.11 7007 3 --bind 10.244.0.50)" 0
expect_eq inject_as_adopted_policy_counted "$("$PI" -N $N -j policy list $POD | jq '.[1].packets')" 3
check inject_by_adopted pi -N $N inject allow $POD --as ${PREFIX}b
expect_eq inject_by_adopted_delivered "$(udp_count ${PREFIX}x ${PREFIX}a 10.244.0.10 7004 5 --bind 10.244.0.11)" 5

# A probe from the adopted pod: answered, and denied by its rule.
in_ns ${PREFIX}b "$PINET" tcp-server 7005 --count 3 --timeout 5000 >/dev/null &
wait_tcp_listen ${PREFIX}b 7005 >/dev/null
check probe_answered sh -c "$PI -N $N -j probe --from $POD --to 10.244.0.11:7005 --count 2 | jq -e '.summary.answered == 2'"
check probe_policy sh -c "$PI -N $N -j probe --from $POD --to 10.244.0.10:7001 --proto udp --count 1 | jq -e '.summary.dropped_by_policy == 1'"
kill %% 2>/dev/null
wait 2>/dev/null

# pod del: our programs and state go, the namespace and devices stay.
ifx=$("$PI" -N $N -j pod show $POD | jq .host_ifindex)
check del pi -N $N pod del $POD
check del_netns_kept ip netns pids ${PREFIX}x
check del_hostdev_kept ip -n $N link show vx-web
check del_podside_kept ip -n ${PREFIX}x link show ens5
check del_address_kept sh -c "ip -n ${PREFIX}x -4 addr show ens5 | grep -q 10.244.0.50"
if [ "$(pi -N $N -j node show | jq -r .attach)" = tcx ]; then
	expect_eq del_only_foreign_left "$("$BUILD/tcx-attach" query $N vx-web ingress)" "foreign_count"
else
	expect_eq del_only_foreign_left "$(ip netns exec $N tc filter show dev vx-web ingress | grep -c 'bpf.*pod_egress')" 0
fi
expect_eq del_no_pins "$(ls /sys/fs/bpf/podinject/$N | grep -c "_${ifx}_\?")" 0
expect_eq del_no_auth "$("$PI" -N $N -j inject list | jq --arg p "$POD" '[.[] | select(.as == $p or .injector == $p)] | length')" 0
expect_eq del_no_rules "$("$PI" -N $N -j policy list | jq length)" 0
expect_eq del_address_free "$(udp_count ${PREFIX}x ${PREFIX}a 10.244.0.10 7001 3)" 0

# Adopted again, by a namespace path this time; then the namespace and the
# device vanish under podinject, and pod del still succeeds, quietly.
check readopt_by_path pi -N $N pod adopt $POD --netns /run/netns/${PREFIX}x --dev vx-web --ifname ens5
ip netns del ${PREFIX}x
sleep 0.2
check del_after_netns_gone pi -N $N pod del $POD
check del_after_netns_gone_state sh -c "! $PI -N $N pod show $POD >/dev/null 2>&1"
ip netns del ${PREFIX}b
check del_own_pod_after_netns_gone pi -N $N pod del ${PREFIX}b

ids=$(node_prog_ids $N)
check down pi -N $N node down
expect_eq down_no_links_left "$(links_of_progs $ids)" 0

# A node that is the host's own namespace. podinject attaches to the pod's
# device only: the host's other devices keep what they had.
host_links_before=$(tcx_links)
host_qdiscs_before=$(tc qdisc show | grep -c clsact)
check host_up pi -N $H node up --host
expect_eq host_show "$("$PI" -N $H -j node show | jq -r '.host')" true
make_foreign_pod host ${PREFIX}y adh-web eth1 10.244.9.50 fd00:9::50
check host_adopt pi -N $H pod adopt default/web-2 --netns ${PREFIX}y --dev adh-web
expect_eq host_adopt_ifname "$("$PI" -N $H -j pod show default/web-2 | jq -r .ifname)" eth1
check host_policy pi -N $H policy add default/web-2 egress deny proto udp port 7006
in_ns ${PREFIX}y "$PINET" udp-send 10.244.9.1 7006 4 >/dev/null
expect_eq host_policy_counted "$("$PI" -N $H -j policy list default/web-2 | jq '.[0].packets')" 4
if [ "$(pi -N $H -j node show | jq -r .attach)" = tcx ]; then
	expect_eq host_only_pod_device "$(($(tcx_links) - host_links_before))" 2
else
	expect_eq host_only_pod_device "$(($(tc qdisc show | grep -c clsact) - host_qdiscs_before))" 1
fi
ids=$(node_prog_ids $H)
check host_down pi -N $H node down
expect_eq host_down_no_links "$(links_of_progs $ids)" 0
check host_down_device_kept ip link show adh-web
check host_down_netns_kept ip netns pids ${PREFIX}y
# (the host node's pod device: no qdisc left whatever the mode)
expect_eq host_down_no_qdisc "$(tc qdisc show dev adh-web | grep -c clsact)" 0
ip link del adh-web
ip netns del ${PREFIX}y

# On a clsact node an adopted pod's host-side device needs a clsact qdisc
# for podinject's filters. The device is the CNI's and stays: the qdisc
# goes with the pod (pod del, node down) when podinject made it (before,
# it stayed, empty). One the device had, or that another program's filter
# came onto meanwhile, stays, with that filter.
C=${PREFIX}c
ip netns add $C	# the node's, not made by it: node down leaves it and its devices
check clsact_node_up node_up $C --attach clsact
ip netns exec $C sysctl -qw net.ipv4.ip_forward=0 net.ipv6.conf.all.forwarding=0
make_foreign_pod $C ${PREFIX}w cw-web eth0 10.244.0.60 fd00::60
cqdisc() { tc -n $C qdisc show dev cw-web | grep -c clsact; }
check clsact_adopt pi -N $C pod adopt ${PREFIX}w --netns ${PREFIX}w --dev cw-web
expect_eq clsact_adopted_filters "$(cqdisc) $(tc -n $C filter show dev cw-web ingress | grep -c pod_egress)" "1 1"
check clsact_pod_del pi -N $C pod del ${PREFIX}w
expect_eq clsact_pod_del_qdisc_gone "$(cqdisc)" 0
tc -n $C qdisc add dev cw-web clsact
pi -N $C pod adopt ${PREFIX}w --netns ${PREFIX}w --dev cw-web >/dev/null
pi -N $C pod del ${PREFIX}w >/dev/null
expect_eq clsact_qdisc_theirs_kept "$(cqdisc)" 1
tc -n $C qdisc del dev cw-web clsact
pi -N $C pod adopt ${PREFIX}w --netns ${PREFIX}w --dev cw-web >/dev/null
rm -rf $pin; mkdir -p $pin
"$BUILD/tcx-attach" attach-tc "$BUILD/foreign.bpf.o" foreign_count $C cw-web egress $pin 7
pi -N $C pod del ${PREFIX}w >/dev/null
expect_eq clsact_qdisc_shared_kept "$(cqdisc) $(tc -n $C filter show dev cw-web egress | grep -c foreign_count)" "1 1"
tc -n $C qdisc del dev cw-web clsact
rm -rf $pin
pi -N $C pod adopt ${PREFIX}w --netns ${PREFIX}w --dev cw-web >/dev/null
check clsact_node_down pi -N $C node down
expect_eq clsact_node_down_qdisc_gone "$(cqdisc) $(ip -n $C -o link show cw-web | wc -l)" "0 1"
ip netns del ${PREFIX}w
ip netns del $C
