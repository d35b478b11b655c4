/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A user-space reference of what the node datapath decides on one frame:
 * the parser (bpf/lib/parse.h) and the three node programs
 * (bpf/node.bpf.c: pod_egress, pod_ingress, uplink_ingress) written again
 * from their specification, in plain C over a byte buffer. The rule
 * matcher is the shared one (include/podinject_rule.h) walked linearly,
 * first match decides, behind a model of the connection tracker
 * (bpf/lib/ct.h: which packets it tracks under which key, a flow's entry
 * opened on an allowed first packet, later packets and replies passing
 * on it, ICMP errors passing with the flow they quote); TTL and hop
 * limit on routed packets (bpf/lib/ttl.h) as the programs apply them. The
 * differential fuzzer (fuzz_bpf.c) runs the real programs with
 * BPF_PROG_TEST_RUN and compares. A change of the datapath's decisions
 * changes this file too.
 */
#ifndef PODINJECT_FUZZ_BPF_REF_H
#define PODINJECT_FUZZ_BPF_REF_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include "podinject_abi.h"
#include "podinject_rule.h"

enum ref_parse {
	REF_OK, REF_ARP, REF_UNSUPPORTED, REF_MALFORMED, REF_VLAN,
	REF_FRAG_ORPHAN, REF_FRAG_TINY,
};

enum ref_frag { REF_FRAG_NONE, REF_FRAG_FIRST, REF_FRAG_LATER };

struct ref_pkt {
	uint32_t family;
	struct pi_dp_addr saddr, daddr;
	uint16_t sport, dport;
	uint8_t proto, has_ports, frag, tcp_flags;
	uint32_t l4_off, l3_end, frag_id;
	uint8_t frag_nh;	/* the key's protocol: after the fragment header */
};

#define REF_MAX_FRAGS 16

/* The fragment table: first fragments let through, by identity. */
struct ref_frags {
	int n;
	struct pi_frag_key key[REF_MAX_FRAGS];
	struct pi_frag val[REF_MAX_FRAGS];
};

struct ref_pod {
	uint32_t id;
	uint32_t ip4;			/* network order */
	struct pi_dp_addr ip6;
	uint8_t mac[6];
	uint32_t ifindex;
	const struct pi_dp_rule *rules[2];	/* by direction */
	uint32_t nrules[2];
	/* another plugin routes it (PI_DP_POD_PASS_ON): what the checks
	 * let through goes on to the next program */
	bool pass_on;
};

#define REF_MAX_CT 8

/* The connection tracker's table (bpf/lib/ct.h): flows let open, named
 * from the pod's side. No timeouts (a frame's checks are microseconds
 * apart) and no revisions (the fuzzer's policy has one). */
struct ref_ct {
	int n;
	struct pi_ct_key key[REF_MAX_CT];
	uint32_t rule_id[REF_MAX_CT];
	uint8_t dir[REF_MAX_CT], state[REF_MAX_CT], flags[REF_MAX_CT];
};

struct ref_node {
	struct ref_pod pod[2];		/* pod ids 0 and 1 */
	struct ref_frags frags;
	struct ref_ct ct;
};

/* What a program did: its verdict, the one counter it moved. */
struct ref_out {
	int verdict;			/* PI_PASS, PI_DROP, PI_REDIRECT, PI_NEXT */
	int drop_pod, drop_reason;	/* -1: no drop counted */
	uint32_t rule_hit[2];		/* deciding rules' ids, 0 = none */
	int egress_pod, ingress_pod;	/* packet counters moved, -1 none */
	uint32_t redirect_ifindex;
};

static inline uint16_t ref_be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline void ref_frag_key(struct pi_frag_key *k, const struct ref_pkt *p)
{
	memset(k, 0, sizeof(*k));
	k->family = p->family;
	k->proto = p->frag_nh;
	k->id = p->frag_id;
	k->saddr = p->saddr;
	k->daddr = p->daddr;
}

static inline void ref_frag_note(struct ref_node *n, const struct ref_pkt *p)
{
	struct pi_frag_key k;
	int i;

	if (p->frag != REF_FRAG_FIRST)
		return;
	ref_frag_key(&k, p);
	for (i = 0; i < n->frags.n; i++)
		if (!memcmp(&n->frags.key[i], &k, sizeof(k)))
			break;
	if (i == n->frags.n) {
		if (n->frags.n == REF_MAX_FRAGS)
			return;
		n->frags.n++;
	}
	n->frags.key[i] = k;
	memset(&n->frags.val[i], 0, sizeof(n->frags.val[i]));
	n->frags.val[i].sport = p->sport;
	n->frags.val[i].dport = p->dport;
	n->frags.val[i].has_ports = p->has_ports;
	n->frags.val[i].proto = p->proto;
}

