// SPDX-License-Identifier: GPL-2.0
/*
 * tlsrec: the mTLS suites' look at a capture (pcap, Ethernet, IPv4). Each
 * TCP direction to or from PORT is put back in order and cut into TLS
 * records.
 *
 *   tlsrec PCAP PORT MARKER
 *
 * prints "marker M records N appdata N appbytes N handshake N ccs N alert N
 * bad N gaps N streams N": M is 1 when MARKER's bytes are anywhere in the
 * file; bad counts what is not a TLS record stream (plaintext), or a
 * handshake record after application data; gaps counts directions not
 * seen whole (their start, or a segment, missing). A C program so that it
 * runs in the kernel lab's image, which has no Python.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DIRS 64
#define MAX_SEGS 65536

struct seg {
	uint32_t seq;
	const uint8_t *data;
	uint32_t len;
};

struct dir {
	uint16_t sport, dport;
	bool to_port;		/* client to server */
	bool have_isn;
	uint32_t isn;		/* the first byte's sequence number */
	struct seg *segs;
	size_t nseg, cap;
};

static struct dir dirs[MAX_DIRS];
static size_t ndirs;

struct counts {
	long marker, records, appdata, appbytes, handshake, ccs, alert, bad,
	     gaps, streams;
};

static uint32_t rd32(const uint8_t *p, bool le)
{
	return le ? p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24 :
		    (uint32_t)p[0] << 24 | p[1] << 16 | p[2] << 8 | p[3];
}

static uint16_t be16(const uint8_t *p)
{
	return p[0] << 8 | p[1];
}

static struct dir *dir_of(bool to_port, uint16_t sport, uint16_t dport)
{
	for (size_t i = 0; i < ndirs; i++)
		if (dirs[i].to_port == to_port && dirs[i].sport == sport &&
		    dirs[i].dport == dport)
			return &dirs[i];
	if (ndirs == MAX_DIRS)
		return NULL;
	dirs[ndirs] = (struct dir){ .to_port = to_port, .sport = sport,
				    .dport = dport };
	return &dirs[ndirs++];
}

static int add_seg(struct dir *d, uint32_t seq, const uint8_t *p, uint32_t len)
{
	if (d->nseg == d->cap) {
		size_t cap = d->cap ? 2 * d->cap : 64;
		struct seg *s;

		if (cap > MAX_SEGS || !(s = realloc(d->segs, cap * sizeof(*s))))
			return -1;
		d->segs = s;
		d->cap = cap;
	}
	d->segs[d->nseg++] = (struct seg){ seq, p, len };
	return 0;
}

/* Sorted by their distance from the direction's first byte. */
static uint32_t sort_isn;

static int seg_cmp(const void *a, const void *b)
{
	uint32_t x = ((const struct seg *)a)->seq - sort_isn;
	uint32_t y = ((const struct seg *)b)->seq - sort_isn;

	return x < y ? -1 : x > y;
}

/* One direction's bytes in order; NULL with a gap counted when a part of
 * it is missing. */
static uint8_t *stream_of(struct dir *d, size_t *len, struct counts *c)
{
	uint8_t *out = NULL;
	size_t n = 0;
	uint32_t next = d->isn;

	sort_isn = d->isn;
	qsort(d->segs, d->nseg, sizeof(*d->segs), seg_cmp);
	for (size_t i = 0; i < d->nseg; i++) {
		const struct seg *s = &d->segs[i];
		uint32_t rel = s->seq - next, skip = 0;

		if (rel > 0x7fffffff) {		/* a retransmission */
			skip = next - s->seq;
			if (skip >= s->len)
				continue;
			rel = 0;
		}
		if (rel) {
			c->gaps++;
			break;
		}
		out = realloc(out, n + s->len - skip + 1);
		if (!out)
			exit(1);
		memcpy(out + n, s->data + skip, s->len - skip);
		n += s->len - skip;
		next += s->len - skip;
	}
	*len = n;
	return out;
}

