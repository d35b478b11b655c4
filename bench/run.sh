#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# podinject's benchmarks (`make bench`; never part of `make test`).
#
#   bench/run.sh [SUITE...]      SUITE: injection redirect xdp progcost proxy mtls cni
#                                metrics apply
#                                (default: all, in that order)
#
# Each suite writes bench/results/DATE-SUITE.{json,md,png}. Every figure is
# the median of PB_REPS interleaved rounds (A B C A B C ..., never A A B B)
# with min and max; every ratio is computed round by round within the run.
# Settings (environment): PB_REPS (5), PB_DURATION (3 s per pps sample),
# PB_TCP_DURATION (5 s per iperf3 run), PB_WARMUP (0.5 s), PB_SENDER
# (packet|udp), PB_CPU_SEND (0), PB_CPU_RECV (1), PB_QUICK=1 (2 rounds of
# 1-2 s: a smoke run). All traffic stays in namespaces made here; they are
# removed on exit, whatever happened.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
for s in "$ROOT"/bench/suites/*.sh; do
	. "$s"
done

ALL="injection redirect xdp progcost proxy mtls cni metrics apply"
suites=${*:-$ALL}
for s in $suites; do
	case " $ALL " in
	*" $s "*) ;;
	*) echo "usage: bench/run.sh [SUITE...]   SUITE: $ALL" >&2; exit 2 ;;
	esac
done
if [ "$(id -u)" != 0 ]; then
	echo "bench: needs root (namespaces, BPF)" >&2
	exit 1
fi

# The plotter is the bench's own dependency, not the build's. In the
# kernel lab's guest (no apt, no compiler) the tools were built on the
# host (lab/bench.sh) and the host draws the plots.
if [ -z "${PODINJECT_LAB:-}" ]; then
	"$ROOT/scripts/deps.sh" gnuplot-nox >/dev/null || echo "bench: gnuplot-nox missing, no plots"
	make -s -C "$ROOT" -f bench/bench.mk BUILD="$BUILD" || exit 1
fi

trap pb_teardown EXIT
trap 'exit 130' INT TERM
pb_teardown

t0=$(date +%s)
echo "bench: kernel $KERNEL, $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)," \
	"$PB_REPS rounds, ${PB_DURATION}s pps windows, ${PB_TCP_DURATION}s iperf3 runs, sender $PB_SENDER"
for s in $suites; do
	PB_LOST=0
	"suite_$s"
	if [ "$PB_LOST" = 1 ]; then
		# Something outside the bench removed its namespaces (seen
		# when a test's cleanup matched every namespace): once more,
		# from scratch; the second run's files replace the first's.
		echo "bench: suite $s lost its namespaces; running it again"
		pb_teardown
		PB_LOST=0
		"suite_$s"
	fi
	pb_teardown
done
echo
echo "bench: done in $(( $(date +%s) - t0 )) s; results in $RESULTS"
if [ "${PB_FAILED:-0}" = 1 ]; then
	echo "bench: FAILED: a suite measured something other than it claims (FAILED lines above, \"failed\" in its JSON)"
	exit 1
fi
