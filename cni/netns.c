/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The pod's device pair as the kernel has it: CNI_IFNAME inside CNI_NETNS
 * names its peer's ifindex (IFLA_LINK), and that device, here, must name
 * it back. Names in prevResult are only a cross-check (Cilium's
 * generic-veth chaining trusts the peer index, not the names). In main
 * mode, where podinject made the pod's side, also what CHECK finds there:
 * the interface up, the pod's addresses on it, the default routes.
 *
 * Read here rather than through lib/nl.c: the library's archive exports
 * only pi_* symbols, and a device's peer, kind and name are not part of
 * its API.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/neighbour.h>
#include <linux/rtnetlink.h>
#include <libmnl/libmnl.h>
#include "cni.h"

struct link_attrs {
	int ifindex;
	unsigned int flags;	/* IFF_* */
	int link;		/* IFLA_LINK: the peer's ifindex */
	bool has_link;
	bool has_link_netnsid;	/* the peer is in another namespace */
	char name[IFNAMSIZ];
	char kind[16];
};

static int parse_linkinfo(const struct nlattr *attr, void *data)
{
	struct link_attrs *la = data;

	if (mnl_attr_get_type(attr) == IFLA_INFO_KIND)
		snprintf(la->kind, sizeof(la->kind), "%s",
			 mnl_attr_get_str(attr));
	return MNL_CB_OK;
}

static int parse_attr(const struct nlattr *attr, void *data)
{
	struct link_attrs *la = data;

	switch (mnl_attr_get_type(attr)) {
	case IFLA_IFNAME:
		snprintf(la->name, sizeof(la->name), "%s",
			 mnl_attr_get_str(attr));
		break;
	case IFLA_LINK:
		la->link = mnl_attr_get_u32(attr);
		la->has_link = true;
		break;
	case IFLA_LINK_NETNSID:
		la->has_link_netnsid = true;
		break;
	case IFLA_LINKINFO:
		mnl_attr_parse_nested(attr, parse_linkinfo, la);
		break;
	}
	return MNL_CB_OK;
}

static int link_cb(const struct nlmsghdr *nlh, void *data)
{
	struct ifinfomsg *ifm = mnl_nlmsg_get_payload(nlh);
	struct link_attrs *la = data;

	la->ifindex = ifm->ifi_index;
	la->flags = ifm->ifi_flags;
	mnl_attr_parse(nlh, sizeof(*ifm), parse_attr, la);
	/* The kernel leaves IFLA_LINK out when the peer's ifindex is the
	 * device's own, which two ends in two namespaces may well have (both
	 * 2 in a runtime's fresh namespace and a new sandbox's). */
	if (!la->has_link && la->has_link_netnsid) {
		la->link = la->ifindex;
		la->has_link = true;
	}
	return MNL_CB_OK;
}

/* Sends the request in buf (its seq set here) on a socket of its own and
 * runs cb on the reply: the one message, or each of a dump's until its
 * end. Returns 0 or -errno (the kernel's, or the socket's). */
static int nl_ask(char *buf, size_t size, mnl_cb_t cb, void *data)
{
	struct nlmsghdr *nlh = (struct nlmsghdr *)buf;
	bool dump = nlh->nlmsg_flags & NLM_F_DUMP;
	unsigned int seq = time(NULL), portid;
	struct mnl_socket *nl;
	int ret, err = 0;

	nl = mnl_socket_open(NETLINK_ROUTE);
	if (!nl)
		return -errno;
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		err = -errno;
		goto out;
	}
	portid = mnl_socket_get_portid(nl);
	nlh->nlmsg_seq = seq;
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0) {
		err = -errno;
		goto out;
	}
	do {
		ret = mnl_socket_recvfrom(nl, buf, size);
		if (ret < 0) {
			err = -errno;
			break;
		}
		ret = mnl_cb_run(buf, ret, seq, portid, cb, data);
		if (ret < 0)
			err = -errno;
	} while (ret > 0 && dump);
out:
	mnl_socket_close(nl);
	return err;
}

/* RTM_GETLINK of one device, by name or index, in the current namespace. */
static int get_link(const char *name, int ifindex, struct link_attrs *la)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh;
	struct ifinfomsg *ifm;
	int err;

	memset(la, 0, sizeof(*la));
	nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = RTM_GETLINK;
	nlh->nlmsg_flags = NLM_F_REQUEST;
	ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	ifm->ifi_index = ifindex;
	if (name)
		mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	err = nl_ask(buf, sizeof(buf), link_cb, la);
	return err == -ENODEV ? -ENOENT : err;
}

