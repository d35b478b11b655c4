/* SPDX-License-Identifier: GPL-2.0 */
/*
 * podinject monitor: the datapath's events as they happen, one line each
 * (text, or a JSON object per line with -j), filtered by kind, pod,
 * reason, address and port, until SIGINT/SIGTERM, --count events or
 * --duration seconds. Events missed (the datapath's buffers were full, or
 * this monitor took its share too slowly) are reported as they are
 * noticed and at the end.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include "cmds.h"
#include "util.h"

#define MON_MAX_FILTER	32

struct name_list {
	const char *names[MON_MAX_FILTER];
	int cnt;
};

static volatile sig_atomic_t stop_signal, pause_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

static void on_pause(int sig)
{
	pause_signal = sig;
}

/* Ctrl-Z (SIGTSTP): stopped as the default action would, but paused
 * first, so that the node's other monitors and traced probes go on (if
 * this one read the node's rings, another takes them on). */
static int stop_here(struct pi_monitor *m)
{
	struct sigaction dfl = { .sa_handler = SIG_DFL }, old;
	int err;

	pi_monitor_pause(m);
	sigaction(SIGTSTP, &dfl, &old);
	raise(SIGTSTP);		/* returns once continued (SIGCONT) */
	sigaction(SIGTSTP, &old, NULL);
	err = pi_monitor_resume(m);
	if (!err && !json_output)
		fprintf(stderr, "continued: events while stopped are not shown\n");
	return err;
}

static const char *const kind_names[] = PI_MON_KIND_NAMES;
static const char *const hook_names[] = PI_MON_HOOK_NAMES;
static const char *const path_names[] = PI_PATH_NAMES;

/* The reason's name: a drop's, a verdict's action, an injection's path. */
static const char *reason_name(const struct pi_monitor_event *e)
{
	switch (e->kind) {
	case PI_MON_DROP:
		return drop_reason_name(e->reason);
	case PI_MON_VERDICT:
		return e->reason == PI_ALLOW ? "allow" :
		       e->reason == PI_DENY ? "deny" : "unknown";
	case PI_MON_INJECT:
		return e->reason <= PI_PATH_MAX ? path_names[e->reason] :
						  "unknown";
	case PI_MON_PROXY:
		return "captured";
	case PI_MON_TRACE:
		if (e->hook == PI_MON_HOOK_POLICY)
			return e->reason == PI_ALLOW ? "allow" : "deny";
		return hook_verdict_name((int32_t)e->reason);
	}
	return "unknown";
}

/* Every name a --reason may give: drop reasons, allow/deny, paths. */
static bool known_reason(const char *s)
{
	for (uint32_t r = 1; r < PI_MON_DROP_MAX; r++)
		if (!strcmp(s, drop_reason_name(r)) && strcmp(s, "unknown"))
			return true;
	for (size_t i = 1; i <= PI_PATH_MAX; i++)
		if (!strcmp(s, path_names[i]))
			return true;
	return !strcmp(s, "allow") || !strcmp(s, "deny") ||
	       !strcmp(s, "captured") || !strcmp(s, "pass") ||
	       !strcmp(s, "next") || !strcmp(s, "drop") ||
	       !strcmp(s, "redirect");
}

static int add_kinds(const char *v, void *dst)
{
	uint32_t *kinds = dst;
	char buf[128], *save = NULL, *tok;

	if (strlen(v) >= sizeof(buf))
		return -EINVAL;
	snprintf(buf, sizeof(buf), "%s", v);
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		int k;

		for (k = 1; k < PI_MON_KIND_MAX; k++)
			if (!strcmp(tok, kind_names[k]))
				break;
		if (k == PI_MON_KIND_MAX)
			return -EINVAL;
		*kinds |= 1u << k;
	}
	return 0;
}

static int add_pod(const char *v, void *dst)
{
	struct name_list *l = dst;

	if (l->cnt >= MON_MAX_FILTER || !pi_valid_pod_name(v))
		return -EINVAL;
	l->names[l->cnt++] = v;
	return 0;
}

static int add_reason(const char *v, void *dst)
{
	struct name_list *l = dst;

	if (l->cnt >= MON_MAX_FILTER || !known_reason(v))
		return -EINVAL;
	l->names[l->cnt++] = v;
	return 0;
}

