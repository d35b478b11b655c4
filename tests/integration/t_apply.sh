#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Desired state from a file: `apply -f FILE` sets rules, grants, a proxy
# rule and the tracker's timeouts as the file says (the list commands and
# real traffic agree), `export | apply -f -` and a second apply change
# nothing (counters go on), a bad line is refused with its place and
# reason and changes nothing, --dry-run changes nothing, and a change that
# fails half-way (the second pod's rules do not fit the classifier's
# pools) undoes the first pod's; the record that spares a re-apply its
# parse never hides a change made by other commands.
#
#   ta-a 10.244.21.10  ta-b .11  ta-p .12 (a proxy)  adopted ns/ta-x .50
#   node ta-n
. "$(dirname "$0")/lib.sh"
require_root
EXPECT=103
PREFIX=ta-
N=ta-n
A=10.244.21.10
B=10.244.21.11
P=10.244.21.12
X=10.244.21.50
T=$(mktemp -d /tmp/ta.XXXXXX)

cleanup_all
check up node_up $N ${NODE_ARGS:-}
check pod_add_a pi -N $N pod add ta-a --ip $A
check pod_add_b pi -N $N pod add ta-b --ip $B
check pod_add_p pi -N $N pod add ta-p --ip $P
ip netns add ta-x
ip -n $N link add ta-xh type veth peer name eth0 netns ta-x
ip -n ta-x addr add $X/32 dev eth0
# no IPv6 on it: its router solicitations (again and again, further and
# further apart) would reach its egress rule's counter at any time
in_ns ta-x sysctl -qw net.ipv6.conf.eth0.disable_ipv6=1
ip -n ta-x link set eth0 up
ip -n ta-x link set lo up
ip -n $N link set ta-xh up
# as a CNI leaves it: a gateway route with a permanent neighbour
ip -n ta-x neigh add 169.254.1.1 lladdr "$(ip -n $N -j link show ta-xh | jq -r '.[0].address')" dev eth0 nud permanent
ip -n ta-x route add default via 169.254.1.1 dev eth0 onlink
check pod_adopt_x pi -N $N pod adopt ns/ta-x --netns ta-x --dev ta-xh

cat >"$T/state1.json" <<EOF
{
  "apiVersion": "podinject/v1",
  "pods": {
    "ta-a": {
      "egress": [
        {"action": "deny", "to": "$B/32", "proto": "tcp", "port": 7201},
        {"action": "allow", "to": "$B/32", "proto": "tcp", "port": "7200-7210"},
        {"action": "deny", "to": "$P/32", "proto": "icmp"}
      ],
      "ingress": [
        {"action": "deny", "from": "10.99.0.0/16"}
      ],
      "inject": [{"as": "ta-b", "path": "fallback"}]
    },
    "ta-b": {
      "ingress": [{"action": "deny", "from": "$X/32", "proto": "tcp", "port": 7205}],
      "proxy": {"by": "ta-p", "port": 15001, "match": "tcp", "dports": [7300, "7400-7401"]}
    },
    "ns/ta-x": {
      "egress": [{"action": "allow", "proto": "any"}]
    }
  },
  "conntrack": {"timeouts": {"udp": 33, "tcp-closing": 7}}
}
EOF

rules_of() {	# rules_of POD: "dir pos action addr proto port" lines, one line
	pi -N $N -j policy list "$1" | jq -r '[.[] | "\(.direction) \(.position) \(.action) \(.to // .from) \(.proto) \(.port)"] | join("; ")'
}
rule_field() {	# rule_field POD DIR POS FIELD
	pi -N $N -j policy list "$1" | jq -r ".[] | select(.direction == \"$2\" and .position == $3) | .$4"
}
export_of() { pi -N $N export; }
connect() {	# connect FROM-NS DST PORT: "ok" or what pinet said
	local out
	in_ns ta-b "$PINET" tcp-server "$3" --count 1 --timeout 3000 >/dev/null 2>&1 &
	wait_tcp_listen ta-b "$3" >/dev/null || { echo "no listener"; return; }
	out=$(in_ns "$1" "$PINET" tcp-connect --timeout 1000 "$2" "$3" 2>&1)
	wait 2>/dev/null
	case $out in *done*|*connected*) echo ok ;; *) echo "${out:-nothing}" ;; esac
}

