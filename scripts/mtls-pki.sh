#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# A small PKI for podinject-proxy's TLS origination (docs/proxy.md, "mTLS:
# TLS origination"): a node CA, and pod certificates in the layout the
# proxy reads (--tls-dir DIR: DIR/<address>/cert.pem and key.pem). For
# tests and demos; a cluster would use its issuer (SPIRE, cert-manager)
# writing the same files.
#
#   mtls-pki.sh ca DIR TRUST_DOMAIN
#       DIR/ca.pem, DIR/ca.key (ECDSA P-256, self-signed, CA:TRUE, 10 years)
#       and DIR/trust-domain
#   mtls-pki.sh issue DIR NS POD IP [--days N] [--expired] [--ca OTHERDIR]
#       DIR/<IP>/cert.pem and key.pem (0600): ECDSA P-256, URI SAN
#       spiffe://TRUST_DOMAIN/ns/NS/pod/POD and IP SAN IP, for client and
#       server use, signed by DIR's CA (or OTHERDIR's, whose trust domain
#       it then carries). --days N: valid N days from now (default 30);
#       --expired: its validity ended yesterday. <IP> is the address as
#       inet_ntop(3) writes it (IPv6 compressed, lower case).
#
# Files are written beside their final name and renamed into place, the
# key first, so that a running proxy never reads half a file.
set -euo pipefail

prog=$(basename "$0")
work=
trap '[ -z "$work" ] || rm -rf "$work"' EXIT
die() { echo "$prog: $*" >&2; exit 1; }
usage() {
	echo "usage: $prog ca DIR TRUST_DOMAIN" >&2
	echo "       $prog issue DIR NS POD IP [--days N] [--expired] [--ca OTHERDIR]" >&2
	exit 2
}

command -v openssl >/dev/null || die "openssl not found (apt-get install openssl)"

# The SPIFFE ID's rules: a trust domain of lower case letters, digits,
# '.', '-' and '_'; path segments of letters, digits, '.', '-' and '_'.
td_ok() { [[ $1 =~ ^[a-z0-9._-]{1,255}$ ]]; }
seg_ok() { [[ $1 =~ ^[A-Za-z0-9._-]{1,253}$ && $1 != . && $1 != .. ]]; }

# canonical_ip IP: the address as inet_ntop writes it, or nothing
canonical_ip() {
	local ip=$1 o
	if [[ $ip =~ ^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})$ ]]; then
		for o in "${BASH_REMATCH[@]:1}"; do
			[[ $o =~ ^(0|[1-9][0-9]*)$ ]] && [ "$o" -le 255 ] || return 0
		done
		echo "$ip"
	elif [[ $ip =~ ^[0-9A-Fa-f:.]+$ && $ip == *:* ]]; then
		command -v python3 >/dev/null ||
			die "IPv6 addresses need python3 (to write them as inet_ntop does)"
		python3 -c 'import ipaddress, sys
a = ipaddress.ip_address(sys.argv[1])
if a.version == 6: print(a.compressed)' "$ip" 2>/dev/null || true
	fi
}

