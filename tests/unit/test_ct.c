/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The connection tracker (bpf/lib/ct.h) under BPF_PROG_TEST_RUN: two pods
 * A (10.0.0.1, fd00::1) and B (10.0.0.2, fd00::2) on one node; A's packets
 * run through pod_egress at A's device, B's through pod_egress at B's,
 * and a packet between them meets the receiver's ingress policy on the
 * way (deliver_to_pod), as on a node.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "podinject_abi.h"
#include "node.skel.h"
#include "pkt.h"
#include "unit.h"
#include "fixture.h"
#include "state.h"

struct ct_fx {
	struct node_bpf *skel;
	int if_a, if_b;
};

static void add_pod(struct ct_fx *fx, uint32_t id, int ifindex,
		    const char *ip4, const char *ip6, uint8_t m)
{
	uint8_t mac[6] = { 0x02, m, 0, 0, 0, 1 }, hmac[6] = { 0x02, m, 0, 0, 0, 0xfe };

	fixture_add_pod(fx->skel->maps.pods, fx->skel->maps.endpoints, id,
			ifindex, ip4, ip6, mac, hmac);
}

static bool fx_setup(struct ct_fx *fx)
{
	memset(fx, 0, sizeof(*fx));
	if (!ASSERT_OK(fixture_netns(), "private netns"))
		return false;
	fx->if_a = fixture_dev("cta");
	fx->if_b = fixture_dev("ctb");
	if (!ASSERT_TRUE(fx->if_a > 1 && fx->if_b > 1, "fixture devices"))
		return false;
	fx->skel = node_bpf__open_and_load();
	if (!ASSERT_TRUE(fx->skel, "load node_bpf"))
		return false;
	add_pod(fx, 0, fx->if_a, "10.0.0.1", "fd00::1", 0xaa);
	add_pod(fx, 1, fx->if_b, "10.0.0.2", "fd00::2", 0xbb);
	return true;
}

static void fx_teardown(struct ct_fx *fx)
{
	node_bpf__destroy(fx->skel);
}

static int run(struct ct_fx *fx, int ifindex, uint8_t *pkt, int len)
{
	return fixture_run(bpf_program__fd(fx->skel->progs.pod_egress),
			   ifindex, pkt, len, NULL);
}

static struct pi_dp_pod_stats stats(struct ct_fx *fx, uint32_t id)
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

static uint64_t rule_packets(struct ct_fx *fx, uint32_t id)
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

/* As lib/policy.c publishes an edit: rules at `start`, a new revision. */
static void set_policy(struct ct_fx *fx, uint32_t id, uint32_t dir,
		       const struct pi_dp_rule *rules, uint32_t count,
		       uint32_t start)
{
	fixture_set_policy(fx->skel->obj, id, dir, rules, count, start);
}

/* A pod with no rules is not tracked (bpf/lib/ct.h, ct_pod_tracked): an
 * ingress rule no packet here matches (protocol 250) makes pod `id` one
 * that is, with the policy's outcome unchanged. */
static void track(struct ct_fx *fx, uint32_t id)
{
	struct pi_dp_rule none = { .id = 90 + id, .action = PI_DP_ALLOW,
				   .proto = 250 };

	set_policy(fx, id, PI_DP_DIR_INGRESS, &none, 1, PI_MAX_RULES - 1 - id);
}

static struct pi_dp_rule deny_proto(uint32_t id, uint8_t proto)
{
	return (struct pi_dp_rule){ .id = id, .action = PI_DP_DENY, .proto = proto };
}

/* The ICMP header of a packet from pkt_build: type and echo identifier. */
static void icmp_set(uint8_t *pkt, int family, uint8_t type, uint16_t id)
{
	uint8_t *l4 = pkt + 14 + (family == AF_INET ? 20 : 40);

	l4[0] = type;
	l4[4] = id >> 8;
	l4[5] = id & 0xff;
}

static int echo(uint8_t *pkt, int family, const char *src, const char *dst,
		bool reply, uint16_t id)
{
	int len = pkt_build(pkt, &(struct pkt_spec){ family, src, dst,
		IPPROTO_ICMP });

	icmp_set(pkt, family, family == AF_INET ? (reply ? 0 : 8) :
		 (reply ? 129 : 128), id);
	return len;
}

/* A TCP segment with flags `fl` from the pod at ifindex `ifx`. */
static int tcp_seg(struct ct_fx *fx, int ifx, int family, const char *s,
		   const char *d, uint16_t sp, uint16_t dp, uint8_t fl)
{
	uint8_t pkt[PKT_MAX];
	int len = pkt_build(pkt, &(struct pkt_spec){ family, s, d, IPPROTO_TCP,
						     sp, dp, fl });

	return run(fx, ifx, pkt, len);
}

static bool ct_entry(struct ct_fx *fx, uint32_t pod_id, int family,
		     uint8_t proto, const char *pod, uint16_t pod_port,
		     const char *peer, uint16_t peer_port,
		     struct pi_ct_entry *e)
{
	struct pi_ct_key k = { .pod_id = pod_id, .family = family,
			       .proto = proto, .pod_port = pod_port,
			       .peer_port = peer_port };

	inet_pton(family, pod, k.pod.a);
	inet_pton(family, peer, k.peer.a);
	return !bpf_map__lookup_elem(fx->skel->maps.ct, &k, sizeof(k), e,
				     sizeof(*e), 0);
}

static int ct_count(struct ct_fx *fx)
{
	struct pi_ct_key k, next;
	int n = 0, fd = bpf_map__fd(fx->skel->maps.ct);
	void *prev = NULL;

	while (!bpf_map_get_next_key(fd, prev, &next)) {
		k = next;
		prev = &k;
		n++;
	}
	return n;
}

/* The first case: A denies ICMP on egress; B's pings are
 * answered, A's own pings are not, in both families. */
UNIT_TEST(ct_egress_deny_icmp_answers_pings)
{
	struct pi_dp_rule deny = deny_proto(7, IPPROTO_ICMP);
	static const struct { int family; const char *a, *b; } fam[] = {
		{ AF_INET, "10.0.0.1", "10.0.0.2" },
		{ AF_INET6, "fd00::1", "fd00::2" },
	};
	struct pi_ct_entry e;
	uint8_t pkt[PKT_MAX];
	struct ct_fx fx;
	int len;

	if (!fx_setup(&fx))
		return;
	set_policy(&fx, 0, PI_DP_DIR_EGRESS, &deny, 1, 0);
	for (int f = 0; f < 2; f++) {
		int family = fam[f].family;

		len = echo(pkt, family, fam[f].b, fam[f].a, false, 0x1234);
		ASSERT_EQ(run(&fx, fx.if_b, pkt, len), PI_REDIRECT,
			  "B's echo request reaches A");
		len = echo(pkt, family, fam[f].a, fam[f].b, true, 0x1234);
		ASSERT_EQ(run(&fx, fx.if_a, pkt, len), PI_REDIRECT,
			  "A's echo reply passes its egress deny");
		if (ASSERT_TRUE(ct_entry(&fx, 0, family, family == AF_INET ?
					 IPPROTO_ICMP : IPPROTO_ICMPV6,
					 fam[f].a, 0x1234, fam[f].b, 0, &e),
				"A's entry of B's ping")) {
			ASSERT_EQ(e.dir, PI_DP_DIR_INGRESS, "opened from B");
			ASSERT_EQ(e.packets[PI_DP_DIR_EGRESS], 1, "one reply");
			ASSERT_TRUE(e.flags & PI_DP_CT_REPLIED, "replied");
		}
		len = echo(pkt, family, fam[f].a, fam[f].b, false, 0x4321);
		ASSERT_EQ(run(&fx, fx.if_a, pkt, len), PI_DROP,
			  "A's own ping is denied");
		ASSERT_EQ(run(&fx, fx.if_a, pkt, len), PI_DROP,
			  "and again: a denied flow has no entry");
		ASSERT_TRUE(!ct_entry(&fx, 0, family, family == AF_INET ?
				      IPPROTO_ICMP : IPPROTO_ICMPV6,
				      fam[f].a, 0x4321, fam[f].b, 0, &e),
			    "no entry for the denied ping");
	}
	ASSERT_EQ(stats(&fx, 0).drops[PI_DP_DROP_POLICY], 4, "A's policy drops");
	ASSERT_EQ(rule_packets(&fx, 7), 4, "counted against the deny rule");
	fx_teardown(&fx);
}

