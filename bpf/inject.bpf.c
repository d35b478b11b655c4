/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Injection: runs first at an injector pod's egress hook (tcx with
 * BPF_F_BEFORE and no anchor, so ahead of every other program there, ours
 * or the CNI's). A packet whose source is an address the injector is
 * authorised to speak for is taken and emitted into that target pod's
 * egress datapath; every other packet goes on with TCX_NEXT, untouched.
 *
 *   injector pod --> [inj host dev] inject_egress --+
 *                                                   | fast: bpf_redirect_peer(target, BPF_F_EGRESS)
 *                                                   |       target's eth0 transmits it
 *                                                   | fallback: bpf_redirect(target, BPF_F_INGRESS)
 *                                                   v       it enters the target's host dev
 *   target pod eth0 ======> [target host dev] tcx ingress: the target's
 *                                             egress programs, run once
 *
 * Either way the packet arrives where the target's own packets arrive and
 * passes the target's egress programs exactly once: nothing here runs them,
 * so nothing can run them twice.
 *
 * A netkit target is the exception. Its egress programs are BPF_NETKIT_PEER
 * programs, run in its eth0's transmit path; the fallback lands behind them
 * at the primary's ingress. There netkit_guard runs the target's peer
 * program itself, for injected packets only (netkit fallback, below).
 */
#include "lib/common.h"
#include "lib/parse.h"
#include "lib/redirect.h"

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PI_MAX_INJECT);
	__type(key, struct pi_inject_key);
	__type(value, struct pi_inject_target);
} inject_auth SEC(".maps");

/* What the head program on each device has to look at (enum
 * pi_dp_head_role, by ifindex): each check costs only the devices that
 * need it. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PI_DP_HEAD_ROLES_MAX);
	__type(key, __u32);
	__type(value, __u32);
} head_roles SEC(".maps");

/* A device without a written record gets every check: a missing record
 * costs time, never a capture or an injection. */
static __always_inline __u32 head_roles_of(__u32 ifindex)
{
	__u32 *r = bpf_map_lookup_elem(&head_roles, &ifindex);

	return r && (*r & PI_DP_ROLE_KNOWN) ? *r : PI_DP_ROLE_ALL;
}

#include "lib/monitor.h"

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PI_DP_INJ_REFUSALS);
	__type(key, __u32);
	__type(value, __u64);
} inject_refusals SEC(".maps");

/* Counts a drop of this object's by its reason (enum
 * pi_dp_mon_drop_reason): `inject refused` and the metrics read them
 * without a monitor running. */
static __always_inline void refusal_count(__u32 reason)
{
	__u32 i = reason - PI_DP_MON_DROP_INJECT_REDIRECT;
	__u64 *c = bpf_map_lookup_elem(&inject_refusals, &i);

	if (c)
		*c += 1;
}

/* A packet the injection object refuses, for `reason` (enum
 * pi_dp_mon_drop_reason): dropped, counted, and told to a monitor that
 * wants drops, so that no refusal of it goes unexplained. */
static __always_inline int inject_refuse(struct __sk_buff *skb,
					 const struct pkt *p, __u32 reason,
					 __u32 aux)
{
	refusal_count(reason);
	if (mon_wants(MON_BIT(PI_DP_MON_DROP)))
		mon_inject_event(skb, p, PI_DP_MON_DROP, reason, aux);
	return PI_DROP;
}

#include "lib/proxy.h"
#include "lib/probe.h"

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, PI_MAX_INJECT);
	__type(key, struct pi_inject_stats_key);
	__type(value, struct pi_inject_stats);
} inject_stats SEC(".maps");

/*
 * The netkit fallback's guard: how an injected packet is told apart at the
 * primary's ingress from one the pod sent, which has been through the peer
 * program already. The mark is no good: CNIs own its bits (Cilium uses
 * most of them), and netkit's default scrub clears it on the way out of
 * the pod anyway. skb->cb, tstamp and priority are cleared or owned by
 * others too. What survives every scrub and belongs to nobody is the
 * packet's own bytes: inject_egress writes a reserved, node-wide source
 * MAC (locally administered, random per node; set at load) and netkit_guard
 * puts the target's MAC back before the peer program sees the packet. A
 * pod cannot forge the tag either: netkit_untag, first at the target's peer
 * hook, overwrites it in the pod's own frames, so an untagged packet at the
 * guard has been through the peer program, a tagged one has not.
 */
