/* SPDX-License-Identifier: GPL-2.0 */
/*
 * podinject pod add|del|list|show: a pod is a network namespace named after
 * it, a device pair (pod side "eth0", node side "pi-NAME"), /32 and /128
 * addresses, a default route through a link-local gateway whose neighbour
 * entry is the node-side device, and the pod's programs on the node side.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "cmds.h"
#include "kernel_features.h"
#include "nl.h"
#include "util.h"
#include "xdp.h"

static int pod_help(int argc, char **argv)
{
	fprintf(stderr,
		"Usage: podinject [-N NODE] pod add NAME [--ip ADDR[/32]] [--ip6 ADDR[/128]]\n"
		"                                [--dev veth|netkit]\n"
		"       podinject [-N NODE] pod del NAME\n"
		"       podinject [-N NODE] [-j] pod list\n"
		"       podinject [-N NODE] [-j] pod show NAME\n"
		"\n"
		"NAME: 1-%d characters of a-z, 0-9 and '-'; it names the pod's\n"
		"network namespace too. At least one of --ip and --ip6.\n",
		POD_NAME_MAX);
	return EXIT_OK;
}

struct pod_args {
	const char *name;
	bool has4, has6, netkit;
	struct pi_addr ip4, ip6;
};

static int parse_host_addr(const char *s, int want, struct pi_addr *a)
{
	int family, plen;

	if (parse_prefix(s, &family, a, &plen) || family != want)
		return -EINVAL;
	if (plen != (want == AF_INET ? 32 : 128))
		return -EINVAL;
	return 0;
}

static int endpoint_exists(const struct node *n, int family,
			   const struct pi_addr *a)
{
	struct pi_endpoint_key key = { .family = family, .addr = *a };
	struct pi_endpoint ep;

	return !bpf_map_lookup_elem(n->maps[M_ENDPOINTS], &key, &ep);
}

static int free_pod_id(const struct node *n, uint32_t *id)
{
	static bool used[PI_MAX_PODS];
	uint32_t key, next, *prev = NULL;
	struct pi_pod pod;

	memset(used, 0, sizeof(used));
	while (!bpf_map_get_next_key(n->maps[M_PODS], prev, &next)) {
		if (!bpf_map_lookup_elem(n->maps[M_PODS], &next, &pod) &&
		    pod.id < PI_MAX_PODS)
			used[pod.id] = true;
		key = next;
		prev = &key;
	}
	for (uint32_t i = 0; i < PI_MAX_PODS; i++) {
		if (!used[i]) {
			*id = i;
			return 0;
		}
	}
	return -ENOSPC;
}

static void pod_link_pin(const struct node *n, const char *pod,
			 const char *hook, char *buf, size_t len)
{
	node_pin_path(n, buf, len, "link_pod_%s_%s", pod, hook);
}

static enum pi_hook egress_hook(const struct pi_pod *pod)
{
	return pod->flags & PI_POD_NETKIT ? PI_HOOK_NETKIT_PEER :
					    PI_HOOK_INGRESS;
}

static enum pi_hook ingress_hook(const struct pi_pod *pod)
{
	return pod->flags & PI_POD_NETKIT ? PI_HOOK_NETKIT_PRIMARY :
					    PI_HOOK_EGRESS;
}

/* Inside the pod's namespace: addresses, eth0 up, default routes through
 * the link-local gateways, whose neighbour entries are the node side's MAC
 * so the pod never has to resolve them. */
static int setup_pod_side(const struct pod_args *a, struct pi_pod *pod)
{
	struct in_addr gw4;
	struct in6_addr gw6;
	int ifindex, err;

	inet_pton(AF_INET, GW4, &gw4);
	inet_pton(AF_INET6, GW6, &gw6);
	ifindex = nl_link_index("eth0");
	if (ifindex < 0)
		return ifindex;
	pod->peer_ifindex = ifindex;
	err = nl_link_get_mac(ifindex, pod->pod_mac);
	if (!err && a->has4)
		err = nl_addr_add(ifindex, AF_INET, &a->ip4.a[0], 32);
	if (!err && a->has6)
		err = nl_addr_add(ifindex, AF_INET6, a->ip6.a, 128);
	if (!err)
		err = nl_link_set_up(ifindex);
	if (!err && a->has4)
		err = nl_neigh_add(ifindex, AF_INET, &gw4, pod->host_mac);
	if (!err && a->has4)
		err = nl_route_add(AF_INET, (uint8_t[4]){ 0 }, 0, &gw4,
				   ifindex);
	if (!err && a->has6)
		err = nl_neigh_add(ifindex, AF_INET6, &gw6, pod->host_mac);
	if (!err && a->has6)
		err = nl_route_add(AF_INET6, (uint8_t[16]){ 0 }, 0, &gw6,
				   ifindex);
	return err;
}

