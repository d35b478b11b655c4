/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The rule classifier: a pod's ordered rules in one direction compiled into
 * bit vectors the datapath decides a packet with in a few lookups
 * (bpf/lib/policy.h; the layout in include/podinject_abi.h).
 *
 * Address dimension: every distinct CIDR of the rules (and /0) of each
 * family is an LPM trie entry whose class holds the rules whose CIDR
 * contains it. The longest stored prefix that covers an address is covered
 * by exactly the rules that cover the address, because prefixes that hold
 * one address are nested.
 *
 * L4 dimension: for every protocol a rule names, and for all others, the
 * rules that match it; with ports, the elementary intervals of their port
 * ranges, each with the rules whose range holds it.
 *
 * The first position set in both classes is the first rule that matches,
 * which is what pi_rule_matches() walked in order decides.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "cls.h"
#include "podinject_util.h"

#define ADDR_FAMILIES	2
static const uint32_t families[ADDR_FAMILIES] = { AF_INET, AF_INET6 };

/* ---- a set of fixed-size blobs, each stored once --------------------- */

struct blobset {
	size_t size;
	uint8_t *data;
	uint32_t n, cap;
	uint32_t *tab;		/* index + 1; 0 = free */
	uint32_t mask;
};

static uint64_t blob_hash(const void *p, size_t n)
{
	return pi_fnv64(PI_FNV64_BASIS, p, n);
}

static int blob_rehash(struct blobset *s, uint32_t slots)
{
	uint32_t *tab = calloc(slots, sizeof(*tab));

	if (!tab)
		return -ENOMEM;
	free(s->tab);
	s->tab = tab;
	s->mask = slots - 1;
	for (uint32_t i = 0; i < s->n; i++) {
		uint32_t h = blob_hash(s->data + i * s->size, s->size) & s->mask;

		while (tab[h])
			h = (h + 1) & s->mask;
		tab[h] = i + 1;
	}
	return 0;
}

static int blob_intern(struct blobset *s, const void *blob, uint32_t *idx)
{
	uint32_t h;

	if (!s->tab || (s->n + 1) * 2 > s->mask + 1) {
		int err = blob_rehash(s, s->tab ? (s->mask + 1) * 2 : 1024);

		if (err)
			return err;
	}
	h = blob_hash(blob, s->size) & s->mask;
	while (s->tab[h]) {
		uint32_t i = s->tab[h] - 1;

		if (!memcmp(s->data + i * s->size, blob, s->size)) {
			*idx = i;
			return 0;
		}
		h = (h + 1) & s->mask;
	}
	if (s->n == s->cap) {
		uint32_t cap = s->cap ? s->cap * 2 : 256;
		uint8_t *d = realloc(s->data, (size_t)cap * s->size);

		if (!d)
			return -ENOMEM;
		s->data = d;
		s->cap = cap;
	}
	memcpy(s->data + s->n * s->size, blob, s->size);
	s->tab[h] = s->n + 1;
	*idx = s->n++;
	return 0;
}

/* ---- vectors --------------------------------------------------------- */

struct builder {
	uint32_t nchunks;
	struct blobset chunks;	/* struct pi_cls_chunk; 0 is the empty one */
	struct blobset classes;	/* struct pi_cls_class */
};

static void bit_set(uint64_t *bm, uint32_t i, bool on)
{
	if (on)
		bm[i / 64] |= 1ULL << (i % 64);
	else
		bm[i / 64] &= ~(1ULL << (i % 64));
}

/* Stores chunk k of vector bm into cl. */
static int chunk_of(struct builder *b, const uint64_t *bm, uint32_t k,
		    struct pi_cls_class *cl)
{
	struct pi_cls_chunk ch = { 0 };
	uint32_t idx;
	int err;

	for (uint32_t j = 0; j < PI_CLS_WORDS; j++) {
		ch.w[j] = bm[k * PI_CLS_WORDS + j];
		if (ch.w[j])
			ch.summary |= 1ULL << j;
	}
	if (!ch.summary) {
		cl->chunk[k] = 0;
		cl->mask &= ~(1u << k);
		return 0;
	}
	err = blob_intern(&b->chunks, &ch, &idx);
	if (err)
		return err;
	/* a class names its chunks in 16 bits, as many as the node's pool
	 * holds: a policy of more distinct chunks could never be placed */
	if (idx >= PI_CLS_CHUNKS)
		return -ENOSPC;
	cl->mask |= 1u << k;
	cl->chunk[k] = idx;
	return 0;
}

