/* SPDX-License-Identifier: GPL-2.0 */
/*
 * podinject inject allow|deny|list|stats: which injector pod may speak for
 * which pods, and the injection program at the head of each injector's
 * egress hook. Injection keeps its own objects under NODE/inject/, apart
 * from the node datapath, which it only reads (pod devices, MACs and
 * addresses) the way it would read a CNI's endpoint list.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "inject.h"
#include "percpu.h"
#include "lib.h"
#include "inject.skel.h"
#include "kernel_features.h"
#include "nl.h"



const char *const inject_map_names[IM__COUNT] = {
	[IM_AUTH] = "inject_auth",
	[IM_STATS] = "inject_stats",
	[IM_PROXY_RULES] = "proxy_rules",
	[IM_PROXY_FLOWS] = "proxy_flows",
	[IM_PROXY_UPSTREAM] = "proxy_upstream",
	[IM_PROBE_FLOWS] = "probe_flows",
	[IM_PROBE_EVENTS] = "probe_events",
	[IM_NETKIT_GUARDS] = "netkit_guards",
	[IM_NETKIT_PEER_PROGS] = "netkit_peer_progs",
	[IM_CONFIG] = "config",		/* the object's read-only data */
	[IM_PROXY_LISTENERS] = "proxy_listeners",
	[IM_MONITOR_EVENTS] = "monitor_events",
	[IM_MONITOR_CONFIG] = "monitor_config",
	[IM_MONITOR_CPU] = "monitor_cpu",
	[IM_PROXY_INBOUND_RULES] = "proxy_inbound_rules",
	[IM_PROXY_INBOUND_PODS] = "proxy_inbound_pods",
	[IM_HEAD_ROLES] = "head_roles",
	[IM_REFUSALS] = "inject_refusals",
	[IM_FLOW_SWEEP] = "flow_sweep",
};

const char *const inject_prog_names[IP__COUNT] = {
	[IP_EGRESS] = "inject_egress",
	[IP_POD_REPLY] = "pod_reply",
	[IP_PROXY_ASSIGN] = "proxy_assign",
	[IP_NETKIT_GUARD] = "netkit_guard",
	[IP_NETKIT_UNTAG] = "netkit_untag",
	[IP_PROXY_LOOKUP] = "proxy_lookup",
	[IP_FLOW_SWEEP_START] = "flow_sweep_start",
};

static void inject_open_none(struct inject_state *s)
{
	for (int i = 0; i < IM__COUNT; i++)
		s->maps[i] = -1;
	for (int i = 0; i < IP__COUNT; i++)
		s->progs[i] = -1;
}

void inject_close(struct inject_state *s)
{
	for (int i = 0; i < IM__COUNT; i++) {
		if (s->maps[i] >= 0)
			close(s->maps[i]);
		s->maps[i] = -1;
	}
	for (int i = 0; i < IP__COUNT; i++) {
		if (s->progs[i] >= 0)
			close(s->progs[i]);
		s->progs[i] = -1;
	}
}

static int pin_get(const char *dir, const char *prefix, const char *name)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s%s", dir, prefix, name);
	return bpf_obj_get(path);
}

static int open_pinned(struct inject_state *s)
{
	for (int i = 0; i < IM__COUNT; i++) {
		s->maps[i] = pin_get(s->dir, "", inject_map_names[i]);
		if (s->maps[i] < 0)
			return -ENOENT;
	}
	for (int i = 0; i < IP__COUNT; i++) {
		s->progs[i] = pin_get(s->dir, "prog_", inject_prog_names[i]);
		if (s->progs[i] < 0)
			return -ENOENT;
	}
	return 0;
}

static int load_and_pin(struct inject_state *s)
{
	struct inject_bpf *skel;
	char path[PATH_MAX];
	int err = 0;

	skel = inject_bpf__open();
	if (!skel)
		return errno ? -errno : -EINVAL;
	/* The node's netkit tag: a locally administered unicast MAC no pod
	 * is given, random so that it is no well-known value either. */
	if (getrandom((void *)skel->rodata->netkit_tag, 6, 0) != 6) {
		inject_bpf__destroy(skel);
		return -EIO;
	}
	((uint8_t *)skel->rodata->netkit_tag)[0] =
		(skel->rodata->netkit_tag[0] & 0xfc) | 0x02;
	err = inject_bpf__load(skel);
	if (err) {
		inject_bpf__destroy(skel);
		return err;
	}
	for (int i = 0; i < IM__COUNT && !err; i++) {
		struct bpf_map *m = i == IM_CONFIG ? skel->maps.rodata :
				     bpf_object__find_map_by_name(
					skel->obj, inject_map_names[i]);

		snprintf(path, sizeof(path), "%s/%s", s->dir,
			 inject_map_names[i]);
		err = m ? bpf_map__pin(m, path) : -ENOENT;
	}
	for (int i = 0; i < IP__COUNT && !err; i++) {
		struct bpf_program *pr = bpf_object__find_program_by_name(
			skel->obj, inject_prog_names[i]);

		snprintf(path, sizeof(path), "%s/prog_%s", s->dir,
			 inject_prog_names[i]);
		err = pr ? bpf_program__pin(pr, path) : -ENOENT;
	}
	inject_bpf__destroy(skel);
	return err ? err : open_pinned(s);
}

void inject_sweep_start(const char *dir)
{
	uint8_t frame[64] = {};
	DECLARE_LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame,
			    .data_size_in = sizeof(frame), .repeat = 1);
	int fd = pin_get(dir, "prog_", inject_prog_names[IP_FLOW_SWEEP_START]);
	int err;

	if (fd < 0) {
		pr_warn("%s: no flow sweep program: %s", dir, strerror(errno));
		return;
	}
	err = bpf_prog_test_run_opts(fd, &opts);
	close(fd);
	if (err)
		pr_warn("%s: cannot run the flow sweep's start: %s", dir,
			strerror(errno));
	else if (opts.retval)
		pr_warn("%s: the flow sweep's timer: %s (the datapath makes it when it needs one)",
			dir, strerror(opts.retval));
}

