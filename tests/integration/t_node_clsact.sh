#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The single-node suite again, attached the way kernels without tcx get
# it: clsact qdiscs with direct-action cls_bpf filters. On this kernel tcx
# exists, so this is where the fallback runs on every test run.
# (Plain assignments: ones prefixed to `.` would be gone by the time the
# EXIT trap cleans up by PREFIX.)
PREFIX=nc-
EXPECT=62
NODE_ARGS="--attach clsact"
WANT_ATTACH=clsact
. "$(dirname "$0")/t_node.sh"
