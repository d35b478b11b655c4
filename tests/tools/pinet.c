/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pinet: the traffic tool of podinject's tests. One file, libc and (for
 * tcp-connect --sha256) libcrypto's digest only.
 *
 *   pinet udp-recv [-6] PORT COUNT TIMEOUT_MS
 *   pinet udp-send [-6] [--bind SRC] [--ports N] [--first SIZE [--delay MS]]
 *                  DST PORT COUNT [SIZE]
 *   pinet tcp-server [-6] PORT [--count N] [--echo] [--sink] [--timeout MS]
 *                    [--delay MS] [--send BYTES]
 *   pinet tcp-connect [-6] [--bind SRC] [--sport PORT] [--timeout MS] DST PORT
 *                     [--send BYTES] [--expect-echo] [--sha256] [--wait-eof]
 *                     [--delay MS] [--pause MS] [--abort]
 *   pinet tcp-syn [-6] --bind SRC [--timeout MS] DST PORT COUNT
 *   pinet tcp-conn-loop [-6] [--timeout MS] [--latency] DST PORT COUNT SECONDS
 *   pinet udp-echo [-6] [--delay MS] PORT COUNT TIMEOUT_MS
 *   pinet udp-rr [-6] DST PORT COUNT TIMEOUT_MS
 *   pinet raw-udp DEV SRC_MAC SRC DST PORT COUNT [VLAN]
 *   pinet router-adv DEV COUNT
 *   pinet neigh-adv DEV TARGET COUNT
 *   pinet arp-announce DEV IP COUNT
 *   pinet icmp-too-big SRC DST SPORT DPORT MTU
 *   pinet udp6-ext SRC DST PORT COUNT NHDRS
 *   pinet echo-late DELAY_MS COUNT TIMEOUT_MS
 *
 * Options may appear anywhere after the subcommand. An IPv6 DST implies -6;
 * a link-local one takes its device as ADDR%DEV. udp-send --hopopts puts
 * an IPv6 hop-by-hop options header (one PadN) on every datagram;
 * udp-send --ports N sends to PORT, PORT+1, ... PORT+N-1 in turn (a
 * client opening many flows); udp-send --first SIZE makes the first
 * datagram SIZE bytes, and --delay MS waits that long after it (a flow
 * whose later datagrams are larger). tcp-server --delay MS waits that long after
 * each accept before it reads (a slow server: the sender meets
 * backpressure).
 * Listening -6 sockets are IPv6-only (no ::ffff:a.b.c.d peers).
 * --bind binds transparently (IP_TRANSPARENT + IP_FREEBIND, or the IPV6_
 * ones), so SRC may be an address this namespace does not own: that is how
 * tests forge pod traffic. It needs CAP_NET_ADMIN. --sport binds the source
 * port (SO_REUSEADDR), so a test can open a connection with the 4-tuple of
 * an earlier one.
 *
 * Results go to stdout, one fact per line:
 *   udp-recv     "received N", then "from ADDR count K" per source address
 *                in order of first arrival. Running out of time is not a
 *                failure: a test that expects drops reads "received 0".
 *   udp-send     "sent N"
 *   tcp-server   "accept PEERADDR PEERPORT LOCALADDR LOCALPORT" per
 *                connection; with --sink also "conn-done bytes N fnv HEX"
 *                once the peer has finished sending, or "conn-reset bytes
 *                N" when its stream ends in a reset; --send BYTES (with
 *                --sink) then answers with BYTES of the pattern before it
 *                closes; --send without --sink sends them at once after
 *                the accept, reads nothing and closes (a server that
 *                speaks first). --echo sends the data back. --timeout bounds the wait for each connection (and
 *                each read) and ends in "timeout", exit 1.
 *   tcp-connect  "connected LOCALADDR LOCALPORT", or "refused", "timeout",
 *                "error ERRNONAME" (exit 1). With --send BYTES it then
 *                sends a fixed pattern, half-closes, reads until EOF and
 *                prints "done sent N received M fnv HEX" (fnv of the bytes
 *                sent, comparable to the server's --sink line); with
 *                --expect-echo a reply that differs from what was sent
 *                prints "mismatch sent N received M" and exits 1, and an
 *                error is followed by "partial received M mismatch
 *                yes|no" (whether a byte received before it was wrong);
 *                --delay MS waits that long before each read (a slow
 *                reader), --pause MS once before the first (a reader
 *                that holds its peer's answer back for a while); --sha256 ends the done line with " sha256 SENT
 *                RECEIVED", the SHA-256 of each direction's bytes. With
 *                --wait-eof (not with --send) it sends nothing and closes
 *                only after the peer has: "eof received M" (--delay MS
 *                before each read: a slow download). The peer is
 *                then the active closer, and only its side keeps the
 *                4-tuple in TIME_WAIT. With --abort (and --send) it
 *                sends BYTES, then closes with a reset (SO_LINGER 0),
 *                neither half-closing nor reading: a client that dies
 *                mid-request. "aborted sent N".
 *   tcp-syn      "sent N": COUNT connection attempts whose SYN left; each
 *                socket is closed right after the SYN, or after waiting
 *                --timeout MS for the handshake.
 *   tcp-conn-loop  short connections one after the other, as a client
 *                that keeps none alive: connect, wait for the server's
 *                close, close (the server is the active closer, as with
 *                --wait-eof). Stops after COUNT connections or SECONDS;
 *                one refused, reset, or not done within --timeout MS
 *                (1000: a SYN sent again costs one second) is a failure.
 *                "conns N failed F seconds S cps R"; exit 1 unless all
 *                COUNT were made, none failed. --latency adds "latency_us
 *                p50 A p99 B max C": each successful connection's time
 *                from connect() to the server's close, in microseconds
 *                (timed in this process: a loop in bash would time its
 *                own process starts).
 *   udp-echo     answers each datagram with the same bytes (each held
 *                --delay MS first, one at a time); "echoed N",
 *                then "from ADDR count K" per source address.
 *                --copies N: each answer sent N times back to back (a
 *                flood of answers), and "received K" on stderr as the
 *                K-th datagram arrives, for a test to act on.
 *   udp-rr       COUNT requests, each waiting for its answer; "replies N"
 *                and "from ADDR PORT" of the first answer.
 *   raw-udp      COUNT IPv4 UDP frames written whole to DEV (AF_PACKET),
 *                with an Ethernet source of SRC_MAC and a zero destination
 *                MAC (netkit in L3 mode ignores both): how a test forges a
 *                frame header the stack would never build. With VLAN,
 *                each frame carries that 802.1Q tag. "sent N".
 *   router-adv   COUNT ICMPv6 router advertisements (router lifetime
 *                1800 s, hop limit 255) to ff02::1 out of DEV, from its
 *                link-local address: a pod offering itself as the
 *                node's default router. "sent N".
 *   neigh-adv    COUNT unsolicited neighbour advertisements (override)
 *                for TARGET with DEV's MAC, to ff02::1 out of DEV.
 *                "sent N".
 *   arp-announce COUNT gratuitous ARP requests for IP with DEV's MAC,
 *                written whole to DEV (AF_PACKET). "sent N".
 *   icmp-too-big an ICMP "fragmentation needed" (IPv4) or ICMPv6 "packet
 *                too big" with MTU, sent to SRC from this namespace,
 *                quoting a UDP datagram SRC:SPORT -> DST:DPORT: what a
 *                router on the way to DST sends when the datagram does not
 *                fit. "sent 1".
 *   udp6-ext     COUNT IPv6 UDP datagrams SRC -> DST:PORT, each behind
 *                NHDRS destination options headers (8 bytes, one PadN
 *                each), written whole through a raw IPPROTO_RAW socket
 *                (routed like any of this namespace's packets; SRC need
 *                not be its own). Linux takes any number of such headers
 *                on receipt. "sent N".
 *   echo-late    answers COUNT IPv4 ICMP echo requests to this namespace,
 *                each DELAY_MS after it came (a far end whose answer is
 *                still on its way when the asker stops); the namespace's
 *                own answers must be off (net.ipv4.icmp_echo_ignore_all).
 *                Prints "listening" once its socket is open, "request"
 *                as each request comes, and "answered N" when COUNT were
 *                answered or TIMEOUT_MS ran out.
 * Diagnostics go to stderr. Exit status: 0 success, 1 failure, 2 usage.
 *
 * Checksums are 64-bit FNV-1a, printed as 16 hex digits.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <linux/if_packet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <openssl/evp.h>
#include <podinject_util.h>
#include "conn_loop.h"

#ifndef IP_FREEBIND
#define IP_FREEBIND		15
#endif
#ifndef IP_TRANSPARENT
#define IP_TRANSPARENT		19
#endif
#ifndef IPV6_TRANSPARENT
#define IPV6_TRANSPARENT	75
#endif
#ifndef IPV6_FREEBIND
#define IPV6_FREEBIND		78
#endif

#define EXIT_USAGE	2
#define IO_CHUNK	65536

enum {
	OPT_6		= 1 << 0,
	OPT_BIND	= 1 << 1,
	OPT_TIMEOUT	= 1 << 2,
	OPT_COUNT	= 1 << 3,
	OPT_ECHO	= 1 << 4,
	OPT_SINK	= 1 << 5,
	OPT_SEND	= 1 << 6,
	OPT_EXPECT_ECHO	= 1 << 7,
	OPT_SPORT	= 1 << 8,
	OPT_WAIT_EOF	= 1 << 9,
	OPT_HOPOPTS	= 1 << 10,
	OPT_DELAY	= 1 << 11,
	OPT_PORTS	= 1 << 12,
	OPT_LATENCY	= 1 << 13,
	OPT_SHA256	= 1 << 14,
	OPT_PAUSE	= 1 << 15,
	OPT_ABORT	= 1 << 16,
	OPT_FIRST	= 1 << 17,
	OPT_COPIES	= 1 << 18,
};

struct opts {
	unsigned int seen;
	int family;
	const char *bind;
	long timeout_ms;
	long count;
	long send;
	long sport;
	long delay_ms;
	long pause_ms;
	long ports;
	long first;
	long copies;
	const char *pos[8];
	int npos;
};

static const char *prog = "pinet";

static int usage(void)
{
	fprintf(stderr,
		"usage: %s udp-recv [-6] PORT COUNT TIMEOUT_MS\n"
		"       %s udp-send [-6] [--bind SRC] [--hopopts] [--ports N]\n"
		"                [--first SIZE [--delay MS]] DST PORT COUNT [SIZE]\n"
		"       %s tcp-server [-6] PORT [--count N] [--echo] [--sink]\n"
		"                  [--timeout MS] [--delay MS] [--send BYTES]\n"
		"       %s tcp-connect [-6] [--bind SRC] [--sport PORT] [--timeout MS]\n"
		"                   DST PORT [--send BYTES] [--expect-echo] [--sha256]\n"
		"                   [--wait-eof] [--delay MS] [--pause MS] [--abort]\n"
		"       %s tcp-syn [-6] --bind SRC [--timeout MS] DST PORT COUNT\n"
		"       %s tcp-conn-loop [-6] [--timeout MS] [--latency] DST PORT COUNT\n"
		"                     SECONDS\n"
		"       %s udp-echo [-6] [--delay MS] [--copies N] PORT COUNT TIMEOUT_MS\n"
		"       %s udp-rr [-6] DST PORT COUNT TIMEOUT_MS\n"
		"       %s raw-udp DEV SRC_MAC SRC DST PORT COUNT [VLAN]\n"
		"       %s raw-frame DEV HEX COUNT\n"
		"       %s router-adv DEV COUNT\n"
		"       %s neigh-adv DEV TARGET COUNT\n"
		"       %s arp-announce DEV IP COUNT\n"
		"       %s icmp-too-big SRC DST SPORT DPORT MTU\n"
		"       %s udp6-ext SRC DST PORT COUNT NHDRS\n"
		"       %s echo-late DELAY_MS COUNT TIMEOUT_MS\n",
		prog, prog, prog, prog, prog, prog, prog, prog, prog, prog,
		prog, prog, prog, prog, prog, prog);
	return EXIT_USAGE;
}

/* Whole-string decimal number in [min, max], or -1. */
static long number(const char *s, long min, long max)
{
	char *end;
	long v;

	if (!s || !*s)
		return -1;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -1;
	return v;
}

/* Splits argv into options (those `allowed`) and positional arguments. */
static int parse(int argc, char **argv, unsigned int allowed, struct opts *o)
{
	int i;

	memset(o, 0, sizeof(*o));
	o->family = AF_INET;
	o->timeout_ms = -1;
	for (i = 0; i < argc; i++) {
		const char *a = argv[i];
		unsigned int bit;
		const char *val = NULL;

		if (!strcmp(a, "-6"))
			bit = OPT_6;
		else if (!strcmp(a, "--bind"))
			bit = OPT_BIND;
		else if (!strcmp(a, "--timeout"))
			bit = OPT_TIMEOUT;
		else if (!strcmp(a, "--count"))
			bit = OPT_COUNT;
		else if (!strcmp(a, "--echo"))
			bit = OPT_ECHO;
		else if (!strcmp(a, "--sink"))
			bit = OPT_SINK;
		else if (!strcmp(a, "--send"))
			bit = OPT_SEND;
		else if (!strcmp(a, "--expect-echo"))
			bit = OPT_EXPECT_ECHO;
		else if (!strcmp(a, "--sha256"))
			bit = OPT_SHA256;
		else if (!strcmp(a, "--sport"))
			bit = OPT_SPORT;
		else if (!strcmp(a, "--wait-eof"))
			bit = OPT_WAIT_EOF;
		else if (!strcmp(a, "--hopopts"))
			bit = OPT_HOPOPTS;
		else if (!strcmp(a, "--delay"))
			bit = OPT_DELAY;
		else if (!strcmp(a, "--pause"))
			bit = OPT_PAUSE;
		else if (!strcmp(a, "--ports"))
			bit = OPT_PORTS;
		else if (!strcmp(a, "--latency"))
			bit = OPT_LATENCY;
		else if (!strcmp(a, "--abort"))
			bit = OPT_ABORT;
		else if (!strcmp(a, "--first"))
			bit = OPT_FIRST;
		else if (!strcmp(a, "--copies"))
			bit = OPT_COPIES;
		else if (a[0] == '-' && a[1])
			return -1;
		else {
			if (o->npos == (int)(sizeof(o->pos) / sizeof(o->pos[0])))
				return -1;
			o->pos[o->npos++] = a;
			continue;
		}
		if (!(allowed & bit))
			return -1;
		if (bit & (OPT_BIND | OPT_TIMEOUT | OPT_COUNT | OPT_SEND |
			   OPT_SPORT | OPT_DELAY | OPT_PORTS | OPT_PAUSE |
			   OPT_FIRST | OPT_COPIES)) {
			if (++i == argc)
				return -1;
			val = argv[i];
		}
		o->seen |= bit;
		switch (bit) {
		case OPT_6:
			o->family = AF_INET6;
			break;
		case OPT_BIND:
			o->bind = val;
			break;
		case OPT_TIMEOUT:
			o->timeout_ms = number(val, 0, 86400000);
			if (o->timeout_ms < 0)
				return -1;
			break;
		case OPT_COUNT:
			o->count = number(val, 1, 1000000);
			if (o->count < 0)
				return -1;
			break;
		case OPT_SEND:
			o->send = number(val, 0, 1L << 40);
			if (o->send < 0)
				return -1;
			break;
		case OPT_SPORT:
			o->sport = number(val, 1, 65535);
			if (o->sport < 0)
				return -1;
			break;
		case OPT_DELAY:
			o->delay_ms = number(val, 0, 86400000);
			if (o->delay_ms < 0)
				return -1;
			break;
		case OPT_COPIES:
			o->copies = number(val, 1, 10000000);
			if (o->copies < 0)
				return -1;
			break;
		case OPT_PAUSE:
			o->pause_ms = number(val, 0, 86400000);
			if (o->pause_ms < 0)
				return -1;
			break;
		case OPT_PORTS:
			o->ports = number(val, 1, 65535);
			if (o->ports < 0)
				return -1;
			break;
		case OPT_FIRST:
			o->first = number(val, 0, 65507);
			if (o->first < 0)
				return -1;
			break;
		}
	}
	return 0;
}

union sa {
	struct sockaddr sa;
	struct sockaddr_in in;
	struct sockaddr_in6 in6;
	struct sockaddr_storage ss;
};

static socklen_t sa_len(const union sa *u)
{
	return u->sa.sa_family == AF_INET6 ? sizeof(u->in6) : sizeof(u->in);
}

/* Fills u from a literal address; NULL means the wildcard. An IPv6
 * address may name its device: fe80::1%eth0. */
static int make_sa(int family, const char *addr, int port, union sa *u)
{
	memset(u, 0, sizeof(*u));
	u->sa.sa_family = family;
	if (family == AF_INET6) {
		char buf[INET6_ADDRSTRLEN + IF_NAMESIZE + 1], *pct;

		u->in6.sin6_port = htons(port);
		if (!addr)
			return 0;
		snprintf(buf, sizeof(buf), "%s", addr);
		pct = strchr(buf, '%');
		if (pct) {
			*pct++ = 0;
			u->in6.sin6_scope_id = if_nametoindex(pct);
			if (!u->in6.sin6_scope_id)
				return -1;
		}
		if (inet_pton(AF_INET6, buf, &u->in6.sin6_addr) != 1)
			return -1;
	} else {
		u->in.sin_port = htons(port);
		if (addr && inet_pton(AF_INET, addr, &u->in.sin_addr) != 1)
			return -1;
	}
	return 0;
}

static const char *sa_addr(const union sa *u, char *buf, size_t len)
{
	const void *a = u->sa.sa_family == AF_INET6 ?
		(const void *)&u->in6.sin6_addr : (const void *)&u->in.sin_addr;

	if (!inet_ntop(u->sa.sa_family, a, buf, len))
		snprintf(buf, len, "?");
	return buf;
}

static int sa_port(const union sa *u)
{
	return ntohs(u->sa.sa_family == AF_INET6 ? u->in6.sin6_port :
		     u->in.sin_port);
}

static int family_of(const struct opts *o, const char *dst)
{
	/* Typing -6 next to an IPv6 literal is easy to forget. */
	if (dst && strchr(dst, ':'))
		return AF_INET6;
	return o->family;
}


/* The byte at stream offset off of what tcp-connect --send writes. A prime
 * period keeps it from lining up with buffer sizes. */
static unsigned char pattern(uint64_t off)
{
	return (unsigned char)(off % 251);
}

static int set_int(int fd, int level, int name, int val)
{
	return setsockopt(fd, level, name, &val, sizeof(val));
}

/* Binds the socket's source: src, when given, transparently (it need not be
 * local to this netns), and port, when not 0. */
static int bind_source(int fd, int family, const char *src, int port)
{
	union sa u;
	int err = 0;

	if (make_sa(family, src, port, &u) < 0) {
		fprintf(stderr, "%s: bad --bind address %s\n", prog, src);
		return -1;
	}
	if (src && family == AF_INET6) {
		err = set_int(fd, SOL_IPV6, IPV6_TRANSPARENT, 1);
		if (!err && set_int(fd, SOL_IPV6, IPV6_FREEBIND, 1) < 0 &&
		    errno == ENOPROTOOPT)
			/* Kernels before 4.15 only know the shared IP knob. */
			err = set_int(fd, SOL_IP, IP_FREEBIND, 1);
	} else if (src) {
		err = set_int(fd, SOL_IP, IP_TRANSPARENT, 1);
		if (!err)
			err = set_int(fd, SOL_IP, IP_FREEBIND, 1);
	}
	if (err < 0) {
		fprintf(stderr, "%s: transparent socket: %s\n", prog,
			strerror(errno));
		return -1;
	}
	/* An earlier connection from the port may not have finished
	 * closing here; connect() still refuses a 4-tuple in use. */
	if (port && set_int(fd, SOL_SOCKET, SO_REUSEADDR, 1) < 0) {
		fprintf(stderr, "%s: SO_REUSEADDR: %s\n", prog, strerror(errno));
		return -1;
	}
	if (bind(fd, &u.sa, sa_len(&u)) < 0) {
		fprintf(stderr, "%s: bind %s port %d: %s\n", prog,
			src ? src : "*", port, strerror(errno));
		return -1;
	}
	return 0;
}

static int new_socket(int family, int type)
{
	int fd = socket(family, type | SOCK_CLOEXEC, 0);

	if (fd < 0) {
		fprintf(stderr, "%s: socket: %s\n", prog, strerror(errno));
		return -1;
	}
	/* Wildcard v6 sockets see v6 only: no ::ffff: sources in results. */
	if (family == AF_INET6)
		set_int(fd, SOL_IPV6, IPV6_V6ONLY, 1);
	return fd;
}

/* Binds the wildcard address of family to port. */
static int listen_socket(int family, int type, int port)
{
	union sa u;
	int fd = new_socket(family, type);

	if (fd < 0)
		return -1;
	set_int(fd, SOL_SOCKET, SO_REUSEADDR, 1);
	make_sa(family, NULL, port, &u);
	if (bind(fd, &u.sa, sa_len(&u)) < 0) {
		fprintf(stderr, "%s: bind port %d: %s\n", prog, port,
			strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* Waits for events on fd; 0 on timeout. timeout_ms < 0 waits forever. */
static int wait_fd(int fd, short events, long timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = events };
	int r;

	do
		r = poll(&p, 1, timeout_ms < 0 ? -1 : (int)timeout_ms);
	while (r < 0 && errno == EINTR);
	return r;
}

/* ---- udp ---- */

struct source {
	union sa addr;
	long count;
};

static bool same_addr(const union sa *a, const union sa *b)
{
	if (a->sa.sa_family != b->sa.sa_family)
		return false;
	if (a->sa.sa_family == AF_INET6)
		return !memcmp(&a->in6.sin6_addr, &b->in6.sin6_addr, 16);
	return a->in.sin_addr.s_addr == b->in.sin_addr.s_addr;
}

static int cmd_udp_recv(int argc, char **argv)
{
	static char buf[IO_CHUNK];
	struct source *src = NULL;
	int nsrc = 0, fd, i;
	long port, count, timeout, received = 0;
	long long deadline;
	char abuf[INET6_ADDRSTRLEN];
	struct opts o;

	if (parse(argc, argv, OPT_6, &o) || o.npos != 3)
		return usage();
	port = number(o.pos[0], 1, 65535);
	count = number(o.pos[1], 0, 100000000);
	timeout = number(o.pos[2], 0, 86400000);
	if (port < 0 || count < 0 || timeout < 0)
		return usage();

	fd = listen_socket(o.family, SOCK_DGRAM, port);
	if (fd < 0)
		return 1;
	deadline = pi_mono_ms() + timeout;
	while (received < count) {
		long left = deadline - pi_mono_ms();
		socklen_t alen;
		union sa from;
		ssize_t n;

		if (left <= 0 || wait_fd(fd, POLLIN, left) <= 0)
			break;
		alen = sizeof(from);
		n = recvfrom(fd, buf, sizeof(buf), 0, &from.sa, &alen);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			fprintf(stderr, "%s: recvfrom: %s\n", prog,
				strerror(errno));
			close(fd);
			free(src);
			return 1;
		}
		received++;
		for (i = 0; i < nsrc; i++)
			if (same_addr(&src[i].addr, &from))
				break;
		if (i == nsrc) {
			struct source *s = realloc(src, (nsrc + 1) * sizeof(*s));

			if (!s) {
				close(fd);
				free(src);
				return 1;
			}
			src = s;
			src[nsrc].addr = from;
			src[nsrc++].count = 0;
		}
		src[i].count++;
	}
	close(fd);
	printf("received %ld\n", received);
	for (i = 0; i < nsrc; i++)
		printf("from %s count %ld\n",
		       sa_addr(&src[i].addr, abuf, sizeof(abuf)), src[i].count);
	free(src);
	return 0;
}

static int cmd_udp_send(int argc, char **argv)
{
	static unsigned char buf[65535];
	long port, count, size = 32, sent = 0, i;
	int family, fd;
	union sa dst;
	struct opts o;

	if (parse(argc, argv, OPT_6 | OPT_BIND | OPT_HOPOPTS | OPT_PORTS |
		  OPT_FIRST | OPT_DELAY, &o) ||
	    o.npos < 3 || o.npos > 4)
		return usage();
	family = family_of(&o, o.pos[0]);
	port = number(o.pos[1], 1, 65535);
	if (!o.ports)
		o.ports = 1;
	if (port + o.ports - 1 > 65535)
		return usage();
	count = number(o.pos[2], 0, 100000000);
	if (o.npos == 4)
		size = number(o.pos[3], 0, family == AF_INET6 ? 65527 : 65507);
	if (port < 0 || count < 0 || size < 0 ||
	    make_sa(family, o.pos[0], port, &dst) < 0)
		return usage();

	for (i = 0; i < (size > o.first ? size : o.first); i++)
		buf[i] = pattern(i);
	fd = new_socket(family, SOCK_DGRAM);
	if (fd < 0)
		return 1;
	if (o.bind && bind_source(fd, family, o.bind, 0) < 0) {
		close(fd);
		return 1;
	}
	if (o.seen & OPT_HOPOPTS) {
		/* next header (the kernel's), length 0, PadN of 4 bytes */
		static const unsigned char hbh[8] = { 0, 0, 1, 4, 0, 0, 0, 0 };

		if (family != AF_INET6 ||
		    setsockopt(fd, IPPROTO_IPV6, IPV6_HOPOPTS, hbh,
			       sizeof(hbh)) < 0) {
			fprintf(stderr, "%s: IPV6_HOPOPTS: %s\n", prog,
				family != AF_INET6 ? "IPv6 only" :
				strerror(errno));
			close(fd);
			return 1;
		}
	}
	for (i = 0; i < count; i++) {
		uint16_t p = htons(port + i % o.ports);
		long len = i == 0 && (o.seen & OPT_FIRST) ? o.first : size;

		if (i == 1 && o.delay_ms)
			usleep(o.delay_ms * 1000);
		if (family == AF_INET6)
			dst.in6.sin6_port = p;
		else
			dst.in.sin_port = p;
		if (sendto(fd, buf, len, 0, &dst.sa, sa_len(&dst)) < 0) {
			if (errno == EINTR) {
				i--;
				continue;
			}
			fprintf(stderr, "%s: sendto: %s\n", prog,
				strerror(errno));
			break;
		}
		sent++;
	}
	close(fd);
	printf("sent %ld\n", sent);
	return sent == count ? 0 : 1;
}

/* ---- tcp ---- */

static const char *errname(int err)
{
	const char *name = strerrorname_np(err);

	return name ? name : "unknown";
}

/* MSG_NOSIGNAL: a peer that went away is an error to report, not SIGPIPE. */
static ssize_t write_all(int fd, const void *p, size_t n)
{
	size_t done = 0;

	while (done < n) {
		ssize_t w = send(fd, (const char *)p + done, n - done,
				 MSG_NOSIGNAL);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		done += w;
	}
	return done;
}

/* `total` bytes of the pattern: a server's answer (--send), after the
 * request with --sink, else at once, before anything is read (a server
 * that speaks first). */
static int send_pattern(int cfd, long long total)
{
	static unsigned char buf[IO_CHUNK];

	for (long long off = 0; off < total; ) {
		size_t n = total - off < IO_CHUNK ? total - off : IO_CHUNK;

		for (size_t i = 0; i < n; i++)
			buf[i] = pattern(off + i);
		if (write_all(cfd, buf, n) < 0) {
			fprintf(stderr, "%s: write: %s\n", prog, strerror(errno));
			return 1;
		}
		off += n;
	}
	return 0;
}

/* One accepted connection: returns 0, or 1 on an error or a timeout. */
static int serve(int cfd, const struct opts *o)
{
	static unsigned char buf[IO_CHUNK];
	bool echo = o->seen & OPT_ECHO, sink = o->seen & OPT_SINK;
	uint64_t h = PI_FNV64_BASIS;
	long long bytes = 0;

	if (!echo && !sink)
		return send_pattern(cfd, o->send);
	for (;;) {
		ssize_t n;

		if (wait_fd(cfd, POLLIN, o->timeout_ms) == 0) {
			printf("timeout\n");
			return 1;
		}
		n = read(cfd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == ECONNRESET && sink) {
			printf("conn-reset bytes %lld\n", bytes);
			return 1;
		}
		if (n < 0) {
			fprintf(stderr, "%s: read: %s\n", prog, strerror(errno));
			return 1;
		}
		if (n == 0)
			break;
		bytes += n;
		h = pi_fnv64(h, buf, n);
		if (echo && write_all(cfd, buf, n) < 0) {
			fprintf(stderr, "%s: write: %s\n", prog, strerror(errno));
			return 1;
		}
	}
	if (sink)
		printf("conn-done bytes %lld fnv %016llx\n", bytes,
		       (unsigned long long)h);
	/* an answer after the request's end, then the close */
	return sink ? send_pattern(cfd, o->send) : 0;
}

static int cmd_tcp_server(int argc, char **argv)
{
	char pbuf[INET6_ADDRSTRLEN], lbuf[INET6_ADDRSTRLEN];
	long port, n, count;
	int fd, ret = 0;
	struct opts o;

	if (parse(argc, argv, OPT_6 | OPT_COUNT | OPT_ECHO | OPT_SINK |
		  OPT_TIMEOUT | OPT_DELAY | OPT_SEND, &o) || o.npos != 1 ||
	    ((o.seen & OPT_SEND) && (o.seen & OPT_ECHO)))
		return usage();
	port = number(o.pos[0], 1, 65535);
	if (port < 0)
		return usage();
	count = o.seen & OPT_COUNT ? o.count : 1;

	fd = listen_socket(o.family, SOCK_STREAM, port);
	if (fd < 0)
		return 1;
	if (listen(fd, 128) < 0) {
		fprintf(stderr, "%s: listen: %s\n", prog, strerror(errno));
		close(fd);
		return 1;
	}
	for (n = 0; n < count && !ret; n++) {
		union sa peer, local;
		socklen_t plen = sizeof(peer), llen = sizeof(local);
		int cfd;

		if (wait_fd(fd, POLLIN, o.timeout_ms) == 0) {
			printf("timeout\n");
			ret = 1;
			break;
		}
		cfd = accept4(fd, &peer.sa, &plen, SOCK_CLOEXEC);
		if (cfd < 0) {
			if (errno == EINTR || errno == ECONNABORTED) {
				n--;
				continue;
			}
			fprintf(stderr, "%s: accept: %s\n", prog, strerror(errno));
			ret = 1;
			break;
		}
		getsockname(cfd, &local.sa, &llen);
		printf("accept %s %d %s %d\n", sa_addr(&peer, pbuf, sizeof(pbuf)),
		       sa_port(&peer), sa_addr(&local, lbuf, sizeof(lbuf)),
		       sa_port(&local));
		fflush(stdout);
		if (o.delay_ms)
			poll(NULL, 0, o.delay_ms);
		ret = serve(cfd, &o);
		fflush(stdout);
		close(cfd);
	}
	close(fd);
	return ret;
}

/*
 * Non-blocking connect from an optional transparent source address and an
 * optional source port (0: the kernel's choice). Returns the
 * socket (still non-blocking) once connected, or as soon as the SYN is out
 * when !wait. Otherwise prints the outcome unless quiet and returns -1 if no
 * SYN left, -2 if one did but no connection followed.
 */
static int tcp_open(int family, const char *src, int sport,
		    const union sa *dst, long timeout_ms, bool wait, bool quiet)
{
	int fd, err = 0;
	socklen_t elen = sizeof(err);

	int ret = -1;

	fd = new_socket(family, SOCK_STREAM | SOCK_NONBLOCK);
	if (fd < 0)
		return -1;
	if ((src || sport) && bind_source(fd, family, src, sport) < 0)
		goto fail;
	if (connect(fd, &dst->sa, sa_len(dst)) == 0)
		return fd;
	if (errno != EINPROGRESS) {
		err = errno;
		goto report;
	}
	if (!wait)
		return fd;
	ret = -2;
	if (wait_fd(fd, POLLOUT, timeout_ms) == 0) {
		if (quiet)
			fprintf(stderr, "%s: connect: timeout\n", prog);
		else
			printf("timeout\n");
		goto fail;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0)
		err = errno;
	if (!err)
		return fd;
report:
	if (quiet) {
		fprintf(stderr, "%s: connect: %s\n", prog, strerror(err));
	} else {
		if (err == ECONNREFUSED)
			printf("refused\n");
		else if (err == ETIMEDOUT)
			printf("timeout\n");
		else
			printf("error %s\n", errname(err));
	}
fail:
	close(fd);
	return ret;
}

/* Ends the digest; hex gets it in lower-case hex. */
static void digest_hex(EVP_MD_CTX *md, char *hex)
{
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned int n = 0, i;

	EVP_DigestFinal_ex(md, d, &n);
	for (i = 0; i < n; i++)
		sprintf(hex + 2 * i, "%02x", d[i]);
	hex[2 * n] = 0;
}

/*
 * Writes `total` pattern bytes and reads whatever comes back, both at once so
 * an echoing peer never blocks on a full window. Returns 0, or 1 after
 * printing why it failed.
 */
static int tcp_exchange(int fd, long long total, long timeout_ms,
			bool expect_echo, bool sha256, long delay_ms,
			long pause_ms)
{
	static unsigned char out[IO_CHUNK], in[IO_CHUNK];
	char sent_hex[2 * EVP_MAX_MD_SIZE + 1], recv_hex[2 * EVP_MAX_MD_SIZE + 1];
	long long sent = 0, received = 0;
	uint64_t h = PI_FNV64_BASIS;
	bool shut = false, eof = false, mismatch = false;
	EVP_MD_CTX *md_out = NULL, *md_in = NULL;
	int ret = 1;

	if (sha256) {
		md_out = EVP_MD_CTX_new();
		md_in = EVP_MD_CTX_new();
		if (!md_out || !md_in ||
		    !EVP_DigestInit_ex(md_out, EVP_sha256(), NULL) ||
		    !EVP_DigestInit_ex(md_in, EVP_sha256(), NULL)) {
			printf("error sha256\n");
			goto out;
		}
	}

	for (;;) {
		struct pollfd p = { .fd = fd };
		int r;

		if (!shut && sent == total) {
			shutdown(fd, SHUT_WR);
			shut = true;
		}
		if (shut && eof)
			break;
		if (!shut)
			p.events |= POLLOUT;
		if (!eof)
			p.events |= POLLIN;
		r = poll(&p, 1, timeout_ms < 0 ? -1 : (int)timeout_ms);
		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0) {
			printf("timeout\n");
			goto out;
		}
		if (!shut && (p.revents & (POLLOUT | POLLERR | POLLHUP))) {
			size_t n = total - sent < IO_CHUNK ? total - sent : IO_CHUNK;
			ssize_t w;
			size_t i;

			for (i = 0; i < n; i++)
				out[i] = pattern(sent + i);
			w = send(fd, out, n, MSG_NOSIGNAL);
			if (w < 0 && errno != EAGAIN && errno != EINTR) {
				printf("error %s\n", errname(errno));
				goto partial;
			}
			if (w > 0) {
				h = pi_fnv64(h, out, w);
				if (md_out)
					EVP_DigestUpdate(md_out, out, w);
				sent += w;
			}
		}
		if (!eof && (p.revents & (POLLIN | POLLERR | POLLHUP))) {
			ssize_t n, i;

			if (delay_ms)
				poll(NULL, 0, delay_ms);
			if (pause_ms) {
				poll(NULL, 0, pause_ms);
				pause_ms = 0;
			}
			n = read(fd, in, sizeof(in));
			if (n < 0 && errno != EAGAIN && errno != EINTR) {
				printf("error %s\n", errname(errno));
				goto partial;
			}
			if (n == 0) {
				/* The peer may stop sending before we do. */
				eof = true;
				continue;
			}
			for (i = 0; i < n; i++)
				if (in[i] != pattern(received + i))
					mismatch = true;
			if (n > 0) {
				if (md_in)
					EVP_DigestUpdate(md_in, in, n);
				received += n;
			}
		}
	}
	if (expect_echo && (mismatch || received != sent)) {
		printf("mismatch sent %lld received %lld\n", sent, received);
		goto out;
	}
	if (sha256) {
		digest_hex(md_out, sent_hex);
		digest_hex(md_in, recv_hex);
		printf("done sent %lld received %lld fnv %016llx sha256 %s %s\n",
		       sent, received, (unsigned long long)h, sent_hex, recv_hex);
	} else {
		printf("done sent %lld received %lld fnv %016llx\n", sent,
		       received, (unsigned long long)h);
	}
	ret = 0;
	goto out;
partial:
	if (expect_echo)
		printf("partial received %lld mismatch %s\n", received,
		       mismatch ? "yes" : "no");
out:
	EVP_MD_CTX_free(md_out);
	EVP_MD_CTX_free(md_in);
	return ret;
}

/* Reads and drops what comes until the peer closes. Returns 0, or 1 after
 * printing why it failed. */
/* --abort: `total` bytes of the pattern, then a close that resets. */
static int send_abort(int fd, long long total, long timeout_ms)
{
	static unsigned char out[IO_CHUNK];
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	long long sent = 0;

	while (sent < total) {
		size_t n = total - sent < IO_CHUNK ? total - sent : IO_CHUNK;
		ssize_t w;

		if (wait_fd(fd, POLLOUT, timeout_ms) == 0) {
			printf("timeout\n");
			return 1;
		}
		for (size_t i = 0; i < n; i++)
			out[i] = pattern(sent + i);
		w = send(fd, out, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (w < 0) {
			printf("error %s\n", errname(errno));
			return 1;
		}
		sent += w;
	}
	if (setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg))) {
		printf("error %s\n", errname(errno));
		return 1;
	}
	printf("aborted sent %lld\n", sent);
	return 0;
}

static int wait_eof(int fd, long timeout_ms, long delay_ms)
{
	static unsigned char in[IO_CHUNK];
	long long received = 0;

	for (;;) {
		ssize_t n;

		if (delay_ms)
			usleep(delay_ms * 1000);
		if (wait_fd(fd, POLLIN, timeout_ms) == 0) {
			printf("timeout\n");
			return 1;
		}
		n = read(fd, in, sizeof(in));
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n < 0) {
			printf("error %s\n", errname(errno));
			return 1;
		}
		if (n == 0)
			break;
		received += n;
	}
	printf("eof received %lld\n", received);
	return 0;
}