# ---- apply --------------------------------------------------------------
check apply_state1 pi -N $N apply -f "$T/state1.json"
expect_eq rules_a "$(rules_of ta-a)" "egress 1 deny $B/32 tcp 7201; egress 2 allow $B/32 tcp 7200-7210; egress 3 deny $P/32 icmp any; ingress 1 deny 10.99.0.0/16 any any"
expect_eq rules_b "$(rules_of ta-b)" "ingress 1 deny $X/32 tcp 7205"
expect_eq rules_adopted_x "$(rules_of ns/ta-x)" "egress 1 allow any any any"
# the proxy's grant takes the kernel's automatic path (fast where the
# kernel has BPF_F_EGRESS: our lab kernel), as `proxy add` gives it
auto=$("$ROOT/tests/known-features.sh" inject_path || pi -j features | jq -r .inject_path)
expect_eq grants "$(pi -N $N -j inject list | jq -r '[.[] | "\(.injector)>\(.as) \(.path)"] | sort | join(" ")')" "ta-a>ta-b fallback ta-p>ta-b $auto"
expect_eq proxy_rule "$(pi -N $N -j proxy list | jq -r '.[] | "\(.pod) \(.proxy) \(.port) \(.proto) \(.dports)"')" "ta-b ta-p 15001 tcp 7300,7400-7401"
expect_eq timeouts "$(pi -N $N -j ct timeout | jq -c '[.udp, ."tcp-closing", ."tcp-opening"]')" "[33,7,60]"

# the rules decide real traffic as the file says
expect_eq tcp_7201_denied "$(connect ta-a $B 7201)" timeout
expect_eq tcp_7202_allowed "$(connect ta-a $B 7202)" ok
check_fails ping_p_denied in_ns ta-a ping -c 1 -W 1 $P
check ping_b_allowed in_ns ta-a ping -c 1 -W 2 $B
expect_eq adopted_x_tcp_7205_denied_at_b "$(connect ta-x $B 7205)" timeout
# counters: the ICMP deny to ta-p saw one ping
deny_pk=$(rule_field ta-a egress 3 packets)
deny_id=$(rule_field ta-a egress 3 id)
expect_num deny_rule_counted "$deny_pk" 1

# ---- export | apply, and the same file again, change nothing --------------
before=$(export_of)
out=$(pi -N $N export | pi -N $N apply -f - 2>&1); rc=$?
expect_eq export_apply_noop "$rc:$out" "0:"
expect_eq export_apply_node_unchanged "$(export_of)" "$before"
out=$(pi -N $N apply -f "$T/state1.json" 2>&1); rc=$?
expect_eq reapply_noop "$rc:$out" "0:"
expect_eq reapply_keeps_rule_id "$(rule_field ta-a egress 3 id)" "$deny_id"
expect_eq reapply_keeps_counter "$(rule_field ta-a egress 3 packets)" "$deny_pk"
check_fails ping_p_still_denied in_ns ta-a ping -c 1 -W 1 $P
expect_eq counter_continues "$(rule_field ta-a egress 3 packets)" "$((deny_pk + 1))"
deny_pk=$(rule_field ta-a egress 3 packets)

# ---- a changed file: only what differs changes ------------------------------
# ta-a: rule 2 goes, a rule comes in front; the deny stays (its id and
# counter with it); ingress, ta-b, the adopted pod's rules are unchanged;
# the grant changes path, the proxy goes, udp's timeout goes back
jq --arg p "$P/32" '.pods["ta-a"].egress = [{"action": "deny", "to": "10.98.0.0/16"}, .pods["ta-a"].egress[0], .pods["ta-a"].egress[2]]
	| .pods["ta-a"].inject = [{"as": "ta-p", "path": "fallback"}]
	| del(.pods["ta-b"].proxy) | del(.conntrack.timeouts.udp)' "$T/state1.json" >"$T/state2.json"
