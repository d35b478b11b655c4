#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Many podinject commands on one node at the same moment, as a container
# runtime calls its network plugin: every command that changes the node
# holds its lock, so each pod gets its own id, each pod's rules stay its
# own (checked with traffic), one address goes to one pod, and a command
# that cannot get the lock in time fails with "busy" and changes nothing.
#
#   cc-p0 ... cc-p15 (10.244.0.10-25) on node cc-n
#   policy: pod i denies udp port 7100 to pod i+1 (mod 16)
#   inject: pod i (0-7) may inject as pod i+8
source "$(dirname "$0")/lib.sh"
require_root
EXPECT=35
PREFIX=cc-
N=${PREFIX}n
NPODS=16
cleanup_all

ip4() { echo "10.244.0.$((10 + $1 % NPODS))"; }
pod() { echo "${PREFIX}p$(($1 % NPODS))"; }

check node_up node_up $N

# 16 pod adds at once.
bg_pids=()
for i in $(seq 0 $((NPODS - 1))); do
	"$PI" -N $N pod add "$(pod $i)" --ip "$(ip4 $i)" --ip6 "fd00::c:$i" \
		>/tmp/$PREFIX$$.add$i 2>&1 &
	bg_pids+=($!)
done
bg_wait "${bg_pids[@]}"
fails=$BG_FAILS
expect_eq adds_all_succeed "$fails" 0
list=$("$PI" -N $N -j pod list)
expect_eq adds_all_listed "$(echo "$list" | jq length)" $NPODS
expect_eq adds_distinct_ids "$(echo "$list" | jq '[.[].id] | unique | length')" $NPODS
expect_eq adds_distinct_devices "$(echo "$list" | jq '[.[].host_ifindex] | unique | length')" $NPODS

# The same address from four commands at once: one pod gets it, the others
# are refused (exit 2) and their rollback leaves the winner's endpoint.
declare -a dup_pid=() dup_rc=()
for k in 0 1 2 3; do
	"$PI" -N $N pod add ${PREFIX}d$k --ip 10.244.0.200 >/tmp/$PREFIX$$.dup$k 2>&1 &
	dup_pid[k]=$!
done
ok=0 usage=0
for k in 0 1 2 3; do
	wait "${dup_pid[k]}"
	dup_rc[k]=$?
	case ${dup_rc[k]} in 0) ok=$((ok + 1)) ;; 2) usage=$((usage + 1)) ;; esac
done
# Every command's words go with a failure: a pod start that fails at
# random must say why.
if [ "$ok/$usage" = 1/3 ]; then
	pass dup_address_one_winner
else
	fail dup_address_one_winner "got $ok/$usage, want 1/3: $(for k in 0 1 2 3; do
		printf '[d%s rc %s] %s ' $k "${dup_rc[$k]}" "$(tr '\n' ' ' </tmp/$PREFIX$$.dup$k)"; done)"
fi
rm -f /tmp/$PREFIX$$.dup[0-3]
winner=$("$PI" -N $N -j pod list | jq -r '.[] | select(.ipv4 == "10.244.0.200") | .name')
expect_eq dup_address_one_pod "$(echo "$winner" | grep -c .)" 1
# the winner's address still routes: a datagram from p0 arrives
in_ns "$winner" "$PINET" udp-recv 7300 3 3000 >/tmp/$PREFIX$$.dup &
rpid=$!
sleep 0.3
in_ns "$(pod 0)" "$PINET" udp-send 10.244.0.200 7300 3 >/dev/null
wait $rpid
expect_eq dup_address_winner_reachable "$(head -n 1 /tmp/$PREFIX$$.dup)" "received 3"
"$PI" -N $N pod del "$winner" >/dev/null

# 16 policy adds at once, each on its own pod.
bg_pids=()
for i in $(seq 0 $((NPODS - 1))); do
	"$PI" -N $N policy add "$(pod $i)" egress deny to "$(ip4 $((i + 1)))/32" \
		proto udp port 7100 >/dev/null 2>&1 &
	bg_pids+=($!)
