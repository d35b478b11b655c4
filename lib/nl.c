/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Named network namespaces and the few rtnetlink requests podinject needs.
 *
 * Every netlink request opens its own NETLINK_ROUTE socket: a socket is tied
 * to the namespace its creator was in, and callers move between namespaces
 * with setns() around these calls, so a cached socket would silently talk to
 * the wrong namespace.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>
#include <net/if.h>
#include <arpa/inet.h>

#include <libmnl/libmnl.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/neighbour.h>
#include <linux/fib_rules.h>
#include <linux/net_namespace.h>
#include <linux/rtnetlink.h>
#include <linux/pkt_sched.h>
#include <linux/veth.h>
#include <linux/sock_diag.h>
#include <linux/inet_diag.h>
#include "podinject_util.h"

#include "nl.h"

/*
 * The uapi headers of the build machine may predate netkit (Linux 6.7); the
 * values are ABI, copied from the kernel's include/uapi/linux/if_link.h.
 */
#define PI_IFLA_NETKIT_PEER_INFO	1
#define PI_IFLA_NETKIT_POLICY		3
#define PI_IFLA_NETKIT_PEER_POLICY	4
#define PI_IFLA_NETKIT_MODE		5
#define PI_NETKIT_PASS			0
#define PI_NETKIT_L3			1

/* Replies: big enough for one RTM_NEWLINK with all its attributes. */
#define NL_BUF_SIZE	32768
/* Requests: the largest one (a pair with its peer) is a few hundred bytes. */
#define NL_REQ_SIZE	1024

/*
 * Send one request on netlink bus `bus` and read until the kernel's ACK
 * (with `ack`), the end of a dump, or an error arrives. Replies other than
 * the ACK go to cb when it is given. Returns 0 or the kernel's -errno.
 */
static int nl_talk(int bus, struct nlmsghdr *nlh, bool ack, mnl_cb_t cb,
		   void *data)
{
	char *buf;
	struct mnl_socket *nl;
	unsigned int portid, seq;
	int ret, err = 0;

	/* Per call: a library caller may run requests from several threads. */
	buf = malloc(NL_BUF_SIZE);
	if (!buf)
		return -ENOMEM;
	nl = mnl_socket_open2(bus, SOCK_CLOEXEC);
	if (!nl) {
		free(buf);
		return -errno;
	}
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		err = -errno;
		goto out;
	}
	portid = mnl_socket_get_portid(nl);
	seq = nlh->nlmsg_seq = 1;
	/* a dump ends with NLMSG_DONE, anything else with the ACK */
	nlh->nlmsg_flags |= NLM_F_REQUEST | (ack ? NLM_F_ACK : 0);

	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0) {
		err = -errno;
		goto out;
	}
	for (;;) {
		ret = mnl_socket_recvfrom(nl, buf, NL_BUF_SIZE);
		if (ret < 0) {
			err = -errno;
			break;
		}
		errno = 0;
		ret = mnl_cb_run(buf, ret, seq, portid, cb, data);
		if (ret < 0) {
			/* libmnl leaves the kernel's error (or its own) in errno */
			err = errno ? -errno : -EIO;
			break;
		}
		if (ret == MNL_CB_STOP)
			break;
	}
out:
	mnl_socket_close(nl);
	free(buf);
	return err;
}

static int nl_request(struct nlmsghdr *nlh, mnl_cb_t cb, void *data)
{
	return nl_talk(NETLINK_ROUTE, nlh, true, cb, data);
}

static struct nlmsghdr *nl_msg(char *buf, uint16_t type, uint16_t flags)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);

	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = flags;
	return nlh;
}

static int addr_len(int family)
{
	if (family == AF_INET)
		return 4;
	if (family == AF_INET6)
		return 16;
	return -EAFNOSUPPORT;
}

/* ---- namespaces ---- */

static int netns_path(const char *name, char *path, size_t len)
{
	int n;

	/* A name is a single path component, as `ip netns` requires. */
	if (!name || !*name || strchr(name, '/') || !strcmp(name, ".") ||
	    !strcmp(name, ".."))
		return -EINVAL;
	n = snprintf(path, len, "%s/%s", NETNS_RUN_DIR, name);
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return 0;
}

