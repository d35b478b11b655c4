/* SPDX-License-Identifier: GPL-2.0 */
/*
 * useq: a UDP flow at a fixed rate whose datagrams carry sequence numbers,
 * and its receiver, which counts every number missing or seen twice. The
 * upgrade test runs it across `node upgrade`. libc only.
 *
 *   useq send DST PORT RATE COUNT [SRC]
 *                                      RATE datagrams/s, COUNT in all;
 *                                      prints "sent N". SRC: bound
 *                                      transparently (an address of
 *                                      another pod: an injector's flow)
 *   useq recv PORT COUNT IDLE_MS [FIRST_MS]
 *                                      until COUNT numbers are seen or
 *                                      nothing came for IDLE_MS (for the
 *                                      first datagram: FIRST_MS, which is
 *                                      IDLE_MS unless given); prints
 *                                      "received N missing M duplicated D
 *                                      max_gap_ms G" (G: the longest time
 *                                      between two datagrams)
 *
 * The sender paces itself by the clock, in batches, so the rate holds
 * whatever the scheduler does; a send that the kernel refuses (ENOBUFS)
 * is retried, so a number the receiver misses was lost on the way.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static int do_send(const char *dst, int port, uint64_t rate, uint64_t count,
		   const char *src)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(port) };
	struct sockaddr_in from = { .sin_family = AF_INET };
	uint64_t start, seq = 0;
	char buf[64] = {};
	int fd, one = 1;

	if (inet_pton(AF_INET, dst, &sa.sin_addr) != 1 || !rate ||
	    (src && inet_pton(AF_INET, src, &from.sin_addr) != 1))
		return 2;
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd >= 0 && src &&
	    (setsockopt(fd, SOL_IP, IP_TRANSPARENT, &one, sizeof(one)) ||
	     setsockopt(fd, SOL_IP, IP_FREEBIND, &one, sizeof(one)) ||
	     bind(fd, (struct sockaddr *)&from, sizeof(from)))) {
		perror("useq send: bind");
		return 1;
	}
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		perror("useq send");
		return 1;
	}
	start = now_ns();
	while (seq < count) {
		/* How many should be out by now. */
		uint64_t due = (now_ns() - start) * rate / 1000000000ULL + 1;

		if (due > count)
			due = count;
		while (seq < due) {
			memcpy(buf, &seq, sizeof(seq));
			if (send(fd, buf, sizeof(buf), 0) < 0) {
				if (errno == ENOBUFS || errno == EAGAIN ||
				    errno == EINTR) {
					usleep(50);
					continue;
				}
				/* ECONNREFUSED: an ICMP error from a
				 * datagram before; that one counts as lost. */
				if (errno != ECONNREFUSED) {
					perror("useq send");
					return 1;
				}
			}
			seq++;
		}
		usleep(200);
	}
	printf("sent %llu\n", (unsigned long long)seq);
	return 0;
}

static void recv_timeout(int fd, int ms)
{
	struct timeval tv = { .tv_sec = ms / 1000,
			      .tv_usec = (ms % 1000) * 1000 };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

/* first_ms: the senders start after every receiver listens, and in an
 * emulated guest sharing its CPUs that took longer than an idle bound of
 * 3 s (every receiver of t_upgrade_netkit gave up before its flow began:
 * "missing 125000"); a receiver that expects nothing keeps the short one. */
static int do_recv(int port, uint64_t count, int idle_ms, int first_ms)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(port) };
	uint64_t received = 0, dup = 0, seen_cnt = 0, missing = 0;
	uint64_t last = 0, gap = 0;
	uint8_t *seen;
	char buf[64];
	int fd, rcvbuf = 8 << 20;

	seen = calloc(count, 1);
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (!seen || fd < 0) {
		perror("useq recv");
		return 1;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf));
	recv_timeout(fd, first_ms);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		perror("useq recv: bind");
		return 1;
	}
	while (seen_cnt < count) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		uint64_t seq, t;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;		/* idle for IDLE_MS: the flow is over */
		if (n < (ssize_t)sizeof(seq))
			continue;
		t = now_ns();
		if (!last)
			recv_timeout(fd, idle_ms);
		if (last && t - last > gap)
			gap = t - last;
		last = t;
		received++;
		memcpy(&seq, buf, sizeof(seq));
		if (seq >= count)
			continue;
		if (seen[seq]) {
			dup++;
			continue;
		}
		seen[seq] = 1;
		seen_cnt++;
	}
	for (uint64_t i = 0; i < count; i++)
		missing += !seen[i];
	printf("received %llu missing %llu duplicated %llu max_gap_ms %llu\n",
	       (unsigned long long)received, (unsigned long long)missing,
	       (unsigned long long)dup, (unsigned long long)(gap / 1000000));
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if ((argc == 6 || argc == 7) && !strcmp(argv[1], "send"))
		return do_send(argv[2], atoi(argv[3]), strtoull(argv[4], NULL, 10),
			       strtoull(argv[5], NULL, 10),
			       argc == 7 ? argv[6] : NULL);
	if ((argc == 5 || argc == 6) && !strcmp(argv[1], "recv"))
		return do_recv(atoi(argv[2]), strtoull(argv[3], NULL, 10),
			       atoi(argv[4]), atoi(argv[argc == 6 ? 5 : 4]));
	fprintf(stderr, "usage: useq send DST PORT RATE COUNT [SRC]\n"
			"       useq recv PORT COUNT IDLE_MS [FIRST_MS]\n");
	return 2;
}