done
bg_wait "${bg_pids[@]}"
fails=$BG_FAILS
expect_eq policy_adds_all_succeed "$fails" 0
rules=$("$PI" -N $N -j policy list)
expect_eq policy_one_rule_each "$(echo "$rules" | jq '[.[].pod] | unique | length')/$(echo "$rules" | jq length)" "$NPODS/$NPODS"
expect_eq policy_distinct_rule_ids "$(echo "$rules" | jq '[.[].id] | unique | length')" $NPODS
bad=0
for i in $(seq 0 $((NPODS - 1))); do
	to=$(echo "$rules" | jq -r --arg p "$(pod $i)" '.[] | select(.pod == $p) | .to')
	[ "$to" = "$(ip4 $((i + 1)))/32" ] || bad=$((bad + 1))
done
expect_eq policy_rules_are_their_pods "$bad" 0

# 16 inject allows at once: pod i may speak as pod i+8.
bg_pids=()
for i in $(seq 0 7); do
	"$PI" -N $N inject allow "$(pod $i)" --as "$(pod $((i + 8)))" >/dev/null 2>&1 &
	bg_pids+=($!)
done
bg_wait "${bg_pids[@]}"
fails=$BG_FAILS
expect_eq inject_allows_all_succeed "$fails" 0
auth=$("$PI" -N $N -j inject list)
bad=0
for i in $(seq 0 7); do
	echo "$auth" | jq -e --arg a "$(pod $i)" --arg t "$(pod $((i + 8)))" \
		'[.[] | select(.injector == $a and .as == $t)] | length > 0' >/dev/null ||
		bad=$((bad + 1))
done
expect_eq inject_each_pair_listed "$bad" 0

# Traffic. Every pod j listens on 7100 for 5 datagrams; pod i sends 5 to
# pod i+1 (its own rule denies them) and 5 to pod i+2 (allowed). So pod j
# gets exactly 5, all from pod j-2, if and only if each rule is its own
# pod's. Then the injectors: pod i sends 5 as pod i+8 to pod i+10 on 7200.
# (long timeouts: 48 senders one after another take seconds under the
# kernel lab's emulation, and more than 30 on debian-6.12 at 2026-12-03
# with a third guest beside the matrix's two: the last injectors' receivers
# had given up; a receiver that got its 5 ends at once, so only a failing
# run waits them out)
recv_ms=30000
[ -n "${PODINJECT_LAB:-}" ] && recv_ms=180000
for j in $(seq 0 $((NPODS - 1))); do
	in_ns "$(pod $j)" "$PINET" udp-recv 7100 5 $recv_ms >/tmp/$PREFIX$$.r$j &
done
for j in $(seq 0 7); do
	in_ns "$(pod $((j + 10)))" "$PINET" udp-recv 7200 5 $recv_ms >/tmp/$PREFIX$$.i$j &
done
listening=0
for j in $(seq 0 $((NPODS - 1))); do
	wait_udp_listen "$(pod $j)" 7100 >&2 && listening=$((listening + 1))
done
for j in $(seq 0 7); do
	wait_udp_listen "$(pod $((j + 10)))" 7200 >&2 && listening=$((listening + 1))
done
sent=0
for i in $(seq 0 $((NPODS - 1))); do
	s1=$(in_ns "$(pod $i)" "$PINET" udp-send "$(ip4 $((i + 1)))" 7100 5)
	s2=$(in_ns "$(pod $i)" "$PINET" udp-send "$(ip4 $((i + 2)))" 7100 5)
	[ "$s1/$s2" = "sent 5/sent 5" ] && sent=$((sent + 1))
done
for i in $(seq 0 7); do
	in_ns "$(pod $i)" "$PINET" udp-send --bind "$(ip4 $((i + 8)))" \
		"$(ip4 $((i + 10)))" 7200 5 >/dev/null
done
wait
expect_eq traffic_all_sent "$sent/$listening" "$NPODS/$((NPODS + 8))"
bad=0
for j in $(seq 0 $((NPODS - 1))); do
	want="received 5
from $(ip4 $((j + NPODS - 2))) count 5"
	[ "$(cat /tmp/$PREFIX$$.r$j)" = "$want" ] || {
		bad=$((bad + 1))
		echo "pod $j: $(tr '\n' ' ' </tmp/$PREFIX$$.r$j)" >&2
	}
done
expect_eq traffic_each_pod_under_its_own_policy "$bad" 0
denied=$("$PI" -N $N -j policy list | jq '[.[].packets] | unique')
expect_eq traffic_each_rule_counted_5 "$(echo $denied | tr -d ' ')" "[5]"
bad=0 what=
for j in $(seq 0 7); do
	want="received 5