/* ---- compile --------------------------------------------------------- */

struct prefix_ent {
	struct pi_dp_addr addr;	/* masked */
	uint32_t plen;
	int rule;		/* -1: the family's /0 */
};

static void mask_addr(struct pi_dp_addr *a, uint32_t plen)
{
	uint8_t *b = (uint8_t *)a->a;

	for (uint32_t i = 0; i < 16; i++) {
		uint32_t keep = plen > i * 8 ? plen - i * 8 : 0;

		if (keep < 8)
			b[i] &= (uint8_t)(0xff00 >> keep);
	}
}

static int prefix_cmp(const void *x, const void *y)
{
	const struct prefix_ent *a = x, *b = y;
	int c = memcmp(a->addr.a, b->addr.a, 16);

	if (c)
		return c;
	if (a->plen != b->plen)
		return a->plen < b->plen ? -1 : 1;
	return a->rule - b->rule;
}

static uint32_t rule_plen(const struct pi_dp_rule *r)
{
	return r->prefixlen > 128 ? 128 : r->prefixlen;
}

/* The address classes of `family`, appended to c->addrs. */
static int compile_family(struct builder *b, const struct pi_dp_rule *rules,
			  uint32_t count, uint32_t family,
			  struct cls_policy *c)
{
	uint32_t words = b->nchunks * PI_CLS_WORDS, n = 0, depth = 0;
	struct prefix_ent *ents = calloc(count + 1, sizeof(*ents));
	/* the chain of nested prefixes above the current one, /0 first */
	struct prefix_ent *stack_pfx = calloc(130, sizeof(*stack_pfx));
	struct pi_cls_class *stack_cl = calloc(130, sizeof(*stack_cl));
	uint64_t *stack_bm = calloc((size_t)130 * words, sizeof(uint64_t));
	int err = 0;

	if (!ents || !stack_pfx || !stack_cl || !stack_bm) {
		err = -ENOMEM;
		goto out;
	}
	ents[n++].rule = -1;
	for (uint32_t i = 0; i < count; i++) {
		const struct pi_dp_rule *r = &rules[i];

		if (r->family && r->family != family)
			continue;
		ents[n].addr = r->addr;
		ents[n].plen = rule_plen(r);
		mask_addr(&ents[n].addr, ents[n].plen);
		ents[n++].rule = i;
	}
	qsort(ents, n, sizeof(*ents), prefix_cmp);
	for (uint32_t i = 0; i < n && !err;) {
		struct prefix_ent *e = &ents[i];
		struct pi_cls_class cl;
		uint64_t *bm;
		uint32_t cls;
		bool dirty[PI_CLS_MAX_CHUNKS] = { 0 };

		while (depth && !pi_prefix_match(&e->addr, &stack_pfx[depth - 1].addr,
						 stack_pfx[depth - 1].plen))
			depth--;
		bm = stack_bm + (size_t)depth * words;
		if (depth) {
			memcpy(bm, bm - words, words * sizeof(uint64_t));
			cl = stack_cl[depth - 1];
		} else {
			memset(bm, 0, words * sizeof(uint64_t));
			memset(&cl, 0, sizeof(cl));
		}
		stack_pfx[depth] = *e;
		for (; i < n && ents[i].plen == e->plen &&
		       !memcmp(ents[i].addr.a, e->addr.a, 16); i++) {
			if (ents[i].rule < 0)
				continue;
			bit_set(bm, ents[i].rule, true);
			dirty[ents[i].rule / PI_CLS_CHUNK_RULES] = true;
		}
		for (uint32_t k = 0; k < b->nchunks && !err; k++)
			if (dirty[k])
				err = chunk_of(b, bm, k, &cl);
		if (!err)
			err = blob_intern(&b->classes, &cl, &cls);
		if (err)
			break;
		stack_cl[depth++] = cl;
		c->addrs[c->naddrs++] = (struct cls_addr){
			.family = family, .plen = e->plen, .addr = e->addr,
			.cls = cls,
		};
	}
out:
	free(ents);
	free(stack_pfx);
	free(stack_cl);
	free(stack_bm);
	return err;
}

