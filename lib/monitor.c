/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The live event monitor (bpf/lib/monitor.h): reads the node's ring
 * buffers, and tells the datapath which kinds of events to write.
 *
 * The datapath writes a kind only while some monitor wants it. What the
 * running monitors want is kept as one file per monitor under
 * MONITOR_RUN_DIR/<node's pin directory name>/, named by its PID, holding
 * its kinds and flock()ed by it for its whole life: a monitor that was
 * killed leaves a file nobody holds, which the reader (below) removes
 * within a second, or the next monitor to start or stop. Each start and
 * stop (under a lock of that directory) writes the union of the live
 * monitors' kinds to monitor_config, so the datapath stops paying for
 * events once the last monitor is gone; the reader writes it again each
 * second with a lease (MON_LEASE_S): when the last monitor is killed
 * outright, or the reader is stopped, the datapath stops writing when
 * the lease runs out, and counts each event it did not write as lost.
 *
 * A node's ring buffers have one read position, so one process reads
 * them, the *reader*: whichever monitor holds READER_LOCK in the run
 * directory. A thread of its own (reader_main) drains the rings as events
 * come and passes each batch, as read, to every monitor of the node over
 * a SOCK_SEQPACKET stream: its own monitor through a socket pair, the
 * others (other `monitor`s, a `probe --trace`) through READER_SOCKET,
 * which they connect to. Each monitor filters what it is given by its own
 * kinds and pods. A monitor that does not keep up loses batches, never the
 * others' events: the reader never waits for a monitor; the batches it
 * could not pass on are counted by the monitor as lost (the stream's
 * positions have a gap). When the reader stops, the monitors it served
 * see the stream end; one of them takes READER_LOCK and reads on from
 * where the rings were left (a ring keeps what nobody took), the others
 * connect to it. The new reader waits a moment for as many monitors as
 * hold a file before it takes anything from the rings, so a hand-over
 * loses nothing unless a reader is killed while passing a batch on.
 *
 * The node is not held open while the monitor runs (a reader's shared
 * lock would keep every CNI ADD waiting): it opens the ring buffers and
 * the configuration by their pins, and reads the pods' names again, under
 * a short lock, when an event names a pod it does not know.
 */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "internal.h"
#include "lib.h"
#include "state.h"

#define MONITOR_RUN_DIR		PI_RUN_DIR "/monitor"
#define INJECT_SUBDIR		"inject"
#define PAUSED			" paused"
/* dot names: live_others() passes them over */
#define READER_LOCK		".reader"
#define READER_SOCKET		".socket"
/* the pods' names are read again at most this often: when an event names
 * a pod the cache does not know, or the cache is older than this */
#define POD_REFRESH_NS		(1000ull * 1000 * 1000)
/* events per message of the stream: 20 KiB */
#define BATCH_MAX		256
/* Events a reader takes from one ring before it looks at its sockets
 * again; messages a monitor takes from its stream before it returns to
 * its caller (a signal, a duration, a count): bounded under a flood. */
#define ROUND_MAX		(16 * BATCH_MAX)
#define STREAM_ROUND_MAX	8
/* what a monitor's socket may hold before the reader's batches for it
 * are lost (the kernel doubles it: 8 MiB, about 100 000 events in full
 * batches): a `probe --trace` reads only after its probes ran, and a
 * monitor's terminal may be paused */
#define STREAM_BUF		(4 << 20)
#define MAX_SUBS		64
/* a new reader waits this long for the monitors it should serve */
#define HANDOVER_WAIT_MS	1000
/* how long a monitor keeps trying to reach a reader that just changed */
#define ATTACH_WAIT_MS		3000
/* The kinds hold for MON_LEASE_S after they were last written by the
 * reader (pi_dp_monitor_config.lease_s), which writes them again every
 * MON_RENEW_NS while it runs: a reader killed outright with no monitor
 * left to take over, or stopped, leaves the datapath paying for events
 * nobody reads only until the lease runs out. */
#define MON_LEASE_S		5
#define MON_RENEW_NS		(1000ull * 1000 * 1000)

/* The stream's version, in HELLO: a monitor of another build may be the
 * reader (the package upgraded under a running monitor). 1: the first
 * readers' (2026-12-07), which said 0; 2: HELLO's seq is where the
 * stream starts among every event the node's readers took. A monitor
 * takes either (their messages are the same). */
#define MON_STREAM_VERSION	2
/* READER_LOCK's file: the reader's pid as text, then at READER_POS_OFF
 * how many events the node's readers took from the rings, one after
 * the other (the reader keeps it mapped and counts each event as it
 * takes it, so that a reader killed outright leaves it right): a
 * monitor served by a reader that ended knows how many it did not get,
 * from where the next reader's stream starts. */
#define READER_FILE_LEN		4096
#define READER_POS_OFF		64

enum mon_msg_type {
	MON_MSG_HELLO = 1,	/* reader to monitor: from now on, every batch */
	MON_MSG_EVENTS,		/* reader to monitor: `count` events follow */
	MON_MSG_SYNCED,		/* reader to monitor: all before SYNC is sent */
	MON_MSG_SYNC,		/* monitor to reader: read the rings now */
	MON_MSG_FULL,		/* reader to monitor, instead of HELLO */
};

struct mon_msg {
	uint32_t type;		/* enum mon_msg_type */
	uint32_t count;		/* EVENTS: events; SYNC, SYNCED: a token;
				 * HELLO: MON_STREAM_VERSION */
	uint64_t seq;		/* EVENTS: the stream position of the first
				 * (0: the stream's first event); HELLO:
				 * where the stream starts among the events
				 * the node's readers took */
};

/* A message of events, as read from the rings and as sent. */
struct mon_batch {
	struct mon_msg hdr;
	struct pi_dp_mon_event ev[BATCH_MAX];
};

struct mon_sub {
	int fd;
	uint64_t start;		/* the reader's position at its HELLO */
	bool sync;		/* a SYNC is to be answered */
	bool behind;		/* a batch was lost: its monitor is to know */
	uint32_t token;
};

