/* SPDX-License-Identifier: GPL-2.0 */
/* Decisions of the injection program (bpf/inject.bpf.c). */
#include <stdlib.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <string.h>
#include <unistd.h>
#include "attach.h"
#include "fixture.h"
#include "inject.skel.h"
#include "kernel_features.h"
#include "pkt.h"
#include "podinject_abi.h"
#include "unit.h"

struct inj_fx {
	struct inject_bpf *skel;
	int if_inj, if_tgt, if_other;
};

static const uint8_t TGT_POD_MAC[6] = { 0x02, 0x70, 0, 0, 0, 1 };
static const uint8_t TGT_HOST_MAC[6] = { 0x02, 0x70, 0, 0, 0, 0xfe };

static void authorise(struct inj_fx *fx, int family, const char *addr,
		      uint32_t path)
{
	struct pi_inject_key k = { .injector_ifindex = fx->if_inj,
				   .family = family };
	struct pi_inject_target t = { .target_ifindex = fx->if_tgt,
				      .path = path };

	inet_pton(family, addr, k.addr.a);
	memcpy(t.target_pod_mac, TGT_POD_MAC, 6);
	memcpy(t.target_host_mac, TGT_HOST_MAC, 6);
	bpf_map__update_elem(fx->skel->maps.inject_auth, &k, sizeof(k), &t,
			     sizeof(t), 0);
}

static bool fx_setup(struct inj_fx *fx, uint32_t path)
{
	memset(fx, 0, sizeof(*fx));
	if (!ASSERT_OK(fixture_netns(), "private netns"))
		return false;
	fx->if_inj = fixture_dev("ii");
	fx->if_tgt = fixture_dev("it");
	fx->if_other = fixture_dev("io");
	fx->skel = inject_bpf__open();
	if (!ASSERT_TRUE(fx->skel, "open inject_bpf"))
		return false;
	fx->skel->rodata->trace_redirects = true;
	if (!ASSERT_OK(inject_bpf__load(fx->skel), "load inject_bpf")) {
		inject_bpf__destroy(fx->skel);
		return false;
	}
	authorise(fx, AF_INET, "10.0.0.1", path);
	authorise(fx, AF_INET6, "fd00::1", path);
	return true;
}

static int run(struct inj_fx *fx, int ifindex, uint8_t *pkt, int len,
	       uint8_t *out)
{
	return fixture_run(bpf_program__fd(fx->skel->progs.inject_egress),
			   ifindex, pkt, len, out);
}

static struct pi_redirect_record last(struct inj_fx *fx)
{
	return fixture_last_redirect(bpf_map__fd(fx->skel->maps.redirect_trace));
}

static struct pi_inject_stats stats(struct inj_fx *fx, uint32_t path)
{
	struct pi_inject_stats_key k = { .injector_ifindex = fx->if_inj,
					 .target_ifindex = fx->if_tgt,
					 .path = path };
	int ncpu = libbpf_num_possible_cpus();
	struct pi_inject_stats *per = calloc(ncpu, sizeof(*per)), sum = {};

	if (!bpf_map__lookup_elem(fx->skel->maps.inject_stats, &k, sizeof(k),
				  per, ncpu * sizeof(*per), 0)) {
		for (int c = 0; c < ncpu; c++) {
			sum.packets += per[c].packets;
			sum.drops[0] += per[c].drops[0];
		}
	}
	free(per);
	return sum;
}

