# SPDX-License-Identifier: GPL-2.0
# Suite "cni": how long a pod's network setup and teardown take with
# podinject chained after Debian's ptp + host-local, against the same
# conflist without it — the time a runtime waits for the whole chain
# (bench/cnirun runs it as libcni does: each plugin in turn, prevResult
# passed on; DEL in reverse with the cached result). Pods are set up one at
# a time and 32 at once (a kubelet starting many sandboxes), PB_CNI_PODS
# per round (64); p50 and p99 per round, and over all rounds. The network
# namespaces exist before ADD, as a runtime makes them first, and are not
# timed. The node (host mode) is brought up by a warm-up ADD, as the
# first pod on a node does.
# A fourth variant runs the tcx chain with /sys/kernel/rcu_expedited set to
# 1 for its rounds only (restored after each, and by pb_teardown): each tcx
# attach and detach waits for an RCU grace period under RTNL
# (kernel/bpf/tcx.c), and this is how much of podinject's cost that is.
# A fifth chains podinject with "datapath": "none" (beside a CNI that is a
# datapath itself): the pod is recorded, nothing is attached, so it shows
# what podinject costs a pod apart from its programs. A sixth chains a
# plugin that does nothing (bench/cninoop: prevResult passed through) in
# podinject's place: what any chained plugin costs (its process, its
# config and result), the floor under podinject's own part. cnirun times
# each plugin's process too, so the chained plugin's own time per pod is
# shown beside the chain's.

CNI_NODE=$PB_PREFIX-cni
CNI_NODE_TC=$PB_PREFIX-cnitc
CNI_NS=$PB_PREFIX-cni-

cni_setup() {
	local d=$1 i
	mkdir -p "$d/bin" "$d/state" "$d/ipam-base" "$d/ipam-pi" "$d/ipam-pi-tc" "$d/ipam-pi-none" \
		"$d/ipam-noop"
	for i in ptp host-local; do
		ln -sf /usr/lib/cni/$i "$d/bin/$i"
	done
	ln -sf "$BUILD/podinject-cni" "$d/bin/podinject"
	ln -sf "$BUILD/bench/cninoop" "$d/bin/noop"
	# The two conflists differ only in the podinject entry (and the
	# subnet and IPAM state, so that neither sees the other's leases).
	jq -n --arg d "$d/ipam-base" '{cniVersion: "1.0.0", name: "pb-cni-base",
		plugins: [{type: "ptp", ipMasq: false, ipam: {type: "host-local",
		  dataDir: $d, ranges: [[{subnet: "10.197.0.0/16"}]],
		  routes: [{dst: "0.0.0.0/0"}]}}]}' >"$d/base.conflist"
	jq -n --arg d "$d/ipam-pi" --arg node "$CNI_NODE" --arg log "$d/podinject.log" \
		'{cniVersion: "1.0.0", name: "pb-cni-pi",
		plugins: [{type: "ptp", ipMasq: false, ipam: {type: "host-local",
		  dataDir: $d, ranges: [[{subnet: "10.198.0.0/16"}]],
		  routes: [{dst: "0.0.0.0/0"}]}},
		  {type: "podinject", node: $node, logFile: $log}]}' >"$d/pi.conflist"
	# The same with podinject's programs under clsact (tc filters)
	# instead of tcx links, on a node of its own.
	jq --arg node "$CNI_NODE_TC" '.name = "pb-cni-tc" |
		.plugins[0].ipam.dataDir += "-tc" |
		.plugins[0].ipam.ranges[0][0].subnet = "10.199.0.0/16" |
		.plugins[1] += {node: $node, attach: "clsact"}' "$d/pi.conflist" >"$d/pitc.conflist"
	# The same with "datapath": "none" (issue 23): nothing of podinject's
	# attached at ADD, the pod recorded on the tcx node
	jq '.name = "pb-cni-none" |
		.plugins[0].ipam.dataDir += "-none" |
		.plugins[0].ipam.ranges[0][0].subnet = "10.196.0.0/16" |
		.plugins[1] += {datapath: "none"}' "$d/pi.conflist" >"$d/pinone.conflist"
	# A chained plugin that does nothing, in podinject's place
	jq --arg d "$d/ipam-noop" '.name = "pb-cni-noop" |
		.plugins[0].ipam.dataDir = $d |
		.plugins[0].ipam.ranges[0][0].subnet = "10.195.0.0/16" |
		.plugins[1] = {type: "noop"}' "$d/pi.conflist" >"$d/pinoop.conflist"
	for i in $(seq 0 $((PB_CNI_PODS - 1))); do
		pb_ns "$CNI_NS$i"
	done
}

# cni_round DIR LIST CONC ID_BASE: one run of PB_CNI_PODS pods; prints
# cnirun's JSON
cni_round() {
	"$BUILD/bench/cnirun" --conflist "$2" --cni-path "$1/bin" --netns "$CNI_NS" \
		--count "$PB_CNI_PODS" --concurrency "$3" --id-base "$4" --state "$1/state"
}

