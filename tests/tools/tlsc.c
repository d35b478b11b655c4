/* SPDX-License-Identifier: GPL-2.0 */
/*
 * tlsc: the TLS client of podinject's mTLS tests. It stands for a client
 * whose application speaks TLS 1.3 to a protected server pod, and so for
 * what podinject-proxy --inbound terminates.
 *
 *   tlsc [-6] ADDR PORT [--cert FILE --key FILE] --ca FILE
 *        [--send BYTES | --stdin] [--expect-ip ADDR] [--timeout MS]
 *        [--sess-in FILE] [--sess-out FILE] [--hello-delay MS]
 *        [--flight-delay MS]
 *   tlsc [-6] ADDR PORT [--cert FILE --key FILE] --ca FILE --count N [--resume]
 *        [--expect-ip ADDR] [--timeout MS]
 *
 * One connection. The server must show a certificate of the --ca bundle
 * with an IP SAN equal to ADDR (or to --expect-ip: the name to check when
 * the address connected to is not the server's own); with --cert and --key
 * tlsc shows its own. It sends BYTES of pinet's pattern (byte i is
 * i % 251), or what comes on stdin, then close_notify, while reading what
 * the server sends until its close_notify or EOF (a half-close from the
 * client's side: the other direction goes on). Then one line:
 *
 *   ok verified URI bytes-sent N bytes-received M sha256 HEX close_notify yes|no sent-sha256 HEX resumed yes|no
 *   refused REASON
 *
 * URI is the server certificate's first URI SAN ("-" if none), N the
 * bytes sent, M the bytes received and HEX their SHA-256 (sent-sha256: of
 * the bytes sent); close_notify
 * says whether the server ended with one (no: a plain EOF). Any failure
 * is "refused": the handshake (the server's certificate, or the server
 * refusing tlsc's: in TLS 1.3 its alert comes after tlsc's handshake is
 * done), a reset, a bad record, or --timeout running out.
 *
 *   -6            ADDR (and --expect-ip) is IPv6
 *   --timeout MS  wait at most this long for the connection and for each
 *                 read or write (10000)
 *   --sess-in F   offer the TLS session in F (PEM) for resumption; the
 *                 line's "resumed" says whether the server took it
 *   --sess-out F  write the last session ticket the server sent to F (PEM;
 *                 exit 1 after the line when it sent none)
 *   --hello-delay MS  connected, wait that long before the hello (a client
 *                 held by its CPU quota or a loaded machine)
 *   --flight-delay MS  the server's first flight come, wait that long
 *                 before the client's second (a slow handshake)
 *
 * With --count N instead: N connections one after the other, each reading
 * to the server's end and sending nothing, timed from before its connect
 * to that end (the bench's set-up time of a client that speaks TLS
 * itself); --resume offers each the session of the last ticket. Prints
 * pinet tcp-conn-loop's lines ("conns N failed F seconds S cps R",
 * "latency_us p50 X p99 Y max Z") and "resumed R"; exit 0 if all N went.
 *
 * Exit 0 on "ok", 1 on "refused", or on an address or a file that is
 * no good (said on stderr), 2 on bad usage.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include "conn_loop.h"
#include "tls_tool.h"

#define CHUNK	(64 << 10)

static struct {
	bool v6, from_stdin, resume;
	long count;		/* --count: connections in a loop (0: one, the line) */
	long long send;
	long timeout_ms;
	long hello_delay_ms;	/* --hello-delay: connected, silent that long */
	long flight_delay_ms;	/* --flight-delay: before the second flight */
	const char *addr, *cert, *key, *ca, *expect_ip, *sess_in, *sess_out;
	long port;
} o = { .timeout_ms = 10000 };