const volatile __u8 netkit_tag[ETH_ALEN] = { 0x02, 0, 0, 0, 0, 0x01 };

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PI_DP_MAX_PODS);
	__type(key, __u32);
	__type(value, struct pi_dp_netkit_guard);
} netkit_guards SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, PI_DP_MAX_PODS);
	__type(key, __u32);
	__type(value, __u32);
} netkit_peer_progs SEC(".maps");

static __always_inline bool is_tag(const __u8 *mac)
{
	return mac[0] == netkit_tag[0] && mac[1] == netkit_tag[1] &&
	       mac[2] == netkit_tag[2] && mac[3] == netkit_tag[3] &&
	       mac[4] == netkit_tag[4] && mac[5] == netkit_tag[5];
}

static __always_inline struct pi_inject_stats *
stats_of(__u32 injector, const struct pi_inject_target *t)
{
	struct pi_inject_stats_key key = {
		.injector_ifindex = injector,
		.target_ifindex = t->target_ifindex,
		.path = t->path,
	};
	struct pi_inject_stats zero = {}, *st;

	st = bpf_map_lookup_elem(&inject_stats, &key);
	if (st)
		return st;
	bpf_map_update_elem(&inject_stats, &key, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&inject_stats, &key);
}

static __always_inline int inject_egress_body(struct __sk_buff *skb)
{
	struct pi_inject_key key = { .injector_ifindex = skb->ifindex };
	struct pi_inject_target *t = NULL;
	struct pi_inject_stats *st;
	void *data, *data_end;
	struct ethhdr *eth;
	struct pkt p;
	__u32 roles;
	bool mine;
	long ret;
	int res;

	/* Before the parse: a device none of whose roles is left passes
	 * on at the cost of one array lookup. */
	roles = head_roles_of(skb->ifindex);
	if (!(roles & PI_DP_ROLE_ALL))
		return PI_NEXT;
	/* A fragment this object has no first fragment of is still injected
	 * by its source (no ports needed): the target's own programs decide
	 * on it with their fragment table. */
	res = parse_pkt(skb, &p);
	if (res != PARSE_OK && res != PARSE_FRAG_ORPHAN &&
	    res != PARSE_FRAG_TINY)
		return PI_NEXT;
	if (res == PARSE_OK &&
	    (roles & (PI_DP_ROLE_PROTECTED | PI_DP_ROLE_PROXY))) {
		ret = p.has_ports ? inbound_steer(skb, &p, roles, &mine) :
				    inbound_icmp(skb, &p, roles, &mine);
		if (mine) {
			if (ret == PI_REDIRECT)
				frag_note(&p);
			return ret;
		}
	}
	if (roles & PI_DP_ROLE_INJECT) {
		key.family = p.family;
		key.addr = p.saddr;
		t = bpf_map_lookup_elem(&inject_auth, &key);
	}
	if (!t) {
		if (res != PARSE_OK ||
		    !(roles & (PI_DP_ROLE_CAPTURED | PI_DP_ROLE_PROXY)))
			return PI_NEXT;
		ret = proxy_steer(skb, &p, roles);
		/* later fragments follow the first one the same way */
		if (ret == PI_REDIRECT)
			frag_note(&p);
		return ret;
	}
	if (res == PARSE_OK) {
		if (!proxy_note_upstream(skb, &p, t->target_ifindex,
					 skb->ifindex))
			return inject_refuse(skb, &p,
					     PI_DP_MON_DROP_PROXY_LIMIT,
					     t->target_ifindex);
		frag_note(&p);
	}

	/* The target's own packets leave its eth0 with this header; a
	 * stack or program behind the target's device sees no difference. */
	data = skb_data(skb);
	data_end = skb_data_end(skb);
	eth = data;
	if ((void *)(eth + 1) > data_end)
		return PI_NEXT;
	__builtin_memcpy(eth->h_source, t->target_pod_mac, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, t->target_host_mac, ETH_ALEN);
	if (t->path == PI_DP_PATH_NETKIT_FALLBACK) {
		eth->h_source[0] = netkit_tag[0];
		eth->h_source[1] = netkit_tag[1];
		eth->h_source[2] = netkit_tag[2];
		eth->h_source[3] = netkit_tag[3];
		eth->h_source[4] = netkit_tag[4];
		eth->h_source[5] = netkit_tag[5];
	}

	st = stats_of(skb->ifindex, t);
	/* the call only for what may be a probe's frame: a transport port
	 * in the probe's range, or ICMP (whose echo id the stamp reads) */
	if (res == PARSE_OK &&
	    ((p.has_ports && p.sport >= PI_DP_PROBE_PORT_LO) ||
	     p.proto == IPPROTO_ICMP || p.proto == IPPROTO_ICMPV6_))
		probe_note_sent(skb, &p);
	if (mon_wants(MON_BIT(PI_DP_MON_INJECT)))
		mon_inject_event(skb, &p, PI_DP_MON_INJECT, t->path,
				 t->target_ifindex);
	if (t->path == PI_DP_PATH_FAST)
		ret = redirect_peer(t->target_ifindex, PI_F_EGRESS);
	else
		ret = redirect_plain(t->target_ifindex, PI_F_INGRESS);
	if (ret != PI_REDIRECT) {
		/* A kernel without BPF_F_EGRESS refuses the flag here. */
		if (st)
			st->drops[PI_DP_INJ_DROP_REDIRECT]++;
		return inject_refuse(skb, &p, PI_DP_MON_DROP_INJECT_REDIRECT,
				     t->target_ifindex);
	}
	if (st) {
		st->packets++;
		st->bytes += skb->len;
	}
	return PI_REDIRECT;
}

