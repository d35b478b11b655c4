/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Ordered allow/deny rules. The first rule that matches decides; with no
 * match the packet is allowed. The rules are walked with bpf_loop() so that
 * a policy of thousands of rules costs no verifier time and one program
 * serves every policy size. The matcher itself is shared with userspace
 * (include/podinject_rule.h).
 */
#ifndef PODINJECT_BPF_POLICY_H
#define PODINJECT_BPF_POLICY_H

#include "parse.h"
#include "podinject_rule.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PI_MAX_RULES);
	__type(key, __u32);
	__type(value, struct pi_rule);
} rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PI_MAX_PODS * 2);
	__type(key, __u32);
	__type(value, struct pi_policy_ref);
} policy_refs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PI_MAX_RULE_IDS);
	__type(key, __u32);
	__type(value, struct pi_rule_stats);
} rule_stats SEC(".maps");

struct policy_walk {
	struct pi_addr peer;	/* destination (egress) or source (ingress) */
	__u32 family;
	__u32 start;
	__u16 port;		/* destination port in both directions */
	__u8 proto;
	__u8 has_ports;
	__u8 action;		/* of the matching rule, 0 = none matched */
	__u8 pad[3];
	__u32 rule_id;
};

static long policy_walk_one(__u32 i, void *ctx)
{
	struct policy_walk *w = ctx;
	__u32 slot = w->start + i;
	struct pi_rule *r;

	r = bpf_map_lookup_elem(&rules, &slot);
	if (!r)
		return 1;
	if (!pi_rule_matches(r, w->family, &w->peer, w->proto, w->has_ports,
			     w->port))
		return 0;
	w->action = r->action;
	w->rule_id = r->id;
	return 1;
}

/* Returns PI_DENY when the pod's policy in `dir` denies the packet, with
 * the deciding rule's counters updated either way. */
static __always_inline int policy_check(__u32 pod_id, __u32 dir,
					const struct pkt *p, __u32 len)
{
	struct pi_policy_ref *ref;
	struct pi_rule_stats *st;
	struct policy_walk w = {};
	__u32 key = pod_id * 2 + dir;

	ref = bpf_map_lookup_elem(&policy_refs, &key);
	if (!ref || !ref->count)
		return PI_ALLOW;
	w.family = p->family;
	w.peer = dir == PI_DIR_EGRESS ? p->daddr : p->saddr;
	w.start = ref->start;
	w.port = p->dport;
	w.proto = p->proto;
	w.has_ports = p->has_ports;
	bpf_loop(ref->count, policy_walk_one, &w, 0);
	if (!w.action)
		return PI_ALLOW;
	st = bpf_map_lookup_elem(&rule_stats, &w.rule_id);
	if (st) {
		st->packets++;
		st->bytes += len;
	}
	return w.action;
}

#endif
