/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The XDP programs (bpf/xdp.bpf.c) under BPF_PROG_TEST_RUN, loaded the way
 * podinject loads them: on the node object's maps (bpf_map__reuse_fd), one
 * ACL instance per pod with its id in .rodata.
 *
 * One packet table decides the pod's ingress ACL at all three places it is
 * enforced: tc pod_ingress (the node stack's packets, pods without XDP),
 * tc deliver_to_pod (bpf_redirect_peer deliveries, here through
 * uplink_ingress) and XDP xdp_pod_ingress. Each case states its verdict and
 * deciding rule once; every program must agree, move that rule's counter
 * and the pod's counters by exactly one, and nothing else.
 */
#include <stdlib.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include "fixture.h"
#include "node.skel.h"
#include "xdp.skel.h"
#include "pkt.h"
#include "podinject_abi.h"
#include "unit.h"

struct xdp_fx {
	struct node_bpf *node;
	struct xdp_bpf *acl;		/* pod B's instance */
	struct xdp_bpf *uplink;
	int if_a, if_b, if_up;
};

#define POD_A	0
#define POD_B	1

static const uint8_t MAC_B[6] = { 0x02, 0xbb, 0, 0, 0, 2 };
static const uint8_t HOST_B[6] = { 0x02, 0xbb, 0, 0, 0, 0xfe };

static void add_pod(struct xdp_fx *fx, uint32_t id, int ifindex,
		    const char *ip4, const char *ip6, const uint8_t *mac,
		    const uint8_t *hmac)
{
	fixture_add_pod(fx->node->maps.pods, fx->node->maps.endpoints, id,
			ifindex, ip4, ip6, mac, hmac);
}

static void set_pod_flags(struct xdp_fx *fx, int ifindex, uint32_t set,
			  uint32_t clear)
{
	struct pi_pod pod;

	bpf_map__lookup_elem(fx->node->maps.pods, &ifindex, 4, &pod,
			     sizeof(pod), 0);
	pod.flags = (pod.flags | set) & ~clear;
	bpf_map__update_elem(fx->node->maps.pods, &ifindex, 4, &pod,
			     sizeof(pod), 0);
}

/* As src/xdp.c does with the pins: every map the node object has by the
 * same name is the one the XDP object uses. */
static struct xdp_bpf *load_xdp(struct xdp_fx *fx, uint32_t pod_id,
				bool uplink)
{
	struct xdp_bpf *skel = xdp_bpf__open();
	struct bpf_map *map, *shared;
	int err = 0;

	if (!skel)
		return NULL;
	skel->rodata->pod_id = pod_id;
	skel->rodata->trace_redirects = true;
	bpf_program__set_autoload(skel->progs.xdp_uplink, uplink);
	bpf_program__set_autoload(skel->progs.xdp_pod_ingress, !uplink);
	bpf_object__for_each_map(map, skel->obj) {
		if (bpf_map__is_internal(map))
			continue;
		shared = bpf_object__find_map_by_name(fx->node->obj,
						      bpf_map__name(map));
		if (shared)
			err = err ?: bpf_map__reuse_fd(map,
						       bpf_map__fd(shared));
		else if (fx->uplink && !uplink)
			/* the per-pod instance shares the uplink object's
			 * devmap and stats, as it shares their pins */
			err = err ?: bpf_map__reuse_fd(map,
				bpf_map__fd(bpf_object__find_map_by_name(
					fx->uplink->obj, bpf_map__name(map))));
	}
	if (err || xdp_bpf__load(skel)) {
		xdp_bpf__destroy(skel);
		return NULL;
	}
	return skel;
}

static bool fx_setup(struct xdp_fx *fx)
{
	memset(fx, 0, sizeof(*fx));
	if (!ASSERT_OK(fixture_netns(), "private netns"))
		return false;
	fx->if_a = fixture_dev("xa");
	fx->if_b = fixture_dev("xb");
	fx->if_up = fixture_dev("xup");
	if (!ASSERT_TRUE(fx->if_a > 1 && fx->if_b > 1 && fx->if_up > 1,
			 "fixture devices"))
		return false;
	fx->node = node_bpf__open();
	if (!ASSERT_TRUE(fx->node, "open node_bpf"))
		return false;
	fx->node->rodata->trace_redirects = true;
	if (!ASSERT_OK(node_bpf__load(fx->node), "load node_bpf"))
		goto fail;
	fx->uplink = load_xdp(fx, 0, true);
	if (!ASSERT_TRUE(fx->uplink, "load xdp_uplink on the node's maps"))
		goto fail;
	fx->acl = load_xdp(fx, POD_B, false);
	if (!ASSERT_TRUE(fx->acl, "load xdp_pod_ingress for pod B"))
		goto fail;
	add_pod(fx, POD_A, fx->if_a, "10.0.0.1", "fd00::1",
		(uint8_t[6]){ 0x02, 0xaa, 0, 0, 0, 1 },
		(uint8_t[6]){ 0x02, 0xaa, 0, 0, 0, 0xfe });
	add_pod(fx, POD_B, fx->if_b, "10.0.0.2", "fd00::2", MAC_B, HOST_B);
	return true;
fail:
	xdp_bpf__destroy(fx->acl);
	xdp_bpf__destroy(fx->uplink);
	node_bpf__destroy(fx->node);
	fx->node = NULL;
	return false;
}

static void fx_teardown(struct xdp_fx *fx)
{
	xdp_bpf__destroy(fx->acl);
	xdp_bpf__destroy(fx->uplink);
	node_bpf__destroy(fx->node);
}

static int run_tc(struct bpf_program *prog, int ifindex, uint8_t *pkt,
		  int len)
{
	return fixture_run(bpf_program__fd(prog), ifindex, pkt, len, NULL);
}

static int run_xdp(struct bpf_program *prog, uint8_t *pkt, int len,
		   uint8_t *out)
{
	uint8_t scratch[PKT_MAX];
	DECLARE_LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = pkt,
			    .data_size_in = len,
			    .data_out = out ? out : scratch,
			    .data_size_out = PKT_MAX, .repeat = 1);
	int err = bpf_prog_test_run_opts(bpf_program__fd(prog), &opts);

	return err ? -1000 + err : (int)opts.retval;
}

