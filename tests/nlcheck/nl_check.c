/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nl_check: an end-to-end check of src/nl.c against the running kernel.
 *
 * `make` builds it as build/nl_check (with src/nl.c and libmnl) and
 * tests/run.sh runs it (as root), one test line of its own:
 *
 *   ./build/nl_check
 *
 * It builds two namespaces, nlchk-a and nlchk-b, joined by a veth pair, with
 * /32 and /128 addresses, link routes and permanent neighbours on both sides,
 * and proves a UDP datagram gets from a to b over IPv4 and IPv6. Along the
 * way it exercises the rest of the API (onlink gateway routes, moving a link
 * between namespaces, sysctls) and reports whether the kernel has netkit.
 * The namespaces are removed at the end whatever happened.
 *
 * Prints "PASS nl_check" and exits 0, or "FAIL nl_check: reason" and exits 1.
 * This lives outside tests/tools/ because the Makefile builds every file
 * there on its own, without nl.c.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "nl.h"

#define NS_A	"nlchk-a"
#define NS_B	"nlchk-b"
#define PORT	47999

static char reason[512];

static int fail(const char *fmt, ...)
{
	va_list ap;

	/* Keep the first reason: later ones are usually consequences. */
	if (reason[0])
		return -1;
	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	return -1;
}

#define CHECK(call, what) do {						\
	int __e = (call);						\
	if (__e < 0)							\
		return fail("%s: %s", what, strerror(-__e));		\
} while (0)

static ino_t netns_ino(void)
{
	struct stat st;

	if (stat("/proc/thread-self/ns/net", &st) < 0)
		return 0;
	return st.st_ino;
}

struct side {
	const char *ns;
	int fd;
	int ifindex;
	uint8_t mac[6];
	struct in_addr v4;
	struct in6_addr v6;
};

/* Runs fn inside side's namespace and always comes back. */
static int in_ns(struct side *s, int (*fn)(struct side *, void *), void *arg)
{
	int saved, err, r;

	err = netns_enter(s->fd, &saved);
	if (err)
		return fail("enter %s: %s", s->ns, strerror(-err));
	r = fn(s, arg);
	err = netns_restore(saved);
	if (err)
		return fail("restore from %s: %s", s->ns, strerror(-err));
	return r;
}

static int make_veth(struct side *a, void *arg)
{
	struct side *b = arg;
	char kind[16];

	CHECK(nl_veth_create("nlchk0", "nlchk1", b->fd), "veth create");
	CHECK(a->ifindex = nl_link_index("nlchk0"), "index nlchk0");
	CHECK(nl_link_kind(a->ifindex, kind), "kind nlchk0");
	if (strcmp(kind, "veth"))
		return fail("kind of nlchk0 is '%s', not veth", kind);
	/* The peer must not have been left here. */
	if (nl_link_index("nlchk1") != -ENXIO)
		return fail("peer nlchk1 visible in %s", a->ns);
	return 0;
}

static int setup_side(struct side *s, void *arg)
{
	const char *ifname = arg;
	char name[16];

	if (s->ifindex <= 0)
		CHECK(s->ifindex = nl_link_index(ifname), "index");
	CHECK(nl_link_name(s->ifindex, name), "name");
	if (strcmp(name, ifname))
		return fail("ifindex %d is %s, not %s", s->ifindex, name, ifname);
	CHECK(nl_link_set_up(s->ifindex), "link up");
	CHECK(nl_link_get_mac(s->ifindex, s->mac), "get mac");
	CHECK(nl_addr_add(s->ifindex, AF_INET, &s->v4, 32), "addr v4");
	CHECK(nl_addr_add(s->ifindex, AF_INET6, &s->v6, 128), "addr v6");
	if (nl_addr_add(s->ifindex, AF_INET, &s->v4, 32) != -EEXIST)
		return fail("adding the same address twice is not -EEXIST");
	return 0;
}

