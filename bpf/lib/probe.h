/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Probe replies: at a pod's eth0 ingress, a packet that answers one of
 * podinject's probes (by the exact flow the probe registered) becomes an
 * event on the ring buffer and is dropped, so the pod never sees it.
 */
#ifndef PODINJECT_BPF_PROBE_H
#define PODINJECT_BPF_PROBE_H

#include "parse.h"
#include "proxy.h"

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, PI_MAX_FLOWS);
	__type(key, struct pi_flow_key);
	__type(value, struct pi_probe_flow);
} probe_flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} probe_events SEC(".maps");


/* The sequence number after a quoted TCP header's, network order */
static __always_inline __u32 quoted_seq_next(const __u8 *l4)
{
	__u32 seq;

	__builtin_memcpy(&seq, l4 + 4, 4);
	return bpf_htonl(bpf_ntohl(seq) + 1);
}

/* The flow an ICMP message is about: an echo reply names its own id and
 * sequence, an error quotes the header of the packet that caused it (of a
 * TCP segment: its sequence number, given + 1 in *ack, network order, as
 * a SYN-ACK acknowledges a SYN; its type and code in *icmp, for the probe
 * to say what refused it). */
static __always_inline int icmp_flow(struct __sk_buff *skb,
				     const struct pkt *p,
				     struct pi_flow_key *k, __u32 *kind,
				     __u32 *ack, __u32 *icmp)
{
	__u32 off = p->l4_off;
	__u8 hdr[8];

	if (off > PKT_L4_OFF_MAX || bpf_skb_load_bytes(skb, off, hdr, 8))
		return -1;
	__builtin_memset(k, 0, sizeof(*k));
	k->family = p->family;
	if ((p->family == AF_INET && hdr[0] == ICMP_ECHOREPLY_) ||
	    (p->family == AF_INET6 && hdr[0] == ICMP6_ECHO_REPLY_)) {
		k->proto = p->proto;
		k->pod = p->daddr;
		k->dst = p->saddr;
		__builtin_memcpy(&k->pod_port, hdr + 4, 2);
		__builtin_memcpy(&k->dst_port, hdr + 6, 2);
		*kind = PI_PROBE_ECHO_REPLY;
		return 0;
	}
	if (p->family == AF_INET && hdr[0] == ICMP_DEST_UNREACH_) {
		struct iphdr in;
		__u8 l4[8];

		if (bpf_skb_load_bytes(skb, off + 8, &in, sizeof(in)) ||
		    in.ihl < 5 ||
		    bpf_skb_load_bytes(skb, off + 8 + in.ihl * 4, l4, 8))
			return -1;
		k->proto = in.protocol;
		k->pod.a[0] = in.saddr;
		k->dst.a[0] = in.daddr;
		if (in.protocol == IPPROTO_ICMP) {
			__builtin_memcpy(&k->pod_port, l4 + 4, 2);
			__builtin_memcpy(&k->dst_port, l4 + 6, 2);
		} else {
			__builtin_memcpy(&k->pod_port, l4, 2);
			__builtin_memcpy(&k->dst_port, l4 + 2, 2);
			if (in.protocol == IPPROTO_TCP)
				*ack = quoted_seq_next(l4);
		}
		/* about a packet of the pod's that receives it, or of none
		 * (a pod may send any pod errors that quote its flows) */
		if (!addr_eq(&k->pod, &p->daddr))
			return -1;
		*kind = PI_PROBE_UNREACH;
		*icmp = PI_PROBE_ICMP_READ | (__u32)hdr[0] << 8 | hdr[1];
		return 0;
	}
	if (p->family == AF_INET6 && hdr[0] == ICMP6_DST_UNREACH_) {
		struct ipv6hdr in;
		__u8 l4[8];

		if (bpf_skb_load_bytes(skb, off + 8, &in, sizeof(in)) ||
		    bpf_skb_load_bytes(skb, off + 8 + sizeof(in), l4, 8))
			return -1;
		k->proto = in.nexthdr;
		__builtin_memcpy(k->pod.a, &in.saddr, 16);
		__builtin_memcpy(k->dst.a, &in.daddr, 16);
		if (in.nexthdr == IPPROTO_ICMPV6_) {
			__builtin_memcpy(&k->pod_port, l4 + 4, 2);
			__builtin_memcpy(&k->dst_port, l4 + 6, 2);
		} else {
			__builtin_memcpy(&k->pod_port, l4, 2);
			__builtin_memcpy(&k->dst_port, l4 + 2, 2);
			if (in.nexthdr == IPPROTO_TCP)
				*ack = quoted_seq_next(l4);
		}
		/* about a packet of the pod's that receives it, or of none
		 * (a pod may send any pod errors that quote its flows) */
		if (!addr_eq(&k->pod, &p->daddr))
			return -1;
		*kind = PI_PROBE_UNREACH;
		*icmp = PI_PROBE_ICMP_READ | (__u32)hdr[0] << 8 | hdr[1];
		return 0;
	}
	return -1;
}


