/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Differential fuzzer of the node datapath: each input is a rule set for
 * pod A and up to four frames, each run through the real programs of
 * build/node.bpf.o with BPF_PROG_TEST_RUN (pod_egress of pod A,
 * pod_ingress of pod A, uplink_ingress) and through the user-space
 * reference (bpf_ref.h). Verdict, drop reason and counter, the deciding
 * rules' counters, the packet counters and the redirect target must
 * agree; any difference aborts with the input saved by libFuzzer.
 *
 * Input: [n_egress n_ingress] [rule x (n_egress + n_ingress)]
 *        then frames: [program flags len_hi len_lo] [bytes]
 * n_egress's top bit makes pod A a pod another plugin routes
 * (PI_DP_POD_PASS_ON: what the checks let through goes on, PI_NEXT).
 * A rule is 8 bytes (see rule_of); flags ask for fix-ups that keep a
 * mutated frame past the first checks (own source address, lengths).
 *
 * Per-flow state: the fragment table is emptied before each input (a
 * frame sequence inside one input may use it); every other hash map the
 * object has besides pods and endpoints (the connection tracker's table
 * among them) is emptied before each frame, so each frame is judged as
 * the first of its flow, and so is the reference's. Within a frame the
 * tracker's state counts: a pod's packet to itself meets its own ingress
 * check after its egress check opened the flow.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "node.skel.h"
#include "fixture.h"
#include "bpf_ref.h"

#define MAX_RULES	8
#define MAX_FRAMES	4
#define FRAME_MAX	1500

static struct node_bpf *skel;
static struct ref_node node;
static int if_up, ncpu;
static struct pi_dp_rule rules[2][MAX_RULES];
static const uint8_t MAC_A[6] = { 0x02, 0xaa, 0, 0, 0, 1 };
static const uint8_t MAC_B[6] = { 0x02, 0xbb, 0, 0, 0, 2 };

static void die(const char *what)
{
	fprintf(stderr, "fuzz_bpf: %s\n", what);
	exit(1);
}

static void add_pod(struct ref_pod *rp, uint32_t id, int ifindex,
		    const char *ip4, const char *ip6, const uint8_t *mac)
{
	struct pi_pod pod = { .id = id, .ifindex = ifindex,
			      .flags = PI_DP_POD_HAS_V4 | PI_DP_POD_HAS_V6 };
	struct pi_endpoint ep = { .kind = PI_EP_POD, .pod_ifindex = ifindex,
				  .pod_id = id };
	struct pi_endpoint_key k = { .family = AF_INET };

	inet_pton(AF_INET, ip4, &pod.ip4);
	inet_pton(AF_INET6, ip6, pod.ip6);
	memcpy(pod.pod_mac, mac, 6);
	memcpy(pod.host_mac, mac, 6);
	pod.host_mac[5] = 0xfe;
	memcpy(ep.pod_mac, pod.pod_mac, 6);
	memcpy(ep.host_mac, pod.host_mac, 6);
	if (bpf_map__update_elem(skel->maps.pods, &ifindex, 4, &pod,
				 sizeof(pod), 0))
		die("pods map");
	k.addr.a[0] = pod.ip4;
	bpf_map__update_elem(skel->maps.endpoints, &k, sizeof(k), &ep,
			     sizeof(ep), 0);
	memset(&k, 0, sizeof(k));
	k.family = AF_INET6;
	memcpy(k.addr.a, pod.ip6, 16);
	bpf_map__update_elem(skel->maps.endpoints, &k, sizeof(k), &ep,
			     sizeof(ep), 0);

	rp->id = id;
	rp->ifindex = ifindex;
	rp->ip4 = pod.ip4;
	memcpy(rp->ip6.a, pod.ip6, 16);
	memcpy(rp->mac, mac, 6);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	int if_a, if_b;

	libbpf_set_print(NULL);
	if (fixture_netns())
		die("no private network namespace (root needed)");
	if_a = fixture_dev("fzb-a");
	if_b = fixture_dev("fzb-b");
	if_up = fixture_dev("fzb-up");
	if (if_a <= 1 || if_b <= 1 || if_up <= 1)
		die("no fixture devices");
	skel = node_bpf__open();
	if (!skel)
		die("open node_bpf");
	skel->rodata->trace_redirects = true;
	if (node_bpf__load(skel))
		die("load node_bpf");
	ncpu = libbpf_num_possible_cpus();
	add_pod(&node.pod[0], 0, if_a, "10.0.0.1", "fd00::1", MAC_A);
	add_pod(&node.pod[1], 1, if_b, "10.0.0.2", "fd00::2", MAC_B);
	return 0;
}

