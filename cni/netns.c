/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The pod's device pair as the kernel has it: CNI_IFNAME inside CNI_NETNS
 * names its peer's ifindex (IFLA_LINK), and that device, here, must name
 * it back. Names in prevResult are only a cross-check (Cilium's
 * generic-veth chaining trusts the peer index, not the names).
 *
 * One RTM_GETLINK per end, read here rather than through lib/nl.c: the
 * library's archive exports only pi_* symbols, and a device's peer, kind
 * and name are not part of its API.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <net/if.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <libmnl/libmnl.h>
#include "cni.h"

struct link_attrs {
	int ifindex;
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

/* RTM_GETLINK of one device, by name or index, in the current namespace. */
static int get_link(const char *name, int ifindex, struct link_attrs *la)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct mnl_socket *nl;
	struct nlmsghdr *nlh;
	struct ifinfomsg *ifm;
	unsigned int seq = time(NULL), portid;
	int ret, err = 0;

	memset(la, 0, sizeof(*la));
	nl = mnl_socket_open(NETLINK_ROUTE);
	if (!nl)
		return -errno;
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		err = -errno;
		goto out;
	}
	portid = mnl_socket_get_portid(nl);
	nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = RTM_GETLINK;
	nlh->nlmsg_flags = NLM_F_REQUEST;
	nlh->nlmsg_seq = seq;
	ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	ifm->ifi_index = ifindex;
	if (name)
		mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0) {
		err = -errno;
		goto out;
	}
	ret = mnl_socket_recvfrom(nl, buf, sizeof(buf));
	if (ret < 0) {
		err = -errno;
		goto out;
	}
	ret = mnl_cb_run(buf, ret, seq, portid, link_cb, la);
	if (ret < 0)
		err = errno == ENODEV ? -ENOENT : -errno;
out:
	mnl_socket_close(nl);
	return err;
}

/* -ENOENT no such namespace or device, -ENXIO not a pair whose other end
 * is here. */
static int find_pair(const char *netns, const char *ifname,
		     struct cni_pair *pair)
{
	struct link_attrs pod, host;
	int self, ns, err;

	memset(pair, 0, sizeof(*pair));
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
	err = get_link(ifname, 0, &pod);
	if (setns(self, CLONE_NEWNET) && !err)
		err = -errno;
	close(ns);
	close(self);
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
