/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Main mode's IPAM: the plugin named by ipam.type, found in CNI_PATH, run
 * as a runtime runs a plugin (our environment with CNI_COMMAND replaced,
 * the network config on stdin, the result or an error on stdout), for at
 * most ipamTimeoutMs and CNI_IPAM_OUT_MAX bytes of output.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include "podinject_util.h"
#include "cni.h"

static int find_plugin(const char *cni_path, const char *type, char *out,
		       size_t len)
{
	const char *p = cni_path;

	if (!*type || strchr(type, '/'))
		return -EINVAL;
	while (p && *p) {
		const char *end = strchr(p, ':');
		size_t n = end ? (size_t)(end - p) : strlen(p);

		if (n) {
			snprintf(out, len, "%.*s/%s", (int)n, p, type);
			if (!access(out, X_OK))
				return 0;
		}
		p = end ? end + 1 : NULL;
	}
	return -ENOENT;
}

/* Ends the plugin and whatever it started (its own process group), then
 * reaps it: nothing of it outlives the call. */
static void end_plugin(pid_t pid, int *status)
{
	kill(-pid, SIGKILL);
	while (waitpid(pid, status, 0) < 0 && errno == EINTR)
		;
}

/* Waits for the plugin to exit until `deadline`: a plugin that closed
 * its stdout is not done yet. 1 exited, 0 still running at the deadline. */
static int reap_by(pid_t pid, int *status, long long deadline)
{
	for (;;) {
		pid_t r = waitpid(pid, status, WNOHANG);

		if (r == pid)
			return 1;
		if (r < 0 && errno != EINTR)
			return 1;	/* not ours to wait for: ECHILD */
		if (pi_mono_ms() >= deadline)
			return 0;
		usleep(2000);
	}
}

enum run_end { RUN_DONE, RUN_TIMEOUT, RUN_TOO_BIG, RUN_NOMEM, RUN_IO };

struct run {
	int to_child, from_child;
	const char *in;
	size_t in_len, in_off;
	char *out;
	size_t out_len, out_cap;
	int write_err;		/* the plugin did not take all its config */
	int io_err;		/* poll or read failed */
};

/* Feeds the config and takes the output at once, until the plugin closes
 * its stdout or `deadline`: a plugin that writes before it reads cannot
 * block against us, and one that never stops writing, or never closes,
 * is cut off. */
static enum run_end run_io(struct run *r, long long deadline)
{
	while (r->from_child >= 0) {
		struct pollfd p[2] = {
			{ .fd = r->from_child, .events = POLLIN },
			{ .fd = r->to_child, .events = POLLOUT },
		};
		long long left = deadline - pi_mono_ms();
		ssize_t n;

		if (left <= 0)
			return RUN_TIMEOUT;
		if (poll(p, 2, left > INT_MAX ? INT_MAX : (int)left) < 0) {
			if (errno == EINTR)
				continue;
			r->io_err = -errno;
			return RUN_IO;
		}
		if (r->to_child >= 0 && p[1].revents) {
			n = write(r->to_child, r->in + r->in_off,
				  r->in_len - r->in_off);
			if (n < 0 && errno != EINTR && errno != EAGAIN)
				r->write_err = -errno;
			if (n > 0)
				r->in_off += n;
			if (r->write_err || r->in_off == r->in_len) {
				close(r->to_child);
				r->to_child = -1;
			}
		}
		if (!p[0].revents)
			continue;
		if (r->out_len == r->out_cap) {
			size_t cap = r->out_cap ? r->out_cap * 2 : 65536;
			char *nb;

			if (r->out_cap >= CNI_IPAM_OUT_MAX)
				return RUN_TOO_BIG;
			if (cap > CNI_IPAM_OUT_MAX)
				cap = CNI_IPAM_OUT_MAX;
			nb = realloc(r->out, cap + 1);
			if (!nb)
				return RUN_NOMEM;
			r->out = nb;
			r->out_cap = cap;
		}
		n = read(r->from_child, r->out + r->out_len,
			 r->out_cap - r->out_len);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0) {
			r->io_err = -errno;
			return RUN_IO;
		}
		if (!n) {
			close(r->from_child);
			r->from_child = -1;
			break;
		}
		r->out_len += n;
	}
	return RUN_DONE;
}