before=$(export_of)
plan=$(pi -N $N apply -f "$T/state2.json" --dry-run 2>&1); rc=$?
expect_eq dry_run_plan "$rc:$(grep -c '^[~+-] ' <<<"$plan"):$(grep -c 'pod ta-a egress: 3 rules -> 3 (2 kept, 1 new, 1 removed)' <<<"$plan")" "0:5:1"
expect_eq dry_run_changes_nothing "$(export_of)" "$before"
out=$(pi -N $N apply -f "$T/state2.json" 2>&1); rc=$?
expect_eq apply_state2 "$rc:$(tail -n 1 <<<"$out")" "0:5 changes applied"
expect_eq state2_rules_a "$(rules_of ta-a)" "egress 1 deny 10.98.0.0/16 any any; egress 2 deny $B/32 tcp 7201; egress 3 deny $P/32 icmp any; ingress 1 deny 10.99.0.0/16 any any"
expect_eq state2_kept_id_and_counter "$(rule_field ta-a egress 3 id) $(rule_field ta-a egress 3 packets)" "$deny_id $deny_pk"
expect_eq state2_grants "$(pi -N $N -j inject list | jq -r '[.[] | "\(.injector)>\(.as)"] | sort | join(" ")')" "ta-a>ta-p"
expect_eq state2_no_proxy "$(pi -N $N -j proxy list | jq length)" 0
expect_eq state2_timeouts "$(pi -N $N -j ct timeout | jq -c '[.udp, ."tcp-closing"]')" "[60,7]"
expect_eq state2_tcp_7202_allowed_by_default "$(connect ta-a $B 7202)" ok

# ---- bad lines: refused with their place and reason, nothing changes ---------
bad() {	# bad NAME FILE WHERE-AND-REASON [APPLY-FLAG...]
	local err rc before
	before=$(export_of)
	err=$(pi -N $N apply -f "$2" "${@:4}" 2>&1 >/dev/null); rc=$?
	if [ $rc != 2 ]; then
		fail "$1" "exit $rc, want 2 ($err)"
	elif ! grep -qF -- "$3" <<<"$err"; then
		fail "$1" "error '$err' does not say '$3'"
	elif [ "$(export_of)" != "$before" ]; then
		fail "$1" "the node changed"
	else
		pass "$1"
	fi
}
jq '.pods["ta-zz"] = {"egress": []}' "$T/state2.json" >"$T/bad1.json"
bad bad_unknown_pod "$T/bad1.json" "pods[\"ta-zz\"]: no pod 'ta-zz' on node $N"
jq '.pods["ta-a"].egress[2].to = "10.244.21.300/32"' "$T/state1.json" >"$T/bad2.json"
bad bad_cidr_position "$T/bad2.json" "pods[\"ta-a\"].egress[2].to: invalid CIDR '10.244.21.300/32'"
jq '.pods["ta-b"].ingress[0].dport = 80' "$T/state1.json" >"$T/bad3.json"
bad bad_field "$T/bad3.json" "pods[\"ta-b\"].ingress[0]: unknown field 'dport'"
jq '.pods["ta-a"].egress[1].port = 80 | .pods["ta-a"].egress[1].proto = "icmp"' "$T/state1.json" >"$T/bad4.json"
bad bad_port_without_tcp "$T/bad4.json" "pods[\"ta-a\"].egress[1].port: 'port' needs proto tcp or udp"
jq '.pods["ta-a"].inject = [{"as": "ta-nope"}]' "$T/state1.json" >"$T/bad5.json"
bad bad_grant_target "$T/bad5.json" "pods[\"ta-a\"].inject[0].as: no pod 'ta-nope'"
printf '{"apiVersion": "podinject/v1", "pods": {\n "ta-a": {"egress": [}\n' >"$T/bad6.json"
bad bad_json_line "$T/bad6.json" "line 2 column"
jq '.apiVersion = "podinject/v9"' "$T/state1.json" >"$T/bad7.json"
bad bad_version "$T/bad7.json" 'apiVersion: want "podinject/v1"'

# ---- one document for many nodes: --skip-absent ---------------------------
# state2 (the node's state now) plus another node's pod, a grant as it and
# a proxy rule by it: refused as it is, and with --skip-absent the same as
# state2, so nothing changes
jq '.pods["ta-zz"] = {"egress": [{"action": "deny"}]}
	| .pods["ta-a"].inject += [{"as": "ta-zz"}]
	| .pods["ta-b"].proxy = {"by": "ta-zz", "port": 15001}' "$T/state2.json" >"$T/fleet.json"
