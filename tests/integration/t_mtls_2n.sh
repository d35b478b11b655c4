#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# mTLS across two nodes joined by a wire (the uplink set-up): the client
# pods on one node, the protected server and its terminating proxy on the
# other. The client flow arrives over the uplink (uplink_ingress ->
# bpf_redirect_peer -> mj-b's eth0, where inbound capture takes it), and
# the proxy's answers as mj-b leave through mj-b's egress programs and
# bpf_redirect_neigh to the wire.
#
#   node mj-y: mj-a 10.244.1.10 (tlsc, its identity)     node mj-x: mj-b 10.244.0.11 (plaintext server)
#              mj-d 10.244.1.11 (plaintext client)                 mj-p 10.244.0.12 (--inbound :15006)
#              mj-q 10.244.1.13 (originates as mj-d :15001)
#   mj-y --- wire0 192.168.77.2 === 192.168.77.1 wire0 --- mj-x
. "$(dirname "$0")/lib.sh"
require_root
EXPECT=15
PREFIX=mj-
X=mj-x
Y=mj-y
A=10.244.1.10
B=10.244.0.11
D=10.244.1.11
PIDS=()
T=/tmp/mj$$
TLSC=$BUILD/tlsc
PKI=$ROOT/scripts/mtls-pki.sh

need_mtls_tools "$TLSC"

trap 'for p in "${PIDS[@]}"; do kill $p 2>/dev/null; done; rm -rf "$T"; cleanup_all' EXIT
mkdir -p "$T"

make_wire $X $Y
for n in $X $Y; do
	in_ns $n sysctl -qw net.ipv4.ip_forward=0 net.ipv6.conf.all.forwarding=0
done
setup() {
	node_up $X --uplink wire0 && node_up $Y --uplink wire0 &&
	pi -N $X pod add mj-b --ip $B >/dev/null &&
	pi -N $X pod add mj-p --ip 10.244.0.12 >/dev/null &&
	pi -N $Y pod add mj-a --ip $A >/dev/null &&
	pi -N $Y pod add mj-d --ip $D >/dev/null &&
	pi -N $Y pod add mj-q --ip 10.244.1.13 >/dev/null &&
	pi -N $X proxy add mj-p --port 15006 --for mj-b --inbound --match tcp dport 8080 >/dev/null &&
	pi -N $Y proxy add mj-q --port 15001 --for mj-d --match tcp dport 8080 >/dev/null
}
check setup setup
pki_ok() {
	"$PKI" ca $T/ca mj.test &&
	"$PKI" issue $T/ca mj mj-a $A &&
	"$PKI" issue $T/ca mj mj-b $B &&
	"$PKI" issue $T/ca mj mj-d $D
} >/dev/null
check pki pki_ok

start_proxy() {	# NAME ARGS...
	local ns=$1
	shift
	ip netns exec $ns "$BUILD/podinject-proxy" -v --connect-timeout 5000 \
		--tls-dir $T/ca --tls-ca $T/ca/ca.pem --tls-trust-domain mj.test "$@" \
		>$T/$ns.out 2>$T/$ns.log </dev/null &
	PIDS+=($!)
	for _ in $(seq 100); do grep -q ready $T/$ns.out 2>/dev/null && return 0; sleep 0.1; done
	echo "the proxy did not start: $(tail -n 1 $T/$ns.log)"
	return 1
}
proxies() { start_proxy mj-p --inbound 15006 && start_proxy mj-q 15001; }
# Not through `check`: it runs its command in a subshell, where the PIDs
# the trap stops at the end would be lost (both proxies outlived the suite)
if proxies >$T/start.err 2>&1; then
	pass proxies_started
else
	fail proxies_started "$(tail -n 1 $T/start.err)"
fi

