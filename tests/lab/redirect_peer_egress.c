// SPDX-License-Identifier: GPL-2.0
/*
 * redirect_peer_egress: lab-only tests for bpf_redirect_peer(ifindex,
 * BPF_F_EGRESS), the counterpart of the kernel's selftests for the feature.
 *
 * Topology (every namespace is private to this process and vanishes with it):
 *
 *   ns_src: src 10.9.1.1 ----veth---- src_fwd 10.9.1.254 :ns_fwd
 *                                      (tc ingress + egress: "inject")
 *   ns_dst: dst 10.9.2.1 ----veth---- dst_fwd 10.9.2.254 :ns_fwd
 *   ns_nk:  nkb_p 10.9.3.1 --netkit-- nkb (primary)      :ns_fwd
 *   ns_nka: nka_p 10.9.4.1 --netkit-- nka (primary)      :ns_fwd
 *           (nka's BPF_NETKIT_PEER program: "inject")
 *
 * UDP packets to port 4242 are sent from ns_src (they reach src_fwd's tc
 * ingress), from ns_fwd to 10.9.1.1 (src_fwd's tc egress) or from ns_nka
 * (nka's peer program). The "inject" program redirects them, per case, with
 * bpf_redirect_peer(dst_fwd or nkb, flags) or bpf_redirect(..., INGRESS).
 * Observers count them on the target pair:
 *   peer_egress   tc egress of the pod device (dst / nkb_p)
 *   peer_ingress  tc ingress of the pod device (dropped there)
 *   netkit_peer   BPF_NETKIT_PEER program of nkb (pod egress programs)
 *   netkit_prim   BPF_NETKIT_PRIMARY program of nkb
 *   host_ingress  tc ingress of dst_fwd / nkb (dropped there)
 *   host_egress   tc egress of dst_fwd / nkb
 * With BPF_F_EGRESS the pod device transmits the packet: peer_egress (and on
 * netkit netkit_peer) see it exactly once, then it arrives at host_ingress;
 * peer_ingress never sees it.
 *
 * Whether the kernel has the flag is decided by a BPF_PROG_TEST_RUN probe
 * (bpf_redirect_peer(1, BPF_F_EGRESS) returns TC_ACT_SHOT without it). Cases
 * that need the flag are reported as SKIP on such kernels, unless --force
 * (or RPE_FORCE=1) makes them run, and fail.
 *
 * Output: one "PASS name", "FAIL name: why" or "SKIP name: why" line per
 * case; with --summary also "N passed, N failed, N skipped". Exit status 1
 * if any case failed.
 */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <arpa/inet.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <linux/if_link.h>
#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "redirect_peer_egress.h"
#include "redirect_peer_egress.skel.h"

/* uapi values newer than the headers Debian 12 builds against */
#define RPE_BPF_NETKIT_PRIMARY	54
#define RPE_BPF_NETKIT_PEER	55
#define RPE_IFLA_NETKIT_PEER_INFO 1

#define NPKT 3

static bool force_egress;
static int n_pass, n_fail, n_skip;

static void pass(const char *name)
{
	printf("PASS redirect_peer_egress/%s\n", name);
	fflush(stdout);
	n_pass++;
}

