/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ADD. Chained (after ptp, bridge or any plugin that leaves a veth or netkit
 * pair): the pod is adopted into a podinject node that is the host's own
 * namespace and prevResult is printed through. Main: podinject makes the
 * pair in the runtime's namespace, with addresses from the IPAM plugin of
 * the config, and prints a result of its own. A failed ADD undoes what it
 * did.
 */
#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cni.h"

/* Whether the device of the record `old` is gone, or another has its
 * ifindex now. Only the plugin's namespace is looked in, so on a node
 * that is not (cni_node_is_here) no device is known to be gone. */
static bool device_gone(struct pi_node *node, const struct pi_pod_info *old)
{
	char name[IF_NAMESIZE];

	return cni_node_is_here(node) &&
	       (!if_indextoname(old->ifindex, name) ||
		strcmp(name, old->hostdev));
}

/* A record of the plugin's own that outlived its attachment, whose DEL
 * never came (a crash, a reboot, an ADD that re-adopted a pod between
 * the chain's DELs): its device is gone, or another device has its
 * ifindex now, or its programs are (the node lost them). Another's
 * record (`pod add`, `pod adopt`) is never called stale. */
static bool stale(struct pi_node *node, const struct pi_pod_info *old)
{
	if (strncmp(old->attach_id, CNI_ATTACH_PREFIX,
		    strlen(CNI_ATTACH_PREFIX)))
		return false;
	return device_gone(node, old) || pi_pod_check(node, old) != 0;
}

/* Whether `old` stands in the way of the new pod: its name, its device
 * (ifindex; 0: not known yet) or one of its addresses. */
static bool in_the_way(const struct pi_pod_info *old, const char *name,
		       uint32_t ifindex, const struct pi_addr *ip4,
		       const struct pi_addr *ip6)
{
	return !strcmp(old->name, name) ||
	       (ifindex && old->ifindex == ifindex) ||
	       (ip4 && (old->flags & PI_POD_HAS_V4) && old->ip4 == ip4->a[0]) ||
	       (ip6 && (old->flags & PI_POD_HAS_V6) &&
		!memcmp(old->ip6, ip6->a, 16));
}

/* The leftovers in the new pod's way give way; 0 when one did (the ADD
 * is tried again), -EEXIST when none was in the way or none was stale. */
static int clear_stale(struct pi_node *node, const struct cni_env *env,
		       uint32_t ifindex, const struct pi_addr *ip4,
		       const struct pi_addr *ip6)
{
	struct pi_pod_info *pods = NULL;
	int n = pi_pod_list(node, &pods), cleared = 0;

	for (int i = 0; i < n; i++) {
		const struct pi_pod_info *old = &pods[i];

		if (!in_the_way(old, env->pod_name, ifindex, ip4, ip6) ||
		    !stale(node, old))
			continue;
		cni_log(PI_LOG_WARN, "pod %s of attachment %s has lost its device; removing it",
			old->name, old->attach_id);
		if (!pi_pod_del(node, old->name))
			cleared++;
	}
	free(pods);
	return cleared ? 0 : -EEXIST;
}

/* A failed ADD's pod, made or adopted by this call, goes. */
static void undo_pod(struct pi_node *node, const struct cni_env *env)
{
	int err = pi_pod_del(node, env->pod_name);

	if (err)
		cni_log(PI_LOG_ERROR, "cannot undo pod %s: %s", env->pod_name,
			strerror(-err));
}

static int cmd_add_chained(const struct cni_conf *conf, struct cni_env *env,
			   struct cni_err *e)
{
	struct pi_addr ip4 = {}, ip6 = {};
	struct pi_pod_info pod, same;
	struct pi_node *node = NULL;
	struct cni_pair pair;
	bool has4, has6, adopted = false;
	json_t *out;
	int err, ret = -1;

	if (!conf->prev_result)
		return cni_fail(e, CNI_ERR_CONFIG, "podinject is chained but there is no prevResult",
				"list podinject after the plugin that makes the pod's devices, or set \"mode\": \"main\"");
	if (cni_pod_pair(env, &pair, e))
		return -1;
	switch (cni_prev_has_host_iface(conf->prev_result, pair.host_name)) {
	case 0:
		return cni_fail(e, CNI_ERR_DEVICE, "prevResult's host-side interfaces do not include the pod's peer",
				"%s in %s is the peer of %s", env->ifname,
				env->netns, pair.host_name);
	case -1:
		cni_log(PI_LOG_INFO, "prevResult names no host-side interface; using %s, the peer of %s",
			pair.host_name, env->ifname);
		break;
	}
	if (cni_prev_addresses(conf->prev_result,
			       cni_prev_pod_iface(conf->prev_result, env->ifname),
			       !conf->no_datapath, &ip4, &has4, &ip6, &has6, e))
		return -1;
	/* The source check would drop all it sent but link-local. Its
	 * device is not read instead: what is there may be the pod's own
	 * doing (it may be running already). */
	if (!has4 && !has6 && !conf->no_datapath)
		return cni_fail(e, CNI_ERR_CONFIG, "prevResult gives the pod no address",
				"podinject's source check takes the addresses IPAM gave the pod's interface (%s), and would drop all it sends: list podinject after the plugin that gives it one, or set \"datapath\": \"none\"",
				env->ifname);
	cni_step("pair");