/* A monitor running when the injection object is made asks it for what
 * it asks the node (lib/monitor.c): the new object writes those events
 * from its first packet on, not from when the monitor notices it. */
static void monitor_follow_node(const struct pi_node *n,
				const struct inject_state *s)
{
	struct pi_dp_monitor_config cfg;
	char path[PATH_MAX];
	__u32 zero = 0;
	int fd;

	node_pin_path(n, path, sizeof(path), "monitor_config");
	fd = bpf_obj_get(path);
	if (fd < 0)
		return;
	if (!bpf_map_lookup_elem(fd, &zero, &cfg) && cfg.kinds)
		bpf_map_update_elem(s->maps[IM_MONITOR_CONFIG], &zero, &cfg, 0);
	close(fd);
}

int inject_open(const struct pi_node *n, struct inject_state *s, bool create)
{
	int err;

	inject_open_none(s);
	node_pin_path(n, s->dir, sizeof(s->dir), "inject");
	if (!access(s->dir, F_OK)) {
		err = open_pinned(s);
		if (err)
			inject_close(s);
		return err;
	}
	if (!create)
		return -ENOENT;
	if (mkdir(s->dir, 0700))
		return -errno;
	err = load_and_pin(s);
	if (err) {
		inject_close(s);
		rm_tree(s->dir);
		return err;
	}
	inject_sweep_start(s->dir);
	monitor_follow_node(n, s);
	return 1;
}

static void link_pin(const struct inject_state *s, const struct pi_pod_info *injector,
		     char *buf, size_t len)
{
	snprintf(buf, len, "%s/link_%u", s->dir, injector->ifindex);
}

static enum pi_hook injector_hook(const struct pi_pod_info *pod)
{
	return pod->flags & PI_POD_NETKIT ? PI_HOOK_NETKIT_PEER :
					    PI_HOOK_INGRESS;
}

static enum pi_attach_mode injector_mode(const struct pi_node *n,
					 const struct pi_pod_info *pod)
{
	return pod->flags & PI_POD_NETKIT ? PI_ATTACH_TCX : node_attach_mode(n);
}

/* Whether the head program is attached at this pod: its pin path exists
 * exactly while it is (attach_prog). */
bool head_attached(const struct inject_state *s, const struct pi_pod_info *pod)
{
	char path[PATH_MAX];

	link_pin(s, pod, path, sizeof(path));
	return !access(path, F_OK);
}

/* The pod's ifindex is the node namespace's: attach from in there. */
static int head_attach(const struct pi_node *n, struct inject_state *s,
		       const struct pi_pod_info *pod)
{
	enum pi_attach_mode mode = injector_mode(n, pod);
	char path[PATH_MAX];
	int err, saved;

	if (head_attached(s, pod))
		return 0;
	link_pin(s, pod, path, sizeof(path));
	err = node_enter(n, &saved);
	if (err)
		return err;
	err = attach_prog(s->progs[IP_EGRESS], pod->ifindex,
			  injector_hook(pod), mode, true, PI_PRIO_HEAD, path);
	netns_restore(saved);
	return err;
}

static void head_detach(const struct pi_node *n, struct inject_state *s,
			const struct pi_pod_info *pod)
{
	enum pi_attach_mode mode = injector_mode(n, pod);
	char path[PATH_MAX];
	int saved;

	link_pin(s, pod, path, sizeof(path));
	if (node_enter(n, &saved))
		return;
	/* gone when the command returns, as detach_in_pod's */
	detach_prog_now(pod->ifindex, injector_hook(pod), mode, PI_PRIO_HEAD,
			path);
	netns_restore(saved);
}

/* Adds to `roles` (by ifindex) what the rules of `rules` give: `mine` to
 * each captured or protected pod, PI_DP_ROLE_PROXY to each rule's proxy.
 * A map fd < 0 is a map the node does not have yet (an upgrade from
 * before it): no entries. */
static int roles_of_rules(int rules, uint32_t mine, uint32_t *roles)
{
	uint32_t key, next, *prev = NULL;
	struct pi_dp_proxy_rule r;

	while (rules >= 0 && !bpf_map_get_next_key(rules, prev, &next)) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(rules, &key, &r))
			continue;	/* deleted meanwhile */
		if (key < PI_DP_HEAD_ROLES_MAX)
			roles[key] |= mine;
		if (r.proxy_ifindex < PI_DP_HEAD_ROLES_MAX)
			roles[r.proxy_ifindex] |= PI_DP_ROLE_PROXY;
	}
	return rules < 0 || errno == ENOENT ? 0 : -errno;
}

int head_roles_all(int auth, int rules, int inbound_rules, uint32_t *roles)
{
	struct pi_inject_key key, next, *prev = NULL;
	int err;

	memset(roles, 0, PI_DP_HEAD_ROLES_MAX * sizeof(*roles));
	err = roles_of_rules(rules, PI_DP_ROLE_CAPTURED, roles);
	if (!err)
		err = roles_of_rules(inbound_rules, PI_DP_ROLE_PROTECTED, roles);
	if (err)
		return err;
	while (auth >= 0 && !bpf_map_get_next_key(auth, prev, &next)) {
		if (next.injector_ifindex < PI_DP_HEAD_ROLES_MAX)
			roles[next.injector_ifindex] |= PI_DP_ROLE_INJECT;
		key = next;
		prev = &key;
	}
	return auth < 0 || errno == ENOENT ? 0 : -errno;
}

uint32_t head_roles_of(int auth, int rules, int inbound_rules,
		       uint32_t ifindex)
{
	uint32_t *roles = calloc(PI_DP_HEAD_ROLES_MAX, sizeof(*roles)), r = 0;

	if (ifindex < PI_DP_HEAD_ROLES_MAX && roles &&
	    !head_roles_all(auth, rules, inbound_rules, roles))
		r = roles[ifindex] | PI_DP_ROLE_KNOWN;
	free(roles);
	return r;
}

