#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The probe suite again on nodes attached with clsact + cls_bpf, as on kernels
# without tcx.
NODE_ARGS="--attach clsact"
EXPECT=230
. "$(dirname "$0")/t_probe.sh"
