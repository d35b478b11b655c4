/* SPDX-License-Identifier: GPL-2.0 */
/* podinject pod add|adopt|del|list|show */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cmds.h"
#include "util.h"

static int pod_help(int argc, char **argv)
{
	fprintf(stderr,
		"Usage: podinject [-N NODE] pod add NAME [--ip ADDR[/32]] [--ip6 ADDR[/128]]\n"
		"                                [--dev veth|netkit]\n"
		"       podinject [-N NODE] pod adopt PODNAME --netns NETNS --dev HOSTDEV\n"
		"                 [--ifname IF] [--ip ADDR] [--ip6 ADDR] [--attach-id ID]\n"
		"                 [--no-datapath]\n"
		"       podinject [-N NODE] pod del NAME\n"
		"       podinject [-N NODE] pod check NAME\n"
		"       podinject [-N NODE] [-j] pod list\n"
		"       podinject [-N NODE] [-j] pod show NAME\n"
		"\n"
		"NAME: 1-%d characters of a-z, 0-9 and '-'; it names the pod's\n"
		"network namespace too. At least one of --ip and --ip6.\n"
		"adopt: a pod whose namespace and device pair (veth or netkit) another\n"
		"tool made. NETNS is a name in /run/netns or a path; HOSTDEV is the\n"
		"host-side device in the node's namespace; IF, the pod-side device, is\n"
		"found through the pair when not given; addresses are read from it when\n"
		"not given. PODNAME: 1-%d of A-Z a-z 0-9 - . _ / (e.g. a Kubernetes\n"
		"namespace/name). 'pod del' of an adopted pod removes podinject's\n"
		"programs and state and leaves its namespace and devices.\n"
		"--no-datapath: the reference datapath (source check, policy,\n"
		"routing) stays off the pod's device, whose datapath is the tool's\n"
		"that made it (e.g. Cilium): the pod can inject, be injected into,\n"
		"be proxied and probed; its first rule puts podinject's checks on the\n"
		"device, in front of that tool's programs, until its last rule goes.\n"
		"check: every program the pod must have is on its devices (its tc or\n"
		"netkit hooks, the XDP ingress ACL of an --xdp node, a netkit pod's\n"
		"guard); what is missing is said, and the exit is non-zero.\n",
		POD_NAME_MAX, PI_POD_NAME_MAX);
	return EXIT_OK;
}

static int parse_host4(const char *s, void *dst)
{
	int family, plen;

	if (pi_parse_prefix(s, &family, dst, &plen) || family != AF_INET ||
	    plen != 32)
		return -EINVAL;
	return 0;
}

static int parse_host6(const char *s, void *dst)
{
	int family, plen;

	if (pi_parse_prefix(s, &family, dst, &plen) || family != AF_INET6 ||
	    plen != 128)
		return -EINVAL;
	return 0;
}

static const struct opt_choice dev_kinds[] = {
	{ "veth", 0 },
	{ "netkit", 1 },
	{ 0 },
};

static int open_node(enum pi_open_mode mode, struct pi_node **n,
		     struct pi_node_info *ni)
{
	int err = pi_node_open(node_name, mode, lock_timeout_ms, n);

	if (!err && ni)
		err = pi_node_get_info(*n, ni);
	return err;
}

static int pod_add(int argc, char **argv)
{
	struct pi_pod_spec spec = {};
	struct pi_pod_info pod;
	const char *name = NULL;
	int netkit = 0;
	const struct opt opts[] = {
		OPT_PARSE("--ip", parse_host4, &spec.ip4,
			  "A.B.C.D or A.B.C.D/32", &spec.has4),
		OPT_PARSE("--ip6", parse_host6, &spec.ip6,
			  "an address or ADDR/128", &spec.has6),
		OPT_CHOICE("--dev", &netkit, dev_kinds),
		{ 0 },
	};
	struct pi_node *n;
	int err;

	if (argc < 1)
		return usage_err("pod add needs a NAME");
	err = parse_opts(opts, argc, argv, 1, &name, NULL);
	if (err)
		return err;
	if (!name)
		return usage_err("pod add needs a NAME");
	if (!pi_valid_name(name, POD_NAME_MAX))
		return usage_err("invalid pod name '%s': use 1-%d of a-z, 0-9, '-'",
				 name, POD_NAME_MAX);
	if (!spec.has4 && !spec.has6)
		return usage_err("pod '%s' needs --ip and/or --ip6", name);
	spec.name = name;
	spec.netkit = netkit;
	err = open_node(PI_OPEN_WRITE, &n, NULL);
	if (!err)
		err = pi_pod_add(n, &spec, &pod);
	pi_node_close(n);
	if (err)
		return exit_code(err);
	p_info("pod %s added: netns %s, %s <-> %s (%s%s)", pod.name, pod.netns,
	       pod.hostdev, pod.ifname, netkit ? "netkit" : "veth",
	       pod.flags & PI_POD_XDP ? ", XDP ingress ACL" : "");
	return EXIT_OK;
}

