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
#include <sys/file.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "cls.h"
#include "inject.h"
#include "lib.h"
#include "percpu.h"
#include "nl.h"
#include "podinject_rule.h"
#include "podinject_util.h"

#define V_PENDING	PI_PROBE_PENDING
#define V_ANSWERED	PI_PROBE_ANSWERED
#define V_REFUSED	PI_PROBE_REFUSED
#define V_POLICY	PI_PROBE_POLICY
#define V_NOANSWER	PI_PROBE_NOANSWER
#define V_SELF		PI_PROBE_SELF
#define V_UNSENT	PI_PROBE_UNSENT
#define V_UNREPORTED	PI_PROBE_UNREPORTED

struct probe {
	uint32_t id;
	const struct pi_pod_info *pod;
	int family;
	uint8_t proto;			/* IPPROTO_TCP, _UDP, _ICMP */
	struct pi_addr src, dst;
	uint16_t sport, dport;		/* host order; ICMP: id, seq */
	uint32_t isn;
	struct pi_flow_key key;
	long long sent_ns;		/* user space: the wait's start */
	uint64_t injected_ns, reply_ns;	/* the kernel's: the RTT's ends */
	enum pi_probe_verdict verdict;
	uint32_t answer_kind;		/* enum pi_probe_reply of its answer */
	uint32_t answer_icmp;		/* pi_probe_event.icmp of its answer */
	uint32_t deny_rule;		/* the rule the pod's policy picks */
	uint64_t deny_before;		/* its counter before sending */
	char to[64];
};

struct session {
	struct pi_node *n;
	struct inject_state s;
	struct pi_pod_info injector;		/* pi_probe as a pod, for the auth code */
	int tx_fd, tx_ifindex;
	int hold_fd;			/* the node's probe hold (probe_hold) */
	struct stat node_dir;		/* the node's pin directory, at the start */
	long long alive_at;		/* sources_alive's last look */
	bool made_dev;
	struct ring_buffer *rb;
	struct probe *probes;
	int nprobes;
	uint32_t first_id;
	struct pi_pod_info *pods;		/* the source pods authorised */
	struct stat *pod_ns;			/* their namespaces, then */
	int npods;
	uint64_t rng;			/* the session's own generator */
	const volatile int *stop;	/* the caller's: send no more */
	const volatile int *stop_wait;	/* the caller's: await nothing more */
};

static bool stopped(const struct session *ss)
{
	return ss->stop && *ss->stop;
}

static bool wait_stopped(const struct session *ss)
{
	return ss->stop_wait && *ss->stop_wait;
}

/* probe ports (ICMP: echo ids) there are: probes ids this far apart share
 * one */
#define PROBE_PORT_SPAN	(PI_PROBE_PORT_HI - PI_PROBE_PORT_LO + 1)

/* The end of the wait for every answer still due: the last probe's
 * timeout (wait_answers cuts it short after a stop). */
static long long answers_due(const struct session *ss, int from, int to,
			     uint32_t timeout_ms)
{
	long long until = pi_mono_ns();

	for (int i = from; i < to; i++) {
		long long d = ss->probes[i].sent_ns + timeout_ms * 1000000LL;

		if (ss->probes[i].sent_ns && d > until)
			until = d;
	}
	return until;
}

/* Probe ids and TCP sequence numbers need only differ from run to run:
 * a generator of the session's own (splitmix64, seeded from the kernel),
 * so that the caller's random() sequence is left as it was. */
static int rng_seed(struct session *ss)
{
	ssize_t got = getrandom(&ss->rng, sizeof(ss->rng), 0);

	if (got < 0)
		return -errno;
	return got == sizeof(ss->rng) ? 0 : -EIO;
}

