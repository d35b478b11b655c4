/* SPDX-License-Identifier: GPL-2.0 */
/* podinject apply -f FILE [--dry-run] | podinject export */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cmds.h"
#include "util.h"

static const char *const timeout_names[PI_CT_TO_MAX] = PI_CT_TIMEOUT_NAMES;
static const char *const path_names[] = PI_PATH_NAMES;

static int apply_help(int argc, char **argv)
{
	fprintf(stderr,
		"Usage: podinject [-N NODE] [-j] apply -f FILE|- [--dry-run] [--format json|yaml]\n"
		"                                 [--skip-absent]\n"
		"       podinject [-N NODE] export\n"
		"\n"
		"apply brings the node to the state FILE declares (JSON, or YAML for\n"
		"FILE.yaml, FILE.yml or --format yaml; '-' for stdin):\n"
		"each pod's ordered egress and ingress rules, injection grants and\n"
		"proxy rule, and the tracker's timeouts. The file is the whole state:\n"
		"what it leaves out is empty (or the default). Pods must exist (pod add\n"
		"or pod adopt); apply never makes or removes pods. Every line is checked\n"
		"first: one that cannot be applied fails the apply with its place and\n"
		"reason, and nothing changes; a change that fails undoes the others.\n"
		"Unchanged rules keep their ids and counters. --dry-run prints the plan\n"
		"and changes nothing. --skip-absent: what the file says of a pod that\n"
		"is not on this node (a pod, a grant as it, a proxy rule by it) is\n"
		"left out instead of refused: one file for a fleet of nodes, as the\n"
		"DaemonSet applies it. export prints the node's state in the same form,\n"
		"so 'podinject export | podinject apply -f -' changes nothing.\n"
		"Format: docs/operations.md, \"Desired state: apply and export\".\n");
	return EXIT_OK;
}

/* The document on stdin, whole (a file is read by pi_apply_file); NULL
 * with errno EFBIG past PI_APPLY_DOC_MAX, which is not read on. */
static char *read_stdin(size_t *len)
{
	size_t cap = 65536, n = 0;
	char *buf = malloc(cap);

	while (buf) {
		size_t r = fread(buf + n, 1, cap - n, stdin);

		n += r;
		if (n < cap) {
			if (ferror(stdin)) {
				free(buf);
				buf = NULL;
			}
			break;
		}
		if (n > PI_APPLY_DOC_MAX) {
			free(buf);
			errno = EFBIG;
			return NULL;
		}
		cap *= 2;
		if (cap > PI_APPLY_DOC_MAX + 1)
			cap = PI_APPLY_DOC_MAX + 1;
		char *m = realloc(buf, cap);

		if (!m)
			free(buf);
		buf = m;
	}
	*len = n;
	return buf;
}

static void print_proxy(const struct pi_proxy_rule *r)
{
	printf(" port %u", r->port);
	if (r->proto)
		printf(" match %s", r->proto == IPPROTO_TCP ? "tcp" : "udp");
	for (int i = 0; i < r->nports && i < PI_PROXY_MAX_PORTS; i++) {
		printf(i ? ",%u" : " dport %u", r->dport_lo[i]);
		if (r->dport_hi[i] != r->dport_lo[i])
			printf("-%u", r->dport_hi[i]);
	}
	if (r->dst_family) {
		char buf[64];

		printf(" dst %s", pi_fmt_addr(r->dst_family, &r->dst,
					     r->dst_plen, buf, sizeof(buf)));
	}
}

static const char *step_kind(enum pi_plan_kind k)
{
	switch (k) {
	case PI_PLAN_POLICY: return "policy";
	case PI_PLAN_GRANT_DEL: return "inject-deny";
	case PI_PLAN_GRANT_ADD: return "inject-allow";
	case PI_PLAN_PROXY_DEL: return "proxy-del";
	case PI_PLAN_PROXY_ADD: return "proxy-add";
	case PI_PLAN_TIMEOUT: return "ct-timeout";
	}
	return "?";
}

struct steps {
	int count;
	struct json j;		/* -j: the changes, printed at the end */
	char *buf;
	size_t len;
};

static void on_step(const struct pi_plan_step *st, void *ctx)
{
	struct steps *s = ctx;
	struct json *jw = &s->j;

	s->count++;
	if (json_output) {
		json_obj_open(jw);
		json_kstr(jw, "change", step_kind(st->what));
		if (st->pod)
			json_kstr(jw, "pod", st->pod);
		if (st->what == PI_PLAN_POLICY) {
			json_kstr(jw, "direction", st->dir ? "ingress" : "egress");
			json_ku64(jw, "before", st->before);
			json_ku64(jw, "after", st->after);
			json_ku64(jw, "kept", st->kept);
		} else if (st->what == PI_PLAN_GRANT_ADD ||
			   st->what == PI_PLAN_GRANT_DEL) {
			json_kstr(jw, "as", st->other);
			json_kstr(jw, "path", path_names[st->path <= 3 ? st->path : 0]);
		} else if (st->what == PI_PLAN_TIMEOUT) {
			json_kstr(jw, "kind", timeout_names[st->kind]);
			json_ku64(jw, "from", st->from);
			json_ku64(jw, "to", st->to);
		} else {
			json_kstr(jw, "proxy", st->other);
			json_kstr(jw, "direction",
				  st->proxy->flags & PI_PROXY_INBOUND ?
				  "inbound" : "outbound");
			json_ku64(jw, "port", st->proxy->port);
		}
		json_obj_close(jw);
		return;
	}
	switch (st->what) {
	case PI_PLAN_POLICY:
		printf("~ pod %s %s: %u rules -> %u (%u kept, %u new, %u removed)\n",
		       st->pod, st->dir ? "ingress" : "egress", st->before,
		       st->after, st->kept, st->after - st->kept,
		       st->before - st->kept);
		break;
	case PI_PLAN_GRANT_DEL:
		printf("- pod %s inject as %s\n", st->pod, st->other);
		break;
	case PI_PLAN_GRANT_ADD:
		printf("+ pod %s inject as %s (path %s)\n", st->pod, st->other,
		       path_names[st->path <= 3 ? st->path : 0]);
		break;
	case PI_PLAN_PROXY_DEL:
	case PI_PLAN_PROXY_ADD:
		printf("%c pod %s %s by %s", st->what == PI_PLAN_PROXY_ADD ?
		       '+' : '-', st->pod,
		       st->proxy && (st->proxy->flags & PI_PROXY_INBOUND) ?
		       "proxy-inbound" : "proxy", st->other);
		print_proxy(st->proxy);
		printf("\n");
		break;
	case PI_PLAN_TIMEOUT:
		printf("~ conntrack %s: %u -> %u s\n", timeout_names[st->kind],
		       st->from, st->to);
		break;
	}
}

