/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The CNI_* environment a command runs with, and the names podinject
 * gives an attachment: its id in the node, its pod name and, in main mode,
 * its host-side device.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <nettle/sha2.h>
#include "podinject_util.h"
#include "cni.h"

bool cni_valid_container_id(const char *s)
{
	if (!s || !*s)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_' || *s == '.' ||
		      *s == '-'))
			return false;
	return true;
}

bool cni_valid_ifname(const char *s)
{
	if (!s || !*s || strlen(s) >= 16 || !strcmp(s, ".") ||
	    !strcmp(s, ".."))
		return false;
	for (; *s; s++)
		if (*s == '/' || *s == ':' || *s <= ' ' || *s == 0x7f)
			return false;
	return true;
}

/* CNI_ARGS "K=V;K=V", keys in any order; *val points into a copy. */
static int args_get(const char *args, const char *key, char *val,
		    size_t len)
{
	const char *p = args;
	size_t klen = strlen(key);

	while (p && *p) {
		const char *end = strchr(p, ';');
		size_t n = end ? (size_t)(end - p) : strlen(p);

		if (n > klen && !strncmp(p, key, klen) && p[klen] == '=') {
			snprintf(val, len, "%.*s", (int)(n - klen - 1),
				 p + klen + 1);
			return 0;
		}
		p = end ? end + 1 : NULL;
	}
	return -ENOENT;
}

static int check_args(const char *args, struct cni_err *e)
{
	const char *p = args;

	while (p && *p) {
		const char *end = strchr(p, ';');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		const char *eq = memchr(p, '=', n);

		if (n && (!eq || eq == p))
			return cni_fail(e, CNI_ERR_ENV, "invalid CNI_ARGS",
					"'%.*s' is not KEY=VALUE", (int)n, p);
		p = end ? end + 1 : NULL;
	}
	return 0;
}

static uint32_t fnv1a(const char *s, uint32_t h)
{
	return pi_fnv32(h, s, strlen(s));
}

/* 128 bits of SHA-256 of s, in hex. A network's name is chosen by
 * whoever writes its config (a Multus network's tenant), and two names of
 * one 32-bit hash were found in seconds: a GC of the one network removed
 * the other's pods. */
