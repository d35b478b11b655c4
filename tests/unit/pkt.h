/* SPDX-License-Identifier: GPL-2.0 */
/* Packets built in C for BPF_PROG_TEST_RUN. */
#ifndef PODINJECT_UNIT_PKT_H
#define PODINJECT_UNIT_PKT_H

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>

struct pkt_spec {
	int family;		/* AF_INET or AF_INET6 */
	const char *src, *dst;
	uint8_t proto;		/* IPPROTO_TCP, _UDP, _ICMP (ICMPv6 for v6) */
	uint16_t sport, dport;
	uint8_t tcp_flags;	/* default SYN */
	uint16_t payload;	/* bytes after the transport header */
};

#define PKT_MAX 1600

/* Writes the packet into buf; returns its length. */
static inline int pkt_build(uint8_t *buf, const struct pkt_spec *s)
{
	struct ethhdr *eth = (void *)buf;
	uint8_t *l4;
	int l4len, off = sizeof(*eth);

	memset(buf, 0, PKT_MAX);
	memcpy(eth->h_dest, "\x02\x00\x00\x00\x00\x01", 6);
	memcpy(eth->h_source, "\x02\x00\x00\x00\x00\x02", 6);
	switch (s->proto) {
	case IPPROTO_TCP: l4len = sizeof(struct tcphdr); break;
	case IPPROTO_UDP: l4len = sizeof(struct udphdr); break;
	default: l4len = 8; break;	/* ICMP echo header */
	}
	l4len += s->payload;
	if (s->family == AF_INET) {
		struct iphdr *ip = (void *)(buf + off);

		eth->h_proto = htons(ETH_P_IP);
		ip->version = 4;
		ip->ihl = 5;
		ip->ttl = 64;
		ip->protocol = s->proto;
		ip->tot_len = htons(sizeof(*ip) + l4len);
		inet_pton(AF_INET, s->src, &ip->saddr);
		inet_pton(AF_INET, s->dst, &ip->daddr);
		off += sizeof(*ip);
	} else {
		struct ipv6hdr *ip6 = (void *)(buf + off);

		eth->h_proto = htons(ETH_P_IPV6);
		ip6->version = 6;
		ip6->hop_limit = 64;
		ip6->nexthdr = s->proto == IPPROTO_ICMP ? IPPROTO_ICMPV6 :
							  s->proto;
		ip6->payload_len = htons(l4len);
		inet_pton(AF_INET6, s->src, &ip6->saddr);
		inet_pton(AF_INET6, s->dst, &ip6->daddr);
		off += sizeof(*ip6);
	}
	l4 = buf + off;
	if (s->proto == IPPROTO_TCP) {
		struct tcphdr *th = (void *)l4;

		th->source = htons(s->sport);
		th->dest = htons(s->dport);
		th->doff = 5;
		l4[13] = s->tcp_flags ? s->tcp_flags : 0x02;
	} else if (s->proto == IPPROTO_UDP) {
		struct udphdr *uh = (void *)l4;

		uh->source = htons(s->sport);
		uh->dest = htons(s->dport);
		uh->len = htons(l4len);
	} else {
		l4[0] = s->family == AF_INET ? 8 : 128;	/* echo request */
	}
	return off + l4len;
}

#endif
