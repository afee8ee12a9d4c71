#!/usr/bin/env python3
"""Tables of scripts/bench-uring.sh: reads results.txt (key=value lines),
prints the markdown tables of docs/benchmarks.md (section io_uring):
medians over repetitions; ratios as the median over repetitions of the
ratio measured within one repetition (drift in machine load cancels), with
the interquartile range of that ratio (the noise); the targets of the
issue with the numbers that decide them; and the zero-copy threshold
estimated from the measured costs.

usage: uring_tables.py results.txt
"""
import statistics
import sys

rows = []
machine = {}
for line in open(sys.argv[1]):
    kv = dict(f.split('=', 1) for f in line.split() if '=' in f)
    if line.startswith('machine'):
        machine = kv
        continue
    for k in ('size', 'bytes', 'msgs'):
        kv[k] = int(kv[k])
    for k in ('seconds', 'cpu'):
        kv[k] = float(kv[k])
    rows.append(kv)


def metric(r, what):
    if what == 'msgs':   # messages per second
        return r['msgs'] / r['seconds'] if r['seconds'] > 0 else float('nan')
    if what == 'mbs':    # MB per second
        return r['bytes'] / r['seconds'] / 1e6 if r['seconds'] > 0 else float('nan')
    if what == 'cpumb':  # MB per CPU-second of the side under test
        return r['bytes'] / r['cpu'] / 1e6 if r['cpu'] > 0 else float('nan')
    if what == 'nsmsg':  # CPU nanoseconds per message
        return r['cpu'] * 1e9 / r['msgs'] if r['msgs'] > 0 else float('nan')
    raise KeyError(what)


def vals(kind, size, mode, what):
    return {r['run']: metric(r, what) for r in rows
            if r['kind'] == kind and r['size'] == size and r['mode'] == mode}


def med(kind, size, mode, what):
    v = [x for x in vals(kind, size, mode, what).values() if x == x]
    return statistics.median(v) if v else float('nan')


def ratios(kind, size, mode, base, what):
    a, b = vals(kind, size, mode, what), vals(kind, size, base, what)
    return sorted(a[k] / b[k] for k in a if k in b and a[k] > 0 and b[k] > 0)


def ratio(kind, size, mode, base, what):
    r = ratios(kind, size, mode, base, what)
    return statistics.median(r) if r else float('nan')


def iqr(kind, size, mode, base, what):
    r = ratios(kind, size, mode, base, what)
    if len(r) < 4:
        return f"{min(r):.2f} .. {max(r):.2f}" if r else "n/a"
    q = statistics.quantiles(r, n=4)
    return f"{q[0]:.2f} .. {q[2]:.2f}"


def sizes(kind):
    return sorted({r['size'] for r in rows if r['kind'] == kind})


def modes(kind):
    seen = []
    for r in rows:
        if r['kind'] == kind and r['mode'] not in seen:
            seen.append(r['mode'])
    return seen


def human(n):
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20} MiB"
    if n >= 1024 and n % 1024 == 0:
        return f"{n >> 10} KiB"
    return f"{n} B"


def num(x, digits=0):
    if x != x:
        return "-"
    if x >= 1e6:
        return f"{x / 1e6:.2f} M"
    if x >= 1e4:
        return f"{x / 1e3:.0f} k"
    return f"{x:.{digits}f}"


runs = len({r['run'] for r in rows if r['kind'] != 'memcpy'})
print(f"Machine: {machine.get('cpus', '?')} CPUs, kernel {machine.get('kernel', '?')}, "
      f"load average {machine.get('load', '?')} at the start; {runs} repetitions.\n")

targets = []
ADAPTIVE = ['epoll', 'msgzc', 'uring', 'uring-zc', 'uring-zc-fixed']

if sizes('send'):
    ms = modes('send')
    print("#### Send side, TCP (receiver discards): messages per second, medians\n")
    print("| message | " + " | ".join(ms) + " | uring / epoll | IQR |")
    print("| --- |" + " ---: |" * (len(ms) + 2))
    for s in sizes('send'):
        cells = [num(med('send', s, m, 'msgs')) for m in ms]
        r = ratio('send', s, 'uring', 'epoll', 'msgs')
        print(f"| {human(s)} | " + " | ".join(cells) +
              f" | {r:.2f}x | {iqr('send', s, 'uring', 'epoll', 'msgs')} |")
        if s <= 1024 and 'uring' in ms:
            targets.append((f"io_uring message rate >= 1.3x the epoll path, {human(s)}",
                            r, r >= 1.3))
    print()
    print("#### Send side: MB per CPU-second of the sender, medians, and ratio to `copy`\n")
    print("| message | " + " | ".join(ms) + " | lowest adaptive mode / copy |")
    print("| --- |" + " ---: |" * (len(ms) + 1))
    for s in sizes('send'):
        cells = []
        worst = None
        for m in ms:
            v = med('send', s, m, 'cpumb')
            rr = ratio('send', s, m, 'copy', 'cpumb')
            cells.append(f"{num(v)}" + ("" if m == 'copy' else f" ({rr:.2f}x)"))
            if m in ADAPTIVE and rr == rr and (worst is None or rr < worst[1]):
                worst = (m, rr)
        if worst:
            print(f"| {human(s)} | " + " | ".join(cells) + f" | {worst[0]} {worst[1]:.2f}x |")
            targets.append((f"no adaptive mode below 0.95x copy (MB per CPU-s), {human(s)}",
                            worst[1], worst[1] >= 0.95))
    print()

