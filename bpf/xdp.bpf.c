/* SPDX-License-Identifier: GPL-2.0 */
/*
 * XDP on the transmit side of a pod's veth (seed 004). On a veth pair,
 * native XDP on the pod-side eth0 runs on every frame the host-side pi-POD
 * transmits: that is the host's transmit path, set up and owned by the
 * host, and the pod needs no privileges for it.
 *
 *   node netns                                          pod netns
 *   [uplink] XDP: xdp_uplink --XDP_REDIRECT (devmap)--> [pi-POD] ==veth==> [eth0] XDP: xdp_pod_ingress
 *   node stack --> [pi-POD] tc egress: pod_ingress (defers) ==veth=======> [eth0] XDP: xdp_pod_ingress
 *   pod_egress/uplink_ingress: bpf_redirect_peer ---------(skips XDP)-----> [eth0] (checked at tc)
 *
 * xdp_pod_ingress: the pod's ingress policy, the same rules, rule counters
 * and pod counters as the tc programs, decided by the same parser and the
 * same rule walker (lib/parse.h, lib/policy.h). One instance is loaded per
 * pod with its pod id in .rodata: XDP programs have no network namespace
 * cookie on 6.1 and every pod's eth0 may have the same ifindex, so the
 * attachment itself has to say whose ACL it is.
 *
 * xdp_uplink: frames from other nodes for a local pod whose eth0 runs the
 * ACL go to the pod's host-side veth with XDP_REDIRECT, no skb until the
 * pod, their TTL or hop limit one less as routed; everything else (frames
 * with no TTL left to give, frames still waiting for their checksum, see
 * csum_pending) goes on with XDP_PASS to the tc uplink_ingress.
 * It decides no policy: the ACL on eth0 does, once.
 */
#include "lib/common.h"
#include "lib/parse.h"
#include "lib/policy.h"
#define CT_XDP
#include "lib/ct.h"
#include "lib/redirect.h"
#include "lib/node_maps.h"

char LICENSE[] SEC("license") = "GPL";

/* Set per instance before load: whose eth0 this program is attached to. */
const volatile __u32 pod_id = 0;

/* Host-side devices of the pods whose eth0 runs the ACL, by ifindex. A
 * veth only takes XDP_REDIRECT frames when its peer runs XDP, so a pod is
 * added here after its ACL is attached and removed before it is detached;
 * a pod that is not here is reached through tc. */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, PI_DP_MAX_PODS);
	__type(key, __u32);
	__type(value, __u32);
} xdp_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PI_DP_MAX_PODS);
	__type(key, __u32);
	__type(value, struct pi_dp_xdp_stats);
} xdp_stats SEC(".maps");

SEC("xdp")
int xdp_pod_ingress(struct xdp_md *ctx)
{
	struct pi_dp_xdp_stats *xs;
	__u32 id = pod_id;
	struct pkt p;
	__u32 len, why;
	int ret;

	/* As at tc: ARP and frames that are no IP (or too short to name
	 * addresses) are not the policy's (pod_ingress passes them
	 * uncounted too); fragments that cannot be classified are dropped
	 * as there. */
	ret = parse_xdp(ctx, &p);
	/* and IP it cannot classify, and tagged frames, as at tc */
	if (ret == PARSE_FRAG_TINY || ret == PARSE_FRAG_ORPHAN ||
	    ret == PARSE_VLAN || (ret == PARSE_MALFORMED && p.family)) {
		why = ret == PARSE_FRAG_TINY ? PI_DP_DROP_FRAG_TINY :
		      ret == PARSE_FRAG_ORPHAN ? PI_DP_DROP_FRAG_ORPHAN :
		      ret == PARSE_VLAN ? PI_DP_DROP_VLAN :
					  PI_DP_DROP_MALFORMED;
		count_drop(id, why);
		if (mon_wants(MON_BIT(PI_DP_MON_DROP)))
			mon_drop_xdp(ctx, id, why, PI_DP_HOOK_XDP_POD);
		return XDP_DROP;
	}
	if (ret != PARSE_OK)
		return XDP_PASS;
	len = ctx_len(ctx, true);
	xs = bpf_map_lookup_elem(&xdp_stats, &id);
	ret = ct_policy(ctx, true, id, PI_DP_DIR_INGRESS, &p, len);
	if (ret != PI_DP_ALLOW) {
		why = ct_drop_reason(ret, PI_DP_DIR_INGRESS);
		count_drop(id, why);
		if (xs)
			xs->acl_drops++;
		if (mon_wants(MON_BIT(PI_DP_MON_DROP)))
			mon_drop_xdp(ctx, id, why, PI_DP_HOOK_XDP_POD);
		return XDP_DROP;
	}
	frag_note(&p);
	count_ingress(id, len);
	if (xs) {
		xs->acl_packets++;
		xs->acl_bytes += len;
	}
	return XDP_PASS;
}

static __always_inline __u32 sum16(__u32 w)
{
	return (w & 0xffff) + (w >> 16);
}