from $(ip4 $((j + 8))) count 5"
	[ "$(cat /tmp/$PREFIX$$.i$j)" = "$want" ] || {
		bad=$((bad + 1))
		what="$what; pod $((j + 10)) from injector $j: $(tr '\n' ' ' </tmp/$PREFIX$$.i$j)"
	}
done
if [ "$bad" = 0 ]; then
	pass traffic_each_injector_speaks_as_its_target
else
	fail traffic_each_injector_speaks_as_its_target "$bad of 8 receivers did not get exactly 5 from the injector's target$what"
fi

# 4 proxy adds at once, one proxy (pod 12) for pods 8-11 (TCP only: the
# UDP above is not theirs), then the head's records (inject/head_roles),
# each written by its own command from the maps: the 8 injectors INJECT,
# the captured pods CAPTURED, the proxy INJECT and PROXY, none lost to
# another command's write
bg_pids=()
for i in 8 9 10 11; do
	"$PI" -N $N proxy add "$(pod 12)" --port 15001 --for "$(pod $i)" \
		--match tcp >/dev/null 2>&1 &
	bg_pids+=($!)
done
bg_wait "${bg_pids[@]}"
fails=$BG_FAILS
expect_eq proxy_adds_all_succeed "$fails" 0
bad=
for i in $(seq 0 7); do
	[ "$(head_roles $N "$(pod $i)")" = $((ROLE_KNOWN | 1)) ] || bad="$bad $i"
done
for i in 8 9 10 11; do
	[ "$(head_roles $N "$(pod $i)")" = $((ROLE_KNOWN | 2)) ] || bad="$bad $i"
done
[ "$(head_roles $N "$(pod 12)")" = $((ROLE_KNOWN | 1 | 8)) ] || bad="$bad 12"
expect_eq head_roles_each_its_own "${bad:-none}" none

# A command that cannot get the lock in time: "busy", exit 1, nothing made.
flock -x /sys/fs/bpf/podinject/$N -c 'sleep 3' &
holder=$!
sleep 0.3
out=$("$PI" -N $N -W 300 pod add ${PREFIX}x --ip 10.244.0.99 2>&1)
rc=$?
expect_eq busy_exit_code "$rc" 1
check busy_says_busy sh -c "echo '$out' | grep -q 'busy'"
check busy_no_namespace sh -c "! ip netns list | grep -q '^${PREFIX}x\\b'"
wait $holder
check busy_not_added sh -c "! $PI -N $N pod show ${PREFIX}x >/dev/null 2>&1"
# and a waiting command goes through once the holder lets go
flock -x /sys/fs/bpf/podinject/$N -c 'sleep 1' &
sleep 0.2
check wait_then_succeed "$PI" -N $N -W 5000 pod add ${PREFIX}x --ip 10.244.0.99
wait
"$PI" -N $N pod del ${PREFIX}x >/dev/null

# 16 pod dels at once.
bg_pids=()
for i in $(seq 0 $((NPODS - 1))); do
	"$PI" -N $N pod del "$(pod $i)" >/dev/null 2>&1 &
	bg_pids+=($!)
done
bg_wait "${bg_pids[@]}"
fails=$BG_FAILS
expect_eq dels_all_succeed "$fails" 0
expect_eq dels_no_pods_left "$("$PI" -N $N -j pod list | jq length)" 0
expect_eq dels_no_auth_left "$("$PI" -N $N -j inject list | jq length)" 0
expect_eq dels_no_rules_left "$("$PI" -N $N -j policy list | jq length)" 0
expect_eq dels_no_proxy_rules_left "$("$PI" -N $N -j proxy list | jq length)" 0
expect_eq dels_no_namespaces_left "$(ip netns list | grep -c "^${PREFIX}[pd]")" 0

# `node up` racing with readers: each sees "not up" or the whole node,
# never half of it ("incomplete").
R=${PREFIX}r
for k in 1 2 3 4; do
	( for i in $(seq 40); do "$PI" -N $R -W 5000 pod list 2>&1; done ) >/tmp/$PREFIX$$.race$k &
done
"$PI" -N $R node up >/dev/null
wait
expect_eq up_race_never_half "$(cat /tmp/$PREFIX$$.race* | grep -c incomplete)" 0
"$PI" -N $R node down >/dev/null

ids=$(node_prog_ids $N)
check down pi -N $N node down
check down_pins_gone test ! -e /sys/fs/bpf/podinject/$N
expect_eq down_no_links_left "$(links_of_progs $ids)" 0
rm -f /tmp/$PREFIX$$.*
