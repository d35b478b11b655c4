/* SPDX-License-Identifier: GPL-2.0 */
#ifndef PODINJECT_FEATURES_H
#define PODINJECT_FEATURES_H

#include <stdbool.h>

#define PI_F_EGRESS_FLAG	2ULL	/* BPF_F_EGRESS of bpf_redirect_peer */

/* What this kernel can do, found by trying it, never by version strings. */
struct features {
	bool tcx;			/* BPF_TCX_* links */
	bool netkit;			/* netkit devices */
	bool redirect_peer_egress;	/* bpf_redirect_peer(x, BPF_F_EGRESS) */
	bool bpf_loop;			/* the policy walker needs it */
	int redirect_peer_egress_retval;	/* what the probe returned */
};

/* Runs every probe in a throw-away network namespace, so that nothing of
 * the caller's namespaces is touched. */
int probe_features(struct features *f);
/* The BPF_F_EGRESS probe alone: the tc verdict that a program calling
 * bpf_redirect_peer(1, flags) returns under BPF_PROG_TEST_RUN. */
int probe_redirect_peer_retval(unsigned long long flags);

#endif
