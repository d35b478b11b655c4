/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The report of a loop of connections made one after the other, the same
 * from each tool that makes one (pinet tcp-conn-loop, tlsc --count), so
 * that the bench reads them alike:
 *
 *   conns N failed F seconds S cps R
 *   latency_us p50 X p99 Y max Z        (when each was timed)
 */
#ifndef PODINJECT_CONN_LOOP_H
#define PODINJECT_CONN_LOOP_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* index of the nearest-rank P-th percentile of N sorted values */
static long rank(long n, int p)
{
	long r = (n * p + 99) / 100;

	return r > 0 ? r - 1 : 0;
}

/* The lines above; lat (seconds, one per connection made, sorted here)
 * may be NULL. */
static void conn_loop_report(long conns, long failed, double seconds,
			     double *lat)
{
	printf("conns %ld failed %ld seconds %.3f cps %.0f\n", conns, failed,
	       seconds, conns / seconds);
	if (!lat || !conns)
		return;
	qsort(lat, conns, sizeof(*lat), cmp_double);
	/* nearest rank: the smallest value with at least p% at or below it */
	printf("latency_us p50 %.0f p99 %.0f max %.0f\n",
	       lat[rank(conns, 50)] * 1e6, lat[rank(conns, 99)] * 1e6,
	       lat[conns - 1] * 1e6);
}

#endif
