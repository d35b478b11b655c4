/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Decisions of the node datapath (bpf/node.bpf.c) under BPF_PROG_TEST_RUN.
 * The programs find their pod by skb->ifindex, which test runs take from
 * the context only for a device that exists; the fixture therefore makes
 * two veth pairs and an uplink in a private network namespace.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "nl.h"
#include "podinject_abi.h"
#include "node.skel.h"
#include "pkt.h"
#include "unit.h"
#include "fixture.h"

struct node_fx {
	struct node_bpf *skel;
	int if_a, if_b, if_up;
};

static const uint8_t MAC_A[6] = { 0x02, 0xaa, 0, 0, 0, 1 };
static const uint8_t MAC_B[6] = { 0x02, 0xbb, 0, 0, 0, 2 };
static const uint8_t HOST_B[6] = { 0x02, 0xbb, 0, 0, 0, 0xfe };

static void add_pod(struct node_fx *fx, uint32_t id, int ifindex,
		    const char *ip4, const char *ip6, const uint8_t *mac,
		    const uint8_t *hmac)
{
	fixture_add_pod(fx->skel->maps.pods, fx->skel->maps.endpoints, id,
			ifindex, ip4, ip6, mac, hmac);
}

static bool fx_setup(struct node_fx *fx)
{
	memset(fx, 0, sizeof(*fx));
	if (!ASSERT_OK(fixture_netns(), "private netns"))
		return false;
	fx->if_a = fixture_dev("ua");
	fx->if_b = fixture_dev("ub");
	fx->if_up = fixture_dev("uup");
	if (!ASSERT_TRUE(fx->if_a > 1 && fx->if_b > 1 && fx->if_up > 1,
			 "fixture devices"))
		return false;
	fx->skel = node_bpf__open();
	if (!ASSERT_TRUE(fx->skel, "open node_bpf"))
		return false;
	fx->skel->rodata->trace_redirects = true;
	if (!ASSERT_OK(node_bpf__load(fx->skel), "load node_bpf")) {
		node_bpf__destroy(fx->skel);
		fx->skel = NULL;
		return false;
	}
	add_pod(fx, 0, fx->if_a, "10.0.0.1", "fd00::1", MAC_A,
		(uint8_t[6]){ 0x02, 0xaa, 0, 0, 0, 0xfe });
	add_pod(fx, 1, fx->if_b, "10.0.0.2", "fd00::2", MAC_B, HOST_B);
	return true;
}

static void fx_teardown(struct node_fx *fx)
{
	node_bpf__destroy(fx->skel);
}

static int run(struct bpf_program *prog, int ifindex, uint8_t *pkt, int len,
	       uint8_t *out)
{
	return fixture_run(bpf_program__fd(prog), ifindex, pkt, len, out);
}

/* A packet built from `spec`, sent by pod A: pod_egress's verdict. */
static int a_sends(struct node_fx *fx, const struct pkt_spec *spec)
{
	uint8_t pkt[PKT_MAX];
	int len = pkt_build(pkt, spec);

	return run(fx->skel->progs.pod_egress, fx->if_a, pkt, len, NULL);
}

static struct pi_dp_pod_stats stats(struct node_fx *fx, uint32_t id)
{
	int ncpu = libbpf_num_possible_cpus();
	struct pi_dp_pod_stats *per = calloc(ncpu, sizeof(*per)), sum = {};

	bpf_map__lookup_elem(fx->skel->maps.pod_stats, &id, 4, per,
			     ncpu * sizeof(*per), 0);
	for (int c = 0; c < ncpu; c++) {
		sum.egress_packets += per[c].egress_packets;
		sum.ingress_packets += per[c].ingress_packets;
		for (int r = 0; r < PI_DP_DROP_MAX; r++)
			sum.drops[r] += per[c].drops[r];
	}
	free(per);
	return sum;
}

static struct pi_redirect_record last_redirect(struct node_fx *fx)
{
	return fixture_last_redirect(bpf_map__fd(fx->skel->maps.redirect_trace));
}

static uint64_t rule_packets(struct node_fx *fx, uint32_t id)
{
	int ncpu = libbpf_num_possible_cpus();
	struct pi_rule_stats *per = calloc(ncpu, sizeof(*per));
	uint64_t n = 0;

	bpf_map__lookup_elem(fx->skel->maps.rule_stats, &id, 4, per,
			     ncpu * sizeof(*per), 0);
	for (int c = 0; c < ncpu; c++)
		n += per[c].packets;
	free(per);
	return n;
}

/* Installs `rules` as the policy of pod `id` in `dir`, at slot `start`. */
static void set_policy(struct node_fx *fx, uint32_t id, uint32_t dir,
		       const struct pi_dp_rule *rules, uint32_t count,
		       uint32_t start)
{
	fixture_set_policy(fx->skel->obj, id, dir, rules, count, start);
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

UNIT_TEST(node_egress_to_local_pod_v4)
{
	struct node_fx fx;
	uint8_t pkt[PKT_MAX], out[PKT_MAX];
	struct pi_redirect_record rd;
	int len;

	if (!fx_setup(&fx))
		return;
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_TCP, 40000, 80 });
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, len, out),
		  PI_REDIRECT, "verdict");
	rd = last_redirect(&fx);
	ASSERT_EQ(rd.kind, PI_RD_PEER, "redirect kind");
	ASSERT_EQ(rd.ifindex, fx.if_b, "redirect target");
	ASSERT_EQ(rd.flags, 0, "redirect flags");
	ASSERT_TRUE(!memcmp(out, MAC_B, 6), "dst mac is pod B's eth0");
	ASSERT_TRUE(!memcmp(out + 6, HOST_B, 6), "src mac is B's host side");
	ASSERT_EQ(stats(&fx, 0).egress_packets, 1, "A egress");
	ASSERT_EQ(stats(&fx, 1).ingress_packets, 1, "B ingress");
	fx_teardown(&fx);
}

UNIT_TEST(node_egress_to_local_pod_v6)
{
	struct node_fx fx;

	if (!fx_setup(&fx))
		return;
	ASSERT_EQ(a_sends(&fx, &(struct pkt_spec){ AF_INET6, "fd00::1",
		"fd00::2", IPPROTO_UDP, 5000, 53 }),
		  PI_REDIRECT, "verdict");
	ASSERT_EQ(last_redirect(&fx).ifindex, fx.if_b, "redirect target");
	ASSERT_EQ(stats(&fx, 1).ingress_packets, 1, "B ingress");
	fx_teardown(&fx);
}

UNIT_TEST(node_egress_elsewhere_without_uplink_goes_to_stack)
{
	struct node_fx fx;

	if (!fx_setup(&fx))
		return;
	ASSERT_EQ(a_sends(&fx, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"192.0.2.7", IPPROTO_ICMP }),
		  PI_PASS, "verdict");
	ASSERT_EQ(last_redirect(&fx).kind, PI_RD_NONE, "no redirect");
	ASSERT_EQ(stats(&fx, 0).egress_packets, 1, "A egress");
	fx_teardown(&fx);
}

/* The node has an uplink (fx->if_up): traffic to no local pod leaves
 * through it. */
static void set_uplink(struct node_fx *fx)
{
	struct pi_node_config cfg = { .uplink_ifindex = fx->if_up };
	uint32_t zero = 0;

	bpf_map__update_elem(fx->skel->maps.node_config, &zero, 4, &cfg,
			     sizeof(cfg), 0);
}

/* The IPv4 endpoint `ip4` becomes of `kind` (a pod another plugin is the
 * datapath of: PI_EP_FOREIGN_POD). */
static int set_endpoint_kind(struct node_fx *fx, const char *ip4, __u32 kind)
{
	struct pi_endpoint_key k = { .family = AF_INET };
	struct pi_endpoint ep;
	int err;

	inet_pton(AF_INET, ip4, k.addr.a);
	err = bpf_map__lookup_elem(fx->skel->maps.endpoints, &k, sizeof(k),
				   &ep, sizeof(ep), 0);
	if (err)
		return err;
	ep.kind = kind;
	return bpf_map__update_elem(fx->skel->maps.endpoints, &k, sizeof(k),
				    &ep, sizeof(ep), 0);
}

UNIT_TEST(node_egress_elsewhere_with_uplink_uses_redirect_neigh)
{
	struct pi_redirect_record rd;
	struct node_fx fx;

	if (!fx_setup(&fx))
		return;
	set_uplink(&fx);
	ASSERT_EQ(a_sends(&fx, &(struct pkt_spec){ AF_INET6, "fd00::1",
		"fd01::9", IPPROTO_TCP, 1234, 443 }),
		  PI_REDIRECT, "verdict");
	rd = last_redirect(&fx);
	ASSERT_EQ(rd.kind, PI_RD_NEIGH, "redirect kind");
	ASSERT_EQ(rd.ifindex, fx.if_up, "redirect target");
	fx_teardown(&fx);
}

/* Pod B's datapath is another plugin's (PI_EP_FOREIGN_POD): A's packets
 * to it go to the node's stack, which routes them through that plugin's
 * programs on B's device, even with an uplink; from the wire it is not
 * delivered either, and its address as a source is still refused. */
