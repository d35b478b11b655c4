#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# t_upgrade from the last release, v0.4 (ABI 7): the step each ABI change
# ships (lib/upgrade.c migrations[]) run on its own, from a node of the
# version before, under the same traffic and checks. (The steps from ABI 4,
# 5 and 6 run in t_upgrade, chained from v0.1.)
PREFIX=u4-
EXPECT=93
OLD_REV=v0.4
. "$(dirname "$0")/t_upgrade.sh"
