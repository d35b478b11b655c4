/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Policy: ordered allow/deny rules per pod and direction. The first
 * matching rule decides; no match allows.
 *
 * Every edit builds the pod's whole new rule list in a free range of the
 * node's `rules` array and then flips the pod's reference to it, so the
 * datapath never sees a half-edited policy. Edits hold the node's lock, so
 * two never pick the same range or rule id.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "lib.h"
#include "percpu.h"
#include "cls.h"

static int read_ref(const struct pi_node *n, uint32_t pod_id, uint32_t dir,
		    struct pi_policy_ref *ref)
{
	uint32_t key = pod_id * 2 + dir;

	memset(ref, 0, sizeof(*ref));
	return bpf_map_lookup_elem(n->maps[M_POLICY_REFS], &key, ref) ?
	       -errno : 0;
}

/* A rule of the API, as the `rules` map holds it, and back: the map's
 * layout is the datapath's, free to change without changing the API.
 * RULE_FIELDS lists what both name alike, once for both ways. */
#define RULE_FIELDS(src)						\
	.id = (src)->id, .action = (src)->action, .proto = (src)->proto, \
	.family = (src)->family, .prefixlen = (src)->prefixlen,		\
	.port_lo = (src)->port_lo, .port_hi = (src)->port_hi

static struct pi_dp_rule rule_to_dp(const struct pi_rule *r)
{
	return (struct pi_dp_rule){ RULE_FIELDS(r),
				    .addr = addr_to_dp(&r->addr) };
}

static struct pi_rule rule_from_dp(const struct pi_dp_rule *r)
{
	return (struct pi_rule){ RULE_FIELDS(r),
				 .addr = addr_from_dp(&r->addr) };
}

static int read_rules(const struct pi_node *n, const struct pi_policy_ref *ref,
		      struct pi_dp_rule *out)
{
	/* in batches: one syscall per rule made `policy add` of the
	 * 10 000th rule cost 10 000 */
	return cls_array_read(n->maps[M_RULES], ref->start, ref->count, out,
			  sizeof(*out));
}

/* Every pod's references, both directions. */
static int read_all_refs(const struct pi_node *n, struct pi_policy_ref *refs)
{
	return cls_array_read(n->maps[M_POLICY_REFS], 0, PI_DP_MAX_PODS * 2,
			      refs, sizeof(*refs));
}

/* First slot of a free run of `count` slots, or -ENOSPC. Live ranges,
 * including the one being replaced, are all avoided. */
static int find_free_range(const struct pi_node *n, uint32_t count,
			   uint32_t *start)
{
	struct pi_policy_ref *refs = calloc(PI_DP_MAX_PODS * 2, sizeof(*refs));
	uint8_t *used = calloc(PI_MAX_RULES, 1);
	uint32_t run = 0;
	int err;

	if (!used || !refs) {
		free(used);
		free(refs);
		return -ENOMEM;
	}
	err = read_all_refs(n, refs);
	for (uint32_t k = 0; !err && k < PI_DP_MAX_PODS * 2; k++)
		for (uint32_t i = 0; i < refs[k].count; i++)
			if (refs[k].start + i < PI_MAX_RULES)
				used[refs[k].start + i] = 1;
	free(refs);
	if (err) {
		free(used);
		return err;
	}
	for (uint32_t s = 0; s < PI_MAX_RULES; s++) {
		run = used[s] ? 0 : run + 1;
		if (run == count) {
			*start = s + 1 - count;
			free(used);
			return 0;
		}
	}
	free(used);
	return -ENOSPC;
}

static int alloc_rule_id(const struct pi_node *n, uint32_t *id)
{
	struct pi_policy_ref *refs = calloc(PI_DP_MAX_PODS * 2, sizeof(*refs));
	uint8_t *used = calloc(PI_MAX_RULE_IDS, 1);
	struct pi_dp_rule *list = calloc(PI_MAX_POD_RULES, sizeof(*list));
	int err;

	err = !refs || !used || !list ? -ENOMEM : read_all_refs(n, refs);
	for (uint32_t k = 0; !err && k < PI_DP_MAX_PODS * 2; k++) {
		if (!refs[k].count || refs[k].count > PI_MAX_POD_RULES)
			continue;
		err = read_rules(n, &refs[k], list);
		for (uint32_t i = 0; !err && i < refs[k].count; i++)
			if (list[i].id < PI_MAX_RULE_IDS)
				used[list[i].id] = 1;
	}
	free(refs);
	free(list);
	if (err) {
		free(used);
		return err;
	}
	/* Id 0 is never handed out, so an all-zero slot is no rule. */
	for (uint32_t i = 1; i < PI_MAX_RULE_IDS; i++) {
		if (used[i])
			continue;
		*id = i;
		free(used);
		return percpu_zero(n->maps[M_RULE_STATS], id,
				   sizeof(struct pi_rule_stats));
	}
	free(used);
	return -ENOSPC;
}

