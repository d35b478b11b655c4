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
 * Under abuse (docs/proxy.md): at the open files limit a connection is
 * accepted on a reserve descriptor and dropped, so the listener does not
 * stay readable; connections and UDP sessions idle longer than their
 * timeout are closed; each client address has a cap on its concurrent
 * connections and sessions; sessions are found by hash, and each event
 * reads a bounded batch, so one flooding client cannot hold the loop.
 *
 * With --tls-dir and --tls-ca every TCP connection is relayed over TLS 1.3
 * (mTLS origination, docs/proxy.md "mTLS: TLS origination"): the client
 * pod's certificate is DIR/<client address>/cert.pem and key.pem, the
 * server must show a certificate of the CA bundle for the destination's
 * address (and, with --tls-trust-domain, a SPIFFE URI of that domain).
 * A client with no usable identity, and any TLS failure, gets a reset:
 * nothing ever goes out in plaintext. UDP is not relayed then.
 *
 * With --inbound as well, the proxy terminates TLS instead (docs/proxy.md
 * "mTLS: TLS termination (inbound)"): the accepted connection is a client's
 * to a protected server pod, the proxy is the TLS 1.3 server with that
 * pod's identity (DIR/<getsockname address>/), the client must show a
 * certificate of the CA bundle for its own address (getpeername), and only
 * then is the pod connected to, in plaintext, from the client's address.
 * A client that does not start with a TLS handshake is reset, or, with
 * --permissive, relayed as it is.
 *
 * With --tls-resume SECONDS a TLS 1.3 session may be resumed (a new ECDHE,
 * no certificates sent) for that long after its full handshake, by the
 * same identity with the same destination only, and not across a new CA
 * bundle or new identity files; the other end's certificate in the
 * session is checked again against the connection's address.
 *
 * --relay-budget BYTES is what one direction of a connection moves in one
 * turn of the loop at most (RELAY_BUDGET).
 *
 *   podinject-proxy [-v] [--connect-timeout MS] [--idle MS] [--udp-idle MS]
 *                   [--client-max N] [--relay-budget BYTES]
 *                   [--tls-dir DIR --tls-ca FILE
 *                   [--tls-trust-domain TD]
 *                   [--inbound [--permissive [--permissive-wait MS]]]
 *                   [--no-ktls] [--tls-resume SECONDS]] PORT
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <linux/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <linux/sockios.h>
#include <linux/tls.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/kdf.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <podinject_util.h>

#define PIPE_BYTES	(1 << 20)
#define MAX_EVENTS	256
#define UDP_MAX		65536
#define NOFILE_WANTED	(1 << 20)
#define FDS_PER_CONN	6	/* client, upstream, two pipes */
#define FDS_PER_TLS_CONN 2	/* client, upstream: TLS needs no pipes */
#define FDS_PER_KTLS_CONN 4	/* and a pipe out of the kTLS socket */
/* A TLS record's plaintext at most (2^14) and its content type */
#define TLS_RECORD_MAX	(16384 + 256)
#define TLS_BUF		(64 << 10)	/* per direction of a TLS connection */
/* What one direction of a connection moves in one turn of the loop at
 * most. The loop is single-threaded: a bulk transfer whose both ends keep
 * up would move on for as long as it lasts, and every other connection,
 * accept and timer wait. Where it stops, the connection runs again in the
 * next turn (the `again` list), after the events that came meanwhile. */
#define RELAY_BUDGET	(256 << 10)
#define RELAY_BUDGET_MIN	4096
#define RELOAD_MS	1000	/* identity and CA files checked at most so often */
#define IDENTITY_BUCKETS 1024
/* Sessions an originating identity keeps for resumption, one for each
 * destination (address and port) it reached last */
#define RESUME_PER_IDENTITY 64
#define RESUME_MAX_S	86400	/* --tls-resume at most a day */
#define FDS_PER_SESSION	2	/* upstream, reply */
#define FDS_SPARE	64	/* listeners, epoll, signalfd, reserve, stdio,
				 * PIPES_POOLED pipes */
#define BATCH		64	/* datagrams or accepts per event */
#define SESSION_BUCKETS	16384
#define CLIENT_BUCKETS	4096
#define BACKOFF_MS	100
#define EXPIRE_EVERY_MS	100
/* --permissive: how long a client may say nothing before it is taken for
 * a plaintext one whose server speaks first (--permissive-wait). A TLS
 * client sends its hello at once, but "at once" is late for a pod held by
 * its CPU quota or a loaded machine: at 300 ms the kernel lab's guests
 * sent some hellos later, which went to the server as plaintext. */
#define PERMISSIVE_WAIT_MS	1000
/* How often a connection whose FIN waits for kTLS's held records looks
 * again (ktls_flushed): soon at first, as the records usually go within
 * a few milliseconds; then, while TCP takes nothing more of them (a peer
 * that stopped reading), half as often each time, down to once every
 * FLUSH_MAX_MS. A peer that stalls must not make the proxy spend a few
 * system calls every 2 ms on each of its connections for as long as it
 * likes (flush_check). */
#define FLUSH_FIRST_MS	2
#define FLUSH_MAX_MS	256
/* What the kernel adds to a TLS 1.3 record's plaintext: the header, the
 * content type and the AEAD tag, the same for each of its ciphers */
#define TLS13_RECORD_OVERHEAD	(5 + 1 + 16)

static bool verbose;
static int connect_timeout_ms = 5000;
static int idle_ms = 600000;
static int udp_idle_ms = 30000;
static long client_max = 512;
static long relay_budget = RELAY_BUDGET;
static long conn_max, session_max;	/* from the open files limit */
static int ep;
/* Kept open to be given up at the open files limit: with it, a pending
 * connection can still be accepted, and dropped. */
static int reserve_fd = -1;
/* TLS origination: on when tls_dir is given. */
static const char *tls_dir, *tls_ca, *tls_td;
/* TLS termination instead (--inbound), and whether a client that does
 * not speak TLS is relayed in plaintext rather than reset. */
static bool inbound, permissive;
static long permissive_wait_ms = PERMISSIVE_WAIT_MS;
static bool permissive_wait_set;
static bool ktls_kernel;	/* the kernel has the "tls" TCP ULP, and it is used */
static bool ktls_off;		/* --no-ktls: OpenSSL does the records */
/* --tls-resume SECONDS: a TLS 1.3 session may be resumed for so long
 * after its full handshake; 0 (the default): every connection makes one */
static long tls_resume_s;

enum kind { K_LISTEN_TCP, K_LISTEN_UDP, K_SIGNAL, K_CLIENT, K_UPSTREAM,
	    K_UDP_UP, K_UDP_REPLY };

struct tag {
	enum kind kind;
	void *owner;
};

/* One direction of a TCP connection: from `in` through the pipe to `out`,
 * or, relayed over TLS, through buf (no pipe). */
struct half {
	int pipe[2];
	unsigned char *buf;	/* TLS: the bytes are buf[head, head + queued) */
	size_t head;
	int want;		/* TLS: what the stalled SSL call waits for */
	size_t cap;		/* what the pipe holds: as set, not as asked */
	size_t queued;		/* bytes in the pipe */
	bool full;		/* the pipe took nothing more: until it drains */
	bool eof;		/* `in` said EOF */
	bool shut;		/* `out` got SHUT_WR */
	unsigned long long bytes;
	long budget;		/* bytes left to move in this turn */
	bool gave_way;		/* stopped at its budget, more to move */
};

/* What one client address holds, against client_max. */
struct client {
	struct sockaddr_storage addr;	/* port 0 */
	long tcp, udp;
	struct client *next;
};

struct conn {
	int client, upstream;
	struct tag ctag, utag;
	bool connected;
	struct half up, down;	/* up: client -> upstream */
	long long deadline;	/* connect deadline, ms */
	long long accepted;	/* ms */
	long long last;		/* last byte moved, ms */
	struct client *who;
	struct sockaddr_storage peer, orig;
	SSL *ssl;		/* relayed over TLS */
	unsigned long ca_gen;	/* of the CA store its peer is checked with */
	/* --tls-resume, originating: when the full handshake was made whose
	 * session this connection offers (ms), 0 for none */
	long long resumed_born;
	/* Which socket speaks TLS: the client's when the proxy terminates
	 * it (inbound), else the upstream's (origination). */
	bool tls_on_client;
	bool handshaking;	/* TLS: the handshake not done */
	/* kTLS opens the peer's records: spliced out of the TLS socket
	 * through from_tls(c)'s pipe; OpenSSL reads nothing more */
	bool ktls_rx;
	bool close_notify;	/* kTLS RX: the peer's close_notify came */
	/* kTLS RX: user_canceled alerts in a row, and where the last came
	 * (the bytes read from the TLS socket: data in between ends the
	 * row, whether the plaintext side has taken it yet or not) */
	int canceled_run;
	unsigned long long canceled_at;
	const char *why;	/* kTLS RX: why the connection broke */
	/* kTLS seals what is sent: where its record layer and TCP stood
	 * when it got the keys (ktls_flushed) */
	bool ktls_tx;
	/* the peer asked, in a KeyUpdate OpenSSL read, for new sending keys,
	 * which OpenSSL cannot give the kernel */
	bool key_update_asked;
	unsigned long long ktls_tx_given;	/* bytes TCP had been given */
	uint64_t ktls_tx_seq;		/* the kernel's next record number */
	bool notify_sent;	/* our close_notify went to the TLS socket */
	/* on the flushing list: the FIN waits for kTLS's held records */
	bool flushing;
	struct conn *fprev, *fnext;
	long long flush_at;		/* its next look (pi_mono_ms) */
	int flush_every;		/* ms between its looks, now */
	/* what TCP had been given: at the last ktls_flushed(), which an
	 * event may call too, and at the last look (flush_check) */
	unsigned long long flush_given, flush_look_given;
	unsigned flush_looks;		/* looks while it waited (-v) */
	/* The secret the peer's records are sealed with, from OpenSSL's key
	 * log, until the kernel has the keys made from it (then wiped). */
	unsigned char rx_secret[EVP_MAX_MD_SIZE];
	size_t rx_secret_len;
	bool sniffing;		/* inbound: the client's first byte not seen */
	bool client_off, upstream_off;	/* out of epoll: nothing more to wait for */
	/* out of epoll until there is something to wait for (conn_park) */
	bool client_parked, upstream_parked;
	/* what each side is watched for in epoll: a change only is told */
	uint32_t client_events, upstream_events;
	bool dead;		/* closed; freed after the event batch */
	bool on_again;		/* on the `again` list */
	struct conn *again_next;
	struct conn *prev, *next;
};

struct udp_session {
	struct sockaddr_storage client, orig;
	int up, reply;
	struct tag tag, rtag;
	long long last;
	struct client *who;
	struct udp_session *next;	/* all sessions, for expiry */
	struct udp_session *hnext;	/* its hash bucket */
};

static struct conn *conns, *graveyard;
static struct conn *flushing;	/* connections whose FIN waits for kTLS */
/* Relays that gave way at their budget: run in the next turn, event or
 * not (OpenSSL may hold what no epoll event announces). */
static struct conn *again;
static unsigned long long gave_way;	/* relays that did (-v) */
static struct udp_session *sessions;
static struct udp_session *session_hash[SESSION_BUCKETS];
static struct client *client_hash[CLIENT_BUCKETS];
static int udp_listeners[2] = { -1, -1 };
static long nconns, nsessions;
static long long expire_last;	/* when expire() last ran, ms */
static unsigned long long shed, refused;

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

/* FNV-1a over the address (and port, when `port`) of ss. */
static uint32_t ss_hash(const struct sockaddr_storage *ss, bool port,
			uint32_t h)
{
	const uint8_t *a, *pt;
	size_t len;

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *s = (const void *)ss;

		a = (const void *)&s->sin_addr;
		len = 4;
		pt = (const void *)&s->sin_port;
	} else {
		const struct sockaddr_in6 *s = (const void *)ss;

		a = (const void *)&s->sin6_addr;
		len = 16;
		pt = (const void *)&s->sin6_port;
	}
	if (!h)
		h = PI_FNV32_BASIS;
	h = pi_fnv32(h, a, len);
	return port ? pi_fnv32(h, pt, 2) : h;
}

/* The address bytes of ss (4 or 16 of them, into *len). */
static const void *ss_ip(const struct sockaddr_storage *ss, size_t *len)
{
	*len = ss->ss_family == AF_INET ? 4 : 16;
	return ss->ss_family == AF_INET ?
	       (const void *)&((const struct sockaddr_in *)ss)->sin_addr :
	       (const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr;
}

static bool same_addr(const struct sockaddr_storage *a,
		      const struct sockaddr_storage *b)
{
	return a->ss_family == b->ss_family &&
	       !memcmp(a, b, ss_len(a));
}

static bool same_host(const struct sockaddr_storage *a,
		      const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
		       &((const struct sockaddr_in6 *)b)->sin6_addr, 16);
}

/* The client entry of addr's host, made when `create`. */
static struct client *client_of(const struct sockaddr_storage *addr,
				bool create)
{
	struct client **head = &client_hash[ss_hash(addr, false, 0) %
					    CLIENT_BUCKETS];
	struct client *c;

	for (c = *head; c; c = c->next)
		if (same_host(&c->addr, addr))
			return c;
	if (!create)
		return NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->addr.ss_family = addr->ss_family;
	if (addr->ss_family == AF_INET)
		((struct sockaddr_in *)&c->addr)->sin_addr =
			((const struct sockaddr_in *)addr)->sin_addr;
	else
		((struct sockaddr_in6 *)&c->addr)->sin6_addr =
			((const struct sockaddr_in6 *)addr)->sin6_addr;
	c->next = *head;
	*head = c;
	return c;
}

/* Gone once it holds nothing. */
static void client_put(struct client *c)
{
	struct client **pp;

	if (!c || c->tcp || c->udp)
		return;
	pp = &client_hash[ss_hash(&c->addr, false, 0) % CLIENT_BUCKETS];
	while (*pp && *pp != c)
		pp = &(*pp)->next;
	if (*pp)
		*pp = c->next;
	free(c);
}

/* At most a few lines a second: a flood of refused datagrams must not
 * become a flood of log lines. */
