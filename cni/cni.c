/* SPDX-License-Identifier: GPL-2.0 */
/*
 * podinject-cni: podinject as a CNI plugin.
 *
 * Chained (after ptp, bridge or any plugin that leaves a veth or netkit
 * pair): ADD adopts the pod into a podinject node that is the host's own
 * namespace and prints prevResult through. Main: podinject makes the pair
 * in the runtime's namespace, with addresses from the IPAM plugin of the
 * config, and prints a result of its own.
 *
 * An attachment is (CNI_CONTAINERID, CNI_IFNAME) of one network; it is the
 * pod's attach_id in the node, so DEL needs neither CNI_NETNS nor
 * prevResult. DEL succeeds whenever nothing of the attachment is left.
 *
 * stdout carries the result or the spec's error object and nothing else;
 * logs go to stderr or to the config's logFile.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/time.h>
#include "podinject_util.h"
#include "cni.h"

#define CNI_DEFAULT_NODE	"cni"
#define ATTACH_PREFIX		"cni:"

static const char *const supported_versions[] = {
	"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0",
};

/* ---- logging ---------------------------------------------------------- */

static FILE *log_fp;
static int log_level = PI_LOG_WARN;
static const char *log_cmd = "?";
static const char *log_cid = "";

static const char *const level_names[] = { "error", "warn", "info", "debug" };

void cni_log(int level, const char *fmt, ...)
{
	FILE *fp = log_fp ? log_fp : stderr;
	struct timeval tv;
	struct tm tm;
	char ts[32];
	va_list ap;

	if (level > log_level)
		return;
	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	fprintf(fp, "%s.%03ldZ podinject-cni[%d] %s %s %.12s: ", ts,
		(long)tv.tv_usec / 1000, (int)getpid(),
		level_names[level < 0 ? 0 : level > 3 ? 3 : level], log_cmd,
		log_cid);
	va_start(ap, fmt);
	vfprintf(fp, fmt, ap);
	va_end(ap);
	fputc('\n', fp);
	fflush(fp);
}

