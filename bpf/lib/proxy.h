/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Transparent proxy steering. Three kinds of packet are moved:
 *
 *  capture   POD -> D:dp, new and matching      pod's hook  -> proxy's eth0
 *  client    proxy (as D:dp) -> POD             proxy's hook -> POD's eth0
 *  upstream  D:dp -> POD:p2 (proxy's upstream   POD's eth0 ingress bounces
 *            connection, made as POD)           it to POD's hook -> proxy
 *
 * The proxy's upstream packets themselves (POD:p2 -> D:dp) are ordinary
 * injections (the proxy is POD's authorised injector); the injection
 * program records their flow in proxy_upstream so that POD's hook lets
 * them pass to POD's egress programs instead of capturing them again.
 *
 * A captured SYN whose 4-tuple an old connection's TIME_WAIT still holds
 * in the proxy's namespace is left to the stack, which takes the TIME_WAIT
 * over for the listener that the namespace's sk_lookup program
 * (proxy_lookup) names: proxy_listeners holds it.
 */
#ifndef PODINJECT_BPF_PROXY_H
#define PODINJECT_BPF_PROXY_H

#include "parse.h"
#include "podinject_rule.h"
#include "redirect.h"
#include "monitor.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PI_DP_MAX_PODS);
	__type(key, __u32);
	__type(value, struct pi_dp_proxy_rule);
} proxy_rules SEC(".maps");

/*
 * The flow tables are plain hashes, not LRU: an LRU table makes room by
 * evicting whatever is oldest, so one pod opening 70 000 flows pushed out
 * every other pod's live sessions. Here each captured pod has a share
 * (PI_DP_PROXY_FLOWS_PER_POD entries in each table, counted in its rule),
 * and the LRU order is kept per pod: a pod at its share makes room from
 * its own flows only, closing ones first, else its least recently used
 * (flow_make_room); a new flow is dropped and counted (limit_drops) only
 * when that frees nothing. A TCP flow's entries go as soon as its
 * connection is done (both FINs and the last ACK, or an RST: flow_touch),
 * so closed connections do not hold the share; anything else leaves when
 * idle, by a timer of its own that also gives the share back, or by the
 * sweep where the kernel could give it no timer (struct pi_flow_sweep):
 * flow_idle_*_ns, set before load.
 */
const volatile __u64 flow_idle_tcp_ns = 6ULL * 3600 * 1000000000;
const volatile __u64 flow_idle_udp_ns = 60ULL * 1000000000;
const volatile __u64 flow_idle_closing_ns = 10ULL * 1000000000;

/* Client-side flows: POD <-> proxy's listener, created at capture. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PI_MAX_FLOWS);
	__type(key, struct pi_flow_key);
	__type(value, struct pi_flow);
} proxy_flows SEC(".maps");

/* Upstream flows: the proxy's connections made with POD's address. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PI_MAX_FLOWS);
	__type(key, struct pi_flow_key);
	__type(value, struct pi_flow);
} proxy_upstream SEC(".maps");

/*
 * Inbound capture (proxy add --inbound): a protected pod's new TCP
 * connections on its protected ports go to the proxy, which terminates
 * them (TLS) and connects to the pod with the client's address. The
 * rules, by the protected pod's host-side ifindex as proxy_rules, and the
 * pod by its addresses: its eth0 and the proxy's hook know a packet's
 * destination address, not the pod's device.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PI_DP_MAX_PODS);
	__type(key, __u32);
	__type(value, struct pi_dp_proxy_rule);
} proxy_inbound_rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 2 * PI_DP_MAX_PODS);
	__type(key, struct pi_endpoint_key);
	__type(value, __u32);
} proxy_inbound_pods SEC(".maps");

/* A new inbound flow is made here rather than on the stack: the head
 * program, inbound_steer and a call below them would pass the 512 bytes
 * of stack the verifier allows a chain of calls. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pi_flow);
} flow_scratch SEC(".maps");

/* The proxies' TCP listeners, put here by proxy_assign as it meets them
 * and taken out by the kernel when they close. A SOCKHASH because only
 * socket maps hand a socket to an sk_lookup program. */
struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, PI_MAX_PROXY_LISTENERS);
	__type(key, struct pi_proxy_listener_key);
	__type(value, __u64);
} proxy_listeners SEC(".maps");

#define CLOCK_MONOTONIC_	1
#define EBUSY_			16	/* bpf_timer_init: the timer exists */

static __always_inline __u64 flow_idle(__u8 proto, __u16 flags)
{
	if (flags & PI_FLOW_CLOSING)
		return flow_idle_closing_ns;
	return proto == IPPROTO_TCP ? flow_idle_tcp_ns : flow_idle_udp_ns;
}

/* Gives one entry of the pod's share in one table back. A global
 * function, verified once: the rule is in one of two maps, and inlined
 * into the flow walks that choice doubled their paths past the verifier's
 * limit. */
__noinline int flow_uncount(__u32 pod_ifindex, __u32 flags)
{
	struct pi_dp_proxy_rule *r;

	if (flags & PI_FLOW_INBOUND)
		r = bpf_map_lookup_elem(&proxy_inbound_rules, &pod_ifindex);
	else
		r = bpf_map_lookup_elem(&proxy_rules, &pod_ifindex);
	if (!r)
		return 0;	/* unproxied: the rule and its counts are gone */
	if (flags & PI_FLOW_UPSTREAM) {
		if (r->nupstream)
			__sync_fetch_and_add(&r->nupstream, -1);
	} else if (r->nflows) {
		__sync_fetch_and_add(&r->nflows, -1);
	}
	return 0;
}

/* Takes a flow out of `map` and gives its place in the share back.
 * Only the CPU whose delete succeeds gives it back, so that a flow
 * taken out at once by its timer, its last packet and a pod making room
 * is counted out once. The element is reused as soon as it is deleted:
 * what the count needs is read before. */
static __always_inline void flow_remove(void *map, const struct pi_flow_key *k,
					const struct pi_flow *f)
{
	__u32 pod_ifindex = f->pod_ifindex;
	__u16 flags = f->flags;

	if (!bpf_map_delete_elem(map, k))
		flow_uncount(pod_ifindex, flags);
}

/* How long the flow has been quiet at `now` (0 for a time ahead of it:
 * a packet on another CPU stamped it after `now` was read). */
