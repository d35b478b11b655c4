/* SPDX-License-Identifier: GPL-2.0 */
/* The features a pod's joining and removal run, and the kernel's features. */
#include <string.h>
#include "kernel_features.h"
#include "lib.h"
#include "xdp.h"

extern const struct pi_feature proxy_feature, inject_feature, xdp_feature,
	policy_feature, ct_feature;

/* Proxying first: it refers to injection (the proxy is the pod's
 * injector) and releases the head program injection may still need. */
const struct pi_feature *const pi_features[] = {
	&proxy_feature,
	&inject_feature,
	&xdp_feature,
	&policy_feature,
	&ct_feature,
	NULL,
};

int pi_features_probe(struct pi_features *out)
{
	struct features f;
	int err = probe_features(&f);

	memset(out, 0, sizeof(*out));
	if (err)
		return err;
	out->tcx = f.tcx;
	out->netkit = f.netkit;
	out->redirect_peer_egress = f.redirect_peer_egress;
	out->bpf_loop = f.bpf_loop;
	out->redirect_peer_egress_retval = f.redirect_peer_egress_retval;
	out->veth_xdp = xdp_probe_veth() == 1;
	return 0;
}
