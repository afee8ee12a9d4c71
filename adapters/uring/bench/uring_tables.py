#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
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
    for k in ('seconds', 'cpu', 'peer_cpu'):
        if k in kv:
            kv[k] = float(kv[k])
    if kv['kind'] == 'udpn':
        # The sockets sweep: its rows are keyed by the number of sockets.
        kv['dgram'] = kv['size']
        kv['size'] = int(kv['socks'])
    if kv['kind'] in ('udpr', 'lat'):
        # The paced sweep: keyed by the sender's datagrams per second.
        kv['dgram'] = kv['size']
        kv['size'] = int(float(kv['rate']))
    rows.append(kv)


def metric(r, what):
    if what == 'msgs':   # messages per second
        return r['msgs'] / r['seconds'] if r['seconds'] > 0 else float('nan')
    if what == 'mbs':    # MB per second
        return r['bytes'] / r['seconds'] / 1e6 if r['seconds'] > 0 else float('nan')
    if what == 'cpumb':  # MB per CPU-second of the side under test
        return r['bytes'] / r['cpu'] / 1e6 if r['cpu'] > 0 else float('nan')
    if what == 'bothmb':  # MB per CPU-second of sender and receiver together
        c = r['cpu'] + r.get('peer_cpu', float('nan'))
        return r['bytes'] / c / 1e6 if c > 0 else float('nan')
    if what == 'msgseg':  # messages per TCP data segment (Nagle's coalescing)
        segs = int(r.get('segs', 0))
        return r['msgs'] / segs if segs > 0 else float('nan')
    if what in ('lat_p50', 'lat_p99', 'lat_p999'):  # delay from send to callback, us
        return float(r.get(what, 'nan'))
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


# Columns in the order of the script's SEND_MODES (each repetition starts
# from another mode), modes not listed last, in the order first seen.
ORDER = ['copy', 'sock', 'epoll', 'msgzc', 'uring', 'uring-zc', 'uring-zc-fixed', 'msgzc-always',
         'uring-zc-always', 'uring-zc-fixed-always']


def modes(kind):
    seen = []
    for r in rows:
        if r['kind'] == kind and r['mode'] not in seen:
            seen.append(r['mode'])
    return sorted(seen, key=lambda m: ORDER.index(m) if m in ORDER else len(ORDER))


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
    # The "epoll path" is the socket adapter as applications drive
    # it (sock: one sendmsg() per zbuf); the engine's own epoll fallback
    # (epoll) gathers queued zbufs as the ring does, so it is shown too.
    base = 'sock' if 'sock' in ms else 'epoll'
    # The ratio columns whose two modes ran (SEND_MODES may leave some out).
    pairs = [(f"uring / {base}", 'uring', base), ("uring / epoll fallback", 'uring', 'epoll')]
    pairs = [p for p in pairs if p[1] in ms and p[2] in ms]
    print("| message | " + " | ".join(ms) + "".join(f" | {t} | IQR" for t, _, _ in pairs) + " |")
    print("| --- |" + " ---: |" * (len(ms) + 2 * len(pairs)))
    for s in sizes('send'):
        cells = [num(med('send', s, m, 'msgs')) for m in ms]
        for _, m, b in pairs:
            cells += [f"{ratio('send', s, m, b, 'msgs'):.2f}x", iqr('send', s, m, b, 'msgs')]
        print(f"| {human(s)} | " + " | ".join(cells) + " |")
        if s <= 1024 and 'uring' in ms and base in ms:
            r = ratio('send', s, 'uring', base, 'msgs')
            targets.append((f"io_uring message rate >= 1.3x the epoll path ({base}), {human(s)}",
                            r, r >= 1.3))
    print()
    def mb_table(title, what):
        """MB per CPU-second (`what`) of every send mode, with its ratio to copy."""
        print(f"#### Send side: MB per CPU-second of {title}, medians, and ratio to `copy`\n")
        print("| message | " + " | ".join(ms) + " |")
        print("| --- |" + " ---: |" * len(ms))
        for s in sizes('send'):
            cells = []
            for m in ms:
                v = med('send', s, m, what)
                rr = ratio('send', s, m, 'copy', what)
                cells.append(f"{num(v)}" + ("" if m == 'copy' else f" ({rr:.2f}x)"))
            print(f"| {human(s)} | " + " | ".join(cells) + " |")
        print()

    mb_table("the sender", 'cpumb')
    if any('peer_cpu' in r for r in rows if r['kind'] == 'send'):
        # On loopback a blocking sender sleeps while the receiver's
        # acknowledgements push its queued data from the receiver's context:
        # the sum of both ends does not depend on who ran that work.
        mb_table("sender and receiver together", 'bothmb')

    if any('segs' in r for r in rows if r['kind'] == 'send'):
        # Small messages on loopback: the kernel's CPU per message follows
        # how many messages Nagle's algorithm put in one segment, which
        # varies from run to run with the timing of both ends.
        print("#### Send side: messages per TCP data segment, medians (min .. max over "
              "repetitions)\n")
        print("| message | " + " | ".join(ms) + " |")
        print("| --- |" + " ---: |" * len(ms))
        for s in sizes('send'):
            if s > 16384:
                continue
            cells = []
            for m in ms:
                v = sorted(x for x in vals('send', s, m, 'msgseg').values() if x == x)
                cells.append(f"{statistics.median(v):.1f} ({v[0]:.1f} .. {v[-1]:.1f})"
                             if v else "-")
            print(f"| {human(s)} | " + " | ".join(cells) + " |")
        print()

    def worst(s, pairs):
        """The lowest paired ratio (MB per CPU-s) among (mode, base) pairs."""
        best = None
        for m, b in pairs:
            if m not in ms or b not in ms:
                continue
            r = ratio('send', s, m, b, 'cpumb')
            if r == r and (best is None or r < best[1]):
                best = (f"{m} / {b}", r)
        return best

    groups = (
        ("io_uring modes / copy", [('uring', 'copy'), ('uring-zc', 'copy'),
                                   ('uring-zc-fixed', 'copy')]),
        ("epoll paths / copy", [('sock', 'copy'), ('epoll', 'copy'), ('msgzc', 'copy')]),
        ("adaptive zero copy / its plain path", [('uring-zc', 'uring'),
                                                 ('uring-zc-fixed', 'uring'),
                                                 ('msgzc', 'epoll')]),
    )
    print("#### Send side: the lowest ratio of each group (MB per CPU-second)\n")
    print("| message | " + " | ".join(g for g, _ in groups) + " |")
    print("| --- |" + " --- |" * len(groups))
    for s in sizes('send'):
        cells = []
        for g, pairs in groups:
            w = worst(s, pairs)
            cells.append(f"{w[1]:.2f}x ({w[0]})" if w else "-")
            if w:
                targets.append((f"{g} >= 0.95x, {human(s)}", w[1], w[1] >= 0.95))
        print(f"| {human(s)} | " + " | ".join(cells) + " |")
    print()


