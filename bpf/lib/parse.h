/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Packet parsing into a flat summary that policy, routing and injection
 * decide on, from a tc or an XDP context. Only the headers are read,
 * directly from the linear area; when a header of an skb is not linear yet
 * it is pulled once.
 */
#ifndef PODINJECT_BPF_PARSE_H
#define PODINJECT_BPF_PARSE_H

#include "common.h"

struct pkt {
	__u32 family;		/* AF_INET, AF_INET6, or 0 for ARP */
	struct pi_addr saddr;
	struct pi_addr daddr;
	__u16 sport;		/* host order; 0 when the protocol has none */
	__u16 dport;
	__u8 proto;		/* IPPROTO_* of the transport header */
	__u8 has_ports;		/* ports were read: first fragment of TCP/UDP */
	__u8 tcp_flags;
	__u8 pad;
	__u32 l4_off;		/* offset of the transport header */
};

enum parse_result {
	PARSE_OK = 0,
	PARSE_ARP,
	PARSE_UNSUPPORTED,
	PARSE_MALFORMED,
};

/*
 * One parser for both kinds of context: tc programs get a struct __sk_buff,
 * XDP programs a struct xdp_md. Both enforcement points of a pod's policy
 * must decide on the same summary, so there is one parser and one rule
 * walker. `xdp` is a constant at every call site and the functions are
 * inlined, so each program keeps only its own side.
 */
static __always_inline void *xdp_data(const struct xdp_md *ctx)
{
	void *p;

	asm volatile("%0 = *(u32 *)(%1 + %2)"
		     : "=r"(p)
		     : "r"(ctx), "i"(__builtin_offsetof(struct xdp_md, data)));
	return p;
}

static __always_inline void *xdp_data_end(const struct xdp_md *ctx)
{
	void *p;

	asm volatile("%0 = *(u32 *)(%1 + %2)"
		     : "=r"(p)
		     : "r"(ctx),
		       "i"(__builtin_offsetof(struct xdp_md, data_end)));
	return p;
}

static __always_inline void *ctx_data(void *ctx, bool xdp)
{
	return xdp ? xdp_data(ctx) : skb_data(ctx);
}

static __always_inline void *ctx_data_end(void *ctx, bool xdp)
{
	return xdp ? xdp_data_end(ctx) : skb_data_end(ctx);
}

/* Length of the whole frame. An XDP program without frags support only
 * ever sees linear frames, so the linear part is all of it. */
static __always_inline __u32 ctx_len(void *ctx, bool xdp)
{
	if (xdp)
		return xdp_data_end(ctx) - xdp_data(ctx);
	return ((struct __sk_buff *)ctx)->len;
}

static __always_inline int pull_linear(struct __sk_buff *skb, __u32 len)
{
	void *data = skb_data(skb);
	void *data_end = skb_data_end(skb);

	if (data + len <= data_end)
		return 0;
	if (len > skb->len)
		return -1;
	return bpf_skb_pull_data(skb, len) ? -1 : 0;
}

/* Makes the first len bytes readable: an skb pulls them into its linear
 * area; an XDP frame has them or is too short. */
static __always_inline int pull_hdr(void *ctx, bool xdp, __u32 len)
{
	if (xdp)
		return xdp_data(ctx) + len <= xdp_data_end(ctx) ? 0 : -1;
	return pull_linear(ctx, len);
}

static __always_inline int parse_l4(void *ctx, bool xdp, struct pkt *p)
{
	void *data, *data_end;

	if (p->proto != IPPROTO_TCP && p->proto != IPPROTO_UDP)
		return PARSE_OK;
	if (pull_hdr(ctx, xdp, p->l4_off + sizeof(struct tcphdr)) &&
	    pull_hdr(ctx, xdp, p->l4_off + sizeof(struct udphdr)))
		return PARSE_MALFORMED;
	data = ctx_data(ctx, xdp);
	data_end = ctx_data_end(ctx, xdp);
	if (p->l4_off > 128)
		return PARSE_MALFORMED;
	if (p->proto == IPPROTO_TCP) {
		struct tcphdr *th = data + p->l4_off;

		if ((void *)(th + 1) > data_end)
			return PARSE_MALFORMED;
		p->sport = bpf_ntohs(th->source);
		p->dport = bpf_ntohs(th->dest);
		p->tcp_flags = ((__u8 *)th)[13];
	} else {
		struct udphdr *uh = data + p->l4_off;

		if ((void *)(uh + 1) > data_end)
			return PARSE_MALFORMED;
		p->sport = bpf_ntohs(uh->source);
		p->dport = bpf_ntohs(uh->dest);
	}
	p->has_ports = 1;
	return PARSE_OK;
}

