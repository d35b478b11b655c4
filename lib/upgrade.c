/* SPDX-License-Identifier: GPL-2.0 */
/*
 * podinject node upgrade: a node made by the previous ABI version (or by
 * another build of this one) is brought to this build in place, while its
 * pods' traffic flows.
 *
 * - Maps whose layout did not change are kept as they are: the new
 *   programs are loaded onto them (bpf_map__reuse_fd), so tracked flows,
 *   counters, rules, grants and proxy rules go on.
 * - Maps whose layout changed are made anew and filled from the old ones
 *   by the migration steps below, one ABI version at a time.
 * - Every hook that runs a program of the node is re-pointed atomically:
 *   tcx and netkit links by BPF_LINK_UPDATE (the link ids stay, the
 *   program ids change), clsact filters by replace at the same priority
 *   and handle, XDP by XDP_FLAGS_REPLACE naming the program expected
 *   there. The hooks are found by asking the kernel what runs on each
 *   pod's and the uplink's devices, and a program is the node's when it
 *   uses one of the node's maps: a pin that was lost never leaves a stale
 *   program running, and each hook ends with exactly one of ours.
 * - The recorded version is bumped last.
 *
 * Staging and the progress record. Everything new is first pinned under
 * PIN_DIR/upgrade/ (same names as the live pins), beside the progress
 * record PIN_DIR/upgrade/progress (struct pi_upgrade_progress). While it
 * exists the live configuration's version reads PI_ABI_UPGRADING | from,
 * which no build takes for its own: every other command refuses the node
 * and says to run `node upgrade`. Phases, and what a run that finds an
 * interrupted upgrade does:
 *
 *   STAGING    staging being filled; nothing live has changed
 *              -> rolled back: staging removed, version restored, redone
 *   SWITCHING  hooks being re-pointed to the staged programs; a hook runs
 *              the old or the new program, each on maps it can read
 *              -> rolled forward: every hook re-pointed (again)
 *   COMMITTING staged pins renamed over the live ones, then the version
 *              -> rolled forward: the rest renamed, version bumped
 *   DONE       version bumped, staging being removed -> removed
 *
 * A failure of this run before SWITCHING rolls back; during SWITCHING the
 * hooks are pointed back at the live (old) programs and then it rolls
 * back; from COMMITTING it can only go forward, and says so.
 *
 * A new ABI version adds one entry to `migrations` (docs/architecture.md).
 */
#include <dirent.h>
#include <net/if.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <linux/bpf.h>
#include <linux/if_link.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "internal.h"
#include "lib.h"
#include "nl.h"
#include "state.h"
#include "inject.h"
#include "xdp.h"
#include "node.skel.h"
#include "xdp.skel.h"
#include "inject.skel.h"

#define STAGE_DIR	"upgrade"
#define INJECT_DIR	"inject"
#define PROGRESS_PIN	"progress"
#define MAX_IDS		64

enum upgrade_phase {
	UP_STAGING = 1,
	UP_SWITCHING,
	UP_COMMITTING,
	UP_DONE,
};

struct idset {
	uint32_t ids[256];
	int cnt;
};

struct upgrade {
	struct pi_node n;		/* locked; only pin_dir, name, cfg.abi */
	char stage[PATH_MAX];
	struct pi_upgrade_progress pr;
	int progress_fd;
	int netns_fd;			/* the node's */
	struct idset node_maps;		/* the datapath's maps, old and new */
	struct idset inject_maps;	/* injection's and the proxy's */
	const struct pi_node_upgrade_opts *o;
	struct pi_node_upgrade_info *info;
};

/* The test hook (pi_node_upgrade_opts.at_point): it may kill the process
 * there, or return an error that fails the upgrade as a failed step
 * would. */
static int point(struct upgrade *u, enum pi_upgrade_point p)
{
	int err;

	if (!u->o || !u->o->at_point)
		return 0;
	err = u->o->at_point(p, u->o->ctx);
	if (err)
		pr_err("node '%s': the upgrade fails at point %d, as asked",
		       u->n.name, p);
	return err;
}

static void stage_path(const struct upgrade *u, char *buf, size_t len,
		       const char *name)
{
	snprintf(buf, len, "%s/%s", u->stage, name);
}

static int get_pin(const char *dir, const char *name)
{
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = bpf_obj_get(path);
	return fd < 0 ? -errno : fd;
}

/* The object `name` as the node will have it: staged if the upgrade made
 * a new one, else the live one. */
static int view_get(const struct upgrade *u, const char *name)
{
	int fd = get_pin(u->stage, name);

	return fd == -ENOENT ? get_pin(u->n.pin_dir, name) : fd;
}

static int save_progress(struct upgrade *u, uint32_t phase)
{
	uint32_t zero = 0;

	u->pr.phase = phase;
	return bpf_map_update_elem(u->progress_fd, &zero, &u->pr, 0) ?
	       -errno : 0;
}

/* Writes `abi` into the live configuration, whatever its layout. */
static int set_live_abi(const struct upgrade *u, uint32_t abi)
{
	struct bpf_map_info info = {};
	__u32 len = sizeof(info);
	uint8_t raw[512];
	uint32_t zero = 0;
	int fd, err = 0;

	fd = get_pin(u->n.pin_dir, node_map_names[M_NODE_CONFIG]);
	if (fd < 0)
		return fd;
	if (bpf_obj_get_info_by_fd(fd, &info, &len) || info.value_size < 48 ||
	    info.value_size > sizeof(raw) ||
	    bpf_map_lookup_elem(fd, &zero, raw)) {
		close(fd);
		return -EIO;
	}
	memcpy(raw + 44, &abi, sizeof(abi));
	if (bpf_map_update_elem(fd, &zero, raw, 0))
		err = -errno;
	close(fd);
	return err;
}

/* The fields of the live configuration every version since the oldest
 * one migrated from has kept in place (name, uplink, flags, next rule id,
 * version, host namespace inode: the first 56 bytes): what the upgrader
 * needs of the node before any migration has run, whatever its layout. */
#define CONFIG_STABLE_HEAD	56
_Static_assert(__builtin_offsetof(struct pi_node_config, ct_timeout) ==
	       CONFIG_STABLE_HEAD, "the stable head of pi_node_config");

static int read_live_head(struct upgrade *u)
{
	struct bpf_map_info info = {};
	__u32 len = sizeof(info);
	uint8_t raw[512];
	uint32_t zero = 0, abi = u->n.cfg.abi;
	int fd, err = 0;

	fd = get_pin(u->n.pin_dir, node_map_names[M_NODE_CONFIG]);
	if (fd < 0)
		return fd;
	if (bpf_obj_get_info_by_fd(fd, &info, &len) ||
	    info.value_size < CONFIG_STABLE_HEAD ||
	    info.value_size > sizeof(raw) ||
	    bpf_map_lookup_elem(fd, &zero, raw))
		err = -EIO;
	else
		memcpy(&u->n.cfg, raw, CONFIG_STABLE_HEAD);
	u->n.cfg.abi = abi;
	close(fd);
	return err;
}

/* ---- the migrations --------------------------------------------------- */

/* ABI 4's configuration, as v0.1 pinned it. */
struct node_config_v4 {
	char name[PI_DP_NAME_LEN];
	__u32 uplink_ifindex;
	__u32 flags;
	__u32 next_rule_id;
	__u32 abi;
	__u64 netns_ino;
	__u32 ct_timeout[PI_DP_CT_TO_MAX];
	__u32 pad;
};
_Static_assert(sizeof(struct node_config_v4) == 80, "ABI 4's pi_node_config");

/* 4 -> 5: the configuration records where and when the node was upgraded
 * from (its value grows from 80 to 88 bytes: a new map). */
