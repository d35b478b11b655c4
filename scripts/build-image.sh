#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The podinject OCI image, built offline from this build's binaries with
# buildah (no base image, no registry): busybox, jq, the install step,
# the CNI plugin with the libraries a host may lack (installed beside it),
# and the CLI.
#   scripts/build-image.sh OUT.tar [TAG]   (an oci-archive)
# IMAGE_STORE=DIR keeps buildah's storage there (a private one otherwise,
# removed at the end).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${PODINJECT_BUILD:-$ROOT/build}
OUT=$1
TAG=${2:-localhost/podinject:dev}
own_store=
if [ -z "${IMAGE_STORE:-}" ]; then
	IMAGE_STORE=$(mktemp -d /tmp/podinject-image.XXXXXX)
	own_store=1
fi
mkdir -p "$IMAGE_STORE"
POLICY=$IMAGE_STORE/policy.json
echo '{"default": [{"type": "insecureAcceptAnything"}]}' >"$POLICY"
B() {
	buildah --root "$IMAGE_STORE/root" --runroot "$IMAGE_STORE/runroot" \
		--storage-driver vfs "$@"
}
ctr=
cleanup() {
	[ -n "$ctr" ] && B rm "$ctr" >/dev/null 2>&1
	[ -n "$own_store" ] && rm -rf "$IMAGE_STORE"
	return 0
}
trap cleanup EXIT

for f in podinject podinject-cni; do
	[ -x "$BUILD/$f" ] || { echo "build-image: no $BUILD/$f (run make)" >&2; exit 1; }
done
[ -x /bin/busybox ] || { echo "build-image: no /bin/busybox (busybox-static)" >&2; exit 1; }

ctr=$(B from --signature-policy "$POLICY" scratch)
mnt=$(B mount "$ctr")

libs_of() { ldd "$1" | awk '/=>/ && $3 ~ /^\// {print $3} /^\t\/.*ld-linux/ {print $1}'; }
# put BIN DEST: the binary and every library it needs, at their paths
put() {
	install -D -m 0755 "$1" "$mnt$2"
	for l in $(libs_of "$1"); do
		[ -e "$mnt$l" ] || install -D -m 0755 "$(readlink -f "$l")" "$mnt$l"
	done
}
install -D -m 0755 /bin/busybox "$mnt/bin/busybox"
chroot "$mnt" /bin/busybox --install -s /bin
mkdir -p "$mnt"/{proc,sys,dev,etc,tmp,run,var/log,host}
put "$(command -v jq)" /usr/bin/jq
put "$BUILD/podinject" /usr/local/bin/podinject
# `podinject metrics --listen` opens libmicrohttpd by its soname at run
# time (src/metrics.c): ldd of the CLI does not name it
# (awk reads to the end: an early exit could end ldconfig by SIGPIPE)
mhd=$(ldconfig -p | awk '$1 == "libmicrohttpd.so.12" && /x86-64/ && !f { print $NF; f = 1 }')
[ -n "$mhd" ] || { echo "build-image: no libmicrohttpd.so.12 (libmicrohttpd-dev)" >&2; exit 1; }
put "$mhd" "$mhd"
put "$BUILD/podinject-cni" /opt/podinject/podinject-cni
# Beside the plugin on the host (its RPATH is $ORIGIN/podinject.lib): the
# libraries that are not the C library's own.
mkdir -p "$mnt/opt/podinject/lib"
for l in $(libs_of "$BUILD/podinject-cni"); do
	case $(basename "$l") in
	libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux*) ;;
	*) install -m 0755 "$(readlink -f "$l")" "$mnt/opt/podinject/lib/$(basename "$l")" ;;
	esac
done
install -D -m 0755 "$ROOT/deploy/kubernetes/install.sh" "$mnt/usr/local/bin/podinject-install"
rev=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)
echo "$rev" >"$mnt/opt/podinject/VERSION"
B umount "$ctr" >/dev/null
B config --entrypoint '["/usr/local/bin/podinject-install"]' --cmd '' \
	--env PATH=/usr/local/bin:/usr/bin:/bin \
	--label org.opencontainers.image.title=podinject \
	--label org.opencontainers.image.revision="$rev" "$ctr"
B commit --signature-policy "$POLICY" -q "$ctr" "$TAG" >/dev/null
rm -f "$OUT"
B push --signature-policy "$POLICY" -q "$TAG" "oci-archive:$OUT:$TAG"
echo "image $TAG ($rev) in $OUT"