static inline int ref_l4(const struct ref_node *n, const uint8_t *d,
			 uint32_t len, struct ref_pkt *p)
{
	uint32_t need;

	if (p->frag == REF_FRAG_LATER) {
		struct pi_frag_key k;

		ref_frag_key(&k, p);
		for (int i = 0; i < n->frags.n; i++) {
			if (memcmp(&n->frags.key[i], &k, sizeof(k)))
				continue;
			p->sport = n->frags.val[i].sport;
			p->dport = n->frags.val[i].dport;
			p->has_ports = n->frags.val[i].has_ports;
			p->proto = n->frags.val[i].proto;
			return REF_OK;
		}
		return REF_FRAG_ORPHAN;
	}
	if (p->proto == 6)
		need = 20;
	else if (p->proto == 17)
		need = 8;
	else
		return REF_OK;
	/* the header inside the IP packet, and readable in the frame */
	if (p->l4_off + need > p->l3_end ||
	    p->l4_off + (p->proto == 6 ? 14 : 4) > len)
		return p->frag == REF_FRAG_FIRST ? REF_FRAG_TINY : REF_MALFORMED;
	p->sport = ref_be16(d + p->l4_off);
	p->dport = ref_be16(d + p->l4_off + 2);
	if (p->proto == 6)
		p->tcp_flags = d[p->l4_off + 13];
	p->has_ports = 1;
	return REF_OK;
}

static inline bool ref_is_ext6(uint8_t nh)
{
	return nh == 0 || nh == 43 || nh == 60 || nh == 51 || nh == 44;
}

static inline int ref_ext6(const uint8_t *d, uint32_t len, struct ref_pkt *p,
			   uint8_t nh)
{
	uint32_t off = p->l4_off;

	for (int i = 0; i < PI_MAX_EXTHDRS && ref_is_ext6(nh); i++) {
		const uint8_t *h = d + off;

		if (off + 8 > p->l3_end || off + 8 > len)
			return p->frag == REF_FRAG_FIRST ? REF_FRAG_TINY :
							   REF_MALFORMED;
		if (nh == 44) {
			uint16_t fo = ref_be16(h + 2);

			memcpy(&p->frag_id, h + 4, 4);
			nh = h[0];
			p->frag_nh = nh;
			off += 8;
			if (fo & 0xfff8) {
				p->frag = REF_FRAG_LATER;
				break;
			}
			/* offset 0 without more: an atomic fragment, whole */
			if (fo & 1)
				p->frag = REF_FRAG_FIRST;
			continue;
		}
		/* the length of the header stepped over, in its own units:
		 * AH counts 4-byte words less two (RFC 4302), the others
		 * 8-byte words less one (RFC 8200) */
		if (nh == 51)
			off += ((uint32_t)h[1] + 2) * 4;
		else
			off += ((uint32_t)h[1] + 1) * 8;
		nh = h[0];
	}
	if (p->frag != REF_FRAG_LATER && ref_is_ext6(nh))
		return REF_MALFORMED;
	p->proto = nh;
	p->l4_off = off;
	return REF_OK;
}

