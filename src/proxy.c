/* SPDX-License-Identifier: GPL-2.0 */
/*
 * podinject proxy add|del|list: steer a pod's new connections to a proxy
 * pod's transparent socket, and make the proxy the pod's injector so that
 * its upstream connection, bound to the pod's address, passes the pod's
 * own egress datapath.
 *
 * Pieces, all undone by `proxy del`:
 *   - proxy_rules[POD]            what to capture and where to send it
 *   - inject_auth[PROXY, POD ip]  the proxy may inject as POD
 *   - head program on POD and on PROXY (host side, first in the chain)
 *   - pod_reply on POD's eth0 ingress (in POD's namespace)
 *   - proxy_assign on PROXY's eth0 ingress, and in PROXY's namespace the
 *     rule "what arrives on eth0 is local" (table PI_PROXY_TABLE)
 *   - proxy_lookup, PROXY's namespace's sk_lookup program, and the
 *     proxy's listeners in proxy_listeners (put there by proxy_assign)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "cmds.h"
#include "inject.h"
#include "nl.h"
#include "util.h"

#define PROXY_RULE_PRIO	100
#define PROXY_PORT_RANGE	"16384 32767"
#define LINUX_PORT_RANGE	"32768 60999"

static int proxy_help(int argc, char **argv)
{
	fprintf(stderr,
		"Usage: podinject [-N NODE] proxy add PROXY_POD --port N --for POD\n"
		"                 [--match tcp|udp [dport LIST] [dst CIDR]]\n"
		"       podinject [-N NODE] proxy del PROXY_POD --for POD\n"
		"       podinject [-N NODE] [-j] proxy list\n"
		"\n"
		"New connections of POD that match (default: all TCP and UDP) go\n"
		"to PROXY_POD's transparent socket on port N with their original\n"
		"destination; PROXY_POD's connections bound to POD's address are\n"
		"injected into POD's egress datapath. LIST: ports and ranges,\n"
		"e.g. 80,443,8000-8100 (at most %d).\n", PI_PROXY_MAX_PORTS);
	return EXIT_OK;
}

static int parse_ports(const char *s, struct pi_proxy_rule *r)
{
	char buf[256], *tok, *save = NULL;

	if (strlen(s) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, s);
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (r->nports >= PI_PROXY_MAX_PORTS)
			return -E2BIG;
		if (pi_parse_port_range(tok, &r->dport_lo[r->nports],
				     &r->dport_hi[r->nports]))
			return -EINVAL;
		r->nports++;
	}
	return r->nports ? 0 : -EINVAL;
}

struct proxy_args {
	const char *proxy, *pod;
	struct pi_proxy_rule rule;
};

static int parse_args(int argc, char **argv, struct proxy_args *a, bool add)
{
	int family, plen;
	uint32_t port;

	memset(a, 0, sizeof(*a));
	if (argc < 1)
		return usage_err("proxy %s needs PROXY_POD", add ? "add" : "del");
	a->proxy = argv[0];
	if (!pi_valid_pod_name(a->proxy))
		return usage_err("invalid pod name '%s'", a->proxy);
	argc--;
	argv++;
	while (argc > 0) {
		const char *k = argv[0], *v = argc > 1 ? argv[1] : NULL;

		if (!v)
			return usage_err("'%s' needs a value", k);
		if (!strcmp(k, "--for")) {
			if (!pi_valid_pod_name(v))
				return usage_err("invalid pod name '%s'", v);
			a->pod = v;
		} else if (add && !strcmp(k, "--port")) {
			if (pi_parse_u32(v, &port) || !port || port > 65535)
				return usage_err("invalid port '%s'", v);
			a->rule.port = port;
		} else if (add && !strcmp(k, "--match")) {
			if (!strcmp(v, "tcp"))
				a->rule.proto = IPPROTO_TCP;
			else if (!strcmp(v, "udp"))
				a->rule.proto = IPPROTO_UDP;
			else
				return usage_err("invalid --match '%s': tcp or udp", v);
		} else if (add && a->rule.proto && !strcmp(k, "dport")) {
			int err = parse_ports(v, &a->rule);

			if (err == -E2BIG)
				return usage_err("at most %d port ranges",
						 PI_PROXY_MAX_PORTS);
			if (err)
				return usage_err("invalid port list '%s'", v);
		} else if (add && a->rule.proto && !strcmp(k, "dst")) {
			if (pi_parse_prefix(v, &family, &a->rule.dst, &plen))
				return usage_err("invalid CIDR '%s'", v);
			a->rule.dst_family = family;
			a->rule.dst_plen = plen;
		} else {
			return usage_err("unknown argument '%s'", k);
		}
		argc -= 2;
		argv += 2;
	}
	if (!a->pod)
		return usage_err("--for POD is missing");
	if (add && !a->rule.port)
		return usage_err("--port N is missing");
	if (!strcmp(a->pod, a->proxy))
		return usage_err("a pod cannot be its own proxy");
	return 0;
}

static void pin_of(const struct inject_state *s, char *buf, size_t len,
		   const char *what, const struct pi_pod_info *pod)
{
	snprintf(buf, len, "%s/link_%s_%u", s->dir, what, pod->ifindex);
}

/* Attaches prog at eth0's ingress inside the pod's namespace: the pod
 * itself needs no privilege for it. */