static int usage(void)
{
	fprintf(stderr, "usage: tlsc [-6] ADDR PORT [--cert FILE --key FILE] --ca FILE\n"
		"            [--send BYTES | --stdin] [--expect-ip ADDR] [--timeout MS]\n"
		"            [--sess-in FILE] [--sess-out FILE] [--hello-delay MS]\n"
		"            [--flight-delay MS]\n"
		"       tlsc [-6] ADDR PORT [--cert FILE --key FILE] --ca FILE --count N [--resume]\n"
		"            [--expect-ip ADDR] [--timeout MS]\n");
	return 2;
}

static bool parse(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "cert", required_argument, NULL, 'c' },
		{ "key", required_argument, NULL, 'k' },
		{ "ca", required_argument, NULL, 'a' },
		{ "send", required_argument, NULL, 's' },
		{ "stdin", no_argument, NULL, 'i' },
		{ "expect-ip", required_argument, NULL, 'e' },
		{ "timeout", required_argument, NULL, 't' },
		{ "sess-in", required_argument, NULL, 'I' },
		{ "sess-out", required_argument, NULL, 'O' },
		{ "count", required_argument, NULL, 'n' },
		{ "resume", no_argument, NULL, 'r' },
		{ "hello-delay", required_argument, NULL, 'd' },
		{ "flight-delay", required_argument, NULL, 'f' },
		{ 0 },
	};
	bool sent = false;
	int c;

	while ((c = getopt_long(argc, argv, "6", opts, NULL)) != -1) {
		switch (c) {
		case '6': o.v6 = true; break;
		case 'c': o.cert = optarg; break;
		case 'k': o.key = optarg; break;
		case 'a': o.ca = optarg; break;
		case 's': o.send = number(optarg, 0, 1LL << 40); if (o.send < 0) return false; sent = true; break;
		case 'i': o.from_stdin = true; break;
		case 'e': o.expect_ip = optarg; break;
		case 'I': o.sess_in = optarg; break;
		case 'O': o.sess_out = optarg; break;
		case 'n': o.count = number(optarg, 1, 10000000); if (o.count < 0) return false; break;
		case 'r': o.resume = true; break;
		case 'd': o.hello_delay_ms = number(optarg, 0, 600000); if (o.hello_delay_ms < 0) return false; break;
		case 'f': o.flight_delay_ms = number(optarg, 0, 600000); if (o.flight_delay_ms < 0) return false; break;
		case 't': o.timeout_ms = number(optarg, 1, 86400000); if (o.timeout_ms < 0) return false; break;
		default: return false;
		}
	}
	/* a certificate without its key (or the other way) is no identity;
	 * one source of bytes only */
	if (optind != argc - 2 || !o.ca || !o.cert != !o.key ||
	    (sent && o.from_stdin) ||
	    (o.count && (sent || o.from_stdin || o.sess_in || o.sess_out)) ||
	    (o.resume && !o.count))
		return false;
	o.addr = argv[optind];
	o.port = number(argv[optind + 1], 1, 65535);
	return o.port > 0;
}

/* --sess-out: the last session ticket the server sent */
static SSL_SESSION *last_session;

static int session_got(SSL *ssl, SSL_SESSION *sess)
{
	(void)ssl;
	SSL_SESSION_free(last_session);
	last_session = sess;
	return 1;
}

/* --sess-in FILE offered on ssl; false (said) when it does not load */
static bool session_load(SSL *ssl)
{
	FILE *f = fopen(o.sess_in, "r");
	SSL_SESSION *sess = f ? PEM_read_SSL_SESSION(f, NULL, NULL, NULL) : NULL;
	bool ok = sess && SSL_set_session(ssl, sess);

	if (f)
		fclose(f);
	SSL_SESSION_free(sess);
	if (!ok)
		fprintf(stderr, "tlsc: --sess-in %s: %s\n", o.sess_in,
			f ? ssl_error() : strerror(errno));
	return ok;
}

/* The session for --sess-out; false (said) when there is none */
static bool session_save(void)
{
	FILE *f;
	bool ok;

	if (!last_session) {
		fprintf(stderr, "tlsc: --sess-out: the server sent no ticket\n");
		return false;
	}
	f = fopen(o.sess_out, "w");
	ok = f && PEM_write_SSL_SESSION(f, last_session);
	if (f && fclose(f))
		ok = false;
	if (!ok)
		fprintf(stderr, "tlsc: --sess-out %s: %s\n", o.sess_out,
			strerror(errno));
	return ok;
}

