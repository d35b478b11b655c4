/* SPDX-License-Identifier: GPL-2.0 */
/* podinject policy add|del|list */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cmds.h"
#include "util.h"

static int policy_help(int argc, char **argv)
{
	fprintf(stderr,
		"Usage: podinject [-N NODE] policy add POD [egress|ingress] allow|deny\n"
		"                 [to|from CIDR] [proto tcp|udp|icmp|any] [port N[-M]] [at POS]\n"
		"       podinject [-N NODE] policy del POD [egress|ingress] ID|all\n"
		"       podinject [-N NODE] [-j] policy list [POD]\n"
		"\n"
		"Rules are checked in order, the first match decides, no match allows.\n"
		"egress rules match the destination ('to'), ingress rules the source\n"
		"('from'); 'port' is the destination port and needs proto tcp or udp.\n"
		"'at POS' inserts at position POS (1 = first; past the end: the end);\n"
		"default: append.\n"
		"ID is the rule's id as 'policy list' shows it.\n");
	return EXIT_OK;
}

static const char *dir_name(uint32_t dir)
{
	return dir == PI_DIR_EGRESS ? "egress" : "ingress";
}

static bool parse_dir(const char *s, uint32_t *dir)
{
	if (!strcmp(s, "egress"))
		*dir = PI_DIR_EGRESS;
	else if (!strcmp(s, "ingress"))
		*dir = PI_DIR_INGRESS;
	else
		return false;
	return true;
}

struct rule_args {
	struct pi_rule r;
	bool has_to, has_from;
};

static int parse_cidr(const char *v, void *dst)
{
	struct pi_rule *r = dst;
	int family, plen;

	if (pi_parse_prefix(v, &family, &r->addr, &plen))
		return -EINVAL;
	r->family = family;
	r->prefixlen = plen;
	return 0;
}

static int parse_proto_v(const char *v, void *dst)
{
	return pi_parse_proto(v, &((struct pi_rule *)dst)->proto);
}

static int parse_ports_v(const char *v, void *dst)
{
	struct pi_rule *r = dst;

	return pi_parse_port_range(v, &r->port_lo, &r->port_hi);
}

static int parse_pos(const char *v, void *dst)
{
	uint32_t *pos = dst;

	return pi_parse_u32(v, pos) || *pos < 1 ? -EINVAL : 0;
}

static int policy_add(int argc, char **argv)
{
	struct rule_args a = {};
	const char *pod_name;
	uint32_t dir = PI_DIR_EGRESS, pos = 0, id;
	bool seen[5] = {};
	const struct opt opts[] = {
		OPT_PARSE("to", parse_cidr, &a.r, "a CIDR", &a.has_to),
		OPT_PARSE("from", parse_cidr, &a.r, "a CIDR", &a.has_from),
		OPT_PARSE("proto", parse_proto_v, &a.r, "tcp, udp, icmp or any", &seen[0]),
		OPT_PARSE("port", parse_ports_v, &a.r, "N or N-M within 1-65535", &seen[1]),
		OPT_PARSE("at", parse_pos, &pos, "a position from 1", &seen[2]),
		{ 0 },
	};
	struct pi_node *n;
	int err;

	if (argc < 2)
		return usage_err("policy add needs POD and allow|deny");
	pod_name = argv[0];
	argc--;
	argv++;
	if (parse_dir(argv[0], &dir)) {
		argc--;
		argv++;
	}
	if (argc < 1)
		return usage_err("policy add needs allow or deny");
	if (!strcmp(argv[0], "allow"))
		a.r.action = PI_ALLOW;
	else if (!strcmp(argv[0], "deny"))
		a.r.action = PI_DENY;
	else
		return usage_err("expected allow or deny, not '%s'", argv[0]);
	err = parse_opts(opts, argc - 1, argv + 1, 0, NULL, NULL);
	if (err)
		return err;
	if ((a.has_to && dir != PI_DIR_EGRESS) || (a.has_from && dir != PI_DIR_INGRESS))
		return usage_err("%s rules match '%s', not '%s'", dir_name(dir),
				 dir == PI_DIR_EGRESS ? "to" : "from",
				 dir == PI_DIR_EGRESS ? "from" : "to");
	if (a.r.port_hi && a.r.proto != IPPROTO_TCP && a.r.proto != IPPROTO_UDP)
		return usage_err("'port' needs proto tcp or udp");
	if (!pi_valid_pod_name(pod_name))
		return usage_err("invalid pod name '%s'", pod_name);

	err = pi_node_open(node_name, PI_OPEN_WRITE, lock_timeout_ms, &n);
	if (!err)
		err = pi_policy_add(n, pod_name, dir, &a.r, pos, &id);
	pi_node_close(n);
	if (err)
		return exit_code(err);
	if (json_output) {
		json_obj_open(jw);
		json_ku64(jw, "id", id);
		json_obj_close(jw);
		json_end(jw);
	} else {
		printf("rule %u added to pod %s %s\n", id, pod_name,
		       dir_name(dir));
	}
	return EXIT_OK;
}

