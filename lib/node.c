/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Nodes: a network namespace (made here, adopted, or the host's own), the
 * reference datapath's BPF objects pinned under /sys/fs/bpf/podinject/NODE
 * and optionally an uplink device inside it.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "internal.h"
#include "inject.h"
#include "kernel_features.h"
#include "lib.h"
#include "nl.h"
#include "node.skel.h"
#include "state.h"
#include "xdp.h"

static int add_host_endpoint(int map, int family, const void *addr)
{
	struct pi_endpoint_key key = { .family = family };
	struct pi_endpoint ep = { .kind = PI_EP_HOST };

	memcpy(key.addr.a, addr, family == AF_INET ? 4 : 16);
	return bpf_map_update_elem(map, &key, &ep, BPF_NOEXIST) ? -errno : 0;
}

/* Every address the node's namespace owns is the node's: pods reach them
 * through the stack, not the uplink. Called inside the namespace. */
static int register_node_addresses(int map)
{
	struct ifaddrs *ifa, *all;
	int err = 0;

	if (getifaddrs(&all))
		return -errno;
	for (ifa = all; ifa && !err; ifa = ifa->ifa_next) {
		if (!ifa->ifa_addr || (ifa->ifa_flags & IFF_LOOPBACK))
			continue;
		if (ifa->ifa_addr->sa_family == AF_INET)
			err = add_host_endpoint(map, AF_INET,
				&((struct sockaddr_in *)ifa->ifa_addr)->sin_addr);
		else if (ifa->ifa_addr->sa_family == AF_INET6)
			err = add_host_endpoint(map, AF_INET6,
				&((struct sockaddr_in6 *)ifa->ifa_addr)->sin6_addr);
		if (err == -EEXIST)
			err = 0;
	}
	freeifaddrs(all);
	return err;
}

static int pin_objects(struct node_bpf *skel, const char *dir)
{
	struct bpf_program *prog;
	struct bpf_map *map;
	char path[PATH_MAX];

	bpf_object__for_each_map(map, skel->obj) {
		if (bpf_map__is_internal(map))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir,
			 bpf_map__name(map));
		if (bpf_map__pin(map, path))
			return -errno;
	}
	bpf_object__for_each_program(prog, skel->obj) {
		snprintf(path, sizeof(path), "%s/prog_%s", dir,
			 bpf_program__name(prog));
		if (bpf_program__pin(prog, path))
			return -errno;
	}
	return 0;
}

/* The pod_meta map: userspace's half of each pod (names, namespaces), kept
 * beside the datapath's maps so the pins stay the node's whole state. */
static int create_meta_map(const char *dir)
{
	char path[PATH_MAX];
	int fd, err = 0;

	fd = bpf_map_create(BPF_MAP_TYPE_HASH, PI_POD_META_PIN, sizeof(__u32),
			    sizeof(struct pi_pod_meta), PI_DP_MAX_PODS, NULL);
	if (fd < 0)
		return -errno;
	snprintf(path, sizeof(path), "%s/%s", dir, PI_POD_META_PIN);
	if (bpf_obj_pin(fd, path))
		err = -errno;
	close(fd);
	return err;
}

/* The first record of the node's configuration, written before anything
 * can open the node, so that its ABI version is always there. */
static int write_first_config(const char *dir, const struct pi_node_config *cfg)
{
	char path[PATH_MAX];
	uint32_t zero = 0;
	int fd, err = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, node_map_names[M_NODE_CONFIG]);
	fd = bpf_obj_get(path);
	if (fd < 0)
		return -errno;
	if (bpf_map_update_elem(fd, &zero, cfg, 0))
		err = -errno;
	close(fd);
	return err;
}

/* The node's pin directory `path`, made locked: the lock's fd. Nobody may
 * see it unlocked before it is whole (an unlocked directory that is not
 * whole is what a `node up` cut off left, and is removed), so a directory
 * of this process's own is made and locked beside it (PI_UP_TMP_PREFIX,
 * swept when its maker died), then renamed into place. The rename
 * is what makes the name taken: of two `node up` of one name, one gets
 * EEXIST (RENAME_NOREPLACE). The root may be removed by a concurrent
 * `node down` of the last other node before our directory is in it. */
