/* SPDX-License-Identifier: GPL-2.0 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "prom.h"

void prom_init(struct prom_buf *b)
{
	memset(b, 0, sizeof(*b));
}

static int reserve(struct prom_buf *b, size_t more)
{
	size_t cap;
	char *s;

	if (b->err)
		return b->err;
	if (b->len + more + 1 <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 4096;
	while (cap < b->len + more + 1)
		cap *= 2;
	s = realloc(b->s, cap);
	if (!s)
		return b->err = -ENOMEM;
	b->s = s;
	b->cap = cap;
	return 0;
}

static void put(struct prom_buf *b, const char *s, size_t n)
{
	if (reserve(b, n))
		return;
	memcpy(b->s + b->len, s, n);
	b->len += n;
	b->s[b->len] = 0;
}

static void puts_(struct prom_buf *b, const char *s)
{
	put(b, s, strlen(s));
}

/* The format's escapes: in HELP text backslash and newline; in label
 * values those and the double quote. Anything else goes as it is (names
 * are UTF-8 as the format wants, pod names are ASCII anyway). */
static void put_escaped(struct prom_buf *b, const char *s, bool quote)
{
	for (; *s; s++) {
		if (*s == '\\')
			puts_(b, "\\\\");
		else if (*s == '\n')
			puts_(b, "\\n");
		else if (quote && *s == '"')
			puts_(b, "\\\"");
		else
			put(b, s, 1);
	}
}

void prom_family(struct prom_buf *b, const char *name, const char *type,
		 const char *help)
{
	puts_(b, "# HELP ");
	puts_(b, name);
	puts_(b, " ");
	put_escaped(b, help, false);
	puts_(b, "\n# TYPE ");
	puts_(b, name);
	puts_(b, " ");
	puts_(b, type);
	puts_(b, "\n");
}

void prom_sample(struct prom_buf *b, const char *name,
		 const char *const *labels, uint64_t value)
{
	char num[24];

	puts_(b, name);
	if (labels && labels[0]) {
		puts_(b, "{");
		for (int i = 0; labels[i]; i += 2) {
			if (i)
				puts_(b, ",");
			puts_(b, labels[i]);
			puts_(b, "=\"");
			put_escaped(b, labels[i + 1], true);
			puts_(b, "\"");
		}
		puts_(b, "}");
	}
	snprintf(num, sizeof(num), " %" PRIu64 "\n", value);
	puts_(b, num);
}

char *prom_take(struct prom_buf *b, size_t *len)
{
	char *s = b->s;

	if (b->err || !s) {
		prom_free(b);
		return NULL;
	}
	*len = b->len;
	prom_init(b);
	return s;
}

void prom_free(struct prom_buf *b)
{
	free(b->s);
	prom_init(b);
}
