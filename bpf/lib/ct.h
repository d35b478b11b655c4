/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Connection tracking in front of the policy. A flow is decided by the
 * policy of the direction that opened it, on its first packet; its later
 * packets and its replies find the flow's entry and pass without a rule
 * walk. Denied flows get no entry: each of their packets is decided (and
 * counted against the deny rule) again.
 *
 * Entries are named from the pod's side (include/podinject_abi.h,
 * struct pi_ct_key), so a pod's egress and ingress points find the same
 * one. Each holds the revision of the policy it was decided at; a packet
 * that finds an entry of an older revision has the flow decided again
 * (with the packet that opened it, as the entry names it), and a flow the
 * new policy denies is cut: its entry stays, marked, and drops its
 * packets both ways while that policy holds (PI_DP_CT_CUT). A flow's
 * entry is opened by any packet its direction's policy allows (a
 * connection open before tracking began is picked up mid-stream), but
 * never by an echo reply, and a SYN or echo request from the end that
 * did not open an entry is a new flow of its own.
 *
 * Tracked: TCP and UDP with ports, ICMP and ICMPv6 echo (by identifier),
 * and other protocols by address. ICMP errors about a tracked flow (the
 * header they quote names it) are related and pass with it. Not tracked,
 * decided packet by packet as before: other ICMP messages (neighbour
 * discovery, MLD, router solicitation), errors that quote no tracked
 * flow, and ICMP fragments after the first (which carry no identifier).
 */
#ifndef PODINJECT_BPF_CT_H
#define PODINJECT_BPF_CT_H

#include "parse.h"
#include "policy.h"
#include "node_maps.h"

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, PI_MAX_CT);
	__type(key, struct pi_ct_key);
	__type(value, struct pi_ct_entry);
} ct SEC(".maps");

enum ct_kind {
	CT_UNTRACKED = 0,	/* decided packet by packet */
	CT_FLOW,		/* a packet of a flow the key names */
	CT_RELATED,		/* an ICMP error quoting the flow the key names */
	CT_NO_RULES,		/* the pod has no rules: allowed, nothing kept */
	CT_FLOW_ANSWER,		/* an echo reply: a packet of the flow the key
				 * names, which cannot open one (an
				 * unasked-for reply would make an entry that
				 * lets the pod's request to that peer pass as
				 * its answer, whatever the pod's egress says) */
};

static __always_inline bool icmp_is_echo(__u32 family, __u8 type)
{
	if (family == AF_INET)
		return type == ICMP_ECHO_ || type == ICMP_ECHOREPLY_;
	return type == ICMP6_ECHO_REQUEST_ || type == ICMP6_ECHO_REPLY_;
}

static __always_inline bool icmp_is_error(__u32 family, __u8 type)
{
	if (family == AF_INET)
		return type == ICMP_DEST_UNREACH_ ||
		       type == ICMP_TIME_EXCEEDED_ ||
		       type == ICMP_PARAMETERPROB_;
	return type == ICMP6_DST_UNREACH_ || type == ICMP6_PACKET_TOO_BIG_ ||
	       type == ICMP6_TIME_EXCEEDED_ || type == ICMP6_PARAM_PROB_;
}

static __always_inline bool proto_is_icmp(__u32 family, __u8 proto)
{
	return family == AF_INET ? proto == IPPROTO_ICMP :
				   proto == IPPROTO_ICMPV6_;
}

/* The key of the flow an ICMP error at `off` quotes, as the pod at `dir`
 * names it: the quoted packet is one the pod sent (an error arriving at
 * its ingress) or one it received (an error it sends). */
