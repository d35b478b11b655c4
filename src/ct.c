/* SPDX-License-Identifier: GPL-2.0 */
/* podinject ct list|flush|timeout */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cmds.h"
#include "util.h"

static const char *const state_names[] = PI_CT_STATE_NAMES;
static const char *const timeout_names[PI_CT_TO_MAX] = PI_CT_TIMEOUT_NAMES;

static int ct_help(int argc, char **argv)
{
	fprintf(stderr,
		"Usage: podinject [-N NODE] [-j] ct list POD\n"
		"       podinject [-N NODE] ct flush POD\n"
		"       podinject [-N NODE] [-j] ct timeout [KIND SECONDS]\n"
		"\n"
		"The pod's tracked flows: each was decided by the policy of the\n"
		"direction that opened it, on its first packet; its later packets\n"
		"and its replies pass with it until it is idle for its timeout or\n"
		"the policy changes and no longer allows it: then it is cut (STATE\n"
		"cut, RULE the deny), and its packets are dropped both ways until\n"
		"the policy changes again or the flow is idle for its timeout. A\n"
		"SYN or echo request from the end that did not open a flow is a new\n"
		"flow. 'flush' forgets the pod's flows but the cut ones: their next\n"
		"packets are decided anew (a cut one's would open a flow by the\n"
		"other direction's policy).\n"
		"KIND := tcp-opening | tcp-established | tcp-closing | udp | icmp;\n"
		"SECONDS 0 restores the default.\n");
	return EXIT_OK;
}

static const char *dir_name(uint32_t dir)
{
	return dir == PI_DIR_EGRESS ? "egress" : "ingress";
}

static const char *flow_proto(uint8_t proto)
{
	return proto == IPPROTO_ICMPV6 ? "icmp" : pi_proto_name(proto);
}

static void print_flow(const char *pod, const struct pi_ct_info *ci)
{
	const char *state = ci->flags & PI_CT_CUT ? "cut" :
			    ci->state <= PI_CT_CLOSING ?
			    state_names[ci->state] : "?";
	char pa[64], ra[64], pe[80], re[80];

	pi_fmt_addr(ci->family, &ci->pod, -1, pa, sizeof(pa));
	pi_fmt_addr(ci->family, &ci->peer, -1, ra, sizeof(ra));
	if (json_output) {
		json_obj_open(jw);
		json_kstr(jw, "pod", pod);
		json_kstr(jw, "family", ci->family == AF_INET ? "ipv4" : "ipv6");
		json_kstr(jw, "proto", flow_proto(ci->proto));
		json_kstr(jw, "pod_addr", pa);
		json_ku64(jw, "pod_port", ci->pod_port);
		json_kstr(jw, "peer_addr", ra);
		json_ku64(jw, "peer_port", ci->peer_port);
		json_kstr(jw, "opened_by", dir_name(ci->dir));
		json_kstr(jw, "state", state);
		json_kbool(jw, "replied", ci->flags & PI_CT_REPLIED);
		json_kbool(jw, "cut", ci->flags & PI_CT_CUT);
		json_ku64(jw, "rule", ci->rule_id);
		json_ku64(jw, "policy_rev", ci->policy_rev);
		json_ku64(jw, "egress_packets", ci->packets[PI_DIR_EGRESS]);
		json_ku64(jw, "egress_bytes", ci->bytes[PI_DIR_EGRESS]);
		json_ku64(jw, "ingress_packets", ci->packets[PI_DIR_INGRESS]);
		json_ku64(jw, "ingress_bytes", ci->bytes[PI_DIR_INGRESS]);
		json_ku64(jw, "idle_ms", ci->idle_ms);
		json_ku64(jw, "expires_ms", ci->expires_ms);
		json_obj_close(jw);
		return;
	}
	snprintf(pe, sizeof(pe), ci->family == AF_INET ? "%s:%u" : "[%s]:%u",
		 pa, ci->pod_port);
	snprintf(re, sizeof(re), ci->family == AF_INET ? "%s:%u" : "[%s]:%u",
		 ra, ci->peer_port);
	printf("%-12s %-5s %-30s %-30s %-7s %-11s %8llu %8llu %5u %8llu\n",
	       pod, flow_proto(ci->proto), pe, re, dir_name(ci->dir), state,
	       (unsigned long long)ci->packets[PI_DIR_EGRESS],
	       (unsigned long long)ci->packets[PI_DIR_INGRESS], ci->rule_id,
	       (unsigned long long)ci->expires_ms / 1000);
}

