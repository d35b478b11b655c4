/* SPDX-License-Identifier: GPL-2.0 */
/*
 * XDP on veth pods: the pod's ingress ACL, loaded once per pod and attached
 * from the node to the pod-side eth0 inside the pod's namespace, and the
 * uplink's XDP_REDIRECT path to those pods.
 *
 * bpf/xdp.bpf.c is an object of its own, not part of the node skeleton,
 * because the ACL is loaded per pod with the pod's id in .rodata (XDP has
 * no namespace cookie on 6.1 and pod-side ifindexes repeat across pods).
 * Each load reuses the node's pinned maps with bpf_map__reuse_fd(), so
 * there is one set of pods, rules and counters for tc and XDP alike.
 *
 * Pins, beside the node's: xdp_ports (devmap), xdp_stats, prog_xdp_uplink,
 * prog_xdp_pod_IFINDEX, link_xdp_pod_IFINDEX.
 *
 * A pod's ACL is held by a BPF link (link_xdp_pod_IFINDEX), not a netlink
 * attachment: root in the pod's namespace owns eth0 and could otherwise
 * take the check off with `ip link set dev eth0 xdp off`, while the pod's
 * tc program leaves that check to XDP (PI_POD_XDP). Netlink can neither
 * detach nor replace a program a link holds, nor add a generic one beside
 * it; only the link's holder can (the pin, or CAP_SYS_ADMIN by id).
 * The uplink's program is the node's device and stays a netlink
 * attachment. Attachments are removed explicitly, and only when the
 * program there is still ours (XDP_FLAGS_REPLACE).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/bpf.h>
#include <linux/if_link.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "lib.h"
#include "nl.h"
#include "percpu.h"
#include "xdp.h"
#include "xdp.skel.h"

/* Never replace a program someone else attached. */
#define ATTACH_FLAGS	(XDP_FLAGS_DRV_MODE | XDP_FLAGS_UPDATE_IF_NOEXIST)

static void pod_prog_pin(const struct pi_node *n, const struct pi_pod_info *pod,
			 char *buf, size_t len)
{
	node_pin_path(n, buf, len, "prog_xdp_pod_%u", pod->ifindex);
}

static void pod_link_pin(const struct pi_node *n, const struct pi_pod_info *pod,
			 char *buf, size_t len)
{
	node_pin_path(n, buf, len, "link_xdp_pod_%u", pod->ifindex);
}

static int pin_get(const struct pi_node *n, const char *name)
{
	char path[PATH_MAX];
	int fd;

	node_pin_path(n, path, sizeof(path), "%s", name);
	fd = bpf_obj_get(path);
	return fd < 0 ? -errno : fd;
}

/* Opens bpf/xdp.bpf.c with only `prog` to load, reuses every map the
 * node has pinned under the same name, and loads it. Maps the node does
 * not have (xdp_ports, xdp_stats before node up pins them) are made. */
static int load_shared(const struct pi_node *n, struct bpf_program *(*pick)(
			       struct xdp_bpf *), uint32_t pod_id,
		       struct xdp_bpf **out)
{
	struct bpf_program *prog, *want;
	struct xdp_bpf *skel;
	struct bpf_map *map;
	int fd, err;

	skel = xdp_bpf__open();
	if (!skel)
		return errno ? -errno : -EINVAL;
	skel->rodata->pod_id = pod_id;
	want = pick(skel);
	bpf_object__for_each_program(prog, skel->obj)
		bpf_program__set_autoload(prog, prog == want);
	bpf_object__for_each_map(map, skel->obj) {
		if (bpf_map__is_internal(map))
			continue;
		fd = pin_get(n, bpf_map__name(map));
		if (fd == -ENOENT)
			continue;
		if (fd < 0) {
			err = fd;
			goto fail;
		}
		err = bpf_map__reuse_fd(map, fd);
		close(fd);
		if (err)
			goto fail;
	}
	err = xdp_bpf__load(skel);
	if (err)
		goto fail;
	*out = skel;
	return 0;
fail:
	xdp_bpf__destroy(skel);
	return err;
}