struct cls_maps policy_cls_maps(const struct pi_node *n)
{
	return (struct cls_maps){
		.rules = n->maps[M_RULES],
		.refs = n->maps[M_POLICY_REFS],
		.heads = n->maps[M_CLS_HEADS],
		.addrs = n->maps[M_CLS_ADDRS],
		.l4 = n->maps[M_CLS_L4],
		.ports = n->maps[M_CLS_PORTS],
		.classes = n->maps[M_CLS_CLASSES],
		.chunks = n->maps[M_CLS_CHUNKS],
	};
}

/* How many rules the pod has in `dir` (0 when unreadable). */
static uint32_t rules_in(const struct pi_node *n, uint32_t pod_id, uint32_t dir)
{
	struct pi_policy_ref ref;

	return read_ref(n, pod_id, dir, &ref) ? 0 : ref.count;
}

/* Publishes `rules` as the pod's policy in `dir`: into a free range of
 * `rules`, compiled into the classifier's pools (lib/cls.c). */
static int publish_policy(const struct pi_node *n, uint32_t pod_id,
			  uint32_t dir, const struct pi_dp_rule *rules,
			  uint32_t count)
{
	struct cls_maps m = policy_cls_maps(n);
	const char *why = NULL;
	uint32_t start = 0;
	int err = 0;

	if (count)
		err = find_free_range(n, count, &start);
	if (!err)
		err = cls_publish(&m, pod_id, dir, rules, count, start, &why);
	if (err && why)
		pr_err("%s; the policy is unchanged", why);
	return err;
}

bool policy_pod_has_rules(const struct pi_node *n, uint32_t pod_id)
{
	return rules_in(n, pod_id, PI_DP_DIR_EGRESS) ||
	       rules_in(n, pod_id, PI_DP_DIR_INGRESS);
}

/* An edit of a pod's policy. A pod's first rule has its open connections
 * entered into the tracker first, and again after (lib/ct.c,
 * ct_seed_pod); its last one has them forgotten. On a pod another plugin
 * routes, the first rule brings podinject's programs and the last one
 * takes them away (pod_policy_programs): they run only while they have
 * something to decide, and never without the rules in place before
 * them. */
static int write_policy(const struct pi_node *n, const struct pi_pod_info *pod,
			uint32_t dir, const struct pi_dp_rule *rules,
			uint32_t count)
{
	uint32_t pod_id = pod->id, other = rules_in(n, pod_id, !dir);
	/* the datapath tracks a pod with a rule either way (bpf/lib/ct.h) */
	bool was = other || rules_in(n, pod_id, dir);
	bool will = other || count;
	int err;

	if (!was && will) {
		err = pod_policy_programs(n, pod, true);
		if (err)
			return err;
		ct_seed_pod(n, pod_id);
	}
	err = publish_policy(n, pod_id, dir, rules, count);
	if (err) {
		if (!was && will)
			pod_policy_programs(n, pod, false);
		return err;
	}
	if (!was && will)
		ct_seed_pod(n, pod_id);
	if (was && !will) {
		ct_forget_pod_id(n, pod_id);
		pod_policy_programs(n, pod, false);
	}
	return 0;
}

/* The bulk path (lib/apply.c): a pod direction's whole rule list, ids
 * given by the caller, compiled once and switched with one flip. */
int policy_replace(struct pi_node *n, const struct pi_pod_info *pod,
		   uint32_t dir, const struct pi_rule *rules, uint32_t count)
{
	struct pi_dp_rule *dp = calloc(count + 1, sizeof(*dp));
	int err;

	if (!dp)
		return -ENOMEM;
	for (uint32_t i = 0; i < count; i++)
		dp[i] = rule_to_dp(&rules[i]);
	err = write_policy(n, pod, dir, dp, count);
	free(dp);
	return err;
}

int policy_read_all(const struct pi_node *n, struct pi_policy_ref *refs)
{
	return read_all_refs(n, refs);
}

int policy_read_rules(const struct pi_node *n, const struct pi_policy_ref *ref,
		      struct pi_rule *out)
{
	struct pi_dp_rule *dp = calloc(ref->count + 1, sizeof(*dp));
	int err;

	if (!dp)
		return -ENOMEM;
	err = read_rules(n, ref, dp);
	for (uint32_t i = 0; !err && i < ref->count; i++)
		out[i] = rule_from_dp(&dp[i]);
	free(dp);
	return err;
}

/* New ids start from zero, as alloc_rule_id() starts them: an id a rule
 * deleted long ago had keeps its counters until it is handed out again. */
