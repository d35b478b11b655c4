/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The one ABI shared by the BPF programs and the library's internals
 * (bpf/, lib/, and the unit tests, fuzzers and bench that drive the
 * programs): every map key and value, every constant both sides must agree
 * on. Only fixed-width types, padding spelled out.
 *
 * It is no part of the library's API. include/podinject/podinject.h has
 * types and constants of its own and never includes this file, so a change
 * here is no library ABI break. Where a map layout has a public
 * counterpart, its name here says so with pi_dp_ / PI_DP_ (the datapath's),
 * lib/ converts at the boundary (in the file that owns the map), and
 * lib/abi_ties.c holds the values both must agree on with _Static_assert.
 */
#ifndef PODINJECT_ABI_H
#define PODINJECT_ABI_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* The layout of a node's pinned state. A node pinned by a build with
 * another version is refused (node_open), never read: its maps may not
 * mean what this build thinks. Bump it with any change to a struct below,
 * to a map's size or to the set of pinned objects, and add the migration
 * from the version before to lib/upgrade.c (docs/architecture.md). */
#define PI_ABI_VERSION		11
/* pi_node_config.abi while `node upgrade` runs: this bit or'ed with the
 * version the upgrade started from. No build takes it for its own, so
 * every other command, of either build, leaves the node alone until the
 * upgrade is finished. */
#define PI_ABI_UPGRADING	0x80000000u

#define PI_DP_NAME_LEN		32
#define PI_DP_MAX_PODS		1024
/* Rule slots of a whole node, shared by all pods and both directions. */
#define PI_MAX_RULES		65536
#define PI_MAX_RULE_IDS		65536
#define PI_MAX_ENDPOINTS	4096

/* tcx verdicts (enum tcx_action_base); the same numbers are the TC_ACT_*
 * verdicts cls_bpf understands in direct-action mode, which is what lets one
 * program serve both attach modes. */
#define PI_NEXT			(-1)
#define PI_PASS			0
#define PI_DROP			2
#define PI_REDIRECT		7

/* Why a packet was dropped. Kept apart from the verdicts and counted per
 * pod at the one exit point of each program. */
enum pi_dp_drop_reason {
	PI_DP_DROP_NONE = 0,
	PI_DP_DROP_SPOOFED,		/* source address is not the pod's */
	PI_DP_DROP_POLICY,		/* denied by the pod's egress policy */
	PI_DP_DROP_MALFORMED,		/* truncated or otherwise unparsable */
	PI_DP_DROP_UNKNOWN_POD,		/* program on a device that is no pod */
	PI_DP_DROP_REDIRECT,		/* redirect helper refused */
	PI_DP_DROP_INGRESS_POLICY,	/* denied by the destination's
					 * ingress policy */
	PI_DP_DROP_UNSUPPORTED,		/* neither IPv4, IPv6 nor ARP */
	/* New reasons go here, at the end: the numbers above are kept. */
	PI_DP_DROP_FRAG_ORPHAN,		/* a non-first fragment whose first
					 * fragment was not let through (no
					 * fragment entry) */
	PI_DP_DROP_FRAG_TINY,		/* a first fragment too short to hold
					 * the transport header */
	PI_DP_DROP_VLAN,		/* a VLAN-tagged frame from a pod */
	PI_DP_DROP_ROUTER,		/* a router advertisement or redirect
					 * from a pod */
	PI_DP_DROP_ND_SPOOFED,		/* NDP or ARP claiming an address or
					 * MAC that is not the pod's */
	PI_DP_DROP_UPLINK_SPOOFED,	/* from the uplink with a local pod's
					 * source address (counted on that
					 * pod) */
	PI_DP_DROP_TTL,			/* routed with no TTL or hop limit
					 * left (the sender is sent an ICMP
					 * time exceeded) */
	PI_DP_DROP_MAX,
};

/* Address of either family: IPv4 in a[0], the rest zero. Network order. */
struct pi_dp_addr {
	__u32 a[4];
};

enum pi_dp_pod_flags {
	PI_DP_POD_HAS_V4	= 1 << 0,
	PI_DP_POD_HAS_V6	= 1 << 1,
	PI_DP_POD_NETKIT	= 1 << 2,
	/* The XDP ingress ACL runs on the pod-side eth0: what the node's
	 * stack sends to the pod is checked there, not at tc. */
	PI_DP_POD_XDP	= 1 << 3,
	/* Another plugin is the pod's datapath: the pod's programs (there
	 * while it has a policy) check its packets and hand every one they
	 * let through to the next program (PI_NEXT), never route them. */
	PI_DP_POD_PASS_ON	= 1 << 4,
};

/* pods: host-side ifindex -> pod, what the datapath needs of it. Names and
 * namespace paths are in pod_meta, which only userspace reads. */
struct pi_pod {
	__u32 id;		/* index into per-pod arrays */
	__u32 ifindex;		/* host-side device */
	__u32 peer_ifindex;	/* pod-side device, in the pod's netns */
	__u32 flags;		/* enum pi_dp_pod_flags */
	__u32 ip4;
	__u32 ip6[4];
	__u8 pod_mac[6];
	__u8 host_mac[6];
};

enum pi_endpoint_kind {
	PI_EP_POD = 1,		/* a pod on this node */
	PI_EP_HOST = 2,		/* an address of the node itself */
	/* A pod on this node whose datapath is another plugin's (adopted
	 * with no_datapath): reached through the node's stack, so that its
	 * own plugin's programs on its device see what it is sent. */
	PI_EP_FOREIGN_POD = 3,
};

struct pi_endpoint_key {
	__u32 family;		/* AF_INET or AF_INET6 */
	struct pi_dp_addr addr;
};

struct pi_endpoint {
	__u32 kind;		/* enum pi_endpoint_kind */
	__u32 pod_ifindex;	/* host-side device of the pod */
	__u32 pod_id;
	__u8 pod_mac[6];
	__u8 host_mac[6];
};

enum pi_node_flags {
	PI_NODE_TCX = 1 << 0,		/* attached with tcx links */
	PI_NODE_XDP = 1 << 1,		/* node up --xdp: XDP on pods, uplink */
};

/* Idle timeouts of tracked flows, by kind (pi_node_config.ct_timeout, in
 * seconds; 0 there means the default below). */
enum pi_dp_ct_timeout {
	PI_DP_CT_TO_TCP_OPENING = 0,	/* SYN seen, no answer yet */
	PI_DP_CT_TO_TCP_ESTABLISHED,
	PI_DP_CT_TO_TCP_CLOSING,	/* RST, or a FIN from both ends */
	PI_DP_CT_TO_UDP,		/* and protocols without ports */
	PI_DP_CT_TO_ICMP,		/* echo */
	PI_DP_CT_TO_MAX,
};

#define PI_CT_TIMEOUT_DEFAULTS { 60, 21600, 10, 60, 30 }

struct pi_node_config {
	char name[PI_DP_NAME_LEN];
	__u32 uplink_ifindex;	/* 0: no uplink, non-pod traffic to the stack */
	__u32 flags;
	__u32 next_rule_id;
	__u32 abi;		/* PI_ABI_VERSION of the build that made it */
	__u64 netns_ino;	/* of a node on the host's own namespace */
	__u32 ct_timeout[PI_DP_CT_TO_MAX];	/* seconds, 0 = default */
	/* ABI 5: the version the node was last upgraded from (0: made by
	 * this version) and when (CLOCK_REALTIME ns), for `node show`. */
	__u32 upgraded_from;
	__u64 upgraded_ns;
};

/* `node upgrade`'s progress record: the one entry of the map pinned at
 * PIN_DIR/upgrade/progress, which exists exactly while an upgrade is
 * under way (or was interrupted). lib/upgrade.c says what each phase
 * leaves behind and how the next run goes on from it. */
struct pi_upgrade_progress {
	__u32 from_abi;
	__u32 to_abi;
	__u32 phase;		/* enum upgrade_phase in lib/upgrade.c */
	__u32 pad;
};

/* pod_meta: host-side ifindex -> what userspace knows of a pod and the
 * datapath never reads. Created by userspace, pinned beside the maps. */
#define PI_DP_POD_NAME_MAX	253	/* a DNS name; ns/name fits */
#define PI_DP_NETNS_MAX		256
#define PI_DP_ATTACH_ID_MAX	128

enum pi_dp_pod_meta_flags {
	PI_DP_META_OWNS_DEV	= 1 << 0,	/* podinject made the device pair */
	PI_DP_META_OWNS_NETNS	= 1 << 1,	/* podinject made the namespace */
};

struct pi_pod_meta {
	char name[PI_DP_POD_NAME_MAX + 3];	/* NUL-terminated */
	char netns[PI_DP_NETNS_MAX];	/* name in /run/netns, or a path */
	char ifname[16];		/* the pod-side interface */
	char hostdev[16];		/* the host-side device */
	char attach_id[PI_DP_ATTACH_ID_MAX];	/* who attached it, e.g. a
						 * CNI container id + ifname */
	__u32 flags;			/* enum pi_dp_pod_meta_flags */
	__u32 head_owners;		/* enum pi_head_owner: who holds the
					 * head program on the pod's egress */
};

enum pi_head_owner {
	PI_HEAD_INJECT	= 1 << 0,	/* the pod is an injector */
	PI_HEAD_PROXY	= 1 << 1,	/* the pod's connections are captured */
	PI_HEAD_INBOUND	= 1 << 2,	/* connections to the pod are captured */
};

/* Policy rules. All rules of a node live in one array (`rules`); a pod's
 * policy in one direction is the contiguous range policy_refs[pod*2 + dir]
 * points at. An edit writes the new rule list into a free range and then
 * flips the reference, so the datapath sees the old or the new policy,
 * never a mix. The reference is one aligned 8-byte value for that reason. */
enum pi_dp_action {
	PI_DP_ALLOW = 1,
	PI_DP_DENY = 2,
};

struct pi_dp_rule {
	__u32 id;		/* index into rule_stats; stable across edits */
	__u8 action;		/* enum pi_dp_action */
	__u8 proto;		/* IPPROTO_*, 0 = any; ICMP means ICMP or ICMPv6 */
	__u8 family;		/* 0 = any, AF_INET, AF_INET6 */
	__u8 prefixlen;		/* of addr; 0 = any address */
	__u16 port_lo;		/* host order; 0..0 = any port */
	__u16 port_hi;
	struct pi_dp_addr addr;	/* destination (egress) or source (ingress) */
};

struct pi_policy_ref {
	__u16 start;		/* first slot in `rules` */
	__u16 count;		/* number of rules; 0 = no rules, default allow */
	/* One more with every edit, never reused: the connection tracker
	 * re-checks a flow decided at another revision, and a rule walk
	 * that finds the reference unchanged after it knows that no slot
	 * it read was freed and reused meanwhile (bpf/lib/policy.h). */
	__u32 rev;
} __attribute__((aligned(8)));	/* read by the datapath in one 8-byte load */

/* A pod's policy holds at most this many rules in one direction (the
 * reference's count is 16 bits wide). */
#define PI_MAX_POD_RULES	(PI_MAX_RULES / 2)

/*
 * The rule classifier (bpf/lib/cls.h, lib/cls.c): each pod's policy in one
 * direction compiled into bit vectors, so that a packet is decided by a few
 * lookups instead of a walk. Bit i of a vector stands for the rule at
 * position i of the policy. The address class (an LPM trie lookup) holds
 * the rules whose CIDR covers the address, the L4 class (protocol, then a
 * binary search over port interval starts) the rules whose protocol and
 * ports match; the first bit set in both is the deciding rule.
 *
 * A vector is cut into chunks of PI_CLS_CHUNK_RULES rules, each with a
 * summary word (bit j: word j is not zero); a class lists its chunks by
 * index in the node's chunk pool, where identical chunks are stored once
 * and index 0 is the empty chunk, never written.
 */
#define PI_CLS_WORDS		16
#define PI_CLS_CHUNK_RULES	(PI_CLS_WORDS * 64)
#define PI_CLS_MAX_CHUNKS	(PI_MAX_RULES / 2 / PI_CLS_CHUNK_RULES)
#define PI_CLS_CLASSES		65536	/* class pool of a node */
#define PI_CLS_CHUNKS		65536	/* chunk pool of a node: 16-bit indices */
#define PI_CLS_PORTS		131072	/* port interval starts of a node */
#define PI_CLS_ADDRS		(2 * PI_MAX_RULES + 8 * PI_DP_MAX_PODS)
#define PI_CLS_L4S		16384
#define PI_CLS_PROTO_OTHER	256	/* L4 key of protocols no rule names */

/* cls_heads[start]: the compiled form of the policy whose rules start at
 * slot `start` of `rules` (a live range's start is unique, so the pod's
 * reference flip switches rules and classifier together). Entry
 * PI_MAX_RULES holds the last generation handed out. */
struct pi_cls_head {
	__u32 gen;		/* keys its cls_addrs and cls_l4 entries */
	__u32 nchunks;		/* chunks per vector: rules / 1024, rounded up */
	__u32 class_off;	/* its range in cls_classes */
	__u32 nclasses;
	__u32 chunk_off;	/* its range in cls_chunks (the empty one apart) */
	__u32 nchunk;
	__u32 port_off;		/* its range in cls_ports */
	__u32 nports;
};

struct pi_cls_addr_key {
	__u32 prefixlen;	/* 64 + the CIDR's */
	__u32 gen;
	__u32 family;
	struct pi_dp_addr addr;
};

struct pi_cls_l4_key {
	__u32 gen;
	__u32 proto;		/* ICMPv6 as ICMP; PI_CLS_PROTO_OTHER */
};

struct pi_cls_l4 {
	__u32 noport_class;	/* packets whose ports were not read */
	__u32 port_off;		/* its first port interval in cls_ports */
	__u32 nports;		/* intervals; the first starts at port 0 */
	__u32 pad;
};

/* A port interval: from `start` to the next interval's start. */
struct pi_cls_port {
	__u32 start;
	__u32 cls;		/* its L4 class */
};

struct pi_cls_class {
	__u32 mask;			/* bit k: chunk k is not empty */
	__u16 chunk[PI_CLS_MAX_CHUNKS];	/* in cls_chunks; 0: empty */
};

struct pi_cls_chunk {
	__u64 summary;
	__u64 w[PI_CLS_WORDS];
};

struct pi_rule_stats {
	__u64 packets;
	__u64 bytes;
};

struct pi_dp_pod_stats {
	__u64 egress_packets;	/* the pod's egress program let it through */
	__u64 egress_bytes;
	__u64 ingress_packets;	/* delivered to the pod */
	__u64 ingress_bytes;
	__u64 drops[PI_DP_DROP_MAX];
};

/* Connection tracking (bpf/lib/ct.h). One node-wide LRU table; a flow is
 * named from one pod's side: the pod's end and the far end, so that the
 * packets of both directions at that pod find the same entry. A flow
 * between two pods of the node has an entry in each pod's name. */
#define PI_MAX_CT		65536

struct pi_ct_key {
	__u32 pod_id;
	__u32 family;
	__u8 proto;		/* IPPROTO_* as on the wire */
	__u8 pad;
	__u16 pod_port;		/* host order; ICMP echo: the identifier */
	__u16 peer_port;	/* host order; ICMP echo: 0 */
	__u16 pad2;
	struct pi_dp_addr pod;
	struct pi_dp_addr peer;
};

enum pi_dp_ct_state {
	PI_DP_CT_OPENING = 1,		/* TCP: the opener's SYN, unanswered */
	PI_DP_CT_ESTABLISHED = 2,	/* answered (UDP, ICMP: any flow) */
	PI_DP_CT_CLOSING = 3,		/* TCP: RST, or FIN from both ends */
};

enum pi_dp_ct_flags {
	PI_DP_CT_REPLIED = 1 << 0,	/* a packet came back */
	PI_DP_CT_FIN_POD = 1 << 1,	/* the pod sent a FIN */
	PI_DP_CT_FIN_PEER = 1 << 2,	/* the far end sent a FIN */
	/* A policy edit denied the open flow: its packets, both ways, are
	 * dropped by rule_id while the policy of the direction that opened
	 * it stays at rev + 1 (rev is kept one behind, so that a build
	 * before the flag decides such an entry again and denies it, never
	 * takes it for an allowed flow). A flow cut this way keeps its
	 * entry: without it the far end's next segment found no flow and
	 * opened one of its own, by the other direction's policy, and the
	 * pod's packets went on as its replies. */
	PI_DP_CT_CUT = 1 << 3,
};

struct pi_ct_entry {
	__u64 last_ns;		/* ct_now() of its last packet (pi_ct_idle_ns) */
	__u64 packets[2];	/* by enum pi_dp_policy_dir: sent by the pod, */
	__u64 bytes[2];		/* received by it */
	__u32 rev;		/* policy revision the verdict was made at */
	__u32 rule_id;		/* the allow rule that let it open, 0: none
				 * (PI_DP_CT_CUT: the deny rule) */
	__u8 dir;		/* enum pi_dp_policy_dir that opened it */
	__u8 state;		/* enum pi_dp_ct_state */
	__u8 flags;		/* enum pi_dp_ct_flags */
	__u8 pad[5];
};

/*
 * How long an entry stamped at `last_ns` has been idle at `now`, both
 * CLOCK_MONOTONIC: the difference taken modulo 2^64 and read signed, as
 * the kernel's time_after() does. A stamp a little ahead of the clock
 * (the coarse clock lags the fine one and other CPUs by up to a tick) is
 * idle 0, not 2^64 ns; a stamp taken further back than the clock has run
 * (a machine younger than the entry's timeout, a test that ages an entry)
 * is idle for the real span, not 0.
 */
static inline __u64 pi_ct_idle_ns(__u64 now, __u64 last_ns)
{
	__s64 d = (__s64)(now - last_ns);

	return d > 0 ? (__u64)d : 0;
}

/* Per pod, of the XDP programs (bpf/xdp.bpf.c); the packets and drops
 * are in pi_pod_stats too, this says which of them were decided in XDP. */
struct pi_dp_xdp_stats {
	__u64 acl_packets;	/* passed the ACL on the pod-side eth0 */
	__u64 acl_bytes;
	__u64 acl_drops;	/* denied there */
	__u64 uplink_redirects;	/* sent from the uplink with XDP_REDIRECT */
};

enum pi_dp_policy_dir {
	PI_DP_DIR_EGRESS = 0,
	PI_DP_DIR_INGRESS = 1,
};

/* Injection: podinject's own state, apart from the node datapath's. An
 * authorised injector pod may send with a target pod's source address; the
 * packet is then emitted into the target's egress datapath. */
enum pi_dp_inject_path {
	PI_DP_PATH_FAST = 1,		/* bpf_redirect_peer(BPF_F_EGRESS) */
	PI_DP_PATH_FALLBACK = 2,	/* bpf_redirect(BPF_F_INGRESS) */
	PI_DP_PATH_NETKIT_FALLBACK = 3,	/* the same, tagged, onto a netkit
					 * primary whose guard runs the
					 * target's peer program */
};


struct pi_inject_key {
	__u32 injector_ifindex;		/* injector's host-side device */
	__u32 family;
	struct pi_dp_addr addr;		/* the target's address */
};

struct pi_inject_target {
	__u32 target_ifindex;		/* target's host-side device */
	__u32 path;			/* enum pi_dp_inject_path */
	__u8 target_pod_mac[6];		/* the L2 header the target's own */
	__u8 target_host_mac[6];	/* packets would carry */
};

/*
 * inject/head_roles, an array by the host-side device's ifindex: what the
 * head program on that device has to look at, so that each check costs
 * only the devices that need it (issue 23). Written by user space alone,
 * from the maps each role reads (lib/inject.c, head_roles_refresh), before
 * the head runs there and after every change of them. A record without
 * PI_DP_ROLE_KNOWN (never written: a node whose upgrade did not fill the
 * map, a device past the array's end) gets every check, so a missing
 * record costs time, never a capture or an injection.
 */
#define PI_DP_HEAD_ROLES_MAX	65536

enum pi_dp_head_role {
	PI_DP_ROLE_INJECT	= 1 << 0,	/* inject_auth has its grants */
	PI_DP_ROLE_CAPTURED	= 1 << 1,	/* proxy_rules has it */
	PI_DP_ROLE_PROTECTED	= 1 << 2,	/* proxy_inbound_rules has it */
	PI_DP_ROLE_PROXY	= 1 << 3,	/* the proxy of a rule of either */
	PI_DP_ROLE_KNOWN	= 1u << 31,	/* the record is written */
};
#define PI_DP_ROLE_ALL		(PI_DP_ROLE_INJECT | PI_DP_ROLE_CAPTURED | \
				 PI_DP_ROLE_PROTECTED | PI_DP_ROLE_PROXY)