static __always_inline __u64 flow_quiet(const struct pi_flow *f, __u64 now)
{
	__u64 seen = f->last_seen_ns;

	return now > seen ? now - seen : 0;
}

/* A flow's timer: gone when idle long enough, else look again when it
 * would be. A timer made in an element another CPU had just deleted (a
 * slot of the table's free list, its key stale) must not take out the
 * live entry of that key: only the element the key finds is the flow. */
static int flow_expire(void *map, struct pi_flow_key *k, struct pi_flow *f)
{
	__u64 idle = flow_idle(k->proto, f->flags);
	__u64 quiet = flow_quiet(f, bpf_ktime_get_ns());

	if (bpf_map_lookup_elem(map, k) != f)
		return 0;
	if (quiet < idle) {
		bpf_timer_start(&f->timer, idle - quiet, 0);
		return 0;
	}
	flow_remove(map, k, f);
	return 0;
}

/* Gives the entry `f` of `map` its timer, due in `ns`; 0, or the error
 * when the kernel could not make one (ENOMEM, struct pi_flow_sweep). A
 * timer already there (-EBUSY: another CPU's flow_add or a round made it,
 * or it is one left in the reused element, made and never started) is
 * started all the same: the entry was just touched. */
static __always_inline long flow_arm(void *map, struct pi_flow *f, __u64 ns)
{
	/* when init fails (ENOMEM) the other two fail too (EINVAL) */
	bpf_timer_init(&f->timer, map, CLOCK_MONOTONIC_);
	bpf_timer_set_callback(&f->timer, flow_expire);
	return bpf_timer_start(&f->timer, ns, 0);
}

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pi_flow_sweep);
} flow_sweep SEC(".maps");

/* A round of the sweep: what it found is counted in the sweep's own
 * entry, not on the stack, where the verifier would track each count
 * through the walk's callback and tell every iteration from the last. */
struct sweep_round {
	__u64 now;
	struct pi_flow_sweep *s;
};

/* One entry: one idle past its timeout goes, timer or not (a timer that
 * never ran, or runs late, is no reason to keep it); of the others, one
 * with a timer (bpf_timer_init says -EBUSY before it allocates anything)
 * is left to it, one without gets its timer now if the kernel can make
 * one, else waits for the next round. The idle check comes first so that
 * no timer is made in an entry on its way out. */
static long flow_sweep_visit(void *map, struct pi_flow_key *k,
			     struct pi_flow *f, struct sweep_round *c)
{
	__u64 idle = flow_idle(k->proto, f->flags);
	__u64 quiet = flow_quiet(f, c->now);
	long err;

	if (quiet >= idle) {
		flow_remove(map, k, f);
		c->s->expired++;
		return 0;
	}
	c->s->live++;
	err = bpf_timer_init(&f->timer, map, CLOCK_MONOTONIC_);
	if (err == -EBUSY_)
		return 0;
	if (!err) {
		bpf_timer_set_callback(&f->timer, flow_expire);
		if (!bpf_timer_start(&f->timer, idle - quiet, 0)) {
			c->s->armed++;
			return 0;
		}
	}
	c->s->pending++;
	if (idle - quiet < c->s->next_ns)
		c->s->next_ns = idle - quiet;
	return 0;
}

static __always_inline __u64 flow_sweep_ns(const struct pi_flow_sweep *s)
{
	return s->interval_ns ?: PI_DP_FLOW_SWEEP_NS;
}

/* Schedules a round `wait` from `now`, unless one is due sooner; `due`:
 * which kind. False when it could not be scheduled. */
static __always_inline bool flow_sweep_at(struct pi_flow_sweep *s, __u64 now,
					  __u64 wait, __u32 due)
{
	if (s->scheduled != PI_DP_SWEEP_NONE && s->due_ns <= now + wait)
		return true;
	s->scheduled = due;
	s->due_ns = now + wait;
	if (bpf_timer_start(&s->timer, wait, 0)) {
		s->scheduled = PI_DP_SWEEP_NONE;
		return false;
	}
	return true;
}

/*
 * A round. The next one is due:
 *  - while an entry is left without a timer, when the first of them
 *    times out (at least an interval, 1 s, and at most the backstop's
 *    30 s away: the round tries to give them their timers again);
 *  - else, while the tables hold anything, in PI_DP_FLOW_SWEEP_SLOW
 *    intervals (30 s): the backstop for an entry a walk stepped over (a
 *    walk of a hash table that changes under it may) and for a timer
 *    that never runs;
 *  - else never, until a flow_add leaves an entry untimed (flow_untimed).
 * `scheduled` and `due_ns` say which round is due and when; a sooner one
 * replaces it. They are cleared before the walk, so an entry left untimed
 * after that schedules a round itself. Plain stores: two CPUs may both
 * schedule a round, the later start moving it by the time between them.
 * The next round is started without setting the callback again: the
 * timer runs this one already, and a callback that names itself is a
 * loop to 6.1's verifier.
 */
static int flow_sweep_run(void *map, __u32 *key, struct pi_flow_sweep *s)
{
	struct sweep_round c = { .now = bpf_ktime_get_ns(), .s = s };
	__u64 slow = flow_sweep_ns(s) * PI_DP_FLOW_SWEEP_SLOW;
	__u64 wait = slow;

	s->scheduled = PI_DP_SWEEP_NONE;
	s->live = 0;
	s->pending = 0;
	s->next_ns = ~0ULL;
	bpf_for_each_map_elem(&proxy_flows, flow_sweep_visit, &c, 0);
	bpf_for_each_map_elem(&proxy_upstream, flow_sweep_visit, &c, 0);
	s->rounds++;
	s->round_ns = bpf_ktime_get_ns() - c.now;
	if (s->pending) {
		wait = s->next_ns;
		if (wait < flow_sweep_ns(s))
			wait = flow_sweep_ns(s);
		if (wait > slow)
			wait = slow;
	} else if (!s->live) {
		return 0;	/* nothing to look after */
	}
	flow_sweep_at(s, c.now, wait,
		      s->pending ? PI_DP_SWEEP_SOON : PI_DP_SWEEP_SLOW);
	return 0;
}

