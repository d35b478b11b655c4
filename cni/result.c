/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the plugin prints and what it reads of another plugin's output:
 * the spec's error object, a main-mode result, and the pod's interface and
 * addresses in prevResult. stdout carries the result or the error object
 * and nothing else.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include "cni.h"

int cni_fail(struct cni_err *e, int code, const char *msg,
	     const char *fmt, ...)
{
	va_list ap;

	e->code = code;
	e->ipam_code = 0;
	snprintf(e->msg, sizeof(e->msg), "%s", msg);
	e->details[0] = 0;
	if (fmt) {
		va_start(ap, fmt);
		vsnprintf(e->details, sizeof(e->details), fmt, ap);
		va_end(ap);
	}
	return -1;
}

static json_t *error_object(const char *version, const struct cni_err *e)
{
	return json_pack("{s:s, s:i, s:s, s:s}", "cniVersion",
			 version ? version : "1.0.0", "code", e->code,
			 "msg", e->msg, "details", e->details);
}

static void ascii_only(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s >= 0x80)
			*s = '?';
}

/* The spec's error object, on stdout, where libcni reads it. Details
 * quote the caller's bytes (CNI_CONTAINERID, CNI_ARGS) and may be cut in
 * the middle of a character; JSON strings are UTF-8, so such a text has
 * its non-ASCII bytes made '?' rather than lose the whole object. */
int cni_print_error(const char *version, const struct cni_err *e)
{
	json_t *o = error_object(version, e);

	if (!o) {
		struct cni_err ascii = *e;

		ascii_only(ascii.msg);
		ascii_only(ascii.details);
		o = error_object(version, &ascii);
	}

	cni_log(PI_LOG_ERROR, "code %d: %s%s%s", e->code, e->msg,
		*e->details ? ": " : "", e->details);
	json_dumpf(o, stdout, JSON_COMPACT);
	fputc('\n', stdout);
	fflush(stdout);
	json_decref(o);
	return 1;
}

int cni_print_json(json_t *o)
{
	if (json_dumpf(o, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER))
		return -EIO;
	fputc('\n', stdout);
	return fflush(stdout) ? -errno : 0;
}

int cni_print_result(json_t *res, struct cni_err *e)
{
	int err = cni_print_json(res);

	if (err)
		return cni_fail(e, CNI_ERR_IO, "cannot write the result", "%s",
				strerror(-err));
	return 0;
}

/* cni_pi_open's error: a node whose lock stayed taken is worth another
 * try; any other error is cni_pi_fail's. */
int cni_pi_open_fail(struct cni_err *e, int err, const struct cni_conf *conf)
{
	if (err == -EBUSY)
		return cni_fail(e, CNI_ERR_TRY_AGAIN, "podinject node is busy, try again later",
				"cannot open the node: node '%s' stayed locked for %d ms",
				conf->node, conf->lock_timeout_ms);
	return cni_pi_fail(e, err, "cannot open the node", conf);
}

/* A library error (-errno) into the spec's code for it. EBUSY from any
 * step but opening the node (a device's hook taken by another program)
 * is no lock, and no reason to try again. */
int cni_pi_fail(struct cni_err *e, int err, const char *what,
		const struct cni_conf *conf)
{
	switch (-err) {
	case EUCLEAN:
		/* cni_pi_open: there, but never whole for as long as a
		 * lock is waited for */
		return cni_fail(e, CNI_ERR_INTERNAL, "podinject node cannot be opened",
				"%s: node '%s' is missing a part, or belongs to another network namespace (the plugin's log says which)",
				what, conf->node);
	case EPROTO:
		return cni_fail(e, CNI_ERR_NODE_ABI, "podinject node was made by another build",
				"%s: node '%s': an older build's is migrated in place with 'podinject -N %s node upgrade' "
				"(the DaemonSet's install step does), a newer one's needs that build; the plugin's log says which",
				what, conf->node, conf->node);
	case EADDRINUSE:
		return cni_fail(e, CNI_ERR_ADDR_IN_USE, "address belongs to another pod",
				"%s: %s", what, strerror(-err));
	case EEXIST:
		return cni_fail(e, CNI_ERR_EXISTS, "pod or device is attached already",
				"%s: %s", what, strerror(-err));
	case ENXIO:
		return cni_fail(e, CNI_ERR_DEVICE, "pod's namespace or device is not usable",
				"%s: %s", what, strerror(-err));
	default:
		return cni_fail(e, CNI_ERR_INTERNAL, "podinject failed", "%s: %s",
				what, strerror(-err));
	}
}

/* The index in prevResult.interfaces of the pod's interface, or -1. */
int cni_prev_pod_iface(json_t *prev, const char *ifname)
{
	json_t *ifs = json_object_get(prev, "interfaces"), *it;
	size_t i;

	json_array_foreach(ifs, i, it) {
		const char *n = json_string_value(json_object_get(it, "name"));
		const char *sb = json_string_value(json_object_get(it, "sandbox"));

		if (n && !strcmp(n, ifname) && sb && *sb)
			return i;
	}
	return -1;
}

/* Is `name` a host-side interface of prevResult? 1 yes, 0 no, -1 when
 * prevResult names no host-side interface at all. */
int cni_prev_has_host_iface(json_t *prev, const char *name)
{
	json_t *ifs = json_object_get(prev, "interfaces"), *it;
	bool any = false;
	size_t i;

	json_array_foreach(ifs, i, it) {
		const char *n = json_string_value(json_object_get(it, "name"));
		const char *sb = json_string_value(json_object_get(it, "sandbox"));

		if (!n || (sb && *sb))
			continue;
		any = true;
		if (!strcmp(n, name))
			return 1;
	}
	return any ? 0 : -1;
}

