/* SPDX-License-Identifier: GPL-2.0 */
#ifndef PODINJECT_UTIL_H
#define PODINJECT_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include "podinject/podinject.h"
#include "json.h"
#include "opts.h"

/* Exit codes, few and documented. */
#define EXIT_OK		0
#define EXIT_RUNTIME	1
#define EXIT_USAGE	2

extern bool json_output;
extern const char *node_name;		/* -N/--node, PODINJECT_NODE, "node" */
extern int lock_timeout_ms;		/* -W/--wait, PODINJECT_WAIT */
extern bool verbose;
extern struct json *jw;		/* stdout writer when json_output */

/* Errors go to stderr (or as a JSON object under -j), once, where the
 * context is. */
void p_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cli_log(enum pi_log_level level, const char *msg, void *ctx);
void p_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A usage error: message, then the value the command returns. */
int usage_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The exit code of a library error (reported already): usage errors
 * (bad or unknown names and addresses) are 2, everything else 1. */
int exit_code(int err);

struct cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
};
/* Runs the command whose name argv[0] is a prefix of; `help` if none. */
int cmd_select(const struct cmd *cmds, int argc, char **argv,
	       int (*help)(int argc, char **argv));
bool is_prefix(const char *arg, const char *full);
/* The monitor's events, as the monitor and probe --trace print them:
 * TCP flags as letters ("SA" for SYN|ACK), a hook's verdict by name. */
const char *tcp_flags_text(uint8_t f, char buf[9]);
/* ICMP and ICMPv6 (proto IPPROTO_ICMP or IPPROTO_ICMPV6): a type's name
 * (NULL for one without a name here), and whether it is an echo's */
const char *icmp_name(uint8_t proto, uint8_t type);
bool icmp_is_echo(uint8_t proto, uint8_t type);
/* An event's ICMP header (icmp_read) as JSON fields: icmp_type,
 * icmp_code, icmp (the type's name), an echo's icmp_id */
void json_icmp_event(const struct pi_monitor_event *e);
/* Whether a type is destination unreachable's; such a one's code by
 * name (NULL for one without) */
bool icmp_is_unreach(uint8_t proto, uint8_t type);
const char *icmp_unreach_name(uint8_t proto, uint8_t code);
/* An ICMP or ICMPv6 error in words, as the probe and its trace say it:
 * "unreachable, admin-prohibited", "time-exceeded code 0", "type 42
 * code 1" (buf, len 48 is enough) */
const char *icmp_error_text(uint8_t proto, uint8_t type, uint8_t code,
			    char *buf, size_t len);
/* A drop reason's name, the node's (enum pi_drop_reason) or the injection
 * object's (enum pi_mon_drop_reason): "unknown" for any other. */
const char *drop_reason_name(uint32_t reason);
const char *hook_verdict_name(int32_t v);
/* NEXT_ARG: advance, failing with a usage error when none is left */
#define NEXT_ARG() do { argc--; argv++; } while (0)
#define REQ_ARGS(n) ({ if (argc < (n)) return usage_err("missing argument after '%s'", argv[-1]); 0; })

#endif
