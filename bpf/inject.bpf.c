/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Injection: runs first at an injector pod's egress hook (tcx with
 * BPF_F_BEFORE and no anchor, so ahead of every other program there, ours
 * or the CNI's). A packet whose source is an address the injector is
 * authorised to speak for is taken and emitted into that target pod's
 * egress datapath; every other packet goes on with TCX_NEXT, untouched.
 *
 *   injector pod --> [inj host dev] inject_egress --+
 *                                                   | fast: bpf_redirect_peer(target, BPF_F_EGRESS)
 *                                                   |       target's eth0 transmits it
 *                                                   | fallback: bpf_redirect(target, BPF_F_INGRESS)
 *                                                   v       it enters the target's host dev
 *   target pod eth0 ======> [target host dev] tcx ingress: the target's
 *                                             egress programs, run once
 *
 * Either way the packet arrives where the target's own packets arrive and
 * passes the target's egress programs exactly once: nothing here runs them,
 * so nothing can run them twice.
 */
#include "lib/common.h"
#include "lib/parse.h"
#include "lib/redirect.h"

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PI_MAX_INJECT);
	__type(key, struct pi_inject_key);
	__type(value, struct pi_inject_target);
} inject_auth SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, PI_MAX_INJECT);
	__type(key, struct pi_inject_stats_key);
	__type(value, struct pi_inject_stats);
} inject_stats SEC(".maps");

static __always_inline struct pi_inject_stats *
stats_of(__u32 injector, const struct pi_inject_target *t)
{
	struct pi_inject_stats_key key = {
		.injector_ifindex = injector,
		.target_ifindex = t->target_ifindex,
		.path = t->path,
	};
	struct pi_inject_stats zero = {}, *st;

	st = bpf_map_lookup_elem(&inject_stats, &key);
	if (st)
		return st;
	bpf_map_update_elem(&inject_stats, &key, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&inject_stats, &key);
}

SEC("tc")
int inject_egress(struct __sk_buff *skb)
{
	struct pi_inject_key key = { .injector_ifindex = skb->ifindex };
	struct pi_inject_target *t;
	struct pi_inject_stats *st;
	void *data, *data_end;
	struct ethhdr *eth;
	struct pkt p;
	long ret;

	if (parse_pkt(skb, &p) != PARSE_OK)
		return PI_NEXT;
	key.family = p.family;
	key.addr = p.saddr;
	t = bpf_map_lookup_elem(&inject_auth, &key);
	if (!t)
		return PI_NEXT;

	/* The target's own packets leave its eth0 with this header; a
	 * stack or program behind the target's device sees no difference. */
	data = skb_data(skb);
	data_end = skb_data_end(skb);
	eth = data;
	if ((void *)(eth + 1) > data_end)
		return PI_NEXT;
	__builtin_memcpy(eth->h_source, t->target_pod_mac, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, t->target_host_mac, ETH_ALEN);

	st = stats_of(skb->ifindex, t);
	if (t->path == PI_PATH_FAST)
		ret = redirect_peer(t->target_ifindex, PI_F_EGRESS);
	else
		ret = redirect_plain(t->target_ifindex, PI_F_INGRESS);
	if (ret != PI_REDIRECT) {
		/* A kernel without BPF_F_EGRESS refuses the flag here. */
		if (st)
			st->drops[PI_INJ_DROP_REDIRECT]++;
		return PI_DROP;
	}
	if (st) {
		st->packets++;
		st->bytes += skb->len;
	}
	return PI_REDIRECT;
}
