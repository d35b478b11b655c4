#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Synthetic flows: probes leave a pod's egress datapath as the pod's own
# packets; their answers are taken before the pod sees them.
#
#   node tq-x: tq-a 10.244.0.10 (probed)   tq-b 10.244.0.11 (server)
#              tq-c 10.244.0.12            tq-d 10.244.0.13
#              probe 10.244.0.20 (a pod of that name: host device pi-probe;
#                     the probe's own pair is pi_probe <-> pi_probe_tx)
#   node tq-y: tq-r 10.244.1.10, over the wire
. "$(dirname "$0")/lib.sh"
require_root
EXPECT=230
PREFIX=tq-
X=tq-x
Y=tq-y
B=10.244.0.11

make_wire $X $Y
check up_x node_up $X --uplink wire0 ${NODE_ARGS:-}
check up_y node_up $Y --uplink wire0 ${NODE_ARGS:-}
pi -N $X pod add tq-a --ip 10.244.0.10 --ip6 fd00::a >/dev/null
pi -N $X pod add tq-b --ip $B --ip6 fd00::b >/dev/null
pi -N $X pod add tq-c --ip 10.244.0.12 >/dev/null
pi -N $X pod add tq-d --ip 10.244.0.13 >/dev/null
pi -N $Y pod add tq-r --ip 10.244.1.10 >/dev/null
# 10.244.0.99 is no pod's: the datapath sends it out of the uplink, where
# an address nobody has would be answered after the neighbour's 3 s of
# failed resolution, by the node's ICMP host unreachable (a verdict,
# "refused"). A neighbour entry with a MAC nobody on the wire has makes it
# silent for good, as the probes below that wait for it need.
ip -n $X neigh replace 10.244.0.99 lladdr 02:00:00:00:00:99 dev wire0 nud permanent

probe() { pi -N $X -j probe "$@"; }
verdicts() { jq -r '[.probes[].verdict] | unique | join(",")'; }

# The servers live until the matrix below: 30 s was enough on a host, not
# under the lab's emulation, where the matrix found nothing listening.
ip netns exec tq-b "$PINET" tcp-server 8080 --count 1000 --timeout 300000 >/dev/null 2>&1 &
srv=$!
# (ip netns exec, not in_ns: a function in the background is a subshell,
# and `kill $srv6` stopped it, not the server, which outlived the suite)
ip netns exec tq-b "$PINET" tcp-server -6 8080 --count 1000 --timeout 300000 >/dev/null 2>&1 &
srv6=$!
wait_tcp_listen tq-b 8080 >/dev/null
tcp_a=$(in_ns tq-a awk '/^Tcp:/ {n++} n == 2 && /^Tcp:/ {print $11; exit}' /proc/net/snmp)

out=$(probe --from tq-a --to $B:8080 --count 5 --interval 20)
expect_eq tcp_answered "$(verdicts <<<"$out")" answered
# An RTT is a measurement: positive, or null where the answer came faster
# than the clock's step (a guest on jiffies); never a 0. On a
# high-resolution clock every answer is measured.
rtts=$(jq -c '{r: [.probes[].rtt_ms], res: .summary.rtt_resolution_ns}' <<<"$out")
expect_eq rtt_measured_in_kernel "$(jq -r '.summary.rtt_measured' <<<"$out" | grep -o '^in the kernel (bpf_ktime_get_ns), from the probe.s injection')" \
	"in the kernel (bpf_ktime_get_ns), from the probe's injection"
check tcp_rtt_positive sh -c "echo '$rtts' | jq -e '(.r | all(. == null or . > 0)) and .res > 0 and (.res > 1000000 or (.r | all(. != null)))' >/dev/null || { echo '$rtts'; false; }"
out=$(probe --from tq-a --to $B:8081 --count 3 --interval 20)
expect_eq tcp_closed_port_refused "$(verdicts <<<"$out")" refused
# A refusal says what refused: here B's reset (and no ICMP fields)
expect_eq tcp_closed_port_refused_by_rst "$(jq -c '[.probes[] | [.refused_by, has("icmp_type")]] | unique' <<<"$out")" '[["rst",false]]'
out=$(probe --from tq-a --to '[fd00::b]:8080' --count 2)
expect_eq tcp_v6_answered "$(verdicts <<<"$out")" answered
out=$(probe --from tq-a --to $B --count 3 --interval 20)
expect_eq icmp_answered "$(verdicts <<<"$out")" answered
out=$(probe --from tq-a --to fd00::b --count 2)
expect_eq icmp_v6_answered "$(verdicts <<<"$out")" answered

# A source port below the probe range, or a port for ICMP: refused (exit
# 2). Before, the first ran with no send time stamped (every RTT null,
# "answers came faster than the clock's step") and no trace, on a port of
# the pod's own; the second dropped the port without a word.
rc_of() { "$@" >/dev/null 2>&1; echo $?; }
expect_eq probe_sport_below_range "$(rc_of pi -N $X probe --from tq-a --to $B:8080 --sport 40000)" 2
expect_eq probe_icmp_port_refused "$(rc_of pi -N $X probe --from tq-a --to $B:8080 --proto icmp)/$(rc_of pi -N $X probe matrix --proto icmp --port 8080)" 2/2

# A's own stack received none of it: its TCP input counter did not move.
tcp_a2=$(in_ns tq-a awk '/^Tcp:/ {n++} n == 2 && /^Tcp:/ {print $11; exit}' /proc/net/snmp)
expect_eq pod_stack_saw_no_replies "$tcp_a2" "$tcp_a"

# UDP: a socket of A's on the probe's very port gets nothing.
in_ns tq-b "$PINET" udp-echo 5353 3 5000 >/dev/null &
echo_pid=$!
in_ns tq-a "$PINET" udp-recv 61234 3 2500 >/tmp/tq$$.udp &
recv_pid=$!
sleep 0.3
# (--timeout 4000: an emulated guest once took over the default second to
# answer one of them; an answer in time costs no wait)
out=$(probe --from tq-a --to $B:5353 --proto udp --sport 61234 --count 3 --interval 50 --timeout 4000)
wait $echo_pid $recv_pid
expect_eq udp_answered "$(verdicts <<<"$out")" answered
expect_eq udp_pod_socket_got_nothing "$(head -n 1 /tmp/tq$$.udp)" "received 0"
rm -f /tmp/tq$$.udp
# Probes of one --sport are one flow, one key: with an answer slower than
# the interval (the echo holds each 300 ms), a probe sent while the last
# was in flight took its key, and its answer: the first probes went
# unanswered and the last got the first's answer. Now each waits for the
# last one's answer (or timeout), and each gets its own.
in_ns tq-b "$PINET" udp-echo --delay 300 5354 3 6000 >/dev/null &
echo_pid=$!
sleep 0.3
out=$(probe --from tq-a --to $B:5354 --proto udp --sport 61235 --count 3 --interval 50 --timeout 2000)
wait $echo_pid
expect_eq udp_sport_slow_each_answered "$(jq -r '[.probes[].verdict] | join(",")' <<<"$out")" "answered,answered,answered"
expect_eq udp_sport_slow_own_rtt "$(jq '[.probes[] | select(.rtt_ms >= 250)] | length' <<<"$out")" 3

