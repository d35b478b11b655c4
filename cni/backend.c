/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The plugin's setup of libpodinject, and what stands between a runtime's
 * attachment and the library's calls: the node (a host node, the host's
 * own namespace, where the runtime's host-side devices are) opened and
 * brought up as the config says, and the pod spec made of the
 * environment. The commands call the library directly for the rest.
 */
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "podinject_util.h"
#include "cni.h"

/* While ADD opens a node it will bring up when missing, the library's
 * errors are held: "node is not up" is then no error but the first pod of
 * the node, and "already up" only another plugin's first pod made at the
 * same time; both go to the log at debug level once the node is open.
 * When the open fails for good, what the last try said is logged as an
 * error, so that the cause (a pin missing, another namespace's node) is
 * in the log. */
#define HELD_MAX	8
static struct {
	bool on;
	int n;
	char msg[HELD_MAX][256];
} held;

static void log_cb(enum pi_log_level level, const char *msg, void *ctx)
{
	if (held.on && level == PI_LOG_ERROR && held.n < HELD_MAX) {
		snprintf(held.msg[held.n++], sizeof(held.msg[0]), "%s", msg);
		return;
	}
	cni_log(level, "%s", msg);
}

/* Logs the held messages, those before mark at level below and the rest
 * at level above, and forgets them. */
static void held_release(int mark, int below, int above)
{
	for (int i = 0; i < held.n; i++)
		cni_log(i < mark ? below : above, "%s", held.msg[i]);
	held.n = 0;
}

/* libbpf's own messages go where the plugin's logs go, at debug level:
 * what it warns about on the way (an existing clsact qdisc, "Exclusivity
 * flag on") is expected, and a real failure comes back from the library as
 * an error the plugin reports. Left alone, libbpf writes to stderr. */
static int libbpf_cb(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char msg[512];
	size_t n;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	if (n && msg[n - 1] == '\n')
		msg[n - 1] = '\0';
	cni_log(PI_LOG_DEBUG, "libbpf: %s", msg);
	return 0;
}

void cni_backend_init(void)
{
	libbpf_set_print(libbpf_cb);
	pi_set_log(log_cb, NULL);
}

/* Opens the node for writing; with bring_up, a node that is not up yet is
 * made first (node up --host). Plugins racing to make it: the loser gets
 * -EALREADY and opens it; until the winner has pinned all of it, opening
 * it says -ENOENT (its pin directory exists before its lock is held), so
 * the loser tries again, for as long as it would wait for the lock. A
 * node that stays incomplete that long is broken (or another namespace's):
 * -EUCLEAN, and the last try's messages are logged as errors. */
int cni_pi_open(const struct cni_conf *conf, bool bring_up,
		struct pi_node **node)
{
	struct pi_node_up_opts opts = {
		.host = true,
		.xdp = conf->xdp,
		.attach = conf->attach,
		.lock_timeout_ms = conf->lock_timeout_ms,
	};
	long long deadline = pi_mono_ms() + (conf->lock_timeout_ms > 1000 ?
					 conf->lock_timeout_ms : 1000);
	int err, up_err, mark;

	held.on = bring_up;
	held.n = 0;
	for (;;) {
		err = pi_node_open(conf->node, PI_OPEN_WRITE,
				   conf->lock_timeout_ms, node);
		if (err != -ENOENT || !bring_up)
			break;
		mark = held.n;
		up_err = pi_node_up(conf->node, &opts, NULL);
		if (!up_err) {
			held_release(0, PI_LOG_DEBUG, PI_LOG_DEBUG);
			cni_log(PI_LOG_INFO, "node %s up on the host's namespace",
				conf->node);
			continue;
		}
		if (up_err != -EALREADY && up_err != -EEXIST) {
			/* what failed is the making, not the open */
			held_release(mark, PI_LOG_DEBUG, PI_LOG_ERROR);
			err = up_err;
			break;
		}
		if (pi_mono_ms() > deadline) {
			err = -EUCLEAN;
			break;
		}
		held_release(0, PI_LOG_DEBUG, PI_LOG_DEBUG);
		usleep(50 * 1000);
	}
	held.on = false;
	held_release(0, 0, err ? PI_LOG_ERROR : PI_LOG_DEBUG);
	return err;
}

/* The addresses a caller has, into a spec of either kind. */
static void copy_addrs(const struct pi_addr *ip4, const struct pi_addr *ip6,
		       bool *has4, struct pi_addr *a4, bool *has6,
		       struct pi_addr *a6)
{
	*has4 = ip4;
	if (ip4)
		*a4 = *ip4;
	*has6 = ip6;
	if (ip6)
		*a6 = *ip6;
}

int cni_pi_adopt(struct pi_node *node, const struct cni_conf *conf,
		 const struct cni_env *env, const char *hostdev,
		 const struct pi_addr *ip4, const struct pi_addr *ip6,
		 struct pi_pod_info *out)
{
	struct pi_adopt_spec spec = {
		.name = env->pod_name,
		.netns = env->netns,
		.hostdev = hostdev,
		.ifname = env->ifname,
		.attach_id = env->attach_id,
		.no_datapath = conf->no_datapath,
		/* what IPAM gave, as prevResult says: an address the pod
		 * put on its device itself is not its own */
		.only_given = true,
	};

	copy_addrs(ip4, ip6, &spec.has4, &spec.ip4, &spec.has6, &spec.ip6);
	return pi_pod_adopt(node, &spec, out);
}

int cni_pi_add(struct pi_node *node, const struct cni_env *env,
	       const char *hostdev, const struct pi_addr *ip4,
	       const struct pi_addr *ip6, struct pi_pod_info *out)
{
	struct pi_pod_spec spec = {
		.name = env->pod_name,
		.netns = env->netns,
		.ifname = env->ifname,
		.hostdev = hostdev,
		.attach_id = env->attach_id,
	};

	copy_addrs(ip4, ip6, &spec.has4, &spec.ip4, &spec.has6, &spec.ip6);
	return pi_pod_add(node, &spec, out);
}

int cni_pod_of_attachment(struct pi_node *node, const struct cni_env *env,
			  struct pi_pod_info *pod)
{
	int err = pi_pod_get_by_attach_id(node, env->attach_id, pod);

	if (err == -ESRCH && *env->attach_id_legacy)
		err = pi_pod_get_by_attach_id(node, env->attach_id_legacy, pod);
	return err;
}

/* Whether the node is the plugin's own namespace (a host node; opening
 * one checks that it is this namespace's). A named node an operator made
 * under the plugin's node name keeps its pods' host devices in its own
 * namespace, where the plugin's ifindexes and names mean nothing: a
 * device looked up here is not known to be gone there. */
bool cni_node_is_here(struct pi_node *node)
{
	struct pi_node_info info;

	return !pi_node_get_info(node, &info) && info.host;
}

