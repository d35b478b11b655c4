#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# TLS termination: `proxy add --inbound` captures the new TCP connections
# to a protected pod on its protected ports, from any client, at the pod's
# eth0; podinject-proxy --inbound terminates mutual TLS 1.3 with the pod's
# identity, checks the client's certificate against its source address,
# and connects on to the pod from the client's address:
#
#   mi-a (tlsc, 10.244.0.10, its own identity) --TLS--> 10.244.0.11:8080
#       captured at mi-b's eth0 -> mi-b's hook -> mi-p (proxy :15006)
#   mi-p: TLS server as mi-b (DIR/10.244.0.11/), checks mi-a's certificate
#       (chain, IP SAN = 10.244.0.10, trust domain), then connects to
#       10.244.0.11:8080 bound to 10.244.0.10 -> mi-b's eth0
#   mi-b (plaintext pinet server :8080 and :9090): sees mi-a's address
#   mi-c (10.244.0.20): plaintext, no certificate, someone else's
#   mi-q (outbound proxy :15001) + mi-d (10.244.0.21): the whole chain, a
#       plaintext client reaching a plaintext server through mTLS
. "$(dirname "$0")/lib.sh"
require_root
EXPECT=68
PREFIX=mi-
X=mi-x
A=10.244.0.10
B=10.244.0.11
C=10.244.0.20
D=10.244.0.21
PIDS=()
T=/tmp/mi$$
TLSC=$BUILD/tlsc
PKI=$ROOT/scripts/mtls-pki.sh

need_mtls_tools "$TLSC"

trap 'for p in "${PIDS[@]}"; do kill $p 2>/dev/null; done; rm -rf "$T"; cleanup_all' EXIT
mkdir -p "$T"

ip netns add $X
check up node_up $X
pods_ok() {
	local p
	for p in a:10 b:11 p:12 q:13 c:20 d:21; do
		pi -N $X pod add mi-${p%:*} --ip 10.244.0.${p#*:} >/dev/null || return 1
	done
}
check pods pods_ok

pki_ok() {
	"$PKI" ca $T/ca mi.test &&
	"$PKI" ca $T/rogue mi.test &&
	"$PKI" issue $T/ca mi mi-a $A &&
	"$PKI" issue $T/ca mi mi-b $B &&
	"$PKI" issue $T/ca mi mi-d $D &&
	mkdir -p $T/exp $T/rog &&
	"$PKI" issue $T/exp mi mi-c $C --expired --ca $T/ca &&
	"$PKI" issue $T/rog mi mi-c $C --ca $T/rogue
} >/dev/null
check pki pki_ok

# bad input: a clear error, a non-zero exit, nothing left behind
bad_rules() {
	! pi -N $X proxy add mi-p --port 15006 --for mi-b --inbound --match udp 2>$T/err &&
	grep -q "TCP" $T/err &&
	! pi -N $X proxy add mi-p --port 15006 --for mi-b --inbound --match tcp dst 10.0.0.0/8 2>/dev/null &&
	! pi -N $X proxy add mi-b --port 15006 --for mi-b --inbound 2>/dev/null &&
	[ "$(pi -N $X -j proxy list | jq length)" = 0 ]
}
check inbound_bad_input bad_rules
check inbound_add pi -N $X proxy add mi-p --port 15006 --for mi-b --inbound --match tcp dport 8080
check inbound_twice_refused bash -c "! $PI -N $X proxy add mi-p --port 15007 --for mi-b --inbound 2>/dev/null"
listed() {
	pi -N $X -j proxy list | jq -e '.[] | select(.pod == "mi-b" and .proxy == "mi-p"
		and .direction == "inbound" and .port == 15006 and .proto == "tcp" and .dports == "8080")' >/dev/null
}
check inbound_listed listed