/* The reader's thread: owns the rings and the subscribers' sockets. */
struct mon_reader {
	pthread_t thread;
	bool running;
	int wake;		/* eventfd: stop */
	int listen;
	bool bound;		/* READER_SOCKET is this reader's */
	char pin_dir[PATH_MAX];
	char run_dir[PATH_MAX];
	char self[PATH_MAX];	/* this process's monitor file */
	int events[2];		/* the node's ring, the injection's */
	int config[2];		/* their monitor_config, for the lease */
	uint64_t renewed_ns;
	/* one ring_buffer each: a flood in one does not hold the other back
	 * (ring_buffer__consume stops at the first ring whose callback
	 * says stop), and the injection's goes with its object */
	struct ring_buffer *rb[2];
	uint32_t round_taken;	/* events taken from the ring this round */
	ino_t inject_ino;	/* the injection's directory, when joined */
	dev_t sock_dev;		/* READER_SOCKET as this reader bound it */
	ino_t sock_ino;
	void *file;		/* READER_LOCK's, mapped */
	uint64_t *pos;		/* in it: the events the node's readers took */
	uint64_t batch_pos;	/* the position of the batch's first */
	uint64_t own_start;	/* its own monitor's stream's start */
	struct mon_sub subs[MAX_SUBS];
	int nsubs;
	uint64_t inject_looked_ns;	/* for the injection's ring */
	struct mon_batch batch;
};

struct mon_config {
	int config;		/* monitor_config */
	int cpu;		/* monitor_cpu (per CPU) */
	ino_t ino;		/* the directory they were opened from */
	uint64_t lost_at_start;	/* monitor_cpu's count when joined, and
				 * what was lost while paused */
	uint64_t lost_paused;	/* lost_of() at the pause */
};

