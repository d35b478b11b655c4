#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# A real runtime: Debian's podman 4.3 (CNI backend, runc) runs busybox
# containers on a network of ptp + host-local + podinject chained. All of
# podman's state (storage, run root, its CNI config and plugin dirs, the
# IPAM leases) is in a temporary directory; the only shared thing it
# writes is libcni's result cache (/var/lib/cni/results), of which this test
# removes its own network's entries.
#
#   host namespace = podinject node pm-cni (made by the plugin)
#     vethXXXXXXXX <-> eth0  pm-a  10.124.0.x   (injects as pm-b)
#     vethXXXXXXXX <-> eth0  pm-b
#     vethXXXXXXXX <-> eth0  pm-c               (spoofs pm-b: dropped; proxied by pm-p)
#     vethXXXXXXXX <-> eth0  pm-p               (podinject-proxy)
#   (main mode) piXXXXXXXXXXX <-> eth0  pm-m  10.124.1.x  (podinject's pair)
source "$(dirname "$0")/lib.sh"
require_root
EXPECT=37
PREFIX=pm-
NODE=${PREFIX}cni
NET=${PREFIX}net
NETM=${PREFIX}main
CNI=$BUILD/podinject-cni
T=$(mktemp -d /tmp/${PREFIX}podman.XXXXXX)
FWD=$(cat /proc/sys/net/ipv4/ip_forward)
export CONTAINERS_CONF=$T/containers.conf
PM() {
	podman --root "$T/root" --runroot "$T/runroot" --tmpdir "$T/tmp" \
		--storage-driver vfs --runtime runc "$@"
}
cleanup() {
	local c
	[ -n "${PROXY_PID:-}" ] && kill "$PROXY_PID" 2>/dev/null
	for c in a b c m p x; do PM rm -f -t 0 ${PREFIX}$c >/dev/null 2>&1; done
	rm -f /var/lib/cni/results/$NET-* /var/lib/cni/results/$NETM-*
	cleanup_all
	echo "$FWD" >/proc/sys/net/ipv4/ip_forward
	# vfs layers and run state of podman: only ours, under $T
	rm -rf "$T"
}
trap cleanup EXIT

if ! command -v podman >/dev/null || ! command -v runc >/dev/null; then
	skip all "podman or runc is not installed (apt-get install podman runc)"
	exit 0
fi
if [ ! -x /usr/lib/cni/ptp ] || [ ! -x /bin/busybox ]; then
	skip all "needs /usr/lib/cni/ptp (containernetworking-plugins) and /bin/busybox (busybox-static)"
	exit 0
fi

# A busybox rootfs: the directory stands where an image would.
R=$T/rootfs
mkdir -p "$R/bin" "$R/proc" "$R/sys" "$R/dev" "$R/etc" "$R/tmp" "$R/run" \
	"$T/bin" "$T/net.d" "$T/root" "$T/runroot" "$T/tmp" "$T/ipam"
cp /bin/busybox "$R/bin/"
chroot "$R" /bin/busybox --install -s /bin
for p in ptp host-local loopback; do ln -s /usr/lib/cni/$p "$T/bin/$p"; done
ln -s "$CNI" "$T/bin/podinject"
H=$(ulimit -Hn)
cat >"$CONTAINERS_CONF" <<EOF
[containers]
default_ulimits = ["nofile=$H:$H", "nproc=32768:32768"]
[network]
network_backend = "cni"
cni_plugin_dirs = ["$T/bin"]
network_config_dir = "$T/net.d"
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
LOG=$T/podinject.log
jq -n --arg n $NET --arg d "$T/ipam" --arg node $NODE --arg log "$LOG" '
  {cniVersion: "1.0.0", name: $n, plugins: [
    {type: "ptp", ipMasq: false,
     ipam: {type: "host-local", dataDir: $d, ranges: [[{subnet: "10.124.0.0/24"}]],
            routes: [{dst: "0.0.0.0/0"}]}},
    {type: "podinject", node: $node, logFile: $log}]}' >"$T/net.d/$NET.conflist"
jq -n --arg n $NETM --arg d "$T/ipam" --arg node $NODE --arg log "$LOG" '
  {cniVersion: "1.0.0", name: $n, plugins: [
    {type: "podinject", mode: "main", node: $node, logFile: $log,
     ipam: {type: "host-local", dataDir: $d, ranges: [[{subnet: "10.124.1.0/24"}]]}}]}' \
	>"$T/net.d/$NETM.conflist"

