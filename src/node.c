/* SPDX-License-Identifier: GPL-2.0 */
/*
 * podinject node up|down|show: a node is a network namespace (made here or
 * adopted), the reference datapath's BPF objects pinned under
 * /sys/fs/bpf/podinject/NODE, and optionally an uplink device inside it.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "cmds.h"
#include "kernel_features.h"
#include "nl.h"
#include "node.skel.h"
#include "util.h"
#include "xdp.h"

static int node_help(int argc, char **argv)
{
	fprintf(stderr,
		"Usage: podinject [-N NODE] node up [--uplink DEV] [--xdp] [--host]\n"
		"                                   [--attach auto|tcx|clsact]\n"
		"       podinject [-N NODE] node down [--force]\n"
		"       podinject [-N NODE] [-j] node show\n"
		"\n"
		"A node is the network namespace named NODE (made by 'up' when it\n"
		"does not exist) plus its datapath pinned under %s/NODE.\n"
		"--uplink DEV: a device already inside the node's namespace that\n"
		"leads to other nodes; traffic to non-local addresses leaves\n"
		"through it with bpf_redirect_neigh().\n"
		"--xdp: veth pods get their ingress ACL as native XDP on their\n"
		"eth0, and the uplink sends their traffic to them with\n"
		"XDP_REDIRECT (docs/datapath.md; netkit pods stay on tc).\n"
		"--host: the node is the host's own network namespace (where a\n"
		"container runtime's host-side devices are), not one named NODE;\n"
		"its devices are left alone unless named with --uplink.\n"
		"down --force: remove the pins and links of a node another build\n"
		"made, leaving its pods' namespaces and devices.\n"
		"--attach: tcx links where the kernel has them (auto, the\n"
		"default), or clsact qdiscs with cls_bpf filters, as on kernels\n"
		"without tcx.\n",
		PI_PIN_ROOT);
	return EXIT_OK;
}

static int add_host_endpoint(int map, int family, const void *addr)
{
	struct pi_endpoint_key key = { .family = family };
	struct pi_endpoint ep = { .kind = PI_EP_HOST };

	memcpy(key.addr.a, addr, family == AF_INET ? 4 : 16);
	return bpf_map_update_elem(map, &key, &ep, BPF_NOEXIST) ? -errno : 0;
}

/* Every address the node's namespace owns is the node's: pods reach them
 * through the stack, not the uplink. Called inside the namespace. */
static int register_node_addresses(int map)
{
	struct ifaddrs *ifa, *all;
	int err = 0;

	if (getifaddrs(&all))
		return -errno;
	for (ifa = all; ifa && !err; ifa = ifa->ifa_next) {
		if (!ifa->ifa_addr || (ifa->ifa_flags & IFF_LOOPBACK))
			continue;
		if (ifa->ifa_addr->sa_family == AF_INET)
			err = add_host_endpoint(map, AF_INET,
				&((struct sockaddr_in *)ifa->ifa_addr)->sin_addr);
		else if (ifa->ifa_addr->sa_family == AF_INET6)
			err = add_host_endpoint(map, AF_INET6,
				&((struct sockaddr_in6 *)ifa->ifa_addr)->sin6_addr);
		if (err == -EEXIST)
			err = 0;
	}
	freeifaddrs(all);
	return err;
}

static int pin_objects(struct node_bpf *skel, const char *dir)
{
	struct bpf_program *prog;
	struct bpf_map *map;
	char path[PATH_MAX];

	bpf_object__for_each_map(map, skel->obj) {
		if (bpf_map__is_internal(map))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir,
			 bpf_map__name(map));
		if (bpf_map__pin(map, path))
			return -errno;
	}
	bpf_object__for_each_program(prog, skel->obj) {
		snprintf(path, sizeof(path), "%s/prog_%s", dir,
			 bpf_program__name(prog));
		if (bpf_program__pin(prog, path))
			return -errno;
	}
	return 0;
}

/* The pod_meta map: userspace's half of each pod (names, namespaces), kept
 * beside the datapath's maps so the pins stay the node's whole state. */