UNIT_TEST(node_foreign_pod_reached_through_the_stack)
{
	struct node_fx fx;
	uint8_t pkt[PKT_MAX];
	int len;

	if (!fx_setup(&fx))
		return;
	set_uplink(&fx);
	if (!ASSERT_OK(set_endpoint_kind(&fx, "10.0.0.2", PI_EP_FOREIGN_POD),
		       "B's endpoint"))
		goto out;
	ASSERT_EQ(a_sends(&fx, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_TCP, 40000, 80 }),
		  PI_PASS, "A to B: to the stack");
	ASSERT_EQ(last_redirect(&fx).kind, PI_RD_NONE, "not redirected");
	ASSERT_EQ(stats(&fx, 1).ingress_packets, 0, "not counted as B's");
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "192.0.2.9",
		"10.0.0.2", IPPROTO_TCP, 40000, 80 });
	ASSERT_EQ(run(fx.skel->progs.uplink_ingress, fx.if_up, pkt, len, NULL),
		  PI_NEXT, "wire to B: to the stack");
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.2",
		"10.0.0.1", IPPROTO_TCP, 40000, 80 });
	ASSERT_EQ(run(fx.skel->progs.uplink_ingress, fx.if_up, pkt, len, NULL),
		  PI_DROP, "B's address from the wire");
out:
	fx_teardown(&fx);
}

/* Pod A's datapath is another plugin's and A has a policy: its programs
 * check the source and the rules as on any pod, and hand every packet they
 * let through to the next program (the plugin's), never routing it: not
 * to the local pod B, not to the stack with PI_PASS, which would end the
 * chain before the plugin's programs. */
UNIT_TEST(node_pass_on_pod_checks_and_hands_on)
{
	struct pi_dp_rule deny = rule(31, PI_DP_DENY, NULL, IPPROTO_TCP, 22, 22);
	struct pi_dp_rule in_deny = rule(32, PI_DP_DENY, "10.0.0.2/32",
					 IPPROTO_UDP, 0, 0);
	uint8_t pkt[PKT_MAX];
	struct pi_pod pod;
	struct node_fx fx;
	int len;

	if (!fx_setup(&fx))
		return;
	set_uplink(&fx);
	if (!ASSERT_OK(bpf_map__lookup_elem(fx.skel->maps.pods, &fx.if_a, 4,
					    &pod, sizeof(pod), 0), "A's record"))
		goto out;
	pod.flags |= PI_DP_POD_PASS_ON;
	bpf_map__update_elem(fx.skel->maps.pods, &fx.if_a, 4, &pod,
			     sizeof(pod), 0);
	set_policy(&fx, 0, PI_DP_DIR_EGRESS, &deny, 1, 0);
	set_policy(&fx, 0, PI_DP_DIR_INGRESS, &in_deny, 1, 1);
	ASSERT_EQ(a_sends(&fx, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_TCP, 40000, 80 }),
		  PI_NEXT, "to local pod B: handed on");
	ASSERT_EQ(last_redirect(&fx).kind, PI_RD_NONE, "not redirected");
	ASSERT_EQ(stats(&fx, 1).ingress_packets, 0, "not delivered to B");
	ASSERT_EQ(a_sends(&fx, &(struct pkt_spec){ AF_INET6, "fd00::1",
		"fd01::9", IPPROTO_TCP, 1234, 443 }),
		  PI_NEXT, "elsewhere, with an uplink: handed on");
	ASSERT_EQ(last_redirect(&fx).kind, PI_RD_NONE, "not to the uplink");
	ASSERT_EQ(stats(&fx, 0).egress_packets, 2, "A egress counted");
	ASSERT_EQ(a_sends(&fx, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_TCP, 40001, 22 }),
		  PI_DROP, "A's egress rule");
	ASSERT_EQ(stats(&fx, 0).drops[PI_DP_DROP_POLICY], 1, "policy drop");
	ASSERT_EQ(a_sends(&fx, &(struct pkt_spec){ AF_INET, "10.0.0.2",
		"10.0.0.1", IPPROTO_UDP, 1, 2 }),
		  PI_DROP, "B's address from A");
	ASSERT_EQ(stats(&fx, 0).drops[PI_DP_DROP_SPOOFED], 1, "spoof drop");
	ASSERT_EQ(a_sends(&fx, &(struct pkt_spec){ AF_INET6, "fe80::1234",
		"ff02::2", IPPROTO_ICMP }),
		  PI_NEXT, "link-local: handed on");
	len = arp_build(pkt, "10.0.0.1", MAC_A);
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, len, NULL),
		  PI_NEXT, "its own ARP: handed on");
	len = arp_build(pkt, "10.0.0.2", MAC_A);
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, len, NULL),
		  PI_DROP, "ARP claiming B's address");
	/* from the node's stack to A, at A's ingress point */
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "192.0.2.9",
		"10.0.0.1", IPPROTO_UDP, 5, 53 });
	ASSERT_EQ(run(fx.skel->progs.pod_ingress, fx.if_a, pkt, len, NULL),
		  PI_NEXT, "to A: handed on");
	ASSERT_EQ(stats(&fx, 0).ingress_packets, 1, "A ingress counted");
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.2",
		"10.0.0.1", IPPROTO_UDP, 5, 53 });
	ASSERT_EQ(run(fx.skel->progs.pod_ingress, fx.if_a, pkt, len, NULL),
		  PI_DROP, "A's ingress rule");
	/* a netkit pod of the kind: found by its (foreign) endpoint */
	if (!ASSERT_OK(set_endpoint_kind(&fx, "10.0.0.1", PI_EP_FOREIGN_POD),
		       "A's endpoint"))
		goto out;
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.2",
		"10.0.0.1", IPPROTO_UDP, 5, 53 });
	ASSERT_EQ(run(fx.skel->progs.pod_ingress_nk, fx.if_up, pkt, len, NULL),
		  PI_DROP, "netkit: A's ingress rule");
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "192.0.2.9",
		"10.0.0.1", IPPROTO_UDP, 5, 53 });
	ASSERT_EQ(run(fx.skel->progs.pod_ingress_nk, fx.if_up, pkt, len, NULL),
		  PI_NEXT, "netkit: to A, handed on");
	ASSERT_EQ(stats(&fx, 0).ingress_packets, 2, "A ingress counted");
	/* B, a reference pod, is unchanged beside it */
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "192.0.2.9",
		"10.0.0.2", IPPROTO_UDP, 5, 53 });
	ASSERT_EQ(run(fx.skel->progs.pod_ingress, fx.if_b, pkt, len, NULL),
		  PI_PASS, "to B: the reference datapath's pass");
out:
	fx_teardown(&fx);
}

UNIT_TEST(node_egress_spoofed_source_dropped)
{
	struct node_fx fx;

	if (!fx_setup(&fx))
		return;
	/* B's address sent from A's device */
	ASSERT_EQ(a_sends(&fx, &(struct pkt_spec){ AF_INET, "10.0.0.2",
		"10.0.0.1", IPPROTO_UDP, 1, 2 }),
		  PI_DROP, "v4 verdict");
	ASSERT_EQ(a_sends(&fx, &(struct pkt_spec){ AF_INET6, "fd00::99",
		"fd00::2", IPPROTO_UDP, 1, 2 }),
		  PI_DROP, "v6 verdict");
	ASSERT_EQ(stats(&fx, 0).drops[PI_DP_DROP_SPOOFED], 2, "spoof drops");
	ASSERT_EQ(stats(&fx, 0).egress_packets, 0, "A egress");
	ASSERT_EQ(stats(&fx, 1).ingress_packets, 0, "B ingress");
	fx_teardown(&fx);
}

/* A frame from A's device with B's MAC as its Ethernet source, or an ARP
 * message whose sender MAC is B's: beside a bridge, either teaches the
 * bridge or its neighbours to send B's traffic to A (before, both went
 * through: only the addresses were checked). */
UNIT_TEST(node_egress_foreign_mac_dropped)
{
	int prog;
	struct node_fx fx;
	uint8_t pkt[PKT_MAX];
	int len;

	if (!fx_setup(&fx))
		return;
	prog = bpf_program__fd(fx.skel->progs.pod_egress);
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_UDP, 1, 2 });
	memcpy(pkt + 6, MAC_B, 6);
	ASSERT_EQ(fixture_run_as_sent(prog, fx.if_a, pkt, len, NULL), PI_DROP,
		  "v4 from B's MAC");
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET6, "fd00::1",
		"fd00::2", IPPROTO_UDP, 1, 2 });
	memcpy(pkt + 6, MAC_B, 6);
	ASSERT_EQ(fixture_run_as_sent(prog, fx.if_a, pkt, len, NULL), PI_DROP,
		  "v6 from B's MAC");
	ASSERT_EQ(stats(&fx, 0).drops[PI_DP_DROP_SPOOFED], 2, "spoof drops");
	memcpy(pkt + 6, MAC_A, 6);
	ASSERT_EQ(fixture_run_as_sent(prog, fx.if_a, pkt, len, NULL),
		  PI_REDIRECT, "v6 from its own MAC");
	len = arp_build(pkt, "10.0.0.1", MAC_B);
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, len, NULL),
		  PI_DROP, "ARP of its address with B's MAC");
	ASSERT_EQ(stats(&fx, 0).drops[PI_DP_DROP_ND_SPOOFED], 1,
		  "ARP claim");
	len = arp_build(pkt, "10.0.0.1", MAC_A);
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, len, NULL),
		  PI_PASS, "its own ARP");
	ASSERT_EQ(stats(&fx, 0).egress_packets, 1, "A's own IP let through");
	ASSERT_EQ(stats(&fx, 1).ingress_packets, 1, "B given A's own only");
	fx_teardown(&fx);
}

UNIT_TEST(node_egress_link_local_v6_to_stack)
{
	struct node_fx fx;

	if (!fx_setup(&fx))
		return;
	ASSERT_EQ(a_sends(&fx, &(struct pkt_spec){ AF_INET6, "fe80::1234",
		"ff02::2", IPPROTO_ICMP }),
		  PI_PASS, "verdict");
	ASSERT_EQ(stats(&fx, 0).drops[PI_DP_DROP_SPOOFED], 0, "spoof drops");
	fx_teardown(&fx);
}