static int routes_to(struct side *s, void *arg)
{
	struct side *peer = arg;

	/* Both ends are up by now; without this wait about one run in four
	 * lost its first datagram to the not yet activated tx queue. */
	CHECK(nl_link_wait_running(s->ifindex, 2000), "wait running");

	CHECK(nl_route_add(AF_INET, &peer->v4, 32, NULL, s->ifindex),
	      "route v4");
	CHECK(nl_route_add(AF_INET6, &peer->v6, 128, NULL, s->ifindex),
	      "route v6");
	CHECK(nl_neigh_add(s->ifindex, AF_INET, &peer->v4, peer->mac),
	      "neigh v4");
	CHECK(nl_neigh_add(s->ifindex, AF_INET6, &peer->v6, peer->mac),
	      "neigh v6");
	/* REPLACE makes a second add harmless. */
	CHECK(nl_neigh_add(s->ifindex, AF_INET, &peer->v4, peer->mac),
	      "neigh v4 again");
	return 0;
}

/* Pod-style default routes through a gateway no prefix covers. */
static int gateway_routes(struct side *s, void *arg)
{
	struct in_addr gw4;
	struct in6_addr gw6;

	inet_pton(AF_INET, "169.254.1.1", &gw4);
	inet_pton(AF_INET6, "fe80::1", &gw6);
	CHECK(nl_route_add(AF_INET, NULL, 0, &gw4, s->ifindex),
	      "default via 169.254.1.1 onlink");
	CHECK(nl_route_add(AF_INET6, NULL, 0, &gw6, s->ifindex),
	      "default via fe80::1 onlink");
	if (nl_route_add(AF_INET6, NULL, 0, &gw6, s->ifindex) != -EEXIST)
		return fail("adding the v6 default route twice is not -EEXIST");
	CHECK(nl_route_del(AF_INET, NULL, 0, s->ifindex), "del v4 default");
	CHECK(nl_route_del(AF_INET6, NULL, 0, s->ifindex), "del v6 default");
	if (nl_route_del(AF_INET, NULL, 0, s->ifindex) != -ESRCH)
		return fail("deleting a missing route is not -ESRCH");
	return 0;
}

static int sysctls(struct side *s, void *arg)
{
	char buf[32];

	CHECK(sysctl_write("net/ipv4/ip_forward", "1"), "sysctl write");
	CHECK(sysctl_read("net/ipv4/ip_forward", buf, sizeof(buf)),
	      "sysctl read");
	if (strcmp(buf, "1"))
		return fail("ip_forward reads '%s' after writing 1", buf);
	if (sysctl_read("net/ipv4/no_such_knob", buf, sizeof(buf)) != -ENOENT)
		return fail("missing sysctl is not -ENOENT");
	return 0;
}

/* A link created here and then moved: exercises nl_link_set_netns. */
static int move_link(struct side *a, void *arg)
{
	struct side *b = arg;
	int idx;

	CHECK(nl_veth_create("nlchk2", "nlchk3", -1), "local veth create");
	CHECK(idx = nl_link_index("nlchk2"), "index nlchk2");
	CHECK(nl_link_set_up(idx), "nlchk2 up");
	if (nl_link_wait_running(idx, 50) != -ETIMEDOUT)
		return fail("a veth whose peer is down is running");
	CHECK(idx = nl_link_index("nlchk3"), "index nlchk3");
	CHECK(nl_link_set_netns(idx, b->fd), "set netns");
	if (nl_link_index("nlchk3") != -ENXIO)
		return fail("nlchk3 still in %s after set_netns", a->ns);
	CHECK(idx = nl_link_index("nlchk2"), "index nlchk2");
	CHECK(nl_link_del(idx), "link del");
	if (nl_link_index("nlchk2") != -ENXIO)
		return fail("nlchk2 still there after del");
	return 0;
}

