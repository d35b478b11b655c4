# SPDX-License-Identifier: GPL-2.0
# Suite "redirect" (seed 002): 64-byte packets/s from one pod to another
# through a host namespace, five ways. One topology per way, all built
# first, then measured in interleaved rounds:
#
#   pb-rW-s (10.10.0.1)          pb-rW-h                  pb-rW-r (10.10.0.2)
#    eth0 ===veth===> [s] --(way W)--> [r] ===veth===> eth0 (meter: rx, sink)
#
#   clone    tc ingress on s: bpf_clone_redirect(r) + drop   (seed: 2.0 Mpps)
#   redirect tc ingress on s: bpf_redirect(r), r transmits   (seed: 2.4-2.5)
#   peer     tc ingress on s: bpf_redirect_peer(r), received by eth0 of
#            pb-rW-r in the same softirq, no backlog queue
#   bridge   s and r in a Linux bridge                        (seed: 2.1)
#   routing  ip_forward=1 in the host namespace, /32 routes
#
# The programs are cls_bpf in direct-action mode (the seed's fastest
# variant); all three rewrite the Ethernet header the same way.
# PB_REDIRECT_SINK=drop (default): a tc drop at the destination pod's eth0
# ingress counts and discards each packet, so what is measured is the
# forwarding, as in the seed (packets forwarded out of a NIC), not the
# destination's UDP stack. PB_REDIRECT_SINK=socket: a UDP socket in the
# destination pod reads them instead (end to end).

WAYS="clone redirect peer bridge routing"

redirect_setup() {
	local w h s r rmac
	for w in $WAYS; do
		h=$PB_PREFIX-r$w-h s=$PB_PREFIX-r$w-s r=$PB_PREFIX-r$w-r
		pb_ns "$h"
		ip netns exec "$h" sysctl -qw net.ipv4.ip_forward=0
		veth_pod "$h" s "$s" 10.10.0.1
		veth_pod "$h" r "$r" 10.10.0.2
		rmac=$(mac_of "$r" eth0)
		if [ "$PB_REDIRECT_SINK" = drop ]; then
			"$PBLOAD" attach "$r" eth0 tc-ingress tc_drop \
				--pin "$PB_PINS/r$w" || return 1
		fi
		case $w in
		clone|redirect|peer)
			"$PBLOAD" attach "$h" s tc-ingress "rd_$w" --to r \
				--dmac "$rmac" --smac "$(mac_of "$h" r)" || return 1
			;;
		bridge)
			# one L2 segment: the sender addresses the receiver's
			# MAC, the bridge forwards on a static entry
			ip -n "$h" link add br0 type bridge
			ip -n "$h" link set s master br0
			ip -n "$h" link set r master br0
			ip -n "$h" link set br0 up
			bridge -n "$h" fdb add "$rmac" dev r master static
			ip -n "$s" route add 10.10.0.2/32 dev eth0 scope link
			ip -n "$s" neigh add 10.10.0.2 lladdr "$rmac" dev eth0 nud permanent
			;;
		routing)
			ip netns exec "$h" sysctl -qw net.ipv4.ip_forward=1 \
				net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0
			ip -n "$h" route add 10.10.0.1/32 dev s
			ip -n "$h" route add 10.10.0.2/32 dev r
			ip -n "$h" neigh add 10.10.0.2 lladdr "$rmac" dev r nud permanent
			ip -n "$h" neigh add 10.10.0.1 lladdr "$(mac_of "$s" eth0)" dev s nud permanent
			;;
		esac
	done
}

redirect_dmac() {	# the MAC the sender's frames are addressed to
	if [ "$1" = bridge ]; then
		mac_of $PB_PREFIX-r$1-r eth0
	else
		mac_of $PB_PREFIX-r$1-h s
	fi
}

PB_REDIRECT_SINK=${PB_REDIRECT_SINK:-drop}

suite_redirect() {
	local w rep out dmac counter
	suite_begin redirect "Redirect family: 64-byte packets/s pod to pod (seed 002)"
	meta path "\"veth pairs, host namespace in between, cls_bpf direct action\""
	meta sender "\"$PB_SENDER on CPU $PB_CPU_SEND (its softirq work too), meter on CPU $PB_CPU_RECV\""
	meta window_s "$PB_DURATION"
	meta sink "\"$PB_REDIRECT_SINK\""
	if [ "$PB_REDIRECT_SINK" = drop ]; then
		note "arrived = packets/s reaching the destination pod's eth0, counted and dropped by a tc program at its ingress (the same for all ways): the forwarding rate, without the destination's stack"
	else
		note "arrived = packets/s received by the destination pod's eth0; delivered = datagrams/s its UDP socket read (end to end)"
	fi
	note "seed 002 figures are Mpps between two hosts over 10G ixgbe (pktgen); ours are ratios on veth on one host, so compare ratios, not Mpps"
	mkdir -p "$PB_PINS"
	if ! redirect_setup; then
		skip all "topology or program load failed"
		suite_end
		return
	fi
	for rep in $(seq 1 "$PB_REPS"); do
		pb_alive $(for w in $WAYS; do echo $PB_PREFIX-r$w-h $PB_PREFIX-r$w-s $PB_PREFIX-r$w-r; done) || break
		for w in $WAYS; do
			dmac=$(redirect_dmac "$w")
			if [ "$PB_REDIRECT_SINK" = drop ]; then
				counter=arrived=map:$PB_PINS/r$w/hits
			else
				counter=arrived=dev:eth0
			fi
			out=$(pps_sample $PB_PREFIX-r$w-s 10.10.0.1 10.10.0.2 "$dmac" \
				$PB_PREFIX-r$w-r "$counter" delivered=sock:9)
			sample arrived_pps pps "$w" "$rep" "$(jq .arrived <<<"$out")"
			[ "$PB_REDIRECT_SINK" = drop ] ||
				sample delivered_pps pps "$w" "$rep" "$(jq .delivered <<<"$out")"
			sample sent_pps pps "$w" "$rep" "$(jq .sent <<<"$out")"
		done
	done
	ratio "redirect / clone" arrived_pps redirect clone "2.4 / 2.0 = 1.20"
	ratio "bridge / clone" arrived_pps bridge clone "2.1 / 2.0 = 1.05"
	ratio "redirect / bridge" arrived_pps redirect bridge "2.4 / 2.1 = 1.14"
	ratio "peer / redirect" arrived_pps peer redirect "-"
	ratio "routing / redirect" arrived_pps routing redirect "-"
	suite_end
	for w in $WAYS; do
		ip netns del $PB_PREFIX-r$w-s; ip netns del $PB_PREFIX-r$w-r; ip netns del $PB_PREFIX-r$w-h
	done 2>/dev/null
}