static struct pi_dp_pod_stats pod_stats(struct xdp_fx *fx, uint32_t id)
{
	int ncpu = libbpf_num_possible_cpus();
	struct pi_dp_pod_stats *per = calloc(ncpu, sizeof(*per)), sum = {};

	bpf_map__lookup_elem(fx->node->maps.pod_stats, &id, 4, per,
			     ncpu * sizeof(*per), 0);
	for (int c = 0; c < ncpu; c++) {
		sum.ingress_packets += per[c].ingress_packets;
		sum.ingress_bytes += per[c].ingress_bytes;
		for (int r = 0; r < PI_DP_DROP_MAX; r++)
			sum.drops[r] += per[c].drops[r];
	}
	free(per);
	return sum;
}

static struct pi_dp_xdp_stats xdp_stats(struct xdp_fx *fx, uint32_t id)
{
	int ncpu = libbpf_num_possible_cpus();
	struct pi_dp_xdp_stats *per = calloc(ncpu, sizeof(*per)), sum = {};

	bpf_map__lookup_elem(fx->uplink->maps.xdp_stats, &id, 4, per,
			     ncpu * sizeof(*per), 0);
	for (int c = 0; c < ncpu; c++) {
		sum.acl_packets += per[c].acl_packets;
		sum.acl_bytes += per[c].acl_bytes;
		sum.acl_drops += per[c].acl_drops;
		sum.uplink_redirects += per[c].uplink_redirects;
	}
	free(per);
	return sum;
}

static uint64_t rule_packets(struct xdp_fx *fx, uint32_t id)
{
	int ncpu = libbpf_num_possible_cpus();
	struct pi_rule_stats *per = calloc(ncpu, sizeof(*per));
	uint64_t n = 0;

	bpf_map__lookup_elem(fx->node->maps.rule_stats, &id, 4, per,
			     ncpu * sizeof(*per), 0);
	for (int c = 0; c < ncpu; c++)
		n += per[c].packets;
	free(per);
	return n;
}

static struct pi_redirect_record last_redirect(struct xdp_fx *fx)
{
	return fixture_last_redirect(bpf_map__fd(fx->node->maps.redirect_trace));
}

static void set_policy(struct xdp_fx *fx, uint32_t id, uint32_t dir,
		       const struct pi_dp_rule *rules, uint32_t count,
		       uint32_t start)
{
	fixture_set_policy(fx->node->obj, id, dir, rules, count, start);
}