int cni_fail(struct cni_err *e, int code, const char *msg,
	     const char *fmt, ...)
{
	va_list ap;

	e->code = code;
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
static int print_error(const char *version, const struct cni_err *e)
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

static int print_json(json_t *o)
{
	if (json_dumpf(o, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER))
		return -EIO;
	fputc('\n', stdout);
	return fflush(stdout) ? -errno : 0;
}

/* ---- errors from podinject -------------------------------------------- */

static int pi_fail(struct cni_err *e, int err, const char *what,
		   const struct cni_conf *conf)
{
	switch (-err) {
	case EBUSY:
		return cni_fail(e, CNI_ERR_TRY_AGAIN, "podinject node is busy, try again later",
				"%s: node '%s' stayed locked for %d ms", what,
				conf->node, conf->lock_timeout_ms);
	case EPROTO:
		return cni_fail(e, CNI_ERR_NODE_ABI, "podinject node was made by another build",
				"%s: node '%s': take it down with 'podinject -N %s node down --force'",
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

/* ---- environment ------------------------------------------------------ */

static bool valid_container_id(const char *s)
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

static bool valid_ifname(const char *s)
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

/* The attachment's id in the node: the network, the container, the
 * interface. A container id too long for it is hashed. */
static void make_attach_id(struct cni_env *env, const char *net)
{
	uint32_t nh = fnv1a(net, PI_FNV32_BASIS);
	int n;

	n = snprintf(env->attach_id, sizeof(env->attach_id), ATTACH_PREFIX "%08x:%s:%s",
		     nh, env->container_id, env->ifname);
	if (n >= (int)sizeof(env->attach_id)) {
		uint32_t h1 = fnv1a(env->container_id, PI_FNV32_BASIS);
		uint32_t h2 = fnv1a(env->container_id, 0x9e3779b9u);

		snprintf(env->attach_id, sizeof(env->attach_id),
			 ATTACH_PREFIX "%08x:#%08x%08x:%s", nh, h1, h2,
			 env->ifname);
	}
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

static int read_env(struct cni_env *env, struct cni_err *e)
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
	if (!env->container_id || !*env->container_id)
		return cni_fail(e, CNI_ERR_ENV, "CNI_CONTAINERID is missing", NULL);
	if (!valid_container_id(env->container_id))
		return cni_fail(e, CNI_ERR_ENV, "invalid CNI_CONTAINERID",
				"'%s': use A-Z a-z 0-9 _ . -", env->container_id);
	if (!env->ifname || !*env->ifname)
		return cni_fail(e, CNI_ERR_ENV, "CNI_IFNAME is missing", NULL);
	if (!valid_ifname(env->ifname))
		return cni_fail(e, CNI_ERR_ENV, "invalid CNI_IFNAME",
				"'%s' is not an interface name", env->ifname);
	if ((add || check) && !env->netns)
		return cni_fail(e, CNI_ERR_ENV, "CNI_NETNS is missing", NULL);
	if (env->netns && strlen(env->netns) >= PI_NETNS_MAX)
		return cni_fail(e, CNI_ERR_ENV, "CNI_NETNS is too long",
				"at most %d characters", PI_NETNS_MAX - 1);
	if (check_args(env->args, e))
		return -1;
	make_pod_name(env);
	return 0;
}

/* ---- config ----------------------------------------------------------- */

static bool version_supported(const char *v)
{
	for (size_t i = 0; i < sizeof(supported_versions) / sizeof(*supported_versions); i++)
		if (!strcmp(v, supported_versions[i]))
			return true;
	return false;
}

static bool is_v04_or_older(const char *v)
{
	return !strncmp(v, "0.", 2);
}

static bool valid_node_name(const char *s)
{
	size_t n = strlen(s);

	if (!n || n >= PI_NAME_LEN || *s == '-')
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
		      *s == '-'))
			return false;
	return true;
}

/* A string member or NULL; a member of another type is a config error. */
static int get_str(json_t *o, const char *key, const char **out,
		   struct cni_err *e)
{
	json_t *v = json_object_get(o, key);

	*out = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return cni_fail(e, CNI_ERR_CONFIG, "invalid network config",
				"'%s' must be a string", key);
	*out = json_string_value(v);
	return 0;
}

/* A duration in milliseconds, min to an hour; *out is left as it is when
 * the key is absent. */
static int get_ms(json_t *o, const char *key, int min, int *out,
		  struct cni_err *e)
{
	json_t *v = json_object_get(o, key);

	if (!v)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < min ||
	    json_integer_value(v) > 3600 * 1000)
		return cni_fail(e, CNI_ERR_CONFIG, "invalid network config",
				"%s: %d-3600000", key, min);
	*out = json_integer_value(v);
	return 0;
}

static int read_stdin(json_t **root, struct cni_err *e)
{
	json_error_t jerr;

	*root = json_loadf(stdin, JSON_REJECT_DUPLICATES, &jerr);
	if (!*root)
		return cni_fail(e, CNI_ERR_DECODE, "cannot decode the network config",
				"line %d column %d: %s", jerr.line, jerr.column,
				jerr.text);
	if (!json_is_object(*root))
		return cni_fail(e, CNI_ERR_DECODE, "cannot decode the network config",
				"not a JSON object");
	return 0;
}

static int parse_conf(json_t *root, struct cni_conf *c, struct cni_err *e)
{
	const char *s;
	json_t *v;

	memset(c, 0, sizeof(*c));
	c->root = root;
	c->node = CNI_DEFAULT_NODE;
	c->lock_timeout_ms = PI_LOCK_TIMEOUT_MS;
	c->ipam_timeout_ms = CNI_IPAM_TIMEOUT_MS;
	c->log_level = -1;
	if (get_str(root, "cniVersion", &c->cni_version, e))
		return -1;
	if (!c->cni_version)
		return cni_fail(e, CNI_ERR_CONFIG, "invalid network config",
				"cniVersion is missing");
	if (get_str(root, "logFile", &c->log_file, e))
		return -1;
	if (get_str(root, "logLevel", &s, e))
		return -1;
	if (s) {
		for (int i = 0; i < 4; i++)
			if (!strcasecmp(s, level_names[i]))
				c->log_level = i;
		if (c->log_level < 0)
			return cni_fail(e, CNI_ERR_CONFIG, "invalid network config",
					"logLevel '%s': error, warn, info or debug", s);
	}
	if (!version_supported(c->cni_version))
		return cni_fail(e, CNI_ERR_VERSION, "incompatible CNI version",
				"config version %s; supported: 0.3.0 0.3.1 0.4.0 1.0.0 1.1.0",
				c->cni_version);
	if (get_str(root, "name", &c->name, e) ||
	    get_str(root, "type", &c->type, e))
		return -1;
	if (!c->name || !*c->name)
		return cni_fail(e, CNI_ERR_CONFIG, "invalid network config",
				"name is missing");
	if (get_str(root, "mode", &s, e))
		return -1;
	if (!s || !strcmp(s, "chained"))
		c->mode = CNI_MODE_CHAINED;
	else if (!strcmp(s, "main"))
		c->mode = CNI_MODE_MAIN;
	else
		return cni_fail(e, CNI_ERR_CONFIG, "invalid network config",
				"mode '%s': chained or main", s);
	if (get_str(root, "node", &s, e))
		return -1;
	if (s) {
		if (!valid_node_name(s))
			return cni_fail(e, CNI_ERR_CONFIG, "invalid network config",
					"node '%s': 1-%d of a-z 0-9 -", s,
					PI_NAME_LEN - 1);
		c->node = s;
	}
	if (get_str(root, "attach", &s, e))
		return -1;
	if (!s || !strcmp(s, "auto"))
		c->attach = PI_ATTACH_AUTO;
	else if (!strcmp(s, "tcx"))
		c->attach = PI_ATTACH_FORCE_TCX;
	else if (!strcmp(s, "clsact"))
		c->attach = PI_ATTACH_FORCE_CLSACT;
	else
		return cni_fail(e, CNI_ERR_CONFIG, "invalid network config",
				"attach '%s': auto, tcx or clsact", s);
	v = json_object_get(root, "xdp");
	if (v && !json_is_boolean(v))
		return cni_fail(e, CNI_ERR_CONFIG, "invalid network config",
				"xdp must be true or false");
	c->xdp = json_is_true(v);
	if (get_ms(root, "lockTimeoutMs", 0, &c->lock_timeout_ms, e) ||
	    get_ms(root, "ipamTimeoutMs", 1, &c->ipam_timeout_ms, e))
		return -1;
	v = json_object_get(root, "prevResult");
	if (v && !json_is_null(v)) {
		if (!json_is_object(v))
			return cni_fail(e, CNI_ERR_CONFIG, "invalid network config",
					"prevResult must be an object");
		c->prev_result = v;
	}
	v = json_object_get(root, "ipam");
	if (v && json_is_object(v) && json_object_size(v))
		c->ipam = v;
	if (c->mode == CNI_MODE_MAIN && !c->ipam)
		return cni_fail(e, CNI_ERR_CONFIG, "invalid network config",
				"main mode needs ipam (e.g. {\"type\": \"host-local\", ...})");
	if (c->mode == CNI_MODE_CHAINED && c->ipam)
		return cni_fail(e, CNI_ERR_FIELD, "unsupported field in network config",
				"ipam: a chained podinject takes the addresses from prevResult; set \"mode\": \"main\"");
	return 0;
}

static void open_log(const struct cni_conf *c)
{
	if (c->log_file && *c->log_file) {
		log_fp = fopen(c->log_file, "ae");
		if (!log_fp)
			cni_log(PI_LOG_WARN, "cannot open log file %s: %s",
				c->log_file, strerror(errno));
	}
	if (c->log_level >= 0)
		log_level = c->log_level;
	else
		log_level = log_fp ? PI_LOG_INFO : PI_LOG_WARN;
}

/* ---- prevResult ------------------------------------------------------- */

/* The index in prevResult.interfaces of the pod's interface, or -1. */
static int prev_pod_iface(json_t *prev, const char *ifname)
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
static int prev_has_host_iface(json_t *prev, const char *name)
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

/* The pod interface's first IPv4 and IPv6 address of prevResult. */
static int prev_addresses(json_t *prev, int pod_if, struct pi_addr *ip4,
			  bool *has4, struct pi_addr *ip6, bool *has6,
			  struct cni_err *e)
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
		if (cni_parse_addr(a, &family, &addr))
			return cni_fail(e, CNI_ERR_CONFIG, "invalid prevResult",
					"address '%s'", a);
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

/* ---- ADD -------------------------------------------------------------- */

/* Another pod of the node holds the name: a leftover of an attachment whose
 * DEL never came (a crash, a reboot) has lost its programs with its device,
 * and gives way. */
static int clear_stale(struct pi_node *node, const char *name)
{
	struct pi_pod_info old;

	if (cni_pi_find_name(node, name, &old))
		return -ENOENT;
	if (strncmp(old.attach_id, ATTACH_PREFIX, strlen(ATTACH_PREFIX)) ||
	    !cni_pi_check(node, &old))
		return -EEXIST;
	cni_log(PI_LOG_WARN, "pod %s of attachment %s has lost its device; removing it",
		name, old.attach_id);
	return cni_pi_del(node, name);
}

static int find_pair(const struct cni_env *env, struct cni_pair *pair,
		     struct cni_err *e)
{
	int err = cni_find_pair(env->netns, env->ifname, pair);

	if (err == -ENOENT)
		return cni_fail(e, CNI_ERR_DEVICE, "pod's namespace or interface not found",
				"%s in %s", env->ifname, env->netns);
	if (err == -ENXIO)
		return cni_fail(e, CNI_ERR_DEVICE, "pod's interface is not one end of a veth or netkit pair whose other end is on the host",
				"%s in %s", env->ifname, env->netns);
	if (err)
		return cni_fail(e, CNI_ERR_IO, "cannot read the pod's interface",
				"%s in %s: %s", env->ifname, env->netns,
				strerror(-err));
	return 0;
}

static int cmd_add_chained(const struct cni_conf *conf, struct cni_env *env,
			   struct cni_err *e)
{
	struct pi_addr ip4 = {}, ip6 = {};
	struct pi_pod_info pod, same;
	struct pi_node *node = NULL;
	struct cni_pair pair;
	bool has4, has6;
	json_t *out;
	int err, ret = -1;

	if (!conf->prev_result)
		return cni_fail(e, CNI_ERR_CONFIG, "podinject is chained but there is no prevResult",
				"list podinject after the plugin that makes the pod's devices, or set \"mode\": \"main\"");
	if (find_pair(env, &pair, e))
		return -1;
	switch (prev_has_host_iface(conf->prev_result, pair.host_name)) {
	case 0:
		return cni_fail(e, CNI_ERR_DEVICE, "prevResult's host-side interfaces do not include the pod's peer",
				"%s in %s is the peer of %s", env->ifname,
				env->netns, pair.host_name);
	case -1:
		cni_log(PI_LOG_INFO, "prevResult names no host-side interface; using %s, the peer of %s",
			pair.host_name, env->ifname);
		break;
	}
	if (prev_addresses(conf->prev_result,
			   prev_pod_iface(conf->prev_result, env->ifname),
			   &ip4, &has4, &ip6, &has6, e))
		return -1;

	err = cni_pi_open(conf, true, &node);
	if (err)
		return pi_fail(e, err, "cannot open the node", conf);
	err = cni_pi_adopt(node, env, pair.host_name, has4 ? &ip4 : NULL,
			   has6 ? &ip6 : NULL, &pod);
	if (err == -EEXIST) {
		/* The runtime repeating an ADD that went through. */
		if (!cni_pi_find(node, env->attach_id, &same) &&
		    same.ifindex == (uint32_t)pair.host_ifindex) {
			cni_log(PI_LOG_INFO, "pod %s is attached already", same.name);
			err = 0;
		} else if (!clear_stale(node, env->pod_name)) {
			err = cni_pi_adopt(node, env, pair.host_name,
					   has4 ? &ip4 : NULL,
					   has6 ? &ip6 : NULL, &pod);
		}
	}
	if (err) {
		pi_fail(e, err, "cannot adopt the pod", conf);
		snprintf(e->details + strlen(e->details),
			 sizeof(e->details) - strlen(e->details),
			 " (pod %s, device %s)", env->pod_name, pair.host_name);
		goto out;
	}
	cni_log(PI_LOG_INFO, "pod %s adopted on node %s: %s <-> %s", env->pod_name,
		conf->node, pair.host_name, env->ifname);
	out = json_deep_copy(conf->prev_result);
	json_object_set_new(out, "cniVersion", json_string(conf->cni_version));
	err = print_json(out);
	json_decref(out);
	if (err) {
		/* Nobody reads the result: the runtime will call DEL. */
		cni_fail(e, CNI_ERR_IO, "cannot write the result", "%s",
			 strerror(-err));
		goto out;
	}
	ret = 0;
out:
	cni_pi_close(node);
	return ret;
}

/* The host-side device of a main-mode pod: "pi" and a hash of the
 * attachment, as ptp's "veth" and 8 hex digits. */
static void main_hostdev(const struct cni_env *env, char *buf, size_t len)
{
	snprintf(buf, len, "pi%08x%03x", fnv1a(env->attach_id, PI_FNV32_BASIS),
		 fnv1a(env->attach_id, 0x9e3779b9u) & 0xfff);
}

static void fmt_mac(const uint8_t *m, char *buf)
{
	sprintf(buf, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3],
		m[4], m[5]);
}