struct pi_monitor {
	char node[PI_NAME_LEN];
	char pin_dir[PATH_MAX];
	char run_dir[PATH_MAX];
	char self[PATH_MAX];	/* this monitor's file */
	int self_fd;
	int reader_fd;		/* READER_LOCK */
	uint32_t kinds;
	int lock_timeout_ms;
	struct mon_config cfg[2];	/* the node's, the injection's */
	struct mon_reader *reader;	/* while this process reads */
	int conn;		/* the stream from the reader */
	unsigned int streams;	/* streams had: a new one, a new reader */
	uint64_t next_seq;	/* the position the stream is expected at,
				 * among the events the readers took */
	uint64_t stream_start;	/* the stream's first event's position */
	bool followed;		/* served up to next_seq: a new stream that
				 * starts later counts the events between */
	uint64_t gap_lost;	/* events of batches the stream did not bring */
	uint64_t lost_gone;	/* counted by an injection object now gone */
	uint32_t sync_token;
	bool paused;
	struct pi_pod_info *pods;
	int npods;
	uint64_t pods_read_ns;
	/* the round in progress */
	pi_monitor_fn fn;
	void *ctx;
	int seen;
	bool stop;
	bool synced;
	struct mon_batch in;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* The run directory locked (the descriptor to close), or -errno: the
 * monitors' files are looked at and removed under it. */
static int run_dir_lock(const char *run_dir)
{
	int dfd, err;

	dfd = open(run_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	if (flock(dfd, LOCK_EX)) {
		err = -errno;
		close(dfd);
		return err;
	}
	return dfd;
}

/* The monitors alive (files someone holds) but the one whose file is
 * `self` (NULL: none): how many take events now, and the union of their
 * kinds added to *kinds (NULL: not read). A paused one takes none: a new
 * reader does not wait for it, and the datapath does not write for it
 * (nobody would read the rings, and they would fill up with what it is
 * not to be shown). Files nobody holds are removed.
 * Called with the directory locked. A monitor's file says its kinds,
 * and " paused" while it is. */
static int live_others(const char *run_dir, const char *self, uint32_t *kinds)
{
	char path[PATH_MAX + 256], buf[32];
	struct dirent *de;
	int n = 0;
	DIR *d;

	d = opendir(run_dir);
	if (!d)
		return 0;
	while ((de = readdir(d))) {
		ssize_t len;
		int fd;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", run_dir, de->d_name);
		if (self && !strcmp(path, self))
			continue;
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (!flock(fd, LOCK_EX | LOCK_NB)) {
			/* its monitor is gone without stopping */
			unlink(path);
			close(fd);
			continue;
		}
		len = pread(fd, buf, sizeof(buf) - 1, 0);
		close(fd);
		buf[len > 0 ? len : 0] = '\0';
		if (strstr(buf, PAUSED))
			continue;
		n++;
		if (kinds)
			*kinds |= (uint32_t)strtoul(buf, NULL, 0);
	}
	closedir(d);
	return n;
}

static void config_close(struct mon_config *c)
{
	if (c->config >= 0)
		close(c->config);
	if (c->cpu >= 0)
		close(c->cpu);
	c->config = c->cpu = -1;
}

/* The directory's inode: a node or injection object taken down and made
 * again under the same name is a new directory, with new maps. */
static int dir_ino(const char *dir, ino_t *ino)
{
	struct stat st;

	if (stat(dir, &st))
		return -errno;
	*ino = st.st_ino;
	return 0;
}

static bool dir_is(const char *dir, ino_t ino)
{
	ino_t now = 0;

	return !dir_ino(dir, &now) && now == ino;
}

static int config_open(struct mon_config *c, const char *dir)
{
	char path[PATH_MAX + 32];
	int err;

	c->lost_at_start = 0;
	err = dir_ino(dir, &c->ino);
	if (err)
		return err;
	snprintf(path, sizeof(path), "%s/monitor_config", dir);
	c->config = bpf_obj_get(path);
	snprintf(path, sizeof(path), "%s/monitor_cpu", dir);
	c->cpu = bpf_obj_get(path);
	if (c->config < 0 || c->cpu < 0) {
		int err = -errno;

		config_close(c);
		return err ? err : -ENOENT;
	}
	return 0;
}

/* `kinds` to an object's monitor_config; with a lease when `lease`: only
 * a reader, which renews it, gives one (a monitor served by a reader of
 * an earlier build, which does not, writes none). */
static int write_kinds(int config, uint32_t kinds, bool lease)
{
	struct pi_dp_monitor_config cfg = { .kinds = kinds };
	__u32 zero = 0;

	if (config < 0)
		return 0;
	if (kinds && lease)
		cfg.lease_s = (uint32_t)(mono_ns() / 1000000000ull) +
			      MON_LEASE_S;
	return bpf_map_update_elem(config, &zero, &cfg, 0) ? -errno : 0;
}

/* Under the run directory's lock: the union of the live monitors' kinds,
 * this one's included while it runs, to the datapath. */
static int publish_kinds(struct pi_monitor *m)
{
	bool running = m->self_fd >= 0 && !m->paused;
	uint32_t kinds = running ? m->kinds : 0;
	int dfd, err = 0;

	dfd = run_dir_lock(m->run_dir);
	if (dfd < 0)
		return dfd;
	live_others(m->run_dir, m->self_fd >= 0 ? m->self : NULL, &kinds);
	for (int i = 0; i < 2; i++) {
		int e = write_kinds(m->cfg[i].config, kinds, m->reader);

		err = err ? err : e;
	}
	close(dfd);
	return err;
}

/* Events the datapath could not write (full rings), node-wide, since
 * the object was joined. */
static uint64_t lost_of(const struct mon_config *c)
{
	int ncpu = libbpf_num_possible_cpus();
	struct pi_dp_monitor_cpu *v;
	uint64_t lost = 0;
	__u32 zero = 0;

	if (ncpu <= 0 || c->cpu < 0)
		return 0;
	v = calloc(ncpu, sizeof(*v));
	if (!v)
		return 0;
	if (!bpf_map_lookup_elem(c->cpu, &zero, v))
		for (int i = 0; i < ncpu; i++)
			lost += v[i].lost;
	free(v);
	return lost > c->lost_at_start ? lost - c->lost_at_start : 0;
}

/* The injection object is made by the first `inject allow` or `proxy
 * add`: a monitor started before it turns its events on when it is
 * there. */
static void join_inject_config(struct pi_monitor *m)
{
	char dir[PATH_MAX + 16];

	snprintf(dir, sizeof(dir), "%s/" INJECT_SUBDIR, m->pin_dir);
	if (m->cfg[1].config >= 0) {
		if (dir_is(dir, m->cfg[1].ino))
			return;
		/* Removed (a failed first `inject allow` undone, say) and
		 * perhaps made again: its maps are not the ones joined. */
		m->lost_gone += lost_of(&m->cfg[1]);
		config_close(&m->cfg[1]);
	}
	/* (config_open's stat says whether the object is there) */
	if (config_open(&m->cfg[1], dir))
		return;
	publish_kinds(m);
}

static void no_monitor_said(const char *node, int err)
{
	pr_err("node '%s' has no event monitor (made by an older build? `podinject node upgrade` adds it): %s",
	       node, strerror(-err));
}

/* ---- the reader ---- */

static int socket_addr(const char *run_dir, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if ((size_t)snprintf(sa->sun_path, sizeof(sa->sun_path),
			     "%s/" READER_SOCKET, run_dir) >=
	    sizeof(sa->sun_path))
		return -ENAMETOOLONG;
	return 0;
}


static void sub_drop(struct mon_reader *r, int i)
{
	close(r->subs[i].fd);
	r->subs[i] = r->subs[--r->nsubs];
}

/* A batch to every monitor. A socket that cannot take it now loses it
 * (the position moves on: its monitor sees the gap); the reader never
 * waits for a monitor. */
static void batch_flush(struct mon_reader *r)
{
	uint32_t count = r->batch.hdr.count;
	size_t len = sizeof(r->batch.hdr) + count * sizeof(r->batch.ev[0]);

	if (!count)
		return;
	r->batch.hdr.type = MON_MSG_EVENTS;
	for (int i = 0; i < r->nsubs; i++) {
		r->batch.hdr.seq = r->batch_pos - r->subs[i].start;
		if (send(r->subs[i].fd, &r->batch, len,
			 MSG_DONTWAIT | MSG_NOSIGNAL) >= 0)
			r->subs[i].behind = false;
		else if (errno == EAGAIN || errno == ENOBUFS)
			r->subs[i].behind = true;
		else
			sub_drop(r, i--);
	}
	r->batch.hdr.count = 0;
}

static int reader_take(void *ctx, void *data, size_t size)
{
	struct mon_reader *r = ctx;

	if (size < sizeof(r->batch.ev[0]))
		return 0;
	if (!r->batch.hdr.count)
		r->batch_pos = *r->pos;
	/* counted as taken, in the file, before the ring lets it go */
	(*r->pos)++;
	memcpy(&r->batch.ev[r->batch.hdr.count++], data,
	       sizeof(r->batch.ev[0]));
	if (r->batch.hdr.count == BATCH_MAX)
		batch_flush(r);
	/* Enough for one round: the ring lets this one go and stops (its
	 * reading would go on for as long as a flood lasts, and new
	 * monitors, SYNCs and a stop would wait for its end). */
	if (++r->round_taken >= ROUND_MAX)
		return -EAGAIN;
	return 0;
}

/* A round of ring `i`: true when it holds more than the round took */
static bool reader_round(struct mon_reader *r, int i)
{
	if (!r->rb[i])
		return false;
	r->round_taken = 0;
	return ring_buffer__consume(r->rb[i]) == -EAGAIN;
}

/* The injection object's ring left, its object gone: what it holds read
 * first (nothing writes to it any more: the rounds end). */
static void reader_leave_inject(struct mon_reader *r)
{
	while (reader_round(r, 1))
		;
	ring_buffer__free(r->rb[1]);
	r->rb[1] = NULL;
	close(r->events[1]);
	r->events[1] = -1;
	if (r->config[1] >= 0)
		close(r->config[1]);
	r->config[1] = -1;
}

/* Every MON_RENEW_NS while this thread takes from the rings: the kinds
 * the live monitors want, with a new lease. A monitor killed outright
 * loses its kinds here (its file is removed), not only at the next
 * monitor's start or stop. */
static void reader_renew(struct mon_reader *r)
{
	uint64_t now = mono_ns();
	uint32_t kinds = 0;
	int dfd;

	if (now - r->renewed_ns < MON_RENEW_NS)
		return;
	r->renewed_ns = now;
	dfd = run_dir_lock(r->run_dir);
	if (dfd < 0)
		return;
	live_others(r->run_dir, NULL, &kinds);
	for (int i = 0; i < 2; i++)
		write_kinds(r->config[i], kinds, true);
	close(dfd);
}

/* The injection's ring joined once it is there, and left if its object
 * goes: looked at every 100 ms at most, not at every batch of a flood. */
static void reader_join_inject(struct mon_reader *r)
{
	char dir[PATH_MAX + 16], path[PATH_MAX + 32];
	uint64_t now;

	now = mono_ns();
	if (now - r->inject_looked_ns < 100 * 1000000ull)
		return;
	r->inject_looked_ns = now;
	snprintf(dir, sizeof(dir), "%s/" INJECT_SUBDIR, r->pin_dir);
	if (r->events[1] >= 0) {
		if (dir_is(dir, r->inject_ino))
			return;
		reader_leave_inject(r);
	}
	if (dir_ino(dir, &r->inject_ino))
		return;
	snprintf(path, sizeof(path), "%s/monitor_events", dir);
	r->events[1] = bpf_obj_get(path);
	if (r->events[1] < 0)
		return;
	r->rb[1] = ring_buffer__new(r->events[1], reader_take, r, NULL);
	if (!r->rb[1]) {
		close(r->events[1]);
		r->events[1] = -1;
		return;
	}
	snprintf(path, sizeof(path), "%s/monitor_config", dir);
	r->config[1] = bpf_obj_get(path);
	/* its kinds and lease at once, not after a second */
	r->renewed_ns = 0;
}

static void sub_add(struct mon_reader *r, int fd)
{
	struct mon_msg hello = { .type = MON_MSG_HELLO,
				 .count = MON_STREAM_VERSION,
				 .seq = *r->pos };
	int size = STREAM_BUF;

	if (r->nsubs == MAX_SUBS) {
		struct mon_msg full = { .type = MON_MSG_FULL };

		send(fd, &full, sizeof(full), MSG_DONTWAIT | MSG_NOSIGNAL);
		close(fd);
		return;
	}
	/* root's: beyond wmem_max */
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size)))
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
	if (send(fd, &hello, sizeof(hello), MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
		close(fd);
		return;
	}
	r->subs[r->nsubs++] = (struct mon_sub){ .fd = fd, .start = *r->pos };
}