for kind, title, unit in (('udp', 'Receive side, UDP datagrams (sender floods with sendmmsg)', 'datagram'),
                          ('tcp', 'Receive side, TCP (sender uses sendfile)', 'pool buffer')):
    if not sizes(kind):
        continue
    print(f"#### {title}: medians\n")
    print(f"| {unit} | epoll msgs/s | uring msgs/s | epoll MB per CPU-s | uring MB per CPU-s "
          "| uring / epoll, MB per CPU-s | IQR |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for s in sizes(kind):
        r = ratio(kind, s, 'uring', 'epoll', 'cpumb')
        print(f"| {human(s)} | {num(med(kind, s, 'epoll', 'msgs'))} | "
              f"{num(med(kind, s, 'uring', 'msgs'))} | {num(med(kind, s, 'epoll', 'cpumb'))} | "
              f"{num(med(kind, s, 'uring', 'cpumb'))} | {r:.2f}x | "
              f"{iqr(kind, s, 'uring', 'epoll', 'cpumb')} |")
        if kind == 'udp' and r == r:
            targets.append((f"provided-buffer receive >= 1.2x recvmmsg (MB per CPU-s), "
                            f"UDP {human(s)}", r, r >= 1.2))
    print()

# The zero-copy threshold: CPU per request that zero copy adds on loopback
# (pinning and notification; the copy happens in both modes there), against
# the copy it saves on a NIC (memcpy per byte).
mc = [r for r in rows if r['kind'] == 'memcpy']
if mc and sizes('send'):
    c = statistics.median(float(r['ns_per_byte']) for r in mc)
    print("#### Zero-copy threshold, from these measurements\n")
    print(f"memcpy: {c:.4f} ns per byte (median over {len(mc)} sizes, cache-cold source).\n")
    print("| message | plain ns/msg | zc-always ns/msg | zc-fixed-always ns/msg | "
          "zc extra | zc-fixed extra | copy saved (memcpy) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    pts, ptsf = [], []
    for s in sizes('send'):
        if s < 16384:
            continue
        p = med('send', s, 'uring', 'nsmsg')
        z = med('send', s, 'uring-zc-always', 'nsmsg')
        f = med('send', s, 'uring-zc-fixed-always', 'nsmsg')
        print(f"| {human(s)} | {num(p)} | {num(z)} | {num(f)} | {num(z - p)} | {num(f - p)} | "
              f"{num(c * s)} |")
        if z == z and p == p:
            pts.append((s, z - p))
        if f == f and p == p:
            ptsf.append((s, f - p))

    def fit(points):
        """Least squares extra = a + b * size."""
        if len(points) < 2:
            return float('nan'), float('nan')
        n = len(points)
        mx = sum(x for x, _ in points) / n
        my = sum(y for _, y in points) / n
        sxx = sum((x - mx) ** 2 for x, _ in points)
        b = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else float('nan')
        return my - b * mx, b

    for name, points in (("SEND_ZC", pts), ("SEND_ZC on registered buffers", ptsf)):
        a, b = fit(points)
        if a == a and b == b:
            if c > b and a > 0:
                t = a / (c - b)
                print(f"\n{name}: extra CPU = {a:.0f} ns + {b:.4f} ns/byte per request; "
                      f"zero copy saves {c:.4f} ns/byte, so it pays from about "
                      f"{t / 1024:.1f} KiB per request.")
            else:
                print(f"\n{name}: extra CPU = {a:.0f} ns + {b:.4f} ns/byte per request "
                      f"(no break-even found against {c:.4f} ns/byte).")
    print()

if targets:
    print("#### Targets of the issue\n")
    print("| target | measured | met |")
    print("| --- | ---: | --- |")
    for name, v, ok in targets:
        print(f"| {name} | {v:.2f}x | {'yes' if ok else 'no'} |")