# the proxy's bad arguments: a clear error, exit 1, nothing served
proxy_args_refused() {
	local p=$BUILD/podinject-proxy rc
	in_ns mi-p $p --inbound 15006 2>$T/err </dev/null; rc=$?
	[ $rc = 1 ] && grep -q -- "--inbound needs --tls-dir and --tls-ca" $T/err &&
	! in_ns mi-p $p --tls-dir $T/ca --tls-ca $T/ca/ca.pem --permissive 15006 2>/dev/null </dev/null &&
	! in_ns mi-p $p --inbound --tls-dir $T/ca 15006 2>/dev/null </dev/null &&
	! in_ns mi-p $p --inbound --tls-dir $T/ca --tls-ca $T/ca/ca.pem --permissive-wait 500 15006 2>/dev/null </dev/null ||
		{ echo "rc $rc: $(cat $T/err)"; return 1; }
}
check proxy_bad_args proxy_args_refused

start_proxy() {	# NAME ARGS...: podinject-proxy in pod NAME, -v, log $T/NAME.log
	local ns=$1
	shift
	ip netns exec $ns "$BUILD/podinject-proxy" -v --connect-timeout 3000 "$@" \
		>$T/$ns.out 2>$T/$ns.log </dev/null &
	PIDS+=($!)
	for _ in $(seq 100); do grep -q ready $T/$ns.out 2>/dev/null && return 0; sleep 0.1; done
	echo "the proxy did not start: $(tail -n 1 $T/$ns.log)"
	return 1
}
if start_proxy mi-p --inbound --tls-dir $T/ca --tls-ca $T/ca/ca.pem \
		--tls-trust-domain mi.test 15006 >$T/start 2>&1; then
	pass proxy_started
else
	fail proxy_started "$(tail -n 1 $T/start)"
fi
check proxy_says_strict grep -q "inbound tls termination, strict" $T/mi-p.log

# server_bg PORT [COUNT]: mi-b's plaintext echo server. SRV is the server
# itself (ip netns exec execs it), so that `kill $SRV` ends it: through a
# shell function it was the function's subshell, and a server that got no
# connection held its port for its 8 s timeout, which the next server_bg
# on that port then could not bind (t_mtls_in chain_delivered, lab).
server_bg() {
	ip netns exec mi-b "$BUILD/pinet" tcp-server $1 --count ${2:-1} --echo --timeout 8000 >$T/srv 2>&1 &
	SRV=$!
	wait_tcp_listen mi-b $1 >/dev/null
}
tlsc_from() {	# POD [ARGS...]: tlsc in POD to B:8080
	local pod=$1
	shift
	in_ns $pod "$TLSC" $B 8080 --ca $T/ca/ca.pem --timeout 5000 "$@"
}

# 1. A client with its identity: mi-b gets the bytes, from mi-a's address;
#    only TLS records on mi-a's wire
identified_client() {
	wire_capture mi-a eth0 8080 $T/cap.pcap
	server_bg 8080
	tlsc_from mi-a --cert $T/ca/$A/cert.pem --key $T/ca/$A/key.pem --send 100000 >$T/cli 2>&1
	wait $SRV
	wire_capture_end $T/cap.pcap
}
for _ in 1 2 3; do identified_client && break; done
check client_verified_server_identity grep -q "^ok verified spiffe://mi.test/ns/mi/pod/mi-b bytes-sent 100000 bytes-received 100000 " $T/cli
expect_eq server_sees_client_address "$(awk '/^accept/ {print $2}' $T/srv)" $A
check proxy_verified_client grep -q "^tls-in $A:[0-9]* -> $B:8080 verified spiffe://mi.test/ns/mi/pod/mi-a " $T/mi-p.log
# terminating too: where the kernel has kTLS, it seals and opens the
# client's records (docs/proxy.md, kTLS)
ktls_used() {
	local want="send off recv off"
	grep -q '^podinject-proxy: tls: ktls available ' $T/mi-p.log &&
		want="send on recv on"
	grep -qE "^tls-in $A:[0-9]* -> $B:8080 verified .* ktls $want\$" $T/mi-p.log ||
		{ echo "want ktls $want: $(grep "^tls-in $A" $T/mi-p.log | head -n 1)"; return 1; }
}
check ktls_both_ways ktls_used
# what came back is what went (the server echoes)
cli_field() { awk -v k="$1" '{for (i = 1; i < NF; i++) if ($i == k) print $(i + 1)}' $T/cli; }
expect_eq echo_intact "$(cli_field sha256)" "$(cli_field sent-sha256)"
tls_records $T/cap.pcap 8080 "no-marker-$$" >$T/rec 2>&1
rec() { awk -v k="$1" '{ for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }' $T/rec; }
# both directions seen whole, a handshake, the data in application data
# records, and nothing that is not a TLS record
only_tls() {
	[ "$(rec streams)" = 2 ] && [ "$(rec gaps)" = 0 ] && [ "$(rec handshake)" -ge 2 ] &&
	[ "$(rec appbytes)" -ge 100000 ] && [ "$(rec bad)" = 0 ] ||
		{ echo "capture: $(cat $T/rec)"; return 1; }
}
check capture_only_tls only_tls

