/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Pods. A pod that podinject makes is a network namespace named after it
 * (or a runtime's namespace), a device pair (pod side "eth0", node side
 * "pi-NAME" unless named otherwise), /32 and /128 addresses, a default
 * route through a link-local gateway whose neighbour entry is the node
 * side's MAC, and the pod's programs on the node side. A pod it adopts is
 * a namespace and a device pair another tool made: podinject adds its
 * records and programs and, on removal, takes away only those.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "attach.h"
#include "inject.h"
#include "kernel_features.h"
#include "lib.h"
#include "percpu.h"
#include "nl.h"

static int endpoint_exists(const struct pi_node *n, int family,
			   const struct pi_addr *a)
{
	struct pi_endpoint_key key = { .family = family,
				       .addr = addr_to_dp(a) };
	struct pi_endpoint ep;

	return !bpf_map_lookup_elem(n->maps[M_ENDPOINTS], &key, &ep);
}

static int mark_used(uint32_t key, const void *val, void *used)
{
	const struct pi_pod *pod = val;

	if (pod->id < PI_DP_MAX_PODS)
		((bool *)used)[pod->id] = true;
	return 0;
}

/* Called with the node's lock held, so no other command takes the same id
 * between this scan and the pod's record. */
static int free_pod_id(const struct pi_node *n, uint32_t *id)
{
	bool used[PI_DP_MAX_PODS] = { false };
	int err = map_scan_u32(n->maps[M_PODS], sizeof(struct pi_pod),
			       mark_used, used);

	if (err) {
		pods_unreadable(n, err);
		return err;
	}
	for (uint32_t i = 0; i < PI_DP_MAX_PODS; i++) {
		if (!used[i]) {
			*id = i;
			return 0;
		}
	}
	return -ENOSPC;
}

/* Pins are named by the host-side ifindex: a pod's name may hold '/'. */
static void pod_link_pin(const struct pi_node *n, const struct pi_pod_info *pod,
			 const char *hook, char *buf, size_t len)
{
	node_pin_path(n, buf, len, "link_pod_%u_%s", pod->ifindex, hook);
}

static enum pi_hook egress_hook(const struct pi_pod_info *pod)
{
	return pod->flags & PI_POD_NETKIT ? PI_HOOK_NETKIT_PEER :
					    PI_HOOK_INGRESS;
}

static enum pi_hook ingress_hook(const struct pi_pod_info *pod)
{
	return pod->flags & PI_POD_NETKIT ? PI_HOOK_NETKIT_PRIMARY :
					    PI_HOOK_EGRESS;
}

/* Inside the pod's namespace: addresses, eth0 up, default routes through
 * the link-local gateways, whose neighbour entries are the node side's MAC
 * so the pod never has to resolve them. */
static int setup_pod_side(struct pi_pod_info *pod)
{
	bool has4 = pod->flags & PI_POD_HAS_V4, has6 = pod->flags & PI_POD_HAS_V6;
	struct in_addr gw4;
	struct in6_addr gw6;
	int ifindex, err;

	inet_pton(AF_INET, GW4, &gw4);
	inet_pton(AF_INET6, GW6, &gw6);
	ifindex = nl_link_index(pod->ifname);
	if (ifindex < 0)
		return ifindex;
	pod->peer_ifindex = ifindex;
	err = nl_link_get_mac(ifindex, pod->pod_mac);
	if (!err && has4)
		err = nl_addr_add(ifindex, AF_INET, &pod->ip4, 32);
	if (!err && has6)
		err = nl_addr_add(ifindex, AF_INET6, pod->ip6, 128);
	if (!err)
		err = nl_link_set_up(ifindex);
	if (!err && has4)
		err = nl_neigh_add(ifindex, AF_INET, &gw4, pod->host_mac);
	if (!err && has4)
		err = nl_route_add(AF_INET, (uint8_t[4]){ 0 }, 0, &gw4,
				   ifindex);
	if (!err && has6)
		err = nl_neigh_add(ifindex, AF_INET6, &gw6, pod->host_mac);
	if (!err && has6)
		err = nl_route_add(AF_INET6, (uint8_t[16]){ 0 }, 0, &gw6,
				   ifindex);
	return err;
}

/* Inside the node's namespace: the host route and neighbour for each pod
 * address, so the node's own stack and the uplink reach the pod too. */
static int setup_node_side(struct pi_pod_info *pod)
{
	bool has4 = pod->flags & PI_POD_HAS_V4, has6 = pod->flags & PI_POD_HAS_V6;
	char ra[64 + IFNAMSIZ];
	int err;

	/* A pod is never the node's router (the datapath drops its RAs). */
	snprintf(ra, sizeof(ra), "net/ipv6/conf/%s/accept_ra", pod->hostdev);
	err = sysctl_write(ra, "0");
	if (err == -ENOENT)	/* no IPv6 on the node, no RA either */
		err = 0;
	if (!err)
		err = nl_link_set_up(pod->ifindex);

	if (!err && has4)
		err = nl_route_add(AF_INET, &pod->ip4, 32, NULL,
				   pod->ifindex);
	if (!err && has4 && !(pod->flags & PI_POD_NETKIT))
		err = nl_neigh_add(pod->ifindex, AF_INET, &pod->ip4,
				   pod->pod_mac);
	if (!err && has6)
		err = nl_route_add(AF_INET6, pod->ip6, 128, NULL,
				   pod->ifindex);
	if (!err && has6 && !(pod->flags & PI_POD_NETKIT))
		err = nl_neigh_add(pod->ifindex, AF_INET6, pod->ip6,
				   pod->pod_mac);
	return err;
}