static uint32_t rng_next(struct session *ss)
{
	uint64_t z = (ss->rng += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return (uint32_t)((z ^ (z >> 31)) >> 32);
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
/* Header fields sit wherever the frame puts them: stored bytewise, as the
 * frame has no alignment to offer. */
static void put16(uint8_t *at, uint16_t v)
{
	memcpy(at, &v, 2);
}

static void put32(uint8_t *at, uint32_t v)
{
	memcpy(at, &v, 4);
}

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
		put16(ip + 2, htons(20 + l4len));
		put16(ip + 4, htons(pr->id & 0xffff));
		ip[8] = 64;
		ip[9] = proto;
		memcpy(ip + 12, &pr->src.a[0], 4);
		memcpy(ip + 16, &pr->dst.a[0], 4);
		put16(ip + 10, csum_fold(csum_add(0, ip, 20)));
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
		put16(ip6 + 4, htons(l4len));
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
		put16(l4, htons(pr->sport));
		put16(l4 + 2, htons(pr->dport));
		put32(l4 + 4, htonl(rst ? rst_seq : pr->isn));
		l4[12] = (rst ? 5 : 6) << 4;
		l4[13] = rst ? 0x04 : 0x02;
		put16(l4 + 14, htons(rst ? 0 : 64240));
		if (!rst) {	/* MSS 1460 */
			l4[20] = 2;
			l4[21] = 4;
			put16(l4 + 22, htons(1460));
		}
		put16(l4 + 16, csum_fold(csum_add(sum, l4, l4len)));
	} else if (pr->proto == IPPROTO_UDP) {
		put16(l4, htons(pr->sport));
		put16(l4 + 2, htons(pr->dport));
		put16(l4 + 4, htons(l4len));
		snprintf((char *)l4 + 8, 16, "podinject %06u", pr->id % 1000000);
		put16(l4 + 6, csum_fold(csum_add(sum, l4, l4len)));
	} else {
		l4[0] = pr->family == AF_INET ? 8 : 128;	/* echo request */
		put16(l4 + 4, htons(pr->sport));
		put16(l4 + 6, htons(pr->dport));
		snprintf((char *)l4 + 8, 16, "podinject %06u", pr->id % 1000000);
		put16(l4 + 2, csum_fold(csum_add(
			pr->family == AF_INET ? 0 : sum, l4, l4len)));
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
 * the datapath's classifier lookup (lib/cls.c) on the maps pod_egress
 * reads, for the packet the probe sends. */
static uint32_t policy_deny_rule(const struct pi_node *n, const struct probe *pr)
{
	struct cls_maps m = policy_cls_maps(n);
	struct pi_policy_ref ref;
	uint32_t key = pr->pod->id * 2 + PI_DP_DIR_EGRESS, slot;
	uint8_t proto = pr->proto;
	bool ports = proto == IPPROTO_TCP || proto == IPPROTO_UDP;
	struct pi_dp_addr dst = addr_to_dp(&pr->dst);
	struct pi_dp_rule r;
	uint32_t pos;
	int found;

	if (pr->family == AF_INET6 && proto == IPPROTO_ICMP)
		proto = IPPROTO_ICMPV6;	/* what build_frame puts on the wire */
	if (bpf_map_lookup_elem(n->maps[M_POLICY_REFS], &key, &ref) ||
	    !ref.count)
		return 0;
	found = cls_lookup_maps(&m, ref.start, pr->family, &dst, proto,
				ports, ports ? pr->dport : 0, &pos);
	if (found < 0)
		pr_warn("pod '%s': cannot read its policy (%s); a drop by it is reported as no answer",
			pr->pod->name, strerror(-found));
	if (found <= 0)
		return 0;
	slot = ref.start + pos;
	if (bpf_map_lookup_elem(n->maps[M_RULES], &slot, &r))
		return 0;
	return r.action == PI_DP_DENY ? r.id : 0;
}

static uint64_t rule_packets(const struct pi_node *n, uint32_t id)
{
	struct pi_rule_stats sum;

	percpu_sum(n->maps[M_RULE_STATS], &id, &sum, sizeof(sum));
	return sum.packets;
}

/* ---- session ----------------------------------------------------------- */

static int on_event(void *ctx, void *data, size_t len)
{
	struct session *ss = ctx;
	const struct pi_probe_event *ev = data;
	struct probe *pr;
	uint8_t buf[128];
	bool stale;

	if (len < sizeof(*ev) || ev->probe_id < ss->first_id ||
	    ev->probe_id - ss->first_id >= (uint32_t)ss->nprobes)
		return 0;
	pr = &ss->probes[ev->probe_id - ss->first_id];
	if (ev->kind == PI_PROBE_SENT) {
		/* the first: a second one is the RST after the answer */
		if (!pr->injected_ns)
			pr->injected_ns = ev->ts_ns;
		return 0;
	}
	/* With --sport, probes one after the other share a flow: a SYN-ACK,
	 * RST or ICMP error about another SYN (tcp_ack: its ISN + 1; 0 where
	 * it names none) answers an earlier probe, late (after its
	 * timeout). Not this one's answer. A SYN-ACK's half-open connection
	 * is reset whoever it answers, as an answered probe's is: the server
	 * holds no state for a probe, even one that gave up waiting. */
	stale = ev->tcp_ack && ev->tcp_ack != pr->isn + 1;
	if (pr->verdict != V_PENDING || stale) {
		if (ev->kind == PI_PROBE_SYNACK)
			send_frame(ss, buf, build_frame(pr, buf, true,
							ev->tcp_ack));
		return 0;
	}
	pr->reply_ns = ev->ts_ns;
	pr->answer_kind = ev->kind;
	pr->answer_icmp = ev->icmp;
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

/* The namespace a pod's hooks live in, by identity: a path may name
 * another namespace later. */
static int pod_ns_stat(const struct pi_pod_info *pod, struct stat *st)
{
	int fd = pod_netns_open(pod), err = 0;

	if (fd < 0)
		return fd;
	if (fstat(fd, st))
		err = -errno;
	close(fd);
	return err;
}

/* Whether the node's pod at the ifindex session pod `i` had is still that
 * pod. The wait for answers runs without the node's lock: the pod may
 * have been deleted meanwhile, and its ifindex, id, name or namespace's
 * name taken by another pod, whose hooks and guards are not the probe's
 * to remove. */
static bool pod_unchanged(const struct session *ss, int i)
{
	const struct pi_pod_info *was = &ss->pods[i];
	struct pi_pod_info now;
	struct stat st;

	if (pod_by_ifindex(ss->n, was->ifindex, &now))
		return false;
	/* (PI_POD_XDP may change under a pod: its devices, namespace and
	 * the reply hook stay) */
	if (now.id != was->id || now.peer_ifindex != was->peer_ifindex ||
	    (now.flags ^ was->flags) & ~PI_POD_XDP || now.ip4 != was->ip4 ||
	    memcmp(now.ip6, was->ip6, sizeof(now.ip6)) ||
	    memcmp(now.pod_mac, was->pod_mac, 6) ||
	    memcmp(now.host_mac, was->host_mac, 6) ||
	    strcmp(now.name, was->name) || strcmp(now.netns, was->netns) ||
	    strcmp(now.hostdev, was->hostdev) ||
	    strcmp(now.attach_id, was->attach_id))
		return false;
	return !pod_ns_stat(&now, &st) && st.st_dev == ss->pod_ns[i].st_dev &&
	       st.st_ino == ss->pod_ns[i].st_ino;
}

/* Removes the probe's authorisation `k` when it is still the one the
 * probe wrote: as the source pod `pod`. */
static void auth_forget(const struct session *ss, struct pi_inject_key *k,
			const struct pi_pod_info *pod)
{
	struct pi_inject_target t;

	if (!bpf_map_lookup_elem(ss->s.maps[IM_AUTH], k, &t) &&
	    t.target_ifindex == pod->ifindex)
		bpf_map_delete_elem(ss->s.maps[IM_AUTH], k);
}

/* A source pod deleted while the probe waited took its device and, with
 * it, the reply hook on it; its removal dropped the authorisations for
 * it too. Left is the hook's pin, named by the ifindex: removed without
 * touching any device, unless another pod holds that ifindex now (then
 * the name is that pod's). */
static void forget_gone_pod(const struct session *ss,
			    const struct pi_pod_info *gone)
{
	struct pi_pod_info other;

	if (!pod_by_ifindex(ss->n, gone->ifindex, &other))
		return;
	reply_hook_unpin(&ss->s, gone);
}

/* ---- one probe at a time per node -------------------------------------
 *
 * A node has one probe device pair and one probe event ring (a ring has
 * one read position: two readers would each take the other's answers), so
 * its probes run one after another. A probe holds PROBE_RUN_DIR/<the
 * node's pin directory name> flock()ed from before it looks at the pods
 * until its state is gone; another waits for it as long as it would for
 * the node's lock (-W), with the node's lock let go meanwhile: the running
 * probe takes that lock back to clean up. The file says "PID dev" from
 * just before the holder makes its device until just after it removed
 * it, so a probe that finds the device, holds the file and reads the mark
 * knows the device is a killed probe's and removes it. A device without
 * the mark is someone else's (a probe of a build before the hold, still
 * running during an upgrade, or a device made by hand): left alone. */
#define PROBE_RUN_DIR		PI_RUN_DIR "/probe"
#define PROBE_HOLD_POLL_US	20000

static void probe_hold_path(const struct pi_node *n, char *buf, size_t len)
{
	run_path("probe", n->pin_dir, buf, len);
}

/* The holder's pid as written ("?" if none) and whether it marked a
 * device of its own. */
static bool hold_read(int fd, char *pid, size_t len)
{
	char buf[64];
	ssize_t got = pread(fd, buf, sizeof(buf) - 1, 0);

	buf[got > 0 ? got : 0] = '\0';
	snprintf(pid, len, "%.*s", (int)strspn(buf, "0123456789"), buf);
	if (!*pid)
		snprintf(pid, len, "?");
	return strstr(buf, " dev") != NULL;
}

static int hold_write(int fd, bool dev)
{
	char buf[64];
	int len = snprintf(buf, sizeof(buf), "%d%s\n", (int)getpid(),
			   dev ? " dev" : "");

	errno = 0;
	if (ftruncate(fd, 0) || pwrite(fd, buf, len, 0) != len)
		return errno ? -errno : -EIO;
	return 0;
}

/* Takes the node's probe hold, waiting up to timeout_ms (or until *stop)
 * for a running probe: the descriptor in *out, 0; -EBUSY (said) when the
 * other probe outlasts the wait, -EINTR when stopped. */
static int probe_hold(struct pi_node *n, int timeout_ms,
		      const volatile int *stop, int *out)
{
	long long deadline = pi_mono_ns() + (timeout_ms > 0 ? timeout_ms : 0) *
				 1000000LL;
	char path[PATH_MAX], pid[24];
	bool waited = false;
	int fd, err;

	*out = -1;
	err = mkdir_p(PROBE_RUN_DIR);
	if (err) {
		pr_err("cannot make %s: %s", PROBE_RUN_DIR, strerror(-err));
		return err;
	}
	probe_hold_path(n, path, sizeof(path));
reopen:
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		err = -errno;
		pr_err("cannot open %s: %s", path, strerror(-err));
		return err;
	}
	while (flock(fd, LOCK_EX | LOCK_NB)) {
		err = -errno;
		if (err != -EWOULDBLOCK && err != -EINTR) {
			pr_err("cannot lock %s: %s", path, strerror(-err));
			goto fail;
		}
		hold_read(fd, pid, sizeof(pid));
		if (!waited) {
			pr_info("node '%s': waiting for the probe running there (pid %s): a node runs one probe at a time",
				n->name, pid);
			/* the running probe needs it to clean up */
			err = node_unlock(n);
			if (err)
				goto fail;
			waited = true;
		}
		if (stop && *stop) {
			err = -EINTR;
			goto fail;
		}
		if (pi_mono_ns() >= deadline) {
			pr_err("node '%s': another probe (pid %s) still runs there after %d ms; a node runs one probe at a time (-W MS waits longer)",
			       n->name, pid, timeout_ms > 0 ? timeout_ms : 0);
			err = -EBUSY;
			goto fail;
		}
		usleep(PROBE_HOLD_POLL_US);
	}
	/* `node down` removes the file as it takes it: one held after that
	 * is no longer the node's hold (a probe opening the path now makes
	 * a new one), so the wait goes on with that */
	{
		struct stat st;

		if (!fstat(fd, &st) && !st.st_nlink) {
			close(fd);
			goto reopen;
		}
	}
	if (waited) {
		long long left = (deadline - pi_mono_ns()) / 1000000;

		err = node_relock(n, left > 0 ? (int)left : 0);
		if (err) {
			pr_err(err == -ENOENT ? "node '%s' was taken down while the probe waited" :
			       "node '%s': cannot take its lock back after the wait for the other probe: %s",
			       n->name, strerror(-err));
			goto fail;
		}
	}
	/* a killed holder's mark stays for probe_device to read */
	if (!hold_read(fd, pid, sizeof(pid))) {
		err = hold_write(fd, false);
		if (err)
			goto fail;
	}
	*out = fd;
	return 0;
fail:
	close(fd);
	return err;
}

/* The probe's device pair, in the current namespace: removed; the
 * ifindex pi_probe had, or 0. */
static int probe_pair_del(void)
{
	int idx = nl_link_index(PI_PROBE_DEV), tx;

	if (idx > 0)
		nl_link_del(idx);
	tx = nl_link_index(PI_PROBE_TX_DEV);
	if (tx > 0)
		nl_link_del(tx);
	return idx > 0 ? idx : 0;
}

/* `node down`, under the node's lock: a killed probe's device pair (its
 * hold marked, nobody holding it) would outlive the node in a namespace
 * the node adopted; it goes, and the hold with it. A running probe removes
 * its own as it ends (it finds the node gone); a pair without the mark is
 * not the node's to remove. */
void probe_forget_node(struct pi_node *n)
{
	char path[PATH_MAX], pid[24];
	int fd, saved;

	probe_hold_path(n, path, sizeof(path));
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return;
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		close(fd);
		return;
	}
	if (hold_read(fd, pid, sizeof(pid)) && !node_enter(n, &saved)) {
		probe_pair_del();
		netns_restore(saved);
	}
	unlink(path);
	close(fd);
}

/* A killed probe's device pair (the hold says it made one and is gone),
 * in the node's namespace: removed, and its head's records with it. */
static void remove_dead_device(struct session *ss)
{
	int idx = probe_pair_del();
	char pid[24];

	hold_read(ss->hold_fd, pid, sizeof(pid));
	if (idx > 0)
		head_roles_clear(&ss->s, idx);
	pr_info("node '%s': removed the probe device a killed probe (pid %s) left",
		ss->n->name, pid);
}

static void session_close(struct session *ss)
{
	char path[PATH_MAX];
	int saved;

	for (int i = 0; i < ss->nprobes; i++)
		bpf_map_delete_elem(ss->s.maps[IM_PROBE_FLOWS],
				    &ss->probes[i].key);
	for (int i = 0; i < ss->npods; i++) {
		const struct pi_pod_info *pod = &ss->pods[i];
		struct pi_inject_key k = {
			.injector_ifindex = ss->injector.ifindex,
		};

		if (pod->flags & PI_POD_HAS_V4) {
			k.family = AF_INET;
			k.addr.a[0] = pod->ip4;
			auth_forget(ss, &k, pod);
		}
		if (pod->flags & PI_POD_HAS_V6) {
			k.family = AF_INET6;
			memcpy(k.addr.a, pod->ip6, 16);
			auth_forget(ss, &k, pod);
		}
		if (!pod_unchanged(ss, i)) {
			forget_gone_pod(ss, pod);
			continue;
		}
		reply_hook_release(ss->n, &ss->s, pod);
		netkit_guard_sync(ss->n, &ss->s, pod);
	}
	if (ss->rb)
		ring_buffer__free(ss->rb);
	if (ss->tx_fd >= 0)
		close(ss->tx_fd);
	if (ss->made_dev && !node_enter(ss->n, &saved)) {
		probe_link_pin(ss, path, sizeof(path));
		detach_prog(ss->injector.ifindex, PI_HOOK_INGRESS,
			    node_attach_mode(ss->n), PI_PRIO_HEAD, path);
		if (!nl_link_del(ss->injector.ifindex))
			hold_write(ss->hold_fd, false);
		head_roles_clear(&ss->s, ss->injector.ifindex);
		netns_restore(saved);
	}
	if (ss->hold_fd >= 0)
		close(ss->hold_fd);	/* the next probe's turn */
	ss->hold_fd = -1;
	inject_close(&ss->s);
	free(ss->pod_ns);
	ss->pod_ns = NULL;
}

/* A probe killed without its cleanup (SIGKILL) leaves its device (removed
 * by the next probe, remove_dead_device), its link pin, authorisations and
 * flows. Holding the device now, this probe is the only one on the node:
 * what an earlier one left goes. Injectors are pods or the probe, so an
 * authorisation of an injector that is no pod is one. */
static void forget_dead_probe(struct session *ss)
{
	struct pi_inject_key key, next, *prev = NULL;
	struct pi_pod_info pod, *pods = NULL;
	struct pi_flow_key fkey;
	char path[PATH_MAX];
	bool gone = false, dead;
	int npods;

	probe_link_pin(ss, path, sizeof(path));
	dead = !unlink(path);
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
	/* and the reply hooks it put on its source pods (a pod's proxy
	 * rule keeps its own): else each stayed until the pod was probed
	 * again or deleted */
	if (!dead && !gone)
		return;
	npods = pi_pod_list(ss->n, &pods);
	for (int i = 0; i < npods; i++)
		reply_hook_release(ss->n, &ss->s, &pods[i]);
	free(pods);
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
		char pid[24];

		if (!hold_read(ss->hold_fd, pid, sizeof(pid))) {
			netns_restore(saved);
			return -EBUSY;
		}
		remove_dead_device(ss);
	}
	/* marked before it exists: a kill between leaves no device
	 * without the mark */
	err = hold_write(ss->hold_fd, true);
	if (!err)
		err = nl_veth_create(PI_PROBE_DEV, PI_PROBE_TX_DEV, -1);
	if (err == -EEXIST)	/* made by someone else just now */
		err = -EBUSY;
	if (err) {
		hold_write(ss->hold_fd, false);
		goto out;
	}
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
	/* no record: the head makes every check here (its grants come and
	 * go with the probed pods; a probe's few packets do not need the
	 * shortcut), whatever a device gone before left at this ifindex */
	head_roles_clear(&ss->s, ss->injector.ifindex);
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
		pr_err("device " PI_PROBE_DEV " exists in node '%s' and no probe of this podinject holds it: one of an earlier build runs there, or was killed and left it, or it was made by hand (none running: 'ip -n %s link del " PI_PROBE_DEV "')",
		      n->name, n->name);
	else
		pr_err("cannot set up probing on node '%s': %s", n->name,
		      strerror(-err));
}

