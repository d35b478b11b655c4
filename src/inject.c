/* SPDX-License-Identifier: GPL-2.0 */
/* podinject inject allow|deny|list|stats|refused */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cmds.h"
#include "util.h"

static const char *const path_names[] = PI_PATH_NAMES;
static const char *const inj_drop_names[PI_INJ_DROP_MAX] = PI_INJ_DROP_NAMES;

static int inject_help(int argc, char **argv)
{
	fprintf(stderr,
		"Usage: podinject [-N NODE] inject allow INJECTOR --as POD [--as POD ...]\n"
		"                                 [--path fast|fallback|auto]\n"
		"       podinject [-N NODE] inject deny INJECTOR [--as POD ...]\n"
		"       podinject [-N NODE] [-j] inject list\n"
		"       podinject [-N NODE] [-j] inject stats\n"
		"       podinject [-N NODE] [-j] inject refused\n"
		"\n"
		"An authorised INJECTOR pod may send packets with POD's source\n"
		"address; they are emitted into POD's egress datapath, where POD's\n"
		"egress programs run on them once. Without authorisation such\n"
		"packets stay spoofed and the datapath drops them.\n"
		"--path: fast = bpf_redirect_peer(BPF_F_EGRESS), fallback =\n"
		"bpf_redirect(BPF_F_INGRESS), auto (default) = fast where the\n"
		"kernel has it. The fallback onto a netkit pod is the netkit\n"
		"fallback: a guard at the pod's primary runs the pod's peer\n"
		"program on injected packets, once (docs/datapath.md).\n"
		"refused: the packets the injection object refused, node-wide,\n"
		"by reason (the monitor's names: `monitor --type drop` says which\n"
		"packet; stats and `proxy list` say whose where they count it).\n");
	return EXIT_OK;
}

struct as_list {
	const char *names[PI_INJECT_MAX_AS];
	int cnt;
};

static int add_as(const char *v, void *dst)
{
	struct as_list *l = dst;

	if (l->cnt >= PI_INJECT_MAX_AS || !pi_valid_pod_name(v))
		return -EINVAL;
	l->names[l->cnt++] = v;
	return 0;
}

static int inject_allow(int argc, char **argv)
{
	static const struct opt_choice paths[] = {
		{ "fast", PI_PATH_FAST },
		{ "fallback", PI_PATH_FALLBACK },
		{ "auto", 0 },
		{ 0 },
	};
	struct as_list as = {};
	const char *injector = NULL;
	int path = 0;
	const struct opt opts[] = {
		OPT_LIST("--as", add_as, &as, "a pod name; at most 32"),
		OPT_CHOICE("--path", &path, paths),
		{ 0 },
	};
	struct pi_node *n;
	uint32_t used;
	int err;

	if (argc < 1)
		return usage_err("inject allow needs an INJECTOR pod");
	err = parse_opts(opts, argc, argv, 1, &injector, NULL);
	if (err)
		return err;
	if (!injector || !pi_valid_pod_name(injector))
		return usage_err("invalid pod name '%s'", injector ? injector : "");
	if (!as.cnt)
		return usage_err("inject allow needs at least one --as POD");
	err = pi_node_open(node_name, PI_OPEN_WRITE, lock_timeout_ms, &n);
	if (!err)
		err = pi_inject_allow(n, injector, as.names, as.cnt, path, &used);
	pi_node_close(n);
	if (err)
		return exit_code(err);
	p_info("pod %s may inject as %d pod%s (path %s)", injector, as.cnt,
	       as.cnt > 1 ? "s" : "", path_names[used]);
	return EXIT_OK;
}

/* How many authorisations the injector holds (0 when they cannot be read). */
static int grants_of(struct pi_node *n, const char *injector)
{
	struct pi_inject_auth_info *all = NULL;
	int cnt = pi_inject_list(n, &all), mine = 0;

	for (int i = 0; i < cnt; i++)
		mine += !strcmp(all[i].injector, injector);
	free(all);
	return mine;
}

static int inject_deny(int argc, char **argv)
{
	struct as_list as = {};
	const char *injector = NULL;
	const struct opt opts[] = {
		OPT_LIST("--as", add_as, &as, "a pod name; at most 32"),
		{ 0 },
	};
	struct pi_node *n;
	int err, kept;

	if (argc < 1)
		return usage_err("inject deny needs an INJECTOR pod");
	err = parse_opts(opts, argc, argv, 1, &injector, NULL);
	if (err)
		return err;
	if (!injector || !pi_valid_pod_name(injector))
		return usage_err("invalid pod name '%s'", injector ? injector : "");
	err = pi_node_open(node_name, PI_OPEN_WRITE, lock_timeout_ms, &n);
	if (!err)
		err = pi_inject_deny(n, injector, as.names, as.cnt);
	kept = err > 0 && !as.cnt ? grants_of(n, injector) : 0;
	pi_node_close(n);
	if (err < 0)
		return exit_code(err);
	p_info("removed %d authorisation%s of %s", err, err > 1 ? "s" : "",
	       injector);
	if (kept > 0)
		p_info("kept %d authorisation%s of its proxy rules (`proxy del` removes them)",
		       kept, kept > 1 ? "s" : "");
	return EXIT_OK;
}

