#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# podinject-cni called exactly as a container runtime (libcni) calls a
# conflist: the environment, the plugin config with cniVersion and name on
# stdin, prevResult from the previous plugin on ADD and from the cached
# result on CHECK and DEL, DEL in reverse order. The other plugins are
# Debian's real ptp, bridge, macvlan and host-local. Nothing here touches
# /etc/cni or /var/lib/cni: configs, IPAM state and the result cache live
# in a temporary directory.
#
#   host namespace = podinject node ci-cni (node up --host, made by the
#   plugin on its first ADD)
#     vethXXXXXXXX (ptp) <-> eth0  ci-a  10.123.1.x  "ci-ns/a"
#     vethXXXXXXXX (ptp) <-> eth0  ci-b              "ci-ns/b"
#     vethXXXXXXXX (ptp) <-> eth0  ci-c              "ci-ns/c"
#     ci-br0 (bridge) -- vethXXXXXXXX <-> eth0  ci-br
#     ci-dummy0 -- macvlan eth0 in ci-mv (no pair: ADD must fail)
#   injection: ci-ns/a may send as ci-ns/b; ci-ns/c may not
source "$(dirname "$0")/lib.sh"
require_root
EXPECT=376
PREFIX=ci-
NODE=${PREFIX}cni
CNI=$BUILD/podinject-cni
T=$(mktemp -d /tmp/${PREFIX}cni.XXXXXX)
FWD=$(cat /proc/sys/net/ipv4/ip_forward)
cleanup() {
	local ns
	for ns in $(ip netns list | awk '{print $1}' | grep "^$PREFIX"); do
		ip netns del "$ns" 2>/dev/null
	done
	ip link del ${PREFIX}br0 2>/dev/null
	ip link del ${PREFIX}dummy0 2>/dev/null
	cleanup_all
	rm -rf /sys/fs/bpf/${PREFIX}cni-foreign
	echo "$FWD" >/proc/sys/net/ipv4/ip_forward
	[ -n "${CNI_TEST_KEEP:-}" ] && echo "kept $T" || rm -rf "$T"
}
trap cleanup EXIT
cleanup_all

if [ ! -x /usr/lib/cni/ptp ] || [ ! -x /usr/lib/cni/host-local ]; then
	skip all "no /usr/lib/cni/ptp or host-local (Debian's containernetworking-plugins)"
	exit 0
fi
if [ ! -x "$CNI" ]; then
	fail build "no $CNI"
	exit 1
fi

mkdir -p "$T/bin" "$T/cache" "$T/ipam"
for p in ptp bridge macvlan host-local; do ln -s /usr/lib/cni/$p "$T/bin/$p"; done
ln -s "$CNI" "$T/bin/podinject"
CNI_PATH_DIR=$T/bin
LOG=$T/podinject.log
BAD_STDOUT=0

# conflist FILE VERSION NAME MAIN_PLUGIN_JSON [PODINJECT_EXTRA_JSON]
conflist() {
	jq -n --arg v "$2" --arg n "$3" --argjson main "$4" \
		--argjson extra "${5:-{\}}" --arg node "$NODE" --arg log "$LOG" \
		'{cniVersion: $v, name: $n, plugins: [$main,
		  ({type: "podinject", node: $node, logFile: $log,
		    logLevel: "debug"} + $extra)]}' >"$1"
}
ipam() {	# ipam SUBNET DIRNAME
	jq -n --arg s "$1" --arg d "$T/ipam/$2" \
		'{type: "host-local", dataDir: $d, ranges: [[{subnet: $s}]],
		  routes: [{dst: "0.0.0.0/0"}]}'
}
PTP=$(jq -n --argjson i "$(ipam 10.123.1.0/24 ptp)" '{type: "ptp", ipMasq: false, ipam: $i}')
conflist "$T/ptp10.conflist" 1.0.0 ${PREFIX}ptp "$PTP"
conflist "$T/ptp04.conflist" 0.4.0 ${PREFIX}ptp04 \
	"$(jq -n --argjson i "$(ipam 10.123.4.0/24 ptp04)" '{type: "ptp", ipMasq: false, ipam: $i}')"
conflist "$T/bridge.conflist" 1.0.0 ${PREFIX}bridge \
	"$(jq -n --argjson i "$(ipam 10.123.2.0/24 bridge)" --arg b ${PREFIX}br0 \
		'{type: "bridge", bridge: $b, isGateway: true, ipMasq: false, ipam: $i}')"
conflist "$T/macvlan.conflist" 1.0.0 ${PREFIX}macvlan \
	"$(jq -n --argjson i "$(ipam 10.123.3.0/24 macvlan)" --arg m ${PREFIX}dummy0 \
		'{type: "macvlan", master: $m, mode: "bridge", ipam: $i}')"

for v in 1.0.0 0.4.0; do
	jq -n --arg v $v --arg n ${PREFIX}main${v//./} --arg node "$NODE" --arg log "$LOG" \
		--argjson i "$(ipam 10.123.5.0/24 main)" \
		'{cniVersion: $v, name: $n, plugins: [{type: "podinject", mode: "main",
		  node: $node, logFile: $log, logLevel: "debug", ipam: $i}]}' >"$T/main${v//./}.conflist"
done
jq -n --arg n ${PREFIX}main46 --arg node "$NODE" --arg log "$LOG" --arg d "$T/ipam/main46" \
	'{cniVersion: "1.0.0", name: $n, plugins: [{type: "podinject", mode: "main",
	  node: $node, logFile: $log, logLevel: "debug",
	  ipam: {type: "host-local", dataDir: $d,
		 ranges: [[{subnet: "10.123.6.0/24"}], [{subnet: "fd00:123:6::/64"}]]}}]}' >"$T/main46.conflist"

# plugin CMD TYPE CID NETNS IFNAME ARGS < CONF: one plugin run as libcni
# runs it, a clean environment but for the CNI variables. Prints stdout;
# the exit status is the plugin's. podinject's stdout must be JSON or
# nothing, always.
plugin() {
	local cmd=$1 type=$2 out rc
	out=$(env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin CNI_COMMAND="$cmd" \
		CNI_CONTAINERID="$3" CNI_NETNS="$4" CNI_IFNAME="$5" \
		CNI_ARGS="$6" CNI_PATH="$CNI_PATH_DIR" \
		"$CNI_PATH_DIR/$type" 2>>"$T/stderr")
	rc=$?
	if [ "$type" = podinject ] && [ -n "$out" ] &&
	   ! echo "$out" | jq -e . >/dev/null 2>&1; then
		BAD_STDOUT=$((BAD_STDOUT + 1))
		echo "non-JSON stdout from podinject $cmd: $out" >>"$T/stderr"
	fi
	printf '%s' "$out"
	return $rc
}

# rt CMD CONFLIST CID NETNS [CNI_ARGS]: the whole conflist, as libcni.
# ADD caches the final result; DEL and CHECK pass it as prevResult unless
# NOPREV=1 (a runtime that lost it: podman after a failed ADD, a kubelet
# after a reboot). IFN picks the interface (eth0).
rt() {
	local cmd=$1 list=$2 cid=$3 ns=$4 args=${5:-IgnoreUnknown=1}
	local ifn=${IFN:-eth0} ver name n i order conf type prev= out rc first=0
	local cache="$T/cache/$(jq -r .name "$list")-$cid-$ifn"
	# Runtimes always send IgnoreUnknown (the reference plugins refuse
	# other keys without it).
	case ";$args;" in *";IgnoreUnknown=1;"*) ;; *) args="IgnoreUnknown=1;$args" ;; esac
	ver=$(jq -r .cniVersion "$list")
	name=$(jq -r .name "$list")
	n=$(jq '.plugins | length' "$list")
	case $cmd in
	DEL) order=$(seq $((n - 1)) -1 0) ;;
	*) order=$(seq 0 $((n - 1))) ;;
	esac
	[ "$cmd" != ADD ] && [ "${NOPREV:-0}" != 1 ] && [ -f "$cache" ] &&
		prev=$(cat "$cache")
	for i in $order; do
		conf=$(jq -c --argjson i "$i" --arg v "$ver" --arg nm "$name" \
			'.plugins[$i] + {cniVersion: $v, name: $nm}' "$list")
		[ -n "$prev" ] && conf=$(echo "$conf" | jq -c --argjson p "$prev" '. + {prevResult: $p}')
		type=$(echo "$conf" | jq -r .type)
		out=$(echo "$conf" | plugin "$cmd" "$type" "$cid" "$ns" "$ifn" "$args")
		rc=$?
		if [ $rc != 0 ]; then
			[ "$first" = 0 ] && first=$rc && echo "$out"
			[ "$cmd" = DEL ] && continue
			return $rc
		fi
		[ "$cmd" = ADD ] && prev=$out && echo "$out" >"$T/last.$i"
	done
	if [ "$cmd" = ADD ]; then
		echo "$prev" >"$cache"
		echo "$prev"
	elif [ "$cmd" = DEL ] && [ "$first" = 0 ]; then
		rm -f "$cache"
	fi
	return $first
}

# pi_direct CMD CONF CID NETNS [IFNAME [ARGS]]: podinject alone, one config
# (named as the ptp conflist, so that it is the same attachment)
pi_direct() {
	echo "$2" | plugin "$1" podinject "$3" "$4" "${5:-eth0}" "${6:-IgnoreUnknown=1}"
}
podconf() {	# podconf VERSION [PREV_JSON [EXTRA_JSON]]
	jq -cn --arg v "$1" --arg node "$NODE" --arg log "$LOG" \
		--argjson p "${2:-null}" --argjson x "${3:-{\}}" \
		'{cniVersion: $v, name: "ci-ptp", type: "podinject", node: $node,
		  logFile: $log} + (if $p then {prevResult: $p} else {} end) + $x'
}
# the node's pod count; never empty: a failed listing says so, and a
# comparison of two counts cannot pass on nothing
npods() {
	local out
	out=$("$PI" -N $NODE -j pod list 2>&1) || { echo "pod list failed: $out"; return; }
	jq -e length <<<"$out" 2>/dev/null || echo "pod list not JSON: $out"
}
pod_json() { "$PI" -N $NODE -j pod show "$1" 2>/dev/null; }
pod_name() { pod_json "$1" | jq -r '.name // empty' 2>/dev/null; }
cid() { printf '%s%064d' '' "$1" | tail -c 64; }	# a 64-digit container id
mkns() { ip netns add "$1" && ip -n "$1" link set lo up; }
code_of() { echo "$1" | jq -r .code 2>/dev/null; }

# udp_count FROM_NS TO_NS DST PORT N [--bind SRC]: datagrams that arrive
udp_count() {
	local from=$1 to=$2 dst=$3 port=$4 n=$5 rpid
	shift 5
	in_ns "$to" "$PINET" udp-recv "$port" "$n" 2000 >"$T/udp" &
	rpid=$!
	sleep 0.3
	in_ns "$from" "$PINET" udp-send "$@" "$dst" "$port" "$n" >/dev/null
	wait $rpid
	head -n 1 "$T/udp" | awk '{print $2}'
}

# ---- VERSION ---------------------------------------------------------------
out=$(echo '{"cniVersion":"1.0.0"}' | plugin VERSION podinject "" dummy "" "")
check version_lists sh -c "echo '$out' | jq -e '.supportedVersions | index(\"0.3.0\") and index(\"0.3.1\") and index(\"0.4.0\") and index(\"1.0.0\")'"
out=$(plugin VERSION podinject "" "" "" "" </dev/null)
check version_without_stdin sh -c "echo '$out' | jq -e '.supportedVersions | length >= 4'"
# The runtime starts the plugin for every pod and command: libbpf, libelf,
# zlib, jansson and libyaml are linked in, so that the dynamic loader does
# not load them each time (the Makefile, CNI_LDLIBS).
expect_eq plugin_links_libraries_in "$(ldd "$BUILD/podinject-cni" | grep -cE 'lib(bpf|elf|z|jansson|yaml)[.-]')" 0

# ---- ADD/CHECK/DEL on 1.0.0 and 0.4.0, ptp + host-local + podinject ----------
for v in 10 04; do
	ns=${PREFIX}v$v
	id=$(cid 10$v)
	list=$T/ptp$v.conflist
	mkns $ns
	res=$(rt ADD "$list" "$id" /run/netns/$ns "IgnoreUnknown=1;K8S_POD_NAME=p$v;K8S_POD_NAMESPACE=ci-ns")
	rc=$?
	expect_eq add_$v "$rc" 0
	# What ptp returned is what the chain returns: prevResult through
	# unchanged, with the config's version.
	expect_eq add_${v}_version "$(jq -r .cniVersion <<<"$res")" "$(jq -r .cniVersion "$list")"
	expect_eq add_${v}_prevresult_kept "$(jq -S -c . <<<"$res")" "$(jq -S -c . "$T/last.0")"
	hostdev=$(jq -r '.interfaces[] | select(.sandbox == null) | .name' <<<"$res")
	addr=$(jq -r '.ips[0].address | split("/")[0]' <<<"$res")
	pj=$(pod_json ci-ns/p$v)
	expect_eq add_${v}_pod_named "$(jq -r .name <<<"$pj")" ci-ns/p$v
	expect_eq add_${v}_pod_device "$(jq -r .hostdev <<<"$pj")" "$hostdev"
	expect_eq add_${v}_pod_address "$(jq -r .ipv4 <<<"$pj")" "$addr"
	expect_eq add_${v}_pod_adopted "$(jq -r .adopted <<<"$pj")" true
	if [ $v = 04 ]; then
		expect_eq add_04_ips_version "$(jq -r '.ips[0].version' <<<"$res")" 4
	fi
	check check_$v rt CHECK "$list" "$id" /run/netns/$ns
	check del_$v rt DEL "$list" "$id" /run/netns/$ns
	check del_${v}_twice rt DEL "$list" "$id" /run/netns/$ns
	expect_eq del_${v}_pod_gone "$(pod_name ci-ns/p$v)" ""
	check del_${v}_device_gone sh -c "! ip link show $hostdev 2>/dev/null"
	ip netns del $ns