static int make_pin_dir_locked(const char *path)
{
	const char *base = strrchr(path, '/');
	char tmp[PATH_MAX];
	int fd, err = -ENOENT;

	snprintf(tmp, sizeof(tmp), "%s/" PI_UP_TMP_PREFIX "%s-%d", PI_PIN_ROOT,
		 base ? base + 1 : path, (int)getpid());
	for (int tries = 0; tries < 10 && err; tries++) {
		if (mkdir(PI_PIN_ROOT, 0700) && errno != EEXIST)
			return -errno;
		err = mkdir(tmp, 0700) ? -errno : 0;
		if (err == -EEXIST) {	/* a dead process of our pid's */
			rm_tree(tmp);
			err = -ENOENT;
		} else if (err && err != -ENOENT) {
			return err;
		}
	}
	if (err)
		return err;
	fd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB)) {
		err = -errno;
		goto fail;
	}
	if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE)) {
		err = -errno;
		goto fail;
	}
	return fd;
fail:
	if (fd >= 0)
		close(fd);
	rmdir(tmp);
	return err;
}

static void fill_info(const struct pi_node *n, struct pi_node_info *info)
{
	int saved;

	memset(info, 0, sizeof(*info));
	snprintf(info->name, sizeof(info->name), "%s", n->name);
	snprintf(info->pin_dir, sizeof(info->pin_dir), "%s", n->pin_dir);
	info->tcx = n->cfg.flags & PI_NODE_TCX;
	info->xdp = n->cfg.flags & PI_NODE_XDP;
	info->host = n->cfg.flags & PI_NODE_HOST;
	info->owns_netns = n->cfg.flags & PI_NODE_OWNS_NETNS;
	info->uplink_ifindex = n->cfg.uplink_ifindex;
	info->upgraded_from = n->cfg.upgraded_from;
	info->upgraded_ns = n->cfg.upgraded_ns;
	if (n->cfg.uplink_ifindex && !node_enter(n, &saved)) {
		nl_link_name(n->cfg.uplink_ifindex, info->uplink);
		netns_restore(saved);
	}
}

static int count_pod(const struct pi_node *n, const struct pi_pod_info *pod,
		     void *c)
{
	(*(int *)c)++;
	return 0;
}

int pi_node_get_info(struct pi_node *n, struct pi_node_info *info)
{
	fill_info(n, info);
	return pod_for_each(n, count_pod, &info->pods);
}

int pi_node_addresses(struct pi_node *n,
		      void (*fn)(int family, const struct pi_addr *a, void *ctx),
		      void *ctx)
{
	struct pi_endpoint_key key, next, *prev = NULL;
	struct pi_endpoint ep;

	while (!bpf_map_get_next_key(n->maps[M_ENDPOINTS], prev, &next)) {
		struct pi_addr a;

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(n->maps[M_ENDPOINTS], &key, &ep) ||
		    ep.kind != PI_EP_HOST)
			continue;
		a = addr_from_dp(&key.addr);
		fn(key.family, &a, ctx);
	}
	return 0;
}

int pi_node_open(const char *name, enum pi_open_mode mode, int timeout_ms,
		 struct pi_node **out)
{
	struct pi_node *n;
	int err;

	*out = NULL;
	if (!pi_valid_name(name, PI_NODE_NAME_MAX)) {
		pr_err("invalid node name '%s': use 1-15 of a-z, 0-9, '-'",
		       name ? name : "");
		return -EINVAL;
	}
	n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	err = node_open(n, name, mode == PI_OPEN_WRITE ? NODE_LOCK_EXCLUSIVE :
						       NODE_LOCK_SHARED,
			timeout_ms);
	if (err) {
		free(n);
		return err;
	}
	*out = n;
	return 0;
}

void pi_node_close(struct pi_node *n)
{
	if (!n)
		return;
	node_close(n);
	free(n);
}

/* Whether the pin directory `dir`, whose lock the caller holds, is what a
 * `node up` cut off before the node was whole left (a plugin killed while
 * it brought its node up): no configuration, or one never written, and
 * nothing in use (no pod recorded, no link pinned). A node that lost its
 * configuration pin after it had pods is broken, not cut off: its pins
 * are for `node down` to remove, not for the next `node up`. */
