#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Seeds of fuzz_dgram: record sequences (see fuzz_dgram.c) of valid
datagrams of a stream whose peer identifier the harness fills in."""
import os
import struct
import sys

HDR = ">BBBBIIIHHII"


def hdr(typ, flags=0, nsack=0, cid=0, sn=0, una=0, wnd=64, ln=0, ts=7, echo=0):
    return struct.pack(HDR, 0x5A, 1, typ, (flags & 15) | (nsack << 4), cid, sn, una, wnd, ln, ts, echo)


def rec(d, ctl=1, how=0):
    return struct.pack(">HB", len(d) | how << 14, ctl) + d


def run(dgrams, ctl=1):
    """A run as UDP GRO hands it over: equal datagrams, the last shorter."""
    seg = len(dgrams[0])
    return rec(struct.pack(">H", seg - 1) + b"".join(dgrams), ctl, how=2)


def data(sn, payload, fin=False, una=0):
    return hdr(3, flags=1 if fin else 0, sn=sn, una=una, ln=len(payload)) + payload


def ack(una, sacks=()):
    body = b"".join(struct.pack(">II", a, b) for a, b in sacks)
    return hdr(4, nsack=len(sacks), una=una) + body


out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus")
os.makedirs(out, exist_ok=True)
seeds = {
    "in_order": rec(data(1000, b"a" * 100)) + rec(data(1001, b"b" * 1400)) + rec(data(1002, b"", fin=True)),
    "out_of_order": rec(data(1002, b"c" * 50)) + rec(data(1001, b"b" * 60)) + rec(data(1000, b"a" * 70), 0x19),
    "ack_sack": rec(b"", 4) + rec(ack(0, [(5, 9), (12, 20)]), 0x31) + rec(hdr(5), 0x11),
    "ping_rst": rec(hdr(5)) + rec(hdr(6), 0x21),
    "garbage": rec(b"\x5a\x01\x03" + b"\xff" * 40, 3) + rec(b"\x00" * 7, 0),
    "flat": rec(data(1000, b"a" * 100), how=1) + rec(data(1001, b"", fin=True), how=1),
    "gro_run": run([data(1000 + i, bytes([65 + i]) * 300) for i in range(4)] + [data(1004, b"e" * 10)]),
    "gro_bad_middle": run([data(1000, b"a" * 200), b"\x00" * 228, data(1002, b"c" * 200)]),
}
for name, blob in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(blob)
