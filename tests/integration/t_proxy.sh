#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Transparent proxy, on one node and across two:
#
#   tp-c (client, 10.244.0.10) --capture--> tp-p (podinject-proxy :15001)
#                                              | upstream bound to 10.244.0.10,
#                                              v injected into tp-c's egress
#   tp-s (server, 10.244.0.11)  <-- tp-c's policy, counters, routing
#   tp-r (server on node tp-y, 10.244.1.10), reached over the wire
#
# The server must see the client pod's address; the client must see the
# server's; the client's egress programs run once per upstream packet.
. "$(dirname "$0")/lib.sh"
require_root
EXPECT=67
PREFIX=tp-
X=tp-x
Y=tp-y
C=10.244.0.10
S=10.244.0.11
R=10.244.1.10

make_wire $X $Y
for n in $X $Y; do
	in_ns $n sysctl -qw net.ipv4.ip_forward=0 net.ipv6.conf.all.forwarding=0
done
check up_x node_up $X --uplink wire0 ${NODE_ARGS:-}
check up_y node_up $Y --uplink wire0 ${NODE_ARGS:-}
pi -N $X pod add tp-c --ip $C --ip6 fd00::a >/dev/null
pi -N $X pod add tp-s --ip $S --ip6 fd00::b >/dev/null
pi -N $X pod add tp-p --ip 10.244.0.12 --ip6 fd00::c >/dev/null
pi -N $Y pod add tp-r --ip $R --ip6 fd00:1::a >/dev/null

# the proxy pod's own port range (a pod may set it): the proxy's while it
# proxies, its own again after the last rule (before: Linux's default)
in_ns tp-p sysctl -qw net.ipv4.ip_local_port_range="40000 50999"
range_of() { in_ns "$1" cat /proc/sys/net/ipv4/ip_local_port_range | tr '\t' ' '; }
check proxy_add pi -N $X proxy add tp-p --port 15001 --for tp-c
expect_eq proxy_port_range "$(range_of tp-p)" "16384 32767"
check proxy_list sh -c "$PI -N $X -j proxy list | jq -e '.[0].pod == \"tp-c\" and .[0].proxy == \"tp-p\" and .[0].port == 15001'"
check proxy_is_injector sh -c "$PI -N $X -j inject list | jq -e 'length == 2 and .[0].injector == \"tp-p\"'"
# the head's records: tp-c captured, tp-p an injector and a proxy, tp-s
# with no head none
expect_eq head_roles_written "$(head_roles $X tp-c) $(head_roles $X tp-p) $(head_roles $X tp-s)" \
	"$((ROLE_KNOWN | 2)) $((ROLE_KNOWN | 1 | 8)) 0"

start_proxy() {
	ip netns exec tp-p "$BUILD/podinject-proxy" -v --connect-timeout 30000 "$@" 15001 >/tmp/tp$$.px 2>/tmp/tp$$.pxlog </dev/null &
	PROXY_PID=$!
	clients=()
	for _ in $(seq 50); do grep -q ready /tmp/tp$$.px 2>/dev/null && return; sleep 0.1; done
}
start_proxy
trap 'kill $PROXY_PID 2>/dev/null; rm -f /tmp/tp$$.*; rm -rf /sys/fs/bpf/tp-hole$$; cleanup_all' EXIT

proxied_pair() {	# proxied_pair SERVER_POD ADDR BYTES [-6]
	local srv=$1 addr=$2 bytes=$3 fam=${4:-} out
	in_ns "$srv" "$PINET" tcp-server $fam 8080 --sink --timeout 20000 >/tmp/tp$$.srv 2>&1 &
	local s=$!
	wait_tcp_listen "$srv" 8080 >/dev/null
	out=$(in_ns tp-c "$PINET" tcp-connect $fam --timeout 5000 "$addr" 8080 --send "$bytes") || { echo "$out"; return 1; }
	wait $s
	local sent_fnv got_fnv
	sent_fnv=$(awk '/^done/ {print $NF}' <<<"$out")
	got_fnv=$(awk '/^conn-done/ {print $NF}' /tmp/tp$$.srv)
	[ -n "$sent_fnv" ] && [ "$sent_fnv" = "$got_fnv" ] || { echo "checksum $sent_fnv != $got_fnv"; return 1; }
}

