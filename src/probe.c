/* SPDX-License-Identifier: GPL-2.0 */
/*
 * podinject probe: synthetic flows from a pod, without entering it.
 *
 * podinject's own injector device pair (pi_probe_tx -> pi_probe, in the
 * node's namespace, the head program on pi_probe) is authorised to speak
 * for the probed pods. A probe is a frame written to pi_probe_tx with the
 * pod's source address; the head program injects it into the pod's egress
 * datapath, where the pod's own programs (source check, policy, routing)
 * decide its fate exactly as for the pod's traffic. Answers are taken at
 * the pod's eth0 ingress by the exact flow the probe registered, reported
 * on a ring buffer and dropped: the pod never sees them.
 *
 * The probe's pod-side port comes from PI_PROBE_PORT_LO..HI, outside
 * Linux's ephemeral range (32768-60999), and the flow table holds the exact
 * 5-tuple only while the probe runs: a reply is taken only if it answers
 * that 5-tuple, so the pod's own flows are never touched unless the pod
 * uses the very same 5-tuple at the same moment.
 *
 * The device pair, the authorisations, the reply hooks and the flows exist
 * only while a command runs, so SIGINT, SIGTERM and SIGHUP do not end the
 * process: they set a flag that the wait loops check, and the command then
 * reports what it has and cleans up as on any other exit.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "cmds.h"
#include "inject.h"
#include "nl.h"
#include "podinject_rule.h"
#include "util.h"

enum verdict { V_PENDING, V_ANSWERED, V_REFUSED, V_POLICY, V_NOANSWER,
	       V_SELF };
static const char *const verdict_names[] = {
	"pending", "answered", "refused", "dropped-by-policy", "no-answer",
	"self",
};

struct probe {
	uint32_t id;
	const struct pi_pod_info *pod;
	int family;
	uint8_t proto;			/* IPPROTO_TCP, _UDP, _ICMP */
	struct pi_addr src, dst;
	uint16_t sport, dport;		/* host order; ICMP: id, seq */
	uint32_t isn;
	struct pi_flow_key key;
	long long sent_ns, reply_ns;
	enum verdict verdict;
	uint32_t deny_rule;		/* the rule the pod's policy picks */
	uint64_t deny_before;		/* its counter before sending */
	char to[64];
};

struct session {
	struct pi_node *n;
	struct inject_state s;
	struct pi_pod_info injector;		/* pi_probe as a pod, for the auth code */
	int tx_fd, tx_ifindex;
	bool made_dev;
	struct ring_buffer *rb;
	struct probe *probes;
	int nprobes;
	uint32_t first_id;
	struct pi_pod_info *pods;		/* the source pods authorised */
	int npods;
};

static long long mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ---- interruption ------------------------------------------------------- */

/* The signal that asked a running probe to stop, 0 while none did. */
static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig)
{
	stop_signal = sig;
}

static const int stop_signals[] = { SIGINT, SIGTERM, SIGHUP };

struct stop_handlers {
	struct sigaction old[3];
	bool set[3];
};

/* From here on the signals only set stop_signal. SA_RESTART keeps
 * netlink and map calls of the setup and the cleanup going; the ring
 * buffer's epoll_wait is never restarted, so the wait loops see the flag
 * at once. A signal the caller ignores (nohup, a background job of a
 * shell without job control) stays ignored. */
static void stop_handlers_set(struct stop_handlers *h)
{
	struct sigaction sa = { .sa_handler = on_stop_signal,
				.sa_flags = SA_RESTART };

	sigemptyset(&sa.sa_mask);
	stop_signal = 0;
	for (int i = 0; i < 3; i++) {
		h->set[i] = false;
		if (sigaction(stop_signals[i], NULL, &h->old[i]) ||
		    h->old[i].sa_handler == SIG_IGN)
			continue;
		h->set[i] = !sigaction(stop_signals[i], &sa, NULL);
	}
}

static void stop_handlers_restore(const struct stop_handlers *h)
{
	for (int i = 0; i < 3; i++)
		if (h->set[i])
			sigaction(stop_signals[i], &h->old[i], NULL);
}

/* "SIGINT" and so on, for the signal that stopped the command. */
static const char *stop_signal_name(void)
{
	static char buf[16];
	const char *abbrev = sigabbrev_np(stop_signal);

	snprintf(buf, sizeof(buf), "SIG%s", abbrev ? abbrev : "?");
	return buf;
}

/* Exit status of an interrupted command, called after its cleanup: a
 * runtime failure. The probes it sent have been reported on stdout, in
 * JSON with "interrupted" (so the error goes to stderr only there). */
static int report_interrupted(int sent, int planned)
{
	char msg[160];

	snprintf(msg, sizeof(msg),
		 "probe interrupted by %s: %d of %d probes sent; its device, authorisations and hooks are removed",
		 stop_signal_name(), sent, planned);
	fflush(stdout);		/* after the report, also into a pipe */
	if (json_output && sent)
		fprintf(stderr, "error: %s\n", msg);
	else
		p_err("%s", msg);
	return EXIT_RUNTIME;
}

/* ---- packets ---------------------------------------------------------- */

static uint32_t csum_add(uint32_t sum, const void *data, size_t len)
{
	const uint8_t *p = data;

	for (; len > 1; len -= 2, p += 2)
		sum += (p[0] << 8) | p[1];
	if (len)
		sum += p[0] << 8;
	return sum;
}

