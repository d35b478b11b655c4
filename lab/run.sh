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
#   LAB_TIMEOUT      seconds per boot (default 5400: our kernel's busier
#                    guest took 3 556 s of the old 3 600 on 2026-12-02,
#                    with tests running on the host beside it)
#   LAB_MEM, LAB_SMP QEMU memory (default 2G) and CPUs (default 2)
#   LAB_ACCEL        QEMU accelerator (default tcg; /dev/kvm here is not usable)
#   LAB_SUITE        command run inside the VM (see lab/mkinitramfs.sh);
#                    default: the whole suite, tests/run.sh, split
#   LAB_SPLIT        groups of suites (whole names, ',' within a group, ';'
#                    between groups) that each run in a guest of their own
#                    beside one more guest that runs the rest, all booted at
#                    once (default "t_scale,t_upgrade_xdp,t_upgrade_netkit,
#                    t_upgrade_v04" for the whole suite, none
#                    for a LAB_SUITE; "" boots one guest). The kernel's
#                    count line adds up its guests'.
#   LAB_VERBOSE=1    print the whole console, not only the result lines
#   LAB_BOOT_TRIES   boots a guest gets when its kernel never reaches /init
#                    (default 2: a boot that failed before any of our code
#                    ran is retried once; one that reached /init never is)
#   LAB_INIT_TIMEOUT seconds a guest's kernel gets to reach /init (default
#                    300; 5 to 10 s here): one that hangs booting (RCU
#                    stalls on a CPU whose timer never fired, seen with
#                    debian-6.12 under TCG) is stopped then, and booted
#                    again as one that never reached /init, instead of
#                    holding its kernel's run for LAB_TIMEOUT
#   LAB_FAULT_NO_INIT=1  every guest's first boot fails before /init, on
#                    purpose: how the retry is tested (CI does, with
#                    LAB_BOOT_TRIES=3 so that one retry stays spare)
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
LAB_OUT=${LAB_OUT:-$ROOT/build/lab}
LAB_TIMEOUT=${LAB_TIMEOUT:-5400}
LAB_MEM=${LAB_MEM:-2G}
LAB_SMP=${LAB_SMP:-2}
LAB_ACCEL=${LAB_ACCEL:-tcg}
LAB_BOOT_TRIES=${LAB_BOOT_TRIES:-2}
LAB_INIT_TIMEOUT=${LAB_INIT_TIMEOUT:-300}
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

# The guest has no git: the upgrade suites run the build of the release
# they upgrade from that the host made (tests/integration/lib.sh
# prev_release), so it is made here, before the image copies build/.
if command -v git >/dev/null && git -C "$ROOT" rev-parse HEAD >/dev/null 2>&1; then
	for rev in $(grep -ho '^OLD_REV=.*' "$ROOT"/tests/integration/t_*.sh | grep -o 'v[0-9][0-9.]*' | sort -u); do
		bash -c '. "$1/tests/integration/lib.sh"; prev_release "$2"' _ "$ROOT" "$rev" >/dev/null ||
			log "could not build release $rev: the upgrade suites will skip"
	done
fi

TSC_KHZ=
if [ "$LAB_ACCEL" = tcg ] && [ -x "$ROOT/build/lab/tsc-khz" ]; then
	TSC_KHZ=$("$ROOT/build/lab/tsc-khz") || TSC_KHZ=
	log "the guests' TSC rate (the host's): ${TSC_KHZ:-unknown} kHz"
fi

# The suite, split over guests booted side by side: each of LAB_SPLIT's
# groups (separated by ';') runs in a guest of its own, the rest in one
# more. Under TCG a guest's suite mostly keeps one host core busy (one
# command at a time), so two guests use the two cores a single one leaves
# half idle. The default halves the suite by time: the longest suite
# (t_scale: 1 024 pods adopted through the CLI, 17 minutes under TCG) and
# three of the five upgrade suites (4 to 6 minutes each) in one guest,
# everything else in the other (on our kernel, 2026-12-02: 1 042 s and
# 2 740 s with t_scale alone; about 1 900 s each this way).
if [ -n "${LAB_SUITE:-}" ]; then
	suite=$LAB_SUITE
	LAB_SPLIT=${LAB_SPLIT:-}
else
	LAB_SPLIT=${LAB_SPLIT-t_scale,t_upgrade_xdp,t_upgrade_netkit,t_upgrade_v04}
	suite=