/* Runs fn(arg) inside the network namespace at path netns and comes
 * back: fn's result, -ENOENT no such path, -ENXIO not a network
 * namespace. */
static int in_netns(const char *netns, int (*fn)(void *), void *arg)
{
	int self, ns, err;

	self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (self < 0)
		return -errno;
	ns = open(netns, O_RDONLY | O_CLOEXEC);
	if (ns < 0) {
		err = -errno;
		close(self);
		return err;
	}
	if (setns(ns, CLONE_NEWNET)) {
		err = -errno;
		close(ns);
		close(self);
		return err == -EINVAL ? -ENXIO : err;
	}
	err = fn(arg);
	if (setns(self, CLONE_NEWNET) && !err)
		err = -errno;
	close(ns);
	close(self);
	return err;
}

struct pod_link_req {
	const char *ifname;
	struct link_attrs *la;
};

static int pod_link(void *arg)
{
	struct pod_link_req *r = arg;

	return get_link(r->ifname, 0, r->la);
}

/* -ENOENT no such namespace or device, -ENXIO not a pair whose other end
 * is here. */
static int find_pair(const char *netns, const char *ifname,
		     struct cni_pair *pair)
{
	struct link_attrs pod, host;
	struct pod_link_req req = { .ifname = ifname, .la = &pod };
	int err;

	memset(pair, 0, sizeof(*pair));
	err = in_netns(netns, pod_link, &req);
	if (err)
		return err;
	if (!pod.has_link || pod.link == 0) {
		cni_log(PI_LOG_ERROR, "%s in %s has no peer device", ifname,
			netns);
		return -ENXIO;
	}
	err = get_link(NULL, pod.link, &host);
	if (err == -ENOENT) {
		cni_log(PI_LOG_ERROR, "%s in %s names peer ifindex %d, which is not in the host's namespace",
			ifname, netns, pod.link);
		return -ENXIO;
	}
	if (err)
		return err;
	if (strcmp(host.kind, "veth") && strcmp(host.kind, "netkit")) {
		cni_log(PI_LOG_ERROR, "peer %s of %s is a %s device, not veth or netkit",
			host.name, ifname, *host.kind ? host.kind : "plain");
		return -ENXIO;
	}
	/* The same ifindex may exist in both namespaces: the pair is only
	 * confirmed when each end names the other. */
	if (!host.has_link || host.link != pod.ifindex) {
		cni_log(PI_LOG_ERROR, "device %s (ifindex %d) here is not the peer of %s in %s",
			host.name, host.ifindex, ifname, netns);
		return -ENXIO;
	}
	pair->pod_ifindex = pod.ifindex;
	pair->host_ifindex = host.ifindex;
	snprintf(pair->host_name, sizeof(pair->host_name), "%s", host.name);
	return 0;
}

int cni_pod_pair(const struct cni_env *env, struct cni_pair *pair,
		 struct cni_err *e)
{
	int err = find_pair(env->netns, env->ifname, pair);

	if (err == -ENOENT)
		return cni_fail(e, CNI_ERR_DEVICE, "pod's namespace or interface not found",
				"%s in %s", env->ifname, env->netns);
	if (err == -ENXIO)
		return cni_fail(e, CNI_ERR_DEVICE, "pod's interface is not one end of a veth or netkit pair whose other end is on the host",
				"%s in %s", env->ifname, env->netns);
	if (err)
		return cni_fail(e, CNI_ERR_IO, "cannot read the pod's interface",
				"%s in %s: %s", env->ifname, env->netns,
				strerror(-err));
	return 0;
}

/* ---- main mode's pod side, as CHECK finds it ---------------------------- */

struct pod_side {
	const struct pi_pod_info *pod;
	int ifindex;		/* the pod's interface, in its namespace */
	struct link_attrs link;
	bool addr4, addr6;	/* the pod's /32 and /128 on it */
	bool route4, route6;	/* default routes through the gateways on it */
	bool neigh4, neigh6;	/* the gateways' entries: the node side's MAC */
	struct in_addr gw4;
	struct in6_addr gw6;
};

/* A dump of one kind (RTM_GETADDR, RTM_GETROUTE, RTM_GETNEIGH) of one family, each
 * message through cb. */
