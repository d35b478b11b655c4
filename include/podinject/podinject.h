/* SPDX-License-Identifier: GPL-2.0 */
/*
 * libpodinject: podinject's control plane, for the CLI, the CNI plugin and
 * any agent that links it (build/libpodinject.a).
 *
 * Rules of the API, as libbpf's:
 *   - every function returns 0 (or a count where it says so) or -errno;
 *   - nothing is printed: details go to the log callback (pi_set_log);
 *   - nothing exits, nothing keeps global state but the log callback;
 *   - a call that fails undoes what it did.
 * Errors a caller may want to tell apart:
 *   -ENOENT      the node is not up
 *   -EBUSY       the node's lock was not had within the timeout: try again
 *   -EPROTO      the node was made by a build of another ABI version
 *   -ESRCH       no such pod (or rule, or authorisation)
 *   -EEXIST      a pod of that name exists, or the device is a pod already
 *   -EADDRINUSE  an address belongs to another pod of the node
 *   -EINVAL      an argument that cannot be right
 *   -ENXIO       a namespace or device named by the caller does not exist
 *                or is not what it must be (an uplink of pi_node_up too)
 *   -EBADF       a call that changes the node (pod add/adopt/del/check,
 *                policy add/del, inject allow/deny, proxy add/del, probes,
 *                ct flush and timeouts, apply but for a dry run) on a
 *                handle opened PI_OPEN_READ
 *   -EALREADY    pi_node_up: the node is up already
 * Calls that change a node hold its lock (a flock on its pin directory)
 * for their whole transaction; reads hold it shared.
 *
 * Every type and constant here is the library's own. The datapath's map
 * layouts are internal to the library (its BPF ABI header, which this one
 * does not include): they may change from one build to the next (a node is
 * then upgraded in place, pi_node_upgrade), and that changes nothing here.
 * This header needs only the C library's headers.
 */
#ifndef PODINJECT_PODINJECT_H
#define PODINJECT_PODINJECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- values shared by the calls below --------------------------------- */

#define PI_NAME_LEN		32	/* a node's name, with its NUL */
/* The longest name a node may take (pi_valid_name): a named node's is
 * its namespace's and the start of its devices' names. */
#define PI_NODE_NAME_MAX	15
#define PI_MAX_PODS		1024	/* pods of a node; pod ids are below it */
#define PI_POD_NAME_MAX		253	/* a DNS name; Kubernetes ns/name fits */
#define PI_NETNS_MAX		256	/* a namespace name or path, with its NUL */
#define PI_ATTACH_ID_MAX	128	/* an attachment id, with its NUL */

/* Address of either family: IPv4 in a[0], the rest zero. Network order. */
struct pi_addr {
	uint32_t a[4];
};

enum pi_policy_dir {
	PI_DIR_EGRESS = 0,
	PI_DIR_INGRESS = 1,
};

/* The version of the pinned state (maps, programs, their layouts) that
 * this build of the library makes and reads: what pi_node_upgrade()
 * migrates from and to. A number of the running library, not of the
 * header: it changes with the datapath, which the API does not. */
uint32_t pi_abi_version(void);

/* ---- log -------------------------------------------------------------- */

enum pi_log_level {
	PI_LOG_ERROR,
	PI_LOG_WARN,
	PI_LOG_INFO,
	PI_LOG_DEBUG,
};

typedef void (*pi_log_fn)(enum pi_log_level level, const char *msg,
			  void *ctx);

/* Where the library's messages go; NULL drops them (the default). Like
 * libbpf_set_print(), the one piece of process-wide state. */
void pi_set_log(pi_log_fn fn, void *ctx);

/* ---- nodes ------------------------------------------------------------ */

/* An open node: its maps, programs and namespace. Opaque. */
struct pi_node;

#define PI_LOCK_TIMEOUT_MS	30000

enum pi_attach_choice {
	PI_ATTACH_AUTO = 0,	/* tcx where the kernel has it */
	PI_ATTACH_FORCE_TCX,
	PI_ATTACH_FORCE_CLSACT,
};

struct pi_node_up_opts {
	const char *uplink;		/* device in the node's namespace */
	bool xdp;			/* node up --xdp */
	bool host;			/* the caller's own namespace is the node */
	enum pi_attach_choice attach;
	int lock_timeout_ms;
};

struct pi_node_info {
	char name[PI_NAME_LEN];
	char pin_dir[4096];
	bool tcx, xdp, host, owns_netns;
	uint32_t uplink_ifindex;
	char uplink[16];
	int pods;
	uint32_t upgraded_from;		/* ABI of the last upgrade's start, 0: none */
	uint64_t upgraded_ns;		/* its CLOCK_REALTIME */
};

/* Makes the node `name` (its namespace unless it exists, or the host's
 * namespace with opts->host), loads and pins its datapath. */
int pi_node_up(const char *name, const struct pi_node_up_opts *opts,
	       struct pi_node_info *info);
/* Removes all the node made. force: a node of another ABI version loses
 * its pins and links, and its pods' namespaces and devices are left. */
int pi_node_down(const char *name, bool force, int lock_timeout_ms);

/* Where pi_node_upgrade() calls opts->at_point: the boundaries of its
 * phases (lib/upgrade.c), so that a test can kill the upgrader at each
 * and see the next run finish or roll back, or return -errno there to
 * make the upgrade fail as a failed step would (before the commit it is
 * rolled back, from it on it says to run it again). */
enum pi_upgrade_point {
	PI_UPGRADE_AT_MARKED = 1,	/* progress record made, node marked */
	PI_UPGRADE_AT_STAGED,		/* new maps and programs staged */
	PI_UPGRADE_AT_FIRST_HOOK,	/* one hook runs the new program */
	PI_UPGRADE_AT_SWITCHED,		/* every hook does */
	PI_UPGRADE_AT_FIRST_RENAME,	/* one staged pin is live */
	PI_UPGRADE_AT_COMMITTED,	/* all are; version not bumped */
	PI_UPGRADE_AT_BUMPED,		/* version bumped; record not removed */
	PI_UPGRADE_POINTS = PI_UPGRADE_AT_BUMPED,
};