static bool making_cut_off(const char *dir)
{
	char path[PATH_MAX];
	uint8_t raw[512];
	uint32_t value_size, abi;
	struct dirent *de;
	bool cut = true, blank;
	int err, fd;
	DIR *d;

	snprintf(path, sizeof(path), "%s/%s", dir,
		 node_map_names[M_NODE_CONFIG]);
	err = node_config_read(path, raw, sizeof(raw), &value_size, &abi,
			       &blank);
	if (err != -ENOENT && (err || !blank))
		return false;
	snprintf(path, sizeof(path), "%s/%s", dir, node_map_names[M_PODS]);
	fd = bpf_obj_get(path);
	if (fd >= 0) {
		uint8_t key[64];

		cut = bpf_map_get_next_key(fd, NULL, key) && errno == ENOENT;
		close(fd);
	} else if (errno != ENOENT) {
		return false;
	}
	d = opendir(dir);
	if (!d)
		return false;
	while (cut && (de = readdir(d)))
		if (!strncmp(de->d_name, "link_", 5))
			cut = false;
	closedir(d);
	return cut;
}

/* The pin directory `node up` wants is there. A node that is up (or
 * being made, or taken down) keeps it: -EALREADY. What a making cut off
 * left goes, and 0 says to make the node again. `node up` holds the lock
 * on its directory from before the directory has the node's name until
 * the node is whole (make_pin_dir_locked), so one that is locked free and
 * not whole is a making that died. Nothing of it is in use: pods, links
 * and hooks all come after the configuration. */
static int reclaim_cut_off(const char *name, const char *dir, int timeout_ms)
{
	int fd, rm;

	fd = node_lock_dir(dir, NODE_LOCK_EXCLUSIVE, timeout_ms);
	if (fd == -ENOENT)
		return 0;	/* taken down meanwhile */
	if (fd < 0)
		return -EALREADY;
	if (!making_cut_off(dir)) {
		close(fd);
		return -EALREADY;
	}
	pr_warn("node '%s': a 'node up' was cut off before the node was whole; removing what it left in %s",
		name, dir);
	rm = rm_tree(dir);
	close(fd);
	if (rm) {
		pr_err("cannot remove %s: %s", dir, strerror(-rm));
		return rm;
	}
	return 0;
}

/* The pin directory `node up` makes: a host node's is keyed by the
 * namespace it is made in, a named node's by its name. Either is refused
 * where a command would find another node of that name first: the host
 * node of this namespace, or one pinned before the keying whose namespace
 * is this one. */
static int node_up_dir(const char *name, bool host, int timeout_ms,
		       char *path, size_t len)
{
	char plain[PATH_MAX];
	uint64_t ino;
	struct stat own;
	int err;

	err = node_host_dir(name, path, len);
	if (err) {
		pr_err("cannot read this network namespace's cookie: %s",
		       strerror(-err));
		return err;
	}
	if (!access(path, F_OK) && reclaim_cut_off(name, path, timeout_ms)) {
		pr_err("node '%s' is already up (the host node of this namespace)",
		       name);
		return -EALREADY;
	}
	snprintf(plain, sizeof(plain), "%s/%s", PI_PIN_ROOT, name);
	if (!host) {
		snprintf(path, len, "%s", plain);
		if (!access(path, F_OK) &&
		    reclaim_cut_off(name, path, timeout_ms)) {
			pr_err("node '%s' is already up", name);
			return -EALREADY;
		}
		return 0;
	}
	if (!access(plain, F_OK) && !stat(HOST_NETNS_PATH, &own) &&
	    !node_dir_host_netns(plain, &ino) && ino == own.st_ino) {
		pr_err("node '%s' is already up (the host node of this namespace, at %s)",
		       name, plain);
		return -EALREADY;
	}
	return 0;
}

