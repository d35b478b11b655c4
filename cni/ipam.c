/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Main mode's IPAM: the plugin named by ipam.type, found in CNI_PATH, run
 * as a runtime runs a plugin (our environment with CNI_COMMAND replaced,
 * the network config on stdin, the result or an error on stdout).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
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

static int write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		buf += n;
		len -= n;
	}
	return 0;
}

int cni_ipam_exec(const struct cni_conf *conf, const struct cni_env *env,
		  const char *cmd, json_t **result, struct cni_err *e)
{
	const char *type = json_string_value(json_object_get(conf->ipam, "type"));
	char path[PATH_MAX], *in = NULL, *out = NULL;
	size_t out_len = 0, out_cap = 0;
	int to_child[2] = { -1, -1 }, from_child[2] = { -1, -1 };
	int status, err;
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
	pid = fork();
	if (pid < 0) {
		err = cni_fail(e, CNI_ERR_IO, "cannot run the IPAM plugin", "fork: %s",
			       strerror(errno));
		goto out;
	}
	if (pid == 0) {
		dup2(to_child[0], 0);
		dup2(from_child[1], 1);
		setenv("CNI_COMMAND", cmd, 1);
		execl(path, type, (char *)NULL);
		_exit(127);
	}
	close(to_child[0]);
	close(from_child[1]);
	to_child[0] = from_child[1] = -1;
	signal(SIGPIPE, SIG_IGN);
	err = write_all(to_child[1], in, strlen(in));
	close(to_child[1]);
	to_child[1] = -1;
	for (;;) {
		ssize_t n;

		if (out_len + 4096 > out_cap) {
			char *nb = realloc(out, out_cap + 65536);

			if (!nb)
				break;
			out = nb;
			out_cap += 65536;
		}
		n = read(from_child[0], out + out_len, out_cap - out_len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		out_len += n;
	}
	if (out)
		out[out_len] = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		json_t *ej = out ? json_loads(out, 0, NULL) : NULL;
		const char *m = json_string_value(json_object_get(ej, "msg"));
		const char *d = json_string_value(json_object_get(ej, "details"));

		err = cni_fail(e, CNI_ERR_IPAM, "IPAM plugin failed",
			       "%s %s: %s%s%s (code %lld)", type, cmd,
			       m ? m : "no message", d && *d ? ": " : "",
			       d ? d : "",
			       (long long)json_integer_value(json_object_get(ej, "code")));
		json_decref(ej);
		goto out;
	}
	err = 0;
	if (result) {
		res = out ? json_loads(out, 0, NULL) : NULL;
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
	free(in);
	free(out);
	return err;
}
