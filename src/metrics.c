/* SPDX-License-Identifier: GPL-2.0 */
/*
 * podinject metrics: the node's counters in Prometheus' text format, once
 * on stdout or served at GET /metrics (libmicrohttpd). Each scrape opens
 * the node for reading (shared lock, bounded wait), reads everything, and
 * closes it: what a scrape returns is the node at that moment. The names
 * are listed in docs/observability.md; keep the two together.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <microhttpd.h>
#include "cmds.h"
#include "prom.h"
#include "util.h"
#include "version.h"

/* A scrape waits at most this long for the node's lock (less with -W):
 * Prometheus gives up on a target after its scrape timeout, 10 s by
 * default, and a late answer is worth less than a failed one. */
#define SCRAPE_WAIT_MAX_MS	5000
/* connections the HTTP server takes from one client address at a time */
#define METRICS_CONNS_PER_ADDR	4

static const char *const drop_names[PI_DROP_MAX] = PI_DROP_NAMES;
static const char *const inj_drop_names[PI_INJ_DROP_MAX] = PI_INJ_DROP_NAMES;
static const char *const refused_names[PI_INJ_REFUSALS] = PI_MON_DROP_NAMES;
static const char *const path_names[] = PI_PATH_NAMES;
static const char *const ct_state_names[] = PI_CT_STATE_NAMES;

static int metrics_help(int argc, char **argv)
{
	fprintf(stderr,
		"Usage: podinject [-N NODE] metrics [--listen ADDR:PORT]\n"
		"\n"
		"The node's counters in Prometheus' text exposition format (0.0.4):\n"
		"once on stdout, or with --listen served at GET /metrics until\n"
		"SIGTERM or SIGINT. ADDR is an IPv4 address or [IPv6]; each scrape\n"
		"reads the node at that moment, waiting at most %d ms for its lock.\n"
		"A client address gets at most %d connections at a time.\n"
		"Metric names: docs/observability.md.\n",
		SCRAPE_WAIT_MAX_MS, METRICS_CONNS_PER_ADDR);
	return EXIT_OK;
}

/* Everything one scrape reads, before any of it is written: the format
 * wants each family's samples together, so each family walks the pods. */
struct scrape {
	struct pi_node_info ni;
	struct pi_pod_info *pods;
	struct pi_pod_stats *stats;
	struct pi_rule_info **rules;
	int *nrules;
	int npods;
	struct pi_ct_counts *ct;		/* by pod id */
	struct pi_inject_stat_info *inj;
	int ninj;
	struct pi_proxy_info *proxies;
	int nproxies;
	uint64_t refused[PI_INJ_REFUSALS];
	struct pi_flow_sweep_info sweep;
};

static void scrape_free(struct scrape *s)
{
	for (int i = 0; s->rules && i < s->npods; i++)
		free(s->rules[i]);
	free(s->rules);
	free(s->nrules);
	free(s->pods);
	free(s->stats);
	free(s->ct);
	free(s->inj);
	free(s->proxies);
	memset(s, 0, sizeof(*s));
}

static int scrape_read(struct pi_node *n, struct scrape *s)
{
	int err, cnt;

	err = pi_node_get_info(n, &s->ni);
	if (err)
		return err;
	cnt = pi_pod_list(n, &s->pods);
	if (cnt < 0)
		return cnt;
	s->npods = cnt;
	s->stats = calloc(cnt + 1, sizeof(*s->stats));
	s->rules = calloc(cnt + 1, sizeof(*s->rules));
	s->nrules = calloc(cnt + 1, sizeof(*s->nrules));
	s->ct = calloc(PI_MAX_PODS, sizeof(*s->ct));
	if (!s->stats || !s->rules || !s->nrules || !s->ct)
		return -ENOMEM;
	for (int i = 0; i < cnt; i++) {
		err = pi_pod_counters(n, &s->pods[i], &s->stats[i]);
		if (err)
			return err;
		err = pi_policy_list_pod(n, &s->pods[i], &s->rules[i]);
		if (err < 0)
			return err;
		s->nrules[i] = err;
	}
	err = pi_ct_counts_all(n, s->ct, PI_MAX_PODS);
	if (err)
		return err;
	cnt = pi_inject_stats(n, &s->inj);
	if (cnt < 0)
		return cnt;
	s->ninj = cnt;
	err = pi_inject_refusals(n, s->refused);
	if (err)
		return err;
	err = pi_proxy_flow_sweep(n, &s->sweep);
	if (err)
		return err;
	cnt = pi_proxy_list(n, &s->proxies);
	if (cnt < 0)
		return cnt;
	s->nproxies = cnt;
	return 0;
}

