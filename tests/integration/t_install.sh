#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The DaemonSet's install step, run as the DaemonSet runs it: the image
# (built here by scripts/build-image.sh with buildah, offline) in podman,
# with a temporary CNI bin, conf and cache directory mounted where the
# DaemonSet mounts the host's. First install (a lone .conf becomes a
# conflist), a re-run that changes nothing, a primary CNI rewriting its
# file while the installer watches, a missing binary, stop (everything
# stays), and a pod that existed before the install being adopted.
# The manifest is checked offline.
source "$(dirname "$0")/lib.sh"
require_root
EXPECT=63
PREFIX=in-
NODE=${PREFIX}cni
T=$(mktemp -d /tmp/${PREFIX}install.XXXXXX)
FWD=$(cat /proc/sys/net/ipv4/ip_forward)
IMG=localhost/podinject:test
export CONTAINERS_CONF=$T/containers.conf
PM() {
	podman --root "$T/store/root" --runroot "$T/store/runroot" --tmpdir "$T/tmp" \
		--storage-driver vfs --runtime runc "$@"
}
cleanup() {
	PM rm -f -t 0 ${PREFIX}inst >/dev/null 2>&1
	PM rm -f -t 0 ${PREFIX}metrics >/dev/null 2>&1
	cleanup_all
	echo "$FWD" >/proc/sys/net/ipv4/ip_forward
	[ -n "${CNI_TEST_KEEP:-}" ] && echo "kept $T" || rm -rf "$T"
}
trap cleanup EXIT

# The suite as a whole needs both (the manifest part only yq): one
# SKIP line without them, as tests/run.sh counts a skipped suite.
if ! command -v podman >/dev/null || ! command -v buildah >/dev/null; then
	skip all "podman or buildah is not installed"
	exit 0
fi

# ---- the manifest, offline -----------------------------------------------------
M=$ROOT/deploy/kubernetes/podinject.yaml
if command -v yq >/dev/null; then
	ds=$(yq -s '.[] | select(.kind == "DaemonSet")' "$M")
	expect_eq manifest_daemonset "$(jq -r '.apiVersion + " " + .metadata.name' <<<"$ds")" "apps/v1 podinject"
	expect_eq manifest_selector "$(jq -r '.spec.selector.matchLabels == .spec.template.metadata.labels' <<<"$ds")" true
	expect_eq manifest_host_network "$(jq -r .spec.template.spec.hostNetwork <<<"$ds")" true
	expect_eq manifest_privileged "$(jq -r '.spec.template.spec.containers[0].securityContext.privileged' <<<"$ds")" true
	expect_eq manifest_mounts "$(jq -c '[.spec.template.spec.volumes[].hostPath.path // empty] | sort' <<<"$ds")" \
		'["/etc/cni/net.d","/opt/cni/bin","/run/netns","/run/podinject","/sys/fs/bpf","/var/lib/cni","/var/log"]'
	expect_eq manifest_mounts_bound "$(jq '[.spec.template.spec.volumes[].name] - [.spec.template.spec.containers[0].volumeMounts[].name] | length' <<<"$ds")" 0
	# a monitor, probe or apply run in either container (kubectl exec) and
	# one run on the host share the host's locks and records: before, each
	# container had a /run of its own, so a monitor there and one on the
	# host both read the node's rings and split its events
	expect_eq manifest_run_shared "$(jq -c '[.spec.template.spec.containers[] | [.volumeMounts[] | select(.mountPath == "/run/podinject") | .name] as $n | $n[0] // ""] as $mounted | [.spec.template.spec.volumes[] | select(.hostPath.path == "/run/podinject") | .name] as $v | [$mounted[] | . as $m | ($v | index($m)) != null]' <<<"$ds")" '[true,true]'
	expect_eq manifest_bpffs_propagation "$(jq -r '.spec.template.spec.containers[0].volumeMounts[] | select(.mountPath == "/sys/fs/bpf") | .mountPropagation' <<<"$ds")" Bidirectional
	expect_eq manifest_metrics_port "$(jq -r '.spec.template.metadata.annotations as $a |
		[$a["prometheus.io/scrape"], $a["prometheus.io/port"],
		 (.spec.template.spec.containers[] | select(.name == "metrics") | .ports[0].containerPort | tostring)] | join(" ")' <<<"$ds")" "true 9464 9464"