/*
 * The bind mounts must propagate to other mount namespaces (e.g. a shell that
 * unshared its mounts), the same way iproute2 sets /run/netns up, so the
 * directory has to be a shared mount point.
 */
static int netns_run_dir_prepare(void)
{
	bool bound = false;

	if (mkdir(NETNS_RUN_DIR, 0755) < 0 && errno != EEXIST)
		return -errno;
	for (;;) {
		if (!mount("", NETNS_RUN_DIR, "none", MS_SHARED | MS_REC, NULL))
			return 0;
		/* EINVAL: not a mount point yet, make it one and retry once. */
		if (errno != EINVAL || bound)
			return -errno;
		if (mount(NETNS_RUN_DIR, NETNS_RUN_DIR, "none",
			  MS_BIND | MS_REC, NULL))
			return -errno;
		bound = true;
	}
}

static int link_set_up_by_name(const char *name)
{
	unsigned int idx = if_nametoindex(name);

	if (!idx)
		return -errno;
	return nl_link_set_up(idx);
}

int netns_create(const char *name)
{
	char path[256];
	int fd, saved, err;

	err = netns_path(name, path, sizeof(path));
	if (err)
		return err;
	err = netns_run_dir_prepare();
	if (err)
		return err;

	fd = open(path, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	close(fd);

	/* The new namespace is made by this thread, which must end up back in
	 * the namespace it started in whatever happens below. */
	saved = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (saved < 0) {
		err = -errno;
		goto out_unlink;
	}
	if (unshare(CLONE_NEWNET) < 0) {
		err = -errno;
		close(saved);
		goto out_unlink;
	}
	if (mount("/proc/thread-self/ns/net", path, "none", MS_BIND, NULL) < 0)
		err = -errno;
	else
		err = link_set_up_by_name("lo");

	if (setns(saved, CLONE_NEWNET) < 0 && !err)
		err = -errno;
	close(saved);
	if (!err)
		return 0;
	umount2(path, MNT_DETACH);
out_unlink:
	unlink(path);
	return err;
}

int netns_delete(const char *name)
{
	char path[256];
	int err;

	err = netns_path(name, path, sizeof(path));
	if (err)
		return err;
	/* EINVAL means a stale file that is not a mount: still remove it. */
	if (umount2(path, MNT_DETACH) < 0 && errno != EINVAL)
		return -errno;
	if (unlink(path) < 0)
		return -errno;
	return 0;
}

bool netns_exists(const char *name)
{
	char path[256];
	struct stat st;

	if (netns_path(name, path, sizeof(path)))
		return false;
	return stat(path, &st) == 0;
}

int netns_open(const char *name)
{
	char path[256];
	int fd, err;

	err = netns_path(name, path, sizeof(path));
	if (err)
		return err;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int netns_open_any(const char *s)
{
	int fd;

	if (!s || !strchr(s, '/'))
		return netns_open(s);
	fd = open(s, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int netns_enter(int fd, int *saved)
{
	int old, err;

	old = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (old < 0)
		return -errno;
	if (setns(fd, CLONE_NEWNET) < 0) {
		err = -errno;
		close(old);
		return err;
	}
	*saved = old;
	return 0;
}

int netns_restore(int saved)
{
	int err = 0;

	if (setns(saved, CLONE_NEWNET) < 0)
		err = -errno;
	close(saved);
	return err;
}

/* ---- links ---- */

int nl_link_index(const char *name)
{
	unsigned int idx = if_nametoindex(name);

	/* a device named by the caller that is not there: the API's
	 * -ENXIO (include/podinject/podinject.h), not the kernel's ENODEV */
	if (!idx)
		return !errno || errno == ENODEV ? -ENXIO : -errno;
	return (int)idx;
}

int nl_link_name(int ifindex, char name[16])
{
	if (!if_indextoname(ifindex, name))
		return errno ? -errno : -ENODEV;
	return 0;
}

static struct ifinfomsg *link_msg(struct nlmsghdr *nlh, int ifindex)
{
	struct ifinfomsg *ifi;

	ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));
	ifi->ifi_family = AF_UNSPEC;
	ifi->ifi_index = ifindex;
	return ifi;
}

int nl_link_set_up(int ifindex)
{
	char buf[NL_REQ_SIZE];
	struct nlmsghdr *nlh = nl_msg(buf, RTM_NEWLINK, 0);
	struct ifinfomsg *ifi = link_msg(nlh, ifindex);

	ifi->ifi_change = IFF_UP;
	ifi->ifi_flags = IFF_UP;
	return nl_request(nlh, NULL, NULL);
}

int nl_link_del(int ifindex)
{
	char buf[NL_REQ_SIZE];
	struct nlmsghdr *nlh = nl_msg(buf, RTM_DELLINK, 0);

	link_msg(nlh, ifindex);
	return nl_request(nlh, NULL, NULL);
}

int nl_link_set_netns(int ifindex, int netns_fd)
{
	char buf[NL_REQ_SIZE];
	struct nlmsghdr *nlh = nl_msg(buf, RTM_NEWLINK, 0);

	link_msg(nlh, ifindex);
	mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, netns_fd);
	return nl_request(nlh, NULL, NULL);
}

/*
 * Fill the peer part of a pair request: the kernel parses it as a complete
 * link request of its own (ifinfomsg followed by attributes).
 */
static void put_peer(struct nlmsghdr *nlh, uint16_t type, const char *peer,
		     int peer_netns_fd)
{
	struct nlattr *nest = mnl_attr_nest_start(nlh, type);
	struct ifinfomsg *ifi;

	ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));
	ifi->ifi_family = AF_UNSPEC;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, peer);
	if (peer_netns_fd >= 0)
		mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, peer_netns_fd);
	mnl_attr_nest_end(nlh, nest);
}

