# SPDX-License-Identifier: GPL-2.0
# Suite "proxy": TCP throughput and new connections/s through
# podinject-proxy and through HAProxy in transparent mode, both with
# podinject's capture and injection, against the direct connection (the
# limit):
#
#   pb-pc (10.244.0.10) --capture--> pb-pp (podinject-proxy :15001)
#                                      | upstream bound to 10.244.0.10,
#                                      v injected into pb-pc's egress
#   pb-ps (10.244.0.11, iperf3 / accept loop)
#   pb-ph (10.244.0.14) --capture--> pb-px (haproxy :15002, bind transparent,
#                                      | source 0.0.0.0 usesrc clientip,
#                                      v server 0.0.0.0: the original destination)
#   pb-pd (10.244.0.13) --direct----> pb-ps      (no proxy: the limit)
#
# All clients are pods of the same node with the same datapath; only
# pb-pc's and pb-ph's connections are captured (`podinject proxy add`).

PX_N=$PB_PREFIX-pn
PX_S=10.244.0.11
PX_HAPROXY=$(command -v haproxy || true)
PX_HPID=
# Connection-rate windows of PB_DURATION back to back per variant and
# round: a table filling up at a steady rate shows as a later window
# falling (issue 23: 3 318 conn/s, then 510, then 1).
PX_WINDOWS=${PB_PROXY_WINDOWS:-8}

proxy_setup() {
	PB_NODES+=("$PX_N")
	"$PI" -N "$PX_N" node up >/dev/null || return 1
	ip netns exec "$PX_N" sysctl -qw net.ipv4.ip_forward=0
	"$PI" -N "$PX_N" pod add $PB_PREFIX-pc --ip 10.244.0.10 >/dev/null &&
	"$PI" -N "$PX_N" pod add $PB_PREFIX-ps --ip $PX_S >/dev/null &&
	"$PI" -N "$PX_N" pod add $PB_PREFIX-pp --ip 10.244.0.12 >/dev/null &&
	"$PI" -N "$PX_N" pod add $PB_PREFIX-pd --ip 10.244.0.13 >/dev/null &&
	"$PI" -N "$PX_N" proxy add $PB_PREFIX-pp --port 15001 --for $PB_PREFIX-pc \
		--match tcp >/dev/null || return 1
	PX_OUT=$(mktemp)
	ip netns exec $PB_PREFIX-pp "$BUILD/podinject-proxy" 15001 >"$PX_OUT" 2>/dev/null &
	PX_PID=$!
	for _ in $(seq 50); do
		grep -q ready "$PX_OUT" && return 0
		sleep 0.1
	done
	return 1
}

# HAProxy as a proxy pod of its own, following docs/proxy.md's contract:
# a transparent listener (bind ... transparent: IP_TRANSPARENT), the
# original destination as server (0.0.0.0, no port: the address and port
# the client connected to, from getsockname()), the upstream bound to the
# client's address with a port of the system's (usesrc clientip). One
# thread, as podinject-proxy is one; not pinned, as podinject-proxy is not.
haproxy_setup() {
	[ -n "$PX_HAPROXY" ] || return 1
	"$PI" -N "$PX_N" pod add $PB_PREFIX-ph --ip 10.244.0.14 >/dev/null &&
	"$PI" -N "$PX_N" pod add $PB_PREFIX-px --ip 10.244.0.15 >/dev/null &&
	"$PI" -N "$PX_N" proxy add $PB_PREFIX-px --port 15002 --for $PB_PREFIX-ph \
		--match tcp >/dev/null || return 1
	PX_HCFG=$(mktemp)
	cat >"$PX_HCFG" <<-EOF
	global
		nbthread 1
		maxconn 8192
	defaults
		mode tcp
		timeout connect 2s
		timeout client 30s
		timeout server 30s
	frontend captured
		bind 0.0.0.0:15002 transparent
		default_backend original_destination
	backend original_destination
		source 0.0.0.0 usesrc clientip
		server original 0.0.0.0
	EOF
	ip netns exec $PB_PREFIX-px "$PX_HAPROXY" -db -f "$PX_HCFG" >"$PX_HCFG.log" 2>&1 &
	PX_HPID=$!
	for _ in $(seq 50); do
		ip netns exec $PB_PREFIX-px ss -Hltn 'sport = :15002' | grep -q . && return 0
		sleep 0.1
	done
	return 1
}

