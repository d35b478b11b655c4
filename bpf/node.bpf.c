/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The reference node datapath: the part a CNI such as Cilium plays on a
 * real node. It stands in for "whoever wrote the pod's egress programs" so
 * that injection can be shown to run them exactly once.
 *
 *   pod netns                     node netns
 *   +---------+                   +------------------------------------+
 *   |  eth0   |=====veth=====>[pi-POD] tcx ingress: pod_egress          |
 *   |         |<===============      tcx egress:  pod_ingress          |
 *   +---------+                   |                                    |
 *                                 |  [uplink] tcx ingress: uplink_ingress
 *                                 +------------------------------------+
 *
 * pod_egress: source check, egress policy, then host routing: a local pod
 * is reached with bpf_redirect_peer() (straight into its eth0, no backlog),
 * a node address goes to the stack, anything else leaves through the
 * uplink with bpf_redirect_neigh(), or goes to the stack without one.
 * With `node up --xdp`, bpf/xdp.bpf.c adds an XDP ingress ACL on each veth
 * pod's eth0 and an XDP fast path from the uplink (docs/datapath.md).
 *
 * netkit pods have no tcx hook in the pod's transmit path of their own:
 * what a netkit pod sends is seen by the BPF_NETKIT_PEER programs of its
 * primary (pod_egress_nk), what it is sent by its BPF_NETKIT_PRIMARY
 * programs (pod_ingress_nk). Both run inside netkit's xmit, not at tc
 * ingress, where bpf_redirect_peer() with flags 0 is refused; delivery from
 * there is a plain bpf_redirect() to the target's host-side device, whose
 * own ingress enforcement point (pod_ingress at a veth's tcx egress, the
 * XDP ACL, or pod_ingress_nk) then checks and counts it once.
 */
#include "lib/common.h"
#include "lib/parse.h"
#include "lib/policy.h"
#include "lib/ct.h"
#include "lib/ttl.h"
#include "lib/redirect.h"
#include "lib/node_maps.h"

char LICENSE[] SEC("license") = "GPL";

/* The L2 header a pod's eth0 accepts: from its host side, to its own MAC.
 * False when the frame is too short to hold one. */
static __always_inline bool set_pod_l2(struct __sk_buff *skb,
				       const struct pi_endpoint *ep)
{
	void *data = skb_data(skb), *data_end = skb_data_end(skb);
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > data_end)
		return false;
	__builtin_memcpy(eth->h_dest, ep->pod_mac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, ep->host_mac, ETH_ALEN);
	return true;
}

/* Hand a packet to a pod on this node: its ingress policy, its counters,
 * the L2 header its eth0 accepts, then straight into its namespace.
 * bpf_redirect_peer() skips the XDP program of the pod's eth0, so the
 * ingress policy is checked here for pods with the XDP ACL too. */
static __always_inline int deliver_to_pod(struct __sk_buff *skb,
					  const struct pkt *p,
					  const struct pi_endpoint *ep,
					  __u32 hook)
{
	struct pi_dp_pod_stats *st;
	int v;

	v = ct_policy(skb, false, ep->pod_id, PI_DP_DIR_INGRESS, p, skb->len);
	if (v != PI_DP_ALLOW)
		return drop(skb, ep->pod_id,
			    ct_drop_reason(v, PI_DP_DIR_INGRESS), hook);
	frag_note(p);
	if (!set_pod_l2(skb, ep))
		return drop(skb, ep->pod_id, PI_DP_DROP_MALFORMED, hook);

	st = stats_of(ep->pod_id);
	if (st) {
		st->ingress_packets++;
		st->ingress_bytes += skb->len;
	}
	return redirect_peer(ep->pod_ifindex, 0);
}

/* From a netkit program: the packet is handed to the target's host-side
 * device to transmit, so the target's ingress checks run there, once. */
static __always_inline int deliver_via_host_dev(struct __sk_buff *skb,
						const struct pi_endpoint *ep)
{
	if (!set_pod_l2(skb, ep))
		return drop(skb, ep->pod_id, PI_DP_DROP_MALFORMED,
			    PI_DP_HOOK_POD_EGRESS);
	return redirect_plain(ep->pod_ifindex, 0);
}

/* The pod `pod_id` sent a packet the node would route with no TTL or hop
 * limit left: it is turned into the ICMP time exceeded and handed back to
 * the pod's eth0 (a netkit pod's is dropped: its programs cannot hand a
 * packet back to the peer; so is an ICMP error or a later fragment, which
 * no ICMP error may answer). */