static __always_inline bool ct_key_quoted(void *ctx, bool xdp,
					  const struct pkt *p, __u32 dir,
					  __u32 off, struct pi_ct_key *k)
{
	struct pi_dp_addr src = {}, dst = {};
	__u16 sport = 0, dport = 0;
	__u8 h[40], l4[8], proto;
	__u32 l4off;

	if (p->family == AF_INET) {
		if (ctx_load(ctx, xdp, off, h, 20))
			return false;
		if ((h[0] >> 4) != 4 || (h[0] & 0xf) < 5)
			return false;
		proto = h[9];
		__builtin_memcpy(&src.a[0], h + 12, 4);
		__builtin_memcpy(&dst.a[0], h + 16, 4);
		l4off = off + (h[0] & 0xf) * 4;
	} else {
		if (ctx_load(ctx, xdp, off, h, 40))
			return false;
		if ((h[0] >> 4) != 6)
			return false;
		proto = h[6];
		__builtin_memcpy(src.a, h + 8, 16);
		__builtin_memcpy(dst.a, h + 24, 16);
		l4off = off + 40;
	}
	/* An error goes back to the sender of the packet it quotes, as
	 * Linux's conntrack wants of one (nf_conntrack_inet_error). Sent
	 * elsewhere it answers nothing: else a pod could send ICMP errors,
	 * and the bytes after their quote, to any address its egress
	 * policy denies, by quoting a flow it may use. */
	if (!addr_eq(&p->daddr, &src))
		return false;
	if (ctx_load(ctx, xdp, l4off, l4, 8))
		return false;
	if (proto == IPPROTO_TCP || proto == IPPROTO_UDP) {
		sport = ((__u16)l4[0] << 8) | l4[1];
		dport = ((__u16)l4[2] << 8) | l4[3];
	} else if (proto_is_icmp(p->family, proto)) {
		if (!icmp_is_echo(p->family, l4[0]))
			return false;
		/* the identifier names the pod's end of an echo flow */
		sport = dport = ((__u16)l4[4] << 8) | l4[5];
		if (dir == PI_DP_DIR_INGRESS)
			dport = 0;
		else
			sport = 0;
	}
	__builtin_memset(k, 0, sizeof(*k));
	k->family = p->family;
	k->proto = proto;
	if (dir == PI_DP_DIR_INGRESS) {
		/* the pod sent the quoted packet */
		k->pod = src;
		k->peer = dst;
		k->pod_port = sport;
		k->peer_port = dport;
	} else {
		k->pod = dst;
		k->peer = src;
		k->pod_port = dport;
		k->peer_port = sport;
	}
	return true;
}

/* What the tracker makes of the packet, and the key that names it. */
static __always_inline int ct_classify(void *ctx, bool xdp,
				       const struct pkt *p, __u32 dir,
				       struct pi_ct_key *k)
{
	int kind = CT_FLOW;
	__u8 h[8];

	if (p->family != AF_INET && p->family != AF_INET6)
		return CT_UNTRACKED;
	if (proto_is_icmp(p->family, p->proto)) {
		if (p->frag == PKT_FRAG_LATER ||
		    ctx_load(ctx, xdp, p->l4_off, h, 8))
			return CT_UNTRACKED;
		if (icmp_is_error(p->family, h[0]))
			return ct_key_quoted(ctx, xdp, p, dir, p->l4_off + 8,
					     k) ? CT_RELATED : CT_UNTRACKED;
		if (!icmp_is_echo(p->family, h[0]))
			return CT_UNTRACKED;
		if (h[0] == ICMP_ECHOREPLY_ || h[0] == ICMP6_ECHO_REPLY_)
			kind = CT_FLOW_ANSWER;
		__builtin_memset(k, 0, sizeof(*k));
		k->pod_port = ((__u16)h[4] << 8) | h[5];
	} else {
		if ((p->proto == IPPROTO_TCP || p->proto == IPPROTO_UDP) &&
		    !p->has_ports)
			return CT_UNTRACKED;
		__builtin_memset(k, 0, sizeof(*k));
		if (dir == PI_DP_DIR_EGRESS) {
			k->pod_port = p->sport;
			k->peer_port = p->dport;
		} else {
			k->pod_port = p->dport;
			k->peer_port = p->sport;
		}
	}
	k->family = p->family;
	k->proto = p->proto;
	if (dir == PI_DP_DIR_EGRESS) {
		k->pod = p->saddr;
		k->peer = p->daddr;
	} else {
		k->pod = p->daddr;
		k->peer = p->saddr;
	}
	return kind;
}

