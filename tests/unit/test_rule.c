/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The rule matcher of include/podinject_rule.h, as userspace runs it,
 * against pod_egress under BPF_PROG_TEST_RUN: random rule sets (1..MAX_SET
 * rules of random families, every prefix length, protocols, port ranges,
 * allow and deny) in the node's maps, random packets built in C, and per
 * packet the verdict and the counters of every rule of the set compared
 * with what a first-match walk of the same rules with the userspace
 * matcher predicts. Deterministic: the seed is fixed (PODINJECT_RULE_SEED
 * picks another) and named in every failure, with the packet and the rules.
 */
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "podinject_abi.h"
#include "podinject_rule.h"
#include "node.skel.h"
#include "pkt.h"
#include "unit.h"
#include "fixture.h"
#include "cls.h"

#define SETS		250
#define PKTS_PER_SET	16
#define MAX_SET		24
#define POD_ID		3

static uint64_t rng_state;

/* splitmix64: the same sequence from the same seed on every libc */
static uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint32_t below(uint32_t n)
{
	return rnd() % n;
}

/* true with probability pct % */
static bool chance(uint32_t pct)
{
	return below(100) < pct;
}

/* A packet as the test builds it, and what the matcher is given. */
struct tpkt {
	int family;
	struct pi_dp_addr dst;
	uint8_t proto;		/* on the wire: IPPROTO_ICMPV6 for ping6 */
	uint16_t sport, dport;
};

static bool tpkt_has_ports(const struct tpkt *t)
{
	return t->proto == IPPROTO_TCP || t->proto == IPPROTO_UDP;
}

static void flip_bit(struct pi_dp_addr *a, uint32_t bit)
{
	uint32_t w = ntohl(a->a[bit / 32]);

	w ^= 1u << (31 - bit % 32);
	a->a[bit / 32] = htonl(w);
}

static void random_addr(int family, struct pi_dp_addr *a)
{
	memset(a, 0, sizeof(*a));
	for (int i = 0; i < (family == AF_INET ? 1 : 4); i++)
		a->a[i] = (uint32_t)rnd();
}

static struct pi_dp_rule random_rule(uint32_t id)
{
	static const uint8_t protos[] = { 0, 0, 0, IPPROTO_TCP, IPPROTO_TCP,
		IPPROTO_UDP, IPPROTO_UDP, IPPROTO_ICMP, IPPROTO_ICMP,
		IPPROTO_ICMPV6, 132 };
	struct pi_dp_rule r = { .id = id };
	uint32_t f = below(8);

	r.action = chance(50) ? PI_DP_ALLOW : PI_DP_DENY;
	r.family = f < 2 ? 0 : f < 5 ? AF_INET : AF_INET6;
	if (r.family) {
		/* host bits left set on purpose: the matcher must not look */
		random_addr(r.family, &r.addr);
		r.prefixlen = below(r.family == AF_INET ? 33 : 129);
	}
	r.proto = protos[below(sizeof(protos))];
	if (chance(40)) {
		uint32_t lo = chance(15) ? 0 : below(65536);
		uint32_t hi = lo + (chance(30) ? 0 : below(2000));

		r.port_lo = lo;
		r.port_hi = hi > 65535 ? 65535 : hi;
		if (chance(3) && r.port_hi < 65535) /* empty: no port */
			r.port_lo = r.port_hi + 1;
		if (chance(3))		/* port_hi 0: any port, whatever lo */
			r.port_hi = 0;
	}
	return r;
}