static SSL_CTX *make_ctx(void)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

	if (!ctx || !SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) ||
	    SSL_CTX_load_verify_locations(ctx, o.ca, NULL) != 1) {
		fprintf(stderr, "tlsc: --ca %s: %s\n", o.ca, ssl_error());
		SSL_CTX_free(ctx);
		return NULL;
	}
	if (o.cert &&
	    (SSL_CTX_use_certificate_chain_file(ctx, o.cert) != 1 ||
	     SSL_CTX_use_PrivateKey_file(ctx, o.key, SSL_FILETYPE_PEM) != 1 ||
	     SSL_CTX_check_private_key(ctx) != 1)) {
		fprintf(stderr, "tlsc: --cert %s --key %s: %s\n", o.cert, o.key,
			ssl_error());
		SSL_CTX_free(ctx);
		return NULL;
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	/* a stalled SSL_write is retried from the same buffer, and the
	 * loop takes what each call wrote */
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE);
	SSL_CTX_set_session_cache_mode(ctx, o.sess_out || o.resume ? SSL_SESS_CACHE_CLIENT |
				       SSL_SESS_CACHE_NO_INTERNAL_STORE :
				       SSL_SESS_CACHE_OFF);
	SSL_CTX_sess_set_new_cb(ctx, session_got);
	return ctx;
}

/* The socket, connected to ADDR:PORT within the timeout, non-blocking;
 * -1 with *why set. */
static int dial(const char **why)
{
	static char buf[128];
	union {
		struct sockaddr_in v4;
		struct sockaddr_in6 v6;
	} a = { 0 };
	struct pollfd p;
	socklen_t len = sizeof(int);
	int fd, err = 0, one = 1;

	if (o.v6) {
		a.v6.sin6_family = AF_INET6;
		a.v6.sin6_port = htons(o.port);
		inet_pton(AF_INET6, o.addr, &a.v6.sin6_addr);
	} else {
		a.v4.sin_family = AF_INET;
		a.v4.sin_port = htons(o.port);
		inet_pton(AF_INET, o.addr, &a.v4.sin_addr);
	}
	fd = socket(o.v6 ? AF_INET6 : AF_INET,
		    SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		*why = strerror(errno);
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (void *)&a, o.v6 ? sizeof(a.v6) : sizeof(a.v4)) &&
	    errno != EINPROGRESS) {
		err = errno;
	} else {
		p = (struct pollfd){ .fd = fd, .events = POLLOUT };
		if (poll(&p, 1, o.timeout_ms) <= 0)
			err = ETIMEDOUT;
		else
			getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
	}
	if (err) {
		snprintf(buf, sizeof(buf), "connect: %s", strerror(err));
		*why = buf;
		close(fd);
		return -1;
	}
	return fd;
}

/* Waits for what the stalled SSL call asked for (SSL_ERROR_WANT_*); false
 * when the timeout ran out. */
static bool wait_for(int fd, int want)
{
	struct pollfd p = {
		.fd = fd,
		.events = want == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN,
	};

	return poll(&p, 1, o.timeout_ms) > 0;
}

/* The handshake, the server's certificate checked in it; NULL, or why
 * not. */