int head_roles_refresh(const struct inject_state *s, uint32_t ifindex)
{
	uint32_t roles;

	/* past the array's end the head makes every check */
	if (ifindex >= PI_DP_HEAD_ROLES_MAX)
		return 0;
	roles = head_roles_of(s->maps[IM_AUTH], s->maps[IM_PROXY_RULES],
			      s->maps[IM_PROXY_INBOUND_RULES], ifindex);
	return bpf_map_update_elem(s->maps[IM_HEAD_ROLES], &ifindex, &roles,
				   BPF_ANY) ? -errno : 0;
}

void head_roles_clear(const struct inject_state *s, uint32_t ifindex)
{
	uint32_t none = 0;

	if (ifindex < PI_DP_HEAD_ROLES_MAX)
		bpf_map_update_elem(s->maps[IM_HEAD_ROLES], &ifindex, &none,
				    BPF_ANY);
}

/* The record first, from the maps the caller has filled: a head attached
 * here never runs on an older device's record of this ifindex. */
int head_acquire(const struct pi_node *n, struct inject_state *s,
		 const struct pi_pod_info *pod, uint32_t owner)
{
	bool was = head_attached(s, pod), attached = false;
	int err = head_roles_refresh(s, pod->ifindex);

	if (!err) {
		err = head_attach(n, s, pod);
		attached = !err && !was;
	}
	if (!err)
		err = pod_head_owners(n, pod->ifindex, owner, 0, NULL);
	/* Only what this call attached: an attach refused because another
	 * owner's filter holds the head's priority and handle (clsact,
	 * EEXIST) has nothing of ours to take off, and a detach there would
	 * delete that owner's filter. */
	if (err && attached)
		head_detach(n, s, pod);
	return err;
}

/* After the caller took its entries away: the record follows them. */
void head_release(const struct pi_node *n, struct inject_state *s,
		  const struct pi_pod_info *pod, uint32_t owner)
{
	uint32_t left = 0;

	/* A pod without a meta record is on its way out: let go. */
	pod_head_owners(n, pod->ifindex, 0, owner, &left);
	if (!left && head_attached(s, pod))
		head_detach(n, s, pod);
	if (left)
		head_roles_refresh(s, pod->ifindex);
	else
		head_roles_clear(s, pod->ifindex);
}

static int target_key(const struct pi_pod_info *inj, const struct pi_pod_info *tgt,
		      struct pi_inject_key keys[2])
{
	int n = 0;

	memset(keys, 0, 2 * sizeof(keys[0]));
	if (tgt->flags & PI_POD_HAS_V4) {
		keys[n].injector_ifindex = inj->ifindex;
		keys[n].family = AF_INET;
		keys[n].addr.a[0] = tgt->ip4;
		n++;
	}
	if (tgt->flags & PI_POD_HAS_V6) {
		keys[n].injector_ifindex = inj->ifindex;
		keys[n].family = AF_INET6;
		memcpy(keys[n].addr.a, tgt->ip6, 16);
		n++;
	}
	return n;
}

int inject_auth_count(const struct inject_state *s, uint32_t injector)
{
	struct pi_inject_key key, next, *prev = NULL;
	int cnt = 0;

	while (!bpf_map_get_next_key(s->maps[IM_AUTH], prev, &next)) {
		if (next.injector_ifindex == injector)
			cnt++;
		key = next;
		prev = &key;
	}
	return cnt;
}

int inject_path_auto(void)
{
	return probe_redirect_peer_retval(PI_F_EGRESS_FLAG) == PI_REDIRECT ?
	       PI_PATH_FAST : PI_PATH_FALLBACK;
}

/* Whether some authorisation takes the netkit fallback onto `pod`. */
static bool netkit_fallback_wanted(const struct inject_state *s,
				   const struct pi_pod_info *pod)
{
	struct pi_inject_key key, next, *prev = NULL;
	struct pi_inject_target t;

	while (!bpf_map_get_next_key(s->maps[IM_AUTH], prev, &next)) {
		key = next;
		prev = &key;
		if (!bpf_map_lookup_elem(s->maps[IM_AUTH], &key, &t) &&
		    t.target_ifindex == pod->ifindex &&
		    t.path == PI_DP_PATH_NETKIT_FALLBACK)
			return true;
	}
	return false;
}

/* By ifindex, as every pod's pin: a pod's name may hold a '/' (an adopted
 * Kubernetes namespace/name) or be longer than a path component. */
static void guard_pin(const struct inject_state *s, const char *what,
		      const struct pi_pod_info *pod, char *buf, size_t len)
{
	snprintf(buf, len, "%s/link_%s_%u", s->dir, what, pod->ifindex);
}

/* The name a guard's pin had before (ABI 4 and earlier), for a guard a
 * node made then: false where that name could not be a pin. */
static bool guard_pin_by_name(const struct inject_state *s, const char *what,
			      const struct pi_pod_info *pod, char *buf,
			      size_t len)
{
	if (strchr(pod->name, '/'))
		return false;
	snprintf(buf, len, "%s/link_%s_%s", s->dir, what, pod->name);
	return !access(buf, F_OK);
}

static uint32_t prog_id(int fd)
{
	struct bpf_prog_info info = {};
	uint32_t len = sizeof(info);

	return bpf_obj_get_info_by_fd(fd, &info, &len) ? 0 : info.id;
}

/* The one program at the pod's BPF_NETKIT_PEER hook that is not ours: the
 * CNI's egress program, which the guard runs for injected packets. A hook
 * with several would need them run in turn, which one tail call cannot
 * do; that is refused rather than half done. Returns an fd or -errno. */
