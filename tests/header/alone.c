/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The public header stands alone: the Makefile compiles this against a
 * copy of include/podinject/podinject.h in a folder of its own, with no
 * other header of the project on the include path, as a program built
 * against an installed libpodinject would be. It fails to compile when
 * the header includes a header of the datapath's (podinject_abi.h) or
 * uses a name only such a header defines.
 *
 * Every type and constant of the API is named below, so that one the
 * header uses but does not define is an error here.
 */
#include <podinject/podinject.h>

static const char *const drop_names[PI_DROP_MAX] = PI_DROP_NAMES;
static const char *const ct_state_names[PI_CT_CLOSING + 1] = PI_CT_STATE_NAMES;
static const char *const ct_timeout_names[PI_CT_TO_MAX] = PI_CT_TIMEOUT_NAMES;
static const char *const path_names[PI_PATH_MAX + 1] = PI_PATH_NAMES;
static const char *const inj_drop_names[PI_INJ_DROP_MAX] = PI_INJ_DROP_NAMES;

/* Static, so zeroed: one of each of the API's structs. */
static struct pi_addr addr;
static struct pi_node_up_opts up;
static struct pi_node_info node;
static struct pi_node_upgrade_opts uo;
static struct pi_node_upgrade_info ui;
static struct pi_pod_info pod;
static struct pi_pod_spec spec;
static struct pi_adopt_spec adopt;
static struct pi_pod_stats stats;
static struct pi_xdp_stats xdp;
static struct pi_rule rule;
static struct pi_rule_info ri;
static struct pi_ct_info ct;
static struct pi_ct_counts counts;
static struct pi_inject_auth_info auth;
static struct pi_inject_stat_info ist;
static struct pi_netkit_guard guard;
static struct pi_proxy_rule proxy;
static struct pi_proxy_info pinfo;
static struct pi_plan_step step;
static struct pi_apply_error aerr;
static struct pi_probe_result pres;
static struct pi_probe_spec pspec;
static struct pi_matrix_spec mspec;
static struct pi_features feat;
static uint32_t timeouts[PI_CT_TO_MAX];
static char names[PI_NAME_LEN + PI_POD_NAME_MAX + PI_NETNS_MAX +
		  PI_ATTACH_ID_MAX];

int main(void)
{
	uint64_t sum = 0;

	rule.action = PI_ALLOW;
	rule.addr = addr;
	ri.dir = PI_DIR_INGRESS;
	ri.rule = rule;
	ct.state = PI_CT_ESTABLISHED;
	ct.flags = PI_CT_REPLIED | PI_CT_FIN_POD | PI_CT_FIN_PEER;
	pod.flags = PI_POD_HAS_V4 | PI_POD_HAS_V6 | PI_POD_NETKIT | PI_POD_XDP;
	pod.meta_flags = PI_META_OWNS_DEV | PI_META_OWNS_NETNS;
	proxy.port = 15001;
	proxy.dst = addr;
	pinfo.rule = proxy;
	ist.guard = guard;
	pspec.sport = PI_PROBE_PORT_LO;
	step.what = PI_PLAN_POLICY;
	sum += stats.drops[PI_DROP_TTL] + xdp.acl_drops +
	       ist.drops[PI_INJ_DROP_REDIRECT];
	sum += counts.by_state[PI_CT_CLOSING] + timeouts[PI_CT_TO_UDP];
	sum += (uint64_t)up.attach + node.pods + uo.lock_timeout_ms + ui.hooks;
	sum += spec.has4 + adopt.has6 + auth.path + aerr.where[0] + pres.port;
	sum += mspec.port + feat.tcx + names[0] + PI_DENY + PI_DIR_EGRESS;
	sum += PI_CT_OPENING + PI_PATH_FAST + PI_PATH_FALLBACK +
	       PI_PATH_NETKIT_FALLBACK + PI_PROXY_MAX_PORTS +
	       PI_PROXY_FLOWS_PER_POD + PI_PROBE_PORT_HI + PI_MAX_PODS +
	       sizeof(PI_PROBE_DEV PI_PROBE_TX_DEV);
	(void)drop_names;
	(void)ct_state_names;
	(void)ct_timeout_names;
	(void)path_names;
	(void)inj_drop_names;
	/* a call, so that the header's prototypes meet the archive's */
	return sum == UINT64_MAX || !pi_abi_version();
}
