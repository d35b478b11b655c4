/* SPDX-License-Identifier: GPL-2.0 */
/*
 * podinject proxy add|del|list: steer a pod's new connections to a proxy
 * pod's transparent socket, and make the proxy the pod's injector so that
 * its upstream connection, bound to the pod's address, passes the pod's
 * own egress datapath.
 *
 * Pieces, all undone by `proxy del`:
 *   - proxy_rules[POD]            what to capture and where to send it
 *   - inject_auth[PROXY, POD ip]  the proxy may inject as POD
 *   - head program on POD and on PROXY (host side, first in the chain)
 *   - pod_reply on POD's eth0 ingress (in POD's namespace)
 *   - proxy_assign on PROXY's eth0 ingress, and in PROXY's namespace the
 *     rule "what arrives on eth0 is local" (table PI_PROXY_TABLE)
 *   - proxy_lookup, PROXY's namespace's sk_lookup program, and the
 *     proxy's listeners in proxy_listeners (put there by proxy_assign)
 *
 * An inbound rule (PI_PROXY_INBOUND: connections to POD are captured and
 * terminated by PROXY) has the same pieces, its rule in
 * proxy_inbound_rules[POD] and POD's addresses in proxy_inbound_pods;
 * inject_auth[PROXY, POD ip] lets the proxy answer the clients as POD.
 * A pod may have a rule of each kind; a grant two rules share stays
 * while either does.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "inject.h"
#include "lib.h"
#include "nl.h"

#define PROXY_RULE_PRIO	100
#define PROXY_PORT_RANGE	"16384 32767"
#define LINUX_PORT_RANGE	"32768 60999"

static void pin_of(const struct inject_state *s, char *buf, size_t len,
		   const char *what, const struct pi_pod_info *pod)
{
	snprintf(buf, len, "%s/link_%s_%u", s->dir, what, pod->ifindex);
}

/* A clsact qdisc made on a pod's eth0 for podinject's hooks (clsact
 * nodes) is podinject's to remove with the last of them: a probe or a
 * proxy rule leaves the pod as it found it. One that was there stays, as
 * does one another program's filter came onto. The record is a directory
 * named by the pod's ifindex beside the hooks' pins (bpffs holds
 * directories, and an upgrade leaves what it does not stage in place). */
void pod_qdisc_mark_path(char *buf, size_t len, const char *inject_dir,
			 uint32_t pod_ifindex)
{
	snprintf(buf, len, "%s/qdisc_%u", inject_dir, pod_ifindex);
}

static void qdisc_mark_of(const struct inject_state *s, char *buf, size_t len,
			  const struct pi_pod_info *pod)
{
	pod_qdisc_mark_path(buf, len, s->dir, pod->ifindex);
}

/* The record of a device that is gone (or whose namespace is): a later
 * pod of its ifindex starts without it. */
static void pod_qdisc_forget(const struct inject_state *s,
			     const struct pi_pod_info *pod)
{
	char mark[PATH_MAX];

	qdisc_mark_of(s, mark, sizeof(mark), pod);
	rmdir(mark);
}

/* Whether a hook of ours other than `what` is on the pod's eth0 still. */
static bool other_pod_hook(const struct inject_state *s,
			   const struct pi_pod_info *pod, const char *what)
{
	static const char *const hooks[] = { "reply", "assign" };
	char path[PATH_MAX];

	for (size_t i = 0; i < sizeof(hooks) / sizeof(hooks[0]); i++) {
		if (!strcmp(hooks[i], what))
			continue;
		pin_of(s, path, sizeof(path), hooks[i], pod);
		if (!access(path, F_OK))
			return true;
	}
	return false;
}

/* Inside the pod's namespace, once our hook `what` is off: the qdisc we
 * made goes when none of our hooks and no one else's filter is left. */
