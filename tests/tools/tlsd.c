/* SPDX-License-Identifier: GPL-2.0 */
/*
 * tlsd: the TLS server of podinject's mTLS tests (t_mtls). It stands for a
 * server pod whose application speaks TLS 1.3 and wants its clients'
 * certificates: what podinject-proxy --tls-dir connects to.
 *
 *   tlsd [-6] PORT --cert FILE --key FILE --ca FILE [--echo] [--send BYTES]
 *        [--count N] [--timeout MS] [--delay MS] [--stall MS] [--rcvbuf BYTES]
 *        [--tickets N] [--key-update] [--key-update-requested]
 *        [--resume SECONDS]
 *
 * One connection at a time. A client must show a certificate of the --ca
 * bundle with an IP SAN equal to its TCP peer address (the server's check
 * of who is calling); otherwise the handshake is refused. Per connection,
 * once the client has finished sending (close_notify, or EOF, or an
 * error):
 *
 *   accept PEERIP PEERPORT uri URI bytes N sha256 HEX fnv HEX sent M close_notify yes|no sent_sha256 HEX resumed yes|no cipher NAME
 *   refused PEERIP reason...          (the handshake failed)
 *
 * URI is the client certificate's first URI SAN ("-" if none), N the bytes
 * received, their SHA-256 and 64-bit FNV-1a (the latter comparable with
 * pinet's), M the bytes sent back and sent_sha256 theirs; close_notify
 * says whether the client ended with one (no: a plain EOF, a reset or a
 * TLS error).
 *
 *   (default)     sink what comes, then close_notify
 *   --echo        send back what comes, then close_notify at the client's end
 *   --send BYTES  right after the handshake send BYTES of pinet's pattern
 *                 (byte i is i % 251) and close_notify, while sinking what
 *                 the client sends until its end (a half-close from the
 *                 server's side: the other direction goes on)
 *   --count N     stop after N connections, accepted or refused (1)
 *   --timeout MS  wait at most this long for a connection and for each
 *                 read or write (10000); running out prints "timeout"
 *                 (exit 1) while waiting for a connection
 *   --delay MS    sleep this long before each read (a slow reader)
 *   --stall MS    after the handshake, do nothing for this long (a
 *                 server that stopped reading for a while)
 *   --rcvbuf B    the listener's receive buffer (with --delay: a slow
 *                 reader with a small window)
 *   --tickets N   issue N TLS 1.3 session tickets after each handshake
 *                 (0: records a client reads after the handshake that are
 *                 not application data)
 *   --key-update  update its sending keys right after the handshake (a
 *                 KeyUpdate message before the first byte it sends)
 *   --key-update-requested  the same, asking the client to update its own
 *   --resume S    sessions may be resumed for S seconds: stateless tickets
 *                 (--tickets N, at least 1); a resumed session's client
 *                 certificate must still name the caller's address
 *
 * "listening PORT" on stdout once it listens. Exit 0 after COUNT
 * connections, 1 on a timeout waiting for one, 2 on bad usage.
 */
#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include "tls_tool.h"

#define CHUNK	(64 << 10)
#define FNV64_BASIS	0xcbf29ce484222325ULL
#define FNV64_PRIME	0x100000001b3ULL

static struct {
	bool v6, echo, key_update, key_update_requested;
	long long send;
	long count, timeout_ms, delay_ms, stall_ms, rcvbuf, tickets, resume_s;
	const char *cert, *key, *ca;
	long port;
} o = { .count = 1, .timeout_ms = 10000, .send = -1 };

static int usage(void)
{
	fprintf(stderr, "usage: tlsd [-6] PORT --cert FILE --key FILE --ca FILE [--echo] [--send BYTES]\n"
		"            [--count N] [--timeout MS] [--delay MS] [--stall MS] [--rcvbuf BYTES]\n"
		"            [--tickets N] [--key-update] [--key-update-requested]\n"
		"            [--resume SECONDS]\n");
	return 2;
}

