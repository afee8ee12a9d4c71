#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Feed the stack malformed frames from the kernel side of its TAP interface
(the packet classes behind AMNESIA:33 and Ripple20), then check it still
answers: an option-loop SYN must get a SYN-ACK, ping and TCP echo must work.

  interop_scapy.py IFACE STACK_MAC STACK_IP
"""
import random
import socket
import sys

from scapy.all import (ARP, ICMP, IP, TCP, UDP, Ether, Raw, conf, get_if_hwaddr,  # noqa: E402
                       sendp, srp1)

iface, mac, ip = sys.argv[1], sys.argv[2], sys.argv[3]
conf.verb = 0
me = get_if_hwaddr(iface)
src = "192.0.2.1"
E = Ether(dst=mac, src=me)
rnd = random.Random(5)


def trunc(pkt, n):
    return bytes(pkt)[:n]


frames = []
frames.append(bytes(E)[:10])                                           # runt
frames.append(trunc(E / ARP(op=1, psrc=src, pdst=ip), 20))            # truncated ARP
frames.append(bytes(E / ARP(op=1, hwlen=0, plen=0, psrc=src, pdst=ip)))
frames.append(bytes(E / IP(src=src, dst=ip, ihl=15) / UDP(dport=7)))  # IHL past the packet
frames.append(bytes(E / IP(src=src, dst=ip, len=65535) / UDP(dport=7)))
frames.append(bytes(E / IP(src=src, dst=ip, len=0) / UDP(dport=7)))
frames.append(bytes(E / IP(src=src, dst=ip, chksum=0x1234) / ICMP()))
frames.append(bytes(E / IP(src=src, dst=ip, flags="MF") / UDP(dport=7) / Raw(b"f" * 64)))
frames.append(bytes(E / IP(src=src, dst=ip, frag=100) / Raw(b"g" * 64)))
frames.append(trunc(E / IP(src=src, dst=ip) / ICMP(), 14 + 20 + 3))  # truncated ICMP
frames.append(bytes(E / IP(src=src, dst=ip) / ICMP(chksum=1) / Raw(b"x" * 30)))
frames.append(bytes(E / IP(src=src, dst=ip) / UDP(dport=7, len=0) / Raw(b"u" * 10)))
frames.append(bytes(E / IP(src=src, dst=ip) / UDP(dport=7, len=4000) / Raw(b"u" * 10)))
frames.append(bytes(E / IP(src=src, dst=ip) / UDP(dport=7, chksum=7) / Raw(b"u" * 10)))
frames.append(bytes(E / IP(src=src, dst=ip) / TCP(dport=7, dataofs=0, flags="S")))
frames.append(bytes(E / IP(src=src, dst=ip) / TCP(dport=7, dataofs=15, flags="S")))
frames.append(bytes(E / IP(src=src, dst=ip) / TCP(dport=7, flags="S", chksum=3)))
frames.append(trunc(E / IP(src=src, dst=ip) / TCP(dport=7, flags="S"), 14 + 20 + 12))
frames.append(bytes(E / IP(src=src, dst=ip) / TCP(dport=7, flags="S", options=[("MSS", 0), ("WScale", 255)])))
frames.append(bytes(E / IP(src=src, dst=ip) / TCP(dport=7, flags="SAFRPU", seq=5)))
frames.append(bytes(E / IP(src=src, dst=ip) / TCP(dport=9999, flags="R")))
frames.append(bytes(E / IP(src=src, dst=ip, proto=99) / Raw(b"?" * 40)))
frames.append(bytes(E / IP(src="224.0.0.1", dst=ip) / UDP(dport=7)))   # multicast source
frames.append(bytes(E / IP(src=src, dst="255.255.255.255") / TCP(dport=7, flags="S")))
for _ in range(200):                                                  # random garbage
    body = bytes(rnd.getrandbits(8) for _ in range(rnd.randrange(0, 200)))
    frames.append(bytes(E / IP(src=src, dst=ip, proto=rnd.choice([1, 6, 17])) / Raw(body)))
for _ in range(100):                                                  # RST storm
    frames.append(bytes(E / IP(src=src, dst=ip) / TCP(sport=rnd.randrange(1, 65535), dport=7,
                                                      flags="R", seq=rnd.getrandbits(32))))
for f in frames:
    sendp(Ether(f) if len(f) >= 14 else Raw(f), iface=iface)
print(f"scapy: sent {len(frames)} malformed frames", flush=True)

# An option-loop SYN (an option of length 0) must still be answered: the
# four bytes after the header are options to the receiver (data offset 6).
syn = E / IP(src=src, dst=ip) / TCP(sport=40000, dport=7, flags="S", seq=1000, dataofs=6) / \
    Raw(b"\x01\x02\x00\x00")
ans = srp1(syn, iface=iface, timeout=3)
ok_syn = ans is not None and TCP in ans and (int(ans[TCP].flags) & 0x12) == 0x12
print(f"scapy: option-loop SYN answered: {ok_syn}", flush=True)

# The stack is still alive: TCP echo through the kernel's own stack.
s = socket.create_connection((ip, 7), timeout=10)
msg = bytes(rnd.getrandbits(8) for _ in range(100000))
s.sendall(msg)
got = b""
while len(got) < len(msg):
    b = s.recv(65536)
    if not b:
        break
    got += b
s.close()
print(f"scapy: echo after the storm: {got == msg}", flush=True)
sys.exit(0 if ok_syn and got == msg else 1)
