#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Fetch one of Debian's stock kernels for the lab matrix and unpack it into
# the cache:
#   debian-6.12  the image package behind linux-image-6.12-cloud-amd64
#   debian-6.1   the newest linux-image-6.1.0-N-cloud-amd64 (signed or unsigned)
# Result: $PODINJECT_CACHE/kernels/<name>-<package>_<version>/ holding
# vmlinuz, release (uname -r), config, package, and root/ (the unpacked
# package: root/lib/modules/<release>/...). The last line on stdout is that
# directory; progress goes to stderr. A second run reuses the directory.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${PODINJECT_CACHE:-$HOME/.cache/podinject}
NAME=${1:-}

log() { echo "get-stock-kernel: $*" >&2; }
die() { log "error: $*"; exit 1; }

command -v dpkg-deb >/dev/null || die "dpkg-deb missing"

# Which binary package carries the image. Prints "package" candidates, best first.
candidates() {
	case "$NAME" in
	debian-6.12)
		# The meta package depends on exactly one versioned image package.
		apt-cache depends linux-image-6.12-cloud-amd64 2>/dev/null |
			awk '/Depends: linux-image-6\.12/ { print $2; exit }'
		;;
	debian-6.1)
		apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-cloud-amd64(-unsigned)?$' 2>/dev/null |
			awk '{ print $1 }' | sed 's/-unsigned$//' | sort -u -V -r |
			while read -r p; do echo "$p"; echo "$p-unsigned"; done
		;;
	*)
		die "unknown stock kernel '$NAME' (known: debian-6.12 debian-6.1)"
		;;
	esac
}

mapfile -t PKGS < <(candidates)
if [ ${#PKGS[@]} -eq 0 ]; then
	log "apt knows no package for $NAME yet, running apt-get update"
	apt-get update -q >&2 || true
	mapfile -t PKGS < <(candidates)
fi
[ ${#PKGS[@]} -gt 0 ] || die "no Debian package found for $NAME"

mkdir -p "$CACHE/kernels"
exec 9>"$CACHE/kernels/.stock.lock"
flock 9

for pkg in "${PKGS[@]}"; do
	ver=$(apt-cache policy "$pkg" 2>/dev/null | awk '/Candidate:/ { print $2 }')
	[ -n "$ver" ] && [ "$ver" != "(none)" ] || continue
	OUT=$CACHE/kernels/$NAME-${pkg}_$ver
	if [ -s "$OUT/vmlinuz" ] && [ -s "$OUT/release" ]; then
		log "cached: $OUT ($(cat "$OUT/release"))"
		echo "$OUT"
		exit 0
	fi
	tmp=$(mktemp -d "$CACHE/kernels/.dl.XXXXXX")
	log "downloading $pkg $ver"
	# apt-get download writes into the current directory; as root apt may
	# warn that _apt cannot read it, which is harmless.
	if ! (cd "$tmp" && apt-get download -q "$pkg=$ver" >&2); then
		log "apt-get download $pkg failed, refreshing the lists once"
		apt-get update -q >&2 || true
		if ! (cd "$tmp" && apt-get download -q "$pkg=$ver" >&2); then
			rm -rf "$tmp"
			continue
		fi
	fi
	deb=$(ls "$tmp"/*.deb | head -1)
	mkdir -p "$tmp/root"
	if ! dpkg-deb -x "$deb" "$tmp/root"; then
		log "dpkg-deb -x $deb failed"
		rm -rf "$tmp"
		continue
	fi
	vmlinuz=$(ls "$tmp"/root/boot/vmlinuz-* 2>/dev/null | head -1 || true)
	if [ -z "$vmlinuz" ]; then
		log "$pkg has no /boot/vmlinuz-*"
		rm -rf "$tmp"
		continue
	fi
	release=${vmlinuz##*/vmlinuz-}
	[ -d "$tmp/root/lib/modules/$release" ] || [ -d "$tmp/root/usr/lib/modules/$release" ] ||
		log "warning: $pkg carries no modules for $release"
	# usrmerged packages may ship usr/lib/modules; give one path to users.
	if [ ! -d "$tmp/root/lib/modules" ] && [ -d "$tmp/root/usr/lib/modules" ]; then
		mkdir -p "$tmp/root/lib"
		ln -s ../usr/lib/modules "$tmp/root/lib/modules"
	fi
	# The package leaves modules.dep to the postinst's depmod.
	if [ -d "$tmp/root/lib/modules/$release" ] && command -v depmod >/dev/null; then
		depmod -b "$tmp/root" "$release" || log "warning: depmod failed for $release"
	fi
	cp "$vmlinuz" "$tmp/vmlinuz"
	cp "$tmp/root/boot/config-$release" "$tmp/config" 2>/dev/null || true
	echo "$release" > "$tmp/release"
	echo "$pkg $ver" > "$tmp/package"
	rm -f "$deb"
	rm -rf "$OUT"
	mv "$tmp" "$OUT"
	log "unpacked $pkg $ver ($release) into $OUT"
	echo "$OUT"
	exit 0
done
die "could not download and unpack any of: ${PKGS[*]}"