static int netkit_peer_program(const struct inject_state *s,
			       const struct pi_pod_info *pod)
{
	uint32_t ids[64], ours[IP__COUNT], found = 0;
	int cnt, fd;

	for (int i = 0; i < IP__COUNT; i++)
		ours[i] = prog_id(s->progs[i]);
	cnt = query_tcx(pod->ifindex, PI_HOOK_NETKIT_PEER, ids, 64);
	if (cnt < 0)
		return cnt;
	for (int i = 0; i < cnt; i++) {
		bool mine = false;

		for (int j = 0; j < IP__COUNT; j++)
			mine |= ids[i] == ours[j];
		if (mine)
			continue;
		if (found) {
			pr_err("netkit pod '%s' has several programs at its peer hook; the netkit fallback runs exactly one",
			      pod->name);
			return -EOPNOTSUPP;
		}
		found = ids[i];
	}
	if (!found) {
		pr_err("netkit pod '%s' has no egress program at its peer hook",
		      pod->name);
		return -ENOENT;
	}
	fd = bpf_prog_get_fd_by_id(found);
	return fd < 0 ? -errno : fd;
}

static int free_guard_slot(const struct inject_state *s, uint32_t *slot)
{
	bool used[PI_DP_MAX_PODS] = { false };
	uint32_t key, next, *prev = NULL;
	struct pi_dp_netkit_guard g;

	while (!bpf_map_get_next_key(s->maps[IM_NETKIT_GUARDS], prev, &next)) {
		key = next;
		prev = &key;
		if (!bpf_map_lookup_elem(s->maps[IM_NETKIT_GUARDS], &key, &g) &&
		    g.slot < PI_DP_MAX_PODS)
			used[g.slot] = true;
	}
	for (uint32_t i = 0; i < PI_DP_MAX_PODS; i++) {
		if (!used[i]) {
			*slot = i;
			return 0;
		}
	}
	return -ENOSPC;
}

static void guard_detach(struct inject_state *s, const struct pi_pod_info *pod)
{
	struct pi_dp_netkit_guard g;
	char path[PATH_MAX];

	guard_pin(s, "guard", pod, path, sizeof(path));
	detach_prog(pod->ifindex, PI_HOOK_INGRESS, PI_ATTACH_TCX, PI_PRIO_HEAD,
		    path);
	guard_pin(s, "untag", pod, path, sizeof(path));
	detach_prog(pod->ifindex, PI_HOOK_NETKIT_PEER, PI_ATTACH_TCX,
		    PI_PRIO_HEAD, path);
	if (guard_pin_by_name(s, "guard", pod, path, sizeof(path)))
		detach_prog(pod->ifindex, PI_HOOK_INGRESS, PI_ATTACH_TCX,
			    PI_PRIO_HEAD, path);
	if (guard_pin_by_name(s, "untag", pod, path, sizeof(path)))
		detach_prog(pod->ifindex, PI_HOOK_NETKIT_PEER, PI_ATTACH_TCX,
			    PI_PRIO_HEAD, path);
	if (!bpf_map_lookup_elem(s->maps[IM_NETKIT_GUARDS], &pod->ifindex, &g)) {
		bpf_map_delete_elem(s->maps[IM_NETKIT_PEER_PROGS], &g.slot);
		bpf_map_delete_elem(s->maps[IM_NETKIT_GUARDS], &pod->ifindex);
	}
}

/* In the node's namespace. The untag program goes first at the peer hook
 * before the guard exists, so that no frame of the pod's reaches a guard
 * with the tag still on. `empty_ok`: a peer hook without exactly one
 * program of the CNI's gives a guard with an empty slot, which drops
 * every injected packet (as guard_follow leaves it when the CNI's program
 * goes), instead of no guard. */
static int guard_attach(struct inject_state *s, const struct pi_pod_info *pod,
			bool empty_ok)
{
	struct pi_dp_netkit_guard g = {};
	char path[PATH_MAX];
	int cni, err;

	cni = netkit_peer_program(s, pod);
	if (cni < 0 && !empty_ok)
		return cni;
	err = free_guard_slot(s, &g.slot);
	if (cni < 0) {
		if (!err)
			pr_err("netkit pod '%s': its guard runs no egress program; injected packets are dropped until it has exactly one",
			       pod->name);
	} else if (!err && bpf_map_update_elem(s->maps[IM_NETKIT_PEER_PROGS],
					       &g.slot, &cni, BPF_ANY)) {
		err = -errno;
		/* The prog array takes programs of its owner's kind only. */
		if (err == -EINVAL)
			pr_err("the egress program of netkit pod '%s' cannot be run by tail call (its program or attach type differs from a tc program's)",
			      pod->name);
	}
	if (cni >= 0)
		close(cni);
	if (err)
		return err;
	memcpy(g.pod_mac, pod->pod_mac, 6);
	if (bpf_map_update_elem(s->maps[IM_NETKIT_GUARDS], &pod->ifindex, &g,
				BPF_NOEXIST)) {
		err = -errno;
		bpf_map_delete_elem(s->maps[IM_NETKIT_PEER_PROGS], &g.slot);
		return err;
	}
	guard_pin(s, "untag", pod, path, sizeof(path));
	err = attach_prog(s->progs[IP_NETKIT_UNTAG], pod->ifindex,
			  PI_HOOK_NETKIT_PEER, PI_ATTACH_TCX, true,
			  PI_PRIO_HEAD, path);
	if (!err) {
		guard_pin(s, "guard", pod, path, sizeof(path));
		err = attach_prog(s->progs[IP_NETKIT_GUARD], pod->ifindex,
				  PI_HOOK_INGRESS, PI_ATTACH_TCX, true,
				  PI_PRIO_HEAD, path);
	}
	return err;
}

/*
 * In the node's namespace, for a guard in place. The CNI may have replaced
 * its egress program since the guard took it (a link update, or a detach
 * and a new attach): the slot then still holds the old program, which the
 * kernel keeps alive for it. So the program at the peer hook is looked up
 * again and the slot follows it. When the hook has none, or several, the
 * slot is emptied: the guard then drops injected packets (counted in
 * `missing`) rather than run them through a program the CNI gave up.
 */
