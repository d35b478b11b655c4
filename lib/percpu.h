/* SPDX-License-Identifier: GPL-2.0 */
#ifndef PODINJECT_PERCPU_H
#define PODINJECT_PERCPU_H

#include <stddef.h>

/* A per-CPU map's value at `key` summed over the CPUs into `out` (its
 * vsize bytes are u64 counters, as every struct pi_*_stats), or every
 * CPU's value set to zero: 0 or -errno. */
int percpu_sum(int map, const void *key, void *out, size_t vsize);
int percpu_zero(int map, const void *key, size_t vsize);

#endif
