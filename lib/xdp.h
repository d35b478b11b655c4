/* SPDX-License-Identifier: GPL-2.0 */
/*
 * XDP on veth pods (bpf/xdp.bpf.c): the pod's ingress ACL on its pod-side
 * eth0 and the uplink's XDP_REDIRECT path to local pods. Functions return
 * 0 or -errno and print nothing; callers report with context.
 */
#ifndef PODINJECT_XDP_H
#define PODINJECT_XDP_H

#include <stdint.h>
#include "state.h"

/* Whether a native XDP program attaches to a veth device, tried in a
 * throw-away namespace: 1 yes, 0 no, or -errno when it cannot tell. */
int xdp_probe_veth(void);

/* node up --xdp, inside the node's namespace: loads the XDP object on the
 * node's pinned maps, pins its own maps and the uplink program, and
 * attaches that to uplink_ifindex (0: no uplink). Undoes itself on
 * failure, except for the pins, which go with the node's pin folder. */
int xdp_node_setup(const struct pi_node *n, int uplink_ifindex);
/* Detaches the uplink program; inside the node's namespace. */
void xdp_node_teardown(const struct pi_node *n);

/* Loads the pod's own instance of the ACL, attaches it to the pod-side
 * eth0 in pod_ns, then marks the pod PI_POD_XDP (pod->flags and the pods
 * map) and adds it to the uplink's devmap, in that order, so that no
 * packet goes unchecked meanwhile. */
int xdp_pod_attach(const struct pi_node *n, struct pi_pod_info *pod, int pod_ns);
/* The reverse, in reverse order; a namespace or device already gone is no
 * error. */
int xdp_pod_detach(const struct pi_node *n, const struct pi_pod_info *pod);

int xdp_pod_stats(const struct pi_node *n, uint32_t pod_id,
		  struct pi_xdp_stats *out);
/* The id of the XDP program on the pod's eth0 as the kernel reports it,
 * 0 when there is none. */
uint32_t xdp_pod_prog_id(const struct pi_pod_info *pod);

#endif