# 2. Refused clients: the handshake fails, mi-b's server gets no connection
refused() {	# NAME POD [TLSC ARGS...]
	local name=$1 pod=$2
	shift 2
	server_bg 8080
	tlsc_from $pod "$@" >$T/cli 2>&1
	kill $SRV 2>/dev/null
	wait $SRV 2>/dev/null
	check ${name}_refused grep -q "^refused" $T/cli
	check ${name}_server_saw_nothing bash -c "! grep -q '^accept' $T/srv"
}
refused no_cert mi-c
refused expired_cert mi-c --cert $T/exp/$C/cert.pem --key $T/exp/$C/key.pem
refused other_ca mi-c --cert $T/rog/$C/cert.pem --key $T/rog/$C/key.pem
# mi-a's own certificate used from mi-c's address
refused stolen_cert mi-c --cert $T/ca/$A/cert.pem --key $T/ca/$A/key.pem
check stolen_cert_reason grep -q "client certificate: .*IP address mismatch" $T/mi-p.log

# 3. Strict: a plaintext connection to the protected port is refused
server_bg 8080
plain_out=$(in_ns mi-c "$BUILD/pinet" tcp-connect --timeout 5000 $B 8080 --send 1000 2>&1)
kill $SRV 2>/dev/null
wait $SRV 2>/dev/null
check plaintext_refused bash -c "! grep -q '^done sent 1000 received 1000' <<<'$plain_out'"
check plaintext_server_saw_nothing bash -c "! grep -q '^accept' $T/srv"
check plaintext_logged grep -q "tls: plaintext refused $C:[0-9]* -> $B:8080" $T/mi-p.log

# 4. A port that is not protected stays direct (and plaintext)
server_bg 9090
plain_out=$(in_ns mi-c "$BUILD/pinet" tcp-connect --timeout 5000 $B 9090 --send 1000 2>&1)
wait $SRV
check other_port_direct grep -q "^done sent 1000 received 1000" <<<"$plain_out"
expect_eq other_port_client_address "$(awk '/^accept/ {print $2}' $T/srv)" $C

# 5. What the proxy may send with a client's address: to the pod it
#    protects, on a protected port, and nothing else (its source check
#    drops the rest as spoofed)
foreign_source() {	# NAME POD PORT: mi-p connects as mi-a to POD's PORT
	local out
	# (not through in_ns: $! must be the server, for the kill below)
	ip netns exec $2 "$BUILD/pinet" tcp-server $3 --count 1 --timeout 3000 >$T/srv2 2>&1 &
	local srv=$!
	wait_tcp_listen $2 $3 >/dev/null
	out=$(in_ns mi-p "$BUILD/pinet" tcp-connect --bind $A --timeout 1500 \
		$(pi -N $X -j pod show ${2} | jq -r .ipv4) $3 2>&1)
	kill $srv 2>/dev/null
	wait $srv 2>/dev/null
	check ${1}_not_connected bash -c "! grep -q '^connected' <<<'$out'"
	check ${1}_server_saw_nothing bash -c "! grep -q '^accept' $T/srv2"
}
foreign_source as_client_to_other_pod mi-c 9091
foreign_source as_client_to_unprotected_port mi-b 9090