# TCP with one --sport: an answer later than --timeout arrives while the
# next probe of the same ports waits. The server's answers are held back
# by a token bucket on its eth0 (60 bytes, 62.5 bytes/s): the first probe's
# SYN-ACK (58 bytes: MSS only, as the probe's SYN) goes at once, the
# second's waits ~0.9 s, past its 0.6 s, into the middle of the third
# probe's wait (0.6 to 1.2 s). That SYN-ACK acknowledges the second probe's
# SYN: before, the third probe took it as its own answer. Now an answer is
# a probe's only when it acknowledges its SYN (the SYN-ACK's or RST's ack
# is its ISN + 1), and the late SYN-ACK's half-open connection is reset
# all the same. (The third probe's own SYN met the server's half-open
# connection of the second, and got no answer of its own.) The same with
# RSTs from a closed port (54 bytes, the second's ~0.8 s late): the second
# probe's RST reached the third. Each check also asks the bucket whether
# the late answer left it before the probes ended ("late-sent": 2 packets
# out), or the check would prove nothing. The lab's own kernel is built
# without sch_tbf: SKIP there, and only for a qdisc the kernel lacks.
slow_answers() { tc -n tq-b qdisc replace dev eth0 root tbf rate 500bit burst 60 limit 3000 2>&1; }
late_sent() {
	local n
	n=$(tc -n tq-b -s qdisc show dev eth0 | awk '/Sent/ { print $4; exit }')
	[ "${n:-0}" -ge 2 ] && echo late-sent || echo "late-not-sent:$n"
}
if tbf_err=$(slow_answers); then
	out=$(probe --from tq-a --to $B:8080 --sport 61236 --count 3 --interval 20 --timeout 600)
	expect_eq tcp_sport_late_synack_not_taken "$(jq -r '[.probes[].verdict] | join(",")' <<<"$out") $(late_sent)" "answered,no-answer,no-answer late-sent"
	sleep 0.5
	expect_eq tcp_sport_late_synack_reset "$(in_ns tq-b ss -Htn state syn-recv | wc -l)" 0
	tc -n tq-b qdisc del dev eth0 root
	slow_answers >/dev/null
	out=$(probe --from tq-a --to $B:8082 --sport 61237 --count 3 --interval 20 --timeout 600)
	expect_eq tcp_sport_late_rst_not_taken "$(jq -r '[.probes[].verdict] | join(",")' <<<"$out") $(late_sent)" "refused,no-answer,no-answer late-sent"
	tc -n tq-b qdisc del dev eth0 root
elif grep -qi "qdisc kind is unknown\|No such file" <<<"$tbf_err"; then
	for t in synack_not_taken synack_reset rst_not_taken; do
		skip tcp_sport_late_$t "no tbf qdisc in this kernel (CONFIG_NET_SCH_TBF): nothing here holds an answer back"
	done
else
	for t in synack_not_taken synack_reset rst_not_taken; do
		fail tcp_sport_late_$t "tc qdisc add tbf: $tbf_err"
	done
fi

# Denied by A's policy: reported with the rule that decided, out of two
# deny rules, each naming only its own port; then a third rule put first
# (`at 1`) that matches port 8080 too decides instead, and the rules'
# counters say so.
rules() { jq -r '[.probes[].rule] | unique | map(tostring) | join(",")'; }
rule_pk() { pi -N $X -j policy list tq-a | jq ".[] | select(.id == $1) | .packets"; }
id=$(pi -N $X -j policy add tq-a deny to $B/32 proto tcp port 8080 | jq .id)
id2=$(pi -N $X -j policy add tq-a deny to $B/32 proto tcp port 8081 | jq .id)
out=$(probe --from tq-a --to $B:8080 --count 2)
expect_eq policy_verdict "$(verdicts <<<"$out")" dropped-by-policy
expect_eq policy_rule_named "$(rules <<<"$out")" "$id"
out=$(probe --from tq-a --to $B:8081 --count 2)
expect_eq policy_second_rule_named "$(verdicts <<<"$out") $(rules <<<"$out")" "dropped-by-policy $id2"
id3=$(pi -N $X -j policy add tq-a deny to 10.244.0.0/24 proto tcp at 1 | jq .id)
out=$(probe --from tq-a --to $B:8080 --count 3)
expect_eq policy_at_1_decides "$(verdicts <<<"$out") $(rules <<<"$out")" "dropped-by-policy $id3"
expect_eq policy_at_1_counted "$(rule_pk "$id") $(rule_pk "$id2") $(rule_pk "$id3")" "2 2 3"
pi -N $X policy del tq-a all >/dev/null

# Nobody there: no answer, within the timeout. The timeout is longer than
# a failed neighbour resolution (3 s): the interrupt checks below rely on
# a probe to it that ends only by its timeout or a signal.
t0=$(now_ms)
out=$(probe --from tq-a --to 10.244.0.99 --count 1 --timeout 3500)
t1=$(now_ms)
expect_eq silent_no_answer "$(verdicts <<<"$out")" no-answer
expect_lt silent_within_timeout "$(sub "$t1" "$t0")" 5500

# Across the uplink: source here, destination on the other node.
out=$(probe --from tq-a --to 10.244.1.10 --count 3 --interval 20)
expect_eq cross_node_answered "$(verdicts <<<"$out")" answered
# and the source on the other node
out=$(pi -N $Y -j probe --from tq-r --to $B --count 2)
expect_eq from_other_node_answered "$(verdicts <<<"$out")" answered

# 1000 probes in a burst: every answer matched to its probe.
out=$(probe --from tq-a --to $B --count 1000 --interval 0 --timeout 3000)
expect_eq burst_1000_answered "$(jq .summary.answered <<<"$out")" 1000
rtts=$(jq -c '.summary | {rtt_ms, rtt_resolution_ns, rtt_under_resolution}' <<<"$out")
check burst_rtt_plausible sh -c "echo '$rtts' | jq -e '(.rtt_ms == null or (.rtt_ms.min > 0 and .rtt_ms.p99 < 1000)) and (.rtt_resolution_ns > 1000000 or .rtt_under_resolution == 0)' >/dev/null || { echo '$rtts'; false; }"

# 20 000 in a burst: the sends' events and the answers (two or more a
# probe) are more than the ring buffer holds, and nothing read it before
# the sends ended: the datapath dropped the answers it had no room to
# tell, and about 16 000 came back "answered" (before 2026-12-06). Read
# as they come, every one is.
# (A probe can also be lost to a device's backlog, netdev_max_backlog, on
# its way: under the lab's emulation softirqs fall behind such a burst,
# and debian-6.1 lost 7. Those are counted by the kernel, and the ring
# buffer's loss was a fixed 3 617: checked apart.)
backlog_drops() {
	local s=0 a b rest
	while read -r a b rest; do s=$((s + 0x$b)); done </proc/net/softnet_stat
	echo $s
}
# icmp_counts NS: echoes in, replies out, as B's kernel counts them
icmp_counts() {
	in_ns "$1" cat /proc/net/snmp | awk '$1 == "Icmp:" && $2 !~ /^[0-9]/ { for (i = 2; i <= NF; i++) name[i] = $i }
		$1 == "Icmp:" && $2 ~ /^[0-9]/ { for (i = 2; i <= NF; i++) v[name[i]] = $i; print v["InEchos"] "/" v["OutEchoReps"] }'
}
bl0=$(backlog_drops)
ic0=$(icmp_counts tq-b)
out=$(probe --from tq-a --to $B --count 20000 --interval 0 --timeout 10000)
got=$(jq .summary.answered <<<"$out")
bl=$(sub "$(backlog_drops)" "$bl0")
ic1=$(icmp_counts tq-b)
if [ "$got" = 20000 ] || { is_num "$got" && is_num "$bl" && [ "$got" -gt 16383 ] && [ $((got + bl)) -ge 20000 ]; }; then
	pass burst_20000_answered
else
	fail burst_20000_answered "got '$got', want 20000 (backlog drops meanwhile: $bl; B's echoes in, replies out: $ic0 -> $ic1; $(jq -c '.summary | del(.rtt_ms)' <<<"$out"))"
