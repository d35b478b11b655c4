/* SPDX-License-Identifier: GPL-2.0 */
/*
 * podinject-cni: a CNI plugin (spec 1.0.0, 0.3.0-0.4.0 configs) on
 * libpodinject, shaped as the reference plugins are: main.c reads the
 * command and dispatches to cmd_add.c, cmd_del.c, cmd_check.c, cmd_gc.c
 * and cmd_version.c; conf.c parses the network config, env.c the CNI_*
 * environment, result.c reads prevResult and writes results and errors,
 * log.c logs; netns.c reads the pod's device pair, ipam.c runs the IPAM
 * plugin of main mode, backend.c sets up the library and turns a runtime's
 * attachment into the library's node and pod calls.
 */
#ifndef PODINJECT_CNI_H
#define PODINJECT_CNI_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <jansson.h>
#include <podinject/podinject.h>

/* The spec's error codes, and ours from 100. */
enum cni_code {
	CNI_ERR_VERSION		= 1,	/* incompatible CNI version */
	CNI_ERR_FIELD		= 2,	/* unsupported field in the config */
	CNI_ERR_UNKNOWN		= 3,	/* container unknown or gone */
	CNI_ERR_ENV		= 4,	/* invalid environment variables */
	CNI_ERR_IO		= 5,
	CNI_ERR_DECODE		= 6,	/* cannot decode content */
	CNI_ERR_CONFIG		= 7,	/* invalid network config */
	CNI_ERR_TRY_AGAIN	= 11,	/* the node is busy */
	CNI_ERR_NOT_AVAILABLE	= 50,	/* STATUS: no ADD could go through */
	CNI_ERR_INTERNAL	= 100,	/* podinject failed */
	CNI_ERR_DEVICE		= 101,	/* the pod's device pair is not what it must be */
	CNI_ERR_ADDR_IN_USE	= 102,	/* an address belongs to another pod */
	CNI_ERR_EXISTS		= 103,	/* name or device is a pod already */
	CNI_ERR_NODE_ABI	= 104,	/* the node was made by another build */
	CNI_ERR_CHECK		= 105,	/* CHECK: the pod's programs are missing */
	CNI_ERR_IPAM		= 106,	/* the IPAM plugin failed */
};

enum cni_mode { CNI_MODE_CHAINED, CNI_MODE_MAIN };

/* Every attachment id the plugin gives a pod begins so: GC and a stale
 * pod's removal touch no pod another tool attached. */
#define CNI_ATTACH_PREFIX	"cni:"
/* An attachment id is PREFIX, the network's hash, ':', the container id
 * (or '#' and its hash), ':', the interface. The hash is 32 hex digits;
 * ids made before (podinject up to v0.4) have 8, of FNV-1a. */
#define CNI_NET_HASH_HEX	32
#define CNI_PREFIX_MAX		(sizeof(CNI_ATTACH_PREFIX) + CNI_NET_HASH_HEX + 1)

struct cni_conf {
	json_t *root;			/* the whole stdin object */
	const char *cni_version;
	const char *name;
	const char *type;
	enum cni_mode mode;
	const char *node;		/* podinject node (the host's namespace) */
	enum pi_attach_choice attach;
	bool xdp;
	/* "datapath": "none": the reference datapath stays off chained pods,
	 * whose network the plugins before podinject made and check */
	bool no_datapath;
	int lock_timeout_ms;
	int ipam_timeout_ms;		/* main mode: the IPAM plugin's run */
	json_t *prev_result;		/* NULL when not given */
	json_t *ipam;			/* main mode */
	const char *log_file;
	int log_level;			/* enum pi_log_level */
};

struct cni_env {
	const char *command;
	const char *container_id;
	const char *netns;
	const char *ifname;
	const char *args;
	const char *path;
	const char *self;	/* argv[0]: how the runtime ran the plugin */
	char self_dir[PATH_MAX];	/* DEL's CNI_PATH when it has none */
	char attach_id[PI_ATTACH_ID_MAX];
	char attach_id_legacy[PI_ATTACH_ID_MAX];	/* as up to v0.4 */
	char pod_name[PI_POD_NAME_MAX + 1];
};