static void sha_hex(const char *s, char out[CNI_NET_HASH_HEX + 1])
{
	uint8_t md[SHA256_DIGEST_SIZE];
	struct sha256_ctx ctx;

	sha256_init(&ctx);
	sha256_update(&ctx, strlen(s), (const uint8_t *)s);
	sha256_digest(&ctx, sizeof(md), md);
	for (int i = 0; i < CNI_NET_HASH_HEX / 2; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
}

void cni_attach_prefix(const char *net, char *buf, size_t len)
{
	char hex[CNI_NET_HASH_HEX + 1];

	sha_hex(net, hex);
	snprintf(buf, len, CNI_ATTACH_PREFIX "%s:", hex);
}

void cni_attach_prefix_legacy(const char *net, char *buf, size_t len)
{
	snprintf(buf, len, CNI_ATTACH_PREFIX "%08x:", fnv1a(net, PI_FNV32_BASIS));
}

/* The attachment's id in the node: the network, the container, the
 * interface. A container id too long for it is hashed. */
static void make_id(char *buf, size_t len, const char *prefix,
		    const struct cni_env *env, bool legacy)
{
	int n = snprintf(buf, len, "%s%s:%s", prefix, env->container_id,
			 env->ifname);

	if (n < (int)len)
		return;
	if (legacy) {
		snprintf(buf, len, "%s#%08x%08x:%s", prefix,
			 fnv1a(env->container_id, PI_FNV32_BASIS),
			 fnv1a(env->container_id, 0x9e3779b9u), env->ifname);
	} else {
		char hex[CNI_NET_HASH_HEX + 1];

		sha_hex(env->container_id, hex);
		snprintf(buf, len, "%s#%s:%s", prefix, hex, env->ifname);
	}
}

void cni_make_attach_id(struct cni_env *env, const char *net)
{
	char prefix[CNI_PREFIX_MAX];

	cni_attach_prefix(net, prefix, sizeof(prefix));
	make_id(env->attach_id, sizeof(env->attach_id), prefix, env, false);
	cni_attach_prefix_legacy(net, prefix, sizeof(prefix));
	make_id(env->attach_id_legacy, sizeof(env->attach_id_legacy), prefix,
		env, true);
}

bool cni_attach_id_is_legacy(const char *id)
{
	const char *hash = id + strlen(CNI_ATTACH_PREFIX);
	const char *end = strchr(hash, ':');

	return end && end - hash == 8;
}

/* K8S_POD_NAMESPACE/K8S_POD_NAME, else K8S_POD_NAME (podman puts the
 * container's name there), else the container id. A second interface of
 * the same pod gets its name as a suffix. */
static void make_pod_name(struct cni_env *env)
{
	char ns[254] = "", pod[254] = "", name[PI_POD_NAME_MAX + 20];

	args_get(env->args, "K8S_POD_NAMESPACE", ns, sizeof(ns));
	args_get(env->args, "K8S_POD_NAME", pod, sizeof(pod));
	if (*ns && *pod)
		snprintf(name, sizeof(name), "%s/%s", ns, pod);
	else if (*pod)
		snprintf(name, sizeof(name), "%s", pod);
	else
		snprintf(name, sizeof(name), "%s", env->container_id);
	if (strcmp(env->ifname, "eth0"))
		snprintf(name + strlen(name), sizeof(name) - strlen(name),
			 "/%s", env->ifname);
	if (strlen(name) > PI_POD_NAME_MAX || !pi_valid_pod_name(name)) {
		cni_log(PI_LOG_INFO, "'%s' is no podinject pod name; the pod is named by its container id",
			name);
		snprintf(name, sizeof(name), "%.*s", PI_POD_NAME_MAX - 16,
			 env->container_id);
		if (strcmp(env->ifname, "eth0"))
			snprintf(name + strlen(name),
				 sizeof(name) - strlen(name), "/%s",
				 env->ifname);
		/* An interface name may hold what no pod name does ('@',
		 * '+'), a container id may begin with '-' or '.': then the
		 * name is made of their hashes. */
		if (!pi_valid_pod_name(name))
			snprintf(name, sizeof(name), "cni-%08x-%08x",
				 fnv1a(env->container_id, PI_FNV32_BASIS),
				 fnv1a(env->ifname, PI_FNV32_BASIS));
	}
	snprintf(env->pod_name, sizeof(env->pod_name), "%s", name);
}

int cni_read_env(struct cni_env *env, struct cni_err *e)
{
	const char *cmd = env->command;
	bool add = !strcmp(cmd, "ADD"), check = !strcmp(cmd, "CHECK");
	bool del = !strcmp(cmd, "DEL");

	env->container_id = getenv("CNI_CONTAINERID");
	env->netns = getenv("CNI_NETNS");
	env->ifname = getenv("CNI_IFNAME");
	env->args = getenv("CNI_ARGS");
	env->path = getenv("CNI_PATH");
	if (env->netns && !*env->netns)
		env->netns = NULL;
	if (!(add || check || del))
		return 0;
	/* The spec makes CNI_PATH optional for DEL, which main mode needs
	 * for its IPAM plugin's DEL: else every retry failed and the address
	 * was never given back. The runtime ran this plugin by its path in
	 * CNI_PATH: its directory is where the IPAM plugin was found too. */
	if (del && (!env->path || !*env->path) && env->self &&
	    strrchr(env->self, '/')) {
		size_t n = strrchr(env->self, '/') - env->self;

		if (n && n < sizeof(env->self_dir)) {
			memcpy(env->self_dir, env->self, n);
			env->self_dir[n] = '\0';
			env->path = env->self_dir;
			/* the IPAM plugin gets our environment, and the
			 * reference plugins want it there */
			setenv("CNI_PATH", env->path, 1);
			cni_log(PI_LOG_INFO, "no CNI_PATH; DEL looks in %s",
				env->path);
		}
	}
	if (!env->container_id || !*env->container_id)
		return cni_fail(e, CNI_ERR_ENV, "CNI_CONTAINERID is missing", NULL);
	if (!cni_valid_container_id(env->container_id))
		return cni_fail(e, CNI_ERR_ENV, "invalid CNI_CONTAINERID",
				"'%s': use A-Z a-z 0-9 _ . -", env->container_id);
	if (!env->ifname || !*env->ifname)
		return cni_fail(e, CNI_ERR_ENV, "CNI_IFNAME is missing", NULL);
	if (!cni_valid_ifname(env->ifname))
		return cni_fail(e, CNI_ERR_ENV, "invalid CNI_IFNAME",
				"'%s' is not an interface name", env->ifname);
	if ((add || check) && !env->netns)
		return cni_fail(e, CNI_ERR_ENV, "CNI_NETNS is missing", NULL);
	/* DEL finds the pod by its attachment (container id, interface)
	 * and needs neither the namespace nor the arguments: what ADD would
	 * refuse in them does not keep a pod from being deleted. */
	if (del && env->netns && strlen(env->netns) >= PI_NETNS_MAX) {
		cni_log(PI_LOG_INFO, "CNI_NETNS is too long; DEL goes without it");
		env->netns = NULL;
	}
	if (del && env->netns && *env->netns && *env->netns != '/') {
		cni_log(PI_LOG_INFO, "CNI_NETNS is not a path; DEL goes without it");
		env->netns = NULL;
	}
	if (env->netns && strlen(env->netns) >= PI_NETNS_MAX)
		return cni_fail(e, CNI_ERR_ENV, "CNI_NETNS is too long",
				"at most %d characters", PI_NETNS_MAX - 1);
	/* The spec's CNI_NETNS is a path (/run/netns/NAME, /proc/PID/ns/net).
	 * A relative one was opened from the plugin's working directory for
	 * the pair and taken by the library as a name under /run/netns for
	 * the pod: two namespaces, where the runtime meant one. */
	if ((add || check) && *env->netns != '/')
		return cni_fail(e, CNI_ERR_ENV, "invalid CNI_NETNS",
				"'%s' is not an absolute path", env->netns);
	if (del && check_args(env->args, e)) {
		cni_log(PI_LOG_INFO, "%s: %s; DEL goes without CNI_ARGS",
			e->msg, e->details);
		*e = (struct cni_err){ 0 };
		env->args = NULL;
	}
	if (check_args(env->args, e))
		return -1;
	make_pod_name(env);
	return 0;
}

/* The host-side device of a main-mode pod: "pi" and a hash of the
 * attachment, as ptp's "veth" and 8 hex digits. */
void cni_main_hostdev(const struct cni_env *env, char *buf, size_t len)
{
	snprintf(buf, len, "pi%08x%03x", fnv1a(env->attach_id, PI_FNV32_BASIS),
		 fnv1a(env->attach_id, 0x9e3779b9u) & 0xfff);
}
