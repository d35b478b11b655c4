/* SPDX-License-Identifier: GPL-2.0 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/libbpf.h>
#include "unit.h"

#define MAX_TESTS 256

static struct {
	const char *name;
	unit_fn fn;
} tests[MAX_TESTS];
static int ntests;
static bool failed, skipped;
static char reason[512];

void unit_register(const char *name, unit_fn fn)
{
	if (ntests < MAX_TESTS) {
		tests[ntests].name = name;
		tests[ntests].fn = fn;
		ntests++;
	}
}

void unit_fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	int n;

	/* The first failure is the one worth reading. */
	if (failed)
		return;
	failed = true;
	n = snprintf(reason, sizeof(reason), "%s:%d: ", file, line);
	va_start(ap, fmt);
	vsnprintf(reason + n, sizeof(reason) - n, fmt, ap);
	va_end(ap);
}

void unit_skip(const char *fmt, ...)
{
	va_list ap;

	skipped = true;
	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
}

static int quiet_print(enum libbpf_print_level l, const char *f, va_list ap)
{
	return getenv("UNIT_VERBOSE") ? vfprintf(stderr, f, ap) : 0;
}

int main(int argc, char **argv)
{
	const char *filter = NULL;
	int pass = 0, fail = 0, skip = 0;

	if (argc == 3 && !strcmp(argv[1], "-t"))
		filter = argv[2];
	libbpf_set_print(quiet_print);
	for (int i = 0; i < ntests; i++) {
		if (filter && !strstr(tests[i].name, filter))
			continue;
		failed = skipped = false;
		reason[0] = 0;
		tests[i].fn();
		if (failed) {
			printf("FAIL unit/%s: %s\n", tests[i].name, reason);
			fail++;
		} else if (skipped) {
			printf("SKIP unit/%s: %s\n", tests[i].name, reason);
			skip++;
		} else {
			printf("PASS unit/%s\n", tests[i].name);
			pass++;
		}
		fflush(stdout);
	}
	return fail ? 1 : 0;
}
