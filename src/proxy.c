/* SPDX-License-Identifier: GPL-2.0 */
/* podinject proxy add|del|list */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cmds.h"
#include "util.h"

static int proxy_help(int argc, char **argv)
{
	fprintf(stderr,
		"Usage: podinject [-N NODE] proxy add PROXY_POD --port N --for POD\n"
		"                 [--match tcp|udp [dport LIST] [dst CIDR]]\n"
		"       podinject [-N NODE] proxy add PROXY_POD --port N --for POD --inbound\n"
		"                 [--match tcp dport LIST]\n"
		"       podinject [-N NODE] proxy del PROXY_POD --for POD [--inbound|--outbound]\n"
		"       podinject [-N NODE] [-j] proxy list\n"
		"\n"
		"New connections of POD that match (default: all TCP and UDP) go\n"
		"to PROXY_POD's transparent socket on port N with their original\n"
		"destination; PROXY_POD's connections bound to POD's address are\n"
		"injected into POD's egress datapath. LIST: ports and ranges,\n"
		"e.g. 80,443,8000-8100 (at most %d).\n"
		"\n"
		"--inbound: new TCP connections *to* POD on LIST (default: every\n"
		"port) go to PROXY_POD's transparent socket on port N, from any\n"
		"client; PROXY_POD terminates them (podinject-proxy --inbound:\n"
		"mTLS) and connects on to POD with the client's address.\n"
		"proxy del without a direction removes PROXY_POD's rules of both.\n",
		PI_PROXY_MAX_PORTS);
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
	bool inbound, outbound;		/* del: which; neither: both */
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

		if (!strcmp(k, "--inbound") || (!add && !strcmp(k, "--outbound"))) {
			if (!strcmp(k, "--inbound"))
				a->inbound = true;
			else
				a->outbound = true;
			argc--;
			argv++;
			continue;
		}
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
	if (a->inbound && a->outbound)
		return usage_err("--inbound or --outbound, not both");
	if (add && a->inbound) {
		if (a->rule.proto == IPPROTO_UDP || a->rule.dst_family)
			return usage_err("--inbound captures TCP connections to the pod: --match tcp [dport LIST] only");
		a->rule.flags = PI_PROXY_INBOUND;
	}
	return 0;
}

static int proxy_add(int argc, char **argv)
{
	struct proxy_args a;
	struct pi_node *n;
	int err;

	err = parse_args(argc, argv, &a, true);
	if (err)
		return err;
	err = pi_node_open(node_name, PI_OPEN_WRITE, lock_timeout_ms, &n);
	if (!err)
		err = pi_proxy_add(n, a.proxy, a.pod, &a.rule);
	pi_node_close(n);
	if (err)
		return exit_code(err);
	if (a.inbound)
		p_info("connections to pod %s captured by %s on port %u",
		       a.pod, a.proxy, a.rule.port);
	else
		p_info("pod %s proxied by %s on port %u", a.pod, a.proxy,
		       a.rule.port);
	return EXIT_OK;
}

static int proxy_del(int argc, char **argv)
{
	struct proxy_args a;
	struct pi_node *n;
	int err;

	err = parse_args(argc, argv, &a, false);
	if (err)
		return err;
	err = pi_node_open(node_name, PI_OPEN_WRITE, lock_timeout_ms, &n);
	if (!err && (a.inbound || a.outbound)) {
		err = a.inbound ? pi_proxy_del_inbound(n, a.proxy, a.pod) :
				  pi_proxy_del(n, a.proxy, a.pod);
	} else if (!err) {
		/* both kinds, whichever there are; "not proxied" when none */
		struct pi_proxy_info *all = NULL;
		bool in = false, out = false;
		int cnt = pi_proxy_list(n, &all);

		for (int i = 0; i < cnt; i++) {
			if (strcmp(all[i].pod, a.pod) ||
			    strcmp(all[i].proxy, a.proxy))
				continue;
			if (all[i].rule.flags & PI_PROXY_INBOUND)
				in = true;
			else
				out = true;
		}
		free(all);
		if (out || !in)
			err = pi_proxy_del(n, a.proxy, a.pod);
		if (!err && in)
			err = pi_proxy_del_inbound(n, a.proxy, a.pod);
	}
	pi_node_close(n);
	if (err)
		return exit_code(err);
	p_info("pod %s no longer proxied by %s", a.pod, a.proxy);
	return EXIT_OK;
}

static int proxy_list(int argc, char **argv)
{
	struct pi_proxy_info *all = NULL;
	struct pi_node *n;
	int cnt, err;

	if (argc > 0)
		return usage_err("unknown argument '%s'", argv[0]);
	err = pi_node_open(node_name, PI_OPEN_READ, lock_timeout_ms, &n);
	cnt = err ? err : pi_proxy_list(n, &all);
	pi_node_close(n);
	if (cnt < 0)
		return exit_code(cnt);
	if (json_output)
		json_arr_open(jw);
	else
		printf("%-12s %-12s %-8s %-6s %-5s %-24s %s\n", "POD", "PROXY",
		       "DIR", "PORT", "PROTO", "DPORTS", "DST");
	for (int k = 0; k < cnt; k++) {
		const struct pi_proxy_rule *r = &all[k].rule;
		char ports[160] = "", dst[64] = "any";
		const char *dir = r->flags & PI_PROXY_INBOUND ? "inbound" :
								"outbound";
		size_t off = 0;

		for (int i = 0; i < r->nports && off < sizeof(ports); i++)
			off += snprintf(ports + off, sizeof(ports) - off,
					r->dport_lo[i] == r->dport_hi[i] ?
					"%s%u" : "%s%u-%u",
					i ? "," : "", r->dport_lo[i],
					r->dport_hi[i]);
		if (!r->nports)
			strcpy(ports, "any");
		if (r->dst_family)
			pi_fmt_addr(r->dst_family, &r->dst, r->dst_plen, dst,
				    sizeof(dst));
		if (json_output) {
			json_obj_open(jw);
			json_kstr(jw, "pod", all[k].pod);
			json_kstr(jw, "proxy", all[k].proxy);
			json_kstr(jw, "direction", dir);
			json_ku64(jw, "port", r->port);
			json_kstr(jw, "proto", pi_proto_name(r->proto));
			json_kstr(jw, "dports", ports);
			json_kstr(jw, "dst", dst);
			json_ku64(jw, "flows", r->nflows);
			json_ku64(jw, "upstream_flows", r->nupstream);
			json_ku64(jw, "limit_drops", r->limit_drops);
			json_obj_close(jw);
		} else {
			printf("%-12s %-12s %-8s %-6u %-5s %-24s %s\n",
			       all[k].pod, all[k].proxy, dir, r->port,
			       pi_proto_name(r->proto), ports, dst);
		}
	}
	free(all);
	if (json_output) {
		json_arr_close(jw);
		json_end(jw);
	}
	return EXIT_OK;
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