/* A main-mode result: the pair, the pod's host addresses (/32, /128) with
 * podinject's link-local gateways, and the IPAM plugin's dns. */
static json_t *main_result(const struct cni_conf *conf,
			   const struct cni_env *env,
			   const struct pi_pod_info *pod, json_t *ipam_res)
{
	bool old = is_v04_or_older(conf->cni_version);
	json_t *ifs = json_array(), *ips = json_array(), *routes = json_array();
	json_t *dns = json_object_get(ipam_res, "dns");
	char mac[18], a[INET6_ADDRSTRLEN + 8];
	json_t *res, *ip;

	fmt_mac(pod->host_mac, mac);
	json_array_append_new(ifs, json_pack("{s:s, s:s}", "name", pod->hostdev,
					     "mac", mac));
	fmt_mac(pod->pod_mac, mac);
	json_array_append_new(ifs, json_pack("{s:s, s:s, s:s}", "name", env->ifname,
					     "mac", mac, "sandbox", env->netns));
	if (pod->flags & PI_POD_HAS_V4) {
		inet_ntop(AF_INET, &pod->ip4, a, sizeof(a));
		strcat(a, "/32");
		ip = json_pack("{s:s, s:s, s:i}", "address", a, "gateway",
			       "169.254.1.1", "interface", 1);
		if (old)
			json_object_set_new(ip, "version", json_string("4"));
		json_array_append_new(ips, ip);
		json_array_append_new(routes, json_pack("{s:s, s:s}", "dst",
							"0.0.0.0/0", "gw", "169.254.1.1"));
	}
	if (pod->flags & PI_POD_HAS_V6) {
		inet_ntop(AF_INET6, pod->ip6, a, sizeof(a));
		strcat(a, "/128");
		ip = json_pack("{s:s, s:s, s:i}", "address", a, "gateway",
			       "fe80::1", "interface", 1);
		if (old)
			json_object_set_new(ip, "version", json_string("6"));
		json_array_append_new(ips, ip);
		json_array_append_new(routes, json_pack("{s:s, s:s}", "dst",
							"::/0", "gw", "fe80::1"));
	}
	res = json_pack("{s:s, s:o, s:o, s:o}", "cniVersion", conf->cni_version,
			"interfaces", ifs, "ips", ips, "routes", routes);
	json_object_set_new(res, "dns", json_is_object(dns) ? json_incref(dns) :
							json_object());
	return res;
}

