#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Upgrade in place: a node made by a previous release (OLD_REV: v0.1, ABI
# 4, here; t_upgrade_v04 the last one, v0.4, ABI 7; built from git history and kept under the build dir) with pods, rules,
# an injection grant, a proxy rule and tracked flows is upgraded by this
# build while traffic flows:
#   - a UDP flow a -> b at a fixed rate with sequence numbers: none lost,
#     none seen twice;
#   - a TCP stream a -> b open across the upgrade, whose ACKs reach a only
#     because of the tracker (a has `ingress deny`): not reset, every byte
#     through;
#   - an injected flow (c as a, to b) with sequence numbers: none lost;
#   - a TCP connection a -> b:9999 captured to podinject-proxy in c,
#     open across the upgrade: not reset, every byte through the proxy;
#   - the state (pods, rules, grants, proxy rules, the stream's tracked
#     flow) the same after, counters going on from where they were;
#   - link ids unchanged while program ids change (an update, not a
#     re-attach), exactly one node program per hook, a link whose pin was
#     lost found by asking the hook and pinned again;
# then: the old build refuses the upgraded node, a second upgrade of a
# current node re-points its programs, a downgrade is refused with nothing
# changed, and the upgrader killed at each phase leaves a node that the
# next run finishes.
# Variants (setting PREFIX, EXPECT and these, then sourcing this file):
# t_upgrade_clsact (WANT_ATTACH=clsact), t_upgrade_xdp (WANT_XDP=1),
# t_upgrade_netkit (WANT_DEV=netkit, POD_ARGS, INJECT_ARGS: kernel lab).
. "$(dirname "$0")/lib.sh"
require_root
EXPECT=93
PREFIX=${PREFIX:-up-}
MODE=${WANT_ATTACH:-tcx}
# netkit pods (t_upgrade_netkit): their hooks are the pair's peer (the
# pod's egress) and primary (its ingress) netkit links, on a tcx node
DEV=${WANT_DEV:-veth}
N=${PREFIX}n
A=${PREFIX}a
B=${PREFIX}b
C=${PREFIX}c
IPA=10.244.31.10
IPB=10.244.31.11
IPC=10.244.31.12
# the node's own stack sends to c from this address (on the node
# namespace's lo): an XDP node's ACL on c's eth0 checks those datagrams,
# and the upgrade moves that ACL from netlink onto a link under them (c:
# the ACLs of a and b are tampered with before, the old release's hole)
IPN=10.244.31.1
STACK_RATE=2000
STACK_COUNT=10000
OLD_REV=${OLD_REV:-v0.1}
USEQ=$BUILD/useq
TCXQ=$BUILD/tcx-attach
UDP_RATE=25000
UDP_COUNT=125000	# 5 s at the rate, the upgrade in the middle
INJ_RATE=5000		# c injecting as a, to b, at the same time
INJ_COUNT=25000
cleanup_nodes() {
	local n
	# A node left half-upgraded (a failed run) refuses a plain `node down`.
	for n in $(ls /sys/fs/bpf/podinject 2>/dev/null | grep "^$PREFIX"); do
		"$PI" -N "$n" node down >/dev/null 2>&1 ||
			"$PI" -N "$n" node down --force >/dev/null 2>&1
	done
	cleanup_all
	rm -f /sys/fs/bpf/${PREFIX}kept
}
cleanup_nodes
TMP=$(mktemp -d /tmp/${PREFIX}XXXXXX)
PROXY=
trap '[ -n "$PROXY" ] && kill $PROXY; cleanup_nodes; rm -rf "$TMP"' EXIT

ALL_CHECKS="old_build old_up old_pods old_rules old_grant old_proxy old_stream_tracked
old_refused_by_new old_hooked lost_pin upgrade_under_traffic upgrade_said udp_all_through
udp_none_lost_or_twice injected_none_lost stack_none_lost stack_denied_each_counted inject_swapped tcp_stream_not_reset tcp_stream_every_byte proxied_not_reset proxied_by_proxy state_kept head_roles_migrated ct_stream_kept
counters_go_on links_kept progs_changed one_per_hook lost_pin_found abi_recorded
refusals_table_made flow_sweep_started no_staging_left traffic_after refused_by_old second_upgrade second_links_kept
second_progs_changed downgrade_refused downgrade_message downgrade_nothing_changed
downgrade_refused_by_others"
# podinject proxies veth pods only (pi_proxy_add refuses netkit ones):
# with netkit pods there is no proxy rule, no proxied connection
if [ "$DEV" = netkit ]; then
	ALL_CHECKS="$(tr ' ' '\n' <<<"$ALL_CHECKS" | grep -vxE 'old_proxy|proxied_not_reset|proxied_by_proxy' | tr '\n' ' ') guard_follows"
fi
[ "${WANT_XDP:-0}" = 1 ] && ALL_CHECKS="$ALL_CHECKS xdp_tampered xdp_held xdp_pod_root_cannot_detach"
ALL_CHECKS="$ALL_CHECKS gone_pod_next_run"
for k in 1 2 3 4 5 6 7; do
	ALL_CHECKS="$ALL_CHECKS kill${k}_killed kill${k}_meanwhile kill${k}_next_run kill${k}_whole"
done
for k in 1 2 3 4 5 6 7; do
	ALL_CHECKS="$ALL_CHECKS fail${k}_said fail${k}_left fail${k}_next_run"
done
skip_all() {
	local c
	for c in $ALL_CHECKS; do skip "$c" "$1"; done
	exit 0
}
# A node takes tcx where the kernel has it; on a kernel without (debian-6.1)
# it would be a clsact node, which t_upgrade_clsact upgrades there
if [ "$DEV" = netkit ] && [ "$("$PI" -j features | jq -r .netkit)" != true ]; then
	# a probe that misses netkit must not turn the suite into a SKIP
	if [ "$("$ROOT/tests/known-features.sh" netkit)" = true ]; then
		fail all "the probe finds no netkit, but this kernel has it (tests/kernels.txt)"
		exit 1
	fi
	skip all "kernel has no netkit (runs in the kernel lab)"
	exit 0
