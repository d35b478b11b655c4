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
	/* (16 bits and frag_nh beside it: struct pkt is on the stack of
	 * every frame of a call chain, whose sum 6.1 holds to 512 bytes) */
	__u16 family;		/* AF_INET, AF_INET6, or 0 for ARP */
	__u8 frag_nh;		/* of a fragment, the protocol its table key
				 * holds: IPv4's, or IPv6's header after the
				 * fragment header, which a later fragment
				 * has as well (the first may go on through
				 * destination options or AH to proto) */
	__u8 pad;
	struct pi_dp_addr saddr;	/* ARP: sender IP in a[0] */
	struct pi_dp_addr daddr;	/* ARP: target IP in a[0] */
	__u16 sport;		/* host order; 0 when the protocol has none */
	__u16 dport;
	__u8 proto;		/* IPPROTO_* of the transport header */
	__u8 has_ports;		/* ports known: read, or of the first fragment */
	__u8 tcp_flags;
	__u8 frag;		/* enum pkt_frag */
	__u32 l4_off;		/* offset of the transport header */
	__u32 l3_end;		/* offset just past the IP packet */
	__u32 frag_id;		/* of a fragment, as in its header */
};
_Static_assert(sizeof(struct pkt) == 56, "struct pkt: see family");

enum pkt_frag {
	PKT_FRAG_NONE = 0,	/* a whole packet */
	PKT_FRAG_FIRST,		/* offset 0, more fragments follow */
	PKT_FRAG_LATER,		/* offset > 0: no transport header */
};

enum parse_result {
	PARSE_OK = 0,
	PARSE_ARP,
	PARSE_UNSUPPORTED,
	PARSE_MALFORMED,
	PARSE_VLAN,		/* an 802.1Q or 802.1ad tag in the frame */
	PARSE_FRAG_ORPHAN,	/* a non-first fragment without a first one
				 * let through (addresses and proto filled) */
	PARSE_FRAG_TINY,	/* a first fragment without room for the
				 * transport header (addresses filled) */
};

#define IPPROTO_HOPOPTS_	0
#define IPPROTO_ROUTING_	43
#define IPPROTO_FRAGMENT_	44
#define IPPROTO_AH_		51
#define IPPROTO_DSTOPTS_	60
#define ETH_P_8021Q_		0x8100
#define ETH_P_8021AD_		0x88A8

/* ICMP and ICMPv6 message types the datapath tells apart */
#define ICMP_ECHOREPLY_		0
#define ICMP_DEST_UNREACH_	3
#define ICMP_ECHO_		8
#define ICMP_TIME_EXCEEDED_	11
#define ICMP_PARAMETERPROB_	12
#define ICMP6_DST_UNREACH_	1
#define ICMP6_PACKET_TOO_BIG_	2
#define ICMP6_TIME_EXCEEDED_	3
#define ICMP6_PARAM_PROB_	4
#define ICMP6_ECHO_REQUEST_	128
#define ICMP6_ECHO_REPLY_	129

/* struct pkt's tcp_flags: byte 13 of the TCP header */
#define TCP_FIN	0x01
#define TCP_SYN	0x02
#define TCP_RST	0x04
#define TCP_ACK	0x10

/*
 * The farthest transport header the parser can place (l4_off): Ethernet,
 * IPv6, then PI_MAX_EXTHDRS extension headers of the longest kind, 8 *
 * (255 + 1) bytes each (an AH is at most 4 * (255 + 2)). IPv4's is nearer:
 * 14 + 60. A program that reads at l4_off plus a constant bounds l4_off
 * by this, so that the verifier knows the offset's range through the
 * arithmetic (XDP's direct access needs it below 64 KiB); any smaller
 * bound would send a valid packet with long extension headers down
 * another path.
 */
#define PKT_L4_OFF_MAX	(sizeof(struct ethhdr) + sizeof(struct ipv6hdr) + \
			 PI_MAX_EXTHDRS * 8 * 256)