enum pi_dp_inject_drop {
	PI_DP_INJ_DROP_REDIRECT = 0,	/* the kernel refused the redirect */
	PI_DP_INJ_DROP_MAX,
};

struct pi_inject_stats_key {
	__u32 injector_ifindex;
	__u32 target_ifindex;
	__u32 path;
};

struct pi_inject_stats {
	__u64 packets;
	__u64 bytes;
	__u64 drops[PI_DP_INJ_DROP_MAX];
};

#define PI_MAX_INJECT	1024

/* The netkit fallback. bpf_redirect(primary, BPF_F_INGRESS) lands behind
 * the target's BPF_NETKIT_PEER programs, so a guard at the head of the
 * primary's tcx ingress runs the target's peer program (held in a prog
 * array slot) on injected packets, which carry the node's tag MAC as
 * their source; everything else there goes on untouched. */
struct pi_dp_netkit_guard {		/* by the target's primary ifindex */
	__u32 slot;			/* in netkit_peer_progs */
	__u8 pod_mac[6];		/* the source the tag stands in for */
	__u8 pad[2];
	__u64 runs;			/* injected packets given to the program */
	__u64 missing;			/* dropped: the slot held no program */
	__u64 forged;			/* the pod's own frames carrying the tag */
};

/* Transparent proxy: a captured pod's new connections go to a proxy pod's
 * transparent socket; the proxy's upstream connection, bound to the pod's
 * address, is injected into the pod's egress datapath. */
