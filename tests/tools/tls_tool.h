/* SPDX-License-Identifier: GPL-2.0 */
/* What the mTLS tests' TLS server (tlsd) and client (tlsc) share. */
#ifndef PODINJECT_TLS_TOOL_H
#define PODINJECT_TLS_TOOL_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

/* A decimal number within [min, max], or -1. */
static long long number(const char *s, long long min, long long max)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -1;
	return v;
}

/* OpenSSL's last error as text, its queue emptied. */
static const char *ssl_error(void)
{
	static char buf[256];
	unsigned long e = ERR_get_error(), next;

	while ((next = ERR_get_error()))
		e = next;
	if (!e)
		return "connection closed";
	ERR_error_string_n(e, buf, sizeof(buf));
	return buf;
}

/* A certificate's first URI SAN into buf ("-" if none). */
static void first_uri(X509 *cert, char *buf, size_t len)
{
	GENERAL_NAMES *names;

	snprintf(buf, len, "-");
	names = X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);
	for (int i = 0; names && i < sk_GENERAL_NAME_num(names); i++) {
		GENERAL_NAME *g = sk_GENERAL_NAME_value(names, i);
		int n;

		if (g->type != GEN_URI)
			continue;
		n = ASN1_STRING_length(g->d.uniformResourceIdentifier);
		snprintf(buf, len, "%.*s", n,
			 (const char *)ASN1_STRING_get0_data(g->d.uniformResourceIdentifier));
		break;
	}
	GENERAL_NAMES_free(names);
}

#endif