static void refuse_log(const char *what, const struct sockaddr_storage *ss,
		       const char *why)
{
	static long long second;
	static int lines;
	long long now = pi_mono_ms() / 1000;
	char a[64];

	refused++;
	if (now != second) {
		second = now;
		lines = 0;
	}
	if (verbose && lines++ < 10)
		fprintf(stderr, "refused %s from %s: %s\n", what,
			addr_str(ss, a, sizeof(a)), why);
}

static int set_transparent(int fd, int family)
{
	int one = 1;

	if (family == AF_INET)
		return setsockopt(fd, SOL_IP, IP_TRANSPARENT, &one, sizeof(one));
	return setsockopt(fd, SOL_IPV6, IPV6_TRANSPARENT, &one, sizeof(one));
}

static int ep_set(int fd, struct tag *tag, uint32_t events, bool add)
{
	struct epoll_event ev = { .events = events, .data.ptr = tag };

	return epoll_ctl(ep, add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fd, &ev);
}

/* One side of a connection watched for `events`, added to epoll or
 * changed; the same interest again costs no system call: readiness is
 * level-triggered, and epoll keeps reporting a ready side as it is. */
static void conn_watch(struct conn *c, bool upstream, uint32_t events,
		       bool add)
{
	uint32_t *now = upstream ? &c->upstream_events : &c->client_events;
	bool *parked = upstream ? &c->upstream_parked : &c->client_parked;

	if (!add && ((*now == events && !*parked) ||
		     (upstream ? c->upstream_off : c->client_off)))
		return;
	if (*parked) {
		if (!events)
			return;
		add = true;
		*parked = false;
	}
	if (upstream)
		ep_set(c->upstream, &c->utag, events, add);
	else
		ep_set(c->client, &c->ctag, events, add);
	*now = events;
}

/*
 * A relaying side with nothing to wait for (no room to read into, nothing
 * to write) is out of epoll until it has: HUP and ERR are reported whatever
 * a descriptor is watched for, and a socket shut both ways (its FIN sent,
 * the peer's received behind data there is no room for yet) is HUP at
 * every epoll_wait, which would spin the loop until the other side makes
 * room. The other side's events bring it back (conn_rearm, tls_rearm); an
 * error there is met when it is read or written again.
 */
static void conn_park(struct conn *c, bool upstream, uint32_t events)
{
	bool *parked = upstream ? &c->upstream_parked : &c->client_parked;

	if (events || *parked || (upstream ? c->upstream_off : c->client_off)) {
		conn_watch(c, upstream, events, false);
		return;
	}
	epoll_ctl(ep, EPOLL_CTL_DEL, upstream ? c->upstream : c->client, NULL);
	*parked = true;
	*(upstream ? &c->upstream_events : &c->client_events) = 0;
}

/* A descriptor the proxy cannot run without, at its start: named, and
 * the proxy ends (a proxy without its signal fd could not be stopped
 * cleanly, one without epoll could serve nothing). */
