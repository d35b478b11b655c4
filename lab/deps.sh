#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Install what the kernel lab needs from Debian's archive. Idempotent: only
# packages that are not installed yet are asked for, and apt-get update runs
# only when something is missing. Waits for a dpkg lock held by another apt.
set -euo pipefail

PKGS=(linux-source-6.12 build-essential flex bison bc libelf-dev libssl-dev
      dwarves cpio xz-utils zstd busybox-static qemu-system-x86 kmod
      clang llvm bpftool libbpf-dev jq iproute2 iperf3 ethtool file)

missing=()
for p in "${PKGS[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo

apt_retry() {
	local i
	for i in $(seq 1 60); do
		if $SUDO env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=120 "$@"; then
			return 0
		fi
		echo "lab/deps.sh: apt-get $1 failed (try $i), retrying in 5s" >&2
		sleep 5
	done
	return 1
}

echo "lab/deps.sh: installing ${missing[*]}" >&2
apt_retry update -q
apt_retry install -y -q --no-install-recommends "${missing[@]}"
