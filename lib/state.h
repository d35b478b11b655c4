/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A node's state is its pinned BPF objects under /sys/fs/bpf/podinject/NODE:
 * the maps hold pods, endpoints, policy and counters, so every command reads
 * the truth from the kernel and no state file can go stale.
 */
#ifndef PODINJECT_STATE_H
#define PODINJECT_STATE_H

#include <limits.h>
#include <stdbool.h>
#include "internal.h"
#include "attach.h"

#define PI_PIN_ROOT	"/sys/fs/bpf/podinject"
/* A pin directory `node up` makes and locks before it renames it to the
 * node's (PI_PIN_ROOT/PI_UP_TMP_PREFIX NAME-PID; no node name has a
 * '_', and bpffs takes no '.'); not a node. */
#define PI_UP_TMP_PREFIX	"_up_"
#define PI_POD_META_PIN	"pod_meta"

enum node_map {
	M_PODS, M_ENDPOINTS, M_NODE_CONFIG, M_POD_STATS, M_RULES,
	M_POLICY_REFS, M_RULE_STATS, M_CT, M_CLS_HEADS, M_CLS_ADDRS, M_CLS_L4,
	M_CLS_PORTS, M_CLS_CLASSES, M_CLS_CHUNKS, M__COUNT,
};
enum node_prog {
	P_POD_EGRESS, P_POD_INGRESS, P_UPLINK_INGRESS, P_POD_EGRESS_NETKIT,
	P_POD_INGRESS_NETKIT, P__COUNT,
};

extern const char *const node_map_names[M__COUNT];
extern const char *const node_prog_names[P__COUNT];

struct pi_node {
	char name[PI_NAME_LEN];
	char pin_dir[PATH_MAX];
	int netns_fd;
	int lock_fd;			/* the pin directory, flock()ed */
	bool lock_lost;			/* given up (node_unlock) and not
					 * taken back: no more changes */
	int meta_map;			/* pod_meta */
	int maps[M__COUNT];
	int progs[P__COUNT];
	struct pi_node_config cfg;
};

/* How a command holds the node while it runs: readers share it, a command
 * that changes anything holds it alone from its first check to the end of
 * its rollback. */
enum node_lock {
	NODE_LOCK_SHARED,
	NODE_LOCK_EXCLUSIVE,
	NODE_LOCK_HELD,		/* the caller holds it already (node up/down) */
	NODE_LOCK_UPGRADE,	/* exclusive; node_open only reads the recorded
				 * version (n->cfg.abi), of any build, and opens
				 * nothing else (lib/upgrade.c) */
};

/* The oldest node version lib/upgrade.c migrates from (v0.1's). */
#define PI_ABI_OLDEST_UPGRADE	4

#define NODE_LOCK_TIMEOUT_MS	PI_LOCK_TIMEOUT_MS

enum pi_node_flags_ext {
	PI_NODE_OWNS_NETNS = 1 << 8,	/* node up made the namespace */
	PI_NODE_HOST = 1 << 9,		/* the node is the host's own (root)
					 * namespace, not one named NODE */
	/* node up made the uplink's clsact qdisc (attach: clsact): node
	 * down removes it again when no other filter is left on it */
	PI_NODE_OWNS_UPLINK_QDISC = 1 << 10,
};

/* A host node's namespace is the one `node up --host` ran in, known by
 * its inode (PID 1's may be out of reach); commands on the node must run
 * there too. Its pin directory is keyed by that namespace's cookie
 * (NAME@COOKIE, see node_host_dir()), so runtimes in different namespaces
 * of one machine each have their own node of one name. */
#define HOST_NETNS_PATH	"/proc/thread-self/ns/net"

/* The node's namespace, as netns_open_any() takes it. */
static inline const char *node_netns(const struct pi_node *n)
{
	return n->cfg.flags & PI_NODE_HOST ? HOST_NETNS_PATH : n->name;
}

static inline enum pi_attach_mode node_attach_mode(const struct pi_node *n)
{
	return n->cfg.flags & PI_NODE_TCX ? PI_ATTACH_TCX : PI_ATTACH_CLSACT;
}

int ensure_bpffs(void);
/* The calling thread's network namespace cookie: unique for the boot and
 * never reused, unlike the namespace's inode number. */
int netns_cookie_self(uint64_t *cookie);
/* The pin directory a host node `name` of the calling thread's namespace
 * has: PI_PIN_ROOT/NAME@COOKIE. */
int node_host_dir(const char *name, char *buf, size_t len);
/* Where node `name` is, seen from the calling thread's namespace: its host
 * node there if it has one, else the named node's PI_PIN_ROOT/NAME (which
 * may not exist). */
void node_find_dir(const char *name, char *buf, size_t len);
/* Opens the node `name` that is up: takes its lock (waiting up to
 * timeout_ms, then -EBUSY), checks its ABI version (-EPROTO when another
 * build made it), opens maps, programs, namespace. Reports its own errors;
 * returns 0 or -errno (-ENOENT: not up here, which a host node of another
 * namespace is). */
int node_open(struct pi_node *n, const char *name, enum node_lock lock,
	      int timeout_ms);
/* node_open of the node whose pin directory is `dir`. *broken (may be
 * NULL) is set when the open failed because the node is provably broken:
 * a pin missing, or the namespace of a named node deleted. Every other
 * failure (another build's node, out of memory or files, another
 * namespace's host node) says nothing against the node. */
int node_open_dir(struct pi_node *n, const char *name, const char *dir,
		  enum node_lock lock, int timeout_ms, bool *broken);
/* Host nodes whose namespace is gone: removes their pins (which detaches
 * their links) and says so. A node is gone only when no thread of any
 * process is in its namespace, no mount of this mount namespace holds it,
 * and none of its pinned links is attached to a device. */