static int add_endpoints(const struct pi_node *n, const struct pi_pod_info *pod)
{
	struct pi_endpoint ep = {
		.kind = pod_has_datapath(pod) ? PI_EP_POD : PI_EP_FOREIGN_POD,
		.pod_ifindex = pod->ifindex,
		.pod_id = pod->id,
	};
	struct pi_endpoint_key key = {};
	int err = 0;

	memcpy(ep.pod_mac, pod->pod_mac, 6);
	memcpy(ep.host_mac, pod->host_mac, 6);
	if (pod->flags & PI_POD_HAS_V4) {
		key.family = AF_INET;
		key.addr.a[0] = pod->ip4;
		if (bpf_map_update_elem(n->maps[M_ENDPOINTS], &key, &ep,
					BPF_NOEXIST))
			err = -errno;
	}
	if (!err && (pod->flags & PI_POD_HAS_V6)) {
		memset(&key, 0, sizeof(key));
		key.family = AF_INET6;
		memcpy(key.addr.a, pod->ip6, 16);
		if (bpf_map_update_elem(n->maps[M_ENDPOINTS], &key, &ep,
					BPF_NOEXIST)) {
			/* Undo only our own: the v6 key may be another's. */
			err = -errno;
			memset(&key, 0, sizeof(key));
			key.family = AF_INET;
			key.addr.a[0] = pod->ip4;
			if (pod->flags & PI_POD_HAS_V4)
				bpf_map_delete_elem(n->maps[M_ENDPOINTS], &key);
		}
	}
	return err;
}

static void del_endpoints(const struct pi_node *n, const struct pi_pod_info *pod)
{
	struct pi_endpoint_key key = {};

	if (pod->flags & PI_POD_HAS_V4) {
		key.family = AF_INET;
		key.addr.a[0] = pod->ip4;
		bpf_map_delete_elem(n->maps[M_ENDPOINTS], &key);
	}
	if (pod->flags & PI_POD_HAS_V6) {
		memset(&key, 0, sizeof(key));
		key.family = AF_INET6;
		memcpy(key.addr.a, pod->ip6, 16);
		bpf_map_delete_elem(n->maps[M_ENDPOINTS], &key);
	}
}

static void reset_pod_stats(const struct pi_node *n, uint32_t id)
{
	percpu_zero(n->maps[M_POD_STATS], &id, sizeof(struct pi_dp_pod_stats));
}

/* The reference datapath's programs go behind whatever is on the pod's
 * hooks: they route, and are the pod's datapath. On a pod another plugin
 * routes, while it has a policy, they check and pass on, so they go in
 * front of that plugin's programs (which may redirect, and end the chain
 * there): first of all, except behind podinject's own head program on
 * the egress hook, which must see an injector's packets before any
 * source check does. clsact has no such order: there they take the
 * datapath's priority either way. */
static int attach_pod(const struct pi_node *n, const struct pi_pod_info *pod)
{
	enum pi_attach_mode mode = node_attach_mode(n);
	bool netkit = pod->flags & PI_POD_NETKIT;
	int egress = n->progs[netkit ? P_POD_EGRESS_NETKIT : P_POD_EGRESS];
	bool front = !pod_has_datapath(pod);
	char path[PATH_MAX], head[PATH_MAX];
	int err;

	if (netkit)
		mode = PI_ATTACH_TCX;
	pod_link_pin(n, pod, "egress", path, sizeof(path));
	if (front) {
		node_pin_path(n, head, sizeof(head), "inject/link_%u",
			      pod->ifindex);
		err = attach_prog_after(egress, pod->ifindex, egress_hook(pod),
					mode, access(head, F_OK) ? NULL : head,
					PI_PRIO_DATAPATH, path);
	} else {
		err = attach_prog(egress, pod->ifindex, egress_hook(pod), mode,
				  false, PI_PRIO_DATAPATH, path);
	}
	if (err)
		return err;
	pod_link_pin(n, pod, "ingress", path, sizeof(path));
	err = attach_prog(n->progs[netkit ? P_POD_INGRESS_NETKIT :
					     P_POD_INGRESS], pod->ifindex,
			  ingress_hook(pod), mode, front, PI_PRIO_DATAPATH,
			  path);
	if (err) {
		pod_link_pin(n, pod, "egress", path, sizeof(path));
		detach_prog(pod->ifindex, egress_hook(pod), mode,
			    PI_PRIO_DATAPATH, path);
	}
	return err;
}