static int cmd_add_main(const struct cni_conf *conf, struct cni_env *env,
			struct cni_err *e)
{
	struct pi_addr ip4 = {}, ip6 = {};
	struct pi_node *node = NULL;
	struct pi_pod_info pod;
	struct cni_err ignore;
	json_t *ipam_res = NULL, *res;
	char hostdev[16];
	bool has4, has6, added = false;
	int err, ret = -1;

	if (conf->prev_result)
		cni_log(PI_LOG_WARN, "main mode ignores the prevResult it was given");
	if (cni_ipam_exec(conf, env, "ADD", &ipam_res, e)) {
		/* The plugin ran (and may hold an address it never reported,
		 * timed out or cut off): it gets its DEL. */
		if (e->code == CNI_ERR_IPAM &&
		    cni_ipam_exec(conf, env, "DEL", NULL, &ignore))
			cni_log(PI_LOG_ERROR, "cannot undo IPAM: %s: %s",
				ignore.msg, ignore.details);
		return -1;
	}
	if (prev_addresses(ipam_res, -1, &ip4, &has4, &ip6, &has6, e))
		goto out;
	if (!has4 && !has6) {
		cni_fail(e, CNI_ERR_IPAM, "IPAM plugin returned no address", NULL);
		goto out;
	}
	main_hostdev(env, hostdev, sizeof(hostdev));
	err = cni_pi_open(conf, true, &node);
	if (err) {
		pi_fail(e, err, "cannot open the node", conf);
		goto out;
	}
	err = cni_pi_add(node, env, hostdev, has4 ? &ip4 : NULL,
			 has6 ? &ip6 : NULL, &pod);
	if (err == -EEXIST && !clear_stale(node, env->pod_name))
		err = cni_pi_add(node, env, hostdev, has4 ? &ip4 : NULL,
				 has6 ? &ip6 : NULL, &pod);
	if (err) {
		pi_fail(e, err, "cannot add the pod", conf);
		goto out;
	}
	added = true;
	cni_log(PI_LOG_INFO, "pod %s added on node %s: %s <-> %s in %s",
		env->pod_name, conf->node, hostdev, env->ifname, env->netns);
	res = main_result(conf, env, &pod, ipam_res);
	err = print_json(res);
	json_decref(res);
	if (err) {
		cni_fail(e, CNI_ERR_IO, "cannot write the result", "%s",
			 strerror(-err));
		goto out;
	}
	ret = 0;
out:
	if (ret && added) {
		err = cni_pi_del(node, env->pod_name);
		if (err)
			cni_log(PI_LOG_ERROR, "cannot undo pod %s: %s",
				env->pod_name, strerror(-err));
	}
	cni_pi_close(node);
	/* A failed ADD gives its addresses back. */
	if (ret && ipam_res && cni_ipam_exec(conf, env, "DEL", NULL, &ignore))
		cni_log(PI_LOG_ERROR, "cannot undo IPAM: %s: %s", ignore.msg,
			ignore.details);
	json_decref(ipam_res);
	return ret;
}

