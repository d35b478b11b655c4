/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The policy rule matcher, the one copy of it: the BPF programs decide with
 * it (bpf/lib/policy.h) and userspace predicts their decisions with it (the
 * probe's policy attribution, the unit test that compares the two). Plain C
 * on fixed-width types, so that it compiles with clang -target bpf and with
 * gcc alike; nothing here may need a BPF or a libc header.
 */
#ifndef PODINJECT_RULE_H
#define PODINJECT_RULE_H

#include "podinject_abi.h"

/* Inlined on both sides, as the BPF helpers always were: the rule walk
 * would otherwise make a bpf-to-bpf call per rule. */
#define PI_RULE_INLINE static inline __attribute__((always_inline))

#define PI_IPPROTO_ICMP		1
#define PI_IPPROTO_ICMPV6	58
/* AF_INET6 as the packets' summaries hold it, without a libc header */
#define PI_RULE_AF_INET6	10
/* The L4 key of the protocols no rule can name (include/podinject_abi.h) */
#define PI_RULE_PROTO_NONE	256

/* The protocol a rule's protocol is compared with, for a packet of
 * `family` whose transport header is `proto`: ICMP stands for ping of
 * both families, so IPv6's ICMPv6 is ICMP. The other family's number is
 * neither (an IPv4 datagram of protocol 58, an IPv6 one of next header 1
 * are no ICMP of theirs): a key no rule's protocol is, which only rules
 * of any protocol match. */
PI_RULE_INLINE __u32 pi_rule_proto_key(__u32 family, __u8 proto)
{
	if (proto == PI_IPPROTO_ICMPV6)
		return family == PI_RULE_AF_INET6 ? PI_IPPROTO_ICMP :
						    PI_RULE_PROTO_NONE;
	if (proto == PI_IPPROTO_ICMP && family == PI_RULE_AF_INET6)
		return PI_RULE_PROTO_NONE;
	return proto;
}

/* Network order of a host-order word, without <arpa/inet.h> or
 * bpf_endian.h; __BYTE_ORDER__ is the target's under clang -target bpf. */
PI_RULE_INLINE __u32 pi_rule_htonl(__u32 x)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return __builtin_bswap32(x);
#else
	return x;
#endif
}

/* Whether the first plen bits of a and net agree (both network order). */
PI_RULE_INLINE int pi_prefix_match(const struct pi_dp_addr *a,
				   const struct pi_dp_addr *net, __u32 plen)
{
	__u32 i;

#ifdef __clang__
#pragma unroll
#endif
	for (i = 0; i < 4; i++) {
		__u32 bits, mask;

		if (plen <= i * 32)
			break;
		bits = plen - i * 32;
		mask = bits >= 32 ? 0xffffffff : ~(0xffffffffu >> bits);
		if ((a->a[i] ^ net->a[i]) & pi_rule_htonl(mask))
			return 0;
	}
	return 1;
}

/* Whether rule r matches a packet of `family` whose peer (destination on
 * egress, source on ingress) is `peer`, of transport protocol `proto`, with
 * destination port `port` (host order) when `has_ports` says the ports were
 * read (first fragment of TCP/UDP). A zero field of the rule matches
 * anything; a port range matches only packets whose ports were read; proto
 * ICMP stands for ping of both families, so ICMPv6 is matched as ICMP (and
 * a rule word of ICMPv6 matches nothing). Scalars rather than a struct: the
 * BPF side's walk state (bpf/lib/policy.h) holds them as they are. */
PI_RULE_INLINE int pi_rule_matches(const struct pi_dp_rule *r, __u32 family,
				   const struct pi_dp_addr *peer, __u8 proto,
				   __u8 has_ports, __u16 port)
{
	if (r->family && r->family != family)
		return 0;
	if (r->proto && r->proto != pi_rule_proto_key(family, proto))
		return 0;
	if (r->port_hi) {
		if (!has_ports)
			return 0;
		if (port < r->port_lo || port > r->port_hi)
			return 0;
	}
	if (r->prefixlen && !pi_prefix_match(peer, &r->addr, r->prefixlen))
		return 0;
	return 1;
}

#endif
