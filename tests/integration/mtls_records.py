# SPDX-License-Identifier: GPL-2.0
# t_mtls's look at a capture (pcap, Ethernet, IPv4): each TCP direction
# to or from PORT put back in order and cut into TLS records.
#   python3 mtls_records.py PCAP PORT MARKER
# prints "marker M records N appdata N appbytes N handshake N ccs N alert N
# bad N gaps N streams N": M is 1 when MARKER's bytes are anywhere in the
# file; bad counts what is not a TLS record stream (plaintext), or a
# handshake record after application data; gaps counts directions not
# seen whole (their start, or a segment, missing).
import struct, sys
pcap, port, marker = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode()
raw = open(pcap, 'rb').read()
magic = struct.unpack('<I', raw[:4])[0]
end = '<' if magic in (0xa1b2c3d4, 0xa1b23c4d) else '>'
link = struct.unpack(end + 'I', raw[20:24])[0]
segs = {}
off = 24
while off + 16 <= len(raw):
    _, _, incl, _ = struct.unpack(end + 'IIII', raw[off:off + 16])
    pkt = raw[off + 16:off + 16 + incl]
    off += 16 + incl
    if link != 1 or len(pkt) < 34 or pkt[12:14] != b'\x08\x00':
        continue
    ip = pkt[14:]
    ihl = (ip[0] & 15) * 4
    if ip[9] != 6:
        continue
    tot = struct.unpack('>H', ip[2:4])[0]
    tcp = ip[ihl:tot]
    sp, dp, seq = struct.unpack('>HHI', tcp[:8])
    doff = (tcp[12] >> 4) * 4
    flags = tcp[13]
    d = 'c2s' if dp == port else 's2c' if sp == port else None
    if d is None:
        continue
    key = (d, sp, dp)
    s = segs.setdefault(key, {'isn': None, 'data': {}})
    if flags & 2:
        s['isn'] = seq + 1
    pl = tcp[doff:]
    if pl:
        s['data'][seq] = pl
out = {'marker': int(marker in raw), 'records': 0, 'appdata': 0,
       'appbytes': 0, 'handshake': 0, 'ccs': 0, 'alert': 0, 'bad': 0,
       'gaps': 0, 'streams': 0}
for key, s in sorted(segs.items()):
    if s['isn'] is None:
        out['gaps'] += 1
        continue
    out['streams'] += 1
    stream, nxt = b'', s['isn']
    for seq in sorted(s['data']):
        pl = s['data'][seq]
        rel = (seq - nxt) & 0xffffffff
        if rel > 0x7fffffff:            # a retransmission of what we have
            skip = (nxt - seq) & 0xffffffff
            pl = pl[skip:]
            rel = 0
        if rel:
            out['gaps'] += 1
            break
        stream += pl
        nxt = (nxt + len(pl)) & 0xffffffff
    i, after_hs = 0, False
    while i + 5 <= len(stream):
        ct = stream[i]
        ver = stream[i + 1:i + 3]
        ln = struct.unpack('>H', stream[i + 3:i + 5])[0]
        if ver not in (b'\x03\x01', b'\x03\x03') or ln > 16384 + 256:
            out['bad'] += 1
            break
        out['records'] += 1
        if ct == 0x17:
            out['appdata'] += 1
            out['appbytes'] += ln
            after_hs = True
        elif ct == 0x16:
            out['handshake'] += 1
            if after_hs:               # plaintext handshake after encryption
                out['bad'] += 1
        elif ct == 0x14:
            out['ccs'] += 1
        elif ct == 0x15:
            out['alert'] += 1          # a plaintext alert
        else:
            out['bad'] += 1
        i += 5 + ln
    if i != len(stream):
        out['bad'] += 1
print(' '.join('%s %d' % kv for kv in out.items()))