static int inject_list(int argc, char **argv)
{
	struct pi_inject_auth_info *all = NULL;
	struct pi_node *n;
	int cnt, err;

	if (argc > 0)
		return usage_err("unknown argument '%s'", argv[0]);
	err = pi_node_open(node_name, PI_OPEN_READ, lock_timeout_ms, &n);
	cnt = err ? err : pi_inject_list(n, &all);
	pi_node_close(n);
	if (cnt < 0)
		return exit_code(cnt);
	if (json_output)
		json_arr_open(jw);
	else
		printf("%-12s %-12s %-28s %s\n", "INJECTOR", "AS", "ADDRESS",
		       "PATH");
	for (int i = 0; i < cnt; i++) {
		char addr[64];

		pi_fmt_addr(all[i].family, &all[i].addr, -1, addr, sizeof(addr));
		if (json_output) {
			json_obj_open(jw);
			json_kstr(jw, "injector", all[i].injector);
			json_kstr(jw, "as", all[i].as);
			json_kstr(jw, "address", addr);
			json_kstr(jw, "path", path_names[all[i].path]);
			json_obj_close(jw);
		} else {
			printf("%-12s %-12s %-28s %s\n", all[i].injector,
			       all[i].as, addr, path_names[all[i].path]);
		}
	}
	free(all);
	if (json_output) {
		json_arr_close(jw);
		json_end(jw);
	}
	return EXIT_OK;
}

static int inject_stats(int argc, char **argv)
{
	struct pi_inject_stat_info *all = NULL;
	struct pi_node *n;
	int cnt, err;

	if (argc > 0)
		return usage_err("unknown argument '%s'", argv[0]);
	err = pi_node_open(node_name, PI_OPEN_READ, lock_timeout_ms, &n);
	cnt = err ? err : pi_inject_stats(n, &all);
	pi_node_close(n);
	if (cnt < 0)
		return exit_code(cnt);
	if (json_output)
		json_arr_open(jw);
	else
		printf("%-12s %-12s %-15s %10s %12s  %s\n", "INJECTOR", "AS",
		       "PATH", "PACKETS", "BYTES", "DROPS");
	for (int i = 0; i < cnt; i++) {
		const struct pi_inject_stat_info *st = &all[i];
		const char *path = st->path <= PI_PATH_MAX ?
				   path_names[st->path] : "?";

		if (json_output) {
			json_obj_open(jw);
			json_kstr(jw, "injector", st->injector);
			json_kstr(jw, "as", st->as);
			json_kstr(jw, "path", path);
			json_ku64(jw, "packets", st->packets);
			json_ku64(jw, "bytes", st->bytes);
			json_key(jw, "drops");
			json_obj_open(jw);
			for (int r = 0; r < PI_INJ_DROP_MAX; r++)
				json_ku64(jw, inj_drop_names[r], st->drops[r]);
			json_obj_close(jw);
			if (st->has_guard) {
				json_key(jw, "guard");
				json_obj_open(jw);
				json_kstr(jw, "tag", st->tag);
				json_ku64(jw, "runs", st->guard.runs);
				json_ku64(jw, "missing", st->guard.missing);
				json_ku64(jw, "forged", st->guard.forged);
				json_obj_close(jw);
			}
			json_obj_close(jw);
			continue;
		}
		printf("%-12s %-12s %-15s %10llu %12llu ", st->injector, st->as,
		       path, (unsigned long long)st->packets,
		       (unsigned long long)st->bytes);
		for (int r = 0; r < PI_INJ_DROP_MAX; r++)
			printf(" %s %llu", inj_drop_names[r],
			       (unsigned long long)st->drops[r]);
		if (st->has_guard)
			printf("  guard %s: runs %llu missing %llu forged %llu",
			       st->tag, (unsigned long long)st->guard.runs,
			       (unsigned long long)st->guard.missing,
			       (unsigned long long)st->guard.forged);
		printf("\n");
	}
	free(all);
	if (json_output) {
		json_arr_close(jw);
		json_end(jw);
	}
	return EXIT_OK;
}

static int inject_refused(int argc, char **argv)
{
	static const char *const names[PI_INJ_REFUSALS] = PI_MON_DROP_NAMES;
	uint64_t counts[PI_INJ_REFUSALS];
	struct pi_node *n;
	int err;

	if (argc > 0)
		return usage_err("unknown argument '%s'", argv[0]);
	err = pi_node_open(node_name, PI_OPEN_READ, lock_timeout_ms, &n);
	if (!err)
		err = pi_inject_refusals(n, counts);
	pi_node_close(n);
	if (err)
		return exit_code(err);
	if (json_output)
		json_obj_open(jw);
	else
		printf("%-24s %12s\n", "REASON", "PACKETS");
	for (int i = 0; i < PI_INJ_REFUSALS; i++) {
		if (json_output)
			json_ku64(jw, names[i], counts[i]);
		else
			printf("%-24s %12llu\n", names[i],
			       (unsigned long long)counts[i]);
	}
	if (json_output) {
		json_obj_close(jw);
		json_end(jw);
	}
	return EXIT_OK;
}

int do_inject(int argc, char **argv)
{
	static const struct cmd cmds[] = {
		{ "allow", inject_allow },
		{ "deny", inject_deny },
		{ "list", inject_list },
		{ "stats", inject_stats },
		{ "refused", inject_refused },
		{ "help", inject_help },
		{ 0 },
	};

	return cmd_select(cmds, argc, argv, inject_help);
}
