/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The library's API, used as another program would use it: linked against
 * build/libpodinject.a alone (its only global symbols are pi_*), on a node
 * and pods in namespaces this test makes and removes. Checks return codes,
 * that details reach the log callback, that nothing is printed, and the
 * state each call leaves. One PASS/FAIL line per check.
 *
 *   la-n (node): la-a 10.244.0.10, la-b 10.244.0.11, adopted "ns/la-x"
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <podinject/podinject.h>

#define NODE "la-n"

static int passed, failed;
static char last_error[1024];
static int log_lines;

static void on_log(enum pi_log_level level, const char *msg, void *ctx)
{
	log_lines++;
	if (level == PI_LOG_ERROR)
		snprintf(last_error, sizeof(last_error), "%s", msg);
}

static void check(bool ok, const char *name, const char *fmt, ...)
{
	va_list ap;

	if (ok) {
		printf("PASS lib/%s\n", name);
		passed++;
		return;
	}
	printf("FAIL lib/%s: ", name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	failed++;
}

#define CHECK_RC(name, call, want) do {					\
	int rc_ = (call);						\
	check(rc_ == (want), name, "returned %d (%s), want %d; log: %s",\
	      rc_, strerror(rc_ < 0 ? -rc_ : 0), (want), last_error);	\
} while (0)

static struct pi_addr v4(const char *s)
{
	struct pi_addr a = {};

	inet_pton(AF_INET, s, &a.a[0]);
	return a;
}

static void sh(const char *cmd)
{
	if (system(cmd))
		fprintf(stderr, "(setup command failed: %s)\n", cmd);
}

static void cleanup(void)
{
	pi_node_down(NODE, true, 1000);
	sh("ip netns del la-x 2>/dev/null; ip netns del " NODE " 2>/dev/null; "
	   "ip netns del la-a 2>/dev/null; ip netns del la-b 2>/dev/null; true");
}

/* Whatever the library does, it never writes to stdout: run `fn` with
 * stdout on a pipe and count the bytes. */
static int stdout_bytes_of(int (*fn)(void))
{
	int p[2], saved = dup(1), n = 0;
	char buf[256];
	ssize_t r;

	fflush(stdout);
	if (pipe(p))
		return -1;
	dup2(p[1], 1);
	close(p[1]);
	fn();
	fflush(stdout);
	dup2(saved, 1);
	close(saved);
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	while ((r = read(p[0], buf, sizeof(buf))) > 0)
		n += r;
	close(p[0]);
	return n;
}

static int failing_calls(void)
{
	struct pi_node *n;
	struct pi_pod_info pod;

	if (pi_node_open(NODE, PI_OPEN_READ, 1000, &n))
		return 0;
	pi_pod_get(n, "no-such-pod", &pod);
	pi_pod_del(n, "no-such-pod");
	pi_node_close(n);
	pi_node_open("la-not-up", PI_OPEN_READ, 1000, &n);
	return 0;
}

static ino_t thread_netns(void)
{
	struct stat st;

	return stat("/proc/thread-self/ns/net", &st) ? 0 : st.st_ino;
}

/* Takes the node's lock as another process would, as soon as it is free,
 * and keeps it for 1.5 s. */
static void *hold_lock_a_while(void *arg)
{
	int fd = open("/sys/fs/bpf/podinject/" NODE, O_RDONLY | O_DIRECTORY);

	(void)arg;
	if (fd >= 0 && !flock(fd, LOCK_EX))
		usleep(1500 * 1000);
	if (fd >= 0)
		close(fd);
	return NULL;
}

/* A thread of an agent in a namespace of its own (the main thread stays
 * where it was) probes the kernel's features: it is back in its own
 * namespace afterwards, not in the main thread's. */
static void *probe_in_own_netns(void *arg)
{
	ino_t *ino = arg;
	struct pi_features f;

	if (unshare(CLONE_NEWNET))
		return NULL;
	ino[0] = thread_netns();
	pi_features_probe(&f);
	ino[1] = thread_netns();
	return NULL;
}

static void count_step(const struct pi_plan_step *st, void *ctx)
{
	(*(int *)ctx)++;
}