struct pi_node_upgrade_opts {
	int lock_timeout_ms;		/* 0: PI_LOCK_TIMEOUT_MS */
	int (*at_point)(enum pi_upgrade_point point, void *ctx);
	void *ctx;
};

struct pi_node_upgrade_info {
	uint32_t from_abi, to_abi;
	bool resumed;		/* an interrupted upgrade was finished */
	bool rolled_back;	/* an interrupted one was undone, then redone */
	int migrations;		/* ABI steps run */
	int hooks;		/* hooks re-pointed to this build's programs */
	int inject_hooks;	/* injection's and the proxy's, besides */
	int attached;		/* hooks that had lost the node's program */
	int removed;		/* extra programs of the node taken off hooks */
};

/* Brings the node `name` to this build in place: a node of an older ABI
 * version (from pi_abi_version()'s oldest migration on) is migrated, one of
 * this version gets this build's programs; pods, policies, counters,
 * grants, proxy rules and tracked flows are kept, and the programs are
 * replaced atomically on each hook. An interrupted upgrade is finished or
 * rolled back. -EPROTO: the node is newer (no downgrade), too old, or
 * half-way through another build's upgrade; nothing is changed then. */
int pi_node_upgrade(const char *name, const struct pi_node_upgrade_opts *opts,
		    struct pi_node_upgrade_info *info);

enum pi_open_mode {
	PI_OPEN_READ,		/* shared lock; changes are refused (-EBADF) */
	PI_OPEN_WRITE,		/* exclusive lock */
};

int pi_node_open(const char *name, enum pi_open_mode mode,
		 int lock_timeout_ms, struct pi_node **node);
void pi_node_close(struct pi_node *node);
int pi_node_get_info(struct pi_node *node, struct pi_node_info *info);
/* Calls fn with each address the node itself owns ("ip/plen"-less text). */
int pi_node_addresses(struct pi_node *node,
		      void (*fn)(int family, const struct pi_addr *a, void *ctx),
		      void *ctx);

/* ---- pods ------------------------------------------------------------- */

/* The link-local gateways of a pod podinject made: its default routes go
 * through them, and their neighbour entries are the node side's MAC. */
#define PI_POD_GW4	"169.254.1.1"
#define PI_POD_GW6	"fe80::1"

enum pi_pod_flags {
	PI_POD_HAS_V4	= 1 << 0,
	PI_POD_HAS_V6	= 1 << 1,
	PI_POD_NETKIT	= 1 << 2,
	/* The XDP ingress ACL runs on the pod-side eth0: what the node's
	 * stack sends to the pod is checked there, not at tc. */
	PI_POD_XDP	= 1 << 3,
	/* Another plugin routes the pod ("datapath": "none"): podinject's
	 * programs, on its device while it has a policy, check and pass
	 * every packet on instead of routing it. */
	PI_POD_PASS_ON	= 1 << 4,
};

enum pi_pod_meta_flags {
	PI_META_OWNS_DEV	= 1 << 0,	/* podinject made the device pair */
	PI_META_OWNS_NETNS	= 1 << 1,	/* podinject made the namespace */
	/* The reference datapath (source check, policy, routing) is not on
	 * the pod's device: another plugin is its datapath. podinject keeps
	 * what the pod uses of it (injection, the proxy, probes), and while
	 * the pod has a policy, its programs check and pass on
	 * (PI_POD_PASS_ON). */
	PI_META_NO_DATAPATH	= 1 << 2,
	/* clsact nodes: podinject made the clsact qdisc on the host-side
	 * device of a pod it adopted; it goes with the pod when no filter is
	 * left on it (the device stays: it is the CNI's). */
	PI_META_OWNS_QDISC	= 1 << 3,
};

/* Why a packet was dropped: the index of pi_pod_stats.drops. */
enum pi_drop_reason {
	PI_DROP_NONE = 0,
	PI_DROP_SPOOFED,	/* source address is not the pod's */
	PI_DROP_POLICY,		/* denied by the pod's egress policy */
	PI_DROP_MALFORMED,	/* truncated or otherwise unparsable */
	PI_DROP_UNKNOWN_POD,	/* program on a device that is no pod */
	PI_DROP_REDIRECT,	/* redirect helper refused */
	PI_DROP_INGRESS_POLICY,	/* denied by the destination's ingress policy */
	PI_DROP_UNSUPPORTED,	/* neither IPv4, IPv6 nor ARP */
	PI_DROP_FRAG_ORPHAN,	/* a non-first fragment whose first fragment
				 * was not let through */
	PI_DROP_FRAG_TINY,	/* a first fragment too short to hold the
				 * transport header */
	PI_DROP_VLAN,		/* a VLAN-tagged frame from a pod */
	PI_DROP_ROUTER,		/* a router advertisement or redirect from a
				 * pod */
	PI_DROP_ND_SPOOFED,	/* NDP or ARP claiming an address or MAC that
				 * is not the pod's */
	PI_DROP_UPLINK_SPOOFED,	/* from the uplink with a local pod's source
				 * address (counted on that pod) */
	PI_DROP_TTL,		/* routed with no TTL or hop limit left */
	/* New reasons go here, at the end: the numbers above are kept. */
	PI_DROP_MAX,
};

#define PI_DROP_NAMES { "none", "spoofed", "policy", "malformed", \
	"unknown-pod", "redirect", "ingress-policy", "unsupported", \
	"frag-orphan", "frag-tiny", "vlan", "router", "nd-spoofed", \
	"uplink-spoofed", "ttl" }

/* A pod's counters, summed over the CPUs. */
struct pi_pod_stats {
	uint64_t egress_packets;	/* the pod's egress program let it through */
	uint64_t egress_bytes;
	uint64_t ingress_packets;	/* delivered to the pod */
	uint64_t ingress_bytes;
	uint64_t drops[PI_DROP_MAX];	/* by enum pi_drop_reason */
};

/* Of the XDP programs (node up --xdp); the packets and drops are in
 * pi_pod_stats too, this says which of them were decided in XDP. */
