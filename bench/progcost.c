/* SPDX-License-Identifier: GPL-2.0 */
/*
 * progcost: what podinject's programs cost per packet, measured with
 * BPF_PROG_TEST_RUN and `repeat` (the kernel runs the program REPEAT times
 * on one skb and reports the mean time per run). No traffic: the programs
 * find their pod by skb->ifindex, so the tool makes veth devices in a
 * private network namespace of its own, like the unit tests do.
 *
 *   progcost [--reps N] [--target-ms MS] [--baseline DIR [--baseline-name NAME]]...
 *
 * --baseline: DIR holds node.bpf.o and inject.bpf.o of another build (an
 * older release's or commit's, from git history; up to four, each named
 * by the --baseline-name after it): the cases of the datapath's floor run
 * on its programs too, in the same rounds, named "... [NAME]", so what a
 * change costs is a ratio of one run. A build older than the pods map's
 * present layout (before 2026-12-01 it began with the pod's name) gets
 * its pods in its own layout; a case such a build decides otherwise than
 * this one (a program it did not have) is left out, said on stderr. The monitor's cases run with a monitor asking for
 * events (bpf/lib/monitor.h), beside the same cases without.
 *
 * Cases run interleaved (case 1, case 2, ..., case 1, case 2, ...), N
 * rounds; each prints one JSON line {"variant":..,"rep":i,"value":ns}.
 * REPEAT is calibrated per case so one measurement takes about MS ms.
 */
#include <errno.h>
#include <net/if.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <bpf/btf.h>
#include "podinject_abi.h"
#include "cls.h"
#include "node.skel.h"
#include "inject.skel.h"

#define PKT_LEN	(14 + 20 + 20 + 18)
#define MAX_BASELINES	4
#define BASELINE_CASES	6

struct tcase {
	const char *name;
	int prog_fd;
	int ifindex;
	unsigned char pkt[128];
	int len;
	int expect;		/* the verdict the case must produce */
	unsigned int repeat;
	unsigned int max_repeat;	/* 0: no limit */
	struct ring_buffer *rb;	/* drained after each run */
	int mon_fd;		/* monitor_config to set for the run, or 0 */
	__u32 mon_kinds;
	bool optional;		/* another build's: left out if it fails */
	bool dropped;
};

static int rb_discard(void *ctx, void *data, size_t size)
{
	return 0;
}

static int libbpf_quiet(enum libbpf_print_level l, const char *f, va_list a)
{
	return l == LIBBPF_WARN ? vfprintf(stderr, f, a) : 0;
}

/* A TCP SYN from src:40000 to dst:80, 72 bytes on the wire. */
static int build_pkt(unsigned char *buf, const char *src, const char *dst)
{
	struct ethhdr *eth = (void *)buf;
	struct iphdr *ip = (void *)(eth + 1);
	struct tcphdr *th = (void *)(ip + 1);

	memset(buf, 0, PKT_LEN);
	memcpy(eth->h_dest, "\x02\x00\x00\x00\x00\x01", 6);
	memcpy(eth->h_source, "\x02\x00\x00\x00\x00\x02", 6);
	eth->h_proto = htons(ETH_P_IP);
	ip->version = 4;
	ip->ihl = 5;
	ip->ttl = 64;
	ip->protocol = IPPROTO_TCP;
	ip->tot_len = htons(PKT_LEN - 14);
	inet_pton(AF_INET, src, &ip->saddr);
	inet_pton(AF_INET, dst, &ip->daddr);
	th->source = htons(40000);
	th->dest = htons(80);
	th->doff = 5;
	th->syn = 1;
	return PKT_LEN;
}

static int make_dev(const char *name)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd),
		 "ip link add %s type veth peer name %s-p && ip link set %s up && ip link set %s-p up",
		 name, name, name, name);
	if (system(cmd))
		return -1;
	return if_nametoindex(name);
}

