#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The fuzzers (tests/fuzz/) for a few seconds each over the corpus kept in
# the repository: every kept input (the seeds and the regression inputs of
# the bugs they found) runs again, then the fuzzer mutates for the rest of
# its time. A crash, a sanitizer report or a broken property is a FAIL.
# FUZZ_TEST_TIME: seconds per fuzzer (default 6). `make fuzz` runs them long.
. "$(dirname "$0")/lib.sh"
require_root
EXPECT=4
FB=${FUZZ_BUILD:-$ROOT/build-fuzz}
SECS=${FUZZ_TEST_TIME:-6}
T=$(mktemp -d /tmp/t_fuzz.XXXXXX)

for n in parse cni proxy bpf; do
	name=fuzz_$n
	bin=$FB/$name
	# The sanitizer pass of CI reruns the suite on build-san: the
	# fuzzers have their sanitizers built in and ran in the plain pass.
	# The lab runs the datapath on its kernels; the fuzzers run on the
	# host's suite.
	if on_sanitizer_build; then
		echo "SKIP $name: the fuzzers run in the plain pass (they carry ASan and UBSan)"
		continue
	fi
	if [ -n "${PODINJECT_LAB:-}" ]; then
		echo "SKIP $name: fuzzers run on the host, not in the lab"
		continue
	fi
	if [ ! -x "$bin" ]; then
		echo "FAIL $name: $bin is not built (make fuzz-build)"
		continue
	fi
	mkdir -p "$T/$n"
	# new inputs go to a scratch folder: the kept corpus is not written
	timeout $((SECS + 60)) nice -n 10 "$bin" -max_total_time="$SECS" \
		-timeout=20 -print_final_stats=1 -artifact_prefix="$T/$n/" \
		"$T/$n" "$ROOT/tests/fuzz/corpus/$n" >"$T/$n.log" 2>&1
	rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$T/$n.log" | tail -n 1)
	crash=$(ls "$T/$n" | grep -m 1 -E '^(crash|leak|timeout|oom)-')
	if [ "$rc" = 0 ] && [ -z "$crash" ]; then
		echo "PASS $name: ${execs:-?} executions in ${SECS}s, corpus included"
	else
		why=$(grep -m 1 -E "^$name: |ERROR: |runtime error" "$T/$n.log")
		[ -n "$crash" ] && [ -n "${TEST_LOG_DIR:-}" ] &&
			cp "$T/$n/$crash" "$TEST_LOG_DIR/$name-$crash"
		echo "FAIL $name: ${why:-exit $rc} (input: ${crash:-none saved}; base64 $(base64 -w0 "$T/$n/$crash" 2>/dev/null | head -c 200))"
	fi
done
rm -rf "$T"
