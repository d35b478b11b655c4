/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The datapath's per-CPU counters, read and reset in one place. Their
 * values (struct pi_*_stats) are u64 counters only, so a value is summed
 * word by word, whatever its fields.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "percpu.h"

int percpu_sum(int map, const void *key, void *out, size_t vsize)
{
	int ncpu = libbpf_num_possible_cpus();
	size_t words = vsize / sizeof(uint64_t);
	uint64_t *per, *sum = out;
	int err = 0;

	memset(out, 0, vsize);
	if (ncpu <= 0)
		return ncpu < 0 ? ncpu : -EINVAL;
	if (vsize % sizeof(uint64_t))
		return -EINVAL;
	per = calloc(ncpu, vsize);
	if (!per)
		return -ENOMEM;
	if (bpf_map_lookup_elem(map, key, per))
		err = -errno;
	for (int c = 0; c < ncpu && !err; c++)
		for (size_t w = 0; w < words; w++)
			sum[w] += per[c * words + w];
	free(per);
	return err;
}

int percpu_zero(int map, const void *key, size_t vsize)
{
	int ncpu = libbpf_num_possible_cpus();
	void *zero;
	int err;

	if (ncpu <= 0)
		return ncpu < 0 ? ncpu : -EINVAL;
	zero = calloc(ncpu, vsize);
	if (!zero)
		return -ENOMEM;
	err = bpf_map_update_elem(map, key, zero, 0) ? -errno : 0;
	free(zero);
	return err;
}
