/* SPDX-License-Identifier: GPL-2.0 */
#include <stdarg.h>
#include <stdio.h>
#include "internal.h"

static pi_log_fn log_fn;
static void *log_ctx;

void pi_set_log(pi_log_fn fn, void *ctx)
{
	log_fn = fn;
	log_ctx = ctx;
}

void pi_log(enum pi_log_level level, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (!log_fn)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_fn(level, msg, log_ctx);
}
