/* SPDX-License-Identifier: GPL-2.0 */
/*
 * DEL: succeeds whenever nothing of the attachment is left. The
 * attachment is the pod's attach_id in the node, so DEL needs neither
 * CNI_NETNS nor prevResult.
 */
#include <errno.h>
#include "cni.h"

int cni_cmd_del(const struct cni_conf *conf, struct cni_env *env,
		struct cni_err *e)
{
	struct pi_node *node = NULL;
	struct pi_pod_info pod;
	int err, ret = 0;

	err = cni_pi_open(conf, false, &node);
	cni_step("node");
	if (err == -ENOENT) {
		cni_log(PI_LOG_INFO, "node %s is not up: nothing to remove", conf->node);
	} else if (err == -EPROTO) {
		/* Its programs go with the pod's device; the node needs an
		 * operator, not a blocked pod deletion. */
		cni_log(PI_LOG_WARN, "node %s was made by another build; leaving attachment %s to it",
			conf->node, env->attach_id);
	} else if (err) {
		return cni_pi_open_fail(e, err, conf);
	} else if ((err = pi_pod_get_by_attach_id(node, env->attach_id,
						  &pod)) == -ESRCH) {
		cni_log(PI_LOG_INFO, "no pod of attachment %s: nothing to remove",
			env->attach_id);
	} else if (err) {
		/* Not "nothing to remove": the runtime tries again. */
		ret = cni_pi_fail(e, err, "cannot read the node's pods", conf);
	} else {
		err = pi_pod_del(node, pod.name);
		if (err && err != -ESRCH) {
			ret = cni_pi_fail(e, err, "cannot remove the pod", conf);
		} else {
			cni_log(PI_LOG_INFO, "pod %s removed from node %s",
				pod.name, conf->node);
		}
	}
	cni_step("del");
	pi_node_close(node);
	cni_step("close");
	if (!ret && conf->mode == CNI_MODE_MAIN) {
		if (cni_ipam_exec(conf, env, "DEL", NULL, e))
			ret = -1;
		cni_step("ipam");
	}
	return ret;
}
