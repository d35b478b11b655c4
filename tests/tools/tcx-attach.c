/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Test helper standing in for another agent: attaches a program from an
 * object file with a tcx link, and reads a hook's chain.
 *   tcx-attach attach OBJ.o PROG NETNS DEV ingress|egress|peer|primary PIN_DIR
 *       loads OBJ, puts PROG first at DEV's hook inside NETNS, pins the link
 *       at PIN_DIR/link and the object's first map at PIN_DIR/map
 *   tcx-attach query NETNS DEV ingress|egress|peer|primary
 *       prints the program names at the hook, first to last
 *   tcx-attach attach-tc OBJ.o PROG NETNS DEV ingress|egress PIN_DIR PRIO
 *       the same with a clsact cls_bpf filter at PRIO (kernels without tcx)
 *   tcx-attach counter PIN_DIR
 *       prints the u64 at key 0 of the pinned map
 *   tcx-attach update LINK_PIN OBJ.o PROG PIN_DIR
 *       replaces the program of the pinned link with PROG (an agent
 *       upgrading its program in place), pins the object's first map at
 *       PIN_DIR/map, prints the id of the program it replaced
 *   tcx-attach update-id LINK_PIN PROG_ID
 *       puts the program with that id back on the link
 *   tcx-attach link-ids-to ID
 *       makes and closes BPF links (socket lookup ones, in a namespace of
 *       its own) until the next link the kernel makes gets id ID, so that
 *       a test can give a link the id a program has (the kernel numbers
 *       links and programs apart); prints "next ID", or "past N" (exit 3)
 *       when link ids are past ID already
 */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/bpf.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

static int enter(const char *netns)
{
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "/run/netns/%s", netns);
	fd = open(path, O_RDONLY);
	if (fd < 0 || setns(fd, CLONE_NEWNET)) {
		fprintf(stderr, "cannot enter %s: %s\n", netns, strerror(errno));
		return -1;
	}
	close(fd);
	return 0;
}

/* tcx ingress/egress, or a netkit device's primary/peer hook */
static int hook(const char *dir)
{
	if (!strcmp(dir, "peer"))
		return 55;
	if (!strcmp(dir, "primary"))
		return 54;
	return !strcmp(dir, "ingress") ? 46 : 47;
}

/* A socket lookup program that passes everything, made here: no object. */
static int pass_lookup_prog(void)
{
	struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 0, .imm = 1 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, o,
		    .expected_attach_type = BPF_SK_LOOKUP);

	return bpf_prog_load(BPF_PROG_TYPE_SK_LOOKUP, "link_ids", "GPL",
			     insns, 2, &o);
}

static int link_ids_to(const char *arg)
{
	char *end;
	unsigned long want = strtoul(arg, &end, 10);
	int prog, ns;

	if (*end || !want || unshare(CLONE_NEWNET)) {
		fprintf(stderr, "link-ids-to: %s\n", *end || !want ?
			"bad id" : strerror(errno));
		return 1;
	}
	prog = pass_lookup_prog();
	ns = open("/proc/self/ns/net", O_RDONLY);
	if (prog < 0 || ns < 0) {
		fprintf(stderr, "link-ids-to: %s\n", strerror(errno));
		return 1;
	}
	/* One kept open for the run: the first socket lookup link of the
	 * machine turns a static key on, and the last one off again, each
	 * a text patch of about a millisecond. */
	if (bpf_link_create(prog, ns, BPF_SK_LOOKUP, NULL) < 0) {
		fprintf(stderr, "link-ids-to: %s\n", strerror(errno));
		return 1;
	}
	for (;;) {
		struct bpf_link_info li = {};
		__u32 len = sizeof(li);
		int l = bpf_link_create(prog, ns, BPF_SK_LOOKUP, NULL);

		if (l < 0 || bpf_obj_get_info_by_fd(l, &li, &len)) {
			fprintf(stderr, "link-ids-to: %s\n", strerror(errno));
			return 1;
		}
		close(l);
		if (li.id >= want) {
			printf("past %u\n", li.id);
			return 3;
		}
		if (li.id + 1 == want) {
			printf("next %lu\n", want);
			return 0;
		}
	}
}

static int query(const char *dev, const char *dir)
{
	__u32 ids[64], cnt = 64, flags = 0;
	int ifindex = if_nametoindex(dev);

	if (!ifindex || bpf_prog_query(ifindex, hook(dir), 0, &flags, ids,
				       &cnt)) {
		fprintf(stderr, "query %s: %s\n", dev, strerror(errno));
		return 1;
	}
	for (__u32 i = 0; i < cnt; i++) {
		struct bpf_prog_info info = {};
		__u32 len = sizeof(info);
		int fd = bpf_prog_get_fd_by_id(ids[i]);

		if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len))
			return 1;
		printf("%s%s", i ? " " : "", info.name);
		close(fd);
	}
	printf("\n");
	return 0;
}

