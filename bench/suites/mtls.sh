# SPDX-License-Identifier: GPL-2.0
# Suite "mtls" (issue 22): what TLS origination costs. Single-stream TCP
# throughput and connection set-up time of a pod's plaintext connections
# relayed over mutual TLS 1.3 by podinject-proxy --tls-dir, against the
# same proxy in plaintext, against HAProxy originating TLS, and against the
# direct connection (the limit):
#
#   pb-mlc (10.244.0.10) --capture--> pb-mlp (podinject-proxy :15001, plain)
#   pb-mlt (10.244.0.20) --capture--> pb-mlq (podinject-proxy :15003,
#                                      | --tls-dir: pb-mlt's certificate)
#   pb-mlh (10.244.0.14) --capture--> pb-mlx (haproxy :15002, transparent,
#                                      | usesrc clientip, ssl crt pb-mlh's)
#                                      v upstreams from the client's address,
#                                        injected into the client's egress
#   pb-mls (10.244.0.11): pinet sink / pktload accept (plaintext),
#                         tlsd (wants a client certificate whose IP SAN is
#                         the caller's address)
#   pb-mld (10.244.0.13) --direct----> pb-mls (plaintext, no proxy)
#
# Both ends (issue 22's comparison: HAProxy originating *and* terminating):
#
#   pb-mlu (10.244.0.18) --capture--> pb-mlq (origination, as above)
#        --TLS--> pb-mlw (10.244.0.16) captured inbound to pb-mlr
#        (podinject-proxy --inbound :15006, pb-mlw's certificate) --plain,
#        from pb-mlu's address--> pb-mlw's server          (variant mtls2)
#   pb-mlh --capture--> pb-mlx (HAProxy, as above)
#        --TLS--> pb-mlz (10.244.0.19) captured inbound to pb-mly (HAProxy
#        :15009, bind transparent ssl crt verify required; source usesrc
#        clientip) --plain--> pb-mlz's server              (variant haproxy2)
#
# The same with --tls-resume at both ends (a client's next connection to
# the same destination resumes its TLS 1.3 session: a new ECDHE, no
# certificates), set-up time only:
#
#   pb-mla (10.244.0.25) --capture--> pb-mlb (:15010, --tls-resume)
#        --TLS--> pb-mle (10.244.0.27) captured inbound to pb-mlf
#        (:15011, --inbound --tls-resume) --plain--> pb-mle's server
#                                                          (variant mtls2r)
#
# Where the kernel has kTLS (the lab's kernels), the same origination
# with the records in user space beside it (variant mtls_user):
#
#   pb-mlv (10.244.0.23) --capture--> pb-mlk (podinject-proxy :15004,
#                                      --tls-dir --no-ktls) --> tlsd
#
# A client that speaks TLS itself, no proxy (set-up time only: the floor
# of a mutual TLS 1.3 handshake between two pods on this machine):
#
#   pb-mld (tlsc, its own certificate) --direct--> pb-mls (tlsd)
#                                      (variants direct_tls; direct_tls_r
#                                      resuming each time)
#
# A client and its proxy are distinct pods per variant, all on one node
# with one datapath.

ML_N=$PB_PREFIX-mln
ML_S=10.244.0.11
ML_HAPROXY=$(command -v haproxy || true)
ML_PKI=$ROOT/scripts/mtls-pki.sh
ML_BYTES=${PB_MTLS_BYTES:-$((256 << 20))}	# one connection's transfer (whole MiB)
ML_CONNS=${PB_MTLS_CONNS:-200}		# sequential connections per sample
ML_IDLE=${PB_MTLS_IDLE:-1000}		# idle connections for the memory figure
ML_PIDS=()

ml_wait_listen() {	# ml_wait_listen NETNS PORT: up to 5 s
	for _ in $(seq 50); do
		ip netns exec "$1" ss -Hltn "sport = :$2" | grep -q . && return 0
		sleep 0.1
	done
	return 1
}

# ml_proxy NETNS PORT [TLS ARGS...]: podinject-proxy in NETNS, its pid in
# ML_PIDS (the subshell execs ip netns exec, which execs the proxy: one
# pid). --client-max above ML_IDLE: the memory figure opens that many from
# one client (the default cap is 512).
ml_proxy() {
	local ns=$1 port=$2 out=$SUITE_DIR/proxy-$1
	shift 2
	(ulimit -n 16384 && exec ip netns exec "$ns" "$BUILD/podinject-proxy" \
		--client-max $((ML_IDLE + 100)) "$@" "$port") \
		>"$out" 2>"$out.log" </dev/null &
	ML_PIDS+=($!)
	for _ in $(seq 50); do
		grep -q ready "$out" && return 0
		sleep 0.1
	done
	return 1
}

# ml_pods NAME:N...: pods pb-NAME with address 10.244.0.N on the node
ml_pods() {
	local p
	for p in "$@"; do
		"$PI" -N "$ML_N" pod add "$PB_PREFIX-${p%:*}" --ip "10.244.0.${p#*:}" >/dev/null ||
			return 1
	done
}