void node_sweep_stale(void);
/* The namespace inode of the host node pinned at `dir`: 0, or -ENOTTY for
 * a named node, -EPROTO for another layout, -errno when unreadable. */
int node_dir_host_netns(const char *dir, uint64_t *ino);
/* Is the node pinned at `dir` a host node of another namespace that is
 * gone (see node_sweep_stale())? The caller holds its lock. */
bool node_host_stale(const char *dir);
/* Takes the lock of the pin directory `dir`; the fd, or -errno. */
int node_lock_dir(const char *dir, enum node_lock lock, int timeout_ms);
/* The node configuration pinned at `path`: its raw value into raw[len]
 * (when it fits), its recorded ABI version (0: none recorded) and whether
 * it is all zeros (never written). */
int node_config_read(const char *path, uint8_t *raw, size_t len,
		     uint32_t *value_size, uint32_t *abi, bool *blank);
void node_close(struct pi_node *n);
void node_reset(struct pi_node *n);	/* an unopened node, all fds -1 */
/* Lets go of the node's lock and takes it (exclusively) again, for a
 * command whose middle part changes nothing of the node. */
int node_unlock(struct pi_node *n);
int node_relock(struct pi_node *n, int timeout_ms);

int node_enter(const struct pi_node *n, int *saved);
int node_save_config(struct pi_node *n);
void node_pin_path(const struct pi_node *n, char *buf, size_t len,
		   const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Pods */
int pod_find(const struct pi_node *n, const char *name, struct pi_pod_info *pod);
/* The pod attached as `id` (-ENOENT if none, another error if the pods
 * could not be read). */
int pod_find_attach(const struct pi_node *n, const char *id,
		    struct pi_pod_info *pod);
int pod_by_ifindex(const struct pi_node *n, uint32_t ifindex, struct pi_pod_info *pod);
/* pod_find for a name from a caller: logs, and -EINVAL for a name no pod
 * can have, -ESRCH for no such pod. */
int pod_lookup(const struct pi_node *n, const char *name,
	       struct pi_pod_info *pod);
/* Writes both records of a pod; flags as bpf_map_update_elem's. */
int pod_store(const struct pi_node *n, const struct pi_pod_info *pod, uint64_t flags);
void pod_forget(const struct pi_node *n, const struct pi_pod_info *pod);
/* The reference datapath's programs are on the pod's device (not a pod
 * whose CNI chain said "datapath": "none"). */
static inline bool pod_has_datapath(const struct pi_pod_info *pod)
{
	return !(pod->meta_flags & PI_META_NO_DATAPATH);
}
/* Whether podinject's programs are on the pod's device (lib/pod.c). */
bool pod_programs_on(const struct pi_node *n, const struct pi_pod_info *pod);
/* On a pod another plugin routes ("datapath": "none"): attaches the
 * programs (checking and passing on, PI_POD_PASS_ON) when `on`, takes
 * them off when not; nothing for a reference pod or when they are so. */
int pod_policy_programs(const struct pi_node *n, const struct pi_pod_info *pod,
			bool on);
/* Whether the pod has a rule in either direction (lib/policy.c). */
bool policy_pod_has_rules(const struct pi_node *n, uint32_t pod_id);
/* Sets and clears bits of the pod's head owners; *now gets what is left
 * (0 when the pod has no record). */
int pod_head_owners(const struct pi_node *n, uint32_t ifindex, uint32_t set,
		    uint32_t clear, uint32_t *now);
/* fn(key, value, ctx) for every entry of a hash map, read in batches of
 * `chunk` entries (more when a bucket holds more), each entry once;
 * stops at fn's first non-zero return, which it returns. */
int map_scan(int fd, size_t ksz, size_t vsz, uint32_t chunk,
	     int (*fn)(const void *key, const void *val, void *ctx), void *ctx);
/* map_scan of a hash keyed by a __u32 (the pods' maps). */
int map_scan_u32(int fd, size_t vsz,
		 int (*fn)(uint32_t key, const void *val, void *ctx), void *ctx);
/* Logs that the pods of n could not be read (err: a negative errno). */
void pods_unreadable(const struct pi_node *n, int err);
/* Calls fn for every pod, in id order; stops on a non-zero return. */
int pod_for_each(const struct pi_node *n,
		 int (*fn)(const struct pi_node *n, const struct pi_pod_info *pod,
			   void *ctx), void *ctx);
/* The pod's namespace: an O_RDONLY fd, or -errno. */
int pod_netns_open(const struct pi_pod_info *pod);
/* Moves the calling thread into the pod's namespace; *saved as
 * netns_enter's, for netns_restore(). */
int pod_netns_enter(const struct pi_pod_info *pod, int *saved);
/* The pod's name, or "ifindex-N" for a device that is no pod (any more). */
void pod_name_by_ifindex(const struct pi_node *n, uint32_t ifindex, char *buf,
			 size_t len);
int pod_stats_sum(const struct pi_node *n, uint32_t pod_id,
		  struct pi_pod_stats *out);

/* ct.c: the tracker's entries of a pod that gets its first rule (its open
 * connections, entered to be decided again by their first packet), and
 * of one whose last rule goes. ct_seed_pod returns how many it entered or
 * -errno, having warned; ct_seed_entry is one entry (BPF_NOEXIST). */
int ct_seed_pod(const struct pi_node *n, uint32_t pod_id);
int ct_seed_entry(int ct_fd, int refs_fd, const struct pi_ct_key *k,
		  uint32_t dir, uint8_t state);
void ct_forget_pod_id(const struct pi_node *n, uint32_t pod_id);

#endif