/* Whether the pod's programs are on its device: always with the reference
 * datapath; on a pod another plugin routes, while it has a policy (their
 * pins exist exactly while they are attached, attach_prog). */
bool pod_programs_on(const struct pi_node *n, const struct pi_pod_info *pod)
{
	char path[PATH_MAX];

	if (pod_has_datapath(pod))
		return true;
	pod_link_pin(n, pod, "egress", path, sizeof(path));
	if (!access(path, F_OK))
		return true;
	pod_link_pin(n, pod, "ingress", path, sizeof(path));
	return !access(path, F_OK);
}

/* `now`: the hooks let go of before it returns (detach_prog_now), for a
 * caller that looks at them next. */
static void detach_pod(const struct pi_node *n, const struct pi_pod_info *pod,
		       bool now)
{
	enum pi_attach_mode mode = node_attach_mode(n);
	char path[PATH_MAX];
	int (*detach)(int, enum pi_hook, enum pi_attach_mode, uint32_t,
		      const char *) = now ? detach_prog_now : detach_prog;

	if (!pod_programs_on(n, pod))
		return;
	if (pod->flags & PI_POD_NETKIT)
		mode = PI_ATTACH_TCX;
	pod_link_pin(n, pod, "egress", path, sizeof(path));
	detach(pod->ifindex, egress_hook(pod), mode, PI_PRIO_DATAPATH, path);
	pod_link_pin(n, pod, "ingress", path, sizeof(path));
	detach(pod->ifindex, ingress_hook(pod), mode, PI_PRIO_DATAPATH, path);
}

int pod_policy_programs(const struct pi_node *n, const struct pi_pod_info *pod,
			bool on)
{
	int saved, err;

	if (pod_has_datapath(pod) || on == pod_programs_on(n, pod))
		return 0;
	err = node_enter(n, &saved);
	if (err)
		return err;
	if (on) {
		/* the record says PI_POD_PASS_ON before a program reads it
		 * (pod_store derives it; an older build's record lacks it) */
		err = pod_store(n, pod, BPF_EXIST);
		if (!err)
			err = attach_pod(n, pod);
		if (err)
			pr_err("cannot attach podinject's programs to %s for the policy of pod '%s': %s",
			       pod->hostdev, pod->name, strerror(-err));
	} else {
		/* A netkit pod's guard follows the one program left at its
		 * peer hook below: ours must be gone by then, or the guard
		 * sees two and drops every injected packet (t_netkit
		 * guardpol_injected_after, in the lab now and then). */
		detach_pod(n, pod, pod->flags & PI_POD_NETKIT);
	}
	netns_restore(saved);
	/* A netkit pod's guard runs the one program at its peer hook that
	 * is not the injection's: it must follow (a guard still running the
	 * CNI's program alone would let injected packets past the policy
	 * now in front of it). */
	if (pod->flags & PI_POD_NETKIT)
		inject_guard_follow(n, pod);
	return err;
}

/* Each feature's reset_pod: a pod starts with nothing that a former pod
 * of its id or ifindex left. */
static int features_reset(struct pi_node *n, const struct pi_pod_info *pod)
{
	for (int i = 0; pi_features[i]; i++) {
		int err = pi_features[i]->reset_pod ?
				  pi_features[i]->reset_pod(n, pod) : 0;

		if (err)
			return err;
	}
	return 0;
}

/* Each feature's enter_pod; when one fails, those that entered before it
 * leave again, last first. */
static int features_enter(struct pi_node *n, struct pi_pod_info *pod,
			  int pod_ns)
{
	for (int i = 0; pi_features[i]; i++) {
		int err = pi_features[i]->enter_pod ?
				  pi_features[i]->enter_pod(n, pod, pod_ns) : 0;

		if (!err)
			continue;
		while (i-- > 0)
			if (pi_features[i]->enter_pod && pi_features[i]->leave_pod)
				pi_features[i]->leave_pod(n, pod);
		return err;
	}
	return 0;
}

/* Inside the node's namespace. On a clsact node every hook podinject puts
 * on a pod's host-side device needs the device's clsact qdisc. On a device
 * of ours it goes with the device; on an adopted pod's (the CNI's, which
 * stays) one podinject made is recorded in the pod's meta flags, made
 * here when the device has none, and removed with the pod when no filter
 * is left on it. netkit pods take tcx links whatever the node's mode. */
static int adopted_qdisc_claim(const struct pi_node *n, struct pi_pod_info *pod)
{
	int made;

	if ((pod->meta_flags & PI_META_OWNS_DEV) ||
	    (pod->flags & PI_POD_NETKIT) ||
	    node_attach_mode(n) != PI_ATTACH_CLSACT)
		return 0;
	made = clsact_make(pod->ifindex);
	if (made < 0) {
		pr_err("cannot make the clsact qdisc of %s: %s", pod->hostdev,
		       strerror(-made));
		return made;
	}
	if (made)
		pod->meta_flags |= PI_META_OWNS_QDISC;
	return 0;
}