UNIT_TEST(node_egress_policy_rule_kinds)
{
	struct node_fx fx;
	uint8_t pkt[PKT_MAX];
	struct pi_dp_rule rules[] = {
		rule(11, PI_DP_ALLOW, "10.0.9.9/32", 0, 0, 0),
		rule(12, PI_DP_DENY, "10.0.9.0/24", 0, 0, 0),
		rule(13, PI_DP_DENY, NULL, IPPROTO_UDP, 0, 0),
		rule(14, PI_DP_DENY, "10.0.0.0/8", IPPROTO_TCP, 8000, 8100),
		rule(15, PI_DP_DENY, "fd00::/64", IPPROTO_ICMP, 0, 0),
	};
	struct {
		struct pkt_spec s;
		int verdict;
	} cases[] = {
		{ { AF_INET, "10.0.0.1", "10.0.9.9", IPPROTO_TCP, 1, 80 }, PI_PASS },
		{ { AF_INET, "10.0.0.1", "10.0.9.10", IPPROTO_TCP, 1, 80 }, PI_DROP },
		{ { AF_INET, "10.0.0.1", "10.7.0.1", IPPROTO_UDP, 1, 53 }, PI_DROP },
		{ { AF_INET, "10.0.0.1", "10.7.0.1", IPPROTO_TCP, 1, 8050 }, PI_DROP },
		{ { AF_INET, "10.0.0.1", "10.7.0.1", IPPROTO_TCP, 1, 8101 }, PI_PASS },
		{ { AF_INET, "10.0.0.1", "11.7.0.1", IPPROTO_TCP, 1, 8000 }, PI_PASS },
		{ { AF_INET6, "fd00::1", "fd00::77", IPPROTO_ICMP }, PI_DROP },
		{ { AF_INET6, "fd00::1", "fd01::77", IPPROTO_ICMP }, PI_PASS },
		{ { AF_INET6, "fd00::1", "fd01::77", IPPROTO_UDP, 1, 53 }, PI_DROP },
	};
	int len;

	if (!fx_setup(&fx))
		return;
	set_policy(&fx, 0, PI_DP_DIR_EGRESS, rules, 5, 100);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char what[32];

		snprintf(what, sizeof(what), "case %zu", i);
		len = pkt_build(pkt, &cases[i].s);
		ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, len,
			      NULL), cases[i].verdict, what);
	}
	ASSERT_EQ(rule_packets(&fx, 11), 1, "allow /32 counter");
	ASSERT_EQ(rule_packets(&fx, 12), 1, "deny /24 counter");
	ASSERT_EQ(rule_packets(&fx, 13), 2, "deny udp counter");
	ASSERT_EQ(rule_packets(&fx, 14), 1, "deny port range counter");
	ASSERT_EQ(rule_packets(&fx, 15), 1, "deny icmp6 counter");
	ASSERT_EQ(stats(&fx, 0).drops[PI_DP_DROP_POLICY], 5, "policy drops");
	ASSERT_EQ(stats(&fx, 0).egress_packets, 4, "A egress");
	fx_teardown(&fx);
}

UNIT_TEST(node_egress_policy_10000_rules_last_matches)
{
	static struct pi_dp_rule rules[10000];
	struct node_fx fx;

	if (!fx_setup(&fx))
		return;
	for (int i = 0; i < 9999; i++)
		rules[i] = rule(i + 1, PI_DP_DENY, "192.0.2.0/24", IPPROTO_TCP,
				1000 + i % 50000, 1000 + i % 50000);
	rules[9999] = rule(10000, PI_DP_DENY, "10.0.0.2/32", 0, 0, 0);
	set_policy(&fx, 0, PI_DP_DIR_EGRESS, rules, 10000, 0);
	ASSERT_EQ(a_sends(&fx, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_TCP, 1, 80 }),
		  PI_DROP, "verdict");
	ASSERT_EQ(rule_packets(&fx, 10000), 1, "last rule counter");
	fx_teardown(&fx);
}

UNIT_TEST(node_ingress_policy_on_local_delivery)
{
	struct node_fx fx;
	uint8_t pkt[PKT_MAX];
	struct pi_dp_rule deny = rule(21, PI_DP_DENY, "10.0.0.1/32", IPPROTO_TCP,
				   22, 22);
	int len;

	if (!fx_setup(&fx))
		return;
	set_policy(&fx, 1, PI_DP_DIR_INGRESS, &deny, 1, 0);
	ASSERT_EQ(a_sends(&fx, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_TCP, 1, 22 }),
		  PI_DROP, "denied by B's ingress policy");
	ASSERT_EQ(stats(&fx, 1).drops[PI_DP_DROP_INGRESS_POLICY], 1,
		  "B ingress-policy drops");
	ASSERT_EQ(a_sends(&fx, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_TCP, 1, 23 }),
		  PI_REDIRECT, "other port delivered");
	/* The same rule at the other way in: from the node's stack. */
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_TCP, 1, 22 });
	ASSERT_EQ(run(fx.skel->progs.pod_ingress, fx.if_b, pkt, len, NULL),
		  PI_DROP, "pod_ingress verdict");
	fx_teardown(&fx);
}

/* From a netkit peer program bpf_redirect_peer() with flags 0 is refused
 * (tc ingress only): the netkit variant hands the packet to B's host-side
 * device to transmit, and B's own ingress point checks and counts it. */
UNIT_TEST(node_netkit_egress_delivers_via_host_device)
{
	struct node_fx fx;
	uint8_t pkt[PKT_MAX], out[PKT_MAX];
	struct pi_redirect_record rd;
	int len;

	if (!fx_setup(&fx))
		return;
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET6, "fd00::1",
		"fd00::2", IPPROTO_UDP, 40000, 53 });
	ASSERT_EQ(run(fx.skel->progs.pod_egress_nk, fx.if_a, pkt, len, out),
		  PI_REDIRECT, "verdict");
	rd = last_redirect(&fx);
	ASSERT_EQ(rd.kind, PI_RD_PLAIN, "bpf_redirect, not redirect_peer");
	ASSERT_EQ(rd.ifindex, fx.if_b, "B's host-side device");
	ASSERT_EQ(rd.flags, 0, "to its egress");
	ASSERT_TRUE(!memcmp(out, MAC_B, 6), "dst mac is pod B's eth0");
	ASSERT_EQ(stats(&fx, 0).egress_packets, 1, "A egress counted");
	ASSERT_EQ(stats(&fx, 1).ingress_packets, 0,
		  "B ingress left to B's own ingress point");
	/* the source check is the same program's */
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.9",
		"10.0.0.2", IPPROTO_UDP, 1, 2 });
	ASSERT_EQ(run(fx.skel->progs.pod_egress_nk, fx.if_a, pkt, len,
		      NULL), PI_DROP, "spoofed");
	ASSERT_EQ(stats(&fx, 0).drops[PI_DP_DROP_SPOOFED], 1, "counted spoofed");
	fx_teardown(&fx);
}

/* netkit's primary program runs with skb->dev already the pod's eth0, an
 * ifindex of another namespace: the pod is found by destination. */
UNIT_TEST(node_netkit_ingress_finds_pod_by_destination)
{
	struct node_fx fx;
	uint8_t pkt[PKT_MAX];
	struct pi_dp_rule deny = rule(31, PI_DP_DENY, "10.0.0.1/32", IPPROTO_TCP,
				   22, 22);
	int len;

	if (!fx_setup(&fx))
		return;
	set_policy(&fx, 1, PI_DP_DIR_INGRESS, &deny, 1, 0);
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_TCP, 1, 23 });
	ASSERT_EQ(run(fx.skel->progs.pod_ingress_nk, fx.if_up, pkt, len,
		      NULL), PI_PASS, "allowed");
	ASSERT_EQ(stats(&fx, 1).ingress_packets, 1, "B ingress counted");
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_TCP, 1, 22 });
	ASSERT_EQ(run(fx.skel->progs.pod_ingress_nk, fx.if_up, pkt, len,
		      NULL), PI_DROP, "B's ingress policy");
	ASSERT_EQ(stats(&fx, 1).drops[PI_DP_DROP_INGRESS_POLICY], 1, "counted");
	ASSERT_EQ(stats(&fx, 0).ingress_packets, 0, "A untouched");
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.2",
		"192.0.2.1", IPPROTO_TCP, 1, 22 });
	ASSERT_EQ(run(fx.skel->progs.pod_ingress_nk, fx.if_up, pkt, len,
		      NULL), PI_NEXT, "no pod's destination");
	fx_teardown(&fx);
}

UNIT_TEST(node_malformed_and_non_ip)
{
	struct node_fx fx;
	uint8_t pkt[PKT_MAX];
	int len;

	if (!fx_setup(&fx))
		return;
	/* TCP header cut short (test runs refuse IPv4 shorter than its
	 * header, so the cut is in the transport header) */
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_TCP, 1, 2 });
	pkt[16] = 0;
	pkt[17] = 24;
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, 14 + 24, NULL),
		  PI_DROP, "short tcp");
	/* total length beyond the packet */
	pkt[16] = 0x40;
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, len, NULL),
		  PI_DROP, "bad tot_len");
	/* ihl below 5 */
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_TCP, 1, 2 });
	pkt[14] = 0x43;
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, len, NULL),
		  PI_DROP, "bad ihl");
	/* IPv6 with the transport header cut */
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET6, "fd00::1",
		"fd00::2", IPPROTO_TCP, 1, 2 });
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, 14 + 40 + 4,
		      NULL), PI_DROP, "short ipv6");
	ASSERT_EQ(stats(&fx, 0).drops[PI_DP_DROP_MALFORMED], 4, "malformed");
	/* ARP (of the pod's own address) goes to the stack, LLDP is
	 * dropped as unsupported */
	arp_build(pkt, "10.0.0.1", MAC_A);
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, 60, NULL),
		  PI_PASS, "arp");
	memset(pkt, 0, 64);
	pkt[12] = 0x88;
	pkt[13] = 0xcc;
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, 60, NULL),
		  PI_DROP, "lldp");
	ASSERT_EQ(stats(&fx, 0).drops[PI_DP_DROP_UNSUPPORTED], 1, "unsupported");
	/* a device that is no pod */
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_TCP, 1, 2 });
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_up, pkt, len, NULL),
		  PI_DROP, "unknown device");
	fx_teardown(&fx);
}