static struct pi_dp_rule rule(uint32_t id, uint8_t action, const char *cidr,
			   uint8_t proto, uint16_t lo, uint16_t hi)
{
	struct pi_dp_rule r = { .id = id, .action = action, .proto = proto,
			     .port_lo = lo, .port_hi = hi };

	if (cidr) {
		char buf[64], *slash;

		snprintf(buf, sizeof(buf), "%s", cidr);
		slash = strchr(buf, '/');
		*slash = 0;
		r.prefixlen = atoi(slash + 1);
		r.family = strchr(buf, ':') ? AF_INET6 : AF_INET;
		inet_pton(r.family, buf, r.addr.a);
	}
	return r;
}

/* Pod B's ingress policy and the packet table, written once. */
static const struct pi_dp_rule *acl_rules(uint32_t *count)
{
	static struct pi_dp_rule r[6];

	r[0] = rule(31, PI_DP_ALLOW, "10.0.0.1/32", IPPROTO_TCP, 22, 22);
	r[1] = rule(32, PI_DP_DENY, "10.0.0.0/24", IPPROTO_TCP, 22, 22);
	r[2] = rule(33, PI_DP_DENY, NULL, IPPROTO_UDP, 5000, 5009);
	r[3] = rule(34, PI_DP_DENY, "fd00::/64", IPPROTO_ICMP, 0, 0);
	r[4] = rule(35, PI_DP_ALLOW, "fd00::1/128", IPPROTO_UDP, 0, 0);
	r[5] = rule(36, PI_DP_DENY, "10.1.0.0/16", 0, 0, 0);
	*count = 6;
	return r;
}

enum acl_kind {
	ACL_ALLOW,		/* delivered and counted */
	ACL_DENY,		/* dropped, counted as an ingress-policy drop */
	ACL_NOT_IP,		/* not the policy's: passes, counted nowhere */
	ACL_MALFORMED,		/* IP it cannot classify: dropped, counted as
				 * malformed, no rule's */
};

struct acl_case {
	struct pkt_spec s;	/* .family 0: raw frame, see build_case */
	enum acl_kind kind;
	uint32_t rule;		/* the deciding rule, 0 = none (default) */
	const char *what;
};

static const struct acl_case acl_table[] = {
	{ { AF_INET, "10.0.0.1", "10.0.0.2", IPPROTO_TCP, 1000, 22 },
	  ACL_ALLOW, 31, "allowed /32 before the deny" },
	{ { AF_INET, "10.0.0.7", "10.0.0.2", IPPROTO_TCP, 1000, 22 },
	  ACL_DENY, 32, "denied /24 tcp 22" },
	{ { AF_INET, "10.0.0.7", "10.0.0.2", IPPROTO_TCP, 1000, 23 },
	  ACL_ALLOW, 0, "other port: default allow" },
	{ { AF_INET, "10.9.9.9", "10.0.0.2", IPPROTO_UDP, 1, 5005 },
	  ACL_DENY, 33, "denied udp port range" },
	{ { AF_INET, "10.9.9.9", "10.0.0.2", IPPROTO_UDP, 1, 5010 },
	  ACL_ALLOW, 0, "port past the range" },
	{ { AF_INET6, "fd00::7", "fd00::2", IPPROTO_ICMP },
	  ACL_DENY, 34, "denied icmpv6 from /64" },
	{ { AF_INET6, "fd00::1", "fd00::2", IPPROTO_UDP, 1, 5001 },
	  ACL_DENY, 33, "first match wins over a later allow" },
	{ { AF_INET6, "fd00::1", "fd00::2", IPPROTO_UDP, 1, 53 },
	  ACL_ALLOW, 35, "allowed v6 /128 udp" },
	{ { AF_INET, "10.1.2.3", "10.0.0.2", IPPROTO_ICMP },
	  ACL_DENY, 36, "denied /16 any protocol" },
	{ { AF_INET6, "fd01::9", "fd00::2", IPPROTO_TCP, 1, 443 },
	  ACL_ALLOW, 0, "v6 from elsewhere" },
	{ { AF_INET, "10.9.9.9", "10.0.0.2", IPPROTO_UDP, 1, 5005,
	    .payload = 1000 }, ACL_DENY, 33, "large denied datagram" },
	{ { 0, "arp" }, ACL_NOT_IP, 0, "arp" },
	{ { 0, "short" }, ACL_MALFORMED, 0, "tcp header cut short" },
	/* denied udp 5005 behind as many destination options headers as
	 * the walk takes, then one more: Linux takes any number, so the
	 * longer chain must not pass the policy by */
	{ { 0, "deep6" }, ACL_DENY, 33, "udp behind 8 extension headers" },
	{ { 0, "deeper6" }, ACL_MALFORMED, 0, "udp behind 9 extension headers" },
};

