#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# A proxied client that keeps no connection alive (health checks, HTTP/1.0,
# short RPCs) gets through the proxy at the rate it opens connections:
#
#   tr-c (client, 10.244.0.10) --capture--> tr-p (podinject-proxy :15001)
#                                              | upstream as 10.244.0.10
#   tr-s (server, 10.244.0.11) <---------------+
#
# 30 000 short connections one after the other, almost four times the
# pod's share of the flow tables (8 192). They go through only if a done
# connection's entries leave at its close (or the pod makes room from its
# own): with entries kept 10 s after the close, a client faster than 820
# connections a second fills the share and every further SYN is dropped
# and sent again a second later (issue 23), which fails the connection.
# The host opens some 3 000 a second, the CI's busy machine 2 100; the
# rate is printed, and the check needs only that it was above the 820 that
# make the old bug show (a slower machine could not tell: SKIP). The rate
# itself is the proxy benchmark's (make bench).
. "$(dirname "$0")/lib.sh"
require_root
EXPECT=13
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

# mono_ns: the kernel's monotonic clock, which the entries' times are
# (bpf_ktime_get_ns()); only /proc/timer_list shows it as it is
# (/proc/uptime counts suspended time, and a time namespace moves both)
mono_ns() {
	awk '/^now at/ { print $3; exit }' /proc/timer_list 2>/dev/null
}

# entries MAP [FILTER]: the pod's entries of proxy_MAP that FILTER (jq)
# selects, as JSON: how many, and the first eight (flags, seconds since
# last seen, ports as in the map)
entries() {
	bpftool map dump pinned "$(node_pin_dir $X)/inject/proxy_$1" |
		jq -c --argjson now "$(mono_ns || echo null)" \
			"[.[] | {flags: .value.flags, pod_port: .key.pod_port, dst_port: .key.dst_port,
			  idle_s: (if \$now == null then null else ((\$now - .value.last_seen_ns) / 1e9 | floor) end)}
			 | select(${2:-true})] | if length == 0 then [] else {n: length, first: .[:8]} end"
}

# flows_back TABLE MAP: a second after the last connection no entry of
# the pod's in that table is still open (a done connection's go at its
# last ACK), and none is left once the closing ones had their timeout
# (10 s) from their last segment. A late segment of a done connection
# makes a closing entry (the proxy's answer to a FIN the far end sent
# again), and each segment after it keeps it 10 s more; how long that
# goes on is the peers' (their retransmissions back off), so the check
# is on the entries themselves: one unseen for three times the timeout is
# one its timer did not take, a leak of the share, and so is a count left
# when the table is empty. (The timers run in softirq context: on a
# machine whose two cores are busy, ksoftirqd ran them 2 s late, and an
# entry idle for 12 s was still there, to go a moment later.)
flows_back() {
	local n o t0 stale
	for _ in $(seq 20); do
		o=$(open_flows "$2")
		[ "$o" = 0 ] && break
		sleep 0.05
	done
	[ "$o" = 0 ] || { echo "the $1 table still holds '$o' open entries"; return 1; }
	t0=$(date +%s)
	while [ $(($(date +%s) - t0)) -lt 60 ]; do
		n=$(proxy_series "flows\\{.*table=\"$1\"")
		[ "$n" = 0 ] && return 0
		stale=$(entries "$2" '.idle_s != null and .idle_s > 30')
		[ "$stale" = "[]" ] || break
		sleep 0.2
	done
	echo "the pod still holds '$n' entries in the $1 table after $(($(date +%s) - t0)) s; in the map: $(entries "$2"); sockets not closed: server $(in_ns tr-s ss -Htan state last-ack state fin-wait-1 state fin-wait-2 state closing | wc -l), proxy $(in_ns tr-p ss -Htan state last-ack state fin-wait-1 state fin-wait-2 state closing | wc -l)"
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

in_ns tr-s "$PINET" tcp-server 8080 --count $N --timeout 60000 >/tmp/tr$$.srv 2>&1 &
srv=$!
check server_listens wait_tcp_listen tr-s 8080
retr0=$(syn_retrans)
# The client: connect, wait for the server's close (relayed by the proxy),
# close; a connection not done within a second (a SYN sent again) fails.
if in_ns tr-c "$PINET" tcp-conn-loop --timeout 1000 $S 8080 $N 60 >/tmp/tr$$.loop 2>&1; then
	pass "short_connections_$N"
else
	fail "short_connections_$N" "$(cat /tmp/tr$$.loop)"
fi
cps=$(awk '$1 == "conns" { printf "%d", $8 }' /tmp/tr$$.loop)
echo "# t_proxy_rate: $(cat /tmp/tr$$.loop)"
# 8 192 entries kept 10 s each: above 820 a second the old bug shows
if [ "${cps:-0}" -gt 900 ]; then
	pass rate_beyond_the_share
else
	skip rate_beyond_the_share "this machine opened ${cps:-0} connections a second; below 820 the share never fills, so the run could not show the bug"
fi
wait $srv
expect_num server_accepted_all "$(grep -c '^accept 10.244.0.10 ' /tmp/tr$$.srv)" $N
expect_num no_syn_sent_twice "$(sub "$(syn_retrans)" "$retr0")" 0
expect_num no_limit_drops "$(proxy_series 'limit_drops_total\{')" 0
# Every connection is done: its entries left at its close, in both tables,
# not 10 s later.
check client_flows_given_back flows_back client flows
check upstream_flows_given_back flows_back upstream upstream
# Where the kernel's bpf_timer_init fails at this rate (6.18: about half
# of the entries got no timer of their own), the sweep took those out;
# once the tables are empty it has none left to look after.
untimed_settled() {
	for _ in $(seq 30); do
		[ "$(proxy_series 'flows_untimed\{')" = 0 ] && return 0
		sleep 0.2
	done
	echo "the sweep still counts '$(proxy_series 'flows_untimed\{')' entries without a timer"
	return 1
}
check sweep_settled untimed_settled
echo "# t_proxy_rate: entries the kernel gave no timer: $(proxy_series 'flows_untimed_total'), taken out idle by the sweep: $(proxy_series 'flow_sweep_expired_total')"

kill $PROXY_PID 2>/dev/null
wait $PROXY_PID 2>/dev/null
PROXY_PID=
pi -N $X pod del tr-c >/dev/null
pi -N $X pod del tr-s >/dev/null
pi -N $X pod del tr-p >/dev/null
check down pi -N $X node down
ip netns del $X
