# SPDX-License-Identifier: GPL-2.0
# Suite "metrics": how long one Prometheus scrape of `podinject metrics`
# takes on a node with PB_METRICS_PODS (1024, PI_MAX_PODS) pods, against
# issue 25's goal of at most 100 ms; a figure, never a pass or fail. The
# pods are veth pairs made with `ip -batch` and adopted (as t_scale does);
# every eighth pod has an egress and an ingress rule, one flow is tracked.
# Variants: an HTTP GET of /metrics from the running server (curl's total
# time: what Prometheus waits for), and `podinject metrics` to stdout (a
# whole process: libbpf and the node's maps opened each time).
# PB_METRICS_SCRAPES (20) scrapes a round.

MET_NODE=$PB_PREFIX-metrics
MET_PODS=$PB_PREFIX-mpods

met_ip4() { echo "10.250.$(($1 / 250)).$(($1 % 250 + 1))"; }

# met_setup COUNT: the node and its pods; 0 or 1
met_setup() {
	local n=$1 i batch podside
	"$PI" -N "$MET_NODE" node up >/dev/null || return 1
	pb_ns "$MET_PODS"
	batch=$SUITE_DIR/batch podside=$SUITE_DIR/podside
	: >"$batch"
	: >"$podside"
	for i in $(seq 0 $((n - 1))); do
		echo "link add pm$i type veth peer name p$i netns $MET_PODS" >>"$batch"
		echo "link set pm$i up" >>"$batch"
		echo "addr add $(met_ip4 $i)/32 dev p$i" >>"$podside"
		echo "link set p$i up" >>"$podside"
	done
	# iproute2's batch mode keeps the namespace file of each `netns NAME`
	# open (t_scale.sh)
	(ulimit -n 8192 2>/dev/null || ulimit -Sn "$(ulimit -Hn)"
	 ip -n "$MET_NODE" -batch "$batch" && ip -n "$MET_PODS" -batch "$podside") || return 1
	for i in $(seq 0 $((n - 1))); do
		"$PI" -N "$MET_NODE" pod adopt "bench/pod-$i" --netns "$MET_PODS" \
			--dev pm$i >/dev/null || return 1
		if [ $((i % 8)) = 0 ]; then
			"$PI" -N "$MET_NODE" policy add "bench/pod-$i" egress deny \
				to 192.0.2.0/24 proto tcp port 80 >/dev/null &&
			"$PI" -N "$MET_NODE" policy add "bench/pod-$i" ingress allow \
				from 10.250.0.0/16 proto udp port 53 >/dev/null || return 1
		fi
	done
	# one tracked flow: pod 0 to pod 1, through the datapath
	ip -n "$MET_PODS" neigh add 169.254.1.1 lladdr "$(mac_of "$MET_NODE" pm0)" dev p0 nud permanent
	ip -n "$MET_PODS" route add 10.250.0.0/16 via 169.254.1.1 dev p0 onlink src "$(met_ip4 0)"
	ip netns exec "$MET_PODS" ping -c 1 -W 1 -I "$(met_ip4 0)" "$(met_ip4 1)" >/dev/null 2>&1 || true
}

suite_metrics() {
	local pods=${PB_METRICS_PODS:-1024} scrapes=${PB_METRICS_SCRAPES:-20}
	local port pid rep k t0 t1 ms out series med
	suite_begin metrics "Prometheus scrape of podinject metrics, $pods pods"
	meta method "\"per round $scrapes scrapes: curl's time_total of GET /metrics from 'podinject metrics --listen 127.0.0.1:PORT', and the wall time of 'podinject metrics' to stdout; goal (issue 25): a scrape of 1 024 pods in at most 100 ms\""
	if ! command -v curl >/dev/null; then
		skip all "no curl"
		suite_end
		return
	fi
	PB_NODES+=("$MET_NODE")
	t0=$(date +%s)
	if ! met_setup "$pods"; then
		skip all "could not make the node's $pods pods"
		suite_end
		return
	fi
	meta setup_seconds "$(( $(date +%s) - t0 ))"
	for _ in $(seq 50); do
		port=$((20000 + RANDOM % 20000))
		[ -z "$(ss -Htln "( sport = :$port )")" ] && break
	done
	"$PI" -N "$MET_NODE" metrics --listen 127.0.0.1:$port 2>/dev/null &
	pid=$!
	for _ in $(seq 50); do
		[ "$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$port/metrics)" = 200 ] && break
		sleep 0.1
	done
	out=$SUITE_DIR/expo
	curl -s http://127.0.0.1:$port/metrics >"$out"
	series=$(grep -vc '^#' "$out")
	meta exposition "\"$(wc -c <"$out") bytes, $series samples, $(grep -c '^podinject_node_pods.* '"$pods"'$' "$out") node_pods line saying $pods\""
	for rep in $(seq 1 "$PB_REPS"); do
		for k in $(seq 1 "$scrapes"); do
			ms=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' http://127.0.0.1:$port/metrics |
				awk '$1 == 200 { printf "%.2f", $2 * 1000 }')
			if [ -z "$ms" ]; then
				pb_alive "$MET_NODE" "$MET_PODS" &&
					failed scrape "a scrape did not answer 200"
				break 2
			fi
			sample scrape_ms ms "HTTP GET /metrics, $pods pods" "$rep" "$ms" >/dev/null
		done
		for k in $(seq 1 "$scrapes"); do
			t0=$(date +%s%N)
			"$PI" -N "$MET_NODE" metrics >/dev/null || {
				pb_alive "$MET_NODE" "$MET_PODS" &&
					failed stdout "podinject metrics failed"
				break 2
			}
			t1=$(date +%s%N)
			sample scrape_ms ms "podinject metrics (stdout, whole process), $pods pods" "$rep" \
				"$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", (b - a) / 1e6 }')" >/dev/null
		done
		echo "   round $rep: $scrapes scrapes of each"
		pb_alive "$MET_NODE" "$MET_PODS" || break
	done
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	med=$(jq -s --arg v "HTTP GET /metrics, $pods pods" '[.[] | select(.variant == $v) | .value] | sort |
		if length == 0 then "none" elif length % 2 == 1 then .[(length - 1) / 2]
		else (.[length / 2 - 1] + .[length / 2]) / 2 end' "$SUITE_DIR/samples")
	note "goal: a scrape of 1 024 pods in at most 100 ms; HTTP median $med ms ($(awk -v m="$med" 'BEGIN { print (m != "none" && m <= 100) ? "within the goal" : "over the goal" }'))"
	suite_end
}