static void reader_accept(struct mon_reader *r)
{
	int fd;

	while ((fd = accept4(r->listen, NULL, NULL,
			     SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0)
		sub_add(r, fd);
}

/* A monitor's requests: SYNC, or the end of its stream. */
static void sub_read(struct mon_reader *r, int i)
{
	struct mon_msg req;
	ssize_t n;

	for (;;) {
		n = recv(r->subs[i].fd, &req, sizeof(req), MSG_DONTWAIT);
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			sub_drop(r, i);
			return;
		}
		if (n == sizeof(req) && req.type == MON_MSG_SYNC) {
			r->subs[i].sync = true;
			r->subs[i].token = req.count;
			/* everything written before: the injection's ring too,
			 * if it came since the last look */
			r->inject_looked_ns = 0;
		}
	}
}

static void *reader_main(void *arg)
{
	struct pollfd pfd[4 + MAX_SUBS];
	struct mon_reader *r = arg;
	bool more = false;
	uint64_t until;
	int expect, dfd;

	/* A hand-over: the monitors the last reader served come to this
	 * one; the rings keep the events until they are here. */
	dfd = run_dir_lock(r->run_dir);
	expect = live_others(r->run_dir, r->self, NULL);
	if (dfd >= 0)
		close(dfd);
	until = mono_ns() + HANDOVER_WAIT_MS * 1000000ull;
	for (;;) {
		int n = 0, first_sub, remote = r->nsubs - 1;
		bool waiting = remote < expect && mono_ns() < until;

		pfd[n++] = (struct pollfd){ .fd = r->wake, .events = POLLIN };
		pfd[n++] = (struct pollfd){ .fd = r->listen, .events = POLLIN };
		for (int i = 0; i < 2 && !waiting; i++)
			if (r->rb[i])
				pfd[n++] = (struct pollfd){
					.fd = ring_buffer__epoll_fd(r->rb[i]),
					.events = POLLIN };
		first_sub = n;
		for (int i = 0; i < r->nsubs; i++)
			pfd[n++] = (struct pollfd){ .fd = r->subs[i].fd,
						    .events = POLLIN };
		/* a ring left with more than a round took: not a wait */
		if (poll(pfd, n, more ? 0 : waiting ? 10 : 100) < 0 &&
		    errno != EINTR)
			break;
		if (pfd[0].revents)
			break;
		if (pfd[1].revents)
			reader_accept(r);
		/* backwards: a dropped subscriber takes the last one's place */
		for (int i = n - first_sub - 1; i >= 0; i--)
			if (i < r->nsubs && pfd[first_sub + i].revents)
				sub_read(r, i);
		reader_renew(r);
		if (waiting)
			continue;
		reader_join_inject(r);
		more = reader_round(r, 0);
		more |= reader_round(r, 1);
		batch_flush(r);
		for (int i = 0; i < r->nsubs; i++) {
			struct mon_sub *sub = &r->subs[i];
			/* The position, when asked or when batches were lost
			 * since the last that went: a gap the monitor would
			 * not see before the next batch, if one ever came. */
			struct mon_msg pos = {
				.type = sub->sync ? MON_MSG_SYNCED :
						    MON_MSG_EVENTS,
				.count = sub->sync ? sub->token : 0,
				.seq = *r->pos - sub->start,
			};

			if (!sub->sync && !sub->behind)
				continue;
			if (send(sub->fd, &pos, sizeof(pos),
				 MSG_DONTWAIT | MSG_NOSIGNAL) == sizeof(pos))
				sub->sync = sub->behind = false;
		}
	}
	return NULL;
}

static void reader_free(struct mon_reader *r)
{
	uint64_t one = 1;

	if (!r)
		return;
	if (r->running) {
		if (write(r->wake, &one, sizeof(one)) != sizeof(one))
			pthread_cancel(r->thread);
		pthread_join(r->thread, NULL);
	}
	while (r->nsubs)
		sub_drop(r, 0);
	for (int i = 0; i < 2; i++) {
		ring_buffer__free(r->rb[i]);
		if (r->events[i] >= 0)
			close(r->events[i]);
		if (r->config[i] >= 0)
			close(r->config[i]);
	}
	if (r->bound) {
		struct sockaddr_un sa;
		struct stat st;

		/* Before READER_LOCK goes: the next reader's is not ours. Nor
		 * is a socket of the same name in a run directory made again
		 * (the node taken down and up while this reader was stopped,
		 * its lock on a file since removed): only the one it bound. */
		if (!socket_addr(r->run_dir, &sa) && !stat(sa.sun_path, &st) &&
		    st.st_dev == r->sock_dev && st.st_ino == r->sock_ino)
			unlink(sa.sun_path);
	}
	if (r->listen >= 0)
		close(r->listen);
	if (r->wake >= 0)
		close(r->wake);
	if (r->file)
		munmap(r->file, READER_FILE_LEN);
	free(r);
}

/* This process reads the rings (READER_LOCK held): the thread started,
 * this monitor its first subscriber. */
static int reader_start(struct pi_monitor *m)
{
	struct sockaddr_un sa;
	struct mon_reader *r;
	sigset_t all, old;
	int pair[2], err;
	char path[PATH_MAX + 32];

	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->wake = r->listen = r->events[0] = r->events[1] = -1;
	r->config[0] = r->config[1] = -1;
	snprintf(r->pin_dir, sizeof(r->pin_dir), "%s", m->pin_dir);
	snprintf(r->run_dir, sizeof(r->run_dir), "%s", m->run_dir);
	snprintf(r->self, sizeof(r->self), "%s", m->self);

	r->file = mmap(NULL, READER_FILE_LEN, PROT_READ | PROT_WRITE,
		       MAP_SHARED, m->reader_fd, 0);
	if (r->file == MAP_FAILED) {
		r->file = NULL;
		err = -errno;
		goto fail;
	}
	r->pos = (uint64_t *)((char *)r->file + READER_POS_OFF);
	snprintf(path, sizeof(path), "%s/monitor_events", m->pin_dir);
	r->events[0] = bpf_obj_get(path);
	if (r->events[0] < 0) {
		err = -errno;
		no_monitor_said(m->node, err);
		goto fail;
	}
	r->rb[0] = ring_buffer__new(r->events[0], reader_take, r, NULL);
	if (!r->rb[0]) {
		err = -errno;
		goto fail;
	}
	snprintf(path, sizeof(path), "%s/monitor_config", m->pin_dir);
	r->config[0] = bpf_obj_get(path);
	if (r->config[0] < 0) {
		err = -errno;
		no_monitor_said(m->node, err);
		goto fail;
	}
	reader_join_inject(r);

	r->wake = eventfd(0, EFD_CLOEXEC);
	err = socket_addr(m->run_dir, &sa);
	if (r->wake < 0 || err) {
		err = err ? err : -errno;
		goto fail;
	}
	r->listen = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC |
				   SOCK_NONBLOCK, 0);
	if (r->listen < 0) {
		err = -errno;
		goto fail;
	}
	/* a killed reader's socket: READER_LOCK is ours, so nobody else's */
	unlink(sa.sun_path);
	r->bound = !bind(r->listen, (struct sockaddr *)&sa, sizeof(sa));
	if (r->bound) {
		struct stat st;

		if (stat(sa.sun_path, &st))
			r->bound = false;
		r->sock_dev = st.st_dev;
		r->sock_ino = st.st_ino;
	}
	if (!r->bound || chmod(sa.sun_path, 0600) ||
	    listen(r->listen, MAX_SUBS)) {
		err = -errno;
		pr_err("cannot serve the node's events at %s: %s", sa.sun_path,
		       strerror(-err));
		goto fail;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair)) {
		err = -errno;
		goto fail;
	}
	fcntl(pair[1], F_SETFL, O_NONBLOCK);
	/* read before the thread runs and takes events */
	r->own_start = *r->pos;
	sub_add(r, pair[1]);
	if (r->nsubs != 1) {
		close(pair[0]);
		err = -ENOMEM;
		goto fail;
	}
	/* The process's signals are its main thread's: a SIGINT taken by
	 * this thread would not cut short the main thread's wait. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	err = pthread_create(&r->thread, NULL, reader_main, r);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		close(pair[0]);
		err = -err;
		goto fail;
	}
	r->running = true;
	m->reader = r;
	m->conn = pair[0];
	return 0;
fail:
	reader_free(r);
	return err;
}

/* READER_LOCK taken (with this process's id in it), or -EWOULDBLOCK
 * while another monitor holds it. */
