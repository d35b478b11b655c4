/* SPDX-License-Identifier: GPL-2.0 */
#include <errno.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <pthread.h>
#include <time.h>
#include <dirent.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "nl.h"
#include "state.h"
#include "internal.h"

#define BPF_FS_MAGIC	0xcafe4a11
#ifndef SO_NETNS_COOKIE
#define SO_NETNS_COOKIE	71
#endif
/* bpf_link_info types whose first union member is the device's ifindex
 * (0 once the device, or its whole namespace, is gone). */
#define PI_LINK_TYPE_XDP	6
#define PI_LINK_TYPE_TCX	11
#define PI_LINK_TYPE_NETKIT	13

const char *const node_map_names[M__COUNT] = {
	[M_PODS] = "pods",
	[M_ENDPOINTS] = "endpoints",
	[M_NODE_CONFIG] = "node_config",
	[M_POD_STATS] = "pod_stats",
	[M_RULES] = "rules",
	[M_POLICY_REFS] = "policy_refs",
	[M_RULE_STATS] = "rule_stats",
	[M_CT] = "ct",
	[M_CLS_HEADS] = "cls_heads",
	[M_CLS_ADDRS] = "cls_addrs",
	[M_CLS_L4] = "cls_l4",
	[M_CLS_PORTS] = "cls_ports",
	[M_CLS_CLASSES] = "cls_classes",
	[M_CLS_CHUNKS] = "cls_chunks",
};

const char *const node_prog_names[P__COUNT] = {
	[P_POD_EGRESS] = "pod_egress",
	[P_POD_INGRESS] = "pod_ingress",
	[P_UPLINK_INGRESS] = "uplink_ingress",
	[P_POD_EGRESS_NETKIT] = "pod_egress_nk",
	[P_POD_INGRESS_NETKIT] = "pod_ingress_nk",
};

int ensure_bpffs(void)
{
	struct statfs st;

	if (!statfs("/sys/fs/bpf", &st) && st.f_type == BPF_FS_MAGIC)
		return 0;
	mkdir("/sys/fs/bpf", 0755);
	if (mount("bpf", "/sys/fs/bpf", "bpf", 0, "mode=0700"))
		return -errno;
	return 0;
}