/* Peers a rule may name: the pods, their networks, link-local space. */
static const char *const PEERS[] = {
	"10.0.0.1", "10.0.0.2", "10.0.0.0", "192.0.2.0", "0.0.0.0",
	"fd00::1", "fd00::2", "fd00::", "fe80::", "ff02::1",
};

/* 8 bytes: action|family|proto, peer, prefix length, port lo (2),
 * port hi (2), spare. Lengths beyond the family's are clamped, host
 * bits cleared: the library writes no other rules. */
static void rule_of(const uint8_t *b, uint32_t id, struct pi_dp_rule *r)
{
	static const uint8_t protos[8] = { 0, 6, 17, 1, 58, 0, 6, 17 };
	const char *peer = PEERS[b[1] % (sizeof(PEERS) / sizeof(*PEERS))];
	int fam = strchr(peer, ':') ? AF_INET6 : AF_INET;
	int max = fam == AF_INET ? 32 : 128;

	memset(r, 0, sizeof(*r));
	r->id = id;
	r->action = b[0] & 1 ? PI_DP_DENY : PI_DP_ALLOW;
	r->proto = protos[(b[0] >> 1) & 7];
	r->family = (b[0] >> 4) & 1 ? fam : 0;
	r->port_lo = ref_be16(b + 3);
	r->port_hi = ref_be16(b + 5);
	if (r->port_lo > r->port_hi || (b[0] >> 5) & 1) {
		/* a range as the CLI makes: lo <= hi, or none */
		r->port_lo = r->port_hi = 0;
	}
	if (!r->port_lo)
		r->port_hi = 0;
	if (r->family) {
		r->prefixlen = b[2] % (max + 1);
		inet_pton(fam, peer, r->addr.a);
		for (int i = 0; i < 4; i++) {
			int bits = r->prefixlen - i * 32;
			uint32_t mask = bits >= 32 ? ~0u :
					bits <= 0 ? 0 : ~(~0u >> bits);

			r->addr.a[i] &= htonl(mask);
		}
	}
}

static void clear_map(struct bpf_map *m)
{
	uint8_t key[256], next[256];
	int fd = bpf_map__fd(m);

	if (bpf_map__key_size(m) > sizeof(key))
		die("key too large");
	while (!bpf_map_get_next_key(fd, NULL, next)) {
		if (bpf_map_delete_elem(fd, next))
			break;
		memcpy(key, next, sizeof(key));
	}
}

/* Per-flow state: every hash map but the node's pods and endpoints (the
 * fragment table only when `frags`). */
static void reset_flows(bool frags)
{
	struct pi_ct_key key;
	struct bpf_map *m;

	bpf_object__for_each_map(m, skel->obj) {
		enum bpf_map_type t = bpf_map__type(m);

		if (t != BPF_MAP_TYPE_HASH && t != BPF_MAP_TYPE_LRU_HASH &&
		    t != BPF_MAP_TYPE_PERCPU_HASH &&
		    t != BPF_MAP_TYPE_LRU_PERCPU_HASH)
			continue;
		/* the node's configuration: pods, and the policy's classifier */
		if (m == skel->maps.pods || m == skel->maps.endpoints ||
		    m == skel->maps.cls_l4)
			continue;
		if (m == skel->maps.frags && !frags)
			continue;
		clear_map(m);
	}
	/* the reference starts each frame with no flow: so must the kernel */
	if (!bpf_map_get_next_key(bpf_map__fd(skel->maps.ct), NULL, &key))
		die("the connection table was not emptied");
}

static void zero_percpu(struct bpf_map *m, uint32_t key, size_t vsize)
{
	void *z = calloc(ncpu, vsize);

	bpf_map__update_elem(m, &key, 4, z, ncpu * vsize, 0);
	free(z);
}

static struct pi_dp_pod_stats pod_stats(uint32_t id)
{
	struct pi_dp_pod_stats *per = calloc(ncpu, sizeof(*per)), sum = {};