struct port_ev {
	uint32_t at;
	uint32_t rule;
	bool add;
};

static int port_ev_cmp(const void *x, const void *y)
{
	const struct port_ev *a = x, *b = y;

	return a->at < b->at ? -1 : a->at > b->at;
}

static bool rule_takes_proto(const struct pi_dp_rule *r, uint32_t key)
{
	return !r->proto || (key != PI_CLS_PROTO_OTHER && r->proto == key);
}

/* The L4 entry of protocol key `key`. */
static int compile_l4(struct builder *b, const struct pi_dp_rule *rules,
		      uint32_t count, uint32_t key, struct cls_policy *c)
{
	uint32_t words = b->nchunks * PI_CLS_WORDS, nev = 0, cls, prev = 0;
	uint64_t *bm = calloc(words, sizeof(*bm));
	struct port_ev *ev = calloc((size_t)2 * count, sizeof(*ev));
	struct cls_l4e *e = &c->l4s[c->nl4];
	struct pi_cls_class cl = { 0 };
	int err = 0;

	if (!bm || !ev) {
		err = -ENOMEM;
		goto out;
	}
	e->proto = key;
	for (uint32_t i = 0; i < count; i++) {
		const struct pi_dp_rule *r = &rules[i];

		if (!rule_takes_proto(r, key))
			continue;
		if (!r->port_hi) {
			bit_set(bm, i, true);
			continue;
		}
		if (r->port_lo > r->port_hi)
			continue;	/* a range no port is in */
		ev[nev++] = (struct port_ev){ .at = r->port_lo, .rule = i,
					      .add = true };
		if (r->port_hi < 65535)
			ev[nev++] = (struct port_ev){ .at = r->port_hi + 1u,
						      .rule = i };
	}
	for (uint32_t k = 0; k < b->nchunks && !err; k++)
		err = chunk_of(b, bm, k, &cl);
	if (!err)
		err = blob_intern(&b->classes, &cl, &e->v.noport_class);
	if (err)
		goto out;
	qsort(ev, nev, sizeof(*ev), port_ev_cmp);
	e->v.port_off = c->nports;
	/* The intervals start at 0 and wherever a range begins or ends;
	 * neighbours of the same class are one interval. */
	for (uint32_t i = 0, first = 1; !err && (first || i < nev); first = 0) {
		uint32_t at = first ? 0 : ev[i].at;
		bool dirty[PI_CLS_MAX_CHUNKS] = { 0 };

		for (; i < nev && ev[i].at == at; i++) {
			bit_set(bm, ev[i].rule, ev[i].add);
			dirty[ev[i].rule / PI_CLS_CHUNK_RULES] = true;
		}
		for (uint32_t k = 0; k < b->nchunks && !err; k++)
			if (dirty[k])
				err = chunk_of(b, bm, k, &cl);
		if (!err)
			err = blob_intern(&b->classes, &cl, &cls);
		if (err || (!first && cls == prev))
			continue;
		c->ports[c->nports++] = (struct pi_cls_port){ .start = at,
							      .cls = cls };
		prev = cls;
	}
	e->v.nports = c->nports - e->v.port_off;
	c->nl4++;
out:
	free(bm);
	free(ev);
	return err;
}

static int u32_cmp(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;

	return a < b ? -1 : a > b;
}

/* The L4 keys of a rule list: each protocol a rule names that a packet's
 * key can be (ICMPv6 never is: it is looked up as ICMP), and the key of
 * all other protocols. Returns how many, in keys (room for count + 1). */
static uint32_t l4_keys(const struct pi_dp_rule *rules, uint32_t count,
			uint32_t *keys)
{
	uint32_t n = 0, u = 0;

	for (uint32_t i = 0; i < count; i++)
		if (rules[i].proto && rules[i].proto != PI_IPPROTO_ICMPV6)
			keys[n++] = rules[i].proto;
	qsort(keys, n, sizeof(*keys), u32_cmp);
	for (uint32_t i = 0; i < n; i++)
		if (!u || keys[u - 1] != keys[i])
			keys[u++] = keys[i];
	keys[u++] = PI_CLS_PROTO_OTHER;
	return u;
}

void cls_policy_free(struct cls_policy *c)
{
	free(c->classes);
	free(c->chunks);
	free(c->ports);
	free(c->addrs);
	free(c->l4s);
	memset(c, 0, sizeof(*c));
}