static int nl_dump(uint16_t type, uint8_t family, mnl_cb_t cb, void *data)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh;

	nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	/* ifaddrmsg, rtmsg and ndmsg all begin with the family */
	if (type == RTM_GETADDR)
		((struct ifaddrmsg *)mnl_nlmsg_put_extra_header(nlh,
			sizeof(struct ifaddrmsg)))->ifa_family = family;
	else if (type == RTM_GETROUTE)
		((struct rtmsg *)mnl_nlmsg_put_extra_header(nlh,
			sizeof(struct rtmsg)))->rtm_family = family;
	else
		((struct ndmsg *)mnl_nlmsg_put_extra_header(nlh,
			sizeof(struct ndmsg)))->ndm_family = family;
	return nl_ask(buf, sizeof(buf), cb, data);
}

/* A message's attributes by type, up to max (the libmnl idiom): tb[type]
 * the attribute, or NULL. */
struct attr_table {
	const struct nlattr **tb;
	int max;
};

static int attr_table_cb(const struct nlattr *attr, void *data)
{
	struct attr_table *t = data;
	int type = mnl_attr_get_type(attr);

	if (type <= t->max)
		t->tb[type] = attr;
	return MNL_CB_OK;
}

static void attrs_of(const struct nlmsghdr *nlh, size_t hdrlen,
		     const struct nlattr **tb, int max)
{
	struct attr_table t = { .tb = tb, .max = max };

	memset(tb, 0, (max + 1) * sizeof(*tb));
	mnl_attr_parse(nlh, hdrlen, attr_table_cb, &t);
}

static const void *payload_of(const struct nlattr *attr, size_t len)
{
	return attr && mnl_attr_get_payload_len(attr) >= len ?
	       mnl_attr_get_payload(attr) : NULL;
}

static int addr_cb(const struct nlmsghdr *nlh, void *data)
{
	struct ifaddrmsg *ifa = mnl_nlmsg_get_payload(nlh);
	struct pod_side *ps = data;
	const struct nlattr *tb[IFA_MAX + 1];
	const void *a;
	uint32_t flags = ifa->ifa_flags;

	if ((int)ifa->ifa_index != ps->ifindex)
		return MNL_CB_OK;
	attrs_of(nlh, sizeof(*ifa), tb, IFA_MAX);
	if (tb[IFA_FLAGS])
		flags = mnl_attr_get_u32(tb[IFA_FLAGS]);
	/* an address duplicate address detection refused is not held */
	if (flags & IFA_F_DADFAILED)
		return MNL_CB_OK;
	if (ifa->ifa_family == AF_INET && ifa->ifa_prefixlen == 32) {
		a = payload_of(tb[IFA_LOCAL] ? tb[IFA_LOCAL] : tb[IFA_ADDRESS], 4);
		if (a && !memcmp(a, &ps->pod->ip4, 4))
			ps->addr4 = true;
	}
	if (ifa->ifa_family == AF_INET6 && ifa->ifa_prefixlen == 128) {
		a = payload_of(tb[IFA_ADDRESS], 16);
		if (a && !memcmp(a, ps->pod->ip6, 16))
			ps->addr6 = true;
	}
	return MNL_CB_OK;
}

static int route_cb(const struct nlmsghdr *nlh, void *data)
{
	struct rtmsg *rtm = mnl_nlmsg_get_payload(nlh);
	struct pod_side *ps = data;
	const struct nlattr *tb[RTA_MAX + 1];
	uint32_t table = rtm->rtm_table;
	const void *gw;

	if (rtm->rtm_dst_len || rtm->rtm_type != RTN_UNICAST)
		return MNL_CB_OK;
	attrs_of(nlh, sizeof(*rtm), tb, RTA_MAX);
	if (tb[RTA_TABLE])
		table = mnl_attr_get_u32(tb[RTA_TABLE]);
	if (table != RT_TABLE_MAIN || !tb[RTA_OIF] ||
	    (int)mnl_attr_get_u32(tb[RTA_OIF]) != ps->ifindex)
		return MNL_CB_OK;
	gw = payload_of(tb[RTA_GATEWAY], rtm->rtm_family == AF_INET ? 4 : 16);
	if (gw && rtm->rtm_family == AF_INET && !memcmp(gw, &ps->gw4, 4))
		ps->route4 = true;
	if (gw && rtm->rtm_family == AF_INET6 && !memcmp(gw, &ps->gw6, 16))
		ps->route6 = true;
	return MNL_CB_OK;
}