static void pod_qdisc_release(const struct inject_state *s,
			      const struct pi_pod_info *pod, const char *what)
{
	char mark[PATH_MAX], dev[PI_POD_NAME_MAX + 16];

	qdisc_mark_of(s, mark, sizeof(mark), pod);
	if (access(mark, F_OK) || other_pod_hook(s, pod, what))
		return;
	snprintf(dev, sizeof(dev), "%s's eth0", pod->name);
	clsact_release(pod->peer_ifindex, dev);
	rmdir(mark);
}

/* The clsact priority of our hook `what` on the pod's eth0. Inside the
 * pod's namespace; `pin` (detaching) is the hook's record: an assign
 * filter of an earlier build runs at PI_PRIO_HEAD. */
static uint32_t pod_hook_prio(const struct pi_pod_info *pod, const char *what,
			      const char *pin)
{
	if (strcmp(what, "assign"))
		return PI_PRIO_HEAD;
	if (pin && !clsact_runs_pin(pod->peer_ifindex, PI_HOOK_INGRESS,
				    PI_PRIO_POD_ASSIGN, pin))
		return PI_PRIO_HEAD;
	return PI_PRIO_POD_ASSIGN;
}

/* Attaches prog at eth0's ingress inside the pod's namespace: the pod
 * itself needs no privilege for it. */
int attach_in_pod(const struct pi_node *n, const struct inject_state *s,
			 const struct pi_pod_info *pod, int prog, const char *what)
{
	enum pi_attach_mode mode = node_attach_mode(n);
	char path[PATH_MAX], mark[PATH_MAX];
	int saved, err;

	pin_of(s, path, sizeof(path), what, pod);
	if (!access(path, F_OK))
		return 0;
	err = pod_netns_enter(pod, &saved);
	if (err)
		return err;
	if (mode == PI_ATTACH_CLSACT) {
		int made = clsact_make(pod->peer_ifindex);

		qdisc_mark_of(s, mark, sizeof(mark), pod);
		err = made < 0 ? made : 0;
		if (made == 1 && mkdir(mark, 0700) && errno != EEXIST) {
			err = -errno;
			clsact_remove_if_empty(pod->peer_ifindex);
		}
	}
	if (!err)
		err = attach_prog(prog, pod->peer_ifindex, PI_HOOK_INGRESS,
				  mode, true, pod_hook_prio(pod, what, NULL),
				  path);
	if (err)
		pod_qdisc_release(s, pod, what);
	netns_restore(saved);
	return err;
}

void detach_in_pod(const struct pi_node *n, const struct inject_state *s,
			  const struct pi_pod_info *pod, const char *what)
{
	char path[PATH_MAX];
	int ns, saved;

	pin_of(s, path, sizeof(path), what, pod);
	if (access(path, F_OK))
		return;
	ns = pod_netns_open(pod);
	/* Let go of before the command returns: a pin's unlink alone
	 * leaves the hook on the device until the kernel's deferred work
	 * releases the link (a grace period later, tens of ms on a busy
	 * node), and whoever looks next (a user, the next probe's count
	 * of hooks) would find it still there. */
	if (ns >= 0 && !netns_enter(ns, &saved)) {
		enum pi_attach_mode mode = node_attach_mode(n);

		detach_prog_now(pod->peer_ifindex, PI_HOOK_INGRESS, mode,
				mode == PI_ATTACH_CLSACT ?
				pod_hook_prio(pod, what, path) : PI_PRIO_HEAD,
				path);
		unlink(path);
		pod_qdisc_release(s, pod, what);
		netns_restore(saved);
	}
	if (ns >= 0)
		close(ns);
	unlink(path);	/* even when the namespace is gone already */
	if (!other_pod_hook(s, pod, what))
		pod_qdisc_forget(s, pod);
}

/* proxy_lookup at the proxy's namespace, for the kernel's TIME_WAIT
 * takeover of a client's reused 4-tuple (bpf/inject.bpf.c). The pinned
 * link is the attachment: unpinned, it goes. */
