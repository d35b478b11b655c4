/* SPDX-License-Identifier: GPL-2.0 */
/*
 * podinject-proxy: a small L4 transparent proxy, the one podinject's tests,
 * demo and benchmarks use, and the example of the contract a proxy must
 * follow behind `podinject proxy add` (docs/proxy.md):
 *
 *   1. listen on PORT with IP_TRANSPARENT (and IPV6_TRANSPARENT), on any
 *      address; getsockname() of an accepted socket is the destination the
 *      client asked for, getpeername() is the client pod;
 *   2. connect upstream to that destination from a socket bound to the
 *      client pod's address (IP_TRANSPARENT, port 0): podinject injects it
 *      into the client pod's egress datapath, where the pod's policy sees
 *      the real destination port;
 *   3. relay both ways, keep half-closes, and close with a reset when the
 *      upstream cannot be reached, so the client fails fast.
 *
 * TCP is relayed with splice() through a pipe per direction (no copies to
 * user space); a direction stops reading while its pipe cannot drain, which
 * is the backpressure. UDP: one session per (client, destination), with an
 * upstream socket bound to the client's address and a reply socket bound
 * to the destination's.
 *
 *   podinject-proxy [-v] [--connect-timeout MS] [--udp-idle MS] PORT
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PIPE_BYTES	(1 << 20)
#define MAX_EVENTS	256
#define UDP_MAX		65536

static bool verbose;
static int connect_timeout_ms = 5000;
static int udp_idle_ms = 30000;
static int ep;

enum kind { K_LISTEN_TCP, K_LISTEN_UDP, K_SIGNAL, K_CLIENT, K_UPSTREAM,
	    K_UDP_UP };

struct tag {
	enum kind kind;
	void *owner;
};

/* One direction of a TCP connection: from `in` through the pipe to `out`. */
struct half {
	int pipe[2];
	size_t queued;		/* bytes in the pipe */
	bool eof;		/* `in` said EOF */
	bool shut;		/* `out` got SHUT_WR */
	unsigned long long bytes;
};

struct conn {
	int client, upstream;
	struct tag ctag, utag;
	bool connected;
	struct half up, down;	/* up: client -> upstream */
	long long deadline;	/* connect deadline, ms */
	struct sockaddr_storage peer, orig;
	bool dead;		/* closed; freed after the event batch */
	struct conn *prev, *next;
};

struct udp_session {
	struct sockaddr_storage client, orig;
	int up, reply;
	struct tag tag;
	long long last;
	struct udp_session *next;
};

static struct conn *conns, *graveyard;
static struct udp_session *sessions;
static int udp_listeners[2] = { -1, -1 };
static long nconns;

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static const char *addr_str(const struct sockaddr_storage *ss, char *buf,
			    size_t len)
{
	char a[INET6_ADDRSTRLEN];
	int port;

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *s = (const void *)ss;

		inet_ntop(AF_INET, &s->sin_addr, a, sizeof(a));
		port = ntohs(s->sin_port);
		snprintf(buf, len, "%s:%d", a, port);
	} else {
		const struct sockaddr_in6 *s = (const void *)ss;

		inet_ntop(AF_INET6, &s->sin6_addr, a, sizeof(a));
		port = ntohs(s->sin6_port);
		snprintf(buf, len, "[%s]:%d", a, port);
	}
	return buf;
}

static socklen_t ss_len(const struct sockaddr_storage *ss)
{
	return ss->ss_family == AF_INET ? sizeof(struct sockaddr_in) :
					  sizeof(struct sockaddr_in6);
}

static int set_transparent(int fd, int family)
{
	int one = 1;

	if (family == AF_INET)
		return setsockopt(fd, SOL_IP, IP_TRANSPARENT, &one, sizeof(one));
	return setsockopt(fd, SOL_IPV6, IPV6_TRANSPARENT, &one, sizeof(one));
}

static void ep_set(int fd, struct tag *tag, uint32_t events, bool add)
{
	struct epoll_event ev = { .events = events, .data.ptr = tag };

	epoll_ctl(ep, add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fd, &ev);
}