static int migrate_4_to_5(struct upgrade *u)
{
	struct node_config_v4 old;
	struct pi_node_config cfg = {};
	struct bpf_map_info info = {};
	__u32 len = sizeof(info);
	char path[PATH_MAX];
	uint32_t zero = 0;
	int ofd, nfd, err = 0;

	ofd = view_get(u, node_map_names[M_NODE_CONFIG]);
	if (ofd < 0)
		return ofd;
	/* The lookup writes the map's value size into `old`: only v0.1's. */
	if (bpf_obj_get_info_by_fd(ofd, &info, &len))
		err = -errno;
	else if (info.value_size != sizeof(old))
		err = -EPROTO;
	else if (bpf_map_lookup_elem(ofd, &zero, &old))
		err = -errno;
	close(ofd);
	if (err) {
		pr_err("node '%s': its ABI 4 configuration cannot be read: %s",
		       u->n.name, strerror(-err));
		return err;
	}
	memcpy(cfg.name, old.name, sizeof(cfg.name));
	cfg.uplink_ifindex = old.uplink_ifindex;
	cfg.flags = old.flags;
	cfg.next_rule_id = old.next_rule_id;
	cfg.abi = old.abi;	/* the upgrade's mark; set last */
	cfg.netns_ino = old.netns_ino;
	memcpy(cfg.ct_timeout, old.ct_timeout, sizeof(cfg.ct_timeout));
	nfd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "node_config", sizeof(__u32),
			     sizeof(cfg), 1, NULL);
	if (nfd < 0)
		return -errno;
	stage_path(u, path, sizeof(path), node_map_names[M_NODE_CONFIG]);
	unlink(path);
	if (bpf_map_update_elem(nfd, &zero, &cfg, 0) || bpf_obj_pin(nfd, path))
		err = -errno;
	close(nfd);
	return err;
}

static int migrate_7_to_8(struct upgrade *u);

/* One step per ABI version: `stage` makes, under the staging directory,
 * each map whose layout changed from `from` to from + 1, filled from the
 * map as the step before left it (view_get); `after_switch`, if a changed
 * map is one the datapath writes (ct, counters), copies again what the
 * old programs wrote between `stage` and the switch. Maps a step does not
 * name are kept; the new programs are checked against them (layout_fits),
 * so a layout change without its step fails the upgrade, not the node. */
static const struct migration {
	uint32_t from;
	const char *what;
	int (*stage)(struct upgrade *u);
	int (*after_switch)(struct upgrade *u);
} migrations[] = {
	{ 4, "node_config records the upgrade (80 -> 88 bytes)",
	  migrate_4_to_5, NULL },
	/* New maps only (made empty, like every map a node lacks): the
	 * monitor's ring buffer, configuration and per-CPU counters, the
	 * node's and the injection object's. */
	{ 5, "the event monitor's maps (podinject monitor)", NULL, NULL },
	/* New maps only, the injection object's: the inbound capture's rules
	 * and protected pods. proxy_flows and proxy_upstream keep their
	 * layout; an inbound flow is a flag and a field that was padding. */
	{ 6, "inbound proxy capture (proxy add --inbound)", NULL, NULL },
	/* A new map, the injection object's, filled: each pod's head
	 * roles, from the grants and proxy rules it has. */
	{ 7, "the head program's roles per device (inject/head_roles)",
	  migrate_7_to_8, NULL },
	/* No map changes: a new kind of pin, link_xdp_pod_IFINDEX, made by
	 * hold_xdp_links() once the pins are this build's. */
	{ 8, "pods' XDP ingress ACLs held by BPF links (link_xdp_pod_*), which the pod cannot detach",
	  NULL, NULL },
	/* A new map only, the injection object's, made empty: its drops
	 * count from the switch on. */
	{ 9, "the injection object's drops by reason (inject/inject_refusals)",
	  NULL, NULL },
	/* A new map, the injection object's, made empty, and a program run
	 * once after the switch (inject_sweep_start): the sweep of the flow
	 * entries the kernel gave no timer, older ones included. */
	{ 10, "the proxy flow tables' sweep of entries without a timer (inject/flow_sweep)",
	  NULL, NULL },
};

_Static_assert(PI_ABI_OLDEST_UPGRADE + sizeof(migrations) / sizeof(migrations[0]) ==
	       PI_ABI_VERSION, "every ABI version since the oldest has its migration");

static int run_steps(struct upgrade *u, bool after_switch)
{
	for (size_t i = 0; i < sizeof(migrations) / sizeof(migrations[0]); i++) {
		const struct migration *m = &migrations[i];
		int (*fn)(struct upgrade *) = after_switch ? m->after_switch :
							     m->stage;
		int err;

		if (m->from < u->pr.from_abi || m->from >= u->pr.to_abi || !fn)
			continue;
		err = fn(u);
		if (err) {
			pr_err("node '%s': migration from ABI %u to %u (%s): %s",
			       u->n.name, m->from, m->from + 1, m->what,
			       strerror(-err));
			return err;
		}
		if (!after_switch && u->info)
			u->info->migrations++;
	}
	return 0;
}

/* ---- the new programs ------------------------------------------------- */

static int layout_fits(const struct bpf_map *map, int fd)
{
	struct bpf_map_info info = {};
	__u32 len = sizeof(info);

	if (bpf_obj_get_info_by_fd(fd, &info, &len))
		return -errno;
	if (info.type != bpf_map__type(map) ||
	    info.key_size != bpf_map__key_size(map) ||
	    info.value_size != bpf_map__value_size(map) ||
	    info.max_entries != bpf_map__max_entries(map))
		return -EPROTO;
	return 0;
}

/* Loads `obj` onto the node's maps as the upgrade leaves them, found by
 * name under `prefix` ("" or "inject/"); `config` is an internal map
 * kept pinned as "config" (injection's read-only data: its netkit tag).
 * Maps the node does not have are made, and with `pin_made` staged. */
static int load_onto_node(struct upgrade *u, struct bpf_object *obj,
			  const char *prefix, const struct bpf_map *config,
			  bool pin_made, int (*load)(void *), void *skel)
{
	bool made[64] = {};
	struct bpf_map *map;
	char path[PATH_MAX], name[128];
	int i = 0, fd, err;

	bpf_object__for_each_map(map, obj) {
		if (i >= 64 || (bpf_map__is_internal(map) && map != config)) {
			i++;
			continue;
		}
		snprintf(name, sizeof(name), "%s%s", prefix,
			 map == config ? "config" : bpf_map__name(map));
		fd = view_get(u, name);
		if (fd == -ENOENT) {
			made[i++] = true;
			continue;
		}
		if (fd < 0)
			return fd;
		err = layout_fits(map, fd);
		if (err == -EPROTO)
			pr_err("node '%s': map %s's layout is not this build's and no migration converts it",
			       u->n.name, name);
		if (!err)
			err = bpf_map__reuse_fd(map, fd);
		close(fd);
		if (err)
			return err;
		i++;
	}
	err = load(skel);
	if (err)
		return err;
	i = 0;
	bpf_object__for_each_map(map, obj) {
		if (pin_made && i < 64 && made[i]) {
			snprintf(name, sizeof(name), "%s%s", prefix,
				 bpf_map__name(map));
			stage_path(u, path, sizeof(path), name);
			if (bpf_map__pin(map, path))
				return -errno;
		}
		i++;
	}
	return 0;
}

static int load_node_skel(void *s)
{
	return node_bpf__load(s);
}

static int load_xdp_skel(void *s)
{
	return xdp_bpf__load(s);
}

static int stage_node_progs(struct upgrade *u)
{
	struct node_bpf *skel = node_bpf__open();
	struct bpf_program *prog;
	char path[PATH_MAX], name[64];
	int err;

	if (!skel)
		return errno ? -errno : -EINVAL;
	err = load_onto_node(u, skel->obj, "", NULL, true, load_node_skel,
			     skel);
	bpf_object__for_each_program(prog, skel->obj) {
		if (err)
			break;
		snprintf(name, sizeof(name), "prog_%s", bpf_program__name(prog));
		stage_path(u, path, sizeof(path), name);
		err = bpf_program__pin(prog, path);
	}
	node_bpf__destroy(skel);
	return err;
}

/* An XDP program of the node: the uplink's (pod_id < 0) or a pod's. */
static int stage_xdp_prog(struct upgrade *u, int pod_id, const char *pin)
{
	struct xdp_bpf *skel = xdp_bpf__open();
	struct bpf_program *prog, *want;
	char path[PATH_MAX];
	int err;

	if (!skel)
		return errno ? -errno : -EINVAL;
	want = pod_id < 0 ? skel->progs.xdp_uplink : skel->progs.xdp_pod_ingress;
	if (pod_id >= 0)
		skel->rodata->pod_id = pod_id;
	bpf_object__for_each_program(prog, skel->obj)
		bpf_program__set_autoload(prog, prog == want);
	err = load_onto_node(u, skel->obj, "", NULL, false, load_xdp_skel,
			     skel);
	if (!err) {
		stage_path(u, path, sizeof(path), pin);
		err = bpf_program__pin(want, path);
	}
	xdp_bpf__destroy(skel);
	return err;
}