int attach_in_pod(const struct pi_node *n, const struct inject_state *s,
			 const struct pi_pod_info *pod, int prog, const char *what)
{
	enum pi_attach_mode mode = node_attach_mode(n);
	char path[PATH_MAX];
	int ns, saved, err;

	pin_of(s, path, sizeof(path), what, pod);
	if (!access(path, F_OK))
		return 0;
	ns = pod_netns_open(pod);
	if (ns < 0)
		return ns;
	err = netns_enter(ns, &saved);
	close(ns);
	if (err)
		return err;
	err = attach_prog(prog, pod->peer_ifindex, PI_HOOK_INGRESS, mode, true,
			  PI_PRIO_HEAD, path);
	netns_restore(saved);
	return err;
}

void detach_in_pod(const struct pi_node *n, const struct inject_state *s,
			  const struct pi_pod_info *pod, const char *what)
{
	char path[PATH_MAX];
	int ns, saved;

	pin_of(s, path, sizeof(path), what, pod);
	if (access(path, F_OK))
		return;
	ns = pod_netns_open(pod);
	if (ns >= 0 && !netns_enter(ns, &saved)) {
		detach_prog(pod->peer_ifindex, PI_HOOK_INGRESS,
			    node_attach_mode(n), PI_PRIO_HEAD, path);
		netns_restore(saved);
	}
	if (ns >= 0)
		close(ns);
	unlink(path);	/* even when the namespace is gone already */
}

/* proxy_lookup at the proxy's namespace, for the kernel's TIME_WAIT
 * takeover of a client's reused 4-tuple (bpf/inject.bpf.c). The pinned
 * link is the attachment: unpinned, it goes. */
static int lookup_attach(const struct inject_state *s,
			 const struct pi_pod_info *proxy)
{
	char path[PATH_MAX];
	int ns, link, err;

	pin_of(s, path, sizeof(path), "lookup", proxy);
	if (!access(path, F_OK))
		return 0;
	ns = pod_netns_open(proxy);
	if (ns < 0)
		return ns;
	link = bpf_link_create(s->progs[IP_PROXY_LOOKUP], ns, BPF_SK_LOOKUP,
			       NULL);
	err = link < 0 ? -errno : 0;
	close(ns);
	if (err)
		return err;
	err = bpf_obj_pin(link, path) ? -errno : 0;
	/* Pinned, the link outlives this fd; unpinned, closing it undoes
	 * the attachment. */
	close(link);
	return err;
}

static void lookup_detach(const struct inject_state *s,
			  const struct pi_pod_info *proxy)
{
	char path[PATH_MAX];

	pin_of(s, path, sizeof(path), "lookup", proxy);
	unlink(path);
}

/* The map holds a reference to each listener (the proxy's own sockets):
 * a proxy that serves no pod any more is let go of. */
static void forget_listeners(int map, uint32_t proxy_ifindex)
{
	struct pi_proxy_listener_key key, next, *prev = NULL;

	while (!bpf_map_get_next_key(map, prev, &next)) {
		if (next.proxy_ifindex == proxy_ifindex) {
			bpf_map_delete_elem(map, &next);
			prev = NULL;
			continue;
		}
		key = next;
		prev = &key;
	}
}

/* In the proxy's namespace: whatever arrives on eth0 is local, so that a
 * socket given with bpf_sk_assign() receives packets for addresses that
 * are not the proxy's. */