#define PI_DP_PROXY_MAX_PORTS	8
#define PI_MAX_FLOWS		65536
#define PI_PROXY_TABLE		100	/* route table in the proxy's netns */

struct pi_dp_proxy_rule {			/* by the captured pod's ifindex */
	__u32 proxy_ifindex;		/* proxy pod's host-side device */
	__u16 port;			/* proxy's listening port, host order */
	__u8 proto;			/* IPPROTO_TCP, IPPROTO_UDP, 0 = both */
	__u8 nports;			/* dport ranges below; 0 = any port */
	__u16 dport_lo[PI_DP_PROXY_MAX_PORTS];
	__u16 dport_hi[PI_DP_PROXY_MAX_PORTS];
	__u32 dst_family;		/* 0 = any destination */
	__u32 dst_plen;
	struct pi_dp_addr dst;
	__u8 proxy_pod_mac[6];
	__u8 proxy_host_mac[6];
	__u8 pod_mac[6];
	__u8 pod_host_mac[6];
	/* kept by the datapath; zero when userspace writes the rule */
	__u32 nflows;			/* live entries in proxy_flows */
	__u32 nupstream;		/* live entries in proxy_upstream */
	__u64 limit_drops;		/* new flows refused: share or table full */
};

/* One direction-free name for a proxied flow: the pod's end and the far
 * end, as the pod sees them. Ports in network order. */