UNIT_TEST(inject_authorised_v4_fallback)
{
	struct pi_redirect_record rd;
	struct inj_fx fx;
	uint8_t pkt[PKT_MAX], out[PKT_MAX];
	int len;

	if (!fx_setup(&fx, PI_DP_PATH_FALLBACK))
		return;
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_UDP, 1000, 53 });
	ASSERT_EQ(run(&fx, fx.if_inj, pkt, len, out), PI_REDIRECT, "verdict");
	rd = last(&fx);
	ASSERT_EQ(rd.kind, PI_RD_PLAIN, "bpf_redirect");
	ASSERT_EQ(rd.flags, 1, "BPF_F_INGRESS");
	ASSERT_EQ(rd.ifindex, fx.if_tgt, "target's host device");
	ASSERT_TRUE(!memcmp(out + 6, TGT_POD_MAC, 6), "src mac = target pod");
	ASSERT_TRUE(!memcmp(out, TGT_HOST_MAC, 6), "dst mac = target host");
	ASSERT_TRUE(!memcmp(out + 12, pkt + 12, len - 12), "L3 untouched");
	ASSERT_EQ(stats(&fx, PI_DP_PATH_FALLBACK).packets, 1, "counted");
	inject_bpf__destroy(fx.skel);
}

UNIT_TEST(inject_authorised_v6_fallback)
{
	struct inj_fx fx;
	uint8_t pkt[PKT_MAX];
	int len;

	if (!fx_setup(&fx, PI_DP_PATH_FALLBACK))
		return;
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET6, "fd00::1",
		"fd00::2", IPPROTO_TCP, 1000, 80 });
	ASSERT_EQ(run(&fx, fx.if_inj, pkt, len, NULL), PI_REDIRECT, "verdict");
	ASSERT_EQ(last(&fx).ifindex, fx.if_tgt, "target");
	inject_bpf__destroy(fx.skel);
}

UNIT_TEST(inject_not_ours_passes_with_next)
{
	struct inj_fx fx;
	uint8_t pkt[PKT_MAX], out[PKT_MAX];
	int len;

	if (!fx_setup(&fx, PI_DP_PATH_FALLBACK))
		return;
	/* the injector's own address */
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.9",
		"10.0.0.2", IPPROTO_UDP, 1, 2 });
	ASSERT_EQ(run(&fx, fx.if_inj, pkt, len, out), PI_NEXT, "own traffic");
	ASSERT_TRUE(!memcmp(out, pkt, len), "untouched");
	/* an authorised address, from a device that is not the injector */
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_UDP, 1, 2 });
	ASSERT_EQ(run(&fx, fx.if_other, pkt, len, NULL), PI_NEXT,
		  "other device");
	/* the target's own device: its own packets are not injections */
	ASSERT_EQ(run(&fx, fx.if_tgt, pkt, len, NULL), PI_NEXT,
		  "target device");
	/* v6 address not authorised */
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET6, "fd00::7",
		"fd00::2", IPPROTO_UDP, 1, 2 });
	ASSERT_EQ(run(&fx, fx.if_inj, pkt, len, NULL), PI_NEXT, "v6 other");
	/* ARP and garbage are none of injection's business */
	memset(pkt, 0, 64);
	pkt[12] = 0x08;
	pkt[13] = 0x06;
	ASSERT_EQ(run(&fx, fx.if_inj, pkt, 60, NULL), PI_NEXT, "arp");
	ASSERT_EQ(last(&fx).kind, PI_RD_NONE, "no redirect at all");
	inject_bpf__destroy(fx.skel);
}

UNIT_TEST(inject_fast_path_per_kernel)
{
	struct pi_redirect_record rd;
	struct inj_fx fx;
	uint8_t pkt[PKT_MAX];
	char known[16];
	bool has;
	int len;

	/* what the kernel is known to have, not what the probe says */
	if (fixture_known("redirect_peer_egress", known, sizeof(known))) {
		unit_skip("kernel not in tests/kernels.txt: whether it has BPF_F_EGRESS is unknown");
		return;
	}
	has = !strcmp(known, "true");
	if (!fx_setup(&fx, PI_DP_PATH_FAST))
		return;
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_UDP, 1, 2 });
	ASSERT_EQ(run(&fx, fx.if_inj, pkt, len, NULL),
		  has ? PI_REDIRECT : PI_DROP, "verdict");
	rd = last(&fx);
	ASSERT_EQ(rd.kind, PI_RD_PEER, "bpf_redirect_peer");
	ASSERT_EQ(rd.flags, 2, "BPF_F_EGRESS");
	ASSERT_EQ(rd.ifindex, fx.if_tgt, "target");
	if (has) {
		ASSERT_EQ(stats(&fx, PI_DP_PATH_FAST).packets, 1, "counted");
	} else {
		ASSERT_EQ(stats(&fx, PI_DP_PATH_FAST).drops[PI_DP_INJ_DROP_REDIRECT],
			  1, "refused redirect counted");
		ASSERT_EQ(fixture_refused(fx.skel->maps.inject_refusals,
					  PI_DP_MON_DROP_INJECT_REDIRECT), 1,
			  "and by reason, node-wide");
		ASSERT_EQ(stats(&fx, PI_DP_PATH_FAST).packets, 0, "not counted");
	}
	inject_bpf__destroy(fx.skel);
}