bad skip_absent_needed "$T/fleet.json" "no pod 'ta-zz'"
before=$(export_of)
out=$(pi -N $N apply -f "$T/fleet.json" --skip-absent 2>&1); rc=$?
expect_eq skip_absent_nothing_to_do "$rc:$out" "0:"
expect_eq skip_absent_node_unchanged "$(export_of)" "$before"
# the record of that apply (below) is of one with --skip-absent: without
# it the same file is refused still
bad skip_absent_not_remembered "$T/fleet.json" "no pod 'ta-zz'"

# another node's pods are checked all the same: a document valid on one
# node is valid on each (their rules, grants and proxy rules)
jq '.pods["ta-zz"] = {"egress": [{"action": "allow", "to": "10.1.2.300/32"}]}' "$T/state2.json" >"$T/fleet_bad1.json"
bad skip_absent_rules_checked "$T/fleet_bad1.json" "pods[\"ta-zz\"].egress[0].to: invalid CIDR" --skip-absent
jq '.pods["ta-zz"] = {"inject": [{"as": "ta-a", "path": "slow"}]}' "$T/state2.json" >"$T/fleet_bad2.json"
bad skip_absent_grants_checked "$T/fleet_bad2.json" "pods[\"ta-zz\"].inject[0].path: want fast" --skip-absent
jq '.pods["ta-a"].inject += [{"as": "ta-zy", "path": "slower"}]' "$T/state2.json" >"$T/fleet_bad4.json"
bad skip_absent_grant_target_checked "$T/fleet_bad4.json" ".path: want fast" --skip-absent
jq '.pods["ta-b"].proxy = {"by": "ta-zz", "port": 0}' "$T/state2.json" >"$T/fleet_bad3.json"
bad skip_absent_proxy_checked "$T/fleet_bad3.json" "pods[\"ta-b\"].proxy.port" --skip-absent
# the checks between pods too, by the names written: an absent pod's
# grant as itself, a grant twice to an absent pod, an absent pod as its
# own proxy (before, each was let through where the pods were absent and
# refused on the node that has them: that node got none of the document)
jq '.pods["ta-zz"] = {"inject": [{"as": "ta-zz"}]}' "$T/state2.json" >"$T/fleet_bad5.json"
bad skip_absent_self_grant_checked "$T/fleet_bad5.json" "pods[\"ta-zz\"].inject[0].as: pod 'ta-zz' cannot inject as itself" --skip-absent
jq '.pods["ta-a"].inject += [{"as": "ta-zy"}, {"as": "ta-zy"}]' "$T/state2.json" >"$T/fleet_bad6.json"
bad skip_absent_grant_twice_checked "$T/fleet_bad6.json" "pod 'ta-zy' is granted twice" --skip-absent
jq '.pods["ta-zz"] = {"proxy": {"by": "ta-zz", "port": 15001}}' "$T/state2.json" >"$T/fleet_bad7.json"
bad skip_absent_own_proxy_checked "$T/fleet_bad7.json" "pods[\"ta-zz\"].proxy.by: a pod cannot be its own proxy" --skip-absent

# ---- a failure half-way is undone ------------------------------------------
# ta-a's egress (the first pod) changes, then ta-b's 32 768 rules of their
# own port ranges and prefixes outgrow the classifier's chunk pool
# (ENOSPC, after ta-a's flip): ta-a's change is undone, with its ids
awk -v a="$B" 'BEGIN {
	srand(20261203)
	printf "{\"apiVersion\": \"podinject/v1\", \"pods\": {\"ta-a\": {\"egress\": [{\"action\": \"deny\", \"to\": \"%s/32\"}]},\n", a
	printf "\"ta-b\": {\"egress\": ["
	for (i = 0; i < 32768; i++) {
		lo = int(rand() * 65535) + 1; hi = lo + int(rand() * 30000); if (hi > 65535) hi = 65535
		plen = int(rand() * 9) + 24
		o3 = int(rand() * 256); o4 = plen == 32 ? int(rand() * 256) : 0
		printf "%s{\"action\": \"allow\", \"to\": \"10.%d.%d.%d/%d\", \"proto\": \"tcp\", \"port\": \"%d-%d\"}", i ? "," : "", int(rand() * 256), o3, o4, plen, lo, hi
	}
	printf "]}}}\n"
}' | jq --slurpfile s "$T/state2.json" '.conntrack = $s[0].conntrack' >"$T/big.json"
# (CIDRs under /24 with host bits clear: only /32 gets a fourth octet)
before=$(export_of)
ids_before=$(pi -N $N -j policy list | jq -c '[.[] | [.pod, .direction, .id, .packets]]')
out=$(pi -N $N apply -f "$T/big.json" 2>"$T/err"); rc=$?
err=$(cat "$T/err")
expect_eq rollback_fails "$rc" 1
expect_eq rollback_says_where "$(grep -c 'pods\["ta-b"\].egress: 32768 rules cannot be published' <<<"$err") $(grep -c 'pool is full' <<<"$err")" "1 1"
# (the first pod's change was made, and reported, before the failure)
expect_eq rollback_first_pod_was_changed "$(grep -c '^~ pod ta-a egress' <<<"$out") $(grep -c 'undone' <<<"$err")" "1 1"
expect_eq rollback_node_unchanged "$(export_of)" "$before"
expect_eq rollback_ids_and_counters "$(pi -N $N -j policy list | jq -c '[.[] | [.pod, .direction, .id, .packets]]')" "$ids_before"
expect_eq rollback_rules_decide "$(connect ta-a $B 7201)" timeout

