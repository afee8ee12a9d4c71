#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Tables of scripts/bench-sock.sh: reads results.csv, prints markdown
tables (medians; gains as the median over repetitions of the ratio measured
within one repetition, so that drift in machine load cancels) and writes the
data files of the plot.

usage: sock_tables.py results.csv outdir
"""
import csv
import math
import statistics
import sys

rows = list(csv.DictReader(open(sys.argv[1])))
out = sys.argv[2]


def key(r):
    """A row of a table: the message size, and the socket buffer if not 0
    (file rows: the file size, the receiver's read size and the congestion
    control)."""
    if r['kind'] == 'file':
        return r['size'] + ':' + r['sockbuf'] + ':' + (r.get('cc') or 'system')
    return r['size'] if r['sockbuf'] in ('0', '') or r['kind'] == 'gather' \
        else r['size'] + ':' + r['sockbuf']


def vals(kind, size, mode, field):
    return {r['run']: float(r[field]) for r in rows
            if r['kind'] == kind and key(r) == size and r['mode'] == mode}


def med(kind, size, mode, field='MBps'):
    v = list(vals(kind, size, mode, field).values())
    return statistics.median(v) if v else float('nan')


def ratios(kind, size, mode, base, field='MBps', invert=False):
    """mode / base (base / mode with invert) per repetition."""
    a, b = vals(kind, size, mode, field), vals(kind, size, base, field)
    return sorted((b[k] / a[k] if invert else a[k] / b[k])
                  for k in a if k in b and a[k] > 0 and b[k] > 0)


def ratio(kind, size, mode, base, field='MBps', invert=False):
    """Median over repetitions of the paired ratio."""
    r = ratios(kind, size, mode, base, field, invert)
    return statistics.median(r) if r else float('nan')


def spread(kind, size, mode, base):
    """Interquartile range of the paired ratio, as gains: the noise."""
    r = ratios(kind, size, mode, base)
    if len(r) < 4:
        return "n/a"
    q = statistics.quantiles(r, n=4)
    return f"{(q[0] - 1) * 100:+.0f} .. {(q[2] - 1) * 100:+.0f} %"


def sizes(kind):
    seen = []
    for r in rows:
        if r['kind'] == kind and key(r) not in seen:
            seen.append(key(r))
    return seen


def sockbuf(kind, size):
    return next(r['sockbuf'] for r in rows if r['kind'] == kind and key(r) == size)


def msg(size):
    return size.split(':')[0]


def human(n):
    n = int(n)
    if n == 0:
        return "default"
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20}M"
    return f"{n >> 10}K" if n % 1024 == 0 else str(n)


def pct(x):
    return "n/a" if math.isnan(x) else f"{(x - 1) * 100:+.1f} %"


def nsk(kind, s, m):
    v = [float(r['cpu']) / (float(r['bytes']) / 1024) * 1e9 for r in rows
         if r['kind'] == kind and key(r) == s and r['mode'] == m and float(r['bytes']) > 0]
    return statistics.median(v) if v else float('nan')


L = []
plot_send, plot_recv = [], []


def table(title, cols):
    """A table's title, header row and alignment row: the first column
    left-aligned, the figures right-aligned."""
    L.append(title)
    L.append("| " + " | ".join(cols) + " |")
    L.append("| --- |" + " ---: |" * (len(cols) - 1))


if sizes('send'):
    table("### Send side (receiver discards): MB/s, medians\n",
          ["message / socket buffer", "copy", "zbuf", "zerocopy", "zc-always", "zbuf gain",
           "zerocopy gain", "zc-always gain", "zbuf gain IQR"])
    for s in sizes('send'):
        m = [med('send', s, k) for k in ('copy', 'zbuf', 'zerocopy', 'zc-always')]
        g = [ratio('send', s, k, 'copy') for k in ('zbuf', 'zerocopy', 'zc-always')]
        L.append(f"| {human(msg(s))} / {human(sockbuf('send', s))} | "
                 + " | ".join(f"{x:.0f}" for x in m) + " | "
                 + " | ".join(pct(x) for x in g) + f" | {spread('send', s, 'zbuf', 'copy')} |")
        if sockbuf('send', s) != '0':
            plot_send.append([msg(s)] + m)
if sizes('recv'):
    table("\n### Receive side (sender uses sendfile): MB/s, medians\n",
          ["message / socket buffer", "copy", "zbuf", "zbuf gain", "zbuf gain IQR"])
    for s in sizes('recv'):
        c, z = med('recv', s, 'copy'), med('recv', s, 'zbuf')
        L.append(f"| {human(msg(s))} / {human(sockbuf('recv', s))} | {c:.0f} | {z:.0f} | "
                 f"{pct(ratio('recv', s, 'zbuf', 'copy'))} | {spread('recv', s, 'zbuf', 'copy')} |")
        if sockbuf('recv', s) != '0':
            plot_recv.append([msg(s), c, z])
    table("\n### CPU time of the side under test: ns per KiB moved, medians\n",
          ["message / socket buffer", "send copy", "send zbuf", "send zerocopy",
           "send zc-always", "recv copy", "recv zbuf"])
    for s in sizes('send'):
        v = [nsk('send', s, m) for m in ('copy', 'zbuf', 'zerocopy', 'zc-always')] + \
            [nsk('recv', s, m) for m in ('copy', 'zbuf')]
        L.append(f"| {human(msg(s))} / {human(sockbuf('send', s))} | "
                 + " | ".join(f"{x:.0f}" for x in v) + " |")
if sizes('gather'):
    table("\n### A message of 4 application buffers (receiver discards): MB/s and "
          "sender CPU ns per KiB, medians\n\n"
          "CPU gain: memcpy's CPU per byte over gather's, median (and range) of the "
          "per-run ratios.\n",
          ["message", "memcpy + write", "gather (zbuf)", "gather / memcpy",
           "CPU memcpy + write", "CPU gather", "CPU gain"])

    def per_kib(s, m):
        return {r['run']: float(r['cpu']) / float(r['bytes']) for r in rows
                if r['kind'] == 'gather' and key(r) == s and r['mode'] == m
                and float(r['bytes']) > 0}

    for s in sizes('gather'):
        a, b = med('gather', s, 'memcpy4'), med('gather', s, 'gather4')
        mc, ga = per_kib(s, 'memcpy4'), per_kib(s, 'gather4')
        q = sorted(mc[k] / ga[k] for k in mc if k in ga and ga[k] > 0)
        gain = f"{statistics.median(q):.2f}x ({q[0]:.2f}-{q[-1]:.2f})" if q else "n/a"
        L.append(f"| {human(s)} | {a:.0f} | {b:.0f} | "
                 f"{ratio('gather', s, 'gather4', 'memcpy4'):.2f}x | "
                 f"{nsk('gather', s, 'memcpy4'):.0f} | {nsk('gather', s, 'gather4'):.0f} | {gain} |")
if sizes('file'):
    table("\n### File to socket (receiver discards): ms, medians\n\n"
          "Elapsed time of the sender (median); speed-up: read+send over the zbuf "
          "mode, median (and range) of the per-run ratios, of the elapsed time and "
          "of the sender's CPU time (the sender is the bottleneck: on loopback it "
          "also runs the receiving side's protocol work); CPU: user+system ms of "
          "sender + receiver (median).\n",
          ["file", "TCP", "receiver reads", "read + send", "zbuf (default: sendfile)",
           "zbuf, mapped", "speed-up default", "speed-up default, sender CPU",
           "speed-up mapped", "CPU read+send", "CPU default", "CPU mapped"])

    def both_cpu(k, m):
        v = [float(r['cpu']) + float(r['peer_cpu'] or 'nan') for r in rows
             if r['kind'] == 'file' and key(r) == k and r['mode'] == m]
        return statistics.median(v) * 1000 if v else float('nan')

    def span(k, m, field='seconds'):
        q = ratios('file', k, m, 'readsend', field, invert=True)
        if not q:
            return "n/a"
        return f"{statistics.median(q):.2f}x ({q[0]:.2f}-{q[-1]:.2f})"

    def order(x):
        mb, rs, cc = x.split(':')
        return (int(mb), cc, int(rs))

    for k in sorted(sizes('file'), key=order):
        mb, rs, cc = k.split(':')
        a, b, c = (med('file', k, m, 'seconds') * 1000 for m in ('readsend', 'zfile', 'zfile-mmap'))
        L.append(f"| {mb} MB | {cc} | {human(int(rs))} | {a:.1f} | {b:.1f} | {c:.1f} | "
                 f"{span(k, 'zfile')} | {span(k, 'zfile', 'cpu')} | {span(k, 'zfile-mmap')} | "
                 f"{both_cpu(k, 'readsend'):.0f} | {both_cpu(k, 'zfile'):.0f} | "
                 f"{both_cpu(k, 'zfile-mmap'):.0f} |")
text = "\n".join(L) + "\n"
open(out + "/tables.md", "w").write(text)
print(text)
for name, data in (("plot-send.dat", plot_send), ("plot-recv.dat", plot_recv)):
    with open(out + "/" + name, "w") as f:
        for r in data:
            f.write(" ".join(str(x) for x in r) + "\n")