static int cmd_tcp_connect(int argc, char **argv)
{
	char lbuf[INET6_ADDRSTRLEN];
	long port, timeout;
	int family, fd, ret = 0;
	union sa dst, local;
	socklen_t llen = sizeof(local);
	struct opts o;

	if (parse(argc, argv, OPT_6 | OPT_BIND | OPT_TIMEOUT | OPT_SEND |
		  OPT_EXPECT_ECHO | OPT_SPORT | OPT_WAIT_EOF | OPT_DELAY |
		  OPT_SHA256 | OPT_PAUSE | OPT_ABORT, &o) ||
	    o.npos != 2)
		return usage();
	if ((o.seen & OPT_ABORT) &&
	    (!(o.seen & OPT_SEND) || (o.seen & (OPT_EXPECT_ECHO | OPT_SHA256))))
		return usage();
	if ((o.seen & (OPT_EXPECT_ECHO | OPT_SHA256)) && !(o.seen & OPT_SEND))
		return usage();
	if ((o.seen & OPT_WAIT_EOF) && (o.seen & OPT_SEND))
		return usage();
	family = family_of(&o, o.pos[0]);
	port = number(o.pos[1], 1, 65535);
	if (port < 0 || make_sa(family, o.pos[0], port, &dst) < 0)
		return usage();
	timeout = o.timeout_ms >= 0 ? o.timeout_ms : 5000;

	fd = tcp_open(family, o.bind, o.sport, &dst, timeout, true, false);
	if (fd < 0)
		return 1;
	getsockname(fd, &local.sa, &llen);
	printf("connected %s %d\n", sa_addr(&local, lbuf, sizeof(lbuf)),
	       sa_port(&local));
	fflush(stdout);
	if (o.seen & OPT_ABORT)
		ret = send_abort(fd, o.send, timeout);
	else if (o.seen & OPT_SEND)
		ret = tcp_exchange(fd, o.send, timeout,
				   o.seen & OPT_EXPECT_ECHO, o.seen & OPT_SHA256,
				   o.delay_ms, o.pause_ms);
	else if (o.seen & OPT_WAIT_EOF)
		ret = wait_eof(fd, timeout, o.delay_ms);
	close(fd);
	return ret;
}

