/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pktload: the bench's small-packet load generator and meter.
 *
 *   pktload send -n NETNS --dst A.B.C.D --port P --duration SEC
 *                [--mode udp|packet] [--bind SRC] [--payload BYTES]
 *                [--dev DEV --dmac MAC] [--count N [--pps R]]
 *       udp:    a connected UDP socket, sendmmsg() batches of 64; with
 *               --bind the source may be an address the namespace does not
 *               own (IP_TRANSPARENT + IP_FREEBIND): how an injector speaks
 *               for another pod.
 *       packet: AF_PACKET with PACKET_QDISC_BYPASS on DEV, whole frames
 *               (source --bind, source MAC of DEV, destination MAC --dmac)
 *               handed to the driver with sendmmsg(); no socket layer, so
 *               the sender spends less of the CPU the path under test
 *               needs.
 *       --count: stop once N have been sent (--duration is then the time
 *       allowed, 600 s unless given); --pps: at most R a second, in
 *       batches, so that a path is not pushed past what it takes (an
 *       exact count through it, not a rate).
 *       Prints {"sent":N,"errors":E,"seconds":T,"pps":R}.
 *   pktload meter -n NETNS --warmup SEC --window SEC COUNTER...
 *       Waits --warmup, then reads every COUNTER at the start and the end of
 *       --window seconds. COUNTER is NAME=SPEC with SPEC one of
 *         dev:IFNAME        rx_packets of IFNAME (/proc/net/dev of NETNS)
 *         txdrop:IFNAME     tx_drop of IFNAME (e.g. a full veth XDP ring)
 *         snmp:Udp:FIELD    a /proc/net/snmp field of NETNS (e.g. NoPorts)
 *         map:PIN           a pinned per-CPU u64 array, key 0, summed
 *         sock:PORT         datagrams a UDP socket on PORT receives
 *       Prints {"window":T,"NAME":rate_per_second,...}.
 *
 *   pktload accept -n NETNS --port P --duration SEC
 *       A TCP server that accepts and closes at once, for --duration.
 *   pktload connrate -n NETNS --dst IP --port P --duration SEC [--windows N]
 *       New TCP connections, one after the other: connect, wait for the
 *       server's close, close, for N windows of --duration back to back
 *       (1). Prints {"conns":N,"failed":F,"seconds":T,"cps":R,
 *       "syn_retrans":S,"windows":[{"conns":..,"failed":..,"cps":..,
 *       "syn_retrans":..},...]}: the totals, then each window's, so that
 *       a rate that falls once a table fills up shows. syn_retrans: SYNs
 *       the namespace sent again (TcpExt TCPSynRetrans), each costs a
 *       second. The client closes second, so it keeps no TIME_WAIT.
 *
 * 64-byte packets: the default payload of 18 bytes makes a 60-byte frame,
 * 64 bytes with the FCS a real wire would add.
 */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#ifndef IP_FREEBIND
#define IP_FREEBIND		15
#endif
#ifndef IP_TRANSPARENT
#define IP_TRANSPARENT		19
#endif
#ifndef PACKET_QDISC_BYPASS
#define PACKET_QDISC_BYPASS	20
#endif

#define BATCH		64
#define MAX_COUNTERS	8

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int usage(void)
{
	fprintf(stderr,
		"usage: pktload send -n NETNS --dst IP --port P --duration SEC\n"
		"                    [--mode udp|packet] [--bind SRC] [--payload N]\n"
		"                    [--dev DEV --dmac MAC] [--count N [--pps R]]\n"
		"       pktload meter -n NETNS --warmup SEC --window SEC NAME=SPEC...\n"
		"       pktload accept -n NETNS --port P --duration SEC\n"
		"       pktload connrate -n NETNS --dst IP --port P --duration SEC [--windows N]\n");
	return 2;
}