	bpf_map__lookup_elem(skel->maps.pod_stats, &id, 4, per,
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

static uint64_t rule_packets(uint32_t id)
{
	struct pi_rule_stats *per = calloc(ncpu, sizeof(*per));
	uint64_t n = 0;

	bpf_map__lookup_elem(skel->maps.rule_stats, &id, 4, per,
			     ncpu * sizeof(*per), 0);
	for (int c = 0; c < ncpu; c++)
		n += per[c].packets;
	free(per);
	return n;
}

/* Pod A as a pod another plugin routes, or as a reference pod. */
static void set_pass_on(bool on)
{
	int ifindex = node.pod[0].ifindex;
	struct pi_pod pod;

	if (bpf_map__lookup_elem(skel->maps.pods, &ifindex, 4, &pod,
				 sizeof(pod), 0))
		die("pods map");
	pod.flags = on ? pod.flags | PI_DP_POD_PASS_ON :
			 pod.flags & ~PI_DP_POD_PASS_ON;
	if (bpf_map__update_elem(skel->maps.pods, &ifindex, 4, &pod,
				 sizeof(pod), 0))
		die("pods map");
	node.pod[0].pass_on = on;
}

static void set_policy(uint32_t dir, uint32_t count, uint32_t start)
{
	fixture_set_policy(skel->obj, 0, dir, rules[dir], count, start);
	node.pod[0].rules[dir] = rules[dir];
	node.pod[0].nrules[dir] = count;
}

/* The fix-ups a frame's flags ask for, for the program it goes to. */
static void fix_up(uint8_t *f, uint32_t len, uint8_t flags, int prog)
{
	uint16_t ethertype = ref_be16(f + 12);
	const struct ref_pod *a = &node.pod[0], *b = &node.pod[1];

	if (ethertype == 0x0800 && len >= 34) {
		if (flags & 1)
			memcpy(f + 26, prog == 0 ? &a->ip4 : &b->ip4, 4);
		if (flags & 2)
			memcpy(f + 30, prog == 0 ? &b->ip4 : &a->ip4, 4);
		if (flags & 4) {
			f[16] = (len - 14) >> 8;
			f[17] = (len - 14) & 0xff;
		}
	} else if (ethertype == 0x86DD && len >= 54) {
		if (flags & 1)
			memcpy(f + 22, prog == 0 ? a->ip6.a : b->ip6.a, 16);
		if (flags & 2)
			memcpy(f + 38, prog == 0 ? b->ip6.a : a->ip6.a, 16);
		if (flags & 4) {
			f[18] = (len - 54) >> 8;
			f[19] = (len - 54) & 0xff;
		}
	}
	/* uplink frames come from elsewhere */
	if (prog == 2 && (flags & 1) && ethertype == 0x0800 && len >= 34)
		memcpy(f + 26, "\xc0\x00\x02\x07", 4);
	if (prog == 2 && (flags & 1) && ethertype == 0x86DD && len >= 54)
		memcpy(f + 22, "\x20\x01\x0d\xb8\0\0\0\0\0\0\0\0\0\0\0\x07", 16);
}

static void report(const char *what, long long got, long long want,
		   int prog, const uint8_t *f, uint32_t len)
{
	static const char *const names[] = { "pod_egress", "pod_ingress",
					     "uplink_ingress" };

	fprintf(stderr, "fuzz_bpf: %s disagrees with the reference on %s: "
		"kernel %lld, reference %lld; frame of %u bytes:", names[prog], what,
		got, want, len);
	for (uint32_t i = 0; i < len && i < 128; i++)
		fprintf(stderr, "%s%02x", i % 16 ? " " : "\n  ", f[i]);
	fprintf(stderr, "\n");
	abort();
}

static void run_frame(int prog, uint8_t *f, uint32_t len)
{
	struct bpf_program *progs[3] = { skel->progs.pod_egress,
					 skel->progs.pod_ingress,
					 skel->progs.uplink_ingress };
	int ifindex = prog == 2 ? if_up : (int)node.pod[0].ifindex;
	uint8_t frame[FRAME_MAX];
	struct pi_redirect_record rd;
	struct pi_dp_pod_stats st[2];
	struct ref_out want;
	int got;

	memcpy(frame, f, len);
	reset_flows(false);
	node.ct.n = 0;
	for (uint32_t id = 0; id < 2; id++)
		zero_percpu(skel->maps.pod_stats, id, sizeof(struct pi_dp_pod_stats));
	for (uint32_t d = 0; d < 2; d++)
		for (uint32_t i = 0; i < node.pod[0].nrules[d]; i++)
			zero_percpu(skel->maps.rule_stats, rules[d][i].id,
				    sizeof(struct pi_rule_stats));
	fixture_last_redirect(bpf_map__fd(skel->maps.redirect_trace));

	got = fixture_run(bpf_program__fd(progs[prog]), ifindex, frame, len,
			  NULL);
	/* A frame the test run refuses to build an skb of (an IPv6
	 * ethertype with less than an IPv6 header, for one) never reaches
	 * the program: nothing to compare. */
	if (got <= -1000 + -1 && got > -1000 - 4096)
		return;
	if (prog == 0)
		ref_pod_egress(&node, &node.pod[0], f, len, &want);
	else if (prog == 1)
		ref_pod_ingress(&node, &node.pod[0], f, len, &want);
	else
		ref_uplink_ingress(&node, f, len, &want);

	if (got != want.verdict)
		report("the verdict", got, want.verdict, prog, f, len);
	for (uint32_t id = 0; id < 2; id++) {
		st[id] = pod_stats(id);
		for (int r = 0; r < PI_DP_DROP_MAX; r++) {
			uint64_t n = (int)id == want.drop_pod &&
				     r == want.drop_reason;

			if (st[id].drops[r] != n)
				report(r == want.drop_reason ?
				       "the drop counter of its reason" :
				       "a drop counter of another reason",
				       st[id].drops[r], n, prog, f, len);
		}
		if (st[id].egress_packets != ((int)id == want.egress_pod))
			report("the egress packet counter",
			       st[id].egress_packets,
			       (int)id == want.egress_pod, prog, f, len);
		if (st[id].ingress_packets != ((int)id == want.ingress_pod))
			report("the ingress packet counter",
			       st[id].ingress_packets,
			       (int)id == want.ingress_pod, prog, f, len);
	}
	for (uint32_t d = 0; d < 2; d++)
		for (uint32_t i = 0; i < node.pod[0].nrules[d]; i++) {
			uint32_t id = rules[d][i].id;
			uint64_t n = rule_packets(id);

			if (n != (id == want.rule_hit[d]))
				report("the counter of a rule", n,
				       id == want.rule_hit[d], prog, f, len);
		}
	rd = fixture_last_redirect(bpf_map__fd(skel->maps.redirect_trace));
	if (want.verdict == PI_REDIRECT && rd.ifindex != want.redirect_ifindex)
		report("the redirect target", rd.ifindex,
		       want.redirect_ifindex, prog, f, len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t n[2], off = 2;

	if (size < 2)
		return -1;
	n[0] = data[0] % (MAX_RULES + 1);
	n[1] = data[1] % (MAX_RULES + 1);
	set_pass_on(data[0] & 0x80);
	if (size < off + 8 * (n[0] + n[1]))
		return -1;
	for (uint32_t d = 0; d < 2; d++) {
		for (uint32_t i = 0; i < n[d]; i++, off += 8)
			rule_of(data + off, 1 + d * 100 + i, &rules[d][i]);
		/* the policy's slots move with the input (the last byte of
		 * its rules), as edits move a policy's range */
		set_policy(d, n[d], d * 1000 + data[off - 1 > 1 ? off - 1 : 0]);
	}
	reset_flows(true);
	node.frags.n = 0;
	for (int k = 0; k < MAX_FRAMES && off + 4 <= size; k++) {
		int prog = data[off] % 3;
		uint8_t flags = data[off + 1];
		uint32_t len = ref_be16(data + off + 2);
		uint8_t f[FRAME_MAX];

		off += 4;
		if (len > size - off)
			len = size - off;
		if (len > FRAME_MAX)
			len = FRAME_MAX;
		memcpy(f, data + off, len);
		off += len;
		if (len < 14)
			continue;	/* BPF_PROG_TEST_RUN wants an Ethernet header */
		fix_up(f, len, flags, prog);
		run_frame(prog, f, len);
	}
	return 0;
}
