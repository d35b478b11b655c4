// SPDX-License-Identifier: GPL-2.0
/*
 * cnirun: runs one conflist's ADD, then its DEL, for N pods the way a
 * container runtime (libcni) does — each plugin in order on ADD with the
 * previous plugin's result as prevResult, in reverse on DEL with the cached
 * final result — and reports how long each pod's whole chain took, as the
 * runtime waits for it. Up to C pods are in flight at once, each in a
 * process of its own, as a kubelet's parallel sandbox setups are.
 *
 *   cnirun --conflist FILE --cni-path DIR --netns PREFIX --count N
 *          [--concurrency C] [--id-base K] [--state DIR]
 *
 * Pod i (0 <= i < N) uses the namespace /run/netns/PREFIXi (made by the
 * caller: the runtime makes it before ADD, so it is not timed), container
 * id K+i as 64 hex digits, CNI_IFNAME eth0, and
 * CNI_ARGS "IgnoreUnknown=1;K8S_POD_NAMESPACE=bench;K8S_POD_NAME=PREFIXi".
 * Prints one JSON object: {"add_ms": [...], "del_ms": [...],
 * "add_failed": n, "del_failed": n, "first_error": "...", "plugins":
 * [{"type": T, "add_ms": [...], "del_ms": [...]}, ...]}: the pods' chains,
 * then each plugin's own part of them (its process, from spawn to exit),
 * in the conflist's order.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

struct run {
	json_t *list;		/* the conflist */
	const char *cni_path;
	const char *netns_prefix;
	const char *state;	/* where each pod's final ADD result is kept */
	unsigned long id_base;
};

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Runs one plugin: CONF on its stdin, its stdout into *out (malloc'd).
 * Returns the plugin's exit status, or -1 if it could not be run. */
static int run_plugin(const struct run *r, const char *type, const char *cmd,
		      int pod, const char *conf, char **out)
{
	char path[PATH_MAX], e_cmd[64], e_id[128], e_ns[PATH_MAX + 16],
	     e_args[256], e_path[PATH_MAX + 16];
	char *envp[] = { e_cmd, e_id, e_ns, "CNI_IFNAME=eth0", e_args, e_path,
			 "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };
	char *argv[] = { path, NULL };
	int in[2], outp[2], status;
	posix_spawn_file_actions_t fa;
	size_t len = 0, cap = 4096;
	ssize_t n;
	pid_t pid;

	snprintf(path, sizeof(path), "%s/%s", r->cni_path, type);
	snprintf(e_cmd, sizeof(e_cmd), "CNI_COMMAND=%s", cmd);
	snprintf(e_id, sizeof(e_id), "CNI_CONTAINERID=%064lx", r->id_base + pod);
	snprintf(e_ns, sizeof(e_ns), "CNI_NETNS=/run/netns/%s%d", r->netns_prefix, pod);
	snprintf(e_args, sizeof(e_args),
		 "CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=bench;K8S_POD_NAME=%s%d",
		 r->netns_prefix, pod);
	snprintf(e_path, sizeof(e_path), "CNI_PATH=%s", r->cni_path);

	if (pipe2(in, O_CLOEXEC) || pipe2(outp, O_CLOEXEC))
		return -1;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_adddup2(&fa, outp[1], 1);
	if (posix_spawn(&pid, path, &fa, NULL, argv, envp)) {
		posix_spawn_file_actions_destroy(&fa);
		close(in[0]); close(in[1]); close(outp[0]); close(outp[1]);
		return -1;
	}
	posix_spawn_file_actions_destroy(&fa);
	close(in[0]);
	close(outp[1]);
	/* A config is far smaller than a pipe's buffer: write it all, then
	 * read the answer. */
	if (write(in[1], conf, strlen(conf)) < 0)
		fprintf(stderr, "cnirun: writing %s's config: %s\n", type, strerror(errno));
	close(in[1]);
	*out = malloc(cap);
	while (*out) {
		if (len + 1 >= cap) {
			char *p = realloc(*out, cap *= 2);

			if (!p) {
				free(*out);
				*out = NULL;
				break;
			}
			*out = p;
		}
		n = read(outp[0], *out + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += n;
	}
	if (*out)
		(*out)[len] = 0;
	close(outp[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

#define MAX_PLUGINS	16

/* One pod's chain; returns 0 or the first failing plugin's status, with
 * its answer in ERR, and each plugin's time in EACH (conflist order; -1
 * for one not run). */
static int run_chain(const struct run *r, const char *cmd, int pod,
		     char *err, size_t errlen, double *each)
{
	json_t *plugins = json_object_get(r->list, "plugins");
	const char *ver = json_string_value(json_object_get(r->list, "cniVersion"));
	const char *name = json_string_value(json_object_get(r->list, "name"));
	size_t n = json_array_size(plugins), k;
	char cache[PATH_MAX];
	json_t *prev = NULL;
	int first = 0;

	for (k = 0; k < MAX_PLUGINS; k++)
		each[k] = -1;
	snprintf(cache, sizeof(cache), "%s/%s%d.json", r->state, r->netns_prefix, pod);
	if (strcmp(cmd, "DEL") == 0)
		prev = json_load_file(cache, 0, NULL);
	for (k = 0; k < n; k++) {
		size_t i = strcmp(cmd, "DEL") == 0 ? n - 1 - k : k;
		json_t *conf = json_deep_copy(json_array_get(plugins, i));
		const char *type = json_string_value(json_object_get(conf, "type"));
		char *text, *out = NULL;
		double t0;
		int rc;

		json_object_set_new(conf, "cniVersion", json_string(ver));
		json_object_set_new(conf, "name", json_string(name));
		if (prev)
			json_object_set(conf, "prevResult", prev);
		text = json_dumps(conf, JSON_COMPACT);
		t0 = now_ms();
		rc = type && text ? run_plugin(r, type, cmd, pod, text, &out) : -1;
		if (i < MAX_PLUGINS)
			each[i] = now_ms() - t0;
		free(text);
		json_decref(conf);
		if (rc != 0) {
			if (!first) {
				first = rc ? rc : -1;
				snprintf(err, errlen, "%s %s: status %d: %s", cmd,
					 type ? type : "?", rc, out ? out : "");
			}
			free(out);
			if (strcmp(cmd, "DEL") == 0)
				continue;
			break;
		}
		if (strcmp(cmd, "ADD") == 0) {
			json_t *res = json_loads(out ? out : "", 0, NULL);

			if (!res) {
				first = -1;
				snprintf(err, errlen, "ADD %s: no JSON result", type);
				free(out);
				break;
			}
			json_decref(prev);
			prev = res;
		}
		free(out);
	}
	if (strcmp(cmd, "ADD") == 0 && !first && prev)
		json_dump_file(prev, cache, JSON_COMPACT);
	else if (strcmp(cmd, "DEL") == 0)
		unlink(cache);
	json_decref(prev);
	return first;
}

/* One phase: N pods, up to C at a time, each in a child that writes
 * "POD MS STATUS EACH ERROR" to the pipe (EACH: the plugins' times, comma
 * separated; one write, shorter than PIPE_BUF, so lines never mix). Each
 * plugin's times go to its array in PER (one per plugin of the list). */
static json_t *phase(const struct run *r, const char *cmd, int count, int conc,
		     int *failed, char *first_err, size_t errlen, json_t *per)
{
	json_t *ms = json_array();
	int p[2], next = 0, running = 0, done = 0;
	FILE *rd;
	char line[PIPE_BUF];

	if (pipe(p))
		return ms;
	rd = fdopen(p[0], "r");
	while (done < count) {
		while (running < conc && next < count) {
			pid_t pid = fork();

			if (pid == 0) {
				char err[PIPE_BUF - 256] = "", buf[PIPE_BUF], times[200];
				double t0 = now_ms(), each[MAX_PLUGINS];
				int rc = run_chain(r, cmd, next, err, sizeof(err), each);
				int len, tl = 0;

				for (char *c = err; *c; c++)
					if (*c == '\n')
						*c = ' ';
				for (size_t k = 0; k < json_array_size(per) && k < MAX_PLUGINS; k++)
					tl += snprintf(times + tl, sizeof(times) - tl, "%s%.3f",
						       k ? "," : "", each[k]);
				if (!tl)
					snprintf(times, sizeof(times), "-");
				len = snprintf(buf, sizeof(buf), "%d %.3f %d %s %s\n", next,
					       now_ms() - t0, rc, times, err);
				if (len >= (int)sizeof(buf))
					len = sizeof(buf) - 1, buf[len - 1] = '\n';
				if (write(p[1], buf, len) < 0)
					_exit(2);
				_exit(0);
			}
			if (pid < 0)
				break;
			next++;
			running++;
		}
		if (!fgets(line, sizeof(line), rd))
			break;
		{
			int pod, rc, off = 0;
			char times[200];
			double t;

			if (sscanf(line, "%d %lf %d %199s %n", &pod, &t, &rc, times, &off) >= 4) {
				char *save = NULL, *f = strtok_r(times, ",", &save);

				json_array_append_new(ms, json_real(t));
				for (size_t k = 0; f && k < json_array_size(per); k++) {
					double v = atof(f);

					if (v >= 0)
						json_array_append_new(json_object_get(json_array_get(per, k),
										      !strcmp(cmd, "ADD") ? "add_ms" : "del_ms"),
								      json_real(v));
					f = strtok_r(NULL, ",", &save);
				}
				if (rc) {
					(*failed)++;
					if (!*first_err) {
						line[strcspn(line, "\n")] = 0;
						snprintf(first_err, errlen, "%s", line + off);
					}
				}
			}
		}
		running--;
		done++;
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
	}
	while (wait(NULL) > 0)
		;
	fclose(rd);
	close(p[1]);
	return ms;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "conflist", required_argument, NULL, 'l' },
		{ "cni-path", required_argument, NULL, 'p' },
		{ "netns", required_argument, NULL, 'n' },
		{ "count", required_argument, NULL, 'c' },
		{ "concurrency", required_argument, NULL, 'C' },
		{ "id-base", required_argument, NULL, 'i' },
		{ "state", required_argument, NULL, 's' },
		{ NULL, 0, NULL, 0 },
	};
	struct run r = { .state = "/tmp" };
	const char *conflist = NULL;
	int count = 0, conc = 1, add_failed = 0, del_failed = 0, o;
	char err[PIPE_BUF] = "";
	json_error_t jerr;
	json_t *res, *per;

	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'l': conflist = optarg; break;
		case 'p': r.cni_path = optarg; break;
		case 'n': r.netns_prefix = optarg; break;
		case 'c': count = atoi(optarg); break;
		case 'C': conc = atoi(optarg); break;
		case 'i': r.id_base = strtoul(optarg, NULL, 0); break;
		case 's': r.state = optarg; break;
		default: return 2;
		}
	}
	if (!conflist || !r.cni_path || !r.netns_prefix || count <= 0 || conc <= 0) {
		fprintf(stderr, "usage: cnirun --conflist FILE --cni-path DIR --netns PREFIX "
			"--count N [--concurrency C] [--id-base K] [--state DIR]\n");
		return 2;
	}
	r.list = json_load_file(conflist, 0, &jerr);
	if (!r.list || !json_is_array(json_object_get(r.list, "plugins"))) {
		fprintf(stderr, "cnirun: %s: not a conflist (%s)\n", conflist, jerr.text);
		return 2;
	}
	per = json_array();
	for (size_t k = 0; k < json_array_size(json_object_get(r.list, "plugins")) &&
			   k < MAX_PLUGINS; k++)
		json_array_append_new(per, json_pack("{s:O?,s:[],s:[]}", "type",
			json_object_get(json_array_get(json_object_get(r.list, "plugins"), k), "type"),
			"add_ms", "del_ms"));
	res = json_object();
	json_object_set_new(res, "add_ms", phase(&r, "ADD", count, conc, &add_failed,
						 err, sizeof(err), per));
	json_object_set_new(res, "del_ms", phase(&r, "DEL", count, conc, &del_failed,
						 err, sizeof(err), per));
	json_object_set_new(res, "add_failed", json_integer(add_failed));
	json_object_set_new(res, "del_failed", json_integer(del_failed));
	json_object_set_new(res, "first_error", json_string(err));
	json_object_set_new(res, "plugins", per);
	json_dumpf(res, stdout, JSON_COMPACT);
	putchar('\n');
	json_decref(res);
	json_decref(r.list);
	return add_failed || del_failed;
}