static int enter_netns(const char *name)
{
	char path[256];
	int fd;

	if (!name)
		return 0;
	snprintf(path, sizeof(path), "/run/netns/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET)) {
		fprintf(stderr, "error: cannot enter netns %s: %s\n", name,
			strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

static uint16_t ip_csum(const void *hdr, int len)
{
	const uint16_t *p = hdr;
	uint32_t sum = 0;

	for (; len > 1; len -= 2)
		sum += *p++;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return ~sum;
}

struct send_opts {
	const char *netns, *dst, *bind, *mode, *dev, *dmac;
	int port, payload;
	double duration;
	unsigned long long count;	/* 0: as many as --duration allows */
	double pps;			/* 0: as fast as it goes */
};

static int open_udp(const struct send_opts *o)
{
	struct sockaddr_in src = { .sin_family = AF_INET };
	struct sockaddr_in dst = { .sin_family = AF_INET,
				   .sin_port = htons(o->port) };
	int one = 1, fd = socket(AF_INET, SOCK_DGRAM, 0);

	if (fd < 0)
		return -1;
	if (inet_pton(AF_INET, o->dst, &dst.sin_addr) != 1)
		return -1;
	if (o->bind) {
		setsockopt(fd, SOL_IP, IP_TRANSPARENT, &one, sizeof(one));
		setsockopt(fd, SOL_IP, IP_FREEBIND, &one, sizeof(one));
		if (inet_pton(AF_INET, o->bind, &src.sin_addr) != 1 ||
		    bind(fd, (void *)&src, sizeof(src)))
			return -1;
	}
	if (connect(fd, (void *)&dst, sizeof(dst)))
		return -1;
	return fd;
}

/* A raw socket on DEV bypassing the qdisc layer, and the one frame it
 * sends over and over. */
static int open_packet(const struct send_opts *o, uint8_t *frame, int *len)
{
	struct sockaddr_ll ll = { .sll_family = AF_PACKET };
	struct ethhdr *eth = (void *)frame;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp = (void *)(ip + 1);
	unsigned int m[6];
	struct ifreq ifr = {};
	int one = 1, fd;

	if (!o->dev || !o->dmac || !o->bind ||
	    sscanf(o->dmac, "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3],
		   &m[4], &m[5]) != 6) {
		fprintf(stderr, "error: packet mode needs --dev, --dmac, --bind\n");
		return -1;
	}
	fd = socket(AF_PACKET, SOCK_RAW, 0);
	if (fd < 0)
		return -1;
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", o->dev);
	if (ioctl(fd, SIOCGIFHWADDR, &ifr))
		return -1;
	ll.sll_ifindex = if_nametoindex(o->dev);
	ll.sll_protocol = 0;
	if (!ll.sll_ifindex || bind(fd, (void *)&ll, sizeof(ll)))
		return -1;
	setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one));

	memset(frame, 0, 2048);
	for (int i = 0; i < 6; i++)
		eth->h_dest[i] = m[i];
	memcpy(eth->h_source, ifr.ifr_hwaddr.sa_data, 6);
	eth->h_proto = htons(ETH_P_IP);
	ip->version = 4;
	ip->ihl = 5;
	ip->ttl = 64;
	ip->protocol = IPPROTO_UDP;
	ip->tot_len = htons(sizeof(*ip) + sizeof(*udp) + o->payload);
	if (inet_pton(AF_INET, o->bind, &ip->saddr) != 1 ||
	    inet_pton(AF_INET, o->dst, &ip->daddr) != 1)
		return -1;
	ip->check = ip_csum(ip, sizeof(*ip));
	udp->source = htons(40000);
	udp->dest = htons(o->port);
	udp->len = htons(sizeof(*udp) + o->payload);
	*len = sizeof(*eth) + sizeof(*ip) + sizeof(*udp) + o->payload;
	return fd;
}

static int cmd_send(struct send_opts *o)
{
	static uint8_t frame[2048];
	struct mmsghdr msgs[BATCH];
	struct iovec iov;
	unsigned long long sent = 0, errors = 0;
	double t0, t, end;
	int fd, len = o->payload;

	if (enter_netns(o->netns))
		return 1;
	if (!strcmp(o->mode, "packet"))
		fd = open_packet(o, frame, &len);
	else
		fd = open_udp(o);
	if (fd < 0) {
		fprintf(stderr, "error: cannot open %s sender: %s\n", o->mode,
			strerror(errno));
		return 1;
	}
	iov.iov_base = frame;
	iov.iov_len = len;
	memset(msgs, 0, sizeof(msgs));
	for (int i = 0; i < BATCH; i++) {
		msgs[i].msg_hdr.msg_iov = &iov;
		msgs[i].msg_hdr.msg_iovlen = 1;
	}
	t0 = now();
	end = t0 + o->duration;
	do {
		unsigned int batch = BATCH;
		int n;

		if (o->count && o->count - sent < batch)
			batch = o->count - sent;
		n = sendmmsg(fd, msgs, batch, 0);
		if (n > 0)
			sent += n;
		else
			errors++;	/* e.g. ECONNREFUSED from an ICMP error */
		t = now();
		/* paced: wait until the time the sent ones were due by */
		if (o->pps > 0 && t0 + sent / o->pps > t) {
			double w = t0 + sent / o->pps - t;

			usleep((useconds_t)(w * 1e6));
			t = now();
		}
	} while (t < end && (!o->count || sent < o->count));
	printf("{\"sent\":%llu,\"errors\":%llu,\"seconds\":%.6f,\"pps\":%.0f}\n",
	       sent, errors, t - t0, sent / (t - t0));
	close(fd);
	return 0;
}

enum counter_kind { C_DEV, C_TXDROP, C_SNMP, C_MAP, C_SOCK };

struct counter {
	const char *name;
	enum counter_kind kind;
	char arg[256], field[64];
	int fd;
	unsigned long long sock_count;
	unsigned long long v0, v1;
};

static unsigned long long read_dev(const char *ifname, int column)
{
	char line[512], *p;
	unsigned long long v[16] = {};
	FILE *f = fopen("/proc/self/net/dev", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		p = strchr(line, ':');
		if (!p)
			continue;
		*p = 0;
		if (strcmp(line + strspn(line, " "), ifname))
			continue;
		/* rx: bytes packets errs drop fifo frame compressed multicast
		 * tx: bytes packets errs drop ... */
		sscanf(p + 1, "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu",
		       &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7],
		       &v[8], &v[9], &v[10], &v[11]);
		break;
	}
	fclose(f);
	return v[column];
}

