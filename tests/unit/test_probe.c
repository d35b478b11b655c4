/* SPDX-License-Identifier: GPL-2.0 */
/* pod_reply taking the answers to probes: which packets, which verdicts. */
#include <stdlib.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "fixture.h"
#include "inject.skel.h"
#include "pkt.h"
#include "podinject_abi.h"
#include "podinject_util.h"
#include "unit.h"

struct pr_fx {
	struct inject_bpf *skel;
	struct ring_buffer *rb;
	struct pi_probe_event last;
	int events;
	int ifindex;
};

static int on_event(void *ctx, void *data, size_t len)
{
	struct pr_fx *fx = ctx;

	memcpy(&fx->last, data, sizeof(fx->last));
	fx->events++;
	return 0;
}

static bool fx_setup(struct pr_fx *fx)
{
	memset(fx, 0, sizeof(*fx));
	if (!ASSERT_OK(fixture_netns(), "private netns"))
		return false;
	fx->ifindex = fixture_dev("pq");
	fx->skel = inject_bpf__open_and_load();
	if (!ASSERT_TRUE(fx->skel, "load"))
		return false;
	fx->rb = ring_buffer__new(bpf_map__fd(fx->skel->maps.probe_events),
				  on_event, fx, NULL);
	return ASSERT_TRUE(fx->rb, "ring buffer");
}

static void fx_teardown(struct pr_fx *fx)
{
	ring_buffer__free(fx->rb);
	inject_bpf__destroy(fx->skel);
}

/* Registers the probe flow pod:sport -> dst:dport; its key. */
static struct pi_flow_key add_flow(struct pr_fx *fx, int family,
				   uint8_t proto, const char *pod,
				   const char *dst, uint16_t sport,
				   uint16_t dport, uint32_t id)
{
	struct pi_flow_key k = { .family = family, .proto = proto,
				 .pod_port = htons(sport),
				 .dst_port = htons(dport) };
	struct pi_probe_flow f = { .probe_id = id };

	inet_pton(family, pod, k.pod.a);
	inet_pton(family, dst, k.dst.a);
	bpf_map__update_elem(fx->skel->maps.probe_flows, &k, sizeof(k), &f,
			     sizeof(f), 0);
	return k;
}

static int run(struct pr_fx *fx, uint8_t *pkt, int len)
{
	int ret = fixture_run(bpf_program__fd(fx->skel->progs.pod_reply),
			      fx->ifindex, pkt, len, NULL);

	ring_buffer__consume(fx->rb);
	return ret;
}

UNIT_TEST(probe_tcp_answers)
{
	struct pr_fx fx;
	uint8_t pkt[PKT_MAX];
	uint32_t ack = htonl(5001);
	int len;

	if (!fx_setup(&fx))
		return;
	add_flow(&fx, AF_INET, IPPROTO_TCP, "10.0.0.1", "10.0.0.2", 61000, 80,
		 7);
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.2",
		"10.0.0.1", IPPROTO_TCP, 80, 61000, 0x12 });
	memcpy(pkt + 14 + 20 + 8, &ack, 4);
	ASSERT_EQ(run(&fx, pkt, len), PI_DROP, "SYN-ACK taken");
	ASSERT_EQ(fx.events, 1, "one event");
	ASSERT_EQ(fx.last.probe_id, 7, "probe id");
	ASSERT_EQ(fx.last.kind, PI_PROBE_SYNACK, "answered");
	ASSERT_EQ(fx.last.tcp_ack, 5001, "ack to reset with");
	ASSERT_TRUE(fx.last.ts_ns > 0, "timestamp");
	/* a RST with ACK names the SYN it refuses, as a SYN-ACK does (the
	 * probe tells its own answer from a late one of the same ports);
	 * one without names none */
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.2",
		"10.0.0.1", IPPROTO_TCP, 80, 61000, 0x14 });
	ack = htonl(7001);
	memcpy(pkt + 14 + 20 + 8, &ack, 4);
	ASSERT_EQ(run(&fx, pkt, len), PI_DROP, "RST taken");
	ASSERT_EQ(fx.last.kind, PI_PROBE_RST, "refused");
	ASSERT_EQ(fx.last.tcp_ack, 7001, "the RST's ack");
	ASSERT_EQ(fx.last.icmp, 0, "a reset is no ICMP error");
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.2",
		"10.0.0.1", IPPROTO_TCP, 80, 61000, 0x04 });
	memcpy(pkt + 14 + 20 + 8, &ack, 4);
	ASSERT_EQ(run(&fx, pkt, len), PI_DROP, "RST without ACK taken");
	ASSERT_EQ(fx.last.tcp_ack, 0, "no ack named");
	/* the pod's own flows pass untouched */
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.2",
		"10.0.0.1", IPPROTO_TCP, 80, 40000, 0x12 });
	ASSERT_EQ(run(&fx, pkt, len), PI_NEXT, "other port");
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.3",
		"10.0.0.1", IPPROTO_TCP, 80, 61000, 0x12 });
	ASSERT_EQ(run(&fx, pkt, len), PI_NEXT, "other peer");
	ASSERT_EQ(fx.events, 3, "no more events");
	fx_teardown(&fx);
}