static __always_inline int ttl_expired(struct __sk_buff *skb,
				       const struct pkt *p, __u32 pod_id,
				       bool in_netkit)
{
	drop(skb, pod_id, PI_DP_DROP_TTL, PI_DP_HOOK_POD_EGRESS);
	if (in_netkit || !ttl_may_answer(skb, p) ||
	    ttl_time_exceeded(skb, p->family))
		return PI_DROP;
	return redirect_peer(skb->ifindex, 0);
}

static __always_inline int route(struct __sk_buff *skb, const struct pkt *p,
				 __u32 pod_id, bool in_netkit)
{
	struct pi_node_config *cfg;
	struct pi_endpoint *ep;
	__u32 zero = 0;

	ep = lookup_endpoint(p);
	/* the node's own, or a pod another plugin is the datapath of: the
	 * stack routes it there, through that plugin's programs */
	if (ep && (ep->kind == PI_EP_HOST || ep->kind == PI_EP_FOREIGN_POD))
		return PI_PASS;
	cfg = bpf_map_lookup_elem(&node_config, &zero);
	if ((!ep || ep->kind != PI_EP_POD) && (!cfg || !cfg->uplink_ifindex))
		return PI_PASS;
	/* routed: to another pod, or out of the uplink */
	if (ttl_dec(skb, p))
		return ttl_expired(skb, p, pod_id, in_netkit);
	if (ep && ep->kind == PI_EP_POD)
		return in_netkit ? deliver_via_host_dev(skb, ep) :
				   deliver_to_pod(skb, p, ep,
						  PI_DP_HOOK_POD_EGRESS);
	if (!cfg)
		return PI_PASS;
	/* The neighbour subsystem resolves the next hop and writes the L2
	 * header; ip_forward may stay off on the node. */
	return redirect_neigh(cfg->uplink_ifindex);
}

#define ND_ROUTER_SOLICIT	133
#define ND_ROUTER_ADVERT	134
#define ND_NEIGHBOR_SOLICIT	135
#define ND_NEIGHBOR_ADVERT	136
#define ND_REDIRECT		137
#define ND_OPT_SOURCE_LL	1
#define ND_OPT_TARGET_LL	2
#define ND_MAX_OPTS		4

/* Neighbour discovery from a pod. A pod is no router: router
 * advertisements and redirects are dropped. What it says about neighbours
 * must be about itself: a neighbour advertisement's target is its own
 * address (or a link-local one, which names nothing beyond its own link),
 * and every link-layer address option carries its own MAC. Returns the
 * drop reason, PI_DP_DROP_NONE to go on. */
static __always_inline int nd_check(struct __sk_buff *skb,
				    const struct pi_pod *pod,
				    const struct pkt *p)
{
	__u32 off = p->l4_off, i;
	__u8 h[8];

	if (bpf_skb_load_bytes(skb, off, h, 4))
		return PI_DP_DROP_MALFORMED;
	if (h[0] == ND_ROUTER_ADVERT || h[0] == ND_REDIRECT)
		return PI_DP_DROP_ROUTER;
	if (h[0] == ND_NEIGHBOR_ADVERT) {
		struct pi_dp_addr t, own = {};

		if (bpf_skb_load_bytes(skb, off + 8, &t, 16))
			return PI_DP_DROP_MALFORMED;
		__builtin_memcpy(own.a, pod->ip6, 16);
		if (!addr6_is_link_local(&t) &&
		    (!(pod->flags & PI_DP_POD_HAS_V6) || !addr_eq(&t, &own)))
			return PI_DP_DROP_ND_SPOOFED;
	}
	if (h[0] == ND_ROUTER_SOLICIT)
		off += 8;
	else if (h[0] == ND_NEIGHBOR_SOLICIT || h[0] == ND_NEIGHBOR_ADVERT)
		off += 24;
	else
		return PI_DP_DROP_NONE;
	/* netkit in L3 mode is NOARP: no link-layer addresses to claim */
	if (pod->flags & PI_DP_POD_NETKIT)
		return PI_DP_DROP_NONE;
#pragma unroll
	for (i = 0; i < ND_MAX_OPTS; i++) {
		if (off + 8 > p->l3_end)
			break;
		if (bpf_skb_load_bytes(skb, off, h, 8))
			return PI_DP_DROP_MALFORMED;
		if (!h[1])
			return PI_DP_DROP_MALFORMED;
		if ((h[0] == ND_OPT_SOURCE_LL || h[0] == ND_OPT_TARGET_LL) &&
		    (h[2] != pod->pod_mac[0] || h[3] != pod->pod_mac[1] ||
		     h[4] != pod->pod_mac[2] || h[5] != pod->pod_mac[3] ||
		     h[6] != pod->pod_mac[4] || h[7] != pod->pod_mac[5]))
			return PI_DP_DROP_ND_SPOOFED;
		off += (__u32)h[1] * 8;
	}
	/* Linux reads every option, so one past those compared could claim
	 * another MAC: a message with more is refused (a real one carries
	 * one or two). */
	if (off + 8 <= p->l3_end)
		return PI_DP_DROP_ND_SPOOFED;
	return PI_DP_DROP_NONE;
}