# Can podman run a container here at all?
if ! out=$(PM run --rm --network none --rootfs "$R" /bin/true 2>&1); then
	skip all "podman cannot run a container here: $(echo "$out" | tail -n 1)"
	exit 0
fi

run_ctr() {	# run_ctr NAME NETWORK
	PM run -d --name "$1" --network "$2" --rootfs "$R" /bin/sleep 600
}
netns_of() { PM inspect -f '{{.NetworkSettings.SandboxKey}}' "$1"; }
ip_of() { PM inspect -f "{{(index .NetworkSettings.Networks \"$2\").IPAddress}}" "$1"; }
in_ctr() { local ns; ns=$(netns_of "$1"); shift; nsenter --net="$ns" "$@"; }
# ctr_listens NAME PORT: waits until something in the container listens
# on TCP PORT: a fixed sleep was not always enough for a server started
# through nsenter on a loaded machine
ctr_listens() { wait_tcp_listen_by "nsenter --net=$(netns_of "$1")" "$1" "$2"; }
# probe_all_answered N ARGS...: a probe of N from ARGS, all answered; its
# summary when not
probe_all_answered() {
	local n=$1 out
	shift
	out=$("$PI" -N $NODE -j probe "$@" --count "$n") || { echo "probe failed: $out"; return 1; }
	jq -e --argjson n "$n" '.summary.answered == $n' <<<"$out" >/dev/null ||
		{ echo "summary: $(jq -c .summary <<<"$out")"; return 1; }
}
pod_name() { "$PI" -N $NODE -j pod show "$1" 2>/dev/null | jq -r '.name // empty' 2>/dev/null; }

# udp_count FROM TO DST PORT N [--bind SRC]: datagrams that arrive
udp_count() {
	local from=$1 to=$2 dst=$3 port=$4 n=$5 rpid
	shift 5
	in_ctr "$to" "$PINET" udp-recv "$port" "$n" 2000 >"$T/udp" &
	rpid=$!
	sleep 0.3
	in_ctr "$from" "$PINET" udp-send "$@" "$dst" "$port" "$n" >/dev/null
	wait $rpid
	head -n 1 "$T/udp" | awk '{print $2}'
}

for c in a b c; do
	check run_$c run_ctr ${PREFIX}$c $NET
done
for c in a b c; do
	eval "ip_$c=$(ip_of ${PREFIX}$c $NET)"
done
expect_eq pods_adopted "$("$PI" -N $NODE -j pod list | jq -c '[.[] | .name] | sort')" \
	"[\"${PREFIX}a\",\"${PREFIX}b\",\"${PREFIX}c\"]"
expect_eq pod_address "$("$PI" -N $NODE -j pod show ${PREFIX}a | jq -r .ipv4)" "$ip_a"
expect_eq pod_netns "$("$PI" -N $NODE -j pod show ${PREFIX}a | jq -r .netns)" "$(netns_of ${PREFIX}a)"
check ping_from_container PM exec ${PREFIX}a ping -c 2 -W 2 "$ip_b"
expect_eq traffic_a_to_c "$(udp_count ${PREFIX}a ${PREFIX}c "$ip_c" 7300 5)" 5

# Injection: pm-a sends as pm-b; pm-b's egress path counts every packet once
check inject_allow "$PI" -N $NODE inject allow ${PREFIX}a --as ${PREFIX}b
eb=$(pod_stat $NODE ${PREFIX}b .egress_packets)
in_ctr ${PREFIX}c "$PINET" udp-recv 7301 20 2000 >"$T/udp" &
sleep 0.3
in_ctr ${PREFIX}a "$PINET" udp-send --bind "$ip_b" "$ip_c" 7301 20 >/dev/null
wait
expect_eq inject_delivered "$(head -n 1 "$T/udp" | awk '{print $2}')" 20
check inject_from_target sh -c "grep -q 'from $ip_b count 20' $T/udp"
expect_eq inject_target_egress_once "$(($(pod_stat $NODE ${PREFIX}b .egress_packets) - eb))" 20
# An unauthorised container's spoofed packets are not delivered
sp=$(pod_stat $NODE ${PREFIX}c .drops.spoofed)
expect_eq spoof_not_delivered "$(udp_count ${PREFIX}c ${PREFIX}a "$ip_a" 7302 5 --bind "$ip_b")" 0
expect_eq spoof_dropped "$(($(pod_stat $NODE ${PREFIX}c .drops.spoofed) - sp))" 5