static int lookup_attach(const struct inject_state *s,
			 const struct pi_pod_info *proxy)
{
	char path[PATH_MAX];
	int ns, link, err;

	pin_of(s, path, sizeof(path), "lookup", proxy);
	if (!access(path, F_OK))
		return 0;
	ns = pod_netns_open(proxy);
	if (ns < 0)
		return ns;
	link = bpf_link_create(s->progs[IP_PROXY_LOOKUP], ns, BPF_SK_LOOKUP,
			       NULL);
	err = link < 0 ? -errno : 0;
	close(ns);
	if (err)
		return err;
	err = bpf_obj_pin(link, path) ? -errno : 0;
	/* Pinned, the link outlives this fd; unpinned, closing it undoes
	 * the attachment. */
	close(link);
	return err;
}

static void lookup_detach(const struct inject_state *s,
			  const struct pi_pod_info *proxy)
{
	char path[PATH_MAX];

	pin_of(s, path, sizeof(path), "lookup", proxy);
	unlink(path);
}

/* The map holds a reference to each listener (the proxy's own sockets):
 * a proxy that serves no pod any more is let go of. */
static void forget_listeners(int map, uint32_t proxy_ifindex)
{
	struct pi_proxy_listener_key key, next, *prev = NULL;

	while (!bpf_map_get_next_key(map, prev, &next)) {
		if (next.proxy_ifindex == proxy_ifindex) {
			bpf_map_delete_elem(map, &next);
			prev = NULL;
			continue;
		}
		key = next;
		prev = &key;
	}
}

/* The record of the proxy pod's own ip_local_port_range, which `proxy add`
 * changes and the last `proxy del` puts back: a directory
 * range_IFINDEX_LO_HI beside the hooks' pins. */
static int range_record_find(const struct inject_state *s,
			     const struct pi_pod_info *proxy, char *path,
			     size_t len, unsigned int *lo, unsigned int *hi)
{
	char prefix[32];
	struct dirent *de;
	int found = 0;
	DIR *d;

	snprintf(prefix, sizeof(prefix), "range_%u_", proxy->ifindex);
	d = opendir(s->dir);
	if (!d)
		return 0;
	while (!found && (de = readdir(d))) {
		if (strncmp(de->d_name, prefix, strlen(prefix)) ||
		    sscanf(de->d_name + strlen(prefix), "%u_%u", lo, hi) != 2)
			continue;
		snprintf(path, len, "%s/%s", s->dir, de->d_name);
		found = 1;
	}
	closedir(d);
	return found;
}

/* Inside the proxy's namespace, before the first rule sets the proxy's
 * range: the pod's own, unless it is the proxy's already (a proxy of a
 * build before the record, whose del then puts Linux's default). */
static void range_record_make(const struct inject_state *s,
			      const struct pi_pod_info *proxy)
{
	char path[PATH_MAX], now[64];
	unsigned int lo, hi;

	if (range_record_find(s, proxy, path, sizeof(path), &lo, &hi) ||
	    sysctl_read("net/ipv4/ip_local_port_range", now, sizeof(now)) ||
	    sscanf(now, "%u %u", &lo, &hi) != 2)
		return;
	snprintf(now, sizeof(now), "%u %u", lo, hi);
	if (!strcmp(now, PROXY_PORT_RANGE))
		return;
	snprintf(path, sizeof(path), "%s/range_%u_%u_%u", s->dir,
		 proxy->ifindex, lo, hi);
	if (mkdir(path, 0700) && errno != EEXIST)
		pr_warn("cannot record the port range of '%s' (%s): proxy del will set Linux's default: %s",
			proxy->name, now, strerror(errno));
}

/* The range the last `proxy del` puts back, its record gone with it. */
static void range_record_take(const struct inject_state *s,
			      const struct pi_pod_info *proxy, char *range,
			      size_t len)
{
	char path[PATH_MAX];
	unsigned int lo, hi;

	snprintf(range, len, "%s", LINUX_PORT_RANGE);
	if (!range_record_find(s, proxy, path, sizeof(path), &lo, &hi))
		return;
	snprintf(range, len, "%u %u", lo, hi);
	rmdir(path);
}

