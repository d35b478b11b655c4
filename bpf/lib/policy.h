/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Ordered allow/deny rules. The first rule that matches decides; with no
 * match the packet is allowed. A packet is decided by the classifier the
 * library compiles from the pod's rules (include/podinject_abi.h, lib/cls.c):
 * an LPM trie lookup gives the rules whose CIDR covers the peer's address,
 * a hash lookup and a binary search over port intervals the rules whose
 * protocol and ports match, and the lowest position set in both vectors
 * is the first matching rule. Its cost grows with the policy's size only
 * by one AND per 1024 rules. The lookup steps on the vectors are shared
 * with userspace (include/podinject_cls.h), and so is the rule matcher that
 * defines what the classifier computes (include/podinject_rule.h).
 */
#ifndef PODINJECT_BPF_POLICY_H
#define PODINJECT_BPF_POLICY_H

#include "parse.h"
#include "podinject_cls.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PI_MAX_RULES);
	__type(key, __u32);
	__type(value, struct pi_dp_rule);
} rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PI_DP_MAX_PODS * 2);
	__type(key, __u32);
	__type(value, struct pi_policy_ref);
} policy_refs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PI_MAX_RULE_IDS);
	__type(key, __u32);
	__type(value, struct pi_rule_stats);
} rule_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PI_MAX_RULES + 1);
	__type(key, __u32);
	__type(value, struct pi_cls_head);
} cls_heads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, PI_CLS_ADDRS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct pi_cls_addr_key);
	__type(value, __u32);
} cls_addrs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PI_CLS_L4S);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct pi_cls_l4_key);
	__type(value, struct pi_cls_l4);
} cls_l4 SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PI_CLS_PORTS);
	__type(key, __u32);
	__type(value, struct pi_cls_port);
} cls_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PI_CLS_CLASSES);
	__type(key, __u32);
	__type(value, struct pi_cls_class);
} cls_classes SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PI_CLS_CHUNKS);
	__type(key, __u32);
	__type(value, struct pi_cls_chunk);
} cls_chunks SEC(".maps");

/* A lookup's state and keys, in a per-CPU scratch value rather than on
 * the stack: the programs' frames (the tracker's among them) leave the
 * callbacks too little of the 512 bytes on 6.1, which counts every frame
 * of the chain in 32-byte steps. tc and XDP programs do not interleave on
 * one CPU (softirq, or bottom halves disabled), so one lookup at a time
 * uses it (docs/datapath.md). */
struct cls_work {
	struct pi_cls_addr_key addr;
	struct pi_cls_l4_key l4;
	__u32 aclass;		/* the address class */
	__u32 lclass;		/* the L4 class */
	__u32 pos;		/* the first position set in both, or ~0 */
	__u32 off;		/* the port search: intervals [off + lo, off + hi) */
	__u32 lo;
	__u32 hi;
	__u32 port;
	__u32 both;		/* chunks not empty in both classes, not yet seen */
	__u32 ia;		/* the two classes' chunks being ANDed */
	__u32 ib;
	__u32 slot;		/* a key */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cls_work);
} cls_scratch SEC(".maps");

/* the scratch's key, off the stack too */
static const __u32 cls_zero = 0;

struct policy_walk {
	struct pi_dp_addr peer;	/* destination (egress) or source (ingress) */
	__u32 family;
	__u32 start;
	__u16 port;		/* destination port in both directions */
	__u8 proto;
	__u8 has_ports;
	__u8 action;		/* of the matching rule, 0 = none matched */
	__u8 pad[3];
	__u32 rule_id;
};

/* A binary search for the port interval holding `port`: the last start
 * not above it. At most 2 * 32768 + 1 intervals: 17 steps. */
#define CLS_PORT_STEPS	17

static long cls_port_step(__u32 i, void *ctx)
{
	struct cls_work *c = bpf_map_lookup_elem(&cls_scratch, &cls_zero);
	struct pi_cls_port *iv;
	__u32 mid;

	if (!c || c->hi - c->lo <= 1)
		return 1;
	mid = c->lo + (c->hi - c->lo) / 2;
	c->slot = c->off + mid;
	iv = bpf_map_lookup_elem(&cls_ports, &c->slot);
	if (!iv)
		return 1;
	if (iv->start <= c->port)
		c->lo = mid;
	else
		c->hi = mid;
	return 0;
}

/* The lowest chunk not empty in both classes, ANDed; called once per such
 * chunk at most, lowest first. */
static long cls_scan_one(__u32 i, void *ctx)
{
	struct cls_work *c = bpf_map_lookup_elem(&cls_scratch, &cls_zero);
	struct pi_cls_class *ca, *cl;
	struct pi_cls_chunk *a, *b;
	__u32 k;
	int bit;

	if (!c || !c->both)
		return 1;
	k = pi_cls_ctz(c->both) & (PI_CLS_MAX_CHUNKS - 1);
	c->both &= c->both - 1;
	ca = bpf_map_lookup_elem(&cls_classes, &c->aclass);
	cl = bpf_map_lookup_elem(&cls_classes, &c->lclass);
	if (!ca || !cl)
		return 1;
	c->ia = ca->chunk[k];
	c->ib = cl->chunk[k];
	a = bpf_map_lookup_elem(&cls_chunks, &c->ia);
	b = bpf_map_lookup_elem(&cls_chunks, &c->ib);
	if (!a || !b)
		return 1;
	bit = pi_cls_chunk_first(a, b);
	if (bit < 0)
		return 0;
	c->pos = k * PI_CLS_CHUNK_RULES + bit;
	return 1;
}

