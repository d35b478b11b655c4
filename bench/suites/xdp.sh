# SPDX-License-Identifier: GPL-2.0
# Suite "xdp" (seed 004): how fast traffic towards a pod can be dropped on
# the pod's side of its veth pair, three ways. The host namespace sends
# 64-byte frames (AF_PACKET, qdisc bypassed) out of the host side pK; the
# pod's eth0 receives them:
#
#   pb-x-h [p1] ==veth==> eth0 pb-x-1: native XDP on eth0: XDP_DROP
#          [p2] ==veth==> eth0 pb-x-2: tc ingress on eth0: TC_ACT_SHOT
#          [p3] ==veth==> eth0 pb-x-3: no program; UDP to a port without a
#                                      socket, dropped by the pod's stack
#
# veth runs the XDP program of eth0 when its peer (the host side) transmits:
# the frame goes into eth0's ring and its NAPI poll runs XDP before any skb
# work, as tun's transmit-path XDP does for a guest in the seed (12.90 vs
# 2.57 Mpps for XDP_DROP at tun tx vs in the guest's virtio-net rx). The
# rate counted is the drop point's own counter: the program's per-CPU
# counter, or the pod's Udp NoPorts.
#
# Second part (issue #8): traffic from another node, arriving on a node's
# uplink, delivered to a local pod, the two ways podinject has. Each way is
# a podinject node of its own whose uplink wire0 is a veth; its other end
# is in a wire namespace that plays the other node (and the wire):
#
#   pb-xuW-w [wire0] ==veth==> [wire0] node pb-xuW --> pod pb-xuW-p 10.244.0.10
#                                                     (UDP socket on port 9)
#   W = x  node up --uplink wire0 --xdp: XDP xdp_uplink on wire0,
#          XDP_REDIRECT (devmap) -> pi-POD ndo_xdp_xmit -> eth0's XDP ACL
#          (xdp_pod_ingress) -> the pod's stack
#   W = t  node up --uplink wire0: tcx uplink_ingress on wire0,
#          bpf_redirect_peer -> eth0 -> the pod's stack
#
# The wire namespace sends 64-byte frames 10.244.1.10 -> 10.244.0.10 port 9
# (AF_PACKET, qdisc bypassed, addressed to the node's wire0); the receiver
# counts inside the pod: its eth0 rx counter and a UDP socket it drains.
# Both nodes are built first; each round measures all five ways in turn.