static void range_record_forget(const struct inject_state *s,
				const struct pi_pod_info *gone)
{
	char path[PATH_MAX];
	unsigned int lo, hi;

	while (range_record_find(s, gone, path, sizeof(path), &lo, &hi) &&
	       !rmdir(path))
		;
}

/* In the proxy's namespace: whatever arrives on eth0 is local, so that a
 * socket given with bpf_sk_assign() receives packets for addresses that
 * are not the proxy's. */
static int proxy_routing(const struct inject_state *s,
			 const struct pi_pod_info *proxy, bool add)
{
	static const int families[] = { AF_INET, AF_INET6 };
	char range[32];
	int ns, saved, err = 0;

	ns = pod_netns_open(proxy);
	if (ns < 0)
		return ns;
	err = netns_enter(ns, &saved);
	close(ns);
	if (err)
		return err;
	/* The proxy's upstream connections and the client pod's own
	 * connections share the pod's address; ports from disjoint ranges
	 * keep their 4-tuples apart (the pod keeps Linux's default range,
	 * probes use PI_PROBE_PORT_LO..HI). The proxy pod's own range comes
	 * back with its last rule. */
	if (add)
		range_record_make(s, proxy);
	else
		range_record_take(s, proxy, range, sizeof(range));
	err = sysctl_write("net/ipv4/ip_local_port_range",
			   add ? PROXY_PORT_RANGE : range);
	for (int i = 0; i < 2; i++) {
		int e1 = nl_route_local_default(families[i], PI_PROXY_TABLE, 1,
						add);
		int e2 = nl_rule_iif(families[i], proxy->ifname, PI_PROXY_TABLE,
				     PROXY_RULE_PRIO, add);

		if (add && e1 && e1 != -EEXIST)
			err = e1;
		if (add && e2 && e2 != -EEXIST)
			err = err ? err : e2;
	}
	netns_restore(saved);
	return err;
}

int reply_hook_attach(const struct pi_node *n, const struct inject_state *s,
		      const struct pi_pod_info *pod)
{
	return attach_in_pod(n, s, pod, s->progs[IP_POD_REPLY], "reply");
}

static int rules_map(const struct inject_state *s, bool inbound)
{
	return s->maps[inbound ? IM_PROXY_INBOUND_RULES : IM_PROXY_RULES];
}

static bool has_rule(const struct inject_state *s, bool inbound,
		     uint32_t pod_ifindex, struct pi_dp_proxy_rule *r)
{
	struct pi_dp_proxy_rule tmp;

	return !bpf_map_lookup_elem(rules_map(s, inbound), &pod_ifindex,
				    r ? r : &tmp);
}

/* Whether a probe speaks for the pod now: an authorisation to inject as
 * the pod whose injector is no pod (injectors are pods or the probe's
 * device). Its answers come through the reply hook until it ends, and its
 * end releases the hook itself. */
static bool probed(const struct pi_node *n, const struct inject_state *s,
		   const struct pi_pod_info *pod)
{
	struct pi_inject_key key, next, *prev = NULL;
	struct pi_inject_target t;
	struct pi_pod_info other;

	while (!bpf_map_get_next_key(s->maps[IM_AUTH], prev, &next)) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(s->maps[IM_AUTH], &key, &t) ||
		    t.target_ifindex != pod->ifindex)
			continue;
		if (bpf_map_lookup_elem(n->maps[M_PODS], &key.injector_ifindex,
					&other) && errno == ENOENT)
			return true;
	}
	return false;
}

void reply_hook_release(const struct pi_node *n, const struct inject_state *s,
			const struct pi_pod_info *pod)
{
	if (has_rule(s, false, pod->ifindex, NULL) ||
	    has_rule(s, true, pod->ifindex, NULL) || probed(n, s, pod))
		return;
	detach_in_pod(n, s, pod, "reply");
}

void reply_hook_unpin(const struct inject_state *s,
		      const struct pi_pod_info *gone)
{
	char path[PATH_MAX];

	pin_of(s, path, sizeof(path), "reply", gone);
	unlink(path);
	pod_qdisc_forget(s, gone);
	range_record_forget(s, gone);
}