int policy_zero_counters(const struct pi_node *n, const uint32_t *ids,
			 uint32_t count)
{
	for (uint32_t i = 0; i < count; i++) {
		int err = percpu_zero(n->maps[M_RULE_STATS], &ids[i],
				      sizeof(struct pi_rule_stats));

		if (err)
			return err;
	}
	return 0;
}

/* Drops a pod id's policy in both directions. Its flows go with the pod
 * (the conntrack feature's leave_pod and reset_pod): no walk of the table
 * here. */
static int policy_clear_pod(struct pi_node *n, uint32_t pod_id)
{
	int err = publish_policy(n, pod_id, PI_DP_DIR_EGRESS, NULL, 0);

	if (!err)
		err = publish_policy(n, pod_id, PI_DP_DIR_INGRESS, NULL, 0);
	return err;
}

static const char *dir_name(uint32_t dir)
{
	return dir == PI_DIR_EGRESS ? "egress" : "ingress";
}

/* The pod's current rules in `dir`, in a list with room for all a node
 * can hold. */
static int load_policy(struct pi_node *n, const char *pod_name, uint32_t dir,
		       struct pi_pod_info *pod, struct pi_policy_ref *ref,
		       struct pi_dp_rule **list)
{
	int err = pod_lookup(n, pod_name, pod);

	*list = NULL;
	if (err)
		return err;
	*list = calloc(PI_MAX_RULES, sizeof(**list));
	if (!*list)
		return -ENOMEM;
	err = read_ref(n, pod->id, dir, ref);
	if (!err)
		err = read_rules(n, ref, *list);
	return err;
}

int pi_policy_add(struct pi_node *n, const char *pod_name, uint32_t dir,
		  const struct pi_rule *rule, uint32_t pos, uint32_t *id)
{
	struct pi_dp_rule *list = NULL;
	struct pi_rule r = *rule;
	struct pi_policy_ref ref;
	struct pi_pod_info pod;
	int err;

	if (node_require_write(n, "policy add"))
		return -EBADF;
	if (dir > PI_DIR_INGRESS || (r.action != PI_ALLOW && r.action != PI_DENY)) {
		pr_err("a rule needs a direction and allow or deny");
		return -EINVAL;
	}
	/* What `export` can write and `apply` takes back: a rule the
	 * document cannot say would make a node's export unusable. */
	if (r.proto && r.proto != IPPROTO_TCP && r.proto != IPPROTO_UDP &&
	    r.proto != IPPROTO_ICMP) {
		pr_err("a rule's proto is any (0), tcp, udp or icmp, not %u",
		       r.proto);
		return -EINVAL;
	}
	if ((r.family != 0 && r.family != AF_INET && r.family != AF_INET6) ||
	    (!r.family && r.prefixlen) ||
	    r.prefixlen > (r.family == AF_INET ? 32 : 128) ||
	    !pi_prefix_clean(&r.addr, r.prefixlen)) {
		pr_err("a rule's address is any, or an IPv4 or IPv6 prefix of at most 32 or 128 bits without host bits");
		return -EINVAL;
	}
	/* a port_lo alone would be stored as "any port" (0..0): a deny of
	 * one port denying them all */
	if ((r.port_lo || r.port_hi) &&
	    (r.port_lo > r.port_hi || !r.port_lo ||
	     (r.proto != IPPROTO_TCP && r.proto != IPPROTO_UDP))) {
		pr_err("'port' needs proto tcp or udp and a range within 1-65535");
		return -EINVAL;
	}
	err = load_policy(n, pod_name, dir, &pod, &ref, &list);
	if (err == -EINVAL || err == -ESRCH)
		return err;
	if (!err && ref.count >= PI_MAX_POD_RULES)
		err = -ENOSPC;
	if (!err)
		err = alloc_rule_id(n, &r.id);
	if (!err) {
		uint32_t at = pos && pos - 1 < ref.count ? pos - 1 : ref.count;

		memmove(&list[at + 1], &list[at],
			(ref.count - at) * sizeof(list[0]));
		list[at] = rule_to_dp(&r);
		err = write_policy(n, &pod, dir, list, ref.count + 1);
	}
	free(list);
	if (err) {
		pr_err("cannot add rule to pod '%s': %s", pod_name,
		       strerror(-err));
		return err;
	}
	if (id)
		*id = r.id;
	return 0;
}

