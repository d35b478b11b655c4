# SPDX-License-Identifier: GPL-2.0
# Suite "progcost": ns per packet of podinject's own programs, from
# BPF_PROG_TEST_RUN with `repeat` (bench/progcost.c): pod_egress with no
# policy and with 1, 100 and 10 000 rules (none matching, so every rule is
# walked: first-match-wins at its worst), the spoof drop, pod_ingress,
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
	ratio "100 rules / no policy" ns_per_packet "pod_egress, 100 rules" "pod_egress, no policy"
	ratio "10000 rules / no policy" ns_per_packet "pod_egress, 10000 rules" "pod_egress, no policy"
	ratio "10000 rules / 100 rules" ns_per_packet "pod_egress, 10000 rules" "pod_egress, 100 rules"
	ratio "inject (redirect) / pod_egress" ns_per_packet "inject_egress, authorised (fallback redirect)" "pod_egress, no policy"
	ratio "probe answer / other packet" ns_per_packet "pod_reply, probe answer taken (ring buffer)" "pod_reply, other packet (pass on)"
	suite_end
}
