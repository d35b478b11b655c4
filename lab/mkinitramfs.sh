#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# mkinitramfs.sh KERNEL_DIR OUT
#
# Build the lab's initramfs (gzip'd newc cpio) for the kernel in KERNEL_DIR:
#   - busybox-static and all its applet links,
#   - host programs the test scripts need (bash, iproute2's ip and tc, jq, ...)
#     with the shared libraries ldd reports for them and the dynamic loader,
#   - the project: build/, tests/, scripts/, bench/ (without its results) of
#     this repository under /podinject,
#     with the libraries of every ELF in build/,
#   - for a stock kernel (KERNEL_DIR/root/lib/modules/<release>): the modules
#     the tests need and their dependencies from modules.dep, decompressed on
#     the host, loaded by /init in dependency order,
#   - /init (lab/init.sh) and /etc/podinject-lab.env (lab name, suite command).
#
# Environment:
#   LAB_NAME          name the suite sees as PODINJECT_LAB (default: basename of KERNEL_DIR)
#   LAB_SUITE         command /init runs in /podinject (default: ./tests/run.sh,
#                     or ./tests/lab/run-lab-tests.sh when tests/run.sh does not exist)
#   LAB_EXTRA_TOOLS   more host programs to copy (space separated names or paths)
#   LAB_MODULES       more module names to load on stock kernels
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
KDIR=${1:?usage: mkinitramfs.sh KERNEL_DIR OUT}
OUT=${2:?usage: mkinitramfs.sh KERNEL_DIR OUT}
KDIR=$(cd "$KDIR" && pwd)
LAB_NAME=${LAB_NAME:-$(basename "$KDIR")}

log() { echo "mkinitramfs: $*" >&2; }
die() { log "error: $*"; exit 1; }

BUSYBOX=$(command -v busybox || true)
[ -n "$BUSYBOX" ] && file -L "$BUSYBOX" | grep -q 'statically linked' ||
	die "busybox-static is needed (apt-get install busybox-static)"