#define N_CASES (sizeof(acl_table) / sizeof(acl_table[0]))

static int build_case(uint8_t *pkt, const struct acl_case *c)
{
	int len;

	if (c->s.family)
		return pkt_build(pkt, &c->s);
	if (!strncmp(c->s.src, "deep", 4)) {
		int n = strcmp(c->s.src, "deep6") ? PI_MAX_EXTHDRS + 1 :
						     PI_MAX_EXTHDRS;

		len = pkt_build(pkt, &(struct pkt_spec){ AF_INET6, "fd00::9",
			"fd00::2", IPPROTO_UDP, 1, 5005 });
		for (int i = 0; i < n; i++)
			len = pkt_ext6(pkt, len, 60, 8, NULL);
		return len;
	}
	if (!strcmp(c->s.src, "arp")) {
		memset(pkt, 0, 64);
		pkt[12] = 0x08;
		pkt[13] = 0x06;
		return 60;
	}
	/* the transport header cut: test runs refuse IPv4 shorter than its
	 * header, so the cut is after it */
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.7",
		"10.0.0.2", IPPROTO_TCP, 1, 22 });
	pkt[16] = 0;
	pkt[17] = 24;
	(void)len;
	return 14 + 24;
}

enum enforcer { AT_TC_STACK, AT_TC_PEER, AT_XDP, ENFORCERS };

static const char *const enforcer_names[ENFORCERS] = {
	"tc pod_ingress", "tc deliver_to_pod", "xdp_pod_ingress",
};

/* The verdict each enforcement point returns for a case's kind. */
static int want_verdict(enum enforcer e, enum acl_kind k)
{
	switch (e) {
	case AT_TC_STACK:
		return k == ACL_DENY || k == ACL_MALFORMED ? PI_DROP :
		       k == ACL_ALLOW ? PI_PASS :
		       -2;	/* ARP: PI_PASS; unparsable: PI_NEXT */
	case AT_TC_PEER:
		return k == ACL_DENY || k == ACL_MALFORMED ? PI_DROP :
		       k == ACL_ALLOW ? PI_REDIRECT : PI_NEXT;
	default:
		return k == ACL_DENY || k == ACL_MALFORMED ? XDP_DROP :
							     XDP_PASS;
	}
}

static int run_at(struct xdp_fx *fx, enum enforcer e, const struct acl_case *c,
		  uint8_t *pkt, int len)
{
	switch (e) {
	case AT_TC_STACK:
		return run_tc(fx->node->progs.pod_ingress, fx->if_b, pkt, len);
	case AT_TC_PEER:
		/* pod A's own address comes from pod A (from the uplink it
		 * would be spoofed), every other source from the uplink */
		if (c->s.src && (!strcmp(c->s.src, "10.0.0.1") ||
				 !strcmp(c->s.src, "fd00::1")))
			return run_tc(fx->node->progs.pod_egress, fx->if_a,
				      pkt, len);
		return run_tc(fx->node->progs.uplink_ingress, fx->if_up, pkt,
			      len);
	default:
		return run_xdp(fx->acl->progs.xdp_pod_ingress, pkt, len, NULL);
	}
}

