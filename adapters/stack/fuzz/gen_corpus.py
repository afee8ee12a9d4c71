#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Write the seed corpora of the stack's fuzz harnesses (needs scapy).

corpus/frame/*     one Ethernet frame each (fuzz_frame)
corpus/sequence/*  records op,len16,body (fuzz_sequence): a TCP handshake,
                   data, FIN, with time steps, against the harness's
                   deterministic ISN; IPv4 fragment trains (in order, reversed,
                   overlapping, incomplete until the reassembly timeout, an
                   echo request whose reply leaves in fragments).
corpus/established/*  step programs of fuzz_tcp_established (encoding in
                   its header comment): bulk transfer, out-of-order arrivals,
                   SACK recovery, zero window, FIN both ways; written first,
                   without scapy.
"""
import os
import struct
import sys

here = os.path.dirname(os.path.abspath(__file__))


def seg(plen, a=0, b=0, c=0, d=0x0b, sacks=()):
    """Peer segment: payload index plen, bytes A B C D, SACK block bytes."""
    return bytes([plen << 3, a, b & 0xff, c, d | len(sacks) << 4, *sacks])


def clock(arg):
    return bytes([arg << 3 | 3])


def write(arg):
    return bytes([arg << 3 | 4])


def recved(arg):
    return bytes([arg << 3 | 5])


def control(arg):
    return bytes([arg << 3 | 6])


def ack(arg):
    return bytes([arg << 3 | 7])


ALL = b"\x1e\x71\xff"     # passive open, MSS 1460, wscale 7, SACK, timestamps
BARE = b"\x01\x00\xff"    # active open, no options
established = {
    "bulk_send": ALL + write(12) + clock(9) + ack(2) + ack(31) + write(13) + clock(31) +
    ack(31) + clock(28),
    "bulk_receive": ALL + seg(27) + seg(27) + recved(16) + seg(27, a=2) + clock(10) + recved(16),
    "out_of_order": ALL + seg(18, b=10) + seg(18, b=11) + seg(18) + seg(18, b=-10) +
    seg(18, b=9) + recved(16) + clock(31),
    "sack_recovery": ALL + write(13) + clock(9) + seg(0, c=0x40, sacks=(0x11,)) +
    seg(0, c=0x40, sacks=(0x12, 0x31)) + seg(0, c=0x40, sacks=(0x13,)) + clock(31) +
    seg(0, c=0x40, d=0x4b, sacks=(0x10, 0x14)) + ack(31) + clock(31),
    "zero_window": ALL + write(10) + seg(0, c=0x80 | 20, d=0) + clock(31) + clock(31) +
    clock(31) + seg(0, d=0x0b) + ack(31),
    "fin_both": BARE + write(5) + seg(20, a=1) + recved(16) + control(0) + clock(9) + ack(31) +
    clock(28),
    "rto_spurious": ALL + write(8) + clock(31) + clock(31) + seg(0, a=128) + ack(31),
    "abort_close": BARE + write(12) + seg(4) + control(1) + clock(31) + ack(31) + clock(28),
}
os.makedirs(os.path.join(here, "corpus", "established"), exist_ok=True)
for name, body in established.items():
    with open(os.path.join(here, "corpus", "established", name), "wb") as fh:
        fh.write(body)

try:
    from scapy.all import ARP, ICMP, IP, TCP, UDP, Ether, Raw, fragment  # noqa: E402
except ImportError:
    sys.exit("scapy missing: only corpus/established written")

US_MAC, PEER_MAC = "02:00:00:00:00:0a", "02:00:00:00:00:0b"
US, PEER = "192.0.2.1", "192.0.2.2"


def eth(p):
    return Ether(dst=US_MAC, src=PEER_MAC) / p


OPTS = [("MSS", 1460), ("SAckOK", b""), ("Timestamp", (1, 0)), ("NOP", None), ("WScale", 7)]
frames = {
    "arp_request": Ether(dst="ff:ff:ff:ff:ff:ff", src=PEER_MAC) /
    ARP(op=1, hwsrc=PEER_MAC, psrc=PEER, pdst=US),
    "arp_reply": eth(ARP(op=2, hwsrc=PEER_MAC, psrc=PEER, hwdst=US_MAC, pdst=US)),
    "icmp_echo": eth(IP(src=PEER, dst=US) / ICMP(type=8, id=1, seq=1) / Raw(b"x" * 56)),
    "udp_echo": eth(IP(src=PEER, dst=US) / UDP(sport=5000, dport=7) / Raw(b"hello")),
    "tcp_syn": eth(IP(src=PEER, dst=US) / TCP(sport=4000, dport=7, flags="S", seq=1000,
                                                options=OPTS)),
    "tcp_synack": eth(IP(src=PEER, dst=US) / TCP(sport=80, dport=49152, flags="SA", seq=5,
                                                   ack=1, options=[("MSS", 0), ("WScale", 20)])),
    "ip_options": eth(IP(src=PEER, dst=US, options=b"\x01\x01\x01\x00") / UDP(dport=9) /
                      Raw(b"z")),
    "fragment": eth(IP(src=PEER, dst=US, flags="MF", frag=0) / UDP(dport=9) / Raw(b"q" * 20)),
    "fragment_last": eth(IP(src=PEER, dst=US, frag=185, proto=17) / Raw(b"t" * 40)),
}
for name, f in frames.items():
    with open(os.path.join(here, "corpus", "frame", name), "wb") as fh:
        fh.write(bytes(f))


def rec(op, body=b"", length=None):
    return struct.pack(">BH", op, len(body) if length is None else length) + body


# Handshake (the harness's ISN is deterministic but unknown here: the
# fuzzer's comparison tracing finds it), data, FIN, time.
seq = rec(0, bytes(frames["arp_request"])) + rec(0, bytes(frames["tcp_syn"])) + rec(1, length=10)
seq += rec(0, bytes(eth(IP(src=PEER, dst=US) / TCP(sport=4000, dport=7, flags="A", seq=1001,
                                                     ack=1))))
seq += rec(0, bytes(eth(IP(src=PEER, dst=US) / TCP(sport=4000, dport=7, flags="PA", seq=1001,
                                                     ack=1) / Raw(b"d" * 100))))
seq += rec(1, length=300) + rec(0, bytes(eth(IP(src=PEER, dst=US) /
                                              TCP(sport=4000, dport=7, flags="FA", seq=1101,
                                                  ack=1)))) + rec(1, length=60000)
with open(os.path.join(here, "corpus", "sequence", "handshake_data_fin"), "wb") as fh:
    fh.write(seq)


def frags(pkt, size=1480):
    return [bytes(eth(f)) for f in fragment(pkt, fragsize=size)]


def train(frames, tail=b""):
    return b"".join(rec(0, f) for f in frames) + tail


ARP_REQ = rec(0, bytes(frames["arp_request"]))
udp_big = IP(src=PEER, dst=US, id=0x4242) / UDP(sport=5000, dport=7) / Raw(b"u" * 4000)
echo_big = IP(src=PEER, dst=US, id=0x4343) / ICMP(type=8, id=2, seq=1) / Raw(b"p" * 4000)
udp_f, echo_f = frags(udp_big), frags(echo_big)
overlap = frags(IP(src=PEER, dst=US, id=0x4444) / UDP(sport=5000, dport=9) / Raw(b"o" * 64),
                size=24)
overlap.insert(2, bytes(eth(IP(src=PEER, dst=US, id=0x4444, flags="MF", frag=2, proto=17) /
                            Raw(b"X" * 32))))
sequences = {
    "frag_udp_in_order": ARP_REQ + train(udp_f),
    "frag_udp_reversed": ARP_REQ + train(reversed(udp_f)),
    "frag_overlap": train(overlap),
    "frag_timeout": train(udp_f[:1] + udp_f[2:], rec(1, length=20000) + rec(1, length=20000)),
    "frag_echo_reply_fragmented": ARP_REQ + train(echo_f) + rec(1, length=10),
}
for name, body in sequences.items():
    with open(os.path.join(here, "corpus", "sequence", name), "wb") as fh:
        fh.write(body)
print("corpus written")