static uint16_t csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return htons(~sum & 0xffff);
}

/* Builds the probe's frame (or, with rst_seq, the TCP reset that ends an
 * answered probe). Returns its length. */
static int build_frame(const struct probe *pr, uint8_t *buf, bool rst,
		       uint32_t rst_seq)
{
	uint8_t *l4;
	int l3 = 14, l4len, off;
	uint32_t sum = 0;
	uint8_t proto = pr->proto;

	memset(buf, 0, 128);
	/* the head program writes the pod's own L2 header */
	buf[12] = pr->family == AF_INET ? 0x08 : 0x86;
	buf[13] = pr->family == AF_INET ? 0x00 : 0xdd;
	if (proto == IPPROTO_TCP)
		l4len = rst ? 20 : 24;
	else if (proto == IPPROTO_UDP)
		l4len = 8 + 16;
	else
		l4len = 8 + 16;
	if (pr->family == AF_INET) {
		uint8_t *ip = buf + l3;

		ip[0] = 0x45;
		*(uint16_t *)(ip + 2) = htons(20 + l4len);
		*(uint16_t *)(ip + 4) = htons(pr->id & 0xffff);
		ip[8] = 64;
		ip[9] = proto;
		memcpy(ip + 12, &pr->src.a[0], 4);
		memcpy(ip + 16, &pr->dst.a[0], 4);
		*(uint16_t *)(ip + 10) = csum_fold(csum_add(0, ip, 20));
		off = l3 + 20;
		if (proto != IPPROTO_ICMP) {
			sum = csum_add(0, ip + 12, 8);
			sum += proto + l4len;
		}
	} else {
		uint8_t *ip6 = buf + l3;

		if (proto == IPPROTO_ICMP)
			proto = IPPROTO_ICMPV6;
		ip6[0] = 0x60;
		*(uint16_t *)(ip6 + 4) = htons(l4len);
		ip6[6] = proto;
		ip6[7] = 64;
		memcpy(ip6 + 8, pr->src.a, 16);
		memcpy(ip6 + 24, pr->dst.a, 16);
		off = l3 + 40;
		sum = csum_add(0, ip6 + 8, 32);
		sum += proto + l4len;
	}
	l4 = buf + off;
	if (pr->proto == IPPROTO_TCP) {
		*(uint16_t *)l4 = htons(pr->sport);
		*(uint16_t *)(l4 + 2) = htons(pr->dport);
		*(uint32_t *)(l4 + 4) = htonl(rst ? rst_seq : pr->isn);
		l4[12] = (rst ? 5 : 6) << 4;
		l4[13] = rst ? 0x04 : 0x02;
		*(uint16_t *)(l4 + 14) = htons(rst ? 0 : 64240);
		if (!rst) {	/* MSS 1460 */
			l4[20] = 2;
			l4[21] = 4;
			*(uint16_t *)(l4 + 22) = htons(1460);
		}
		*(uint16_t *)(l4 + 16) = csum_fold(csum_add(sum, l4, l4len));
	} else if (pr->proto == IPPROTO_UDP) {
		*(uint16_t *)l4 = htons(pr->sport);
		*(uint16_t *)(l4 + 2) = htons(pr->dport);
		*(uint16_t *)(l4 + 4) = htons(l4len);
		snprintf((char *)l4 + 8, 16, "podinject %06u", pr->id % 1000000);
		*(uint16_t *)(l4 + 6) = csum_fold(csum_add(sum, l4, l4len));
	} else {
		l4[0] = pr->family == AF_INET ? 8 : 128;	/* echo request */
		*(uint16_t *)(l4 + 4) = htons(pr->sport);
		*(uint16_t *)(l4 + 6) = htons(pr->dport);
		snprintf((char *)l4 + 8, 16, "podinject %06u", pr->id % 1000000);
		*(uint16_t *)(l4 + 2) = csum_fold(csum_add(
			pr->family == AF_INET ? 0 : sum, l4, l4len));
	}
	return off + l4len;
}

static int send_frame(struct session *ss, const uint8_t *buf, int len)
{
	struct sockaddr_ll sll = {
		.sll_family = AF_PACKET,
		.sll_ifindex = ss->tx_ifindex,
		.sll_halen = ETH_ALEN,
	};

	return sendto(ss->tx_fd, buf, len, 0, (void *)&sll, sizeof(sll)) < 0 ?
	       -errno : 0;
}

/* ---- the pod's policy, as the node datapath evaluates it --------------- */

/* The deny rule that decides this probe in the pod's egress policy, or 0:
 * the pod's rules walked as pod_egress walks them, with the datapath's own
 * matcher, on the packet the probe sends. */
static uint32_t policy_deny_rule(const struct pi_node *n, const struct probe *pr)
{
	struct pi_policy_ref ref;
	uint32_t key = pr->pod->id * 2 + PI_DIR_EGRESS;
	uint8_t proto = pr->proto;
	bool ports = proto == IPPROTO_TCP || proto == IPPROTO_UDP;
	struct pi_rule r;

	if (pr->family == AF_INET6 && proto == IPPROTO_ICMP)
		proto = IPPROTO_ICMPV6;	/* what build_frame puts on the wire */
	if (bpf_map_lookup_elem(n->maps[M_POLICY_REFS], &key, &ref))
		return 0;
	for (uint32_t i = 0; i < ref.count; i++) {
		uint32_t slot = ref.start + i;

		if (bpf_map_lookup_elem(n->maps[M_RULES], &slot, &r))
			return 0;
		if (!pi_rule_matches(&r, pr->family, &pr->dst, proto, ports,
				     ports ? pr->dport : 0))
			continue;
		return r.action == PI_DENY ? r.id : 0;
	}
	return 0;
}

