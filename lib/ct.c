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
#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <bpf/bpf.h>
#include "lib.h"
#include "inject.h"
#include "nl.h"
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
	/* a cut entry keeps its revision one behind (PI_DP_CT_CUT) */
	ci->policy_rev = e->flags & PI_DP_CT_CUT ? e->rev + 1 : e->rev;
	for (int d = 0; d < 2; d++) {
		ci->packets[d] = e->packets[d];
		ci->bytes[d] = e->bytes[d];
	}
}

#define CT_ALL_PODS	UINT32_MAX

/* What a walk does with the live entries it meets. */
enum ct_walk_mode {
	CT_READ,		/* nothing: fn reads them */
	CT_FORGET,		/* deletes each */
	CT_FORGET_UNCUT,	/* deletes each but the cut ones, which it
				 * passes over (fn is not called on them):
				 * forgotten, a cut flow's next packet would
				 * open a flow of its own by the other
				 * direction's policy (bpf/lib/ct.h) */
};

struct ct_walk_ctx {
	const struct pi_node *n;
	uint32_t pod_id;
	enum ct_walk_mode mode;
	int (*fn)(uint32_t pod_id, const struct pi_ct_info *ci, void *ctx);
	void *ctx;
	uint64_t now;
	struct pi_ct_key *del;
	int ndel, cap;
};

/* Room for one more element in a growing array *arr of `cnt` used of
 * *cap, each `size` bytes. */
static int grow(void *arr, int *cap, int cnt, size_t size)
{
	void **a = arr, *v;
	int n;

	if (cnt < *cap)
		return 0;
	n = *cap ? *cap * 2 : 64;
	v = realloc(*a, n * size);
	if (!v)
		return -ENOMEM;
	*a = v;
	*cap = n;
	return 0;
}

/* One entry of a walk: fn on it if live; kept for deletion at the end
 * when expired, or when the walk forgets what it meets (enum
 * ct_walk_mode). */
static int ct_walk_one(const void *key, const void *val, void *c)
{
	struct ct_walk_ctx *w = c;
	const struct pi_ct_key *k = key;
	const struct pi_ct_entry *e = val;
	struct pi_ct_info ci = { 0 };
	uint64_t to, idle;
	int err = 0;

	if (w->pod_id != CT_ALL_PODS && k->pod_id != w->pod_id)
		return 0;
	idle = pi_ct_idle_ns(w->now, e->last_ns);
	to = (uint64_t)timeout_s(w->n, k, e) * 1000000000ull;
	if (idle <= to && w->mode == CT_FORGET_UNCUT &&
	    (e->flags & PI_DP_CT_CUT))
		return 0;
	if (idle <= to && w->fn) {
		ct_info_from_dp(&ci, k, e);
		ci.idle_ms = idle / 1000000;
		ci.expires_ms = (to - idle) / 1000000;
		err = w->fn(k->pod_id, &ci, w->ctx);
	}
	if (err || (idle <= to && w->mode == CT_READ))
		return err;
	err = grow(&w->del, &w->cap, w->ndel, sizeof(*w->del));
	if (!err)
		w->del[w->ndel++] = *k;
	return err;
}

/* Calls fn on every live entry of pod `pod_id` (of every pod with
 * CT_ALL_PODS) that `mode` does not pass over; frees expired ones, and
 * with CT_FORGET or CT_FORGET_UNCUT each one fn was called on. The table is read in batches, bucket by bucket
 * (map_scan): a walk key by key starts again from the first key when the
 * key it stands on is deleted (by the datapath, the LRU's eviction, or
 * another reader freeing expired entries), and then met every entry
 * twice (a pod's counts doubled, `ct list` showing flows twice).
 * Deletions wait for the end of the walk. */
