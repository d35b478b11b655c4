/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The library's walk of the connection tracker (lib/ct.c, through
 * pi_ct_counts) while entries are deleted and written again under it, as
 * the datapath, the LRU's eviction and other readers do: each entry is
 * counted once at most. A walk key by key went back to the table's first
 * key whenever the key it stood on was deleted, and counted every entry
 * again.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <bpf/bpf.h>
#include "podinject_abi.h"
#include "unit.h"
#include "state.h"

#define WALK_ENTRIES	2048
#define WALK_POD	7

struct churn {
	int fd;
	atomic_bool stop;
	unsigned long rounds;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void entry_of(uint32_t i, struct pi_ct_key *k, struct pi_ct_entry *e)
{
	memset(k, 0, sizeof(*k));
	memset(e, 0, sizeof(*e));
	k->pod_id = WALK_POD;
	k->family = AF_INET;
	k->proto = IPPROTO_UDP;
	k->pod_port = 10000 + i % 50000;
	k->peer_port = 53;
	k->peer.a[0] = htonl(0x0a000000 | i);
	e->last_ns = now_ns();
	e->state = PI_DP_CT_ESTABLISHED;
}

/* Every entry, again and again: deleted, then written back. */
static void *churn_run(void *arg)
{
	struct churn *c = arg;
	struct pi_ct_key k;
	struct pi_ct_entry e;

	while (!atomic_load(&c->stop)) {
		for (uint32_t i = 0; i < WALK_ENTRIES; i++) {
			entry_of(i, &k, &e);
			bpf_map_delete_elem(c->fd, &k);
			bpf_map_update_elem(c->fd, &k, &e, BPF_ANY);
		}
		c->rounds++;
	}
	return NULL;
}

UNIT_TEST(ct_walk_counts_each_entry_once_under_churn)
{
	struct pi_node n;
	struct pi_pod_info pod = { .id = WALK_POD };
	struct churn c = { 0 };
	uint32_t most = 0, walks = 0;
	pthread_t t;
	uint64_t until;

	memset(&n, 0, sizeof(n));
	c.fd = bpf_map_create(BPF_MAP_TYPE_LRU_HASH, "ct_walk_test",
			      sizeof(struct pi_ct_key), sizeof(struct pi_ct_entry),
			      4 * WALK_ENTRIES, NULL);
	if (!ASSERT_TRUE(c.fd >= 0, "map made"))
		return;
	for (uint32_t i = 0; i < WALK_ENTRIES; i++) {
		struct pi_ct_key k;
		struct pi_ct_entry e;

		entry_of(i, &k, &e);
		bpf_map_update_elem(c.fd, &k, &e, BPF_ANY);
	}
	n.maps[M_CT] = c.fd;
	if (!ASSERT_TRUE(!pthread_create(&t, NULL, churn_run, &c), "churn started")) {
		close(c.fd);
		return;
	}
	/* a second of walks, each against the whole table changing */
	until = now_ns() + 1000000000ull;
	while (now_ns() < until) {
		struct pi_ct_counts got;

		if (pi_ct_counts(&n, &pod, &got))
			break;
		if (got.entries > most)
			most = got.entries;
		walks++;
	}
	atomic_store(&c.stop, true);
	pthread_join(t, NULL);
	close(c.fd);
	ASSERT_TRUE(walks > 0 && c.rounds > 0, "walks and churn both ran");
	ASSERT_TRUE(most <= WALK_ENTRIES, "no entry counted twice in a walk");
	if (most > WALK_ENTRIES)
		unit_fail(__FILE__, __LINE__, "a walk counted %u of %u entries (%u walks, %lu churn rounds)",
			  most, WALK_ENTRIES, walks, c.rounds);
}