mtls_setup() {
	PB_NODES+=("$ML_N")
	"$PI" -N "$ML_N" node up >/dev/null || return 1
	ip netns exec "$ML_N" sysctl -qw net.ipv4.ip_forward=0
	ml_pods mlc:10 mls:11 mlp:12 mld:13 mlt:20 mlq:22 || return 1
	"$PI" -N "$ML_N" proxy add $PB_PREFIX-mlp --port 15001 --for $PB_PREFIX-mlc \
		--match tcp >/dev/null &&
	"$PI" -N "$ML_N" proxy add $PB_PREFIX-mlq --port 15003 --for $PB_PREFIX-mlt \
		--match tcp >/dev/null || return 1
	# The PKI of t_mtls: a node CA, the server's and the clients'
	# certificates (IP SAN = the pod's address, which tlsd checks)
	ML_T=$SUITE_DIR/pki
	{
		"$ML_PKI" ca "$ML_T" ml.bench &&
		"$ML_PKI" issue "$ML_T" ml mls $ML_S &&
		"$ML_PKI" issue "$ML_T" ml mlt 10.244.0.20 &&
		"$ML_PKI" issue "$ML_T" ml mlh 10.244.0.14 &&
		"$ML_PKI" issue "$ML_T" ml mld 10.244.0.13
	} >/dev/null || return 1
	ml_proxy $PB_PREFIX-mlp 15001 &&
	ml_proxy $PB_PREFIX-mlq 15003 --tls-dir "$ML_T" --tls-ca "$ML_T/ca.pem" \
		--tls-trust-domain ml.bench
}

# Both ends podinject-proxy (mtls2): pb-mlu's connections originated by
# pb-mlq as above, terminated for pb-mlw by pb-mlr (--inbound), whose
# plaintext leg reaches pb-mlw from pb-mlu's address.
mtls2_setup() {
	ml_pods mlu:18 mlw:16 mlr:17 || return 1
	"$PI" -N "$ML_N" proxy add $PB_PREFIX-mlq --port 15003 --for $PB_PREFIX-mlu \
		--match tcp >/dev/null &&
	"$PI" -N "$ML_N" proxy add $PB_PREFIX-mlr --port 15006 --for $PB_PREFIX-mlw \
		--inbound --match tcp dport 5201,8443 >/dev/null || return 1
	{
		"$ML_PKI" issue "$ML_T" ml mlu 10.244.0.18 &&
		"$ML_PKI" issue "$ML_T" ml mlw 10.244.0.16
	} >/dev/null || return 1
	ml_proxy $PB_PREFIX-mlr 15006 --inbound --tls-dir "$ML_T" \
		--tls-ca "$ML_T/ca.pem" --tls-trust-domain ml.bench
}

# Both ends podinject-proxy resuming sessions (mtls2r): pods, rules and
# proxies of their own, so that mtls2 stays full handshakes.
mtls2r_setup() {
	local tls=(--tls-dir "$ML_T" --tls-ca "$ML_T/ca.pem" --tls-trust-domain ml.bench
		--tls-resume 300)
	ml_pods mla:25 mlb:26 mle:27 mlf:28 || return 1
	"$PI" -N "$ML_N" proxy add $PB_PREFIX-mlb --port 15010 --for $PB_PREFIX-mla \
		--match tcp >/dev/null &&
	"$PI" -N "$ML_N" proxy add $PB_PREFIX-mlf --port 15011 --for $PB_PREFIX-mle \
		--inbound --match tcp dport 8443 >/dev/null || return 1
	{
		"$ML_PKI" issue "$ML_T" ml mla 10.244.0.25 &&
		"$ML_PKI" issue "$ML_T" ml mle 10.244.0.27
	} >/dev/null || return 1
	ml_proxy $PB_PREFIX-mlb 15010 "${tls[@]}" &&
	ml_proxy $PB_PREFIX-mlf 15011 -v --inbound "${tls[@]}"
}

# User-space TLS beside kTLS (mtls_user): pb-mlv's connections originated
# by pb-mlk with --no-ktls, only where pb-mlq says the kernel has kTLS
# (elsewhere mtls is already user space): 2 then, 1 for a failure.
mtls_user_setup() {
	grep -q '^podinject-proxy: tls: ktls available ' \
		"$SUITE_DIR/proxy-$PB_PREFIX-mlq.log" || return 2
	ml_pods mlv:23 mlk:24 &&
	"$PI" -N "$ML_N" proxy add $PB_PREFIX-mlk --port 15004 --for $PB_PREFIX-mlv \
		--match tcp >/dev/null &&
	"$ML_PKI" issue "$ML_T" ml mlv 10.244.0.23 >/dev/null &&
	ml_proxy $PB_PREFIX-mlk 15004 --no-ktls --tls-dir "$ML_T" \
		--tls-ca "$ML_T/ca.pem" --tls-trust-domain ml.bench || return 1
	ML_KPID=${ML_PIDS[-1]}
}

# The head of the suite's HAProxy configurations: one thread, as
# podinject-proxy is one; TCP mode.
ml_haproxy_head() {
	printf '%s\n' global "	nbthread 1" "	maxconn 8192" defaults "	mode tcp" \
		"	timeout connect 2s" "	timeout client 60s" "	timeout server 60s"
}