UNIT_TEST(feature_probe_redirect_peer_flags)
{
	int ret0 = probe_redirect_peer_retval(0);
	int ret_unknown = probe_redirect_peer_retval(1ULL << 5);
	int ret_ingress = probe_redirect_peer_retval(1);

	/* flags 0 was always valid; other bits never are */
	ASSERT_EQ(ret0, PI_REDIRECT, "flags 0");
	ASSERT_EQ(ret_unknown, PI_DROP, "unknown bit");
	ASSERT_EQ(ret_ingress, PI_DROP, "BPF_F_INGRESS");
	ASSERT_EQ(probe_redirect_peer_retval(3), PI_DROP, "EGRESS|INGRESS");
}

/*
 * The netkit fallback. The target's peer program here is the reference
 * datapath's own pod_egress_nk, loaded from the node object, so the
 * tail call crosses objects as it does on a node.
 */
#include "node.skel.h"

static const uint8_t DEFAULT_TAG[6] = { 0x02, 0, 0, 0, 0, 0x01 };

struct guard_fx {
	struct inj_fx inj;
	struct node_bpf *node;
};

static uint64_t node_egress(struct guard_fx *gx, uint32_t id)
{
	int ncpu = libbpf_num_possible_cpus();
	struct pi_dp_pod_stats *per = calloc(ncpu, sizeof(*per));
	uint64_t n = 0;

	bpf_map__lookup_elem(gx->node->maps.pod_stats, &id, 4, per,
			     ncpu * sizeof(*per), 0);
	for (int c = 0; c < ncpu; c++)
		n += per[c].egress_packets;
	free(per);
	return n;
}

static struct pi_dp_netkit_guard guard_of(struct guard_fx *gx)
{
	struct pi_dp_netkit_guard g = {};

	bpf_map__lookup_elem(gx->inj.skel->maps.netkit_guards,
			     &gx->inj.if_tgt, 4, &g, sizeof(g), 0);
	return g;
}

/* The target (10.0.0.1) is pod 5 of the node datapath at if_tgt; its
 * guard uses slot 3, which holds pod_egress_nk when `with_prog`. */
static bool guard_setup(struct guard_fx *gx, bool with_prog)
{
	struct pi_pod pod = { .id = 5, .flags = PI_DP_POD_HAS_V4 | PI_DP_POD_NETKIT };
	struct pi_dp_netkit_guard g = { .slot = 3 };
	int fd;

	memset(gx, 0, sizeof(*gx));
	if (!fx_setup(&gx->inj, PI_DP_PATH_NETKIT_FALLBACK))
		return false;
	gx->node = node_bpf__open_and_load();
	if (!ASSERT_TRUE(gx->node, "load node_bpf"))
		return false;
	pod.ifindex = gx->inj.if_tgt;
	inet_pton(AF_INET, "10.0.0.1", &pod.ip4);
	bpf_map__update_elem(gx->node->maps.pods, &pod.ifindex, 4, &pod,
			     sizeof(pod), 0);
	memcpy(g.pod_mac, TGT_POD_MAC, 6);
	bpf_map__update_elem(gx->inj.skel->maps.netkit_guards,
			     &gx->inj.if_tgt, 4, &g, sizeof(g), 0);
	fd = bpf_program__fd(gx->node->progs.pod_egress_nk);
	if (with_prog &&
	    !ASSERT_OK(bpf_map__update_elem(gx->inj.skel->maps.netkit_peer_progs,
					    &g.slot, 4, &fd, 4, 0),
		       "peer program into the prog array"))
		return false;
	return true;
}

