/* SPDX-License-Identifier: GPL-2.0 */
/* Injection's pinned objects under NODE/inject/, shared by `inject` and
 * `proxy`. */
#ifndef PODINJECT_INJECT_H
#define PODINJECT_INJECT_H

#include "state.h"

#define MAX_AS 32

enum inject_map {
	IM_AUTH, IM_STATS, IM_PROXY_RULES, IM_PROXY_FLOWS, IM_PROXY_UPSTREAM,
	IM_PROBE_FLOWS, IM_PROBE_EVENTS, IM_NETKIT_GUARDS, IM_NETKIT_PEER_PROGS,
	IM_CONFIG, IM_PROXY_LISTENERS, IM_MONITOR_EVENTS, IM_MONITOR_CONFIG,
	IM_MONITOR_CPU, IM_PROXY_INBOUND_RULES, IM_PROXY_INBOUND_PODS,
	IM_HEAD_ROLES, IM_REFUSALS, IM_FLOW_SWEEP, IM__COUNT,
};
enum inject_prog {
	IP_EGRESS, IP_POD_REPLY, IP_PROXY_ASSIGN, IP_NETKIT_GUARD, IP_NETKIT_UNTAG,
	IP_PROXY_LOOKUP, IP_FLOW_SWEEP_START, IP__COUNT,
};

struct inject_state {
	int maps[IM__COUNT];
	int progs[IP__COUNT];
	char dir[PATH_MAX];
};

/* Opens the objects; with `create`, loads and pins them when they are not
 * there. Returns 1 when it created them, 0 when they existed, -errno. */
int inject_open(const struct pi_node *n, struct inject_state *s, bool create);
void inject_close(struct inject_state *s);
/* Runs the object's flow_sweep_start once (bpf/inject.bpf.c): the flow
 * tables' sweep timer made while memory is at hand, pointed at this
 * object's programs, and one round scheduled. `dir`: the object's pins
 * (NODE/inject). A failure is logged, not returned: the datapath makes
 * the timer itself when it needs one, where the kernel lets it. */
void inject_sweep_start(const char *dir);

/* The head program at a pod's egress hook, shared by injection and the
 * proxy's capture: each holds it as an owner (enum pi_head_owner, kept in
 * the pod's meta record); it is attached with the first owner and
 * detached when the last lets go. */
bool head_attached(const struct inject_state *s, const struct pi_pod_info *pod);
int head_acquire(const struct pi_node *n, struct inject_state *s,
		 const struct pi_pod_info *pod, uint32_t owner);
void head_release(const struct pi_node *n, struct inject_state *s,
		  const struct pi_pod_info *pod, uint32_t owner);
/* The head program's record of what it has to look at on device
 * `ifindex` (inject/head_roles, enum pi_dp_head_role), written from the
 * maps each role's checks read. Call before the head first runs there and
 * after every change of those maps; head_acquire and head_release do.
 * head_roles_all computes every device's roles (without
 * PI_DP_ROLE_KNOWN) from the maps given, one pass over each, into
 * roles[PI_DP_HEAD_ROLES_MAX]; head_roles_of one device's record: 0,
 * "every check", when it cannot read them. A map fd < 0 has no entries. */
int head_roles_all(int auth, int rules, int inbound_rules, uint32_t *roles);
uint32_t head_roles_of(int auth, int rules, int inbound_rules,
		       uint32_t ifindex);
int head_roles_refresh(const struct inject_state *s, uint32_t ifindex);
/* The record of a device that is gone, or whose head is: 0 */
void head_roles_clear(const struct inject_state *s, uint32_t ifindex);
/* Authorisations the injector still has. */
int inject_auth_count(const struct inject_state *s, uint32_t injector);

/* What inject_authorise changed, for its caller to undo: the keys it
 * added, and those it overwrote with what they said before. The arrays
 * hold two keys per target (the caller's). */