/* Mostly near some rule: inside or just outside its prefix and range. */
static void random_packet(const struct pi_dp_rule *rules, int n, struct tpkt *t)
{
	const struct pi_dp_rule *near = &rules[below(n)];
	uint32_t p = below(100);

	memset(t, 0, sizeof(*t));
	t->family = near->family && chance(80) ? near->family :
		    chance(50) ? AF_INET : AF_INET6;
	if (p < 35)
		t->proto = IPPROTO_TCP;
	else if (p < 70)
		t->proto = IPPROTO_UDP;
	else if (p < 90)
		t->proto = t->family == AF_INET ? IPPROTO_ICMP : IPPROTO_ICMPV6;
	else if (p < 95)	/* the other family's ping number */
		t->proto = t->family == AF_INET ? IPPROTO_ICMPV6 : IPPROTO_ICMP;
	else
		t->proto = 132;	/* SCTP: no ports read */
	/* No later fragments: the datapath decides those by their first
	 * fragment's entry in the fragment table, not by the matcher
	 * (node_harden_fragments_* in test_node.c). */

	if (near->family == t->family && chance(75)) {
		uint32_t max = t->family == AF_INET ? 32 : 128;
		uint32_t plen = near->prefixlen, c = below(5);

		t->dst = near->addr;
		if (t->family == AF_INET)
			t->dst.a[1] = t->dst.a[2] = t->dst.a[3] = 0;
		if (c == 0 && plen)			/* inside, at the edge */
			flip_bit(&t->dst, plen - 1);
		else if (c == 1 && plen < max)		/* just outside */
			flip_bit(&t->dst, plen);
		else if (c == 2 && plen)		/* anywhere inside */
			flip_bit(&t->dst, below(plen));
		else if (c == 3 && plen < max)		/* host bits */
			flip_bit(&t->dst, plen + below(max - plen));
	} else {
		random_addr(t->family, &t->dst);
	}

	t->sport = below(65536);
	if (near->port_hi && chance(70)) {
		static const int8_t edge[] = { -1, 0, 0, 1 };
		uint32_t at = chance(50) ? near->port_lo : near->port_hi;

		t->dport = (uint16_t)(at + edge[below(4)]);
	} else {
		t->dport = chance(5) ? 0 : below(65536);
	}
	if (t->proto != IPPROTO_TCP && t->proto != IPPROTO_UDP)
		t->dport = 0;
}

static int frame(const struct tpkt *t, uint8_t *buf)
{
	struct pkt_spec s = { .family = t->family, .proto = t->proto,
			      .sport = t->sport, .dport = t->dport };
	char dst[INET6_ADDRSTRLEN];
	int len;

	inet_ntop(t->family, t->dst.a, dst, sizeof(dst));
	s.src = t->family == AF_INET ? "10.0.0.1" : "fd00::1";
	s.dst = dst;
	len = pkt_build(buf, &s);
	if (t->family == AF_INET6)	/* pkt_build writes ICMP as ICMPv6 */
		buf[14 + 6] = t->proto;
	return len;
}

/* The userspace decision: index of the first matching rule, or -1. */
static int user_decides(const struct pi_dp_rule *rules, int n,
			const struct tpkt *t)
{
	bool ports = tpkt_has_ports(t);

	for (int i = 0; i < n; i++)
		if (pi_rule_matches(&rules[i], t->family, &t->dst, t->proto,
				    ports, ports ? t->dport : 0))
			return i;
	return -1;
}

static struct pi_rule_stats rule_counter(struct node_bpf *skel, uint32_t id,
					 struct pi_rule_stats *per, int ncpu)
{
	struct pi_rule_stats sum = { 0 };

	if (bpf_map__lookup_elem(skel->maps.rule_stats, &id, 4, per,
				 ncpu * sizeof(*per), 0))
		return sum;
	for (int c = 0; c < ncpu; c++) {
		sum.packets += per[c].packets;
		sum.bytes += per[c].bytes;
	}
	return sum;
}

static uint64_t policy_drops(struct node_bpf *skel, struct pi_dp_pod_stats *per,
			     int ncpu)
{
	uint32_t id = POD_ID;
	uint64_t n = 0;

	if (bpf_map__lookup_elem(skel->maps.pod_stats, &id, 4, per,
				 ncpu * sizeof(*per), 0))
		return 0;
	for (int c = 0; c < ncpu; c++)
		n += per[c].drops[PI_DP_DROP_POLICY];
	return n;
}