static int ct_walk(const struct pi_node *n, uint32_t pod_id,
		   enum ct_walk_mode mode,
		   int (*fn)(uint32_t pod_id, const struct pi_ct_info *ci,
			     void *ctx),
		   void *ctx)
{
	struct ct_walk_ctx w = { .n = n, .pod_id = pod_id, .mode = mode,
				 .fn = fn, .ctx = ctx,
				 .now = (uint64_t)pi_mono_ns() };
	int err = map_scan(n->maps[M_CT], sizeof(struct pi_ct_key),
			   sizeof(struct pi_ct_entry), 256, ct_walk_one, &w);

	for (int i = 0; i < w.ndel; i++) {
		struct pi_ct_entry e;

		/* cut by the datapath since the walk read it: kept */
		if (mode == CT_FORGET_UNCUT &&
		    !bpf_map_lookup_elem(n->maps[M_CT], &w.del[i], &e) &&
		    (e.flags & PI_DP_CT_CUT))
			continue;
		bpf_map_delete_elem(n->maps[M_CT], &w.del[i]);
	}
	free(w.del);
	return err;
}

struct ct_list_ctx {
	struct pi_ct_info *v;
	int cnt, cap;
};

static int ct_collect(uint32_t pod_id, const struct pi_ct_info *ci, void *ctx)
{
	struct ct_list_ctx *l = ctx;

	int err = grow(&l->v, &l->cap, l->cnt, sizeof(*l->v));

	if (!err)
		l->v[l->cnt++] = *ci;
	return err;
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
	err = ct_walk(n, pod.id, CT_READ, ct_collect, &l);
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
	err = ct_walk(n, pod.id, CT_FORGET_UNCUT, ct_tally, &c);
	return err ? err : (int)c.entries;
}

