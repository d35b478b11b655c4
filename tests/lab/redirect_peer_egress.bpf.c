// SPDX-License-Identifier: GPL-2.0
/*
 * Lab-only test programs for bpf_redirect_peer(ifindex, BPF_F_EGRESS), the
 * equivalent of the kernel selftests for the feature (see
 * tests/lab/redirect_peer_egress.c for the topology and the cases).
 *
 * Only "marked" packets are acted on: IPv4/UDP to TEST_PORT. Everything else
 * (ARP, IPv6 ND, ...) gets TCX_NEXT (-1), which is "no verdict" both for tcx
 * and netkit and for cls_bpf in direct-action mode.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "redirect_peer_egress.h"

#define ETH_P_IP	0x0800
#define IPPROTO_UDP_	17

/* Set by user space before each case (in .bss, mmapped by the skeleton). */
__u32 target_ifindex;
__u64 redirect_flags;
__u32 redirect_mode;		/* enum rpe_mode */
__u64 probe_flags;		/* for the BPF_PROG_TEST_RUN probe */

/* Results. */
__u64 counters[RPE_NR_COUNTERS];
__s64 last_ret;
__u64 loop_sum;

struct loop_ctx {
	__u64 sum;
	__u32 seed;
};

static long loop_step(__u64 i, void *data)
{
	struct loop_ctx *c = data;

	c->sum += i ^ c->seed;
	return 0;
}

/* Is this IPv4/UDP to TEST_PORT? Returns the UDP header's dest port or 0. */
static __always_inline int is_marked(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip;
	struct udphdr *udp;

	if (skb->protocol != bpf_htons(ETH_P_IP))
		return 0;
	if ((void *)(eth + 1) > data_end)
		return 0;
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return 0;
	ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > data_end)
		return 0;
	if (ip->protocol != IPPROTO_UDP_ || ip->ihl != 5)
		return 0;
	udp = (void *)(ip + 1);
	if ((void *)(udp + 1) > data_end)
		return 0;
	return udp->dest == bpf_htons(TEST_PORT);
}

static __always_inline int count(struct __sk_buff *skb, int idx)
{
	if (!is_marked(skb))
		return 0;
	if (idx >= 0 && idx < RPE_NR_COUNTERS)
		__sync_fetch_and_add(&counters[idx], 1);
	return 1;
}

/*
 * The injector: attached at the source pair's host-side tc ingress and tc
 * egress, and as a netkit peer program of the source netkit pair.
 */
SEC("tc")
int inject(struct __sk_buff *skb)
{
	struct loop_ctx lc = { .seed = skb->len };
	long ret;

	if (!count(skb, RPE_CNT_INJECT))
		return -1;	/* TCX_NEXT */

	/* bpf_loop must work on every lab kernel; a few rounds of nothing. */
	bpf_loop(8, loop_step, &lc, 0);
	__sync_fetch_and_add(&loop_sum, lc.sum ? 1 : 0);

	switch (redirect_mode) {
	case RPE_MODE_PEER:
		ret = bpf_redirect_peer(target_ifindex, redirect_flags);
		break;
	case RPE_MODE_REDIRECT:
		ret = bpf_redirect(target_ifindex, redirect_flags);
		break;
	default:
		ret = TC_ACT_SHOT_;
		break;
	}
	last_ret = ret;
	return ret;
}

/* Observers: count marked packets, let everything through ... */
SEC("tc")
int obs_peer_egress(struct __sk_buff *skb)
{
	count(skb, RPE_CNT_PEER_EGRESS);
	return -1;
}

SEC("tc")
int obs_peer_ingress(struct __sk_buff *skb)
{
	/* drop here: a packet received by the pod goes no further */
	return count(skb, RPE_CNT_PEER_INGRESS) ? TC_ACT_SHOT_ : -1;
}

SEC("tc")
int obs_netkit_peer(struct __sk_buff *skb)
{
	count(skb, RPE_CNT_NETKIT_PEER);
	return -1;
}

SEC("tc")
int obs_netkit_primary(struct __sk_buff *skb)
{
	count(skb, RPE_CNT_NETKIT_PRIMARY);
	return -1;
}

/* ... except where the pod's sent traffic lands on the host side: that is
 * the end of the path, so the packet is counted and dropped. */
SEC("tc")
int obs_host_ingress(struct __sk_buff *skb)
{
	return count(skb, RPE_CNT_HOST_INGRESS) ? TC_ACT_SHOT_ : -1;
}

SEC("tc")
int obs_host_egress(struct __sk_buff *skb)
{
	count(skb, RPE_CNT_HOST_EGRESS);
	return -1;
}

/* Feature probe, run with BPF_PROG_TEST_RUN: TC_ACT_REDIRECT when the kernel
 * accepts probe_flags, TC_ACT_SHOT when it does not. No packet is sent. */
SEC("tc")
int probe(struct __sk_buff *skb)
{
	return bpf_redirect_peer(1, probe_flags);
}

char LICENSE[] SEC("license") = "GPL";