struct pi_xdp_stats {
	uint64_t acl_packets;	/* passed the ACL on the pod-side eth0 */
	uint64_t acl_bytes;
	uint64_t acl_drops;	/* denied there */
	uint64_t uplink_redirects;	/* sent from the uplink with XDP_REDIRECT */
};

struct pi_pod_info {
	char name[PI_POD_NAME_MAX + 1];
	char netns[PI_NETNS_MAX];	/* name in /run/netns, or a path */
	char ifname[16];		/* pod side */
	char hostdev[16];		/* host side */
	char attach_id[PI_ATTACH_ID_MAX];
	uint32_t meta_flags;		/* enum pi_pod_meta_flags */
	uint32_t id;
	uint32_t ifindex;		/* host side */
	uint32_t peer_ifindex;		/* pod side, in its namespace */
	uint32_t flags;			/* enum pi_pod_flags */
	uint32_t ip4;			/* network order */
	uint32_t ip6[4];
	uint8_t pod_mac[6];
	uint8_t host_mac[6];
};

/* A pod whose device pair podinject makes: by default in a namespace it
 * makes too, named after the pod, with pi-NAME <-> eth0 (then the name is
 * [a-z0-9-]{1,12}); or in an existing namespace (a runtime's), with the
 * given device names. Addresses go on the pod side as /32 and /128, with
 * default routes through 169.254.1.1 and fe80::1. */
struct pi_pod_spec {
	const char *name;
	const char *netns;		/* NULL: make namespace `name` */
	const char *ifname;		/* NULL: "eth0" */
	const char *hostdev;		/* NULL: "pi-" + name */
	const char *attach_id;		/* NULL or an id of the caller's */
	bool has4, has6, netkit;
	struct pi_addr ip4, ip6;
};

/* A pod another tool made. */
struct pi_adopt_spec {
	const char *name;		/* up to PI_POD_NAME_MAX */
	const char *netns;		/* name in /run/netns, or a path */
	const char *hostdev;		/* in the node's namespace */
	const char *ifname;		/* NULL: the host device's peer */
	const char *attach_id;		/* NULL or an id of the caller's */
	bool has4, has6;		/* else read from the pod's device */
	struct pi_addr ip4, ip6;
	/* Leave the reference datapath off the pod's device: the plugin
	 * that made the pod's network is its datapath (PI_META_NO_DATAPATH). */
	bool no_datapath;
	/* A family has4/has6 leave out is not the pod's: its device is not
	 * read for one (a CNI's prevResult is what IPAM gave; an address
	 * on the device may be the pod's own doing). */
	bool only_given;
};

int pi_pod_add(struct pi_node *node, const struct pi_pod_spec *spec,
	       struct pi_pod_info *out);
int pi_pod_adopt(struct pi_node *node, const struct pi_adopt_spec *spec,
		 struct pi_pod_info *out);
/* Removes podinject's programs and state of the pod, and its namespace and
 * devices unless it was adopted. Gone namespaces or devices are fine. */
int pi_pod_del(struct pi_node *node, const char *name);
int pi_pod_get(struct pi_node *node, const char *name,
	       struct pi_pod_info *out);
/* The pod whose attach_id is `id` (-ESRCH if none; another negative errno
 * if the node's pods could not be read). */
int pi_pod_get_by_attach_id(struct pi_node *node, const char *id,
			    struct pi_pod_info *out);
/* All pods in id order, in a malloc()ed array the caller frees; returns
 * the count. */
int pi_pod_list(struct pi_node *node, struct pi_pod_info **pods);
int pi_pod_counters(struct pi_node *node, const struct pi_pod_info *pod,
		    struct pi_pod_stats *out);
/* The pod's XDP ingress ACL (node up --xdp): -ENOENT when it has none. */
int pi_pod_xdp(struct pi_node *node, const struct pi_pod_info *pod,
	       uint32_t *prog_id, struct pi_xdp_stats *stats);
/* Are all of the pod's programs attached where they belong? 0 when they
 * are, -ENOLINK (with a log line naming what is missing) when not. On a
 * netkit pod with an injection guard, the guard is brought to the egress
 * program now at the pod's peer hook (the CNI may have replaced it); an
 * error when the hook has none or several (the guard then drops). */
int pi_pod_check(struct pi_node *node, const struct pi_pod_info *pod);

/* ---- policy ----------------------------------------------------------- */

enum pi_action {
	PI_ALLOW = 1,
	PI_DENY = 2,
};

struct pi_rule {
	uint32_t id;		/* assigned by the library; stable across edits */
	uint8_t action;		/* enum pi_action */
	uint8_t proto;		/* 0 = any, IPPROTO_TCP, _UDP or _ICMP (ICMP
				 * means ICMP or ICMPv6); no other */
	uint8_t family;		/* 0 = any, AF_INET, AF_INET6 */
	uint8_t prefixlen;	/* of addr; 0 = any address */
	uint16_t port_lo;	/* host order; 0..0 = any port */
	uint16_t port_hi;
	struct pi_addr addr;	/* destination (egress) or source (ingress) */
};

struct pi_rule_info {
	uint32_t dir;			/* enum pi_policy_dir */
	uint32_t position;		/* 1 = first */
	struct pi_rule rule;
	uint64_t packets, bytes;
};

/* Inserts `rule` (its id is assigned) at `position` (1 = first, 0 or past
 * the end = append) of the pod's policy in `dir`; *id gets the rule's id. */
int pi_policy_add(struct pi_node *node, const char *pod, uint32_t dir,
		  const struct pi_rule *rule, uint32_t position, uint32_t *id);
/* Deletes rule `id`, or every rule of `dir` when id is 0. */
int pi_policy_del(struct pi_node *node, const char *pod, uint32_t dir,
		  uint32_t id);
/* The pod's rules, both directions, malloc()ed (NULL when it has
 * none: nothing to free); returns the count. */
int pi_policy_list(struct pi_node *node, const char *pod,
		   struct pi_rule_info **rules);
/* The same for a pod already in hand (from pi_pod_list): no lookup by
 * name, which walks every pod. */
int pi_policy_list_pod(struct pi_node *node, const struct pi_pod_info *pod,
		       struct pi_rule_info **rules);