/* The session owns hold_fd (probe_hold's) from here, on failure too. */
static int session_open(struct session *ss, struct pi_node *n, int hold_fd,
			struct pi_pod_info *pods, int npods)
{
	struct pi_inject_key added[2], had_k[2];
	struct pi_inject_target had_t[2];
	struct inject_undo u = { .added = added, .had_k = had_k,
				 .had_t = had_t };
	int err;

	memset(ss, 0, sizeof(*ss));
	ss->n = n;
	ss->tx_fd = -1;
	ss->hold_fd = hold_fd;
	err = rng_seed(ss);
	if (!err)
		err = inject_open(n, &ss->s, true);
	if (err < 0) {
		close(hold_fd);
		return err;
	}
	err = probe_device(ss);
	if (err)
		goto fail;
	ss->pods = pods;
	ss->pod_ns = calloc(npods, sizeof(*ss->pod_ns));
	if (!ss->pod_ns) {
		err = -ENOMEM;
		goto fail;
	}
	for (int i = 0; i < npods; i++) {
		err = pod_ns_stat(&pods[i], &ss->pod_ns[i]);
		if (!err)
			err = inject_authorise(n, &ss->s, &ss->injector, &pods[i], 1,
				       0, &u);
		if (!err)
			err = reply_hook_attach(n, &ss->s, &pods[i]);
		ss->npods = i + 1;
		if (err)
			goto fail;
	}
	if (stat(n->pin_dir, &ss->node_dir)) {
		err = -errno;
		goto fail;
	}
	ss->rb = ring_buffer__new(ss->s.maps[IM_PROBE_EVENTS], on_event, ss,
				  NULL);
	if (!ss->rb) {
		err = -errno;
		goto fail;
	}
	/* What an earlier probe left unread (one killed in an answer flood
	 * leaves the ring full) goes before this one sends: else its
	 * injection's event and its first answers found no room */
	ring_buffer__consume(ss->rb);
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
	uint32_t span = PROBE_PORT_SPAN;

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
	/* never all ones: an answer's ack of 0 means it names no SYN */
	do
		pr->isn = rng_next(ss);
	while (pr->isn == UINT32_MAX);
	pr->key.family = family;
	pr->key.proto = family == AF_INET6 && proto == IPPROTO_ICMP ?
			IPPROTO_ICMPV6 : proto;
	pr->key.pod = addr_to_dp(&pr->src);
	pr->key.dst = addr_to_dp(&pr->dst);
	pr->key.pod_port = htons(pr->sport);
	pr->key.dst_port = htons(pr->dport);
	pi_fmt_addr(family, dst, -1, pr->to, sizeof(pr->to));
}

