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
#include "cmds.h"
#include "inject.h"
#include "inject.skel.h"
#include "kernel_features.h"
#include "nl.h"
#include "util.h"


static const char *const path_names[] = PI_PATH_NAMES;
static const char *const inj_drop_names[PI_INJ_DROP_MAX] = PI_INJ_DROP_NAMES;

static int inject_help(int argc, char **argv)
{
	fprintf(stderr,
		"Usage: podinject [-N NODE] inject allow INJECTOR --as POD [--as POD ...]\n"
		"                                 [--path fast|fallback|auto]\n"
		"       podinject [-N NODE] inject deny INJECTOR [--as POD ...]\n"
		"       podinject [-N NODE] [-j] inject list\n"
		"       podinject [-N NODE] [-j] inject stats\n"
		"\n"
		"An authorised INJECTOR pod may send packets with POD's source\n"
		"address; they are emitted into POD's egress datapath, where POD's\n"
		"egress programs run on them once. Without authorisation such\n"
		"packets stay spoofed and the datapath drops them.\n"
		"--path: fast = bpf_redirect_peer(BPF_F_EGRESS), fallback =\n"
		"bpf_redirect(BPF_F_INGRESS), auto (default) = fast where the\n"
		"kernel has it. The fallback onto a netkit pod is the netkit\n"
		"fallback: a guard at the pod's primary runs the pod's peer\n"
		"program on injected packets, once (docs/datapath.md).\n");
	return EXIT_OK;
}

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
};

const char *const inject_prog_names[IP__COUNT] = {
	[IP_EGRESS] = "inject_egress",
	[IP_POD_REPLY] = "pod_reply",
	[IP_PROXY_ASSIGN] = "proxy_assign",
	[IP_NETKIT_GUARD] = "netkit_guard",
	[IP_NETKIT_UNTAG] = "netkit_untag",
	[IP_PROXY_LOOKUP] = "proxy_lookup",
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
int head_attach(const struct pi_node *n, struct inject_state *s,
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
	detach_prog(pod->ifindex, injector_hook(pod), mode, PI_PRIO_HEAD,
		    path);
	netns_restore(saved);
}

static int auth_count(const struct inject_state *s, uint32_t injector);

void head_release(const struct pi_node *n, struct inject_state *s,
		  const struct pi_pod_info *pod)
{
	struct pi_proxy_rule r;

	if (!head_attached(s, pod) || auth_count(s, pod->ifindex) ||
	    !bpf_map_lookup_elem(s->maps[IM_PROXY_RULES], &pod->ifindex, &r))
		return;
	head_detach(n, s, pod);
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

/* Number of authorisations the injector has left. */
static int auth_count(const struct inject_state *s, uint32_t injector)
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

static int parse_as_list(const struct pi_node *n, int argc, char **argv,
			 struct pi_pod_info *targets, int *ntargets,
			 uint32_t *path, bool allow_path)
{
	*ntargets = 0;
	while (argc > 0) {
		if (argc < 2)
			return usage_err("'%s' needs a value", argv[0]);
		if (!strcmp(argv[0], "--as")) {
			if (*ntargets >= MAX_AS)
				return usage_err("at most %d --as", MAX_AS);
			if (!pi_valid_pod_name(argv[1]))
				return usage_err("invalid pod name '%s'", argv[1]);
			if (pod_find(n, argv[1], &targets[*ntargets])) {
				p_err("no pod '%s' on node '%s'", argv[1],
				      n->name);
				return EXIT_USAGE;
			}
			(*ntargets)++;
		} else if (allow_path && !strcmp(argv[0], "--path")) {
			if (!strcmp(argv[1], "fast"))
				*path = PI_PATH_FAST;
			else if (!strcmp(argv[1], "fallback"))
				*path = PI_PATH_FALLBACK;
			else if (!strcmp(argv[1], "auto"))
				*path = 0;
			else
				return usage_err("invalid --path '%s': fast, fallback or auto",
						 argv[1]);
		} else {
			return usage_err("unknown argument '%s'", argv[0]);
		}
		argc -= 2;
		argv += 2;
	}
	return 0;
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
		    t.path == PI_PATH_NETKIT_FALLBACK)
			return true;
	}
	return false;
}