static bool parse(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "cert", required_argument, NULL, 'c' },
		{ "key", required_argument, NULL, 'k' },
		{ "ca", required_argument, NULL, 'a' },
		{ "echo", no_argument, NULL, 'e' },
		{ "send", required_argument, NULL, 's' },
		{ "count", required_argument, NULL, 'n' },
		{ "timeout", required_argument, NULL, 't' },
		{ "delay", required_argument, NULL, 'd' },
		{ "rcvbuf", required_argument, NULL, 'r' },
		{ "stall", required_argument, NULL, 'S' },
		{ "tickets", required_argument, NULL, 'T' },
		{ "key-update", no_argument, NULL, 'u' },
		{ "key-update-requested", no_argument, NULL, 'U' },
		{ "resume", required_argument, NULL, 'R' },
		{ 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "6", opts, NULL)) != -1) {
		switch (c) {
		case '6': o.v6 = true; break;
		case 'c': o.cert = optarg; break;
		case 'k': o.key = optarg; break;
		case 'a': o.ca = optarg; break;
		case 'e': o.echo = true; break;
		case 's': o.send = number(optarg, 0, 1LL << 40); if (o.send < 0) return false; break;
		case 'n': o.count = number(optarg, 1, 10000000); if (o.count < 0) return false; break;
		case 't': o.timeout_ms = number(optarg, 1, 86400000); if (o.timeout_ms < 0) return false; break;
		case 'd': o.delay_ms = number(optarg, 0, 60000); if (o.delay_ms < 0) return false; break;
		case 'S': o.stall_ms = number(optarg, 0, 600000); if (o.stall_ms < 0) return false; break;
		case 'r': o.rcvbuf = number(optarg, 1, 1 << 30); if (o.rcvbuf < 0) return false; break;
		case 'T': o.tickets = number(optarg, 0, 16); if (o.tickets < 0) return false; break;
		case 'u': o.key_update = true; break;
		case 'U': o.key_update = o.key_update_requested = true; break;
		case 'R': o.resume_s = number(optarg, 1, 86400); if (o.resume_s < 0) return false; break;
		default: return false;
		}
	}
	if (optind != argc - 1 || !o.cert || !o.key || !o.ca ||
	    (o.echo && o.send >= 0))
		return false;
	o.port = number(argv[optind], 1, 65535);
	return o.port > 0;
}

