/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Transparent proxy steering. Three kinds of packet are moved:
 *
 *  capture   POD -> D:dp, new and matching      pod's hook  -> proxy's eth0
 *  client    proxy (as D:dp) -> POD             proxy's hook -> POD's eth0
 *  upstream  D:dp -> POD:p2 (proxy's upstream   POD's eth0 ingress bounces
 *            connection, made as POD)           it to POD's hook -> proxy
 *
 * The proxy's upstream packets themselves (POD:p2 -> D:dp) are ordinary
 * injections (the proxy is POD's authorised injector); the injection
 * program records their flow in proxy_upstream so that POD's hook lets
 * them pass to POD's egress programs instead of capturing them again.
 *
 * A captured SYN whose 4-tuple an old connection's TIME_WAIT still holds
 * in the proxy's namespace is left to the stack, which takes the TIME_WAIT
 * over for the listener that the namespace's sk_lookup program
 * (proxy_lookup) names: proxy_listeners holds it.
 */
#ifndef PODINJECT_BPF_PROXY_H
#define PODINJECT_BPF_PROXY_H

#include "parse.h"
#include "podinject_rule.h"
#include "redirect.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PI_MAX_PODS);
	__type(key, __u32);
	__type(value, struct pi_proxy_rule);
} proxy_rules SEC(".maps");

/* Client-side flows: POD <-> proxy's listener, created at capture. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, PI_MAX_FLOWS);
	__type(key, struct pi_flow_key);
	__type(value, struct pi_flow);
} proxy_flows SEC(".maps");

/* Upstream flows: the proxy's connections made with POD's address. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, PI_MAX_FLOWS);
	__type(key, struct pi_flow_key);
	__type(value, struct pi_flow);
} proxy_upstream SEC(".maps");

/* The proxies' TCP listeners, put here by proxy_assign as it meets them
 * and taken out by the kernel when they close. A SOCKHASH because only
 * socket maps hand a socket to an sk_lookup program. */
struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, PI_MAX_PROXY_LISTENERS);
	__type(key, struct pi_proxy_listener_key);
	__type(value, __u64);
} proxy_listeners SEC(".maps");

static __always_inline void listener_key(struct pi_proxy_listener_key *lk,
					 const struct pi_flow *f, __u32 family)
{
	lk->proxy_ifindex = f->proxy_ifindex;
	lk->family = family;
	lk->port = f->proxy_port;
}

/* The flow as POD sees it, from a packet POD sent (`from_pod`) or one
 * sent to POD. */
static __always_inline void flow_key(struct pi_flow_key *k,
				     const struct pkt *p, bool from_pod)
{
	__builtin_memset(k, 0, sizeof(*k));
	k->family = p->family;
	k->proto = p->proto;
	if (from_pod) {
		k->pod = p->saddr;
		k->dst = p->daddr;
		k->pod_port = bpf_htons(p->sport);
		k->dst_port = bpf_htons(p->dport);
	} else {
		k->pod = p->daddr;
		k->dst = p->saddr;
		k->pod_port = bpf_htons(p->dport);
		k->dst_port = bpf_htons(p->sport);
	}
}

static __always_inline int set_macs(struct __sk_buff *skb, const __u8 *dst,
				    const __u8 *src)
{
	void *data = skb_data(skb), *data_end = skb_data_end(skb);
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > data_end)
		return -1;
	__builtin_memcpy(eth->h_dest, dst, ETH_ALEN);
	__builtin_memcpy(eth->h_source, src, ETH_ALEN);
	return 0;
}

static __always_inline int to_proxy(struct __sk_buff *skb,
				    const struct pi_flow *f)
{
	if (set_macs(skb, f->proxy_pod_mac, f->proxy_host_mac))
		return PI_DROP;
	return redirect_peer(f->proxy_ifindex, 0);
}

static __always_inline bool rule_matches_pkt(const struct pi_proxy_rule *r,
					     const struct pkt *p)
{
	bool port_ok = !r->nports;
	__u32 i;

	if (!p->has_ports)
		return false;
	if (r->proto && r->proto != p->proto)
		return false;
#pragma unroll
	for (i = 0; i < PI_PROXY_MAX_PORTS; i++) {
		if (i < r->nports && p->dport >= r->dport_lo[i] &&
		    p->dport <= r->dport_hi[i])
			port_ok = true;
	}
	if (!port_ok)
		return false;
	if (r->dst_family) {
		if (r->dst_family != p->family)
			return false;
		if (!pi_prefix_match(&p->daddr, &r->dst, r->dst_plen))
			return false;
	}
	return true;
}

