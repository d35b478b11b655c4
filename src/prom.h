/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Prometheus' text exposition format, version 0.0.4: families (HELP and
 * TYPE lines, then their samples, all together as the format requires)
 * written into a growing buffer.
 */
#ifndef PODINJECT_PROM_H
#define PODINJECT_PROM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PROM_CONTENT_TYPE	"text/plain; version=0.0.4; charset=utf-8"

struct prom_buf {
	char *s;
	size_t len, cap;
	int err;		/* -ENOMEM once any write failed */
};

void prom_init(struct prom_buf *b);
/* HELP and TYPE ("counter", "gauge") of the family `name`; its samples
 * must follow before the next family. */
void prom_family(struct prom_buf *b, const char *name, const char *type,
		 const char *help);
/* One sample: labels is a NULL-terminated list of name, value pairs (or
 * NULL); values are escaped here. */
void prom_sample(struct prom_buf *b, const char *name,
		 const char *const *labels, uint64_t value);
/* The text (the caller frees it) and its length, or NULL when a write
 * failed; the buffer is empty afterwards. */
char *prom_take(struct prom_buf *b, size_t *len);
void prom_free(struct prom_buf *b);

#endif