struct membuf {
	char *buf;
	size_t len, cap;
};

static int to_mem(const char *buf, size_t len, void *ctx)
{
	struct membuf *m = ctx;

	if (m->len + len + 1 > m->cap) {
		size_t cap = (m->len + len + 1) * 2;
		char *b = realloc(m->buf, cap);

		if (!b)
			return -1;
		m->buf = b;
		m->cap = cap;
	}
	memcpy(m->buf + m->len, buf, len);
	m->len += len;
	m->buf[m->len] = 0;
	return 0;
}

static int apply_str(struct pi_node *n, const char *doc, uint32_t flags,
		     int *steps, struct pi_apply_error *err)
{
	*steps = 0;
	return pi_apply(n, doc, strlen(doc), flags, count_step, steps, err);
}

/* pi_apply and pi_export on pods la-a and la-b. */
/* The kinds the datapath writes events of now (monitor_config in DIR). */
static uint32_t monitor_kinds(const char *dir)
{
	char path[4200];
	uint32_t cfg[2] = { ~0u, 0 }, zero = 0;
	int fd;

	snprintf(path, sizeof(path), "%s/monitor_config", dir);
	fd = bpf_obj_get(path);
	if (fd < 0)
		return ~0u;
	bpf_map_lookup_elem(fd, &zero, cfg);
	close(fd);
	return cfg[0];
}

/* Two monitors in one process: each keeps its own kinds (before, the
 * second took over the first's file, named by the process id alone, and
 * the first's kinds were no longer written). */
static void test_monitors_one_process(const char *pin_dir)
{
	struct pi_monitor *m1 = NULL, *m2 = NULL;
	uint32_t drop = 1u << PI_MON_DROP, verdict = 1u << PI_MON_VERDICT;

	if (pi_monitor_open(NODE, drop, 1000, &m1) ||
	    pi_monitor_open(NODE, verdict, 1000, &m2)) {
		check(false, "monitors_one_process_open", "%s", last_error);
		goto out;
	}
	check(monitor_kinds(pin_dir) == (drop | verdict),
	      "monitors_one_process_union", "kinds %u",
	      monitor_kinds(pin_dir));
	/* and once the reader renewed them from the monitors' files */
	usleep(1500 * 1000);
	check(monitor_kinds(pin_dir) == (drop | verdict),
	      "monitors_one_process_renewed", "kinds %u",
	      monitor_kinds(pin_dir));
	pi_monitor_close(m2);
	m2 = NULL;
	check(monitor_kinds(pin_dir) == drop, "monitors_one_process_first_kept",
	      "kinds %u", monitor_kinds(pin_dir));
	pi_monitor_close(m1);
	m1 = NULL;
	check(monitor_kinds(pin_dir) == 0, "monitors_one_process_all_closed",
	      "kinds %u", monitor_kinds(pin_dir));
out:
	pi_monitor_close(m2);
	pi_monitor_close(m1);
}

