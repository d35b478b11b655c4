/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The network config the runtime gives on stdin: versions, podinject's
 * own keys (mode, node, attach, xdp, timeouts, logging), prevResult and
 * ipam. Every value is checked here, before a command touches anything.
 */
#include <stdio.h>
#include <string.h>
#include "cni.h"

#define CNI_DEFAULT_NODE	"cni"

const char *const cni_versions[] = {
	"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0",
};
const int cni_nversions = sizeof(cni_versions) / sizeof(*cni_versions);

bool cni_version_supported(const char *v)
{
	for (int i = 0; i < cni_nversions; i++)
		if (!strcmp(v, cni_versions[i]))
			return true;
	return false;
}

bool cni_version_at_least(const char *v, const char *since)
{
	int a = -1, b = -1;

	/* both are among cni_versions, in order */
	for (int i = 0; i < cni_nversions; i++) {
		if (!strcmp(v, cni_versions[i]))
			a = i;
		if (!strcmp(since, cni_versions[i]))
			b = i;
	}
	return a >= 0 && b >= 0 && a >= b;
}

bool cni_version_is_v04_or_older(const char *v)
{
	return !strncmp(v, "0.", 2);
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

/* A string member that must be one of names[0..n-1]: *out is its index,
 * 0 when the member is absent. */
static int get_choice(json_t *o, const char *key, const char *const *names,
		      int n, int *out, struct cni_err *e)
{
	char list[64] = "";
	const char *s;

	*out = 0;
	if (get_str(o, key, &s, e))
		return -1;
	if (!s)
		return 0;
	for (int i = 0; i < n; i++) {
		if (!strcmp(s, names[i])) {
			*out = i;
			return 0;
		}
		snprintf(list + strlen(list), sizeof(list) - strlen(list),
			 "%s%s", !i ? "" : i < n - 1 ? ", " : " or ", names[i]);
	}
	return cni_fail(e, CNI_ERR_CONFIG, "invalid network config",
			"%s '%s': %s", key, s, list);
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

int cni_read_stdin(json_t **root, struct cni_err *e)
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

/* By enum cni_mode and enum pi_attach_choice. */
static const char *const mode_names[] = { "chained", "main" };
static const char *const attach_names[] = { "auto", "tcx", "clsact" };
static const char *const datapath_names[] = { "reference", "none" };

int cni_parse_conf(json_t *root, struct cni_conf *c, struct cni_err *e)
{
	const char *s;
	int choice;
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
		c->log_level = cni_log_level_parse(s);
		if (c->log_level < 0)
			return cni_fail(e, CNI_ERR_CONFIG, "invalid network config",
					"logLevel '%s': error, warn, info or debug", s);
	}
	if (!cni_version_supported(c->cni_version))
		return cni_fail(e, CNI_ERR_VERSION, "incompatible CNI version",
				"config version %s; supported: 0.3.0 0.3.1 0.4.0 1.0.0 1.1.0",
				c->cni_version);
	if (get_str(root, "name", &c->name, e) ||
	    get_str(root, "type", &c->type, e))
		return -1;
	if (!c->name || !*c->name)
		return cni_fail(e, CNI_ERR_CONFIG, "invalid network config",
				"name is missing");
	if (get_choice(root, "mode", mode_names, CNI_MODE_MAIN + 1, &choice, e))
		return -1;
	c->mode = choice;
	if (get_str(root, "node", &s, e))
		return -1;
	if (s) {
		/* the library's own rule: a name it would refuse fails
		 * every command, the DEL that must not fail among them */
		if (!pi_valid_name(s, PI_NODE_NAME_MAX))
			return cni_fail(e, CNI_ERR_CONFIG, "invalid network config",
					"node '%s': 1-%d of a-z 0-9 -, not first", s,
					PI_NODE_NAME_MAX);
		c->node = s;
	}
	if (get_choice(root, "attach", attach_names, PI_ATTACH_FORCE_CLSACT + 1,
		       &choice, e))
		return -1;
	c->attach = choice;
	/* Whether chained pods get the reference datapath: "reference" (the
	 * default) beside plugins that route without checking what a pod
	 * sends (ptp, bridge: it is the pods' only source check and
	 * policy), "none" beside one that is a datapath itself (Cilium),
	 * where it would do the same work twice (docs/datapath.md). */
	if (get_choice(root, "datapath", datapath_names, 2, &choice, e))
		return -1;
	c->no_datapath = choice == 1;
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
	if (c->mode == CNI_MODE_MAIN && c->no_datapath)
		return cni_fail(e, CNI_ERR_CONFIG, "invalid network config",
				"\"datapath\": \"none\" is for a chained podinject: in main mode podinject makes the pod's network and is its datapath");
	if (c->mode == CNI_MODE_CHAINED && c->ipam)
		return cni_fail(e, CNI_ERR_FIELD, "unsupported field in network config",
				"ipam: a chained podinject takes the addresses from prevResult; set \"mode\": \"main\"");
	return 0;
}
