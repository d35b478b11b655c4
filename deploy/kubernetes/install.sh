#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# podinject-install: the DaemonSet's install step (the image's entrypoint).
#
#  0. upgrades the node the plugin serves, in place, before this build's
#     plugin takes its place (`node upgrade`: a node made by the release
#     before is migrated, a node of this ABI gets this build's programs),
#     so that no CNI ADD of the new plugin ever meets a node it cannot
#     use; no node yet is nothing to do, and a failed upgrade stops here
#     (the plugin in place keeps serving the node it knows);
#  1. copies the plugin into the host's CNI bin dir under a temporary name
#     and renames it into place (a runtime never runs a half-written file),
#     with the shared libraries the host may lack in podinject.lib/ beside
#     it (the binary's RPATH);
#  2. inserts podinject, chained, into the node's CNI config: the first
#     file of the conf dir in libcni's order; a lone .conf becomes a
#     .conflist; written to a temporary name and renamed;
#  3. adopts the pods that exist already (started before the plugin was
#     installed), from libcni's result cache: the plugin's own ADD with the
#     cached result as prevResult;
#  4. applies the node's desired state from PODINJECT_STATE (a mounted
#     ConfigMap: rules, grants, proxy rules, tracker timeouts; pods of
#     other nodes in it are skipped), at start and whenever the file
#     changes, and again every STATE_RESYNC_SECONDS to repair drift (a node
#     wiped and rebuilt by step 3);
#  5. keeps watching: the binary and the config are put back when the
#     primary CNI rewrites its file or the binary goes missing.
# On SIGTERM it stops and leaves the binary and the config in place, so
# that the DEL of every pod keeps working while the DaemonSet is away.
#
# Environment:
#   CNI_BIN_DIR    (/host/opt/cni/bin)   CNI_NET_DIR (/host/etc/cni/net.d)
#   CNI_CACHE_DIR  (/host/var/lib/cni)   PODINJECT_SRC (/opt/podinject)
#   PODINJECT_NODE (cni)   PODINJECT_CONF  extra keys for podinject's entry,
#                                          JSON, e.g. {"attach":"tcx"}
#   PODINJECT_LOG  (/var/log/podinject-cni.log, a path on the host)
#   PODINJECT_STATE  the desired-state document (JSON or YAML), optional
#   STATE_RESYNC_SECONDS (60)   PODINJECT_CLI (podinject)
#   INSTALL_ONCE=1 install once and exit;  POLL_SECONDS (2)
set -eu
BIN=${CNI_BIN_DIR:-/host/opt/cni/bin}
NET=${CNI_NET_DIR:-/host/etc/cni/net.d}
CACHE=${CNI_CACHE_DIR:-/host/var/lib/cni}
SRC=${PODINJECT_SRC:-/opt/podinject}
NODE=${PODINJECT_NODE:-cni}
EXTRA=${PODINJECT_CONF:-\{\}}
PLOG=${PODINJECT_LOG:-/var/log/podinject-cni.log}
POLL=${POLL_SECONDS:-2}
CLI=${PODINJECT_CLI:-podinject}
STATE=${PODINJECT_STATE:-}
RESYNC=${STATE_RESYNC_SECONDS:-60}

log() { echo "podinject-install: $*" >&2; }

# The entry podinject gets in the node's conflist.
entry() {
	jq -cn --arg node "$NODE" --arg log "$PLOG" --argjson x "$EXTRA" \
		'{type: "podinject", node: $node, logFile: $log} + $x'
}

# atomic_copy SRC DST: temporary name in DST's directory, then rename;
# nothing happens when DST has SRC's content already.
atomic_copy() {
	if [ -f "$2" ] && cmp -s "$1" "$2"; then
		return 1
	fi
	tmp="$(dirname "$2")/.$(basename "$2").tmp.$$"
	cp "$1" "$tmp"
	chmod 0755 "$tmp"
	mv -f "$tmp" "$2"
}