static int neigh_cb(const struct nlmsghdr *nlh, void *data)
{
	struct ndmsg *ndm = mnl_nlmsg_get_payload(nlh);
	struct pod_side *ps = data;
	const struct nlattr *tb[NDA_MAX + 1];
	const void *dst, *lladdr;

	if (ndm->ndm_ifindex != ps->ifindex || !(ndm->ndm_state & NUD_PERMANENT))
		return MNL_CB_OK;
	attrs_of(nlh, sizeof(*ndm), tb, NDA_MAX);
	dst = payload_of(tb[NDA_DST], ndm->ndm_family == AF_INET ? 4 : 16);
	lladdr = tb[NDA_LLADDR] && mnl_attr_get_payload_len(tb[NDA_LLADDR]) == 6 ?
		 mnl_attr_get_payload(tb[NDA_LLADDR]) : NULL;
	if (!dst || !lladdr || memcmp(lladdr, ps->pod->host_mac, 6))
		return MNL_CB_OK;
	if (ndm->ndm_family == AF_INET && !memcmp(dst, &ps->gw4, 4))
		ps->neigh4 = true;
	if (ndm->ndm_family == AF_INET6 && !memcmp(dst, &ps->gw6, 16))
		ps->neigh6 = true;
	return MNL_CB_OK;
}

static int read_pod_side(void *arg)
{
	struct pod_side *ps = arg;
	bool has4 = ps->pod->flags & PI_POD_HAS_V4;
	bool has6 = ps->pod->flags & PI_POD_HAS_V6;
	int err;

	err = get_link(NULL, ps->ifindex, &ps->link);
	if (!err)
		err = nl_dump(RTM_GETADDR, AF_UNSPEC, addr_cb, ps);
	if (!err && has4)
		err = nl_dump(RTM_GETROUTE, AF_INET, route_cb, ps);
	if (!err && has6)
		err = nl_dump(RTM_GETROUTE, AF_INET6, route_cb, ps);
	if (!err && (has4 || has6))
		err = nl_dump(RTM_GETNEIGH, AF_UNSPEC, neigh_cb, ps);
	return err;
}

int cni_pod_side_check(const struct cni_env *env, const struct cni_pair *pair,
		       const struct pi_pod_info *pod, struct cni_err *e)
{
	struct pod_side ps = { .pod = pod, .ifindex = pair->pod_ifindex };
	bool has4 = pod->flags & PI_POD_HAS_V4, has6 = pod->flags & PI_POD_HAS_V6;
	char a4[INET_ADDRSTRLEN], a6[INET6_ADDRSTRLEN];
	const char *lost = NULL;
	char what[128];
	int err;

	inet_pton(AF_INET, PI_POD_GW4, &ps.gw4);
	inet_pton(AF_INET6, PI_POD_GW6, &ps.gw6);
	err = in_netns(env->netns, read_pod_side, &ps);
	if (err)
		return cni_fail(e, CNI_ERR_IO, "cannot read the pod's interface",
				"%s in %s: %s", env->ifname, env->netns,
				strerror(-err));
	inet_ntop(AF_INET, &pod->ip4, a4, sizeof(a4));
	inet_ntop(AF_INET6, pod->ip6, a6, sizeof(a6));
	if (!(ps.link.flags & IFF_UP)) {
		lost = "is down";
	} else if (has4 && !ps.addr4) {
		snprintf(what, sizeof(what), "has lost its address %s/32", a4);
		lost = what;
	} else if (has6 && !ps.addr6) {
		snprintf(what, sizeof(what), "has lost its address %s/128", a6);
		lost = what;
	} else if (has4 && !ps.route4) {
		lost = "has lost its IPv4 default route via " PI_POD_GW4;
	} else if (has6 && !ps.route6) {
		lost = "has lost its IPv6 default route via " PI_POD_GW6;
	} else if (has4 && !ps.neigh4) {
		lost = "has lost its neighbour entry for " PI_POD_GW4 " (the node side's MAC)";
	} else if (has6 && !ps.neigh6) {
		lost = "has lost its neighbour entry for " PI_POD_GW6 " (the node side's MAC)";
	}
	if (lost)
		return cni_fail(e, CNI_ERR_CHECK, "pod's interface is not as podinject made it",
				"%s in %s %s", env->ifname, env->netns, lost);
	return 0;
}