static int take_reader_lock(struct pi_monitor *m)
{
	uint64_t pos = 0;
	char buf[32];
	ssize_t len;

	if (flock(m->reader_fd, LOCK_EX | LOCK_NB))
		return -errno;
	/* the last reader's count, if it kept one, goes on */
	if (pread(m->reader_fd, &pos, sizeof(pos), READER_POS_OFF) !=
	    sizeof(pos))
		pos = 0;
	len = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
	if (ftruncate(m->reader_fd, 0) ||
	    pwrite(m->reader_fd, buf, len, 0) != len ||
	    ftruncate(m->reader_fd, READER_FILE_LEN) ||
	    pwrite(m->reader_fd, &pos, sizeof(pos), READER_POS_OFF) !=
		    sizeof(pos)) {
		flock(m->reader_fd, LOCK_UN);
		return -EIO;
	}
	return 0;
}

/* The stream's first message: the reader took this monitor on (0), or
 * serves as many as it can (-EUSERS), or is of a build whose stream is
 * not this one's (-EPROTO, its version in *version). */
static int await_hello(int fd, int timeout_ms, uint32_t *version,
		       uint64_t *start)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	struct mon_msg msg;

	if (poll(&pfd, 1, timeout_ms) <= 0)
		return -ETIMEDOUT;
	if (recv(fd, &msg, sizeof(msg), 0) != sizeof(msg))
		return -ECONNRESET;
	if (msg.type == MON_MSG_FULL)
		return -EUSERS;
	*version = msg.count ? msg.count : 1;
	*start = msg.seq;
	if (msg.type != MON_MSG_HELLO || *version > MON_STREAM_VERSION)
		return -EPROTO;
	return 0;
}

/* The reader's process id, as its lock file says ("?" if it does not). */
static void reader_pid(const struct pi_monitor *m, char *pid, size_t len)
{
	ssize_t n = pread(m->reader_fd, pid, len - 1, 0);

	pid[n > 0 ? n : 0] = '\0';
	pid[strcspn(pid, "\n")] = '\0';
	if (!*pid)
		snprintf(pid, len, "?");
}

/* Whether the process `pid` (as text) is stopped: its state in
 * /proc/PID/stat, after the command's closing parenthesis, is T or t. */
