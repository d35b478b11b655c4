// SPDX-License-Identifier: GPL-2.0
/*
 * tsc-khz: prints the host's TSC rate in kHz, counted against
 * CLOCK_MONOTONIC_RAW over 200 ms (the median of three counts).
 *
 * Under TCG a guest's RDTSC reads the host's TSC, so this is the guest's
 * TSC rate too. lab/run.sh passes it as tsc_early_khz=: the guest kernel
 * then needs no calibration against the emulated PIT, which fails on a
 * loaded host and leaves a kernel without ACPI on jiffies (a 4 ms step).
 * Prints nothing and exits 1 on a CPU without an invariant TSC, where a
 * rate would mean nothing.
 */
#include <cpuid.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <x86intrin.h>

static uint64_t mono_raw_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static uint64_t count_khz(void)
{
	struct timespec pause = { .tv_nsec = 200 * 1000000 };
	uint64_t t0, c0, t1, c1;

	t0 = mono_raw_ns();
	c0 = __rdtsc();
	nanosleep(&pause, NULL);
	c1 = __rdtsc();
	t1 = mono_raw_ns();
	return (c1 - c0) * 1000000ull / (t1 - t0);
}

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int main(void)
{
	unsigned int eax, ebx, ecx, edx;
	uint64_t v[3];

	/* CPUID 0x80000007 EDX bit 8: the TSC ticks at a constant rate */
	if (!__get_cpuid(0x80000007, &eax, &ebx, &ecx, &edx) ||
	    !(edx & (1u << 8)))
		return 1;
	for (int i = 0; i < 3; i++)
		v[i] = count_khz();
	qsort(v, 3, sizeof(v[0]), cmp);
	printf("%llu\n", (unsigned long long)v[1]);
	return 0;
}