static int cmd_tcp_syn(int argc, char **argv)
{
	long port, count, sent = 0, i;
	int family, fd;
	union sa dst;
	struct opts o;

	if (parse(argc, argv, OPT_6 | OPT_BIND | OPT_TIMEOUT, &o) ||
	    o.npos != 3 || !o.bind)
		return usage();
	family = family_of(&o, o.pos[0]);
	port = number(o.pos[1], 1, 65535);
	count = number(o.pos[2], 0, 1000000);
	if (port < 0 || count < 0 || make_sa(family, o.pos[0], port, &dst) < 0)
		return usage();

	for (i = 0; i < count; i++) {
		/* connect() transmits the SYN before it returns EINPROGRESS;
		 * closing a SYN_SENT socket sends nothing more. */
		fd = tcp_open(family, o.bind, 0, &dst, o.timeout_ms,
			      o.timeout_ms > 0, true);
		if (fd == -1)
			break;
		if (fd >= 0)
			close(fd);
		sent++;
	}
	printf("sent %ld\n", sent);
	return sent == count ? 0 : 1;
}

static int cmd_tcp_conn_loop(int argc, char **argv)
{
	long port, count, seconds, timeout, conns = 0, failed = 0;
	double t0, t, *lat = NULL;
	int family, fd;
	union sa dst;
	struct opts o;
	char c;

	if (parse(argc, argv, OPT_6 | OPT_TIMEOUT | OPT_LATENCY, &o) ||
	    o.npos != 4)
		return usage();
	family = family_of(&o, o.pos[0]);
	port = number(o.pos[1], 1, 65535);
	count = number(o.pos[2], 1, 10000000);
	seconds = number(o.pos[3], 1, 86400);
	if (port < 0 || count < 0 || seconds < 0 ||
	    make_sa(family, o.pos[0], port, &dst) < 0)
		return usage();
	timeout = o.timeout_ms >= 0 ? o.timeout_ms : 1000;
	/* allocated up front: nothing but the connections inside the loop */
	if ((o.seen & OPT_LATENCY) && !(lat = calloc(count, sizeof(*lat)))) {
		perror("calloc");
		return 1;
	}

	t0 = t = mono_s();
	while (conns < count && t < t0 + seconds) {
		double c0 = t;

		fd = tcp_open(family, NULL, 0, &dst, timeout, true, true);
		if (fd < 0) {
			failed++;
		} else {
			/* the server's close: EOF, nothing before it */
			if (wait_fd(fd, POLLIN, timeout) > 0 &&
			    read(fd, &c, 1) == 0) {
				/* timed before close(): the set-up, not
				 * our own teardown */
				if (lat)
					lat[conns] = mono_s() - c0;
				conns++;
			} else {
				failed++;
			}
			close(fd);
		}
		t = mono_s();
	}
	conn_loop_report(conns, failed, t - t0, lat);
	free(lat);
	return conns == count && !failed ? 0 : 1;
}