eg0=$(pod_stat $X tp-c .egress_packets)
inj0=$(pi -N $X -j inject stats | jq '[.[].packets] | add // 0')
check same_node_64MiB proxied_pair tp-s $S 67108864
check server_sees_client_address grep -q "^accept $C " /tmp/tp$$.srv
check proxy_saw_original_destination grep -q "conn $C:[0-9]* -> $S:8080 up 67108864" /tmp/tp$$.pxlog
eg1=$(pod_stat $X tp-c .egress_packets)
inj1=$(pi -N $X -j inject stats | jq '[.[].packets] | add')
# Every injected upstream packet passed the client's egress exactly once
# (the client's own packets to the proxy are captured before its programs).
expect_num client_egress_once_per_upstream_packet "$(sub "$eg1" "$eg0")" "$(sub "$inj1" "$inj0")"
check client_egress_moved test "$(sub "$eg1" "$eg0")" -gt 0

check same_node_v6 proxied_pair tp-s fd00::b 1000000 -6
check server_sees_client_v6 grep -q "^accept fd00::a " /tmp/tp$$.srv

# The client sees the server's address, never the proxy's.
in_ns tp-s "$PINET" tcp-server 8081 --echo --timeout 10000 >/dev/null &
srv=$!
wait_tcp_listen tp-s 8081 >/dev/null
check half_close_echo in_ns tp-c "$PINET" tcp-connect --timeout 3000 $S 8081 --send 300000 --expect-echo
wait $srv

# A client that only listens: it half-closes at once, and the server reads
# to that end and answers. The client's FIN comes while the proxy's
# upstream is not connected yet (its first SYN dropped by a deny in the
# client's egress policy, taken away before the SYN is sent again): it is
# passed on as the client's end once connected, not taken for the client
# gone (it was, and the connection closed with no answer: found by a
# review).
in_ns tp-s "$PINET" tcp-server 8085 --sink --send 5000 --timeout 10000 >/dev/null &
srv=$!
wait_tcp_listen tp-s 8085 >/dev/null
id=$(pi -N $X -j policy add tp-c deny to $S/32 proto tcp port 8085 | jq .id)
in_ns tp-c "$PINET" tcp-connect --timeout 5000 $S 8085 --send 0 >/tmp/tp$$.hc 2>&1 &
cl=$!
sleep 0.5
pi -N $X policy del tp-c "$id" >/dev/null
wait $cl
kill $srv 2>/dev/null; wait $srv 2>/dev/null
expect_eq half_close_first_answered "$(grep -o '^done sent 0 received [0-9]*' /tmp/tp$$.hc || tail -n 1 /tmp/tp$$.hc)" \
	"done sent 0 received 5000"

# A half-closed connection quiet for longer than the flow tables' closing
# timeout (10 s): a request and its FIN, an answer 12 s later. Its entries
# outlive the quiet; when one FIN brought the 10 s, the answer lost its
# way to the proxy and the client hung (in the lab, 12 of the 100 below).
in_ns tp-s "$PINET" tcp-server 8083 --echo --delay 12000 --timeout 30000 >/dev/null &
srv=$!
wait_tcp_listen tp-s 8083 >/dev/null
check half_closed_quiet_past_closing_timeout in_ns tp-c "$PINET" tcp-connect --timeout 30000 $S 8083 --send 300 --expect-echo
wait $srv

# 100 concurrent connections. 60 s is plenty on a host; under the lab's
# emulation, with the host busy, 100 echoes through the proxy took longer
# (82 and 90 of 100 were done in time on debian-6.12): 4 minutes there.
many_ms=60000
[ -n "${PODINJECT_LAB:-}" ] && many_ms=240000
in_ns tp-s "$PINET" tcp-server 8082 --count 100 --echo --timeout $many_ms >/tmp/tp$$.many &
srv=$!
wait_tcp_listen tp-s 8082 >/dev/null
t0=$SECONDS
px0=$(wc -l </tmp/tp$$.pxlog)
for i in $(seq 100); do
	in_ns tp-c "$PINET" tcp-connect --timeout $many_ms $S 8082 --send 20000 --expect-echo >/tmp/tp$$.c$i 2>&1 &
	clients+=($!)
done
wait $srv
wait "${clients[@]}"
ok=$(cat /tmp/tp$$.c* | grep -c '^done sent 20000 received 20000')
if [ "$ok" = 100 ]; then
	pass concurrent_100
