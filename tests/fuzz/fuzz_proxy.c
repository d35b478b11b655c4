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
 *   expire    every session idle (all go) or none idle (all stay), with
 *             the proxy's clock past its expiry interval or not (then
 *             expire() may do nothing: it runs once an interval)
 *
 * The proxy's per-client cap is set low (CLIENT_MAX sessions per client
 * address) so that inputs reach it: a datagram of a new pair of a client
 * address at its cap makes no session and goes nowhere.
 *
 * Invariants after each event: one session per (client, destination)
 * pair seen, admitted and not expired, no other; nsessions is the length
 * of the session list; each session is in its hash bucket, and the
 * buckets hold nothing else; each client address with sessions has one
 * client entry, in its bucket, counting exactly its sessions (and no
 * connections), and no other entry is left; a session's upstream socket is
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
#define CLIENT_MAX	5	/* sessions per client address (4 per family) */

static int listener[2];		/* AF_INET, AF_INET6 */
static struct steer_bpf *skel;
static struct bpf_link *steer_link;

/* The model: which pairs have a session. */
static bool has_session[2][NCLIENTS][NDSTS];

/* The model's sessions of client c's address (4 clients, by port, share
 * one) and in all. */
static int host_sessions(int f, int c)
{
	int n = 0;

	for (int o = c / 4 * 4; o < c / 4 * 4 + 4; o++)
		for (int d = 0; d < NDSTS; d++)
			n += has_session[f][o][d];
	return n;
}

static int model_sessions(void)
{
	int n = 0;

	for (int f = 0; f < 2; f++)
		for (int c = 0; c < NCLIENTS; c++)
			for (int d = 0; d < NDSTS; d++)
				n += has_session[f][c][d];
	return n;
}

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

/* The session hash and the client entries against the session list. */
static void check_hashes(int total)
{
	int hashed = 0, clients = 0, hosts = 0;

	for (int b = 0; b < SESSION_BUCKETS; b++) {
		for (struct udp_session *h = session_hash[b]; h; h = h->hnext) {
			struct udp_session *s;

			hashed++;
			CHECK(session_bucket(&h->client, &h->orig) ==
			      &session_hash[b],
			      "a session in hash bucket %d, not its own", b);
			for (s = sessions; s && s != h; s = s->next)
				;
			CHECK(s, "a hashed session is not in the session list");
			CHECK(hashed <= total, "the hash holds more sessions than the list");
		}
	}
	CHECK(hashed == total, "%d sessions hashed, %d listed", hashed, total);
	for (struct udp_session *s = sessions; s; s = s->next) {
		struct udp_session *h = *session_bucket(&s->client, &s->orig);

		while (h && h != s)
			h = h->hnext;
		CHECK(h, "a listed session is not in its hash bucket");
		CHECK(s->who && s->who == client_of(&s->client, false),
		      "a session's client entry is not its address's");
	}
	for (int b = 0; b < CLIENT_BUCKETS; b++) {
		for (struct client *c = client_hash[b]; c; c = c->next) {
			long n = 0;

			clients++;
			CHECK(&client_hash[ss_hash(&c->addr, false, 0) %
					   CLIENT_BUCKETS] == &client_hash[b],
			      "a client entry in bucket %d, not its own", b);
			for (struct udp_session *s = sessions; s; s = s->next)
				n += s->who == c;
			CHECK(c->udp == n, "a client entry counts %ld sessions, it has %ld",
			      c->udp, n);
			CHECK(c->tcp == 0, "a client entry counts %ld connections, there are none",
			      c->tcp);
			CHECK(n > 0, "a client entry holding nothing is left");
			CHECK(n <= client_max, "a client has %ld sessions, over its cap of %ld",
			      n, client_max);
		}
	}
	for (int f = 0; f < 2; f++)
		for (int h = 0; h < NCLIENTS / 4; h++)
			hosts += host_sessions(f, h * 4) > 0;
	CHECK(clients == hosts, "%d client entries, %d client addresses with sessions",
	      clients, hosts);
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
	CHECK(nsessions == total, "nsessions %ld, %d sessions listed",
	      nsessions, total);
	check_hashes(total);
}

static void datagram(int f, int c, int d, const uint8_t *pl, size_t n)
{
	struct sockaddr_storage cs, ds;
	struct udp_session *s;
	uint8_t got[PAYLOAD_MAX + 1];
	ssize_t r;
	int fd, cnt;

	bool admitted;
	struct pollfd lp = { .fd = listener[f], .events = POLLIN };

	client_addr(f, c, &cs);
	dst_addr(f, d, &ds);
	/* a new pair gets a session if its client address is under its cap
	 * and the proxy under its open files limit */
	admitted = has_session[f][c][d] ||
		   (host_sessions(f, c) < client_max &&
		    model_sessions() < session_max);
	fd = our_socket(&cs);
	CHECK(sendto(fd, pl, n, 0, (void *)&ds, ss_len(&ds)) == (ssize_t)n,
	      "send to the proxy: %s", strerror(errno));
	CHECK(wait_readable(&listener[f], 1),
	      "the datagram never reached the proxy's listener");
	/* as the event loop: the listener is read while it is readable
	 * (recv_udp() takes a bounded batch per call) */
	do
		recv_udp(listener[f]);
	while (poll(&lp, 1, 0) > 0);
	close(fd);
	s = find(&cs, &ds, &cnt);
	if (!admitted) {
		CHECK(!s, "a session past the client's cap of %ld", client_max);
		/* dropped: nothing reached the destination */
		for (struct udp_session *o = sessions; o; o = o->next)
			if (same_endpoint(&o->orig, &ds))
				CHECK(recv(o->reply, got, sizeof(got), MSG_DONTWAIT) < 0,
				      "a datagram refused a session reached its destination");
		return;
	}
	has_session[f][c][d] = true;
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

/* expire() runs at most once an interval (EXPIRE_EVERY_MS): `due` stands
 * for the clock having moved an interval on since its last run; else the
 * real clock says whether it may run. */
static void expire_all(bool all, bool due)
{
	int idle = udp_idle_ms, before = model_sessions();
	long long last = expire_last, t0, t1;
	bool ran;

	if (due)
		expire_last -= EXPIRE_EVERY_MS;
	last = expire_last;
	udp_idle_ms = all ? -1 : 1 << 30;
	t0 = pi_mono_ms();
	expire();
	t1 = pi_mono_ms();
	udp_idle_ms = idle;
	ran = expire_last != last;
	CHECK(!(t0 - last >= EXPIRE_EVERY_MS) || ran,
	      "expire() did not run %lld ms after its last run", t0 - last);
	CHECK(!(t1 - last < EXPIRE_EVERY_MS) || !ran,
	      "expire() ran %lld ms after its last run", t1 - last);
	if (all && ran)
		memset(has_session, 0, sizeof(has_session));
	CHECK(!(all && ran) || !sessions,
	      "sessions left after expiry of all %d", before);
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
	/* as the proxy's main: its limits on connections and sessions come
	 * from the open files limit it gets */
	CHECK(!raise_nofile(), "open files limit");
	client_max = CLIENT_MAX;
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
			expire_all(e[2] & 0x80, !(e[2] & 0x40));
			break;
		}
		off += n;
		check_sessions();
	}
	expire_all(true, true);
	check_sessions();
	fds = count_fds();
	/* before and after this input: libFuzzer's own files (a merge's
	 * control file) come and go between inputs */
	CHECK(fds == before, "%d descriptors open after the input, %d before",
	      fds, before);
	return 0;
}