static uint64_t rule_packets(const struct pi_node *n, uint32_t id)
{
	int ncpu = libbpf_num_possible_cpus();
	struct pi_rule_stats *per = calloc(ncpu > 0 ? ncpu : 1, sizeof(*per));
	uint64_t sum = 0;

	if (per && !bpf_map_lookup_elem(n->maps[M_RULE_STATS], &id, per))
		for (int c = 0; c < ncpu; c++)
			sum += per[c].packets;
	free(per);
	return sum;
}

/* ---- session ----------------------------------------------------------- */

static int on_event(void *ctx, void *data, size_t len)
{
	struct session *ss = ctx;
	const struct pi_probe_event *ev = data;
	struct probe *pr;
	uint8_t buf[128];

	if (len < sizeof(*ev) || ev->probe_id < ss->first_id ||
	    ev->probe_id - ss->first_id >= (uint32_t)ss->nprobes)
		return 0;
	pr = &ss->probes[ev->probe_id - ss->first_id];
	if (pr->verdict != V_PENDING)
		return 0;
	pr->reply_ns = ev->ts_ns;
	switch (ev->kind) {
	case PI_PROBE_SYNACK:
		pr->verdict = V_ANSWERED;
		/* the server holds no state for a probe */
		send_frame(ss, buf, build_frame(pr, buf, true, ev->tcp_ack));
		break;
	case PI_PROBE_DATAGRAM:
	case PI_PROBE_ECHO_REPLY:
		pr->verdict = V_ANSWERED;
		break;
	default:
		pr->verdict = V_REFUSED;
		break;
	}
	return 0;
}

/* The head program's pin on pi_probe: "link_" + a device name no pod
 * can have, so never a pod's link_POD. */
static void probe_link_pin(const struct session *ss, char *buf, size_t len)
{
	snprintf(buf, len, "%s/link_" PI_PROBE_DEV, ss->s.dir);
}

static void session_close(struct session *ss)
{
	char path[PATH_MAX];
	int saved;

	for (int i = 0; i < ss->nprobes; i++)
		bpf_map_delete_elem(ss->s.maps[IM_PROBE_FLOWS],
				    &ss->probes[i].key);
	for (int i = 0; i < ss->npods; i++) {
		struct pi_inject_key k = {
			.injector_ifindex = ss->injector.ifindex,
		};

		if (ss->pods[i].flags & PI_POD_HAS_V4) {
			k.family = AF_INET;
			k.addr.a[0] = ss->pods[i].ip4;
			bpf_map_delete_elem(ss->s.maps[IM_AUTH], &k);
		}
		if (ss->pods[i].flags & PI_POD_HAS_V6) {
			k.family = AF_INET6;
			memcpy(k.addr.a, ss->pods[i].ip6, 16);
			bpf_map_delete_elem(ss->s.maps[IM_AUTH], &k);
		}
		reply_hook_release(ss->n, &ss->s, &ss->pods[i]);
		netkit_guard_sync(ss->n, &ss->s, &ss->pods[i]);
	}
	if (ss->rb)
		ring_buffer__free(ss->rb);
	if (ss->tx_fd >= 0)
		close(ss->tx_fd);
	if (ss->made_dev && !node_enter(ss->n, &saved)) {
		probe_link_pin(ss, path, sizeof(path));
		detach_prog(ss->injector.ifindex, PI_HOOK_INGRESS,
			    node_attach_mode(ss->n), PI_PRIO_HEAD, path);
		nl_link_del(ss->injector.ifindex);
		netns_restore(saved);
	}
	inject_close(&ss->s);
}

/* A probe killed without its cleanup (SIGKILL) leaves its device, which
 * stops every later probe until it is removed by hand, and its link pin,
 * authorisations and flows. Holding the device now, this probe is the only
 * one on the node: what an earlier one left goes. Injectors are pods or
 * the probe, so an authorisation of an injector that is no pod is one. */
static void forget_dead_probe(struct session *ss)
{
	struct pi_inject_key key, next, *prev = NULL;
	struct pi_flow_key fkey;
	char path[PATH_MAX];
	struct pi_pod_info pod;
	bool gone = false;

	probe_link_pin(ss, path, sizeof(path));
	unlink(path);
	while (!bpf_map_get_next_key(ss->s.maps[IM_AUTH], prev, &next)) {
		if (next.injector_ifindex != ss->injector.ifindex &&
		    bpf_map_lookup_elem(ss->n->maps[M_PODS],
					&next.injector_ifindex, &pod)) {
			bpf_map_delete_elem(ss->s.maps[IM_AUTH], &next);
			gone = true;
			prev = NULL;
			continue;
		}
		key = next;
		prev = &key;
	}
	if (gone)
		netkit_guards_sync_all(ss->n, &ss->s);
	while (!bpf_map_get_next_key(ss->s.maps[IM_PROBE_FLOWS], NULL, &fkey))
		if (bpf_map_delete_elem(ss->s.maps[IM_PROBE_FLOWS], &fkey))
			break;
}