if sizes('sendnd'):
    # The same one-send-per-message modes with TCP_NODELAY: one segment per
    # send(), so the kernel's work per message is the same for each and
    # their ratio is what the adapter adds.
    nms = modes('sendnd')
    print("#### Send side with TCP_NODELAY (one segment per message): MB per CPU-second of "
          "the sender, medians, ratio to `copy`\n")
    print("| message | " + " | ".join(nms) + " | messages per segment |")
    print("| --- |" + " ---: |" * (len(nms) + 1))
    for s in sizes('sendnd'):
        cells = []
        for m in nms:
            v = med('sendnd', s, m, 'cpumb')
            if m == 'copy':
                cells.append(num(v))
                continue
            rr = ratio('sendnd', s, m, 'copy', 'cpumb')
            cells.append(f"{num(v)} ({rr:.2f}x, IQR {iqr('sendnd', s, m, 'copy', 'cpumb')})")
            if rr == rr:
                targets.append((f"{m} / copy with TCP_NODELAY >= 0.95x, {human(s)}", rr,
                                rr >= 0.95))
        segs = [x for m in nms for x in vals('sendnd', s, m, 'msgseg').values() if x == x]
        cells.append(f"{min(segs):.2f} .. {max(segs):.2f}" if segs else "-")
        print(f"| {human(s)} | " + " | ".join(cells) + " |")
    print()


def dgrams(kind):
    d = {r['dgram'] for r in rows if r['kind'] == kind}
    return '/'.join(human(x) for x in sorted(d)) + ' datagrams'


udpn_title = ('Receive side, UDP, sockets sharing one ring (sender addresses them in turn, '
              + dgrams('udpn') + ')')
udpr_title = ('Receive side, UDP from a paced sender (evenly spaced, the same arrivals for '
              'both receivers, ' + dgrams('udpr') + ')')