suite_xdp() {
	local k v rep out dmac ways="xdp tc stack" uplink_ways
	suite_begin xdp "XDP on veth: drop rate towards a pod (seed 004); uplink to pod, XDP_REDIRECT vs tc"
	meta sender "\"AF_PACKET, PACKET_QDISC_BYPASS, 60-byte frames, CPU $PB_CPU_SEND (the veth NAPI / backlog work runs there too), meter CPU $PB_CPU_RECV\""
	meta window_s "$PB_DURATION"
	note "dropped = packets/s counted at the drop point; ring_full = packets/s the host side could not queue to eth0's XDP ring (veth tx drops); the stack way also sends rate-limited ICMP port unreachables"
	note "seed 004 measured tun + vhost-net with a VM, Mpps; compare the ratios"
	note "on veth the frame is already an skb when eth0's XDP runs (the host side made it); veth converts it to an xdp_buff in its NAPI poll and copies it when its headroom is below XDP_PACKET_HEADROOM (kernel drivers/net/veth.c, veth_convert_skb_to_xdp_buff), so XDP_DROP there need not beat a tc drop; unlike tun in the seed, no skb is saved"
	if [ "$("$PI" -j features | jq .veth_xdp)" = false ]; then
		skip all "kernel $KERNEL: veth without native XDP"
		suite_end
		return
	fi
	pb_ns $PB_PREFIX-x-h
	mkdir -p "$PB_PINS"
	k=0
	for v in $ways; do
		k=$((k + 1))
		veth_pod $PB_PREFIX-x-h p$k $PB_PREFIX-x-$k 10.11.0.$k
	done
	if ! "$PBLOAD" attach $PB_PREFIX-x-1 eth0 xdp xdp_drop --pin "$PB_PINS/xdp" ||
	   ! "$PBLOAD" attach $PB_PREFIX-x-2 eth0 tc-ingress tc_drop --pin "$PB_PINS/tc"; then
		skip all "could not attach the drop programs"
		suite_end
		return
	fi
	# The uplink part is an addition: should its nodes not come up, the
	# drop comparison still runs and the skip says why.
	uplink_ways=""
	if uplink_setup; then
		uplink_ways="xdp_redirect tc_redirect_peer"
		uplink_check || uplink_ways=""
	else
		skip "uplink xdp_redirect, tc_redirect_peer" "could not build the uplink nodes (node up --uplink [--xdp] or pod add failed)"
	fi
	if [ -n "$uplink_ways" ]; then
		meta uplink_sender "\"AF_PACKET, PACKET_QDISC_BYPASS, 60-byte frames 10.244.1.10 -> 10.244.0.10:9 from the wire namespace, CPU $PB_CPU_SEND (the wire0 veth, the node's programs and the pod's receive run in softirq there too); receiver (UDP socket in the pod) CPU $PB_CPU_RECV\""
		note "uplink: xdp_redirect = node up --uplink wire0 --xdp (xdp_uplink XDP_REDIRECT to the pod's veth, the pod's XDP ACL on eth0); tc_redirect_peer = node up --uplink wire0 (tcx uplink_ingress, bpf_redirect_peer); each a node of its own, same pod address, no policy rules"
		note "uplink: arrived = packets/s the pod's eth0 received (rx counter, in the pod); delivered = datagrams/s the pod's UDP socket on port 9 read (the receiver's count); wire_drop = frames/s the node's wire0 could not take (tx drops at the wire end: full XDP ring or backlog); sock_drop = datagrams/s the pod's socket had no room for (Udp RcvbufErrors)"
		note "uplink: the frames carry UDP checksum 0 (none, IPv4), which xdp_uplink treats as complete, so every one of them takes XDP_REDIRECT (checked before measuring: uplink_xdp_share = the share of the frames the pod received that xdp_uplink redirected); a wire end whose stack leaves checksums to offload would send them the tc way (docs/datapath.md)"
		note "uplink: the wire is a veth, so the frame is an skb before xdp_uplink runs (as in the drop part) and XDP_REDIRECT hands the pod a new skb built from the XDP frame; a NIC's XDP would run before any skb exists, which is where the seeds' XDP advantage comes from"
	fi
	for rep in $(seq 1 "$PB_REPS"); do
		pb_alive $PB_PREFIX-x-h $PB_PREFIX-x-1 $PB_PREFIX-x-2 $PB_PREFIX-x-3 || break
		k=0
		for v in $ways; do
			k=$((k + 1))
			dmac=$(mac_of $PB_PREFIX-x-$k eth0)
			case $v in
			xdp|tc)	out=$(pps_sample_host $k "$dmac" $PB_PREFIX-x-$k \
					dropped=map:$PB_PINS/$v/hits) ;;
			stack)	out=$(pps_sample_host $k "$dmac" $PB_PREFIX-x-$k \
					dropped=snmp:Udp:NoPorts) ;;
			esac
			sample dropped_pps pps "$v" "$rep" "$(jq .dropped <<<"$out")"
			sample sent_pps pps "$v" "$rep" "$(jq .sent <<<"$out")"
			sample ring_full_pps pps "$v" "$rep" "$(jq '.ring_full // 0' <<<"$out")"
		done
		# Same round, right after the drop ways: a slow period of the
		# machine hits both uplink ways alike.
		for v in $uplink_ways; do
			pb_alive $(uplink_names "$v") || break 2
			out=$(pps_sample_uplink "$v")
			sample uplink_delivered_pps pps "$v" "$rep" "$(jq .delivered <<<"$out")"
			sample uplink_arrived_pps pps "$v" "$rep" "$(jq .arrived <<<"$out")"
			sample uplink_sent_pps pps "$v" "$rep" "$(jq .sent <<<"$out")"
			sample uplink_wire_drop_pps pps "$v" "$rep" "$(jq '.wire_drop // 0' <<<"$out")"
			sample uplink_sock_drop_pps pps "$v" "$rep" "$(jq '.sock_drop // 0' <<<"$out")"
		done
	done
	ratio "XDP_DROP / stack drop" dropped_pps xdp stack "12.90 / 2.57 = 5.02 (tun tx XDP vs guest rx XDP)"
	ratio "XDP_DROP / tc drop" dropped_pps xdp tc "-"
	ratio "tc drop / stack drop" dropped_pps tc stack "-"
	if [ -n "$uplink_ways" ]; then
		ratio "uplink XDP_REDIRECT / tc" uplink_delivered_pps xdp_redirect tc_redirect_peer "-"
		ratio "uplink XDP_REDIRECT / tc" uplink_arrived_pps xdp_redirect tc_redirect_peer "-"
	fi
	suite_end
	for k in 1 2 3; do ip netns del $PB_PREFIX-x-$k; done 2>/dev/null
	ip netns del $PB_PREFIX-x-h 2>/dev/null
	uplink_teardown
}

