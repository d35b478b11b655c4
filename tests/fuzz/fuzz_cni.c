/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Fuzzer of the CNI plugin's input: the network config on stdin (with
 * prevResult) and the CNI_* environment (CNI_ARGS too), through the
 * plugin's own functions: linked with the plugin's config, environment,
 * result, log and VERSION parts (cni/conf.c env.c result.c log.c
 * cmd_version.c), not its main or other commands.
 * Parsing and validation only: no command runs, nothing of ADD's side
 * effects (no node, no device, no IPAM plugin, no log file).
 *
 * Input: a command byte, then CNI_CONTAINERID, CNI_IFNAME, CNI_NETNS and
 * CNI_ARGS, each ended by a NUL (a variable the input ends before is
 * unset), then the config's bytes.
 *
 * Properties: what is accepted is within the spec's and podinject's
 * bounds (version, names, ids, pod name, lock timeout, mode and ipam,
 * the addresses taken from prevResult); a refusal carries a code of its
 * class; the error object and VERSION's answer printed on stdout are one
 * JSON object a runtime can read, whatever the input's bytes were.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include "cni.h"

#define CHECK(cond, ...)						\
	do {								\
		if (!(cond)) {						\
			fprintf(stderr, "fuzz_cni: " __VA_ARGS__);	\
			fprintf(stderr, " (%s)\n", #cond);		\
			abort();					\
		}							\
	} while (0)

static const char *const commands[] = {
	"ADD", "DEL", "CHECK", "GC", "STATUS", "VERSION", "add", "",
};
static const char *const vars[] = {
	"CNI_CONTAINERID", "CNI_IFNAME", "CNI_NETNS", "CNI_ARGS",
};
static char env_buf[4][8192];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	/* the plugin's logs: not to the fuzzer's terminal */
	cni_log_to(fopen("/dev/null", "we"), PI_LOG_DEBUG);
	return 0;
}

/* Runs fn with stdout captured; returns what it printed (malloc'd). */
static char *captured(int (*fn)(void *), void *arg, int *ret)
{
	FILE *saved = stdout, *mem;
	char *buf = NULL;
	size_t len = 0;

	mem = open_memstream(&buf, &len);
	assert(mem);
	stdout = mem;
	*ret = fn(arg);
	stdout = saved;
	fclose(mem);
	return buf;
}

struct err_call {
	const char *version;
	const struct cni_err *e;
};

static int call_print_error(void *arg)
{
	struct err_call *c = arg;

	return cni_print_error(c->version, c->e);
}

static int call_version(void *arg)
{
	return cni_cmd_version(arg);
}

/* One line, one JSON object: what libcni reads back. */
static json_t *one_object(const char *out, const char *what)
{
	size_t n = strlen(out);
	json_error_t jerr;
	json_t *o;

	CHECK(n && out[n - 1] == '\n' && !memchr(out, '\n', n - 1),
	      "%s is not one line: '%s'", what, out);
	o = json_loads(out, JSON_REJECT_DUPLICATES, &jerr);
	CHECK(o && json_is_object(o), "%s is no JSON object: %s: '%s'", what,
	      jerr.text, out);
	return o;
}

static void check_error_output(const char *version, const struct cni_err *e)
{
	struct err_call c = { version, e };
	json_t *o, *code;
	char *out;
	int ret;

	out = captured(call_print_error, &c, &ret);
	CHECK(ret == 1, "print_error returned %d", ret);
	o = one_object(out, "the error object");
	code = json_object_get(o, "code");
	CHECK(json_is_integer(code) && json_integer_value(code) == e->code,
	      "the error object's code is not %d: %s", e->code, out);
	CHECK(json_is_string(json_object_get(o, "msg")),
	      "the error object has no msg: %s", out);
	CHECK(cni_version_supported(json_string_value(json_object_get(o, "cniVersion"))),
	      "the error object's cniVersion: %s", out);
	json_decref(o);
	free(out);
}

static void check_version_output(json_t *root)
{
	const char *v;
	char *out;
	json_t *o;
	int ret;

	out = captured(call_version, root, &ret);
	CHECK(ret == 0, "VERSION failed");
	o = one_object(out, "VERSION's answer");
	v = json_string_value(json_object_get(o, "cniVersion"));
	CHECK(v && cni_version_supported(v), "VERSION answers version '%s'", v);
	CHECK(json_array_size(json_object_get(o, "supportedVersions")) ==
	      (size_t)cni_nversions,
	      "VERSION's supportedVersions");
	json_decref(o);
	free(out);
}

static void check_conf(const struct cni_conf *c)
{
	CHECK(c->cni_version && cni_version_supported(c->cni_version),
	      "accepted cniVersion '%s'", c->cni_version);
	CHECK(c->name && *c->name, "accepted a config without a name");
	CHECK(pi_valid_name(c->node, PI_NODE_NAME_MAX),
	      "accepted node name '%s'", c->node);
	CHECK(c->lock_timeout_ms >= 0 && c->lock_timeout_ms <= 3600 * 1000,
	      "accepted lockTimeoutMs %d", c->lock_timeout_ms);
	CHECK(c->ipam_timeout_ms >= 1 && c->ipam_timeout_ms <= 3600 * 1000,
	      "accepted ipamTimeoutMs %d", c->ipam_timeout_ms);
	CHECK(c->mode == CNI_MODE_MAIN ? c->ipam != NULL : c->ipam == NULL,
	      "mode %d with%s ipam", c->mode, c->ipam ? "" : "out");
	CHECK(!c->prev_result || json_is_object(c->prev_result),
	      "prevResult that is no object");
	CHECK(c->log_level >= -1 && c->log_level <= PI_LOG_DEBUG,
	      "log level %d", c->log_level);
	CHECK(c->attach == PI_ATTACH_AUTO || c->attach == PI_ATTACH_FORCE_TCX ||
	      c->attach == PI_ATTACH_FORCE_CLSACT, "attach %d", c->attach);
}

