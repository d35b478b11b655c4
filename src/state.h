/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A node's state is its pinned BPF objects under /sys/fs/bpf/podinject/NODE:
 * the maps hold pods, endpoints, policy and counters, so every command reads
 * the truth from the kernel and no state file can go stale.
 */
#ifndef PODINJECT_STATE_H
#define PODINJECT_STATE_H

#include <limits.h>
#include <stdbool.h>
#include "podinject_abi.h"
#include "attach.h"

#define PI_PIN_ROOT	"/sys/fs/bpf/podinject"

extern const char *node_name;		/* -N/--node, PODINJECT_NODE, "node" */

enum node_map {
	M_PODS, M_ENDPOINTS, M_NODE_CONFIG, M_POD_STATS, M_RULES,
	M_POLICY_REFS, M_RULE_STATS, M__COUNT,
};
enum node_prog {
	P_POD_EGRESS, P_POD_INGRESS, P_UPLINK_INGRESS, P_POD_EGRESS_NETKIT,
	P_POD_INGRESS_NETKIT, P__COUNT,
};

extern const char *const node_map_names[M__COUNT];
extern const char *const node_prog_names[P__COUNT];

struct node {
	char name[PI_NAME_LEN];
	char pin_dir[PATH_MAX];
	int netns_fd;
	int maps[M__COUNT];
	int progs[P__COUNT];
	struct pi_node_config cfg;
};

enum pi_node_flags_ext {
	PI_NODE_OWNS_NETNS = 1 << 8,	/* node up made the namespace */
};

static inline enum pi_attach_mode node_attach_mode(const struct node *n)
{
	return n->cfg.flags & PI_NODE_TCX ? PI_ATTACH_TCX : PI_ATTACH_CLSACT;
}

int ensure_bpffs(void);
/* Opens a node that is up: maps, programs, namespace. Reports its own
 * errors; returns 0 or -errno. */
int node_open(struct node *n);
void node_close(struct node *n);
int node_enter(const struct node *n, int *saved);
int node_save_config(struct node *n);
void node_pin_path(const struct node *n, char *buf, size_t len,
		   const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Pods */
int pod_find(const struct node *n, const char *name, struct pi_pod *pod);
/* Calls fn for every pod, in id order; stops on a non-zero return. */
int pod_for_each(const struct node *n,
		 int (*fn)(const struct node *n, const struct pi_pod *pod,
			   void *ctx), void *ctx);
/* The pod's name, or "ifindex-N" for a device that is no pod (any more). */
void pod_name_by_ifindex(const struct node *n, uint32_t ifindex, char *buf,
			 size_t len);
int pod_stats_sum(const struct node *n, uint32_t pod_id,
		  struct pi_pod_stats *out);

#endif