struct pi_flow_key {
	__u32 family;
	__u8 proto;
	__u8 pad;
	__u16 pod_port;
	__u16 dst_port;
	__u16 pad2;
	struct pi_dp_addr pod;
	struct pi_dp_addr dst;
};

enum pi_flow_flags {
	PI_FLOW_UPSTREAM = 1 << 0,	/* in proxy_upstream, not proxy_flows */
	PI_FLOW_CLOSING = 1 << 1,	/* both FINs seen, or a late segment */
	PI_FLOW_FIN_POD = 1 << 2,	/* a FIN from the pod's end */
	PI_FLOW_FIN_PEER = 1 << 3,	/* a FIN from the far end */
	/* An inbound (termination) flow of a protected pod: in proxy_flows
	 * the client's connection, captured at the pod's eth0; in
	 * proxy_upstream the proxy's plaintext connection to the pod made
	 * with the client's address. The pod's end is the pod (B:N), the
	 * far end the client. */
	PI_FLOW_INBOUND = 1 << 4,
	/* fin_end holds where the later of the two FINs ends, and from
	 * which end it came (PI_FLOW_FIN_END_POD: the pod's): the flow is
	 * done at the other end's ACK of it. An entry without it (made by a
	 * build before 2026-12-07) ends at any segment after both FINs. */
	PI_FLOW_FIN_END = 1 << 5,
	PI_FLOW_FIN_END_POD = 1 << 6,
};

