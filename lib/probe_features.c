/* SPDX-License-Identifier: GPL-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/syscall.h>
#include <string.h>
#include <unistd.h>
#include <linux/bpf.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "attach.h"
#include "kernel_features.h"
#include "nl.h"

#define INSN(code_, dst_, src_, off_, imm_) \
	((struct bpf_insn){ .code = (code_), .dst_reg = (dst_), \
			    .src_reg = (src_), .off = (off_), .imm = (imm_) })
#define MOV64_IMM(dst, imm)	INSN(BPF_ALU64 | BPF_MOV | BPF_K, dst, 0, 0, imm)
#define CALL(fn)		INSN(BPF_JMP | BPF_CALL, 0, 0, 0, fn)
#define EXIT()			INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)

#define FN_redirect_peer	155
#define FN_loop			181

static int load_tc(const struct bpf_insn *insns, size_t cnt)
{
	int fd = bpf_prog_load(BPF_PROG_TYPE_SCHED_CLS, "pi_probe", "GPL",
			       insns, cnt, NULL);

	return fd < 0 ? -errno : fd;
}

/* A kernel without BPF_F_EGRESS rejects any non-zero flag at run time with
 * TC_ACT_SHOT, one with it returns TC_ACT_REDIRECT: the program loads on
 * both, so the probe is side-effect free and needs no device. */
int probe_redirect_peer_retval(unsigned long long flags)
{
	struct bpf_insn prog[] = {
		MOV64_IMM(BPF_REG_1, 1),
		INSN(BPF_LD | BPF_DW | BPF_IMM, BPF_REG_2, 0, 0,
		     (uint32_t)flags),
		INSN(0, 0, 0, 0, (uint32_t)(flags >> 32)),
		CALL(FN_redirect_peer),
		EXIT(),
	};
	unsigned char pkt[64] = { [12] = 0x08, [13] = 0x00 };
	DECLARE_LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = pkt,
			    .data_size_in = sizeof(pkt), .repeat = 1);
	int fd, err;

	fd = load_tc(prog, sizeof(prog) / sizeof(prog[0]));
	if (fd < 0)
		return fd;
	err = bpf_prog_test_run_opts(fd, &opts);
	close(fd);
	return err ? (err < 0 ? err : -EIO) : (int)opts.retval;
}

static bool probe_tcx(void)
{
	struct bpf_insn prog[] = { MOV64_IMM(BPF_REG_0, -1), EXIT() };
	bool ok = false;
	int fd, link;
	struct {
		uint32_t prog_fd, ifindex, type, flags;
		uint32_t rel, pad;
		uint64_t rev;
	} attr = { 0 };

	fd = load_tc(prog, 2);
	if (fd < 0)
		return false;
	attr.prog_fd = fd;
	attr.ifindex = 1;	/* lo of the probe namespace */
	attr.type = PI_BPF_TCX_INGRESS;
	link = syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));
	if (link >= 0) {
		ok = true;
		close(link);
	}
	close(fd);
	return ok;
}

static bool probe_bpf_loop(void)
{
	/* A call with bogus arguments fails either way; libbpf tells a
	 * helper the kernel lacks apart from one it rejected the arguments
	 * of by the verifier's words. */
	return libbpf_probe_bpf_helper(BPF_PROG_TYPE_SCHED_CLS, FN_loop,
				       NULL) == 1;
}

static bool probe_netkit(void)
{
	int err = nl_netkit_create("pi-probe0", "pi-probe1", -1);
	int ifindex;

	if (err)
		return false;
	ifindex = nl_link_index("pi-probe0");
	if (ifindex > 0)
		nl_link_del(ifindex);
	return true;
}

int probe_features(struct features *f)
{
	int saved, err;

	memset(f, 0, sizeof(*f));
	f->redirect_peer_egress_retval = probe_redirect_peer_retval(2);
	f->redirect_peer_egress = f->redirect_peer_egress_retval == 7;
	f->bpf_loop = probe_bpf_loop();

	/* the calling thread's namespace: unshare() below moves only this
	 * thread, and in a threaded agent it may differ from the process's */
	saved = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (saved < 0)
		return -errno;
	if (unshare(CLONE_NEWNET)) {
		err = -errno;
		close(saved);
		return err;
	}
	nl_link_set_up(1);
	f->tcx = probe_tcx();
	f->netkit = probe_netkit();
	/* Leaving drops the last reference: the namespace and whatever the
	 * probes made in it are gone. */
	return netns_restore(saved);
}