/* ---- DEL, CHECK, GC --------------------------------------------------- */

static int cmd_del(const struct cni_conf *conf, struct cni_env *env,
		   struct cni_err *e)
{
	struct pi_node *node = NULL;
	struct pi_pod_info pod;
	int err, ret = 0;

	err = cni_pi_open(conf, false, &node);
	if (err == -ENOENT) {
		cni_log(PI_LOG_INFO, "node %s is not up: nothing to remove", conf->node);
	} else if (err == -EPROTO) {
		/* Its programs go with the pod's device; the node needs an
		 * operator, not a blocked pod deletion. */
		cni_log(PI_LOG_WARN, "node %s was made by another build; leaving attachment %s to it",
			conf->node, env->attach_id);
	} else if (err) {
		return pi_fail(e, err, "cannot open the node", conf);
	} else if (cni_pi_find(node, env->attach_id, &pod)) {
		cni_log(PI_LOG_INFO, "no pod of attachment %s: nothing to remove",
			env->attach_id);
	} else {
		err = cni_pi_del(node, pod.name);
		if (err && err != -ESRCH) {
			ret = pi_fail(e, err, "cannot remove the pod", conf);
		} else {
			cni_log(PI_LOG_INFO, "pod %s removed from node %s",
				pod.name, conf->node);
		}
	}
	cni_pi_close(node);
	if (!ret && conf->mode == CNI_MODE_MAIN &&
	    cni_ipam_exec(conf, env, "DEL", NULL, e))
		ret = -1;
	return ret;
}

