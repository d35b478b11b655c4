/* SPDX-License-Identifier: GPL-2.0 */
/* Devices for unit tests, in a namespace private to the test process. */
#ifndef PODINJECT_UNIT_FIXTURE_H
#define PODINJECT_UNIT_FIXTURE_H

/* Moves the process into a fresh network namespace, once. */
int fixture_netns(void);
/* A veth device NAME (peer NAME-p) in that namespace, up; its ifindex. */
int fixture_dev(const char *name);

#include <stdint.h>
#include "podinject_abi.h"

/* One BPF_PROG_TEST_RUN of a tc program on a packet, with skb->ifindex set
 * (to a device that exists here). The verdict, or -1000 + the error. `out`,
 * when given, receives the packet as the program left it. */
int fixture_run(int prog_fd, int ifindex, const void *pkt, int len,
		void *out);
/* fixture_run runs a frame at the host-side device of a pod
 * fixture_add_pod made with the pod's MAC as its Ethernet source, as its
 * eth0 sends it; this one runs the frame as it is. */
int fixture_run_as_sent(int prog_fd, int ifindex, const void *pkt, int len,
			void *out);
/* The frame's Ethernet source set to the MAC of the pod whose host-side
 * device is `ifindex` (fixture_add_pod), if there is one. */
void fixture_from_pod(int ifindex, uint8_t *frame, int len);
/* The redirect the program last asked for (bpf/lib/redirect.h), cleared
 * after reading. */
struct pi_redirect_record fixture_last_redirect(int map_fd);

struct bpf_map;

/* A pod of the reference datapath as the library writes it, in the maps
 * `pods` and `endpoints` of a loaded node program: pod id `id` on host-side
 * device `ifindex`, v4 and v6 addresses, its eth0's MAC and its host side's. */
void fixture_add_pod(const struct bpf_map *pods, const struct bpf_map *endpoints,
		     uint32_t id, int ifindex, const char *ip4, const char *ip6,
		     const uint8_t *mac, const uint8_t *hmac);

/* What the running kernel is known to have (tests/kernels.txt, read by
 * tests/known-features.sh under $PODINJECT_ROOT, default the current
 * directory): FEATURE's value as "true"/"false"/..., or -1 when the kernel
 * or the feature is not listed. Not the probe: a test that took its
 * expectation from the probe would compare the probe with itself. */
int fixture_known(const char *feature, char *val, int len);

/* The injection object's count of drop `reason` (enum
 * pi_dp_mon_drop_reason) in its inject_refusals map, summed over the
 * CPUs; UINT64_MAX when it cannot be read. */
uint64_t fixture_refused(const struct bpf_map *inject_refusals,
			 uint32_t reason);

struct bpf_object;
/* Publishes `rules` as pod `pod`'s policy in `dir` at rule slot `start`
 * of the object's maps, as the library publishes an edit (lib/cls.c:
 * rules, the compiled classifier, a reference flip with a new revision).
 * 0 or -errno. */
int fixture_set_policy(struct bpf_object *obj, uint32_t pod, uint32_t dir,
		       const struct pi_dp_rule *rules, uint32_t count,
		       uint32_t start);

#endif