struct pi_flow {
	__u32 pod_ifindex;
	__u32 proxy_ifindex;
	__u16 proxy_port;		/* host order */
	__u16 flags;			/* enum pi_flow_flags */
	__u8 pod_mac[6];		/* to hand client-side replies to the pod */
	__u8 pod_host_mac[6];
	__u8 proxy_pod_mac[6];		/* to hand packets to the proxy */
	__u8 proxy_host_mac[6];
	union {
		/* An inbound plaintext flow: the sequence number of the
		 * proxy's SYN, which the protected pod's eth0 asks of any
		 * SYN of the 4-tuple (a client reusing it cannot get past
		 * the proxy). Network order. */
		__u32 syn_seq;
		/* Once both ends sent their FIN (PI_FLOW_FIN_END): the
		 * sequence number just past the later one, host order. It
		 * takes syn_seq's place: a SYN of the 4-tuple is asked for
		 * the proxy's own sequence number, which the proxy's hook
		 * writes there from the SYN before the pod's eth0 sees it
		 * (a client reusing the 4-tuple knows neither number). */
		__u32 fin_end;
	};
	__u64 last_seen_ns;		/* bpf_ktime_get_ns() of its last packet */
	/* Expires the flow when idle, and gives its place in the pod's
	 * share back (bpf/lib/proxy.h). Opaque to userspace. */
#ifdef __VMLINUX_H__
	struct bpf_timer timer;
#else
	__u64 timer[2];
#endif
};

/*
 * flow_sweep (the injection object's, one entry): the flow tables' entries
 * the kernel gave no timer of their own. bpf_timer_init allocates, and
 * where the kernel's allocator may not wait for memory (6.18's
 * kmalloc_nolock()) it fails with ENOMEM once the few objects at hand are
 * used, until frees bring some back: most new flows of a burst, half of
 * them at a steady rate. Such an entry would never leave by itself. Its
 * flow_add schedules the sweep, which walks both tables: it gives each
 * entry without a timer one if it can, takes out the ones idle past their
 * timeout, and comes back while any is left (bpf/lib/proxy.h).
 */
#define PI_DP_FLOW_SWEEP_NS	1000000000ULL
/* While the tables hold entries, a round at least every this many
 * intervals: the backstop for an entry a walk stepped over and a timer
 * that never runs. */
#define PI_DP_FLOW_SWEEP_SLOW	30
enum pi_dp_sweep_due {
	PI_DP_SWEEP_NONE,
	PI_DP_SWEEP_SOON,		/* for an untimed entry's timeout */
	PI_DP_SWEEP_SLOW,		/* the backstop's */
};
/* Written by the datapath only: an update from userspace frees the timer
 * in the value (an array's update does), and a round would then never be
 * scheduled again until the next flow_sweep_start. */
struct pi_flow_sweep {
#ifdef __VMLINUX_H__
	struct bpf_timer timer;
#else
	__u64 timer[2];
#endif
	__u32 scheduled;		/* enum pi_dp_sweep_due */
	__u32 pending;			/* entries the last round left untimed */
	__u32 live;			/* entries the last round kept */
	__u32 pad;
	__u64 interval_ns;		/* between rounds; 0: PI_DP_FLOW_SWEEP_NS
					 * (tests set it before the start) */
	__u64 untimed;			/* new entries the kernel gave no timer */
	__u64 due_ns;			/* when the round scheduled is due
					 * (bpf_ktime_get_ns) */
	__u64 next_ns;			/* the last round: how soon after it
					 * began an entry it left untimed
					 * times out (the earliest) */
	__u64 rounds;
	__u64 round_ns;			/* how long the last round took */
	__u64 armed;			/* entries a round gave their timer */
	__u64 expired;			/* entries a round took out, idle past
					 * their timeout (untimed, or their
					 * timer late or never run) */
};

/* Each captured pod's share of the flow tables: one pod's flows cannot
 * push out another's. Counted in its pi_proxy_rule. */
#define PI_DP_PROXY_FLOWS_PER_POD	(PI_MAX_FLOWS / 8)

/* A proxy's listener, for the lookups the stack makes after the datapath
 * assigned a packet its socket (proxy_lookup): the TCP listener for the
 * kernel's TIME_WAIT takeover of a reused 4-tuple, the UDP one for a
 * datagram the kernel put back together from fragments (the assignment
 * is forgotten in the reassembly). The proxy pod's host-side ifindex is
 * part of the key because bpf_sk_assign() in an sk_lookup program does
 * not check the namespace: one proxy's listener must never answer in
 * another's. */
struct pi_proxy_listener_key {
	__u32 proxy_ifindex;
	__u16 family;			/* | PI_PROXY_LISTENER_UDP */
	__u16 port;			/* host order */
};

/* In pi_proxy_listener_key.family: the UDP listener (the TCP one has the
 * bare family, as before UDP had entries) */
#define PI_PROXY_LISTENER_UDP	0x8000

/* a port per rule, 2 families (and as many UDP listeners, of the proxy
 * pods whose captured datagrams came in fragments) */
#define PI_MAX_PROXY_LISTENERS	(2 * PI_DP_MAX_PODS)

/* Synthetic flows (probes): podinject's own injector device sends packets
 * with a pod's source address; the replies are taken at the pod's eth0
 * ingress before delivery and handed to the probe through a ring buffer.
 * A probe's flow is told apart from the pod's own by an exact flow-table
 * entry whose pod-side port comes from a range kept outside Linux's
 * ephemeral ports (ICMP: echo id and sequence): PI_PROBE_PORT_LO..HI of the
 * library. The datapath needs its low end: it stamps the injection of a
 * frame from that range only (the range's top is the last port). */
#define PI_DP_PROBE_PORT_LO	61000

struct pi_probe_flow {
	__u32 probe_id;
	/* Answers the datapath took (they never reach the pod) but could
	 * not report: the node's probe event ring had no room. The probe
	 * says so instead of "no answer". Was padding, always written 0,
	 * so an entry of an older build reads 0: no migration. */
	__u32 unreported;
};

enum pi_probe_reply {
	PI_PROBE_SYNACK = 1,		/* TCP: answered */
	PI_PROBE_RST = 2,		/* TCP: refused */
	PI_PROBE_DATAGRAM = 3,		/* UDP: answered */
	PI_PROBE_ECHO_REPLY = 4,	/* ICMP: answered */
	PI_PROBE_UNREACH = 5,		/* ICMP error about the probe: refused */
	PI_PROBE_SENT = 6,		/* not an answer: the probe's frame
					 * entering the pod's egress datapath */
};

struct pi_probe_event {
	__u32 probe_id;
	__u32 kind;			/* enum pi_probe_reply */
	__u64 ts_ns;			/* bpf_ktime_get_ns() at the reply
					 * (PI_PROBE_SENT: at the injection) */
	__u32 tcp_ack;			/* SYN-ACK's or RST's ack (the
					 * probe's ISN + 1), 0 where none */
	__u32 icmp;			/* PI_PROBE_UNREACH: PI_PROBE_ICMP_READ
					 * | the error's type << 8 | its code
					 * (a build before it wrote 0 here) */
};