static inline int ref_parse(const struct ref_node *n, const uint8_t *d,
			    uint32_t len, struct ref_pkt *p)
{
	uint16_t proto;

	memset(p, 0, sizeof(*p));
	if (len < 14)
		return REF_MALFORMED;
	proto = ref_be16(d + 12);
	if (proto == 0x0800) {
		const uint8_t *ip = d + 14;
		uint32_t ihl, tot;
		uint16_t fo;

		if (len < 34)
			return REF_MALFORMED;
		ihl = (ip[0] & 15) * 4;
		tot = ref_be16(ip + 2);
		if (ip[0] >> 4 != 4 || ihl < 20)
			return REF_MALFORMED;
		if (tot < ihl || tot > len - 14)
			return REF_MALFORMED;
		p->family = AF_INET;
		memcpy(&p->saddr.a[0], ip + 12, 4);
		memcpy(&p->daddr.a[0], ip + 16, 4);
		p->proto = ip[9];
		p->l4_off = 14 + ihl;
		p->l3_end = 14 + tot;
		fo = ref_be16(ip + 6);
		if (fo & 0x1fff)
			p->frag = REF_FRAG_LATER;
		else if (fo & 0x2000)
			p->frag = REF_FRAG_FIRST;
		if (p->frag) {
			memcpy(&p->frag_id, ip + 4, 2);
			p->frag_nh = ip[9];
		}
		return ref_l4(n, d, len, p);
	}
	if (proto == 0x86DD) {
		const uint8_t *ip6 = d + 14;
		int ret;

		if (len < 54)
			return REF_MALFORMED;
		if (ip6[0] >> 4 != 6)
			return REF_MALFORMED;
		if (ref_be16(ip6 + 4) > len - 54)
			return REF_MALFORMED;
		p->family = AF_INET6;
		memcpy(p->saddr.a, ip6 + 8, 16);
		memcpy(p->daddr.a, ip6 + 24, 16);
		p->l4_off = 54;
		p->l3_end = 54 + ref_be16(ip6 + 4);
		ret = ref_ext6(d, len, p, ip6[6]);
		if (ret != REF_OK)
			return ret;
		return ref_l4(n, d, len, p);
	}
	if (proto == 0x0806) {
		const uint8_t *h = d + 14;

		if (len < 14 + 28)
			return REF_MALFORMED;
		if (h[0] != 0 || h[1] != 1 || h[2] != 8 || h[3] != 0 ||
		    h[4] != 6 || h[5] != 4)
			return REF_MALFORMED;
		memcpy(&p->saddr.a[0], h + 14, 4);
		memcpy(&p->daddr.a[0], h + 24, 4);
		return REF_ARP;
	}
	if (proto == 0x8100 || proto == 0x88A8)
		return REF_VLAN;
	return REF_UNSUPPORTED;
}

static inline bool ref_addr_eq(const struct pi_dp_addr *a, const struct pi_dp_addr *b)
{
	return !memcmp(a, b, sizeof(*a));
}

static inline bool ref_link_local(const struct pi_dp_addr *a)
{
	const uint8_t *b = (const uint8_t *)a->a;

	return b[0] == 0xfe && (b[1] & 0xc0) == 0x80;
}

static inline bool ref_unspecified(const struct pi_dp_addr *a)
{
	return !(a->a[0] | a->a[1] | a->a[2] | a->a[3]);
}

static inline bool ref_multicast(const struct pi_dp_addr *a)
{
	return ((const uint8_t *)a->a)[0] == 0xff;
}

/* The first rule that matches decides; none allows. Its id is noted
 * (and given in *rule_id, 0 when none matched). */
static inline int ref_walk(const struct ref_pod *pod, uint32_t dir,
			   const struct ref_pkt *p, struct ref_out *o,
			   uint32_t *rule_id)
{
	const struct pi_dp_addr *peer = dir == PI_DP_DIR_EGRESS ? &p->daddr : &p->saddr;

	*rule_id = 0;
	for (uint32_t i = 0; i < pod->nrules[dir]; i++) {
		const struct pi_dp_rule *r = &pod->rules[dir][i];

		if (!pi_rule_matches(r, p->family, peer, p->proto,
				     p->has_ports, p->dport))
			continue;
		if (!r->action)
			return PI_DP_ALLOW;
		o->rule_hit[dir == PI_DP_DIR_EGRESS ? 0 : 1] = r->id;
		*rule_id = r->id;
		return r->action;
	}
	return PI_DP_ALLOW;
}

/* REF_CT_FLOW_ANSWER: an echo reply, a packet of a flow that cannot
 * open one */
enum ref_ct_kind { REF_CT_UNTRACKED, REF_CT_FLOW, REF_CT_RELATED,
		   REF_CT_FLOW_ANSWER };

static inline bool ref_icmp(uint32_t family, uint8_t proto)
{
	return family == AF_INET ? proto == 1 : proto == 58;
}

static inline bool ref_icmp_echo(uint32_t family, uint8_t type)
{
	return family == AF_INET ? type == 8 || type == 0 :
				   type == 128 || type == 129;
}

static inline bool ref_icmp_error(uint32_t family, uint8_t type)
{
	return family == AF_INET ? type == 3 || type == 11 || type == 12 :
				   type >= 1 && type <= 4;
}