/* First fragments let through, by fragment identity (include/podinject_abi.h).
 * Every object that parses has its own; the node's is pinned and shared
 * with the XDP programs. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, PI_MAX_FRAGS);
	__type(key, struct pi_frag_key);
	__type(value, struct pi_frag);
} frags SEC(".maps");

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

/* Reads len bytes at off of either kind of context, linear or not. */
static __always_inline int ctx_load(void *ctx, bool xdp, __u32 off, void *to,
				    __u32 len)
{
	if (xdp)
		return bpf_xdp_load_bytes(ctx, off, to, len);
	return bpf_skb_load_bytes(ctx, off, to, len);
}

static __always_inline void frag_key(struct pi_frag_key *k,
				     const struct pkt *p)
{
	__builtin_memset(k, 0, sizeof(*k));
	k->family = p->family;
	k->proto = p->frag_nh;
	k->id = p->frag_id;
	k->saddr = p->saddr;
	k->daddr = p->daddr;
}

/* A first fragment was let through: its later fragments get its ports,
 * and so its verdict. Nothing for any other packet. */
static __always_inline void frag_note(const struct pkt *p)
{
	struct pi_frag_key k;
	struct pi_frag v = {};

	if (p->frag != PKT_FRAG_FIRST)
		return;
	frag_key(&k, p);
	v.sport = p->sport;
	v.dport = p->dport;
	v.has_ports = p->has_ports;
	v.proto = p->proto;
	bpf_map_update_elem(&frags, &k, &v, BPF_ANY);
}

/* The transport header of a whole packet or a first fragment: it must lie
 * inside the IP packet (a frame's padding is no header). The ports of a
 * later fragment are those its first fragment had. */
static __always_inline int parse_l4(void *ctx, bool xdp, struct pkt *p)
{
	__u32 need;
	__u8 h[14];

	if (p->frag == PKT_FRAG_LATER) {
		struct pi_frag_key k;
		struct pi_frag *v;

		frag_key(&k, p);
		v = bpf_map_lookup_elem(&frags, &k);
		if (!v)
			return PARSE_FRAG_ORPHAN;
		p->sport = v->sport;
		p->dport = v->dport;
		p->has_ports = v->has_ports;
		/* 0: an entry of a build before proto was kept, made only
		 * where the key's protocol was the final one */
		if (v->proto)
			p->proto = v->proto;
		return PARSE_OK;
	}
	if (p->proto == IPPROTO_TCP)
		need = sizeof(struct tcphdr);
	else if (p->proto == IPPROTO_UDP)
		need = sizeof(struct udphdr);
	else
		return PARSE_OK;
	if (p->l4_off + need > p->l3_end ||
	    ctx_load(ctx, xdp, p->l4_off, h, p->proto == IPPROTO_TCP ? 14 : 4))
		return p->frag == PKT_FRAG_FIRST ? PARSE_FRAG_TINY :
						   PARSE_MALFORMED;
	p->sport = ((__u16)h[0] << 8) | h[1];
	p->dport = ((__u16)h[2] << 8) | h[3];
	if (p->proto == IPPROTO_TCP)
		p->tcp_flags = h[13];
	p->has_ports = 1;
	return PARSE_OK;
}

/* IPv6 extension headers, a bounded walk: hop-by-hop, routing,
 * destination options, fragment and AH are stepped over to the transport
 * header; a fragment header says which fragment this is. A later
 * fragment stops the walk: what follows its fragment header is payload,
 * its next-header field names the transport protocol. */
