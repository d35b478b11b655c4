#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# netkit pods: the reference datapath and injection onto and from them.
# Needs a kernel with netkit (6.7+); the host here has none, so this suite
# runs in the kernel lab (our kernel and stock 6.12) and SKIPs elsewhere.
#
#   nk-t  netkit, 10.244.0.10 fd00::a   injection target
#   nk-e  netkit, 10.244.0.14 fd00::e   destination on netkit
#   nk-j  netkit, 10.244.0.15 fd00::f   injector on netkit
#   nk-d  veth,   10.244.0.11 fd00::b   destination on veth
#   nk-i  veth,   10.244.0.12 fd00::c   injector on veth
#
# Exactly once: the target's egress counters move by the number of packets
# injected, on every path (fast; the netkit fallback with its guard).
. "$(dirname "$0")/lib.sh"
require_root
EXPECT=134
PREFIX=nk-
N=nk-n
T=10.244.0.10
D=10.244.0.11
E=10.244.0.14

if [ "$(pi -j features | jq .netkit)" != true ]; then
	# a probe that misses netkit must not turn the suite into a SKIP
	if [ "$("$ROOT/tests/known-features.sh" netkit)" = true ]; then
		fail all "the probe finds no netkit, but this kernel has it (tests/kernels.txt)"
		exit 1
	fi
	skip all "kernel has no netkit (runs in the kernel lab)"
	exit 0
fi

check up node_up $N
in_ns $N sysctl -qw net.ipv4.ip_forward=0 net.ipv6.conf.all.forwarding=0
check add_netkit_t pi -N $N pod add nk-t --ip $T --ip6 fd00::a --dev netkit
check add_netkit_e pi -N $N pod add nk-e --ip $E --ip6 fd00::e --dev netkit
check add_netkit_j pi -N $N pod add nk-j --ip 10.244.0.15 --ip6 fd00::f --dev netkit
check add_veth_d pi -N $N pod add nk-d --ip $D --ip6 fd00::b
check add_veth_i pi -N $N pod add nk-i --ip 10.244.0.12 --ip6 fd00::c
expect_eq pod_dev_netkit "$(pi -N $N -j pod show nk-t | jq -r .dev)" netkit
chain() { "$BUILD/tcx-attach" query $N "pi-$1" "$2"; }
expect_eq peer_hook_chain "$(chain nk-t peer)" pod_egress_nk
expect_eq primary_hook_chain "$(chain nk-t primary)" pod_ingress_nk

# udp FROM SRC DST PORT COUNT [-6]: datagrams received at the pod owning
# DST; "no-listener ..." when its socket was not bound before the first
# datagram left, "sent-only ..." when fewer than COUNT left the sender, so
# that a 0 always means: all sent, someone listened, nothing arrived
owner() { case $1 in $T|fd00::a) echo nk-t ;; $D|fd00::b) echo nk-d ;; $E|fd00::e) echo nk-e ;; esac; }
udp() {
	local from=$1 src=$2 dst=$3 port=$4 count=$5 fam=${6:-} to sent
	to=$(owner "$dst")
	in_ns "$to" "$PINET" udp-recv $fam "$port" "$count" 3000 >/tmp/nk$$.r &
	local r=$!
	wait_udp_listen "$to" "$port" $fam >/dev/null || echo -n "no-listener "
	sent=$(in_ns "$from" "$PINET" udp-send $fam --bind "$src" "$dst" "$port" "$count")
	[ "$sent" = "sent $count" ] || echo -n "sent-only '$sent' "
	wait $r
	if grep -q "received 0" /tmp/nk$$.r || grep -q "from $src " /tmp/nk$$.r; then
		head -n 1 /tmp/nk$$.r | awk '{print $2}'
	else
		echo "wrong-source"
	fi
	rm -f /tmp/nk$$.r
}
stat() { pod_stat $N "$1" "$2"; }

