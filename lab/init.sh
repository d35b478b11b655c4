#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# /init of the lab's initramfs (copied there by lab/mkinitramfs.sh; runs under
# /bin/sh, which is bash in the image). Mounts the usual filesystems, loads the modules listed in
# /etc/podinject-modules in order, runs the suite in /podinject and prints
# marker lines lab/run.sh looks for on the console:
#   PODINJECT-LAB-INIT uptime=<s> release=<uname -r>
#   PODINJECT-LAB-CLOCK current=<clocksource> available=<list>
#   PODINJECT-LAB-BEGIN
#   ... the suite's output ...
#   PODINJECT-LAB-END rc=<exit code> uptime=<s>
# then powers the VM off (QEMU runs with -no-reboot, so a reboot ends it too).
export PATH=/usr/bin:/usr/sbin
export HOME=/root TERM=dumb LANG=C.UTF-8

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts 2>/dev/null
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mount -t tmpfs -o mode=755 tmpfs /run
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t bpf -o mode=700 bpf /sys/fs/bpf
# optional: present on stock kernels only
mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mkdir -p /run/netns

# a fresh line: the firmware leaves terminal escapes on the current one
echo
echo "PODINJECT-LAB-INIT uptime=$(cut -d' ' -f1 /proc/uptime) release=$(uname -r)"
# The clock every timestamp of the suite is read from (a coarse one gives
# RTTs of 0): the clocksource in use and those the kernel has.
cs=/sys/devices/system/clocksource/clocksource0
echo "PODINJECT-LAB-CLOCK current=$(cat $cs/current_clocksource 2>/dev/null) available=$(cat $cs/available_clocksource 2>/dev/null | tr ' ' ,)"

. /etc/podinject-lab.env
export PODINJECT_LAB
# Emulated, a suite takes 5 to 10 times as long as on the host: t_scale's
# 1 024 pods outlast the host's 10 minutes.
export SUITE_TIMEOUT=${SUITE_TIMEOUT:-1500}
# t_scale adopts 1 024 pods through the CLI: 25 minutes and more there.
export SUITE_TIMEOUT_t_scale=${SUITE_TIMEOUT_t_scale:-3000}
# The unit tests load the node's programs with the classifier's pools (16.5 MB
# a node) dozens of times: debian-6.1 took 286 s of the host's 300.
# Beside a second guest on the same two cores, debian-6.1's took over 900 s.
export UNIT_TIMEOUT=${UNIT_TIMEOUT:-1800}

hostname podinject-lab
ip link set lo up

while read -r m; do
	[ -n "$m" ] || continue
	insmod "$m" 2>/dev/null || {
		# already built in or loaded is fine; say anything else
		n=${m##*/}; n=${n%.ko}
		grep -q "^$n " /proc/modules || echo "PODINJECT-LAB-WARN insmod $m failed"
	}
done < /etc/podinject-modules

ulimit -l unlimited 2>/dev/null
cd /podinject || echo "PODINJECT-LAB-WARN no /podinject"
echo "PODINJECT-LAB-BEGIN lab=$PODINJECT_LAB suite=$LAB_SUITE"
# bash runs the suite; its stderr goes to the console too
/usr/bin/bash -c "$LAB_SUITE" < /dev/null 2>&1
rc=$?
# the clock again: a clocksource found unstable during the suite is gone now
echo "PODINJECT-LAB-CLOCK current=$(cat $cs/current_clocksource 2>/dev/null) (after the suite)"
echo "PODINJECT-LAB-END rc=$rc uptime=$(cut -d' ' -f1 /proc/uptime)"
sync

if [ -d /sys/firmware/acpi ]; then
	poweroff -f
fi
# no ACPI (our tiny kernel): a reboot ends QEMU because of -no-reboot
reboot -f
sleep 5
echo o > /proc/sysrq-trigger 2>/dev/null