/*
 * An entry the kernel gave no timer: counted, and a round scheduled by
 * the time the shortest timeout (a closing flow's, 10 s) ends, the
 * soonest the entry can time out. (Its own timeout, passed down, cost the
 * head program 16 bytes of stack, and its chain of calls is at 6.1's
 * limit.) The sweep's timer and its callback are made by
 * flow_sweep_start, run by userspace when the object is loaded: the
 * datapath wants the timer exactly when the kernel has no memory at hand
 * to make one, and it names no callback of the round, which 6.1 counts as
 * a call (the head program's chain of calls down to the round's visit was
 * past its 512 bytes of stack). Had that start failed (it is logged),
 * bpf_timer_start fails here too (EINVAL) and no round is scheduled.
 */
static __always_inline void flow_untimed(void)
{
	__u32 zero = 0;
	struct pi_flow_sweep *s = bpf_map_lookup_elem(&flow_sweep, &zero);

	if (!s)
		return;
	__sync_fetch_and_add(&s->untimed, 1);
	flow_sweep_at(s, bpf_ktime_get_ns(), flow_idle_closing_ns,
		      PI_DP_SWEEP_SOON);
}

#define PI_FLOW_FINS	(PI_FLOW_FIN_POD | PI_FLOW_FIN_PEER)
#define PI_FLOW_FIN_ENDS	(PI_FLOW_FIN_END | PI_FLOW_FIN_END_POD)

/* Where a FIN segment's sequence space ends (its sequence number, its
 * data, and one for the FIN), in host order; false when its header
 * cannot be read. */
static __always_inline bool tcp_fin_end(struct __sk_buff *skb,
					const struct pkt *p, __u32 *end)
{
	__u32 w[3];	/* sequence, acknowledgment, data offset and flags */

	if (p->l4_off > PKT_L4_OFF_MAX ||
	    bpf_skb_load_bytes(skb, p->l4_off + 4, w, sizeof(w)))
		return false;
	*end = bpf_ntohl(w[0]) + (p->l3_end - p->l4_off) -
	       ((bpf_ntohl(w[2]) >> 28) << 2) + 1;
	return true;
}

/* Whether a segment's acknowledgment number reaches `end`. */
static __always_inline bool tcp_acks(struct __sk_buff *skb,
				     const struct pkt *p, __u32 end)
{
	__u32 ack;

	if (!(p->tcp_flags & TCP_ACK) || p->l4_off > PKT_L4_OFF_MAX ||
	    bpf_skb_load_bytes(skb, p->l4_off + 8, &ack, sizeof(ack)))
		return false;
	return (__s32)(bpf_ntohl(ack) - end) >= 0;
}

/*
 * A packet of the flow, from the pod's end (`from_pod`: what the pod or
 * the proxy as the pod sends) or the far end. The flow is alive, and
 * closing once both ends sent their FIN (a new SYN on the same 4-tuple
 * opens it again). True when the connection is done and the caller takes the
 * entry out, after it has sent this packet on: at an RST (nothing
 * answers one), or at the last ACK: the other end's acknowledgment of
 * the later FIN, whose end the entry keeps (fin_end). Segments between
 * are not the last: a duplicate ACK for data lost before that FIN (its
 * retransmission still to come, which without the entry would lose its
 * way: the proxy's meets its source check), a FIN sent again. A FIN sent
 * again after the last ACK, should that ACK be lost, finds no flow; the
 * socket that sent it times out as when its peer vanished; in a
 * simultaneous close the later of the two ACKs finds no flow either and
 * goes where any packet of an unknown flow goes (the pod's: its egress
 * programs, as a connection older than the capture; the proxy's: its
 * source check). Both sockets are done by then. A close the datapath
 * does not see to its end leaves by the closing timeout once both FINs
 * went by (the last ACK lost), by the long one after a single FIN (the
 * other end gone without a word), or when the pod makes room. `skb` is
 * NULL for a flow's first packet, which cannot be its later FIN.
 */
static __always_inline bool flow_touch(struct __sk_buff *skb,
				       struct pi_flow *f, const struct pkt *p,
				       bool from_pod)
{
	__u16 own = from_pod ? PI_FLOW_FIN_POD : PI_FLOW_FIN_PEER;
	__u16 end_of = from_pod ? PI_FLOW_FIN_ENDS : PI_FLOW_FIN_END;
	__u32 end;

	f->last_seen_ns = bpf_ktime_get_ns();
	if (p->proto != IPPROTO_TCP || p->frag == PKT_FRAG_LATER)
		return false;
	if ((p->tcp_flags & (TCP_SYN | TCP_ACK)) == TCP_SYN) {
		f->flags &= ~(PI_FLOW_CLOSING | PI_FLOW_FINS |
			      PI_FLOW_FIN_ENDS);
		return false;
	}
	if (p->tcp_flags & TCP_RST)
		return true;
	if (!(p->tcp_flags & TCP_FIN)) {
		if ((f->flags & PI_FLOW_FINS) != PI_FLOW_FINS)
			return false;
		if (!(f->flags & PI_FLOW_FIN_END))
			return true;	/* an entry of an earlier build */
		/* the later FIN's end is the other end's to acknowledge */
		if ((f->flags & PI_FLOW_FIN_ENDS) == end_of)
			return false;
		return skb && tcp_acks(skb, p, f->fin_end);
	}
	/* The later of the two FINs (the other end's came first), or that
	 * one sent again: where it ends. The earlier one sent again changes
	 * nothing. An earlier build's entry, or a header that cannot be
	 * read, keeps the rule without it. */
	if (skb && ((f->flags & PI_FLOW_FINS) == (PI_FLOW_FINS ^ own) ||
		    (f->flags & PI_FLOW_FIN_ENDS) == end_of) &&
	    tcp_fin_end(skb, p, &end)) {
		f->fin_end = end;
		f->flags = (f->flags & ~PI_FLOW_FIN_ENDS) | end_of;
	}
	f->flags |= own;
	/* Both ends closed: from then on the shorter timeout (the timer,
	 * armed with the long one, is brought forward). One end's FIN alone
	 * is a half-closed connection, which may stay quiet as long as an
	 * open one (a request sent with its FIN, an answer that takes its
	 * time, a retransmission backing off): it keeps the long timeout,
	 * or its next segments would lose their way and it would hang. */
	if ((f->flags & PI_FLOW_FINS) == PI_FLOW_FINS &&
	    !(f->flags & PI_FLOW_CLOSING)) {
		f->flags |= PI_FLOW_CLOSING;
		bpf_timer_start(&f->timer, flow_idle_closing_ns, 0);
	}
	return false;
}

