/* SPDX-License-Identifier: GPL-2.0 */
/*
 * CHECK: the pod is attached, its programs are in place, its interface
 * is still the device they are on, and it holds prevResult's addresses;
 * in main mode, the pod's side is still as podinject made it.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <netinet/in.h>
#include "cni.h"

/* "A.B.C.D X::Y", what the pod holds, for an error's details. */
static const char *pod_addresses(const struct pi_pod_info *pod)
{
	static char buf[2 * INET6_ADDRSTRLEN + 2];
	char a4[INET6_ADDRSTRLEN] = "", a6[INET6_ADDRSTRLEN] = "";
	struct pi_addr v4 = { .a = { pod->ip4 } }, v6;

	memcpy(v6.a, pod->ip6, sizeof(v6.a));
	if (pod->flags & PI_POD_HAS_V4)
		pi_fmt_addr(AF_INET, &v4, -1, a4, sizeof(a4));
	if (pod->flags & PI_POD_HAS_V6)
		pi_fmt_addr(AF_INET6, &v6, -1, a6, sizeof(a6));
	snprintf(buf, sizeof(buf), "%s%s%s", a4, *a4 && *a6 ? " " : "", a6);
	return buf;
}

int cni_cmd_check(const struct cni_conf *conf, struct cni_env *env,
		  struct cni_err *e)
{
	struct pi_node *node = NULL;
	struct pi_pod_info pod;
	struct cni_pair pair;
	int err, ret = -1;

	if (!conf->prev_result)
		return cni_fail(e, CNI_ERR_CONFIG, "CHECK needs prevResult", NULL);
	err = cni_pi_open(conf, false, &node);
	cni_step("node");
	if (err == -ENOENT)
		return cni_fail(e, CNI_ERR_CHECK, "podinject node is not up",
				"node %s", conf->node);
	if (err)
		return cni_pi_open_fail(e, err, conf);
	err = cni_pod_of_attachment(node, env, &pod);
	if (err == -ESRCH) {
		cni_fail(e, CNI_ERR_CHECK, "pod is not attached to podinject",
			 "no pod of attachment %s on node %s", env->attach_id,
			 conf->node);
		goto out;
	}
	if (err) {
		cni_pi_fail(e, err, "cannot read the node's pods", conf);
		goto out;
	}
	err = pi_pod_check(node, &pod);
	if (err) {
		cni_fail(e, CNI_ERR_CHECK, "pod's podinject programs are missing",
			 "pod %s on %s: %s", pod.name, pod.hostdev,
			 strerror(-err));
		goto out;
	}
	if (cni_pod_pair(env, &pair, e))
		goto out;
	if ((uint32_t)pair.host_ifindex != pod.ifindex) {
		cni_fail(e, CNI_ERR_CHECK, "pod's interface is not the device podinject attached to",
			 "%s's peer is %s (ifindex %d), pod %s is on %s (ifindex %u)",
			 env->ifname, pair.host_name, pair.host_ifindex,
			 pod.name, pod.hostdev, pod.ifindex);
		goto out;
	}
	/* The spec's CHECK consults prevResult: an address it gives that the
	 * pod does not hold is one the source check drops. */
	switch (cni_prev_matches(conf->prev_result, env->ifname, &pod, e)) {
	case -1:
		goto out;
	case 0:
		cni_fail(e, CNI_ERR_CHECK, "pod's addresses are not prevResult's",
			 "pod %s holds %s", pod.name, pod_addresses(&pod));
		goto out;
	}
	ret = 0;
out:
	cni_step("check");
	/* Main mode made the pod's side of the pair: the runtime's CHECK
	 * asks whether it is still as made (the spec: the interface, its
	 * addresses, its routes), as ptp's CHECK does. */
	if (!ret && conf->mode == CNI_MODE_MAIN) {
		if (cni_pod_side_check(env, &pair, &pod, e))
			ret = -1;
		cni_step("pod");
	}
	pi_node_close(node);
	cni_step("close");
	if (!ret && conf->mode == CNI_MODE_MAIN) {
		if (cni_ipam_exec(conf, env, "CHECK", NULL, e))
			ret = -1;
		cni_step("ipam");
	}
	return ret;
}
