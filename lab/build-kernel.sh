#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Build the lab's own kernel: Debian's linux-source-6.12 + kernel/*.patch,
# configured as `make tinyconfig` + kernel/config.fragment.
#
# The result is cached by the hash of the patches and the fragment:
#   $PODINJECT_CACHE/kernels/ours-<hash>/{bzImage,config,release,source-version}
# (PODINJECT_CACHE defaults to ~/.cache/podinject). A second run with the
# same inputs reuses it. The extracted source tree stays in
# $PODINJECT_CACHE/kernels/src-6.12 so a changed patch or fragment rebuilds
# incrementally. On success the last line printed on stdout is the cache
# directory of the kernel; progress goes to stderr.
#
# Environment: PODINJECT_CACHE, JOBS (default 2; the build runs under nice -n 10).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${PODINJECT_CACHE:-$HOME/.cache/podinject}
JOBS=${JOBS:-2}
TARBALL=/usr/src/linux-source-6.12.tar.xz
FRAGMENT=$ROOT/kernel/config.fragment
mapfile -t PATCHES < <(ls "$ROOT"/kernel/*.patch 2>/dev/null | sort)

log() { echo "build-kernel: $*" >&2; }
die() { log "error: $*"; exit 1; }

[ ${#PATCHES[@]} -gt 0 ] || die "no kernel/*.patch"
[ -f "$FRAGMENT" ] || die "no $FRAGMENT"

HASH=$(cat "${PATCHES[@]}" "$FRAGMENT" | sha256sum | cut -c1-12)
OUT=$CACHE/kernels/ours-$HASH
TREE=$CACHE/kernels/src-6.12

if [ -s "$OUT/bzImage" ]; then
	log "cached: $OUT ($(cat "$OUT/release" 2>/dev/null))"
	echo "$OUT"
	exit 0
fi

"$ROOT/lab/deps.sh" >&2 || die "lab/deps.sh failed"
[ -f "$TARBALL" ] || die "$TARBALL missing (apt-get install linux-source-6.12)"

mkdir -p "$CACHE/kernels"
# One build at a time per cache (two CI runs or a developer + CI).
exec 9>"$CACHE/kernels/.build.lock"
flock 9
if [ -s "$OUT/bzImage" ]; then
	log "built meanwhile by another run: $OUT"
	echo "$OUT"
	exit 0
fi

start=$(date +%s)
srcver=$(dpkg-query -W -f='${Version}' linux-source-6.12 2>/dev/null || echo unknown)

# 1. The source tree: extract once, re-extract when the package changed.
if [ ! -f "$TREE/.podinject-source-version" ] ||
   [ "$(cat "$TREE/.podinject-source-version")" != "$srcver" ]; then
	log "extracting $TARBALL ($srcver) into $TREE"
	rm -rf "$TREE" "$TREE.tmp"
	mkdir -p "$TREE.tmp"
	tar -xJf "$TARBALL" -C "$TREE.tmp" --strip-components=1
	echo "$srcver" > "$TREE.tmp/.podinject-source-version"
	mv "$TREE.tmp" "$TREE"
fi

# 2. The patches: take back the ones applied last time if they differ.
applied=$TREE/.podinject-applied.patch
want=$(mktemp)
trap 'rm -f "$want"' EXIT
cat "${PATCHES[@]}" > "$want"
if [ -f "$applied" ] && ! cmp -s "$applied" "$want"; then
	log "reverting the previously applied patches"
	patch -d "$TREE" -p1 -R -s --no-backup-if-mismatch < "$applied" ||
		die "could not revert the old patches; delete $TREE and retry"
	rm -f "$applied"
fi
if [ ! -f "$applied" ]; then
	for p in "${PATCHES[@]}"; do
		log "applying $(basename "$p")"
		patch -d "$TREE" -p1 -s -N --no-backup-if-mismatch < "$p" ||
			die "$(basename "$p") does not apply to linux-source-6.12 $srcver"
	done
	cp "$want" "$applied"
fi

# 3. Configuration: tinyconfig + fragment, then check that every symbol the
#    fragment asks for survived (Kconfig silently drops unmet dependencies).
log "configuring: tinyconfig + $(basename "$FRAGMENT")"
make -C "$TREE" -s ARCH=x86_64 tinyconfig >&2
(cd "$TREE" && KCONFIG_CONFIG=.config ./scripts/kconfig/merge_config.sh -m -O . .config "$FRAGMENT" >/dev/null)
make -C "$TREE" -s ARCH=x86_64 olddefconfig >&2
bad=0
while IFS= read -r line; do
	case "$line" in
	CONFIG_*=n)
		sym=${line%%=*}
		if grep -q "^$sym=" "$TREE/.config"; then
			log "config: $sym wanted off, is $(grep "^$sym=" "$TREE/.config")"
			bad=1
		fi ;;
	CONFIG_*=*)
		if ! grep -qxF "$line" "$TREE/.config"; then
			sym=${line%%=*}
			log "config: wanted $line, got: $(grep -E "^(# )?$sym[= ]" "$TREE/.config" || echo 'absent (unmet dependency)')"
			bad=1
		fi ;;
	esac
done < "$FRAGMENT"
[ $bad -eq 0 ] || die "the final .config lacks symbols of $(basename "$FRAGMENT")"

# 4. Build.
log "building bzImage (nice -n 10 make -j$JOBS), cold builds take ~12 min on 2 cores"
if ! nice -n 10 make -C "$TREE" -s ARCH=x86_64 -j"$JOBS" bzImage > "$TREE/.podinject-build.log" 2>&1; then
	tail -40 "$TREE/.podinject-build.log" >&2
	die "kernel build failed (log: $TREE/.podinject-build.log)"
fi

mkdir -p "$OUT.tmp"
cp "$TREE/arch/x86/boot/bzImage" "$OUT.tmp/bzImage"
cp "$TREE/.config" "$OUT.tmp/config"
make -C "$TREE" -s ARCH=x86_64 kernelrelease > "$OUT.tmp/release"
echo "$srcver" > "$OUT.tmp/source-version"
rm -rf "$OUT"
mv "$OUT.tmp" "$OUT"

secs=$(( $(date +%s) - start ))
log "built $(cat "$OUT/release") in $((secs / 60)) min $((secs % 60)) s -> $OUT/bzImage ($(du -h "$OUT/bzImage" | cut -f1))"
echo "$OUT"
