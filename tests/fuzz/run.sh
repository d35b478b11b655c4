#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# make fuzz: runs each fuzzer for FUZZ_TIME seconds (default 60) over its
# corpus, one after the other, at nice 10 (FUZZ_NICE).
#   tests/fuzz/run.sh [NAME[,NAME...]]     NAME: parse cni proxy bpf
# The kept corpus (tests/fuzz/corpus/NAME/) is read, not written: new
# inputs go to $FUZZ_BUILD/corpus/NAME/, crashes to
# $FUZZ_BUILD/artifacts/NAME/. To grow the kept corpus, merge and minimise:
#   build-fuzz/fuzz_NAME -merge=1 tests/fuzz/corpus/NAME build-fuzz/corpus/NAME
# The fuzzers of the datapath and the proxy need root (private network
# namespaces, BPF).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
FB=${FUZZ_BUILD:-build-fuzz}
case $FB in /*) ;; *) FB=$ROOT/$FB ;; esac
TIME=${FUZZ_TIME:-60}
NICE=${FUZZ_NICE:-10}
names=${1:-parse,cni,proxy,bpf}
rc=0
for n in ${names//,/ }; do
	bin=$FB/fuzz_$n
	if [ ! -x "$bin" ]; then
		echo "FAIL fuzz_$n: $bin is not built (make fuzz-build)"
		rc=1
		continue
	fi
	mkdir -p "$FB/corpus/$n" "$FB/artifacts/$n"
	log=$FB/artifacts/$n/last.log
	start=$(date +%s)
	nice -n "$NICE" "$bin" -max_total_time="$TIME" -timeout=20 \
		-print_final_stats=1 -artifact_prefix="$FB/artifacts/$n/" \
		"$FB/corpus/$n" "$ROOT/tests/fuzz/corpus/$n" >"$log" 2>&1
	r=$?
	secs=$(( $(date +%s) - start ))
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	if [ "$r" = 0 ]; then
		echo "PASS fuzz_$n: ${secs}s, ${execs:-?} executions, no crash"
	else
		why=$(grep -m 1 -E "^fuzz_$n: |ERROR: |runtime error" "$log")
		echo "FAIL fuzz_$n: ${why:-exit $r} (log $log, input in $FB/artifacts/$n/)"
		rc=1
	fi
done
exit $rc