STAGE=$(mktemp -d "${TMPDIR:-/tmp}/podinject-initramfs.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT

# A usr-merged layout like Debian 12's, so paths ldd prints resolve as on the host.
mkdir -p "$STAGE"/{usr/bin,usr/sbin,usr/lib,usr/lib64,etc,proc,sys,dev,run,tmp,root,podinject}
ln -s usr/bin "$STAGE/bin"
ln -s usr/sbin "$STAGE/sbin"
ln -s usr/lib "$STAGE/lib"
ln -s usr/lib64 "$STAGE/lib64"
chmod 1777 "$STAGE/tmp"

# --- busybox ---
cp "$BUSYBOX" "$STAGE/usr/bin/busybox"
"$BUSYBOX" --list-full | while read -r applet; do
	[ -e "$STAGE/$applet" ] || [ -L "$STAGE/$applet" ] || ln -s /usr/bin/busybox "$STAGE/$applet"
done

# --- ELF files and their libraries ---
declare -A COPIED=()
copy_file() {	# copy a host file to the same path in the image (following symlinks)
	local src=$1 dst=$STAGE${2:-$1}
	[ -n "${COPIED[$dst]:-}" ] && return 0
	COPIED[$dst]=1
	mkdir -p "$(dirname "$dst")"
	rm -f "$dst"
	cp -L "$src" "$dst"
}
copy_libs() {	# the libraries and the loader an ELF needs, per ldd
	local elf=$1 lib
	file -L "$elf" | grep -q 'dynamically linked' || return 0
	while read -r lib; do
		[ -e "$lib" ] && copy_file "$lib"
	done < <(ldd "$elf" 2>/dev/null | awk '
		/=> \// { print $3; next }
		/^[[:space:]]*\// { print $1 }')
}
copy_tool() {	# a host program as /usr/bin/NAME, replacing busybox's applet
	local name=$1 path base
	path=$(command -v "$name" 2>/dev/null || true)
	[ -n "$path" ] || { log "note: host has no $name, not copied"; return 0; }
	path=$(readlink -f "$path")
	base=$(basename "$name")
	copy_file "$path" "/usr/bin/$base"
	copy_libs "$path"
	# an applet link of that name in sbin would shadow it for some PATHs
	if [ -L "$STAGE/usr/sbin/$base" ]; then
		ln -sfn "/usr/bin/$base" "$STAGE/usr/sbin/$base"
	fi
}

# bash for the test scripts, iproute2 (busybox ip has no netns; its nstat:
# t_proxy_tw and t_proxy read TCP counters with it, and without it their
# readings were empty and compared equal), jq for podinject's JSON; the
# rest when the host has them.
for t in bash ip nstat jq; do
	command -v "$t" >/dev/null || die "host program $t is needed (lab/deps.sh)"
	copy_tool "$t"
done
# openssl (scripts/mtls-pki.sh) and tcpdump: the mTLS suites, which run in
# the lab for kTLS (the host kernel has no CONFIG_TLS).
for t in tc bpftool iperf3 ethtool nsenter unshare ss flock setpriv prlimit openssl tcpdump strace ${LAB_EXTRA_TOOLS:-}; do
	copy_tool "$t"
done
# coreutils where busybox's applet differs from what the tests expect:
# busybox date has no %N (`date +%s%N` came out as "1796000395%N", and the
# arithmetic on it threw the timing checks away), busybox timeout exits 143,
# not 124, when it has to kill (tests/run.sh reports 124 as "timed out").
for t in date timeout; do
	copy_tool "$t"
done
# openssl's configuration (req reads it)
[ -e /usr/lib/ssl/openssl.cnf ] && copy_file /usr/lib/ssl/openssl.cnf
# busybox sh runs its own applets before PATH (so `sh -c "ip netns ..."` would
# get busybox ip, which has no netns): /bin/sh is bash in the image. /init
# runs under it too; busybox's shell stays available as ash.
ln -sfn /usr/bin/bash "$STAGE/usr/bin/sh"
# ip/tc read their tables from here (rt_tables, protocols, ...)
if [ -d /usr/share/iproute2 ]; then
	mkdir -p "$STAGE/usr/share"
	cp -a /usr/share/iproute2 "$STAGE/usr/share/"
fi
[ -d /etc/iproute2 ] && cp -a /etc/iproute2 "$STAGE/etc/"

# Minimal /etc for programs that look names up.
echo 'root:x:0:0:root:/root:/bin/bash' > "$STAGE/etc/passwd"
echo 'root:x:0:' > "$STAGE/etc/group"
printf '127.0.0.1 localhost\n::1 localhost\n' > "$STAGE/etc/hosts"
printf 'passwd: files\ngroup: files\nhosts: files\n' > "$STAGE/etc/nsswitch.conf"
cp /etc/protocols /etc/services "$STAGE/etc/" 2>/dev/null || true

# --- the project ---
# (include/: the tests read the ABI version from its header)
for d in build tests scripts bench include; do
	[ -d "$ROOT/$d" ] || { log "note: $d/ does not exist, not copied"; continue; }
	# skip the big intermediate objects, keep binaries and BPF objects
	# (and not the lab's own images and console logs in build/lab, nor
	# those another lab run is writing: NAME.console.log.PID)
	tar -C "$ROOT" --exclude="$d/obj" --exclude='*.o.d' \
		--exclude='build/lab/*.initramfs.gz*' --exclude='build/lab/*.console.log*' \
		--exclude='build/lab-bench' --exclude='bench/results' \
		-cf - "$d" |
		tar -C "$STAGE/podinject" -xf -
done
nelf=0
while IFS= read -r -d '' f; do
	if file -L "$f" | grep -q 'ELF 64-bit.*x86-64'; then
		copy_libs "$f"
		nelf=$((nelf + 1))
	fi
done < <(find "$STAGE/podinject" -type f -perm -u+x -print0)
# Libraries the CLI opens at run time, which ldd does not name:
# libmicrohttpd for `metrics --listen` (src/metrics.c), and what it needs.
for soname in libmicrohttpd.so.12; do
	# awk reads to the end: an early exit would end ldconfig by SIGPIPE,
	# and under pipefail the script with it (silently, at random)
	lib=$(ldconfig -p | awk -v n="$soname" '$1 == n && /x86-64/ && !f { print $NF; f = 1 }')
	[ -n "$lib" ] || { log "note: host has no $soname, not copied"; continue; }
	copy_file "$lib"
	copy_libs "$lib"
done
log "project copied: $(du -sh "$STAGE/podinject" | cut -f1), $nelf host ELF programs"

# --- kernel modules (stock kernels) ---
: > "$STAGE/etc/podinject-modules"
MODROOT=
if [ -f "$KDIR/release" ]; then
	rel=$(cat "$KDIR/release")
	[ -d "$KDIR/root/lib/modules/$rel" ] && MODROOT=$KDIR/root/lib/modules/$rel
fi
if [ -n "$MODROOT" ] && [ ! -f "$MODROOT/modules.dep" ]; then
	log "no modules.dep for $rel, running depmod"
	depmod -b "$KDIR/root" "$rel" || die "depmod failed"
fi
if [ -n "$MODROOT" ]; then
	# tls, and the AES-GCM its sockets ask the crypto API for (gcm,
	# ghash); the sock_diag handlers the library reads a pod's sockets
	# with when it gets its first rule (inet_diag, tcp_diag, udp_diag);
	# the token bucket t_probe holds a server's answers back with
	# (sch_tbf): the kernel would load those through modprobe, which the
	# image has not
	WANT=(veth dummy sch_ingress cls_bpf act_bpf act_mirred
	      x_tables xt_mark xt_socket xt_TPROXY ip_tables iptable_mangle
	      ip6_tables ip6table_mangle nf_tproxy_ipv4 nf_tproxy_ipv6
	      nf_tables nft_compat nft_socket nft_tproxy
	      netkit ipv6 tls gcm ghash_generic ctr
	      inet_diag tcp_diag udp_diag sch_tbf ${LAB_MODULES:-})
	declare -A DEP=() PATHOF=() DONE=()
	norm() { local n=${1##*/}; n=${n%%.ko*}; echo "${n//-/_}"; }
	while IFS= read -r line; do
		mod=${line%%:*}
		n=$(norm "$mod")
		PATHOF[$n]=$mod
		deps=${line#*:}
		list=
		for dp in $deps; do list+=" $(norm "$dp")"; done
		DEP[$n]=$list
	done < "$MODROOT/modules.dep"
	ORDER=()
	visit() {
		local n=$1 d
		[ -n "${DONE[$n]:-}" ] && return 0
		DONE[$n]=1
		for d in ${DEP[$n]}; do visit "$d"; done
		ORDER+=("$n")
	}
	missing=()
	for w in "${WANT[@]}"; do
		n=$(norm "$w")
		if [ -n "${PATHOF[$n]:-}" ]; then
			visit "$n"
		elif ! grep -q "/$w.ko" "$MODROOT/modules.builtin" 2>/dev/null; then
			missing+=("$w")
		fi
	done
	[ ${#missing[@]} -eq 0 ] || log "note: not in $rel (neither module nor built in): ${missing[*]}"
	dst=$STAGE/lib/modules/$rel
	mkdir -p "$dst"
	for n in "${ORDER[@]}"; do
		src=$MODROOT/${PATHOF[$n]}
		case "$src" in
		*.ko)     cp "$src" "$dst/$n.ko" ;;
		*.ko.xz)  xz -dc "$src" > "$dst/$n.ko" ;;
		*.ko.zst) zstd -qdc "$src" > "$dst/$n.ko" ;;
		*.ko.gz)  gzip -dc "$src" > "$dst/$n.ko" ;;
		*) die "unknown module format: $src" ;;
		esac
		echo "/lib/modules/$rel/$n.ko" >> "$STAGE/etc/podinject-modules"
	done
	log "modules for $rel: ${ORDER[*]}"
fi

# --- /init and its settings ---
suite=${LAB_SUITE:-}
if [ -z "$suite" ]; then
	if [ -x "$ROOT/tests/run.sh" ]; then
		suite=./tests/run.sh
	else
		suite="./tests/lab/run-lab-tests.sh --summary"
		log "note: tests/run.sh does not exist yet, the image runs $suite"
	fi
fi
cp "$ROOT/lab/init.sh" "$STAGE/init"
chmod 755 "$STAGE/init"
{
	printf 'PODINJECT_LAB=%q\n' "$LAB_NAME"
	printf 'LAB_SUITE=%q\n' "$suite"
} > "$STAGE/etc/podinject-lab.env"

mkdir -p "$(dirname "$OUT")"
(cd "$STAGE" && find . -print0 | LC_ALL=C sort -z |
	cpio --null -o -H newc --owner=0:0 --quiet) | gzip -1 > "$OUT.tmp.$$"
mv "$OUT.tmp.$$" "$OUT"
log "wrote $OUT ($(du -h "$OUT" | cut -f1))"