struct inject_undo {
	struct pi_inject_key *added;
	int nadded;
	struct pi_inject_key *had_k;
	struct pi_inject_target *had_t;
	int nhad;
};

/* Authorises inj to inject as each of targets with `path` (0 = auto); a
 * netkit target on the fallback gets the netkit fallback and its guard.
 * What it changed goes to *u, so a caller can undo it (inject_undo); on
 * failure it has undone it itself. */
int inject_authorise(const struct pi_node *n, struct inject_state *s,
		     const struct pi_pod_info *inj,
		     const struct pi_pod_info *targets, int ntargets, uint32_t path,
		     struct inject_undo *u);
/* The grants as they were before inject_authorise: its new keys deleted,
 * those it overwrote put back (a netkit fallback's guard first, as when
 * it was granted), the targets' guards following. */
void inject_undo(const struct pi_node *n, struct inject_state *s,
		 const struct pi_pod_info *targets, int ntargets,
		 struct inject_undo *u);
int inject_path_auto(void);
/* pi_inject_deny; with proxies_too, a grant a proxy rule holds goes as
 * well (an apply's own steps and their undo), where pi_inject_deny refuses
 * it (--as) or keeps it (all of the injector's). */
int inject_deny(struct pi_node *n, const char *injector,
		const char *const *as, int nas, bool proxies_too);
/* The path inj is authorised to inject as tgt with (its first key's, as
 * stored), 0 when it is not. */
uint32_t inject_granted_path(const struct inject_state *s,
			     const struct pi_pod_info *inj,
			     const struct pi_pod_info *tgt);

/* The netkit fallback's guard at each netkit pod: attached while some
 * authorisation takes the netkit fallback onto the pod, detached when none
 * does. Call after removing authorisations. */
int netkit_guard_sync(const struct pi_node *n, struct inject_state *s,
		      const struct pi_pod_info *pod);
void netkit_guards_sync_all(const struct pi_node *n, struct inject_state *s);
/* netkit_guard_sync for one pod, the injection's objects opened for it (a
 * node without them: 0). Call after a change of the programs at a netkit
 * pod's peer hook: the guard runs exactly the one there that is not the
 * injection's, and with more than one it drops injected packets rather
 * than let them past the others. */
int inject_guard_follow(const struct pi_node *n, const struct pi_pod_info *pod);

/* The reply hook (pod_reply at the pod's eth0 ingress, inside its
 * namespace), shared by proxying and probing: attached once, released
 * when the pod is neither proxied nor `keep`. */
int reply_hook_attach(const struct pi_node *n, const struct inject_state *s,
		      const struct pi_pod_info *pod);
void reply_hook_release(const struct pi_node *n, const struct inject_state *s,
			const struct pi_pod_info *pod);
/* Removes the reply hook's pin of a pod that is gone, device and all,
 * and the records kept by its ifindex (the clsact qdisc made on its eth0,
 * its own port range as a proxy), without entering any namespace. */
void reply_hook_unpin(const struct inject_state *s,
		      const struct pi_pod_info *gone);
/* The record that podinject made the clsact qdisc on the eth0 of the pod
 * whose host side is `pod_ifindex`, under the injection object's `inject_dir`. */
void pod_qdisc_mark_path(char *buf, size_t len, const char *inject_dir,
			 uint32_t pod_ifindex);
int attach_in_pod(const struct pi_node *n, const struct inject_state *s,
		  const struct pi_pod_info *pod, int prog, const char *what);
void detach_in_pod(const struct pi_node *n, const struct inject_state *s,
		   const struct pi_pod_info *pod, const char *what);

/* proxy.c: a proxy rule of the API from the proxy_rules map's. */
void proxy_rule_from_dp(struct pi_proxy_rule *r,
			const struct pi_dp_proxy_rule *d);
/* proxy.c: a pod being deleted stops being proxied and proxying. */
void proxy_forget_pod(const struct pi_node *n, struct inject_state *s,
		      const struct pi_pod_info *gone);

#endif
