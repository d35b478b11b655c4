#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The injection suite again on a node attached with clsact + cls_bpf, as on
# kernels without tcx: injection takes filter priority 1, ahead of another
# agent's filter and the datapath's.
NODE_ARGS="--attach clsact"
EXPECT=57
. "$(dirname "$0")/t_inject.sh"
