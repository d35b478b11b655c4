# SPDX-License-Identifier: GPL-2.0
# Shared by the bench suites: settings, namespaces and their teardown, the
# record of samples, and the files a suite leaves (JSON, Markdown, PNG).
#
# A suite calls suite_begin NAME "title", then per measurement
#   sample METRIC UNIT VARIANT REP VALUE
# plus note/skip/ratio lines, and suite_end. Statistics are computed once,
# at suite_end, from the samples (jq), so every file agrees.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${PODINJECT_BUILD:-$ROOT/build}
PI=$BUILD/podinject
PKTLOAD=$BUILD/bench/pktload
PBLOAD=$BUILD/bench/pbload
PROGCOST=$BUILD/bench/progcost
RESULTS=${PB_RESULTS:-$ROOT/bench/results}

# Settings (environment). PB_QUICK=1 is a smoke run: 2 rounds of 1 s.
if [ "${PB_QUICK:-0}" = 1 ]; then
	: "${PB_REPS:=2}" "${PB_DURATION:=1}" "${PB_TCP_DURATION:=2}"
fi
PB_REPS=${PB_REPS:-5}			# interleaved rounds per figure
PB_DURATION=${PB_DURATION:-3}		# seconds measured per pps sample
PB_TCP_DURATION=${PB_TCP_DURATION:-5}	# seconds per iperf3 sample
PB_WARMUP=${PB_WARMUP:-0.5}		# seconds of load before measuring
PB_SENDER=${PB_SENDER:-packet}		# packet (AF_PACKET) or udp (sendmmsg)
PB_CPU_SEND=${PB_CPU_SEND:-0}		# sender (and its softirq work)
PB_CPU_RECV=${PB_CPU_RECV:-1}		# receiver, meter, iperf3 server
PB_DATE=${PB_DATE:-$(date +%Y-%m-%d)}
PB_TAG=${PB_TAG:-}			# in the file names: DATE-TAG-SUITE (the lab: lab-KERNEL)

KERNEL=$(uname -r)
# Namespaces, nodes and pods of a run start with "$PB_PREFIX-", and the
# teardown removes all of those: two runs at once on a shared machine need
# two prefixes, or each one's teardown removes the other's topology.
PB_PREFIX=${PB_PREFIX:-pb}
PB_PINS=/sys/fs/bpf/pb-bench

# --- namespaces and teardown -------------------------------------------

PB_NODES=()
PB_LOST=0	# set when a suite lost its namespaces to something else

pb_ns() {	# pb_ns NAME: a fresh network namespace with lo up
	ip netns del "$1" 2>/dev/null || true
	ip netns add "$1"
	ip -n "$1" link set lo up
}

pb_teardown() {
	local n
	kill $(jobs -p) 2>/dev/null
	wait 2>/dev/null
	for n in "${PB_NODES[@]}"; do
		"$PI" -N "$n" node down >/dev/null 2>&1
	done
	for n in $(ip netns list | awk '{print $1}' | grep "^$PB_PREFIX-" || true); do
		ip netns del "$n" 2>/dev/null
	done
	rm -rf "$PB_PINS"
	# a suite that set the kernel's RCU knob for a variant (cni) and
	# was stopped in that round: the machine gets its own value back
	if [ -n "${PB_RCU_EXPEDITED:-}" ]; then
		echo "$PB_RCU_EXPEDITED" >/sys/kernel/rcu_expedited 2>/dev/null
	fi
}

# pb_alive NETNS...: all still there? Other work on a shared machine has
# been seen removing namespaces it did not make; a suite that loses its
# topology says so and stops instead of recording nonsense.
pb_alive() {
	local n
	for n in "$@"; do
		if [ ! -e "/run/netns/$n" ]; then
			PB_LOST=1
			note "namespace $n disappeared during the run (removed by something outside the bench); suite stopped early"
			return 1
		fi
	done
}

mac_of() {	# mac_of NETNS DEV
	ip -n "$1" -j link show "$2" | jq -r '.[0].address'
}