/* The first rule of the policy whose rules start at w->start that matches
 * the walk's packet: w->action and w->rule_id, left 0 when none does. A
 * policy without its compiled form (never published so) denies. */
static __always_inline void cls_decide(struct policy_walk *w)
{
	struct cls_work *c = bpf_map_lookup_elem(&cls_scratch, &cls_zero);
	struct pi_cls_class *ca, *cl;
	struct pi_cls_head *h;
	struct pi_cls_l4 *l4;
	struct pi_dp_rule *r;
	__u32 *aclass, nchunks;

	if (!c)
		return;
	h = bpf_map_lookup_elem(&cls_heads, &w->start);
	if (!h || !h->nchunks) {
		w->action = PI_DP_DENY;
		return;
	}
	c->pos = ~0U;
	c->addr.prefixlen = 64 + 128;
	c->addr.gen = h->gen;
	c->addr.family = w->family;
	c->addr.addr = w->peer;
	c->l4.gen = h->gen;
	c->l4.proto = pi_cls_proto_key(w->family, w->proto);
	nchunks = h->nchunks;
	aclass = bpf_map_lookup_elem(&cls_addrs, &c->addr);
	if (!aclass)
		return;
	l4 = bpf_map_lookup_elem(&cls_l4, &c->l4);
	if (!l4) {
		c->l4.proto = PI_CLS_PROTO_OTHER;
		l4 = bpf_map_lookup_elem(&cls_l4, &c->l4);
		if (!l4)
			return;
	}
	c->aclass = *aclass;
	if (w->has_ports) {
		struct pi_cls_port *iv;

		c->off = l4->port_off;
		c->lo = 0;
		c->hi = l4->nports;
		c->port = w->port;
		bpf_loop(CLS_PORT_STEPS, cls_port_step, NULL, 0);
		c->slot = c->off + c->lo;
		iv = bpf_map_lookup_elem(&cls_ports, &c->slot);
		if (!iv)
			return;
		c->lclass = iv->cls;
	} else {
		c->lclass = l4->noport_class;
	}
	ca = bpf_map_lookup_elem(&cls_classes, &c->aclass);
	cl = bpf_map_lookup_elem(&cls_classes, &c->lclass);
	if (!ca || !cl)
		return;
	c->both = ca->mask & cl->mask;
	if (c->both)
		bpf_loop(nchunks, cls_scan_one, NULL, 0);
	if (c->pos == ~0U)
		return;
	c->slot = w->start + c->pos;
	r = bpf_map_lookup_elem(&rules, &c->slot);
	if (!r)
		return;
	w->action = r->action;
	w->rule_id = r->id;
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
	__u32 action;		/* PI_DP_ALLOW or PI_DP_DENY */
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

static __always_inline long policy_try_one(__u32 i, void *ctx)
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
		cls_decide(&t->w);
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
 * A range (rules, classes, chunks, ports) is free for reuse from the moment
 * the reference no longer points at it, which may be while this lookup
 * still reads it. So the reference is
 * read again after the walk, with an atomic (ordered after the slot loads):
 * unchanged (the revision never repeats), the range stayed live for the
 * whole walk and no slot read can belong to another edit; changed, the
 * walk is done again on the new reference.
 */
static __always_inline void policy_decide(__u32 pod_id, __u32 dir,
					  __u32 family,
					  const struct pi_dp_addr *peer,
					  __u8 proto, __u8 has_ports,
					  __u16 port, __u32 len,
					  struct policy_verdict *v)
{
	union {
		struct pi_policy_ref ref;
		__u64 word;
	} u;
	struct policy_try t = {};

	v->action = PI_DP_ALLOW;
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
	/* a loop in this frame, not a callback's: the lookup's callbacks
	 * are a frame deeper already */
	for (__u32 i = 0; i < POLICY_WALK_TRIES; i++)
		if (policy_try_one(i, &t))
			break;
	if (!t.stable) {
		v->action = PI_DP_DENY;
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

/* Returns PI_DP_DENY when the pod's policy in `dir` denies the packet, with
 * the deciding rule's counters updated either way: the stateless decision
 * (the connection tracker, bpf/lib/ct.h, calls it for what it does not
 * track). */
static __always_inline int policy_check(__u32 pod_id, __u32 dir,
					const struct pkt *p, __u32 len)
{
	struct policy_verdict v;

	policy_decide(pod_id, dir, p->family,
		      dir == PI_DP_DIR_EGRESS ? &p->daddr : &p->saddr, p->proto,
		      p->has_ports, p->dport, len, &v);
	return v.action;
}

#endif