static void u32_str(char buf[12], uint32_t v)
{
	snprintf(buf, 12, "%u", v);
}

static const char *dir_name(uint32_t dir)
{
	return dir == PI_DIR_INGRESS ? "ingress" : "egress";
}

static void write_pods(struct prom_buf *b, const struct scrape *s)
{
	const char *node = s->ni.name;

	prom_family(b, "podinject_pod_packets_total", "counter",
		    "Packets of the pod let through: egress, leaving the pod past its egress program; ingress, delivered to it.");
	for (int i = 0; i < s->npods; i++) {
		const char *const eg[] = { "node", node, "pod", s->pods[i].name,
					   "direction", "egress", NULL };
		const char *const in[] = { "node", node, "pod", s->pods[i].name,
					   "direction", "ingress", NULL };

		prom_sample(b, "podinject_pod_packets_total", eg,
			    s->stats[i].egress_packets);
		prom_sample(b, "podinject_pod_packets_total", in,
			    s->stats[i].ingress_packets);
	}
	prom_family(b, "podinject_pod_bytes_total", "counter",
		    "Bytes of the packets podinject_pod_packets_total counts.");
	for (int i = 0; i < s->npods; i++) {
		const char *const eg[] = { "node", node, "pod", s->pods[i].name,
					   "direction", "egress", NULL };
		const char *const in[] = { "node", node, "pod", s->pods[i].name,
					   "direction", "ingress", NULL };

		prom_sample(b, "podinject_pod_bytes_total", eg,
			    s->stats[i].egress_bytes);
		prom_sample(b, "podinject_pod_bytes_total", in,
			    s->stats[i].ingress_bytes);
	}
	prom_family(b, "podinject_pod_drops_total", "counter",
		    "Packets of the pod the datapath dropped, by reason (the names of pod show).");
	for (int i = 0; i < s->npods; i++) {
		for (int r = 1; r < PI_DROP_MAX; r++) {
			const char *const l[] = { "node", node,
						  "pod", s->pods[i].name,
						  "reason", drop_names[r], NULL };

			prom_sample(b, "podinject_pod_drops_total", l,
				    s->stats[i].drops[r]);
		}
	}
	prom_family(b, "podinject_pod_tracked_flows", "gauge",
		    "Live connection-tracking entries of the pod, by state.");
	for (int i = 0; i < s->npods; i++) {
		const struct pi_ct_counts *c = &s->ct[s->pods[i].id];

		for (int st = PI_CT_OPENING; st <= PI_CT_CLOSING; st++) {
			const char *const l[] = { "node", node,
						  "pod", s->pods[i].name,
						  "state", ct_state_names[st],
						  NULL };

			prom_sample(b, "podinject_pod_tracked_flows", l,
				    c->by_state[st]);
		}
	}
}

static void write_rules(struct prom_buf *b, const struct scrape *s,
			const char *name, const char *help, bool bytes)
{
	prom_family(b, name, "counter", help);
	for (int i = 0; i < s->npods; i++) {
		for (int k = 0; k < s->nrules[i]; k++) {
			const struct pi_rule_info *r = &s->rules[i][k];
			char id[12];
			const char *const l[] = {
				"node", s->ni.name, "pod", s->pods[i].name,
				"direction", dir_name(r->dir), "rule", id,
				"action", r->rule.action == PI_DENY ?
					  "deny" : "allow", NULL };

			u32_str(id, r->rule.id);
			prom_sample(b, name, l, bytes ? r->bytes : r->packets);
		}
	}
}

