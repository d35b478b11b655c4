/* SPDX-License-Identifier: GPL-2.0 */
#include <inttypes.h>
#include "json.h"

void json_init(struct json *j, FILE *out)
{
	j->out = out;
	j->depth = 0;
	j->first[0] = true;
	j->after_key = false;
}

/* Separator before a value or a key, unless it follows its key. */
static void sep(struct json *j)
{
	if (j->after_key) {
		j->after_key = false;
		return;
	}
	if (!j->first[j->depth])
		fputc(',', j->out);
	j->first[j->depth] = false;
}

static void open(struct json *j, char c)
{
	sep(j);
	fputc(c, j->out);
	if (j->depth < 31)
		j->depth++;
	j->first[j->depth] = true;
}

static void close_(struct json *j, char c)
{
	if (j->depth > 0)
		j->depth--;
	fputc(c, j->out);
}

void json_obj_open(struct json *j) { open(j, '{'); }
void json_obj_close(struct json *j) { close_(j, '}'); }
void json_arr_open(struct json *j) { open(j, '['); }
void json_arr_close(struct json *j) { close_(j, ']'); }

static void write_str(struct json *j, const char *s)
{
	fputc('"', j->out);
	for (; *s; s++) {
		unsigned char c = *s;

		if (c == '"' || c == '\\')
			fprintf(j->out, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", j->out);
		else if (c < 0x20)
			fprintf(j->out, "\\u%04x", c);
		else
			fputc(c, j->out);
	}
	fputc('"', j->out);
}

void json_key(struct json *j, const char *key)
{
	sep(j);
	write_str(j, key);
	fputc(':', j->out);
	j->after_key = true;
}

void json_str(struct json *j, const char *s)
{
	sep(j);
	write_str(j, s);
}

void json_u64(struct json *j, uint64_t v)
{
	sep(j);
	fprintf(j->out, "%" PRIu64, v);
}

void json_i64(struct json *j, int64_t v)
{
	sep(j);
	fprintf(j->out, "%" PRId64, v);
}

void json_f64(struct json *j, double v)
{
	sep(j);
	fprintf(j->out, "%.3f", v);
}

void json_bool(struct json *j, bool v)
{
	sep(j);
	fputs(v ? "true" : "false", j->out);
}

void json_null(struct json *j)
{
	sep(j);
	fputs("null", j->out);
}

void json_kstr(struct json *j, const char *key, const char *s)
{
	json_key(j, key);
	json_str(j, s);
}

void json_ku64(struct json *j, const char *key, uint64_t v)
{
	json_key(j, key);
	json_u64(j, v);
}

void json_kbool(struct json *j, const char *key, bool v)
{
	json_key(j, key);
	json_bool(j, v);
}

void json_end(struct json *j)
{
	fputc('\n', j->out);
	fflush(j->out);
}