for kind, title, unit in (('udp', 'Receive side, UDP datagrams (sender floods with sendmmsg)', 'datagram'),
                          ('udpn', udpn_title, 'sockets'),
                          ('udpr', udpr_title, 'datagrams/s sent'),
                          ('tcp', 'Receive side, TCP (sender uses sendfile)', 'pool buffer')):
    if not sizes(kind):
        continue
    print(f"#### {title}: medians\n")
    print(f"| {unit} | epoll msgs/s | uring msgs/s | epoll MB per CPU-s | uring MB per CPU-s "
          "| uring / epoll, MB per CPU-s | IQR |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for s in sizes(kind):
        r = ratio(kind, s, 'uring', 'epoll', 'cpumb')
        key = str(s) if kind in ('udpn', 'udpr') else human(s)
        print(f"| {key} | {num(med(kind, s, 'epoll', 'msgs'))} | "
              f"{num(med(kind, s, 'uring', 'msgs'))} | {num(med(kind, s, 'epoll', 'cpumb'))} | "
              f"{num(med(kind, s, 'uring', 'cpumb'))} | {r:.2f}x | "
              f"{iqr(kind, s, 'uring', 'epoll', 'cpumb')} |")
        if r == r:
            what = (f"UDP {human(s)}" if kind == 'udp' else
                    f"UDP, {s} sockets" if kind == 'udpn' else
                    f"UDP, {s} datagrams/s sent" if kind == 'udpr' else f"TCP, {human(s)} buffers")
            targets.append((f"provided-buffer receive >= 1.2x recvmmsg (MB per CPU-s), "
                            f"{what}", r, r >= 1.2))
    print()

if sizes('lat'):
    # Delay from the sender's timestamp to the receive callback, with and
    # without completion coalescing (uring-nc: ZBUF_URING_NO_COALESCE).
    lms = modes('lat')
    print("#### Receive side, UDP: delay from send to callback, us, medians over repetitions of "
          "each run's 50th / 99th percentile (" + dgrams('lat') + ")\n")
    print("| datagrams/s sent | " + " | ".join(lms) +
          " | uring / uring-nc, MB per CPU-s | uring / epoll, MB per CPU-s |")
    print("| --- |" + " ---: |" * (len(lms) + 2))
    for s in sorted(sizes('lat'), key=lambda x: x or float('inf')):  # the flood (0) last
        cells = [f"{med('lat', s, m, 'lat_p50'):.1f} / {med('lat', s, m, 'lat_p99'):.0f}"
                 for m in lms]
        for m, b in (('uring', 'uring-nc'), ('uring', 'epoll')):
            r = ratio('lat', s, m, b, 'cpumb') if m in lms and b in lms else float('nan')
            cells.append(f"{r:.2f}x" if r == r else "-")
        print(f"| {s if s else 'flood'} | " + " | ".join(cells) + " |")
    print()

# The zero-copy threshold, where the kernel really keeps the pages (veth to
# a peer that drops the datagrams at its input hook): CPU per datagram of
# plain, SEND_ZC and SEND_ZC on registered buffers, cold messages.
mc = [r for r in rows if r['kind'] == 'memcpy']
if mc:
    c = statistics.median(float(r['ns_per_byte']) for r in mc)
    print(f"memcpy, cache-cold source: {c:.4f} ns per byte (median over {len(mc)} sizes): the "
          "copy a zero-copy send saves.\n")
if sizes('dsend'):
    print("#### Zero copy that the kernel keeps (UDP over veth to a dropping peer, cold "
          "messages): CPU ns per datagram, medians\n")
    print("| datagram | plain | SEND_ZC | SEND_ZC, registered | SEND_ZC / plain | "
          "registered / plain | IQR (registered / plain) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    cross = {'uring-zc-always': None, 'uring-zc-fixed-always': None}
    for s in sizes('dsend'):
        p = med('dsend', s, 'uring', 'nsmsg')
        z = med('dsend', s, 'uring-zc-always', 'nsmsg')
        f = med('dsend', s, 'uring-zc-fixed-always', 'nsmsg')
        rz = ratio('dsend', s, 'uring-zc-always', 'uring', 'nsmsg')
        rf = ratio('dsend', s, 'uring-zc-fixed-always', 'uring', 'nsmsg')
        print(f"| {human(s)} | {num(p)} | {num(z)} | {num(f)} | {rz:.2f}x | {rf:.2f}x | "
              f"{iqr('dsend', s, 'uring-zc-fixed-always', 'uring', 'nsmsg')} |")
        for m, r in (('uring-zc-always', rz), ('uring-zc-fixed-always', rf)):
            if r == r and r <= 1.0:
                if cross[m] is None:
                    cross[m] = s
            else:
                cross[m] = None  # must hold from there on
    for m, name in (('uring-zc-always', 'SEND_ZC'), ('uring-zc-fixed-always',
                                                       'SEND_ZC on registered buffers')):
        if cross[m] is not None:
            print(f"\n{name} costs no more CPU than a copying send from {human(cross[m])} on.")
        else:
            print(f"\n{name} did not beat the copying send at the sizes measured.")
    print()

if targets:
    print("#### Targets of the issue\n")
    print("| target | measured | met |")
    print("| --- | ---: | --- |")
    for name, v, ok in targets:
        print(f"| {name} | {v:.2f}x | {'yes' if ok else 'no'} |")
