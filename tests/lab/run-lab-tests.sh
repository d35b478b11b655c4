#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Lab-only tests (tests/lab): the lab kernel's features as podinject's probes
# report them (expect-features.sh), then the BPF_F_EGRESS cases
# (redirect_peer_egress); prints their PASS/FAIL/SKIP lines.
# tests/run.sh calls this; lab/run.sh runs it as the whole suite while
# tests/run.sh does not exist yet.
#
#   tests/lab/run-lab-tests.sh [--summary] [--force]
#     --summary  end with "N passed, N failed, N skipped"
#     --force    run the BPF_F_EGRESS cases even on a kernel that lacks the
#                flag (they then FAIL; the stock kernels show it)
#
# Outside the lab (PODINJECT_LAB unset) everything is reported as SKIP, unless
# LAB_TESTS_ON_HOST=1. Exit status 1 if any test failed.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1

summary=0
args=()
for a in "$@"; do
	case "$a" in
	--summary) summary=1 ;;
	--force) args+=(--force) ;;
	*) echo "usage: $0 [--summary] [--force]" >&2; exit 2 ;;
	esac
done

BIN=${LAB_TESTS_BIN:-build/lab/redirect_peer_egress}
out=
if [ -z "${PODINJECT_LAB:-}" ] && [ "${LAB_TESTS_ON_HOST:-0}" != 1 ]; then
	out="SKIP redirect_peer_egress: lab-only test, run by 'make lab' (PODINJECT_LAB is unset)"
elif [ "$(id -u)" != 0 ]; then
	out="SKIP redirect_peer_egress: needs root"
elif [ ! -x "$BIN" ]; then
	if [ -n "${PODINJECT_LAB:-}" ]; then
		out="FAIL redirect_peer_egress: $BIN was not built (make -f lab/Makefile.tests)"
	else
		out="SKIP redirect_peer_egress: $BIN not built (make -f lab/Makefile.tests)"
	fi
else
	out=$(timeout "${LAB_TESTS_TIMEOUT:-300}" "$BIN" "${args[@]}" 2>&1)
	rc=$?
	if [ $rc -eq 124 ]; then
		out+=$'\n'"FAIL redirect_peer_egress: timed out"
	elif [ $rc -ne 0 ] && ! grep -q '^FAIL ' <<< "$out"; then
		out+=$'\n'"FAIL redirect_peer_egress: exited $rc"
	fi
fi

# what the probes say about this kernel, before any case trusts them
out=$(tests/lab/expect-features.sh 2>&1)$'\n'$out
printf '%s\n' "$out"
p=$(grep -c '^PASS ' <<< "$out")
f=$(grep -c '^FAIL ' <<< "$out")
s=$(grep -c '^SKIP ' <<< "$out")
[ $summary -eq 1 ] && echo "$p passed, $f failed, $s skipped"
[ "$f" -eq 0 ]