static void __attribute__((format(printf, 2, 3)))
fail(const char *name, const char *fmt, ...)
{
	va_list ap;

	printf("FAIL redirect_peer_egress/%s: ", name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	n_fail++;
}

static void skip(const char *name, const char *why)
{
	printf("SKIP redirect_peer_egress/%s: %s\n", name, why);
	fflush(stdout);
	n_skip++;
}

/* ---------------------------------------------------------------------- */
/* Minimal rtnetlink, in the calling thread's current netns.              */

struct nlbuf {
	struct nlmsghdr n;
	char data[2048];
};

static void nl_init(struct nlbuf *b, int type, int flags, const void *hdr, size_t hlen)
{
	memset(b, 0, sizeof(*b));
	b->n.nlmsg_len = NLMSG_LENGTH(hlen);
	b->n.nlmsg_type = type;
	b->n.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
	memcpy(NLMSG_DATA(&b->n), hdr, hlen);
}

static struct rtattr *nl_attr(struct nlbuf *b, int type, const void *data, size_t len)
{
	struct rtattr *rta = (void *)((char *)&b->n + NLMSG_ALIGN(b->n.nlmsg_len));

	rta->rta_type = type;
	rta->rta_len = RTA_LENGTH(len);
	if (len)
		memcpy(RTA_DATA(rta), data, len);
	b->n.nlmsg_len = NLMSG_ALIGN(b->n.nlmsg_len) + RTA_ALIGN(rta->rta_len);
	return rta;
}

static struct rtattr *nl_nest(struct nlbuf *b, int type)
{
	return nl_attr(b, type, NULL, 0);
}

static void nl_nest_end(struct nlbuf *b, struct rtattr *nest)
{
	nest->rta_len = (char *)&b->n + b->n.nlmsg_len - (char *)nest;
}

static void nl_raw(struct nlbuf *b, const void *data, size_t len)
{
	memcpy((char *)&b->n + NLMSG_ALIGN(b->n.nlmsg_len), data, len);
	b->n.nlmsg_len = NLMSG_ALIGN(b->n.nlmsg_len) + NLMSG_ALIGN(len);
}

static int nl_talk(struct nlbuf *b)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	char reply[4096];
	int fd, ret;

	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0)
		return -errno;
	b->n.nlmsg_seq = 1;
	if (sendto(fd, &b->n, b->n.nlmsg_len, 0, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		ret = -errno;
		goto out;
	}
	for (;;) {
		ssize_t len = recv(fd, reply, sizeof(reply), 0);
		struct nlmsghdr *h;

		if (len < 0) {
			ret = -errno;
			goto out;
		}
		for (h = (void *)reply; NLMSG_OK(h, (size_t)len); h = NLMSG_NEXT(h, len)) {
			if (h->nlmsg_type == NLMSG_ERROR) {
				ret = ((struct nlmsgerr *)NLMSG_DATA(h))->error;
				goto out;
			}
		}
	}
out:
	close(fd);
	return ret;
}

/* veth or netkit pair: name here, peer inside peer_ns. */
static int link_pair_create(const char *kind, const char *name, const char *peer, int peer_ns)
{
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC };
	struct rtattr *li, *data, *pi;
	struct nlbuf b;

	nl_init(&b, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, &ifi, sizeof(ifi));
	nl_attr(&b, IFLA_IFNAME, name, strlen(name) + 1);
	li = nl_nest(&b, IFLA_LINKINFO);
	nl_attr(&b, IFLA_INFO_KIND, kind, strlen(kind));
	data = nl_nest(&b, IFLA_INFO_DATA);
	/* VETH_INFO_PEER and IFLA_NETKIT_PEER_INFO are both 1 */
	pi = nl_nest(&b, strcmp(kind, "veth") ? RPE_IFLA_NETKIT_PEER_INFO : VETH_INFO_PEER);
	nl_raw(&b, &ifi, sizeof(ifi));
	nl_attr(&b, IFLA_IFNAME, peer, strlen(peer) + 1);
	nl_attr(&b, IFLA_NET_NS_FD, &peer_ns, sizeof(peer_ns));
	nl_nest_end(&b, pi);
	nl_nest_end(&b, data);
	nl_nest_end(&b, li);
	return nl_talk(&b);
}

static int link_up(int ifindex)
{
	struct ifinfomsg ifi = {
		.ifi_family = AF_UNSPEC, .ifi_index = ifindex,
		.ifi_flags = IFF_UP, .ifi_change = IFF_UP,
	};
	struct nlbuf b;

	nl_init(&b, RTM_NEWLINK, 0, &ifi, sizeof(ifi));
	return nl_talk(&b);
}