# 6. The whole chain: mi-d speaks plaintext; mi-q originates TLS as mi-d,
#    mi-p terminates it as mi-b; mi-b sees mi-d's address
chain_setup() {
	pi -N $X proxy add mi-q --port 15001 --for mi-d --match tcp dport 8080 >/dev/null &&
	start_proxy mi-q --tls-dir $T/ca --tls-ca $T/ca/ca.pem --tls-trust-domain mi.test 15001
}
check chain_setup chain_setup
server_bg 8080
chain_out=$(in_ns mi-d "$BUILD/pinet" tcp-connect --timeout 8000 $B 8080 --send 200000 --expect-echo 2>&1)
wait $SRV
chain_delivered() {
	grep -q "^done sent 200000 received 200000" <<<"$chain_out" ||
		{ echo "client: $(tail -n 1 <<<"$chain_out"); mi-q: $(tail -n 3 $T/mi-q.log | tr '\n' ' ')mi-p: $(tail -n 3 $T/mi-p.log | tr '\n' ' ')server: $(tail -n 1 $T/srv)"; return 1; }
}
check chain_delivered chain_delivered
expect_eq chain_server_sees_client "$(awk '/^accept/ {print $2}' $T/srv)" $D
check chain_origination_verified_server grep -q "^tls $D:[0-9]* -> $B:8080 verified spiffe://mi.test/ns/mi/pod/mi-b " $T/mi-q.log
check chain_termination_verified_client grep -q "^tls-in $D:[0-9]* -> $B:8080 verified spiffe://mi.test/ns/mi/pod/mi-d " $T/mi-p.log

# 6b. --tls-resume at both ends: a client's next connection resumes its
#     session (no certificates sent), and the terminating proxy checks the
#     certificate the session carries against the address it comes from:
#     a session taken to another pod is refused. A new CA bundle means full
#     handshakes again.
# (not under check, whose subshell could not keep the new proxies' PIDS;
# mi-q's first proxy was started under one, so it is found by its pod)
stop_pod_procs() {
	local ns
	for ns in "$@"; do kill $(ip netns pids $ns) 2>/dev/null; done
	for _ in $(seq 50); do
		[ -z "$(for ns in "$@"; do ip netns pids $ns; done)" ] && return 0
		sleep 0.1
	done
}
stop_pod_procs mi-p mi-q
wait "${PIDS[@]}" 2>/dev/null
PIDS=()
if start_proxy mi-p --inbound --tls-dir $T/ca --tls-ca $T/ca/ca.pem \
		--tls-trust-domain mi.test --tls-resume 60 15006 >$T/start 2>&1 &&
	start_proxy mi-q --tls-dir $T/ca --tls-ca $T/ca/ca.pem \
		--tls-trust-domain mi.test --tls-resume 60 15001 >$T/start 2>&1; then
	pass resume_restarted
else
	fail resume_restarted "$(tail -n 1 $T/start)"