# HAProxy as proxy.sh sets it up (bind transparent, usesrc clientip, server
# 0.0.0.0: the original destination), its upstream a TLS client with
# pb-mlh's certificate that verifies the server's chain against the CA.
# HAProxy has no name to check the server's certificate against (the
# server is "0.0.0.0"; verifyhost wants a name): it checks the chain only,
# podinject-proxy also the IP SAN. One thread, as podinject-proxy is one.
haproxy_mtls_setup() {
	[ -n "$ML_HAPROXY" ] || return 1
	ml_pods mlh:14 mlx:15 &&
	"$PI" -N "$ML_N" proxy add $PB_PREFIX-mlx --port 15002 --for $PB_PREFIX-mlh \
		--match tcp >/dev/null || return 1
	# crt wants the certificate and its key in one file
	cat "$ML_T/10.244.0.14/cert.pem" "$ML_T/10.244.0.14/key.pem" >"$ML_T/mlh.pem"
	ML_HCFG=$SUITE_DIR/haproxy.cfg
	{ ml_haproxy_head; cat; } >"$ML_HCFG" <<-EOF
	frontend captured
		bind 0.0.0.0:15002 transparent
		default_backend original_destination
	backend original_destination
		source 0.0.0.0 usesrc clientip
		server original 0.0.0.0 ssl crt $ML_T/mlh.pem ca-file $ML_T/ca.pem verify required ssl-min-ver TLSv1.3
	EOF
	ip netns exec $PB_PREFIX-mlx "$ML_HAPROXY" -db -f "$ML_HCFG" >"$ML_HCFG.log" 2>&1 &
	ML_HPID=$!
	ml_wait_listen $PB_PREFIX-mlx 15002
}

# Both ends HAProxy (haproxy2): pb-mlh's connections originated by pb-mlx
# as for haproxy_mtls, terminated for pb-mlz by HAProxy in pb-mly, bound
# transparent to the captured connections (an inbound rule), checking the
# client's certificate against the CA, its plaintext leg from the client's
# address to the original destination.
haproxy2_setup() {
	local cfg=$SUITE_DIR/haproxy2.cfg
	ml_pods mlz:19 mly:21 &&
	"$PI" -N "$ML_N" proxy add $PB_PREFIX-mly --port 15009 --for $PB_PREFIX-mlz \
		--inbound --match tcp dport 5201,8443 >/dev/null || return 1
	"$ML_PKI" issue "$ML_T" ml mlz 10.244.0.19 >/dev/null || return 1
	cat "$ML_T/10.244.0.19/cert.pem" "$ML_T/10.244.0.19/key.pem" >"$ML_T/mlz.pem"
	{ ml_haproxy_head; cat; } >"$cfg" <<-EOF
	frontend terminated
		bind 0.0.0.0:15009 transparent ssl crt $ML_T/mlz.pem ca-file $ML_T/ca.pem verify required ssl-min-ver TLSv1.3
		log stdout format raw local0
		log-format "tls-in resumed %[ssl_fc_is_resumed]"
		default_backend protected
	backend protected
		source 0.0.0.0 usesrc clientip
		server original 0.0.0.0
	EOF
	ip netns exec $PB_PREFIX-mly "$ML_HAPROXY" -db -f "$cfg" >"$cfg.log" 2>&1 &
	ML_H2PID=$!
	ml_wait_listen $PB_PREFIX-mly 15009
}

ml_has() {	# ml_has VARIANT: it is in this run's $variants
	case " $variants " in *" $1 "*) return 0 ;; esac
	return 1
}

ml_client() {	# the client pod of a variant
	case $1 in
	plain) echo $PB_PREFIX-mlc ;;
	mtls) echo $PB_PREFIX-mlt ;;
	mtls2) echo $PB_PREFIX-mlu ;;
	mtls2r) echo $PB_PREFIX-mla ;;
	mtls_user) echo $PB_PREFIX-mlv ;;
	haproxy_mtls|haproxy2) echo $PB_PREFIX-mlh ;;
	*) echo $PB_PREFIX-mld ;;
	esac
}

ml_server_pod() {	# the server pod of a variant
	case $1 in
	mtls2) echo $PB_PREFIX-mlw ;;
	mtls2r) echo $PB_PREFIX-mle ;;
	haproxy2) echo $PB_PREFIX-mlz ;;
	*) echo $PB_PREFIX-mls ;;
	esac
}

ml_server_addr() {	# and its address
	case $1 in
	mtls2) echo 10.244.0.16 ;;
	mtls2r) echo 10.244.0.27 ;;
	haproxy2) echo 10.244.0.19 ;;
	*) echo $ML_S ;;
	esac
}