static int cmd_check(const struct cni_conf *conf, struct cni_env *env,
		     struct cni_err *e)
{
	struct pi_node *node = NULL;
	struct pi_pod_info pod;
	struct cni_pair pair;
	int err, ret = -1;

	if (!conf->prev_result)
		return cni_fail(e, CNI_ERR_CONFIG, "CHECK needs prevResult", NULL);
	err = cni_pi_open(conf, false, &node);
	if (err == -ENOENT)
		return cni_fail(e, CNI_ERR_CHECK, "podinject node is not up",
				"node %s", conf->node);
	if (err)
		return pi_fail(e, err, "cannot open the node", conf);
	if (cni_pi_find(node, env->attach_id, &pod)) {
		cni_fail(e, CNI_ERR_CHECK, "pod is not attached to podinject",
			 "no pod of attachment %s on node %s", env->attach_id,
			 conf->node);
		goto out;
	}
	err = cni_pi_check(node, &pod);
	if (err) {
		cni_fail(e, CNI_ERR_CHECK, "pod's podinject programs are missing",
			 "pod %s on %s: %s", pod.name, pod.hostdev,
			 strerror(-err));
		goto out;
	}
	if (find_pair(env, &pair, e))
		goto out;
	if ((uint32_t)pair.host_ifindex != pod.ifindex) {
		cni_fail(e, CNI_ERR_CHECK, "pod's interface is not the device podinject attached to",
			 "%s's peer is %s (ifindex %d), pod %s is on %s (ifindex %u)",
			 env->ifname, pair.host_name, pair.host_ifindex,
			 pod.name, pod.hostdev, pod.ifindex);
		goto out;
	}
	ret = 0;
out:
	cni_pi_close(node);
	if (!ret && conf->mode == CNI_MODE_MAIN &&
	    cni_ipam_exec(conf, env, "CHECK", NULL, e))
		ret = -1;
	return ret;
}