static void check_env(const struct cni_env *env, const char *net)
{
	size_t n;

	CHECK(cni_valid_container_id(env->container_id), "container id '%s'",
	      env->container_id);
	CHECK(cni_valid_ifname(env->ifname), "ifname '%s'", env->ifname);
	CHECK(strlen(env->pod_name) <= PI_POD_NAME_MAX &&
	      pi_valid_pod_name(env->pod_name),
	      "pod name '%s' from container '%s' args '%s'", env->pod_name,
	      env->container_id, env->args ? env->args : "");
	/* the attachment is (network, container, interface): its id ends
	 * with the interface, and is whole */
	n = strlen(env->attach_id);
	CHECK(n < sizeof(env->attach_id) && !strncmp(env->attach_id, CNI_ATTACH_PREFIX, 4),
	      "attach id '%s'", env->attach_id);
	CHECK(n > strlen(env->ifname) &&
	      !strcmp(env->attach_id + n - strlen(env->ifname), env->ifname) &&
	      env->attach_id[n - strlen(env->ifname) - 1] == ':',
	      "attach id '%s' does not end with ifname '%s'", env->attach_id,
	      env->ifname);
}

static void check_prev(json_t *prev, const char *ifname)
{
	struct pi_addr ip4 = {}, ip6 = {};
	struct cni_err e = {};
	bool has4 = true, has6 = true;
	int pod_if = cni_prev_pod_iface(prev, ifname);
	int host = cni_prev_has_host_iface(prev, "veth0");

	CHECK(pod_if >= -1 && (pod_if < 0 ||
	      (size_t)pod_if < json_array_size(json_object_get(prev, "interfaces"))),
	      "pod interface index %d", pod_if);
	CHECK(host >= -1 && host <= 1, "host interface answer %d", host);
	/* one address of each family asked for, or not: both, by the input */
	if (cni_prev_addresses(prev, pod_if, json_array_size(json_object_get(prev, "ips")) & 1,
			       &ip4, &has4, &ip6, &has6, &e)) {
		CHECK(e.code == CNI_ERR_CONFIG, "prevResult error code %d", e.code);
		check_error_output("1.0.0", &e);
		return;
	}
	CHECK(!ip4.a[1] && !ip4.a[2] && !ip4.a[3],
	      "an IPv4 address of prevResult beyond its 4 bytes");
	if (!has4)
		CHECK(!ip4.a[0], "an IPv4 address written without has4");
	if (!has6)
		CHECK(!(ip6.a[0] | ip6.a[1] | ip6.a[2] | ip6.a[3]),
		      "an IPv6 address written without has6");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *cmd, *version;
	struct cni_env env = {};
	struct cni_conf conf;
	struct cni_err e = {};
	json_t *root = NULL;
	size_t off = 1;
	char *copy;
	FILE *in, *saved_in = stdin;
	int ret;

	if (size < 1)
		return -1;
	copy = malloc(size + 1);
	memcpy(copy, data, size);
	copy[size] = 0;
	cmd = commands[data[0] % (sizeof(commands) / sizeof(*commands))];
	for (size_t v = 0; v < sizeof(vars) / sizeof(*vars); v++) {
		char *end = off < size ? memchr(copy + off, 0, size - off) : NULL;

		unsetenv(vars[v]);
		if (!end)
			continue;
		/* putenv of a buffer of ours: glibc's setenv keeps every
		 * value it was ever given */
		snprintf(env_buf[v], sizeof(env_buf[v]), "%s=%s", vars[v],
			 copy + off);
		putenv(env_buf[v]);
		off = end - copy + 1;
	}
	unsetenv("CNI_PATH");
	env.command = cmd;

	in = fmemopen(copy + off, size - off ? size - off : 1, "r");
	if (!in) {
		free(copy);
		return 0;
	}
	stdin = in;
	if (!strcmp(cmd, "VERSION")) {
		root = json_loadf(stdin, 0, NULL);
		check_version_output(root);
		goto out;
	}
	if (cni_read_stdin(&root, &e)) {
		CHECK(e.code == CNI_ERR_DECODE, "stdin error code %d", e.code);
		check_error_output(NULL, &e);
		goto out;
	}
	version = json_string_value(json_object_get(root, "cniVersion"));
	if (cni_parse_conf(root, &conf, &e)) {
		CHECK(e.code == CNI_ERR_CONFIG || e.code == CNI_ERR_VERSION ||
		      e.code == CNI_ERR_FIELD, "config error code %d", e.code);
		check_error_output(version && cni_version_supported(version) ?
				   version : NULL, &e);
		goto out;
	}
	check_conf(&conf);
	ret = cni_read_env(&env, &e);
	if (ret) {
		CHECK(e.code == CNI_ERR_ENV, "environment error code %d", e.code);
		check_error_output(conf.cni_version, &e);
		goto out;
	}
	if (env.container_id && env.ifname)
		cni_make_attach_id(&env, conf.name);
	if (!strcmp(cmd, "ADD") || !strcmp(cmd, "DEL") || !strcmp(cmd, "CHECK")) {
		char hostdev[16];

		check_env(&env, conf.name);
		cni_main_hostdev(&env, hostdev, sizeof(hostdev));
		CHECK(cni_valid_ifname(hostdev) && strlen(hostdev) == 13,
		      "host device name '%s'", hostdev);
	}
	if (conf.prev_result)
		check_prev(conf.prev_result, env.ifname ? env.ifname : "eth0");
out:
	stdin = saved_in;
	fclose(in);
	json_decref(root);
	free(copy);
	return 0;
}