/* IPv6 extension headers are not walked: a packet whose first next-header
 * is not a transport protocol is classified by that next-header value and
 * carries no ports. Rules naming a port or a transport protocol then do not
 * match it; rules on addresses alone still do (docs/datapath.md). */
static __always_inline int parse_ctx(void *ctx, bool xdp, struct pkt *p)
{
	void *data, *data_end;
	struct ethhdr *eth;
	__u32 len;

	__builtin_memset(p, 0, sizeof(*p));
	if (pull_hdr(ctx, xdp, sizeof(struct ethhdr)))
		return PARSE_MALFORMED;
	len = ctx_len(ctx, xdp);
	data = ctx_data(ctx, xdp);
	data_end = ctx_data_end(ctx, xdp);
	eth = data;
	if ((void *)(eth + 1) > data_end)
		return PARSE_MALFORMED;

	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *iph;
		__u32 ihl;

		if (pull_hdr(ctx, xdp, sizeof(*eth) + sizeof(*iph)))
			return PARSE_MALFORMED;
		data = ctx_data(ctx, xdp);
		data_end = ctx_data_end(ctx, xdp);
		iph = data + sizeof(*eth);
		if ((void *)(iph + 1) > data_end)
			return PARSE_MALFORMED;
		ihl = iph->ihl * 4;
		if (iph->version != 4 || ihl < sizeof(*iph))
			return PARSE_MALFORMED;
		if (bpf_ntohs(iph->tot_len) < ihl ||
		    bpf_ntohs(iph->tot_len) > len - sizeof(*eth))
			return PARSE_MALFORMED;
		p->family = AF_INET;
		p->saddr.a[0] = iph->saddr;
		p->daddr.a[0] = iph->daddr;
		p->proto = iph->protocol;
		p->l4_off = sizeof(*eth) + ihl;
		/* Later fragments carry no transport header. */
		if (iph->frag_off & bpf_htons(0x1fff))
			return PARSE_OK;
		return parse_l4(ctx, xdp, p);
	}
	if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6;

		if (pull_hdr(ctx, xdp, sizeof(*eth) + sizeof(*ip6)))
			return PARSE_MALFORMED;
		data = ctx_data(ctx, xdp);
		data_end = ctx_data_end(ctx, xdp);
		ip6 = data + sizeof(*eth);
		if ((void *)(ip6 + 1) > data_end)
			return PARSE_MALFORMED;
		if (ip6->version != 6)
			return PARSE_MALFORMED;
		if (bpf_ntohs(ip6->payload_len) >
		    len - sizeof(*eth) - sizeof(*ip6))
			return PARSE_MALFORMED;
		p->family = AF_INET6;
		__builtin_memcpy(p->saddr.a, &ip6->saddr, 16);
		__builtin_memcpy(p->daddr.a, &ip6->daddr, 16);
		p->proto = ip6->nexthdr;
		p->l4_off = sizeof(*eth) + sizeof(*ip6);
		return parse_l4(ctx, xdp, p);
	}
	if (eth->h_proto == bpf_htons(ETH_P_ARP))
		return PARSE_ARP;
	return PARSE_UNSUPPORTED;
}

static __always_inline int parse_pkt(struct __sk_buff *skb, struct pkt *p)
{
	return parse_ctx(skb, false, p);
}

static __always_inline int parse_xdp(struct xdp_md *ctx, struct pkt *p)
{
	return parse_ctx(ctx, true, p);
}

static __always_inline bool addr_eq(const struct pi_addr *a,
				    const struct pi_addr *b)
{
	return a->a[0] == b->a[0] && a->a[1] == b->a[1] &&
	       a->a[2] == b->a[2] && a->a[3] == b->a[3];
}

/* fe80::/10: neighbour discovery and router solicitation come from here */
static __always_inline bool addr6_is_link_local(const struct pi_addr *a)
{
	return (a->a[0] & bpf_htonl(0xffc00000)) == bpf_htonl(0xfe800000);
}

static __always_inline bool addr6_is_unspecified(const struct pi_addr *a)
{
	return !(a->a[0] | a->a[1] | a->a[2] | a->a[3]);
}

#endif