# A pod-like namespace POD behind a veth whose other end HOSTDEV is in
# HOSTNS: /32 address, default route via 169.254.1.1 with a permanent
# neighbour entry for the host side, as podinject's own pods have.
#   veth_pod HOSTNS HOSTDEV POD ADDR
veth_pod() {
	local h=$1 hdev=$2 pod=$3 addr=$4
	pb_ns "$pod"
	ip -n "$h" link add "$hdev" type veth peer name eth0 netns "$pod"
	ip -n "$pod" addr add "$addr/32" dev eth0
	ip -n "$h" link set "$hdev" up
	ip -n "$pod" link set eth0 up
	ip -n "$pod" route add 169.254.1.1 dev eth0 scope link
	ip -n "$pod" route add default via 169.254.1.1 dev eth0
	ip -n "$pod" neigh add 169.254.1.1 lladdr "$(mac_of "$h" "$hdev")" \
		dev eth0 nud permanent
}

# --- running load -------------------------------------------------------

# pps_sample SEND_NS SRC DST DMAC RECV_NS COUNTER...: runs the meter in
# RECV_NS (pinned to PB_CPU_RECV) and a sender in SEND_NS (pinned to
# PB_CPU_SEND) for warmup + window; prints the meter's JSON with the
# sender's rate added as "sent".
pps_sample() {
	local sns=$1 src=$2 dst=$3 dmac=$4 rns=$5
	shift 5
	local m s
	m=$(mktemp) s=$(mktemp)
	taskset -c "$PB_CPU_RECV" "$PKTLOAD" meter -n "$rns" --warmup "$PB_WARMUP" \
		--window "$PB_DURATION" "$@" >"$m" &
	local mpid=$!
	sleep 0.1
	taskset -c "$PB_CPU_SEND" "$PKTLOAD" send -n "$sns" --mode "$PB_SENDER" \
		--bind "$src" --dst "$dst" --port 9 --dev eth0 --dmac "$dmac" \
		--duration "$(awk -v w="$PB_WARMUP" -v d="$PB_DURATION" 'BEGIN { print w + d + 0.3 }')" >"$s"
	wait $mpid
	jq -c --slurpfile s "$s" '. + {sent: ($s[0].pps // 0)}' "$m"
	rm -f "$m" "$s"
}

# --- samples and results ------------------------------------------------

suite_begin() {	# suite_begin NAME TITLE
	SUITE=$1
	SUITE_TITLE=$2
	SUITE_DIR=$(mktemp -d /tmp/pb-$SUITE.XXXXXX)
	: >"$SUITE_DIR/samples"
	: >"$SUITE_DIR/meta"
	SUITE_T0=$(date +%s)
	meta load_average_at_start "\"$(cut -d' ' -f1-3 /proc/loadavg) (other work on this machine competes for the same CPUs)\""
	echo
	echo "== suite $SUITE: $SUITE_TITLE"
	echo "   kernel $KERNEL, $(nproc) CPUs, $PB_REPS interleaved rounds"
}

meta() {	# meta KEY JSON-VALUE: printed and kept with the results
	echo "   $1: $2"
	jq -nc --arg k "$1" --argjson v "$2" '{type: "info", key: $k, value: $v}' \
		>>"$SUITE_DIR/meta"
}

note() {	# note TEXT: printed and kept with the results
	echo "   note: $*"
	jq -nc --arg t "$*" '{type: "note", text: $t}' >>"$SUITE_DIR/meta"
}

skip() {	# skip VARIANT REASON
	echo "   SKIP $SUITE/$1: $2"
	jq -nc --arg v "$1" --arg r "$2" '{type: "skip", variant: $v, reason: $r}' \
		>>"$SUITE_DIR/meta"
}

failed() {	# failed CHECK REASON: the run measured something other than
		# what it claims; kept with the results, and bench/run.sh
		# exits 1
	echo "   FAILED $SUITE/$1: $2"
	jq -nc --arg c "$1" --arg r "$2" '{type: "failure", check: $c, reason: $r}' \
		>>"$SUITE_DIR/meta"
	PB_FAILED=1
}

# ratio NAME METRIC NUM DEN [SEED]: NUM/DEN per round (same round, so the
# machine's state is as close as it gets), median/min/max over rounds.
ratio() {
	jq -nc --arg n "$1" --arg m "$2" --arg a "$3" --arg b "$4" --arg s "${5:-}" \
		'{type: "ratio", name: $n, metric: $m, num: $a, den: $b, seed: $s}' \
		>>"$SUITE_DIR/meta"
}