static const char *handshake(SSL *ssl, int fd)
{
	static char buf[320];
	bool delayed = !o.flight_delay_ms;
	long v;
	int r, e;

	for (;;) {
		ERR_clear_error();
		errno = 0;	/* what a failing call leaves is its own */
		r = SSL_connect(ssl);
		if (r == 1)
			return NULL;
		e = SSL_get_error(ssl, r);
		if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
			break;
		if (!wait_for(fd, e))
			return "handshake: timeout";
		/* the hello sent and the server's answer here: the second
		 * flight is for after the delay */
		if (!delayed && e == SSL_ERROR_WANT_READ) {
			usleep(o.flight_delay_ms * 1000);
			delayed = true;
		}
	}
	v = SSL_get_verify_result(ssl);
	if (v != X509_V_OK)
		snprintf(buf, sizeof(buf), "handshake: server certificate: %s",
			 X509_verify_cert_error_string(v));
	else
		snprintf(buf, sizeof(buf), "handshake: %s",
			 e == SSL_ERROR_SYSCALL && !ERR_peek_error() ?
			 (errno ? strerror(errno) : "connection closed") :
			 ssl_error());
	return buf;
}

struct tally {
	long long sent, got;
	EVP_MD_CTX *md;
	EVP_MD_CTX *sent_md;	/* of what was sent */
	bool close_notify;
};

/*
 * Sends and receives at once, as far as the socket lets each go: a server
 * that echoes would otherwise stop reading while tlsc does not read its
 * answer, and both would wait for ever. The bytes to send are one buffer
 * at a time (pattern or stdin), a stalled SSL_write retried with the same
 * one; once all is sent, close_notify. NULL once both ways are done, or
 * why not.
 */
static const char *exchange(SSL *ssl, int fd, struct tally *t)
{
	static unsigned char out[CHUNK], in[CHUNK];
	static char buf[320];
	size_t off = 0, len = 0;
	long long made = 0;	/* pattern bytes put into `out` so far */
	bool src_done = false, shut = false, read_done = false;
	int wwant = 0, rwant = 0, r, e = 0;

	for (;;) {
		struct pollfd p[2] = { { .fd = fd }, { .fd = 0 } };
		bool moved = false;
		int np = 1;

		if (off == len && !src_done && !o.from_stdin) {
			/* the next piece of the pattern */
			off = 0;
			len = o.send - made < CHUNK ? o.send - made : CHUNK;
			for (size_t i = 0; i < len; i++)
				out[i] = (made + i) % 251;
			made += len;
			src_done = !len;
		}
		if (off < len) {
			ERR_clear_error();
			errno = 0;
			r = SSL_write(ssl, out + off, len - off);
			if (r > 0) {
				EVP_DigestUpdate(t->sent_md, out + off, r);
				off += r;
				t->sent += r;
				wwant = 0;
				moved = true;
				if (off == len)
					off = len = 0;
			} else {
				e = SSL_get_error(ssl, r);
				if (e != SSL_ERROR_WANT_READ &&
				    e != SSL_ERROR_WANT_WRITE)
					goto fail;
				wwant = e;
			}
		} else if (src_done && !shut) {
			ERR_clear_error();
			errno = 0;
			r = SSL_shutdown(ssl);
			if (r >= 0) {
				shut = true;
				wwant = 0;
				moved = true;
			} else {
				e = SSL_get_error(ssl, r);
				if (e != SSL_ERROR_WANT_READ &&
				    e != SSL_ERROR_WANT_WRITE)
					goto fail;
				wwant = e;
			}
		}
		if (!read_done) {
			ERR_clear_error();
			errno = 0;
			r = SSL_read(ssl, in, sizeof(in));
			if (r > 0) {
				EVP_DigestUpdate(t->md, in, r);
				t->got += r;
				rwant = 0;
				moved = true;
			} else {
				e = SSL_get_error(ssl, r);
				if (e == SSL_ERROR_ZERO_RETURN) {
					t->close_notify = true;
					read_done = moved = true;
				} else if (e == SSL_ERROR_SSL &&
					   ERR_GET_REASON(ERR_peek_error()) ==
					   SSL_R_UNEXPECTED_EOF_WHILE_READING) {
					/* a plain EOF: the end, as the
					 * server's application saw fit */
					ERR_clear_error();
					read_done = moved = true;
				} else if (e == SSL_ERROR_WANT_READ ||
					   e == SSL_ERROR_WANT_WRITE) {
					rwant = e;
				} else {
					goto fail;
				}
			}
		}
		if (shut && read_done)
			return NULL;
		if (moved)
			continue;
		if (wwant)
			p[0].events |= wwant == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN;
		if (!read_done)
			p[0].events |= rwant == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN;
		if (o.from_stdin && !src_done && off == len) {
			p[1].events = POLLIN;
			np = 2;
		}
		if (poll(p, np, o.timeout_ms) <= 0) {
			snprintf(buf, sizeof(buf), "timeout (bytes-sent %lld bytes-received %lld)",
				 t->sent, t->got);
			return buf;
		}
		if (np == 2 && p[1].revents) {
			ssize_t n = read(0, out, sizeof(out));

			if (n > 0) {
				off = 0;
				len = n;
			} else if (n == 0) {
				src_done = true;
			} else if (errno != EINTR && errno != EAGAIN) {
				snprintf(buf, sizeof(buf), "stdin: %s",
					 strerror(errno));
				return buf;
			}
		}
	}
fail:
	snprintf(buf, sizeof(buf), "after handshake: %s (bytes-sent %lld bytes-received %lld)",
		 e == SSL_ERROR_SYSCALL && !ERR_peek_error() ?
		 (errno ? strerror(errno) : "connection closed") : ssl_error(),
		 t->sent, t->got);
	return buf;
}