static int addr_add(int ifindex, const char *ip, int plen)
{
	struct ifaddrmsg ifa = {
		.ifa_family = AF_INET, .ifa_prefixlen = plen, .ifa_index = ifindex,
	};
	struct in_addr a;
	struct nlbuf b;

	inet_pton(AF_INET, ip, &a);
	nl_init(&b, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, &ifa, sizeof(ifa));
	nl_attr(&b, IFA_LOCAL, &a, 4);
	nl_attr(&b, IFA_ADDRESS, &a, 4);
	return nl_talk(&b);
}

static int route_add(const char *dst, int plen, const char *gw, int oif)
{
	struct rtmsg rtm = {
		.rtm_family = AF_INET, .rtm_dst_len = plen, .rtm_table = RT_TABLE_MAIN,
		.rtm_protocol = RTPROT_STATIC, .rtm_type = RTN_UNICAST,
		.rtm_scope = gw ? RT_SCOPE_UNIVERSE : RT_SCOPE_LINK,
	};
	struct in_addr d, g;
	struct nlbuf b;

	inet_pton(AF_INET, dst, &d);
	nl_init(&b, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL, &rtm, sizeof(rtm));
	nl_attr(&b, RTA_DST, &d, 4);
	if (gw) {
		inet_pton(AF_INET, gw, &g);
		nl_attr(&b, RTA_GATEWAY, &g, 4);
	}
	nl_attr(&b, RTA_OIF, &oif, sizeof(oif));
	return nl_talk(&b);
}

static int neigh_add(int ifindex, const char *ip, const unsigned char mac[6])
{
	struct ndmsg nd = {
		.ndm_family = AF_INET, .ndm_ifindex = ifindex, .ndm_state = NUD_PERMANENT,
	};
	struct in_addr a;
	struct nlbuf b;

	inet_pton(AF_INET, ip, &a);
	nl_init(&b, RTM_NEWNEIGH, NLM_F_CREATE | NLM_F_REPLACE, &nd, sizeof(nd));
	nl_attr(&b, NDA_DST, &a, 4);
	nl_attr(&b, NDA_LLADDR, mac, 6);
	return nl_talk(&b);
}

static int link_mac(const char *name, unsigned char mac[6])
{
	struct ifreq ifr = { 0 };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), ret = 0;

	if (fd < 0)
		return -errno;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (ioctl(fd, SIOCGIFHWADDR, &ifr) < 0)
		ret = -errno;
	else
		memcpy(mac, ifr.ifr_hwaddr.sa_data, 6);
	close(fd);
	return ret;
}

/* ---------------------------------------------------------------------- */
/* Namespaces                                                             */

static int root_ns = -1;

static int ns_new(void)
{
	int fd;

	if (unshare(CLONE_NEWNET) < 0)
		return -errno;
	fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		fd = -errno;
	if (setns(root_ns, CLONE_NEWNET) < 0)
		return -errno;
	return fd;
}

static int ns_enter(int fd)
{
	return setns(fd, CLONE_NEWNET) < 0 ? -errno : 0;
}

static void sysctl_set(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);

	if (fd >= 0) {
		if (write(fd, val, strlen(val)) < 0) {
			/* best effort */
		}
		close(fd);
	}
}

/* Inside the netns of fd: lo up, IPv6 off (no ND noise), ifname up + addr. */
static int ns_prepare(void)
{
	int lo = if_nametoindex("lo");

	sysctl_set("/proc/sys/net/ipv6/conf/all/disable_ipv6", "1");
	sysctl_set("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1");
	return lo ? link_up(lo) : -ENODEV;
}

static int if_setup(const char *name, const char *ip, int plen)
{
	int idx = if_nametoindex(name), err;

	if (!idx)
		return -ENODEV;
	err = link_up(idx);
	if (!err && ip)
		err = addr_add(idx, ip, plen);
	return err ? err : idx;
}

