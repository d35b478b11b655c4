/* SPDX-License-Identifier: GPL-2.0 */
/*
 * VERSION: the versions this plugin speaks.
 */
#include "cni.h"

int cni_cmd_version(json_t *root)
{
	const char *v = json_string_value(json_object_get(root, "cniVersion"));
	json_t *list = json_array(), *o;
	int err;

	for (int i = 0; i < cni_nversions; i++)
		json_array_append_new(list, json_string(cni_versions[i]));
	o = json_pack("{s:s, s:o}", "cniVersion",
		      v && cni_version_supported(v) ? v : "1.0.0",
		      "supportedVersions", list);
	err = cni_print_json(o);
	json_decref(o);
	return err ? 1 : 0;
}