fi
if [ "$MODE" = tcx ] && [ "$("$PI" -j features | jq -r .tcx)" != true ]; then
	skip_all "this kernel has no tcx (t_upgrade_clsact runs the upgrade here)"
fi

# ---- the previous release (prev_release in lib.sh) --------------------
old_build() {
	local dir
	dir=$(prev_release "$OLD_REV") && echo "$dir/build/podinject"
}
OLD=$(old_build)
if [ -z "$OLD" ] && ! command -v git >/dev/null; then
	skip_all "no git here, and no build of $OLD_REV made before (the lab's guest takes the host's)"
elif [ -z "$OLD" ] && ! git -C "$ROOT" rev-parse "$OLD_REV^{commit}" >/dev/null 2>&1 &&
     ! git -C "$ROOT" rev-parse "${PREV_RELEASE_COMMITS[$OLD_REV]}^{commit}" >/dev/null 2>&1; then
	skip_all "no git history with $OLD_REV here"
fi
if [ -z "$OLD" ]; then
	fail old_build "cannot build $OLD_REV"
	ALL_CHECKS=${ALL_CHECKS#old_build }
	skip_all "no build of $OLD_REV"
fi
pass old_build
old() { "$OLD" -N $N "$@"; }
# the old release's version, from its own header
OLD_ABI=$(sed -n 's/^#define PI_ABI_VERSION[[:space:]]*\([0-9]*\).*/\1/p' "${OLD%/build/podinject}/include/podinject_abi.h")

NODE_PROGS='^(pod_egress|pod_ingress|uplink_ingress|pod_egress_nk|pod_ingress_nk)$'
# the host side's hooks that run the node's programs: tcx/clsact ingress
# (the pod's egress) and egress, or a netkit pair's peer and primary,
# asked of the kernel with BPF_PROG_QUERY ($TCXQ), as the node does
if [ "$DEV" = netkit ]; then HOOKS="peer primary"; else HOOKS="ingress egress"; fi
# node programs at each pod hook, "dev/hook=count" for all of them
hook_counts() {
	local dev hook out=""
	for dev in pi-$A pi-$B pi-$C; do
		for hook in $HOOKS; do
			if [ "$MODE" = clsact ]; then
				c=$(in_ns $N bpftool net -j | jq --arg d $dev --arg h $hook \
					'[.[].tc[] | select(.devname == $d and .kind == "clsact/" + $h and
					  (.name | sub(":\\[.*"; "") | test("'"$NODE_PROGS"'")))] | length')
			else
				c=$($TCXQ query $N $dev $hook | tr ' ' '\n' | grep -cE "$NODE_PROGS")
			fi
			out="$out $dev/$hook=$c"
		done
	done
	echo $out
}
ONE_EACH=$(for p in $A $B $C; do for h in $HOOKS; do echo -n "pi-$p/$h=1 "; done; done)
ONE_EACH=${ONE_EACH% }
# --xdp: every pod's ACL on its eth0 is held by its link (link_xdp_pod_*,
# this build's; v0.1 attached them by netlink): HELD after an upgrade
xdp_held() {
	[ "${WANT_XDP:-0}" = 1 ] || return 0
	local f p links devs
	links=$(for f in /sys/fs/bpf/podinject/$N/link_xdp_pod_*; do
		[ -e "$f" ] && bpftool link show pinned $f -j | jq .prog_id
	done | sort -n | jq -sc .)
	devs=$(for p in $A $B $C; do
		ip -n $p -j link show eth0 | jq '.[0].xdp.prog.id // empty'
	done | sort -n | jq -sc .)
	if [ "$links" = "$devs" ] && [ "$(jq length <<<"$devs")" = 3 ]; then
		echo " xdp-held"
	else
		echo " xdp: links $links, on eth0 $devs"
	fi
}
HELD=
[ "${WANT_XDP:-0}" = 1 ] && HELD=" xdp-held"
# "pin:link-id" (tcx, netkit) of every pod hook; clsact filters have no link
link_ids() {
	local f
	for f in /sys/fs/bpf/podinject/$N/link_pod_*; do
		echo "$(basename $f):$(bpftool link show pinned $f -j | jq .id)"
	done
}
# the program ids running at the pod hooks: tcx links' or clsact filters',
# and the pods' XDP ACLs on their eth0
hook_prog_ids() {
	local f p ids=""
	if [ "$MODE" = clsact ]; then
		ids=$(in_ns $N bpftool net -j | jq -r '.[].tc[] | select(.name | sub(":\\[.*"; "") | test("'"$NODE_PROGS"'")) | .id')
	else
		for f in /sys/fs/bpf/podinject/$N/link_pod_*; do
			ids="$ids $(bpftool link show pinned $f -j | jq .prog_id)"
		done
	fi
	for p in $A $B $C; do
		ids="$ids $(ip -n $p -j link show eth0 | jq '.[0].xdp.prog.id // empty')"
	done
	echo $ids | tr ' ' '\n' | sort -n | jq -sc .
}
pinned_prog_ids() {
	local f nk=
	[ "$DEV" = netkit ] && nk=_nk
	for f in /sys/fs/bpf/podinject/$N/prog_pod_egress$nk /sys/fs/bpf/podinject/$N/prog_pod_ingress$nk \
		 /sys/fs/bpf/podinject/$N/prog_xdp_pod_*; do
		[ -e "$f" ] && bpftool prog show pinned $f -j | jq .id
	done | sort -n | jq -sc .
}
# Injection's and the proxy's attachments, "pin link-id" and the program
# ids that run there: the links' (tcx, the proxy's socket lookup) or the
# head filters' in the node's and the pods' namespaces (clsact)
INJECT_PROGS='^(inject_egress|pod_reply|proxy_assign|netkit_guard|netkit_untag|proxy_lookup)$'
inject_links() {
	local f
	for f in /sys/fs/bpf/podinject/$N/inject/link_*; do
		bpftool link show pinned $f -j 2>/dev/null | jq -r --arg f $(basename $f) 'select(.id) | "\($f) \(.id)"'
	done
}
inject_prog_ids() {
	local f ns
	{
		for f in /sys/fs/bpf/podinject/$N/inject/link_*; do
			bpftool link show pinned $f -j 2>/dev/null | jq 'select(.id) | .prog_id'
		done
		if [ "$MODE" = clsact ]; then
			for ns in $N $A $B $C; do
				in_ns $ns bpftool net -j | jq '.[].tc[] | select(.name | sub(":\\[.*"; "") | test("'"$INJECT_PROGS"'")) | .id'
			done
		fi
	} | sort -n | jq -sc .
}
inject_pinned_ids() {
	local f
	for f in /sys/fs/bpf/podinject/$N/inject/prog_*; do
		bpftool prog show pinned $f -j | jq .id
	done | sort -n | jq -sc .
}
# netkit: the programs the guards run by tail call (the prog array's
# slots, which bpftool reads as program ids), and the node's pinned
# pod_egress_nk that they must be
guard_slots() {
	bpftool map dump pinned /sys/fs/bpf/podinject/$N/inject/netkit_peer_progs -j |
		jq -r '.[] | .formatted.value // ("0x" + (.value | reverse | map(ltrimstr("0x")) | join("")))' |
		while read -r v; do echo $((v)); done | sort -n | jq -sc .
}
pinned_nk_egress() {
	bpftool prog show pinned /sys/fs/bpf/podinject/$N/prog_pod_egress_nk -j | jq -c '[.id]'
}
# what the node holds, without counters; the same through either build
state() {
	local pi=$1
	# (what the old build's list says; "datapath" came later, and the
	# upgrade keeps every pod's: all of them are "reference" here)
	$pi -N $N -j pod list | jq -c 'map(del(.stats, .conntrack, .datapath) | .xdp = (.xdp != null))'
	$pi -N $N -j policy list | jq -c 'map(del(.packets, .bytes))'
	$pi -N $N -j inject list | jq -c .
	# (the fields every build's list has; "direction" and the flow
	# counts came with inbound capture)
	$pi -N $N -j proxy list | jq -c 'map({pod, proxy, port, proto, dports, dst})'
}
idle_flow() {	# the idle connection's entry in a's table
	$1 -N $N -j ct list $A | jq -c --arg b $IPB --argjson p "${IDLE_PORT:-0}" '[.[] |
		select(.proto == "tcp" and .peer_addr == $b and .peer_port == 7300 and .pod_port == $p) |
		{proto, pod_addr, pod_port, peer_addr, peer_port, opened_by, state}]'
}
b_ingress() { $1 -N $N -j pod show $B | jq .stats.ingress_packets; }
rule_pk() { $1 -N $N -j policy list $B | jq '.[] | select(.port == "7200") | .packets'; }
rule_pk_port() { $1 -N $N -j policy list $C | jq ".[] | select(.port == \"$2\") | .packets"; }
# this build's version, and the one after it (a newer build's node)
CUR_ABI=$(sed -n 's/^#define PI_ABI_VERSION[[:space:]]*\([0-9]*\).*/\1/p' "$ROOT/include/podinject_abi.h")
NEXT_ABI=$((CUR_ABI + 1))
abi() {	# the recorded version: bytes 44-47 of node_config's value
	bpftool map lookup pinned /sys/fs/bpf/podinject/$N/node_config key 0 0 0 0 -j |
		jq -r '.value[44:48] | reverse | map(ltrimstr("0x")) | join("")' | { read -r h; echo $((16#$h)); }
}

# ---- a node of the previous release -------------------------------------
make_old_node() {
	old node up ${NODE_ARGS:-} >/dev/null &&
	old pod add $A --ip $IPA ${POD_ARGS:-} >/dev/null &&
	old pod add $B --ip $IPB ${POD_ARGS:-} >/dev/null &&
	old pod add $C --ip $IPC ${POD_ARGS:-} >/dev/null
}
check old_up make_old_node
check old_pods sh -c "$OLD -N $N -j pod list | jq -e 'length == 3'"
ip -n $N addr add $IPN/32 dev lo
check old_rules sh -c "$OLD -N $N policy add $A ingress deny >/dev/null &&
	$OLD -N $N policy add $B ingress allow from $IPA/32 proto udp port 7200 >/dev/null &&
	$OLD -N $N policy add $B ingress allow from $IPA/32 proto tcp port 7300 >/dev/null &&
	$OLD -N $N policy add $B ingress allow from $IPA/32 proto tcp port 9999 >/dev/null &&
	$OLD -N $N policy add $B ingress allow from $IPA/32 proto udp port 7201 >/dev/null &&
	$OLD -N $N policy add $C ingress allow from $IPN/32 proto udp port 7202 >/dev/null &&
	$OLD -N $N policy add $C ingress deny from $IPN/32 proto udp port 7203 >/dev/null &&
	$OLD -N $N policy add $B ingress deny >/dev/null"
check old_grant old inject allow $C --as $A ${INJECT_ARGS:-}
# (for a, whose server b c does not inject as: a proxy's answers to its
# captured pod carry the server's address, which a grant for the server
# would send into the server's egress instead)
# On clsact the proxy's socket lookup link is made with the id of the old
# head program, which the upgrade replaces: the kernel numbers links and
# programs apart, so one id can name both. Before 2026-12-06 the upgrade
# read the link's pin as a program's record, took it for that program's
# and pinned the new program over it: the link went (inject_swapped).
head_id=
if [ "${WANT_ATTACH:-}" = clsact ]; then
	head_id=$(bpftool prog show pinned /sys/fs/bpf/podinject/$N/inject/prog_inject_egress -j 2>/dev/null | jq -r '.id // empty')
	if [ -z "$head_id" ] || ! "$BUILD/tcx-attach" link-ids-to "$head_id" >/dev/null; then
		head_id=
	fi
fi
[ "$DEV" = netkit ] ||
	check old_proxy old proxy add $C --port 15001 --for $A --match tcp dport 9999
if [ "${WANT_ATTACH:-}" = clsact ]; then
	if [ -n "$head_id" ]; then
		expect_eq lookup_link_has_head_program_id "$(for f in /sys/fs/bpf/podinject/$N/inject/link_lookup_*; do bpftool link show pinned $f -j | jq .id; done)" "$head_id"
	else
		skip lookup_link_has_head_program_id "link ids are past the head program's id here (the kernel numbers them apart)"
	fi
fi

# The TCP stream: b reads only after 4 s, so a's 20 MB wait in full
# windows across the upgrade; b's ACKs and window updates reach a only
# because the tracker knows the flow a opened.
# Then an idle connection a -> b, open until the tracked flows have been
# read after the upgrade: its entry must be the same then. (The stream's
# own entry may be gone by then for a good reason: closed, it expires
# 10 s later, sooner than an upgrade under emulation ends.)
# The idle connection lives until it is killed after the upgrade: a
# minute was not enough under the lab's emulation with the host busy
# (debian-6.12: its end timed out, its entry was closing and gone by the
# time the upgrade was done, and ct_stream_kept read '[]').
idle_ms=60000
[ -n "${PODINJECT_LAB:-}" ] && idle_ms=600000
in_ns $B "$PINET" tcp-server 7300 --count 2 --sink --delay 4000 --timeout $idle_ms >$TMP/srv &
wait_tcp_listen $B 7300 >/dev/null
in_ns $A "$PINET" tcp-connect --timeout 15000 $IPB 7300 --send 20000000 >$TMP/cli &
CLI=$!
for _ in $(seq 50); do grep -q '^connected' $TMP/cli && break; sleep 0.1; done
# (ip netns exec execs the client: $! is the client's, for the kill below)
ip netns exec $A "$PINET" tcp-connect --timeout $idle_ms $IPB 7300 --wait-eof >$TMP/idle &
IDLE=$!
for _ in $(seq 50); do grep -q '^connected' $TMP/idle && break; sleep 0.1; done
IDLE_PORT=$(awk '/^connected/ {print $3}' $TMP/idle)
# a's connection to b:9999, captured to the proxy in c, which connects
# upstream with a's address; b reads after 4 s as well.
PCLI=
if [ "$DEV" != netkit ]; then
	ip netns exec $C "$BUILD/podinject-proxy" -v --connect-timeout 30000 15001 >$TMP/px 2>$TMP/pxlog </dev/null &
	PROXY=$!
	for _ in $(seq 50); do grep -q ready $TMP/px 2>/dev/null && break; sleep 0.1; done
	in_ns $B "$PINET" tcp-server 9999 --count 1 --sink --delay 4000 --timeout 15000 >$TMP/psrv &
	wait_tcp_listen $B 9999 >/dev/null
	in_ns $A "$PINET" tcp-connect --timeout 15000 $IPB 9999 --send 20000000 >$TMP/pcli &
	PCLI=$!
fi
for _ in $(seq 50); do [ "$(idle_flow "$OLD")" != "[]" ] && break; sleep 0.05; done
check old_stream_tracked sh -c "[ '$(idle_flow "$OLD")' != '[]' ]"
out=$("$PI" -N $N pod list 2>&1)
if [ $? = 1 ] && grep -q "older one.*node upgrade" <<<"$out"; then
	pass old_refused_by_new
else
	fail old_refused_by_new "$out"
fi
expect_eq old_hooked "$(hook_counts)" "$ONE_EACH"

# A lost pin: the link of b's egress hook is kept alive by another pin
# only; the upgrade must find it on the hook, not make a second one.
LOST=/sys/fs/bpf/podinject/$N/link_pod_$(old -j pod show $B | jq .host_ifindex)_egress
if [ "$MODE" = clsact ]; then
	check lost_pin sh -c "bpftool prog pin id $(bpftool prog show pinned $LOST -j | jq .id) /sys/fs/bpf/${PREFIX}kept && rm $LOST"
else
	check lost_pin sh -c "bpftool link pin id $(bpftool link show pinned $LOST -j | jq .id) /sys/fs/bpf/${PREFIX}kept && rm $LOST"
fi

# --xdp: root in a pod owns its eth0, and v0.1's ACLs are netlink
# attachments: a's root took its ACL off, b's put a program of its own in
# its place. Neither may stop the upgrade, and both get the ACL back, held
# by a link (xdp_held after it).
if [ "${WANT_XDP:-0}" = 1 ]; then
	check xdp_tampered sh -c "ip netns exec $A ip link set dev eth0 xdp off &&
		ip netns exec $B ip -force link set dev eth0 xdpdrv obj '$BUILD/xdp.bpf.o' sec xdp"
fi

# The rule of the UDP flow counts before the upgrade (nobody listens
# yet: these only count; the first few may go before the neighbours
# are resolved).
in_ns $A "$USEQ" send $IPB 7200 1000 100 >/dev/null
before_state=$(state "$OLD")
before_flow=$(idle_flow "$OLD")
before_links=$(link_ids | grep -v "$(basename $LOST)")
before_progs=$(hook_prog_ids)
before_inject_links=$(inject_links)
before_inject_progs=$(inject_prog_ids)
before_b=$(b_ingress "$OLD")
before_rule=$(rule_pk "$OLD")
if [ "$DEV" = netkit ]; then
	before_slots=$(guard_slots)
	before_nk=$(pinned_nk_egress)
fi

# ---- upgrade under traffic ----------------------------------------------
in_ns $B "$USEQ" recv 7200 $UDP_COUNT 3000 30000 >$TMP/udp &
RECV=$!
wait_udp_listen $B 7200 >/dev/null
in_ns $B "$USEQ" recv 7201 $INJ_COUNT 3000 30000 >$TMP/inj &
INJRECV=$!
wait_udp_listen $B 7201 >/dev/null
in_ns $C "$USEQ" recv 7202 $STACK_COUNT 3000 30000 >$TMP/stack &
STACKRECV=$!
wait_udp_listen $C 7202 >/dev/null
before_stack_denied=$(rule_pk_port "$OLD" 7203)
in_ns $A "$USEQ" send $IPB 7200 $UDP_RATE $UDP_COUNT >$TMP/sent &
SEND=$!
in_ns $N "$USEQ" send $IPC 7202 $STACK_RATE $STACK_COUNT >$TMP/stacksent &
STACKSEND=$!
in_ns $N "$USEQ" send $IPC 7203 $((STACK_RATE / 4)) $((STACK_COUNT / 4)) >$TMP/stackdenied &
STACKDENY=$!
in_ns $C "$USEQ" send $IPB 7201 $INJ_RATE $INJ_COUNT $IPA >$TMP/injsent &
INJSEND=$!
sleep 2
out=$("$PI" -N $N node upgrade 2>&1)
rc=$?
after_flow=$(idle_flow "$PI")
kill $IDLE	# b reads its end: the server ends
expect_eq upgrade_under_traffic "$rc" 0
if grep -q "upgraded from ABI $OLD_ABI to $CUR_ABI" <<<"$out"; then pass upgrade_said; else fail upgrade_said "$out"; fi
wait $SEND $INJSEND
wait $RECV $INJRECV
expect_eq udp_all_through "$(cat $TMP/sent)" "sent $UDP_COUNT"
read -r _ got _ missing _ dup _ gap <$TMP/udp
expect_eq udp_none_lost_or_twice "missing ${missing:-?} duplicated ${dup:-?}" "missing 0 duplicated 0"
echo "# udp: received ${got:-?} of $UDP_COUNT, longest gap ${gap:-?} ms" >&2
read -r _ got _ missing _ dup _ gap <$TMP/inj
expect_eq injected_none_lost "$(cat $TMP/injsent), missing ${missing:-?} duplicated ${dup:-?}" \
	"sent $INJ_COUNT, missing 0 duplicated 0"
echo "# injected: received ${got:-?} of $INJ_COUNT, longest gap ${gap:-?} ms" >&2
# The node stack's datagrams: each allowed one arrived once, each denied
# one was counted by its rule: checked, by XDP or tc, never let through
# unchecked while the ACL changed hands. (One that got through would
# draw a port unreachable, which fails the sender's next send: that one
# is not sent, and the count falls short by about as many.)
wait $STACKSEND $STACKDENY $STACKRECV
read -r _ got _ missing _ dup _ gap <$TMP/stack
expect_eq stack_none_lost "$(cat $TMP/stacksent), missing ${missing:-?} duplicated ${dup:-?}" \
	"sent $STACK_COUNT, missing 0 duplicated 0"
echo "# node stack: received ${got:-?} of $STACK_COUNT, longest gap ${gap:-?} ms" >&2
after_stack_denied=$(rule_pk_port "$PI" 7203)
expect_eq stack_denied_each_counted \
	"$(cat $TMP/stackdenied), counted $((after_stack_denied - ${before_stack_denied:-0}))" \
	"sent $((STACK_COUNT / 4)), counted $((STACK_COUNT / 4))"
after_inject_progs=$(inject_prog_ids)
# the same links (the proxy's socket lookup in either mode), every program
# there this build's, none of before
if [ "$(inject_links)" = "$before_inject_links" ] && [ -n "$before_inject_links" ] &&
   [ "$(jq -c unique <<<"$after_inject_progs")" = "$(inject_pinned_ids | jq -c --argjson a "$after_inject_progs" '[.[] | select(. as $p | $a | index($p))]')" ] &&
   [ "$(jq -c unique <<<"$after_inject_progs")" != "[]" ] &&
   [ -z "$(jq -n --argjson a "$after_inject_progs" --argjson b "$before_inject_progs" '$a - ($a - $b) | .[]')" ]; then
	pass inject_swapped
else
	fail inject_swapped "links $before_inject_links -> $(inject_links), programs $before_inject_progs -> $after_inject_progs, pinned $(inject_pinned_ids)"
fi
wait $CLI $PCLI
if [ -n "$PCLI" ]; then
	sleep 0.2	# the proxy's log line follows the server's close
	got=$(awk '/^done/ {print $2, $3, $NF}' $TMP/pcli)
	expect_eq proxied_not_reset "$got" "sent 20000000 $(awk '/^conn-done/ {print $NF}' $TMP/psrv)"
	if grep -q "conn $IPA:[0-9]* -> $IPB:9999 up 20000000" $TMP/pxlog; then
		pass proxied_by_proxy
	else
		fail proxied_by_proxy "client: $(cat $TMP/pcli), proxy: $(tail -n 2 $TMP/pxlog | tr '\n' ' ')"
	fi
	kill $PROXY
	PROXY=
fi
expect_eq tcp_stream_not_reset "$(grep -o '^done sent [0-9]*' $TMP/cli)" "done sent 20000000"
expect_eq tcp_stream_every_byte "$(grep -o 'conn-done bytes [0-9]*' $TMP/srv | head -n 1)" "conn-done bytes 20000000"
wait

expect_eq state_kept "$(state "$PI")" "$before_state"
# The step to ABI 8 wrote each pod's head roles (PI_DP_ROLE_*) from its
# grants and rules: a captured, c an injector and a's proxy, b nothing
KNOWN=$ROLE_KNOWN
if [ "$DEV" = netkit ]; then
	want_roles="$KNOWN $KNOWN $((KNOWN | 1))"
else
	want_roles="$((KNOWN | 2)) $KNOWN $((KNOWN | 1 | 8))"
fi
expect_eq head_roles_migrated "$(head_roles $N $A) $(head_roles $N $B) $(head_roles $N $C)" "$want_roles"
if [ "$after_flow" = "$before_flow" ]; then
	pass ct_stream_kept
else
	fail ct_stream_kept "got '$after_flow', want '$before_flow'; the idle client said: $(tr '\n' ' ' <$TMP/idle | head -c 200)"
fi
after_b=$(b_ingress "$PI")
after_rule=$(rule_pk "$PI")
# b received every datagram after the counters were read before
if is_num "$after_b" && is_num "$before_b" && is_num "$after_rule" && is_num "$before_rule" &&
   [ $((after_b - before_b)) -ge $UDP_COUNT ] && [ "$before_rule" -gt 0 ] &&
   [ $((after_rule - before_rule)) -ge $UDP_COUNT ]; then
	pass counters_go_on
else
	fail counters_go_on "b ingress $before_b -> $after_b, rule $before_rule -> $after_rule (want > 0, then +$UDP_COUNT)"
fi
if [ "$MODE" = clsact ]; then
	# Filters have no link: the same filter (priority and handle) now
	# runs another program, as one_per_hook and progs_changed show.
	expect_eq links_kept "$(link_ids | grep -c ':null$')" "$(link_ids | wc -l)"
else
	expect_eq links_kept "$(link_ids | grep -v "$(basename $LOST)")" "$before_links"
fi
after_progs=$(hook_prog_ids)
if [ "$after_progs" != "$before_progs" ] && [ "$(jq -c 'unique' <<<"$after_progs")" = "$(pinned_prog_ids)" ] &&
   [ -z "$(jq -n --argjson a "$after_progs" --argjson b "$before_progs" '$a - ($a - $b) | .[]')" ]; then
	pass progs_changed
else
	fail progs_changed "before $before_progs, after $after_progs, pinned $(pinned_prog_ids)"
fi
expect_eq one_per_hook "$(hook_counts)$(xdp_held)" "$ONE_EACH$HELD"
if [ "${WANT_XDP:-0}" = 1 ]; then
	# what the link is for: root in the pod owns eth0, and could take a
	# netlink attachment off, leaving the node stack's packets unchecked
	a_acl=$(ip -n $A -j link show eth0 | jq '.[0].xdp.prog.id')
	expect_eq xdp_held "$(xdp_held)" " xdp-held"
	if ! in_ns $A ip link set dev eth0 xdp off 2>/dev/null &&
	   [ "$(ip -n $A -j link show eth0 | jq '.[0].xdp.prog.id')" = "$a_acl" ] && is_num "$a_acl"; then
		pass xdp_pod_root_cannot_detach
	else
		fail xdp_pod_root_cannot_detach "eth0's program $a_acl -> $(ip -n $A -j link show eth0 | jq '.[0].xdp.prog.id')"
	fi
fi
# a's guard ran the old pod_egress_nk for injected packets, and now this
# build's (a slot left on the old program would run it on after the old
# build's pins are gone)
[ "$DEV" = netkit ] &&
	expect_eq guard_follows "$before_slots -> $(guard_slots)" "$before_nk -> $(pinned_nk_egress)"
if [ "$MODE" = clsact ]; then
	expect_eq lost_pin_found "$(bpftool prog show pinned $LOST -j | jq .id)" "$(bpftool prog show pinned /sys/fs/bpf/podinject/$N/prog_pod_egress -j | jq .id)"
else
	expect_eq lost_pin_found "$(bpftool link show pinned $LOST -j | jq .id)" "$(bpftool link show pinned /sys/fs/bpf/${PREFIX}kept -j | jq .id)"
fi
expect_eq abi_recorded "$(abi) $("$PI" -N $N -j node show | jq .upgraded_from_abi)" "$CUR_ABI $OLD_ABI"
# The step to ABI 10 made the injection object's drop counts by reason
# (a new map, empty): there, and read by `inject refused`
expect_eq refusals_table_made "$(test -e /sys/fs/bpf/podinject/$N/inject/inject_refusals && echo pinned) $("$PI" -N $N -j inject refused | jq length)" "pinned 6"
# The step to ABI 11 made the flow tables' sweep (a new map), and the
# upgrade started it after the switch: a round within seconds, which
# meets the proxy's entries the old programs may have left untimed
sweep_rounds() {
	bpftool map dump pinned /sys/fs/bpf/podinject/$N/inject/flow_sweep -j 2>/dev/null |
		jq '(.[0].formatted // .[0]).value.rounds'
}
for _ in $(seq 50); do
	r=$(sweep_rounds)
	[ "${r:-0}" -ge 1 ] 2>/dev/null && break
	sleep 0.1
done
expect_eq flow_sweep_started "$(test -e /sys/fs/bpf/podinject/$N/inject/flow_sweep && echo pinned) $([ "${r:-0}" -ge 1 ] 2>/dev/null && echo ran)" "pinned ran"
check no_staging_left test ! -e /sys/fs/bpf/podinject/$N/upgrade
# The echo server's wait counts from its start. In the lab on debian-6.12,
# with suites running on the host beside the guests, this check once got
# replies 0 (2026-12-03) and passed when run again on a quiet host; a
# server whose 5 s ran out before a starved client came would say so, so
# in the lab it waits a minute, and a shortfall says what the server saw.
echo_ms=5000
[ -n "${PODINJECT_LAB:-}" ] && echo_ms=60000
in_ns $B "$PINET" udp-echo 7200 3 $echo_ms >$TMP/echo_after 2>&1 &
wait_udp_listen $B 7200 >/dev/null
after_rr=$(in_ns $A "$PINET" udp-rr $IPB 7200 3 2000 2>&1)
wait
if [ "$(head -n 1 <<<"$after_rr")" = "replies 3" ]; then
	pass traffic_after
else
	fail traffic_after "got '$(tr '\n' ' ' <<<"$after_rr")', want 'replies 3'; the server said: $(tr '\n' ' ' <$TMP/echo_after)"
fi
check_fails refused_by_old old pod list

# ---- a node of this version: its programs re-pointed --------------------
before_links=$(link_ids)
before_progs=$(hook_prog_ids)
out=$("$PI" -N $N node upgrade 2>&1)
# 6 tc hooks, and with --xdp the 3 pods' XDP ACLs
if [ $? = 0 ] && grep -q "ABI $CUR_ABI, nothing to migrate; $((${WANT_XDP:-0} ? 9 : 6)) hook" <<<"$out"; then
	pass second_upgrade
else
	fail second_upgrade "$out"
fi
expect_eq second_links_kept "$(link_ids)" "$before_links"
after_progs=$(hook_prog_ids)
if [ "$after_progs" != "$before_progs" ] && [ "$(jq -c 'unique' <<<"$after_progs")" = "$(pinned_prog_ids)" ]; then
	pass second_progs_changed
else
	fail second_progs_changed "before $before_progs, after $after_progs"
fi
# The old release's proxy_assign filter (clsact: at the head's priority;
# this build puts its own at a priority of its own, beside a probe's reply
# hook) goes with this build's `proxy del`, which finds it by the program
# its record names.
if [ "${WANT_ATTACH:-}" = clsact ]; then
	check old_assign_proxy_del "$PI" -N $N proxy del $C --for $A
	expect_eq old_assign_filter_gone "$(in_ns $C tc filter show dev eth0 ingress | grep -c proxy_assign)" 0
	# and this build's, at its own priority, is re-pointed by an upgrade
	assign_id() { in_ns $C bpftool net -j | jq '[.[].tc[] | select(.name | startswith("proxy_assign")) | .id] | join(",")'; }
	check new_assign_proxy_add "$PI" -N $N proxy add $C --port 15001 --for $A
	a0=$(assign_id)
	"$PI" -N $N node upgrade >/dev/null 2>&1
	a1=$(assign_id)
	expect_eq new_assign_repointed "$([ "$a1" != "$a0" ] && echo changed) $a1" \
		"changed \"$(bpftool prog show pinned /sys/fs/bpf/podinject/$N/inject/prog_proxy_assign -j | jq .id)\""
	check new_assign_proxy_del "$PI" -N $N proxy del $C --for $A
fi

# ---- a downgrade is refused, nothing changed ----------------------------
snapshot() {
	ls -R /sys/fs/bpf/podinject/$N
	hook_prog_ids
	bpftool map dump pinned /sys/fs/bpf/podinject/$N/node_config
}
cfg=/sys/fs/bpf/podinject/$N/node_config
val=$(bpftool map lookup pinned $cfg key 0 0 0 0 -j | jq -r '.value | .[:44] + ["'"$(printf 0x%02x $NEXT_ABI)"'", "0", "0", "0"] + .[48:] | join(" ")')
bpftool map update pinned $cfg key 0 0 0 0 value $val
snap=$(snapshot)
out=$("$PI" -N $N node upgrade 2>&1)
expect_eq downgrade_refused "$?" 1
if grep -q "newer podinject build (node ABI $NEXT_ABI, this build uses $CUR_ABI): a downgrade is not supported; nothing was changed" <<<"$out"; then
	pass downgrade_message
else
	fail downgrade_message "$out"
fi
expect_eq downgrade_nothing_changed "$(snapshot)" "$snap"
out=$("$PI" -N $N pod list 2>&1)
if [ $? = 1 ] && grep -q "a newer one.*does not downgrade" <<<"$out"; then
	pass downgrade_refused_by_others
else
	fail downgrade_refused_by_others "$out"
fi
val=$(bpftool map lookup pinned $cfg key 0 0 0 0 -j | jq -r '.value | .[:44] + ["'"$(printf 0x%02x $CUR_ABI)"'", "0", "0", "0"] + .[48:] | join(" ")')
bpftool map update pinned $cfg key 0 0 0 0 value $val
"$PI" -N $N node down >/dev/null 2>&1
rm -f /sys/fs/bpf/${PREFIX}kept

# ---- killed at each phase, finished by the next run ---------------------
for k in 1 2 3 4 5 6 7; do
	cleanup_nodes
	if ! make_old_node || ! old policy add $A egress allow to $IPB/32 proto icmp >/dev/null ||
	   ! in_ns $A ping -c 2 -i 0.2 -W 1 $IPB >/dev/null; then
		fail kill${k}_killed "cannot make a v0.1 node"
		continue
	fi
	before_rules=$(old -j policy list | jq -c .)
	out=$(PODINJECT_UPGRADE_KILL_AT=$k "$PI" -N $N node upgrade 2>&1)
	rc=$?
	msg=$("$PI" -N $N pod list 2>&1)
	prc=$?
	# Up to the version bump, every other command is refused and says
	# what to do; after it (7) the node is this build's already.
	if [ $rc = 137 ] && { { [ $k = 7 ] && [ $prc = 0 ]; } ||
	   { [ $prc = 1 ] && grep -q "interrupted: finish it with 'podinject -N $N node upgrade'" <<<"$msg"; }; }; then
		pass kill${k}_killed
	else
		fail kill${k}_killed "upgrade exit $rc ($out), pod list exit $prc: $msg"
	fi
	check kill${k}_meanwhile in_ns $A ping -c 2 -i 0.2 -W 1 $IPB
	out=$("$PI" -N $N node upgrade 2>&1)
	rc=$?
	if [ $rc = 0 ] && { { [ $k -le 2 ] && grep -q "rolled back first" <<<"$out"; } ||
	   { [ $k -ge 3 ] && grep -q "interrupted upgrade finished" <<<"$out"; }; }; then
		pass kill${k}_next_run
	else
		fail kill${k}_next_run "exit $rc: $out"
	fi
	got="$(abi) $(test -e /sys/fs/bpf/podinject/$N/upgrade && echo staging-left) $(hook_counts)$(xdp_held)"
	in_ns $A ping -c 2 -i 0.2 -W 1 $IPB >/dev/null || got="$got no-ping"
	after_rules=$("$PI" -N $N -j policy list | jq -c .)
	# the rule counted the pings before and goes on counting
	if [ "$(jq -c 'map(del(.packets, .bytes))' <<<"$after_rules")" != "$(jq -c 'map(del(.packets, .bytes))' <<<"$before_rules")" ] ||
	   [ "$(jq '.[0].packets' <<<"$after_rules")" -le "$(jq '.[0].packets' <<<"$before_rules")" ]; then
		got="$got rules $before_rules -> $after_rules"
	fi
	expect_eq kill${k}_whole "$got" "$CUR_ABI  $ONE_EACH$HELD"
done

# ---- a pod gone while an upgrade was interrupted after the switch (its
# namespace deleted, its pair with it): the next run finishes, and the
# pod's records go with its pod del then --------------------------------
cleanup_nodes
if make_old_node; then
	PODINJECT_UPGRADE_KILL_AT=4 "$PI" -N $N node upgrade >/dev/null 2>&1
	rc=$?
	ip netns del $C
	out=$("$PI" -N $N node upgrade 2>&1)
	got="$rc $? $(abi) $(test -e /sys/fs/bpf/podinject/$N/upgrade && echo staging-left)"
	got="$got $(hook_counts | tr ' ' '\n' | grep -v "^pi-$C/" | tr '\n' ' ')"
	"$PI" -N $N pod del $C >/dev/null 2>&1 || got="$got pod-del-failed"
	in_ns $A ping -c 2 -i 0.2 -W 1 $IPB >/dev/null || got="$got no-ping"
	want="137 0 $CUR_ABI  $(tr ' ' '\n' <<<"$ONE_EACH" | grep -v "^pi-$C/" | tr '\n' ' ')"
	[ "$got" = "$want" ] || got="$got: $(tail -n 2 <<<"$out" | tr '\n' ' ')"
	expect_eq gone_pod_next_run "$got" "$want"
else
	fail gone_pod_next_run "cannot make a v0.1 node"
fi

# ---- failing at each phase: rolled back before the commit, finished by
# the next run from it on -------------------------------------------------
for k in 1 2 3 4 5 6 7; do
	cleanup_nodes
	if ! make_old_node || ! old policy add $A egress allow to $IPB/32 proto icmp >/dev/null ||
	   ! in_ns $A ping -c 2 -i 0.2 -W 1 $IPB >/dev/null; then
		fail fail${k}_said "cannot make a v0.1 node"
		continue
	fi
	before_rules=$(old -j policy list | jq -c .)
	before_progs=$(hook_prog_ids)
	before_pins=$(ls -R /sys/fs/bpf/podinject/$N)
	out=$(PODINJECT_UPGRADE_FAIL_AT=$k "$PI" -N $N node upgrade 2>&1)
	rc=$?
	if [ $k -le 4 ]; then
		want="the upgrade failed and was rolled back; the node is as it was"
	else
		want="the upgrade could not be finished: Operation canceled; run 'node upgrade' again"
	fi
	if [ $rc = 1 ] && grep -qF "$want" <<<"$out"; then
		pass fail${k}_said
	else
		fail fail${k}_said "exit $rc: $out"
	fi
	if [ $k -le 4 ]; then
		# the v0.1 node as it was: its version, its pins, its programs
		# on every hook, its build's commands, traffic
		got="$(abi) $(hook_prog_ids) $(old -j policy list | jq -c 'map(del(.packets, .bytes))')"
		want="$OLD_ABI $before_progs $(jq -c 'map(del(.packets, .bytes))' <<<"$before_rules")"
		[ "$(ls -R /sys/fs/bpf/podinject/$N)" = "$before_pins" ] || got="$got pins-changed"
		in_ns $A ping -c 2 -i 0.2 -W 1 $IPB >/dev/null || got="$got no-ping"
		expect_eq fail${k}_left "$got" "$want"
	else
		check fail${k}_left in_ns $A ping -c 2 -i 0.2 -W 1 $IPB
	fi
	out=$("$PI" -N $N node upgrade 2>&1)
	rc=$?
	got="$rc $(abi) $(test -e /sys/fs/bpf/podinject/$N/upgrade && echo staging-left) $(hook_counts)$(xdp_held)"
	in_ns $A ping -c 2 -i 0.2 -W 1 $IPB >/dev/null || got="$got no-ping"
	if [ $k -ge 5 ] && ! grep -q "interrupted upgrade finished" <<<"$out"; then
		got="$got not-resumed: $out"
	fi
	expect_eq fail${k}_next_run "$got" "0 $CUR_ABI  $ONE_EACH$HELD"
done