static void guard_teardown(struct guard_fx *gx)
{
	node_bpf__destroy(gx->node);
	inject_bpf__destroy(gx->inj.skel);
}

static int run_prog(struct bpf_program *prog, int ifindex, uint8_t *pkt,
		    int len, uint8_t *out)
{
	return fixture_run(bpf_program__fd(prog), ifindex, pkt, len, out);
}

UNIT_TEST(inject_netkit_fallback_tags_the_source_mac)
{
	struct guard_fx gx;
	uint8_t pkt[PKT_MAX], out[PKT_MAX];
	struct pi_redirect_record rd;
	int len;

	if (!guard_setup(&gx, true))
		return;
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_UDP, 1000, 53 });
	ASSERT_EQ(run(&gx.inj, gx.inj.if_inj, pkt, len, out), PI_REDIRECT,
		  "verdict");
	rd = last(&gx.inj);
	ASSERT_EQ(rd.kind, PI_RD_PLAIN, "bpf_redirect");
	ASSERT_EQ(rd.flags, 1, "BPF_F_INGRESS");
	ASSERT_EQ(rd.ifindex, gx.inj.if_tgt, "the target's primary");
	ASSERT_TRUE(!memcmp(out + 6, DEFAULT_TAG, 6), "src mac = the tag");
	ASSERT_TRUE(!memcmp(out, TGT_HOST_MAC, 6), "dst mac = target host");
	ASSERT_EQ(stats(&gx.inj, PI_DP_PATH_NETKIT_FALLBACK).packets, 1,
		  "counted on its own path");
	guard_teardown(&gx);
}

UNIT_TEST(inject_netkit_guard_runs_peer_program_for_tagged_only)
{
	struct guard_fx gx;
	uint8_t pkt[PKT_MAX], tagged[PKT_MAX], out[PKT_MAX];
	int len;

	if (!guard_setup(&gx, true))
		return;
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"192.0.2.7", IPPROTO_UDP, 1000, 53 });
	memcpy(tagged, pkt, len);
	memcpy(tagged + 6, DEFAULT_TAG, 6);
	/* Tagged: the peer program's verdict (to the stack: no uplink) and
	 * its counter, once; the tag is gone. */
	ASSERT_EQ(run_prog(gx.inj.skel->progs.netkit_guard, gx.inj.if_tgt,
			   tagged, len, out), PI_PASS, "peer program's verdict");
	ASSERT_EQ(node_egress(&gx, 5), 1, "target egress counted once");
	ASSERT_TRUE(!memcmp(out + 6, TGT_POD_MAC, 6), "tag replaced");
	ASSERT_EQ(guard_of(&gx).runs, 1, "guard runs");
	/* Untagged: it came out of the pod and met the program already. */
	ASSERT_EQ(run_prog(gx.inj.skel->progs.netkit_guard, gx.inj.if_tgt,
			   pkt, len, out), PI_NEXT, "untagged goes on");
	ASSERT_EQ(node_egress(&gx, 5), 1, "not run again");
	ASSERT_TRUE(!memcmp(out, pkt, len), "untouched");
	/* Tagged, at a device with no guard. */
	ASSERT_EQ(run_prog(gx.inj.skel->progs.netkit_guard, gx.inj.if_other,
			   tagged, len, NULL), PI_NEXT, "no guard here");
	/* The peer program's own decisions hold: a spoofed source. */
	len = pkt_build(tagged, &(struct pkt_spec){ AF_INET, "10.0.0.66",
		"192.0.2.7", IPPROTO_UDP, 1000, 53 });
	memcpy(tagged + 6, DEFAULT_TAG, 6);
	ASSERT_EQ(run_prog(gx.inj.skel->progs.netkit_guard, gx.inj.if_tgt,
			   tagged, len, NULL), PI_DROP, "peer program drops");
	ASSERT_EQ(guard_of(&gx).runs, 2, "guard runs");
	guard_teardown(&gx);
}