SEC("tc")
int inject_egress(struct __sk_buff *skb)
{
	return mon_exit(skb, PI_DP_HOOK_INJECT, inject_egress_body(skb));
}

/* On a device with a guard, a frame carrying the tag gets the target's
 * own MAC back; returns the guard then, NULL for every other frame. */
static __always_inline struct pi_dp_netkit_guard *
strip_tag(struct __sk_buff *skb)
{
	__u32 ifindex = skb->ifindex;
	struct pi_dp_netkit_guard *g;
	void *data, *data_end;
	struct ethhdr *eth;

	g = bpf_map_lookup_elem(&netkit_guards, &ifindex);
	if (!g)
		return NULL;
	data = skb_data(skb);
	data_end = skb_data_end(skb);
	eth = data;
	if ((void *)(eth + 1) > data_end || !is_tag(eth->h_source))
		return NULL;
	__builtin_memcpy(eth->h_source, g->pod_mac, ETH_ALEN);
	return g;
}

/*
 * First at the tcx ingress of a netkit target's primary while it is the
 * target of a netkit fallback. A tagged packet came from inject_egress and
 * has not met the target's peer program: the tag goes, and the peer
 * program runs here, once, by tail call; its verdict is the packet's. An
 * untagged packet has met it already (it came out of the pod) and goes on.
 * skb->ifindex is the primary's here as in the peer program, so the CNI's
 * program finds the same pod either way.
 */
SEC("tc")
int netkit_guard(struct __sk_buff *skb)
{
	struct pi_dp_netkit_guard *g = strip_tag(skb);

	if (!g)
		return PI_NEXT;
	__sync_fetch_and_add(&g->runs, 1);
	bpf_tail_call(skb, &netkit_peer_progs, g->slot);
	/* Only reached without a program in the slot: the packet has been
	 * through nothing of the target's and must not go on. */
	__sync_fetch_and_add(&g->runs, -1);
	__sync_fetch_and_add(&g->missing, 1);
	refusal_count(PI_DP_MON_DROP_GUARD_EMPTY);
	return drop_at(skb, PI_DP_MON_NO_POD, PI_DP_MON_DROP_GUARD_EMPTY,
		       PI_DP_HOOK_NETKIT_GUARD);
}

/* First at the BPF_NETKIT_PEER hook of that target: the pod's own frames
 * never reach the guard with the tag, so the peer program cannot run on
 * them twice. The frame goes on with the pod's own MAC; nothing else of
 * it changes. */
SEC("tc")
int netkit_untag(struct __sk_buff *skb)
{
	struct pi_dp_netkit_guard *g = strip_tag(skb);

	if (g)
		__sync_fetch_and_add(&g->forged, 1);
	return PI_NEXT;
}