static int probe_send(struct session *ss, struct probe *pr)
{
	struct pi_probe_flow f = { .probe_id = pr->id };
	uint8_t buf[128];
	int len, err;

	pr->deny_rule = policy_deny_rule(ss->n, pr);
	if (pr->deny_rule)
		pr->deny_before = rule_packets(ss->n, pr->deny_rule);
	if (bpf_map_update_elem(ss->s.maps[IM_PROBE_FLOWS], &pr->key, &f, 0)) {
		err = -errno;
		pr_err("cannot register the probe from '%s' to %s: %s",
		       pr->pod->name, pr->to, strerror(-err));
		return err;
	}
	len = build_frame(pr, buf, false, 0);
	pr->sent_ns = pi_mono_ns();
	err = send_frame(ss, buf, len);
	if (err)
		pr_err("cannot send the probe from '%s' to %s on " PI_PROBE_TX_DEV ": %s",
		       pr->pod->name, pr->to, strerror(-err));
	/* What came meanwhile is taken now: sends back to back (no
	 * interval, a matrix) would otherwise fill the ring buffer before
	 * the first wait, and the datapath drops an answer it cannot tell
	 * (the probe then "no answer", and nothing says why). */
	ring_buffer__consume(ss->rb);
	return err;
}

/* Takes answers until every probe in [from, to) has one, `until`, or the
 * caller's stop_wait; with `or_stop`, its stop too (a pause between two
 * sends, which a stop ends at once). Without, a stop, whenever it comes,
 * brings `until` to PI_PROBE_STOP_WAIT_MS from when it is seen: a long
 * timeout does not hold a stop up. */
