#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The upgrade suite on a node made with --xdp: the pods' XDP ACLs on
# their eth0 are swapped too (XDP_FLAGS_REPLACE naming the program there),
# and held by links from then on (xdp_held: v0.1 attached them by netlink).
# (Plain assignments: ones prefixed to `.` would be gone by the time the
# EXIT trap cleans up by PREFIX.)
PREFIX=ux-
EXPECT=96
NODE_ARGS="--xdp"
WANT_XDP=1
. "$(dirname "$0")/t_upgrade.sh"