else
	skip manifest "no yq to read YAML"
fi

mkdir -p "$T/bin" "$T/net.d" "$T/cache/results" "$T/tmp" "$T/ipam"
H=$(ulimit -Hn)
cat >"$CONTAINERS_CONF" <<EOF
[containers]
default_ulimits = ["nofile=$H:$H", "nproc=32768:32768"]
[network]
network_backend = "cni"
network_config_dir = "$T/podman-net.d"
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
if ! out=$(IMAGE_STORE=$T/store "$ROOT/scripts/build-image.sh" "$T/image.tar" $IMG 2>&1); then
	fail image "$(echo "$out" | tail -n 1)"
	exit 1
fi
pass image
check image_archive test -s "$T/image.tar"
check image_loads PM load -q -i "$T/image.tar"

# A node whose primary CNI wrote a lone .conf, and a later file it ignores.
cat >"$T/net.d/10-ptp.conf" <<EOF
{"cniVersion": "1.0.0", "name": "${PREFIX}net", "type": "ptp", "ipMasq": false,
 "ipam": {"type": "host-local", "dataDir": "$T/ipam", "ranges": [[{"subnet": "10.125.0.0/24"}]],
          "routes": [{"dst": "0.0.0.0/0"}]}}
EOF
echo '{"cniVersion": "1.0.0", "name": "other", "plugins": [{"type": "bridge"}]}' >"$T/net.d/20-other.conflist"
other_sum=$(sha256sum <"$T/net.d/20-other.conflist")

install_args=(--network host --privileged
	-v "$T/bin:/host/opt/cni/bin" -v "$T/net.d:/host/etc/cni/net.d"
	-v "$T/cache:/host/var/lib/cni:ro" -v /sys/fs/bpf:/sys/fs/bpf -v /run/netns:/run/netns
	-e PODINJECT_NODE=$NODE -e PODINJECT_LOG=/tmp/podinject-cni.log)
install_once() { PM run --rm "${install_args[@]}" -e INSTALL_ONCE=1 $IMG; }

# ---- first install ----------------------------------------------------------------
check first_install install_once
check binary_installed cmp "$BUILD/podinject-cni" "$T/bin/podinject"
check binary_executable test -x "$T/bin/podinject"
# Every shared library the plugin needs beyond the C library's own is
# installed beside it (it links the rest in: the Makefile, CNI_LDLIBS).
plugin_libs=$(ldd "$BUILD/podinject-cni" | awk '/=>/ && $3 ~ /^\// {print $1}' |
	grep -Ev '^(libc|libm|libpthread|libdl|librt)\.so')
check binary_libs_named test -n "$plugin_libs"
check binary_libs sh -c 'for l in $1; do test -e "$2/$l" || { echo "missing $l"; exit 1; }; done' _ "$plugin_libs" "$T/bin/podinject.lib"
check binary_runs_on_host sh -c "echo '{\"cniVersion\":\"1.0.0\"}' | CNI_COMMAND=VERSION $T/bin/podinject | jq -e '.supportedVersions | index(\"1.0.0\")'"
check conf_to_conflist test -f "$T/net.d/10-ptp.conflist"
check conf_removed test ! -e "$T/net.d/10-ptp.conf"
expect_eq conflist_plugins "$(jq -c '[.plugins[].type]' "$T/net.d/10-ptp.conflist")" '["ptp","podinject"]'
expect_eq conflist_keeps_name "$(jq -r '.name + " " + .cniVersion' "$T/net.d/10-ptp.conflist")" "${PREFIX}net 1.0.0"
expect_eq conflist_node "$(jq -r '.plugins[1].node' "$T/net.d/10-ptp.conflist")" $NODE
expect_eq other_untouched "$(sha256sum <"$T/net.d/20-other.conflist")" "$other_sum"
expect_eq no_temp_files "$(ls -A "$T/net.d" "$T/bin" | grep -c '^\.')" 0