static int need_fd(int fd, const char *what)
{
	if (fd < 0)
		fprintf(stderr, "podinject-proxy: %s: %s\n", what,
			strerror(errno));
	return fd;
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
	/* Accepted connections inherit it: no call each */
	if (type == SOCK_STREAM)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
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

/* Empty pipes of finished connections, for the next ones: a pipe made is
 * pipe2() and F_SETPIPE_SZ, and two closes at the end, a sixth of the
 * proxy's system calls for a short connection. Their descriptors come out
 * of FDS_SPARE. */
#define PIPES_POOLED	16
/* A proxy with no connection for this long gives them back: its
 * descriptors and pipe pages are as before its first connection. */
#define PIPES_IDLE_MS	1000
static struct {
	int fd[2];
	size_t cap;
} pipe_pool[PIPES_POOLED];
static int pipes_pooled;
static long long conns_gone_at;	/* when the last connection went, ms */

/* A pipe may hold less than asked (fs.pipe-max-size, or the user's pipe
 * pages, for a proxy without CAP_SYS_RESOURCE): the direction is sized by
 * what it holds, else it would wait to read into a full pipe forever and
 * epoll would wake it for that, again and again. */
static int half_pipe(struct half *h)
{
	int sz;

	if (pipes_pooled) {
		pipes_pooled--;
		h->pipe[0] = pipe_pool[pipes_pooled].fd[0];
		h->pipe[1] = pipe_pool[pipes_pooled].fd[1];
		h->cap = pipe_pool[pipes_pooled].cap;
		return 0;
	}
	if (pipe2(h->pipe, O_NONBLOCK | O_CLOEXEC)) {
		h->pipe[0] = h->pipe[1] = -1;
		return -1;
	}
	sz = fcntl(h->pipe[1], F_SETPIPE_SZ, PIPE_BYTES);
	if (sz < 0)
		sz = fcntl(h->pipe[1], F_GETPIPE_SZ);
	if (sz <= 0) {
		close(h->pipe[0]);
		close(h->pipe[1]);
		h->pipe[0] = h->pipe[1] = -1;
		return -1;
	}
	h->cap = sz;
	return 0;
}

static int half_init(struct half *h)
{
	memset(h, 0, sizeof(*h));
	h->pipe[0] = h->pipe[1] = -1;
	return half_pipe(h);
}

/* A direction's pipe is done with: kept for another connection if
 * nothing is left in it, else closed with what it holds. */
static void half_pipe_release(struct half *h)
{
	/* both ends or neither: half_pipe never leaves one */
	if (h->pipe[0] < 0)
		return;
	if (!h->queued && pipes_pooled < PIPES_POOLED) {
		pipe_pool[pipes_pooled].fd[0] = h->pipe[0];
		pipe_pool[pipes_pooled].fd[1] = h->pipe[1];
		pipe_pool[pipes_pooled].cap = h->cap;
		pipes_pooled++;
	} else {
		close(h->pipe[0]);
		close(h->pipe[1]);
	}
	h->pipe[0] = h->pipe[1] = -1;
}

static void pipes_drop(void)
{
	while (pipes_pooled) {
		pipes_pooled--;
		close(pipe_pool[pipes_pooled].fd[0]);
		close(pipe_pool[pipes_pooled].fd[1]);
	}
}

/* A pipe given back: the direction is a buffer of `cap` bytes again. */
static void half_unpipe(struct half *h, size_t cap)
{
	half_pipe_release(h);
	h->cap = cap;
}

/* Room to read into: the pipe's size, and not while a read found it full
 * (a pipe counts pages, so small segments fill it before its size). */
static bool half_room(const struct half *h)
{
	return !h->eof && !h->full && h->queued < h->cap;
}

/* When the next look at the flushing list is due: the earliest of its
 * connections' flush_at, or earlier (a connection that left the list). */
static long long flush_due;

/* The flushing list: connections looked at again, FLUSH_FIRST_MS after
 * they joined, then less often while nothing moves, with no event to wake
 * them (ktls_flushed, flush_check). */
static void flush_wait(struct conn *c)
{
	if (c->flushing)
		return;
	c->flushing = true;
	c->flush_look_given = c->flush_given;	/* ktls_flushed() just ran */
	c->flush_every = FLUSH_FIRST_MS;
	c->flush_at = pi_mono_ms() + FLUSH_FIRST_MS;
	if (!flushing || c->flush_at < flush_due)
		flush_due = c->flush_at;
	c->fprev = NULL;
	c->fnext = flushing;
	if (flushing)
		flushing->fprev = c;
	flushing = c;
}

static void flush_wait_end(struct conn *c)
{
	if (!c->flushing)
		return;
	if (c->fprev)
		c->fprev->fnext = c->fnext;
	else
		flushing = c->fnext;
	if (c->fnext)
		c->fnext->fprev = c->fprev;
	c->flushing = false;
	c->fprev = c->fnext = NULL;
}

static void conn_free(struct conn *c, bool reset, const char *why)
{
	if (verbose) {
		char p[64], o[64];

		/* the looks its FIN waited for (flush_check), after the
		 * reason, which tests and readers find at its place */
		fprintf(stderr, "conn %s -> %s up %llu down %llu %s",
			addr_str(&c->peer, p, sizeof(p)),
			addr_str(&c->orig, o, sizeof(o)), c->up.bytes,
			c->down.bytes, why);
		if (c->flush_looks)
			fprintf(stderr, " (%u looks for ktls records)",
				c->flush_looks);
		fputc('\n', stderr);
	}
	if (reset) {
		struct linger lg = { .l_onoff = 1, .l_linger = 0 };

		setsockopt(c->client, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		/* The server must not take a cut stream for a finished one:
		 * a FIN would tell it the request ended where the relay
		 * stopped (a client's reset, plaintext; over TLS no
		 * close_notify sent, or the client's stream broken before
		 * its own). Connected directly it would have read the
		 * reset; it reads it here too. */
		if (c->upstream >= 0)
			setsockopt(c->upstream, SOL_SOCKET, SO_LINGER, &lg,
				   sizeof(lg));
	}
	if (c->ssl)
		SSL_free(c->ssl);
	/* The peer's traffic secret, taken for kTLS, is wiped when the
	 * keys are in the kernel; a connection that ends before (a
	 * handshake cut short, a resumed session refused) wipes it here. */
	OPENSSL_cleanse(c->rx_secret, sizeof(c->rx_secret));
	free(c->up.buf);	/* both directions' buffers */
	close(c->client);
	if (c->upstream >= 0)
		close(c->upstream);
	half_pipe_release(&c->up);
	half_pipe_release(&c->down);
	if (c->prev)
		c->prev->next = c->next;
	else
		conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	flush_wait_end(c);
	if (c->who) {
		c->who->tcp--;
		client_put(c->who);
		c->who = NULL;
	}
	if (c->on_again) {
		struct conn **pp = &again;

		while (*pp != c)
			pp = &(*pp)->again_next;
		*pp = c->again_next;
		c->on_again = false;
	}
	/* Later events of this batch may still name it. */
	c->dead = true;
	c->next = graveyard;
	graveyard = c;
	if (!--nconns)
		conns_gone_at = pi_mono_ms();
}

/* Moves what it can of one direction through its pipe, without ending
 * it. -1 on a fatal error. */
static int splice_through(struct half *h, int in, int out)
{
	ssize_t n;

	for (;;) {
		if (half_room(h)) {
			n = splice(in, NULL, h->pipe[1], NULL,
				   h->cap - h->queued,
				   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
			if (n > 0)
				h->queued += n;
			else if (n == 0)
				h->eof = true;
			else if (errno != EAGAIN)
				return -1;
			else if (h->queued)
				/* no data, or no room: either way nothing
				 * more to read until the pipe drains */
				h->full = true;
		}
		if (!h->queued)
			break;
		n = splice(h->pipe[0], NULL, out, NULL, h->queued,
			   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (n > 0) {
			h->queued -= n;
			h->bytes += n;
			h->full = false;
			if ((h->budget -= n) <= 0) {
				h->gave_way = true;
				break;
			}
			continue;
		}
		if (n < 0 && errno != EAGAIN)
			return -1;
		break;	/* `out` is full: wait for EPOLLOUT */
	}
	return 0;
}

/* Moves what it can of one direction; its end becomes `out`'s FIN. */
static int pump(struct half *h, int in, int out)
{
	if (splice_through(h, in, out))
		return -1;
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
	/* No RDHUP: a FIN makes the socket readable, so EPOLLIN sees it
	 * while the side is read. While it is not (its EOF known, or its
	 * pipe full with the FIN queued behind data), RDHUP, level-
	 * triggered, would wake the loop for nothing until the pipe drains
	 * or the other direction ends. HUP and ERR still come. */
	uint32_t ce = 0, ue = 0;

	if (half_room(&c->up))
		ce |= EPOLLIN;
	if (c->down.queued)
		ce |= EPOLLOUT;
	if (half_room(&c->down))
		ue |= EPOLLIN;
	if (c->up.queued)
		ue |= EPOLLOUT;
	conn_park(c, false, ce);
	conn_park(c, true, ue);
}

/*
 * TLS, originated or terminated. Each pod the proxy speaks for has an
 * identity: its certificate and key in tls_dir/<address>/, loaded into an
 * SSL_CTX of its own, looked at again (stat) at most once a RELOAD_MS at
 * its new connections, so that an issuer can rotate them. Originating,
 * that pod is the client (the connection's peer); terminating (inbound),
 * it is the protected server pod (the connection's original destination).
 * The CA bundle that the other end's certificate is checked against is
 * one store, reloaded the same way and given to each connection as it
 * starts.
 */
struct file_id {
	bool present;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
};

/* Originating with --tls-resume: what the identity's last handshake with
 * a destination left to resume from, and under which CA store its server
 * was checked. */
struct saved_session {
	struct sockaddr_storage dest;	/* address and port */
	SSL_SESSION *sess;
	unsigned long ca_gen;
	/* when its full handshake was made (ms): a resumed session's new
	 * tickets carry the same, so that a chain of resumptions ends
	 * --tls-resume after the certificates were last shown */
	long long born;
	struct saved_session *next;	/* newest first */
};

/* What a ticket the proxy issues carries (terminating): the same two */
struct ticket_data {
	unsigned long ca_gen;
	long long born;
};

struct identity {
	struct sockaddr_storage addr;	/* port 0 */
	char name[INET6_ADDRSTRLEN];
	SSL_CTX *ctx;			/* NULL: no usable identity */
	struct file_id cert, key;	/* of the files ctx was made from */
	long long checked;		/* ms */
	/* made with ctx (as these files); dropped with it */
	struct saved_session *sessions;
	struct identity *next;
};

static struct identity *identities[IDENTITY_BUCKETS];
static X509_STORE *ca_store;
static struct file_id ca_file;
static long long ca_checked;
/* Bumped at each new CA store: a session made under an older one is not
 * resumed, so that a peer the new bundle no longer trusts must show its
 * certificate again. */
static unsigned long ca_gen;

static void file_id_of(const char *path, struct file_id *f)
{
	struct stat st;

	memset(f, 0, sizeof(*f));
	if (stat(path, &st) || !S_ISREG(st.st_mode))
		return;
	f->present = true;
	f->dev = st.st_dev;
	f->ino = st.st_ino;
	f->size = st.st_size;
	f->mtime = st.st_mtim;
}

static bool file_id_same(const struct file_id *a, const struct file_id *b)
{
	return a->present == b->present && a->dev == b->dev &&
	       a->ino == b->ino && a->size == b->size &&
	       a->mtime.tv_sec == b->mtime.tv_sec &&
	       a->mtime.tv_nsec == b->mtime.tv_nsec;
}

/* OpenSSL's last error as text, its queue emptied. */
static const char *tls_error(void)
{
	static char buf[256];
	unsigned long e = ERR_get_error(), next;

	/* the last one queued is the nearest to the cause's report */
	while ((next = ERR_get_error()))
		e = next;
	if (!e)
		return "no detail";
	ERR_error_string_n(e, buf, sizeof(buf));
	return buf;
}

/* The first URI SAN of cert, "" if none. */
static const char *cert_uri(X509 *cert, char *buf, size_t len)
{
	GENERAL_NAMES *names;

	buf[0] = 0;
	names = X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);
	for (int i = 0; names && i < sk_GENERAL_NAME_num(names); i++) {
		GENERAL_NAME *g = sk_GENERAL_NAME_value(names, i);
		const unsigned char *u;
		int n;

		if (g->type != GEN_URI)
			continue;
		u = ASN1_STRING_get0_data(g->d.uniformResourceIdentifier);
		n = ASN1_STRING_length(g->d.uniformResourceIdentifier);
		/* an embedded NUL would make the name look shorter */
		if (n <= 0 || (size_t)n >= len || memchr(u, 0, n))
			continue;
		memcpy(buf, u, n);
		buf[n] = 0;
		break;
	}
	GENERAL_NAMES_free(names);
	return buf;
}

/* cert has a URI SAN spiffe://tls_td/<something>. */
static bool in_trust_domain(X509 *cert)
{
	size_t tdlen = strlen(tls_td);
	GENERAL_NAMES *names;
	bool ok = false;

	names = X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);
	for (int i = 0; names && !ok && i < sk_GENERAL_NAME_num(names); i++) {
		GENERAL_NAME *g = sk_GENERAL_NAME_value(names, i);
		const char *u;
		size_t n;

		if (g->type != GEN_URI)
			continue;
		u = (const char *)ASN1_STRING_get0_data(g->d.uniformResourceIdentifier);
		n = ASN1_STRING_length(g->d.uniformResourceIdentifier);
		ok = n > 9 + tdlen + 1 && !memchr(u, 0, n) &&
		     !memcmp(u, "spiffe://", 9) &&
		     !memcmp(u + 9, tls_td, tdlen) && u[9 + tdlen] == '/';
	}
	GENERAL_NAMES_free(names);
	return ok;
}

/* OpenSSL has checked the chain and the IP SAN (the connection's verify
 * parameters) of the other end, server or client; the trust domain is the
 * one thing left, on the leaf. A failure here fails the handshake like
 * any other. */
static int verify_peer(int ok, X509_STORE_CTX *x)
{
	if (!ok || !tls_td || X509_STORE_CTX_get_error_depth(x) != 0)
		return ok;
	if (in_trust_domain(X509_STORE_CTX_get_current_cert(x)))
		return 1;
	X509_STORE_CTX_set_error(x, X509_V_ERR_APPLICATION_VERIFICATION);
	return 0;
}

/*
 * OpenSSL 3.0 gives the kernel TLS 1.3's sending keys only; the receiving
 * ones the proxy hands over itself (ktls_rx_start), made from the peer's
 * application traffic secret, which OpenSSL tells through its key log
 * callback alone. Only that secret is kept, in its connection, and only
 * until the handshake is done; nothing is written anywhere.
 */
static void keylog(const SSL *ssl, const char *line)
{
	/* the secret the peer sends with: the client's when terminating */
	const char *want = inbound ? "CLIENT_TRAFFIC_SECRET_0 " :
				     "SERVER_TRAFFIC_SECRET_0 ";
	struct conn *c = SSL_get_app_data(ssl);
	const char *hex = strrchr(line, ' ');
	size_t len = 0;

	if (!c || !hex || strncmp(line, want, strlen(want)))
		return;
	if (!OPENSSL_hexstr2buf_ex(c->rx_secret, sizeof(c->rx_secret), &len,
				   hex + 1, ':'))
		len = 0;
	c->rx_secret_len = len;
}

static struct identity *identity_find(const struct sockaddr_storage *addr)
{
	struct identity *id = identities[ss_hash(addr, false, 0) %
					 IDENTITY_BUCKETS];

	while (id && !same_host(&id->addr, addr))
		id = id->next;
	return id;
}

static void saved_free(struct saved_session *ss)
{
	SSL_SESSION_free(ss->sess);
	free(ss);
}

/* The identity's sessions go with the context they were made with: new
 * files, or none, mean full handshakes again. */
static void sessions_drop(struct identity *id)
{
	while (id->sessions) {
		struct saved_session *ss = id->sessions;

		id->sessions = ss->next;
		saved_free(ss);
	}
}

/* Whether a session whose full handshake was made at `born` (ms) is
 * still within --tls-resume */
static bool young_enough(long long born)
{
	long long age = pi_mono_ms() - born;

	return age >= 0 && age < tls_resume_s * 1000LL;
}

/* Whether a saved session may still be offered: made under the CA store
 * of now, within --tls-resume of its full handshake, and within the
 * lifetime OpenSSL gives it. (OpenSSL 3.0 keeps a session's first time
 * through renewals, and its lifetime is at most the context's, so the
 * last test alone would end a chain of resumptions too, to the second;
 * `born` does not lean on that.) */
static bool saved_usable(const struct saved_session *ss)
{
	long age = (long)(time(NULL) - SSL_SESSION_get_time(ss->sess));

	return ss->ca_gen == ca_gen && SSL_SESSION_is_resumable(ss->sess) &&
	       young_enough(ss->born) && age >= 0 &&
	       age < SSL_SESSION_get_timeout(ss->sess);
}

/*
 * Originating: OpenSSL read a session ticket from the server of one of
 * the identity's connections. It is kept for that destination alone, and
 * only if the connection's identity and CA store are still the current
 * ones; it replaces the destination's last, and the identity's oldest
 * goes beyond RESUME_PER_IDENTITY. 1: the session is kept (its reference
 * is ours).
 */
static int session_saved(SSL *ssl, SSL_SESSION *sess)
{
	struct conn *c = SSL_get_app_data(ssl);
	struct saved_session **pp, *ss;
	struct identity *id;
	int n = 0;

	if (!c || c->ca_gen != ca_gen || !SSL_SESSION_is_resumable(sess))
		return 0;
	id = identity_find(&c->peer);
	if (!id || id->ctx != SSL_get_SSL_CTX(ssl))
		return 0;
	ss = calloc(1, sizeof(*ss));
	if (!ss)
		return 0;
	ss->dest = c->orig;
	ss->sess = sess;
	ss->ca_gen = c->ca_gen;
	/* a ticket of a resumed connection descends from the session it
	 * resumed */
	ss->born = SSL_session_reused(ssl) && c->resumed_born ?
		   c->resumed_born : pi_mono_ms();
	if (!saved_usable(ss)) {
		free(ss);	/* OpenSSL keeps its reference */
		return 0;
	}
	ss->next = id->sessions;
	id->sessions = ss;
	/* the destination's last goes, and what is past its time or the
	 * identity's share */
	for (pp = &ss->next; *pp; ) {
		if (++n >= RESUME_PER_IDENTITY ||
		    same_addr(&(*pp)->dest, &ss->dest) || !saved_usable(*pp)) {
			struct saved_session *old = *pp;

			*pp = old->next;
			saved_free(old);
			continue;
		}
		pp = &(*pp)->next;
	}
	return 1;
}

/* Originating: the session the identity may resume with dest, offered on
 * ssl; one that is no longer usable is dropped. */
static void session_offer(struct conn *c, SSL *ssl,
			  const struct sockaddr_storage *own,
			  const struct sockaddr_storage *dest)
{
	struct identity *id = identity_find(own);
	struct saved_session **pp;

	for (pp = id ? &id->sessions : NULL; pp && *pp; pp = &(*pp)->next) {
		struct saved_session *ss = *pp;

		if (!same_addr(&ss->dest, dest))
			continue;
		if (saved_usable(ss)) {
			if (SSL_set_session(ssl, ss->sess))
				c->resumed_born = ss->born;
			return;
		}
		*pp = ss->next;
		saved_free(ss);
		return;
	}
}

/* Terminating: a ticket carries the generation of the CA store that the
 * client's certificate was checked against, and when it was (the full
 * handshake: a resumed session's new tickets keep the time of the one it
 * resumed, whose data OpenSSL has copied into it). */
static int ticket_made(SSL *ssl, void *arg)
{
	SSL_SESSION *sess = SSL_get0_session(ssl);
	struct conn *c = SSL_get_app_data(ssl);
	struct ticket_data t = { c ? c->ca_gen : 0, pi_mono_ms() };
	void *data = NULL;
	size_t len = 0;

	(void)arg;
	if (SSL_session_reused(ssl) &&
	    SSL_SESSION_get0_ticket_appdata(sess, &data, &len) &&
	    len == sizeof(t))
		memcpy(&t.born, &((struct ticket_data *)data)->born,
		       sizeof(t.born));
	return SSL_SESSION_set1_ticket_appdata(sess, &t, sizeof(t));
}

/* Terminating: a ticket from an older CA store, one whose full handshake
 * is older than --tls-resume, or one that does not open, means a full
 * handshake (the client's certificate checked as the
 * files are now); never a failure for that alone. */
static SSL_TICKET_RETURN ticket_opened(SSL *ssl, SSL_SESSION *sess,
				       const unsigned char *keyname,
				       size_t keyname_len,
				       SSL_TICKET_STATUS status, void *arg)
{
	struct conn *c = SSL_get_app_data(ssl);
	struct ticket_data t;
	void *data = NULL;
	size_t len = 0;

	(void)keyname; (void)keyname_len; (void)arg;
	switch (status) {
	case SSL_TICKET_SUCCESS:
	case SSL_TICKET_SUCCESS_RENEW:
		break;
	case SSL_TICKET_FATAL_ERR_MALLOC:
	case SSL_TICKET_FATAL_ERR_OTHER:
		return SSL_TICKET_RETURN_ABORT;
	default:
		return SSL_TICKET_RETURN_IGNORE_RENEW;
	}
	if (!c || !SSL_SESSION_get0_ticket_appdata(sess, &data, &len) ||
	    len != sizeof(t))
		return SSL_TICKET_RETURN_IGNORE_RENEW;
	memcpy(&t, data, sizeof(t));
	return t.ca_gen == c->ca_gen && young_enough(t.born) ?
	       SSL_TICKET_RETURN_USE_RENEW : SSL_TICKET_RETURN_IGNORE_RENEW;
}

/* The checks a full handshake makes of the other end's certificate, made
 * again of the one a resumed session carries: its validity now, its IP
 * SAN against this connection's other end (the ticket may come from any
 * address), the trust domain. NULL when it passes, else why not. */
static const char *resumed_peer_bad(struct conn *c)
{
	X509 *cert = SSL_get0_peer_certificate(c->ssl);
	const void *ip;
	size_t len;

	if (!cert)
		return "tls resumed: no certificate";
	if (X509_cmp_current_time(X509_get0_notBefore(cert)) >= 0 ||
	    X509_cmp_current_time(X509_get0_notAfter(cert)) <= 0)
		return "tls resumed: certificate not valid now";
	ip = ss_ip(inbound ? &c->peer : &c->orig, &len);
	if (X509_check_ip(cert, ip, len, 0) != 1)
		return "tls resumed: certificate not for this address";
	if (tls_td && !in_trust_domain(cert))
		return "tls resumed: certificate not of the trust domain";
	return NULL;
}

/*
 * --tls-resume: sessions resumed for tls_resume_s seconds at most, always
 * with a new (EC)DHE exchange (OpenSSL's client offers psk_dhe_ke only)
 * and never with early data. Terminating, one stateless ticket after each
 * handshake, sealed with keys of this context's own, so that an identity
 * loaded again (a new context) makes every older ticket a full handshake.
 * Originating, the tickets are kept by identity and destination
 * (session_saved), never in OpenSSL's own cache.
 */
static SSL_CTX *resumable(SSL_CTX *ctx)
{
	static const unsigned char sid_ctx[] = "podinject-proxy";

	SSL_CTX_set_timeout(ctx, tls_resume_s);
	if (!inbound) {
		SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT |
					       SSL_SESS_CACHE_NO_INTERNAL_STORE);
		SSL_CTX_sess_set_new_cb(ctx, session_saved);
		return ctx;
	}
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	if (!SSL_CTX_set_num_tickets(ctx, 1) ||
	    !SSL_CTX_set_session_id_context(ctx, sid_ctx, sizeof(sid_ctx) - 1) ||
	    !SSL_CTX_set_session_ticket_cb(ctx, ticket_made, ticket_opened,
					   NULL)) {
		SSL_CTX_free(ctx);
		return NULL;
	}
	return ctx;
}

/* Whether received records may go to the kernel (kTLS RX): where it has
 * kTLS, except originating with --tls-resume, where OpenSSL reads the
 * tickets the kernel's control records would pass over. */
static bool ktls_rx_wanted(void)
{
	return ktls_kernel && !(tls_resume_s && !inbound);
}

/* A context for one identity: a TLS client's when originating, a
 * server's when terminating (the proxy runs in one mode). */
static SSL_CTX *tls_ctx_new(void)
{
	SSL_CTX *ctx = SSL_CTX_new(inbound ? TLS_server_method() :
					     TLS_client_method());

	if (!ctx)
		return NULL;
	if (!SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) ||
	    !SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION)) {
		SSL_CTX_free(ctx);
		return NULL;
	}
	/* OpenSSL hands the record layer to the kernel where it can
	 * (OpenSSL 3.0: the sending half of TLS 1.3; the receiving half is
	 * the proxy's to hand over, ktls_rx_start). */
	if (ktls_kernel) {
		SSL_CTX_set_options(ctx, SSL_OP_ENABLE_KTLS);
		SSL_CTX_set_keylog_callback(ctx, keylog);
	}
	/* Where OpenSSL opens every received record itself, it reads
	 * ahead: one recv() takes what the socket holds, where it would
	 * take two per record (the header, then the rest). Not where the
	 * kernel may be given the receiving keys: nothing may be read
	 * beyond the handshake then (ktls_rx_start). What it holds is
	 * read by the relay's SSL_read loop, which no epoll event needs to
	 * announce (tls_pump_decrypt). */
	if (!ktls_rx_wanted())
		SSL_CTX_set_read_ahead(ctx, 1);
	/* The relay's buffers move and grow between a stalled SSL_write
	 * and its retry, and it takes what each call wrote. */
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
			 SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	/* A server asks for the client's certificate, and a client that
	 * shows none fails the handshake like one that shows a bad one. */
	SSL_CTX_set_verify(ctx, inbound ? SSL_VERIFY_PEER |
			   SSL_VERIFY_FAIL_IF_NO_PEER_CERT : SSL_VERIFY_PEER,
			   verify_peer);
	if (tls_resume_s)
		return resumable(ctx);
	/* No resumption: every connection checks the other end's
	 * certificate against the CA and its address as they are now. */
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
	/* NO_TICKET alone makes a TLS 1.3 server issue stateful tickets;
	 * none at all are sent. */
	if (inbound && !SSL_CTX_set_num_tickets(ctx, 0)) {
		SSL_CTX_free(ctx);
		return NULL;
	}
	return ctx;
}

