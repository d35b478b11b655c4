#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Kubernetes' own path to a CNI plugin: Debian's containerd 1.6 with its CRI
# service, driven over gRPC as the kubelet drives it (RunPodSandbox,
# PodSandboxStatus, StopPodSandbox, RemovePodSandbox: tests/tools/cri/),
# calls the conflist through go-cni with the kubelet's CNI_ARGS
# (K8S_POD_NAMESPACE, K8S_POD_NAME, ...). The network is ptp + host-local +
# podinject chained. This containerd is our own: its root, state, socket,
# CNI config and plugin dirs and the sandbox image are all in a temporary
# directory; the image is made here from busybox (no registry). The one
# shared place it writes is /run/netns (cni-UUID namespaces), which
# RemovePodSandbox empties.
#
#   host namespace = podinject node cd-cni (made by the plugin)
#     vethXXXXXXXX <-> eth0  sandbox cd-ns/a  10.125.0.x  (injects as cd-ns/b)
#     vethXXXXXXXX <-> eth0  sandbox cd-ns/b
#     vethXXXXXXXX <-> eth0  sandbox cd-ns/c              (spoofs b: dropped)
source "$(dirname "$0")/lib.sh"
require_root
EXPECT=31
PREFIX=${PREFIX:-cd-}
NODE=${PREFIX}cni
NET=${PREFIX}net
CNI=$BUILD/podinject-cni
PY=/usr/bin/python3
T=$(mktemp -d /tmp/${PREFIX}containerd.XXXXXX)
SOCK=$T/containerd.sock
FWD=$(cat /proc/sys/net/ipv4/ip_forward)
CD_PID=
declare -A SB=()
declare -A NS_INO=()	# the sandboxes' namespaces: path -> inode

# RUNTIME_NETNS (t_containerd_netns.sh): containerd runs in a network
# namespace of its own, as in a kind node, after a host node of the same
# name was made in the root namespace. Every podinject command of the suite
# then runs in the runtime's namespace; the root namespace's node must see
# none of it.
RUN=
PI_ROOT=$PI
if [ -n "${RUNTIME_NETNS:-}" ]; then
	ip netns add "$RUNTIME_NETNS"
	ip -n "$RUNTIME_NETNS" link set lo up
	RUN="nsenter --net=/run/netns/$RUNTIME_NETNS"
	printf '#!/bin/sh\nexec %s %s "$@"\n' "$RUN" "$PI" >"$T/pi-in-runtime"
	chmod +x "$T/pi-in-runtime"
	PI=$T/pi-in-runtime
fi