static void wait_answers(struct session *ss, int from, int to,
			 long long until, bool or_stop)
{
	bool capped = false;

	for (;;) {
		bool pending = false;
		long long left;

		if (!capped && stopped(ss)) {
			long long cap = pi_mono_ns() +
					PI_PROBE_STOP_WAIT_MS * 1000000LL;

			if (until > cap)
				until = cap;
			capped = true;
		}

		for (int i = from; i < to && !pending; i++)
			pending = ss->probes[i].verdict == V_PENDING;
		left = (until - pi_mono_ns() + 999999) / 1000000;
		if (!pending || left <= 0 || wait_stopped(ss) ||
		    (or_stop && stopped(ss)))
			break;
		ring_buffer__poll(ss->rb, left > 50 ? 50 : (int)left);
	}
}

/* Whether the datapath took an answer to this probe that it could not
 * report (the ring was full): counted on the flow's entry while the
 * entry is still this probe's (a later probe of the same ports takes it
 * over, and zeroes it). */
static bool answer_unreported(const struct session *ss, const struct probe *pr)
{
	struct pi_probe_flow f;

	return !bpf_map_lookup_elem(ss->s.maps[IM_PROBE_FLOWS], &pr->key, &f) &&
	       f.probe_id == pr->id && f.unreported;
}

/* A probe without an answer heard had one the datapath took but could
 * not report (its flow counts it); else it was dropped by the pod's
 * policy when the rule that decides it counted a packet meanwhile; else
 * nothing answered it within its timeout. One whose wait a stop cut
 * short before that stays pending, and one a stop kept from being sent
 * is unsent. */