/*
 * At a pod's eth0 ingress, inside the pod's namespace, while the pod is
 * proxied or probed. Answers to podinject's probes are reported and
 * dropped. Replies to the proxy's upstream connections are addressed to
 * the pod but belong to the proxy. Every delivery into the pod passes here (bpf_redirect_peer
 * from any node program included), so this is the one place to take them;
 * bpf_redirect_peer() on eth0 hands them to the pod's host-side device,
 * whose head program sends them on to the proxy. The pod never sees them.
 */
static __always_inline int pod_reply_body(struct __sk_buff *skb)
{
	struct pi_flow_key k;
	struct pi_flow *f;
	struct pkt p;
	bool mine;
	int verdict;

	if (parse_pkt(skb, &p) != PARSE_OK)
		return PI_NEXT;
	if (probe_take(skb, &p))
		return PI_DROP;
	if (!p.has_ports) {
		/* an ICMP error quoting an upstream flow, or a protected
		 * pod's client flow (what the proxy sent to the client as
		 * the pod): the proxy's */
		if (!icmp_error_flow(skb, &p, &k))
			return PI_NEXT;
		if (bpf_map_lookup_elem(&proxy_upstream, &k))
			return redirect_peer(skb->ifindex, 0);
		f = bpf_map_lookup_elem(&proxy_flows, &k);
		if (f && (f->flags & PI_FLOW_INBOUND))
			return redirect_peer(skb->ifindex, 0);
		return PI_NEXT;
	}
	/* a protected pod's client connections, and the proxy's plaintext
	 * ones to it */
	verdict = inbound_capture(skb, &p, &mine);
	if (mine)
		return verdict;
	flow_key(&k, &p, false);
	f = bpf_map_lookup_elem(&proxy_upstream, &k);
	if (!f || (f->flags & PI_FLOW_INBOUND))
		return PI_NEXT;
	frag_note(&p);
	return redirect_peer(skb->ifindex, 0);
}

SEC("tc")
int pod_reply(struct __sk_buff *skb)
{
	return mon_exit(skb, PI_DP_HOOK_POD_REPLY, pod_reply_body(skb));
}

/* Turns a SYN into the RST|ACK its destination would send and sends it
 * back out of the device it came in on. Swapping addresses and ports
 * leaves the checksums as they are; seq, ack and flags are patched in. */
static __always_inline int reflect_rst(struct __sk_buff *skb,
				       const struct pkt *p)
{
	__u32 off = p->l4_off, csum = p->l4_off + 16, seq, ack, old_ack, ports;
	__u32 zero = 0;
	__u32 l3 = sizeof(struct ethhdr);
	__u16 word, rst;
	__u8 addrs[32];
	__u32 alen = p->family == AF_INET ? 8 : 32;
	__u32 aoff = p->family == AF_INET ? l3 + 12 : l3 + 8;

	if ((p->tcp_flags & (TCP_SYN | TCP_ACK)) != TCP_SYN ||
	    off > PKT_L4_OFF_MAX)
		return PI_DROP;
	if (bpf_skb_load_bytes(skb, off, &ports, 4) ||
	    bpf_skb_load_bytes(skb, off + 4, &seq, 4) ||
	    bpf_skb_load_bytes(skb, off + 8, &old_ack, 4) ||
	    bpf_skb_load_bytes(skb, off + 12, &word, 2) ||
	    bpf_skb_load_bytes(skb, aoff, addrs, alen))
		return PI_DROP;
	ack = bpf_htonl(bpf_ntohl(seq) + 1);
	/* byte 12 is the data offset, kept; byte 13 the flags: RST|ACK */
	rst = (word & bpf_htons(0xff00)) | bpf_htons(TCP_RST | TCP_ACK);
	bpf_l4_csum_replace(skb, csum, seq, zero, 4);
	bpf_l4_csum_replace(skb, csum, old_ack, ack, 4);
	bpf_l4_csum_replace(skb, csum, word, rst, 2);
	ports = (ports >> 16) | (ports << 16);
	if (bpf_skb_store_bytes(skb, off, &ports, 4, 0) ||
	    bpf_skb_store_bytes(skb, off + 4, &zero, 4, 0) ||
	    bpf_skb_store_bytes(skb, off + 8, &ack, 4, 0) ||
	    bpf_skb_store_bytes(skb, off + 12, &rst, 2, 0))
		return PI_DROP;
	if (p->family == AF_INET) {
		if (bpf_skb_store_bytes(skb, aoff, addrs + 4, 4, 0) ||
		    bpf_skb_store_bytes(skb, aoff + 4, addrs, 4, 0))
			return PI_DROP;
	} else {
		if (bpf_skb_store_bytes(skb, aoff, addrs + 16, 16, 0) ||
		    bpf_skb_store_bytes(skb, aoff + 16, addrs, 16, 0))
			return PI_DROP;
	}
	return redirect_plain(skb->ifindex, 0);
}