static int check_ifname(const char *name)
{
	if (!name || !*name || strlen(name) >= IFNAMSIZ)
		return -EINVAL;
	return 0;
}

int nl_veth_create(const char *name, const char *peer, int peer_netns_fd)
{
	char buf[NL_REQ_SIZE];
	struct nlmsghdr *nlh;
	struct nlattr *linkinfo, *data;

	if (check_ifname(name) || check_ifname(peer))
		return -EINVAL;
	nlh = nl_msg(buf, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
	link_msg(nlh, 0);
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	linkinfo = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
	mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
	data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
	put_peer(nlh, VETH_INFO_PEER, peer, peer_netns_fd);
	mnl_attr_nest_end(nlh, data);
	mnl_attr_nest_end(nlh, linkinfo);
	return nl_request(nlh, NULL, NULL);
}

int nl_netkit_create(const char *name, const char *peer, int peer_netns_fd)
{
	char buf[NL_REQ_SIZE];
	struct nlmsghdr *nlh;
	struct nlattr *linkinfo, *data;
	int err;

	if (check_ifname(name) || check_ifname(peer))
		return -EINVAL;
	nlh = nl_msg(buf, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
	link_msg(nlh, 0);
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	linkinfo = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
	mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "netkit");
	data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
	put_peer(nlh, PI_IFLA_NETKIT_PEER_INFO, peer, peer_netns_fd);
	mnl_attr_put_u32(nlh, PI_IFLA_NETKIT_MODE, PI_NETKIT_L3);
	mnl_attr_put_u32(nlh, PI_IFLA_NETKIT_POLICY, PI_NETKIT_PASS);
	mnl_attr_put_u32(nlh, PI_IFLA_NETKIT_PEER_POLICY, PI_NETKIT_PASS);
	mnl_attr_nest_end(nlh, data);
	mnl_attr_nest_end(nlh, linkinfo);

	err = nl_request(nlh, NULL, NULL);
	/* An unknown kind ("Unknown device type") means no netkit driver. */
	if (err == -EOPNOTSUPP || err == -ENOENT)
		return -EOPNOTSUPP;
	return err;
}

struct link_reply {
	unsigned int flags;
	uint8_t mac[6];
	bool has_mac;
	char kind[16];
	uint32_t link;		/* IFLA_LINK: a pair's peer */
	int32_t link_nsid;	/* IFLA_LINK_NETNSID: the peer's namespace */
	bool has_link_nsid;
	int carrier;		/* IFLA_CARRIER, -1 if not reported */
};

static int link_attr_cb(const struct nlattr *attr, void *data)
{
	const struct nlattr **tb = data;
	uint16_t type = mnl_attr_get_type(attr);

	if (mnl_attr_type_valid(attr, IFLA_MAX) < 0)
		return MNL_CB_OK;
	tb[type] = attr;
	return MNL_CB_OK;
}

static int linkinfo_attr_cb(const struct nlattr *attr, void *data)
{
	const struct nlattr **tb = data;
	uint16_t type = mnl_attr_get_type(attr);

	if (mnl_attr_type_valid(attr, IFLA_INFO_MAX) < 0)
		return MNL_CB_OK;
	tb[type] = attr;
	return MNL_CB_OK;
}

static int link_reply_cb(const struct nlmsghdr *nlh, void *data)
{
	const struct nlattr *tb[IFLA_MAX + 1] = {};
	const struct nlattr *info[IFLA_INFO_MAX + 1] = {};
	struct link_reply *r = data;

	if (nlh->nlmsg_type != RTM_NEWLINK)
		return MNL_CB_OK;
	r->flags = ((struct ifinfomsg *)mnl_nlmsg_get_payload(nlh))->ifi_flags;
	mnl_attr_parse(nlh, sizeof(struct ifinfomsg), link_attr_cb, tb);
	if (tb[IFLA_LINK])
		r->link = mnl_attr_get_u32(tb[IFLA_LINK]);
	/* The kernel leaves IFLA_LINK out when the peer's ifindex is the
	 * device's own: a pair's two ends in two fresh namespaces often both
	 * have 2. A peer in another namespace still shows as its netnsid. */
	else if (tb[IFLA_LINK_NETNSID])
		r->link = ((struct ifinfomsg *)mnl_nlmsg_get_payload(nlh))->ifi_index;
	if (tb[IFLA_LINK_NETNSID]) {
		r->link_nsid = (int32_t)mnl_attr_get_u32(tb[IFLA_LINK_NETNSID]);
		r->has_link_nsid = true;
	}
	r->carrier = tb[IFLA_CARRIER] ? mnl_attr_get_u8(tb[IFLA_CARRIER]) : -1;
	if (tb[IFLA_ADDRESS] && mnl_attr_get_payload_len(tb[IFLA_ADDRESS]) == 6) {
		memcpy(r->mac, mnl_attr_get_payload(tb[IFLA_ADDRESS]), 6);
		r->has_mac = true;
	}
	if (tb[IFLA_LINKINFO]) {
		mnl_attr_parse_nested(tb[IFLA_LINKINFO], linkinfo_attr_cb, info);
		if (info[IFLA_INFO_KIND]) {
			const struct nlattr *k = info[IFLA_INFO_KIND];
			size_t n = mnl_attr_get_payload_len(k);

			if (n > sizeof(r->kind) - 1)
				n = sizeof(r->kind) - 1;
			n = strnlen(mnl_attr_get_payload(k), n);
			memcpy(r->kind, mnl_attr_get_payload(k), n);
			r->kind[n] = '\0';
		}
	}
	return MNL_CB_OK;
}

static int link_get(int ifindex, struct link_reply *r)
{
	char buf[NL_REQ_SIZE];
	struct nlmsghdr *nlh = nl_msg(buf, RTM_GETLINK, 0);

	memset(r, 0, sizeof(*r));
	link_msg(nlh, ifindex);
	/* Stats are of no use here and only make the reply bigger. */
	mnl_attr_put_u32(nlh, IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
	return nl_request(nlh, link_reply_cb, r);
}

int nl_link_get_mac(int ifindex, uint8_t mac[6])
{
	struct link_reply r;
	int err = link_get(ifindex, &r);

	if (err)
		return err;
	/* Devices with no link-layer address (wireguard, tun). netkit in L3
	 * mode does report one: all zeroes. */
	if (!r.has_mac)
		return -ENODATA;
	memcpy(mac, r.mac, 6);
	return 0;
}

int nl_link_peer(int ifindex)
{
	struct link_reply r;
	int err = link_get(ifindex, &r);

	if (err)
		return err;
	return r.link ? (int)r.link : -ENOLINK;
}

static int nsid_reply_cb(const struct nlmsghdr *nlh, void *data)
{
	const struct nlattr *attr;
	int32_t *nsid = data;

	if (nlh->nlmsg_type != RTM_NEWNSID)
		return MNL_CB_OK;
	mnl_attr_for_each(attr, nlh, sizeof(struct rtgenmsg))
		if (mnl_attr_get_type(attr) == NETNSA_NSID &&
		    mnl_attr_get_payload_len(attr) >= sizeof(int32_t))
			*nsid = (int32_t)mnl_attr_get_u32(attr);
	return MNL_CB_OK;
}

/* The id this namespace gives the namespace `netns_fd`, or -ENOENT when
 * it has given it none (then no device here names it as its peer's). */
static int netns_id_of(int netns_fd)
{
	char buf[NL_REQ_SIZE];
	struct nlmsghdr *nlh = nl_msg(buf, RTM_GETNSID, 0);
	struct rtgenmsg *g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
	int32_t nsid = NETNSA_NSID_NOT_ASSIGNED;
	int err;

	g->rtgen_family = AF_UNSPEC;
	mnl_attr_put_u32(nlh, NETNSA_FD, (uint32_t)netns_fd);
	err = nl_request(nlh, nsid_reply_cb, &nsid);
	if (err)
		return err;
	return nsid < 0 ? -ENOENT : nsid;
}

/* Whether `netns_fd` is the namespace this thread is in. */
static int netns_is_current(int netns_fd)
{
	struct stat a, b;

	if (fstat(netns_fd, &a) || stat("/proc/thread-self/ns/net", &b))
		return -errno;
	return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

int nl_link_peer_in(int ifindex, int netns_fd)
{
	struct link_reply r;
	int err = link_get(ifindex, &r), here;

	if (err)
		return err;
	if (!r.link)
		return -ENOLINK;
	if (!r.has_link_nsid) {
		/* both ends here */
		here = netns_is_current(netns_fd);
		if (here < 0)
			return here;
		return here ? (int)r.link : -EXDEV;
	}
	err = netns_id_of(netns_fd);
	if (err == -ENOENT)
		return -EXDEV;
	if (err < 0)
		return err;
	return err == r.link_nsid ? (int)r.link : -EXDEV;
}

/* Devices without a kind (lo, physical NICs) give "" and 0. */
int nl_link_kind(int ifindex, char kind[16])
{
	struct link_reply r;
	int err = link_get(ifindex, &r);

	if (err)
		return err;
	memcpy(kind, r.kind, sizeof(r.kind));
	return 0;
}

/*
 * A link that gets its carrier (a veth or netkit whose peer just came up)
 * keeps the noop qdisc on its tx queues until the kernel's linkwatch work
 * runs, and that qdisc drops every packet while sendmsg() reports success.
 * linkwatch marks the link RUNNING and activates the queues in one RTNL
 * section, so once RUNNING shows, any request that takes RTNL (setting the
 * link up again, a no-op) returns only after the activation is done.
 */
int nl_link_wait_running(int ifindex, int timeout_ms)
{
	long long deadline = pi_mono_ms() + timeout_ms;
	struct timespec pause = { .tv_nsec = 2 * 1000 * 1000 };
	struct link_reply r;
	int err;

	for (;;) {
		err = link_get(ifindex, &r);
		if (err)
			return err;
		/* IFF_RUNNING alone is not enough: until linkwatch has
		 * run, a device just set up still has operstate UNKNOWN,
		 * which counts as running even without carrier (seen on
		 * 6.1 with a veth whose peer is down). The carrier itself
		 * is what the pair's other end being up sets. */
		if ((r.flags & IFF_RUNNING) && r.carrier != 0)
			return nl_link_set_up(ifindex);
		if (pi_mono_ms() >= deadline)
			return -ETIMEDOUT;
		nanosleep(&pause, NULL);
	}
}

/* ---- addresses, routes, neighbours ---- */

static int route_type_cb(const struct nlmsghdr *nlh, void *data)
{
	if (nlh->nlmsg_type == RTM_NEWROUTE)
		*(int *)data = ((struct rtmsg *)mnl_nlmsg_get_payload(nlh))->rtm_type;
	return MNL_CB_OK;
}

/* The type (RTN_*) of the route the kernel would use to reach addr. */
static int route_get_type(int family, const void *addr, int *type)
{
	char buf[NL_REQ_SIZE];
	struct nlmsghdr *nlh = nl_msg(buf, RTM_GETROUTE, 0);
	int alen = addr_len(family);
	struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));

	rtm->rtm_family = family;
	rtm->rtm_dst_len = alen * 8;
	mnl_attr_put(nlh, RTA_DST, alen, addr);
	*type = RTN_UNSPEC;
	return nl_request(nlh, route_type_cb, type);
}

/*
 * IPv6 installs an address's local route from the DAD work item, even with
 * NODAD, after the RTM_NEWADDR request has been acknowledged; until then
 * packets to the address are treated as not for this host and dropped.
 * Whoever adds an address expects it to work, so wait for that route.
 */
static int addr6_wait_local(const void *addr, int timeout_ms)
{
	long long deadline = pi_mono_ms() + timeout_ms;
	struct timespec pause = { .tv_nsec = 1000 * 1000 };
	int type;

	for (;;) {
		if (!route_get_type(AF_INET6, addr, &type) && type == RTN_LOCAL)
			return 0;
		if (pi_mono_ms() >= deadline)
			return -ETIMEDOUT;
		nanosleep(&pause, NULL);
	}
}

int nl_addr_add(int ifindex, int family, const void *addr, int prefixlen)
{
	char buf[NL_REQ_SIZE];
	struct nlmsghdr *nlh;
	struct ifaddrmsg *ifa;
	int alen = addr_len(family), err;

	if (alen < 0)
		return alen;
	if (prefixlen < 0 || prefixlen > alen * 8)
		return -EINVAL;
	nlh = nl_msg(buf, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL);
	ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	ifa->ifa_family = family;
	ifa->ifa_prefixlen = prefixlen;
	ifa->ifa_scope = RT_SCOPE_UNIVERSE;
	ifa->ifa_index = ifindex;
	mnl_attr_put(nlh, IFA_LOCAL, alen, addr);
	mnl_attr_put(nlh, IFA_ADDRESS, alen, addr);
	if (family == AF_INET6) {
		/* Without NODAD the address stays tentative for a second or
		 * more and binding or sending from it fails meanwhile. */
		ifa->ifa_flags = IFA_F_NODAD;
		mnl_attr_put_u32(nlh, IFA_FLAGS, IFA_F_NODAD);
	}
	err = nl_request(nlh, NULL, NULL);
	if (err || family != AF_INET6)
		return err;
	return addr6_wait_local(addr, NL_READY_TIMEOUT_MS);
}

static struct rtmsg *route_msg(struct nlmsghdr *nlh, int family, int plen)
{
	struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));

	rtm->rtm_family = family;
	rtm->rtm_dst_len = plen;
	rtm->rtm_table = RT_TABLE_MAIN;
	return rtm;
}

