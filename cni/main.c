/* SPDX-License-Identifier: GPL-2.0 */
/*
 * podinject-cni: podinject as a CNI plugin. main() reads CNI_COMMAND, the
 * network config and the environment, and runs the command's cni_cmd_*.
 * An attachment is (CNI_CONTAINERID, CNI_IFNAME) of one network.
 *
 * stdout carries the result or the spec's error object and nothing else;
 * logs go to stderr or to the config's logFile.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cni.h"

/* The spec's commands came with its versions: CHECK with 0.4.0, STATUS
 * and GC with 1.1.0. A config of an older version does not allow them
 * (the reference plugins' skel says so, code 1): a runtime that sends one
 * and reads the older result has not followed the protocol it named. */
static int command_too_new(const char *command, const char *version,
			   struct cni_err *e)
{
	const char *since = !strcmp(command, "CHECK") ? "0.4.0" :
			    !strcmp(command, "STATUS") ||
			    !strcmp(command, "GC") ? "1.1.0" : NULL;

	if (!since || cni_version_at_least(version, since))
		return 0;
	return cni_fail(e, CNI_ERR_VERSION, "config version does not allow the command",
			"%s came with CNI %s; the config is %s", command,
			since, version);
}

int main(int argc, char **argv)
{
	struct cni_env env = {};
	struct cni_conf conf = {};
	struct cni_err e = {};
	json_t *root = NULL;
	const char *version = NULL;
	int ret;

	if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
			 !strcmp(argv[1], "version"))) {
		fprintf(stderr, "podinject-cni: a CNI plugin (CNI spec 0.3.0-1.1.0): run by a container runtime, with CNI_COMMAND in the environment and the network config on stdin\n");
		return 0;
	}
	cni_step("start");
	cni_backend_init();
	env.self = argc > 0 ? argv[0] : NULL;
	env.command = getenv("CNI_COMMAND");
	if (!env.command || !*env.command) {
		cni_fail(&e, CNI_ERR_ENV, "CNI_COMMAND is missing", NULL);
		return cni_print_error(NULL, &e);
	}
	cni_log_context(env.command, NULL);
	if (!strcmp(env.command, "VERSION")) {
		/* VERSION may come with an empty stdin, or none. */
		json_t *r = isatty(0) ? NULL : json_loadf(stdin, 0, NULL);

		ret = cni_cmd_version(r);
		json_decref(r);
		return ret;
	}
	if (strcmp(env.command, "ADD") && strcmp(env.command, "DEL") &&
	    strcmp(env.command, "CHECK") && strcmp(env.command, "STATUS") &&
	    strcmp(env.command, "GC")) {
		cni_fail(&e, CNI_ERR_ENV, "unknown CNI_COMMAND",
			 "'%s': ADD, DEL, CHECK, VERSION, STATUS or GC", env.command);
		return cni_print_error(NULL, &e);
	}
	if (cni_read_stdin(&root, &e))
		goto err;
	/* up to the config's end: the runtime's writing of it too */
	cni_step("stdin");
	version = json_string_value(json_object_get(root, "cniVersion"));
	if (cni_parse_conf(root, &conf, &e)) {
		cni_log_open(&conf);
		goto err;
	}
	cni_log_open(&conf);
	if (command_too_new(env.command, conf.cni_version, &e))
		goto err;
	if (cni_read_env(&env, &e))
		goto err;
	cni_step("conf");
	cni_log_context(env.command, env.container_id);
	if (env.container_id && env.ifname)
		cni_make_attach_id(&env, conf.name);
	if (!strcmp(env.command, "ADD"))
		ret = cni_cmd_add(&conf, &env, &e);
	else if (!strcmp(env.command, "DEL"))
		ret = cni_cmd_del(&conf, &env, &e);
	else if (!strcmp(env.command, "CHECK"))
		ret = cni_cmd_check(&conf, &env, &e);
	else if (!strcmp(env.command, "GC"))
		ret = cni_cmd_gc(&conf, &env, &e);
	else
		ret = cni_cmd_status(&conf, &e);
	if (ret)
		goto err;
	json_decref(root);
	cni_log_steps();
	return 0;
err:
	ret = cni_print_error(version && cni_version_supported(version) ? version : NULL, &e);
	json_decref(root);
	cni_step("error");
	cni_log_steps();
	return ret;
}
