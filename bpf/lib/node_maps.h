/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The node's state as the datapath sees it: pods, endpoints, the node's
 * configuration and the per-pod counters. Every program of a node works on
 * the same maps: the node skeleton creates and pins them, other objects
 * (bpf/xdp.bpf.c) reuse the pinned ones before they load.
 */
#ifndef PODINJECT_BPF_NODE_MAPS_H
#define PODINJECT_BPF_NODE_MAPS_H

#include "parse.h"
#include "monitor.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PI_DP_MAX_PODS);
	__type(key, __u32);		/* host-side ifindex */
	__type(value, struct pi_pod);
} pods SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PI_MAX_ENDPOINTS);
	__type(key, struct pi_endpoint_key);
	__type(value, struct pi_endpoint);
} endpoints SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pi_node_config);
} node_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PI_DP_MAX_PODS);
	__type(key, __u32);
	__type(value, struct pi_dp_pod_stats);
} pod_stats SEC(".maps");

static __always_inline struct pi_dp_pod_stats *stats_of(__u32 pod_id)
{
	return bpf_map_lookup_elem(&pod_stats, &pod_id);
}

static __always_inline void count_drop(__u32 pod_id,
				       enum pi_dp_drop_reason reason)
{
	struct pi_dp_pod_stats *st = stats_of(pod_id);

	if (st && reason < PI_DP_DROP_MAX)
		st->drops[reason]++;
}

/* A drop at `hook` (enum pi_dp_mon_hook): counted on the pod, and an
 * event when a monitor wants drops. */
static __always_inline int drop(struct __sk_buff *skb, __u32 pod_id,
				enum pi_dp_drop_reason reason, __u32 hook)
{
	count_drop(pod_id, reason);
	return drop_at(skb, pod_id, reason, hook);
}

static __always_inline void count_ingress(__u32 pod_id, __u32 len)
{
	struct pi_dp_pod_stats *st = stats_of(pod_id);

	if (st) {
		st->ingress_packets++;
		st->ingress_bytes += len;
	}
}

static __always_inline struct pi_endpoint *lookup_endpoint(const struct pkt *p)
{
	struct pi_endpoint_key key = {
		.family = p->family,
		.addr = p->daddr,
	};

	return bpf_map_lookup_elem(&endpoints, &key);
}

#endif