static void adopted_qdisc_release(const struct pi_pod_info *pod)
{
	if (!(pod->meta_flags & PI_META_OWNS_QDISC))
		return;
	clsact_release(pod->ifindex, pod->hostdev);
}

/* What makes a pod a pod of the node, once its devices exist: the
 * features' reset, its records, its endpoints, the datapath's programs,
 * then the features' own parts (the XDP ACL on an XDP node). In that
 * order: no program sees the pod before its state is clean, and the pod's
 * device never lacks the datapath's checks while a feature's are added.
 * Undoes its own steps when one fails. */
static int pod_enter_datapath(struct pi_node *n, struct pi_pod_info *pod,
			      int pod_ns)
{
	int err;

	reset_pod_stats(n, pod->id);
	err = features_reset(n, pod);
	if (err)
		return err;
	err = adopted_qdisc_claim(n, pod);
	if (err)
		return err;
	err = pod_store(n, pod, BPF_NOEXIST);
	if (err) {
		pr_err("cannot record pod '%s': %s", pod->name, strerror(-err));
		adopted_qdisc_release(pod);
		return err;
	}
	err = add_endpoints(n, pod);
	if (err) {
		pr_err("cannot record the addresses of pod '%s': %s", pod->name,
		      strerror(-err));
		pod_forget(n, pod);
		return err;
	}
	if (pod_has_datapath(pod)) {
		err = attach_pod(n, pod);
		if (err) {
			pr_err("cannot attach the datapath to %s: %s",
			       pod->hostdev, strerror(-err));
			goto fail_records;
		}
	}
	err = features_enter(n, pod, pod_ns);
	if (err) {
		detach_pod(n, pod, false);
		goto fail_records;
	}
	return 0;
fail_records:
	del_endpoints(n, pod);
	pod_forget(n, pod);
	adopted_qdisc_release(pod);
	return err;
}

/* Checks that hold for any pod joining the node, made here or adopted;
 * run with the node's lock held, so they still hold when it joins. */
static int pod_admissible(const struct pi_node *n, struct pi_pod_info *pod)
{
	struct pi_addr a = {};
	struct pi_pod_info other;
	char buf[64];
	int err;

	err = pod_find(n, pod->name, &other);
	if (!err) {
		pr_err("pod '%s' exists already", pod->name);
		return -EEXIST;
	}
	if (err != -ENOENT)
		return err;
	if (pod->flags & PI_POD_HAS_V4) {
		a.a[0] = pod->ip4;
		if (endpoint_exists(n, AF_INET, &a)) {
			pr_err("address %s is in use on node '%s'",
			      pi_fmt_addr(AF_INET, &a, -1, buf, sizeof(buf)),
			      n->name);
			return -EADDRINUSE;
		}
	}
	if (pod->flags & PI_POD_HAS_V6) {
		memcpy(a.a, pod->ip6, 16);
		if (endpoint_exists(n, AF_INET6, &a)) {
			pr_err("address %s is in use on node '%s'",
			      pi_fmt_addr(AF_INET6, &a, -1, buf, sizeof(buf)),
			      n->name);
			return -EADDRINUSE;
		}
	}
	err = free_pod_id(n, &pod->id);
	if (err == -ENOSPC)
		pr_err("node '%s' has no room for another pod (max %d)", n->name,
		      PI_DP_MAX_PODS);
	return err;
}

/* The pod-side device of host device `hostdev` (ifindex host_ifindex) in
 * the namespace we are in, which the caller found its peer's: `ifname`
 * when given, else its peer. Either way it must be that peer (`peer`, in
 * this namespace) and its own peer host_ifindex, so a wrong --ifname or
 * --dev is refused, not half adopted. */
static int find_pod_side(const char *ifname, int host_ifindex, int peer,
			 struct pi_pod_info *pod)
{
	int ifindex = ifname ? nl_link_index(ifname) : peer;

	if (ifindex <= 0 || ifindex != peer ||
	    nl_link_peer(ifindex) != host_ifindex)
		return -ENODEV;
	pod->peer_ifindex = ifindex;
	if (nl_link_name(ifindex, pod->ifname))
		return -ENODEV;
	return nl_link_get_mac(ifindex, pod->pod_mac);
}

/* The pod's first global IPv4 and IPv6 addresses on its interface, where
 * the command line gave none. Called inside the pod's namespace. */
static int read_pod_addresses(struct pi_pod_info *pod, bool want4, bool want6)
{
	struct ifaddrs *all, *ifa;

	if (getifaddrs(&all))
		return -errno;
	for (ifa = all; ifa; ifa = ifa->ifa_next) {
		if (!ifa->ifa_addr || strcmp(ifa->ifa_name, pod->ifname))
			continue;
		if (want4 && ifa->ifa_addr->sa_family == AF_INET &&
		    !(pod->flags & PI_POD_HAS_V4)) {
			pod->ip4 = ((struct sockaddr_in *)ifa->ifa_addr)->sin_addr.s_addr;
			pod->flags |= PI_POD_HAS_V4;
		} else if (want6 && ifa->ifa_addr->sa_family == AF_INET6 &&
			   !(pod->flags & PI_POD_HAS_V6)) {
			struct in6_addr *a6 =
				&((struct sockaddr_in6 *)ifa->ifa_addr)->sin6_addr;

			if (IN6_IS_ADDR_LINKLOCAL(a6))
				continue;
			memcpy(pod->ip6, a6, 16);
			pod->flags |= PI_POD_HAS_V6;
		}
	}
	freeifaddrs(all);
	return 0;
}