done
check node_made_by_plugin sh -c "$PI -N $NODE -j node show | jq -e '.host == true'"
# The first pod of a node finds it not up and brings it up: no error in
# the log (the library's "not up" is the plugin's debug line), and none on
# stderr, for ADDs, CHECKs and DELs that all went through.
expect_eq node_made_no_error_logged "$(grep -c ' error ' "$LOG")" 0
check node_made_said sh -c "grep ' debug ' '$LOG' | grep -q 'is not up'"
expect_eq node_made_stderr_empty "$(wc -c <"$T/stderr")" 0
# At debug level each command says where its time went, step by step.
check add_steps_logged grep -qE ' debug ADD [0-9]+: took [0-9.]+ ms: stdin [0-9.]+, conf [0-9.]+, pair [0-9.]+, node [0-9.]+, adopt [0-9.]+, close [0-9.]+$' "$LOG"
check del_steps_logged grep -qE ' debug DEL [0-9]+: took [0-9.]+ ms: stdin [0-9.]+, conf [0-9.]+, node [0-9.]+, del [0-9.]+, close [0-9.]+$' "$LOG"

# ---- bridge: the host device is the pod's veth, not the bridge -----------------
mkns ${PREFIX}br
id=$(cid 20)
res=$(rt ADD "$T/bridge.conflist" "$id" /run/netns/${PREFIX}br "K8S_POD_NAME=br")
expect_eq bridge_add $? 0
veth=$(jq -r --arg b ${PREFIX}br0 '.interfaces[] | select(.sandbox == null and .name != $b) | .name' <<<"$res")
expect_eq bridge_pod_device "$(pod_json br | jq -r .hostdev)" "$veth"
check bridge_check rt CHECK "$T/bridge.conflist" "$id" /run/netns/${PREFIX}br
check bridge_del rt DEL "$T/bridge.conflist" "$id" /run/netns/${PREFIX}br
expect_eq bridge_pod_gone "$(npods)" 0
ip netns del ${PREFIX}br

# ---- bridge: a pod sending with a neighbour's MAC (its own IP, so the address
# check passes) is dropped, and the bridge does not learn the neighbour's MAC
# on its port (before, what the node sent the neighbour went to this pod)
mkns ${PREFIX}bra
mkns ${PREFIX}brb
ida=$(cid 21) idb=$(cid 22)
ipa=$(rt ADD "$T/bridge.conflist" "$ida" /run/netns/${PREFIX}bra "K8S_POD_NAME=bra" | jq -r '.ips[0].address | sub("/.*"; "")')
rt ADD "$T/bridge.conflist" "$idb" /run/netns/${PREFIX}brb "K8S_POD_NAME=brb" >/dev/null
amac=$(ip -n ${PREFIX}bra -j link show eth0 | jq -r '.[0].address')
ping -c 1 -W 2 "$ipa" >/dev/null 2>&1
expect_eq bridge_mac_neighbour_reached "$?" 0
ip -n ${PREFIX}brb link set eth0 address "$amac"
ip netns exec ${PREFIX}brb ping -c 2 -W 1 10.123.2.1 >/dev/null 2>&1
got=$(ping -c 2 -W 1 "$ipa" 2>/dev/null | sed -n 's/.* \([0-9]*\) received.*/\1/p')
expect_eq bridge_mac_spoof_neighbour_kept "$got $(bridge fdb show br ${PREFIX}br0 2>/dev/null | grep -ic "^$amac dev $(pod_json bra | jq -r .hostdev) ")" "2 1"
expect_eq bridge_mac_spoof_dropped "$(pod_json brb | jq -r '.stats.drops.spoofed > 0')" true
rt DEL "$T/bridge.conflist" "$ida" /run/netns/${PREFIX}bra >/dev/null
rt DEL "$T/bridge.conflist" "$idb" /run/netns/${PREFIX}brb >/dev/null
ip netns del ${PREFIX}bra
ip netns del ${PREFIX}brb

# ---- naming: CNI_ARGS as a set, K8S_POD_NAME alone, the container id -----------
mkns ${PREFIX}nm
id=$(cid 30)
rt ADD "$T/ptp10.conflist" "$id" /run/netns/${PREFIX}nm \
	"K8S_POD_NAME=web-1;K8S_POD_INFRA_CONTAINER_ID=$id;IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_UID=1-2-3" >/dev/null
expect_eq name_from_k8s_args "$(pod_name shop/web-1)" shop/web-1
check name_del rt DEL "$T/ptp10.conflist" "$id" /run/netns/${PREFIX}nm
rt ADD "$T/ptp10.conflist" "$id" /run/netns/${PREFIX}nm "IgnoreUnknown=1" >/dev/null
expect_eq name_from_container_id "$(pod_name "$id")" "$id"
check name_del2 rt DEL "$T/ptp10.conflist" "$id" /run/netns/${PREFIX}nm
ip netns del ${PREFIX}nm

# ---- DEL without CNI_NETNS and without prevResult (a kubelet's later DEL) ------
mkns ${PREFIX}d1
id=$(cid 40)
rt ADD "$T/ptp10.conflist" "$id" /run/netns/${PREFIX}d1 "K8S_POD_NAME=d1" >/dev/null
pi_direct DEL "$(podconf 1.0.0)" "$id" "" >/dev/null
expect_eq del_no_netns_no_prev $? 0
expect_eq del_no_netns_no_prev_gone "$(pod_name d1)" ""
# the rest of the chain as the runtime then runs it
NOPREV=1 rt DEL "$T/ptp10.conflist" "$id" "" >/dev/null
ip netns del ${PREFIX}d1

# ---- DEL after the namespace is gone (and the device with it) -----------------
mkns ${PREFIX}d2
id=$(cid 41)
rt ADD "$T/ptp10.conflist" "$id" /run/netns/${PREFIX}d2 "K8S_POD_NAME=d2" >/dev/null
ip netns del ${PREFIX}d2
sleep 0.2
check del_netns_gone rt DEL "$T/ptp10.conflist" "$id" /run/netns/${PREFIX}d2
expect_eq del_netns_gone_pod_gone "$(pod_name d2)" ""
check del_netns_gone_twice rt DEL "$T/ptp10.conflist" "$id" /run/netns/${PREFIX}d2

