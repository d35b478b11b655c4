/* SPDX-License-Identifier: GPL-2.0 */
/* podinject node up|down|show */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "cmds.h"
#include "util.h"

static int node_help(int argc, char **argv)
{
	fprintf(stderr,
		"Usage: podinject [-N NODE] node up [--uplink DEV] [--xdp] [--host]\n"
		"                                   [--attach auto|tcx|clsact]\n"
		"       podinject [-N NODE] node down [--force]\n"
		"       podinject [-N NODE] [-j] node upgrade [--if-up]\n"
		"       podinject [-N NODE] [-j] node show\n"
		"\n"
		"A node is the network namespace named NODE (made by 'up' when it\n"
		"does not exist) plus its datapath pinned under %s/NODE.\n"
		"--uplink DEV: a device already inside the node's namespace that\n"
		"leads to other nodes; traffic to non-local addresses leaves\n"
		"through it with bpf_redirect_neigh().\n"
		"--xdp: veth pods get their ingress ACL as native XDP on their\n"
		"eth0, and the uplink sends their traffic to them with\n"
		"XDP_REDIRECT (docs/datapath.md; netkit pods stay on tc).\n"
		"--host: the node is the host's own network namespace (where a\n"
		"container runtime's host-side devices are), not one named NODE;\n"
		"its devices are left alone unless named with --uplink.\n"
		"down --force: remove the pins and links of a node another build\n"
		"made, leaving its pods' namespaces and devices.\n"
		"upgrade: bring a node made by the previous release (or another\n"
		"build of this one) to this build in place, under traffic: its\n"
		"pods, rules, counters, grants, proxy rules and tracked flows are\n"
		"kept, programs are replaced atomically on each hook, and an\n"
		"interrupted upgrade is finished by the next one\n"
		"(docs/operations.md). A newer node is refused (no downgrade).\n"
		"--if-up: a node that is not up is no error (an install step\n"
		"that upgrades whatever node it finds).\n"
		"--attach: tcx links where the kernel has them (auto, the\n"
		"default), or clsact qdiscs with cls_bpf filters, as on kernels\n"
		"without tcx.\n",
		"/sys/fs/bpf/podinject");
	return EXIT_OK;
}

static int node_up(int argc, char **argv)
{
	static const struct opt_choice attach[] = {
		{ "auto", PI_ATTACH_AUTO },
		{ "tcx", PI_ATTACH_FORCE_TCX },
		{ "clsact", PI_ATTACH_FORCE_CLSACT },
		{ 0 },
	};
	struct pi_node_up_opts o = { .lock_timeout_ms = lock_timeout_ms };
	int choice = PI_ATTACH_AUTO;
	const struct opt opts[] = {
		OPT_STR("--uplink", &o.uplink, "a device name"),
		OPT_FLAG("--xdp", &o.xdp),
		OPT_FLAG("--host", &o.host),
		OPT_CHOICE("--attach", &choice, attach),
		{ 0 },
	};
	struct pi_node_info info;
	int err;

	err = parse_opts(opts, argc, argv, 0, NULL, NULL);
	if (err)
		return err;
	o.attach = choice;
	err = pi_node_up(node_name, &o, &info);
	if (err)
		return exit_code(err);
	p_info("node %s up (%s%s, namespace %s%s)", node_name,
	       info.tcx ? "tcx" : "clsact", info.xdp ? ", xdp" : "",
	       info.host ? "of the host" : node_name,
	       info.host ? "" : info.owns_netns ? ", created" : ", adopted");
	if (json_output) {
		json_obj_open(jw);
		json_kstr(jw, "node", node_name);
		json_kstr(jw, "attach", info.tcx ? "tcx" : "clsact");
		json_kbool(jw, "xdp", info.xdp);
		json_kbool(jw, "host", info.host);
		json_kbool(jw, "created_netns", info.owns_netns);
		json_obj_close(jw);
		json_end(jw);
	}
	return EXIT_OK;
}