/* What a pod making room looks for, and what it found. */
struct flow_room {
	__u64 now;
	__u64 oldest;		/* last_seen_ns of the pod's least recent flow */
	__u64 cutoff;		/* second pass: flows seen before it go */
	__u32 pod_ifindex;	/* flow_share() of the pod's device */
	__u32 freed;
	__u32 live;		/* first pass: the pod's flows it kept */
	__u32 quota;		/* second pass: at most this many go */
	bool evict_old;		/* second pass */
};

/* Whose share a flow is in: the pod's device, with the top bit (never
 * set in an ifindex, a positive int) for its inbound share. One compare
 * in the walks below, whose every branch the verifier explores again for
 * each element it assumes. */
static __always_inline __u32 flow_share(__u32 pod_ifindex, __u32 flags)
{
	return pod_ifindex ^ ((flags & PI_FLOW_INBOUND) << 27);
}

static long flow_room_visit(void *map, struct pi_flow_key *k,
			    struct pi_flow *f, struct flow_room *c)
{
	if (flow_share(f->pod_ifindex, f->flags) != c->pod_ifindex)
		return 0;		/* another pod's, or its other share */
	if (c->evict_old) {
		/* the oldest always; others before the cutoff while the
		 * eighth is not full */
		if (f->last_seen_ns <= c->oldest ||
		    (c->freed < c->quota && f->last_seen_ns <= c->cutoff)) {
			flow_remove(map, k, f);
			c->freed++;
		}
		return 0;
	}
	/* closing, or half closed: one end is done with it, so at the
	 * share it is the first to go (its timeout is still the long one) */
	if (f->flags & (PI_FLOW_CLOSING | PI_FLOW_FINS)) {
		flow_remove(map, k, f);
		c->freed++;
		return 0;
	}
	c->live++;
	if (f->last_seen_ns < c->oldest)
		c->oldest = f->last_seen_ns;
	return 0;
}

/*
 * Makes room in `map` for a new flow of the pod on `pod_ifindex`, which is
 * at its share, from that pod's own flows alone: every closing one; when
 * there is none, the least recently used eighth of its flows by age (the
 * oldest at least), so that the walk over the table is paid once per
 * many new flows, not at each. The age cutoff finds the least recent
 * ones; the count caps them at an eighth of the pod's flows, for a pod
 * whose flows came in bursts (most of them older than the cutoff) keeps
 * seven eighths all the same. True when anything was freed.
 */
static __always_inline bool flow_make_room(void *map, __u32 pod_ifindex,
					   __u16 flags)
{
	struct flow_room c = {
		.now = bpf_ktime_get_ns(),
		.oldest = ~0ULL,
		.pod_ifindex = flow_share(pod_ifindex, flags),
	};

	bpf_for_each_map_elem(map, flow_room_visit, &c, 0);
	if (c.freed)
		return true;
	if (c.oldest > c.now)
		return false;		/* nothing of the pod's in the table */
	c.cutoff = c.oldest + (c.now - c.oldest) / 8;
	c.quota = c.live / 8 ?: 1;
	c.evict_old = true;
	bpf_for_each_map_elem(map, flow_room_visit, &c, 0);
	return c.freed;
}

/* Puts a new flow of the pod `r` is the rule of into `map` (proxy_flows
 * or proxy_upstream, as `flags` says), within the pod's share, with its
 * expiry timer running; `p`, its first packet, came from the pod's end
 * (`from_pod`) or the far end. NULL when refused (counted in the rule). */
static __always_inline struct pi_flow *flow_add(void *map,
						struct pi_dp_proxy_rule *r,
						const struct pi_flow_key *k,
						struct pi_flow *nf,
						const struct pkt *p,
						bool from_pod)
{
	__u32 *count = nf->flags & PI_FLOW_UPSTREAM ? &r->nupstream :
						      &r->nflows;
	struct pi_flow *f;

	/* at its share, or the table full: the pod makes room from its own
	 * flows, once */
	if (*count >= PI_DP_PROXY_FLOWS_PER_POD &&
	    !flow_make_room(map, nf->pod_ifindex, nf->flags))
		goto refused;
	if (*count >= PI_DP_PROXY_FLOWS_PER_POD)
		goto refused;		/* others of its packets took the room */
	nf->last_seen_ns = bpf_ktime_get_ns();
	if (bpf_map_update_elem(map, k, nf, BPF_NOEXIST) &&
	    (!*count || !flow_make_room(map, nf->pod_ifindex, nf->flags) ||
	     bpf_map_update_elem(map, k, nf, BPF_NOEXIST)))
		goto refused;		/* the table is full, or a race */
	__sync_fetch_and_add(count, 1);
	f = bpf_map_lookup_elem(map, k);
	if (!f)
		return NULL;
	/* a new flow's first packet: its SYN (or datagram) */
	flow_touch(NULL, f, p, from_pod);
	if (flow_arm(map, f, flow_idle(k->proto, f->flags)))
		flow_untimed();
	return f;
refused:
	__sync_fetch_and_add(&r->limit_drops, 1);
	return NULL;
}

static __always_inline void listener_key(struct pi_proxy_listener_key *lk,
					 const struct pi_flow *f, __u32 family,
					 __u32 proto)
{
	lk->proxy_ifindex = f->proxy_ifindex;
	lk->family = family | (proto == IPPROTO_UDP ? PI_PROXY_LISTENER_UDP : 0);
	lk->port = f->proxy_port;
}

/* The flow as POD sees it, from a packet POD sent (`from_pod`) or one
 * sent to POD. */
static __always_inline void flow_key(struct pi_flow_key *k,
				     const struct pkt *p, bool from_pod)
{
	__builtin_memset(k, 0, sizeof(*k));
	k->family = p->family;
	k->proto = p->proto;
	if (from_pod) {
		k->pod = p->saddr;
		k->dst = p->daddr;
		k->pod_port = bpf_htons(p->sport);
		k->dst_port = bpf_htons(p->dport);
	} else {
		k->pod = p->daddr;
		k->dst = p->saddr;
		k->pod_port = bpf_htons(p->dport);
		k->dst_port = bpf_htons(p->sport);
	}
}