static int guard_follow(struct inject_state *s, const struct pi_pod_info *pod,
			const struct pi_dp_netkit_guard *g)
{
	uint32_t old = 0, now;
	int cni, err = 0;

	bpf_map_lookup_elem(s->maps[IM_NETKIT_PEER_PROGS], &g->slot, &old);
	cni = netkit_peer_program(s, pod);
	if (cni < 0) {
		bpf_map_delete_elem(s->maps[IM_NETKIT_PEER_PROGS], &g->slot);
		pr_err("netkit pod '%s': the guard no longer runs any egress program; injected packets are dropped until it has exactly one",
		       pod->name);
		return cni;
	}
	now = prog_id(cni);
	if (now != old) {
		if (bpf_map_update_elem(s->maps[IM_NETKIT_PEER_PROGS], &g->slot,
					&cni, BPF_ANY)) {
			err = -errno;
			bpf_map_delete_elem(s->maps[IM_NETKIT_PEER_PROGS],
					    &g->slot);
			pr_err("netkit pod '%s': its egress program changed (id %u to %u) and the guard cannot run the new one: %s; injected packets are dropped",
			       pod->name, old, now, strerror(-err));
		} else {
			pr_info("netkit pod '%s': its egress program changed (id %u to %u); the guard follows",
				pod->name, old, now);
		}
	}
	close(cni);
	return err;
}

static int guard_set(const struct pi_node *n, struct inject_state *s,
		     const struct pi_pod_info *pod, bool wanted, bool empty_ok)
{
	struct pi_dp_netkit_guard g;
	int err = 0, saved;
	bool present;

	present = !bpf_map_lookup_elem(s->maps[IM_NETKIT_GUARDS],
				       &pod->ifindex, &g);
	if (!wanted && !present)
		return 0;
	err = node_enter(n, &saved);
	if (err)
		return err;
	if (wanted && present) {
		err = guard_follow(s, pod, &g);
	} else if (wanted) {
		err = guard_attach(s, pod, empty_ok);
		if (err)
			guard_detach(s, pod);
	} else {
		guard_detach(s, pod);
	}
	netns_restore(saved);
	return err;
}

int netkit_guard_sync(const struct pi_node *n, struct inject_state *s,
		      const struct pi_pod_info *pod)
{
	if (!(pod->flags & PI_POD_NETKIT))
		return 0;
	return guard_set(n, s, pod, netkit_fallback_wanted(s, pod), false);
}

static int sync_one(const struct pi_node *n, const struct pi_pod_info *pod, void *ctx)
{
	netkit_guard_sync(n, ctx, pod);
	return 0;
}

void netkit_guards_sync_all(const struct pi_node *n, struct inject_state *s)
{
	pod_for_each(n, sync_one, s);
}

uint32_t inject_granted_path(const struct inject_state *s,
			     const struct pi_pod_info *inj,
			     const struct pi_pod_info *tgt)
{
	struct pi_inject_key k[2];
	struct pi_inject_target t;
	int nk = target_key(inj, tgt, k);

	for (int j = 0; j < nk; j++)
		if (!bpf_map_lookup_elem(s->maps[IM_AUTH], &k[j], &t))
			return t.path;
	return 0;
}

/* Before a netkit fallback grant is put back: its target's guard, which the
 * failed command may have detached. The CNI's peer hook may have changed
 * meanwhile; a guard with an empty slot then drops what is injected until
 * it has one program again. False when no guard could be put in place. */
static bool guard_put_back(const struct pi_node *n, struct inject_state *s,
			   const struct pi_pod_info *targets, int ntargets,
			   uint32_t target_ifindex)
{
	struct pi_dp_netkit_guard g;

	for (int j = 0; j < ntargets; j++) {
		if (targets[j].ifindex != target_ifindex)
			continue;
		guard_set(n, s, &targets[j], true, true);
		if (bpf_map_lookup_elem(s->maps[IM_NETKIT_GUARDS],
					&target_ifindex, &g)) {
			pr_err("netkit pod '%s': its guard cannot be put back; the grant as it is removed",
			       targets[j].name);
			return false;
		}
	}
	return true;
}

void inject_undo(const struct pi_node *n, struct inject_state *s,
		 const struct pi_pod_info *targets, int ntargets,
		 struct inject_undo *u)
{
	for (int i = 0; i < u->nadded; i++)
		bpf_map_delete_elem(s->maps[IM_AUTH], &u->added[i]);
	/* the last saved first: a key saved twice ends as it was first */
	for (int i = u->nhad - 1; i >= 0; i--) {
		if (u->had_t[i].path == PI_DP_PATH_NETKIT_FALLBACK &&
		    !guard_put_back(n, s, targets, ntargets,
				    u->had_t[i].target_ifindex)) {
			/* no grant at all rather than one past the target's
			 * peer program */
			bpf_map_delete_elem(s->maps[IM_AUTH], &u->had_k[i]);
			continue;
		}
		bpf_map_update_elem(s->maps[IM_AUTH], &u->had_k[i],
				    &u->had_t[i], BPF_ANY);
	}
	u->nadded = u->nhad = 0;
	for (int i = 0; i < ntargets; i++)
		netkit_guard_sync(n, s, &targets[i]);
}

int inject_authorise(const struct pi_node *n, struct inject_state *s,
		     const struct pi_pod_info *inj,
		     const struct pi_pod_info *targets, int ntargets, uint32_t path,
		     struct inject_undo *u)
{
	int err = 0;

