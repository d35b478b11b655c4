#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Stateful policy: a flow is decided in the direction that opened it, its
# replies follow. Real packets between pod namespaces, ip_forward off.
#
#   ct-a 10.244.9.10 fd00:9::a --+
#                                +-- node ct-n (pod_egress: conntrack, policy)
#   ct-b 10.244.9.11 fd00:9::b --+
. "$(dirname "$0")/lib.sh"
require_root
EXPECT=70
PREFIX=ct-
N=ct-n
A=10.244.9.10
B=10.244.9.11
A6=fd00:9::a
B6=fd00:9::b

check up node_up $N ${NODE_ARGS:-}
in_ns $N sysctl -qw net.ipv4.ip_forward=0 net.ipv6.conf.all.forwarding=0
check pod_add_a pi -N $N pod add ct-a --ip $A --ip6 $A6
check pod_add_b pi -N $N pod add ct-b --ip $B --ip6 $B6

rule_pk() { pi -N $N -j policy list "$1" | jq ".[] | select(.id == $2) | .packets"; }
flows() {	# flows POD JQ-FILTER: how many of the pod's flows match
	pi -N $N -j ct list "$1" | jq "[.[] | select($2)] | length"
}
snmp() { in_ns ct-a awk -v k="$1" '$1 == "Icmp:" {n++; if (n == 1) for (i = 1; i <= NF; i++) f[i] = $i; else for (i = 1; i <= NF; i++) if (f[i] == k) print $i}' /proc/net/snmp; }
snmp6() { in_ns ct-a awk -v k="$1" '$1 == k {print $2}' /proc/net/snmp6; }

# ---- a pod that may not ping still answers pings ----------------------
# (before the tracker, the egress deny dropped a's echo replies too)
# (rules to b's addresses: a's own MLD and NDP would meet a rule on all
# ICMP, and be counted there)
r=$(pi -N $N -j policy add ct-a deny to $B/32 proto icmp | jq .id)
r6=$(pi -N $N -j policy add ct-a deny to $B6/128 proto icmp | jq .id)
check b_pings_a_v4 in_ns ct-b ping -c 2 -W 2 -i 0.2 $A
check b_pings_a_v6 in_ns ct-b ping -6 -c 2 -W 2 -i 0.2 $A6
check_fails a_cannot_ping_b_v4 in_ns ct-a ping -c 2 -W 1 -i 0.2 $B
check_fails a_cannot_ping_b_v6 in_ns ct-a ping -6 -c 2 -W 1 -i 0.2 $B6
# a's two pings of two requests each, and nothing else: the replies to
# b's pings were never the rule's
expect_eq icmp_deny_counted "$(rule_pk ct-a "$r") $(rule_pk ct-a "$r6")" "2 2"
expect_num a_tracks_b_pings "$(flows ct-a '.proto == "icmp" and .opened_by == "ingress" and .replied')" 2
pi -N $N policy del ct-a all >/dev/null