fi
# More TCP or UDP probes in flight than the probe range has ports: the
# one 4 536 later has the same flow, one key. Answers held back (a slow
# qdisc at B: about 2.5 s for 5 000 of them) came after that later probe
# took the key over: they were credited to it, and those probes went "no
# answer" (before 2026-12-06). It waits for the earlier one now. (UDP to
# an echo server with room for the whole burst: the kernel's resets
# from a closed port are charged to one socket, whose send buffer holds
# only about 1 000 of them queued.)
udp_burst_slow() {
	local echo_pid out
	in_ns tq-b "$PINET" udp-echo 5355 5000 30000 >/dev/null &
	echo_pid=$!
	sleep 0.3
	tc -n tq-b qdisc replace dev eth0 root tbf rate 1mbit burst 1600 limit 2000000 2>&1 || { kill $echo_pid; return; }
	out=$(probe --from tq-a --to $B:5355 --proto udp --count 5000 --interval 0 --timeout 15000)
	tc -n tq-b qdisc del dev eth0 root
	kill $echo_pid 2>/dev/null
	wait $echo_pid 2>/dev/null
	jq -r '"\(.summary.answered) \([.probes[] | .rtt_ms // 0] | max > 1000)"' <<<"$out"
}
out=$(udp_burst_slow)
case $out in
*"qdisc kind is unknown"* | *"No such file"*)
	skip udp_burst_past_the_ports "no tbf qdisc in this kernel (CONFIG_NET_SCH_TBF): nothing here holds an answer back" ;;
*) expect_eq udp_burst_past_the_ports "$out" "5000 true" ;;
esac

# An answer the datapath takes when the node's probe event ring is full
# (1 MiB: 32 768 events) is not heard, but counted on its flow: the probe
# says "unreported", not "no-answer" (a drop the pod's datapath never
# made). The echo server answers each of two probes with 50 000 copies,
# 2 s after it got it; the probe, stopped once both were sent, reads
# nothing meanwhile: the first flood fills the ring (probe 1 answered by
# its first copy), the second finds it full.
ring_full() {
	local echo_pid probe_pid out log=/tmp/tq-ring.$$ i
	ip netns exec tq-b "$PINET" udp-echo --delay 2000 --copies 50000 5356 2 60000 >/dev/null 2>$log &
	echo_pid=$!
	sleep 0.3
	"$PI" -N $X -j probe --from tq-a --to $B:5356 --proto udp --count 2 --interval 0 --timeout 3000 >$log.out &
	probe_pid=$!
	# both probes sent: the first read, the second queued at the server
	for i in $(seq 400); do
		grep -q 'received 1' $log &&
			[ "$(ip netns exec tq-b ss -u -l -n 'sport = :5356' | awk 'NR == 2 {print $2}')" != 0 ] && break
		sleep 0.01
	done
	kill -STOP $probe_pid
	wait $echo_pid
	kill -CONT $probe_pid
	wait $probe_pid
	out=$(jq -r '"\([.probes[].verdict] | join(",")) \(.summary.unreported) \(.summary.loss_pct)"' $log.out)
	rm -f $log $log.out
	echo "$out"
}
expect_eq probe_ring_full_unreported "$(ring_full)" "answered,unreported 1 0"
# A probe killed in an answer flood leaves the ring full of events nobody
# will read. The next probe reads them away before it sends (before
# 2026-12-06 its injection's event found no room: its answer had no RTT,
# and the summary called it faster than the clock's step). The echo
# answers 1.5 s late, when the probe is stopped.
ring_left_full() {
	local echo_pid probe_pid out log=/tmp/tq-ringk.$$ i
	ip netns exec tq-b "$PINET" udp-echo --delay 1500 --copies 50000 5357 1 60000 >/dev/null 2>$log &
	echo_pid=$!
	sleep 0.3
	"$PI" -N $X -j probe --from tq-a --to $B:5357 --proto udp --timeout 30000 >/dev/null 2>&1 &
	probe_pid=$!
	for i in $(seq 400); do
		grep -q 'received 1' $log && break
		sleep 0.01
	done
	kill -STOP $probe_pid
	wait $echo_pid
	kill -KILL $probe_pid
	wait $probe_pid 2>/dev/null
	ip netns exec tq-b "$PINET" udp-echo 5358 1 10000 >/dev/null 2>&1 &
	echo_pid=$!
	sleep 0.3
	out=$(probe --from tq-a --to $B:5358 --proto udp --timeout 3000)
	wait $echo_pid
	rm -f $log
	jq -r '"\(.probes[0].verdict) \(.probes[0].rtt_ms != null or .summary.rtt_resolution_ns > 1000000) \(.summary.rtt_injection_unheard)"' <<<"$out"
}
expect_eq probe_after_killed_flood_timed "$(ring_left_full)" "answered true 0"

# probe --trace: every hook the probe and its answer met, in order. Both
# pods first get a rule that matches nothing here: a pod without rules is
# not tracked, and its decisions say so (checked after).
ta=$(pi -N $X -j policy add tq-a ingress deny from 192.0.2.1/32 | jq .id)
tb=$(pi -N $X -j policy add tq-b ingress deny from 192.0.2.1/32 | jq .id)
out=$(probe --from tq-a --to $B:8080 --trace)
expect_eq trace_summary_kept "$(verdicts <<<"$out")" answered
check trace_starts_at_injection jq -e '.probes[0].trace[0] | .hook == "inject" and .way == "out" and .verdict == "redirect"' <<<"$out"
check trace_out_decisions jq -e '[.probes[0].trace[] | select(.way == "out" and .event == "policy") | .pod + ":" + .dir + ":" + .action + ":" + .decided_by] | index("tq-a:egress:allow:rules") != null and index("tq-b:ingress:allow:rules") != null' <<<"$out"
check trace_out_redirected jq -e '[.probes[0].trace[] | select(.way == "out" and .hook == "pod-egress")][0] | .pod == "tq-a" and .verdict == "redirect"' <<<"$out"
echo "$out" >/tmp/tq$$.t
check trace_answer_taken sh -c 'jq -e "[.probes[0].trace[] | select(.way == \"back\")] | (.[-1] | .hook == \"pod-reply\" and .verdict == \"taken\" and .pod == \"tq-a\" and .tcp_flags == \"SA\") and (map(select(.event == \"policy\") | .decided_by) | all(. == \"tracked flow\"))" "$1" >/dev/null || { jq -c "[.probes[0].trace[] | select(.way == \"back\")]" "$1"; false; }' _ /tmp/tq$$.t
rm -f /tmp/tq$$.t
pi -N $X policy del tq-a ingress "$ta" >/dev/null
pi -N $X policy del tq-b ingress "$tb" >/dev/null
out=$(probe --from tq-a --to $B:8080 --trace)
check trace_no_rules_untracked sh -c 'printf "%s" "$1" | jq -e "[.probes[0].trace[] | select(.event == \"policy\") | .decided_by] | length >= 4 and all(. == \"no rules\")" >/dev/null || { printf "%s" "$1" | jq -c "[.probes[0].trace[] | select(.event == \"policy\")]"; false; }' _ "$out"
did=$(pi -N $X -j policy add tq-a deny to $B/32 proto tcp port 8082 | jq .id)
out=$(probe --from tq-a --to $B:8082 --trace)
check trace_denied_ends_at_drop jq -e --argjson id "$did" '.probes[0].trace as $t | ($t[-1] | .hook == "pod-egress" and .verdict == "drop") and ([$t[] | select(.event == "drop")][0] | .reason == "policy" and .rule == $id) and ([$t[] | select(.way == "back")] | length == 0)' <<<"$out"
pi -N $X policy del tq-a egress "$did" >/dev/null
out=$(probe --from tq-a --to $B:8081 --trace)
check trace_refused_ends_with_reset jq -e '.probes[0].verdict == "refused" and (.probes[0].trace[-1] | .hook == "pod-reply" and .verdict == "taken" and (.tcp_flags | contains("R")))' <<<"$out"
check trace_only_when_asked jq -e '.probes[0] | has("trace") | not' <<<"$(probe --from tq-a --to $B:8080)"
# ICMP has no ports in the events: each echo probe's trace holds its own
# packets only (one injection each, not the run's three), told apart by
# when they came; and an ICMP error answering a UDP probe (a closed port)
# is in its trace, taken at the pod, as a TCP probe's reset is.
out=$(probe --from tq-a --to $B --count 3 --interval 300 --trace)
expect_eq trace_icmp_each_its_own "$(jq -c '[.probes[] | .verdict + ":" + ([.trace[] | select(.hook == "inject")] | length | tostring) + ":" + ([.trace[] | select(.hook == "pod-reply" and .verdict == "taken")] | length | tostring)]' <<<"$out")" \
	'["answered:1:1","answered:1:1","answered:1:1"]'