UNIT_TEST(node_uplink_ingress)
{
	struct node_fx fx;
	uint8_t pkt[PKT_MAX], out[PKT_MAX];
	int len;

	if (!fx_setup(&fx))
		return;
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.1.0.5",
		"10.0.0.2", IPPROTO_TCP, 1, 80 });
	ASSERT_EQ(run(fx.skel->progs.uplink_ingress, fx.if_up, pkt, len, out),
		  PI_REDIRECT, "to local pod");
	ASSERT_EQ(last_redirect(&fx).ifindex, fx.if_b, "target");
	ASSERT_TRUE(!memcmp(out, MAC_B, 6), "dst mac");
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.1.0.5",
		"10.9.9.9", IPPROTO_TCP, 1, 80 });
	ASSERT_EQ(run(fx.skel->progs.uplink_ingress, fx.if_up, pkt, len, NULL),
		  PI_NEXT, "not ours");
	fx_teardown(&fx);
}

/* ---- issue #14: what a pod may say about itself, and what policy covers */

static uint8_t *l4_of(uint8_t *pkt, int family)
{
	return pkt + 14 + (family == AF_INET ? 20 : 40);
}

/* An ICMPv6 neighbour-discovery message from `src`: `type`, a target
 * address (NS, NA; NULL for none) and one link-layer address option
 * (`opt` 1 source, 2 target, 0 none) carrying `mac`. */
static int nd_build(uint8_t *pkt, const char *src, const char *dst,
		    uint8_t type, const char *target, uint8_t opt,
		    const uint8_t *mac)
{
	int body = (target ? 16 : 0) + (opt ? 8 : 0) + (type == 134 ? 8 : 0);
	int len = pkt_build(pkt, &(struct pkt_spec){ AF_INET6, src, dst,
		IPPROTO_ICMP, .payload = body });
	uint8_t *l4 = l4_of(pkt, AF_INET6), *o = l4 + 8;

	l4[0] = type;
	l4[1] = 0;
	if (target) {
		inet_pton(AF_INET6, target, o);
		o += 16;
	}
	if (type == 134)
		o += 8;
	if (opt) {
		o[0] = opt;
		o[1] = 1;
		memcpy(o + 2, mac, 6);
	}
	return len;
}

/* Finding 2: a link-local or unspecified source is no way around the
 * egress policy, and it stays on the link. */
UNIT_TEST(node_harden_link_local_meets_egress_policy)
{
	struct pi_dp_rule deny_all = rule(41, PI_DP_DENY, NULL, 0, 0, 0);
	struct node_fx fx;

	if (!fx_setup(&fx))
		return;
	/* without a policy: to the node's stack, as before */
	ASSERT_EQ(a_sends(&fx, &(struct pkt_spec){ AF_INET6, "fe80::a",
		"fe80::1", IPPROTO_TCP, 40000, 22 }),
		  PI_PASS, "link-local to the host side, no policy");
	ASSERT_EQ(stats(&fx, 0).egress_packets, 0,
		  "link traffic stays out of the egress counters");
	/* a link-local source cannot reach beyond the link */
	ASSERT_EQ(a_sends(&fx, &(struct pkt_spec){ AF_INET6, "fe80::a",
		"fd00::2", IPPROTO_UDP, 1, 53 }),
		  PI_DROP, "link-local source to pod B");
	ASSERT_EQ(a_sends(&fx, &(struct pkt_spec){ AF_INET6, "::",
		"fd00::2", IPPROTO_UDP, 1, 53 }),
		  PI_DROP, "unspecified source to pod B");
	ASSERT_EQ(stats(&fx, 0).drops[PI_DP_DROP_SPOOFED], 2, "spoofed");
	ASSERT_EQ(stats(&fx, 1).ingress_packets, 0, "B got nothing");
	/* egress deny everything: the host's link-local services too */
	set_policy(&fx, 0, PI_DP_DIR_EGRESS, &deny_all, 1, 0);
	ASSERT_EQ(a_sends(&fx, &(struct pkt_spec){ AF_INET6, "fe80::a",
		"fe80::1", IPPROTO_TCP, 40000, 22 }),
		  PI_DROP, "link-local to the host side, deny all");
	ASSERT_EQ(a_sends(&fx, &(struct pkt_spec){ AF_INET6, "::",
		"ff02::16", IPPROTO_ICMP }),
		  PI_DROP, "unspecified source, deny all");
	ASSERT_EQ(stats(&fx, 0).drops[PI_DP_DROP_POLICY], 2, "policy drops");
	ASSERT_EQ(rule_packets(&fx, 41), 2, "deny-all counter");
	fx_teardown(&fx);
}

/* An NDP message's link-layer options are compared with the pod's MAC up
 * to the 4th; Linux reads them all, so a message with a 5th (an own-MAC
 * one no better: it is not read) is refused, and 4 pass as before. */
UNIT_TEST(node_harden_nd_options_past_the_checked)
{
	static const uint8_t MAC_X[6] = { 0x02, 0x99, 0, 0, 0, 9 };
	const uint8_t *last[3] = { NULL, MAC_X, MAC_A };
	struct node_fx fx;
	uint8_t pkt[PKT_MAX];

	if (!fx_setup(&fx))
		return;
	for (int c = 0; c < 3; c++) {
		int nopts = c ? 5 : 4;
		int len = pkt_build(pkt, &(struct pkt_spec){ AF_INET6,
			"fe80::a", "fe80::1", IPPROTO_ICMP,
			.payload = 16 + nopts * 8 });
		uint8_t *l4 = l4_of(pkt, AF_INET6), *o = l4 + 24;

		l4[0] = 136;	/* neighbour advertisement */
		l4[1] = 0;
		inet_pton(AF_INET6, "fd00::1", l4 + 8);
		for (int i = 0; i < nopts; i++, o += 8) {
			/* nonces (type 14) first; the last a target
			 * link-layer option when one is asked for */
			o[0] = i == nopts - 1 && last[c] ? 2 : 14;
			o[1] = 1;
			memcpy(o + 2, i == nopts - 1 && last[c] ? last[c] : MAC_A, 6);
		}
		ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, len, NULL),
			  c ? PI_DROP : PI_PASS,
			  c == 0 ? "NA with 4 options: compared, passes" :
			  c == 1 ? "NA with another MAC in a 5th option" :
				   "NA with a 5th option at all");
	}
	ASSERT_EQ(stats(&fx, 0).drops[PI_DP_DROP_ND_SPOOFED], 2,
		  "counted as NDP claims");
	fx_teardown(&fx);
}

/* Finding 2: a pod is no router, and claims only its own addresses and
 * MAC in NDP and ARP. */
UNIT_TEST(node_harden_ra_and_neighbour_claims)
{
	static const uint8_t MAC_X[6] = { 0x02, 0x99, 0, 0, 0, 9 };
	struct node_fx fx;
	uint8_t pkt[PKT_MAX];
	int len;

	if (!fx_setup(&fx))
		return;
	len = nd_build(pkt, "fe80::a", "ff02::1", 134, NULL, 1, MAC_A);
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, len, NULL),
		  PI_DROP, "router advertisement");
	len = nd_build(pkt, "fe80::a", "fe80::1", 137, "fd00::2", 0, NULL);
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, len, NULL),
		  PI_DROP, "redirect");
	ASSERT_EQ(stats(&fx, 0).drops[PI_DP_DROP_ROUTER], 2, "router drops");

	/* neighbour advertisements: own address and MAC only */
	len = nd_build(pkt, "fe80::a", "fe80::1", 136, "fd00::1", 2, MAC_A);
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, len, NULL),
		  PI_PASS, "NA for its own address, own MAC");
	len = nd_build(pkt, "fe80::a", "fe80::1", 136, "fe80::a", 2, MAC_A);
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, len, NULL),
		  PI_PASS, "NA for its link-local address");
	len = nd_build(pkt, "fe80::a", "ff02::1", 136, "fd00::2", 2, MAC_A);
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, len, NULL),
		  PI_DROP, "NA for pod B's address");
	len = nd_build(pkt, "fd00::1", "fe80::1", 136, "fd00::2", 0, NULL);
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, len, NULL),
		  PI_DROP, "NA for pod B's address from its own address");
	len = nd_build(pkt, "fe80::a", "fe80::1", 136, "fd00::1", 2, MAC_X);
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, len, NULL),
		  PI_DROP, "NA with another MAC");
	/* solicitations: the source link-layer option is its own MAC */
	len = nd_build(pkt, "fd00::1", "ff02::1:ff00:2", 135, "fd00::2", 1,
		       MAC_A);
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, len, NULL),
		  PI_PASS, "NS with its own MAC");
	len = nd_build(pkt, "fd00::1", "ff02::1:ff00:2", 135, "fd00::2", 1,
		       MAC_X);
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, len, NULL),
		  PI_DROP, "NS with another MAC");
	len = nd_build(pkt, "fe80::a", "ff02::2", 133, NULL, 1, MAC_X);
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, len, NULL),
		  PI_DROP, "RS with another MAC");
	ASSERT_EQ(stats(&fx, 0).drops[PI_DP_DROP_ND_SPOOFED], 5, "NDP claims");

	/* ARP: the sender address is its own, or none (a probe) */
	len = arp_build(pkt, "10.0.0.1", MAC_A);
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, len, NULL),
		  PI_PASS, "ARP from its own address");
	len = arp_build(pkt, "0.0.0.0", MAC_A);
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, len, NULL),
		  PI_PASS, "ARP probe");
	len = arp_build(pkt, "10.0.0.2", MAC_A);
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, len, NULL),
		  PI_DROP, "ARP claiming pod B's address");
	ASSERT_EQ(stats(&fx, 0).drops[PI_DP_DROP_ND_SPOOFED], 6, "ARP claim");
	fx_teardown(&fx);
}