static __always_inline bool addr6_is_multicast(const struct pi_dp_addr *a)
{
	return (a->a[0] & bpf_htonl(0xff000000)) == bpf_htonl(0xff000000);
}

/* What a pod's program answers for a packet it lets through: the
 * reference datapath decides (PI_PASS, or routes it), a pod whose own
 * plugin is its datapath gets the packet handed to that plugin's programs
 * after podinject's checks (PI_DP_POD_PASS_ON). */
static __always_inline int let_through(const struct pi_pod *pod)
{
	return pod->flags & PI_DP_POD_PASS_ON ? PI_NEXT : PI_PASS;
}

/* Whether `mac` is the pod's own MAC. A pod whose MAC is not known
 * (zero) matches any: nothing to compare with. */
static __always_inline bool mac_is_pods(const __u8 *mac,
					const struct pi_pod *pod)
{
	const __u8 *own = pod->pod_mac;

	if (!(own[0] | own[1] | own[2] | own[3] | own[4] | own[5]))
		return true;
	return !((mac[0] ^ own[0]) | (mac[1] ^ own[1]) | (mac[2] ^ own[2]) |
		 (mac[3] ^ own[3]) | (mac[4] ^ own[4]) | (mac[5] ^ own[5]));
}

/* A veth pod's frame says who sent it twice: its IP source and its
 * Ethernet source. Beside a bridge (podinject chained after `bridge`),
 * a frame from another pod's MAC teaches the bridge that pod's port,
 * and what the node sends that pod comes to this one: the source MAC
 * must be the pod's own, as the ARP sender's and the NDP options' are.
 * A frame too short for the header is the parser's to refuse. */
static __noinline bool src_mac_is_pods(struct __sk_buff *skb,
				       const struct pi_pod *pod)
{
	void *data = skb_data(skb), *data_end = skb_data_end(skb);
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > data_end)
		return true;
	return mac_is_pods(eth->h_source, pod);
}

/* An ARP message's sender MAC (parse_arp checked that it is Ethernet's,
 * after the 8 bytes of types and lengths). Copied out, not pulled into
 * the linear part: the frame goes on to the stack or the CNI as it came;
 * the copy's bytes are on this subprogram's own stack. */
static __noinline bool arp_sender_mac_is_pods(struct __sk_buff *skb,
					      const struct pi_pod *pod)
{
	__u8 sha[ETH_ALEN];

	if (bpf_skb_load_bytes(skb, sizeof(struct ethhdr) + 8, sha,
			       sizeof(sha)))
		return false;
	return mac_is_pods(sha, pod);
}