out=$(probe --from tq-a --to $B:5399 --proto udp --trace)
expect_eq trace_udp_icmp_error_taken "$(jq -c '.probes[0] | [.verdict, (.trace[-1] | .way + ":" + .hook + ":" + .verdict)]' <<<"$out")" \
	'["refused","back:pod-reply:taken"]'
# ... and says what the error was: B's port unreachable, in the verdict and
# at the hook that took it
expect_eq udp_closed_port_refused_why "$(jq -c '.probes[0] | [.refused_by, .icmp_type, .icmp_code, .icmp, .icmp_code_name, (.trace[-1] | .icmp, .icmp_code)]' <<<"$out")" \
	'["icmp",3,3,"unreachable","port-unreachable","unreachable",3]'
# Refusals told apart where a node's own stack answers (a node without an
# uplink hands it what is for no pod): a route that rejects gives the
# ICMP error of its kind, and the probe says which (an operator's
# `prohibit` from a missing route); a blackhole gives none. IPv4 errors
# for others' packets need forwarding on (ip_error).
Z=tq-z
check up_z node_up $Z ${NODE_ARGS:-}
pi -N $Z pod add tq-e --ip 10.244.2.10 --ip6 fd00:2::10 >/dev/null
ip netns exec $Z sysctl -qw net.ipv4.ip_forward=1
ip -n $Z route add prohibit 10.244.2.99/32
ip -n $Z route add unreachable 10.244.2.98/32
ip -n $Z route add blackhole 10.244.2.97/32
ip -n $Z -6 route add prohibit fd00:2::99/128
ip -n $Z -6 route add unreachable fd00:2::98/128
ip -n $Z -6 route add blackhole fd00:2::97/128
why() { pi -N $Z -j probe --from tq-e --to "$1" --proto "$2" --timeout 500 | jq -r '.probes[0] | [.verdict, .refused_by, .icmp_type, .icmp_code, .icmp_code_name] | map(. // "-" | tostring) | join(" ")'; }
expect_eq refused_why_v4 "$(why 10.244.2.99:80 tcp), $(why 10.244.2.98:53 udp), $(why 10.244.2.97:80 tcp)" \
	"refused icmp 3 13 admin-prohibited, refused icmp 3 1 host-unreachable, no-answer - - - -"
expect_eq refused_why_v6 "$(why '[fd00:2::99]:80' tcp), $(why '[fd00:2::98]:53' udp), $(why '[fd00:2::97]:80' tcp)" \
	"refused icmp 1 1 admin-prohibited, refused icmp 1 0 no-route, no-answer - - - -"
expect_eq refused_why_text "$(pi -N $Z probe --from tq-e --to 10.244.2.99:80 | head -n 1 | grep -o 'refused (.*)')" \
	"refused (ICMP unreachable, admin-prohibited)"
check down_z pi -N $Z node down
ip netns del $Z
# The pod's own pings to the same address while echo probes are traced:
# each probe's hooks are its own echo's (the datapath reads an echo's id
# where it reads the frame), not the pings' (before, every echo between
# the probe's leaving and the next probe was the probe's).
in_ns tq-a ping -q -i 0.02 -c 150 $B >/dev/null 2>&1 &
PING=$!
sleep 0.3
out=$(probe --from tq-a --to $B --count 3 --interval 300 --trace)
kill $PING 2>/dev/null
wait $PING 2>/dev/null
expect_eq trace_icmp_pings_apart "$(jq -c '[.probes[] | .verdict + ":" + ([.trace[] | select(.hook == "pod-egress" and .way == "out")] | length | tostring) + ":" + ([.trace[] | select(.hook == "pod-reply")] | length | tostring)]' <<<"$out")" \
	'["answered:1:1","answered:1:1","answered:1:1"]'
expect_eq trace_turned_off "$(monitor_kinds "$(node_pin_dir $X)")" 0

# The matrix over 4 pods, one pair blocked by policy: exactly that pair.
id=$(pi -N $X -j policy add tq-c deny to 10.244.0.13/32 proto tcp port 8080 | jq .id)
out=$(pi -N $X -j probe matrix --proto tcp --port 8080 --timeout 1500)
expect_eq matrix_pairs "$(jq '[.results[] | select(.verdict != "self")] | length' <<<"$out")" 12
expect_eq matrix_blocked_pair "$(jq -r '[.results[] | select(.verdict == "dropped-by-policy") | .from + ">" + .to + "#" + (.rule|tostring)] | join(",")' <<<"$out")" \
	"tq-c>10.244.0.13#$id"
expect_eq matrix_others_reached "$(jq '[.results[] | select(.verdict == "answered" or .verdict == "refused")] | length' <<<"$out")" 11
got=$(jq -r '[.results[] | select(.to == "10.244.0.11" and .verdict == "answered") | .from] | join(",")' <<<"$out")
[ "$got" = "tq-a,tq-c,tq-d" ] ||	# what there was instead, and whether the server still listened
	got="$got ($(jq -r '[.results[] | select(.to == "10.244.0.11") | .from + ":" + .verdict] | join(",")' <<<"$out"); listening: $(in_ns tq-b ss -Hntl "( sport = :8080 )" | wc -l))"
expect_eq matrix_server_answers "$got" "tq-a,tq-c,tq-d"
pi -N $X probe matrix --proto tcp --port 8080 --timeout 1500 >/tmp/tq$$.m
check matrix_table grep -q "^tq-c .*policy#$id" /tmp/tq$$.m
rm -f /tmp/tq$$.m
pi -N $X policy del tq-c egress "$id" >/dev/null

# The same over ICMP: tq-c may not ping 10.244.0.13, and still answers its
# pings (the reply of a flow the other pod opened), so exactly one pair.
id=$(pi -N $X -j policy add tq-c deny to 10.244.0.13/32 proto icmp | jq .id)
out=$(pi -N $X -j probe matrix --proto icmp --timeout 1500)
expect_eq matrix_icmp_blocked_pair "$(jq -r '[.results[] | select(.verdict == "dropped-by-policy") | .from + ">" + .to + "#" + (.rule|tostring)] | join(",")' <<<"$out")" \
	"tq-c>10.244.0.13#$id"
