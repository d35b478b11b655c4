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
	uint32_t seq, ack;	/* TCP's sequence and acknowledgment numbers */
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
		th->seq = htonl(s->seq);
		th->ack_seq = htonl(s->ack);
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

/* An ARP request from `spa` (sender MAC `sha`) for 10.0.0.254; the frame
 * is padded with zeros to 60 bytes. Returns 60. */
static inline int arp_build(uint8_t *buf, const char *spa, const uint8_t *sha)
{
	uint8_t *a = buf + 14;

	memset(buf, 0, PKT_MAX);
	memset(buf, 0xff, 6);
	memcpy(buf + 6, sha, 6);
	buf[12] = 0x08;
	buf[13] = 0x06;
	a[1] = 1;		/* Ethernet */
	a[2] = 0x08;		/* IPv4 */
	a[4] = 6;
	a[5] = 4;
	a[7] = 1;		/* request */
	memcpy(a + 8, sha, 6);
	inet_pton(AF_INET, spa, a + 14);
	inet_pton(AF_INET, "10.0.0.254", a + 24);
	return 60;
}

/* Puts an IPv6 extension header of `hlen` bytes (a multiple of 8) right
 * behind the IPv6 header of a packet from pkt_build; `body` gives its
 * bytes after the next-header field (NULL: a PadN option filling it).
 * Returns the new length. */
static inline int pkt_ext6(uint8_t *buf, int len, uint8_t type, int hlen,
			   const uint8_t *body)
{
	struct ipv6hdr *ip6 = (void *)(buf + 14);
	uint8_t *h = buf + 14 + 40;

	memmove(h + hlen, h, len - 14 - 40);
	memset(h, 0, hlen);
	h[0] = ip6->nexthdr;
	if (body) {
		memcpy(h + 1, body, hlen - 1);
	} else {
		h[1] = hlen / 8 - 1;
		h[2] = 1;		/* PadN */
		h[3] = hlen - 4;
	}
	ip6->nexthdr = type;
	ip6->payload_len = htons(ntohs(ip6->payload_len) + hlen);
	return len + hlen;
}

/* An IPv6 fragment header: offset in bytes (a multiple of 8), more
 * fragments, identification. */
static inline int pkt_frag6(uint8_t *buf, int len, int offset, int more,
			    uint32_t id)
{
	uint8_t body[7] = { 0 };
	uint16_t fo = htons((uint16_t)(offset | (more ? 1 : 0)));
	uint32_t nid = htonl(id);

	memcpy(body + 1, &fo, 2);
	memcpy(body + 3, &nid, 4);
	return pkt_ext6(buf, len, 44, 8, body);
}

/* Makes an IPv4 packet from pkt_build a fragment. */
static inline void pkt_frag4(uint8_t *buf, int offset, int more, uint16_t id)
{
	struct iphdr *ip = (void *)(buf + 14);

	ip->frag_off = htons((uint16_t)((offset / 8) | (more ? 0x2000 : 0)));
	ip->id = htons(id);
}

/* The Internet checksum of len bytes at b, on top of sum (a pseudo-header's
 * words, or 0), complemented: 0 over a header that carries its own. */
static inline uint16_t csum16(const uint8_t *b, int len, uint32_t sum)
{
	for (int i = 0; i + 1 < len; i += 2)
		sum += (b[i] << 8) | b[i + 1];
	if (len & 1)
		sum += b[len - 1] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return ~sum & 0xffff;
}

/* Fills the header checksum of the IPv4 frame pkt_build made (no options). */
static inline void ip4_csum(uint8_t *pkt)
{
	uint16_t c;

	pkt[24] = pkt[25] = 0;
	c = csum16(pkt + 14, 20, 0);
	pkt[24] = c >> 8;
	pkt[25] = c & 0xff;
}

#endif