static __always_inline int set_macs(struct __sk_buff *skb, const __u8 *dst,
				    const __u8 *src)
{
	void *data = skb_data(skb), *data_end = skb_data_end(skb);
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > data_end)
		return -1;
	__builtin_memcpy(eth->h_dest, dst, ETH_ALEN);
	__builtin_memcpy(eth->h_source, src, ETH_ALEN);
	return 0;
}

static __always_inline int to_proxy(struct __sk_buff *skb,
				    const struct pi_flow *f)
{
	if (set_macs(skb, f->proxy_pod_mac, f->proxy_host_mac))
		return PI_DROP;
	return redirect_peer(f->proxy_ifindex, 0);
}

/* A packet of a known flow, to the proxy: the flow touched from its end,
 * and taken out once the packet that ends the connection is on its way. */
static __always_inline int flow_to_proxy(struct __sk_buff *skb, void *map,
					 const struct pi_flow_key *k,
					 struct pi_flow *f,
					 const struct pkt *p, bool from_pod)
{
	bool done = flow_touch(skb, f, p, from_pod);
	int verdict = to_proxy(skb, f);

	if (done)
		flow_remove(map, k, f);
	return verdict;
}

static __always_inline bool rule_matches_pkt(const struct pi_dp_proxy_rule *r,
					     const struct pkt *p)
{
	bool port_ok = !r->nports;
	__u32 i;

	if (!p->has_ports)
		return false;
	if (r->proto && r->proto != p->proto)
		return false;
#pragma unroll
	for (i = 0; i < PI_DP_PROXY_MAX_PORTS; i++) {
		if (i < r->nports && p->dport >= r->dport_lo[i] &&
		    p->dport <= r->dport_hi[i])
			port_ok = true;
	}
	if (!port_ok)
		return false;
	if (r->dst_family) {
		if (r->dst_family != p->family)
			return false;
		if (!pi_prefix_match(&p->daddr, &r->dst, r->dst_plen))
			return false;
	}
	return true;
}

/* A new connection: TCP SYN without ACK, or any UDP datagram. Anything
 * else of an unknown flow belongs to a connection made before capture
 * started and stays direct. */
static __always_inline bool starts_flow(const struct pkt *p)
{
	if (p->proto == IPPROTO_UDP)
		return true;
	return (p->tcp_flags & (TCP_SYN | TCP_ACK)) == TCP_SYN;
}

/* Is `p`'s source an address of the captured pod on `ifindex`? The
 * proxy is the pod's authorised injector for exactly the pod's own
 * addresses (proxy add), so inject_auth answers it without another map. */
static __always_inline bool from_own_address(const struct pi_dp_proxy_rule *r,
					     const struct pkt *p,
					     __u32 ifindex)
{
	struct pi_inject_key ik = {
		.injector_ifindex = r->proxy_ifindex,
		.family = p->family,
		.addr = p->saddr,
	};
	struct pi_inject_target *t = bpf_map_lookup_elem(&inject_auth, &ik);

	return t && t->target_ifindex == ifindex;
}

/*
 * An ICMP or ICMPv6 error (unreachable, fragmentation needed, packet too
 * big, time exceeded, parameter problem) addressed to a pod quotes the
 * packet that caused it: when that packet was the proxy's upstream
 * connection, made with the pod's address, the error belongs to the
 * proxy's socket as the flow's replies do. Without it a path MTU smaller
 * than the link's is a black hole for every proxied flow. Fills `k` with
 * the quoted flow as the pod sees it (pod = the quoted source, which must
 * be the error's destination). Only a whole ICMP packet with a TCP or UDP
 * header right after the quoted IP header (no IPv6 extension headers, an
 * IPv4 first fragment or whole packet) is read.
 */
static __always_inline bool icmp_error_flow(struct __sk_buff *skb,
					    const struct pkt *p,
					    struct pi_flow_key *k)
{
	__u32 off = p->l4_off;
	__u8 h[2];
	__u16 ports[2];

	if (p->frag != PKT_FRAG_NONE || off > PKT_L4_OFF_MAX ||
	    bpf_skb_load_bytes(skb, off, h, 2))
		return false;
	__builtin_memset(k, 0, sizeof(*k));
	k->family = p->family;
	if (p->family == AF_INET && p->proto == IPPROTO_ICMP) {
		struct iphdr in;

		if (h[0] != ICMP_DEST_UNREACH_ &&
		    h[0] != ICMP_TIME_EXCEEDED_ &&
		    h[0] != ICMP_PARAMETERPROB_)
			return false;
		if (bpf_skb_load_bytes(skb, off + 8, &in, sizeof(in)) ||
		    in.version != 4 || in.ihl < 5 ||
		    (in.frag_off & bpf_htons(0x1fff)) ||
		    bpf_skb_load_bytes(skb, off + 8 + in.ihl * 4, ports, 4))
			return false;
		k->proto = in.protocol;
		k->pod.a[0] = in.saddr;
		k->dst.a[0] = in.daddr;
	} else if (p->family == AF_INET6 && p->proto == IPPROTO_ICMPV6_) {
		struct ipv6hdr in;

		if (h[0] != ICMP6_DST_UNREACH_ &&
		    h[0] != ICMP6_PACKET_TOO_BIG_ &&
		    h[0] != ICMP6_TIME_EXCEEDED_ &&
		    h[0] != ICMP6_PARAM_PROB_)
			return false;
		if (bpf_skb_load_bytes(skb, off + 8, &in, sizeof(in)) ||
		    in.version != 6 ||
		    bpf_skb_load_bytes(skb, off + 8 + sizeof(in), ports, 4))
			return false;
		k->proto = in.nexthdr;
		__builtin_memcpy(k->pod.a, &in.saddr, 16);
		__builtin_memcpy(k->dst.a, &in.daddr, 16);
	} else {
		return false;
	}
	if (k->proto != IPPROTO_TCP && k->proto != IPPROTO_UDP)
		return false;
	if (!addr_eq(&k->pod, &p->daddr))
		return false;
	k->pod_port = ports[0];
	k->dst_port = ports[1];
	return true;
}

/* Steering at a pod's egress hook (the head program). Returns a verdict,
 * or PI_NEXT to go on with injection handling and the CNI's programs. */
