/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The live event monitor: drops, policy decisions, injections and proxy
 * captures as events on a ring buffer, for `podinject monitor`.
 *
 * Nothing is written unless a monitor asked for the kind: monitor_config
 * holds the kinds the running monitors want (the CLI sets and clears it).
 * The check is inline at each place that could report, on the path it is
 * already on (a drop, a rule walk, an injection): one array lookup, which
 * the verifier turns into a few loads. The event itself is built in a
 * global function, verified once on its own and called only when wanted,
 * so a program's verification and its fast path stay as they were.
 *
 * Each object has its own ring buffer (the node's programs and the XDP
 * programs share the node's; the injection object has its own under
 * NODE/inject/), read together by the monitor.
 */
#ifndef PODINJECT_BPF_MONITOR_H
#define PODINJECT_BPF_MONITOR_H

#include "parse.h"

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} monitor_events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pi_dp_monitor_config);
} monitor_config SEC(".maps");

/* Per CPU: events lost to a full ring buffer, and the rule of the last
 * deny decided on this CPU, which the drop that follows it in the same
 * program run reports (a program runs on one CPU from start to end). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pi_dp_monitor_cpu);
} monitor_cpu SEC(".maps");

#define MON_BIT(kind)	(1u << (kind))

/* True when a running monitor wants any of `kinds` (MON_BIT()s), and
 * its reader still takes from the rings: the kinds' lease (lease_s) has
 * not run out. Past it the process that read the rings is gone (killed
 * outright, with no monitor left to take over) or stopped, and nobody
 * will read what would be written: the event is not written, and is
 * counted as lost, as one the full ring could not take, so that a
 * monitor that reads again learns that it missed some. With none
 * asking, the lease is not looked at. Inline, with no call of its own:
 * a frame more would pass the stack the oldest verifiers allow a chain
 * of calls (512 bytes on 6.1). */
static __always_inline bool mon_wants(__u32 kinds)
{
	struct pi_dp_monitor_config *c;
	struct pi_dp_monitor_cpu *mc;
	__u32 zero = 0;

	c = bpf_map_lookup_elem(&monitor_config, &zero);
	if (!c || !(c->kinds & kinds))
		return false;
	if (!c->lease_s ||
	    bpf_ktime_get_coarse_ns() <= (__u64)c->lease_s * 1000000000ull)
		return true;
	mc = bpf_map_lookup_elem(&monitor_cpu, &zero);
	if (mc)
		mc->lost++;
	return false;
}

#ifdef PI_BENCH_NO_MONITOR
/* A build for the bench only (progcost's "no-monitor" baseline): every
 * check compiled out, so that the same tree with and without them shows
 * what the checks cost a datapath no monitor watches. */
#define mon_wants(kinds)	((void)(kinds), false)
#endif

static __always_inline struct pi_dp_mon_event *mon_reserve(void)
{
	struct pi_dp_mon_event *ev;
	struct pi_dp_monitor_cpu *mc;
	__u32 zero = 0;

	ev = bpf_ringbuf_reserve(&monitor_events, sizeof(*ev), 0);
	if (ev)
		return ev;
	mc = bpf_map_lookup_elem(&monitor_cpu, &zero);
	if (mc)
		mc->lost++;
	return NULL;
}

static __always_inline void mon_head(struct pi_dp_mon_event *ev, __u32 kind,
				     __u32 hook, __u32 reason)
{
	__builtin_memset(ev, 0, sizeof(*ev));
	ev->ts_ns = bpf_ktime_get_ns();
	ev->kind = kind;
	ev->hook = hook;
	ev->reason = reason;
}

static __always_inline void mon_tuple_of(struct pi_dp_mon_event *ev,
					 const struct pkt *p)
{
	ev->family = p->family;
	ev->proto = p->proto;
	ev->tcp_flags = p->tcp_flags;
	ev->sport = p->sport;
	ev->dport = p->dport;
	ev->saddr = p->saddr;
	ev->daddr = p->daddr;
}

/* An ICMP or ICMPv6 header at l4: its type and code, and an echo's id
 * (which tells a probe's echoes from the pod's own pings), in the
 * event's port fields, marked as read (pi_dp_mon_event). */
static __always_inline void mon_icmp_read(struct pi_dp_mon_event *ev,
					  void *ctx, bool xdp, __u32 l4)
{
	__u8 h[8];	/* type, code, checksum, echo id, echo sequence */
	bool echo;

	if (ctx_load(ctx, xdp, l4, h, sizeof(h)))
		return;
	ev->tcp_flags = PI_DP_MON_ICMP_READ;
	ev->dport = (__u16)h[0] << 8 | h[1];
	echo = ev->proto == IPPROTO_ICMP ? h[0] == 0 || h[0] == 8 :
					   h[0] == 128 || h[0] == 129;
	if (echo)
		ev->sport = (__u16)h[4] << 8 | h[5];
}

