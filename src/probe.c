/* SPDX-License-Identifier: GPL-2.0 */
/* podinject probe, probe matrix: synthetic flows (lib/probe.c) */
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cmds.h"
#include "util.h"

static const char *const verdict_names[] = {
	"pending", "answered", "refused", "dropped-by-policy", "no-answer",
	"self", "not-sent", "unreported",
};

/* ---- interruption ------------------------------------------------------- */

/* The signal that asked a running probe to stop, 0 while none did: no
 * more probes are sent, and the answers of those sent are awaited. A
 * second one (stop_again) cuts that wait short. */
static volatile sig_atomic_t stop_signal, stop_again;

static void on_stop_signal(int sig)
{
	if (stop_signal)
		stop_again = sig;
	else
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

	/* one handler at a time: a SIGTERM that came between the SIGINT
	 * handler's test and its store would be lost as the second stop */
	sigfillset(&sa.sa_mask);
	stop_signal = stop_again = 0;
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
 * JSON with "interrupted" (so the error goes to stderr only there).
 * `err`: the run's error, -EINTR when the stop came while it waited for
 * another probe to end: then it had made nothing to remove. */
static int report_interrupted(int err, int sent, int planned)
{
	char msg[200];

	if (err == -EINTR)
		snprintf(msg, sizeof(msg),
			 "probe interrupted by %s while it waited for the probe running on the node to end: no probe sent, nothing made",
			 stop_signal_name());
	else
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

static double rtt_ms(const struct pi_probe_result *pr)
{
	return pr->rtt_ns / 1e6;
}

/* An RTT under the clock's step reads as 0 (or one step): printed as
 * no figure (null), never as a measured 0. */
static bool rtt_measured(const struct pi_probe_result *pr)
{
	return (pr->verdict == PI_PROBE_ANSWERED ||
		pr->verdict == PI_PROBE_REFUSED) &&
	       pr->rtt_ns >= (int64_t)pr->rtt_resolution_ns && pr->rtt_ns > 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* ---- probe --trace: the datapath's events about each probe ---- */

struct trace_buf {
	struct pi_monitor_event *ev;
	int cnt, cap;
};

static struct trace_buf trace;		/* filled after the run, when traced */

static int trace_keep(const struct pi_monitor_event *e, void *ctx)
{
	struct trace_buf *t = ctx;

	if (t->cnt == t->cap) {
		int cap = t->cap ? 2 * t->cap : 256;
		struct pi_monitor_event *ev;

		if (cap > 65536)
			return 0;
		ev = realloc(t->ev, cap * sizeof(*ev));
		if (!ev)
			return 0;
		t->ev = ev;
		t->cap = cap;
	}
	t->ev[t->cnt++] = *e;
	return 0;
}

static bool is_icmp(uint8_t proto)
{
	return proto == IPPROTO_ICMP || proto == IPPROTO_ICMPV6;
}

/* 1: the event is about the probe's packet, 2: about its answer, 0: not
 * the probe's. A TCP or UDP packet is the probe's by its ports, an ICMP
 * echo whose header the datapath read (a hook's verdict) by its id (the
 * pod's own pings to the same address are not the probe's). Other ICMP
 * events (an error, whose quoted header is not read; a policy decision,
 * built from the parsed packet) are the probe's by time, between the
 * probe's leaving and `until` (the next probe's of the same pod, 0:
 * none): an echo of an ICMP probe between its two addresses, and an
 * ICMP error to the pod (from the destination or a router on the way)
 * about any probe. */
static int trace_side(const struct pi_probe_result *pr,
		      const struct pi_monitor_event *e, uint64_t until)
{
	bool out, to_pod;

	if (e->family != pr->family)
		return 0;
	out = !memcmp(&e->saddr, &pr->src, sizeof(e->saddr)) &&
	      !memcmp(&e->daddr, &pr->dst, sizeof(e->daddr));
	to_pod = !memcmp(&e->daddr, &pr->src, sizeof(e->daddr));
	if (e->icmp_read && icmp_is_echo(e->proto, e->icmp_type)) {
		if (!is_icmp(pr->proto) || e->icmp_id != pr->sport)
			return 0;
		if (out)
			return 1;
		return to_pod && !memcmp(&e->saddr, &pr->dst,
					 sizeof(e->saddr)) ? 2 : 0;
	}
	if (is_icmp(e->proto)) {
		if (e->ts_ns < pr->sent_ns || (until && e->ts_ns >= until))
			return 0;
		if (out)
			return is_icmp(pr->proto) ? 1 : 0;
		return to_pod ? 2 : 0;
	}
	if (e->proto != pr->proto)
		return 0;
	if (out && e->sport == pr->sport && e->dport == pr->port)
		return 1;
	if (to_pod && !memcmp(&e->saddr, &pr->dst, sizeof(e->saddr)) &&
	    e->sport == pr->port && e->dport == pr->sport)
		return 2;
	return 0;
}

/* Where probe i's ICMP events end: the next probe from the same pod
 * leaving (0: none). */
static uint64_t trace_until(const struct pi_probe_result *all, int n, int i)
{
	for (int j = i + 1; j < n; j++)
		if (all[j].sent_ns && !strcmp(all[j].from, all[i].from) &&
		    all[j].family == all[i].family)
			return all[j].sent_ns;
	return 0;
}

static const char *decided_name(uint32_t how)
{
	return how == PI_MON_DECIDED_WALK ? "rules" :
	       how == PI_MON_DECIDED_TRACKED ? "tracked flow" :
	       how == PI_MON_DECIDED_RELATED ? "related to a tracked flow" :
	       how == PI_MON_DECIDED_NO_RULES ? "no rules" :
					       "unknown";
}

static int cmp_event_time(const void *a, const void *b)
{
	const struct pi_monitor_event *x = a, *y = b;

	return x->ts_ns < y->ts_ns ? -1 : x->ts_ns > y->ts_ns;
}

/* What happened to probe pr on its way, in order: each hook's verdict,
 * each policy decision with its rule, and a drop's reason. */
static void print_trace(const struct pi_probe_result *pr, uint64_t until)
{
	static const char *const hooks[] = PI_MON_HOOK_NAMES;
	uint64_t t0 = 0;
	char what[160], fl[9], flags[12];

	if (json_output) {
		json_key(jw, "trace");
		json_arr_open(jw);
	}
	for (int i = 0; i < trace.cnt; i++) {
		const struct pi_monitor_event *e = &trace.ev[i];
		int side = trace_side(pr, e, until);
		const char *hook = e->hook < PI_MON_HOOK_MAX ? hooks[e->hook] :
							      "unknown";
		/* pod_reply runs at the probed pod's own eth0 */
		const char *pod = e->hook == PI_MON_HOOK_POD_REPLY ? pr->from :
				  e->pod;

		if (!side || (e->kind != PI_MON_TRACE && e->kind != PI_MON_DROP))
			continue;
		if (!t0)
			t0 = e->ts_ns;
		if (e->kind == PI_MON_DROP)
			snprintf(what, sizeof(what), "dropped: %s",
				 drop_reason_name(e->reason));
		else if (e->hook == PI_MON_HOOK_POLICY)
			snprintf(what, sizeof(what), "%s policy: %s by %s",
				 e->dir == PI_DIR_INGRESS ? "ingress" : "egress",
				 e->reason == PI_ALLOW ? "allow" : "deny",
				 decided_name(e->aux));
		else if (e->hook == PI_MON_HOOK_POD_REPLY &&
			 (int32_t)e->reason == PI_MON_V_DROP)
			snprintf(what, sizeof(what), "taken: the probe's answer");
		else
			snprintf(what, sizeof(what), "%s",
				 hook_verdict_name((int32_t)e->reason));
		if (json_output) {
			json_obj_open(jw);
			json_ku64(jw, "t_ns", e->ts_ns - t0);
			json_kstr(jw, "way", side == 1 ? "out" : "back");
			json_kstr(jw, "hook", hook);
			json_kstr(jw, "pod", pod);
			if (e->proto == IPPROTO_TCP)
				json_kstr(jw, "tcp_flags",
					  tcp_flags_text(e->tcp_flags, fl));
			if (e->icmp_read)
				json_icmp_event(e);
			if (e->kind == PI_MON_DROP) {
				json_kstr(jw, "event", "drop");
				json_kstr(jw, "reason",
					  drop_reason_name(e->reason));
			} else if (e->hook == PI_MON_HOOK_POLICY) {
				json_kstr(jw, "event", "policy");
				json_kstr(jw, "dir", e->dir == PI_DIR_INGRESS ?
					  "ingress" : "egress");
				json_kstr(jw, "action", e->reason == PI_ALLOW ?
					  "allow" : "deny");
				json_kstr(jw, "decided_by", decided_name(e->aux));
			} else {
				json_kstr(jw, "event", "hook");
				json_kstr(jw, "verdict",
					  e->hook == PI_MON_HOOK_POD_REPLY &&
					  (int32_t)e->reason == PI_MON_V_DROP ?
					  "taken" : hook_verdict_name((int32_t)e->reason));
			}
			json_ku64(jw, "rule", e->rule_id);
			json_obj_close(jw);
			continue;
		}
		if (e->proto == IPPROTO_TCP)
			snprintf(flags, sizeof(flags), "[%s]",
				 tcp_flags_text(e->tcp_flags, fl));
		else
			flags[0] = '\0';
		printf("     %+9.3f ms  %-4s %-6s %-14s %-12s %s",
		       (e->ts_ns - t0) / 1e6, side == 1 ? "out" : "back",
		       flags,
		       hook, pod[0] ? pod :
		       e->hook == PI_MON_HOOK_INJECT ? "(probe)" : "-", what);
		if (e->rule_id)
			printf(" (rule %u)", e->rule_id);
		/* an ICMP error on the way back: the refusal it carries */
		if (e->icmp_read && !icmp_is_echo(e->proto, e->icmp_type)) {
			char err[64];

			printf(" [%s]", icmp_error_text(e->proto, e->icmp_type,
						       e->icmp_code, err,
						       sizeof(err)));
		}
		printf("\n");
	}
	if (json_output)
		json_arr_close(jw);
}

/* What refused a probe, in words: "RST", "ICMP unreachable,
 * port-unreachable", "ICMPv6 unreachable, admin-prohibited" */
static const char *refusal_text(const struct pi_probe_result *pr, char *buf,
				size_t len)
{
	uint8_t proto = pr->family == AF_INET6 ? IPPROTO_ICMPV6 : IPPROTO_ICMP;
	const char *icmp = proto == IPPROTO_ICMP ? "ICMP" : "ICMPv6";
	char err[64];

	if (pr->refused_by == PI_PROBE_BY_RST)
		return "RST";
	if (!pr->icmp_read)
		snprintf(buf, len, "an %s error", icmp);
	else
		snprintf(buf, len, "%s %s", icmp,
			 icmp_error_text(proto, pr->icmp_type, pr->icmp_code,
					 err, sizeof(err)));
	return buf;
}

static void json_refusal(const struct pi_probe_result *pr)
{
	uint8_t proto = pr->family == AF_INET6 ? IPPROTO_ICMPV6 : IPPROTO_ICMP;
	const char *name;

	json_kstr(jw, "refused_by",
		  pr->refused_by == PI_PROBE_BY_RST ? "rst" : "icmp");
	if (!pr->icmp_read)
		return;
	json_ku64(jw, "icmp_type", pr->icmp_type);
	json_ku64(jw, "icmp_code", pr->icmp_code);
	name = icmp_name(proto, pr->icmp_type);
	json_kstr(jw, "icmp", name ? name : "");
	name = icmp_is_unreach(proto, pr->icmp_type) ?
	       icmp_unreach_name(proto, pr->icmp_code) : NULL;
	json_kstr(jw, "icmp_code_name", name ? name : "");
}

static void print_probe(const struct pi_probe_result *pr, int seq,
			uint64_t until)
{
	bool rtt = rtt_measured(pr);
	char why[80];

	if (json_output) {
		json_obj_open(jw);
		json_ku64(jw, "seq", seq);
		json_kstr(jw, "from", pr->from);
		json_kstr(jw, "to", pr->to);
		json_kstr(jw, "proto", pi_proto_name(pr->proto));
		if (pr->proto != IPPROTO_ICMP)
			json_ku64(jw, "port", pr->port);
		json_kstr(jw, "verdict", verdict_names[pr->verdict]);
		if (pr->verdict == PI_PROBE_POLICY)
			json_ku64(jw, "rule", pr->rule);
		if (pr->verdict == PI_PROBE_REFUSED)
			json_refusal(pr);
		json_key(jw, "rtt_ms");
		if (rtt)
			json_f64(jw, rtt_ms(pr));
		else
			json_null(jw);
		if (trace.ev)
			print_trace(pr, until);
		json_obj_close(jw);
		return;
	}
	if (pr->proto == IPPROTO_ICMP)
		printf("%-4d %s -> %s icmp: %s", seq, pr->from, pr->to,
		       verdict_names[pr->verdict]);
	else
		printf("%-4d %s -> %s port %u %s: %s", seq, pr->from,
		       pr->to, pr->port, pi_proto_name(pr->proto),
		       verdict_names[pr->verdict]);
	if (pr->verdict == PI_PROBE_POLICY)
		printf(" rule %u", pr->rule);
	if (pr->verdict == PI_PROBE_REFUSED)
		printf(" (%s)", refusal_text(pr, why, sizeof(why)));
	if (rtt)
		printf(" rtt %.3f ms", rtt_ms(pr));
	printf("\n");
	if (trace.ev)
		print_trace(pr, until);
}

static void print_summary(const struct pi_probe_result *pr, int n)
{
	int counts[PI_PROBE_UNREPORTED + 1] = { 0 };
	int nr = 0, all = n, under = 0, unheard = 0, decided;
	double loss;
	double *r = calloc(n ? n : 1, sizeof(double)), sum = 0;
	uint64_t res = all ? pr[0].rtt_resolution_ns : 1;

	for (int i = 0; i < all; i++) {
		counts[pr[i].verdict]++;
		if (pr[i].verdict == PI_PROBE_SELF ||
		    pr[i].verdict == PI_PROBE_UNSENT)
			n--;
		if (rtt_measured(&pr[i])) {
			r[nr] = rtt_ms(&pr[i]);
			sum += r[nr++];
		} else if (pr[i].verdict == PI_PROBE_ANSWERED ||
			   pr[i].verdict == PI_PROBE_REFUSED) {
			/* no injection heard: no RTT, whatever the clock */
			if (pr[i].rtt_ns < 0)
				unheard++;
			else
				under++;
		}
	}
	qsort(r, nr, sizeof(double), cmp_double);
	/* a pending probe (its wait cut short) is no loss, nor an answer;
	 * nor is an unreported one (an answer came, of a kind unknown) */
	decided = n - counts[PI_PROBE_PENDING] - counts[PI_PROBE_UNREPORTED];
	loss = decided ? 100.0 * (counts[PI_PROBE_POLICY] +
				  counts[PI_PROBE_NOANSWER]) / decided : 0;
	if (json_output) {
		json_key(jw, "summary");
		json_obj_open(jw);
		json_ku64(jw, "sent", n);
		json_ku64(jw, "answered", counts[PI_PROBE_ANSWERED]);
		json_ku64(jw, "refused", counts[PI_PROBE_REFUSED]);
		json_ku64(jw, "dropped_by_policy", counts[PI_PROBE_POLICY]);
		json_ku64(jw, "no_answer", counts[PI_PROBE_NOANSWER]);
		json_ku64(jw, "pending", counts[PI_PROBE_PENDING]);
		json_ku64(jw, "not_sent", counts[PI_PROBE_UNSENT]);
		json_ku64(jw, "unreported", counts[PI_PROBE_UNREPORTED]);
		json_key(jw, "loss_pct");
		json_f64(jw, loss);
		/* how an RTT was read; the clock's step, and the answers
		 * faster than it (their rtt_ms is null) */
		json_kstr(jw, "rtt_measured",
			  "in the kernel (bpf_ktime_get_ns), from the probe's injection into the pod's egress datapath to its answer at the pod's device");
		json_ku64(jw, "rtt_resolution_ns", res);
		json_ku64(jw, "rtt_under_resolution", under);
		json_ku64(jw, "rtt_injection_unheard", unheard);
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
		printf("--- %d probes: %d answered, %d refused, %d dropped by policy, %d no answer",
		       n, counts[PI_PROBE_ANSWERED], counts[PI_PROBE_REFUSED],
		       counts[PI_PROBE_POLICY], counts[PI_PROBE_NOANSWER]);
		if (counts[PI_PROBE_PENDING])
			printf(", %d pending", counts[PI_PROBE_PENDING]);
		if (counts[PI_PROBE_UNSENT])
			printf(", %d not sent", counts[PI_PROBE_UNSENT]);
		printf(", %.1f%% loss\n", loss);
		if (counts[PI_PROBE_UNREPORTED])
			printf("%d answers came but were not heard (the node's probe event ring was full: an answer flood); they are no loss\n",
			       counts[PI_PROBE_UNREPORTED]);
		if (nr)
			printf("rtt min/avg/p50/p99 = %.3f/%.3f/%.3f/%.3f ms\n",
			       r[0], sum / nr, r[(nr - 1) / 2],
			       r[(nr * 99 - 1) / 100]);
		if (under)
			printf("%d answers came faster than the clock's step of %.3f ms: no RTT for them\n",
			       under, res / 1e6);
		if (unheard)
			printf("%d answers have no RTT: their probe's injection was not heard (the node's probe event ring was full)\n",
			       unheard);
	}
	free(r);
}

static void print_run(const struct pi_probe_result *probes, uint32_t n,
		      bool interrupted)
{
	if (json_output) {
		json_obj_open(jw);
		json_key(jw, "probes");
		json_arr_open(jw);
	}
	for (uint32_t i = 0; i < n; i++)
		print_probe(&probes[i], i + 1,
			    trace_until(probes, (int)n, (int)i));
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


static const char *cell(const struct pi_probe_result *pr, char *buf, size_t len)
{
	switch (pr->verdict) {
	case PI_PROBE_ANSWERED:
		if (rtt_measured(pr))
			snprintf(buf, len, "ok %.2fms", rtt_ms(pr));
		else
			snprintf(buf, len, "ok");
		break;
	case PI_PROBE_POLICY:
		snprintf(buf, len, "policy#%u", pr->rule);
		break;
	default:
		snprintf(buf, len, "%s", verdict_names[pr->verdict]);
	}
	return buf;
}

static void print_matrix(int rows, int ncols, int proto, uint32_t port,
			 const struct pi_probe_result *probes, bool interrupted)
{
	int np = rows * ncols;

	if (json_output) {
		json_obj_open(jw);
		json_kstr(jw, "proto", pi_proto_name(proto));
		if (port)
			json_ku64(jw, "port", port);
		json_key(jw, "results");
		json_arr_open(jw);
		for (int i = 0; i < np; i++)
			print_probe(&probes[i], i + 1,
				    trace_until(probes, np, i));
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
		/* column c's target: row c's pod for the pods, the address
		 * of the first row's probe for the extra ones */
		for (int c = 0; c < ncols; c++)
			printf(" %-16s", c < rows ? probes[c * ncols].from :
			       probes[c].to);
		printf("\n");
		for (int r = 0; r < rows; r++) {
			printf("%-12s", probes[r * ncols].from);
			for (int c = 0; c < ncols; c++)
				printf(" %-16s", cell(&probes[r * ncols + c],
						      buf, sizeof(buf)));
			printf("\n");
		}
		print_summary(probes, np);
	}
}

/* ---- commands ---------------------------------------------------------- */

static int probe_help(int argc, char **argv)
{
	fprintf(stderr,
		"Usage: podinject [-N NODE] [-j] probe --from POD --to ADDR[:PORT]\n"
		"                 [--proto tcp|udp|icmp] [--count N] [--interval MS]\n"
		"                 [--timeout MS] [--sport PORT] [--trace]\n"
		"       podinject [-N NODE] [-j] probe matrix [--proto tcp|udp|icmp]\n"
		"                 [--port N] [--to ADDR ...] [--timeout MS]\n"
		"\n"
		"Probes leave POD's egress datapath as POD's own packets would;\n"
		"their answers are taken before they reach POD. Verdicts: answered,\n"
		"refused (RST or ICMP unreachable), dropped-by-policy (with the\n"
		"rule of POD's egress policy), no-answer, unreported (an answer the\n"
		"datapath took but could not report: the node's probe event ring\n"
		"was full). ADDR:PORT, [ADDR6]:PORT.\n"
		"Defaults: tcp when a port is given, else icmp; count 1; interval\n"
		"100 ms; timeout 1000 ms; the pod-side port (ICMP: echo id) from\n"
		"%d-%d unless --sport (TCP and UDP probes of one --sport are one flow:\n"
		"each waits for the last one's answer or timeout; a TCP answer,\n"
		"SYN-ACK, RST or ICMP error, must name the probe's own SYN; a UDP\n"
		"answer later than the timeout cannot be told from the next\n"
		"one's). matrix: every pod\n"
		"to every pod of the node\n"
		"and to each --to address, all at once. --trace: under each probe,\n"
		"every hook it and its answer met, in order, with each verdict,\n"
		"policy decision (and rule) and drop reason.\n"
		"\n"
		"A probe runs on the node's device pair " PI_PROBE_DEV " <-> " PI_PROBE_TX_DEV ",\n"
		"one probe per node at a time: another waits for it as long as -W\n"
		"says (the node's lock's wait), then runs; the device of a probe\n"
		"that was killed is removed by the next. If the node is taken down\n"
		"or a source pod deleted while it runs, it gives no verdicts and\n"
		"exits 1. SIGINT, SIGTERM or SIGHUP stop it:\n"
		"no more probes are sent, the answers of those sent are awaited\n"
		"(each up to its timeout, %d ms at most; a second signal cuts that\n"
		"short, and a probe still waiting is reported pending), the probes\n"
		"sent are reported (JSON: \"interrupted\"), its device,\n"
		"authorisations and hooks are removed, and it exits 1. A matrix cell\n"
		"the stop kept from being sent is not-sent.\n"
		"Exit codes: 0 done (whatever the verdicts), 1 runtime failure or\n"
		"interrupted, 2 usage error.\n", PI_PROBE_PORT_LO,
		PI_PROBE_PORT_HI, PI_PROBE_STOP_WAIT_MS);
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

static int parse_count(const char *v, void *dst)
{
	uint32_t *c = dst;

	return pi_parse_u32(v, c) || !*c || *c > 100000 ? -EINVAL : 0;
}

static int parse_interval(const char *v, void *dst)
{
	uint32_t *c = dst;

	return pi_parse_u32(v, c) || *c > 60000 ? -EINVAL : 0;
}

static int parse_timeout(const char *v, void *dst)
{
	uint32_t *c = dst;

	return pi_parse_u32(v, c) || !*c || *c > 600000 ? -EINVAL : 0;
}

static int parse_port16(const char *v, void *dst)
{
	uint32_t p;

	if (pi_parse_u32(v, &p) || !p || p > 65535)
		return -EINVAL;
	*(uint16_t *)dst = p;
	return 0;
}

/* a source port in the probe range (PI_PROBE_PORT_LO..HI): the datapath
 * knows probes by it */
static int parse_probe_port(const char *v, void *dst)
{
	uint32_t p;

	if (pi_parse_u32(v, &p) || p < PI_PROBE_PORT_LO || p > PI_PROBE_PORT_HI)
		return -EINVAL;
	*(uint16_t *)dst = p;
	return 0;
}

static int parse_l4(const char *v, void *dst)
{
	uint8_t p;

	if (pi_parse_proto(v, &p) || !p)
		return -EINVAL;
	*(uint8_t *)dst = p;
	return 0;
}

static int probe_run(int argc, char **argv)
{
	struct pi_probe_spec spec = {
		.count = 1, .interval_ms = 100, .timeout_ms = 1000,
		.lock_timeout_ms = lock_timeout_ms, .stop = &stop_signal,
		.stop_wait = &stop_again,
	};
	const char *to = NULL;
	bool traced = false;
	const struct opt opts[] = {
		OPT_STR("--from", &spec.from, "a pod"),
		OPT_STR("--to", &to, "ADDR, ADDR:PORT or [ADDR6]:PORT"),
		OPT_PARSE("--proto", parse_l4, &spec.proto, "tcp, udp or icmp", NULL),
		OPT_PARSE("--count", parse_count, &spec.count, "1-100000", NULL),
		OPT_PARSE("--interval", parse_interval, &spec.interval_ms, "0-60000 ms", NULL),
		OPT_PARSE("--timeout", parse_timeout, &spec.timeout_ms, "1-600000 ms", NULL),
		OPT_PARSE("--sport", parse_probe_port, &spec.sport, "61000-65535", NULL),
		OPT_FLAG("--trace", &traced),
		{ 0 },
	};
	struct pi_monitor *mon = NULL;
	struct pi_probe_result *res = NULL;
	struct stop_handlers sh;
	bool interrupted;
	struct pi_node *n;
	int port = -1, sent, err;

	err = parse_opts(opts, argc, argv, 0, NULL, NULL);
	if (err)
		return err;
	if (!spec.from || !to)
		return usage_err("probe needs --from POD and --to ADDR[:PORT]");
	if (!pi_valid_pod_name(spec.from))
		return usage_err("invalid pod name '%s'", spec.from);
	if (parse_target(to, &spec.family, &spec.dst, &port))
		return usage_err("invalid --to '%s': ADDR, ADDR:PORT or [ADDR6]:PORT", to);
	spec.port = port > 0 ? port : 0;
	if (!spec.proto)
		spec.proto = port > 0 ? IPPROTO_TCP : IPPROTO_ICMP;
	if (spec.proto != IPPROTO_ICMP && port <= 0)
		return usage_err("%s probes need a port (--to ADDR:PORT)",
				 pi_proto_name(spec.proto));
	/* The trace's monitor first: it takes the node's lock for a moment,
	 * which this process then holds itself. */
	if (traced) {
		err = pi_monitor_open(node_name, 1u << PI_MON_TRACE |
					  1u << PI_MON_DROP,
				      lock_timeout_ms, &mon);
		if (err)
			return exit_code(err);
	}
	err = pi_node_open(node_name, PI_OPEN_WRITE, lock_timeout_ms, &n);
	if (err) {
		pi_monitor_close(mon);
		return exit_code(err);
	}
	stop_handlers_set(&sh);
	sent = pi_probe_run(n, &spec, &res);
	/* The probe's state is gone before anything is printed: a reader
	 * that goes away (SIGPIPE) cannot leave its device behind. */
	pi_node_close(n);
	stop_handlers_restore(&sh);
	if (mon) {
		/* everything the probes' packets wrote is written by now */
		if (pi_monitor_drain(mon, 2000, trace_keep, &trace) ==
		    -ETIMEDOUT)
			p_info("the trace may be incomplete: the node's events were not all passed on within 2 s");
		if (pi_monitor_lost(mon))
			p_info("the trace lost %llu events (the node's ring buffers, or what they passed on, were full)",
			       (unsigned long long)pi_monitor_lost(mon));
		pi_monitor_close(mon);
		if (!trace.ev)
			trace.ev = calloc(1, sizeof(*trace.ev));
		qsort(trace.ev, trace.cnt, sizeof(*trace.ev), cmp_event_time);
	}
	interrupted = stop_signal;
	if (sent < 0)
		return interrupted ? report_interrupted(sent, 0, spec.count) :
				     exit_code(sent);
	if (sent)
		print_run(res, sent, interrupted);
	free(res);
	free(trace.ev);
	return interrupted ? report_interrupted(0, sent, spec.count) : EXIT_OK;
}

static int add_extra(const char *v, void *dst)
{
	struct pi_matrix_spec *m = dst;
	int plen;

	if (m->nextra >= 16 ||
	    pi_parse_prefix(v, &m->extra_family[m->nextra],
			    &m->extra[m->nextra], &plen) ||
	    plen != (m->extra_family[m->nextra] == AF_INET ? 32 : 128))
		return -EINVAL;
	m->nextra++;
	return 0;
}

static int probe_matrix(int argc, char **argv)
{
	struct pi_matrix_spec spec = {
		.proto = IPPROTO_ICMP, .timeout_ms = 1000,
		.lock_timeout_ms = lock_timeout_ms, .stop = &stop_signal,
		.stop_wait = &stop_again,
	};
	bool to_pods;
	const struct opt opts[] = {
		OPT_FLAG("--to-pods", &to_pods),	/* the default, kept explicit */
		OPT_PARSE("--proto", parse_l4, &spec.proto, "tcp, udp or icmp", NULL),
		OPT_PARSE("--port", parse_port16, &spec.port, "1-65535", NULL),
		OPT_PARSE("--timeout", parse_timeout, &spec.timeout_ms, "1-600000 ms", NULL),
		OPT_LIST("--to", add_extra, &spec, "an address; at most 16"),
		{ 0 },
	};
	struct pi_probe_result *res = NULL;
	struct stop_handlers sh;
	bool interrupted;
	struct pi_node *n;
	int rows, cols, sent, planned = 0, err;

	err = parse_opts(opts, argc, argv, 0, NULL, NULL);
	if (err)
		return err;
	if (spec.proto != IPPROTO_ICMP && !spec.port)
		return usage_err("%s probes need --port", pi_proto_name(spec.proto));
	err = pi_node_open(node_name, PI_OPEN_WRITE, lock_timeout_ms, &n);
	if (err)
		return exit_code(err);
	stop_handlers_set(&sh);
	sent = pi_probe_matrix(n, &spec, &res, &rows, &cols);
	pi_node_close(n);
	stop_handlers_restore(&sh);
	interrupted = stop_signal;
	if (sent < 0)
		return interrupted ? report_interrupted(sent, 0, 0) : exit_code(sent);
	for (int i = 0; i < rows * cols; i++)
		planned += res[i].verdict != PI_PROBE_SELF;
	if (sent)
		print_matrix(rows, cols, spec.proto, spec.port, res, interrupted);
	free(res);
	return interrupted ? report_interrupted(0, sent, planned) : EXIT_OK;
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