static __always_inline __u64 ct_timeout_ns(const struct pi_ct_key *k,
					   const struct pi_ct_entry *e)
{
	static const __u32 defaults[PI_DP_CT_TO_MAX] = PI_CT_TIMEOUT_DEFAULTS;
	struct pi_node_config *cfg;
	__u32 zero = 0, kind, s;

	if (k->proto == IPPROTO_TCP)
		kind = e->state == PI_DP_CT_OPENING ? PI_DP_CT_TO_TCP_OPENING :
		       e->state == PI_DP_CT_CLOSING ? PI_DP_CT_TO_TCP_CLOSING :
						   PI_DP_CT_TO_TCP_ESTABLISHED;
	else if (proto_is_icmp(k->family, k->proto))
		kind = PI_DP_CT_TO_ICMP;
	else
		kind = PI_DP_CT_TO_UDP;
	cfg = bpf_map_lookup_elem(&node_config, &zero);
	s = cfg && kind < PI_DP_CT_TO_MAX ? cfg->ct_timeout[kind] : 0;
	if (!s && kind < PI_DP_CT_TO_MAX)
		s = defaults[kind];
	return (__u64)s * 1000000000ull;
}

static __always_inline void ct_tcp_update(struct pi_ct_entry *e, __u32 dir,
					  __u8 flags)
{
	if (flags & TCP_RST) {
		e->state = PI_DP_CT_CLOSING;
		return;
	}
	if (flags & TCP_FIN)
		e->flags |= dir == PI_DP_DIR_EGRESS ? PI_DP_CT_FIN_POD :
						   PI_DP_CT_FIN_PEER;
	if ((e->flags & (PI_DP_CT_FIN_POD | PI_DP_CT_FIN_PEER)) ==
	    (PI_DP_CT_FIN_POD | PI_DP_CT_FIN_PEER))
		e->state = PI_DP_CT_CLOSING;
	else if (e->state == PI_DP_CT_OPENING && dir != e->dir)
		e->state = PI_DP_CT_ESTABLISHED;
}

/*
 * The tracker's clock: CLOCK_MONOTONIC as of the last tick. Its timeouts
 * are seconds, so a tick's lag decides nothing, and the fine clock cost
 * a tracked packet 40 to 50 ns of its 200 where the clock source is a
 * hypervisor's (kvm-clock: docs/bench.md, "Where a packet's time goes");
 * the coarse one is a load. User space reads the same clock
 * (lib/ct.c: CLOCK_MONOTONIC); both take the idle time with pi_ct_idle_ns.
 */
static __always_inline __u64 ct_now(void)
{
	return bpf_ktime_get_coarse_ns();
}

/* An entry found for a packet in `dir`: its state moves on. */
static __always_inline void ct_seen(struct pi_ct_entry *e,
				    const struct pi_ct_key *k, __u32 dir,
				    const struct pkt *p, __u32 len, __u64 now)
{
	if (dir != e->dir)
		e->flags |= PI_DP_CT_REPLIED;
	if (k->proto == IPPROTO_TCP)
		ct_tcp_update(e, dir, p->tcp_flags);
	else if (dir != e->dir)
		e->state = PI_DP_CT_ESTABLISHED;
	e->last_ns = now;
	e->packets[dir & 1]++;
	e->bytes[dir & 1] += len;
}

/*
 * The two halves of the tracker are global functions: the verifier checks
 * each once, on its own, instead of every path through the packet's
 * parsing times every path through the flow's state at each place a
 * program decides policy (which it did, half a million instructions for
 * pod_egress). What they take is plain memory: the packet's summary and
 * the key.
 */
