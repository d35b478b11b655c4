/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A hole in a stream for t_proxy: at a client pod's eth0 ingress, drops
 * the first TCP segment that carries data from port HOLE_PORT (the
 * server's answer, relayed by the proxy as the server), once, after the
 * datapath passed it, as a receive queue that overflows would. Its FIN,
 * sent right after it, arrives first. Key 0 of the map counts the
 * segments it dropped.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define HOLE_PORT	8091

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} dropped SEC(".maps");

SEC("tc")
int tp_hole(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct tcphdr *tcp;
	__u32 zero = 0;
	__u64 *n;

	if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(0x0800) ||
	    ip->protocol != IPPROTO_TCP || ip->ihl != 5)
		return -1;
	tcp = (void *)(ip + 1);
	if ((void *)(tcp + 1) > end || tcp->source != bpf_htons(HOLE_PORT))
		return -1;
	if (bpf_ntohs(ip->tot_len) <= sizeof(*ip) + tcp->doff * 4)
		return -1;		/* no data */
	n = bpf_map_lookup_elem(&dropped, &zero);
	if (!n || *n)
		return -1;
	__sync_fetch_and_add(n, 1);
	return 2;			/* TC_ACT_SHOT, TCX_DROP */
}