int main(int argc, char **argv)
{
	struct {
		__u32 prog_fd, ifindex, type, flags, rel, pad;
		__u64 rev;
	} attr = {};
	struct bpf_object *obj;
	struct bpf_program *prog;
	char path[512];
	int link, ifindex;

	if (argc == 3 && !strcmp(argv[1], "counter")) {
		unsigned long long v = 0;
		__u32 zero = 0;
		int fd;

		snprintf(path, sizeof(path), "%s/map", argv[2]);
		fd = bpf_obj_get(path);
		if (fd < 0 || bpf_map_lookup_elem(fd, &zero, &v))
			return 1;
		printf("%llu\n", v);
		return 0;
	}
	if ((argc == 6 && !strcmp(argv[1], "update")) ||
	    (argc == 4 && !strcmp(argv[1], "update-id"))) {
		struct bpf_link_info li = {};
		__u32 len = sizeof(li);
		int fd, lfd = bpf_obj_get(argv[2]);

		if (lfd < 0 || bpf_obj_get_info_by_fd(lfd, &li, &len)) {
			fprintf(stderr, "%s: %s\n", argv[2], strerror(errno));
			return 1;
		}
		if (argc == 4) {
			fd = bpf_prog_get_fd_by_id(atoi(argv[3]));
		} else {
			obj = bpf_object__open_file(argv[3], NULL);
			if (!obj || bpf_object__load(obj))
				return 1;
			prog = bpf_object__find_program_by_name(obj, argv[4]);
			if (!prog)
				return 1;
			fd = bpf_program__fd(prog);
			snprintf(path, sizeof(path), "%s/map", argv[5]);
			if (bpf_map__pin(bpf_object__next_map(obj, NULL), path))
				return 1;
		}
		if (fd < 0 || bpf_link_update(lfd, fd, NULL)) {
			fprintf(stderr, "update: %s\n", strerror(errno));
			return 1;
		}
		printf("%u\n", li.prog_id);
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "link-ids-to"))
		return link_ids_to(argv[2]);
	if (argc == 5 && !strcmp(argv[1], "query"))
		return enter(argv[2]) ? 1 : query(argv[3], argv[4]);
	if (argc == 9 && !strcmp(argv[1], "attach-tc")) {
		DECLARE_LIBBPF_OPTS(bpf_tc_hook, th);
		DECLARE_LIBBPF_OPTS(bpf_tc_opts, to, .handle = 1);
		int err;

		obj = bpf_object__open_file(argv[2], NULL);
		if (!obj || bpf_object__load(obj))
			return 1;
		prog = bpf_object__find_program_by_name(obj, argv[3]);
		if (!prog || enter(argv[4]))
			return 1;
		th.ifindex = if_nametoindex(argv[5]);
		th.attach_point = !strcmp(argv[6], "ingress") ? BPF_TC_INGRESS :
							       BPF_TC_EGRESS;
		to.prog_fd = bpf_program__fd(prog);
		to.priority = atoi(argv[8]);
		err = bpf_tc_hook_create(&th);
		if (err && err != -EEXIST)
			return 1;
		if (bpf_tc_attach(&th, &to)) {
			fprintf(stderr, "attach-tc: %s\n", strerror(errno));
			return 1;
		}
		snprintf(path, sizeof(path), "%s/map", argv[7]);
		return bpf_map__pin(bpf_object__next_map(obj, NULL), path) ? 1 : 0;
	}
	if (argc != 8 || strcmp(argv[1], "attach")) {
		fprintf(stderr, "usage: see the top of tcx-attach.c\n");
		return 2;
	}
	obj = bpf_object__open_file(argv[2], NULL);
	if (!obj || bpf_object__load(obj)) {
		fprintf(stderr, "cannot load %s\n", argv[2]);
		return 1;
	}
	prog = bpf_object__find_program_by_name(obj, argv[3]);
	if (!prog || enter(argv[4]))
		return 1;
	ifindex = if_nametoindex(argv[5]);
	attr.prog_fd = bpf_program__fd(prog);
	attr.ifindex = ifindex;
	attr.type = hook(argv[6]);
	attr.flags = 1U << 3;	/* BPF_F_BEFORE: first in the chain */
	link = syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));
	if (link < 0) {
		fprintf(stderr, "attach: %s\n", strerror(errno));
		return 1;
	}
	snprintf(path, sizeof(path), "%s/link", argv[7]);
	if (bpf_obj_pin(link, path))
		return 1;
	snprintf(path, sizeof(path), "%s/map", argv[7]);
	if (bpf_map__pin(bpf_object__next_map(obj, NULL), path))
		return 1;
	return 0;
}
