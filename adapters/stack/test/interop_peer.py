#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Kernel-side peer of the stack's interop tests.

  interop_peer.py client HOST PORT NBYTES   connect, send NBYTES of random data,
                                            read the echo, compare SHA-256, close first
  interop_peer.py server HOST PORT NBYTES   listen, accept one connection, send NBYTES,
                                            read the echo, compare, wait for the peer's close
  interop_peer.py sink HOST PORT NBYTES     connect, read NBYTES (chargen), close
  interop_peer.py slow HOST PORT NBYTES     listen, accept, sleep 2 s without reading (the
                                            window closes), then read NBYTES of the
                                            pattern byte[i] = i % 251 until EOF, compare

Exit status 0 when every byte came back unchanged.  Bounded by a timeout.
"""
import hashlib
import random
import socket
import sys
import threading
import time

TIMEOUT = 120


def pump(sock, nbytes, out):
    rnd = random.Random(nbytes)
    h = hashlib.sha256()
    left = nbytes
    while left:
        block = rnd.randbytes(min(left, 65536))
        h.update(block)
        sock.sendall(block)
        left -= len(block)
    out['sent'] = h.hexdigest()


def drain(sock, nbytes):
    h = hashlib.sha256()
    got = 0
    while got < nbytes:
        b = sock.recv(min(262144, nbytes - got))
        if not b:
            break
        h.update(b)
        got += len(b)
    return got, h.hexdigest()


def exchange(sock, nbytes):
    out = {}
    t = threading.Thread(target=pump, args=(sock, nbytes, out))
    t0 = time.time()
    t.start()
    got, digest = drain(sock, nbytes)
    t.join()
    dt = time.time() - t0
    ok = got == nbytes and digest == out.get('sent')
    print(f"peer: {nbytes} bytes each way in {dt:.2f} s ({2 * nbytes / dt / 1e6:.1f} MB/s), "
          f"{'match' if ok else f'MISMATCH got {got}'}", flush=True)
    return ok


def main():
    mode, host, port, nbytes = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    if mode in ('client', 'sink'):
        sock = socket.create_connection((host, port), timeout=TIMEOUT)
        sock.settimeout(TIMEOUT)
        if mode == 'sink':
            got, _ = drain(sock, nbytes)
            sock.close()
            print(f"peer: sink got {got}", flush=True)
            sys.exit(0 if got == nbytes else 1)
        ok = exchange(sock, nbytes)
        sock.shutdown(socket.SHUT_WR)          # we close first
        rest = sock.recv(1)                    # the stack answers with its FIN
        sock.close()
        sys.exit(0 if ok and rest == b'' else 1)
    if mode == 'slow':
        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        srv.bind((host, port))
        srv.listen(1)
        srv.settimeout(TIMEOUT)
        sock, _ = srv.accept()
        sock.settimeout(TIMEOUT)
        time.sleep(2)
        got = bytearray()
        while True:
            b = sock.recv(262144)
            if not b:
                break
            got += b
        sock.close()
        want = (bytes(range(251)) * (nbytes // 251 + 1))[:nbytes]
        ok = bytes(got) == want
        print(f"peer: slow reader got {len(got)} bytes, {'match' if ok else 'MISMATCH'}", flush=True)
        sys.exit(0 if ok else 1)
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((host, port))
    srv.listen(1)
    srv.settimeout(TIMEOUT)
    print("peer: listening", flush=True)
    sock, _ = srv.accept()
    sock.settimeout(TIMEOUT)
    ok = exchange(sock, nbytes)
    rest = sock.recv(1)                        # the stack closes first
    sock.close()
    sys.exit(0 if ok and rest == b'' else 1)


if __name__ == '__main__':
    main()
