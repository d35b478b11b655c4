#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Runs in the kernel lab's guest (lab/bench.sh puts it in the image as the
# suite /init runs): the injection suite on netkit pods and on veth pods,
# then the results as a base64 tar.gz between two marker lines on the
# console, where lab/bench.sh takes them out:
#   PODINJECT-BENCH-FILES-BEGIN
#   ...
#   PODINJECT-BENCH-FILES-END
# and the line lab/run.sh waits for, "bench-lab: N passed, N failed, 0
# skipped": N suite runs that ran to their end (or not). It is the
# runner's sign that the guest finished, never a verdict on the numbers.
# Settings come in the environment (PB_REPS, PB_DURATION, ...).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
export PB_RESULTS=/tmp/pb-results PB_TAG=lab-${PODINJECT_LAB:-unknown} PB_CPU_COST=1
# the emulated guest takes some 10 000 packets a second: the exact count
# of 100 000 goes at half that
export PB_ONCE_PPS=${PB_ONCE_PPS:-5000}
# bash's process substitution needs /dev/fd, which devtmpfs does not make
[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd
# one CPU (LAB_SMP=1): everything shares it, sender, softirq, receiver
if [ "$(nproc)" = 1 ]; then
	export PB_CPU_SEND=0 PB_CPU_RECV=0
fi
export PB_CPU_SEND=${PB_CPU_SEND:-0}
mkdir -p "$PB_RESULTS"
ran=0 failed=0
# PB_LAB_RUNS: words DEVICE[:LOAD...], LOAD "backlogN" (a backlog of N
# packets), "rps" (the pods' receive work on the other CPU; needs two) or
# "napi" (the injected packets arriving in NAPI polls on the other CPU):
# bench/suites/injection.sh says what each stands in for; and "mtls",
# the mTLS suite (bench/suites/mtls.sh: kTLS beside user-space TLS, the
# lab's kernels having kTLS)
for run in ${PB_LAB_RUNS:-netkit veth}; do
	rps= backlog= napi=
	if [ "$run" = mtls ]; then
		if ./bench/run.sh mtls; then
			ran=$((ran + 1))
		else
			failed=$((failed + 1))
		fi
		continue
	fi
	# LOADs may be joined: netkit:napi:backlog20
	for load in $(tr ':' ' ' <<<"${run#*:}"); do
		[ "$load" = "$run" ] && break	# no load
		case $load in
		rps)
			if [ "$(nproc)" -lt 2 ]; then
				echo "   SKIP $run: one CPU; RPS to another needs a second"
				continue 2
			fi
			rps=$((1 - PB_CPU_SEND)) ;;
		napi) napi=$(($(nproc) > 1 ? 1 - PB_CPU_SEND : 0)) ;;
		backlog*) backlog=${load#backlog} ;;
		esac
	done
	if PB_INJ_DEV=${run%%:*} PB_INJ_RPS=$rps PB_INJ_BACKLOG=$backlog \
		PB_INJ_NAPI=$napi ./bench/run.sh injection; then
		ran=$((ran + 1))
	else
		failed=$((failed + 1))
	fi
done
echo "PODINJECT-BENCH-FILES-BEGIN"
tar -C "$PB_RESULTS" -czf - . | base64
echo "PODINJECT-BENCH-FILES-END"
echo "bench-lab: $ran passed, $failed failed, 0 skipped"