int cls_compile(const struct pi_dp_rule *rules, uint32_t count,
		struct cls_policy *c)
{
	struct builder b = {
		.chunks = { .size = sizeof(struct pi_cls_chunk) },
		.classes = { .size = sizeof(struct pi_cls_class) },
	};
	struct pi_cls_chunk empty = { 0 };
	uint32_t *keys = calloc(count + 1, sizeof(*keys)), nkeys, idx;
	int err;

	memset(c, 0, sizeof(*c));
	if (!keys)
		return -ENOMEM;
	if (count > PI_CLS_MAX_CHUNKS * PI_CLS_CHUNK_RULES) {
		free(keys);
		return -E2BIG;
	}
	b.nchunks = (count + PI_CLS_CHUNK_RULES - 1) / PI_CLS_CHUNK_RULES;
	c->nrules = count;
	c->nchunks = b.nchunks;
	nkeys = l4_keys(rules, count, keys);
	c->addrs = calloc((size_t)ADDR_FAMILIES * (count + 1), sizeof(*c->addrs));
	c->l4s = calloc(nkeys, sizeof(*c->l4s));
	/* per key: one interval and two per rule at most */
	c->ports = calloc((size_t)nkeys * (2 * count + 1), sizeof(*c->ports));
	err = !c->addrs || !c->l4s || !c->ports ? -ENOMEM :
	      blob_intern(&b.chunks, &empty, &idx);
	for (uint32_t f = 0; !err && f < ADDR_FAMILIES; f++)
		err = compile_family(&b, rules, count, families[f], c);
	for (uint32_t k = 0; !err && k < nkeys; k++)
		err = compile_l4(&b, rules, count, keys[k], c);
	free(keys);
	free(b.chunks.tab);
	free(b.classes.tab);
	c->chunks = (void *)b.chunks.data;
	c->nchunk = b.chunks.n;
	c->classes = (void *)b.classes.data;
	c->nclasses = b.classes.n;
	if (err)
		cls_policy_free(c);
	return err;
}

int cls_lookup(const struct cls_policy *c, uint32_t family,
	       const struct pi_dp_addr *peer, uint8_t proto, uint8_t has_ports,
	       uint16_t port)
{
	const struct cls_addr *best = NULL;
	const struct cls_l4e *l4 = NULL;
	uint32_t key = pi_cls_proto_key(family, proto), lcls;

	for (uint32_t i = 0; i < c->naddrs; i++) {
		const struct cls_addr *a = &c->addrs[i];

		if (a->family == family && (!best || a->plen > best->plen) &&
		    pi_prefix_match(peer, &a->addr, a->plen))
			best = a;
	}
	for (uint32_t i = 0; i < c->nl4; i++)
		if (c->l4s[i].proto == key ||
		    (!l4 && c->l4s[i].proto == PI_CLS_PROTO_OTHER))
			l4 = &c->l4s[i];
	if (!best || !l4)
		return -1;
	if (has_ports) {
		uint32_t lo = 0, hi = l4->v.nports;

		while (hi - lo > 1) {
			uint32_t mid = lo + (hi - lo) / 2;

			if (c->ports[l4->v.port_off + mid].start <= port)
				lo = mid;
			else
				hi = mid;
		}
		lcls = c->ports[l4->v.port_off + lo].cls;
	} else {
		lcls = l4->v.noport_class;
	}
	for (uint32_t both = c->classes[best->cls].mask & c->classes[lcls].mask;
	     both; both &= both - 1) {
		uint32_t k = pi_cls_ctz(both);
		uint32_t ia = c->classes[best->cls].chunk[k];
		uint32_t ib = c->classes[lcls].chunk[k];
		int bit;

		bit = pi_cls_chunk_first(&c->chunks[ia], &c->chunks[ib]);
		if (bit >= 0)
			return (int)(k * PI_CLS_CHUNK_RULES + bit);
	}
	return -1;
}

/* ---- array maps in batches ------------------------------------------- */