UNIT_TEST(probe_udp_and_icmp_answers)
{
	struct pr_fx fx;
	uint8_t pkt[PKT_MAX];
	int len;

	if (!fx_setup(&fx))
		return;
	add_flow(&fx, AF_INET6, IPPROTO_UDP, "fd00::1", "fd00::2", 61001, 53,
		 8);
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET6, "fd00::2",
		"fd00::1", IPPROTO_UDP, 53, 61001 });
	ASSERT_EQ(run(&fx, pkt, len), PI_DROP, "UDP answer taken");
	ASSERT_EQ(fx.last.kind, PI_PROBE_DATAGRAM, "datagram");
	ASSERT_EQ(fx.last.probe_id, 8, "probe id");

	/* echo reply: id and sequence name the probe */
	add_flow(&fx, AF_INET, IPPROTO_ICMP, "10.0.0.1", "10.0.0.2", 61002, 3,
		 9);
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.2",
		"10.0.0.1", IPPROTO_ICMP });
	pkt[34] = 0;				/* echo reply */
	*(uint16_t *)(pkt + 38) = htons(61002);
	*(uint16_t *)(pkt + 40) = htons(3);
	ASSERT_EQ(run(&fx, pkt, len), PI_DROP, "echo reply taken");
	ASSERT_EQ(fx.last.kind, PI_PROBE_ECHO_REPLY, "echo reply");
	ASSERT_EQ(fx.last.probe_id, 9, "probe id");
	*(uint16_t *)(pkt + 40) = htons(4);
	ASSERT_EQ(run(&fx, pkt, len), PI_NEXT, "other sequence: the pod's");
	fx_teardown(&fx);
}

/* An IPv4 destination unreachable (code) from 10.0.0.2 to `to`, quoting
 * the packet `inner` (from its IP header on); its length. */
static int unreach_quoting(uint8_t *pkt, const char *to, const uint8_t *inner,
			   int ilen, uint8_t code)
{
	int len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.2",
		to, IPPROTO_ICMP, 0, 0, 0, (uint16_t)(ilen - 14) });

	pkt[34] = 3;
	pkt[35] = code;
	memcpy(pkt + 34 + 8, inner + 14, ilen - 14);
	return len;
}