sample() {	# sample METRIC UNIT VARIANT REP VALUE
	if ! [[ "${5:-}" =~ ^[0-9]+(\.[0-9]+)?$ ]]; then
		printf '   %-28s %-34s round %d: no value (%s)\n' "$1" "$3" "$4" \
			"the measurement failed"
		return 0
	fi
	jq -nc --arg m "$1" --arg u "$2" --arg v "$3" --argjson r "$4" \
		--argjson x "$5" '{metric: $m, unit: $u, variant: $v, rep: $r, value: $x}' \
		>>"$SUITE_DIR/samples"
	printf '   %-28s %-34s round %d: %s %s\n' "$1" "$3" "$4" "$5" "$2"
}

# The statistics: median, min, max and spread per (metric, variant), in the
# order first measured; ratios per round.
PB_JQ_STATS='
def median: sort | if length == 0 then null
	elif length % 2 == 1 then .[(length - 1) / 2]
	else (.[length / 2 - 1] + .[length / 2]) / 2 end;
def stats: map(.value) as $v | {n: ($v | length), median: ($v | median),
	min: ($v | min), max: ($v | max), samples: $v};
($samples) as $s |
($meta | map(select(.type == "info")) | map({(.key): .value}) | add // {}) as $info |
{
  suite: $suite, title: $title, date: $date, kernel: $kernel, cpus: $cpus,
  rounds: $rounds, seconds: $seconds, info: $info,
  notes: [$meta[] | select(.type == "note") | .text],
  skipped: [$meta[] | select(.type == "skip") | {variant, reason}],
  failed: [$meta[] | select(.type == "failure") | {check, reason}],
  figures: (reduce $s[] as $x ([]; if any(.[]; .[0] == $x.metric and .[1] == $x.variant)
		then . else . + [[$x.metric, $x.variant, $x.unit]] end)
	| map(. as [$m, $v, $u] | {metric: $m, variant: $v, unit: $u}
		+ ([$s[] | select(.metric == $m and .variant == $v)] | stats)
		| . + {spread_pct: (if .median > 0 then ((.max - .min) / .median * 100
			| . * 10 | round / 10) else null end)})),
  ratios: [$meta[] | select(.type == "ratio") | . as $r |
	[$s[] | select(.metric == $r.metric and .variant == $r.num)] as $a |
	[$s[] | select(.metric == $r.metric and .variant == $r.den)] as $b |
	[$a[] | . as $x | ($b[] | select(.rep == $x.rep) | .value) as $y
		| select($y > 0) | {rep: $x.rep, value: ($x.value / $y)}] as $per |
	{name: $r.name, metric: $r.metric, num: $r.num, den: $r.den, seed: $r.seed}
	+ if ($per | length) > 0 then ($per | stats) else {n: 0, median: null} end]
}'

fmt_num() {	# human-readable numbers in tables
	awk -v x="$1" 'BEGIN {
		if (x == "" || x == "null") { print "-"; exit }
		a = x < 0 ? -x : x
		if (a >= 1e9) printf "%.2f G\n", x / 1e9
		else if (a >= 1e6) printf "%.3f M\n", x / 1e6
		else if (a >= 1e4) printf "%.1f k\n", x / 1e3
		else if (a >= 100) printf "%.0f\n", x
		else if (a >= 10) printf "%.1f\n", x
		else printf "%.3f\n", x }'
}

suite_end() {
	local base=$RESULTS/$PB_DATE-${PB_TAG:+$PB_TAG-}$SUITE json md
	json=$base.json
	md=$base.md
	mkdir -p "$RESULTS"
	jq -n --slurpfile samples "$SUITE_DIR/samples" --slurpfile meta "$SUITE_DIR/meta" \
		--arg suite "$SUITE" --arg title "$SUITE_TITLE" --arg date "$PB_DATE" \
		--arg kernel "$KERNEL" --argjson cpus "$(nproc)" --argjson rounds "$PB_REPS" \
		--argjson seconds $(( $(date +%s) - SUITE_T0 )) \
		"$PB_JQ_STATS" >"$json"
	write_md "$json" >"$md"
	write_plot "$json" "$base.png"
	echo "   wrote $json, $md${PB_PLOTTED:+, $base.png}"
	sed -n '/^| /p' "$md" | sed 's/^/   /'
	rm -rf "$SUITE_DIR"
}

