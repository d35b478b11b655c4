/* SPDX-License-Identifier: GPL-2.0 */
/*
 * XDP on veth pods (bpf/xdp.bpf.c): the pod's ingress ACL on its pod-side
 * eth0 and the uplink's XDP_REDIRECT path to local pods. The node's part
 * is here; a pod's is the feature xdp_feature (struct pi_feature). Functions
 * return 0 or -errno and print nothing; callers report with context.
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

/* node upgrade, once the node's pins are this build's: the pod's ACL, if it
 * has one, held by a link (link_xdp_pod_IFINDEX) where an older build
 * attached it by netlink. The pod takes the tc way for the moment between
 * (out of the devmap, PI_POD_XDP off: tc checks the node stack's packets),
 * so no packet goes unchecked or to an eth0 without XDP. Whatever netlink
 * attached to eth0 instead (root in the pod owns the device) is taken off
 * first. n needs its pods maps and its namespace (netns_fd). Idempotent,
 * so that an interrupted upgrade finishes it on the next run (the program
 * pin records that the pod has an ACL); a pod whose namespace or eth0 is
 * gone has nothing to hold (0). */
int xdp_pod_hold(const struct pi_node *n, const struct pi_pod_info *pod);

#endif
