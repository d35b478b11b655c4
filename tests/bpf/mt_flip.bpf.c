/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A fault on the wire for t_mtls: at a server pod's egress, flips one byte
 * of the payload of the FLIP_NTH large TCP segment from port FLIP_PORT
 * (the server's TLS records, past the handshake, whose segments are
 * small; the ones before it reach the client whole), and counts the
 * segments it changed (key 0: one) and the large ones it saw (key 1). The TCP checksum is corrected, so
 * the segment is delivered as sent by the server: only TLS can notice.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define FLIP_PORT	8445
#define FLIP_MIN	2048	/* payload bytes: larger than any handshake segment */
#define FLIP_AT		1024	/* payload offset of the flipped byte (even) */
#define FLIP_NTH	4

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} flipped SEC(".maps");

SEC("tc")
int mt_flip(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct tcphdr *tcp;
	__u32 zero = 0, one = 1, l4, off;
	__u16 old, new;
	__u64 *n, *seen;

	if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(0x0800) ||
	    ip->protocol != IPPROTO_TCP || ip->ihl != 5)
		return -1;
	tcp = (void *)(ip + 1);
	if ((void *)(tcp + 1) > end || tcp->source != bpf_htons(FLIP_PORT))
		return -1;
	n = bpf_map_lookup_elem(&flipped, &zero);
	seen = bpf_map_lookup_elem(&flipped, &one);
	if (!n || !seen || *n)
		return -1;
	l4 = sizeof(*eth) + sizeof(*ip);
	if (bpf_ntohs(ip->tot_len) < sizeof(*ip) + tcp->doff * 4 + FLIP_MIN)
		return -1;
	if (++*seen < FLIP_NTH)
		return -1;
	off = l4 + tcp->doff * 4 + FLIP_AT;
	if (bpf_skb_load_bytes(skb, off, &old, 2))
		return -1;
	new = old ^ bpf_htons(0xff00);
	if (bpf_skb_store_bytes(skb, off, &new, 2, 0) ||
	    bpf_l4_csum_replace(skb, l4 + offsetof(struct tcphdr, check), old,
				new, 2))
		return -1;
	__sync_fetch_and_add(n, 1);
	return -1;
}