install_binary() {
	changed=
	mkdir -p "$BIN/podinject.lib"
	for l in "$SRC"/lib/*; do
		[ -f "$l" ] || continue
		atomic_copy "$l" "$BIN/podinject.lib/$(basename "$l")" && changed=1
	done
	# libraries first: the new binary is never there without them
	atomic_copy "$SRC/podinject-cni" "$BIN/podinject" && changed=1
	if [ -n "$changed" ]; then
		log "installed $BIN/podinject"
	fi
	return 0
}

# The file libcni (and so the kubelet's runtime) uses: the first of
# *.conf, *.conflist, *.json in lexical order.
primary_conf() {
	for f in "$NET"/*; do
		case "$f" in
		*.conf | *.conflist | *.json) ;;
		*) continue ;;
		esac
		[ -f "$f" ] || continue
		if jq -e 'type == "object" and (has("plugins") or has("type"))' "$f" >/dev/null 2>&1; then
			echo "$f"
			return 0
		fi
	done
	return 1
}

# write_atomic FILE: stdin into FILE by a temporary name
write_atomic() {
	tmp="$(dirname "$1")/.podinject.tmp.$$"
	cat >"$tmp"
	mv -f "$tmp" "$1"
}

# Inserts (or updates) podinject's entry; prints the conflist's path.
insert_conf() {
	f=$(primary_conf) || { log "no CNI config in $NET yet"; return 1; }
	e=$(entry)
	if jq -e 'has("plugins")' "$f" >/dev/null; then
		want=$(jq --argjson e "$e" '.plugins |= ([.[] | select(.type != "podinject")] + [$e])' "$f")
		if [ "$(jq -S -c . "$f")" != "$(echo "$want" | jq -S -c .)" ]; then
			echo "$want" | write_atomic "$f"
			log "podinject inserted into $f"
		fi
		echo "$f"
	else
		# A lone plugin: the list that holds it and us. The .conf goes,
		# or libcni (sorting .conf first) would keep using it.
		out=${f%.*}.conflist
		jq --argjson e "$e" '{cniVersion: .cniVersion, name: .name,
			plugins: [del(.cniVersion, .name), $e]}' "$f" | write_atomic "$out"
		rm -f "$f"
		log "$f turned into $out with podinject"
		echo "$out"
	fi
}

# Pods that were set up before podinject was in the config.
adopt_existing() {
	list=$1
	name=$(jq -r .name "$list")
	ver=$(jq -r .cniVersion "$list")
	conf=$(jq -c --arg v "$ver" --arg n "$name" \
		'.plugins[] | select(.type == "podinject") + {cniVersion: $v, name: $n}' "$list")
	for c in "$CACHE"/results/*; do
		[ -f "$c" ] || continue
		jq -e --arg n "$name" '.networkName == $n and (.result | type == "object")' "$c" >/dev/null 2>&1 || continue
		cid=$(jq -r .containerId "$c")
		ifn=$(jq -r .ifName "$c")
		ns=$(jq -r --arg i "$ifn" '[.result.interfaces[]? | select(.name == $i and .sandbox) | .sandbox][0] // empty' "$c")
		args=$(jq -r '[.cniArgs[]? | join("=")] | join(";")' "$c")
		[ -n "$ns" ] && [ -e "$ns" ] || continue
		if echo "$conf" | jq -c --slurpfile r "$c" '. + {prevResult: ($r[0].result)}' |
		   CNI_COMMAND=ADD CNI_CONTAINERID="$cid" CNI_NETNS="$ns" CNI_IFNAME="$ifn" \
		   CNI_ARGS="$args" CNI_PATH="$BIN" "$BIN/podinject" >/dev/null; then
			log "adopted existing pod $cid ($ifn)"
		else
			log "cannot adopt existing pod $cid ($ifn)"
		fi
	done
}

upgrade_node() {
	if ! "$CLI" -N "$NODE" node upgrade --if-up >&2; then
		log "cannot upgrade node $NODE: the plugin in place is left as it is"
		return 1
	fi
}

state_sum=
state_at=0
apply_state() {
	# an empty document (the manifest's as shipped) declares nothing
	[ -n "$STATE" ] && [ -s "$STATE" ] || return 0
	# no node yet (no pod so far): nothing to apply to, try again later
	"$CLI" -N "$NODE" node show >/dev/null 2>&1 || return 0
	# (the image's tools are busybox's: md5sum, no cksum)
	sum=$(md5sum <"$STATE")
	now=$(date +%s)
	if [ "$sum" = "$state_sum" ] && [ $((now - state_at)) -lt "$RESYNC" ]; then
		return 0
	fi
	if "$CLI" -N "$NODE" apply -f "$STATE" --skip-absent >&2; then
		[ "$sum" = "$state_sum" ] || log "applied $STATE"
		state_sum=$sum
		state_at=$now
	else
		log "cannot apply $STATE; trying again at the next poll"
	fi
}

trap 'log "stopping; the plugin and its config stay"; exit 0' TERM INT
upgrade_node || exit 1
install_binary
if list=$(insert_conf); then
	adopt_existing "$list"
fi
apply_state
[ "${INSTALL_ONCE:-0}" = 1 ] && exit 0
while :; do
	sleep "$POLL" &
	wait $! || true
	install_binary
	insert_conf >/dev/null || true
	apply_state
done