# ml_server VARIANT PORT SINK|CLOSE COUNT: the server a variant talks to,
# in the background (ML_SRV), listening when it returns. SINK: read to
# the end, then close (throughput); CLOSE: close at once, COUNT times
# (set-up). TLS variants meet tlsd, the others a plaintext server. Each
# branch execs, so that ML_SRV is the server and not a subshell that a
# kill would leave it running behind.
ml_server() {
	local v=$1 port=$2 how=$3 n=$4 ns
	ns=$(ml_server_pod "$v")
	case $v:$how in
	*mtls:SINK|mtls_user:SINK)
		exec ip netns exec $ns taskset -c "$PB_CPU_RECV" "$BUILD/tlsd" "$port" \
			--cert "$ML_T/$ML_S/cert.pem" --key "$ML_T/$ML_S/key.pem" \
			--ca "$ML_T/ca.pem" --timeout 120000 ;;
	*mtls:CLOSE|mtls_user:CLOSE|direct_tls:CLOSE|direct_tls_r:CLOSE)
		# --send 0: close_notify right after the handshake, the
		# TLS form of closing at once
		exec ip netns exec $ns taskset -c "$PB_CPU_RECV" "$BUILD/tlsd" "$port" \
			--cert "$ML_T/$ML_S/cert.pem" --key "$ML_T/$ML_S/key.pem" \
			--ca "$ML_T/ca.pem" --send 0 --count "$n" --timeout 10000 \
			$([ "$v" = direct_tls_r ] && echo --resume 300) ;;
	*:SINK)
		exec ip netns exec $ns taskset -c "$PB_CPU_RECV" "$BUILD/pinet" tcp-server \
			"$port" --sink --count 1 --timeout 120000 ;;
	*:CLOSE)
		exec taskset -c "$PB_CPU_RECV" "$PKTLOAD" accept -n $ns --port "$port" \
			--duration 60 ;;
	esac >"$SUITE_DIR/srv" 2>&1 &
	ML_SRV=$!
	ml_wait_listen $ns "$port"
}

ml_server_done() {	# stops (CLOSE: pktload runs for its duration) or
			# waits for (SINK: its one connection) the server
	[ "$1" = CLOSE ] && kill "$ML_SRV" 2>/dev/null
	wait "$ML_SRV" 2>/dev/null
}

# ml_throughput VARIANT: Gbit/s of one connection carrying ML_BYTES to a
# sink, from before the client starts to the server's exit once it has
# read them all (a TLS variant's handshake is in it: milliseconds against
# seconds of transfer). The sender is dd from /dev/zero into bash's
# /dev/tcp: pinet tcp-connect --send makes its pattern byte by byte (a
# 64-bit modulo each) and its checksum, about 0.5 Gbit/s of one CPU here,
# which would be the figure of every variant. The servers still hash what
# they read (pinet: FNV-1a; tlsd: SHA-256 and FNV-1a, after decrypting):
# the count of bytes they report is the check that all of it arrived.
ml_throughput() {
	local c=$(ml_client "$1") dst=$(ml_server_addr "$1") t0 t1 got
	ml_server "$1" 5201 SINK 1 || { ml_server_done SINK; return; }
	t0=$(date +%s%N)
	ip netns exec "$c" taskset -c "$PB_CPU_SEND" timeout 120 bash -c \
		"exec 3<>/dev/tcp/$dst/5201 && dd if=/dev/zero bs=1M count=$((ML_BYTES >> 20)) status=none >&3" \
		2>/dev/null
	ml_server_done SINK
	t1=$(date +%s%N)
	# the whole transfer, or no value and what the server said
	got=$(awk '$1 == "conn-done" || $1 == "accept" { for (i = 1; i < NF; i++) if ($i == "bytes") print $(i + 1) }' "$SUITE_DIR/srv")
	if [ "$got" != "$ML_BYTES" ]; then
		echo "   $1: the server read '${got:-nothing}' of $ML_BYTES bytes: $(tail -n 1 "$SUITE_DIR/srv")" >&2
		return
	fi
	# what tlsd agreed on with each TLS variant: "the same ciphers"
	awk -v v="$1" '$1 == "accept" { for (i = 1; i < NF; i++) if ($i == "cipher") print v, $(i + 1) }' \
		"$SUITE_DIR/srv" >>"$SUITE_DIR/ciphers"
	awk -v b="$ML_BYTES" -v ns=$((t1 - t0)) 'BEGIN { printf "%.3f", b * 8 / ns }'
}

# ml_streams VARIANT N: Gbit/s of N TCP streams at once (iperf3 -P N,
# PB_TCP_DURATION seconds, the first omitted), received by an iperf3
# server in the variant's server pod. Only the variants whose server end
# is plaintext (plain, direct, and the both-ends mtls2 and haproxy2): tlsd
# serves one connection at a time, and iperf3 speaks no TLS.
ml_streams() {
	local v=$1 n=$2 c s dst out srv
	case $v in plain|direct|mtls2|haproxy2) ;; *) return ;; esac
	c=$(ml_client "$v")
	s=$(ml_server_pod "$v")
	dst=$(ml_server_addr "$v")
	ip netns exec "$s" taskset -c "$PB_CPU_RECV" \
		timeout $((PB_TCP_DURATION + 30)) iperf3 -s -1 -p 5201 >/dev/null 2>&1 &
	srv=$!
	if ! ml_wait_listen "$s" 5201; then
		kill $srv 2>/dev/null
		wait $srv 2>/dev/null
		return
	fi
	out=$(ip netns exec "$c" taskset -c "$PB_CPU_SEND" \
		timeout $((PB_TCP_DURATION + 25)) iperf3 -c "$dst" -p 5201 -P "$n" \
		-t "$PB_TCP_DURATION" -O 1 -J 2>/dev/null)
	kill $srv 2>/dev/null
	wait $srv 2>/dev/null
	jq -r '.end.sum_received.bits_per_second // empty' <<<"$out" 2>/dev/null |
		awk '{ printf "%.3f", $1 / 1e9 }'
}

