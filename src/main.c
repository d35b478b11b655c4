/* SPDX-License-Identifier: GPL-2.0 */
/* podinject: inject traffic into a pod's egress datapath as if the pod had
 * sent it; plus the reference node datapath it is tested on. */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <bpf/libbpf.h>
#include "cmds.h"
#include "util.h"

static int main_help(int argc, char **argv)
{
	fprintf(stderr,
		"Usage: podinject [-j|--json] [-v] [-N|--node NODE] [-W|--wait MS] OBJECT COMMAND ...\n"
		"\n"
		"OBJECT := node | pod | policy | ct | inject | proxy | probe | features |\n"
		"          metrics | monitor | apply | export | help\n"
		"NODE defaults to $PODINJECT_NODE, else \"node\".\n"
		"MS: how long to wait for the node's lock while another command holds\n"
		"it (default $PODINJECT_WAIT_MS, else %d); then the command fails with\n"
		"\"node busy\" and changes nothing. A probe waits as long for the\n"
		"node's running probe.\n"
		"'podinject OBJECT help' (or --help anywhere after OBJECT) explains\n"
		"each object.\n"
		"Exit codes: 0 ok, 1 runtime failure, 2 usage error.\n",
		PI_LOCK_TIMEOUT_MS);
	return EXIT_OK;
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt,
			va_list ap)
{
	if (!verbose && level != LIBBPF_WARN)
		return 0;
	if (!verbose)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "node", required_argument, NULL, 'N' },
		{ "wait", required_argument, NULL, 'W' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	static const struct cmd cmds[] = {
		{ "node", do_node },
		{ "pod", do_pod },
		{ "policy", do_policy },
		{ "ct", do_ct },
		{ "inject", do_inject },
		{ "proxy", do_proxy },
		{ "probe", do_probe },
		{ "features", do_features },
		{ "metrics", do_metrics },
		{ "monitor", do_monitor },
		{ "apply", do_apply },
		{ "export", do_export },
		{ "help", main_help },
		{ 0 },
	};
	const char *env = getenv("PODINJECT_NODE");
	const char *wait = getenv("PODINJECT_WAIT_MS");
	uint32_t ms;
	int c;

	if (env && *env)
		node_name = env;
	while ((c = getopt_long(argc, argv, "+jvN:W:h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json_output = true;
			break;
		case 'v':
			verbose = true;
			break;
		case 'N':
			node_name = optarg;
			break;
		case 'W':
			wait = optarg;
			break;
		case 'h':
			main_help(0, NULL);
			return EXIT_OK;
		default:
			main_help(0, NULL);
			return EXIT_USAGE;
		}
	}
	if (!pi_valid_name(node_name, 15))
		return usage_err("invalid node name '%s': use 1-15 of a-z, 0-9, '-'",
				 node_name);
	if (wait && *wait) {
		if (pi_parse_u32(wait, &ms) || ms > 3600 * 1000)
			return usage_err("invalid lock wait '%s': milliseconds, at most 3600000",
					 wait);
		lock_timeout_ms = ms;
	}
	json_init(jw, stdout);
	libbpf_set_print(libbpf_print);
	pi_set_log(cli_log, NULL);
	argc -= optind;
	argv += optind;
	if (argc < 1) {
		main_help(0, NULL);
		return EXIT_USAGE;
	}
	/* --help or -h anywhere after OBJECT is 'OBJECT help'. No pod or
	 * node name starts with '-'; a device, namespace or file named
	 * exactly so cannot be given as an option's value. */
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			char *object_help[] = { argv[0], "help", NULL };

			return cmd_select(cmds, 2, object_help, main_help);
		}
	}
	return cmd_select(cmds, argc, argv, main_help);
}