static void guard_pin(const struct inject_state *s, const char *what,
		      const struct pi_pod_info *pod, char *buf, size_t len)
{
	snprintf(buf, len, "%s/link_%s_%s", s->dir, what, pod->name);
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
			p_err("netkit pod '%s' has several programs at its peer hook; the netkit fallback runs exactly one",
			      pod->name);
			return -EOPNOTSUPP;
		}
		found = ids[i];
	}
	if (!found) {
		p_err("netkit pod '%s' has no egress program at its peer hook",
		      pod->name);
		return -ENOENT;
	}
	fd = bpf_prog_get_fd_by_id(found);
	return fd < 0 ? -errno : fd;
}

static int free_guard_slot(const struct inject_state *s, uint32_t *slot)
{
	bool used[PI_MAX_PODS] = { false };
	uint32_t key, next, *prev = NULL;
	struct pi_netkit_guard g;

	while (!bpf_map_get_next_key(s->maps[IM_NETKIT_GUARDS], prev, &next)) {
		key = next;
		prev = &key;
		if (!bpf_map_lookup_elem(s->maps[IM_NETKIT_GUARDS], &key, &g) &&
		    g.slot < PI_MAX_PODS)
			used[g.slot] = true;
	}
	for (uint32_t i = 0; i < PI_MAX_PODS; i++) {
		if (!used[i]) {
			*slot = i;
			return 0;
		}
	}
	return -ENOSPC;
}

static void guard_detach(struct inject_state *s, const struct pi_pod_info *pod)
{
	struct pi_netkit_guard g;
	char path[PATH_MAX];

	guard_pin(s, "guard", pod, path, sizeof(path));
	detach_prog(pod->ifindex, PI_HOOK_INGRESS, PI_ATTACH_TCX, PI_PRIO_HEAD,
		    path);
	guard_pin(s, "untag", pod, path, sizeof(path));
	detach_prog(pod->ifindex, PI_HOOK_NETKIT_PEER, PI_ATTACH_TCX,
		    PI_PRIO_HEAD, path);
	if (!bpf_map_lookup_elem(s->maps[IM_NETKIT_GUARDS], &pod->ifindex, &g)) {
		bpf_map_delete_elem(s->maps[IM_NETKIT_PEER_PROGS], &g.slot);
		bpf_map_delete_elem(s->maps[IM_NETKIT_GUARDS], &pod->ifindex);
	}
}

/* In the node's namespace. The untag program goes first at the peer hook
 * before the guard exists, so that no frame of the pod's reaches a guard
 * with the tag still on. */
