#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Issue #14 with real packets: no pod escapes its policy or borrows another
# pod's identity. Every check here failed on the datapath before the fix.
#
#   hd-a 10.244.0.10 fd00::a  proxied client (the one impersonated)
#   hd-c 10.244.0.12 fd00::c  proxied client (the impersonator)
#   hd-p 10.244.0.13 fd00::d  podinject-proxy :15001 for hd-a and hd-c
#   hd-s 10.244.0.14 fd00::e  server
#   hd-b 10.244.0.11 fd00::b  a pod trying its way around its policy
#
#   node hd-x (pods above) --- wire0 192.168.77.1 === 192.168.77.2 --- hd-y
#   (hd-y is a plain namespace: "another node" that forges pod sources)
. "$(dirname "$0")/lib.sh"
require_root
EXPECT=39
PREFIX=hd-
X=hd-x
Y=hd-y
A=10.244.0.10
B=10.244.0.11
C=10.244.0.12
S=10.244.0.14
T=/tmp/hd$$

make_wire $X $Y
in_ns $X sysctl -qw net.ipv4.ip_forward=0 net.ipv6.conf.all.forwarding=0
check up node_up $X --uplink wire0
pi -N $X pod add hd-a --ip $A --ip6 fd00::a >/dev/null
pi -N $X pod add hd-b --ip $B --ip6 fd00::b >/dev/null
pi -N $X pod add hd-c --ip $C --ip6 fd00::c >/dev/null
pi -N $X pod add hd-p --ip 10.244.0.13 --ip6 fd00::d >/dev/null
pi -N $X pod add hd-s --ip $S --ip6 fd00::e >/dev/null

stat() { pod_stat $X "$1" "$2"; }

# udp_count POD PORT N TIMEOUT_MS [-6] -- CMD...: how many of N datagrams
# to PORT in POD arrived while CMD ran.
udp_count() {
	local pod=$1 port=$2 n=$3 ms=$4 fam=$5
	shift 6
	in_ns "$pod" "$PINET" udp-recv $fam "$port" "$n" "$ms" >$T.rcv 2>&1 &
	local r=$!
	sleep 0.3
	"$@" >/dev/null 2>&1
	wait $r
	awk '/^received/ {print $2}' $T.rcv
}

# ---- finding 1: a proxied pod cannot act as another pod of its proxy
check proxy_add_a pi -N $X proxy add hd-p --port 15001 --for hd-a --match tcp dport 8080
check proxy_add_c pi -N $X proxy add hd-p --port 15001 --for hd-c --match tcp dport 8080
ip netns exec hd-p "$BUILD/podinject-proxy" --connect-timeout 5000 15001 >$T.px 2>$T.pxlog </dev/null &
PROXY_PID=$!
trap 'kill $PROXY_PID 2>/dev/null; rm -f $T.*; cleanup_all' EXIT
for _ in $(seq 50); do grep -q ready $T.px 2>/dev/null && break; sleep 0.1; done

in_ns hd-s "$PINET" tcp-server 8080 --count 1 --timeout 4000 >$T.srv 2>&1 &
srv=$!
wait_tcp_listen hd-s 8080 >/dev/null
check proxy_own_address in_ns hd-a "$PINET" tcp-connect --timeout 3000 $S 8080
wait $srv
check proxy_server_sees_the_pod grep -q "^accept $A " $T.srv

sp0=$(stat hd-c .drops.spoofed)
in_ns hd-s "$PINET" tcp-server 8080 --count 1 --timeout 3000 >$T.srv 2>&1 &
srv=$!
wait_tcp_listen hd-s 8080 >/dev/null
in_ns hd-c ip addr add $A/32 dev lo
check_fails proxy_as_another_pod in_ns hd-c "$PINET" tcp-connect --bind $A --timeout 1500 $S 8080
wait $srv
check_fails proxy_server_never_sees_it_as_that_pod grep -q "^accept $A " $T.srv
check proxy_impersonation_counted_spoofed test $(($(stat hd-c .drops.spoofed) - sp0)) -gt 0
in_ns hd-c ip addr del $A/32 dev lo
kill $PROXY_PID 2>/dev/null

# ---- finding 2: link-local sources meet the egress policy; no RA
ll_of() {	# ll_of NETNS DEV: its link-local address once DAD is done
	local a
	for _ in $(seq 50); do
		a=$(ip -n "$1" -6 addr show dev "$2" scope link 2>/dev/null)
		if [ -n "$a" ] && ! grep -q tentative <<<"$a"; then
			awk '/inet6/ {sub("/.*", "", $2); print $2; exit}' <<<"$a"
			return 0
		fi
		sleep 0.1
	done
	return 1
}
HLL=$(ll_of $X pi-hd-b)
ll_of hd-b eth0 >/dev/null
in_ns $X "$PINET" tcp-server -6 7300 --count 2 --timeout 6000 >$T.llsrv 2>&1 &
llsrv=$!
wait_tcp_listen $X 7300 >/dev/null
check ll_host_service_without_policy in_ns hd-b "$PINET" tcp-connect --timeout 3000 "$HLL%eth0" 7300
pi -N $X policy add hd-b egress deny >/dev/null
pd0=$(stat hd-b .drops.policy)
check_fails ll_host_service_under_deny_all in_ns hd-b "$PINET" tcp-connect --timeout 1500 "$HLL%eth0" 7300
check ll_denied_by_policy test $(($(stat hd-b .drops.policy) - pd0)) -gt 0
pi -N $X policy del hd-b egress all >/dev/null
kill $llsrv 2>/dev/null
wait $llsrv 2>/dev/null