static void finalize(struct session *ss, int from, int to,
		     uint32_t timeout_ms)
{
	long long now = pi_mono_ns();

	/* What the ring holds is heard first: a wait that ended at its
	 * deadline (or a process held past it) may have left answers in it,
	 * and a probe decided without them is told wrong. */
	ring_buffer__consume(ss->rb);
	for (int i = from; i < to; i++) {
		struct probe *pr = &ss->probes[i];

		if (pr->verdict != V_PENDING)
			continue;
		if (!pr->sent_ns)
			pr->verdict = V_UNSENT;
		else if (answer_unreported(ss, pr))
			pr->verdict = V_UNREPORTED;
		else if (pr->deny_rule &&
			 rule_packets(ss->n, pr->deny_rule) > pr->deny_before)
			pr->verdict = V_POLICY;
		else if ((stopped(ss) || wait_stopped(ss)) &&
			 now < pr->sent_ns + timeout_ms * 1000000LL)
			continue;
		else
			pr->verdict = V_NOANSWER;
	}
}


/* CLOCK_MONOTONIC's step: what clock_getres() says (a tick when the
 * kernel runs on jiffies, as a guest whose TSC was found unstable does). */
static uint64_t clock_resolution_ns(void)
{
	struct timespec res;

	if (clock_getres(CLOCK_MONOTONIC, &res))
		return 1;
	return res.tv_sec * 1000000000ULL + res.tv_nsec ?: 1;
}

static void to_result(const struct probe *pr, struct pi_probe_result *r)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->from, sizeof(r->from), "%s", pr->pod->name);
	snprintf(r->to, sizeof(r->to), "%s", pr->to);
	r->family = pr->family;
	r->proto = pr->proto;
	r->port = pr->proto == IPPROTO_ICMP ? 0 : pr->dport;
	r->verdict = pr->verdict;
	r->rule = pr->verdict == V_POLICY ? pr->deny_rule : 0;
	if (pr->verdict == V_REFUSED) {
		r->refused_by = pr->answer_kind == PI_PROBE_RST ?
				PI_PROBE_BY_RST : PI_PROBE_BY_ICMP;
		r->icmp_read = r->refused_by == PI_PROBE_BY_ICMP &&
			       pr->answer_icmp & PI_PROBE_ICMP_READ;
		if (r->icmp_read) {
			r->icmp_type = pr->answer_icmp >> 8 & 0xff;
			r->icmp_code = pr->answer_icmp & 0xff;
		}
	}
	/* both ends read in the kernel, with one clock: from the frame's
	 * injection into the pod's egress datapath to the answer taken at
	 * the pod's device; no answer or no injection seen, no RTT */
	r->rtt_ns = (pr->verdict == V_ANSWERED || pr->verdict == V_REFUSED) &&
		    pr->injected_ns && pr->reply_ns >= pr->injected_ns ?
		    (int64_t)(pr->reply_ns - pr->injected_ns) : -1;
	r->rtt_resolution_ns = clock_resolution_ns();
	r->src = pr->src;
	r->dst = pr->dst;
	r->sport = pr->sport;
	r->sent_ns = pr->sent_ns > 0 ? (uint64_t)pr->sent_ns : 0;
}

/* The probe's own state (its device, authorisations, flows, the reply
 * hooks) is set up and taken down under the node's lock; the wait for
 * answers between is not a change of the node and lets other commands
 * in. */
static int unlock_for_wait(struct pi_node *n)
{
	return node_unlock(n);
}

/* Whether a source pod (session pod `only`, or any with -1) was deleted
 * or replaced while the probe waited without the node's lock: its device
 * and the reply hook on it went, so its answers would read as "no
 * answer". Said; no verdict is given then. */
static bool source_gone(const struct session *ss)
{
	for (int i = 0; i < ss->npods; i++) {
		if (pod_unchanged(ss, i))
			continue;
		pr_err("pod '%s' was deleted or replaced while the probe ran: no verdicts (its answers were no longer taken); probe again",
		       ss->pods[i].name);
		return true;
	}
	return false;
}

/* Checked between sends at most this often: each look reads the pods'
 * records and opens their namespaces, which before every probe of a
 * burst (--interval 0) slowed the burst itself under the lab's emulation.
 * The look after the wait is always made. */
#define PROBE_ALIVE_EVERY_NS	(100 * 1000000LL)

/* Whether the node was taken down (and maybe up again) while the probe
 * waited without its lock: its datapath went, the reply hooks with it, so
 * every answer from then on would read as "no answer", a drop nobody made.
 * Said; no verdict is given then. */
static bool node_taken_down(const struct session *ss)
{
	struct stat now;

	if (!stat(ss->n->pin_dir, &now) &&
	    now.st_ino == ss->node_dir.st_ino &&
	    now.st_dev == ss->node_dir.st_dev)
		return false;
	pr_err("node '%s' was taken down while the probe ran: no verdicts (its answers were no longer taken)",
	       ss->n->name);
	return true;
}

/* -ENOENT or -ENODEV (said) when the node or a source pod went; 0
 * otherwise. Between sends (`now` false) looked at most every
 * PROBE_ALIVE_EVERY_NS. */
static int sources_alive(struct session *ss, bool now)
{
	long long t = pi_mono_ns();

	if (!now && ss->alive_at && t - ss->alive_at < PROBE_ALIVE_EVERY_NS)
		return 0;
	ss->alive_at = t;
	if (node_taken_down(ss))
		return -ENOENT;
	return source_gone(ss) ? -ENODEV : 0;
}

