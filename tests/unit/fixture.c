/* SPDX-License-Identifier: GPL-2.0 */
#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include "fixture.h"
#include "nl.h"

int fixture_netns(void)
{
	static bool done;

	if (done)
		return 0;
	if (unshare(CLONE_NEWNET))
		return -errno;
	done = true;
	nl_link_set_up(1);
	return 0;
}

int fixture_dev(const char *name)
{
	char peer[16];
	int ifindex = nl_link_index(name);

	if (ifindex > 0)
		return ifindex;
	snprintf(peer, sizeof(peer), "%s-p", name);
	if (nl_veth_create(name, peer, -1))
		return -1;
	ifindex = nl_link_index(name);
	nl_link_set_up(ifindex);
	nl_link_set_up(nl_link_index(peer));
	return ifindex;
}