UNIT_TEST(probe_icmp_unreachable_quotes_the_probe)
{
	struct pr_fx fx;
	uint8_t pkt[PKT_MAX], inner[PKT_MAX];
	int len, ilen;

	if (!fx_setup(&fx))
		return;
	add_flow(&fx, AF_INET, IPPROTO_UDP, "10.0.0.1", "10.0.0.2", 61003, 9,
		 10);
	/* port unreachable from 10.0.0.2, quoting the probe's datagram */
	ilen = pkt_build(inner, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_UDP, 61003, 9 });
	len = unreach_quoting(pkt, "10.0.0.1", inner, ilen, 3);
	ASSERT_EQ(run(&fx, pkt, len), PI_DROP, "unreachable taken");
	ASSERT_EQ(fx.last.kind, PI_PROBE_UNREACH, "refused");
	ASSERT_EQ(fx.last.probe_id, 10, "probe id");
	ASSERT_EQ(fx.last.tcp_ack, 0, "a datagram's quote names no SYN");
	/* what refused it, for the probe to say */
	ASSERT_EQ(fx.last.icmp, PI_PROBE_ICMP_READ | 3 << 8 | 3,
		  "type 3 (unreachable), code 3 (port)");
	/* the same quote sent to another pod (10.0.0.3) is no answer to the
	 * probe: any pod may send one, and would make a probe of another
	 * pod refused and have the error taken (found by a review) */
	fx.last.kind = 0;
	len = unreach_quoting(pkt, "10.0.0.3", inner, ilen, 3);
	ASSERT_EQ(run(&fx, pkt, len), PI_NEXT, "another pod's error passes");
	ASSERT_EQ(fx.last.kind, 0, "no answer of the probe");
	/* quoting a TCP probe's SYN: its sequence number + 1, as a SYN-ACK
	 * would acknowledge it (a late error is told from the next probe's
	 * of the same ports) */
	add_flow(&fx, AF_INET, IPPROTO_TCP, "10.0.0.1", "10.0.0.2", 61004, 80,
		 11);
	ilen = pkt_build(inner, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_TCP, 61004, 80, 0x02 });
	*(uint32_t *)(inner + 14 + 20 + 4) = htonl(0xfffffff0);
	len = unreach_quoting(pkt, "10.0.0.1", inner, ilen, 1);
	ASSERT_EQ(run(&fx, pkt, len), PI_DROP, "host unreachable taken");
	ASSERT_EQ(fx.last.probe_id, 11, "the TCP probe's");
	ASSERT_EQ(fx.last.tcp_ack, 0xfffffff1, "its SYN's sequence + 1");
	ASSERT_EQ(fx.last.icmp, PI_PROBE_ICMP_READ | 3 << 8 | 1,
		  "type 3, code 1 (host)");
	fx_teardown(&fx);
}

/* ICMPv6: a destination unreachable (type 1), administratively
 * prohibited (code 1), quoting a TCP probe's SYN: taken, with its type
 * and code */
UNIT_TEST(probe_icmp6_unreachable_says_why)
{
	struct pr_fx fx;
	uint8_t pkt[PKT_MAX], inner[PKT_MAX];
	int len, ilen;

	if (!fx_setup(&fx))
		return;
	add_flow(&fx, AF_INET6, IPPROTO_TCP, "fd00::1", "fd00::2", 61005, 443,
		 12);
	ilen = pkt_build(inner, &(struct pkt_spec){ AF_INET6, "fd00::1",
		"fd00::2", IPPROTO_TCP, 61005, 443, 0x02 });
	*(uint32_t *)(inner + 14 + 40 + 4) = htonl(1000);
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET6, "fd00::9",
		"fd00::1", IPPROTO_ICMP, 0, 0, 0, (uint16_t)(ilen - 14) });
	pkt[54] = 1;
	pkt[55] = 1;
	memcpy(pkt + 54 + 8, inner + 14, ilen - 14);
	ASSERT_EQ(run(&fx, pkt, len), PI_DROP, "unreachable taken");
	ASSERT_EQ(fx.last.kind, PI_PROBE_UNREACH, "refused");
	ASSERT_EQ(fx.last.probe_id, 12, "probe id");
	ASSERT_EQ(fx.last.tcp_ack, 1001, "its SYN's sequence + 1");
	ASSERT_EQ(fx.last.icmp, PI_PROBE_ICMP_READ | 1 << 8 | 1,
		  "type 1 (unreachable), code 1 (administratively prohibited)");
	fx_teardown(&fx);
}

/* An answer behind IPv6 extension headers is the probe's as well: the
 * transport header may lie as far as the parser walks (PKT_L4_OFF_MAX),
 * past the 128 bytes that bounded the ICMP reader before (the reply then
 * went to the pod as its own). */