/* ---------------------------------------------------------------------- */
/* The test bed                                                           */

struct bed {
	struct rpe_bpf *skel;
	int ns_src, ns_fwd, ns_dst, ns_nk, ns_nka;
	int src_fwd, dst_fwd, nkb, nka;		/* ifindexes in ns_fwd */
	bool have_netkit;
	char netkit_why[256];
};

#define CHECK(expr, what) do {						\
	int __e = (expr);						\
	if (__e < 0) {							\
		snprintf(err, errlen, "%s: %s", what, strerror(-__e));	\
		return -1;						\
	}								\
} while (0)

static int tc_attach(int ifindex, enum bpf_tc_attach_point where, struct bpf_program *prog)
{
	DECLARE_LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex, .attach_point = where);
	DECLARE_LIBBPF_OPTS(bpf_tc_opts, opts, .prog_fd = bpf_program__fd(prog));
	int err;

	err = bpf_tc_hook_create(&hook);
	if (err && err != -EEXIST)
		return err;
	return bpf_tc_attach(&hook, &opts);
}

/* A netkit link through the primary's ifindex; the link fd stays open (and
 * the program attached) for the life of the process. */
static int nk_attach(struct bpf_program *prog, int ifindex, int type)
{
	int fd = bpf_link_create(bpf_program__fd(prog), ifindex, type, NULL);

	return fd < 0 ? -errno : 0;
}

static int setup_veth(struct bed *bed, char *err, size_t errlen)
{
	unsigned char mac_src[6], mac_srcfwd[6];
	struct rpe_bpf *s = bed->skel;
	int idx;

	CHECK(bed->ns_src = ns_new(), "netns src");
	CHECK(bed->ns_fwd = ns_new(), "netns fwd");
	CHECK(bed->ns_dst = ns_new(), "netns dst");

	/* the pairs, host ends in ns_fwd */
	CHECK(ns_enter(bed->ns_fwd), "setns fwd");
	CHECK(ns_prepare(), "fwd lo");
	CHECK(link_pair_create("veth", "src_fwd", "src", bed->ns_src), "veth src");
	CHECK(link_pair_create("veth", "dst_fwd", "dst", bed->ns_dst), "veth dst");
	CHECK(bed->src_fwd = if_setup("src_fwd", "10.9.1.254", 24), "src_fwd");
	CHECK(bed->dst_fwd = if_setup("dst_fwd", "10.9.2.254", 24), "dst_fwd");
	CHECK(link_mac("src_fwd", mac_srcfwd), "mac src_fwd");

	CHECK(ns_enter(bed->ns_src), "setns src");
	CHECK(ns_prepare(), "src lo");
	CHECK(idx = if_setup("src", "10.9.1.1", 24), "src");
	CHECK(link_mac("src", mac_src), "mac src");
	CHECK(neigh_add(idx, "10.9.1.254", mac_srcfwd), "src neigh");
	CHECK(route_add("10.9.0.0", 16, "10.9.1.254", idx), "src route");

	CHECK(ns_enter(bed->ns_dst), "setns dst");
	CHECK(ns_prepare(), "dst lo");
	CHECK(idx = if_setup("dst", "10.9.2.1", 24), "dst");
	CHECK(tc_attach(idx, BPF_TC_EGRESS, s->progs.obs_peer_egress), "tc dst egress");
	CHECK(tc_attach(idx, BPF_TC_INGRESS, s->progs.obs_peer_ingress), "tc dst ingress");

	CHECK(ns_enter(bed->ns_fwd), "setns fwd");
	/* ns_fwd sends to 10.9.1.1 without ARP */
	CHECK(neigh_add(bed->src_fwd, "10.9.1.1", mac_src), "fwd neigh");
	CHECK(tc_attach(bed->src_fwd, BPF_TC_INGRESS, s->progs.inject), "tc src_fwd ingress");
	CHECK(tc_attach(bed->src_fwd, BPF_TC_EGRESS, s->progs.inject), "tc src_fwd egress");
	CHECK(tc_attach(bed->dst_fwd, BPF_TC_INGRESS, s->progs.obs_host_ingress), "tc dst_fwd ingress");
	CHECK(tc_attach(bed->dst_fwd, BPF_TC_EGRESS, s->progs.obs_host_egress), "tc dst_fwd egress");
	CHECK(ns_enter(root_ns), "setns root");
	return 0;
}

