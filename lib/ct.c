/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Connection tracking, userspace's half: listing and forgetting a pod's
 * flows, the idle timeouts. The table is the datapath's (bpf/lib/ct.h),
 * one LRU hash of the node; a pod's flows are the entries of its id.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <bpf/bpf.h>
#include "lib.h"
#include "podinject_util.h"

static const uint32_t ct_defaults[PI_DP_CT_TO_MAX] = PI_CT_TIMEOUT_DEFAULTS;

static uint32_t timeout_s(const struct pi_node *n, const struct pi_ct_key *k,
			  const struct pi_ct_entry *e)
{
	uint32_t kind;

	if (k->proto == IPPROTO_TCP)
		kind = e->state == PI_DP_CT_OPENING ? PI_DP_CT_TO_TCP_OPENING :
		       e->state == PI_DP_CT_CLOSING ? PI_DP_CT_TO_TCP_CLOSING :
						   PI_DP_CT_TO_TCP_ESTABLISHED;
	else if (k->proto == IPPROTO_ICMP || k->proto == IPPROTO_ICMPV6)
		kind = PI_DP_CT_TO_ICMP;
	else
		kind = PI_DP_CT_TO_UDP;
	return n->cfg.ct_timeout[kind] ? n->cfg.ct_timeout[kind] :
					 ct_defaults[kind];
}

/* A flow of the API, from the datapath's entry and its key. */
static void ct_info_from_dp(struct pi_ct_info *ci, const struct pi_ct_key *k,
			    const struct pi_ct_entry *e)
{
	ci->family = k->family;
	ci->proto = k->proto;
	ci->pod_port = k->pod_port;
	ci->peer_port = k->peer_port;
	ci->pod = addr_from_dp(&k->pod);
	ci->peer = addr_from_dp(&k->peer);
	ci->dir = e->dir;
	ci->state = e->state;
	ci->flags = e->flags;
	ci->rule_id = e->rule_id;
	ci->policy_rev = e->rev;
	for (int d = 0; d < 2; d++) {
		ci->packets[d] = e->packets[d];
		ci->bytes[d] = e->bytes[d];
	}
}

#define CT_ALL_PODS	UINT32_MAX

/* Calls fn on every live entry of pod `pod_id` (of every pod with
 * CT_ALL_PODS); frees expired ones. With
 * `forget`, deletes each one fn was called on. Deletions wait for the end
 * of the walk: a hash map's next key after a deleted one is its first. */
static int ct_walk(struct pi_node *n, uint32_t pod_id, bool forget,
		   int (*fn)(uint32_t pod_id, const struct pi_ct_info *ci,
			     void *ctx),
		   void *ctx)
{
	int fd = n->maps[M_CT], err = 0, ndel = 0, cap = 0;
	struct pi_ct_key k, next, *del = NULL;
	uint64_t now = (uint64_t)pi_mono_ns();
	bool first = true;

	while (!err && !bpf_map_get_next_key(fd, first ? NULL : &k, &next)) {
		struct pi_ct_info ci = { 0 };
		struct pi_ct_entry e;
		bool gone = forget;
		uint64_t to, idle;

		first = false;
		k = next;
		if (pod_id != CT_ALL_PODS && next.pod_id != pod_id)
			continue;
		if (bpf_map_lookup_elem(fd, &next, &e))
			continue;	/* gone meanwhile */
		idle = pi_ct_idle_ns(now, e.last_ns);
		to = (uint64_t)timeout_s(n, &next, &e) * 1000000000ull;
		if (idle > to) {
			gone = true;
		} else if (fn) {
			ct_info_from_dp(&ci, &next, &e);
			ci.idle_ms = idle / 1000000;
			ci.expires_ms = (to - idle) / 1000000;
			err = fn(next.pod_id, &ci, ctx);
		}
		if (!gone)
			continue;
		if (ndel == cap) {
			void *v = realloc(del, (cap ? cap * 2 : 64) * sizeof(*del));

			if (!v) {
				err = -ENOMEM;
				break;
			}
			del = v;
			cap = cap ? cap * 2 : 64;
		}
		del[ndel++] = next;
	}
	for (int i = 0; i < ndel; i++)
		bpf_map_delete_elem(fd, &del[i]);
	free(del);
	return err;
}

struct ct_list_ctx {
	struct pi_ct_info *v;
	int cnt, cap;
};

