# SPDX-License-Identifier: GPL-2.0
# Shared helpers for integration tests. Each test script makes its own
# nodes, pods and namespaces under a short unique prefix and tears them
# down on exit, whatever happened.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${PODINJECT_BUILD:-$ROOT/build}
PI=$BUILD/podinject
PINET=$BUILD/pinet
SUITE=$(basename "$0" .sh)

pass() { echo "PASS $SUITE/$1"; }
fail() { echo "FAIL $SUITE/$1: $2"; }
skip() { echo "SKIP $SUITE/$1: $2"; }

# check NAME CMD...: one test line from a command's exit status; the last
# line of its output is the reason when it fails.
check() {
	local name=$1 out
	shift
	if out=$("$@" 2>&1); then
		pass "$name"
	else
		fail "$name" "$(echo "$out" | tail -n 1)"
	fi
}

# check_fails NAME CMD...: the command must fail.
check_fails() {
	local name=$1 out
	shift
	if out=$("$@" 2>&1); then
		fail "$name" "succeeded but should not: $(echo "$out" | tail -n 1)"
	else
		pass "$name"
	fi
}

# expect_eq NAME GOT WANT
expect_eq() {
	if [ "$2" = "$3" ]; then pass "$1"; else fail "$1" "got '$2', want '$3'"; fi
}