/* A --pod that names no pod of the node now is kept (the pod may come),
 * but said: a name mistyped would show nothing, silently. */
static void warn_absent_pods(const struct name_list *l)
{
	struct pi_pod_info *pods = NULL;
	struct pi_node *n;
	int cnt, j;

	if (!l->cnt || pi_node_open(node_name, PI_OPEN_READ, lock_timeout_ms,
				    &n))
		return;
	cnt = pi_pod_list(n, &pods);
	pi_node_close(n);
	for (int i = 0; i < l->cnt; i++) {
		for (j = 0; j < cnt; j++)
			if (!strcmp(pods[j].name, l->names[i]))
				break;
		/* stderr: stdout is the events' */
		if (cnt >= 0 && j == cnt)
			fprintf(stderr, "warning: no pod '%s' on node '%s' now: its events show once it is added\n",
				l->names[i], node_name);
	}
	free(pods);
}

/* --addr: prefixes either end of an event may be in */
struct prefix_list {
	struct {
		int family;
		struct pi_addr addr;
		int plen;
	} p[MON_MAX_FILTER];
	int cnt;
};

/* --port: port ranges either end of a TCP or UDP event may be in */
struct port_list {
	struct {
		uint16_t lo, hi;
	} r[MON_MAX_FILTER];
	int cnt;
};

static int add_addr(const char *v, void *dst)
{
	struct prefix_list *l = dst;

	if (l->cnt >= MON_MAX_FILTER ||
	    pi_parse_prefix(v, &l->p[l->cnt].family, &l->p[l->cnt].addr,
			    &l->p[l->cnt].plen))
		return -EINVAL;
	l->cnt++;
	return 0;
}

static int add_port(const char *v, void *dst)
{
	struct port_list *l = dst;

	if (l->cnt >= MON_MAX_FILTER ||
	    pi_parse_port_range(v, &l->r[l->cnt].lo, &l->r[l->cnt].hi))
		return -EINVAL;
	l->cnt++;
	return 0;
}

/* addr (network order words) within the first plen bits of pfx */
static bool prefix_has(const struct pi_addr *pfx, int plen,
		       const struct pi_addr *addr)
{
	for (int i = 0; i < 4 && plen > 0; i++, plen -= 32) {
		uint32_t mask = plen >= 32 ? 0xffffffffu :
					     ~(0xffffffffu >> plen);

		if ((ntohl(addr->a[i]) & mask) != (ntohl(pfx->a[i]) & mask))
			return false;
	}
	return true;
}

static bool addr_matches(const struct prefix_list *l,
			 const struct pi_monitor_event *e)
{
	if (!l->cnt)
		return true;
	for (int i = 0; i < l->cnt; i++)
		if (l->p[i].family == e->family &&
		    (prefix_has(&l->p[i].addr, l->p[i].plen, &e->saddr) ||
		     prefix_has(&l->p[i].addr, l->p[i].plen, &e->daddr)))
			return true;
	return false;
}

static bool port_matches(const struct port_list *l,
			 const struct pi_monitor_event *e)
{
	if (!l->cnt)
		return true;
	if (e->proto != IPPROTO_TCP && e->proto != IPPROTO_UDP)
		return false;
	for (int i = 0; i < l->cnt; i++)
		if ((e->sport >= l->r[i].lo && e->sport <= l->r[i].hi) ||
		    (e->dport >= l->r[i].lo && e->dport <= l->r[i].hi))
			return true;
	return false;
}

struct mon_run {
	struct name_list pods, reasons;
	struct prefix_list addrs;
	struct port_list ports;
	uint64_t count, shown;
};

static bool in_list(const struct name_list *l, const char *s)
{
	if (!l->cnt)
		return true;
	for (int i = 0; i < l->cnt; i++)
		if (!strcmp(l->names[i], s))
			return true;
	return false;
}

/* The IP header's protocol (IPv6: its first next header, which is an
 * extension header's where the frame has one: a drop's event reads the
 * frame and does not walk them), by name; "proto N" for others. */