/* Finding 3: port rules see UDP and TCP behind IPv6 extension headers. */
UNIT_TEST(node_harden_ipv6_extension_headers)
{
	uint64_t b_in;
	struct pi_dp_rule deny = rule(51, PI_DP_DENY, NULL, IPPROTO_UDP, 53, 53);
	uint8_t ah[15] = { 0, 2 };	/* AH length: (2 + 2) * 4 = 16 */
	struct node_fx fx;
	uint8_t pkt[PKT_MAX];
	int len, i;

	if (!fx_setup(&fx))
		return;
	set_policy(&fx, 0, PI_DP_DIR_EGRESS, &deny, 1, 0);
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET6, "fd00::1",
		"fd00::2", IPPROTO_UDP, 1000, 53 });
	len = pkt_ext6(pkt, len, 0, 8, NULL);
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, len, NULL),
		  PI_DROP, "udp 53 behind hop-by-hop");
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET6, "fd00::1",
		"fd00::2", IPPROTO_UDP, 1000, 53 });
	len = pkt_ext6(pkt, len, 60, 16, NULL);
	len = pkt_ext6(pkt, len, 51, 16, ah);
	len = pkt_ext6(pkt, len, 43, 8, NULL);
	len = pkt_ext6(pkt, len, 0, 8, NULL);
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, len, NULL),
		  PI_DROP, "udp 53 behind hop-by-hop, routing, AH, dstopts");
	/* an atomic fragment (offset 0, no more) is a whole packet */
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET6, "fd00::1",
		"fd00::2", IPPROTO_UDP, 1000, 53 });
	len = pkt_frag6(pkt, len, 0, 0, 5);
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, len, NULL),
		  PI_DROP, "udp 53 in an atomic fragment");
	ASSERT_EQ(rule_packets(&fx, 51), 3, "the port rule matched");
	/* another port behind the same chain is delivered */
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET6, "fd00::1",
		"fd00::2", IPPROTO_TCP, 1000, 80 });
	len = pkt_ext6(pkt, len, 60, 8, NULL);
	len = pkt_ext6(pkt, len, 0, 8, NULL);
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, len, NULL),
		  PI_REDIRECT, "tcp 80 behind hop-by-hop, dstopts");
	/* more headers than the walk takes: malformed, not unclassified */
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET6, "fd00::1",
		"fd00::2", IPPROTO_UDP, 1000, 53 });
	for (i = 0; i <= PI_MAX_EXTHDRS; i++)
		len = pkt_ext6(pkt, len, 60, 8, NULL);
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, len, NULL),
		  PI_DROP, "a chain longer than the walk");
	ASSERT_EQ(stats(&fx, 0).drops[PI_DP_DROP_MALFORMED], 1, "malformed");
	/* towards a pod too: Linux takes any number of them, so the pod's
	 * stack would take what its policy never saw (test_xdp's table has
	 * pod_ingress, uplink_ingress and the XDP ACL) */
	b_in = stats(&fx, 1).ingress_packets;
	ASSERT_EQ(run(fx.skel->progs.pod_ingress_nk, fx.if_up, pkt, len, NULL),
		  PI_DROP, "a chain longer than the walk, netkit ingress");
	ASSERT_EQ(stats(&fx, 1).drops[PI_DP_DROP_MALFORMED], 1,
		  "malformed, counted on B");
	ASSERT_EQ(stats(&fx, 1).ingress_packets, b_in, "B got nothing");
	fx_teardown(&fx);
}

/* Finding 3: non-first fragments get the verdict of their first one. */
static void fragments_case(struct node_fx *fx, int family)
{
	const char *a = family == AF_INET ? "10.0.0.1" : "fd00::1";
	const char *b = family == AF_INET ? "10.0.0.2" : "fd00::2";
	uint8_t pkt[PKT_MAX];
	int len;

#define FRAG(port, off, more, id) ({					\
	len = pkt_build(pkt, &(struct pkt_spec){ family, a, b,		\
		IPPROTO_UDP, 1000, port, .payload = 24 });		\
	if (family == AF_INET)						\
		pkt_frag4(pkt, off, more, id);				\
	else								\
		len = pkt_frag6(pkt, len, off, more, id);		\
	run(fx->skel->progs.pod_egress, fx->if_a, pkt, len, NULL); })

	/* denied port: the first fragment is denied, the rest with it */
	ASSERT_EQ(FRAG(53, 0, 1, 7), PI_DROP, "first fragment, denied port");
	ASSERT_EQ(FRAG(0, 32, 1, 7), PI_DROP, "second fragment of it");
	ASSERT_EQ(FRAG(0, 64, 0, 7), PI_DROP, "last fragment of it");
	ASSERT_EQ(stats(fx, 0).drops[PI_DP_DROP_POLICY], 1, "policy drop");
	ASSERT_EQ(stats(fx, 0).drops[PI_DP_DROP_FRAG_ORPHAN], 2, "orphans");
	/* allowed port: all fragments delivered, classified as the first */
	ASSERT_EQ(FRAG(5353, 0, 1, 8), PI_REDIRECT, "first fragment, allowed");
	ASSERT_EQ(FRAG(0, 32, 0, 8), PI_REDIRECT, "last fragment of it");
	ASSERT_EQ(stats(fx, 1).ingress_packets, 2, "B got both");
	/* a later fragment nobody let the first of through */
	ASSERT_EQ(FRAG(0, 32, 0, 9), PI_DROP, "fragment without a first");
	ASSERT_EQ(stats(fx, 0).drops[PI_DP_DROP_FRAG_ORPHAN], 3, "orphan");
#undef FRAG
}

UNIT_TEST(node_harden_fragments_v4)
{
	struct pi_dp_rule deny = rule(61, PI_DP_DENY, NULL, IPPROTO_UDP, 53, 53);
	struct node_fx fx;

	if (!fx_setup(&fx))
		return;
	set_policy(&fx, 0, PI_DP_DIR_EGRESS, &deny, 1, 0);
	fragments_case(&fx, AF_INET);
	fx_teardown(&fx);
}

UNIT_TEST(node_harden_fragments_v6)
{
	struct pi_dp_rule deny = rule(62, PI_DP_DENY, NULL, IPPROTO_UDP, 53, 53);
	struct node_fx fx;

	if (!fx_setup(&fx))
		return;
	set_policy(&fx, 0, PI_DP_DIR_EGRESS, &deny, 1, 0);
	fragments_case(&fx, AF_INET6);
	fx_teardown(&fx);
}

/* The review of 2026-12-05: an IPv6 datagram whose fragment header is
 * followed by destination options. Its later fragments name only the
 * header after the fragment header (60); the first goes on to UDP. Both
 * are keyed by the former, and the later ones take the first's protocol:
 * keyed by the final protocol, they were orphans; classified as 60, the
 * allow-list below would deny them. */
UNIT_TEST(node_harden_fragments_v6_options_after)
{
	struct pi_dp_rule rules[] = {
		rule(63, PI_DP_ALLOW, NULL, IPPROTO_UDP, 5353, 5353),
		rule(64, PI_DP_DENY, NULL, 0, 0, 0),
	};
	uint8_t pkt[PKT_MAX];
	struct node_fx fx;
	int len;

	if (!fx_setup(&fx))
		return;
	set_policy(&fx, 0, PI_DP_DIR_EGRESS, rules, 2, 0);
#define FRAG6(port, off, more, id) ({					\
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET6, "fd00::1",	\
		"fd00::2", IPPROTO_UDP, 1000, port, .payload = 24 });	\
	len = pkt_ext6(pkt, len, 60, 8, NULL);				\
	len = pkt_frag6(pkt, len, off, more, id);			\
	run(fx.skel->progs.pod_egress, fx.if_a, pkt, len, NULL); })

	ASSERT_EQ(FRAG6(5353, 0, 1, 21), PI_REDIRECT, "first fragment, allowed");
	ASSERT_EQ(FRAG6(0, 32, 1, 21), PI_REDIRECT, "second fragment of it");
	ASSERT_EQ(FRAG6(0, 64, 0, 21), PI_REDIRECT, "last fragment of it");
	ASSERT_EQ(stats(&fx, 1).ingress_packets, 3, "B got all three");
	ASSERT_EQ(FRAG6(53, 0, 1, 22), PI_DROP, "first fragment, denied port");
	ASSERT_EQ(FRAG6(0, 32, 0, 22), PI_DROP, "later fragment of it");
	ASSERT_EQ(stats(&fx, 0).drops[PI_DP_DROP_POLICY], 1, "policy drop");
	ASSERT_EQ(stats(&fx, 0).drops[PI_DP_DROP_FRAG_ORPHAN], 1, "orphan");
	ASSERT_EQ(stats(&fx, 1).ingress_packets, 3, "B got no more");
#undef FRAG6
	fx_teardown(&fx);
}

/* Finding 3: a first fragment too short for the transport header is
 * dropped at every enforcement point, not passed as unparsable. */