/* Before the pods map's present layout its value began with the pod's
 * name (32 bytes, unused by the programs); such a map is filled so. */
#define OLD_POD_NAME_LEN	32

static void add_pod_maps(struct bpf_map *pods, struct bpf_map *endpoints,
			 __u32 id, int ifindex, const char *ip4)
{
	unsigned char old[OLD_POD_NAME_LEN + sizeof(struct pi_pod)] = { 0 };
	struct pi_pod pod = { .id = id, .ifindex = ifindex,
			      .flags = PI_DP_POD_HAS_V4 };
	struct pi_endpoint ep = { .kind = PI_EP_POD, .pod_ifindex = ifindex,
				  .pod_id = id };
	struct pi_endpoint_key k = { .family = AF_INET };

	inet_pton(AF_INET, ip4, &pod.ip4);
	memcpy(pod.pod_mac, "\x02\xaa\x00\x00\x00\x01", 6);
	memcpy(pod.host_mac, "\x02\xaa\x00\x00\x00\xfe", 6);
	memcpy(ep.pod_mac, pod.pod_mac, 6);
	memcpy(ep.host_mac, pod.host_mac, 6);
	k.addr.a[0] = pod.ip4;
	if (bpf_map__value_size(pods) == sizeof(old)) {
		memcpy(old + OLD_POD_NAME_LEN, &pod, sizeof(pod));
		bpf_map__update_elem(pods, &ifindex, 4, old, sizeof(old), 0);
	} else {
		bpf_map__update_elem(pods, &ifindex, 4, &pod, sizeof(pod), 0);
	}
	bpf_map__update_elem(endpoints, &k, sizeof(k), &ep, sizeof(ep), 0);
}

static void add_pod(struct node_bpf *skel, __u32 id, int ifindex,
		    const char *ip4)
{
	add_pod_maps(skel->maps.pods, skel->maps.endpoints, id, ifindex, ip4);
}

/* Sets the read-only global `name` of an opened object (before load) to
 * `v`, found through the object's BTF; quietly nothing if it has none. */
static void set_rodata_bool(struct bpf_object *obj, const char *name, bool v)
{
	struct bpf_map *ro = bpf_object__find_map_by_name(obj, ".rodata");
	struct btf *btf = bpf_object__btf(obj);
	const struct btf_var_secinfo *vs;
	const struct btf_type *sec;
	const void *init;
	size_t size;
	char *data;
	int id;

	if (!ro || !btf)
		return;
	id = btf__find_by_name_kind(btf, ".rodata", BTF_KIND_DATASEC);
	init = bpf_map__initial_value(ro, &size);
	if (id < 0 || !init || !(data = malloc(size)))
		return;
	memcpy(data, init, size);
	sec = btf__type_by_id(btf, id);
	vs = btf_var_secinfos(sec);
	for (int i = 0; i < btf_vlen(sec); i++, vs++) {
		const struct btf_type *var = btf__type_by_id(btf, vs->type);

		if (!strcmp(btf__name_by_offset(btf, var->name_off), name) &&
		    vs->offset + 1 <= size)
			data[vs->offset] = v;
	}
	bpf_map__set_initial_value(ro, data, size);
	free(data);
}

/* Another build's object file, loaded as it is but for decrement_ttl
 * (see below). NULL when it cannot be. */
static struct bpf_object *open_other(const char *dir, const char *file)
{
	struct bpf_object *obj;
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	obj = bpf_object__open_file(path, NULL);
	if (!obj)
		return NULL;
	set_rodata_bool(obj, "decrement_ttl", false);
	if (bpf_object__load(obj)) {
		bpf_object__close(obj);
		return NULL;
	}
	return obj;
}

static int prog_fd_of(struct bpf_object *obj, const char *name)
{
	struct bpf_program *p = bpf_object__find_program_by_name(obj, name);

	return p ? bpf_program__fd(p) : -1;
}