/* The CA bundle into a new store; NULL (said) when it holds nothing. */
static X509_STORE *ca_load(void)
{
	X509_STORE *st = X509_STORE_new();

	if (st && X509_STORE_load_file(st, tls_ca))
		return st;
	fprintf(stderr, "podinject-proxy: tls: CA bundle %s: %s\n", tls_ca,
		tls_error());
	X509_STORE_free(st);
	return NULL;
}

/* A changed bundle replaces the store; one that does not load leaves the
 * last good one (said), and is tried again at the next check. */
static void ca_refresh(long long now)
{
	struct file_id f;
	X509_STORE *st;

	if (ca_store && now - ca_checked < RELOAD_MS)
		return;
	ca_checked = now;
	file_id_of(tls_ca, &f);
	if (ca_store && file_id_same(&f, &ca_file))
		return;
	st = ca_load();
	if (!st)
		return;
	/* connections that hold the old store keep their reference */
	X509_STORE_free(ca_store);
	ca_store = st;
	ca_file = f;
	ca_gen++;
	if (verbose && ca_checked)
		fprintf(stderr, "tls: CA bundle %s loaded\n", tls_ca);
}

/* The identity's files into a new context; NULL (said) on failure. */
static SSL_CTX *identity_load(const struct identity *id, const char *cert,
			      const char *key)
{
	SSL_CTX *ctx = tls_ctx_new();

	if (ctx && SSL_CTX_use_certificate_chain_file(ctx, cert) == 1 &&
	    SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) == 1 &&
	    SSL_CTX_check_private_key(ctx) == 1)
		return ctx;
	fprintf(stderr, "podinject-proxy: tls: identity of %s: %s\n", id->name,
		tls_error());
	SSL_CTX_free(ctx);
	return NULL;
}

/*
 * The identity of the pod at addr, as its files are now (looked at no
 * more than once a RELOAD_MS): NULL when it has none. Files that are gone
 * take the identity away at once; files that are there but do not load
 * (an issuer half way through writing them) leave the last good identity,
 * and are tried again at the next check.
 */
static SSL_CTX *identity_of(const struct sockaddr_storage *addr,
			    long long now)
{
	struct identity **head = &identities[ss_hash(addr, false, 0) %
					      IDENTITY_BUCKETS];
	char cert[PATH_MAX], key[PATH_MAX];
	struct identity *id = identity_find(addr);
	struct file_id fc, fk;
	SSL_CTX *ctx;

	if (!id) {
		id = calloc(1, sizeof(*id));
		if (!id)
			return NULL;
		id->addr.ss_family = addr->ss_family;
		if (addr->ss_family == AF_INET)
			((struct sockaddr_in *)&id->addr)->sin_addr =
				((const struct sockaddr_in *)addr)->sin_addr;
		else
			((struct sockaddr_in6 *)&id->addr)->sin6_addr =
				((const struct sockaddr_in6 *)addr)->sin6_addr;
		inet_ntop(addr->ss_family, addr->ss_family == AF_INET ?
			  (const void *)&((const struct sockaddr_in *)addr)->sin_addr :
			  (const void *)&((const struct sockaddr_in6 *)addr)->sin6_addr,
			  id->name, sizeof(id->name));
		id->checked = now - RELOAD_MS;
		id->next = *head;
		*head = id;
	}
	if (now - id->checked < RELOAD_MS)
		return id->ctx;
	id->checked = now;
	snprintf(cert, sizeof(cert), "%s/%s/cert.pem", tls_dir, id->name);
	snprintf(key, sizeof(key), "%s/%s/key.pem", tls_dir, id->name);
	file_id_of(cert, &fc);
	file_id_of(key, &fk);
	if (!fc.present || !fk.present) {
		if (id->ctx && verbose)
			fprintf(stderr, "tls: identity of %s gone\n", id->name);
		sessions_drop(id);
		SSL_CTX_free(id->ctx);
		id->ctx = NULL;
		memset(&id->cert, 0, sizeof(id->cert));
		memset(&id->key, 0, sizeof(id->key));
		return NULL;
	}
	if (id->ctx && file_id_same(&fc, &id->cert) &&
	    file_id_same(&fk, &id->key))
		return id->ctx;
	ctx = identity_load(id, cert, key);
	if (!ctx)
		return id->ctx;
	/* connections made with the old one hold their own reference */
	sessions_drop(id);
	SSL_CTX_free(id->ctx);
	id->ctx = ctx;
	id->cert = fc;
	id->key = fk;
	if (verbose)
		fprintf(stderr, "tls: identity of %s loaded\n", id->name);
	return ctx;
}

/* The peer's KeyUpdate, as OpenSSL reads it: whether it asks for ours */
static void key_update_seen(int write_p, int version, int content_type,
			    const void *buf, size_t len, SSL *ssl, void *arg)
{
	const unsigned char *m = buf;
	struct conn *c = SSL_get_app_data(ssl);

	(void)version;
	(void)arg;
	/* a handshake message: its type, 24-bit length, request_update */
	if (!write_p && content_type == SSL3_RT_HANDSHAKE && len >= 5 &&
	    m[0] == SSL3_MT_KEY_UPDATE && m[4] == SSL_KEY_UPDATE_REQUESTED &&
	    c)
		c->key_update_asked = true;
}

/* The connection's TLS end: the identity of the pod at `own` (the client
 * pod's when originating, the protected server pod's when terminating),
 * the CA as it is now, and the address of the other end, `other`, as the
 * name its certificate must prove (an IP SAN). */
static SSL *tls_conn_new(struct conn *c, const struct sockaddr_storage *own,
			 const struct sockaddr_storage *other, const char **why)
{
	long long now = pi_mono_ms();
	const void *ip;
	SSL_CTX *ctx;
	size_t len;
	SSL *ssl;

	ca_refresh(now);
	ctx = identity_of(own, now);
	*why = "tls: no identity";
	if (!ctx)
		return NULL;
	*why = "tls: no memory";
	ssl = SSL_new(ctx);
	if (!ssl)
		return NULL;
	ip = ss_ip(other, &len);
	if (!X509_VERIFY_PARAM_set1_ip(SSL_get0_param(ssl), ip, len) ||
	    !SSL_set1_verify_cert_store(ssl, ca_store)) {
		SSL_free(ssl);
		return NULL;
	}
	c->ca_gen = ca_gen;
	SSL_set_app_data(ssl, c);	/* for keylog() and the sessions' */
	SSL_set_msg_callback(ssl, key_update_seen);
	if (tls_resume_s && !inbound)
		session_offer(c, ssl, own, other);
	return ssl;
}

/*
 * Whether this kernel can take TLS records (kTLS), said once at start. The
 * "tls" upper layer protocol is looked up by name: a kernel without it
 * (no CONFIG_TLS, no module) answers ENOENT; one with it refuses a socket
 * that is not connected, which is all this asks.
 */
static void ktls_report(void)
{
	int fd, err;

	if (ktls_off) {
		fprintf(stderr, "podinject-proxy: tls: ktls off (--no-ktls): records sealed and opened by OpenSSL\n");
		return;
	}
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	err = setsockopt(fd, IPPROTO_TCP, TCP_ULP, "tls", sizeof("tls")) ? errno : 0;
	close(fd);
	ktls_kernel = err != ENOENT;
	if (!ktls_kernel)
		fprintf(stderr, "podinject-proxy: tls: ktls unavailable (no CONFIG_TLS: no \"tls\" TCP ULP)\n");
	else
		fprintf(stderr, "podinject-proxy: tls: ktls available (the kernel has the \"tls\" TCP ULP): records sealed and opened by the kernel, received plaintext spliced, sent through SSL_write\n");
}

/* Both directions' buffers, in one allocation (freed through up.buf). */
static int tls_bufs(struct conn *c)
{
	unsigned char *b = malloc(2 * TLS_BUF);

	if (!b)
		return -1;
	c->up.buf = b;
	c->down.buf = b + TLS_BUF;
	c->up.cap = c->down.cap = TLS_BUF;
	return 0;
}

/* Room at the end of a buffer, its bytes moved to the front when that
 * makes some; not while an SSL_write() of them waits to be tried again:
 * with kTLS, OpenSSL keeps a pointer to the bytes it was given, not a
 * copy (SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER holds only without it), and
 * the retry sends what is at that address then. Moved, the server got
 * other bytes than the client sent (t_mtls bulk_each_way, our kernel). */
static size_t tls_room(struct half *h)
{
	if (!h->queued)
		h->head = 0;
	else if (h->head && h->head + h->queued == h->cap &&
		 h->want != SSL_ERROR_WANT_WRITE) {
		memmove(h->buf, h->buf + h->head, h->queued);
		h->head = 0;
	}
	return h->cap - h->head - h->queued;
}

/* Whether tls_room() would find room now: what decides if the side that
 * fills the buffer is watched for reading. Not "queued < cap": while a
 * write waits, the bytes before head are room that cannot be used, and a
 * readable socket watched for it wakes the loop again and again until the
 * write goes (relay_check, stalled_server_no_spin). */
static bool tls_can_take(const struct half *h)
{
	if (h->eof)
		return false;
	if (!h->queued || h->want != SSL_ERROR_WANT_WRITE)
		return h->queued < h->cap;
	return h->head + h->queued < h->cap;
}

static void tls_took(struct half *h, size_t n)
{
	h->head += n;
	h->queued -= n;
	h->bytes += n;
}

/* Notes in h what OpenSSL waits for after a call that returned r; true
 * when it only waits for the socket (the call is tried again later). */
static bool tls_retry(struct conn *c, struct half *h, int r)
{
	h->want = SSL_get_error(c->ssl, r);
	return h->want == SSL_ERROR_WANT_WRITE ||
	       h->want == SSL_ERROR_WANT_READ;
}

/*
 * The two sides of a TLS connection. The TLS socket is the upstream when
 * the proxy originates TLS and the client when it terminates it; the
 * other one speaks plaintext. One pump encrypts (plaintext side -> TLS
 * side: client -> server when originating, server pod -> client when
 * terminating), the other decrypts, whichever way that is.
 */
static int tls_fd(const struct conn *c)
{
	return c->tls_on_client ? c->client : c->upstream;
}

static int plain_fd(const struct conn *c)
{
	return c->tls_on_client ? c->upstream : c->client;
}

/* The direction whose bytes go into TLS, and the one they come out of. */
static struct half *to_tls(struct conn *c)
{
	return c->tls_on_client ? &c->down : &c->up;
}

static struct half *from_tls(struct conn *c)
{
	return c->tls_on_client ? &c->up : &c->down;
}

/* HKDF-Expand-Label(secret, label, "", len) of TLS 1.3 (RFC 8446, 7.1),
 * OpenSSL's own. */
static int tls13_expand(const char *digest, const unsigned char *secret,
			size_t secret_len, const char *label,
			unsigned char *out, size_t len)
{
	EVP_KDF *kdf = EVP_KDF_fetch(NULL, "TLS13-KDF", NULL);
	EVP_KDF_CTX *kctx = kdf ? EVP_KDF_CTX_new(kdf) : NULL;
	int mode = EVP_KDF_HKDF_MODE_EXPAND_ONLY, ok;
	OSSL_PARAM params[] = {
		OSSL_PARAM_construct_int(OSSL_KDF_PARAM_MODE, &mode),
		OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST,
						 (char *)digest, 0),
		OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY,
						  (void *)secret, secret_len),
		OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_PREFIX,
						  "tls13 ", 6),
		OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_LABEL,
						  (void *)label, strlen(label)),
		OSSL_PARAM_construct_end(),
	};

	ok = kctx && EVP_KDF_derive(kctx, out, len, params) > 0;
	EVP_KDF_CTX_free(kctx);
	EVP_KDF_free(kdf);
	return ok ? 0 : -1;
}

/*
 * The peer's records to the kernel, once the handshake is done: the
 * AES-GCM key and IV of its application traffic secret (the cipher suites
 * both the kernel and the proxy's TLS 1.3 have; ChaCha20 stays with
 * OpenSSL), record sequence 0, as nothing has been read with them yet:
 * OpenSSL, which reads no further than the record it needs, holds nothing
 * unread (else the connection stays with SSL_read). 0 when the kernel
 * has them; else -1, and OpenSSL reads on (the "tls" ULP, when this set
 * it, passes the bytes through untouched until it is given keys).
 */
