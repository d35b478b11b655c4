/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The API's numbers (include/podinject/podinject.h) and the datapath's
 * (include/podinject_abi.h) are defined apart, so that a map layout can
 * change without changing the API. Where the library passes a value from
 * one to the other unconverted, the two must be equal: these asserts say
 * which, and fail the build when one side changes alone. A datapath that
 * renumbers one of them needs a conversion where the value crosses (the
 * comment beside each says where), and then its assert goes.
 */
#include "internal.h"

#define TIE(api, dp) \
	_Static_assert((long long)(api) == (long long)(dp), #api " is " #dp)

/* Sizes: what the API takes fits the maps, and what they hold fits the
 * API (lib/state.c pod_store and pod_join, lib/node.c). */
TIE(PI_NAME_LEN, PI_DP_NAME_LEN);
TIE(PI_MAX_PODS, PI_DP_MAX_PODS);
TIE(PI_POD_NAME_MAX, PI_DP_POD_NAME_MAX);
TIE(PI_NETNS_MAX, PI_DP_NETNS_MAX);
TIE(PI_ATTACH_ID_MAX, PI_DP_ATTACH_ID_MAX);
TIE(PI_PROXY_MAX_PORTS, PI_DP_PROXY_MAX_PORTS);
TIE(PI_PROXY_FLOWS_PER_POD, PI_DP_PROXY_FLOWS_PER_POD);
/* the probe's ports: the datapath stamps a frame's injection from the
 * range's low end on (lib/probe.c picks the ports) */
TIE(PI_PROBE_PORT_LO, PI_DP_PROBE_PORT_LO);
_Static_assert(PI_PROBE_PORT_HI == 65535, "the probe's range ends at the last port");

/* Pod flags and the pod record's (lib/state.c pod_store, pod_join). */
TIE(PI_POD_HAS_V4, PI_DP_POD_HAS_V4);
TIE(PI_POD_HAS_V6, PI_DP_POD_HAS_V6);
TIE(PI_POD_NETKIT, PI_DP_POD_NETKIT);
TIE(PI_POD_XDP, PI_DP_POD_XDP);
TIE(PI_POD_PASS_ON, PI_DP_POD_PASS_ON);
TIE(PI_META_OWNS_DEV, PI_DP_META_OWNS_DEV);
TIE(PI_META_OWNS_NETNS, PI_DP_META_OWNS_NETNS);

/* Drop reasons index pi_pod_stats.drops as they index the map's
 * (lib/state.c pod_stats_sum). */
TIE(PI_DROP_NONE, PI_DP_DROP_NONE);
TIE(PI_DROP_SPOOFED, PI_DP_DROP_SPOOFED);
TIE(PI_DROP_POLICY, PI_DP_DROP_POLICY);
TIE(PI_DROP_MALFORMED, PI_DP_DROP_MALFORMED);
TIE(PI_DROP_UNKNOWN_POD, PI_DP_DROP_UNKNOWN_POD);
TIE(PI_DROP_REDIRECT, PI_DP_DROP_REDIRECT);
TIE(PI_DROP_INGRESS_POLICY, PI_DP_DROP_INGRESS_POLICY);
TIE(PI_DROP_UNSUPPORTED, PI_DP_DROP_UNSUPPORTED);
TIE(PI_DROP_FRAG_ORPHAN, PI_DP_DROP_FRAG_ORPHAN);
TIE(PI_DROP_FRAG_TINY, PI_DP_DROP_FRAG_TINY);
TIE(PI_DROP_VLAN, PI_DP_DROP_VLAN);
TIE(PI_DROP_ROUTER, PI_DP_DROP_ROUTER);
TIE(PI_DROP_ND_SPOOFED, PI_DP_DROP_ND_SPOOFED);
TIE(PI_DROP_UPLINK_SPOOFED, PI_DP_DROP_UPLINK_SPOOFED);
TIE(PI_DROP_TTL, PI_DP_DROP_TTL);
TIE(PI_DROP_MAX, PI_DP_DROP_MAX);

/* Policy: a rule's action, and the direction that keys the pod's
 * references (lib/policy.c rule_to_dp, rule_from_dp, and the calls that
 * take a direction). */
TIE(PI_ALLOW, PI_DP_ALLOW);
TIE(PI_DENY, PI_DP_DENY);
TIE(PI_DIR_EGRESS, PI_DP_DIR_EGRESS);
TIE(PI_DIR_INGRESS, PI_DP_DIR_INGRESS);

/* Tracked flows (lib/ct.c ct_info_from_dp) and the node's timeouts,
 * indexed by kind (lib/ct.c pi_ct_timeouts, pi_ct_set_timeout). */
TIE(PI_CT_OPENING, PI_DP_CT_OPENING);
TIE(PI_CT_ESTABLISHED, PI_DP_CT_ESTABLISHED);
TIE(PI_CT_CLOSING, PI_DP_CT_CLOSING);
TIE(PI_CT_REPLIED, PI_DP_CT_REPLIED);
TIE(PI_CT_FIN_POD, PI_DP_CT_FIN_POD);
TIE(PI_CT_FIN_PEER, PI_DP_CT_FIN_PEER);
TIE(PI_CT_TO_TCP_OPENING, PI_DP_CT_TO_TCP_OPENING);
TIE(PI_CT_TO_TCP_ESTABLISHED, PI_DP_CT_TO_TCP_ESTABLISHED);
TIE(PI_CT_TO_TCP_CLOSING, PI_DP_CT_TO_TCP_CLOSING);
TIE(PI_CT_TO_UDP, PI_DP_CT_TO_UDP);
TIE(PI_CT_TO_ICMP, PI_DP_CT_TO_ICMP);
TIE(PI_CT_TO_MAX, PI_DP_CT_TO_MAX);

/* Injection paths of a grant, and the drops of its counters
 * (lib/inject.c pi_inject_allow, pi_inject_list, pi_inject_stats). */
TIE(PI_PATH_FAST, PI_DP_PATH_FAST);
TIE(PI_PATH_FALLBACK, PI_DP_PATH_FALLBACK);
TIE(PI_PATH_NETKIT_FALLBACK, PI_DP_PATH_NETKIT_FALLBACK);
TIE(PI_INJ_DROP_REDIRECT, PI_DP_INJ_DROP_REDIRECT);
TIE(PI_INJ_DROP_MAX, PI_DP_INJ_DROP_MAX);

/* The event monitor's numbers, passed through unconverted (lib/monitor.c
 * on_event). */
TIE(PI_MON_DROP, PI_DP_MON_DROP);
TIE(PI_MON_VERDICT, PI_DP_MON_VERDICT);
TIE(PI_MON_INJECT, PI_DP_MON_INJECT);
TIE(PI_MON_PROXY, PI_DP_MON_PROXY);
TIE(PI_MON_KIND_MAX, PI_DP_MON_KIND_MAX);
TIE(PI_MON_HOOK_POLICY, PI_DP_HOOK_NONE);
TIE(PI_MON_HOOK_POD_EGRESS, PI_DP_HOOK_POD_EGRESS);
TIE(PI_MON_HOOK_POD_INGRESS, PI_DP_HOOK_POD_INGRESS);
TIE(PI_MON_HOOK_UPLINK_INGRESS, PI_DP_HOOK_UPLINK_INGRESS);
TIE(PI_MON_HOOK_XDP_POD, PI_DP_HOOK_XDP_POD);
TIE(PI_MON_HOOK_XDP_UPLINK, PI_DP_HOOK_XDP_UPLINK);
TIE(PI_MON_HOOK_INJECT, PI_DP_HOOK_INJECT);
TIE(PI_MON_HOOK_NETKIT_GUARD, PI_DP_HOOK_NETKIT_GUARD);
TIE(PI_MON_HOOK_POD_REPLY, PI_DP_HOOK_POD_REPLY);
TIE(PI_MON_TRACE, PI_DP_MON_TRACE);
TIE(PI_MON_V_NEXT, PI_NEXT);
TIE(PI_MON_V_PASS, PI_PASS);
TIE(PI_MON_V_DROP, PI_DROP);
TIE(PI_MON_V_REDIRECT, PI_REDIRECT);
TIE(PI_MON_DECIDED_WALK, PI_DP_DECIDED_WALK);
TIE(PI_MON_DECIDED_TRACKED, PI_DP_DECIDED_TRACKED);
TIE(PI_MON_DECIDED_RELATED, PI_DP_DECIDED_RELATED);
TIE(PI_MON_DECIDED_NO_RULES, PI_DP_DECIDED_NO_RULES);
TIE(PI_MON_HOOK_MAX, PI_DP_HOOK_MAX);
TIE(PI_MON_DROP_INJECT_REDIRECT, PI_DP_MON_DROP_INJECT_REDIRECT);
TIE(PI_MON_DROP_PROXY_LIMIT, PI_DP_MON_DROP_PROXY_LIMIT);
TIE(PI_MON_DROP_GUARD_EMPTY, PI_DP_MON_DROP_GUARD_EMPTY);
TIE(PI_MON_DROP_MAX, PI_DP_MON_DROP_REASON_MAX);