static int load_inject_skel(void *s)
{
	return inject_bpf__load(s);
}

/* Injection and the proxy (PIN_DIR/inject/, made with the first grant):
 * their programs loaded onto their own maps and their read-only data (the
 * node's netkit tag), pinned under staging's inject/. Their private maps
 * (fragments, redirect trace) are new with the programs, as they are with
 * each load. */
static int stage_inject_progs(struct upgrade *u)
{
	char path[PATH_MAX], name[64];
	struct bpf_program *prog;
	struct inject_bpf *skel;
	int err;

	snprintf(path, sizeof(path), "%s/" INJECT_DIR, u->n.pin_dir);
	if (access(path, F_OK))
		return 0;
	stage_path(u, path, sizeof(path), INJECT_DIR);
	if (mkdir(path, 0700) && errno != EEXIST)
		return -errno;
	skel = inject_bpf__open();
	if (!skel)
		return errno ? -errno : -EINVAL;
	err = load_onto_node(u, skel->obj, INJECT_DIR "/", skel->maps.rodata,
			     true, load_inject_skel, skel);
	bpf_object__for_each_program(prog, skel->obj) {
		if (err)
			break;
		snprintf(name, sizeof(name), INJECT_DIR "/prog_%s",
			 bpf_program__name(prog));
		stage_path(u, path, sizeof(path), name);
		err = bpf_program__pin(prog, path);
	}
	inject_bpf__destroy(skel);
	return err;
}

/* ---- finding and re-pointing the hooks -------------------------------- */

/* The node's pods, read through the maps as the upgrade leaves them. */
struct pods_view {
	struct pi_node v;
	struct pi_pod_info *pods;
	int cnt;
};

static int collect_pod(const struct pi_node *n, const struct pi_pod_info *pod,
		       void *c)
{
	struct pods_view *pv = c;

	pv->pods[pv->cnt++] = *pod;
	return 0;
}

static void pods_view_close(struct pods_view *pv)
{
	free(pv->pods);
	pv->pods = NULL;
	node_close(&pv->v);
}

static int pods_view_open(struct upgrade *u, struct pods_view *pv)
{
	uint32_t zero = 0;
	int fd, err;

	node_reset(&pv->v);
	pv->cnt = 0;
	memcpy(pv->v.name, u->n.name, sizeof(pv->v.name));
	memcpy(pv->v.pin_dir, u->n.pin_dir, sizeof(pv->v.pin_dir));
	pv->pods = calloc(PI_DP_MAX_PODS, sizeof(*pv->pods));
	if (!pv->pods)
		return -ENOMEM;
	fd = view_get(u, node_map_names[M_NODE_CONFIG]);
	if (fd < 0) {
		err = fd;
		goto fail;
	}
	err = bpf_map_lookup_elem(fd, &zero, &pv->v.cfg) ? -errno : 0;
	close(fd);
	if (err)
		goto fail;
	pv->v.maps[M_PODS] = view_get(u, node_map_names[M_PODS]);
	pv->v.meta_map = view_get(u, PI_POD_META_PIN);
	if (pv->v.maps[M_PODS] < 0 || pv->v.meta_map < 0) {
		err = -ENOENT;
		goto fail;
	}
	err = pod_for_each(&pv->v, collect_pod, pv);
	if (err)
		goto fail;
	return 0;
fail:
	pods_view_close(pv);
	return err;
}

/* 7 -> 8: inject/head_roles, each pod's record written from the maps its
 * roles read, as head_acquire writes them (lib/inject.c). Made here, not
 * empty by the load: an empty one would be right as well (no record,
 * every check), but would leave the shortcut to the next change of each
 * pod's rules. A node without injection has nothing to fill. */
static int migrate_7_to_8(struct upgrade *u)
{
	int auth, rules, inbound, roles, err;
	uint32_t *all;
	char path[PATH_MAX];
	struct pods_view pv;

	snprintf(path, sizeof(path), "%s/" INJECT_DIR, u->n.pin_dir);
	if (access(path, F_OK))
		return 0;
	stage_path(u, path, sizeof(path), INJECT_DIR);
	if (mkdir(path, 0700) && errno != EEXIST)
		return -errno;
	err = pods_view_open(u, &pv);
	if (err)
		return err;
	auth = view_get(u, INJECT_DIR "/inject_auth");
	rules = view_get(u, INJECT_DIR "/proxy_rules");
	inbound = view_get(u, INJECT_DIR "/proxy_inbound_rules");
	roles = bpf_map_create(BPF_MAP_TYPE_ARRAY, "head_roles",
			       sizeof(__u32), sizeof(__u32),
			       PI_DP_HEAD_ROLES_MAX, NULL);
	all = calloc(PI_DP_HEAD_ROLES_MAX, sizeof(*all));
	/* proxy_inbound_rules is ABI 7's: from before it, none */
	if (roles < 0 || auth < 0 || rules < 0 ||
	    (inbound < 0 && inbound != -ENOENT) || !all) {
		err = roles < 0 ? -errno : all ? -ENOENT : -ENOMEM;
		goto out;
	}
	err = head_roles_all(auth, rules, inbound, all);
	for (int i = 0; i < pv.cnt && !err; i++) {
		uint32_t ifindex = pv.pods[i].ifindex, r;

		if (ifindex >= PI_DP_HEAD_ROLES_MAX)
			continue;
		r = all[ifindex] | PI_DP_ROLE_KNOWN;
		if (bpf_map_update_elem(roles, &ifindex, &r, BPF_ANY))
			err = -errno;
	}
	stage_path(u, path, sizeof(path), INJECT_DIR "/head_roles");
	unlink(path);
	if (!err && bpf_obj_pin(roles, path))
		err = -errno;
out:
	for (int i = 0; i < 4; i++) {
		int fd = (int[]){ auth, rules, inbound, roles }[i];

		if (fd >= 0)
			close(fd);
	}
	free(all);
	pods_view_close(&pv);
	return err;
}

static void collect_map_ids(struct idset *set, const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d)) && set->cnt < 256) {
		struct bpf_map_info info = {};
		__u32 len = sizeof(info);
		int fd;

		if (de->d_name[0] == '.' || !strncmp(de->d_name, "prog_", 5) ||
		    !strncmp(de->d_name, "link_", 5) ||
		    !strcmp(de->d_name, PROGRESS_PIN))
			continue;
		fd = get_pin(dir, de->d_name);
		if (fd < 0)
			continue;
		if (!bpf_obj_get_info_by_fd(fd, &info, &len) && info.id)
			set->ids[set->cnt++] = info.id;
		close(fd);
	}
	closedir(d);
}

/* A program is the node's when it uses one of the node's maps: another
 * node's programs, or anyone else's, never do. */
static bool prog_uses(const struct idset *set, uint32_t prog_id)
{
	uint32_t ids[32];
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);
	bool ours = false;
	int fd = bpf_prog_get_fd_by_id(prog_id);

	if (fd < 0)
		return false;
	info.nr_map_ids = 32;
	info.map_ids = (__u64)(unsigned long)ids;
	if (!bpf_obj_get_info_by_fd(fd, &info, &len))
		for (__u32 i = 0; i < info.nr_map_ids && i < 32 && !ours; i++)
			for (int j = 0; j < set->cnt && !ours; j++)
				ours = ids[i] == set->ids[j];
	close(fd);
	return ours;
}

static uint32_t fd_prog_id(int fd)
{
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);

	return bpf_obj_get_info_by_fd(fd, &info, &len) ? 0 : info.id;
}

static uint32_t fd_link_id(int fd)
{
	struct bpf_link_info info = {};
	__u32 len = sizeof(info);

	return bpf_obj_get_info_by_fd(fd, &info, &len) ? 0 : info.id;
}

/* BPF_PROG_QUERY with link ids, as the kernel lays it out for tcx and
 * netkit (newer than libbpf 1.1's). */
struct prog_query_attr {
	uint32_t target_ifindex;
	uint32_t attach_type;
	uint32_t query_flags;
	uint32_t attach_flags;
	uint64_t prog_ids;
	uint32_t count;
	uint32_t pad;
	uint64_t prog_attach_flags;
	uint64_t link_ids;
	uint64_t link_attach_flags;
	uint64_t revision;
};

