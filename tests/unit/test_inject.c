/* SPDX-License-Identifier: GPL-2.0 */
/* Decisions of the injection program (bpf/inject.bpf.c). */
#include <stdlib.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
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

	if (!fx_setup(&fx, PI_PATH_FALLBACK))
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
	ASSERT_EQ(stats(&fx, PI_PATH_FALLBACK).packets, 1, "counted");
	inject_bpf__destroy(fx.skel);
}

UNIT_TEST(inject_authorised_v6_fallback)
{
	struct inj_fx fx;
	uint8_t pkt[PKT_MAX];
	int len;

	if (!fx_setup(&fx, PI_PATH_FALLBACK))
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

	if (!fx_setup(&fx, PI_PATH_FALLBACK))
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
	bool has = probe_redirect_peer_retval(PI_F_EGRESS_FLAG) == PI_REDIRECT;
	int len;

	if (!fx_setup(&fx, PI_PATH_FAST))
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
		ASSERT_EQ(stats(&fx, PI_PATH_FAST).packets, 1, "counted");
	} else {
		ASSERT_EQ(stats(&fx, PI_PATH_FAST).drops[PI_INJ_DROP_REDIRECT],
			  1, "refused redirect counted");
		ASSERT_EQ(stats(&fx, PI_PATH_FAST).packets, 0, "not counted");
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
