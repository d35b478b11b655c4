#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The test suite: BPF unit tests, then integration tests in namespaces the
# tests make themselves, then the lab-only tests (which SKIP outside the
# lab). One PASS/FAIL/SKIP line per test; the last line counts them.
#   tests/run.sh [-t FILTER[,FILTER...]] [-n NAME[,NAME...]] [-x NAME[,NAME...]]
# -t: a test runs when any filter is part of its name; -n: only the suites
# named (whole names); -x: the suites named do not run, and print nothing
# (CI's second pass on the sanitizer build leaves out the two long ones
# that repeat one call; the lab splits the suite over two guests with -n
# in one and -x in the other)
# SUITE_TIMEOUT: seconds an integration suite may take (600; for one suite
# SUITE_TIMEOUT_NAME), UNIT_TIMEOUT the BPF unit tests (300); the lab,
# under emulation, gives both more
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${PODINJECT_BUILD:-$ROOT/build}
FILTER= ONLY= EXCLUDE=
while [ $# -gt 0 ]; do
	case $1 in
	-t) FILTER=${2:-}; shift 2 || shift ;;
	-n) ONLY=${2:-}; shift 2 || shift ;;
	-x) EXCLUDE+=,${2:-}; shift 2 || shift ;;
	*) echo "usage: tests/run.sh [-t FILTER[,FILTER...]] [-n NAME[,NAME...]] [-x NAME[,NAME...]]" >&2; exit 2 ;;
	esac
done

# wanted NAME: not excluded, named if -n names any, and no filter or one
# of the comma-separated filters is in NAME
wanted() {
	local f
	[[ ",$EXCLUDE," == *",$1,"* ]] && return 1
	[ -n "$ONLY" ] && [[ ",$ONLY," != *",$1,"* ]] && return 1
	[ -z "$FILTER" ] && return 0
	for f in ${FILTER//,/ }; do
		[[ $1 == *"$f"* ]] && return 0
	done
	return 1
}

out=$(mktemp)
trap 'rm -f "$out"' EXIT

# expected NAME FILE: how many test lines the suite must print. Each
# integration suite declares it on a line of its own, `EXPECT=N` (a suite
# that SKIPs as a whole prints one `SKIP SUITE/all` line instead); the
# unit tests and the lab-only tests are counted here. A suite that prints
# fewer lines lost checks: it died early, or a check's command was never
# run, and the run must not say "0 failed".
UNIT_EXPECT=108
LIB_EXPECT=103
RELAY_EXPECT=14
expected() {
	case $1 in
	unit) echo "$UNIT_EXPECT" ;;
	nl_check) echo 1 ;;
	lib) echo "$LIB_EXPECT" ;;
	relay) echo "$RELAY_EXPECT" ;;
	# one line per feature of a kernel in tests/kernels.txt (one SKIP
	# line for another); the 16 flag cases in the lab, one SKIP line for
	# them outside
	lab) local k f=1 c=1
	     k=$("$ROOT/tests/known-features.sh") && f=$(wc -w <<<"${k#* }")
	     [ -n "${PODINJECT_LAB:-}" ] || [ "${LAB_TESTS_ON_HOST:-0}" = 1 ] && c=16
	     echo $((f + c)) ;;
	*) sed -n 's/^EXPECT=\([0-9][0-9]*\)$/\1/p' "$2" | tail -n 1 ;;
	esac
}

# build_procs: "PID PROGRAM" of each process running a program of this
# build (one ls for all: a readlink each would be a process per process)
build_procs() {
	ls -l /proc/[0-9]*/exe 2>/dev/null | grep -F " -> $BUILD/" |
		sed 's|.*/proc/\([0-9]*\)/exe -> \(.*\)|\1 \2|'
}

# left_running BEFORE: what build_procs gives now and did not before,
# after up to 2 s for processes that were told to stop
left_running() {
	local now i
	for i in $(seq 20); do
		now=$(build_procs | grep -vxF -e "${1:-none}")
		[ -z "$now" ] && return 0
		sleep 0.1
	done
	echo "$now"
}