static void describe_rule(FILE *f, int i, const struct pi_dp_rule *r)
{
	char a[INET6_ADDRSTRLEN] = "*";

	if (r->family)
		inet_ntop(r->family, r->addr.a, a, sizeof(a));
	fprintf(f, "  rule %2d id %u %s family %u %s/%u proto %u port %u-%u\n",
		i, r->id, r->action == PI_DP_DENY ? "deny " : "allow", r->family,
		a, r->prefixlen, r->proto, r->port_lo, r->port_hi);
}

static void describe(uint64_t seed, int set, int pkt, const struct pi_dp_rule *rules,
		     int n, const struct tpkt *t)
{
	char d[INET6_ADDRSTRLEN];

	inet_ntop(t->family, t->dst.a, d, sizeof(d));
	fprintf(stderr, "rule matcher mismatch: seed %" PRIu64 " set %d packet %d\n"
		"  packet family %d dst %s proto %u dport %u\n", seed, set,
		pkt, t->family, d, t->proto, t->dport);
	for (int i = 0; i < n; i++)
		describe_rule(stderr, i, &rules[i]);
}

/* A node program loaded in the test's namespace with pod POD_ID on a new
 * device `dev` (10.0.0.1, fd00::1); the seed from PODINJECT_RULE_SEED if
 * set. NULL when any of it failed (said by the assertion). */
static struct node_bpf *rule_node(const char *dev, uint64_t *seed,
				  int *ifindex)
{
	struct pi_pod pod = { .id = POD_ID,
			      .flags = PI_DP_POD_HAS_V4 | PI_DP_POD_HAS_V6 };
	struct node_bpf *skel;

	if (getenv("PODINJECT_RULE_SEED"))
		*seed = strtoull(getenv("PODINJECT_RULE_SEED"), NULL, 0);
	rng_state = *seed;
	if (!ASSERT_OK(fixture_netns(), "private netns"))
		return NULL;
	*ifindex = fixture_dev(dev);
	if (!ASSERT_TRUE(*ifindex > 1, "fixture device"))
		return NULL;
	skel = node_bpf__open_and_load();
	if (!ASSERT_TRUE(skel, "load node_bpf"))
		return NULL;
	pod.ifindex = *ifindex;
	inet_pton(AF_INET, "10.0.0.1", &pod.ip4);
	inet_pton(AF_INET6, "fd00::1", pod.ip6);
	bpf_map__update_elem(skel->maps.pods, ifindex, 4, &pod, sizeof(pod), 0);
	return skel;
}