static int create_meta_map(const char *dir)
{
	char path[PATH_MAX];
	int fd, err = 0;

	fd = bpf_map_create(BPF_MAP_TYPE_HASH, PI_POD_META_PIN, sizeof(__u32),
			    sizeof(struct pi_pod_meta), PI_MAX_PODS, NULL);
	if (fd < 0)
		return -errno;
	snprintf(path, sizeof(path), "%s/%s", dir, PI_POD_META_PIN);
	if (bpf_obj_pin(fd, path))
		err = -errno;
	close(fd);
	return err;
}

/* The first record of the node's configuration, written before anything
 * can open the node, so that its ABI version is always there. */
static int write_first_config(const char *dir, const struct pi_node_config *cfg)
{
	char path[PATH_MAX];
	uint32_t zero = 0;
	int fd, err = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, node_map_names[M_NODE_CONFIG]);
	fd = bpf_obj_get(path);
	if (fd < 0)
		return -errno;
	if (bpf_map_update_elem(fd, &zero, cfg, 0))
		err = -errno;
	close(fd);
	return err;
}

/* mkdir of the node's pin directory is what makes a name taken: of two
 * `node up` of one name, one gets EEXIST. The root may be removed by a
 * concurrent `node down` of the last other node between our two mkdirs. */
static int make_pin_dir(const char *path)
{
	for (int tries = 0; tries < 10; tries++) {
		if (mkdir(PI_PIN_ROOT, 0700) && errno != EEXIST)
			return -errno;
		if (!mkdir(path, 0700))
			return 0;
		if (errno != ENOENT)
			return -errno;
	}
	return -ENOENT;
}