int cni_ipam_exec(const struct cni_conf *conf, const struct cni_env *env,
		  const char *cmd, json_t **result, struct cni_err *e)
{
	const char *type = json_string_value(json_object_get(conf->ipam, "type"));
	int to_child[2] = { -1, -1 }, from_child[2] = { -1, -1 };
	struct run r = { .to_child = -1, .from_child = -1 };
	char path[PATH_MAX], *in = NULL;
	long long deadline;
	enum run_end end;
	int status = 0, err;
	pid_t pid;
	json_t *res;

	if (result)
		*result = NULL;
	if (!type)
		return cni_fail(e, CNI_ERR_CONFIG, "ipam needs a type", NULL);
	if (!env->path || !*env->path)
		return cni_fail(e, CNI_ERR_ENV, "CNI_PATH is needed to run the IPAM plugin", NULL);
	if (find_plugin(env->path, type, path, sizeof(path)))
		return cni_fail(e, CNI_ERR_CONFIG, "IPAM plugin not found",
				"no executable %s in CNI_PATH %s", type, env->path);
	in = json_dumps(conf->root, JSON_COMPACT);
	if (!in)
		return cni_fail(e, CNI_ERR_INTERNAL, "out of memory", NULL);
	if (pipe2(to_child, O_CLOEXEC) || pipe2(from_child, O_CLOEXEC)) {
		err = cni_fail(e, CNI_ERR_IO, "cannot run the IPAM plugin", "pipe: %s",
			       strerror(errno));
		goto out;
	}
	/* a plugin that closes its stdin early makes a write fail (EPIPE),
	 * not end this process */
	signal(SIGPIPE, SIG_IGN);
	deadline = pi_mono_ms() + conf->ipam_timeout_ms;
	pid = fork();
	if (pid < 0) {
		err = cni_fail(e, CNI_ERR_IO, "cannot run the IPAM plugin", "fork: %s",
			       strerror(errno));
		goto out;
	}
	if (pid == 0) {
		/* its own group, so that a timeout ends what it started too;
		 * and it goes when we are killed (a runtime's own timeout) */
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(to_child[0], 0);
		dup2(from_child[1], 1);
		setenv("CNI_COMMAND", cmd, 1);
		/* the attachment asked about (GC's DEL of a removed pod's),
		 * or none (GC, VERSION) */
		if (env->container_id)
			setenv("CNI_CONTAINERID", env->container_id, 1);
		else
			unsetenv("CNI_CONTAINERID");
		if (env->ifname)
			setenv("CNI_IFNAME", env->ifname, 1);
		else
			unsetenv("CNI_IFNAME");
		execl(path, type, (char *)NULL);
		_exit(127);
	}
	setpgid(pid, pid);	/* both sides: whichever runs first */
	close(to_child[0]);
	close(from_child[1]);
	to_child[0] = from_child[1] = -1;
	r.to_child = to_child[1];
	r.from_child = from_child[0];
	to_child[1] = from_child[0] = -1;
	fcntl(r.to_child, F_SETFL, O_NONBLOCK);
	r.in = in;
	r.in_len = strlen(in);
	end = run_io(&r, deadline);
	if (end == RUN_DONE && !reap_by(pid, &status, deadline))
		end = RUN_TIMEOUT;
	/* it exited before it read all of its config */
	if (end == RUN_DONE && r.to_child >= 0 && !r.write_err)
		r.write_err = -EPIPE;
	if (end != RUN_DONE) {
		end_plugin(pid, &status);
		if (end == RUN_TIMEOUT)
			err = cni_fail(e, CNI_ERR_IPAM, "IPAM plugin timed out",
				       "%s %s did not finish within %d ms (ipamTimeoutMs); it was killed",
				       type, cmd, conf->ipam_timeout_ms);
		else if (end == RUN_TOO_BIG)
			err = cni_fail(e, CNI_ERR_IPAM, "IPAM plugin output too large",
				       "%s %s printed more than %d bytes; it was killed",
				       type, cmd, CNI_IPAM_OUT_MAX);
		else if (end == RUN_NOMEM)
			err = cni_fail(e, CNI_ERR_INTERNAL, "out of memory",
				       "reading the output of %s %s", type, cmd);
		else
			err = cni_fail(e, CNI_ERR_IO, "cannot run the IPAM plugin",
				       "reading from %s %s: %s", type, cmd,
				       strerror(-r.io_err));
		goto out;
	}
	if (r.out)
		r.out[r.out_len] = 0;
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		json_t *ej = r.out ? json_loads(r.out, 0, NULL) : NULL;
		const char *m = json_string_value(json_object_get(ej, "msg"));
		const char *d = json_string_value(json_object_get(ej, "details"));

		err = cni_fail(e, CNI_ERR_IPAM, "IPAM plugin failed",
			       "%s %s: %s%s%s (code %lld)", type, cmd,
			       m ? m : "no message", d && *d ? ": " : "",
			       d ? d : "",
			       (long long)json_integer_value(json_object_get(ej, "code")));
		e->ipam_code = json_integer_value(json_object_get(ej, "code"));
		e->ipam_refused = WIFEXITED(status);
		json_decref(ej);
		goto out;
	}
	/* It exited 0 without its whole config: what it printed answers
	 * some other question. */
	if (r.write_err) {
		err = cni_fail(e, CNI_ERR_IPAM, "IPAM plugin did not take its config",
			       "writing the network config to %s %s: %s", type,
			       cmd, strerror(-r.write_err));
		goto out;
	}
	err = 0;
	if (result) {
		res = r.out ? json_loads(r.out, 0, NULL) : NULL;
		if (!json_is_object(res)) {
			json_decref(res);
			err = cni_fail(e, CNI_ERR_IPAM, "IPAM plugin returned no result",
				       "%s %s printed no JSON object", type, cmd);
			goto out;
		}
		*result = res;
	}
out:
	for (int i = 0; i < 2; i++) {
		if (to_child[i] >= 0)
			close(to_child[i]);
		if (from_child[i] >= 0)
			close(from_child[i]);
	}
	if (r.to_child >= 0)
		close(r.to_child);
	if (r.from_child >= 0)
		close(r.from_child);
	free(in);
	free(r.out);
	return err;
}