UNIT_TEST(rule_matcher_agrees_with_pod_egress)
{
	uint64_t seed = 20261201, want_drops = 0;
	int ncpu = libbpf_num_possible_cpus(), ifindex, prog, packets = 0;
	int decided[3] = { 0 };	/* by an allow rule, a deny rule, none */
	struct pi_rule_stats *per_rule = calloc(ncpu, sizeof(*per_rule));
	struct pi_dp_pod_stats *per_pod = calloc(ncpu, sizeof(*per_pod));
	struct node_bpf *skel = NULL;
	uint32_t base = 1;
	bool ok = true;

	if (!ASSERT_TRUE(per_rule && per_pod, "memory"))
		goto out;
	skel = rule_node("rm", &seed, &ifindex);
	if (!skel)
		goto out;
	prog = bpf_program__fd(skel->progs.pod_egress);

	for (int set = 0; set < SETS && ok; set++) {
		struct pi_dp_rule rules[MAX_SET];
		uint64_t want[MAX_SET] = { 0 }, want_bytes[MAX_SET] = { 0 };
		uint32_t start = below(PI_MAX_RULES - MAX_SET);
		int n = 1 + below(MAX_SET);

		/* fresh ids and a random range of the node's rule array,
		 * published as lib/policy.c publishes an edit */
		for (int i = 0; i < n; i++)
			rules[i] = random_rule(base + i);
		base += n;
		if (!ASSERT_OK(fixture_set_policy(skel->obj, POD_ID,
						  PI_DP_DIR_EGRESS, rules, n,
						  start), "policy published"))
			break;

		for (int k = 0; k < PKTS_PER_SET && ok; k++) {
			uint8_t buf[PKT_MAX];
			struct tpkt t;
			int len, verdict, idx;
			char what[160];

			random_packet(rules, n, &t);
			len = frame(&t, buf);
			idx = user_decides(rules, n, &t);
			verdict = fixture_run(prog, ifindex, buf, len, NULL);
			packets++;
			decided[idx < 0 ? 2 : rules[idx].action == PI_DP_DENY]++;
			if (idx >= 0) {
				want[idx]++;
				want_bytes[idx] += len;
			}
			if (idx >= 0 && rules[idx].action == PI_DP_DENY)
				want_drops++;
			snprintf(what, sizeof(what),
				 "seed %" PRIu64 " set %d packet %d: verdict (userspace: %s)",
				 seed, set, k, idx < 0 ? "no rule" : rules[idx].action == PI_DP_DENY ?
				 "deny rule" : "allow rule");
			ok = ASSERT_EQ(verdict, idx >= 0 && rules[idx].action ==
				       PI_DP_DENY ? PI_DROP : PI_PASS, what);
			for (int i = 0; i < n && ok; i++) {
				struct pi_rule_stats st = rule_counter(
					skel, rules[i].id, per_rule, ncpu);

				snprintf(what, sizeof(what),
					 "seed %" PRIu64 " set %d packet %d: counter of rule %d (userspace decides by %d)",
					 seed, set, k, i, idx);
				ok = ASSERT_EQ(st.packets, want[i], what) &&
				     ASSERT_EQ(st.bytes, want_bytes[i], what);
			}
			if (ok) {
				snprintf(what, sizeof(what),
					 "seed %" PRIu64 " set %d packet %d: policy drops",
					 seed, set, k);
				ok = ASSERT_EQ(policy_drops(skel, per_pod, ncpu),
					       want_drops, what);
			}
			if (!ok)
				describe(seed, set, k, rules, n, &t);
		}
	}
	if (!ok)
		goto out;
	if (getenv("UNIT_VERBOSE"))
		fprintf(stderr, "seed %" PRIu64 ": %d packets, %d by allow rules, %d by deny rules, %d by none\n",
			seed, packets, decided[0], decided[1], decided[2]);
	/* The random sets must exercise all three outcomes, often. */
	ASSERT_EQ(packets, SETS * PKTS_PER_SET, "packets run");
	ASSERT_TRUE(decided[0] > packets / 8, "many decided by an allow rule");
	ASSERT_TRUE(decided[1] > packets / 8, "many decided by a deny rule");
	ASSERT_TRUE(decided[2] > packets / 20, "some matched no rule");
out:
	node_bpf__destroy(skel);
	free(per_rule);
	free(per_pod);
}

/* ---- the classifier against the walk, at every policy size ---- */

#define SCALE_PKTS	400

/* Rules as large policies have them: mostly narrow CIDRs of both families
 * (a third nested in an earlier rule's), a few wide ones, protocols, port
 * ranges of every width; rarely a rule that takes everything, so that
 * first matches fall anywhere in the list. */