static int policy_del(int argc, char **argv)
{
	const char *pod_name, *what;
	uint32_t dir = PI_DIR_EGRESS, id = 0;
	struct pi_node *n;
	bool all;
	int err;

	if (argc < 2)
		return usage_err("policy del needs POD and ID|all");
	pod_name = argv[0];
	if (argc == 3) {
		if (!parse_dir(argv[1], &dir))
			return usage_err("expected egress or ingress, not '%s'",
					 argv[1]);
		what = argv[2];
	} else if (argc == 2) {
		what = argv[1];
	} else {
		return usage_err("too many arguments");
	}
	all = !strcmp(what, "all");
	if (!all && (pi_parse_u32(what, &id) || !id))
		return usage_err("invalid rule id '%s'", what);
	if (!pi_valid_pod_name(pod_name))
		return usage_err("invalid pod name '%s'", pod_name);
	err = pi_node_open(node_name, PI_OPEN_WRITE, lock_timeout_ms, &n);
	if (!err)
		err = pi_policy_del(n, pod_name, dir, all ? 0 : id);
	pi_node_close(n);
	if (err)
		return exit_code(err);
	p_info("%s %s rule%s of pod %s deleted", all ? "all" : what,
	       dir_name(dir), all ? "s" : "", pod_name);
	return EXIT_OK;
}

static void print_rule(const char *pod, const struct pi_rule_info *ri)
{
	const struct pi_rule *r = &ri->rule;
	char addr[64] = "any", port[16] = "any";

	if (r->family)
		pi_fmt_addr(r->family, &r->addr, r->prefixlen, addr, sizeof(addr));
	if (r->port_hi && r->port_lo == r->port_hi)
		snprintf(port, sizeof(port), "%u", r->port_lo);
	else if (r->port_hi)
		snprintf(port, sizeof(port), "%u-%u", r->port_lo, r->port_hi);
	if (json_output) {
		json_obj_open(jw);
		json_kstr(jw, "pod", pod);
		json_kstr(jw, "direction", dir_name(ri->dir));
		json_ku64(jw, "position", ri->position);
		json_ku64(jw, "id", r->id);
		json_kstr(jw, "action", r->action == PI_DENY ? "deny" : "allow");
		json_kstr(jw, ri->dir == PI_DIR_EGRESS ? "to" : "from", addr);
		json_kstr(jw, "proto", pi_proto_name(r->proto));
		json_kstr(jw, "port", port);
		json_ku64(jw, "packets", ri->packets);
		json_ku64(jw, "bytes", ri->bytes);
		json_obj_close(jw);
		return;
	}
	printf("%-12s %-7s %3u %5u %-5s %-4s %-24s %-5s %-11s %10llu %12llu\n",
	       pod, dir_name(ri->dir), ri->position, r->id,
	       r->action == PI_DENY ? "deny" : "allow",
	       ri->dir == PI_DIR_EGRESS ? "to" : "from", addr,
	       pi_proto_name(r->proto), port, (unsigned long long)ri->packets,
	       (unsigned long long)ri->bytes);
}

static int list_pod_rules(struct pi_node *n, const char *pod)
{
	struct pi_rule_info *rules;
	int cnt = pi_policy_list(n, pod, &rules);

	if (cnt < 0)
		return cnt;
	for (int i = 0; i < cnt; i++)
		print_rule(pod, &rules[i]);
	free(rules);
	return 0;
}

static int policy_list(int argc, char **argv)
{
	struct pi_pod_info *pods = NULL;
	struct pi_node *n;
	int err, cnt = 0;

	if (argc > 1)
		return usage_err("too many arguments");
	if (argc == 1 && !pi_valid_pod_name(argv[0]))
		return usage_err("invalid pod name '%s'", argv[0]);
	err = pi_node_open(node_name, PI_OPEN_READ, lock_timeout_ms, &n);
	if (!err && argc == 1) {
		struct pi_pod_info pod;

		err = pi_pod_get(n, argv[0], &pod);
	} else if (!err) {
		cnt = pi_pod_list(n, &pods);
		err = cnt < 0 ? cnt : 0;
	}
	if (err) {
		pi_node_close(n);
		return exit_code(err);
	}
	if (json_output)
		json_arr_open(jw);
	else
		printf("%-12s %-7s %3s %5s %-5s %-4s %-24s %-5s %-11s %10s %12s\n",
		       "POD", "DIR", "POS", "ID", "ACT", "", "ADDRESS", "PROTO",
		       "PORT", "PACKETS", "BYTES");
	/* A pod whose rules cannot be read fails the command (the library
	 * said which and why); the other pods are still listed. */
	if (argc == 1)
		err = list_pod_rules(n, argv[0]);
	for (int i = 0; i < cnt; i++) {
		int e = list_pod_rules(n, pods[i].name);

		err = err ? err : e;
	}
	free(pods);
	if (json_output) {
		json_arr_close(jw);
		json_end(jw);
	}
	pi_node_close(n);
	return err ? exit_code(err) : EXIT_OK;
}

int do_policy(int argc, char **argv)
{
	static const struct cmd cmds[] = {
		{ "add", policy_add },
		{ "del", policy_del },
		{ "list", policy_list },
		{ "help", policy_help },
		{ 0 },
	};

	return cmd_select(cmds, argc, argv, policy_help);
}