UNIT_TEST(node_harden_tiny_first_fragments)
{
	struct node_fx fx;
	uint8_t pkt[PKT_MAX];
	struct iphdr *ip = (void *)(pkt + 14);
	struct ipv6hdr *ip6 = (void *)(pkt + 14);
	int len;

	if (!fx_setup(&fx))
		return;
	/* IPv4 TCP, 8 bytes of its header in the first fragment */
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_TCP, 1000, 22 });
	pkt_frag4(pkt, 0, 1, 3);
	ip->tot_len = htons(20 + 8);
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, 14 + 28, NULL),
		  PI_DROP, "v4 tiny at the pod's egress");
	ASSERT_EQ(stats(&fx, 0).drops[PI_DP_DROP_FRAG_TINY], 1, "A tiny");
	ASSERT_EQ(run(fx.skel->progs.pod_ingress, fx.if_b, pkt, 14 + 28,
		      NULL), PI_DROP, "v4 tiny from the node's stack");
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.1.0.5",
		"10.0.0.2", IPPROTO_TCP, 1000, 22 });
	pkt_frag4(pkt, 0, 1, 4);
	ip->tot_len = htons(20 + 8);
	ASSERT_EQ(run(fx.skel->progs.uplink_ingress, fx.if_up, pkt, 14 + 28,
		      NULL), PI_DROP, "v4 tiny from the uplink");
	ASSERT_EQ(stats(&fx, 1).drops[PI_DP_DROP_FRAG_TINY], 2, "B tiny");
	/* IPv6 UDP, 4 bytes of its header behind the fragment header */
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET6, "fd00::1",
		"fd00::2", IPPROTO_UDP, 1000, 53 });
	len = pkt_frag6(pkt, len, 0, 1, 5);
	ip6->payload_len = htons(8 + 4);
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, 14 + 40 + 12,
		      NULL), PI_DROP, "v6 tiny at the pod's egress");
	ASSERT_EQ(run(fx.skel->progs.pod_ingress_nk, fx.if_up, pkt,
		      14 + 40 + 12, NULL), PI_DROP, "v6 tiny at netkit ingress");
	ASSERT_EQ(stats(&fx, 0).drops[PI_DP_DROP_FRAG_TINY], 2, "A tiny");
	ASSERT_EQ(stats(&fx, 1).drops[PI_DP_DROP_FRAG_TINY], 3, "B tiny");
	ASSERT_EQ(stats(&fx, 1).ingress_packets, 0, "B got nothing");
	fx_teardown(&fx);
}

/* Finding 4: a VLAN-tagged frame from a pod goes nowhere. (Test runs
 * cannot set skb->vlan_*; the tag is in the frame here, the integration
 * suite sends one the device takes off.) */
UNIT_TEST(node_harden_vlan_from_pod_dropped)
{
	struct pi_node_config cfg = {};
	struct node_fx fx;
	uint8_t pkt[PKT_MAX], tagged[PKT_MAX];
	uint32_t zero = 0;
	int len;

	if (!fx_setup(&fx))
		return;
	cfg.uplink_ifindex = fx.if_up;
	bpf_map__update_elem(fx.skel->maps.node_config, &zero, 4, &cfg,
			     sizeof(cfg), 0);
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"192.0.2.9", IPPROTO_UDP, 1000, 53 });
	memcpy(tagged, pkt, 12);
	tagged[12] = 0x81;
	tagged[13] = 0x00;
	tagged[14] = 0x00;
	tagged[15] = 0x05;	/* VLAN 5 */
	memcpy(tagged + 16, pkt + 12, len - 12);
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, tagged, len + 4,
		      NULL), PI_DROP, "802.1Q");
	tagged[12] = 0x88;
	tagged[13] = 0xa8;
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, tagged, len + 4,
		      NULL), PI_DROP, "802.1ad");
	ASSERT_EQ(last_redirect(&fx).kind, PI_RD_NONE, "not to the uplink");
	ASSERT_EQ(stats(&fx, 0).drops[PI_DP_DROP_VLAN], 2, "vlan drops");
	/* nor to one: a VLAN device the pod's root made on eth0 would take
	 * the frame past the pod's policy */
	ASSERT_EQ(run(fx.skel->progs.pod_ingress, fx.if_b, tagged, len + 4,
		      NULL), PI_DROP, "802.1ad towards a pod");
	ASSERT_EQ(stats(&fx, 1).drops[PI_DP_DROP_VLAN], 1, "counted on B");
	fx_teardown(&fx);
}

/* Finding 5: the uplink cannot speak for a local pod. */
UNIT_TEST(node_harden_uplink_source_of_local_pod)
{
	struct node_fx fx;
	uint8_t pkt[PKT_MAX];
	int len;

	if (!fx_setup(&fx))
		return;
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_TCP, 1, 80 });
	ASSERT_EQ(run(fx.skel->progs.uplink_ingress, fx.if_up, pkt, len, NULL),
		  PI_DROP, "v4 source of pod A to pod B");
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET6, "fd00::1",
		"fd00::2", IPPROTO_UDP, 1, 53 });
	ASSERT_EQ(run(fx.skel->progs.uplink_ingress, fx.if_up, pkt, len, NULL),
		  PI_DROP, "v6 source of pod A to pod B");
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"192.0.2.1", IPPROTO_UDP, 1, 53 });
	ASSERT_EQ(run(fx.skel->progs.uplink_ingress, fx.if_up, pkt, len, NULL),
		  PI_DROP, "source of pod A to the node");
	ASSERT_EQ(stats(&fx, 0).drops[PI_DP_DROP_UPLINK_SPOOFED], 3,
		  "counted on pod A");
	ASSERT_EQ(stats(&fx, 1).ingress_packets, 0, "B got nothing");
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.1.0.5",
		"10.0.0.2", IPPROTO_TCP, 1, 80 });
	ASSERT_EQ(run(fx.skel->progs.uplink_ingress, fx.if_up, pkt, len, NULL),
		  PI_REDIRECT, "another node's pod still reaches B");
	fx_teardown(&fx);
}

/* Finding 8: the policy reference is one 8-byte value and is read with
 * one 8-byte load, so start and count always come from the same edit.
 * Checked in the loaded instructions: every load through the pointer
 * bpf_map_lookup_elem(&policy_refs, ..) returns. */
/* The loads through the pointers in `track` (a register mask) from
 * instruction i on, along every path, up to the next call or exit. */
static void ref_paths(const struct bpf_insn *in, size_t n, size_t i,
		      uint32_t track, int depth, int *words, int *dwords)
{
	for (; i < n && track && depth < 256; i++, depth++) {
		uint8_t cls = BPF_CLASS(in[i].code), op = BPF_OP(in[i].code);

		if (in[i].code == (BPF_JMP | BPF_CALL) ||
		    in[i].code == (BPF_JMP | BPF_EXIT))
			return;
		if (cls == BPF_JMP || cls == BPF_JMP32) {
			if (op == BPF_JA) {
				i += in[i].off;
				continue;
			}
			/* a conditional jump: the taken branch, then on */
			ref_paths(in, n, i + 1 + in[i].off, track, depth + 1,
				  words, dwords);
			continue;
		}
		if (cls == BPF_LDX && (track >> in[i].src_reg & 1)) {
			if (BPF_SIZE(in[i].code) == BPF_DW)
				(*dwords)++;
			else
				(*words)++;
			track &= ~(1u << in[i].dst_reg);
		} else if (in[i].code == (BPF_ALU64 | BPF_MOV | BPF_X)) {
			if (track >> in[i].src_reg & 1)
				track |= 1u << in[i].dst_reg;
			else
				track &= ~(1u << in[i].dst_reg);
		} else if (in[i].code == (BPF_LD | BPF_IMM | BPF_DW)) {
			track &= ~(1u << in[i].dst_reg);
			i++;	/* two slots */
		} else if (cls == BPF_LDX || cls == BPF_ALU ||
			   cls == BPF_ALU64 || cls == BPF_LD) {
			track &= ~(1u << in[i].dst_reg);
		}
	}
}

static bool ref_loads(const struct bpf_program *prog, int map_fd, int *words,
		      int *dwords)
{
	const struct bpf_insn *in = bpf_program__insns(prog);
	size_t n = bpf_program__insn_cnt(prog);
	int lookups = 0;

	*words = *dwords = 0;
	for (size_t i = 0; i < n; i++) {
		if (!(in[i].code == (BPF_LD | BPF_IMM | BPF_DW) &&
		      in[i].src_reg == BPF_PSEUDO_MAP_FD &&
		      in[i].imm == map_fd && in[i].dst_reg == 1))
			continue;
		/* the call that takes r1 = &policy_refs */
		for (i += 2; i < n && in[i].code != (BPF_JMP | BPF_CALL); i++)
			;
		if (i >= n || in[i].imm != BPF_FUNC_map_lookup_elem)
			continue;
		lookups++;
		ref_paths(in, n, i + 1, 1u << 0, 0, words, dwords);
	}
	return lookups > 0;
}

UNIT_TEST(node_harden_policy_ref_one_load)
{
	struct bpf_program *progs[5];
	struct node_fx fx;
	int fd;

	if (!fx_setup(&fx))
		return;
	progs[0] = fx.skel->progs.pod_egress;
	progs[1] = fx.skel->progs.pod_egress_nk;
	progs[2] = fx.skel->progs.pod_ingress;
	progs[3] = fx.skel->progs.pod_ingress_nk;
	progs[4] = fx.skel->progs.uplink_ingress;
	fd = bpf_map__fd(fx.skel->maps.policy_refs);
	for (int i = 0; i < 5; i++) {
		char what[96];
		int w, dw;

		snprintf(what, sizeof(what), "%s looks the reference up",
			 bpf_program__name(progs[i]));
		if (!ASSERT_TRUE(ref_loads(progs[i], fd, &w, &dw), what))
			break;
		snprintf(what, sizeof(what), "%s: narrower loads of it",
			 bpf_program__name(progs[i]));
		ASSERT_EQ(w, 0, what);
		snprintf(what, sizeof(what), "%s: 8-byte loads per lookup",
			 bpf_program__name(progs[i]));
		ASSERT_TRUE(dw >= 1, what);
	}
	fx_teardown(&fx);
}