suite_cni() {
	local d rep v list conc out key fwd base=4096 p50 p99 pooled
	suite_begin cni "Pod network setup (CNI ADD/DEL): ptp + host-local, with and without podinject chained"
	PB_CNI_PODS=${PB_CNI_PODS:-64}
	meta method "\"bench/cnirun: the conflist run as libcni runs it, $PB_CNI_PODS pods per round, 1 at a time and 32 at once; wall time of each pod's whole chain\""
	if [ ! -x /usr/lib/cni/ptp ] || [ ! -x /usr/lib/cni/host-local ]; then
		skip all "no /usr/lib/cni/ptp or host-local (Debian's containernetworking-plugins)"
		suite_end
		return
	fi
	if [ ! -x "$BUILD/bench/cnirun" ] || [ ! -x "$BUILD/bench/cninoop" ] ||
	   [ ! -x "$BUILD/podinject-cni" ]; then
		skip all "cnirun, cninoop or podinject-cni was not built"
		suite_end
		return
	fi
	d=$(mktemp -d /tmp/pb-cni.XXXXXX)
	fwd=$(cat /proc/sys/net/ipv4/ip_forward)
	PB_NODES+=("$CNI_NODE" "$CNI_NODE_TC")
	cni_setup "$d"
	pooled=$d/pooled
	: >"$pooled"
	# Warm-up: brings the node up (the first pod's cost, once per node)
	# and fills the caches for both chains.
	PB_RCU_EXPEDITED=$(cat /sys/kernel/rcu_expedited 2>/dev/null)
	for list in base pi pitc pinone pinoop; do
		out=$(PB_CNI_PODS=4 cni_round "$d" "$d/$list.conflist" 1 $base)
		if [ "$(jq '.add_failed + .del_failed' <<<"$out" 2>/dev/null)" != 0 ]; then
			failed "$list/warmup" "the chain failed: $(jq -r .first_error <<<"$out" 2>/dev/null || echo "$out")"
		fi
	done
	note "node $CNI_NODE: $("$PI" -N "$CNI_NODE" -j node show 2>/dev/null | jq -c '{host, attach}' 2>/dev/null)"
	for rep in $(seq 1 "$PB_REPS"); do
		for conc in 1 32; do
			for list in base pi pitc pinone pinoop piexp; do
				pb_alive "$CNI_NS"0 || break 3
				case $list in
				base) v="ptp+host-local" ;;
				pi) v="ptp+host-local+podinject" ;;
				pitc) v="ptp+host-local+podinject (clsact)" ;;
				pinone) v="ptp+host-local+podinject (datapath none)" ;;
				pinoop) v="ptp+host-local+no-op plugin" ;;
				piexp) v="ptp+host-local+podinject (rcu_expedited)"
				       [ -n "$PB_RCU_EXPEDITED" ] || continue ;;
				esac
				[ $conc = 1 ] && v="$v, 1 at a time" || v="$v, 32 at once"
				base=$((base + PB_CNI_PODS))
				if [ $list = piexp ]; then
					echo 1 >/sys/kernel/rcu_expedited
					out=$(cni_round "$d" "$d/pi.conflist" $conc $base)
					echo "$PB_RCU_EXPEDITED" >/sys/kernel/rcu_expedited
				else
					out=$(cni_round "$d" "$d/$list.conflist" $conc $base)
				fi
				if ! jq -e '.add_ms' <<<"$out" >/dev/null 2>&1; then
					failed "$v/round$rep" "cnirun printed no result: $out"
					continue
				fi
				if [ "$(jq '.add_failed + .del_failed' <<<"$out")" != 0 ]; then
					failed "$v/round$rep" "$(jq -r '"\(.add_failed) ADD and \(.del_failed) DEL failed: \(.first_error)"' <<<"$out")"
				fi
				for key in add del; do
					# nearest-rank percentiles of this round's pods
					read -r p50 p99 < <(jq -r --arg k ${key}_ms '.[$k] | sort |
						[.[((length * 0.5) | ceil) - 1], .[((length * 0.99) | ceil) - 1]] | @tsv' <<<"$out")
					sample ${key}_p50_ms ms "$v" "$rep" "$p50"
					sample ${key}_p99_ms ms "$v" "$rep" "$p99"
					jq -c --arg v "$v" --arg k $key '{variant: $v, op: $k, ms: .[$k + "_ms"]}' <<<"$out" >>"$pooled"
					# the chained plugin's own process (podinject or
					# the no-op), this round's p50
					[ $list = base ] && continue
					p50=$(jq -r --arg k ${key}_ms '.plugins[1][$k] | sort |
						.[((length * 0.5) | ceil) - 1]' <<<"$out")
					sample chained_${key}_p50_ms ms "$v" "$rep" "$p50"
				done
			done
		done
	done
	# What podinject adds, per round: p99 with minus p99 without.
	for conc in "1 at a time" "32 at once"; do
		ratio "ADD p50, with / without ($conc)" add_p50_ms "ptp+host-local+podinject, $conc" "ptp+host-local, $conc"
		ratio "DEL p50, with / without ($conc)" del_p50_ms "ptp+host-local+podinject, $conc" "ptp+host-local, $conc"
		ratio "ADD p99, with / without ($conc)" add_p99_ms "ptp+host-local+podinject, $conc" "ptp+host-local, $conc"
		ratio "ADD p50, with clsact / without ($conc)" add_p50_ms "ptp+host-local+podinject (clsact), $conc" "ptp+host-local, $conc"
		ratio "ADD p99, with clsact / without ($conc)" add_p99_ms "ptp+host-local+podinject (clsact), $conc" "ptp+host-local, $conc"
		ratio "ADD p50, datapath none / without ($conc)" add_p50_ms "ptp+host-local+podinject (datapath none), $conc" "ptp+host-local, $conc"
		ratio "DEL p50, datapath none / without ($conc)" del_p50_ms "ptp+host-local+podinject (datapath none), $conc" "ptp+host-local, $conc"
		ratio "ADD p99, datapath none / without ($conc)" add_p99_ms "ptp+host-local+podinject (datapath none), $conc" "ptp+host-local, $conc"
		ratio "ADD p50, with rcu_expedited / without ($conc)" add_p50_ms "ptp+host-local+podinject (rcu_expedited), $conc" "ptp+host-local, $conc"
		ratio "ADD p50, a no-op chained plugin / without ($conc)" add_p50_ms "ptp+host-local+no-op plugin, $conc" "ptp+host-local, $conc"
		ratio "ADD p50, datapath none / no-op plugin ($conc)" add_p50_ms "ptp+host-local+podinject (datapath none), $conc" "ptp+host-local+no-op plugin, $conc"
		ratio "chained plugin's own ADD p50, podinject (datapath none) / no-op ($conc)" chained_add_p50_ms "ptp+host-local+podinject (datapath none), $conc" "ptp+host-local+no-op plugin, $conc"
		ratio "chained plugin's own ADD p50, podinject / no-op ($conc)" chained_add_p50_ms "ptp+host-local+podinject, $conc" "ptp+host-local+no-op plugin, $conc"
		ratio "ADD p99, with rcu_expedited / without ($conc)" add_p99_ms "ptp+host-local+podinject (rcu_expedited), $conc" "ptp+host-local, $conc"
	done
	# Pooled over all rounds: the p99 of every pod set up in the run.
	while IFS=$'\t' read -r v k p50 p99 n; do
		meta "pooled_${k}_${v//[^a-z0-9]/_}" "{\"variant\": \"$v\", \"op\": \"$k\", \"pods\": $n, \"p50_ms\": $p50, \"p99_ms\": $p99}"
	done < <(jq -rs 'group_by(.variant + .op)[] | (map(.ms) | add | sort) as $m |
		[.[0].variant, .[0].op, $m[((($m | length) * 0.5) | ceil) - 1],
		 $m[((($m | length) * 0.99) | ceil) - 1], ($m | length)] | @tsv' "$pooled")
	for conc in "1 at a time" "32 at once"; do
		for v in "ptp+host-local+podinject" "ptp+host-local+podinject (clsact)" "ptp+host-local+podinject (datapath none)" "ptp+host-local+podinject (rcu_expedited)" "ptp+host-local+no-op plugin"; do
			jq -rs --arg a "$v, $conc" --arg b "ptp+host-local, $conc" '
				def p99: sort | .[((length * 0.99) | ceil) - 1];
				(map(select(.variant == $a and .op == "add") | .ms) | add | p99) as $x |
				(map(select(.variant == $b and .op == "add") | .ms) | add | p99) as $y |
				"ADD p99 over all rounds, \($a): \($x * 10 | round / 10) ms; without podinject \($y * 10 | round / 10) ms: +\(($x - $y) * 10 | round / 10) ms"' \
				"$pooled" | while read -r line; do note "$line"; done
		done
	done
	note "goal (issue 13): podinject adds at most 10% to ADD's p50 and 20 ms to its p99"
	note "rcu_expedited: the tcx chain with /sys/kernel/rcu_expedited=1 during its rounds only (the machine's value, ${PB_RCU_EXPEDITED:-none}, otherwise): tcx attach waits for a grace period under RTNL, expedited ones are shorter; a node-wide kernel setting for the operator to weigh (expedited grace periods interrupt every CPU), not something podinject sets"
	echo "$fwd" >/proc/sys/net/ipv4/ip_forward
	rm -rf "$d"
	suite_end
}