int pi_ct_counts(struct pi_node *n, const struct pi_pod_info *pod,
		 struct pi_ct_counts *out)
{
	memset(out, 0, sizeof(*out));
	return ct_walk(n, pod->id, CT_READ, ct_tally, out);
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
	return ct_walk(n, CT_ALL_PODS, CT_READ, ct_tally_by_pod, &a);
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

/*
 * A pod with no rules is not tracked (bpf/lib/ct.h, ct_pod_tracked). When
 * it gets its first, the connections it has open must be known as flows,
 * or a reply would meet its new policy as a flow of its own: an ingress
 * deny would cut the answers to every connection the pod opened, and an
 * egress deny every answer it sends on a connection it accepted, until the
 * connection's other end happened to send first. So before the rule is
 * published, and once more after (for what opened meanwhile), the pod's
 * open connections are entered into the table:
 *  - its sockets, read through sock_diag in its namespace: TCP sockets on
 *    one of its addresses that are neither listening nor closed, opened
 *    from outside when a listener holds their local port and from the pod
 *    otherwise, and connected UDP sockets, opened from the pod;
 *  - the proxy's connections made as the pod (proxy_upstream): opened by
 *    the pod, or, for a protected pod's inbound flow, from outside.
 * Each is entered as the tracker would have made it, but at a revision
 * that is not the policy's, so its next packet has it decided by the
 * policy of the direction that opened it (which may deny it, as any edit
 * may). An entry the datapath made already is left as it is.
 */

int ct_seed_entry(int ct_fd, int refs_fd, const struct pi_ct_key *k,
		  uint32_t dir, uint8_t state)
{
	uint32_t key = k->pod_id * 2 + (dir & 1);
	struct pi_policy_ref ref = { 0 };
	struct pi_ct_entry e = { 0 };

	if (bpf_map_lookup_elem(refs_fd, &key, &ref))
		return -errno;
	e.last_ns = (uint64_t)pi_mono_ns();
	/* revisions only grow: this one no reference will carry again */
	e.rev = ref.rev - 1;
	e.dir = dir & 1;
	e.state = state;
	if (bpf_map_update_elem(ct_fd, k, &e, BPF_NOEXIST) && errno != EEXIST)
		return -errno;
	return 0;
}

#define SEED_LISTEN_MAX	1024

struct seed_ctx {
	int ct_fd, refs_fd;
	const struct pi_pod_info *pod;
	int proto;
	struct {
		int family;
		uint8_t addr[16];
		uint16_t port;
	} listen[SEED_LISTEN_MAX];
	int nlisten;
	int seeded;
};

static const uint8_t v4_mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

/* A socket's addresses as the pod's flow names them: an IPv4-mapped IPv6
 * socket speaks IPv4. */
static int sock_family(const struct nl_sock *sk, uint8_t local[16],
		       uint8_t remote[16])
{
	memset(local, 0, 16);
	memset(remote, 0, 16);
	if (sk->family == AF_INET6 && !memcmp(sk->local, v4_mapped, 12)) {
		memcpy(local, sk->local + 12, 4);
		memcpy(remote, sk->remote + 12, 4);
		return AF_INET;
	}
	memcpy(local, sk->local, sk->family == AF_INET ? 4 : 16);
	memcpy(remote, sk->remote, sk->family == AF_INET ? 4 : 16);
	return sk->family;
}

static bool is_pod_addr(const struct pi_pod_info *pod, int family,
			const uint8_t *a)
{
	if (family == AF_INET)
		return (pod->flags & PI_POD_HAS_V4) && !memcmp(a, &pod->ip4, 4);
	return (pod->flags & PI_POD_HAS_V6) && !memcmp(a, pod->ip6, 16);
}

static int seed_listener(const struct nl_sock *sk, void *ctx)
{
	struct seed_ctx *c = ctx;
	uint8_t local[16], remote[16];

	if (c->nlisten == SEED_LISTEN_MAX)
		return 0;	/* more: their connections count as the pod's */
	c->listen[c->nlisten].family = sock_family(sk, local, remote);
	memcpy(c->listen[c->nlisten].addr, local, 16);
	c->listen[c->nlisten].port = sk->local_port;
	c->nlisten++;
	return 0;
}

static bool accepted(const struct seed_ctx *c, int family,
		     const uint8_t *local, uint16_t port)
{
	static const uint8_t any[16];

	for (int i = 0; i < c->nlisten; i++) {
		if (c->listen[i].port != port)
			continue;
		/* a dual-stack listener (::) takes IPv4 too */
		if (!memcmp(c->listen[i].addr, any, 16) ||
		    (c->listen[i].family == family &&
		     !memcmp(c->listen[i].addr, local, 16)))
			return true;
	}
	return false;
}

static int seed_sock(const struct nl_sock *sk, void *ctx)
{
	struct seed_ctx *c = ctx;
	struct pi_ct_key k = { 0 };
	uint8_t local[16], remote[16];
	uint32_t dir = PI_DP_DIR_EGRESS;
	uint8_t state = PI_DP_CT_ESTABLISHED;
	int family = sock_family(sk, local, remote), err;

	if (!is_pod_addr(c->pod, family, local))
		return 0;
	if (c->proto == IPPROTO_TCP &&
	    (sk->state == TCP_SYN_RECV ||
	     accepted(c, family, local, sk->local_port)))
		dir = PI_DP_DIR_INGRESS;
	if (c->proto == IPPROTO_TCP &&
	    (sk->state == TCP_SYN_SENT || sk->state == TCP_SYN_RECV))
		state = PI_DP_CT_OPENING;
	k.pod_id = c->pod->id;
	k.family = family;
	k.proto = c->proto;
	memcpy(k.pod.a, local, 16);
	memcpy(k.peer.a, remote, 16);
	k.pod_port = sk->local_port;
	k.peer_port = sk->remote_port;
	err = ct_seed_entry(c->ct_fd, c->refs_fd, &k, dir, state);
	if (!err)
		c->seeded++;
	return err;
}

/* The states of a TCP connection that may still carry data either way. */
#define SEED_TCP_STATES	((1u << TCP_ESTABLISHED) | (1u << TCP_SYN_SENT) | \
			 (1u << TCP_SYN_RECV) | (1u << TCP_FIN_WAIT1) | \
			 (1u << TCP_FIN_WAIT2) | (1u << TCP_CLOSE_WAIT) | \
			 (1u << TCP_LAST_ACK) | (1u << TCP_CLOSING))

static int seed_sockets(struct seed_ctx *c)
{
	static const int families[] = { AF_INET, AF_INET6 };
	int saved, err;

	err = pod_netns_enter(c->pod, &saved);
	if (err)
		return err;
	c->proto = IPPROTO_TCP;
	for (int f = 0; f < 2 && !err; f++)
		err = nl_sock_dump(families[f], IPPROTO_TCP, 1u << TCP_LISTEN,
				   seed_listener, c);
	for (int f = 0; f < 2 && !err; f++)
		err = nl_sock_dump(families[f], IPPROTO_TCP, SEED_TCP_STATES,
				   seed_sock, c);
	c->proto = IPPROTO_UDP;
	for (int f = 0; f < 2 && !err; f++)
		err = nl_sock_dump(families[f], IPPROTO_UDP,
				   1u << TCP_ESTABLISHED, seed_sock, c);
	netns_restore(saved);
	return err;
}