static int cmd_udp_echo(int argc, char **argv)
{
	static char buf[IO_CHUNK];
	char abuf[INET6_ADDRSTRLEN];
	long port, count, timeout, echoed = 0;
	long long deadline;
	union sa from, first;
	struct opts o;
	int fd;

	if (parse(argc, argv, OPT_6 | OPT_DELAY | OPT_COPIES, &o) || o.npos != 3)
		return usage();
	port = number(o.pos[0], 1, 65535);
	count = number(o.pos[1], 0, 100000000);
	timeout = number(o.pos[2], 0, 86400000);
	if (port < 0 || count < 0 || timeout < 0)
		return usage();
	fd = listen_socket(o.family, SOCK_DGRAM, port);
	if (fd < 0)
		return 1;
	/* A burst (thousands of probes at once) must not be dropped at this
	 * socket, nor its answers, held back by a slow qdisc, stop at the
	 * socket's send buffer: room for tens of thousands of each (the
	 * FORCE options need CAP_NET_ADMIN, which the tests have; without,
	 * the defaults stay). */
	{
		int big = 32 << 20;

		setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
		setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big));
	}
	deadline = pi_mono_ms() + timeout;
	while (echoed < count) {
		long left = deadline - pi_mono_ms();
		socklen_t alen = sizeof(from);
		ssize_t n;

		if (left <= 0 || wait_fd(fd, POLLIN, left) <= 0)
			break;
		n = recvfrom(fd, buf, sizeof(buf), 0, &from.sa, &alen);
		if (n < 0)
			continue;
		if (!echoed)
			first = from;
		if (o.copies)
			fprintf(stderr, "received %ld\n", echoed + 1);
		if (o.delay_ms)
			usleep(o.delay_ms * 1000);
		for (long c = 0; c < (o.copies ? o.copies : 1); c++)
			sendto(fd, buf, n, 0, &from.sa, alen);
		echoed++;
	}
	close(fd);
	printf("echoed %ld\n", echoed);
	if (echoed)
		printf("from %s\n", sa_addr(&first, abuf, sizeof(abuf)));
	return 0;
}

