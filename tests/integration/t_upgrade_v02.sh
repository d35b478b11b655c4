#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# t_upgrade from the last release, v0.2 (ABI 5): the step each ABI change
# ships (lib/upgrade.c migrations[]) run on its own, from a node of the
# version before, under the same traffic and checks.
PREFIX=u2-
EXPECT=87
OLD_REV=v0.2
. "$(dirname "$0")/t_upgrade.sh"