/* The key of flow pod `from_pod` names with `src`/`dst` as the packet
 * names them: the pod's end is the source on egress, the destination on
 * ingress. */
static inline void ref_ct_key_of(struct pi_ct_key *k, uint32_t family,
				 uint8_t proto, uint32_t dir,
				 const struct pi_dp_addr *src,
				 const struct pi_dp_addr *dst, uint16_t sport,
				 uint16_t dport)
{
	memset(k, 0, sizeof(*k));
	k->family = family;
	k->proto = proto;
	k->pod = dir == PI_DP_DIR_EGRESS ? *src : *dst;
	k->peer = dir == PI_DP_DIR_EGRESS ? *dst : *src;
	k->pod_port = dir == PI_DP_DIR_EGRESS ? sport : dport;
	k->peer_port = dir == PI_DP_DIR_EGRESS ? dport : sport;
}

/* The flow an ICMP error quotes (its IP header at `off`, then 8 bytes),
 * as the pod at `dir` names it: on ingress the pod sent the quoted packet,
 * on egress it received it. False when nothing trackable is quoted. */
static inline bool ref_ct_quoted(const uint8_t *d, uint32_t len,
				 const struct ref_pkt *p, uint32_t dir,
				 uint32_t off, struct pi_ct_key *k)
{
	struct pi_dp_addr src = {}, dst = {};
	uint16_t sport = 0, dport = 0;
	uint32_t l4off;
	uint8_t proto;

	if (p->family == AF_INET) {
		if (off + 20 > len || d[off] >> 4 != 4 || (d[off] & 15) < 5)
			return false;
		proto = d[off + 9];
		memcpy(&src.a[0], d + off + 12, 4);
		memcpy(&dst.a[0], d + off + 16, 4);
		l4off = off + (d[off] & 15) * 4;
	} else {
		if (off + 40 > len || d[off] >> 4 != 6)
			return false;
		proto = d[off + 6];
		memcpy(src.a, d + off + 8, 16);
		memcpy(dst.a, d + off + 24, 16);
		l4off = off + 40;
	}
	/* sent elsewhere than to the quoted packet's sender: no answer */
	if (memcmp(&p->daddr, &src, sizeof(src)))
		return false;
	if (l4off + 8 > len)
		return false;
	if (proto == 6 || proto == 17) {
		sport = ref_be16(d + l4off);
		dport = ref_be16(d + l4off + 2);
	} else if (ref_icmp(p->family, proto)) {
		if (!ref_icmp_echo(p->family, d[l4off]))
			return false;
		/* the identifier is the pod's end of an echo flow */
		sport = dport = ref_be16(d + l4off + 4);
		if (dir == PI_DP_DIR_INGRESS)
			dport = 0;
		else
			sport = 0;
	}
	/* the quoted packet went the other way: its source is the pod's
	 * end on ingress */
	ref_ct_key_of(k, p->family, proto,
		      dir == PI_DP_DIR_INGRESS ? PI_DP_DIR_EGRESS : PI_DP_DIR_INGRESS,
		      &src, &dst, sport, dport);
	return true;
}

/* What the tracker makes of the packet at `dir`, and its key. */
static inline int ref_ct_classify(const uint8_t *d, uint32_t len,
				  const struct ref_pkt *p, uint32_t dir,
				  struct pi_ct_key *k)
{
	uint16_t sport = p->sport, dport = p->dport;
	int kind = REF_CT_FLOW;

	if (ref_icmp(p->family, p->proto)) {
		uint8_t type;

		/* 8 bytes of ICMP header, read from the frame */
		if (p->frag == REF_FRAG_LATER || p->l4_off + 8 > len)
			return REF_CT_UNTRACKED;
		type = d[p->l4_off];
		if (ref_icmp_error(p->family, type))
			return ref_ct_quoted(d, len, p, dir, p->l4_off + 8, k) ?
			       REF_CT_RELATED : REF_CT_UNTRACKED;
		if (!ref_icmp_echo(p->family, type))
			return REF_CT_UNTRACKED;
		if (type == (p->family == AF_INET ? 0 : 129))
			kind = REF_CT_FLOW_ANSWER;
		/* the identifier names the pod's end, in both directions */
		sport = dport = ref_be16(d + p->l4_off + 4);
		if (dir == PI_DP_DIR_EGRESS)
			dport = 0;
		else
			sport = 0;
	} else if ((p->proto == 6 || p->proto == 17) && !p->has_ports) {
		return REF_CT_UNTRACKED;
	} else if (p->proto != 6 && p->proto != 17) {
		sport = dport = 0;
	}
	ref_ct_key_of(k, p->family, p->proto, dir, &p->saddr, &p->daddr,
		      sport, dport);
	return kind;
}

