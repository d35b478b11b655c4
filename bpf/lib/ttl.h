/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The node routes pod traffic, so it decrements the TTL (IPv4) or hop
 * limit (IPv6) of what it routes, as a router does; a packet that arrives
 * with one left is not forwarded, and the sender is told with an ICMP
 * time exceeded from the pod's gateway (169.254.1.1, fe80::1: the
 * addresses pod add routes through, lib/lib.h), quoting the packet's IP
 * header and the first 8 bytes after it.
 */
#ifndef PODINJECT_BPF_TTL_H
#define PODINJECT_BPF_TTL_H

#include "parse.h"

/* Off only in bench/progcost: BPF_PROG_TEST_RUN's repeats run on one
 * skb, whose TTL would run out after 63 of them. */
const volatile bool decrement_ttl = true;

#define TTL_GW4		0xa9fe0101	/* 169.254.1.1, host order */
#define TTL_ICMP4_LEN	(14 + 20 + 8 + 28)
#define TTL_ICMP6_LEN	(14 + 40 + 8 + 48)

/* Decrements the TTL or hop limit: 0, or 1 when none was left to give. */
static __always_inline int ttl_dec(struct __sk_buff *skb, const struct pkt *p)
{
	__u8 h[2];

	if (!decrement_ttl)
		return 0;
	if (p->family == AF_INET) {
		__u16 old, new;

		if (bpf_skb_load_bytes(skb, 14 + 8, h, 2))
			return 1;
		if (h[0] <= 1)
			return 1;
		old = bpf_htons(((__u16)h[0] << 8) | h[1]);
		new = bpf_htons(((__u16)(h[0] - 1) << 8) | h[1]);
		h[0]--;
		if (bpf_l3_csum_replace(skb, 14 + 10, old, new, 2) ||
		    bpf_skb_store_bytes(skb, 14 + 8, h, 1, 0))
			return 1;
		return 0;
	}
	if (bpf_skb_load_bytes(skb, 14 + 7, h, 1))
		return 1;
	if (h[0] <= 1)
		return 1;
	h[0]--;
	return bpf_skb_store_bytes(skb, 14 + 7, h, 1, 0) ? 1 : 0;
}

/* Whether the node may answer the packet with an ICMP error at all: not
 * one about an ICMP error, nor about a fragment after the first (RFC 1122
 * 3.2.2, RFC 4443 2.4 (e)), as the kernel's own forwarding does not. */
static __always_inline bool ttl_may_answer(struct __sk_buff *skb,
					   const struct pkt *p)
{
	__u8 type;

	if (p->frag == PKT_FRAG_LATER)
		return false;
	if (p->family == AF_INET ? p->proto != IPPROTO_ICMP :
				   p->proto != IPPROTO_ICMPV6_)
		return true;
	if (bpf_skb_load_bytes(skb, p->l4_off, &type, 1))
		return false;
	if (p->family == AF_INET)
		return type != 3 && type != 4 && type != 5 && type != 11 &&
		       type != 12;
	return type >= 128;	/* ICMPv6 errors are types 0-127 */
}

static __always_inline __u16 csum_fold32(__s64 s)
{
	__u32 c = (__u32)s;

	c = (c & 0xffff) + (c >> 16);
	c = (c & 0xffff) + (c >> 16);
	return ~c & 0xffff;
}

/*
 * Turns the packet into an ICMP time exceeded for its sender, in place,
 * from the sender's gateway; the L2 header turned round (the caller hands
 * it back to the sender's eth0). Returns 0, or -1 when the packet cannot
 * be quoted (too short, IPv4 options).
 */
__noinline int ttl_time_exceeded(struct __sk_buff *skb, __u32 family)
{
	__u8 buf[TTL_ICMP6_LEN] = {};
	__u8 pseudo[40] = {};
	__s64 sum;

	if (!skb)
		return -1;
	if (family == AF_INET) {
		__u32 gw = bpf_htonl(TTL_GW4);

		/* the original frame: L2, then the 28 bytes to quote */
		if (skb->len < 14 + 28 ||
		    bpf_skb_load_bytes(skb, 0, buf, 14) ||
		    bpf_skb_load_bytes(skb, 14, buf + 14 + 20 + 8, 28))
			return -1;
		if (buf[14 + 28] != 0x45)
			return -1;
		/* L2 turned round: to the sender from its host side */
		__builtin_memcpy(pseudo, buf, 6);
		__builtin_memcpy(buf, buf + 6, 6);
		__builtin_memcpy(buf + 6, pseudo, 6);
		buf[14] = 0x45;
		buf[15] = 0xc0;
		buf[16] = 0;
		buf[17] = 20 + 8 + 28;
		buf[22] = 64;
		buf[23] = IPPROTO_ICMP;
		__builtin_memcpy(buf + 14 + 12, &gw, 4);
		/* the destination: the quoted header's source */
		__builtin_memcpy(buf + 14 + 16, buf + 14 + 28 + 12, 4);
		sum = bpf_csum_diff(NULL, 0, (__be32 *)(buf + 14), 20, 0);
		if (sum < 0)
			return -1;
		*(__u16 *)(buf + 14 + 10) = csum_fold32(sum);
		buf[14 + 20] = 11;	/* time exceeded, in transit */
		sum = bpf_csum_diff(NULL, 0, (__be32 *)(buf + 14 + 20),
				    8 + 28, 0);
		if (sum < 0)
			return -1;
		*(__u16 *)(buf + 14 + 20 + 2) = csum_fold32(sum);
		if (bpf_skb_change_tail(skb, TTL_ICMP4_LEN, 0) ||
		    bpf_skb_store_bytes(skb, 0, buf, TTL_ICMP4_LEN, 0))
			return -1;
		return 0;
	}
	if (skb->len < 14 + 48 || bpf_skb_load_bytes(skb, 0, buf, 14) ||
	    bpf_skb_load_bytes(skb, 14, buf + 14 + 40 + 8, 48))
		return -1;
	__builtin_memcpy(pseudo, buf, 6);
	__builtin_memcpy(buf, buf + 6, 6);
	__builtin_memcpy(buf + 6, pseudo, 6);
	buf[14] = 0x60;
	buf[14 + 5] = 8 + 48;		/* payload length */
	buf[14 + 6] = IPPROTO_ICMPV6_;
	buf[14 + 7] = 255;
	buf[14 + 8] = 0xfe;		/* fe80::1 */
	buf[14 + 9] = 0x80;
	buf[14 + 23] = 1;
	__builtin_memcpy(buf + 14 + 24, buf + 14 + 40 + 8 + 8, 16);
	buf[14 + 40] = 3;		/* time exceeded, hop limit */
	/* pseudo-header: source, destination, length, next header */
	__builtin_memcpy(pseudo, buf + 14 + 8, 32);
	pseudo[35] = 8 + 48;
	pseudo[39] = IPPROTO_ICMPV6_;
	sum = bpf_csum_diff(NULL, 0, (__be32 *)pseudo, 40, 0);
	if (sum < 0)
		return -1;
	sum = bpf_csum_diff(NULL, 0, (__be32 *)(buf + 14 + 40), 8 + 48, sum);
	if (sum < 0)
		return -1;
	*(__u16 *)(buf + 14 + 40 + 2) = csum_fold32(sum);
	if (bpf_skb_change_tail(skb, TTL_ICMP6_LEN, 0) ||
	    bpf_skb_store_bytes(skb, 0, buf, TTL_ICMP6_LEN, 0))
		return -1;
	return 0;
}

#endif