/* Replies to A's TCP and UDP flows pass A's `ingress deny`; B's own new
 * flows to A do not. The TCP entry moves from opening to established. */
UNIT_TEST(ct_replies_pass_ingress_deny)
{
	struct pi_dp_rule deny = { .id = 9, .action = PI_DP_DENY };
	struct pi_ct_entry e;
	uint8_t pkt[PKT_MAX];
	struct ct_fx fx;
	int len;

	if (!fx_setup(&fx))
		return;
	set_policy(&fx, 0, PI_DP_DIR_INGRESS, &deny, 1, 0);
	for (int f = 0; f < 2; f++) {
		int family = f ? AF_INET6 : AF_INET;
		const char *a = f ? "fd00::1" : "10.0.0.1";
		const char *b = f ? "fd00::2" : "10.0.0.2";

		len = pkt_build(pkt, &(struct pkt_spec){ family, a, b,
			IPPROTO_TCP, 40000, 80, 0x02 });
		ASSERT_EQ(run(&fx, fx.if_a, pkt, len), PI_REDIRECT, "A's SYN");
		ASSERT_TRUE(ct_entry(&fx, 0, family, IPPROTO_TCP, a, 40000, b,
				     80, &e) && e.state == PI_DP_CT_OPENING,
			    "A's entry opening");
		len = pkt_build(pkt, &(struct pkt_spec){ family, b, a,
			IPPROTO_TCP, 80, 40000, 0x12 });
		ASSERT_EQ(run(&fx, fx.if_b, pkt, len), PI_REDIRECT,
			  "B's SYN-ACK passes A's ingress deny");
		ASSERT_TRUE(ct_entry(&fx, 0, family, IPPROTO_TCP, a, 40000, b,
				     80, &e) && e.state == PI_DP_CT_ESTABLISHED,
			    "A's entry established");
		len = pkt_build(pkt, &(struct pkt_spec){ family, a, b,
			IPPROTO_UDP, 5000, 53 });
		ASSERT_EQ(run(&fx, fx.if_a, pkt, len), PI_REDIRECT, "A's query");
		len = pkt_build(pkt, &(struct pkt_spec){ family, b, a,
			IPPROTO_UDP, 53, 5000 });
		ASSERT_EQ(run(&fx, fx.if_b, pkt, len), PI_REDIRECT,
			  "B's answer passes A's ingress deny");
		len = pkt_build(pkt, &(struct pkt_spec){ family, b, a,
			IPPROTO_TCP, 40001, 22, 0x02 });
		ASSERT_EQ(run(&fx, fx.if_b, pkt, len), PI_DROP,
			  "B's own connection to A is denied");
		len = pkt_build(pkt, &(struct pkt_spec){ family, b, a,
			IPPROTO_UDP, 53, 5001 });
		ASSERT_EQ(run(&fx, fx.if_b, pkt, len), PI_DROP,
			  "a datagram to a port A sent nothing from");
	}
	ASSERT_EQ(stats(&fx, 0).drops[PI_DP_DROP_INGRESS_POLICY], 4,
		  "A's ingress drops");
	ASSERT_EQ(rule_packets(&fx, 9), 4, "counted against the deny rule");
	fx_teardown(&fx);
}

/* A deny added while a flow is open stops it at its next packet, in
 * either direction, and for good: the entry stays, cut, and drops the
 * flow's packets both ways (before 2026-12-06 it went, and the far end's
 * next packet opened a flow of its own by A's ingress policy, through
 * which A's packets passed as replies). A rule change that still allows
 * it keeps the flow; one that allows it again lets it go on. */
UNIT_TEST(ct_policy_change_rechecks_open_flows)
{
	struct pi_dp_rule allow = { .id = 3, .action = PI_DP_ALLOW,
				 .proto = IPPROTO_UDP };
	struct pi_dp_rule deny = deny_proto(4, IPPROTO_UDP);
	struct pi_ct_entry e;
	uint8_t out[PKT_MAX], in[PKT_MAX];
	struct ct_fx fx;
	int lo, li;

	if (!fx_setup(&fx))
		return;
	track(&fx, 0);
	lo = pkt_build(out, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_UDP, 5000, 53 });
	li = pkt_build(in, &(struct pkt_spec){ AF_INET, "10.0.0.2",
		"10.0.0.1", IPPROTO_UDP, 53, 5000 });
	ASSERT_EQ(run(&fx, fx.if_a, out, lo), PI_REDIRECT, "open");
	ASSERT_EQ(run(&fx, fx.if_b, in, li), PI_REDIRECT, "answered");
	/* an edit that still allows the flow */
	set_policy(&fx, 0, PI_DP_DIR_EGRESS, &allow, 1, 0);
	ASSERT_EQ(run(&fx, fx.if_b, in, li), PI_REDIRECT,
		  "still allowed after the edit (reply first)");
	ASSERT_TRUE(ct_entry(&fx, 0, AF_INET, IPPROTO_UDP, "10.0.0.1", 5000,
			     "10.0.0.2", 53, &e) && e.rule_id == 3,
		    "entry re-decided by the allow rule");
	ASSERT_EQ(run(&fx, fx.if_a, out, lo), PI_REDIRECT, "still open");
	ASSERT_EQ(rule_packets(&fx, 3), 1,
		  "the allow rule counts the opener's direction");
	/* now a deny: the reply is the first to meet it */
	set_policy(&fx, 0, PI_DP_DIR_EGRESS, &deny, 1, 1);
	ASSERT_EQ(run(&fx, fx.if_b, in, li), PI_DROP,
		  "the reply of a flow the new policy denies");
	ASSERT_TRUE(ct_entry(&fx, 0, AF_INET, IPPROTO_UDP, "10.0.0.1", 5000,
			     "10.0.0.2", 53, &e) && (e.flags & PI_DP_CT_CUT) &&
		    e.rule_id == 4 && e.dir == PI_DP_DIR_EGRESS,
		    "entry kept, cut by the deny, still A's");
	ASSERT_EQ(run(&fx, fx.if_a, out, lo), PI_DROP, "and the flow itself");
	ASSERT_EQ(run(&fx, fx.if_b, in, li), PI_DROP,
		  "the far end's next answer opens no flow of its own");
	ASSERT_EQ(run(&fx, fx.if_a, out, lo), PI_DROP,
		  "so the flow stays stopped");
	ASSERT_EQ(rule_packets(&fx, 4), 4, "each counted against the deny");
	/* all by A's egress policy, which decided them: the replies' drops
	 * are egress policy drops too, not ones of A's ingress (which has
	 * no rule that could explain them) */
	ASSERT_EQ(stats(&fx, 0).drops[PI_DP_DROP_POLICY], 4,
		  "four egress policy drops");
	ASSERT_EQ(stats(&fx, 0).drops[PI_DP_DROP_INGRESS_POLICY], 0,
		  "no ingress policy drop");
	/* the deny taken back: the cut flow is decided again, and goes on */
	set_policy(&fx, 0, PI_DP_DIR_EGRESS, &allow, 1, 0);
	ASSERT_EQ(run(&fx, fx.if_b, in, li), PI_REDIRECT,
		  "allowed again: the reply passes");
	ASSERT_TRUE(ct_entry(&fx, 0, AF_INET, IPPROTO_UDP, "10.0.0.1", 5000,
			     "10.0.0.2", 53, &e) && !(e.flags & PI_DP_CT_CUT) &&
		    e.rule_id == 3 && e.dir == PI_DP_DIR_EGRESS,
		    "entry no longer cut, by the allow rule, still A's");
	ASSERT_EQ(run(&fx, fx.if_a, out, lo), PI_REDIRECT, "and the flow");
	fx_teardown(&fx);
}