fi
# resumed_from NAME POD ARGS...: tlsc from POD through mi-p to mi-b's echo
# server; the client's "resumed", the address mi-b saw
resumed_from() {
	local pod=$1
	shift
	server_bg 8080
	tlsc_from $pod "$@" --send 1000 >$T/cli 2>&1
	kill $SRV 2>/dev/null
	wait $SRV 2>/dev/null
	echo "$(awk '/^ok/ {print "ok", $NF} /^refused/ {print "refused"}' $T/cli)" \
		"$(awk '/^accept/ {print $2}' $T/srv)"
}
idA="--cert $T/ca/$A/cert.pem --key $T/ca/$A/key.pem"
expect_eq resume_first_full "$(resumed_from mi-a $idA --sess-out $T/a.sess)" "ok no $A"
expect_eq resume_second_resumed "$(resumed_from mi-a $idA --sess-in $T/a.sess)" "ok yes $A"
check resume_proxy_said grep -q "^tls-in $A:[0-9]* -> $B:8080 verified spiffe://mi.test/ns/mi/pod/mi-a resumed " $T/mi-p.log
# mi-a's session (its secret) used from mi-c's address, with no
# certificate: refused, mi-b sees nothing
expect_eq resume_stolen_session_refused "$(resumed_from mi-c --sess-in $T/a.sess)" "refused "
check resume_stolen_session_reason grep -q "tls resumed: certificate not for this address" $T/mi-p.log
# the chain, both proxies resuming: mi-d's second connection
chain_twice() {
	local i out
	for i in 1 2; do
		server_bg 8080
		out=$(in_ns mi-d "$BUILD/pinet" tcp-connect --timeout 8000 $B 8080 --send 1000 --expect-echo 2>&1)
		wait $SRV
		grep -q "^done sent 1000 received 1000" <<<"$out" &&
			[ "$(awk '/^accept/ {print $2}' $T/srv)" = $D ] ||
			{ echo "connection $i: $out; server: $(cat $T/srv)"; return 1; }
	done
	grep -q "^tls $D:[0-9]* -> $B:8080 verified spiffe://mi.test/ns/mi/pod/mi-b resumed " $T/mi-q.log &&
	grep -q "^tls-in $D:[0-9]* -> $B:8080 verified spiffe://mi.test/ns/mi/pod/mi-d resumed " $T/mi-p.log ||
		{ echo "not resumed: $(grep -h "$D:" $T/mi-q.log $T/mi-p.log | tail -n 4)"; return 1; }
}
check resume_chain chain_twice
# a new CA bundle in the file's place: the ticket is not taken any more
cp $T/ca/ca.pem $T/ca.new && mv $T/ca.new $T/ca/ca.pem
sleep 1.2
expect_eq resume_not_across_ca_reload "$(resumed_from mi-a $idA --sess-in $T/a.sess)" "ok no $A"
# A chain of resumptions ends --tls-resume after its full handshake: a
# resumed connection's new ticket must not start the count again. 5 s; in
# the lab 15: three connections one after another took more than 5 s in a
# guest sharing two cores with two others (2026-12-06, debian-6.1: the
# third was a full handshake, rightly)
resume_s=5
[ -n "${PODINJECT_LAB:-}" ] && resume_s=15
stop_pod_procs mi-p
if start_proxy mi-p --inbound --tls-dir $T/ca --tls-ca $T/ca/ca.pem \
		--tls-trust-domain mi.test --tls-resume $resume_s 15006 >$T/start 2>&1; then
	pass resume_short_restarted
else
	fail resume_short_restarted "$(tail -n 1 $T/start)"
fi
chain_bounded() {
	local t0 r i
	r=$(resumed_from mi-a $idA --sess-out $T/c1.sess | awk '{print $2}')
	# after it: the full handshake is behind, however long it took (an
	# emulated guest took long enough for 5.5 s from before it to be
	# under 5 s from the handshake, and the fourth one resumed)
	t0=$(now_ms)
	for i in 2 3; do
		sleep 0.3
		r="$r $(resumed_from mi-a $idA --sess-in $T/c$((i - 1)).sess --sess-out $T/c$i.sess | awk '{print $2}')"
	done
	# past --tls-resume since the first (full) handshake
	while [ $(( $(now_ms) - t0 )) -lt $((resume_s * 1000 + 500)) ]; do sleep 0.1; done
	r="$r $(resumed_from mi-a $idA --sess-in $T/c3.sess --sess-out $T/c4.sess | awk '{print $2}')"
	r="$r $(resumed_from mi-a $idA --sess-in $T/c4.sess | awk '{print $2}')"
	echo $r
}
expect_eq resume_chain_bounded "$(chain_bounded)" "no yes yes no yes"

# 6b. Permissive: a client that does not speak TLS is relayed as the
#     plaintext proxy relays it, whoever speaks first: a client silent for
#     1 s (--permissive-wait; its server speaks first: SMTP, MySQL) and a client that
#     half-closes before a word are plaintext too (before 2026-12-06: the
#     first was reset at the connect timeout, the second dropped as gone;
#     the protected pod saw neither)
stop_pod_procs mi-p
if start_proxy mi-p --inbound --permissive --tls-dir $T/ca --tls-ca $T/ca/ca.pem \
		--tls-trust-domain mi.test 15006 >$T/start 2>&1; then
	pass permissive_started
else
	fail permissive_started "$(tail -n 1 $T/start)"