static int ktls_rx_start(struct conn *c)
{
	const SSL_CIPHER *cipher = SSL_get_current_cipher(c->ssl);
	union {
		struct tls12_crypto_info_aes_gcm_128 g128;
		struct tls12_crypto_info_aes_gcm_256 g256;
	} ci;
	unsigned char key[32], iv[12];
	const char *md;
	socklen_t len;
	size_t keylen;
	int ret = -1;

	memset(&ci, 0, sizeof(ci));
	switch (cipher ? SSL_CIPHER_get_protocol_id(cipher) : 0) {
	case 0x1301:	/* TLS_AES_128_GCM_SHA256 */
		keylen = 16;
		md = "SHA256";
		break;
	case 0x1302:	/* TLS_AES_256_GCM_SHA384 */
		keylen = 32;
		md = "SHA384";
		break;
	default:
		goto out;
	}
	if (SSL_version(c->ssl) != TLS1_3_VERSION || !c->rx_secret_len ||
	    SSL_has_pending(c->ssl) ||
	    tls13_expand(md, c->rx_secret, c->rx_secret_len, "key", key,
			 keylen) ||
	    tls13_expand(md, c->rx_secret, c->rx_secret_len, "iv", iv,
			 sizeof(iv)))
		goto out;
	/* The nonce is the salt (4 bytes) followed by the IV (8): the two
	 * kernel structures differ only in their key's size. */
#define KTLS_RX_INFO(ci, type) do {					\
		(ci).info.version = TLS_1_3_VERSION;			\
		(ci).info.cipher_type = (type);				\
		memcpy((ci).salt, iv, sizeof((ci).salt));		\
		memcpy((ci).iv, iv + sizeof((ci).salt), sizeof((ci).iv)); \
		memcpy((ci).key, key, sizeof((ci).key));		\
		len = sizeof(ci);					\
	} while (0)
	if (keylen == 16)
		KTLS_RX_INFO(ci.g128, TLS_CIPHER_AES_GCM_128);
	else
		KTLS_RX_INFO(ci.g256, TLS_CIPHER_AES_GCM_256);
#undef KTLS_RX_INFO
	/* the ULP is there already when OpenSSL gave the kernel its
	 * sending keys */
	if (setsockopt(tls_fd(c), IPPROTO_TCP, TCP_ULP, "tls", sizeof("tls")) &&
	    errno != EEXIST)
		goto out;
	if (!setsockopt(tls_fd(c), SOL_TLS, TLS_RX, &ci, len))
		ret = 0;
out:
	OPENSSL_cleanse(&ci, sizeof(ci));
	OPENSSL_cleanse(key, sizeof(key));
	OPENSSL_cleanse(iv, sizeof(iv));
	OPENSSL_cleanse(c->rx_secret, sizeof(c->rx_secret));
	c->rx_secret_len = 0;
	return ret;
}

/*
 * kTLS RX: a record that is not application data, which splice() cannot
 * read (EINVAL), read with its type. The server's session tickets are
 * passed over (no session is resumed); the peer's close_notify ends the
 * direction (1); a key update, which the kernel cannot follow here, or
 * any other alert or record breaks the connection (-1, c->why), but for
 * user_canceled. 0: the tickets read, or the user_canceled passed over.
 */
static int ktls_control(struct conn *c)
{
	static unsigned char rec[TLS_RECORD_MAX];
	char cbuf[CMSG_SPACE(sizeof(unsigned char))];
	struct iovec iov = { .iov_base = rec, .iov_len = sizeof(rec) };
	struct msghdr msg = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = cbuf, .msg_controllen = sizeof(cbuf),
	};
	struct cmsghdr *cm;
	unsigned char type;
	ssize_t n = recvmsg(tls_fd(c), &msg, MSG_DONTWAIT);

	if (n < 0) {
		/* (splice said a whole record is there: EAGAIN too is
		 * something gone wrong, not a reason to try again) */
		c->why = errno == EBADMSG ? "tls: bad record mac (ktls)" :
					    "tls: ktls read";
		return -1;
	}
	cm = CMSG_FIRSTHDR(&msg);
	if (!cm || cm->cmsg_level != SOL_TLS ||
	    cm->cmsg_type != TLS_GET_RECORD_TYPE) {
		c->why = "tls: ktls record without its type";
		return -1;
	}
	type = *CMSG_DATA(cm);
	if (type == 21 && n >= 2 && rec[1] == 0)	/* alert: close_notify */
		return 1;
	/* user_canceled (90): besides close_notify, TLS 1.3's one alert
	 * that is no error (RFC 8446, 6.1: a close_notify should follow).
	 * Where OpenSSL reads the records (no kTLS, --no-ktls) it passes
	 * over it, and fails at the fifth in a row with no other record
	 * between (MAX_WARN_ALERT_COUNT): the connection must not end
	 * otherwise because the kernel reads them. Read so far: what the
	 * plaintext side has taken and what waits in the pipe for it. */
	if (type == 21 && n == 2 && rec[1] == 90) {
		unsigned long long read = from_tls(c)->bytes +
					  from_tls(c)->queued;

		if (read != c->canceled_at)
			c->canceled_run = 0;
		c->canceled_at = read;
		if (++c->canceled_run < 5)
			return 0;
		c->why = "tls: too many user_canceled alerts in a row";
		return -1;
	}
	if (type == 22) {	/* handshake messages: type, 24-bit length */
		ssize_t i = 0;

		while (i + 4 <= n && rec[i] == 4)	/* NewSessionTicket */
			i += 4 + (rec[i + 1] << 16 | rec[i + 2] << 8 | rec[i + 3]);
		if (i == n) {
			c->canceled_run = 0;	/* a record between alerts */
			return 0;
		}
		c->why = i + 4 <= n && rec[i] == 24 ?
			 "tls: key update (ktls cannot follow it)" :
			 "tls: unexpected handshake message";
		return -1;
	}
	c->why = type == 21 ? "tls: alert from the peer" :
			      "tls: unexpected record";
	return -1;
}

/*
 * TLS side -> plaintext side with kTLS RX: the kernel's plaintext spliced
 * out of the TLS socket into the pipe and on, as the plaintext relay
 * does. A record splice cannot read is read by ktls_control; an EOF
 * without the peer's close_notify, a record that fails its check
 * (EBADMSG) or any error breaks the connection: -1, never a FIN after a
 * cut stream.
 */
static int ktls_pump_decrypt(struct conn *c)
{
	struct half *h = from_tls(c);
	int r;

	for (;;) {
		if (!splice_through(h, tls_fd(c), plain_fd(c)))
			break;
		if (errno != EINVAL) {
			c->why = errno == EBADMSG ? "tls: bad record mac (ktls)" :
						    NULL;
			return -1;
		}
		r = ktls_control(c);
		if (r < 0)
			return -1;
		if (r > 0) {
			c->close_notify = true;
			h->eof = true;
		}
	}
	if (h->eof && !c->close_notify) {
		c->why = "tls: connection closed without close_notify";
		return -1;
	}
	h->want = SSL_ERROR_WANT_READ;
	if (h->eof && !h->queued && !h->shut) {
		shutdown(plain_fd(c), SHUT_WR);
		h->shut = true;
	}
	return 0;
}

/* The kernel's next record number on the socket's sending side (the
 * rec_seq of TLS_TX; the keys that come with it are wiped). */
static int ktls_tx_seq(int fd, uint64_t *seq)
{
	union {
		struct tls_crypto_info info;
		struct tls12_crypto_info_aes_gcm_128 gcm128;
		struct tls12_crypto_info_aes_gcm_256 gcm256;
		struct tls12_crypto_info_aes_ccm_128 ccm128;
		struct tls12_crypto_info_chacha20_poly1305 chacha;
	} ci;
	socklen_t len = sizeof(ci);
	const unsigned char *rs = NULL;
	int r = -1;

	if (!getsockopt(fd, SOL_TLS, TLS_TX, &ci, &len)) {
		switch (ci.info.cipher_type) {
		case TLS_CIPHER_AES_GCM_128:
			rs = ci.gcm128.rec_seq;
			break;
		case TLS_CIPHER_AES_GCM_256:
			rs = ci.gcm256.rec_seq;
			break;
		case TLS_CIPHER_AES_CCM_128:
			rs = ci.ccm128.rec_seq;
			break;
		case TLS_CIPHER_CHACHA20_POLY1305:
			rs = ci.chacha.rec_seq;
			break;
		}
	}
	if (rs) {
		*seq = 0;
		for (int i = 0; i < 8; i++)
			*seq = *seq << 8 | rs[i];
		r = 0;
	}
	OPENSSL_cleanse(&ci, sizeof(ci));
	return r;
}

/* TCP's states as TCP_INFO gives them (the kernel's tcp_states.h):
 * those in which it still sends what it is given */
enum { TCPI_ESTABLISHED = 1, TCPI_CLOSE_WAIT = 8 };

/* The bytes the socket has given TCP: acknowledged, then still queued.
 * Read in that order, an ACK between the two makes the sum smaller,
 * never larger. `sending`: whether TCP still sends (not reset, no FIN
 * of ours yet). */
static int tcp_given(int fd, unsigned long long *given, bool *sending)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	int outq;

	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) ||
	    len < offsetof(struct tcp_info, tcpi_bytes_acked) +
		  sizeof(ti.tcpi_bytes_acked) ||
	    ioctl(fd, SIOCOUTQ, &outq))
		return -1;
	*given = ti.tcpi_bytes_acked + outq;
	if (sending)
		*sending = ti.tcpi_state == TCPI_ESTABLISHED ||
			   ti.tcpi_state == TCPI_CLOSE_WAIT;
	return 0;
}

/* Where kTLS's sending side starts: the records it makes from now on are
 * counted from here. -1: it cannot be told (ktls_flushed cannot be
 * asked). */
static int ktls_tx_mark(struct conn *c)
{
	return ktls_tx_seq(tls_fd(c), &c->ktls_tx_seq) ||
	       tcp_given(tls_fd(c), &c->ktls_tx_given, NULL) ? -1 : 0;
}

/*
 * Whether TCP has every record kTLS made. The kernel seals what
 * SSL_write() gives it at once and counts it sent; a record TCP has no
 * room for waits in the kernel's TLS layer until room comes. A FIN sent
 * meanwhile goes before it, and the records after it are dropped (as
 * they are when the socket is closed): the peer gets a stream cut short,
 * without our close_notify (t_mtls stalled_server_transfer_complete, in
 * the lab: 16 and 32 KiB short). No call says what the TLS layer holds;
 * the count says it. Every record is its plaintext and 22 bytes, and the
 * kernel numbers them: TCP has them all when it has been given the
 * plaintext written (SSL_write's, and the 2 bytes of the close_notify
 * alert) and 22 bytes per record since ktls_tx_mark. A record of ours
 * not counted here (a key update's) only makes the sum smaller than what
 * TCP got, and any held record is bigger than one: so "at least". When
 * the kernel cannot be asked, or TCP sends nothing more (the peer reset
 * the connection: what is held will never go), true: nothing is gained
 * by waiting.
 */
static bool ktls_flushed(struct conn *c)
{
	unsigned long long given, want;
	bool sending;
	uint64_t seq;

	if (ktls_tx_seq(tls_fd(c), &seq) ||
	    tcp_given(tls_fd(c), &given, &sending) || !sending)
		return true;
	c->flush_given = given;	/* whether TCP takes them (flush_check) */
	want = c->ktls_tx_given + to_tls(c)->bytes +
	       (c->notify_sent ? 2 : 0) +
	       (seq - c->ktls_tx_seq) * TLS13_RECORD_OVERHEAD;
	return given >= want;
}

/*
 * Plaintext side -> TLS side: read the plaintext side while the buffer
 * has room, SSL_write what it holds. At its EOF, once all is written:
 * close_notify, then the TCP FIN. -1: the connection is broken (a reset
 * for the client).
 */
static int tls_pump_encrypt(struct conn *c)
{
	struct half *h = to_tls(c);
	bool moved;
	ssize_t n;
	int r;

	do {
		size_t room = h->eof ? 0 : tls_room(h);

		moved = false;
		if (room) {
			n = recv(plain_fd(c), h->buf + h->head + h->queued,
				 room, 0);
			if (n > 0) {
				h->queued += n;
				moved = true;
			} else if (n == 0) {
				h->eof = true;
			} else if (errno != EAGAIN && errno != EINTR) {
				return -1;
			}
		}
		if (h->queued) {
			ERR_clear_error();
			r = SSL_write(c->ssl, h->buf + h->head, h->queued);
			if (r > 0) {
				tls_took(h, r);
				h->want = 0;
				moved = true;
				if ((h->budget -= r) <= 0) {
					h->gave_way = true;
					break;
				}
			} else {
				if (!tls_retry(c, h, r))
					return -1;
			}
		}
	} while (moved);
	if (h->eof && !h->queued && !h->shut) {
		if (!c->notify_sent) {
			ERR_clear_error();
			r = SSL_shutdown(c->ssl);
			if (r < 0) {
				if (!tls_retry(c, h, r))
					return -1;
				return 0;	/* the alert goes when it can */
			}
			h->want = 0;
			c->notify_sent = true;
		}
		/* the FIN after every record, held by kTLS or not */
		if (c->ktls_tx && !ktls_flushed(c)) {
			flush_wait(c);
			return 0;
		}
		flush_wait_end(c);
		shutdown(tls_fd(c), SHUT_WR);
		h->shut = true;
	}
	return 0;
}

static int tls_pump_decrypt_records(struct conn *c);

/*
 * TLS side -> plaintext side: SSL_read while the buffer has room, send
 * to the plaintext side what it holds. SSL_read is tried whenever there
 * is room, not only when the socket is readable: OpenSSL may hold
 * plaintext of a record read before (more than the room then was), which
 * no epoll event announces. The loop ends only when SSL_read wants the
 * socket or the buffer is full and the plaintext side takes nothing, so
 * nothing is left inside OpenSSL unannounced. The peer's close_notify
 * ends the direction (SHUT_WR to the plaintext side); an EOF without it,
 * a bad record or an alert is an error: -1, and the connection is reset,
 * never given what was not authenticated.
 */
static int tls_pump_decrypt(struct conn *c)
{
	int err = tls_pump_decrypt_records(c);

	/* The kernel seals what is sent, OpenSSL reads (its receiving keys
	 * were not the kernel's to take) and the peer asked for new sending
	 * keys: OpenSSL 3.0 moves on to them in user space only, so what
	 * the kernel sealed next would fail the peer's check. Reset with
	 * the reason, as where the kernel reads the KeyUpdate itself. */
	if (!err && c->key_update_asked && c->ktls_tx) {
		c->why = "tls: key update (ktls cannot follow it)";
		return -1;
	}
	return err;
}

