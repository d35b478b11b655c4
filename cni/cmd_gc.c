/* SPDX-License-Identifier: GPL-2.0 */
/*
 * GC (spec 1.1): removes this network's attachments that are not in
 * cni.dev/valid-attachments, which must be there and well formed.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "cni.h"

int cni_cmd_gc(const struct cni_conf *conf, struct cni_err *e)
{
	json_t *valid = json_object_get(conf->root, "cni.dev/valid-attachments");
	struct pi_pod_info *pods = NULL;
	struct pi_node *node = NULL;
	char prefix[32];
	int n, err;

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
		return 0;
	if (err)
		return cni_pi_open_fail(e, err, conf);
	cni_attach_prefix(conf->name, prefix, sizeof(prefix));
	n = pi_pod_list(node, &pods);
	for (int i = 0; i < n; i++) {
		bool keep = false;

		if (strncmp(pods[i].attach_id, prefix, strlen(prefix)))
			continue;
		json_array_foreach(valid, j, it) {
			struct cni_env v = {
				.container_id = json_string_value(json_object_get(it, "containerID")),
				.ifname = json_string_value(json_object_get(it, "ifname")),
			};

			cni_make_attach_id(&v, conf->name);
			if (!strcmp(v.attach_id, pods[i].attach_id))
				keep = true;
		}
		if (keep)
			continue;
		cni_log(PI_LOG_INFO, "gc: removing pod %s (%s)", pods[i].name,
			pods[i].attach_id);
		err = pi_pod_del(node, pods[i].name);
		if (err && err != -ESRCH)
			cni_log(PI_LOG_WARN, "gc: cannot remove pod %s: %s",
				pods[i].name, strerror(-err));
	}
	free(pods);
	cni_step("gc");
	pi_node_close(node);
	cni_step("close");
	if (n < 0)
		return cni_pi_fail(e, n, "cannot list the node's pods", conf);
	return 0;
}