/*
 * At the proxy pod's eth0 ingress, inside its namespace: hand each packet
 * of a proxied flow to its socket with bpf_sk_assign(), the destination
 * (D for captured connections, the client pod for upstream replies) being
 * no address of the proxy's. Chosen over TPROXY because it needs no
 * iptables and no mark: the one routing rule it relies on ("what arrives
 * on eth0 is local", table PI_PROXY_TABLE) lives in the proxy's own
 * namespace, where no CNI sets marks.
 */
SEC("tc")
int proxy_assign(struct __sk_buff *skb)
{
	struct pi_proxy_listener_key lk = {};
	struct bpf_sock_tuple tuple = {};
	struct bpf_sock *sk = NULL, *known;
	bool takeover = false;
	struct pi_flow_key k;
	struct pi_flow *f;
	struct pkt p;
	__u32 tlen;
	long err;

	if (parse_pkt(skb, &p) != PARSE_OK || !p.has_ports)
		return PI_NEXT;
	if (p.family == AF_INET) {
		tuple.ipv4.saddr = p.saddr.a[0];
		tuple.ipv4.daddr = p.daddr.a[0];
		tuple.ipv4.sport = bpf_htons(p.sport);
		tuple.ipv4.dport = bpf_htons(p.dport);
		tlen = sizeof(tuple.ipv4);
	} else {
		__builtin_memcpy(tuple.ipv6.saddr, p.saddr.a, 16);
		__builtin_memcpy(tuple.ipv6.daddr, p.daddr.a, 16);
		tuple.ipv6.sport = bpf_htons(p.sport);
		tuple.ipv6.dport = bpf_htons(p.dport);
		tlen = sizeof(tuple.ipv6);
	}

	/* a connected socket: accepted client connections and upstream
	 * connections alike */
	if (p.proto == IPPROTO_TCP) {
		sk = (struct bpf_sock *)bpf_skc_lookup_tcp(skb, &tuple, tlen,
							   BPF_F_CURRENT_NETNS, 0);
		/* A new SYN whose 4-tuple an old connection's TIME_WAIT still
		 * holds (the proxy's accepted socket closed first) is a new
		 * connection, but assigned to the listener it is dropped: the
		 * listener cannot hash its request next to the TIME_WAIT, and
		 * only the stack's own TIME_WAIT path removes that. So the
		 * stack gets it, below. */
		if (sk && sk->state == BPF_TCP_TIME_WAIT && starts_flow(&p))
			takeover = true;
		else if (sk && sk->state != BPF_TCP_LISTEN)
			goto assign;
		if (sk)
			bpf_sk_release(sk);
	} else if (p.proto == IPPROTO_UDP) {
		sk = bpf_sk_lookup_udp(skb, &tuple, tlen, BPF_F_CURRENT_NETNS, 0);
		if (sk && sk->dst_port)		/* connected: an upstream socket */
			goto assign;
		if (sk)
			bpf_sk_release(sk);
	} else {
		return PI_NEXT;
	}

	/* a captured flow: the proxy's listener on its port; the flow is
	 * keyed by the captured pod's end, which is the client's for an
	 * outbound capture, the destination's for an inbound one */
	flow_key(&k, &p, true);
	f = bpf_map_lookup_elem(&proxy_flows, &k);
	if (!f || (f->flags & PI_FLOW_INBOUND)) {
		flow_key(&k, &p, false);
		f = bpf_map_lookup_elem(&proxy_flows, &k);
		if (!f || !(f->flags & PI_FLOW_INBOUND))
			return PI_NEXT;
	}
	if (p.family == AF_INET)
		tuple.ipv4.dport = bpf_htons(f->proxy_port);
	else
		tuple.ipv6.dport = bpf_htons(f->proxy_port);
	if (takeover) {
		/* A lookup of its own: the takeover reads the listener's
		 * state, and one load reached by a TCP and a UDP socket
		 * pointer is refused by older verifiers (6.1: "same insn
		 * cannot be used with different pointers"). */
		sk = (struct bpf_sock *)bpf_skc_lookup_tcp(skb, &tuple, tlen,
							   BPF_F_CURRENT_NETNS, 0);
		if (!sk)
			return reflect_rst(skb, &p);
		/* The stack's TIME_WAIT path asks for a listener on D's port;
		 * proxy_lookup answers with this one from proxy_listeners.
		 * Put there once: a closed listener leaves the map by itself.
		 * Should the update fail, the TIME_WAIT answers the SYN with
		 * its old ACK; the client resets it (which ends a TIME_WAIT
		 * unless tcp_rfc1337 is set) and sends its SYN again within
		 * milliseconds, to meet no TIME_WAIT: slower, but no stall. */
		listener_key(&lk, f, p.family, IPPROTO_TCP);
		known = bpf_map_lookup_elem(&proxy_listeners, &lk);
		if (known)
			bpf_sk_release(known);
		else if (sk->state == BPF_TCP_LISTEN)
			bpf_map_update_elem(&proxy_listeners, &lk, sk, BPF_ANY);
		bpf_sk_release(sk);
		return PI_PASS;
	}
	if (p.proto == IPPROTO_TCP) {
		sk = (struct bpf_sock *)bpf_skc_lookup_tcp(skb, &tuple, tlen,
							   BPF_F_CURRENT_NETNS, 0);
	} else {
		sk = bpf_sk_lookup_udp(skb, &tuple, tlen, BPF_F_CURRENT_NETNS, 0);
		/* A datagram in fragments: the kernel forgets this socket
		 * when it puts them together, and looks the datagram up by
		 * its destination (D), where proxy_lookup names the listener
		 * put here. Put once: a closed listener leaves by itself. */
		if (sk && p.frag == PKT_FRAG_FIRST) {
			listener_key(&lk, f, p.family, IPPROTO_UDP);
			known = bpf_map_lookup_elem(&proxy_listeners, &lk);
			if (known)
				bpf_sk_release(known);
			else
				bpf_map_update_elem(&proxy_listeners, &lk, sk,
						    BPF_ANY);
		}
	}
	/* No proxy listening: a SYN is answered with a reset so that the
	 * client fails fast. The stack cannot answer itself: the reset's
	 * source (D) is no address of the proxy's. A datagram, or another
	 * segment, is dropped, and told. */
	if (!sk && p.proto == IPPROTO_TCP && starts_flow(&p))
		return reflect_rst(skb, &p);
	if (!sk)
		return inject_refuse(skb, &p, PI_DP_MON_DROP_PROXY_NO_SOCKET,
				     f->proxy_port);
assign:
	/* A fragment goes to the stack unassigned: the datagram it is part
	 * of is looked up again when the kernel has put it together (the
	 * socket given to its fragments is forgotten there, or, in IPv6 on
	 * Debian's 6.1, kept with the socket pointer cleared: freeing the
	 * reassembled datagram then oopsed in sock_pfree). That lookup finds
	 * the connected socket, or proxy_lookup names the listener registered
	 * above. */
	if (p.frag != PKT_FRAG_NONE) {
		bpf_sk_release(sk);
		return PI_NEXT;
	}
	err = bpf_sk_assign(skb, sk, 0);
	bpf_sk_release(sk);
	if (err)
		return inject_refuse(skb, &p, PI_DP_MON_DROP_PROXY_ASSIGN, 0);
	frag_note(&p);
	return PI_PASS;
}