cmd_ca() {
	[ $# = 2 ] || usage
	local dir=$1 td=$2 tmp
	td_ok "$td" || die "bad trust domain '$td' (lower case letters, digits, '.', '-', '_')"
	[ -e "$dir/ca.pem" ] || [ -e "$dir/ca.key" ] && die "$dir already has a CA"
	mkdir -p "$dir"
	tmp=$(mktemp -d "$dir/.ca.XXXXXX")
	work=$tmp
	(umask 077 && openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 \
		-out "$tmp/ca.key" 2>"$tmp/err") || die "key: $(tail -n 1 "$tmp/err")"
	openssl req -new -x509 -key "$tmp/ca.key" -sha256 -days 3650 \
		-subj "/O=podinject/CN=podinject node CA $td" \
		-addext "basicConstraints=critical,CA:TRUE" \
		-addext "keyUsage=critical,keyCertSign,cRLSign" \
		-addext "subjectAltName=URI:spiffe://$td" \
		-out "$tmp/ca.pem" 2>"$tmp/err" || die "certificate: $(tail -n 1 "$tmp/err")"
	echo "$td" >"$tmp/trust-domain"
	mv "$tmp/ca.key" "$dir/ca.key"
	mv "$tmp/trust-domain" "$dir/trust-domain"
	mv "$tmp/ca.pem" "$dir/ca.pem"
	echo "$dir/ca.pem"
}

cmd_issue() {
	[ $# -ge 4 ] || usage
	local dir=$1 ns=$2 pod=$3 ip=$4 days=30 expired=0 cadir=$1 td out tmp
	shift 4
	while [ $# -gt 0 ]; do
		case $1 in
		--days) [ $# -ge 2 ] || usage
			[[ $2 =~ ^[1-9][0-9]{0,4}$ ]] || die "bad --days '$2' (1-99999)"
			days=$2; shift 2 ;;
		--expired) expired=1; shift ;;
		--ca) [ $# -ge 2 ] || usage
			cadir=$2; shift 2 ;;
		*) usage ;;
		esac
	done
	seg_ok "$ns" || die "bad namespace '$ns'"
	seg_ok "$pod" || die "bad pod name '$pod'"
	out=$(canonical_ip "$ip")
	[ -n "$out" ] || die "bad IP address '$ip'"
	ip=$out
	[ -d "$dir" ] || die "$dir: no such directory"
	[ -r "$cadir/ca.pem" ] && [ -r "$cadir/ca.key" ] && [ -r "$cadir/trust-domain" ] ||
		die "$cadir: no CA there (make one with: $prog ca $cadir TRUST_DOMAIN)"
	td=$(cat "$cadir/trust-domain")
	td_ok "$td" || die "$cadir/trust-domain: bad trust domain '$td'"

	out=$dir/$ip
	tmp=$(mktemp -d "$dir/.issue.XXXXXX")
	work=$tmp
	(umask 077 && openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 \
		-out "$tmp/key.pem" 2>"$tmp/err") || die "key: $(tail -n 1 "$tmp/err")"
	openssl req -new -key "$tmp/key.pem" -subj "/O=podinject/CN=$pod.$ns" \
		-out "$tmp/req.pem" 2>"$tmp/err" || die "request: $(tail -n 1 "$tmp/err")"
	# openssl ca takes explicit dates (x509 -days cannot go back in time
	# on OpenSSL 3.0); it wants a database of its own: a throwaway one
	: >"$tmp/index.txt"
	echo 01 >"$tmp/serial"
	cat >"$tmp/ca.cnf" <<-EOF
	[ ca ]
	default_ca = pi
	[ pi ]
	database = $tmp/index.txt
	serial = $tmp/serial
	new_certs_dir = $tmp
	certificate = $cadir/ca.pem
	private_key = $cadir/ca.key
	default_md = sha256
	policy = any
	unique_subject = no
	copy_extensions = none
	[ any ]
	commonName = supplied
	organizationName = optional
	[ pod ]
	basicConstraints = critical,CA:FALSE
	keyUsage = critical,digitalSignature
	extendedKeyUsage = serverAuth,clientAuth
	subjectKeyIdentifier = hash
	authorityKeyIdentifier = keyid
	subjectAltName = URI:spiffe://$td/ns/$ns/pod/$pod,IP:$ip
	EOF
	local dates
	if [ "$expired" = 1 ]; then
		dates=(-startdate "$(date -u -d '-2 days' +%Y%m%d%H%M%SZ)"
		       -enddate "$(date -u -d '-1 day' +%Y%m%d%H%M%SZ)")
	else
		dates=(-startdate "$(date -u -d '-5 minutes' +%Y%m%d%H%M%SZ)"
		       -days "$days")
	fi
	openssl ca -batch -notext -rand_serial -config "$tmp/ca.cnf" \
		-extensions pod "${dates[@]}" -in "$tmp/req.pem" \
		-out "$tmp/cert.pem" >"$tmp/err" 2>&1 ||
		die "signing: $(grep -v '^Using configuration' "$tmp/err" | tail -n 1)"
	chmod 0644 "$tmp/cert.pem"
	mkdir -p "$out"
	mv "$tmp/key.pem" "$out/key.pem"
	mv "$tmp/cert.pem" "$out/cert.pem"
	echo "$out/cert.pem"
}

[ $# -ge 1 ] || usage
cmd=$1
shift
case $cmd in
ca) cmd_ca "$@" ;;
issue) cmd_issue "$@" ;;
*) usage ;;
esac