# --- uplink: XDP_REDIRECT vs tc ------------------------------------------

uplink_tag() {	# the node's letter for a way
	[ "$1" = xdp_redirect ] && echo x || echo t
}

uplink_names() {	# uplink_names WAY: node, wire and pod namespaces
	local n=$PB_PREFIX-xu$(uplink_tag "$1")
	echo "$n $n-w $n-p"
}

uplink_setup() {
	local v n w p flags
	for v in xdp_redirect tc_redirect_peer; do
		read -r n w p < <(uplink_names "$v")
		flags="--uplink wire0"
		[ "$v" = xdp_redirect ] && flags="$flags --xdp"
		pb_ns "$n"
		pb_ns "$w"
		ip -n "$n" link add wire0 type veth peer name wire0 netns "$w"
		# as on the test nodes: delivery to pods must not need the
		# kernel's forwarding
		ip netns exec "$n" sysctl -qw net.ipv4.ip_forward=0
		ip -n "$n" addr add 192.168.77.1/24 dev wire0
		ip -n "$w" addr add 192.168.77.2/24 dev wire0
		ip -n "$n" link set wire0 up
		ip -n "$w" link set wire0 up
		# node up adopts the namespace and its wire0; node down (and
		# pb_teardown after a failure) removes what podinject made
		PB_NODES+=("$n")
		"$PI" -N "$n" node up $flags >/dev/null || return 1
		"$PI" -N "$n" pod add "$p" --ip 10.244.0.10 >/dev/null || return 1
	done
}

uplink_teardown() {
	local v n w p
	for v in xdp_redirect tc_redirect_peer; do
		read -r n w p < <(uplink_names "$v")
		"$PI" -N "$n" node down >/dev/null 2>&1
		ip netns del "$p" 2>/dev/null
		ip netns del "$w" 2>/dev/null
		ip netns del "$n" 2>/dev/null
	done
}

uplink_pod_json() {	# uplink_pod_json WAY: the pod's `pod show` JSON
	local n _w p
	read -r n _w p < <(uplink_names "$1")
	"$PI" -N "$n" -j pod show "$p"
}

# Before measuring, make sure each way is the path it claims to be, by the
# share of the frames the pod's eth0 received that came that way: on the
# --xdp node xdp_uplink's count (xdp_stats uplink_redirects), on the other
# the pod's ingress counter (moved at tc by deliver_to_pod, the only
# way in for a pod without XDP). The pod's eth0 is the measure, not the
# sender: what a sender counts as sent or dropped when the veth's queue is
# full differs between kernels. A way that is not what it says is not
# measured.
uplink_check() {
	local v j0 j1 r0 r1 rx n share what key ok=0
	for v in xdp_redirect tc_redirect_peer; do
		j0=$(uplink_pod_json "$v")
		r0=$(pod_eth0_rx "$v")
		PB_DURATION=1 PB_WARMUP=0.2 pps_sample_uplink "$v" >/dev/null
		sleep 0.2
		j1=$(uplink_pod_json "$v")
		r1=$(pod_eth0_rx "$v")
		rx=$((r1 - r0))
		if [ "$v" = xdp_redirect ]; then
			what="came by XDP_REDIRECT" key=uplink_xdp_share
			n=$(jq -n --argjson a "$j0" --argjson b "$j1" \
				'if $b.xdp != null then $b.xdp.uplink_redirects - $a.xdp.uplink_redirects else 0 end')
		else
			what="were delivered at tc (pod without XDP)" key=uplink_tc_share
			n=$(jq -n --argjson a "$j0" --argjson b "$j1" \
				'if $b.xdp == null then $b.stats.ingress_packets - $a.stats.ingress_packets else 0 end')
		fi
		share=$(awk -v n="$n" -v r="$rx" 'BEGIN { printf "%.4f", (r > 0 ? n / r : 0) }')
		echo "   check uplink $v: the pod's eth0 received $rx frames, $n of them $what: $share"
		meta "$key" "$share"
		# a handful of frames either way is not a check
		awk -v s="$share" -v r="$rx" 'BEGIN { exit !(r >= 1000 && s >= 0.99 && s <= 1.01) }' || {
			skip "uplink $v" "check failed: of $rx frames the pod received, a share of $share came the way it is named for"
			ok=1
		}
	done
	return $ok
}