# --- the reference datapath on netkit pods ---
check ping_netkit_to_veth in_ns nk-t ping -c 2 -i 0.2 -W 3 $D
check ping_veth_to_netkit in_ns nk-d ping -c 2 -i 0.2 -W 3 $T
check ping_netkit_to_netkit in_ns nk-t ping -c 2 -i 0.2 -W 3 $E
check ping6_netkit_to_netkit in_ns nk-t ping -6 -c 2 -i 0.2 -W 3 fd00::e
check ping6_netkit_to_veth in_ns nk-t ping -6 -c 2 -i 0.2 -W 3 fd00::b
# From the node's own stack, through the primary's netkit program: the node
# needs an address to answer to; the pod's reply goes to the stack.
in_ns $N ip addr add 10.244.255.1/32 dev lo
check ping_node_to_netkit in_ns $N ping -c 2 -i 0.2 -W 3 -I 10.244.255.1 $T

# Counted once on each side, whichever device types meet. On the way in,
# an allow rule for exactly the test's datagrams counts them: the pod-wide
# ingress counter also sees the host side's own multicast (MLD) now and then.
rule_count() { pi -N $N -j policy list "$1" | jq ".[] | select(.id == $2) | .packets"; }
eg0=$(stat nk-t .egress_packets)
r=$(pi -N $N -j policy add nk-e ingress allow from $T/32 proto udp port 7000 | jq .id)
expect_eq udp_netkit_to_netkit "$(udp nk-t $T $E 7000 25)" 25
expect_num netkit_egress_once "$(sub "$(stat nk-t .egress_packets)" "$eg0")" 25
expect_eq netkit_ingress_once "$(rule_count nk-e "$r")" 25
r=$(pi -N $N -j policy add nk-t ingress allow from $D/32 proto udp port 7001 | jq .id)
expect_eq udp_veth_to_netkit "$(udp nk-d $D $T 7001 25)" 25
expect_eq netkit_ingress_from_veth_once "$(rule_count nk-t "$r")" 25
r=$(pi -N $N -j policy add nk-d ingress allow from fd00::a/128 proto udp port 7002 | jq .id)
expect_eq udp6_netkit_to_veth "$(udp nk-t fd00::a fd00::b 7002 25 -6)" 25
expect_eq veth_ingress_from_netkit_once "$(rule_count nk-d "$r")" 25
for p in nk-e nk-t nk-d; do pi -N $N policy del $p ingress all >/dev/null; done

# TCP through netkit both ways.
in_ns nk-e "$PINET" tcp-server 7100 --count 1 --echo --timeout 5000 >/dev/null 2>&1 &
wait_tcp_listen nk-e 7100 >/dev/null
check tcp_netkit_to_netkit in_ns nk-t "$PINET" tcp-connect --timeout 5000 $E 7100
wait

# Source check and policy on netkit pods.
sp0=$(stat nk-t .drops.spoofed)
expect_eq spoofed_not_delivered "$(udp nk-t 10.244.0.99 $D 7003 5)" 0
expect_num spoofed_counted "$(sub "$(stat nk-t .drops.spoofed)" "$sp0")" 5
id=$(pi -N $N -j policy add nk-t deny to $D/32 proto udp port 7004 | jq .id)
expect_eq egress_policy_netkit "$(udp nk-t $T $D 7004 5)" 0
expect_eq egress_rule_counted "$(pi -N $N -j policy list nk-t | jq ".[] | select(.id == $id) | .packets")" 5
pi -N $N policy del nk-t "$id" >/dev/null
id=$(pi -N $N -j policy add nk-e ingress deny from $T/32 proto udp port 7005 | jq .id)
expect_eq ingress_policy_netkit_from_netkit "$(udp nk-t $T $E 7005 5)" 0
expect_eq ingress_policy_netkit_from_veth "$(udp nk-d $D $E 7005 5)" 5
expect_eq ingress_rule_counted "$(pi -N $N -j policy list nk-e | jq ".[] | select(.id == $id) | .packets")" 5
pi -N $N policy del nk-e "$id" >/dev/null

# --- injection onto a netkit target ---
# inject_once INJECTOR PATH: 20 v4 + 20 v6 datagrams as nk-t to nk-d; the
# target's egress moves by exactly 40.
inject_once() {
	local inj=$1 path=$2 eg0 got4 got6
	eg0=$(stat nk-t .egress_packets)
	got4=$(udp "$inj" $T $D 9000 20)
	got6=$(udp "$inj" fd00::a fd00::b 9000 20 -6)
	expect_eq "${path}_from_${inj}_delivered" "$got4+$got6" "20+20"
	expect_num "${path}_from_${inj}_target_egress_once" \
		"$(sub "$(stat nk-t .egress_packets)" "$eg0")" 40
}
guard_runs() { pi -N $N -j inject stats | jq '[.[] | select(.path == "netkit-fallback") | .guard.runs] | max // 0'; }

