/* SPDX-License-Identifier: GPL-2.0 */
/*
 * GC (spec 1.1): removes this network's attachments that are not in
 * cni.dev/valid-attachments, which must be there and well formed. In main
 * mode the addresses go with them: a removed pod's address is given back
 * (IPAM DEL of its attachment, as its DEL would have), and GC is passed
 * on to the IPAM plugin for the leases no pod record names.
 */
#include <errno.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>
#include "cni.h"

/* Whether the attachment id `id` (of this network: its prefix, of the
 * current form or the legacy one) is named by the list. */
static bool listed(const struct cni_conf *conf, json_t *valid, const char *id)
{
	bool legacy = cni_attach_id_is_legacy(id);
	json_t *it;
	size_t j;

	json_array_foreach(valid, j, it) {
		struct cni_env v = {
			.container_id = json_string_value(json_object_get(it, "containerID")),
			.ifname = json_string_value(json_object_get(it, "ifname")),
		};

		cni_make_attach_id(&v, conf->name);
		if (!strcmp(legacy ? v.attach_id_legacy : v.attach_id, id))
			return true;
	}
	return false;
}

/* Gives back the address of a main-mode pod GC removes, before its
 * record goes: IPAM DEL of its attachment, the container id and interface
 * read from its id (`PREFIX<hash>:<cid>:<ifname>`; none holds a ':').
 * False when the record is to stay for the next GC to try again (the DEL
 * failed); a plugin that cannot take this config's version at all, or an
 * id whose container id was hashed, leaves the lease to the IPAM plugin,
 * and the record goes. */
static bool release_address(const struct cni_conf *conf,
			    const struct cni_env *env, const char *id)
{
	char cid[PI_ATTACH_ID_MAX], *ifname;
	const char *after = strchr(id + strlen(CNI_ATTACH_PREFIX), ':');
	struct cni_env del = *env;
	struct cni_err e;

	snprintf(cid, sizeof(cid), "%s", after ? after + 1 : "#");
	ifname = strchr(cid, ':');
	if (cid[0] == '#' || !ifname) {
		cni_log(PI_LOG_INFO, "gc: the container id of %s is not kept; its address is left to the IPAM plugin's GC",
			id);
		return true;
	}
	*ifname++ = '\0';
	del.container_id = cid;
	del.ifname = ifname;
	if (!cni_ipam_exec(conf, &del, "DEL", NULL, &e))
		return true;
	if (e.code == CNI_ERR_IPAM && e.ipam_code == CNI_ERR_VERSION) {
		cni_log(PI_LOG_WARN, "gc: the IPAM plugin cannot give back the address of %s at this version: %s",
			id, e.details);
		return true;
	}
	cni_log(PI_LOG_WARN, "gc: cannot give back the address of %s, kept for the next GC: %s: %s",
		id, e.msg, e.details);
	return false;
}

/* Whether the IPAM plugin speaks CNI 1.1.0, where GC is (its VERSION). */
static bool ipam_has_gc(const struct cni_conf *conf, const struct cni_env *env)
{
	json_t *res = NULL, *it;
	struct cni_err e;
	bool has = false;
	size_t j;

	if (cni_ipam_exec(conf, env, "VERSION", &res, &e)) {
		cni_log(PI_LOG_WARN, "gc: cannot ask the IPAM plugin its versions: %s: %s",
			e.msg, e.details);
		return false;
	}
	json_array_foreach(json_object_get(res, "supportedVersions"), j, it)
		if (json_is_string(it) && !strcmp(json_string_value(it), "1.1.0"))
			has = true;
	json_decref(res);
	return has;
}

/* GC passed on to the IPAM plugin, with the same list. A plugin older
 * than GC (Debian's host-local 1.1.1) has nothing to collect: not an
 * error, and not asked (it would take GC for a command without its
 * container). */
static int ipam_gc(const struct cni_conf *conf, const struct cni_env *env,
		   struct cni_err *e)
{
	struct cni_env gc = *env;

	gc.container_id = NULL;
	gc.ifname = NULL;
	if (!ipam_has_gc(conf, &gc)) {
		cni_log(PI_LOG_INFO, "gc: the IPAM plugin does not take GC (no CNI 1.1.0)");
		return 0;
	}
	return cni_ipam_exec(conf, &gc, "GC", NULL, e) ? -1 : 0;
}

/* Whether GC may take this record of the plugin's legacy form: its
 * prefix is an FNV-1a of 32 bits of the network's name, which another
 * network's name may share (and a tenant's may be made to), so it is not
 * known to be this network's. Only one whose device is gone goes (as a
 * DEL's sweep takes it, whatever its network): one whose device is there
 * may be another network's pod, and waits for its DEL. */
