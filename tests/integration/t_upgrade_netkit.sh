#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The upgrade suite with netkit pods: the node's programs on each pair's
# peer and primary netkit links, and c's injection as a through the netkit
# fallback (--path fallback on every kernel, so that a's guard, its untag
# program and the guard's tail call slot are upgraded too). Needs netkit
# (6.7+): runs in the kernel lab, SKIPs as a whole on a kernel without.
# (Plain assignments: ones prefixed to `.` would be gone by the time the
# EXIT trap cleans up by PREFIX.)
PREFIX=uk-
EXPECT=91
WANT_DEV=netkit
POD_ARGS="--dev netkit"
INJECT_ARGS="--path fallback"
. "$(dirname "$0")/t_upgrade.sh"
