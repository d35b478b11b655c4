/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Small helpers that podinject's userspace programs (the library, the CNI
 * plugin, the proxy, the test tools) share, one copy each. Not for BPF.
 */
#ifndef PODINJECT_UTIL_H
#define PODINJECT_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC, the clock of deadlines and of bpf_ktime_get_ns(). */
static inline long long pi_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline long long pi_mono_ms(void)
{
	return pi_mono_ns() / 1000000;
}

/* FNV-1a over n bytes, on top of h (the basis, or an earlier hash):
 * stable names and table slots, not secrets. */
#define PI_FNV32_BASIS	2166136261u
#define PI_FNV32_PRIME	16777619u
#define PI_FNV64_BASIS	0xcbf29ce484222325ULL
#define PI_FNV64_PRIME	0x100000001b3ULL

static inline uint32_t pi_fnv32(uint32_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	while (n--)
		h = (h ^ *b++) * PI_FNV32_PRIME;
	return h;
}

static inline uint64_t pi_fnv64(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	while (n--)
		h = (h ^ *b++) * PI_FNV64_PRIME;
	return h;
}

#endif
