#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Try the bundled TCP/IP stack against the Linux kernel, from a fresh clone.
#
# Needs root (it makes a network namespace with a TAP interface; nothing
# leaves this machine): the kernel side is 192.0.2.1/24, zbuf-stack-demo
# answers on 192.0.2.2.  The kernel then pings the stack, echoes a message
# through its TCP echo service (port 7), sends a MiB to discard (9), reads
# from chargen (19) and talks to UDP echo; finally the demo is stopped and
# prints its statistics, among them the bytes the library copied per
# payload byte.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  echo "stack-demo: needs root for the network namespace and the TAP device" >&2
  exit 1
fi
scripts/deps.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build/release -j"$(nproc)" --target zbuf-stack-demo >/dev/null
demo=$(find build/release -name zbuf-stack-demo -type f -perm -u+x | head -n1)

ns=zbuf-demo-$$
cleanup() {
  [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null || true
  ip netns del "$ns" 2>/dev/null || true
}
trap cleanup EXIT
ip netns add "$ns"
in_ns() { ip netns exec "$ns" "$@"; }
in_ns ip link set lo up
in_ns ip tuntap add dev zb0 mode tap
in_ns ip addr add 192.0.2.1/24 dev zb0
in_ns ip link set zb0 up
ip netns exec "$ns" "$demo" --tap zb0 --addr 192.0.2.2/24 &  # exec: $! is the demo
pid=$!
sleep 0.5

echo "== kernel pings the stack"
in_ns ping -c 3 -i 0.2 192.0.2.2
echo "== kernel talks to the stack's services"
in_ns python3 - <<'PY'
import socket
def tcp(port):
    s = socket.create_connection(("192.0.2.2", port), timeout=5)
    return s
s = tcp(7)
s.sendall(b"hello, zero-copy stack\n")
print("echo    (tcp/7): ", s.recv(100).decode().strip())
s.close()
s = tcp(9)
s.sendall(bytes(1 << 20))
s.close()
print("discard (tcp/9):  sent 1 MiB")
s = tcp(19)
data = b""
while data.count(b"\n") < 3:
    data += s.recv(4096)
s.close()
print("chargen (tcp/19):", data.split(b"\n")[0].decode())
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.settimeout(5)
u.sendto(b"datagram", ("192.0.2.2", 7))
print("echo    (udp/7): ", u.recvfrom(100)[0].decode())
PY
echo "== stopping the demo"
kill -TERM "$pid"
wait "$pid" || true
pid=