/* A's UDP flow 10.0.0.1:5000 -> 10.0.0.2:53 under an ingress deny on A
 * (rule `rule_id`): its key in A's name, the query and the answer built,
 * the query sent (the flow opened). False when the fixture is not there
 * or the query did not go. */
struct udp_flow {
	struct pi_ct_key k;
	uint8_t out[PKT_MAX], in[PKT_MAX];
	int lo, li;
};

static bool udp_flow_open(struct ct_fx *fx, struct udp_flow *f,
			  uint32_t rule_id)
{
	struct pi_dp_rule deny = { .id = rule_id, .action = PI_DP_DENY };

	memset(f, 0, sizeof(*f));
	f->k = (struct pi_ct_key){ .pod_id = 0, .family = AF_INET,
				   .proto = IPPROTO_UDP, .pod_port = 5000,
				   .peer_port = 53 };
	if (!fx_setup(fx))
		return false;
	inet_pton(AF_INET, "10.0.0.1", f->k.pod.a);
	inet_pton(AF_INET, "10.0.0.2", f->k.peer.a);
	set_policy(fx, 0, PI_DP_DIR_INGRESS, &deny, 1, 0);
	f->lo = pkt_build(f->out, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_UDP, 5000, 53 });
	f->li = pkt_build(f->in, &(struct pkt_spec){ AF_INET, "10.0.0.2",
		"10.0.0.1", IPPROTO_UDP, 53, 5000 });
	return ASSERT_EQ(run(fx, fx->if_a, f->out, f->lo), PI_REDIRECT, "open");
}

/* An entry past its idle timeout is no flow: the reply it would have let
 * through meets the ingress deny, and the entry is freed. */
UNIT_TEST(ct_expired_entry_is_freed)
{
	struct pi_ct_entry e;
	struct udp_flow f;
	struct ct_fx fx;
	struct pi_ct_key k;

	if (!udp_flow_open(&fx, &f, 5)) {
		fx_teardown(&fx);
		return;
	}
	k = f.k;
	ASSERT_EQ(run(&fx, fx.if_b, f.in, f.li), PI_REDIRECT, "fresh: answered");
	if (!ASSERT_OK(bpf_map__lookup_elem(fx.skel->maps.ct, &k, sizeof(k),
					    &e, sizeof(e), 0), "entry"))
		goto out;
	/* 61 s idle: past the UDP default of 60 s */
	e.last_ns -= 61ull * 1000000000ull;
	bpf_map__update_elem(fx.skel->maps.ct, &k, sizeof(k), &e, sizeof(e), 0);
	ASSERT_EQ(ct_count(&fx), 1, "A's entry (B has no rules: untracked)");
	ASSERT_EQ(run(&fx, fx.if_b, f.in, f.li), PI_DROP,
		  "idle past its timeout: the answer is a new flow, denied");
	ASSERT_TRUE(bpf_map__lookup_elem(fx.skel->maps.ct, &k, sizeof(k), &e,
					 sizeof(e), 0) == -ENOENT,
		    "A's expired entry freed");
	ASSERT_EQ(ct_count(&fx), 0, "none left");
out:
	fx_teardown(&fx);
}

/* The idle time both the tracker and `ct list` take: on a machine up for
 * less than an entry's timeout (a lab guest 10 s after boot), an entry
 * aged by 61 s carries a stamp "before boot", wrapped below zero; it is
 * 61 s idle all the same, and a stamp ahead of the clock is idle 0. */
UNIT_TEST(ct_idle_time_across_a_young_clock)
{
	const uint64_t s = 1000000000ull, now = 10 * s;

	ASSERT_EQ(pi_ct_idle_ns(now, now - 61 * s), 61 * s,
		  "stamped 61 s before a clock at 10 s");
	ASSERT_EQ(pi_ct_idle_ns(now, now - s), s, "a second ago");
	ASSERT_EQ(pi_ct_idle_ns(now, now), 0, "just now");
	ASSERT_EQ(pi_ct_idle_ns(now, now + s), 0, "a second ahead");
	ASSERT_EQ(pi_ct_idle_ns(~0ull - s, 3 * s), 0,
		  "far ahead, across the wrap");
}

/* The tracker stamps entries with the coarse clock, which lags the fine
 * one an earlier build stamped with (and the other CPUs' stamps) by up to
 * a tick: an entry stamped ahead of the clock is a flow seen just now,
 * not one idle for 2^64 ns, so the reply it lets through passes across an
 * upgrade. */
UNIT_TEST(ct_entry_stamped_ahead_is_not_idle)
{
	struct pi_ct_entry e;
	struct udp_flow f;
	struct ct_fx fx;

	if (!udp_flow_open(&fx, &f, 7) ||
	    !ASSERT_OK(bpf_map__lookup_elem(fx.skel->maps.ct, &f.k,
					    sizeof(f.k), &e, sizeof(e), 0),
		       "entry"))
		goto out;
	/* a second ahead: more than any tick */
	e.last_ns += 1000000000ull;
	bpf_map__update_elem(fx.skel->maps.ct, &f.k, sizeof(f.k), &e,
			     sizeof(e), 0);
	ASSERT_EQ(run(&fx, fx.if_b, f.in, f.li), PI_REDIRECT,
		  "stamped ahead of the clock: the answer passes as the flow's");
	ASSERT_OK(bpf_map__lookup_elem(fx.skel->maps.ct, &f.k, sizeof(f.k),
				       &e, sizeof(e), 0), "the entry stays");
out:
	fx_teardown(&fx);
}