int nl_route_add(int family, const void *dst, int plen, const void *gw,
		 int oif)
{
	char buf[NL_REQ_SIZE];
	struct nlmsghdr *nlh;
	struct rtmsg *rtm;
	int alen = addr_len(family);

	if (alen < 0)
		return alen;
	if (plen < 0 || plen > alen * 8 || (plen && !dst))
		return -EINVAL;
	nlh = nl_msg(buf, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL);
	rtm = route_msg(nlh, family, plen);
	rtm->rtm_protocol = RTPROT_STATIC;
	rtm->rtm_type = RTN_UNICAST;
	if (gw) {
		rtm->rtm_scope = RT_SCOPE_UNIVERSE;
		/* Pods have no prefix that covers their gateway (a /32 address
		 * and a gateway like 169.254.1.1 or fe80::1). */
		rtm->rtm_flags = RTNH_F_ONLINK;
	} else {
		rtm->rtm_scope = RT_SCOPE_LINK;
	}
	if (plen)
		mnl_attr_put(nlh, RTA_DST, alen, dst);
	if (gw)
		mnl_attr_put(nlh, RTA_GATEWAY, alen, gw);
	mnl_attr_put_u32(nlh, RTA_OIF, oif);
	return nl_request(nlh, NULL, NULL);
}