/* The proxy's connections made as the pod. */
static int seed_upstream(const struct pi_node *n, struct seed_ctx *c)
{
	struct pi_flow_key fk, next, *prev = NULL;
	struct inject_state s;
	int err;

	err = inject_open(n, &s, false);
	if (err == -ENOENT)
		return 0;	/* no injection, no proxy on the node */
	if (err)
		return err;
	while (!err &&
	       !bpf_map_get_next_key(s.maps[IM_PROXY_UPSTREAM], prev, &next)) {
		struct pi_ct_key k = { 0 };
		struct pi_flow f;

		fk = next;
		prev = &fk;
		if (bpf_map_lookup_elem(s.maps[IM_PROXY_UPSTREAM], &next, &f) ||
		    f.pod_ifindex != c->pod->ifindex)
			continue;
		k.pod_id = c->pod->id;
		k.family = next.family;
		k.proto = next.proto;
		k.pod = next.pod;
		k.peer = next.dst;
		/* the flow tables keep the packet's byte order */
		k.pod_port = ntohs(next.pod_port);
		k.peer_port = ntohs(next.dst_port);
		err = ct_seed_entry(c->ct_fd, c->refs_fd, &k,
				    f.flags & PI_FLOW_INBOUND ?
				    PI_DP_DIR_INGRESS : PI_DP_DIR_EGRESS,
				    PI_DP_CT_ESTABLISHED);
		if (!err)
			c->seeded++;
	}
	inject_close(&s);
	return err;
}

static int find_id_cb(const struct pi_node *n, const struct pi_pod_info *pod,
		      void *ctx)
{
	struct pi_pod_info *out = ctx;

	if (pod->id != out->id)
		return 0;
	*out = *pod;
	return 1;
}

int ct_seed_pod(const struct pi_node *n, uint32_t pod_id)
{
	struct seed_ctx *c = calloc(1, sizeof(*c));
	struct pi_pod_info pod = { .id = pod_id };
	int err, err2, seeded;

	if (!c)
		return -ENOMEM;
	c->ct_fd = n->maps[M_CT];
	c->refs_fd = n->maps[M_POLICY_REFS];
	c->pod = &pod;
	/* a pod being added has no record yet, and no connections */
	if (pod_for_each(n, find_id_cb, &pod) != 1) {
		free(c);
		return 0;
	}
	/* each source on its own: a kernel without sock_diag still has
	 * the proxy's flows entered */
	err = seed_sockets(c);
	err2 = seed_upstream(n, c);
	err = err ? err : err2;
	seeded = c->seeded;
	free(c);
	if (err)
		pr_warn("pod '%s': its open connections are not all tracked (%s): an answer on one may meet its new policy as a flow of its own",
			pod.name, strerror(-err));
	return err ? err : seeded;
}

/* The pod has no rule left: it is not tracked, and its entries would only
 * age (and, were it tracked again, stand for connections long gone). */
void ct_forget_pod_id(const struct pi_node *n, uint32_t pod_id)
{
	ct_walk(n, pod_id, CT_FORGET, NULL, NULL);
}

/* A pod's id is given to the next pod: its flows go with it. */
static void ct_forget_pod(struct pi_node *n, const struct pi_pod_info *pod)
{
	ct_walk(n, pod->id, CT_FORGET, NULL, NULL);
}

/* The sweep of a pod's removal can be overtaken by a packet of the pod
 * still in flight, which tracks a flow under the id again (an adopted
 * pod keeps its device, and its programs, until the sweep is done): the
 * next pod given the id must not find it open, allowed by a rule it never
 * had. */
static int ct_reset_pod(struct pi_node *n, const struct pi_pod_info *pod)
{
	int err = ct_walk(n, pod->id, CT_FORGET, NULL, NULL);

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
