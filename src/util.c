/* SPDX-License-Identifier: GPL-2.0 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "util.h"

bool json_output;
const char *node_name = "node";
int lock_timeout_ms = PI_LOCK_TIMEOUT_MS;
bool verbose;
static struct json stdout_json;
struct json *jw = &stdout_json;

static void vreport(const char *kind, const char *fmt, va_list ap)
{
	char msg[1024];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (json_output) {
		struct json j;

		/* Machines read stdout; the error must still be JSON there,
		 * and a person reading stderr gets the line too. */
		json_init(&j, stdout);
		json_obj_open(&j);
		json_kstr(&j, kind, msg);
		json_obj_close(&j);
		json_end(&j);
	}
	fprintf(stderr, "%s: %s\n", kind, msg);
}

/* The library's messages: errors as the CLI's own, the rest with -v. */
void cli_log(enum pi_log_level level, const char *msg, void *ctx)
{
	if (level == PI_LOG_ERROR)
		p_err("%s", msg);
	else if (verbose)
		fprintf(stderr, "%s\n", msg);
}

void p_err(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport("error", fmt, ap);
	va_end(ap);
}

void p_info(const char *fmt, ...)
{
	va_list ap;

	if (json_output)
		return;
	va_start(ap, fmt);
	vfprintf(stdout, fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
}

int usage_err(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport("error", fmt, ap);
	va_end(ap);
	return EXIT_USAGE;
}

int exit_code(int err)
{
	switch (err) {
	case 0:
		return EXIT_OK;
	case -EINVAL:
	case -EEXIST:
	case -EADDRINUSE:
	case -ESRCH:
	case -ENXIO:
		return EXIT_USAGE;
	default:
		return EXIT_RUNTIME;
	}
}

bool is_prefix(const char *arg, const char *full)
{
	return *arg && !strncmp(arg, full, strlen(arg));
}

int cmd_select(const struct cmd *cmds, int argc, char **argv,
	       int (*help)(int argc, char **argv))
{
	const struct cmd *c;

	if (argc < 1) {
		p_err("missing command");
		help(argc, argv);
		return EXIT_USAGE;
	}
	for (c = cmds; c->name; c++)
		if (is_prefix(argv[0], c->name))
			return c->fn(argc - 1, argv + 1);
	p_err("unknown command '%s'", argv[0]);
	help(0, NULL);
	return EXIT_USAGE;
}


const char *tcp_flags_text(uint8_t f, char buf[9])
{
	static const char letters[] = "FSRPAUEC";
	int n = 0;

	for (int i = 0; i < 8; i++)
		if (f & (1u << i))
			buf[n++] = letters[i];
	buf[n] = '\0';
	return buf;
}

/* An ICMP message's name by its type (NULL: none known here). */
const char *icmp_name(uint8_t proto, uint8_t type)
{
	static const char *const v4[] = {
		[0] = "echo-reply", [3] = "unreachable", [4] = "source-quench",
		[5] = "redirect", [8] = "echo-request", [11] = "time-exceeded",
		[12] = "parameter-problem", [13] = "timestamp",
		[14] = "timestamp-reply",
	};
	static const char *const v6[] = {
		[1] = "unreachable", [2] = "packet-too-big",
		[3] = "time-exceeded", [4] = "parameter-problem",
		[128] = "echo-request", [129] = "echo-reply",
		[133] = "router-solicitation", [134] = "router-advertisement",
		[135] = "neighbor-solicitation",
		[136] = "neighbor-advertisement", [137] = "redirect",
	};

	if (proto == IPPROTO_ICMP)
		return type < sizeof(v4) / sizeof(v4[0]) ? v4[type] : NULL;
	return type < sizeof(v6) / sizeof(v6[0]) ? v6[type] : NULL;
}

const char *icmp_unreach_name(uint8_t proto, uint8_t code)
{
	/* RFC 792 and 1812; RFC 4443 */
	static const char *const v4[] = {
		[0] = "net-unreachable", [1] = "host-unreachable",
		[2] = "protocol-unreachable", [3] = "port-unreachable",
		[4] = "fragmentation-needed", [5] = "source-route-failed",
		[6] = "net-unknown", [7] = "host-unknown",
		[8] = "host-isolated", [9] = "net-prohibited",
		[10] = "host-prohibited", [11] = "net-unreachable-for-tos",
		[12] = "host-unreachable-for-tos", [13] = "admin-prohibited",
		[14] = "precedence-violation", [15] = "precedence-cutoff",
	};
	static const char *const v6[] = {
		[0] = "no-route", [1] = "admin-prohibited",
		[2] = "beyond-scope", [3] = "address-unreachable",
		[4] = "port-unreachable", [5] = "source-policy-failed",
		[6] = "reject-route", [7] = "source-routing-header-error",
	};

	if (proto == IPPROTO_ICMP)
		return code < sizeof(v4) / sizeof(v4[0]) ? v4[code] : NULL;
	return code < sizeof(v6) / sizeof(v6[0]) ? v6[code] : NULL;
}

const char *icmp_error_text(uint8_t proto, uint8_t type, uint8_t code,
			    char *buf, size_t len)
{
	const char *tname = icmp_name(proto, type);
	const char *cname = icmp_is_unreach(proto, type) ?
			    icmp_unreach_name(proto, code) : NULL;

	if (tname && cname)
		snprintf(buf, len, "%s, %s", tname, cname);
	else if (tname)
		snprintf(buf, len, "%s code %u", tname, code);
	else
		snprintf(buf, len, "type %u code %u", type, code);
	return buf;
}

void json_icmp_event(const struct pi_monitor_event *e)
{
	const char *name = icmp_name(e->proto, e->icmp_type);

	json_ku64(jw, "icmp_type", e->icmp_type);
	json_ku64(jw, "icmp_code", e->icmp_code);
	json_kstr(jw, "icmp", name ? name : "");
	if (icmp_is_echo(e->proto, e->icmp_type))
		json_ku64(jw, "icmp_id", e->icmp_id);
}

bool icmp_is_unreach(uint8_t proto, uint8_t type)
{
	return proto == IPPROTO_ICMP ? type == 3 : type == 1;
}

bool icmp_is_echo(uint8_t proto, uint8_t type)
{
	return proto == IPPROTO_ICMP ? type == 0 || type == 8 :
				       type == 128 || type == 129;
}

const char *hook_verdict_name(int32_t v)
{
	switch (v) {
	case PI_MON_V_NEXT: return "next";
	case PI_MON_V_PASS: return "pass";
	case PI_MON_V_DROP: return "drop";
	case PI_MON_V_REDIRECT: return "redirect";
	}
	return "unknown";
}

const char *drop_reason_name(uint32_t reason)
{
	static const char *const node[] = PI_DROP_NAMES;
	static const char *const inject[] = PI_MON_DROP_NAMES;

	/* a reason added to either enum needs its name here */
	_Static_assert(sizeof(node) / sizeof(node[0]) == PI_DROP_MAX,
		       "PI_DROP_NAMES and enum pi_drop_reason differ");
	_Static_assert(sizeof(inject) / sizeof(inject[0]) ==
		       PI_MON_DROP_MAX - PI_MON_DROP_INJECT_REDIRECT,
		       "PI_MON_DROP_NAMES and enum pi_mon_drop_reason differ");
	if (reason < PI_DROP_MAX)
		return node[reason];
	if (reason >= PI_MON_DROP_INJECT_REDIRECT && reason < PI_MON_DROP_MAX)
		return inject[reason - PI_MON_DROP_INJECT_REDIRECT];
	return "unknown";
}