/* GC (spec 1.1): removes this network's attachments that are not in
 * cni.dev/valid-attachments. */
static int cmd_gc(const struct cni_conf *conf, struct cni_err *e)
{
	json_t *valid = json_object_get(conf->root, "cni.dev/valid-attachments");
	struct pi_pod_info *pods = NULL;
	struct pi_node *node = NULL;
	char prefix[32];
	int n, err;

	if (valid && !json_is_array(valid))
		return cni_fail(e, CNI_ERR_CONFIG, "invalid network config",
				"cni.dev/valid-attachments must be an array");
	err = cni_pi_open(conf, false, &node);
	if (err == -ENOENT)
		return 0;
	if (err)
		return pi_fail(e, err, "cannot open the node", conf);
	snprintf(prefix, sizeof(prefix), ATTACH_PREFIX "%08x:",
		 fnv1a(conf->name, PI_FNV32_BASIS));
	n = cni_pi_list(node, &pods);
	for (int i = 0; i < n; i++) {
		bool keep = false;
		json_t *it;
		size_t j;

		if (strncmp(pods[i].attach_id, prefix, strlen(prefix)))
			continue;
		json_array_foreach(valid, j, it) {
			struct cni_env v = {
				.container_id = json_string_value(json_object_get(it, "containerID")),
				.ifname = json_string_value(json_object_get(it, "ifname")),
			};

			if (!v.container_id || !v.ifname)
				continue;
			make_attach_id(&v, conf->name);
			if (!strcmp(v.attach_id, pods[i].attach_id))
				keep = true;
		}
		if (keep)
			continue;
		cni_log(PI_LOG_INFO, "gc: removing pod %s (%s)", pods[i].name,
			pods[i].attach_id);
		err = cni_pi_del(node, pods[i].name);
		if (err && err != -ESRCH)
			cni_log(PI_LOG_WARN, "gc: cannot remove pod %s: %s",
				pods[i].name, strerror(-err));
	}
	free(pods);
	cni_pi_close(node);
	if (n < 0)
		return pi_fail(e, n, "cannot list the node's pods", conf);
	return 0;
}