static void records(const uint8_t *s, size_t len, struct counts *c)
{
	size_t i = 0;
	bool after_hs = false;

	while (i + 5 <= len) {
		uint8_t type = s[i];
		uint16_t ver = be16(s + i + 1), n = be16(s + i + 3);

		if ((ver != 0x0301 && ver != 0x0303) || n > 16384 + 256) {
			c->bad++;
			break;
		}
		c->records++;
		switch (type) {
		case 0x17:
			c->appdata++;
			c->appbytes += n;
			after_hs = true;
			break;
		case 0x16:
			c->handshake++;
			if (after_hs)	/* plaintext handshake after encryption */
				c->bad++;
			break;
		case 0x14:
			c->ccs++;
			break;
		case 0x15:
			c->alert++;	/* a plaintext alert */
			break;
		default:
			c->bad++;
		}
		i += 5 + (size_t)n;
	}
	if (i != len)
		c->bad++;
}

int main(int argc, char **argv)
{
	struct counts c = { 0 };
	uint8_t *raw;
	size_t len, off = 24;
	long port;
	bool le;
	FILE *f;

	if (argc != 4) {
		fprintf(stderr, "usage: tlsrec PCAP PORT MARKER\n");
		return 2;
	}
	port = strtol(argv[2], NULL, 10);
	f = fopen(argv[1], "rb");
	if (!f || fseek(f, 0, SEEK_END) || (long)(len = ftell(f)) < 0) {
		perror(argv[1]);
		return 1;
	}
	rewind(f);
	raw = malloc(len + 1);
	if (!raw || fread(raw, 1, len, f) != len || len < 24) {
		fprintf(stderr, "tlsrec: %s: not a pcap file\n", argv[1]);
		return 1;
	}
	fclose(f);
	le = raw[0] == 0xd4 || raw[0] == 0x4d;	/* a1b2c3d4 / a1b23c4d */
	if (memmem(raw, len, argv[3], strlen(argv[3])))
		c.marker = 1;
	while (rd32(raw + 20, le) == 1 && off + 16 <= len) {	/* Ethernet */
		uint32_t incl = rd32(raw + off + 8, le);
		const uint8_t *pkt = raw + off + 16, *ip, *tcp;
		size_t ihl, tot, doff;
		uint16_t sp, dp;
		struct dir *d;

		off += 16 + (size_t)incl;
		if (off > len)
			break;
		if (incl < 34 || be16(pkt + 12) != 0x0800)
			continue;
		ip = pkt + 14;
		ihl = (ip[0] & 15) * 4;
		tot = be16(ip + 2);
		if (ip[9] != 6 || tot > incl - 14 || ihl + 20 > tot)
			continue;
		tcp = ip + ihl;
		sp = be16(tcp);
		dp = be16(tcp + 2);
		doff = (tcp[12] >> 4) * 4;
		if ((dp != port && sp != port) || ihl + doff > tot)
			continue;
		d = dir_of(dp == port, sp, dp);
		if (!d)
			continue;
		if (tcp[13] & 2) {			/* SYN */
			d->have_isn = true;
			d->isn = rd32(tcp + 4, false) + 1;
		}
		if (tot > ihl + doff &&
		    add_seg(d, rd32(tcp + 4, false), tcp + doff,
			    tot - ihl - doff)) {
			fprintf(stderr, "tlsrec: too many segments\n");
			return 1;
		}
	}
	for (size_t i = 0; i < ndirs; i++) {
		uint8_t *s;
		size_t n;

		if (!dirs[i].have_isn) {
			c.gaps++;
			continue;
		}
		c.streams++;
		s = stream_of(&dirs[i], &n, &c);
		records(s, n, &c);
		free(s);
	}
	printf("marker %ld records %ld appdata %ld appbytes %ld handshake %ld ccs %ld alert %ld bad %ld gaps %ld streams %ld\n",
	       c.marker, c.records, c.appdata, c.appbytes, c.handshake, c.ccs,
	       c.alert, c.bad, c.gaps, c.streams);
	return 0;
}