# Numbers. Shell arithmetic takes an empty or unset value for 0, so a
# counter that could not be read (a missing tool, a failed jq) would make
# "moved by 0" or "took less than 1000 ms" true. These helpers fail on
# anything that is not an integer instead.
is_num() { [[ ${1:-} =~ ^-?[0-9]+$ ]]; }
# sub A B: prints A - B, or "not-a-number(A - B)" when either is not one
sub() {
	if is_num "${1:-}" && is_num "${2:-}"; then
		echo $(($1 - $2))
	else
		echo "not-a-number('${1:-}' - '${2:-}')"
	fi
}
# expect_num NAME GOT WANT: GOT is an integer and equals WANT
expect_num() {
	if ! is_num "$2"; then
		fail "$1" "got '$2', not a number (want $3)"
	elif [ "$2" -eq "$3" ]; then
		pass "$1"
	else
		fail "$1" "got $2, want $3"
	fi
}
# expect_lt NAME GOT LIMIT: GOT is an integer below LIMIT
expect_lt() {
	if ! is_num "$2"; then
		fail "$1" "got '$2', not a number (want < $3)"
	elif [ "$2" -lt "$3" ]; then
		pass "$1"
	else
		fail "$1" "got $2, want < $3"
	fi
}
# now_ms: milliseconds since the epoch; prints nothing when the clock
# cannot say (a date without %N), so that expect_lt fails
now_ms() {
	local ns
	ns=$(date +%s%N 2>/dev/null)
	is_num "$ns" && [ ${#ns} -gt 12 ] && echo $((ns / 1000000))
}

# wait_udp_listen NETNS PORT [-6]: a UDP socket of NETNS is bound to PORT
# (a "nothing arrived" check means nothing only if someone listened)
wait_udp_listen() {
	local fam=-4
	[ "${3:-}" = -6 ] && fam=-6
	for _ in $(seq 100); do
		[ -n "$(ip netns exec "$1" ss -Hnul $fam "( sport = :$2 )")" ] && return 0
		sleep 0.02
	done
	echo "nothing listens on UDP port $2 in $1"
	return 1
}
# wait_tcp_listen NETNS PORT: something in NETNS listens on TCP PORT
# (up to 5 s: a server started a moment ago on a busy machine)
wait_tcp_listen() { wait_tcp_listen_by "ip netns exec $1" "$1" "$2"; }
# wait_tcp_listen_by RUN NAME PORT: the same where RUN (a command prefix)
# runs ss in the namespace, e.g. nsenter for a container's
wait_tcp_listen_by() {
	for _ in $(seq 250); do
		[ -n "$($1 ss -Hntl "( sport = :$3 )")" ] && return 0
		sleep 0.02
	done
	echo "nothing listens on TCP port $3 in $2"
	return 1
}

pi() { "$PI" "$@"; }
in_ns() { local ns=$1; shift; ip netns exec "$ns" "$@"; }

# bg_wait PID...: waits for each and sets BG_FAILS to how many exited
# non-zero. By PID, not by `jobs -p`: a job that ended before `jobs -p`
# ran is not listed, and its status was lost (t_concurrency's winner of
# four adds at once, fast enough once pods were read in batches, was not
# counted; a failure would not have been either). `wait PID` gets the
# status of a child that has ended already. Not in $(...): a subshell
# cannot wait for this shell's children.
bg_wait() {
	local p
	BG_FAILS=0
	for p; do
		wait "$p" || BG_FAILS=$((BG_FAILS + 1))
	done
}

node_up() {
	local n=$1
	shift
	"$PI" -N "$n" node up "$@" >/dev/null
}

# The stats of a pod as JSON: pod_stat NODE POD FIELD (a jq path)
pod_stat() {
	"$PI" -N "$1" -j pod show "$2" | jq -r ".stats$3"
}

# fd_links PID: where each of the process's descriptors points, a line
# each (readlink, not find's -lname: the kernel lab's find is busybox's)
fd_links() { for f in "/proc/$1"/fd/*; do readlink "$f"; done 2>/dev/null; }

cleanup_all() {
	local n
	# Without a prefix the patterns below would match everyone's.
	[ -n "${PREFIX:-}" ] || return 0
	# What runs in the suite's namespaces ends with them: a process
	# started in a subshell (a `check`'s command) is not this shell's
	# job, and outlives its namespace's name (tests/run.sh reports it).
	for n in $(ip netns list | awk '{print $1}' | grep "^$PREFIX" || true); do
		kill $(ip netns pids "$n" 2>/dev/null) 2>/dev/null
	done
	# A host node's pins are NAME@COOKIE (its namespace's cookie).
	for n in $(ls /sys/fs/bpf/podinject 2>/dev/null | grep "^$PREFIX"); do
		"$PI" -N "${n%@*}" node down >/dev/null 2>&1
	done
	# and what a `node up` killed before it renamed its directory left
	rm -rf /sys/fs/bpf/podinject/_up_"$PREFIX"* 2>/dev/null
	for n in $(ip netns list | awk '{print $1}' | grep "^$PREFIX" || true); do
		ip netns del "$n" 2>/dev/null
	done
	kill $(jobs -p) 2>/dev/null
	wait 2>/dev/null
}

require_root() {
	if [ "$(id -u)" != 0 ]; then
		skip all "needs root"
		exit 0
	fi
}

# Two nodes with a veth wire between them, each with an address on it and
# a route to the other node's pod range through it.
#   make_wire NODE_A NODE_B
make_wire() {
	local a=$1 b=$2
	ip netns add "$a"
	ip netns add "$b"
	ip -n "$a" link add wire0 type veth peer name wire0 netns "$b"
	# No duplicate address detection on the wire: a tentative link-local
	# address would hold up neighbour discovery for the first packets.
	ip netns exec "$a" sysctl -qw net.ipv6.conf.wire0.accept_dad=0
	ip netns exec "$b" sysctl -qw net.ipv6.conf.wire0.accept_dad=0
	ip -n "$a" addr add 192.168.77.1/24 dev wire0
	ip -n "$b" addr add 192.168.77.2/24 dev wire0
	ip -n "$a" addr add fd77::1/64 dev wire0 nodad
	ip -n "$b" addr add fd77::2/64 dev wire0 nodad
	ip -n "$a" link set wire0 up
	ip -n "$b" link set wire0 up
	ip -n "$a" route add 10.244.1.0/24 via 192.168.77.2
	ip -n "$b" route add 10.244.0.0/24 via 192.168.77.1
	ip -n "$a" -6 route add fd00:1::/64 via fd77::2
	ip -n "$b" -6 route add fd00:0::/64 via fd77::1
}

# prev_release REV: a build of the release REV (a tag or commit of this
# repository's history: git archive, make), its CLI and CNI plugin, cached
# under the build dir per commit (suites running it share it, under a
# lock); prints the tree's directory, or fails without the history. A
# release tag a clone did not fetch is found by its commit
# (PREV_RELEASE_COMMITS), and where there is no git at all (the kernel
# lab's guest) a cache made before, on the host, serves.
declare -A PREV_RELEASE_COMMITS=([v0.1]=31e717c [v0.2]=db9b60b [v0.3]=f8422fb [v0.4]=91a6c50)
prev_release() {
	local commit dir=$BUILD/prev-$1
	commit=$(git -C "$ROOT" rev-parse "$1^{commit}" 2>/dev/null) ||
		commit=$(git -C "$ROOT" rev-parse "${PREV_RELEASE_COMMITS[$1]:-none}^{commit}" 2>/dev/null)
	if [ -z "$commit" ]; then
		[ -x "$dir/build/podinject" ] && [ -x "$dir/build/podinject-cni" ] &&
			[ -s "$dir/.commit" ] && ! command -v git >/dev/null &&
			echo "$dir"
		return
	fi
	(
		flock 9
		if [ "$(cat "$dir/.commit" 2>/dev/null)" != "$commit" ] ||
		   [ ! -x "$dir/build/podinject" ] || [ ! -x "$dir/build/podinject-cni" ]; then
			rm -rf "$dir"
			mkdir -p "$dir"
			git -C "$ROOT" archive "$commit" | tar -x -C "$dir" &&
			make -C "$dir" -s -j2 build/podinject build/podinject-cni >/dev/null 2>&1 &&
			echo "$commit" >"$dir/.commit"
		fi
	) 9>"$BUILD/prev-$1.lock"
	[ -x "$dir/build/podinject" ] && [ -x "$dir/build/podinject-cni" ] &&
		[ -s "$dir/.commit" ] && echo "$dir"
}

# need_mtls_tools TOOL...: the mTLS suites' openssl and tcpdump (make
# deps), the capture reader tlsrec and the built tools they name; else the
# suite is one SKIP and the shell exits
need_mtls_tools() {
	local tool
	for tool in openssl tcpdump; do
		if ! command -v $tool >/dev/null; then
			skip all "no $tool (make deps)"
			exit 0
		fi
	done
	for tool in "$BUILD/tlsrec" "$@"; do
		[ -x "$tool" ] || { skip all "no $tool (make)"; exit 0; }
	done
}

# tls_records PCAP PORT MARKER: the TCP streams to and from PORT in the
# capture cut into TLS records, as one line of counts (tests/tools/tlsrec.c)
tls_records() {
	"$BUILD/tlsrec" "$@"
}

# wire_capture NS IFACE PORT PCAP: tcpdump in NS on IFACE, TCP to or from
# PORT, into PCAP (what it says in PCAP.log); returns once it listens.
# --immediate-mode, or libpcap's TPACKET_V3 ring hands a block of packets
# over only when it fills or its timeout (a second) runs out; a 32 MiB ring,
# since one 64 KiB GSO packet takes a whole slot of the default 2 MiB; run
# by ip itself, so that a signal to WIRE_DUMP reaches timeout and through it
# tcpdump
wire_capture() {
	ip netns exec $1 timeout 90 tcpdump --immediate-mode -B 32768 -Z root -i $2 -s 0 -U \
		-w $4 tcp port $3 2>$4.log &
	WIRE_DUMP=$!
	for _ in $(seq 600); do grep -q listening $4.log 2>/dev/null && break; sleep 0.1; done
}

# wire_capture_end PCAP: stops the capture once PCAP has not grown for 0.3 s
# (a tcpdump starved on a loaded machine is behind the wire, and what is
# still in its ring when it stops is lost without being counted as a drop);
# fails, saying so, when the capture is not whole: the kernel dropped
# packets, or tcpdump stopped before reading all it was handed. A check on
# a capture that is not whole says nothing, so the callers run the exchange
# again.
wire_capture_end() {
	local pcap=$1 size last=-1 still=0 got recv drop
	for _ in $(seq 100); do
		size=$(stat -c %s "$pcap" 2>/dev/null || echo 0)
		if [ "$size" = "$last" ]; then
			still=$((still + 1))
			[ $still -ge 3 ] && break
		else
			still=0
		fi
		last=$size
		sleep 0.1
	done
	kill -INT $WIRE_DUMP 2>/dev/null
	wait $WIRE_DUMP 2>/dev/null
	got=$(awk '/packets captured/ {print $1}' "$pcap.log")
	recv=$(awk '/packets received by filter/ {print $1}' "$pcap.log")
	drop=$(awk '/packets dropped by kernel/ {print $1}' "$pcap.log")
	[ -n "$got" ] && [ "$got" = "$recv" ] && [ "$drop" = 0 ] && return 0
	echo "# capture not whole (captured ${got:-?}, received ${recv:-?}, dropped ${drop:-?}): the exchange again"
	return 1
}

# inject_at_scale NODE INJECTOR TARGET RECEIVER DST PORT PATH COUNT RATE:
# COUNT sequence-numbered datagrams (useq) at RATE a second from INJECTOR's
# namespace with TARGET's address (an injection as TARGET on PATH) to
# DST:PORT in RECEIVER's, and what each counter saw of them, one line:
# "sent N received N missing 0 duplicated 0 egress N stats N" when every
# one was handled exactly once (TARGET's egress counter and `inject
# stats` moved by N, the receiver saw each number once)
INJECT_SCALE=100000
inject_at_scale() {
	local n=$1 inj=$2 tgt=$3 rcv=$4 dst=$5 port=$6 path=$7 count=$8 rate=$9
	local src eg0 st0 sent got missing dup r out
	out=$(mktemp)
	src=$("$PI" -N $n -j pod show $tgt | jq -r .ipv4)
	eg0=$(pod_stat $n $tgt .egress_packets)
	st0=$(inject_stat_packets $n $inj $tgt $path)
	in_ns $rcv "$BUILD/useq" recv $port $count 3000 30000 >$out &
	r=$!
	wait_udp_listen $rcv $port >/dev/null || echo -n "no-listener "
	sent=$(in_ns $inj "$BUILD/useq" send $dst $port $rate $count $src)
	wait $r
	read -r _ got _ missing _ dup _ <$out
	rm -f $out
	echo "$sent received ${got:-?} missing ${missing:-?} duplicated ${dup:-?}" \
		"egress $(($(pod_stat $n $tgt .egress_packets) - eg0))" \
		"stats $(($(inject_stat_packets $n $inj $tgt $path) - st0))"
}
at_scale_want() {
	echo "sent $INJECT_SCALE received $INJECT_SCALE missing 0 duplicated 0 egress $INJECT_SCALE stats $INJECT_SCALE"
}
# inject_stat_packets NODE INJECTOR TARGET PATH: `inject stats`' packets
# of that injection
inject_stat_packets() {
	"$PI" -N $1 -j inject stats | jq --arg i $2 --arg t $3 --arg p $4 \
		'[.[] | select(.injector == $i and .as == $t and .path == $p) | .packets] | add // 0'
}

# head_roles NODE POD: the head program's record of what it has to look
# at on the pod's host-side device (inject/head_roles, enum
# pi_dp_head_role), as a number; 0 for none
ROLE_KNOWN=$((1 << 31))
head_roles() {
	local ifi v=0 i=0 byte
	ifi=$("$PI" -N $1 -j pod show $2 | jq .host_ifindex)
	for byte in $(bpftool -j map lookup pinned /sys/fs/bpf/podinject/$1/inject/head_roles \
		key $((ifi & 255)) $((ifi >> 8 & 255)) $((ifi >> 16 & 255)) $((ifi >> 24)) |
		jq -r '.value[]'); do
		v=$((v + (byte << (8 * i))))
		i=$((i + 1))
	done
	echo $v
}

# inbound_flows_gone NODE: the node's inbound proxy rules come to hold no
# flow (client, upstream) and no refusal, within 10 s
inbound_flows_gone() {
	local now
	for _ in $(seq 50); do
		now=$("$PI" -N "$1" -j proxy list | jq -r '.[] | select(.direction == "inbound") |
			"\(.flows) \(.upstream_flows) \(.limit_drops)"')
		[ -z "$(grep -v '^0 0 0$' <<<"$now")" ] && [ -n "$now" ] && return 0
		sleep 0.2
	done
	echo "inbound flows, upstream flows, limit drops: $now"
	return 1
}

# node_pin_dir NODE: where the node's pins are (a host node's are keyed by
# its namespace)
# monitor_kinds DIR: the kinds the datapath writes events of, from the
# monitor_config pinned in DIR (a node's, or its inject/)
monitor_kinds() {
	bpftool map lookup pinned "$1/monitor_config" key 0 0 0 0 -j 2>/dev/null |
		jq -r '.value | if type == "object" then .kinds else
			(.[0:4] | reverse | map(ltrimstr("0x")) | join("") |
			 "0x" + .) end' | { read -r v; echo $((v)); }
}

# monitor_lost DIR: the events the datapath did not write though asked
# (a full ring, a lapsed lease), on all CPUs, from DIR's monitor_cpu
monitor_lost() {
	local h sum=0
	for h in $(bpftool map lookup pinned "$1/monitor_cpu" key 0 0 0 0 -j 2>/dev/null |
		jq -r '.values[].value[0:8] | reverse | map(ltrimstr("0x")) | join("")'); do
		sum=$((sum + 0x$h))
	done
	echo $sum
}

node_pin_dir() {
	local d
	d=$("$PI" -N "$1" -j node show 2>/dev/null | jq -r .pin_dir)
	echo "${d:-/sys/fs/bpf/podinject/$1}"
}

# test_prog_attach NODE PROG NETNS DEV ingress|egress PIN_DIR: one of
# tests/bpf's programs ($BUILD/PROG.bpf.o, its program PROG) at DEV's hook
# inside NETNS, the way NODE attaches: a tcx link pinned in PIN_DIR, or a
# clsact filter at priority 50 on a clsact node (no tcx: debian-6.1);
# its map pinned at PIN_DIR/map. test_prog_detach NETNS DEV DIR PIN_DIR
# takes it off.
test_prog_attach() {
	local node=$1 prog=$2 ns=$3 dev=$4 dir=$5 pin=$6
	mkdir -p "$pin"
	if [ "$("$PI" -N "$node" -j node show | jq -r .attach)" = tcx ]; then
		"$BUILD/tcx-attach" attach "$BUILD/$prog.bpf.o" "$prog" "$ns" "$dev" "$dir" "$pin"
	else
		"$BUILD/tcx-attach" attach-tc "$BUILD/$prog.bpf.o" "$prog" "$ns" "$dev" "$dir" "$pin" 50
	fi
}
test_prog_detach() {
	# a tcx link goes with its pin; a filter is deleted
	tc -n "$1" filter del dev "$2" "$3" pref 50 2>/dev/null
	rm -rf "$4"
}

# auth_map_fill NODE: the node's grants map filled with keys of no pod
# (injector ifindex 4000000000, no device has it), so that the next new
# grant cannot go in and the command making it fails on the way;
# auth_map_unfill NODE takes exactly those keys out again.
auth_map_fill() {
	local map ksz vsz max have i kpad vzero
	map=$(node_pin_dir "$1")/inject/inject_auth
	read -r ksz vsz max <<<"$(bpftool -j map show pinned "$map" | jq -r '"\(.bytes_key) \(.bytes_value) \(.max_entries)"')"
	have=$(bpftool -j map dump pinned "$map" | jq length)
	kpad=$(for ((i = 0; i < ksz - 12; i++)); do printf ' 00'; done)
	vzero=$(for ((i = 0; i < vsz; i++)); do printf ' 00'; done)
	for ((i = 0; i < max - have; i++)); do
		printf 'map update pinned %s key hex 00 28 6b ee 02 00 00 00 %02x %02x 00 00%s value hex%s\n' \
			"$map" $((i & 255)) $((i >> 8)) "$kpad" "$vzero"
	done >"/tmp/pi-fill.$1.$$"
	bpftool batch file "/tmp/pi-fill.$1.$$" >/dev/null 2>&1
}
auth_map_unfill() {
	sed -i 's/^map update \(pinned [^ ]* key hex [0-9a-f ]*\) value .*/map delete \1/' "/tmp/pi-fill.$1.$$"
	bpftool batch file "/tmp/pi-fill.$1.$$" >/dev/null 2>&1
	rm -f "/tmp/pi-fill.$1.$$"
}
auth_map_len() { bpftool -j map dump pinned "$(node_pin_dir "$1")/inject/inject_auth" | jq length; }

# The ids of a node's programs (datapath and injection), for checking after
# `node down` that nothing of theirs is left attached; other tests' do not
# count.
node_prog_ids() {
	local f d
	d=$(node_pin_dir "$1")
	for f in $d/prog_* $d/inject/prog_*; do
		[ -e "$f" ] && bpftool prog show pinned "$f" -j | jq .id
	done
}
# links_of_progs IDS...: BPF links (tcx, netkit) of these programs
links_of_progs() {
	local ids
	ids=$(printf '%s,' "$@")
	bpftool link list -j 2>/dev/null | jq "[.[] | select(.prog_id as \$p | [${ids%,}] | index(\$p))] | length"
}
# filters_of_progs IDS...: cls_bpf filters (clsact mode) running one of
# these programs, on any device of the root namespace and of this suite's
# namespaces: pod host sides, uplinks and node devices, whether the node's
# namespace was made by podinject or adopted. A filter keeps its program
# loaded, so its id stays valid. Prints nothing if a namespace that still
# exists cannot be read.
filters_of_progs() {
	local ids ns json c n=0
	ids=$(printf '%s,' "$@")
	for ns in "" $(ip netns list | awk '{print $1}' | grep "^${PREFIX:-none-}"); do
		if [ -z "$ns" ]; then
			json=$(bpftool net -j 2>/dev/null) || return 1
		else
			json=$(ip netns exec "$ns" bpftool net -j 2>/dev/null) || {
				ip netns list | grep -qw "$ns" || continue
				return 1
			}
		fi
		c=$(jq "[.[].tc[] | select(.id as \$p | [${ids%,}] | index(\$p))] | length" <<<"$json") &&
			is_num "$c" || return 1
		n=$((n + c))
	done
	echo $n
}
# hooks_of_progs IDS...: "LINKS FILTERS" of these programs
hooks_of_progs() {
	local l f
	l=$(links_of_progs "$@")
	f=$(filters_of_progs "$@")
	echo "${l:-?} ${f:-?}"
}
# expect_hooked NAME MODE IDS...: before a teardown, the programs are found
# where MODE (tcx or clsact) attaches them, so that "0 left" afterwards
# was counted by a helper that sees them
expect_hooked() {
	local name=$1 mode=$2 got l f
	shift 2
	got=$(hooks_of_progs "$@")
	l=${got% *}
	f=${got#* }
	if [ $# = 0 ]; then
		fail "$name" "no program ids (pins gone?)"
	elif ! is_num "$l" || ! is_num "$f"; then
		fail "$name" "cannot count links and filters: '$got'"
	elif [ "$mode" = clsact ] && [ "$f" -gt 0 ] && [ "$l" = 0 ]; then
		pass "$name"
	elif [ "$mode" != clsact ] && [ "$l" -gt 0 ] && [ "$f" = 0 ]; then
		pass "$name"
	else
		fail "$name" "$mode mode, found $l links and $f filters"
	fi
}
# expect_unhooked NAME IDS...: after a teardown, no link and no filter of
# these programs is left
expect_unhooked() {
	local name=$1
	shift
	expect_eq "$name" "$(hooks_of_progs "$@")" "0 0"
}

tcx_links() { bpftool link list -j 2>/dev/null | jq '[.[] | select(.type == "tcx" or .type == 11 or .type == "netkit" or .type == 13)] | length'; }

trap cleanup_all EXIT

# on_sanitizer_build: whether the suite runs on CI's sanitizer build
# (make SANITIZE=1, PODINJECT_BUILD=.../build-san)
on_sanitizer_build() { [[ ${PODINJECT_BUILD:-} == *build-san* ]]; }
