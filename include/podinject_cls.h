/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The classifier's lookup steps that both sides run on the same compiled
 * structures (include/podinject_abi.h): the datapath on its maps
 * (bpf/lib/cls.h), userspace on a policy compiled in memory (lib/cls.c,
 * the probe's attribution, the unit tests). Plain C on fixed-width types,
 * as podinject_rule.h.
 */
#ifndef PODINJECT_CLS_H
#define PODINJECT_CLS_H

#include "podinject_rule.h"

/* The index of the lowest set bit of x, which is not zero: the bit alone
 * times a de Bruijn sequence has a distinct top six bits for each index.
 * Branch-free, as the verifier wants it inside a loop (a ladder of tests
 * made its path count explode); BPF has no count-trailing-zeros. */
static const __u8 pi_cls_debruijn[64] = {
	0, 1, 56, 2, 57, 49, 28, 3, 61, 58, 42, 50, 38, 29, 17, 4,
	62, 47, 59, 36, 45, 43, 51, 22, 53, 39, 33, 30, 24, 18, 12, 5,
	63, 55, 48, 27, 60, 41, 37, 16, 46, 35, 44, 21, 52, 32, 23, 11,
	54, 26, 40, 15, 34, 20, 31, 10, 25, 14, 19, 9, 13, 8, 7, 6,
};

PI_RULE_INLINE __u32 pi_cls_ctz(__u64 x)
{
	return pi_cls_debruijn[((x & -x) * 0x03f79d71b4ca8b09ULL) >> 58];
}

/* The lowest rule position set in both chunks, relative to the chunk, or
 * -1. Only the words both summaries mark are read, so two chunks that
 * share no word cost one AND. */
PI_RULE_INLINE int pi_cls_chunk_first(const struct pi_cls_chunk *a,
				      const struct pi_cls_chunk *b)
{
	__u64 s = a->summary & b->summary;
	__u32 k;

	for (k = 0; k < PI_CLS_WORDS && s; k++) {
		__u32 j = pi_cls_ctz(s) & (PI_CLS_WORDS - 1);
		__u64 w = a->w[j] & b->w[j];

		if (w)
			return (int)(j * 64 + pi_cls_ctz(w));
		s &= s - 1;
	}
	return -1;
}

/* The L4 key of a packet's protocol: pi_rule_proto_key's, the rule
 * walk's (ICMPv6 is matched as ICMP; the other family's ICMP number as
 * no protocol a rule names). */
_Static_assert(PI_RULE_PROTO_NONE == PI_CLS_PROTO_OTHER, "PI_RULE_PROTO_NONE");
PI_RULE_INLINE __u32 pi_cls_proto_key(__u32 family, __u8 proto)
{
	return pi_rule_proto_key(family, proto);
}

#endif
