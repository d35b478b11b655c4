/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Whether a node handle may change the node: only while it holds the
 * node's lock alone. A handle opened with PI_OPEN_READ shares the lock with
 * other readers, who must never see a change half made.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "lib.h"

/* flock(2) has no call that tells which lock a descriptor holds; the
 * kernel shows it in the descriptor's fdinfo ("lock: N: FLOCK ADVISORY
 * WRITE ..."), for this open file only. The lock held, not the mode the
 * handle was asked for, is what makes a change safe. */
static bool holds_exclusive(int lock_fd)
{
	char path[64], line[256];
	bool yes = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/thread-self/fdinfo/%d", lock_fd);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (!yes && fgets(line, sizeof(line), f))
		yes = !strncmp(line, "lock:", 5) && strstr(line, " FLOCK ") &&
		      strstr(line, " WRITE ");
	fclose(f);
	return yes;
}

int node_require_write(const struct pi_node *n, const char *what)
{
	/* A handle that gave its lock up for a wait and could not take it
	 * back: the node may have changed (or gone and come again)
	 * meanwhile. */
	if (n->lock_lost) {
		pr_err("%s: node '%s': this handle lost its lock; open the node again",
		       what, n->name);
		return -EBADF;
	}
	/* node up and down hold the lock themselves (NODE_LOCK_HELD) */
	if (n->lock_fd < 0 || holds_exclusive(n->lock_fd))
		return 0;
	pr_err("%s: node '%s' was opened read-only (PI_OPEN_READ); changes need PI_OPEN_WRITE",
	       what, n->name);
	return -EBADF;
}
