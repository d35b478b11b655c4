#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
# Writes the seed inputs of fuzz_bpf (format: tests/fuzz/fuzz_bpf.c) into
# the folder given: frames a pod sends and receives, with rule sets that
# decide on them. Run once; the fuzzer's merged corpus is what is kept.
import os, struct, sys, socket

A4, B4, X4 = "10.0.0.1", "10.0.0.2", "192.0.2.7"
A6, B6, X6 = "fd00::1", "fd00::2", "2001:db8::7"
MAC_A = bytes([2, 0xaa, 0, 0, 0, 1])

def eth(t): return b"\x02\xaa\0\0\0\xfe" + MAC_A + struct.pack("!H", t)
def tcp(sp, dp): return struct.pack("!HHIIBBHHH", sp, dp, 1, 0, 0x50, 2, 65535, 0, 0)
def udp(sp, dp, pl=b"x" * 8): return struct.pack("!HHHH", sp, dp, 8 + len(pl), 0) + pl
def icmp(): return b"\x08\0\0\0\0\1\0\1"

def ip4(src, dst, proto, l4, opts=b"", frag=0, ident=0x1234):
    ihl = 5 + len(opts) // 4
    h = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, 20 + len(opts) + len(l4),
                    ident, frag, 64, proto, 0, socket.inet_aton(src),
                    socket.inet_aton(dst))
    return eth(0x0800) + h + opts + l4

def ip6(src, dst, nh, payload):
    h = struct.pack("!IHBB16s16s", 0x60000000, len(payload), nh, 64,
                    socket.inet_pton(socket.AF_INET6, src),
                    socket.inet_pton(socket.AF_INET6, dst))
    return eth(0x86DD) + h + payload

def ext(nh, n8=0): return bytes([nh, n8]) + b"\x01\x04\0\0\0\0" + b"\0" * (8 * n8)
def ah(nh): return bytes([nh, 4]) + b"\0\0" + b"\0" * 20   # 24 bytes: (4+2)*4
def frag6(nh, off, more, ident=0xabcd): return struct.pack("!BBHI", nh, 0, off << 3 | more, ident)

def rule(deny, proto_idx, peer, plen, lo=0, hi=0, family=True):
    b0 = (1 if deny else 0) | proto_idx << 1 | (16 if family else 0)
    return struct.pack("!BBBHHB", b0, peer, plen, lo, hi, 0)

def frame(prog, f, flags=0): return struct.pack("!BBH", prog, flags, len(f)) + f

def inp(egress, ingress, *frames):
    return bytes([len(egress), len(ingress)]) + b"".join(egress) + b"".join(ingress) + b"".join(frames)

# proto idx: 0 any, 1 tcp, 2 udp, 3 icmp, 4 icmpv6-word; peer idx: 0 A4, 1 B4,
# 2 10.0.0.0, 3 192.0.2.0, 4 0.0.0.0, 5 A6, 6 B6, 7 fd00::, 8 fe80::, 9 ff02::1
deny_udp53 = rule(1, 2, 4, 0, 53, 53, family=False)
deny_tcp80_b = rule(1, 1, 1, 32, 80, 80)
deny_b6 = rule(1, 0, 6, 128)
allow_icmp = rule(0, 3, 4, 0, family=False)
deny_all = rule(1, 0, 4, 0, family=False)
ing_deny_x = rule(1, 0, 3, 24)