/* ---- the event monitor (bpf/lib/monitor.h) ---- */

#define MON_EVENTS_MAX	16

struct mon_seen {
	struct pi_dp_mon_event ev[MON_EVENTS_MAX];
	int cnt;
};

static int mon_collect(void *ctx, void *data, size_t size)
{
	struct mon_seen *s = ctx;

	if (size == sizeof(s->ev[0]) && s->cnt < MON_EVENTS_MAX)
		memcpy(&s->ev[s->cnt], data, size);
	s->cnt++;
	return 0;
}

static void mon_set(struct node_fx *fx, uint32_t kinds)
{
	struct pi_dp_monitor_config cfg = { .kinds = kinds };
	uint32_t zero = 0;

	bpf_map__update_elem(fx->skel->maps.monitor_config, &zero, 4, &cfg,
			     sizeof(cfg), 0);
}

/* The events written since the last call. */
static struct mon_seen mon_read(struct node_fx *fx)
{
	struct mon_seen s = {};
	struct ring_buffer *rb;

	rb = ring_buffer__new(bpf_map__fd(fx->skel->maps.monitor_events),
			      mon_collect, &s, NULL);
	if (rb) {
		ring_buffer__consume(rb);
		ring_buffer__free(rb);
	}
	return s;
}

static bool mon_tuple_is(const struct pi_dp_mon_event *e, int family,
			 const char *src, const char *dst, uint8_t proto,
			 uint16_t sport, uint16_t dport)
{
	struct pi_dp_addr s = {}, d = {};

	inet_pton(family, src, s.a);
	inet_pton(family, dst, d.a);
	return e->family == family && e->proto == proto &&
	       e->sport == sport && e->dport == dport &&
	       !memcmp(&e->saddr, &s, sizeof(s)) &&
	       !memcmp(&e->daddr, &d, sizeof(d));
}

/* No monitor asking: drops and decisions are counted as ever, and the
 * ring buffer stays empty. */
UNIT_TEST(monitor_off_writes_nothing)
{
	struct pi_dp_rule deny = rule(31, PI_DP_DENY, "10.0.0.2/32", 0, 0, 0);
	struct node_fx fx;

	if (!fx_setup(&fx))
		return;
	set_policy(&fx, 0, PI_DP_DIR_EGRESS, &deny, 1, 0);
	ASSERT_EQ(a_sends(&fx, &(struct pkt_spec){ AF_INET, "10.0.0.9",
		"10.0.0.2", IPPROTO_UDP, 1, 2 }),
		  PI_DROP, "spoofed");
	ASSERT_EQ(a_sends(&fx, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_UDP, 1, 2 }),
		  PI_DROP, "denied");
	ASSERT_EQ(stats(&fx, 0).drops[PI_DP_DROP_SPOOFED], 1, "counted");
	ASSERT_EQ(mon_read(&fx).cnt, 0, "events with no monitor");
	fx_teardown(&fx);
}

/* Drops only: where, why, whose, the 5-tuple; a decision that lets the
 * packet go writes nothing, as the monitor asked for drops alone. */
UNIT_TEST(monitor_drop_events)
{
	struct node_fx fx;
	struct mon_seen s;
	uint8_t pkt[PKT_MAX];
	int len;

	if (!fx_setup(&fx))
		return;
	mon_set(&fx, 1u << PI_DP_MON_DROP);
	ASSERT_EQ(a_sends(&fx, &(struct pkt_spec){ AF_INET, "10.0.0.9",
		"10.0.0.2", IPPROTO_TCP, 4000, 80 }),
		  PI_DROP, "spoofed v4");
	ASSERT_EQ(a_sends(&fx, &(struct pkt_spec){ AF_INET6, "fd00::99",
		"fd00::2", IPPROTO_UDP, 53, 5353 }),
		  PI_DROP, "spoofed v6");
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_TCP, 1, 80 });
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, len, NULL),
		  PI_REDIRECT, "allowed");
	memset(pkt, 0, 64);
	pkt[12] = 0x88;
	pkt[13] = 0xcc;
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, 60, NULL),
		  PI_DROP, "lldp");
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_TCP, 1, 2 });
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_up, pkt, len, NULL),
		  PI_DROP, "no pod's device");
	s = mon_read(&fx);
	if (!ASSERT_EQ(s.cnt, 4, "events"))
		goto out;
	ASSERT_EQ(s.ev[0].kind, PI_DP_MON_DROP, "kind");
	ASSERT_EQ(s.ev[0].reason, PI_DP_DROP_SPOOFED, "v4 reason");
	ASSERT_EQ(s.ev[0].hook, PI_DP_HOOK_POD_EGRESS, "hook");
	ASSERT_EQ(s.ev[0].pod_id, 0, "pod");
	ASSERT_EQ(s.ev[0].ifindex, fx.if_a, "device");
	ASSERT_EQ(s.ev[0].dir, PI_DP_DIR_EGRESS, "dir");
	ASSERT_EQ(s.ev[0].rule_id, 0, "no rule");
	ASSERT_EQ(s.ev[0].len, len, "length");
	ASSERT_TRUE(mon_tuple_is(&s.ev[0], AF_INET, "10.0.0.9", "10.0.0.2",
				 IPPROTO_TCP, 4000, 80), "v4 tuple");
	ASSERT_EQ(s.ev[0].tcp_flags, 0x02, "SYN");
	ASSERT_TRUE(s.ev[0].ts_ns > 0, "time");
	ASSERT_EQ(s.ev[1].reason, PI_DP_DROP_SPOOFED, "v6 reason");
	ASSERT_TRUE(mon_tuple_is(&s.ev[1], AF_INET6, "fd00::99", "fd00::2",
				 IPPROTO_UDP, 53, 5353), "v6 tuple");
	ASSERT_EQ(s.ev[2].reason, PI_DP_DROP_UNSUPPORTED, "lldp reason");
	ASSERT_EQ(s.ev[2].family, 0, "lldp has no tuple");
	ASSERT_EQ(s.ev[3].reason, PI_DP_DROP_UNKNOWN_POD, "unknown reason");
	ASSERT_EQ(s.ev[3].pod_id, PI_DP_MON_NO_POD, "no pod");
	ASSERT_EQ(s.ev[3].ifindex, fx.if_up, "its device");
out:
	fx_teardown(&fx);
}

/* The events the full ring (or a lapsed lease) did not take, on all CPUs. */
static uint64_t mon_lost(struct node_fx *fx)
{
	int ncpu = libbpf_num_possible_cpus();
	struct pi_dp_monitor_cpu mc[ncpu];
	uint64_t lost = 0;
	uint32_t zero = 0;

	if (bpf_map__lookup_elem(fx->skel->maps.monitor_cpu, &zero, 4, mc,
				 sizeof(mc), 0))
		return ~0ull;
	for (int i = 0; i < ncpu; i++)
		lost += mc[i].lost;
	return lost;
}

/* The kinds hold while their lease runs (renewed by the reader of the
 * rings): once it ran out (the reader killed, none to take over) a drop
 * writes no event and is counted as lost; lease 0 is a monitor of an
 * earlier build, which writes none: its kinds hold. */
UNIT_TEST(monitor_lease_lapsed_writes_nothing)
{
	static const struct {
		int64_t lease;	/* seconds from now; INT64_MIN: 0 */
		int events, lost;
	} cases[] = {
		{ 5, 1, 0 },
		{ INT64_MIN, 1, 0 },
		{ -2, 0, 1 },
		{ 1, 1, 0 },
	};
	struct node_fx fx;
	struct timespec ts;

	if (!fx_setup(&fx))
		return;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pi_dp_monitor_config cfg = {
			.kinds = 1u << PI_DP_MON_DROP };
		uint64_t lost = mon_lost(&fx);
		uint32_t zero = 0;
		char what[48];

		clock_gettime(CLOCK_MONOTONIC, &ts);
		if (cases[i].lease != INT64_MIN)
			cfg.lease_s = (uint32_t)(ts.tv_sec + cases[i].lease);
		bpf_map__update_elem(fx.skel->maps.monitor_config, &zero, 4,
				     &cfg, sizeof(cfg), 0);
		snprintf(what, sizeof(what), "case %zu: dropped", i);
		ASSERT_EQ(a_sends(&fx, &(struct pkt_spec){ AF_INET, "10.0.0.9",
			"10.0.0.2", IPPROTO_UDP, 1, 2 }),
			  PI_DROP, what);
		snprintf(what, sizeof(what), "case %zu: events", i);
		ASSERT_EQ(mon_read(&fx).cnt, cases[i].events, what);
		snprintf(what, sizeof(what), "case %zu: lost", i);
		ASSERT_EQ(mon_lost(&fx) - lost, cases[i].lost, what);
	}
	ASSERT_EQ(stats(&fx, 0).drops[PI_DP_DROP_SPOOFED], 4, "each counted");
	fx_teardown(&fx);
}

/* An ICMP drop says what the message was: its type and code, and an
 * echo's id (which tells a probe's echoes from the pod's own pings),
 * marked as read; v4 and v6, an echo and an error. */
