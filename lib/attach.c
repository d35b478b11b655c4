/* SPDX-License-Identifier: GPL-2.0 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/bpf.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "attach.h"
#include "lib.h"
#include "nl.h"

/* BPF_LINK_CREATE as the kernel lays it out for tcx and netkit; libbpf 1.1
 * predates those fields. */
struct link_create_attr {
	uint32_t prog_fd;
	uint32_t target_ifindex;
	uint32_t attach_type;
	uint32_t flags;
	uint32_t relative_fd;
	uint32_t pad;
	uint64_t expected_revision;
};

int hook_attach_type(enum pi_hook hook)
{
	switch (hook) {
	case PI_HOOK_INGRESS: return PI_BPF_TCX_INGRESS;
	case PI_HOOK_EGRESS: return PI_BPF_TCX_EGRESS;
	case PI_HOOK_NETKIT_PEER: return PI_BPF_NETKIT_PEER;
	case PI_HOOK_NETKIT_PRIMARY: return PI_BPF_NETKIT_PRIMARY;
	}
	return -1;
}

/* flags: 0 appends; BPF_F_BEFORE without an anchor means "first of
 * all", ahead of programs that are not ours too; BPF_F_AFTER |
 * BPF_F_LINK puts it right behind the link relative_fd. */
static int link_create(int prog_fd, int ifindex, int attach_type,
		       uint32_t flags, int relative_fd)
{
	struct link_create_attr attr;
	int fd;

	memset(&attr, 0, sizeof(attr));
	attr.prog_fd = prog_fd;
	attr.target_ifindex = ifindex;
	attr.attach_type = attach_type;
	attr.flags = flags;
	attr.relative_fd = relative_fd;
	fd = syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));
	return fd < 0 ? -errno : fd;
}

static int clsact_attach(int prog_fd, int ifindex, enum pi_hook hook,
			 uint32_t prio)
{
	DECLARE_LIBBPF_OPTS(bpf_tc_hook, tc_hook, .ifindex = ifindex);
	DECLARE_LIBBPF_OPTS(bpf_tc_opts, opts, .prog_fd = prog_fd,
			    .priority = prio, .handle = 1);
	int err;

	if (hook != PI_HOOK_INGRESS && hook != PI_HOOK_EGRESS)
		return -EOPNOTSUPP;
	tc_hook.attach_point = hook == PI_HOOK_INGRESS ? BPF_TC_INGRESS :
							 BPF_TC_EGRESS;
	err = bpf_tc_hook_create(&tc_hook);
	if (err && err != -EEXIST)
		return err;
	return bpf_tc_attach(&tc_hook, &opts);
}

static int attach_at(int prog_fd, int ifindex, enum pi_hook hook,
		     enum pi_attach_mode mode, uint32_t flags, int relative_fd,
		     uint32_t prio, const char *pin_path)
{
	int fd, err;

	if (mode == PI_ATTACH_CLSACT) {
		err = clsact_attach(prog_fd, ifindex, hook, prio);
		if (err)
			return err;
		/* A filter lives on its device and needs no pin; the program
		 * pinned at pin_path records that it is attached, so both
		 * modes answer "is it attached?" by the same path. */
		if (bpf_obj_pin(prog_fd, pin_path)) {
			err = -errno;
			detach_prog(ifindex, hook, mode, prio, NULL);
		}
		return err;
	}

	fd = link_create(prog_fd, ifindex, hook_attach_type(hook), flags,
			 relative_fd);
	/* A link whose pin was just removed (detach_prog) is released by
	 * the kernel's deferred work, not by the unlink itself: until then
	 * the hook still holds the program, and tcx refuses it a second
	 * time. A detach and an attach in one process (pi_apply, or a
	 * program calling pi_inject_deny then pi_inject_allow) meet that
	 * window; wait for the release, up to half a second. */
	for (int waited = 0; fd == -EEXIST && access(pin_path, F_OK) &&
	     waited < 500; waited++) {
		usleep(1000);
		fd = link_create(prog_fd, ifindex, hook_attach_type(hook),
				 flags, relative_fd);
	}
	if (fd < 0)
		return fd;
	err = bpf_obj_pin(fd, pin_path) ? -errno : 0;
	/* Once pinned the link owns the attachment; unpinned it would go
	 * away with this fd, which is the undo we want on failure. */
	close(fd);
	return err;
}

int attach_prog(int prog_fd, int ifindex, enum pi_hook hook,
		enum pi_attach_mode mode, bool head, uint32_t prio,
		const char *pin_path)
{
	return attach_at(prog_fd, ifindex, hook, mode,
			 head ? PI_BPF_F_BEFORE : 0, 0, prio, pin_path);
}

int attach_prog_after(int prog_fd, int ifindex, enum pi_hook hook,
		      enum pi_attach_mode mode, const char *after_pin,
		      uint32_t prio, const char *pin_path)
{
	int after = after_pin ? bpf_obj_get(after_pin) : -1, err;

	err = attach_at(prog_fd, ifindex, hook, mode,
			after >= 0 ? PI_BPF_F_AFTER | PI_BPF_F_LINK :
				     PI_BPF_F_BEFORE,
			after >= 0 ? after : 0, prio, pin_path);
	if (after >= 0)
		close(after);
	return err;
}