# ---- replies pass an ingress deny; new flows from b do not ------------
r=$(pi -N $N -j policy add ct-a ingress deny | jq .id)
in_ns ct-b "$PINET" tcp-server 7100 --count 1 --sink --timeout 5000 >/tmp/ct$$.srv &
check tcp_server_listens wait_tcp_listen ct-b 7100
res=$(in_ns ct-a "$PINET" tcp-connect --timeout 3000 $B 7100 --send 200000)
wait $!
expect_eq tcp_reply_passes_ingress_deny "$(grep -o 'conn-done bytes [0-9]*' /tmp/ct$$.srv), $(grep -o 'done sent [0-9]*' <<<"$res")" "conn-done bytes 200000, done sent 200000"
# closing now: its entry lives on for the closing timeout (10 s)
expect_num tcp_flow_tracked "$(flows ct-a '.proto == "tcp" and .peer_port == 7100 and .opened_by == "egress" and .rule == 0')" 1
in_ns ct-a "$PINET" tcp-server 7101 --count 1 --timeout 2000 >/dev/null 2>&1 &
check tcp_a_listens wait_tcp_listen ct-a 7101
expect_eq tcp_new_from_b_denied "$(in_ns ct-b "$PINET" tcp-connect --timeout 1000 $A 7101)" timeout
wait
in_ns ct-b "$PINET" udp-echo 7102 3 5000 >/dev/null &
check udp_echo_listens wait_udp_listen ct-b 7102
expect_eq udp_reply_passes_ingress_deny "$(in_ns ct-a "$PINET" udp-rr $B 7102 3 2000 | head -n 1)" "replies 3"
wait
in_ns ct-b "$PINET" udp-echo -6 7105 2 5000 >/dev/null &
check udp6_echo_listens wait_udp_listen ct-b 7105 -6
expect_eq udp6_reply_passes_ingress_deny "$(in_ns ct-a "$PINET" udp-rr $B6 7105 2 2000 | head -n 1)" "replies 2"
wait
in_ns ct-a "$PINET" udp-recv 7103 5 1500 >/tmp/ct$$.udp &
check udp_a_listens wait_udp_listen ct-a 7103
d0=$(pod_stat $N ct-a .drops.\"ingress-policy\")
sent=$(in_ns ct-b "$PINET" udp-send $A 7103 5)
wait $!
expect_eq udp_new_from_b_denied "$sent, $(head -n 1 /tmp/ct$$.udp)" "sent 5, received 0"
expect_num udp_new_from_b_dropped "$(sub "$(pod_stat $N ct-a .drops.\"ingress-policy\")" "$d0")" 5
pi -N $N policy del ct-a ingress all >/dev/null

# ---- a deny added while a flow is open stops it -----------------------
# a pings b, one echo identifier for the whole run (one flow); half way
# a deny of b's ingress arrives: the first request after it is re-decided
# and dropped, and so is every one after it.
o0=$(snmp OutEchos)
i0=$(snmp InEchoReps)
in_ns ct-a ping -c 30 -i 0.1 -W 1 $B >/dev/null 2>&1 &
ping_pid=$!
sleep 1.2
r=$(pi -N $N -j policy add ct-b ingress deny from $A/32 proto icmp | jq .id)
wait $ping_pid
tx=$(sub "$(snmp OutEchos)" "$o0")
rx=$(sub "$(snmp InEchoReps)" "$i0")
check open_flow_answered_before test "$rx" -ge 5
check open_flow_stopped test "$rx" -lt "$tx"
expect_num open_flow_dropped_after_deny "$(rule_pk ct-b "$r")" "$(sub "$tx" "$rx")"
# (b had no rule before: its flows were not tracked, and a flow the deny
# decides first gets no entry)
expect_num open_flow_entry_gone "$(flows ct-b ".proto == \"icmp\" and .peer_addr == \"$A\" and .opened_by == \"ingress\"")" 0
pi -N $N policy del ct-b ingress all >/dev/null