static int moved_gone(struct side *b, void *arg)
{
	/* Deleting one end of a veth takes the other with it. */
	if (nl_link_index("nlchk3") != -ENXIO)
		return fail("nlchk3 survived its peer");
	return 0;
}

struct udp_sock {
	int family;
	int fd;
};

static void fill_sa(int family, const void *addr, struct sockaddr_storage *ss,
		    socklen_t *len)
{
	memset(ss, 0, sizeof(*ss));
	if (family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;

		sin->sin_family = AF_INET;
		sin->sin_port = htons(PORT);
		memcpy(&sin->sin_addr, addr, 4);
		*len = sizeof(*sin);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(PORT);
		memcpy(&sin6->sin6_addr, addr, 16);
		*len = sizeof(*sin6);
	}
}

/* In b: bind the receiver on b's own address (fails if v6 is tentative). */
static int udp_listen(struct side *b, void *arg)
{
	struct udp_sock *u = arg;
	struct sockaddr_storage ss;
	socklen_t len;

	fill_sa(u->family, u->family == AF_INET ? (void *)&b->v4 : (void *)&b->v6,
		&ss, &len);
	u->fd = socket(u->family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (u->fd < 0)
		return fail("socket: %s", strerror(errno));
	if (bind(u->fd, (struct sockaddr *)&ss, len) < 0)
		return fail("bind in %s (v%d): %s", b->ns,
			    u->family == AF_INET ? 4 : 6, strerror(errno));
	return 0;
}

struct udp_send {
	int family;
	const void *dst;
};

static int udp_send(struct side *a, void *arg)
{
	struct udp_send *us = arg;
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, r;

	fill_sa(us->family, us->dst, &ss, &len);
	fd = socket(us->family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return fail("socket: %s", strerror(errno));
	r = sendto(fd, "nl_check", 8, 0, (struct sockaddr *)&ss, len);
	close(fd);
	if (r != 8)
		return fail("sendto from %s (v%d): %s", a->ns,
			    us->family == AF_INET ? 4 : 6, strerror(errno));
	return 0;
}

static int udp_roundtrip(struct side *a, struct side *b, int family)
{
	struct udp_sock u = { .family = family, .fd = -1 };
	struct udp_send us = { .family = family };
	struct sockaddr_storage from;
	socklen_t flen = sizeof(from);
	struct pollfd pfd;
	char buf[64];
	const void *want;
	int v = family == AF_INET ? 4 : 6;
	int r = -1;
	ssize_t n;

	us.dst = family == AF_INET ? (void *)&b->v4 : (void *)&b->v6;
	want = family == AF_INET ? (void *)&a->v4 : (void *)&a->v6;
	if (in_ns(b, udp_listen, &u))
		goto out;
	if (in_ns(a, udp_send, &us))
		goto out;
	pfd.fd = u.fd;
	pfd.events = POLLIN;
	if (poll(&pfd, 1, 2000) != 1) {
		fail("no v%d datagram from %s reached %s", v, a->ns, b->ns);
		goto out;
	}
	n = recvfrom(u.fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &flen);
	if (n != 8 || memcmp(buf, "nl_check", 8)) {
		fail("v%d datagram garbled", v);
		goto out;
	}
	if ((family == AF_INET &&
	     memcmp(&((struct sockaddr_in *)&from)->sin_addr, want, 4)) ||
	    (family == AF_INET6 &&
	     memcmp(&((struct sockaddr_in6 *)&from)->sin6_addr, want, 16))) {
		fail("v%d datagram has the wrong source", v);
		goto out;
	}
	printf("ok udp v%d %s -> %s\n", v, a->ns, b->ns);
	r = 0;
out:
	if (u.fd >= 0)
		close(u.fd);
	return r;
}

static int try_netkit(struct side *a, void *arg)
{
	struct side *b = arg;
	char kind[16];
	int err, idx;

	err = nl_netkit_create("nlchk-nk0", "nlchk-nk1", b->fd);
	if (err == -EOPNOTSUPP) {
		printf("netkit: not supported by this kernel\n");
		return 0;
	}
	if (err)
		return fail("netkit create: %s", strerror(-err));
	CHECK(idx = nl_link_index("nlchk-nk0"), "index nlchk-nk0");
	CHECK(nl_link_kind(idx, kind), "kind nlchk-nk0");
	if (strcmp(kind, "netkit"))
		return fail("kind of nlchk-nk0 is '%s', not netkit", kind);
	CHECK(nl_link_del(idx), "netkit del");
	printf("netkit: supported\n");
	return 0;
}

static int run(struct side *a, struct side *b)
{
	ino_t before = netns_ino();
	int err;

	err = netns_create(a->ns);
	if (err)
		return fail("netns_create %s: %s", a->ns, strerror(-err));
	err = netns_create(b->ns);
	if (err)
		return fail("netns_create %s: %s", b->ns, strerror(-err));
	if (netns_ino() != before)
		return fail("netns_create changed the caller's namespace");
	if (netns_create(a->ns) != -EEXIST)
		return fail("netns_create of an existing name is not -EEXIST");
	if (!netns_exists(a->ns) || netns_exists("nlchk-none"))
		return fail("netns_exists is wrong");
	if (netns_open("nlchk-none") != -ENOENT)
		return fail("netns_open of a missing name is not -ENOENT");
	CHECK(a->fd = netns_open(a->ns), "open a");
	CHECK(b->fd = netns_open(b->ns), "open b");

	if (in_ns(a, make_veth, b) || in_ns(a, setup_side, "nlchk0") ||
	    in_ns(b, setup_side, "nlchk1") || in_ns(a, routes_to, b) ||
	    in_ns(b, routes_to, a))
		return -1;
	if (netns_ino() != before)
		return fail("caller's namespace changed");
	if (udp_roundtrip(a, b, AF_INET) || udp_roundtrip(a, b, AF_INET6) ||
	    udp_roundtrip(b, a, AF_INET) || udp_roundtrip(b, a, AF_INET6))
		return -1;
	if (in_ns(a, gateway_routes, NULL) || in_ns(a, sysctls, NULL) ||
	    in_ns(a, move_link, b) || in_ns(b, moved_gone, NULL))
		return -1;
	if (in_ns(a, try_netkit, b))
		return -1;
	if (netns_ino() != before)
		return fail("caller's namespace changed");
	return 0;
}

int main(void)
{
	struct side a = { .ns = NS_A, .fd = -1 }, b = { .ns = NS_B, .fd = -1 };
	int r, err;

	inet_pton(AF_INET, "10.250.0.1", &a.v4);
	inet_pton(AF_INET, "10.250.0.2", &b.v4);
	inet_pton(AF_INET6, "fd99::1", &a.v6);
	inet_pton(AF_INET6, "fd99::2", &b.v6);

	/* Leftovers of an earlier run that was killed. */
	netns_delete(NS_A);
	netns_delete(NS_B);

	r = run(&a, &b);

	if (a.fd >= 0)
		close(a.fd);
	if (b.fd >= 0)
		close(b.fd);
	err = netns_delete(NS_A);
	if (err && err != -ENOENT)
		fail("netns_delete %s: %s", NS_A, strerror(-err));
	err = netns_delete(NS_B);
	if (err && err != -ENOENT)
		fail("netns_delete %s: %s", NS_B, strerror(-err));
	if (netns_exists(NS_A) || netns_exists(NS_B))
		fail("namespaces still exist after netns_delete");
	if (netns_delete(NS_A) != -ENOENT)
		fail("netns_delete of a missing name is not -ENOENT");

	if (r || reason[0]) {
		printf("FAIL nl_check: %s\n", reason[0] ? reason : "unknown");
		return 1;
	}
	printf("PASS nl_check\n");
	return 0;
}