check ra_sent in_ns hd-b "$PINET" router-adv eth0 3
sleep 0.5
check_fails ra_no_default_route_via_the_pod sh -c "ip -n $X -6 route show default | grep -q pi-hd-b"
expect_eq ra_dropped_and_counted "$(stat hd-b .drops.router)" 3
expect_eq ra_accept_ra_off_on_host_side "$(in_ns $X sysctl -n net.ipv6.conf.pi-hd-b.accept_ra)" 0

# a pod claims another pod's addresses to the node: NDP and ARP
nd0=$(stat hd-b '.drops["nd-spoofed"]')
check nd_claim_sent in_ns hd-b "$PINET" neigh-adv eth0 fd00::e 2
check arp_claim_sent in_ns hd-b "$PINET" arp-announce eth0 $S 2
check nd_own_address_sent in_ns hd-b "$PINET" neigh-adv eth0 fd00::b 1
check arp_own_address_sent in_ns hd-b "$PINET" arp-announce eth0 $B 1
sleep 0.3
expect_eq nd_arp_claims_dropped_and_counted "$(($(stat hd-b '.drops["nd-spoofed"]') - nd0))" 4

# ---- finding 3: port rules hold for fragments and extension headers
pi -N $X policy add hd-b egress deny to fd00::e/128 proto udp port 5353 >/dev/null
pi -N $X policy add hd-b egress deny to $S/32 proto udp port 5353 >/dev/null
fo0=$(stat hd-b '.drops["frag-orphan"]')
expect_eq frag_v6_large_udp_denied \
	"$(udp_count hd-s 5353 3 1500 -6 -- in_ns hd-b "$PINET" udp-send fd00::e 5353 3 3000)" 0
expect_eq frag_v6_hopopts_udp_denied \
	"$(udp_count hd-s 5353 3 1500 -6 -- in_ns hd-b "$PINET" udp-send --hopopts fd00::e 5353 3)" 0
expect_eq frag_v4_large_udp_denied \
	"$(udp_count hd-s 5353 3 1500 "" -- in_ns hd-b "$PINET" udp-send $S 5353 3 3000)" 0
check frag_later_fragments_counted test $(($(stat hd-b '.drops["frag-orphan"]') - fo0)) -ge 12
# what the rule does not name still flows, whole
expect_eq frag_v6_large_udp_other_port \
	"$(udp_count hd-s 5354 3 3000 -6 -- in_ns hd-b "$PINET" udp-send fd00::e 5354 3 3000)" 3
expect_eq frag_v6_hopopts_other_port \
	"$(udp_count hd-s 5354 3 3000 -6 -- in_ns hd-b "$PINET" udp-send --hopopts fd00::e 5354 3)" 3
expect_eq frag_v4_large_udp_other_port \
	"$(udp_count hd-s 5354 3 3000 "" -- in_ns hd-b "$PINET" udp-send $S 5354 3 3000)" 3
pi -N $X policy del hd-b egress all >/dev/null

# ---- finding 4: VLAN-tagged frames from a pod go nowhere (written whole
# with AF_PACKET: the host side's receive path moves the tag into the skb,
# so the datapath sees an untagged IPv4 frame plus skb->vlan_tci)
PMAC=$(ip -n hd-b -j link show eth0 | jq -r '.[0].address')
in0=$(stat hd-s .ingress_packets)
check vlan_sent in_ns hd-b "$PINET" raw-udp eth0 "$PMAC" $B $S 5400 3 5
sleep 0.3
expect_eq vlan_dropped_and_counted "$(stat hd-b .drops.vlan)" 3
expect_eq vlan_never_delivered "$(($(stat hd-s .ingress_packets) - in0))" 0

# ---- finding 5: the uplink cannot speak for a local pod
expect_eq uplink_other_node_reaches_pod \
	"$(udp_count hd-s 5500 3 2000 "" -- in_ns $Y "$PINET" udp-send $S 5500 3)" 3
expect_eq uplink_pod_source_not_delivered \
	"$(udp_count hd-s 5500 3 1000 "" -- in_ns $Y "$PINET" udp-send --bind $A $S 5500 3)" 0
expect_eq uplink_pod_source_counted "$(stat hd-a '.drops["uplink-spoofed"]')" 3

# ---- a longer chain of IPv6 extension headers than the parser walks,
# towards a pod: Linux takes any number of them, so the pod's stack would
# take what its policy never saw. The node's own stack sends them (raw
# IPv6, so the headers are as written): pod_ingress checks those.
ip -n $X addr add fd00:77::1/128 dev lo nodad
check ext6_rule pi -N $X policy add hd-s ingress deny proto udp port 5360
expect_eq ext6_short_chain_delivered \
	"$(udp_count hd-s 5361 3 3000 -6 -- in_ns $X "$PINET" udp6-ext fd00:77::1 fd00::e 5361 3 2)" 3
expect_eq ext6_longest_walked_denied \
	"$(udp_count hd-s 5360 3 1500 -6 -- in_ns $X "$PINET" udp6-ext fd00:77::1 fd00::e 5360 3 8)" 0
m0=$(stat hd-s .drops.malformed)
expect_eq ext6_longer_not_delivered \
	"$(udp_count hd-s 5360 3 1500 -6 -- in_ns $X "$PINET" udp6-ext fd00:77::1 fd00::e 5360 3 9)" 0
expect_eq ext6_longer_counted "$(($(stat hd-s .drops.malformed) - m0))" 3

check node_down pi -N $X node down