static void test_apply(struct pi_node *n)
{
	const char *doc =
		"{\"apiVersion\": \"podinject/v1\", \"pods\": {\"la-a\": {"
		"\"egress\": [{\"action\": \"deny\", \"to\": \"10.244.0.11/32\","
		" \"proto\": \"udp\", \"port\": 7000}, {\"action\": \"allow\"}],"
		"\"inject\": [{\"as\": \"la-b\"}]}},"
		"\"conntrack\": {\"timeouts\": {\"udp\": 33}}}";
	const char *bad_cidr =
		"{\"apiVersion\": \"podinject/v1\", \"pods\": {\"la-a\": {"
		"\"egress\": [{\"action\": \"allow\"}, {\"action\": \"deny\","
		" \"to\": \"10.244.0.300/32\"}]}}}";
	const char *no_pod =
		"{\"apiVersion\": \"podinject/v1\", \"pods\": {\"la-zz\": {}}}";
	const char *empty = "{\"apiVersion\": \"podinject/v1\"}";
	struct pi_apply_error where;
	struct pi_rule_info *rules;
	struct membuf m = { 0 };
	uint32_t to[PI_CT_TO_MAX];
	int steps, cnt, rc;

	CHECK_RC("apply_dry_run", apply_str(n, doc, PI_APPLY_DRY_RUN, &steps, NULL), 3);
	cnt = pi_policy_list(n, "la-a", &rules);
	check(cnt == 0 && steps == 3, "apply_dry_run_changes_nothing",
	      "%d rules, %d steps reported", cnt, steps);
	if (cnt >= 0)
		free(rules);
	CHECK_RC("apply", apply_str(n, doc, 0, &steps, NULL), 3);
	cnt = pi_policy_list(n, "la-a", &rules);
	pi_ct_timeouts(n, to);
	check(cnt == 2 && rules[0].rule.action == PI_DENY &&
	      rules[0].rule.port_lo == 7000 && rules[1].rule.action == PI_ALLOW &&
	      to[PI_CT_TO_UDP] == 33 && steps == 3, "apply_result",
	      "%d rules, udp timeout %u, %d steps", cnt, to[PI_CT_TO_UDP], steps);
	if (cnt >= 0)
		free(rules);
	CHECK_RC("apply_again_changes_nothing", apply_str(n, doc, 0, &steps, NULL), 0);
	check(steps == 0, "apply_again_reports_nothing", "%d steps", steps);
	rc = apply_str(n, bad_cidr, 0, &steps, &where);
	check(rc == -EINVAL && !strcmp(where.where, "pods[\"la-a\"].egress[1].to") &&
	      strstr(where.reason, "10.244.0.300/32"), "apply_bad_cidr_where",
	      "rc %d where %s reason %s", rc, where.where, where.reason);
	rc = apply_str(n, no_pod, 0, &steps, &where);
	check(rc == -ESRCH && !strcmp(where.where, "pods[\"la-zz\"]"),
	      "apply_unknown_pod_where", "rc %d where %s", rc, where.where);
	cnt = pi_policy_list(n, "la-a", &rules);
	check(cnt == 2, "apply_refused_changes_nothing", "%d rules", cnt);
	if (cnt >= 0)
		free(rules);
	CHECK_RC("export", pi_export(n, to_mem, &m), 0);
	check(m.buf && strstr(m.buf, "\"apiVersion\": \"podinject/v1\""),
	      "export_has_version", "%s", m.buf ? m.buf : "(nothing)");
	CHECK_RC("export_applied_changes_nothing",
		 m.buf ? apply_str(n, m.buf, 0, &steps, NULL) : -1, 0);
	free(m.buf);
	CHECK_RC("apply_empty_clears", apply_str(n, empty, 0, &steps, NULL), 3);
	cnt = pi_policy_list(n, "la-a", &rules);
	pi_ct_timeouts(n, to);
	check(cnt == 0 && to[PI_CT_TO_UDP] == 60, "apply_empty_result",
	      "%d rules, udp timeout %u", cnt, to[PI_CT_TO_UDP]);
	if (cnt >= 0)
		free(rules);
}