int nl_route_del(int family, const void *dst, int plen, int oif)
{
	char buf[NL_REQ_SIZE];
	struct nlmsghdr *nlh;
	struct rtmsg *rtm;
	int alen = addr_len(family);

	if (alen < 0)
		return alen;
	if (plen < 0 || plen > alen * 8 || (plen && !dst))
		return -EINVAL;
	nlh = nl_msg(buf, RTM_DELROUTE, 0);
	rtm = route_msg(nlh, family, plen);
	/* NOWHERE and no type/protocol match a route of any scope and kind,
	 * as `ip route del` does. */
	rtm->rtm_scope = RT_SCOPE_NOWHERE;
	if (plen)
		mnl_attr_put(nlh, RTA_DST, alen, dst);
	if (oif > 0)
		mnl_attr_put_u32(nlh, RTA_OIF, oif);
	return nl_request(nlh, NULL, NULL);
}

int nl_route_local_default(int family, int table, int oif, bool add)
{
	char buf[NL_REQ_SIZE];
	struct nlmsghdr *nlh;
	struct rtmsg *rtm;

	if (addr_len(family) < 0 || table <= 0 || table > 255)
		return -EINVAL;
	nlh = nl_msg(buf, add ? RTM_NEWROUTE : RTM_DELROUTE,
		     add ? NLM_F_CREATE | NLM_F_EXCL : 0);
	rtm = route_msg(nlh, family, 0);
	rtm->rtm_table = table;
	rtm->rtm_protocol = RTPROT_STATIC;
	rtm->rtm_type = RTN_LOCAL;
	rtm->rtm_scope = RT_SCOPE_HOST;
	mnl_attr_put_u32(nlh, RTA_OIF, oif);
	return nl_request(nlh, NULL, NULL);
}