static int node_down(int argc, char **argv)
{
	bool force = false;
	const struct opt opts[] = {
		OPT_FLAG("--force", &force),
		{ 0 },
	};
	int err;

	err = parse_opts(opts, argc, argv, 0, NULL, NULL);
	if (err)
		return err;
	err = pi_node_down(node_name, force, lock_timeout_ms);
	if (err)
		return exit_code(err);
	if (force)
		p_info("node %s: pins and links removed; the namespaces and devices of its pods are left",
		       node_name);
	else
		p_info("node %s down", node_name);
	return EXIT_OK;
}

/* Tests kill the upgrader at a phase boundary, or make it fail there
 * (docs/operations.md). */
static int kill_or_fail_at(enum pi_upgrade_point point, void *ctx)
{
	const char *kill_at = getenv("PODINJECT_UPGRADE_KILL_AT");
	const char *fail_at = getenv("PODINJECT_UPGRADE_FAIL_AT");

	(void)ctx;
	if (kill_at && atoi(kill_at) == (int)point)
		raise(SIGKILL);
	if (fail_at && atoi(fail_at) == (int)point)
		return -ECANCELED;
	return 0;
}

/* Library messages held back for a moment (node upgrade --if-up). */
static struct held_msg {
	enum pi_log_level level;
	char *msg;
} held[64];
static int nheld;

static void held_log(enum pi_log_level level, const char *msg, void *ctx)
{
	if (nheld < (int)(sizeof(held) / sizeof(held[0]))) {
		held[nheld].level = level;
		held[nheld].msg = strdup(msg);
		if (held[nheld].msg)
			nheld++;
	}
}

static void held_free(void)
{
	while (nheld > 0)
		free(held[--nheld].msg);
}

static void held_replay(void)
{
	for (int i = 0; i < nheld; i++)
		cli_log(held[i].level, held[i].msg, NULL);
	held_free();
}

static int node_upgrade(int argc, char **argv)
{
	struct pi_node_upgrade_opts o = { .lock_timeout_ms = lock_timeout_ms };
	struct pi_node_upgrade_info info;
	bool if_up = false;
	const struct opt opts[] = {
		OPT_FLAG("--if-up", &if_up),
		{ 0 },
	};
	int err;

	err = parse_opts(opts, argc, argv, 0, NULL, NULL);
	if (err)
		return err;
	if (getenv("PODINJECT_UPGRADE_KILL_AT") ||
	    getenv("PODINJECT_UPGRADE_FAIL_AT"))
		o.at_point = kill_or_fail_at;
	/* With --if-up the library's words wait until its result says
	 * whether "not up" was all there was to say. */
	if (if_up)
		pi_set_log(held_log, NULL);
	err = pi_node_upgrade(node_name, &o, &info);
	if (if_up) {
		pi_set_log(cli_log, NULL);
		if (err == -ENOENT) {
			p_info("node %s is not up: nothing to upgrade",
			       node_name);
			held_free();
			return EXIT_OK;
		}
		held_replay();
	}
	if (err)
		return exit_code(err);
	if (info.from_abi != info.to_abi)
		p_info("node %s upgraded from ABI %u to %u%s: %d migration step(s), %d hook(s) re-pointed, %d of injection and proxy",
		       node_name, info.from_abi, info.to_abi,
		       info.resumed ? " (an interrupted upgrade finished)" : "",
		       info.migrations, info.hooks, info.inject_hooks);
	else
		p_info("node %s: ABI %u, nothing to migrate%s; %d hook(s) re-pointed to this build's programs, %d of injection and proxy",
		       node_name, info.to_abi,
		       info.resumed ? " (an interrupted upgrade finished)" : "",
		       info.hooks, info.inject_hooks);
	if (info.rolled_back)
		p_info("an interrupted upgrade was rolled back first");
	if (info.attached || info.removed)
		p_info("%d hook(s) had lost the node's program and got it back; %d extra program(s) of the node removed",
		       info.attached, info.removed);
	if (json_output) {
		json_obj_open(jw);
		json_kstr(jw, "node", node_name);
		json_ku64(jw, "from_abi", info.from_abi);
		json_ku64(jw, "to_abi", info.to_abi);
		json_kbool(jw, "resumed", info.resumed);
		json_kbool(jw, "rolled_back", info.rolled_back);
		json_ku64(jw, "migrations", info.migrations);
		json_ku64(jw, "hooks", info.hooks);
		json_ku64(jw, "inject_hooks", info.inject_hooks);
		json_ku64(jw, "attached", info.attached);
		json_ku64(jw, "removed", info.removed);
		json_obj_close(jw);
		json_end(jw);
	}
	return EXIT_OK;
}

