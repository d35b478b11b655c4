/* SPDX-License-Identifier: GPL-2.0 */
/*
 * transparent.so: LD_PRELOAD shim that makes every IPv4/IPv6 socket an
 * unmodified program binds IP_TRANSPARENT first. With it, `iperf3 -B ADDR`
 * can bind and connect from an address its namespace does not own, as an
 * injector (or podinject-proxy's upstream socket) does. Routing needs the
 * flag itself, not just the bind: net.ipv4.ip_nonlocal_bind lets the bind
 * succeed, but the route lookup of a non-local source then fails with
 * ENETUNREACH unless the socket is transparent.
 */
#include <dlfcn.h>
#include <netinet/in.h>
#include <sys/socket.h>

#ifndef IP_TRANSPARENT
#define IP_TRANSPARENT		19
#endif
#ifndef IPV6_TRANSPARENT
#define IPV6_TRANSPARENT	75
#endif

int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	static int (*real_bind)(int, const struct sockaddr *, socklen_t);
	int one = 1;

	if (!real_bind)
		real_bind = (int (*)(int, const struct sockaddr *, socklen_t))
			dlsym(RTLD_NEXT, "bind");
	if (addr && addr->sa_family == AF_INET)
		setsockopt(fd, SOL_IP, IP_TRANSPARENT, &one, sizeof(one));
	else if (addr && addr->sa_family == AF_INET6)
		setsockopt(fd, SOL_IPV6, IPV6_TRANSPARENT, &one, sizeof(one));
	return real_bind(fd, addr, len);
}