void node_pin_path(const struct pi_node *n, char *buf, size_t len,
		   const char *fmt, ...)
{
	char rest[PATH_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(rest, sizeof(rest), fmt, ap);
	va_end(ap);
	snprintf(buf, len, "%s/%s", n->pin_dir, rest);
}

void node_reset(struct pi_node *n)
{
	memset(n, 0, sizeof(*n));
	n->netns_fd = -1;
	n->lock_fd = -1;
	n->meta_map = -1;
	for (int i = 0; i < M__COUNT; i++)
		n->maps[i] = -1;
	for (int i = 0; i < P__COUNT; i++)
		n->progs[i] = -1;
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* A waiter for the node's lock. flock() has no timeout, and polling it
 * (the first design) left the lock idle between a release and the next
 * poll and let late pollers win against early ones: with 32 CNI ADDs at
 * once the last of them waited for every other, plus the gaps. A blocking
 * flock() queues in the kernel and is woken by the release itself; it
 * runs in a thread of its own so that the caller can stop waiting at its
 * deadline. A waiter given up releases the lock at once if it ever gets
 * it, and frees itself. */
enum lock_wait_state { LW_WAITING, LW_DONE, LW_ABANDONED };

struct lock_wait {
	pthread_mutex_t mu;
	pthread_cond_t done;
	enum lock_wait_state state;
	int fd;
	int op;
	int err;
};

static void lock_wait_free(struct lock_wait *w)
{
	pthread_cond_destroy(&w->done);
	pthread_mutex_destroy(&w->mu);
	free(w);
}

static void *lock_wait_thread(void *arg)
{
	struct lock_wait *w = arg;
	int err;

	while ((err = flock(w->fd, w->op) ? -errno : 0) == -EINTR)
		;
	pthread_mutex_lock(&w->mu);
	if (w->state == LW_ABANDONED) {
		pthread_mutex_unlock(&w->mu);
		close(w->fd);	/* releases the lock if it was taken */
		lock_wait_free(w);
		return NULL;
	}
	w->err = err;
	w->state = LW_DONE;
	pthread_cond_signal(&w->done);
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

/* Takes flock(fd, op) before deadline (CLOCK_MONOTONIC, ms): 0, -EBUSY
 * at the deadline, or flock's error. On -EBUSY the descriptor belongs to
 * the waiter, which closes it; otherwise it stays the caller's. */
static int flock_until(int fd, int op, long long deadline)
{
	struct lock_wait *w;
	pthread_condattr_t ca;
	struct timespec ts = {
		.tv_sec = deadline / 1000,
		.tv_nsec = (deadline % 1000) * 1000000,
	};
	pthread_attr_t ta;
	pthread_t tid;
	int err;

	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->fd = fd;
	w->op = op;
	w->state = LW_WAITING;
	pthread_mutex_init(&w->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->done, &ca);
	pthread_condattr_destroy(&ca);
	pthread_attr_init(&ta);
	pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
	/* a waiter needs little stack: do not take the default 8 MiB */
	pthread_attr_setstacksize(&ta, 64 * 1024);
	err = -pthread_create(&tid, &ta, lock_wait_thread, w);
	pthread_attr_destroy(&ta);
	if (err) {
		lock_wait_free(w);
		return err;
	}
	pthread_mutex_lock(&w->mu);
	while (w->state == LW_WAITING &&
	       pthread_cond_timedwait(&w->done, &w->mu, &ts) != ETIMEDOUT)
		;
	if (w->state == LW_WAITING) {
		w->state = LW_ABANDONED;
		pthread_mutex_unlock(&w->mu);
		return -EBUSY;
	}
	err = w->err;
	pthread_mutex_unlock(&w->mu);
	/* the thread signalled under the mutex and touches w no more */
	lock_wait_free(w);
	return err;
}

/* The lock is a flock() on the pin directory itself (bpffs takes no plain
 * files), as xdp-tools locks its own. `node down` removes the directory
 * while holding it, so a waiter that gets the lock checks that the
 * directory it locked is still the node's. */
int node_lock_dir(const char *dir, enum node_lock lock, int timeout_ms)
{
	long long deadline = now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	int op = lock == NODE_LOCK_SHARED ? LOCK_SH : LOCK_EX;

	for (;;) {
		struct stat held, now;
		int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		int err;

		if (fd < 0)
			return -errno;
		err = flock(fd, op | LOCK_NB) ? -errno : 0;
		if (err == -EWOULDBLOCK || err == -EINTR) {
			if (deadline <= now_ms()) {
				close(fd);
				return -EBUSY;
			}
			err = flock_until(fd, op, deadline);
			if (err == -EBUSY)
				return err;	/* fd is the waiter's now */
		}
		if (err) {
			close(fd);
			return err;
		}
		if (!fstat(fd, &held) && !stat(dir, &now) &&
		    held.st_ino == now.st_ino && held.st_dev == now.st_dev)
			return fd;
		/* Taken down (and maybe up again) while we waited. */
		close(fd);
		if (access(dir, F_OK))
			return -ENOENT;
	}
}

/* A pin of the node could not be opened: missing (-ENOENT, the node is
 * broken), or out of files or memory (which says nothing of the node). */
static int incomplete(const struct pi_node *n, const char *path)
{
	int err = -errno;

	if (err == -ENOENT)
		pr_err("node '%s' is incomplete: %s is missing", n->name, path);
	else
		pr_err("node '%s': cannot open %s: %s", n->name, path,
		       strerror(-err));
	return err;
}

/* Reads the node's recorded ABI version whatever the layout of its
 * configuration: `abi` has been at offset 44 since it exists. n->cfg is
 * filled only when the layout is this build's. With `any`, any version
 * is accepted (the upgrader, lib/upgrade.c, decides what to do); else a
 * node of another version is refused with the way out in the message. */
int node_config_read(const char *path, uint8_t *raw, size_t len,
		     uint32_t *value_size, uint32_t *abi, bool *blank)
{
	struct bpf_map_info info = {};
	__u32 info_len = sizeof(info);
	uint32_t zero = 0;
	int fd, err = 0;

	*abi = 0;
	*blank = false;
	fd = bpf_obj_get(path);
	if (fd < 0)
		return -errno;
	if (bpf_obj_get_info_by_fd(fd, &info, &info_len)) {
		err = -errno;
		close(fd);
		return err;
	}
	*value_size = info.value_size;
	if (info.value_size >= 48 && info.value_size <= len &&
	    !bpf_map_lookup_elem(fd, &zero, raw)) {
		memcpy(abi, raw + 44, sizeof(*abi));
		*blank = true;
		for (uint32_t i = 0; i < info.value_size; i++)
			if (raw[i])
				*blank = false;
	}
	close(fd);
	return 0;
}

static int check_abi(struct pi_node *n, bool any)
{
	char path[PATH_MAX];
	uint8_t raw[512];
	uint32_t abi, from, value_size;
	bool blank;
	int err;

	node_pin_path(n, path, sizeof(path), "%s", node_map_names[M_NODE_CONFIG]);
	err = node_config_read(path, raw, sizeof(raw), &value_size, &abi,
			       &blank);
	if (err == -ENOENT) {
		errno = ENOENT;
		return incomplete(n, path);
	}
	if (err) {
		pr_err("node '%s': cannot read %s: %s", n->name, path,
		       strerror(-err));
		return err;
	}
	if (value_size == sizeof(n->cfg))
		memcpy(&n->cfg, raw, sizeof(n->cfg));
	n->cfg.abi = abi;
	/* Every build writes the node's name into the configuration `node
	 * up` pins (builds before the version was recorded too). One that is
	 * all zeros a `node up` pinned and never wrote: it was cut off. */
	if (blank) {
		pr_err("node '%s' is incomplete: %s was never written (a 'node up' cut off)",
		       n->name, path);
		return -ENOENT;
	}
	if (any || (abi == PI_ABI_VERSION && value_size == sizeof(n->cfg)))
		return 0;
	from = abi & ~PI_ABI_UPGRADING;
	if (abi & PI_ABI_UPGRADING)
		pr_err("node '%s' is being upgraded from ABI %u, or its upgrade was interrupted: "
		      "finish it with 'podinject -N %s node upgrade'", n->name,
		      from, n->name);
	else if (abi == PI_ABI_VERSION)
		pr_err("node '%s' is damaged: its configuration is %u bytes, not %zu; remove it with 'podinject -N %s node down --force'",
		      n->name, value_size, sizeof(n->cfg), n->name);
	else if (abi > PI_ABI_VERSION)
		pr_err("node '%s' was set up by another podinject build, a newer one (node ABI %u, this build uses %u): "
		      "this build does not downgrade a node; use the newer build, or remove the node with "
		      "'podinject -N %s node down --force'", n->name, abi,
		      PI_ABI_VERSION, n->name);
	else if (abi >= PI_ABI_OLDEST_UPGRADE)
		pr_err("node '%s' was set up by another podinject build, an older one (node ABI %u, this build uses %u): "
		      "migrate it in place with 'podinject -N %s node upgrade', which keeps its pods, policies, "
		      "grants, proxy rules and tracked flows (or remove it with 'podinject -N %s node down --force')",
		      n->name, abi, PI_ABI_VERSION, n->name, n->name);
	else
		pr_err("node '%s' was set up by another podinject build (node ABI %u, this build uses %u and upgrades from %u on): "
		      "take it down with the build that made it ('podinject -N %s node down'), "
		      "or with 'podinject -N %s node down --force', which removes its pins and links "
		      "but leaves its pods' namespaces and devices; then 'node up' again",
		      n->name, abi, PI_ABI_VERSION, PI_ABI_OLDEST_UPGRADE,
		      n->name, n->name);
	return -EPROTO;
}

int netns_cookie_self(uint64_t *cookie)
{
	socklen_t len = sizeof(*cookie);
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int err = 0;

	if (fd < 0)
		return -errno;
	if (getsockopt(fd, SOL_SOCKET, SO_NETNS_COOKIE, cookie, &len))
		err = -errno;
	close(fd);
	return err;
}

int node_host_dir(const char *name, char *buf, size_t len)
{
	uint64_t cookie;
	int err = netns_cookie_self(&cookie);

	if (err)
		return err;
	snprintf(buf, len, "%s/%s@%llu", PI_PIN_ROOT, name,
		 (unsigned long long)cookie);
	return 0;
}

void node_find_dir(const char *name, char *buf, size_t len)
{
	if (!node_host_dir(name, buf, len) && !access(buf, F_OK))
		return;
	snprintf(buf, len, "%s/%s", PI_PIN_ROOT, name);
}

int node_open(struct pi_node *n, const char *name, enum node_lock lock,
	      int timeout_ms)
{
	char dir[PATH_MAX];

	node_find_dir(name, dir, sizeof(dir));
	return node_open_dir(n, name, dir, lock, timeout_ms, NULL);
}

int node_open_dir(struct pi_node *n, const char *name, const char *dir,
		  enum node_lock lock, int timeout_ms, bool *broken)
{
	char path[PATH_MAX];
	bool gone = false;
	struct stat own;
	uint64_t ino;
	int err;

	node_reset(n);
	snprintf(n->name, sizeof(n->name), "%s", name);
	snprintf(n->pin_dir, sizeof(n->pin_dir), "%s", dir);
	err = ensure_bpffs();
	if (err) {
		pr_err("cannot mount bpffs at /sys/fs/bpf: %s", strerror(-err));
		return err;
	}
	n->lock_fd = lock == NODE_LOCK_HELD ? -1 :
		     node_lock_dir(n->pin_dir, lock, timeout_ms);
	/* `node up` makes the directory, then locks it: a command that got
	 * the lock in between finds no configuration yet. It lets go, so
	 * that node up takes the lock, and waits for the node to be whole. */
	for (int tries = 0; lock != NODE_LOCK_HELD && n->lock_fd >= 0 &&
	     tries < 100; tries++) {
		node_pin_path(n, path, sizeof(path), "%s",
			      node_map_names[M_NODE_CONFIG]);
		if (!access(path, F_OK))
			break;
		close(n->lock_fd);
		usleep(10 * 1000);
		n->lock_fd = node_lock_dir(n->pin_dir, lock, timeout_ms);
	}
	if (lock != NODE_LOCK_HELD && n->lock_fd < 0) {
		err = n->lock_fd;
		n->lock_fd = -1;
		if (err == -ENOENT)
			pr_err("node '%s' is not up (run: podinject -N %s node up)",
			      name, name);
		else if (err == -EBUSY)
			pr_err("node '%s' is busy: another command holds its lock (waited %d ms); try again later",
			      name, timeout_ms);
		else
			pr_err("cannot lock node '%s': %s", name, strerror(-err));
		return err;
	}
	/* Whose host node this is, before its version or its pins are
	 * looked at: a host node pinned before directories were keyed by
	 * namespace (NAME, not NAME@COOKIE) is found from every namespace,
	 * and one of another build or with a pin missing would otherwise
	 * be this caller's "another build" or "broken" node, which `node
	 * down` (--force) wipes though its pods live elsewhere. The fields
	 * read have kept their offsets since ABI 2. */
	if (!node_dir_host_netns(dir, &ino) && !stat(HOST_NETNS_PATH, &own) &&
	    ino != own.st_ino) {
		pr_err("node '%s' is not up in this network namespace (net:[%llu]); a host node of that name belongs to net:[%llu]",
		      name, (unsigned long long)own.st_ino,
		      (unsigned long long)ino);
		err = -ENOENT;
		goto fail;
	}
	err = check_abi(n, lock == NODE_LOCK_UPGRADE);
	if (err || lock == NODE_LOCK_UPGRADE) {
		gone = err == -ENOENT;
		goto fail;
	}
	for (int i = 0; i < M__COUNT; i++) {
		node_pin_path(n, path, sizeof(path), "%s", node_map_names[i]);
		n->maps[i] = bpf_obj_get(path);
		if (n->maps[i] < 0) {
			err = incomplete(n, path);
			gone = err == -ENOENT;
			goto fail;
		}
	}
	node_pin_path(n, path, sizeof(path), PI_POD_META_PIN);
	n->meta_map = bpf_obj_get(path);
	if (n->meta_map < 0) {
		err = incomplete(n, path);
		gone = err == -ENOENT;
		goto fail;
	}
	for (int i = 0; i < P__COUNT; i++) {
		node_pin_path(n, path, sizeof(path), "prog_%s",
			      node_prog_names[i]);
		n->progs[i] = bpf_obj_get(path);
		if (n->progs[i] < 0) {
			err = incomplete(n, path);
			gone = err == -ENOENT;
			goto fail;
		}
	}
	err = netns_open_any(node_netns(n));
	if (err < 0) {
		/* Only a named namespace can be deleted under its node: the
		 * host's own is the caller's, and fails to open only for want
		 * of files or memory. */
		gone = err == -ENOENT && !(n->cfg.flags & PI_NODE_HOST);
		pr_err("node '%s': cannot open its namespace: %s", name,
		       strerror(-err));
		goto fail;
	}
	n->netns_fd = err;
	if (n->cfg.flags & PI_NODE_HOST) {
		struct stat st;

		if (fstat(n->netns_fd, &st)) {
			err = -errno;
			goto fail;
		}
		/* A host node pinned before its directory was keyed by its
		 * namespace, and seen from another: not this namespace's. */
		if (st.st_ino != n->cfg.netns_ino) {
			pr_err("node '%s' is not up in this network namespace (net:[%llu]); a host node of that name belongs to net:[%llu]",
			      name, (unsigned long long)st.st_ino,
			      (unsigned long long)n->cfg.netns_ino);
			err = -ENOENT;
			goto fail;
		}
	}
	return 0;
fail:
	if (!err)
		return 0;	/* NODE_LOCK_UPGRADE: locked, version read */
	if (broken)
		*broken = gone;
	node_close(n);
	return err;
}

/* Is any thread of any process in the namespace with inode `ino`? */
static bool netns_has_thread(uint64_t ino)
{
	DIR *procs = opendir("/proc");
	struct dirent *p;
	bool found = false;

	if (!procs)
		return true;	/* cannot tell: say alive */
	while (!found && (p = readdir(procs))) {
		char path[PATH_MAX];
		struct dirent *t;
		DIR *tasks;

		if (p->d_name[0] < '0' || p->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/task", p->d_name);
		tasks = opendir(path);
		if (!tasks)
			continue;	/* exited meanwhile */
		while (!found && (t = readdir(tasks))) {
			struct stat st;

			if (t->d_name[0] < '0' || t->d_name[0] > '9')
				continue;
			snprintf(path, sizeof(path), "/proc/%s/task/%s/ns/net",
				 p->d_name, t->d_name);
			found = !stat(path, &st) && st.st_ino == ino;
		}
		closedir(tasks);
	}
	closedir(procs);
	return found;
}

/* Does a mount of this mount namespace hold it (`ip netns add` makes one
 * in /run/netns, runtimes make their own)? mountinfo's fourth field of an
 * nsfs mount is "net:[INO]". */
static bool mounts_have(const char *mountinfo, const char *want)
{
	FILE *f = fopen(mountinfo, "re");
	char line[4096];
	bool found = false;

	if (!f)
		return false;	/* exited meanwhile */
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, want) != NULL;
	fclose(f);
	return found;
}

/* A bind mount of the namespace (ip netns add, a runtime's netns dir) in
 * any mount namespace a process is in: a container runtime keeps its
 * namespaces' mounts in a mount namespace of its own. */
static bool netns_has_mount(uint64_t ino)
{
	DIR *procs = opendir("/proc");
	char want[48], path[PATH_MAX];
	struct dirent *p;
	bool found;

	if (!procs)
		return true;	/* cannot tell: say alive */
	snprintf(want, sizeof(want), " net:[%llu] ", (unsigned long long)ino);
	found = mounts_have("/proc/self/mountinfo", want);
	while (!found && (p = readdir(procs))) {
		if (p->d_name[0] < '0' || p->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/mountinfo", p->d_name);
		found = mounts_have(path, want);
	}
	closedir(procs);
	return found;
}

/* Whether this process sees every process of the machine: its PID
 * namespace is the first one (the kernel's fixed inode for it). */
#define PROC_PID_INIT_INO	0xEFFFFFFCU
static bool sees_all_processes(void)
{
	struct stat st;

	return !stat("/proc/self/ns/pid", &st) && st.st_ino == PROC_PID_INIT_INO;
}

/* A link pinned below a node's directory that is still attached to a
 * device: a tcx, netkit or XDP link reports ifindex 0 once its device is
 * gone, and every device goes with its namespace. 1 for such a link (or
 * one that cannot be read: then say alive). */
static int link_is_live(const char *path, const char *name, void *ctx)
{
	struct bpf_link_info info;
	__u32 len = sizeof(info);
	int fd, live = 0;

	if (strncmp(name, "link_", 5))
		return 0;
	fd = bpf_obj_get(path);
	if (fd < 0)
		return 0;
	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(fd, &info, &len))
		live = 1;
	else if (info.type == PI_LINK_TYPE_XDP ||
		 info.type == PI_LINK_TYPE_TCX ||
		 info.type == PI_LINK_TYPE_NETKIT)
		/* ifindex is the first member of each of their union parts
		 * (the installed header may know XDP's only) */
		live = info.xdp.ifindex != 0;
	close(fd);
	return live;
}

static bool pins_have_live_link(const char *dir)
{
	return pin_tree_walk(dir, link_is_live, NULL) == 1;
}

int node_dir_host_netns(const char *dir, uint64_t *ino)
{
	struct bpf_map_info info = {};
	__u32 len = sizeof(info), flags;
	char path[PATH_MAX];
	uint8_t raw[512];
	uint32_t zero = 0;
	int fd, err = 0;

	snprintf(path, sizeof(path), "%s/%s", dir,
		 node_map_names[M_NODE_CONFIG]);
	fd = bpf_obj_get(path);
	if (fd < 0)
		return -errno;
	/* Any build's node from ABI 2 on: flags and netns_ino have kept
	 * their offsets (include/podinject_abi.h), whatever came after. */
	if (bpf_obj_get_info_by_fd(fd, &info, &len))
		err = -errno;
	else if (info.value_size < offsetof(struct pi_node_config, netns_ino) + 8 ||
		 info.value_size > sizeof(raw))
		err = -EPROTO;
	else if (bpf_map_lookup_elem(fd, &zero, raw))
		err = -errno;
	close(fd);
	if (err)
		return err;
	memcpy(&flags, raw + offsetof(struct pi_node_config, flags), 4);
	memcpy(ino, raw + offsetof(struct pi_node_config, netns_ino), 8);
	return (flags & PI_NODE_HOST) && *ino ? 0 : -ENOTTY;
}

bool node_host_stale(const char *dir)
{
	struct stat own;
	uint64_t ino;

	if (stat(HOST_NETNS_PATH, &own) || node_dir_host_netns(dir, &ino) ||
	    ino == own.st_ino)
		return false;
	/* From another PID namespace (a kind node, a nested runtime sharing
	 * the machine's bpffs), the processes that hold a namespace may be
	 * out of sight, and with them the node of a runtime that is alive:
	 * only what sees them all may call a node stale. */
	if (!sees_all_processes())
		return false;
	return !netns_has_thread(ino) && !netns_has_mount(ino) &&
	       !pins_have_live_link(dir);
}

void node_sweep_stale(void)
{
	DIR *root = opendir(PI_PIN_ROOT);
	struct dirent *de;

	if (!root)
		return;
	while ((de = readdir(root))) {
		char dir[PATH_MAX];
		int fd;

		bool up_tmp = !strncmp(de->d_name, PI_UP_TMP_PREFIX,
				       strlen(PI_UP_TMP_PREFIX));

		if (de->d_name[0] == '.' && !up_tmp)
			continue;
		snprintf(dir, sizeof(dir), "%s/%s", PI_PIN_ROOT, de->d_name);
		/* A node someone works on is not taken from under them. */
		fd = node_lock_dir(dir, NODE_LOCK_EXCLUSIVE, 0);
		if (fd < 0)
			continue;
		/* `node up`'s own directory before its rename, locked free:
		 * its maker died before the node had its name */
		if (up_tmp) {
			rm_tree(dir);
			close(fd);
			continue;
		}
		if (node_host_stale(dir)) {
			int err = rm_tree(dir);

			if (err)
				pr_warn("cannot remove stale host node %s: %s",
					dir, strerror(-err));
			else
				pr_info("removed host node %s: its network namespace is gone",
					dir);
		}
		close(fd);
	}
	closedir(root);
}

int node_unlock(struct pi_node *n)
{
	if (n->lock_fd < 0)
		return -EBADF;
	if (flock(n->lock_fd, LOCK_UN))
		return -errno;
	close(n->lock_fd);
	n->lock_fd = -1;
	n->lock_lost = true;
	return 0;
}

int node_relock(struct pi_node *n, int timeout_ms)
{
	int fd = node_lock_dir(n->pin_dir, NODE_LOCK_EXCLUSIVE, timeout_ms);

	if (fd < 0)
		return fd;
	n->lock_fd = fd;
	n->lock_lost = false;
	return 0;
}

void node_close(struct pi_node *n)
{
	for (int i = 0; i < M__COUNT; i++)
		if (n->maps[i] >= 0)
			close(n->maps[i]);
	for (int i = 0; i < P__COUNT; i++)
		if (n->progs[i] >= 0)
			close(n->progs[i]);
	if (n->meta_map >= 0)
		close(n->meta_map);
	if (n->netns_fd >= 0)
		close(n->netns_fd);
	if (n->lock_fd >= 0)
		close(n->lock_fd);	/* releases the lock */
	node_reset(n);
}

int node_enter(const struct pi_node *n, int *saved)
{
	return netns_enter(n->netns_fd, saved);
}

int node_save_config(struct pi_node *n)
{
	uint32_t zero = 0;

	return bpf_map_update_elem(n->maps[M_NODE_CONFIG], &zero, &n->cfg, 0) ?
	       -errno : 0;
}

/* A pod of the API from its two records, and (pod_store) back. The flags
 * pass as they are: the API's are the datapath's (lib/abi_ties.c). */
static void pod_join(struct pi_pod_info *out, const struct pi_pod *dp,
		     const struct pi_pod_meta *m)
{
	memset(out, 0, sizeof(*out));
	snprintf(out->name, sizeof(out->name), "%s", m->name);
	snprintf(out->netns, sizeof(out->netns), "%s", m->netns);
	snprintf(out->ifname, sizeof(out->ifname), "%s", m->ifname);
	snprintf(out->hostdev, sizeof(out->hostdev), "%s", m->hostdev);
	snprintf(out->attach_id, sizeof(out->attach_id), "%s", m->attach_id);
	out->meta_flags = m->flags;
	out->id = dp->id;
	out->ifindex = dp->ifindex;
	out->peer_ifindex = dp->peer_ifindex;
	out->flags = dp->flags;
	out->ip4 = dp->ip4;
	memcpy(out->ip6, dp->ip6, 16);
	memcpy(out->pod_mac, dp->pod_mac, 6);
	memcpy(out->host_mac, dp->host_mac, 6);
}

int pod_by_ifindex(const struct pi_node *n, uint32_t ifindex, struct pi_pod_info *pod)
{
	struct pi_pod_meta m;
	struct pi_pod dp;

	if (bpf_map_lookup_elem(n->maps[M_PODS], &ifindex, &dp) ||
	    bpf_map_lookup_elem(n->meta_map, &ifindex, &m))
		return -ENOENT;
	pod_join(pod, &dp, &m);
	return 0;
}

int pod_store(const struct pi_node *n, const struct pi_pod_info *pod, uint64_t flags)
{
	struct pi_pod dp = {
		.id = pod->id,
		.ifindex = pod->ifindex,
		.peer_ifindex = pod->peer_ifindex,
		/* derived, so that a record an older build wrote gets it
		 * with its next store */
		.flags = pod->flags |
			 (pod_has_datapath(pod) ? 0 : PI_POD_PASS_ON),
		.ip4 = pod->ip4,
	};
	struct pi_pod_meta m = {};

	/* The head's owners are kept by pod_head_owners() alone. */
	if (flags == BPF_EXIST)
		bpf_map_lookup_elem(n->meta_map, &pod->ifindex, &m);
	m.flags = pod->meta_flags;
	memcpy(dp.ip6, pod->ip6, 16);
	memcpy(dp.pod_mac, pod->pod_mac, 6);
	memcpy(dp.host_mac, pod->host_mac, 6);
	snprintf(m.name, sizeof(m.name), "%s", pod->name);
	snprintf(m.netns, sizeof(m.netns), "%s", pod->netns);
	snprintf(m.ifname, sizeof(m.ifname), "%s", pod->ifname);
	snprintf(m.hostdev, sizeof(m.hostdev), "%s", pod->hostdev);
	snprintf(m.attach_id, sizeof(m.attach_id), "%s", pod->attach_id);
	/* Meta first: a pod the datapath knows always has a name. */
	if (bpf_map_update_elem(n->meta_map, &pod->ifindex, &m, flags))
		return -errno;
	if (bpf_map_update_elem(n->maps[M_PODS], &pod->ifindex, &dp, flags)) {
		int err = -errno;

		if (flags == BPF_NOEXIST)
			bpf_map_delete_elem(n->meta_map, &pod->ifindex);
		return err;
	}
	return 0;
}

void pod_forget(const struct pi_node *n, const struct pi_pod_info *pod)
{
	bpf_map_delete_elem(n->maps[M_PODS], &pod->ifindex);
	bpf_map_delete_elem(n->meta_map, &pod->ifindex);
}

int pod_head_owners(const struct pi_node *n, uint32_t ifindex, uint32_t set,
		    uint32_t clear, uint32_t *now)
{
	struct pi_pod_meta m;

	if (now)
		*now = 0;
	if (bpf_map_lookup_elem(n->meta_map, &ifindex, &m))
		return -ENOENT;
	m.head_owners = (m.head_owners | set) & ~clear;
	if (now)
		*now = m.head_owners;
	return bpf_map_update_elem(n->meta_map, &ifindex, &m, BPF_EXIST) ?
	       -errno : 0;
}

int pod_netns_open(const struct pi_pod_info *pod)
{
	return netns_open_any(pod->netns);
}

int pod_netns_enter(const struct pi_pod_info *pod, int *saved)
{
	int ns = pod_netns_open(pod), err;

	if (ns < 0)
		return ns;
	err = netns_enter(ns, saved);
	close(ns);
	return err;
}

void pods_unreadable(const struct pi_node *n, int err)
{
	pr_err("cannot read the pods of node '%s': %s", n->name, strerror(-err));
}

struct find_ctx {
	const struct pi_node *n;
	const char *name;	/* by name, or */
	const char *attach_id;	/* by who attached it */
	struct pi_pod_info *out;
};

/* A pod is both records: a name whose other record is missing is passed
 * over, as pod_by_ifindex() has it. */
static int find_one(uint32_t key, const void *val, void *c)
{
	const struct pi_pod_meta *m = val;
	struct find_ctx *ctx = c;
	struct pi_pod dp;

	const char *have = ctx->name ? m->name : m->attach_id;

	/* both fields are written NUL-terminated (pod_store) */
	if (!*have || strcmp(have, ctx->name ? ctx->name : ctx->attach_id))
		return 0;
	if (bpf_map_lookup_elem(ctx->n->maps[M_PODS], &key, &dp))
		return 0;
	pod_join(ctx->out, &dp, m);
	return 1;
}

/* The names (or attach ids) alone are scanned; only the pod found is read
 * whole. A scan that failed found nothing, which is not "no such pod". */
static int find_by(struct find_ctx *ctx)
{
	int ret = map_scan_u32(ctx->n->meta_map, sizeof(struct pi_pod_meta),
			       find_one, ctx);

	if (ret < 0)
		pods_unreadable(ctx->n, ret);
	return ret == 1 ? 0 : ret < 0 ? ret : -ENOENT;
}

int pod_find(const struct pi_node *n, const char *name, struct pi_pod_info *pod)
{
	struct find_ctx ctx = { .n = n, .name = name, .out = pod };

	return find_by(&ctx);
}

int pod_find_attach(const struct pi_node *n, const char *id,
		    struct pi_pod_info *pod)
{
	struct find_ctx ctx = { .n = n, .attach_id = id, .out = pod };

	return find_by(&ctx);
}

int pod_lookup(const struct pi_node *n, const char *name,
	       struct pi_pod_info *pod)
{
	int err;

	if (!pi_valid_pod_name(name)) {
		pr_err("invalid pod name '%s'", name ? name : "");
		return -EINVAL;
	}
	err = pod_find(n, name, pod);
	if (err == -ENOENT) {
		pr_err("no pod '%s' on node '%s'", name, n->name);
		return -ESRCH;
	}
	return err;
}

static int cmp_pod(const void *a, const void *b)
{
	const struct pi_pod_info *x = a, *y = b;

	return (int)x->id - (int)y->id;
}

/* Calls fn(key, value, ctx) for every entry of a hash map, reading a
 * batch of entries a call where a walk key by key makes two calls an
 * entry (and starts again from the first key when the one it stands on
 * is deleted), until fn returns non-zero (which is returned). Every ADD
 * and DEL looks for a name across all pods with the node's lock held: on
 * a node of a thousand pods the walk was three thousand calls under the
 * lock. The buffer stays small (a big one costs its page faults on every
 * call); it grows only if one hash bucket holds more entries than it
 * (ENOSPC). The last batch ends with ENOENT and still holds what it
 * returned. */
int map_scan(int fd, size_t ksz, size_t vsz, uint32_t chunk,
	     int (*fn)(const void *key, const void *val, void *ctx), void *ctx)
{
	LIBBPF_OPTS(bpf_map_batch_opts, opts);
	char *keys = NULL, *vals = NULL;
	uint64_t token = 0;
	void *in = NULL;
	int ret = 0;

	for (;;) {
		uint32_t got = chunk;
		bool last;

		if (!keys) {
			keys = calloc(chunk, ksz);
			vals = calloc(chunk, vsz);
			if (!keys || !vals) {
				ret = -ENOMEM;
				break;
			}
		}
		if (bpf_map_lookup_batch(fd, in, &token, keys, vals, &got,
					 &opts)) {
			if (errno == ENOSPC && !got && chunk < (1u << 20)) {
				free(keys);
				free(vals);
				keys = NULL;
				vals = NULL;
				chunk *= 2;
				continue;
			}
			if (errno != ENOENT) {
				ret = -errno;
				break;
			}
			last = true;
		} else {
			last = false;
		}
		for (uint32_t i = 0; i < got && !ret; i++)
			ret = fn(keys + (size_t)i * ksz, vals + (size_t)i * vsz,
				 ctx);
		if (ret || last)
			break;
		in = &token;
	}
	free(keys);
	free(vals);
	return ret;
}

struct scan_u32 {
	int (*fn)(uint32_t key, const void *val, void *ctx);
	void *ctx;
};

static int scan_u32_one(const void *key, const void *val, void *c)
{
	const struct scan_u32 *s = c;
	uint32_t k;

	memcpy(&k, key, sizeof(k));
	return s->fn(k, val, s->ctx);
}

int map_scan_u32(int fd, size_t vsz,
		 int (*fn)(uint32_t key, const void *val, void *ctx), void *ctx)
{
	struct scan_u32 s = { fn, ctx };

	return map_scan(fd, sizeof(uint32_t), vsz, 64, scan_u32_one, &s);
}

struct walk_ctx {
	const struct pi_node *n;
	struct pi_pod_info *all;
	uint32_t cnt;
};

/* A pod is both records: one without the other is skipped, as
 * pod_by_ifindex() has it. */
static int walk_one(uint32_t key, const void *val, void *c)
{
	struct walk_ctx *w = c;
	struct pi_pod dp;

	if (w->cnt < PI_DP_MAX_PODS &&
	    !bpf_map_lookup_elem(w->n->maps[M_PODS], &key, &dp))
		pod_join(&w->all[w->cnt++], &dp, val);
	return 0;
}

int pod_for_each(const struct pi_node *n,
		 int (*fn)(const struct pi_node *n, const struct pi_pod_info *pod,
			   void *ctx), void *ctx)
{
	/* Per call, not static: fn may walk the pods again (pod removal
	 * re-syncs injection state of every pod). */
	struct walk_ctx w = { .n = n, .all = calloc(PI_DP_MAX_PODS, sizeof(*w.all)) };
	int ret;

	if (!w.all)
		return -ENOMEM;
	ret = map_scan_u32(n->meta_map, sizeof(struct pi_pod_meta), walk_one, &w);
	if (!ret) {
		qsort(w.all, w.cnt, sizeof(w.all[0]), cmp_pod);
		for (uint32_t i = 0; i < w.cnt && !ret; i++)
			ret = fn(n, &w.all[i], ctx);
	}
	free(w.all);
	return ret;
}

int pod_stats_sum(const struct pi_node *n, uint32_t pod_id,
		  struct pi_pod_stats *out)
{
	int ncpu = libbpf_num_possible_cpus();
	struct pi_dp_pod_stats *per;

	memset(out, 0, sizeof(*out));
	if (ncpu <= 0)
		return -EINVAL;
	per = calloc(ncpu, sizeof(*per));
	if (!per)
		return -ENOMEM;
	if (bpf_map_lookup_elem(n->maps[M_POD_STATS], &pod_id, per)) {
		free(per);
		return -errno;
	}
	/* The sum is the conversion: the API's drop reasons are the
	 * datapath's (lib/abi_ties.c). */
	for (int c = 0; c < ncpu; c++) {
		out->egress_packets += per[c].egress_packets;
		out->egress_bytes += per[c].egress_bytes;
		out->ingress_packets += per[c].ingress_packets;
		out->ingress_bytes += per[c].ingress_bytes;
		for (int r = 0; r < PI_DP_DROP_MAX; r++)
			out->drops[r] += per[c].drops[r];
	}
	free(per);
	return 0;
}

void pod_name_by_ifindex(const struct pi_node *n, uint32_t ifindex, char *buf,
			 size_t len)
{
	struct pi_pod_meta m;

	if (!bpf_map_lookup_elem(n->meta_map, &ifindex, &m))
		snprintf(buf, len, "%s", m.name);
	else
		snprintf(buf, len, "ifindex-%u", ifindex);
}