static int cmd_udp_rr(int argc, char **argv)
{
	static char buf[IO_CHUNK];
	char abuf[INET6_ADDRSTRLEN];
	long port, count, timeout, replies = 0, i;
	union sa dst, from, first;
	struct opts o;
	int family, fd;

	if (parse(argc, argv, OPT_6, &o) || o.npos != 4)
		return usage();
	family = family_of(&o, o.pos[0]);
	port = number(o.pos[1], 1, 65535);
	count = number(o.pos[2], 0, 100000000);
	timeout = number(o.pos[3], 0, 86400000);
	if (port < 0 || count < 0 || timeout < 0 ||
	    make_sa(family, o.pos[0], port, &dst) < 0)
		return usage();
	fd = new_socket(family, SOCK_DGRAM);
	if (fd < 0)
		return 1;
	for (i = 0; i < count; i++) {
		socklen_t alen = sizeof(from);
		ssize_t n;

		snprintf(buf, sizeof(buf), "request %ld", i);
		sendto(fd, buf, strlen(buf), 0, &dst.sa,
		       family == AF_INET ? sizeof(dst.in) : sizeof(dst.in6));
		if (wait_fd(fd, POLLIN, timeout) <= 0)
			continue;
		n = recvfrom(fd, buf, sizeof(buf), 0, &from.sa, &alen);
		if (n <= 0)
			continue;
		if (!replies)
			first = from;
		replies++;
	}
	close(fd);
	printf("replies %ld\n", replies);
	if (replies)
		printf("from %s %u\n", sa_addr(&first, abuf, sizeof(abuf)),
		       ntohs(first.sa.sa_family == AF_INET ? first.in.sin_port :
			     first.in6.sin6_port));
	return 0;
}