expect_eq matrix_icmp_others_answered "$(jq '[.results[] | select(.verdict == "answered")] | length' <<<"$out")" 11
expect_eq matrix_icmp_blocked_answers_back "$(jq -r '[.results[] | select(.from == "tq-d" and .to == "10.244.0.12") | .verdict] | join(",")' <<<"$out")" answered
pi -N $X policy del tq-c egress "$id" >/dev/null
# An IPv6 address among the destinations: tq-c and tq-d have no IPv6 to
# send from, so their cells are not sent, no loss (before 2026-12-06:
# "no-answer", counted as sent and lost)
out=$(pi -N $X -j probe matrix --to fd00::b --timeout 1500)
expect_eq matrix_v6_from_v4_only_not_sent "$(jq -r '[.results[] | select(.to == "fd00::b" and .from != "tq-b") | .from + ":" + .verdict] | join(",")' <<<"$out") $(jq -c '.summary.not_sent' <<<"$out")" \
	"tq-a:answered,tq-c:not-sent,tq-d:not-sent 2"

# Nothing of the probes stays behind.
check no_probe_device sh -c "! ip -n $X -o link show | grep -q 'pi[-_]probe'"
check no_probe_auth sh -c "$PI -N $X -j inject list | jq -e 'length == 0'"
check no_reply_hooks sh -c "! ls /sys/fs/bpf/podinject/$X/inject | grep -q link_"
# Nor the clsact qdisc a clsact node's reply hook made on a probed pod's
# eth0 (before: it stayed, empty, in pods the probes were not to change);
# a tcx node makes none.
pod_qdiscs() {
	local p
	for p in "$@"; do in_ns $p tc qdisc show dev eth0 | grep -c clsact; done | tr '\n' ' '
}
expect_eq no_pod_qdiscs "$(pod_qdiscs tq-a tq-b tq-c tq-d)" "0 0 0 0 "
check no_qdisc_records sh -c "! ls /sys/fs/bpf/podinject/$X/inject | grep -q qdisc_"

# ---- An interrupted probe removes what it made: SIGINT and SIGTERM, during
# a probe and during a matrix. Compared with the node as it is now.
INJ=/sys/fs/bpf/podinject/$X/inject
node_pins() { find /sys/fs/bpf/podinject/$X | sort; }
# (grep, not comm: the lab's image has no comm)
new_pins() { node_pins | grep -vxF -f <(echo "$pins0") | tr '\n' ' '; }
probe_devs() { ip -n $X -o link show | grep -c 'pi[-_]probe'; }
# the probe's authorisations: those of injectors other than the pod `probe`
auths() { "$PI" -N $X -j inject list | jq '[.[] | select(.injector != "probe")] | length'; }
flows() { bpftool map dump pinned $INJ/probe_flows -j | jq length; }
# the reply hook: a tcx program or (clsact) a filter on eth0, and the
# clsact qdiscs there
eth0_hooks() {
	local p
	for p in tq-a tq-b tq-c tq-d; do
		echo "$p: $("$BUILD/tcx-attach" query $p eth0 ingress 2>/dev/null) $(in_ns $p tc filter show dev eth0 ingress | wc -l) $(in_ns $p tc qdisc show dev eth0 | grep -c clsact)"
	done | tr '\n' ' '
}
# probing_now: the probe's authorisations are there, then a moment to send
probing_now() {
	local i
	for i in $(seq 100); do
		[ "$(auths)" -gt 0 ] && break
		sleep 0.05
	done
	sleep 0.5
}
# One the pod had stays, as does one another program's filter came onto
# while the probe ran, with that filter, whatever the mode.
in_ns tq-c tc qdisc add dev eth0 clsact
out=$(probe --from tq-c --to $B:8080)
expect_eq pod_qdisc_theirs_kept "$(verdicts <<<"$out") $(pod_qdiscs tq-c)" "answered 1 "
in_ns tq-c tc qdisc del dev eth0 clsact
"$PI" -N $X -j probe --from tq-c --to $B:8080 --count 10 --interval 100 >/tmp/tq$$.q 2>/dev/null &
bg=$!
probing_now
fpin=/sys/fs/bpf/${PREFIX}foreign
rm -rf "$fpin"; mkdir -p "$fpin"
"$BUILD/tcx-attach" attach-tc "$BUILD/foreign.bpf.o" foreign_count tq-c eth0 egress "$fpin" 7
wait $bg
expect_eq pod_qdisc_shared_kept "$(verdicts </tmp/tq$$.q) $(pod_qdiscs tq-c)$(in_ns tq-c tc filter show dev eth0 egress | grep -c foreign_count)" "answered 1 1"
in_ns tq-c tc qdisc del dev eth0 clsact
rm -rf "$fpin" /tmp/tq$$.q
# A proxy pod probed: the proxy's assign hook and the probe's reply hook
# are both on its eth0 (clsact: each at a priority of its own; before, the
# reply hook wanted the assign hook's place and the probe failed with
# "File exists"), and both go.
check probed_proxy_proxying pi -N $X proxy add tq-d --port 15001 --for tq-c
out=$(probe --from tq-d --to $B:8080 2>&1)
expect_eq probed_proxy_answered "$(verdicts <<<"$out" 2>/dev/null || echo "$out")" answered
check probed_proxy_unproxied pi -N $X proxy del tq-d --for tq-c
expect_eq probed_proxy_nothing_left "$(pod_qdiscs tq-d)$(in_ns tq-d tc filter show dev eth0 ingress | wc -l)$("$BUILD/tcx-attach" query tq-d eth0 ingress 2>/dev/null)" "0 0"