else
	# what one that did not finish said, how long they all took, and
	# what the proxy said of the connections it did not end as done (a
	# reset seen once on debian-6.1 in the lab, 2026-12-06, not since)
	# (and every drop the node counted: the datapath's, by pod and
	# reason, and the capture's refusals; seen twice on debian-6.1, a
	# timeout the second time, with nothing from the proxy: a hole before
	# the close, fixed 2026-12-07, hole_filled_before_close below)
	fail concurrent_100 "$ok of 100 done in $((SECONDS - t0)) s; one of the others: $(grep -L '^done sent 20000 received 20000' /tmp/tp$$.c* | head -n 1 | xargs -r tail -n 2 | tr '\n' ' '); the proxy: $(tail -n +$((px0 + 1)) /tmp/tp$$.pxlog | grep -v ' done$' | head -n 3 | tr '\n' ' '); drops: $(pi -N $X metrics | grep -E '^podinject_(pod_drops|inject_drops|inject_refused|proxy_limit_drops)_total' | grep -v ' 0$' | tr '\n' ' ')"
fi
expect_eq concurrent_100_server_sees_client "$(grep -c "^accept $C " /tmp/tp$$.many)" 100
rm -f /tmp/tp$$.c*

# A hole before the close: the server answers and closes at once; the
# answer's one data segment is lost after the datapath passed it (dropped
# at tp-c's eth0, as a full receive queue would), its FIN arrives first,
# and tp-c answers it with a duplicate ACK, after both ends' FINs went by.
# That ACK is not the last one: the flow stays until an ACK covers the
# later FIN, so the proxy's retransmission finds its way to tp-c (before,
# any segment after both FINs ended the entry, and the retransmission met
# the proxy's source check as a spoof: the client hung; seen as one
# connection of concurrent_100 on a loaded guest).
HOLE_PIN=/sys/fs/bpf/tp-hole$$
check hole_attached test_prog_attach $X tp_hole tp-c eth0 ingress $HOLE_PIN
in_ns tp-s "$PINET" tcp-server 8091 --sink --send 1000 --timeout 10000 >/tmp/tp$$.hole 2>&1 &
srv=$!
wait_tcp_listen tp-s 8091 >/dev/null
out=$(in_ns tp-c "$PINET" tcp-connect --timeout 5000 $S 8091 --send 10 2>&1 | tail -n 1)
wait $srv
holes=$("$BUILD/tcx-attach" counter $HOLE_PIN)
test_prog_detach tp-c eth0 ingress $HOLE_PIN
expect_eq hole_made "$holes" 1
expect_eq hole_filled_before_close "$(cut -d' ' -f1-5 <<<"$out")" "done sent 10 received 1000"

# Across nodes: the upstream leaves through the client's node uplink.
check cross_node proxied_pair tp-r $R 4000000
check cross_node_server_sees_client grep -q "^accept $C " /tmp/tp$$.srv

# UDP request-response through the proxy
in_ns tp-s "$PINET" udp-echo 5353 5 5000 >/tmp/tp$$.udp &
srv=$!
sleep 0.3
out=$(in_ns tp-c "$PINET" udp-rr $S 5353 5 2000)
wait $srv
expect_eq udp_replies "$(head -n 1 <<<"$out")" "replies 5"
expect_eq udp_reply_from_server "$(sed -n 2p <<<"$out")" "from $S 5353"
expect_eq udp_server_sees_client "$(sed -n 2p /tmp/tp$$.udp | awk '{print $2}')" "$C"
# Datagrams larger than the path (fragmented): the kernel puts each back
# together in the proxy's namespace, having forgotten the socket the
# datapath gave its fragments, and looks it up by its address (the
# original destination's). A flow's first found no socket there: lost
# (port unreachable); proxy_lookup now names the proxy's UDP listener,
# which proxy_assign registered at the first fragment. A later one went
# to the session's reply socket (bound to that destination), never read:
# lost too; it is read now, as a fallback (udp_fragmented_after_first).
for fam in 4 6; do
	if [ $fam = 4 ]; then dst=$S src=$C f=; else dst=fd00::b src=fd00::a f=-6; fi
	for first in "" "--first 100 --delay 300"; do
		in_ns tp-s "$PINET" udp-recv $f 5354 4 4000 >/tmp/tp$$.fr &
		srv=$!
		sleep 0.3
		in_ns tp-c "$PINET" udp-send $first $dst 5354 4 3000 >/dev/null
		wait $srv
		expect_eq udp_fragmented_${first:+after_first_}v$fam "$(tr '\n' ' ' </tmp/tp$$.fr)" "received 4 from $src count 4 "
	done