static struct bpf_program *pick_uplink(struct xdp_bpf *s)
{
	return s->progs.xdp_uplink;
}

static struct bpf_program *pick_pod(struct xdp_bpf *s)
{
	return s->progs.xdp_pod_ingress;
}

/* Detaches prog_fd from ifindex (current namespace) if it is still what
 * runs there. */
static int detach_ours(int ifindex, int prog_fd)
{
	LIBBPF_OPTS(bpf_xdp_attach_opts, opts, .old_prog_fd = prog_fd);
	int err;

	err = bpf_xdp_detach(ifindex, XDP_FLAGS_DRV_MODE | XDP_FLAGS_REPLACE,
			     &opts);
	/* gone with its device, or someone else's program by now */
	if (err == -ENODEV || err == -EEXIST)
		return 0;
	return err;
}

int xdp_node_setup(const struct pi_node *n, int uplink_ifindex)
{
	struct xdp_bpf *skel = NULL;
	char path[PATH_MAX];
	int err;

	err = load_shared(n, pick_uplink, 0, &skel);
	if (err)
		return err;
	node_pin_path(n, path, sizeof(path), "xdp_ports");
	err = bpf_map__pin(skel->maps.xdp_ports, path);
	if (!err) {
		node_pin_path(n, path, sizeof(path), "xdp_stats");
		err = bpf_map__pin(skel->maps.xdp_stats, path);
	}
	if (!err) {
		node_pin_path(n, path, sizeof(path), "prog_xdp_uplink");
		err = bpf_program__pin(skel->progs.xdp_uplink, path);
	}
	if (!err && uplink_ifindex)
		err = bpf_xdp_attach(uplink_ifindex,
				     bpf_program__fd(skel->progs.xdp_uplink),
				     ATTACH_FLAGS, NULL);
	xdp_bpf__destroy(skel);
	return err;
}

void xdp_node_teardown(const struct pi_node *n)
{
	int fd;

	if (!n->cfg.uplink_ifindex)
		return;
	fd = pin_get(n, "prog_xdp_uplink");
	if (fd < 0)
		return;
	detach_ours(n->cfg.uplink_ifindex, fd);
	close(fd);
}

static void reset_stats(int map, uint32_t id)
{
	percpu_zero(map, &id, sizeof(struct pi_dp_xdp_stats));
}

/* Marks the pod as checked in XDP (or not) where the datapath reads it. */
static int set_pod_flag(const struct pi_node *n, struct pi_pod_info *pod, bool on)
{
	if (on)
		pod->flags |= PI_POD_XDP;
	else
		pod->flags &= ~PI_POD_XDP;
	return pod_store(n, pod, BPF_EXIST);
}

/* Attaches prog_fd to the pod-side eth0 in pod_ns by a link, pinned in the
 * node's pins: the pin is what holds it (see the top of this file). The
 * kernel refuses a link where any program is attached already, so this
 * never replaces one. */
static int hold_in_pod(const struct pi_node *n, const struct pi_pod_info *pod,
		       int pod_ns, int prog_fd)
{
	LIBBPF_OPTS(bpf_link_create_opts, opts, .flags = XDP_FLAGS_DRV_MODE);
	char path[PATH_MAX];
	int link, saved, err;

	err = netns_enter(pod_ns, &saved);
	if (err)
		return err;
	/* the ifindex is resolved in the caller's namespace: the pod's */
	link = bpf_link_create(prog_fd, pod->peer_ifindex, BPF_XDP, &opts);
	if (link < 0)
		link = -errno;
	netns_restore(saved);
	if (link < 0)
		return link;
	pod_link_pin(n, pod, path, sizeof(path));
	err = bpf_obj_pin(link, path) ? -errno : 0;
	/* unpinned, the link goes with its last descriptor, and the
	 * program with it */
	close(link);
	return err;
}