static bool process_stopped(const char *pid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	if (!*pid || pid[strspn(pid, "0123456789")])
		return false;
	snprintf(path, sizeof(path), "/proc/%s/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p && (p[1] == ' ') && (p[2] == 'T' || p[2] == 't');
}

/* A new stream, from a reader whose stream is of `version`, starts at
 * `start`: the events between where the last one ended and there (a
 * reader killed while passing a batch on, batches lost to a full socket
 * just before a reader stopped, a reader's first events before this
 * monitor came back to it) are counted lost, unless the last stream was
 * given up (a pause) or its reader did not count (version 1). */
static void stream_begin(struct pi_monitor *m, uint32_t version,
			 uint64_t start)
{
	if (version < 2) {
		m->followed = false;
		start = 0;
	}
	if (m->followed && start > m->next_seq)
		m->gap_lost += start - m->next_seq;
	m->stream_start = start;
	m->next_seq = start;
	m->followed = version >= 2;
	m->streams++;
}

/* This monitor's stream: from the reader it becomes, or from the reader
 * another monitor is. Tried until ATTACH_WAIT_MS pass: a reader may be
 * starting or stopping. */
static int attach(struct pi_monitor *m)
{
	uint64_t until = mono_ns() + ATTACH_WAIT_MS * 1000000ull;
	struct sockaddr_un sa;
	uint32_t version = 0;
	uint64_t start = 0;
	char pid[32];
	int err;

	err = socket_addr(m->run_dir, &sa);
	if (err) {
		pr_err("the monitor's socket name is too long: %s/%s",
		       m->run_dir, READER_SOCKET);
		return err;
	}
	for (;;) {
		/* the node taken down, perhaps made again: its rings are not
		 * the ones this monitor's kinds were given to */
		if (!dir_is(m->pin_dir, m->cfg[0].ino))
			return -ENOENT;
		err = take_reader_lock(m);
		if (!err) {
			err = reader_start(m);
			if (err)
				flock(m->reader_fd, LOCK_UN);
			else
				stream_begin(m, MON_STREAM_VERSION,
					     m->reader->own_start);
			return err;
		}
		if (err != -EWOULDBLOCK) {
			pr_err("cannot lock %s/%s: %s", m->run_dir,
			       READER_LOCK, strerror(-err));
			return err;
		}
		m->conn = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
		if (m->conn < 0)
			return -errno;
		err = connect(m->conn, (struct sockaddr *)&sa, sizeof(sa)) ?
			      -errno :
			      await_hello(m->conn, ATTACH_WAIT_MS, &version,
					  &start);
		if (!err) {
			stream_begin(m, version, start);
			return 0;
		}
		close(m->conn);
		m->conn = -1;
		if (err == -EUSERS) {
			pr_err("node '%s' has %d monitors already, the most one reader serves",
			       m->node, MAX_SUBS);
			return err;
		}
		if (err == -EPROTO) {
			reader_pid(m, pid, sizeof(pid));
			pr_err("node '%s': the monitor that reads its events (pid %s) is of another build (its stream version %u, this build's %u): stop it, or run that build",
			       m->node, pid, version, MON_STREAM_VERSION);
			return err;
		}
		if (mono_ns() >= until) {
			reader_pid(m, pid, sizeof(pid));
			/* stopped (SIGSTOP, a debugger), or of a build that
			 * did not pass events on */
			if (process_stopped(pid))
				pr_err("node '%s': the monitor that reads its events (pid %s) does not answer: it is stopped (SIGSTOP, a debugger); continue it (kill -CONT %s) or end it",
				       m->node, pid, pid);
			else
				pr_err("node '%s': the monitor that reads its events (pid %s) does not answer",
				       m->node, pid);
			return -ETIMEDOUT;
		}
		usleep(20 * 1000);
	}
}

/* ---- a monitor ---- */

/* This monitor's file: its kinds, and whether it is paused. Written
 * over, then cut to length: read at any time (without the directory's
 * lock), it starts with the kinds. */
static int self_say(struct pi_monitor *m, bool paused)
{
	char buf[48];
	int len;

	len = snprintf(buf, sizeof(buf), "%u%s\n", m->kinds,
		       paused ? PAUSED : "");
	if (pwrite(m->self_fd, buf, len, 0) != len ||
	    ftruncate(m->self_fd, len))
		return -EIO;
	return 0;
}

/* The pods' names read again. `wait`: for the node's lock as any reader
 * does (an event names a pod the cache does not know); else only if the
 * lock is free now (the cache is old): the monitor must not stall behind
 * a long `apply` or upgrade while its events pile up. */
static void read_pods(struct pi_monitor *m, bool wait)
{
	struct pi_pod_info *pods = NULL;
	struct pi_node *n;
	int cnt, probe = -1, err;

	m->pods_read_ns = mono_ns();
	if (!wait) {
		probe = node_lock_dir(m->pin_dir, NODE_LOCK_SHARED, 0);
		if (probe < 0)
			return;
	}
	err = pi_node_open(m->node, PI_OPEN_READ, m->lock_timeout_ms, &n);
	if (probe >= 0)
		close(probe);
	if (err)
		return;
	cnt = pi_pod_list(n, &pods);
	pi_node_close(n);
	if (cnt < 0)
		return;
	free(m->pods);
	m->pods = pods;
	m->npods = cnt;
}

/* The pod of id `id`, or with id PI_DP_MON_NO_POD, of host-side device
 * `ifindex`. */
static const struct pi_pod_info *mon_pod_find(struct pi_monitor *m, uint32_t id,
					  uint32_t ifindex)
{
	bool by_id = id != PI_DP_MON_NO_POD;

	if (!by_id && !ifindex)
		return NULL;
	/* Ids and ifindexes are reused (a pod's id is the lowest free one):
	 * a name known for one is trusted for a second at most, else a
	 * pod deleted and another added under its id would lend its name
	 * to every event of the new one for the monitor's whole life. */
	if (mono_ns() - m->pods_read_ns >= POD_REFRESH_NS)
		read_pods(m, false);
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < m->npods; i++) {
			if (by_id ? m->pods[i].id == id :
				    m->pods[i].ifindex == ifindex)
				return &m->pods[i];
		}
		if (pass || mono_ns() - m->pods_read_ns < POD_REFRESH_NS)
			break;
		read_pods(m, true);
	}
	return NULL;
}