MODE=$(pi -N $X -j node show | jq -r .attach)
pins0=$(node_pins)
links0=$(links_of_progs $(node_prog_ids $X))
hooks0=$(eth0_hooks)
left_nothing() {	# left_nothing NAME
	expect_eq $1_no_device "$(probe_devs)" 0
	expect_eq $1_no_auth "$(auths)" 0
	expect_eq $1_no_flows "$(flows)" 0
	expect_eq $1_no_pins "$(new_pins)" ""
	# (clsact makes no links: its filters are the hooks below)
	if [ "$MODE" = tcx ]; then
		expect_eq $1_no_links "$(links_of_progs $(node_prog_ids $X))" "$links0"
	else
		skip $1_no_links "clsact: no links; the filters are checked by $1_no_hooks"
	fi
	expect_eq $1_no_hooks "$(eth0_hooks)" "$hooks0"
}
# scrub: removes by hand what a probe that did not clean up left (a build
# before the fix), so that each case below is checked on its own. Nothing
# to do after a probe that cleans up.
scrub() {
	local p k
	ip -n $X link show pi-probe-tx >/dev/null 2>&1 && ip -n $X link del pi-probe-tx
	ip -n $X link del pi_probe 2>/dev/null
	for p in $(new_pins); do rm -rf "$p"; done
	for p in inject_auth probe_flows; do
		bpftool map dump pinned $INJ/$p -j | jq -r '.[].key | join(" ")' |
		while read -r k; do bpftool map delete pinned $INJ/$p key $k; done
	done
	for p in tq-a tq-b tq-c tq-d; do
		in_ns $p tc filter del dev eth0 ingress 2>/dev/null
		in_ns $p tc qdisc del dev eth0 clsact 2>/dev/null
	done
}
# interrupt SIG OUT ARGS...: `podinject -j ARGS` in the background, signalled
# while it probes; prints its exit status. Job control is on for the start:
# without it bash starts background commands with SIGINT ignored.
interrupt() {
	local sig=$1 out=$2 pid
	shift 2
	set -m
	local t0=$SECONDS rc
	"$PI" -N $X -j "$@" >"$out" 2>/tmp/tq$$.ierr &
	pid=$!
	set +m
	probing_now
	kill -s $sig $pid
	local ts=$SECONDS
	echo "signalled after $((SECONDS - t0)) s" >/tmp/tq$$.itime
	wait $pid
	rc=$?
	echo $((SECONDS - ts)) >/tmp/tq$$.after	# seconds from signal to exit
	echo "$rc"
	# how it went, for exit_1 to name should it fail (a run that ended
	# before the signal, one that did not see it)
	echo "'$*' with SIG$sig: $(cat /tmp/tq$$.itime), ended after $((SECONDS - t0)) s; stderr: $(head -c 300 /tmp/tq$$.ierr); summary: $(jq -c .summary "$out" 2>/dev/null); neither answered nor self: $(jq -c '[(.results // .probes // [])[] | select(.verdict != "answered" and .verdict != "self") | {from, to, verdict}]' "$out" 2>/dev/null | head -c 400)" >/tmp/tq$$.itime
}
exit_1() {	# exit_1 NAME RC: the interrupted command exited 1
	if [ "$2" = 1 ]; then pass "$1"; else fail "$1" "exit $2, want 1: $(cat /tmp/tq$$.itime)"; fi
}
reported() {	# reported FILE JQ: the interrupted command's JSON says so
	test -s "$1" && jq -e "$2" "$1"
}
rc=$(interrupt INT /tmp/tq$$.i probe --from tq-a --to $B --count 1000 --interval 200)
exit_1 sigint_exit_1 "$rc"
check sigint_reports_sent reported /tmp/tq$$.i '.interrupted == "SIGINT" and .summary.answered >= 1'
left_nothing sigint
scrub
rc=$(interrupt TERM /tmp/tq$$.i probe --from tq-a --to fd00::b --count 1000 --interval 200)
exit_1 sigterm_exit_1 "$rc"
check sigterm_reports_sent reported /tmp/tq$$.i '.interrupted == "SIGTERM" and .summary.answered >= 1'
left_nothing sigterm
scrub
# the matrix waits for 10.244.0.99, which never answers (its neighbour
# entry, above)
rc=$(interrupt INT /tmp/tq$$.i probe matrix --to 10.244.0.99 --timeout 60000)
exit_1 matrix_sigint_exit_1 "$rc"
check matrix_sigint_reports reported /tmp/tq$$.i '.interrupted == "SIGINT" and .summary.answered == 12'
# a stop in the wait for answers ends it within 1 s, whatever the timeout
# (the rest is the teardown; 60 s would be the timeout's)
check matrix_sigint_prompt test "$(cat /tmp/tq$$.after)" -lt 30
check matrix_sigint_pending reported /tmp/tq$$.i '.summary.pending == 4 and .summary.no_answer == 0'
left_nothing matrix_sigint
scrub
rc=$(interrupt TERM /tmp/tq$$.i probe matrix --to 10.244.0.99 --timeout 60000)
exit_1 matrix_sigterm_exit_1 "$rc"
check matrix_sigterm_reports reported /tmp/tq$$.i '.interrupted == "SIGTERM" and .summary.answered == 12'
check matrix_sigterm_prompt test "$(cat /tmp/tq$$.after)" -lt 30
left_nothing matrix_sigterm
scrub

# A stop ends the sending, not the wait for the answers on their way: tq-b
# answers the echo DELAY ms late (its kernel's answers off), and the probe
# is signalled (SIGS, 0.2 s apart) as soon as the request
# came. One stop: the answer is awaited (up to the probe's timeout, at most
# 1 s after the stop); a second stop cuts the wait short, and a probe
# still waiting is pending, not "no answer".
late_answer() {	# late_answer DELAY SIGS OUT ARGS...: prints the exit status
	local delay=$1 sigs=$2 out=$3 pid lp i s
	shift 3
	ip netns exec tq-b sysctl -qw net.ipv4.icmp_echo_ignore_all=1
	ip netns exec tq-b "$PINET" echo-late $delay 1 20000 >/tmp/tq$$.late &
	lp=$!
	for i in $(seq 100); do grep -q listening /tmp/tq$$.late && break; sleep 0.05; done
	set -m
	"$PI" -N $X -j probe --from tq-a --to $B "$@" >"$out" 2>/tmp/tq$$.ierr &
	pid=$!
	set +m
	for i in $(seq 400); do grep -q request /tmp/tq$$.late && break; sleep 0.05; done
	# a signal sent while the same one is pending is lost: one at a time
	for s in $sigs; do kill -s $s $pid; sleep 0.2; done
	wait $pid
	echo $?
	# what the far end had done when the probe ended
	cp /tmp/tq$$.late /tmp/tq$$.late_at_exit
	kill $lp 2>/dev/null
	wait $lp 2>/dev/null
	ip netns exec tq-b sysctl -qw net.ipv4.icmp_echo_ignore_all=0
}
rc=$(late_answer 500 INT /tmp/tq$$.i --count 5 --interval 3000 --timeout 5000)
exit_1 stop_awaits_answer_exit_1 "$rc"
check stop_awaits_answer reported /tmp/tq$$.i '.interrupted == "SIGINT" and .summary.sent == 1 and .summary.answered == 1 and .probes[0].verdict == "answered"'
left_nothing stop_awaits_answer
scrub
rc=$(late_answer 800 "INT INT" /tmp/tq$$.i --count 5 --interval 3000 --timeout 5000)
exit_1 second_stop_exit_1 "$rc"
check second_stop_pending reported /tmp/tq$$.i '.summary.sent == 1 and .summary.pending == 1 and .summary.no_answer == 0 and .summary.loss_pct == 0 and .probes[0].verdict == "pending"'
expect_eq second_stop_before_answer "$(grep -c answered /tmp/tq$$.late_at_exit)" 0
left_nothing second_stop
scrub
# the wait after a stop is 1 s at most, whatever the timeout
rc=$(late_answer 4000 TERM /tmp/tq$$.i --count 5 --interval 3000 --timeout 60000)
exit_1 stop_wait_bounded_exit_1 "$rc"
check stop_wait_bounded reported /tmp/tq$$.i '.interrupted == "SIGTERM" and .summary.pending == 1 and .probes[0].verdict == "pending"'
expect_eq stop_wait_bounded_before_answer "$(grep -c answered /tmp/tq$$.late_at_exit)" 0
left_nothing stop_wait_bounded
scrub
out=$(probe --from tq-a --to $B --count 2)
expect_eq late_answer_echo_restored "$(verdicts <<<"$out")" answered
rm -f /tmp/tq$$.late /tmp/tq$$.late_at_exit

# SIGKILL leaves the device, its pin, authorisations, flows and hooks. The
# next probe holds the node's probe file, whose mark says a probe made the
# device and is gone: it removes the device and takes over the rest, with
# nothing to do by hand (before 2026-12-06 it refused until someone ran
# `ip link del pi_probe`).
rc=$(interrupt KILL /dev/null probe --from tq-a --to $B --count 1000 --interval 200)
expect_eq killed_left_device "$(probe_devs)" 2
out=$("$PI" -N $X -j probe --from tq-a --to $B --count 2 2>/tmp/tq$$.e)
expect_eq killed_next_probe_runs "$?:$(verdicts <<<"$out")" "0:answered"
expect_eq killed_next_probe_quiet "$(cat /tmp/tq$$.e)" ""
left_nothing killed
scrub
# A matrix killed leaves a reply hook on every pod it probed from; the
# next probe, from one pod, takes them all (before 2026-12-06: only its
# own source's, the others' stayed until each was probed again)
rc=$(interrupt KILL /dev/null probe matrix --to 10.244.0.99 --timeout 8000)
out=$(probe --from tq-a --to $B --count 1)
expect_eq killed_matrix_then_probe_runs "$(verdicts <<<"$out")" answered
left_nothing killed_matrix
scrub
# A device of that name no probe of this build marked (made by hand, or by
# a probe of a build before the mark still running during an upgrade) is
# not taken: the probe refuses, names it and how to remove it, and leaves
# it as it is.
ip -n $X link add pi_probe type veth peer name pi_probe_tx
out=$("$PI" -N $X probe --from tq-a --to $B 2>&1)
check unmarked_device_refused_clearly grep -q "^1:error: device pi_probe exists in node '$X' and no probe of this podinject holds it.*ip -n $X link del pi_probe" <<<"$?:$out"
expect_eq unmarked_device_left "$(probe_devs)" 2
ip -n $X link del pi_probe
out=$(probe --from tq-a --to $B --count 1)
expect_eq unmarked_device_removed_probe_runs "$(verdicts <<<"$out")" answered
left_nothing unmarked_device
scrub
rm -f /tmp/tq$$.e

