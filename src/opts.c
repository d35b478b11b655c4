/* SPDX-License-Identifier: GPL-2.0 */
#include <string.h>
#include "opts.h"
#include "util.h"

static const struct opt *find_opt(const struct opt *opts, const char *name)
{
	for (const struct opt *o = opts; o->name; o++)
		if (!strcmp(o->name, name))
			return o;
	return NULL;
}

static int choice_names(const struct opt_choice *c, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = 0;
	for (int i = 0; c[i].name && off < len; i++)
		off += snprintf(buf + off, len - off, "%s%s",
				i ? (c[i + 1].name ? ", " : " or ") : "",
				c[i].name);
	return 0;
}

static int take_value(const struct opt *o, const char *v)
{
	char names[128];

	switch (o->kind) {
	case OPT_K_STR:
		*(const char **)o->dst = v;
		break;
	case OPT_K_CHOICE:
		for (const struct opt_choice *c = o->arg; c->name; c++) {
			if (!strcmp(c->name, v)) {
				*(int *)o->dst = c->value;
				goto done;
			}
		}
		choice_names(o->arg, names, sizeof(names));
		return usage_err("invalid %s '%s': %s", o->name, v, names);
	case OPT_K_PARSE:
	case OPT_K_LIST:
		if (((opt_parse_fn)o->arg)(v, o->dst))
			return usage_err("invalid %s '%s'%s%s%s", o->name, v,
					 o->what ? " (want " : "",
					 o->what ? o->what : "",
					 o->what ? ")" : "");
		break;
	case OPT_K_FLAG:
		break;
	}
done:
	if (o->seen)
		*o->seen = true;
	return 0;
}

int parse_opts(const struct opt *opts, int argc, char **argv, int npos,
	       const char **pos, int *npos_seen)
{
	int got = 0;

	for (int i = 0; i < argc; i++) {
		const struct opt *o = find_opt(opts, argv[i]);
		int err;

		if (!o) {
			if (got >= npos || argv[i][0] == '-')
				return usage_err("unknown argument '%s'", argv[i]);
			pos[got++] = argv[i];
			continue;
		}
		if (o->kind == OPT_K_FLAG) {
			*(bool *)o->dst = true;
			if (o->seen)
				*o->seen = true;
			continue;
		}
		if (o->kind != OPT_K_LIST && o->seen && *o->seen)
			return usage_err("'%s' given twice", o->name);
		if (i + 1 >= argc)
			return usage_err("'%s' needs a value%s%s%s", o->name,
					 o->what ? " (" : "",
					 o->what ? o->what : "",
					 o->what ? ")" : "");
		err = take_value(o, argv[++i]);
		if (err)
			return err;
	}
	if (npos_seen)
		*npos_seen = got;
	return 0;
}
