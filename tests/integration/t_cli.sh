#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Bad input: every mistake gets a clear "error:" line on stderr, exit 2 (or
# 1 for a failure of the system), and leaves nothing behind.
. "$(dirname "$0")/lib.sh"
require_root
EXPECT=50
PREFIX=cl-
N=cl-n

state() {	# what must not change: namespaces, pins, pods, rules, links
	ip netns list | awk '{print $1}' | grep "^$PREFIX" | sort | tr '\n' ' '
	ls -d /sys/fs/bpf/podinject 2>/dev/null
	ls -R /sys/fs/bpf/podinject/$N 2>/dev/null | tr '\n' ' '
	# counters move on their own (neighbour discovery): leave them out
	"$PI" -N $N -j pod list 2>/dev/null | jq -c 'if type == "array" then [.[] | del(.stats)] else . end'
	"$PI" -N $N -j policy list 2>/dev/null | jq -c 'if type == "array" then [.[] | del(.packets, .bytes)] else . end'
	# links of this node's programs only: other tests and benchmarks may
	# attach and detach their own meanwhile
	links_of_progs $(node_prog_ids $N) 0
}

# bad NAME WANT_RC ARGS...: runs podinject with ARGS, wants exit WANT_RC, an
# error line, and the state unchanged.
bad() {
	local name=$1 want=$2 before after err rc
	shift 2
	before=$(state)
	err=$("$PI" "$@" 2>&1 >/dev/null)
	rc=$?
	after=$(state)
	if [ "$rc" != "$want" ]; then
		fail "$name" "exit $rc, want $want ($err)"
	elif ! grep -q '^error: ' <<<"$err"; then
		fail "$name" "no error message: '$err'"
	elif [ "$before" != "$after" ]; then
		fail "$name" "left something behind"
	else
		pass "$name"
	fi
}

bad no_node_up 1 -N $N pod list
bad bad_node_name 2 -N BAD_NAME node show
bad unknown_object 2 -N $N frobnicate
bad unknown_command 2 -N $N pod frob
bad no_command 2 -N $N pod
bad up_missing_uplink 2 -N $N node up --uplink nosuchdev
check up_failed_netns_gone sh -c "! ip netns list | grep -qw $N"
bad up_bad_arg 2 -N $N node up --frob

check up node_up $N
check pod pi -N $N pod add cl-a --ip 10.244.0.10 --ip6 fd00::a

bad pod_name_upper 2 -N $N pod add Cl-b --ip 10.244.0.11
bad pod_name_long 2 -N $N pod add abcdefghijklm --ip 10.244.0.11
bad pod_name_dash 2 -N $N pod add -x --ip 10.244.0.11
bad pod_no_addr 2 -N $N pod add cl-b
bad pod_bad_ip 2 -N $N pod add cl-b --ip 300.1.1.1
bad pod_prefix_ip 2 -N $N pod add cl-b --ip 10.244.0.0/24
bad pod_v6_in_ip 2 -N $N pod add cl-b --ip fd00::b
bad pod_bad_ip6 2 -N $N pod add cl-b --ip6 fd00::zz
bad pod_bad_dev 2 -N $N pod add cl-b --ip 10.244.0.11 --dev tap
bad pod_missing_value 2 -N $N pod add cl-b --ip
bad pod_duplicate_name 2 -N $N pod add cl-a --ip 10.244.0.11
bad pod_duplicate_ip 2 -N $N pod add cl-b --ip 10.244.0.10
bad pod_duplicate_ip6 2 -N $N pod add cl-b --ip 10.244.0.11 --ip6 fd00::a
ip netns add cl-taken
bad pod_netns_taken 2 -N $N pod add cl-taken --ip 10.244.0.11
ip netns del cl-taken
if [ "$("$PI" -j features | jq .netkit)" = false ]; then
	# fails after the namespace was made: the undo must remove it
	bad pod_netkit_unsupported_undone 1 -N $N pod add cl-b --ip 10.244.0.11 --dev netkit
else
	skip pod_netkit_unsupported_undone "this kernel has netkit"
fi
bad pod_del_missing 2 -N $N pod del cl-zz
bad pod_show_missing 2 -N $N pod show cl-zz

bad policy_no_pod 2 -N $N policy add cl-zz deny to 10.0.0.0/8
bad policy_bad_action 2 -N $N policy add cl-a drop to 10.0.0.0/8
bad policy_bad_cidr 2 -N $N policy add cl-a deny to 10.0.0.0/33
bad policy_host_bits 2 -N $N policy add cl-a deny to 10.0.0.1/8
bad policy_bad_proto 2 -N $N policy add cl-a deny proto sctp
bad policy_port_zero 2 -N $N policy add cl-a deny proto tcp port 0
bad policy_port_big 2 -N $N policy add cl-a deny proto tcp port 70000
bad policy_port_backwards 2 -N $N policy add cl-a deny proto tcp port 90-80
bad policy_port_no_proto 2 -N $N policy add cl-a deny port 80
bad policy_from_on_egress 2 -N $N policy add cl-a egress deny from 10.0.0.0/8
bad policy_to_on_ingress 2 -N $N policy add cl-a ingress deny to 10.0.0.0/8
bad policy_bad_pos 2 -N $N policy add cl-a deny to 10.0.0.0/8 at 0
bad policy_del_bad_id 2 -N $N policy del cl-a x1
bad policy_del_missing_id 2 -N $N policy del cl-a 4242

# Errors are JSON under -j.
check json_error sh -c "$PI -N $N -j pod show cl-zz 2>/dev/null | jq -e '.error | test(\"no pod\")'"
check help_top "$PI" help
check help_pod "$PI" pod help
check help_policy "$PI" policy help
check help_node "$PI" node help
check help_features "$PI" features help
# --help (or -h) after any object, or after its command, is the object's
# help, exit 0: it was "unknown argument" or "unknown command", exit 2
bad=
for o in node pod policy ct inject proxy probe features metrics monitor apply export; do
	for a in "$o --help" "$o -h"; do
		# shellcheck disable=SC2086
		"$PI" $a >/dev/null 2>/tmp/tc$$.help && grep -q '^Usage: podinject' /tmp/tc$$.help || bad+=" '$a'"
	done
done
expect_eq help_flag_every_object "$bad" ""
"$PI" pod add x --ip 10.9.9.9 --help >/dev/null 2>/tmp/tc$$.help
expect_eq help_flag_after_command "$? $(grep -c '^Usage: podinject \[-N NODE\] pod add' /tmp/tc$$.help)" "0 1"
rm -f /tmp/tc$$.help

# Ordering: 'at 1' puts a rule first.
pi -N $N policy add cl-a deny to 10.1.0.0/16 >/dev/null
pi -N $N policy add cl-a allow to 10.1.2.0/24 at 1 >/dev/null
expect_eq policy_at_first "$(pi -N $N -j policy list cl-a | jq -r '.[0].action')" allow
