/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Fuzzer of the values and specs the front-ends parse: the library's
 * public parsers (lib/parse.c: CIDRs, numbers, ports and port ranges,
 * protocols, node and pod names) and the CLI's rule and proxy specs
 * (src/policy.c, src/proxy.c) and injection specs (src/inject.c), whose
 * calls into a node are replaced here by ones that only keep what the CLI
 * asked for: no node is touched.
 *
 * Input: a selector byte, then the string (library parsers) or the
 * command's arguments separated by NUL bytes (CLI specs).
 *
 * Properties: an accepted value is within its bounds and in the
 * canonical form the grammar allows (digits only for numbers, no host
 * bits under a prefix); formatting it and parsing the result gives it
 * back; the accepted strings are exactly those of a reference written
 * from the documented grammar; a refused value leaves the outputs that
 * the API fills only on success untouched; a rule or proxy spec the CLI
 * accepts is one the datapath can hold, and its own printed form is
 * accepted again as the same rule.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "podinject/podinject.h"
#include "cmds.h"
#include "util.h"

#define CHECK(cond, ...)						\
	do {								\
		if (!(cond)) {						\
			fprintf(real_stderr, "fuzz_parse: " __VA_ARGS__); \
			fprintf(real_stderr, " (%s)\n", #cond);		\
			abort();					\
		}							\
	} while (0)

static FILE *real_stderr, *null_out;

/* ---- the library's node calls, as the CLI makes them ------------------ */

static struct {
	bool policy, proxy, inject;
	char pod[512], proxy_pod[512];
	const char *as[PI_INJECT_MAX_AS + 1];
	int nas;
	uint32_t path;
	uint32_t dir, pos;
	struct pi_rule rule;
	struct pi_proxy_rule prule;
} seen;

int pi_node_open(const char *name, enum pi_open_mode mode,
		 int lock_timeout_ms, struct pi_node **node)
{
	*node = (struct pi_node *)&seen;
	return 0;
}

void pi_node_close(struct pi_node *node)
{
}

int pi_policy_add(struct pi_node *node, const char *pod, uint32_t dir,
		  const struct pi_rule *rule, uint32_t position, uint32_t *id)
{
	seen.policy = true;
	snprintf(seen.pod, sizeof(seen.pod), "%s", pod);
	seen.dir = dir;
	seen.pos = position;
	seen.rule = *rule;
	*id = 1;
	return 0;
}

int pi_proxy_add(struct pi_node *node, const char *proxy, const char *pod,
		 const struct pi_proxy_rule *rule)
{
	seen.proxy = true;
	snprintf(seen.pod, sizeof(seen.pod), "%s", pod);
	snprintf(seen.proxy_pod, sizeof(seen.proxy_pod), "%s", proxy);
	seen.prule = *rule;
	return 0;
}

int pi_inject_allow(struct pi_node *node, const char *injector,
		    const char *const *as, int nas, uint32_t path,
		    uint32_t *path_used)
{
	seen.inject = true;
	snprintf(seen.pod, sizeof(seen.pod), "%s", injector);
	seen.nas = nas;
	for (int i = 0; i < nas && i <= PI_INJECT_MAX_AS; i++)
		seen.as[i] = as[i];
	seen.path = path;
	*path_used = path ? path : PI_PATH_FALLBACK;
	return 0;
}

int pi_inject_deny(struct pi_node *node, const char *injector,
		   const char *const *as, int nas)
{
	return pi_inject_allow(node, injector, as, nas, PI_PATH_FAST,
			       &seen.path) ? -1 : nas;
}

int pi_inject_list(struct pi_node *n, struct pi_inject_auth_info **a)
{
	return -ENOSYS;
}

int pi_inject_stats(struct pi_node *n, struct pi_inject_stat_info **st)
{
	return -ENOSYS;
}

int pi_inject_refusals(struct pi_node *n, uint64_t counts[PI_INJ_REFUSALS])
{
	return -ENOSYS;
}

int pi_policy_del(struct pi_node *n, const char *pod, uint32_t dir, uint32_t id)
{
	return -ENOSYS;
}

int pi_policy_list(struct pi_node *n, const char *pod, struct pi_rule_info **r)
{
	return -ENOSYS;
}

int pi_proxy_del(struct pi_node *n, const char *proxy, const char *pod)
{
	return -ENOSYS;
}

int pi_proxy_del_inbound(struct pi_node *n, const char *proxy, const char *pod)
{
	return -ENOSYS;
}

int pi_proxy_list(struct pi_node *n, struct pi_proxy_info **p)
{
	return -ENOSYS;
}

int pi_pod_get(struct pi_node *n, const char *name, struct pi_pod_info *out)
{
	return -ENOSYS;
}

int pi_pod_list(struct pi_node *n, struct pi_pod_info **pods)
{
	return -ENOSYS;
}

/* ---- references from the documented grammars ------------------------- */

static bool all_digits(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

/* digits only, at most UINT32_MAX */
static bool ref_u32(const char *s, uint32_t *v)
{
	uint64_t x = 0;

	if (!all_digits(s))
		return false;
	for (; *s; s++) {
		x = x * 10 + (*s - '0');
		if (x > UINT32_MAX)
			return false;
	}
	*v = x;
	return true;
}

static bool ref_name(const char *s, int maxlen)
{
	int n = strlen(s);

	if (!n || n > maxlen || s[0] == '-')
		return false;
	return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-") == (size_t)n;
}

static bool ref_pod_name(const char *s)
{
	size_t n = strlen(s);

	if (!n || n > PI_POD_NAME_MAX || strchr("/-.", s[0]) || s[n - 1] == '/')
		return false;
	return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		      "0123456789-._/") == n;
}

/* ---- the library's parsers ------------------------------------------- */

static bool host_bits_clear(const struct pi_addr *a, int plen)
{
	for (int i = 0; i < 4; i++) {
		int bits = plen - i * 32;
		uint32_t mask = bits >= 32 ? ~0u : bits <= 0 ? 0 : ~(~0u >> bits);

		if (ntohl(a->a[i]) & ~mask)
			return false;
	}
	return true;
}

static void check_prefix(const char *s)
{
	struct pi_addr a, b, ref = {};
	int fam = -1, plen = -1, fam2, plen2, rfam = 0, max;
	char buf[80], addr[64];
	const char *slash = strchr(s, '/');
	uint32_t rplen;
	bool ok;

	/* reference: ADDRESS[/DIGITS], the address as inet_pton reads it,
	 * the length within the family's, no host bits set */
	ok = strlen(s) < sizeof(addr) &&
	     (!slash || (size_t)(slash - s) < sizeof(addr));
	if (ok) {
		snprintf(addr, sizeof(addr), "%.*s",
			 (int)(slash ? slash - s : (long)strlen(s)), s);
		if (inet_pton(AF_INET, addr, ref.a) == 1)
			rfam = AF_INET;
		else if (inet_pton(AF_INET6, addr, ref.a) == 1)
			rfam = AF_INET6;
		max = rfam == AF_INET ? 32 : 128;
		rplen = max;
		ok = rfam && (!slash || (ref_u32(slash + 1, &rplen) &&
					 rplen <= (uint32_t)max)) &&
		     host_bits_clear(&ref, rplen);
	}
	if (pi_parse_prefix(s, &fam, &a, &plen)) {
		CHECK(!ok, "prefix '%s' refused, the grammar accepts it", s);
		return;
	}
	CHECK(ok, "prefix '%s' accepted, the grammar refuses it", s);
	CHECK(fam == rfam && plen == (int)rplen && !memcmp(&a, &ref, sizeof(a)),
	      "prefix '%s' read as family %d /%d", s, fam, plen);
	CHECK(fam == AF_INET6 || (!a.a[1] && !a.a[2] && !a.a[3]),
	      "IPv4 prefix '%s' with bytes beyond its 4", s);
	pi_fmt_addr(fam, &a, plen, buf, sizeof(buf));
	CHECK(!pi_parse_prefix(buf, &fam2, &b, &plen2),
	      "'%s' printed as '%s', which is refused", s, buf);
	CHECK(fam2 == fam && plen2 == plen && !memcmp(&a, &b, sizeof(a)),
	      "'%s' printed as '%s' reads back otherwise", s, buf);
}

static void check_u32(const char *s)
{
	uint32_t v = 0xdeadbeef, r;
	char buf[16];
	bool ok = ref_u32(s, &r);

	if (pi_parse_u32(s, &v)) {
		CHECK(!ok, "number '%s' refused, the grammar accepts it", s);
		CHECK(v == 0xdeadbeef, "refused number '%s' wrote %u", s, v);
		return;
	}
	CHECK(ok, "number '%s' accepted as %u, the grammar refuses it", s, v);
	CHECK(v == r, "number '%s' read as %u", s, v);
	snprintf(buf, sizeof(buf), "%u", v);
	CHECK(!pi_parse_u32(buf, &r) && r == v, "%u does not read back", v);
}

static void check_ports(const char *s)
{
	uint16_t lo = 0xabcd, hi = 0xdcba, lo2, hi2;
	const char *dash = strchr(s, '-');
	uint32_t rlo, rhi;
	char a[64], buf[16];
	bool ok = strlen(s) < 32;

	/* reference: N or N-M, 1 <= N <= M <= 65535 */
	if (ok && dash) {
		snprintf(a, sizeof(a), "%.*s", (int)(dash - s), s);
		ok = ref_u32(a, &rlo) && ref_u32(dash + 1, &rhi);
	} else if (ok) {
		ok = ref_u32(s, &rlo);
		rhi = rlo;
	}
	ok = ok && rlo >= 1 && rlo <= rhi && rhi <= 65535;
	if (pi_parse_port_range(s, &lo, &hi)) {
		CHECK(!ok, "port range '%s' refused, the grammar accepts it", s);
		CHECK(lo == 0xabcd && hi == 0xdcba,
		      "refused port range '%s' wrote %u-%u", s, lo, hi);
		return;
	}
	CHECK(ok, "port range '%s' accepted as %u-%u, the grammar refuses it",
	      s, lo, hi);
	CHECK(lo == rlo && hi == rhi, "port range '%s' read as %u-%u", s, lo, hi);
	if (lo == hi)
		snprintf(buf, sizeof(buf), "%u", lo);
	else
		snprintf(buf, sizeof(buf), "%u-%u", lo, hi);
	CHECK(!pi_parse_port_range(buf, &lo2, &hi2) && lo2 == lo && hi2 == hi,
	      "port range %s does not read back", buf);
}

static void check_proto_names(const char *s)
{
	uint8_t p = 0xee;
	bool ok = !strcmp(s, "tcp") || !strcmp(s, "udp") ||
		  !strcmp(s, "icmp") || !strcmp(s, "any");

	if (pi_parse_proto(s, &p)) {
		CHECK(!ok && p == 0xee, "protocol '%s'", s);
	} else {
		CHECK(ok, "protocol '%s' accepted", s);
		CHECK(!strcmp(pi_proto_name(p), s), "protocol '%s' is named %s",
		      s, pi_proto_name(p));
	}
	for (int max = 0; max <= 16; max += 4)
		CHECK(pi_valid_name(s, max) == ref_name(s, max),
		      "name '%s' (at most %d): library %d", s, max,
		      pi_valid_name(s, max));
	CHECK(pi_valid_pod_name(s) == ref_pod_name(s), "pod name '%s': library %d",
	      s, pi_valid_pod_name(s));
}

/* ---- the CLI's specs ------------------------------------------------- */

static int run_cli(int (*fn)(int, char **), int argc, char **argv)
{
	FILE *out = stdout, *err = stderr;
	int ret;

	memset(&seen, 0, sizeof(seen));
	stdout = stderr = null_out;
	ret = fn(argc, argv);
	stdout = out;
	stderr = err;
	return ret;
}

static void check_rule(const char *pod, uint32_t dir, const struct pi_rule *r)
{
	CHECK(pi_valid_pod_name(pod), "rule for pod '%s'", pod);
	CHECK(dir == PI_DIR_EGRESS || dir == PI_DIR_INGRESS, "direction %u", dir);
	CHECK(r->action == PI_ALLOW || r->action == PI_DENY, "action %u", r->action);
	CHECK(r->proto == 0 || r->proto == IPPROTO_TCP || r->proto == IPPROTO_UDP ||
	      r->proto == IPPROTO_ICMP, "proto %u", r->proto);
	if (r->port_hi)
		CHECK((r->proto == IPPROTO_TCP || r->proto == IPPROTO_UDP) &&
		      r->port_lo >= 1 && r->port_lo <= r->port_hi,
		      "ports %u-%u of proto %u", r->port_lo, r->port_hi, r->proto);
	else
		CHECK(!r->port_lo, "port_lo %u without port_hi", r->port_lo);
	CHECK(r->family == 0 || r->family == AF_INET || r->family == AF_INET6,
	      "family %u", r->family);
	if (!r->family)
		CHECK(!r->prefixlen && !(r->addr.a[0] | r->addr.a[1] |
					 r->addr.a[2] | r->addr.a[3]),
		      "an address without a family");
	else
		CHECK(r->prefixlen <= (r->family == AF_INET ? 32 : 128) &&
		      host_bits_clear(&r->addr, r->prefixlen),
		      "prefix /%u of family %u", r->prefixlen, r->family);
}

/* The rule as the CLI's own arguments, as `policy list` shows it. */
static void check_rule_again(const char *pod, uint32_t dir, uint32_t pos,
			     const struct pi_rule *r)
{
	char cidr[80], ports[16], posbuf[16];
	char *argv[16];
	int argc = 0;
	struct pi_rule first = *r;

	argv[argc++] = "add";
	argv[argc++] = (char *)pod;
	argv[argc++] = dir == PI_DIR_EGRESS ? "egress" : "ingress";
	argv[argc++] = r->action == PI_ALLOW ? "allow" : "deny";
	if (r->family) {
		pi_fmt_addr(r->family, &r->addr, r->prefixlen, cidr, sizeof(cidr));
		argv[argc++] = dir == PI_DIR_EGRESS ? "to" : "from";
		argv[argc++] = cidr;
	}
	if (r->proto) {
		argv[argc++] = "proto";
		argv[argc++] = (char *)pi_proto_name(r->proto);
	}
	if (r->port_hi) {
		snprintf(ports, sizeof(ports), "%u-%u", r->port_lo, r->port_hi);
		argv[argc++] = "port";
		argv[argc++] = ports;
	}
	if (pos) {
		snprintf(posbuf, sizeof(posbuf), "%u", pos);
		argv[argc++] = "at";
		argv[argc++] = posbuf;
	}
	CHECK(run_cli(do_policy, argc, argv) == EXIT_OK && seen.policy,
	      "the rule's own form is refused (pod %s)", pod);
	CHECK(!memcmp(&seen.rule, &first, sizeof(first)) && seen.dir == dir &&
	      seen.pos == pos, "the rule's own form reads back otherwise");
}

static void check_proxy_rule(const char *proxy, const char *pod,
			     const struct pi_proxy_rule *r)
{
	CHECK(pi_valid_pod_name(proxy) && pi_valid_pod_name(pod) &&
	      strcmp(proxy, pod), "proxy '%s' for '%s'", proxy, pod);
	CHECK(r->port >= 1, "proxy port %u", r->port);
	CHECK(r->proto == 0 || r->proto == IPPROTO_TCP || r->proto == IPPROTO_UDP,
	      "proxy proto %u", r->proto);
	CHECK(r->nports <= PI_PROXY_MAX_PORTS, "%u port ranges", r->nports);
	CHECK(r->proto || (!r->nports && !r->dst_family),
	      "ports or destination without --match");
	for (int i = 0; i < r->nports; i++)
		CHECK(r->dport_lo[i] >= 1 && r->dport_lo[i] <= r->dport_hi[i],
		      "proxy port range %u-%u", r->dport_lo[i], r->dport_hi[i]);
	for (int i = r->nports; i < PI_PROXY_MAX_PORTS; i++)
		CHECK(!r->dport_lo[i] && !r->dport_hi[i],
		      "a port range past nports");
	CHECK(r->dst_family == 0 || r->dst_family == AF_INET ||
	      r->dst_family == AF_INET6, "proxy dst family %u", r->dst_family);
	if (r->dst_family)
		CHECK(r->dst_plen <= (r->dst_family == AF_INET ? 32u : 128u) &&
		      host_bits_clear(&r->dst, r->dst_plen),
		      "proxy dst /%u", r->dst_plen);
}

static void check_inject(bool allow)
{
	CHECK(pi_valid_pod_name(seen.pod), "injector '%s'", seen.pod);
	CHECK(seen.nas >= (allow ? 1 : 0) && seen.nas <= PI_INJECT_MAX_AS,
	      "%d pods to inject as", seen.nas);
	for (int i = 0; i < seen.nas; i++)
		CHECK(pi_valid_pod_name(seen.as[i]), "inject as '%s'", seen.as[i]);
	if (allow)
		CHECK(seen.path == 0 || seen.path == PI_PATH_FAST ||
		      seen.path == PI_PATH_FALLBACK, "path %u", seen.path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	real_stderr = stderr;
	null_out = fopen("/dev/null", "we");
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *copy, *argv[24];
	int argc = 0, ret;

	if (size < 1 || size > 4096)
		return -1;
	copy = malloc(size + 1);
	memcpy(copy, data, size);
	copy[size] = 0;
	switch (data[0] % 8) {
	case 0:
		check_prefix(copy + 1);
		break;
	case 1:
		check_u32(copy + 1);
		break;
	case 2:
		check_ports(copy + 1);
		break;
	case 3:
		check_proto_names(copy + 1);
		break;
	default:
		/* the subcommand and the arguments, NUL-separated */
		argv[argc++] = data[0] % 8 == 6 ? "allow" :
			       data[0] % 8 == 7 ? "deny" : "add";
		for (char *p = copy + 1; p <= copy + size && argc < 23;
		     p += strlen(p) + 1)
			argv[argc++] = p;
		argv[argc] = NULL;
		if (data[0] % 8 >= 6) {
			bool allow = data[0] % 8 == 6;

			ret = run_cli(do_inject, argc, argv);
			CHECK(ret == EXIT_OK || ret == EXIT_USAGE,
			      "inject %s exit %d", argv[0], ret);
			CHECK(seen.inject == (ret == EXIT_OK),
			      "inject %s: exit %d, %spassed on", argv[0], ret,
			      seen.inject ? "" : "not ");
			if (seen.inject)
				check_inject(allow);
		} else if (data[0] % 8 == 4) {
			ret = run_cli(do_policy, argc, argv);
			CHECK(ret == EXIT_OK || ret == EXIT_USAGE,
			      "policy add exit %d", ret);
			if (seen.policy) {
				struct pi_rule r = seen.rule;
				char pod[512];
				uint32_t dir = seen.dir, pos = seen.pos;

				CHECK(ret == EXIT_OK, "a rule passed on, exit %d", ret);
				snprintf(pod, sizeof(pod), "%s", seen.pod);
				check_rule(pod, dir, &r);
				check_rule_again(pod, dir, pos, &r);
			}
		} else {
			ret = run_cli(do_proxy, argc, argv);
			CHECK(ret == EXIT_OK || ret == EXIT_USAGE,
			      "proxy add exit %d", ret);
			if (seen.proxy)
				check_proxy_rule(seen.proxy_pod, seen.pod,
						 &seen.prule);
		}
		break;
	}
	free(copy);
	return 0;
}
