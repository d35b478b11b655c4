#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# 10 000 egress rules on one pod, as a user puts them there: the first
# 9 000 in one `apply`, then 1 000 more one by one through the CLI, each
# `policy add` on a pod that already holds 9 000 or more; and the 10 000th
# still decides:
#
#   pl-a 10.244.0.10 --(rules 1..9999: deny to 10.9.x.y/32, never matching;
#                       rule 10000: deny to pl-b udp 7300)--> pl-b 10.244.0.11
#
# The unit tests load 10 000 rules by writing the maps; this is the
# promise as a user meets it. Each `policy add` rewrites the pod's whole
# range (docs/datapath.md), so an add costs more the longer the list: the
# last 1 000 adds are the dearest ones (the suite takes about 35 s on the
# 2-core development host; all 10 000 one by one took 3.5 minutes of CI).
. "$(dirname "$0")/lib.sh"
require_root
EXPECT=17
PREFIX=pl-
N=pl-n
A=10.244.0.10
B=10.244.0.11

if [ -n "${PODINJECT_LAB:-}" ]; then
	# one CLI process per rule, each rewriting 9 000 or more: under
	# emulation they take minutes; the unit tests load 10 000 rules on
	# every kernel of the lab
	skip all "1 000 CLI calls on a 9 000-rule list take minutes under emulation (the host runs it)"
	exit 0
fi
check up node_up $N ${NODE_ARGS:-}
in_ns $N sysctl -qw net.ipv4.ip_forward=0 net.ipv6.conf.all.forwarding=0
check pod_a pi -N $N pod add pl-a --ip $A
check pod_b pi -N $N pod add pl-b --ip $B

doc=$(mktemp)
jq -n '{apiVersion: "podinject/v1", pods: {"pl-b": {}, "pl-a": {egress:
	[range(1; 9001) | {action: "deny", to: "10.9.\(. / 256 | floor).\(. % 256)/32"}]}}}' >"$doc"
check apply_9000 pi -N $N apply -f "$doc"
rm -f "$doc"
expect_num applied_9000 "$(pi -N $N -j policy list pl-a | jq length)" 9000
t0=$(now_ms)
failed=0
for i in $(seq 9001 9999); do
	pi -N $N policy add pl-a deny to 10.9.$((i / 256)).$((i % 256))/32 >/dev/null || failed=$((failed + 1))
done
last=$(pi -N $N -j policy add pl-a egress deny to $B/32 proto udp port 7300 | jq .id)
t1=$(now_ms)
echo "info: 1000 policy adds through the CLI onto 9000 rules took $(sub "$t1" "$t0") ms"
expect_num adds_all_succeeded "$failed" 0
list=$(pi -N $N -j policy list pl-a)
expect_num rules_listed "$(jq length <<<"$list")" 10000
expect_eq last_rule_is_10000th "$(jq -r '.[-1] | "\(.position) \(.id)"' <<<"$list")" "10000 $last"

rule_pk() { pi -N $N -j policy list pl-a | jq ".[] | select(.id == $1) | .packets"; }
udp_to_b() {	# udp_to_b PORT COUNT: "sent N, received M"
	local sent
	in_ns pl-b "$PINET" udp-recv "$1" "$2" 1500 >/tmp/pl$$.r &
	local r=$!
	wait_udp_listen pl-b "$1" >/dev/null || echo -n "no-listener "
	sent=$(in_ns pl-a "$PINET" udp-send $B "$1" "$2")
	wait $r
	echo "$sent, $(head -n 1 /tmp/pl$$.r)"
	rm -f /tmp/pl$$.r
}

# The 10 000th rule decides: its datagrams are dropped, each counted once
# by it; past all 10 000 the default allows.
pd0=$(pod_stat $N pl-a .drops.policy)
expect_eq rule_10000_denies "$(udp_to_b 7300 10)" "sent 10, received 0"
expect_num rule_10000_counted "$(rule_pk "$last")" 10
expect_num rule_10000_drops "$(sub "$(pod_stat $N pl-a .drops.policy)" "$pd0")" 10
expect_eq past_10000_allowed "$(udp_to_b 7301 10)" "sent 10, received 10"

# A rule put first (`at 1`) in front of all of them decides instead.
first=$(pi -N $N -j policy add pl-a egress allow to $B/32 proto udp port 7300 at 1 | jq .id)
expect_eq at_1_allows "$(udp_to_b 7300 10)" "sent 10, received 10"
expect_eq at_1_counted "$(rule_pk "$first") $(rule_pk "$last")" "10 10"

ids=$(node_prog_ids $N)
expect_hooked hooked_before_down "$(pi -N $N -j node show | jq -r .attach)" $ids
check down pi -N $N node down
expect_unhooked no_links_left $ids