static void copy_name(char *dst, size_t len, const char *src)
{
	snprintf(dst, len, "%s", src ? src : "");
}

/* The spec of a pod podinject makes: its name (a device name's part when
 * the device or namespace is ours to name), an address, names that fit. */
static int pod_spec_check(const struct pi_pod_spec *spec)
{
	if (!spec->netns || !spec->hostdev) {
		if (!pi_valid_name(spec->name, POD_NAME_MAX)) {
			pr_err("invalid pod name '%s': use 1-%d of a-z, 0-9, '-'",
			       spec->name ? spec->name : "", POD_NAME_MAX);
			return -EINVAL;
		}
	} else if (!pi_valid_pod_name(spec->name)) {
		pr_err("invalid pod name '%s'", spec->name ? spec->name : "");
		return -EINVAL;
	}
	if (!spec->has4 && !spec->has6) {
		pr_err("pod '%s' needs an IPv4 and/or an IPv6 address", spec->name);
		return -EINVAL;
	}
	if ((spec->ifname && (!*spec->ifname || strlen(spec->ifname) >= IFNAMSIZ)) ||
	    (spec->hostdev && (!*spec->hostdev || strlen(spec->hostdev) >= IFNAMSIZ)) ||
	    (spec->netns && strlen(spec->netns) >= PI_NETNS_MAX) ||
	    (spec->attach_id && strlen(spec->attach_id) >= PI_ATTACH_ID_MAX)) {
		pr_err("pod '%s': a device, namespace or attach id name is too long",
		       spec->name);
		return -EINVAL;
	}
	return 0;
}

static void pod_from_spec(const struct pi_pod_spec *spec, struct pi_pod_info *pod)
{
	bool own_netns = !spec->netns;

	copy_name(pod->name, sizeof(pod->name), spec->name);
	copy_name(pod->netns, sizeof(pod->netns), own_netns ? spec->name : spec->netns);
	copy_name(pod->ifname, sizeof(pod->ifname), spec->ifname ? spec->ifname : "eth0");
	if (spec->hostdev)
		copy_name(pod->hostdev, sizeof(pod->hostdev), spec->hostdev);
	else
		snprintf(pod->hostdev, sizeof(pod->hostdev), POD_DEV_PREFIX "%s",
			 spec->name);
	copy_name(pod->attach_id, sizeof(pod->attach_id), spec->attach_id);
	pod->meta_flags = PI_META_OWNS_DEV | (own_netns ? PI_META_OWNS_NETNS : 0);
	pod->flags = (spec->has4 ? PI_POD_HAS_V4 : 0) |
		     (spec->has6 ? PI_POD_HAS_V6 : 0) |
		     (spec->netkit ? PI_POD_NETKIT : 0);
	pod->ip4 = spec->ip4.a[0];
	memcpy(pod->ip6, spec->ip6.a, 16);
}

/* The pod's own namespace, when the spec names none: never one that
 * exists, so that removing the pod removes only what it made. */
static int make_pod_netns(const char *name)
{
	int err;

	if (netns_exists(name)) {
		pr_err("a network namespace named '%s' exists already", name);
		return -EEXIST;
	}
	err = netns_create(name);
	if (err)
		pr_err("cannot create namespace '%s': %s", name, strerror(-err));
	return err;
}

/* Inside the node's namespace: the device pair, its host side here and its
 * pod side in pod_ns. Sets pod->ifindex. */
static int make_pod_devices(const struct pi_node *n, struct pi_pod_info *pod,
			    bool netkit, int pod_ns)
{
	int err;

	if (nl_link_index(pod->hostdev) > 0) {
		pr_err("device '%s' exists already on node '%s'", pod->hostdev,
		       n->name);
		/* A name clash found only now is the node's state, not a
		 * usage error of the caller's: it was free when admitted. */
		return -ENOTUNIQ;
	}
	err = netkit ? nl_netkit_create(pod->hostdev, pod->ifname, pod_ns) :
		       nl_veth_create(pod->hostdev, pod->ifname, pod_ns);
	if (err) {
		if (err == -EOPNOTSUPP && netkit)
			pr_err("this kernel has no netkit (see 'podinject features')");
		else
			pr_err("cannot create %s pair for '%s': %s",
			       netkit ? "netkit" : "veth", pod->name,
			       strerror(-err));
		return err;
	}
	pod->ifindex = nl_link_index(pod->hostdev);
	return 0;
}

/* Both ends of the pair configured and passing traffic; called inside the
 * node's namespace. */