	u->nadded = u->nhad = 0;
	if (!path)
		path = inject_path_auto();
	for (int i = 0; i < ntargets && !err; i++) {
		struct pi_inject_target t = {
			.target_ifindex = targets[i].ifindex,
			.path = path,	/* the API's are the datapath's
					 * (lib/abi_ties.c) */
		};
		struct pi_inject_key k[2];
		int nk = target_key(inj, &targets[i], k);

		/* bpf_redirect(BPF_F_INGRESS) onto a netkit primary lands
		 * behind the pod's peer programs: the guard must run them. */
		if (path == PI_PATH_FALLBACK &&
		    (targets[i].flags & PI_POD_NETKIT)) {
			t.path = PI_DP_PATH_NETKIT_FALLBACK;
			/* In place before the key: the injector's head
			 * program may be attached already and take the path
			 * the moment the key exists. */
			err = guard_set(n, s, &targets[i], true, false);
			if (err)
				break;
		}
		memcpy(t.target_pod_mac, targets[i].pod_mac, 6);
		memcpy(t.target_host_mac, targets[i].host_mac, 6);
		for (int j = 0; j < nk && !err; j++) {
			struct pi_inject_target old;

			/* New keys are undone by deleting them, others by
			 * what they said before (an `inject allow` that
			 * changes a grant's path and fails changes nothing). */
			if (bpf_map_lookup_elem(s->maps[IM_AUTH], &k[j], &old)) {
				u->added[u->nadded++] = k[j];
			} else {
				u->had_k[u->nhad] = k[j];
				u->had_t[u->nhad++] = old;
			}
			if (bpf_map_update_elem(s->maps[IM_AUTH], &k[j], &t,
						BPF_ANY))
				err = -errno;
		}
		/* A target moved off the netkit fallback loses its guard. */
		if (!err && t.path != PI_DP_PATH_NETKIT_FALLBACK)
			err = netkit_guard_sync(n, s, &targets[i]);
	}
	if (err)
		inject_undo(n, s, targets, ntargets, u);
	return err;
}

/* The node's netkit tag, as loaded: shown so that a test can forge it. */
static void netkit_tag(const struct inject_state *s, char *buf, size_t len)
{
	struct inject_bpf__rodata ro;
	uint32_t zero = 0;
	const uint8_t *t = (const uint8_t *)ro.netkit_tag;

	if (bpf_map_lookup_elem(s->maps[IM_CONFIG], &zero, &ro)) {
		snprintf(buf, len, "?");
		return;
	}
	snprintf(buf, len, "%02x:%02x:%02x:%02x:%02x:%02x", t[0], t[1], t[2],
		 t[3], t[4], t[5]);
}

/* A netkit pod's guard follows the CNI's program at the peer hook. */
int inject_guard_follow(const struct pi_node *n, const struct pi_pod_info *pod)
{
	struct inject_state s;
	int err;

	if (!(pod->flags & PI_POD_NETKIT) || inject_open(n, &s, false))
		return 0;
	err = netkit_guard_sync(n, &s, pod);
	inject_close(&s);
	return err;
}

static int inject_feature_check(struct pi_node *n, const struct pi_pod_info *pod)
{
	return inject_guard_follow(n, pod);
}

int inject_forget_pod(struct pi_node *n, const struct pi_pod_info *pod)
{
	struct pi_inject_key key, next, *prev = NULL;
	struct pi_inject_stats_key skey, snext, *sprev = NULL;
	struct pi_inject_target t;
	struct inject_state s;
	int removed = 0;

	if (inject_open(n, &s, false))
		return 0;
	while (!bpf_map_get_next_key(s.maps[IM_AUTH], prev, &next)) {
		if (next.injector_ifindex == pod->ifindex ||
		    (!bpf_map_lookup_elem(s.maps[IM_AUTH], &next, &t) &&
		     t.target_ifindex == pod->ifindex)) {
			bpf_map_delete_elem(s.maps[IM_AUTH], &next);
			removed++;
			prev = NULL;
			continue;
		}
		key = next;
		prev = &key;
	}
	while (!bpf_map_get_next_key(s.maps[IM_STATS], sprev, &snext)) {
		if (snext.injector_ifindex == pod->ifindex ||
		    snext.target_ifindex == pod->ifindex) {
			bpf_map_delete_elem(s.maps[IM_STATS], &snext);
			sprev = NULL;
			continue;
		}
		skey = snext;
		sprev = &skey;
	}
	if (head_attached(&s, pod))
		head_detach(n, &s, pod);
	/* the reply hook a probe (or a proxy rule) put on the pod's eth0:
	 * a pin named by the ifindex, which a later pod may get */
	detach_in_pod(n, &s, pod, "reply");
	head_roles_clear(&s, pod->ifindex);
	/* the guards follow the grants: only these were taken */
	if (removed)
		netkit_guards_sync_all(n, &s);
	inject_close(&s);
	return 0;
}

static int find_pods(struct pi_node *n, const char *const *names, int cnt,
		     struct pi_pod_info *pods)
{
	if (cnt > MAX_AS) {
		pr_err("at most %d pods at once", MAX_AS);
		return -EINVAL;
	}
	for (int i = 0; i < cnt; i++) {
		int err = pod_lookup(n, names[i], &pods[i]);

		if (err)
			return err;
	}
	return 0;
}

int pi_inject_path_auto(void)
{
	return inject_path_auto();
}

int pi_inject_allow(struct pi_node *n, const char *injector,
		    const char *const *as, int nas, uint32_t path,
		    uint32_t *path_used)
{
	struct pi_pod_info inj, targets[MAX_AS];
	struct pi_inject_key added[MAX_AS * 2], had_k[MAX_AS * 2];
	struct pi_inject_target had_t[MAX_AS * 2];
	struct inject_undo u = { .added = added, .had_k = had_k,
				 .had_t = had_t };
	struct inject_state s;
	int created = 0, err;
	bool new_link = false;

	if (node_require_write(n, "inject allow"))
		return -EBADF;
	inject_open_none(&s);
	err = find_pods(n, &injector, 1, &inj);
	if (!err)
		err = find_pods(n, as, nas, targets);
	if (err)
		return err;
	if (!nas) {
		pr_err("an injector needs at least one pod to inject as");
		return -EINVAL;
	}
	if (path > PI_PATH_FALLBACK) {
		pr_err("path %u is not fast, fallback or auto", path);
		return -EINVAL;
	}
	for (int i = 0; i < nas; i++) {
		if (targets[i].ifindex == inj.ifindex) {
			pr_err("pod '%s' cannot inject as itself", inj.name);
			return -EINVAL;
		}
	}
	if (!path)
		path = inject_path_auto();

	created = inject_open(n, &s, true);
	if (created < 0) {
		err = created;
		pr_err("cannot load the injection program: %s", strerror(-err));
		return err;
	}
	err = inject_authorise(n, &s, &inj, targets, nas, path, &u);
	if (err) {
		pr_err("cannot authorise '%s': %s", inj.name, strerror(-err));
		goto out;
	}
	new_link = !head_attached(&s, &inj);
	err = head_acquire(n, &s, &inj, PI_HEAD_INJECT);
	if (err) {
		new_link = false;
		pr_err("cannot attach injection to '%s': %s", inj.name,
		       strerror(-err));
		goto out;
	}
	if (path_used)
		*path_used = path;
out:
	if (err) {
		inject_undo(n, &s, targets, nas, &u);
		if (new_link || !inject_auth_count(&s, inj.ifindex))
			head_release(n, &s, &inj, PI_HEAD_INJECT);
		netkit_guards_sync_all(n, &s);
		if (created == 1)
			rm_tree(s.dir);
	}
	inject_close(&s);
	return err;
}

