#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# The end-to-end demo: a node with three pods routed by podinject's BPF
# datapath, a policy drop, a spoof drop, and injection into a pod's egress
# datapath with the counters that show it ran exactly once; the event
# monitor showing a drop with its reason and rule; a transparent proxy, and
# mTLS between two plaintext pods (origination and termination). All in
# network namespaces made here, all torn down at the end.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${PODINJECT_BUILD:-$ROOT/build}
N=demo-node
pi() { "$B/podinject" -N $N "$@"; }
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }

cleanup() { "$B/podinject" -N $N node down >/dev/null 2>&1 || true; }
trap cleanup EXIT
cleanup

say "What this kernel offers"
run "$B/podinject" features

say "A node (network namespace $N, ip_forward off) with three pods"
run pi node up
ip netns exec $N sysctl -qw net.ipv4.ip_forward=0 net.ipv6.conf.all.forwarding=0
run pi pod add demo-a --ip 10.244.0.10 --ip6 fd00::a
run pi pod add demo-b --ip 10.244.0.11 --ip6 fd00::b
run pi pod add demo-c --ip 10.244.0.12 --ip6 fd00::c
run pi pod list

say "Traffic between pods: only the BPF datapath can deliver it"
run ip netns exec demo-a ping -c 2 -i 0.2 10.244.0.11
run ip netns exec demo-a ping -6 -c 2 -i 0.2 fd00::c
ip netns exec demo-b "$B/pinet" tcp-server 8080 --sink --timeout 5000 &
sleep 0.3
run ip netns exec demo-a "$B/pinet" tcp-connect 10.244.0.11 8080 --send 10000000
wait

say "Policy: demo-a may not reach demo-c on TCP 8080; the monitor shows the drop, its reason and rule"
run pi policy add demo-a egress deny to 10.244.0.12/32 proto tcp port 8080
mon=$(mktemp)
"$B/podinject" -N $N monitor --type drop --pod demo-a --count 1 --duration 5 >"$mon" 2>/dev/null &
monpid=$!
sleep 0.5
run ip netns exec demo-a "$B/pinet" tcp-connect --timeout 1000 10.244.0.12 8080 || true
wait $monpid || true
echo "$ podinject -N $N monitor --type drop --pod demo-a --count 1"
cat "$mon"
rm -f "$mon"
run pi policy list demo-a

say "Spoofing: demo-c sends with demo-a's address; the datapath drops it"
run ip netns exec demo-c "$B/pinet" udp-send --bind 10.244.0.10 10.244.0.11 9000 5
run pi pod show demo-c

say "Injection: demo-c may speak for demo-a; its packets run demo-a's egress programs once"
run pi inject allow demo-c --as demo-a
before=$(pi -j pod show demo-a | jq .stats.egress_packets)
recv=$(mktemp)
ip netns exec demo-b "$B/pinet" udp-recv 9000 25 2000 >"$recv" &
sleep 0.3
run ip netns exec demo-c "$B/pinet" udp-send --bind 10.244.0.10 10.244.0.11 9000 25
wait
after=$(pi -j pod show demo-a | jq .stats.egress_packets)
run pi inject stats
# What was measured, said as it was: "exactly once" only when it holds.
moved=$((after - before))
got=$(awk 'NR == 1 {print $2}' "$recv")
from=$(awk '$1 == "from" {printf "%s%s (%s)", sep, $2, $4; sep = ", "}' "$recv")
rm -f "$recv"
if [ "$moved" = 25 ] && [ "$got" = 25 ] && [ "$from" = "10.244.0.10 (25)" ]; then
	verdict="exactly once"
else
	verdict="NOT exactly once"
fi
echo "demo-a egress counter moved by $moved for 25 injected packets ($verdict)"
echo "demo-b received ${got:-none} of them, from ${from:-no source}"

say "demo-a's egress policy applies to what is injected as demo-a"
run pi policy add demo-a egress deny to 10.244.0.11/32 proto udp port 9000
ip netns exec demo-b "$B/pinet" udp-recv 9000 25 1000 &
sleep 0.3
run ip netns exec demo-c "$B/pinet" udp-send --bind 10.244.0.10 10.244.0.11 9000 25
wait
run pi policy list demo-a

say "Transparent proxy: demo-a's connections go through podinject-proxy in demo-p"
run pi policy del demo-a egress all
run pi pod add demo-p --ip 10.244.0.13 --ip6 fd00::d
run pi proxy add demo-p --port 15001 --for demo-a --match tcp dport 8080
ip netns exec demo-p "$B/podinject-proxy" -v 15001 >/dev/null &
proxy=$!
sleep 0.5
srvout=$(mktemp)
ip netns exec demo-b "$B/pinet" tcp-server 8080 --sink --timeout 5000 >"$srvout" &
srv=$!
sleep 0.3
before=$(pi -j pod show demo-a | jq .stats.egress_packets)
inj0=$(pi -j inject stats | jq '[.[] | select(.as == "demo-a") | .packets] | add // 0')
run ip netns exec demo-a "$B/pinet" tcp-connect 10.244.0.11 8080 --send 4000000
wait $srv || true
after=$(pi -j pod show demo-a | jq .stats.egress_packets)
inj1=$(pi -j inject stats | jq '[.[] | select(.as == "demo-a") | .packets] | add // 0')
cat "$srvout"
echo "demo-b saw the connection from: $(awk '$1 == "accept" {print $2; exit}' "$srvout")"
rm -f "$srvout"
echo "the proxy's upstream: $((inj1 - inj0)) packets injected as demo-a, demo-a's egress counted $((after - before))"
run pi inject stats
kill $proxy
wait $proxy 2>/dev/null || true
run pi proxy del demo-p --for demo-a