static __always_inline int walk_ext6(void *ctx, bool xdp, struct pkt *p,
				     __u8 nh)
{
	__u32 off = p->l4_off, i;
	__u8 h[8];

#pragma unroll
	for (i = 0; i < PI_MAX_EXTHDRS; i++) {
		if (nh != IPPROTO_HOPOPTS_ && nh != IPPROTO_ROUTING_ &&
		    nh != IPPROTO_DSTOPTS_ && nh != IPPROTO_AH_ &&
		    nh != IPPROTO_FRAGMENT_)
			break;
		if (off + 8 > p->l3_end || ctx_load(ctx, xdp, off, h, 8))
			return p->frag == PKT_FRAG_FIRST ? PARSE_FRAG_TINY :
							   PARSE_MALFORMED;
		if (nh == IPPROTO_FRAGMENT_) {
			__u16 fo = ((__u16)h[2] << 8) | h[3];

			__builtin_memcpy(&p->frag_id, h + 4, 4);
			nh = h[0];
			p->frag_nh = nh;
			off += 8;
			if (fo & 0xfff8) {
				p->frag = PKT_FRAG_LATER;
				break;
			}
			/* offset 0 without more: an atomic fragment, whole */
			if (fo & 1)
				p->frag = PKT_FRAG_FIRST;
			continue;
		}
		/* the length of the header stepped over, in its own units:
		 * AH counts 4-byte words less two, the others 8-byte words
		 * less one */
		if (nh == IPPROTO_AH_)
			off += ((__u32)h[1] + 2) * 4;
		else
			off += ((__u32)h[1] + 1) * 8;
		nh = h[0];
	}
	if (p->frag != PKT_FRAG_LATER &&
	    (nh == IPPROTO_HOPOPTS_ || nh == IPPROTO_ROUTING_ ||
	     nh == IPPROTO_DSTOPTS_ || nh == IPPROTO_AH_ ||
	     nh == IPPROTO_FRAGMENT_))
		return PARSE_MALFORMED;		/* longer than the walk */
	p->proto = nh;
	p->l4_off = off;
	return PARSE_OK;
}

static __always_inline int parse_arp(void *ctx, bool xdp, struct pkt *p)
{
	__u8 h[28];

	if (ctx_load(ctx, xdp, sizeof(struct ethhdr), h, sizeof(h)))
		return PARSE_MALFORMED;
	/* Ethernet and IPv4 only; anything else names no address of ours */
	if (h[0] != 0 || h[1] != 1 || h[2] != 0x08 || h[3] != 0 ||
	    h[4] != 6 || h[5] != 4)
		return PARSE_MALFORMED;
	__builtin_memcpy(&p->saddr.a[0], h + 14, 4);
	__builtin_memcpy(&p->daddr.a[0], h + 24, 4);
	return PARSE_ARP;
}

static __always_inline int parse_ctx(void *ctx, bool xdp, struct pkt *p)
{
	void *data, *data_end;
	struct ethhdr *eth;
	__u32 len;
	int ret;

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
		__u16 fo;

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
		p->l3_end = sizeof(*eth) + bpf_ntohs(iph->tot_len);
		fo = bpf_ntohs(iph->frag_off);
		if (fo & 0x1fff)
			p->frag = PKT_FRAG_LATER;
		else if (fo & 0x2000)
			p->frag = PKT_FRAG_FIRST;
		if (p->frag) {
			p->frag_id = iph->id;
			p->frag_nh = iph->protocol;
		}
		return parse_l4(ctx, xdp, p);
	}
	if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6;
		__u8 nh;

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
		nh = ip6->nexthdr;
		p->l4_off = sizeof(*eth) + sizeof(*ip6);
		p->l3_end = p->l4_off + bpf_ntohs(ip6->payload_len);
		ret = walk_ext6(ctx, xdp, p, nh);
		if (ret != PARSE_OK)
			return ret;
		return parse_l4(ctx, xdp, p);
	}
	if (eth->h_proto == bpf_htons(ETH_P_ARP))
		return parse_arp(ctx, xdp, p);
	if (eth->h_proto == bpf_htons(ETH_P_8021Q_) ||
	    eth->h_proto == bpf_htons(ETH_P_8021AD_))
		return PARSE_VLAN;
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

static __always_inline bool addr_eq(const struct pi_dp_addr *a,
				    const struct pi_dp_addr *b)
{
	return a->a[0] == b->a[0] && a->a[1] == b->a[1] &&
	       a->a[2] == b->a[2] && a->a[3] == b->a[3];
}

/* fe80::/10: neighbour discovery and router solicitation come from here */
static __always_inline bool addr6_is_link_local(const struct pi_dp_addr *a)
{
	return (a->a[0] & bpf_htonl(0xffc00000)) == bpf_htonl(0xfe800000);
}

static __always_inline bool addr6_is_unspecified(const struct pi_dp_addr *a)
{
	return !(a->a[0] | a->a[1] | a->a[2] | a->a[3]);
}

#endif
