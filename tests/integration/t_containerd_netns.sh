#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# t_containerd with containerd in a network namespace of its own (a kind
# node, a nested runtime), after a host node of the plugin's node name was
# made in the root namespace: every CNI ADD and DEL there must work on a
# node of the runtime's namespace, and leave the root namespace's node
# alone (issue 24 bug 2: they failed with "Invalid cross-device link", and
# the failed DELs leaked the sandboxes).
EXPECT=35
export RUNTIME_NETNS=cn-rt PREFIX=cn-
. "$(dirname "$0")/t_containerd.sh"
