/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The redirect helpers, with an optional record of each call. Unit tests
 * load the programs with trace_redirects set and read the record back,
 * since BPF_PROG_TEST_RUN returns the verdict but not the target. When the
 * flag is false (every real load) the verifier removes the recording code.
 */
#ifndef PODINJECT_BPF_REDIRECT_H
#define PODINJECT_BPF_REDIRECT_H

#include "common.h"

const volatile bool trace_redirects = false;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pi_redirect_record);
} redirect_trace SEC(".maps");

static __always_inline long traced(__u32 kind, __u32 ifindex, __u64 flags,
				   long ret)
{
	struct pi_redirect_record *r;
	__u32 zero = 0;

	if (!trace_redirects)
		return ret;
	r = bpf_map_lookup_elem(&redirect_trace, &zero);
	if (r) {
		r->kind = kind;
		r->ifindex = ifindex;
		r->flags = flags;
		r->ret = ret;
	}
	return ret;
}

static __always_inline long redirect_peer(__u32 ifindex, __u64 flags)
{
	return traced(PI_RD_PEER, ifindex, flags,
		      bpf_redirect_peer(ifindex, flags));
}

static __always_inline long redirect_plain(__u32 ifindex, __u64 flags)
{
	return traced(PI_RD_PLAIN, ifindex, flags, bpf_redirect(ifindex, flags));
}

static __always_inline long redirect_neigh(__u32 ifindex)
{
	return traced(PI_RD_NEIGH, ifindex, 0,
		      bpf_redirect_neigh(ifindex, NULL, 0, 0));
}

/* XDP: to the device at `key` of a devmap; `flags` holds the verdict to
 * return when the key is not in the map. A macro, since the map argument
 * must stay a map the verifier can see. */
#define redirect_map(map, key, flags)					\
	traced(PI_RD_MAP, (key), (flags), bpf_redirect_map((map), (key), (flags)))

#endif