# what the kernel is known to have (tests/kernels.txt), not the probe
want=$("$ROOT/tests/known-features.sh" inject_path_netkit)
want=${want:-unknown: kernel not in tests/kernels.txt}
expect_eq features_netkit_path "$(pi -j features | jq -r .inject_path_netkit)" "$want"
check allow_auto pi -N $N inject allow nk-i --as nk-t
expect_eq auto_path "$(pi -N $N -j inject list | jq -r '.[0].path')" "$want"
inject_once nk-i auto
# exactly once at scale on that path (issue 23): 100 000 sequence-numbered
# datagrams, each seen once by the receiver, the target's egress counter
# and the injection's statistics
expect_eq auto_at_scale "$(inject_at_scale $N nk-i nk-t nk-d $D 9100 "$want" $INJECT_SCALE 25000)" \
	"$(at_scale_want)"

# The netkit fallback, forced: the guard first at the primary's ingress,
# the untag program first at the peer hook, the CNI's program after it.
check allow_fallback pi -N $N inject allow nk-i --as nk-t --path fallback
expect_eq fallback_is_netkit_fallback "$(pi -N $N -j inject list | jq -r '[.[].path] | unique | join(",")')" netkit-fallback
expect_eq guard_chain "$(chain nk-t ingress)" netkit_guard
expect_eq untag_chain "$(chain nk-t peer)" "netkit_untag pod_egress_nk"
g0=$(guard_runs)
inject_once nk-i netkit_fallback
expect_num guard_ran_once_each "$(sub "$(guard_runs)" "$g0")" 40
# and through the guard at scale: the guard ran each once
g0=$(guard_runs)
expect_eq netkit_fallback_at_scale "$(inject_at_scale $N nk-i nk-t nk-d $D 9101 netkit-fallback $INJECT_SCALE 25000)" \
	"$(at_scale_want)"
expect_num guard_ran_once_each_at_scale "$(sub "$(guard_runs)" "$g0")" $INJECT_SCALE
expect_eq nothing_forged "$(pi -N $N -j inject stats | jq '[.[] | .guard.forged // 0] | add')" 0
# The pod's own traffic is not run a second time by the guard.
eg0=$(stat nk-t .egress_packets); g0=$(guard_runs)
expect_eq own_traffic_with_guard "$(udp nk-t $T $D 7006 15)" 15
expect_num own_traffic_egress_once "$(sub "$(stat nk-t .egress_packets)" "$eg0")" 15
expect_num own_traffic_not_guarded "$(sub "$(guard_runs)" "$g0")" 0
# A pod that forges the tag on its own frames: netkit_untag overwrites it,
# so the frames (to the node's stack, past the guard) meet the peer program
# once, and the guard never runs them.
tag=$(pi -N $N -j inject stats | jq -r '[.[] | .guard.tag // empty][0]')
check tag_shown test -n "$tag" -a "$tag" != null
eg0=$(stat nk-t .egress_packets); g0=$(guard_runs)
in_ns $N "$PINET" udp-recv 7007 10 3000 >/tmp/nk$$.f &
sleep 0.3
check forged_sent in_ns nk-t "$PINET" raw-udp eth0 "$tag" $T 10.244.255.1 7007 10
wait
expect_eq forged_reached_node "$(head -n 1 /tmp/nk$$.f)" "received 10"
rm -f /tmp/nk$$.f
expect_num forged_egress_once "$(sub "$(stat nk-t .egress_packets)" "$eg0")" 10
expect_num forged_not_guarded "$(sub "$(guard_runs)" "$g0")" 0
expect_eq forged_counted "$(pi -N $N -j inject stats | jq '[.[] | .guard.forged // 0] | max')" 10
# The target's policy holds for injected packets on this path too.
id=$(pi -N $N -j policy add nk-t deny to $D/32 proto udp port 9001 | jq .id)
expect_eq netkit_fallback_policy "$(udp nk-i $T $D 9001 10)" 0
expect_eq netkit_fallback_rule_counted "$(pi -N $N -j policy list nk-t | jq ".[] | select(.id == $id) | .packets")" 10
pi -N $N policy del nk-t "$id" >/dev/null
# TCP SYNs: the destination's stack sees exactly the ones sent.
tcp_in() { in_ns "$1" awk '/^Tcp:/ {n++} n == 2 && /^Tcp:/ {print $11; exit}' /proc/net/snmp; }
eg0=$(stat nk-t .egress_packets); ig0=$(tcp_in nk-d)
in_ns nk-i "$PINET" tcp-syn --bind $T --timeout 200 $D 9 7 >/dev/null 2>&1
sleep 0.5
expect_num netkit_fallback_syn_egress_once "$(sub "$(stat nk-t .egress_packets)" "$eg0")" 7
expect_num netkit_fallback_syn_reached "$(sub "$(tcp_in nk-d)" "$ig0")" 7