static inline int ref_ct_find(const struct ref_node *n,
			      const struct pi_ct_key *k)
{
	for (int i = 0; i < n->ct.n; i++)
		if (!memcmp(&n->ct.key[i], k, sizeof(*k)))
			return i;
	return -1;
}

static inline void ref_ct_forget(struct ref_node *n, int i)
{
	int last = --n->ct.n;

	n->ct.key[i] = n->ct.key[last];
	n->ct.rule_id[i] = n->ct.rule_id[last];
	n->ct.dir[i] = n->ct.dir[last];
	n->ct.state[i] = n->ct.state[last];
	n->ct.flags[i] = n->ct.flags[last];
}

/* A packet of flow i in `dir`: its state moves on. */
static inline void ref_ct_seen(struct ref_node *n, int i, uint32_t dir,
			       const struct ref_pkt *p)
{
	uint8_t *state = &n->ct.state[i], *flags = &n->ct.flags[i];

	if (dir != n->ct.dir[i])
		*flags |= PI_DP_CT_REPLIED;
	if (n->ct.key[i].proto != 6) {
		if (dir != n->ct.dir[i])
			*state = PI_DP_CT_ESTABLISHED;
		return;
	}
	if (p->tcp_flags & 0x04) {
		*state = PI_DP_CT_CLOSING;
		return;
	}
	if (p->tcp_flags & 0x01)
		*flags |= dir == PI_DP_DIR_EGRESS ? PI_DP_CT_FIN_POD : PI_DP_CT_FIN_PEER;
	if ((*flags & (PI_DP_CT_FIN_POD | PI_DP_CT_FIN_PEER)) ==
	    (PI_DP_CT_FIN_POD | PI_DP_CT_FIN_PEER))
		*state = PI_DP_CT_CLOSING;
	else if (*state == PI_DP_CT_OPENING && dir != n->ct.dir[i])
		*state = PI_DP_CT_ESTABLISHED;
}

/* A new entry for the flow k, opened in `dir` by p, allowed by rule_id. */
static inline int ref_ct_open(struct ref_node *n, const struct pi_ct_key *k,
			      uint32_t dir, const struct ref_pkt *p,
			      uint32_t rule_id, int action)
{
	int i;

	if (n->ct.n == REF_MAX_CT)
		return action;
	i = n->ct.n++;
	n->ct.key[i] = *k;
	n->ct.rule_id[i] = rule_id;
	n->ct.dir[i] = dir;
	n->ct.flags[i] = 0;
	if (k->proto != 6)
		n->ct.state[i] = PI_DP_CT_ESTABLISHED;
	else if (p->tcp_flags & 0x04)
		n->ct.state[i] = PI_DP_CT_CLOSING;
	else if ((p->tcp_flags & 0x12) == 0x02)
		n->ct.state[i] = PI_DP_CT_OPENING;
	else
		n->ct.state[i] = PI_DP_CT_ESTABLISHED;
	if (k->proto == 6 && (p->tcp_flags & 0x01))
		n->ct.flags[i] |= dir == PI_DP_DIR_EGRESS ? PI_DP_CT_FIN_POD :
							 PI_DP_CT_FIN_PEER;
	return action;
}

/* The pod's policy in `dir` with connection tracking: a tracked flow's
 * later packets and replies pass on its entry (counted against the rule
 * that let it open, in the direction that opened it), an ICMP error
 * quoting one passes with it, a flow's first packet is decided by the
 * rules and, allowed, opens an entry; the rest is decided packet by
 * packet. */