/* A field of /proc/self/net/snmp (or netstat: the same layout, a line of
 * names and a line of values per protocol) */
static unsigned long long read_proto_stat(const char *file, const char *proto,
					  const char *field)
{
	char names[4096], values[4096], *ns, *vs, *n, *v;
	unsigned long long out = 0;
	FILE *f = fopen(file, "r");
	size_t plen = strlen(proto);

	if (!f)
		return 0;
	while (fgets(names, sizeof(names), f) &&
	       fgets(values, sizeof(values), f)) {
		if (strncmp(names, proto, plen) || names[plen] != ':')
			continue;
		n = strtok_r(names + plen + 1, " \n", &ns);
		v = strtok_r(values + plen + 1, " \n", &vs);
		while (n && v) {
			if (!strcmp(n, field)) {
				out = strtoull(v, NULL, 10);
				break;
			}
			n = strtok_r(NULL, " \n", &ns);
			v = strtok_r(NULL, " \n", &vs);
		}
		break;
	}
	fclose(f);
	return out;
}

static unsigned long long read_map(int fd)
{
	int ncpu = libbpf_num_possible_cpus();
	unsigned long long v[ncpu > 0 ? ncpu : 1], sum = 0;
	uint32_t zero = 0;

	if (bpf_map_lookup_elem(fd, &zero, v))
		return 0;
	for (int c = 0; c < ncpu; c++)
		sum += v[c];
	return sum;
}

static unsigned long long read_counter(struct counter *c)
{
	switch (c->kind) {
	case C_DEV: return read_dev(c->arg, 1);
	case C_TXDROP: return read_dev(c->arg, 11);
	case C_SNMP: return read_proto_stat("/proc/self/net/snmp", c->arg,
					    c->field);
	case C_MAP: return read_map(c->fd);
	case C_SOCK: return c->sock_count;
	}
	return 0;
}

static int parse_counter(char *s, struct counter *c)
{
	char *eq = strchr(s, '='), *spec;

	if (!eq)
		return -1;
	*eq = 0;
	c->name = s;
	spec = eq + 1;
	c->fd = -1;
	if (!strncmp(spec, "dev:", 4)) {
		c->kind = C_DEV;
		snprintf(c->arg, sizeof(c->arg), "%s", spec + 4);
	} else if (!strncmp(spec, "txdrop:", 7)) {
		c->kind = C_TXDROP;
		snprintf(c->arg, sizeof(c->arg), "%s", spec + 7);
	} else if (!strncmp(spec, "snmp:", 5)) {
		char *colon = strchr(spec + 5, ':');

		if (!colon)
			return -1;
		*colon = 0;
		c->kind = C_SNMP;
		snprintf(c->arg, sizeof(c->arg), "%s", spec + 5);
		snprintf(c->field, sizeof(c->field), "%s", colon + 1);
	} else if (!strncmp(spec, "map:", 4)) {
		c->kind = C_MAP;
		c->fd = bpf_obj_get(spec + 4);
		if (c->fd < 0) {
			fprintf(stderr, "error: cannot open %s: %s\n", spec + 4,
				strerror(errno));
			return -1;
		}
	} else if (!strncmp(spec, "sock:", 5)) {
		c->kind = C_SOCK;
		snprintf(c->arg, sizeof(c->arg), "%s", spec + 5);
	} else {
		return -1;
	}
	return 0;
}