static int ct_list(int argc, char **argv)
{
	struct pi_ct_info *flows;
	struct pi_node *n;
	int cnt, err;

	if (argc != 1)
		return usage_err(argc ? "too many arguments" :
				 "ct list needs POD");
	if (!pi_valid_pod_name(argv[0]))
		return usage_err("invalid pod name '%s'", argv[0]);
	err = pi_node_open(node_name, PI_OPEN_READ, lock_timeout_ms, &n);
	if (err)
		return exit_code(err);
	cnt = pi_ct_list(n, argv[0], &flows);
	pi_node_close(n);
	if (cnt < 0)
		return exit_code(cnt);
	if (json_output)
		json_arr_open(jw);
	else
		printf("%-12s %-5s %-30s %-30s %-7s %-11s %8s %8s %5s %8s\n",
		       "POD", "PROTO", "POD END", "PEER END", "OPENED",
		       "STATE", "OUT", "IN", "RULE", "EXPIRES");
	for (int i = 0; i < cnt; i++)
		print_flow(argv[0], &flows[i]);
	if (json_output) {
		json_arr_close(jw);
		json_end(jw);
	}
	free(flows);
	return EXIT_OK;
}

static int ct_flush(int argc, char **argv)
{
	struct pi_node *n;
	int err, cnt;

	if (argc != 1)
		return usage_err(argc ? "too many arguments" :
				 "ct flush needs POD");
	if (!pi_valid_pod_name(argv[0]))
		return usage_err("invalid pod name '%s'", argv[0]);
	err = pi_node_open(node_name, PI_OPEN_WRITE, lock_timeout_ms, &n);
	if (err)
		return exit_code(err);
	cnt = pi_ct_flush(n, argv[0]);
	pi_node_close(n);
	if (cnt < 0)
		return exit_code(cnt);
	if (json_output) {
		json_obj_open(jw);
		json_ku64(jw, "flushed", cnt);
		json_obj_close(jw);
		json_end(jw);
	} else {
		p_info("%d flows of pod %s forgotten", cnt, argv[0]);
	}
	return EXIT_OK;
}

static int ct_timeout(int argc, char **argv)
{
	uint32_t to[PI_CT_TO_MAX], kind = PI_CT_TO_MAX, secs = 0;
	struct pi_node *n;
	int err;

	if (argc != 0 && argc != 2)
		return usage_err("ct timeout takes no arguments, or KIND SECONDS");
	if (argc == 2) {
		for (kind = 0; kind < PI_CT_TO_MAX; kind++)
			if (!strcmp(argv[0], timeout_names[kind]))
				break;
		if (kind == PI_CT_TO_MAX)
			return usage_err("no conntrack timeout '%s'", argv[0]);
		if (pi_parse_u32(argv[1], &secs) || secs > 7 * 86400)
			return usage_err("invalid seconds '%s' (0 to 604800)",
					 argv[1]);
	}
	err = pi_node_open(node_name, argc ? PI_OPEN_WRITE : PI_OPEN_READ,
			   lock_timeout_ms, &n);
	if (err)
		return exit_code(err);
	if (argc)
		err = pi_ct_set_timeout(n, kind, secs);
	if (!err)
		err = pi_ct_timeouts(n, to);
	pi_node_close(n);
	if (err)
		return exit_code(err);
	if (json_output)
		json_obj_open(jw);
	for (int i = 0; i < PI_CT_TO_MAX; i++) {
		if (json_output)
			json_ku64(jw, timeout_names[i], to[i]);
		else
			printf("%-16s %u\n", timeout_names[i], to[i]);
	}
	if (json_output) {
		json_obj_close(jw);
		json_end(jw);
	}
	return EXIT_OK;
}

int do_ct(int argc, char **argv)
{
	static const struct cmd cmds[] = {
		{ "list", ct_list },
		{ "flush", ct_flush },
		{ "timeout", ct_timeout },
		{ "help", ct_help },
		{ 0 },
	};

	return cmd_select(cmds, argc, argv, ct_help);
}
