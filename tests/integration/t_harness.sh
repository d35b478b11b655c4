#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The test runner itself: a run stopped by SIGKILL (a machine stopped in
# mid-suite: no trap runs) leaves its suite's node, pods, namespaces and
# processes behind; the next run removes them before any suite, so that
# the suite does not find its own node "already up" and fail as a whole
# (CI once failed 68 checks of t_probe so). The leftovers are made here
# as such a run leaves them, under t_node's names (ni-), with a host node
# of a namespace that is gone as a killed t_nodeid leaves one, and t_node
# is run after them through tests/run.sh.
. "$(dirname "$0")/lib.sh"
require_root
EXPECT=9
# No PREFIX of its own: the runner started below sweeps every suite's
# prefix, and this suite holds nothing while it runs.
V=ni-
T=$(mktemp -d)
SLEEPER=
trap 'kill $SLEEPER 2>/dev/null; bash "$ROOT/tests/integration/sweep.sh" >/dev/null; rm -rf "$T"' EXIT

# leave_behind: what a killed t_node leaves: its node, a pod, a process in
# the pod's namespace and a namespace the CLI did not make; and what a
# killed t_nodeid leaves: a host node of a namespace that is gone (its
# pins NAME@COOKIE, which no namespace's `node down` takes)
leave_behind() {
	node_up ${V}n &&
	pi -N ${V}n pod add ${V}a --ip 10.244.0.10 >/dev/null &&
	ip netns add ${V}x &&
	ip netns add ${V}h &&
	nsenter --net=/run/netns/${V}h "$PI" -N ${V}q node up --host >/dev/null &&
	ip netns del ${V}h &&
	{ ip netns exec ${V}a sleep 600 >/dev/null 2>&1 & SLEEPER=$!; }
}
left_of() {
	{ ip netns list | awk '{print $1}'; ls /sys/fs/bpf/podinject 2>/dev/null; } |
		grep "^$V" | sed 's/@[0-9]*$/@/' | sort -u | tr '\n' ' '
}

# not through check: its subshell would keep the sleeper's PID
if leave_behind; then pass left_made; else fail left_made "could not make them"; fi
expect_eq left_seen "$(left_of)" "${V}a ${V}n ${V}q@ ${V}x "
"$ROOT/tests/run.sh" -n none >"$T/none" 2>&1
expect_eq sweep_said "$(grep '^# removed' "$T/none" | sed 's/@[0-9]* /@ /')" \
	"# removed what an earlier run left: ${V}a ${V}n ${V}q@ ${V}x "
expect_eq sweep_left_nothing "$(left_of)" ""
# gone, or a zombie: the sleeper is this shell's child, not yet reaped
stopped() { [ ! -e /proc/$1 ] || grep -q '^[0-9]* ([^)]*) Z' /proc/$1/stat; }
check sweep_stopped_process stopped "$SLEEPER"
expect_eq sweep_ran_nothing "$(tail -n 1 "$T/none")" "0 passed, 0 failed, 0 skipped"

# The suite whose node was left up runs whole after it.
if leave_behind; then pass left_again; else fail left_again "could not make them"; fi
"$ROOT/tests/run.sh" -n t_node >"$T/node" 2>&1
expect_eq suite_after_leftovers "$(tail -n 1 "$T/node" | sed 's/^[0-9]* passed, //')" "0 failed, 0 skipped"
expect_eq suite_after_leftovers_left_nothing "$(left_of)" ""