/* Takes the pod's ACL off eth0: its link detached and unpinned, or (a
 * netlink attachment, as older builds made them) the program detached if it
 * is still ours. A namespace or device already gone is no error. */
static int release_in_pod(const struct pi_node *n, const struct pi_pod_info *pod,
			  int prog_fd)
{
	char path[PATH_MAX];
	int link, ns, saved, err = 0;

	pod_link_pin(n, pod, path, sizeof(path));
	link = bpf_obj_get(path);
	if (link >= 0) {
		/* a link whose device is gone is detached already */
		if (bpf_link_detach(link) && errno != ENOLINK &&
		    errno != ENOENT)
			err = -errno;
		close(link);
		if (unlink(path) && errno != ENOENT && !err)
			err = -errno;
		return err;
	}
	if (errno != ENOENT)
		return -errno;
	if (prog_fd < 0)
		return 0;
	ns = pod_netns_open(pod);
	if (ns < 0)
		return 0;
	if (!netns_enter(ns, &saved)) {
		err = detach_ours(pod->peer_ifindex, prog_fd);
		netns_restore(saved);
	}
	close(ns);
	return err;
}

/* Puts the pod in the uplink's devmap, in the node's namespace, where the
 * devmap resolves the ifindex. */
static int ports_add(const struct pi_node *n, const struct pi_pod_info *pod,
		     int ports)
{
	int saved, err;

	err = node_enter(n, &saved);
	if (err)
		return err;
	if (bpf_map_update_elem(ports, &pod->ifindex, &pod->ifindex, 0))
		err = -errno;
	netns_restore(saved);
	return err;
}

/* Loads the pod's own instance of the ACL, attaches it to the pod-side
 * eth0 in pod_ns, then marks the pod PI_POD_XDP (pod->flags and the pods
 * map) and adds it to the uplink's devmap, in that order, so that no
 * packet goes unchecked meanwhile. */
static int xdp_pod_attach(const struct pi_node *n, struct pi_pod_info *pod,
			  int pod_ns)
{
	int ports = -1, stats = -1, err;
	bool attached = false, flagged = false;
	struct xdp_bpf *skel = NULL;
	char path[PATH_MAX];
	int prog_fd = -1;

	if (pod->flags & PI_POD_NETKIT)
		return -EOPNOTSUPP;	/* netkit has no XDP hook */
	ports = pin_get(n, "xdp_ports");
	stats = pin_get(n, "xdp_stats");
	if (ports < 0 || stats < 0) {
		err = ports < 0 ? ports : stats;
		goto out;
	}
	reset_stats(stats, pod->id);
	err = load_shared(n, pick_pod, pod->id, &skel);
	if (err)
		goto out;
	prog_fd = bpf_program__fd(skel->progs.xdp_pod_ingress);
	pod_prog_pin(n, pod, path, sizeof(path));
	err = bpf_program__pin(skel->progs.xdp_pod_ingress, path);
	if (err)
		goto out;

	err = hold_in_pod(n, pod, pod_ns, prog_fd);
	if (err)
		goto out;
	attached = true;

	/* From here the node stack's packets are checked in XDP, so tc
	 * stops checking them; for a moment both did, never neither. */
	err = set_pod_flag(n, pod, true);
	if (err)
		goto out;
	flagged = true;
	err = ports_add(n, pod, ports);
out:
	if (err) {
		if (flagged)
			set_pod_flag(n, pod, false);
		if (attached)
			release_in_pod(n, pod, prog_fd);
		if (skel) {
			pod_prog_pin(n, pod, path, sizeof(path));
			unlink(path);
		}
	}
	xdp_bpf__destroy(skel);
	if (ports >= 0)
		close(ports);
	if (stats >= 0)
		close(stats);
	return err;
}

/* The reverse, in reverse order; a namespace or device already gone is
 * no error. */