	err = cni_pi_open(conf, true, &node);
	if (err)
		return cni_pi_open_fail(e, err, conf);
	cni_step("node");
	err = cni_pi_adopt(node, conf, env, pair.host_name,
			   has4 ? &ip4 : NULL, has6 ? &ip6 : NULL, &pod);
	adopted = !err;
	if (err == -EEXIST) {
		/* The runtime repeating an ADD that went through, and the
		 * pod is whole: else (a crash, the node lost its programs)
		 * its record is a leftover, and gives way below. */
		if (!cni_pod_of_attachment(node, env, &same) &&
		    same.ifindex == (uint32_t)pair.host_ifindex &&
		    cni_prev_matches(conf->prev_result, env->ifname, &same,
				     e) == 1 &&
		    !stale(node, &same)) {
			cni_log(PI_LOG_INFO, "pod %s is attached already", same.name);
			err = 0;
		} else if (!clear_stale(node, env, pair.host_ifindex,
					has4 ? &ip4 : NULL,
					has6 ? &ip6 : NULL)) {
			err = cni_pi_adopt(node, conf, env, pair.host_name,
					   has4 ? &ip4 : NULL,
					   has6 ? &ip6 : NULL, &pod);
			adopted = !err;
		}
	} else if (err == -EADDRINUSE &&
		   !clear_stale(node, env, pair.host_ifindex,
				has4 ? &ip4 : NULL, has6 ? &ip6 : NULL)) {
		err = cni_pi_adopt(node, conf, env, pair.host_name,
				   has4 ? &ip4 : NULL, has6 ? &ip6 : NULL,
				   &pod);
		adopted = !err;
	}
	cni_step("adopt");
	if (err) {
		cni_pi_fail(e, err, "cannot adopt the pod", conf);
		snprintf(e->details + strlen(e->details),
			 sizeof(e->details) - strlen(e->details),
			 " (pod %s, device %s)", env->pod_name, pair.host_name);
		goto out;
	}
	cni_log(PI_LOG_INFO, "pod %s adopted on node %s: %s <-> %s", env->pod_name,
		conf->node, pair.host_name, env->ifname);
	out = json_deep_copy(conf->prev_result);
	json_object_set_new(out, "cniVersion", json_string(conf->cni_version));
	ret = cni_print_result(out, e);
	json_decref(out);
	/* A failed ADD undoes what it did: the pod this call adopted goes
	 * (not one "attached already": an earlier ADD's, answered). */
	if (ret && adopted)
		undo_pod(node, env);
out:
	pi_node_close(node);
	cni_step("close");
	return ret;
}

/* Main mode, before IPAM runs: a repeated ADD of an attachment that is
 * up (the spec forbids it; a runtime may still send it) fails without
 * touching the pod. Asked first, host-local refuses a second address for
 * the attachment, and the DEL that undoes a failed ADD would give the
 * live pod's address back: the pod would keep an address IPAM hands to
 * the next pod. Only a record of this attachment whose device is gone is
 * a leftover: it goes, and *release says that its address is to be given
 * back before IPAM is asked again. One whose device is there is the pod
 * (its programs missing or not: the runtime's DEL, not a repeated ADD,
 * takes it down). The node is brought up here when it is not yet: the
 * ADD needs it anyway. */
static int main_prior(const struct cni_conf *conf, const struct cni_env *env,
		      bool *release, struct cni_err *e)
{
	struct pi_node *node = NULL;
	struct pi_pod_info old;
	int err, ret = 0;

	*release = false;
	err = cni_pi_open(conf, true, &node);
	if (err)
		return cni_pi_open_fail(e, err, conf);
	err = cni_pod_of_attachment(node, env, &old);
	if (err == -ESRCH)
		goto out;
	if (err) {
		ret = cni_pi_fail(e, err, "cannot read the node's pods", conf);
		goto out;
	}
	if (!device_gone(node, &old)) {
		ret = cni_fail(e, CNI_ERR_EXISTS, "the attachment is added already",
			       "pod %s (device %s) is attachment %s; DEL it before adding it again",
			       old.name, old.hostdev, env->attach_id);
		goto out;
	}
	cni_log(PI_LOG_WARN, "pod %s of attachment %s has lost its device; removing it and its address",
		old.name, old.attach_id);
	err = pi_pod_del(node, old.name);
	if (err && err != -ESRCH)
		ret = cni_pi_fail(e, err, "cannot remove the attachment's leftover", conf);
	else
		*release = true;
out:
	pi_node_close(node);
	return ret;
}

/* Whether a pod of this attachment may be up: its address is its own
 * then, and a failed ADD of the same attachment (a repeat racing the
 * first one) must not give it back. Not known (the node cannot be read):
 * it may be; the address stays, for the runtime's DEL after the failed
 * ADD to give back. */
