/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pbload: loads one bench program (bench/bpf/bench.bpf.c) into a device of
 * a namespace the bench made, with its settings fixed before load.
 *
 *   pbload attach NETNS DEV HOOK PROG [--to DEV] [--dmac MAC] [--smac MAC]
 *                 [--daddr A.B.C.D] [--pin DIR]
 *       HOOK: tc-ingress | tc-egress (clsact, cls_bpf direct action),
 *             tcx-first (tcx ingress, BPF_F_BEFORE: ahead of everything),
 *             xdp (native XDP).
 *       --to DEV: the device (in NETNS) the program redirects to.
 *       --pin DIR: pins the maps (DIR/hits, DIR/ctl) and a tcx link
 *       (DIR/link; a tcx program stays attached only while pinned).
 *   pbload hits DIR          prints the sum over CPUs of DIR/hits
 *   pbload ctl DIR VALUE     writes VALUE to DIR/ctl (steer_reply on/off)
 *
 * The attachments live as long as the device: tearing down the namespace
 * removes them (and rm -r DIR the pins).
 */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <linux/bpf.h>
#include <linux/if_link.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "bench.skel.h"

/* Kernel UAPI values newer than Debian 12's headers (tcx is 6.6+). */
#define PB_BPF_TCX_INGRESS	46
#define PB_BPF_F_BEFORE		(1U << 3)

struct link_create_attr {
	__u32 prog_fd;
	__u32 target_ifindex;
	__u32 attach_type;
	__u32 flags;
	__u32 relative_fd;
	__u32 pad;
	__u64 expected_revision;
};

static int usage(void)
{
	fprintf(stderr,
		"usage: pbload attach NETNS DEV tc-ingress|tc-egress|tcx-first|xdp PROG\n"
		"              [--to DEV] [--dmac MAC] [--smac MAC] [--daddr IP] [--pin DIR]\n"
		"       pbload hits DIR\n"
		"       pbload ctl DIR VALUE\n");
	return 2;
}

static int enter_netns(const char *name)
{
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "/run/netns/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET)) {
		fprintf(stderr, "error: cannot enter netns %s: %s\n", name,
			strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

static int parse_mac(const char *s, volatile __u8 *mac)
{
	unsigned int b[6];

	if (sscanf(s, "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4],
		   &b[5]) != 6)
		return -1;
	for (int i = 0; i < 6; i++)
		mac[i] = b[i];
	return 0;
}

static int tcx_first(int prog_fd, int ifindex)
{
	struct link_create_attr attr = {
		.prog_fd = prog_fd,
		.target_ifindex = ifindex,
		.attach_type = PB_BPF_TCX_INGRESS,
		.flags = PB_BPF_F_BEFORE,
	};
	int fd = syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));

	return fd < 0 ? -errno : fd;
}

static int tc_attach(int prog_fd, int ifindex, enum bpf_tc_attach_point at)
{
	DECLARE_LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex,
			    .attach_point = at);
	DECLARE_LIBBPF_OPTS(bpf_tc_opts, opts, .prog_fd = prog_fd,
			    .priority = 1, .handle = 1);
	int err = bpf_tc_hook_create(&hook);

	if (err && err != -EEXIST)
		return err;
	return bpf_tc_attach(&hook, &opts);
}

static int pin_map(struct bpf_map *map, const char *dir, const char *name)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (bpf_obj_pin(bpf_map__fd(map), path)) {
		fprintf(stderr, "error: cannot pin %s: %s\n", path,
			strerror(errno));
		return -1;
	}
	return 0;
}

