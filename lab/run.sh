#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# lab/run.sh [KERNELS...]   (default: ours)
#
# For each kernel -- ours (6.12 + kernel/*.patch, built and cached by
# lab/build-kernel.sh), debian-6.12, debian-6.1 (Debian's stock cloud kernels,
# lab/get-stock-kernel.sh) -- build an initramfs with the project and its
# test suite (lab/mkinitramfs.sh), boot it under QEMU (TCG), and print the
# suite's PASS/FAIL/SKIP lines and closing count under
#   == kernel NAME (uname -r) ==
# Exits non-zero if any kernel failed, timed out, or printed no count line.
#
# Environment:
#   PODINJECT_CACHE  cache directory (default ~/.cache/podinject)
#   LAB_OUT          where initramfs images and console logs go (default build/lab)
#   LAB_TIMEOUT      seconds per boot (default 3600: debian-6.1's full
#                    suite took 41 minutes under TCG on a shared host)
#   LAB_MEM, LAB_SMP QEMU memory (default 2G) and CPUs (default 2)
#   LAB_ACCEL        QEMU accelerator (default tcg; /dev/kvm here is not usable)
#   LAB_SUITE        command run inside the VM (see lab/mkinitramfs.sh)
#   LAB_VERBOSE=1    print the whole console, not only the result lines
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
LAB_OUT=${LAB_OUT:-$ROOT/build/lab}
LAB_TIMEOUT=${LAB_TIMEOUT:-3600}
LAB_MEM=${LAB_MEM:-2G}
LAB_SMP=${LAB_SMP:-2}
LAB_ACCEL=${LAB_ACCEL:-tcg}
export PODINJECT_CACHE=${PODINJECT_CACHE:-$HOME/.cache/podinject}