/* `count` rules for pod `id`'s egress at slot `start`, none of which
 * matches the test packet (deny tcp 192.0.2.0/24 port 1000+i): the
 * default (allow) decides, after the rule walk went through all of them
 * before the classifier. With `deny_last`, the last of them denies
 * everything, so no flow entry is made and every run is a flow's first
 * packet. */
static int set_rules_last(struct node_bpf *skel, __u32 id, __u32 count,
			  __u32 start, bool deny_last);

static int set_rules(struct node_bpf *skel, __u32 id, __u32 count,
		     __u32 start)
{
	return set_rules_last(skel, id, count, start, false);
}

static int set_rules_last(struct node_bpf *skel, __u32 id, __u32 count,
			  __u32 start, bool deny_last)
{
	struct cls_maps m = CLS_MAPS_OF(skel);
	struct pi_dp_rule *rules = calloc(count, sizeof(*rules));
	int err;

	if (!rules)
		return -ENOMEM;
	for (__u32 i = 0; i < count; i++) {
		struct pi_dp_rule r = { .id = start + i + 1, .action = PI_DP_DENY,
				     .proto = IPPROTO_TCP, .family = AF_INET,
				     .prefixlen = 24,
				     .port_lo = 1000 + i % 50000,
				     .port_hi = 1000 + i % 50000 };

		inet_pton(AF_INET, "192.0.2.0", &r.addr.a[0]);
		if (deny_last && i == count - 1)
			r = (struct pi_dp_rule){ .id = start + i + 1,
					      .action = PI_DP_DENY };
		rules[i] = r;
	}
	/* as the library publishes an edit: rules, their classifier, the
	 * reference flipped (lib/cls.c) */
	err = cls_publish(&m, id, PI_DP_DIR_EGRESS, rules, count, start, NULL);
	free(rules);
	return err;
}

static void set_kinds(int fd, __u32 kinds)
{
	struct pi_dp_monitor_config cfg = { .kinds = kinds };
	__u32 zero = 0;

	bpf_map_update_elem(fd, &zero, &cfg, 0);
}

/* The head program's record of a device (inject/head_roles), in an
 * object that has the map. */
static void set_roles(struct bpf_map *roles, __u32 ifindex, __u32 value)
{
	if (roles)
		bpf_map__update_elem(roles, &ifindex, sizeof(ifindex), &value,
				     sizeof(value), 0);
}

static int run_case(struct tcase *c, unsigned int repeat, double *ns)
{
	struct __sk_buff ctx = { .ifindex = c->ifindex };
	unsigned char out[256];
	DECLARE_LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = c->pkt,
			    .data_size_in = c->len, .data_out = out,
			    .data_size_out = sizeof(out), .ctx_in = &ctx,
			    .ctx_size_in = sizeof(ctx), .repeat = repeat);
	int err;

	if (c->mon_fd)
		set_kinds(c->mon_fd, c->mon_kinds);
	err = bpf_prog_test_run_opts(c->prog_fd, &opts);
	if (c->mon_fd)
		set_kinds(c->mon_fd, 0);
	if (err)
		return err;
	if ((int)opts.retval != c->expect) {
		fprintf(stderr, "error: %s returned %d, expected %d\n",
			c->name, (int)opts.retval, c->expect);
		return -EINVAL;
	}
	*ns = opts.duration;	/* mean ns per run, as the kernel reports */
	if (c->rb)
		ring_buffer__consume(c->rb);
	return 0;
}