static int listen_on(int family, int type, int port)
{
	struct sockaddr_storage ss = { 0 };
	int fd, one = 1;

	fd = socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (set_transparent(fd, family))
		goto fail;
	if (type == SOCK_DGRAM) {
		if (family == AF_INET)
			setsockopt(fd, SOL_IP, IP_RECVORIGDSTADDR, &one,
				   sizeof(one));
		else
			setsockopt(fd, SOL_IPV6, IPV6_RECVORIGDSTADDR, &one,
				   sizeof(one));
	}
	ss.ss_family = family;
	if (family == AF_INET)
		((struct sockaddr_in *)&ss)->sin_port = htons(port);
	else
		((struct sockaddr_in6 *)&ss)->sin6_port = htons(port);
	if (bind(fd, (void *)&ss, ss_len(&ss)))
		goto fail;
	if (type == SOCK_STREAM && listen(fd, 4096))
		goto fail;
	return fd;
fail:
	close(fd);
	return -1;
}

/* A socket bound (transparently) to addr with port `port`. */
static int bound_socket(const struct sockaddr_storage *addr, int type,
			int port)
{
	struct sockaddr_storage b = *addr;
	int fd, one = 1;

	fd = socket(addr->ss_family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (set_transparent(fd, addr->ss_family))
		goto fail;
	if (type == SOCK_STREAM && !port)
		/* The port is picked at connect() against the whole 4-tuple,
		 * so an old connection's TIME_WAIT to the same server is
		 * never hit; a port picked at bind() only knows the address. */
		setsockopt(fd, SOL_IP, IP_BIND_ADDRESS_NO_PORT, &one,
			   sizeof(one));
	else if (port)
		/* Not for a port the kernel picks: it would hand out one that
		 * another session's socket holds, and replies would go to
		 * either. */
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (addr->ss_family == AF_INET)
		((struct sockaddr_in *)&b)->sin_port = htons(port);
	else
		((struct sockaddr_in6 *)&b)->sin6_port = htons(port);
	if (bind(fd, (void *)&b, ss_len(&b)))
		goto fail;
	return fd;
fail:
	close(fd);
	return -1;
}

static int half_init(struct half *h)
{
	memset(h, 0, sizeof(*h));
	h->pipe[0] = h->pipe[1] = -1;
	if (pipe2(h->pipe, O_NONBLOCK | O_CLOEXEC))
		return -1;
	fcntl(h->pipe[1], F_SETPIPE_SZ, PIPE_BYTES);
	return 0;
}

static void conn_free(struct conn *c, bool reset, const char *why)
{
	if (verbose) {
		char p[64], o[64];

		fprintf(stderr, "conn %s -> %s up %llu down %llu %s\n",
			addr_str(&c->peer, p, sizeof(p)),
			addr_str(&c->orig, o, sizeof(o)), c->up.bytes,
			c->down.bytes, why);
	}
	if (reset) {
		struct linger lg = { .l_onoff = 1, .l_linger = 0 };

		setsockopt(c->client, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	}
	close(c->client);
	if (c->upstream >= 0)
		close(c->upstream);
	for (int i = 0; i < 2; i++) {
		if (c->up.pipe[i] >= 0)
			close(c->up.pipe[i]);
		if (c->down.pipe[i] >= 0)
			close(c->down.pipe[i]);
	}
	if (c->prev)
		c->prev->next = c->next;
	else
		conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	/* Later events of this batch may still name it. */
	c->dead = true;
	c->next = graveyard;
	graveyard = c;
	nconns--;
}

/* Moves what it can of one direction. Returns -1 on a fatal error. */
static int pump(struct half *h, int in, int out)
{
	ssize_t n;

	for (;;) {
		if (!h->eof && h->queued < PIPE_BYTES) {
			n = splice(in, NULL, h->pipe[1], NULL,
				   PIPE_BYTES - h->queued,
				   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (n > 0)
				h->queued += n;
			else if (n == 0)
				h->eof = true;
			else if (errno != EAGAIN)
				return -1;
		}
		if (!h->queued)
			break;
		n = splice(h->pipe[0], NULL, out, NULL, h->queued,
			   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (n > 0) {
			h->queued -= n;
			h->bytes += n;
			continue;
		}
		if (n < 0 && errno != EAGAIN)
			return -1;
		break;	/* `out` is full: wait for EPOLLOUT */
	}
	if (h->eof && !h->queued && !h->shut) {
		shutdown(out, SHUT_WR);
		h->shut = true;
	}
	return 0;
}

/* Interest follows the state: read a side only while its pipe has room,
 * wait for writability only while something is queued for it. */
static void conn_rearm(struct conn *c)
{
	uint32_t ce = EPOLLRDHUP, ue = EPOLLRDHUP;

	if (!c->up.eof && c->up.queued < PIPE_BYTES)
		ce |= EPOLLIN;
	if (c->down.queued)
		ce |= EPOLLOUT;
	if (!c->down.eof && c->down.queued < PIPE_BYTES)
		ue |= EPOLLIN;
	if (c->up.queued)
		ue |= EPOLLOUT;
	ep_set(c->client, &c->ctag, ce, false);
	ep_set(c->upstream, &c->utag, ue, false);
}

static void conn_event(struct conn *c, bool upstream_side, uint32_t events)
{
	if (!c->connected) {
		int err = 0;
		socklen_t len = sizeof(err);

		if (!upstream_side) {
			char b;
			ssize_t n = recv(c->client, &b, 1,
					 MSG_PEEK | MSG_DONTWAIT);

			/* the client left before the upstream answered */
			if ((events & (EPOLLHUP | EPOLLERR)) || n == 0 ||
			    (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
				conn_free(c, false, "client gone");
				return;
			}
			/* Data, maybe followed by a half-close: it goes
			 * upstream once connected. Readiness is level-
			 * triggered and would wake epoll_wait at once, again
			 * and again, so the client is watched for nothing
			 * until conn_rearm (HUP and ERR still come). */
			ep_set(c->client, &c->ctag, 0, false);
			return;
		}
		getsockopt(c->upstream, SOL_SOCKET, SO_ERROR, &err, &len);
		if (err) {
			conn_free(c, true, strerror(err));
			return;
		}
		c->connected = true;
	}
	if (pump(&c->up, c->client, c->upstream) ||
	    pump(&c->down, c->upstream, c->client)) {
		conn_free(c, true, "reset");
		return;
	}
	if (c->up.shut && c->down.shut) {
		conn_free(c, false, "done");
		return;
	}
	conn_rearm(c);
}

static void accept_tcp(int lfd)
{
	for (;;) {
		struct sockaddr_storage peer, orig;
		socklen_t plen = sizeof(peer), olen = sizeof(orig);
		struct conn *c;
		int fd, one = 1;

		fd = accept4(lfd, (void *)&peer, &plen,
			     SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		c = calloc(1, sizeof(*c));
		if (!c || getsockname(fd, (void *)&orig, &olen)) {
			free(c);
			close(fd);
			continue;
		}
		c->client = fd;
		c->upstream = -1;
		c->up.pipe[0] = c->up.pipe[1] = -1;
		c->down.pipe[0] = c->down.pipe[1] = -1;
		c->peer = peer;
		c->orig = orig;
		c->ctag = (struct tag){ K_CLIENT, c };
		c->utag = (struct tag){ K_UPSTREAM, c };
		c->deadline = now_ms() + connect_timeout_ms;
		c->next = conns;
		if (conns)
			conns->prev = c;
		conns = c;
		nconns++;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (half_init(&c->up) || half_init(&c->down)) {
			conn_free(c, true, "no pipes");
			continue;
		}
		/* The client's address, any port: the connection is the
		 * client pod's own, as far as the network can tell. */
		c->upstream = bound_socket(&peer, SOCK_STREAM, 0);
		if (c->upstream < 0) {
			conn_free(c, true, "bind to client address");
			continue;
		}
		setsockopt(c->upstream, IPPROTO_TCP, TCP_NODELAY, &one,
			   sizeof(one));
		if (connect(c->upstream, (void *)&orig, ss_len(&orig)) &&
		    errno != EINPROGRESS) {
			conn_free(c, true, strerror(errno));
			continue;
		}
		ep_set(c->client, &c->ctag, EPOLLRDHUP, true);
		ep_set(c->upstream, &c->utag, EPOLLOUT | EPOLLIN, true);
	}
}

static bool same_addr(const struct sockaddr_storage *a,
		      const struct sockaddr_storage *b)
{
	return a->ss_family == b->ss_family &&
	       !memcmp(a, b, ss_len(a));
}

static struct udp_session *udp_session(const struct sockaddr_storage *client,
				       const struct sockaddr_storage *orig)
{
	struct udp_session *s;
	int oport;

	for (s = sessions; s; s = s->next)
		if (same_addr(&s->client, client) && same_addr(&s->orig, orig))
			return s;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->client = *client;
	s->orig = *orig;
	oport = ntohs(orig->ss_family == AF_INET ?
		      ((struct sockaddr_in *)orig)->sin_port :
		      ((struct sockaddr_in6 *)orig)->sin6_port);
	s->up = bound_socket(client, SOCK_DGRAM, 0);
	s->reply = bound_socket(orig, SOCK_DGRAM, oport);
	if (s->up < 0 || s->reply < 0 ||
	    connect(s->up, (void *)orig, ss_len(orig))) {
		if (s->up >= 0)
			close(s->up);
		if (s->reply >= 0)
			close(s->reply);
		free(s);
		return NULL;
	}
	s->tag = (struct tag){ K_UDP_UP, s };
	ep_set(s->up, &s->tag, EPOLLIN, true);
	s->next = sessions;
	sessions = s;
	if (verbose) {
		char a[64], b[64];

		fprintf(stderr, "udp %s -> %s session\n",
			addr_str(client, a, sizeof(a)),
			addr_str(orig, b, sizeof(b)));
	}
	return s;
}

static void recv_udp(int lfd)
{
	static char buf[UDP_MAX];

	for (;;) {
		struct sockaddr_storage client, orig = { 0 };
		char cbuf[256];
		struct iovec iov = { buf, sizeof(buf) };
		struct msghdr m = {
			.msg_name = &client, .msg_namelen = sizeof(client),
			.msg_iov = &iov, .msg_iovlen = 1,
			.msg_control = cbuf, .msg_controllen = sizeof(cbuf),
		};
		struct cmsghdr *cm;
		struct udp_session *s;
		ssize_t n = recvmsg(lfd, &m, 0);

		if (n < 0)
			return;
		for (cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm)) {
			if ((cm->cmsg_level == SOL_IP &&
			     cm->cmsg_type == IP_ORIGDSTADDR) ||
			    (cm->cmsg_level == SOL_IPV6 &&
			     cm->cmsg_type == IPV6_ORIGDSTADDR))
				memcpy(&orig, CMSG_DATA(cm),
				       cm->cmsg_len - CMSG_LEN(0));
		}
		if (!orig.ss_family)
			continue;
		s = udp_session(&client, &orig);
		if (!s)
			continue;
		s->last = now_ms();
		send(s->up, buf, n, 0);
	}
}

static void udp_reply(struct udp_session *s)
{
	static char buf[UDP_MAX];
	ssize_t n;

	while ((n = recv(s->up, buf, sizeof(buf), 0)) >= 0) {
		s->last = now_ms();
		sendto(s->reply, buf, n, 0, (void *)&s->client,
		       ss_len(&s->client));
	}
}

static void expire(void)
{
	long long now = now_ms();
	struct udp_session **pp = &sessions;
	struct conn *c, *next;

	for (c = conns; c; c = next) {
		next = c->next;
		if (!c->connected && now > c->deadline)
			conn_free(c, true, "connect timeout");
	}
	while (*pp) {
		struct udp_session *s = *pp;

		if (now - s->last > udp_idle_ms) {
			*pp = s->next;
			close(s->up);
			close(s->reply);
			free(s);
			continue;
		}
		pp = &s->next;
	}
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "verbose", no_argument, NULL, 'v' },
		{ "connect-timeout", required_argument, NULL, 't' },
		{ "udp-idle", required_argument, NULL, 'u' },
		{ 0 },
	};
	struct tag ltags[4], sigtag = { K_SIGNAL, NULL };
	struct rlimit rl = { 1 << 20, 1 << 20 };
	struct epoll_event evs[MAX_EVENTS];
	int lfds[4], port, sfd, c;
	sigset_t mask;
	bool running = true;

	while ((c = getopt_long(argc, argv, "vt:u:", opts, NULL)) != -1) {
		switch (c) {
		case 'v': verbose = true; break;
		case 't': connect_timeout_ms = atoi(optarg); break;
		case 'u': udp_idle_ms = atoi(optarg); break;
		default: goto usage;
		}
	}
	if (optind != argc - 1)
		goto usage;
	port = atoi(argv[optind]);
	if (port <= 0 || port > 65535)
		goto usage;
	/* thousands of connections: six descriptors each */
	if (setrlimit(RLIMIT_NOFILE, &rl)) {
		rl.rlim_cur = rl.rlim_max = 65536;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC);
	ep = epoll_create1(EPOLL_CLOEXEC);
	ep_set(sfd, &sigtag, EPOLLIN, true);

	lfds[0] = listen_on(AF_INET, SOCK_STREAM, port);
	lfds[1] = listen_on(AF_INET6, SOCK_STREAM, port);
	lfds[2] = udp_listeners[0] = listen_on(AF_INET, SOCK_DGRAM, port);
	lfds[3] = udp_listeners[1] = listen_on(AF_INET6, SOCK_DGRAM, port);
	if (lfds[0] < 0 || lfds[2] < 0) {
		fprintf(stderr, "podinject-proxy: cannot listen on %d: %s\n",
			port, strerror(errno));
		return 1;
	}
	for (int i = 0; i < 4; i++) {
		if (lfds[i] < 0)
			continue;	/* no IPv6 here is fine */
		ltags[i] = (struct tag){ i < 2 ? K_LISTEN_TCP : K_LISTEN_UDP,
					 (void *)(long)lfds[i] };
		ep_set(lfds[i], &ltags[i], EPOLLIN, true);
	}
	if (verbose)
		fprintf(stderr, "podinject-proxy: listening on %d\n", port);
	fprintf(stdout, "ready %d\n", port);
	fflush(stdout);

	while (running) {
		int n = epoll_wait(ep, evs, MAX_EVENTS, 200);

		for (int i = 0; i < n; i++) {
			struct tag *t = evs[i].data.ptr;

			switch (t->kind) {
			case K_SIGNAL:
				running = false;
				break;
			case K_LISTEN_TCP:
				accept_tcp((int)(long)t->owner);
				break;
			case K_LISTEN_UDP:
				recv_udp((int)(long)t->owner);
				break;
			case K_CLIENT:
			case K_UPSTREAM:
				if (!((struct conn *)t->owner)->dead)
					conn_event(t->owner,
						   t->kind == K_UPSTREAM,
						   evs[i].events);
				break;
			case K_UDP_UP:
				udp_reply(t->owner);
				break;
			}
		}
		expire();
		while (graveyard) {
			struct conn *g = graveyard;

			graveyard = g->next;
			free(g);
		}
	}
	while (conns)
		conn_free(conns, true, "shutdown");
	while (sessions) {
		struct udp_session *s = sessions;

		sessions = s->next;
		close(s->up);
		close(s->reply);
		free(s);
	}
	for (int i = 0; i < 4; i++)
		if (lfds[i] >= 0)
			close(lfds[i]);
	if (verbose)
		fprintf(stderr, "podinject-proxy: stopped\n");
	return 0;
usage:
	fprintf(stderr, "usage: podinject-proxy [-v] [--connect-timeout MS] [--udp-idle MS] PORT\n");
	return 2;
}