static const char *proto_name(int family, uint8_t proto)
{
	static char other[16];

	switch (proto) {
	case IPPROTO_TCP: return "tcp";
	case IPPROTO_UDP: return "udp";
	case IPPROTO_ICMP: return "icmp";
	case IPPROTO_ICMPV6: return "icmpv6";
	case IPPROTO_IGMP: return "igmp";
	case IPPROTO_GRE: return "gre";
	case IPPROTO_ESP: return "esp";
	case IPPROTO_AH: return "ah";
	case IPPROTO_SCTP: return "sctp";
	case IPPROTO_IPIP: return "ipip";
	case IPPROTO_IPV6: return "ipv6-in-ip";
	}
	if (family == AF_INET6) {
		switch (proto) {
		case IPPROTO_HOPOPTS: return "ipv6-hop-by-hop";
		case IPPROTO_ROUTING: return "ipv6-routing";
		case IPPROTO_FRAGMENT: return "ipv6-fragment";
		case IPPROTO_DSTOPTS: return "ipv6-dest-options";
		case IPPROTO_NONE: return "ipv6-no-next-header";
		}
	}
	snprintf(other, sizeof(other), "proto %u", proto);
	return other;
}

/* The event's time (the kernel's monotonic clock) on the wall clock. */
static uint64_t wall_ns(uint64_t mono)
{
	static int64_t offset;
	struct timespec rt, mt;

	if (!offset) {
		clock_gettime(CLOCK_REALTIME, &rt);
		clock_gettime(CLOCK_MONOTONIC, &mt);
		offset = (int64_t)(rt.tv_sec - mt.tv_sec) * 1000000000ll +
			 (rt.tv_nsec - mt.tv_nsec);
	}
	return mono + offset;
}

static void print_text(const struct pi_monitor_event *e)
{
	char src[INET6_ADDRSTRLEN + 8], dst[INET6_ADDRSTRLEN + 8], fl[9];
	uint64_t t = wall_ns(e->ts_ns);
	struct tm tm;
	time_t sec = t / 1000000000ull;

	localtime_r(&sec, &tm);
	printf("%02d:%02d:%02d.%06llu %-7s %-14s %s%s%s %s", tm.tm_hour,
	       tm.tm_min, tm.tm_sec,
	       (unsigned long long)(t % 1000000000ull) / 1000,
	       kind_names[e->kind],
	       e->hook < PI_MON_HOOK_MAX ? hook_names[e->hook] : "?",
	       e->pod[0] ? e->pod : "-", e->as_pod[0] ? " as " : "",
	       e->as_pod, reason_name(e));
	if (e->rule_id)
		printf(" rule %u", e->rule_id);
	printf(" %s", e->dir == PI_DIR_INGRESS ? "ingress" : "egress");
	if (e->family) {
		pi_fmt_addr(e->family, &e->saddr, -1, src, sizeof(src));
		pi_fmt_addr(e->family, &e->daddr, -1, dst, sizeof(dst));
		printf(" %s", proto_name(e->family, e->proto));
		if (e->sport || e->dport)
			printf(e->family == AF_INET6 ? " [%s]:%u -> [%s]:%u" :
						       " %s:%u -> %s:%u",
			       src, e->sport, dst, e->dport);
		else
			printf(" %s -> %s", src, dst);
		if (e->proto == IPPROTO_TCP)
			printf(" [%s]", tcp_flags_text(e->tcp_flags, fl));
		if (e->icmp_read) {
			const char *name = icmp_name(e->proto, e->icmp_type);

			if (name)
				printf(" %s", name);
			else
				printf(" type %u", e->icmp_type);
			if (icmp_is_echo(e->proto, e->icmp_type))
				printf(" id %u", e->icmp_id);
			else if (e->icmp_code || !name)
				printf(" code %u", e->icmp_code);
		}
	}
	printf(" len %u", e->len);
	if (e->kind == PI_MON_PROXY)
		printf(" proxy-port %u", e->aux);
	printf("\n");
}