static int pod_adopt(int argc, char **argv)
{
	struct pi_adopt_spec spec = {};
	struct pi_pod_info pod;
	const struct opt opts[] = {
		OPT_STR("--netns", &spec.netns, "a namespace name or path"),
		OPT_STR("--dev", &spec.hostdev, "the host-side device"),
		OPT_STR("--ifname", &spec.ifname, "the pod-side device"),
		OPT_STR("--attach-id", &spec.attach_id, "an id"),
		OPT_PARSE("--ip", parse_host4, &spec.ip4,
			  "A.B.C.D or A.B.C.D/32", &spec.has4),
		OPT_PARSE("--ip6", parse_host6, &spec.ip6,
			  "an address or ADDR/128", &spec.has6),
		OPT_FLAG("--no-datapath", &spec.no_datapath),
		{ 0 },
	};
	struct pi_node *n;
	int err;

	err = parse_opts(opts, argc, argv, 1, &spec.name, NULL);
	if (err)
		return err;
	if (!spec.name)
		return usage_err("pod adopt needs a NAME");
	if (!pi_valid_pod_name(spec.name))
		return usage_err("invalid pod name '%s': use 1-%d of A-Z, a-z, 0-9, '-', '.', '_', '/'",
				 spec.name, PI_POD_NAME_MAX);
	if (!spec.netns)
		return usage_err("pod adopt needs --netns NAME|PATH");
	if (!spec.hostdev)
		return usage_err("pod adopt needs --dev HOSTDEV, the host-side device");
	err = open_node(PI_OPEN_WRITE, &n, NULL);
	if (!err)
		err = pi_pod_adopt(n, &spec, &pod);
	pi_node_close(n);
	if (err)
		return exit_code(err);
	p_info("pod %s adopted: netns %s, %s <-> %s (%s%s%s)", pod.name,
	       pod.netns, pod.hostdev, pod.ifname,
	       pod.flags & PI_POD_NETKIT ? "netkit" : "veth",
	       pod.flags & PI_POD_XDP ? ", XDP ingress ACL" : "",
	       pod.meta_flags & PI_META_NO_DATAPATH ?
		       ", no reference datapath" : "");
	return EXIT_OK;
}

static int pod_del(int argc, char **argv)
{
	struct pi_node *n;
	int err;

	if (argc != 1)
		return usage_err("pod del needs exactly one NAME");
	if (!pi_valid_pod_name(argv[0]))
		return usage_err("invalid pod name '%s'", argv[0]);
	err = open_node(PI_OPEN_WRITE, &n, NULL);
	if (!err)
		err = pi_pod_del(n, argv[0]);
	pi_node_close(n);
	if (err)
		return exit_code(err);
	p_info("pod %s deleted", argv[0]);
	return EXIT_OK;
}

/* What the CNI plugin's CHECK asks, for a pod of any maker. */
static int pod_check(int argc, char **argv)
{
	struct pi_pod_info pod;
	struct pi_node *n;
	int err;

	if (argc != 1)
		return usage_err("pod check needs exactly one NAME");
	if (!pi_valid_pod_name(argv[0]))
		return usage_err("invalid pod name '%s'", argv[0]);
	err = open_node(PI_OPEN_WRITE, &n, NULL);
	if (!err)
		err = pi_pod_get(n, argv[0], &pod);
	if (!err)
		err = pi_pod_check(n, &pod);
	pi_node_close(n);
	if (err)
		return exit_code(err);
	p_info("pod %s: every program it must have is attached", argv[0]);
	return EXIT_OK;
}

static const char *const drop_names[PI_DROP_MAX] = PI_DROP_NAMES;

