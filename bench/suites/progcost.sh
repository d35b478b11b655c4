# SPDX-License-Identifier: GPL-2.0
# Suite "progcost": ns per packet of podinject's own programs, from
# BPF_PROG_TEST_RUN with `repeat` (bench/progcost.c): pod_egress with no
# policy; an established flow (the connection tracker's entry decides) and
# a flow's first packet (decided by the rule classifier: the last rule
# denies, so no entry is made and every run is a first packet) at 1, 100,
# 1000 and 10 000 rules, and at 10 000 with the peer inside every rule's
# CIDR; an established flow at 1 rule with the flow table full (65 536
# flows; a pod without rules is not tracked); the
# spoof drop, pod_ingress,
# uplink_ingress, the injection decision (authorised: redirect; the
# injector's own traffic: passed on), and the probe reply match at a probed
# pod's eth0 (pod_reply: an answer to a probe is reported through the ring
# buffer and dropped; any other packet passes on). The figure shows how cost grows with
# work; the empty program gives the test-run overhead included in each.

# datapath_at REV NAME: a directory holding node.bpf.o and inject.bpf.o
# built from REV's tree (git history), built once into
# build/bench/at-NAME and kept while REV names the same commit
datapath_at() {
	local commit dir=$BUILD/bench/at-$2
	commit=$(git -C "$ROOT" rev-parse "$1^{commit}" 2>/dev/null) || return 1
	if [ "$(cat "$dir/.commit" 2>/dev/null)" != "$commit" ] ||
	   [ ! -s "$dir/build/node.bpf.o" ] || [ ! -s "$dir/build/inject.bpf.o" ]; then
		rm -rf "$dir"
		mkdir -p "$dir"
		# BUILD given on the command line: its Makefile takes BUILD from
		# the environment where it has one (`BUILD ?= build`), and the
		# bench's own would send the objects elsewhere, or nowhere
		git -C "$ROOT" archive "$commit" | tar -x -C "$dir" &&
			make -C "$dir" -s -j2 BUILD=build build/node.bpf.o build/inject.bpf.o >/dev/null 2>&1 &&
			[ -s "$dir/build/node.bpf.o" ] && [ -s "$dir/build/inject.bpf.o" ] &&
			echo "$commit" >"$dir/.commit"
	fi
	[ -s "$dir/.commit" ] && echo "$dir/build"
}

# progcost_variant NAME CFLAGS: a progcost whose own skeletons are this
# tree's programs built with CFLAGS added (a bench-only variant), in
# build/bench/var-NAME/bench/progcost. A variant is compared with this
# build program for program in processes of the same binary code, each
# loading its objects the same way (the skeleton): another build loaded
# as a --baseline ran 1.4x slower on the tracked paths than the very same
# objects through the skeleton (docs/bench.md, "Program cost").
progcost_variant() {
	local dir=$BUILD/bench/var-$1
	rm -rf "$dir"
	make -C "$ROOT" -s BUILD="$dir" BPF_EXTRA_CFLAGS="$2" \
		"$dir/node.skel.h" "$dir/inject.skel.h" >/dev/null 2>&1 &&
		make -C "$ROOT" -s -f bench/bench.mk BUILD="$dir" \
			"$dir/bench/progcost" >/dev/null 2>&1 &&
		echo "$dir/bench/progcost"
}