# ---- A source pod deleted while the probe runs takes the reply hook with
# its device: the probe stops and gives no verdicts (before 2026-12-06 the
# probes after the deletion read "no-answer", a loss nobody made, exit 0);
# a matrix the same, naming the pod; neither leaves anything.
# deleted_source NAME PROBE-ARGS...: tq-e deleted while it probes
deleted_source() {
	local name=$1
	shift
	pi -N $X pod add tq-e --ip 10.244.0.14 >/dev/null
	"$PI" -N $X -j probe "$@" >/tmp/tq$$.g 2>/dev/null &
	bg=$!
	probing_now
	check ${name}_deleted pi -N $X pod del tq-e
	wait $bg
	expect_eq ${name}_no_verdicts "$?:$(jq -r '.error' /tmp/tq$$.g)" "1:pod 'tq-e' was deleted or replaced while the probe ran: no verdicts (its answers were no longer taken); probe again"
	left_nothing $name
}
deleted_source deleted_source --from tq-e --to $B --count 100 --interval 50
deleted_source deleted_matrix_source matrix --to 10.244.0.99 --timeout 4000
rm -f /tmp/tq$$.g

# A probe that cannot leave is an error, not "no-answer": its own transmit
# device taken down under it (a local send failure), the command fails
# with the reason, and its teardown still removes what it made.
set -m
"$PI" -N $X -j probe --from tq-a --to $B --count 50 --interval 100 >/dev/null 2>/tmp/tq$$.e &
bg=$!
set +m
probing_now
ip -n $X link set pi_probe_tx down
wait $bg
expect_eq send_failure_exit_1 "$?" 1
check send_failure_named grep -q "cannot send the probe from 'tq-a' to $B on pi_probe_tx: Network is down" /tmp/tq$$.e
left_nothing send_failure
scrub
rm -f /tmp/tq$$.e

# ---- A pod named `probe`: its host device is pi-probe and its head
# program's pin link_IFINDEX. While another probe runs it is added, injects
# and is refused probing clearly; then it is probed like any pod, and the
# probes leave what is its own alone.
udp_from_probe() {	# udp_from_probe COUNT: injected as tq-c, received by tq-b
	local r
	in_ns tq-b "$PINET" udp-recv 9100 "$1" 1500 >/tmp/tq$$.r &
	r=$!
	sleep 0.3
	in_ns probe "$PINET" udp-send --bind 10.244.0.12 $B 9100 "$1" >/dev/null 2>&1
	wait $r
	if grep -q "received 0" /tmp/tq$$.r || grep -q "from 10.244.0.12 " /tmp/tq$$.r; then
		head -n 1 /tmp/tq$$.r | awk '{print $2}'
	else
		echo wrong-source
	fi
}
set -m
"$PI" -N $X -j probe --from tq-a --to $B --count 1000 --interval 100 >/tmp/tq$$.bg 2>/dev/null &
bg=$!
set +m
probing_now
check probe_pod_added_while_probing pi -N $X pod add probe --ip 10.244.0.20
check probe_pod_inject_allowed_while_probing pi -N $X inject allow probe --as tq-c
expect_eq probe_pod_injects_while_probing "$(udp_from_probe 10)" 10
# A node runs one probe at a time (one device pair, one event ring). A
# second probe waits its turn as long as for the node's lock: -W 300 gives
# up, naming the running probe; one that waits is stopped by SIGINT at
# once, having sent nothing; one left to wait runs when the first ends
# (before 2026-12-06 every second probe failed at once).
out=$("$PI" -N $X -W 300 probe --from probe --to $B 2>&1)
check second_probe_refused_clearly grep -q "^1:error: node '$X': another probe (pid $bg) still runs there after 300 ms" <<<"$?:$out"
set -m
"$PI" -N $X -j probe --from tq-c --to $B >/tmp/tq$$.w 2>/dev/null &
w=$!
set +m
sleep 0.5
kill -INT $w
wait $w
expect_eq waiting_probe_interrupted "$?:$(jq -r .error /tmp/tq$$.w | grep -o 'while it waited .*: no probe sent, nothing made$')" "1:while it waited for the probe running on the node to end: no probe sent, nothing made"
"$PI" -N $X -j probe --from probe --to $B --count 3 --interval 20 >/tmp/tq$$.w 2>/dev/null &
w=$!
sleep 1
expect_eq second_probe_waits "$(kill -0 $w 2>/dev/null && echo waiting)" waiting
kill -INT $bg
wait $bg
expect_eq other_probe_interrupted "$?" 1
check other_probe_answered reported /tmp/tq$$.bg '.summary.answered >= 1 and .summary.answered == .summary.sent'
wait $w
expect_eq second_probe_ran_after "$?:$(verdicts </tmp/tq$$.w)" "0:answered"
rm -f /tmp/tq$$.w
out=$(probe --from probe --to $B --count 3 --interval 20)
expect_eq probe_pod_probe_answered "$(verdicts <<<"$out")" answered
# pi-probe is the pod's host device, and link_IFINDEX its head program's pin
expect_eq probe_pod_device_kept "$(ip -n $X -j link show pi-probe | jq '.[0].ifindex')" \
	"$("$PI" -N $X -j pod show probe | jq .host_ifindex)"
check probe_pod_link_kept test -e "$INJ/link_$("$PI" -N $X -j pod show probe | jq .host_ifindex)"
expect_eq probe_pod_auth_kept "$("$PI" -N $X -j inject list | jq -r '[.[] | .injector + ">" + .as] | unique | join(",")')" "probe>tq-c"
expect_eq probe_pod_injects_after "$(udp_from_probe 10)" 10
rm -f /tmp/tq$$.i /tmp/tq$$.r /tmp/tq$$.bg /tmp/tq$$.ierr /tmp/tq$$.itime /tmp/tq$$.after

# ---- A proxy rule taken away while a probe from the pod runs: the reply
# hook is the probe's too, and stays until the probe ends. Before, `proxy
# del` detached it, and the rest of the answers went to the pod's own
# stack: the probe called them lost, and the pod saw replies to what it
# never sent.
icmp_in() { in_ns tq-a awk '/^Icmp:/ {n++} n == 2 && /^Icmp:/ {print $2; exit}' /proc/net/snmp; }
hooks_pd=$(eth0_hooks)
pi -N $X proxy add tq-d --port 15001 --for tq-a >/dev/null
echo0=$(icmp_in)
"$PI" -N $X -j probe --from tq-a --to $B --count 30 --interval 100 >/tmp/tq$$.pd 2>/dev/null &
bg=$!
sleep 1
check probed_unproxied pi -N $X proxy del tq-d --for tq-a
wait $bg
expect_eq probed_unproxied_answered "$(jq -r '[.probes[].verdict] | group_by(.) | map("\(.[0]) \(length)") | join(",")' /tmp/tq$$.pd)" "answered 30"
expect_eq probed_unproxied_pod_saw_none "$(( $(icmp_in) - echo0 ))" 0
expect_eq probed_unproxied_hook_gone "$(eth0_hooks)" "$hooks_pd"
rm -f /tmp/tq$$.pd

