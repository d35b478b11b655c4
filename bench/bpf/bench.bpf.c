/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Bench-only programs: the members of the redirect family compared in
 * suite "redirect" (seed 002), the drop points of suite "xdp" (seed 004),
 * and the reply steering that lets suite "injection" run a TCP flow as an
 * injected pod before podinject-proxy exists. None of this is podinject's
 * datapath; it is loaded by bench/pbload.c into namespaces the bench makes.
 *
 * Settings are read-only globals set through the skeleton before load, so
 * the verifier folds them into constants: every variant pays the same for
 * its configuration (nothing), and only the helper differs.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

char LICENSE[] SEC("license") = "GPL";

#define TC_ACT_SHOT_	2
#define TCX_NEXT_	(-1)
#define ETH_P_IP_	0x0800

/* where to send the packet, and the L2 header the receiver expects */
const volatile __u32 cfg_ifindex = 0;
const volatile __u8 cfg_dmac[6] = {};
const volatile __u8 cfg_smac[6] = {};
/* steer_reply: IPv4 destination (network order) taken */
const volatile __u32 cfg_daddr = 0;

/* key 0: packets a program acted on (dropped, redirected, steered) */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} hits SEC(".maps");

/* key 0: non-zero switches steer_reply on; flipped between repetitions */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} ctl SEC(".maps");

static __always_inline void count(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&hits, &zero);

	if (n)
		(*n)++;
}

/* Rewrites the Ethernet addresses; false when the frame is too short. */
static __always_inline bool set_macs(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > data_end)
		return false;
	/* byte by byte: a memcpy would drop the volatile, and the compiler
	 * would fold in the initial zeros */
	for (int i = 0; i < 6; i++) {
		eth->h_dest[i] = cfg_dmac[i];
		eth->h_source[i] = cfg_smac[i];
	}
	return true;
}

/* seed 002: "u32+act_bpf using clone_redirect": the clone goes out of the
 * target device, the original is dropped. */
SEC("tc")
int rd_clone(struct __sk_buff *skb)
{
	if (!set_macs(skb))
		return TC_ACT_SHOT_;
	bpf_clone_redirect(skb, cfg_ifindex, 0);
	count();
	return TC_ACT_SHOT_;
}

/* bpf_redirect(): the target device transmits the packet, no clone. */
SEC("tc")
int rd_redirect(struct __sk_buff *skb)
{
	if (!set_macs(skb))
		return TC_ACT_SHOT_;
	count();
	return bpf_redirect(cfg_ifindex, 0);
}

/* bpf_redirect_peer(): received by the target's peer in its namespace,
 * in the same softirq round, without the backlog queue. */
SEC("tc")
int rd_peer(struct __sk_buff *skb)
{
	if (!set_macs(skb))
		return TC_ACT_SHOT_;
	count();
	return bpf_redirect_peer(cfg_ifindex, 0);
}

/* Replies addressed to the target of an injected TCP flow go to the
 * injector instead (the job podinject-proxy's reply path will do). Runs
 * first at the replying pod's egress hook; everything else goes on. */
SEC("tc")
int steer_reply(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	__u32 zero = 0, *on;

	if ((void *)(ip + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP_))
		return TCX_NEXT_;
	if (ip->daddr != cfg_daddr)
		return TCX_NEXT_;
	on = bpf_map_lookup_elem(&ctl, &zero);
	if (!on || !*on)
		return TCX_NEXT_;
	if (!set_macs(skb))
		return TCX_NEXT_;
	count();
	return bpf_redirect_peer(cfg_ifindex, 0);
}

/* The NAPI load of the injection suite: a veth with an XDP program
 * receives every packet through its NAPI ring (its peer's TSO turned
 * off), so that they arrive in polls, as from a NIC; this one passes
 * them on untouched. */
SEC("xdp")
int xdp_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

/* seed 004: drop points on the way into a pod */
SEC("xdp")
int xdp_drop(struct xdp_md *ctx)
{
	count();
	return XDP_DROP;
}

SEC("tc")
int tc_drop(struct __sk_buff *skb)
{
	count();
	return TC_ACT_SHOT_;
}