/* ICMP errors about a tracked flow pass with it; an error about no flow
 * of the pod meets the policy. */
UNIT_TEST(ct_icmp_error_related)
{
	struct pi_dp_rule deny = { .id = 6, .action = PI_DP_DENY };
	uint8_t pkt[PKT_MAX], quoted[PKT_MAX];
	struct ct_fx fx;
	int len, ql;

	if (!fx_setup(&fx))
		return;
	set_policy(&fx, 0, PI_DP_DIR_INGRESS, &deny, 1, 0);
	for (int f = 0; f < 2; f++) {
		int family = f ? AF_INET6 : AF_INET, ip = f ? 40 : 20;
		const char *a = f ? "fd00::1" : "10.0.0.1";
		const char *b = f ? "fd00::2" : "10.0.0.2";

		for (int tracked = 1; tracked >= 0; tracked--) {
			uint16_t sport = tracked ? 6000 : 6001;

			ql = pkt_build(quoted, &(struct pkt_spec){ family, a, b,
				IPPROTO_UDP, sport, 9 });
			if (tracked)
				ASSERT_EQ(run(&fx, fx.if_a, quoted, ql),
					  PI_REDIRECT, "A's datagram");
			/* B's port unreachable quoting it */
			len = pkt_build(pkt, &(struct pkt_spec){ family, b, a,
				IPPROTO_ICMP, .payload = ip + 8 });
			icmp_set(pkt, family, f ? 1 : 3, 0);
			pkt[14 + ip + 1] = f ? 4 : 3;	/* port unreachable */
			memcpy(pkt + 14 + ip + 8, quoted + 14, ip + 8);
			ASSERT_EQ(run(&fx, fx.if_b, pkt, len),
				  tracked ? PI_REDIRECT : PI_DROP,
				  tracked ? "error about A's flow passes" :
					    "error about no flow is denied");
		}
	}
	ASSERT_EQ(rule_packets(&fx, 6), 2, "untracked errors counted");
	fx_teardown(&fx);
}

/* An ICMP error is an answer only sent back to the sender of the packet it
 * quotes, and only while the quoted flow holds under the current policy:
 * B, whose egress denies ICMP, may answer A's datagram with a port
 * unreachable, but not send that error (and what follows its quote) to
 * C; and after a new ingress policy, not before A's next datagram has met
 * it. */
UNIT_TEST(ct_icmp_error_elsewhere_not_related)
{
	/* ICMPv6 is matched as ICMP */
	struct pi_dp_rule deny = deny_proto(11, IPPROTO_ICMP);
	uint8_t pkt[PKT_MAX], quoted[PKT_MAX];
	struct ct_fx fx;
	int len, ql;

	if (!fx_setup(&fx))
		return;
	set_policy(&fx, 1, PI_DP_DIR_EGRESS, &deny, 1, 0);
	track(&fx, 1);
	for (int f = 0; f < 2; f++) {
		int family = f ? AF_INET6 : AF_INET, ip = f ? 40 : 20;
		const char *a = f ? "fd00::1" : "10.0.0.1";
		const char *b = f ? "fd00::2" : "10.0.0.2";
		const char *c = f ? "fd00::9" : "10.0.0.9";

#define ERR_TO(dst) (len = pkt_build(pkt, &(struct pkt_spec){ family, b, dst, \
	IPPROTO_ICMP, .payload = ip + 8 + 64 }), \
	icmp_set(pkt, family, f ? 1 : 3, 0), pkt[14 + ip + 1] = f ? 4 : 3, \
	memcpy(pkt + 14 + ip + 8, quoted + 14, ip + 8), \
	run(&fx, fx.if_b, pkt, len))
		ql = pkt_build(quoted, &(struct pkt_spec){ family, a, b,
			IPPROTO_UDP, 7000, 9 });
		ASSERT_EQ(run(&fx, fx.if_a, quoted, ql), PI_REDIRECT,
			  "A's datagram to B");
		ASSERT_EQ(ERR_TO(a), PI_REDIRECT,
			  "B's port unreachable back to A passes with A's flow");
		ASSERT_EQ(ERR_TO(c), PI_DROP,
			  "the same error sent to C is no answer: B's egress denies it");
		/* a new revision of B's ingress policy, which let A's flow in */
		track(&fx, 1);
		ASSERT_EQ(ERR_TO(a), PI_DROP,
			  "an error about a flow the new policy has not seen: the rules decide");
		ASSERT_EQ(run(&fx, fx.if_a, quoted, ql), PI_REDIRECT,
			  "A's next datagram meets the new policy");
		ASSERT_EQ(ERR_TO(a), PI_REDIRECT,
			  "then B's error passes with the flow again");
#undef ERR_TO
	}
	ASSERT_EQ(rule_packets(&fx, 11), 4, "the errors denied, counted");
	fx_teardown(&fx);
}

/* TCP: FIN from both ends closes; a new SYN on the closed flow's ports is
 * a new flow, decided by the policy again. */
UNIT_TEST(ct_tcp_close_and_reopen)
{
	struct pi_dp_rule deny = { .id = 8, .action = PI_DP_DENY,
				.proto = IPPROTO_TCP };
	struct pi_ct_entry e;
	struct ct_fx fx;

#define SEG(ifx, s, d, sp, dp, fl) tcp_seg(&fx, ifx, AF_INET, s, d, sp, dp, fl)
	if (!fx_setup(&fx))
		return;
	track(&fx, 0);
	ASSERT_EQ(SEG(fx.if_a, "10.0.0.1", "10.0.0.2", 40000, 80, 0x02),
		  PI_REDIRECT, "SYN");
	ASSERT_EQ(SEG(fx.if_b, "10.0.0.2", "10.0.0.1", 80, 40000, 0x12),
		  PI_REDIRECT, "SYN-ACK");
	ASSERT_EQ(SEG(fx.if_a, "10.0.0.1", "10.0.0.2", 40000, 80, 0x11),
		  PI_REDIRECT, "FIN from A");
	ASSERT_TRUE(ct_entry(&fx, 0, AF_INET, IPPROTO_TCP, "10.0.0.1", 40000,
			     "10.0.0.2", 80, &e) &&
		    e.state == PI_DP_CT_ESTABLISHED && (e.flags & PI_DP_CT_FIN_POD),
		    "half closed");
	ASSERT_EQ(SEG(fx.if_b, "10.0.0.2", "10.0.0.1", 80, 40000, 0x11),
		  PI_REDIRECT, "FIN from B");
	ASSERT_TRUE(ct_entry(&fx, 0, AF_INET, IPPROTO_TCP, "10.0.0.1", 40000,
			     "10.0.0.2", 80, &e) && e.state == PI_DP_CT_CLOSING,
		    "closing");
	/* A's egress now denies TCP, without a new revision of the flow's
	 * side being needed: the new SYN is a new flow */
	set_policy(&fx, 0, PI_DP_DIR_EGRESS, &deny, 1, 0);
	ASSERT_EQ(SEG(fx.if_a, "10.0.0.1", "10.0.0.2", 40000, 80, 0x02),
		  PI_DROP, "a new SYN on the closed ports is decided anew");
	ASSERT_EQ(rule_packets(&fx, 8), 1, "by the deny rule");
#undef SEG
	fx_teardown(&fx);
}