static int open_sink(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(port) };
	int buf = 8 << 20, fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf));
	if (bind(fd, (void *)&a, sizeof(a)))
		return -1;
	return fd;
}

/* Drains the sink sockets until `until`; counts only when `counting`. */
static void drain(struct counter *cs, int n, double until, bool counting)
{
	static char bufs[BATCH][64];
	struct mmsghdr msgs[BATCH];
	struct iovec iovs[BATCH];
	struct pollfd pfds[MAX_COUNTERS];
	int np = 0;

	for (int i = 0; i < BATCH; i++) {
		iovs[i].iov_base = bufs[i];
		iovs[i].iov_len = sizeof(bufs[i]);
		memset(&msgs[i], 0, sizeof(msgs[i]));
		msgs[i].msg_hdr.msg_iov = &iovs[i];
		msgs[i].msg_hdr.msg_iovlen = 1;
	}
	for (int i = 0; i < n; i++)
		if (cs[i].kind == C_SOCK)
			pfds[np++] = (struct pollfd){ .fd = cs[i].fd,
						      .events = POLLIN };
	for (double t = now(); t < until; t = now()) {
		int left = (int)((until - t) * 1000) + 1;

		if (!np) {
			usleep(left > 50 ? 50000 : left * 1000);
			continue;
		}
		if (poll(pfds, np, left > 50 ? 50 : left) <= 0)
			continue;
		for (int i = 0; i < n; i++) {
			int got;

			if (cs[i].kind != C_SOCK)
				continue;
			while ((got = recvmmsg(cs[i].fd, msgs, BATCH, 0,
					       NULL)) > 0)
				if (counting)
					cs[i].sock_count += got;
		}
	}
}

static int cmd_meter(const char *netns, double warmup, double window,
		     char **specs, int nspecs)
{
	struct counter cs[MAX_COUNTERS] = {};
	double t0, t1;

	if (nspecs < 1 || nspecs > MAX_COUNTERS)
		return usage();
	/* pinned maps first: the path is the same in every netns, but let
	 * nothing depend on that */
	for (int i = 0; i < nspecs; i++)
		if (parse_counter(specs[i], &cs[i]))
			return usage();
	if (enter_netns(netns))
		return 1;
	for (int i = 0; i < nspecs; i++) {
		if (cs[i].kind != C_SOCK)
			continue;
		cs[i].fd = open_sink(atoi(cs[i].arg));
		if (cs[i].fd < 0) {
			fprintf(stderr, "error: cannot open sink on %s: %s\n",
				cs[i].arg, strerror(errno));
			return 1;
		}
	}
	drain(cs, nspecs, now() + warmup, false);
	t0 = now();
	for (int i = 0; i < nspecs; i++)
		cs[i].v0 = read_counter(&cs[i]);
	drain(cs, nspecs, t0 + window, true);
	for (int i = 0; i < nspecs; i++)
		cs[i].v1 = read_counter(&cs[i]);
	t1 = now();
	printf("{\"window\":%.6f", t1 - t0);
	for (int i = 0; i < nspecs; i++)
		printf(",\"%s\":%.0f", cs[i].name,
		       (cs[i].v1 - cs[i].v0) / (t1 - t0));
	printf("}\n");
	return 0;
}

static int cmd_accept(const char *netns, int port, double duration)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(port) };
	int one = 1, fd;
	double end;

	if (enter_netns(netns))
		return 1;
	fd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0 || bind(fd, (void *)&a, sizeof(a)) || listen(fd, 4096)) {
		fprintf(stderr, "error: cannot listen on %d: %s\n", port,
			strerror(errno));
		return 1;
	}
	end = now() + duration;
	while (now() < end) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int c;

		if (poll(&p, 1, 100) <= 0)
			continue;
		c = accept(fd, NULL, NULL);
		if (c >= 0)
			close(c);
	}
	return 0;
}

static unsigned long long syn_retrans(void)
{
	return read_proto_stat("/proc/self/net/netstat", "TcpExt",
			       "TCPSynRetrans");
}

#define MAX_WINDOWS	64