# ---- a deny cuts an open download for good -----------------------------
# a reads b's 6 MB slowly (64 KiB every 20 ms, 2 s in all; in the lab,
# where a CLI call takes seconds, every 100 ms); a deny of a's TCP to b
# comes half way (a download that ended first says so). b goes on sending (the rest of its window, then its
# retransmissions): none of it may open a flow by a's ingress policy (no
# rules) that lets a's ACKs out as its replies. Before 2026-12-06 the
# second segment after the deny did, and the download ran to its end.
in_ns ct-b "$PINET" tcp-server 7190 --count 1 --send 6000000 --timeout 6000 >/dev/null 2>&1 &
srv=$!
check cut_download_server_listens wait_tcp_listen ct-b 7190
dl_delay=20
[ -n "${PODINJECT_LAB:-}" ] && dl_delay=100
# a's receive buffer at most 256 KiB while it lasts: else autotuning may
# grow it to tcp_rmem's 6 MiB, and the whole download waits in a's socket
# before the deny (so it went on the stock kernels in the lab)
rmem0=$(in_ns ct-a sysctl -n net.ipv4.tcp_rmem)
in_ns ct-a sysctl -qw net.ipv4.tcp_rmem="4096 65536 262144"
in_ns ct-a "$PINET" tcp-connect --timeout 2000 $B 7190 --wait-eof --delay $dl_delay >/tmp/ct$$.dl 2>&1 &
cl=$!
for i in $(seq 200); do grep -q '^connected' /tmp/ct$$.dl && break; sleep 0.02; done
sleep 0.4
r=$(pi -N $N -j policy add ct-a deny to $B/32 proto tcp | jq .id)
early=
kill -0 $cl 2>/dev/null || early=" (the download ended before the deny was in)"
wait $cl
in_ns ct-a sysctl -qw net.ipv4.tcp_rmem="$rmem0"
expect_eq cut_download_stays_stopped "$(tail -n 1 /tmp/ct$$.dl)$early" timeout
expect_num cut_download_flow_cut "$(flows ct-a ".proto == \"tcp\" and .peer_port == 7190 and .opened_by == \"egress\" and .cut and .rule == $r")" 1
expect_num cut_download_no_flow_of_b "$(flows ct-a ".proto == \"tcp\" and .peer_port == 7190 and .opened_by == \"ingress\"")" 0
check cut_download_drops_counted test "$(rule_pk ct-a "$r")" -ge 2
# a flush forgets flows, but not a cut one (forgotten, b's next
# retransmission would open the way again)
pi -N $N ct flush ct-a >/dev/null
expect_num cut_flow_survives_flush "$(flows ct-a ".proto == \"tcp\" and .peer_port == 7190 and .cut")" 1
pi -N $N policy del ct-a all >/dev/null
# the server is still writing to the cut connection: it and its port
# go now (a later check listens on a port of its own in ct-b; `kill $srv`
# would stop the subshell only, not the server ip netns exec became)
kill $(ip netns pids ct-b) 2>/dev/null
wait $srv 2>/dev/null
rm -f /tmp/ct$$.dl

# ---- a pod without rules is not tracked; its first rule tracks ---------
# what it has open (lib/ct.c, ct_seed_pod): a connection a opened before
# its first rule, an ingress deny, still gets its answers, and one b
# opened to a before a's egress deny still gets a's. In both, the first
# packet after the rule is the answer (the peer waits 3 s before it
# echoes what it was sent; the data and its ACK went before the rule):
# without the connection in the table it would meet the deny as a flow of
# its own.
hold=3000
[ -n "${PODINJECT_LAB:-}" ] && hold=10000	# a CLI call takes seconds there
# the connection accepted, then a moment for the data's, the FIN's and
# their ACKs to pass: nothing unanswered is left for the pod to send again
# (a retransmission would open the flow in its own direction)
wait_accept() {
	for _ in $(seq 100); do grep -q accept "$1" && break; sleep 0.1; done
	if [ -n "${PODINJECT_LAB:-}" ]; then sleep 2; else sleep 0.5; fi
}
# held_echo SERVER CLIENT DST PORT DIR FILTER: CLIENT sends 1000 bytes to
# SERVER's echo, which answers $hold later; meanwhile ct-a gets its first
# rule, `DIR deny`. Sets RULE (its id), ENTERED (ct-a's flows matching
# FILTER right after the rule) and RESULT (the client's line).
held_echo() {
	local e c
	in_ns "$1" "$PINET" tcp-server "$4" --echo --delay $hold --timeout $((hold + 10000)) >/tmp/ct$$.e 2>&1 &
	e=$!
	wait_tcp_listen "$1" "$4" >/dev/null
	in_ns "$2" "$PINET" tcp-connect --timeout $((hold + 10000)) "$3" "$4" --send 1000 --expect-echo >/tmp/ct$$.c 2>&1 &
	c=$!
	wait_accept /tmp/ct$$.e
	RULE=$(pi -N $N -j policy add ct-a "$5" deny | jq .id)
	ENTERED=$(flows ct-a "$6")
	wait $c
	wait $e
	RESULT=$(grep -o 'done sent [0-9]* received [0-9]*' /tmp/ct$$.c)
}
in_ns ct-a ping -c 1 -W 2 $B >/dev/null
expect_num untracked_without_rules "$(pi -N $N -j ct list ct-a | jq length)" 0
held_echo ct-b ct-a $B 7110 ingress '.proto == "tcp" and .peer_port == 7110 and .opened_by == "egress"'
expect_num open_conn_entered "$ENTERED" 1
expect_eq answer_passes_first_ingress_rule "$RESULT" "done sent 1000 received 1000"
expect_num answer_not_counted_by_deny "$(rule_pk ct-a "$RULE")" 0
pi -N $N policy del ct-a ingress all >/dev/null
expect_num last_rule_forgets_flows "$(pi -N $N -j ct list ct-a | jq length)" 0
held_echo ct-a ct-b $A 7111 egress '.proto == "tcp" and .pod_port == 7111 and .opened_by == "ingress"'
expect_num accepted_conn_entered "$ENTERED" 1
expect_eq answer_passes_first_egress_rule "$RESULT" "done sent 1000 received 1000"
check_fails new_flow_meets_egress_deny in_ns ct-a ping -c 1 -W 1 $B
pi -N $N policy del ct-a egress all >/dev/null