static int query_links(int ifindex, enum pi_hook hook, uint32_t *progs,
		       uint32_t *links)
{
	struct prog_query_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.target_ifindex = ifindex;
	attr.attach_type = hook_attach_type(hook);
	attr.prog_ids = (uint64_t)(unsigned long)progs;
	attr.link_ids = (uint64_t)(unsigned long)links;
	attr.count = MAX_IDS;
	if (syscall(__NR_bpf, BPF_PROG_QUERY, &attr, sizeof(attr)))
		return -errno;
	return attr.count < MAX_IDS ? (int)attr.count : MAX_IDS;
}

/* tcx or netkit: the node's links at the hook are updated to prog_fd; the
 * one pinned at `pin` is kept (or, its pin lost, the first), any other
 * of the node's is detached, and the kept one is pinned at `pin`. */

/* Points link_fd at prog_fd, compare and swap: the update names the
 * program the link ran (old_id) when it is still loaded, so that a link
 * anything changed since the query is refused, not replaced blindly. */
static int link_update_cas(int link_fd, int prog_fd, uint32_t old_id)
{
	int old = bpf_prog_get_fd_by_id(old_id), err;
	LIBBPF_OPTS(bpf_link_update_opts, opts,
		    .flags = old >= 0 ? BPF_F_REPLACE : 0,
		    .old_prog_fd = old >= 0 ? old : 0);

	err = bpf_link_update(link_fd, prog_fd, &opts);
	if (old >= 0)
		close(old);
	return err;
}

static int switch_link(struct upgrade *u, int ifindex, enum pi_hook hook,
		       int prog_fd, const char *pin)
{
	uint32_t progs[MAX_IDS] = {}, links[MAX_IDS] = {};
	uint32_t want = fd_prog_id(prog_fd), pinned = 0, keep = 0, keep_prog = 0;
	int cnt, fd, err = 0;

	fd = bpf_obj_get(pin);
	if (fd >= 0) {
		pinned = fd_link_id(fd);
		close(fd);
	}
	cnt = query_links(ifindex, hook, progs, links);
	if (cnt < 0)
		return cnt;
	for (int i = 0; i < cnt; i++) {
		if (!links[i] || !prog_uses(&u->node_maps, progs[i]))
			continue;
		if (!keep || links[i] == pinned) {
			keep = links[i];
			keep_prog = progs[i];
		}
	}
	for (int i = 0; i < cnt; i++) {
		if (!links[i] || links[i] == keep || !prog_uses(&u->node_maps, progs[i]))
			continue;
		fd = bpf_link_get_fd_by_id(links[i]);
		if (fd >= 0) {
			if (!bpf_link_detach(fd) && u->info)
				u->info->removed++;
			close(fd);
		}
	}
	if (!keep) {
		/* Its program is gone (pin and link): attach it again. */
		unlink(pin);
		err = attach_prog(prog_fd, ifindex, hook, PI_ATTACH_TCX, false,
				  PI_PRIO_DATAPATH, pin);
		if (!err && u->info)
			u->info->attached++;
		return err;
	}
	fd = bpf_link_get_fd_by_id(keep);
	if (fd < 0)
		return -errno;
	if (keep_prog != want)
		err = link_update_cas(fd, prog_fd, keep_prog);
	if (!err && keep != pinned) {
		unlink(pin);
		err = bpf_obj_pin(fd, pin) ? -errno : 0;
	}
	close(fd);
	if (!err && u->info)
		u->info->hooks++;
	return err;
}

/* clsact: the filter at the node's priority and handle is replaced in
 * one step; the program pinned at `pin` (the record that it is attached)
 * is replaced by the new one. */
static int switch_filter(struct upgrade *u, int ifindex, enum pi_hook hook,
			 int prog_fd, const char *pin)
{
	DECLARE_LIBBPF_OPTS(bpf_tc_hook, tc_hook, .ifindex = ifindex,
			    .attach_point = hook == PI_HOOK_INGRESS ?
					    BPF_TC_INGRESS : BPF_TC_EGRESS);
	DECLARE_LIBBPF_OPTS(bpf_tc_opts, q, .handle = 1,
			    .priority = PI_PRIO_DATAPATH);
	DECLARE_LIBBPF_OPTS(bpf_tc_opts, opts, .handle = 1,
			    .priority = PI_PRIO_DATAPATH, .prog_fd = prog_fd,
			    .flags = BPF_TC_F_REPLACE);
	char tmp[PATH_MAX];
	int err;

	err = bpf_tc_query(&tc_hook, &q);
	if (err == -ENOENT) {
		unlink(pin);
		err = attach_prog(prog_fd, ifindex, hook, PI_ATTACH_CLSACT,
				  false, PI_PRIO_DATAPATH, pin);
		if (!err && u->info)
			u->info->attached++;
		return err;
	}
	if (err)
		return err;
	if (q.prog_id != fd_prog_id(prog_fd)) {
		if (!prog_uses(&u->node_maps, q.prog_id)) {
			pr_err("node '%s': device %d has a filter that is not the node's at priority %u",
			       u->n.name, ifindex, PI_PRIO_DATAPATH);
			return -EBUSY;
		}
		err = bpf_tc_attach(&tc_hook, &opts);
		if (err)
			return err;
	}
	/* bpffs takes no '.' in a name */
	snprintf(tmp, sizeof(tmp), "%s_new", pin);
	unlink(tmp);
	if (bpf_obj_pin(prog_fd, tmp) || rename(tmp, pin))
		err = -errno;
	if (!err && u->info)
		u->info->hooks++;
	return err;
}

/* XDP: replaced only if the program there is the node's (the expected
 * one is named, so a program someone attached meanwhile stays). */
static int switch_xdp(struct upgrade *u, int ifindex, int prog_fd)
{
	LIBBPF_OPTS(bpf_xdp_query_opts, q);
	int old, err;

	err = bpf_xdp_query(ifindex, 0, &q);
	if (err)
		return err;
	if (q.drv_prog_id == fd_prog_id(prog_fd)) {
		if (u->info)
			u->info->hooks++;
		return 0;
	}
	if (!q.drv_prog_id || !prog_uses(&u->node_maps, q.drv_prog_id)) {
		pr_err("node '%s': device %d does not run the node's XDP program",
		       u->n.name, ifindex);
		return -ENOLINK;
	}
	old = bpf_prog_get_fd_by_id(q.drv_prog_id);
	if (old < 0)
		return -errno;
	{
		LIBBPF_OPTS(bpf_xdp_attach_opts, opts, .old_prog_fd = old);

		err = bpf_xdp_attach(ifindex, prog_fd,
				     XDP_FLAGS_DRV_MODE | XDP_FLAGS_REPLACE,
				     &opts);
	}
	close(old);
	if (!err && u->info)
		u->info->hooks++;
	return err;
}

/* A pod's XDP ACL held by its link (lib/xdp.c): the link is pointed at
 * prog_fd, compare and swap against old_id, the program the device runs. */
static int switch_xdp_link(struct upgrade *u, int link_fd, uint32_t old_id,
			   int prog_fd)
{
	int err = link_update_cas(link_fd, prog_fd, old_id);

	if (!err && u->info)
		u->info->hooks++;
	return err;
}

/* A pod's XDP ACL on its eth0 (in the pod's namespace): pointed at
 * prog_fd by its link's update, or (an older build's ACL) by netlink
 * replace, naming the program the device runs, if that is the node's.
 * One that is not there, or not the node's (root in the pod owns eth0 and
 * may have taken the ACL off or put its own in its place), fails nothing:
 * hold_xdp_links() attaches the ACL again after the commit. */
static int switch_pod_xdp(struct upgrade *u, int ifindex, int prog_fd,
			  int link_fd)
{
	LIBBPF_OPTS(bpf_xdp_query_opts, q);
	int err;

	err = bpf_xdp_query(ifindex, 0, &q);
	if (err)
		return err;
	if (q.drv_prog_id != fd_prog_id(prog_fd)) {
		if (!q.drv_prog_id || !prog_uses(&u->node_maps, q.drv_prog_id)) {
			pr_warn("node '%s': a pod's eth0 (device %d) does not run its XDP ACL; it is attached again when the upgrade commits",
				u->n.name, ifindex);
			return 0;
		}
		if (link_fd >= 0)
			return switch_xdp_link(u, link_fd, q.drv_prog_id, prog_fd);
		return switch_xdp(u, ifindex, prog_fd);
	}
	if (u->info)
		u->info->hooks++;
	return 0;
}

