#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Every BPF object of the build through this kernel's verifier, as
# `bpftool prog loadall` loads it (each program with its object's default
# read-only data): one PASS/FAIL line per object, then the count line.
# CI boots the stock kernels with this alone (a minute each), so that a
# program the oldest verifier refuses (too complex, an unknown helper) is
# found on every change, not only by the lab matrix run by hand; the unit
# tests then load every variant, in the full runs.
#   tests/lab/load-all.sh [BUILD_DIR]
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
BUILD=${1:-build}
PIN=/sys/fs/bpf/podinject-load-all-$$	# (bpffs takes no dot in a name)
pass=0 fail=0

mountpoint -q /sys/fs/bpf || mount -t bpf bpf /sys/fs/bpf
for obj in "$BUILD"/node.bpf.o "$BUILD"/inject.bpf.o "$BUILD"/xdp.bpf.o; do
	name=$(basename "$obj")
	rm -rf "$PIN"
	mkdir -p "$PIN"
	if [ ! -s "$obj" ]; then
		echo "FAIL verifier/$name: no such object (build first)"
		fail=$((fail + 1))
	elif out=$(bpftool prog loadall "$obj" "$PIN" 2>&1); then
		echo "PASS verifier/$name ($(ls "$PIN" | wc -l) programs, $(uname -r))"
		pass=$((pass + 1))
	else
		echo "FAIL verifier/$name: $(grep -E 'processed|too large|invalid|unknown|Error' <<<"$out" | tail -n 3 | tr '\n' ' ')"
		fail=$((fail + 1))
	fi
	rm -rf "$PIN"
done
echo "$pass passed, $fail failed, 0 skipped"
[ "$fail" = 0 ]
