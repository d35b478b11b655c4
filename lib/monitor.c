/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The live event monitor (bpf/lib/monitor.h): reads the node's ring
 * buffers, and tells the datapath which kinds of events to write.
 *
 * The datapath writes a kind only while some monitor wants it. What the
 * running monitors want is kept as one file per monitor under
 * MONITOR_RUN_DIR/<node's pin directory name>/, named by its PID, holding
 * its kinds and flock()ed by it for its whole life: a monitor that was
 * killed leaves a file nobody holds, which the next monitor to start or
 * stop removes. Each start and stop (under a lock of that directory)
 * writes the union of the live monitors' kinds to monitor_config, so the
 * datapath stops paying for events once the last monitor is gone.
 *
 * A node's events have one reader at a time: a BPF ring buffer has one
 * read position, so two monitors polling it would each take the events
 * the other was waiting for, and neither would know (nothing is counted
 * lost). The reader holds READER_LOCK in the run directory for its whole
 * life; another monitor, or `probe --trace`, is refused with -EBUSY.
 *
 * The node is not held open while the monitor runs (a reader's shared
 * lock would keep every CNI ADD waiting): it opens the ring buffers and
 * the configuration by their pins, and reads the pods' names again, under
 * a short lock, when an event names a pod it does not know.
 */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "internal.h"
#include "lib.h"
#include "state.h"

#define MONITOR_RUN_DIR		PI_RUN_DIR "/monitor"
#define INJECT_SUBDIR		"inject"
/* a dot name: live_kinds() passes it over */
#define READER_LOCK		".reader"
/* the pods' names are read again at most this often: when an event names
 * a pod the cache does not know, or the cache is older than this */
#define POD_REFRESH_NS		(1000ull * 1000 * 1000)

struct mon_source {
	int events;		/* ring buffer */
	int config;		/* monitor_config */
	int cpu;		/* monitor_cpu (per CPU) */
	bool open;
};