cri() { CRI_PB_DIR=$T/pb "$PY" "$ROOT/tests/tools/cri/cri.py" "$SOCK" "$@"; }
cleanup() {
	local id
	for id in "${SB[@]}"; do
		cri stop "$id" >/dev/null 2>&1
		cri remove "$id" >/dev/null 2>&1
	done
	if [ -n "$CD_PID" ]; then
		kill "$CD_PID" 2>/dev/null
		wait "$CD_PID" 2>/dev/null
	fi
	# What a containerd killed early leaves: its shims (ours by their
	# address), the sandboxes' processes (ours by their namespaces, which
	# are ours by inode) and those namespaces, the mounts under $T.
	pkill -f "containerd-shim-runc-v2 .*-address $SOCK" 2>/dev/null
	[ ${#NS_INO[@]} = 0 ] ||	# none made: skipped, or before the first sandbox
	for p in $(pgrep -f "^/bin/busybox sleep 2147483647$" 2>/dev/null); do
		for n in "${!NS_INO[@]}"; do
			[ "$(stat -L -c %i /proc/$p/ns/net 2>/dev/null)" = "${NS_INO[$n]}" ] && kill -9 "$p"
		done
	done
	for n in "${!NS_INO[@]}"; do
		[ "$(stat -L -c %i "$n" 2>/dev/null)" = "${NS_INO[$n]}" ] && ip netns del "$(basename "$n")"
	done
	grep " $T/" /proc/mounts | awk '{print $2}' | sort -r | xargs -r -n1 umount -l 2>/dev/null
	rm -f /var/lib/cni/results/$NET-*
	[ -n "$RUN" ] && "$PI_ROOT" -N $NODE node down >/dev/null 2>&1
	cleanup_all
	echo "$FWD" >/proc/sys/net/ipv4/ip_forward
	[ -n "${CD_TEST_KEEP:-}" ] && echo "kept $T" || rm -rf "$T"
}
trap cleanup EXIT

for b in containerd containerd-shim-runc-v2 ctr runc protoc; do
	if ! command -v $b >/dev/null; then
		skip all "$b is not installed (apt-get install containerd runc protobuf-compiler)"
		exit 0
	fi
done
if ! "$PY" -c 'import grpc, google.protobuf' 2>/dev/null; then
	skip all "Debian's python3-grpcio or python3-protobuf is missing"
	exit 0
fi
if [ ! -x /usr/lib/cni/ptp ] || [ ! -x /bin/busybox ]; then
	skip all "needs /usr/lib/cni/ptp (containernetworking-plugins) and /bin/busybox (busybox-static)"
	exit 0
fi
mkdir -p "$T/pb" "$T/bin" "$T/net.d" "$T/ipam" "$T/logs" "$T/img/blobs/sha256" "$T/layer/bin"
protoc --proto_path="$ROOT/tests/tools/cri" --python_out="$T/pb" "$ROOT/tests/tools/cri/runtime.proto" || {
	fail protoc "protoc failed on tests/tools/cri/runtime.proto"
	exit 1
}
for p in ptp host-local loopback; do ln -s /usr/lib/cni/$p "$T/bin/$p"; done
ln -s "$CNI" "$T/bin/podinject"
LOG=$T/podinject.log
jq -n --arg n $NET --arg d "$T/ipam" --arg node $NODE --arg log "$LOG" '
  {cniVersion: "1.0.0", name: $n, plugins: [
    {type: "ptp", ipMasq: false,
     ipam: {type: "host-local", dataDir: $d, ranges: [[{subnet: "10.125.0.0/24"}]],
            routes: [{dst: "0.0.0.0/0"}]}},
    {type: "podinject", node: $node, logFile: $log}]}' >"$T/net.d/10-$NET.conflist"

# The sandbox ("pause") image, an OCI layout made here: busybox sleeping.
IMAGE=localhost/${PREFIX}pause:1
blob() {	# blob FILE: moves FILE into the layout, prints "sha256:HEX SIZE"
	local h s
	h=$(sha256sum "$1" | cut -d' ' -f1)
	s=$(stat -c %s "$1")
	mv "$1" "$T/img/blobs/sha256/$h"
	echo "sha256:$h $s"
}
cp /bin/busybox "$T/layer/bin/busybox"
tar -C "$T/layer" -cf "$T/layer.tar" bin
read -r ldig lsize < <(blob "$T/layer.tar")
jq -n --arg l "$ldig" '{architecture: "amd64", os: "linux",
	config: {Entrypoint: ["/bin/busybox", "sleep", "2147483647"]},
	rootfs: {type: "layers", diff_ids: [$l]}}' >"$T/config.json"
read -r cdig csize < <(blob "$T/config.json")
jq -n --arg c "$cdig" --argjson cs "$csize" --arg l "$ldig" --argjson ls "$lsize" '
	{schemaVersion: 2, mediaType: "application/vnd.oci.image.manifest.v1+json",
	 config: {mediaType: "application/vnd.oci.image.config.v1+json", digest: $c, size: $cs},
	 layers: [{mediaType: "application/vnd.oci.image.layer.v1.tar", digest: $l, size: $ls}]}' \
	>"$T/manifest.json"
read -r mdig msize < <(blob "$T/manifest.json")
jq -n --arg m "$mdig" --argjson ms "$msize" --arg name "$IMAGE" '
	{schemaVersion: 2, manifests: [{mediaType: "application/vnd.oci.image.manifest.v1+json",
	 digest: $m, size: $ms, platform: {architecture: "amd64", os: "linux"},
	 annotations: {"io.containerd.image.name": $name, "org.opencontainers.image.ref.name": "1"}}]}' \
	>"$T/img/index.json"
echo '{"imageLayoutVersion": "1.0.0"}' >"$T/img/oci-layout"
tar -C "$T/img" -cf "$T/pause.tar" .

cat >"$T/config.toml" <<EOF
version = 2
root = "$T/root"
state = "$T/state"
[grpc]
  address = "$SOCK"
[ttrpc]
  address = "$SOCK.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$T/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$IMAGE"
  # A sandbox asks for oom_score_adj -998, which a nested or restricted
  # host refuses ("nsexec: failed to update /proc/self/oom_score_adj");
  # clamped at containerd's own, as in rootless and nested setups.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "native"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$T/bin"
    conf_dir = "$T/net.d"
    max_conf_num = 1
EOF
if [ -n "$RUN" ]; then
	check root_node_up "$PI_ROOT" -N $NODE node up --host
	root_dir=$(PI=$PI_ROOT node_pin_dir $NODE)
fi
$RUN containerd --config "$T/config.toml" >"$T/containerd.log" 2>&1 </dev/null &
CD_PID=$!
for _ in $(seq 100); do
	cri version >/dev/null 2>&1 && break
	sleep 0.2
done
if ! ver=$(cri version 2>&1); then
	fail containerd_up "containerd's CRI does not answer: $ver; $(tail -n 3 "$T/containerd.log")"
	exit 1
fi
pass containerd_up
echo "# $ver"
check image_import ctr --address "$SOCK" -n k8s.io images import --snapshotter native "$T/pause.tar"

# run_sb NAME: RunPodSandbox in namespace cd-ns, as the kubelet asks for a
# pod; the sandbox id goes into SB[NAME]
run_sb() {
	local id ns
	if id=$(cri run "$1" ${PREFIX}ns "uid-$1" "$T/logs/$1" 2>&1) && [ -n "$id" ]; then
		SB[$1]=$id
		ns=$(cri status "$id" | jq -r .netns)
		[ -e "$ns" ] && NS_INO[$ns]=$(stat -L -c %i "$ns")
		pass run_$1
	else
		fail run_$1 "RunPodSandbox: $(echo "$id" | tail -n 1)"
		return 1
	fi
}
st() { cri status "${SB[$1]}" | jq -r ".$2"; }
in_sb() { local ns; ns=$(st "$1" netns); shift; nsenter --net="$ns" "$@"; }
# sb_udp_listening SANDBOX PORT: the receiver bound before anything is
# sent (a fixed 0.3 s was too short once, on a host busy with the kernel
# lab: every datagram came before the socket)
sb_udp_listening() {
	local i
	for i in $(seq 250); do
		[ -n "$(in_sb "$1" ss -Hnul "( sport = :$2 )")" ] && return 0
		sleep 0.02
	done
}
udp_count() {	# udp_count FROM TO DST PORT N [--bind SRC]
	local from=$1 to=$2 dst=$3 port=$4 n=$5 rpid
	shift 5
	in_sb "$to" "$PINET" udp-recv "$port" "$n" 2000 >"$T/udp" &
	rpid=$!
	sb_udp_listening "$to" "$port"
	in_sb "$from" "$PINET" udp-send "$@" "$dst" "$port" "$n" >/dev/null
	wait $rpid
	head -n 1 "$T/udp" | awk '{print $2}'
}

ok=1
for s in a b c; do
	run_sb $s || ok=0
done
if [ $ok = 0 ]; then
	echo "# containerd: $(tail -n 5 "$T/containerd.log")"
	exit 1
fi
for s in a b c; do
	eval "ip_$s=\$(st $s ip)"
done
expect_eq sandboxes_ready "$(for s in a b c; do st $s state; done | sort -u)" ready
# the kubelet's CNI_ARGS name the pods namespace/name
expect_eq pods_adopted "$("$PI" -N $NODE -j pod list | jq -c '[.[] | .name] | sort')" \
	"[\"${PREFIX}ns/a\",\"${PREFIX}ns/b\",\"${PREFIX}ns/c\"]"
expect_eq pod_address "$("$PI" -N $NODE -j pod show ${PREFIX}ns/a | jq -r .ipv4)" "$ip_a"
expect_eq pod_netns "$("$PI" -N $NODE -j pod show ${PREFIX}ns/a | jq -r .netns)" "$(st a netns)"
expect_eq pod_attach_id "$("$PI" -N $NODE -j pod show ${PREFIX}ns/a | jq -r '.attach_id | split(":")[2]')" "${SB[a]}"
expect_eq traffic_a_to_c "$(udp_count a c "$ip_c" 7400 5)" 5

# Injection: a sends as b; b's egress path counts every packet once
check inject_allow "$PI" -N $NODE inject allow ${PREFIX}ns/a --as ${PREFIX}ns/b
eb=$(pod_stat $NODE ${PREFIX}ns/b .egress_packets)
in_sb c "$PINET" udp-recv 7401 20 2000 >"$T/udp" &
rpid=$!
sb_udp_listening c 7401
in_sb a "$PINET" udp-send --bind "$ip_b" "$ip_c" 7401 20 >/dev/null
wait $rpid
expect_eq inject_delivered "$(head -n 1 "$T/udp" | awk '{print $2}')" 20
check inject_from_target sh -c "grep -q 'from $ip_b count 20' $T/udp"
expect_eq inject_target_egress_once "$(($(pod_stat $NODE ${PREFIX}ns/b .egress_packets) - eb))" 20
sp=$(pod_stat $NODE ${PREFIX}ns/c .drops.spoofed)
expect_eq spoof_not_delivered "$(udp_count c a "$ip_a" 7402 5 --bind "$ip_b")" 0
expect_eq spoof_dropped "$(($(pod_stat $NODE ${PREFIX}ns/c .drops.spoofed) - sp))" 5

# Policy on a sandbox the runtime made: c may not reach a's port 7403
check policy_deny "$PI" -N $NODE policy add ${PREFIX}ns/c egress deny to "$ip_a/32" proto udp port 7403
expect_eq policy_denied "$(udp_count c a "$ip_a" 7403 5)" 0
expect_eq policy_other_port "$(udp_count c a "$ip_a" 7404 5)" 5

# A probe from one sandbox to another
in_sb b "$PINET" tcp-server 7405 --count 2 --timeout 8000 >/dev/null &
rpid=$!
for _ in $(seq 100); do	# listening, however loaded the machine is
	[ -n "$(in_sb b ss -Hntl "( sport = :7405 )")" ] && break
	sleep 0.05
done
check probe_answered sh -c "$PI -N $NODE -j probe --from ${PREFIX}ns/a --to $ip_b:7405 --count 2 | jq -e '.summary.answered == 2'"
wait $rpid

# StopPodSandbox is the CNI DEL; RemovePodSandbox drops the namespace
ids=$(node_prog_ids $NODE)
ns_a=$(st a netns)
for s in a b c; do
	check stop_$s cri stop "${SB[$s]}"
done
expect_eq stop_no_pods "$("$PI" -N $NODE -j pod list | jq length)" 0
expect_eq stop_no_pod_pins "$(ls "$(node_pin_dir $NODE)" | grep -c '^link_pod_')" 0
expect_eq stop_no_links "$(links_of_progs $ids)" 0
expect_eq stop_no_rules "$("$PI" -N $NODE -j policy list 2>/dev/null | jq length)" 0
for s in a b c; do cri remove "${SB[$s]}" && unset "SB[$s]"; done
expect_eq remove_netns_gone "$(test -e "$ns_a" && echo present || echo gone)" gone
expect_eq remove_ipam_freed "$(ls "$T/ipam/$NET" 2>/dev/null | grep -c '^10\.')" 0
if [ -n "$RUN" ]; then
	check runtime_node_own_dir test "$(node_pin_dir $NODE)" != "$root_dir"
fi
check node_down "$PI" -N $NODE node down
if [ -n "$RUN" ]; then
	# The root namespace's node saw none of it, and is still whole.
	expect_eq root_node_untouched "$("$PI_ROOT" -N $NODE -j node show | jq -c '[.pods, .pin_dir]')" "[0,\"$root_dir\"]"
	check root_node_down "$PI_ROOT" -N $NODE node down
fi