# The CNI replaces its egress program in place (a link update, as an
# agent's upgrade does). The guard follows at the next inject change: it
# runs the new program for injected packets, not the old one, which its
# prog array would otherwise keep alive and running.
rp=/sys/fs/bpf/${PREFIX}replaced
link=/sys/fs/bpf/podinject/$N/link_pod_$(in_ns $N cat /sys/class/net/pi-nk-t/ifindex)_egress
old=$("$BUILD/tcx-attach" update "$link" "$BUILD/foreign.bpf.o" foreign_count $rp)
expect_eq replaced_chain "$(chain nk-t peer)" "netkit_untag foreign_count"
check replaced_followed pi -N $N inject allow nk-i --as nk-t --path fallback
udp nk-i $T $D 9003 20 >/dev/null
expect_num replaced_runs_the_new_program "$("$BUILD/tcx-attach" counter $rp)" 20
"$BUILD/tcx-attach" update-id "$link" "$old" >/dev/null
check restored_followed pi -N $N inject allow nk-i --as nk-t --path fallback
expect_eq restored_delivered "$(udp nk-i $T $D 9004 10)" 10
rm -rf $rp

# An `inject allow` that fails after it took the guard off a target whose
# grant it moved off the netkit fallback puts the grant back with a guard.
# Here the CNI's peer hook has a second program meanwhile, so the guard
# cannot take "the" program: it comes back with an empty slot and drops
# what is injected (fail closed, counted as missing) until the hook has
# one again. Before, the grant came back without any guard, and injected
# packets went past the target's peer program. The grants' map full makes
# the second target's grant fail.
sp=/sys/fs/bpf/${PREFIX}second
mkdir -p $sp
check undo_second_program "$BUILD/tcx-attach" attach "$BUILD/foreign.bpf.o" foreign_count $N pi-nk-t peer $sp
auth_map_fill $N
out=$(pi -N $N inject allow nk-i --as nk-t --as nk-e --path fast 2>&1)
expect_eq undo_allow_fails "$?" 1
auth_map_unfill $N
expect_eq undo_grant_kept "$(pi -N $N -j inject list | jq -r '[.[] | select(.injector == "nk-i" and .as == "nk-t") | .path] | unique | join(",")')" netkit-fallback
expect_eq undo_guard_back "$(chain nk-t ingress)" netkit_guard
m0=$(pi -N $N -j inject stats | jq '[.[] | select(.path == "netkit-fallback") | .guard.missing // 0] | max // 0')
expect_eq undo_injected_dropped "$(udp nk-i $T $D 9005 10)" 0
expect_num undo_drops_counted "$(sub "$(pi -N $N -j inject stats | jq '[.[] | select(.path == "netkit-fallback") | .guard.missing // 0] | max // 0')" "$m0")" 10
rm -rf $sp	# the link's pin: the kernel releases it a moment later
for i in $(seq 50); do [ "$(chain nk-t peer)" = "netkit_untag pod_egress_nk" ] && break; sleep 0.1; done
check undo_followed pi -N $N inject allow nk-i --as nk-t --path fallback
expect_eq undo_delivered_again "$(udp nk-i $T $D 9006 10)" 10

# The fast path, forced: delivers once with BPF_F_EGRESS, refused without.
check allow_fast pi -N $N inject allow nk-i --as nk-t --path fast
expect_eq fast_guard_gone "$(chain nk-t ingress)" ""
expect_eq fast_untag_gone "$(chain nk-t peer)" pod_egress_nk
# (four lines either way; decided by what the kernel is known to have)
if [ "$("$ROOT/tests/known-features.sh" redirect_peer_egress)" = true ]; then
	inject_once nk-i fast
	skip fast_refused "kernel has BPF_F_EGRESS"
	skip fast_refused_counted "kernel has BPF_F_EGRESS"