# From here on both pods are tracked: a rule each that matches nothing here.
pi -N $N policy add ct-a ingress deny from 192.0.2.1/32 >/dev/null
pi -N $N policy add ct-b ingress deny from 192.0.2.1/32 >/dev/null

# ---- expiry ---------------------------------------------------------------
check timeout_set pi -N $N ct timeout udp 1
expect_eq timeout_shown "$(pi -N $N -j ct timeout | jq -c '[.udp, .icmp]')" "[1,30]"
in_ns ct-b "$PINET" udp-recv 7104 1 2000 >/dev/null &
check udp_b_listens wait_udp_listen ct-b 7104
in_ns ct-a "$PINET" udp-send $B 7104 1 >/dev/null
wait
expect_num udp_flow_live "$(flows ct-a '.proto == "udp" and .peer_port == 7104')" 1
sleep 1.5
expect_num udp_flow_expired "$(flows ct-a '.proto == "udp" and .peer_port == 7104')" 0
check timeout_default pi -N $N ct timeout udp 0
expect_eq timeout_default_shown "$(pi -N $N -j ct timeout | jq .udp)" 60

# ---- ct list, flush, pod show ------------------------------------------
in_ns ct-a ping -c 1 -W 2 $B >/dev/null
in_ns ct-a ping -6 -c 1 -W 2 $B6 >/dev/null
out=$(pi -N $N -j ct list ct-a)
expect_eq list_fields "$(jq -r "[.[] | select(.proto == \"icmp\" and .family == \"ipv4\" and .peer_addr == \"$B\" and .egress_packets == 1)][0] | [.pod_addr, .opened_by, .state, .egress_packets, .ingress_packets] | map(tostring) | join(\" \")" <<<"$out")" "$A egress established 1 1"
expect_num list_v6 "$(jq "[.[] | select(.proto == \"icmp\" and .family == \"ipv6\" and .peer_addr == \"$B6\" and .egress_packets == 1)] | length" <<<"$out")" 1
n=$(jq length <<<"$out")
expect_num pod_show_counts "$(pi -N $N -j pod show ct-a | jq .conntrack.flows)" "$n"
# the text form says the same count; read between two JSON reads that
# agree (under emulation a flow can come or go between two commands)
for _ in 1 2 3; do
	n1=$(pi -N $N -j pod show ct-a | jq .conntrack.flows)
	txt=$(pi -N $N pod show ct-a)
	n2=$(pi -N $N -j pod show ct-a | jq .conntrack.flows)
	[ "$n1" = "$n2" ] && break
done
check pod_show_text grep -q "conntrack: $n1 flows" <<<"$txt"
bflows='.proto == "icmp" and .opened_by == "ingress"'
nb=$(flows ct-b "$bflows")
check flush_count sh -c "[ \$($PI -N $N -j ct flush ct-a | jq .flushed) -ge 2 ]"
# (but the download's cut flow, above)
expect_num flushed_empty "$(flows ct-a '.cut | not')" 0
expect_eq flush_other_pod_kept "$(flows ct-b "$bflows") $(test "$nb" -ge 2 && echo some)" "$nb some"
check_fails list_no_such_pod pi -N $N ct list ct-nope
check_fails timeout_bad_kind pi -N $N ct timeout sctp 5
expect_eq timeout_bad_kind_exit "$(pi -N $N ct timeout udp x 2>/dev/null; echo $?)" 2
# ---- TTL: the node routes, so it decrements; at 1 the sender hears why ---
t0=$(pod_stat $N ct-a .drops.ttl)
x4=$(snmp InTimeExcds)
x6=$(snmp6 Icmp6InTimeExcds)
# the pod's own defaults, so that any ping sends with 1 left
in_ns ct-a sysctl -qw net.ipv4.ip_default_ttl=1 net.ipv6.conf.eth0.hop_limit=1
in_ns ct-a ping -c 1 -W 2 $B >/dev/null 2>&1
in_ns ct-a ping -6 -c 1 -W 2 $B6 >/dev/null 2>&1
in_ns ct-a sysctl -qw net.ipv4.ip_default_ttl=64 net.ipv6.conf.eth0.hop_limit=64
expect_num ttl_exceeded_v4_received "$(sub "$(snmp InTimeExcds)" "$x4")" 1
expect_num ttl_exceeded_v6_received "$(sub "$(snmp6 Icmp6InTimeExcds)" "$x6")" 1
expect_num ttl_drops_counted "$(sub "$(pod_stat $N ct-a .drops.ttl)" "$t0")" 2
in_ns ct-a sysctl -qw net.ipv4.ip_default_ttl=2
check ttl_2_reaches_b in_ns ct-a ping -c 1 -W 2 $B
in_ns ct-a sysctl -qw net.ipv4.ip_default_ttl=64

# ---- a new pod starts with no flows, whatever its id carried -----------
# A packet in flight while a pod is removed can track a flow under its id
# after the removal's sweep (an adopted pod's programs stay on its device
# until then). Made here by hand: one of a's live flows copied, in the
# node's map, under the id of a deleted pod; the next pod added gets it.
le32() { printf '"0x%02x","0x%02x","0x%02x","0x%02x"' $(($1 & 255)) $(($1 >> 8 & 255)) $(($1 >> 16 & 255)) $(($1 >> 24 & 255)); }
ct_map() { echo "$(node_pin_dir $N)/ct"; }
id_flows() {	# id_flows ID: the map's entries keyed by pod id ID
	bpftool -j map dump pinned "$(ct_map)" |
		jq --argjson k "[$(le32 "$1")]" '[.[] | select(.key[0:4] == $k)] | length'
}
plant_flow() {	# plant_flow FROM TO: one of pod id FROM's flows, also under TO
	local e
	e=$(bpftool -j map dump pinned "$(ct_map)" |
		jq -r --argjson f "[$(le32 "$1")]" --argjson t "[$(le32 "$2")]" \
			'first(.[] | select(.key[0:4] == $f)) | "key " + ($t + .key[4:] | join(" ")) + " value " + (.value | join(" "))')
	[ -n "$e" ] && bpftool map update pinned "$(ct_map)" $e
}
check pod_add_c pi -N $N pod add ct-c --ip 10.244.9.12
cid=$(pi -N $N -j pod show ct-c | jq .id)
aid=$(pi -N $N -j pod show ct-a | jq .id)
check pod_del_c pi -N $N pod del ct-c
in_ns ct-a ping -c 1 -W 2 $B >/dev/null
check stale_flow_planted plant_flow "$aid" "$cid"
expect_num stale_flow_there "$(id_flows "$cid")" 1
check pod_add_d pi -N $N pod add ct-d --ip 10.244.9.13
expect_eq new_pod_gets_the_id "$(pi -N $N -j pod show ct-d | jq .id)" "$cid"
expect_num new_pod_no_stale_flow "$(pi -N $N -j ct list ct-d | jq length)" 0
check pod_del_d pi -N $N pod del ct-d

check pod_del_b pi -N $N pod del ct-b
check down pi -N $N node down
rm -f /tmp/ct$$.*
cleanup_all