/* pi_probe_event.icmp holds an ICMP error's type and code */
#define PI_PROBE_ICMP_READ	(1u << 16)

/* Fragments. A non-first fragment carries no transport header; it is
 * classified with the ports of its first fragment, found here by the
 * fragment's identity. An entry is made when a program lets a first
 * fragment through, so a later fragment passes only behind a first one
 * that passed, and gets its verdict (Cilium's IPv4 fragment map, for both
 * families here). */
#define PI_MAX_FRAGS		8192

struct pi_frag_key {
	__u32 family;
	__u8 proto;
	__u8 pad[3];
	__u32 id;			/* IPv4: 16 bits, network order */
	struct pi_dp_addr saddr;
	struct pi_dp_addr daddr;
};

struct pi_frag {
	__u16 sport;			/* host order */
	__u16 dport;
	__u8 has_ports;
	/* the first fragment's transport protocol, which an IPv6 later
	 * fragment cannot name when destination options or AH follow its
	 * fragment header; 0 (padding before ABI 9): the key's protocol.
	 * Either build reads the other's entries right, so a datagram in
	 * flight across an upgrade is not lost. */
	__u8 proto;
	__u8 pad[2];
};

/* IPv6 extension headers walked before the transport header is found:
 * hop-by-hop, routing, destination options, fragment, AH. More is
 * malformed. */
#define PI_MAX_EXTHDRS		8

/* The live event monitor (`podinject monitor`, bpf/lib/monitor.h): the
 * datapath writes an event to its object's ring buffer only while a
 * monitor has asked for that kind in monitor_config; with none asking,
 * each place that could report pays one array lookup on the path it is
 * on (a drop, a policy decision, an injection), nothing else. */
enum pi_dp_mon_kind {
	PI_DP_MON_DROP = 1,		/* a packet dropped: why, by which rule */
	PI_DP_MON_VERDICT = 2,		/* a policy decision (a flow's first
					 * packet, or an untracked one) */
	PI_DP_MON_INJECT = 3,		/* a packet injected as a pod */
	PI_DP_MON_PROXY = 4,		/* a connection captured for a proxy */
	PI_DP_MON_TRACE = 5,		/* a probe's packet at a hook: the
					 * hook's verdict, or a policy
					 * decision on it (probe --trace) */
	PI_DP_MON_KIND_MAX,
};

/* Where an event was seen: the program (and so the hook) that saw it. */
enum pi_dp_mon_hook {
	PI_DP_HOOK_NONE = 0,		/* a policy decision: see dir */
	PI_DP_HOOK_POD_EGRESS,		/* pod_egress, pod_egress_nk */
	PI_DP_HOOK_POD_INGRESS,		/* pod_ingress, pod_ingress_nk */
	PI_DP_HOOK_UPLINK_INGRESS,	/* uplink_ingress */
	PI_DP_HOOK_XDP_POD,		/* the XDP ingress ACL of a pod */
	PI_DP_HOOK_XDP_UPLINK,		/* the uplink's XDP fast path */
	PI_DP_HOOK_INJECT,		/* inject_egress, at the injector */
	PI_DP_HOOK_NETKIT_GUARD,	/* netkit_guard, at the target */
	PI_DP_HOOK_POD_REPLY,		/* pod_reply, at a pod's eth0 */
	PI_DP_HOOK_MAX,
};

/* Drop reasons only events carry, beyond enum pi_dp_drop_reason: the
 * injection object's refusals, which are counted in its own tables. */
enum pi_dp_mon_drop_reason {
	PI_DP_MON_DROP_INJECT_REDIRECT = 32,	/* the kernel refused the
						 * injection's redirect */
	PI_DP_MON_DROP_PROXY_LIMIT,		/* a new flow beyond the pod's
						 * share of the proxy's table */
	PI_DP_MON_DROP_GUARD_EMPTY,		/* an injected packet at a
						 * netkit guard with no peer
						 * program to run */
	PI_DP_MON_DROP_PROXY_TUPLE,		/* its 4-tuple is another
						 * flow's (a client reusing
						 * the proxy's, the pod's own) */
	PI_DP_MON_DROP_PROXY_NO_SOCKET,		/* a captured datagram with no
						 * proxy socket to take it */
	PI_DP_MON_DROP_PROXY_ASSIGN,		/* the proxy's socket could
						 * not be assigned */
	PI_DP_MON_DROP_REASON_MAX,
};
/* inject_refusals (the injection object's, per CPU): every packet it
 * refuses (not a probe's answer it takes, nor a frame it failed to
 * rewrite), by reason, node-wide; entry i counts reason
 * PI_DP_MON_DROP_INJECT_REDIRECT + i. Where a reason has a table of its
 * own too (a pair's redirect drops, a rule's limit_drops, a guard's
 * missing runs), that says whose; this says how many of each, and is the
 * only count of the proxy's refusals that have no such table. */
#define PI_DP_INJ_REFUSALS	(PI_DP_MON_DROP_REASON_MAX - \
				 PI_DP_MON_DROP_INJECT_REDIRECT)

/* How a policy decision was made (a TRACE event's aux, hook NONE). */
enum pi_dp_mon_decided {
	PI_DP_DECIDED_WALK = 1,		/* by the rules: a flow's first packet,
					 * or an untracked one */
	PI_DP_DECIDED_TRACKED,		/* by the flow's tracker entry */
	PI_DP_DECIDED_RELATED,		/* an ICMP error about a tracked flow */
	PI_DP_DECIDED_NO_RULES,		/* the pod has no rules: allowed,
					 * not tracked */
};

/* pi_dp_mon_event.pod_id of an event whose program knows no pod id */
#define PI_DP_MON_NO_POD	0xffffffffu

struct pi_dp_monitor_config {
	__u32 kinds;			/* 1 << enum pi_dp_mon_kind, or'ed */
	__u32 lease_s;			/* CLOCK_MONOTONIC second after which
					 * the kinds no longer hold: the
					 * node's reader of events renews it
					 * while it reads; 0: no lease (a
					 * monitor of a build before it,
					 * which wrote 0 here) */
};

struct pi_dp_monitor_cpu {
	__u64 lost;			/* events the full ring buffer lost */
	__u32 deny_rule;		/* the last deny's rule on this CPU */
	__u32 pad;
};

