#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Installs the Debian packages given as arguments, only when one is missing,
# so a second run does nothing and needs no network.
set -eu
missing=()
for p in "$@"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
		missing+=("$p")
	fi
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "deps: all ${#@} packages present"
	exit 0
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "deps: done"