static void print_address(int family, const struct pi_addr *a, void *ctx)
{
	char buf[64];

	pi_fmt_addr(family, a, -1, buf, sizeof(buf));
	if (json_output)
		json_str(jw, buf);
	else
		printf(" %s", buf);
}

static int node_show(int argc, char **argv)
{
	struct pi_node_info info;
	struct pi_node *n;
	int err;

	if (argc > 0)
		return usage_err("unknown argument '%s'", argv[0]);
	err = pi_node_open(node_name, PI_OPEN_READ, lock_timeout_ms, &n);
	if (!err)
		err = pi_node_get_info(n, &info);
	if (err) {
		pi_node_close(n);
		return exit_code(err);
	}
	if (json_output) {
		json_obj_open(jw);
		json_kstr(jw, "node", info.name);
		json_kstr(jw, "netns", info.host ? "/proc/self/ns/net" : info.name);
		json_kbool(jw, "host", info.host);
		json_kbool(jw, "owns_netns", info.owns_netns);
		json_kstr(jw, "attach", info.tcx ? "tcx" : "clsact");
		json_kbool(jw, "xdp", info.xdp);
		json_kstr(jw, "pin_dir", info.pin_dir);
		json_key(jw, "uplink");
		if (info.uplink_ifindex) {
			json_obj_open(jw);
			json_kstr(jw, "name", info.uplink);
			json_ku64(jw, "ifindex", info.uplink_ifindex);
			json_obj_close(jw);
		} else {
			json_null(jw);
		}
		json_ku64(jw, "pods", info.pods);
		json_key(jw, "upgraded_from_abi");
		if (info.upgraded_from)
			json_u64(jw, info.upgraded_from);
		else
			json_null(jw);
		json_key(jw, "node_addresses");
		json_arr_open(jw);
	} else {
		printf("node %s\n  netns %s%s\n  attach %s%s\n  pins %s\n",
		       info.name, info.host ? "(the host's)" : info.name,
		       info.owns_netns ? " (owned)" : "",
		       info.tcx ? "tcx" : "clsact",
		       info.xdp ?
		       ", xdp (pod ingress ACL on veth eth0, uplink XDP_REDIRECT)" : "",
		       info.pin_dir);
		if (info.uplink_ifindex)
			printf("  uplink %s (ifindex %u)\n", info.uplink,
			       info.uplink_ifindex);
		else
			printf("  uplink none (non-pod traffic goes to the stack)\n");
		if (info.upgraded_from) {
			time_t t = info.upgraded_ns / 1000000000ULL;
			char when[32];

			strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC",
				 gmtime(&t));
			printf("  upgraded from ABI %u on %s\n",
			       info.upgraded_from, when);
		}
		printf("  pods %d\n  node addresses:", info.pods);
	}
	pi_node_addresses(n, print_address, NULL);
	if (json_output) {
		json_arr_close(jw);
		json_obj_close(jw);
		json_end(jw);
	} else {
		printf("\n");
	}
	pi_node_close(n);
	return EXIT_OK;
}

int do_node(int argc, char **argv)
{
	static const struct cmd cmds[] = {
		{ "up", node_up },
		{ "down", node_down },
		{ "show", node_show },
		{ "upgrade", node_upgrade },
		{ "help", node_help },
		{ 0 },
	};

	return cmd_select(cmds, argc, argv, node_help);
}