/* ---- connection tracking ---------------------------------------------- */

enum pi_ct_state {
	PI_CT_OPENING = 1,	/* TCP: the opener's SYN, no answer yet */
	PI_CT_ESTABLISHED = 2,	/* answered (for UDP and ICMP: any flow) */
	PI_CT_CLOSING = 3,	/* TCP: RST, or FIN from both ends */
};

#define PI_CT_STATE_NAMES { "none", "opening", "established", "closing" }

enum pi_ct_flags {
	PI_CT_REPLIED = 1 << 0,		/* a packet came back */
	PI_CT_FIN_POD = 1 << 1,		/* the pod sent a FIN */
	PI_CT_FIN_PEER = 1 << 2,	/* the far end sent a FIN */
	PI_CT_CUT = 1 << 3,		/* a policy edit denied the open flow:
					 * its packets are dropped both ways by
					 * rule_id while that policy holds */
};

/* Idle timeouts of tracked flows, by kind. */
enum pi_ct_timeout {
	PI_CT_TO_TCP_OPENING = 0,	/* SYN seen, no answer yet */
	PI_CT_TO_TCP_ESTABLISHED,
	PI_CT_TO_TCP_CLOSING,		/* RST, or a FIN from both ends */
	PI_CT_TO_UDP,			/* and protocols without ports */
	PI_CT_TO_ICMP,			/* echo */
	PI_CT_TO_MAX,
};

#define PI_CT_TIMEOUT_NAMES { "tcp-opening", "tcp-established", \
	"tcp-closing", "udp", "icmp" }

/* A tracked flow of a pod, named from the pod's side: its end and the far
 * end, so that both directions at the pod are the one flow. */
struct pi_ct_info {
	uint32_t family;		/* AF_INET or AF_INET6 */
	uint8_t proto;			/* IPPROTO_* as on the wire */
	uint16_t pod_port;		/* host order; ICMP echo: the identifier */
	uint16_t peer_port;		/* host order; ICMP echo: 0 */
	struct pi_addr pod, peer;
	uint32_t dir;			/* enum pi_policy_dir that opened it */
	uint32_t state;			/* enum pi_ct_state */
	uint32_t flags;			/* enum pi_ct_flags */
	uint32_t rule_id;		/* the allow rule that let it open, 0: none;
					 * PI_CT_CUT: the deny rule that cut it */
	uint32_t policy_rev;		/* the policy revision it was decided at */
	uint64_t packets[2];		/* by enum pi_policy_dir: sent by the pod, */
	uint64_t bytes[2];		/* received by it */
	uint64_t idle_ms;		/* since its last packet */
	uint64_t expires_ms;		/* left of its idle timeout */
};

struct pi_ct_counts {
	uint32_t entries;
	uint32_t by_state[PI_CT_CLOSING + 1];	/* enum pi_ct_state */
};

/* The pod's live flows, malloc()ed; returns the count. Entries past their
 * idle timeout are freed on the way (the datapath frees those it meets). */
int pi_ct_list(struct pi_node *node, const char *pod,
	       struct pi_ct_info **flows);
/* Forgets the pod's flows (their next packets are decided anew), except
 * the cut ones (PI_CT_CUT: forgotten, a cut flow's next packet would open
 * a flow by the other direction's policy and the flow would go on);
 * returns how many it forgot. */
int pi_ct_flush(struct pi_node *node, const char *pod);
/* The pod's live flows, counted by state. */
int pi_ct_counts(struct pi_node *node, const struct pi_pod_info *pod,
		 struct pi_ct_counts *out);
/* Every pod's, in one walk of the table: out[id] for pod ids below nout
 * (PI_MAX_PODS covers them all). */
int pi_ct_counts_all(struct pi_node *node, struct pi_ct_counts *out,
		     uint32_t nout);
/* Idle timeouts in seconds, by enum pi_ct_timeout; the node's setting or
 * the default. Setting 0 restores the default. */
int pi_ct_timeouts(struct pi_node *node, uint32_t out[PI_CT_TO_MAX]);
int pi_ct_set_timeout(struct pi_node *node, uint32_t kind, uint32_t seconds);

/* ---- injection -------------------------------------------------------- */

enum pi_inject_path {
	PI_PATH_FAST = 1,		/* bpf_redirect_peer(BPF_F_EGRESS) */
	PI_PATH_FALLBACK = 2,		/* bpf_redirect(BPF_F_INGRESS) */
	PI_PATH_NETKIT_FALLBACK = 3,	/* the same, tagged, onto a netkit
					 * primary whose guard runs the
					 * target's peer program */
};

#define PI_PATH_NAMES { "none", "fast", "fallback", "netkit-fallback" }
#define PI_PATH_MAX	PI_PATH_NETKIT_FALLBACK

/* Why an injected packet was dropped: the index of drops below. */
enum pi_inject_drop {
	PI_INJ_DROP_REDIRECT = 0,	/* the kernel refused the redirect */
	PI_INJ_DROP_MAX,
};

#define PI_INJ_DROP_NAMES { "redirect-refused" }

/* The netkit fallback's guard on a target pod (docs/datapath.md). */
struct pi_netkit_guard {
	uint32_t slot;			/* of the target's peer program */
	uint8_t pod_mac[6];		/* the source the node's tag stands in for */
	uint64_t runs;			/* injected packets given to the program */
	uint64_t missing;		/* dropped: the slot held no program */
	uint64_t forged;		/* the pod's own frames carrying the tag */
};

/* The path bpf_redirect_peer(BPF_F_EGRESS) (PI_PATH_FAST) where the kernel
 * has it, else PI_PATH_FALLBACK: found by a probe, never by version. */
int pi_inject_path_auto(void);

#define PI_INJECT_MAX_AS	32	/* pods in one allow or deny */
/* Authorises `injector` to send as each pod of `as` (at most 32), on
 * `path` (0 = auto; onto a netkit pod the fallback is the netkit
 * fallback); *path_used gets the path chosen. */
int pi_inject_allow(struct pi_node *node, const char *injector,
		    const char *const *as, int nas, uint32_t path,
		    uint32_t *path_used);
