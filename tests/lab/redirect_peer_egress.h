/* SPDX-License-Identifier: GPL-2.0 */
/* Shared between redirect_peer_egress.bpf.c and redirect_peer_egress.c. */
#ifndef REDIRECT_PEER_EGRESS_H
#define REDIRECT_PEER_EGRESS_H

#define TEST_PORT	4242

/* Not in the uapi headers of the kernels the lab builds against. */
#define RPE_BPF_F_INGRESS	(1ULL << 0)
#define RPE_BPF_F_EGRESS	(1ULL << 1)

#define TC_ACT_OK_		0
#define TC_ACT_SHOT_		2
#define TC_ACT_REDIRECT_	7

enum rpe_mode {
	RPE_MODE_PEER = 0,	/* bpf_redirect_peer(target_ifindex, redirect_flags) */
	RPE_MODE_REDIRECT,	/* bpf_redirect(target_ifindex, redirect_flags) */
};

enum rpe_counter {
	RPE_CNT_INJECT = 0,	/* the injector ran on a marked packet */
	RPE_CNT_PEER_EGRESS,	/* tc egress of the target's peer (pod device) */
	RPE_CNT_PEER_INGRESS,	/* tc ingress of the target's peer */
	RPE_CNT_NETKIT_PEER,	/* BPF_NETKIT_PEER program of the target pair */
	RPE_CNT_NETKIT_PRIMARY,	/* BPF_NETKIT_PRIMARY program of the target pair */
	RPE_CNT_HOST_INGRESS,	/* tc ingress of the target (host side) */
	RPE_CNT_HOST_EGRESS,	/* tc egress of the target (host side) */
	RPE_NR_COUNTERS,
};

#endif
