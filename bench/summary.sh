#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Prints the Markdown summary of one bench run (the per-suite tables of
# docs/bench.md): per suite its skips, headline figures and ratios with the seed's
# beside them, and its plot.
#   bench/summary.sh [DATE]     (default: each suite's newest result, which
#                                may come from different dates: suites are
#                                rerun on their own)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RES=$ROOT/bench/results
DATE=${1:-}
# counters kept in the JSON and the per-suite tables, not the summary
HIDE='["sent_pps", "udp64_sent_pps", "ring_full_pps", "conns_failed", "delivered_pps",
	"uplink_sent_pps", "uplink_wire_drop_pps", "uplink_sock_drop_pps"]'

fmt() {
	awk -v x="$1" 'BEGIN {
		if (x == "" || x == "null") { print "-"; exit }
		a = x < 0 ? -x : x
		if (a >= 1e6) printf "%.2f M\n", x / 1e6
		else if (a >= 1e4) printf "%.0f k\n", x / 1e3
		else if (a >= 100) printf "%.0f\n", x
		else if (a >= 10) printf "%.1f\n", x
		else printf "%.2f\n", x }'
}

for s in injection redirect xdp progcost proxy cni; do
	if [ -n "$DATE" ]; then
		j=$RES/$DATE-$s.json
	else
		j=$(ls "$RES"/*-$s.json 2>/dev/null | grep -v -- '-lab-' | sort | tail -n 1 || true)
	fi
	[ -n "$j" ] && [ -f "$j" ] || continue
	d=$(basename "$j" "-$s.json")
	echo "### $(jq -r .title "$j")"
	echo
	jq -r '.skipped[] | "- **SKIP** \(.variant): \(.reason)"' "$j"
	jq -r '(.failed // [])[] | "- **FAILED** \(.check): \(.reason)"' "$j"
	for m in $(jq -r --argjson h "$HIDE" '[.figures[].metric | select(. as $x | $h | index($x) | not)] | unique | .[]' "$j"); do
		echo
		echo "| $m ($(jq -r --arg m "$m" '[.figures[] | select(.metric == $m)][0].unit' "$j")) | median | min–max | spread |"
		echo "|---|---:|---:|---:|"
		jq -r --arg m "$m" '.figures[] | select(.metric == $m) | [.variant, .median, .min, .max, .spread_pct] | @tsv' "$j" |
		while IFS=$'\t' read -r v med lo hi sp; do
			echo "| $v | $(fmt "$med") | $(fmt "$lo")–$(fmt "$hi") | ${sp}% |"
		done
	done
	if [ "$(jq '.ratios | length' "$j")" -gt 0 ]; then
		echo
		echo "| ratio, per round | of | ours: median (min–max) | seed |"
		echo "|---|---|---:|---|"
		jq -r '.ratios[] | [.name, .metric, .median, .min, .max, .seed] | @tsv' "$j" |
		while IFS=$'\t' read -r n m med lo hi seed; do
			echo "| $n | $m | **$(fmt "$med")** ($(fmt "$lo")–$(fmt "$hi")) | ${seed:--} |"
		done
	fi
	echo
	echo "![$s](bench/results/$d-$s.png) — details: [bench/results/$d-$s.md](bench/results/$d-$s.md)"
	echo
done

# The kernel lab's runs (lab/bench.sh: DATE-lab-KERNEL-SUITE.json), the
# newest of each kernel and suite: emulated under QEMU TCG, so their ratios
# only.
for j in $(ls "$RES"/*-lab-*.json 2>/dev/null | sed 's|.*/[0-9-]\{11\}||' | sort -u |
		while read -r tail; do ls "$RES"/*-"$tail" | sort | tail -n 1; done); do
	[ -n "$DATE" ] && case $(basename "$j") in "$DATE"-*) ;; *) continue ;; esac
	b=$(basename "$j" .json)
	echo "### Kernel lab: $(jq -r .title "$j")"
	echo
	echo "Kernel $(jq -r .kernel "$j") in a QEMU TCG guest ($(jq -r .cpus "$j") vCPU), $(jq -r .rounds "$j") rounds: every number is emulated, read the ratios only."
	jq -r '.skipped[] | "- **SKIP** \(.variant): \(.reason)"' "$j"
	jq -r '(.failed // [])[] | "- **FAILED** \(.check): \(.reason)"' "$j"
	echo
	echo "| ratio, per round | of | ours: median (min–max) | seed |"
	echo "|---|---|---:|---|"
	jq -r '.ratios[] | [.name, .metric, .median, .min, .max, .seed] | @tsv' "$j" |
	while IFS=$'\t' read -r n m med lo hi seed; do
		echo "| $n | $m | **$(fmt "$med")** ($(fmt "$lo")–$(fmt "$hi")) | ${seed:--} |"
	done
	echo
	echo "![$b](bench/results/$b.png) — details: [bench/results/$b.md](bench/results/$b.md)"
	echo
done