/* Removes those authorisations (all of the injector's when nas is 0);
 * returns how many. A grant that a proxy rule of the injector holds goes
 * with the rule (pi_proxy_del): naming it is -EINVAL, and "all" keeps it
 * (-ESRCH when nothing else was there). */
int pi_inject_deny(struct pi_node *node, const char *injector,
		   const char *const *as, int nas);

struct pi_inject_auth_info {
	char injector[PI_POD_NAME_MAX + 1];
	char as[PI_POD_NAME_MAX + 1];
	uint32_t family;
	struct pi_addr addr;
	uint32_t path;			/* enum pi_inject_path */
};

struct pi_inject_stat_info {
	char injector[PI_POD_NAME_MAX + 1];
	char as[PI_POD_NAME_MAX + 1];
	uint32_t path;
	uint64_t packets, bytes;
	uint64_t drops[PI_INJ_DROP_MAX];
	bool has_guard;			/* netkit fallback: the target's guard */
	struct pi_netkit_guard guard;
	char tag[24];			/* the node's tag MAC */
};

/* malloc()ed arrays; return the count. */
int pi_inject_list(struct pi_node *node, struct pi_inject_auth_info **auths);
int pi_inject_stats(struct pi_node *node, struct pi_inject_stat_info **stats);

/* ---- transparent proxy ------------------------------------------------ */

#define PI_PROXY_MAX_PORTS	8
/* New flows a proxied pod may have in the proxy's tables at once. */
#define PI_PROXY_FLOWS_PER_POD	8192

struct pi_proxy_rule {
	uint16_t port;			/* proxy's listening port, host order */
	uint8_t proto;			/* IPPROTO_TCP, IPPROTO_UDP, 0 = both */
	uint8_t nports;			/* dport ranges below; 0 = any port */
	uint16_t dport_lo[PI_PROXY_MAX_PORTS];
	uint16_t dport_hi[PI_PROXY_MAX_PORTS];
	uint32_t dst_family;		/* 0 = any destination */
	uint32_t dst_plen;
	struct pi_addr dst;
	uint32_t flags;			/* PI_PROXY_INBOUND */
	/* Read back only (pi_proxy_list); ignored by pi_proxy_add. */
	uint32_t nflows;		/* live captured flows */
	uint32_t nupstream;		/* live upstream connections */
	uint64_t limit_drops;		/* new flows refused: share or table full */
};

/* POD's new connections that match `rule` (port: the proxy's listening
 * port; proto 0 = TCP and UDP; dports and dst optional) go to PROXY's
 * transparent socket, and PROXY may inject as POD (docs/proxy.md). */
int pi_proxy_add(struct pi_node *node, const char *proxy, const char *pod,
		 const struct pi_proxy_rule *rule);
int pi_proxy_del(struct pi_node *node, const char *proxy, const char *pod);

/* PI_PROXY_INBOUND in a rule's flags: the rule captures connections *to*
 * POD (TCP, on its ports `dports`, from anyone) for PROXY, which
 * terminates them and connects on to POD with the client's address
 * (docs/proxy.md, "Inbound capture"). A pod may have one rule of each
 * kind. */
#define PI_PROXY_INBOUND	(1u << 0)
/* Removes POD's inbound rule of PROXY (pi_proxy_del: its outbound one). */
int pi_proxy_del_inbound(struct pi_node *node, const char *proxy,
			 const char *pod);

struct pi_proxy_info {
	char pod[PI_POD_NAME_MAX + 1];
	char proxy[PI_POD_NAME_MAX + 1];
	struct pi_proxy_rule rule;
};

int pi_proxy_list(struct pi_node *node, struct pi_proxy_info **proxies);

/* ---- desired state: apply and export --------------------------------- */

/* A node's state as a document (docs/operations.md, "Desired state: apply
 * and export"): {"apiVersion": "podinject/v1", "pods": {NAME: {"egress":
 * [RULE...], "ingress": [RULE...], "inject": [{"as": POD, "path": P}],
 * "proxy": {"by": POD, "port": N, ...}}}, "conntrack": {"timeouts":
 * {KIND: SECONDS}}}. The document is the whole state: a pod of the node
 * that it leaves out, or a part of a pod it leaves out, is empty. */
#define PI_STATE_API_VERSION	"podinject/v1"

/* One change of an apply, in the order it is made. */
enum pi_plan_kind {
	PI_PLAN_POLICY,		/* a pod's rules in one direction replaced */
	PI_PLAN_GRANT_DEL,	/* injector may no longer inject as `other` */
	PI_PLAN_GRANT_ADD,	/* injector may inject as `other` on `path` */
	PI_PLAN_PROXY_DEL,	/* `pod` is no longer proxied by `other` */
	PI_PLAN_PROXY_ADD,	/* `pod` is proxied by `other` */
	PI_PLAN_TIMEOUT,	/* a tracker timeout: `kind`, `from` -> `to` s */
};

struct pi_plan_step {
	enum pi_plan_kind what;
	const char *pod;	/* the policy's, the injector, the proxied pod */
	const char *other;	/* the target of a grant, the proxy */
	uint32_t dir;		/* PI_PLAN_POLICY */
	uint32_t before, after;	/* rules before and after */
	uint32_t kept;		/* rules that stay, with their ids and counters */
	uint32_t path;		/* PI_PLAN_GRANT_*: enum pi_inject_path */
	const struct pi_proxy_rule *proxy;	/* PI_PLAN_PROXY_* */
	uint32_t kind, from, to;	/* PI_PLAN_TIMEOUT: seconds */
};

typedef void (*pi_plan_fn)(const struct pi_plan_step *step, void *ctx);

/* Where a document was refused: a JSON path such as pods["a"].egress[3]
 * (indices from 0), or "line L column C" for text that is no JSON. */
struct pi_apply_error {
	char where[512];
	char reason[256];
};

/* A state document's size at most (a Kubernetes ConfigMap holds 1 MiB):
 * a larger one is refused before it is read (-EINVAL), not parsed whole
 * under the node's lock. */