static __always_inline int pod_egress_common(struct __sk_buff *skb,
					     bool in_netkit)
{
	struct pi_dp_pod_stats *st;
	struct pi_pod *pod;
	__u32 ifindex = skb->ifindex;
	bool link_scope = false;
	struct pkt p;
	int ret, why;

	pod = bpf_map_lookup_elem(&pods, &ifindex);
	if (!pod)
		return drop_at(skb, PI_DP_MON_NO_POD, PI_DP_DROP_UNKNOWN_POD,
			       PI_DP_HOOK_POD_EGRESS);

	/* A tag taken off by the receiving device (skb->vlan_*) or still in
	 * the frame: either way the frame would leave in some VLAN. */
	if (skb->vlan_present)
		return drop(skb, pod->id, PI_DP_DROP_VLAN,
			    PI_DP_HOOK_POD_EGRESS);
	/* netkit in L3 mode has no Ethernet source of the pod's */
	if (!in_netkit && !(pod->flags & PI_DP_POD_NETKIT) &&
	    !src_mac_is_pods(skb, pod))
		return drop(skb, pod->id, PI_DP_DROP_SPOOFED,
			    PI_DP_HOOK_POD_EGRESS);
	ret = parse_pkt(skb, &p);
	if (ret == PARSE_VLAN)
		return drop(skb, pod->id, PI_DP_DROP_VLAN,
			    PI_DP_HOOK_POD_EGRESS);
	if (ret == PARSE_ARP) {
		/* the sender address of ARP is a claim: only its own (or
		 * none, an address probe); and so is its sender MAC, which
		 * a bridge's neighbours would send that address's traffic
		 * to */
		if (p.saddr.a[0] &&
		    (!(pod->flags & PI_DP_POD_HAS_V4) || p.saddr.a[0] != pod->ip4))
			return drop(skb, pod->id, PI_DP_DROP_ND_SPOOFED,
				    PI_DP_HOOK_POD_EGRESS);
		if (!arp_sender_mac_is_pods(skb, pod))
			return drop(skb, pod->id, PI_DP_DROP_ND_SPOOFED,
				    PI_DP_HOOK_POD_EGRESS);
		return let_through(pod);
	}
	if (ret == PARSE_UNSUPPORTED)
		return drop(skb, pod->id, PI_DP_DROP_UNSUPPORTED,
			    PI_DP_HOOK_POD_EGRESS);
	if (ret != PARSE_OK && ret != PARSE_FRAG_ORPHAN &&
	    ret != PARSE_FRAG_TINY)
		return drop(skb, pod->id, PI_DP_DROP_MALFORMED,
			    PI_DP_HOOK_POD_EGRESS);

	if (p.family == AF_INET) {
		if (!(pod->flags & PI_DP_POD_HAS_V4) || p.saddr.a[0] != pod->ip4)
			return drop(skb, pod->id, PI_DP_DROP_SPOOFED,
				    PI_DP_HOOK_POD_EGRESS);
	} else {
		struct pi_dp_addr own = {};

		__builtin_memcpy(own.a, pod->ip6, 16);
		if (!(pod->flags & PI_DP_POD_HAS_V6) || !addr_eq(&p.saddr, &own)) {
			/* Neighbour discovery, router solicitation, MLD and
			 * DAD use link-local or unspecified sources. Such a
			 * packet cannot leave the link: it may only go to a
			 * link-local or multicast address, it ends in the
			 * node's stack, and it meets the policy first. */
			if (!addr6_is_link_local(&p.saddr) &&
			    !addr6_is_unspecified(&p.saddr))
				return drop(skb, pod->id, PI_DP_DROP_SPOOFED,
					    PI_DP_HOOK_POD_EGRESS);
			if (!addr6_is_link_local(&p.daddr) &&
			    !addr6_is_multicast(&p.daddr))
				return drop(skb, pod->id, PI_DP_DROP_SPOOFED,
					    PI_DP_HOOK_POD_EGRESS);
			link_scope = true;
		}
	}
	if (ret == PARSE_FRAG_TINY)
		return drop(skb, pod->id, PI_DP_DROP_FRAG_TINY,
			    PI_DP_HOOK_POD_EGRESS);
	if (ret == PARSE_FRAG_ORPHAN)
		return drop(skb, pod->id, PI_DP_DROP_FRAG_ORPHAN,
			    PI_DP_HOOK_POD_EGRESS);
	if (p.family == AF_INET6 && p.proto == IPPROTO_ICMPV6_ &&
	    p.frag == PKT_FRAG_NONE) {
		why = nd_check(skb, pod, &p);
		if (why != PI_DP_DROP_NONE)
			return drop(skb, pod->id, why, PI_DP_HOOK_POD_EGRESS);
	}

	ret = ct_policy(skb, false, pod->id, PI_DP_DIR_EGRESS, &p, skb->len);
	if (ret != PI_DP_ALLOW)
		return drop(skb, pod->id, ct_drop_reason(ret, PI_DP_DIR_EGRESS),
			    PI_DP_HOOK_POD_EGRESS);
	frag_note(&p);
	/* The link's own chatter (NDP, MLD, DAD) stays out of the pod's
	 * egress counters, as it always has: they count what the pod sends
	 * beyond its link. */
	if (link_scope)
		return let_through(pod);

	st = stats_of(pod->id);
	if (st) {
		st->egress_packets++;
		st->egress_bytes += skb->len;
	}
	if (pod->flags & PI_DP_POD_PASS_ON)
		return PI_NEXT;
	return route(skb, &p, pod->id, in_netkit);
}