static int proxy_routing(const struct pi_pod_info *proxy, bool add)
{
	static const int families[] = { AF_INET, AF_INET6 };
	int ns, saved, err = 0;

	ns = pod_netns_open(proxy);
	if (ns < 0)
		return ns;
	err = netns_enter(ns, &saved);
	close(ns);
	if (err)
		return err;
	/* The proxy's upstream connections and the client pod's own
	 * connections share the pod's address; ports from disjoint ranges
	 * keep their 4-tuples apart (the pod keeps Linux's default range,
	 * probes use PI_PROBE_PORT_LO..HI). */
	err = sysctl_write("net/ipv4/ip_local_port_range",
			   add ? PROXY_PORT_RANGE : LINUX_PORT_RANGE);
	for (int i = 0; i < 2; i++) {
		int e1 = nl_route_local_default(families[i], PI_PROXY_TABLE, 1,
						add);
		int e2 = nl_rule_iif(families[i], proxy->ifname, PI_PROXY_TABLE,
				     PROXY_RULE_PRIO, add);

		if (add && e1 && e1 != -EEXIST)
			err = e1;
		if (add && e2 && e2 != -EEXIST)
			err = err ? err : e2;
	}
	netns_restore(saved);
	return err;
}

int reply_hook_attach(const struct pi_node *n, const struct inject_state *s,
		      const struct pi_pod_info *pod)
{
	return attach_in_pod(n, s, pod, s->progs[IP_POD_REPLY], "reply");
}

void reply_hook_release(const struct pi_node *n, const struct inject_state *s,
			const struct pi_pod_info *pod)
{
	struct pi_proxy_rule r;

	if (!bpf_map_lookup_elem(s->maps[IM_PROXY_RULES], &pod->ifindex, &r))
		return;
	detach_in_pod(n, s, pod, "reply");
}

static int proxy_serves(const struct inject_state *s, uint32_t proxy_ifindex,
			uint32_t except)
{
	uint32_t key, next, *prev = NULL;
	struct pi_proxy_rule r;
	int cnt = 0;

	while (!bpf_map_get_next_key(s->maps[IM_PROXY_RULES], prev, &next)) {
		if (next != except &&
		    !bpf_map_lookup_elem(s->maps[IM_PROXY_RULES], &next, &r) &&
		    r.proxy_ifindex == proxy_ifindex)
			cnt++;
		key = next;
		prev = &key;
	}
	return cnt;
}

/* Drops every flow of the pod from one flow map. */
static void forget_flows(int map, uint32_t pod_ifindex)
{
	struct pi_flow_key key, next, *prev = NULL;
	struct pi_flow f;

	while (!bpf_map_get_next_key(map, prev, &next)) {
		if (!bpf_map_lookup_elem(map, &next, &f) &&
		    f.pod_ifindex == pod_ifindex) {
			bpf_map_delete_elem(map, &next);
			prev = NULL;
			continue;
		}
		key = next;
		prev = &key;
	}
}

static void deauthorise(struct inject_state *s, const struct pi_pod_info *proxy,
			const struct pi_pod_info *pod)
{
	struct pi_inject_key k = { .injector_ifindex = proxy->ifindex };

	if (pod->flags & PI_POD_HAS_V4) {
		k.family = AF_INET;
		k.addr.a[0] = pod->ip4;
		bpf_map_delete_elem(s->maps[IM_AUTH], &k);
	}
	if (pod->flags & PI_POD_HAS_V6) {
		memset(&k.addr, 0, sizeof(k.addr));
		k.family = AF_INET6;
		memcpy(k.addr.a, pod->ip6, 16);
		bpf_map_delete_elem(s->maps[IM_AUTH], &k);
	}
}

/* Takes a pod out of proxying; `proxy` may be gone (NULL) when the proxy
 * pod itself is being deleted. */
static void unproxy(const struct pi_node *n, struct inject_state *s,
		    const struct pi_pod_info *proxy, const struct pi_pod_info *pod,
		    bool keep_auth)
{
	bpf_map_delete_elem(s->maps[IM_PROXY_RULES], &pod->ifindex);
	forget_flows(s->maps[IM_PROXY_FLOWS], pod->ifindex);
	forget_flows(s->maps[IM_PROXY_UPSTREAM], pod->ifindex);
	reply_hook_release(n, s, pod);
	head_release(n, s, pod);
	if (!proxy)
		return;
	if (!keep_auth)
		deauthorise(s, proxy, pod);
	head_release(n, s, proxy);
	if (!proxy_serves(s, proxy->ifindex, pod->ifindex)) {
		detach_in_pod(n, s, proxy, "assign");
		lookup_detach(s, proxy);
		forget_listeners(s->maps[IM_PROXY_LISTENERS], proxy->ifindex);
		proxy_routing(proxy, false);
	}
}

