/* SPDX-License-Identifier: GPL-2.0 */
#ifndef PODINJECT_BPF_COMMON_H
#define PODINJECT_BPF_COMMON_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "podinject_abi.h"

#define AF_INET		2
#define AF_INET6	10
#define ETH_P_IP	0x0800
#define ETH_P_IPV6	0x86DD
#define ETH_P_ARP	0x0806
#define ETH_ALEN	6
#define IPPROTO_ICMPV6_	58

/* Redirect flags of the helpers; BPF_F_EGRESS is newer than most kernels'
 * headers, so it is spelled out here. */
#define PI_F_INGRESS	(1ULL << 0)
#define PI_F_EGRESS	(1ULL << 1)

/* skb->data and skb->data_end read with one load each, at a fixed context
 * offset: clang otherwise hoists the field addresses into registers and
 * the verifier refuses loads through a modified context pointer. */
static __always_inline void *skb_data(const struct __sk_buff *skb)
{
	void *p;

	asm volatile("%0 = *(u32 *)(%1 + %2)"
		     : "=r"(p)
		     : "r"(skb), "i"(__builtin_offsetof(struct __sk_buff, data)));
	return p;
}

static __always_inline void *skb_data_end(const struct __sk_buff *skb)
{
	void *p;

	asm volatile("%0 = *(u32 *)(%1 + %2)"
		     : "=r"(p)
		     : "r"(skb),
		       "i"(__builtin_offsetof(struct __sk_buff, data_end)));
	return p;
}

#endif
