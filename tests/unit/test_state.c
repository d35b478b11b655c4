/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The library's batched walk of the pods' maps (lib/state.c,
 * map_scan_u32): every entry once, across as many batches as it takes,
 * values with their keys, and a stop where the callback asks for one.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "podinject_abi.h"
#include "unit.h"
#include "state.h"

struct scan_seen {
	unsigned char *times;	/* per key */
	uint32_t calls, bad_values, stop_after;
};

static int count_one(uint32_t key, const void *val, void *c)
{
	const struct pi_pod_meta *m = val;
	struct scan_seen *s = c;
	char want[32];

	s->calls++;
	if (key < PI_DP_MAX_PODS)
		s->times[key]++;
	snprintf(want, sizeof(want), "scan/pod-%u", key);
	if (strcmp(m->name, want) || m->flags != key * 3)
		s->bad_values++;
	return s->stop_after && s->calls == s->stop_after;
}

/* A map like the pods' names: a hash of PI_DP_MAX_PODS keyed by a __u32,
 * with values as large as the real ones, so that a batch holds few. */
static int make_map(uint32_t entries)
{
	int fd = bpf_map_create(BPF_MAP_TYPE_HASH, "scan_test", sizeof(uint32_t),
				sizeof(struct pi_pod_meta), PI_DP_MAX_PODS, NULL);

	for (uint32_t k = 0; fd >= 0 && k < entries; k++) {
		/* keys spread as ifindexes are, not 0..n-1 */
		uint32_t key = (k * 7919) % PI_DP_MAX_PODS;
		struct pi_pod_meta m = { .flags = key * 3 };

		snprintf(m.name, sizeof(m.name), "scan/pod-%u", key);
		if (bpf_map_update_elem(fd, &key, &m, BPF_NOEXIST)) {
			close(fd);
			return -1;
		}
	}
	return fd;
}

UNIT_TEST(map_scan_reads_every_entry_once)
{
	static const uint32_t sizes[] = { 0, 1, 63, 64, 65, 200, PI_DP_MAX_PODS };
	unsigned char times[PI_DP_MAX_PODS];

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct scan_seen s = { .times = times };
		uint32_t once = 0;
		int fd = make_map(sizes[i]), ret;

		if (!ASSERT_TRUE(fd >= 0, "map made and filled"))
			return;
		memset(times, 0, sizeof(times));
		ret = map_scan_u32(fd, sizeof(struct pi_pod_meta), count_one, &s);
		close(fd);
		for (uint32_t k = 0; k < PI_DP_MAX_PODS; k++)
			once += times[k] == 1;
		if (!ASSERT_OK(ret, "scan") ||
		    !ASSERT_EQ(s.calls, sizes[i], "entries seen") ||
		    !ASSERT_EQ(once, sizes[i], "keys seen exactly once") ||
		    !ASSERT_EQ(s.bad_values, 0, "values that are not their key's"))
			return;
	}
}

UNIT_TEST(map_scan_stops_where_asked)
{
	unsigned char times[PI_DP_MAX_PODS];
	struct scan_seen s = { .times = times, .stop_after = 100 };
	int fd = make_map(500), ret;

	if (!ASSERT_TRUE(fd >= 0, "map made and filled"))
		return;
	ret = map_scan_u32(fd, sizeof(struct pi_pod_meta), count_one, &s);
	close(fd);
	if (!ASSERT_EQ(ret, 1, "the callback's return") ||
	    !ASSERT_EQ(s.calls, 100, "entries seen before the stop"))
		return;
	ASSERT_EQ(map_scan_u32(-1, 4, count_one, &s), -EBADF,
		  "a map that is not there");
}