/* What `node up` is asked for, before anything is looked at or made. */
static int node_up_check(const char *name, const struct pi_node_up_opts *o)
{
	if (!pi_valid_name(name, PI_NODE_NAME_MAX)) {
		pr_err("invalid node name '%s': use 1-15 of a-z, 0-9, '-'",
		       name ? name : "");
		return -EINVAL;
	}
	if (o->uplink && (strlen(o->uplink) >= IFNAMSIZ || !*o->uplink)) {
		pr_err("invalid device name '%s'", o->uplink);
		return -EINVAL;
	}
	if (o->host && netns_exists(name)) {
		pr_err("--host: the node is the host's own namespace, but a namespace named '%s' exists; pick another node name",
		       name);
		return -EINVAL;
	}
	return 0;
}

/* Whether this kernel runs the node as asked; feat->tcx says how its
 * programs will be attached. */
static int node_up_kernel(const struct pi_node_up_opts *o, struct features *feat)
{
	int err = probe_features(feat);

	if (err) {
		pr_err("cannot probe kernel features: %s", strerror(-err));
		return err;
	}
	if (!feat->bpf_loop) {
		pr_err("this kernel lacks bpf_loop(), which the policy needs");
		return -EOPNOTSUPP;
	}
	if (o->attach == PI_ATTACH_FORCE_TCX && !feat->tcx) {
		pr_err("this kernel has no tcx (see 'podinject features')");
		return -EOPNOTSUPP;
	}
	if (o->attach == PI_ATTACH_FORCE_CLSACT)
		feat->tcx = false;
	if (o->xdp && xdp_probe_veth() != 1) {
		pr_err("this kernel cannot attach native XDP to veth devices (see 'podinject features')");
		return -EOPNOTSUPP;
	}
	return 0;
}

/* Loads the node's datapath and pins it under `dir` with the meta map and
 * the node's first config; what is pinned goes with the directory. */
static int pin_node(const char *dir, const char *name, bool host, bool tcx,
		    bool owns_netns)
{
	struct pi_node_config cfg = {};
	struct node_bpf *skel;
	int err;

	skel = node_bpf__open_and_load();
	if (!skel) {
		err = -errno;
		pr_err("cannot load the node datapath: %s", strerror(-err));
		return err;
	}
	err = pin_objects(skel, dir);
	if (!err)
		err = create_meta_map(dir);
	snprintf(cfg.name, sizeof(cfg.name), "%s", name);
	cfg.abi = PI_ABI_VERSION;
	cfg.flags = (tcx ? PI_NODE_TCX : 0) |
		    (owns_netns ? PI_NODE_OWNS_NETNS : 0) |
		    (host ? PI_NODE_HOST : 0);
	if (!err && host) {
		struct stat st;

		if (!stat(HOST_NETNS_PATH, &st))
			cfg.netns_ino = st.st_ino;
		else
			err = -errno;
	}
	if (!err)
		err = write_first_config(dir, &cfg);
	if (err)
		pr_err("cannot pin objects under %s: %s", dir, strerror(-err));
	node_bpf__destroy(skel);
	return err;
}

/* Inside the node's namespace: the uplink's clsact qdisc removed when node
 * up made it and nothing else is on it. */
static void uplink_qdisc_release(struct pi_node *n, int ifindex)
{
	char dev[48];

	if (!(n->cfg.flags & PI_NODE_OWNS_UPLINK_QDISC))
		return;
	snprintf(dev, sizeof(dev), "the uplink (ifindex %d)", ifindex);
	clsact_release(ifindex, dev);
	n->cfg.flags &= ~PI_NODE_OWNS_UPLINK_QDISC;
}

/* Inside the node's namespace: the uplink up, with the node's program on
 * its ingress (pinned at `link`), and its ifindex in n->cfg. */
static int attach_uplink(struct pi_node *n, const char *uplink,
			 const char *link, bool host)
{
	int ifindex = nl_link_index(uplink), err;

	if (ifindex < 0) {
		pr_err("uplink '%s' does not exist in namespace '%s'", uplink,
		       host ? "of the host" : n->name);
		return ifindex;
	}
	err = nl_link_set_up(ifindex);
	/* A clsact qdisc podinject makes is podinject's to remove: node
	 * down, or this node up failing, takes it off again (one that was
	 * there, a CNI's, stays). */
	if (!err && node_attach_mode(n) == PI_ATTACH_CLSACT) {
		err = clsact_make(ifindex);
		if (err == 1)
			n->cfg.flags |= PI_NODE_OWNS_UPLINK_QDISC;
		err = err < 0 ? err : 0;
	}
	if (!err)
		err = attach_prog(n->progs[P_UPLINK_INGRESS], ifindex,
				  PI_HOOK_INGRESS, node_attach_mode(n), false,
				  PI_PRIO_DATAPATH, link);
	if (err) {
		pr_err("cannot attach to uplink '%s': %s", uplink,
		       strerror(-err));
		uplink_qdisc_release(n, ifindex);
		return err;
	}
	n->cfg.uplink_ifindex = ifindex;
	return 0;
}

