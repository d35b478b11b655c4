#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# What `podinject features` reports in the kernel lab, against what each lab
# kernel is known to have (docs/lab.md). Everywhere else the suites trust
# the probes: a case a kernel cannot run SKIPs on their word, the node picks
# tcx or clsact on their word. A probe gone wrong would turn the fast-path
# cases into SKIPs on ours, or run 6.12 in clsact mode, and every suite would
# still pass; here it fails.
#
#   tests/lab/expect-features.sh   (run by tests/lab/run-lab-tests.sh)
# One PASS/FAIL/SKIP line per feature; exit 1 if one failed.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
PI=${PODINJECT_BUILD:-build}/podinject

# name=value pairs of the features JSON, per lab kernel
case "${PODINJECT_LAB:-}" in
ours)
	want="tcx=true netkit=true redirect_peer_egress=true bpf_loop=true attach=tcx inject_path=fast inject_path_netkit=fast" ;;
debian-6.12)
	want="tcx=true netkit=true redirect_peer_egress=false bpf_loop=true attach=tcx inject_path=fallback inject_path_netkit=netkit-fallback" ;;
debian-6.1)
	want="tcx=false netkit=false redirect_peer_egress=false bpf_loop=true attach=clsact inject_path=fallback inject_path_netkit=none" ;;
'')
	echo "SKIP lab_features: lab-only test, run by 'make lab' (PODINJECT_LAB is unset)"
	exit 0 ;;
*)
	echo "SKIP lab_features: no expectations for lab kernel '$PODINJECT_LAB' (known: ours debian-6.12 debian-6.1)"
	exit 0 ;;
esac

if [ "$(id -u)" != 0 ]; then
	echo "SKIP lab_features: needs root (the probes make a namespace and load programs)"
	exit 0
fi
if ! json=$("$PI" -j features 2>&1); then
	echo "FAIL lab_features: '$PI -j features' failed: $(tail -n 1 <<<"$json")"
	exit 1
fi
rc=0
for kv in $want; do
	key=${kv%%=*}
	exp=${kv#*=}
	got=$(jq -r --arg k "$key" '.[$k] | tostring' <<<"$json" 2>/dev/null)
	if [ "$got" = "$exp" ]; then
		echo "PASS lab_features/$key"
	else
		echo "FAIL lab_features/$key: podinject features says '$got', $PODINJECT_LAB ($(uname -r)) has '$exp'"
		rc=1
	fi
done
exit $rc