UNIT_TEST(xdp_acl_agrees_with_tc_on_one_table)
{
	uint32_t nrules, all_ids[] = { 31, 32, 33, 34, 35, 36 };
	const struct pi_dp_rule *rules = acl_rules(&nrules);
	uint8_t pkt[PKT_MAX];
	struct xdp_fx fx;

	if (!fx_setup(&fx))
		return;
	set_policy(&fx, POD_B, PI_DP_DIR_INGRESS, rules, nrules, 200);
	for (size_t i = 0; i < N_CASES; i++) {
		const struct acl_case *c = &acl_table[i];
		int len = build_case(pkt, c);

		for (int e = 0; e < ENFORCERS; e++) {
			struct pi_dp_pod_stats st0 = pod_stats(&fx, POD_B), st1;
			struct pi_dp_xdp_stats xs0 = xdp_stats(&fx, POD_B), xs1;
			uint64_t before[6], moved = 0;
			int got, want = want_verdict(e, c->kind);
			char what[160];

			for (int r = 0; r < 6; r++)
				before[r] = rule_packets(&fx, all_ids[r]);
			got = run_at(&fx, e, c, pkt, len);
			snprintf(what, sizeof(what), "case %zu (%s) at %s", i,
				 c->what, enforcer_names[e]);
			if (want == -2)
				ASSERT_TRUE(got == PI_PASS || got == PI_NEXT,
					    what);
			else
				ASSERT_EQ(got, want, what);

			/* the deciding rule moved by one, no other did */
			for (int r = 0; r < 6; r++) {
				uint64_t d = rule_packets(&fx, all_ids[r]) -
					     before[r];

				moved += d;
				if (all_ids[r] == c->rule)
					ASSERT_EQ(d, 1, what);
			}
			ASSERT_EQ(moved, c->rule ? 1 : 0, what);

			st1 = pod_stats(&fx, POD_B);
			ASSERT_EQ(st1.ingress_packets - st0.ingress_packets,
				  c->kind == ACL_ALLOW, what);
			ASSERT_EQ(st1.ingress_bytes - st0.ingress_bytes,
				  c->kind == ACL_ALLOW ? len : 0, what);
			ASSERT_EQ(st1.drops[PI_DP_DROP_INGRESS_POLICY] -
				  st0.drops[PI_DP_DROP_INGRESS_POLICY],
				  c->kind == ACL_DENY, what);
			ASSERT_EQ(st1.drops[PI_DP_DROP_MALFORMED] -
				  st0.drops[PI_DP_DROP_MALFORMED],
				  c->kind == ACL_MALFORMED, what);
			xs1 = xdp_stats(&fx, POD_B);
			ASSERT_EQ(xs1.acl_packets - xs0.acl_packets,
				  e == AT_XDP && c->kind == ACL_ALLOW, what);
			ASSERT_EQ(xs1.acl_drops - xs0.acl_drops,
				  e == AT_XDP && c->kind == ACL_DENY, what);
		}
	}
	fx_teardown(&fx);
}

UNIT_TEST(xdp_pod_ingress_tc_defers_to_xdp)
{
	struct pi_dp_rule deny = rule(41, PI_DP_DENY, NULL, 0, 0, 0);
	uint8_t pkt[PKT_MAX];
	struct xdp_fx fx;
	int len;

	if (!fx_setup(&fx))
		return;
	set_policy(&fx, POD_B, PI_DP_DIR_INGRESS, &deny, 1, 300);
	set_pod_flags(&fx, fx.if_b, PI_DP_POD_XDP, 0);
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.9.9.9",
		"10.0.0.2", IPPROTO_UDP, 1, 53 });
	/* the node stack's packet: tc leaves it to the ACL on eth0 ... */
	ASSERT_EQ(run_tc(fx.node->progs.pod_ingress, fx.if_b, pkt, len),
		  PI_NEXT, "pod_ingress defers");
	ASSERT_EQ(rule_packets(&fx, 41), 0, "not checked at tc");
	ASSERT_EQ(pod_stats(&fx, POD_B).drops[PI_DP_DROP_INGRESS_POLICY], 0,
		  "not counted at tc");
	/* ... which checks and counts it once */
	ASSERT_EQ(run_xdp(fx.acl->progs.xdp_pod_ingress, pkt, len, NULL),
		  XDP_DROP, "dropped in XDP");
	ASSERT_EQ(rule_packets(&fx, 41), 1, "checked once");
	/* bpf_redirect_peer skips XDP: tc keeps checking those */
	ASSERT_EQ(run_tc(fx.node->progs.uplink_ingress, fx.if_up, pkt, len),
		  PI_DROP, "deliver_to_pod still checks");
	ASSERT_EQ(rule_packets(&fx, 41), 2, "checked at tc for redirect_peer");
	ASSERT_EQ(pod_stats(&fx, POD_B).drops[PI_DP_DROP_INGRESS_POLICY], 2,
		  "one drop each");
	/* without the flag tc checks again */
	set_pod_flags(&fx, fx.if_b, 0, PI_DP_POD_XDP);
	ASSERT_EQ(run_tc(fx.node->progs.pod_ingress, fx.if_b, pkt, len),
		  PI_DROP, "pod_ingress checks without XDP");
	fx_teardown(&fx);
}