/* Whether inj's grant for the pod `target` belongs to a proxy rule: the
 * pod is proxied (either way) by inj, whose upstream connections are its
 * injections as the pod. */
static bool grant_of_proxy_rule(const struct inject_state *s,
				uint32_t inj, uint32_t target)
{
	static const int maps[] = { IM_PROXY_RULES, IM_PROXY_INBOUND_RULES };
	struct pi_dp_proxy_rule r;

	for (int i = 0; i < 2; i++)
		if (s->maps[maps[i]] >= 0 &&
		    !bpf_map_lookup_elem(s->maps[maps[i]], &target, &r) &&
		    r.proxy_ifindex == inj)
			return true;
	return false;
}

int inject_deny(struct pi_node *n, const char *injector,
		const char *const *as, int nas, bool proxies_too)
{
	struct pi_pod_info inj, targets[MAX_AS];
	struct pi_inject_key key, next, *prev = NULL;
	struct pi_inject_target t;
	struct inject_state s;
	int err, removed = 0, kept = 0;

	if (node_require_write(n, "inject deny"))
		return -EBADF;
	err = find_pods(n, &injector, 1, &inj);
	if (!err)
		err = find_pods(n, as, nas, targets);
	if (err)
		return err;
	if (inject_open(n, &s, false)) {
		pr_err("pod '%s' is no injector", inj.name);
		return -ESRCH;
	}
	/* A proxy rule's grant goes with the rule (`proxy del`): taken alone,
	 * the rule would stay without its upstream, and an export of the
	 * node, which writes the rule and leaves its grant implied, would
	 * bring the grant back on apply. */
	for (int i = 0; i < nas && !proxies_too; i++) {
		if (grant_of_proxy_rule(&s, inj.ifindex, targets[i].ifindex)) {
			pr_err("'%s' injects as '%s' for its proxy rule: `proxy del %s --for %s` removes it",
			       inj.name, targets[i].name, inj.name,
			       targets[i].name);
			inject_close(&s);
			return -EINVAL;
		}
	}
	if (nas) {
		for (int i = 0; i < nas; i++) {
			struct pi_inject_key k[2];
			int nk = target_key(&inj, &targets[i], k);

			for (int j = 0; j < nk; j++)
				removed += !bpf_map_delete_elem(s.maps[IM_AUTH], &k[j]);
		}
	} else {
		while (!bpf_map_get_next_key(s.maps[IM_AUTH], prev, &next)) {
			key = next;
			prev = &key;
			if (next.injector_ifindex != inj.ifindex)
				continue;
			if (!proxies_too &&
			    !bpf_map_lookup_elem(s.maps[IM_AUTH], &next, &t) &&
			    grant_of_proxy_rule(&s, inj.ifindex,
						t.target_ifindex))
				continue;
			bpf_map_delete_elem(s.maps[IM_AUTH], &next);
			removed++;
			prev = NULL;	/* the walk restarts */
		}
		/* what is left of the injector's is its proxy rules' */
		kept = inject_auth_count(&s, inj.ifindex);
	}
	if (!removed) {
		if (kept > 0)
			pr_err("pod '%s' injects only for its proxy rules: `proxy del` removes those",
			       inj.name);
		else
			pr_err("pod '%s' has no such authorisation", inj.name);
		err = -ESRCH;
	} else {
		if (kept > 0)
			pr_info("kept %d authorisation%s of '%s''s proxy rules",
				kept, kept > 1 ? "s" : "", inj.name);
		if (!inject_auth_count(&s, inj.ifindex))
			head_release(n, &s, &inj, PI_HEAD_INJECT);
		netkit_guards_sync_all(n, &s);
		err = removed;
	}
	inject_close(&s);
	return err;
}

int pi_inject_deny(struct pi_node *n, const char *injector,
		   const char *const *as, int nas)
{
	return inject_deny(n, injector, as, nas, false);
}

int pi_inject_list(struct pi_node *n, struct pi_inject_auth_info **out)
{
	struct pi_inject_key key, next, *prev = NULL;
	struct pi_inject_auth_info *all;
	struct pi_inject_target t;
	struct inject_state s;
	int cnt = 0;

	*out = NULL;
	all = calloc(PI_MAX_INJECT + 1, sizeof(*all));
	if (!all)
		return -ENOMEM;
	if (!inject_open(n, &s, false)) {
		while (cnt < PI_MAX_INJECT &&
		       !bpf_map_get_next_key(s.maps[IM_AUTH], prev, &next)) {
			struct pi_inject_auth_info *a = &all[cnt];

			key = next;
			prev = &key;
			if (bpf_map_lookup_elem(s.maps[IM_AUTH], &key, &t))
				continue;
			pod_name_by_ifindex(n, key.injector_ifindex, a->injector,
					    sizeof(a->injector));
			pod_name_by_ifindex(n, t.target_ifindex, a->as,
					    sizeof(a->as));
			a->family = key.family;
			a->addr = addr_from_dp(&key.addr);
			a->path = t.path;
			cnt++;
		}
		inject_close(&s);
	}
	*out = all;
	return cnt;
}

