/* SPDX-License-Identifier: GPL-2.0 */
/* A small streaming JSON writer for the CLI's -j output. */
#ifndef PODINJECT_JSON_H
#define PODINJECT_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct json {
	FILE *out;
	int depth;
	bool first[32];		/* no element written yet at this depth */
	bool after_key;
};

void json_init(struct json *j, FILE *out);
void json_obj_open(struct json *j);
void json_obj_close(struct json *j);
void json_arr_open(struct json *j);
void json_arr_close(struct json *j);
void json_key(struct json *j, const char *key);
void json_str(struct json *j, const char *s);
void json_u64(struct json *j, uint64_t v);
void json_i64(struct json *j, int64_t v);
void json_f64(struct json *j, double v);	/* 3 decimals */
void json_bool(struct json *j, bool v);
void json_null(struct json *j);
/* key + value in one call */
void json_kstr(struct json *j, const char *key, const char *s);
void json_ku64(struct json *j, const char *key, uint64_t v);
void json_kbool(struct json *j, const char *key, bool v);
/* Ends the document with a newline. */
void json_end(struct json *j);

#endif
