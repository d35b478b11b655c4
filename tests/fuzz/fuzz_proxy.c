/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Fuzzer of podinject-proxy's handling of what clients send it over UDP:
 * the datagram path (recvmsg, the original destination from its control
 * message, the session of a (client, destination) pair, the forward
 * upstream) and the reply path, with real sockets on loopback in a
 * private network namespace. proxy/podinject-proxy.c is compiled in (its
 * main() renamed) and its own functions run: recv_udp() on the listener,
 * udp_reply() on a session, expire().
 *
 * An input is a sequence of events, 4 bytes and a payload each:
 *   datagram  a client (one of 16, IPv4 or IPv6) sends to a destination
 *             (one of 8 local addresses on the proxy's port)
 *   reply     the destination of a session answers it
 *   expire    every session idle (all go) or none idle (all stay)
 *
 * Invariants after each event: one session per (client, destination)
 * pair seen and not expired, no other; a session's upstream socket is
 * bound to its client's address and connected to the destination, its
 * reply socket bound to the destination; a datagram reaches the
 * destination unchanged, a reply reaches the client unchanged, from the
 * destination's address. After each input, with every session expired,
 * no descriptor is left open.
 */
#define main podinject_proxy_main
#include "../../proxy/podinject-proxy.c"
#undef main

#include <dirent.h>
#include <sched.h>
#include <net/if.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "steer.skel.h"

#define CHECK(cond, ...)						\
	do {								\
		if (!(cond)) {						\
			fprintf(stderr, "fuzz_proxy: " __VA_ARGS__);	\
			fprintf(stderr, " (%s)\n", #cond);		\
			abort();					\
		}							\
	} while (0)

#define PORT		15001
#define NCLIENTS	16
#define NDSTS		8
#define MAX_EVENTS_IN	32
#define PAYLOAD_MAX	1400

static int listener[2];		/* AF_INET, AF_INET6 */
static struct steer_bpf *skel;
static struct bpf_link *steer_link;

/* The model: which pairs have a session. */
static bool has_session[2][NCLIENTS][NDSTS];

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int n = 0;

	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n - 1;	/* the directory's own */
}

static void client_addr(int fam, int c, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (fam == 0) {
		struct sockaddr_in *s = (void *)ss;

		s->sin_family = AF_INET;
		s->sin_addr.s_addr = htonl(0x7f000000 | (c / 4 + 2) << 8 | 1);
		s->sin_port = htons(20000 + c % 4);
	} else {
		struct sockaddr_in6 *s = (void *)ss;

		s->sin6_family = AF_INET6;
		inet_pton(AF_INET6, "fd00::", &s->sin6_addr);
		s->sin6_addr.s6_addr[13] = 2 + c / 4;
		s->sin6_addr.s6_addr[15] = 1;
		s->sin6_port = htons(20000 + c % 4);
	}
}

static void dst_addr(int fam, int d, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (fam == 0) {
		struct sockaddr_in *s = (void *)ss;

		s->sin_family = AF_INET;
		s->sin_addr.s_addr = htonl(0x7f010000 | (d + 1));
		s->sin_port = htons(PORT);
	} else {
		struct sockaddr_in6 *s = (void *)ss;

		s->sin6_family = AF_INET6;
		inet_pton(AF_INET6, "fd00::1:0", &s->sin6_addr);
		s->sin6_addr.s6_addr[15] = d + 1;
		s->sin6_port = htons(PORT);
	}
}

static bool fz_same_host(const struct sockaddr_storage *a,
		      const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return ((struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((struct sockaddr_in *)b)->sin_addr.s_addr;
	return !memcmp(&((struct sockaddr_in6 *)a)->sin6_addr,
		       &((struct sockaddr_in6 *)b)->sin6_addr, 16);
}

static bool same_endpoint(const struct sockaddr_storage *a,
			  const struct sockaddr_storage *b)
{
	return fz_same_host(a, b) &&
	       (a->ss_family == AF_INET ?
		((struct sockaddr_in *)a)->sin_port ==
		((struct sockaddr_in *)b)->sin_port :
		((struct sockaddr_in6 *)a)->sin6_port ==
		((struct sockaddr_in6 *)b)->sin6_port);
}

/* A socket of ours at addr (transparent: the addresses need not be the
 * namespace's own, and a destination's port is the proxy's). */
static int our_socket(const struct sockaddr_storage *addr)
{
	int fd, one = 1;

	fd = socket(addr->ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	CHECK(fd >= 0, "socket: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	set_transparent(fd, addr->ss_family);
	CHECK(!bind(fd, (void *)addr, ss_len(addr)), "bind: %s",
	      strerror(errno));
	return fd;
}

/* Loopback delivers in a softirq, which a busy machine defers to
 * ksoftirqd: a datagram just sent may not be queued yet. */
#define WAIT_MS 5000

static bool wait_readable(const int *fds, int n)
{
	struct pollfd p[NCLIENTS + 1];

	for (int i = 0; i < n; i++)
		p[i] = (struct pollfd){ .fd = fds[i], .events = POLLIN };
	return poll(p, n, WAIT_MS) > 0;
}

static struct udp_session *find(const struct sockaddr_storage *c,
				const struct sockaddr_storage *o, int *count)
{
	struct udp_session *s, *found = NULL;

	*count = 0;
	for (s = sessions; s; s = s->next) {
		if (same_endpoint(&s->client, c) && same_endpoint(&s->orig, o)) {
			(*count)++;
			found = s;
		}
	}
	return found;
}

static void check_sessions(void)
{
	int total = 0, want = 0;

	for (struct udp_session *s = sessions; s; s = s->next) {
		struct sockaddr_storage a, b;
		socklen_t len = sizeof(a);

		total++;
		/* a reply finds its session by the upstream socket's port */
		CHECK(!getsockname(s->up, (void *)&a, &len), "getsockname");
		for (struct udp_session *o = s->next; o; o = o->next) {
			len = sizeof(b);
			CHECK(!getsockname(o->up, (void *)&b, &len) &&
			      !same_endpoint(&a, &b),
			      "two sessions' upstream sockets share an address and port");
		}
		len = sizeof(a);
		CHECK(!getsockname(s->up, (void *)&a, &len) &&
		      fz_same_host(&a, &s->client),
		      "a session's upstream socket is not bound to its client's address");
		len = sizeof(a);
		CHECK(!getpeername(s->up, (void *)&a, &len) &&
		      same_endpoint(&a, &s->orig),
		      "a session's upstream socket is not connected to its destination");
		len = sizeof(a);
		CHECK(!getsockname(s->reply, (void *)&a, &len) &&
		      same_endpoint(&a, &s->orig),
		      "a session's reply socket is not bound to its destination");
	}
	for (int f = 0; f < 2; f++)
		for (int c = 0; c < NCLIENTS; c++)
			for (int d = 0; d < NDSTS; d++) {
				struct sockaddr_storage cs, ds;
				int n;

				if (!has_session[f][c][d])
					continue;
				want++;
				client_addr(f, c, &cs);
				dst_addr(f, d, &ds);
				find(&cs, &ds, &n);
				CHECK(n == 1, "%d sessions for one pair", n);
			}
	CHECK(total == want, "%d sessions, %d pairs", total, want);
}

static void datagram(int f, int c, int d, const uint8_t *pl, size_t n)
{
	struct sockaddr_storage cs, ds;
	struct udp_session *s;
	uint8_t got[PAYLOAD_MAX + 1];
	ssize_t r;
	int fd, cnt;

	client_addr(f, c, &cs);
	dst_addr(f, d, &ds);
	fd = our_socket(&cs);
	CHECK(sendto(fd, pl, n, 0, (void *)&ds, ss_len(&ds)) == (ssize_t)n,
	      "send to the proxy: %s", strerror(errno));
	CHECK(wait_readable(&listener[f], 1),
	      "the datagram never reached the proxy's listener");
	recv_udp(listener[f]);
	close(fd);
	has_session[f][c][d] = true;
	s = find(&cs, &ds, &cnt);
	CHECK(s && cnt == 1, "%d sessions after a datagram", cnt);
	/* The destination is local: the datagram waits at a reply socket
	 * bound to it (of this session or of another client's session with
	 * the same destination: which one of those the kernel picks is its
	 * choice), once. */
	cnt = 0;
	{
		int fds[NCLIENTS * 2], nfds = 0;

		for (struct udp_session *o = sessions; o; o = o->next)
			if (same_endpoint(&o->orig, &ds) && nfds < NCLIENTS * 2)
				fds[nfds++] = o->reply;
		CHECK(nfds <= NCLIENTS + 1 && wait_readable(fds, nfds),
		      "the datagram never reached its destination");
	}
	for (struct udp_session *o = sessions; o; o = o->next) {
		if (!same_endpoint(&o->orig, &ds))
			continue;
		while ((r = recv(o->reply, got, sizeof(got), MSG_DONTWAIT)) >= 0) {
			CHECK(r == (ssize_t)n && !memcmp(got, pl, n),
			      "the datagram reached its destination as %zd bytes, not %zu",
			      r, n);
			cnt++;
		}
	}
	CHECK(cnt == 1, "the datagram reached its destination %d times", cnt);
}

static void reply(int f, int c, int d, const uint8_t *pl, size_t n)
{
	struct sockaddr_storage cs, ds, up, from;
	socklen_t len = sizeof(up);
	struct udp_session *s;
	uint8_t got[PAYLOAD_MAX + 1];
	int cfd, dfd, cnt;
	ssize_t r;

	client_addr(f, c, &cs);
	dst_addr(f, d, &ds);
	s = find(&cs, &ds, &cnt);
	if (!s)
		return;
	CHECK(!getsockname(s->up, (void *)&up, &len), "getsockname");
	cfd = our_socket(&cs);
	dfd = our_socket(&ds);
	CHECK(sendto(dfd, pl, n, 0, (void *)&up, ss_len(&up)) == (ssize_t)n,
	      "the destination's reply: %s", strerror(errno));
	CHECK(wait_readable(&s->up, 1),
	      "the destination's reply never reached the session");
	udp_reply(s);
	CHECK(wait_readable(&cfd, 1), "the reply never reached the client");
	len = sizeof(from);
	r = recvfrom(cfd, got, sizeof(got), MSG_DONTWAIT, (void *)&from, &len);
	CHECK(r == (ssize_t)n && !memcmp(got, pl, n),
	      "the reply reached the client as %zd bytes, not %zu", r, n);
	CHECK(same_endpoint(&from, &ds), "the reply came from another address");
	close(cfd);
	close(dfd);
}

static void expire_all(bool all)
{
	int idle = udp_idle_ms;

	udp_idle_ms = all ? -1 : 1 << 30;
	expire();
	udp_idle_ms = idle;
	if (all)
		memset(has_session, 0, sizeof(has_session));
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct ifreq ifr = { .ifr_name = "lo" };
	int fd;

	CHECK(!unshare(CLONE_NEWNET), "no private network namespace (root needed)");
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ioctl(fd, SIOCGIFFLAGS, &ifr);
	ifr.ifr_flags |= IFF_UP;
	CHECK(!ioctl(fd, SIOCSIFFLAGS, &ifr), "lo up");
	close(fd);
	/* fd00::/64 local, as 127/8 is */
	CHECK(!system("ip -6 route add local fd00::/64 dev lo"), "local fd00::/64");
	signal(SIGPIPE, SIG_IGN);
	/* as the proxy's main: its limits on connections and sessions come
	 * from the open files limit it gets */
	CHECK(!raise_nofile(), "open files limit");
	ep = epoll_create1(EPOLL_CLOEXEC);
	listener[0] = udp_listeners[0] = listen_on(AF_INET, SOCK_DGRAM, PORT);
	listener[1] = udp_listeners[1] = listen_on(AF_INET6, SOCK_DGRAM, PORT);
	CHECK(listener[0] >= 0 && listener[1] >= 0, "proxy listeners: %s",
	      strerror(errno));
	/* the datapath's part: a client's datagrams go to the listener */
	skel = steer_bpf__open_and_load();
	CHECK(skel, "load steer.bpf.o");
	for (uint32_t k = 0; k < 2; k++) {
		uint64_t v = listener[k];

		CHECK(!bpf_map__update_elem(skel->maps.listeners, &k, 4, &v, 8, 0),
		      "listener into the sockmap: %s", strerror(errno));
	}
	fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	steer_link = fd >= 0 ? bpf_program__attach_netns(skel->progs.steer, fd) : NULL;
	CHECK(steer_link, "attach sk_lookup: %s", strerror(errno));
	close(fd);
	/* Upstream sockets of one client address, as many as a busy pod
	 * has sessions: each its own port, or a reply may reach another
	 * session (with SO_REUSEADDR, 133 of 3000 autobound ports were
	 * taken already). */
	{
		static int fds[2000];
		struct rlimit rl = { 4096, 4096 };
		struct sockaddr_storage c;
		uint16_t *seen = calloc(65536, sizeof(*seen));

		setrlimit(RLIMIT_NOFILE, &rl);
		client_addr(0, 0, &c);
		for (int i = 0; i < 2000; i++) {
			struct sockaddr_in a;
			socklen_t len = sizeof(a);

			fds[i] = bound_socket(&c, SOCK_DGRAM, 0);
			CHECK(fds[i] >= 0 && !getsockname(fds[i], (void *)&a, &len),
			      "an upstream socket: %s", strerror(errno));
			CHECK(!seen[ntohs(a.sin_port)]++,
			      "two upstream sockets of one client address got port %u",
			      ntohs(a.sin_port));
		}
		for (int i = 0; i < 2000; i++)
			close(fds[i]);
		free(seen);
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t off = 0;
	int fds, before = count_fds();

	for (int k = 0; k < MAX_EVENTS_IN && off + 4 <= size; k++) {
		const uint8_t *e = data + off;
		int f = e[1] & 1, c = (e[1] >> 1) % NCLIENTS, d = e[2] % NDSTS;
		size_t n = e[3] % 64;

		off += 4;
		if (e[0] & 0x80)
			n = n * 22;	/* up to the payload's maximum */
		if (n > size - off)
			n = size - off;
		if (n > PAYLOAD_MAX)
			n = PAYLOAD_MAX;
		switch (e[0] % 4) {
		case 0:
		case 1:
			datagram(f, c, d, data + off, n);
			break;
		case 2:
			reply(f, c, d, data + off, n);
			break;
		case 3:
			expire_all(e[2] & 0x80);
			break;
		}
		off += n;
		check_sessions();
	}
	expire_all(true);
	check_sessions();
	fds = count_fds();
	/* before and after this input: libFuzzer's own files (a merge's
	 * control file) come and go between inputs */
	CHECK(fds == before, "%d descriptors open after the input, %d before",
	      fds, before);
	return 0;
}
