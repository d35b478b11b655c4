# SPDX-License-Identifier: GPL-2.0
# Suite "progcost": ns per packet of podinject's own programs, from
# BPF_PROG_TEST_RUN with `repeat` (bench/progcost.c): pod_egress with no
# policy; an established flow (the connection tracker's entry decides) and
# a flow's first packet (decided by the rule classifier: the last rule
# denies, so no entry is made and every run is a first packet) at 1, 100,
# 1000 and 10 000 rules, and at 10 000 with the peer inside every rule's
# CIDR; no policy with the flow table full (65 536 flows); the
# spoof drop, pod_ingress,
# uplink_ingress, the injection decision (authorised: redirect; the
# injector's own traffic: passed on), and the probe reply match at a probed
# pod's eth0 (pod_reply: an answer to a probe is reported through the ring
# buffer and dropped; any other packet passes on). The figure shows how cost grows with
# work; the empty program gives the test-run overhead included in each.

suite_progcost() {
	local line v rep ns
	suite_begin progcost "Per-packet program cost (BPF_PROG_TEST_RUN, repeat)"
	meta method "\"BPF_PROG_TEST_RUN, one 72-byte TCP SYN, repeat calibrated to ~200 ms per sample, CPU $PB_CPU_SEND\""
	if [ ! -x "$PROGCOST" ]; then
		skip all "progcost was not built"
		suite_end
		return
	fi
	while read -r line; do
		v=$(jq -r .variant <<<"$line")
		rep=$(jq -r .rep <<<"$line")
		ns=$(jq -r .value <<<"$line")
		sample ns_per_packet ns "$v" "$rep" "$ns"
	done < <(taskset -c "$PB_CPU_SEND" "$PROGCOST" --reps "$PB_REPS" \
		--target-ms "${PB_PROGCOST_MS:-200}" || echo '{"variant":"error","rep":0,"value":0}')
	for r in 1 100 1000 10000; do
		local unit=rules
		[ "$r" = 1 ] && unit=rule
		ratio "established, $r $unit / no policy" ns_per_packet "pod_egress, established, $r $unit" "pod_egress, no policy"
	done
	for r in 1 100 1000 10000; do
		local unit=rules
		[ "$r" = 1 ] && unit=rule
		ratio "first packet, $r $unit / no policy" ns_per_packet "pod_egress, first packet, $r $unit" "pod_egress, no policy"
	done
	ratio "first packet, 10000 rules, CIDR covers / no policy" ns_per_packet "pod_egress, first packet, 10000 rules, CIDR covers" "pod_egress, no policy"
	ratio "flow table full / no policy" ns_per_packet "pod_egress, no policy, flow table full" "pod_egress, no policy"
	ratio "inject (redirect) / pod_egress" ns_per_packet "inject_egress, authorised (fallback redirect)" "pod_egress, no policy"
	ratio "probe answer / other packet" ns_per_packet "pod_reply, probe answer taken (ring buffer)" "pod_reply, other packet (pass on)"
	suite_end
}
