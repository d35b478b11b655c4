/* SPDX-License-Identifier: GPL-2.0 */
/*
 * podinject policy add|del|list: ordered allow/deny rules per pod and
 * direction. The first matching rule decides; no match allows.
 *
 * Every edit builds the pod's whole new rule list in a free range of the
 * node's `rules` array and then flips the pod's reference to it, so the
 * datapath never sees a half-edited policy.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
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
		"'at POS' inserts at position POS (1 = first); default: append.\n"
		"ID is the rule's id as 'policy list' shows it.\n");
	return EXIT_OK;
}

static const char *dir_name(uint32_t dir)
{
	return dir == PI_DIR_EGRESS ? "egress" : "ingress";
}

static int read_ref(const struct pi_node *n, uint32_t pod_id, uint32_t dir,
		    struct pi_policy_ref *ref)
{
	uint32_t key = pod_id * 2 + dir;

	memset(ref, 0, sizeof(*ref));
	return bpf_map_lookup_elem(n->maps[M_POLICY_REFS], &key, ref) ?
	       -errno : 0;
}

static int read_rules(const struct pi_node *n, const struct pi_policy_ref *ref,
		      struct pi_rule *out)
{
	for (uint32_t i = 0; i < ref->count; i++) {
		uint32_t slot = ref->start + i;

		if (bpf_map_lookup_elem(n->maps[M_RULES], &slot, &out[i]))
			return -errno;
	}
	return 0;
}

/* First slot of a free run of `count` slots, or -ENOSPC. Live ranges,
 * including the one being replaced, are all avoided. */
static int find_free_range(const struct pi_node *n, uint32_t count,
			   uint32_t *start)
{
	uint8_t *used = calloc(PI_MAX_RULES, 1);
	struct pi_policy_ref ref;
	uint32_t run = 0;

	if (!used)
		return -ENOMEM;
	for (uint32_t k = 0; k < PI_MAX_PODS * 2; k++) {
		if (bpf_map_lookup_elem(n->maps[M_POLICY_REFS], &k, &ref))
			continue;
		for (uint32_t i = 0; i < ref.count; i++)
			if (ref.start + i < PI_MAX_RULES)
				used[ref.start + i] = 1;
	}
	for (uint32_t s = 0; s < PI_MAX_RULES; s++) {
		run = used[s] ? 0 : run + 1;
		if (run == count) {
			*start = s + 1 - count;
			free(used);
			return 0;
		}
	}
	free(used);
	return -ENOSPC;
}

static int alloc_rule_id(const struct pi_node *n, uint32_t *id)
{
	uint8_t *used = calloc(PI_MAX_RULE_IDS, 1);
	struct pi_policy_ref ref;
	struct pi_rule r;
	int ncpu = libbpf_num_possible_cpus();
	void *zero;

	if (!used)
		return -ENOMEM;
	for (uint32_t k = 0; k < PI_MAX_PODS * 2; k++) {
		if (bpf_map_lookup_elem(n->maps[M_POLICY_REFS], &k, &ref))
			continue;
		for (uint32_t i = 0; i < ref.count; i++) {
			uint32_t slot = ref.start + i;

			if (!bpf_map_lookup_elem(n->maps[M_RULES], &slot, &r) &&
			    r.id < PI_MAX_RULE_IDS)
				used[r.id] = 1;
		}
	}
	/* Id 0 is never handed out, so an all-zero slot is no rule. */
	for (uint32_t i = 1; i < PI_MAX_RULE_IDS; i++) {
		if (used[i])
			continue;
		*id = i;
		free(used);
		zero = calloc(ncpu > 0 ? ncpu : 1, sizeof(struct pi_rule_stats));
		if (!zero)
			return -ENOMEM;
		bpf_map_update_elem(n->maps[M_RULE_STATS], id, zero, 0);
		free(zero);
		return 0;
	}
	free(used);
	return -ENOSPC;
}

/* Publishes `rules` as the pod's policy in `dir`. */
static int write_policy(const struct pi_node *n, uint32_t pod_id, uint32_t dir,
			const struct pi_rule *rules, uint32_t count)
{
	struct pi_policy_ref ref = { .count = count };
	uint32_t key = pod_id * 2 + dir;
	int err;

	if (count) {
		err = find_free_range(n, count, &ref.start);
		if (err)
			return err;
		for (uint32_t i = 0; i < count; i++) {
			uint32_t slot = ref.start + i;

			if (bpf_map_update_elem(n->maps[M_RULES], &slot,
						&rules[i], 0))
				return -errno;
		}
	}
	return bpf_map_update_elem(n->maps[M_POLICY_REFS], &key, &ref, 0) ?
	       -errno : 0;
}

int policy_clear_pod(struct pi_node *n, uint32_t pod_id)
{
	int err = write_policy(n, pod_id, PI_DIR_EGRESS, NULL, 0);

	if (!err)
		err = write_policy(n, pod_id, PI_DIR_INGRESS, NULL, 0);
	return err;
}