/* Inside the node's namespace: the host route and neighbour for each pod
 * address, so the node's own stack and the uplink reach the pod too. */
static int setup_node_side(const struct pod_args *a, struct pi_pod *pod)
{
	char ra[64 + IFNAMSIZ];
	int err;

	/* A pod is never the node's router (the datapath drops its RAs). */
	snprintf(ra, sizeof(ra), "net/ipv6/conf/" POD_DEV_PREFIX "%s/accept_ra",
		 a->name);
	err = sysctl_write(ra, "0");
	if (err == -ENOENT)	/* no IPv6 on the node, no RA either */
		err = 0;
	if (!err)
		err = nl_link_set_up(pod->ifindex);

	if (!err && a->has4)
		err = nl_route_add(AF_INET, &a->ip4.a[0], 32, NULL,
				   pod->ifindex);
	if (!err && a->has4 && !(pod->flags & PI_POD_NETKIT))
		err = nl_neigh_add(pod->ifindex, AF_INET, &a->ip4.a[0],
				   pod->pod_mac);
	if (!err && a->has6)
		err = nl_route_add(AF_INET6, a->ip6.a, 128, NULL,
				   pod->ifindex);
	if (!err && a->has6 && !(pod->flags & PI_POD_NETKIT))
		err = nl_neigh_add(pod->ifindex, AF_INET6, a->ip6.a,
				   pod->pod_mac);
	return err;
}

static int add_endpoints(const struct node *n, const struct pi_pod *pod)
{
	struct pi_endpoint ep = {
		.kind = PI_EP_POD,
		.pod_ifindex = pod->ifindex,
		.pod_id = pod->id,
	};
	struct pi_endpoint_key key = {};
	int err = 0;

	memcpy(ep.pod_mac, pod->pod_mac, 6);
	memcpy(ep.host_mac, pod->host_mac, 6);
	if (pod->flags & PI_POD_HAS_V4) {
		key.family = AF_INET;
		key.addr.a[0] = pod->ip4;
		if (bpf_map_update_elem(n->maps[M_ENDPOINTS], &key, &ep,
					BPF_NOEXIST))
			err = -errno;
	}
	if (!err && (pod->flags & PI_POD_HAS_V6)) {
		memset(&key, 0, sizeof(key));
		key.family = AF_INET6;
		memcpy(key.addr.a, pod->ip6, 16);
		if (bpf_map_update_elem(n->maps[M_ENDPOINTS], &key, &ep,
					BPF_NOEXIST))
			err = -errno;
	}
	return err;
}

static void del_endpoints(const struct node *n, const struct pi_pod *pod)
{
	struct pi_endpoint_key key = {};

	if (pod->flags & PI_POD_HAS_V4) {
		key.family = AF_INET;
		key.addr.a[0] = pod->ip4;
		bpf_map_delete_elem(n->maps[M_ENDPOINTS], &key);
	}
	if (pod->flags & PI_POD_HAS_V6) {
		memset(&key, 0, sizeof(key));
		key.family = AF_INET6;
		memcpy(key.addr.a, pod->ip6, 16);
		bpf_map_delete_elem(n->maps[M_ENDPOINTS], &key);
	}
}

static void reset_pod_stats(const struct node *n, uint32_t id)
{
	int ncpu = libbpf_num_possible_cpus();
	void *zero;

	if (ncpu <= 0)
		return;
	zero = calloc(ncpu, sizeof(struct pi_pod_stats));
	if (!zero)
		return;
	bpf_map_update_elem(n->maps[M_POD_STATS], &id, zero, 0);
	free(zero);
}