UNIT_TEST(monitor_drop_events_icmp)
{
	static const struct {
		int family;
		const char *src;
		uint8_t type, code;
		uint16_t id, want_id;
	} sent[] = {
		{ AF_INET, "10.0.0.9", 8, 0, 0x1234, 0x1234 },
		{ AF_INET6, "fd00::99", 128, 0, 0xbeef, 0xbeef },
		{ AF_INET, "10.0.0.9", 3, 1, 0x1234, 0 },
		{ AF_INET6, "fd00::99", 1, 4, 0x1234, 0 },
	};
	uint8_t pkt[PKT_MAX];
	struct node_fx fx;
	struct mon_seen s;
	int n = sizeof(sent) / sizeof(sent[0]);

	if (!fx_setup(&fx))
		return;
	mon_set(&fx, 1u << PI_DP_MON_DROP);
	for (int i = 0; i < n; i++) {
		int v6 = sent[i].family == AF_INET6;
		int len = pkt_build(pkt, &(struct pkt_spec){ sent[i].family,
			sent[i].src, v6 ? "fd00::2" : "10.0.0.2", IPPROTO_ICMP });
		uint8_t *icmp = pkt + 14 + (v6 ? 40 : 20);

		icmp[0] = sent[i].type;
		icmp[1] = sent[i].code;
		icmp[4] = sent[i].id >> 8;
		icmp[5] = sent[i].id & 0xff;
		ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, len,
			      NULL), PI_DROP, "spoofed");
	}
	s = mon_read(&fx);
	if (!ASSERT_EQ(s.cnt, n, "events"))
		goto out;
	for (int i = 0; i < n; i++) {
		const struct pi_dp_mon_event *e = &s.ev[i];

		ASSERT_EQ(e->reason, PI_DP_DROP_SPOOFED, "reason");
		ASSERT_EQ(e->proto, sent[i].family == AF_INET6 ?
			  IPPROTO_ICMPV6 : IPPROTO_ICMP, "proto");
		ASSERT_EQ(e->tcp_flags, PI_DP_MON_ICMP_READ, "header read");
		ASSERT_EQ(e->dport, sent[i].type << 8 | sent[i].code,
			  "type and code");
		ASSERT_EQ(e->sport, sent[i].want_id, "echo id, else 0");
	}
out:
	fx_teardown(&fx);
}

/* A flow's first packet is decided by a rule walk: its verdict, with the
 * rule, and for a deny the drop that names the same rule; the flow's
 * later packets pass on its entry and write nothing. The destination's
 * ingress policy is reported as the destination's. */
UNIT_TEST(monitor_verdict_and_policy_drop_name_the_rule)
{
	struct pi_dp_rule egress[] = {
		rule(41, PI_DP_ALLOW, "10.0.0.2/32", IPPROTO_TCP, 80, 80),
		rule(42, PI_DP_DENY, "10.0.0.2/32", IPPROTO_TCP, 0, 0),
	};
	struct pi_dp_rule ingress = rule(43, PI_DP_DENY, "10.0.0.1/32",
					 IPPROTO_UDP, 0, 0);
	struct node_fx fx;
	struct mon_seen s;
	uint8_t pkt[PKT_MAX];
	int len;

	if (!fx_setup(&fx))
		return;
	set_policy(&fx, 0, PI_DP_DIR_EGRESS, egress, 2, 0);
	set_policy(&fx, 1, PI_DP_DIR_INGRESS, &ingress, 1, 10);
	mon_set(&fx, 1u << PI_DP_MON_DROP | 1u << PI_DP_MON_VERDICT);
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_TCP, 1000, 80 });
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, len, NULL),
		  PI_REDIRECT, "allowed");
	s = mon_read(&fx);
	/* A's egress decision, then B's ingress one (no rule: default) */
	if (ASSERT_EQ(s.cnt, 2, "first packet's events")) {
		ASSERT_EQ(s.ev[0].kind, PI_DP_MON_VERDICT, "verdict");
		ASSERT_EQ(s.ev[0].reason, PI_DP_ALLOW, "allow");
		ASSERT_EQ(s.ev[0].rule_id, 41, "allow rule");
		ASSERT_EQ(s.ev[0].pod_id, 0, "A's");
		ASSERT_EQ(s.ev[0].dir, PI_DP_DIR_EGRESS, "egress");
		ASSERT_TRUE(mon_tuple_is(&s.ev[0], AF_INET, "10.0.0.1",
					 "10.0.0.2", IPPROTO_TCP, 1000, 80),
			    "tuple");
		ASSERT_EQ(s.ev[1].pod_id, 1, "B's");
		ASSERT_EQ(s.ev[1].dir, PI_DP_DIR_INGRESS, "ingress");
		ASSERT_EQ(s.ev[1].rule_id, 0, "default");
	}
	pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.1", "10.0.0.2",
		IPPROTO_TCP, 1000, 80, 0x10 });
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, len, NULL),
		  PI_REDIRECT, "established");
	ASSERT_EQ(mon_read(&fx).cnt, 0, "an established flow's packet");

	ASSERT_EQ(a_sends(&fx, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_TCP, 1001, 443 }),
		  PI_DROP, "denied");
	s = mon_read(&fx);
	if (ASSERT_EQ(s.cnt, 2, "deny's events")) {
		ASSERT_EQ(s.ev[0].kind, PI_DP_MON_VERDICT, "verdict first");
		ASSERT_EQ(s.ev[0].reason, PI_DP_DENY, "deny");
		ASSERT_EQ(s.ev[0].rule_id, 42, "deny rule");
		ASSERT_EQ(s.ev[1].kind, PI_DP_MON_DROP, "then the drop");
		ASSERT_EQ(s.ev[1].reason, PI_DP_DROP_POLICY, "policy");
		ASSERT_EQ(s.ev[1].rule_id, 42, "the drop's rule");
		ASSERT_TRUE(mon_tuple_is(&s.ev[1], AF_INET, "10.0.0.1",
					 "10.0.0.2", IPPROTO_TCP, 1001, 443),
			    "drop tuple");
	}

	/* drops only: the deny's rule still reaches the drop */
	mon_set(&fx, 1u << PI_DP_MON_DROP);
	ASSERT_EQ(a_sends(&fx, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_UDP, 7, 9 }),
		  PI_DROP, "B's ingress denies");
	s = mon_read(&fx);
	if (ASSERT_EQ(s.cnt, 1, "one drop")) {
		ASSERT_EQ(s.ev[0].reason, PI_DP_DROP_INGRESS_POLICY, "reason");
		ASSERT_EQ(s.ev[0].rule_id, 43, "B's rule");
		ASSERT_EQ(s.ev[0].pod_id, 1, "B's drop");
		ASSERT_EQ(s.ev[0].dir, PI_DP_DIR_INGRESS, "ingress");
		ASSERT_EQ(s.ev[0].hook, PI_DP_HOOK_POD_EGRESS,
			  "seen at A's egress hook");
	}
	fx_teardown(&fx);
}

/* probe --trace: a probe's packet (a port of the probe's range) at the
 * program's end, with the program's verdict, and each policy decision on
 * it with how it was made; other packets make no trace. */
UNIT_TEST(monitor_trace_follows_probe_packets)
{
	struct node_fx fx;
	struct mon_seen s;
	uint8_t pkt[PKT_MAX];
	int len;

	struct pi_dp_rule none = { .id = 90, .action = PI_DP_ALLOW,
				   .proto = 250 };

	if (!fx_setup(&fx))
		return;
	/* A tracked: a rule no packet here matches (a pod without rules is
	 * not tracked) */
	set_policy(&fx, 0, PI_DP_DIR_INGRESS, &none, 1, 200);
	mon_set(&fx, 1u << PI_DP_MON_TRACE);
	ASSERT_EQ(a_sends(&fx, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_TCP, 1000, 80 }),
		  PI_REDIRECT, "not a probe's");
	ASSERT_EQ(mon_read(&fx).cnt, 0, "no trace of other packets");
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_TCP, PI_DP_PROBE_PORT_LO + 7, 80 });
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, len, NULL),
		  PI_REDIRECT, "a probe's");
	s = mon_read(&fx);
	if (ASSERT_EQ(s.cnt, 3, "A's decision, B's, the hook's verdict")) {
		ASSERT_EQ(s.ev[0].kind, PI_DP_MON_TRACE, "kind");
		ASSERT_EQ(s.ev[0].hook, PI_DP_HOOK_NONE, "a decision");
		ASSERT_EQ(s.ev[0].aux, PI_DP_DECIDED_WALK, "by the rules");
		ASSERT_EQ(s.ev[0].pod_id, 0, "A's");
		ASSERT_EQ(s.ev[1].pod_id, 1, "B's");
		ASSERT_EQ(s.ev[1].dir, PI_DP_DIR_INGRESS, "B's ingress");
		ASSERT_EQ(s.ev[2].hook, PI_DP_HOOK_POD_EGRESS, "the hook");
		ASSERT_EQ(s.ev[2].reason, PI_REDIRECT, "its verdict");
		ASSERT_EQ(s.ev[2].sport, PI_DP_PROBE_PORT_LO + 7, "sport");
	}
	pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.1", "10.0.0.2",
		IPPROTO_TCP, PI_DP_PROBE_PORT_LO + 7, 80, 0x10 });
	ASSERT_EQ(run(fx.skel->progs.pod_egress, fx.if_a, pkt, len, NULL),
		  PI_REDIRECT, "the flow's next packet");
	s = mon_read(&fx);
	if (ASSERT_EQ(s.cnt, 3, "traced again"))
		ASSERT_EQ(s.ev[0].aux, PI_DP_DECIDED_TRACKED, "by its entry");
	fx_teardown(&fx);
}