/* The 5-tuple of the frame in ctx, read without changing it (no pull: a
 * drop may be of a frame the parser refused): the IP header and, when it
 * follows at once, the ports. Fields it cannot read stay 0. */
static __always_inline void mon_tuple_read(struct pi_dp_mon_event *ev,
					   void *ctx, bool xdp)
{
	struct ethhdr eth;
	__u32 l4 = 0;
	__u16 ports[2];
	__u8 flags;

	if (ctx_load(ctx, xdp, 0, &eth, sizeof(eth)))
		return;
	if (eth.h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr ip;

		if (ctx_load(ctx, xdp, sizeof(eth), &ip, sizeof(ip)))
			return;
		ev->family = AF_INET;
		ev->proto = ip.protocol;
		ev->saddr.a[0] = ip.saddr;
		ev->daddr.a[0] = ip.daddr;
		/* a later fragment has no ports, a bad header no place */
		if (!(ip.frag_off & bpf_htons(0x1fff)) && ip.ihl >= 5)
			l4 = sizeof(eth) + ip.ihl * 4;
	} else if (eth.h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr ip6;

		if (ctx_load(ctx, xdp, sizeof(eth), &ip6, sizeof(ip6)))
			return;
		ev->family = AF_INET6;
		ev->proto = ip6.nexthdr;
		__builtin_memcpy(ev->saddr.a, &ip6.saddr, 16);
		__builtin_memcpy(ev->daddr.a, &ip6.daddr, 16);
		l4 = sizeof(eth) + sizeof(ip6);
	} else {
		return;
	}
	if (!l4 || l4 > PKT_L4_OFF_MAX)
		return;
	if (ev->proto == IPPROTO_ICMP || ev->proto == IPPROTO_ICMPV6_) {
		mon_icmp_read(ev, ctx, xdp, l4);
		return;
	}
	if ((ev->proto != IPPROTO_TCP && ev->proto != IPPROTO_UDP) ||
	    ctx_load(ctx, xdp, l4, ports, 4))
		return;
	ev->sport = bpf_ntohs(ports[0]);
	ev->dport = bpf_ntohs(ports[1]);
	if (ev->proto == IPPROTO_TCP && !ctx_load(ctx, xdp, l4 + 13, &flags, 1))
		ev->tcp_flags = flags;
}

static __always_inline void mon_drop_fill(struct pi_dp_mon_event *ev,
					  void *ctx, bool xdp, __u32 pod_id,
					  __u32 reason, __u32 hook)
{
	struct pi_dp_monitor_cpu *mc;
	__u32 zero = 0;

	mon_head(ev, PI_DP_MON_DROP, hook, reason);
	ev->pod_id = pod_id;
	ev->ifindex = xdp ? ((struct xdp_md *)ctx)->ingress_ifindex :
			    ((struct __sk_buff *)ctx)->ifindex;
	ev->len = ctx_len(ctx, xdp);
	ev->dir = reason == PI_DP_DROP_INGRESS_POLICY ||
		  (hook != PI_DP_HOOK_POD_EGRESS && hook != PI_DP_HOOK_INJECT) ?
		  PI_DP_DIR_INGRESS : PI_DP_DIR_EGRESS;
	if (reason == PI_DP_DROP_POLICY || reason == PI_DP_DROP_INGRESS_POLICY) {
		mc = bpf_map_lookup_elem(&monitor_cpu, &zero);
		if (mc)
			ev->rule_id = mc->deny_rule;
	}
	mon_tuple_read(ev, ctx, xdp);
}

/* A drop at `hook` of a packet of pod `pod_id`, for `reason`. */
__noinline int mon_drop(struct __sk_buff *skb, __u32 pod_id, __u32 reason,
			__u32 hook)
{
	struct pi_dp_mon_event *ev;

	if (!skb)
		return 0;
	ev = mon_reserve();
	if (!ev)
		return 0;
	mon_drop_fill(ev, skb, false, pod_id, reason, hook);
	bpf_ringbuf_submit(ev, 0);
	return 0;
}

/* The same at an XDP hook. */
__noinline int mon_drop_xdp(struct xdp_md *ctx, __u32 pod_id, __u32 reason,
			    __u32 hook)
{
	struct pi_dp_mon_event *ev;

	if (!ctx)
		return 0;
	ev = mon_reserve();
	if (!ev)
		return 0;
	mon_drop_fill(ev, ctx, true, pod_id, reason, hook);
	bpf_ringbuf_submit(ev, 0);
	return 0;
}

/* A drop's event, when a monitor wants drops (the caller counts it). */
static __always_inline int drop_at(struct __sk_buff *skb, __u32 pod_id,
				   __u32 reason, __u32 hook)
{
	if (mon_wants(MON_BIT(PI_DP_MON_DROP)))
		mon_drop(skb, pod_id, reason, hook);
	return PI_DROP;
}

/* A policy decision, as mon_verdict reports it. */
struct mon_decision {
	__u32 action;			/* enum pi_dp_action */
	__u32 rule_id;
	__u32 dir;			/* enum pi_dp_policy_dir */
	__u32 len;
	__u32 how;			/* enum pi_dp_mon_decided */
};