static void print_json(const struct pi_monitor_event *e)
{
	char a[INET6_ADDRSTRLEN], fl[9];

	json_init(jw, stdout);
	json_obj_open(jw);
	json_ku64(jw, "time_ns", wall_ns(e->ts_ns));
	json_ku64(jw, "ktime_ns", e->ts_ns);
	json_kstr(jw, "kind", kind_names[e->kind]);
	json_kstr(jw, "hook", e->hook < PI_MON_HOOK_MAX ? hook_names[e->hook] :
							 "unknown");
	json_kstr(jw, "pod", e->pod);
	if (e->kind == PI_MON_INJECT || e->as_pod[0])
		json_kstr(jw, "as_pod", e->as_pod);
	json_kstr(jw, "reason", reason_name(e));
	json_ku64(jw, "rule", e->rule_id);
	json_kstr(jw, "dir", e->dir == PI_DIR_INGRESS ? "ingress" : "egress");
	json_ku64(jw, "ifindex", e->ifindex);
	if (e->kind == PI_MON_PROXY)
		json_ku64(jw, "proxy_port", e->aux);
	json_ku64(jw, "family", e->family == AF_INET ? 4 :
				 e->family == AF_INET6 ? 6 : 0);
	json_kstr(jw, "proto", e->family ? proto_name(e->family, e->proto) : "");
	json_kstr(jw, "src", e->family ? pi_fmt_addr(e->family, &e->saddr, -1,
						      a, sizeof(a)) : "");
	json_ku64(jw, "sport", e->sport);
	json_kstr(jw, "dst", e->family ? pi_fmt_addr(e->family, &e->daddr, -1,
						      a, sizeof(a)) : "");
	json_ku64(jw, "dport", e->dport);
	if (e->proto == IPPROTO_TCP)
		json_kstr(jw, "tcp_flags", tcp_flags_text(e->tcp_flags, fl));
	if (e->icmp_read)
		json_icmp_event(e);
	json_ku64(jw, "len", e->len);
	json_obj_close(jw);
	json_end(jw);
}

static void print_lost(uint64_t lost)
{
	if (json_output) {
		json_init(jw, stdout);
		json_obj_open(jw);
		json_kstr(jw, "kind", "lost");
		json_ku64(jw, "lost", lost);
		json_obj_close(jw);
		json_end(jw);
	} else {
		printf("lost %llu events so far: they were read too slowly\n",
		       (unsigned long long)lost);
	}
}

static int on_event(const struct pi_monitor_event *e, void *ctx)
{
	struct mon_run *r = ctx;

	if (!in_list(&r->pods, e->pod) && !in_list(&r->pods, e->as_pod))
		return 0;
	if (!in_list(&r->reasons, reason_name(e)))
		return 0;
	if (!addr_matches(&r->addrs, e) || !port_matches(&r->ports, e))
		return 0;
	if (json_output)
		print_json(e);
	else
		print_text(e);
	r->shown++;
	/* a stop asked for ends the round here: under a flood the stream
	 * would give events for as long as it lasts */
	return (r->count && r->shown >= r->count) || ferror(stdout) ||
	       stop_signal;
}

static int monitor_help(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr,
		"Usage: podinject [-N NODE] [-j] monitor [--type KIND[,KIND...]]\n"
		"                 [--pod NAME]... [--reason REASON]...\n"
		"                 [--addr ADDR[/LEN]]... [--port N[-M]]...\n"
		"                 [--count N] [--duration SECONDS]\n"
		"\n"
		"Prints the datapath's events as they happen, one per line (-j: a\n"
		"JSON object per line): drop (where, why, the deciding rule),\n"
		"verdict (a policy decision on a flow's first packet), inject (a\n"
		"packet injected as a pod: injector, as-pod, path), proxy (a\n"
		"connection captured for a proxy). KIND: drop, verdict, inject,\n"
		"proxy (default: all of these), trace (probes' packets at each\n"
		"hook, as probe --trace shows them). --pod: events about that pod (as injector\n"
		"or as the pod injected as); --reason: a drop reason, allow or\n"
		"deny, an injection path, captured; --addr: events with either end\n"
		"in the prefix; --port: TCP and UDP events with either port in the\n"
		"range. Filters of one option are or'ed, of different ones and'ed.\n"
		"The datapath writes events only\n"
		"while a monitor runs. Any number of monitors may run on a node at\n"
		"once, each shown every event of its kinds. Events missed because\n"
		"this monitor (or the one reading the node's buffers) was too slow\n"
		"are reported as 'lost'. Stops at SIGINT, SIGTERM or SIGHUP, when\n"
		"its output is closed,\n"
		"after N events, or after SECONDS; exit codes: 0, 1 runtime\n"
		"failure, 2 usage error.\n");
	return EXIT_OK;
}

