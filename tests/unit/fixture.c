/* SPDX-License-Identifier: GPL-2.0 */
#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "cls.h"
#include "fixture.h"
#include "nl.h"

int fixture_netns(void)
{
	static bool done;

	if (done)
		return 0;
	if (unshare(CLONE_NEWNET))
		return -errno;
	done = true;
	nl_link_set_up(1);
	return 0;
}

int fixture_dev(const char *name)
{
	char peer[16];
	int ifindex = nl_link_index(name);

	if (ifindex > 0)
		return ifindex;
	snprintf(peer, sizeof(peer), "%s-p", name);
	if (nl_veth_create(name, peer, -1))
		return -1;
	ifindex = nl_link_index(name);
	nl_link_set_up(ifindex);
	nl_link_set_up(nl_link_index(peer));
	return ifindex;
}

/* The pods fixture_add_pod made: a frame run at a pod's host-side device
 * comes from its eth0, with its MAC as the Ethernet source, as the
 * datapath checks (fixture_run_as_sent keeps the frame's own). */
#define FIXTURE_PODS_MAX	64
static struct {
	int ifindex;
	uint8_t mac[6];
} fixture_pods[FIXTURE_PODS_MAX];

static void fixture_pod_mac(int ifindex, const uint8_t *mac)
{
	int i;

	for (i = 0; i < FIXTURE_PODS_MAX - 1; i++)
		if (!fixture_pods[i].ifindex ||
		    fixture_pods[i].ifindex == ifindex)
			break;
	fixture_pods[i].ifindex = ifindex;
	memcpy(fixture_pods[i].mac, mac, 6);
}

void fixture_from_pod(int ifindex, uint8_t *frame, int len)
{
	if (len < 14)
		return;
	for (int i = 0; i < FIXTURE_PODS_MAX; i++)
		if (fixture_pods[i].ifindex == ifindex) {
			memcpy(frame + 6, fixture_pods[i].mac, 6);
			return;
		}
}

int fixture_run(int prog_fd, int ifindex, const void *pkt, int len,
		void *out)
{
	static uint8_t frame[2048];

	if (len <= (int)sizeof(frame)) {
		memcpy(frame, pkt, len);
		fixture_from_pod(ifindex, frame, len);
		pkt = frame;
	}
	return fixture_run_as_sent(prog_fd, ifindex, pkt, len, out);
}

int fixture_run_as_sent(int prog_fd, int ifindex, const void *pkt, int len,
			void *out)
{
	struct __sk_buff ctx = { .ifindex = ifindex };
	static uint8_t scratch[2048];
	DECLARE_LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = pkt,
			    .data_size_in = len,
			    .data_out = out ? out : scratch,
			    .data_size_out = sizeof(scratch), .ctx_in = &ctx,
			    .ctx_size_in = sizeof(ctx), .repeat = 1);
	int err = bpf_prog_test_run_opts(prog_fd, &opts);

	return err ? -1000 + err : (int)opts.retval;
}

struct pi_redirect_record fixture_last_redirect(int map_fd)
{
	struct pi_redirect_record r = { 0 }, zero_rec = { 0 };
	uint32_t zero = 0;

	bpf_map_lookup_elem(map_fd, &zero, &r);
	bpf_map_update_elem(map_fd, &zero, &zero_rec, 0);
	return r;
}

uint64_t fixture_refused(const struct bpf_map *inject_refusals,
			 uint32_t reason)
{
	int ncpu = libbpf_num_possible_cpus();
	uint32_t i = reason - PI_DP_MON_DROP_INJECT_REDIRECT;
	uint64_t sum = 0, *v;

	if (ncpu <= 0)
		return UINT64_MAX;
	v = calloc(ncpu, sizeof(*v));
	if (!v || bpf_map__lookup_elem(inject_refusals, &i, sizeof(i), v,
				       ncpu * sizeof(*v), 0)) {
		free(v);
		return UINT64_MAX;
	}
	for (int c = 0; c < ncpu; c++)
		sum += v[c];
	free(v);
	return sum;
}

int fixture_known(const char *feature, char *val, int len)
{
	const char *root = getenv("PODINJECT_ROOT");
	char cmd[512];
	FILE *f;
	int n, rc;

	snprintf(cmd, sizeof(cmd), "%s/tests/known-features.sh %s",
		 root ? root : ".", feature);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	n = fgets(val, len, f) ? (int)strcspn(val, "\n") : 0;
	val[n] = 0;
	rc = pclose(f);
	return rc == 0 && n > 0 ? 0 : -1;
}

int fixture_set_policy(struct bpf_object *obj, uint32_t pod, uint32_t dir,
		       const struct pi_dp_rule *rules, uint32_t count,
		       uint32_t start)
{
	struct cls_maps m = {
		.rules = bpf_object__find_map_fd_by_name(obj, "rules"),
		.refs = bpf_object__find_map_fd_by_name(obj, "policy_refs"),
		.heads = bpf_object__find_map_fd_by_name(obj, "cls_heads"),
		.addrs = bpf_object__find_map_fd_by_name(obj, "cls_addrs"),
		.l4 = bpf_object__find_map_fd_by_name(obj, "cls_l4"),
		.ports = bpf_object__find_map_fd_by_name(obj, "cls_ports"),
		.classes = bpf_object__find_map_fd_by_name(obj, "cls_classes"),
		.chunks = bpf_object__find_map_fd_by_name(obj, "cls_chunks"),
	};
	const char *why = NULL;
	int err = cls_publish(&m, pod, dir, rules, count, start, &why);

	if (err)
		fprintf(stderr, "fixture_set_policy: %s: %s\n", strerror(-err),
			why ? why : "");
	return err;
}

void fixture_add_pod(const struct bpf_map *pods, const struct bpf_map *endpoints,
		     uint32_t id, int ifindex, const char *ip4, const char *ip6,
		     const uint8_t *mac, const uint8_t *hmac)
{
	struct pi_pod pod = { .id = id, .ifindex = ifindex,
			      .flags = PI_DP_POD_HAS_V4 | PI_DP_POD_HAS_V6 };
	struct pi_endpoint ep = { .kind = PI_EP_POD, .pod_ifindex = ifindex,
				  .pod_id = id };
	struct pi_endpoint_key k = { .family = AF_INET };

	inet_pton(AF_INET, ip4, &pod.ip4);
	inet_pton(AF_INET6, ip6, pod.ip6);
	memcpy(pod.pod_mac, mac, 6);
	memcpy(pod.host_mac, hmac, 6);
	memcpy(ep.pod_mac, mac, 6);
	memcpy(ep.host_mac, hmac, 6);
	fixture_pod_mac(ifindex, mac);
	bpf_map__update_elem(pods, &ifindex, 4, &pod, sizeof(pod), 0);
	k.addr.a[0] = pod.ip4;
	bpf_map__update_elem(endpoints, &k, sizeof(k), &ep, sizeof(ep), 0);
	memset(&k, 0, sizeof(k));
	k.family = AF_INET6;
	memcpy(k.addr.a, pod.ip6, 16);
	bpf_map__update_elem(endpoints, &k, sizeof(k), &ep, sizeof(ep), 0);
}