static struct pi_dp_rule scale_rule(const struct pi_dp_rule *earlier, uint32_t n,
				 uint32_t total, uint32_t id)
{
	bool late = n >= total - total / 10;	/* where wide rules may go */
	bool wide;
	static const uint8_t protos[] = { 0, 0, IPPROTO_TCP, IPPROTO_TCP,
		IPPROTO_TCP, IPPROTO_UDP, IPPROTO_UDP, IPPROTO_ICMP,
		IPPROTO_ICMPV6, 132 };
	struct pi_dp_rule r = { .id = id };
	uint32_t max;

	r.action = chance(50) ? PI_DP_ALLOW : PI_DP_DENY;
	r.family = late && chance(2) ? 0 : chance(55) ? AF_INET : AF_INET6;
	max = r.family == AF_INET6 ? 128 : 32;
	if (r.family && n && chance(35) && earlier[below(n)].family == r.family) {
		const struct pi_dp_rule *p = &earlier[below(n)];

		while (p->family != r.family)
			p = &earlier[below(n)];
		r.addr = p->addr;
		r.prefixlen = p->prefixlen + below(max - p->prefixlen + 1);
		if (r.prefixlen > p->prefixlen && chance(50))
			flip_bit(&r.addr, p->prefixlen + below(r.prefixlen -
							       p->prefixlen));
	} else if (r.family) {
		random_addr(r.family, &r.addr);
		r.prefixlen = chance(5) ? below(max / 2) :
			      max / 2 + below(max / 2 + 1);
	}
	/* a wide CIDR early in the list names a port of one protocol */
	wide = r.prefixlen < max / 2 && !late;
	r.proto = wide ? IPPROTO_TCP : protos[below(sizeof(protos))];
	if (late && chance(3))
		r.proto = 0, r.prefixlen = chance(50) ? 0 : r.prefixlen;
	if ((r.proto == IPPROTO_TCP || r.proto == IPPROTO_UDP || !r.proto) &&
	    (wide || chance(60))) {
		uint32_t lo = below(65536);
		uint32_t hi = lo + (chance(40) || wide ? 0 :
				     below(chance(10) ? 30000 : 300));

		r.port_lo = lo;
		r.port_hi = hi > 65535 ? 65535 : hi;
	}
	return r;
}

/*
 * For random policies of 1 to 10 000 rules and packets aimed at their
 * rules' edges: the position the classifier finds in memory (lib/cls.c)
 * and on the node's maps (the datapath's lookup from userspace, as the
 * probe runs it), and pod_egress's verdict and the rule it counts, must
 * all be the first rule pi_rule_matches() takes in a walk of the list.
 */