int do_monitor(int argc, char **argv)
{
	struct mon_run run = {};
	const char *duration_arg = NULL, *count_arg = NULL;
	uint32_t kinds = 0, duration = 0, count = 0;
	const struct opt opts[] = {
		OPT_LIST("--type", add_kinds, &kinds,
			 "drop, verdict, inject or proxy, comma-separated"),
		OPT_LIST("--pod", add_pod, &run.pods, "a pod name; at most 32"),
		OPT_LIST("--reason", add_reason, &run.reasons,
			 "a drop reason, allow, deny, a path or captured; at most 32"),
		OPT_LIST("--addr", add_addr, &run.addrs,
			 "an address or prefix (ADDR[/LEN], no host bits); at most 32"),
		OPT_LIST("--port", add_port, &run.ports,
			 "a port or range N-M; at most 32"),
		OPT_STR("--count", &count_arg, "N"),
		OPT_STR("--duration", &duration_arg, "SECONDS"),
		{ 0 },
	};
	struct timespec t0, now;
	struct pi_monitor *m;
	struct sigaction sa = {};
	uint64_t lost = 0, l;
	int err, ret = EXIT_OK;

	if (argc > 0 && (!strcmp(argv[0], "help") ||
			 !strcmp(argv[0], "--help")))
		return monitor_help(argc, argv);
	err = parse_opts(opts, argc, argv, 0, NULL, NULL);
	if (err)
		return err;
	if (count_arg && (pi_parse_u32(count_arg, &count) || !count))
		return usage_err("invalid --count '%s' (want a number > 0)",
				 count_arg);
	if (duration_arg && (pi_parse_u32(duration_arg, &duration) ||
			     !duration))
		return usage_err("invalid --duration '%s' (want seconds > 0)",
				 duration_arg);
	run.count = count;
	if (!kinds)
		kinds = PI_MON_ALL;

	/* Every way a monitor is ended but SIGKILL stops it as SIGINT does:
	 * its kinds go from the datapath, which else writes events for
	 * nobody. A closed terminal (SIGHUP); `monitor | head` (its output
	 * gone: SIGPIPE ignored, the write's EPIPE ends the loop). */
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	sa.sa_handler = on_pause;
	sigaction(SIGTSTP, &sa, NULL);
	err = pi_monitor_open(node_name, kinds, lock_timeout_ms, &m);
	if (err)
		return exit_code(err);
	/* with -j, stdout and stderr are often one stream of JSON lines */
	if (!json_output)
		warn_absent_pods(&run.pods);
	if (!json_output)
		fprintf(stderr, "monitoring node %s (%s%s%s%s%s )\n", node_name,
			kinds & (1u << PI_MON_DROP) ? " drop" : "",
			kinds & (1u << PI_MON_VERDICT) ? " verdict" : "",
			kinds & (1u << PI_MON_INJECT) ? " inject" : "",
			kinds & (1u << PI_MON_PROXY) ? " proxy" : "",
			kinds & (1u << PI_MON_TRACE) ? " trace" : "");
	setvbuf(stdout, NULL, _IOLBF, 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!stop_signal && (!count || run.shown < count)) {
		if (pause_signal) {
			pause_signal = 0;
			err = stop_here(m);
		} else {
			err = pi_monitor_poll(m, 200, on_event, &run);
		}
		if (err == -ENOENT) {
			p_err("node '%s' is gone", node_name);
			ret = EXIT_RUNTIME;
			break;
		}
		if (err < 0) {
			p_err("reading the node's events: %s", strerror(-err));
			ret = EXIT_RUNTIME;
			break;
		}
		if (ferror(stdout))
			break;	/* nobody reads it any more */
		l = pi_monitor_lost(m);
		if (l != lost) {
			lost = l;
			print_lost(lost);
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (duration && now.tv_sec - t0.tv_sec +
				(now.tv_nsec - t0.tv_nsec) / 1e9 >= duration)
			break;
	}
	pi_monitor_close(m);
	fflush(stdout);
	if (!json_output)
		fprintf(stderr, "%llu events shown, %llu lost\n",
			(unsigned long long)run.shown,
			(unsigned long long)lost);
	return ret;
}