static bool attachment_up(const struct cni_conf *conf,
			  const struct cni_env *env)
{
	struct pi_node *node = NULL;
	struct pi_pod_info pod;
	int err;
	bool up;

	err = pi_node_open(conf->node, PI_OPEN_READ, conf->lock_timeout_ms,
			   &node);
	if (err == -ENOENT)
		return false;
	if (err)
		return true;
	err = cni_pod_of_attachment(node, env, &pod);
	up = err != -ESRCH && (err || !device_gone(node, &pod));
	pi_node_close(node);
	return up;
}

/* A failed ADD gives its addresses back, unless they may be a live
 * pod's: true when they were. */
static bool ipam_undo(const struct cni_conf *conf, const struct cni_env *env)
{
	struct cni_err ignore;

	if (attachment_up(conf, env)) {
		cni_log(PI_LOG_WARN, "attachment %s may be up: its address stays",
			env->attach_id);
		return false;
	}
	if (cni_ipam_exec(conf, env, "DEL", NULL, &ignore)) {
		cni_log(PI_LOG_ERROR, "cannot undo IPAM: %s: %s", ignore.msg,
			ignore.details);
		return false;
	}
	return true;
}

/* IPAM refused the attachment's ADD (it ran and said no: not cut off or
 * timed out), and no record of it was found: a
 * DEL's sweep took its leftover (the device gone with its namespace),
 * which kept its address for the runtime's DEL. host-local refuses a
 * second address to an attachment that holds one. With no pod of the
 * attachment up, that address is nobody's: given back and asked again,
 * once (another reason to refuse, a range full, refuses again). The
 * first refusal is the answer where that DEL fails. */
static bool ipam_retry(const struct cni_conf *conf, struct cni_env *env,
		       json_t **res, struct cni_err *e)
{
	if (!ipam_undo(conf, env))
		return false;
	cni_log(PI_LOG_WARN, "attachment %s: IPAM refused it and no pod of it is up; its address given back, IPAM asked again",
		env->attach_id);
	return !cni_ipam_exec(conf, env, "ADD", res, e);
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
	bool has4, has6, added = false, release;
	int err, ret = -1;

	if (conf->prev_result)
		cni_log(PI_LOG_WARN, "main mode ignores the prevResult it was given");
	if (main_prior(conf, env, &release, e))
		return -1;
	cni_step("prior");
	if (release && cni_ipam_exec(conf, env, "DEL", NULL, &ignore))
		cni_log(PI_LOG_WARN, "cannot give back the leftover's address: %s: %s",
			ignore.msg, ignore.details);
	if (cni_ipam_exec(conf, env, "ADD", &ipam_res, e) &&
	    (release || !e->ipam_refused || !ipam_retry(conf, env, &ipam_res, e))) {
		/* The plugin ran (and may hold an address it never reported,
		 * timed out or cut off): it gets its DEL. */
		if (e->code == CNI_ERR_IPAM)
			ipam_undo(conf, env);
		return -1;
	}
	cni_step("ipam");
	if (cni_prev_addresses(ipam_res, -1, false, &ip4, &has4, &ip6, &has6, e))
		goto out;
	if (!has4 && !has6) {
		cni_fail(e, CNI_ERR_IPAM, "IPAM plugin returned no address", NULL);
		goto out;
	}
	cni_main_hostdev(env, hostdev, sizeof(hostdev));
	err = cni_pi_open(conf, true, &node);
	cni_step("node");
	if (err) {
		cni_pi_open_fail(e, err, conf);
		goto out;
	}
	err = cni_pi_add(node, env, hostdev, has4 ? &ip4 : NULL,
			 has6 ? &ip6 : NULL, &pod);
	if ((err == -EEXIST || err == -EADDRINUSE) &&
	    !clear_stale(node, env, 0, has4 ? &ip4 : NULL, has6 ? &ip6 : NULL))
		err = cni_pi_add(node, env, hostdev, has4 ? &ip4 : NULL,
				 has6 ? &ip6 : NULL, &pod);
	cni_step("add");
	if (err) {
		cni_pi_fail(e, err, "cannot add the pod", conf);
		goto out;
	}
	added = true;
	cni_log(PI_LOG_INFO, "pod %s added on node %s: %s <-> %s in %s",
		env->pod_name, conf->node, hostdev, env->ifname, env->netns);
	res = cni_main_result(conf, env, &pod, ipam_res);
	ret = cni_print_result(res, e);
	json_decref(res);
out:
	if (ret && added)
		undo_pod(node, env);
	pi_node_close(node);
	cni_step("close");
	if (ret && ipam_res)
		ipam_undo(conf, env);
	json_decref(ipam_res);
	return ret;
}

int cni_cmd_add(const struct cni_conf *conf, struct cni_env *env,
		struct cni_err *e)
{
	cni_log(PI_LOG_DEBUG, "ADD pod %s netns %s ifname %s", env->pod_name,
		env->netns, env->ifname);
	return conf->mode == CNI_MODE_MAIN ? cmd_add_main(conf, env, e) :
					     cmd_add_chained(conf, env, e);
}
