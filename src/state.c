/* SPDX-License-Identifier: GPL-2.0 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "nl.h"
#include "state.h"
#include "util.h"

#define BPF_FS_MAGIC	0xcafe4a11

const char *node_name = "node";

const char *const node_map_names[M__COUNT] = {
	[M_PODS] = "pods",
	[M_ENDPOINTS] = "endpoints",
	[M_NODE_CONFIG] = "node_config",
	[M_POD_STATS] = "pod_stats",
	[M_RULES] = "rules",
	[M_POLICY_REFS] = "policy_refs",
	[M_RULE_STATS] = "rule_stats",
};

const char *const node_prog_names[P__COUNT] = {
	[P_POD_EGRESS] = "pod_egress",
	[P_POD_INGRESS] = "pod_ingress",
	[P_UPLINK_INGRESS] = "uplink_ingress",
	[P_POD_EGRESS_NETKIT] = "pod_egress_nk",
	[P_POD_INGRESS_NETKIT] = "pod_ingress_nk",
};

int ensure_bpffs(void)
{
	struct statfs st;

	if (!statfs("/sys/fs/bpf", &st) && st.f_type == BPF_FS_MAGIC)
		return 0;
	mkdir("/sys/fs/bpf", 0755);
	if (mount("bpf", "/sys/fs/bpf", "bpf", 0, "mode=0700"))
		return -errno;
	return 0;
}

void node_pin_path(const struct node *n, char *buf, size_t len,
		   const char *fmt, ...)
{
	char rest[PATH_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(rest, sizeof(rest), fmt, ap);
	va_end(ap);
	snprintf(buf, len, "%s/%s", n->pin_dir, rest);
}

static void node_reset(struct node *n)
{
	memset(n, 0, sizeof(*n));
	n->netns_fd = -1;
	for (int i = 0; i < M__COUNT; i++)
		n->maps[i] = -1;
	for (int i = 0; i < P__COUNT; i++)
		n->progs[i] = -1;
}

int node_open(struct node *n)
{
	char path[PATH_MAX];
	uint32_t zero = 0;
	int err;

	node_reset(n);
	snprintf(n->name, sizeof(n->name), "%s", node_name);
	snprintf(n->pin_dir, sizeof(n->pin_dir), "%s/%s", PI_PIN_ROOT,
		 node_name);
	err = ensure_bpffs();
	if (err) {
		p_err("cannot mount bpffs at /sys/fs/bpf: %s", strerror(-err));
		return err;
	}
	if (access(n->pin_dir, F_OK)) {
		p_err("node '%s' is not up (run: podinject -N %s node up)",
		      node_name, node_name);
		return -ENOENT;
	}
	for (int i = 0; i < M__COUNT; i++) {
		node_pin_path(n, path, sizeof(path), "%s", node_map_names[i]);
		n->maps[i] = bpf_obj_get(path);
		if (n->maps[i] < 0) {
			err = -errno;
			p_err("node '%s' is incomplete: %s: %s", node_name,
			      path, strerror(errno));
			goto fail;
		}
	}
	for (int i = 0; i < P__COUNT; i++) {
		node_pin_path(n, path, sizeof(path), "prog_%s",
			      node_prog_names[i]);
		n->progs[i] = bpf_obj_get(path);
		if (n->progs[i] < 0) {
			err = -errno;
			p_err("node '%s' is incomplete: %s: %s", node_name,
			      path, strerror(errno));
			goto fail;
		}
	}
	if (bpf_map_lookup_elem(n->maps[M_NODE_CONFIG], &zero, &n->cfg)) {
		err = -errno;
		p_err("cannot read node config: %s", strerror(errno));
		goto fail;
	}
	n->netns_fd = netns_open(node_name);
	if (n->netns_fd < 0) {
		err = n->netns_fd;
		p_err("node '%s': namespace is gone: %s", node_name,
		      strerror(-err));
		goto fail;
	}
	return 0;
fail:
	node_close(n);
	return err;
}

void node_close(struct node *n)
{
	for (int i = 0; i < M__COUNT; i++)
		if (n->maps[i] >= 0)
			close(n->maps[i]);
	for (int i = 0; i < P__COUNT; i++)
		if (n->progs[i] >= 0)
			close(n->progs[i]);
	if (n->netns_fd >= 0)
		close(n->netns_fd);
	node_reset(n);
}

int node_enter(const struct node *n, int *saved)
{
	return netns_enter(n->netns_fd, saved);
}

int node_save_config(struct node *n)
{
	uint32_t zero = 0;

	return bpf_map_update_elem(n->maps[M_NODE_CONFIG], &zero, &n->cfg, 0) ?
	       -errno : 0;
}

struct find_ctx {
	const char *name;
	struct pi_pod *out;
};

static int find_cb(const struct node *n, const struct pi_pod *pod, void *c)
{
	struct find_ctx *ctx = c;

	if (strcmp(pod->name, ctx->name))
		return 0;
	*ctx->out = *pod;
	return 1;
}

int pod_find(const struct node *n, const char *name, struct pi_pod *pod)
{
	struct find_ctx ctx = { .name = name, .out = pod };

	return pod_for_each(n, find_cb, &ctx) == 1 ? 0 : -ENOENT;
}

static int cmp_pod(const void *a, const void *b)
{
	const struct pi_pod *x = a, *y = b;

	return (int)x->id - (int)y->id;
}

int pod_for_each(const struct node *n,
		 int (*fn)(const struct node *n, const struct pi_pod *pod,
			   void *ctx), void *ctx)
{
	/* Per call, not static: fn may walk the pods again (pod removal
	 * re-syncs injection state of every pod). */
	struct pi_pod *all = calloc(PI_MAX_PODS, sizeof(*all));
	uint32_t key, next, *prev = NULL;
	int cnt = 0, ret = 0;

	if (!all)
		return -ENOMEM;
	while (cnt < PI_MAX_PODS &&
	       !bpf_map_get_next_key(n->maps[M_PODS], prev, &next)) {
		if (!bpf_map_lookup_elem(n->maps[M_PODS], &next, &all[cnt]))
			cnt++;
		key = next;
		prev = &key;
	}
	qsort(all, cnt, sizeof(all[0]), cmp_pod);
	for (int i = 0; i < cnt && !ret; i++)
		ret = fn(n, &all[i], ctx);
	free(all);
	return ret;
}

