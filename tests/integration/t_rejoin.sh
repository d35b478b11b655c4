#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# A pod joining takes an ifindex (and an id) a removed pod may have had:
# nothing that pod left under them may become the new pod's. What a
# removal can leave (a removal cut short, a packet in flight during its
# sweep) is put into the node's pinned maps and pins by hand, on the
# devices the pods then join with. (Tracked flows: t_ct.)
#
#   rj-n (node, --xdp, no uplink): rj-k (adopted netkit pair),
#                                  rj-v (adopted veth pair)
. "$(dirname "$0")/lib.sh"
require_root
EXPECT=11
PREFIX=rj-
N=rj-n

le32() { printf '0x%02x 0x%02x 0x%02x 0x%02x' $(($1 & 255)) $(($1 >> 8 & 255)) $(($1 >> 16 & 255)) $(($1 >> 24 & 255)); }
ifindex_of() { ip -n $N -j link show "$1" | jq '.[0].ifindex'; }
# bpftool in the node's namespace but our mounts (its bpffs): the devmap
# resolves ifindexes in the caller's namespace.
node_bpftool() { nsenter --net=/run/netns/$N bpftool "$@"; }
# devmap_has IFINDEX: "there" when the uplink's devmap sends to IFINDEX
devmap_has() {
	node_bpftool map lookup pinned "$(node_pin_dir $N)/xdp_ports" key $(le32 "$1") >/dev/null 2>&1 &&
		echo there || echo gone
}
xdp_name() {
	local out
	out=$(ip -n "$1" -d link show "$2") || return 1
	grep -o 'prog/xdp id [0-9]* name [a-z_]*' <<<"$out" | awk '{print $NF}'
}

check up node_up $N --xdp

# A devmap entry for a netkit pod's device: the uplink's XDP would send
# its frames there, past the pod's tc checks (netkit has no XDP ACL).
if [ "$(pi -j features | jq -r .netkit)" = true ]; then
	ip netns add rj-k
	check netkit_pair ip netns exec $N "$BUILD/mknetkit" rj-k0 eth0 rj-k
	in_ns rj-k ip addr add 10.244.5.10/32 dev eth0
	k=$(ifindex_of rj-k0)
	node_bpftool map update pinned "$(node_pin_dir $N)/xdp_ports" key $(le32 "$k") value $(le32 "$k")
	expect_eq devmap_entry_planted "$(devmap_has "$k")" there
	check adopt_netkit pi -N $N pod adopt rj-k --netns rj-k --dev rj-k0 --ip 10.244.5.10
	expect_eq devmap_entry_gone "$(devmap_has "$k")" gone
	check del_netkit pi -N $N pod del rj-k
else
	for t in netkit_pair devmap_entry_planted adopt_netkit devmap_entry_gone del_netkit; do
		skip $t "no netkit on this kernel"
	done
fi

# A pinned ACL and its link left under a veth's ifindex: the pod joining
# with that device gets its own ACL, not a refusal.
ip netns add rj-v
ip -n $N link add rj-v0 type veth peer name eth0 netns rj-v
ip -n $N link set rj-v0 up
in_ns rj-v ip addr add 10.244.5.11/32 dev eth0
in_ns rj-v ip link set eth0 up
v=$(ifindex_of rj-v0)
d=$(node_pin_dir $N)
check acl_pin_planted bpftool prog pin pinned "$d/prog_xdp_uplink" "$d/prog_xdp_pod_$v"
# (the name is what matters: a pin there would refuse the pod's link)
check acl_link_pin_planted bpftool prog pin pinned "$d/prog_xdp_uplink" "$d/link_xdp_pod_$v"
check adopt_veth pi -N $N pod adopt rj-v --netns rj-v --dev rj-v0 --ip 10.244.5.11
expect_eq veth_has_own_acl "$(xdp_name rj-v eth0)" xdp_pod_ingress
check down pi -N $N node down