static void relock_for_teardown(struct pi_node *n, int timeout_ms)
{
	int err = node_relock(n, timeout_ms);

	if (err)
		pr_warn("node '%s': cannot take the lock back (%s); removing the probe's own state without it",
			n->name, strerror(-err));
}

int pi_probe_run(struct pi_node *n, const struct pi_probe_spec *spec,
		 struct pi_probe_result **out)
{
	uint32_t count = spec->count ? spec->count : 1, sent = 0;
	uint32_t timeout = spec->timeout_ms ? spec->timeout_ms : 1000;
	uint8_t proto = spec->proto;
	struct pi_pod_info pod;
	struct session ss;
	bool unlocked, fixed;
	int hold, err;

	*out = NULL;
	if (node_require_write(n, "probe"))
		return -EBADF;
	if (!proto)
		proto = spec->port ? IPPROTO_TCP : IPPROTO_ICMP;
	/* (ICMP: the sequence number tells echoes apart) */
	fixed = spec->sport && proto != IPPROTO_ICMP;
	if ((proto != IPPROTO_ICMP && !spec->port) ||
	    (proto != IPPROTO_ICMP && proto != IPPROTO_TCP && proto != IPPROTO_UDP) ||
	    (spec->family != AF_INET && spec->family != AF_INET6) ||
	    count > 100000) {
		pr_err("a probe needs an address, tcp, udp or icmp, a port for tcp and udp, and at most 100000 probes");
		return -EINVAL;
	}
	/* The datapath knows a probe by its port (ICMP: echo id) in the
	 * probe range: it stamps the send time and the monitor follows
	 * only those, and a port below is the pod's own, whose replies the
	 * probe's flow would take. An ICMP probe has no port to go to. */
	if ((spec->sport && spec->sport < PI_PROBE_PORT_LO) ||
	    (proto == IPPROTO_ICMP && spec->port)) {
		pr_err(spec->port && proto == IPPROTO_ICMP ?
		       "an icmp probe has no destination port" :
		       "a probe's source port is one of %d-%d (the pod's own are below)",
		       PI_PROBE_PORT_LO, PI_PROBE_PORT_HI);
		return -EINVAL;
	}
	/* the pod is read after the wait, which lets the node's lock go */
	err = probe_hold(n, spec->lock_timeout_ms, spec->stop, &hold);
	if (err)
		return err;
	err = pod_lookup(n, spec->from, &pod);
	if (!err && !(pod.flags & (spec->family == AF_INET ? PI_POD_HAS_V4 :
							       PI_POD_HAS_V6))) {
		pr_err("pod '%s' has no IPv%d address", pod.name,
		       spec->family == AF_INET ? 4 : 6);
		err = -EINVAL;
	}
	if (err) {
		close(hold);
		return err;
	}
	err = session_open(&ss, n, hold, &pod, 1);
	if (err) {
		session_open_err(n, err);
		return err;
	}
	ss.stop = spec->stop;
	ss.stop_wait = spec->stop_wait;
	ss.probes = calloc(count, sizeof(*ss.probes));
	*out = calloc(count, sizeof(**out));
	if (!ss.probes || !*out) {
		err = -ENOMEM;
		goto out;
	}
	ss.first_id = rng_next(&ss) & 0x7fffffff;
	ss.nprobes = count;
	for (uint32_t i = 0; i < count; i++) {
		struct probe *pr = &ss.probes[i];

		probe_prepare(&ss, pr, ss.first_id + i, &pod, spec->family,
			      &spec->dst, proto, spec->port, i);
		if (spec->sport) {
			pr->sport = spec->sport;
			pr->key.pod_port = htons(spec->sport);
		}
	}
	unlocked = !unlock_for_wait(n);
	for (; sent < count && !stopped(&ss); sent++) {
		long long next = pi_mono_ns() + spec->interval_ms * 1000000LL;
		uint32_t reuse = sent - PROBE_PORT_SPAN;

		/* A TCP or UDP probe's port is its id's place in the probe
		 * range: the one PROBE_PORT_SPAN before it had the same flow,
		 * one key, and must be answered or given up on before this
		 * one takes the key over (its answer credited to this one,
		 * or refused as stale). (ICMP: the sequence tells them apart.) */
		if (!fixed && proto != IPPROTO_ICMP && sent >= PROBE_PORT_SPAN) {
			wait_answers(&ss, reuse, reuse + 1,
				     answers_due(&ss, reuse, reuse + 1, timeout),
				     true);
			if (stopped(&ss))
				break;
			finalize(&ss, reuse, reuse + 1, timeout);
		}
		/* a probe that did not leave is no "no answer" */
		err = sources_alive(&ss, false) ?: probe_send(&ss, &ss.probes[sent]);
		if (err) {
			if (unlocked)
				relock_for_teardown(n, spec->lock_timeout_ms);
			goto out;
		}
		/* answers of this and earlier probes arrive meanwhile */
		wait_answers(&ss, sent, sent + 1, next, true);
		/* With --sport every TCP or UDP probe is the same flow, one
		 * key: the next would take over the key of one still in
		 * flight, and its answer. One at a time then, each answered
		 * or given up on before the next leaves. */
		if (fixed && sent + 1 < count) {
			wait_answers(&ss, sent, sent + 1,
				     answers_due(&ss, sent, sent + 1, timeout),
				     true);
			finalize(&ss, sent, sent + 1, timeout);
		}
		while (pi_mono_ns() < next && sent + 1 < count && !stopped(&ss))
			ring_buffer__poll(ss.rb, 10);
	}
	wait_answers(&ss, 0, sent, answers_due(&ss, 0, sent, timeout), false);
	err = sources_alive(&ss, true);
	if (err) {
		if (unlocked)
			relock_for_teardown(n, spec->lock_timeout_ms);
		goto out;
	}
	finalize(&ss, 0, sent, timeout);
	if (unlocked)
		relock_for_teardown(n, spec->lock_timeout_ms);
	for (uint32_t i = 0; i < sent; i++)
		to_result(&ss.probes[i], &(*out)[i]);
out:
	session_close(&ss);
	free(ss.probes);
	if (err) {
		free(*out);
		*out = NULL;
		return err;
	}
	return sent;
}

