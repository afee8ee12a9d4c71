#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The attacks of issue 10, from the kernel side of the stack's TAP interface.

  attack_scapy.py CLASS IFACE STACK_MAC STACK_IP [--check]

CLASS is one of ooo, zerowin, synflood, neigh, martian, land, challenge,
window.  Frames are sent and read on a raw packet socket bound to IFACE (so
the attacker sees the stack's answers to addresses it forges); the floods are
built by hand (scapy takes milliseconds a frame), the rest and every frame
read with scapy.  Forged on-link addresses come from 192.0.2.10 up, each with
its own locally administered MAC.  With --check, once the attack is over the
kernel itself must get an answer to a ping within one second and move 64 KiB
through the stack's echo service (port 7) on a new connection.  Exit status 0
when the attack ran and everything it had to observe held; what it saw is
printed.  Every wait is bounded.
"""
import hashlib
import os
import random
import socket
import struct
import subprocess
import sys
import time

from scapy.all import ARP, ICMP, IP, TCP, UDP, Ether, Raw, conf, get_if_hwaddr  # noqa: E402

cls, iface, smac, sip = sys.argv[1], sys.argv[2], sys.argv[3].lower(), sys.argv[4]
check = "--check" in sys.argv[5:]
conf.verb = 0
me = get_if_hwaddr(iface)
rnd = random.Random(10)
BCAST = "ff:ff:ff:ff:ff:ff"

sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
sock.bind((iface, 0))


def send(pkt):
    sock.send(bytes(pkt))


def csum(b):
    if len(b) & 1:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff


def mac_bytes(m):
    return bytes.fromhex(m.replace(":", ""))


def raw_ip(src, dst, proto, l4, l2_dst=None):
    """Ethernet + IPv4 around `l4`, whose checksum (TCP, UDP) is set here."""
    s4, d4 = socket.inet_aton(src), socket.inet_aton(dst)
    if proto in (6, 17):
        at = 16 if proto == 6 else 6
        l4 = bytearray(l4)
        l4[at:at + 2] = b"\0\0"
        c = csum(s4 + d4 + struct.pack("!BBH", 0, proto, len(l4)) + bytes(l4))
        l4[at:at + 2] = struct.pack("!H", c or 0xffff)
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), 1, 0x4000, 64, proto, 0,
                               s4, d4))
    ip[10:12] = struct.pack("!H", csum(bytes(ip)))
    eth = mac_bytes(l2_dst or smac) + mac_bytes(mac_of(src)) + b"\x08\x00"
    return eth + bytes(ip) + bytes(l4)


FLAGS = {"F": 1, "S": 2, "R": 4, "P": 8, "A": 16}


def raw_tcp(src, sport, dport, seq, ack, flags, win, data=b"", opts=b""):
    f = sum(FLAGS[c] for c in flags)
    hl = 20 + len(opts)
    t = struct.pack("!HHIIBBHHH", sport, dport, seq & 0xffffffff, ack & 0xffffffff, (hl // 4) << 4,
                    f, win, 0, 0) + opts + data
    return raw_ip(src, sip, 6, t)


def raw_icmp_echo(src, ident, seq, data):
    m = bytearray(struct.pack("!BBHHH", 8, 0, 0, ident, seq) + data)
    m[2:4] = struct.pack("!H", csum(bytes(m)))
    return raw_ip(src, sip, 1, bytes(m))


def mac_of(ip):
    return "02:66:%02x:%02x:%02x:%02x" % tuple(int(x) for x in ip.split("."))


def frames(seconds):
    """Frames the stack sends, for up to `seconds`."""
    end = time.time() + seconds
    while True:
        left = end - time.time()
        if left <= 0:
            return
        sock.settimeout(left)
        try:
            data = sock.recv(65535)
        except socket.timeout:
            return
        if data[6:12] == bytes.fromhex(smac.replace(":", "")):
            yield Ether(data)


def wait_for(pred, seconds=3.0):
    for p in frames(seconds):
        if pred(p):
            return p
    return None


def drain():
    sock.setblocking(False)
    try:
        while True:
            sock.recv(65535)
    except BlockingIOError:
        pass
    sock.setblocking(True)


def announce(ip):
    send(Ether(dst=BCAST, src=mac_of(ip)) / ARP(op=1, hwsrc=mac_of(ip), psrc=ip, pdst=sip))


def forged(ip):
    return Ether(dst=smac, src=mac_of(ip)) / IP(src=ip, dst=sip)


class Conn:
    """A connection the attacker holds from a forged address."""

    def __init__(self, ip, sport, dport=7, win=65535, opts=None):
        self.ip, self.sport, self.dport = ip, sport, dport
        announce(ip)
        time.sleep(0.02)
        self.snd = rnd.randrange(1 << 31)
        drain()
        send(forged(ip) / TCP(sport=sport, dport=dport, flags="S", seq=self.snd, window=win,
                              options=opts if opts is not None else [("MSS", 1460)]))
        sa = wait_for(lambda p: TCP in p and p[IP].dst == ip and p[TCP].dport == sport
                      and p[TCP].flags == "SA")
        if sa is None:
            print(f"attack: no SYN-ACK for {ip}:{sport}", flush=True)
            sys.exit(2)
        self.snd += 1
        self.rcv = sa[TCP].seq + 1
        self.wnd = sa[TCP].window
        self.seg(0, "A", win)

    def seg(self, off, flags, win=65535, data=b""):
        sock.send(raw_tcp(self.ip, self.sport, self.dport, self.snd + off,
                          self.rcv if "A" in flags else 0, flags, win, data))


def spoof(i):
    return "192.0.2.%d" % (10 + i % 240)


def attack_ooo(conns=8):
    # 128 one-byte segments per connection behind a hole never filled.
    cs = [Conn(spoof(40 + k), 40000 + k) for k in range(conns)]
    for i in range(128):
        for c in cs:
            c.seg(1 + i, "A", data=b"x")
    print(f"attack: {conns} connections x 128 out-of-order one-byte segments", flush=True)


def attack_zerowin(n=3000):
    # The echo service queues what it gets for a peer whose window stays shut.
    c = Conn(spoof(60), 41000, win=0)
    for i in range(n):
        c.seg(i, "PA", win=0, data=b"y")
    print(f"attack: {n} one-byte segments in order to a zero-window echo", flush=True)


def attack_synflood(n=2000):
    for i in range(n):
        sock.send(raw_tcp(spoof(i), 1024 + i, 7, rnd.randrange(1 << 32), 0, "S", 65535,
                          opts=b"\x02\x04\x05\xb4"))
    print(f"attack: {n} SYNs from forged on-link sources", flush=True)


def attack_neigh(seconds=3, sources=200):
    # Pings from addresses that never answer ARP, while the kernel pings too.
    end = time.time() + seconds
    k = 0
    while time.time() < end:
        for i in range(sources):
            sock.send(raw_icmp_echo(spoof(i), 7, k, b"n" * 16))
        k += 1
        time.sleep(0.2)
    print(f"attack: {k} rounds of pings from {sources} unresolvable sources", flush=True)


def provoke(src, sport):
    e = Ether(dst=smac, src=mac_of("192.0.2.77"))
    send(e / IP(src=src, dst=sip) / ICMP(id=9, seq=9) / Raw(b"martian"))
    send(e / IP(src=src, dst=sip) / UDP(sport=sport, dport=7) / Raw(b"echo me"))
    send(e / IP(src=src, dst=sip) / TCP(sport=sport, dport=7, flags="S", seq=1000))
    send(e / IP(src=src, dst=sip) / TCP(sport=sport, dport=9, flags="A", seq=1000, ack=5000))


def attack_martian():
    bad = ["192.0.2.255", "192.0.2.0", "255.255.255.255", "224.0.0.5", "240.0.0.1",
           "127.0.0.1", "0.1.2.3", sip]
    drain()
    for i, src in enumerate(bad):
        provoke(src, 5000 + i)
    good = "192.0.2.77"
    announce(good)
    # a unicast datagram in a link-layer broadcast, and UDP to the subnet broadcast
    send(Ether(dst=BCAST, src=mac_of(good)) / IP(src=good, dst=sip) / ICMP(id=3, seq=3))
    send(Ether(dst=BCAST, src=mac_of(good)) / IP(src=good, dst="192.0.2.255")
         / UDP(sport=5555, dport=7) / Raw(b"fraggle"))
    answers = [p.summary() for p in frames(1.5) if IP in p]
    print(f"attack: {4 * len(bad) + 2} frames from impossible sources or to broadcasts; "
          f"answers: {answers}", flush=True)
    return 0 if not answers else 1


def attack_land(n=70):
    drain()
    for i in range(n):
        send(Ether(dst=smac, src=mac_of("192.0.2.78")) / IP(src=sip, dst=sip)
             / TCP(sport=10000 + i, dport=7, flags="S", seq=0x5000 + 77 * i))
    answers = [p.summary() for p in frames(1.0) if TCP in p]
    print(f"attack: {n} SYNs from the stack's own address; answers: {answers}", flush=True)
    return 0 if not answers else 1


def attack_challenge():
    # The connection an off-path attacker would probe: the kernel's own.
    y = socket.create_connection((sip, 7), timeout=10)
    y.settimeout(10)
    drain()
    y.sendall(b"hello")
    if y.recv(5) != b"hello":
        return 3
    yport = y.getsockname()[1]
    acks = [p[TCP].ack for p in frames(0.3) if TCP in p and p[TCP].dport == yport]
    y.sendall(b"again")
    ack_y = None
    for p in frames(1.0):
        if TCP in p and p[TCP].dport == yport:
            ack_y = p[TCP].ack
            if p[TCP].payload and bytes(p[TCP].payload) == b"again":
                break
    y.recv(5)
    if ack_y is None:
        print(f"attack: never saw the stack ACK the kernel's connection ({acks})", flush=True)
        return 3
    # The attacker's own connection, flooded with in-window RSTs...
    x = Conn(spoof(66), 42000)
    drain()
    t0 = time.time()
    for i in range(300):
        x.seg(10, "R", win=0)
    # ...and in the same second a forged in-window RST for the kernel's.
    send(Ether(dst=smac, src=mac_of("192.0.2.1")) / IP(src="192.0.2.1", dst=sip)
         / TCP(sport=yport, dport=7, flags="R", seq=(ack_y + 100) & 0xffffffff))
    flood_s = time.time() - t0
    to_x = to_y = 0
    for p in frames(0.5):
        if TCP in p and p[IP].dst == x.ip:
            to_x += 1
        if TCP in p and p[TCP].dport == yport and p[TCP].flags == "A" and p[TCP].ack == ack_y:
            to_y += 1
    y.sendall(b"still")
    alive = y.recv(5) == b"still"
    y.close()
    print(f"attack: 300 RSTs in {flood_s:.2f} s drew {to_x} challenge ACKs on the attacker's "
          f"connection; the probed one got {to_y}; it is {'alive' if alive else 'DEAD'}",
          flush=True)
    limit = 2 + int(flood_s / 0.5)
    return 0 if to_y >= 1 and to_x <= limit and alive else 1


def attack_window():
    # No window scaling: the window field, and so the window, is at most 65535.
    c = Conn(spoof(70), 43000, opts=[("MSS", 1460), ("SAckOK", b"")])
    drain()
    c.seg(65535 + 100, "A", data=b"beyond")
    sacked = []
    for p in frames(0.6):
        if TCP in p and p[IP].dst == c.ip:
            for o in p[TCP].options:
                if o[0] == "SAck":
                    sacked.append(o[1])
    c.seg(70000, "R")
    far = [p.summary() for p in frames(0.6) if TCP in p and p[IP].dst == c.ip]
    c.seg(30000, "R")
    near = [p.summary() for p in frames(0.6) if TCP in p and p[IP].dst == c.ip]
    print(f"attack: window {c.wnd}; data past 65535 SACKed as {sacked}; RST past it answered "
          f"{far}; RST inside it answered {near}", flush=True)
    return 0 if c.wnd <= 65535 and not sacked and not far and near else 1


def echo_check(nbytes=65536):
    """A new connection from the kernel moves nbytes through the echo and back."""
    data = os.urandom(nbytes)
    c = socket.create_connection((sip, 7), timeout=20)
    c.settimeout(20)
    c.sendall(data)
    got = b""
    while len(got) < nbytes:
        b = c.recv(65536)
        if not b:
            break
        got += b
    c.close()
    return hashlib.sha256(got).digest() == hashlib.sha256(data).digest()


def recovered():
    t0 = time.time()
    ping = subprocess.run(["ping", "-c", "1", "-W", "1", sip], capture_output=True).returncode == 0
    t1 = time.time()
    echo = ping and echo_check()
    print(f"check: ping {'answered' if ping else 'NOT answered'} in {t1 - t0:.2f} s, "
          f"64 KiB echo {'ok' if echo else 'FAILED'}", flush=True)
    return ping and echo


rc = {"ooo": attack_ooo, "zerowin": attack_zerowin, "synflood": attack_synflood,
      "neigh": attack_neigh, "martian": attack_martian, "land": attack_land,
      "challenge": attack_challenge, "window": attack_window}[cls]()
if not rc and check and not recovered():
    rc = 1
sys.exit(rc or 0)