/* A pod's device that is gone (its namespace deleted, or the pod's side
 * deleted by root in the pod, which takes the pair with it) runs nothing
 * to re-point: the pod's records wait for its pod del, which the node
 * refuses until the upgrade is done. In the current namespace. */
static bool dev_gone(int ifindex)
{
	char name[IF_NAMESIZE];

	return !if_indextoname(ifindex, name) && (errno == ENXIO || errno == ENODEV);
}

static int switch_hook(struct upgrade *u, const struct pi_node *v, int ifindex,
		       enum pi_hook hook, bool force_tcx, int prog_fd,
		       const char *pin_name)
{
	char pin[PATH_MAX];
	int err;

	node_pin_path(v, pin, sizeof(pin), "%s", pin_name);
	if (force_tcx || node_attach_mode(v) == PI_ATTACH_TCX)
		err = switch_link(u, ifindex, hook, prog_fd, pin);
	else
		err = switch_filter(u, ifindex, hook, prog_fd, pin);
	if (err)
		pr_err("node '%s': cannot re-point %s (device %d): %s",
		       u->n.name, pin_name, ifindex, strerror(-err));
	return err;
}

static int switch_inject(struct upgrade *u, const struct pods_view *pv,
			 bool live_only);

/* Points every hook of the node at the programs of `live_only` ? the live
 * pins (the old programs: a rollback) : the view (the new ones). */
static int switch_all(struct upgrade *u, bool live_only)
{
	static const char *const names[P__COUNT] = {
		[P_POD_EGRESS] = "prog_pod_egress",
		[P_POD_INGRESS] = "prog_pod_ingress",
		[P_UPLINK_INGRESS] = "prog_uplink_ingress",
		[P_POD_EGRESS_NETKIT] = "prog_pod_egress_nk",
		[P_POD_INGRESS_NETKIT] = "prog_pod_ingress_nk",
	};
	int progs[P__COUNT], xdp_fd = -1, saved = -1, err = 0;
	struct pods_view pv;
	char name[64];
	bool first = true;

	for (int i = 0; i < P__COUNT; i++)
		progs[i] = -1;
	err = pods_view_open(u, &pv);
	if (err) {
		pr_err("node '%s': cannot read its pods: %s", u->n.name,
		       strerror(-err));
		return err;
	}
	for (int i = 0; i < P__COUNT && !err; i++) {
		progs[i] = live_only ? get_pin(u->n.pin_dir, names[i]) :
				       view_get(u, names[i]);
		if (progs[i] < 0)
			err = progs[i];
	}
	if (!err)
		err = netns_enter(u->netns_fd, &saved);
	for (int i = 0; i < pv.cnt && !err; i++) {
		const struct pi_pod_info *pod = &pv.pods[i];
		bool nk = pod->flags & PI_POD_NETKIT;
		char pin[64];

		/* another plugin's datapath: nothing of ours on its hooks
		 * but while the pod has a policy, and none is added by an
		 * upgrade */
		if (!pod_programs_on(&pv.v, pod) || dev_gone(pod->ifindex))
			continue;
		snprintf(pin, sizeof(pin), "link_pod_%u_egress", pod->ifindex);
		err = switch_hook(u, &pv.v, pod->ifindex,
				  nk ? PI_HOOK_NETKIT_PEER : PI_HOOK_INGRESS, nk,
				  progs[nk ? P_POD_EGRESS_NETKIT : P_POD_EGRESS],
				  pin);
		if (first && !err && !live_only) {
			err = point(u, PI_UPGRADE_AT_FIRST_HOOK);
			first = false;
		}
		snprintf(pin, sizeof(pin), "link_pod_%u_ingress", pod->ifindex);
		if (!err)
			err = switch_hook(u, &pv.v, pod->ifindex,
					  nk ? PI_HOOK_NETKIT_PRIMARY :
					       PI_HOOK_EGRESS, nk,
					  progs[nk ? P_POD_INGRESS_NETKIT :
						     P_POD_INGRESS], pin);
	}
	if (!err && pv.v.cfg.uplink_ifindex)
		err = switch_hook(u, &pv.v, pv.v.cfg.uplink_ifindex,
				  PI_HOOK_INGRESS, false,
				  progs[P_UPLINK_INGRESS], "link_uplink");
	if (!err && pv.v.cfg.uplink_ifindex &&
	    (pv.v.cfg.flags & PI_NODE_XDP)) {
		xdp_fd = live_only ? get_pin(u->n.pin_dir, "prog_xdp_uplink") :
				     view_get(u, "prog_xdp_uplink");
		err = xdp_fd < 0 ? xdp_fd :
		      switch_xdp(u, pv.v.cfg.uplink_ifindex, xdp_fd);
		if (xdp_fd >= 0)
			close(xdp_fd);
	}
	if (saved >= 0)
		netns_restore(saved);
	/* Pods' XDP ACLs, on their eth0 in their own namespaces. */
	for (int i = 0; i < pv.cnt && !err; i++) {
		const struct pi_pod_info *pod = &pv.pods[i];
		int ns, link;

		if (!(pod->flags & PI_POD_XDP))
			continue;
		snprintf(name, sizeof(name), "prog_xdp_pod_%u", pod->ifindex);
		xdp_fd = live_only ? get_pin(u->n.pin_dir, name) :
				     view_get(u, name);
		snprintf(name, sizeof(name), "link_xdp_pod_%u", pod->ifindex);
		link = get_pin(u->n.pin_dir, name);
		ns = pod_netns_open(pod);
		/* its namespace gone: nothing runs there */
		err = xdp_fd < 0 ? xdp_fd : ns == -ENOENT ? 0 : ns < 0 ? ns :
		      link < 0 && link != -ENOENT ? link :
		      netns_enter(ns, &saved);
		if (!err && ns >= 0) {
			if (!dev_gone(pod->peer_ifindex))
				err = switch_pod_xdp(u, pod->peer_ifindex,
						     xdp_fd, link);
			netns_restore(saved);
		}
		if (link >= 0)
			close(link);
		if (ns >= 0)
			close(ns);
		if (xdp_fd >= 0)
			close(xdp_fd);
		if (err)
			pr_err("node '%s': cannot re-point pod '%s''s XDP program: %s",
			       u->n.name, pod->name, strerror(-err));
	}
	if (!err)
		err = switch_inject(u, &pv, live_only);
	for (int i = 0; i < P__COUNT; i++)
		if (progs[i] >= 0)
			close(progs[i]);
	pods_view_close(&pv);
	return err;
}

/* ---- injection's and the proxy's hooks -------------------------------- */

static void collect_all_map_ids(struct upgrade *u)
{
	char dir[PATH_MAX];

	collect_map_ids(&u->node_maps, u->n.pin_dir);
	collect_map_ids(&u->node_maps, u->stage);
	snprintf(dir, sizeof(dir), "%s/" INJECT_DIR, u->n.pin_dir);
	collect_map_ids(&u->inject_maps, dir);
	stage_path(u, dir, sizeof(dir), INJECT_DIR);
	collect_map_ids(&u->inject_maps, dir);
}

static int prog_name_of(uint32_t id, char *name, size_t len)
{
	struct bpf_prog_info info = {};
	__u32 ilen = sizeof(info);
	int fd = bpf_prog_get_fd_by_id(id), err = 0;

	if (fd < 0)
		return -errno;
	if (bpf_obj_get_info_by_fd(fd, &info, &ilen))
		err = -errno;
	else
		snprintf(name, len, "%s", info.name);
	close(fd);
	return err;
}

/* The injection program that replaces the one with id `old`: the one of
 * the same name, this build's (or with live_only the live one). */
static int inject_prog_for(struct upgrade *u, uint32_t old, bool live_only)
{
	char name[BPF_OBJ_NAME_LEN], pin[64];
	int err = prog_name_of(old, name, sizeof(name));

	if (err)
		return err;
	snprintf(pin, sizeof(pin), INJECT_DIR "/prog_%s", name);
	return live_only ? get_pin(u->n.pin_dir, pin) : view_get(u, pin);
}

/* Whether fd is a BPF program's (not a link's or a map's): the kernel
 * names the anonymous inode of each kind. A link's info has an id too,
 * from another numbering than programs', so an id alone cannot say. */