/* The case a user meets: A downloads from B over TCP, and a deny of
 * A's egress to B is added. B's segments go on coming (its data, then
 * its retransmissions); none may open a flow by A's ingress policy that
 * lets A's ACKs out as replies (before 2026-12-06 the second did, and
 * the download went on). B opening a new connection to A is still B's
 * to do, by A's ingress policy. */
UNIT_TEST(ct_cut_tcp_flow_stays_cut)
{
	struct pi_dp_rule deny = { .id = 5, .action = PI_DP_DENY,
				.proto = IPPROTO_TCP };
	struct pi_ct_entry e;
	struct ct_fx fx;

#define SEG(ifx, s, d, sp, dp, fl) tcp_seg(&fx, ifx, AF_INET6, s, d, sp, dp, fl)
	if (!fx_setup(&fx))
		return;
	track(&fx, 0);
	ASSERT_EQ(SEG(fx.if_a, "fd00::1", "fd00::2", 40000, 443, 0x02),
		  PI_REDIRECT, "A's SYN");
	ASSERT_EQ(SEG(fx.if_b, "fd00::2", "fd00::1", 443, 40000, 0x12),
		  PI_REDIRECT, "B's SYN-ACK");
	ASSERT_EQ(SEG(fx.if_a, "fd00::1", "fd00::2", 40000, 443, 0x10),
		  PI_REDIRECT, "A's ACK");
	ASSERT_EQ(SEG(fx.if_b, "fd00::2", "fd00::1", 443, 40000, 0x18),
		  PI_REDIRECT, "B's data");
	set_policy(&fx, 0, PI_DP_DIR_EGRESS, &deny, 1, 0);
	ASSERT_EQ(SEG(fx.if_b, "fd00::2", "fd00::1", 443, 40000, 0x18),
		  PI_DROP, "B's next data meets A's new deny");
	for (int i = 0; i < 3; i++)
		ASSERT_EQ(SEG(fx.if_b, "fd00::2", "fd00::1", 443, 40000, 0x18),
			  PI_DROP, "B's retransmission opens no flow");
	ASSERT_EQ(SEG(fx.if_a, "fd00::1", "fd00::2", 40000, 443, 0x10),
		  PI_DROP, "A's ACK does not pass as a reply");
	ASSERT_TRUE(ct_entry(&fx, 0, AF_INET6, IPPROTO_TCP, "fd00::1", 40000,
			     "fd00::2", 443, &e) && (e.flags & PI_DP_CT_CUT) &&
		    e.dir == PI_DP_DIR_EGRESS && e.rule_id == 5 &&
		    e.packets[PI_DP_DIR_INGRESS] == 2,
		    "one entry, A's, cut, its dropped packets not counted as passed");
	ASSERT_EQ(ct_count(&fx), 1, "no other entry");
	ASSERT_EQ(rule_packets(&fx, 5), 5, "the deny counts each");
	ASSERT_EQ(SEG(fx.if_a, "fd00::1", "fd00::2", 40000, 443, 0x02),
		  PI_DROP, "A's new SYN on the ports: its egress denies it");
	ASSERT_TRUE(ct_entry(&fx, 0, AF_INET6, IPPROTO_TCP, "fd00::1", 40000,
			     "fd00::2", 443, &e) && (e.flags & PI_DP_CT_CUT),
		    "and the flow stays cut");
	ASSERT_EQ(SEG(fx.if_b, "fd00::2", "fd00::1", 443, 40000, 0x02),
		  PI_REDIRECT, "B's new connection: A's ingress allows it");
	ASSERT_TRUE(ct_entry(&fx, 0, AF_INET6, IPPROTO_TCP, "fd00::1", 40000,
			     "fd00::2", 443, &e) && !(e.flags & PI_DP_CT_CUT) &&
		    e.dir == PI_DP_DIR_INGRESS && e.state == PI_DP_CT_OPENING,
		    "a new flow, B's");
#undef SEG
	fx_teardown(&fx);
}

/* A peer's packet that A's ingress allows may open a flow (a connection
 * older than the tracking is picked up mid-stream), but not one through
 * which A's own new connection or ping would pass as a reply: a forged
 * ACK, or an echo reply nobody asked for, from a peer A's egress denies
 * (before 2026-12-06 both opened the way). */
UNIT_TEST(ct_forged_answers_open_no_way_out)
{
	struct pi_dp_rule deny = { .id = 6, .action = PI_DP_DENY };
	struct pi_ct_entry e;
	uint8_t pkt[PKT_MAX];
	struct ct_fx fx;
	int len;

	if (!fx_setup(&fx))
		return;
	set_policy(&fx, 0, PI_DP_DIR_EGRESS, &deny, 1, 0);
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.2",
		"10.0.0.1", IPPROTO_TCP, 80, 41000, 0x10 });
	ASSERT_EQ(run(&fx, fx.if_b, pkt, len), PI_REDIRECT,
		  "B's bare ACK: A's ingress allows it");
	ASSERT_TRUE(ct_entry(&fx, 0, AF_INET, IPPROTO_TCP, "10.0.0.1", 41000,
			     "10.0.0.2", 80, &e) && e.dir == PI_DP_DIR_INGRESS,
		    "a flow picked up mid-stream, B's");
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_TCP, 41000, 80, 0x02 });
	ASSERT_EQ(run(&fx, fx.if_a, pkt, len), PI_DROP,
		  "A's SYN on its ports is A's new connection: denied");
	for (int f = 0; f < 2; f++) {
		int family = f ? AF_INET6 : AF_INET;
		const char *a = f ? "fd00::1" : "10.0.0.1";
		const char *b = f ? "fd00::2" : "10.0.0.2";
		uint8_t proto = f ? IPPROTO_ICMPV6 : IPPROTO_ICMP;

		len = echo(pkt, family, b, a, true, 0x777);
		ASSERT_EQ(run(&fx, fx.if_b, pkt, len), PI_REDIRECT,
			  "an echo reply A did not ask for: A's ingress allows it");
		ASSERT_TRUE(!ct_entry(&fx, 0, family, proto, a, 0x777, b, 0, &e),
			    "it opens no flow");
		len = echo(pkt, family, a, b, false, 0x777);
		ASSERT_EQ(run(&fx, fx.if_a, pkt, len), PI_DROP,
			  "A's ping with its identifier: denied");
	}
	ASSERT_EQ(rule_packets(&fx, 6), 3, "the deny counts each");
	fx_teardown(&fx);
}

/* `allow proto icmp, deny` lets each family's ping out, and nothing else:
 * an IPv4 datagram of protocol 58 and an IPv6 one of next header 1 are
 * no ICMP of their family (before 2026-12-06 both were matched as ICMP,
 * by the classifier and the walk alike, and passed). */