/* Returns 0, -1 on error, 1 when the kernel has no netkit. */
static int setup_netkit(struct bed *bed, char *err, size_t errlen)
{
	struct rpe_bpf *s = bed->skel;
	int idx, r;

	CHECK(bed->ns_nk = ns_new(), "netns nk");
	CHECK(bed->ns_nka = ns_new(), "netns nka");

	CHECK(ns_enter(bed->ns_fwd), "setns fwd");
	r = link_pair_create("netkit", "nkb", "nkb_p", bed->ns_nk);
	if (r == -EOPNOTSUPP || r == -EINVAL) {
		ns_enter(root_ns);
		snprintf(err, errlen, "kernel has no netkit (%s)", strerror(-r));
		return 1;
	}
	CHECK(r, "netkit nkb");
	CHECK(link_pair_create("netkit", "nka", "nka_p", bed->ns_nka), "netkit nka");
	CHECK(bed->nkb = if_setup("nkb", NULL, 0), "nkb");
	CHECK(bed->nka = if_setup("nka", NULL, 0), "nka");
	CHECK(tc_attach(bed->nkb, BPF_TC_INGRESS, s->progs.obs_host_ingress), "tc nkb ingress");
	CHECK(tc_attach(bed->nkb, BPF_TC_EGRESS, s->progs.obs_host_egress), "tc nkb egress");
	CHECK(nk_attach(s->progs.obs_netkit_peer, bed->nkb, RPE_BPF_NETKIT_PEER), "netkit peer link nkb");
	CHECK(nk_attach(s->progs.obs_netkit_primary, bed->nkb, RPE_BPF_NETKIT_PRIMARY), "netkit primary link nkb");
	CHECK(nk_attach(s->progs.inject, bed->nka, RPE_BPF_NETKIT_PEER), "netkit peer link nka");

	CHECK(ns_enter(bed->ns_nk), "setns nk");
	CHECK(ns_prepare(), "nk lo");
	CHECK(idx = if_setup("nkb_p", "10.9.3.1", 24), "nkb_p");
	CHECK(tc_attach(idx, BPF_TC_EGRESS, s->progs.obs_peer_egress), "tc nkb_p egress");
	CHECK(tc_attach(idx, BPF_TC_INGRESS, s->progs.obs_peer_ingress), "tc nkb_p ingress");

	CHECK(ns_enter(bed->ns_nka), "setns nka");
	CHECK(ns_prepare(), "nka lo");
	CHECK(idx = if_setup("nka_p", "10.9.4.1", 24), "nka_p");
	CHECK(route_add("10.9.0.0", 16, NULL, idx), "nka route");
	CHECK(ns_enter(root_ns), "setns root");
	return 0;
}

