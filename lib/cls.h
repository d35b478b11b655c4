/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The rule classifier's compiler and publisher (lib/cls.c). Self-contained
 * on libbpf, so that the unit tests, the fuzzers and the bench publish
 * policies exactly as the library does.
 */
#ifndef PODINJECT_LIB_CLS_H
#define PODINJECT_LIB_CLS_H

#include <stdint.h>
#include "podinject_cls.h"

/* The node's maps a policy is published into (fds). */
struct cls_maps {
	int rules;
	int refs;
	int heads;
	int addrs;
	int l4;
	int ports;
	int classes;
	int chunks;
};

/* The classifier's maps of a loaded skeleton that has the node program's
 * maps (node_bpf in the unit tests and the bench). */
#define CLS_MAPS_OF(skel) ((struct cls_maps){				\
	.rules = bpf_map__fd((skel)->maps.rules),			\
	.refs = bpf_map__fd((skel)->maps.policy_refs),			\
	.heads = bpf_map__fd((skel)->maps.cls_heads),			\
	.addrs = bpf_map__fd((skel)->maps.cls_addrs),			\
	.l4 = bpf_map__fd((skel)->maps.cls_l4),				\
	.ports = bpf_map__fd((skel)->maps.cls_ports),			\
	.classes = bpf_map__fd((skel)->maps.cls_classes),		\
	.chunks = bpf_map__fd((skel)->maps.cls_chunks),			\
})

struct cls_addr {
	uint32_t family;
	uint32_t plen;
	struct pi_dp_addr addr;	/* masked to plen */
	uint32_t cls;
};

struct cls_l4e {
	uint32_t proto;		/* the L4 key: a protocol, PI_CLS_PROTO_OTHER */
	struct pi_cls_l4 v;
};

/* A policy compiled in memory. Indices are its own: classes name chunks
 * by index into `chunks` (0 is the empty chunk), addresses and L4 entries
 * classes by index into `classes`, L4 entries intervals into `ports`. */
struct cls_policy {
	uint32_t nrules;
	uint32_t nchunks;	/* chunks per vector */
	struct pi_cls_class *classes;
	uint32_t nclasses;
	struct pi_cls_chunk *chunks;
	uint32_t nchunk;
	struct pi_cls_port *ports;
	uint32_t nports;
	struct cls_addr *addrs;
	uint32_t naddrs;
	struct cls_l4e *l4s;
	uint32_t nl4;
};

int cls_compile(const struct pi_dp_rule *rules, uint32_t count,
		struct cls_policy *out);
void cls_policy_free(struct cls_policy *c);

/* The position of the first rule that matches, or -1. */
int cls_lookup(const struct cls_policy *c, uint32_t family,
	       const struct pi_dp_addr *peer, uint8_t proto, uint8_t has_ports,
	       uint16_t port);

/* The datapath's lookup on the maps, run from userspace, for the policy
 * whose rules start at `start`: 1 with *pos the position of the first
 * rule that matches, 0 when none matches, or -errno when the maps could
 * not be read (never mistaken for "no match"). */
int cls_lookup_maps(const struct cls_maps *m, uint32_t start, uint32_t family,
		    const struct pi_dp_addr *peer, uint8_t proto,
		    uint8_t has_ports, uint16_t port, uint32_t *pos);

/* Publishes `rules` as pod `pod_id`'s policy in `dir`: the rules at slot
 * `start` of the rules map (a free range), the compiled form beside them,
 * then the reference flipped to them with a new revision, then the old
 * policy's trie and L4 entries removed. On error nothing the datapath
 * reads has changed and *why (when not NULL) says what did not fit. */
int cls_publish(const struct cls_maps *m, uint32_t pod_id, uint32_t dir,
		const struct pi_dp_rule *rules, uint32_t count, uint32_t start,
		const char **why);

/* `count` consecutive elements of an array map from key `first`. */
int cls_array_read(int fd, uint32_t first, uint32_t count, void *out,
		   size_t vsize);
int cls_array_write(int fd, uint32_t first, uint32_t count, const void *vals,
		    size_t vsize);

#endif