UNIT_TEST(inject_netkit_guard_drops_without_program)
{
	struct guard_fx gx;
	uint8_t pkt[PKT_MAX];
	int len;

	if (!guard_setup(&gx, false))
		return;
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"192.0.2.7", IPPROTO_UDP, 1000, 53 });
	memcpy(pkt + 6, DEFAULT_TAG, 6);
	ASSERT_EQ(run_prog(gx.inj.skel->progs.netkit_guard, gx.inj.if_tgt,
			   pkt, len, NULL), PI_DROP, "nothing to run: dropped");
	ASSERT_EQ(guard_of(&gx).missing, 1, "counted missing");
	ASSERT_EQ(fixture_refused(gx.inj.skel->maps.inject_refusals,
				  PI_DP_MON_DROP_GUARD_EMPTY), 1,
		  "and by reason, node-wide");
	ASSERT_EQ(guard_of(&gx).runs, 0, "not counted as run");
	ASSERT_EQ(node_egress(&gx, 5), 0, "target program never ran");
	guard_teardown(&gx);
}

/* A pod that sends the tag itself gets it overwritten at the head of its
 * peer hook, so its frame reaches the guard untagged: no second run. */
UNIT_TEST(inject_netkit_untag_neutralises_forged_tag)
{
	struct guard_fx gx;
	uint8_t pkt[PKT_MAX], out[PKT_MAX];
	int len;

	if (!guard_setup(&gx, true))
		return;
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"192.0.2.7", IPPROTO_UDP, 1000, 53 });
	memcpy(pkt + 6, DEFAULT_TAG, 6);
	ASSERT_EQ(run_prog(gx.inj.skel->progs.netkit_untag, gx.inj.if_tgt,
			   pkt, len, out), PI_NEXT, "goes on to the CNI");
	ASSERT_TRUE(!memcmp(out + 6, TGT_POD_MAC, 6), "tag overwritten");
	ASSERT_TRUE(!memcmp(out + 12, pkt + 12, len - 12), "rest untouched");
	ASSERT_EQ(guard_of(&gx).forged, 1, "counted forged");
	ASSERT_EQ(run_prog(gx.inj.skel->progs.netkit_guard, gx.inj.if_tgt,
			   out, len, NULL), PI_NEXT, "guard lets it go on");
	ASSERT_EQ(node_egress(&gx, 5), 0, "no run by the guard");
	/* the pod's ordinary frames pass untouched and uncounted */
	memcpy(pkt + 6, TGT_POD_MAC, 6);
	ASSERT_EQ(run_prog(gx.inj.skel->progs.netkit_untag, gx.inj.if_tgt,
			   pkt, len, out), PI_NEXT, "ordinary frame");
	ASSERT_TRUE(!memcmp(out, pkt, len), "untouched");
	ASSERT_EQ(guard_of(&gx).forged, 1, "still 1");
	guard_teardown(&gx);
}

static int mon_first(void *ctx, void *data, size_t size)
{
	struct pi_dp_mon_event *e = ctx;

	if (size == sizeof(*e) && !e->kind)
		memcpy(e, data, size);
	return 0;
}

/* The injection object's own events: an injected packet names its
 * injector's device, the target's and the path; with no monitor asking,
 * nothing is written. */