/* Makes the probe device pair and the transmit socket, in the node's
 * namespace. */
static int probe_device(struct session *ss)
{
	char path[PATH_MAX];
	int saved, err, fd;

	err = node_enter(ss->n, &saved);
	if (err)
		return err;
	if (nl_link_index(PI_PROBE_DEV) > 0 ||
	    nl_link_index(PI_PROBE_TX_DEV) > 0) {
		netns_restore(saved);
		return -EBUSY;
	}
	err = nl_veth_create(PI_PROBE_DEV, PI_PROBE_TX_DEV, -1);
	if (err == -EEXIST)	/* another probe made it just now */
		err = -EBUSY;
	if (err)
		goto out;
	ss->made_dev = true;
	ss->injector.ifindex = nl_link_index(PI_PROBE_DEV);
	ss->tx_ifindex = nl_link_index(PI_PROBE_TX_DEV);
	forget_dead_probe(ss);
	snprintf(ss->injector.name, sizeof(ss->injector.name), "%s",
		 PI_PROBE_DEV);
	/* nothing but probes goes through it: keep the stack off it */
	sysctl_write("net/ipv6/conf/" PI_PROBE_DEV "/disable_ipv6", "1");
	sysctl_write("net/ipv6/conf/" PI_PROBE_TX_DEV "/disable_ipv6", "1");
	err = nl_link_set_up(ss->injector.ifindex);
	if (!err)
		err = nl_link_set_up(ss->tx_ifindex);
	if (!err)
		err = nl_link_wait_running(ss->injector.ifindex, 2000);
	if (!err)
		err = nl_link_wait_running(ss->tx_ifindex, 2000);
	if (err)
		goto out;
	probe_link_pin(ss, path, sizeof(path));
	err = attach_prog(ss->s.progs[IP_EGRESS], ss->injector.ifindex,
			  PI_HOOK_INGRESS, node_attach_mode(ss->n), true,
			  PI_PRIO_HEAD, path);
	if (err)
		goto out;
	fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		err = -errno;
		goto out;
	}
	ss->tx_fd = fd;
out:
	netns_restore(saved);
	return err;
}

static void session_open_err(const struct pi_node *n, int err)
{
	if (err == -EBUSY)
		p_err("device " PI_PROBE_DEV " exists in node '%s': another probe is running there, or one was killed and left it (no probe running: 'ip -n %s link del " PI_PROBE_DEV "')",
		      n->name, n->name);
	else
		p_err("cannot set up probing on node '%s': %s", n->name,
		      strerror(-err));
}

static int session_open(struct session *ss, struct pi_node *n,
			struct pi_pod_info *pods, int npods)
{
	struct pi_inject_key keys[2];
	int nkeys, err;

	memset(ss, 0, sizeof(*ss));
	ss->n = n;
	ss->tx_fd = -1;
	err = inject_open(n, &ss->s, true);
	if (err < 0)
		return err;
	err = probe_device(ss);
	if (err)
		goto fail;
	ss->pods = pods;
	for (int i = 0; i < npods; i++) {
		err = inject_authorise(n, &ss->s, &ss->injector, &pods[i], 1,
				       0, keys, &nkeys);
		if (!err)
			err = reply_hook_attach(n, &ss->s, &pods[i]);
		ss->npods = i + 1;
		if (err)
			goto fail;
	}
	ss->rb = ring_buffer__new(ss->s.maps[IM_PROBE_EVENTS], on_event, ss,
				  NULL);
	if (!ss->rb) {
		err = -errno;
		goto fail;
	}
	return 0;
fail:
	session_close(ss);
	return err;
}

static void probe_prepare(struct session *ss, struct probe *pr, uint32_t id,
			  const struct pi_pod_info *pod, int family,
			  const struct pi_addr *dst, uint8_t proto,
			  uint16_t port, uint16_t seq)
{
	uint32_t span = PI_PROBE_PORT_HI - PI_PROBE_PORT_LO + 1;

	memset(pr, 0, sizeof(*pr));
	pr->id = id;
	pr->pod = pod;
	pr->family = family;
	pr->proto = proto;
	pr->dst = *dst;
	if (family == AF_INET)
		pr->src.a[0] = pod->ip4;
	else
		memcpy(pr->src.a, pod->ip6, 16);
	if (proto == IPPROTO_ICMP) {
		pr->sport = PI_PROBE_PORT_LO + id % span;	/* echo id */
		pr->dport = seq;
	} else {
		pr->sport = PI_PROBE_PORT_LO + id % span;
		pr->dport = port;
	}
	pr->isn = (uint32_t)random();
	pr->key.family = family;
	pr->key.proto = family == AF_INET6 && proto == IPPROTO_ICMP ?
			IPPROTO_ICMPV6 : proto;
	pr->key.pod = pr->src;
	pr->key.dst = pr->dst;
	pr->key.pod_port = htons(pr->sport);
	pr->key.dst_port = htons(pr->dport);
	pi_fmt_addr(family, dst, -1, pr->to, sizeof(pr->to));
	(void)ss;
}

static int probe_send(struct session *ss, struct probe *pr)
{
	struct pi_probe_flow f = { .probe_id = pr->id };
	uint8_t buf[128];
	int len, err;

	pr->deny_rule = policy_deny_rule(ss->n, pr);
	if (pr->deny_rule)
		pr->deny_before = rule_packets(ss->n, pr->deny_rule);
	if (bpf_map_update_elem(ss->s.maps[IM_PROBE_FLOWS], &pr->key, &f, 0))
		return -errno;
	len = build_frame(pr, buf, false, 0);
	pr->sent_ns = mono_ns();
	err = send_frame(ss, buf, len);
	if (err)
		pr->verdict = V_NOANSWER;
	return err;
}