done

# The client's policy holds for the proxied upstream: deny port 8080.
id=$(pi -N $X -j policy add tp-c deny to $S/32 proto tcp port 8080 | jq .id)
pd0=$(pod_stat $X tp-c .drops.policy)
in_ns tp-s "$PINET" tcp-server 8080 --sink --timeout 4000 >/tmp/tp$$.srv &
srv=$!
wait_tcp_listen tp-s 8080 >/dev/null
# (the proxy logs each connection as it ends; earlier ones may have had
# the same client port)
log0=$(wc -l </tmp/tp$$.pxlog)
# the proxy's SYNs towards the server: its connection attempts and their
# retransmissions (it makes no other connection meanwhile)
proxy_syns() { ip netns exec tp-p nstat -saz TcpActiveOpens TcpExtTCPSynRetrans | awk '$1 ~ /^Tcp/ {n += $2; k++} END {if (k == 2) print n}'; }
syn0=$(proxy_syns)
out=$(in_ns tp-c "$PINET" tcp-connect --timeout 6000 $S 8080 --send 1000 2>&1)
blocked=$C:$(awk '/^connected/ {print $3}' <<<"$out")
blocked_log() {
	tail -n +$((log0 + 1)) /tmp/tp$$.pxlog |
		awk -v c="$blocked" -v d="$S:8080" '$1 == "conn" && $2 == c && $4 == d'
}
wait $srv
# Every SYN the proxy sent while the rule stood (its attempt and the
# retransmissions) was dropped by it, none accepted.
# The proxy goes on retransmitting (until its connect timeout), so a
# retransmission may fall between two reads: the counters are read
# between two readings of the SYNs sent, and each must lie between them
# (equal to both when none fell between, as on a fast host).
syns=$(sub "$(proxy_syns)" "$syn0")
drops=$(sub "$(pod_stat $X tp-c .drops.policy)" "$pd0")
rule_pk=$(pi -N $X -j policy list tp-c | jq ".[] | select(.id == $id) | .packets")
syns_after=$(sub "$(proxy_syns)" "$syn0")
sent_some=$(is_num "$syns" && [ "$syns" -gt 0 ] && echo "SYNs sent" || echo "no SYN sent ($syns)")
expect_eq policy_blocks_upstream "$(grep -c '^accept' /tmp/tp$$.srv) accepted, $sent_some" "0 accepted, SYNs sent"
# between NAME GOT: GOT within [syns, syns_after]
between() {
	if is_num "$2" && is_num "$syns" && is_num "$syns_after" &&
	   [ "$2" -ge "$syns" ] && [ "$2" -le "$syns_after" ]; then
		pass "$1"
	else
		fail "$1" "got '$2', want $syns..$syns_after (the proxy's SYNs before and after the read)"
	fi
}
between policy_denied_upstream_counted "$drops"
between policy_rule_counted "$rule_pk"
pi -N $X policy del tp-c "$id" >/dev/null
# The proxy accepted the blocked client at once and, the client having
# half-closed after its data, retries the upstream SYN until its connect
# timeout, long after the client gave up. Once the rule is gone such a
# retransmission connects: had the next server on port 8080 been up, it
# would have taken that stale connection for the new one (its only
# accept) and the new one been reset. So the old attempt ends first:
# refused by tp-s, where nothing listens now, or at the connect timeout.
blocked_ended() {
	[ "$blocked" != "$C:" ] || { echo "the blocked client never reached the proxy: $out"; return 1; }
	for _ in $(seq 400); do
		[ -n "$(blocked_log)" ] && return 0
		sleep 0.1
	done
	echo "the proxy still tries the blocked upstream"
	return 1
}
check policy_blocked_attempt_ended blocked_ended
expect_eq policy_blocked_nothing_relayed "$(blocked_log | awk '{print "up " $6 " down " $8}')" "up 0 down 0"
check policy_removed_allows proxied_pair tp-s $S 1000

