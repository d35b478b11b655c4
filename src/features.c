/* SPDX-License-Identifier: GPL-2.0 */
/* podinject features: what this kernel offers, as the probes found it. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>
#include "cmds.h"
#include "util.h"

static const char *inject_path(const struct pi_features *f)
{
	if (f->redirect_peer_egress)
		return "fast";
	return "fallback";
}

/* Whether the kernel can seal and open TLS records for podinject-proxy's
 * mTLS (kTLS), found as the proxy finds it at start: the "tls" upper
 * layer protocol is looked up by name (its module loaded if there is
 * one), and a kernel without it answers ENOENT; one with it refuses a
 * socket that is not connected. */
static bool ktls_probe(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), err;

	if (fd < 0)
		return false;
	err = setsockopt(fd, IPPROTO_TCP, TCP_ULP, "tls", sizeof("tls")) ?
	      errno : 0;
	close(fd);
	return err != ENOENT;
}

int do_features(int argc, char **argv)
{
	bool ktls;
	struct pi_features f;
	struct utsname u;
	int err;

	if (argc > 0 && is_prefix(argv[0], "help")) {
		fprintf(stderr, "Usage: podinject [-j] features\n");
		return EXIT_OK;
	}
	if (argc > 0)
		return usage_err("unknown argument '%s'", argv[0]);
	err = pi_features_probe(&f);
	if (err) {
		p_err("cannot probe kernel features: %s", strerror(-err));
		return EXIT_RUNTIME;
	}
	uname(&u);
	ktls = ktls_probe();
	if (json_output) {
		json_obj_open(jw);
		json_kstr(jw, "kernel", u.release);
		json_kbool(jw, "tcx", f.tcx);
		json_kbool(jw, "netkit", f.netkit);
		json_kbool(jw, "redirect_peer_egress", f.redirect_peer_egress);
		json_ku64(jw, "redirect_peer_egress_probe_retval",
			  f.redirect_peer_egress_retval);
		json_kbool(jw, "bpf_loop", f.bpf_loop);
		json_kbool(jw, "netkit_xdp", false);
		json_kbool(jw, "veth_xdp", f.veth_xdp);
		json_kbool(jw, "xdp_default", false);
		json_kstr(jw, "attach", f.tcx ? "tcx" : "clsact");
		json_kstr(jw, "inject_path", inject_path(&f));
		json_kstr(jw, "inject_path_netkit", !f.netkit ? "none" :
			  f.redirect_peer_egress ? "fast" : "netkit-fallback");
		json_kbool(jw, "ktls", ktls);
		json_obj_close(jw);
		json_end(jw);
		return EXIT_OK;
	}
	printf("kernel %s\n", u.release);
	printf("  tcx links                              %s\n",
	       f.tcx ? "yes" : "no (clsact + cls_bpf fallback)");
	printf("  netkit devices                         %s\n",
	       f.netkit ? "yes" : "no");
	printf("  bpf_redirect_peer(BPF_F_EGRESS)        %s (probe returned %d)\n",
	       f.redirect_peer_egress ? "yes" : "no", f.redirect_peer_egress_retval);
	printf("  bpf_loop                               %s\n",
	       f.bpf_loop ? "yes" : "no");
	printf("  XDP on netkit                          no (netkit has no XDP hook)\n");
	printf("  native XDP on veth                     %s\n",
	       f.veth_xdp ? "yes (pod ingress ACL, uplink XDP_REDIRECT: node up --xdp; off by default)" :
			    "no (node up --xdp refused; tc enforcement only)");
	printf("  injection path (auto)                  %s\n",
	       f.redirect_peer_egress ? "fast: bpf_redirect_peer(BPF_F_EGRESS)" :
	       "fallback: bpf_redirect(BPF_F_INGRESS)");
	printf("  injection onto netkit pods (auto)      %s\n",
	       !f.netkit ? "none (no netkit)" :
	       f.redirect_peer_egress ? "fast: bpf_redirect_peer(BPF_F_EGRESS)" :
	       "netkit fallback: bpf_redirect(BPF_F_INGRESS) + guard running the peer program");
	printf("  kTLS (the mTLS proxy's records)        %s\n",
	       ktls ? "yes: the kernel seals and opens them, podinject-proxy splices" :
		      "no (no CONFIG_TLS): OpenSSL in podinject-proxy does them");
	return EXIT_OK;
}