static __always_inline int proxy_steer(struct __sk_buff *skb,
				       const struct pkt *p, __u32 roles)
{
	struct pi_dp_proxy_rule *r;
	struct pi_flow_key k;
	struct pi_flow *f, nf;
	__u32 ifindex = skb->ifindex;
	int verdict;
	bool done;

	/* an ICMP error about an upstream flow, bounced here from POD's
	 * eth0 like the flow's replies: to the proxy, whose stack finds the
	 * upstream socket by the quoted header */
	if (!p->has_ports) {
		if (!(roles & PI_DP_ROLE_CAPTURED) ||
		    !bpf_map_lookup_elem(&proxy_rules, &ifindex) ||
		    !icmp_error_flow(skb, p, &k))
			return PI_NEXT;
		f = bpf_map_lookup_elem(&proxy_upstream, &k);
		if (f && f->pod_ifindex == ifindex)
			return to_proxy(skb, f);
		return PI_NEXT;
	}

	/* client side: the proxy answering POD as D */
	flow_key(&k, p, false);
	f = (roles & PI_DP_ROLE_PROXY) ?
	    bpf_map_lookup_elem(&proxy_flows, &k) : NULL;
	if (f && f->proxy_ifindex == ifindex &&
	    !(f->flags & PI_FLOW_INBOUND)) {
		done = flow_touch(skb, f, p, false);
		if (set_macs(skb, f->pod_mac, f->pod_host_mac))
			verdict = PI_DROP;
		else
			verdict = redirect_peer(f->pod_ifindex, 0);
		if (done)
			flow_remove(&proxy_flows, &k, f);
		return verdict;
	}

	if (!(roles & PI_DP_ROLE_CAPTURED))
		return PI_NEXT;
	r = bpf_map_lookup_elem(&proxy_rules, &ifindex);
	if (!r)
		return PI_NEXT;

	/* upstream reply, bounced here from POD's eth0 */
	f = bpf_map_lookup_elem(&proxy_upstream, &k);
	if (f && f->pod_ifindex == ifindex &&
	    !(f->flags & PI_FLOW_INBOUND))
		return flow_to_proxy(skb, &proxy_upstream, &k, f, p, false);

	/* Everything else here is what the pod sends: captured only from
	 * its own addresses. Another source goes on to the source check of
	 * the pod's egress programs, which drops it as spoofed. */
	if (!from_own_address(r, p, ifindex))
		return PI_NEXT;
	flow_key(&k, p, true);
	/* the proxy's upstream packets, injected: POD's own egress path */
	if (bpf_map_lookup_elem(&proxy_upstream, &k))
		return PI_NEXT;
	/* A flow belongs to the device that made it: another device (a pod
	 * added later with the address) does not continue it, though its new
	 * connection may take the key over. */
	f = bpf_map_lookup_elem(&proxy_flows, &k);
	if (f && f->pod_ifindex == ifindex &&
	    !(f->flags & PI_FLOW_INBOUND))
		return flow_to_proxy(skb, &proxy_flows, &k, f, p, true);
	if (!starts_flow(p) || !rule_matches_pkt(r, p))
		return PI_NEXT;
	if (f)
		flow_remove(&proxy_flows, &k, f);

	__builtin_memset(&nf, 0, sizeof(nf));
	nf.pod_ifindex = ifindex;
	nf.proxy_ifindex = r->proxy_ifindex;
	nf.proxy_port = r->port;
	__builtin_memcpy(nf.pod_mac, r->pod_mac, ETH_ALEN);
	__builtin_memcpy(nf.pod_host_mac, r->pod_host_mac, ETH_ALEN);
	__builtin_memcpy(nf.proxy_pod_mac, r->proxy_pod_mac, ETH_ALEN);
	__builtin_memcpy(nf.proxy_host_mac, r->proxy_host_mac, ETH_ALEN);
	/* Beyond the pod's share the new flow is refused, not made direct:
	 * a pod does not get around its proxy by opening many flows. */
	f = flow_add(&proxy_flows, r, &k, &nf, p, true);
	if (!f)
		return inject_refuse(skb, p, PI_DP_MON_DROP_PROXY_LIMIT,
				     r->port);
	if (mon_wants(MON_BIT(PI_DP_MON_PROXY)))
		mon_inject_event(skb, p, PI_DP_MON_PROXY, 0, r->port);
	return to_proxy(skb, f);
}

/* Called by the injection program for a packet it injects as `target`:
 * when target is proxied, the flow is the proxy's upstream connection.
 * False when it cannot be recorded (the pod's share is used up): the
 * packet must not go on, or POD's hook would capture it again. */
static __always_inline bool proxy_note_upstream(struct __sk_buff *skb,
						const struct pkt *p,
						__u32 target, __u32 proxy)
{
	struct pi_dp_proxy_rule *r;
	struct pi_flow_key k;
	struct pi_flow nf, *f;

	if (!p->has_ports)
		return true;
	r = bpf_map_lookup_elem(&proxy_rules, &target);
	if (!r || r->proxy_ifindex != proxy)
		return true;
	flow_key(&k, p, true);
	f = bpf_map_lookup_elem(&proxy_upstream, &k);
	if (f) {
		/* the packet is injected after this: the entry can go now,
		 * POD's hook lets a non-SYN it does not know pass as well */
		if (flow_touch(skb, f, p, true))
			flow_remove(&proxy_upstream, &k, f);
		return true;
	}
	/* A packet of no known TCP flow that is no SYN: the proxy's answer
	 * to a late segment of a connection that is done (a flow is taken
	 * out at its last ACK), or a connection whose entry went. It gets
	 * an entry, so that the answer to it goes to the proxy as the
	 * flow's replies did, but one that leaves after the closing
	 * timeout, not 6 h, and is the first to make room; an RST, which
	 * nothing answers, gets none. */
	__builtin_memset(&nf, 0, sizeof(nf));
	if (p->proto == IPPROTO_TCP && !starts_flow(p)) {
		if (p->tcp_flags & TCP_RST)
			return true;
		nf.flags = PI_FLOW_CLOSING;
	}
	nf.pod_ifindex = target;
	nf.proxy_ifindex = proxy;
	nf.proxy_port = r->port;
	nf.flags |= PI_FLOW_UPSTREAM;
	__builtin_memcpy(nf.proxy_pod_mac, r->proxy_pod_mac, ETH_ALEN);
	__builtin_memcpy(nf.proxy_host_mac, r->proxy_host_mac, ETH_ALEN);
	return flow_add(&proxy_upstream, r, &k, &nf, p, true) != NULL;
}