UNIT_TEST(monitor_inject_event)
{
	struct pi_dp_monitor_config cfg = { .kinds = 1u << PI_DP_MON_INJECT };
	struct pi_dp_mon_event ev = {};
	struct ring_buffer *rb;
	struct inj_fx fx;
	uint8_t pkt[PKT_MAX];
	uint32_t zero = 0;
	int len, n;

	if (!fx_setup(&fx, PI_DP_PATH_FALLBACK))
		return;
	rb = ring_buffer__new(bpf_map__fd(fx.skel->maps.monitor_events),
			      mon_first, &ev, NULL);
	if (!ASSERT_TRUE(rb, "ring buffer"))
		goto out;
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_UDP, 1000, 53 });
	ASSERT_EQ(run(&fx, fx.if_inj, pkt, len, NULL), PI_REDIRECT, "off");
	ASSERT_EQ(ring_buffer__consume(rb), 0, "no event with no monitor");
	bpf_map__update_elem(fx.skel->maps.monitor_config, &zero, 4, &cfg,
			     sizeof(cfg), 0);
	ASSERT_EQ(run(&fx, fx.if_inj, pkt, len, NULL), PI_REDIRECT, "on");
	n = ring_buffer__consume(rb);
	ASSERT_EQ(n, 1, "one event");
	ASSERT_EQ(ev.kind, PI_DP_MON_INJECT, "kind");
	ASSERT_EQ(ev.hook, PI_DP_HOOK_INJECT, "hook");
	ASSERT_EQ(ev.reason, PI_DP_PATH_FALLBACK, "path");
	ASSERT_EQ(ev.ifindex, fx.if_inj, "injector's device");
	ASSERT_EQ(ev.aux, fx.if_tgt, "target's device");
	ASSERT_EQ(ev.pod_id, PI_DP_MON_NO_POD, "known by device only");
	ASSERT_EQ(ev.sport, 1000, "sport");
	ASSERT_EQ(ev.dport, 53, "dport");
	ASSERT_EQ(ev.proto, IPPROTO_UDP, "proto");
	/* not the injector's own traffic */
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.7",
		"10.0.0.2", IPPROTO_UDP, 1000, 53 });
	ASSERT_EQ(run(&fx, fx.if_inj, pkt, len, NULL), PI_NEXT, "own");
	ASSERT_EQ(ring_buffer__consume(rb), 0, "own traffic: no event");
	ring_buffer__free(rb);
out:
	inject_bpf__destroy(fx.skel);
}

/* A tcx link detached "now" has let go of its hook when the call returns:
 * its pin only unlinked, the kernel detaches it after a grace period, from
 * a workqueue, and a netkit pod's guard that looked at the hook at once
 * saw podinject's program still there (two programs: every injected
 * packet dropped; t_netkit guardpol_injected_after, in the lab). */
UNIT_TEST(attach_detach_now_lets_go_at_once)
{
	char known[16], pin[64];
	struct inject_bpf *skel;
	uint32_t ids[8];
	int dev, fd, rounds = 0;

	if (fixture_known("tcx", known, sizeof(known)) ||
	    strcmp(known, "true")) {
		unit_skip("no tcx here (or not known): clsact filters go at once");
		return;
	}
	dev = fixture_dev("dnow");
	skel = inject_bpf__open_and_load();
	if (!ASSERT_TRUE(dev > 0 && skel, "device and a program"))
		goto out;
	fd = bpf_program__fd(skel->progs.pod_reply);
	snprintf(pin, sizeof(pin), "/sys/fs/bpf/pi-unit-dnow-%d", getpid());
	/* ten rounds: one lucky grace period cannot make it pass */
	for (; rounds < 10; rounds++) {
		if (!ASSERT_OK(attach_prog(fd, dev, PI_HOOK_INGRESS,
					   PI_ATTACH_TCX, false,
					   PI_PRIO_DATAPATH, pin), "attach") ||
		    !ASSERT_EQ(query_tcx(dev, PI_HOOK_INGRESS, ids, 8), 1,
			       "attached"))
			break;
		ASSERT_OK(detach_prog_now(dev, PI_HOOK_INGRESS, PI_ATTACH_TCX,
					  PI_PRIO_DATAPATH, pin), "detach");
		if (!ASSERT_EQ(query_tcx(dev, PI_HOOK_INGRESS, ids, 8), 0,
			       "gone at once"))
			break;
	}
	ASSERT_EQ(rounds, 10, "every round");
	unlink(pin);
out:
	inject_bpf__destroy(skel);
}