int cls_array_read(int fd, uint32_t first, uint32_t count, void *out,
		   size_t vsize)
{
	DECLARE_LIBBPF_OPTS(bpf_map_batch_opts, opts);
	uint32_t *keys, done = 0;
	int err = 0;

	if (!count)
		return 0;
	keys = calloc(count, sizeof(*keys));
	if (!keys)
		return -ENOMEM;
	while (done < count) {
		/* the batch starts after the key in_batch names */
		uint32_t in = first + done - 1, next, n = count - done;

		err = bpf_map_lookup_batch(fd, first + done ? &in : NULL, &next,
					   keys, (char *)out + done * vsize,
					   &n, &opts) ? -errno : 0;
		if (err && err != -ENOENT)
			break;
		if (!n) {
			err = err ? err : -EIO;
			break;
		}
		done += n;
		err = 0;
	}
	free(keys);
	if (!err)
		return 0;
	for (uint32_t i = 0; i < count; i++) {
		uint32_t k = first + i;

		if (bpf_map_lookup_elem(fd, &k, (char *)out + i * vsize))
			return -errno;
	}
	return 0;
}

int cls_array_write(int fd, uint32_t first, uint32_t count, const void *vals,
		    size_t vsize)
{
	DECLARE_LIBBPF_OPTS(bpf_map_batch_opts, opts);
	uint32_t *keys, n = count;
	int err;

	if (!count)
		return 0;
	keys = calloc(count, sizeof(*keys));
	if (!keys)
		return -ENOMEM;
	for (uint32_t i = 0; i < count; i++)
		keys[i] = first + i;
	err = bpf_map_update_batch(fd, keys, vals, &n, &opts) ? -errno : 0;
	free(keys);
	if (!err)
		return 0;
	for (uint32_t i = 0; i < count; i++) {
		uint32_t k = first + i;

		if (bpf_map_update_elem(fd, &k, (const char *)vals + i * vsize, 0))
			return -errno;
	}
	return 0;
}

/* ---- the address trie in batches -------------------------------------- */

/* Writes n keys and values into a hash-like map (the trie): one
 * BPF_MAP_UPDATE_BATCH where the kernel has it for the map (6.12 has it
 * for LPM tries), else one call per entry. A policy of 10 000 prefixes is
 * rewritten on each edit, and the calls were most of an edit's time. */
static int keyed_write(int fd, const void *keys, size_t ksize,
		       const void *vals, size_t vsize, uint32_t n)
{
	DECLARE_LIBBPF_OPTS(bpf_map_batch_opts, opts);
	uint32_t done = n;

	if (!bpf_map_update_batch(fd, keys, vals, &done, &opts))
		return 0;
	/* the kernel's "no batch for this map" (ENOTSUPP, 524, is not in
	 * user space's errno.h): what it took stays, the rest one by one */
	if (errno != EINVAL && errno != EOPNOTSUPP && errno != 524)
		return -errno;
	if (done > n)
		done = 0;
	for (; done < n; done++)
		if (bpf_map_update_elem(fd, (const char *)keys + done * ksize,
					(const char *)vals + done * vsize, 0))
			return -errno;
	return 0;
}

/* Deletes n keys, some of which may be missing or named twice (rules that
 * share a prefix): a batch stops at the first missing key, so it goes on
 * after it. */
static void keyed_delete(int fd, const void *keys, size_t ksize, uint32_t n)
{
	DECLARE_LIBBPF_OPTS(bpf_map_batch_opts, opts);
	uint32_t done = 0, cnt;

	while (done < n) {
		cnt = n - done;
		if (!bpf_map_delete_batch(fd, (const char *)keys + done * ksize,
					  &cnt, &opts))
			return;
		done += cnt;
		if (errno == ENOENT) {
			done++;
			continue;
		}
		break;
	}
	for (; done < n; done++)
		bpf_map_delete_elem(fd, (const char *)keys + done * ksize);
}

/* ---- publish --------------------------------------------------------- */

struct span {
	uint32_t off, n;
};

static int span_cmp(const void *x, const void *y)
{
	const struct span *a = x, *b = y;

	return a->off < b->off ? -1 : a->off > b->off;
}

/* The first gap of `need` in [base, size) between the used spans. */
static int find_gap(struct span *used, uint32_t nused, uint32_t base,
		    uint32_t size, uint32_t need, uint32_t *off)
{
	uint32_t at = base;

	qsort(used, nused, sizeof(*used), span_cmp);
	for (uint32_t i = 0; i < nused; i++) {
		if (!used[i].n)
			continue;
		if (used[i].off >= at && used[i].off - at >= need)
			break;
		if (used[i].off + used[i].n > at)
			at = used[i].off + used[i].n;
	}
	if (at > size || size - at < need)
		return -ENOSPC;
	*off = at;
	return 0;
}