/* Where the pod's ingress ACL runs, and what XDP decided of it. */
static void print_pod_xdp(struct pi_node *n, bool node_xdp,
			  const struct pi_pod_info *pod)
{
	struct pi_xdp_stats xs;
	uint32_t id;

	if (pi_pod_xdp(n, pod, &id, &xs)) {
		if (json_output) {
			json_key(jw, "xdp");
			json_null(jw);
		} else if (node_xdp) {
			printf("  xdp: none (%s: ingress ACL at tc only)\n",
			       pod->flags & PI_POD_NETKIT ? "netkit has no XDP" :
							    "not attached");
		}
		return;
	}
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

static void print_pod(struct pi_node *n, const struct pi_node_info *ni,
		      const struct pi_pod_info *pod, bool details)
{
	struct pi_ct_counts ct = { 0 };
	struct pi_pod_stats st;
	char b4[64] = "-", b6[64] = "-", m1[18], m2[18];
	struct pi_addr a = {};

	if (pod->flags & PI_POD_HAS_V4) {
		a.a[0] = pod->ip4;
		pi_fmt_addr(AF_INET, &a, -1, b4, sizeof(b4));
	}
	if (pod->flags & PI_POD_HAS_V6) {
		memcpy(a.a, pod->ip6, 16);
		pi_fmt_addr(AF_INET6, &a, -1, b6, sizeof(b6));
	}
	pi_pod_counters(n, pod, &st);
	if (details || json_output)
		pi_ct_counts(n, pod, &ct);
	if (json_output) {
		json_obj_open(jw);
		json_kstr(jw, "name", pod->name);
		json_ku64(jw, "id", pod->id);
		json_kstr(jw, "node", ni->name);
		json_kstr(jw, "netns", pod->netns);
		json_kstr(jw, "ifname", pod->ifname);
		json_kstr(jw, "hostdev", pod->hostdev);
		json_kbool(jw, "adopted", !(pod->meta_flags & PI_META_OWNS_DEV));
		json_kstr(jw, "datapath", pod->meta_flags & PI_META_NO_DATAPATH ?
						  "none" : "reference");
		json_kstr(jw, "attach_id", pod->attach_id);
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
		json_kstr(jw, "host_mac", pi_fmt_mac(pod->host_mac, m1));
		json_kstr(jw, "pod_mac", pi_fmt_mac(pod->pod_mac, m2));
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
		json_key(jw, "conntrack");
		json_obj_open(jw);
		json_ku64(jw, "flows", ct.entries);
		json_ku64(jw, "opening", ct.by_state[PI_CT_OPENING]);
		json_ku64(jw, "established", ct.by_state[PI_CT_ESTABLISHED]);
		json_ku64(jw, "closing", ct.by_state[PI_CT_CLOSING]);
		json_obj_close(jw);
		print_pod_xdp(n, ni->xdp, pod);
		json_obj_close(jw);
		return;
	}
	if (!details) {
		printf("%-12s %-3u %-16s %-26s %s\n", pod->name, pod->id, b4,
		       b6, pod->hostdev);
		return;
	}
	printf("pod %s (id %u) on node %s\n", pod->name, pod->id, ni->name);
	printf("  netns %s, dev %s, host side %s ifindex %u mac %s, pod mac %s%s%s\n",
	       pod->netns, pod->flags & PI_POD_NETKIT ? "netkit" : "veth",
	       pod->hostdev, pod->ifindex, pi_fmt_mac(pod->host_mac, m1),
	       pi_fmt_mac(pod->pod_mac, m2),
	       strcmp(pod->ifname, "eth0") ? ", pod side " : "",
	       strcmp(pod->ifname, "eth0") ? pod->ifname : "");
	if (!(pod->meta_flags & PI_META_OWNS_DEV))
		printf("  adopted: its namespace and devices are left alone by pod del%s%s\n",
		       *pod->attach_id ? "; attached by " : "", pod->attach_id);
	if (pod->meta_flags & PI_META_NO_DATAPATH)
		printf("  datapath: the plugin's that made it (it routes); podinject's programs check and pass on while the pod has a policy\n");
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
	printf("  conntrack: %u flows (%u opening, %u established, %u closing)\n",
	       ct.entries, ct.by_state[PI_CT_OPENING],
	       ct.by_state[PI_CT_ESTABLISHED], ct.by_state[PI_CT_CLOSING]);
	print_pod_xdp(n, ni->xdp, pod);
}

static int pod_list(int argc, char **argv)
{
	struct pi_pod_info *pods;
	struct pi_node_info ni;
	struct pi_node *n;
	int cnt, err;

	if (argc > 0)
		return usage_err("unknown argument '%s'", argv[0]);
	err = open_node(PI_OPEN_READ, &n, &ni);
	cnt = err ? err : pi_pod_list(n, &pods);
	if (cnt < 0) {
		pi_node_close(n);
		return exit_code(cnt);
	}
	if (json_output)
		json_arr_open(jw);
	else
		printf("%-12s %-3s %-16s %-26s %s\n", "NAME", "ID", "IPV4",
		       "IPV6", "HOSTDEV");
	for (int i = 0; i < cnt; i++)
		print_pod(n, &ni, &pods[i], false);
	free(pods);
	if (json_output) {
		json_arr_close(jw);
		json_end(jw);
	}
	pi_node_close(n);
	return EXIT_OK;
}

static int pod_show(int argc, char **argv)
{
	struct pi_pod_info pod;
	struct pi_node_info ni;
	struct pi_node *n;
	int err;

	if (argc != 1)
		return usage_err("pod show needs exactly one NAME");
	if (!pi_valid_pod_name(argv[0]))
		return usage_err("invalid pod name '%s'", argv[0]);
	err = open_node(PI_OPEN_READ, &n, &ni);
	if (!err)
		err = pi_pod_get(n, argv[0], &pod);
	if (err) {
		pi_node_close(n);
		return exit_code(err);
	}
	print_pod(n, &ni, &pod, true);
	if (json_output)
		json_end(jw);
	pi_node_close(n);
	return EXIT_OK;
}

int do_pod(int argc, char **argv)
{
	static const struct cmd cmds[] = {
		{ "add", pod_add },
		{ "adopt", pod_adopt },
		{ "del", pod_del },
		{ "check", pod_check },
		{ "list", pod_list },
		{ "show", pod_show },
		{ "help", pod_help },
		{ 0 },
	};

	return cmd_select(cmds, argc, argv, pod_help);
}
