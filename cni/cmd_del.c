/* SPDX-License-Identifier: GPL-2.0 */
/*
 * DEL: succeeds whenever nothing of the attachment is left. The
 * attachment is the pod's attach_id in the node, so DEL needs neither
 * CNI_NETNS nor prevResult. On a node it can use, it also removes the
 * records that earlier DELs could not.
 */
#include <errno.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include "cni.h"

/* Whether the kernel says that no device has this ifindex (in the
 * plugin's namespace, the node's). Any other answer, or none, is "not
 * known to be gone". */
static bool no_device(int sock, uint32_t ifindex)
{
	struct ifreq ifr = { .ifr_ifindex = (int)ifindex };

	return ioctl(sock, SIOCGIFNAME, &ifr) && errno == ENODEV;
}

/* The plugin's records whose DEL removed nothing: a DEL answered while
 * the node was another build's (the plugin in place during the install
 * step, which upgrades the node before it puts this plugin in place;
 * an older plugin on a node it refuses), or a pod whose namespace the
 * runtime deleted without a DEL. Their devices are gone, and with them
 * the pod's datapath, but the records kept the pod's name, addresses,
 * rules, grants and metrics until a new pod needed the name or an
 * address. Only records with the plugin's attachment prefix whose
 * ifindex no device has go: a `pod add` or `pod adopt` record is its
 * owner's, and a device there under another name is not known to be
 * gone. No address is given back here: the DEL that was answered gave
 * its own back, and a lease whose DEL never came is the IPAM plugin's
 * GC's. A record that cannot be removed now is tried again by the next
 * DEL. */
static void sweep_leftovers(struct pi_node *node)
{
	struct pi_pod_info *pods = NULL;
	int n, sock, err;

	if (!cni_node_is_here(node))
		return;
	sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (sock < 0)
		return;
	n = pi_pod_list(node, &pods);
	for (int i = 0; i < n; i++) {
		const struct pi_pod_info *p = &pods[i];

		if (strncmp(p->attach_id, CNI_ATTACH_PREFIX,
			    strlen(CNI_ATTACH_PREFIX)) ||
		    !no_device(sock, p->ifindex))
			continue;
		err = pi_pod_del(node, p->name);
		if (err && err != -ESRCH)
			cni_log(PI_LOG_WARN, "cannot remove pod %s of attachment %s, whose device is gone: %s",
				p->name, p->attach_id, strerror(-err));
		else
			cni_log(PI_LOG_WARN, "pod %s of attachment %s had lost its device without a DEL that removed it; removed",
				p->name, p->attach_id);
	}
	free(pods);
	close(sock);
}

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
	} else if ((err = cni_pod_of_attachment(node, env, &pod)) == -ESRCH) {
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
	if (node && !ret)
		sweep_leftovers(node);
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