/*
 * A TCP or UDP frame whose checksum field holds just the pseudo-header sum
 * was sent with CHECKSUM_PARTIAL by a stack on this machine and still waits
 * for its checksum: a veth uplink hands skbs over as they are, and so do
 * some virtual NICs. An XDP frame has no room for that state; redirected,
 * it would reach the pod with a bad checksum and be dropped there. Such
 * frames go the skb way (XDP_PASS, tc), which keeps the state. Frames off a
 * real wire carry complete checksums, which equal the pseudo-header sum by
 * chance once in 65536: that frame takes the tc way too, only slower.
 * Sums are of raw 16-bit words; the one's complement sum does not care
 * about byte order as long as both sides use the same.
 */
static __always_inline bool csum_pending(struct xdp_md *ctx,
					 const struct pkt *p)
{
	void *data = xdp_data(ctx), *data_end = xdp_data_end(ctx);
	__u32 sum = 0, l4len, off, i;
	__u16 *field;

	if (!p->has_ports)
		return false;
	if (p->l4_off > PKT_L4_OFF_MAX)
		return false;
	off = p->l4_off + (p->proto == IPPROTO_TCP ? 16 : 6);
	field = data + off;
	if ((void *)(field + 1) > data_end)
		return false;
	if (p->family == AF_INET) {
		struct iphdr *iph = data + sizeof(struct ethhdr);

		if ((void *)(iph + 1) > data_end)
			return false;
		l4len = bpf_ntohs(iph->tot_len) - iph->ihl * 4;
		sum = sum16(p->saddr.a[0]) + sum16(p->daddr.a[0]);
	} else {
		struct ipv6hdr *ip6 = data + sizeof(struct ethhdr);

		if ((void *)(ip6 + 1) > data_end)
			return false;
		l4len = bpf_ntohs(ip6->payload_len);
#pragma unroll
		for (i = 0; i < 4; i++)
			sum += sum16(p->saddr.a[i]) + sum16(p->daddr.a[i]);
	}
	sum += bpf_htons((__u16)p->proto) + bpf_htons((__u16)l4len);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return *field == (__u16)sum;
}

/*
 * The node routes what it redirects from the uplink to a pod, so the TTL
 * or hop limit goes down by one here as on the tc way (lib/ttl.h). A frame
 * with none left to give goes the tc way, which drops it, counts it and
 * answers the sender with a time exceeded: XDP has no skb to answer from.
 * Returns whether the frame was decremented. IPv4's header checksum
 * follows the 16-bit word that holds the TTL (RFC 1624: the old word out,
 * the new one in).
 */
static __always_inline bool xdp_ttl_dec(struct xdp_md *ctx,
					const struct pkt *p)
{
	void *data = xdp_data(ctx), *data_end = xdp_data_end(ctx);

	if (p->family == AF_INET) {
		struct iphdr *iph = data + sizeof(struct ethhdr);
		__u16 old, new;
		__u32 sum;

		if ((void *)(iph + 1) > data_end || iph->ttl <= 1)
			return false;
		old = bpf_htons(((__u16)iph->ttl << 8) | iph->protocol);
		new = bpf_htons(((__u16)(iph->ttl - 1) << 8) | iph->protocol);
		iph->ttl--;
		sum = (__u16)~iph->check + (__u16)~old + new;
		sum = (sum & 0xffff) + (sum >> 16);
		sum = (sum & 0xffff) + (sum >> 16);
		iph->check = ~sum;
		return true;
	} else {
		struct ipv6hdr *ip6 = data + sizeof(struct ethhdr);

		if ((void *)(ip6 + 1) > data_end || ip6->hop_limit <= 1)
			return false;
		ip6->hop_limit--;
		return true;
	}
}

SEC("xdp")
int xdp_uplink(struct xdp_md *ctx)
{
	struct pi_endpoint_key sk = {};
	struct pi_dp_xdp_stats *xs;
	struct pi_endpoint *ep;
	struct ethhdr *eth;
	__u32 ifindex;
	struct pkt p;

	/* Fragments and frames with a local pod's source address are
	 * uplink_ingress's to decide (fragment table, source check). */
	if (parse_xdp(ctx, &p) != PARSE_OK || p.frag)
		return XDP_PASS;
	sk.family = p.family;
	sk.addr = p.saddr;
	if (bpf_map_lookup_elem(&endpoints, &sk))
		return XDP_PASS;
	ep = lookup_endpoint(&p);
	if (!ep || ep->kind != PI_EP_POD)
		return XDP_PASS;
	ifindex = ep->pod_ifindex;
	if (!bpf_map_lookup_elem(&xdp_ports, &ifindex))
		return XDP_PASS;
	if (csum_pending(ctx, &p))
		return XDP_PASS;
	if (!xdp_ttl_dec(ctx, &p))
		return XDP_PASS;

	/* The header the pod's eth0 accepts, as deliver_to_pod writes it. */
	eth = xdp_data(ctx);
	if ((void *)(eth + 1) > xdp_data_end(ctx))
		return XDP_PASS;
	__builtin_memcpy(eth->h_dest, ep->pod_mac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, ep->host_mac, ETH_ALEN);

	xs = bpf_map_lookup_elem(&xdp_stats, &ep->pod_id);
	if (xs)
		xs->uplink_redirects++;
	/* Should the entry go away meanwhile, XDP_PASS hands the frame to
	 * uplink_ingress, which delivers it the tc way (its TTL then goes
	 * down twice: a pod being deleted, one frame at most per CPU). */
	return redirect_map(&xdp_ports, ifindex, XDP_PASS);
}