say "mTLS: demo-a and demo-b speak plaintext; between them only TLS 1.3 records travel"
# demo-p originates TLS as demo-a (demo-a's certificate), demo-q terminates
# it as demo-b (demo-b's certificate, demo-a's checked against its source
# address) and connects to demo-b from demo-a's address.
pki=$(mktemp -d)
"$ROOT/scripts/mtls-pki.sh" ca "$pki" demo.test >/dev/null
"$ROOT/scripts/mtls-pki.sh" issue "$pki" demo demo-a 10.244.0.10 >/dev/null
"$ROOT/scripts/mtls-pki.sh" issue "$pki" demo demo-b 10.244.0.11 >/dev/null
run pi pod add demo-q --ip 10.244.0.14
run pi proxy add demo-p --port 15001 --for demo-a --match tcp dport 8443
run pi proxy add demo-q --port 15006 --for demo-b --inbound --match tcp dport 8443
run pi proxy list
tls=(--tls-dir "$pki" --tls-ca "$pki/ca.pem" --tls-trust-domain demo.test)
ip netns exec demo-p "$B/podinject-proxy" -v "${tls[@]}" 15001 >/dev/null 2>"$pki/p.log" &
pout=$!
ip netns exec demo-q "$B/podinject-proxy" -v --inbound "${tls[@]}" 15006 >/dev/null 2>"$pki/q.log" &
pin=$!
srvout=$(mktemp)
ip netns exec demo-b "$B/pinet" tcp-server 8443 --sink --timeout 5000 >"$srvout" &
srv=$!
# the wire to demo-b: its host-side device, which the client's packets
# cross on their way to demo-q (the plaintext leg goes from demo-q to
# demo-b's eth0 directly, inside the node)
ip netns exec $N timeout 20 tcpdump --immediate-mode -Z root -i pi-demo-b -s 0 -U -w "$pki/wire.pcap" tcp port 8443 2>"$pki/dump.log" &
dump=$!
for _ in $(seq 100); do grep -q listening "$pki/dump.log" 2>/dev/null && break; sleep 0.1; done
sleep 0.5
marker=plaintext-marker-$(openssl rand -hex 8)
echo "$ ip netns exec demo-a bash -c 'echo $marker > /dev/tcp/10.244.0.11/8443'"
ip netns exec demo-a bash -c "exec 3<>/dev/tcp/10.244.0.11/8443 && echo $marker >&3 && sleep 0.3 && exec 3>&-"
wait $srv || true
sleep 0.3
kill $dump 2>/dev/null || true
wait $dump 2>/dev/null || true
echo "demo-b saw the connection from: $(awk '$1 == "accept" {print $2; exit}' "$srvout"), $(awk '$1 == "conn-done" {print $3; exit}' "$srvout") bytes"
echo "the originating proxy:  $(grep -m1 '^tls ' "$pki/p.log" | cut -d' ' -f1-6)"
echo "the terminating proxy: $(grep -m1 '^tls-in ' "$pki/q.log" | cut -d' ' -f1-6)"
pkts=$(tcpdump -r "$pki/wire.pcap" src 10.244.0.10 2>/dev/null | wc -l)
if grep -qa "$marker" "$pki/wire.pcap"; then seen=yes; else seen=no; fi
echo "the wire to demo-b: $pkts packets from 10.244.0.10 captured, the plaintext marker in them: $seen"
echo "  TLS records in them: $("$B/tlsrec" "$pki/wire.pcap" 8443 "$marker" | cut -d' ' -f3-10)"
kill $pout $pin 2>/dev/null || true
wait $pout $pin 2>/dev/null || true
rm -rf "$pki" "$srvout"
run pi proxy del demo-p --for demo-a
run pi proxy del demo-q --for demo-b

say "Probes: debug a policy from demo-b's point of view, without entering demo-b"
ip netns exec demo-c "$B/pinet" tcp-server 8080 --count 5 --timeout 5000 >/dev/null &
srv=$!
sleep 0.3
run pi policy add demo-b egress deny to 10.244.0.12/32 proto tcp port 8080
run pi probe --from demo-b --to 10.244.0.12:8080 --count 2
run pi probe --from demo-b --to 10.244.0.10:8080 --count 1
run pi probe --from demo-a --to 10.244.0.12:8080 --count 3
run pi probe matrix --proto tcp --port 8080
kill $srv 2>/dev/null || true

say "Teardown"
run pi node down
echo "namespaces left: $(ip netns list | grep -c demo- || true)"
trap - EXIT