# ---- an empty document clears the node's state (pods stay) -----------------
echo '{"apiVersion": "podinject/v1"}' >"$T/empty.json"
check apply_empty pi -N $N apply -f "$T/empty.json"
expect_eq empty_state "$(pi -N $N -j policy list | jq length) $(pi -N $N -j inject list | jq length) $(pi -N $N -j pod list | jq length)" "0 0 4"

# ---- a proxy whose grant the document also names, with a path ------------------
# (the proxy rule brings a grant on the kernel's path; the document's path
# is set after it, and stays on the next apply and through export)
jq '.pods["ta-b"].proxy = {"by": "ta-p", "port": 15001} | .pods["ta-p"] = {"inject": [{"as": "ta-b", "path": "fast"}]}' \
	"$T/empty.json" >"$T/proxy.json"
check proxy_and_grant_apply pi -N $N apply -f "$T/proxy.json"
expect_eq proxy_grant_path "$(pi -N $N -j inject list | jq -r '[.[] | "\(.injector)>\(.as) \(.path)"] | join(" ")') $(pi -N $N -j proxy list | jq length)" "ta-p>ta-b fast 1"
out=$(pi -N $N apply -f "$T/proxy.json" 2>&1; pi -N $N export | pi -N $N apply -f - 2>&1)
expect_eq proxy_grant_reapply_noop "$out" ""
# A proxy rule's grant goes with the rule: `inject deny` refuses to take
# it alone (the rule would stay without its upstream, and export then
# apply would bring it back), and "all of the injector's" keeps it.
out=$(pi -N $N inject deny ta-p --as ta-b 2>&1); rc=$?
expect_eq proxy_grant_deny_refused "$rc $(grep -c 'proxy del ta-p --for ta-b' <<<"$out") $(pi -N $N -j inject list | jq length)" "2 1 1"
pi -N $N inject allow ta-p --as ta-a >/dev/null
out=$(pi -N $N inject deny ta-p 2>&1); rc=$?
expect_eq proxy_grant_deny_all_kept "$rc $(grep -c 'kept 1 authorisation' <<<"$out") $(pi -N $N -j inject list | jq -r '[.[] | "\(.injector)>\(.as)"] | join(" ")')" "0 1 ta-p>ta-b"
out=$(pi -N $N inject deny ta-p 2>&1); rc=$?
expect_eq proxy_grant_deny_all_only_proxy "$rc $(grep -c 'only for its proxy rules' <<<"$out") $(pi -N $N -j inject list | jq length)" "2 1 1"
out=$(pi -N $N export | pi -N $N apply -f - 2>&1)
expect_eq proxy_grant_deny_reapply_noop "$out" ""
# A proxy rule's grant moved to another path by hand (`inject allow
# --path`), with a document that names no path for it: the apply puts it
# back on the kernel's, as on a node the document made afresh (before, the
# apply planned nothing and the drift stayed, in its export too)
jq '.pods["ta-b"].proxy = {"by": "ta-p", "port": 15001}' "$T/empty.json" >"$T/proxy_only.json"
pi -N $N apply -f "$T/proxy_only.json" >/dev/null
other=fast
[ "$auto" = fast ] && other=fallback
pi -N $N inject allow ta-p --as ta-b --path $other >/dev/null
out=$(pi -N $N apply -f "$T/proxy_only.json" 2>&1); rc=$?
expect_eq proxy_grant_drift_undone "$rc $(tail -n 1 <<<"$out") $(pi -N $N -j inject list | jq -r '[.[] | "\(.injector)>\(.as) \(.path)"] | join(" ")')" "0 1 change applied ta-p>ta-b $auto"
expect_eq proxy_grant_drift_export "$(pi -N $N export | jq -c '.pods["ta-p"].inject // [] | length')" 0