UNIT_TEST(rule_icmp_is_each_familys_own)
{
	struct pi_dp_rule rules[2] = {
		{ .id = 21, .action = PI_DP_ALLOW, .proto = IPPROTO_ICMP },
		{ .id = 22, .action = PI_DP_DENY },
	};
	uint8_t pkt[PKT_MAX];
	struct ct_fx fx;
	int len;

	if (!fx_setup(&fx))
		return;
	set_policy(&fx, 0, PI_DP_DIR_EGRESS, rules, 2, 0);
	len = echo(pkt, AF_INET, "10.0.0.1", "10.0.0.2", false, 0x51);
	ASSERT_EQ(run(&fx, fx.if_a, pkt, len), PI_REDIRECT, "IPv4 ping");
	len = echo(pkt, AF_INET6, "fd00::1", "fd00::2", false, 0x52);
	ASSERT_EQ(run(&fx, fx.if_a, pkt, len), PI_REDIRECT, "IPv6 ping");
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", 58 });
	ASSERT_EQ(run(&fx, fx.if_a, pkt, len), PI_DROP,
		  "IPv4 protocol 58: not ICMP, denied");
	len = echo(pkt, AF_INET6, "fd00::1", "fd00::2", false, 0x53);
	pkt[14 + 6] = IPPROTO_ICMP;
	ASSERT_EQ(run(&fx, fx.if_a, pkt, len), PI_DROP,
		  "IPv6 next header 1: not ICMP, denied");
	ASSERT_EQ(rule_packets(&fx, 21), 2, "the allow took the two pings");
	ASSERT_EQ(rule_packets(&fx, 22), 2, "the deny took the other two");
	fx_teardown(&fx);
}

/* A pod without rules has nothing to decide: its flows are not tracked.
 * Its first rule, in either direction, turns tracking on. */
UNIT_TEST(ct_pod_without_rules_untracked)
{
	uint8_t out[PKT_MAX], in[PKT_MAX];
	struct pi_ct_entry e;
	struct ct_fx fx;
	int lo, li;

	if (!fx_setup(&fx))
		return;
	lo = pkt_build(out, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_UDP, 5000, 53 });
	li = pkt_build(in, &(struct pkt_spec){ AF_INET, "10.0.0.2",
		"10.0.0.1", IPPROTO_UDP, 53, 5000 });
	ASSERT_EQ(run(&fx, fx.if_a, out, lo), PI_REDIRECT, "A sends");
	ASSERT_EQ(run(&fx, fx.if_b, in, li), PI_REDIRECT, "B answers");
	ASSERT_EQ(ct_count(&fx), 0, "no entry: neither pod has a rule");
	track(&fx, 0);
	ASSERT_EQ(run(&fx, fx.if_a, out, lo), PI_REDIRECT, "A sends again");
	ASSERT_TRUE(ct_entry(&fx, 0, AF_INET, IPPROTO_UDP, "10.0.0.1", 5000,
			     "10.0.0.2", 53, &e) && e.dir == PI_DP_DIR_EGRESS,
		    "A has a rule: A's flow is tracked");
	ASSERT_EQ(ct_count(&fx), 1, "B still untracked");
	fx_teardown(&fx);
}

/* What the library does at a pod's first rule (lib/ct.c, ct_seed_pod):
 * the pod's open connections entered, opened in the direction its sockets
 * say, at a revision no policy has. Their next packet has them decided by
 * the policy of the direction that opened them: the answer to A's query
 * passes A's new ingress deny, A's answer on a connection B opened passes
 * A's new egress deny, and a flow the new policy denies in its opener's
 * direction is cut. A connection not entered is cut by its answer. */
UNIT_TEST(ct_seeded_flows_decided_by_their_opener)
{
	struct pi_dp_rule deny_in = { .id = 11, .action = PI_DP_DENY };
	struct pi_dp_rule deny_udp_out = deny_proto(12, IPPROTO_UDP);
	uint8_t pkt[PKT_MAX];
	struct pi_ct_entry e;
	struct pi_ct_key k;
	struct ct_fx fx;
	int ct_fd, refs_fd, len;

#define UDP(ifx, s, d, sp, dp) (len = pkt_build(pkt, &(struct pkt_spec){ \
	AF_INET, s, d, IPPROTO_UDP, sp, dp }), run(&fx, ifx, pkt, len))
#define TCP(ifx, s, d, sp, dp, fl) (len = pkt_build(pkt, &(struct pkt_spec){ \
	AF_INET, s, d, IPPROTO_TCP, sp, dp, fl }), run(&fx, ifx, pkt, len))
	if (!fx_setup(&fx))
		return;
	ct_fd = bpf_map__fd(fx.skel->maps.ct);
	refs_fd = bpf_map__fd(fx.skel->maps.policy_refs);
	/* opened while A had no rules: untracked */
	ASSERT_EQ(UDP(fx.if_a, "10.0.0.1", "10.0.0.2", 5000, 53), PI_REDIRECT,
		  "A's query (entered below)");
	ASSERT_EQ(UDP(fx.if_a, "10.0.0.1", "10.0.0.2", 5001, 53), PI_REDIRECT,
		  "A's other query (not entered)");
	ASSERT_EQ(TCP(fx.if_b, "10.0.0.2", "10.0.0.1", 40000, 80, 0x02),
		  PI_REDIRECT, "B connects to A");
	ASSERT_EQ(ct_count(&fx), 0, "nothing tracked");
	k = (struct pi_ct_key){ .pod_id = 0, .family = AF_INET,
				.proto = IPPROTO_UDP, .pod_port = 5000,
				.peer_port = 53 };
	inet_pton(AF_INET, "10.0.0.1", k.pod.a);
	inet_pton(AF_INET, "10.0.0.2", k.peer.a);
	ASSERT_OK(ct_seed_entry(ct_fd, refs_fd, &k, PI_DP_DIR_EGRESS,
				PI_DP_CT_ESTABLISHED), "A's query entered");
	k.proto = IPPROTO_TCP;
	k.pod_port = 80;
	k.peer_port = 40000;
	ASSERT_OK(ct_seed_entry(ct_fd, refs_fd, &k, PI_DP_DIR_INGRESS,
				PI_DP_CT_OPENING), "B's connection entered");
	ASSERT_OK(ct_seed_entry(ct_fd, refs_fd, &k, PI_DP_DIR_EGRESS,
				PI_DP_CT_ESTABLISHED), "entered twice: kept");
	ASSERT_TRUE(ct_entry(&fx, 0, AF_INET, IPPROTO_TCP, "10.0.0.1", 80,
			     "10.0.0.2", 40000, &e) &&
		    e.dir == PI_DP_DIR_INGRESS, "the first entry stays");

	set_policy(&fx, 0, PI_DP_DIR_INGRESS, &deny_in, 1, 0);
	ASSERT_EQ(UDP(fx.if_b, "10.0.0.2", "10.0.0.1", 53, 5000), PI_REDIRECT,
		  "the answer to A's entered query passes A's ingress deny");
	ASSERT_TRUE(ct_entry(&fx, 0, AF_INET, IPPROTO_UDP, "10.0.0.1", 5000,
			     "10.0.0.2", 53, &e) &&
		    (e.flags & PI_DP_CT_REPLIED), "decided, and answered");
	ASSERT_EQ(UDP(fx.if_b, "10.0.0.2", "10.0.0.1", 53, 5001), PI_DROP,
		  "the answer to the query not entered meets the deny");
	ASSERT_EQ(TCP(fx.if_b, "10.0.0.2", "10.0.0.1", 40000, 80, 0x10),
		  PI_DROP, "B's connection: its opener's policy now denies it");
	ASSERT_EQ(rule_packets(&fx, 11), 2, "both counted by the deny");

	/* the egress side: A accepted B's connection, and A's egress now
	 * denies UDP; the flow B opened is ingress's to decide */
	set_policy(&fx, 0, PI_DP_DIR_INGRESS, NULL, 0, 0);
	ASSERT_EQ(ct_count(&fx), 2,
		  "the library would forget them; the entries are still here (one cut)");
	k.pod_port = 81;
	ASSERT_OK(ct_seed_entry(ct_fd, refs_fd, &k, PI_DP_DIR_INGRESS,
				PI_DP_CT_ESTABLISHED), "B's other connection entered");
	set_policy(&fx, 0, PI_DP_DIR_EGRESS, &deny_udp_out, 1, 1);
	ASSERT_EQ(TCP(fx.if_a, "10.0.0.1", "10.0.0.2", 81, 40000, 0x10),
		  PI_REDIRECT, "A's answer on a connection B opened");
	ASSERT_EQ(UDP(fx.if_b, "10.0.0.2", "10.0.0.1", 53, 5000), PI_DROP,
		  "A's query: its opener's direction now denies UDP");
	ASSERT_TRUE(ct_entry(&fx, 0, AF_INET, IPPROTO_UDP, "10.0.0.1", 5000,
			     "10.0.0.2", 53, &e) && (e.flags & PI_DP_CT_CUT) &&
		    e.rule_id == 12, "its entry cut by the deny");