# ml_setup_time VARIANT: "FAILED P50 P99 CPS MAX" of ML_CONNS connections one
# after the other (connect to the server's close, timed inside pinet);
# the times only if none failed
ml_setup_time() {
	local c=$(ml_client "$1") out
	ml_server "$1" 8443 CLOSE "$ML_CONNS" || { ml_server_done CLOSE; return; }
	case $1 in
	direct_tls*)
		# tlsc speaks TLS itself, with pb-mld's certificate, and
		# prints what pinet tcp-conn-loop --latency does
		out=$(ip netns exec "$c" taskset -c "$PB_CPU_SEND" "$BUILD/tlsc" \
			"$(ml_server_addr "$1")" 8443 --cert "$ML_T/10.244.0.13/cert.pem" \
			--key "$ML_T/10.244.0.13/key.pem" --ca "$ML_T/ca.pem" --timeout 5000 \
			--count "$ML_CONNS" $([ "$1" = direct_tls_r ] && echo --resume) 2>/dev/null) ;;
	*)
		out=$(ip netns exec "$c" taskset -c "$PB_CPU_SEND" "$BUILD/pinet" tcp-conn-loop \
			--latency --timeout 5000 "$(ml_server_addr "$1")" 8443 "$ML_CONNS" 30 2>/dev/null) ;;
	esac
	ml_server_done CLOSE
	awk -v n="$ML_CONNS" '$1 == "conns" { f = $4; ok = $2 == n && f == 0; cps = $8 }
	     $1 == "latency_us" && ok { t = $3 " " $5 " " cps " " $7 }
	     END { print f, t }' <<<"$out"
}

# ml_idle_rss VARIANT PID: the proxy's resident memory growth per
# connection (KiB) with ML_IDLE idle connections of the variant's client
# open through it to a server that holds them (HAProxy terminating TLS
# with client certificates, for the TLS variants: tlsd serves one at a
# time). Otherwise "- HOW-MANY-CAME-UP".
ml_idle_rss() {
	local v=$1 pid=$2 c=$(ml_client "$1") r0 r1 n hold up
	r0=$(awk '/^VmRSS/ { print $2 }' /proc/"$pid"/status 2>/dev/null)
	[ -n "$r0" ] || return
	hold=$SUITE_DIR/hold
	rm -f "$hold"
	# a bash in the client pod that opens them all, says so ($hold.up) and
	# holds them until $hold appears
	ip netns exec "$c" bash -c "ulimit -n 4096
		for i in \$(seq $ML_IDLE); do exec {fd}<>/dev/tcp/$ML_S/8500 || exit 1; done
		touch $hold.up
		while [ ! -e $hold ]; do sleep 0.1; done" 2>/dev/null &
	local holder=$!
	for _ in $(seq 300); do
		[ -e "$hold.up" ] && break
		kill -0 $holder 2>/dev/null || break
		sleep 0.1
	done
	# the TLS handshakes finish after the client's connect: wait for the
	# upstream connections in the server's namespace (1 000 handshakes,
	# a few ms of CPU each on both ends, on a machine shared with others)
	for _ in $(seq 300); do
		n=$(ip netns exec $PB_PREFIX-mls ss -Htn state established "sport = :8500" | wc -l)
		[ "$n" -ge "$ML_IDLE" ] && break
		sleep 0.1
	done
	sleep 0.5
	up=$([ -e "$hold.up" ] && echo 1)
	r1=$(awk '/^VmRSS/ { print $2 }' /proc/"$pid"/status 2>/dev/null)
	touch "$hold"
	wait $holder 2>/dev/null
	rm -f "$hold" "$hold.up"
	if [ -z "$up" ] || [ "$n" -lt "$ML_IDLE" ] || [ -z "$r1" ]; then
		echo "- ${up:+all $ML_IDLE opened by the client, }$n established at the server"
		return
	fi
	awk -v a="$r0" -v b="$r1" -v n="$ML_IDLE" 'BEGIN { printf "%.2f", (b - a) / n }'
}

# The holding server of ml_idle_rss: HAProxy in pb-mls on :8500,
# terminating TLS (with the client certificate check) for the TLS
# variants and plain TCP otherwise, keeping every connection open while it
# waits for data that never comes (inspect-delay), no backend ever used.
ml_holder_start() {	# ml_holder_start tls|plain
	local cfg=$SUITE_DIR/holder.cfg bind="bind $ML_S:8500"
	cat "$ML_T/$ML_S/cert.pem" "$ML_T/$ML_S/key.pem" >"$ML_T/mls.pem"
	[ "$1" = tls ] && bind="$bind ssl crt $ML_T/mls.pem ca-file $ML_T/ca.pem verify required"
	cat >"$cfg" <<-EOF
	global
		nbthread 1
		maxconn 8192
	defaults
		mode tcp
		timeout client 120s
		timeout server 120s
		timeout connect 2s
	frontend hold
		$bind
		tcp-request inspect-delay 120s
		tcp-request content accept if { req.len gt 0 }
		default_backend nowhere
	backend nowhere
	EOF
	ip netns exec $PB_PREFIX-mls "$ML_HAPROXY" -db -f "$cfg" >"$cfg.log" 2>&1 &
	ML_HOLDER=$!
	ml_wait_listen $PB_PREFIX-mls 8500
}

ml_holder_stop() {
	kill "$ML_HOLDER" 2>/dev/null
	wait "$ML_HOLDER" 2>/dev/null
}

