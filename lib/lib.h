/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the library's parts call of each other. Pods are the core; the
 * features (policy, injection, proxy, XDP) each register one teardown in
 * lib/feature.c, and pod removal, for a pod deleted or a failed add, runs
 * them all through one path: the pod code names no feature.
 */
#ifndef PODINJECT_LIB_H
#define PODINJECT_LIB_H

#include "state.h"
#include "cls.h"

#define POD_DEV_PREFIX	"pi-"
#define POD_NAME_MAX	12	/* "pi-" + name fits IFNAMSIZ */
#define GW4		"169.254.1.1"
#define GW6		"fe80::1"

/* A feature's part of a pod's removal: whatever it holds for the pod (its
 * programs, map entries naming the pod, other pods' state about it) goes.
 * Must tolerate a pod whose devices or namespace are gone. */
struct pi_feature {
	const char *name;
	void (*forget_pod)(struct pi_node *n, const struct pi_pod_info *pod);
	/* pod check: brings what the feature keeps for the pod up to date
	 * with what is attached now, 0 or -errno (reported). May be NULL. */
	int (*check_pod)(struct pi_node *n, const struct pi_pod_info *pod);
};

/* In teardown order: first what refers to the pod from elsewhere. */
extern const struct pi_feature *const pi_features[];

/* Removes a pod and everything it owns; used by pod del and node down.
 * Keeps going past errors and returns the first. */
int pod_remove(struct pi_node *n, const struct pi_pod_info *pod);

/* 0 when handle `n` may change the node (it holds the node's lock
 * alone), else -EBADF, logged as refused for `what`: every public call
 * that changes a node begins with it. */
int node_require_write(const struct pi_node *n, const char *what);

/* Drops a pod's policy in both directions (a new pod starts clean). */
int policy_clear_pod(struct pi_node *n, uint32_t pod_id);
/* The bulk path of apply (lib/apply.c): `rules`, ids included, become the
 * pod's policy in `dir` in one compile and one reference flip. */
int policy_replace(struct pi_node *n, uint32_t pod_id, uint32_t dir,
		   const struct pi_rule *rules, uint32_t count);
/* Every pod's references (PI_MAX_PODS * 2, key pod_id * 2 + dir), and the
 * rules one of them names. */
int policy_read_all(const struct pi_node *n, struct pi_policy_ref *refs);
int policy_read_rules(const struct pi_node *n, const struct pi_policy_ref *ref,
		      struct pi_rule *out);
/* Sets the counters of rule ids about to be handed out to zero. */
int policy_zero_counters(const struct pi_node *n, const uint32_t *ids,
			 uint32_t count);
/* The node's maps the classifier is published into and read from. */
struct cls_maps policy_cls_maps(const struct pi_node *n);

#endif
