/* SPDX-License-Identifier: GPL-2.0 */
/* The exposition writer of `podinject metrics` (src/prom.c): the text
 * format's escapes and layout, byte for byte. */
#include <stdlib.h>
#include <string.h>
#include "unit.h"
#include "../../src/prom.h"

UNIT_TEST(prom_label_escapes)
{
	const char *const l[] = { "pod", "a\\b\"c\nd", "node", "n", NULL };
	struct prom_buf b;
	size_t len;
	char *s;

	prom_init(&b);
	prom_sample(&b, "x_total", l, 18446744073709551615ull);
	prom_sample(&b, "y", NULL, 0);
	s = prom_take(&b, &len);
	if (!ASSERT_TRUE(s != NULL, "text"))
		return;
	ASSERT_TRUE(!strcmp(s, "x_total{pod=\"a\\\\b\\\"c\\nd\",node=\"n\"} 18446744073709551615\n"
			       "y 0\n"), s);
	ASSERT_EQ(len, strlen(s), "length");
	free(s);
}

UNIT_TEST(prom_family_help)
{
	struct prom_buf b;
	size_t len;
	char *s;

	prom_init(&b);
	/* HELP escapes backslash and newline only: a quote stays */
	prom_family(&b, "z_total", "counter", "a \"q\" \\ and\nmore");
	s = prom_take(&b, &len);
	if (!ASSERT_TRUE(s != NULL, "text"))
		return;
	ASSERT_TRUE(!strcmp(s, "# HELP z_total a \"q\" \\\\ and\\nmore\n"
			       "# TYPE z_total counter\n"), s);
	free(s);
}