/* The rules the proxy has, of both kinds. */
static int proxy_serves(const struct inject_state *s, uint32_t proxy_ifindex)
{
	uint32_t key, next, *prev;
	struct pi_dp_proxy_rule r;
	int cnt = 0;

	for (int in = 0; in < 2; in++) {
		int map = rules_map(s, in);

		prev = NULL;
		while (!bpf_map_get_next_key(map, prev, &next)) {
			if (!bpf_map_lookup_elem(map, &next, &r) &&
			    r.proxy_ifindex == proxy_ifindex)
				cnt++;
			key = next;
			prev = &key;
		}
	}
	return cnt;
}

/* Drops every flow of the pod of one kind (inbound or not) from one flow
 * map. */
static void forget_flows(int map, uint32_t pod_ifindex, bool inbound)
{
	struct pi_flow_key key, next, *prev = NULL;
	struct pi_flow f;

	while (!bpf_map_get_next_key(map, prev, &next)) {
		if (!bpf_map_lookup_elem(map, &next, &f) &&
		    f.pod_ifindex == pod_ifindex &&
		    !(f.flags & PI_FLOW_INBOUND) == !inbound) {
			bpf_map_delete_elem(map, &next);
			prev = NULL;
			continue;
		}
		key = next;
		prev = &key;
	}
}

static void deauthorise(struct inject_state *s, const struct pi_pod_info *proxy,
			const struct pi_pod_info *pod)
{
	struct pi_inject_key k = { .injector_ifindex = proxy->ifindex };

	if (pod->flags & PI_POD_HAS_V4) {
		k.family = AF_INET;
		k.addr.a[0] = pod->ip4;
		bpf_map_delete_elem(s->maps[IM_AUTH], &k);
	}
	if (pod->flags & PI_POD_HAS_V6) {
		memset(&k.addr, 0, sizeof(k.addr));
		k.family = AF_INET6;
		memcpy(k.addr.a, pod->ip6, 16);
		bpf_map_delete_elem(s->maps[IM_AUTH], &k);
	}
}

/* The pod's addresses as protected by an inbound rule, or no more. */
static int inbound_pods_set(const struct inject_state *s,
			    const struct pi_pod_info *pod, bool add)
{
	struct pi_endpoint_key k[2];
	int nk = 0, err = 0;

	memset(k, 0, sizeof(k));
	if (pod->flags & PI_POD_HAS_V4) {
		k[nk].family = AF_INET;
		k[nk++].addr.a[0] = pod->ip4;
	}
	if (pod->flags & PI_POD_HAS_V6) {
		k[nk].family = AF_INET6;
		memcpy(k[nk++].addr.a, pod->ip6, 16);
	}
	for (int i = 0; i < nk; i++) {
		if (!add)
			bpf_map_delete_elem(s->maps[IM_PROXY_INBOUND_PODS], &k[i]);
		else if (bpf_map_update_elem(s->maps[IM_PROXY_INBOUND_PODS],
					     &k[i], &pod->ifindex, BPF_ANY))
			err = err ? err : -errno;
	}
	return err;
}

/* Takes a pod's rule of one kind away; `proxy` may be gone (NULL) when the
 * proxy pod itself is being deleted. */