static int open_pod(struct pi_node *n, const char *name, struct pi_pod_info *pod,
		    enum node_lock lock)
{
	if (!pi_valid_pod_name(name))
		return usage_err("invalid pod name '%s'", name);
	if (node_open(n, node_name, lock, lock_timeout_ms))
		return EXIT_RUNTIME;
	if (pod_find(n, name, pod)) {
		p_err("no pod '%s' on node '%s'", name, n->name);
		node_close(n);
		return EXIT_USAGE;
	}
	return 0;
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

static int policy_add(int argc, char **argv)
{
	struct pi_rule *list = NULL;
	struct pi_rule r = {};
	struct pi_policy_ref ref;
	const char *pod_name;
	struct pi_pod_info pod;
	struct pi_node n;
	uint32_t dir = PI_DIR_EGRESS, pos = 0;
	bool has_pos = false;
	int family, plen, err;

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
		r.action = PI_ALLOW;
	else if (!strcmp(argv[0], "deny"))
		r.action = PI_DENY;
	else
		return usage_err("expected allow or deny, not '%s'", argv[0]);
	argc--;
	argv++;
	while (argc > 0) {
		const char *k = argv[0], *v = argc > 1 ? argv[1] : NULL;

		if (!v)
			return usage_err("'%s' needs a value", k);
		if (!strcmp(k, "to") || !strcmp(k, "from")) {
			if ((dir == PI_DIR_EGRESS) != !strcmp(k, "to"))
				return usage_err("%s rules match '%s', not '%s'",
						 dir_name(dir),
						 dir == PI_DIR_EGRESS ? "to" :
									"from", k);
			if (pi_parse_prefix(v, &family, &r.addr, &plen))
				return usage_err("invalid CIDR '%s'", v);
			r.family = family;
			r.prefixlen = plen;
		} else if (!strcmp(k, "proto")) {
			if (pi_parse_proto(v, &r.proto))
				return usage_err("invalid proto '%s': tcp, udp, icmp or any",
						 v);
		} else if (!strcmp(k, "port")) {
			if (pi_parse_port_range(v, &r.port_lo, &r.port_hi))
				return usage_err("invalid port '%s': N or N-M within 1-65535",
						 v);
		} else if (!strcmp(k, "at")) {
			if (pi_parse_u32(v, &pos) || pos < 1)
				return usage_err("invalid position '%s'", v);
			has_pos = true;
		} else {
			return usage_err("unknown argument '%s'", k);
		}
		argc -= 2;
		argv += 2;
	}
	if (r.port_hi && r.proto != IPPROTO_TCP && r.proto != IPPROTO_UDP)
		return usage_err("'port' needs proto tcp or udp");

	err = open_pod(&n, pod_name, &pod, NODE_LOCK_EXCLUSIVE);
	if (err)
		return err;
	list = calloc(PI_MAX_RULES, sizeof(*list));
	err = list ? read_ref(&n, pod.id, dir, &ref) : -ENOMEM;
	if (!err && ref.count >= PI_MAX_RULES / 2)
		err = -ENOSPC;
	if (!err)
		err = read_rules(&n, &ref, list);
	if (!err)
		err = alloc_rule_id(&n, &r.id);
	if (!err) {
		uint32_t at = has_pos && pos - 1 < ref.count ? pos - 1 :
							       ref.count;

		memmove(&list[at + 1], &list[at],
			(ref.count - at) * sizeof(list[0]));
		list[at] = r;
		err = write_policy(&n, pod.id, dir, list, ref.count + 1);
	}
	free(list);
	node_close(&n);
	if (err) {
		p_err("cannot add rule to pod '%s': %s", pod_name,
		      strerror(-err));
		return EXIT_RUNTIME;
	}
	if (json_output) {
		json_obj_open(jw);
		json_ku64(jw, "id", r.id);
		json_obj_close(jw);
		json_end(jw);
	} else {
		printf("rule %u added to pod %s %s\n", r.id, pod_name,
		       dir_name(dir));
	}
	return EXIT_OK;
}

static int policy_del(int argc, char **argv)
{
	struct pi_rule *list;
	struct pi_policy_ref ref;
	const char *pod_name, *what;
	struct pi_pod_info pod;
	struct pi_node n;
	uint32_t dir = PI_DIR_EGRESS, id = 0, kept = 0;
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

	err = open_pod(&n, pod_name, &pod, NODE_LOCK_EXCLUSIVE);
	if (err)
		return err;
	list = calloc(PI_MAX_RULES, sizeof(*list));
	err = list ? read_ref(&n, pod.id, dir, &ref) : -ENOMEM;
	if (!err)
		err = read_rules(&n, &ref, list);
	if (!err && !all) {
		for (uint32_t i = 0; i < ref.count; i++)
			if (list[i].id != id)
				list[kept++] = list[i];
		if (kept == ref.count) {
			p_err("pod '%s' has no %s rule %u", pod_name,
			      dir_name(dir), id);
			free(list);
			node_close(&n);
			return EXIT_USAGE;
		}
	}
	if (!err)
		err = write_policy(&n, pod.id, dir, list, kept);
	free(list);
	node_close(&n);
	if (err) {
		p_err("cannot change the policy of pod '%s': %s", pod_name,
		      strerror(-err));
		return EXIT_RUNTIME;
	}
	p_info("%s %s rule%s of pod %s deleted", all ? "all" : what,
	       dir_name(dir), all ? "s" : "", pod_name);
	return EXIT_OK;
}

static void rule_counters(const struct pi_node *n, uint32_t id,
			  struct pi_rule_stats *sum)
{
	int ncpu = libbpf_num_possible_cpus();
	struct pi_rule_stats *per;