static bool fd_is_prog(int fd)
{
	char path[64], what[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, what, sizeof(what) - 1);
	if (n < 0)
		return false;
	what[n] = '\0';
	return !strcmp(what, "anon_inode:bpf-prog");
}

/* clsact filters are recorded by the program pinned at their link_ path
 * (attach_prog): the records of the replaced program now name the new.
 * The other link_ pins are links (the proxy's socket lookup, a netkit
 * pod's): left alone, whatever their ids. */
static int repin_records(struct upgrade *u, uint32_t old, int prog_fd)
{
	char dir[PATH_MAX], pin[PATH_MAX], tmp[PATH_MAX];
	struct dirent *de;
	int err = 0;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/" INJECT_DIR, u->n.pin_dir);
	d = opendir(dir);
	if (!d)
		return -errno;
	while ((de = readdir(d)) && !err) {
		struct bpf_prog_info info = {};
		__u32 len = sizeof(info);
		int fd;

		if (strncmp(de->d_name, "link_", 5) || strstr(de->d_name, "_new"))
			continue;
		snprintf(pin, sizeof(pin), "%s/%s", dir, de->d_name);
		fd = bpf_obj_get(pin);
		if (fd < 0)
			continue;
		if (fd_is_prog(fd) &&
		    !bpf_obj_get_info_by_fd(fd, &info, &len) && info.id == old) {
			snprintf(tmp, sizeof(tmp), "%s_new", pin);
			unlink(tmp);
			if (bpf_obj_pin(prog_fd, tmp) || rename(tmp, pin))
				err = -errno;
		}
		close(fd);
	}
	closedir(d);
	return err;
}

/* Every injection or proxy program at the hook (one that uses their maps)
 * gets its counterpart: tcx links updated in place, the clsact filter at
 * the head priority replaced. Nothing is attached or detached here: what
 * is attached where is injection's business, the upgrade only swaps. */

/* Points an injection or proxy link at nfd, naming the program it runs
 * now (old_id) so that a concurrent change is refused, not overwritten;
 * nothing when it runs nfd's program already. */
static int link_swap(struct upgrade *u, int link_fd, int nfd, uint32_t old_id)
{
	int err;

	if (fd_prog_id(nfd) == old_id)
		return 0;
	err = link_update_cas(link_fd, nfd, old_id);
	if (!err && u->info)
		u->info->inject_hooks++;
	return err;
}

/* clsact: the filter at `prio`, handle 1, replaced in place when it runs
 * an injection or proxy program. */
static int switch_inject_filter(struct upgrade *u, int ifindex,
				enum pi_hook hook, uint32_t prio,
				bool live_only)
{
	DECLARE_LIBBPF_OPTS(bpf_tc_hook, tc_hook, .ifindex = ifindex,
			    .attach_point = hook == PI_HOOK_INGRESS ?
					    BPF_TC_INGRESS : BPF_TC_EGRESS);
	DECLARE_LIBBPF_OPTS(bpf_tc_opts, q, .handle = 1, .priority = prio);
	int err, nfd;

	err = bpf_tc_query(&tc_hook, &q);
	if (err == -ENOENT || err == -EINVAL)
		return 0;	/* no filter (or no clsact) there */
	if (err || !prog_uses(&u->inject_maps, q.prog_id))
		return err;
	nfd = inject_prog_for(u, q.prog_id, live_only);
	if (nfd < 0)
		return nfd;
	if (fd_prog_id(nfd) != q.prog_id) {
		DECLARE_LIBBPF_OPTS(bpf_tc_opts, opts, .handle = 1,
				    .priority = prio, .prog_fd = nfd,
				    .flags = BPF_TC_F_REPLACE);

		err = bpf_tc_attach(&tc_hook, &opts);
		if (!err)
			err = repin_records(u, q.prog_id, nfd);
		if (!err && u->info)
			u->info->inject_hooks++;
	}
	close(nfd);
	return err;
}

static int switch_inject_hook(struct upgrade *u, int ifindex, enum pi_hook hook,
			      bool tcx, bool live_only)
{
	uint32_t progs[MAX_IDS] = {}, links[MAX_IDS] = {};
	int cnt, fd, nfd, err = 0;

	if (!tcx) {
		/* the head, and inside a pod the proxy's assign hook */
		static const uint32_t prios[] = { PI_PRIO_HEAD,
						  PI_PRIO_POD_ASSIGN };

		for (size_t i = 0; i < sizeof(prios) / sizeof(prios[0]) &&
		     !err; i++)
			err = switch_inject_filter(u, ifindex, hook, prios[i],
						   live_only);
		return err;
	}
	cnt = query_links(ifindex, hook, progs, links);
	if (cnt == -ENOENT || cnt == -EINVAL)
		return 0;
	if (cnt < 0)
		return cnt;
	for (int i = 0; i < cnt && !err; i++) {
		if (!links[i] || !prog_uses(&u->inject_maps, progs[i]))
			continue;
		nfd = inject_prog_for(u, progs[i], live_only);
		if (nfd < 0)
			return nfd;
		fd = bpf_link_get_fd_by_id(links[i]);
		if (fd < 0)
			err = -errno;
		if (!err)
			err = link_swap(u, fd, nfd, progs[i]);
		if (fd >= 0)
			close(fd);
		close(nfd);
	}
	return err;
}

/* The proxies' socket lookup links live in the proxies' namespaces, whose
 * query gives no link ids: they are found by their pins. */
static int switch_lookup_links(struct upgrade *u, bool live_only)
{
	char dir[PATH_MAX], pin[PATH_MAX];
	struct dirent *de;
	int err = 0;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/" INJECT_DIR, u->n.pin_dir);
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d)) && !err) {
		struct bpf_link_info info = {};
		__u32 len = sizeof(info);
		int fd, nfd;

		if (strncmp(de->d_name, "link_lookup_", 12))
			continue;
		snprintf(pin, sizeof(pin), "%s/%s", dir, de->d_name);
		fd = bpf_obj_get(pin);
		if (fd < 0)
			continue;
		if (bpf_obj_get_info_by_fd(fd, &info, &len) ||
		    !prog_uses(&u->inject_maps, info.prog_id)) {
			close(fd);
			continue;
		}
		nfd = inject_prog_for(u, info.prog_id, live_only);
		if (nfd < 0)
			err = nfd;
		else
			err = link_swap(u, fd, nfd, info.prog_id);
		if (nfd >= 0)
			close(nfd);
		close(fd);
	}
	closedir(d);
	return err;
}

/* A netkit guard runs its target's egress program from a prog array slot;
 * for podinject's own netkit pods that is the node's pod_egress_nk, which
 * the slot must follow to this build's (an adopted pod's CNI program is
 * left as it is). */
static int follow_guards(struct upgrade *u, bool live_only)
{
	int guards = -1, slots = -1, nfd = -1, err = 0;
	uint32_t key, next, *prev = NULL;
	struct pi_dp_netkit_guard g;

	guards = view_get(u, INJECT_DIR "/netkit_guards");
	slots = view_get(u, INJECT_DIR "/netkit_peer_progs");
	if (guards < 0 || slots < 0)
		goto out;
	nfd = live_only ? get_pin(u->n.pin_dir, "prog_pod_egress_nk") :
			  view_get(u, "prog_pod_egress_nk");
	if (nfd < 0) {
		err = nfd;
		goto out;
	}
	while (!err && !bpf_map_get_next_key(guards, prev, &next)) {
		uint32_t id = 0;

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(guards, &key, &g) ||
		    bpf_map_lookup_elem(slots, &g.slot, &id) ||
		    id == fd_prog_id(nfd) || !prog_uses(&u->node_maps, id))
			continue;
		/* A prog array takes BPF_ANY only (EINVAL for BPF_EXIST);
		 * the slot was just read, and the node is locked. */
		if (bpf_map_update_elem(slots, &g.slot, &nfd, BPF_ANY))
			err = -errno;
	}
out:
	if (guards >= 0)
		close(guards);
	if (slots >= 0)
		close(slots);
	if (nfd >= 0)
		close(nfd);
	return err;
}

/* Every hook where injection or the proxy may run: each pod's egress hook
 * (the head program; a netkit pod's guard and untag), each pod's eth0
 * ingress in its namespace (proxy capture and replies), the proxies'
 * socket lookups; then the guards' slots. */