/* A new connection: TCP SYN without ACK, or any UDP datagram. Anything
 * else of an unknown flow belongs to a connection made before capture
 * started and stays direct. */
static __always_inline bool starts_flow(const struct pkt *p)
{
	if (p->proto == IPPROTO_UDP)
		return true;
	return (p->tcp_flags & 0x12) == 0x02;
}

/* Steering at a pod's egress hook (the head program). Returns a verdict,
 * or PI_NEXT to go on with injection handling and the CNI's programs. */
static __always_inline int proxy_steer(struct __sk_buff *skb,
				       const struct pkt *p)
{
	struct pi_proxy_rule *r;
	struct pi_flow_key k;
	struct pi_flow *f, nf;
	__u32 ifindex = skb->ifindex;

	if (!p->has_ports)
		return PI_NEXT;

	/* client side: the proxy answering POD as D */
	flow_key(&k, p, false);
	f = bpf_map_lookup_elem(&proxy_flows, &k);
	if (f && f->proxy_ifindex == ifindex) {
		if (set_macs(skb, f->pod_mac, f->pod_host_mac))
			return PI_DROP;
		return redirect_peer(f->pod_ifindex, 0);
	}

	r = bpf_map_lookup_elem(&proxy_rules, &ifindex);
	if (!r)
		return PI_NEXT;

	/* upstream reply, bounced here from POD's eth0 */
	f = bpf_map_lookup_elem(&proxy_upstream, &k);
	if (f && f->pod_ifindex == ifindex)
		return to_proxy(skb, f);

	flow_key(&k, p, true);
	/* the proxy's upstream packets, injected: POD's own egress path */
	if (bpf_map_lookup_elem(&proxy_upstream, &k))
		return PI_NEXT;
	f = bpf_map_lookup_elem(&proxy_flows, &k);
	if (f)
		return to_proxy(skb, f);
	if (!starts_flow(p) || !rule_matches_pkt(r, p))
		return PI_NEXT;

	__builtin_memset(&nf, 0, sizeof(nf));
	nf.pod_ifindex = ifindex;
	nf.proxy_ifindex = r->proxy_ifindex;
	nf.proxy_port = r->port;
	__builtin_memcpy(nf.pod_mac, r->pod_mac, ETH_ALEN);
	__builtin_memcpy(nf.pod_host_mac, r->pod_host_mac, ETH_ALEN);
	__builtin_memcpy(nf.proxy_pod_mac, r->proxy_pod_mac, ETH_ALEN);
	__builtin_memcpy(nf.proxy_host_mac, r->proxy_host_mac, ETH_ALEN);
	bpf_map_update_elem(&proxy_flows, &k, &nf, BPF_ANY);
	return to_proxy(skb, &nf);
}

/* Called by the injection program for a packet it injects as `target`:
 * when target is proxied, the flow is the proxy's upstream connection. */
static __always_inline void proxy_note_upstream(const struct pkt *p,
						__u32 target, __u32 proxy)
{
	struct pi_proxy_rule *r;
	struct pi_flow_key k;
	struct pi_flow f;

	if (!p->has_ports)
		return;
	r = bpf_map_lookup_elem(&proxy_rules, &target);
	if (!r || r->proxy_ifindex != proxy)
		return;
	flow_key(&k, p, true);
	if (bpf_map_lookup_elem(&proxy_upstream, &k))
		return;
	__builtin_memset(&f, 0, sizeof(f));
	f.pod_ifindex = target;
	f.proxy_ifindex = proxy;
	f.proxy_port = r->port;
	__builtin_memcpy(f.proxy_pod_mac, r->proxy_pod_mac, ETH_ALEN);
	__builtin_memcpy(f.proxy_host_mac, r->proxy_host_mac, ETH_ALEN);
	bpf_map_update_elem(&proxy_upstream, &k, &f, BPF_ANY);
}

#endif