UNIT_TEST(xdp_uplink_redirects_to_pods_with_the_acl)
{
	struct pi_dp_rule deny = rule(51, PI_DP_DENY, NULL, 0, 0, 0);
	uint8_t pkt[PKT_MAX], out[PKT_MAX], orig[PKT_MAX];
	struct pi_redirect_record rd;
	struct xdp_fx fx;
	uint32_t key;
	int len;

	if (!fx_setup(&fx))
		return;
	/* The uplink decides no policy: a deny-all must not move. */
	set_policy(&fx, POD_B, PI_DP_DIR_INGRESS, &deny, 1, 400);
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.1.0.5",
		"10.0.0.2", IPPROTO_TCP, 1, 80 });
	ip4_csum(pkt);
	memcpy(orig, pkt, len);

	/* not in the devmap yet: left to tc, untouched */
	ASSERT_EQ(run_xdp(fx.uplink->progs.xdp_uplink, pkt, len, out),
		  XDP_PASS, "pod without ACL: pass");
	ASSERT_TRUE(!memcmp(out, orig, len), "frame untouched");

	key = fx.if_b;
	ASSERT_OK(bpf_map__update_elem(fx.uplink->maps.xdp_ports, &key, 4,
				       &key, 4, 0), "devmap entry");
	last_redirect(&fx);
	ASSERT_EQ(run_xdp(fx.uplink->progs.xdp_uplink, pkt, len, out),
		  XDP_REDIRECT, "v4 redirected");
	rd = last_redirect(&fx);
	ASSERT_EQ(rd.kind, PI_RD_MAP, "bpf_redirect_map");
	ASSERT_EQ(rd.ifindex, fx.if_b, "to B's host-side veth");
	ASSERT_EQ(rd.flags, XDP_PASS, "fallback verdict");
	ASSERT_TRUE(!memcmp(out, MAC_B, 6), "dst mac is B's eth0");
	ASSERT_TRUE(!memcmp(out + 6, HOST_B, 6), "src mac is B's host side");
	ASSERT_EQ(out[22], 63, "routed: TTL 64 leaves as 63");
	ASSERT_EQ(csum16(out + 14, 20, 0), 0, "IPv4 header checksum");
	out[22] = orig[22];
	out[24] = orig[24];
	out[25] = orig[25];
	ASSERT_TRUE(!memcmp(out + 12, orig + 12, len - 12), "rest untouched");

	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET6, "fd01::5",
		"fd00::2", IPPROTO_UDP, 1, 53 });
	ASSERT_EQ(run_xdp(fx.uplink->progs.xdp_uplink, pkt, len, out),
		  XDP_REDIRECT, "v6 redirected");
	ASSERT_EQ(xdp_stats(&fx, POD_B).uplink_redirects, 2, "counted");
	ASSERT_EQ(rule_packets(&fx, 51), 0, "no policy at the uplink");
	ASSERT_EQ(pod_stats(&fx, POD_B).ingress_packets, 0,
		  "counted by the ACL, not here");

	/* a pod not in the devmap (netkit, or no ACL) and non-pods pass */
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.1.0.5",
		"10.0.0.1", IPPROTO_TCP, 1, 80 });
	ASSERT_EQ(run_xdp(fx.uplink->progs.xdp_uplink, pkt, len, NULL),
		  XDP_PASS, "pod A: tc path");
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.1.0.5",
		"192.0.2.1", IPPROTO_TCP, 1, 80 });
	ASSERT_EQ(run_xdp(fx.uplink->progs.xdp_uplink, pkt, len, NULL),
		  XDP_PASS, "not a pod");
	memset(pkt, 0, 64);
	pkt[12] = 0x08;
	pkt[13] = 0x06;
	ASSERT_EQ(run_xdp(fx.uplink->progs.xdp_uplink, pkt, 60, NULL),
		  XDP_PASS, "arp");
	ASSERT_EQ(xdp_stats(&fx, POD_B).uplink_redirects, 2, "only B's");
	fx_teardown(&fx);
}