/* ---- raw frames ---- */

static uint16_t ip_csum(const void *hdr, int len)
{
	const uint8_t *b = hdr;
	uint32_t sum = 0;

	for (int i = 0; i < len; i += 2)
		sum += (uint32_t)b[i] << 8 | b[i + 1];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return htons(~sum & 0xffff);
}

/* Writes `frame` COUNT times out of the device sll names; "sent N". */
static int send_frames(const struct sockaddr_ll *sll, const uint8_t *frame,
		       size_t len, long count)
{
	long sent = 0;
	int fd;

	fd = socket(AF_PACKET, SOCK_RAW, 0);
	if (fd < 0) {
		fprintf(stderr, "%s: AF_PACKET: %s\n", prog, strerror(errno));
		return 1;
	}
	for (long i = 0; i < count; i++) {
		if (sendto(fd, frame, len, 0, (const struct sockaddr *)sll,
			   sizeof(*sll)) < 0) {
			fprintf(stderr, "%s: sendto: %s\n", prog,
				strerror(errno));
			break;
		}
		sent++;
	}
	close(fd);
	printf("sent %ld\n", sent);
	return sent == count ? 0 : 1;
}

static int cmd_raw_udp(int argc, char **argv)
{
	uint8_t f[14 + 20 + 8 + 16] = { 0 }, *ip = f + 14, *udp = f + 34;
	uint8_t tagged[sizeof(f) + 4], *frame = f;
	struct sockaddr_ll sll = { .sll_family = AF_PACKET };
	size_t flen = sizeof(f);
	unsigned int m[6];
	struct in_addr src, dst;
	long port, count, vid = -1;

	if (argc == 7) {
		vid = number(argv[6], 0, 4095);
		if (vid < 0)
			return usage();
		argc--;
	}
	if (argc != 6 ||
	    sscanf(argv[1], "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3],
		   &m[4], &m[5]) != 6 ||
	    inet_pton(AF_INET, argv[2], &src) != 1 ||
	    inet_pton(AF_INET, argv[3], &dst) != 1)
		return usage();
	port = number(argv[4], 1, 65535);
	count = number(argv[5], 0, 100000000);
	sll.sll_ifindex = if_nametoindex(argv[0]);
	if (port < 0 || count < 0 || !sll.sll_ifindex)
		return usage();
	for (int i = 0; i < 6; i++)
		f[6 + i] = m[i];
	f[12] = 0x08;			/* IPv4 */
	ip[0] = 0x45;
	ip[3] = sizeof(f) - 14;
	ip[8] = 64;			/* TTL */
	ip[9] = IPPROTO_UDP;
	memcpy(ip + 12, &src, 4);
	memcpy(ip + 16, &dst, 4);
	memcpy(ip + 10, &(uint16_t){ ip_csum(ip, 20) }, 2);
	udp[0] = 0x9c;			/* source port 40000 */
	udp[1] = 0x40;
	udp[2] = port >> 8;
	udp[3] = port & 0xff;
	udp[5] = sizeof(f) - 34;	/* checksum 0: none, valid for IPv4 */
	if (vid >= 0) {
		/* an 802.1Q tag between the MACs and the EtherType */
		memcpy(tagged, f, 12);
		tagged[12] = 0x81;
		tagged[13] = 0x00;
		tagged[14] = vid >> 8;
		tagged[15] = vid & 0xff;
		memcpy(tagged + 16, f + 12, sizeof(f) - 12);
		frame = tagged;
		flen = sizeof(tagged);
	}
	sll.sll_halen = 6;
	return send_frames(&sll, frame, flen, count);
}

