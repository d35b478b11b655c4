#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# What the running kernel is known to have (tests/kernels.txt):
#   tests/known-features.sh           prints the kernel's name in the table
#                                     and its FEATURE=VALUE pairs
#   tests/known-features.sh FEATURE   prints one value
# Exit 1, printing nothing, when the kernel (or the feature) is not listed.
set -u
table=$(dirname "$0")/kernels.txt
if [ -n "${PODINJECT_LAB:-}" ]; then
	kernel=lab:$PODINJECT_LAB
else
	kernel=$(uname -r)
fi
# The first field is a release or a shell pattern of releases (a line of
# kernels, e.g. 6.18.*-fc-*: a new build of a known line is known); the
# last line that matches wins.
line=
while read -r key rest; do
	case $key in '' | '#'*) continue ;; esac
	# shellcheck disable=SC2053 # the key is a pattern
	[[ $kernel == $key ]] && line="$key $rest"
done <"$table"
[ -n "$line" ] || exit 1
if [ $# = 0 ]; then
	echo "$line"
	exit 0
fi
for kv in ${line#* }; do
	[ "${kv%%=*}" = "$1" ] && { echo "${kv#*=}"; exit 0; }
done
exit 1
