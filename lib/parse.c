/* SPDX-License-Identifier: GPL-2.0 */
/* Names, addresses, ports and protocols as the front-ends write them. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "internal.h"

bool pi_valid_name(const char *name, int maxlen)
{
	int n = 0;

	if (!name || !*name || *name == '-')
		return false;
	for (; *name; name++, n++) {
		char c = *name;

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '-'))
			return false;
	}
	return n <= maxlen;
}

bool pi_valid_pod_name(const char *name)
{
	size_t len = name ? strlen(name) : 0;

	if (!len || len > PI_POD_NAME_MAX || name[0] == '/' ||
	    name[len - 1] == '/' || name[0] == '-' || name[0] == '.')
		return false;
	for (const char *c = name; *c; c++) {
		if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		    (*c >= '0' && *c <= '9') || *c == '-' || *c == '.' ||
		    *c == '_' || *c == '/')
			continue;
		return false;
	}
	return true;
}

int pi_parse_prefix(const char *s, int *family, struct pi_addr *addr, int *plen)
{
	char buf[64], *slash;
	int max;

	if (!s || strlen(s) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, s);
	slash = strchr(buf, '/');
	if (slash)
		*slash++ = 0;
	memset(addr, 0, sizeof(*addr));
	if (inet_pton(AF_INET, buf, &addr->a[0]) == 1) {
		*family = AF_INET;
		max = 32;
	} else if (inet_pton(AF_INET6, buf, addr->a) == 1) {
		*family = AF_INET6;
		max = 128;
	} else {
		return -EINVAL;
	}
	*plen = max;
	if (slash) {
		uint32_t v;

		if (pi_parse_u32(slash, &v) || v > (uint32_t)max)
			return -EINVAL;
		*plen = v;
	}
	/* Host bits set under a prefix are almost always a typo. */
	return pi_prefix_clean(addr, *plen) ? 0 : -EINVAL;
}

bool pi_prefix_clean(const struct pi_addr *addr, int plen)
{
	for (int i = 0; i < 4; i++) {
		int bits = plen - i * 32;
		uint32_t mask;

		if (bits >= 32)
			continue;
		mask = bits <= 0 ? 0 : ~(0xffffffffu >> bits);
		if (ntohl(addr->a[i]) & ~mask)
			return false;
	}
	return true;
}

int pi_parse_u32(const char *s, uint32_t *v)
{
	char *end;
	unsigned long long x;

	/* digits only: strtoull would also take leading blanks, a sign,
	 * and "-0" */
	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	x = strtoull(s, &end, 10);
	if (errno || *end || x > UINT32_MAX)
		return -EINVAL;
	*v = x;
	return 0;
}

int pi_parse_port_range(const char *s, uint16_t *lo, uint16_t *hi)
{
	char buf[32], *dash;
	uint32_t a, b;

	if (!s || strlen(s) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, s);
	dash = strchr(buf, '-');
	if (dash)
		*dash++ = 0;
	if (pi_parse_u32(buf, &a) || a < 1 || a > 65535)
		return -EINVAL;
	b = a;
	if (dash && (pi_parse_u32(dash, &b) || b < a || b > 65535))
		return -EINVAL;
	*lo = a;
	*hi = b;
	return 0;
}

int pi_parse_proto(const char *s, uint8_t *proto)
{
	if (!strcmp(s, "tcp"))
		*proto = IPPROTO_TCP;
	else if (!strcmp(s, "udp"))
		*proto = IPPROTO_UDP;
	else if (!strcmp(s, "icmp"))
		*proto = IPPROTO_ICMP;
	else if (!strcmp(s, "any"))
		*proto = 0;
	else
		return -EINVAL;
	return 0;
}

const char *pi_proto_name(uint8_t proto)
{
	switch (proto) {
	case 0: return "any";
	case IPPROTO_TCP: return "tcp";
	case IPPROTO_UDP: return "udp";
	case IPPROTO_ICMP: return "icmp";
	default: return "other";
	}
}

const char *pi_fmt_addr(int family, const struct pi_addr *a, int plen,
		     char *buf, size_t len)
{
	char tmp[INET6_ADDRSTRLEN];

	inet_ntop(family, a->a, tmp, sizeof(tmp));
	if (plen >= 0)
		snprintf(buf, len, "%s/%d", tmp, plen);
	else
		snprintf(buf, len, "%s", tmp);
	return buf;
}

const char *pi_fmt_mac(const uint8_t m[6], char buf[18])
{
	snprintf(buf, 18, "%02x:%02x:%02x:%02x:%02x:%02x",
		 m[0], m[1], m[2], m[3], m[4], m[5]);
	return buf;
}

int pin_tree_walk(const char *dir,
		  int (*fn)(const char *path, const char *name, void *ctx),
		  void *ctx)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int ret = 0;

	if (!d)
		return 0;
	while (!ret && (de = readdir(d))) {
		char path[PATH_MAX];
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (lstat(path, &st))
			continue;
		ret = S_ISDIR(st.st_mode) ? pin_tree_walk(path, fn, ctx) :
					    fn(path, de->d_name, ctx);
	}
	closedir(d);
	return ret;
}

void run_path(const char *sub, const char *pin_dir, char *buf, size_t len)
{
	const char *slash = strrchr(pin_dir, '/');

	snprintf(buf, len, PI_RUN_DIR "/%s/%s", sub, slash ? slash + 1 : pin_dir);
}

int mkdir_p(const char *path)
{
	char buf[PATH_MAX];

	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	for (char *s = buf + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(buf, 0700) && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	if (mkdir(buf, 0700) && errno != EEXIST)
		return -errno;
	return 0;
}

/* Removes a pin folder and everything below it. */
int rm_tree(const char *path)
{
	struct dirent *de;
	DIR *d = opendir(path);
	int err = 0;

	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d))) {
		char sub[PATH_MAX];
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
		if (lstat(sub, &st))
			continue;
		if (S_ISDIR(st.st_mode)) {
			int e = rm_tree(sub);

			if (e && !err)
				err = e;
		} else if (unlink(sub) && !err) {
			err = -errno;
		}
	}
	closedir(d);
	if (rmdir(path) && !err)
		err = -errno;
	return err;
}

