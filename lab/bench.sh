#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# lab/bench.sh [KERNELS...]   (default: ours debian-6.12; `make bench-lab`)
#
# The injection suite (bench/suites/injection.sh) inside the kernel lab's
# QEMU guest, where the kernel has netkit and, on ours, BPF_F_EGRESS: on
# netkit pods and on veth pods, (a) fast, (b) the fallback of the device
# type, (c) sent by the target itself. For each kernel it builds an image
# whose /init runs bench/lab-guest.sh instead of the tests (lab/run.sh,
# LAB_SUITE), takes the results off the console, writes
#   bench/results/DATE-lab-KERNEL-injection{,-netkit}.{json,md,png}
# (the plots drawn here: the guest has no gnuplot) and prints the tables.
# Under TCG every number is emulated: read the ratios only.
#
# Environment: PB_REPS (9 interleaved rounds), PB_DURATION (3 s),
# PB_TCP_DURATION (5 s), PB_LAB_RUNS (the suite's runs, "netkit
# netkit:napi:backlog20 mtls": DEVICE, and ":backlogN" for the same with
# a backlog of N packets, ":napi" with the injected packets arriving in
# NAPI polls, ":rps" with the pods' receive work on the other CPU, joined
# as DEVICE:LOAD:LOAD; bench/suites/injection.sh; "mtls" for the mTLS suite,
# kTLS beside user-space TLS and HAProxy: PB_MTLS_BYTES 64 MiB,
# PB_MTLS_CONNS 50, PB_MTLS_IDLE 200),
# LAB_TIMEOUT (4800 s per kernel), LAB_SMP (2: sender and receiver on CPUs
# of their own; our kernel brings up both since it has ACPI); the rest as
# lab/run.sh.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
[ $# -gt 0 ] || set -- ours debian-6.12
# shellcheck disable=SC2206
KERNELS=($*)
: "${PB_REPS:=9}" "${PB_DURATION:=3}" "${PB_TCP_DURATION:=5}"
: "${PB_LAB_RUNS:=netkit netkit:napi:backlog20 mtls}"
. bench/lib.sh
out=$ROOT/build/lab-bench
mkdir -p "$out"

"$ROOT/scripts/deps.sh" gnuplot-nox >/dev/null || echo "bench-lab: gnuplot-nox missing, no plots"
make -s -C "$ROOT" -f bench/bench.mk BUILD="$BUILD" || exit 1

status=0
# the mTLS suite wants HAProxy in the image (its TLS beside ours) and
# sizes an emulated CPU gets through: 64 MiB a transfer, 50 connections
# a sample, 200 idle for the memory figure
extra=${LAB_EXTRA_TOOLS:-}
case " $PB_LAB_RUNS " in *" mtls "*) extra="$extra haproxy" ;; esac
: "${PB_MTLS_BYTES:=$((64 << 20))}" "${PB_MTLS_CONNS:=50}" "${PB_MTLS_IDLE:=200}"
for k in "${KERNELS[@]}"; do
	# quiet: the kernel's own messages would cut into the base64 lines
	LAB_OUT=$out LAB_TIMEOUT=${LAB_TIMEOUT:-4800} LAB_SMP=${LAB_SMP:-2} \
	LAB_EXTRA_TOOLS=$extra \
	LAB_SUITE="PB_LAB_RUNS='$PB_LAB_RUNS' PB_REPS=$PB_REPS PB_DURATION=$PB_DURATION PB_TCP_DURATION=$PB_TCP_DURATION PB_MTLS_BYTES=$PB_MTLS_BYTES PB_MTLS_CONNS=$PB_MTLS_CONNS PB_MTLS_IDLE=$PB_MTLS_IDLE PB_DATE=$PB_DATE ./bench/lab-guest.sh" \
		nice -n 10 "$ROOT/lab/run.sh" "$k" || status=1
	console=$out/$k.console.log
	files=$(mktemp -d)
	if ! tr -d '\r' <"$console" |
		sed -n '/^PODINJECT-BENCH-FILES-BEGIN/,/^PODINJECT-BENCH-FILES-END/p' |
		sed '1d;$d' | base64 -d | tar -C "$files" -xzf - 2>/dev/null ||
	   ! ls "$files"/*.json >/dev/null 2>&1; then
		echo "bench-lab: no results from $k on its console ($console)"
		status=1
		rm -rf "$files"
		continue
	fi
	mkdir -p "$RESULTS"
	for j in "$files"/*.json; do
		b=$(basename "$j" .json)
		cp "$j" "$files/$b.md" "$RESULTS/"
		SUITE_DIR=$(mktemp -d) KERNEL="$(jq -r .kernel "$j") (QEMU TCG guest: emulated)"
		write_plot "$RESULTS/$b.json" "$RESULTS/$b.png"
		rm -rf "$SUITE_DIR"
		echo
		echo "bench-lab: $k: $RESULTS/$b.{json,md${PB_PLOTTED:+,png}}"
		cat "$RESULTS/$b.md"
	done
	rm -rf "$files"
done
exit $status