/* The trie and L4 keys of a policy of `gen` over `rules`, deleted; used
 * for the policy a flip retired and for an edit that failed. */
static void delete_keys(const struct cls_maps *m, uint32_t gen,
			const struct pi_dp_rule *rules, uint32_t count)
{
	uint32_t *keys = calloc(count + 1, sizeof(*keys)), nkeys;
	struct pi_cls_addr_key *ak = calloc((count + 1) * ADDR_FAMILIES,
					    sizeof(*ak));
	uint32_t na = 0;

	for (uint32_t f = 0; f < ADDR_FAMILIES; f++) {
		struct pi_cls_addr_key k = { .prefixlen = 64, .gen = gen,
					     .family = families[f] };

		if (ak)
			ak[na++] = k;
		else
			bpf_map_delete_elem(m->addrs, &k);
		for (uint32_t i = 0; i < count; i++) {
			if (rules[i].family && rules[i].family != families[f])
				continue;
			k.prefixlen = 64 + rule_plen(&rules[i]);
			k.addr = rules[i].addr;
			mask_addr(&k.addr, rule_plen(&rules[i]));
			if (ak)
				ak[na++] = k;
			else
				bpf_map_delete_elem(m->addrs, &k);
		}
	}
	if (ak)
		keyed_delete(m->addrs, ak, sizeof(*ak), na);
	free(ak);
	if (!keys)
		return;
	nkeys = l4_keys(rules, count, keys);
	for (uint32_t i = 0; i < nkeys; i++) {
		struct pi_cls_l4_key k = { .gen = gen, .proto = keys[i] };

		bpf_map_delete_elem(m->l4, &k);
	}
	free(keys);
}

/* Free ranges of the three pools for `c`, around every live policy's. */
static int place(const struct cls_maps *m, const struct cls_policy *c,
		 struct pi_cls_head *h, const char **why)
{
	struct pi_policy_ref *refs = calloc(PI_DP_MAX_PODS * 2, sizeof(*refs));
	struct span *sp[3];
	uint32_t n = 0;
	int err;

	sp[0] = calloc(PI_DP_MAX_PODS * 2, sizeof(struct span));
	sp[1] = calloc(PI_DP_MAX_PODS * 2, sizeof(struct span));
	sp[2] = calloc(PI_DP_MAX_PODS * 2, sizeof(struct span));
	err = !refs || !sp[0] || !sp[1] || !sp[2] ? -ENOMEM :
	      cls_array_read(m->refs, 0, PI_DP_MAX_PODS * 2, refs, sizeof(*refs));
	for (uint32_t k = 0; !err && k < PI_DP_MAX_PODS * 2; k++) {
		struct pi_cls_head o;
		uint32_t s = refs[k].start;

		if (!refs[k].count || bpf_map_lookup_elem(m->heads, &s, &o))
			continue;
		sp[0][n] = (struct span){ o.class_off, o.nclasses };
		sp[1][n] = (struct span){ o.chunk_off, o.nchunk };
		sp[2][n] = (struct span){ o.port_off, o.nports };
		n++;
	}
	h->nclasses = c->nclasses;
	h->nchunk = c->nchunk - 1;	/* the empty chunk is the node's */
	h->nports = c->nports;
	if (!err && find_gap(sp[0], n, 0, PI_CLS_CLASSES, h->nclasses,
			     &h->class_off)) {
		*why = "the node's classifier class pool is full";
		err = -ENOSPC;
	}
	if (!err && find_gap(sp[1], n, 1, PI_CLS_CHUNKS, h->nchunk,
			     &h->chunk_off)) {
		*why = "the node's classifier chunk pool is full";
		err = -ENOSPC;
	}
	if (!err && find_gap(sp[2], n, 0, PI_CLS_PORTS, h->nports,
			     &h->port_off)) {
		*why = "the node's classifier port interval pool is full";
		err = -ENOSPC;
	}
	free(refs);
	for (int i = 0; i < 3; i++)
		free(sp[i]);
	return err;
}