/* "A.B.C.D/N" or "X::Y/N" as CNI results write them (host bits set: the
 * pod's own address in its subnet); the prefix length is dropped, as
 * podinject's pods hold host addresses. */
static int parse_addr(const char *cidr, int *family, struct pi_addr *a)
{
	char buf[64];
	size_t n = strcspn(cidr, "/");
	int plen;

	if (n >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, cidr, n);
	buf[n] = 0;
	return pi_parse_prefix(buf, family, a, &plen);
}

/* The pod interface's first IPv4 and IPv6 address of prevResult. */
int cni_prev_addresses(json_t *prev, int pod_if, bool one_each,
		       struct pi_addr *ip4, bool *has4, struct pi_addr *ip6,
		       bool *has6, struct cni_err *e)
{
	json_t *ips = json_object_get(prev, "ips"), *it;
	size_t i;

	*has4 = *has6 = false;
	json_array_foreach(ips, i, it) {
		const char *a = json_string_value(json_object_get(it, "address"));
		json_t *ifi = json_object_get(it, "interface");
		struct pi_addr addr;
		int family;

		if (!a)
			continue;
		/* An address of another interface (of a multi-interface
		 * result) is not the pod's. */
		if (ifi && json_is_integer(ifi) && pod_if >= 0 &&
		    json_integer_value(ifi) != pod_if)
			continue;
		if (parse_addr(a, &family, &addr))
			return cni_fail(e, CNI_ERR_CONFIG, "invalid prevResult",
					"address '%s'", a);
		if (one_each && ((family == AF_INET && *has4) ||
				 (family == AF_INET6 && *has6)))
			return cni_fail(e, CNI_ERR_CONFIG,
					"podinject takes one address of each family per pod",
					"prevResult gives the pod a second %s address, %s, whose packets its source check would drop: give the pod one (one IPAM range per family), or \"datapath\": \"none\"",
					family == AF_INET ? "IPv4" : "IPv6", a);
		if (family == AF_INET && !*has4) {
			*ip4 = addr;
			*has4 = true;
		} else if (family == AF_INET6 && !*has6) {
			*ip6 = addr;
			*has6 = true;
		}
	}
	return 0;
}

int cni_prev_matches(json_t *prev, const char *ifname,
		     const struct pi_pod_info *pod, struct cni_err *e)
{
	struct pi_addr ip4 = {}, ip6 = {};
	bool has4, has6;

	if (cni_prev_addresses(prev, cni_prev_pod_iface(prev, ifname), false,
			       &ip4, &has4, &ip6, &has6, e))
		return -1;
	if (has4 && (!(pod->flags & PI_POD_HAS_V4) || ip4.a[0] != pod->ip4))
		return 0;
	if (has6 && (!(pod->flags & PI_POD_HAS_V6) ||
		     memcmp(ip6.a, pod->ip6, sizeof(pod->ip6))))
		return 0;
	return 1;
}

/* One of the pod's host addresses (/32, /128) with podinject's link-local
 * gateway and a default route through it; results of 0.4 and older name
 * the IP version. */
static void add_ip(json_t *ips, json_t *routes, int family, const void *addr,
		   bool old)
{
	bool v4 = family == AF_INET;
	const char *gw = v4 ? PI_POD_GW4 : PI_POD_GW6;
	char a[INET6_ADDRSTRLEN + 8];
	json_t *ip;

	inet_ntop(family, addr, a, sizeof(a));
	strcat(a, v4 ? "/32" : "/128");
	ip = json_pack("{s:s, s:s, s:i}", "address", a, "gateway", gw,
		       "interface", 1);
	if (old)
		json_object_set_new(ip, "version", json_string(v4 ? "4" : "6"));
	json_array_append_new(ips, ip);
	json_array_append_new(routes, json_pack("{s:s, s:s}", "dst",
						v4 ? "0.0.0.0/0" : "::/0",
						"gw", gw));
}

/* A main-mode result: the pair, the pod's host addresses (/32, /128) with
 * podinject's link-local gateways, and the IPAM plugin's dns. */
json_t *cni_main_result(const struct cni_conf *conf, const struct cni_env *env,
			const struct pi_pod_info *pod, json_t *ipam_res)
{
	bool old = cni_version_is_v04_or_older(conf->cni_version);
	json_t *ifs = json_array(), *ips = json_array(), *routes = json_array();
	json_t *dns = json_object_get(ipam_res, "dns");
	char mac[18];
	json_t *res;

	pi_fmt_mac(pod->host_mac, mac);
	json_array_append_new(ifs, json_pack("{s:s, s:s}", "name", pod->hostdev,
					     "mac", mac));
	pi_fmt_mac(pod->pod_mac, mac);
	json_array_append_new(ifs, json_pack("{s:s, s:s, s:s}", "name", env->ifname,
					     "mac", mac, "sandbox", env->netns));
	if (pod->flags & PI_POD_HAS_V4)
		add_ip(ips, routes, AF_INET, &pod->ip4, old);
	if (pod->flags & PI_POD_HAS_V6)
		add_ip(ips, routes, AF_INET6, pod->ip6, old);
	res = json_pack("{s:s, s:o, s:o, s:o}", "cniVersion", conf->cni_version,
			"interfaces", ifs, "ips", ips, "routes", routes);
	json_object_set_new(res, "dns", json_is_object(dns) ? json_incref(dns) :
							json_object());
	return res;
}