static void unproxy(const struct pi_node *n, struct inject_state *s,
		    const struct pi_pod_info *proxy, const struct pi_pod_info *pod,
		    bool keep_auth, bool inbound)
{
	struct pi_dp_proxy_rule other;

	bpf_map_delete_elem(rules_map(s, inbound), &pod->ifindex);
	if (inbound)
		inbound_pods_set(s, pod, false);
	forget_flows(s->maps[IM_PROXY_FLOWS], pod->ifindex, inbound);
	forget_flows(s->maps[IM_PROXY_UPSTREAM], pod->ifindex, inbound);
	reply_hook_release(n, s, pod);
	head_release(n, s, pod, inbound ? PI_HEAD_INBOUND : PI_HEAD_PROXY);
	if (!proxy)
		return;
	/* the grant is the other rule's as well when it has the same proxy */
	if (!keep_auth && !(has_rule(s, !inbound, pod->ifindex, &other) &&
			    other.proxy_ifindex == proxy->ifindex))
		deauthorise(s, proxy, pod);
	if (!inject_auth_count(s, proxy->ifindex))
		head_release(n, s, proxy, PI_HEAD_INJECT);
	else if (head_attached(s, proxy))
		head_roles_refresh(s, proxy->ifindex);	/* maybe no proxy now */
	if (!proxy_serves(s, proxy->ifindex)) {
		detach_in_pod(n, s, proxy, "assign");
		lookup_detach(s, proxy);
		forget_listeners(s->maps[IM_PROXY_LISTENERS], proxy->ifindex);
		proxy_routing(s, proxy, false);
	}
}

static void forget_rules(const struct pi_node *n, struct inject_state *s,
			 const struct pi_pod_info *gone, bool inbound)
{
	uint32_t key, next, *prev = NULL;
	int map = rules_map(s, inbound);
	struct pi_dp_proxy_rule r;
	struct pi_pod_info proxy, pod;

	while (!bpf_map_get_next_key(map, prev, &next)) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(map, &key, &r))
			continue;
		if (key != gone->ifindex && r.proxy_ifindex != gone->ifindex)
			continue;
		if (pod_by_ifindex(n, key, &pod))
			continue;
		if (pod_by_ifindex(n, r.proxy_ifindex, &proxy)) {
			unproxy(n, s, NULL, &pod, false, inbound);
		} else {
			unproxy(n, s, &proxy, &pod, false, inbound);
		}
		prev = NULL;	/* the map changed under the walk */
	}
}

void proxy_forget_pod(const struct pi_node *n, struct inject_state *s,
		      const struct pi_pod_info *gone)
{
	forget_rules(n, s, gone, false);
	forget_rules(n, s, gone, true);
}

static int two_pods(struct pi_node *n, const char *proxy_name,
		    const char *pod_name, struct pi_pod_info *proxy,
		    struct pi_pod_info *pod)
{
	int err = pod_lookup(n, proxy_name, proxy);

	if (!err)
		err = pod_lookup(n, pod_name, pod);
	if (err)
		return err;
	if (proxy->ifindex == pod->ifindex) {
		pr_err("a pod cannot be its own proxy");
		return -EINVAL;
	}
	return 0;
}

/* What a proxy rule of the API and the proxy_rules map's name alike, once
 * for both ways; their port lists are copied whole. */
#define PROXY_RULE_FIELDS(src)						\
	.port = (src)->port, .proto = (src)->proto,			\
	.nports = (src)->nports, .dst_family = (src)->dst_family,	\
	.dst_plen = (src)->dst_plen
_Static_assert(sizeof(((struct pi_proxy_rule *)0)->dport_lo) ==
	       sizeof(((struct pi_dp_proxy_rule *)0)->dport_lo) &&
	       sizeof(((struct pi_proxy_rule *)0)->dport_hi) ==
	       sizeof(((struct pi_dp_proxy_rule *)0)->dport_hi),
	       "the API's port lists are the map's");

/* A proxy rule of the API, as the proxy_rules map holds it: with the two
 * pods' devices and addresses the datapath hands packets between. */
static struct pi_dp_proxy_rule proxy_rule_to_dp(const struct pi_proxy_rule *r,
						const struct pi_pod_info *proxy,
						const struct pi_pod_info *pod)
{
	struct pi_dp_proxy_rule d = {
		PROXY_RULE_FIELDS(r),
		.proxy_ifindex = proxy->ifindex,
		.dst = addr_to_dp(&r->dst),
	};

	memcpy(d.dport_lo, r->dport_lo, sizeof(d.dport_lo));
	memcpy(d.dport_hi, r->dport_hi, sizeof(d.dport_hi));
	memcpy(d.proxy_pod_mac, proxy->pod_mac, 6);
	memcpy(d.proxy_host_mac, proxy->host_mac, 6);
	memcpy(d.pod_mac, pod->pod_mac, 6);
	memcpy(d.pod_host_mac, pod->host_mac, 6);
	return d;
}

