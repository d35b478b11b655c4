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
EXPECT=47
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
	expect_eq manifest_mounts "$(jq -c '[.spec.template.spec.volumes[].hostPath.path] | sort' <<<"$ds")" \
		'["/etc/cni/net.d","/opt/cni/bin","/run/netns","/sys/fs/bpf","/var/lib/cni","/var/log"]'
	expect_eq manifest_mounts_bound "$(jq '[.spec.template.spec.volumes[].name] - [.spec.template.spec.containers[0].volumeMounts[].name] | length' <<<"$ds")" 0
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
check binary_libs test -e "$T/bin/podinject.lib/libjansson.so.4"
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
