#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# A node holds PI_MAX_PODS (1024) pods: veth pairs made with `ip -batch`,
# their pod sides in two namespaces, adopted one by one; each gets its own
# id, the first and the last pod still talk through the datapath, one more
# is refused and changes nothing, and the node's BPF memory is reported.
#
#   sc-n (node): sc0 ... sc1023 <-> p0 ... p1022 in sc-pods, p1023 in sc-last
source "$(dirname "$0")/lib.sh"
require_root
EXPECT=17
PREFIX=sc-
N=${PREFIX}n
MAX=1024
cleanup_all

ip4() { echo "10.250.$(($1 / 250)).$(($1 % 250 + 1))"; }

check node_up node_up $N
ip netns exec $N sysctl -qw net.ipv4.ip_forward=0
ip netns add ${PREFIX}pods
ip netns add ${PREFIX}last
batch=$(mktemp) podside=$(mktemp) last=$(mktemp)
for i in $(seq 0 $MAX); do
	ns=${PREFIX}pods
	[ $i = $((MAX - 1)) ] && ns=${PREFIX}last
	echo "link add sc$i type veth peer name p$i netns $ns" >>"$batch"
	echo "link set sc$i up" >>"$batch"
	echo "route add $(ip4 $i)/32 dev sc$i" >>"$batch"
	if [ $ns = ${PREFIX}pods ]; then f=$podside; else f=$last; fi
	echo "addr add $(ip4 $i)/32 dev p$i" >>"$f"
	echo "link set p$i up" >>"$f"
done
# iproute2 6.1's batch mode opens the namespace file of each `netns NAME`
# and keeps it open: with the common soft limit of 1024 open files the
# 1 020th pair failed (the lab's shell has it; so would a CI runner's)
ip_batch() { (ulimit -n 8192 2>/dev/null || ulimit -Sn "$(ulimit -Hn)"; ip "$@"); }
check make_pairs ip_batch -n $N -batch "$batch"
check pod_sides ip_batch -n ${PREFIX}pods -batch "$podside"
check last_side ip_batch -n ${PREFIX}last -batch "$last"
rm -f "$batch" "$podside" "$last"
# pod 0 sends through its gateway, the node side of its pair
mac=$(ip netns exec $N cat /sys/class/net/sc0/address)
ip -n ${PREFIX}pods neigh add 169.254.1.1 lladdr "$mac" dev p0 nud permanent
ip -n ${PREFIX}pods route add 10.250.0.0/16 via 169.254.1.1 dev p0 onlink src "$(ip4 0)"

# Two at a time, as a runtime's concurrent ADDs come: the node's lock
# orders them, and each call's start-up (reading the node's pins) runs
# beside the other's work.
adopt_every_other() {
	local i ns f=0
	for ((i = $1; i < MAX; i += 2)); do
		ns=${PREFIX}pods
		[ $i = $((MAX - 1)) ] && ns=${PREFIX}last
		"$PI" -N $N pod adopt "scale/pod-$i" --netns $ns --dev sc$i \
			>/dev/null 2>&1 || f=$((f + 1))
	done
	echo $f
}
start=$(date +%s)
adopt_every_other 0 >/tmp/$PREFIX$$.f0 &
adopt_every_other 1 >/tmp/$PREFIX$$.f1 &
wait
fails=$(($(cat /tmp/$PREFIX$$.f0) + $(cat /tmp/$PREFIX$$.f1)))
rm -f /tmp/$PREFIX$$.f0 /tmp/$PREFIX$$.f1
echo "adopted $MAX pods in $(($(date +%s) - start)) s" >&2
expect_eq adopt_all "$fails" 0
list=$("$PI" -N $N -j pod list)
expect_eq pods_listed "$(echo "$list" | jq length)" $MAX
expect_eq ids_distinct "$(echo "$list" | jq '[.[].id] | unique | length')" $MAX
expect_eq ids_range "$(echo "$list" | jq '[.[].id] | max')" $((MAX - 1))

# one more: no room, exit 1, nothing changed
before=$(ls /sys/fs/bpf/podinject/$N | wc -l)
"$PI" -N $N pod adopt scale/one-more --netns ${PREFIX}pods --dev sc$MAX >/dev/null 2>&1
expect_eq one_more_refused "$?" 1
expect_eq one_more_left_nothing "$(ls /sys/fs/bpf/podinject/$N | wc -l)/$("$PI" -N $N -j pod list | jq length)" "$before/$MAX"

# The first and the last pod through the datapath, counted by a rule.
check rule pi -N $N policy add scale/pod-0 egress allow to "$(ip4 $((MAX - 1)))/32" proto udp port 7000
in_ns ${PREFIX}last "$PINET" udp-recv 7000 5 3000 >/tmp/$PREFIX$$.r &
sleep 0.3
in_ns ${PREFIX}pods "$PINET" udp-send --bind "$(ip4 0)" "$(ip4 $((MAX - 1)))" 7000 5 >/dev/null
wait
expect_eq first_to_last "$(head -n 1 /tmp/$PREFIX$$.r)" "received 5"
expect_eq first_to_last_counted "$("$PI" -N $N -j policy list scale/pod-0 | jq '.[0].packets')" 5

# What the node's datapath takes in kernel memory, all pods in: one
# listing of every map with its pins (one bpftool run per pinned file took
# 80 s, the node having two pins for each of its 1 024 pods).
mem=$(bpftool -j -f map show | jq --arg d "/sys/fs/bpf/podinject/$N/" \
	'[.[] | select(any(.pinned[]?; startswith($d))) | .bytes_memlock] | add // 0')
echo "node BPF map memory with $MAX pods: $((mem / 1024)) KiB" >&2
check memory_reported test "$mem" -gt 0
pass "memory_kib_$((mem / 1024))"

ids=$(node_prog_ids $N)
check down pi -N $N node down
expect_eq down_no_links_left "$(links_of_progs $ids)" 0
ip netns del ${PREFIX}pods
ip netns del ${PREFIX}last
rm -f /tmp/$PREFIX$$.*