/*
 * In the proxy pod's namespace (BPF_SK_LOOKUP, attached by `proxy add`):
 * runs whenever the stack there looks for a listener. Two lookups matter.
 * The TIME_WAIT takeover of a captured flow's SYN, which proxy_assign left
 * to the stack: tcp_v4_rcv/tcp_v6_rcv (TCP_TW_SYN) ask for a listener on
 * D's port, where none is; this names the proxy's, so the stack
 * deschedules the TIME_WAIT and the listener gets the SYN, as TPROXY's
 * nf_tproxy_handle_time_wait4 does. And a captured datagram that came in
 * fragments: the reassembly forgets the socket proxy_assign gave them,
 * and the stack looks for one bound to D's address and port (none, or a
 * session's reply socket, which is not read for them); this names the
 * proxy's UDP listener, as the packet's own lookup would have (TPROXY
 * reassembles before it assigns). Any other lookup, and any flow without
 * a known listener, goes on as if this were not here.
 */
SEC("sk_lookup")
int proxy_lookup(struct bpf_sk_lookup *ctx)
{
	struct pi_proxy_listener_key lk = {};
	struct pi_flow_key k;
	struct bpf_sock *sk;
	struct pi_flow *f;

	if (ctx->protocol != IPPROTO_TCP && ctx->protocol != IPPROTO_UDP)
		return SK_PASS;
	__builtin_memset(&k, 0, sizeof(k));
	k.family = ctx->family;
	k.proto = ctx->protocol;
	if (ctx->family == AF_INET) {
		k.pod.a[0] = ctx->remote_ip4;
		k.dst.a[0] = ctx->local_ip4;
	} else if (ctx->family == AF_INET6) {
		k.pod.a[0] = ctx->remote_ip6[0];
		k.pod.a[1] = ctx->remote_ip6[1];
		k.pod.a[2] = ctx->remote_ip6[2];
		k.pod.a[3] = ctx->remote_ip6[3];
		k.dst.a[0] = ctx->local_ip6[0];
		k.dst.a[1] = ctx->local_ip6[1];
		k.dst.a[2] = ctx->local_ip6[2];
		k.dst.a[3] = ctx->local_ip6[3];
	} else {
		return SK_PASS;
	}
	k.pod_port = ctx->remote_port;
	k.dst_port = bpf_htons(ctx->local_port);
	f = bpf_map_lookup_elem(&proxy_flows, &k);
	if (!f || (f->flags & PI_FLOW_INBOUND)) {
		/* an inbound capture's flow: keyed by the local end */
		struct pi_dp_addr a = k.pod;
		__u16 port = k.pod_port;

		k.pod = k.dst;
		k.pod_port = k.dst_port;
		k.dst = a;
		k.dst_port = port;
		f = bpf_map_lookup_elem(&proxy_flows, &k);
		if (!f || !(f->flags & PI_FLOW_INBOUND))
			return SK_PASS;
	}
	listener_key(&lk, f, ctx->family, ctx->protocol);
	sk = bpf_map_lookup_elem(&proxy_listeners, &lk);
	if (!sk)
		return SK_PASS;
	/* Refused only for a socket that is no listener or of another
	 * family, which proxy_assign never puts there; the lookup then
	 * goes on as usual. */
	bpf_sk_assign(ctx, sk, 0);
	bpf_sk_release(sk);
	return SK_PASS;
}

/*
 * Run once by userspace (BPF_PROG_TEST_RUN on an empty frame), never
 * attached, when the object is loaded and after an upgrade's switch:
 * makes the flow tables' sweep timer while memory is at hand (a flow_add
 * that finds none has none to make it either), points it at this
 * object's round, and schedules one round, which meets the entries an
 * earlier object left without a timer. 0, or the error (positive).
 */
SEC("tc")
int flow_sweep_start(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct pi_flow_sweep *s = bpf_map_lookup_elem(&flow_sweep, &zero);
	long err;

	if (!s)
		return 2;	/* ENOENT: cannot be, an array's entry */
	err = bpf_timer_init(&s->timer, &flow_sweep, CLOCK_MONOTONIC_);
	if (err && err != -EBUSY_)
		return -err;
	bpf_timer_set_callback(&s->timer, flow_sweep_run);
	s->scheduled = PI_DP_SWEEP_SOON;
	s->due_ns = bpf_ktime_get_ns() + flow_sweep_ns(s);
	err = bpf_timer_start(&s->timer, flow_sweep_ns(s), 0);
	if (err) {
		s->scheduled = PI_DP_SWEEP_NONE;
		return -err;
	}
	return 0;
}