pod_eth0_rx() {	# packets the pod's eth0 of WAY received
	local _n _w p
	read -r _n _w p < <(uplink_names "$1")
	ip -n "$p" -s -j link show eth0 | jq '.[0].stats64.rx.packets'
}

# pps_sample_uplink WAY: frames from the wire namespace into the node's
# wire0, metered inside the pod (eth0 rx, the UDP socket, its overflow) and
# at the wire end (frames the node's wire0 did not take).
pps_sample_uplink() {
	local n w p m s r dmac
	read -r n w p < <(uplink_names "$1")
	dmac=$(mac_of "$n" wire0)
	m=$(mktemp) s=$(mktemp) r=$(mktemp)
	taskset -c "$PB_CPU_RECV" "$PKTLOAD" meter -n "$p" --warmup "$PB_WARMUP" \
		--window "$PB_DURATION" arrived=dev:eth0 delivered=sock:9 \
		sock_drop=snmp:Udp:RcvbufErrors >"$m" &
	local mpid=$!
	taskset -c "$PB_CPU_RECV" "$PKTLOAD" meter -n "$w" --warmup "$PB_WARMUP" \
		--window "$PB_DURATION" wire_drop=txdrop:wire0 >"$r" &
	local rpid=$!
	sleep 0.1
	taskset -c "$PB_CPU_SEND" "$PKTLOAD" send -n "$w" --mode packet \
		--bind 10.244.1.10 --dst 10.244.0.10 --port 9 --dev wire0 --dmac "$dmac" \
		--duration "$(awk -v w="$PB_WARMUP" -v d="$PB_DURATION" 'BEGIN { print w + d + 0.3 }')" >"$s"
	wait $mpid $rpid
	jq -c --slurpfile s "$s" --slurpfile r "$r" \
		'. + {sent: ($s[0].pps // 0), wire_drop: ($r[0].wire_drop // 0)}' "$m"
	rm -f "$m" "$s" "$r"
}

# pps_sample_host K DMAC POD_NS COUNTER: frames from the host namespace out
# of pK to the pod, 10.11.0.254 -> 10.11.0.K port 9. The meter runs in the
# host namespace (maps and pK's tx drops) or the pod's (its SNMP counters).
pps_sample_host() {
	local k=$1 dmac=$2 pod=$3 counter=$4 m s r ns
	m=$(mktemp) s=$(mktemp) r=$(mktemp)
	ns=$PB_PREFIX-x-h
	case $counter in *snmp:*) ns=$pod ;; esac
	taskset -c "$PB_CPU_RECV" "$PKTLOAD" meter -n "$ns" --warmup "$PB_WARMUP" \
		--window "$PB_DURATION" "$counter" >"$m" &
	local mpid=$!
	taskset -c "$PB_CPU_RECV" "$PKTLOAD" meter -n $PB_PREFIX-x-h --warmup "$PB_WARMUP" \
		--window "$PB_DURATION" "ring_full=txdrop:p$k" >"$r" &
	local rpid=$!
	sleep 0.1
	taskset -c "$PB_CPU_SEND" "$PKTLOAD" send -n $PB_PREFIX-x-h --mode packet \
		--bind 10.11.0.254 --dst 10.11.0.$k --port 9 --dev p$k --dmac "$dmac" \
		--duration "$(awk -v w="$PB_WARMUP" -v d="$PB_DURATION" 'BEGIN { print w + d + 0.3 }')" >"$s"
	wait $mpid $rpid
	jq -c --slurpfile s "$s" --slurpfile r "$r" \
		'. + {sent: ($s[0].pps // 0), ring_full: ($r[0].ring_full // 0)}' "$m"
	rm -f "$m" "$s" "$r"
}