# ---- a failed apply gives back a grant a proxy rule it made had taken ------
# ta-p may inject as ta-b on the fallback path. The document proxies ta-b
# by ta-p (the rule takes that grant for its own), then ta-g by ta-p;
# ta-g's namespace is gone, so that step fails and everything is undone:
# the grant must be there after it, on its path (the undo of the rule took
# it away, and a rule brought it back on the kernel's path).
check apply_empty_again pi -N $N apply -f "$T/empty.json"
check grant_before_failed_apply pi -N $N inject allow ta-p --as ta-b --path fallback
pi -N $N pod add ta-g --ip 10.244.21.13 >/dev/null && ip netns del ta-g
jq '.pods["ta-b"].proxy = {"by": "ta-p", "port": 15001} |
    .pods["ta-p"] = {"inject": [{"as": "ta-b", "path": "fallback"}]} |
    .pods["ta-g"].proxy = {"by": "ta-p", "port": 15001}' "$T/empty.json" >"$T/gone.json"
before=$(export_of)
out=$(pi -N $N apply -f "$T/gone.json" 2>&1); rc=$?
got="$rc $(grep -c '^+ pod ta-b proxy by ta-p' <<<"$out") $(pi -N $N -j inject list | jq -r '[.[] | "\(.injector)>\(.as) \(.path)"] | join(" ")') $(pi -N $N -j proxy list | jq length)"
expect_eq failed_apply_grant_kept "$got" "1 1 ta-p>ta-b fallback 0"
expect_eq failed_apply_node_unchanged "$(export_of)" "$before"
pi -N $N pod del ta-g >/dev/null 2>&1

# ---- a failed apply whose undo fails too says so ----------------------------
# ta-b is proxied by ta-q, whose namespace is then gone (the runtime
# deleted it); the document moves ta-b to ta-p and proxies ta-g, gone too:
# that step fails, and the undo cannot make ta-b's rule by ta-q again. The
# node is not as it was, and the apply must not say it is.
check apply_empty_before_undo pi -N $N apply -f "$T/empty.json"
pi -N $N pod add ta-q --ip 10.244.21.14 >/dev/null
check undo_proxy_before pi -N $N proxy add ta-q --for ta-b --port 15001
ip netns del ta-q
pi -N $N pod add ta-g --ip 10.244.21.13 >/dev/null && ip netns del ta-g
jq '.pods["ta-b"].proxy = {"by": "ta-p", "port": 15001} |
    .pods["ta-g"].proxy = {"by": "ta-p", "port": 15001}' "$T/empty.json" >"$T/undo_fails.json"
out=$(pi -N $N apply -f "$T/undo_fails.json" 2>&1); rc=$?
expect_eq failed_undo_exit "$rc" 1
expect_eq failed_undo_said "$(grep -c 'could not be undone' <<<"$out") $(grep -c 'is as it was' <<<"$out")" "1 0"
pi -N $N pod del ta-g >/dev/null 2>&1
pi -N $N pod del ta-q >/dev/null 2>&1
check apply_empty_after_undo pi -N $N apply -f "$T/empty.json"

# ---- YAML: the same document ----------------------------------------------
cat >"$T/state3.yaml" <<EOF
apiVersion: podinject/v1
pods:
  ta-a:
    egress:
      - {action: deny, to: $B/32, proto: tcp, port: 7201}
      - action: allow
        to: 10.244.0.0/16
        port: "7000-7999"
        proto: udp
    inject:
      - as: ta-b
        path: fallback
  ns/ta-x:
    ingress: [{action: allow, from: 10.244.21.0/24}]
conntrack:
  timeouts:
    icmp: 12