#define PI_APPLY_DOC_MAX	(64u << 20)

enum pi_apply_flags {
	PI_APPLY_DRY_RUN = 1 << 0,	/* plan only: nothing changes */
	PI_APPLY_YAML = 1 << 1,		/* doc is YAML (libyaml), not JSON */
	/* What the document says of a pod that is not on the node (the
	 * pod, a grant as it, a proxy rule by it) is left out, not refused
	 * with -ESRCH: one document for many nodes. */
	PI_APPLY_SKIP_ABSENT = 1 << 2,
};

/* Brings the node to the state `doc` (JSON text, or YAML with
 * PI_APPLY_YAML; len bytes) declares.
 * Everything is checked before anything changes: a document that cannot
 * be applied is refused whole (-EINVAL: bad value or field, -ESRCH: no
 * such pod), with *err (when not NULL) saying where and why. Then each
 * change is made, and reported to `plan` (when not NULL) as it is made; a
 * change that fails undoes those made before it. A pod direction whose
 * rules are unchanged is not touched; rules that stay keep their ids and
 * counters, and each changed direction is compiled once and switched with
 * one reference flip. With PI_APPLY_DRY_RUN the changes are reported and
 * none is made (a read lock is enough). Returns the number of changes.
 * A change that fails and a change before it that cannot be undone
 * either (a pod's namespace gone meanwhile): -ENOTRECOVERABLE, each
 * failure said in the log; the node is then neither as it was nor as the
 * document says, and pi_export tells how it is. */
int pi_apply(struct pi_node *node, const char *doc, size_t len,
	     uint32_t flags, pi_plan_fn plan, void *ctx,
	     struct pi_apply_error *err);

/* pi_apply of the document in the file at `path`. The same file applied
 * again, unchanged and to a node unchanged since, is found out without
 * reading it (the last apply's record names the file's device, inode,
 * size and times, trusted once its last change is 2 s old). A file that
 * cannot be read: -errno, said in the log. */
int pi_apply_file(struct pi_node *node, const char *path, uint32_t flags,
		  pi_plan_fn plan, void *ctx, struct pi_apply_error *err);

/* Writes the node's state as a document pi_apply takes (applying it
 * changes nothing); `write` is called with pieces of the text and returns
 * 0, or -1 to stop. */
typedef int (*pi_write_fn)(const char *buf, size_t len, void *ctx);
int pi_export(struct pi_node *node, pi_write_fn write, void *ctx);

/* ---- probes: synthetic flows ----------------------------------------- */

/* A probe's source ports (ICMP: echo ids), kept outside Linux's
 * ephemeral ports so that its replies are told apart from the pod's own. */
#define PI_PROBE_PORT_LO	61000
#define PI_PROBE_PORT_HI	65535
/* The probe's own device pair. A pod's host device is "pi-" + its name,
 * and pod names are [a-z0-9-]: with an underscore these can be no pod's
 * (a pod named "probe" has pi-probe). */
#define PI_PROBE_DEV		"pi_probe"
#define PI_PROBE_TX_DEV		"pi_probe_tx"

enum pi_probe_verdict {
	PI_PROBE_PENDING,
	PI_PROBE_ANSWERED,
	PI_PROBE_REFUSED,	/* a reset or an ICMP error: the far side is there */
	PI_PROBE_POLICY,	/* dropped by the pod's own rule (`rule`) */
	PI_PROBE_NOANSWER,
	PI_PROBE_SELF,		/* a matrix cell from a pod to itself */
	PI_PROBE_UNSENT,	/* a matrix cell not sent: stopped first */
	/* answered, but the answer was not heard: the datapath took it
	 * (the pod never saw it) when the node's probe event ring was full
	 * (an answer flood), so its kind and time are unknown */
	PI_PROBE_UNREPORTED,
};

enum pi_probe_refusal {
	PI_PROBE_BY_NONE,
	PI_PROBE_BY_RST,
	PI_PROBE_BY_ICMP,
};

struct pi_probe_result {
	char from[PI_POD_NAME_MAX + 1];
	char to[64];
	int family;
	uint8_t proto;
	uint16_t port;			/* 0 for ICMP */
	enum pi_probe_verdict verdict;
	uint32_t rule;			/* PI_PROBE_POLICY: the rule */
	/* PI_PROBE_REFUSED: by a TCP reset or by an ICMP error about the
	 * probe; of an error, its type and code where icmp_read (a node's
	 * programs of a build before it did not read them) */
	enum pi_probe_refusal refused_by;
	bool icmp_read;
	uint8_t icmp_type, icmp_code;
	/* Answered or refused, else -1: both ends read in the kernel with
	 * bpf_ktime_get_ns(), from the probe's frame entering the pod's
	 * egress datapath (the injection) to its answer taken at the pod's
	 * device: the datapath's round trip, no user space in it. */
	int64_t rtt_ns;
	/* The step of that clock (CLOCK_MONOTONIC's, as clock_getres says):
	 * 1 on a high-resolution clock, a tick (4 ms at HZ=250) where the
	 * kernel fell back to jiffies. An rtt_ns below it is no
	 * measurement: the RTT was under one step. */
	uint64_t rtt_resolution_ns;
	/* the probe's own flow: from src:sport (the pod's address, a port of
	 * the probe's range; ICMP: the echo id) to dst:port */
	struct pi_addr src, dst;
	uint16_t sport;
	/* CLOCK_MONOTONIC (bpf_ktime_get_ns()'s clock) just before the
	 * probe left, 0 if it did not: where its events can begin */
	uint64_t sent_ns;
};

/* Probes from pod `from` to dst[:port], sent into the pod's egress
 * datapath as the pod's own packets. `stop`, when set (a signal handler's
 * flag), ends the sending: the answers of the probes already sent are
 * still awaited, each up to its timeout but at most PI_PROBE_STOP_WAIT_MS
 * after the stop, unless `stop_wait` is set too. A probe whose wait was
 * cut short stays PI_PROBE_PENDING (its answer may be on its way: it is
 * no "no answer"). The node's lock is held
 * while the probe's state is set up and taken down, not while it waits. */
