/* SPDX-License-Identifier: GPL-2.0 */
#ifndef PODINJECT_CMDS_H
#define PODINJECT_CMDS_H

int do_node(int argc, char **argv);
int do_pod(int argc, char **argv);
int do_policy(int argc, char **argv);
int do_ct(int argc, char **argv);
int do_inject(int argc, char **argv);
int do_features(int argc, char **argv);
int do_proxy(int argc, char **argv);
int do_probe(int argc, char **argv);
int do_metrics(int argc, char **argv);
int do_apply(int argc, char **argv);
int do_export(int argc, char **argv);
int do_monitor(int argc, char **argv);

#define POD_NAME_MAX	12	/* pods podinject names pi-NAME: IFNAMSIZ */

#endif