static int configure_pod(struct pi_pod_info *pod, int pod_ns)
{
	int saved, err = nl_link_get_mac(pod->ifindex, pod->host_mac);

	if (!err) {
		err = netns_enter(pod_ns, &saved);
		if (!err) {
			err = setup_pod_side(pod);
			netns_restore(saved);
		}
	}
	if (!err)
		err = setup_node_side(pod);
	/* Both ends up is not yet both ends passing traffic; a pod that
	 * sends at once would lose its first packets. */
	if (!err)
		err = nl_link_wait_running(pod->ifindex, NL_READY_TIMEOUT_MS);
	if (!err) {
		err = netns_enter(pod_ns, &saved);
		if (!err) {
			err = nl_link_wait_running(pod->peer_ifindex, NL_READY_TIMEOUT_MS);
			netns_restore(saved);
		}
	}
	if (err)
		pr_err("cannot configure pod '%s': %s", pod->name, strerror(-err));
	return err;
}

int pi_pod_add(struct pi_node *n, const struct pi_pod_spec *spec,
	       struct pi_pod_info *out)
{
	struct pi_pod_info pod = {};
	int pod_ns = -1, saved = -1, err;
	bool made_ns = false, made_dev = false;

	if (node_require_write(n, "pod add"))
		return -EBADF;
	err = pod_spec_check(spec);
	if (err)
		return err;
	pod_from_spec(spec, &pod);
	err = pod_admissible(n, &pod);
	if (err)
		return err;
	if (!spec->netns) {
		err = make_pod_netns(pod.netns);
		if (err)
			return err;
		made_ns = true;
	}
	pod_ns = netns_open_any(pod.netns);
	if (pod_ns < 0) {
		err = pod_ns;
		pr_err("no network namespace '%s': %s", pod.netns, strerror(-err));
		if (err == -ENOENT)
			err = -ENXIO;
		goto out;
	}
	err = node_enter(n, &saved);
	if (err) {
		pr_err("cannot enter the namespace of node '%s'", n->name);
		goto out;
	}
	err = make_pod_devices(n, &pod, spec->netkit, pod_ns);
	if (err)
		goto out;
	made_dev = true;
	err = configure_pod(&pod, pod_ns);
	if (!err)
		err = pod_enter_datapath(n, &pod, pod_ns);
	if (!err && out)
		*out = pod;
out:
	if (err && made_dev && pod.ifindex > 0)
		nl_link_del(pod.ifindex);
	if (saved >= 0)
		netns_restore(saved);
	if (pod_ns >= 0)
		close(pod_ns);
	if (err && made_ns)
		netns_delete(pod.netns);
	return err;
}

static int adopt_spec_check(const struct pi_adopt_spec *spec)
{
	if (!pi_valid_pod_name(spec->name)) {
		pr_err("invalid pod name '%s': use 1-%d of A-Z, a-z, 0-9, '-', '.', '_', '/'",
		       spec->name ? spec->name : "", PI_POD_NAME_MAX);
		return -EINVAL;
	}
	if (!spec->netns || !*spec->netns || strlen(spec->netns) >= PI_NETNS_MAX) {
		pr_err("pod '%s' needs a namespace (a name or a path under %d characters)",
		       spec->name, PI_NETNS_MAX);
		return -EINVAL;
	}
	if (!spec->hostdev || !*spec->hostdev || strlen(spec->hostdev) >= IFNAMSIZ) {
		pr_err("pod '%s' needs its host-side device", spec->name);
		return -EINVAL;
	}
	if (spec->ifname && (!*spec->ifname || strlen(spec->ifname) >= IFNAMSIZ)) {
		pr_err("invalid interface name '%s'", spec->ifname);
		return -EINVAL;
	}
	if (spec->attach_id && strlen(spec->attach_id) >= PI_ATTACH_ID_MAX) {
		pr_err("attach id is longer than %d characters",
		       PI_ATTACH_ID_MAX - 1);
		return -EINVAL;
	}
	return 0;
}

/* Inside the node's namespace: the pair another tool made, read into
 * `pod` (its host side here, its pod side and addresses in pod_ns), with
 * the spec's addresses over those it has. */
static int read_adopted(const struct pi_node *n, const struct pi_adopt_spec *spec,
			struct pi_pod_info *pod, int pod_ns)
{
	char kind[16] = "";
	int saved, peer, err;

