#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# What `podinject features` reports, against what the kernel is known to
# have (tests/kernels.txt: the lab's kernels by PODINJECT_LAB, a host by
# `uname -r`; docs/lab.md, docs/testing.md). The suites take the probes'
# word for what to SKIP and how to attach; a probe gone wrong would turn
# the fast-path cases into SKIPs on ours, or run 6.12 in clsact mode, and
# every suite would still pass; here it fails.
#
#   tests/lab/expect-features.sh   (run by tests/lab/run-lab-tests.sh)
# One PASS/FAIL/SKIP line per feature; exit 1 if one failed.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
PI=${PODINJECT_BUILD:-build}/podinject

if ! known=$(tests/known-features.sh); then
	echo "SKIP lab_features: kernel ${PODINJECT_LAB:+lab:$PODINJECT_LAB }$(uname -r) is not in tests/kernels.txt (add what it is known to have)"
	exit 0
fi
name=${known%% *}
want=${known#* }

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
		echo "FAIL lab_features/$key: podinject features says '$got', $name ($(uname -r)) has '$exp'"
		rc=1
	fi
done
exit $rc
