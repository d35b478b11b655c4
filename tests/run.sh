#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The test suite: BPF unit tests, then integration tests in namespaces the
# tests make themselves, then the lab-only tests (which SKIP outside the
# lab). One PASS/FAIL/SKIP line per test; the last line counts them.
#   tests/run.sh [-t FILTER[,FILTER...]]   (a test runs when any matches)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${PODINJECT_BUILD:-$ROOT/build}
FILTER=
[ "${1:-}" = "-t" ] && FILTER=${2:-}

# wanted NAME: no filter, or one of the comma-separated filters is in NAME
wanted() {
	local f
	[ -z "$FILTER" ] && return 0
	for f in ${FILTER//,/ }; do
		[[ $1 == *"$f"* ]] && return 0
	done
	return 1
}

out=$(mktemp)
trap 'rm -f "$out"' EXIT

# run NAME CMD...: keeps the command's test lines; a command that dies
# without saying why becomes a FAIL line of its own.
run() {
	local name=$1 rc tmp lost
	shift
	tmp=$(mktemp)
	"$@" >"$tmp" 2>&1
	rc=$?
	grep -E '^(PASS|FAIL|SKIP) ' "$tmp" | tee -a "$out"
	# An expansion error (arithmetic, bad substitution) on a check's line
	# makes bash drop that command and go on: the check prints no line and
	# the script may still exit 0. So a check lost that way is a FAIL. (The
	# lab's busybox date had no %N; four timing checks vanished like that.)
	lost=$(grep -m 1 -E ': line [0-9]+: .*(\(error token is |bad substitution)' "$tmp")
	if [ "$rc" = 124 ]; then
		echo "FAIL $name: timed out" | tee -a "$out"
	elif [ -n "$lost" ]; then
		echo "FAIL $name: a check was lost to a shell error: $lost" | tee -a "$out"
	elif [ "$rc" != 0 ] && ! grep -q '^FAIL ' "$tmp"; then
		echo "FAIL $name: exited $rc: $(tail -n 1 "$tmp")" | tee -a "$out"
	fi
	[ -n "${TEST_LOG_DIR:-}" ] && cp "$tmp" "$TEST_LOG_DIR/$name.log"
	rm -f "$tmp"
}

if [ "$(id -u)" != 0 ]; then
	echo "SKIP all: the tests load BPF programs and make namespaces; run as root" | tee -a "$out"
else
	if wanted unit; then
		run unit "$BUILD/unit_tests"
	fi
	if wanted lib; then
		run lib timeout 300 "$BUILD/lib_tests"
	fi
	for t in "$ROOT"/tests/integration/t_*.sh; do
		name=$(basename "$t" .sh)
		wanted "$name" || continue
		run "$name" timeout 600 bash "$t"
	done
	if [ -x "$ROOT/tests/lab/run-lab-tests.sh" ] &&
	   wanted lab; then
		run lab "$ROOT/tests/lab/run-lab-tests.sh"
	fi
fi

p=$(grep -c '^PASS ' "$out")
f=$(grep -c '^FAIL ' "$out")
s=$(grep -c '^SKIP ' "$out")
echo "$p passed, $f failed, $s skipped"
[ "$f" = 0 ]