/* A veth pod's transmit path: tcx ingress of its host-side device. */
SEC("tc")
int pod_egress(struct __sk_buff *skb)
{
	return mon_exit(skb, PI_DP_HOOK_POD_EGRESS,
			pod_egress_common(skb, false));
}

/* A netkit pod's transmit path: BPF_NETKIT_PEER of its primary. netkit
 * sets skb->dev to the primary before running it, so skb->ifindex is the
 * same key as at a veth's host-side device. */
SEC("tc")
int pod_egress_nk(struct __sk_buff *skb)
{
	return mon_exit(skb, PI_DP_HOOK_POD_EGRESS,
			pod_egress_common(skb, true));
}

static __always_inline int ingress_checks(struct __sk_buff *skb,
					  const struct pi_pod *pod,
					  const struct pkt *p)
{
	struct pi_dp_pod_stats *st;
	int v;

	v = ct_policy(skb, false, pod->id, PI_DP_DIR_INGRESS, p, skb->len);
	if (v != PI_DP_ALLOW)
		return drop(skb, pod->id, ct_drop_reason(v, PI_DP_DIR_INGRESS),
			    PI_DP_HOOK_POD_INGRESS);
	frag_note(p);
	st = stats_of(pod->id);
	if (st) {
		st->ingress_packets++;
		st->ingress_bytes += skb->len;
	}
	return let_through(pod);
}

/* Traffic the node's stack sends to a pod leaves through the host-side
 * device; the pod's ingress policy and counters apply here too, so there
 * is no path into a pod that skips them. */
static __always_inline int pod_ingress_body(struct __sk_buff *skb)
{
	struct pi_pod *pod;
	__u32 ifindex = skb->ifindex;
	struct pkt p;
	int ret;

	pod = bpf_map_lookup_elem(&pods, &ifindex);
	if (!pod)
		return PI_NEXT;
	/* Everything this device transmits next passes the XDP ACL on the
	 * pod's eth0 (bpf/xdp.bpf.c), which checks and counts it there;
	 * checking here too would count it twice. */
	if (pod->flags & PI_DP_POD_XDP)
		return PI_NEXT;
	ret = parse_pkt(skb, &p);
	if (ret == PARSE_ARP)
		return let_through(pod);
	if (ret == PARSE_FRAG_TINY)
		return drop(skb, pod->id, PI_DP_DROP_FRAG_TINY,
			    PI_DP_HOOK_POD_INGRESS);
	if (ret == PARSE_FRAG_ORPHAN)
		return drop(skb, pod->id, PI_DP_DROP_FRAG_ORPHAN,
			    PI_DP_HOOK_POD_INGRESS);
	/* IP the parser could not classify, which the pod's stack may take
	 * all the same (more extension headers than the walk: Linux takes
	 * any number), and tagged frames, which a VLAN device the pod's
	 * root made on eth0 would take: neither may pass the policy by. */
	if (ret == PARSE_MALFORMED && p.family)
		return drop(skb, pod->id, PI_DP_DROP_MALFORMED,
			    PI_DP_HOOK_POD_INGRESS);
	if (ret == PARSE_VLAN || skb->vlan_present)
		return drop(skb, pod->id, PI_DP_DROP_VLAN,
			    PI_DP_HOOK_POD_INGRESS);
	if (ret != PARSE_OK)
		return PI_NEXT;
	return ingress_checks(skb, pod, &p);
}

SEC("tc")
int pod_ingress(struct __sk_buff *skb)
{
	return mon_exit(skb, PI_DP_HOOK_POD_INGRESS, pod_ingress_body(skb));
}

/* The same for a netkit pod, as its BPF_NETKIT_PRIMARY program. netkit
 * has already set skb->dev to the pod's eth0, an ifindex of the pod's
 * namespace that means nothing here, so the pod is found by the packet's
 * destination instead. */