write_md() {	# write_md JSON: the Markdown report of one suite
	local j=$1 m
	echo "### $(jq -r .title "$j")"
	echo
	echo "Kernel $(jq -r .kernel "$j"), $(jq -r .cpus "$j") CPUs, $(jq -r .date "$j");" \
		"median of $(jq -r .rounds "$j") interleaved rounds (min–max); spread = (max − min) / median."
	jq -r '.info | to_entries[] | "- \(.key): \(.value)"' "$j"
	jq -r '.notes[] | "- \(.)"' "$j"
	jq -r '.skipped[] | "- **SKIP** \(.variant): \(.reason)"' "$j"
	jq -r '(.failed // [])[] | "- **FAILED** \(.check): \(.reason)"' "$j"
	for m in $(jq -r '[.figures[].metric] | unique | .[]' "$j"); do
		echo
		echo "| $m ($(jq -r --arg m "$m" '[.figures[] | select(.metric == $m)][0].unit' "$j")) | median | min | max | spread |"
		echo "|---|---:|---:|---:|---:|"
		jq -r --arg m "$m" '.figures[] | select(.metric == $m) |
			[.variant, .median, .min, .max, .spread_pct] | @tsv' "$j" |
		while IFS=$'\t' read -r v med lo hi sp; do
			echo "| $v | $(fmt_num "$med") | $(fmt_num "$lo") | $(fmt_num "$hi") | ${sp}% |"
		done
	done
	if [ "$(jq '.ratios | length' "$j")" -gt 0 ]; then
		echo
		echo "| ratio (same round) | metric | median | min | max | seed |"
		echo "|---|---|---:|---:|---:|---|"
		jq -r '.ratios[] | [.name, .metric, .median, .min, .max, .seed] | @tsv' "$j" |
		while IFS=$'\t' read -r n m med lo hi seed; do
			echo "| $n | $m | $(fmt_num "$med") | $(fmt_num "$lo") | $(fmt_num "$hi") | ${seed:--} |"
		done
	fi
}

write_plot() {	# write_plot JSON PNG: one panel per metric, bars = median,
		# error bars = min..max
	local j=$1 png=$2 metrics n i=0 dat
	PB_PLOTTED=
	command -v gnuplot >/dev/null || { echo "   (no gnuplot: no plot)"; return 0; }
	metrics=$(jq -r '[.figures[].metric] | unique | .[]' "$j")
	n=$(echo "$metrics" | grep -c . || true)
	[ "$n" -gt 0 ] || return 0
	{
		echo "set terminal pngcairo size 900,$((300 * n)) font 'sans,9'"
		echo "set output '$png'"
		echo "set multiplot layout $n,1 title \"$(jq -r .title "$j" | tr -d '"') — kernel $KERNEL\" noenhanced"
		echo "set style fill solid 0.5 border -1"
		echo "set boxwidth 0.6"
		echo "set yrange [0:*]"
		echo "set grid ytics"
		echo "set xtics noenhanced"
		echo "unset key"
		for m in $metrics; do
			i=$((i + 1))
			dat=$SUITE_DIR/plot$i.dat
			jq -r --arg m "$m" '.figures[] | select(.metric == $m) |
				"\"\(.variant | gsub(", "; "\\n"))\" \(.median) \(.min) \(.max)"' "$j" >"$dat"
			echo "set title '$m ($(jq -r --arg m "$m" '[.figures[] | select(.metric == $m)][0].unit' "$j"))' noenhanced"
			echo "plot '$dat' using 0:2:xtic(1) with boxes lc rgb '#4a7ebb', '' using 0:2:3:4 with yerrorbars lc rgb 'black' pt 0"
		done
		echo "unset multiplot"
	} >"$SUITE_DIR/plot.gp"
	if gnuplot "$SUITE_DIR/plot.gp" 2>"$SUITE_DIR/plot.err"; then
		PB_PLOTTED=1
	else
		echo "   (gnuplot failed: $(tail -n 1 "$SUITE_DIR/plot.err"))"
	fi
}