static int node_up(int argc, char **argv)
{
	const char *uplink = NULL;
	int attach = 0;		/* 0 auto, 1 tcx, 2 clsact */
	struct node_bpf *skel = NULL;
	struct pi_node_config cfg = {};
	struct features feat;
	struct pi_node n;
	bool made_ns = false, made_dir = false, xdp = false, host = false;
	int saved = -1, err, ret = EXIT_RUNTIME, lock_fd = -1;
	char path[PATH_MAX];

	while (argc > 0) {
		if (!strcmp(argv[0], "--uplink")) {
			if (argc < 2)
				return usage_err("--uplink needs a device name");
			uplink = argv[1];
			argc -= 2;
			argv += 2;
		} else if (!strcmp(argv[0], "--xdp")) {
			xdp = true;
			argc--;
			argv++;
		} else if (!strcmp(argv[0], "--host")) {
			host = true;
			argc--;
			argv++;
		} else if (!strcmp(argv[0], "--attach")) {
			if (argc < 2)
				return usage_err("--attach needs auto, tcx or clsact");
			if (!strcmp(argv[1], "tcx"))
				attach = 1;
			else if (!strcmp(argv[1], "clsact"))
				attach = 2;
			else if (strcmp(argv[1], "auto"))
				return usage_err("invalid --attach '%s': auto, tcx or clsact",
						 argv[1]);
			argc -= 2;
			argv += 2;
		} else {
			return usage_err("unknown argument '%s'", argv[0]);
		}
	}
	if (uplink && (strlen(uplink) >= IFNAMSIZ || !*uplink))
		return usage_err("invalid device name '%s'", uplink);
	if (host && netns_exists(node_name))
		return usage_err("--host: the node is the host's own namespace, but a namespace named '%s' exists; pick another node name",
				 node_name);

	err = ensure_bpffs();
	if (err) {
		p_err("cannot mount bpffs at /sys/fs/bpf: %s", strerror(-err));
		return EXIT_RUNTIME;
	}
	snprintf(path, sizeof(path), "%s/%s", PI_PIN_ROOT, node_name);
	if (!access(path, F_OK)) {
		p_err("node '%s' is already up", node_name);
		return EXIT_RUNTIME;
	}
	err = probe_features(&feat);
	if (err) {
		p_err("cannot probe kernel features: %s", strerror(-err));
		return EXIT_RUNTIME;
	}
	if (!feat.bpf_loop) {
		p_err("this kernel lacks bpf_loop(), which the policy needs");
		return EXIT_RUNTIME;
	}
	if (attach == 1 && !feat.tcx) {
		p_err("this kernel has no tcx (see 'podinject features')");
		return EXIT_RUNTIME;
	}
	if (attach == 2)
		feat.tcx = false;
	if (xdp && xdp_probe_veth() != 1) {
		p_err("this kernel cannot attach native XDP to veth devices (see 'podinject features')");
		return EXIT_RUNTIME;
	}

	err = make_pin_dir(path);
	if (err == -EEXIST) {
		p_err("node '%s' is already up", node_name);
		return EXIT_RUNTIME;
	}
	if (err) {
		p_err("cannot create %s: %s", path, strerror(-err));
		return EXIT_RUNTIME;
	}
	made_dir = true;
	/* Held until the node is complete: nobody sees it half made. */
	lock_fd = node_lock_dir(path, NODE_LOCK_EXCLUSIVE, lock_timeout_ms);
	if (lock_fd < 0) {
		p_err("cannot lock %s: %s", path, strerror(-lock_fd));
		goto out;
	}
	if (!host && !netns_exists(node_name)) {
		err = netns_create(node_name);
		if (err) {
			p_err("cannot create namespace '%s': %s", node_name,
			      strerror(-err));
			goto out;
		}
		made_ns = true;
	}

	skel = node_bpf__open_and_load();
	if (!skel) {
		p_err("cannot load the node datapath: %s", strerror(errno));
		goto out;
	}
	err = pin_objects(skel, path);
	if (!err)
		err = create_meta_map(path);
	snprintf(cfg.name, sizeof(cfg.name), "%s", node_name);
	cfg.abi = PI_ABI_VERSION;
	cfg.flags = (feat.tcx ? PI_NODE_TCX : 0) |
		    (made_ns ? PI_NODE_OWNS_NETNS : 0) |
		    (host ? PI_NODE_HOST : 0);
	if (host) {
		struct stat st;

		if (!stat(HOST_NETNS_PATH, &st))
			cfg.netns_ino = st.st_ino;
		else
			err = -errno;
	}
	if (!err)
		err = write_first_config(path, &cfg);
	if (err) {
		p_err("cannot pin objects under %s: %s", path, strerror(-err));
		goto out;
	}

	if (node_open(&n, node_name, NODE_LOCK_HELD, 0))
		goto out;
	if (node_enter(&n, &saved)) {
		p_err("cannot enter namespace '%s'", node_name);
		goto out_node;
	}
	if (uplink) {
		int ifindex = nl_link_index(uplink);

		if (ifindex < 0) {
			p_err("uplink '%s' does not exist in namespace '%s'",
			      uplink, host ? "of the host" : node_name);
			goto out_node;
		}
		err = nl_link_set_up(ifindex);
		if (!err) {
			node_pin_path(&n, path, sizeof(path), "link_uplink");
			err = attach_prog(n.progs[P_UPLINK_INGRESS], ifindex,
					  PI_HOOK_INGRESS,
					  node_attach_mode(&n), false,
					  PI_PRIO_DATAPATH, path);
		}
		if (err) {
			p_err("cannot attach to uplink '%s': %s", uplink,
			      strerror(-err));
			goto out_node;
		}
		n.cfg.uplink_ifindex = ifindex;
	}
	if (xdp) {
		err = xdp_node_setup(&n, n.cfg.uplink_ifindex);
		if (err == -EBUSY)
			p_err("uplink '%s' runs another XDP program; podinject does not replace it",
			      uplink);
		else if (err)
			p_err("cannot set up XDP%s%s: %s",
			      uplink ? " on uplink " : "", uplink ? uplink : "",
			      strerror(-err));
		if (err)
			goto out_node;
		n.cfg.flags |= PI_NODE_XDP;
	}
	err = register_node_addresses(n.maps[M_ENDPOINTS]);
	if (!err)
		err = node_save_config(&n);
	if (err) {
		p_err("cannot record node state: %s", strerror(-err));
		goto out_node;
	}
	ret = EXIT_OK;
	p_info("node %s up (%s%s, namespace %s%s)", node_name,
	       feat.tcx ? "tcx" : "clsact", xdp ? ", xdp" : "",
	       host ? "of the host" : node_name,
	       host ? "" : made_ns ? ", created" : ", adopted");
	if (json_output) {
		json_obj_open(jw);
		json_kstr(jw, "node", node_name);
		json_kstr(jw, "attach", feat.tcx ? "tcx" : "clsact");
		json_kbool(jw, "xdp", xdp);
		json_kbool(jw, "host", host);
		json_kbool(jw, "created_netns", made_ns);
		json_obj_close(jw);
		json_end(jw);
	}
out_node:
	if (ret != EXIT_OK && (n.cfg.flags & PI_NODE_XDP))
		xdp_node_teardown(&n);
	if (saved >= 0)
		netns_restore(saved);
	if (ret != EXIT_OK && n.cfg.uplink_ifindex)
		detach_prog(n.cfg.uplink_ifindex, PI_HOOK_INGRESS,
			    node_attach_mode(&n), PI_PRIO_DATAPATH, path);
	node_close(&n);
out:
	node_bpf__destroy(skel);
	if (ret != EXIT_OK) {
		snprintf(path, sizeof(path), "%s/%s", PI_PIN_ROOT, node_name);
		if (made_dir)
			rm_tree(path);
		rmdir(PI_PIN_ROOT);	/* only when no other node is left */
		if (made_ns)
			netns_delete(node_name);
	}
	if (lock_fd >= 0)
		close(lock_fd);
	return ret;
}