static bool legacy_may_go(struct pi_node *node, const struct pi_pod_info *p)
{
	char name[IF_NAMESIZE];

	if (cni_node_is_here(node) &&
	    (!if_indextoname(p->ifindex, name) || strcmp(name, p->hostdev)))
		return true;
	cni_log(PI_LOG_WARN, "gc: pod %s (%s) is of an id an earlier podinject made, which may be another network's; its device is there: kept for its DEL",
		p->name, p->attach_id);
	return false;
}

/* This network's attachments on the node that the list does not name:
 * their ids, into *gone (to free). */
static int unlisted(struct pi_node *node, const struct cni_conf *conf,
		    json_t *valid, char ***gone)
{
	struct pi_pod_info *pods = NULL;
	char prefix[CNI_PREFIX_MAX], legacy[CNI_PREFIX_MAX];
	int n, k = 0;

	*gone = NULL;
	cni_attach_prefix(conf->name, prefix, sizeof(prefix));
	cni_attach_prefix_legacy(conf->name, legacy, sizeof(legacy));
	n = pi_pod_list(node, &pods);
	if (n <= 0)
		return n;
	*gone = calloc(n, sizeof(**gone));
	if (!*gone) {
		free(pods);
		return -ENOMEM;
	}
	for (int i = 0; i < n; i++) {
		const char *id = pods[i].attach_id;
		bool old = !strncmp(id, legacy, strlen(legacy));

		if ((!old && strncmp(id, prefix, strlen(prefix))) ||
		    listed(conf, valid, id) ||
		    (old && !legacy_may_go(node, &pods[i])))
			continue;
		(*gone)[k] = strdup(id);
		if (!(*gone)[k]) {
			while (k--)
				free((*gone)[k]);
			free(*gone);
			*gone = NULL;
			free(pods);
			return -ENOMEM;
		}
		k++;
	}
	free(pods);
	return k;
}

int cni_cmd_gc(const struct cni_conf *conf, const struct cni_env *env,
	       struct cni_err *e)
{
	json_t *valid = json_object_get(conf->root, "cni.dev/valid-attachments");
	bool main_mode = conf->mode == CNI_MODE_MAIN;
	struct pi_node *node = NULL;
	char **gone = NULL;
	int n, err, ret = 0;
	json_t *it;
	size_t j;

	/* What is kept is what the list names, so a list that is missing
	 * (the runtime must send it) or names an attachment unreadably
	 * would remove pods that are still in use: refused, nothing done. */
	if (!valid)
		return cni_fail(e, CNI_ERR_CONFIG, "invalid network config",
				"GC needs cni.dev/valid-attachments (the runtime sends the attachments still in use)");
	if (!json_is_array(valid))
		return cni_fail(e, CNI_ERR_CONFIG, "invalid network config",
				"cni.dev/valid-attachments must be an array");
	json_array_foreach(valid, j, it)
		if (!json_is_string(json_object_get(it, "containerID")) ||
		    !json_is_string(json_object_get(it, "ifname")))
			return cni_fail(e, CNI_ERR_CONFIG, "invalid network config",
					"each of cni.dev/valid-attachments needs containerID and ifname strings");
	err = cni_pi_open(conf, false, &node);
	cni_step("node");
	if (err == -ENOENT)
		return main_mode ? ipam_gc(conf, env, e) : 0;
	if (err)
		return cni_pi_open_fail(e, err, conf);
	n = unlisted(node, conf, valid, &gone);
	/* Main mode: each address is given back before its record goes
	 * (the record is what names the lease), with the node's lock let
	 * go: IPAM runs as long as it takes. */
	if (main_mode && n > 0) {
		pi_node_close(node);
		node = NULL;
		for (int i = 0; i < n; i++)
			if (!release_address(conf, env, gone[i])) {
				free(gone[i]);
				gone[i] = NULL;
			}
		cni_step("ipam-del");
		err = cni_pi_open(conf, false, &node);
		if (err) {
			ret = err == -ENOENT ? 0 : cni_pi_open_fail(e, err, conf);
			goto out;
		}
	}
	for (int i = 0; i < n; i++) {
		struct pi_pod_info pod;

		if (!gone[i] || pi_pod_get_by_attach_id(node, gone[i], &pod))
			continue;
		cni_log(PI_LOG_INFO, "gc: removing pod %s (%s)", pod.name,
			pod.attach_id);
		err = pi_pod_del(node, pod.name);
		if (err && err != -ESRCH)
			cni_log(PI_LOG_WARN, "gc: cannot remove pod %s: %s",
				pod.name, strerror(-err));
	}
	cni_step("gc");
out:
	pi_node_close(node);
	cni_step("close");
	for (int i = 0; i < n; i++)
		free(gone[i]);
	free(gone);
	if (ret)
		return ret;
	if (n < 0)
		return cni_pi_fail(e, n, "cannot list the node's pods", conf);
	if (main_mode) {
		err = ipam_gc(conf, env, e);
		cni_step("ipam");
		return err;
	}
	return 0;
}