/* An error for the caller to print: the spec's JSON, then exit 1. */
struct cni_err {
	int code;
	char msg[256];
	char details[512];
	long long ipam_code;	/* the IPAM plugin's own code, when it failed */
	bool ipam_refused;	/* the IPAM plugin ran to its end and said no */
};

/* log.c: lines to stderr, or to the config's logFile once it is read. */
void cni_log(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* The command and container id every line names. */
void cni_log_context(const char *cmd, const char *container_id);
/* The config's logFile and logLevel (-1: info with a file, else warn). */
void cni_log_open(const struct cni_conf *conf);
/* Where and from which level lines go, whatever a config says. */
void cni_log_to(FILE *fp, int level);
/* "error", "warn", "info", "debug" (any case): enum pi_log_level, or -1. */
int cni_log_level_parse(const char *name);
/* The end of one step of the command (at most 12): cni_log_steps() logs
 * at debug level how long each took, from main()'s first step on, so that
 * an operator sees where a slow ADD or DEL spent its time. */
void cni_step(const char *name);
void cni_log_steps(void);

/* conf.c: the network config on stdin. */
extern const char *const cni_versions[];
extern const int cni_nversions;
bool cni_version_supported(const char *v);
/* v (a supported version) is `since` or later. */
bool cni_version_at_least(const char *v, const char *since);
bool cni_version_is_v04_or_older(const char *v);
/* stdin as one JSON object: CNI_ERR_DECODE otherwise. */
int cni_read_stdin(json_t **root, struct cni_err *e);
/* *c points into root, which outlives it. */
int cni_parse_conf(json_t *root, struct cni_conf *c, struct cni_err *e);

/* env.c: the CNI_* variables of env->command, and the names made of them. */
int cni_read_env(struct cni_env *env, struct cni_err *e);
bool cni_valid_container_id(const char *s);
bool cni_valid_ifname(const char *s);
/* What the attachment ids of network `net` begin with. */
void cni_attach_prefix(const char *net, char *buf, size_t len);
/* What the ids of `net` made before v0.5 begin with (an FNV-1a of 32
 * bits: two networks may share it). */
void cni_attach_prefix_legacy(const char *net, char *buf, size_t len);
/* env->attach_id of (network `net`, container id, ifname), and the id
 * podinject up to v0.4 gave it (env->attach_id_legacy). */
void cni_make_attach_id(struct cni_env *env, const char *net);
/* Whether `id` (of the plugin's prefix) is of the 32-bit form. */
bool cni_attach_id_is_legacy(const char *id);
/* The host-side device of a main-mode pod, from its attachment. */
void cni_main_hostdev(const struct cni_env *env, char *buf, size_t len);

/* result.c: what goes on stdout, and what comes in as prevResult. */
int cni_fail(struct cni_err *e, int code, const char *msg,
	     const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* A library error (-errno) of step `what` into the spec's code. */
int cni_pi_fail(struct cni_err *e, int err, const char *what,
		const struct cni_conf *conf);
int cni_pi_open_fail(struct cni_err *e, int err, const struct cni_conf *conf);
/* The error object on stdout; returns the plugin's exit status, 1. */
int cni_print_error(const char *version, const struct cni_err *e);
int cni_print_json(json_t *o);
/* ADD's result on stdout: 0, or -1 with CNI_ERR_IO in *e. */
int cni_print_result(json_t *res, struct cni_err *e);
/* The index in prevResult.interfaces of the pod's interface, or -1. */
int cni_prev_pod_iface(json_t *prev, const char *ifname);
/* Is `name` a host-side interface of prevResult? 1 yes, 0 no, -1 when
 * prevResult names no host-side interface at all. */
int cni_prev_has_host_iface(json_t *prev, const char *name);
/* The first IPv4 and IPv6 address of interface pod_if (-1: any). With
 * `one_each`, a second address of a family is refused (CNI_ERR_CONFIG):
 * the source check takes one of each, and would drop what the pod sent
 * from the other. */
int cni_prev_addresses(json_t *prev, int pod_if, bool one_each,
		       struct pi_addr *ip4, bool *has4, struct pi_addr *ip6,
		       bool *has6, struct cni_err *e);
/* 1 when the pod holds the addresses prevResult gives its interface
 * (a family prevResult leaves out was read from the interface at ADD),
 * 0 when not, -1 with *e filled when they cannot be read. */
int cni_prev_matches(json_t *prev, const char *ifname,
		     const struct pi_pod_info *pod, struct cni_err *e);
/* A main-mode pod's result (ipam_res: the IPAM plugin's, for its dns). */
json_t *cni_main_result(const struct cni_conf *conf, const struct cni_env *env,
			const struct pi_pod_info *pod, json_t *ipam_res);

/* The commands: 0, or -1 with *e filled. */
int cni_cmd_add(const struct cni_conf *conf, struct cni_env *env,
		struct cni_err *e);
int cni_cmd_del(const struct cni_conf *conf, struct cni_env *env,
		struct cni_err *e);
int cni_cmd_check(const struct cni_conf *conf, struct cni_env *env,
		  struct cni_err *e);
int cni_cmd_gc(const struct cni_conf *conf, const struct cni_env *env,
	       struct cni_err *e);
int cni_cmd_status(const struct cni_conf *conf, struct cni_err *e);
/* VERSION's answer for a config root (may be NULL): the exit status. */
int cni_cmd_version(json_t *root);

/* netns.c */
struct cni_pair {
	int pod_ifindex;		/* CNI_IFNAME in the pod's namespace */
	int host_ifindex;		/* its peer, in ours */
	char host_name[16];
};
/* Finds CNI_IFNAME in CNI_NETNS and its peer in the caller's namespace,
 * and confirms both ends name each other; else CNI_ERR_DEVICE (no such
 * namespace or device, not a pair whose other end is here) or
 * CNI_ERR_IO. */
int cni_pod_pair(const struct cni_env *env, struct cni_pair *pair,
		 struct cni_err *e);
/* Main mode: the pod's side of the pair as podinject made it, inside
 * CNI_NETNS: the interface up, the pod's addresses on it (/32, /128),
 * its default routes through the link-local gateways and their
 * neighbour entries; else
 * CNI_ERR_CHECK saying what is missing (or CNI_ERR_IO). */
int cni_pod_side_check(const struct cni_env *env, const struct cni_pair *pair,
		       const struct pi_pod_info *pod, struct cni_err *e);

/* ipam.c: runs plugin `type` from CNI_PATH with our environment, command
 * `cmd`, the network config on stdin; *result (ADD) is its parsed stdout.
 * A plugin that runs longer than conf->ipam_timeout_ms or prints more
 * than CNI_IPAM_OUT_MAX bytes is killed with what it started (its process
 * group) and reaped: an error, code CNI_ERR_IPAM. */
#define CNI_IPAM_OUT_MAX	(1 << 20)
#define CNI_IPAM_TIMEOUT_MS	60000
int cni_ipam_exec(const struct cni_conf *conf, const struct cni_env *env,
		  const char *cmd, json_t **result, struct cni_err *e);

/* backend.c: the library's log and libbpf's go to cni_log; a node opened
 * (and brought up) as the config says; an attachment made a pod. */
void cni_backend_init(void);
bool cni_node_is_here(struct pi_node *node);
/* The pod of the attachment, by its id, else by the id an earlier build
 * gave it: pi_pod_get_by_attach_id's answers. */
int cni_pod_of_attachment(struct pi_node *node, const struct cni_env *env,
			  struct pi_pod_info *pod);
int cni_pi_open(const struct cni_conf *conf, bool bring_up,
		struct pi_node **node);
int cni_pi_adopt(struct pi_node *node, const struct cni_conf *conf,
		 const struct cni_env *env, const char *hostdev,
		 const struct pi_addr *ip4, const struct pi_addr *ip6,
		 struct pi_pod_info *out);
int cni_pi_add(struct pi_node *node, const struct cni_env *env,
	       const char *hostdev, const struct pi_addr *ip4,
	       const struct pi_addr *ip6, struct pi_pod_info *out);

#endif