static int attach_pod(const struct node *n, const struct pi_pod *pod)
{
	enum pi_attach_mode mode = node_attach_mode(n);
	bool netkit = pod->flags & PI_POD_NETKIT;
	char path[PATH_MAX];
	int err;

	if (netkit)
		mode = PI_ATTACH_TCX;
	pod_link_pin(n, pod->name, "egress", path, sizeof(path));
	err = attach_prog(n->progs[netkit ? P_POD_EGRESS_NETKIT : P_POD_EGRESS],
			  pod->ifindex, egress_hook(pod), mode, false,
			  PI_PRIO_DATAPATH, path);
	if (err)
		return err;
	pod_link_pin(n, pod->name, "ingress", path, sizeof(path));
	err = attach_prog(n->progs[netkit ? P_POD_INGRESS_NETKIT :
					     P_POD_INGRESS], pod->ifindex,
			  ingress_hook(pod), mode, false, PI_PRIO_DATAPATH,
			  path);
	if (err) {
		pod_link_pin(n, pod->name, "egress", path, sizeof(path));
		detach_prog(pod->ifindex, egress_hook(pod), mode,
			    PI_PRIO_DATAPATH, path);
	}
	return err;
}

static void detach_pod(const struct node *n, const struct pi_pod *pod)
{
	enum pi_attach_mode mode = node_attach_mode(n);
	char path[PATH_MAX];

	if (pod->flags & PI_POD_NETKIT)
		mode = PI_ATTACH_TCX;
	pod_link_pin(n, pod->name, "egress", path, sizeof(path));
	detach_prog(pod->ifindex, egress_hook(pod), mode, PI_PRIO_DATAPATH,
		    path);
	pod_link_pin(n, pod->name, "ingress", path, sizeof(path));
	detach_prog(pod->ifindex, ingress_hook(pod), mode, PI_PRIO_DATAPATH,
		    path);
}

static int parse_pod_args(int argc, char **argv, struct pod_args *a)
{
	memset(a, 0, sizeof(*a));
	if (argc < 1)
		return usage_err("pod add needs a NAME");
	a->name = argv[0];
	if (!valid_name(a->name, POD_NAME_MAX))
		return usage_err("invalid pod name '%s': use 1-%d of a-z, 0-9, '-'",
				 a->name, POD_NAME_MAX);
	argc--;
	argv++;
	while (argc > 0) {
		if (argc < 2)
			return usage_err("'%s' needs a value", argv[0]);
		if (!strcmp(argv[0], "--ip")) {
			if (parse_host_addr(argv[1], AF_INET, &a->ip4))
				return usage_err("invalid IPv4 pod address '%s' (want A.B.C.D or A.B.C.D/32)",
						 argv[1]);
			a->has4 = true;
		} else if (!strcmp(argv[0], "--ip6")) {
			if (parse_host_addr(argv[1], AF_INET6, &a->ip6))
				return usage_err("invalid IPv6 pod address '%s' (want an address or ADDR/128)",
						 argv[1]);
			a->has6 = true;
		} else if (!strcmp(argv[0], "--dev")) {
			if (!strcmp(argv[1], "netkit"))
				a->netkit = true;
			else if (strcmp(argv[1], "veth"))
				return usage_err("invalid --dev '%s': veth or netkit",
						 argv[1]);
		} else {
			return usage_err("unknown argument '%s'", argv[0]);
		}
		argc -= 2;
		argv += 2;
	}
	if (!a->has4 && !a->has6)
		return usage_err("pod '%s' needs --ip and/or --ip6", a->name);
	return 0;
}