static void name_of(struct pi_monitor *m, uint32_t id, uint32_t ifindex,
		    char *out, size_t len)
{
	const struct pi_pod_info *p = mon_pod_find(m, id, ifindex);

	snprintf(out, len, "%s", p ? p->name : "");
}

static void deliver(struct pi_monitor *m, const struct pi_dp_mon_event *e)
{
	struct pi_monitor_event ev = {};

	if (m->stop)
		return;
	if (e->kind >= PI_MON_KIND_MAX || !(m->kinds & (1u << e->kind)))
		return;	/* another monitor's kind */
	ev.ts_ns = e->ts_ns;
	ev.kind = e->kind;
	ev.hook = e->hook;
	ev.reason = e->reason;
	ev.rule_id = e->rule_id;
	ev.dir = e->dir;
	ev.ifindex = e->ifindex;
	ev.aux = e->aux;
	ev.len = e->len;
	ev.family = e->family;
	ev.proto = e->proto;
	if ((e->proto == PI_IPPROTO_ICMP || e->proto == PI_IPPROTO_ICMPV6) &&
	    e->tcp_flags == PI_DP_MON_ICMP_READ) {
		/* ICMP has no ports: its fields are its own */
		ev.icmp_read = true;
		ev.icmp_type = e->dport >> 8;
		ev.icmp_code = e->dport & 0xff;
		ev.icmp_id = e->sport;
	} else {
		ev.tcp_flags = e->tcp_flags;
		ev.sport = e->sport;
		ev.dport = e->dport;
	}
	memcpy(ev.saddr.a, e->saddr.a, sizeof(ev.saddr.a));
	memcpy(ev.daddr.a, e->daddr.a, sizeof(ev.daddr.a));
	/* the injection object knows pods by device only */
	/* pod_reply runs at a pod's eth0, whose ifindex is its namespace's
	 * and names nothing here: the reader knows whose it is */
	if (e->hook != PI_DP_HOOK_POD_REPLY)
		name_of(m, e->pod_id, e->ifindex, ev.pod, sizeof(ev.pod));
	if (e->kind == PI_DP_MON_INJECT ||
	    (e->kind == PI_DP_MON_DROP && e->hook == PI_DP_HOOK_INJECT &&
	     e->reason == PI_DP_MON_DROP_INJECT_REDIRECT))
		name_of(m, PI_DP_MON_NO_POD, e->aux, ev.as_pod,
			sizeof(ev.as_pod));
	m->seen++;
	if (m->fn(&ev, m->ctx))
		m->stop = true;
}

/* The stream's messages at hand, each handled, STREAM_ROUND_MAX at most
 * (the caller looks at its signals and its time between); 0, or -errno
 * when the stream ended (its reader stopped) and no other could be
 * reached. */
static int read_stream(struct pi_monitor *m)
{
	for (int msgs = 0; msgs < STREAM_ROUND_MAX && !m->stop; msgs++) {
		ssize_t n = recv(m->conn, &m->in, sizeof(m->in), MSG_DONTWAIT);
		uint64_t at = m->stream_start + m->in.hdr.seq;
		uint32_t count;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n < (ssize_t)sizeof(m->in.hdr)) {
			/* the reader stopped: read on from the next one, or
			 * be it; unless the node went (its reader saw it) */
			close(m->conn);
			m->conn = -1;
			if (!dir_is(m->pin_dir, m->cfg[0].ino))
				return -ENOENT;
			return attach(m);
		}
		switch (m->in.hdr.type) {
		case MON_MSG_SYNCED:
			if (at > m->next_seq) {
				m->gap_lost += at - m->next_seq;
				m->next_seq = at;
			}
			if (m->in.hdr.count == m->sync_token)
				m->synced = true;
			break;
		case MON_MSG_EVENTS:
			/* count 0: where the stream is, after lost batches */
			count = m->in.hdr.count;
			if (count > BATCH_MAX ||
			    (size_t)n != sizeof(m->in.hdr) +
					 count * sizeof(m->in.ev[0]))
				break;
			if (at > m->next_seq)
				m->gap_lost += at - m->next_seq;
			m->next_seq = at + count;
			for (uint32_t i = 0; i < count; i++)
				deliver(m, &m->in.ev[i]);
			break;
		default:
			break;
		}
	}
	return 0;
}

/* This monitor's file, by its process's id; a process's second monitor
 * (and third: a library's caller may open several) gets a number after
 * it, or it would take over the first one's file, and its kinds. `tmp`:
 * the dot name it is made under. */
static void name_self(struct pi_monitor *m, char *tmp, size_t len)
{
	static unsigned int opened;
	unsigned int nth = __atomic_add_fetch(&opened, 1, __ATOMIC_RELAXED);
	char name[32];

	if (nth == 1)
		snprintf(name, sizeof(name), "%d", (int)getpid());
	else
		snprintf(name, sizeof(name), "%d-%u", (int)getpid(), nth);
	snprintf(m->self, sizeof(m->self), "%s/%s", m->run_dir, name);
	snprintf(tmp, len, "%s/.%s", m->run_dir, name);
}

int pi_monitor_open(const char *node, uint32_t kinds, int lock_timeout_ms,
		    struct pi_monitor **out)
{
	char tmp[PATH_MAX + 16], path[PATH_MAX + 16];
	struct pi_monitor *m;
	struct pi_node *n;
	int err;

	*out = NULL;
	if (!kinds || (kinds & ~(PI_MON_ALL | 1u << PI_MON_TRACE)))
		return -EINVAL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->self_fd = -1;
	m->reader_fd = -1;
	m->conn = -1;
	m->kinds = kinds;
	m->lock_timeout_ms = lock_timeout_ms;
	for (int i = 0; i < 2; i++)
		m->cfg[i].config = m->cfg[i].cpu = -1;

	err = pi_node_open(node, PI_OPEN_READ, lock_timeout_ms, &n);
	if (err)
		goto fail;
	snprintf(m->node, sizeof(m->node), "%s", n->name);
	snprintf(m->pin_dir, sizeof(m->pin_dir), "%s", n->pin_dir);
	err = pi_pod_list(n, &m->pods);
	pi_node_close(n);
	if (err < 0)
		goto fail;
	m->npods = err;
	m->pods_read_ns = mono_ns();

