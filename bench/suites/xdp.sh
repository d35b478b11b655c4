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

suite_xdp() {
	local k v rep out dmac ways="xdp tc stack"
	suite_begin xdp "XDP on the transmit side of a veth: drop rate towards a pod (seed 004)"
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
	done
	ratio "XDP_DROP / stack drop" dropped_pps xdp stack "12.90 / 2.57 = 5.02 (tun tx XDP vs guest rx XDP)"
	ratio "XDP_DROP / tc drop" dropped_pps xdp tc "-"
	ratio "tc drop / stack drop" dropped_pps tc stack "-"
	suite_end
	for k in 1 2 3; do ip netns del $PB_PREFIX-x-$k; done 2>/dev/null
	ip netns del $PB_PREFIX-x-h 2>/dev/null
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
