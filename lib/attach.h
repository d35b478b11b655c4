/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Attaching tc programs beside whatever else is on a device: tcx links
 * (multi-program, ordered, owned by a pinned link) where the kernel has
 * them, a clsact qdisc with direct-action cls_bpf filters where it does not.
 */
#ifndef PODINJECT_ATTACH_H
#define PODINJECT_ATTACH_H

#include <stdbool.h>
#include <stdint.h>

/* Values of the kernel's uapi, newer than Debian's linux-libc-dev. */
#define PI_BPF_TCX_INGRESS	46
#define PI_BPF_TCX_EGRESS	47
#define PI_BPF_NETKIT_PRIMARY	54
#define PI_BPF_NETKIT_PEER	55
#define PI_BPF_F_BEFORE		(1U << 3)
#define PI_BPF_F_AFTER		(1U << 4)
#define PI_BPF_F_LINK		(1U << 13)

enum pi_hook {
	PI_HOOK_INGRESS,	/* tc ingress of the device */
	PI_HOOK_EGRESS,		/* tc egress of the device */
	PI_HOOK_NETKIT_PEER,	/* netkit: the peer's transmit (pod egress) */
	PI_HOOK_NETKIT_PRIMARY,	/* netkit: the primary's transmit */
};

enum pi_attach_mode {
	PI_ATTACH_TCX,		/* tcx or netkit link, pinned */
	PI_ATTACH_CLSACT,	/* clsact qdisc + cls_bpf, lives on the device */
};

/* Priorities of cls_bpf filters in clsact mode: the head of the chain is the
 * lowest number, so injection (which must run first) takes 1 and the node
 * datapath leaves room in front of it. */
#define PI_PRIO_HEAD		1
#define PI_PRIO_DATAPATH	100
/* Inside a pod, the proxy's assign hook beside the reply hook (a proxy pod
 * that is probed, or proxied itself, has both on its eth0), each passing on
 * what is not its own. Builds before 2026-12-07 put it at PI_PRIO_HEAD. */
#define PI_PRIO_POD_ASSIGN	2

/* Attaches prog_fd at `hook` of ifindex. tcx mode: at the head of the chain
 * (BPF_F_BEFORE, no anchor) when `head`, else appended; the link is pinned
 * at pin_path. clsact mode: a filter at `prio`, and the program pinned at
 * pin_path as the record that it is attached. Either way pin_path exists
 * exactly while the program is attached. */
int attach_prog(int prog_fd, int ifindex, enum pi_hook hook,
		enum pi_attach_mode mode, bool head, uint32_t prio,
		const char *pin_path);
/* attach_prog, placed for tcx: right behind the link pinned at
 * after_pin when there is one, else first of all. clsact: at prio. */
int attach_prog_after(int prog_fd, int ifindex, enum pi_hook hook,
		      enum pi_attach_mode mode, const char *after_pin,
		      uint32_t prio, const char *pin_path);
/* clsact: whether the filter at `prio`, handle 1, of ifindex's hook runs
 * the program pinned at pin_path (true when there is no such pin). */
bool clsact_runs_pin(int ifindex, enum pi_hook hook, uint32_t prio,
		     const char *pin_path);
/* Undoes attach_prog; a device that is already gone is not an error. A
 * tcx or netkit link whose pin is unlinked lets go of its hook later
 * (after a grace period, from a workqueue): a query of the hook right
 * after may still list it. */
int detach_prog(int ifindex, enum pi_hook hook, enum pi_attach_mode mode,
		uint32_t prio, const char *pin_path);
/* detach_prog, the hook let go of before it returns (BPF_LINK_DETACH,
 * which waits for a grace period itself): for a caller that looks at the
 * hook next. */
int detach_prog_now(int ifindex, enum pi_hook hook, enum pi_attach_mode mode,
		    uint32_t prio, const char *pin_path);
/* Makes the clsact qdisc of ifindex when it has none: 1 when made here,
 * 0 when it was there (another's, or ours from before), or -errno. Who
 * made it is for the caller to record: only a qdisc podinject made is
 * podinject's to remove. */
int clsact_make(int ifindex);
/* Removes ifindex's clsact qdisc when no filter is left on either hook
 * (another program's keeps it): 1 removed, 0 kept, -ENOENT when there is
 * no such qdisc (or device) any more, or -errno. */
int clsact_remove_if_empty(int ifindex);
/* clsact_remove_if_empty for a qdisc podinject made on `dev` (a name for
 * the messages): says when it cannot, or when another's filters keep it. */
void clsact_release(int ifindex, const char *dev);
/* The kernel's attach type of a hook (tcx or netkit), -1 for none. */
int hook_attach_type(enum pi_hook hook);
/* Program ids at a tcx hook in chain order; returns the count or -errno. */
int query_tcx(int ifindex, enum pi_hook hook, uint32_t *ids, uint32_t max);

#endif
