/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A small test runner in the style of the kernel's test_progs: one line per
 * test (PASS/FAIL/SKIP), ASSERT_* macros that report and return bool.
 */
#ifndef PODINJECT_UNIT_H
#define PODINJECT_UNIT_H

#include <stdbool.h>
#include <stdio.h>

typedef void (*unit_fn)(void);
void unit_register(const char *name, unit_fn fn);
void unit_fail(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void unit_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define UNIT_TEST(n)							\
	static void n(void);						\
	__attribute__((constructor)) static void reg_##n(void)		\
	{ unit_register(#n, n); }					\
	static void n(void)

#define ASSERT_EQ(got, want, what) ({					\
	long long __g = (long long)(got), __w = (long long)(want);	\
	bool __ok = __g == __w;						\
	if (!__ok)							\
		unit_fail(__FILE__, __LINE__, "%s: got %lld, want %lld",\
			  what, __g, __w);				\
	__ok; })

#define ASSERT_TRUE(cond, what) ({					\
	bool __ok = !!(cond);						\
	if (!__ok)							\
		unit_fail(__FILE__, __LINE__, "%s: false", what);	\
	__ok; })

#define ASSERT_OK(err, what) ({						\
	long long __e = (long long)(err);				\
	bool __ok = __e == 0;						\
	if (!__ok)							\
		unit_fail(__FILE__, __LINE__, "%s: error %lld", what, __e);\
	__ok; })

#endif
