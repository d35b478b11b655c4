/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Desired state: a node's policies, injection grants, proxy rules and
 * tracker timeouts declared in one document and applied as a whole
 * (pi_apply), and the node's state written as such a document (pi_export).
 *
 * An apply reads the document and the node, checks every line of the
 * document before it changes anything, and then makes the difference in
 * an order that never leaves a proxy without its grant:
 * (A pod has two proxy slots: [0] its outbound rule, the document's
 * "proxy"; [1] its inbound rule, "proxy_inbound".)
 *   1. proxy rules that go or change are removed
 *   2. grants that go are removed
 *   3. each changed pod direction gets its whole new rule list, compiled
 *      once and switched with one reference flip (policy_replace)
 *   4. grants that come (or change path) are made
 *   5. proxy rules that come are made
 *   6. the tracker's timeouts are saved
 * Each step made is logged with what undoes it; a step that fails undoes
 * the steps before it, newest first, so the node is left as it was (bar
 * the flows a removed proxy rule was carrying, which the datapath forgets
 * with the rule).
 *
 * Rules that stay keep their ids, so their counters go on; a direction
 * whose list is unchanged is not published at all.
 *
 * The document applied last, applied again to a node that has not changed
 * since, is found out without parsing it (the last apply's record, below).
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <jansson.h>
#include <yaml.h>
#include "inject.h"
#include "lib.h"
#include "version.h"

static const char *const timeout_names[PI_CT_TO_MAX] = PI_CT_TIMEOUT_NAMES;
static const uint32_t timeout_defaults[PI_CT_TO_MAX] = PI_CT_TIMEOUT_DEFAULTS;
static const char *const dir_names[2] = { "egress", "ingress" };

#define TIMEOUT_MAX	(7 * 86400)	/* as `ct timeout` takes them */

/* A pod of the node, as it is and as the document wants it. */
struct apod {
	struct pi_pod_info info;
	struct pi_policy_ref ref[2];	/* the reference its rules are read by */
	struct pi_rule *cur[2];		/* NULL when read without rules */
	uint32_t ncur[2];
	struct pi_rule *want[2];	/* ids assigned by plan_policy() */
	uint32_t nwant[2];
	uint32_t kept[2];
	bool changed[2];
	/* [0] outbound (proxy add), [1] inbound (proxy add --inbound) */
	int proxy_cur[2], proxy_want[2];	/* the proxy pod's index, -1: none */
	struct pi_proxy_rule prule_cur[2], prule_want[2];
	bool proxy_del[2], proxy_add[2];
};

/* An authorisation of injector to inject as target (pod indices). */
struct grant {
	int injector, target;
	uint32_t path;		/* as stored; 0 in a wish: whatever a proxy made */
	bool from_proxy;	/* wanted because target is proxied by injector */
};

enum undo_kind { U_POLICY, U_GRANT_ADDED, U_GRANT_CHANGED, U_GRANT_REMOVED,
		 U_PROXY_ADDED, U_PROXY_REMOVED, U_TIMEOUTS };

struct undo {
	enum undo_kind kind;
	int pod, other;
	uint32_t dir, path;
};

struct apply {
	struct pi_node *n;
	struct apod *pods;
	int npods;
	int *by_name;		/* pod indices in name order */
	struct grant *gcur, *gwant;
	int ngcur, ngwant;
	uint32_t to_want[PI_CT_TO_MAX];	/* raw, 0 = default */
	struct pi_apply_error *err;
	int auto_path;		/* inject_path_auto(), probed once */
	struct undo *undo;
	int nundo;
	bool skip_absent;	/* PI_APPLY_SKIP_ABSENT */
};

/* ---- errors --------------------------------------------------------- */

static int refuse(struct apply *a, int code, const char *where,
		  const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int refuse(struct apply *a, int code, const char *where,
		  const char *fmt, ...)
{
	char reason[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	if (a->err) {
		snprintf(a->err->where, sizeof(a->err->where), "%s", where);
		snprintf(a->err->reason, sizeof(a->err->reason), "%s", reason);
	}
	pr_err("%s: %s", where, reason);
	return code;
}

/* ---- pods by name and device ----------------------------------------- */

/* qsort_r: the library keeps no global state, not even for a sort */
static int name_cmp(const void *x, const void *y, void *ctx)
{
	const struct apply *a = ctx;

	return strcmp(a->pods[*(const int *)x].info.name,
		      a->pods[*(const int *)y].info.name);
}

static int pod_index(const struct apply *a, const char *name)
{
	int lo = 0, hi = a->npods;

	while (lo < hi) {
		int mid = (lo + hi) / 2;
		int c = strcmp(a->pods[a->by_name[mid]].info.name, name);

		if (!c)
			return a->by_name[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

static int pod_index_by_ifindex(const struct apply *a, uint32_t ifindex)
{
	for (int i = 0; i < a->npods; i++)
		if (a->pods[i].info.ifindex == ifindex)
			return i;
	return -1;
}

/* ---- the node as it is ----------------------------------------------- */

static bool grant_pair_known(const struct grant *g, int n, int injector,
			     int target)
{
	for (int i = 0; i < n; i++)
		if (g[i].injector == injector && g[i].target == target)
			return true;
	return false;
}

/* The node as it is: its pods, their rules (unless !rules: only the
 * references to them, for the last apply's record), grants, proxy
 * rules. */
static int read_node(struct apply *a, bool rules)
{
	struct pi_policy_ref *refs = calloc(PI_DP_MAX_PODS * 2, sizeof(*refs));
	struct pi_pod_info *infos = NULL;
	struct inject_state s;
	int cnt, err = 0;

	if (!refs)
		return -ENOMEM;
	cnt = pi_pod_list(a->n, &infos);
	if (cnt < 0) {
		free(refs);
		return cnt;
	}
	a->npods = cnt;
	a->pods = calloc(cnt + 1, sizeof(*a->pods));
	a->by_name = calloc(cnt + 1, sizeof(*a->by_name));
	if (!a->pods || !a->by_name)
		err = -ENOMEM;
	if (!err)
		err = policy_read_all(a->n, refs);
	for (int i = 0; !err && i < cnt; i++) {
		struct apod *p = &a->pods[i];

		p->info = infos[i];
		p->proxy_cur[0] = p->proxy_want[0] = -1;
		p->proxy_cur[1] = p->proxy_want[1] = -1;
		a->by_name[i] = i;
		for (uint32_t d = 0; !err && d < 2; d++) {
			const struct pi_policy_ref *r = &refs[p->info.id * 2 + d];

			p->ref[d] = *r;
			p->ncur[d] = r->count;
			if (!rules)
				continue;
			p->cur[d] = calloc(r->count + 1, sizeof(struct pi_rule));
			if (!p->cur[d])
				err = -ENOMEM;
			else if (r->count &&
				 (err = policy_read_rules(a->n, r, p->cur[d])))
				pr_err("pod '%s': cannot read its %s rules: %s",
				       p->info.name, dir_names[d], strerror(-err));
		}
	}
	free(infos);
	free(refs);
	if (err)
		return err;
	qsort_r(a->by_name, a->npods, sizeof(*a->by_name), name_cmp, a);

	a->gcur = calloc(PI_MAX_INJECT + 1, sizeof(*a->gcur));
	if (!a->gcur)
		return -ENOMEM;
	if (inject_open(a->n, &s, false))
		return 0;	/* nothing injects on this node yet */
	{
		struct pi_inject_key key, next, *prev = NULL;
		struct pi_inject_target t;

		while (a->ngcur < PI_MAX_INJECT &&
		       !bpf_map_get_next_key(s.maps[IM_AUTH], prev, &next)) {
			int inj, tgt;

			key = next;
			prev = &key;
			if (bpf_map_lookup_elem(s.maps[IM_AUTH], &key, &t))
				continue;
			inj = pod_index_by_ifindex(a, key.injector_ifindex);
			tgt = pod_index_by_ifindex(a, t.target_ifindex);
			/* a probe's own device is no pod: its grants live
			 * for one probe and are none of the state */
			if (inj < 0 || tgt < 0 ||
			    grant_pair_known(a->gcur, a->ngcur, inj, tgt))
				continue;
			a->gcur[a->ngcur++] = (struct grant){ inj, tgt, t.path,
							      false };
		}
	}
	for (int k = 0; k < 2; k++) {
		int map = s.maps[k ? IM_PROXY_INBOUND_RULES : IM_PROXY_RULES];
		uint32_t key, next, *prev = NULL;
		struct pi_dp_proxy_rule r;

		while (!bpf_map_get_next_key(map, prev, &next)) {
			int pod, proxy;

			key = next;
			prev = &key;
			if (bpf_map_lookup_elem(map, &key, &r))
				continue;
			pod = pod_index_by_ifindex(a, key);
			proxy = pod_index_by_ifindex(a, r.proxy_ifindex);
			if (pod < 0 || proxy < 0)
				continue;
			a->pods[pod].proxy_cur[k] = proxy;
			proxy_rule_from_dp(&a->pods[pod].prule_cur[k], &r);
			if (k)
				a->pods[pod].prule_cur[k].flags = PI_PROXY_INBOUND;
		}
	}
	inject_close(&s);
	return 0;
}

/* ---- the document ---------------------------------------------------- */

static bool only_keys(struct apply *a, json_t *obj, const char *where,
		      const char *const *keys, int *ret)
{
	const char *k;
	json_t *v;

	json_object_foreach(obj, k, v) {
		int i;

		for (i = 0; keys[i]; i++)
			if (!strcmp(keys[i], k))
				break;
		if (!keys[i]) {
			*ret = refuse(a, -EINVAL, where, "unknown field '%s'", k);
			return false;
		}
	}
	return true;
}

static int parse_port_value(json_t *v, uint16_t *lo, uint16_t *hi)
{
	if (json_is_integer(v)) {
		json_int_t p = json_integer_value(v);

		if (p < 1 || p > 65535)
			return -EINVAL;
		*lo = *hi = p;
		return 0;
	}
	if (json_is_string(v))
		return pi_parse_port_range(json_string_value(v), lo, hi);
	return -EINVAL;
}

/* Where a rule is, formatted only when it is refused: 10 000 rules would
 * otherwise format 10 000 paths nobody reads. */
struct rule_at {
	const char *pod_where;
	uint32_t dir;
	size_t idx;
};

static int rule_refuse(struct apply *a, int code, const struct rule_at *at,
		       const char *field, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

static int rule_refuse(struct apply *a, int code, const struct rule_at *at,
		       const char *field, const char *fmt, ...)
{
	char where[700], reason[256];
	va_list ap;

	snprintf(where, sizeof(where), "%s.%s[%zu]%s%s", at->pod_where,
		 dir_names[at->dir], at->idx, field ? "." : "",
		 field ? field : "");
	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	return refuse(a, code, where, "%s", reason);
}

static int parse_rule(struct apply *a, json_t *o, const struct rule_at *at,
		      struct pi_rule *r)
{
	const char *addr_key = at->dir == PI_DIR_EGRESS ? "to" : "from";
	const char *wrong_key = at->dir == PI_DIR_EGRESS ? "from" : "to";
	const char *k;
	json_t *v;

	memset(r, 0, sizeof(*r));
	if (!json_is_object(o))
		return rule_refuse(a, -EINVAL, at, NULL,
				   "a rule is an object: {\"action\": \"allow\"|\"deny\", ...}");
	json_object_foreach(o, k, v) {
		if (!strcmp(k, "action")) {
			const char *s = json_is_string(v) ? json_string_value(v) : "";

			if (!strcmp(s, "allow"))
				r->action = PI_ALLOW;
			else if (!strcmp(s, "deny"))
				r->action = PI_DENY;
			else
				return rule_refuse(a, -EINVAL, at, k,
						   "want allow or deny");
		} else if (!strcmp(k, addr_key)) {
			int family, plen;

			if (!json_is_string(v) ||
			    pi_parse_prefix(json_string_value(v), &family,
					    &r->addr, &plen))
				return rule_refuse(a, -EINVAL, at, k,
					"invalid CIDR %s%s%s",
					json_is_string(v) ? "'" : "",
					json_is_string(v) ? json_string_value(v) :
							    "(not a string)",
					json_is_string(v) ? "'" : "");
			r->family = family;
			r->prefixlen = plen;
		} else if (!strcmp(k, wrong_key)) {
			return rule_refuse(a, -EINVAL, at, k,
					   "%s rules match '%s', not '%s'",
					   dir_names[at->dir], addr_key, wrong_key);
		} else if (!strcmp(k, "proto")) {
			if (!json_is_string(v) ||
			    pi_parse_proto(json_string_value(v), &r->proto))
				return rule_refuse(a, -EINVAL, at, k,
						   "want tcp, udp, icmp or any");
		} else if (!strcmp(k, "port")) {
			if (parse_port_value(v, &r->port_lo, &r->port_hi))
				return rule_refuse(a, -EINVAL, at, k,
						   "want N or \"N-M\" within 1-65535");
		} else {
			return rule_refuse(a, -EINVAL, at, NULL,
					   "unknown field '%s'", k);
		}
	}
	if (!r->action)
		return rule_refuse(a, -EINVAL, at, NULL,
				   "'action' is missing (allow or deny)");
	if (r->port_hi && r->proto != IPPROTO_TCP && r->proto != IPPROTO_UDP)
		return rule_refuse(a, -EINVAL, at, "port",
				   "'port' needs proto tcp or udp");
	return 0;
}

static int parse_rules(struct apply *a, struct apod *p, json_t *arr,
		       uint32_t dir, const char *pod_where)
{
	struct rule_at at = { pod_where, dir, 0 };
	char where[600];
	json_t *v;

	snprintf(where, sizeof(where), "%s.%s", pod_where, dir_names[dir]);
	if (!json_is_array(arr))
		return refuse(a, -EINVAL, where, "a list of rules");
	if (json_array_size(arr) > PI_MAX_POD_RULES)
		return refuse(a, -EINVAL, where,
			      "%zu rules: a pod holds at most %u in a direction",
			      json_array_size(arr), PI_MAX_POD_RULES);
	p->want[dir] = calloc(json_array_size(arr) + 1, sizeof(struct pi_rule));
	if (!p->want[dir])
		return -ENOMEM;
	json_array_foreach(arr, at.idx, v) {
		int err = parse_rule(a, v, &at, &p->want[dir][at.idx]);

		if (err)
			return err;
	}
	p->nwant[dir] = json_array_size(arr);
	return 0;
}

static int parse_path(json_t *v, uint32_t *path)
{
	const char *s = json_is_string(v) ? json_string_value(v) : "";

	if (!strcmp(s, "auto"))
		*path = 0;
	else if (!strcmp(s, "fast"))
		*path = PI_PATH_FAST;
	else if (!strcmp(s, "fallback"))
		*path = PI_PATH_FALLBACK;
	else
		return -EINVAL;
	return 0;
}

/* A grant's path as the node stores it: auto is what the kernel offers,
 * and the fallback onto a netkit pod is the netkit fallback. */
static uint32_t stored_path(struct apply *a, uint32_t path, int target)
{
	if (!path) {
		if (!a->auto_path)
			a->auto_path = inject_path_auto();
		path = a->auto_path;
	}
	if (path == PI_PATH_FALLBACK &&
	    (a->pods[target].info.flags & PI_POD_NETKIT))
		path = PI_PATH_NETKIT_FALLBACK;
	return path;
}

/* The checks that need no pod (one's own name, a name twice, a list's
 * length) go by the names written, so that with skip_absent a document is
 * refused on every node or on none, whichever pods a node has. */
static int parse_grants(struct apply *a, int inj, const char *name,
			json_t *arr, const char *pod_where)
{
	static const char *const keys[] = { "as", "path", NULL };
	char where[600];
	size_t i;
	json_t *v;

	snprintf(where, sizeof(where), "%s.inject", pod_where);
	if (!json_is_array(arr))
		return refuse(a, -EINVAL, where,
			      "a list of {\"as\": POD, \"path\": fast|fallback|auto}");
	if (json_array_size(arr) > PI_MAX_INJECT)
		return refuse(a, -EINVAL, where, "more than %d grants",
			      PI_MAX_INJECT);
	json_array_foreach(arr, i, v) {
		char at[600], fat[640];
		json_t *as, *path;
		uint32_t pv = 0;
		int tgt, ret = 0;

		snprintf(at, sizeof(at), "%s[%zu]", where, i);
		if (!json_is_object(v))
			return refuse(a, -EINVAL, at,
				      "a grant is an object: {\"as\": POD}");
		if (!only_keys(a, v, at, keys, &ret))
			return ret;
		as = json_object_get(v, "as");
		snprintf(fat, sizeof(fat), "%s.as", at);
		if (!json_is_string(as))
			return refuse(a, -EINVAL, as ? fat : at,
				      "'as' names the pod to inject as");
		path = json_object_get(v, "path");
		if (path && parse_path(path, &pv)) {
			snprintf(fat, sizeof(fat), "%s.path", at);
			return refuse(a, -EINVAL, fat, "want fast, fallback or auto");
		}
		if (!strcmp(json_string_value(as), name))
			return refuse(a, -EINVAL, fat,
				      "pod '%s' cannot inject as itself", name);
		for (size_t j = 0; j < i; j++) {
			json_t *e = json_object_get(json_array_get(arr, j), "as");

			if (json_is_string(e) &&
			    !strcmp(json_string_value(e), json_string_value(as)))
				return refuse(a, -EINVAL, at,
					      "pod '%s' is granted twice",
					      json_string_value(as));
		}
		tgt = pod_index(a, json_string_value(as));
		if (tgt < 0 && a->skip_absent)
			continue;	/* not on this node: checked only */
		if (tgt < 0)
			return refuse(a, -ESRCH, fat, "no pod '%s' on node %s",
				      json_string_value(as), a->n->name);
		if (inj < 0)
			continue;	/* another node's injector: checked only */
		if (a->ngwant >= PI_MAX_INJECT)
			return refuse(a, -EINVAL, at, "more than %d grants",
				      PI_MAX_INJECT);
		a->gwant[a->ngwant++] = (struct grant){ inj, tgt,
			stored_path(a, pv, tgt), false };
	}
	return 0;
}

/* The pod's proxy rule of slot k: 0 "proxy" (outbound), 1
 * "proxy_inbound" (TCP connections to the pod, no "dst"). */
static int parse_proxy(struct apply *a, int pod, const char *name,
		       json_t *o, const char *pod_where, int k)
{
	static const char *const keys[] = { "by", "port", "match", "dports",
					    "dst", NULL };
	static const char *const in_keys[] = { "by", "port", "match",
					       "dports", NULL };
	struct pi_proxy_rule scratch = {};
	struct pi_proxy_rule *r = pod < 0 ? &scratch : &a->pods[pod].prule_want[k];
	char where[600], at[640];
	json_t *v;
	int proxy, ret = 0;

	snprintf(where, sizeof(where), "%s.%s", pod_where,
		 k ? "proxy_inbound" : "proxy");
	if (json_is_null(o))
		return 0;
	if (!json_is_object(o))
		return refuse(a, -EINVAL, where,
			      "an object: {\"by\": POD, \"port\": N, ...}");
	if (!only_keys(a, o, where, k ? in_keys : keys, &ret))
		return ret;
	v = json_object_get(o, "by");
	snprintf(at, sizeof(at), "%s.by", where);
	if (!json_is_string(v))
		return refuse(a, -EINVAL, v ? at : where,
			      "'by' names the proxy pod");
	if (!strcmp(json_string_value(v), name))
		return refuse(a, -EINVAL, at, "a pod cannot be its own proxy");
	proxy = pod_index(a, json_string_value(v));
	if (proxy < 0 && !a->skip_absent)
		return refuse(a, -ESRCH, at, "no pod '%s' on node %s",
			      json_string_value(v), a->n->name);
	if (proxy >= 0 && pod >= 0 &&
	    (a->pods[proxy].info.flags | a->pods[pod].info.flags) & PI_POD_NETKIT)
		return refuse(a, -EINVAL, at,
			      "proxying is built for veth pods only");
	v = json_object_get(o, "port");
	snprintf(at, sizeof(at), "%s.port", where);
	if (!json_is_integer(v) || json_integer_value(v) < 1 ||
	    json_integer_value(v) > 65535)
		return refuse(a, -EINVAL, v ? at : where,
			      "'port', the proxy's listening port, 1-65535");
	r->port = json_integer_value(v);
	v = json_object_get(o, "match");
	snprintf(at, sizeof(at), "%s.match", where);
	if (v && json_is_string(v) && !strcmp(json_string_value(v), "tcp"))
		r->proto = IPPROTO_TCP;
	else if (!k && v && json_is_string(v) && !strcmp(json_string_value(v), "udp"))
		r->proto = IPPROTO_UDP;
	else if (v)
		return refuse(a, -EINVAL, at, k ? "want tcp: an inbound rule takes TCP only" :
					       "want tcp or udp");
	v = json_object_get(o, "dports");
	snprintf(at, sizeof(at), "%s.dports", where);
	if (v) {
		size_t i;
		json_t *e;

		if (!r->proto)
			return refuse(a, -EINVAL, at, "'dports' needs 'match'");
		if (!json_is_array(v) || !json_array_size(v) ||
		    json_array_size(v) > PI_PROXY_MAX_PORTS)
			return refuse(a, -EINVAL, at,
				      "a list of 1 to %d ports or \"N-M\" ranges",
				      PI_PROXY_MAX_PORTS);
		json_array_foreach(v, i, e) {
			char eat[660];

			snprintf(eat, sizeof(eat), "%s[%zu]", at, i);
			if (parse_port_value(e, &r->dport_lo[i], &r->dport_hi[i]))
				return refuse(a, -EINVAL, eat,
					      "want N or \"N-M\" within 1-65535");
		}
		r->nports = json_array_size(v);
	}
	v = json_object_get(o, "dst");
	snprintf(at, sizeof(at), "%s.dst", where);
	if (v) {
		int family, plen;

		if (!r->proto)
			return refuse(a, -EINVAL, at, "'dst' needs 'match'");
		if (!json_is_string(v) ||
		    pi_parse_prefix(json_string_value(v), &family, &r->dst, &plen))
			return refuse(a, -EINVAL, at, "invalid CIDR");
		r->dst_family = family;
		r->dst_plen = plen;
	}
	/* a pod or proxy of another node (--skip-absent): checked, and no
	 * capture here */
	if (pod < 0 || proxy < 0) {
		memset(r, 0, sizeof(*r));
		return 0;
	}
	if (k) {
		r->flags = PI_PROXY_INBOUND;
		r->proto = IPPROTO_TCP;	/* as pi_proxy_add stores it */
	}
	a->pods[pod].proxy_want[k] = proxy;
	return 0;
}

static int parse_pod(struct apply *a, const char *name, json_t *o)
{
	static const char *const keys[] = { "egress", "ingress", "inject",
					    "proxy", "proxy_inbound", NULL };
	struct apod scratch = {};
	char where[600];
	json_t *v;
	int idx, err = 0, ret = 0;

	snprintf(where, sizeof(where), "pods[\"%s\"]", name);
	if (!pi_valid_pod_name(name))
		return refuse(a, -EINVAL, where, "invalid pod name");
	idx = pod_index(a, name);
	if (idx < 0 && !a->skip_absent)
		return refuse(a, -ESRCH, where,
			      "no pod '%s' on node %s (apply does not make pods)",
			      name, a->n->name);
	if (!json_is_object(o))
		return refuse(a, -EINVAL, where,
			      "a pod is an object: {\"egress\": [...], ...}");
	if (!only_keys(a, o, where, keys, &ret))
		return ret;
	/* Another node's pod (--skip-absent) is checked all the same, into
	 * a scratch record that is dropped: one document is valid or not
	 * whatever node it meets. */
	for (uint32_t d = 0; d < 2 && !err; d++) {
		v = json_object_get(o, dir_names[d]);
		if (v)
			err = parse_rules(a, idx < 0 ? &scratch : &a->pods[idx],
					  v, d, where);
	}
	v = json_object_get(o, "inject");
	if (!err && v)
		err = parse_grants(a, idx, name, v, where);
	v = json_object_get(o, "proxy");
	if (!err && v)
		err = parse_proxy(a, idx, name, v, where, 0);
	v = json_object_get(o, "proxy_inbound");
	if (!err && v)
		err = parse_proxy(a, idx, name, v, where, 1);
	free(scratch.want[0]);
	free(scratch.want[1]);
	return err;
}

static int parse_doc(struct apply *a, json_t *root)
{
	static const char *const keys[] = { "apiVersion", "pods", "conntrack",
					    NULL };
	const char *k;
	json_t *v, *pods;
	int err, ret = 0;

	if (!json_is_object(root))
		return refuse(a, -EINVAL, "$", "the document is an object");
	if (!only_keys(a, root, "$", keys, &ret))
		return ret;
	v = json_object_get(root, "apiVersion");
	if (!json_is_string(v) || strcmp(json_string_value(v), PI_STATE_API_VERSION))
		return refuse(a, -EINVAL, "apiVersion", "want \"%s\"",
			      PI_STATE_API_VERSION);
	a->gwant = calloc(PI_MAX_INJECT + PI_DP_MAX_PODS + 1,
			  sizeof(*a->gwant));
	if (!a->gwant)
		return -ENOMEM;
	pods = json_object_get(root, "pods");
	if (pods && !json_is_object(pods))
		return refuse(a, -EINVAL, "pods", "an object of pods by name");
	json_object_foreach(pods, k, v) {
		err = parse_pod(a, k, v);
		if (err)
			return err;
	}
	v = json_object_get(root, "conntrack");
	if (v) {
		static const char *const ckeys[] = { "timeouts", NULL };
		json_t *tos, *secs;

		if (!json_is_object(v))
			return refuse(a, -EINVAL, "conntrack", "an object");
		if (!only_keys(a, v, "conntrack", ckeys, &ret))
			return ret;
		tos = json_object_get(v, "timeouts");
		if (tos && !json_is_object(tos))
			return refuse(a, -EINVAL, "conntrack.timeouts",
				      "an object of seconds by kind");
		json_object_foreach(tos, k, secs) {
			char at[128];
			int kind;

			snprintf(at, sizeof(at), "conntrack.timeouts[\"%s\"]", k);
			for (kind = 0; kind < PI_CT_TO_MAX; kind++)
				if (!strcmp(k, timeout_names[kind]))
					break;
			if (kind == PI_CT_TO_MAX)
				return refuse(a, -EINVAL, at,
					      "no such timeout (tcp-opening, tcp-established, tcp-closing, udp, icmp)");
			if (!json_is_integer(secs) || json_integer_value(secs) < 1 ||
			    json_integer_value(secs) > TIMEOUT_MAX)
				return refuse(a, -EINVAL, at,
					      "seconds, 1 to %d", TIMEOUT_MAX);
			a->to_want[kind] = json_integer_value(secs);
		}
	}
	return 0;
}

/* ---- the difference --------------------------------------------------- */

static bool rule_same(const struct pi_rule *x, const struct pi_rule *y)
{
	return x->action == y->action && x->proto == y->proto &&
	       x->family == y->family && x->prefixlen == y->prefixlen &&
	       x->port_lo == y->port_lo && x->port_hi == y->port_hi &&
	       !memcmp(&x->addr, &y->addr, sizeof(x->addr));
}

static int rule_cmp(const struct pi_rule *x, const struct pi_rule *y)
{
	struct pi_rule a = *x, b = *y;

	a.id = b.id = 0;
	return memcmp(&a, &b, sizeof(a));
}

static int rule_idx_cmp(const void *x, const void *y, void *ctx)
{
	const struct pi_rule *rules = ctx;
	uint32_t i = *(const uint32_t *)x, j = *(const uint32_t *)y;
	int c = rule_cmp(&rules[i], &rules[j]);

	return c ? c : (i > j) - (i < j);
}

/* Gives each wanted rule of a changed direction an id: the id of an
 * equal rule it replaces (its counters go on), else a new one. */
static void match_ids(struct apod *p, uint32_t d)
{
	uint32_t n = p->ncur[d], *idx = calloc(n + 1, sizeof(*idx));
	bool *taken = calloc(n + 1, sizeof(*taken));

	p->kept[d] = 0;
	if (!idx || !taken) {
		free(idx);
		free(taken);
		return;		/* every rule gets a new id: correct, slower */
	}
	for (uint32_t i = 0; i < n; i++)
		idx[i] = i;
	qsort_r(idx, n, sizeof(*idx), rule_idx_cmp, p->cur[d]);
	for (uint32_t w = 0; w < p->nwant[d]; w++) {
		const struct pi_rule *r = &p->want[d][w];
		uint32_t lo = 0, hi = n;

		while (lo < hi) {
			uint32_t mid = (lo + hi) / 2;

			if (rule_cmp(&p->cur[d][idx[mid]], r) < 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		for (; lo < n && rule_same(&p->cur[d][idx[lo]], r); lo++) {
			if (taken[lo])
				continue;
			taken[lo] = true;
			p->want[d][w].id = p->cur[d][idx[lo]].id;
			p->kept[d]++;
			break;
		}
	}
	free(idx);
	free(taken);
}

static bool proxy_rule_same(const struct pi_proxy_rule *x,
			    const struct pi_proxy_rule *y)
{
	if (x->port != y->port || x->proto != y->proto ||
	    x->nports != y->nports || x->dst_family != y->dst_family ||
	    x->dst_plen != y->dst_plen ||
	    memcmp(&x->dst, &y->dst, sizeof(x->dst)))
		return false;
	for (int i = 0; i < x->nports && i < PI_PROXY_MAX_PORTS; i++)
		if (x->dport_lo[i] != y->dport_lo[i] ||
		    x->dport_hi[i] != y->dport_hi[i])
			return false;
	return true;
}

static struct grant *grant_find(struct grant *g, int n, int injector,
				int target)
{
	for (int i = 0; i < n; i++)
		if (g[i].injector == injector && g[i].target == target)
			return &g[i];
	return NULL;
}

/* Decides what changes; new rule ids are handed out here, so that an
 * apply that cannot get them fails before anything changes. */
static int plan(struct apply *a, uint32_t **new_ids, uint32_t *nnew)
{
	uint8_t *used = calloc(PI_MAX_RULE_IDS, 1);
	uint64_t total = 0;
	uint32_t next = 1, cap = 0;
	int err = 0;

	*new_ids = NULL;
	*nnew = 0;
	if (!used)
		return -ENOMEM;
	for (int i = 0; i < a->npods; i++)
		for (uint32_t d = 0; d < 2; d++)
			for (uint32_t r = 0; r < a->pods[i].ncur[d]; r++)
				if (a->pods[i].cur[d][r].id < PI_MAX_RULE_IDS)
					used[a->pods[i].cur[d][r].id] = 1;
	for (int i = 0; !err && i < a->npods; i++) {
		struct apod *p = &a->pods[i];

		for (uint32_t d = 0; !err && d < 2; d++) {
			bool same = p->nwant[d] == p->ncur[d];

			total += p->nwant[d];
			for (uint32_t r = 0; same && r < p->nwant[d]; r++)
				same = rule_same(&p->want[d][r], &p->cur[d][r]);
			if (same) {
				for (uint32_t r = 0; r < p->nwant[d]; r++)
					p->want[d][r].id = p->cur[d][r].id;
				p->kept[d] = p->ncur[d];
				continue;
			}
			p->changed[d] = true;
			match_ids(p, d);
			for (uint32_t r = 0; !err && r < p->nwant[d]; r++) {
				if (p->want[d][r].id)
					continue;
				/* Ids of rules this apply removes are not
				 * handed out again: an undo puts them back. */
				while (next < PI_MAX_RULE_IDS && used[next])
					next++;
				if (next >= PI_MAX_RULE_IDS) {
					err = -ENOSPC;
					break;
				}
				if (*nnew == cap) {
					uint32_t *m;

					cap = cap ? cap * 2 : 1024;
					m = realloc(*new_ids, cap * sizeof(*m));
					if (!m) {
						err = -ENOMEM;
						break;
					}
					*new_ids = m;
				}
				used[next] = 1;
				(*new_ids)[(*nnew)++] = next;
				p->want[d][r].id = next;
			}
		}
		for (int k = 0; k < 2; k++) {
			if (p->proxy_cur[k] >= 0 &&
			    (p->proxy_want[k] != p->proxy_cur[k] ||
			     !proxy_rule_same(&p->prule_cur[k], &p->prule_want[k])))
				p->proxy_del[k] = true;
			if (p->proxy_want[k] >= 0 &&
			    (p->proxy_del[k] || p->proxy_cur[k] < 0))
				p->proxy_add[k] = true;
		}
	}
	free(used);
	if (err == -ENOSPC)
		return refuse(a, err, "pods",
			      "the node has no rule ids left for the new rules");
	if (!err && total > PI_MAX_RULES)
		return refuse(a, -ENOSPC, "pods",
			      "%llu rules: a node holds at most %u",
			      (unsigned long long)total, PI_MAX_RULES);
	if (err)
		return err;

	/* A proxy's grant is the proxy's: wanted with it, whatever its path. */
	for (int i = 0; i < a->npods; i++) {
		struct apod *p = &a->pods[i];

		for (int k = 0; k < 2; k++) {
			if (p->proxy_want[k] < 0 ||
			    grant_find(a->gwant, a->ngwant, p->proxy_want[k], i))
				continue;
			/* as many as the node holds, and gwant has room for */
			if (a->ngwant >= PI_MAX_INJECT)
				return refuse(a, -EINVAL, "pods",
					      "more than %d grants, the proxies' own counted",
					      PI_MAX_INJECT);
			a->gwant[a->ngwant++] = (struct grant){
				p->proxy_want[k], i, 0, true };
		}
	}
	/* The node holds PI_MAX_INJECT of them as the datapath keys them:
	 * one per address of the pod injected as (a dual-stack pod's grant
	 * takes two). Refused here, not found by the grant that fails half
	 * way and undoes the rest. */
	total = 0;
	for (int g = 0; g < a->ngwant; g++) {
		uint32_t f = a->pods[a->gwant[g].target].info.flags;

		total += !!(f & PI_POD_HAS_V4) + !!(f & PI_POD_HAS_V6);
	}
	if (total > PI_MAX_INJECT)
		return refuse(a, -EINVAL, "pods",
			      "the grants take %llu of the node's %d entries for them (one per address of the pod injected as)",
			      (unsigned long long)total, PI_MAX_INJECT);
	return 0;
}

/* Whether the grant of injector for target goes with the proxy rules
 * removed in step 1: a rule of its that goes, and none that stays. */
static bool grant_goes_with_proxy(const struct apply *a, int injector,
				  int target)
{
	const struct apod *p = &a->pods[target];
	bool goes = false;

	for (int k = 0; k < 2; k++) {
		if (p->proxy_cur[k] != injector)
			continue;
		if (!p->proxy_del[k])
			return false;
		goes = true;
	}
	return goes;
}

/* Whether a proxy rule step 5 makes brings the grant of injector for
 * target. */
static bool grant_comes_with_proxy(const struct apply *a, int injector,
				   int target)
{
	const struct apod *p = &a->pods[target];

	for (int k = 0; k < 2; k++)
		if (p->proxy_add[k] && p->proxy_want[k] == injector)
			return true;
	return false;
}

static int proxy_del_k(struct apply *a, int k, const char *proxy,
		       const char *pod)
{
	return k ? pi_proxy_del_inbound(a->n, proxy, pod) :
		   pi_proxy_del(a->n, proxy, pod);
}

/* ---- making it so ---------------------------------------------------- */

static void report(struct apply *a, pi_plan_fn fn, void *ctx,
		   const struct pi_plan_step *st)
{
	if (fn)
		fn(st, ctx);
}

static int push_undo(struct apply *a, struct undo u)
{
	a->undo[a->nundo++] = u;
	return 0;
}

static const char *pname(const struct apply *a, int i)
{
	return a->pods[i].info.name;
}

/* A grant as `inject allow` takes it back: the netkit fallback is asked
 * for as the fallback. */
static uint32_t allow_path(uint32_t stored)
{
	return stored == PI_PATH_NETKIT_FALLBACK ? PI_PATH_FALLBACK : stored;
}

static int grant_allow(struct apply *a, int inj, int tgt, uint32_t path)
{
	const char *as = pname(a, tgt);

	return pi_inject_allow(a->n, pname(a, inj), &as, 1, allow_path(path),
			       NULL);
}

static int grant_deny(struct apply *a, int inj, int tgt)
{
	const char *as = pname(a, tgt);
	int err = inject_deny(a->n, pname(a, inj), &as, 1, true);

	return err < 0 ? err : 0;
}

/* Undoes the steps made, newest first. Returns how many could not be
 * undone (each said). */
static int undo_all(struct apply *a)
{
	int failed = 0;

	for (int i = a->nundo - 1; i >= 0; i--) {
		const struct undo *u = &a->undo[i];
		struct apod *p = &a->pods[u->pod];
		int err = 0;

		switch (u->kind) {
		case U_POLICY:
			err = policy_replace(a->n, &p->info, u->dir,
					     p->cur[u->dir], p->ncur[u->dir]);
			break;
		case U_GRANT_ADDED:
			err = grant_deny(a, u->pod, u->other);
			break;
		case U_GRANT_CHANGED:
		case U_GRANT_REMOVED:
			err = grant_allow(a, u->pod, u->other, u->path);
			break;
		/* dir: the proxy slot; path: the grant's before the step, 0
		 * if there was none (the rule's going takes its grant) */
		case U_PROXY_ADDED:
			err = proxy_del_k(a, u->dir, pname(a, u->other),
					  p->info.name);
			if (!err && u->path)
				err = grant_allow(a, u->other, u->pod, u->path);
			break;
		case U_PROXY_REMOVED:
			err = pi_proxy_add(a->n, pname(a, u->other), p->info.name,
					   &p->prule_cur[u->dir]);
			if (!err && u->path)
				err = grant_allow(a, u->other, u->pod, u->path);
			break;
		case U_TIMEOUTS:
			break;	/* saved last: nothing is ever undone after it */
		}
		if (err) {
			failed++;
			pr_err("undoing a change of pod '%s' failed: %s",
			       p->info.name, strerror(-err));
		}
	}
	if (failed)
		pr_err("%d of %d changes could not be undone: the node is neither as it was nor as the document says ('export' shows it as it is)",
		       failed, a->nundo);
	else if (a->nundo)
		pr_info("%d changes undone; the node is as it was", a->nundo);
	return failed;
}

static int execute(struct apply *a, bool dry, pi_plan_fn fn, void *ctx,
		   const uint32_t *new_ids, uint32_t nnew)
{
	struct grant *gafter = calloc(a->ngcur + 1, sizeof(*gafter));
	int ngafter = 0, changes = 0, err = 0;
	uint32_t to_cur[PI_CT_TO_MAX];
	bool to_change = false;

	if (!gafter)
		return -ENOMEM;
	a->undo = calloc(a->npods * 9 + a->ngcur + a->ngwant + 8,
			 sizeof(*a->undo));
	if (!a->undo) {
		free(gafter);
		return -ENOMEM;
	}

	/* 1. proxy rules that go or change (their grant goes with them) */
	for (int i = 0; !err && i < a->npods * 2; i++) {
		struct apod *p = &a->pods[i / 2];
		int k = i % 2;
		struct pi_plan_step st = { .what = PI_PLAN_PROXY_DEL,
			.pod = p->info.name, .proxy = &p->prule_cur[k] };

		if (!p->proxy_del[k])
			continue;
		st.other = pname(a, p->proxy_cur[k]);
		if (!dry) {
			const struct grant *g = grant_find(a->gcur, a->ngcur,
							   p->proxy_cur[k], i / 2);

			err = proxy_del_k(a, k, st.other, p->info.name);
			if (err)
				break;
			push_undo(a, (struct undo){ U_PROXY_REMOVED, i / 2,
						    p->proxy_cur[k], k,
						    g ? g->path : 0 });
		}
		report(a, fn, ctx, &st);
		changes++;
	}
	for (int i = 0; i < a->ngcur; i++) {
		const struct grant *g = &a->gcur[i];

		if (grant_goes_with_proxy(a, g->injector, g->target))
			continue;
		gafter[ngafter++] = *g;
	}

	/* 2. grants that go */
	for (int i = 0; !err && i < ngafter; i++) {
		const struct grant *g = &gafter[i];
		struct pi_plan_step st = { .what = PI_PLAN_GRANT_DEL,
			.pod = pname(a, g->injector), .other = pname(a, g->target),
			.path = g->path };

		if (grant_find(a->gwant, a->ngwant, g->injector, g->target))
			continue;
		if (!dry) {
			err = grant_deny(a, g->injector, g->target);
			if (err)
				break;
			push_undo(a, (struct undo){ U_GRANT_REMOVED, g->injector,
						    g->target, 0, g->path });
		}
		report(a, fn, ctx, &st);
		changes++;
	}

	/* 3. policies: each changed direction in one compile and one flip */
	if (!err && !dry && nnew)
		err = policy_zero_counters(a->n, new_ids, nnew);
	for (int i = 0; !err && i < a->npods; i++) {
		struct apod *p = &a->pods[i];

		for (uint32_t d = 0; !err && d < 2; d++) {
			struct pi_plan_step st = { .what = PI_PLAN_POLICY,
				.pod = p->info.name, .dir = d,
				.before = p->ncur[d], .after = p->nwant[d],
				.kept = p->kept[d] };

			if (!p->changed[d])
				continue;
			if (!dry) {
				err = policy_replace(a->n, &p->info, d,
						     p->want[d], p->nwant[d]);
				if (err) {
					char where[600];

					snprintf(where, sizeof(where),
						 "pods[\"%s\"].%s", p->info.name,
						 dir_names[d]);
					refuse(a, err, where,
					       "%u rules cannot be published: %s",
					       p->nwant[d], strerror(-err));
					break;
				}
				push_undo(a, (struct undo){ U_POLICY, i, -1, d, 0 });
			}
			report(a, fn, ctx, &st);
			changes++;
		}
	}

	/* 4. grants that come, or change path */
	for (int i = 0; !err && i < a->ngwant; i++) {
		const struct grant *g = &a->gwant[i];
		struct grant *now = grant_find(gafter, ngafter, g->injector,
					       g->target);
		struct pi_plan_step st = { .what = PI_PLAN_GRANT_ADD,
			.pod = pname(a, g->injector), .other = pname(a, g->target),
			.path = g->path };

		/* the proxy rule made below brings its own grant (its path
		 * is set after it, when the document names one) */
		if (grant_comes_with_proxy(a, g->injector, g->target))
			continue;
		if (g->from_proxy) {
			/* the document names no path for it: the kernel's,
			 * as on a node the rule was made on afresh (an
			 * `inject allow --path` since is drift to undo) */
			st.path = stored_path(a, 0, g->target);
			if (now && now->path == st.path)
				continue;
		} else if (now && now->path == g->path) {
			continue;
		}
		if (!dry) {
			err = grant_allow(a, g->injector, g->target, st.path);
			if (err)
				break;
			push_undo(a, (struct undo){
				now ? U_GRANT_CHANGED : U_GRANT_ADDED,
				g->injector, g->target, 0, now ? now->path : 0 });
		}
		report(a, fn, ctx, &st);
		changes++;
	}

	/* 5. proxy rules that come */
	for (int j = 0; !err && j < a->npods * 2; j++) {
		int i = j / 2, k = j % 2;
		struct apod *p = &a->pods[i];
		struct grant *ex, *now;
		uint32_t after;
		struct pi_plan_step st = { .what = PI_PLAN_PROXY_ADD,
			.pod = p->info.name, .proxy = &p->prule_want[k] };

		if (!p->proxy_add[k])
			continue;
		st.other = pname(a, p->proxy_want[k]);
		/* the proxy's grant for the pod before this rule, if any */
		now = grant_find(gafter, ngafter, p->proxy_want[k], i);
		if (!dry) {
			err = pi_proxy_add(a->n, st.other, p->info.name,
					   &p->prule_want[k]);
			if (err)
				break;
			push_undo(a, (struct undo){ U_PROXY_ADDED, i,
						    p->proxy_want[k], k,
						    now ? now->path : 0 });
		}
		report(a, fn, ctx, &st);
		changes++;
		/* the rule kept the grant's path, or brought the kernel's */
		after = now ? now->path : stored_path(a, 0, i);
		ex = grant_find(a->gwant, a->ngwant, p->proxy_want[k], i);
		if (ex && !ex->from_proxy && ex->path != after) {
			struct pi_plan_step gs = { .what = PI_PLAN_GRANT_ADD,
				.pod = st.other, .other = p->info.name,
				.path = ex->path };

			if (!dry) {
				err = grant_allow(a, p->proxy_want[k], i, ex->path);
				if (err)
					break;
				push_undo(a, (struct undo){ U_GRANT_CHANGED,
					p->proxy_want[k], i, 0, after });
			}
			report(a, fn, ctx, &gs);
			changes++;
		}
	}

	/* 6. the tracker's timeouts, compared as the datapath uses them */
	pi_ct_timeouts(a->n, to_cur);
	for (int k = 0; k < PI_CT_TO_MAX; k++) {
		uint32_t want = a->to_want[k] ? a->to_want[k] : timeout_defaults[k];
		struct pi_plan_step st = { .what = PI_PLAN_TIMEOUT, .kind = k,
			.from = to_cur[k], .to = want };

		if (err || want == to_cur[k])
			continue;
		to_change = true;
		if (dry) {
			report(a, fn, ctx, &st);
			changes++;
		}
	}
	if (!err && to_change && !dry) {
		struct pi_node_config saved = a->n->cfg;

		memcpy(a->n->cfg.ct_timeout, a->to_want, sizeof(a->to_want));
		err = node_save_config(a->n);
		if (err) {
			a->n->cfg = saved;
			pr_err("cannot save the tracker's timeouts: %s",
			       strerror(-err));
		}
		for (int k = 0; !err && k < PI_CT_TO_MAX; k++) {
			uint32_t want = a->to_want[k] ? a->to_want[k] :
							timeout_defaults[k];
			struct pi_plan_step st = { .what = PI_PLAN_TIMEOUT,
				.kind = k, .from = to_cur[k], .to = want };

			if (want != to_cur[k]) {
				report(a, fn, ctx, &st);
				changes++;
			}
		}
	}

	/* A failure whose undo failed too is not the failure's: the caller
	 * must not be told the node is as it was. */
	if (err && undo_all(a))
		err = -ENOTRECOVERABLE;
	free(gafter);
	return err ? err : changes;
}

static void apply_free(struct apply *a)
{
	for (int i = 0; a->pods && i < a->npods; i++)
		for (int d = 0; d < 2; d++) {
			free(a->pods[i].cur[d]);
			free(a->pods[i].want[d]);
		}
	free(a->pods);
	free(a->by_name);
	free(a->gcur);
	free(a->gwant);
	free(a->undo);
}

/* ---- the last apply's record ------------------------------------------- */
/*
 * Applying again the document applied last, to a node that has not changed
 * since, changes nothing; finding that out by parsing the document again
 * costs most of such an apply when the document is big (10 000 rules: a
 * 1.3 MB document, 25-30 ms in jansson), and reading it and the node's
 * rules most of what is left. So an apply that succeeds keeps a record, in
 * APPLY_RUN_DIR/<the node's pin directory's name>:
 *   - the build that made it and the apply's flags;
 *   - the document's bytes, and for a document read from a file
 *     (pi_apply_file) that file's identity: device, inode, size, mtime
 *     and ctime;
 *   - the node's state after the apply: the id of its policy references'
 *     map (a node made again has new maps), every pod (name, ids,
 *     devices, addresses), each pod direction's policy reference (start,
 *     count and revision: every edit of a pod's rules moves the revision,
 *     and a slot's revision never goes back, not even when its pod goes),
 *     the grants, the proxy rules, the tracker's timeouts.
 * What an apply does is a function of the document, its flags, the node's
 * state and the build (and of the kernel, which does not change under a
 * node), and an apply made right after itself changes nothing; so an apply
 * of the record's document, flags and build, on a node whose state reads
 * as the record's, has nothing to do and ends without a parse. Anything
 * else is the full apply: a rule added by `policy add`, a pod made or
 * gone, a grant of the CLI's, another build, a lost or torn record.
 *
 * The document is known to be the record's by its bytes, or, without
 * reading it, by its file's identity. A write to a file sets its ctime to
 * the time of the write, but that clock is coarse: a file written twice
 * within one tick keeps its ctime. So, as git does with its index, an
 * identity is only trusted when the file's ctime was at least
 * IDENTITY_SETTLED_S old when the record was made: any later write then
 * moves it. A record whose identity is not trusted yet is made again by
 * the first apply that finds the document unchanged by its bytes once it
 * is (a DaemonSet's periodic apply does). The record is a cache: without
 * it an apply only costs its parse.
 */
#define APPLY_RUN_DIR		PI_RUN_DIR "/apply"
#define RECORD_MAGIC		"podinject last apply 2\n"
#define RECORD_MAX		(256u << 20)
#define IDENTITY_SETTLED_S	2

/* A document's file, as fstat() tells it. */
struct doc_id {
	uint64_t dev, ino, size;
	int64_t mtime_ns, ctime_ns;
	uint32_t trusted;	/* ctime settled when the record was made */
	uint32_t pad;
};

struct sbuf {
	char *p;
	size_t len, cap;
	bool oom;
};

static void sb_put(struct sbuf *b, const void *data, size_t len)
{
	if (b->oom)
		return;
	if (b->len + len > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *p;

		while (cap < b->len + len)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, len);
	b->len += len;
}

static void sb_u32(struct sbuf *b, uint32_t v)
{
	sb_put(b, &v, sizeof(v));
}

static void sb_u64(struct sbuf *b, uint64_t v)
{
	sb_put(b, &v, sizeof(v));
}

static void sb_str(struct sbuf *b, const char *s)
{
	sb_put(b, s, strlen(s) + 1);
}

static void sb_addr(struct sbuf *b, const struct pi_addr *a)
{
	for (int i = 0; i < 4; i++)
		sb_u32(b, a->a[i]);
}

static uint32_t pod_ifindex_or_none(const struct apply *a, int i)
{
	return i < 0 ? 0 : a->pods[i].info.ifindex;
}

static uint32_t map_id(int fd)
{
	struct bpf_map_info info = { 0 };
	uint32_t len = sizeof(info);

	return bpf_obj_get_info_by_fd(fd, &info, &len) ? 0 : info.id;
}

/* The node's state as read_node(a, false) read it, field by field (no
 * padding bytes), pods in name order; a proxy rule without its live
 * counts. 0, or -EIO when a map's id cannot be read. */
static int state_bytes(struct apply *a, struct sbuf *b)
{
	uint32_t to[PI_CT_TO_MAX] = { 0 };
	uint32_t refs_id = map_id(a->n->maps[M_POLICY_REFS]);

	if (!refs_id)
		return -EIO;
	sb_u32(b, refs_id);
	sb_u32(b, a->npods);
	for (int k = 0; k < a->npods; k++) {
		const struct apod *p = &a->pods[a->by_name[k]];
		const struct pi_pod_info *in = &p->info;
		sb_str(b, in->name);
		sb_str(b, in->netns);
		sb_str(b, in->ifname);
		sb_str(b, in->hostdev);
		sb_str(b, in->attach_id);
		sb_u32(b, in->meta_flags);
		sb_u32(b, in->id);
		sb_u32(b, in->ifindex);
		sb_u32(b, in->peer_ifindex);
		sb_u32(b, in->flags);
		sb_u32(b, in->ip4);
		sb_put(b, in->ip6, sizeof(in->ip6));
		sb_put(b, in->pod_mac, sizeof(in->pod_mac));
		sb_put(b, in->host_mac, sizeof(in->host_mac));
		for (uint32_t d = 0; d < 2; d++) {
			sb_u32(b, p->ref[d].start);
			sb_u32(b, p->ref[d].count);
			sb_u32(b, p->ref[d].rev);
		}
		for (int j = 0; j < 2; j++) {
			const struct pi_proxy_rule *r = &p->prule_cur[j];

			sb_u32(b, pod_ifindex_or_none(a, p->proxy_cur[j]));
			if (p->proxy_cur[j] < 0)
				continue;
			sb_put(b, &r->port, 2);
			sb_put(b, &r->proto, 1);
			sb_put(b, &r->nports, 1);
			sb_put(b, r->dport_lo, sizeof(r->dport_lo));
			sb_put(b, r->dport_hi, sizeof(r->dport_hi));
			sb_u32(b, r->dst_family);
			sb_u32(b, r->dst_plen);
			sb_addr(b, &r->dst);
		}
	}
	sb_u32(b, a->ngcur);
	for (int i = 0; i < a->ngcur; i++) {
		sb_u32(b, pod_ifindex_or_none(a, a->gcur[i].injector));
		sb_u32(b, pod_ifindex_or_none(a, a->gcur[i].target));
		sb_u32(b, a->gcur[i].path);
	}
	pi_ct_timeouts(a->n, to);
	sb_put(b, to, sizeof(to));
	return 0;
}

/* The node's state now, as the record holds it. */
static int node_state(struct pi_node *n, struct sbuf *b)
{
	struct apply now = { .n = n };
	int err = read_node(&now, false);

	if (!err)
		err = state_bytes(&now, b);
	if (!err && b->oom)
		err = -ENOMEM;
	apply_free(&now);
	return err;
}

static void record_path(const struct pi_node *n, char *buf, size_t len)
{
	run_path("apply", n->pin_dir, buf, len);
}

/* The record's head: magic, build, flags. Then come the document's file
 * identity (struct doc_id, zero for none), its length and bytes, and the
 * node's state. */
static void record_head(struct sbuf *b, uint32_t flags)
{
	sb_put(b, RECORD_MAGIC, strlen(RECORD_MAGIC));
	sb_str(b, PODINJECT_VERSION);
	sb_u32(b, flags & ~PI_APPLY_DRY_RUN);
}

/* The record, mapped whole (it is only ever replaced by a rename, never
 * written in place, so the mapping cannot be cut short under us). */
struct record {
	const char *p;
	size_t len;
	struct doc_id id;
	const char *doc, *state;
	uint64_t doc_len, state_len;
};

/* The record, when there is one made by this build with these flags; false
 * otherwise. record_unmap() after. */
static bool record_map(const struct pi_node *n, uint32_t flags,
		       struct record *r)
{
	struct sbuf head = { 0 };
	char path[PATH_MAX];
	struct stat st;
	void *m = MAP_FAILED;
	size_t off;
	int fd;

	memset(r, 0, sizeof(*r));
	record_path(n, path, sizeof(path));
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return false;
	if (!fstat(fd, &st) && S_ISREG(st.st_mode) && st.st_uid == 0 &&
	    st.st_size > 0 && (uint64_t)st.st_size <= RECORD_MAX)
		m = mmap(NULL, st.st_size, PROT_READ, MAP_SHARED | MAP_POPULATE,
			 fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return false;
	r->p = m;
	r->len = st.st_size;
	record_head(&head, flags);
	off = head.len;
	if (head.oom || r->len < off + sizeof(r->id) + 8 ||
	    memcmp(r->p, head.p, head.len))
		goto torn;
	memcpy(&r->id, r->p + off, sizeof(r->id));
	off += sizeof(r->id);
	memcpy(&r->doc_len, r->p + off, 8);
	off += 8;
	if (r->doc_len > r->len - off)
		goto torn;
	r->doc = r->p + off;
	off += r->doc_len;
	r->state = r->p + off;
	r->state_len = r->len - off;
	free(head.p);
	return true;
torn:
	free(head.p);
	munmap((void *)r->p, r->len);
	memset(r, 0, sizeof(*r));
	return false;
}

static void record_unmap(struct record *r)
{
	if (r->p)
		munmap((void *)r->p, r->len);
	memset(r, 0, sizeof(*r));
}

static bool id_same(const struct doc_id *x, const struct doc_id *y)
{
	return x->dev == y->dev && x->ino == y->ino && x->size == y->size &&
	       x->mtime_ns == y->mtime_ns && x->ctime_ns == y->ctime_ns;
}

/* Whether the node's state reads as the record's. */
static bool record_state_same(struct pi_node *n, const struct record *r)
{
	struct sbuf state = { 0 };
	bool same = !node_state(n, &state) && state.len == r->state_len &&
		    !memcmp(state.p, r->state, state.len);

	free(state.p);
	return same;
}

/* Whether the file's last change is old enough that any later write
 * moves its ctime. */
static bool id_settled(const struct doc_id *id)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	return id->ctime_ns <= (int64_t)now.tv_sec * 1000000000 + now.tv_nsec -
				       (int64_t)IDENTITY_SETTLED_S * 1000000000;
}

static int write_whole(int fd, const char *p, size_t len)
{
	while (len) {
		ssize_t w = write(fd, p, len);

		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		p += w;
		len -= w;
	}
	return 0;
}

/* Keeps the record of an apply that succeeded: the node read again, as it
 * is now; `id` the document's file (NULL: none), trusted when its ctime
 * has settled. Written whole to a new file and renamed over the old one;
 * an error only costs the next apply its parse. */
static void record_write(struct pi_node *n, const char *doc, size_t len,
			 uint32_t flags, const struct doc_id *id)
{
	char path[PATH_MAX], tmp[PATH_MAX + 32];
	struct sbuf head = { 0 }, state = { 0 };
	struct doc_id did = { 0 };
	int fd, err;

	if (id) {
		did = *id;
		did.trusted = id_settled(id);
	}
	record_path(n, path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.%d", path, (int)getpid());
	err = node_state(n, &state);
	if (!err) {
		record_head(&head, flags);
		sb_put(&head, &did, sizeof(did));
		sb_u64(&head, len);
		err = head.oom ? -ENOMEM : 0;
	}
	if (!err)
		err = mkdir_p(APPLY_RUN_DIR);
	fd = err ? -1 : open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC |
			     O_NOFOLLOW, 0600);
	if (!err && fd < 0)
		err = -errno;
	if (!err)
		err = write_whole(fd, head.p, head.len);
	if (!err)
		err = write_whole(fd, doc, len);
	if (!err)
		err = write_whole(fd, state.p, state.len);
	if (fd >= 0 && close(fd) && !err)
		err = -errno;
	if (!err && rename(tmp, path))
		err = -errno;
	if (err) {
		unlink(tmp);
		unlink(path);	/* a record of an older state is of no use */
		pr_debug("no record of this apply (%s): the next parses again",
			 strerror(-err));
	}
	free(head.p);
	free(state.p);
}

void apply_record_forget(const char *pin_dir)
{
	char path[PATH_MAX];

	run_path("apply", pin_dir, path, sizeof(path));
	unlink(path);
}

/* ---- YAML: the same document, read by libyaml into jansson's tree ------ */

/* Aliases let a small YAML document name one subtree many times: the
 * tree made from it is bounded, so that such a document cannot grow
 * without end. */
#define YAML_MAX_NODES	(1024 * 1024)
#define YAML_MAX_DEPTH	64

struct ytree {
	yaml_document_t *doc;
	size_t made;
	char where[64], reason[256];
};

static json_t *yaml_scalar(const yaml_node_t *node)
{
	const char *v = (const char *)node->data.scalar.value;
	size_t len = node->data.scalar.length;

	/* Plain scalars are typed as YAML 1.2's core schema types them;
	 * quoted ones are strings. */
	if (node->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
		char *end;
		long long x;

		if (!len || !strcmp(v, "~") || !strcmp(v, "null") ||
		    !strcmp(v, "Null") || !strcmp(v, "NULL"))
			return json_null();
		if (!strcmp(v, "true") || !strcmp(v, "True") || !strcmp(v, "TRUE"))
			return json_true();
		if (!strcmp(v, "false") || !strcmp(v, "False") ||
		    !strcmp(v, "FALSE"))
			return json_false();
		if ((*v >= '0' && *v <= '9') ||
		    ((*v == '-' || *v == '+') && v[1] >= '0' && v[1] <= '9')) {
			errno = 0;
			x = strtoll(v, &end, 10);
			if (!errno && !*end)
				return json_integer(x);
		}
	}
	return json_stringn(v, len);
}

static json_t *yaml_node_json(struct ytree *t, yaml_node_t *node, int depth)
{
	json_t *out = NULL;

	if (!node)
		return NULL;
	if (++t->made > YAML_MAX_NODES || depth > YAML_MAX_DEPTH) {
		snprintf(t->where, sizeof(t->where), "line %zu",
			 node->start_mark.line + 1);
		snprintf(t->reason, sizeof(t->reason),
			 "the document is too large or too deep");
		return NULL;
	}
	switch (node->type) {
	case YAML_SCALAR_NODE:
		out = yaml_scalar(node);
		break;
	case YAML_SEQUENCE_NODE:
		out = json_array();
		for (yaml_node_item_t *i = node->data.sequence.items.start;
		     out && i < node->data.sequence.items.top; i++) {
			json_t *v = yaml_node_json(t, yaml_document_get_node(t->doc, *i),
						   depth + 1);

			if (!v || json_array_append_new(out, v)) {
				json_decref(out);
				out = NULL;
			}
		}
		break;
	case YAML_MAPPING_NODE:
		out = json_object();
		for (yaml_node_pair_t *p = node->data.mapping.pairs.start;
		     out && p < node->data.mapping.pairs.top; p++) {
			yaml_node_t *k = yaml_document_get_node(t->doc, p->key);
			json_t *v;

			if (!k || k->type != YAML_SCALAR_NODE) {
				snprintf(t->where, sizeof(t->where), "line %zu",
					 node->start_mark.line + 1);
				snprintf(t->reason, sizeof(t->reason),
					 "a key is a plain name");
				json_decref(out);
				return NULL;
			}
			if (json_object_get(out, (const char *)k->data.scalar.value)) {
				snprintf(t->where, sizeof(t->where), "line %zu",
					 k->start_mark.line + 1);
				snprintf(t->reason, sizeof(t->reason),
					 "duplicate key '%s'", k->data.scalar.value);
				json_decref(out);
				return NULL;
			}
			v = yaml_node_json(t, yaml_document_get_node(t->doc, p->value),
					   depth + 1);
			if (!v || json_object_set_new(out,
					(const char *)k->data.scalar.value, v)) {
				json_decref(out);
				out = NULL;
			}
		}
		break;
	default:
		snprintf(t->where, sizeof(t->where), "line %zu",
			 node->start_mark.line + 1);
		snprintf(t->reason, sizeof(t->reason), "an empty node");
		break;
	}
	return out;
}

/* The stream ends after the first document. The document is the node's
 * whole state: a second one (a file of parts, "---" between them) would
 * be ignored, and what it held removed from the node; so would whatever
 * follows the first, read or not. False (*ret set) when it does not. */
static bool yaml_stream_ends(struct apply *a, yaml_parser_t *parser, int *ret)
{
	yaml_document_t next;
	char where[64];
	bool more;

	if (!yaml_parser_load(parser, &next)) {
		snprintf(where, sizeof(where), "line %zu column %zu",
			 parser->problem_mark.line + 1,
			 parser->problem_mark.column + 1);
		*ret = refuse(a, -EINVAL, where, "after the document: %s",
			      parser->problem ? parser->problem : "not YAML");
		return false;
	}
	more = yaml_document_get_root_node(&next) != NULL;
	if (more) {
		snprintf(where, sizeof(where), "line %zu",
			 next.start_mark.line + 1);
		*ret = refuse(a, -EINVAL, where,
			      "a second document: the state is one document (put the parts in one)");
	}
	yaml_document_delete(&next);
	return !more;
}

static json_t *yaml_load(struct apply *a, const char *doc, size_t len, int *ret)
{
	struct ytree t = { 0 };
	yaml_parser_t parser;
	yaml_document_t ydoc;
	json_t *root = NULL;

	*ret = 0;
	if (!yaml_parser_initialize(&parser))
		return *ret = -ENOMEM, NULL;
	yaml_parser_set_input_string(&parser, (const unsigned char *)doc, len);
	if (!yaml_parser_load(&parser, &ydoc)) {
		char where[64];

		snprintf(where, sizeof(where), "line %zu column %zu",
			 parser.problem_mark.line + 1,
			 parser.problem_mark.column + 1);
		*ret = refuse(a, -EINVAL, where, "%s%s%s",
			      parser.problem ? parser.problem : "not YAML",
			      parser.context ? " " : "",
			      parser.context ? parser.context : "");
		yaml_parser_delete(&parser);
		return NULL;
	}
	t.doc = &ydoc;
	root = yaml_node_json(&t, yaml_document_get_root_node(&ydoc), 0);
	if (!root)
		*ret = refuse(a, -EINVAL, t.where[0] ? t.where : "$", "%s",
			      t.reason[0] ? t.reason : "an empty document");
	yaml_document_delete(&ydoc);
	if (root && !yaml_stream_ends(a, &parser, ret)) {
		json_decref(root);
		root = NULL;
	}
	yaml_parser_delete(&parser);
	return root;
}

/* An apply of doc (len bytes), read from a file of identity `id` (NULL:
 * not from a file). */
static int apply_doc(struct pi_node *n, const char *doc, size_t len,
		     uint32_t flags, const struct doc_id *id, pi_plan_fn fn,
		     void *ctx, struct pi_apply_error *err)
{
	struct apply a = {
		.n = n, .err = err,
		.skip_absent = flags & PI_APPLY_SKIP_ABSENT,
	};
	uint32_t *new_ids = NULL, nnew = 0;
	struct record rec;
	json_error_t jerr;
	json_t *root;
	int ret;

	if (record_map(n, flags, &rec)) {
		bool same_doc = rec.doc_len == len && !memcmp(rec.doc, doc, len);
		bool done = same_doc && record_state_same(n, &rec);
		bool retrust = done && !(flags & PI_APPLY_DRY_RUN) && id &&
			       id_settled(id) &&
			       !(rec.id.trusted && id_same(&rec.id, id));

		record_unmap(&rec);
		if (done) {
			/* unchanged; the record is made again when the file's
			 * identity can now be trusted, or is another's */
			if (retrust)
				record_write(n, doc, len, flags, id);
			return 0;
		}
	}
	if (flags & PI_APPLY_YAML) {
		root = yaml_load(&a, doc, len, &ret);
		if (!root)
			return ret ? ret : -EINVAL;
	} else {
		root = json_loadb(doc, len, JSON_REJECT_DUPLICATES, &jerr);
	}
	if (!root) {
		char where[64];

		snprintf(where, sizeof(where), "line %d column %d", jerr.line,
			 jerr.column);
		return refuse(&a, -EINVAL, where, "%s", jerr.text);
	}
	ret = read_node(&a, true);
	if (ret)
		pr_err("cannot read the node's state: %s", strerror(-ret));
	if (!ret)
		ret = parse_doc(&a, root);
	json_decref(root);
	if (!ret)
		ret = plan(&a, &new_ids, &nnew);
	if (!ret)
		ret = execute(&a, flags & PI_APPLY_DRY_RUN, fn, ctx, new_ids,
			      nnew);
	free(new_ids);
	apply_free(&a);
	if (ret >= 0 && !(flags & PI_APPLY_DRY_RUN))
		record_write(n, doc, len, flags, id);
	return ret;
}

static int apply_begin(struct pi_node *n, uint32_t flags,
		       struct pi_apply_error *err)
{
	if (err)
		memset(err, 0, sizeof(*err));
	/* a dry run only reads: a read-only handle will do */
	if (!(flags & PI_APPLY_DRY_RUN) && node_require_write(n, "apply"))
		return -EBADF;
	return 0;
}

/* A document of `size` bytes is not too large (-EINVAL, said, if it is). */
static int doc_size_ok(const char *what, unsigned long long size,
		       struct pi_apply_error *err)
{
	if (size <= PI_APPLY_DOC_MAX)
		return 0;
	pr_err("%s is %llu bytes: a state document is at most %u MiB", what,
	       size, PI_APPLY_DOC_MAX >> 20);
	if (err) {
		snprintf(err->where, sizeof(err->where), "%s", what);
		snprintf(err->reason, sizeof(err->reason),
			 "%llu bytes: a state document is at most %u MiB",
			 size, PI_APPLY_DOC_MAX >> 20);
	}
	return -EINVAL;
}

int pi_apply(struct pi_node *n, const char *doc, size_t len, uint32_t flags,
	     pi_plan_fn fn, void *ctx, struct pi_apply_error *err)
{
	int ret = apply_begin(n, flags, err);

	if (!ret)
		ret = doc_size_ok("the document", len, err);
	return ret ? ret : apply_doc(n, doc, len, flags, NULL, fn, ctx, err);
}

/* The whole of an open file of st.st_size bytes, into pages the kernel
 * fills at once (a fault per page is dear under a hypervisor); read, not
 * mapped: a file truncated under a mapping would kill the caller with
 * SIGBUS. NULL and errno when it cannot, or the file changed size. */
static char *read_doc(int fd, size_t size)
{
	char *buf = mmap(NULL, size + 1, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	size_t got = 0;

	if (buf == MAP_FAILED)
		return NULL;
	for (;;) {
		ssize_t r = read(fd, buf + got, size + 1 - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (r == 0 && got == size)
				return buf;
			if (r == 0)
				errno = EAGAIN;	/* it changed: try again */
			break;
		}
		got += r;
		if (got > size) {
			errno = EAGAIN;
			break;
		}
	}
	munmap(buf, size + 1);
	return NULL;
}

static struct doc_id doc_id_of(const struct stat *st)
{
	return (struct doc_id){
		.dev = st->st_dev, .ino = st->st_ino, .size = st->st_size,
		.mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 +
			    st->st_mtim.tv_nsec,
		.ctime_ns = (int64_t)st->st_ctim.tv_sec * 1000000000 +
			    st->st_ctim.tv_nsec,
	};
}

int pi_apply_file(struct pi_node *n, const char *path, uint32_t flags,
		  pi_plan_fn fn, void *ctx, struct pi_apply_error *err)
{
	struct doc_id id, after;
	struct record rec;
	struct stat st;
	char *doc = NULL;
	int fd, ret;

	ret = apply_begin(n, flags, err);
	if (ret)
		return ret;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		ret = -errno;
		goto cannot_read;
	}
	if (!S_ISREG(st.st_mode)) {
		ret = -EINVAL;
		goto cannot_read;
	}
	ret = doc_size_ok(path, st.st_size, err);
	if (ret) {
		close(fd);
		return ret;
	}
	id = doc_id_of(&st);
	/* the file the record names, settled and unchanged: the node is all
	 * that needs reading */
	if (record_map(n, flags, &rec)) {
		bool done = rec.id.trusted && id_same(&rec.id, &id) &&
			    rec.doc_len == id.size &&
			    record_state_same(n, &rec);

		record_unmap(&rec);
		if (done) {
			close(fd);
			return 0;
		}
	}
	/* The bytes read are the ones the identity names when the identity
	 * is the same after the read as before it; a file written meanwhile
	 * is read again (a write within the clock's tick, unseen here, is
	 * why a fresh identity is not trusted). */
	for (int tries = 0;; tries++) {
		if (tries == 3) {
			ret = -EAGAIN;
			goto cannot_read;
		}
		if (tries && (fstat(fd, &st) || lseek(fd, 0, SEEK_SET) < 0)) {
			ret = -errno;
			goto cannot_read;
		}
		id = doc_id_of(&st);
		if (st.st_size) {
			doc = read_doc(fd, st.st_size);
			if (!doc && errno != EAGAIN) {
				ret = -errno;
				goto cannot_read;
			}
		}
		if (fstat(fd, &st)) {
			ret = -errno;
			goto cannot_read;
		}
		after = doc_id_of(&st);
		if ((doc || !id.size) && id_same(&id, &after))
			break;
		if (doc)
			munmap(doc, id.size + 1);
		doc = NULL;
	}
	close(fd);
	ret = apply_doc(n, doc ? doc : "", id.size, flags, &id, fn, ctx, err);
	if (doc)
		munmap(doc, id.size + 1);
	return ret;
cannot_read:
	pr_err("cannot read '%s': %s", path, strerror(-ret));
	if (fd >= 0)
		close(fd);
	return ret;
}

/* ---- export ------------------------------------------------------------ */

static json_t *rule_json(const struct pi_rule *r, uint32_t dir)
{
	json_t *o = json_object();
	char buf[64];

	json_object_set_new(o, "action",
			    json_string(r->action == PI_DENY ? "deny" : "allow"));
	if (r->family)
		json_object_set_new(o, dir == PI_DIR_EGRESS ? "to" : "from",
				    json_string(pi_fmt_addr(r->family, &r->addr,
							    r->prefixlen, buf,
							    sizeof(buf))));
	if (r->proto)
		json_object_set_new(o, "proto", json_string(pi_proto_name(r->proto)));
	if (r->port_hi && r->port_lo == r->port_hi)
		json_object_set_new(o, "port", json_integer(r->port_lo));
	else if (r->port_hi) {
		snprintf(buf, sizeof(buf), "%u-%u", r->port_lo, r->port_hi);
		json_object_set_new(o, "port", json_string(buf));
	}
	return o;
}

static json_t *port_json(uint16_t lo, uint16_t hi)
{
	char buf[16];

	if (lo == hi)
		return json_integer(lo);
	snprintf(buf, sizeof(buf), "%u-%u", lo, hi);
	return json_string(buf);
}

static json_t *proxy_json(const struct apply *a, const struct apod *p, int k)
{
	const struct pi_proxy_rule *r = &p->prule_cur[k];
	json_t *o = json_object();
	char buf[64];

	json_object_set_new(o, "by", json_string(pname(a, p->proxy_cur[k])));
	json_object_set_new(o, "port", json_integer(r->port));
	if (r->proto)
		json_object_set_new(o, "match",
				    json_string(r->proto == IPPROTO_TCP ? "tcp" : "udp"));
	if (r->nports) {
		json_t *arr = json_array();

		for (int i = 0; i < r->nports && i < PI_PROXY_MAX_PORTS; i++)
			json_array_append_new(arr, port_json(r->dport_lo[i],
							     r->dport_hi[i]));
		json_object_set_new(o, "dports", arr);
	}
	if (r->dst_family)
		json_object_set_new(o, "dst",
				    json_string(pi_fmt_addr(r->dst_family, &r->dst,
							    r->dst_plen, buf,
							    sizeof(buf))));
	return o;
}

struct dump_ctx {
	pi_write_fn write;
	void *ctx;
};

static int dump_cb(const char *buf, size_t len, void *data)
{
	struct dump_ctx *d = data;

	return d->write(buf, len, d->ctx) ? -1 : 0;
}

int pi_export(struct pi_node *n, pi_write_fn write, void *ctx)
{
	struct apply a = { .n = n };
	json_t *root, *pods, *tos, *ct;
	struct dump_ctx d = { write, ctx };
	uint32_t to[PI_CT_TO_MAX];
	int err;

	err = read_node(&a, true);
	if (err) {
		pr_err("cannot read the node's state: %s", strerror(-err));
		apply_free(&a);
		return err;
	}
	root = json_object();
	pods = json_object();
	json_object_set_new(root, "apiVersion", json_string(PI_STATE_API_VERSION));
	json_object_set_new(root, "pods", pods);
	for (int i = 0; i < a.npods; i++) {
		const struct apod *p = &a.pods[i];
		json_t *o = json_object(), *grants = json_array();

		for (uint32_t dir = 0; dir < 2; dir++) {
			json_t *arr;

			if (!p->ncur[dir])
				continue;
			arr = json_array();
			for (uint32_t r = 0; r < p->ncur[dir]; r++)
				json_array_append_new(arr, rule_json(&p->cur[dir][r], dir));
			json_object_set_new(o, dir_names[dir], arr);
		}
		for (int g = 0; g < a.ngcur; g++) {
			const struct grant *gr = &a.gcur[g];
			json_t *e;

			/* a proxy's grant is written as the proxy rule, unless
			 * its path is not the one the rule brings */
			if (gr->injector != i ||
			    ((a.pods[gr->target].proxy_cur[0] == i ||
			      a.pods[gr->target].proxy_cur[1] == i) &&
			     gr->path == stored_path(&a, 0, gr->target)))
				continue;
			e = json_object();
			json_object_set_new(e, "as", json_string(pname(&a, gr->target)));
			json_object_set_new(e, "path",
					    json_string(gr->path == PI_PATH_FAST ?
							"fast" : "fallback"));
			json_array_append_new(grants, e);
		}
		if (json_array_size(grants))
			json_object_set_new(o, "inject", grants);
		else
			json_decref(grants);
		if (p->proxy_cur[0] >= 0)
			json_object_set_new(o, "proxy", proxy_json(&a, p, 0));
		if (p->proxy_cur[1] >= 0)
			json_object_set_new(o, "proxy_inbound",
					    proxy_json(&a, p, 1));
		json_object_set_new(pods, p->info.name, o);
	}
	ct = json_object();
	tos = json_object();
	pi_ct_timeouts(n, to);
	for (int k = 0; k < PI_CT_TO_MAX; k++)
		json_object_set_new(tos, timeout_names[k], json_integer(to[k]));
	json_object_set_new(ct, "timeouts", tos);
	json_object_set_new(root, "conntrack", ct);
	err = json_dump_callback(root, dump_cb, &d,
				 JSON_INDENT(2) | JSON_PRESERVE_ORDER) ? -EIO : 0;
	if (!err)
		err = write("\n", 1, ctx) ? -EIO : 0;
	json_decref(root);
	apply_free(&a);
	return err;
}