/* Send NPKT UDP datagrams to ip:TEST_PORT from inside netns fd. */
static int send_udp(int ns, const char *ip)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(TEST_PORT) };
	int fd, i, ret = 0;

	if (ns_enter(ns))
		return -errno;
	inet_pton(AF_INET, ip, &sa.sin_addr);
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		ret = -errno;
		goto out;
	}
	for (i = 0; i < NPKT; i++) {
		char payload[32];
		int n = snprintf(payload, sizeof(payload), "podinject-lab %d", i);

		if (sendto(fd, payload, n, 0, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			ret = -errno;
			break;
		}
	}
	close(fd);
out:
	ns_enter(root_ns);
	return ret;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static const char *cnt_name[RPE_NR_COUNTERS] = {
	[RPE_CNT_INJECT] = "inject",
	[RPE_CNT_PEER_EGRESS] = "peer_egress",
	[RPE_CNT_PEER_INGRESS] = "peer_ingress",
	[RPE_CNT_NETKIT_PEER] = "netkit_peer",
	[RPE_CNT_NETKIT_PRIMARY] = "netkit_primary",
	[RPE_CNT_HOST_INGRESS] = "host_ingress",
	[RPE_CNT_HOST_EGRESS] = "host_egress",
};

enum src { FROM_SRC_NS, FROM_FWD_NS, FROM_NKA_NS };

struct tcase {
	const char *name;
	bool netkit;		/* target is nkb instead of dst_fwd */
	bool needs_flag;	/* needs BPF_F_EGRESS */
	enum src from;
	enum rpe_mode mode;
	__u64 flags;
	long ret;		/* expected return of the helper */
	int expect[RPE_NR_COUNTERS];	/* in packets, multiplied by NPKT */
};

/* expect[] shorthands */
#define E(inj, pe, pi, nkp, nkm, hi, he) { inj, pe, pi, nkp, nkm, hi, he }

static const struct tcase cases[] = {
	/* veth: dst (pod, ns_dst) <-> dst_fwd (host side, ns_fwd) */
	{ "veth_tc_ingress_egress_flag", false, true, FROM_SRC_NS, RPE_MODE_PEER,
	  RPE_BPF_F_EGRESS, TC_ACT_REDIRECT_, E(1, 1, 0, 0, 0, 1, 0) },
	{ "veth_tc_egress_egress_flag", false, true, FROM_FWD_NS, RPE_MODE_PEER,
	  RPE_BPF_F_EGRESS, TC_ACT_REDIRECT_, E(1, 1, 0, 0, 0, 1, 0) },
	{ "veth_tc_ingress_flags0_receives", false, false, FROM_SRC_NS, RPE_MODE_PEER,
	  0, TC_ACT_REDIRECT_, E(1, 0, 1, 0, 0, 0, 0) },
	{ "veth_tc_egress_flags0_drops", false, false, FROM_FWD_NS, RPE_MODE_PEER,
	  0, TC_ACT_REDIRECT_, E(1, 0, 0, 0, 0, 0, 0) },
	{ "veth_tc_ingress_unknown_flag_shot", false, false, FROM_SRC_NS, RPE_MODE_PEER,
	  RPE_BPF_F_EGRESS | RPE_BPF_F_INGRESS, TC_ACT_SHOT_, E(1, 0, 0, 0, 0, 0, 0) },
	{ "veth_fallback_redirect_ingress", false, false, FROM_SRC_NS, RPE_MODE_REDIRECT,
	  RPE_BPF_F_INGRESS, TC_ACT_REDIRECT_, E(1, 0, 0, 0, 0, 1, 0) },
	/* netkit: nkb_p (peer, ns_nk) <-> nkb (primary, ns_fwd) */
	{ "netkit_tc_ingress_egress_flag", true, true, FROM_SRC_NS, RPE_MODE_PEER,
	  RPE_BPF_F_EGRESS, TC_ACT_REDIRECT_, E(1, 1, 0, 1, 0, 1, 0) },
	{ "netkit_tc_egress_egress_flag", true, true, FROM_FWD_NS, RPE_MODE_PEER,
	  RPE_BPF_F_EGRESS, TC_ACT_REDIRECT_, E(1, 1, 0, 1, 0, 1, 0) },
	{ "netkit_prog_egress_flag", true, true, FROM_NKA_NS, RPE_MODE_PEER,
	  RPE_BPF_F_EGRESS, TC_ACT_REDIRECT_, E(1, 1, 0, 1, 0, 1, 0) },
	{ "netkit_tc_ingress_flags0_receives", true, false, FROM_SRC_NS, RPE_MODE_PEER,
	  0, TC_ACT_REDIRECT_, E(1, 0, 1, 0, 0, 0, 0) },
	{ "netkit_tc_egress_flags0_drops", true, false, FROM_FWD_NS, RPE_MODE_PEER,
	  0, TC_ACT_REDIRECT_, E(1, 0, 0, 0, 0, 0, 0) },
	/* the fallback enters the primary and skips the pod's egress programs */
	{ "netkit_fallback_skips_peer_progs", true, false, FROM_SRC_NS, RPE_MODE_REDIRECT,
	  RPE_BPF_F_INGRESS, TC_ACT_REDIRECT_, E(1, 0, 0, 0, 0, 1, 0) },
};

static void reset(struct rpe_bpf *s)
{
	memset((void *)s->bss->counters, 0, sizeof(s->bss->counters));
	s->bss->last_ret = -12345;
}

static void run_case(struct bed *bed, const struct tcase *c, bool have_flag)
{
	struct rpe_bpf *s = bed->skel;
	const char *dest;
	int ns, i, err, waited;
	char got[256];
	int len = 0;
	bool ok;

	if (c->netkit && !bed->have_netkit) {
		skip(c->name, bed->netkit_why);
		return;
	}
	if (c->needs_flag && !have_flag && !force_egress) {
		skip(c->name, "kernel lacks BPF_F_EGRESS");
		return;
	}

	reset(s);
	s->bss->target_ifindex = c->netkit ? bed->nkb : bed->dst_fwd;
	s->bss->redirect_flags = c->flags;
	s->bss->redirect_mode = c->mode;

	switch (c->from) {
	case FROM_SRC_NS: ns = bed->ns_src; dest = c->netkit ? "10.9.3.1" : "10.9.2.1"; break;
	case FROM_FWD_NS: ns = bed->ns_fwd; dest = "10.9.1.1"; break;
	default:          ns = bed->ns_nka; dest = "10.9.3.1"; break;
	}
	err = send_udp(ns, dest);
	if (err) {
		fail(c->name, "sending: %s", strerror(-err));
		return;
	}

	/* Wait until every expected count is reached (TCG is slow), then a
	 * little longer so that a second sighting would show. */
	for (waited = 0; waited < 5000; waited += 50) {
		ok = true;
		for (i = 0; i < RPE_NR_COUNTERS; i++)
			if (s->bss->counters[i] < (__u64)c->expect[i] * NPKT)
				ok = false;
		if (ok)
			break;
		sleep_ms(50);
	}
	sleep_ms(300);

	ok = s->bss->last_ret == c->ret;
	for (i = 0; i < RPE_NR_COUNTERS; i++) {
		if (s->bss->counters[i] != (__u64)c->expect[i] * NPKT)
			ok = false;
		len += snprintf(got + len, sizeof(got) - len, "%s%s=%llu/%d",
				i ? " " : "", cnt_name[i],
				(unsigned long long)s->bss->counters[i], c->expect[i] * NPKT);
	}
	if (ok)
		pass(c->name);
	else
		fail(c->name, "helper returned %lld (want %ld); counts got/want: %s",
		     (long long)s->bss->last_ret, c->ret, got);
}

/* BPF_PROG_TEST_RUN of bpf_redirect_peer(1, flags): returns the retval. */
static int probe_run(struct rpe_bpf *s, __u64 flags, __u32 *retval)
{
	char pkt[64] = { 0 };
	DECLARE_LIBBPF_OPTS(bpf_test_run_opts, topts,
		.data_in = pkt, .data_size_in = sizeof(pkt), .repeat = 1);
	int err;

	pkt[12] = 0x08;		/* ETH_P_IP, the rest zero */
	s->bss->probe_flags = flags;
	err = bpf_prog_test_run_opts(bpf_program__fd(s->progs.probe), &topts);
	if (err)
		return err;
	*retval = topts.retval;
	return 0;
}

static int libbpf_quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_WARN && getenv("RPE_VERBOSE"))
		return vfprintf(stderr, fmt, ap);
	return 0;
}