struct pi_dp_mon_event {
	__u64 ts_ns;			/* bpf_ktime_get_ns() */
	__u32 kind;			/* enum pi_dp_mon_kind */
	__u32 hook;			/* enum pi_dp_mon_hook */
	__u32 reason;			/* DROP: pi_dp_drop_reason or
					 * pi_dp_mon_drop_reason; VERDICT:
					 * enum pi_dp_action; INJECT: enum
					 * pi_dp_inject_path; TRACE: the
					 * hook's verdict (PI_PASS, PI_DROP,
					 * PI_REDIRECT, PI_NEXT), or for a
					 * decision (hook NONE) the action */
	__u32 rule_id;			/* the deciding rule, 0 = none */
	__u32 pod_id;			/* the pod it is about, by id;
					 * PI_DP_MON_NO_POD where the program
					 * knows only the device (injection's
					 * object) */
	__u32 ifindex;			/* that pod's host-side device, or
					 * the device the program ran on */
	__u32 aux;			/* INJECT: the target's host-side
					 * device; PROXY: the proxy's port;
					 * TRACE of a decision: enum
					 * pi_dp_mon_decided */
	__u32 len;			/* the packet's length */
	__u8 family;			/* AF_INET, AF_INET6; 0 unparsed */
	__u8 proto;
	__u8 dir;			/* enum pi_dp_policy_dir */
	__u8 tcp_flags;			/* TCP: its flags; ICMP, ICMPv6:
					 * PI_DP_MON_ICMP_READ when the
					 * ports below hold its header */
	__u16 sport;			/* host order; ICMP read: an echo's
					 * id (0 for other types) */
	__u16 dport;			/* ICMP read: type << 8 | code */
	struct pi_dp_addr saddr;
	struct pi_dp_addr daddr;
};

/* An ICMP event's header read from the frame (drops, a trace's hooks);
 * the events built from the parsed packet (verdicts, injections) have
 * no ICMP fields. */
#define PI_DP_MON_ICMP_READ	1

/* What a redirect helper was asked, recorded for unit tests
 * (bpf/lib/redirect.h). */
enum pi_redirect_kind {
	PI_RD_NONE = 0,
	PI_RD_PEER = 1,		/* bpf_redirect_peer */
	PI_RD_PLAIN = 2,	/* bpf_redirect */
	PI_RD_NEIGH = 3,	/* bpf_redirect_neigh */
	PI_RD_MAP = 4,		/* bpf_redirect_map; ifindex is the key */
};

struct pi_redirect_record {
	__u32 kind;
	__u32 ifindex;
	__u64 flags;
	__s64 ret;
};

/* The layout both sides compile against, pinned: a change here without a
 * PI_ABI_VERSION bump fails the build instead of misreading a node. */