# A proxied connection open when the client gets its first rule, an
# ingress deny: the upstream's answers still reach the proxy. The pod had
# no rules, so nothing of it was tracked; the rule's publication enters
# the connection first (lib/ct.c, ct_seed_pod: the pod's sockets and the
# proxy's upstream flows as the pod). The server waits before it echoes,
# so its answer is the first packet after the rule: without the entry it
# would meet the deny as a flow of its own.
hold=3000
[ -n "${PODINJECT_LAB:-}" ] && hold=10000
in_ns tp-s "$PINET" tcp-server 8084 --echo --delay $hold --timeout $((hold + 10000)) >/tmp/tp$$.e 2>&1 &
srv=$!
wait_tcp_listen tp-s 8084 >/dev/null
in_ns tp-c "$PINET" tcp-connect --timeout $((hold + 10000)) $S 8084 --send 1000 --expect-echo >/tmp/tp$$.c 2>&1 &
cli=$!
for _ in $(seq 100); do grep -q accept /tmp/tp$$.e && break; sleep 0.1; done
if [ -n "${PODINJECT_LAB:-}" ]; then sleep 2; else sleep 0.5; fi
r=$(pi -N $X -j policy add tp-c ingress deny | jq .id)
wait $cli
wait $srv
expect_eq first_rule_keeps_proxied_answers "$(grep -o 'done sent [0-9]* received [0-9]*' /tmp/tp$$.c)" "done sent 1000 received 1000"
expect_num first_rule_answers_not_denied "$(pi -N $X -j policy list tp-c | jq ".[] | select(.id == $r) | .packets")" 0
pi -N $X policy del tp-c ingress all >/dev/null

# A client that dies mid-request (its stream ends in a reset, as a
# crashed process's does): the server must not take the cut stream for a
# whole one. Connected directly it would read ECONNRESET; through the
# proxy it read the bytes relayed and then a clean end of stream (before
# 2026-12-06: the upstream was closed, a FIN, unless it was TLS). The
# server reads after half a second, so much of the request is still on
# its way when the reset comes.
in_ns tp-s "$PINET" tcp-server 8086 --sink --delay 500 --timeout 5000 >/tmp/tp$$.rst &
srv=$!
wait_tcp_listen tp-s 8086 >/dev/null
out=$(in_ns tp-c "$PINET" tcp-connect --timeout 5000 $S 8086 --send 300000 --abort)
wait $srv
expect_eq client_reset_reaches_server "$(sed -n 2p <<<"$out" | cut -d' ' -f1) $(grep -c '^accept' /tmp/tp$$.rst) $(grep -c '^conn-reset' /tmp/tp$$.rst) $(grep -c '^conn-done' /tmp/tp$$.rst)" "aborted 1 1 0"

# A turn of the proxy's loop moves at most --relay-budget bytes a
# direction (256 KiB by default), then the connection runs again in the
# next turn: a bulk transfer whose two ends keep up held the one-threaded
# loop for as long as it lasted, every other connection, accept and
# timer waiting. With 4 KiB nearly every turn of a transfer gives way:
# its bytes still arrive whole, both ways, and the proxy counts the turns.
kill $PROXY_PID
wait $PROXY_PID 2>/dev/null
start_proxy --relay-budget 4096
check budget_small_8MiB proxied_pair tp-s $S 8388608
in_ns tp-s "$PINET" tcp-server 8087 --echo --timeout 10000 >/dev/null &
srv=$!
wait_tcp_listen tp-s 8087 >/dev/null
check budget_small_echo in_ns tp-c "$PINET" tcp-connect --timeout 10000 $S 8087 --send 4000000 --expect-echo
wait $srv
out=$(ip netns exec tp-p timeout 5 "$BUILD/podinject-proxy" --relay-budget 4095 15002 2>&1 </dev/null)
expect_eq budget_refused_below_4096 "$? $out" "1 podinject-proxy: bad value '4095'"

