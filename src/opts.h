/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The CLI's options, by table: each command lists its options once (name,
 * kind, where the value goes) and parse_opts() does the rest, with the same
 * errors everywhere. Names are matched whole; "--x" and bare keywords
 * ("to", "port") are both names.
 */
#ifndef PODINJECT_OPTS_H
#define PODINJECT_OPTS_H

#include <stdbool.h>

enum opt_kind {
	OPT_K_FLAG,		/* bool, no value */
	OPT_K_STR,		/* const char * */
	OPT_K_CHOICE,		/* int, from a table of names */
	OPT_K_PARSE,		/* a value parser of the command's */
	OPT_K_LIST,		/* a parser called for each occurrence */
};

struct opt_choice {
	const char *name;
	int value;
};

/* A value parser: 0, or -EINVAL for a value it does not take. */
typedef int (*opt_parse_fn)(const char *value, void *dst);

struct opt {
	const char *name;
	enum opt_kind kind;
	void *dst;
	const void *arg;	/* choices or parser */
	const char *what;	/* what the value must be, for errors */
	bool *seen;		/* set when given (optional) */
};

#define OPT_FLAG(n, p)		{ .name = (n), .kind = OPT_K_FLAG, .dst = (p) }
#define OPT_STR(n, p, w)	{ .name = (n), .kind = OPT_K_STR, .dst = (p), .what = (w) }
#define OPT_CHOICE(n, p, c)	{ .name = (n), .kind = OPT_K_CHOICE, .dst = (p), .arg = (c) }
#define OPT_PARSE(n, fn, p, w, s) { .name = (n), .kind = OPT_K_PARSE, .dst = (p), \
				    .arg = (const void *)(fn), .what = (w), .seen = (s) }
#define OPT_LIST(n, fn, p, w)	{ .name = (n), .kind = OPT_K_LIST, .dst = (p), \
				  .arg = (const void *)(fn), .what = (w) }

/* Parses argv against opts; words that are no option's name go to pos[],
 * at most npos of them. Returns 0, or EXIT_USAGE after reporting. */
int parse_opts(const struct opt *opts, int argc, char **argv, int npos,
	       const char **pos, int *npos_seen);

#endif