static int cmd_version(json_t *root)
{
	const char *v = json_string_value(json_object_get(root, "cniVersion"));
	json_t *list = json_array(), *o;
	int err;

	for (size_t i = 0; i < sizeof(supported_versions) / sizeof(*supported_versions); i++)
		json_array_append_new(list, json_string(supported_versions[i]));
	o = json_pack("{s:s, s:o}", "cniVersion",
		      v && version_supported(v) ? v : "1.0.0",
		      "supportedVersions", list);
	err = print_json(o);
	json_decref(o);
	return err ? 1 : 0;
}

/* ---- main ------------------------------------------------------------- */

int main(int argc, char **argv)
{
	struct cni_env env = {};
	struct cni_conf conf = {};
	struct cni_err e = {};
	json_t *root = NULL;
	const char *version = NULL;
	int ret;

	if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
			 !strcmp(argv[1], "version"))) {
		fprintf(stderr, "podinject-cni: a CNI plugin (CNI spec 0.3.0-1.1.0): run by a container runtime, with CNI_COMMAND in the environment and the network config on stdin\n");
		return 0;
	}
	cni_backend_init();
	env.command = getenv("CNI_COMMAND");
	if (!env.command || !*env.command) {
		cni_fail(&e, CNI_ERR_ENV, "CNI_COMMAND is missing", NULL);
		return print_error(NULL, &e);
	}
	log_cmd = env.command;
	if (!strcmp(env.command, "VERSION")) {
		/* VERSION may come with an empty stdin, or none. */
		json_t *r = isatty(0) ? NULL : json_loadf(stdin, 0, NULL);

		ret = cmd_version(r);
		json_decref(r);
		return ret;
	}
	if (strcmp(env.command, "ADD") && strcmp(env.command, "DEL") &&
	    strcmp(env.command, "CHECK") && strcmp(env.command, "STATUS") &&
	    strcmp(env.command, "GC")) {
		cni_fail(&e, CNI_ERR_ENV, "unknown CNI_COMMAND",
			 "'%s': ADD, DEL, CHECK, VERSION, STATUS or GC", env.command);
		return print_error(NULL, &e);
	}
	if (read_stdin(&root, &e))
		goto err;
	version = json_string_value(json_object_get(root, "cniVersion"));
	if (parse_conf(root, &conf, &e)) {
		open_log(&conf);
		goto err;
	}
	open_log(&conf);
	if (read_env(&env, &e))
		goto err;
	log_cid = env.container_id ? env.container_id : "";
	if (env.container_id && env.ifname)
		make_attach_id(&env, conf.name);
	if (!strcmp(env.command, "ADD")) {
		cni_log(PI_LOG_DEBUG, "ADD pod %s netns %s ifname %s", env.pod_name,
			env.netns, env.ifname);
		ret = conf.mode == CNI_MODE_MAIN ? cmd_add_main(&conf, &env, &e) :
						   cmd_add_chained(&conf, &env, &e);
	} else if (!strcmp(env.command, "DEL")) {
		ret = cmd_del(&conf, &env, &e);
	} else if (!strcmp(env.command, "CHECK")) {
		ret = cmd_check(&conf, &env, &e);
	} else if (!strcmp(env.command, "GC")) {
		ret = cmd_gc(&conf, &e);
	} else {
		ret = 0;	/* STATUS: ready; a node is made when needed */
	}
	if (ret)
		goto err;
	json_decref(root);
	return 0;
err:
	ret = print_error(version && version_supported(version) ? version : NULL, &e);
	json_decref(root);
	return ret;
}