UNIT_TEST(probe_answer_behind_extension_headers)
{
	struct pr_fx fx;
	uint8_t pkt[PKT_MAX];
	int len;

	if (!fx_setup(&fx))
		return;
	add_flow(&fx, AF_INET6, IPPROTO_ICMPV6, "fd00::1", "fd00::2", 61003,
		 5, 10);
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET6, "fd00::2",
		"fd00::1", IPPROTO_ICMP });
	pkt[54] = 129;				/* echo reply */
	*(uint16_t *)(pkt + 58) = htons(61003);
	*(uint16_t *)(pkt + 60) = htons(5);
	len = pkt_ext6(pkt, len, 0, 96, NULL);	/* hop-by-hop */
	ASSERT_EQ(run(&fx, pkt, len), PI_DROP,
		  "echo reply at offset 150 (hop-by-hop of 96) taken");
	ASSERT_EQ(fx.last.probe_id, 10, "probe id");
	ASSERT_EQ(fx.last.kind, PI_PROBE_ECHO_REPLY, "echo reply");

	/* as many headers as the walk takes, 160 bytes each */
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET6, "fd00::2",
		"fd00::1", IPPROTO_ICMP });
	pkt[54] = 129;
	*(uint16_t *)(pkt + 58) = htons(61003);
	*(uint16_t *)(pkt + 60) = htons(5);
	for (int i = 0; i < PI_MAX_EXTHDRS - 1; i++)
		len = pkt_ext6(pkt, len, 60, 160, NULL);	/* dstopts */
	len = pkt_ext6(pkt, len, 0, 160, NULL);
	fx.events = 0;
	ASSERT_EQ(run(&fx, pkt, len), PI_DROP,
		  "echo reply behind 8 headers (offset 1334) taken");
	ASSERT_EQ(fx.events, 1, "one event");
	*(uint16_t *)(pkt + 54 + 8 * 160 + 6) = htons(6);
	ASSERT_EQ(run(&fx, pkt, len), PI_NEXT, "another sequence: the pod's");
	fx_teardown(&fx);
}

/* The probe's own frames, injected: each registered one gives a SENT event
 * with the kernel's time, the clock the answer is read with; the pod's and
 * other injected frames give none. */