UNIT_TEST(rule_classifier_agrees_with_walk_at_scale)
{
	static const uint32_t sizes[] = { 1, 10, 100, 1000, 10000,
					  1, 10, 100, 1000, 10000 };
	const uint32_t nsizes = sizeof(sizes) / sizeof(sizes[0]);
	uint64_t seed = 20261202;
	int ncpu = libbpf_num_possible_cpus(), ifindex, prog;
	int packets = 0, deep = 0, none = 0;
	struct pi_rule_stats *per_rule = calloc(ncpu, sizeof(*per_rule));
	struct pi_dp_rule *rules = calloc(10000, sizeof(*rules));
	uint64_t *want = calloc(10000 + 1, sizeof(*want));
	struct node_bpf *skel = NULL;
	struct cls_maps m;
	bool ok = true;

	if (!ASSERT_TRUE(per_rule && rules && want, "memory"))
		goto out;
	skel = rule_node("rc", &seed, &ifindex);
	if (!skel)
		goto out;
	prog = bpf_program__fd(skel->progs.pod_egress);
	m = CLS_MAPS_OF(skel);

	for (uint32_t s = 0; s < nsizes && ok; s++) {
		uint32_t n = sizes[s], start = s % 2 ? 0 : 20000;
		struct cls_policy c;
		char what[200];

		for (uint32_t i = 0; i < n; i++)
			rules[i] = scale_rule(rules, i, n, i + 1);
		memset(want, 0, (n + 1) * sizeof(*want));
		/* fresh counters: ids 1..n are reused from set to set */
		for (uint32_t i = 0; i < n; i++) {
			memset(per_rule, 0, ncpu * sizeof(*per_rule));
			bpf_map__update_elem(skel->maps.rule_stats, &rules[i].id,
					     4, per_rule,
					     ncpu * sizeof(*per_rule), 0);
		}
		snprintf(what, sizeof(what), "seed %" PRIu64 ", %u rules: compiled",
			 seed, n);
		if (!ASSERT_OK(cls_compile(rules, n, &c), what))
			break;
		snprintf(what, sizeof(what), "seed %" PRIu64 ", %u rules: published",
			 seed, n);
		if (!ASSERT_OK(fixture_set_policy(skel->obj, POD_ID,
						  PI_DP_DIR_EGRESS, rules, n,
						  start), what)) {
			cls_policy_free(&c);
			break;
		}
		for (int k = 0; k < SCALE_PKTS && ok; k++) {
			uint8_t buf[PKT_MAX];
			struct tpkt t;
			bool ports;
			int len, verdict, idx, mem, maps, found;
			uint32_t pos;

			random_packet(rules, n, &t);
			ports = tpkt_has_ports(&t);
			len = frame(&t, buf);
			idx = user_decides(rules, n, &t);
			mem = cls_lookup(&c, t.family, &t.dst, t.proto, ports,
					 ports ? t.dport : 0);
			found = cls_lookup_maps(&m, start, t.family, &t.dst,
						t.proto, ports,
						ports ? t.dport : 0, &pos);
			/* an error is neither a rule nor "none" (-1) */
			maps = found == 1 ? (int)pos : found == 0 ? -1 : INT_MIN;
			verdict = fixture_run(prog, ifindex, buf, len, NULL);
			packets++;
			deep += idx >= (int)n / 2 && n >= 100;
			none += idx < 0;
			if (idx >= 0)
				want[idx]++;
			snprintf(what, sizeof(what),
				 "seed %" PRIu64 ", %u rules, packet %d: classifier in memory",
				 seed, n, k);
			ok = ASSERT_EQ(mem, idx, what);
			snprintf(what, sizeof(what),
				 "seed %" PRIu64 ", %u rules, packet %d: classifier on the maps",
				 seed, n, k);
			ok = ok && ASSERT_EQ(maps, idx, what);
			snprintf(what, sizeof(what),
				 "seed %" PRIu64 ", %u rules, packet %d: pod_egress verdict",
				 seed, n, k);
			ok = ok && ASSERT_EQ(verdict, idx >= 0 &&
					     rules[idx].action == PI_DP_DENY ?
					     PI_DROP : PI_PASS, what);
			if (ok && idx >= 0) {
				struct pi_rule_stats st = rule_counter(
					skel, rules[idx].id, per_rule, ncpu);

				snprintf(what, sizeof(what),
					 "seed %" PRIu64 ", %u rules, packet %d: counter of the deciding rule %d",
					 seed, n, k, idx);
				ok = ASSERT_EQ(st.packets, want[idx], what);
			}
			if (!ok && n <= MAX_SET)
				describe(seed, (int)s, k, rules, n, &t);
			else if (!ok)
				fprintf(stderr, "  packet family %d proto %u dport %u; walk: %d, in memory: %d, maps: %d\n",
					t.family, t.proto, t.dport, idx, mem, maps);
		}
		/* no other rule was counted */
		for (uint32_t i = 0; i < n && ok; i++) {
			struct pi_rule_stats st = rule_counter(skel, rules[i].id,
							       per_rule, ncpu);

			snprintf(what, sizeof(what),
				 "seed %" PRIu64 ", %u rules: counter of rule %u",
				 seed, n, i);
			ok = ASSERT_EQ(st.packets, want[i], what);
		}
		cls_policy_free(&c);
	}
	if (!ok)
		goto out;
	if (getenv("UNIT_VERBOSE"))
		fprintf(stderr, "seed %" PRIu64 ": %d packets, %d decided in the second half of a list of 100 or more, %d by none\n",
			seed, packets, deep, none);
	ASSERT_EQ(packets, SCALE_PKTS * (int)nsizes, "packets run");
	ASSERT_TRUE(deep > packets / 8, "many decided deep in large lists");
	ASSERT_TRUE(none > packets / 20, "some matched no rule");
out:
	node_bpf__destroy(skel);
	free(per_rule);
	free(rules);
	free(want);
}

