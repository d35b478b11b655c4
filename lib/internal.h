/* SPDX-License-Identifier: GPL-2.0 */
/* What every file of the library shares and no front-end sees. */
#ifndef PODINJECT_INTERNAL_H
#define PODINJECT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "podinject/podinject.h"
/* The datapath's layouts: the library's, never its callers' (the public
 * header does not include it). */
#include "podinject_abi.h"

/* An address of the API, as the datapath's maps hold it, and back. */
static inline struct pi_dp_addr addr_to_dp(const struct pi_addr *a)
{
	return (struct pi_dp_addr){ { a->a[0], a->a[1], a->a[2], a->a[3] } };
}

static inline struct pi_addr addr_from_dp(const struct pi_dp_addr *a)
{
	return (struct pi_addr){ { a->a[0], a->a[1], a->a[2], a->a[3] } };
}

/* The log callback's messages (lib/log.c). */
void pi_log(enum pi_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
#define pr_err(...)	pi_log(PI_LOG_ERROR, __VA_ARGS__)
#define pr_warn(...)	pi_log(PI_LOG_WARN, __VA_ARGS__)
#define pr_info(...)	pi_log(PI_LOG_INFO, __VA_ARGS__)
#define pr_debug(...)	pi_log(PI_LOG_DEBUG, __VA_ARGS__)

/* Where the library keeps its files that are not pins: the monitor's
 * readers, the last apply of each node; a tmpfs, gone with a reboot as the
 * pins are. */
#define PI_RUN_DIR	"/run/podinject"
/* PI_RUN_DIR/SUB/<the last part of the node's pin directory>: a node's
 * file or folder there (SUB: "apply", "monitor", "probe"). */
void run_path(const char *sub, const char *pin_dir, char *buf, size_t len);

/* Removes a folder (of pins) and everything below it. */
int rm_tree(const char *path);
/* Whether addr has no bit set past its first plen bits. */
bool pi_prefix_clean(const struct pi_addr *addr, int plen);
/* Makes path and the folders above it that are missing (mode 0700). */
int mkdir_p(const char *path);
/* Calls fn for every pin (not folder) below dir, depth first, with its
 * path and name, until fn returns non-zero; returns that, or 0. */
int pin_tree_walk(const char *dir,
		  int (*fn)(const char *path, const char *name, void *ctx),
		  void *ctx);

#endif