/* Whether the filter at `prio`, handle 1, runs the program pinned at
 * pin_path. No pin (lost): true, as before pins were compared, so that
 * a lost pin never leaves our filter running. */
static bool filter_runs_pin(struct bpf_tc_hook *tc_hook, uint32_t prio,
			    const char *pin_path)
{
	DECLARE_LIBBPF_OPTS(bpf_tc_opts, q, .priority = prio, .handle = 1);
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);
	int fd = bpf_obj_get(pin_path);
	bool runs;

	if (fd < 0)
		return errno == ENOENT;
	runs = !bpf_obj_get_info_by_fd(fd, &info, &len) &&
	       !bpf_tc_query(tc_hook, &q) && q.prog_id == info.id;
	close(fd);
	return runs;
}

bool clsact_runs_pin(int ifindex, enum pi_hook hook, uint32_t prio,
		     const char *pin_path)
{
	DECLARE_LIBBPF_OPTS(bpf_tc_hook, tc_hook, .ifindex = ifindex);

	tc_hook.attach_point = hook == PI_HOOK_INGRESS ? BPF_TC_INGRESS :
							 BPF_TC_EGRESS;
	return filter_runs_pin(&tc_hook, prio, pin_path);
}

int detach_prog(int ifindex, enum pi_hook hook, enum pi_attach_mode mode,
		uint32_t prio, const char *pin_path)
{
	if (mode == PI_ATTACH_CLSACT) {
		DECLARE_LIBBPF_OPTS(bpf_tc_hook, tc_hook, .ifindex = ifindex);
		DECLARE_LIBBPF_OPTS(bpf_tc_opts, opts, .priority = prio,
				    .handle = 1);
		int err;

		tc_hook.attach_point = hook == PI_HOOK_INGRESS ?
				       BPF_TC_INGRESS : BPF_TC_EGRESS;
		/* A filter is taken off only when it runs the program the
		 * pin records: at our priority and handle there may be
		 * another owner's (a CNI's, or one on a reused ifindex). */
		if (pin_path && !filter_runs_pin(&tc_hook, prio, pin_path)) {
			unlink(pin_path);
			return 0;
		}
		err = bpf_tc_detach(&tc_hook, &opts);
		if (pin_path)
			unlink(pin_path);
		return err == -ENOENT || err == -ENODEV || err == -EINVAL ?
		       0 : err;
	}
	if (unlink(pin_path) && errno != ENOENT)
		return -errno;
	return 0;
}

int detach_prog_now(int ifindex, enum pi_hook hook, enum pi_attach_mode mode,
		    uint32_t prio, const char *pin_path)
{
	int fd;

	if (mode == PI_ATTACH_TCX && pin_path) {
		fd = bpf_obj_get(pin_path);
		if (fd >= 0) {
			/* a link already detached (its device gone) says
			 * ENOLINK; the unlink below is all there is to do */
			bpf_link_detach(fd);
			close(fd);
		}
	}
	return detach_prog(ifindex, hook, mode, prio, pin_path);
}

int query_tcx(int ifindex, enum pi_hook hook, uint32_t *ids, uint32_t max)
{
	uint32_t cnt = max, flags = 0;
	int err;

	err = bpf_prog_query(ifindex, hook_attach_type(hook), 0, &flags, ids,
			     &cnt);
	if (err)
		return err < 0 ? err : -EIO;
	return cnt;
}

int clsact_make(int ifindex)
{
	DECLARE_LIBBPF_OPTS(bpf_tc_hook, tc_hook, .ifindex = ifindex,
			    .attach_point = BPF_TC_INGRESS);
	int err = bpf_tc_hook_create(&tc_hook);

	if (err == -EEXIST)
		return 0;
	return err ? err : 1;
}

void clsact_release(int ifindex, const char *dev)
{
	int err = clsact_remove_if_empty(ifindex);

	if (err < 0 && err != -ENOENT)	/* -ENOENT: the device went first */
		pr_warn("cannot remove the clsact qdisc podinject made on %s: %s",
			dev, strerror(-err));
	else if (!err)
		pr_info("the clsact qdisc podinject made on %s stays: another program's filters are on it",
			dev);
}

int clsact_remove_if_empty(int ifindex)
{
	DECLARE_LIBBPF_OPTS(bpf_tc_hook, tc_hook, .ifindex = ifindex,
			    .attach_point = BPF_TC_INGRESS | BPF_TC_EGRESS);
	int in, out, err;

	in = nl_tc_filter_count(ifindex, true);
	out = nl_tc_filter_count(ifindex, false);
	if (in < 0)
		return in;
	if (out < 0)
		return out;
	if (in || out)
		return 0;
	err = bpf_tc_hook_destroy(&tc_hook);
	if (err == -ENOENT || err == -EINVAL || err == -ENODEV)
		return -ENOENT;	/* no clsact qdisc (or no device) any more */
	return err ? err : 1;
}
