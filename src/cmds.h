/* SPDX-License-Identifier: GPL-2.0 */
#ifndef PODINJECT_CMDS_H
#define PODINJECT_CMDS_H

#include "state.h"

int do_node(int argc, char **argv);
int do_pod(int argc, char **argv);
int do_policy(int argc, char **argv);
int do_inject(int argc, char **argv);
int do_features(int argc, char **argv);
int do_proxy(int argc, char **argv);
int do_probe(int argc, char **argv);

/* Removes a pod and everything it owns; used by `pod del` and `node down`.
 * Keeps going past errors and returns the first. */
int pod_remove(struct pi_node *n, const struct pi_pod_info *pod);
/* Drops a pod's policy in both directions. */
int policy_clear_pod(struct pi_node *n, uint32_t pod_id);
/* Removes podinject's injection state that names this pod. */
int inject_forget_pod(struct pi_node *n, const struct pi_pod_info *pod);

#define POD_DEV_PREFIX	"pi-"
#define POD_NAME_MAX	12	/* "pi-" + name fits IFNAMSIZ */
#define GW4		"169.254.1.1"
#define GW6		"fe80::1"

#endif