static inline int ref_policy(struct ref_node *n, const struct ref_pod *pod,
			     uint32_t dir, const uint8_t *d, uint32_t len,
			     const struct ref_pkt *p, struct ref_out *o)
{
	struct pi_ct_key k;
	uint32_t rule_id;
	int kind, i = -1, action;
	bool flow, opener;

	kind = ref_ct_classify(d, len, p, dir, &k);
	k.pod_id = pod->id;
	flow = kind == REF_CT_FLOW || kind == REF_CT_FLOW_ANSWER;
	if (kind != REF_CT_UNTRACKED)
		i = ref_ct_find(n, &k);
	if (kind == REF_CT_RELATED && i >= 0)
		return PI_DP_ALLOW;
	/* a SYN or an echo request on a closed flow's key, or from the end
	 * that did not open the flow, is a new flow: decided as a first
	 * packet, and the entry is replaced only if that allows it */
	opener = k.proto == 6 ? (p->tcp_flags & 0x12) == 0x02 :
		 kind == REF_CT_FLOW && ref_icmp(p->family, p->proto);
	if (flow && i >= 0 && opener &&
	    (n->ct.state[i] == PI_DP_CT_CLOSING || n->ct.dir[i] != dir)) {
		action = ref_walk(pod, dir, p, o, &rule_id);
		if (action == PI_DP_DENY)
			return action;
		ref_ct_forget(n, i);
		i = -1;
		return ref_ct_open(n, &k, dir, p, rule_id, action);
	}
	if (flow && i >= 0) {
		if (n->ct.dir[i] == dir && n->ct.rule_id[i])
			o->rule_hit[dir == PI_DP_DIR_EGRESS ? 0 : 1] =
				n->ct.rule_id[i];
		ref_ct_seen(n, i, dir, p);
		return PI_DP_ALLOW;
	}
	/* The first packet as the key names it decides: the same peer,
	 * protocol and destination port as the packet's own. */
	action = ref_walk(pod, dir, p, o, &rule_id);
	if (kind != REF_CT_FLOW || action == PI_DP_DENY)
		return action;
	return ref_ct_open(n, &k, dir, p, rule_id, action);
}


/* The TTL (IPv4) or hop limit (IPv6) the node would route with is gone:
 * one or none left. */
static inline bool ref_ttl_expired(const uint8_t *d, const struct ref_pkt *p)
{
	return (p->family == AF_INET ? d[14 + 8] : d[14 + 7]) <= 1;
}

/* A time exceeded may be made of the packet: it is no ICMP error and no
 * fragment after the first (no ICMP error answers those), and its IP
 * header (IPv4 without options) and 8 more bytes are there to quote. */
static inline bool ref_time_exceeded_ok(const uint8_t *d, uint32_t len,
					const struct ref_pkt *p)
{
	if (p->frag == REF_FRAG_LATER)
		return false;
	if (ref_icmp(p->family, p->proto)) {
		uint8_t type;

		if (p->l4_off >= len)
			return false;
		type = d[p->l4_off];
		if (p->family == AF_INET ? type == 3 || type == 4 ||
					   type == 5 || type == 11 || type == 12 :
					   type < 128)
			return false;
	}
	if (p->family == AF_INET)
		return len >= 14 + 28 && d[14] == 0x45;
	return len >= 14 + 48;
}

static inline int ref_drop(struct ref_out *o, uint32_t pod, int reason)
{
	o->verdict = PI_DROP;
	o->drop_pod = pod;
	o->drop_reason = reason;
	return PI_DROP;
}

static inline const struct ref_pod *ref_endpoint(const struct ref_node *n,
						 uint32_t family,
						 const struct pi_dp_addr *a)
{
	for (int i = 0; i < 2; i++) {
		const struct ref_pod *pod = &n->pod[i];
		struct pi_dp_addr v4 = { .a = { pod->ip4 } };

		if (family == AF_INET && ref_addr_eq(a, &v4))
			return pod;
		if (family == AF_INET6 && ref_addr_eq(a, &pod->ip6))
			return pod;
	}
	return NULL;
}

static inline int ref_deliver(struct ref_node *n, const uint8_t *d,
			      uint32_t len, const struct ref_pkt *p,
			      const struct ref_pod *to, struct ref_out *o)
{
	if (ref_policy(n, to, PI_DP_DIR_INGRESS, d, len, p, o) == PI_DP_DENY)
		return ref_drop(o, to->id, PI_DP_DROP_INGRESS_POLICY);
	ref_frag_note(n, p);
	o->ingress_pod = to->id;
	o->redirect_ifindex = to->ifindex;
	return o->verdict = PI_REDIRECT;
}