/* A probe's own frame, on its way into the pod's egress datapath: its send
 * time becomes an event, read with the clock the answer is read with, so
 * a probe's RTT measures the datapath (the pod's programs, the way there
 * and back), not the probe's user space, and both ends have the clock's
 * own resolution. Only frames from the probe's port range (ICMP: echo id)
 * cost a lookup. A frame sent twice (the RST after a SYN-ACK) gives a
 * second event, which the probe, answered by then, ignores.
 * A global function: the verifier checks it once, on its own; inline, it
 * was checked once per path of inject_egress's parsing, and 6.1's
 * verifier ran out of its million instructions. */
__noinline int probe_note_sent(struct __sk_buff *skb, const struct pkt *p)
{
	struct pi_probe_event *ev;
	struct pi_probe_flow *f;
	struct pi_flow_key k;

	if (!skb || !p)
		return 0;
	if (p->proto == IPPROTO_TCP || p->proto == IPPROTO_UDP) {
		if (!p->has_ports || p->sport < PI_DP_PROBE_PORT_LO)
			return 0;
		flow_key(&k, p, true);
	} else if (p->proto == IPPROTO_ICMP || p->proto == IPPROTO_ICMPV6_) {
		__u32 off = p->l4_off;
		__u8 hdr[8];

		if (off > PKT_L4_OFF_MAX || bpf_skb_load_bytes(skb, off, hdr, 8))
			return 0;
		if (hdr[0] != (p->family == AF_INET ? ICMP_ECHO_ :
						      ICMP6_ECHO_REQUEST_) ||
		    ((__u16)hdr[4] << 8 | hdr[5]) < PI_DP_PROBE_PORT_LO)
			return 0;
		__builtin_memset(&k, 0, sizeof(k));
		k.family = p->family;
		k.proto = p->proto;
		k.pod = p->saddr;
		k.dst = p->daddr;
		__builtin_memcpy(&k.pod_port, hdr + 4, 2);
		__builtin_memcpy(&k.dst_port, hdr + 6, 2);
	} else {
		return 0;
	}
	f = bpf_map_lookup_elem(&probe_flows, &k);
	if (!f)
		return 0;
	ev = bpf_ringbuf_reserve(&probe_events, sizeof(*ev), 0);
	if (!ev)
		return 0;
	ev->probe_id = f->probe_id;
	ev->kind = PI_PROBE_SENT;
	ev->ts_ns = bpf_ktime_get_ns();
	ev->tcp_ack = 0;
	ev->icmp = 0;
	bpf_ringbuf_submit(ev, 0);
	return 0;
}

/* True when the packet answers a probe: it was reported and must not
 * reach the pod. */
static __always_inline bool probe_take(struct __sk_buff *skb,
				       const struct pkt *p)
{
	struct pi_probe_event *ev;
	struct pi_probe_flow *f;
	struct pi_flow_key k;
	__u32 kind = 0, ack = 0, icmp = 0;

	if (p->proto == IPPROTO_TCP || p->proto == IPPROTO_UDP) {
		if (!p->has_ports)
			return false;
		flow_key(&k, p, false);
		if (p->proto == IPPROTO_UDP) {
			kind = PI_PROBE_DATAGRAM;
		} else if (p->tcp_flags & TCP_RST) {
			kind = PI_PROBE_RST;
		} else if ((p->tcp_flags & (TCP_SYN | TCP_ACK)) ==
			   (TCP_SYN | TCP_ACK)) {
			kind = PI_PROBE_SYNACK;
		} else {
			return false;
		}
		/* The SYN it answers, for the probe to tell its own answer
		 * from a late one to an earlier probe of the same ports (a
		 * RST without ACK names none: 0) */
		if ((p->tcp_flags & TCP_ACK) &&
		    bpf_skb_load_bytes(skb, p->l4_off + 8, &ack, 4))
			return false;
	} else if (p->proto == IPPROTO_ICMP || p->proto == IPPROTO_ICMPV6_) {
		if (icmp_flow(skb, p, &k, &kind, &ack, &icmp))
			return false;
	} else {
		return false;
	}
	f = bpf_map_lookup_elem(&probe_flows, &k);
	if (!f)
		return false;
	ev = bpf_ringbuf_reserve(&probe_events, sizeof(*ev), 0);
	if (!ev) {
		/* Taken all the same (an answer to a probe is never the
		 * pod's), and counted on its flow: the probe tells an answer
		 * it could not hear from none. */
		__sync_fetch_and_add(&f->unreported, 1);
		return true;
	}
	ev->probe_id = f->probe_id;
	ev->kind = kind;
	ev->ts_ns = bpf_ktime_get_ns();
	ev->tcp_ack = bpf_ntohl(ack);
	ev->icmp = icmp;
	bpf_ringbuf_submit(ev, 0);
	return true;
}

#endif