# A probe from a container, answered by another
in_ctr ${PREFIX}b "$PINET" tcp-server 7303 --count 2 --timeout 8000 >/dev/null &
ctr_listens ${PREFIX}b 7303 >/dev/null
check probe_answered probe_all_answered 2 --from ${PREFIX}a --to $ip_b:7303
wait

# A transparent proxy in a container of its own, for pm-c: the server in
# pm-b sees pm-c's address, the proxy saw the original destination.
if check run_proxy run_ctr ${PREFIX}p $NET; then
	# nsenter execs the proxy: $! is the proxy itself, which the kill
	# below then ends (through the in_ctr function it would be a subshell)
	nsenter --net="$(netns_of ${PREFIX}p)" "$BUILD/podinject-proxy" -v --connect-timeout 10000 15001 >"$T/px" 2>"$T/pxlog" </dev/null &
	PROXY_PID=$!
	for _ in $(seq 50); do grep -q ready "$T/px" 2>/dev/null && break; sleep 0.1; done
	check proxy_add "$PI" -N $NODE proxy add ${PREFIX}p --port 15001 --for ${PREFIX}c
	in_ctr ${PREFIX}b "$PINET" tcp-server 8080 --sink --timeout 10000 >"$T/srv" 2>&1 &
	srv=$!
	ctr_listens ${PREFIX}b 8080 >/dev/null
	check proxy_connect in_ctr ${PREFIX}c "$PINET" tcp-connect --timeout 5000 "$ip_b" 8080 --send 100000
	wait $srv
	check proxy_server_sees_client grep -q "^accept $ip_c " "$T/srv"
	check proxy_took_it grep -q "conn $ip_c:[0-9]* -> $ip_b:8080" "$T/pxlog"
	check proxy_del "$PI" -N $NODE proxy del ${PREFIX}p --for ${PREFIX}c
	kill $PROXY_PID 2>/dev/null
	wait $PROXY_PID 2>/dev/null
	PROXY_PID=
fi

# Main mode: podinject makes the pair, host-local the address
if out=$(run_ctr ${PREFIX}m $NETM 2>&1); then
	pass run_main
	ip_m=$(ip_of ${PREFIX}m $NETM)
	expect_eq main_pod_address "$("$PI" -N $NODE -j pod show ${PREFIX}m | jq -r .ipv4)" "$ip_m"
	expect_eq main_pod_own_device "$("$PI" -N $NODE -j pod show ${PREFIX}m | jq -r .adopted)" false
	expect_eq main_to_chained "$(udp_count ${PREFIX}m ${PREFIX}a "$ip_a" 7304 5)" 5
	expect_eq chained_to_main "$(udp_count ${PREFIX}b ${PREFIX}m "$ip_m" 7305 5)" 5
	check ping_main PM exec ${PREFIX}m ping -c 1 -W 2 "$ip_c"
else
	fail run_main "$(echo "$out" | tail -n 1)"
	expect_eq main_failed_nothing_left "$(pod_name ${PREFIX}m)" ""
fi

# stop and rm: nothing of podinject's is left but the node itself
ids=$(node_prog_ids $NODE)
check stop PM stop -t 0 ${PREFIX}a ${PREFIX}b ${PREFIX}c ${PREFIX}p
PM stop -t 0 ${PREFIX}m >/dev/null 2>&1
check rm PM rm ${PREFIX}a ${PREFIX}b ${PREFIX}c ${PREFIX}p
PM rm ${PREFIX}m >/dev/null 2>&1
expect_eq stop_no_pods "$("$PI" -N $NODE -j pod list | jq length)" 0
node_dir=$(node_pin_dir $NODE)
expect_eq stop_no_pod_pins "$(ls "$node_dir" | grep -c '^link_pod_')" 0
expect_eq stop_no_injection "$("$PI" -N $NODE -j inject list | jq length)" 0
expect_eq stop_no_links "$(links_of_progs $ids)" 0
expect_eq stop_no_main_device "$(ip -o link show | grep -c ': pi[0-9a-f]\{11\}[@:]')" 0
expect_eq stop_ipam_freed "$(ls "$T/ipam/$NET" "$T/ipam/$NETM" 2>/dev/null | grep -c '^10\.')" 0
check node_down "$PI" -N $NODE node down
check node_down_no_pins test ! -e "$node_dir"