	memset(sum, 0, sizeof(*sum));
	per = calloc(ncpu > 0 ? ncpu : 1, sizeof(*per));
	if (!per)
		return;
	if (!bpf_map_lookup_elem(n->maps[M_RULE_STATS], &id, per)) {
		for (int c = 0; c < ncpu; c++) {
			sum->packets += per[c].packets;
			sum->bytes += per[c].bytes;
		}
	}
	free(per);
}

static void print_rule(const struct pi_node *n, const struct pi_pod_info *pod,
		       uint32_t dir, uint32_t pos, const struct pi_rule *r)
{
	struct pi_rule_stats st;
	char addr[64] = "any", port[16] = "any";

	if (r->family)
		pi_fmt_addr(r->family, &r->addr, r->prefixlen, addr, sizeof(addr));
	if (r->port_hi && r->port_lo == r->port_hi)
		snprintf(port, sizeof(port), "%u", r->port_lo);
	else if (r->port_hi)
		snprintf(port, sizeof(port), "%u-%u", r->port_lo, r->port_hi);
	rule_counters(n, r->id, &st);
	if (json_output) {
		json_obj_open(jw);
		json_kstr(jw, "pod", pod->name);
		json_kstr(jw, "direction", dir_name(dir));
		json_ku64(jw, "position", pos);
		json_ku64(jw, "id", r->id);
		json_kstr(jw, "action", r->action == PI_DENY ? "deny" : "allow");
		json_kstr(jw, dir == PI_DIR_EGRESS ? "to" : "from", addr);
		json_kstr(jw, "proto", pi_proto_name(r->proto));
		json_kstr(jw, "port", port);
		json_ku64(jw, "packets", st.packets);
		json_ku64(jw, "bytes", st.bytes);
		json_obj_close(jw);
		return;
	}
	printf("%-12s %-7s %3u %5u %-5s %-4s %-24s %-5s %-11s %10llu %12llu\n",
	       pod->name, dir_name(dir), pos, r->id,
	       r->action == PI_DENY ? "deny" : "allow",
	       dir == PI_DIR_EGRESS ? "to" : "from", addr,
	       pi_proto_name(r->proto), port, (unsigned long long)st.packets,
	       (unsigned long long)st.bytes);
}

static int list_pod_rules(const struct pi_node *n, const struct pi_pod_info *pod,
			  void *ctx)
{
	struct pi_rule *list = calloc(PI_MAX_RULES, sizeof(*list));
	struct pi_policy_ref ref;

	if (!list)
		return -ENOMEM;
	for (uint32_t dir = 0; dir < 2; dir++) {
		if (read_ref(n, pod->id, dir, &ref) || read_rules(n, &ref, list))
			continue;
		for (uint32_t i = 0; i < ref.count; i++)
			print_rule(n, pod, dir, i + 1, &list[i]);
	}
	free(list);
	return 0;
}

static int policy_list(int argc, char **argv)
{
	struct pi_pod_info pod;
	struct pi_node n;
	int err;

	if (argc > 1)
		return usage_err("too many arguments");
	if (argc == 1) {
		err = open_pod(&n, argv[0], &pod, NODE_LOCK_SHARED);
		if (err)
			return err;
	} else if (node_open_ro(&n)) {
		return EXIT_RUNTIME;
	}
	if (json_output)
		json_arr_open(jw);
	else
		printf("%-12s %-7s %3s %5s %-5s %-4s %-24s %-5s %-11s %10s %12s\n",
		       "POD", "DIR", "POS", "ID", "ACT", "", "ADDRESS", "PROTO",
		       "PORT", "PACKETS", "BYTES");
	if (argc == 1)
		list_pod_rules(&n, &pod, NULL);
	else
		pod_for_each(&n, list_pod_rules, NULL);
	if (json_output) {
		json_arr_close(jw);
		json_end(jw);
	}
	node_close(&n);
	return EXIT_OK;
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