#ifdef CT_XDP
__noinline int ct_classify_ctx(struct xdp_md *ctx, const struct pkt *p,
			       __u32 dir, struct pi_ct_key *k)
{
	if (!ctx || !p || !k)
		return CT_UNTRACKED;
	return ct_classify(ctx, true, p, dir, k);
}
#else
__noinline int ct_classify_ctx(struct __sk_buff *ctx, const struct pkt *p,
			       __u32 dir, struct pi_ct_key *k)
{
	if (!ctx || !p || !k)
		return CT_UNTRACKED;
	return ct_classify(ctx, false, p, dir, k);
}
#endif

/* A deny of the policy of the direction opposite the packet's: a reply
 * of a flow decided again, after a policy edit, by the policy of the
 * direction that opened it. Its drop is that direction's (ct_drop_reason),
 * as its rule is. */
#define CT_DENY_OPENER	3

/* The drop reason of ct_policy's deny `verdict` of a packet going `dir`. */
static __always_inline __u32 ct_drop_reason(int verdict, __u32 dir)
{
	if (verdict == CT_DENY_OPENER)
		dir = !dir;
	return dir == PI_DP_DIR_EGRESS ? PI_DP_DROP_POLICY :
					 PI_DP_DROP_INGRESS_POLICY;
}

/* Whether packet p, of the flow a key names, is one that opens a
 * connection: a TCP SYN (without ACK), an ICMP echo request. */
static __always_inline bool ct_opener(const struct pkt *p,
				      const struct pi_ct_key *k, __u32 kind)
{
	if (k->proto == IPPROTO_TCP)
		return (p->tcp_flags & (TCP_SYN | TCP_ACK)) == TCP_SYN;
	return kind == CT_FLOW && proto_is_icmp(k->family, k->proto);
}

/*
 * The verdict for packet p of the flow `key` names (kind: enum ct_kind),
 * the policy of pod key->pod_id in `dir` with connection
 * tracking: PI_DP_ALLOW, PI_DP_DENY or CT_DENY_OPENER. Counts against the deciding rule as
 * policy_check does (for a tracked flow: the packets in the direction that
 * opened it, against the rule that let it open). One rule walk at most,
 * at one place: every way that needs a decision fills in what to decide.
 */