int pod_stats_sum(const struct node *n, uint32_t pod_id,
		  struct pi_pod_stats *out)
{
	int ncpu = libbpf_num_possible_cpus();
	struct pi_pod_stats *per;

	memset(out, 0, sizeof(*out));
	if (ncpu <= 0)
		return -EINVAL;
	per = calloc(ncpu, sizeof(*per));
	if (!per)
		return -ENOMEM;
	if (bpf_map_lookup_elem(n->maps[M_POD_STATS], &pod_id, per)) {
		free(per);
		return -errno;
	}
	for (int c = 0; c < ncpu; c++) {
		out->egress_packets += per[c].egress_packets;
		out->egress_bytes += per[c].egress_bytes;
		out->ingress_packets += per[c].ingress_packets;
		out->ingress_bytes += per[c].ingress_bytes;
		for (int r = 0; r < PI_DROP_MAX; r++)
			out->drops[r] += per[c].drops[r];
	}
	free(per);
	return 0;
}

void pod_name_by_ifindex(const struct node *n, uint32_t ifindex, char *buf,
			 size_t len)
{
	struct pi_pod pod;

	if (!bpf_map_lookup_elem(n->maps[M_PODS], &ifindex, &pod))
		snprintf(buf, len, "%s", pod.name);
	else
		snprintf(buf, len, "ifindex-%u", ifindex);
}