static int pod_add(int argc, char **argv)
{
	char hostdev[IFNAMSIZ], buf[64];
	struct pi_pod pod = {}, other;
	struct pod_args a;
	struct node n;
	int pod_ns = -1, saved = -1, saved2 = -1, err;
	bool made_ns = false, made_dev = false, in_maps = false;
	bool attached = false, xdp = false;
	int ret = EXIT_RUNTIME;

	err = parse_pod_args(argc, argv, &a);
	if (err)
		return err;
	if (node_open(&n))
		return EXIT_RUNTIME;

	if (!pod_find(&n, a.name, &other)) {
		p_err("pod '%s' exists already", a.name);
		ret = EXIT_USAGE;
		goto out;
	}
	if (a.has4 && endpoint_exists(&n, AF_INET, &a.ip4)) {
		p_err("address %s is in use on node '%s'",
		      fmt_addr(AF_INET, &a.ip4, -1, buf, sizeof(buf)), n.name);
		ret = EXIT_USAGE;
		goto out;
	}
	if (a.has6 && endpoint_exists(&n, AF_INET6, &a.ip6)) {
		p_err("address %s is in use on node '%s'",
		      fmt_addr(AF_INET6, &a.ip6, -1, buf, sizeof(buf)), n.name);
		ret = EXIT_USAGE;
		goto out;
	}
	if (netns_exists(a.name)) {
		p_err("a network namespace named '%s' exists already", a.name);
		ret = EXIT_USAGE;
		goto out;
	}
	if (free_pod_id(&n, &pod.id)) {
		p_err("node '%s' has no room for another pod (max %d)", n.name,
		      PI_MAX_PODS);
		goto out;
	}
	snprintf(pod.name, sizeof(pod.name), "%s", a.name);
	snprintf(hostdev, sizeof(hostdev), POD_DEV_PREFIX "%s", a.name);
	pod.flags = (a.has4 ? PI_POD_HAS_V4 : 0) |
		    (a.has6 ? PI_POD_HAS_V6 : 0) |
		    (a.netkit ? PI_POD_NETKIT : 0);
	pod.ip4 = a.ip4.a[0];
	memcpy(pod.ip6, a.ip6.a, 16);

	err = netns_create(a.name);
	if (err) {
		p_err("cannot create namespace '%s': %s", a.name,
		      strerror(-err));
		goto out;
	}
	made_ns = true;
	pod_ns = netns_open(a.name);
	if (pod_ns < 0 || node_enter(&n, &saved)) {
		p_err("cannot enter namespaces of pod '%s'", a.name);
		goto out;
	}
	if (nl_link_index(hostdev) > 0) {
		p_err("device '%s' exists already on node '%s'", hostdev,
		      n.name);
		goto out;
	}
	err = a.netkit ? nl_netkit_create(hostdev, "eth0", pod_ns) :
			 nl_veth_create(hostdev, "eth0", pod_ns);
	if (err) {
		if (err == -EOPNOTSUPP && a.netkit)
			p_err("this kernel has no netkit (see 'podinject features')");
		else
			p_err("cannot create %s pair for '%s': %s",
			      a.netkit ? "netkit" : "veth", a.name,
			      strerror(-err));
		goto out;
	}
	made_dev = true;
	pod.ifindex = nl_link_index(hostdev);
	err = nl_link_get_mac(pod.ifindex, pod.host_mac);
	if (!err) {
		err = netns_enter(pod_ns, &saved2);
		if (!err) {
			err = setup_pod_side(&a, &pod);
			netns_restore(saved2);
		}
	}
	if (!err)
		err = setup_node_side(&a, &pod);
	/* Both ends up is not yet both ends passing traffic; a pod that
	 * sends at once would lose its first packets. */
	if (!err)
		err = nl_link_wait_running(pod.ifindex, 2000);
	if (!err) {
		err = netns_enter(pod_ns, &saved2);
		if (!err) {
			err = nl_link_wait_running(pod.peer_ifindex, 2000);
			netns_restore(saved2);
		}
	}
	if (err) {
		p_err("cannot configure pod '%s': %s", a.name, strerror(-err));
		goto out;
	}

	reset_pod_stats(&n, pod.id);
	policy_clear_pod(&n, pod.id);
	err = bpf_map_update_elem(n.maps[M_PODS], &pod.ifindex, &pod,
				  BPF_NOEXIST) ? -errno : 0;
	if (!err) {
		in_maps = true;
		err = add_endpoints(&n, &pod);
	}
	if (err) {
		p_err("cannot record pod '%s': %s", a.name, strerror(-err));
		goto out;
	}
	err = attach_pod(&n, &pod);
	if (err) {
		p_err("cannot attach the datapath to %s: %s", hostdev,
		      strerror(-err));
		goto out;
	}
	attached = true;
	/* netkit has no XDP hook: its pods stay on tc enforcement. */
	if ((n.cfg.flags & PI_NODE_XDP) && !a.netkit) {
		err = xdp_pod_attach(&n, &pod, pod_ns);
		if (err) {
			p_err("cannot attach the XDP ingress ACL to eth0 of '%s': %s",
			      a.name, strerror(-err));
			goto out;
		}
		xdp = true;
	}
	ret = EXIT_OK;
	p_info("pod %s added: netns %s, %s <-> eth0 (%s%s)", a.name, a.name,
	       hostdev, a.netkit ? "netkit" : "veth",
	       xdp ? ", XDP ingress ACL" : "");
out:
	if (ret != EXIT_OK) {
		if (xdp)
			xdp_pod_detach(&n, &pod);
		if (attached)
			detach_pod(&n, &pod);
		if (in_maps) {
			del_endpoints(&n, &pod);
			bpf_map_delete_elem(n.maps[M_PODS], &pod.ifindex);
		}
		if (made_dev && pod.ifindex > 0)
			nl_link_del(pod.ifindex);
	}
	if (saved >= 0)
		netns_restore(saved);
	if (pod_ns >= 0)
		close(pod_ns);
	if (ret != EXIT_OK && made_ns)
		netns_delete(a.name);
	node_close(&n);
	return ret;
}