seeds = {
    "v4_tcp": inp([deny_tcp80_b], [], frame(0, ip4(A4, B4, 6, tcp(40000, 80)))),
    "v4_udp": inp([deny_udp53], [], frame(0, ip4(A4, B4, 17, udp(40000, 53)))),
    "v4_icmp": inp([allow_icmp, deny_all], [], frame(0, ip4(A4, B4, 1, icmp()))),
    "v4_options": inp([deny_udp53], [], frame(0, ip4(A4, X4, 17, udp(1, 53), opts=b"\x94\x04\0\0" + b"\x01" * 4))),
    "v4_frags": inp([deny_udp53], [],
                    frame(0, ip4(A4, B4, 17, udp(40000, 53, b"y" * 16), frag=0x2000)),
                    frame(0, ip4(A4, B4, 17, b"z" * 16, frag=3))),
    "v4_tiny_first": inp([deny_udp53], [], frame(0, ip4(A4, B4, 17, b"\0\1", frag=0x2000))),
    "v4_orphan": inp([], [], frame(0, ip4(A4, B4, 6, b"q" * 24, frag=5))),
    "v4_spoofed": inp([], [], frame(0, ip4(B4, X4, 6, tcp(1, 2)))),
    "v4_ingress": inp([], [ing_deny_x], frame(1, ip4(X4, A4, 6, tcp(443, 40000))),
                      frame(1, ip4("198.51.100.1", A4, 6, tcp(443, 40000)))),
    "v4_uplink": inp([], [ing_deny_x], frame(2, ip4(X4, A4, 17, udp(53, 4000))),
                     frame(2, ip4(B4, A4, 17, udp(53, 4000)))),
    "v4_to_self": inp([], [rule(1, 1, 0, 32, 1, 1000)], frame(0, ip4(A4, A4, 6, tcp(5, 22)))),
    "v6_tcp": inp([deny_b6], [], frame(0, ip6(A6, B6, 6, tcp(40000, 80)))),
    "v6_hbh_udp": inp([deny_udp53], [], frame(0, ip6(A6, X6, 0, ext(17) + udp(1, 53)))),
    "v6_chain": inp([deny_udp53], [], frame(0, ip6(A6, X6, 0, ext(60, 1) + ext(43) + ext(17) + udp(1, 53)))),
    "v6_ah_tcp": inp([rule(1, 1, 4, 0, 22, 22, family=False)], [], frame(0, ip6(A6, X6, 51, ah(6) + tcp(1, 22)))),
    "v6_hbh_ah": inp([deny_udp53], [], frame(0, ip6(A6, X6, 0, ext(51) + ah(17) + udp(1, 53)))),
    "v6_frags": inp([deny_udp53], [],
                    frame(0, ip6(A6, B6, 44, frag6(17, 0, 1) + udp(40000, 53, b"y" * 16))),
                    frame(0, ip6(A6, B6, 44, frag6(17, 3, 0) + b"z" * 16))),
    "v6_atomic_frag": inp([deny_udp53], [], frame(0, ip6(A6, B6, 44, frag6(17, 0, 0) + udp(1, 53)))),
    "v6_too_many_ext": inp([], [], frame(0, ip6(A6, X6, 60, b"".join(ext(60) for _ in range(9)) + udp(1, 2)))),
    "v6_ns": inp([], [], frame(0, ip6("fe80::1", "ff02::1:ff00:2", 58,
                  b"\x87\0\0\0\0\0\0\0" + socket.inet_pton(socket.AF_INET6, B6) + b"\x01\x01" + MAC_A))),
    "v6_na_spoof": inp([], [], frame(0, ip6(A6, "ff02::1", 58,
                  b"\x88\0\0\0\x20\0\0\0" + socket.inet_pton(socket.AF_INET6, B6) + b"\x02\x01" + MAC_A))),
    "v6_ra": inp([], [], frame(0, ip6("fe80::1", "ff02::1", 58, b"\x86\0\0\0" + b"\0" * 12))),
    "v6_icmp_echo": inp([rule(1, 4, 4, 0, family=False), rule(1, 3, 6, 128)], [],
                        frame(0, ip6(A6, B6, 58, b"\x80\0\0\0\0\1\0\1"))),
    "arp": inp([], [], frame(0, eth(0x0806) + bytes.fromhex("0001080006040001") + MAC_A
                             + socket.inet_aton(A4) + b"\0" * 6 + socket.inet_aton(B4)),
               frame(0, eth(0x0806) + bytes.fromhex("0001080006040001") + MAC_A
                     + socket.inet_aton(B4) + b"\0" * 6 + socket.inet_aton(A4))),
    "vlan": inp([], [], frame(0, eth(0x8100) + b"\0\x05\x08\0" + ip4(A4, B4, 6, tcp(1, 2))[14:])),
    "truncated": inp([deny_all], [], frame(0, ip4(A4, B4, 6, tcp(1, 2))[:40], 4),
                     frame(0, ip6(A6, B6, 6, tcp(1, 2))[:60], 4)),
}
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