# ---- re-run: nothing changes ------------------------------------------------------
sum=$(sha256sum <"$T/net.d/10-ptp.conflist")
bin_mtime=$(stat -c %Y.%N "$T/bin/podinject")
check rerun install_once
expect_eq rerun_conflist_same "$(sha256sum <"$T/net.d/10-ptp.conflist")" "$sum"
expect_eq rerun_binary_same "$(stat -c %Y.%N "$T/bin/podinject")" "$bin_mtime"
expect_eq rerun_one_entry "$(jq '[.plugins[] | select(.type == "podinject")] | length' "$T/net.d/10-ptp.conflist")" 1

npods() { "$PI" -N $NODE -j pod list 2>/dev/null | jq 'if type == "array" then length else 0 end'; }

# ---- a pod that existed before: adopted from libcni's cache -----------------------
ip netns add ${PREFIX}early
cid=$(printf '%064d' 7)
jq '.plugins[0] + {cniVersion, name}' "$T/net.d/10-ptp.conflist" >"$T/ptp.json"
res=$(env -i CNI_COMMAND=ADD CNI_CONTAINERID=$cid CNI_NETNS=/run/netns/${PREFIX}early CNI_IFNAME=eth0 \
	CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAME=early" CNI_PATH=/usr/lib/cni /usr/lib/cni/ptp <"$T/ptp.json")
jq -n --arg c $cid --arg n ${PREFIX}net --argjson r "$res" \
	'{kind: "cniCacheV1", containerId: $c, ifName: "eth0", networkName: $n,
	  cniArgs: [["IgnoreUnknown", "1"], ["K8S_POD_NAME", "early"]], result: $r}' \
	>"$T/cache/results/${PREFIX}net-$cid-eth0"
check adopt_existing_run install_once
expect_eq adopt_existing "$("$PI" -N $NODE -j pod list 2>/dev/null | jq -r '[.[] | .name] | join(",")')" early
expect_eq adopt_existing_device "$("$PI" -N $NODE -j pod show early | jq -r .hostdev)" \
	"$(jq -r '.interfaces[] | select(.sandbox == null) | .name' <<<"$res")"
check adopt_existing_rerun install_once
expect_eq adopt_existing_once "$(npods)" 1