# run NAME FILE CMD...: keeps the command's test lines; a command that
# dies without saying why, a check lost to a shell error, or a suite that
# printed fewer test lines than it declares becomes a FAIL line of its own.
run() {
	local name=$1 file=$2 rc tmp lost want got before left
	shift 2
	tmp=$(mktemp)
	before=$(build_procs)
	local t0=$SECONDS
	"$@" >"$tmp" 2>&1
	rc=$?
	# not a test line: where CI's time goes
	echo "# $name took $((SECONDS - t0)) s"
	grep -E '^(PASS|FAIL|SKIP) ' "$tmp" | tee -a "$out"
	# An expansion error (arithmetic, bad substitution), a mistyped or
	# missing command on a check's line makes bash drop that command and
	# go on: the check prints no line and the script may still exit 0. So
	# a check lost that way is a FAIL. (The lab's busybox date had no %N;
	# four timing checks vanished like that.)
	lost=$(grep -m 1 -E ': line [0-9]+: .*(\(error token is |bad substitution|command not found|integer expression expected|unary operator expected|unbound variable|syntax error)|^exec of ".*" failed' "$tmp")
	want=$(expected "$name" "$file")
	got=$(grep -c -E '^(PASS|FAIL|SKIP) ' "$tmp")
	if [ "$rc" = 124 ]; then
		echo "FAIL $name: timed out" | tee -a "$out"
	elif [ -n "$lost" ]; then
		echo "FAIL $name: a check was lost to a shell error: $lost" | tee -a "$out"
	elif [ "$rc" != 0 ] && ! grep -q '^FAIL ' "$tmp"; then
		echo "FAIL $name: exited $rc: $(tail -n 1 "$tmp")" | tee -a "$out"
	fi
	if [ -z "$want" ]; then
		echo "FAIL $name: declares no expected number of checks (EXPECT=N)" | tee -a "$out"
	elif [ "$got" = 1 ] && grep -q -E "^SKIP [a-z0-9_]+/all: " "$tmp"; then
		:	# skipped as a whole, with its reason
	elif [ "$got" != "$want" ]; then
		echo "FAIL $name: printed $got test lines, declares $want" | tee -a "$out"
	fi
	# A suite tears down what it made: a process of this build still
	# running after it is a FAIL, and is stopped so that it cannot
	# disturb the next suite (t_mtls_2n's two proxies outlived it)
	left=$(left_running "$before")
	if [ -n "$left" ]; then
		echo "FAIL $name: left running: $(awk '{print $1, $2}' <<<"$left" | sed "s|$BUILD/||" | tr '\n' ' ')" | tee -a "$out"
		kill -9 $(awk '{print $1}' <<<"$left") 2>/dev/null
	fi
	[ -n "${TEST_LOG_DIR:-}" ] && cp "$tmp" "$TEST_LOG_DIR/$name.log"
	rm -f "$tmp"
}

if [ "$(id -u)" != 0 ]; then
	# not a pass: nothing was tested
	echo "FAIL all: the tests load BPF programs and make namespaces; run as root" | tee -a "$out"
else
	# Not a test line: a run stopped by SIGKILL left its suites' nodes
	# and namespaces, which the same suites would now find in their way
	swept=$(bash "$ROOT/tests/integration/sweep.sh" | tr '\n' ' ')
	[ -z "$swept" ] || echo "# removed what an earlier run left: $swept"
	if wanted unit; then
		run unit "" env PODINJECT_ROOT="$ROOT" timeout "${UNIT_TIMEOUT:-300}" "$BUILD/unit_tests"
	fi
	if wanted nl_check; then
		run nl_check "" timeout 120 "$BUILD/nl_check"
	fi
	if wanted lib; then
		run lib "" timeout 300 "$BUILD/lib_tests"
	fi
	if wanted relay; then
		run relay "" timeout 120 "$BUILD/relay_check"
	fi
	for t in "$ROOT"/tests/integration/t_*.sh; do
		name=$(basename "$t" .sh)
		wanted "$name" || continue
		# SUITE_TIMEOUT_NAME: one suite's own limit
		limit=SUITE_TIMEOUT_$name
		run "$name" "$t" timeout "${!limit:-${SUITE_TIMEOUT:-600}}" bash "$t"
	done
	if [ -x "$ROOT/tests/lab/run-lab-tests.sh" ] &&
	   wanted lab; then
		run lab "" "$ROOT/tests/lab/run-lab-tests.sh"
	fi
fi

p=$(grep -c '^PASS ' "$out")
f=$(grep -c '^FAIL ' "$out")
s=$(grep -c '^SKIP ' "$out")
echo "$p passed, $f failed, $s skipped"
[ "$f" = 0 ]