__noinline int ct_verdict(const struct pkt *p, struct pi_ct_key *key,
			  __u32 kind, __u32 dir, __u32 len)
{
	struct pi_ct_entry *e = NULL, fresh = {};
	struct policy_verdict v;
	struct pi_policy_ref ref;
	const struct pi_dp_addr *peer;
	__u32 ddir = dir, dlen = len;
	bool flow = kind == CT_FLOW || kind == CT_FLOW_ANSWER;
	__u8 has_ports, proto;
	struct pi_ct_key k;
	__u64 now = 0;
	__u32 pod_id;
	__u16 port;

	if (!p || !key)
		return PI_DP_DENY;
	k = *key;
	pod_id = k.pod_id;
	if (kind == CT_NO_RULES) {
		struct mon_decision d = {
			.action = PI_DP_ALLOW, .dir = dir, .len = len,
			.how = PI_DP_DECIDED_NO_RULES,
		};

		mon_verdict(p, &d, pod_id);
		return PI_DP_ALLOW;
	}
	if (kind != CT_UNTRACKED)
		e = bpf_map_lookup_elem(&ct, &k);
	/* An error about a flow let through by an earlier policy passes
	 * only once the flow has met the current one (its next packet does):
	 * until then the rules decide the error itself. */
	if (kind == CT_RELATED && e) {
		policy_ref_of(pod_id, e->dir & 1, &ref);
		if (ref.rev == e->rev) {
			if (mon_wants(MON_BIT(PI_DP_MON_TRACE))) {
				struct mon_decision d = {
					.action = PI_DP_ALLOW,
					.rule_id = e->rule_id,
					.dir = dir, .len = len,
					.how = PI_DP_DECIDED_RELATED,
				};

				mon_verdict(p, &d, pod_id);
			}
			return PI_DP_ALLOW;
		}
		e = NULL;
	}
	if (flow) {
		now = ct_now();
		/* an entry stamped a little later than this clock reads (by
		 * an earlier build with the fine clock, or on another CPU
		 * since) is not idle */
		if (e && pi_ct_idle_ns(now, e->last_ns) > ct_timeout_ns(&k, e)) {
			bpf_map_delete_elem(&ct, &k);
			e = NULL;
		}
		/* A SYN or an echo request on a closed or cut flow's key, or
		 * from the end that did not open the flow, opens a new one:
		 * decided by the policy of its own direction, as any first
		 * packet. The entry is replaced only if that allows it: a
		 * cut flow stays cut, and another's flow (one a peer's
		 * packet opened, even a forged one) never lets the pod's
		 * own new connection pass as its reply. */
		if (e && ct_opener(p, &k, kind) &&
		    (e->state == PI_DP_CT_CLOSING ||
		     (e->flags & PI_DP_CT_CUT) || dir != (e->dir & 1)))
			e = NULL;
		if (e) {
			ddir = e->dir & 1;
			policy_ref_of(pod_id, ddir, &ref);
			/* Cut by the policy still in force: dropped, by the
			 * deny rule that cut it, whichever way it goes. */
			if ((e->flags & PI_DP_CT_CUT) && ref.rev == e->rev + 1) {
				e->last_ns = now;
				rule_count(e->rule_id, len);
				if (mon_wants(MON_BIT(PI_DP_MON_DROP) |
					      MON_BIT(PI_DP_MON_TRACE))) {
					struct mon_decision d = {
						.action = PI_DP_DENY,
						.rule_id = e->rule_id,
						.dir = ddir, .len = len,
						.how = PI_DP_DECIDED_TRACKED,
					};

					mon_verdict(p, &d, pod_id);
				}
				return ddir == dir ? PI_DP_DENY :
						     CT_DENY_OPENER;
			}
			if (!(e->flags & PI_DP_CT_CUT) && ref.rev == e->rev) {
				if (ddir == dir)
					rule_count(e->rule_id, len);
				ct_seen(e, &k, dir, p, len, now);
				if (mon_wants(MON_BIT(PI_DP_MON_TRACE))) {
					struct mon_decision d = {
						.action = PI_DP_ALLOW,
						.rule_id = e->rule_id,
						.dir = dir, .len = len,
						.how = PI_DP_DECIDED_TRACKED,
					};

					mon_verdict(p, &d, pod_id);
				}
				return PI_DP_ALLOW;
			}
			/* decided at another revision: again, as its first
			 * packet was, counted when this one goes that way */
			if (ddir != dir)
				dlen = 0;
		}
	}
	if (flow) {
		/* the flow's first packet, as the key names it: the peer
		 * is the far end, the destination port the opener's */
		peer = &k.peer;
		proto = k.proto;
		has_ports = proto == IPPROTO_TCP || proto == IPPROTO_UDP;
		port = !has_ports ? 0 :
		       ddir == PI_DP_DIR_EGRESS ? k.peer_port : k.pod_port;
	} else {
		peer = dir == PI_DP_DIR_EGRESS ? &p->daddr : &p->saddr;
		proto = p->proto;
		has_ports = p->has_ports;
		port = p->dport;
	}
	policy_decide(pod_id, ddir, p->family, peer, proto, has_ports, port,
		      dlen, &v);
	if (mon_wants(MON_BIT(PI_DP_MON_DROP) | MON_BIT(PI_DP_MON_VERDICT) |
		      MON_BIT(PI_DP_MON_TRACE))) {
		struct mon_decision d = {
			.action = v.action,
			.rule_id = v.rule_id,
			.dir = ddir,
			.len = len,
			.how = PI_DP_DECIDED_WALK,
		};

		mon_verdict(p, &d, pod_id);
	}
	if (!flow)
		return v.action;
	if (e) {
		if (v.action == PI_DP_DENY) {
			/* cut: the entry stays, to drop the flow both ways
			 * (PI_DP_CT_CUT) until the policy changes again or
			 * the flow goes quiet for its timeout */
			e->flags |= PI_DP_CT_CUT;
			e->rev = v.rev - 1;
			e->rule_id = v.rule_id;
			e->last_ns = now;
			/* a deny found through a reply still counts */
			if (!dlen)
				rule_count(v.rule_id, len);
			return ddir == dir ? PI_DP_DENY : CT_DENY_OPENER;
		}
		e->flags &= ~PI_DP_CT_CUT;
		e->rev = v.rev;
		e->rule_id = v.rule_id;
		ct_seen(e, &k, dir, p, len, now);
		return PI_DP_ALLOW;
	}
	if (v.action == PI_DP_DENY || kind == CT_FLOW_ANSWER)
		return v.action;
	fresh.last_ns = now;
	fresh.rev = v.rev;
	fresh.rule_id = v.rule_id;
	fresh.dir = dir;
	fresh.packets[dir & 1] = 1;
	fresh.bytes[dir & 1] = len;
	if (k.proto == IPPROTO_TCP) {
		if (p->tcp_flags & TCP_RST)
			fresh.state = PI_DP_CT_CLOSING;
		else if ((p->tcp_flags & (TCP_SYN | TCP_ACK)) == TCP_SYN)
			fresh.state = PI_DP_CT_OPENING;
		else
			fresh.state = PI_DP_CT_ESTABLISHED;
		if (p->tcp_flags & TCP_FIN)
			fresh.flags |= dir == PI_DP_DIR_EGRESS ?
				       PI_DP_CT_FIN_POD : PI_DP_CT_FIN_PEER;
	} else {
		fresh.state = PI_DP_CT_ESTABLISHED;
	}
	bpf_map_update_elem(&ct, &k, &fresh, BPF_ANY);
	return PI_DP_ALLOW;
}