fi
guests=1
if [ -n "$LAB_SPLIT" ]; then
	IFS=';' read -r -a groups <<< "$LAB_SPLIT"
	base=${suite:-./tests/run.sh}
	rest=$(IFS=,; echo "${groups[*]}")
	suite='case ${PODINJECT_LAB_GUEST:-1} in'
	for i in "${!groups[@]}"; do
		suite+=" $((i + 1))) $base -n ${groups[$i]} ;;"
	done
	suite+=" *) $base -x $rest ;; esac"
	guests=$((${#groups[@]} + 1))
fi

# guest_result NAME K CONSOLE QEMU_RC: prints guest K's result lines and
# count; adds to kp kf ks, appends a failure's reason to whys and the
# guest's times to gtimes.
guest_result() {
	local name=$1 g=$2 console=$3 qrc=$4 clean suiteout countline endline initline boot_s end_s src why p f s
	# The serial console ends lines with \r\n.
	# Drop terminal escapes (SeaBIOS and the console reset the terminal).
	clean=$(tr -d '\r' < "$console" | sed -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' -e 's/\x1b[A-Za-z]//g')
	if [ "${LAB_VERBOSE:-0}" = 1 ]; then
		printf '%s\n' "$clean"
	fi
	suiteout=$(printf '%s\n' "$clean" | sed -n '/^PODINJECT-LAB-BEGIN/,/^PODINJECT-LAB-END/p')
	printf '%s\n' "$suiteout" | grep -E '^(PASS|FAIL|SKIP)([ :]|$)|^PODINJECT-LAB-WARN' || true
	countline=$(printf '%s\n' "$suiteout" | grep -E '^([A-Za-z-]+: )?[0-9]+ passed, [0-9]+ failed' | tail -1)
	[ -n "$countline" ] && echo "$countline"
	endline=$(printf '%s\n' "$clean" | grep -E '^PODINJECT-LAB-END rc=' | tail -1)
	initline=$(printf '%s\n' "$clean" | grep -E '^PODINJECT-LAB-INIT ' | tail -1)
	boot_s=$(sed -n 's/.*PODINJECT-LAB-INIT uptime=\([0-9.]*\).*/\1/p' <<< "$initline")
	end_s=$(sed -n 's/.*uptime=\([0-9.]*\).*/\1/p' <<< "$endline")
	src=$(sed -n 's/^PODINJECT-LAB-END rc=\([0-9]*\).*/\1/p' <<< "$endline")
	why=
	if [ "$qrc" -eq 124 ]; then
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
		kp=$((kp + ${p:-0}))
		kf=$((kf + ${f:-0}))
		ks=$((ks + ${s:-0}))
	else
		kf=$((kf + 1))
	fi
	gtimes+="; guest $g: boot-to-init ${boot_s:-?}s, suite done at ${end_s:-?}s uptime"
	# A guest clock far ahead of the wall clock made every limit timed in
	# guest seconds short (docs/lab.md, "A clock that runs ahead").
	if [ -n "$end_s" ] && [ "${end_s%.*}" -gt $((2 * (t3 - t2) + 120)) ]; then
		echo "NOTE lab-$name/guest$g: its clock ran ahead: the suite ended at ${end_s%.*}s of uptime after $((t3 - t2))s of VM wall; limits timed in guest seconds were short"
		gtimes+=" (clock ahead)"
	fi
	if [ -n "$why" ]; then
		if [ "$guests" -gt 1 ]; then
			echo "FAIL lab-$name/guest$g: $why"
		else
			echo "FAIL lab-$name: $why"
		fi
		echo "-- last console lines ($console) --"
		printf '%s\n' "$clean" | tail -25 | sed 's/^/   | /'
		whys+=" guest $g: $why"
	fi
}

# boot_guest NAME RELEASE K CONSOLE FAULT: boots guest K of kernel NAME in
# the background (its pid in boot_pid), its console into CONSOLE.$$.
# FAULT=1 points the kernel at an init that does not exist, so that the
# boot fails before /init (LAB_FAULT_NO_INIT=1: how the retry below is
# tested; the retry boots without it).
boot_guest() {
	local name=$1 release=$2 g=$3 console=$4 fault=$5 extra=
	[ "$fault" = 1 ] && extra=" rdinit=/podinject-lab-no-such-init init=/podinject-lab-no-such-init"
	log "booting $name ($release) guest $g/$guests under qemu -accel $LAB_ACCEL, timeout ${LAB_TIMEOUT}s, console: $console${extra:+ (LAB_FAULT_NO_INIT: this boot fails on purpose)}"
	timeout "$LAB_TIMEOUT" qemu-system-x86_64 \
		-accel "$LAB_ACCEL" -cpu max -smp "$LAB_SMP" -m "$LAB_MEM" \
		-nographic -no-reboot -nic none \
		-kernel "$kernel" -initrd "$initrd" \
		-append "console=ttyS0 panic=-1 quiet tsc=reliable${TSC_KHZ:+ tsc_early_khz=$TSC_KHZ} PODINJECT_LAB_GUEST=$g$extra" \
		< /dev/null > "$console.$$" 2>&1 &
	boot_pid=$!
	# The watchdog of the boot: stopped, `timeout` passes the signal to
	# QEMU and exits with its status (not 124), so the guest counts as
	# one that never reached /init and is booted again below.
	(
		for _ in $(seq "$LAB_INIT_TIMEOUT"); do
			sleep 1
			kill -0 "$boot_pid" 2>/dev/null || exit 0
			grep -q '^PODINJECT-LAB-INIT ' "$console.$$" 2>/dev/null && exit 0
		done
		log "$name guest $g: no /init after ${LAB_INIT_TIMEOUT}s (its kernel hung booting): stopped"
		kill "$boot_pid" 2>/dev/null
	) &
}

for name in "${KERNELS[@]}"; do
	t0=$(date +%s)
	gtimes=
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
	if ! LAB_NAME=$name LAB_SUITE=$suite "$ROOT/lab/mkinitramfs.sh" "$kdir" "$initrd"; then
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
	# the emulated PIT, which failed on a loaded host when our kernel
	# had no ACPI, and so no HPET or PM timer to fall back on).
	# PODINJECT_LAB_GUEST=K: the kernel hands an unknown NAME=VALUE on
	# its command line to /init's environment; the suite's command picks
	# guest K's part with it.
	declare -a pids=() consoles=() qrcs=() retried=()
	for g in $(seq 1 "$guests"); do
		console=$LAB_OUT/$name.console.log
		[ "$guests" -gt 1 ] && console=$LAB_OUT/$name.guest$g.console.log
		consoles+=("$console")
		boot_guest "$name" "$release" "$g" "$console" "${LAB_FAULT_NO_INIT:-0}"
		pids+=("$boot_pid")
	done
	for pid in "${pids[@]}"; do
		wait "$pid"
		qrcs+=($?)
	done
	# A guest whose kernel never reached /init ran nothing of ours: its
	# boot failed before the project's code was there (Debian's
	# 6.12.117 took an int3 oops at a patched call site in its idle loop
	# under TCG, in CI on 2026-12-03; 6.12.118 then booted 6 times of 6
	# here). Such a guest is booted again, alone, up to LAB_BOOT_TRIES
	# boots in all, and says so; each failed boot's console is kept. A
	# guest that reached /init and then failed is never booted again.
	for g in $(seq 1 "$guests"); do
		console=${consoles[$((g - 1))]}
		retried[g]=
		try=1
		while [ "$try" -lt "$LAB_BOOT_TRIES" ]; do
			qrc=${qrcs[$((g - 1))]}
			[ "$qrc" -eq 124 ] && break
			# grep on the file, not at the end of a pipe: under
			# pipefail, a writer that meets grep -q gone (SIGPIPE) made
			# the test fail though the marker was there (8 times in
			# 300 on an 11 KB console), and a guest that had run its
			# whole part was booted again and its results dropped
			grep -q '^PODINJECT-LAB-INIT ' "$console.$$" && break
			mv -f "$console.$$" "$console.boot$try"
			log "$name guest $g never reached /init (qemu exit $qrc; console kept: $console.boot$try): booting it once more"
			retried[g]+="${retried[g]:+; }boot $try never reached /init (console: $console.boot$try)"
			try=$((try + 1))
			boot_guest "$name" "$release" "$g" "$console" 0
			wait "$boot_pid"
			qrcs[$((g - 1))]=$?
		done
	done
	t3=$(date +%s)

	echo "== kernel $name ($release) =="
	kp=0 kf=0 ks=0 whys=
	for g in $(seq 1 "$guests"); do
		console=${consoles[$((g - 1))]}
		# (written under a private name: two lab runs may share build/lab)
		mv -f "$console.$$" "$console"
		guest_result "$name" "$g" "$console" "${qrcs[$((g - 1))]}"
		if [ -n "${retried[g]}" ]; then
			echo "NOTE lab-$name/guest$g: booted more than once: ${retried[g]}"
			gtimes+=" (booted more than once)"
		fi
	done
	[ "$guests" -gt 1 ] && echo "$kp passed, $kf failed, $ks skipped"
	total_pass=$((total_pass + kp))
	total_fail=$((total_fail + kf))
	total_skip=$((total_skip + ks))
	timing="kernel ready $((t1 - t0))s, initramfs $((t2 - t1))s, $guests guest(s), VM wall $((t3 - t2))s${gtimes}"
	if [ -n "$whys" ]; then
		status=1
		SUMMARY+=("$name ($release): FAILED,$whys; $timing")
	else
		SUMMARY+=("$name ($release): ok; $timing")
	fi
	log "$name: $timing"
done

echo "== lab summary ($(( $(date +%s) - lab_start ))s) =="
for l in "${SUMMARY[@]}"; do echo "  $l"; done
echo "lab: $total_pass passed, $total_fail failed, $total_skip skipped"
exit $status
