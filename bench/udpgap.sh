#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# bench/udpgap.sh: where the fallback's 64-byte UDP loses against the pod's
# own send (injection suite, b/c). Builds the injection suite's node, then
# for PB_REPS interleaved rounds of fallback and target: one pps sample
# with, on the sender's CPU, the kernel's own counts (/proc/net/softnet_stat:
# backlog packets processed and dropped; /proc/softirqs: NET_RX runs;
# /proc/stat: softirq and system time) and, when perf is installed, a
# sampled profile (perf record -C PB_CPU_SEND), reduced to the share of the
# functions on the paths that differ. Writes bench/results/DATE-udpgap.txt.
# As root, under the suite lock, like bench/run.sh; not part of make bench.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
. "$ROOT/bench/suites/injection.sh"
[ "$(id -u)" = 0 ] || { echo "udpgap: needs root" >&2; exit 1; }
make -s -C "$ROOT" -f bench/bench.mk BUILD="$BUILD" || exit 1
out=$RESULTS/$PB_DATE-udpgap.txt
work=$(mktemp -d /tmp/pb-udpgap.XXXXXX)
trap 'pb_teardown; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
pb_teardown
SUITE_DIR=$work	# note/meta write there
injection_setup || { echo "udpgap: could not build the node" >&2; exit 1; }
cpu=$PB_CPU_SEND
PERF=$(command -v perf || true)

# softnet_stat row of CPU cpu: processed, dropped (hex)
softnet() {
	local p d
	read -r p d < <(awk -v c=$((cpu + 1)) 'NR == c { print $1, $2 }' /proc/net/softnet_stat)
	echo $((16#$p)) $((16#$d))
}
netrx() { awk -v c=$((cpu + 2)) '$1 == "NET_RX:" { print $c }' /proc/softirqs; }
stat_cpu() { awk -v c="cpu$cpu" '$1 == c { print $4, $7, $8 }' /proc/stat; }	# system irq softirq (ticks)

{
echo "# bench/udpgap.sh, $(date -u '+%F %T') UTC, kernel $KERNEL, $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# podinject $(git -C "$ROOT" describe --always --dirty 2>/dev/null), $PB_REPS rounds, ${PB_DURATION}s windows, sender $PB_SENDER on CPU $cpu, meter on CPU $PB_CPU_RECV"
echo "# per packet arrived at pb-d: passes = receive passes on CPU $cpu (softnet_stat col 1, \"processed\": rounds of __netif_receive_skb_core), netrx = NET_RX softirqs, si_us / sys_us = softirq / system time of CPU $cpu"
printf '%-9s %5s %9s %9s %8s %8s %8s %8s %8s\n' variant round arrived sent passes drops netrx si_us sys_us
} | tee "$out"
for rep in $(seq 1 "$PB_REPS"); do
	for v in fallback target; do
		from=$(inj_variant "$v")
		dmac=$(mac_of "$INJ_N" "pi-$from")
		read -r p0 d0 < <(softnet); n0=$(netrx); read -r y0 i0 s0 < <(stat_cpu); r0=$(rx_of_d)
		if [ -n "$PERF" ]; then
			"$PERF" record -q -o "$work/$v.$rep.data" -C "$cpu" -g -- \
				sleep "$(awk -v w="$PB_WARMUP" -v d="$PB_DURATION" 'BEGIN { print w + d }')" >/dev/null 2>&1 &
			ppid=$!
		fi
		o=$(pps_sample "$from" $INJ_T $INJ_D "$dmac" $PB_PREFIX-d arrived=dev:eth0 delivered=sock:9)
		[ -n "$PERF" ] && wait $ppid
		read -r p1 d1 < <(softnet); n1=$(netrx); read -r y1 i1 s1 < <(stat_cpu); r1=$(rx_of_d)
		awk -v v=$v -v r=$rep -v a="$(jq .arrived <<<"$o")" -v s="$(jq .sent <<<"$o")" \
			-v n=$((r1 - r0)) -v bp=$((p1 - p0)) -v bd=$((d1 - d0)) -v nr=$((n1 - n0)) \
			-v si=$((s1 - s0)) -v sy=$((y1 - y0)) 'BEGIN {
			printf "%-9s %5d %9.0f %9.0f %8.3f %8.4f %8.3f %8.3f %8.3f\n", v, r, a, s,
				bp / n, bd / n, nr / n, si * 10000 / n, sy * 10000 / n }' | tee -a "$out"
	done
done
if [ -n "$PERF" ]; then
	{
	echo
	echo "# perf record -C $cpu -g (all rounds of a variant together): self share of the samples on CPU $cpu"
	echo "# taken in the sender (pktload, whose sendmmsg runs the path in softirq) or ksoftirqd/$cpu; others' work on the CPU left out"
	echo "# (perf $("$PERF" --version | cut -d' ' -f3) on kernel $KERNEL), the 25 largest symbols"
	} | tee -a "$out"
	for v in fallback target; do
		echo "## $v" | tee -a "$out"
		for f in "$work"/$v.*.data; do
			"$PERF" report -i "$f" --stdio --no-children --percentage relative --comms "pktload,ksoftirqd/$cpu" \
				--sort sym -g none --percent-limit 0 2>/dev/null |
				awk '/^ *[0-9.]+%/ { sub(/%/, "", $1); $2 = ""; sub(/^ +/, "", $0); print }'
		done | awk '{ p = $1; $1 = ""; s[$0] += p; n[$0]++ } END { for (k in s) printf "%6.2f %s\n", s[k] / '"$PB_REPS"', k }' |
			sort -rn | head -25 | tee -a "$out"
	done
fi
echo "udpgap: wrote $out"