static int switch_inject(struct upgrade *u, const struct pods_view *pv,
			 bool live_only)
{
	bool tcx = node_attach_mode(&pv->v) == PI_ATTACH_TCX;
	char dir[PATH_MAX];
	int saved = -1, ns, err;

	snprintf(dir, sizeof(dir), "%s/" INJECT_DIR, u->n.pin_dir);
	if (access(dir, F_OK))
		return 0;
	err = netns_enter(u->netns_fd, &saved);
	for (int i = 0; i < pv->cnt && !err; i++) {
		const struct pi_pod_info *pod = &pv->pods[i];

		if (dev_gone(pod->ifindex))
			continue;
		if (pod->flags & PI_POD_NETKIT) {
			err = switch_inject_hook(u, pod->ifindex,
						 PI_HOOK_NETKIT_PEER, true,
						 live_only);
			if (!err)
				err = switch_inject_hook(u, pod->ifindex,
							 PI_HOOK_INGRESS, true,
							 live_only);
		} else {
			err = switch_inject_hook(u, pod->ifindex,
						 PI_HOOK_INGRESS, tcx,
						 live_only);
		}
	}
	if (saved >= 0)
		netns_restore(saved);
	for (int i = 0; i < pv->cnt && !err; i++) {
		const struct pi_pod_info *pod = &pv->pods[i];

		ns = pod_netns_open(pod);
		if (ns < 0)
			continue;	/* its namespace is gone: nothing runs */
		err = netns_enter(ns, &saved);
		close(ns);
		if (err)
			break;
		if (!dev_gone(pod->peer_ifindex))
			err = switch_inject_hook(u, pod->peer_ifindex,
						 PI_HOOK_INGRESS, tcx, live_only);
		netns_restore(saved);
	}
	if (!err)
		err = switch_lookup_links(u, live_only);
	if (!err)
		err = follow_guards(u, live_only);
	if (err)
		pr_err("node '%s': cannot re-point the injection and proxy programs: %s",
		       u->n.name, strerror(-err));
	return err;
}

/* ---- the phases ------------------------------------------------------- */

static int stage(struct upgrade *u)
{
	struct pods_view pv;
	char name[64];
	int err;

	err = run_steps(u, false);
	if (!err)
		err = stage_node_progs(u);
	if (err) {
		pr_err("node '%s': cannot load this build's datapath onto it: %s",
		       u->n.name, strerror(-err));
		return err;
	}
	err = pods_view_open(u, &pv);
	if (err)
		return err;
	/* pinned by every --xdp node, attached where it has an uplink */
	if (pv.v.cfg.flags & PI_NODE_XDP)
		err = stage_xdp_prog(u, -1, "prog_xdp_uplink");
	for (int i = 0; i < pv.cnt && !err; i++) {
		if (!(pv.pods[i].flags & PI_POD_XDP))
			continue;
		snprintf(name, sizeof(name), "prog_xdp_pod_%u",
			 pv.pods[i].ifindex);
		err = stage_xdp_prog(u, pv.pods[i].id, name);
	}
	pods_view_close(&pv);
	if (err) {
		pr_err("node '%s': cannot load this build's XDP programs: %s",
		       u->n.name, strerror(-err));
		return err;
	}
	err = stage_inject_progs(u);
	if (err)
		pr_err("node '%s': cannot load this build's injection programs: %s",
		       u->n.name, strerror(-err));
	return err;
}

/* Staged pins over the live ones (a staged folder's one by one into the
 * live folder of its name), the progress record last of all. */
static int commit_dir(struct upgrade *u, const char *sub, bool *first)
{
	char sdir[PATH_MAX], ldir[PATH_MAX], from[PATH_MAX], to[PATH_MAX];
	struct dirent *de;
	struct stat st;
	int err = 0;
	DIR *d;

	snprintf(sdir, sizeof(sdir), "%s%s%s", u->stage, *sub ? "/" : "", sub);
	snprintf(ldir, sizeof(ldir), "%s%s%s", u->n.pin_dir, *sub ? "/" : "",
		 sub);
	d = opendir(sdir);
	if (!d)
		return -errno;
	while ((de = readdir(d)) && !err) {
		if (de->d_name[0] == '.' ||
		    (!*sub && !strcmp(de->d_name, PROGRESS_PIN)))
			continue;
		snprintf(from, sizeof(from), "%s/%s", sdir, de->d_name);
		snprintf(to, sizeof(to), "%s/%s", ldir, de->d_name);
		if (!*sub && !lstat(from, &st) && S_ISDIR(st.st_mode)) {
			err = commit_dir(u, de->d_name, first);
			continue;
		}
		if (rename(from, to))
			err = -errno;
		if (!err && *first) {
			err = point(u, PI_UPGRADE_AT_FIRST_RENAME);
			*first = false;
		}
	}
	closedir(d);
	return err;
}

static int commit(struct upgrade *u)
{
	bool first = true;

	return commit_dir(u, "", &first);
}

/* After the commit: this build's sweep of the flow entries without a
 * timer pointed at its programs, and a round that meets the ones the old
 * programs left (inject_sweep_start). */
static void sweep_start(const struct upgrade *u)
{
	char dir[PATH_MAX];

	snprintf(dir, sizeof(dir), "%s/" INJECT_DIR, u->n.pin_dir);
	if (!access(dir, F_OK))
		inject_sweep_start(dir);
}

/* After the commit, when the pins are this build's: every pod's XDP ACL
 * held by a link (lib/xdp.c), where an older build attached it by netlink.
 * Netlink cannot hand a program to a link, so this is no switch but a
 * detach and attach around which the pod takes the tc way; it can only go
 * forward, and a resumed upgrade redoes what is left. */
static int hold_xdp_links(struct upgrade *u)
{
	struct pods_view pv;
	int err;

	err = pods_view_open(u, &pv);
	if (err)
		return err;
	if (pv.v.cfg.flags & PI_NODE_XDP) {
		pv.v.netns_fd = dup(u->netns_fd);
		if (pv.v.netns_fd < 0)
			err = -errno;
	}
	for (int i = 0; i < pv.cnt && !err && (pv.v.cfg.flags & PI_NODE_XDP); i++) {
		err = xdp_pod_hold(&pv.v, &pv.pods[i]);
		if (err)
			pr_err("node '%s': cannot hold pod '%s''s XDP program by a link: %s",
			       u->n.name, pv.pods[i].name, strerror(-err));
	}
	pods_view_close(&pv);
	return err;
}

static int bump(struct upgrade *u)
{
	struct pi_node_config cfg;
	struct timespec ts;
	uint32_t zero = 0;
	int fd, err = 0;

	fd = get_pin(u->n.pin_dir, node_map_names[M_NODE_CONFIG]);
	if (fd < 0)
		return fd;
	if (bpf_map_lookup_elem(fd, &zero, &cfg)) {
		close(fd);
		return -errno;
	}
	cfg.abi = PI_ABI_VERSION;
	if (u->pr.from_abi != PI_ABI_VERSION) {
		clock_gettime(CLOCK_REALTIME, &ts);
		cfg.upgraded_from = u->pr.from_abi;
		cfg.upgraded_ns = ts.tv_sec * 1000000000ULL + ts.tv_nsec;
	}
	if (bpf_map_update_elem(fd, &zero, &cfg, 0))
		err = -errno;
	close(fd);
	return err;
}

static int finish(struct upgrade *u)
{
	char path[PATH_MAX];
	int err;

	stage_path(u, path, sizeof(path), PROGRESS_PIN);
	err = unlink(path) && errno != ENOENT ? -errno : 0;
	if (!err)
		err = rm_tree(u->stage);
	return err;
}

/* Back to the node as it was before the upgrade began: staging removed,
 * the version restored. Only before any hook runs a staged program. */
static int roll_back(struct upgrade *u)
{
	int err = set_live_abi(u, u->pr.from_abi);

	if (!err)
		err = finish(u);
	if (err)
		pr_err("node '%s': cannot roll the upgrade back: %s; run 'node upgrade' again",
		       u->n.name, strerror(-err));
	return err;
}