#undef UDP
#undef TCP
	fx_teardown(&fx);
}

/* ---- issue #14 finding 8: a freed rule range reused during a walk ----
 *
 * Pod A's egress policy is RULES rules that do not match, then `deny
 * all`; it lives in one of two ranges and an editor moves it back and
 * forth, as lib/policy.c does: the new range is written, the reference
 * flipped, and the range left behind is at once another pod's (its last
 * slot becomes `allow all`). A walk that began on the old range and reads
 * that slot after it was reused would let A's packet through. Every one
 * of A's packets must be dropped. */
#define CHURN_RULES	3000
#define CHURN_IDLE_POD	7

struct churn {
	struct ct_fx *fx;
	volatile bool stop;
	long flips;
};

static void *churn_main(void *arg)
{
	struct churn *c = arg;
	struct pi_dp_rule deny_all = { .id = 2, .action = PI_DP_DENY };
	struct pi_dp_rule allow_all = { .id = 3, .action = PI_DP_ALLOW };
	int rules = bpf_map__fd(c->fx->skel->maps.rules);
	int refs = bpf_map__fd(c->fx->skel->maps.policy_refs);
	struct pi_policy_ref ref = { .start = 0, .count = CHURN_RULES,
				     .rev = 1 };
	uint32_t key = 0 * 2 + PI_DP_DIR_EGRESS;

	while (!c->stop) {
		uint32_t cur = ref.start, other = cur ? 0 : CHURN_RULES;
		uint32_t cur_last = cur + CHURN_RULES - 1;
		uint32_t other_last = other + CHURN_RULES - 1;

		bpf_map_update_elem(rules, &other_last, &deny_all, 0);
		ref.start = other;
		ref.rev++;
		bpf_map_update_elem(refs, &key, &ref, 0);
		bpf_map_update_elem(rules, &cur_last, &allow_all, 0);
		c->flips++;
	}
	return NULL;
}

UNIT_TEST(policy_walk_survives_range_reuse)
{
	struct pi_dp_rule *rules = calloc(CHURN_RULES, sizeof(*rules));
	struct churn c = { 0 };
	uint8_t pkt[PKT_MAX], scratch[PKT_MAX];
	struct __sk_buff ctx = { 0 };
	struct ct_fx fx;
	struct timespec t0, t1;
	long runs = 0;
	pthread_t th;
	int len, prog;

	if (!ASSERT_TRUE(rules, "memory") || !fx_setup(&fx)) {
		free(rules);
		return;
	}
	for (int i = 0; i < CHURN_RULES - 1; i++)
		rules[i] = (struct pi_dp_rule){ .id = 1, .action = PI_DP_DENY,
					     .proto = IPPROTO_TCP,
					     .port_lo = 1, .port_hi = 1 };
	rules[CHURN_RULES - 1] = (struct pi_dp_rule){ .id = 2, .action = PI_DP_DENY };
	/* both ranges compiled and live (the second as an idle pod's), so
	 * that the editor's flips of A's reference between them stand for
	 * edits */
	set_policy(&fx, 0, PI_DP_DIR_EGRESS, rules, CHURN_RULES, CHURN_RULES);
	set_policy(&fx, CHURN_IDLE_POD, PI_DP_DIR_EGRESS, rules, CHURN_RULES, 0);
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_UDP, 5000, 53 });
	ctx.ifindex = fx.if_a;
	fixture_from_pod(fx.if_a, pkt, len);
	prog = bpf_program__fd(fx.skel->progs.pod_egress);
	c.fx = &fx;
	if (!ASSERT_OK(pthread_create(&th, NULL, churn_main, &c), "editor"))
		goto out;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		DECLARE_LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = pkt,
				    .data_size_in = len, .data_out = scratch,
				    .data_size_out = sizeof(scratch),
				    .ctx_in = &ctx, .ctx_size_in = sizeof(ctx),
				    .repeat = 100);

		if (bpf_prog_test_run_opts(prog, &opts))
			break;
		runs += 100;
		clock_gettime(CLOCK_MONOTONIC, &t1);
	} while ((t1.tv_sec - t0.tv_sec) * 1000 +
		 (t1.tv_nsec - t0.tv_nsec) / 1000000 < 1500);
	c.stop = true;
	pthread_join(th, NULL);
	if (getenv("UNIT_VERBOSE"))
		fprintf(stderr, "%ld runs, %ld flips\n", runs, c.flips);
	ASSERT_TRUE(runs >= 1000, "packets run");
	ASSERT_TRUE(c.flips >= 1000, "edits made");
	ASSERT_EQ(stats(&fx, 0).egress_packets, 0,
		  "A's packets let through by a reused range");
	ASSERT_EQ(stats(&fx, 0).drops[PI_DP_DROP_POLICY], runs, "all dropped");
out:
	fx_teardown(&fx);
	free(rules);
}

/* ---- TTL and hop limit of routed pod traffic ---- */

static uint16_t icmp6_csum(const uint8_t *pkt, int len)
{
	uint32_t sum = 0;
	int plen = len - 54;

	for (int i = 0; i < 32; i += 2)
		sum += (pkt[22 + i] << 8) | pkt[23 + i];
	sum += plen + 58;
	return csum16(pkt + 54, plen, sum);
}