int main(int argc, char **argv)
{
	struct node_bpf *node = NULL, *full = NULL;
	struct inject_bpf *inj = NULL;
	struct bpf_object *bnode[MAX_BASELINES] = { 0 };
	struct bpf_object *binj[MAX_BASELINES] = { 0 };
	const char *baseline[MAX_BASELINES], *bname[MAX_BASELINES];
	int nbase = 0;
	struct tcase cases[48 + MAX_BASELINES * BASELINE_CASES];
	int reps = 5, target_ms = 200, n = 0, ifa, ifb, ifi, ifu, err = 1;
	static const __u32 sizes[4] = { 1, 100, 1000, 10000 };
	int ifs[4], iff[4], ifz;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--reps"))
			reps = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--target-ms"))
			target_ms = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--baseline") &&
			 nbase < MAX_BASELINES) {
			baseline[nbase] = argv[i + 1];
			bname[nbase++] = "baseline";
		} else if (!strcmp(argv[i], "--baseline-name") && nbase)
			bname[nbase - 1] = argv[i + 1];
	}
	libbpf_set_print(libbpf_quiet);
	if (unshare(CLONE_NEWNET)) {
		fprintf(stderr, "error: unshare: %s\n", strerror(errno));
		return 1;
	}
	system("ip link set lo up");
	ifa = make_dev("pca");
	ifb = make_dev("pcb");
	ifi = make_dev("pci");
	ifu = make_dev("pcu");
	for (int i = 0; i < 4; i++) {
		char name[16];

		snprintf(name, sizeof(name), "pcs%d", i);
		ifs[i] = make_dev(name);
		snprintf(name, sizeof(name), "pcf%d", i);
		iff[i] = make_dev(name);
		if (ifs[i] <= 0 || iff[i] <= 0)
			ifa = -1;
	}
	ifz = make_dev("pcz");
	if (ifa <= 0 || ifb <= 0 || ifi <= 0 || ifu <= 0 || ifz <= 0) {
		fprintf(stderr, "error: cannot make devices\n");
		return 1;
	}

	/* the repeats of a test run share one skb: a TTL decremented by each
	 * would run out (bpf/lib/ttl.h), so these runs leave it alone */
	node = node_bpf__open();
	full = node_bpf__open();
	if (node && full) {
		node->rodata->decrement_ttl = false;
		full->rodata->decrement_ttl = false;
		if (node_bpf__load(node) || node_bpf__load(full)) {
			node_bpf__destroy(node);
			node_bpf__destroy(full);
			node = full = NULL;
		}
	}
	inj = inject_bpf__open_and_load();
	if (!node || !full || !inj) {
		fprintf(stderr, "error: cannot load podinject's programs\n");
		goto out;
	}
	add_pod(node, 0, ifa, "10.0.0.1");
	add_pod(node, 1, ifb, "10.0.0.2");
	add_pod(node, 2, ifu, "10.0.0.3");
	add_pod(node, 3, ifi, "10.0.0.4");
	/* the no-policy cases' destination: a pod without rules either (a
	 * pod with rules is tracked at its ingress, 10.0.0.3 has 100) */
	add_pod(node, 4, ifz, "10.0.0.5");
	/* pod 0: no rules; pods 1, 2, 3 get 1, 100 and 10 000 non-matching
	 * rules (sent from their own devices) */
	if (set_rules(node, 1, 1, 0) || set_rules(node, 2, 100, 16) ||
	    set_rules(node, 3, 10000, 1024)) {
		fprintf(stderr, "error: cannot install rules\n");
		goto out;
	}
	/* pods 10..13: an established flow at 1, 100, 1000, 10 000 rules;
	 * pods 20..23: the same rules ending in a deny of everything, so
	 * that every run walks them all as a flow's first packet does */
	{
		__u32 slot = 12000;

		for (int i = 0; i < 4; i++) {
			char ip[16];

			snprintf(ip, sizeof(ip), "10.0.1.%d", i + 1);
			add_pod(node, 10 + i, ifs[i], ip);
			snprintf(ip, sizeof(ip), "10.0.2.%d", i + 1);
			add_pod(node, 20 + i, iff[i], ip);
			if (set_rules(node, 10 + i, sizes[i], slot) ||
			    set_rules_last(node, 20 + i, sizes[i],
					   slot + sizes[i], true)) {
				fprintf(stderr, "error: cannot install rules\n");
				goto out;
			}
			slot += 2 * sizes[i];
		}
	}
	/* a node of its own whose flow table is full: 65 536 flows of
	 * another pod, then pod 0's flow among them (pod 0 has a rule: a pod
	 * without one is not tracked) */
	add_pod(full, 0, ifz, "10.0.3.1");
	add_pod(full, 1, ifa, "10.0.0.1");
	if (set_rules(full, 0, 1, 0)) {
		fprintf(stderr, "error: cannot install rules\n");
		goto out;
	}
	for (__u32 i = 0; i < PI_MAX_CT; i++) {
		struct pi_ct_key k = { .pod_id = 500, .family = AF_INET,
				       .proto = IPPROTO_TCP,
				       .pod_port = i & 0xffff,
				       .peer_port = 80 };
		struct pi_ct_entry e = { .state = PI_DP_CT_ESTABLISHED,
					 .last_ns = ~0ull >> 2 };

		k.pod.a[0] = htonl(0x0a000000 | (i >> 16));
		k.peer.a[0] = htonl(0xc0000201);
		bpf_map__update_elem(full->maps.ct, &k, sizeof(k), &e,
				     sizeof(e), 0);
	}