UNIT_TEST(probe_injection_time)
{
	struct pi_inject_key ik = { .family = AF_INET };
	struct pi_inject_target t = { .path = PI_DP_PATH_FALLBACK };
	struct pr_fx fx;
	uint8_t pkt[PKT_MAX];
	uint64_t before;
	int len, prog;

	if (!fx_setup(&fx))
		return;
	prog = bpf_program__fd(fx.skel->progs.inject_egress);
	ik.injector_ifindex = fx.ifindex;
	t.target_ifindex = fx.ifindex;
	inet_pton(AF_INET, "10.0.0.1", ik.addr.a);
	bpf_map__update_elem(fx.skel->maps.inject_auth, &ik, sizeof(ik), &t,
			     sizeof(t), 0);
	ik.family = AF_INET6;
	inet_pton(AF_INET6, "fd00::1", ik.addr.a);
	bpf_map__update_elem(fx.skel->maps.inject_auth, &ik, sizeof(ik), &t,
			     sizeof(t), 0);
	add_flow(&fx, AF_INET, IPPROTO_TCP, "10.0.0.1", "10.0.0.2", 61000, 80,
		 11);
	add_flow(&fx, AF_INET6, IPPROTO_ICMPV6, "fd00::1", "fd00::2", 61004,
		 2, 12);

	before = (uint64_t)pi_mono_ns();
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_TCP, 61000, 80, 0x02 });
	ASSERT_EQ(fixture_run(prog, fx.ifindex, pkt, len, NULL), PI_REDIRECT,
		  "the probe's SYN injected");
	ring_buffer__consume(fx.rb);
	ASSERT_EQ(fx.events, 1, "one event");
	ASSERT_EQ(fx.last.probe_id, 11, "probe id");
	ASSERT_EQ(fx.last.kind, PI_PROBE_SENT, "sent");
	ASSERT_TRUE(fx.last.ts_ns >= before && fx.last.ts_ns <= (uint64_t)pi_mono_ns(),
		    "the injection's time, on CLOCK_MONOTONIC");

	/* an echo request: id and sequence name the probe */
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET6, "fd00::1",
		"fd00::2", IPPROTO_ICMP });
	pkt[54] = 128;				/* echo request */
	*(uint16_t *)(pkt + 58) = htons(61004);
	*(uint16_t *)(pkt + 60) = htons(2);
	ASSERT_EQ(fixture_run(prog, fx.ifindex, pkt, len, NULL), PI_REDIRECT,
		  "the probe's echo request injected");
	ring_buffer__consume(fx.rb);
	ASSERT_EQ(fx.events, 2, "one more event");
	ASSERT_EQ(fx.last.probe_id, 12, "probe id");
	ASSERT_EQ(fx.last.kind, PI_PROBE_SENT, "sent");
	/* an echo reply with the same id and sequence is no probe's frame */
	pkt[54] = 129;
	fixture_run(prog, fx.ifindex, pkt, len, NULL);
	/* another sequence, another port, a source port below the range */
	pkt[54] = 128;
	*(uint16_t *)(pkt + 60) = htons(3);
	fixture_run(prog, fx.ifindex, pkt, len, NULL);
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_TCP, 61000, 81, 0x02 });
	fixture_run(prog, fx.ifindex, pkt, len, NULL);
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.1",
		"10.0.0.2", IPPROTO_TCP, 40000, 80, 0x02 });
	ASSERT_EQ(fixture_run(prog, fx.ifindex, pkt, len, NULL), PI_REDIRECT,
		  "the pod's own flow injected");
	ring_buffer__consume(fx.rb);
	ASSERT_EQ(fx.events, 2, "no event for any of them");
	fx_teardown(&fx);
}

/* Answers the ring has no room for (an answer flood, a probe held from
 * reading) are still taken from the pod, and counted on the probe's flow:
 * every answer is reported or counted, so the probe can tell an answer it
 * could not hear from no answer. */
UNIT_TEST(probe_answers_past_a_full_ring_counted)
{
	const uint32_t flood = 40000;	/* more than the 1 MiB ring holds */
	struct pi_probe_flow f = { 0 };
	struct pi_flow_key k;
	uint8_t pkt[PKT_MAX], out[2048];
	struct pr_fx fx;
	int len;

	if (!fx_setup(&fx))
		return;
	k = add_flow(&fx, AF_INET, IPPROTO_UDP, "10.0.0.1", "10.0.0.2", 61003,
		     53, 11);
	len = pkt_build(pkt, &(struct pkt_spec){ AF_INET, "10.0.0.2",
		"10.0.0.1", IPPROTO_UDP, 53, 61003 });
	{
		struct __sk_buff ctx = { .ifindex = fx.ifindex };
		DECLARE_LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = pkt,
				    .data_size_in = len, .data_out = out,
				    .data_size_out = sizeof(out),
				    .ctx_in = &ctx, .ctx_size_in = sizeof(ctx),
				    .repeat = flood);

		/* one run of `flood` answers, the ring not read between */
		ASSERT_OK(bpf_prog_test_run_opts(bpf_program__fd(fx.skel->progs.pod_reply),
						 &opts), "flood run");
		ASSERT_EQ(opts.retval, PI_DROP, "the last answer taken too");
	}
	ring_buffer__consume(fx.rb);
	ASSERT_OK(bpf_map__lookup_elem(fx.skel->maps.probe_flows, &k,
				       sizeof(k), &f, sizeof(f), 0),
		  "flow entry");
	ASSERT_TRUE(f.unreported > 0, "answers past the ring counted");
	ASSERT_EQ((uint32_t)fx.events + f.unreported, flood,
		  "every answer reported or counted");
	ASSERT_EQ(f.probe_id, 11, "the entry still the probe's");
	fx_teardown(&fx);
}