/* The digest in hex, into hex (2 * EVP_MAX_MD_SIZE + 1 bytes). */
static const char *digest_hex(EVP_MD_CTX *ctx, char *hex)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len = 0;

	EVP_DigestFinal_ex(ctx, md, &len);
	for (unsigned int i = 0; i < len; i++)
		sprintf(hex + 2 * i, "%02x", md[i]);
	hex[2 * len] = 0;
	return hex;
}

/* One connection of --count: connected, the handshake, then read to the
 * server's end (close_notify or EOF), nothing sent; true if all of it
 * went so. The session the server's ticket made is last_session. */
static bool one_of_loop(SSL_CTX *ctx, bool *resumed)
{
	const char *why = NULL;
	unsigned char b[512];
	SSL *ssl = SSL_new(ctx);
	bool ok = false;
	int fd = -1, r, e;

	if (!ssl || !X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl),
			o.expect_ip ? o.expect_ip : o.addr) ||
	    (o.resume && last_session && !SSL_set_session(ssl, last_session)))
		goto out;
	fd = dial(&why);
	if (fd < 0 || !SSL_set_fd(ssl, fd) || handshake(ssl, fd))
		goto out;
	*resumed = SSL_session_reused(ssl);
	for (;;) {
		ERR_clear_error();
		r = SSL_read(ssl, b, sizeof(b));
		if (r > 0)
			continue;
		e = SSL_get_error(ssl, r);
		if (e == SSL_ERROR_ZERO_RETURN) {
			/* ours too: a connection not shut down makes OpenSSL
			 * take its sessions for bad ones, never resumed */
			SSL_shutdown(ssl);
			ok = true;
			break;
		}
		if (e == SSL_ERROR_SSL && ERR_GET_REASON(ERR_peek_error()) ==
		    SSL_R_UNEXPECTED_EOF_WHILE_READING) {
			ok = true;
			break;
		}
		if ((e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) ||
		    !wait_for(fd, e))
			break;
	}
out:
	ERR_clear_error();
	SSL_free(ssl);
	if (fd >= 0)
		close(fd);
	return ok;
}

/*
 * --count N: N connections one after the other, each timed from before
 * its connect() to the server's end (what pinet tcp-conn-loop times for
 * plain TCP), the handshake in it. With --resume each offers the session
 * of the last ticket. Prints pinet's lines and how many were resumed.
 */