fi
plain_server() {	# ARGS...: mi-b's pinet tcp-server 8080 ARGS, as SRV
	ip netns exec mi-b "$BUILD/pinet" tcp-server 8080 --timeout 8000 "$@" >$T/srv 2>&1 &
	SRV=$!
	wait_tcp_listen mi-b 8080 >/dev/null
}
plain_server --echo
out=$(in_ns mi-a "$BUILD/pinet" tcp-connect --timeout 8000 $B 8080 --send 1000 --expect-echo 2>&1)
wait $SRV
expect_eq permissive_client_first "$(grep -o '^done sent 1000 received 1000' <<<"$out") $(awk '/^accept/ {print $2}' $T/srv)" "done sent 1000 received 1000 $A"
plain_server --send 3000
out=$(in_ns mi-a "$BUILD/pinet" tcp-connect --timeout 8000 $B 8080 --wait-eof 2>&1)
wait $SRV
expect_eq permissive_server_first "$(sed -n 2p <<<"$out") $(awk '/^accept/ {print $2}' $T/srv)" "eof received 3000 $A"
plain_server --sink --send 5000
out=$(in_ns mi-a "$BUILD/pinet" tcp-connect --timeout 8000 $B 8080 --send 0 2>&1)
wait $SRV
expect_eq permissive_client_end_first "$(grep -o '^done sent 0 received 5000' <<<"$out") $(awk '/^accept/ {print $2}' $T/srv)" "done sent 0 received 5000 $A"
expect_eq permissive_said "$(grep -c '^plaintext (permissive, the client silent)' $T/mi-p.log) $(grep -c "^plaintext (permissive, the client's end first)" $T/mi-p.log)" "1 1"
# A TLS client whose hello comes late (a pod held by its CPU quota, a
# loaded machine) is still a TLS client: a client is taken for a silent
# plaintext one after --permissive-wait (1 s by default). Before, 300 ms:
# a hello 500 ms late went to mi-b as plaintext and the handshake failed
# (the kernel lab's guests met it). 400 ms late: past the old wait, and
# 600 ms inside the new one for the guest's scheduling (500 left too
# little for three emulated guests on two cores, 2026-12-06).
server_bg 8080
tlsc_from mi-a --cert $T/ca/$A/cert.pem --key $T/ca/$A/key.pem --send 1000 --hello-delay 400 >$T/cli 2>&1
wait $SRV
check permissive_late_hello_terminated sh -c "grep -q '^ok verified spiffe://mi.test/ns/mi/pod/mi-b bytes-sent 1000 bytes-received 1000 ' $T/cli || { tail -n 3 $T/cli; false; }"
# A TLS client whose handshake is slow (its second flight 1.5 s after the
# server's first): the handshake has --connect-timeout (5 s) from the
# accept, as in strict mode, not what was left of the permissive wait
# (before: reset at 1 s, "tls handshake timeout"; found by a review)
server_bg 8080
tlsc_from mi-a --cert $T/ca/$A/cert.pem --key $T/ca/$A/key.pem --send 1000 --flight-delay 1500 >$T/cli 2>&1
wait $SRV
check permissive_slow_handshake_terminated sh -c "grep -q '^ok verified spiffe://mi.test/ns/mi/pod/mi-b bytes-sent 1000 bytes-received 1000 ' $T/cli || { tail -n 3 $T/cli; false; }"

# 7. Done connections leave the flow tables
check flows_gone inbound_flows_gone $X

# 8. Desired state: export writes the inbound rule ("proxy_inbound"),
#    export | apply changes nothing, and a node that lost the rule gets it
#    back from the document
pi -N $X export >$T/state.json 2>&1
inbound_exported() {
	jq -e '.pods["mi-b"].proxy_inbound == {"by": "mi-p", "port": 15006, "match": "tcp", "dports": [8080]}
		and .pods["mi-d"].proxy.by == "mi-q" and (.pods["mi-b"] | has("proxy") | not)' $T/state.json >/dev/null ||
		{ echo "export: $(jq -c '.pods' $T/state.json)"; return 1; }
}
check export_inbound inbound_exported
out=$(pi -N $X apply -f $T/state.json 2>&1); rc=$?
expect_eq export_apply_noop "$rc:$out" "0:"
restored() {
	pi -N $X proxy del mi-p --for mi-b --inbound >/dev/null &&
	[ "$(pi -N $X -j apply -f $T/state.json --dry-run | jq -c '[.changes[] | select(.pod == "mi-b") | [.change, .proxy, .direction, .port]]')" = '[["proxy-add","mi-p","inbound",15006]]' ] &&
	pi -N $X apply -f $T/state.json >/dev/null && listed &&
	[ "$(pi -N $X export | jq -c .pods)" = "$(jq -c .pods $T/state.json)" ] ||
		{ echo "after apply: $(pi -N $X -j proxy list)"; return 1; }
}
check apply_restores_inbound restored
# still_terminated NAME: mi-a's TLS connection to mi-b still terminated
# for mi-b (a check named NAME)
still_terminated() {
	server_bg 8080
	tlsc_from mi-a --cert $T/ca/$A/cert.pem --key $T/ca/$A/key.pem --send 1000 >$T/cli 2>&1
	wait $SRV
	check $1 grep -q "^ok verified spiffe://mi.test/ns/mi/pod/mi-b bytes-sent 1000 bytes-received 1000 " $T/cli
}
still_terminated terminated_after_apply
refuse_udp() {
	jq '.pods["mi-b"].proxy_inbound.match = "udp"' $T/state.json >$T/bad.json
	! pi -N $X apply -f $T/bad.json 2>$T/err && grep -q 'proxy_inbound.match' $T/err &&
	jq '.pods["mi-b"].proxy_inbound.dst = "10.0.0.0/8"' $T/state.json >$T/bad.json &&
	! pi -N $X apply -f $T/bad.json 2>/dev/null &&
	[ "$(pi -N $X export | jq -c .pods)" = "$(jq -c .pods $T/state.json)" ]
}
check apply_refuses_bad_inbound refuse_udp

# 9. Rules made and removed at the same time by separate commands (the
#    node's lock orders them): each lands whole, each goes whole, the
#    proxy's grant and the other rules stay
concurrent_rules() {
	local pids=() p rc=0
	for p in mi-a mi-c; do
		pi -N $X proxy add mi-p --port 15006 --for $p --inbound --match tcp dport 7000 >/dev/null &
		pids+=($!)
	done
	pi -N $X proxy add mi-p --port 15001 --for mi-b --match tcp dport 7001 >/dev/null &
	pids+=($!)
	for p in "${pids[@]}"; do wait $p || rc=1; done
	[ $rc = 0 ] && [ "$(pi -N $X -j proxy list | jq -c '[.[] | select(.proxy == "mi-p") | "\(.pod):\(.direction)"] | sort')" = \
		'["mi-a:inbound","mi-b:inbound","mi-b:outbound","mi-c:inbound"]' ] ||
		{ echo "after the adds: $(pi -N $X -j proxy list | jq -c '[.[] | [.pod, .direction]]')"; return 1; }
	pids=()
	for p in mi-a mi-c; do
		pi -N $X proxy del mi-p --for $p --inbound >/dev/null &
		pids+=($!)
	done
	pi -N $X proxy del mi-p --for mi-b --outbound >/dev/null &
	pids+=($!)
	for p in "${pids[@]}"; do wait $p || rc=1; done
	[ $rc = 0 ] && [ "$(pi -N $X -j proxy list | jq -c '[.[] | select(.proxy == "mi-p") | "\(.pod):\(.direction)"]')" = '["mi-b:inbound"]' ] &&
	[ "$(pi -N $X -j inject list | jq -c '[.[] | select(.injector == "mi-p") | .as]')" = '["mi-b"]' ] ||
		{ echo "after the dels: $(pi -N $X -j proxy list | jq -c '[.[] | [.pod, .direction]]') grants $(pi -N $X -j inject list | jq -c .)"; return 1; }
}
check concurrent_rules concurrent_rules
still_terminated terminated_after_concurrent_rules

# 10. proxy del: the pod is reached directly again, plaintext
check inbound_del pi -N $X proxy del mi-p --for mi-b --inbound
server_bg 8080
plain_out=$(in_ns mi-c "$BUILD/pinet" tcp-connect --timeout 5000 $B 8080 --send 1000 2>&1)
wait $SRV
check direct_after_del grep -q "^done sent 1000 received 1000" <<<"$plain_out"
expect_eq direct_after_del_address "$(awk '/^accept/ {print $2}' $T/srv)" $C
check nothing_left bash -c "[ \"\$($PI -N $X -j proxy list | jq '[.[] | select(.direction == \"inbound\")] | length')\" = 0 ]"