/*
 * Whether pod `pod_id` has a rule in either direction. A pod with none
 * has nothing to decide, so its packets are not tracked: the lookup of a
 * 48-byte key in the table, the clock and the entry's update were most of
 * what such a pod paid per packet (docs/bench.md, "Where a packet's time
 * goes"). Its first rule turns tracking on; the library enters the
 * pod's open connections before it publishes that rule, so that their
 * replies are known as replies (lib/ct.c, ct_seed_pod).
 */
static __always_inline bool ct_pod_tracked(__u32 pod_id)
{
	struct pi_policy_ref ref;

	policy_ref_of(pod_id, PI_DP_DIR_EGRESS, &ref);
	if (ref.count)
		return true;
	policy_ref_of(pod_id, PI_DP_DIR_INGRESS, &ref);
	return ref.count;
}

/* The pod `pod_id`'s policy in `dir` for packet p, with connection
 * tracking: PI_DP_ALLOW, or a deny (PI_DP_DENY, CT_DENY_OPENER) whose
 * drop reason ct_drop_reason gives. */
static __always_inline int ct_policy(void *ctx, bool xdp, __u32 pod_id,
				     __u32 dir, const struct pkt *p,
				     __u32 len)
{
	struct pi_ct_key k = {};
	int kind;

	if (!ct_pod_tracked(pod_id)) {
		/* verdict events are the rule walks' (monitor.h): only a
		 * trace is told why the packet passed */
		if (!mon_wants(MON_BIT(PI_DP_MON_TRACE)))
			return PI_DP_ALLOW;
		k.pod_id = pod_id;
		return ct_verdict(p, &k, CT_NO_RULES, dir, len);
	}
	kind = ct_classify_ctx(ctx, p, dir, &k);
	k.pod_id = pod_id;
	return ct_verdict(p, &k, kind, dir, len);
}

#endif
