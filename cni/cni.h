/* SPDX-License-Identifier: GPL-2.0 */
/*
 * podinject-cni: a CNI plugin (spec 1.0.0, 0.3.0-0.4.0 configs) on
 * libpodinject. cni.c speaks the protocol, netns.c reads the pod's device
 * pair, ipam.c runs the IPAM plugin of main mode, backend.c is the one
 * place that calls into podinject.
 */
#ifndef PODINJECT_CNI_H
#define PODINJECT_CNI_H

#include <stdbool.h>
#include <stdint.h>
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
	CNI_ERR_INTERNAL	= 100,	/* podinject failed */
	CNI_ERR_DEVICE		= 101,	/* the pod's device pair is not what it must be */
	CNI_ERR_ADDR_IN_USE	= 102,	/* an address belongs to another pod */
	CNI_ERR_EXISTS		= 103,	/* name or device is a pod already */
	CNI_ERR_NODE_ABI	= 104,	/* the node was made by another build */
	CNI_ERR_CHECK		= 105,	/* CHECK: the pod's programs are missing */
	CNI_ERR_IPAM		= 106,	/* the IPAM plugin failed */
};

enum cni_mode { CNI_MODE_CHAINED, CNI_MODE_MAIN };

struct cni_conf {
	json_t *root;			/* the whole stdin object */
	const char *cni_version;
	const char *name;
	const char *type;
	enum cni_mode mode;
	const char *node;		/* podinject node (the host's namespace) */
	enum pi_attach_choice attach;
	bool xdp;
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
	char attach_id[PI_ATTACH_ID_MAX];
	char pod_name[PI_POD_NAME_MAX + 1];
};

/* An error for the caller to print: the spec's JSON, then exit 1. */
struct cni_err {
	int code;
	char msg[256];
	char details[512];
};

int cni_fail(struct cni_err *e, int code, const char *msg,
	     const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void cni_log(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* netns.c */
struct cni_pair {
	int pod_ifindex;		/* CNI_IFNAME in the pod's namespace */
	int host_ifindex;		/* its peer, in ours */
	char host_name[16];
	char kind[16];			/* veth, netkit */
	uint8_t pod_mac[6];
};
/* Finds CNI_IFNAME in netns and its peer in the caller's namespace, and
 * confirms both ends name each other. -ENOENT no such namespace or device,
 * -ENXIO not a pair whose other end is here. */
int cni_find_pair(const char *netns, const char *ifname,
		  struct cni_pair *pair);

/* ipam.c: runs plugin `type` from CNI_PATH with our environment, command
 * `cmd`, the network config on stdin; *result (ADD) is its parsed stdout.
 * A plugin that runs longer than conf->ipam_timeout_ms or prints more
 * than CNI_IPAM_OUT_MAX bytes is killed with what it started (its process
 * group) and reaped: an error, code CNI_ERR_IPAM. */
#define CNI_IPAM_OUT_MAX	(1 << 20)
#define CNI_IPAM_TIMEOUT_MS	60000
int cni_ipam_exec(const struct cni_conf *conf, const struct cni_env *env,
		  const char *cmd, json_t **result, struct cni_err *e);

/* backend.c: the plugin's calls into podinject. */
void cni_backend_init(void);
int cni_pi_open(const struct cni_conf *conf, bool bring_up,
		struct pi_node **node);
int cni_pi_adopt(struct pi_node *node, const struct cni_env *env,
		 const char *hostdev, const struct pi_addr *ip4,
		 const struct pi_addr *ip6, struct pi_pod_info *out);
int cni_pi_add(struct pi_node *node, const struct cni_env *env,
	       const char *hostdev, const struct pi_addr *ip4,
	       const struct pi_addr *ip6, struct pi_pod_info *out);
int cni_pi_find(struct pi_node *node, const char *attach_id,
		struct pi_pod_info *out);
int cni_pi_find_name(struct pi_node *node, const char *name,
		     struct pi_pod_info *out);
int cni_pi_del(struct pi_node *node, const char *name);
int cni_pi_check(struct pi_node *node, const struct pi_pod_info *pod);
int cni_pi_list(struct pi_node *node, struct pi_pod_info **pods);
void cni_pi_close(struct pi_node *node);
int cni_parse_addr(const char *cidr, int *family, struct pi_addr *a);

#endif