suite_mtls() {
	local rep v variants="plain mtls direct" r fl p50 p99 cps mx p mode
	local -A base
	suite_begin mtls "mTLS: throughput and connection set-up through podinject-proxy --tls-dir vs plaintext, HAProxy TLS and direct"
	if [ ! -x "$BUILD/podinject-proxy" ] || [ ! -x "$BUILD/tlsd" ]; then
		skip all "$BUILD/podinject-proxy or $BUILD/tlsd does not exist in this build"
		suite_end
		return
	fi
	if ! command -v openssl >/dev/null; then
		skip all "no openssl (make deps): no certificates"
		suite_end
		return
	fi
	if ! mtls_setup; then
		skip all "could not set up (node, pods, proxy add, certificates, or a podinject-proxy not ready: $(tail -qn 1 "$SUITE_DIR"/proxy-*.log 2>/dev/null | head -n 1))"
		kill "${ML_PIDS[@]}" 2>/dev/null
		wait "${ML_PIDS[@]}" 2>/dev/null
		suite_end
		return
	fi
	if haproxy_mtls_setup; then
		variants="plain mtls haproxy_mtls direct"
		meta haproxy "\"$("$ML_HAPROXY" -v | head -n 1)\""
	elif [ -z "$ML_HAPROXY" ]; then
		skip haproxy_mtls "haproxy is not installed (make deps installs Debian's)"
	else
		skip haproxy_mtls "could not set HAProxy up (pod add, proxy add, or no listener on :15002 within 5 s: $(tail -n 1 "$ML_HCFG.log" 2>/dev/null))"
	fi
	if mtls2_setup; then
		variants="$variants mtls2"
	else
		skip mtls2 "could not set up podinject-proxy at both ends (pod add, proxy add --inbound, certificates, or the --inbound proxy not ready: $(tail -n 1 "$SUITE_DIR/proxy-$PB_PREFIX-mlr.log" 2>/dev/null))"
	fi
	if ml_has mtls2; then
		if mtls2r_setup; then
			variants="$variants mtls2r"
		else
			skip mtls2r "could not set up podinject-proxy --tls-resume at both ends: $(tail -qn 1 "$SUITE_DIR/proxy-$PB_PREFIX-mlb.log" "$SUITE_DIR/proxy-$PB_PREFIX-mlf.log" 2>/dev/null | head -n 1)"
		fi
	fi
	if ! ml_has haproxy_mtls; then
		skip haproxy2 "no HAProxy originating (haproxy_mtls)"
	elif haproxy2_setup; then
		variants="$variants haproxy2"
	else
		skip haproxy2 "could not set HAProxy up at both ends (pod add, proxy add --inbound, or no listener on :15009 within 5 s: $(tail -n 1 "$SUITE_DIR/haproxy2.cfg.log" 2>/dev/null))"
	fi
	mtls_user_setup
	case $? in
	0) variants="$variants mtls_user" ;;
	2) skip mtls_user "no kTLS in this kernel: mtls is already user-space TLS (the lab's kernels have kTLS)" ;;
	*) skip mtls_user "could not set up the --no-ktls proxy (pod add, proxy add, certificate, or not ready: $(tail -n 1 "$SUITE_DIR/proxy-$PB_PREFIX-mlk.log" 2>/dev/null))" ;;
	esac
	[ -x "$BUILD/tlsc" ] && variants="$variants direct_tls direct_tls_r" ||
		skip direct_tls "$BUILD/tlsc does not exist in this build"
	meta ktls "\"$(grep -m 1 -o 'ktls [a-z]*' "$SUITE_DIR/proxy-$PB_PREFIX-mlq.log" || echo unknown)\""
	meta ktls_mode "\"$(grep -m 1 '^podinject-proxy: tls: ktls' "$SUITE_DIR/proxy-$PB_PREFIX-mlq.log" | sed 's/^podinject-proxy: tls: //; s/"//g' || echo unknown)\""
	meta cpus_used "\"client CPU $PB_CPU_SEND, server CPU $PB_CPU_RECV, proxies not pinned\""
	meta transfer_bytes "$ML_BYTES"
	meta sequential_connections "$ML_CONNS"
	note "plain = pb-mlc captured to podinject-proxy (plaintext) to a plaintext server; mtls = pb-mlt captured to podinject-proxy --tls-dir (TLS 1.3 with pb-mlt's certificate, the server's chain and IP SAN verified) to tlsd, which verifies pb-mlt's certificate and its IP SAN against the caller's address; haproxy_mtls = pb-mlh captured to HAProxy (transparent, usesrc clientip, server 0.0.0.0 ssl crt verify required ssl-min-ver TLSv1.3: chain only, no name to check) to the same tlsd; mtls2 = both ends podinject-proxy: pb-mlu originated by the mtls proxy, terminated for pb-mlw by podinject-proxy --inbound (an inbound rule; the client's certificate, its IP SAN against the caller's address and the trust domain checked), plaintext to pb-mlw's server from pb-mlu's address; haproxy2 = both ends HAProxy: pb-mlh originated as haproxy_mtls, terminated for pb-mlz by HAProxy (an inbound rule; bind transparent ssl crt ca-file verify required ssl-min-ver TLSv1.3; source usesrc clientip; chain only), plaintext to pb-mlz's server; direct = pb-mld to the plaintext server, no proxy (the limit); mtls2r = both ends podinject-proxy with --tls-resume 300 (pb-mla through pb-mlb, terminated for pb-mle by pb-mlf): a client's next connection to the same destination resumes its TLS 1.3 session (a new ECDHE, no certificates sent or checked; the session's certificate checked again against the caller's address), set-up only; direct_tls = pb-mld speaking TLS 1.3 itself (tlsc --count, its own certificate) to tlsd in pb-mls, no proxy, set-up only: the floor of a mutual TLS handshake between two pods here; direct_tls_r = the same, each connection resuming the last one's session (tlsc --resume, tlsd --resume 300); mtls_user (where the kernel has kTLS, so that mtls is kTLS) = pb-mlv captured to podinject-proxy --tls-dir --no-ktls, the records sealed and opened by OpenSSL in user space, to the same tlsd"
	note "tcp_gbps: one connection carrying $ML_BYTES bytes (dd from /dev/zero) to a sink (pinet tcp-server --sink, FNV-1a of every byte; tlsd: decrypt, SHA-256 and FNV-1a of every byte), timed from before the client's start to the server's exit with all of them read (connect and handshake included); setup_p50_us/setup_p99_us/setup_max_us: $ML_CONNS connections one after the other, each timed in pinet tcp-conn-loop from connect() to the server's close (TLS: tlsd's close_notify right after the handshake, relayed as EOF); setup_added_us: that round's p50 minus plain's p50; tcp_P8_gbps: 8 streams at once (iperf3 -P 8, $PB_TCP_DURATION s, the first omitted; client CPU $PB_CPU_SEND, server CPU $PB_CPU_RECV) to a plaintext iperf3 server, for the variants whose server end is plaintext: plain, direct, and both ends mtls2 and haproxy2 (tlsd serves one connection at a time)"
	for rep in $(seq 1 "$PB_REPS"); do
		pb_alive "$ML_N" $PB_PREFIX-mlc $PB_PREFIX-mls $PB_PREFIX-mlp $PB_PREFIX-mlq \
			$PB_PREFIX-mlt $PB_PREFIX-mld || break
		for v in $variants; do
			# (a resumed handshake is a millisecond of seconds;
			# tlsc's loop only times set-ups)
			case $v in mtls2r|direct_tls*) continue ;; esac
			sample tcp_gbps Gbit/s "$v" "$rep" "$(ml_throughput "$v")"
		done
		for v in $variants; do
			case $v in plain|direct|mtls2|haproxy2) ;; *) continue ;; esac
			sample tcp_P8_gbps Gbit/s "$v" "$rep" "$(ml_streams "$v" 8)"
		done
		base=()
		for v in $variants; do
			read -r fl p50 p99 cps mx < <(ml_setup_time "$v")
			sample conns_failed count "$v" "$rep" "${fl:-}"
			sample setup_p50_us µs "$v" "$rep" "${p50:-}"
			sample setup_p99_us µs "$v" "$rep" "${p99:-}"
			sample setup_max_us µs "$v" "$rep" "${mx:-}"
			sample conns_per_s conn/s "$v" "$rep" "${cps:-}"
			base[$v]=${p50:-}
		done
		for v in mtls mtls_user haproxy_mtls mtls2 mtls2r haproxy2; do
			[ -n "${base[plain]:-}" ] && [ -n "${base[$v]:-}" ] || continue
			# (a negative difference is noise and records no value)
			sample setup_added_us µs "$v - plain" "$rep" \
				"$(awk -v a="${base[$v]}" -v b="${base[plain]}" 'BEGIN { print a - b }')"
		done
	done
	# Memory per open connection, once, after the rounds: RSS with
	# ML_IDLE idle connections against none.
	if [ -z "$ML_HAPROXY" ]; then
		skip proxy_kib_per_conn "no haproxy to hold $ML_IDLE connections open (tlsd serves one at a time)"
	else
		for v in mtls mtls_user plain haproxy_mtls; do
			ml_has $v || continue
			case $v in
			plain) p=${ML_PIDS[0]} ;;
			mtls) p=${ML_PIDS[1]} ;;
			mtls_user) p=$ML_KPID ;;
			haproxy_mtls) p=$ML_HPID ;;
			esac
			mode=tls
			[ "$v" = plain ] && mode=plain
			ml_holder_start $mode || {
				skip "proxy_kib_per_conn/$v" "the holding HAProxy in pb-mls did not listen: $(tail -n 1 "$SUITE_DIR/holder.cfg.log" 2>/dev/null)"
				ml_holder_stop
				continue
			}
			r=$(ml_idle_rss "$v" "$p")
			ml_holder_stop
			if [ -n "$r" ] && [ "${r:0:1}" != - ]; then
				sample proxy_kib_per_conn KiB "$v" 1 "$r"
			else
				skip "proxy_kib_per_conn/$v" "$ML_IDLE idle connections did not all come up through the proxy within 30 s, or its memory could not be read (${r:-no RSS})"
			fi
		done
		note "proxy_kib_per_conn: the proxy's VmRSS with $ML_IDLE idle connections of its client open (to a HAProxy in pb-mls that holds them: TLS with client certificates for mtls and haproxy_mtls) minus its VmRSS with none, divided by $ML_IDLE; measured once, after the rounds (RSS counts pages touched, not heap freed and kept)"
	fi
	# The cipher suite tlsd agreed on with each variant that reaches it,
	# all rounds: the comparison with HAProxy is for the same ciphers
	meta tls_ciphers "$(sort -u "$SUITE_DIR/ciphers" 2>/dev/null | jq -R -s -c 'split("\n") | map(select(length > 0) | split(" ")) | group_by(.[0]) | map({(.[0][0]): map(.[1])}) | add // {}')"
	# How many handshakes the terminating ends resumed, all rounds
	# together: HAProxy resumes by default, podinject-proxy with
	# --tls-resume only
	if ml_has haproxy2; then
		meta haproxy2_resumed "\"$(grep -c '^tls-in resumed 1' "$SUITE_DIR/haproxy2.cfg.log") of $(grep -c '^tls-in resumed' "$SUITE_DIR/haproxy2.cfg.log")\""
	fi
	if ml_has mtls2r; then
		meta mtls2r_resumed "\"$(grep -c '^tls-in .* resumed ktls' "$SUITE_DIR/proxy-$PB_PREFIX-mlf.log") of $(grep -c '^tls-in ' "$SUITE_DIR/proxy-$PB_PREFIX-mlf.log")\""
	fi
	ratio "mtls / plain" tcp_gbps mtls plain
	ratio "mtls / direct" tcp_gbps mtls direct
	ratio "plain / direct" tcp_gbps plain direct
	ratio "mtls / plain" setup_p50_us mtls plain
	ratio "mtls / plain" setup_p99_us mtls plain
	ratio "mtls / plain" conns_per_s mtls plain
	if ml_has haproxy_mtls; then
		ratio "mtls / haproxy_mtls" tcp_gbps mtls haproxy_mtls
		ratio "haproxy_mtls / direct" tcp_gbps haproxy_mtls direct
		ratio "mtls / haproxy_mtls" setup_p50_us mtls haproxy_mtls
		ratio "mtls / haproxy_mtls" setup_p99_us mtls haproxy_mtls
	fi
	if ml_has mtls_user; then
		ratio "mtls (kTLS) / mtls_user" tcp_gbps mtls mtls_user
		ratio "mtls_user / direct" tcp_gbps mtls_user direct
		ratio "mtls (kTLS) / mtls_user" setup_p50_us mtls mtls_user
		ratio "mtls (kTLS) / mtls_user" conns_per_s mtls mtls_user
		ml_has haproxy_mtls &&
			ratio "mtls_user / haproxy_mtls" tcp_gbps mtls_user haproxy_mtls
	fi
	if ml_has mtls2; then
		ratio "mtls2 / direct" tcp_gbps mtls2 direct
		ratio "mtls2 / mtls (the terminating end's cost)" tcp_gbps mtls2 mtls
	fi
	if ml_has haproxy2; then
		ratio "haproxy2 / direct" tcp_gbps haproxy2 direct
	fi
	if ml_has mtls2; then
		ratio "mtls2 / direct" tcp_P8_gbps mtls2 direct
	fi
	if ml_has haproxy2; then
		ratio "haproxy2 / direct" tcp_P8_gbps haproxy2 direct
	fi
	if ml_has mtls2r; then
		ratio "mtls2r / mtls2 (resumed / full handshakes)" setup_p50_us mtls2r mtls2
		ratio "mtls2r / plain" setup_p50_us mtls2r plain
		ratio "mtls2r / mtls2" conns_per_s mtls2r mtls2
	fi
	if ml_has direct_tls; then
		ratio "mtls2 / direct_tls (full handshakes)" setup_p50_us mtls2 direct_tls
		ratio "mtls2r / direct_tls_r (resumed)" setup_p50_us mtls2r direct_tls_r
		ratio "direct_tls_r / direct_tls (resumed / full)" setup_p50_us direct_tls_r direct_tls
	fi
	if ml_has mtls2r && ml_has haproxy2; then
		ratio "mtls2r / haproxy2 (both resuming)" setup_p50_us mtls2r haproxy2
		ratio "mtls2r / haproxy2 (both resuming)" conns_per_s mtls2r haproxy2
	fi
	if ml_has mtls2 && ml_has haproxy2; then
		ratio "mtls2 / haproxy2" tcp_P8_gbps mtls2 haproxy2
		ratio "mtls2 / haproxy2" tcp_gbps mtls2 haproxy2
		# (HAProxy resumes sessions, mtls2 does not: haproxy2_resumed)
		ratio "mtls2 / haproxy2" setup_p50_us mtls2 haproxy2
		ratio "mtls2 / haproxy2" setup_p99_us mtls2 haproxy2
		ratio "mtls2 / haproxy2" conns_per_s mtls2 haproxy2
	fi
	kill "${ML_PIDS[@]}" ${ML_HPID:+"$ML_HPID"} ${ML_H2PID:+"$ML_H2PID"} 2>/dev/null
	wait "${ML_PIDS[@]}" ${ML_HPID:+"$ML_HPID"} ${ML_H2PID:+"$ML_H2PID"} 2>/dev/null
	ML_PIDS=()
	ML_KPID=
	ML_HPID=
	ML_H2PID=
	suite_end
}