EOF
cat >"$T/state3.json" <<EOF
{"apiVersion": "podinject/v1", "pods": {
  "ta-a": {"egress": [{"action": "deny", "to": "$B/32", "proto": "tcp", "port": 7201},
                      {"action": "allow", "to": "10.244.0.0/16", "port": "7000-7999", "proto": "udp"}],
           "inject": [{"as": "ta-b", "path": "fallback"}]},
  "ns/ta-x": {"ingress": [{"action": "allow", "from": "10.244.21.0/24"}]}},
 "conntrack": {"timeouts": {"icmp": 12}}}
EOF
check yaml_apply pi -N $N apply -f "$T/state3.yaml"
from_yaml=$(export_of)
pi -N $N apply -f "$T/empty.json" >/dev/null
pi -N $N apply -f "$T/state3.json" >/dev/null
expect_eq yaml_same_as_json "$from_yaml" "$(export_of)"
expect_eq yaml_rules "$(rules_of ta-a)" "egress 1 deny $B/32 tcp 7201; egress 2 allow 10.244.0.0/16 udp 7000-7999"
sed 's|10.244.0.0/16|10.244.0.0/33|' "$T/state3.yaml" >"$T/bad.yaml"
bad bad_yaml_cidr "$T/bad.yaml" "pods[\"ta-a\"].egress[1].to: invalid CIDR '10.244.0.0/33'"
# a file of two documents: refused, not the first applied and the second
# dropped with the rules it named (before, only the first part was taken)
{ cat "$T/state3.yaml"; printf -- '---\npods:\n  ns/ta-x:\n    egress: [{action: deny, to: 10.9.9.9/32}]\n'; } >"$T/two.yaml"
bad yaml_two_documents "$T/two.yaml" "line 18: a second document: the state is one document"
# and bytes after the document's end that are not YAML at all
{ cat "$T/state3.yaml"; printf -- '...\ngarbage: [unclosed\n'; } >"$T/tail.yaml"
bad yaml_garbage_after_end "$T/tail.yaml" "after the document:"
# a document larger than any state (64 MiB; a ConfigMap holds 1): refused
# before it is read, from a file or from stdin (before, it was read whole
# and parsed under the node's lock, every CNI call waiting)
truncate -s 65M "$T/big.json"
bad doc_too_large_file "$T/big.json" "a state document is at most 64 MiB"
rm -f "$T/big.json"
before=$(export_of)
out=$(head -c 70M /dev/zero | pi -N $N apply -f - 2>&1); rc=$?
expect_eq doc_too_large_stdin "$rc $(grep -c 'more than 64 MiB' <<<"$out") $([ "$(export_of)" = "$before" ] && echo same)" "2 1 same"
# a document ended with '...' and nothing after it is still one
{ cat "$T/state3.yaml"; printf -- '...\n'; } >"$T/ended.yaml"
check yaml_one_document_ended pi -N $N apply -f "$T/ended.yaml"