static int xdp_pod_detach(const struct pi_node *n, const struct pi_pod_info *p)
{
	struct pi_pod_info copy = *p, *pod = &copy;
	char path[PATH_MAX], link_path[PATH_MAX];
	int ports, prog, err = 0, e;

	pod_prog_pin(n, pod, path, sizeof(path));
	pod_link_pin(n, pod, link_path, sizeof(link_path));
	prog = bpf_obj_get(path);
	if (prog < 0 && !(pod->flags & PI_POD_XDP) &&
	    access(link_path, F_OK))
		return 0;	/* never had the ACL */

	/* The uplink sends this pod's frames the tc way again, tc checks
	 * the node stack's again, and only then the ACL goes. */
	ports = pin_get(n, "xdp_ports");
	if (ports >= 0) {
		bpf_map_delete_elem(ports, &pod->ifindex);
		close(ports);
	}
	if (pod->flags & PI_POD_XDP)
		err = set_pod_flag(n, pod, false);
	if (err == -ENOENT)
		err = 0;	/* the pod's entry is gone already */
	e = release_in_pod(n, pod, prog);
	if (e && !err)
		err = e;
	if (prog >= 0) {
		close(prog);
		if (unlink(path) && errno != ENOENT && !err)
			err = -errno;
	}
	return err;
}

/* The program the link at `path` holds on the pod's eth0, in *prog_id: 0
 * for a link someone with the right detached (bpftool link detach), which
 * stays pinned but reports no device. 0, or -errno (-ENOENT: no pin). */
static int link_held_prog(const char *path, const struct pi_pod_info *pod,
			  uint32_t *prog_id)
{
	struct bpf_link_info info = {};
	__u32 len = sizeof(info);
	int link;

	*prog_id = 0;
	link = bpf_obj_get(path);
	if (link < 0)
		return -errno;
	if (!bpf_obj_get_info_by_fd(link, &info, &len) &&
	    info.xdp.ifindex == pod->peer_ifindex)
		*prog_id = info.prog_id;
	close(link);
	return 0;
}

/* Takes off whatever netlink attached to the pod's eth0, in either mode:
 * the hook is the ACL's, so a program there now was put by root in the
 * pod (or, on a node upgraded from a netlink ACL, is the old ACL). A link
 * someone else holds stays, and the link after this is refused. */
static void clear_eth0(const struct pi_pod_info *pod, int pod_ns)
{
	int saved;

	if (netns_enter(pod_ns, &saved))
		return;
	bpf_xdp_detach(pod->peer_ifindex, XDP_FLAGS_DRV_MODE, NULL);
	bpf_xdp_detach(pod->peer_ifindex, XDP_FLAGS_SKB_MODE, NULL);
	netns_restore(saved);
}

int xdp_pod_hold(const struct pi_node *n, const struct pi_pod_info *p)
{
	struct pi_pod_info copy = *p, *pod = &copy;
	int prog = -1, ports = -1, ns = -1, held, err = 0;
	uint32_t held_id;
	char link_path[PATH_MAX], path[PATH_MAX];

	pod_prog_pin(n, pod, path, sizeof(path));
	prog = bpf_obj_get(path);
	if (prog < 0) {
		/* no ACL: a pod that never had one, or a removal half done */
		if (errno == ENOENT && !(pod->flags & PI_POD_XDP))
			return 0;
		return -errno;
	}
	/* A pod whose namespace is gone has no eth0 to hold anything on;
	 * its records go with its pod del. */
	ns = pod_netns_open(pod);
	if (ns < 0) {
		close(prog);
		return ns == -ENOENT ? 0 : ns;
	}
	pod_link_pin(n, pod, link_path, sizeof(link_path));
	held = link_held_prog(link_path, pod, &held_id);
	if (held < 0 && held != -ENOENT) {
		err = held;
		goto out;
	}
	held = held ? held : held_id != 0;
	ports = pin_get(n, "xdp_ports");
	if (ports < 0) {
		err = ports;
		goto out;
	}
	if (held != 1) {
		/* The tc way for the moment the pod's eth0 has no program:
		 * out of the devmap (a frame redirected to a veth without
		 * XDP is dropped), tc checks the node stack's packets. */
		if (bpf_map_delete_elem(ports, &pod->ifindex) && errno != ENOENT) {
			err = -errno;
			goto out;
		}
		if (pod->flags & PI_POD_XDP)
			err = set_pod_flag(n, pod, false);
		if (!err && held == 0 && unlink(link_path) && errno != ENOENT)
			err = -errno;
		if (!err) {
			clear_eth0(pod, ns);
			err = hold_in_pod(n, pod, ns, prog);
			/* eth0 gone (its pair with it): nothing to hold */
			if (err == -ENODEV) {
				err = 0;
				goto out;
			}
		}
		if (err)
			goto out;
	}
	/* both again, also after a run that stopped between them */
	err = set_pod_flag(n, pod, true);
	if (!err)
		err = ports_add(n, pod, ports);
out:
	if (ns >= 0)
		close(ns);
	if (ports >= 0)
		close(ports);
	close(prog);
	return err;
}

