#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The packet-ring benchmarks, from a fresh clone: install what is missing,
# make an optimised build (build/bench), then run, interleaved round by
# round on a veth pair between two namespaces each program makes:
#   - transmit: TX ring (one kick per 32 frames) vs send() vs sendmmsg(32),
#     at 64, 512 and 1514-byte frames: frames per second, CPU per frame;
#   - receive: a TX ring flat out into the RX ring (V2, V3) vs recvmmsg(64)
#     with the default and with a ring-sized socket buffer: loss, receiver
#     CPU per frame received;
#   - latency: 64-byte ping-pong, V2 ring vs recvfrom(), and V3 with block
#     retire timeouts of 1 ms, 4 ms and the kernel's default;
#   - the zbuf stack over packet rings vs over TAP, bulk TCP with the kernel
#     both ways: MB per CPU-second.
# Prints medians (and the per-round ratios' median and range) as markdown,
# and draws docs/benchmarks-packet.png with gnuplot.  Needs root.
# Results and how to read them: docs/benchmarks.md (section Packet rings).
# Usage: scripts/bench-packet.sh [rounds (default 5)] [frames per run (default 1000000)]
source "$(dirname "$0")/bench-lib.sh" build-bench-packet.log
rounds=${1:-5}
frames=${2:-1000000}
stack_bytes=$((128 << 20))

bench_build bench_packet bench_stack_packet

bp=$root/build/bench/adapters/packet/bench/bench_packet
bs=$root/build/bench/adapters/stack/drivers/packet/bench/bench_stack_packet
rows=$root/build/bench-packet-rows.txt # every run's row, kept for a closer look
: >"$rows"
echo "load average before: $(bench_load)" >&2
for r in $(seq "$rounds"); do
  echo "==> round $r/$rounds" >&2
  for size in 64 512 1514; do
    for mode in ring send sendmmsg; do
      "$bp" tx --mode "$mode" --size "$size" --frames "$frames" >>"$rows"
    done
  done
  for mode in ring2 ring3 recvmmsg recvmmsg-big; do
    "$bp" rx --mode "$mode" --frames "$frames" >>"$rows"
  done
  for mode in recvfrom ring2; do
    "$bp" lat --mode "$mode" --rounds 5000 >>"$rows"
  done
  for tov in 1 4 0; do
    "$bp" lat --mode ring3 --tov "$tov" --rounds 40 >>"$rows"
  done
  for link in tap packet; do
    for dir in send recv; do
      "$bs" --link "$link" --dir "$dir" --bytes "$stack_bytes" | sed 's/^/| stack /' >>"$rows"
    done
  done
done
load=$(bench_load)

python3 - "$rows" "$rounds" "$frames" "$load" "$root/build/bench-packet-plot.dat" <<'PY'
import statistics, sys
from collections import defaultdict
rows, rounds, frames, load, plot = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
runs = defaultdict(list)  # key -> list of field lists, in round order
for line in open(rows):
    f = [x.strip() for x in line.strip().strip('|').split('|')]
    if len(f) < 3:
        continue
    if f[0] == 'stack':
        key = ('stack', f[1])
    elif f[0] == 'tx':
        key = ('tx', f[1], f[2])
    elif f[0] == 'lat':
        key = ('lat', f[1], f[2])
    else:
        key = (f[0], f[1])
    runs[key].append(f)

def col(key, i):
    return [float(f[i]) for f in runs.get(key, [])]

def med(key, i):
    v = col(key, i)
    return statistics.median(v) if v else float('nan')

def ratio(a, b, i, invert=False):
    x, y = col(a, i), col(b, i)
    if not x or len(x) != len(y):
        return "-"
    r = sorted((q / p if invert else p / q) for p, q in zip(x, y) if p and q)
    return f"{statistics.median(r):.2f} ({r[0]:.2f}-{r[-1]:.2f})" if r else "-"

print(f"Veth pair between two namespaces, {rounds} interleaved rounds, medians; ratios: median "
      f"(range) of the per-round ratios.  Load average at the end: {load}.\n")