px_client() {	# the client pod of a variant
	case $1 in
	proxied) echo $PB_PREFIX-pc ;;
	haproxy) echo $PB_PREFIX-ph ;;
	*) echo $PB_PREFIX-pd ;;
	esac
}

px_iperf3() {	# px_iperf3 CLIENT_NS: prints "bits_per_second retransmits"
	local out srv
	out=$(mktemp)
	ip netns exec $PB_PREFIX-ps taskset -c "$PB_CPU_RECV" \
		timeout $((PB_TCP_DURATION + 20)) iperf3 -s -1 -p 5201 >/dev/null 2>&1 &
	srv=$!
	sleep 0.3
	ip netns exec "$1" taskset -c "$PB_CPU_SEND" timeout $((PB_TCP_DURATION + 15)) \
		iperf3 -c $PX_S -p 5201 -t "$PB_TCP_DURATION" -O 1 -J >"$out" 2>/dev/null
	kill $srv 2>/dev/null
	wait $srv 2>/dev/null
	jq -r 'select(.end.sum_received) | "\(.end.sum_received.bits_per_second) \(.end.sum_sent.retransmits // 0)"' \
		"$out" 2>/dev/null
	rm -f "$out"
}

px_connrate() {	# px_connrate CLIENT_NS: prints the JSON of pktload connrate
	local srv
	taskset -c "$PB_CPU_RECV" "$PKTLOAD" accept -n $PB_PREFIX-ps --port 8080 \
		--duration "$(awk -v d="$PB_DURATION" -v w="$PX_WINDOWS" 'BEGIN { print d * w + 2 }')" &
	srv=$!
	sleep 0.2
	taskset -c "$PB_CPU_SEND" "$PKTLOAD" connrate -n "$1" --dst $PX_S --port 8080 \
		--duration "$PB_DURATION" --windows "$PX_WINDOWS"
	kill $srv 2>/dev/null
	wait $srv 2>/dev/null
}

nstat_of() {	# nstat_of NETNS COUNTER: its absolute value
	ip netns exec "$1" nstat -az "$2" 2>/dev/null | awk -v c="$2" '$1 == c { print $2; f = 1 } END { if (!f) print 0 }'
}

tw_of() {	# TIME_WAIT sockets in NETNS
	ip netns exec "$1" ss -Htan state time-wait 2>/dev/null | wc -l
}