static int tls_pump_decrypt_records(struct conn *c)
{
	struct half *h = from_tls(c);
	bool moved;
	ssize_t n;
	int r;

	if (c->ktls_rx)
		return ktls_pump_decrypt(c);
	do {
		size_t room = h->eof ? 0 : tls_room(h);

		moved = false;
		if (room) {
			ERR_clear_error();
			r = SSL_read(c->ssl, h->buf + h->head + h->queued,
				     room);
			if (r > 0) {
				h->queued += r;
				h->want = 0;
				moved = true;
			} else {
				h->want = SSL_get_error(c->ssl, r);
				if (h->want == SSL_ERROR_ZERO_RETURN) {
					h->eof = true;
					h->want = 0;
				} else if (h->want != SSL_ERROR_WANT_READ &&
					   h->want != SSL_ERROR_WANT_WRITE) {
					return -1;
				}
			}
		}
		if (h->queued) {
			n = send(plain_fd(c), h->buf + h->head, h->queued,
				 MSG_NOSIGNAL);
			if (n > 0) {
				tls_took(h, n);
				moved = true;
				if ((h->budget -= n) <= 0) {
					h->gave_way = true;
					break;
				}
			} else if (n < 0 && errno != EAGAIN && errno != EINTR) {
				return -1;
			}
		}
	} while (moved);
	if (h->eof && !h->queued && !h->shut) {
		shutdown(plain_fd(c), SHUT_WR);
		h->shut = true;
	}
	return 0;
}

static uint32_t want_events(int want)
{
	if (want == SSL_ERROR_WANT_READ)
		return EPOLLIN;
	if (want == SSL_ERROR_WANT_WRITE)
		return EPOLLOUT;
	return 0;
}

/* A side with nothing more to come or go leaves epoll: its HUP, which
 * epoll reports whatever it is asked, would wake the loop again and
 * again while the other side finishes. */
static void ep_off(struct conn *c, bool upstream)
{
	bool *off = upstream ? &c->upstream_off : &c->client_off;
	bool *parked = upstream ? &c->upstream_parked : &c->client_parked;

	if (*off)
		return;
	if (!*parked)
		epoll_ctl(ep, EPOLL_CTL_DEL,
			  upstream ? c->upstream : c->client, NULL);
	*parked = false;
	*off = true;
}

/* As conn_rearm, for TLS: the plaintext side is read while its buffer
 * has room and written while the other one holds bytes; the TLS side
 * waits for what the stalled SSL calls asked for. */
static void tls_rearm(struct conn *c)
{
	struct half *out = to_tls(c), *in = from_tls(c);
	/* the plaintext side is the upstream when the client's is TLS */
	bool plain_up = c->tls_on_client;
	uint32_t pe = 0, te = 0;

	if (tls_can_take(out))
		pe |= EPOLLIN;
	if (in->queued)
		pe |= EPOLLOUT;
	/* spliced out of a kTLS socket, the bytes are in a pipe */
	if (c->ktls_rx ? half_room(in) : tls_can_take(in))
		te |= want_events(in->want);
	if (out->queued || (out->eof && !out->shut))
		te |= want_events(out->want);
	if (out->eof && in->shut)
		ep_off(c, plain_up);
	else
		conn_park(c, plain_up, pe);
	if (out->shut && in->eof)
		ep_off(c, !plain_up);
	else
		conn_park(c, !plain_up, te);
}

/* After a turn's pumps: when a byte last moved, and the end once both
 * directions are shut (true: the connection is freed). */
static bool relay_settle(struct conn *c, unsigned long long before)
{
	if (c->up.bytes + c->down.bytes != before)
		c->last = pi_mono_ms();
	if (c->up.shut && c->down.shut) {
		conn_free(c, false, "done");
		return true;
	}
	return false;
}

/* A turn's budget for both directions. */
static void relay_begin(struct conn *c)
{
	c->up.budget = c->down.budget = relay_budget;
	c->up.gave_way = c->down.gave_way = false;
}

/* A relay that stopped at its budget runs again in the next turn. */
static void relay_end(struct conn *c)
{
	if (c->dead || c->on_again || !(c->up.gave_way || c->down.gave_way))
		return;
	gave_way++;
	c->on_again = true;
	c->again_next = again;
	again = c;
}

static void tls_relay_turn(struct conn *c);

/* Relays what can move, within the turn's budget; frees the connection
 * when it is done or broken. */
static void tls_relay(struct conn *c)
{
	relay_begin(c);
	tls_relay_turn(c);
	relay_end(c);
}

static void tls_relay_turn(struct conn *c)
{
	unsigned long long before = c->up.bytes + c->down.bytes;

	if (tls_pump_encrypt(c) || tls_pump_decrypt(c)) {
		static char why[300];
		bool tls = c->up.want == SSL_ERROR_SSL ||
			   c->up.want == SSL_ERROR_SYSCALL ||
			   c->down.want == SSL_ERROR_SSL ||
			   c->down.want == SSL_ERROR_SYSCALL;

		snprintf(why, sizeof(why), "tls: %s", tls_error());
		conn_free(c, true, c->why ? c->why : tls ? why : "reset");
		return;
	}
	if (!relay_settle(c, before))
		tls_rearm(c);
}

/*
 * The upstream connection, from the client's address (any port: the
 * connection is the client pod's own, as far as the network can tell) to
 * the original destination, waiting in epoll to be connected within the
 * connect timeout. 0; -1 when it cannot be tried, the connection freed
 * (a reset for the client).
 */
static int upstream_connect(struct conn *c)
{
	int one = 1;

	c->upstream = bound_socket(&c->peer, SOCK_STREAM, 0);
	if (c->upstream < 0) {
		conn_free(c, true, "bind to client address");
		return -1;
	}
	setsockopt(c->upstream, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(c->upstream, (void *)&c->orig, ss_len(&c->orig)) &&
	    errno != EINPROGRESS) {
		conn_free(c, true, strerror(errno));
		return -1;
	}
	c->deadline = pi_mono_ms() + connect_timeout_ms;
	conn_watch(c, true, EPOLLOUT | EPOLLIN, true);
	return 0;
}

/*
 * The handshake, step by step as the TLS socket allows; the other end's
 * certificate is checked in it (chain, IP SAN, trust domain). Originating,
 * the upstream is connected already and the relay starts at once.
 * Terminating, nothing has been connected yet: only an authenticated
 * client makes the proxy connect to the protected pod, and a failed
 * handshake leaves the pod with no connection at all.
 */
static void tls_handshake(struct conn *c)
{
	static char why[320];
	char uri[256], p[64], o[64];
	long verr;
	int r, e;

	ERR_clear_error();
	r = SSL_do_handshake(c->ssl);
	if (r == 1) {
		const char *bad = SSL_session_reused(c->ssl) ?
				  resumed_peer_bad(c) : NULL;

		if (bad) {
			conn_free(c, true, bad);
			return;
		}
		if (tls_bufs(c)) {
			conn_free(c, true, "no memory");
			return;
		}
		/* The receiving keys: OpenSSL's, or the proxy's own; the
		 * kernel's plaintext is then spliced out. A pipe that cannot
		 * be had (the open files limit) leaves it all to OpenSSL.
		 * The sending side stays SSL_write(), which OpenSSL passes
		 * to the kernel as sendmsg() where it gave it the keys: a
		 * non-blocking splice() into a kTLS socket lost data on
		 * Debian's 6.1 and on 6.12 when the socket was full
		 * (docs/proxy.md). Originating with --tls-resume, the
		 * tickets are OpenSSL's to read: the kernel's control
		 * records would pass them over. */
		if (ktls_rx_wanted() && !half_pipe(from_tls(c))) {
			c->ktls_rx = BIO_get_ktls_recv(SSL_get_rbio(c->ssl)) ?
				     !SSL_has_pending(c->ssl) :
				     !ktls_rx_start(c);
			if (!c->ktls_rx)
				half_unpipe(from_tls(c), TLS_BUF);
		}
		OPENSSL_cleanse(c->rx_secret, sizeof(c->rx_secret));
		c->rx_secret_len = 0;
		c->ktls_tx = BIO_get_ktls_send(SSL_get_wbio(c->ssl)) &&
			     !ktls_tx_mark(c);
		c->handshaking = false;
		c->last = pi_mono_ms();
		if (verbose) {
			X509 *cert = SSL_get0_peer_certificate(c->ssl);

			fprintf(stderr, "%s %s -> %s verified %s%s ktls send %s recv %s\n",
				c->tls_on_client ? "tls-in" : "tls",
				addr_str(&c->peer, p, sizeof(p)),
				addr_str(&c->orig, o, sizeof(o)),
				cert && *cert_uri(cert, uri, sizeof(uri)) ?
				uri : "(no uri)",
				SSL_session_reused(c->ssl) ? " resumed" : "",
				BIO_get_ktls_send(SSL_get_wbio(c->ssl)) ? "on" : "off",
				c->ktls_rx ? "on" : "off");
		}
		if (c->tls_on_client) {
			/* What the client sends now waits in its socket (or
			 * in OpenSSL) until the upstream is connected: it is
			 * watched for nothing meanwhile, else its readiness,
			 * level-triggered, would wake the loop again and
			 * again (HUP and ERR still come). */
			conn_watch(c, false, 0, false);
			upstream_connect(c);
			return;
		}
		tls_relay(c);
		return;
	}
	e = SSL_get_error(c->ssl, r);
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
		conn_watch(c, !c->tls_on_client, want_events(e), false);
		return;
	}
	verr = SSL_get_verify_result(c->ssl);
	if (verr != X509_V_OK)
		snprintf(why, sizeof(why), "tls handshake: %s certificate: %s",
			 c->tls_on_client ? "client" : "server",
			 X509_verify_cert_error_string(verr));
	else
		snprintf(why, sizeof(why), "tls handshake: %s",
			 e == SSL_ERROR_SYSCALL && !ERR_peek_error() ?
			 "connection closed" : tls_error());
	conn_free(c, true, why);
}

/*
 * Inbound: what the client's first byte says, once there is one. A TLS
 * handshake record (0x16) is terminated here with the protected pod's
 * identity; anything else is refused, or, with --permissive, relayed as
 * it is, exactly as the plaintext proxy relays a connection. Either way
 * nothing is connected upstream before this.
 */
/* Permissive: the client relayed in plaintext, as the plaintext proxy
 * relays a connection; `why` says what showed it is no TLS client. */
static void inbound_plaintext(struct conn *c, const char *why)
{
	char p[64], o[64];

	c->sniffing = false;
	if (verbose)
		fprintf(stderr, "plaintext (permissive%s) %s -> %s\n", why,
			addr_str(&c->peer, p, sizeof(p)),
			addr_str(&c->orig, o, sizeof(o)));
	if (half_init(&c->up) || half_init(&c->down)) {
		conn_free(c, true, "no pipes");
		return;
	}
	if (upstream_connect(c))
		return;
	/* from here on a plaintext proxy's connection, its client watched
	 * as accept_tcp watches one while the upstream connects (a FIN
	 * already come is passed on once connected) */
	conn_watch(c, false, EPOLLRDHUP, false);
}

static void inbound_sniff(struct conn *c)
{
	char p[64], o[64];
	const char *why;
	unsigned char b;
	ssize_t n = recv(c->client, &b, 1, MSG_PEEK);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;		/* nothing yet: EPOLLIN comes with it */
	/* A client that half-closes before a word only listens: no TLS
	 * client, and, permissive, relayed for the answer it waits for. */
	if (n == 0 && permissive) {
		inbound_plaintext(c, ", the client's end first");
		return;
	}
	if (n <= 0) {
		conn_free(c, false, "client gone");
		return;
	}
	c->sniffing = false;
	if (b == 0x16) {
		/* a TLS client: its handshake has the connect timeout from
		 * the accept, not what is left of the permissive wait */
		c->deadline = c->accepted + connect_timeout_ms;
		c->ssl = tls_conn_new(c, &c->orig, &c->peer, &why);
		if (!c->ssl) {
			conn_free(c, true, why);
			return;
		}
		c->tls_on_client = true;
		if (!SSL_set_fd(c->ssl, c->client)) {
			conn_free(c, true, "tls: set fd");
			return;
		}
		SSL_set_accept_state(c->ssl);
		c->handshaking = true;
		tls_handshake(c);
		return;
	}
	if (!permissive) {
		if (verbose)
			fprintf(stderr, "tls: plaintext refused %s -> %s\n",
				addr_str(&c->peer, p, sizeof(p)),
				addr_str(&c->orig, o, sizeof(o)));
		conn_free(c, true, "plaintext refused");
		return;
	}
	inbound_plaintext(c, "");
}

static void plain_relay_turn(struct conn *c)
{
	unsigned long long before = c->up.bytes + c->down.bytes;

	if (pump(&c->up, c->client, c->upstream) ||
	    pump(&c->down, c->upstream, c->client)) {
		conn_free(c, true, "reset");
		return;
	}
	if (!relay_settle(c, before))
		conn_rearm(c);
}

/* One turn of a connected connection's relay, plaintext or TLS. */
static void conn_relay(struct conn *c)
{
	if (c->ssl) {
		tls_relay(c);
		return;
	}
	relay_begin(c);
	plain_relay_turn(c);
	relay_end(c);
}