/* Inside the node's namespace (the uplink's ifindex names it there only):
 * the uplink's program, XDP, the node's own addresses, and the config
 * that records them. Takes its hooks off again when a step fails. */
static int node_up_hooks(struct pi_node *n, const struct pi_node_up_opts *o)
{
	const char *uplink = o->uplink;
	char link[PATH_MAX];
	int err;

	node_pin_path(n, link, sizeof(link), "link_uplink");
	if (uplink) {
		err = attach_uplink(n, uplink, link, o->host);
		if (err)
			return err;
	}
	if (o->xdp) {
		err = xdp_node_setup(n, n->cfg.uplink_ifindex);
		if (err == -EBUSY)
			pr_err("uplink '%s' runs another XDP program; podinject does not replace it",
			       uplink);
		else if (err)
			pr_err("cannot set up XDP%s%s: %s",
			       uplink ? " on uplink " : "", uplink ? uplink : "",
			       strerror(-err));
		if (err)
			goto fail_uplink;
		n->cfg.flags |= PI_NODE_XDP;
	}
	err = register_node_addresses(n->maps[M_ENDPOINTS]);
	if (!err)
		err = node_save_config(n);
	if (!err)
		return 0;
	pr_err("cannot record node state: %s", strerror(-err));
	if (n->cfg.flags & PI_NODE_XDP)
		xdp_node_teardown(n);
fail_uplink:
	if (n->cfg.uplink_ifindex) {
		detach_prog(n->cfg.uplink_ifindex, PI_HOOK_INGRESS,
			    node_attach_mode(n), PI_PRIO_DATAPATH, link);
		uplink_qdisc_release(n, n->cfg.uplink_ifindex);
	}
	return err;
}

uint32_t pi_abi_version(void)
{
	return PI_ABI_VERSION;
}

int pi_node_up(const char *name, const struct pi_node_up_opts *o,
	       struct pi_node_info *info)
{
	static const struct pi_node_up_opts none = {
		.lock_timeout_ms = PI_LOCK_TIMEOUT_MS,
	};
	struct features feat;
	struct pi_node n;
	bool made_ns = false, made_dir = false;
	int saved = -1, err, lock_fd = -1;
	char dir[PATH_MAX];

	if (!o)
		o = &none;
	node_reset(&n);
	err = node_up_check(name, o);
	if (err)
		return err;
	err = ensure_bpffs();
	if (err) {
		pr_err("cannot mount bpffs at /sys/fs/bpf: %s", strerror(-err));
		return err;
	}
	node_sweep_stale();
	err = node_up_dir(name, o->host, o->lock_timeout_ms, dir, sizeof(dir));
	if (!err)
		err = node_up_kernel(o, &feat);
	if (err)
		return err;