#define PI_PROBE_STOP_WAIT_MS	1000
struct pi_probe_spec {
	const char *from;
	int family;
	struct pi_addr dst;
	uint8_t proto;			/* 0: tcp with a port, else icmp */
	uint16_t port, sport;		/* sport 0: one of PI_PROBE_PORT_LO..HI */
	uint32_t count, interval_ms, timeout_ms;
	int lock_timeout_ms;
	const volatile int *stop, *stop_wait;
};

/* Results of the probes sent, in order, in a malloc()ed array; returns how
 * many were sent. */
int pi_probe_run(struct pi_node *node, const struct pi_probe_spec *spec,
		 struct pi_probe_result **results);

/* Every pod to every pod of the node (IPv4), and to `extra` addresses. */
struct pi_matrix_spec {
	uint8_t proto;			/* 0: icmp */
	uint16_t port;
	uint32_t timeout_ms;
	int nextra;			/* at most 16 */
	int extra_family[16];
	struct pi_addr extra[16];
	int lock_timeout_ms;
	const volatile int *stop, *stop_wait;	/* as pi_probe_spec's */
};

/* rows x cols results (rows: from, in pod id order; cols: those pods,
 * then the extra addresses); returns how many probes were sent. */
int pi_probe_matrix(struct pi_node *node, const struct pi_matrix_spec *spec,
		    struct pi_probe_result **results, int *rows, int *cols);

/* ---- the live event monitor (docs/observability.md) ---- */

enum pi_monitor_kind {
	PI_MON_DROP = 1,	/* a packet dropped: where, why, by which rule */
	PI_MON_VERDICT = 2,	/* a policy decision: a flow's first packet
				 * (or an untracked one), allowed or denied */
	PI_MON_INJECT = 3,	/* a packet injected as a pod */
	PI_MON_PROXY = 4,	/* a connection captured for a proxy */
	PI_MON_TRACE = 5,	/* a probe's packet at a hook (probe --trace):
				 * the hook's verdict (reason: enum
				 * pi_monitor_verdict), or at hook POLICY a
				 * policy decision (reason: enum pi_action;
				 * aux: enum pi_monitor_decided) */
	PI_MON_KIND_MAX,
};
#define PI_MON_KIND_NAMES { "none", "drop", "verdict", "inject", "proxy", \
	"trace" }
/* the kinds a monitor asks for by default; TRACE only when named */
#define PI_MON_ALL	((1u << PI_MON_DROP) | (1u << PI_MON_VERDICT) | \
			 (1u << PI_MON_INJECT) | (1u << PI_MON_PROXY))

/* A hook's verdict in a TRACE event (the tc verdicts). */
enum pi_monitor_verdict {
	PI_MON_V_NEXT = -1,	/* on to the hook's next program */
	PI_MON_V_PASS = 0,	/* on into the stack */
	PI_MON_V_DROP = 2,
	PI_MON_V_REDIRECT = 7,	/* to another device (a pod, the uplink) */
};

enum pi_monitor_decided {
	PI_MON_DECIDED_WALK = 1,	/* by the rules */
	PI_MON_DECIDED_TRACKED,		/* by the flow's tracker entry */
	PI_MON_DECIDED_RELATED,		/* an ICMP error of a tracked flow */
	PI_MON_DECIDED_NO_RULES,	/* the pod has none: allowed, untracked */
};

/* The hook (program) that saw it. */
enum pi_monitor_hook {
	PI_MON_HOOK_POLICY = 0,	/* a policy decision (see dir) */
	PI_MON_HOOK_POD_EGRESS,
	PI_MON_HOOK_POD_INGRESS,
	PI_MON_HOOK_UPLINK_INGRESS,
	PI_MON_HOOK_XDP_POD,
	PI_MON_HOOK_XDP_UPLINK,
	PI_MON_HOOK_INJECT,
	PI_MON_HOOK_NETKIT_GUARD,
	PI_MON_HOOK_POD_REPLY,	/* at a pod's eth0: probe answers taken */
	PI_MON_HOOK_MAX,
};
#define PI_MON_HOOK_NAMES { "policy", "pod-egress", "pod-ingress", \
	"uplink-ingress", "xdp-pod", "xdp-uplink", "inject", "netkit-guard", \
	"pod-reply" }

/* Drop reasons of the injection object, beyond enum pi_drop_reason. */
enum pi_monitor_drop {
	PI_MON_DROP_INJECT_REDIRECT = 32,	/* the redirect was refused */
	PI_MON_DROP_PROXY_LIMIT,		/* beyond the pod's share of
						 * the proxy's flow table */
	PI_MON_DROP_GUARD_EMPTY,		/* a netkit guard with no peer
						 * program to run */
	PI_MON_DROP_PROXY_TUPLE,		/* its 4-tuple is another
						 * flow's */
	PI_MON_DROP_PROXY_NO_SOCKET,		/* a captured datagram, no
						 * proxy socket for it */
	PI_MON_DROP_PROXY_ASSIGN,		/* the proxy's socket could
						 * not be assigned */
	PI_MON_DROP_MAX,
};
#define PI_MON_DROP_NAMES { "inject-redirect-refused", "proxy-limit", \
	"netkit-guard-empty", "proxy-tuple-taken", "proxy-no-socket", \
	"proxy-assign-failed" }
/* The injection object's refusals, node-wide: counts[i] is reason
 * PI_MON_DROP_INJECT_REDIRECT + i (named PI_MON_DROP_NAMES[i]), summed
 * over the CPUs, since the object was made (all 0 before it is). The
 * tables of pi_inject_stats, pi_proxy_list and the netkit guards say whose
 * where they count a reason too; 0 or -errno. */
#define PI_INJ_REFUSALS	(PI_MON_DROP_MAX - PI_MON_DROP_INJECT_REDIRECT)
int pi_inject_refusals(struct pi_node *node, uint64_t counts[PI_INJ_REFUSALS]);

/* The proxy flow tables' entries the kernel gave no expiry timer of their
 * own (bpf_timer_init failed: 6.18 fails it for most of a burst), which
 * the sweep takes out once idle or arms later (docs/datapath.md), since
 * the injection object was made (all 0 before it is). */