/* What `probe --trace` follows: a probe's packets (its ports, ICMP echo
 * ids, are from PI_DP_PROBE_PORT_LO on) and their answers. ICMP is taken
 * whole; the reader keeps the probe's. */
static __always_inline bool mon_probe_like(__u8 proto, __u16 sport,
					   __u16 dport)
{
	if (proto == IPPROTO_ICMP || proto == IPPROTO_ICMPV6_)
		return true;
	return sport >= PI_DP_PROBE_PORT_LO || dport >= PI_DP_PROBE_PORT_LO;
}

/* The verdict of the program at `hook` on a probe's packet, for `probe
 * --trace`: called at the program's end, while a trace runs. */
__noinline int mon_trace_exit(struct __sk_buff *skb, __u32 hook, int verdict)
{
	struct pi_dp_mon_event *ev;

	if (!skb)
		return 0;
	ev = mon_reserve();
	if (!ev)
		return 0;
	mon_head(ev, PI_DP_MON_TRACE, hook, (__u32)verdict);
	mon_tuple_read(ev, skb, false);
	if (!ev->family || !mon_probe_like(ev->proto, ev->sport, ev->dport)) {
		bpf_ringbuf_discard(ev, 0);
		return 0;
	}
	ev->pod_id = PI_DP_MON_NO_POD;
	ev->ifindex = skb->ifindex;
	ev->len = skb->len;
	bpf_ringbuf_submit(ev, 0);
	return 0;
}

/* At a program's end: its verdict traced, when a trace runs. */
static __always_inline int mon_exit(struct __sk_buff *skb, __u32 hook,
				    int verdict)
{
	if (mon_wants(MON_BIT(PI_DP_MON_TRACE)))
		mon_trace_exit(skb, hook, verdict);
	return verdict;
}

/* A policy decision of pod `pod_id` for packet p (its flow's first, or an
 * untracked one): its event, when verdicts are wanted, and a deny's rule
 * kept for the drop event that follows. */
__noinline int mon_verdict(const struct pkt *p, const struct mon_decision *d,
			   __u32 pod_id)
{
	struct pi_dp_monitor_cpu *mc;
	struct pi_dp_mon_event *ev;
	__u32 zero = 0;

	if (!p || !d)
		return 0;
	if (d->action == PI_DP_DENY) {
		mc = bpf_map_lookup_elem(&monitor_cpu, &zero);
		if (mc)
			mc->deny_rule = d->rule_id;
	}
	/* (reserved in the buffer, not built on the stack: this runs two
	 * calls deep, under ct_verdict's frame) */
	if (mon_wants(MON_BIT(PI_DP_MON_TRACE)) &&
	    mon_probe_like(p->proto, p->sport, p->dport)) {
		ev = mon_reserve();
		if (ev) {
			mon_head(ev, PI_DP_MON_TRACE, PI_DP_HOOK_NONE,
				 d->action);
			ev->pod_id = pod_id;
			ev->dir = d->dir;
			ev->rule_id = d->rule_id;
			ev->len = d->len;
			ev->aux = d->how;
			mon_tuple_of(ev, p);
			bpf_ringbuf_submit(ev, 0);
		}
	}
	/* verdicts are the rule walks' */
	if (d->how != PI_DP_DECIDED_WALK ||
	    !mon_wants(MON_BIT(PI_DP_MON_VERDICT)))
		return 0;
	ev = mon_reserve();
	if (!ev)
		return 0;
	mon_head(ev, PI_DP_MON_VERDICT, PI_DP_HOOK_NONE, d->action);
	ev->pod_id = pod_id;
	ev->dir = d->dir;
	ev->rule_id = d->rule_id;
	ev->len = d->len;
	mon_tuple_of(ev, p);
	bpf_ringbuf_submit(ev, 0);
	return 0;
}

#ifdef PI_BENCH_NO_MONITOR
#define mon_verdict(p, d, pod_id)	((void)(p), (void)(d), (void)(pod_id))
#endif

/* An event about a packet the injection object handles (it knows pods by
 * their devices only): an injection, a capture, or one of its drops. */
__noinline int mon_inject_event(struct __sk_buff *skb, const struct pkt *p,
				__u32 kind, __u32 reason, __u32 aux)
{
	struct pi_dp_mon_event *ev;

	if (!skb || !p)
		return 0;
	ev = mon_reserve();
	if (!ev)
		return 0;
	mon_head(ev, kind, PI_DP_HOOK_INJECT, reason);
	ev->pod_id = PI_DP_MON_NO_POD;
	ev->ifindex = skb->ifindex;
	ev->aux = aux;
	ev->len = skb->len;
	ev->dir = PI_DP_DIR_EGRESS;
	mon_tuple_of(ev, p);
	bpf_ringbuf_submit(ev, 0);
	return 0;
}

#endif
