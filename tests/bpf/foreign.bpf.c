/* SPDX-License-Identifier: GPL-2.0 */
/* A program that is not podinject's: it stands for another agent's program
 * at the same hook. It counts what it sees and lets everything go on. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} foreign_seen SEC(".maps");

SEC("tc")
int foreign_count(struct __sk_buff *skb)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&foreign_seen, &zero);

	if (n)
		__sync_fetch_and_add(n, 1);
	return -1;	/* TCX_NEXT */
}
