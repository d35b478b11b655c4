/* SPDX-License-Identifier: GPL-2.0 */
/* A program that is not podinject's: it stands for another agent's program
 * at the same hook. It counts what it sees and lets everything go on. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} foreign_seen SEC(".maps");

/* Counts UDP packets only (IPv4, IPv6 without extension headers): the
 * tests' own datagrams. A pod's IPv6 neighbour discovery and MLD, which
 * come when they like, would make every count "about N". */
SEC("tc")
int foreign_count(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	__u32 zero = 0;
	__u8 proto;
	__u64 *n;

	if ((void *)(eth + 1) > end)
		return -1;
	if (eth->h_proto == bpf_htons(0x0800)) {
		struct iphdr *ip = (void *)(eth + 1);

		if ((void *)(ip + 1) > end)
			return -1;
		proto = ip->protocol;
	} else if (eth->h_proto == bpf_htons(0x86DD)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);

		if ((void *)(ip6 + 1) > end)
			return -1;
		proto = ip6->nexthdr;
	} else {
		return -1;
	}
	n = bpf_map_lookup_elem(&foreign_seen, &zero);
	if (n && proto == 17)
		__sync_fetch_and_add(n, 1);
	return -1;	/* TCX_NEXT */
}