struct pi_flow_sweep_info {
	uint64_t untimed;	/* new entries the kernel gave no timer */
	uint64_t rounds;	/* the sweep's walks of both tables */
	uint64_t round_ns;	/* how long the last one took */
	uint64_t armed;		/* untimed entries a round gave their timer */
	uint64_t expired;	/* entries a round took out, idle past their
				 * timeout (untimed, or their timer late) */
	uint32_t pending;	/* entries the last round left untimed, at
				 * most the entries the tables hold now */
	uint32_t live;		/* entries the last round kept */
};
int pi_proxy_flow_sweep(struct pi_node *node, struct pi_flow_sweep_info *out);

struct pi_monitor_event {
	uint64_t ts_ns;			/* CLOCK_MONOTONIC, as the kernel's */
	uint32_t kind;			/* enum pi_monitor_kind */
	uint32_t hook;			/* enum pi_monitor_hook */
	uint32_t reason;		/* DROP: enum pi_drop_reason or
					 * pi_monitor_drop; VERDICT: enum
					 * pi_action; INJECT: pi_inject_path */
	uint32_t rule_id;		/* the deciding rule, 0 = none */
	uint32_t dir;			/* enum pi_policy_dir */
	uint32_t ifindex;		/* the pod's host-side device, or the
					 * device the program ran on */
	uint32_t aux;			/* INJECT, and the injection's drops:
					 * the target's host-side device;
					 * PROXY and a capture's drop: the
					 * proxy's port */
	uint32_t len;			/* the packet's length */
	int family;			/* AF_INET, AF_INET6; 0 unparsed */
	uint8_t proto;
	uint8_t tcp_flags;
	uint16_t sport, dport;		/* host order */
	struct pi_addr saddr, daddr;
	char pod[PI_POD_NAME_MAX + 1];	/* the pod it is about; "" unknown */
	char as_pod[PI_POD_NAME_MAX + 1];	/* INJECT: the pod injected as */
	/* ICMP and ICMPv6 (sport and dport 0): the header's type and code,
	 * and an echo's id, where the datapath read them from the frame
	 * (drops, a trace's hooks; not verdicts or injections, which it
	 * builds from the parsed packet) */
	bool icmp_read;
	uint8_t icmp_type, icmp_code;
	uint16_t icmp_id;
};

struct pi_monitor;

/* Starts a monitor of the node's events of `kinds` (1 << enum
 * pi_monitor_kind, or'ed): from now until pi_monitor_close the datapath
 * writes them. Any number of monitors may run on a node at once, in any
 * processes, each given every event of its kinds (one of them reads the
 * node's ring buffers and passes the events on; when it stops, another
 * takes over). The node is not held open meanwhile. */
int pi_monitor_open(const char *node, uint32_t kinds, int lock_timeout_ms,
		    struct pi_monitor **out);
typedef int (*pi_monitor_fn)(const struct pi_monitor_event *ev, void *ctx);
/* Waits up to timeout_ms for events and calls fn with each (fn returning
 * non-zero stops the round). Returns the number of events, or -errno
 * (-ENOENT: the node is gone). */
int pi_monitor_poll(struct pi_monitor *m, int timeout_ms, pi_monitor_fn fn,
		    void *ctx);
/* Waits up to timeout_ms until every event the datapath wrote before
 * the call has been given to fn (or fn returned non-zero). Returns the
 * number of events, -ETIMEDOUT, or -errno. */
int pi_monitor_drain(struct pi_monitor *m, int timeout_ms, pi_monitor_fn fn,
		     void *ctx);
/* Events this monitor missed since it started: those the datapath could
 * not write (its ring buffers were full: the reading was too slow), and
 * those this monitor was too slow to take when they were passed on. */
uint64_t pi_monitor_lost(struct pi_monitor *m);
/* For a monitor whose process is about to stop (SIGTSTP, Ctrl-Z): it
 * takes no events until pi_monitor_resume, and if it read the node's
 * rings for the others, one of them reads on, so their events do not
 * stop with it. Its kinds stay on. The events in between are not given
 * to it, nor counted in its lost; meanwhile pi_monitor_poll and
 * pi_monitor_drain return -EAGAIN. pi_monitor_resume returns 0 or
 * -errno (as pi_monitor_poll's: -ENOENT, the node is gone). */
void pi_monitor_pause(struct pi_monitor *m);
int pi_monitor_resume(struct pi_monitor *m);
void pi_monitor_close(struct pi_monitor *m);

/* ---- features --------------------------------------------------------- */

struct pi_features {
	bool tcx;
	bool netkit;
	bool redirect_peer_egress;	/* bpf_redirect_peer(.., BPF_F_EGRESS) */
	bool bpf_loop;
	int redirect_peer_egress_retval;	/* what that probe returned */
	bool veth_xdp;			/* native XDP on veth */
};

int pi_features_probe(struct pi_features *f);

/* ---- values ----------------------------------------------------------- */

/* Parsers shared by the front-ends: 0 or -EINVAL. */
int pi_parse_prefix(const char *s, int *family, struct pi_addr *addr,
		    int *plen);
int pi_parse_port_range(const char *s, uint16_t *lo, uint16_t *hi);
int pi_parse_proto(const char *s, uint8_t *proto);
int pi_parse_u32(const char *s, uint32_t *v);
/* [a-z0-9-], not starting with '-', at most maxlen: node names, and pods
 * that podinject names its devices after. */
bool pi_valid_name(const char *name, int maxlen);
/* Any pod: 1-PI_POD_NAME_MAX of A-Z a-z 0-9 - . _ / (a Kubernetes
 * "namespace/name", a runtime's container name or id). */
bool pi_valid_pod_name(const char *name);
const char *pi_proto_name(uint8_t proto);
/* An address, with "/plen" when plen >= 0. */
const char *pi_fmt_addr(int family, const struct pi_addr *a, int plen,
			char *buf, size_t len);
const char *pi_fmt_mac(const uint8_t mac[6], char buf[18]);

#ifdef __cplusplus
}
#endif

#endif