if [ $# -eq 0 ]; then
	set -- ours
fi
# `make lab KERNELS="a b"` passes one word per kernel; accept "a b" too.
# shellcheck disable=SC2206
KERNELS=($*)

log() { echo "lab: $*" >&2; }

# Idempotent and quick (dpkg-query) when everything is there.
"$ROOT/lab/deps.sh" >&2 || { log "lab/deps.sh failed"; exit 1; }
mkdir -p "$LAB_OUT"

lab_start=$(date +%s)
total_pass=0 total_fail=0 total_skip=0
declare -a SUMMARY=()
status=0

# Build the lab-only tests (tests/lab) for the image, if their rules exist.
if [ -f "$ROOT/lab/Makefile.tests" ]; then
	if ! make -s -C "$ROOT" -f lab/Makefile.tests >&2; then
		log "building tests/lab failed"
		status=1
	fi
fi

TSC_KHZ=
if [ "$LAB_ACCEL" = tcg ] && [ -x "$ROOT/build/lab/tsc-khz" ]; then
	TSC_KHZ=$("$ROOT/build/lab/tsc-khz") || TSC_KHZ=
	log "the guests' TSC rate (the host's): ${TSC_KHZ:-unknown} kHz"
fi

for name in "${KERNELS[@]}"; do
	t0=$(date +%s)
	case "$name" in
	ours)
		kdir=$("$ROOT/lab/build-kernel.sh" | tail -1) || kdir=
		kernel=$kdir/bzImage
		;;
	debian-6.12|debian-6.1)
		kdir=$("$ROOT/lab/get-stock-kernel.sh" "$name" | tail -1) || kdir=
		kernel=$kdir/vmlinuz
		;;
	*)
		log "unknown kernel '$name' (known: ours debian-6.12 debian-6.1)"
		kdir=
		;;
	esac
	if [ -z "$kdir" ] || [ ! -s "${kernel:-}" ]; then
		echo "== kernel $name (not available) =="
		echo "FAIL lab-$name: could not build or fetch the kernel"
		SUMMARY+=("$name: FAILED (no kernel)")
		status=1
		total_fail=$((total_fail + 1))
		continue
	fi
	release=$(cat "$kdir/release" 2>/dev/null || echo unknown)
	t1=$(date +%s)

	initrd=$LAB_OUT/$name.initramfs.gz
	console=$LAB_OUT/$name.console.log
	if ! LAB_NAME=$name "$ROOT/lab/mkinitramfs.sh" "$kdir" "$initrd"; then
		echo "== kernel $name ($release) =="
		echo "FAIL lab-$name: could not build the initramfs"
		SUMMARY+=("$name: FAILED (initramfs)")
		status=1
		total_fail=$((total_fail + 1))
		continue
	fi
	t2=$(date +%s)

	# tsc=reliable: under TCG the guest's TSC is QEMU's, read from the
	# host's clock, and steady; but on a loaded host the guest's ticks
	# come late, the clocksource watchdog blames the TSC, and the kernel
	# falls back to jiffies (a 4 ms step at HZ=250): every timestamp of
	# the suite, the probes' RTTs among them, then reads 0 or 4 ms.
	# tsc_early_khz: the guest's RDTSC is the host's, so the host's rate
	# is the guest's; given, the kernel skips its calibration against
	# the emulated PIT, which fails on a loaded host (and our kernel,
	# without ACPI, has no HPET or PM timer to fall back on).
	log "booting $name ($release) under qemu -accel $LAB_ACCEL, timeout ${LAB_TIMEOUT}s, console: $console"
	timeout "$LAB_TIMEOUT" qemu-system-x86_64 \
		-accel "$LAB_ACCEL" -cpu max -smp "$LAB_SMP" -m "$LAB_MEM" \
		-nographic -no-reboot -nic none \
		-kernel "$kernel" -initrd "$initrd" \
		-append "console=ttyS0 panic=-1 quiet tsc=reliable${TSC_KHZ:+ tsc_early_khz=$TSC_KHZ}" \
		< /dev/null > "$console.$$" 2>&1
	qrc=$?
	t3=$(date +%s)
	# (written under a private name: two lab runs may share build/lab)
	mv -f "$console.$$" "$console"

	# The serial console ends lines with \r\n.
	# Drop terminal escapes (SeaBIOS and the console reset the terminal).
	clean=$(tr -d '\r' < "$console" | sed -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' -e 's/\x1b[A-Za-z]//g')
	# the heading shows what the VM's uname -r said, if it got that far
	vmrel=$(printf '%s\n' "$clean" | sed -n 's/^PODINJECT-LAB-INIT .*release=\([^ ]*\).*/\1/p' | tail -1)
	[ -n "$vmrel" ] && release=$vmrel
	echo "== kernel $name ($release) =="
	if [ "${LAB_VERBOSE:-0}" = 1 ]; then
		printf '%s\n' "$clean"
	fi
	suite=$(printf '%s\n' "$clean" | sed -n '/^PODINJECT-LAB-BEGIN/,/^PODINJECT-LAB-END/p')
	printf '%s\n' "$suite" | grep -E '^(PASS|FAIL|SKIP)([ :]|$)|^PODINJECT-LAB-WARN' || true
	countline=$(printf '%s\n' "$suite" | grep -E '^([A-Za-z-]+: )?[0-9]+ passed, [0-9]+ failed' | tail -1)
	[ -n "$countline" ] && echo "$countline"
	endline=$(printf '%s\n' "$clean" | grep -E '^PODINJECT-LAB-END rc=' | tail -1)
	initline=$(printf '%s\n' "$clean" | grep -E '^PODINJECT-LAB-INIT ' | tail -1)
	boot_s=$(sed -n 's/.*PODINJECT-LAB-INIT uptime=\([0-9.]*\).*/\1/p' <<< "$initline")
	end_s=$(sed -n 's/.*uptime=\([0-9.]*\).*/\1/p' <<< "$endline")
	src=$(sed -n 's/^PODINJECT-LAB-END rc=\([0-9]*\).*/\1/p' <<< "$endline")

	why=
	if [ $qrc -eq 124 ]; then
		why="timed out after ${LAB_TIMEOUT}s"
	elif [ -z "$initline" ]; then
		why="the kernel never reached /init (qemu exit $qrc)"
	elif [ -z "$endline" ]; then
		why="the suite did not finish (qemu exit $qrc)"
	elif [ -z "$countline" ]; then
		why="the suite printed no 'N passed, N failed' line (exit $src)"
	elif [ "$src" != 0 ]; then
		why="the suite exited $src"
	fi
	if [ -n "$countline" ]; then
		p=$(sed -n 's/.*\b\([0-9][0-9]*\) passed.*/\1/p' <<< "$countline")
		f=$(sed -n 's/.*\b\([0-9][0-9]*\) failed.*/\1/p' <<< "$countline")
		s=$(sed -n 's/.*\b\([0-9][0-9]*\) skipped.*/\1/p' <<< "$countline")
		total_pass=$((total_pass + ${p:-0}))
		total_fail=$((total_fail + ${f:-0}))
		total_skip=$((total_skip + ${s:-0}))
	fi
	timing="kernel ready $((t1 - t0))s, initramfs $((t2 - t1))s, boot-to-init ${boot_s:-?}s, suite done at ${end_s:-?}s uptime, VM wall $((t3 - t2))s"
	if [ -n "$why" ]; then
		status=1
		[ -n "$countline" ] || total_fail=$((total_fail + 1))
		echo "FAIL lab-$name: $why"
		echo "-- last console lines ($console) --"
		printf '%s\n' "$clean" | tail -25 | sed 's/^/   | /'
		SUMMARY+=("$name ($release): FAILED, $why; $timing")
	else
		SUMMARY+=("$name ($release): ok; $timing")
	fi
	log "$name: $timing"
done

echo "== lab summary ($(( $(date +%s) - lab_start ))s) =="
for l in "${SUMMARY[@]}"; do echo "  $l"; done
echo "lab: $total_pass passed, $total_fail failed, $total_skip skipped"
exit $status