static int remove_pod_cb(const struct pi_node *n, const struct pi_pod_info *pod,
			 void *ctx)
{
	int *err = ctx;
	int e = pod_remove((struct pi_node *)n, pod);

	if (e && !*err)
		*err = e;
	return 0;
}

static int node_down(int argc, char **argv)
{
	char path[PATH_MAX];
	struct pi_node n;
	bool force = false;
	int err = 0, saved, lock_fd;

	if (argc == 1 && !strcmp(argv[0], "--force"))
		force = true;
	else if (argc > 0)
		return usage_err("unknown argument '%s'", argv[0]);
	snprintf(path, sizeof(path), "%s/%s", PI_PIN_ROOT, node_name);
	lock_fd = node_lock_dir(path, NODE_LOCK_EXCLUSIVE, lock_timeout_ms);
	if (lock_fd == -ENOENT) {
		p_err("node '%s' is not up", node_name);
		return EXIT_RUNTIME;
	}
	if (lock_fd < 0) {
		p_err(lock_fd == -EBUSY ?
		      "node '%s' is busy: another command holds its lock; try again later" :
		      "cannot lock node '%s'", node_name);
		return EXIT_RUNTIME;
	}
	err = node_open(&n, node_name, NODE_LOCK_HELD, 0);
	if (err) {
		/* Another build's node is left alone unless forced: its pods
		 * are in maps this build cannot read. A node that is broken
		 * (its namespace deleted under it) still has pins; take them
		 * away so the name can be used again. */
		if (err == -EPROTO && !force) {
			close(lock_fd);
			return EXIT_RUNTIME;
		}
		err = rm_tree(path);
		close(lock_fd);
		rmdir(PI_PIN_ROOT);
		if (err) {
			p_err("cannot remove %s: %s", path, strerror(-err));
			return EXIT_RUNTIME;
		}
		if (force) {
			p_info("node %s: pins and links removed (forced); its pods' namespaces and devices are left",
			       node_name);
			return EXIT_OK;
		}
		p_err("node '%s' was broken; its pins are removed", node_name);
		return EXIT_RUNTIME;
	}
	err = 0;
	pod_for_each(&n, remove_pod_cb, &err);
	if (n.cfg.uplink_ifindex && !node_enter(&n, &saved)) {
		if (n.cfg.flags & PI_NODE_XDP)
			xdp_node_teardown(&n);
		node_pin_path(&n, path, sizeof(path), "link_uplink");
		detach_prog(n.cfg.uplink_ifindex, PI_HOOK_INGRESS,
			    node_attach_mode(&n), PI_PRIO_DATAPATH, path);
		netns_restore(saved);
	}
	{
		int e = rm_tree(n.pin_dir);

		if (e && !err)
			err = e;
	}
	if (n.cfg.flags & PI_NODE_OWNS_NETNS) {
		close(n.netns_fd);
		n.netns_fd = -1;
		int e = netns_delete(node_name);

		if (e && !err)
			err = e;
	}
	node_close(&n);
	close(lock_fd);
	rmdir(PI_PIN_ROOT);	/* only when no other node is left */
	if (err) {
		p_err("node '%s' down with errors: %s", node_name,
		      strerror(-err));
		return EXIT_RUNTIME;
	}
	p_info("node %s down", node_name);
	return EXIT_OK;
}