_Static_assert(sizeof(struct pi_dp_addr) == 16, "size of pi_dp_addr");
_Static_assert(sizeof(struct pi_pod) == 48, "size of pi_pod");
_Static_assert(sizeof(struct pi_endpoint_key) == 20, "size of pi_endpoint_key");
_Static_assert(sizeof(struct pi_endpoint) == 24, "size of pi_endpoint");
_Static_assert(sizeof(struct pi_node_config) == 88, "size of pi_node_config");
_Static_assert(__builtin_offsetof(struct pi_node_config, upgraded_from) == 76, "pi_node_config.upgraded_from");
_Static_assert(__builtin_offsetof(struct pi_node_config, upgraded_ns) == 80, "pi_node_config.upgraded_ns");
_Static_assert(sizeof(struct pi_upgrade_progress) == 16, "size of pi_upgrade_progress");
_Static_assert(__builtin_offsetof(struct pi_node_config, ct_timeout) == 56, "pi_node_config.ct_timeout");
_Static_assert(sizeof(struct pi_ct_key) == 48, "size of pi_ct_key");
_Static_assert(__builtin_offsetof(struct pi_ct_key, pod) == 16, "pi_ct_key.pod");
_Static_assert(sizeof(struct pi_ct_entry) == 56, "size of pi_ct_entry");
_Static_assert(__builtin_offsetof(struct pi_ct_entry, rev) == 40, "pi_ct_entry.rev");
_Static_assert(sizeof(struct pi_pod_meta) == 680, "size of pi_pod_meta");
_Static_assert(sizeof(struct pi_dp_rule) == 28, "size of pi_dp_rule");
_Static_assert(sizeof(struct pi_policy_ref) == 8, "size of pi_policy_ref");
_Static_assert(sizeof(struct pi_rule_stats) == 16, "size of pi_rule_stats");
_Static_assert(sizeof(struct pi_cls_head) == 32, "size of pi_cls_head");
_Static_assert(sizeof(struct pi_cls_addr_key) == 28, "size of pi_cls_addr_key");
_Static_assert(sizeof(struct pi_cls_l4_key) == 8, "size of pi_cls_l4_key");
_Static_assert(sizeof(struct pi_cls_l4) == 16, "size of pi_cls_l4");
_Static_assert(sizeof(struct pi_cls_port) == 8, "size of pi_cls_port");
_Static_assert(sizeof(struct pi_cls_class) == 68, "size of pi_cls_class");
_Static_assert(PI_CLS_CHUNKS <= 65536, "a class names chunks in 16 bits");
_Static_assert(sizeof(struct pi_cls_chunk) == 136, "size of pi_cls_chunk");
_Static_assert(sizeof(struct pi_dp_pod_stats) == 152, "size of pi_dp_pod_stats");
_Static_assert(sizeof(struct pi_dp_proxy_rule) == 104, "size of pi_dp_proxy_rule");
_Static_assert(sizeof(struct pi_flow) == 64, "size of pi_flow");
_Static_assert(sizeof(struct pi_flow_sweep) == 96, "size of pi_flow_sweep");
_Static_assert(sizeof(struct pi_frag_key) == 44, "size of pi_frag_key");
_Static_assert(sizeof(struct pi_frag) == 8, "size of pi_frag");
_Static_assert(__builtin_offsetof(struct pi_flow, last_seen_ns) == 40, "pi_flow.last_seen_ns");
_Static_assert(__builtin_offsetof(struct pi_flow, timer) == 48, "pi_flow.timer");
_Static_assert(__builtin_offsetof(struct pi_flow, syn_seq) == 36, "pi_flow.syn_seq");
_Static_assert(__builtin_offsetof(struct pi_flow, fin_end) == 36, "pi_flow.fin_end");
_Static_assert(__builtin_offsetof(struct pi_dp_proxy_rule, nflows) == 88, "pi_dp_proxy_rule.nflows");
_Static_assert(__builtin_offsetof(struct pi_dp_proxy_rule, limit_drops) == 96, "pi_dp_proxy_rule.limit_drops");
_Static_assert(__builtin_offsetof(struct pi_frag_key, saddr) == 12, "pi_frag_key.saddr");
_Static_assert(__builtin_offsetof(struct pi_frag, has_ports) == 4, "pi_frag.has_ports");
_Static_assert(__builtin_offsetof(struct pi_frag, proto) == 5, "pi_frag.proto");
_Static_assert(sizeof(struct pi_dp_xdp_stats) == 32, "size of pi_dp_xdp_stats");
_Static_assert(sizeof(struct pi_inject_key) == 24, "size of pi_inject_key");
_Static_assert(sizeof(struct pi_inject_target) == 20, "size of pi_inject_target");
_Static_assert(sizeof(struct pi_inject_stats_key) == 12, "size of pi_inject_stats_key");
_Static_assert(sizeof(struct pi_inject_stats) == 24, "size of pi_inject_stats");
_Static_assert(sizeof(struct pi_dp_netkit_guard) == 40, "size of pi_dp_netkit_guard");
_Static_assert(sizeof(struct pi_flow_key) == 44, "size of pi_flow_key");
_Static_assert(sizeof(struct pi_proxy_listener_key) == 8, "size of pi_proxy_listener_key");
_Static_assert(sizeof(struct pi_probe_flow) == 8, "size of pi_probe_flow");
_Static_assert(sizeof(struct pi_probe_event) == 24, "size of pi_probe_event");
_Static_assert(sizeof(struct pi_redirect_record) == 24, "size of pi_redirect_record");
_Static_assert(sizeof(struct pi_dp_monitor_config) == 8, "size of pi_dp_monitor_config");
_Static_assert(sizeof(struct pi_dp_monitor_cpu) == 16, "size of pi_dp_monitor_cpu");
_Static_assert(sizeof(struct pi_dp_mon_event) == 80, "size of pi_dp_mon_event");
_Static_assert(__builtin_offsetof(struct pi_dp_mon_event, saddr) == 48, "pi_dp_mon_event.saddr");
_Static_assert(__builtin_offsetof(struct pi_pod, ifindex) == 4, "pi_pod.ifindex");
_Static_assert(__builtin_offsetof(struct pi_pod, ip6) == 20, "pi_pod.ip6");
_Static_assert(__builtin_offsetof(struct pi_pod, pod_mac) == 36, "pi_pod.pod_mac");
_Static_assert(__builtin_offsetof(struct pi_pod, host_mac) == 42, "pi_pod.host_mac");
_Static_assert(__builtin_offsetof(struct pi_endpoint_key, addr) == 4, "pi_endpoint_key.addr");
_Static_assert(__builtin_offsetof(struct pi_endpoint, pod_mac) == 12, "pi_endpoint.pod_mac");
_Static_assert(__builtin_offsetof(struct pi_node_config, uplink_ifindex) == 32, "pi_node_config.uplink_ifindex");
_Static_assert(__builtin_offsetof(struct pi_node_config, abi) == 44, "pi_node_config.abi");
_Static_assert(__builtin_offsetof(struct pi_node_config, netns_ino) == 48, "pi_node_config.netns_ino");
_Static_assert(__builtin_offsetof(struct pi_pod_meta, netns) == 256, "pi_pod_meta.netns");
_Static_assert(__builtin_offsetof(struct pi_pod_meta, flags) == 672, "pi_pod_meta.flags");
_Static_assert(__builtin_offsetof(struct pi_dp_rule, action) == 4, "pi_dp_rule.action");
_Static_assert(__builtin_offsetof(struct pi_dp_rule, port_lo) == 8, "pi_dp_rule.port_lo");
_Static_assert(__builtin_offsetof(struct pi_dp_rule, addr) == 12, "pi_dp_rule.addr");
_Static_assert(__builtin_offsetof(struct pi_policy_ref, count) == 2, "pi_policy_ref.count");
_Static_assert(__builtin_offsetof(struct pi_policy_ref, rev) == 4, "pi_policy_ref.rev");
_Static_assert(__builtin_offsetof(struct pi_dp_pod_stats, drops) == 32, "pi_dp_pod_stats.drops");
_Static_assert(__builtin_offsetof(struct pi_inject_key, addr) == 8, "pi_inject_key.addr");
_Static_assert(__builtin_offsetof(struct pi_inject_target, target_pod_mac) == 8, "pi_inject_target.target_pod_mac");
_Static_assert(__builtin_offsetof(struct pi_inject_stats, drops) == 16, "pi_inject_stats.drops");
_Static_assert(__builtin_offsetof(struct pi_dp_netkit_guard, runs) == 16, "pi_dp_netkit_guard.runs");
_Static_assert(__builtin_offsetof(struct pi_dp_netkit_guard, forged) == 32, "pi_dp_netkit_guard.forged");
_Static_assert(__builtin_offsetof(struct pi_dp_proxy_rule, dport_lo) == 8, "pi_dp_proxy_rule.dport_lo");
_Static_assert(__builtin_offsetof(struct pi_dp_proxy_rule, dst_family) == 40, "pi_dp_proxy_rule.dst_family");
_Static_assert(__builtin_offsetof(struct pi_dp_proxy_rule, dst) == 48, "pi_dp_proxy_rule.dst");
_Static_assert(__builtin_offsetof(struct pi_dp_proxy_rule, pod_host_mac) == 82, "pi_dp_proxy_rule.pod_host_mac");
_Static_assert(__builtin_offsetof(struct pi_flow_key, pod_port) == 6, "pi_flow_key.pod_port");
_Static_assert(__builtin_offsetof(struct pi_flow_key, pod) == 12, "pi_flow_key.pod");
_Static_assert(__builtin_offsetof(struct pi_flow_key, dst) == 28, "pi_flow_key.dst");
_Static_assert(__builtin_offsetof(struct pi_flow, proxy_port) == 8, "pi_flow.proxy_port");
_Static_assert(__builtin_offsetof(struct pi_flow, proxy_host_mac) == 30, "pi_flow.proxy_host_mac");
_Static_assert(__builtin_offsetof(struct pi_proxy_listener_key, port) == 6, "pi_proxy_listener_key.port");
_Static_assert(__builtin_offsetof(struct pi_probe_event, ts_ns) == 8, "pi_probe_event.ts_ns");
_Static_assert(__builtin_offsetof(struct pi_probe_event, tcp_ack) == 16, "pi_probe_event.tcp_ack");
_Static_assert(__builtin_offsetof(struct pi_redirect_record, flags) == 8, "pi_redirect_record.flags");


#endif