static const char *path_name(uint32_t path)
{
	return path <= PI_PATH_MAX ? path_names[path] : "unknown";
}

static void write_inject(struct prom_buf *b, const struct scrape *s)
{
	const char *node = s->ni.name;

	prom_family(b, "podinject_inject_packets_total", "counter",
		    "Packets an injector sent as another pod, by injector, the pod it sent as, and path.");
	for (int i = 0; i < s->ninj; i++) {
		const struct pi_inject_stat_info *st = &s->inj[i];
		const char *const l[] = { "node", node, "injector", st->injector,
					  "as_pod", st->as,
					  "path", path_name(st->path), NULL };

		prom_sample(b, "podinject_inject_packets_total", l,
			    st->packets);
	}
	prom_family(b, "podinject_inject_bytes_total", "counter",
		    "Bytes of the packets podinject_inject_packets_total counts.");
	for (int i = 0; i < s->ninj; i++) {
		const struct pi_inject_stat_info *st = &s->inj[i];
		const char *const l[] = { "node", node, "injector", st->injector,
					  "as_pod", st->as,
					  "path", path_name(st->path), NULL };

		prom_sample(b, "podinject_inject_bytes_total", l, st->bytes);
	}
	prom_family(b, "podinject_inject_drops_total", "counter",
		    "Injected packets dropped, by reason (the names of inject stats).");
	for (int i = 0; i < s->ninj; i++) {
		const struct pi_inject_stat_info *st = &s->inj[i];

		for (int r = 0; r < PI_INJ_DROP_MAX; r++) {
			const char *const l[] = { "node", node,
						  "injector", st->injector,
						  "as_pod", st->as,
						  "path", path_name(st->path),
						  "reason", inj_drop_names[r],
						  NULL };

			prom_sample(b, "podinject_inject_drops_total", l,
				    st->drops[r]);
		}
	}
	prom_family(b, "podinject_inject_refused_total", "counter",
		    "Packets the injection object refused, node-wide, by reason (the names of inject refused and of the monitor's drop events).");
	for (int r = 0; r < PI_INJ_REFUSALS; r++) {
		const char *const l[] = { "node", node,
					  "reason", refused_names[r], NULL };

		prom_sample(b, "podinject_inject_refused_total", l,
			    s->refused[r]);
	}
}

/* A family of one series, the node's */
static void node_series(struct prom_buf *b, const char *node,
			const char *name, const char *type, const char *help,
			uint64_t v)
{
	prom_family(b, name, type, help);
	prom_sample(b, name, (const char *const[]){ "node", node, NULL }, v);
}

