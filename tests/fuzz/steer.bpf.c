/* SPDX-License-Identifier: GPL-2.0 */
/*
 * fuzz_proxy's stand-in for the datapath's capture: UDP from the clients'
 * ports (20000-20003) to the proxy's port goes to the proxy's listener
 * of its family, whatever socket is bound to the destination, as the
 * node's programs hand a pod's datagrams to its proxy. The proxy's own
 * datagrams (from its sessions' ports) are delivered as usual.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_SOCKMAP);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} listeners SEC(".maps");

SEC("sk_lookup")
int steer(struct bpf_sk_lookup *ctx)
{
	__u32 key = ctx->family == 2 ? 0 : 1;
	struct bpf_sock *sk;
	long err;

	__u16 rport = bpf_ntohs(ctx->remote_port);

	if (ctx->protocol != 17 || ctx->local_port != 15001 ||
	    rport < 20000 || rport > 20003)
		return SK_PASS;
	sk = bpf_map_lookup_elem(&listeners, &key);
	if (!sk)
		return SK_PASS;
	err = bpf_sk_assign(ctx, sk, 0);
	bpf_sk_release(sk);
	return err ? SK_DROP : SK_PASS;
}