static int open_progress(struct upgrade *u, bool create)
{
	char path[PATH_MAX];
	uint32_t zero = 0;
	int fd;

	stage_path(u, path, sizeof(path), PROGRESS_PIN);
	fd = bpf_obj_get(path);
	if (fd >= 0) {
		u->progress_fd = fd;
		return bpf_map_lookup_elem(fd, &zero, &u->pr) ? -errno : 1;
	}
	if (errno != ENOENT || !create)
		return -errno;
	/* No record: whatever is staged is not live (a commit leaves only
	 * the record and empty folders), but a finish() cut off between
	 * the record's unlink and the staging's removal left it, and
	 * view_get() would take its stale copies over the live objects. */
	fd = rm_tree(u->stage);
	if (fd)
		return fd;
	if (mkdir(u->stage, 0700))
		return -errno;
	fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "pi_upgrade", sizeof(__u32),
			    sizeof(u->pr), 1, NULL);
	if (fd < 0)
		return -errno;
	u->progress_fd = fd;
	if (bpf_map_update_elem(fd, &zero, &u->pr, 0) || bpf_obj_pin(fd, path))
		return -errno;
	return 0;
}

/* From the switch on. `fresh`: this run staged everything, so a hook that
 * cannot be re-pointed sends them all back to the old programs and the
 * upgrade is rolled back; a resumed upgrade can only go on. */
static int forward(struct upgrade *u, bool fresh)
{
	int err = 0;

	if (u->pr.phase <= UP_SWITCHING) {
		err = save_progress(u, UP_SWITCHING);
		if (!err)
			err = switch_all(u, false);
		if (!err)
			err = point(u, PI_UPGRADE_AT_SWITCHED);
		if (!err)
			err = run_steps(u, true);
		if (err && fresh) {
			/* Nothing is committed: every hook back to the old
			 * programs, then as if the upgrade had not begun. */
			if (!switch_all(u, true) && !roll_back(u))
				pr_err("node '%s': the upgrade failed and was rolled back; the node is as it was",
				       u->n.name);
			else
				pr_err("node '%s': some hooks may run this build's programs; run 'node upgrade' again",
				       u->n.name);
			return err;
		}
		if (!err)
			err = save_progress(u, UP_COMMITTING);
	}
	if (!err && u->pr.phase == UP_COMMITTING) {
		err = commit(u);
		if (!err)
			err = point(u, PI_UPGRADE_AT_COMMITTED);
		if (!err)
			sweep_start(u);
		if (!err)
			err = hold_xdp_links(u);
		if (!err)
			err = bump(u);
		if (!err)
			err = point(u, PI_UPGRADE_AT_BUMPED);
		if (!err)
			err = save_progress(u, UP_DONE);
	}
	if (!err)
		err = finish(u);
	if (err)
		pr_err("node '%s': the upgrade could not be finished: %s; run 'node upgrade' again",
		       u->n.name, strerror(-err));
	return err;
}

/* A node of version `abi`, unmarked, that this build does not upgrade:
 * a newer build's (no downgrade), or one older than v0.1's. */
static int version_refused(const char *name, uint32_t abi)
{
	if (abi > PI_ABI_VERSION) {
		pr_err("node '%s' was set up by a newer podinject build (node ABI %u, this build uses %u): "
		       "a downgrade is not supported; nothing was changed. Use the newer build, "
		       "or remove the node with 'podinject -N %s node down --force'",
		       name, abi, PI_ABI_VERSION, name);
		return -EPROTO;
	}
	if (abi < PI_ABI_OLDEST_UPGRADE) {
		pr_err("node '%s' was set up with ABI %u; this build upgrades nodes from ABI %u on (v0.1). "
		       "Take it down with the build that made it, or with 'podinject -N %s node down --force'",
		       name, abi, PI_ABI_OLDEST_UPGRADE, name);
		return -EPROTO;
	}
	return 0;
}

int pi_node_upgrade(const char *name, const struct pi_node_upgrade_opts *o,
		    struct pi_node_upgrade_info *info)
{
	struct upgrade u = { .o = o, .info = info, .progress_fd = -1,
			     .netns_fd = -1 };
	int timeout = o && o->lock_timeout_ms ? o->lock_timeout_ms :
						PI_LOCK_TIMEOUT_MS;
	uint32_t abi;
	int err, had;

	if (info)
		memset(info, 0, sizeof(*info));
	if (!pi_valid_name(name, PI_NODE_NAME_MAX)) {
		pr_err("invalid node name '%s': use 1-15 of a-z, 0-9, '-'",
		       name ? name : "");
		return -EINVAL;
	}
	err = node_open(&u.n, name, NODE_LOCK_UPGRADE, timeout);
	if (err)
		return err;
	abi = u.n.cfg.abi;
	snprintf(u.stage, sizeof(u.stage), "%s/%s", u.n.pin_dir, STAGE_DIR);
	had = open_progress(&u, false);
	if (had < 0 && had != -ENOENT) {
		err = had;
		pr_err("node '%s': cannot read its upgrade record: %s", name,
		       strerror(-err));
		goto out;
	}
	if (had == 1 && u.pr.to_abi != PI_ABI_VERSION &&
	    u.pr.phase >= UP_SWITCHING) {
		pr_err("node '%s' is half-way through an upgrade to ABI %u by another build; finish it with that build",
		       name, u.pr.to_abi);
		err = -EPROTO;
		goto out;
	}
	if (had != 1 && (abi & PI_ABI_UPGRADING)) {
		/* Marked, and the record gone: only a rollback's last step
		 * can leave this; what remains of it is the version. */
		u.pr.from_abi = abi & ~PI_ABI_UPGRADING;
		err = set_live_abi(&u, u.pr.from_abi);
		if (err)
			goto out;
		abi = u.pr.from_abi;
	}
	if (had != 1) {
		err = version_refused(name, abi);
		if (err)
			goto out;
	}
	err = read_live_head(&u);
	if (err) {
		pr_err("node '%s': cannot read its configuration: %s", name,
		       strerror(-err));
		goto out;
	}
	err = netns_open_any(node_netns(&u.n));
	if (err < 0) {
		pr_err("node '%s': namespace is gone: %s", name, strerror(-err));
		goto out;
	}
	u.netns_fd = err;
	err = 0;
	if (u.n.cfg.flags & PI_NODE_HOST) {
		struct stat st;

		if (fstat(u.netns_fd, &st) || st.st_ino != u.n.cfg.netns_ino) {
			pr_err("node '%s' is the host namespace net:[%llu]; run podinject in that namespace",
			       name, (unsigned long long)u.n.cfg.netns_ino);
			err = -EXDEV;
			goto out;
		}
	}
	if (had == 1 && u.pr.phase < UP_SWITCHING) {
		/* Interrupted before anything live changed: start over. */
		err = roll_back(&u);
		if (err)
			goto out;
		close(u.progress_fd);
		u.progress_fd = -1;
		abi = u.pr.from_abi;
		had = 0;
		if (info)
			info->rolled_back = true;
		/* Whose upgrade it was says nothing of the version it came
		 * from: a newer build's, killed while it staged, leaves the
		 * node at that newer version, which this build must not
		 * "upgrade" down to its own. */
		err = version_refused(name, abi);
		if (err)
			goto out;
	}
	if (had == 1) {
		if (info) {
			info->resumed = true;
			info->from_abi = u.pr.from_abi;
			info->to_abi = u.pr.to_abi;
		}
		collect_all_map_ids(&u);
		err = forward(&u, false);
		goto out;
	}

	u.pr = (struct pi_upgrade_progress){ .from_abi = abi,
					     .to_abi = PI_ABI_VERSION,
					     .phase = UP_STAGING };
	if (info) {
		info->from_abi = abi;
		info->to_abi = PI_ABI_VERSION;
	}
	/* The record first, then the mark: a record without the mark is
	 * rolled back, never the mark without a record. */
	err = open_progress(&u, true);
	if (!err)
		err = set_live_abi(&u, PI_ABI_UPGRADING | abi);
	if (err) {
		pr_err("node '%s': cannot begin the upgrade: %s", name,
		       strerror(-err));
		finish(&u);
		goto out;
	}
	err = point(&u, PI_UPGRADE_AT_MARKED);
	if (!err)
		err = stage(&u);
	if (!err)
		err = point(&u, PI_UPGRADE_AT_STAGED);
	if (err) {
		if (!roll_back(&u))
			pr_err("node '%s': the upgrade failed and was rolled back; the node is as it was",
			       name);
		goto out;
	}
	collect_all_map_ids(&u);
	err = forward(&u, true);
out:
	if (u.progress_fd >= 0)
		close(u.progress_fd);
	if (u.netns_fd >= 0)
		close(u.netns_fd);
	node_close(&u.n);
	return err;
}