static void write_proxy(struct prom_buf *b, const struct scrape *s)
{
	const char *node = s->ni.name;

	prom_family(b, "podinject_proxy_flows", "gauge",
		    "Live proxied flows of a captured pod, by direction of the capture (outbound: the pod's own connections; inbound: connections to it) and table (client: the client's connections to the proxy; upstream: the proxy's, as the client); each table holds at most podinject_proxy_flows_limit of one pod and direction.");
	for (int i = 0; i < s->nproxies; i++) {
		const struct pi_proxy_info *p = &s->proxies[i];
		const char *dir = p->rule.flags & PI_PROXY_INBOUND ?
				  "inbound" : "outbound";
		const char *const c[] = { "node", node, "pod", p->pod,
					  "proxy", p->proxy, "direction", dir,
					  "table", "client", NULL };
		const char *const u[] = { "node", node, "pod", p->pod,
					  "proxy", p->proxy, "direction", dir,
					  "table", "upstream", NULL };

		prom_sample(b, "podinject_proxy_flows", c, p->rule.nflows);
		prom_sample(b, "podinject_proxy_flows", u, p->rule.nupstream);
	}
	node_series(b, node, "podinject_proxy_flows_limit", "gauge",
		    "A captured pod's share of each proxy flow table.",
		    PI_PROXY_FLOWS_PER_POD);
	prom_family(b, "podinject_proxy_limit_drops_total", "counter",
		    "New flows of a captured pod refused: its share or the table was full and it had no flow of its own to let go.");
	for (int i = 0; i < s->nproxies; i++) {
		const struct pi_proxy_info *p = &s->proxies[i];
		const char *const l[] = { "node", node, "pod", p->pod,
					  "proxy", p->proxy, "direction",
					  p->rule.flags & PI_PROXY_INBOUND ?
					  "inbound" : "outbound", NULL };

		prom_sample(b, "podinject_proxy_limit_drops_total", l,
			    p->rule.limit_drops);
	}
	node_series(b, node, "podinject_proxy_flows_untimed_total", "counter",
		    "New proxy flow entries the kernel could give no expiry timer of their own; the sweep takes them out once idle.",
		    s->sweep.untimed);
	node_series(b, node, "podinject_proxy_flows_untimed", "gauge",
		    "Proxy flow entries the sweep's last round left without a timer of their own, at most the entries the tables hold now.",
		    s->sweep.pending);
	node_series(b, node, "podinject_proxy_flow_sweep_expired_total", "counter",
		    "Proxy flow entries the sweep took out, idle past their timeout (untimed, or their timer late).",
		    s->sweep.expired);
}

static void write_all(struct prom_buf *b, const struct scrape *s)
{
	char abi[12];

	u32_str(abi, pi_abi_version());
	prom_family(b, "podinject_build_info", "gauge",
		    "Always 1: the build of podinject that serves these metrics, and its datapath ABI version.");
	prom_sample(b, "podinject_build_info",
		    (const char *const[]){ "version", PODINJECT_VERSION,
					   "abi", abi, NULL }, 1);
	prom_family(b, "podinject_node_pods", "gauge",
		    "Pods of the node.");
	prom_sample(b, "podinject_node_pods",
		    (const char *const[]){ "node", s->ni.name, NULL },
		    s->npods);
	write_pods(b, s);
	write_rules(b, s, "podinject_policy_rule_packets_total",
		    "Packets counted against a policy rule of the pod: every packet a deny rule dropped; for an allow rule, the packets of the flows it let open, in their opening direction.",
		    false);
	write_rules(b, s, "podinject_policy_rule_bytes_total",
		    "Bytes of the packets podinject_policy_rule_packets_total counts.",
		    true);
	write_inject(b, s);
	write_proxy(b, s);
}

/* One exposition of the node as it is now, malloc()ed; or -errno (the
 * library has said why through the log). */
static int collect(char **text, size_t *len)
{
	int wait = lock_timeout_ms < SCRAPE_WAIT_MAX_MS ? lock_timeout_ms :
							  SCRAPE_WAIT_MAX_MS;
	struct scrape s = { 0 };
	struct prom_buf b;
	struct pi_node *n;
	int err;

	err = pi_node_open(node_name, PI_OPEN_READ, wait, &n);
	if (err)
		return err;
	err = scrape_read(n, &s);
	pi_node_close(n);
	if (err) {
		scrape_free(&s);
		return err;
	}
	prom_init(&b);
	write_all(&b, &s);
	scrape_free(&s);
	*text = prom_take(&b, len);
	return *text ? 0 : -ENOMEM;
}

/*
 * libmicrohttpd is loaded by `metrics --listen` alone. Linked in, it and
 * the TLS library it is built with (GnuTLS, and eight libraries under it)
 * were mapped and relocated by every CLI call: half the CPU time of a
 * short command (`ct timeout`: x0.49 without them), paid by each of a
 * node's CNI-driven and scripted calls and, many times over, under the
 * kernel lab's emulation.
 */