static int proxy_add(int argc, char **argv)
{
	struct pi_inject_key keys[2];
	struct pi_pod_info proxy, pod;
	struct pi_proxy_rule old;
	struct proxy_args a;
	struct inject_state s;
	struct pi_node n;
	int nkeys = 0, created, err, ret = EXIT_RUNTIME;
	bool ruled = false;

	err = parse_args(argc, argv, &a, true);
	if (err)
		return err;
	if (node_open_rw(&n))
		return EXIT_RUNTIME;
	if (pod_find(&n, a.proxy, &proxy) || pod_find(&n, a.pod, &pod)) {
		p_err("no pod '%s' on node '%s'",
		      pod_find(&n, a.proxy, &proxy) ? a.proxy : a.pod, n.name);
		node_close(&n);
		return EXIT_USAGE;
	}
	/* Capture and the reply bounce use bpf_redirect_peer() with flags
	 * 0, which netkit programs cannot call (tc ingress only). */
	if ((proxy.flags | pod.flags) & PI_POD_NETKIT) {
		p_err("pod '%s' is a netkit pod: proxying is built for veth pods only",
		      proxy.flags & PI_POD_NETKIT ? proxy.name : pod.name);
		node_close(&n);
		return EXIT_USAGE;
	}
	created = inject_open(&n, &s, true);
	if (created < 0) {
		p_err("cannot load the injection program: %s",
		      strerror(-created));
		node_close(&n);
		return EXIT_RUNTIME;
	}
	if (!bpf_map_lookup_elem(s.maps[IM_PROXY_RULES], &pod.ifindex, &old)) {
		p_err("pod '%s' is proxied already", pod.name);
		ret = EXIT_USAGE;
		goto out;
	}

	a.rule.proxy_ifindex = proxy.ifindex;
	memcpy(a.rule.proxy_pod_mac, proxy.pod_mac, 6);
	memcpy(a.rule.proxy_host_mac, proxy.host_mac, 6);
	memcpy(a.rule.pod_mac, pod.pod_mac, 6);
	memcpy(a.rule.pod_host_mac, pod.host_mac, 6);

	err = inject_authorise(&n, &s, &proxy, &pod, 1, 0, keys, &nkeys);
	if (!err)
		err = bpf_map_update_elem(s.maps[IM_PROXY_RULES], &pod.ifindex,
					  &a.rule, BPF_NOEXIST) ? -errno : 0;
	ruled = !err;
	if (!err)
		err = head_attach(&n, &s, &pod);
	if (!err)
		err = head_attach(&n, &s, &proxy);
	if (!err)
		err = reply_hook_attach(&n, &s, &pod);
	if (!err)
		err = attach_in_pod(&n, &s, &proxy, s.progs[IP_PROXY_ASSIGN],
				    "assign");
	if (!err)
		err = lookup_attach(&s, &proxy);
	if (!err)
		err = proxy_routing(&proxy, true);
	if (err) {
		p_err("cannot set up proxying of '%s' by '%s': %s", pod.name,
		      proxy.name, strerror(-err));
		goto out;
	}
	ret = EXIT_OK;
	p_info("pod %s proxied by %s on port %u", pod.name, proxy.name,
	       a.rule.port);
out:
	if (ret != EXIT_OK && ruled) {
		for (int i = 0; i < nkeys; i++)
			bpf_map_delete_elem(s.maps[IM_AUTH], &keys[i]);
		unproxy(&n, &s, &proxy, &pod, true);
	}
	if (ret != EXIT_OK && !ruled)
		for (int i = 0; i < nkeys; i++)
			bpf_map_delete_elem(s.maps[IM_AUTH], &keys[i]);
	inject_close(&s);
	if (ret != EXIT_OK && created == 1)
		rm_tree(s.dir);
	node_close(&n);
	return ret;
}