# Each round is a process of its own, which loads every build's objects
# anew: a tracked packet's cost is bimodal per load (pod_egress with no
# policy ~170 or ~300 ns on this machine, the same object file either way
# in different processes; docs/bench.md, "Program cost"), so rounds
# sharing one load would pair the same modes every time and bias every
# ratio between two builds.
suite_progcost() {
	local line v rep ns r
	suite_begin progcost "Per-packet program cost (BPF_PROG_TEST_RUN, repeat)"
	meta method "\"BPF_PROG_TEST_RUN, one 72-byte TCP SYN, repeat calibrated to ~200 ms per sample, CPU $PB_CPU_SEND; each round a process of its own (every object loaded anew)\""
	if [ ! -x "$PROGCOST" ]; then
		skip all "progcost was not built"
		suite_end
		return
	fi
	# Other builds' programs beside this build's, in the same rounds (the
	# datapath's floor: issue 23; the monitor's cost when none runs:
	# issue 25), built from git history: the datapath as it was before
	# the hardening and the tracker (2026-11-30), just before the tracker,
	# with it, and the last release.
	local b dir base_args=() built=()
	for b in "15adadd before-hardening" "ddc2b86^ before-tracker" "ddc2b86 tracker" "db9b60b v0.2"; do
		if dir=$(datapath_at ${b% *} ${b#* }); then
			base_args+=(--baseline "$dir" --baseline-name "${b#* }")
			built+=("${b#* }")
		else
			note "no build of ${b#* } (${b% *}; no git history?): its comparison is left out"
		fi
	done
	# and this tree with the monitor's checks compiled out (issue 25: what
	# they cost a datapath no monitor watches), in a process of its own
	# after each round's: its cases carry " [no-monitor]"
	local nomon=
	if ! nomon=$(progcost_variant no-monitor -DPI_BENCH_NO_MONITOR); then
		nomon=
		note "no build of this tree without the monitor's checks: its comparison is left out"
	fi
	meta baselines "$(printf '%s\n' "${built[@]}" | jq -R . | jq -sc .)"
	local -A floor passon bynv
	while read -r line; do
		v=$(jq -r .variant <<<"$line")
		rep=$(jq -r .rep <<<"$line")
		ns=$(jq -r .value <<<"$line")
		sample ns_per_packet ns "$v" "$rep" "$ns"
		bynv["$v|$rep"]=$ns
		case $v in
		"empty program (test-run overhead)") floor[$rep]=$ns ;;
		"inject_egress, own traffic (pass on)") passon[$rep]=$ns ;;
		esac
	done < <(for rep in $(seq 1 "$PB_REPS"); do
			taskset -c "$PB_CPU_SEND" "$PROGCOST" --reps 1 \
				--target-ms "${PB_PROGCOST_MS:-200}" "${base_args[@]}" |
				jq -c --argjson rep "$rep" '.rep = $rep' ||
				echo '{"variant":"error","rep":0,"value":0}'
			[ -n "$nomon" ] || continue
			taskset -c "$PB_CPU_SEND" "$nomon" --reps 1 \
				--target-ms "${PB_PROGCOST_MS:-200}" |
				jq -c --argjson rep "$rep" 'select(.variant | test("monitor on|flow table full|first packet|established") | not) | .rep = $rep | .variant += " [no-monitor]"' ||
				echo '{"variant":"error","rep":0,"value":0}'
		done)
	# the head program's pass-on over the test run's own cost (goal of
	# issue 23: at most 15 ns over the floor; against the datapath before
	# the tracker: the ratios below), and a device with no role's
	local nr
	for rep in "${!passon[@]}"; do
		[ -n "${floor[$rep]:-}" ] || continue
		sample ns_over_floor ns "inject_egress, own traffic (pass on) - empty program" "$rep" \
			"$(awk -v a="${passon[$rep]}" -v b="${floor[$rep]}" 'BEGIN { d = a - b; printf "%.1f", d < 0 ? 0 : d }')"
		nr=${bynv["inject_egress, a device with no role|$rep"]:-}
		[ -n "$nr" ] && sample ns_over_floor ns "inject_egress, a device with no role - empty program" "$rep" \
			"$(awk -v a="$nr" -v b="${floor[$rep]}" 'BEGIN { d = a - b; printf "%.1f", d < 0 ? 0 : d }')"
	done
	# the monitor's checks with no monitor running, in ns per packet over
	# the same tree without them: the median of the per-round differences
	# (a sample is never negative, so this is a note; goal of issue 25:
	# at most 5 ns)
	local c diffs line_out=
	for c in "pod_egress, no policy" "pod_egress, spoofed (drop)" "pod_ingress (stack to pod)" \
		"uplink_ingress (to local pod)" "inject_egress, own traffic (pass on)" \
		"inject_egress, authorised (fallback redirect)"; do
		diffs=
		for rep in $(seq 1 "$PB_REPS"); do
			[ -n "${bynv["$c|$rep"]:-}" ] && [ -n "${bynv["$c [no-monitor]|$rep"]:-}" ] || continue
			diffs+=" $(awk -v a="${bynv["$c|$rep"]}" -v b="${bynv["$c [no-monitor]|$rep"]}" 'BEGIN { print a - b }')"
		done
		[ -n "$diffs" ] || continue
		line_out+="$c $(tr ' ' '\n' <<<"$diffs" | grep . | sort -n | awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%+g ns (%+g to %+g)", m, v[1], v[NR] }'); "
	done
	[ -n "$line_out" ] && note "monitor off - no monitor, median of the per-round differences: ${line_out%; }"
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
	ratio "flow table full / established, 1 rule" ns_per_packet "pod_egress, established, 1 rule, flow table full" "pod_egress, established, 1 rule"
	ratio "inject (redirect) / pod_egress" ns_per_packet "inject_egress, authorised (fallback redirect)" "pod_egress, no policy"
	ratio "head, injector's own traffic: its record / no record (every check)" ns_per_packet "inject_egress, own traffic (pass on)" "inject_egress, own traffic, no record (every check)"
	ratio "probe answer / other packet" ns_per_packet "pod_reply, probe answer taken (ring buffer)" "pod_reply, other packet (pass on)"
	# the monitor (issue 25): none running against the release before it,
	# and one running against none
	# the floor against the datapath before the tracker (goal of issue
	# 23: at most 1.3), before the hardening too, and what each step cost
	for c in "pod_egress, no policy" "pod_ingress (stack to pod)" "uplink_ingress (to local pod)" \
		"inject_egress, own traffic (pass on)" "inject_egress, authorised (fallback redirect)"; do
		ratio "$c / before the tracker" ns_per_packet "$c" "$c [before-tracker]"
		ratio "$c / before the hardening" ns_per_packet "$c" "$c [before-hardening]"
		ratio "$c: the hardening (before the tracker / before the hardening)" ns_per_packet "$c [before-tracker]" "$c [before-hardening]"
		ratio "$c: the tracker (tracker / before the tracker)" ns_per_packet "$c [tracker]" "$c [before-tracker]"
		ratio "$c: to v0.2 (v0.2 / tracker)" ns_per_packet "$c [v0.2]" "$c [tracker]"
		ratio "$c: since v0.2 (this build / v0.2)" ns_per_packet "$c" "$c [v0.2]"
	done
	for c in "pod_egress, no policy" "pod_egress, spoofed (drop)" "pod_ingress (stack to pod)" \
		"uplink_ingress (to local pod)" "inject_egress, own traffic (pass on)" \
		"inject_egress, authorised (fallback redirect)"; do
		ratio "monitor off: $c / no monitor" ns_per_packet "$c" "$c [no-monitor]"
	done
	ratio "monitor off: pod_egress, no policy / v0.2" ns_per_packet "pod_egress, no policy" "pod_egress, no policy [v0.2]"
	ratio "monitor off: pod_egress, spoofed drop / v0.2" ns_per_packet "pod_egress, spoofed (drop)" "pod_egress, spoofed (drop) [v0.2]"
	ratio "monitor off: inject_egress, authorised / v0.2" ns_per_packet "inject_egress, authorised (fallback redirect)" "inject_egress, authorised (fallback redirect) [v0.2]"
	ratio "monitor off: inject_egress, own traffic / v0.2" ns_per_packet "inject_egress, own traffic (pass on)" "inject_egress, own traffic (pass on) [v0.2]"
	ratio "monitor on / off: pod_egress, no policy" ns_per_packet "pod_egress, no policy, monitor on" "pod_egress, no policy"
	ratio "monitor on / off: spoofed drop, an event each" ns_per_packet "pod_egress, spoofed (drop), monitor on (an event each)" "pod_egress, spoofed (drop)"
	ratio "monitor on / off: injection, an event each" ns_per_packet "inject_egress, authorised, monitor on (an event each)" "inject_egress, authorised (fallback redirect)"
	ratio "monitor on / off: injector's own traffic" ns_per_packet "inject_egress, own traffic, monitor on" "inject_egress, own traffic (pass on)"
	suite_end
}