server_bg() {
	ip netns exec mj-b "$BUILD/pinet" tcp-server 8080 --count 1 --echo --timeout 10000 >$T/srv 2>&1 &
	SRV=$!
	wait_tcp_listen mj-b 8080 >/dev/null
}
# capture_wire NAME: tcpdump on node mj-x's wire0 into $T/NAME.pcap
capture_wire() { wire_capture $X wire0 8080 $T/$1.pcap; }
rec() { awk -v k="$2" '{ for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }' $T/$1.rec; }

# 1. A TLS client on the other node: terminated for mj-b, which sees the
#    client's address; the wire carries TLS records only
remote_tls() {
	capture_wire tls
	server_bg
	in_ns mj-a "$TLSC" $B 8080 --ca $T/ca/ca.pem --cert $T/ca/$A/cert.pem \
		--key $T/ca/$A/key.pem --send 300000 --timeout 8000 >$T/cli 2>&1
	wait $SRV
	wire_capture_end $T/tls.pcap
}
for _ in 1 2 3; do remote_tls && break; done
check remote_client_verified grep -q "^ok verified spiffe://mj.test/ns/mj/pod/mj-b bytes-sent 300000 bytes-received 300000 " $T/cli
expect_eq remote_client_address "$(awk '/^accept/ {print $2}' $T/srv)" $A
check remote_proxy_verified_client grep -q "^tls-in $A:[0-9]* -> $B:8080 verified spiffe://mj.test/ns/mj/pod/mj-a " $T/mj-p.log
tls_records $T/tls.pcap 8080 "none-$$" >$T/tls.rec 2>&1
wire_tls() {
	[ "$(rec tls streams)" = 2 ] && [ "$(rec tls gaps)" = 0 ] && [ "$(rec tls bad)" = 0 ] &&
	[ "$(rec tls appbytes)" -ge 300000 ] || { echo "wire: $(cat $T/tls.rec)"; return 1; }
}
check remote_wire_only_tls wire_tls

# 2. The whole chain across the wire: a plaintext client, its proxy
#    originating TLS as it, the wire, the terminating proxy, a plaintext
#    server that sees the client; the client's marker never on the wire
marker=$(openssl rand -hex 32)
chain_tls() {
	capture_wire chain
	server_bg
	in_ns mj-d bash -c "exec 3<>/dev/tcp/$B/8080 && printf %s '$marker' >&3 && exec 3>&- " 2>$T/chain_cl
	wait $SRV
	wire_capture_end $T/chain.pcap
}
for _ in 1 2 3; do chain_tls && break; done
expect_eq chain_server_sees_client "$(awk '/^accept/ {print $2}' $T/srv)" $D
check chain_origination_verified grep -q "^tls $D:[0-9]* -> $B:8080 verified spiffe://mj.test/ns/mj/pod/mj-b " $T/mj-q.log
check chain_termination_verified grep -q "^tls-in $D:[0-9]* -> $B:8080 verified spiffe://mj.test/ns/mj/pod/mj-d " $T/mj-p.log
tls_records $T/chain.pcap 8080 "$marker" >$T/chain.rec 2>&1
chain_wire() {
	[ "$(rec chain streams)" = 2 ] && [ "$(rec chain bad)" = 0 ] &&
	[ "$(rec chain appbytes)" -ge 64 ] || { echo "wire: $(cat $T/chain.rec)"; return 1; }
}
check chain_wire_only_tls chain_wire
expect_eq chain_no_marker_on_wire "$(rec chain marker)" 0

# 3. A client without a certificate, across the wire: refused, mj-b sees
#    nothing
server_bg
in_ns mj-a "$TLSC" $B 8080 --ca $T/ca/ca.pem --timeout 5000 >$T/cli 2>&1
kill $SRV 2>/dev/null
wait $SRV 2>/dev/null
check remote_no_cert_refused grep -q "^refused" $T/cli
check remote_no_cert_server_saw_nothing bash -c "! grep -q '^accept' $T/srv"

# 4. Nothing left of the flows once the connections are done
check flows_gone inbound_flows_gone $X
