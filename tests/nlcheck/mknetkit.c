/* SPDX-License-Identifier: GPL-2.0 */
/*
 * mknetkit HOSTDEV PODDEV NETNS: a netkit pair as another tool (a CNI)
 * would make it: HOSTDEV in the calling namespace, PODDEV inside NETNS (a
 * name in /run/netns), both up. iproute2 6.1 has no netkit; tests that
 * adopt a netkit pod make it with this.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "nl.h"

int main(int argc, char **argv)
{
	int fd, saved, ifindex, err;

	if (argc != 4) {
		fprintf(stderr, "usage: mknetkit HOSTDEV PODDEV NETNS\n");
		return 2;
	}
	fd = netns_open(argv[3]);
	if (fd < 0) {
		fprintf(stderr, "namespace %s: %s\n", argv[3], strerror(-fd));
		return 1;
	}
	err = nl_netkit_create(argv[1], argv[2], fd);
	if (!err) {
		ifindex = nl_link_index(argv[1]);
		err = ifindex < 0 ? ifindex : nl_link_set_up(ifindex);
	}
	if (!err)
		err = netns_enter(fd, &saved);
	if (!err) {
		ifindex = nl_link_index(argv[2]);
		err = ifindex < 0 ? ifindex : nl_link_set_up(ifindex);
		netns_restore(saved);
	}
	close(fd);
	if (err) {
		fprintf(stderr, "netkit %s/%s: %s\n", argv[1], argv[2],
			strerror(-err));
		return 1;
	}
	return 0;
}