static int cmd_attach(int argc, char **argv)
{
	const char *netns, *dev, *hook, *prog_name, *to = NULL, *pin = NULL;
	const char *dmac = NULL, *smac = NULL, *daddr = NULL;
	struct bench_bpf *skel;
	struct bpf_program *prog, *p;
	int ifindex, fd, err = 1;

	if (argc < 4)
		return usage();
	netns = argv[0];
	dev = argv[1];
	hook = argv[2];
	prog_name = argv[3];
	for (int i = 4; i < argc; i++) {
		if (i + 1 >= argc)
			return usage();
		if (!strcmp(argv[i], "--to"))
			to = argv[++i];
		else if (!strcmp(argv[i], "--dmac"))
			dmac = argv[++i];
		else if (!strcmp(argv[i], "--smac"))
			smac = argv[++i];
		else if (!strcmp(argv[i], "--daddr"))
			daddr = argv[++i];
		else if (!strcmp(argv[i], "--pin"))
			pin = argv[++i];
		else
			return usage();
	}
	if (enter_netns(netns))
		return 1;
	ifindex = if_nametoindex(dev);
	if (!ifindex) {
		fprintf(stderr, "error: no device %s in %s\n", dev, netns);
		return 1;
	}
	skel = bench_bpf__open();
	if (!skel) {
		fprintf(stderr, "error: cannot open bench_bpf\n");
		return 1;
	}
	if (to) {
		skel->rodata->cfg_ifindex = if_nametoindex(to);
		if (!skel->rodata->cfg_ifindex) {
			fprintf(stderr, "error: no device %s in %s\n", to,
				netns);
			goto out;
		}
	}
	if ((dmac && parse_mac(dmac, skel->rodata->cfg_dmac)) ||
	    (smac && parse_mac(smac, skel->rodata->cfg_smac)) ||
	    (daddr && inet_pton(AF_INET, daddr,
				(void *)&skel->rodata->cfg_daddr) != 1)) {
		fprintf(stderr, "error: bad MAC or address\n");
		goto out;
	}
	prog = bpf_object__find_program_by_name(skel->obj, prog_name);
	if (!prog) {
		fprintf(stderr, "error: no program %s\n", prog_name);
		goto out;
	}
	bpf_object__for_each_program(p, skel->obj)
		bpf_program__set_autoload(p, p == prog);
	if (bench_bpf__load(skel)) {
		fprintf(stderr, "error: cannot load %s: %s\n", prog_name,
			strerror(errno));
		goto out;
	}
	if (pin) {
		mkdir(pin, 0700);
		if (pin_map(skel->maps.hits, pin, "hits") ||
		    pin_map(skel->maps.ctl, pin, "ctl"))
			goto out;
	}
	fd = bpf_program__fd(prog);
	if (!strcmp(hook, "tc-ingress"))
		err = tc_attach(fd, ifindex, BPF_TC_INGRESS);
	else if (!strcmp(hook, "tc-egress"))
		err = tc_attach(fd, ifindex, BPF_TC_EGRESS);
	else if (!strcmp(hook, "xdp"))
		err = bpf_xdp_attach(ifindex, fd, XDP_FLAGS_DRV_MODE, NULL);
	else if (!strcmp(hook, "tcx-first")) {
		char path[512];
		int link = tcx_first(fd, ifindex);

		if (link < 0 || !pin) {
			err = link < 0 ? link : -EINVAL;
		} else {
			snprintf(path, sizeof(path), "%s/link", pin);
			err = bpf_obj_pin(link, path) ? -errno : 0;
			close(link);
		}
	} else {
		usage();
		goto out;
	}
	if (err) {
		fprintf(stderr, "error: cannot attach %s to %s %s: %s\n",
			prog_name, dev, hook, strerror(err < 0 ? -err : err));
		err = 1;
	}
out:
	bench_bpf__destroy(skel);
	return err ? 1 : 0;
}

static int cmd_hits(const char *dir)
{
	int ncpu = libbpf_num_possible_cpus(), fd;
	unsigned long long sum = 0;
	char path[512];
	__u64 *v = calloc(ncpu, sizeof(*v));
	__u32 zero = 0;

	snprintf(path, sizeof(path), "%s/hits", dir);
	fd = bpf_obj_get(path);
	if (fd < 0 || bpf_map_lookup_elem(fd, &zero, v)) {
		fprintf(stderr, "error: cannot read %s: %s\n", path,
			strerror(errno));
		return 1;
	}
	for (int c = 0; c < ncpu; c++)
		sum += v[c];
	printf("%llu\n", sum);
	free(v);
	return 0;
}

static int cmd_ctl(const char *dir, const char *value)
{
	__u32 zero = 0, v = strtoul(value, NULL, 0);
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/ctl", dir);
	fd = bpf_obj_get(path);
	if (fd < 0 || bpf_map_update_elem(fd, &zero, &v, 0)) {
		fprintf(stderr, "error: cannot write %s: %s\n", path,
			strerror(errno));
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "attach"))
		return cmd_attach(argc - 2, argv + 2);
	if (argc == 3 && !strcmp(argv[1], "hits"))
		return cmd_hits(argv[2]);
	if (argc == 4 && !strcmp(argv[1], "ctl"))
		return cmd_ctl(argv[2], argv[3]);
	return usage();
}