	err = nl_link_index(spec->hostdev);
	if (err <= 0 || nl_link_kind(err, kind) ||
	    (strcmp(kind, "veth") && strcmp(kind, "netkit"))) {
		pr_err(err <= 0 ? "no device '%s' on node '%s'" :
		       "device '%s' on node '%s' is not a veth or netkit device",
		       spec->hostdev, n->name);
		return -ENXIO;
	}
	pod->ifindex = err;
	if (!strcmp(kind, "netkit"))
		pod->flags |= PI_POD_NETKIT;
	/* Its peer's ifindex names a device only in the peer's namespace:
	 * one of that number in `pod_ns` is not the peer unless the peer is
	 * there (another namespace's pod would be adopted with this device,
	 * its addresses given to whoever is behind it). */
	peer = nl_link_peer_in(pod->ifindex, pod_ns);
	if (peer == -EXDEV) {
		pr_err("device '%s' on node '%s' has its peer in another namespace than '%s'",
		       spec->hostdev, n->name, spec->netns);
		return -ENXIO;
	}
	err = nl_link_get_mac(pod->ifindex, pod->host_mac);
	if (err == -ENODATA && (pod->flags & PI_POD_NETKIT))
		err = 0;
	if (!err)
		err = netns_enter(pod_ns, &saved);
	if (err) {
		pr_err("cannot read device '%s': %s", spec->hostdev,
		       strerror(-err));
		return err;
	}
	err = find_pod_side(spec->ifname, pod->ifindex, peer, pod);
	if (err == -ENODATA && (pod->flags & PI_POD_NETKIT))
		err = 0;
	if (!err && !spec->only_given)
		err = read_pod_addresses(pod, !spec->has4, !spec->has6);
	netns_restore(saved);
	if (err == -ENODEV) {
		pr_err("%s in namespace '%s' is not the peer of '%s'",
		       spec->ifname ? spec->ifname : "no device",
		       spec->netns, spec->hostdev);
		return -ENXIO;
	}
	if (err) {
		pr_err("cannot read the pod side of '%s': %s",
		       spec->hostdev, strerror(-err));
		return err;
	}
	if (spec->has4) {
		pod->ip4 = spec->ip4.a[0];
		pod->flags |= PI_POD_HAS_V4;
	}
	if (spec->has6) {
		memcpy(pod->ip6, spec->ip6.a, 16);
		pod->flags |= PI_POD_HAS_V6;
	}
	if (!(pod->flags & (PI_POD_HAS_V4 | PI_POD_HAS_V6))) {
		pr_err("%s in namespace '%s' has no address; give one",
		       pod->ifname, spec->netns);
		return -EINVAL;
	}
	return 0;
}

int pi_pod_adopt(struct pi_node *n, const struct pi_adopt_spec *spec,
		 struct pi_pod_info *out)
{
	struct pi_pod_info pod = {}, other;
	int pod_ns, saved = -1, err;

	if (node_require_write(n, "pod adopt"))
		return -EBADF;
	err = adopt_spec_check(spec);
	if (err)
		return err;
	copy_name(pod.name, sizeof(pod.name), spec->name);
	copy_name(pod.netns, sizeof(pod.netns), spec->netns);
	copy_name(pod.hostdev, sizeof(pod.hostdev), spec->hostdev);
	copy_name(pod.attach_id, sizeof(pod.attach_id), spec->attach_id);
	/* neither namespace nor devices are ours */
	pod.meta_flags = spec->no_datapath ? PI_META_NO_DATAPATH : 0;
	pod_ns = netns_open_any(spec->netns);
	if (pod_ns < 0) {
		pr_err("no network namespace '%s': %s", spec->netns,
		       strerror(-pod_ns));
		return -ENXIO;
	}
	err = node_enter(n, &saved);
	if (err) {
		pr_err("cannot enter the namespace of node '%s'", n->name);
		goto out;
	}
	err = read_adopted(n, spec, &pod, pod_ns);
	if (!err && !pod_by_ifindex(n, pod.ifindex, &other)) {
		pr_err("device '%s' is pod '%s' of node '%s' already",
		       spec->hostdev, other.name, n->name);
		err = -EEXIST;
	}
	if (!err)
		err = pod_admissible(n, &pod);
	if (!err)
		err = pod_enter_datapath(n, &pod, pod_ns);
	if (!err && out)
		*out = pod;
	netns_restore(saved);
out:
	close(pod_ns);
	return err;
}

int pod_remove(struct pi_node *n, const struct pi_pod_info *pod)
{
	bool own_dev = pod->meta_flags & PI_META_OWNS_DEV;
	bool own_netns = pod->meta_flags & PI_META_OWNS_NETNS;
	int saved, err, first = 0;

	/* ifindexes, and clsact filters with them, are the node's. */
	err = node_enter(n, &saved);
	if (err)
		return err;
	/* A device of ours goes first: with it go its programs, all at
	 * once, and the pod is never on a device without its checks. */
	if (own_dev) {
		err = nl_link_del(pod->ifindex);
		if (err && err != -ENODEV)
			first = err;
	}
	for (int i = 0; pi_features[i]; i++)
		if (pi_features[i]->leave_pod)
			pi_features[i]->leave_pod(n, pod);
	detach_pod(n, pod, false);
	del_endpoints(n, pod);
	pod_forget(n, pod);
	adopted_qdisc_release(pod);
	netns_restore(saved);
	if (own_netns) {
		err = netns_delete(pod->netns);
		if (err && err != -ENOENT && !first)
			first = err;
	}
	return first;
}

