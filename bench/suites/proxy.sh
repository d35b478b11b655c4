# SPDX-License-Identifier: GPL-2.0
# Suite "proxy": throughput and new connections/s through podinject-proxy
# with injection, against the direct connection (the limit). Runs once the
# proxy exists; until then it says so.

suite_proxy() {
	suite_begin proxy "Proxy: throughput and connections/s through podinject-proxy vs direct"
	if [ ! -x "$BUILD/podinject-proxy" ]; then
		skip all "$BUILD/podinject-proxy does not exist yet (the proxy is another issue); nothing to measure"
	fi
	suite_end
}
