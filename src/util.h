/* SPDX-License-Identifier: GPL-2.0 */
#ifndef PODINJECT_UTIL_H
#define PODINJECT_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include "podinject_abi.h"
#include "json.h"

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
void p_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A usage error: message, then the value the command returns. */
int usage_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

struct cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
};
/* Runs the command whose name argv[0] is a prefix of; `help` if none. */
int cmd_select(const struct cmd *cmds, int argc, char **argv,
	       int (*help)(int argc, char **argv));
bool is_prefix(const char *arg, const char *full);
/* NEXT_ARG: advance, failing with a usage error when none is left */
#define NEXT_ARG() do { argc--; argv++; } while (0)
#define REQ_ARGS(n) ({ if (argc < (n)) return usage_err("missing argument after '%s'", argv[-1]); 0; })

bool valid_name(const char *name, int maxlen);
/* Any pod's name: 1-253 of A-Z a-z 0-9 - . _ and '/' (Kubernetes'
 * "namespace/name", a runtime's container name or id). Pods that
 * podinject makes itself have the stricter valid_name(POD_NAME_MAX). */
bool valid_pod_name(const char *name);

/* Addresses: "10.0.0.1", "10.0.0.0/8", "fd00::1", "fd00::/64". The
 * prefix length defaults to the full length. Returns 0 or -EINVAL. */
int parse_prefix(const char *s, int *family, struct pi_addr *addr, int *plen);
int parse_port_range(const char *s, uint16_t *lo, uint16_t *hi);
int parse_u32(const char *s, uint32_t *v);
int parse_proto(const char *s, uint8_t *proto);
const char *proto_name(uint8_t proto);
/* Formats an address (with /plen when plen >= 0) into buf. */
const char *fmt_addr(int family, const struct pi_addr *a, int plen,
		     char *buf, size_t len);
const char *fmt_mac(const uint8_t mac[6], char buf[18]);

/* Removes a folder (of pins) and everything below it. */
int rm_tree(const char *path);

#endif