static uint32_t trie_entries(int fd)
{
	struct pi_cls_addr_key k, next;
	uint32_t n = 0;
	void *prev = NULL;

	while (!bpf_map_get_next_key(fd, prev, &next)) {
		k = next;
		prev = &k;
		n++;
	}
	return n;
}

/* A policy whose compiled form does not fit the node's pools is refused
 * with ENOSPC and a reason, and leaves everything as it was: the reference
 * (revision included), the old policy deciding, no trie entry behind. */
UNIT_TEST(rule_classifier_refuses_what_does_not_fit)
{
	const uint32_t n = PI_MAX_RULES / 2;
	struct pi_dp_rule *rules = calloc(n, sizeof(*rules));
	struct pi_dp_rule deny_all = { .id = 1, .action = PI_DP_DENY };
	struct pi_pod pod = { .id = POD_ID, .flags = PI_DP_POD_HAS_V4 };
	struct pi_policy_ref before, after;
	uint32_t key = POD_ID * 2 + PI_DP_DIR_EGRESS, entries;
	struct node_bpf *skel = NULL;
	const char *why = NULL;
	struct cls_maps m;
	uint8_t buf[PKT_MAX];
	int ifindex, len;

	rng_state = 20261203;
	if (!ASSERT_TRUE(rules, "memory") ||
	    !ASSERT_OK(fixture_netns(), "private netns"))
		goto out;
	ifindex = fixture_dev("rf");
	skel = node_bpf__open_and_load();
	if (!ASSERT_TRUE(ifindex > 1 && skel, "load node_bpf"))
		goto out;
	pod.ifindex = ifindex;
	inet_pton(AF_INET, "10.0.0.1", &pod.ip4);
	bpf_map__update_elem(skel->maps.pods, &ifindex, 4, &pod, sizeof(pod),
			     0);
	m = CLS_MAPS_OF(skel);
	if (!ASSERT_OK(cls_publish(&m, POD_ID, PI_DP_DIR_EGRESS, &deny_all, 1,
				   0, NULL), "a policy of one rule"))
		goto out;
	/* every range of ports of its own: about three chunks per rule */
	for (uint32_t i = 0; i < n; i++) {
		uint32_t lo = below(65536), hi = lo + below(30000);

		rules[i] = (struct pi_dp_rule){ .id = i + 2, .action = PI_DP_ALLOW,
			.proto = IPPROTO_TCP, .family = AF_INET,
			.prefixlen = below(33), .port_lo = lo,
			.port_hi = hi > 65535 ? 65535 : hi };
		rules[i].addr.a[0] = (uint32_t)rnd();
	}
	entries = trie_entries(m.addrs);
	bpf_map_lookup_elem(m.refs, &key, &before);
	ASSERT_EQ(cls_publish(&m, POD_ID, PI_DP_DIR_EGRESS, rules, n, 16, &why),
		  -ENOSPC, "32 768 rules of their own port ranges refused");
	ASSERT_TRUE(why && strstr(why, "pool is full"), "with a reason");
	bpf_map_lookup_elem(m.refs, &key, &after);
	ASSERT_TRUE(!memcmp(&before, &after, sizeof(before)),
		    "the reference unchanged");
	ASSERT_EQ(trie_entries(m.addrs), entries, "no trie entry left behind");
	len = pkt_build(buf, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"192.0.2.1", IPPROTO_TCP, 40000, 80 });
	ASSERT_EQ(fixture_run(bpf_program__fd(skel->progs.pod_egress), ifindex,
			      buf, len, NULL), PI_DROP,
		  "the old policy still decides");
out:
	node_bpf__destroy(skel);
	free(rules);
}