/*
 * Inbound capture (proxy add --inbound): the protected pod B's new TCP
 * connections on its protected ports are terminated by the proxy P, which
 * connects on to B with the client's address. Two flows, keyed as B sees
 * them (B:N the pod's end, the client's address and port the far end):
 *
 *  client  A:sp -> B:N, in proxy_flows    B's eth0 ingress takes the SYN
 *          (PI_FLOW_INBOUND)              (inbound_capture), bounces it to
 *                                         B's hook -> P's listener; P's
 *                                         answers as B:N are injections as
 *                                         B (P is B's injector): B's egress
 *  plain   A:p3 -> B:N, P's connection    P's hook -> B's eth0 (B's ingress
 *          to B with A's address, in      decided on A -> B:N already, on
 *          proxy_upstream                 the client flow); B's answers ->
 *          (PI_FLOW_UPSTREAM|INBOUND)     P's eth0
 *
 * The pod is found by address (proxy_inbound_pods): B's eth0 and P's hook
 * see a packet's destination, not B's host-side device.
 */
static __always_inline __u32 *inbound_pod(const struct pi_dp_addr *addr,
					  __u32 family)
{
	struct pi_endpoint_key ek = { .family = family, .addr = *addr };

	return bpf_map_lookup_elem(&proxy_inbound_pods, &ek);
}

static __always_inline bool is_inbound(const struct pi_flow *f, __u32 pod)
{
	return f && (f->flags & PI_FLOW_INBOUND) && f->pod_ifindex == pod;
}

/* The sequence number of a TCP segment, network order (0 if unread). */
static __always_inline __u32 tcp_seq(struct __sk_buff *skb,
				     const struct pkt *p)
{
	__u32 seq = 0;

	if (p->l4_off <= PKT_L4_OFF_MAX)
		bpf_skb_load_bytes(skb, p->l4_off + 4, &seq, 4);
	return seq;
}

/* A new inbound flow in flow_scratch (its timer field, which a program
 * may not write, is never set there: the table's copy starts zeroed). */
static __always_inline struct pi_flow *
inbound_flow_init(const struct pi_dp_proxy_rule *r, __u32 pod, __u16 flags)
{
	__u32 zero = 0;
	struct pi_flow *nf = bpf_map_lookup_elem(&flow_scratch, &zero);

	if (!nf)
		return NULL;
	nf->syn_seq = 0;
	nf->last_seen_ns = 0;
	nf->pod_ifindex = pod;
	nf->proxy_ifindex = r->proxy_ifindex;
	nf->proxy_port = r->port;
	nf->flags = flags | PI_FLOW_INBOUND;
	__builtin_memcpy(nf->pod_mac, r->pod_mac, ETH_ALEN);
	__builtin_memcpy(nf->pod_host_mac, r->pod_host_mac, ETH_ALEN);
	__builtin_memcpy(nf->proxy_pod_mac, r->proxy_pod_mac, ETH_ALEN);
	__builtin_memcpy(nf->proxy_host_mac, r->proxy_host_mac, ETH_ALEN);
	return nf;
}

/*
 * inbound_capture and inbound_steer are global functions, verified once on
 * their own: inlined into the head program beside the outbound capture,
 * the verifier's pending branches passed its limit ("the sequence of 8193
 * jumps is too complex").
 *
 * At a protected pod's eth0 ingress (pod_reply), inside its namespace:
 * every way into the pod ends here, so a client's connection is taken
 * whatever path it came by (a local pod, the uplink, another CNI). Sets
 * `mine` when the packet is inbound capture's, and returns its verdict
 * then: PI_NEXT lets it into the pod.
 */
__noinline int inbound_capture(struct __sk_buff *skb, const struct pkt *p,
			       bool *mine)
{
	struct pi_dp_proxy_rule *r;
	struct pi_flow_key k;
	struct pi_flow *f, *nf;
	__u32 *pod;

	if (!skb || !p || !mine)
		return PI_NEXT;
	*mine = false;
	if (p->proto != IPPROTO_TCP)
		return PI_NEXT;
	pod = inbound_pod(&p->daddr, p->family);
	if (!pod)
		return PI_NEXT;
	r = bpf_map_lookup_elem(&proxy_inbound_rules, pod);
	if (!r || !rule_matches_pkt(r, p))
		return PI_NEXT;
	flow_key(&k, p, false);
	/* The proxy's plaintext connection, made with the client's address:
	 * the pod's. A SYN of its 4-tuple with another sequence number than
	 * the proxy's is someone else's (a client reusing the tuple) and
	 * would get past the proxy: dropped. */
	f = bpf_map_lookup_elem(&proxy_upstream, &k);
	if (is_inbound(f, *pod)) {
		*mine = true;
		if (starts_flow(p) && tcp_seq(skb, p) != f->syn_seq)
			return inject_refuse(skb, p, PI_DP_MON_DROP_PROXY_TUPLE,
					     r->port);
		return PI_NEXT;
	}
	f = bpf_map_lookup_elem(&proxy_flows, &k);
	if (is_inbound(f, *pod)) {
		*mine = true;
		frag_note(p);
		return redirect_peer(skb->ifindex, 0);
	}
	/* anything but a new connection of an unknown flow is older than
	 * the rule, or no client's (replies to the pod's own connections) */
	if (!starts_flow(p))
		return PI_NEXT;
	*mine = true;
	if (f) {
		if (!(f->flags & PI_FLOW_INBOUND))	/* the pod's own, B:N */
			return inject_refuse(skb, p, PI_DP_MON_DROP_PROXY_TUPLE,
					     r->port);
		flow_remove(&proxy_flows, &k, f);	/* another pod's, gone */
	}
	nf = inbound_flow_init(r, *pod, 0);
	f = nf ? flow_add(&proxy_flows, r, &k, nf, p, false) : NULL;
	if (!f)
		return inject_refuse(skb, p, PI_DP_MON_DROP_PROXY_LIMIT,
				     r->port);
	if (mon_wants(MON_BIT(PI_DP_MON_PROXY)))
		mon_inject_event(skb, p, PI_DP_MON_PROXY, 0, r->port);
	/* to the pod's host side, whose head program hands it to the proxy */
	frag_note(p);
	return redirect_peer(skb->ifindex, 0);
}