static int xdp_pod_stats(const struct pi_node *n, uint32_t pod_id,
		  struct pi_xdp_stats *out)
{
	struct pi_dp_xdp_stats sum;
	int map, err;

	memset(out, 0, sizeof(*out));
	map = pin_get(n, "xdp_stats");
	if (map < 0)
		return map;
	err = percpu_sum(map, &pod_id, &sum, sizeof(sum));
	close(map);
	if (!err)
		*out = (struct pi_xdp_stats){
			.acl_packets = sum.acl_packets,
			.acl_bytes = sum.acl_bytes,
			.acl_drops = sum.acl_drops,
			.uplink_redirects = sum.uplink_redirects,
		};
	return err;
}

/* The id of the XDP program on the pod's eth0 as the kernel reports it,
 * 0 when there is none. */
static uint32_t xdp_pod_prog_id(const struct pi_pod_info *pod)
{
	uint32_t id = 0;
	int ns, saved;

	ns = pod_netns_open(pod);
	if (ns < 0)
		return 0;
	if (!netns_enter(ns, &saved)) {
		if (bpf_xdp_query_id(pod->peer_ifindex, XDP_FLAGS_DRV_MODE, &id))
			id = 0;
		netns_restore(saved);
	}
	close(ns);
	return id;
}

int pi_pod_xdp(struct pi_node *n, const struct pi_pod_info *pod,
	       uint32_t *prog_id, struct pi_xdp_stats *stats)
{
	if (!(pod->flags & PI_POD_XDP))
		return -ENOENT;
	*prog_id = xdp_pod_prog_id(pod);
	return xdp_pod_stats(n, pod->id, stats);
}

/* What a pod joining finds under its id and ifindex is a former pod's: a
 * devmap entry would have the uplink redirect frames to the device past
 * its tc checks although this pod may have no ACL (a netkit pod, a node
 * without XDP), a prog or link pin would refuse the pod its own, and counters
 * would be reported as its. No pod has this ifindex (the device is new,
 * or adoption refused one that is a pod already). */
static int xdp_reset_pod(struct pi_node *n, const struct pi_pod_info *pod)
{
	int ports, stats, err = 0;
	char path[PATH_MAX];

	/* A node made without --xdp has neither map. */
	ports = pin_get(n, "xdp_ports");
	if (ports >= 0) {
		if (bpf_map_delete_elem(ports, &pod->ifindex) && errno != ENOENT)
			err = -errno;
		close(ports);
	} else if (ports != -ENOENT) {
		err = ports;
	}
	stats = pin_get(n, "xdp_stats");
	if (stats >= 0) {
		int e = percpu_zero(stats, &pod->id, sizeof(struct pi_dp_xdp_stats));

		if (e && !err)
			err = e;
		close(stats);
	} else if (stats != -ENOENT && !err) {
		err = stats;
	}
	pod_prog_pin(n, pod, path, sizeof(path));
	if (unlink(path) && errno != ENOENT && !err)
		err = -errno;
	/* a former pod's link: on a device gone, since this one has its
	 * ifindex */
	pod_link_pin(n, pod, path, sizeof(path));
	if (unlink(path) && errno != ENOENT && !err)
		err = -errno;
	if (err)
		pr_err("cannot clear the XDP state of device %u for '%s': %s",
		       pod->ifindex, pod->name, strerror(-err));
	return err;
}