# ---- the DaemonSet's metrics container: its command from the manifest, with
# this test's node and a free port of 127.0.0.1; serves, stops on SIGTERM --------
if [ -n "${ds:-}" ]; then
	mport=$((20000 + RANDOM % 20000))
	margs=$(jq -r '.spec.template.spec.containers[] | select(.name == "metrics") | .args[0]' <<<"$ds")
	margs=${margs//-N cni /-N $NODE }
	margs=${margs//'$(NODE_IP):9464'/127.0.0.1:$mport}
	# command: replaces the image's entrypoint, as in Kubernetes
	mcmd=($(jq -r '.spec.template.spec.containers[] | select(.name == "metrics") | .command[]' <<<"$ds"))
	PM run -d --name ${PREFIX}metrics --network host --privileged -v /sys/fs/bpf:/sys/fs/bpf \
		--entrypoint "${mcmd[0]}" $IMG "${mcmd[@]:1}" "$margs" >/dev/null
	got=
	for _ in $(seq 50); do
		got=$(curl -s http://127.0.0.1:$mport/metrics | grep "^podinject_node_pods{node=\"$NODE\"}")
		[ -n "$got" ] && break
		sleep 0.2
	done
	[ -n "$got" ] || got="no answer; its log: $(PM logs ${PREFIX}metrics 2>&1 | tail -n 3 | tr '\n' ' ')"
	expect_eq image_metrics_serves "$got" "podinject_node_pods{node=\"$NODE\"} 1"
	PM stop -t 5 ${PREFIX}metrics >/dev/null 2>&1
	expect_eq image_metrics_sigterm "$(PM inspect ${PREFIX}metrics --format '{{.State.ExitCode}}' 2>&1)" 0
	PM rm -f -t 0 ${PREFIX}metrics >/dev/null 2>&1
else
	skip image_metrics_serves "no yq to read the manifest"
	skip image_metrics_sigterm "no yq to read the manifest"
fi
# the runtime's DEL, now with podinject in the chain
jq -c --argjson r "$res" '.plugins[1] + {cniVersion, name, prevResult: $r}' "$T/net.d/10-ptp.conflist" |
	env -i CNI_COMMAND=DEL CNI_CONTAINERID=$cid CNI_NETNS=/run/netns/${PREFIX}early CNI_IFNAME=eth0 \
	CNI_PATH="$T/bin" "$T/bin/podinject" >/dev/null
expect_eq adopt_existing_del $? 0
expect_eq adopt_existing_gone "$(npods)" 0
env -i CNI_COMMAND=DEL CNI_CONTAINERID=$cid CNI_NETNS=/run/netns/${PREFIX}early CNI_IFNAME=eth0 \
	CNI_PATH=/usr/lib/cni /usr/lib/cni/ptp <"$T/ptp.json" >/dev/null
ip netns del ${PREFIX}early
rm -f "$T/cache/results/"*

# ---- watching: the primary CNI rewrites its config, the binary goes ---------------
check watch_start PM run -d --name ${PREFIX}inst "${install_args[@]}" -e POLL_SECONDS=1 $IMG
wait_for() {	# wait_for SECONDS CMD...
	local i n=$(($1 * 5))
	shift
	for i in $(seq 1 $n); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.2
	done
	return 1
}
has_podinject() { jq -e '[.plugins[].type] | index("podinject")' "$1"; }
# a primary CNI writes its file anew (temporary name, rename), without us
jq '.plugins |= [.[0]]' "$T/net.d/10-ptp.conflist" >"$T/net.d/.rewrite" && mv "$T/net.d/.rewrite" "$T/net.d/10-ptp.conflist"
check rewrite_reinserted wait_for 10 has_podinject "$T/net.d/10-ptp.conflist"
expect_eq rewrite_one_entry "$(jq '[.plugins[] | select(.type == "podinject")] | length' "$T/net.d/10-ptp.conflist")" 1
# ...or puts a lone .conf first
jq '.plugins[0] + {cniVersion, name}' "$T/net.d/10-ptp.conflist" >"$T/net.d/05-new.conf"
check rewrite_conf_converted wait_for 10 test -f "$T/net.d/05-new.conflist" -a ! -e "$T/net.d/05-new.conf"
check rewrite_conf_has_podinject has_podinject "$T/net.d/05-new.conflist"
rm -f "$T/bin/podinject"
check binary_put_back wait_for 10 cmp "$BUILD/podinject-cni" "$T/bin/podinject"
PM logs ${PREFIX}inst >"$T/installer.log" 2>&1

# ---- stop: the plugin and the config stay -----------------------------------------
check stop PM stop -t 10 ${PREFIX}inst
expect_eq stop_exit_code "$(PM inspect -f '{{.State.ExitCode}}' ${PREFIX}inst)" 0
check stop_binary_kept test -x "$T/bin/podinject"
check stop_config_kept has_podinject "$T/net.d/05-new.conflist"
check stop_config_kept_10 has_podinject "$T/net.d/10-ptp.conflist"
PM rm ${PREFIX}inst >/dev/null
"$PI" -N $NODE node down >/dev/null 2>&1

# ---- an upgrade under traffic, the desired state, a recovery (issue 21) -----
# Two pods set up by the runtime (ptp, in libcni's cache) and adopted by
# the previous release's plugin (v0.1, built from git history): its node,
# pinned where v0.1 pins a host node. The new image's install step, run
# while a UDP flow with sequence numbers goes from one pod to the other,
# migrates that node before the new plugin takes its place: not a datagram
# lost. It then applies PODINJECT_STATE. Wiped (`node down --force`), the
# node is rebuilt by the next install step alone (adoption from the cache,
# then the state): the same export, traffic passing.
UP_CHECKS="up_prev_release up_pods_adopted_by_prev up_old_node up_install up_flow_kept up_migrated_before_rename up_node_migrated up_plugin_replaced up_new_add_works up_state_applied up_state_denies up_rebuilt_pods up_rebuilt_export up_rebuilt_traffic"
if ! PREV=$(prev_release v0.1); then
	for c in $UP_CHECKS; do skip "$c" "no git history with v0.1 here"; done
	exit 0
fi
pass up_prev_release
rm -rf "$T/cache/results" "$T/ipam"
mkdir -p "$T/cache/results" "$T/ipam" "$T/state"
cp "$PREV/build/podinject-cni" "$T/bin/podinject"	# the plugin in place
uprun() {	# uprun NAME CID: a pod as the runtime sets it up, cached
	local res
	ip netns add ${PREFIX}$1
	res=$(env -i CNI_COMMAND=ADD CNI_CONTAINERID=$2 CNI_NETNS=/run/netns/${PREFIX}$1 CNI_IFNAME=eth0 \
		CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=up;K8S_POD_NAME=$1" CNI_PATH=/usr/lib/cni \
		/usr/lib/cni/ptp <"$T/ptp.json") || return 1
	jq -n --arg c $2 --arg n ${PREFIX}net --argjson r "$res" --arg p $1 \
		'{kind: "cniCacheV1", containerId: $c, ifName: "eth0", networkName: $n,
		  cniArgs: [["IgnoreUnknown", "1"], ["K8S_POD_NAMESPACE", "up"], ["K8S_POD_NAME", $p]],
		  result: $r}' >"$T/cache/results/${PREFIX}net-$2-eth0"
	# the previous release's plugin, chained after ptp as the runtime runs it
	jq -c --argjson r "$res" '.plugins[] | select(.type == "podinject") + {cniVersion: "1.0.0", name: "'${PREFIX}net'", prevResult: $r}' \
		"$T/net.d/10-ptp.conflist" |
		env -i CNI_COMMAND=ADD CNI_CONTAINERID=$2 CNI_NETNS=/run/netns/${PREFIX}$1 CNI_IFNAME=eth0 \
		CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=up;K8S_POD_NAME=$1" CNI_PATH="$T/bin" \
		"$T/bin/podinject" >/dev/null
}
jq '.plugins[0] + {cniVersion, name}' "$T/net.d/10-ptp.conflist" >"$T/ptp.json"
ok=0
uprun ua "$(printf '%064d' 21)" && uprun ub "$(printf '%064d' 22)" && ok=1
expect_eq up_pods_adopted_by_prev "$ok:$("$PREV/build/podinject" -N $NODE -j pod list 2>/dev/null | jq -c '[.[].name] | sort')" '1:["up/ua","up/ub"]'
check up_old_node sh -c "'$PI' -N $NODE node show 2>&1 | grep -q 'node upgrade'"
ipb=$(in_ns ${PREFIX}ub ip -4 -o addr show eth0 | awk '{print $4}' | cut -d/ -f1)
in_ns ${PREFIX}ub "$BUILD/useq" recv 7300 150000 5000 30000 >"$T/useq.recv" &
urecv=$!
wait_udp_listen ${PREFIX}ub 7300 >/dev/null
in_ns ${PREFIX}ua "$BUILD/useq" send "$ipb" 7300 10000 150000 >"$T/useq.sent" &
usend=$!
sleep 1
jq -n --arg b "$ipb/32" '{apiVersion: "podinject/v1",
	pods: {"up/ua": {egress: [{action: "deny", to: $b, proto: "udp", port: 7301}]},
	       "up/zz": {egress: [{action: "deny"}]}}}' >"$T/state/state.json"
PM run --rm "${install_args[@]}" -v "$T/state:/state:ro" -e PODINJECT_STATE=/state/state.json \
	-e INSTALL_ONCE=1 $IMG >"$T/up.log" 2>&1
expect_eq up_install "$?" 0
wait $usend $urecv
# the flow outlasted the install step (15 s at 10 000/s)
expect_eq up_flow_kept "$(cat "$T/useq.sent") / $(awk '{print $1, $2, $3, $4, $5, $6}' "$T/useq.recv")" \
	"sent 150000 / received 150000 missing 0 duplicated 0"
# the installer's words in order: the upgrade, then the plugin installed
expect_eq up_migrated_before_rename "$(grep -o 'upgraded from ABI 4\|installed .*/podinject$' "$T/up.log" | tr '\n' ';')" \
	"upgraded from ABI 4;installed /host/opt/cni/bin/podinject;"
expect_eq up_node_migrated "$("$PI" -N $NODE -j node show | jq -c '[.upgraded_from_abi, .pods]')" "[4,2]"
check up_plugin_replaced cmp "$BUILD/podinject-cni" "$T/bin/podinject"
# a new pod's ADD through the new plugin, on the migrated node
ip netns add ${PREFIX}uc
cidc=$(printf '%064d' 23)
resc=$(env -i CNI_COMMAND=ADD CNI_CONTAINERID=$cidc CNI_NETNS=/run/netns/${PREFIX}uc CNI_IFNAME=eth0 \
	CNI_PATH=/usr/lib/cni /usr/lib/cni/ptp <"$T/ptp.json")
jq -c --argjson r "$resc" '.plugins[] | select(.type == "podinject") + {cniVersion: "1.0.0", name: "'${PREFIX}net'", prevResult: $r}' \
	"$T/net.d/10-ptp.conflist" |
	env -i CNI_COMMAND=ADD CNI_CONTAINERID=$cidc CNI_NETNS=/run/netns/${PREFIX}uc CNI_IFNAME=eth0 \
	CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=up;K8S_POD_NAME=uc" CNI_PATH="$T/bin" "$T/bin/podinject" >/dev/null
expect_eq up_new_add_works "$?:$("$PI" -N $NODE -j pod list | jq length)" "0:3"
jq -c --argjson r "$resc" '.plugins[] | select(.type == "podinject") + {cniVersion: "1.0.0", name: "'${PREFIX}net'", prevResult: $r}' \
	"$T/net.d/10-ptp.conflist" |
	env -i CNI_COMMAND=DEL CNI_CONTAINERID=$cidc CNI_NETNS=/run/netns/${PREFIX}uc CNI_IFNAME=eth0 \
	CNI_PATH="$T/bin" "$T/bin/podinject" >/dev/null
env -i CNI_COMMAND=DEL CNI_CONTAINERID=$cidc CNI_NETNS=/run/netns/${PREFIX}uc CNI_IFNAME=eth0 \
	CNI_PATH=/usr/lib/cni /usr/lib/cni/ptp <"$T/ptp.json" >/dev/null
ip netns del ${PREFIX}uc
# the state file: up/ua's rule (up/zz is another node's pod: left out)
expect_eq up_state_applied "$("$PI" -N $NODE -j policy list up/ua | jq -r '.[] | "\(.action) \(.proto) \(.port)"')" "deny udp 7301"
in_ns ${PREFIX}ub "$BUILD/useq" recv 7301 5 1500 >"$T/useq.deny" &
urecv=$!
wait_udp_listen ${PREFIX}ub 7301 >/dev/null
in_ns ${PREFIX}ua "$BUILD/useq" send "$ipb" 7301 1000 5 >/dev/null
wait $urecv
expect_eq up_state_denies "$(awk '{print $2}' "$T/useq.deny")" 0
# a wipe, and the install step alone rebuilds the node
before=$("$PI" -N $NODE export)
"$PI" -N $NODE node down --force >/dev/null 2>&1
PM run --rm "${install_args[@]}" -v "$T/state:/state:ro" -e PODINJECT_STATE=/state/state.json -e INSTALL_ONCE=1 $IMG >"$T/rebuild.log" 2>&1
expect_eq up_rebuilt_pods "$("$PI" -N $NODE -j pod list 2>/dev/null | jq -c '[.[].name] | sort')" '["up/ua","up/ub"]'
expect_eq up_rebuilt_export "$("$PI" -N $NODE export 2>&1)" "$before"
in_ns ${PREFIX}ub "$BUILD/useq" recv 7300 100 2000 >"$T/useq.after" &
urecv=$!
wait_udp_listen ${PREFIX}ub 7300 >/dev/null
in_ns ${PREFIX}ua "$BUILD/useq" send "$ipb" 7300 1000 100 >/dev/null
wait $urecv
expect_eq up_rebuilt_traffic "$(awk '{print $1, $2, $3, $4}' "$T/useq.after")" "received 100 missing 0"
for p in ua ub; do
	env -i CNI_COMMAND=DEL CNI_CONTAINERID=$(printf '%064d' $([ $p = ua ] && echo 21 || echo 22)) \
		CNI_NETNS=/run/netns/${PREFIX}$p CNI_IFNAME=eth0 CNI_PATH=/usr/lib/cni /usr/lib/cni/ptp <"$T/ptp.json" >/dev/null
	ip netns del ${PREFIX}$p
done
"$PI" -N $NODE node down >/dev/null 2>&1