#ifndef MHD_SONAME
#define MHD_SONAME "libmicrohttpd.so.12"
#endif

static struct {
	__typeof__(MHD_start_daemon) *start_daemon;
	__typeof__(MHD_stop_daemon) *stop_daemon;
	__typeof__(MHD_create_response_from_buffer) *create_response_from_buffer;
	__typeof__(MHD_add_response_header) *add_response_header;
	__typeof__(MHD_queue_response) *queue_response;
	__typeof__(MHD_destroy_response) *destroy_response;
} mhd;

static int mhd_load(void)
{
	void *h = dlopen(MHD_SONAME, RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		p_err("the HTTP server needs %s: %s", MHD_SONAME, dlerror());
		return -1;
	}
#define MHD_SYM(name) \
	(*(void **)&mhd.name = dlsym(h, "MHD_" #name)) != NULL
	if (MHD_SYM(start_daemon) && MHD_SYM(stop_daemon) &&
	    MHD_SYM(create_response_from_buffer) &&
	    MHD_SYM(add_response_header) && MHD_SYM(queue_response) &&
	    MHD_SYM(destroy_response))
		return 0;
#undef MHD_SYM
	p_err("%s lacks a function the HTTP server needs: %s", MHD_SONAME,
	      dlerror());
	dlclose(h);
	return -1;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned int status,
			     char *body, size_t len, const char *type)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = mhd.create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	mhd.add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	ret = mhd.queue_response(c, status, r);
	mhd.destroy_response(r);
	return ret;
}

static enum MHD_Result reply_text(struct MHD_Connection *c,
				  unsigned int status, const char *msg)
{
	char *body = strdup(msg);

	return body ? reply(c, status, body, strlen(body),
			    "text/plain; charset=utf-8") : MHD_NO;
}

static enum MHD_Result serve(void *cls, struct MHD_Connection *c,
			     const char *url, const char *method,
			     const char *version, const char *upload,
			     size_t *upload_size, void **state)
{
	char *text, msg[160];
	size_t len;
	int err;

	if (strcmp(method, MHD_HTTP_METHOD_GET) &&
	    strcmp(method, MHD_HTTP_METHOD_HEAD))
		return reply_text(c, MHD_HTTP_METHOD_NOT_ALLOWED,
				  "only GET /metrics\n");
	if (strcmp(url, "/metrics"))
		return reply_text(c, MHD_HTTP_NOT_FOUND,
				  "not found: metrics are at /metrics\n");
	err = collect(&text, &len);
	if (err) {
		/* the target is down for Prometheus, and says why */
		snprintf(msg, sizeof(msg), "node '%s' cannot be read: %s\n",
			 node_name, strerror(-err));
		return reply_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, msg);
	}
	return reply(c, MHD_HTTP_OK, text, len, PROM_CONTENT_TYPE);
}

/* ADDR:PORT, ADDR an IPv4 address (dotted quad) or [IPv6]. */
static int parse_listen(const char *arg, struct sockaddr_storage *ss,
			socklen_t *sl)
{
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
	const char *colon = strrchr(arg, ':');
	char host[INET6_ADDRSTRLEN];
	bool v6 = arg[0] == '[';
	uint32_t port;
	size_t hl;

	if (!colon)
		return -EINVAL;
	hl = colon - arg;
	if (v6) {
		if (hl < 3 || arg[hl - 1] != ']')
			return -EINVAL;
		arg++;
		hl -= 2;
	}
	if (!hl || hl >= sizeof(host))
		return -EINVAL;
	memcpy(host, arg, hl);
	host[hl] = 0;
	if (pi_parse_u32(colon + 1, &port) || port < 1 || port > 65535)
		return -EINVAL;
	memset(ss, 0, sizeof(*ss));
	if (v6) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		*sl = sizeof(*s6);
		return inet_pton(AF_INET6, host, &s6->sin6_addr) == 1 ? 0 : -EINVAL;
	}
	s4->sin_family = AF_INET;
	s4->sin_port = htons(port);
	*sl = sizeof(*s4);
	return inet_pton(AF_INET, host, &s4->sin_addr) == 1 ? 0 : -EINVAL;
}

