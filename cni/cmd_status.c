/* SPDX-License-Identifier: GPL-2.0 */
/*
 * STATUS (CNI 1.1): whether an ADD could go through now. A node not up
 * yet is ready (the first ADD makes it), and so is a busy one (its lock
 * is held for a moment). A node that is there but that no ADD can use,
 * made by another build or of another namespace, is not: code 50, the
 * spec's "plugin not available", with the reason an ADD would be given,
 * so that the runtime says the network is not ready instead of starting
 * pods whose ADD fails. A node missing a part opens as one not up
 * (-ENOENT: an ADD may be making it this moment): the ADD that finds it
 * so says so (code 100); STATUS makes nothing, so cannot tell.
 */
#include <errno.h>
#include "cni.h"

int cni_cmd_status(const struct cni_conf *conf, struct cni_err *e)
{
	struct cni_err why = { 0 };
	struct pi_node *node;
	int err;

	err = pi_node_open(conf->node, PI_OPEN_READ, conf->lock_timeout_ms,
			   &node);
	if (!err)
		pi_node_close(node);
	if (!err || err == -ENOENT || err == -EBUSY)
		return 0;
	cni_pi_open_fail(&why, err, conf);
	cni_log(PI_LOG_ERROR, "STATUS: %s: %s", why.msg, why.details);
	return cni_fail(e, CNI_ERR_NOT_AVAILABLE, "podinject is not available",
			"%s: %s", why.msg, why.details);
}