/* A whole frame, given in hex from its destination MAC on, COUNT times:
 * for frames no socket would build (non-IP, a bad header, a fragment
 * cut short). */
static int cmd_raw_frame(int argc, char **argv)
{
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_halen = 6 };
	uint8_t frame[1514];
	size_t len = 0, hl;
	long count;

	if (argc != 3)
		return usage();
	hl = strlen(argv[1]);
	count = number(argv[2], 0, 100000000);
	sll.sll_ifindex = if_nametoindex(argv[0]);
	if (count < 0 || !sll.sll_ifindex || hl % 2 || hl / 2 < 14 ||
	    hl / 2 > sizeof(frame))
		return usage();
	for (; len < hl / 2; len++) {
		unsigned int b;

		if (sscanf(argv[1] + 2 * len, "%2x", &b) != 1)
			return usage();
		frame[len] = b;
	}
	/* the shortest frame Ethernet carries */
	for (; len < 60; len++)
		frame[len] = 0;
	return send_frames(&sll, frame, len, count);
}

/* ---- router advertisement ---- */

static int cmd_router_adv(int argc, char **argv)
{
	/* type 134, code 0, checksum (the kernel fills it in for ICMPv6),
	 * hop limit 64, flags 0,
	 * router lifetime 1800 s, reachable 0, retransmit 0 */
	static const unsigned char ra[16] = { 134, 0, 0, 0, 64, 0, 0x07, 0x08 };
	int fd, hops = 255, ifindex;
	long count, i, sent = 0;
	union sa dst;
	struct opts o;

	if (parse(argc, argv, 0, &o) || o.npos != 2)
		return usage();
	ifindex = if_nametoindex(o.pos[0]);
	count = number(o.pos[1], 1, 1000);
	if (!ifindex || count < 0 || make_sa(AF_INET6, "ff02::1", 0, &dst))
		return usage();
	fd = socket(AF_INET6, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMPV6);
	if (fd < 0) {
		fprintf(stderr, "%s: raw ICMPv6 socket: %s\n", prog,
			strerror(errno));
		return 1;
	}
	if (setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_HOPS, &hops,
		       sizeof(hops)) < 0 ||
	    setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_IF, &ifindex,
		       sizeof(ifindex)) < 0) {
		fprintf(stderr, "%s: setsockopt: %s\n", prog, strerror(errno));
		close(fd);
		return 1;
	}
	dst.in6.sin6_scope_id = ifindex;
	for (i = 0; i < count; i++) {
		if (sendto(fd, ra, sizeof(ra), 0, &dst.sa, sa_len(&dst)) < 0) {
			fprintf(stderr, "%s: sendto: %s\n", prog,
				strerror(errno));
			break;
		}
		sent++;
	}
	close(fd);
	printf("sent %ld\n", sent);
	return sent == count ? 0 : 1;
}

/* ---- neighbour claims ---- */

static int dev_mac(int fd, const char *dev, unsigned char mac[6])
{
	struct ifreq ifr = { 0 };

	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", dev);
	if (ioctl(fd, SIOCGIFHWADDR, &ifr) < 0) {
		fprintf(stderr, "%s: %s: no MAC: %s\n", prog, dev,
			strerror(errno));
		return -1;
	}
	memcpy(mac, ifr.ifr_hwaddr.sa_data, 6);
	return 0;
}

static int cmd_neigh_adv(int argc, char **argv)
{
	/* type 136, code 0, checksum (the kernel's), flags: override; the
	 * target, then a target link-layer address option */
	unsigned char na[32] = { 136, 0, 0, 0, 0x20 };
	int fd, hops = 255, ifindex;
	long count, i, sent = 0;
	union sa dst;
	struct opts o;

	if (parse(argc, argv, 0, &o) || o.npos != 3)
		return usage();
	ifindex = if_nametoindex(o.pos[0]);
	count = number(o.pos[2], 1, 1000);
	if (!ifindex || count < 0 || inet_pton(AF_INET6, o.pos[1], na + 8) != 1 ||
	    make_sa(AF_INET6, "ff02::1", 0, &dst))
		return usage();
	fd = socket(AF_INET6, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMPV6);
	if (fd < 0) {
		fprintf(stderr, "%s: raw ICMPv6 socket: %s\n", prog,
			strerror(errno));
		return 1;
	}
	na[24] = 2;
	na[25] = 1;
	if (dev_mac(fd, o.pos[0], na + 26) ||
	    setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_HOPS, &hops,
		       sizeof(hops)) < 0 ||
	    setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_IF, &ifindex,
		       sizeof(ifindex)) < 0) {
		close(fd);
		return 1;
	}
	dst.in6.sin6_scope_id = ifindex;
	for (i = 0; i < count; i++) {
		if (sendto(fd, na, sizeof(na), 0, &dst.sa, sa_len(&dst)) < 0) {
			fprintf(stderr, "%s: sendto: %s\n", prog,
				strerror(errno));
			break;
		}
		sent++;
	}
	close(fd);
	printf("sent %ld\n", sent);
	return sent == count ? 0 : 1;
}

static int cmd_arp_announce(int argc, char **argv)
{
	uint8_t f[60] = { 0 }, *a = f + 14;
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_halen = 6 };
	long count, i, sent = 0;
	struct opts o;
	int fd;

	if (parse(argc, argv, 0, &o) || o.npos != 3)
		return usage();
	sll.sll_ifindex = if_nametoindex(o.pos[0]);
	count = number(o.pos[2], 1, 1000);
	if (!sll.sll_ifindex || count < 0 ||
	    inet_pton(AF_INET, o.pos[1], a + 14) != 1)
		return usage();
	memcpy(a + 24, a + 14, 4);	/* target = sender: gratuitous */
	fd = socket(AF_PACKET, SOCK_RAW, 0);
	if (fd < 0) {
		fprintf(stderr, "%s: AF_PACKET: %s\n", prog, strerror(errno));
		return 1;
	}
	if (dev_mac(fd, o.pos[0], f + 6)) {
		close(fd);
		return 1;
	}
	memset(f, 0xff, 6);
	memset(sll.sll_addr, 0xff, 6);
	f[12] = 0x08;
	f[13] = 0x06;
	a[1] = 1;			/* Ethernet */
	a[2] = 0x08;			/* IPv4 */
	a[4] = 6;
	a[5] = 4;
	a[7] = 1;			/* request */
	memcpy(a + 8, f + 6, 6);
	for (i = 0; i < count; i++) {
		if (sendto(fd, f, sizeof(f), 0, (struct sockaddr *)&sll,
			   sizeof(sll)) < 0) {
			fprintf(stderr, "%s: sendto: %s\n", prog,
				strerror(errno));
			break;
		}
		sent++;
	}
	close(fd);
	printf("sent %ld\n", sent);
	return sent == count ? 0 : 1;
}