/* Writes compiled policy c, placed by h, under generation h->gen. */
static int write_compiled(const struct cls_maps *m, const struct cls_policy *c,
			  const struct pi_cls_head *h, const char **why)
{
	struct pi_cls_class *cl = calloc(c->nclasses ? c->nclasses : 1,
					 sizeof(*cl));
	struct pi_cls_port *pt = calloc(c->nports ? c->nports : 1, sizeof(*pt));
	int err = !cl || !pt ? -ENOMEM : 0;

	for (uint32_t i = 0; !err && i < c->nclasses; i++) {
		cl[i].mask = c->classes[i].mask;
		for (uint32_t k = 0; k < PI_CLS_MAX_CHUNKS; k++)
			cl[i].chunk[k] = c->classes[i].chunk[k] ?
					 h->chunk_off + c->classes[i].chunk[k] - 1 : 0;
	}
	for (uint32_t i = 0; !err && i < c->nports; i++)
		pt[i] = (struct pi_cls_port){ c->ports[i].start,
					      h->class_off + c->ports[i].cls };
	if (!err)
		err = cls_array_write(m->chunks, h->chunk_off, c->nchunk - 1,
				      c->chunks + 1, sizeof(*c->chunks));
	if (!err)
		err = cls_array_write(m->classes, h->class_off, c->nclasses, cl,
				      sizeof(*cl));
	if (!err)
		err = cls_array_write(m->ports, h->port_off, c->nports, pt,
				      sizeof(*pt));
	free(cl);
	free(pt);
	for (uint32_t i = 0; !err && i < c->nl4; i++) {
		struct pi_cls_l4_key k = { .gen = h->gen, .proto = c->l4s[i].proto };
		struct pi_cls_l4 v = c->l4s[i].v;

		v.noport_class += h->class_off;
		v.port_off += h->port_off;
		if (bpf_map_update_elem(m->l4, &k, &v, BPF_NOEXIST)) {
			err = -errno;
			*why = "the node's classifier L4 table is full";
		}
	}
	if (!err && c->naddrs) {
		struct pi_cls_addr_key *ks = calloc(c->naddrs, sizeof(*ks));
		uint32_t *vs = calloc(c->naddrs, sizeof(*vs));

		if (!ks || !vs)
			err = -ENOMEM;
		for (uint32_t i = 0; !err && i < c->naddrs; i++) {
			const struct cls_addr *a = &c->addrs[i];

			ks[i] = (struct pi_cls_addr_key){ .prefixlen = 64 + a->plen,
				.gen = h->gen, .family = a->family, .addr = a->addr };
			vs[i] = h->class_off + a->cls;
		}
		if (!err) {
			err = keyed_write(m->addrs, ks, sizeof(*ks), vs,
					  sizeof(*vs), c->naddrs);
			if (err)
				*why = "the node's classifier address trie is full";
		}
		free(ks);
		free(vs);
	}
	return err;
}

int cls_publish(const struct cls_maps *m, uint32_t pod_id, uint32_t dir,
		const struct pi_dp_rule *rules, uint32_t count, uint32_t start,
		const char **why)
{
	struct pi_policy_ref ref = { .start = start, .count = count }, old;
	struct pi_cls_head h = { 0 }, oldh = { 0 }, last = { 0 };
	uint32_t key = pod_id * 2 + dir, lastk = PI_MAX_RULES;
	struct pi_dp_rule *old_rules = NULL;
	struct cls_policy c = { 0 };
	const char *dummy;
	bool have_old;
	int err;

	if (!why)
		why = &dummy;
	*why = NULL;
	memset(&old, 0, sizeof(old));
	if (bpf_map_lookup_elem(m->refs, &key, &old))
		return -errno;
	/* The revision moves with every edit: flows decided before it are
	 * decided again (bpf/lib/ct.h), lookups that read the old policy
	 * see that its ranges may have been reused (bpf/lib/policy.h). */
	ref.rev = old.rev + 1;
	if (!count)
		ref.start = 0;
	/* The old policy's rules name its trie and L4 keys, deleted once the
	 * reference has moved: unread, they would stay for good. */
	have_old = old.count != 0;
	if (have_old) {
		old_rules = calloc(old.count, sizeof(*old_rules));
		err = !old_rules ? -ENOMEM :
		      bpf_map_lookup_elem(m->heads, &(uint32_t){ old.start },
					  &oldh) ? -errno :
		      cls_array_read(m->rules, old.start, old.count,
				     old_rules, sizeof(*old_rules));
		if (err) {
			*why = "the current policy cannot be read";
			free(old_rules);
			return err;
		}
	}
	if (count) {
		err = cls_compile(rules, count, &c);
		if (err == -E2BIG)
			*why = "a policy holds at most 32768 rules";
		if (err == -ENOSPC)
			*why = "the node's classifier chunk pool is full";
		if (!err)
			err = place(m, &c, &h, why);
		if (!err && bpf_map_lookup_elem(m->heads, &lastk, &last))
			err = -errno;
		if (err)
			goto out;
		/* handed out before use: a generation is never used twice,
		 * not even by an edit that failed half-way */
		h.gen = last.gen + 1 ? last.gen + 1 : 1;
		h.nchunks = c.nchunks;
		last.gen = h.gen;
		err = bpf_map_update_elem(m->heads, &lastk, &last, 0) ? -errno : 0;
		if (!err)
			err = cls_array_write(m->rules, start, count, rules,
					      sizeof(*rules));
		if (!err)
			err = write_compiled(m, &c, &h, why);
		if (!err)
			err = bpf_map_update_elem(m->heads, &start, &h, 0) ? -errno : 0;
		if (err) {
			delete_keys(m, h.gen, rules, count);
			goto out;
		}
	}
	err = bpf_map_update_elem(m->refs, &key, &ref, 0) ? -errno : 0;
	if (err) {
		if (count)
			delete_keys(m, h.gen, rules, count);
		goto out;
	}
	if (have_old)
		delete_keys(m, oldh.gen, old_rules, old.count);
out:
	cls_policy_free(&c);
	free(old_rules);
	return err;
}