static int count_pod(const struct pi_node *n, const struct pi_pod_info *pod, void *c)
{
	(*(int *)c)++;
	return 0;
}

static int node_show(int argc, char **argv)
{
	char ifname[IF_NAMESIZE] = "", buf[64];
	struct pi_endpoint_key key, next, *prev = NULL;
	struct pi_endpoint ep;
	struct pi_node n;
	int pods = 0, saved;

	if (argc > 0)
		return usage_err("unknown argument '%s'", argv[0]);
	if (node_open_ro(&n))
		return EXIT_RUNTIME;
	pod_for_each(&n, count_pod, &pods);
	if (n.cfg.uplink_ifindex && !node_enter(&n, &saved)) {
		nl_link_name(n.cfg.uplink_ifindex, ifname);
		netns_restore(saved);
	}
	if (json_output) {
		json_obj_open(jw);
		json_kstr(jw, "node", n.name);
		json_kstr(jw, "netns", n.cfg.flags & PI_NODE_HOST ? HOST_NETNS_PATH : n.name);
		json_kbool(jw, "host", n.cfg.flags & PI_NODE_HOST);
		json_kbool(jw, "owns_netns", n.cfg.flags & PI_NODE_OWNS_NETNS);
		json_kstr(jw, "attach", n.cfg.flags & PI_NODE_TCX ? "tcx" :
								"clsact");
		json_kbool(jw, "xdp", n.cfg.flags & PI_NODE_XDP);
		json_kstr(jw, "pin_dir", n.pin_dir);
		json_key(jw, "uplink");
		if (n.cfg.uplink_ifindex) {
			json_obj_open(jw);
			json_kstr(jw, "name", ifname);
			json_ku64(jw, "ifindex", n.cfg.uplink_ifindex);
			json_obj_close(jw);
		} else {
			json_null(jw);
		}
		json_ku64(jw, "pods", pods);
		json_key(jw, "node_addresses");
		json_arr_open(jw);
	} else {
		printf("node %s\n  netns %s%s\n  attach %s%s\n  pins %s\n",
		       n.name, n.cfg.flags & PI_NODE_HOST ? "(the host's)" : n.name,
		       n.cfg.flags & PI_NODE_OWNS_NETNS ? " (owned)" : "",
		       n.cfg.flags & PI_NODE_TCX ? "tcx" : "clsact",
		       n.cfg.flags & PI_NODE_XDP ?
		       ", xdp (pod ingress ACL on veth eth0, uplink XDP_REDIRECT)" : "",
		       n.pin_dir);
		if (n.cfg.uplink_ifindex)
			printf("  uplink %s (ifindex %u)\n", ifname,
			       n.cfg.uplink_ifindex);
		else
			printf("  uplink none (non-pod traffic goes to the stack)\n");
		printf("  pods %d\n  node addresses:", pods);
	}
	while (!bpf_map_get_next_key(n.maps[M_ENDPOINTS], prev, &next)) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(n.maps[M_ENDPOINTS], &key, &ep) ||
		    ep.kind != PI_EP_HOST)
			continue;
		pi_fmt_addr(key.family, &key.addr, -1, buf, sizeof(buf));
		if (json_output)
			json_str(jw, buf);
		else
			printf(" %s", buf);
	}
	if (json_output) {
		json_arr_close(jw);
		json_obj_close(jw);
		json_end(jw);
	} else {
		printf("\n");
	}
	node_close(&n);
	return EXIT_OK;
}

int do_node(int argc, char **argv)
{
	static const struct cmd cmds[] = {
		{ "up", node_up },
		{ "down", node_down },
		{ "show", node_show },
		{ "help", node_help },
		{ 0 },
	};

	return cmd_select(cmds, argc, argv, node_help);
}