/* The uplink's XDP way routes as the tc way does: the TTL or hop limit
 * one less, and a frame with none left to give is tc's, which answers it. */
UNIT_TEST(xdp_uplink_decrements_ttl)
{
	uint8_t pkt[PKT_MAX], out[PKT_MAX], orig[PKT_MAX];
	struct xdp_fx fx;
	uint32_t key;
	int len;

	if (!fx_setup(&fx))
		return;
	key = fx.if_b;
	ASSERT_OK(bpf_map__update_elem(fx.uplink->maps.xdp_ports, &key, 4,
				       &key, 4, 0), "devmap entry");
	/* TTL 2 and 255 too: the checksum's carry, both ends of the byte */
	for (int ttl = 2; ttl <= 255; ttl += 253) {
		len = pkt_build(pkt, &(struct pkt_spec){ AF_INET,
			"10.1.0.5", "10.0.0.2", IPPROTO_UDP, 7, 53 });
		pkt[22] = ttl;
		ip4_csum(pkt);
		ASSERT_EQ(run_xdp(fx.uplink->progs.xdp_uplink, pkt, len, out),
			  XDP_REDIRECT, "v4 redirected");
		ASSERT_EQ(out[22], ttl - 1, "v4 TTL one less");
		ASSERT_EQ(csum16(out + 14, 20, 0), 0, "v4 header checksum");
	}
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.1.0.5",
		"10.0.0.2", IPPROTO_UDP, 7, 53 });
	pkt[22] = 1;
	ip4_csum(pkt);
	memcpy(orig, pkt, len);
	ASSERT_EQ(run_xdp(fx.uplink->progs.xdp_uplink, pkt, len, out),
		  XDP_PASS, "v4 TTL 1: the tc way answers it");
	ASSERT_TRUE(!memcmp(out, orig, len), "v4 TTL 1: untouched");
	pkt[22] = 0;
	ip4_csum(pkt);
	ASSERT_EQ(run_xdp(fx.uplink->progs.xdp_uplink, pkt, len, NULL),
		  XDP_PASS, "v4 TTL 0: the tc way");

	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET6, "fd01::5",
		"fd00::2", IPPROTO_UDP, 7, 53 });
	ASSERT_EQ(run_xdp(fx.uplink->progs.xdp_uplink, pkt, len, out),
		  XDP_REDIRECT, "v6 redirected");
	ASSERT_EQ(out[21], 63, "v6 hop limit one less");
	pkt[21] = 1;
	memcpy(orig, pkt, len);
	ASSERT_EQ(run_xdp(fx.uplink->progs.xdp_uplink, pkt, len, out),
		  XDP_PASS, "v6 hop limit 1: the tc way answers it");
	ASSERT_TRUE(!memcmp(out, orig, len), "v6 hop limit 1: untouched");
	ASSERT_EQ(xdp_stats(&fx, POD_B).uplink_redirects, 3,
		  "only the decremented ones redirected");
	fx_teardown(&fx);
}

UNIT_TEST(xdp_acl_10000_rules_last_matches)
{
	static struct pi_dp_rule rules[10000];
	uint8_t pkt[PKT_MAX];
	struct xdp_fx fx;
	int len;

	if (!fx_setup(&fx))
		return;
	for (int i = 0; i < 9999; i++)
		rules[i] = rule(i + 1, PI_DP_DENY, "192.0.2.0/24", IPPROTO_TCP,
				1000 + i % 50000, 1000 + i % 50000);
	rules[9999] = rule(10000, PI_DP_DENY, "10.0.0.1/32", 0, 0, 0);
	set_policy(&fx, POD_B, PI_DP_DIR_INGRESS, rules, 10000, 0);
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_TCP, 1, 80 });
	ASSERT_EQ(run_xdp(fx.acl->progs.xdp_pod_ingress, pkt, len, NULL),
		  XDP_DROP, "verdict");
	ASSERT_EQ(rule_packets(&fx, 10000), 1, "last rule counter");
	fx_teardown(&fx);
}

/* The pseudo-header sum, not complemented: what a stack leaves in the
 * checksum field of a CHECKSUM_PARTIAL packet. */