static __always_inline int pod_ingress_nk_body(struct __sk_buff *skb)
{
	struct pi_endpoint *ep;
	struct pi_pod *pod;
	__u32 ifindex;
	struct pkt p;
	int ret;

	ret = parse_pkt(skb, &p);
	if (ret != PARSE_OK && ret != PARSE_FRAG_TINY &&
	    ret != PARSE_FRAG_ORPHAN && !(ret == PARSE_MALFORMED && p.family))
		return PI_NEXT;
	ep = lookup_endpoint(&p);
	if (!ep || (ep->kind != PI_EP_POD && ep->kind != PI_EP_FOREIGN_POD))
		return PI_NEXT;
	ifindex = ep->pod_ifindex;
	pod = bpf_map_lookup_elem(&pods, &ifindex);
	/* a pod another plugin routes is checked here only while its
	 * programs are on (it has a policy): they pass on */
	if (!pod || (ep->kind == PI_EP_FOREIGN_POD &&
		     !(pod->flags & PI_DP_POD_PASS_ON)))
		return PI_NEXT;
	if (ret == PARSE_FRAG_TINY)
		return drop(skb, pod->id, PI_DP_DROP_FRAG_TINY,
			    PI_DP_HOOK_POD_INGRESS);
	if (ret == PARSE_FRAG_ORPHAN)
		return drop(skb, pod->id, PI_DP_DROP_FRAG_ORPHAN,
			    PI_DP_HOOK_POD_INGRESS);
	if (ret == PARSE_MALFORMED)	/* as pod_ingress says */
		return drop(skb, pod->id, PI_DP_DROP_MALFORMED,
			    PI_DP_HOOK_POD_INGRESS);
	return ingress_checks(skb, pod, &p);
}

SEC("tc")
int pod_ingress_nk(struct __sk_buff *skb)
{
	return mon_exit(skb, PI_DP_HOOK_POD_INGRESS, pod_ingress_nk_body(skb));
}

/* Traffic from the wire for a local pod goes straight to it; everything
 * else is the node's own and continues to the stack. Nothing from the
 * wire may carry the source address of a pod of this node: such a frame
 * would pass the pod's peers' `allow from POD` rules, and the node's
 * stack would take it for the pod's. */
static __always_inline int uplink_ingress_body(struct __sk_buff *skb)
{
	struct pi_endpoint_key sk = {};
	struct pi_endpoint *ep;
	struct pkt p;
	int ret;

	ret = parse_pkt(skb, &p);
	/* IP the parser could not classify is checked for its source and,
	 * addressed to a local pod, dropped (pod_ingress says why); the
	 * node's own goes on to the stack */
	if (ret != PARSE_OK && ret != PARSE_FRAG_TINY &&
	    ret != PARSE_FRAG_ORPHAN && !(ret == PARSE_MALFORMED && p.family))
		return PI_NEXT;
	sk.family = p.family;
	sk.addr = p.saddr;
	ep = bpf_map_lookup_elem(&endpoints, &sk);
	if (ep && (ep->kind == PI_EP_POD || ep->kind == PI_EP_FOREIGN_POD))
		return drop(skb, ep->pod_id, PI_DP_DROP_UPLINK_SPOOFED,
			    PI_DP_HOOK_UPLINK_INGRESS);
	ep = lookup_endpoint(&p);
	if (!ep || ep->kind != PI_EP_POD)
		return PI_NEXT;
	if (ret == PARSE_MALFORMED)
		return drop(skb, ep->pod_id, PI_DP_DROP_MALFORMED,
			    PI_DP_HOOK_UPLINK_INGRESS);
	if (ret == PARSE_FRAG_TINY)
		return drop(skb, ep->pod_id, PI_DP_DROP_FRAG_TINY,
			    PI_DP_HOOK_UPLINK_INGRESS);
	if (ret == PARSE_FRAG_ORPHAN)
		return drop(skb, ep->pod_id, PI_DP_DROP_FRAG_ORPHAN,
			    PI_DP_HOOK_UPLINK_INGRESS);
	/* routed from the wire into the pod */
	if (ttl_dec(skb, &p))
		return drop(skb, ep->pod_id, PI_DP_DROP_TTL,
			    PI_DP_HOOK_UPLINK_INGRESS);
	return deliver_to_pod(skb, &p, ep, PI_DP_HOOK_UPLINK_INGRESS);
}

SEC("tc")
int uplink_ingress(struct __sk_buff *skb)
{
	return mon_exit(skb, PI_DP_HOOK_UPLINK_INGRESS,
			uplink_ingress_body(skb));
}