int main(int argc, char **argv)
{
	static const __u64 bad_flags[] = {
		1, 3, 4, 0x100, (1ULL << 32) | 2, 1ULL << 63,
	};
	bool summary = false, have_flag = false;
	struct bed bed = { .ns_src = -1 };
	char err[256];
	__u32 rv;
	size_t i;
	int r;

	for (i = 1; i < (size_t)argc; i++) {
		if (!strcmp(argv[i], "--force"))
			force_egress = true;
		else if (!strcmp(argv[i], "--summary"))
			summary = true;
		else {
			fprintf(stderr, "usage: %s [--force] [--summary]\n", argv[0]);
			return 2;
		}
	}
	if (getenv("RPE_FORCE") && !strcmp(getenv("RPE_FORCE"), "1"))
		force_egress = true;
	setvbuf(stdout, NULL, _IOLBF, 0);
	libbpf_set_print(libbpf_quiet);

	root_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	bed.skel = rpe_bpf__open_and_load();
	if (!bed.skel || root_ns < 0) {
		fail("load", "cannot load the BPF object (%s)", strerror(errno));
		goto out;
	}

	/* --- the probe and the flag checks, no packets involved --- */
	r = probe_run(bed.skel, 0, &rv);
	if (r)
		fail("probe_flags0", "BPF_PROG_TEST_RUN: %s", strerror(-r));
	else if (rv != TC_ACT_REDIRECT_)
		fail("probe_flags0", "bpf_redirect_peer(1, 0) returned %u, want TC_ACT_REDIRECT", rv);
	else
		pass("probe_flags0");

	r = probe_run(bed.skel, RPE_BPF_F_EGRESS, &rv);
	have_flag = !r && rv == TC_ACT_REDIRECT_;
	if (r)
		fail("probe_egress_flag", "BPF_PROG_TEST_RUN: %s", strerror(-r));
	else if (have_flag)
		pass("probe_egress_flag");
	else if (force_egress)
		fail("probe_egress_flag", "bpf_redirect_peer(1, BPF_F_EGRESS) returned %u: kernel lacks BPF_F_EGRESS", rv);
	else
		skip("probe_egress_flag", "kernel lacks BPF_F_EGRESS");

	{
		char bad[128] = "";
		int blen = 0;

		for (i = 0; i < sizeof(bad_flags) / sizeof(bad_flags[0]); i++) {
			r = probe_run(bed.skel, bad_flags[i], &rv);
			if (r || rv != TC_ACT_SHOT_)
				blen += snprintf(bad + blen, sizeof(bad) - blen, " %#llx->%d",
						 (unsigned long long)bad_flags[i], r ? r : (int)rv);
		}
		if (blen)
			fail("probe_unknown_flags_shot", "not TC_ACT_SHOT:%s", bad);
		else
			pass("probe_unknown_flags_shot");
	}

	/* --- the data path --- */
	if (setup_veth(&bed, err, sizeof(err))) {
		fail("setup_veth", "%s", err);
		goto out;
	}
	r = setup_netkit(&bed, err, sizeof(err));
	if (r < 0) {
		fail("setup_netkit", "%s", err);
		snprintf(bed.netkit_why, sizeof(bed.netkit_why), "netkit setup failed");
	} else if (r > 0) {
		snprintf(bed.netkit_why, sizeof(bed.netkit_why), "%s", err);
	} else {
		bed.have_netkit = true;
	}

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		run_case(&bed, &cases[i], have_flag);

	if (bed.skel->bss->loop_sum == 0)
		fail("bpf_loop", "the injector's bpf_loop() never ran");
	else
		pass("bpf_loop");
out:
	if (summary)
		printf("%d passed, %d failed, %d skipped\n", n_pass, n_fail, n_skip);
	rpe_bpf__destroy(bed.skel);
	return n_fail ? 1 : 0;
}