int pod_remove(struct node *n, const struct pi_pod *pod)
{
	int saved, err, first = 0;

	/* ifindexes, and clsact filters with them, are the node's. */
	err = node_enter(n, &saved);
	if (err)
		return err;
	inject_forget_pod(n, pod);
	xdp_pod_detach(n, pod);
	detach_pod(n, pod);
	policy_clear_pod(n, pod->id);
	del_endpoints(n, pod);
	bpf_map_delete_elem(n->maps[M_PODS], &pod->ifindex);
	err = nl_link_del(pod->ifindex);
	if (err == -ENODEV)
		err = 0;
	netns_restore(saved);
	first = err;
	err = netns_delete(pod->name);
	if (err && err != -ENOENT && !first)
		first = err;
	return first;
}

static int pod_del(int argc, char **argv)
{
	struct pi_pod pod;
	struct node n;
	int err;

	if (argc != 1)
		return usage_err("pod del needs exactly one NAME");
	if (!valid_name(argv[0], POD_NAME_MAX))
		return usage_err("invalid pod name '%s'", argv[0]);
	if (node_open(&n))
		return EXIT_RUNTIME;
	if (pod_find(&n, argv[0], &pod)) {
		p_err("no pod '%s' on node '%s'", argv[0], n.name);
		node_close(&n);
		return EXIT_USAGE;
	}
	err = pod_remove(&n, &pod);
	node_close(&n);
	if (err) {
		p_err("pod '%s' removed with errors: %s", argv[0],
		      strerror(-err));
		return EXIT_RUNTIME;
	}
	p_info("pod %s deleted", argv[0]);
	return EXIT_OK;
}

static const char *const drop_names[PI_DROP_MAX] = PI_DROP_NAMES;

/* Where the pod's ingress ACL runs, and what XDP decided of it. */
static void print_pod_xdp(const struct node *n, const struct pi_pod *pod)
{
	struct pi_xdp_stats xs;
	uint32_t id;

	if (!(pod->flags & PI_POD_XDP)) {
		if (json_output) {
			json_key(jw, "xdp");
			json_null(jw);
		} else if (n->cfg.flags & PI_NODE_XDP) {
			printf("  xdp: none (%s: ingress ACL at tc only)\n",
			       pod->flags & PI_POD_NETKIT ? "netkit has no XDP" :
							    "not attached");
		}
		return;
	}
	id = xdp_pod_prog_id(pod);
	xdp_pod_stats(n, pod->id, &xs);
	if (json_output) {
		json_key(jw, "xdp");
		json_obj_open(jw);
		json_ku64(jw, "prog_id", id);
		json_ku64(jw, "acl_packets", xs.acl_packets);
		json_ku64(jw, "acl_bytes", xs.acl_bytes);
		json_ku64(jw, "acl_drops", xs.acl_drops);
		json_ku64(jw, "uplink_redirects", xs.uplink_redirects);
		json_obj_close(jw);
		return;
	}
	printf("  xdp: ingress ACL on eth0 (prog %u): %llu packets %llu bytes passed, %llu dropped; %llu from the uplink by XDP_REDIRECT\n",
	       id, (unsigned long long)xs.acl_packets,
	       (unsigned long long)xs.acl_bytes,
	       (unsigned long long)xs.acl_drops,
	       (unsigned long long)xs.uplink_redirects);
}