static inline int ref_nd_check(const uint8_t *d, uint32_t len,
			       const struct ref_pod *pod,
			       const struct ref_pkt *p)
{
	uint32_t off = p->l4_off;
	const uint8_t *h;

	if (off + 4 > len)
		return PI_DP_DROP_MALFORMED;
	h = d + off;
	if (h[0] == 134 || h[0] == 137)
		return PI_DP_DROP_ROUTER;
	if (h[0] == 136) {
		struct pi_dp_addr t;

		if (off + 8 + 16 > len)
			return PI_DP_DROP_MALFORMED;
		memcpy(&t, d + off + 8, 16);
		if (!ref_link_local(&t) && !ref_addr_eq(&t, &pod->ip6))
			return PI_DP_DROP_ND_SPOOFED;
	}
	if (h[0] == 133)
		off += 8;
	else if (h[0] == 135 || h[0] == 136)
		off += 24;
	else
		return PI_DP_DROP_NONE;
	for (int i = 0; i < 4; i++) {
		if (off + 8 > p->l3_end)
			break;
		if (off + 8 > len)
			return PI_DP_DROP_MALFORMED;
		h = d + off;
		if (!h[1])
			return PI_DP_DROP_MALFORMED;
		if ((h[0] == 1 || h[0] == 2) && memcmp(h + 2, pod->mac, 6))
			return PI_DP_DROP_ND_SPOOFED;
		off += (uint32_t)h[1] * 8;
	}
	/* more options than the 4 compared: refused */
	if (off + 8 <= p->l3_end)
		return PI_DP_DROP_ND_SPOOFED;
	return PI_DP_DROP_NONE;
}

static inline void ref_out_init(struct ref_out *o)
{
	memset(o, 0, sizeof(*o));
	o->drop_pod = o->drop_reason = -1;
	o->egress_pod = o->ingress_pod = -1;
}

/* Whether `mac` is the pod's (one it has; a pod with none takes any). */
static inline bool ref_mac_is(const uint8_t *mac, const struct ref_pod *pod)
{
	static const uint8_t none[6];

	return !memcmp(pod->mac, none, 6) || !memcmp(mac, pod->mac, 6);
}

/* pod_egress on the host side of `pod` */
static inline int ref_pod_egress(struct ref_node *n, const struct ref_pod *pod,
				 const uint8_t *d, uint32_t len,
				 struct ref_out *o)
{
	const struct ref_pod *to;
	bool link_scope = false;
	struct ref_pkt p;
	int ret, why;

	ref_out_init(o);
	/* the Ethernet source first, before the frame is parsed: the pod's
	 * own MAC (a frame too short for the header is the parser's) */
	if (len >= 14 && !ref_mac_is(d + 6, pod))
		return ref_drop(o, pod->id, PI_DP_DROP_SPOOFED);
	ret = ref_parse(n, d, len, &p);
	if (ret == REF_VLAN)
		return ref_drop(o, pod->id, PI_DP_DROP_VLAN);
	if (ret == REF_ARP) {
		if (p.saddr.a[0] && p.saddr.a[0] != pod->ip4)
			return ref_drop(o, pod->id, PI_DP_DROP_ND_SPOOFED);
		/* and its sender MAC */
		if (!ref_mac_is(d + 14 + 8, pod))
			return ref_drop(o, pod->id, PI_DP_DROP_ND_SPOOFED);
		return o->verdict = pod->pass_on ? PI_NEXT : PI_PASS;
	}
	if (ret == REF_UNSUPPORTED)
		return ref_drop(o, pod->id, PI_DP_DROP_UNSUPPORTED);
	if (ret == REF_MALFORMED)
		return ref_drop(o, pod->id, PI_DP_DROP_MALFORMED);
	if (p.family == AF_INET) {
		if (p.saddr.a[0] != pod->ip4)
			return ref_drop(o, pod->id, PI_DP_DROP_SPOOFED);
	} else if (!ref_addr_eq(&p.saddr, &pod->ip6)) {
		if (!ref_link_local(&p.saddr) && !ref_unspecified(&p.saddr))
			return ref_drop(o, pod->id, PI_DP_DROP_SPOOFED);
		if (!ref_link_local(&p.daddr) && !ref_multicast(&p.daddr))
			return ref_drop(o, pod->id, PI_DP_DROP_SPOOFED);
		link_scope = true;
	}
	if (ret == REF_FRAG_TINY)
		return ref_drop(o, pod->id, PI_DP_DROP_FRAG_TINY);
	if (ret == REF_FRAG_ORPHAN)
		return ref_drop(o, pod->id, PI_DP_DROP_FRAG_ORPHAN);
	if (p.family == AF_INET6 && p.proto == 58 && p.frag == REF_FRAG_NONE) {
		why = ref_nd_check(d, len, pod, &p);
		if (why != PI_DP_DROP_NONE)
			return ref_drop(o, pod->id, why);
	}
	if (ref_policy(n, pod, PI_DP_DIR_EGRESS, d, len, &p, o) == PI_DP_DENY)
		return ref_drop(o, pod->id, PI_DP_DROP_POLICY);
	ref_frag_note(n, &p);
	if (link_scope)
		return o->verdict = pod->pass_on ? PI_NEXT : PI_PASS;
	o->egress_pod = pod->id;
	if (pod->pass_on)
		return o->verdict = PI_NEXT;
	to = ref_endpoint(n, p.family, &p.daddr);
	if (!to)
		return o->verdict = PI_PASS;	/* no uplink configured */
	/* routed to a pod: with no TTL left, a time exceeded goes back to
	 * the sender's eth0 (dropped when none can be made), counted as a
	 * drop of reason ttl either way */
	if (ref_ttl_expired(d, &p)) {
		o->drop_pod = pod->id;
		o->drop_reason = PI_DP_DROP_TTL;
		if (!ref_time_exceeded_ok(d, len, &p))
			return o->verdict = PI_DROP;
		o->redirect_ifindex = pod->ifindex;
		return o->verdict = PI_REDIRECT;
	}
	return ref_deliver(n, d, len, &p, to, o);
}