static int cmd_icmp_too_big(int argc, char **argv)
{
	uint8_t m[8 + 40 + 8] = { 0 }, *in = m + 8, *udp;
	long sport, dport, mtu;
	int family, fd, len;
	union sa to;

	if (argc != 5)
		return usage();
	family = strchr(argv[0], ':') ? AF_INET6 : AF_INET;
	sport = number(argv[2], 1, 65535);
	dport = number(argv[3], 1, 65535);
	mtu = number(argv[4], 68, 65535);
	if (sport < 0 || dport < 0 || mtu < 0 ||
	    make_sa(family, argv[0], 0, &to) < 0)
		return usage();
	if (family == AF_INET) {
		m[0] = 3;		/* destination unreachable */
		m[1] = 4;		/* fragmentation needed */
		m[6] = mtu >> 8;
		m[7] = mtu & 0xff;
		in[0] = 0x45;
		in[2] = 1500 >> 8;
		in[3] = 1500 & 0xff;
		in[6] = 0x40;		/* DF */
		in[8] = 64;
		in[9] = IPPROTO_UDP;
		if (inet_pton(AF_INET, argv[0], in + 12) != 1 ||
		    inet_pton(AF_INET, argv[1], in + 16) != 1)
			return usage();
		memcpy(in + 10, &(uint16_t){ ip_csum(in, 20) }, 2);
		udp = in + 20;
	} else {
		m[0] = 2;		/* packet too big */
		m[4] = mtu >> 24;
		m[5] = mtu >> 16;
		m[6] = mtu >> 8;
		m[7] = mtu & 0xff;
		in[0] = 0x60;
		in[4] = (1500 - 40) >> 8;
		in[5] = (1500 - 40) & 0xff;
		in[6] = IPPROTO_UDP;
		in[7] = 64;
		if (inet_pton(AF_INET6, argv[0], in + 8) != 1 ||
		    inet_pton(AF_INET6, argv[1], in + 24) != 1)
			return usage();
		udp = in + 40;
	}
	udp[0] = sport >> 8;
	udp[1] = sport & 0xff;
	udp[2] = dport >> 8;
	udp[3] = dport & 0xff;
	udp[4] = (1500 - (family == AF_INET ? 20 : 40)) >> 8;
	udp[5] = (1500 - (family == AF_INET ? 20 : 40)) & 0xff;
	len = udp + 8 - m;
	/* the ICMPv6 checksum is the kernel's on these sockets */
	if (family == AF_INET)
		memcpy(m + 2, &(uint16_t){ ip_csum(m, len) }, 2);
	fd = socket(family, SOCK_RAW | SOCK_CLOEXEC,
		    family == AF_INET ? IPPROTO_ICMP : IPPROTO_ICMPV6);
	if (fd < 0 || sendto(fd, m, len, 0, &to.sa, sa_len(&to)) != len) {
		fprintf(stderr, "%s: icmp: %s\n", prog, strerror(errno));
		if (fd >= 0)
			close(fd);
		return 1;
	}
	close(fd);
	printf("sent 1\n");
	return 0;
}

static int cmd_udp6_ext(int argc, char **argv)
{
	uint8_t pkt[40 + 32 * 8 + 8 + 16] = { 0 }, ph[40 + 8 + 16] = { 0 }, *udp;
	long port, count, nhdrs, sent = 0;
	uint16_t csum;
	int fd, len, plen;
	union sa to;

	if (argc != 5)
		return usage();
	port = number(argv[2], 1, 65535);
	count = number(argv[3], 1, 1000000);
	nhdrs = number(argv[4], 0, 32);
	if (port < 0 || count < 0 || nhdrs < 0 ||
	    inet_pton(AF_INET6, argv[0], pkt + 8) != 1 ||
	    inet_pton(AF_INET6, argv[1], pkt + 24) != 1 ||
	    make_sa(AF_INET6, argv[1], 0, &to) < 0)
		return usage();
	udp = pkt + 40 + nhdrs * 8;
	len = udp + 8 + 16 - pkt;
	plen = len - 40;
	pkt[0] = 0x60;
	pkt[4] = plen >> 8;
	pkt[5] = plen & 0xff;
	pkt[6] = nhdrs ? 60 : IPPROTO_UDP;
	pkt[7] = 64;
	for (long i = 0; i < nhdrs; i++) {
		uint8_t *h = pkt + 40 + i * 8;

		h[0] = i + 1 < nhdrs ? 60 : IPPROTO_UDP;
		h[1] = 0;		/* 8 bytes */
		h[2] = 1;		/* PadN of 4 */
		h[3] = 4;
	}
	udp[0] = 40000 >> 8;
	udp[1] = 40000 & 0xff;
	udp[2] = port >> 8;
	udp[3] = port & 0xff;
	udp[5] = 8 + 16;
	memcpy(udp + 8, "podinject udp6x", 16);
	/* the checksum over the pseudo-header (addresses, length, next
	 * header) and the datagram; 0 is sent as all ones */
	memcpy(ph, pkt + 8, 32);
	ph[35] = 8 + 16;
	ph[39] = IPPROTO_UDP;
	memcpy(ph + 40, udp, 8 + 16);
	csum = ip_csum(ph, sizeof(ph));
	memcpy(udp + 6, &(uint16_t){ csum ? csum : 0xffff }, 2);
	fd = socket(AF_INET6, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW);
	if (fd < 0) {
		fprintf(stderr, "%s: udp6-ext: %s\n", prog, strerror(errno));
		return 1;
	}
	for (long i = 0; i < count; i++) {
		if (sendto(fd, pkt, len, 0, &to.sa, sa_len(&to)) != len) {
			fprintf(stderr, "%s: udp6-ext: %s\n", prog,
				strerror(errno));
			break;
		}
		sent++;
	}
	close(fd);
	printf("sent %ld\n", sent);
	return sent == count ? 0 : 1;
}

static int cmd_echo_late(int argc, char **argv)
{
	uint8_t buf[2048];
	long delay, count, timeout, answered = 0;
	long long deadline;
	int fd;

	if (argc != 3)
		return usage();
	delay = number(argv[0], 0, 60000);
	count = number(argv[1], 1, 100000);
	timeout = number(argv[2], 0, 86400000);
	if (delay < 0 || count < 0 || timeout < 0)
		return usage();
	fd = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP);
	if (fd < 0) {
		fprintf(stderr, "%s: icmp: %s\n", prog, strerror(errno));
		return 1;
	}
	printf("listening\n");
	fflush(stdout);
	deadline = pi_mono_ms() + timeout;
	while (answered < count) {
		long left = deadline - pi_mono_ms();
		struct sockaddr_in from;
		socklen_t alen = sizeof(from);
		uint8_t *icmp;
		ssize_t n;
		int ihl;

		if (left <= 0 || wait_fd(fd, POLLIN, left) <= 0)
			break;
		/* a raw IPv4 socket reads the IP header too */
		n = recvfrom(fd, buf, sizeof(buf) - 1, 0,
			     (struct sockaddr *)&from, &alen);
		if (n < 20)
			continue;
		ihl = (buf[0] & 0x0f) * 4;
		if (n < ihl + 8 || buf[ihl] != 8 || buf[ihl + 1] != 0)
			continue;
		icmp = buf + ihl;
		printf("request\n");
		fflush(stdout);
		usleep(delay * 1000);
		icmp[0] = 0;		/* echo reply: same id, sequence, data */
		icmp[2] = icmp[3] = 0;
		buf[n] = 0;		/* the sum pads an odd length */
		memcpy(icmp + 2, &(uint16_t){ ip_csum(icmp, n - ihl) }, 2);
		if (sendto(fd, icmp, n - ihl, 0, (struct sockaddr *)&from,
			   alen) == n - ihl)
			answered++;
	}
	close(fd);
	printf("answered %ld\n", answered);
	return 0;
}

int main(int argc, char **argv)
{
	const char *cmd;

	if (argc < 2)
		return usage();
	cmd = argv[1];
	argc -= 2;
	argv += 2;
	if (!strcmp(cmd, "udp-recv"))
		return cmd_udp_recv(argc, argv);
	if (!strcmp(cmd, "udp-send"))
		return cmd_udp_send(argc, argv);
	if (!strcmp(cmd, "tcp-server"))
		return cmd_tcp_server(argc, argv);
	if (!strcmp(cmd, "tcp-connect"))
		return cmd_tcp_connect(argc, argv);
	if (!strcmp(cmd, "tcp-syn"))
		return cmd_tcp_syn(argc, argv);
	if (!strcmp(cmd, "tcp-conn-loop"))
		return cmd_tcp_conn_loop(argc, argv);
	if (!strcmp(cmd, "udp-echo"))
		return cmd_udp_echo(argc, argv);
	if (!strcmp(cmd, "udp-rr"))
		return cmd_udp_rr(argc, argv);
	if (!strcmp(cmd, "raw-udp"))
		return cmd_raw_udp(argc, argv);
	if (!strcmp(cmd, "raw-frame"))
		return cmd_raw_frame(argc, argv);
	if (!strcmp(cmd, "router-adv"))
		return cmd_router_adv(argc, argv);
	if (!strcmp(cmd, "neigh-adv"))
		return cmd_neigh_adv(argc, argv);
	if (!strcmp(cmd, "arp-announce"))
		return cmd_arp_announce(argc, argv);
	if (!strcmp(cmd, "icmp-too-big"))
		return cmd_icmp_too_big(argc, argv);
	if (!strcmp(cmd, "udp6-ext"))
		return cmd_udp6_ext(argc, argv);
	if (!strcmp(cmd, "echo-late"))
		return cmd_echo_late(argc, argv);
	return usage();
}