	/* Held until the node is complete: nobody sees it half made. */
	lock_fd = make_pin_dir_locked(dir);
	if (lock_fd == -EEXIST) {
		err = reclaim_cut_off(name, dir, o->lock_timeout_ms);
		lock_fd = err ? err : make_pin_dir_locked(dir);
	}
	if (lock_fd == -EEXIST || lock_fd == -EALREADY) {
		pr_err("node '%s' is already up", name);
		return -EALREADY;
	}
	if (lock_fd < 0) {
		pr_err("cannot create %s: %s", dir, strerror(-lock_fd));
		return lock_fd;
	}
	made_dir = true;
	if (!o->host && !netns_exists(name)) {
		err = netns_create(name);
		if (err) {
			pr_err("cannot create namespace '%s': %s", name,
			       strerror(-err));
			goto out;
		}
		made_ns = true;
	}
	err = pin_node(dir, name, o->host, feat.tcx, made_ns);
	if (!err)
		err = node_open_dir(&n, name, dir, NODE_LOCK_HELD, 0, NULL);
	if (err)
		goto out;
	err = node_enter(&n, &saved);
	if (err) {
		pr_err("cannot enter namespace '%s'", name);
	} else {
		err = node_up_hooks(&n, o);
		netns_restore(saved);
	}
	if (!err && info)
		fill_info(&n, info);
	node_close(&n);
out:
	if (err) {
		/* the namespace first, as `node down` does */
		if (made_ns)
			netns_delete(name);
		if (made_dir)
			rm_tree(dir);
		rmdir(PI_PIN_ROOT);	/* only when no other node is left */
	}
	if (info && !err)
		info->owns_netns = made_ns;
	if (lock_fd >= 0)
		close(lock_fd);
	return err;
}

#define NODE_MAX_PROGS	256

struct prog_ids {
	uint32_t id[NODE_MAX_PROGS];
	int cnt;
};

/* A program pinned below the node's directory (prog_* pins): the node's
 * own and its features'. Read without the node's maps, so that a node of
 * any ABI gives them. */
static int add_prog_id(const char *path, const char *name, void *ctx)
{
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);
	struct prog_ids *ids = ctx;
	int fd;

	if (strncmp(name, "prog_", 5))
		return 0;
	fd = bpf_obj_get(path);
	if (fd < 0)
		return 0;
	if (!bpf_obj_get_info_by_fd(fd, &info, &len) && info.id)
		ids->id[ids->cnt++] = info.id;
	close(fd);
	return ids->cnt == NODE_MAX_PROGS;
}

static bool has_id(const struct prog_ids *ids, uint32_t id)
{
	for (int i = 0; i < ids->cnt; i++)
		if (ids->id[i] == id)
			return true;
	return false;
}

/* Whether the node's directory records a clsact qdisc it made on a pod's
 * eth0: named by the pod's host-side ifindex, which is the pod device's
 * peer (lib/proxy.c). */
static bool pod_qdisc_recorded(const char *dir, int pod_ifindex)
{
	char inject_dir[PATH_MAX], path[PATH_MAX];
	int peer = nl_link_peer(pod_ifindex);

	if (peer <= 0)
		return false;
	snprintf(inject_dir, sizeof(inject_dir), "%s/inject", dir);
	pod_qdisc_mark_path(path, sizeof(path), inject_dir, peer);
	return !access(path, F_OK);
}

/* Deletes the cls_bpf filters of the calling thread's namespace that run
 * one of `ids`, at the priorities podinject uses. Program ids are unique
 * on the machine, so no one else's filter can match. In a pod's namespace
 * (`pods`), a device whose clsact qdisc the node recorded making loses it
 * too once no filter is left on it. */
static void detach_filters_here(const struct prog_ids *ids, const char *dir,
				bool pods)
{
	static const uint32_t prios[] = {
		PI_PRIO_HEAD, PI_PRIO_POD_ASSIGN, PI_PRIO_DATAPATH,
	};
	static const enum bpf_tc_attach_point points[] = {
		BPF_TC_INGRESS, BPF_TC_EGRESS,
	};
	struct if_nameindex *all = if_nameindex(), *i;

	if (!all)
		return;
	for (i = all; i->if_index; i++) {
		bool removed = false;

		for (size_t p = 0; p < 2; p++) {
			for (size_t q = 0; q < sizeof(prios) / sizeof(prios[0]);
			     q++) {
				DECLARE_LIBBPF_OPTS(bpf_tc_hook, hook,
						    .ifindex = i->if_index,
						    .attach_point = points[p]);
				DECLARE_LIBBPF_OPTS(bpf_tc_opts, opts,
						    .handle = 1,
						    .priority = prios[q]);

				if (bpf_tc_query(&hook, &opts) ||
				    !has_id(ids, opts.prog_id))
					continue;
				opts.prog_id = 0;
				opts.prog_fd = 0;
				opts.flags = 0;
				removed |= !bpf_tc_detach(&hook, &opts);
			}
		}
		if (removed && pods && pod_qdisc_recorded(dir, i->if_index))
			clsact_release(i->if_index, i->if_name);
	}
	if_freenameindex(all);
}