/* Takes answers until every probe in [from, to) has one, `until`, or a
 * stop signal. */
static void wait_answers(struct session *ss, int from, int to,
			 long long until)
{
	for (;;) {
		bool pending = false;
		long long left;

		for (int i = from; i < to && !pending; i++)
			pending = ss->probes[i].verdict == V_PENDING;
		left = (until - mono_ns()) / 1000000;
		if (!pending || left <= 0 || stop_signal)
			break;
		ring_buffer__poll(ss->rb, left > 50 ? 50 : (int)left);
	}
}

/* A probe without an answer was dropped by the pod's policy when the rule
 * that decides it counted a packet meanwhile; else nothing answered. */
static void finalize(struct session *ss, int from, int to)
{
	for (int i = from; i < to; i++) {
		struct probe *pr = &ss->probes[i];

		if (pr->verdict != V_PENDING)
			continue;
		if (pr->deny_rule &&
		    rule_packets(ss->n, pr->deny_rule) > pr->deny_before)
			pr->verdict = V_POLICY;
		else
			pr->verdict = V_NOANSWER;
	}
}

static double rtt_ms(const struct probe *pr)
{
	return (pr->reply_ns - pr->sent_ns) / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void print_probe(const struct probe *pr, int seq)
{
	bool rtt = pr->verdict == V_ANSWERED || pr->verdict == V_REFUSED;

	if (json_output) {
		json_obj_open(jw);
		json_ku64(jw, "seq", seq);
		json_kstr(jw, "from", pr->pod->name);
		json_kstr(jw, "to", pr->to);
		json_kstr(jw, "proto", pi_proto_name(pr->proto));
		if (pr->proto != IPPROTO_ICMP)
			json_ku64(jw, "port", pr->dport);
		json_kstr(jw, "verdict", verdict_names[pr->verdict]);
		if (pr->verdict == V_POLICY)
			json_ku64(jw, "rule", pr->deny_rule);
		json_key(jw, "rtt_ms");
		if (rtt)
			json_f64(jw, rtt_ms(pr));
		else
			json_null(jw);
		json_obj_close(jw);
		return;
	}
	if (pr->proto == IPPROTO_ICMP)
		printf("%-4d %s -> %s icmp: %s", seq, pr->pod->name, pr->to,
		       verdict_names[pr->verdict]);
	else
		printf("%-4d %s -> %s port %u %s: %s", seq, pr->pod->name,
		       pr->to, pr->dport, pi_proto_name(pr->proto),
		       verdict_names[pr->verdict]);
	if (pr->verdict == V_POLICY)
		printf(" rule %u", pr->deny_rule);
	if (rtt)
		printf(" rtt %.3f ms", rtt_ms(pr));
	printf("\n");
}

static void print_summary(const struct probe *pr, int n)
{
	int counts[6] = { 0 }, nr = 0, all = n;
	double *r = calloc(n ? n : 1, sizeof(double)), sum = 0;

	for (int i = 0; i < all; i++) {
		counts[pr[i].verdict]++;
		if (pr[i].verdict == V_SELF)
			n--;
		if (pr[i].verdict == V_ANSWERED || pr[i].verdict == V_REFUSED) {
			r[nr] = rtt_ms(&pr[i]);
			sum += r[nr++];
		}
	}
	qsort(r, nr, sizeof(double), cmp_double);
	if (json_output) {
		json_key(jw, "summary");
		json_obj_open(jw);
		json_ku64(jw, "sent", n);
		json_ku64(jw, "answered", counts[V_ANSWERED]);
		json_ku64(jw, "refused", counts[V_REFUSED]);
		json_ku64(jw, "dropped_by_policy", counts[V_POLICY]);
		json_ku64(jw, "no_answer", counts[V_NOANSWER]);
		json_key(jw, "loss_pct");
		json_f64(jw, n ? 100.0 * (counts[V_POLICY] +
					  counts[V_NOANSWER]) / n : 0);
		if (nr) {
			json_key(jw, "rtt_ms");
			json_obj_open(jw);
			json_key(jw, "min");
			json_f64(jw, r[0]);
			json_key(jw, "avg");
			json_f64(jw, sum / nr);
			json_key(jw, "p50");
			json_f64(jw, r[(nr - 1) / 2]);
			json_key(jw, "p99");
			json_f64(jw, r[(nr * 99 - 1) / 100]);
			json_obj_close(jw);
		}
		json_obj_close(jw);
	} else {
		printf("--- %d probes: %d answered, %d refused, %d dropped by policy, %d no answer, %.1f%% loss\n",
		       n, counts[V_ANSWERED], counts[V_REFUSED],
		       counts[V_POLICY], counts[V_NOANSWER],
		       n ? 100.0 * (counts[V_POLICY] + counts[V_NOANSWER]) / n : 0);
		if (nr)
			printf("rtt min/avg/p50/p99 = %.3f/%.3f/%.3f/%.3f ms\n",
			       r[0], sum / nr, r[(nr - 1) / 2],
			       r[(nr * 99 - 1) / 100]);
	}
	free(r);
}

static void print_run(const struct probe *probes, uint32_t n,
		      bool interrupted)
{
	if (json_output) {
		json_obj_open(jw);
		json_key(jw, "probes");
		json_arr_open(jw);
	}
	for (uint32_t i = 0; i < n; i++)
		print_probe(&probes[i], i + 1);
	if (json_output) {
		json_arr_close(jw);
		print_summary(probes, n);
		if (interrupted)
			json_kstr(jw, "interrupted", stop_signal_name());
		json_obj_close(jw);
		json_end(jw);
	} else {
		print_summary(probes, n);
	}
}

/* ---- commands ---------------------------------------------------------- */

static int probe_help(int argc, char **argv)
{
	fprintf(stderr,
		"Usage: podinject [-N NODE] [-j] probe --from POD --to ADDR[:PORT]\n"
		"                 [--proto tcp|udp|icmp] [--count N] [--interval MS]\n"
		"                 [--timeout MS] [--sport PORT]\n"
		"       podinject [-N NODE] [-j] probe matrix [--proto tcp|udp|icmp]\n"
		"                 [--port N] [--to ADDR ...] [--timeout MS]\n"
		"\n"
		"Probes leave POD's egress datapath as POD's own packets would;\n"
		"their answers are taken before they reach POD. Verdicts: answered,\n"
		"refused (RST or ICMP unreachable), dropped-by-policy (with the\n"
		"rule of POD's egress policy), no-answer. ADDR:PORT, [ADDR6]:PORT.\n"
		"Defaults: tcp when a port is given, else icmp; count 1; interval\n"
		"100 ms; timeout 1000 ms; the pod-side port (ICMP: echo id) from\n"
		"%d-%d unless --sport. matrix: every pod to every pod of the node\n"
		"and to each --to address, all at once.\n"
		"\n"
		"A probe runs on the node's device pair " PI_PROBE_DEV " <-> " PI_PROBE_TX_DEV ",\n"
		"one probe per node at a time. SIGINT, SIGTERM or SIGHUP stop it:\n"
		"the probes sent so far are reported (JSON: \"interrupted\"), its\n"
		"device, authorisations and hooks are removed, and it exits 1.\n"
		"Exit codes: 0 done (whatever the verdicts), 1 runtime failure or\n"
		"interrupted, 2 usage error.\n", PI_PROBE_PORT_LO,
		PI_PROBE_PORT_HI);
	return EXIT_OK;
}

static int parse_target(const char *s, int *family, struct pi_addr *a,
			int *port)
{
	char buf[80], *colon;
	int plen;
	uint32_t p;

	if (strlen(s) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, s);
	*port = -1;
	if (buf[0] == '[') {
		char *end = strchr(buf, ']');

		if (!end)
			return -EINVAL;
		*end = 0;
		if (end[1] == ':') {
			if (pi_parse_u32(end + 2, &p) || !p || p > 65535)
				return -EINVAL;
			*port = p;
		} else if (end[1]) {
			return -EINVAL;
		}
		memmove(buf, buf + 1, strlen(buf + 1) + 1);
	} else if ((colon = strchr(buf, ':')) && !strchr(colon + 1, ':')) {
		*colon = 0;
		if (pi_parse_u32(colon + 1, &p) || !p || p > 65535)
			return -EINVAL;
		*port = p;
	}
	if (pi_parse_prefix(buf, family, a, &plen) ||
	    plen != (*family == AF_INET ? 32 : 128))
		return -EINVAL;
	return 0;
}

static int probe_run(int argc, char **argv)
{
	const char *from = NULL, *to = NULL;
	uint32_t count = 1, interval = 100, timeout = 1000, sport = 0;
	int family, port = -1, proto = -1, err, ret = EXIT_RUNTIME;
	struct stop_handlers sh;
	bool interrupted = false;
	struct session ss;
	uint32_t sent = 0;
	struct pi_addr dst;
	struct pi_pod_info pod;
	struct pi_node n;
	uint8_t p8;

	while (argc > 0) {
		const char *k = argv[0], *v = argc > 1 ? argv[1] : NULL;

		if (!v)
			return usage_err("'%s' needs a value", k);
		if (!strcmp(k, "--from"))
			from = v;
		else if (!strcmp(k, "--to"))
			to = v;
		else if (!strcmp(k, "--proto")) {
			if (pi_parse_proto(v, &p8) || !p8)
				return usage_err("invalid --proto '%s': tcp, udp or icmp", v);
			proto = p8;
		} else if (!strcmp(k, "--count")) {
			if (pi_parse_u32(v, &count) || !count || count > 100000)
				return usage_err("invalid --count '%s'", v);
		} else if (!strcmp(k, "--interval")) {
			if (pi_parse_u32(v, &interval) || interval > 60000)
				return usage_err("invalid --interval '%s'", v);
		} else if (!strcmp(k, "--timeout")) {
			if (pi_parse_u32(v, &timeout) || !timeout || timeout > 600000)
				return usage_err("invalid --timeout '%s'", v);
		} else if (!strcmp(k, "--sport")) {
			if (pi_parse_u32(v, &sport) || !sport || sport > 65535)
				return usage_err("invalid --sport '%s'", v);
		} else {
			return usage_err("unknown argument '%s'", k);
		}
		argc -= 2;
		argv += 2;
	}
	if (!from || !to)
		return usage_err("probe needs --from POD and --to ADDR[:PORT]");
	if (!pi_valid_pod_name(from))
		return usage_err("invalid pod name '%s'", from);
	if (parse_target(to, &family, &dst, &port))
		return usage_err("invalid --to '%s': ADDR, ADDR:PORT or [ADDR6]:PORT", to);
	if (proto < 0)
		proto = port > 0 ? IPPROTO_TCP : IPPROTO_ICMP;
	if (proto != IPPROTO_ICMP && port <= 0)
		return usage_err("%s probes need a port (--to ADDR:PORT)",
				 pi_proto_name(proto));
	if (node_open_rw(&n))
		return EXIT_RUNTIME;
	if (pod_find(&n, from, &pod)) {
		p_err("no pod '%s' on node '%s'", from, n.name);
		node_close(&n);
		return EXIT_USAGE;
	}
	if (!(pod.flags & (family == AF_INET ? PI_POD_HAS_V4 : PI_POD_HAS_V6))) {
		p_err("pod '%s' has no IPv%d address", from,
		      family == AF_INET ? 4 : 6);
		node_close(&n);
		return EXIT_USAGE;
	}
	srandom(mono_ns());
	stop_handlers_set(&sh);
	err = session_open(&ss, &n, &pod, 1);
	if (err) {
		stop_handlers_restore(&sh);
		session_open_err(&n, err);
		node_close(&n);
		return EXIT_RUNTIME;
	}
	ss.probes = calloc(count, sizeof(*ss.probes));
	if (!ss.probes)
		goto out;
	ss.first_id = (uint32_t)random() & 0x7fffffff;
	ss.nprobes = count;
	for (uint32_t i = 0; i < count; i++) {
		struct probe *pr = &ss.probes[i];

		probe_prepare(&ss, pr, ss.first_id + i, &pod, family, &dst,
			      proto, port, i);
		if (sport) {
			pr->sport = sport;
			pr->key.pod_port = htons(sport);
		}
	}
	for (; sent < count && !stop_signal; sent++) {
		long long next = mono_ns() + interval * 1000000LL;

		probe_send(&ss, &ss.probes[sent]);
		/* answers of this and earlier probes arrive meanwhile */
		wait_answers(&ss, sent, sent + 1, next);
		while (mono_ns() < next && sent + 1 < count && !stop_signal)
			ring_buffer__poll(ss.rb, 10);
	}
	{
		long long until = mono_ns();

		for (uint32_t i = 0; i < sent; i++) {
			long long d = ss.probes[i].sent_ns + timeout * 1000000LL;

			if (d > until)
				until = d;
		}
		wait_answers(&ss, 0, sent, until);
		finalize(&ss, 0, sent);
	}
	/* A signal from here on does not take anything from the answer. */
	interrupted = stop_signal;
	ret = EXIT_OK;
out:
	/* Undone before anything is printed: a reader that goes away
	 * (SIGPIPE) cannot leave the device behind. */
	session_close(&ss);
	node_close(&n);
	stop_handlers_restore(&sh);
	if (ret == EXIT_OK && sent)
		print_run(ss.probes, sent, interrupted);
	free(ss.probes);
	if (interrupted)
		ret = report_interrupted(sent, count);
	return ret;
}

struct pod_list {
	struct pi_pod_info pods[PI_MAX_PODS];
	int n;
};

static int collect_pod(const struct pi_node *n, const struct pi_pod_info *pod,
		       void *ctx)
{
	struct pod_list *l = ctx;

	l->pods[l->n++] = *pod;
	return 0;
}

static const char *cell(const struct probe *pr, char *buf, size_t len)
{
	switch (pr->verdict) {
	case V_ANSWERED:
		snprintf(buf, len, "ok %.2fms", rtt_ms(pr));
		break;
	case V_POLICY:
		snprintf(buf, len, "policy#%u", pr->deny_rule);
		break;
	default:
		snprintf(buf, len, "%s", verdict_names[pr->verdict]);
	}
	return buf;
}

static void print_matrix(const struct pod_list *pl, int ncols, int proto,
			 uint32_t port, const struct probe *probes, int np,
			 bool interrupted)
{
	if (json_output) {
		json_obj_open(jw);
		json_kstr(jw, "proto", pi_proto_name(proto));
		if (port)
			json_ku64(jw, "port", port);
		json_key(jw, "results");
		json_arr_open(jw);
		for (int i = 0; i < np; i++)
			print_probe(&probes[i], i + 1);
		json_arr_close(jw);
		print_summary(probes, np);
		if (interrupted)
			json_kstr(jw, "interrupted", stop_signal_name());
		json_obj_close(jw);
		json_end(jw);
	} else {
		char buf[32];

		printf("%s%s%s matrix (rows: from, columns: to)\n%-12s",
		       pi_proto_name(proto), port ? " port " : "",
		       port ? (snprintf(buf, sizeof(buf), "%u", port), buf) : "",
		       "");
		for (int c = 0; c < ncols; c++)
			printf(" %-16s", c < pl->n ? pl->pods[c].name :
			       probes[c].to);
		printf("\n");
		for (int r = 0; r < pl->n; r++) {
			printf("%-12s", pl->pods[r].name);
			for (int c = 0; c < ncols; c++)
				printf(" %-16s", cell(&probes[r * ncols + c],
						      buf, sizeof(buf)));
			printf("\n");
		}
		print_summary(probes, np);
	}
}

static int probe_matrix(int argc, char **argv)
{
	static struct pod_list pl;
	struct pi_addr extra[16];
	int extra_family[16], nextra = 0, proto = IPPROTO_ICMP, ret = EXIT_RUNTIME;
	uint32_t port = 0, timeout = 1000;
	struct stop_handlers sh;
	bool interrupted = false;
	struct session ss;
	struct pi_node n;
	int ncols, np = 0, nsent = 0, nplanned = 0, err;
	uint8_t p8;

	while (argc > 0) {
		const char *k = argv[0], *v = argc > 1 ? argv[1] : NULL;
		int plen;

		if (!strcmp(k, "--to-pods")) {	/* the default, kept explicit */
			argc--;
			argv++;
			continue;
		}
		if (!v)
			return usage_err("'%s' needs a value", k);
		if (!strcmp(k, "--proto")) {
			if (pi_parse_proto(v, &p8) || !p8)
				return usage_err("invalid --proto '%s'", v);
			proto = p8;
		} else if (!strcmp(k, "--port")) {
			if (pi_parse_u32(v, &port) || !port || port > 65535)
				return usage_err("invalid --port '%s'", v);
		} else if (!strcmp(k, "--timeout")) {
			if (pi_parse_u32(v, &timeout) || !timeout || timeout > 600000)
				return usage_err("invalid --timeout '%s'", v);
		} else if (!strcmp(k, "--to")) {
			if (nextra >= 16)
				return usage_err("at most 16 --to");
			if (pi_parse_prefix(v, &extra_family[nextra],
					 &extra[nextra], &plen) ||
			    plen != (extra_family[nextra] == AF_INET ? 32 : 128))
				return usage_err("invalid address '%s'", v);
			nextra++;
		} else {
			return usage_err("unknown argument '%s'", k);
		}
		argc -= 2;
		argv += 2;
	}
	if (proto != IPPROTO_ICMP && !port)
		return usage_err("%s probes need --port", pi_proto_name(proto));
	if (node_open_rw(&n))
		return EXIT_RUNTIME;
	pl.n = 0;
	pod_for_each(&n, collect_pod, &pl);
	for (int i = 0; i < pl.n; i++)
		if (!(pl.pods[i].flags & PI_POD_HAS_V4)) {
			p_err("probe matrix needs IPv4 on every pod ('%s' has none)",
			      pl.pods[i].name);
			node_close(&n);
			return EXIT_USAGE;
		}
	if (pl.n < 1) {
		p_err("node '%s' has no pods", n.name);
		node_close(&n);
		return EXIT_USAGE;
	}
	srandom(mono_ns());
	stop_handlers_set(&sh);
	err = session_open(&ss, &n, pl.pods, pl.n);
	if (err) {
		stop_handlers_restore(&sh);
		session_open_err(&n, err);
		node_close(&n);
		return EXIT_RUNTIME;
	}
	ncols = pl.n + nextra;
	ss.probes = calloc(pl.n * ncols, sizeof(*ss.probes));
	if (!ss.probes)
		goto out;
	ss.first_id = (uint32_t)random() & 0x7fffffff;
	ss.nprobes = pl.n * ncols;
	for (int r = 0; r < pl.n; r++) {
		for (int c = 0; c < ncols; c++) {
			struct pi_addr dst = { 0 };
			int fam = AF_INET;

			if (c < pl.n)
				dst.a[0] = pl.pods[c].ip4;
			else {
				dst = extra[c - pl.n];
				fam = extra_family[c - pl.n];
			}
			probe_prepare(&ss, &ss.probes[np], ss.first_id + np,
				      &pl.pods[r], fam, &dst, proto, port, np);
			if (fam == AF_INET6 && !(pl.pods[r].flags & PI_POD_HAS_V6))
				ss.probes[np].verdict = V_NOANSWER;
			/* a pod answers itself on its loopback: nothing of
			 * that crosses its datapath */
			if (c == r)
				ss.probes[np].verdict = V_SELF;
			np++;
		}
	}
	/* all at once: the pairs are independent flows */
	for (int i = 0; i < np; i++) {
		if (ss.probes[i].verdict != V_PENDING)
			continue;
		nplanned++;
		if (stop_signal)	/* before the first: send none */
			continue;
		probe_send(&ss, &ss.probes[i]);
		nsent++;
	}
	wait_answers(&ss, 0, np, mono_ns() + timeout * 1000000LL);
	finalize(&ss, 0, np);
	interrupted = stop_signal;
	ret = EXIT_OK;
out:
	/* Undone before anything is printed, as in probe_run. */
	session_close(&ss);
	node_close(&n);
	stop_handlers_restore(&sh);
	if (ret == EXIT_OK && nsent)
		print_matrix(&pl, ncols, proto, port, ss.probes, np,
			     interrupted);
	free(ss.probes);
	if (interrupted)
		ret = report_interrupted(nsent, nplanned);
	return ret;
}

int do_probe(int argc, char **argv)
{
	if (argc > 0 && !strcmp(argv[0], "matrix"))
		return probe_matrix(argc - 1, argv + 1);
	if (argc > 0 && is_prefix(argv[0], "help"))
		return probe_help(argc, argv);
	if (argc < 1) {
		p_err("probe needs --from POD --to ADDR");
		probe_help(0, NULL);
		return EXIT_USAGE;
	}
	return probe_run(argc, argv);
}
