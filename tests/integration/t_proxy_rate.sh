#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# A proxied client that keeps no connection alive (health checks, HTTP/1.0,
# short RPCs) gets through the proxy at the rate it opens connections:
#
#   tr-c (client, 10.244.0.10) --capture--> tr-p (podinject-proxy :15001)
#                                              | upstream as 10.244.0.10
#   tr-s (server, 10.244.0.11) <---------------+
#
# 30 000 short connections one after the other in at most 10 s, almost four
# times the pod's share of the flow tables (8 192). They go through only
# if a done connection's entries leave at its close (or the pod makes room
# from its own): with entries kept 10 s after the close, the share is full
# after some 8 000 and every further SYN is dropped and sent again a second
# later (issue 23).
. "$(dirname "$0")/lib.sh"
require_root
EXPECT=11
PREFIX=tr-
X=tr-x
C=10.244.0.10
S=10.244.0.11
N=30000
PROXY_PID=

if [ -n "${PODINJECT_LAB:-}" ]; then
	# a rate of the host's: the lab's emulated guest opens about 150
	# connections a second through the proxy (1 561 in the 10 s there);
	# the unit tests check the freeing and the eviction on every kernel
	skip all "30 000 connections in 10 s is a figure of the host, not of an emulated guest (the unit tests run the datapath's part in the lab)"
	exit 0
fi

trap 'kill $PROXY_PID 2>/dev/null; rm -f /tmp/tr$$.*; cleanup_all' EXIT

start_proxy() {
	ip netns exec tr-p "$BUILD/podinject-proxy" --connect-timeout 3000 15001 \
		>/tmp/tr$$.px 2>/tmp/tr$$.pxlog </dev/null &
	PROXY_PID=$!
	for _ in $(seq 50); do grep -q ready /tmp/tr$$.px 2>/dev/null && return 0; sleep 0.1; done
	return 1
}

# proxy_series PATTERN: the value of the captured pod's podinject_proxy_
# sample whose line matches PATTERN (an ERE)
proxy_series() {
	pi -N $X metrics | grep -E "^podinject_proxy_$1" | awk '{ print $2 }'
}

# open_flows TABLE: the entries of proxy_TABLE (flows, upstream) not
# closing (PI_FLOW_CLOSING, 2, clear in their flags)
open_flows() {
	bpftool map dump pinned "$(node_pin_dir $X)/inject/proxy_$1" |
		jq '[.[] | select(.value.flags % 4 < 2)] | length'
}

# flows_back TABLE MAP: a second after the last connection no entry of
# the pod's in that table is still open (a done connection's go at its
# last ACK), and within the closing timeout (10 s) none is left at all (a
# late segment of a done connection may make a closing one)
flows_back() {
	local n o
	for _ in $(seq 20); do
		o=$(open_flows "$2")
		[ "$o" = 0 ] && break
		sleep 0.05
	done
	[ "$o" = 0 ] || { echo "the $1 table still holds '$o' open entries"; return 1; }
	for _ in $(seq 110); do
		n=$(proxy_series "flows\\{.*table=\"$1\"")
		[ "$n" = 0 ] && return 0
		sleep 0.1
	done
	echo "the pod still holds '$n' entries in the $1 table"
	return 1
}

syn_retrans() {
	ip netns exec tr-c nstat -saz TcpExtTCPSynRetrans | awk '$1 == "TcpExtTCPSynRetrans" { print $2 }'
}

ip netns add $X
in_ns $X sysctl -qw net.ipv4.ip_forward=0
check up node_up $X
pi -N $X pod add tr-c --ip $C >/dev/null
pi -N $X pod add tr-s --ip $S >/dev/null
pi -N $X pod add tr-p --ip 10.244.0.12 >/dev/null
check proxy_add pi -N $X proxy add tr-p --port 15001 --for tr-c --match tcp
# not through check: its subshell would keep PROXY_PID from us
if start_proxy; then pass proxy_ready; else fail proxy_ready "not ready"; fi

in_ns tr-s "$PINET" tcp-server 8080 --count $N --timeout 15000 >/tmp/tr$$.srv 2>&1 &
srv=$!
check server_listens wait_tcp_listen tr-s 8080
retr0=$(syn_retrans)
# The client: connect, wait for the server's close (relayed by the proxy),
# close; a connection not done within a second (a SYN sent again) fails.
check "short_connections_${N}_in_10s" in_ns tr-c "$PINET" tcp-conn-loop --timeout 1000 $S 8080 $N 10
wait $srv
expect_num server_accepted_all "$(grep -c '^accept 10.244.0.10 ' /tmp/tr$$.srv)" $N
expect_num no_syn_sent_twice "$(sub "$(syn_retrans)" "$retr0")" 0
expect_num no_limit_drops "$(proxy_series 'limit_drops_total\{')" 0
# Every connection is done: its entries left at its close, in both tables,
# not 10 s later.
check client_flows_given_back flows_back client flows
check upstream_flows_given_back flows_back upstream upstream

kill $PROXY_PID 2>/dev/null
wait $PROXY_PID 2>/dev/null
PROXY_PID=
pi -N $X pod del tr-c >/dev/null
pi -N $X pod del tr-s >/dev/null
pi -N $X pod del tr-p >/dev/null
check down pi -N $X node down
ip netns del $X
