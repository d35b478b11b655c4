/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Network namespaces and rtnetlink, the small set of operations podinject
 * needs to build pods. Every function works in the calling thread's current
 * network namespace unless it takes a namespace fd, and returns 0 (or a
 * non-negative value where documented) on success and -errno on failure.
 * Nothing here prints: callers report errors where the context is.
 */
#ifndef PODINJECT_NL_H
#define PODINJECT_NL_H

#include <stdbool.h>
#include <stdint.h>
#include <netinet/in.h>

#define NETNS_RUN_DIR "/run/netns"

/* Named namespaces, compatible with `ip netns` (bind mounts in /run/netns). */
int netns_create(const char *name);	/* -EEXIST if the name is taken */
int netns_delete(const char *name);	/* -ENOENT if there is no such name */
bool netns_exists(const char *name);
int netns_open(const char *name);	/* O_RDONLY fd of the namespace */
/* A name as above, or a path (anything with a '/': /proc/PID/ns/net, a
 * runtime's bind mount). */
int netns_open_any(const char *name_or_path);
/* Switch the calling thread to the namespace behind fd; *saved receives an
 * fd of the namespace it was in, for netns_restore(). */
int netns_enter(int fd, int *saved);
int netns_restore(int saved);		/* setns back and close saved */

/* Links */
int nl_link_index(const char *name);	/* ifindex, or -ENXIO: none */
int nl_link_name(int ifindex, char name[16]);
int nl_link_set_up(int ifindex);
int nl_link_get_mac(int ifindex, uint8_t mac[6]);
int nl_link_del(int ifindex);
/* Create a veth pair: `name` stays in the current namespace; `peer` is
 * created directly inside the namespace behind peer_netns_fd (or stays here
 * when peer_netns_fd < 0). */
int nl_veth_create(const char *name, const char *peer, int peer_netns_fd);
/* Create a netkit pair in L3 mode with the default policy "forward" for both
 * ends: `name` is the primary and stays here, `peer` goes to peer_netns_fd.
 * Returns -EOPNOTSUPP when the kernel has no netkit. */
int nl_netkit_create(const char *name, const char *peer, int peer_netns_fd);
/* The ifindex of a veth or netkit device's peer (IFLA_LINK: in the
 * peer's own namespace), or -ENOLINK for a device that has none. */
int nl_link_peer(int ifindex);
/* The same, when that peer is in the namespace `netns_fd`; -EXDEV when it
 * is in another one (an ifindex names a device only in its namespace: a
 * device there with that number is not the peer). */
int nl_link_peer_in(int ifindex, int netns_fd);
/* Link kind as the kernel reports it ("veth", "netkit", ...). */
int nl_link_kind(int ifindex, char kind[16]);
int nl_link_set_netns(int ifindex, int netns_fd);
/* Wait until the link can carry traffic: up, with carrier, and its transmit
 * queues activated. Right after a veth/netkit peer comes up the kernel does
 * that asynchronously, and until it has, packets sent through the link are
 * silently dropped. -ETIMEDOUT if that does not happen in timeout_ms (for
 * instance because the peer is down). Call it on both ends after setting
 * them up, before sending anything. */
int nl_link_wait_running(int ifindex, int timeout_ms);
/* How long a new device or address may take to work. The kernel's
 * linkwatch, which activates a device, needs RTNL, and on a loaded node
 * (a runtime starting many pods, each tcx attach holding RTNL across two
 * RCU grace periods) it can wait for seconds: too short a bound fails a
 * pod start at random. */
#define NL_READY_TIMEOUT_MS	10000

/* Addresses, routes and neighbours. Addresses are in network byte order:
 * 4 bytes for AF_INET, 16 for AF_INET6. */
/* IPv6 addresses skip DAD, and the call returns once the kernel delivers
 * packets to the address (-ETIMEDOUT if that takes over 2 s). */
int nl_addr_add(int ifindex, int family, const void *addr, int prefixlen);
/* Route to dst/plen. gw may be NULL (a link route). For a gateway route the
 * nexthop is marked onlink, so the gateway needs no covering prefix. */
int nl_route_add(int family, const void *dst, int plen, const void *gw,
		 int oif);
int nl_route_del(int family, const void *dst, int plen, int oif);
/* "ip route add|del local default dev OIF table TABLE": in that table
 * every destination is this namespace's own. */
int nl_route_local_default(int family, int table, int oif, bool add);
/* "ip rule add|del iif IIFNAME lookup TABLE pref PRIO" */
int nl_rule_iif(int family, const char *iifname, int table, int prio,
		bool add);
/* A permanent neighbour entry. */
int nl_neigh_add(int ifindex, int family, const void *addr,
		 const uint8_t mac[6]);

/* sysctl helpers for the current namespace, e.g. "net/ipv4/ip_forward". */
int sysctl_write(const char *path, const char *value);
int sysctl_read(const char *path, char *buf, size_t len);

/* Sockets of the current namespace (sock_diag): fn is called on each of
 * protocol `proto` (IPPROTO_TCP, IPPROTO_UDP) in `family` whose state
 * (the kernel's TCP_* numbering; a connected UDP socket is
 * TCP_ESTABLISHED) is in the mask `states` (1 << state); a non-zero return
 * ends the walk and is returned. Addresses in network order, ports in
 * host order; an AF_INET6 socket may carry IPv4-mapped addresses. */
struct nl_sock {
	int family;
	uint8_t state;
	uint8_t local[16], remote[16];
	uint16_t local_port, remote_port;
};
int nl_sock_dump(int family, int proto, uint32_t states,
		 int (*fn)(const struct nl_sock *sk, void *ctx), void *ctx);

/* How many tc filters (each priority's head counts too) are on the
 * ingress or egress hook of ifindex's clsact qdisc: 0 too when there is
 * no such qdisc or device (the kernel's dump is empty then); -errno. */
int nl_tc_filter_count(int ifindex, bool ingress);

#endif
