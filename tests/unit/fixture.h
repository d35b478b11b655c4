/* SPDX-License-Identifier: GPL-2.0 */
/* Devices for unit tests, in a namespace private to the test process. */
#ifndef PODINJECT_UNIT_FIXTURE_H
#define PODINJECT_UNIT_FIXTURE_H

/* Moves the process into a fresh network namespace, once. */
int fixture_netns(void);
/* A veth device NAME (peer NAME-p) in that namespace, up; its ifindex. */
int fixture_dev(const char *name);

#endif