static int guard_attach(struct inject_state *s, const struct pi_pod_info *pod)
{
	struct pi_netkit_guard g = {};
	char path[PATH_MAX];
	int cni, err;

	cni = netkit_peer_program(s, pod);
	if (cni < 0)
		return cni;
	err = free_guard_slot(s, &g.slot);
	if (!err && bpf_map_update_elem(s->maps[IM_NETKIT_PEER_PROGS], &g.slot,
					&cni, BPF_ANY)) {
		err = -errno;
		/* The prog array takes programs of its owner's kind only. */
		if (err == -EINVAL)
			p_err("the egress program of netkit pod '%s' cannot be run by tail call (its program or attach type differs from a tc program's)",
			      pod->name);
	}
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

static int guard_set(const struct pi_node *n, struct inject_state *s,
		     const struct pi_pod_info *pod, bool wanted)
{
	struct pi_netkit_guard g;
	int err = 0, saved;
	bool present;

	present = !bpf_map_lookup_elem(s->maps[IM_NETKIT_GUARDS],
				       &pod->ifindex, &g);
	if (wanted == present)
		return 0;
	err = node_enter(n, &saved);
	if (err)
		return err;
	if (wanted) {
		err = guard_attach(s, pod);
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
	return guard_set(n, s, pod, netkit_fallback_wanted(s, pod));
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

int inject_authorise(const struct pi_node *n, struct inject_state *s,
		     const struct pi_pod_info *inj,
		     const struct pi_pod_info *targets, int ntargets, uint32_t path,
		     struct pi_inject_key *added, int *nadded)
{
	int err = 0;

	*nadded = 0;
	if (!path)
		path = inject_path_auto();
	for (int i = 0; i < ntargets && !err; i++) {
		struct pi_inject_target t = {
			.target_ifindex = targets[i].ifindex,
			.path = path,
		};
		struct pi_inject_key k[2];
		int nk = target_key(inj, &targets[i], k);

		/* bpf_redirect(BPF_F_INGRESS) onto a netkit primary lands
		 * behind the pod's peer programs: the guard must run them. */
		if (path == PI_PATH_FALLBACK &&
		    (targets[i].flags & PI_POD_NETKIT)) {
			t.path = PI_PATH_NETKIT_FALLBACK;
			/* In place before the key: the injector's head
			 * program may be attached already and take the path
			 * the moment the key exists. */
			err = guard_set(n, s, &targets[i], true);
			if (err)
				break;
		}
		memcpy(t.target_pod_mac, targets[i].pod_mac, 6);
		memcpy(t.target_host_mac, targets[i].host_mac, 6);
		for (int j = 0; j < nk && !err; j++) {
			struct pi_inject_target old;

			/* Only new keys are ours to undo. */
			if (bpf_map_lookup_elem(s->maps[IM_AUTH], &k[j], &old))
				added[(*nadded)++] = k[j];
			if (bpf_map_update_elem(s->maps[IM_AUTH], &k[j], &t,
						BPF_ANY))
				err = -errno;
		}
		/* A target moved off the netkit fallback loses its guard. */
		if (!err && t.path != PI_PATH_NETKIT_FALLBACK)
			err = netkit_guard_sync(n, s, &targets[i]);
	}
	if (err) {
		for (int i = 0; i < *nadded; i++)
			bpf_map_delete_elem(s->maps[IM_AUTH], &added[i]);
		*nadded = 0;
		for (int i = 0; i < ntargets; i++)
			netkit_guard_sync(n, s, &targets[i]);
	}
	return err;
}

static int inject_allow(int argc, char **argv)
{
	struct pi_pod_info inj, targets[MAX_AS];
	struct pi_inject_key keys[MAX_AS * 2];
	struct inject_state s;
	struct pi_node n;
	uint32_t path = 0;
	int ntargets, nkeys = 0, created = 0, err, ret = EXIT_RUNTIME;
	bool new_link = false;

	if (argc < 1)
		return usage_err("inject allow needs an INJECTOR pod");
	if (!pi_valid_pod_name(argv[0]))
		return usage_err("invalid pod name '%s'", argv[0]);
	if (node_open_rw(&n))
		return EXIT_RUNTIME;
	inject_open_none(&s);
	if (pod_find(&n, argv[0], &inj)) {
		p_err("no pod '%s' on node '%s'", argv[0], n.name);
		ret = EXIT_USAGE;
		goto out;
	}
	err = parse_as_list(&n, argc - 1, argv + 1, targets, &ntargets, &path,
			    true);
	if (err) {
		ret = err;
		goto out;
	}
	if (!ntargets) {
		ret = usage_err("inject allow needs at least one --as POD");
		goto out;
	}
	for (int i = 0; i < ntargets; i++) {
		if (targets[i].ifindex == inj.ifindex) {
			ret = usage_err("pod '%s' cannot inject as itself",
					inj.name);
			goto out;
		}
	}
	if (!path)
		path = inject_path_auto();

	created = inject_open(&n, &s, true);
	if (created < 0) {
		p_err("cannot load the injection program: %s",
		      strerror(-created));
		goto out;
	}
	err = inject_authorise(&n, &s, &inj, targets, ntargets, path, keys,
			       &nkeys);
	if (err) {
		p_err("cannot authorise '%s': %s", inj.name, strerror(-err));
		goto out;
	}
	if (!head_attached(&s, &inj)) {
		err = head_attach(&n, &s, &inj);
		if (err) {
			p_err("cannot attach injection to '%s': %s", inj.name,
			      strerror(-err));
			goto out;
		}
		new_link = true;
	}
	ret = EXIT_OK;
	p_info("pod %s may inject as %d pod%s (path %s)", inj.name, ntargets,
	       ntargets > 1 ? "s" : "", path_names[path]);
out:
	if (ret != EXIT_OK) {
		for (int i = 0; i < nkeys; i++)
			bpf_map_delete_elem(s.maps[IM_AUTH], &keys[i]);
		if (new_link)
			head_detach(&n, &s, &inj);
		netkit_guards_sync_all(&n, &s);
		if (created == 1)
			rm_tree(s.dir);
	}
	inject_close(&s);
	node_close(&n);
	return ret;
}

static int inject_deny(int argc, char **argv)
{
	struct pi_pod_info inj, targets[MAX_AS];
	struct inject_state s;
	struct pi_inject_key key, next, *prev = NULL;
	struct pi_node n;
	uint32_t path;
	int ntargets, err, removed = 0, ret = EXIT_RUNTIME;

	if (argc < 1)
		return usage_err("inject deny needs an INJECTOR pod");
	if (!pi_valid_pod_name(argv[0]))
		return usage_err("invalid pod name '%s'", argv[0]);
	if (node_open_rw(&n))
		return EXIT_RUNTIME;
	if (pod_find(&n, argv[0], &inj)) {
		p_err("no pod '%s' on node '%s'", argv[0], n.name);
		ret = EXIT_USAGE;
		goto out_node;
	}
	err = parse_as_list(&n, argc - 1, argv + 1, targets, &ntargets, &path,
			    false);
	if (err) {
		ret = err;
		goto out_node;
	}
	if (inject_open(&n, &s, false)) {
		p_err("pod '%s' is no injector", inj.name);
		ret = EXIT_USAGE;
		goto out_node;
	}
	if (ntargets) {
		for (int i = 0; i < ntargets; i++) {
			struct pi_inject_key k[2];
			int nk = target_key(&inj, &targets[i], k);

			for (int j = 0; j < nk; j++)
				removed += !bpf_map_delete_elem(s.maps[IM_AUTH], &k[j]);
		}
	} else {
		while (!bpf_map_get_next_key(s.maps[IM_AUTH], prev, &next)) {
			if (next.injector_ifindex == inj.ifindex) {
				bpf_map_delete_elem(s.maps[IM_AUTH], &next);
				removed++;
				prev = NULL;	/* the walk restarts */
				continue;
			}
			key = next;
			prev = &key;
		}
	}
	if (!removed) {
		p_err("pod '%s' has no such authorisation", inj.name);
		ret = EXIT_USAGE;
		goto out;
	}
	head_release(&n, &s, &inj);
	netkit_guards_sync_all(&n, &s);
	ret = EXIT_OK;
	p_info("removed %d authorisation%s of %s", removed,
	       removed > 1 ? "s" : "", inj.name);
out:
	inject_close(&s);
out_node:
	node_close(&n);
	return ret;
}

static int inject_list(int argc, char **argv)
{
	struct pi_inject_key key, next, *prev = NULL;
	struct pi_inject_target t;
	struct inject_state s;
	struct pi_node n;

	if (argc > 0)
		return usage_err("unknown argument '%s'", argv[0]);
	if (node_open_ro(&n))
		return EXIT_RUNTIME;
	if (json_output)
		json_arr_open(jw);
	else
		printf("%-12s %-12s %-28s %s\n", "INJECTOR", "AS", "ADDRESS",
		       "PATH");
	if (!inject_open(&n, &s, false)) {
		while (!bpf_map_get_next_key(s.maps[IM_AUTH], prev, &next)) {
			char inj[PI_NAME_LEN], tgt[PI_NAME_LEN], addr[64];

			key = next;
			prev = &key;
			if (bpf_map_lookup_elem(s.maps[IM_AUTH], &key, &t))
				continue;
			pod_name_by_ifindex(&n, key.injector_ifindex, inj, sizeof(inj));
			pod_name_by_ifindex(&n, t.target_ifindex, tgt, sizeof(tgt));
			pi_fmt_addr(key.family, &key.addr, -1, addr, sizeof(addr));
			if (json_output) {
				json_obj_open(jw);
				json_kstr(jw, "injector", inj);
				json_kstr(jw, "as", tgt);
				json_kstr(jw, "address", addr);
				json_kstr(jw, "path", path_names[t.path]);
				json_obj_close(jw);
			} else {
				printf("%-12s %-12s %-28s %s\n", inj, tgt, addr,
				       path_names[t.path]);
			}
		}
		inject_close(&s);
	}
	if (json_output) {
		json_arr_close(jw);
		json_end(jw);
	}
	node_close(&n);
	return EXIT_OK;
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

static int inject_stats(int argc, char **argv)
{
	struct pi_inject_stats_key key, next, *prev = NULL;
	int ncpu = libbpf_num_possible_cpus();
	struct pi_inject_stats *per;
	struct inject_state s;
	struct pi_node n;

	if (argc > 0)
		return usage_err("unknown argument '%s'", argv[0]);
	if (node_open_ro(&n))
		return EXIT_RUNTIME;
	per = calloc(ncpu > 0 ? ncpu : 1, sizeof(*per));
	if (json_output)
		json_arr_open(jw);
	else
		printf("%-12s %-12s %-15s %10s %12s  %s\n", "INJECTOR", "AS",
		       "PATH", "PACKETS", "BYTES", "DROPS");
	if (per && !inject_open(&n, &s, false)) {
		while (!bpf_map_get_next_key(s.maps[IM_STATS], prev, &next)) {
			struct pi_inject_stats sum = {};
			char inj[PI_NAME_LEN], tgt[PI_NAME_LEN];
			struct pi_netkit_guard g;
			char tag[24];
			bool has_guard;

			key = next;
			prev = &key;
			if (bpf_map_lookup_elem(s.maps[IM_STATS], &key, per))
				continue;
			for (int c = 0; c < ncpu; c++) {
				sum.packets += per[c].packets;
				sum.bytes += per[c].bytes;
				for (int r = 0; r < PI_INJ_DROP_MAX; r++)
					sum.drops[r] += per[c].drops[r];
			}
			pod_name_by_ifindex(&n, key.injector_ifindex, inj, sizeof(inj));
			pod_name_by_ifindex(&n, key.target_ifindex, tgt, sizeof(tgt));
			/* The guard's counters are the target's, whoever
			 * injected: shown with each netkit-fallback row. */
			has_guard = key.path == PI_PATH_NETKIT_FALLBACK &&
				    !bpf_map_lookup_elem(s.maps[IM_NETKIT_GUARDS],
							 &key.target_ifindex, &g);
			if (has_guard)
				netkit_tag(&s, tag, sizeof(tag));
			if (json_output) {
				json_obj_open(jw);
				json_kstr(jw, "injector", inj);
				json_kstr(jw, "as", tgt);
				json_kstr(jw, "path", key.path <= PI_PATH_MAX ?
					  path_names[key.path] : "?");
				json_ku64(jw, "packets", sum.packets);
				json_ku64(jw, "bytes", sum.bytes);
				json_key(jw, "drops");
				json_obj_open(jw);
				for (int r = 0; r < PI_INJ_DROP_MAX; r++)
					json_ku64(jw, inj_drop_names[r],
						  sum.drops[r]);
				json_obj_close(jw);
				if (has_guard) {
					json_key(jw, "guard");
					json_obj_open(jw);
					json_kstr(jw, "tag", tag);
					json_ku64(jw, "runs", g.runs);
					json_ku64(jw, "missing", g.missing);
					json_ku64(jw, "forged", g.forged);
					json_obj_close(jw);
				}
				json_obj_close(jw);
			} else {
				printf("%-12s %-12s %-15s %10llu %12llu ", inj,
				       tgt, key.path <= PI_PATH_MAX ?
				       path_names[key.path] : "?",
				       (unsigned long long)sum.packets,
				       (unsigned long long)sum.bytes);
				for (int r = 0; r < PI_INJ_DROP_MAX; r++)
					printf(" %s %llu", inj_drop_names[r],
					       (unsigned long long)sum.drops[r]);
				if (has_guard)
					printf("  guard %s: runs %llu missing %llu forged %llu",
					       tag, (unsigned long long)g.runs,
					       (unsigned long long)g.missing,
					       (unsigned long long)g.forged);
				printf("\n");
			}
		}
		inject_close(&s);
	}
	free(per);
	if (json_output) {
		json_arr_close(jw);
		json_end(jw);
	}
	node_close(&n);
	return EXIT_OK;
}

int inject_forget_pod(struct pi_node *n, const struct pi_pod_info *pod)
{
	struct pi_inject_key key, next, *prev = NULL;
	struct pi_inject_stats_key skey, snext, *sprev = NULL;
	struct pi_inject_target t;
	struct inject_state s;

	if (inject_open(n, &s, false))
		return 0;
	proxy_forget_pod(n, &s, pod);
	while (!bpf_map_get_next_key(s.maps[IM_AUTH], prev, &next)) {
		if (next.injector_ifindex == pod->ifindex ||
		    (!bpf_map_lookup_elem(s.maps[IM_AUTH], &next, &t) &&
		     t.target_ifindex == pod->ifindex)) {
			bpf_map_delete_elem(s.maps[IM_AUTH], &next);
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
	netkit_guards_sync_all(n, &s);
	inject_close(&s);
	return 0;
}

int do_inject(int argc, char **argv)
{
	static const struct cmd cmds[] = {
		{ "allow", inject_allow },
		{ "deny", inject_deny },
		{ "list", inject_list },
		{ "stats", inject_stats },
		{ "help", inject_help },
		{ 0 },
	};

	return cmd_select(cmds, argc, argv, inject_help);
}