static int proxy_del(int argc, char **argv)
{
	struct pi_pod_info proxy, pod;
	struct pi_proxy_rule r;
	struct proxy_args a;
	struct inject_state s;
	struct pi_node n;
	int err, ret = EXIT_USAGE;

	err = parse_args(argc, argv, &a, false);
	if (err)
		return err;
	if (node_open_rw(&n))
		return EXIT_RUNTIME;
	if (pod_find(&n, a.proxy, &proxy) || pod_find(&n, a.pod, &pod)) {
		p_err("no pod '%s' on node '%s'",
		      pod_find(&n, a.proxy, &proxy) ? a.proxy : a.pod, n.name);
		node_close(&n);
		return EXIT_USAGE;
	}
	if (inject_open(&n, &s, false) ||
	    bpf_map_lookup_elem(s.maps[IM_PROXY_RULES], &pod.ifindex, &r) ||
	    r.proxy_ifindex != proxy.ifindex) {
		p_err("pod '%s' is not proxied by '%s'", pod.name, proxy.name);
		goto out;
	}
	unproxy(&n, &s, &proxy, &pod, false);
	ret = EXIT_OK;
	p_info("pod %s no longer proxied by %s", pod.name, proxy.name);
out:
	inject_close(&s);
	node_close(&n);
	return ret;
}

static int proxy_list(int argc, char **argv)
{
	uint32_t key, next, *prev = NULL;
	struct pi_proxy_rule r;
	struct inject_state s;
	struct pi_node n;

	if (argc > 0)
		return usage_err("unknown argument '%s'", argv[0]);
	if (node_open_ro(&n))
		return EXIT_RUNTIME;
	if (json_output)
		json_arr_open(jw);
	else
		printf("%-12s %-12s %-6s %-5s %-24s %s\n", "POD", "PROXY",
		       "PORT", "PROTO", "DPORTS", "DST");
	if (!inject_open(&n, &s, false)) {
		while (!bpf_map_get_next_key(s.maps[IM_PROXY_RULES], prev,
					     &next)) {
			char pod[PI_NAME_LEN], px[PI_NAME_LEN], ports[160] = "",
			     dst[64] = "any";
			size_t off = 0;

			key = next;
			prev = &key;
			if (bpf_map_lookup_elem(s.maps[IM_PROXY_RULES], &key,
						&r))
				continue;
			pod_name_by_ifindex(&n, key, pod, sizeof(pod));
			pod_name_by_ifindex(&n, r.proxy_ifindex, px, sizeof(px));
			for (int i = 0; i < r.nports && off < sizeof(ports); i++)
				off += snprintf(ports + off, sizeof(ports) - off,
						r.dport_lo[i] == r.dport_hi[i] ?
						"%s%u" : "%s%u-%u",
						i ? "," : "", r.dport_lo[i],
						r.dport_hi[i]);
			if (!r.nports)
				strcpy(ports, "any");
			if (r.dst_family)
				pi_fmt_addr(r.dst_family, &r.dst, r.dst_plen, dst,
					 sizeof(dst));
			if (json_output) {
				json_obj_open(jw);
				json_kstr(jw, "pod", pod);
				json_kstr(jw, "proxy", px);
				json_ku64(jw, "port", r.port);
				json_kstr(jw, "proto", pi_proto_name(r.proto));
				json_kstr(jw, "dports", ports);
				json_kstr(jw, "dst", dst);
				json_obj_close(jw);
			} else {
				printf("%-12s %-12s %-6u %-5s %-24s %s\n", pod,
				       px, r.port, pi_proto_name(r.proto), ports,
				       dst);
			}
		}
		inject_close(&s);
	}
	if (json_output) {
		json_arr_close(jw);
		json_end(jw);
	}
	node_close(&n);
	return EXIT_OK;
}

/* A pod being deleted stops being proxied and stops proxying. */
void proxy_forget_pod(const struct pi_node *n, struct inject_state *s,
		      const struct pi_pod_info *gone)
{
	uint32_t key, next, *prev = NULL;
	struct pi_proxy_rule r;
	struct pi_pod_info proxy, pod;

	while (!bpf_map_get_next_key(s->maps[IM_PROXY_RULES], prev, &next)) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(s->maps[IM_PROXY_RULES], &key, &r))
			continue;
		if (key != gone->ifindex && r.proxy_ifindex != gone->ifindex)
			continue;
		if (pod_by_ifindex(n, key, &pod))
			continue;
		if (pod_by_ifindex(n, r.proxy_ifindex, &proxy)) {
			unproxy(n, s, NULL, &pod, false);
		} else {
			unproxy(n, s, &proxy, &pod, false);
		}
		prev = NULL;	/* the map changed under the walk */
	}
}

int do_proxy(int argc, char **argv)
{
	static const struct cmd cmds[] = {
		{ "add", proxy_add },
		{ "del", proxy_del },
		{ "list", proxy_list },
		{ "help", proxy_help },
		{ 0 },
	};

	return cmd_select(cmds, argc, argv, proxy_help);
}