static int apply_cmd(int argc, char **argv)
{
	static const struct opt_choice formats[] = {
		{ "json", 1 }, { "yaml", 2 }, { 0 },
	};
	const char *file = NULL, *ext;
	bool dry = false, skip_absent = false;
	int format = 0;
	const struct opt fo[] = {
		OPT_STR("-f", &file, "a file, or - for stdin"),
		OPT_FLAG("--dry-run", &dry),
		OPT_FLAG("--skip-absent", &skip_absent),
		OPT_CHOICE("--format", &format, formats),
		{ 0 },
	};
	uint32_t flags;
	struct pi_apply_error where;
	struct steps steps = { 0 };
	struct pi_node *n;
	FILE *mem = NULL;
	char *doc = NULL;
	size_t len = 0;
	int err, fd;

	err = parse_opts(fo, argc, argv, 0, NULL, NULL);
	if (err)
		return err;
	if (!file)
		return usage_err("apply needs -f FILE (or -f - for stdin)");
	ext = strrchr(file, '.');
	if (!format)
		format = ext && (!strcmp(ext, ".yaml") || !strcmp(ext, ".yml")) ? 2 : 1;
	flags = (dry ? PI_APPLY_DRY_RUN : 0) | (format == 2 ? PI_APPLY_YAML : 0) |
		(skip_absent ? PI_APPLY_SKIP_ABSENT : 0);
	/* unreadable input is a usage error, before the node is opened */
	if (!strcmp(file, "-")) {
		doc = read_stdin(&len);
		if (!doc && errno == EFBIG) {
			p_err("stdin: more than %u MiB: a state document is at most that",
			      PI_APPLY_DOC_MAX >> 20);
			return EXIT_USAGE;
		}
		if (!doc) {
			p_err("cannot read stdin: %s", strerror(errno));
			return EXIT_USAGE;
		}
	} else if ((fd = open(file, O_RDONLY | O_CLOEXEC)) < 0) {
		p_err("cannot read '%s': %s", file, strerror(errno));
		return EXIT_USAGE;
	} else {
		close(fd);
	}
	err = pi_node_open(node_name, dry ? PI_OPEN_READ : PI_OPEN_WRITE,
			   lock_timeout_ms, &n);
	if (err) {
		free(doc);
		return exit_code(err);
	}
	if (json_output) {
		mem = open_memstream(&steps.buf, &steps.len);
		if (!mem) {
			pi_node_close(n);
			free(doc);
			p_err("out of memory");
			return EXIT_RUNTIME;
		}
		json_init(&steps.j, mem);
		json_arr_open(&steps.j);
	}
	err = doc ? pi_apply(n, doc, len, flags, on_step, &steps, &where) :
		    pi_apply_file(n, file, flags, on_step, &steps, &where);
	pi_node_close(n);
	free(doc);
	if (mem) {
		json_arr_close(&steps.j);
		fclose(mem);
	}
	if (err < 0) {
		/* the error went out already (as JSON under -j) */
		if (steps.count && !dry && !json_output &&
		    err != -ENOTRECOVERABLE)
			fprintf(stderr, "the %d change%s above %s undone: the node is as it was\n",
				steps.count, steps.count == 1 ? "" : "s",
				steps.count == 1 ? "was" : "were");
		free(steps.buf);
		return exit_code(err);
	}
	if (json_output) {
		printf("{\"dry_run\":%s,\"changes\":%s}\n", dry ? "true" : "false",
		       steps.buf);
		free(steps.buf);
		return EXIT_OK;
	}
	if (dry)
		p_info("%d change%s planned, none made", err, err == 1 ? "" : "s");
	else if (err)
		p_info("%d change%s applied", err, err == 1 ? "" : "s");
	return EXIT_OK;
}

static int write_stdout(const char *buf, size_t len, void *ctx)
{
	return fwrite(buf, 1, len, stdout) == len ? 0 : -1;
}

int do_export(int argc, char **argv)
{
	struct pi_node *n;
	int err;

	if (argc && !strcmp(argv[0], "help"))
		return apply_help(0, NULL);
	if (argc)
		return usage_err("export takes no arguments");
	err = pi_node_open(node_name, PI_OPEN_READ, lock_timeout_ms, &n);
	if (err)
		return exit_code(err);
	err = pi_export(n, write_stdout, NULL);
	pi_node_close(n);
	if (fflush(stdout) && !err)
		err = -EIO;
	return exit_code(err);
}

int do_apply(int argc, char **argv)
{
	if (argc && !strcmp(argv[0], "help"))
		return apply_help(0, NULL);
	return apply_cmd(argc, argv);
}