	run_path("monitor", m->pin_dir, m->run_dir, sizeof(m->run_dir));
	err = mkdir_p(m->run_dir);
	if (err) {
		pr_err("cannot make %s: %s", m->run_dir, strerror(-err));
		goto fail;
	}
	err = config_open(&m->cfg[0], m->pin_dir);
	if (err) {
		no_monitor_said(m->node, err);
		goto fail;
	}
	snprintf(path, sizeof(path), "%s/" READER_LOCK, m->run_dir);
	m->reader_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (m->reader_fd < 0) {
		err = -errno;
		pr_err("cannot open %s: %s", path, strerror(-err));
		goto fail;
	}

	/* Made under a dot name, which live_others() passes over, and given
	 * its own once locked and written: under its own name and not yet
	 * locked, another monitor's start or stop would take it for a dead
	 * monitor's file and remove it, and its kinds would be dropped. It
	 * is there before the stream is asked for, so that a reader taking
	 * over waits for this monitor too. */
	name_self(m, tmp, sizeof(tmp));
	m->self_fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (m->self_fd < 0 || flock(m->self_fd, LOCK_EX)) {
		err = -errno;
		unlink(tmp);
		goto fail;
	}
	if (self_say(m, false)) {
		err = -EIO;
		unlink(tmp);
		goto fail;
	}
	if (rename(tmp, m->self)) {
		err = -errno;
		unlink(tmp);
		goto fail;
	}
	join_inject_config(m);
	err = attach(m);
	if (err == -ENOENT)
		pr_err("node '%s' is gone", m->node);
	if (err)
		goto fail;
	for (int i = 0; i < 2; i++)
		m->cfg[i].lost_at_start = lost_of(&m->cfg[i]);
	err = publish_kinds(m);
	if (err)
		goto fail;
	*out = m;
	return 0;
fail:
	pi_monitor_close(m);
	return err;
}

static int poll_round(struct pi_monitor *m, pi_monitor_fn fn, void *ctx)
{
	if (m->paused)
		return -EAGAIN;
	/* a node taken down (and perhaps made again under its name) leaves
	 * this monitor reading buffers nothing writes to any more */
	if (!dir_is(m->pin_dir, m->cfg[0].ino))
		return -ENOENT;
	join_inject_config(m);
	m->fn = fn;
	m->ctx = ctx;
	m->seen = 0;
	m->stop = false;
	return 0;
}

int pi_monitor_poll(struct pi_monitor *m, int timeout_ms, pi_monitor_fn fn,
		    void *ctx)
{
	struct pollfd pfd = { .fd = m->conn, .events = POLLIN };
	int err;

	err = poll_round(m, fn, ctx);
	if (err)
		return err;
	if (poll(&pfd, 1, timeout_ms) < 0 && errno != EINTR)
		return -errno;
	err = read_stream(m);
	return err ? err : m->seen;
}

int pi_monitor_drain(struct pi_monitor *m, int timeout_ms, pi_monitor_fn fn,
		     void *ctx)
{
	uint64_t until = mono_ns() + (uint64_t)timeout_ms * 1000000ull;
	unsigned int asked = m->streams - 1;
	int err, seen = 0;

	err = poll_round(m, fn, ctx);
	if (err)
		return err;
	m->synced = false;
	while (!m->synced && !m->stop) {
		struct pollfd pfd = { .fd = m->conn, .events = POLLIN };
		uint64_t now = mono_ns();

		/* asked again of a new reader: what the old one had not
		 * read is in the rings */
		if (asked != m->streams) {
			struct mon_msg req = { .type = MON_MSG_SYNC,
					       .count = ++m->sync_token };

			if (send(m->conn, &req, sizeof(req), MSG_NOSIGNAL) !=
			    sizeof(req))
				return -errno;
			asked = m->streams;
		}
		if (now >= until)
			return -ETIMEDOUT;
		if (poll(&pfd, 1, (int)((until - now) / 1000000) + 1) < 0 &&
		    errno != EINTR)
			return -errno;
		err = read_stream(m);
		seen += m->seen;
		m->seen = 0;
		if (err)
			return err;
	}
	return seen;
}

void pi_monitor_pause(struct pi_monitor *m)
{
	if (m->paused)
		return;
	m->paused = true;
	/* the events until it takes them again are not this monitor's,
	 * nor lost to it */
	m->followed = false;
	/* said first: a reader taking over does not wait for this one, and
	 * the datapath stops writing its kinds (unless others want them) */
	self_say(m, true);
	publish_kinds(m);
	for (int i = 0; i < 2; i++)
		m->cfg[i].lost_paused = lost_of(&m->cfg[i]);
	/* Its streams end: one of the others takes the rings on. */
	reader_free(m->reader);
	m->reader = NULL;
	if (m->conn >= 0)
		close(m->conn);
	m->conn = -1;
	flock(m->reader_fd, LOCK_UN);
}

int pi_monitor_resume(struct pi_monitor *m)
{
	int err;

	if (!m->paused)
		return 0;
	self_say(m, false);
	err = attach(m);
	if (err)
		return err;
	m->paused = false;
	/* what the rings could not take meanwhile was not this monitor's */
	for (int i = 0; i < 2; i++) {
		uint64_t lost = lost_of(&m->cfg[i]);

		if (lost > m->cfg[i].lost_paused)
			m->cfg[i].lost_at_start += lost - m->cfg[i].lost_paused;
	}
	return publish_kinds(m);
}

uint64_t pi_monitor_lost(struct pi_monitor *m)
{
	return lost_of(&m->cfg[0]) + lost_of(&m->cfg[1]) + m->lost_gone +
	       m->gap_lost;
}

void pi_monitor_close(struct pi_monitor *m)
{
	if (!m)
		return;
	if (m->self_fd >= 0) {
		unlink(m->self);
		close(m->self_fd);
		m->self_fd = -1;
		publish_kinds(m);
	}
	/* The monitors this one's thread served see their streams end, and
	 * one of them reads on from where the rings were left. */
	reader_free(m->reader);
	if (m->conn >= 0)
		close(m->conn);
	for (int i = 0; i < 2; i++)
		config_close(&m->cfg[i]);
	if (m->reader_fd >= 0)
		close(m->reader_fd);
	free(m->pods);
	free(m);
}

void monitor_run_forget(const char *pin_dir)
{
	char path[PATH_MAX];

	run_path("monitor", pin_dir, path, sizeof(path));
	rm_tree(path);
}