static void conn_event(struct conn *c, bool upstream_side, uint32_t events)
{
	if (c->sniffing) {
		inbound_sniff(c);
		return;
	}
	if (c->handshaking && c->tls_on_client) {
		/* inbound: the client's handshake, before any upstream */
		tls_handshake(c);
		return;
	}
	if (!c->connected || c->handshaking) {
		int err = 0;
		socklen_t len = sizeof(err);

		if (!upstream_side) {
			char b;
			ssize_t n = recv(c->client, &b, 1,
					 MSG_PEEK | MSG_DONTWAIT);

			/* The client was reset before the upstream
			 * answered. An authenticated inbound client's stream
			 * is cut then: the upstream, should it be connected
			 * by now, gets a reset too. */
			if ((events & (EPOLLHUP | EPOLLERR)) ||
			    (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
				conn_free(c, c->tls_on_client, "client gone");
				return;
			}
			/* Data, maybe followed by a half-close, or the
			 * half-close alone (n == 0: a client that only
			 * listens, to a server that speaks first): it goes
			 * upstream once connected, as the FIN it is.
			 * Readiness is level-triggered and would wake
			 * epoll_wait at once, again and again, so the client
			 * is watched for nothing until conn_rearm (HUP and
			 * ERR still come). */
			conn_watch(c, false, 0, false);
			return;
		}
		if (c->handshaking) {
			tls_handshake(c);
			return;
		}
		getsockopt(c->upstream, SOL_SOCKET, SO_ERROR, &err, &len);
		if (err) {
			conn_free(c, true, strerror(err));
			return;
		}
		c->connected = true;
		c->last = pi_mono_ms();
		if (c->ssl && !c->tls_on_client) {
			/* TCP is up; the connect deadline holds for the
			 * handshake too */
			if (!SSL_set_fd(c->ssl, c->upstream)) {
				conn_free(c, true, "tls: set fd");
				return;
			}
			SSL_set_connect_state(c->ssl);
			c->handshaking = true;
			tls_handshake(c);
			return;
		}
		/* inbound over TLS: the handshake was done before the
		 * upstream was tried; the relay starts */
	}
	conn_relay(c);
}

/* A listener whose accept cannot take a descriptor stays readable: it is
 * out of epoll until then. */
struct listener {
	int fd;
	struct tag tag;
	long long paused_until;		/* 0: in epoll */
};

static struct listener listeners[4];

static void drop_now(int fd)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(fd);
}

/*
 * accept4 found no descriptor (EMFILE, ENFILE) or no memory. The pending
 * connections are taken with the reserve descriptor and dropped with a
 * reset, so the client fails at once and the listener is not left
 * readable (which would wake the loop at once, again and again). Should
 * that not work either (the system's table is full), the listener leaves
 * epoll for BACKOFF_MS.
 */
static void shed_pending(struct listener *l, int err)
{
	static long long last_log;
	long long now = pi_mono_ms();
	int fd, n = 0;

	if (reserve_fd >= 0) {
		close(reserve_fd);
		reserve_fd = -1;
		while (n < BATCH && (fd = accept4(l->fd, NULL, NULL,
						  SOCK_CLOEXEC)) >= 0) {
			drop_now(fd);
			n++;
		}
		reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	}
	shed += n;
	if (!n || reserve_fd < 0) {
		ep_set(l->fd, &l->tag, 0, false);
		l->paused_until = now + BACKOFF_MS;
	}
	if (now - last_log >= 1000) {
		last_log = now;
		fprintf(stderr, "podinject-proxy: accept: %s with %ld connections; %llu dropped so far\n",
			strerror(err), nconns, shed);
	}
}

static void listeners_resume(void)
{
	long long now = pi_mono_ms();

	/* The reserve lost to another process after a shedding (the
	 * system's table full): taken again once a descriptor is free, or
	 * every later EMFILE would only pause the listeners, and the
	 * clients would wait in the backlog instead of failing at once. */
	if (reserve_fd < 0)
		reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	for (int i = 0; i < 4; i++) {
		struct listener *l = &listeners[i];

		if (l->paused_until && now >= l->paused_until) {
			l->paused_until = 0;
			ep_set(l->fd, &l->tag, EPOLLIN, false);
		}
	}
}

static void accept_tcp(struct listener *l)
{
	for (int i = 0; i < BATCH; i++) {
		struct sockaddr_storage peer, orig;
		socklen_t plen = sizeof(peer), olen = sizeof(orig);
		struct client *who;
		struct conn *c;
		int fd;

		fd = accept4(l->fd, (void *)&peer, &plen,
			     SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE ||
			    errno == ENOBUFS || errno == ENOMEM)
				shed_pending(l, errno);
			else if (errno == ECONNABORTED || errno == EINTR ||
				 errno == EPROTO)
				continue;
			return;
		}
		if (nconns >= conn_max) {
			refuse_log("connection", &peer, "open files limit");
			drop_now(fd);
			continue;
		}
		who = client_of(&peer, true);
		if (!who || who->tcp >= client_max) {
			refuse_log("connection", &peer, "client-max");
			drop_now(fd);
			continue;
		}
		c = calloc(1, sizeof(*c));
		if (!c || getsockname(fd, (void *)&orig, &olen)) {
			free(c);
			client_put(who);
			drop_now(fd);
			continue;
		}
		who->tcp++;
		c->who = who;
		c->client = fd;
		c->upstream = -1;
		c->up.pipe[0] = c->up.pipe[1] = -1;
		c->down.pipe[0] = c->down.pipe[1] = -1;
		c->peer = peer;
		c->orig = orig;
		c->ctag = (struct tag){ K_CLIENT, c };
		c->utag = (struct tag){ K_UPSTREAM, c };
		c->last = c->accepted = pi_mono_ms();
		c->deadline = c->last + connect_timeout_ms;
		c->next = conns;
		if (conns)
			conns->prev = c;
		conns = c;
		nconns++;
		if (inbound) {
			/* TLS or not is the client's first byte's to say,
			 * within the connect timeout; nothing goes upstream
			 * before (inbound_sniff). Permissive, a client silent
			 * for permissive_wait_ms is plaintext: its protocol's
			 * server speaks first (SMTP, MySQL), where a TLS
			 * client sends its hello at once. */
			c->sniffing = true;
			if (permissive && connect_timeout_ms > permissive_wait_ms)
				c->deadline = c->last + permissive_wait_ms;
			conn_watch(c, false, EPOLLIN, true);
			continue;
		}
		if (tls_dir) {
			const char *why;

			/* No identity, no connection: never in plaintext. */
			c->ssl = tls_conn_new(c, &peer, &orig, &why);
			if (!c->ssl) {
				conn_free(c, true, why);
				continue;
			}
		} else if (half_init(&c->up) || half_init(&c->down)) {
			conn_free(c, true, "no pipes");
			continue;
		}
		if (upstream_connect(c))
			continue;
		conn_watch(c, false, EPOLLRDHUP, true);
	}
}

static struct udp_session **session_bucket(const struct sockaddr_storage *client,
					   const struct sockaddr_storage *orig)
{
	return &session_hash[ss_hash(orig, true, ss_hash(client, true, 0)) %
			     SESSION_BUCKETS];
}

static struct udp_session *udp_session(const struct sockaddr_storage *client,
				       const struct sockaddr_storage *orig)
{
	struct udp_session **head = session_bucket(client, orig), *s;
	struct client *who;
	int oport;

	for (s = *head; s; s = s->hnext)
		if (same_addr(&s->client, client) && same_addr(&s->orig, orig))
			return s;
	if (nsessions >= session_max) {
		refuse_log("udp session", client, "open files limit");
		return NULL;
	}
	who = client_of(client, true);
	if (!who || who->udp >= client_max) {
		refuse_log("udp session", client, "client-max");
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		client_put(who);
		return NULL;
	}
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
		client_put(who);
		return NULL;
	}
	who->udp++;
	s->who = who;
	s->tag = (struct tag){ K_UDP_UP, s };
	ep_set(s->up, &s->tag, EPOLLIN, true);
	s->rtag = (struct tag){ K_UDP_REPLY, s };
	ep_set(s->reply, &s->rtag, EPOLLIN, true);
	s->next = sessions;
	sessions = s;
	s->hnext = *head;
	*head = s;
	nsessions++;
	if (verbose) {
		char a[64], b[64];

		fprintf(stderr, "udp %s -> %s session\n",
			addr_str(client, a, sizeof(a)),
			addr_str(orig, b, sizeof(b)));
	}
	return s;
}

/* Out of the hash and closed; the caller unlinks it from `sessions`. */
static void session_free(struct udp_session *s, const char *why)
{
	struct udp_session **pp = session_bucket(&s->client, &s->orig);

	while (*pp && *pp != s)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = s->hnext;
	if (verbose) {
		char a[64], b[64];

		fprintf(stderr, "udp %s -> %s %s\n",
			addr_str(&s->client, a, sizeof(a)),
			addr_str(&s->orig, b, sizeof(b)), why);
	}
	close(s->up);
	close(s->reply);
	s->who->udp--;
	client_put(s->who);
	nsessions--;
	free(s);
}

/* A client's datagram on to its destination, through its session (made
 * if it has none: refused when a limit says so). */
static void udp_forward(const struct sockaddr_storage *client,
			const struct sockaddr_storage *orig, const void *buf,
			size_t n)
{
	struct udp_session *s = udp_session(client, orig);

	if (!s)
		return;
	s->last = pi_mono_ms();
	send(s->up, buf, n, 0);
}

static void recv_udp(int lfd)
{
	static char buf[UDP_MAX];

	/* A bounded batch: under a flood the listener never runs dry, and
	 * the other sessions' replies wait for this loop to end. */
	for (int i = 0; i < BATCH; i++) {
		struct sockaddr_storage client, orig = { 0 };
		char cbuf[256];
		struct iovec iov = { buf, sizeof(buf) };
		struct msghdr m = {
			.msg_name = &client, .msg_namelen = sizeof(client),
			.msg_iov = &iov, .msg_iovlen = 1,
			.msg_control = cbuf, .msg_controllen = sizeof(cbuf),
		};
		struct cmsghdr *cm;
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
		if (orig.ss_family)
			udp_forward(&client, &orig, buf, n);
	}
}

/*
 * A client's datagram that came in fragments: the datapath steers each
 * fragment to the proxy, but the kernel forgets the socket it was given
 * when it puts them back together, and looks the datagram up by its
 * address: the original destination's, where a session's reply socket
 * is bound. Read there, it goes upstream as the listener's would (its
 * client's session, made if it has none: any session's reply socket
 * bound to that destination may get it). A client's first datagram to a
 * destination finds no socket bound there yet when it is fragmented, and
 * is lost (docs/proxy.md).
 */
static void udp_reassembled(struct udp_session *at)
{
	static char buf[UDP_MAX];
	const struct sockaddr_storage orig = at->orig;

	for (int i = 0; i < BATCH; i++) {
		struct sockaddr_storage client;
		socklen_t len = sizeof(client);
		ssize_t n = recvfrom(at->reply, buf, sizeof(buf), 0,
				     (void *)&client, &len);

		if (n < 0)
			return;
		udp_forward(&client, &orig, buf, n);
	}
}

static void udp_reply(struct udp_session *s)
{
	static char buf[UDP_MAX];
	ssize_t n;

	for (int i = 0; i < BATCH && (n = recv(s->up, buf, sizeof(buf), 0)) >= 0;
	     i++) {
		s->last = pi_mono_ms();
		sendto(s->reply, buf, n, 0, (void *)&s->client,
		       ss_len(&s->client));
	}
}

/* Connect timeouts, and connections and sessions idle too long (a
 * silent client holds nothing for ever). */
static void expire(void)
{
	long long now = pi_mono_ms();
	struct udp_session **pp = &sessions;
	struct conn *c, *next;

	if (now - expire_last < EXPIRE_EVERY_MS)
		return;
	expire_last = now;
	for (c = conns; c; c = next) {
		next = c->next;
		/* inbound, the client's phases come before the upstream's
		 * connect; originating, the handshake comes after it */
		if (c->sniffing && now > c->deadline && permissive)
			inbound_plaintext(c, ", the client silent");
		else if (c->sniffing && now > c->deadline)
			conn_free(c, true, "client sent nothing");
		else if (c->handshaking && now > c->deadline)
			conn_free(c, true, "tls handshake timeout");
		else if (!c->connected && now > c->deadline)
			conn_free(c, true, "connect timeout");
		else if (c->connected && !c->handshaking &&
			 now - c->last > idle_ms)
			conn_free(c, true, "idle");
	}
	if (!nconns && pipes_pooled && now - conns_gone_at >= PIPES_IDLE_MS)
		pipes_drop();
	while (*pp) {
		struct udp_session *s = *pp;

		if (now - s->last > udp_idle_ms) {
			*pp = s->next;
			session_free(s, "idle");
			continue;
		}
		pp = &s->next;
	}
}

/*
 * Thousands of connections: six descriptors each. The limit is raised as
 * far as allowed (a proxy without CAP_SYS_RESOURCE gets its hard limit at
 * most), said when it is less than wanted, and the connection and session
 * counts are held to what it leaves room for, so that the descriptors run
 * out on those caps, not in the middle of setting a connection up.
 */
static int raise_nofile(void)
{
	struct rlimit rl = { NOFILE_WANTED, NOFILE_WANTED };
	long share;
	int err = 0;

	if (setrlimit(RLIMIT_NOFILE, &rl)) {
		err = errno;
		if (getrlimit(RLIMIT_NOFILE, &rl)) {
			fprintf(stderr, "podinject-proxy: getrlimit: %s\n",
				strerror(errno));
			return -1;
		}
		if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < NOFILE_WANTED)
			rl.rlim_cur = rl.rlim_max;
		else
			rl.rlim_cur = NOFILE_WANTED;
		if (setrlimit(RLIMIT_NOFILE, &rl)) {
			fprintf(stderr, "podinject-proxy: setrlimit: %s\n",
				strerror(errno));
			getrlimit(RLIMIT_NOFILE, &rl);
		}
	}
	if (rl.rlim_cur <= FDS_SPARE + FDS_PER_CONN + FDS_PER_SESSION) {
		fprintf(stderr, "podinject-proxy: open files limit %llu is too small\n",
			(unsigned long long)rl.rlim_cur);
		return -1;
	}
	/* Plaintext: room for both kinds at once, half the descriptors
	 * each. Over TLS no UDP is relayed, and connections have them all;
	 * a permissive inbound proxy may splice any of its connections, and
	 * only a connection whose received records go to the kernel has a
	 * pipe. */
	share = (rl.rlim_cur - FDS_SPARE) / (tls_dir ? 1 : 2);
	conn_max = share / (!tls_dir || permissive ? FDS_PER_CONN :
			    ktls_rx_wanted() ? FDS_PER_KTLS_CONN :
			    FDS_PER_TLS_CONN);
	session_max = tls_dir ? 0 : share / FDS_PER_SESSION;
	if (err) {
		char udp[48] = "";

		if (!tls_dir)
			snprintf(udp, sizeof(udp), " and %ld udp sessions",
				 session_max);
		fprintf(stderr, "podinject-proxy: open files limit %llu, not %d (%s): at most %ld connections%s\n",
			(unsigned long long)rl.rlim_cur, NOFILE_WANTED,
			strerror(err), conn_max, udp);
	}
	return 0;
}