/* a matrix's probes in flight at once: half the flows table, whose LRU
 * may push entries out before it is full */
#define MATRIX_IN_FLIGHT	(PI_MAX_FLOWS / 2)

int pi_probe_matrix(struct pi_node *n, const struct pi_matrix_spec *spec,
		    struct pi_probe_result **out, int *rows, int *cols)
{
	struct { struct pi_pod_info *pods; int n; } pl = {};
	uint32_t timeout = spec->timeout_ms ? spec->timeout_ms : 1000;
	int ncols, np = 0, nsent = 0, hold = -1, err = 0;
	uint8_t proto = spec->proto ? spec->proto : IPPROTO_ICMP;
	struct session ss = {};
	bool unlocked;

	*out = NULL;
	*rows = *cols = 0;
	if (node_require_write(n, "probe matrix"))
		return -EBADF;
	if ((proto != IPPROTO_ICMP && !spec->port) || spec->nextra > 16 ||
	    spec->nextra < 0) {
		pr_err("%s probes need a port; at most 16 more addresses",
		       pi_proto_name(proto));
		return -EINVAL;
	}
	if (proto == IPPROTO_ICMP && spec->port) {
		pr_err("an icmp probe has no destination port");
		return -EINVAL;
	}
	err = probe_hold(n, spec->lock_timeout_ms, spec->stop, &hold);
	if (err)
		return err;
	pl.n = pi_pod_list(n, &pl.pods);
	if (pl.n < 0) {
		close(hold);
		return pl.n;
	}
	for (int i = 0; i < pl.n; i++) {
		if (!(pl.pods[i].flags & PI_POD_HAS_V4)) {
			pr_err("probe matrix needs IPv4 on every pod ('%s' has none)",
			       pl.pods[i].name);
			err = -EINVAL;
			goto out_pods;
		}
	}
	if (pl.n < 1) {
		pr_err("node '%s' has no pods", n->name);
		err = -ESRCH;
		goto out_pods;
	}
	err = session_open(&ss, n, hold, pl.pods, pl.n);
	hold = -1;		/* the session's */
	if (err) {
		session_open_err(n, err);
		goto out_pods;
	}
	ss.stop = spec->stop;
	ss.stop_wait = spec->stop_wait;
	ncols = pl.n + spec->nextra;
	ss.probes = calloc(pl.n * ncols, sizeof(*ss.probes));
	*out = calloc(pl.n * ncols, sizeof(**out));
	if (!ss.probes || !*out) {
		err = -ENOMEM;
		goto out;
	}
	ss.first_id = rng_next(&ss) & 0x7fffffff;
	ss.nprobes = pl.n * ncols;
	for (int r = 0; r < pl.n; r++) {
		for (int c = 0; c < ncols; c++) {
			struct pi_addr dst = { 0 };
			int fam = AF_INET;

			if (c < pl.n) {
				dst.a[0] = pl.pods[c].ip4;
			} else {
				dst = spec->extra[c - pl.n];
				fam = spec->extra_family[c - pl.n];
			}
			probe_prepare(&ss, &ss.probes[np], ss.first_id + np,
				      &pl.pods[r], fam, &dst, proto, spec->port,
				      np);
			/* no IPv6 to send from: never sent, no loss */
			if (fam == AF_INET6 && !(pl.pods[r].flags & PI_POD_HAS_V6))
				ss.probes[np].verdict = V_UNSENT;
			/* a pod answers itself on its loopback: nothing of
			 * that crosses its datapath */
			if (c == r)
				ss.probes[np].verdict = V_SELF;
			np++;
		}
	}
	unlocked = !unlock_for_wait(n);
	/* All at once, the pairs being independent flows, but at most
	 * MATRIX_IN_FLIGHT of them: the probes' flows are an LRU table of
	 * PI_MAX_FLOWS, and a flow pushed out of it loses its answer (to
	 * the pod's stack, the probe "no answer"). */
	for (int i = 0, first = 0; i < np; i++) {
		if (i - first >= MATRIX_IN_FLIGHT && !stopped(&ss)) {
			wait_answers(&ss, first, i,
				     answers_due(&ss, first, i, timeout), true);
			if (!stopped(&ss)) {
				finalize(&ss, first, i, timeout);
				first = i;
			}
		}
		if (ss.probes[i].verdict != V_PENDING || stopped(&ss))
			continue;
		err = sources_alive(&ss, false) ?: probe_send(&ss, &ss.probes[i]);
		if (err)
			break;
		nsent++;
	}
	if (err) {
		if (unlocked)
			relock_for_teardown(n, spec->lock_timeout_ms);
		goto out;
	}
	wait_answers(&ss, 0, np, answers_due(&ss, 0, np, timeout), false);
	err = sources_alive(&ss, true);
	if (err) {
		if (unlocked)
			relock_for_teardown(n, spec->lock_timeout_ms);
		goto out;
	}
	finalize(&ss, 0, np, timeout);
	if (unlocked)
		relock_for_teardown(n, spec->lock_timeout_ms);
	for (int i = 0; i < np; i++)
		to_result(&ss.probes[i], &(*out)[i]);
	*rows = pl.n;
	*cols = ncols;
out:
	session_close(&ss);
	free(ss.probes);
out_pods:
	if (hold >= 0)
		close(hold);
	free(pl.pods);
	if (err) {
		free(*out);
		*out = NULL;
		return err;
	}
	return nsent;
}
