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

/* The pod's reference in `dir`, read as one 8-byte value: an edit flips
 * start, count and revision together, so two loads could pair the old
 * start with the new count. */
static __always_inline struct pi_policy_ref *policy_ref_of(__u32 pod_id,
							   __u32 dir,
							   struct pi_policy_ref *out)
{
	union {
		struct pi_policy_ref ref;
		__u64 word;
	} u;
	__u32 key = pod_id * 2 + dir;
	struct pi_policy_ref *ref;

	ref = bpf_map_lookup_elem(&policy_refs, &key);
	if (!ref) {
		__builtin_memset(out, 0, sizeof(*out));
		return NULL;
	}
	u.word = *(volatile const __u64 *)ref;
	*out = u.ref;
	return ref;
}

/* A walk retried this often under an edit that moves the range each time
 * gives up and denies: the pod's policy was changed four times in as many
 * walks, and no verdict read in between can be trusted. */
#define POLICY_WALK_TRIES	4

struct policy_verdict {
	__u32 action;		/* PI_ALLOW or PI_DENY */
	__u32 rule_id;		/* the deciding rule, 0 = none matched */
	__u32 rev;		/* of the reference the verdict was read at */
};

static __always_inline void rule_count(__u32 rule_id, __u32 len)
{
	struct pi_rule_stats *st;

	if (!rule_id)
		return;
	st = bpf_map_lookup_elem(&rule_stats, &rule_id);
	if (st) {
		st->packets++;
		st->bytes += len;
	}
}

struct policy_try {
	struct policy_walk w;
	struct pi_policy_ref *ref;
	__u64 word;		/* the reference the last walk was made on */
	__u32 stable;		/* the reference was the same after it */
	__u32 pad;
};

static long policy_try_one(__u32 i, void *ctx)
{
	union {
		struct pi_policy_ref ref;
		__u64 word;
	} u;
	struct policy_try *t = ctx;
	struct pi_policy_ref *ref = t->ref;

	if (!ref)
		return 1;
	if (i)
		t->word = __sync_fetch_and_add((__u64 *)ref, 0);
	u.word = t->word;
	t->w.start = u.ref.start;
	t->w.action = 0;
	t->w.rule_id = 0;
	if (u.ref.count)
		bpf_loop(u.ref.count, policy_walk_one, &t->w, 0);
	if (__sync_fetch_and_add((__u64 *)ref, 0) != u.word)
		return 0;
	t->stable = 1;
	return 1;
}

/*
 * The first matching rule of the pod's policy in `dir` for a packet whose
 * peer is `peer`, `proto`, destination `port`. The deciding rule's counters
 * are updated by `len` (when len is non-zero).
 *
 * A range is free for reuse from the moment the reference no longer points
 * at it, which may be while this walk still reads it. So the reference is
 * read again after the walk, with an atomic (ordered after the slot loads):
 * unchanged (the revision never repeats), the range stayed live for the
 * whole walk and no slot read can belong to another edit; changed, the
 * walk is done again on the new reference.
 */
static __always_inline void policy_decide(__u32 pod_id, __u32 dir,
					  __u32 family,
					  const struct pi_addr *peer,
					  __u8 proto, __u8 has_ports,
					  __u16 port, __u32 len,
					  struct policy_verdict *v)
{
	union {
		struct pi_policy_ref ref;
		__u64 word;
	} u;
	struct policy_try t = {};

	v->action = PI_ALLOW;
	v->rule_id = 0;
	t.ref = policy_ref_of(pod_id, dir, &u.ref);
	v->rev = u.ref.rev;
	if (!t.ref || !u.ref.count)
		return;
	t.word = u.word;
	t.w.family = family;
	t.w.peer = *peer;
	t.w.port = port;
	t.w.proto = proto;
	t.w.has_ports = has_ports;
	bpf_loop(POLICY_WALK_TRIES, policy_try_one, &t, 0);
	if (!t.stable) {
		v->action = PI_DENY;
		return;
	}
	u.word = t.word;
	v->rev = u.ref.rev;
	if (!t.w.action)
		return;
	v->action = t.w.action;
	v->rule_id = t.w.rule_id;
	if (len)
		rule_count(t.w.rule_id, len);
}

/* Returns PI_DENY when the pod's policy in `dir` denies the packet, with
 * the deciding rule's counters updated either way: the stateless decision
 * (the connection tracker, bpf/lib/ct.h, calls it for what it does not
 * track). */
static __always_inline int policy_check(__u32 pod_id, __u32 dir,
					const struct pkt *p, __u32 len)
{
	struct policy_verdict v;

	policy_decide(pod_id, dir, p->family,
		      dir == PI_DIR_EGRESS ? &p->daddr : &p->saddr, p->proto,
		      p->has_ports, p->dport, len, &v);
	return v.action;
}

#endif