struct pi_monitor {
	char node[PI_NAME_LEN];
	char pin_dir[PATH_MAX];
	char run_dir[PATH_MAX];
	char self[PATH_MAX];	/* this monitor's file */
	int self_fd;
	int reader_fd;		/* READER_LOCK, held */
	uint32_t kinds;
	int lock_timeout_ms;
	struct mon_source src[2];	/* the node's, the injection's */
	struct ring_buffer *rb;
	uint64_t lost_at_start;
	struct pi_pod_info *pods;
	int npods;
	uint64_t pods_read_ns;
	/* the round in progress (the ring buffer's callback's context) */
	pi_monitor_fn fn;
	void *ctx;
	int seen;
	bool stop;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* The union of the kinds of the monitors alive (files someone holds),
 * this one's included; files nobody holds are removed. Called with the
 * directory locked. */
static uint32_t live_kinds(struct pi_monitor *m)
{
	char path[PATH_MAX + 256], buf[32];
	struct dirent *de;
	uint32_t kinds = 0;
	DIR *d;

	d = opendir(m->run_dir);
	if (!d)
		return m->self_fd >= 0 ? m->kinds : 0;
	while ((de = readdir(d))) {
		ssize_t len;
		int fd;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", m->run_dir, de->d_name);
		if (m->self_fd >= 0 && !strcmp(path, m->self))
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
		if (len > 0) {
			buf[len] = '\0';
			kinds |= (uint32_t)strtoul(buf, NULL, 0);
		}
	}
	closedir(d);
	if (m->self_fd >= 0)
		kinds |= m->kinds;
	return kinds;
}

static void source_close(struct mon_source *s)
{
	if (s->events >= 0)
		close(s->events);
	if (s->config >= 0)
		close(s->config);
	if (s->cpu >= 0)
		close(s->cpu);
	s->events = s->config = s->cpu = -1;
	s->open = false;
}

static int source_open(struct mon_source *s, const char *dir)
{
	char path[PATH_MAX + 32];

	snprintf(path, sizeof(path), "%s/monitor_events", dir);
	s->events = bpf_obj_get(path);
	snprintf(path, sizeof(path), "%s/monitor_config", dir);
	s->config = bpf_obj_get(path);
	snprintf(path, sizeof(path), "%s/monitor_cpu", dir);
	s->cpu = bpf_obj_get(path);
	if (s->events < 0 || s->config < 0 || s->cpu < 0) {
		int err = -errno;

		source_close(s);
		return err ? err : -ENOENT;
	}
	s->open = true;
	return 0;
}

static int write_kinds(struct pi_monitor *m, uint32_t kinds)
{
	struct pi_dp_monitor_config cfg = { .kinds = kinds };
	__u32 zero = 0;
	int err = 0;

	for (int i = 0; i < 2; i++)
		if (m->src[i].open &&
		    bpf_map_update_elem(m->src[i].config, &zero, &cfg, 0))
			err = -errno;
	return err;
}

/* Under the run directory's lock: the union of the live monitors' kinds
 * to the datapath. */
static int publish_kinds(struct pi_monitor *m)
{
	int dfd, err;

	dfd = open(m->run_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	if (flock(dfd, LOCK_EX)) {
		err = -errno;
		close(dfd);
		return err;
	}
	err = write_kinds(m, live_kinds(m));
	close(dfd);
	return err;
}

static uint64_t lost_of(const struct pi_monitor *m)
{
	int ncpu = libbpf_num_possible_cpus();
	struct pi_dp_monitor_cpu *v;
	uint64_t lost = 0;
	__u32 zero = 0;

	if (ncpu <= 0)
		return 0;
	v = calloc(ncpu, sizeof(*v));
	if (!v)
		return 0;
	for (int i = 0; i < 2; i++) {
		if (!m->src[i].open ||
		    bpf_map_lookup_elem(m->src[i].cpu, &zero, v))
			continue;
		for (int c = 0; c < ncpu; c++)
			lost += v[c].lost;
	}
	free(v);
	return lost;
}

/* The pods' names read again. `wait`: for the node's lock as any reader
 * does (an event names a pod the cache does not know); else only if the
 * lock is free now (the cache is old): the monitor, the node's only
 * reader of events, must not stall behind a long `apply` or upgrade while
 * its ring buffers fill. */
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

static int on_event(void *ctx, void *data, size_t size)
{
	const struct pi_dp_mon_event *e = data;
	struct pi_monitor *m = ctx;
	struct pi_monitor_event ev = {};

	if (m->stop || size < sizeof(*e))
		return 0;
	if (e->kind >= PI_MON_KIND_MAX || !(m->kinds & (1u << e->kind)))
		return 0;	/* another monitor's kind */
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
	ev.tcp_flags = e->tcp_flags;
	ev.sport = e->sport;
	ev.dport = e->dport;
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
	return 0;
}

/* The injection object is made by the first `inject allow` or `proxy
 * add`: a monitor started before it joins its ring buffer when it is
 * there. */
static void join_inject(struct pi_monitor *m)
{
	char dir[PATH_MAX + 16];

	if (m->src[1].open)
		return;
	snprintf(dir, sizeof(dir), "%s/" INJECT_SUBDIR, m->pin_dir);
	if (access(dir, F_OK) || source_open(&m->src[1], dir))
		return;
	if (ring_buffer__add(m->rb, m->src[1].events, on_event, m)) {
		source_close(&m->src[1]);
		return;
	}
	publish_kinds(m);
}

/* READER_LOCK taken, with this process's id in it for whoever is
 * refused; -EBUSY, said, while another monitor holds it. */
static int take_reader(struct pi_monitor *m)
{
	char path[PATH_MAX + 16], buf[32];
	ssize_t len;
	int err;

	snprintf(path, sizeof(path), "%s/" READER_LOCK, m->run_dir);
	m->reader_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (m->reader_fd < 0) {
		err = -errno;
		pr_err("cannot open %s: %s", path, strerror(-err));
		return err;
	}
	if (!flock(m->reader_fd, LOCK_EX | LOCK_NB)) {
		len = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
		if (ftruncate(m->reader_fd, 0) ||
		    pwrite(m->reader_fd, buf, len, 0) != len)
			return -EIO;
		return 0;
	}
	err = -errno;
	if (err != -EWOULDBLOCK) {
		pr_err("cannot lock %s: %s", path, strerror(-err));
		return err;
	}
	len = pread(m->reader_fd, buf, sizeof(buf) - 1, 0);
	buf[len > 0 ? len : 0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	pr_err("node '%s': another monitor (pid %s) reads its events; they have one reader at a time (two would each take events the other waits for): stop it first, or use its output",
	       m->node, *buf ? buf : "?");
	return -EBUSY;
}

int pi_monitor_open(const char *node, uint32_t kinds, int lock_timeout_ms,
		    struct pi_monitor **out)
{
	char buf[32], tmp[PATH_MAX + 16];
	struct pi_monitor *m;
	struct pi_node *n;
	int err, len;

	*out = NULL;
	if (!kinds || (kinds & ~(PI_MON_ALL | 1u << PI_MON_TRACE)))
		return -EINVAL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->self_fd = -1;
	m->reader_fd = -1;
	m->kinds = kinds;
	m->lock_timeout_ms = lock_timeout_ms;
	for (int i = 0; i < 2; i++)
		m->src[i].events = m->src[i].config = m->src[i].cpu = -1;

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

	snprintf(m->run_dir, sizeof(m->run_dir), MONITOR_RUN_DIR "/%s",
		 strrchr(m->pin_dir, '/') + 1);
	err = mkdir_p(m->run_dir);
	if (err) {
		pr_err("cannot make %s: %s", m->run_dir, strerror(-err));
		goto fail;
	}
	err = take_reader(m);
	if (err)
		goto fail;

	err = source_open(&m->src[0], m->pin_dir);
	if (err) {
		pr_err("node '%s' has no event monitor (made by an older build? `podinject node upgrade` adds it): %s",
		       m->node, strerror(-err));
		goto fail;
	}
	m->rb = ring_buffer__new(m->src[0].events, on_event, m, NULL);
	if (!m->rb) {
		err = -errno;
		goto fail;
	}
	join_inject(m);

	/* Made under a dot name, which live_kinds() passes over, and given
	 * its own once locked and written: under its own name and not yet
	 * locked, another monitor's start or stop would take it for a dead
	 * monitor's file and remove it, and its kinds would be dropped. */
	snprintf(m->self, sizeof(m->self), "%s/%d", m->run_dir, (int)getpid());
	snprintf(tmp, sizeof(tmp), "%s/.%d", m->run_dir, (int)getpid());
	m->self_fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (m->self_fd < 0 || flock(m->self_fd, LOCK_EX)) {
		err = -errno;
		unlink(tmp);
		goto fail;
	}
	len = snprintf(buf, sizeof(buf), "%u\n", kinds);
	if (write(m->self_fd, buf, len) != len) {
		err = -EIO;
		unlink(tmp);
		goto fail;
	}
	if (rename(tmp, m->self)) {
		err = -errno;
		unlink(tmp);
		goto fail;
	}
	m->lost_at_start = lost_of(m);
	err = publish_kinds(m);
	if (err)
		goto fail;
	*out = m;
	return 0;
fail:
	pi_monitor_close(m);
	return err;
}

int pi_monitor_poll(struct pi_monitor *m, int timeout_ms, pi_monitor_fn fn,
		    void *ctx)
{
	int err;

	/* a node taken down leaves this monitor reading buffers nothing
	 * writes to any more */
	if (access(m->pin_dir, F_OK))
		return -ENOENT;
	join_inject(m);
	m->fn = fn;
	m->ctx = ctx;
	m->seen = 0;
	m->stop = false;
	err = ring_buffer__poll(m->rb, timeout_ms);
	if (err < 0 && err != -EINTR)
		return err;
	return m->seen;
}

uint64_t pi_monitor_lost(struct pi_monitor *m)
{
	uint64_t now = lost_of(m);

	return now > m->lost_at_start ? now - m->lost_at_start : 0;
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
	ring_buffer__free(m->rb);
	for (int i = 0; i < 2; i++)
		source_close(&m->src[i]);
	if (m->reader_fd >= 0)
		close(m->reader_fd);
	free(m->pods);
	free(m);
}