#define ADD(NAME, FD, IF, SRC, DST, EXPECT) do {			\
		cases[n] = (struct tcase){ .name = NAME, .prog_fd = FD,	\
					   .ifindex = IF,		\
					   .expect = EXPECT };		\
		cases[n].len = build_pkt(cases[n].pkt, SRC, DST);	\
		n++;							\
	} while (0)
	int egress = bpf_program__fd(node->progs.pod_egress);
	/* r0 = 0; exit: what BPF_PROG_TEST_RUN itself costs per run */
	struct bpf_insn empty[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	int empty_fd = bpf_prog_load(BPF_PROG_TYPE_SCHED_CLS, "pb_empty", "GPL",
				     empty, 2, NULL);

	if (empty_fd < 0) {
		fprintf(stderr, "error: cannot load the empty program\n");
		goto out;
	}
	ADD("empty program (test-run overhead)", empty_fd, ifa, "10.0.0.1",
	    "10.0.0.3", PI_PASS);

	ADD("pod_egress, no policy", egress, ifa, "10.0.0.1", "10.0.0.5",
	    PI_REDIRECT);
	static const char *const est[4] = {
		"pod_egress, established, 1 rule",
		"pod_egress, established, 100 rules",
		"pod_egress, established, 1000 rules",
		"pod_egress, established, 10000 rules",
	};
	static const char *const first[4] = {
		"pod_egress, first packet, 1 rule",
		"pod_egress, first packet, 100 rules",
		"pod_egress, first packet, 1000 rules",
		"pod_egress, first packet, 10000 rules",
	};
	for (int i = 0; i < 4; i++) {
		char ip[16];

		snprintf(ip, sizeof(ip), "10.0.1.%d", i + 1);
		ADD(est[i], egress, ifs[i], ip, "10.0.0.1", PI_REDIRECT);
		snprintf(ip, sizeof(ip), "10.0.2.%d", i + 1);
		ADD(first[i], egress, iff[i], ip, "10.0.0.1", PI_DROP);
	}
	/* the peer inside every rule's CIDR: the address class holds all
	 * 10 000 rules, only the port tells them from the last */
	ADD("pod_egress, first packet, 10000 rules, CIDR covers", egress,
	    iff[3], "10.0.2.4", "192.0.2.7", PI_DROP);
	ADD("pod_egress, established, 1 rule, flow table full",
	    bpf_program__fd(full->progs.pod_egress), ifz, "10.0.3.1",
	    "10.0.0.1", PI_REDIRECT);
	ADD("pod_egress, spoofed (drop)", egress, ifa, "10.0.0.9", "10.0.0.2",
	    PI_DROP);
	ADD("pod_ingress (stack to pod)", bpf_program__fd(node->progs.pod_ingress),
	    ifa, "192.0.2.1", "10.0.0.1", PI_PASS);
	ADD("uplink_ingress (to local pod)",
	    bpf_program__fd(node->progs.uplink_ingress), ifa, "192.0.2.1",
	    "10.0.0.1", PI_REDIRECT);

	/* injection: pod "pci" may speak for 10.0.0.1 (fallback path) */
	{
		struct pi_inject_key k = { .injector_ifindex = ifi,
					   .family = AF_INET };
		struct pi_inject_target t = { .target_ifindex = ifa,
					      .path = PI_DP_PATH_FALLBACK };
		int fd = bpf_program__fd(inj->progs.inject_egress);

		inet_pton(AF_INET, "10.0.0.1", &k.addr.a[0]);
		bpf_map__update_elem(inj->maps.inject_auth, &k, sizeof(k), &t,
				     sizeof(t), 0);
		/* the injector's record, as `inject allow` writes it */
		set_roles(inj->maps.head_roles, ifi,
			  PI_DP_ROLE_KNOWN | PI_DP_ROLE_INJECT);
		ADD("inject_egress, authorised (fallback redirect)", fd, ifi,
		    "10.0.0.1", "10.0.0.2", PI_REDIRECT);
		ADD("inject_egress, own traffic (pass on)", fd, ifi,
		    "10.0.0.4", "10.0.0.2", PI_NEXT);
		/* without a record (a device past the array, a node whose
		 * upgrade did not fill it): every check, as before it */
		ADD("inject_egress, own traffic, no record (every check)", fd,
		    ifb, "10.0.0.2", "10.0.0.4", PI_NEXT);
		/* a device whose last role went, its head not yet detached */
		set_roles(inj->maps.head_roles, ifu, PI_DP_ROLE_KNOWN);
		ADD("inject_egress, a device with no role", fd, ifu,
		    "10.0.0.3", "10.0.0.4", PI_NEXT);
	}

	/* the synthetic probe's reply matching (pod_reply, at a probed pod's
	 * eth0): a SYN-ACK answering probe 1 is reported through the ring
	 * buffer and dropped; any other packet passes on */
	{
		struct pi_flow_key k = { .family = AF_INET,
					 .proto = IPPROTO_TCP,
					 .pod_port = htons(40000),
					 .dst_port = htons(80) };
		struct pi_probe_flow f = { .probe_id = 1 };
		int fd = bpf_program__fd(inj->progs.pod_reply);

		inet_pton(AF_INET, "10.0.0.1", &k.pod.a[0]);
		inet_pton(AF_INET, "10.0.0.2", &k.dst.a[0]);
		bpf_map__update_elem(inj->maps.probe_flows, &k, sizeof(k), &f,
				     sizeof(f), 0);
		ADD("pod_reply, probe answer taken (ring buffer)", fd, ifa,
		    "10.0.0.2", "10.0.0.1", PI_DROP);
		/* the answer: from 10.0.0.2:80 to 10.0.0.1:40000, SYN|ACK */
		cases[n - 1].pkt[14 + 20 + 0] = 0;
		cases[n - 1].pkt[14 + 20 + 1] = 80;
		cases[n - 1].pkt[14 + 20 + 2] = 40000 >> 8;
		cases[n - 1].pkt[14 + 20 + 3] = 40000 & 0xff;
		cases[n - 1].pkt[14 + 20 + 13] = 0x12;
		/* one event per run; the buffer (1 MiB) must not fill up
		 * within a measurement, or the rest would measure a full
		 * buffer */
		cases[n - 1].max_repeat = 20000;
		cases[n - 1].rb = ring_buffer__new(
			bpf_map__fd(inj->maps.probe_events), rb_discard, NULL,
			NULL);
		ADD("pod_reply, other packet (pass on)", fd, ifa, "10.0.0.2",
		    "10.0.0.1", PI_NEXT);
	}

	/* The monitor (bpf/lib/monitor.h): the same cases with a monitor
	 * asking for every kind; a drop and an injection then write an event
	 * each run, drained after it, and the buffer (4 MiB) must not fill
	 * within a measurement */
	{
		__u32 all = 1u << PI_DP_MON_DROP | 1u << PI_DP_MON_VERDICT |
			    1u << PI_DP_MON_INJECT | 1u << PI_DP_MON_PROXY;
		int nfd = bpf_map__fd(node->maps.monitor_config);
		int ifd = bpf_map__fd(inj->maps.monitor_config);

		ADD("pod_egress, no policy, monitor on", egress, ifa,
		    "10.0.0.1", "10.0.0.5", PI_REDIRECT);
		cases[n - 1].mon_fd = nfd;
		cases[n - 1].mon_kinds = all;
		ADD("pod_egress, spoofed (drop), monitor on (an event each)",
		    egress, ifa, "10.0.0.9", "10.0.0.2", PI_DROP);
		cases[n - 1].mon_fd = nfd;
		cases[n - 1].mon_kinds = all;
		cases[n - 1].max_repeat = 20000;
		cases[n - 1].rb = ring_buffer__new(
			bpf_map__fd(node->maps.monitor_events), rb_discard,
			NULL, NULL);
		ADD("inject_egress, authorised, monitor on (an event each)",
		    bpf_program__fd(inj->progs.inject_egress), ifi,
		    "10.0.0.1", "10.0.0.2", PI_REDIRECT);
		cases[n - 1].mon_fd = ifd;
		cases[n - 1].mon_kinds = all;
		cases[n - 1].max_repeat = 20000;
		cases[n - 1].rb = ring_buffer__new(
			bpf_map__fd(inj->maps.monitor_events), rb_discard,
			NULL, NULL);
		ADD("inject_egress, own traffic, monitor on",
		    bpf_program__fd(inj->progs.inject_egress), ifi,
		    "10.0.0.4", "10.0.0.2", PI_NEXT);
		cases[n - 1].mon_fd = ifd;
		cases[n - 1].mon_kinds = all;
	}

	/* the datapath's floor on other builds' programs */
	for (int b = 0; b < nbase; b++) {
		static char names[MAX_BASELINES][BASELINE_CASES][128];
		/* the floor's cases as this build's are named and sent */
		const struct {
			const char *what, *prog;
			bool inject;	/* inject.bpf.o's, else node.bpf.o's */
			int ifindex;
			const char *src, *dst;
			int expect;
		} bc[BASELINE_CASES] = {
			{ "pod_egress, no policy", "pod_egress", false, ifa,
			  "10.0.0.1", "10.0.0.5", PI_REDIRECT },
			{ "pod_egress, spoofed (drop)", "pod_egress", false, ifa,
			  "10.0.0.9", "10.0.0.2", PI_DROP },
			{ "pod_ingress (stack to pod)", "pod_ingress", false, ifa,
			  "192.0.2.1", "10.0.0.1", PI_PASS },
			{ "uplink_ingress (to local pod)", "uplink_ingress", false,
			  ifa, "192.0.2.1", "10.0.0.1", PI_REDIRECT },
			{ "inject_egress, authorised (fallback redirect)",
			  "inject_egress", true, ifi, "10.0.0.1", "10.0.0.2",
			  PI_REDIRECT },
			{ "inject_egress, own traffic (pass on)", "inject_egress",
			  true, ifi, "10.0.0.4", "10.0.0.2", PI_NEXT },
		};
		struct bpf_map *pods, *eps, *auth;

		bnode[b] = open_other(baseline[b], "node.bpf.o");
		binj[b] = open_other(baseline[b], "inject.bpf.o");
		pods = bnode[b] ? bpf_object__find_map_by_name(bnode[b], "pods") : NULL;
		eps = bnode[b] ? bpf_object__find_map_by_name(bnode[b], "endpoints") : NULL;
		auth = binj[b] ? bpf_object__find_map_by_name(binj[b], "inject_auth") : NULL;
		if (!pods || !eps || !auth ||
		    (bpf_map__value_size(pods) != sizeof(struct pi_pod) &&
		     bpf_map__value_size(pods) != OLD_POD_NAME_LEN + sizeof(struct pi_pod)) ||
		    bpf_map__value_size(eps) != sizeof(struct pi_endpoint) ||
		    bpf_map__value_size(auth) != sizeof(struct pi_inject_target)) {
			/* the others are still measured */
			fprintf(stderr, "progcost: %s left out: its programs from %s do not load here, or their maps are laid out otherwise\n",
				bname[b], baseline[b]);
			continue;
		}
		add_pod_maps(pods, eps, 0, ifa, "10.0.0.1");
		add_pod_maps(pods, eps, 1, ifb, "10.0.0.2");
		add_pod_maps(pods, eps, 2, ifu, "10.0.0.3");
		add_pod_maps(pods, eps, 4, ifz, "10.0.0.5");
		{
			struct pi_inject_key k = { .injector_ifindex = ifi,
						   .family = AF_INET };
			struct pi_inject_target t = { .target_ifindex = ifa,
						      .path = PI_DP_PATH_FALLBACK };

			inet_pton(AF_INET, "10.0.0.1", &k.addr.a[0]);
			bpf_map__update_elem(auth, &k, sizeof(k), &t,
					     sizeof(t), 0);
			/* a build with the head's records: the injector's */
			set_roles(bpf_object__find_map_by_name(binj[b],
							       "head_roles"),
				  ifi, PI_DP_ROLE_KNOWN | PI_DP_ROLE_INJECT);
		}
		for (int c = 0; c < BASELINE_CASES; c++) {
			snprintf(names[b][c], 128, "%s [%s]", bc[c].what, bname[b]);
			ADD(names[b][c],
			    prog_fd_of(bc[c].inject ? binj[b] : bnode[b], bc[c].prog),
			    bc[c].ifindex, bc[c].src, bc[c].dst, bc[c].expect);
			cases[n - 1].optional = true;
		}
	}

	/* calibrate: one measurement of each case takes about target_ms */
	for (int i = 0; i < n; i++) {
		double ns;

		if (cases[i].optional && (cases[i].prog_fd < 0 ||
					  run_case(&cases[i], 100, &ns))) {
			fprintf(stderr, "progcost: '%s' left out: that build decides it otherwise or has no such program\n",
				cases[i].name);
			cases[i].dropped = true;
			continue;
		}
		if (run_case(&cases[i], 100, &ns))
			goto out;
		cases[i].repeat = ns > 0 ? target_ms * 1e6 / ns : 100000;
		if (cases[i].repeat < 10)
			cases[i].repeat = 10;
		if (cases[i].repeat > 20000000)
			cases[i].repeat = 20000000;
		if (cases[i].max_repeat && cases[i].repeat > cases[i].max_repeat)
			cases[i].repeat = cases[i].max_repeat;
	}
	for (int r = 1; r <= reps; r++) {
		for (int i = 0; i < n; i++) {
			double ns;

			if (cases[i].dropped)
				continue;
			if (run_case(&cases[i], cases[i].repeat, &ns))
				goto out;
			printf("{\"variant\":\"%s\",\"rep\":%d,\"value\":%.1f,\"repeat\":%u}\n",
			       cases[i].name, r, ns, cases[i].repeat);
			fflush(stdout);
		}
	}
	err = 0;
out:
	for (int i = 0; i < n; i++)
		ring_buffer__free(cases[i].rb);
	node_bpf__destroy(node);
	node_bpf__destroy(full);
	inject_bpf__destroy(inj);
	for (int b = 0; b < nbase; b++) {
		bpf_object__close(bnode[b]);
		bpf_object__close(binj[b]);
	}
	return err;
}
