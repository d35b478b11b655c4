#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# podinject metrics scraped by a real Prometheus (Debian's): known traffic
# between three pods (allowed datagrams counted by a rule, datagrams a deny
# rule drops, spoofed ones, injected ones), then, once two scrapes have
# run after the traffic stopped, every number Prometheus' HTTP API returns
# must equal what `pod show -j`, `policy list -j` and `inject stats -j` say.
# Plus: the target is "up" (Prometheus parsed the exposition), a wrong
# path is 404, SIGTERM stops the server cleanly, a node that is not up is
# refused at start.
#
#   a 10.244.0.10 --+
#   b 10.244.0.11 --+-- node mt-n      metrics server  127.0.0.1:MPORT
#   c 10.244.0.12 --+                  prometheus      127.0.0.1:PPORT
. "$(dirname "$0")/lib.sh"
require_root
EXPECT=50
PREFIX=mt-
N=${PREFIX}n
TMP=$(mktemp -d /tmp/mt-metrics.XXXXXX)
SERVER_PID= PROM_PID=

cleanup() {
	[ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null
	[ -n "$PROM_PID" ] && kill "$PROM_PID" 2>/dev/null
	cleanup_all
	rm -rf "$TMP"
}
trap cleanup EXIT
cleanup_all

if ! command -v prometheus >/dev/null; then
	# The lab's image carries no Prometheus (a 100 MB program for a suite
	# whose results do not depend on the kernel); on the host make deps
	# installs it, and its absence there is a failure.
	if [ -n "${PODINJECT_LAB:-}" ]; then
		skip all "no prometheus in the kernel lab's image (the suite runs on the host)"
		exit 0
	fi
	fail prometheus "no prometheus binary (Debian's prometheus: make deps)"
	exit 1
fi

# A TCP port of 127.0.0.1 nothing listens on (checked, then taken by the
# caller: a race with other work is possible but not likely).
free_port() {
	local p
	for _ in $(seq 50); do
		p=$((20000 + RANDOM % 20000))
		[ -z "$(ss -Htln "( sport = :$p )")" ] && { echo "$p"; return 0; }
	done
	return 1
}
MPORT=$(free_port)
PPORT=$(free_port)
while [ "$PPORT" = "$MPORT" ]; do PPORT=$(free_port); done
PROM=http://127.0.0.1:$PPORT
listening() { [ -n "$(ss -Htln "( sport = :$1 )")" ]; }

# --- refused at start -----------------------------------------------------

pi -N $N metrics --listen 127.0.0.1:$MPORT >"$TMP/out" 2>&1
rc=$?
expect_eq not_up_exit "$rc/$(grep -c "not up" "$TMP/out")" "1/1"
if listening $MPORT; then fail not_up_no_listener "port $MPORT is open"; else pass not_up_no_listener; fi
pi -N $N metrics --listen 127.0.0.1 >/dev/null 2>&1
expect_eq bad_listen_usage "$?" 2

# --- the node, with IPv6 off so that no neighbour or multicast traffic of
# the kernel's own moves a counter between a scrape and the comparison ---

check up node_up $N
check pod_a pi -N $N pod add ${PREFIX}a --ip 10.244.0.10
check pod_b pi -N $N pod add ${PREFIX}b --ip 10.244.0.11
check pod_c pi -N $N pod add ${PREFIX}c --ip 10.244.0.12
for ns in $N ${PREFIX}a ${PREFIX}b ${PREFIX}c; do
	in_ns $ns sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
done
allow=$(pi -N $N -j policy add ${PREFIX}b ingress allow from 10.244.0.10/32 proto udp port 7002 | jq .id)
deny=$(pi -N $N -j policy add ${PREFIX}a egress deny to 10.244.0.12/32 proto udp port 7003 | jq .id)
check rules_added is_num "$allow$deny"

# --- the server and Prometheus --------------------------------------------

# the binary itself, not the pi function: $! must be the server's pid
"$PI" -N $N metrics --listen 127.0.0.1:$MPORT 2>"$TMP/server.err" &
SERVER_PID=$!
wait_http() {	# wait_http URL TRIES: answered 200 within TRIES x 0.1 s
	for _ in $(seq "$2"); do
		[ "$(curl -s -o /dev/null -w '%{http_code}' "$1")" = 200 ] && return 0
		sleep 0.1
	done
	echo "no 200 from $1"
	return 1
}
check server_answers wait_http http://127.0.0.1:$MPORT/metrics 50
expect_eq path_404 "$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$MPORT/metricsx)/$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$MPORT/)" "404/404"
curl -s http://127.0.0.1:$MPORT/metrics >"$TMP/expo"
check exposition_parses promtool check metrics <"$TMP/expo"
expect_eq content_type "$(curl -s -o /dev/null -w '%{content_type}' http://127.0.0.1:$MPORT/metrics)" \
	"text/plain; version=0.0.4; charset=utf-8"

cat >"$TMP/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: podinject
    static_configs:
      - targets: ['127.0.0.1:$MPORT']
EOF
prometheus --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$TMP/data" \
	--web.listen-address=127.0.0.1:$PPORT >"$TMP/prometheus.log" 2>&1 &
PROM_PID=$!
check prometheus_ready wait_http $PROM/-/ready 300

# pq QUERY: the value of a query's single result, "none" without one
pq() {
	curl -s -G --data-urlencode "query=$1" $PROM/api/v1/query |
		jq -r 'if .status == "success" and (.data.result | length) == 1
		       then .data.result[0].value[1] else "none" end'
}
# pq_map QUERY LABEL: the results as "labelvalue=value" lines, sorted
pq_map() {
	curl -s -G --data-urlencode "query=$1" $PROM/api/v1/query |
		jq -r --arg l "$2" '.data.result[] | "\(.metric[$l])=\(.value[1])"' | sort
}

# --- traffic: known numbers of datagrams ---------------------------------

in_ns ${PREFIX}b "$PINET" udp-recv 7002 25 3000 >"$TMP/udp" &
check allowed_listens wait_udp_listen ${PREFIX}b 7002
sent=$(in_ns ${PREFIX}a "$PINET" udp-send 10.244.0.11 7002 25)
wait $!
expect_eq allowed_traffic "$sent, $(head -n 1 "$TMP/udp")" "sent 25, received 25"

in_ns ${PREFIX}c "$PINET" udp-recv 7003 7 1000 >"$TMP/udp" &
check denied_listens wait_udp_listen ${PREFIX}c 7003
sent=$(in_ns ${PREFIX}a "$PINET" udp-send 10.244.0.12 7003 7)
wait $!
expect_eq denied_traffic "$sent, $(head -n 1 "$TMP/udp")" "sent 7, received 0"

in_ns ${PREFIX}b "$PINET" udp-recv 7001 10 1000 >"$TMP/udp" &
check spoof_listens wait_udp_listen ${PREFIX}b 7001
sent=$(in_ns ${PREFIX}c "$PINET" udp-send --bind 10.244.0.10 10.244.0.11 7001 10)
wait $!
expect_eq spoofed_traffic "$sent, $(head -n 1 "$TMP/udp")" "sent 10, received 0"

check inject_allow pi -N $N inject allow ${PREFIX}c --as ${PREFIX}a
in_ns ${PREFIX}b "$PINET" udp-recv 7004 5 3000 >"$TMP/udp" &
check injected_listens wait_udp_listen ${PREFIX}b 7004
sent=$(in_ns ${PREFIX}c "$PINET" udp-send --bind 10.244.0.10 10.244.0.11 7004 5)
wait $!
expect_eq injected_traffic "$sent, $(head -n 1 "$TMP/udp")" "sent 5, received 5"

# --- two scrapes after the traffic stopped, then the same numbers ----------

# The newest scrape's time (Prometheus stamps each sample with the start
# of its scrape): two scrapes have begun after `stopped` once it is more
# than one interval past it.
stopped=$(date +%s.%N)
two_scrapes() {
	local t
	for _ in $(seq 150); do
		t=$(pq "timestamp(podinject_node_pods{node=\"$N\"})")
		if [ "$t" != none ] && awk -v t="$t" -v s="$stopped" 'BEGIN { exit !(t > s + 1.0) }'; then
			return 0
		fi
		sleep 0.1
	done
	echo "no scrape 1 s after the traffic stopped (newest: $t, stopped $stopped)"
	return 1
}
check two_scrapes_after_traffic two_scrapes
targets=$(curl -s $PROM/api/v1/targets)
expect_eq target_up "$(echo "$targets" | jq -r '[.data.activeTargets[] | .health + "/" + .lastError] | join(" ")')" "up/"

for p in a b c; do
	pod=${PREFIX}$p
	show=$(pi -N $N -j pod show $pod)
	want=$(echo "$show" | jq -r '.stats | "\(.egress_packets) \(.ingress_packets) \(.egress_bytes) \(.ingress_bytes)"')
	got="$(pq "podinject_pod_packets_total{pod=\"$pod\",direction=\"egress\"}") $(pq "podinject_pod_packets_total{pod=\"$pod\",direction=\"ingress\"}") $(pq "podinject_pod_bytes_total{pod=\"$pod\",direction=\"egress\"}") $(pq "podinject_pod_bytes_total{pod=\"$pod\",direction=\"ingress\"}")"
	expect_eq packets_bytes_$p "$got" "$want"
	want=$(echo "$show" | jq -r '.stats.drops | to_entries[] | "\(.key)=\(.value)"' | sort)
	expect_eq drops_all_reasons_$p "$(pq_map "podinject_pod_drops_total{pod=\"$pod\"}" reason)" "$want"
	want=$(echo "$show" | jq -r '.conntrack | "\(.opening) \(.established) \(.closing)"')
	got="$(pq "podinject_pod_tracked_flows{pod=\"$pod\",state=\"opening\"}") $(pq "podinject_pod_tracked_flows{pod=\"$pod\",state=\"established\"}") $(pq "podinject_pod_tracked_flows{pod=\"$pod\",state=\"closing\"}")"
	expect_eq tracked_flows_$p "$got" "$want"
done
# the numbers the traffic made, not only the same as pod show's
expect_eq known_drops "$(pq "podinject_pod_drops_total{pod=\"${PREFIX}a\",reason=\"policy\"}")/$(pq "podinject_pod_drops_total{pod=\"${PREFIX}c\",reason=\"spoofed\"}")" "7/10"
# a's flows: to b port 7002, and the one c opened as a (port 7004);
# denied datagrams open none
expect_eq known_flows "$(pq "podinject_pod_tracked_flows{pod=\"${PREFIX}a\",state=\"established\"}")" 2

rule() {	# rule POD ID: "packets bytes" from policy list
	pi -N $N -j policy list "$1" | jq -r ".[] | select(.id == $2) | \"\(.packets) \(.bytes)\""
}
prom_rule() {	# prom_rule POD DIR ID ACTION
	local sel="pod=\"$1\",direction=\"$2\",rule=\"$3\",action=\"$4\""
	echo "$(pq "podinject_policy_rule_packets_total{$sel}") $(pq "podinject_policy_rule_bytes_total{$sel}")"
}
want=$(rule ${PREFIX}b "$allow")
expect_eq allow_rule "$(prom_rule ${PREFIX}b ingress "$allow" allow)" "$want"
expect_eq allow_rule_known "${want%% *}" 25
want=$(rule ${PREFIX}a "$deny")
expect_eq deny_rule "$(prom_rule ${PREFIX}a egress "$deny" deny)" "$want"
expect_eq deny_rule_known "${want%% *}" 7

want=$(pi -N $N -j inject stats | jq -r '.[] | "\(.injector) \(.as) \(.path) \(.packets) \(.bytes) \(.drops["redirect-refused"])"')
path=$(echo "$want" | awk '{print $3}')
sel="injector=\"${PREFIX}c\",as_pod=\"${PREFIX}a\",path=\"$path\""
expect_eq injected "${PREFIX}c ${PREFIX}a $path $(pq "podinject_inject_packets_total{$sel}") $(pq "podinject_inject_bytes_total{$sel}") $(pq "podinject_inject_drops_total{$sel,reason=\"redirect-refused\"}")" "$want"
expect_eq injected_known "$(echo "$want" | awk '{print $4}')" 5

abi=$(sed -n 's/^#define PI_ABI_VERSION[[:space:]]*\([0-9]*\).*/\1/p' "$ROOT/include/podinject_abi.h")
expect_eq build_info_and_pods "$(pq "podinject_build_info{abi=\"$abi\"}")/$(pq "podinject_node_pods{node=\"$N\"}")" "1/3"

# the same text on stdout without --listen
expect_eq stdout_mode "$(pi -N $N metrics | grep '^podinject_pod_drops_total{node="'$N'",pod="'${PREFIX}c'",reason="spoofed"}')" \
	"podinject_pod_drops_total{node=\"$N\",pod=\"${PREFIX}c\",reason=\"spoofed\"} 10"

# A captured pod's proxy series, all at 0 with no flow: flows of both
# tables, its limit drops, the share each table holds for one pod, and
# the node's entries without a timer (none: no flow was made)
# (the proxy's namespace gets IPv6 routes: IPv6 back on there, the
# comparisons are done)
in_ns ${PREFIX}c sysctl -qw net.ipv6.conf.all.disable_ipv6=0 net.ipv6.conf.default.disable_ipv6=0
check proxy_add pi -N $N proxy add ${PREFIX}c --port 15001 --for ${PREFIX}b --match tcp dport 9
max_flows=$(sed -n 's/^#define PI_MAX_FLOWS[[:space:]]*\([0-9]*\).*/\1/p' "$ROOT/include/podinject_abi.h")
expect_eq proxy_series "$(pi -N $N metrics | grep '^podinject_proxy' | sed 's/{node="'$N'",\?/{/' | LC_ALL=C sort | tr '\n' ';')" \
	"podinject_proxy_flow_sweep_expired_total{} 0;podinject_proxy_flows_limit{} $((max_flows / 8));podinject_proxy_flows_untimed_total{} 0;podinject_proxy_flows_untimed{} 0;podinject_proxy_flows{pod=\"${PREFIX}b\",proxy=\"${PREFIX}c\",direction=\"outbound\",table=\"client\"} 0;podinject_proxy_flows{pod=\"${PREFIX}b\",proxy=\"${PREFIX}c\",direction=\"outbound\",table=\"upstream\"} 0;podinject_proxy_limit_drops_total{pod=\"${PREFIX}b\",proxy=\"${PREFIX}c\",direction=\"outbound\"} 0;"

# The gauge of untimed entries is the sweep's last round's count, which
# stays until the next round (up to the backstop's 30 s away): entries
# taken out since, at their close, are not counted. The round's count
# written as 3 (an update from userspace: the sweep's timer is freed,
# which nothing here needs) with both tables empty.
sweep_pin="$(node_pin_dir $N)/inject/flow_sweep"
bpftool map update pinned "$sweep_pin" key hex 00 00 00 00 value hex \
	$(printf '00 %.0s' $(seq 20)) 03 $(printf '00 %.0s' $(seq 75))
expect_eq untimed_gauge_at_most_held "$(bpftool map lookup pinned "$sweep_pin" key hex 00 00 00 00 -j | jq '.formatted.value.pending // .value.pending')/$(pi -N $N metrics | sed -n 's/^podinject_proxy_flows_untimed{node="'$N'"} //p')" "3/0"

# One client holding connections open (a pod that reaches the node's
# address) takes a few of the server's slots, not all: a scrape from
# another address is answered at once, not after the idle timeout.
hold_conns() {	# 1100 idle connections from 127.0.0.1, held until killed
	local fd
	ulimit -n 4096
	for _ in $(seq 1100); do
		exec {fd}<>/dev/tcp/127.0.0.1/$MPORT || break
	done 2>/dev/null
	echo held >"$TMP/held"
	exec sleep 120
}
hold_conns &
holder=$!
for _ in $(seq 300); do [ -e "$TMP/held" ] && break; sleep 0.1; done
sleep 0.5	# the server's thread takes the accept queue in
expect_eq scrape_beside_idle_holder "$(curl -s --max-time 5 --interface 127.0.0.2 -o /dev/null -w '%{http_code}' http://127.0.0.1:$MPORT/metrics)" 200
kill $holder
wait $holder 2>/dev/null

# A node gone under a running server: 503 and why, not a stale answer
pi -N $N node down >/dev/null
expect_eq node_gone_503 "$(curl -s -w ' %{http_code}' http://127.0.0.1:$MPORT/metrics)" \
	"node '$N' cannot be read: No such file or directory
 503"

# --- SIGTERM: the server stops, says so, exits 0, the port is free --------

kill -TERM $SERVER_PID
stopped_ok=timeout
for _ in $(seq 50); do
	if ! kill -0 $SERVER_PID 2>/dev/null; then
		wait $SERVER_PID
		stopped_ok="exit $?"
		break
	fi
	sleep 0.1
done
SERVER_PID=
expect_eq sigterm_stops "$stopped_ok/$(grep -c '^stopped' "$TMP/server.err")" "exit 0/1"
if listening $MPORT; then fail sigterm_port_freed "port $MPORT still open"; else pass sigterm_port_freed; fi