int nl_rule_iif(int family, const char *iifname, int table, int prio,
		bool add)
{
	char buf[NL_REQ_SIZE];
	struct nlmsghdr *nlh;
	struct fib_rule_hdr *frh;

	if (addr_len(family) < 0 || table <= 0 || table > 255 || !iifname)
		return -EINVAL;
	nlh = nl_msg(buf, add ? RTM_NEWRULE : RTM_DELRULE,
		     add ? NLM_F_CREATE | NLM_F_EXCL : 0);
	frh = mnl_nlmsg_put_extra_header(nlh, sizeof(*frh));
	frh->family = family;
	frh->table = table;
	frh->action = FR_ACT_TO_TBL;
	mnl_attr_put_strz(nlh, FRA_IIFNAME, iifname);
	mnl_attr_put_u32(nlh, FRA_TABLE, table);
	mnl_attr_put_u32(nlh, FRA_PRIORITY, prio);
	return nl_request(nlh, NULL, NULL);
}

int nl_neigh_add(int ifindex, int family, const void *addr,
		 const uint8_t mac[6])
{
	char buf[NL_REQ_SIZE];
	struct nlmsghdr *nlh;
	struct ndmsg *ndm;
	int alen = addr_len(family);

	if (alen < 0)
		return alen;
	nlh = nl_msg(buf, RTM_NEWNEIGH, NLM_F_CREATE | NLM_F_REPLACE);
	ndm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ndm));
	ndm->ndm_family = family;
	ndm->ndm_ifindex = ifindex;
	ndm->ndm_state = NUD_PERMANENT;
	mnl_attr_put(nlh, NDA_DST, alen, addr);
	mnl_attr_put(nlh, NDA_LLADDR, 6, mac);
	return nl_request(nlh, NULL, NULL);
}