/* And back, with the counters the datapath keeps in it. */
void proxy_rule_from_dp(struct pi_proxy_rule *r,
			const struct pi_dp_proxy_rule *d)
{
	*r = (struct pi_proxy_rule){
		PROXY_RULE_FIELDS(d),
		.dst = addr_from_dp(&d->dst),
		.nflows = d->nflows,
		.nupstream = d->nupstream,
		.limit_drops = d->limit_drops,
	};
	memcpy(r->dport_lo, d->dport_lo, sizeof(r->dport_lo));
	memcpy(r->dport_hi, d->dport_hi, sizeof(r->dport_hi));
}

int pi_proxy_add(struct pi_node *n, const char *proxy_name,
		 const char *pod_name, const struct pi_proxy_rule *spec)
{
	bool inbound = spec->flags & PI_PROXY_INBOUND;
	struct pi_dp_proxy_rule rule, old;
	struct pi_pod_info proxy, pod;
	struct inject_state s;
	struct pi_inject_key added[2], had_k[2];
	struct pi_inject_target had_t[2];
	struct inject_undo u = { .added = added, .had_k = had_k,
				 .had_t = had_t };
	int created, err;
	bool ruled = false;

	if (node_require_write(n, "proxy add"))
		return -EBADF;
	err = two_pods(n, proxy_name, pod_name, &proxy, &pod);
	if (err)
		return err;
	if (!spec->port) {
		pr_err("a proxy needs its listening port");
		return -EINVAL;
	}
	if (spec->flags & ~PI_PROXY_INBOUND) {
		pr_err("unknown proxy rule flags 0x%x", spec->flags);
		return -EINVAL;
	}
	/* Inbound capture takes TCP connections to the pod's own addresses:
	 * no other protocol, no destination to choose. */
	if (inbound && (spec->proto == IPPROTO_UDP || spec->dst_family)) {
		pr_err("an inbound rule captures TCP connections to the pod: no udp, no dst");
		return -EINVAL;
	}
	/* Capture and the reply bounce use bpf_redirect_peer() with flags
	 * 0, which netkit programs cannot call (tc ingress only). */
	if ((proxy.flags | pod.flags) & PI_POD_NETKIT) {
		pr_err("pod '%s' is a netkit pod: proxying is built for veth pods only",
		       proxy.flags & PI_POD_NETKIT ? proxy.name : pod.name);
		return -EINVAL;
	}
	created = inject_open(n, &s, true);
	if (created < 0) {
		pr_err("cannot load the injection program: %s",
		       strerror(-created));
		return created;
	}
	if (has_rule(&s, inbound, pod.ifindex, &old)) {
		pr_err(inbound ? "pod '%s' is protected by an inbound proxy already" :
				 "pod '%s' is proxied already", pod.name);
		err = -EEXIST;
		goto out;
	}

	rule = proxy_rule_to_dp(spec, &proxy, &pod);
	if (inbound)
		rule.proto = IPPROTO_TCP;

	/* A grant the proxy has for the pod already keeps its path (proxies
	 * are veth pods, whose stored paths are the API's): the rule brings
	 * one on the kernel's path only where there is none. */
	err = inject_authorise(n, &s, &proxy, &pod, 1,
			       inject_granted_path(&s, &proxy, &pod), &u);
	if (!err)
		err = bpf_map_update_elem(rules_map(&s, inbound), &pod.ifindex,
					  &rule, BPF_NOEXIST) ? -errno : 0;
	ruled = !err;
	if (!err && inbound)
		err = inbound_pods_set(&s, &pod, true);
	/* the proxy's head, if it has one already, takes its answers to
	 * the pod as soon as the pod's head captures */
	if (!err && head_attached(&s, &proxy))
		err = head_roles_refresh(&s, proxy.ifindex);
	if (!err)
		err = head_acquire(n, &s, &pod, inbound ? PI_HEAD_INBOUND :
							  PI_HEAD_PROXY);
	if (!err)
		err = head_acquire(n, &s, &proxy, PI_HEAD_INJECT);
	if (!err)
		err = reply_hook_attach(n, &s, &pod);
	if (!err)
		err = attach_in_pod(n, &s, &proxy, s.progs[IP_PROXY_ASSIGN],
				    "assign");
	if (!err)
		err = lookup_attach(&s, &proxy);
	if (!err)
		err = proxy_routing(&s, &proxy, true);
	if (err)
		pr_err("cannot set up proxying of '%s' by '%s': %s", pod.name,
		       proxy.name, strerror(-err));
out:
	if (err) {
		for (int i = 0; i < u.nadded; i++)
			bpf_map_delete_elem(s.maps[IM_AUTH], &u.added[i]);
		if (ruled)
			unproxy(n, &s, &proxy, &pod, true, inbound);
	}
	inject_close(&s);
	if (err && created == 1)
		rm_tree(s.dir);
	return err;
}