# Killing the proxy: new connections fail fast with a reset.
kill $PROXY_PID
wait $PROXY_PID 2>/dev/null
gave=$(sed -n 's/.* \([0-9]*\) relay turns gave way.*/\1/p' /tmp/tp$$.pxlog)
check budget_turns_gave_way sh -c "test '${gave:-0}' -gt 0 || { tail -n 2 /tmp/tp$$.pxlog; false; }"
t0=$(now_ms)
out=$(in_ns tp-c "$PINET" tcp-connect --timeout 5000 $S 8080 2>&1)
t1=$(now_ms)
expect_eq proxy_down_refused "$(head -n 1 <<<"$out")" refused
expect_lt proxy_down_fast "$(sub "$t1" "$t0")" 1000
# A captured datagram with no proxy socket to take it is dropped: counted
# by its reason, node-wide (`inject refused`, the metrics), as the
# monitor names it, one for each datagram; no other reason moves.
refused() { pi -N $X -j inject refused; }
before=$(refused)
in_ns tp-c "$PINET" udp-rr $S 5353 3 300 >/dev/null
after=$(refused)
expect_eq proxy_down_datagrams_counted \
	"$(jq -n --argjson a "$before" --argjson b "$after" '[$b | to_entries[] | select(.value != $a[.key]) | "\(.key) +\(.value - $a[.key])"] | join(",")' -r)" \
	"proxy-no-socket +3"
expect_eq proxy_down_datagrams_metric \
	"$(pi -N $X metrics | awk '$1 == "podinject_inject_refused_total{node=\"'$X'\",reason=\"proxy-no-socket\"}" { print $2 }')" \
	"$(jq '."proxy-no-socket"' <<<"$after")"

# proxy del: direct again, nothing left.
check proxy_del pi -N $X proxy del tp-p --for tp-c
in_ns tp-s "$PINET" tcp-server 8080 --sink --timeout 5000 >/tmp/tp$$.srv &
srv=$!
wait_tcp_listen tp-s 8080 >/dev/null
check direct_after_del in_ns tp-c "$PINET" tcp-connect --timeout 3000 $S 8080 --send 1000
wait $srv
check direct_server_sees_client grep -q "^accept $C " /tmp/tp$$.srv
check del_no_rules sh -c "$PI -N $X -j proxy list | jq -e 'length == 0'"
check del_no_auth sh -c "$PI -N $X -j inject list | jq -e 'length == 0'"
check del_no_proxy_routing sh -c "! ip -n tp-p rule | grep -q 'lookup 100'"
expect_eq del_own_port_range_back "$(range_of tp-p)" "40000 50999"
check del_no_pins sh -c "! ls /sys/fs/bpf/podinject/$X/inject | grep -q link_"
# nor the clsact qdiscs a clsact node's hooks made on the pod's and the
# proxy's eth0 (before: they stayed, empty, in both pods); a tcx node
# makes none
expect_eq del_no_pod_qdiscs "$(for p in tp-c tp-p; do in_ns $p tc qdisc show dev eth0 | grep -c clsact; done | tr '\n' ' ')" "0 0 "
check del_no_records sh -c "! ls /sys/fs/bpf/podinject/$X/inject | grep -q 'qdisc_\\|range_'"
expect_eq del_head_roles_cleared "$(head_roles $X tp-c) $(head_roles $X tp-p)" "0 0"

# A node found broken (a pin gone: a bpffs cleaned by hand) while a proxy
# rule is on it: `node down` removes its pins and takes its programs off
# every device, the pods' own namespaces included, where the proxy's assign
# hook is on tp-p's eth0 (before: on a clsact node that filter stayed,
# holding its program and assigning tp-c's connections for a node that was
# gone), and the clsact qdiscs it made there go with them.
# The nodes adopted their namespaces (make_wire): their programs counted
# before they go (before the rule: its sk_lookup hook is a link in either
# mode), then the rule's with them.
ids=$(node_prog_ids $X; node_prog_ids $Y)
expect_hooked hooked_before_down "$(pi -N $X -j node show | jq -r .attach)" $ids
check broken_proxy_add pi -N $X proxy add tp-p --port 15001 --for tp-c
ids=$(node_prog_ids $X; node_prog_ids $Y)
xdir=$(node_pin_dir $X)
rm "$xdir/endpoints"
check_fails down_x_broken pi -N $X node down
# its walk of every namespace on the machine took only its own programs:
# node tp-y's, beside it, are all still where its mode attaches them
expect_hooked y_kept_beside_broken "$(pi -N $Y -j node show | jq -r .attach)" $(node_prog_ids $Y)
check down_y pi -N $Y node down
expect_unhooked no_links_left $ids
expect_eq broken_no_pod_qdiscs "$(for p in tp-c tp-p; do in_ns $p tc qdisc show dev eth0 | grep -c clsact; done | tr '\n' ' ')" "0 0 "
check broken_pins_gone test ! -e "$xdir"
ip netns del $X
ip netns del $Y