/* ---- sysctl ---- */

static int sysctl_path(const char *path, char *out, size_t len)
{
	int n;

	if (!path || !*path || strstr(path, ".."))
		return -EINVAL;
	n = snprintf(out, len, "/proc/sys/%s", path);
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return 0;
}

int sysctl_write(const char *path, const char *value)
{
	char p[512];
	size_t len = strlen(value);
	ssize_t n;
	int fd, err;

	err = sysctl_path(path, p, sizeof(p));
	if (err)
		return err;
	fd = open(p, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* procfs takes a sysctl value in a single write. */
	n = write(fd, value, len);
	err = n < 0 ? -errno : (size_t)n != len ? -EIO : 0;
	close(fd);
	return err;
}

int sysctl_read(const char *path, char *buf, size_t len)
{
	char p[512];
	ssize_t n;
	int fd, err;

	if (!len)
		return -EINVAL;
	err = sysctl_path(path, p, sizeof(p));
	if (err)
		return err;
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	err = n < 0 ? -errno : 0;
	close(fd);
	if (err)
		return err;
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	return 0;
}

/* ---- sockets (sock_diag) ---- */

struct sock_dump {
	int (*fn)(const struct nl_sock *sk, void *ctx);
	void *ctx;
	int err;
};

static int sock_dump_cb(const struct nlmsghdr *nlh, void *data)
{
	const struct inet_diag_msg *m = mnl_nlmsg_get_payload(nlh);
	struct sock_dump *d = data;
	struct nl_sock sk = { 0 };
	size_t alen;

	if (mnl_nlmsg_get_payload_len(nlh) < sizeof(*m))
		return MNL_CB_ERROR;
	if (m->idiag_family != AF_INET && m->idiag_family != AF_INET6)
		return MNL_CB_OK;
	alen = m->idiag_family == AF_INET ? 4 : 16;
	sk.family = m->idiag_family;
	sk.state = m->idiag_state;
	memcpy(sk.local, m->id.idiag_src, alen);
	memcpy(sk.remote, m->id.idiag_dst, alen);
	sk.local_port = ntohs(m->id.idiag_sport);
	sk.remote_port = ntohs(m->id.idiag_dport);
	d->err = d->fn(&sk, d->ctx);
	return d->err ? MNL_CB_STOP : MNL_CB_OK;
}

int nl_sock_dump(int family, int proto, uint32_t states,
		 int (*fn)(const struct nl_sock *sk, void *ctx), void *ctx)
{
	char buf[NL_REQ_SIZE] = { 0 };
	struct nlmsghdr *nlh = nl_msg(buf, SOCK_DIAG_BY_FAMILY, NLM_F_DUMP);
	struct inet_diag_req_v2 *req;
	struct sock_dump d = { .fn = fn, .ctx = ctx };
	int err;

	req = mnl_nlmsg_put_extra_header(nlh, sizeof(*req));
	req->sdiag_family = family;
	req->sdiag_protocol = proto;
	req->idiag_states = states;
	err = nl_talk(NETLINK_SOCK_DIAG, nlh, false, sock_dump_cb, &d);
	return err ? err : d.err;
}

/* ---- tc ---- */

static int count_cb(const struct nlmsghdr *nlh, void *data)
{
	(*(int *)data)++;
	return MNL_CB_OK;
}

int nl_tc_filter_count(int ifindex, bool ingress)
{
	char buf[NL_REQ_SIZE] = { 0 };
	struct nlmsghdr *nlh = nl_msg(buf, RTM_GETTFILTER, NLM_F_DUMP);
	struct tcmsg *tcm;
	int n = 0, err;

	tcm = mnl_nlmsg_put_extra_header(nlh, sizeof(*tcm));
	tcm->tcm_family = AF_UNSPEC;
	tcm->tcm_ifindex = ifindex;
	tcm->tcm_parent = TC_H_MAKE(TC_H_CLSACT, ingress ? TC_H_MIN_INGRESS :
							    TC_H_MIN_EGRESS);
	err = nl_talk(NETLINK_ROUTE, nlh, false, count_cb, &n);
	return err ? err : n;
}