/* A descriptor of map `fd` that may write and not read. */
static int write_only(int fd)
{
	struct bpf_map_info info = {};
	uint32_t len = sizeof(info);
	LIBBPF_OPTS(bpf_get_fd_by_id_opts, opts, .open_flags = BPF_F_WRONLY);

	if (bpf_obj_get_info_by_fd(fd, &info, &len))
		return -errno;
	fd = bpf_map_get_fd_by_id_opts(info.id, &opts);
	return fd < 0 ? -errno : fd;
}

/* The userspace lookup on the maps tells a match, no match and a failure
 * to read apart: a map it may not read (-EPERM, which was -1, "no rule",
 * before) is an error. And a new policy whose predecessor's rules cannot
 * be read is refused before anything changes: their trie keys would stay
 * behind for good. */
UNIT_TEST(rule_classifier_errors_are_not_results)
{
	struct pi_dp_rule deny = { .id = 1, .action = PI_DP_DENY, .family = AF_INET,
				.prefixlen = 24, .proto = IPPROTO_TCP,
				.port_lo = 80, .port_hi = 80 };
	struct pi_dp_rule other = { .id = 2, .action = PI_DP_DENY };
	uint32_t key = POD_ID * 2 + PI_DP_DIR_EGRESS, pos = 99, entries;
	struct pi_policy_ref before, after;
	struct pi_dp_addr hit = {}, miss = {};
	struct node_bpf *skel = NULL;
	struct cls_maps m, ro;
	int wo_addrs = -1, wo_rules = -1;

	inet_pton(AF_INET, "192.0.2.0", &deny.addr.a[0]);
	inet_pton(AF_INET, "192.0.2.7", &hit.a[0]);
	inet_pton(AF_INET, "198.51.100.7", &miss.a[0]);
	if (!ASSERT_OK(fixture_netns(), "private netns"))
		return;
	skel = node_bpf__open_and_load();
	if (!ASSERT_TRUE(skel, "load node_bpf"))
		return;
	m = CLS_MAPS_OF(skel);
	if (!ASSERT_OK(cls_publish(&m, POD_ID, PI_DP_DIR_EGRESS, &deny, 1, 0,
				   NULL), "a policy of one rule"))
		goto out;
	ASSERT_EQ(cls_lookup_maps(&m, 0, AF_INET, &hit, IPPROTO_TCP, 1, 80,
				  &pos), 1, "its rule matches");
	ASSERT_EQ(pos, 0, "at position 0");
	ASSERT_EQ(cls_lookup_maps(&m, 0, AF_INET, &miss, IPPROTO_TCP, 1, 80,
				  &pos), 0, "another address: no rule");
	wo_addrs = write_only(m.addrs);
	wo_rules = write_only(m.rules);
	if (!ASSERT_TRUE(wo_addrs >= 0 && wo_rules >= 0, "write-only maps"))
		goto out;
	ro = m;
	ro.addrs = wo_addrs;
	ASSERT_EQ(cls_lookup_maps(&ro, 0, AF_INET, &hit, IPPROTO_TCP, 1, 80,
				  &pos), -EPERM, "an unreadable trie: -EPERM, no result");
	ro = m;
	ro.rules = wo_rules;
	entries = trie_entries(m.addrs);
	bpf_map_lookup_elem(m.refs, &key, &before);
	ASSERT_TRUE(cls_publish(&ro, POD_ID, PI_DP_DIR_EGRESS, &other, 1, 16,
				NULL) < 0, "old rules unreadable: refused");
	bpf_map_lookup_elem(m.refs, &key, &after);
	ASSERT_TRUE(!memcmp(&before, &after, sizeof(before)),
		    "the reference unchanged");
	ASSERT_EQ(trie_entries(m.addrs), entries, "the old keys are still the policy's");
	ASSERT_EQ(cls_lookup_maps(&m, 0, AF_INET, &hit, IPPROTO_TCP, 1, 80,
				  &pos), 1, "the old policy still decides");
out:
	if (wo_addrs >= 0)
		close(wo_addrs);
	if (wo_rules >= 0)
		close(wo_rules);
	node_bpf__destroy(skel);
}
