/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the library's parts call of each other. Pods are the core; the
 * features (policy, conntrack, injection, proxy, XDP) each register their
 * part of a pod's joining and leaving in lib/feature.c, and pod add, adopt
 * and removal (a pod deleted or a failed add) run them all through one
 * path: the pod code names no feature.
 */
#ifndef PODINJECT_LIB_H
#define PODINJECT_LIB_H

#include "state.h"
#include "cls.h"

#define POD_DEV_PREFIX	"pi-"
#define POD_NAME_MAX	12	/* "pi-" + name fits IFNAMSIZ */
#define GW4		PI_POD_GW4
#define GW6		PI_POD_GW6

/* A feature's part of a pod's life on the node. A pod joins (added or
 * adopted) by reset_pod, then its records and the datapath's programs,
 * then enter_pod; it goes by leave_pod, then its programs and records.
 * Any hook may be NULL. */
struct pi_feature {
	const char *name;
	/* Before the pod is recorded or has any program: whatever the
	 * feature keeps under the pod's id or ifindex is a former pod's
	 * (teardown races a packet in flight, a removal half done) and
	 * must not become this pod's. 0 or -errno: the pod is refused. */
	int (*reset_pod)(struct pi_node *n, const struct pi_pod_info *pod);
	/* The pod is recorded and the datapath's programs are on its
	 * device; pod_ns is its namespace, and we are in the node's. The
	 * feature adds its own part, 0 or -errno having undone it; a later
	 * feature's failure runs leave_pod. */
	int (*enter_pod)(struct pi_node *n, struct pi_pod_info *pod, int pod_ns);
	/* The pod goes: whatever the feature holds for it (its programs,
	 * map entries naming the pod, other pods' state about it) goes.
	 * Must tolerate a pod whose devices or namespace are gone, and
	 * one enter_pod never ran for. */
	void (*leave_pod)(struct pi_node *n, const struct pi_pod_info *pod);
	/* pod check: brings what the feature keeps for the pod up to date
	 * with what is attached now, 0 or -errno (reported). */
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

/* The bulk path of apply (lib/apply.c): `rules`, ids included, become the
 * pod's policy in `dir` in one compile and one reference flip. */
int policy_replace(struct pi_node *n, const struct pi_pod_info *pod,
		   uint32_t dir, const struct pi_rule *rules, uint32_t count);
/* Removes the record of the node's last apply (lib/apply.c), for a node
 * that goes. */
void apply_record_forget(const char *pin_dir);
/* The node's monitors' run directory, at `node down`: its lock file and
 * the files of monitors that end with the node. */
void monitor_run_forget(const char *pin_dir);
void probe_forget_node(struct pi_node *n);

/* Every pod's references (PI_DP_MAX_PODS * 2, key pod_id * 2 + dir), and the
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