static int listen_on(const char *arg, const struct sockaddr_storage *ss,
		     socklen_t sl)
{
	int one = 1, fd;

	fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		p_err("cannot listen on %s: %s", arg, strerror(errno));
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ss->ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)ss, sl) || listen(fd, 64)) {
		p_err("cannot listen on %s: %s", arg, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

static int serve_until_signal(const char *arg,
			      const struct sockaddr_storage *ss, socklen_t sl)
{
	struct MHD_Daemon *d;
	sigset_t stop;
	int fd, sig;

	/* The server's thread inherits this mask: only the main thread
	 * takes the signals, in sigwait(), and stops the server. */
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	pthread_sigmask(SIG_BLOCK, &stop, NULL);
	if (mhd_load())
		return EXIT_RUNTIME;
	fd = listen_on(arg, ss, sl);
	if (fd < 0)
		return EXIT_RUNTIME;
	/* One internal thread: scrapes are served one at a time, so a slow
	 * one never holds more than one read of the node. A scraper needs
	 * one connection (keep-alive); a few per address, so that one
	 * client holding connections open (a pod that reaches the node's
	 * address) cannot take every slot and blind the node's monitoring
	 * for the idle timeout. */
	d = mhd.start_daemon(MHD_USE_INTERNAL_POLLING_THREAD |
			     (ss->ss_family == AF_INET6 ? MHD_USE_IPv6 : 0),
			     0, NULL, NULL, serve, NULL,
			     MHD_OPTION_LISTEN_SOCKET, fd,
			     MHD_OPTION_CONNECTION_TIMEOUT, 30u,
			     MHD_OPTION_PER_IP_CONNECTION_LIMIT,
			     (unsigned int)METRICS_CONNS_PER_ADDR,
			     MHD_OPTION_END);
	if (!d) {
		p_err("cannot start the HTTP server on %s", arg);
		close(fd);
		return EXIT_RUNTIME;
	}
	fprintf(stderr, "serving metrics of node %s at http://%s/metrics\n",
		node_name, arg);
	sigwait(&stop, &sig);
	mhd.stop_daemon(d);
	close(fd);
	fprintf(stderr, "stopped (%s)\n", strsignal(sig));
	return EXIT_OK;
}

int do_metrics(int argc, char **argv)
{
	const char *listen_arg = NULL;
	struct sockaddr_storage ss;
	socklen_t sl;
	const struct opt opts[] = {
		OPT_STR("--listen", &listen_arg, "ADDR:PORT"),
		{ 0 },
	};
	struct pi_node *n;
	char *text;
	size_t len;
	int err;

	if (argc > 0 && (!strcmp(argv[0], "help") ||
			 !strcmp(argv[0], "--help")))
		return metrics_help(argc, argv);
	err = parse_opts(opts, argc, argv, 0, NULL, NULL);
	if (err)
		return err;
	if (json_output)
		return usage_err("metrics has no JSON form: its output is Prometheus' text format");
	if (!listen_arg) {
		err = collect(&text, &len);
		if (err)
			return exit_code(err);
		fwrite(text, 1, len, stdout);
		free(text);
		return fflush(stdout) ? EXIT_RUNTIME : EXIT_OK;
	}
	if (parse_listen(listen_arg, &ss, &sl))
		return usage_err("invalid --listen '%s' (want ADDR:PORT, ADDR an IPv4 address or [IPv6])",
				 listen_arg);
	/* A server for a node that is not there would only answer 503:
	 * say so now, before listening. */
	err = pi_node_open(node_name, PI_OPEN_READ, lock_timeout_ms, &n);
	if (err)
		return exit_code(err);
	pi_node_close(n);
	return serve_until_signal(listen_arg, &ss, sl);
}