print(f"**Transmit**, {frames} frames per run (CPU = the sender's user + system time per frame):\n")
print("| frame | TX ring fps | send() fps | sendmmsg(32) fps | ring / send() fps | ring / sendmmsg fps | "
      "ring CPU/frame (ns) | send() CPU/frame | sendmmsg CPU/frame | ring / send() CPU |")
print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
dat = open(plot, 'w')
for size in ('64', '512', '1514'):
    k = {m: ('tx', m, size) for m in ('ring', 'send', 'sendmmsg')}
    print(f"| {size} B | {med(k['ring'], 3):,.0f} | {med(k['send'], 3):,.0f} | {med(k['sendmmsg'], 3):,.0f} | "
          f"{ratio(k['ring'], k['send'], 3)} | {ratio(k['ring'], k['sendmmsg'], 3)} | "
          f"{med(k['ring'], 4):.0f} | {med(k['send'], 4):.0f} | {med(k['sendmmsg'], 4):.0f} | "
          f"{ratio(k['ring'], k['send'], 4)} |")
    dat.write(f"{size} {med(k['ring'], 3)/1e6:.3f} {med(k['send'], 3)/1e6:.3f} {med(k['sendmmsg'], 3)/1e6:.3f}\n")
dat.close()
print(f"\n**Receive**, a TX ring sends {frames} 64-byte frames flat out from the other namespace:\n")
print("| receiver | received | lost | receiver CPU/frame (ns) | x recvmmsg CPU/frame | offered rate (fps) |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
names = {'ring2': 'RX ring V2', 'ring3': 'RX ring V3 (1 MiB blocks, 1 ms)', 'recvmmsg': 'recvmmsg(64), default buffer',
         'recvmmsg-big': 'recvmmsg(64), 8 MiB buffer'}
for m in ('ring2', 'ring3', 'recvmmsg', 'recvmmsg-big'):
    k = ('rx', m)
    print(f"| {names[m]} | {med(k, 3):,.0f} | {med(k, 4):.2f} % | {med(k, 5):.0f} | "
          f"{ratio(k, ('rx', 'recvmmsg'), 5)} | {med(k, 6):,.0f} |")
print("\n**Latency**, 64-byte ping-pong between the namespaces (microseconds):\n")
print("| method | p50 | p99 | x recvfrom p50 |")
print("| --- | ---: | ---: | ---: |")
for m, tov, label in (('recvfrom', '0', 'recvfrom()'), ('ring2', '0', 'V2 ring'),
                      ('ring3', '1', 'V3 ring, 1 ms timeout'), ('ring3', '4', 'V3 ring, 4 ms timeout'),
                      ('ring3', '0', "V3 ring, the kernel's default timeout")):
    k = ('lat', m, tov)
    print(f"| {label} | {med(k, 3):.1f} | {med(k, 4):.1f} | {ratio(k, ('lat', 'recvfrom', '0'), 3)} |")
print(f"\n**The zbuf stack**, bulk TCP with the kernel, {128} MiB per run:\n")
print("| link, direction | MB/s (wall) | MB per CPU-second | packet / TAP (CPU) | bytes copied per payload byte |")
print("| --- | ---: | ---: | ---: | ---: |")
for link in ('tap', 'packet'):
    for d in ('send', 'recv'):
        k = ('stack', f"{link} {d}")
        print(f"| {link}, stack {d}s | {med(k, 2):.0f} | {med(k, 3):.0f} | "
              f"{ratio(k, ('stack', 'tap ' + d), 3) if link == 'packet' else ''} | {med(k, 4):.3f} |")
PY

if command -v gnuplot >/dev/null; then
  gnuplot <<EOF
set terminal pngcairo size 800,480 font ",10"
set output "$root/docs/benchmarks-packet.png"
set title "Transmit on a veth pair: frames per second (median of $rounds rounds)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set ylabel "Mpps"
set xlabel "frame size (bytes)"
set yrange [0:*]
set key top right
plot "$root/build/bench-packet-plot.dat" using 2:xtic(1) title "TX ring (kick per 32)", \
     "" using 3 title "send()", "" using 4 title "sendmmsg(32)"
EOF
  echo "plot: docs/benchmarks-packet.png" >&2
fi