else
	skip fast_from_nk-i_delivered "kernel lacks BPF_F_EGRESS"
	skip fast_from_nk-i_target_egress_once "kernel lacks BPF_F_EGRESS"
	rf0=$(pi -N $N -j inject stats | jq '[.[] | select(.path == "fast") | .drops."redirect-refused"] | add // 0')
	expect_eq fast_refused "$(udp nk-i $T $D 9000 10)" 0
	expect_num fast_refused_counted "$(sub "$(pi -N $N -j inject stats | jq '[.[] | select(.path == "fast") | .drops."redirect-refused"] | add // 0')" "$rf0")" 10
fi

# A netkit injector: its head program sits at its peer hook.
check allow_netkit_injector pi -N $N inject allow nk-j --as nk-t
expect_eq netkit_injector_chain "$(chain nk-j peer)" "inject_egress pod_egress_nk"
inject_once nk-j auto
check allow_netkit_injector_fallback pi -N $N inject allow nk-j --as nk-t --path fallback
inject_once nk-j netkit_fallback
# ... injecting as a veth pod: the plain fallback.
check allow_netkit_as_veth pi -N $N inject allow nk-j --as nk-d --path fallback
eg0=$(stat nk-d .egress_packets)
expect_eq netkit_injector_as_veth "$(udp nk-j $D $E 9002 20)" 20
expect_num netkit_injector_as_veth_once "$(sub "$(stat nk-d .egress_packets)" "$eg0")" 20

# Probes onto a netkit pod.
in_ns nk-d "$PINET" udp-echo 9100 1 5000 >/dev/null 2>&1 &
sleep 0.3
expect_eq probe_netkit "$(pi -N $N -j probe --from nk-t --to $D:9100 --proto udp --timeout 3000 | jq -r '[.probes[].verdict] | unique | join(",")')" answered
wait

# Proxying is built for veth pods only: refused, nothing left.
out=$(pi -N $N proxy add nk-i --port 15001 --for nk-t 2>&1); rc=$?
expect_eq proxy_netkit_refused "$rc:$(grep -c '^error: .*netkit' <<<"$out")" "2:1"

# An adopted netkit pod named as Kubernetes names it (namespace/name):
# its guard's pins are named by ifindex, so the fallback is served.
ip netns add nk-sl
check slash_pair in_ns $N "$BUILD/mknetkit" nk-sl0 eth0 nk-sl
in_ns nk-sl ip addr add 10.244.0.16/32 dev eth0
check slash_adopt pi -N $N pod adopt default/web-nk --netns nk-sl --dev nk-sl0 --ip 10.244.0.16
check slash_fallback pi -N $N inject allow nk-i --as default/web-nk --path fallback
expect_eq slash_guard "$("$BUILD/tcx-attach" query $N nk-sl0 ingress)" netkit_guard
check slash_deny pi -N $N inject deny nk-i --as default/web-nk
expect_eq slash_guard_gone "$("$BUILD/tcx-attach" query $N nk-sl0 ingress)" ""
check slash_del pi -N $N pod del default/web-nk
ip netns del nk-sl