static int run_out(struct ct_fx *fx, int ifindex, uint8_t *pkt, int len,
		   uint8_t *out, uint32_t *out_len)
{
	struct __sk_buff ctx = { .ifindex = ifindex };
	DECLARE_LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = pkt,
			    .data_size_in = len, .data_out = out,
			    .data_size_out = PKT_MAX, .ctx_in = &ctx,
			    .ctx_size_in = sizeof(ctx), .repeat = 1);
	int err;

	fixture_from_pod(ifindex, pkt, len);
	err = bpf_prog_test_run_opts(
		bpf_program__fd(fx->skel->progs.pod_egress), &opts);
	*out_len = opts.data_size_out;
	return err ? -1000 + err : (int)opts.retval;
}

UNIT_TEST(ttl_decremented_on_routed_traffic)
{
	uint8_t pkt[PKT_MAX], out[PKT_MAX];
	struct ct_fx fx;
	uint32_t olen;
	int len;

	if (!fx_setup(&fx))
		return;
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_UDP, 5000, 53 });
	ip4_csum(pkt);
	ASSERT_EQ(run_out(&fx, fx.if_a, pkt, len, out, &olen), PI_REDIRECT,
		  "v4 to B");
	ASSERT_EQ(out[22], 63, "TTL 64 leaves as 63");
	ASSERT_EQ(csum16(out + 14, 20, 0), 0, "IPv4 header checksum");
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET6, "fd00::1",
		"fd00::2", IPPROTO_UDP, 5000, 53 });
	ASSERT_EQ(run_out(&fx, fx.if_a, pkt, len, out, &olen), PI_REDIRECT,
		  "v6 to B");
	ASSERT_EQ(out[21], 63, "hop limit 64 leaves as 63");
	fx_teardown(&fx);
}

UNIT_TEST(ttl_exceeded_answers_the_sender)
{
	uint8_t pkt[PKT_MAX], out[PKT_MAX], gw6[16];
	struct ct_fx fx;
	uint32_t olen;
	int len;

	if (!fx_setup(&fx))
		return;
	inet_pton(AF_INET6, "fe80::1", gw6);
	/* IPv4: TTL 1 */
	len = echo(pkt, AF_INET, "10.0.0.1", "10.0.0.2", false, 77);
	pkt[22] = 1;
	ip4_csum(pkt);
	ASSERT_EQ(run_out(&fx, fx.if_a, pkt, len, out, &olen), PI_REDIRECT,
		  "v4: handed back");
	ASSERT_EQ(olen, 14 + 20 + 8 + 28, "v4: length");
	ASSERT_TRUE(!memcmp(out, pkt + 6, 6) && !memcmp(out + 6, pkt, 6),
		    "v4: L2 turned round");
	ASSERT_EQ(out[23], IPPROTO_ICMP, "v4: ICMP");
	ASSERT_TRUE(!memcmp(out + 26, "\xa9\xfe\x01\x01", 4) &&
		    !memcmp(out + 30, pkt + 26, 4),
		    "v4: from 169.254.1.1 to the sender");
	ASSERT_EQ(csum16(out + 14, 20, 0), 0, "v4: header checksum");
	ASSERT_EQ(out[34], 11, "v4: time exceeded");
	ASSERT_EQ(csum16(out + 34, 36, 0), 0, "v4: ICMP checksum");
	ASSERT_TRUE(!memcmp(out + 42, pkt + 14, 28), "v4: quotes the packet");
	/* IPv6: hop limit 1 */
	len = echo(pkt, AF_INET6, "fd00::1", "fd00::2", false, 78);
	pkt[21] = 1;
	ASSERT_EQ(run_out(&fx, fx.if_a, pkt, len, out, &olen), PI_REDIRECT,
		  "v6: handed back");
	ASSERT_EQ(olen, 14 + 40 + 8 + 48, "v6: length");
	ASSERT_EQ(out[20], IPPROTO_ICMPV6, "v6: ICMPv6");
	ASSERT_TRUE(!memcmp(out + 22, gw6, 16) && !memcmp(out + 38, pkt + 22, 16),
		    "v6: from fe80::1 to the sender");
	ASSERT_EQ(out[54], 3, "v6: time exceeded");
	ASSERT_EQ(icmp6_csum(out, olen), 0, "v6: ICMPv6 checksum");
	ASSERT_TRUE(!memcmp(out + 62, pkt + 14, 48), "v6: quotes the packet");
	ASSERT_EQ(stats(&fx, 0).drops[PI_DP_DROP_TTL], 2, "counted as ttl");
	ASSERT_EQ(stats(&fx, 1).ingress_packets, 0, "B got nothing");
	fx_teardown(&fx);
}

/* No ICMP error answers an ICMP error or a fragment after the first
 * (RFC 1122 3.2.2, RFC 4443 2.4 (e)): those are only dropped and counted;
 * an echo request with TTL 1 (above) and a first fragment are answered. */
UNIT_TEST(ttl_exceeded_not_for_errors_or_later_fragments)
{
	uint8_t pkt[PKT_MAX], out[PKT_MAX];
	struct ct_fx fx;
	uint32_t olen;
	int len;

	if (!fx_setup(&fx))
		return;
	len = echo(pkt, AF_INET, "10.0.0.1", "10.0.0.2", false, 90);
	icmp_set(pkt, AF_INET, 11, 0);
	pkt[22] = 1;
	ip4_csum(pkt);
	ASSERT_EQ(run_out(&fx, fx.if_a, pkt, len, out, &olen), PI_DROP,
		  "v4: a time exceeded with TTL 1 is not answered");
	len = echo(pkt, AF_INET6, "fd00::1", "fd00::2", false, 91);
	icmp_set(pkt, AF_INET6, 1, 0);
	pkt[21] = 1;
	ASSERT_EQ(run_out(&fx, fx.if_a, pkt, len, out, &olen), PI_DROP,
		  "v6: a destination unreachable with hop limit 1 is not answered");
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_UDP, 5000, 53 });
	pkt_frag4(pkt, 0, 1, 4242);
	ip4_csum(pkt);
	ASSERT_EQ(run_out(&fx, fx.if_a, pkt, len, out, &olen), PI_REDIRECT,
		  "v4: first fragment to B");
	pkt_frag4(pkt, 8, 0, 4242);
	pkt[22] = 1;
	ip4_csum(pkt);
	ASSERT_EQ(run_out(&fx, fx.if_a, pkt, len, out, &olen), PI_DROP,
		  "v4: a later fragment with TTL 1 is not answered");
	pkt_frag4(pkt, 0, 1, 4243);
	ip4_csum(pkt);
	ASSERT_EQ(run_out(&fx, fx.if_a, pkt, len, out, &olen), PI_REDIRECT,
		  "v4: a first fragment with TTL 1 is answered");
	ASSERT_EQ(out[34], 11, "v4: with a time exceeded");
	ASSERT_EQ(stats(&fx, 0).drops[PI_DP_DROP_TTL], 4, "all counted as ttl");
	ASSERT_EQ(stats(&fx, 1).ingress_packets, 1, "B got the first fragment only");
	fx_teardown(&fx);
}
