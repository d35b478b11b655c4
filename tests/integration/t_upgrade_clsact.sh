#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The upgrade suite on a node attached the way kernels without tcx get
# it: clsact filters, replaced at the same priority and handle.
# (Plain assignments: ones prefixed to `.` would be gone by the time the
# EXIT trap cleans up by PREFIX.)
PREFIX=uc-
EXPECT=99
NODE_ARGS="--attach clsact"
WANT_ATTACH=clsact
. "$(dirname "$0")/t_upgrade.sh"