# ---- The probe waits without the node's lock. Its source pod deleted
# meanwhile and a pod of the same name, address and namespace name put in
# its place and proxied: the probe gives no verdicts (the deleted pod's
# answers were no longer taken: before 2026-12-06 they read "no-answer",
# exit 0), and its teardown leaves the new pod's reply
# hook (a filter at the same priority on an eth0 in a namespace of the
# same name, with clsact) and its proxy authorisation alone, and removes
# the pin it left for the deleted pod's device.
c_hooks() {
	echo "$("$BUILD/tcx-attach" query tq-c eth0 ingress 2>/dev/null) $(in_ns tq-c tc filter show dev eth0 ingress | wc -l)"
}
old_c=$("$PI" -N $X -j pod show tq-c | jq .host_ifindex)
set -m
"$PI" -N $X -j probe --from tq-c --to 10.244.0.99 --timeout 5000 >/tmp/tq$$.g 2>/dev/null &
bg=$!
set +m
probing_now
check replaced_source_deleted pi -N $X pod del tq-c
check replaced_source_added pi -N $X pod add tq-c --ip 10.244.0.12
check replaced_source_proxied pi -N $X proxy add tq-d --port 15001 --for tq-c
hooks_c=$(c_hooks)
check replaced_source_hooked test "$hooks_c" != " 0"
wait $bg
expect_eq replaced_source_probe_done "$?:$(jq -r '.error' /tmp/tq$$.g)" "1:pod 'tq-c' was deleted or replaced while the probe ran: no verdicts (its answers were no longer taken); probe again"
expect_eq replaced_source_reply_hook_kept "$(c_hooks)" "$hooks_c"
expect_eq replaced_source_proxy_auth_kept "$("$PI" -N $X -j inject list | jq -r '[.[] | select(.injector == "tq-d") | .as] | join(",")')" tq-c
check replaced_source_old_pin_gone test ! -e "$INJ/link_reply_$old_c"
check replaced_source_unproxied pi -N $X proxy del tq-d --for tq-c
rm -f /tmp/tq$$.g

# ---- The same, the new pod at the deleted one's ifindex (a device made
# with an explicit index; the kernel's counter come round): the reply
# hook's pin under that ifindex was the deleted pod's and goes with it,
# so the new pod's proxy rule gets a hook of its own on the new eth0 (the
# pin stayed, `proxy add` took it for the new pod's and attached nothing,
# and the probe's teardown then left it as the new pod's: found by a
# review)
old_c=$("$PI" -N $X -j pod show tq-c | jq .host_ifindex)
set -m
"$PI" -N $X -j probe --from tq-c --to 10.244.0.99 --timeout 5000 >/tmp/tq$$.g 2>/dev/null &
bg=$!
set +m
probing_now
check same_index_deleted pi -N $X pod del tq-c
ip netns add tq-c
ip -n $X link add tq-ci index "$old_c" type veth peer name eth0 netns tq-c
ip -n tq-c addr add 10.244.0.12/32 dev eth0
ip -n tq-c link set eth0 up
ip -n $X link set tq-ci up
check same_index_adopted pi -N $X pod adopt tq-c --netns tq-c --dev tq-ci --ip 10.244.0.12
expect_eq same_index_taken "$("$PI" -N $X -j pod show tq-c | jq .host_ifindex)" "$old_c"
check same_index_proxied pi -N $X proxy add tq-d --port 15001 --for tq-c
expect_eq same_index_reply_hooked "$("$BUILD/tcx-attach" query tq-c eth0 ingress 2>/dev/null)$(in_ns tq-c tc filter show dev eth0 ingress | grep -c 'pod_reply')" \
	"$([ "$(pi -N $X -j node show | jq -r .attach)" = clsact ] && echo 1 || echo pod_reply0)"
wait $bg
expect_eq same_index_probe_done "$?:$(jq -r '.error' /tmp/tq$$.g)" "1:pod 'tq-c' was deleted or replaced while the probe ran: no verdicts (its answers were no longer taken); probe again"
check same_index_unproxied pi -N $X proxy del tq-d --for tq-c
check same_index_pod_del pi -N $X pod del tq-c
ip -n $X link del tq-ci 2>/dev/null
ip netns del tq-c 2>/dev/null
rm -f /tmp/tq$$.g

kill $srv $srv6 2>/dev/null
# Both nodes adopted their namespaces (make_wire made them): node down
# keeps them and their uplinks, and nothing of the nodes may stay on them.
ids=$(node_prog_ids $X; node_prog_ids $Y)
expect_hooked hooked_before_down "$(pi -N $X -j node show | jq -r .attach)" $ids
# Taken down while a probe runs and another waits for it: the answers are
# no longer taken, so the running probe gives no verdicts (before
# 2026-12-06 it went on and called every probe after the down "no-answer",
# exit 0); the waiting one says the node went; neither leaves a device.
"$PI" -N $X -j probe --from tq-a --to $B --count 100 --interval 50 >/dev/null 2>/tmp/tq$$.d1 &
d1=$!
probing_now
"$PI" -N $X -j probe --from tq-a --to $B >/dev/null 2>/tmp/tq$$.d2 &
d2=$!
# waiting: it holds the node's probe hold open (a fixed 0.5 s was too
# short in the lab beside a busy host: the probe had not come that far
# and found the node gone instead)
for _ in $(seq 200); do
	ls -l /proc/$d2/fd 2>/dev/null | grep -q /run/podinject/probe/ && break
	sleep 0.05
done
sleep 0.2
check down_x pi -N $X node down
wait $d1
# (node down deletes the pods first: the probe may see its source go
# before the node)
expect_eq down_while_probing "$?:$(sed "s/pod 'tq-a' was deleted or replaced while the probe ran: no verdicts (its answers were no longer taken); probe again/node '$X' was taken down while the probe ran: no verdicts (its answers were no longer taken)/" /tmp/tq$$.d1)" "1:error: node '$X' was taken down while the probe ran: no verdicts (its answers were no longer taken)"
wait $d2
expect_eq down_while_waiting "$?:$(cat /tmp/tq$$.d2)" "1:error: node '$X' was taken down while the probe waited"
expect_eq down_while_probing_no_device "$(probe_devs)" 0
rm -f /tmp/tq$$.d1 /tmp/tq$$.d2
# (the probe running as the node went down left the node's hold file, for
# a node of that name to take up again: the suite's own, removed)
rm -f /run/podinject/probe/$X
# A probe killed on a node then taken down: its device pair would outlive
# the node in the namespace the node adopted (before 2026-12-06 it did);
# node down removes it, and the node's probe hold.
hold_y=/run/podinject/probe/$(basename "$(node_pin_dir $Y)")
"$PI" -N $Y probe --from tq-r --to 10.244.0.10 --count 100 --interval 100 >/dev/null 2>&1 &
ky=$!
sleep 1
kill -KILL $ky
wait $ky 2>/dev/null
expect_eq killed_before_down_left "$(ip -n $Y -o link show | grep -c 'pi_probe')" 2
check down_y pi -N $Y node down
expect_eq killed_before_down_no_device "$(ip -n $Y -o link show | grep -c 'pi_probe')" 0
check_fails killed_before_down_no_hold test -e "$hold_y"
expect_unhooked no_links_left $ids
ip netns del $X
ip netns del $Y