#define NETNS_SEEN_MAX	65536

struct netns_seen {
	ino_t *ino;
	size_t cnt, cap;
};

/* Whether the namespace of `st` was visited; marks it so if not. */
static bool netns_seen(struct netns_seen *seen, const struct stat *st)
{
	for (size_t k = 0; k < seen->cnt; k++)
		if (seen->ino[k] == st->st_ino)
			return true;
	if (seen->cnt == seen->cap) {
		size_t cap = seen->cap ? seen->cap * 2 : 64;
		ino_t *more;

		if (cap > NETNS_SEEN_MAX)
			return true;	/* no room to remember: skip it */
		more = realloc(seen->ino, cap * sizeof(*more));
		if (!more)
			return true;
		seen->ino = more;
		seen->cap = cap;
	}
	seen->ino[seen->cnt++] = st->st_ino;
	return false;
}

/* Takes the node's filters off the devices of the network namespace
 * `fd` names, unless it was visited. */
static void detach_filters_in(int fd, const struct prog_ids *ids,
			      const char *dir, bool pods,
			      struct netns_seen *seen)
{
	struct stat st;
	int saved;

	if (fstat(fd, &st) || netns_seen(seen, &st) || netns_enter(fd, &saved))
		return;
	detach_filters_here(ids, dir, pods);
	netns_restore(saved);
}

/* The same for the namespace at `path` (a process's, a mount of one). */
static void detach_filters_at(const char *path, const struct prog_ids *ids,
			      const char *dir, bool pods,
			      struct netns_seen *seen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return;		/* its process exited meanwhile */
	detach_filters_in(fd, ids, dir, pods, seen);
	close(fd);
}

/* Every entry of `dirpath` (a directory of namespace mounts, or /proc
 * with `suffix` "ns/net"). */
static void detach_filters_under(const char *dirpath, const char *suffix,
				 const struct prog_ids *ids, const char *dir,
				 struct netns_seen *seen)
{
	DIR *d = opendir(dirpath);
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		char path[PATH_MAX];

		if (de->d_name[0] == '.')
			continue;
		if (suffix && (de->d_name[0] < '0' || de->d_name[0] > '9'))
			continue;
		snprintf(path, sizeof(path), "%s/%s%s%s", dirpath, de->d_name,
			 suffix ? "/" : "", suffix ? suffix : "");
		detach_filters_at(path, ids, dir, true, seen);
	}
	closedir(d);
}

/* What removing a node's pins does not undo: in clsact mode its programs
 * run as filters on devices, which hold them loaded. Taken off every device
 * of the namespaces the node can have (the caller's, and the one named
 * after it), and of every other namespace of the machine that a process
 * is in or that has a name (`ip netns`, a runtime's netns directory): a
 * pod's own namespace holds a probe's reply hook and a proxy's assign
 * hook on its eth0, and the pods cannot be read from a broken node's
 * maps. */
static void detach_node_filters(const char *dir, const char *name)
{
	struct netns_seen seen = { 0 };
	struct prog_ids ids = { .cnt = 0 };
	int fd;

	pin_tree_walk(dir, add_prog_id, &ids);
	if (!ids.cnt)
		return;
	/* the node's own namespaces first, as no pod's */
	detach_filters_at("/proc/thread-self/ns/net", &ids, dir, false, &seen);
	fd = netns_open(name);
	if (fd >= 0) {
		detach_filters_in(fd, &ids, dir, false, &seen);
		close(fd);
	}
	detach_filters_under("/run/netns", NULL, &ids, dir, &seen);
	detach_filters_under("/proc", "ns/net", &ids, dir, &seen);
	free(seen.ino);
}

/* A broken node's links (tcx, netkit, sk_lookup) let go before the
 * command returns: unpinned alone, a link stays on its device until the
 * kernel's deferred release. */
static int detach_link_pin(const char *path, const char *name, void *ctx)
{
	int fd;

	(void)ctx;
	if (strncmp(name, "link_", 5))
		return 0;
	fd = bpf_obj_get(path);
	if (fd < 0)
		return 0;
	bpf_link_detach(fd);	/* ENOLINK: its device went already */
	close(fd);
	return 0;
}