int main(void)
{
	struct pi_node_up_opts up = { .lock_timeout_ms = 5000 };
	struct pi_pod_spec a = { .name = "la-a", .has4 = true,
				 .ip4 = v4("10.244.0.10") };
	struct pi_pod_spec b = { .name = "la-b", .has4 = true,
				 .ip4 = v4("10.244.0.11") };
	struct pi_rule deny = { .action = PI_DENY, .proto = 17, .port_lo = 7000,
				.port_hi = 7000 };
	struct pi_inject_auth_info *auths;
	struct pi_rule_info *rules;
	struct pi_pod_info *pods, pod;
	struct pi_node_info info;
	struct pi_node *n = NULL;
	const char *as_b = "la-b";
	uint32_t id, path;
	int cnt, fd;

	if (geteuid()) {
		printf("SKIP lib/all: needs root\n");
		return 0;
	}
	pi_set_log(on_log, NULL);
	cleanup();

	{
		ino_t ino[2] = { 0, 0 };
		pthread_t t;

		if (!pthread_create(&t, NULL, probe_in_own_netns, ino))
			pthread_join(t, NULL);
		check(ino[0] && ino[0] != thread_netns() && ino[1] == ino[0],
		      "features_probe_keeps_thread_netns",
		      "thread's namespace %lu, after the probe %lu, main thread's %lu",
		      (unsigned long)ino[0], (unsigned long)ino[1],
		      (unsigned long)thread_netns());
	}

	CHECK_RC("node_up", pi_node_up(NODE, &up, &info), 0);
	check(info.pods == 0 && !strcmp(info.name, NODE), "node_up_info",
	      "pods %d name %s", info.pods, info.name);
	CHECK_RC("node_up_twice", pi_node_up(NODE, &up, NULL), -EALREADY);
	test_monitors_one_process(info.pin_dir);
	CHECK_RC("node_open_bad_name", pi_node_open("Bad Name", PI_OPEN_READ, 100, &n), -EINVAL);
	CHECK_RC("node_open_not_up", pi_node_open("la-not-up", PI_OPEN_READ, 100, &n), -ENOENT);
	check(n == NULL, "node_open_failed_gives_null", "node %p", (void *)n);

	CHECK_RC("open_write", pi_node_open(NODE, PI_OPEN_WRITE, 1000, &n), 0);
	CHECK_RC("pod_add_a", pi_pod_add(n, &a, &pod), 0);
	check(pod.id == 0 && !strcmp(pod.ifname, "eth0") &&
	      !strcmp(pod.hostdev, "pi-la-a") &&
	      (pod.meta_flags & PI_META_OWNS_NETNS), "pod_add_result",
	      "id %u ifname %s hostdev %s", pod.id, pod.ifname, pod.hostdev);
	CHECK_RC("pod_add_b", pi_pod_add(n, &b, NULL), 0);
	CHECK_RC("pod_add_duplicate_name", pi_pod_add(n, &a, NULL), -EEXIST);
	b.name = "la-c";
	CHECK_RC("pod_add_duplicate_address", pi_pod_add(n, &b, NULL), -EADDRINUSE);
	b.name = "Bad";
	CHECK_RC("pod_add_bad_name", pi_pod_add(n, &b, NULL), -EINVAL);
	check(strstr(last_error, "invalid pod name") != NULL, "errors_reach_the_log",
	      "last error: %s", last_error);
	cnt = pi_pod_list(n, &pods);
	check(cnt == 2 && pods[0].id != pods[1].id, "pod_list", "count %d", cnt);
	free(pods);

	CHECK_RC("policy_add", pi_policy_add(n, "la-a", PI_DIR_EGRESS, &deny, 0, &id), 0);
	CHECK_RC("policy_add_unknown_pod", pi_policy_add(n, "la-zz", PI_DIR_EGRESS, &deny, 0, &id), -ESRCH);
	{
		/* only rules a document can say: export, then apply */
		struct pi_rule odd = deny;

		odd.proto = IPPROTO_ICMPV6;
		odd.port_lo = odd.port_hi = 0;
		CHECK_RC("policy_add_proto_not_in_documents",
			 pi_policy_add(n, "la-a", PI_DIR_EGRESS, &odd, 0, NULL), -EINVAL);
		odd = deny;
		odd.family = AF_INET;
		odd.prefixlen = 33;
		CHECK_RC("policy_add_prefix_too_long",
			 pi_policy_add(n, "la-a", PI_DIR_EGRESS, &odd, 0, NULL), -EINVAL);
		odd = deny;
		odd.prefixlen = 8;
		CHECK_RC("policy_add_prefix_without_family",
			 pi_policy_add(n, "la-a", PI_DIR_EGRESS, &odd, 0, NULL), -EINVAL);
		odd = deny;
		odd.family = AF_INET;
		odd.prefixlen = 8;
		odd.addr.a[0] = htonl(0x0a000001);	/* 10.0.0.1/8 */
		CHECK_RC("policy_add_host_bits",
			 pi_policy_add(n, "la-a", PI_DIR_EGRESS, &odd, 0, NULL), -EINVAL);
		odd = deny;
		odd.proto = IPPROTO_TCP;
		odd.port_lo = 7000;
		odd.port_hi = 0;	/* stored, it was "any port" */
		CHECK_RC("policy_add_port_lo_alone",
			 pi_policy_add(n, "la-a", PI_DIR_EGRESS, &odd, 0, NULL), -EINVAL);
	}
	cnt = pi_policy_list(n, "la-a", &rules);
	check(cnt == 1 && rules[0].rule.id == id && rules[0].rule.action == PI_DENY,
	      "policy_list", "count %d", cnt);
	if (cnt > 0)
		free(rules);
	cnt = pi_policy_list_pod(n, &pod, &rules);
	check(cnt == 1 && rules[0].rule.id == id && rules[0].dir == PI_DIR_EGRESS,
	      "policy_list_pod", "count %d", cnt);
	if (cnt > 0)
		free(rules);
	/* a's flow to b (ICMP): the one-walk count of every pod agrees with
	 * the pod's own */
	sh("ip netns exec la-a ping -c 1 -W 2 10.244.0.11 >/dev/null");
	{
		static struct pi_ct_counts all[PI_MAX_PODS];
		struct pi_ct_counts one;

		CHECK_RC("ct_counts_all", pi_ct_counts_all(n, all, PI_MAX_PODS), 0);
		pi_ct_counts(n, &pod, &one);
		check(one.entries >= 1 && all[pod.id].entries == one.entries &&
		      all[pod.id].by_state[PI_CT_ESTABLISHED] ==
		      one.by_state[PI_CT_ESTABLISHED], "ct_counts_all_by_pod",
		      "all[a] %u, pod a %u", all[pod.id].entries, one.entries);
	}
	CHECK_RC("policy_del_missing", pi_policy_del(n, "la-a", PI_DIR_EGRESS, id + 100), -ESRCH);
	CHECK_RC("policy_del", pi_policy_del(n, "la-a", PI_DIR_EGRESS, id), 0);

	CHECK_RC("inject_allow", pi_inject_allow(n, "la-a", &as_b, 1, 0, &path), 0);
	check(path == (uint32_t)pi_inject_path_auto(), "inject_allow_auto_path",
	      "path %u", path);
	CHECK_RC("inject_as_self", pi_inject_allow(n, "la-a", (const char *[]){ "la-a" }, 1, 0, NULL), -EINVAL);
	cnt = pi_inject_list(n, &auths);
	check(cnt == 1 && !strcmp(auths[0].injector, "la-a") &&
	      !strcmp(auths[0].as, "la-b"), "inject_list", "count %d", cnt);
	free(auths);
	CHECK_RC("inject_deny", pi_inject_deny(n, "la-a", NULL, 0), 1);
	/* The head program's link went with the deny; the kernel releases
	 * it after the unlink, and an allow right behind must wait for
	 * that rather than fail with -EEXIST. */
	{
		int bad = 0, rc = 0;

		for (int i = 0; i < 20 && !bad; i++) {
			rc = pi_inject_allow(n, "la-a", &as_b, 1, 0, NULL);
			bad = rc || pi_inject_deny(n, "la-a", NULL, 0) != 1;
		}
		check(!bad, "inject_allow_after_deny",
		      "allow after deny returned %d; log: %s", rc, last_error);
	}

	test_apply(n);

	/* An adopted pod, with a Kubernetes-style name. */
	sh("ip netns add la-x && ip -n " NODE " link add la-xh type veth peer name net1 netns la-x && "
	   "ip -n la-x addr add 10.244.0.50/32 dev net1 && ip -n la-x link set net1 up && "
	   "ip -n " NODE " link set la-xh up");
	{
		struct pi_adopt_spec ad = { .name = "ns/la-x", .netns = "la-x",
					    .hostdev = "la-xh",
					    .attach_id = "c0ffee/net1" };

		CHECK_RC("adopt", pi_pod_adopt(n, &ad, &pod), 0);
		check(!strcmp(pod.ifname, "net1") && pod.ip4 == v4("10.244.0.50").a[0] &&
		      !(pod.meta_flags & PI_META_OWNS_DEV), "adopt_result",
		      "ifname %s", pod.ifname);
		CHECK_RC("adopt_by_attach_id", pi_pod_get_by_attach_id(n, "c0ffee/net1", &pod), 0);
		CHECK_RC("adopt_check", pi_pod_check(n, &pod), 0);
		ad.hostdev = "la-nodev";
		ad.name = "ns/other";
		CHECK_RC("adopt_no_device", pi_pod_adopt(n, &ad, NULL), -ENXIO);
		CHECK_RC("adopt_del", pi_pod_del(n, "ns/la-x"), 0);
		check(system("ip -n " NODE " link show la-xh >/dev/null 2>&1") == 0,
		      "adopt_del_keeps_device", "la-xh is gone");
		CHECK_RC("adopt_by_attach_id_gone", pi_pod_get_by_attach_id(n, "c0ffee/net1", &pod), -ESRCH);
	}

	/* While this handle holds the lock, another writer gets -EBUSY in
	 * its time bound, and a reader too. */
	{
		pid_t child = fork();

		if (child == 0) {
			struct pi_node *m;
			int rc = pi_node_open(NODE, PI_OPEN_READ, 300, &m);

			_exit(rc == -EBUSY ? 0 : 1);
		}
		int st = 0;

		waitpid(child, &st, 0);
		check(WIFEXITED(st) && WEXITSTATUS(st) == 0, "lock_busy",
		      "a second opener was not refused with -EBUSY");
	}
	pi_node_close(n);
	n = NULL;

	/* A waiter takes the lock when it is released, not at its next look
	 * (a polled lock slept up to 64 ms between looks: about 30 ms lost
	 * per hand-over, 160 ms over these five). What an open costs without
	 * a wait (the node's pins opened, timed right after each hand-over)
	 * is taken off: in an emulated guest beside a busy host it was most
	 * of 188 ms over the five, and it is not the lock's. */
	{
		long long lost_us = 0, open_us = 0;
		int i, got = 0;

		for (i = 0; i < 5; i++) {
			long long released = 0, taken;
			int p[2];
			char c;
			pid_t holder;

			if (pipe(p))
				break;
			holder = fork();
			if (holder == 0) {
				int f = open("/sys/fs/bpf/podinject/" NODE, O_RDONLY | O_DIRECTORY);
				struct timespec ts;
				long long t;

				if (f < 0 || flock(f, LOCK_EX) || write(p[1], "h", 1) != 1)
					_exit(1);
				usleep((300 + 50 * i) * 1000);
				clock_gettime(CLOCK_MONOTONIC, &ts);
				t = ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
				if (write(p[1], &t, sizeof(t)) != sizeof(t))
					_exit(1);
				flock(f, LOCK_UN);
				_exit(0);
			}
			close(p[1]);
			if (read(p[0], &c, 1) == 1 &&
			    !pi_node_open(NODE, PI_OPEN_WRITE, 5000, &n)) {
				struct timespec ts;

				clock_gettime(CLOCK_MONOTONIC, &ts);
				taken = ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
				if (read(p[0], &released, sizeof(released)) == sizeof(released)) {
					lost_us += taken - released;
					got++;
				}
				pi_node_close(n);
				n = NULL;
				clock_gettime(CLOCK_MONOTONIC, &ts);
				taken = ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
				if (!pi_node_open(NODE, PI_OPEN_WRITE, 5000, &n)) {
					clock_gettime(CLOCK_MONOTONIC, &ts);
					open_us += ts.tv_sec * 1000000LL +
						   ts.tv_nsec / 1000 - taken;
					pi_node_close(n);
					n = NULL;
				}
			}
			close(p[0]);
			waitpid(holder, NULL, 0);
		}
		/* 179 ms were lost with the 64 ms polling before; under the
		 * lab's emulation (two guests on two cores) a hand-over that
		 * blocks in flock() took 10 ms once (debian-6.12, 2026-12-05),
		 * so the bound there is wider, still below the polling's */
		long long bound = getenv("PODINJECT_LAB") ? 120000 : 50000;

		check(got == 5 && lost_us - open_us < bound, "lock_handoff_prompt",
		      "%d of 5 hand-overs, %lld us between the releases and the takes, of which opens without a wait %lld us (want under %lld us)",
		      got, lost_us, open_us, bound - 1);
	}

	/* A lock held from outside (as another process would) is seen. */
	fd = open("/sys/fs/bpf/podinject/" NODE, O_RDONLY | O_DIRECTORY);
	check(fd >= 0 && !flock(fd, LOCK_EX), "lock_is_the_pin_dir",
	      "cannot flock the pin directory");
	CHECK_RC("lock_busy_timeout", pi_node_open(NODE, PI_OPEN_WRITE, 200, &n), -EBUSY);
	close(fd);
	CHECK_RC("lock_free_again", pi_node_open(NODE, PI_OPEN_READ, 200, &n), 0);
	check(stdout_bytes_of(failing_calls) == 0, "prints_nothing",
	      "the library wrote to stdout");
	log_lines = 0;
	failing_calls();
	check(log_lines >= 3, "failures_are_logged", "%d log lines", log_lines);

	/* A handle opened read-only shares the lock with other readers:
	 * every call that would change the node is refused, -EBADF, and
	 * changes nothing. */
	{
		struct pi_pod_spec c = { .name = "la-c", .has4 = true,
					 .ip4 = v4("10.244.0.12") };
		struct pi_probe_spec ps = { .from = "la-a", .family = AF_INET,
					    .dst = v4("10.244.0.11"),
					    .timeout_ms = 100 };
		struct pi_proxy_rule pr = { .port = 15001 };
		struct pi_probe_result *res = NULL;
		uint32_t to[PI_CT_TO_MAX], to_after[PI_CT_TO_MAX];
		int steps;

		last_error[0] = 0;
		CHECK_RC("read_only_pod_add", pi_pod_add(n, &c, NULL), -EBADF);
		check(strstr(last_error, "read-only") != NULL,
		      "read_only_refusal_logged", "last error: %s", last_error);
		CHECK_RC("read_only_pod_del", pi_pod_del(n, "la-b"), -EBADF);
		CHECK_RC("read_only_pod_check", pi_pod_get(n, "la-a", &pod) ?:
			 pi_pod_check(n, &pod), -EBADF);
		CHECK_RC("read_only_policy_add",
			 pi_policy_add(n, "la-a", PI_DIR_EGRESS, &deny, 0, &id), -EBADF);
		CHECK_RC("read_only_policy_del",
			 pi_policy_del(n, "la-a", PI_DIR_EGRESS, 0), -EBADF);
		CHECK_RC("read_only_inject_allow",
			 pi_inject_allow(n, "la-a", &as_b, 1, 0, NULL), -EBADF);
		CHECK_RC("read_only_inject_deny",
			 pi_inject_deny(n, "la-a", NULL, 0), -EBADF);
		CHECK_RC("read_only_proxy_add",
			 pi_proxy_add(n, "la-b", "la-a", &pr), -EBADF);
		CHECK_RC("read_only_proxy_del", pi_proxy_del(n, "la-b", "la-a"), -EBADF);
		CHECK_RC("read_only_probe", pi_probe_run(n, &ps, &res), -EBADF);
		free(res);
		CHECK_RC("read_only_apply",
			 apply_str(n, "{\"apiVersion\": \"podinject/v1\"}", 0,
				   &steps, NULL), -EBADF);
		check(apply_str(n, "{\"apiVersion\": \"podinject/v1\"}",
				PI_APPLY_DRY_RUN, &steps, NULL) >= 0,
		      "read_only_apply_dry_run", "a dry run only reads: %s",
		      last_error);
		CHECK_RC("read_only_ct_flush", pi_ct_flush(n, "la-a"), -EBADF);
		pi_ct_timeouts(n, to);
		CHECK_RC("read_only_ct_timeout",
			 pi_ct_set_timeout(n, 0, to[0] + 7), -EBADF);
		pi_ct_timeouts(n, to_after);
		cnt = pi_pod_list(n, &pods);
		check(cnt == 2 && !pi_pod_get(n, "la-b", &pod) &&
		      to_after[0] == to[0], "read_only_changed_nothing",
		      "pods %d, ct timeout %u -> %u", cnt, to[0], to_after[0]);
		if (cnt > 0)
			free(pods);
		cnt = pi_policy_list(n, "la-a", &rules);
		check(cnt == 0, "read_only_no_rule", "%d rules", cnt);
		if (cnt > 0)
			free(rules);
	}
	pi_node_close(n);
	n = NULL;
	CHECK_RC("open_write_again", pi_node_open(NODE, PI_OPEN_WRITE, 1000, &n), 0);

	/* A probe gives the lock up while it waits for answers; one that
	 * cannot take it back (another holds it past the probe's bound)
	 * tears its own state down without it, and its handle then refuses
	 * every change, -EBADF: the node may have changed meanwhile. */
	{
		struct pi_probe_spec ps = { .from = "la-a", .family = AF_INET,
					    .dst = v4("10.244.0.99"),
					    .count = 1, .timeout_ms = 600,
					    .lock_timeout_ms = 100 };
		struct pi_probe_result *res = NULL;
		pthread_t t;
		bool started = !pthread_create(&t, NULL, hold_lock_a_while,
					       NULL);

		pi_probe_run(n, &ps, &res);
		free(res);
		last_error[0] = 0;
		CHECK_RC("lock_lost_refuses_changes",
			 pi_policy_add(n, "la-a", PI_DIR_EGRESS, &deny, 0, &id),
			 -EBADF);
		check(strstr(last_error, "lock") != NULL, "lock_lost_said",
		      "last error: %s", last_error);
		if (started)
			pthread_join(t, NULL);
		pi_node_close(n);
		n = NULL;
		CHECK_RC("open_write_after_lock_lost",
			 pi_node_open(NODE, PI_OPEN_WRITE, 1000, &n), 0);
	}
	CHECK_RC("pod_del", pi_pod_del(n, "la-a"), 0);
	CHECK_RC("pod_del_again", pi_pod_del(n, "la-a"), -ESRCH);
	check(system("ip netns pids la-a >/dev/null 2>&1") != 0, "pod_del_removes_netns",
	      "namespace la-a is still there");
	pi_node_close(n);

	/* A node of this version: nothing to migrate, la-b's two hooks get
	 * this build's programs; a node held by another caller is busy. */
	{
		struct pi_node_upgrade_opts uo = { .lock_timeout_ms = 100 };
		struct pi_node_upgrade_info ui;

		CHECK_RC("node_upgrade_current", pi_node_upgrade(NODE, NULL, &ui), 0);
		check(ui.from_abi == pi_abi_version() &&
		      ui.to_abi == pi_abi_version() &&
		      !ui.migrations && ui.hooks == 2 && !ui.resumed &&
		      !ui.rolled_back, "node_upgrade_current_info",
		      "from %u to %u, %d migrations, %d hooks", ui.from_abi,
		      ui.to_abi, ui.migrations, ui.hooks);
		CHECK_RC("node_upgrade_bad_name", pi_node_upgrade("Bad Name", NULL, &ui), -EINVAL);
		CHECK_RC("node_upgrade_not_up", pi_node_upgrade("la-not-up", &uo, &ui), -ENOENT);
		if (!pi_node_open(NODE, PI_OPEN_READ, 1000, &n)) {
			CHECK_RC("node_upgrade_busy", pi_node_upgrade(NODE, &uo, &ui), -EBUSY);
			pi_node_close(n);
		} else {
			check(false, "node_upgrade_busy", "cannot open the node");
		}
	}

	CHECK_RC("node_down", pi_node_down(NODE, false, 1000), 0);
	check(access("/sys/fs/bpf/podinject/" NODE, F_OK) != 0, "node_down_pins_gone",
	      "pins left");
	check(system("ip netns pids la-b >/dev/null 2>&1") != 0, "node_down_removes_pods",
	      "namespace la-b is still there");
	CHECK_RC("node_down_not_up", pi_node_down(NODE, false, 100), -ENOENT);

	/* A device named by the caller that does not exist: -ENXIO, as the
	 * header says, and the failed node up leaves nothing. */
	up.uplink = "la-nodev";
	CHECK_RC("node_up_missing_uplink", pi_node_up(NODE, &up, NULL), -ENXIO);
	check(access("/sys/fs/bpf/podinject/" NODE, F_OK) != 0 &&
	      system("ip netns pids " NODE " >/dev/null 2>&1") != 0,
	      "node_up_missing_uplink_left_nothing", "pins or namespace left");
	cleanup();
	return failed ? 1 : 0;
}