static uint16_t pseudo_sum(const uint8_t *pkt, int family, uint8_t proto)
{
	const uint8_t *addrs = pkt + 14 + (family == AF_INET ? 12 : 8);
	int alen = family == AF_INET ? 8 : 32, l4len;
	uint32_t sum = 0;

	if (family == AF_INET)
		l4len = ((pkt[16] << 8) | pkt[17]) - 20;
	else
		l4len = (pkt[18] << 8) | pkt[19];
	for (int i = 0; i < alen; i += 2)
		sum += (addrs[i] << 8) | addrs[i + 1];
	sum += proto + l4len;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return sum;
}

UNIT_TEST(xdp_uplink_leaves_pending_checksums_to_tc)
{
	struct {
		struct pkt_spec s;
		int csum_off;
	} cases[] = {
		{ { AF_INET, "10.1.0.5", "10.0.0.2", IPPROTO_TCP, 1, 80,
		    .payload = 100 }, 14 + 20 + 16 },
		{ { AF_INET, "10.1.0.5", "10.0.0.2", IPPROTO_UDP, 1, 53,
		    .payload = 33 }, 14 + 20 + 6 },
		{ { AF_INET6, "fd01::5", "fd00::2", IPPROTO_TCP, 1, 80,
		    .payload = 7 }, 14 + 40 + 16 },
		{ { AF_INET6, "fd01::5", "fd00::2", IPPROTO_UDP, 1, 53 },
		  14 + 40 + 6 },
	};
	uint8_t pkt[PKT_MAX];
	struct xdp_fx fx;
	uint32_t key;

	if (!fx_setup(&fx))
		return;
	key = fx.if_b;
	bpf_map__update_elem(fx.uplink->maps.xdp_ports, &key, 4, &key, 4, 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int len = pkt_build(pkt, &cases[i].s);
		uint16_t ps = pseudo_sum(pkt, cases[i].s.family,
					 cases[i].s.proto);
		char what[64];

		pkt[cases[i].csum_off] = ps >> 8;
		pkt[cases[i].csum_off + 1] = ps & 0xff;
		snprintf(what, sizeof(what), "case %zu: pending, to tc", i);
		ASSERT_EQ(run_xdp(fx.uplink->progs.xdp_uplink, pkt, len, NULL),
			  XDP_PASS, what);
		pkt[cases[i].csum_off + 1] ^= 0x5a;
		snprintf(what, sizeof(what), "case %zu: complete, redirected",
			 i);
		ASSERT_EQ(run_xdp(fx.uplink->progs.xdp_uplink, pkt, len, NULL),
			  XDP_REDIRECT, what);
	}
	ASSERT_EQ(xdp_stats(&fx, POD_B).uplink_redirects, 4,
		  "only the complete ones");
	fx_teardown(&fx);
}

/* The XDP ACL is an ingress point of the connection tracker too: the
 * answer to B's own connection passes B's `ingress deny`, a connection
 * A opens does not (bpf/lib/ct.h, built for XDP). */
UNIT_TEST(xdp_acl_passes_replies_of_tracked_flows)
{
	struct pi_dp_rule deny = rule(40, PI_DP_DENY, NULL, 0, 0, 0);
	uint8_t pkt[PKT_MAX];
	struct xdp_fx fx;
	int len;

	if (!fx_setup(&fx))
		return;
	set_policy(&fx, POD_B, PI_DP_DIR_INGRESS, &deny, 1, 0);
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.2",
		"10.0.0.1", IPPROTO_TCP, 40000, 80, 0x02 });
	ASSERT_EQ(run_tc(fx.node->progs.pod_egress, fx.if_b, pkt, len),
		  PI_REDIRECT, "B's SYN to A");
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_TCP, 80, 40000, 0x12 });
	ASSERT_EQ(run_xdp(fx.acl->progs.xdp_pod_ingress, pkt, len, NULL),
		  XDP_PASS, "A's SYN-ACK passes B's ingress deny");
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_TCP, 40001, 22, 0x02 });
	ASSERT_EQ(run_xdp(fx.acl->progs.xdp_pod_ingress, pkt, len, NULL),
		  XDP_DROP, "A's own connection to B is denied");
	ASSERT_EQ(rule_packets(&fx, 40), 1, "counted against the deny");
	ASSERT_EQ(xdp_stats(&fx, POD_B).acl_drops, 1, "one XDP drop");
	fx_teardown(&fx);
}