static int remove_pod_cb(const struct pi_node *n, const struct pi_pod_info *pod,
			 void *ctx)
{
	int *err = ctx;
	int e = pod_remove((struct pi_node *)n, pod);

	if (e && !*err)
		*err = e;
	return 0;
}

int pi_node_down(const char *name, bool force, int timeout_ms)
{
	char path[PATH_MAX];
	struct pi_node n;
	int err = 0, saved, lock_fd;
	bool broken = false;

	if (!pi_valid_name(name, PI_NODE_NAME_MAX)) {
		pr_err("invalid node name '%s': use 1-15 of a-z, 0-9, '-'",
		       name ? name : "");
		return -EINVAL;
	}
	node_find_dir(name, path, sizeof(path));
	lock_fd = node_lock_dir(path, NODE_LOCK_EXCLUSIVE, timeout_ms);
	if (lock_fd == -ENOENT) {
		pr_err("node '%s' is not up", name);
		return -ENOENT;
	}
	if (lock_fd < 0) {
		if (lock_fd == -EBUSY)
			pr_err("node '%s' is busy: another command holds its lock; try again later",
			       name);
		else
			pr_err("cannot lock node '%s': %s", name,
			       strerror(-lock_fd));
		return lock_fd;
	}
	err = node_open_dir(&n, name, path, NODE_LOCK_HELD, 0, &broken);
	if (err) {
		bool stale = false;
		int rm;

		/* Pins go only with a node that is provably broken (a pin
		 * missing, its named namespace deleted, a host node whose
		 * namespace is gone), or with another build's node when
		 * forced: its pods are in maps this build cannot read. An
		 * error that says nothing of the node (out of files or
		 * memory, another namespace's host node) leaves it alone. */
		if (!broken && !(err == -EPROTO && force))
			stale = node_host_stale(path);
		if (!broken && !stale && !(err == -EPROTO && force)) {
			close(lock_fd);
			return err;
		}
		if (!stale)	/* a gone namespace took its devices along */
			detach_node_filters(path, name);
		pin_tree_walk(path, detach_link_pin, NULL);
		rm = rm_tree(path);
		apply_record_forget(path);
		monitor_run_forget(path);
		close(lock_fd);
		rmdir(PI_PIN_ROOT);
		if (rm) {
			pr_err("cannot remove %s: %s", path, strerror(-rm));
			return rm;
		}
		if (stale) {
			pr_info("node '%s' was the host node of a network namespace that is gone; its pins are removed",
				name);
			return 0;
		}
		if (force)
			return 0;
		pr_err("node '%s' was broken; its pins are removed", name);
		return err;
	}
	pod_for_each(&n, remove_pod_cb, &err);
	probe_forget_node(&n);
	if (n.cfg.uplink_ifindex && !node_enter(&n, &saved)) {
		if (n.cfg.flags & PI_NODE_XDP)
			xdp_node_teardown(&n);
		node_pin_path(&n, path, sizeof(path), "link_uplink");
		detach_prog(n.cfg.uplink_ifindex, PI_HOOK_INGRESS,
			    node_attach_mode(&n), PI_PRIO_DATAPATH, path);
		uplink_qdisc_release(&n, n.cfg.uplink_ifindex);
		netns_restore(saved);
	}
	/* The namespace before the pins: once the pin directory is gone
	 * the name is free, and a `node up` of it at that moment would
	 * take the namespace still there for one it may use, which this
	 * would then delete under it. */
	if (n.cfg.flags & PI_NODE_OWNS_NETNS) {
		int e;

		close(n.netns_fd);
		n.netns_fd = -1;
		e = netns_delete(name);
		if (e && !err)
			err = e;
	}
	{
		int e = rm_tree(n.pin_dir);

		if (e && !err)
			err = e;
		apply_record_forget(n.pin_dir);
		monitor_run_forget(n.pin_dir);
	}
	node_close(&n);
	close(lock_fd);
	rmdir(PI_PIN_ROOT);	/* only when no other node is left */
	if (err)
		pr_err("node '%s' down with errors: %s", name, strerror(-err));
	return err;
}