static SSL_CTX *make_ctx(void)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

	if (!ctx || !SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) ||
	    SSL_CTX_use_certificate_chain_file(ctx, o.cert) != 1 ||
	    SSL_CTX_use_PrivateKey_file(ctx, o.key, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_check_private_key(ctx) != 1 ||
	    SSL_CTX_load_verify_locations(ctx, o.ca, NULL) != 1) {
		fprintf(stderr, "tlsd: %s\n", ssl_error());
		return NULL;
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER |
			   SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
	SSL_CTX_set_num_tickets(ctx, o.tickets);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	if (o.resume_s) {
		/* stateless tickets, good for resume_s, at least one */
		static const unsigned char sid[] = "tlsd";

		if (!o.tickets)
			SSL_CTX_set_num_tickets(ctx, 1);
		SSL_CTX_set_timeout(ctx, o.resume_s);
		SSL_CTX_set_session_id_context(ctx, sid, sizeof(sid) - 1);
	}
	return ctx;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

struct tally {
	long long bytes, sent;
	uint64_t fnv;
	EVP_MD_CTX *md, *md_sent;
	bool close_notify;
};

/* Reads one chunk into the tally; false at the client's end (its kind
 * noted). */
static bool read_some(SSL *ssl, struct tally *t, unsigned char *buf,
		      int *got)
{
	int n;

	if (o.delay_ms)
		sleep_ms(o.delay_ms);
	ERR_clear_error();
	n = SSL_read(ssl, buf, CHUNK);
	if (n <= 0) {
		t->close_notify = SSL_get_error(ssl, n) == SSL_ERROR_ZERO_RETURN;
		return false;
	}
	EVP_DigestUpdate(t->md, buf, n);
	for (int i = 0; i < n; i++)
		t->fnv = (t->fnv ^ buf[i]) * FNV64_PRIME;
	t->bytes += n;
	*got = n;
	return true;
}

static bool write_all(SSL *ssl, const unsigned char *buf, int n,
		      struct tally *t)
{
	while (n > 0) {
		int w = SSL_write(ssl, buf, n);

		if (w <= 0)
			return false;
		EVP_DigestUpdate(t->md_sent, buf, w);
		buf += w;
		n -= w;
		t->sent += w;
	}
	return true;
}

/* Ends the digest and frees it; hex gets it in lower-case hex. */
static void digest_hex(EVP_MD_CTX *md, char *hex)
{
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned int n = 0;

	EVP_DigestFinal_ex(md, d, &n);
	EVP_MD_CTX_free(md);
	for (unsigned int i = 0; i < n; i++)
		sprintf(hex + 2 * i, "%02x", d[i]);
	hex[2 * n] = 0;
}

static void serve(SSL_CTX *ctx, int fd, const char *peer, int pport)
{
	static unsigned char buf[CHUNK];
	char uri[512], hex[2 * EVP_MAX_MD_SIZE + 1];
	char sent_hex[2 * EVP_MAX_MD_SIZE + 1];
	struct tally t = { .fnv = FNV64_BASIS };
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	SSL *ssl = SSL_new(ctx);
	const unsigned char *ip;
	size_t iplen;
	int got;

	getpeername(fd, (void *)&ss, &sl);
	if (!ssl) {
		printf("refused %s no memory\n", peer);
		return;
	}
	/* the client's certificate must name the address it calls from */
	ip = ss.ss_family == AF_INET ?
	     (const void *)&((struct sockaddr_in *)&ss)->sin_addr :
	     (const void *)&((struct sockaddr_in6 *)&ss)->sin6_addr;
	iplen = ss.ss_family == AF_INET ? 4 : 16;
	if (!X509_VERIFY_PARAM_set1_ip(SSL_get0_param(ssl), ip, iplen) ||
	    !SSL_set_fd(ssl, fd)) {
		printf("refused %s setup\n", peer);
		SSL_free(ssl);
		return;
	}
	ERR_clear_error();
	if (SSL_accept(ssl) != 1) {
		long v = SSL_get_verify_result(ssl);

		printf("refused %s %s\n", peer, v != X509_V_OK ?
		       X509_verify_cert_error_string(v) : ssl_error());
		SSL_free(ssl);
		return;
	}
	/* a resumed session's certificate was checked at its full
	 * handshake, maybe from another address: its IP SAN again */
	if (SSL_session_reused(ssl) &&
	    X509_check_ip(SSL_get0_peer_certificate(ssl), ip, iplen, 0) != 1) {
		printf("refused %s resumed session of another address\n", peer);
		SSL_free(ssl);
		return;
	}
	first_uri(SSL_get0_peer_certificate(ssl), uri, sizeof(uri));
	if (o.key_update)
		SSL_key_update(ssl, o.key_update_requested ?
				    SSL_KEY_UPDATE_REQUESTED :
				    SSL_KEY_UPDATE_NOT_REQUESTED);
	if (o.stall_ms)
		sleep_ms(o.stall_ms);
	t.md = EVP_MD_CTX_new();
	t.md_sent = EVP_MD_CTX_new();
	if (!t.md || !t.md_sent ||
	    !EVP_DigestInit_ex(t.md, EVP_sha256(), NULL) ||
	    !EVP_DigestInit_ex(t.md_sent, EVP_sha256(), NULL)) {
		printf("refused %s no memory\n", peer);
		EVP_MD_CTX_free(t.md);
		EVP_MD_CTX_free(t.md_sent);
		SSL_free(ssl);
		return;
	}
	if (o.send >= 0) {
		for (long long off = 0; off < o.send;) {
			int n = o.send - off < CHUNK ? o.send - off : CHUNK;

			for (int i = 0; i < n; i++)
				buf[i] = (off + i) % 251;
			if (!write_all(ssl, buf, n, &t))
				break;
			off += n;
		}
		SSL_shutdown(ssl);
		while (read_some(ssl, &t, buf, &got))
			;
	} else {
		while (read_some(ssl, &t, buf, &got))
			if (o.echo && !write_all(ssl, buf, got, &t))
				break;
		if (t.close_notify)
			SSL_shutdown(ssl);
	}
	digest_hex(t.md, hex);
	digest_hex(t.md_sent, sent_hex);
	printf("accept %s %d uri %s bytes %lld sha256 %s fnv %016llx sent %lld close_notify %s sent_sha256 %s resumed %s cipher %s\n",
	       peer, pport, uri, t.bytes, hex, (unsigned long long)t.fnv,
	       t.sent, t.close_notify ? "yes" : "no", sent_hex,
	       SSL_session_reused(ssl) ? "yes" : "no",
	       SSL_get_cipher_name(ssl));
	SSL_free(ssl);
}

int main(int argc, char **argv)
{
	struct timeval tv;
	SSL_CTX *ctx;
	int lfd, one = 1;
	union {
		struct sockaddr_in v4;
		struct sockaddr_in6 v6;
	} a = { 0 };

	if (!parse(argc, argv))
		return usage();
	signal(SIGPIPE, SIG_IGN);
	ctx = make_ctx();
	if (!ctx)
		return 1;
	lfd = socket(o.v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0)
		return 1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (o.rcvbuf)
		setsockopt(lfd, SOL_SOCKET, SO_RCVBUF, &o.rcvbuf, sizeof(int));
	if (o.v6) {
		setsockopt(lfd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
		a.v6.sin6_family = AF_INET6;
		a.v6.sin6_port = htons(o.port);
	} else {
		a.v4.sin_family = AF_INET;
		a.v4.sin_port = htons(o.port);
	}
	if (bind(lfd, (void *)&a, o.v6 ? sizeof(a.v6) : sizeof(a.v4)) ||
	    listen(lfd, 128)) {
		fprintf(stderr, "tlsd: listen on %ld: %s\n", o.port,
			strerror(errno));
		return 1;
	}
	printf("listening %ld\n", o.port);
	fflush(stdout);
	tv.tv_sec = o.timeout_ms / 1000;
	tv.tv_usec = (o.timeout_ms % 1000) * 1000;
	for (long i = 0; i < o.count; i++) {
		struct pollfd p = { .fd = lfd, .events = POLLIN };
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		char peer[INET6_ADDRSTRLEN];
		int fd, pport;

		if (poll(&p, 1, o.timeout_ms) <= 0) {
			printf("timeout\n");
			return 1;
		}
		fd = accept4(lfd, (void *)&ss, &sl, SOCK_CLOEXEC);
		if (fd < 0) {
			i--;
			continue;
		}
		/* a peer that stops talking ends its connection, not tlsd */
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		/* each record as it is written: a session ticket and the
		 * close_notify after it must not wait for the client's
		 * delayed ACK */
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (ss.ss_family == AF_INET) {
			inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr,
				  peer, sizeof(peer));
			pport = ntohs(((struct sockaddr_in *)&ss)->sin_port);
		} else {
			inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr,
				  peer, sizeof(peer));
			pport = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
		}
		serve(ctx, fd, peer, pport);
		fflush(stdout);
		close(fd);
	}
	SSL_CTX_free(ctx);
	close(lfd);
	return 0;
}