static int cmd_connrate(const char *netns, const char *dst, int port,
			double duration, int nwin)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(port) };
	struct timeval tv = { .tv_sec = 1 };
	struct { unsigned long long conns, failed, retr; double secs; }
		w[MAX_WINDOWS] = {}, all = {};
	unsigned long long r0;
	double t0, tw, t;
	char buf[64];

	if (nwin < 1 || nwin > MAX_WINDOWS)
		return usage();
	if (enter_netns(netns) || inet_pton(AF_INET, dst, &a.sin_addr) != 1)
		return 1;
	t0 = now();
	for (int i = 0; i < nwin; i++) {
		r0 = syn_retrans();
		tw = t = now();
		do {
			int fd = socket(AF_INET, SOCK_STREAM, 0);

			setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
			setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
			if (!connect(fd, (void *)&a, sizeof(a)) &&
			    read(fd, buf, sizeof(buf)) == 0)
				w[i].conns++;
			else
				w[i].failed++;
			close(fd);
			t = now();
		} while (t < tw + duration);
		w[i].secs = t - tw;
		w[i].retr = syn_retrans() - r0;
		all.conns += w[i].conns;
		all.failed += w[i].failed;
		all.retr += w[i].retr;
	}
	all.secs = t - t0;
	printf("{\"conns\":%llu,\"failed\":%llu,\"seconds\":%.6f,\"cps\":%.0f,"
	       "\"syn_retrans\":%llu,\"windows\":[", all.conns, all.failed,
	       all.secs, all.conns / all.secs, all.retr);
	for (int i = 0; i < nwin; i++)
		printf("%s{\"conns\":%llu,\"failed\":%llu,\"seconds\":%.6f,"
		       "\"cps\":%.0f,\"syn_retrans\":%llu}", i ? "," : "",
		       w[i].conns, w[i].failed, w[i].secs,
		       w[i].conns / w[i].secs, w[i].retr);
	printf("]}\n");
	return 0;
}

int main(int argc, char **argv)
{
	struct send_opts so = { .mode = "udp", .payload = 18, .port = 9 };
	const char *netns = NULL;
	double warmup = 0.5, window = 1;
	int windows = 1;
	char *specs[MAX_COUNTERS];
	int nspecs = 0;
	bool send, meter;

	if (argc < 2)
		return usage();
	send = !strcmp(argv[1], "send");
	meter = !strcmp(argv[1], "meter");
	if (!send && !meter && strcmp(argv[1], "accept") &&
	    strcmp(argv[1], "connrate"))
		return usage();
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (a[0] != '-') {
			if (!meter || nspecs == MAX_COUNTERS)
				return usage();
			specs[nspecs++] = argv[i];
			continue;
		}
		if (!v)
			return usage();
		i++;
		if (!strcmp(a, "-n"))
			netns = v;
		else if (!strcmp(a, "--dst"))
			so.dst = v;
		else if (!strcmp(a, "--port"))
			so.port = atoi(v);
		else if (!strcmp(a, "--duration"))
			so.duration = atof(v);
		else if (!strcmp(a, "--count"))
			so.count = strtoull(v, NULL, 10);
		else if (!strcmp(a, "--pps"))
			so.pps = atof(v);
		else if (!strcmp(a, "--mode"))
			so.mode = v;
		else if (!strcmp(a, "--bind"))
			so.bind = v;
		else if (!strcmp(a, "--payload"))
			so.payload = atoi(v);
		else if (!strcmp(a, "--dev"))
			so.dev = v;
		else if (!strcmp(a, "--dmac"))
			so.dmac = v;
		else if (!strcmp(a, "--warmup"))
			warmup = atof(v);
		else if (!strcmp(a, "--window"))
			window = atof(v);
		else if (!strcmp(a, "--windows"))
			windows = atoi(v);
		else
			return usage();
	}
	if (send) {
		so.netns = netns;
		if (so.count && so.duration <= 0)
			so.duration = 600;
		if (!so.dst || so.duration <= 0 || so.payload < 0 || so.pps < 0 ||
		    so.payload > 1400)
			return usage();
		return cmd_send(&so);
	}
	if (!strcmp(argv[1], "accept"))
		return cmd_accept(netns, so.port, so.duration);
	if (!strcmp(argv[1], "connrate"))
		return so.dst ? cmd_connrate(netns, so.dst, so.port, so.duration,
					     windows) : usage();
	return cmd_meter(netns, warmup, window, specs, nspecs);
}