/* netkit has no XDP hook: its pods stay on tc enforcement. The ACL is
 * the reference datapath's: not on a pod that has another. */
static int xdp_enter_pod(struct pi_node *n, struct pi_pod_info *pod, int pod_ns)
{
	int err;

	if (!(n->cfg.flags & PI_NODE_XDP) || (pod->flags & PI_POD_NETKIT) ||
	    !pod_has_datapath(pod))
		return 0;
	err = xdp_pod_attach(n, pod, pod_ns);
	if (err)
		pr_err("cannot attach the XDP ingress ACL to %s of '%s': %s",
		       pod->ifname, pod->name, strerror(-err));
	return err;
}

static void xdp_leave_pod(struct pi_node *n, const struct pi_pod_info *pod)
{
	xdp_pod_detach(n, pod);
}

/* pod check: a pod whose node-stack ingress check tc leaves to XDP
 * (PI_POD_XDP) must have it on its eth0, held by its link. */
static int xdp_check_pod(struct pi_node *n, const struct pi_pod_info *pod)
{
	char path[PATH_MAX];
	uint32_t id;
	int err;

	if (!(pod->flags & PI_POD_XDP))
		return 0;
	pod_link_pin(n, pod, path, sizeof(path));
	err = link_held_prog(path, pod, &id);
	if (err) {
		pr_err("pod '%s': its XDP ingress ACL has no link (%s)",
		       pod->name, strerror(-err));
		return -ENOLINK;
	}
	if (!id || xdp_pod_prog_id(pod) != id) {
		pr_err("pod '%s': its XDP ingress ACL is no longer on %s",
		       pod->name, pod->ifname);
		return -ENOLINK;
	}
	return 0;
}

const struct pi_feature xdp_feature = {
	.name = "xdp",
	.check_pod = xdp_check_pod,
	.reset_pod = xdp_reset_pod,
	.enter_pod = xdp_enter_pod,
	.leave_pod = xdp_leave_pod,
};

/* XDP_PASS and nothing else: enough to find out whether it attaches. */
static int load_pass_prog(void)
{
	struct bpf_insn prog[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0,
		  .imm = XDP_PASS },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	int fd = bpf_prog_load(BPF_PROG_TYPE_XDP, "pi_probe_xdp", "GPL", prog,
			       2, NULL);

	return fd < 0 ? -errno : fd;
}

int xdp_probe_veth(void)
{
	int saved, prog, ifindex, ret;

	prog = load_pass_prog();
	if (prog < 0)
		return prog == -EINVAL ? 0 : prog;
	saved = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (saved < 0) {
		ret = -errno;
		close(prog);
		return ret;
	}
	if (unshare(CLONE_NEWNET)) {
		ret = -errno;
		close(saved);
		close(prog);
		return ret;
	}
	ret = nl_veth_create("pi-xprobe0", "pi-xprobe1", -1);
	if (!ret) {
		ifindex = nl_link_index("pi-xprobe1");
		ret = ifindex < 0 ? ifindex :
		      bpf_xdp_attach(ifindex, prog, XDP_FLAGS_DRV_MODE, NULL);
		ret = ret ? 0 : 1;
	}
	close(prog);
	/* Leaving drops the namespace's last reference, and with it the
	 * devices and the attachment. */
	netns_restore(saved);
	return ret;
}