static int loop(SSL_CTX *ctx)
{
	double *lat = calloc(o.count, sizeof(*lat)), t0, c0;
	long conns = 0, failed = 0, resumed = 0;

	if (!lat) {
		perror("calloc");
		return 1;
	}
	t0 = mono_s();
	for (long i = 0; i < o.count; i++) {
		bool r = false;

		c0 = mono_s();
		if (!one_of_loop(ctx, &r)) {
			failed++;
			continue;
		}
		lat[conns++] = mono_s() - c0;
		resumed += r;
	}
	conn_loop_report(conns, failed, mono_s() - t0, lat);
	printf("resumed %ld\n", resumed);
	free(lat);
	SSL_SESSION_free(last_session);
	SSL_CTX_free(ctx);
	return conns == o.count ? 0 : 1;
}

int main(int argc, char **argv)
{
	unsigned char ip[16];
	char uri[512], hex[2 * EVP_MAX_MD_SIZE + 1];
	struct tally t = { 0 };
	const char *why;
	SSL_CTX *ctx;
	SSL *ssl;
	int fd;

	if (!parse(argc, argv))
		return usage();
	if (inet_pton(o.v6 ? AF_INET6 : AF_INET, o.addr, ip) != 1) {
		fprintf(stderr, "tlsc: bad %s address '%s'\n",
			o.v6 ? "IPv6" : "IPv4 (-6 for IPv6)", o.addr);
		return 1;
	}
	if (o.expect_ip &&
	    inet_pton(o.v6 ? AF_INET6 : AF_INET, o.expect_ip, ip) != 1) {
		fprintf(stderr, "tlsc: bad --expect-ip '%s'\n", o.expect_ip);
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	ctx = make_ctx();
	if (!ctx)
		return 1;
	if (o.count)
		return loop(ctx);
	ssl = SSL_new(ctx);
	/* the name the server must prove: the address called, or the one
	 * asked for */
	if (!ssl || !X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl),
			o.expect_ip ? o.expect_ip : o.addr)) {
		fprintf(stderr, "tlsc: %s\n", ssl_error());
		SSL_free(ssl);
		SSL_CTX_free(ctx);
		return 1;
	}
	if (o.sess_in && !session_load(ssl)) {
		SSL_free(ssl);
		SSL_CTX_free(ctx);
		return 1;
	}
	fd = dial(&why);
	if (fd < 0)
		goto refused;
	if (!SSL_set_fd(ssl, fd)) {
		why = "setup";
		goto refused;
	}
	if (o.hello_delay_ms)
		usleep(o.hello_delay_ms * 1000);
	why = handshake(ssl, fd);
	if (why)
		goto refused;
	first_uri(SSL_get0_peer_certificate(ssl), uri, sizeof(uri));
	t.md = EVP_MD_CTX_new();
	t.sent_md = EVP_MD_CTX_new();
	if (!t.md || !EVP_DigestInit_ex(t.md, EVP_sha256(), NULL) ||
	    !t.sent_md || !EVP_DigestInit_ex(t.sent_md, EVP_sha256(), NULL)) {
		why = "no memory";
		goto refused;
	}
	why = exchange(ssl, fd, &t);
	if (why)
		goto refused;
	printf("ok verified %s bytes-sent %lld bytes-received %lld sha256 %s close_notify %s",
	       uri, t.sent, t.got, digest_hex(t.md, hex),
	       t.close_notify ? "yes" : "no");
	printf(" sent-sha256 %s resumed %s\n", digest_hex(t.sent_md, hex),
	       SSL_session_reused(ssl) ? "yes" : "no");
	if (o.sess_out && !session_save())
		why = "no session saved";
	EVP_MD_CTX_free(t.md);
	EVP_MD_CTX_free(t.sent_md);
	SSL_free(ssl);
	SSL_SESSION_free(last_session);
	close(fd);
	SSL_CTX_free(ctx);
	return why ? 1 : 0;
refused:
	printf("refused %s\n", why);
	EVP_MD_CTX_free(t.md);
	EVP_MD_CTX_free(t.sent_md);
	SSL_free(ssl);
	if (fd >= 0)
		close(fd);
	SSL_CTX_free(ctx);
	return 1;
}