# ---- CHECK reports a pod whose programs are missing ---------------------------
mkns ${PREFIX}ck
id=$(cid 42)
prev=$(rt ADD "$T/ptp10.conflist" "$id" /run/netns/${PREFIX}ck "K8S_POD_NAME=ck" | jq -c .)
check check_ok rt CHECK "$T/ptp10.conflist" "$id" /run/netns/${PREFIX}ck
# The spec's CHECK consults prevResult: one giving the pod's interface
# another address than the pod holds is an error (the source check would
# drop all it sends from it), and so is a repeated ADD with it (before:
# both passed, the ADD answering with the address the pod does not hold).
other=$(jq -c '(.ips[] | select(.address | test("^10\\.")) | .address) |= sub("\\.[0-9]+/"; ".250/")' <<<"$prev")
expect_eq check_prev_changed "$(jq -r '[.ips[].address] | join(" ")' <<<"$other" | grep -c '10\.[0-9.]*\.250/')" 1
out=$(pi_direct CHECK "$(podconf 1.0.0 "$other")" "$id" /run/netns/${PREFIX}ck)
expect_eq check_other_address "$? $(code_of "$out") $(jq -r .msg <<<"$out")" "1 105 pod's addresses are not prevResult's"
check check_same_prev_direct pi_direct CHECK "$(podconf 1.0.0 "$prev")" "$id" /run/netns/${PREFIX}ck
out=$(pi_direct ADD "$(podconf 1.0.0 "$other")" "$id" /run/netns/${PREFIX}ck eth0 "IgnoreUnknown=1;K8S_POD_NAME=ck")
expect_eq repeat_add_other_address "$? $(pod_json ck | jq -r .ipv4)" "1 $(jq -r '.ips[] | select(.address | test("^10\\.")) | .address' <<<"$prev" | cut -d/ -f1)"
dev=$(pod_json ck | jq -r .hostdev)
ifx=$(pod_json ck | jq -r .host_ifindex)
# Take podinject's programs off the device behind its back: unpin its tcx
# links, or delete its clsact filters.
if [ "$("$PI" -N $NODE -j node show | jq -r .attach)" = tcx ]; then
	for f in "$(node_pin_dir $NODE)"/*; do
		case $(basename "$f") in *link*_${ifx} | *link*_${ifx}_*) rm -f "$f" ;; esac
	done
else
	tc filter del dev "$dev" ingress 2>/dev/null
	tc filter del dev "$dev" egress 2>/dev/null
fi
out=$(rt CHECK "$T/ptp10.conflist" "$id" /run/netns/${PREFIX}ck)
rc=$?
check_fails check_missing_programs test "$rc" = 0
expect_eq check_missing_programs_code "$(code_of "$out")" 105
# The runtime repeats the ADD (after a crash, say): the record of the
# attachment is not the pod "attached already", it is a leftover of a pod
# that lost its programs; it gives way and the pod is whole again. (A
# build before the fix answered "attached already" and left the pod
# without its programs: CHECK failed after the ADD succeeded.)
out=$(pi_direct ADD "$(podconf 1.0.0 "$prev")" "$id" /run/netns/${PREFIX}ck eth0 "IgnoreUnknown=1;K8S_POD_NAME=ck")
expect_eq repeat_after_loss_add $? 0
check repeat_after_loss_whole rt CHECK "$T/ptp10.conflist" "$id" /run/netns/${PREFIX}ck
expect_eq repeat_after_loss_same_device "$(pod_json ck | jq -r .host_ifindex)" "$ifx"
check check_missing_del rt DEL "$T/ptp10.conflist" "$id" /run/netns/${PREFIX}ck
out=$(rt CHECK "$T/ptp10.conflist" "$id" /run/netns/${PREFIX}ck)
check_fails check_after_del test "$?" = 0
ip netns del ${PREFIX}ck

# ---- an ADD whose result cannot be written fails, and undoes its adoption -------
# (stdout fails: /dev/full, as a runtime gone with its pipe; before, the ADD failed
# with code 5 and left the pod adopted until a DEL came)
mkns ${PREFIX}wo
id=$(cid 44)
prev=$(rt ADD "$T/ptp10.conflist" "$id" /run/netns/${PREFIX}wo "K8S_POD_NAME=wo" | jq -c .)
pi_direct DEL "$(podconf 1.0.0 "$prev")" "$id" /run/netns/${PREFIX}wo >/dev/null
expect_eq unwritable_setup "$(pod_name wo)" ""
echo "$(podconf 1.0.0 "$prev")" | env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin CNI_COMMAND=ADD \
	CNI_CONTAINERID="$id" CNI_NETNS=/run/netns/${PREFIX}wo CNI_IFNAME=eth0 \
	CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAME=wo" CNI_PATH="$CNI_PATH_DIR" \
	"$CNI_PATH_DIR/podinject" >/dev/full 2>>"$T/stderr"
expect_eq unwritable_add_undone "$? $(pod_name wo)" "1 "
rt DEL "$T/ptp10.conflist" "$id" /run/netns/${PREFIX}wo >/dev/null
ip netns del ${PREFIX}wo

# ---- a failed ADD, then DEL (podman sends it without prevResult) ---------------
# macvlan leaves no pair: podinject's ADD must fail, leave nothing, and the
# runtime's DEL of the whole chain must succeed.
ip link add ${PREFIX}dummy0 type veth peer name ${PREFIX}dummy1
ip link set ${PREFIX}dummy0 up
mkns ${PREFIX}mv
id=$(cid 50)
before=$(npods)
out=$(rt ADD "$T/macvlan.conflist" "$id" /run/netns/${PREFIX}mv "K8S_POD_NAME=mv")
rc=$?
check_fails failed_add test "$rc" = 0
expect_eq failed_add_code "$(code_of "$out")" 101
expect_eq failed_add_nothing_left "$(npods)" "$before"
# the positive control of failed_add_ipam_freed: the address macvlan's
# IPAM gave is on record until the runtime's DEL, where the check looks
check failed_add_ipam_held sh -c "ls $T/ipam/macvlan/${PREFIX}macvlan 2>/dev/null | grep -q '^10\\.'"
NOPREV=1 rt DEL "$T/macvlan.conflist" "$id" /run/netns/${PREFIX}mv >/dev/null
expect_eq failed_add_then_del $? 0
check failed_add_ipam_freed sh -c "! ls $T/ipam/macvlan/${PREFIX}macvlan 2>/dev/null | grep -q '^10\\.'"
ip netns del ${PREFIX}mv

# ---- bad config and bad environment: the spec's codes, nothing left -----------
mkns ${PREFIX}bad
id=$(cid 60)
prev=$(rt ADD "$T/ptp10.conflist" "$id" /run/netns/${PREFIX}bad "K8S_POD_NAME=bad" | jq -c .)
pi_direct DEL "$(podconf 1.0.0)" "$id" /run/netns/${PREFIX}bad >/dev/null	# ptp stays, podinject goes
before=$(npods)
expect_code() {	# expect_code NAME WANT CMD...: exit non-zero, JSON error with code WANT
	local name=$1 want=$2 out rc
	shift 2
	out=$("$@")
	rc=$?
	if [ $rc = 0 ]; then
		fail "$name" "succeeded: $out"
	elif [ "$(code_of "$out")" != "$want" ]; then
		fail "$name" "code '$(code_of "$out")', want $want: $out"
	elif ! echo "$out" | jq -e '.msg | length > 0' >/dev/null; then
		fail "$name" "no msg: $out"
	else
		pass "$name"
	fi
}
bad_add() { echo "$1" | plugin ADD podinject "$id" /run/netns/${PREFIX}bad eth0 "K8S_POD_NAME=bad"; }
expect_code bad_json 6 bad_add '{"cniVersion": "1.0.0", "name":'
expect_code bad_not_object 6 bad_add '[1, 2]'
expect_code bad_no_version 7 bad_add '{"name": "x", "type": "podinject"}'
expect_code bad_old_version 1 bad_add '{"cniVersion": "0.2.0", "name": "x", "type": "podinject"}'
expect_code bad_future_version 1 bad_add '{"cniVersion": "9.9.9", "name": "x", "type": "podinject"}'
expect_code bad_no_name 7 bad_add '{"cniVersion": "1.0.0", "type": "podinject"}'
expect_code bad_mode 7 bad_add "$(podconf 1.0.0 "$prev" '{"mode": "sideways"}')"
expect_code bad_attach 7 bad_add "$(podconf 1.0.0 "$prev" '{"attach": "glue"}')"
expect_code bad_node_name 7 bad_add "$(podconf 1.0.0 "$prev" '{"node": "No Such/Node"}')"
# 16 characters: the library takes names of 15 at most, and a config it
# would refuse failed every command (code 100), the DEL among them
expect_code bad_node_name_long 7 bad_add "$(podconf 1.0.0 "$prev" '{"node": "abcdefghijklmnop"}')"
expect_code bad_prevresult_type 7 bad_add "$(podconf 1.0.0 '"text"')"
expect_code bad_no_prevresult 7 bad_add "$(podconf 1.0.0)"
expect_code bad_main_without_ipam 7 bad_add "$(podconf 1.0.0 "" '{"mode": "main"}')"
expect_code bad_ipam_timeout 7 bad_add "$(podconf 1.0.0 "$prev" '{"ipamTimeoutMs": 0}')"
conf=$(podconf 1.0.0 "$prev")
env_run() { echo "$conf" | env -i PATH=/usr/bin:/bin "$@" "$CNI" 2>>"$T/stderr"; }
expect_code env_no_command 4 env_run CNI_CONTAINERID=$id CNI_NETNS=/run/netns/${PREFIX}bad CNI_IFNAME=eth0
expect_code env_bad_command 4 env_run CNI_COMMAND=FROB CNI_CONTAINERID=$id CNI_NETNS=/run/netns/${PREFIX}bad CNI_IFNAME=eth0
expect_code env_no_containerid 4 env_run CNI_COMMAND=ADD CNI_NETNS=/run/netns/${PREFIX}bad CNI_IFNAME=eth0
expect_code env_bad_containerid 4 env_run CNI_COMMAND=ADD CNI_CONTAINERID='a b' CNI_NETNS=/run/netns/${PREFIX}bad CNI_IFNAME=eth0
expect_code env_no_netns 4 env_run CNI_COMMAND=ADD CNI_CONTAINERID=$id CNI_IFNAME=eth0
# a relative CNI_NETNS (the spec's is a path) was two namespaces: the
# pair's, opened from the working directory, and the pod's, a name under
# /run/netns (before: a main-mode ADD went through and CHECK failed)
expect_code env_relative_netns 4 env_run CNI_COMMAND=ADD CNI_CONTAINERID=$id CNI_NETNS=${PREFIX}bad CNI_IFNAME=eth0
expect_code env_relative_netns_check 4 env_run CNI_COMMAND=CHECK CNI_CONTAINERID=$id CNI_NETNS=${PREFIX}bad CNI_IFNAME=eth0
check env_relative_netns_del env_run CNI_COMMAND=DEL CNI_CONTAINERID=$id CNI_NETNS=${PREFIX}bad CNI_IFNAME=eth0
expect_code env_no_ifname 4 env_run CNI_COMMAND=ADD CNI_CONTAINERID=$id CNI_NETNS=/run/netns/${PREFIX}bad
expect_code env_bad_ifname 4 env_run CNI_COMMAND=ADD CNI_CONTAINERID=$id CNI_NETNS=/run/netns/${PREFIX}bad CNI_IFNAME=a/b
expect_code env_bad_args 4 env_run CNI_COMMAND=ADD CNI_CONTAINERID=$id CNI_NETNS=/run/netns/${PREFIX}bad CNI_IFNAME=eth0 CNI_ARGS='K8S_POD_NAME=x;junk'
expect_code env_del_no_ifname 4 env_run CNI_COMMAND=DEL CNI_CONTAINERID=$id
expect_code add_wrong_ifname 101 env_run CNI_COMMAND=ADD CNI_CONTAINERID=$id CNI_NETNS=/run/netns/${PREFIX}bad CNI_IFNAME=lo
expect_code add_netns_missing 101 env_run CNI_COMMAND=ADD CNI_CONTAINERID=$id CNI_NETNS=/run/netns/${PREFIX}none CNI_IFNAME=eth0
# prevResult naming host devices that are not the pod's peer
fake=$(jq -c '.interfaces[0].name = "lo"' <<<"$prev")
expect_code add_prevresult_not_peer 101 bad_add "$(podconf 1.0.0 "$fake")"
expect_eq bad_nothing_left "$(npods)" "$before"
check bad_no_pod sh -c "! $PI -N $NODE pod show bad >/dev/null 2>&1"
# ...and the same pod is fine with a good config
check bad_then_good sh -c "echo '$conf' | env -i CNI_COMMAND=ADD CNI_CONTAINERID=$id CNI_NETNS=/run/netns/${PREFIX}bad CNI_IFNAME=eth0 CNI_ARGS=K8S_POD_NAME=bad $CNI >/dev/null"
# An ADD repeated by the runtime is answered the same; the other pod that
# would take the name is refused.
check add_repeated sh -c "echo '$conf' | env -i CNI_COMMAND=ADD CNI_CONTAINERID=$id CNI_NETNS=/run/netns/${PREFIX}bad CNI_IFNAME=eth0 CNI_ARGS=K8S_POD_NAME=bad $CNI >/dev/null"
expect_eq add_repeated_one_pod "$(npods)" $((before + 1))
pi_direct DEL "$conf" "$id" "" >/dev/null
NOPREV=1 rt DEL "$T/ptp10.conflist" "$id" /run/netns/${PREFIX}bad >/dev/null
ip netns del ${PREFIX}bad

# ---- the pod's addresses are prevResult's, one of each family -----------------
mkns ${PREFIX}ad
id=$(cid 75)
prev=$(echo "$(jq -c '.plugins[0] + {cniVersion: "1.0.0", name: "ci-ptp"}' "$T/ptp10.conflist")" |
	plugin ADD ptp "$id" /run/netns/${PREFIX}ad eth0 "")
before=$(npods)
# two IPv4 addresses: the source check takes one, and would drop what the
# pod sent from the other: refused, saying so (before, the ADD went through
# and the second address's packets were dropped as spoofed, silently)
two=$(jq -c '.ips += [{address: "10.123.9.9/24", interface: .ips[0].interface}]' <<<"$prev")
out=$(pi_direct ADD "$(podconf 1.0.0 "$two")" "$id" /run/netns/${PREFIX}ad eth0 K8S_POD_NAME=ad)
expect_eq two_v4_refused "$(code_of "$out") $(jq -r .msg <<<"$out") $(grep -c 'second IPv4 address, 10.123.9.9/24' <<<"$out") $(npods)" "7 podinject takes one address of each family per pod 1 $before"
# ... unless podinject is not the pod's source check
out=$(pi_direct ADD "$(podconf 1.0.0 "$two" '{"datapath": "none"}')" "$id" /run/netns/${PREFIX}ad eth0 K8S_POD_NAME=ad)
expect_eq two_v4_no_datapath "$? $(pod_json ad | jq -r .ipv4)" "0 $(jq -r '.ips[0].address | sub("/.*"; "")' <<<"$prev")"
pi_direct DEL "$(podconf 1.0.0 "" '{"datapath": "none"}')" "$id" "" >/dev/null
# none at all: refused (its device is not read for one)
out=$(pi_direct ADD "$(podconf 1.0.0 "$(jq -c '.ips = []' <<<"$prev")")" "$id" /run/netns/${PREFIX}ad eth0 K8S_POD_NAME=ad)
expect_eq no_address_refused "$(code_of "$out") $(jq -r .msg <<<"$out") $(npods)" "7 prevResult gives the pod no address $before"
# an address the pod put on its device itself, of a family prevResult
# leaves out, is not taken as the pod's (before, it was recorded as its
# own: the pod could send as it, and take it from the pod IPAM gave it to)
pi_direct DEL "$(podconf 1.0.0)" "$id" "" >/dev/null
ip -n ${PREFIX}ad addr add fd00:99::7/128 dev eth0 nodad
out=$(pi_direct ADD "$(podconf 1.0.0 "$prev")" "$id" /run/netns/${PREFIX}ad eth0 K8S_POD_NAME=ad)
expect_eq planted_address_not_taken "$? $(pod_json ad | jq -r '.ipv6 // "none"')" "0 none"
pi_direct DEL "$(podconf 1.0.0)" "$id" "" >/dev/null
echo "$(jq -c '.plugins[0] + {cniVersion: "1.0.0", name: "ci-ptp"}' "$T/ptp10.conflist")" |
	plugin DEL ptp "$id" /run/netns/${PREFIX}ad eth0 "" >/dev/null
ip netns del ${PREFIX}ad

# ---- the node busy: code 11, nothing made; then it goes through ---------------
mkns ${PREFIX}busy
id=$(cid 70)
prev=$(echo "$(jq -c '.plugins[0] + {cniVersion: "1.0.0", name: "ci-ptp"}' "$T/ptp10.conflist")" |
	plugin ADD ptp "$id" /run/netns/${PREFIX}busy eth0 "")
flock -x "$(node_pin_dir $NODE)" -c 'sleep 3' &
holder=$!
sleep 0.3
out=$(pi_direct ADD "$(podconf 1.0.0 "$prev" '{"lockTimeoutMs": 300}')" "$id" /run/netns/${PREFIX}busy eth0 K8S_POD_NAME=busy)
expect_eq busy_code_11 "$(code_of "$out")" 11
out=$(pi_direct DEL "$(podconf 1.0.0 "" '{"lockTimeoutMs": 300}')" "$id" "")
expect_eq busy_del_code_11 "$(code_of "$out")" 11
wait $holder
expect_eq busy_nothing_made "$(pod_name busy)" ""
flock -x "$(node_pin_dir $NODE)" -c 'sleep 1' &
sleep 0.2
pi_direct ADD "$(podconf 1.0.0 "$prev" '{"lockTimeoutMs": 5000}')" "$id" /run/netns/${PREFIX}busy eth0 K8S_POD_NAME=busy >/dev/null
expect_eq busy_waits_then_adds $? 0
wait
check busy_del sh -c "echo '$(podconf 1.0.0)' | env -i CNI_COMMAND=DEL CNI_CONTAINERID=$id CNI_IFNAME=eth0 $CNI"
echo "$(jq -c '.plugins[0] + {cniVersion: "1.0.0", name: "ci-ptp"}' "$T/ptp10.conflist")" |
	plugin DEL ptp "$id" /run/netns/${PREFIX}busy eth0 "" >/dev/null
ip netns del ${PREFIX}busy

# ---- a device's hook taken by another program: code 100, not 11 ----------------
# On an "xdp" node a pod's ingress ACL is XDP on its eth0; another program
# there already makes the attach fail with EBUSY. That is no lock: trying
# again cannot help, so the runtime is told 100 at once (it was 11, "node
# busy", and the runtime tried again without end). Nothing is left, and
# the same pod goes through once the other program is gone.
XB=${PREFIX}xn
mkns ${PREFIX}xb
id=$(cid 75)
prev=$(echo "$(jq -c '.plugins[0] + {cniVersion: "1.0.0", name: "ci-ptp"}' "$T/ptp10.conflist")" |
	plugin ADD ptp "$id" /run/netns/${PREFIX}xb eth0 "")
ip -n ${PREFIX}xb link set dev eth0 xdpdrv obj "$BUILD/xdp.bpf.o" sec xdp
xconf=$(podconf 1.0.0 "$prev" "$(jq -cn --arg n $XB '{node: $n, xdp: true, lockTimeoutMs: 2000}')")
out=$(pi_direct ADD "$xconf" "$id" /run/netns/${PREFIX}xb eth0 "IgnoreUnknown=1;K8S_POD_NAME=xb")
expect_eq hook_taken_code_100 "$? $(code_of "$out")" "1 100"
expect_eq hook_taken_says_busy "$(jq -r .details <<<"$out" | grep -c 'busy')" 1
expect_eq hook_taken_nothing_left "$("$PI" -N $XB -j pod list | jq length)" 0
ip -n ${PREFIX}xb link set dev eth0 xdpdrv off
out=$(pi_direct ADD "$xconf" "$id" /run/netns/${PREFIX}xb eth0 "IgnoreUnknown=1;K8S_POD_NAME=xb")
expect_eq hook_free_adds "$? $("$PI" -N $XB -j pod list | jq length)" "0 1"
pi_direct DEL "$xconf" "$id" "" >/dev/null
echo "$(jq -c '.plugins[0] + {cniVersion: "1.0.0", name: "ci-ptp"}' "$T/ptp10.conflist")" |
	plugin DEL ptp "$id" /run/netns/${PREFIX}xb eth0 "" >/dev/null
"$PI" -N $XB node down >/dev/null
ip netns del ${PREFIX}xb

# ---- STATUS and GC (spec 1.1; no runtime here sends them) -----------------------
out=$(pi_direct STATUS "$(podconf 1.1.0)" "" "" "" "")
expect_eq status_ok "$?:$out" "0:"
for g in 1 2; do
	mkns ${PREFIX}gc$g
	rt ADD "$T/ptp10.conflist" "$(cid 13$g)" /run/netns/${PREFIX}gc$g "K8S_POD_NAME=gc$g" >/dev/null
done
# Without the list (the runtime must send it), or with an entry that names
# no attachment, GC cannot tell what is in use: refused, nothing removed
# (it once took the missing list for an empty one: every pod went).
for bad in '{}' '{"cni.dev/valid-attachments": [{"containerID": "x"}]}' \
	'{"cni.dev/valid-attachments": [{"containerID": 1, "ifname": "eth0"}]}'; do
	out=$(pi_direct GC "$(podconf 1.1.0 "" "$bad")" "" "" "" "")
	echo "$?:$(code_of "$out")"
done >"$T/gcbad"
expect_eq gc_bad_list_refused "$(tr '\n' ' ' <"$T/gcbad")" "1:7 1:7 1:7 "
expect_eq gc_bad_list_kept "$(pod_name gc1) $(pod_name gc2)" "gc1 gc2"
# GC and STATUS came with 1.1.0, CHECK with 0.4.0: a config of an older
# version does not allow them (code 1, as the reference plugins' skel
# answers); before, a GC at 1.0.0 removed pods
for c in "GC $(podconf 1.0.0 "" '{"cni.dev/valid-attachments": []}')" "STATUS $(podconf 1.0.0)" "CHECK $(podconf 0.3.1 '{"cniVersion": "0.3.1", "ips": []}')"; do
	out=$(pi_direct ${c%% *} "${c#* }" "$(cid 131)" /run/netns/${PREFIX}gc1 eth0)
	echo "$?:$(code_of "$out")"
done >"$T/gcold"
expect_eq commands_need_their_version "$(tr '\n' ' ' <"$T/gcold")" "1:1 1:1 1:1 "
expect_eq gc_old_version_kept "$(pod_name gc1) $(pod_name gc2)" "gc1 gc2"
gc=$(podconf 1.1.0 "" "$(jq -cn --arg c "$(cid 131)" '{"cni.dev/valid-attachments": [{containerID: $c, ifname: "eth0"}]}')")
pi_direct GC "$gc" "" "" "" "" >/dev/null
expect_eq gc_ok $? 0
expect_eq gc_keeps_valid "$(pod_name gc1)" gc1
expect_eq gc_removes_stale "$(pod_name gc2)" ""
for g in 1 2; do
	rt DEL "$T/ptp10.conflist" "$(cid 13$g)" /run/netns/${PREFIX}gc$g >/dev/null
	ip netns del ${PREFIX}gc$g
done
expect_eq gc_then_del "$(pod_name gc1)" ""
# Networks are told apart by a hash of their names. Two names of one
# 32-bit FNV-1a (found by a birthday search in under a second; a tenant
# names its Multus networks) were one network to GC: a GC of the one
# removed the other's pods. Now 128 bits of SHA-256 are kept.
fnv32() {	# fnv32 STRING: FNV-1a of 32 bits, as the ids up to v0.4
	local s=$1 h=2166136261 i c
	for ((i = 0; i < ${#s}; i++)); do
		printf -v c '%d' "'${s:i:1}"
		h=$(( ((h ^ c) * 16777619) & 0xffffffff ))
	done
	printf '%08x' "$h"
}
expect_eq gc_names_collide "$(fnv32 ci-net-34ac40)" "$(fnv32 ci-net-3a41f2)"
conflist "$T/coll.conflist" 1.0.0 ci-net-34ac40 \
	"$(jq -n --argjson i "$(ipam 10.123.13.0/24 coll)" '{type: "ptp", ipMasq: false, ipam: $i}')"
mkns ${PREFIX}gcx
rt ADD "$T/coll.conflist" "$(cid 141)" /run/netns/${PREFIX}gcx "K8S_POD_NAME=gcx" >/dev/null
expect_eq gc_collide_added "$(pod_name gcx)" gcx
out=$(pi_direct GC "$(podconf 1.1.0 "" '{"name": "ci-net-3a41f2", "cni.dev/valid-attachments": []}')" "" "" "" "")
expect_eq gc_other_network_kept "$?:$out $(pod_name gcx)" "0: gcx"
out=$(pi_direct GC "$(podconf 1.1.0 "" '{"name": "ci-net-34ac40", "cni.dev/valid-attachments": []}')" "" "" "" "")
expect_eq gc_own_network_removes "$?:$out $(pod_name gcx)" "0: "
rt DEL "$T/coll.conflist" "$(cid 141)" /run/netns/${PREFIX}gcx >/dev/null
ip netns del ${PREFIX}gcx
# Records an earlier podinject made (the network's 32-bit hash in their
# ids) are still their attachments': CHECK and DEL find them. GC takes
# one only when its device is gone: another network may share its hash.
jq '.plugins |= .[:1]' "$T/ptp10.conflist" >"$T/ptponly.conflist"
for g in 1 2; do
	mkns ${PREFIX}lg$g
	res=$(rt ADD "$T/ptponly.conflist" "$(cid 15$g)" /run/netns/${PREFIX}lg$g)
	"$PI" -N $NODE pod adopt lg$g --netns ${PREFIX}lg$g \
		--dev "$(jq -r '.interfaces[0].name' <<<"$res")" --ifname eth0 \
		--ip "$(jq -r '.ips[0].address' <<<"$res" | cut -d/ -f1)" \
		--attach-id "cni:$(fnv32 ${PREFIX}ptp):$(cid 15$g):eth0" >/dev/null
done
expect_eq legacy_adopted "$(pod_name lg1) $(pod_name lg2)" "lg1 lg2"
rt CHECK "$T/ptp10.conflist" "$(cid 151)" /run/netns/${PREFIX}lg1 >"$T/lgcheck"
expect_eq legacy_check "$? $(cat "$T/lgcheck")" "0 "
ip netns del ${PREFIX}lg2
out=$(pi_direct GC "$(podconf 1.1.0 "" '{"cni.dev/valid-attachments": []}')" "" "" "" "")
expect_eq legacy_gc "$?:$out $(pod_name lg1) $(pod_name lg2)" "0: lg1 "
rt DEL "$T/ptp10.conflist" "$(cid 151)" /run/netns/${PREFIX}lg1 >/dev/null
expect_eq legacy_del "$? $(pod_name lg1)" "0 "
rt DEL "$T/ptp10.conflist" "$(cid 152)" "" >/dev/null
ip netns del ${PREFIX}lg1
# GC in main mode: the removed pod's address goes with it (IPAM DEL of its
# attachment, as its DEL would have done), and GC is passed on to the IPAM
# plugin with the same list. No IPAM plugin here takes cniVersion 1.1.0
# (Debian's host-local is 1.1.1: up to 1.0.0, no GC), so the IPAM plugin
# is a wrapper that records what it is asked, answers GC, and hands the
# rest to the real host-local with the version it takes. Before the fix
# the pod went and its lease stayed: host-local would never give that
# address again. With the real host-local, which refuses 1.1.0, GC still
# succeeds (the plugin has nothing to collect; its DEL is logged).
cat >"$T/bin/ipam-v11" <<'EOS'
#!/bin/sh
conf=$(cat)
echo "$CNI_COMMAND ${CNI_CONTAINERID:--} ${CNI_IFNAME:--} $(echo "$conf" | jq -c '[."cni.dev/valid-attachments"[]?.containerID]')" \
	>>"$(dirname "$0")/../ipam-v11.log"
[ "$CNI_COMMAND" = DEL ] && [ -e "$(dirname "$0")/../ipam-v11.faildel" ] &&
	{ echo '{"cniVersion": "1.0.0", "code": 11, "msg": "try again later"}'; exit 1; }
case $CNI_COMMAND in
GC) exit 0 ;;
VERSION) echo '{"cniVersion": "1.1.0", "supportedVersions": ["1.0.0", "1.1.0"]}' ;;
*) echo "$conf" | jq -c '.cniVersion = "1.0.0"' | exec /usr/lib/cni/host-local ;;
esac
EOS
chmod +x "$T/bin/ipam-v11"
gcm_conf() {	# gcm_conf VERSION IPAM_TYPE [EXTRA]
	podconf "$1" "" "$(jq -cn --arg t "$2" --arg d "$T/ipam/gcm" --argjson x "${3:-{\}}" \
		'{name: "ci-gcm", mode: "main", ipam: {type: $t,
		  ranges: [[{subnet: "10.123.9.0/24"}]], dataDir: $d}} + $x')"
}
gcm_leases() { ls "$T/ipam/gcm/ci-gcm" 2>/dev/null | grep -c '^10\.'; }
for g in 1 2; do
	mkns ${PREFIX}gm$g
	pi_direct ADD "$(gcm_conf 1.1.0 ipam-v11)" "$(cid 16$g)" /run/netns/${PREFIX}gm$g eth0 "IgnoreUnknown=1;K8S_POD_NAME=gm$g" >/dev/null
done
expect_eq gc_main_pods "$(pod_name gm1) $(pod_name gm2) $(gcm_leases)" "gm1 gm2 2"
gm1_ip=$(pod_json gm1 | jq -r .ipv4)
# an IPAM DEL that fails keeps the record (what names the lease) for the
# next GC; before the fix the record went first and the lease for good
touch "$T/ipam-v11.faildel"
pi_direct GC "$(gcm_conf 1.1.0 ipam-v11 "$(jq -cn --arg c "$(cid 161)" '{"cni.dev/valid-attachments": [{containerID: $c, ifname: "eth0"}]}')")" "" "" "" "" >/dev/null
expect_eq gc_main_del_failed_kept "$(pod_name gm2) $(gcm_leases)" "gm2 2"
rm -f "$T/ipam-v11.faildel"
: >"$T/ipam-v11.log"
out=$(pi_direct GC "$(gcm_conf 1.1.0 ipam-v11 "$(jq -cn --arg c "$(cid 161)" '{"cni.dev/valid-attachments": [{containerID: $c, ifname: "eth0"}]}')")" "" "" "" "")
expect_eq gc_main_ok "$?:$out" "0:"
expect_eq gc_main_pod_removed "$(pod_name gm1) $(pod_name gm2)" "gm1 "
expect_eq gc_main_lease_given_back "$(gcm_leases) $(ls "$T/ipam/gcm/ci-gcm" | grep '^10\.')" "1 $gm1_ip"
expect_eq gc_main_ipam_del "$(grep -c "^DEL $(cid 162) eth0 " "$T/ipam-v11.log")" 1
expect_eq gc_main_ipam_gc "$(grep '^GC ' "$T/ipam-v11.log")" "GC - - [\"$(cid 161)\"]"
out=$(pi_direct GC "$(gcm_conf 1.1.0 host-local '{"cni.dev/valid-attachments": []}')" "" "" "" "")
expect_eq gc_main_old_ipam_ok "$?:$out $(pod_name gm1)" "0: "
for g in 1 2; do
	pi_direct DEL "$(gcm_conf 1.1.0 ipam-v11)" "$(cid 16$g)" /run/netns/${PREFIX}gm$g eth0 >/dev/null
	ip netns del ${PREFIX}gm$g
done

# ---- traffic through adopted pods; injection counted exactly once --------------
for p in a b c; do
	mkns ${PREFIX}$p
	res=$(rt ADD "$T/ptp10.conflist" "$(cid 8$(printf %d "'$p"))" /run/netns/${PREFIX}$p \
		"IgnoreUnknown=1;K8S_POD_NAMESPACE=ci-ns;K8S_POD_NAME=$p")
	eval "ip_$p=$(jq -r '.ips[0].address | split("/")[0]' <<<"$res")"
done
expect_eq traffic_pods "$("$PI" -N $NODE -j pod list | jq '[.[] | select(.name | startswith("ci-ns/"))] | length')" 3
expect_eq traffic_a_to_b "$(udp_count ${PREFIX}a ${PREFIX}b "$ip_b" 7100 5)" 5
expect_eq traffic_b_to_c "$(udp_count ${PREFIX}b ${PREFIX}c "$ip_c" 7101 5)" 5
check ping_c_to_a in_ns ${PREFIX}c ping -c 2 -W 2 -i 0.2 "$ip_a"
check inject_allow "$PI" -N $NODE inject allow ci-ns/a --as ci-ns/b
eb=$(pod_stat $NODE ci-ns/b .egress_packets)
ea=$(pod_stat $NODE ci-ns/a .egress_packets)
expect_eq inject_delivered "$(udp_count ${PREFIX}a ${PREFIX}c "$ip_c" 7102 25 --bind "$ip_b")" 25
expect_eq inject_target_egress_once "$(($(pod_stat $NODE ci-ns/b .egress_packets) - eb))" 25
expect_eq inject_not_injector_egress "$(($(pod_stat $NODE ci-ns/a .egress_packets) - ea))" 0
expect_eq inject_stats "$("$PI" -N $NODE -j inject stats | jq '[.[] | select(.injector == "ci-ns/a" and .as == "ci-ns/b") | .packets] | add')" 25
in_ns ${PREFIX}c "$PINET" udp-recv 7103 25 2000 >"$T/udp" &
sleep 0.3
in_ns ${PREFIX}a "$PINET" udp-send --bind "$ip_b" "$ip_c" 7103 25 >/dev/null
wait
check inject_receiver_sees_b sh -c "grep -q 'from $ip_b count 25' $T/udp"
sp=$(pod_stat $NODE ci-ns/c .drops.spoofed)
expect_eq spoof_not_delivered "$(udp_count ${PREFIX}c ${PREFIX}a "$ip_a" 7104 5 --bind "$ip_b")" 0
expect_eq spoof_counted "$(($(pod_stat $NODE ci-ns/c .drops.spoofed) - sp))" 5
for p in a b c; do
	rt DEL "$T/ptp10.conflist" "$(cid 8$(printf %d "'$p"))" /run/netns/${PREFIX}$p >/dev/null ||
		fail traffic_del_$p "DEL failed"
	ip netns del ${PREFIX}$p
done
expect_eq traffic_del_all "$(npods)" 0
expect_eq traffic_del_no_auth "$("$PI" -N $NODE -j inject list | jq length)" 0

# ---- "datapath": "none": chained pods keep ptp's datapath alone ---------------
# Beside a plugin that is a datapath itself (Cilium) the reference one
# would do its work twice: nothing of podinject's goes on the pods' host
# devices, what they use of podinject works (injection), policy is refused.
conflist "$T/none.conflist" 1.0.0 ${PREFIX}none \
	"$(jq -n --argjson i "$(ipam 10.123.7.0/24 none)" '{type: "ptp", ipMasq: false, ipam: $i}')" \
	'{"datapath": "none"}'
# the host's namespace by a name tcx-attach can enter
mkdir -p /run/netns && touch /run/netns/${PREFIX}host &&
	mount --bind /proc/self/ns/net /run/netns/${PREFIX}host
for p in n1 n2 n3; do
	mkns ${PREFIX}$p
	res=$(rt ADD "$T/none.conflist" "$(cid 7$(printf %d "'${p#n}"))" /run/netns/${PREFIX}$p \
		"IgnoreUnknown=1;K8S_POD_NAMESPACE=none;K8S_POD_NAME=$p")
	expect_eq none_add_$p $? 0
	eval "ip_$p=$(jq -r '.ips[0].address | split("/")[0]' <<<"$res")"
	eval "dev_$p=$(jq -r '.interfaces[] | select(.sandbox == null) | .name' <<<"$res")"
done
expect_eq none_pod_says "$(pod_json none/n1 | jq -r .datapath)" none
mkns ${PREFIX}rf
expect_eq none_reference_pod_says "$(rt ADD "$T/ptp10.conflist" "$(cid 79)" /run/netns/${PREFIX}rf "K8S_POD_NAME=ref" >/dev/null 2>&1; pod_json ref | jq -r .datapath)" reference
# a reference pod's packets to such a pod go to the stack (which routes
# them through ptp's device), not straight into its namespace
e0=$(pod_stat $NODE ref .egress_packets)
expect_eq none_from_reference_pod "$(udp_count ${PREFIX}rf ${PREFIX}n2 "$ip_n2" 7113 5)" 5
expect_eq none_from_reference_pod_counted "$(($(pod_stat $NODE ref .egress_packets) - e0))" 5
expect_eq none_not_counted_as_delivered "$(pod_stat $NODE none/n2 .ingress_packets)" 0
rt DEL "$T/ptp10.conflist" "$(cid 79)" /run/netns/${PREFIX}rf >/dev/null 2>&1
ip netns del ${PREFIX}rf
# (a failed query prints why, so that it cannot pass for an empty hook)
hook_progs() { "$BUILD/tcx-attach" query ${PREFIX}host "$dev_n1" "$1" 2>&1 || echo "query failed"; }
expect_eq none_no_programs "${dev_n1:-no device}:$(hook_progs ingress)|$(hook_progs egress)" "$dev_n1:|"
expect_eq none_traffic "$(udp_count ${PREFIX}n1 ${PREFIX}n2 "$ip_n2" 7110 5)" 5
has() { grep -qF -- "$2" <<<"$1"; }	# has TEXT PART
# A policy brings podinject's programs to such a pod's device, for as long
# as it has a rule: they check its source and its rules and hand what they
# let through on, in front of the plugin's own programs (a stand-in's
# here, which counts the UDP it sees), and go with the last rule.
rules_of() { "$PI" -N $NODE -j policy list "$1" | jq length; }	# rules, both ways
tcx_node=$([ "$("$PI" -N $NODE -j node show | jq -r .attach)" = tcx ] && echo 1)
# tcx_only NAME...: a check that reads the order of a tcx chain, which a
# clsact node has not (one SKIP line each there)
tcx_only() {
	[ -n "$tcx_node" ] && return 0
	for n in "$@"; do skip "$n" "the node attaches with clsact: no tcx chain to read"; done
	return 1
}
if tcx_only none_foreign_attach; then
	fpin=/sys/fs/bpf/${PREFIX}cni-foreign
	rm -rf "$fpin"; mkdir -p "$fpin"
	check none_foreign_attach "$BUILD/tcx-attach" attach "$BUILD/foreign.bpf.o" foreign_count ${PREFIX}host "$dev_n1" ingress "$fpin"
fi
check none_policy_add "$PI" -N $NODE policy add none/n1 egress deny to "$ip_n2/32" proto udp port 7114
tcx_only none_policy_programs_first &&
	expect_eq none_policy_programs_first "$(hook_progs ingress)|$(hook_progs egress)" "pod_egress foreign_count|pod_ingress"
expect_eq none_policy_says "$(pod_json none/n1 | jq -r .datapath)" none
expect_eq none_policy_denies "$(udp_count ${PREFIX}n1 ${PREFIX}n2 "$ip_n2" 7114 5)" 0
expect_eq none_policy_rule_counted "$("$PI" -N $NODE -j policy list none/n1 | jq '[.[] | .packets] | add')" 5
expect_eq none_policy_other_port "$(udp_count ${PREFIX}n1 ${PREFIX}n2 "$ip_n2" 7115 5)" 5
tcx_only none_policy_handed_on &&
	expect_eq none_policy_handed_on "$("$BUILD/tcx-attach" counter "$fpin")" 5
expect_eq none_policy_counted "$(pod_stat $NODE none/n1 .egress_packets)" 5
# the source check comes with the programs: n1 may not speak as n3
expect_eq none_policy_source_check "$(udp_count ${PREFIX}n1 ${PREFIX}n2 "$ip_n2" 7116 5 --bind "$ip_n3")" 0
expect_eq none_policy_spoof_dropped "$(pod_stat $NODE none/n1 .drops.spoofed)" 5
check none_policy_check rt CHECK "$T/none.conflist" "$(cid 7$(printf %d "'1"))" /run/netns/${PREFIX}n1
# an upgrade re-points them (n1's two hooks, nothing added to n2 or n3)
out=$("$PI" -N $NODE node upgrade 2>&1)
if [ $? = 0 ] && grep -q "nothing to migrate; 2 hook" <<<"$out"; then
	pass none_policy_upgrade
else
	fail none_policy_upgrade "$out"
fi
expect_eq none_policy_upgrade_denies "$(udp_count ${PREFIX}n1 ${PREFIX}n2 "$ip_n2" 7114 5)" 0
tcx_only none_policy_upgrade_n2_bare &&
	expect_eq none_policy_upgrade_n2_bare "$("$BUILD/tcx-attach" query ${PREFIX}host "$dev_n2" ingress 2>&1 || echo "query failed")" ""
# an ingress rule keeps them when the egress one goes
check none_policy_ingress "$PI" -N $NODE policy add none/n1 ingress deny from "$ip_n3/32"
check none_policy_del_egress "$PI" -N $NODE policy del none/n1 egress all
expect_eq none_policy_ingress_denies "$(udp_count ${PREFIX}n3 ${PREFIX}n1 "$ip_n1" 7117 5)" 0
expect_eq none_policy_egress_open "$(udp_count ${PREFIX}n1 ${PREFIX}n2 "$ip_n2" 7114 5)" 5
check none_policy_del_all "$PI" -N $NODE policy del none/n1 ingress all
expect_eq none_policy_gone_rules "$(rules_of none/n1)" 0
if [ -n "$tcx_node" ]; then
	expect_eq none_policy_programs_gone "$(hook_progs ingress)|$(hook_progs egress)" "foreign_count|"
else
	expect_eq none_policy_programs_gone "$(ls "$("$PI" -N $NODE -j node show | jq -r .pin_dir)" | grep -c "^link_pod_$(cat /sys/class/net/$dev_n1/ifindex)_")" 0
fi
expect_eq none_policy_gone_traffic "$(udp_count ${PREFIX}n3 ${PREFIX}n1 "$ip_n1" 7117 5)" 5
# apply: the same, all or nothing
printf '{"apiVersion": "podinject/v1", "pods": {"none/n1": {"egress": [{"action": "deny", "to": "%s/32", "proto": "udp", "port": 7118}]}}}' "$ip_n2" >"$T/none-apply.json"
check none_apply "$PI" -N $NODE apply -f "$T/none-apply.json"
expect_eq none_apply_denies "$(udp_count ${PREFIX}n1 ${PREFIX}n2 "$ip_n2" 7118 5)" 0
echo '{"apiVersion": "podinject/v1", "pods": {"none/n1": {"egress": []}}}' >"$T/none-apply.json"
check none_apply_empty "$PI" -N $NODE apply -f "$T/none-apply.json"
expect_eq none_apply_open "$(udp_count ${PREFIX}n1 ${PREFIX}n2 "$ip_n2" 7118 5)" 5
tcx_only none_apply_programs_gone &&
	expect_eq none_apply_programs_gone "$(hook_progs ingress)|$(hook_progs egress)" "foreign_count|"
check none_inject_allow "$PI" -N $NODE inject allow none/n1 --as none/n2
expect_eq none_inject_delivered "$(udp_count ${PREFIX}n1 ${PREFIX}n3 "$ip_n3" 7111 25 --bind "$ip_n2")" 25
expect_eq none_inject_stats "$("$PI" -N $NODE -j inject stats | jq '[.[] | select(.injector == "none/n1" and .as == "none/n2") | .packets] | add')" 25
# an injector's own head program stays in front of the source check
if tcx_only none_injector_policy none_injector_order none_injector_still_injects \
	none_injector_policy_del none_injector_order_after; then
	check none_injector_policy "$PI" -N $NODE policy add none/n1 egress deny to "$ip_n3/32" proto udp port 7119
	expect_eq none_injector_order "$(hook_progs ingress)" "inject_egress pod_egress foreign_count"
	expect_eq none_injector_still_injects "$(udp_count ${PREFIX}n1 ${PREFIX}n3 "$ip_n3" 7120 5 --bind "$ip_n2")" 5
	check none_injector_policy_del "$PI" -N $NODE policy del none/n1 egress all
	expect_eq none_injector_order_after "$(hook_progs ingress)" "inject_egress foreign_count"
	rm -rf "$fpin"
fi
# nothing of podinject's checks what such a pod sends: beside ptp, only
# the host's strict reverse-path filter would
# (the device's is the larger of "all" and "default"'s: the veth is new)
rpf=$(sysctl -n net.ipv4.conf.all.rp_filter net.ipv4.conf.default.rp_filter | sort -n | tail -n 1)
spoofed=$(udp_count ${PREFIX}n3 ${PREFIX}n2 "$ip_n2" 7112 5 --bind "$ip_n1")
if [ "$rpf" = 1 ]; then
	expect_eq none_no_source_check "$spoofed" 0
else
	expect_eq none_no_source_check "$spoofed" 5
fi
check none_check rt CHECK "$T/none.conflist" "$(cid 7$(printf %d "'1"))" /run/netns/${PREFIX}n1
# two pods' first rules at once, and their last: each gets its programs
# and loses them, whichever call takes the node's lock first
pins=$("$PI" -N $NODE -j node show | jq -r .pin_dir)
npins() { ls "$pins" | grep -c "^link_pod_$(cat /sys/class/net/$1/ifindex)_"; }
"$PI" -N $NODE policy add none/n2 egress deny to 192.0.2.0/24 >/dev/null & p1=$!
"$PI" -N $NODE policy add none/n3 ingress deny from 192.0.2.0/24 >/dev/null & p2=$!
bg_wait $p1 $p2
expect_eq none_concurrent_add "$BG_FAILS" 0
expect_eq none_concurrent_programs "$(npins "$dev_n2") $(npins "$dev_n3")" "2 2"
"$PI" -N $NODE policy del none/n2 egress all >/dev/null & p1=$!
"$PI" -N $NODE policy del none/n3 ingress all >/dev/null & p2=$!
bg_wait $p1 $p2
expect_eq none_concurrent_del "$BG_FAILS" 0
expect_eq none_concurrent_programs_gone "$(npins "$dev_n2") $(npins "$dev_n3")" "0 0"
# a pod deleted with a policy takes its programs' pins with it
check none_del_with_policy_add "$PI" -N $NODE policy add none/n1 ingress deny from "$ip_n3/32"
pins=$("$PI" -N $NODE -j node show | jq -r .pin_dir)
if_n1=$(cat /sys/class/net/$dev_n1/ifindex)
expect_eq none_del_with_policy_pins "$(ls "$pins" | grep -c "^link_pod_${if_n1}_")" 2
for p in n1 n2 n3; do
	rt DEL "$T/none.conflist" "$(cid 7$(printf %d "'${p#n}"))" /run/netns/${PREFIX}$p >/dev/null ||
		fail none_del_$p "DEL failed"
	ip netns del ${PREFIX}$p
done
expect_eq none_del_all "$(npods)" 0
expect_eq none_del_with_policy_no_pins "$(ls "$pins" | grep -c "^link_pod_${if_n1}_")" 0
expect_eq none_del_no_auth "$("$PI" -N $NODE -j inject list | jq length)" 0
umount /run/netns/${PREFIX}host 2>/dev/null; rm -f /run/netns/${PREFIX}host
# a value that is neither: refused before anything is made
conflist "$T/bad-dp.conflist" 1.0.0 ${PREFIX}ptp "$PTP" '{"datapath": "cilium"}'
mkns ${PREFIX}bd
out=$(rt ADD "$T/bad-dp.conflist" "$(cid 78)" /run/netns/${PREFIX}bd "K8S_POD_NAME=bd")
expect_eq none_bad_value_code "$(code_of "$out")" 7
check none_bad_value_says has "$(jq -r .details <<<"$out")" "datapath 'cilium': reference or none"
expect_eq none_bad_value_no_pod "$(pod_name bd)" ""
rt DEL "$T/bad-dp.conflist" "$(cid 78)" /run/netns/${PREFIX}bd >/dev/null 2>&1
ip netns del ${PREFIX}bd

# ---- main mode: podinject makes the pair, host-local gives the address -------
leases() { ls "$T/ipam/main/$1" 2>/dev/null | grep -c '^10\.'; }
mkns ${PREFIX}ptp1
rt ADD "$T/ptp10.conflist" "$(cid 99)" /run/netns/${PREFIX}ptp1 "K8S_POD_NAME=ptp1" >/dev/null
ip_ptp1=$(pod_json ptp1 | jq -r .ipv4)
for v in 100 040; do
	list=$T/main$v.conflist
	net=$(jq -r .name "$list")
	ns=${PREFIX}m$v
	id=$(cid 11$v)
	mkns $ns
	res=$(rt ADD "$list" "$id" /run/netns/$ns "K8S_POD_NAMESPACE=ci-ns;K8S_POD_NAME=m$v")
	expect_eq main_${v}_add $? 0
	pj=$(pod_json ci-ns/m$v)
	hostdev=$(jq -r '.interfaces[0].name' <<<"$res")
	expect_eq main_${v}_version "$(jq -r .cniVersion <<<"$res")" "$(jq -r .cniVersion "$list")"
	expect_eq main_${v}_interfaces "$(jq -c '[.interfaces[] | [.name, (.sandbox // "")]]' <<<"$res")" \
		"[[\"$hostdev\",\"\"],[\"eth0\",\"/run/netns/$ns\"]]"
	expect_eq main_${v}_address "$(jq -r '.ips[0].address' <<<"$res")" "$(jq -r .ipv4 <<<"$pj")/32"
	expect_eq main_${v}_ip_interface "$(jq -r '.ips[0].interface' <<<"$res")" 1
	if [ $v = 040 ]; then
		expect_eq main_040_ips_version "$(jq -r '.ips[0].version' <<<"$res")" 4
	else
		expect_eq main_100_no_ips_version "$(jq -r '.ips[0].version' <<<"$res")" null
	fi
	expect_eq main_${v}_pod_own_device "$(jq -r .adopted <<<"$pj")" false
	expect_eq main_${v}_pod_device "$(jq -r .hostdev <<<"$pj")" "$hostdev"
	check main_${v}_address_in_pod sh -c "ip -n $ns -4 addr show eth0 | grep -q '$(jq -r .ipv4 <<<"$pj")/32'"
	expect_eq main_${v}_lease "$(leases $net)" 1
	expect_eq main_${v}_to_chained "$(udp_count $ns ${PREFIX}ptp1 "$ip_ptp1" 7400 4)" 4
	expect_eq main_${v}_from_chained "$(udp_count ${PREFIX}ptp1 $ns "$(jq -r .ipv4 <<<"$pj")" 7401 4)" 4
	check main_${v}_check rt CHECK "$list" "$id" /run/netns/$ns
	check main_${v}_del rt DEL "$list" "$id" /run/netns/$ns
	check main_${v}_device_gone sh -c "! ip link show $hostdev 2>/dev/null"
	expect_eq main_${v}_pod_gone "$(pod_name ci-ns/m$v)" ""
	expect_eq main_${v}_lease_freed "$(leases $net)" 0
	check main_${v}_del_twice rt DEL "$list" "$id" /run/netns/$ns
	NOPREV=1 rt DEL "$list" "$id" "" >/dev/null
	expect_eq main_${v}_del_no_netns $? 0
	ip netns del $ns
done
# Main mode's steps: the node and the attachment looked at, the IPAM
# plugin, the node, the pod's own pair.
check main_add_steps_logged grep -qE ' debug ADD [0-9]+: took [0-9.]+ ms: stdin [0-9.]+, conf [0-9.]+, prior [0-9.]+, ipam [0-9.]+, node [0-9.]+, add [0-9.]+, close [0-9.]+$' "$LOG"
check main_check_steps_logged grep -qE ' debug CHECK [0-9]+: took [0-9.]+ ms: stdin [0-9.]+, conf [0-9.]+, node [0-9.]+, check [0-9.]+, pod [0-9.]+, close [0-9.]+, ipam [0-9.]+$' "$LOG"
# An ADD repeated while the pod is up (the spec forbids it; a runtime may
# still send it) fails with code 103 and leaves the pod as it was: its
# address leased, its device, its traffic. A build before the fix asked
# host-local first, which refused a second address for the attachment,
# and gave the live pod's address back on the way out: the pod kept an
# address IPAM would hand to the next pod.
mkns ${PREFIX}mr
id=$(cid 121)
res=$(rt ADD "$T/main100.conflist" "$id" /run/netns/${PREFIX}mr "K8S_POD_NAME=mr")
expect_eq main_repeat_first $? 0
mr_ip=$(pod_json mr | jq -r .ipv4)
mr_dev=$(pod_json mr | jq -r .hostdev)
mkns ${PREFIX}ptp2
rt ADD "$T/ptp10.conflist" "$(cid 98)" /run/netns/${PREFIX}ptp2 "K8S_POD_NAME=ptp2" >/dev/null
out=$(rt ADD "$T/main100.conflist" "$id" /run/netns/${PREFIX}mr "K8S_POD_NAME=mr")
rc=$?
expect_eq main_repeat_refused "$rc $(code_of "$out")" "1 103"
expect_eq main_repeat_lease_kept "$(leases ${PREFIX}main100)" 1
expect_eq main_repeat_lease_is_its "$(head -1 "$T/ipam/main/${PREFIX}main100/$mr_ip" 2>/dev/null | tr -d "\r")" "$id"
expect_eq main_repeat_pod_kept "$(pod_json mr | jq -r '"\(.ipv4) \(.hostdev)"')" "$mr_ip $mr_dev"
expect_eq main_repeat_traffic "$(udp_count ${PREFIX}ptp2 ${PREFIX}mr "$mr_ip" 7402 4)" 4
check main_repeat_check rt CHECK "$T/main100.conflist" "$id" /run/netns/${PREFIX}mr
# Main mode made the pod's side of the pair: CHECK looks at it in the
# pod's namespace, as ptp's does, and fails (code 105) when the pod has
# lost its address, its default route, its gateway's neighbour entry or
# its interface's up state; each put back, CHECK passes again (before,
# CHECK read only the node's record and passed all four).
mr_check() {
	local out
	out=$(rt CHECK "$T/main100.conflist" "$id" /run/netns/${PREFIX}mr)
	echo "$? $(code_of "$out") $(jq -r .details <<<"$out" 2>/dev/null | grep -o 'lost its [a-zA-Z0-9]*\|is down')"
}
mr_mac=$(cat /sys/class/net/$mr_dev/address)
mr_restore() {
	ip -n ${PREFIX}mr link set eth0 up
	ip -n ${PREFIX}mr addr replace "$mr_ip/32" dev eth0
	ip -n ${PREFIX}mr neigh replace 169.254.1.1 lladdr "$mr_mac" dev eth0 nud permanent
	ip -n ${PREFIX}mr route replace default via 169.254.1.1 dev eth0 onlink
}
ip -n ${PREFIX}mr addr del "$mr_ip/32" dev eth0
expect_eq main_check_address_lost "$(mr_check)" "1 105 lost its address"
mr_restore
ip -n ${PREFIX}mr route del default
expect_eq main_check_route_lost "$(mr_check)" "1 105 lost its IPv4"
mr_restore
ip -n ${PREFIX}mr neigh del 169.254.1.1 dev eth0
expect_eq main_check_neighbour_lost "$(mr_check)" "1 105 lost its neighbour"
mr_restore
ip -n ${PREFIX}mr link set eth0 down
expect_eq main_check_interface_down "$(mr_check)" "1 105 is down"
mr_restore
check main_check_restored rt CHECK "$T/main100.conflist" "$id" /run/netns/${PREFIX}mr
expect_eq main_check_restored_traffic "$(udp_count ${PREFIX}ptp2 ${PREFIX}mr "$mr_ip" 7403 4)" 4
# Both families: the IPv6 address and default route via fe80::1 are
# looked at as the IPv4 ones.
mkns ${PREFIX}m46
id46=$(cid 125)
res=$(rt ADD "$T/main46.conflist" "$id46" /run/netns/${PREFIX}m46 "K8S_POD_NAME=m46")
expect_eq main46_add "$? $(jq '.ips | length' <<<"$res")" "0 2"
check main46_check rt CHECK "$T/main46.conflist" "$id46" /run/netns/${PREFIX}m46
ip -n ${PREFIX}m46 -6 route del default
out=$(rt CHECK "$T/main46.conflist" "$id46" /run/netns/${PREFIX}m46)
expect_eq main46_check_route6_lost "$? $(code_of "$out") $(jq -r .details <<<"$out" | grep -o 'IPv6 default route via fe80::1')" \
	"1 105 IPv6 default route via fe80::1"
check main46_del rt DEL "$T/main46.conflist" "$id46" /run/netns/${PREFIX}m46
ip netns del ${PREFIX}m46
check main_repeat_del rt DEL "$T/main100.conflist" "$id" /run/netns/${PREFIX}mr
expect_eq main_repeat_lease_freed "$(leases ${PREFIX}main100)" 0
ip netns del ${PREFIX}mr
# The pod's namespace goes without a DEL (its pair with it), and the
# runtime adds the attachment again: the record is a leftover, the old
# lease is given back and the attachment gets an address anew (before:
# host-local refused, the ADD failed, code 106).
id=$(cid 122)
mkns ${PREFIX}mr
rt ADD "$T/main100.conflist" "$id" /run/netns/${PREFIX}mr "K8S_POD_NAME=mr" >/dev/null
ip netns del ${PREFIX}mr
mkns ${PREFIX}mr
out=$(rt ADD "$T/main100.conflist" "$id" /run/netns/${PREFIX}mr "K8S_POD_NAME=mr")
expect_eq main_readd_after_loss "$? $(leases ${PREFIX}main100) $(pod_json mr | jq -r .ipv4)" "0 1 $(jq -r '.ips[0].address' <<<"$out" | cut -d/ -f1)"
check main_readd_after_loss_check rt CHECK "$T/main100.conflist" "$id" /run/netns/${PREFIX}mr
check main_readd_del rt DEL "$T/main100.conflist" "$id" /run/netns/${PREFIX}mr
expect_eq main_readd_lease_freed "$(leases ${PREFIX}main100)" 0
ip netns del ${PREFIX}mr
# The same, with a DEL of another attachment in between: its sweep takes
# the leftover record (its device gone) and leaves the lease, so the
# re-ADD finds no record. host-local's refusal of a second address for
# the attachment is then its own old lease: given back, asked again
# (before: code 106, the fix above undone by any DEL on the node).
id=$(cid 123)
mkns ${PREFIX}mr
rt ADD "$T/main100.conflist" "$id" /run/netns/${PREFIX}mr "K8S_POD_NAME=mr" >/dev/null
ip netns del ${PREFIX}mr
rt DEL "$T/main100.conflist" "$(cid 124)" "" >/dev/null
expect_eq main_readd_swept_record_gone "$(pod_name mr)" ""
expect_eq main_readd_swept_lease_held "$(leases ${PREFIX}main100)" 1
mkns ${PREFIX}mr
out=$(rt ADD "$T/main100.conflist" "$id" /run/netns/${PREFIX}mr "K8S_POD_NAME=mr")
expect_eq main_readd_after_sweep "$? $(leases ${PREFIX}main100) $(pod_json mr | jq -r .ipv4)" "0 1 $(jq -r '.ips[0].address' <<<"$out" | cut -d/ -f1)"
check main_readd_after_sweep_del rt DEL "$T/main100.conflist" "$id" /run/netns/${PREFIX}mr
expect_eq main_readd_after_sweep_freed "$(leases ${PREFIX}main100)" 0
ip netns del ${PREFIX}mr
# A DEL without CNI_PATH (optional for DEL in the spec): the IPAM plugin
# is looked for where the runtime found podinject (before: every DEL
# failed, "CNI_PATH is needed", and the lease stayed)
mkns ${PREFIX}mr
id=$(cid 125)
rt ADD "$T/main100.conflist" "$id" /run/netns/${PREFIX}mr "K8S_POD_NAME=mr" >/dev/null
out=$(jq -c '.plugins[0] + {cniVersion: .cniVersion, name: .name}' "$T/main100.conflist" |
	env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin CNI_COMMAND=DEL CNI_CONTAINERID="$id" \
		CNI_NETNS=/run/netns/${PREFIX}mr CNI_IFNAME=eth0 "$CNI_PATH_DIR/podinject" 2>>"$T/stderr")
expect_eq main_del_without_cni_path "$? $(pod_name mr) $(leases ${PREFIX}main100)" "0  0"
rm -f "$T/cache/$(jq -r .name "$T/main100.conflist")-$id-eth0"
ip netns del ${PREFIX}mr
rt DEL "$T/ptp10.conflist" "$(cid 98)" /run/netns/${PREFIX}ptp2 >/dev/null
ip netns del ${PREFIX}ptp2
# Two ADDs of one attachment at once (a runtime's retry racing its first
# try): both pass the look before IPAM, host-local gives the address to
# one and refuses the other, whose undo must leave the winner's address
# alone. The IPAM plugin holds the first ADD for a second, so that the
# second starts meanwhile. (A build before the fix read the pod through a
# read-only handle, could not check it, and gave its address back.)
cat >"$T/bin/ipam-slow" <<'EOS'
#!/bin/sh
conf=$(cat)
if [ "$CNI_COMMAND" = ADD ] && mkdir "$(dirname "$0")/../slow.once" 2>/dev/null; then
	sleep 1
fi
echo "$conf" | exec /usr/lib/cni/host-local
EOS
chmod +x "$T/bin/ipam-slow"
slconf=$(podconf 1.0.0 "" "$(jq -cn --arg d "$T/ipam/slow" '{name: "ci-slow", mode: "main",
	ipam: {type: "ipam-slow", ranges: [[{subnet: "10.123.10.0/24"}]], dataDir: $d}}')")
mkns ${PREFIX}sl
id=$(cid 123)
(pi_direct ADD "$slconf" "$id" /run/netns/${PREFIX}sl eth0 "IgnoreUnknown=1;K8S_POD_NAME=sl" >/dev/null; echo $? >"$T/sl1") &
sleep 0.3
pi_direct ADD "$slconf" "$id" /run/netns/${PREFIX}sl eth0 "IgnoreUnknown=1;K8S_POD_NAME=sl" >/dev/null
echo $? >"$T/sl2"
wait
sl_ip=$(pod_json sl | jq -r .ipv4)
expect_eq race_one_added "$(cat "$T/sl1" "$T/sl2" | sort | tr '\n' ' ')" "0 1 "
expect_eq race_lease_kept "$(ls "$T/ipam/slow/ci-slow" 2>/dev/null | grep '^10\.' | tr '\n' ' ')" "$sl_ip "
expect_eq race_pod_of_lease "$(pod_json sl | jq -r .attach_id | grep -c "$id")" 1
pi_direct DEL "$slconf" "$id" /run/netns/${PREFIX}sl >/dev/null
expect_eq race_del_frees "$(ls "$T/ipam/slow/ci-slow" 2>/dev/null | grep -c '^10\.')" 0
ip netns del ${PREFIX}sl
# A failed main ADD (the interface name is taken in the pod) undoes all,
# the IPAM lease included; DEL after it succeeds.
mkns ${PREFIX}mf
ip -n ${PREFIX}mf link add eth0 type veth peer name eth1
id=$(cid 120)
before=$(npods)
out=$(rt ADD "$T/main100.conflist" "$id" /run/netns/${PREFIX}mf "K8S_POD_NAME=mf")
check_fails main_failed_add test $? = 0
expect_eq main_failed_add_code_json "$(code_of "$out" | grep -c '^[0-9]')" 1
expect_eq main_failed_add_no_pod "$(npods)" "$before"
expect_eq main_failed_add_lease_freed "$(leases ${PREFIX}main100)" 0
expect_eq main_failed_add_no_device "$(ip -o link show | grep -c ': pi[0-9a-f]\{11\}[@:]')" 0
check main_failed_add_then_del rt DEL "$T/main100.conflist" "$id" /run/netns/${PREFIX}mf
ip netns del ${PREFIX}mf
rt DEL "$T/ptp10.conflist" "$(cid 99)" /run/netns/${PREFIX}ptp1 >/dev/null
ip netns del ${PREFIX}ptp1

# ---- main mode with an IPAM plugin that misbehaves ------------------------------
# A fake plugin (a script in CNI_PATH; what it does on ADD is in its name)
# that prints without end, hangs (a child of its own in the background),
# or shuts its stdin before the config (bigger than a pipe holds) is in
# and then prints a valid result. Each ADD fails with code 106 and a clear
# message in bounded time, the plugin and its children are gone, no pod
# is left, and the plugin got its DEL. (A build before the fix read
# without end, waited without end, or took the result of a plugin that
# never got its config: `timeout` bounds those runs.)
cat >"$T/bin/ipam-fake" <<'EOS'
#!/bin/sh
echo "$CNI_COMMAND $(basename "$0")" >>"$(dirname "$0")/../ipam-fake.log"
case "$CNI_COMMAND:$(basename "$0")" in
ADD:ipam-endless) exec yes '{"cniVersion":"1.0.0","m":"cni-fake-endless"}' ;;
ADD:ipam-hang) cat >/dev/null; sleep 613 & wait ;;
ADD:ipam-noconf) exec 0<&-; sleep 0.3
	echo '{"cniVersion":"1.0.0","ips":[{"address":"10.123.6.9/24"}]}' ;;
*) cat >/dev/null ;;
esac
EOS
chmod +x "$T/bin/ipam-fake"
fake_procs() { pgrep -f 'cni-fake-endless|sleep 613|ipam-(endless|hang|noconf)' | wc -l; }
declare -A msg
mkns ${PREFIX}fi
for kind in endless hang noconf; do
	ln -s ipam-fake "$T/bin/ipam-$kind"
	conf=$(jq -cn --arg node "$NODE" --arg log "$LOG" --arg t "ipam-$kind" \
		'{cniVersion: "1.0.0", name: "ci-fake", type: "podinject",
		  mode: "main", node: $node, logFile: $log, ipamTimeoutMs: 1000,
		  pad: ("x" * 200000), ipam: {type: $t}}')
	before=$(npods)
	t0=$(now_ms)
	out=$(echo "$conf" | timeout 20 env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
		CNI_COMMAND=ADD CNI_CONTAINERID="$(cid 130)" \
		CNI_NETNS=/run/netns/${PREFIX}fi CNI_IFNAME=eth0 \
		CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAME=fi" CNI_PATH="$CNI_PATH_DIR" \
		"$CNI_PATH_DIR/podinject" 2>>"$T/stderr")
	t1=$(now_ms)
	expect_eq ipam_${kind}_code "$(code_of "$out")" 106
	msg[$kind]=$(jq -r .msg <<<"$out" 2>/dev/null)
	expect_lt ipam_${kind}_bounded "$(sub "$t1" "$t0")" 8000
	expect_num ipam_${kind}_no_pod "$(npods)" "$before"
	expect_eq ipam_${kind}_no_process "$(fake_procs)" 0
	# (a build before the fix left them: out of the way of the next)
	for p in $(pgrep -f 'cni-fake-endless|sleep 613|ipam-(endless|hang|noconf)'); do
		kill -KILL "$p"
	done
done
expect_eq ipam_endless_named "${msg[endless]}" "IPAM plugin output too large"
expect_eq ipam_hang_named "${msg[hang]}" "IPAM plugin timed out"
expect_eq ipam_noconf_named "${msg[noconf]}" "IPAM plugin did not take its config"
expect_eq ipam_fake_dels "$(grep -c '^DEL ' "$T/ipam-fake.log")" 3
ip netns del ${PREFIX}fi

# ---- a broken node: ADD fails, and the log says why --------------------------------
# One of the node's pins is gone (a bpffs cleaned by hand): the plugin
# cannot open the node, and cannot make it (it is there). It tries for as
# long as it would wait for the lock, then fails with a message of its
# own, the library's reason logged as an error. Before, the reason went to
# the debug level and the runtime was told the node was busy.
mkns ${PREFIX}bk
dir=$("$PI" -N $NODE -j node show | jq -r .pin_dir)
check broken_pin_removed rm "$dir/endpoints"
mark=$(wc -l <"$LOG")
t0=$(now_ms)
out=$(pi_direct ADD "$(podconf 1.0.0 "" '{"mode": "main", "lockTimeoutMs": 300, "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.123.7.0/24"}]], "dataDir": "'"$T"'/ipam/bk"}}')" "$(cid 140)" /run/netns/${PREFIX}bk eth0 "IgnoreUnknown=1;K8S_POD_NAME=bk")
t1=$(now_ms)
expect_eq broken_add_msg "$(jq -r .msg <<<"$out" 2>/dev/null)" "podinject node cannot be opened"
expect_eq broken_add_code "$(code_of "$out")" 100
expect_lt broken_add_bounded "$(sub "$t1" "$t0")" 5000
check broken_reason_logged sh -c "tail -n +$((mark + 1)) '$LOG' | grep ' error ' | grep -q 'is incomplete: .*endpoints is missing'"
expect_eq broken_add_address_given_back "$(ls "$T/ipam/bk/ci-ptp" 2>/dev/null | grep -c '^10\.')" 0
check broken_down "$PI" -N $NODE node down --force
ip netns del ${PREFIX}bk
check broken_node_up_again "$PI" -N $NODE node up --host

# ---- a node whose making was cut off (a plugin killed while it made it) -------
# `node up` makes the pin directory, locks it, loads the datapath (the
# verifier: most of its time), pins, then writes the configuration. Killed
# on the way, it leaves a directory locked by nobody with some pins and
# no configuration, or one never written. Before the fix every ADD after
# it failed with "podinject node cannot be opened" (or 104, "another
# build", for the configuration never written) until an operator ran
# `node down`. Now the next ADD removes what the making left (nothing of
# it is in use) and makes the node. A node that lost its configuration
# after it had pods is not that: it is left for `node down`.
CUT=${PREFIX}cut
"$PI" -N $CUT node up --host >/dev/null
cdir=$("$PI" -N $CUT -j node show | jq -r .pin_dir)
csize=$(bpftool -j map show pinned "$cdir/node_config" | jq .bytes_value)
"$PI" -N $CUT node down >/dev/null
cutconf=$(podconf 1.0.0 "" "$(jq -cn --arg n $CUT --arg d "$T/ipam/cut" \
	'{mode: "main", node: $n, lockTimeoutMs: 300, ipam: {type: "host-local",
	  ranges: [[{subnet: "10.123.8.0/24"}]], dataDir: $d}}')")
mkns ${PREFIX}cu
cut_add() {	# cut_add NAME CID: ADD, CHECK and DEL of a pod on the node
	local out rc
	out=$(pi_direct ADD "$cutconf" "$(cid "$2")" /run/netns/${PREFIX}cu eth0 "IgnoreUnknown=1;K8S_POD_NAME=cu")
	rc=$?
	expect_eq "$1_add" "$rc $(code_of "$out")" "0 null"
	check "$1_whole" "$PI" -N $CUT pod show cu
	pi_direct DEL "$cutconf" "$(cid "$2")" /run/netns/${PREFIX}cu >/dev/null
}
n=150
for kind in no_config unwritten; do
	mkdir -p "$cdir"
	# and the directory a `node up` makes and locks before it renames it
	# to the node's, left by one killed before the rename
	mkdir "$(dirname "$cdir")/_up_$(basename "$cdir")-999999"
	bpftool map create "$cdir/pods" type hash key 4 value 8 entries 4 name pods
	[ $kind = unwritten ] && bpftool map create "$cdir/node_config" type array key 4 \
		value "$csize" entries 1 name node_config
	mark=$(wc -l <"$LOG")
	cut_add cut_$kind $((n++))
	check cut_${kind}_logged sh -c "tail -n +$((mark + 1)) '$LOG' | grep -q \"a 'node up' was cut off\""
	check cut_${kind}_tmp_swept test ! -e "$(dirname "$cdir")/_up_$(basename "$cdir")-999999"
	"$PI" -N $CUT node down >/dev/null
done
# the negative control: no configuration, but a pod recorded
mkdir -p "$cdir"
bpftool map create "$cdir/pods" type hash key 4 value 8 entries 4 name pods
bpftool map update pinned "$cdir/pods" key 7 0 0 0 value 0 0 0 0 0 0 0 0
out=$(pi_direct ADD "$cutconf" "$(cid $((n++)))" /run/netns/${PREFIX}cu eth0 "IgnoreUnknown=1;K8S_POD_NAME=cu")
expect_eq cut_with_pods_refused "$? $(code_of "$out")" "1 100"
check cut_with_pods_kept test -e "$cdir/pods"
check cut_with_pods_down "$PI" -N $CUT node down --force
# A node an older build made (its configuration says ABI 8): not a
# cut-off making, code 104, and the way out is the upgrade, not a wipe
# (the details once said `node down --force`, for every other build).
mkdir -p "$cdir"
bpftool map create "$cdir/node_config" type array key 4 value "$csize" entries 1 name node_config
bpftool map update pinned "$cdir/node_config" key 0 0 0 0 value 120 0 $(for ((i = 2; i < 44; i++)); do printf '0 '; done)8 0 0 0 $(for ((i = 48; i < csize; i++)); do printf '0 '; done)
out=$(pi_direct ADD "$cutconf" "$(cid $((n++)))" /run/netns/${PREFIX}cu eth0 "IgnoreUnknown=1;K8S_POD_NAME=cu")
expect_eq older_node_code_104 "$? $(code_of "$out")" "1 104"
expect_eq older_node_says_upgrade "$(jq -r .details <<<"$out" | grep -c "node upgrade")" 1
# STATUS says so (code 50, and why): the runtime holds back the pods whose
# ADD would fail (before, it answered ready whatever the node was)
out=$(pi_direct STATUS "$(jq -c '.cniVersion = "1.1.0"' <<<"$cutconf")" "" "" "" "")
expect_eq older_node_status_not_available "$? $(code_of "$out") $(jq -r .msg <<<"$out") $(jq -r .details <<<"$out" | grep -c "node upgrade")" "1 50 podinject is not available 1"
"$PI" -N $CUT node down --force >/dev/null
# The real thing: the plugin's first ADD on the node killed while it
# makes the node, after a few delays (where each lands depends on the
# machine); the runtime's next ADD of the pod goes through each time.
for ms in 10 40 80 160; do
	"$PI" -N $CUT node down >/dev/null 2>&1
	echo "$cutconf" | env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin CNI_COMMAND=ADD \
		CNI_CONTAINERID="$(cid $n)" CNI_NETNS=/run/netns/${PREFIX}cu CNI_IFNAME=eth0 \
		CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAME=cu" CNI_PATH="$CNI_PATH_DIR" \
		"$CNI_PATH_DIR/podinject" >/dev/null 2>&1 &
	sleep "$(printf '0.%03d' $ms)"
	kill -KILL $! 2>/dev/null
	wait $! 2>/dev/null
	echo "# killed after $ms ms: $(ls "$cdir" 2>/dev/null | wc -l) pins left, node show: $("$PI" -N $CUT node show >/dev/null 2>&1 && echo ok || echo fails)"
	pi_direct DEL "$cutconf" "$(cid $n)" /run/netns/${PREFIX}cu >/dev/null 2>&1
	cut_add cut_killed_${ms}ms $((n++))
done
"$PI" -N $CUT node down >/dev/null
ip netns del ${PREFIX}cu

# ---- leftovers of attachments whose DEL never came ------------------------------
# A record whose device is gone gives way to the pod that needs its name
# or its address (a runtime restarted, a node rebooted, an ADD that
# re-adopted a pod between the chain's DELs). The address case: the
# old pod's namespace is deleted without a DEL and host-local's lease is
# released (as ptp's DEL would), and the next pod gets the same address.
mkns ${PREFIX}sa
rt ADD "$T/ptp10.conflist" "$(cid 71)" /run/netns/${PREFIX}sa "K8S_POD_NAME=sa;IP=10.123.1.77" >/dev/null
expect_eq stale_addr_first "$(pod_json sa | jq -r .ipv4)" 10.123.1.77
ip netns del ${PREFIX}sa
rm -f "$T/ipam/ptp/${PREFIX}ptp/10.123.1.77"
mkns ${PREFIX}sb
out=$(rt ADD "$T/ptp10.conflist" "$(cid 72)" /run/netns/${PREFIX}sb "K8S_POD_NAME=sb;IP=10.123.1.77")
expect_eq stale_addr_gives_way "$? $(pod_json sb | jq -r .ipv4) $(pod_name sa)" "0 10.123.1.77 "
rt DEL "$T/ptp10.conflist" "$(cid 72)" /run/netns/${PREFIX}sb >/dev/null
NOPREV=1 rt DEL "$T/ptp10.conflist" "$(cid 71)" "" >/dev/null
ip netns del ${PREFIX}sb

# ---- a DEL the plugin could not do: its record goes with the next DEL ----------
# The install step upgrades the node before it puts the new plugin in
# place, so for a moment the plugin in place meets a node of another
# build: its DEL succeeds (a pod deletion must not block on an operator)
# and leaves the record, here by a node whose recorded version is made an
# older one's for the DEL and put back after (the upgrade). The pod's
# namespace then goes, and its device with it. Before the fix the record
# stayed, with the pod's name, address and rules, until a new pod needed
# one of them. Now the next DEL the plugin can do removes it; a live pod's
# record and a `pod add` record whose namespace is gone stay.
ncfg=$("$PI" -N $NODE -j node show | jq -r .pin_dir)/node_config
mkns ${PREFIX}wa
mkns ${PREFIX}wb
mkns ${PREFIX}wc
rt ADD "$T/ptp10.conflist" "$(cid 75)" /run/netns/${PREFIX}wa "K8S_POD_NAME=wa" >/dev/null
rt ADD "$T/ptp10.conflist" "$(cid 76)" /run/netns/${PREFIX}wb "K8S_POD_NAME=wb" >/dev/null
rt ADD "$T/ptp10.conflist" "$(cid 77)" /run/netns/${PREFIX}wc "K8S_POD_NAME=wc" >/dev/null
"$PI" -N $NODE pod add ${PREFIX}wx --ip 10.123.9.9 >/dev/null
wa_ip=$(pod_json wa | jq -r .ipv4)
cfg_was=$(bpftool map lookup pinned $ncfg key 0 0 0 0 -j | jq -r '.value | join(" ")')
bpftool map update pinned $ncfg key 0 0 0 0 value \
	$(bpftool map lookup pinned $ncfg key 0 0 0 0 -j | jq -r '.value | .[:44] + ["8", "0", "0", "0"] + .[48:] | join(" ")')
mark=$(wc -l <"$LOG")
rt DEL "$T/ptp10.conflist" "$(cid 75)" /run/netns/${PREFIX}wa >/dev/null
expect_eq window_del_succeeds $? 0
check window_del_said sh -c "tail -n +$((mark + 1)) '$LOG' | grep -q 'was made by another build; leaving attachment'"
bpftool map update pinned $ncfg key 0 0 0 0 value $cfg_was
wa_dev=$(pod_json wa | jq -r .hostdev)
wx_dev=pi-${PREFIX}wx
ip netns del ${PREFIX}wa
ip netns del ${PREFIX}wx
# the kernel takes a namespace's devices down later, on its own time
for _ in $(seq 100); do
	ip link show dev "$wa_dev" >/dev/null 2>&1 || ip link show dev "$wx_dev" >/dev/null 2>&1 || break
	sleep 0.1
done
expect_eq window_record_left "$(pod_json wa | jq -r .ipv4)" "$wa_ip"
mark=$(wc -l <"$LOG")
rt DEL "$T/ptp10.conflist" "$(cid 76)" /run/netns/${PREFIX}wb >/dev/null
expect_eq window_next_del "$? $(pod_name wb)" "0 "
expect_eq window_leftover_removed "$(pod_name wa)" ""
check window_leftover_said sh -c "tail -n +$((mark + 1)) '$LOG' | grep -q 'pod wa of attachment .* had lost its device without a DEL that removed it; removed'"
expect_eq window_live_pod_kept "$(pod_name wc)" wc
expect_eq window_cli_pod_kept "$(pod_name ${PREFIX}wx)" ${PREFIX}wx
rt DEL "$T/ptp10.conflist" "$(cid 77)" /run/netns/${PREFIX}wc >/dev/null
check window_cli_pod_del "$PI" -N $NODE pod del ${PREFIX}wx
ip netns del ${PREFIX}wb
ip netns del ${PREFIX}wc

# ---- a named node under the plugin's node name: nothing of it looked for here -
# An operator's `node up` (a namespace of its own) of the name the plugin
# serves: main-mode pods get their host devices in that namespace, where
# the plugin's ifindexes mean nothing. Run where those ifindexes name no
# device (here: the plugin in a namespace of its own, as nsenter keeps
# bpffs), a DEL of another attachment took the node's live pods for
# leftovers and removed them, devices and all.
NN=${PREFIX}nn
nnconf=$(jq -cn --arg n $NN --arg d "$T/ipam/nn" --arg log "$LOG" \
	'{cniVersion: "1.0.0", name: "ci-nn", type: "podinject", mode: "main",
	  node: $n, logFile: $log, lockTimeoutMs: 2000, ipam: {type: "host-local",
	  ranges: [[{subnet: "10.123.12.0/24"}]], dataDir: $d}}')
nn_pods() { "$PI" -N $NN -j pod list 2>/dev/null | jq length; }
"$PI" -N $NN node up >/dev/null
mkns ${PREFIX}n1
mkns ${PREFIX}nx
pi_direct ADD "$nnconf" "$(cid 80)" /run/netns/${PREFIX}n1 eth0 "IgnoreUnknown=1;K8S_POD_NAME=n1" >/dev/null
expect_eq named_node_add "$? $(nn_pods)" "0 1"
echo "$nnconf" | nsenter --net=/run/netns/${PREFIX}nx env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
	CNI_COMMAND=DEL CNI_CONTAINERID="$(cid 81)" CNI_NETNS= CNI_IFNAME=eth0 \
	CNI_ARGS=IgnoreUnknown=1 CNI_PATH="$CNI_PATH_DIR" "$CNI" >/dev/null 2>>"$T/stderr"
expect_eq named_node_del_elsewhere_kept "$? $(nn_pods)" "0 1"
pi_direct DEL "$nnconf" "$(cid 80)" /run/netns/${PREFIX}n1 >/dev/null
expect_eq named_node_del "$? $(nn_pods)" "0 0"
"$PI" -N $NN node down >/dev/null
ip netns del ${PREFIX}n1
ip netns del ${PREFIX}nx

# ---- a clsact node (a kernel without tcx, or "attach": "clsact") ---------------
# CHECK finds a pod whose filters are gone (the pinned programs outlive
# them: CHECK passed, it looked at the pins only), and a record whose
# device is gone gives way to the pod of the same name (its pins made it
# look whole, and every ADD of that name failed with 103).
CLN=${PREFIX}cl
conflist "$T/clsact.conflist" 1.0.0 ${PREFIX}ptpcl \
	"$(jq -n --argjson i "$(ipam 10.123.6.0/24 ptpcl)" '{type: "ptp", ipMasq: false, ipam: $i}')" \
	"$(jq -n --arg n $CLN '{node: $n, attach: "clsact"}')"
mkns ${PREFIX}k1
rt ADD "$T/clsact.conflist" "$(cid 73)" /run/netns/${PREFIX}k1 "K8S_POD_NAME=k1" >/dev/null
expect_eq clsact_node_made "$("$PI" -N $CLN -j node show | jq -r .attach)" clsact
check clsact_check_ok rt CHECK "$T/clsact.conflist" "$(cid 73)" /run/netns/${PREFIX}k1
dev=$("$PI" -N $CLN -j pod show k1 | jq -r .hostdev)
tc filter del dev "$dev" ingress 2>/dev/null
tc filter del dev "$dev" egress 2>/dev/null
out=$(rt CHECK "$T/clsact.conflist" "$(cid 73)" /run/netns/${PREFIX}k1)
expect_eq clsact_check_missing_filters "$? $(code_of "$out")" "1 105"
ip netns del ${PREFIX}k1	# no DEL: the device goes, the record stays
mkns ${PREFIX}k2
out=$(rt ADD "$T/clsact.conflist" "$(cid 74)" /run/netns/${PREFIX}k2 "K8S_POD_NAME=k1")
rc=$?
expect_eq clsact_stale_gives_way "$rc $("$PI" -N $CLN -j pod list | jq length) $(code_of "$out")" "0 1 null"
rt DEL "$T/clsact.conflist" "$(cid 74)" /run/netns/${PREFIX}k2 >/dev/null
NOPREV=1 rt DEL "$T/clsact.conflist" "$(cid 73)" "" >/dev/null
ip netns del ${PREFIX}k2
check clsact_node_down "$PI" -N $CLN node down

# ---- DEL needs neither CNI_NETNS nor CNI_ARGS: what ADD would refuse there does
# not keep a pod from going (it did: code 4)
mkns ${PREFIX}dx
rt ADD "$T/ptp10.conflist" "$(cid 75)" /run/netns/${PREFIX}dx "K8S_POD_NAME=dx" >/dev/null
out=$(pi_direct DEL "$(podconf 1.0.0)" "$(cid 75)" "/run/netns/$(printf 'x%.0s' $(seq 300))" eth0 "IgnoreUnknown=1;junk")
expect_eq del_bad_netns_args "$? $(pod_name dx)" "0 "
NOPREV=1 rt DEL "$T/ptp10.conflist" "$(cid 75)" "" >/dev/null
ip netns del ${PREFIX}dx

# ---- 32 concurrent ADDs, then 32 concurrent DELs --------------------------------
# The node is down first: the 32 race to bring it up, and one does.
check concurrent_node_down_first "$PI" -N $NODE node down
mark=$(wc -l <"$LOG")
err0=$(wc -c <"$T/stderr")
for i in $(seq 1 32); do mkns ${PREFIX}cc$i; done
for i in $(seq 1 32); do
	rt ADD "$T/ptp10.conflist" "$(cid 9$i)" /run/netns/${PREFIX}cc$i "K8S_POD_NAMESPACE=cc;K8S_POD_NAME=p$i" \
		>"$T/cc$i.out" 2>&1 &
done
wait
ok=0
for i in $(seq 1 32); do jq -e '.ips[0].address' "$T/cc$i.out" >/dev/null 2>&1 && ok=$((ok + 1)); done
expect_eq concurrent_adds "$ok" 32
# The losers of the race to make the node find it made: no error logged
# ("already up" is the plugin's debug line), none on stderr.
expect_eq concurrent_node_made_no_error "$(tail -n +$((mark + 1)) "$LOG" | grep -c ' error ')" 0
expect_eq concurrent_node_made_stderr "$(wc -c <"$T/stderr")" "$err0"
expect_eq concurrent_pods "$("$PI" -N $NODE -j pod list | jq '[.[] | select(.name | startswith("cc/"))] | length')" 32
expect_eq concurrent_distinct_addresses "$("$PI" -N $NODE -j pod list | jq '[.[] | .ipv4] | unique | length')" 32
expect_eq concurrent_traffic "$(udp_count ${PREFIX}cc1 ${PREFIX}cc32 "$(pod_json cc/p32 | jq -r .ipv4)" 7200 3)" 3
bg_pids=()
for i in $(seq 1 32); do
	rt DEL "$T/ptp10.conflist" "$(cid 9$i)" /run/netns/${PREFIX}cc$i >"$T/cc$i.del" 2>&1 &
	bg_pids+=($!)
done
bg_wait "${bg_pids[@]}"
fails=$BG_FAILS
expect_eq concurrent_dels_ok "$fails" 0
expect_eq concurrent_dels_pods "$(npods)" 0
for i in $(seq 1 32); do ip netns del ${PREFIX}cc$i; done

# ---- protocol hygiene over the whole run ---------------------------------------
expect_eq stdout_only_json "$BAD_STDOUT" 0
check log_file_written test -s "$LOG"
check log_names_adds grep -q 'adopted on node' "$LOG"
ids=$(node_prog_ids $NODE)
check node_down "$PI" -N $NODE node down
expect_eq node_down_no_links "$(links_of_progs $ids)" 0