int pi_pod_del(struct pi_node *n, const char *name)
{
	struct pi_pod_info pod;
	int err = node_require_write(n, "pod del");

	if (!err)
		err = pod_lookup(n, name, &pod);
	if (err)
		return err;
	err = pod_remove(n, &pod);
	if (err)
		pr_err("pod '%s' removed with errors: %s", name, strerror(-err));
	return err;
}

int pi_pod_get(struct pi_node *n, const char *name, struct pi_pod_info *out)
{
	return pod_lookup(n, name, out);
}

int pi_pod_get_by_attach_id(struct pi_node *n, const char *id,
			    struct pi_pod_info *out)
{
	int err;

	if (!id || !*id)
		return -EINVAL;
	err = pod_find_attach(n, id, out);
	return err == -ENOENT ? -ESRCH : err;
}

struct list_ctx {
	struct pi_pod_info *all;
	int cnt;
};

static int list_cb(const struct pi_node *n, const struct pi_pod_info *pod,
		   void *c)
{
	struct list_ctx *ctx = c;

	ctx->all[ctx->cnt++] = *pod;
	return 0;
}

int pi_pod_list(struct pi_node *n, struct pi_pod_info **pods)
{
	struct list_ctx ctx = { .all = calloc(PI_DP_MAX_PODS, sizeof(*ctx.all)) };
	int err;

	*pods = NULL;
	if (!ctx.all)
		return -ENOMEM;
	err = pod_for_each(n, list_cb, &ctx);
	if (err < 0) {
		free(ctx.all);
		return err;
	}
	*pods = ctx.all;
	return ctx.cnt;
}

int pi_pod_counters(struct pi_node *n, const struct pi_pod_info *pod,
		    struct pi_pod_stats *out)
{
	return pod_stats_sum(n, pod->id, out);
}

/* clsact: whether the filter at the node's priority and handle on the
 * pod's device runs the program `fd` (the pin's). A filter goes with its
 * device, or with `tc filter del`, and leaves the pin behind. */
static bool filter_runs(const struct pi_node *n, const struct pi_pod_info *pod,
			enum pi_hook hook, int fd)
{
	DECLARE_LIBBPF_OPTS(bpf_tc_hook, tc_hook, .ifindex = pod->ifindex,
			    .attach_point = hook == PI_HOOK_INGRESS ?
					    BPF_TC_INGRESS : BPF_TC_EGRESS);
	DECLARE_LIBBPF_OPTS(bpf_tc_opts, q, .handle = 1,
			    .priority = PI_PRIO_DATAPATH);
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);
	int saved, err;

	if (bpf_obj_get_info_by_fd(fd, &info, &len) || node_enter(n, &saved))
		return false;
	err = bpf_tc_query(&tc_hook, &q);
	netns_restore(saved);
	return !err && q.prog_id == info.id;
}

/* Each program the pod must have: its link pin (tcx) or program pin
 * (clsact) exists while it is attached; the link must still be on the
 * pod's device (tcx, netkit), the filter there run the pinned program
 * (clsact). */
int pi_pod_check(struct pi_node *n, const struct pi_pod_info *pod)
{
	static const char *const hooks[] = { "egress", "ingress" };
	struct bpf_link_info info = {};
	bool wanted;
	__u32 len = sizeof(info);
	char path[PATH_MAX];
	int fd, err = 0;

	/* the features bring their state up to date (a netkit guard) */
	if (node_require_write(n, "pod check"))
		return -EBADF;
	wanted = pod_has_datapath(pod) || policy_pod_has_rules(n, pod->id);
	for (int i = 0; i < 2 && wanted; i++) {
		pod_link_pin(n, pod, hooks[i], path, sizeof(path));
		fd = bpf_obj_get(path);
		if (fd < 0) {
			pr_err("pod '%s': its %s program is not attached",
			       pod->name, hooks[i]);
			err = -ENOLINK;
			continue;
		}
		memset(&info, 0, sizeof(info));
		len = sizeof(info);
		if ((node_attach_mode(n) == PI_ATTACH_TCX ||
		     (pod->flags & PI_POD_NETKIT)) &&
		    (bpf_obj_get_info_by_fd(fd, &info, &len) ||
		     /* tcx and netkit links report their ifindex where
		      * xdp links do; Debian's uapi headers predate them. */
		     info.xdp.ifindex != pod->ifindex)) {
			pr_err("pod '%s': its %s program's link is no longer on %s",
			       pod->name, hooks[i], pod->hostdev);
			err = -ENOLINK;
		} else if (node_attach_mode(n) == PI_ATTACH_CLSACT &&
			   !(pod->flags & PI_POD_NETKIT) &&
			   !filter_runs(n, pod, i ? ingress_hook(pod) :
						    egress_hook(pod), fd)) {
			pr_err("pod '%s': its %s program's filter is no longer on %s",
			       pod->name, hooks[i], pod->hostdev);
			err = -ENOLINK;
		}
		close(fd);
	}
	for (int i = 0; pi_features[i]; i++) {
		int ferr = pi_features[i]->check_pod ?
				   pi_features[i]->check_pod(n, pod) : 0;

		if (ferr && !err)
			err = ferr;
	}
	return err;
}