/* Whole-string decimal number in [min, max], or -1. */
static long number(const char *s, long min, long max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -1;
	return v;
}

/* A trust domain is a DNS-like name: lower case letters, digits, '.', '-'
 * and '_' (the SPIFFE ID's own rule), so that it cannot end the URI's
 * authority early. */
static bool trust_domain_ok(const char *td)
{
	if (!*td || strlen(td) > 255)
		return false;
	for (; *td; td++)
		if (!((*td >= 'a' && *td <= 'z') || (*td >= '0' && *td <= '9') ||
		      *td == '.' || *td == '-' || *td == '_'))
			return false;
	return true;
}

/* The TLS options go together; the directory and the bundle are there. */
static bool tls_args_ok(void)
{
	/* zeroed: a stat that fails must not leave a mode to be read */
	struct stat st = { 0 };

	/* never a plaintext fallback where the proxy originates TLS */
	if (permissive_wait_set && !permissive) {
		fprintf(stderr, "podinject-proxy: --permissive-wait goes with --permissive\n");
		return false;
	}
	if (permissive && !inbound) {
		fprintf(stderr, "podinject-proxy: --permissive goes with --inbound\n");
		return false;
	}
	if (inbound && (!tls_dir || !tls_ca)) {
		fprintf(stderr, "podinject-proxy: --inbound needs --tls-dir and --tls-ca (the protected pods' identities, the clients' CA)\n");
		return false;
	}
	if (ktls_off && !tls_dir) {
		fprintf(stderr, "podinject-proxy: --no-ktls goes with --tls-dir\n");
		return false;
	}
	if (tls_resume_s && !tls_dir) {
		fprintf(stderr, "podinject-proxy: --tls-resume goes with --tls-dir\n");
		return false;
	}
	if (!tls_dir && !tls_ca && !tls_td)
		return true;
	if (!tls_dir || !tls_ca) {
		fprintf(stderr, "podinject-proxy: --tls-dir and --tls-ca go together\n");
		return false;
	}
	if (tls_td && !trust_domain_ok(tls_td)) {
		fprintf(stderr, "podinject-proxy: bad trust domain '%s' (a-z 0-9 . - _)\n",
			tls_td);
		return false;
	}
	if (stat(tls_dir, &st) || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "podinject-proxy: --tls-dir %s: %s\n", tls_dir,
			S_ISDIR(st.st_mode) ? "not a directory" : strerror(errno));
		return false;
	}
	if (stat(tls_ca, &st) || !S_ISREG(st.st_mode)) {
		fprintf(stderr, "podinject-proxy: --tls-ca %s: %s\n", tls_ca,
			S_ISREG(st.st_mode) ? "not a file" : strerror(errno));
		return false;
	}
	return true;
}

/* The options into the globals they set and the port: 0; 1 for a value
 * that is wrong (said); 2 for a command line that is not the usage's. */
static int parse_args(int argc, char **argv, long *port)
{
	static const struct option opts[] = {
		{ "verbose", no_argument, NULL, 'v' },
		{ "connect-timeout", required_argument, NULL, 't' },
		{ "idle", required_argument, NULL, 'i' },
		{ "udp-idle", required_argument, NULL, 'u' },
		{ "client-max", required_argument, NULL, 'm' },
		{ "tls-dir", required_argument, NULL, 'D' },
		{ "tls-ca", required_argument, NULL, 'C' },
		{ "tls-trust-domain", required_argument, NULL, 'T' },
		{ "inbound", no_argument, NULL, 'I' },
		{ "permissive", no_argument, NULL, 'P' },
		{ "permissive-wait", required_argument, NULL, 'W' },
		{ "no-ktls", no_argument, NULL, 'K' },
		{ "tls-resume", required_argument, NULL, 'R' },
		{ "relay-budget", required_argument, NULL, 'B' },
		{ 0 },
	};
	long v = 0;
	int c;

	while ((c = getopt_long(argc, argv, "vt:i:u:m:", opts, NULL)) != -1) {
		if (c == 'D' || c == 'C' || c == 'T') {
			if (!*optarg) {
				fprintf(stderr, "podinject-proxy: empty value\n");
				return 1;
			}
			*(c == 'D' ? &tls_dir : c == 'C' ? &tls_ca : &tls_td) =
				optarg;
			continue;
		}
		if (c == 'I' || c == 'P' || c == 'K') {
			*(c == 'I' ? &inbound : c == 'P' ? &permissive :
			  &ktls_off) = true;
			continue;
		}
		if (c != 'v' && c != '?' &&
		    (v = number(optarg, c == 'B' ? RELAY_BUDGET_MIN : 1,
				c == 'm' ? 1000000 :
				c == 'R' ? RESUME_MAX_S : INT32_MAX)) < 0) {
			fprintf(stderr, "podinject-proxy: bad value '%s'\n",
				optarg);
			return 1;
		}
		switch (c) {
		case 'v': verbose = true; break;
		case 't': connect_timeout_ms = v; break;
		case 'i': idle_ms = v; break;
		case 'u': udp_idle_ms = v; break;
		case 'm': client_max = v; break;
		case 'R': tls_resume_s = v; break;
		case 'B': relay_budget = v; break;
		case 'W':
			permissive_wait_ms = v;
			permissive_wait_set = true;
			break;
		default: return 2;
		}
	}
	if (optind != argc - 1)
		return 2;
	*port = number(argv[optind], 1, 65535);
	if (*port < 0) {
		fprintf(stderr, "podinject-proxy: bad port '%s'\n", argv[optind]);
		return 1;
	}
	return tls_args_ok() ? 0 : 1;
}

/* The reserve descriptor, SIGTERM and SIGINT as a signalfd, and the epoll
 * set (ep) watching it; 0 or -1 (said). */
static int setup_events(struct tag *sigtag)
{
	sigset_t mask;
	int sfd;

	/* the descriptor given up to accept() a connection over the limit */
	reserve_fd = need_fd(open("/dev/null", O_RDONLY | O_CLOEXEC),
			     "the reserve descriptor (/dev/null)");
	if (reserve_fd < 0)
		return -1;
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	sfd = need_fd(signalfd(-1, &mask, SFD_CLOEXEC), "signalfd");
	if (sfd < 0)
		return -1;
	ep = need_fd(epoll_create1(EPOLL_CLOEXEC), "epoll_create1");
	if (ep < 0 || need_fd(ep_set(sfd, sigtag, EPOLLIN, true),
			      "epoll_ctl (signalfd)") < 0)
		return -1;
	return 0;
}

/* TCP and UDP on `port`, IPv4 and, where there is IPv6, IPv6, each in the
 * epoll set; 0 or -1 (said). */
static int open_listeners(long port, int lfds[4])
{
	lfds[0] = listen_on(AF_INET, SOCK_STREAM, port);
	lfds[1] = listen_on(AF_INET6, SOCK_STREAM, port);
	lfds[2] = lfds[3] = -1;
	/* Over TLS, UDP is not relayed: it would go in plaintext. Without
	 * a listener the datapath drops what it captures. */
	if (!tls_dir) {
		lfds[2] = udp_listeners[0] = listen_on(AF_INET, SOCK_DGRAM, port);
		lfds[3] = udp_listeners[1] = listen_on(AF_INET6, SOCK_DGRAM, port);
	}
	if (lfds[0] < 0 || (!tls_dir && lfds[2] < 0)) {
		fprintf(stderr, "podinject-proxy: cannot listen on %ld: %s\n",
			port, strerror(errno));
		return -1;
	}
	for (int i = 0; i < 4; i++) {
		struct listener *l = &listeners[i];

		l->fd = lfds[i];
		if (l->fd < 0)
			continue;	/* no IPv6 here is fine */
		l->tag = (struct tag){ i < 2 ? K_LISTEN_TCP : K_LISTEN_UDP, l };
		if (need_fd(ep_set(l->fd, &l->tag, EPOLLIN, true),
			    "epoll_ctl (listener)") < 0)
			return -1;
	}
	return 0;
}

/*
 * Connections whose FIN waits for kTLS's held records look again when
 * their time comes: no event says when TCP has taken the records (an
 * EPOLLOUT comes when there is room, before the kernel's TLS layer has
 * pushed them, and for as long as there is room). Each look is three
 * system calls or more (the relay tries both directions). While a look
 * finds that TCP took nothing more since the last, the next comes twice
 * as late, up to FLUSH_MAX_MS; when TCP takes some, FLUSH_FIRST_MS
 * again. So a peer that stops reading costs a few
 * looks a second per connection, and one that reads again gets the FIN at
 * most FLUSH_MAX_MS after its last record.
 */
static void flush_check(void)
{
	long long now, due = 0;
	struct conn *c, *next;

	if (!flushing)
		return;
	now = pi_mono_ms();
	if (now < flush_due)
		return;
	for (c = flushing; c; c = next) {
		next = c->fnext;
		if (now >= c->flush_at) {
			c->flush_looks++;
			tls_relay(c);
			if (!c->flushing)
				continue;	/* done, or freed */
			/* TCP took some since the last look, whether this
			 * look or an event in between saw it first */
			if (c->flush_given != c->flush_look_given)
				c->flush_every = FLUSH_FIRST_MS;
			else if (c->flush_every < FLUSH_MAX_MS)
				c->flush_every *= 2;
			c->flush_look_given = c->flush_given;
			c->flush_at = now + c->flush_every;
		}
		if (!due || c->flush_at < due)
			due = c->flush_at;
	}
	flush_due = due;
}

/* How long serve() may wait for an event: until the next look at the
 * flushing list, or EXPIRE_EVERY_MS. */
static int serve_wait_ms(void)
{
	long long left;

	if (again)
		return 0;
	if (!flushing)
		return EXPIRE_EVERY_MS;
	left = flush_due - pi_mono_ms();
	return left <= 0 ? 0 : left < EXPIRE_EVERY_MS ? (int)left :
	       EXPIRE_EVERY_MS;
}

/* The connections freed in this turn of the loop: no event of it names
 * them any more. */
static void graveyard_empty(void)
{
	while (graveyard) {
		struct conn *g = graveyard;

		graveyard = g->next;
		free(g);
	}
}

/* The relays that gave way in the last turn, each one turn more. */
static void relay_again(void)
{
	struct conn *list = again;

	again = NULL;
	while (list) {
		struct conn *c = list;

		list = c->again_next;
		c->on_again = false;
		conn_relay(c);
	}
}

/* Serves until SIGTERM or SIGINT. */
static void serve(void)
{
	struct epoll_event evs[MAX_EVENTS];
	bool running = true;

	while (running) {
		int n = epoll_wait(ep, evs, MAX_EVENTS, serve_wait_ms());

		for (int i = 0; i < n; i++) {
			struct tag *t = evs[i].data.ptr;

			switch (t->kind) {
			case K_SIGNAL:
				running = false;
				break;
			case K_LISTEN_TCP:
				accept_tcp(t->owner);
				break;
			case K_LISTEN_UDP:
				recv_udp(((struct listener *)t->owner)->fd);
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
			case K_UDP_REPLY:
				udp_reassembled(t->owner);
				break;
			}
		}
		relay_again();
		flush_check();
		expire();
		listeners_resume();
		graveyard_empty();
	}
}

/* Every connection and session closed, with the reason said, and the
 * listeners. */
static void shut_down(const int lfds[4])
{
	while (conns)
		conn_free(conns, true, "shutdown");
	while (sessions) {
		struct udp_session *s = sessions;

		sessions = s->next;
		session_free(s, "shutdown");
	}
	for (int i = 0; i < 4; i++)
		if (lfds[i] >= 0)
			close(lfds[i]);
	for (int i = 0; i < IDENTITY_BUCKETS; i++)
		while (identities[i]) {
			struct identity *id = identities[i];

			identities[i] = id->next;
			sessions_drop(id);
			SSL_CTX_free(id->ctx);
			free(id);
		}
	X509_STORE_free(ca_store);
}

int main(int argc, char **argv)
{
	struct tag sigtag = { K_SIGNAL, NULL };
	int lfds[4], bad;
	long port;

	bad = parse_args(argc, argv, &port);
	if (bad == 2)
		fprintf(stderr, "usage: podinject-proxy [-v] [--connect-timeout MS] [--idle MS] [--udp-idle MS]\n"
			"                       [--client-max N] [--relay-budget BYTES]\n"
			"                       [--tls-dir DIR --tls-ca FILE\n"
			"                       [--tls-trust-domain TD]\n"
			"                       [--inbound [--permissive [--permissive-wait MS]]]\n"
			"                       [--no-ktls] [--tls-resume SECONDS]] PORT\n");
	if (bad)
		return bad;
	if (tls_dir) {
		/* a bundle that does not load at start is an error, not a
		 * proxy that resets every connection */
		ca_refresh(pi_mono_ms());
		if (!ca_store)
			return 1;
		if (inbound)
			fprintf(stderr, "podinject-proxy: inbound tls termination, %s\n",
				permissive ? "permissive" : "strict");
		ktls_report();
		if (tls_resume_s)
			fprintf(stderr, "podinject-proxy: tls: sessions resumed for %lds at most%s\n",
				tls_resume_s, !inbound && ktls_kernel ?
				" (received records stay with OpenSSL, which reads the tickets)" : "");
	}
	if (raise_nofile() || setup_events(&sigtag) ||
	    open_listeners(port, lfds))
		return 1;
	if (verbose)
		fprintf(stderr, "podinject-proxy: listening on %ld\n", port);
	fprintf(stdout, "ready %ld\n", port);
	fflush(stdout);
	serve();
	shut_down(lfds);
	if (verbose)
		fprintf(stderr, "podinject-proxy: stopped (%llu dropped at the open files limit, %llu refused, %llu relay turns gave way)\n",
			shed, refused, gave_way);
	return 0;
}