static int proxy_del(struct pi_node *n, const char *proxy_name,
		     const char *pod_name, bool inbound)
{
	struct pi_pod_info proxy, pod;
	struct pi_dp_proxy_rule r;
	struct inject_state s;
	int err;

	if (node_require_write(n, "proxy del"))
		return -EBADF;
	err = two_pods(n, proxy_name, pod_name, &proxy, &pod);
	if (err)
		return err;
	if (inject_open(n, &s, false) ||
	    !has_rule(&s, inbound, pod.ifindex, &r) ||
	    r.proxy_ifindex != proxy.ifindex) {
		pr_err(inbound ? "pod '%s' is not protected by '%s' (inbound)" :
				 "pod '%s' is not proxied by '%s'",
		       pod.name, proxy.name);
		inject_close(&s);
		return -ESRCH;
	}
	unproxy(n, &s, &proxy, &pod, false, inbound);
	inject_close(&s);
	return 0;
}

int pi_proxy_del(struct pi_node *n, const char *proxy_name,
		 const char *pod_name)
{
	return proxy_del(n, proxy_name, pod_name, false);
}

int pi_proxy_del_inbound(struct pi_node *n, const char *proxy_name,
			 const char *pod_name)
{
	return proxy_del(n, proxy_name, pod_name, true);
}

int pi_proxy_list(struct pi_node *n, struct pi_proxy_info **out)
{
	uint32_t key, next, *prev = NULL;
	struct pi_proxy_info *all;
	struct inject_state s;
	int cnt = 0;

	*out = NULL;
	all = calloc(2 * PI_DP_MAX_PODS + 1, sizeof(*all));
	if (!all)
		return -ENOMEM;
	if (!inject_open(n, &s, false)) {
		for (int in = 0; in < 2; in++) {
			int map = rules_map(&s, in);

			prev = NULL;
			while (cnt < 2 * PI_DP_MAX_PODS &&
			       !bpf_map_get_next_key(map, prev, &next)) {
				struct pi_proxy_info *p = &all[cnt];
				struct pi_dp_proxy_rule r;

				key = next;
				prev = &key;
				if (bpf_map_lookup_elem(map, &key, &r))
					continue;
				proxy_rule_from_dp(&p->rule, &r);
				if (in)
					p->rule.flags = PI_PROXY_INBOUND;
				pod_name_by_ifindex(n, key, p->pod,
						    sizeof(p->pod));
				pod_name_by_ifindex(n, r.proxy_ifindex,
						    p->proxy, sizeof(p->proxy));
				cnt++;
			}
		}
		inject_close(&s);
	}
	*out = all;
	return cnt;
}

static void proxy_feature_forget(struct pi_node *n, const struct pi_pod_info *pod)
{
	struct inject_state s;

	if (inject_open(n, &s, false))
		return;
	proxy_forget_pod(n, &s, pod);
	inject_close(&s);
}

const struct pi_feature proxy_feature = {
	.name = "proxy",
	.leave_pod = proxy_feature_forget,
};