/* A guard of the API from the netkit_guards map's. */
static void guard_from_dp(struct pi_netkit_guard *g,
			  const struct pi_dp_netkit_guard *d)
{
	*g = (struct pi_netkit_guard){
		.slot = d->slot,
		.runs = d->runs,
		.missing = d->missing,
		.forged = d->forged,
	};
	memcpy(g->pod_mac, d->pod_mac, 6);
}

int pi_inject_stats(struct pi_node *n, struct pi_inject_stat_info **out)
{
	struct pi_inject_stats_key key, next, *prev = NULL;
	struct pi_inject_stat_info *all;
	struct pi_inject_stats sum;
	struct inject_state s;
	int cnt = 0;

	*out = NULL;
	all = calloc(PI_MAX_INJECT + 1, sizeof(*all));
	if (!all)
		return -ENOMEM;
	if (!inject_open(n, &s, false)) {
		while (cnt < PI_MAX_INJECT &&
		       !bpf_map_get_next_key(s.maps[IM_STATS], prev, &next)) {
			struct pi_inject_stat_info *st = &all[cnt];
			struct pi_dp_netkit_guard g;

			key = next;
			prev = &key;
			if (percpu_sum(s.maps[IM_STATS], &key, &sum,
				       sizeof(sum)))
				continue;
			st->packets = sum.packets;
			st->bytes = sum.bytes;
			/* the API's reasons are the datapath's
			 * (lib/abi_ties.c) */
			for (int r = 0; r < PI_DP_INJ_DROP_MAX; r++)
				st->drops[r] = sum.drops[r];
			pod_name_by_ifindex(n, key.injector_ifindex, st->injector,
					    sizeof(st->injector));
			pod_name_by_ifindex(n, key.target_ifindex, st->as,
					    sizeof(st->as));
			st->path = key.path;
			/* The guard's counters are the target's, whoever
			 * injected: given with each netkit-fallback row. */
			st->has_guard = key.path == PI_DP_PATH_NETKIT_FALLBACK &&
				!bpf_map_lookup_elem(s.maps[IM_NETKIT_GUARDS],
						     &key.target_ifindex, &g);
			if (st->has_guard) {
				guard_from_dp(&st->guard, &g);
				netkit_tag(&s, st->tag, sizeof(st->tag));
			}
			cnt++;
		}
		inject_close(&s);
	}
	*out = all;
	return cnt;
}

int pi_inject_refusals(struct pi_node *n, uint64_t counts[PI_INJ_REFUSALS])
{
	struct inject_state s;
	int err;

	memset(counts, 0, PI_INJ_REFUSALS * sizeof(counts[0]));
	err = inject_open(n, &s, false);
	if (err == -ENOENT)
		return 0;	/* nothing injected or captured on the node yet */
	if (err)
		return err;
	/* the API's reasons are the datapath's (lib/abi_ties.c) */
	for (uint32_t i = 0; i < PI_INJ_REFUSALS && !err; i++)
		err = percpu_sum(s.maps[IM_REFUSALS], &i, &counts[i],
				 sizeof(counts[i]));
	inject_close(&s);
	return err;
}

/* How many entries `fd` holds, counted up to `most` (a key the walk
 * stepped on deleted under it sends it back to the first: an entry may
 * be counted twice, never missed, so the count is no less than the
 * entries that stayed). */
static uint32_t flow_entries_upto(int fd, uint32_t most)
{
	struct pi_flow_key key, next;
	uint32_t cnt = 0;

	if (fd < 0)
		return 0;
	while (cnt < most &&
	       !bpf_map_get_next_key(fd, cnt ? &key : NULL, &next)) {
		key = next;
		cnt++;
	}
	return cnt;
}

int pi_proxy_flow_sweep(struct pi_node *n, struct pi_flow_sweep_info *out)
{
	struct pi_flow_sweep sw;
	struct inject_state s;
	__u32 zero = 0;
	int err;

	memset(out, 0, sizeof(*out));
	err = inject_open(n, &s, false);
	if (err == -ENOENT)
		return 0;	/* nothing injected or captured on the node yet */
	if (err)
		return err;
	if (bpf_map_lookup_elem(s.maps[IM_FLOW_SWEEP], &zero, &sw)) {
		err = -errno;
	} else if (sw.pending) {
		/* The round's count stays until the next round, which may be
		 * the backstop's 30 s away; an entry taken out since (its
		 * connection closed) is no longer untimed: at most the
		 * entries the tables hold now. */
		uint32_t held = flow_entries_upto(s.maps[IM_PROXY_FLOWS],
						  sw.pending);

		held += flow_entries_upto(s.maps[IM_PROXY_UPSTREAM],
					  sw.pending - held);
		if (held < sw.pending)
			sw.pending = held;
	}
	inject_close(&s);
	if (err)
		return err;
	out->untimed = sw.untimed;
	out->rounds = sw.rounds;
	out->round_ns = sw.round_ns;
	out->live = sw.live;
	out->armed = sw.armed;
	out->expired = sw.expired;
	out->pending = sw.pending;
	return 0;
}

static void inject_feature_forget(struct pi_node *n, const struct pi_pod_info *pod)
{
	inject_forget_pod(n, pod);
}

/* A pod starts with nothing a former pod of its ifindex left: grants as
 * or for that ifindex, its statistics, its head's and reply hook's pins
 * (a probe killed, or a pod gone while a probe waited, leaves them). Its
 * device is new: the pins are only unlinked. */
static int inject_feature_reset(struct pi_node *n, const struct pi_pod_info *pod)
{
	struct inject_state s;

	if (inject_open(n, &s, false))
		return 0;
	reply_hook_unpin(&s, pod);
	inject_close(&s);
	return inject_forget_pod(n, pod);
}

const struct pi_feature inject_feature = {
	.name = "inject",
	.leave_pod = inject_feature_forget,
	.reset_pod = inject_feature_reset,
	.check_pod = inject_feature_check,
};