int pi_policy_del(struct pi_node *n, const char *pod_name, uint32_t dir,
		  uint32_t id)
{
	struct pi_policy_ref ref;
	struct pi_pod_info pod;
	struct pi_dp_rule *list;
	uint32_t kept = 0;
	int err;

	if (node_require_write(n, "policy del"))
		return -EBADF;
	if (dir > PI_DIR_INGRESS)
		return -EINVAL;
	err = load_policy(n, pod_name, dir, &pod, &ref, &list);
	if (err == -EINVAL || err == -ESRCH)
		return err;
	if (!err && id) {
		for (uint32_t i = 0; i < ref.count; i++)
			if (list[i].id != id)
				list[kept++] = list[i];
		if (kept == ref.count) {
			pr_err("pod '%s' has no %s rule %u", pod_name,
			       dir_name(dir), id);
			free(list);
			return -ESRCH;
		}
	}
	if (!err)
		err = write_policy(n, &pod, dir, list, kept);
	free(list);
	if (err)
		pr_err("cannot change the policy of pod '%s': %s", pod_name,
		       strerror(-err));
	return err;
}

static int rule_counters(const struct pi_node *n, uint32_t id,
			 uint64_t *packets, uint64_t *bytes)
{
	struct pi_rule_stats sum;
	int err = percpu_sum(n->maps[M_RULE_STATS], &id, &sum, sizeof(sum));

	*packets = sum.packets;
	*bytes = sum.bytes;
	return err;
}

/* The rules of pod `pod_id`, both directions; the list buffer is sized by
 * the pod's own rules: a scrape of every pod calls this once each. */
static int policy_list_id(struct pi_node *n, uint32_t pod_id,
			  struct pi_rule_info **out)
{
	struct pi_rule_info *all = NULL;
	struct pi_policy_ref ref[2];
	struct pi_dp_rule *list;
	uint32_t most;
	int cnt = 0, err = 0;

	*out = NULL;
	/* A part that cannot be read fails the whole: a list short of a
	 * rule would tell the one explaining a drop that no rule made it,
	 * and a scrape would drop the rule's series without a word. */
	for (uint32_t dir = 0; dir < 2 && !err; dir++)
		err = read_ref(n, pod_id, dir, &ref[dir]);
	if (err) {
		pr_err("pod id %u: cannot read its policy references: %s",
		       pod_id, strerror(-err));
		return err;
	}
	most = ref[0].count > ref[1].count ? ref[0].count : ref[1].count;
	list = calloc(most + 1, sizeof(*list));
	all = calloc(ref[0].count + ref[1].count + 1, sizeof(*all));
	if (!list || !all) {
		free(list);
		free(all);
		return -ENOMEM;
	}
	for (uint32_t dir = 0; dir < 2 && !err; dir++) {
		if (!ref[dir].count)
			continue;
		err = read_rules(n, &ref[dir], list);
		if (err)
			pr_err("pod id %u: cannot read its %s rules (slots %u..%u): %s",
			       pod_id, dir_name(dir), ref[dir].start,
			       ref[dir].start + ref[dir].count - 1,
			       strerror(-err));
		for (uint32_t i = 0; i < ref[dir].count && !err; i++) {
			struct pi_rule_info *ri = &all[cnt++];

			ri->dir = dir;
			ri->position = i + 1;
			ri->rule = rule_from_dp(&list[i]);
			err = rule_counters(n, list[i].id, &ri->packets,
					    &ri->bytes);
			if (err)
				pr_err("pod id %u: cannot read the counters of rule %u: %s",
				       pod_id, list[i].id, strerror(-err));
		}
	}
	free(list);
	/* no rules: nothing for the caller to free, as the header says */
	if (err || !cnt) {
		free(all);
		return err;
	}
	*out = all;
	return cnt;
}

int pi_policy_list(struct pi_node *n, const char *pod_name,
		   struct pi_rule_info **out)
{
	struct pi_pod_info pod;
	int err;

	*out = NULL;
	err = pod_lookup(n, pod_name, &pod);
	if (err)
		return err;
	return policy_list_id(n, pod.id, out);
}

int pi_policy_list_pod(struct pi_node *n, const struct pi_pod_info *pod,
		       struct pi_rule_info **out)
{
	return policy_list_id(n, pod->id, out);
}

/* The id may be a deleted pod's: its rules must not become this pod's. */
static int policy_reset_pod(struct pi_node *n, const struct pi_pod_info *pod)
{
	int err = policy_clear_pod(n, pod->id);

	if (err)
		pr_err("cannot clear the policy of pod id %u for '%s': %s",
		       pod->id, pod->name, strerror(-err));
	return err;
}

static void policy_forget_pod(struct pi_node *n, const struct pi_pod_info *pod)
{
	int err = policy_clear_pod(n, pod->id);

	/* Said, not returned: a feature's teardown has no result (struct
	 * pi_feature). The next pod given this id clears them before it is
	 * recorded, or is refused (policy_reset_pod). */
	if (err)
		pr_err("pod '%s': cannot remove its rules: %s", pod->name,
		       strerror(-err));
}

const struct pi_feature policy_feature = {
	.name = "policy",
	.reset_pod = policy_reset_pod,
	.leave_pod = policy_forget_pod,
};