# A netkit pod another plugin routes (--no-datapath): nothing of ours on
# its hooks until its first rule, then pod_egress_nk / pod_ingress_nk in
# pass-on mode, which check and hand on (the pod is reached through the
# node's stack, so forwarding is on for this part), gone with the last.
X=10.244.0.17
ip netns add nk-nx
check none_pair in_ns $N "$BUILD/mknetkit" nk-nx0 eth0 nk-nx
in_ns nk-nx ip addr add $X/32 dev eth0
in_ns nk-nx ip route add default dev eth0
in_ns $N ip route add $X/32 dev nk-nx0
in_ns $N sysctl -qw net.ipv4.ip_forward=1
check none_adopt pi -N $N pod adopt nk-x --netns nk-nx --dev nk-nx0 --ip $X --no-datapath
owner() { case $1 in $T|fd00::a) echo nk-t ;; $D|fd00::b) echo nk-d ;; $E|fd00::e) echo nk-e ;; $X) echo nk-nx ;; esac; }
nxchain() { "$BUILD/tcx-attach" query $N nk-nx0 peer; "$BUILD/tcx-attach" query $N nk-nx0 primary; }
expect_eq none_bare "$(nxchain | paste -sd '|')" "|"
expect_eq none_reached "$(udp nk-d $D $X 7300 5)" 5
check none_rule_in pi -N $N policy add nk-x ingress deny from $D/32 proto udp port 7300
check none_rule_out pi -N $N policy add nk-x egress deny to $D/32 proto udp port 7301
expect_eq none_programs "$(nxchain | paste -sd '|')" "pod_egress_nk|pod_ingress_nk"
expect_eq none_ingress_denied "$(udp nk-d $D $X 7300 5)" 0
expect_eq none_ingress_other "$(udp nk-d $D $X 7302 5)" 5
expect_eq none_egress_denied "$(udp nk-nx $X $D 7301 5)" 0
expect_eq none_egress_other "$(udp nk-nx $X $D 7303 5)" 5
expect_eq none_rules_counted "$(pi -N $N -j policy list nk-x | jq '[.[] | .packets] | add')" 10
check none_rules_gone sh -c "'$PI' -N $N policy del nk-x ingress all && '$PI' -N $N policy del nk-x egress all"
expect_eq none_programs_gone "$(nxchain | paste -sd '|')" "|"
expect_eq none_open_again "$(udp nk-d $D $X 7300 5)" 5
check none_del pi -N $N pod del nk-x
# Such a pod with its plugin's program at its peer hook, a grant on the
# netkit fallback (the guard runs that program for injected packets),
# then its first rule: podinject's program comes in front of the
# plugin's, and the guard must follow. It kept running the plugin's
# alone, so injected packets went past the new rule (found by a review).
# With two programs there it now drops them (fail closed); without the
# rule it runs the plugin's again.
Y=10.244.0.18
ip netns add nk-ny
check guardpol_pair in_ns $N "$BUILD/mknetkit" nk-ny0 eth0 nk-ny
in_ns nk-ny ip addr add $Y/32 dev eth0
in_ns nk-ny ip route add default dev eth0
in_ns $N ip route add $Y/32 dev nk-ny0
check guardpol_adopt pi -N $N pod adopt nk-y --netns nk-ny --dev nk-ny0 --ip $Y --no-datapath
mkdir -p /sys/fs/bpf/${PREFIX}cniy
check guardpol_plugin_program "$BUILD/tcx-attach" attach "$BUILD/foreign.bpf.o" foreign_count $N nk-ny0 peer /sys/fs/bpf/${PREFIX}cniy
check guardpol_grant pi -N $N inject allow nk-i --as nk-y --path fallback
expect_eq guardpol_injected_before "$(udp nk-i $Y $D 7310 5)" 5
check guardpol_rule pi -N $N policy add nk-y egress deny to $D/32 proto udp port 7310
expect_eq guardpol_injected_not_past_rule "$(udp nk-i $Y $D 7310 5)" 0
check guardpol_rule_gone pi -N $N policy del nk-y egress all
expect_eq guardpol_injected_after "$(udp nk-i $Y $D 7310 5)" 5
check guardpol_del pi -N $N pod del nk-y
ip netns del nk-ny
rm -rf /sys/fs/bpf/${PREFIX}cniy
in_ns $N sysctl -qw net.ipv4.ip_forward=0
ip netns del nk-nx

# deny and del leave no guard behind.
check deny_all pi -N $N inject deny nk-i
check deny_all_j pi -N $N inject deny nk-j
expect_eq deny_guard_gone "$(chain nk-t ingress)" ""
expect_eq deny_untag_gone "$(chain nk-t peer)" pod_egress_nk
check deny_pins_gone sh -c "! ls /sys/fs/bpf/podinject/$N/inject | grep -q link_"
pi -N $N inject allow nk-i --as nk-t --path fallback >/dev/null
check del_target pi -N $N pod del nk-t
check del_target_guard_gone sh -c "! ls /sys/fs/bpf/podinject/$N/inject | grep -q 'link_guard\|link_untag'"
ids=$(node_prog_ids $N)
expect_hooked hooked_before_down tcx $ids
check down pi -N $N node down
expect_unhooked no_links_left $ids