# ---- the last apply's record --------------------------------------------
# An apply that succeeds leaves a record (the document, its file's
# identity, the node's state after it); the same file again on a node that
# reads the same is done without a parse, and once the file's last change
# is 2 s old, without reading it. Anything done to the node in between by
# other commands makes the next apply of that document a full one, which
# undoes it; so does a file written in place, and a torn record. The
# document here is a copy made 3 s before, so its identity is trusted.
R=/run/podinject/apply/$(basename "$(node_pin_dir $N)")
D=$T/settled.json
cp "$T/state1.json" "$D"
sleep 3
pi -N $N apply -f "$D" >/dev/null
state1=$(export_of)
expect_eq record_kept "$(test -s "$R" && echo yes)" yes
out=$(pi -N $N apply -f "$D" 2>&1); rc=$?
expect_eq record_reapply_noop "$rc:$out" "0:"
pi -N $N policy add ta-a egress deny to 10.97.0.0/16 at 1 >/dev/null
out=$(pi -N $N apply -f "$D" 2>&1); rc=$?
expect_eq record_after_policy_add "$rc:$(tail -n 1 <<<"$out")" "0:1 change applied"
expect_eq record_after_policy_add_node "$(export_of)" "$state1"
pi -N $N inject deny ta-a --as ta-b >/dev/null
out=$(pi -N $N apply -f "$D" 2>&1); rc=$?
expect_eq record_after_inject_deny "$rc:$(tail -n 1 <<<"$out")" "0:1 change applied"
pi -N $N ct timeout udp 99 >/dev/null
out=$(pi -N $N apply -f "$D" --dry-run 2>&1); rc=$?
expect_eq record_dry_run_sees_timeout "$rc:$(grep -c 'udp' <<<"$out")" "0:1"
out=$(pi -N $N apply -f "$D" 2>&1); rc=$?
expect_eq record_after_ct_timeout "$rc:$(tail -n 1 <<<"$out")" "0:1 change applied"
# ta-b's one ingress rule swapped for another in two edits (one rule again,
# maybe in the same slots): the policy's revision tells
old_id=$(rule_field ta-b ingress 1 id)
pi -N $N policy add ta-b ingress deny from 10.95.0.0/16 at 1 >/dev/null
pi -N $N policy del ta-b ingress "$old_id" >/dev/null
out=$(pi -N $N apply -f "$D" 2>&1); rc=$?
expect_eq record_after_rule_swapped "$rc:$(tail -n 1 <<<"$out"):$(rules_of ta-b)" "0:1 change applied:ingress 1 deny $X/32 tcp 7205"
# the pod made again under its name: its ingress rule and the proxy rule
# for it come back (the grant as it too)
pi -N $N pod del ta-b >/dev/null
pi -N $N pod add ta-b --ip $B >/dev/null
out=$(pi -N $N apply -f "$D" 2>&1); rc=$?
expect_eq record_after_pod_made_again "$rc:$(export_of)" "0:$state1"
# the file written in place, its size unchanged (7201 -> 7202 in ta-a's
# first rule): its identity moved, so it is read, and the change made
sed 's/"port": 7201/"port": 7202/' "$D" >"$T/moved.json"
dd if="$T/moved.json" of="$D" conv=notrunc status=none
cmp -s "$D" "$T/moved.json" && [ "$(stat -c %s "$D")" = "$(stat -c %s "$T/state1.json")" ] ||
	fail record_file_written_in_place "the test's rewrite changed the size"
out=$(pi -N $N apply -f "$D" 2>&1); rc=$?
expect_eq record_file_written_in_place "$rc:$(tail -n 1 <<<"$out"):$(rules_of ta-a | cut -d';' -f1)" "0:1 change applied:egress 1 deny $B/32 tcp 7202"
# a torn record: a full apply, and a good record after it
head -c 200 "$R" >"$R.torn" && mv "$R.torn" "$R"
pi -N $N policy add ta-b ingress allow from 10.96.0.0/16 >/dev/null
out=$(pi -N $N apply -f "$D" 2>&1); rc=$?
expect_eq record_torn "$rc:$(tail -n 1 <<<"$out")" "0:1 change applied"
expect_eq record_rewritten "$(test "$(stat -c %s "$R")" -gt 200 && echo yes)" yes
# the same bytes from stdin: the record's document, no change
out=$(pi -N $N apply -f - <"$D" 2>&1); rc=$?
expect_eq record_same_bytes_from_stdin "$rc:$out" "0:"
pi -N $N apply -f "$T/state1.json" >/dev/null

# ---- grants as the node keeps them: one entry per address of the pod
# injected as. 24 dual-stack pods, each granted as every other: 552 grants
# in 1 104 entries, more than the node's 1 024: refused before anything
# changes, saying so (before, a grant half way failed, "Argument list too
# long", and the changes made were undone)
for i in $(seq 0 23); do
	pi -N $N pod add ta-g$i --ip 10.244.22.$((10 + i)) --ip6 fd00:22::$((10 + i)) >/dev/null
done
jq -n '{apiVersion: "podinject/v1", pods: ([range(24) as $i | {key: "ta-g\($i)",
	value: {inject: [range(24) | select(. != $i) | {as: "ta-g\(.)"}]}}] | from_entries)}' >"$T/grants.json"
bad grants_past_the_entries "$T/grants.json" "the grants take 1104 of the node's 1024 entries for them"
for i in $(seq 0 23); do pi -N $N pod del ta-g$i >/dev/null; done

check down pi -N $N node down
expect_eq record_gone_with_node "$(test -e "$R" && echo left || echo gone)" gone
rm -rf "$T"
cleanup_all
