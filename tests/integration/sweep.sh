#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# sweep.sh: removes what the integration suites of an earlier run left
# behind when that run was stopped by a signal no trap sees (SIGKILL, a
# machine stopped in mid-suite): their namespaces, the processes in them
# and their nodes' pins. A suite that found its own node still up from
# such a run failed as a whole ("node 'tq-x' is already up"). Every
# prefix a suite declares (PREFIX=...) is swept; prints what it removed.
# Run by tests/run.sh before the suites; never beside a running suite.
. "$(dirname "$0")/lib.sh"
trap - EXIT
[ "$(id -u)" = 0 ] || exit 0

prefixes=$(sed -n 's/^PREFIX=\(${PREFIX:-\)\{0,1\}\([a-z0-9]*-\)}\{0,1\}$/\2/p' \
	"$(dirname "$0")"/t_*.sh | sort -u)
for PREFIX in $prefixes; do
	left=$( { ip netns list | awk '{print $1}'
		  ls /sys/fs/bpf/podinject 2>/dev/null; } | grep "^$PREFIX" | sort -u)
	[ -n "$left" ] || continue
	echo $left
	cleanup_all
	# A host node of a namespace that is gone now (NAME@COOKIE) is not
	# any namespace's to take down: the next `node up` sweeps it, as
	# the CLI does for a user's.
	if ls /sys/fs/bpf/podinject 2>/dev/null | grep -q "^$PREFIX.*@"; then
		"$PI" -N ${PREFIX}sweep node up --host >/dev/null 2>&1 &&
			"$PI" -N ${PREFIX}sweep node down >/dev/null 2>&1
	fi
done