static void print_pod(const struct node *n, const struct pi_pod *pod,
		      bool details)
{
	struct pi_pod_stats st;
	char b4[64] = "-", b6[64] = "-", m1[18], m2[18];
	struct pi_addr a = {};

	if (pod->flags & PI_POD_HAS_V4) {
		a.a[0] = pod->ip4;
		fmt_addr(AF_INET, &a, -1, b4, sizeof(b4));
	}
	if (pod->flags & PI_POD_HAS_V6) {
		memcpy(a.a, pod->ip6, 16);
		fmt_addr(AF_INET6, &a, -1, b6, sizeof(b6));
	}
	pod_stats_sum(n, pod->id, &st);
	if (json_output) {
		json_obj_open(jw);
		json_kstr(jw, "name", pod->name);
		json_ku64(jw, "id", pod->id);
		json_kstr(jw, "node", n->name);
		json_kstr(jw, "netns", pod->name);
		json_kstr(jw, "dev", pod->flags & PI_POD_NETKIT ? "netkit" :
								  "veth");
		json_key(jw, "ipv4");
		if (pod->flags & PI_POD_HAS_V4)
			json_str(jw, b4);
		else
			json_null(jw);
		json_key(jw, "ipv6");
		if (pod->flags & PI_POD_HAS_V6)
			json_str(jw, b6);
		else
			json_null(jw);
		json_ku64(jw, "host_ifindex", pod->ifindex);
		json_kstr(jw, "host_mac", fmt_mac(pod->host_mac, m1));
		json_kstr(jw, "pod_mac", fmt_mac(pod->pod_mac, m2));
		json_key(jw, "stats");
		json_obj_open(jw);
		json_ku64(jw, "egress_packets", st.egress_packets);
		json_ku64(jw, "egress_bytes", st.egress_bytes);
		json_ku64(jw, "ingress_packets", st.ingress_packets);
		json_ku64(jw, "ingress_bytes", st.ingress_bytes);
		json_key(jw, "drops");
		json_obj_open(jw);
		for (int r = 1; r < PI_DROP_MAX; r++)
			json_ku64(jw, drop_names[r], st.drops[r]);
		json_obj_close(jw);
		json_obj_close(jw);
		print_pod_xdp(n, pod);
		json_obj_close(jw);
		return;
	}
	if (!details) {
		printf("%-12s %-3u %-16s %-26s %s%s\n", pod->name, pod->id, b4,
		       b6, POD_DEV_PREFIX, pod->name);
		return;
	}
	printf("pod %s (id %u) on node %s\n", pod->name, pod->id, n->name);
	printf("  netns %s, dev %s, host side " POD_DEV_PREFIX "%s ifindex %u mac %s, pod mac %s\n",
	       pod->name, pod->flags & PI_POD_NETKIT ? "netkit" : "veth",
	       pod->name, pod->ifindex, fmt_mac(pod->host_mac, m1),
	       fmt_mac(pod->pod_mac, m2));
	printf("  ipv4 %s  ipv6 %s\n", b4, b6);
	printf("  egress  %llu packets %llu bytes\n",
	       (unsigned long long)st.egress_packets,
	       (unsigned long long)st.egress_bytes);
	printf("  ingress %llu packets %llu bytes\n",
	       (unsigned long long)st.ingress_packets,
	       (unsigned long long)st.ingress_bytes);
	printf("  drops:");
	for (int r = 1; r < PI_DROP_MAX; r++)
		printf(" %s %llu", drop_names[r],
		       (unsigned long long)st.drops[r]);
	printf("\n");
	print_pod_xdp(n, pod);
}

static int list_cb(const struct node *n, const struct pi_pod *pod, void *c)
{
	print_pod(n, pod, false);
	return 0;
}

static int pod_list(int argc, char **argv)
{
	struct node n;

	if (argc > 0)
		return usage_err("unknown argument '%s'", argv[0]);
	if (node_open(&n))
		return EXIT_RUNTIME;
	if (json_output)
		json_arr_open(jw);
	else
		printf("%-12s %-3s %-16s %-26s %s\n", "NAME", "ID", "IPV4",
		       "IPV6", "HOSTDEV");
	pod_for_each(&n, list_cb, NULL);
	if (json_output) {
		json_arr_close(jw);
		json_end(jw);
	}
	node_close(&n);
	return EXIT_OK;
}

static int pod_show(int argc, char **argv)
{
	struct pi_pod pod;
	struct node n;

	if (argc != 1)
		return usage_err("pod show needs exactly one NAME");
	if (!valid_name(argv[0], POD_NAME_MAX))
		return usage_err("invalid pod name '%s'", argv[0]);
	if (node_open(&n))
		return EXIT_RUNTIME;
	if (pod_find(&n, argv[0], &pod)) {
		p_err("no pod '%s' on node '%s'", argv[0], n.name);
		node_close(&n);
		return EXIT_USAGE;
	}
	print_pod(&n, &pod, true);
	if (json_output)
		json_end(jw);
	node_close(&n);
	return EXIT_OK;
}

int do_pod(int argc, char **argv)
{
	static const struct cmd cmds[] = {
		{ "add", pod_add },
		{ "del", pod_del },
		{ "list", pod_list },
		{ "show", pod_show },
		{ "help", pod_help },
		{ 0 },
	};

	return cmd_select(cmds, argc, argv, pod_help);
}
