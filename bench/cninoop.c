// SPDX-License-Identifier: GPL-2.0
/*
 * cninoop: a chained CNI plugin that does nothing: ADD passes prevResult
 * through (as a chained podinject does), DEL and CHECK succeed. The cni
 * suite chains it where podinject would be, so that what any chained
 * plugin costs (a process spawned, its config parsed, a result printed)
 * is measured apart from what podinject does.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
	const char *cmd = getenv("CNI_COMMAND");
	json_error_t jerr;
	json_t *conf, *res;

	if (cmd && !strcmp(cmd, "VERSION")) {
		puts("{\"cniVersion\":\"1.0.0\",\"supportedVersions\":[\"0.3.0\",\"0.3.1\",\"0.4.0\",\"1.0.0\"]}");
		return 0;
	}
	conf = json_loadf(stdin, 0, &jerr);
	if (!conf) {
		/* jansson's message may hold quotes: built, not printed */
		res = json_pack("{s:i,s:s,s:s}", "code", 6, "msg",
				"cannot parse the config", "details", jerr.text);
		json_dumpf(res, stdout, JSON_COMPACT);
		putchar('\n');
		json_decref(res);
		return 1;
	}
	if (cmd && !strcmp(cmd, "ADD")) {
		res = json_object_get(conf, "prevResult");
		res = res ? json_deep_copy(res) : json_object();
		json_object_set(res, "cniVersion", json_object_get(conf, "cniVersion"));
		json_dumpf(res, stdout, JSON_COMPACT);
		putchar('\n');
		json_decref(res);
	}
	json_decref(conf);
	return 0;
}