/*
 * At the head program: an ICMP error about what the proxy sent to a
 * client as the protected pod, bounced here from the pod's eth0, is the
 * proxy's, whose stack finds the accepted socket by the quoted header
 * (path MTU discovery). A function of its own: inside inbound_steer its
 * stack passed what 6.1's verifier allows a chain of calls (512 bytes).
 */
__noinline int inbound_icmp(struct __sk_buff *skb, const struct pkt *p,
			    __u32 roles, bool *mine)
{
	struct pi_flow_key k;
	struct pi_flow *f;
	__u32 ifindex;

	if (!skb || !p || !mine)
		return PI_NEXT;
	ifindex = skb->ifindex;
	*mine = false;
	if (!(roles & PI_DP_ROLE_PROTECTED) ||
	    !bpf_map_lookup_elem(&proxy_inbound_rules, &ifindex) ||
	    !icmp_error_flow(skb, p, &k))
		return PI_NEXT;
	f = bpf_map_lookup_elem(&proxy_flows, &k);
	if (!is_inbound(f, ifindex))
		return PI_NEXT;
	*mine = true;
	return to_proxy(skb, f);
}

/*
 * At the head program, before injection and outbound capture. Sets
 * `mine` when the packet is inbound capture's, and returns its verdict
 * then (PI_NEXT: on to the pod's egress programs, nothing else here).
 */
__noinline int inbound_steer(struct __sk_buff *skb, const struct pkt *p,
			     __u32 roles, bool *mine)
{
	struct pi_dp_proxy_rule *r;
	struct pi_flow_key k;
	struct pi_flow *f, *nf;
	__u32 ifindex, *pod;
	int verdict;
	bool done;

	if (!skb || !p || !mine)
		return PI_NEXT;
	ifindex = skb->ifindex;
	*mine = false;
	if (!p->has_ports || p->proto != IPPROTO_TCP)
		return PI_NEXT;

	/* at the protected pod's own hook */
	r = (roles & PI_DP_ROLE_PROTECTED) ?
	    bpf_map_lookup_elem(&proxy_inbound_rules, &ifindex) : NULL;
	if (r) {
		/* a client's packet, bounced here from the pod's eth0 */
		flow_key(&k, p, false);
		f = bpf_map_lookup_elem(&proxy_flows, &k);
		if (is_inbound(f, ifindex)) {
			*mine = true;
			return flow_to_proxy(skb, &proxy_flows, &k, f, p, false);
		}
		flow_key(&k, p, true);
		/* the pod answering the proxy's plaintext connection */
		f = bpf_map_lookup_elem(&proxy_upstream, &k);
		if (is_inbound(f, ifindex)) {
			*mine = true;
			return flow_to_proxy(skb, &proxy_upstream, &k, f, p, true);
		}
		/* the proxy's answer to the client as the pod, injected:
		 * the pod's egress programs take it from here */
		f = bpf_map_lookup_elem(&proxy_flows, &k);
		if (is_inbound(f, ifindex)) {
			*mine = true;
			if (flow_touch(skb, f, p, true))
				flow_remove(&proxy_flows, &k, f);
			return PI_NEXT;
		}
	}

	/* What follows is at a proxy's hook, for a packet to a protected
	 * pod: most packets are not, and pass on after this one lookup. */
	if (!(roles & PI_DP_ROLE_PROXY))
		return PI_NEXT;
	pod = inbound_pod(&p->daddr, p->family);
	if (!pod)
		return PI_NEXT;

	/* at the proxy's hook: its answer to a client as the pod is an
	 * injection as the pod (the proxy is its injector); the client may
	 * be a protected pod too */
	flow_key(&k, p, true);
	f = bpf_map_lookup_elem(&proxy_flows, &k);
	if (f && (f->flags & PI_FLOW_INBOUND) && f->proxy_ifindex == ifindex)
		return PI_NEXT;

	/* its plaintext connection to a pod it protects, on a protected
	 * port, with a client's address: the one thing it may send with a
	 * source that is not its own and not a grant's (docs/security.md) */
	r = bpf_map_lookup_elem(&proxy_inbound_rules, pod);
	if (!r || r->proxy_ifindex != ifindex || !rule_matches_pkt(r, p))
		return PI_NEXT;
	*mine = true;
	flow_key(&k, p, false);
	f = bpf_map_lookup_elem(&proxy_upstream, &k);
	if (f && !is_inbound(f, *pod)) {
		if (!(f->flags & PI_FLOW_INBOUND))	/* the pod's own */
			return inject_refuse(skb, p, PI_DP_MON_DROP_PROXY_TUPLE,
					     r->port);
		flow_remove(&proxy_upstream, &k, f);	/* another pod's */
		f = NULL;
	}
	if (f) {
		if (starts_flow(p))
			f->syn_seq = tcp_seq(skb, p);
		done = flow_touch(skb, f, p, false);
	} else {
		if (p->tcp_flags & TCP_RST)
			goto deliver;	/* nothing answers it */
		/* a client flow holds the 4-tuple already (the client's port
		 * is the one the proxy's stack picked): refused, the proxy
		 * resets its client */
		if (bpf_map_lookup_elem(&proxy_flows, &k))
			return inject_refuse(skb, p, PI_DP_MON_DROP_PROXY_TUPLE,
					     r->port);
		/* a late segment of a connection that is done gets an entry
		 * that leaves after the closing timeout, so that its answer
		 * finds the proxy */
		nf = inbound_flow_init(r, *pod, PI_FLOW_UPSTREAM |
				       (starts_flow(p) ? 0 : PI_FLOW_CLOSING));
		if (nf && starts_flow(p))
			nf->syn_seq = tcp_seq(skb, p);
		f = nf ? flow_add(&proxy_upstream, r, &k, nf, p, false) : NULL;
		if (!f)
			return inject_refuse(skb, p,
					     PI_DP_MON_DROP_PROXY_LIMIT,
					     r->port);
		done = false;
	}
	if (set_macs(skb, r->pod_mac, r->pod_host_mac))
		verdict = PI_DROP;
	else
		verdict = redirect_peer(*pod, 0);
	if (done)
		flow_remove(&proxy_upstream, &k, f);
	return verdict;
deliver:
	if (set_macs(skb, r->pod_mac, r->pod_host_mac))
		return PI_DROP;
	return redirect_peer(*pod, 0);
}

#endif