/* ---- the datapath's lookup, from userspace ---------------------------- */

int cls_lookup_maps(const struct cls_maps *m, uint32_t start, uint32_t family,
		    const struct pi_dp_addr *peer, uint8_t proto,
		    uint8_t has_ports, uint16_t port, uint32_t *pos)
{
	struct pi_cls_addr_key ak = { .prefixlen = 64 + 128, .family = family,
				      .addr = *peer };
	struct pi_cls_l4_key lk = { .proto = pi_cls_proto_key(family, proto) };
	struct pi_cls_class ca, cl;
	struct pi_cls_head h;
	struct pi_cls_port iv;
	struct pi_cls_l4 l4;
	uint32_t acls;

	if (bpf_map_lookup_elem(m->heads, &start, &h))
		return -errno;
	ak.gen = lk.gen = h.gen;
	/* no address or protocol class of the policy's: no rule matches */
	if (bpf_map_lookup_elem(m->addrs, &ak, &acls))
		return errno == ENOENT ? 0 : -errno;
	if (bpf_map_lookup_elem(m->l4, &lk, &l4)) {
		if (errno != ENOENT)
			return -errno;
		lk.proto = PI_CLS_PROTO_OTHER;
		if (bpf_map_lookup_elem(m->l4, &lk, &l4))
			return errno == ENOENT ? 0 : -errno;
	}
	if (has_ports) {
		uint32_t lo = 0, hi = l4.nports, k;

		while (hi - lo > 1) {
			uint32_t mid = lo + (hi - lo) / 2;

			k = l4.port_off + mid;
			if (bpf_map_lookup_elem(m->ports, &k, &iv))
				return -errno;
			if (iv.start <= port)
				lo = mid;
			else
				hi = mid;
		}
		k = l4.port_off + lo;
		if (bpf_map_lookup_elem(m->ports, &k, &iv))
			return -errno;
		l4.noport_class = iv.cls;
	}
	if (bpf_map_lookup_elem(m->classes, &acls, &ca) ||
	    bpf_map_lookup_elem(m->classes, &l4.noport_class, &cl))
		return -errno;
	for (uint32_t both = ca.mask & cl.mask; both; both &= both - 1) {
		uint32_t k = pi_cls_ctz(both), ia = ca.chunk[k], ib = cl.chunk[k];
		struct pi_cls_chunk a, b;
		int bit;

		if (bpf_map_lookup_elem(m->chunks, &ia, &a) ||
		    bpf_map_lookup_elem(m->chunks, &ib, &b))
			return -errno;
		bit = pi_cls_chunk_first(&a, &b);
		if (bit >= 0) {
			*pos = k * PI_CLS_CHUNK_RULES + bit;
			return 1;
		}
	}
	return 0;
}