static int ct_collect(uint32_t pod_id, const struct pi_ct_info *ci, void *ctx)
{
	struct ct_list_ctx *l = ctx;

	if (l->cnt == l->cap) {
		int cap = l->cap ? l->cap * 2 : 64;
		void *v = realloc(l->v, cap * sizeof(*l->v));

		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->cnt++] = *ci;
	return 0;
}

int pi_ct_list(struct pi_node *n, const char *pod_name,
	       struct pi_ct_info **out)
{
	struct ct_list_ctx l = { 0 };
	struct pi_pod_info pod;
	int err;

	*out = NULL;
	err = pod_lookup(n, pod_name, &pod);
	if (err)
		return err;
	err = ct_walk(n, pod.id, false, ct_collect, &l);
	if (err) {
		free(l.v);
		return err;
	}
	*out = l.v;
	return l.cnt;
}

static int ct_tally(uint32_t pod_id, const struct pi_ct_info *ci, void *ctx)
{
	struct pi_ct_counts *c = ctx;

	c->entries++;
	if (ci->state <= PI_CT_CLOSING)
		c->by_state[ci->state]++;
	return 0;
}

int pi_ct_flush(struct pi_node *n, const char *pod_name)
{
	struct pi_ct_counts c = { 0 };
	struct pi_pod_info pod;
	int err;

	if (node_require_write(n, "ct flush"))
		return -EBADF;
	err = pod_lookup(n, pod_name, &pod);
	if (err)
		return err;
	err = ct_walk(n, pod.id, true, ct_tally, &c);
	return err ? err : (int)c.entries;
}

int pi_ct_counts(struct pi_node *n, const struct pi_pod_info *pod,
		 struct pi_ct_counts *out)
{
	memset(out, 0, sizeof(*out));
	return ct_walk(n, pod->id, false, ct_tally, out);
}

struct ct_all_ctx {
	struct pi_ct_counts *out;
	uint32_t nout;
};

static int ct_tally_by_pod(uint32_t pod_id, const struct pi_ct_info *ci,
			   void *ctx)
{
	struct ct_all_ctx *a = ctx;

	if (pod_id < a->nout)
		ct_tally(pod_id, ci, &a->out[pod_id]);
	return 0;
}

int pi_ct_counts_all(struct pi_node *n, struct pi_ct_counts *out,
		     uint32_t nout)
{
	struct ct_all_ctx a = { .out = out, .nout = nout };

	memset(out, 0, nout * sizeof(*out));
	return ct_walk(n, CT_ALL_PODS, false, ct_tally_by_pod, &a);
}

int pi_ct_timeouts(struct pi_node *n, uint32_t out[PI_CT_TO_MAX])
{
	for (int i = 0; i < PI_CT_TO_MAX; i++)
		out[i] = n->cfg.ct_timeout[i] ? n->cfg.ct_timeout[i] :
						ct_defaults[i];
	return 0;
}

int pi_ct_set_timeout(struct pi_node *n, uint32_t kind, uint32_t seconds)
{
	uint32_t old;
	int err;

	if (node_require_write(n, "ct timeout"))
		return -EBADF;
	if (kind >= PI_CT_TO_MAX) {
		pr_err("no such conntrack timeout %u", kind);
		return -EINVAL;
	}
	old = n->cfg.ct_timeout[kind];
	n->cfg.ct_timeout[kind] = seconds;
	err = node_save_config(n);
	if (err) {
		n->cfg.ct_timeout[kind] = old;
		pr_err("cannot set the conntrack timeout: %s", strerror(-err));
	}
	return err;
}

/* A pod's id is given to the next pod: its flows go with it. */
static void ct_forget_pod(struct pi_node *n, const struct pi_pod_info *pod)
{
	ct_walk(n, pod->id, true, NULL, NULL);
}

/* The sweep of a pod's removal can be overtaken by a packet of the pod
 * still in flight, which tracks a flow under the id again (an adopted
 * pod keeps its device, and its programs, until the sweep is done): the
 * next pod given the id must not find it open, allowed by a rule it never
 * had. */
static int ct_reset_pod(struct pi_node *n, const struct pi_pod_info *pod)
{
	int err = ct_walk(n, pod->id, true, NULL, NULL);

	if (err)
		pr_err("cannot clear the tracked flows of pod id %u for '%s': %s",
		       pod->id, pod->name, strerror(-err));
	return err;
}

const struct pi_feature ct_feature = {
	.name = "conntrack",
	.reset_pod = ct_reset_pod,
	.leave_pod = ct_forget_pod,
};