suite_proxy() {
	local rep v bps retr out variants="proxied direct" i wins
	suite_begin proxy "Proxy: TCP throughput and connections/s through podinject-proxy and HAProxy vs direct"
	if [ ! -x "$BUILD/podinject-proxy" ]; then
		skip all "$BUILD/podinject-proxy does not exist in this build"
		suite_end
		return
	fi
	if ! proxy_setup; then
		skip all "could not set the proxy up (node, pods, proxy add, or podinject-proxy not ready)"
		kill "${PX_PID:-}" 2>/dev/null
		suite_end
		return
	fi
	if haproxy_setup; then
		variants="proxied haproxy direct"
		meta haproxy "\"$("$PX_HAPROXY" -v | head -n 1)\""
	elif [ -z "$PX_HAPROXY" ]; then
		skip haproxy "haproxy is not installed (make deps installs Debian's)"
	else
		skip haproxy "could not set HAProxy up (pod add, proxy add, or no listener on :15002 within 5 s)"
	fi
	meta inject_path "\"$("$PI" -N "$PX_N" -j inject list | jq -r '.[0].path')\""
	meta cpus_used "\"client CPU $PB_CPU_SEND, server CPU $PB_CPU_RECV, podinject-proxy not pinned\""
	note "proxied = pb-pc's connection captured to podinject-proxy, whose upstream (bound to pb-pc's address) is injected into pb-pc's egress; direct = pb-pd to the same server, no proxy (the limit)"
	note "haproxy = pb-ph's connection captured to HAProxy in pb-px (bind transparent, source 0.0.0.0 usesrc clientip, server 0.0.0.0: the original destination), its upstream injected into pb-ph's egress as podinject-proxy's is"
	note "conns/s: connect, wait for the server's close, close; one at a time, $PX_WINDOWS windows of $PB_DURATION s back to back per variant and round (conns_per_s: all of them; conns_per_s_window: each window, numbered round by round, so that a ratio pairs the same window of the same round); conns_failed and syn_retransmits: per round, all windows"
	wins=$(mktemp)
	for rep in $(seq 1 "$PB_REPS"); do
		pb_alive "$PX_N" $PB_PREFIX-pc $PB_PREFIX-ps $PB_PREFIX-pp $PB_PREFIX-pd || break
		for v in $variants; do
			read -r bps retr < <(px_iperf3 "$(px_client $v)")
			if [ -n "${bps:-}" ]; then
				sample tcp_gbps Gbit/s "$v" "$rep" \
					"$(awk -v b="$bps" 'BEGIN { printf "%.3f", b / 1e9 }')"
				sample tcp_retransmits count "$v" "$rep" "$retr"
			else
				echo "   $v round $rep: iperf3 failed"
			fi
		done
		for v in $variants; do
			out=$(px_connrate "$(px_client $v)")
			sample conns_per_s "conn/s" "$v" "$rep" "$(jq '.cps // 0' <<<"$out")"
			for i in $(seq 1 "$PX_WINDOWS"); do
				sample conns_per_s_window "conn/s" "$v" \
					$(( (rep - 1) * PX_WINDOWS + i )) \
					"$(jq --argjson i "$i" '.windows[$i - 1].cps // empty' <<<"$out")"
			done
			sample conns_failed count "$v" "$rep" "$(jq '.failed // empty' <<<"$out")"
			sample syn_retransmits count "$v" "$rep" "$(jq '.syn_retrans // empty' <<<"$out")"
			jq -c --arg v "$v" --argjson r "$rep" \
				'{variant: $v, round: $r, cps: [.windows[].cps], failed: [.windows[].failed], syn_retrans: [.windows[].syn_retrans]}' \
				<<<"$out" >>"$wins" 2>/dev/null
		done
	done
	# Every window of every round, as measured: the order within a
	# round is what shows a share filling up
	meta conns_per_s_by_window "$(jq -sc 'group_by(.variant) | map({(.[0].variant): map({round, cps, failed, syn_retrans})}) | add // {}' "$wins")"
	rm -f "$wins"
	# What the connection rate ran into, for whoever reads a low figure:
	# SYNs the clients had to retransmit (each costs 1 s) and TIME_WAIT
	# sockets left in the proxy's namespace and the server's.
	meta client_syn_retransmits "{\"proxied\": $(nstat_of $PB_PREFIX-pc TcpExtTCPSynRetrans), \"haproxy\": $(nstat_of $PB_PREFIX-ph TcpExtTCPSynRetrans), \"direct\": $(nstat_of $PB_PREFIX-pd TcpExtTCPSynRetrans)}"
	meta time_wait_sockets_after "{\"proxy\": $(tw_of $PB_PREFIX-pp), \"haproxy\": $(tw_of $PB_PREFIX-px), \"server\": $(tw_of $PB_PREFIX-ps)}"
	# Whose address the server saw: the connections it closed wait in
	# TIME_WAIT with the peer they had. A proxy's upstream must come from
	# its client pod's address, never from the proxy pod's.
	case " $variants " in
	*" haproxy "*)
		local from_client from_proxy
		from_client=$(ip netns exec $PB_PREFIX-ps ss -Htan state time-wait dst 10.244.0.14 | wc -l)
		from_proxy=$(ip netns exec $PB_PREFIX-ps ss -Htan state time-wait dst 10.244.0.15 | wc -l)
		meta haproxy_upstream_source "{\"client_address\": $from_client, \"proxy_address\": $from_proxy}"
		if [ "$from_client" = 0 ] || [ "$from_proxy" != 0 ]; then
			failed haproxy_upstream_source "the server's TIME_WAIT sockets: $from_client from pb-ph's address, $from_proxy from pb-px's: HAProxy's upstream did not come from the client's address"
		fi ;;
	esac
	ratio "proxied / direct" tcp_gbps proxied direct
	ratio "proxied / direct" conns_per_s proxied direct
	ratio "proxied / direct" conns_per_s_window proxied direct
	case " $variants " in
	*" haproxy "*)
		ratio "haproxy / direct" tcp_gbps haproxy direct
		ratio "haproxy / direct" conns_per_s haproxy direct
		ratio "haproxy / direct" conns_per_s_window haproxy direct
		ratio "proxied / haproxy" tcp_gbps proxied haproxy
		ratio "proxied / haproxy" conns_per_s proxied haproxy ;;
	esac
	kill "$PX_PID" ${PX_HPID:+"$PX_HPID"} 2>/dev/null
	wait "$PX_PID" ${PX_HPID:+"$PX_HPID"} 2>/dev/null
	rm -f "$PX_OUT" ${PX_HCFG:+"$PX_HCFG" "$PX_HCFG.log"}
	suite_end
}