/* pod_ingress on the host side of `pod` */
static inline int ref_pod_ingress(struct ref_node *n, const struct ref_pod *pod,
				  const uint8_t *d, uint32_t len,
				  struct ref_out *o)
{
	struct ref_pkt p;
	int ret;

	ref_out_init(o);
	ret = ref_parse(n, d, len, &p);
	if (ret == REF_ARP)
		return o->verdict = pod->pass_on ? PI_NEXT : PI_PASS;
	if (ret == REF_FRAG_TINY)
		return ref_drop(o, pod->id, PI_DP_DROP_FRAG_TINY);
	if (ret == REF_FRAG_ORPHAN)
		return ref_drop(o, pod->id, PI_DP_DROP_FRAG_ORPHAN);
	/* IP it cannot classify, whose addresses it read; tagged frames */
	if (ret == REF_MALFORMED && p.family)
		return ref_drop(o, pod->id, PI_DP_DROP_MALFORMED);
	if (ret == REF_VLAN)
		return ref_drop(o, pod->id, PI_DP_DROP_VLAN);
	if (ret != REF_OK)
		return o->verdict = PI_NEXT;
	if (ref_policy(n, pod, PI_DP_DIR_INGRESS, d, len, &p, o) == PI_DP_DENY)
		return ref_drop(o, pod->id, PI_DP_DROP_INGRESS_POLICY);
	ref_frag_note(n, &p);
	o->ingress_pod = pod->id;
	return o->verdict = pod->pass_on ? PI_NEXT : PI_PASS;
}

static inline int ref_uplink_ingress(struct ref_node *n, const uint8_t *d,
				     uint32_t len, struct ref_out *o)
{
	const struct ref_pod *from, *to;
	struct ref_pkt p;
	int ret;

	ref_out_init(o);
	ret = ref_parse(n, d, len, &p);
	if (ret != REF_OK && ret != REF_FRAG_TINY && ret != REF_FRAG_ORPHAN &&
	    !(ret == REF_MALFORMED && p.family))
		return o->verdict = PI_NEXT;
	from = ref_endpoint(n, p.family, &p.saddr);
	if (from)
		return ref_drop(o, from->id, PI_DP_DROP_UPLINK_SPOOFED);
	to = ref_endpoint(n, p.family, &p.daddr);
	if (!to)
		return o->verdict = PI_NEXT;
	if (ret == REF_MALFORMED)
		return ref_drop(o, to->id, PI_DP_DROP_MALFORMED);
	if (ret == REF_FRAG_TINY)
		return ref_drop(o, to->id, PI_DP_DROP_FRAG_TINY);
	if (ret == REF_FRAG_ORPHAN)
		return ref_drop(o, to->id, PI_DP_DROP_FRAG_ORPHAN);
	/* routed from the wire into the pod: no TTL left, dropped */
	if (ref_ttl_expired(d, &p))
		return ref_drop(o, to->id, PI_DP_DROP_TTL);
	return ref_deliver(n, d, len, &p, to, o);
}

#endif
