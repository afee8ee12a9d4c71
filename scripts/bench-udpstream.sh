#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The UDP byte streams' benchmarks, from a fresh clone: install what is
# missing (libenet-dev for the ENet peer), make an optimised build of
# bench_udpstream and bench_udpstream_enet in build/bench, run every
# scenario and print markdown tables with the targets of the issue judged;
# the plots go to docs/benchmarks-udpstream-rtt.png and
# docs/benchmarks-udpstream-goodput.png.  Results and how to read them:
# docs/benchmarks.md (section "UDP byte streams").
#
# Usage: scripts/bench-udpstream.sh [quick]
# Environment: PASSES (interleaved repetitions of every run, default 3),
# COUNT (messages of the loss scenario, default 1000), PLOT (0: no PNG),
# ONLY (pingpong, jumbo, ip, stream, callgrind or loss: just that part).
#
# Method.  Scenarios (adapters/udpstream/bench/bench_common.h):
#  pingpong  round trips of one message on loopback, both ends in one
#            thread, driven in turn: zero-copy, copying and adaptive
#            streams, kernel TCP (TCP_NODELAY), ENet; MTU 1500 (1444-byte
#            segments) so that frame boundaries show.  Goodput = 2 x size /
#            round trip.  Each program run gives the median of 5 runs' medians.
#            The zero-copy and copying streams run side by side in one
#            process (their runs alternate, so both meet the same load),
#            twice: receiving with UDP GRO (the default) and without; their
#            ratio is taken within each pass, then its median and range over
#            the passes are given.  Kernel TCP runs side by side with the
#            zero-copy stream too (for the round-trip ratio).
#  jumbo     the same for the two stream modes with 65535-byte datagrams
#            (what loopback carries): the per-datagram cost shrinks, the
#            copies stay.
#  ip        the zero-copy and copying streams over the bundled stack's UDP
#            (two stacks in one process joined by the in-memory link, which
#            hands over the very frames sent, as a NIC's DMA would: no
#            kernel, so no copy that both modes pay), at frame sizes (MTU)
#            1500, 9000 (jumbo Ethernet) and 65535, with the stacks
#            checksumming in software and with checksum offload: where the
#            per-datagram cost that both modes share stops hiding the copies.
#  stream    one way, writes of one size back to back, corked (the next
#            process() sends), so small writes share datagrams: where the
#            copy is cheaper than the references (the crossover); with GRO
#            and without.
#  callgrind user-space instructions per round trip (valgrind's callgrind,
#            exactly 100 round trips, when valgrind is installed): the
#            machine's load does not change them; the kernel's share is not
#            in them.
#  loss      16-byte messages every 20 ms, echoed, through an in-process
#            relay: "issue" = 10 % loss each way, 30..62.5 ms each way,
#            reordering; "kcp" = KCP's own simulator (5 % each way,
#            30..61 ms, in order), to compare with its published figures.
# Every run of every implementation is repeated PASSES times, interleaved,
# so that drift in the machine's load hits all alike; the tables give the
# median over the passes and its range.
source "$(dirname "$0")/bench-lib.sh" build-bench-udpstream.log

PASSES=${PASSES:-3}
COUNT=${COUNT:-1000}
PLOT=${PLOT:-1}
ONLY=${ONLY:-}
SIZES="64 256 1024 1443 1444 1445 2888 2889 4096 8192 16384 32768 65536 131072 262144 1048576"
STREAM_SIZES="16 64 128 256 512 1024 2048 4096 16384 65536"
IP_SIZES="1024 4096 16384 65536 262144 1048576"
IP_MTUS="1500 9000 65535"
CG_SIZES="1444 16384 65536 262144"
if [ "${1:-}" = quick ]; then
  PASSES=1 COUNT=300
  SIZES="64 1024 1444 1445 16384 65536 262144 1048576"
  STREAM_SIZES="64 512 1024 4096 65536"
  CG_SIZES="16384 262144"
  IP_SIZES="16384 65536 262144"
fi
want() { [ -z "$ONLY" ] || [ "$ONLY" = "$1" ]; }

echo "==> configure+build build/bench (Release)" >&2
bench_configure "$root" "$root/build/bench"
targets="bench_udpstream"
help=$(cmake --build "$root/build/bench" --target help 2>/dev/null || true)
if grep -q "bench_udpstream_enet" <<<"$help"; then
  targets="$targets bench_udpstream_enet"
fi
bench_make "$root/build/bench" $targets
bin=$root/build/bench/adapters/udpstream/bench
out=$root/build/bench/udpstream
mkdir -p "$out"
raw=$out/raw.txt
: >"$raw"
have_enet=0
if [ -x "$bin/bench_udpstream_enet" ]; then have_enet=1; fi
run() { # program args... -> raw lines tagged with the pass
  "$@" | sed "s/^/$pass /" >>"$raw"
}
load() { uptime | sed 's/.*load average: //'; }
echo "load before: $(load)" >&2

for pass in $(seq 1 "$PASSES"); do
  echo "==> pass $pass of $PASSES" >&2
  if want pingpong; then
    # The two modes side by side (their runs alternate in one process).
    run "$bin/bench_udpstream" pingpong zerocopy,copy $SIZES
    run "$bin/bench_udpstream" pingpong zerocopy-nogro,copy-nogro $SIZES
    "$bin/bench_udpstream" pingpong zerocopy,tcp $SIZES |
      sed "s/^pingpong zerocopy /pingpong zerocopy-vs-tcp /; s/^/$pass /" >>"$raw"
    run "$bin/bench_udpstream" pingpong auto $SIZES
    if [ $have_enet = 1 ]; then run "$bin/bench_udpstream_enet" pingpong enet $SIZES; fi
  fi
  if want jumbo; then
    BENCH_MTU=65535 "$bin/bench_udpstream" pingpong zerocopy,copy $SIZES |
      sed "s/^pingpong /jumbo /; s/^/$pass /" >>"$raw"
  fi
  if want ip; then
    for mtu in $IP_MTUS; do
      for off in 0 1; do
        BENCH_MTU=$mtu BENCH_IP_OFFLOAD=$off "$bin/bench_udpstream" pingpong zerocopy-ip,copy-ip $IP_SIZES |
          sed "s/^pingpong /ip-$mtu-$off /; s/^/$pass /" >>"$raw"
      done
    done
  fi
  if want stream; then
    for i in zerocopy,copy auto zerocopy-nogro,copy-nogro auto-nogro; do
      run env BENCH_CORK=1 "$bin/bench_udpstream" stream "$i" $STREAM_SIZES
    done
  fi
done
if want callgrind; then
  if command -v valgrind >/dev/null; then
    echo "==> callgrind: instructions per round trip" >&2
    for g in 1 0; do
      for i in zerocopy copy; do
        for n in $CG_SIZES; do
          f=$out/callgrind.$i.$g.$n
          BENCH_GRO=$g BENCH_ROUNDS=100 valgrind --tool=callgrind --callgrind-out-file="$f" \
            --toggle-collect=us_pp_round "$bin/bench_udpstream" pingpong "$i" "$n" 2>/dev/null
          ir=$(grep '^summary:' "$f" | awk '{print $2}')
          echo "1 callgrind $i $g $n $ir" >>"$raw"
        done
      done
    done
  else
    echo "valgrind is not installed: no callgrind table (apt-get install valgrind)" >&2
  fi
fi
if want loss; then
  # Real time, little CPU: the implementations run side by side.
  for model in issue kcp; do
    echo "==> loss scenario, model $model ($COUNT messages, about $((COUNT / 50 + 5)) s)" >&2
    pass=1
    pids=()
    for i in auto auto-nocc; do
      ("$bin/bench_udpstream" loss "$i" "$COUNT" "$model" | sed "s/^/1 /" >"$out/loss-$i-$model") &
      pids+=($!)
    done
    if [ $have_enet = 1 ]; then
      ("$bin/bench_udpstream_enet" loss enet "$COUNT" "$model" | sed "s/^/1 /" >"$out/loss-enet-$model") &
      pids+=($!)
    fi
    wait "${pids[@]}"
    cat "$out"/loss-*-"$model" >>"$raw"
  done
fi
echo "load after: $(load)" >&2

python3 - "$raw" "$out" "$(load)" "$have_enet" <<'PY'
import statistics, sys
from collections import defaultdict

raw, out, load, have_enet = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
pp = defaultdict(list)      # (scenario, impl, size) -> [(p50, p99, goodput, cpu, copies, pass)]
st = defaultdict(list)      # (impl, size) -> [(MBps, cpu_ns_per_byte, copies, pass)]
cg = {}                     # (impl, gro, size) -> instructions per round trip
loss = {}                   # (impl, model) -> fields
for line in open(raw):
    f = line.split()
    if len(f) < 3:
        continue
    kind = f[1]
    if kind in ("pingpong", "jumbo") or kind.startswith("ip-"):
        pp[(kind, f[2], int(f[3]))].append(tuple(float(x) for x in (f[4], f[7], f[8], f[9], f[10])) + (int(f[0]),))
    elif kind == "stream":
        st[(f[2], int(f[3]))].append(tuple(float(x) for x in (f[4], f[7], f[8])) + (int(f[0]),))
    elif kind == "callgrind" and len(f) >= 6 and f[5].isdigit():
        cg[(f[2], f[3] == "1", int(f[4]))] = int(f[5]) / 100.0
    elif kind == "loss":
        loss[(f[2], f[4])] = [float(x) for x in f[5:11]]

def med(vals, i):
    return statistics.median(v[i] for v in vals)

def rng(vals, i):
    xs = [v[i] for v in vals]
    return min(xs), max(xs)

def ratio(a, b, i, inverse=False):
    """Median and range over the passes of a[i] / b[i] within each pass."""
    bp = {v[-1]: v[i] for v in b}
    rs = [(bp[v[-1]] / v[i] if inverse else v[i] / bp[v[-1]]) for v in a if v[-1] in bp and bp[v[-1]] > 0 and v[i] > 0]
    if not rs:
        return None
    return statistics.median(rs), min(rs), max(rs)

def fr(r):
    if r is None:
        return "-"
    return f"{r[0]:.2f}" if r[1] == r[2] else f"{r[0]:.2f} ({r[1]:.2f}-{r[2]:.2f})"

def sizes(kind):
    return sorted({k[2] for k in pp if k[0] == kind})

def fmt_size(n):
    return f"{n // 1048576} MiB" if n >= 1048576 and n % 1048576 == 0 else (
        f"{n // 1024} KiB" if n >= 1024 and n % 1024 == 0 else f"{n} B")

print(f"Load average during the run: {load}\n")
impls = ["zerocopy", "copy", "auto", "tcp"] + (["enet"] if have_enet else [])
if sizes("pingpong"):
    print("### Round trip (p50, us) and goodput (MB/s) against message length, loopback, MTU 1500 (streams with UDP GRO)\n")
    print("| size | " + " | ".join(f"{i} rtt" for i in impls) + " | " +
          " | ".join(f"{i} MB/s" for i in impls) + " | zc/copy goodput | zc/tcp rtt | zc/enet goodput | CPU us/rt zc, copy | copy/zc CPU | copies/B zc, copy, auto |")
    print("|" + " --- |" * (2 * len(impls) + 7))
    with open(f"{out}/pingpong.dat", "w") as dat:
        dat.write("# size " + " ".join(f"{i}_rtt {i}_MBps" for i in impls) + "\n")
        for n in sizes("pingpong"):
            gp, rt = {}, {}
            for i in impls:
                v = pp.get(("pingpong", i, n))
                if v:
                    rt[i], gp[i] = med(v, 0), med(v, 2)
            cells = [f"{rt[i]:.0f}" if i in rt else "-" for i in impls]
            cells += [f"{gp[i]:.0f}" if i in gp else "-" for i in impls]
            z, c = pp.get(("pingpong", "zerocopy", n)), pp.get(("pingpong", "copy", n))
            r1 = fr(ratio(z, c, 2)) if z and c else "-"
            zt, t = pp.get(("pingpong", "zerocopy-vs-tcp", n)), pp.get(("pingpong", "tcp", n))
            r2 = fr(ratio(zt, t, 0)) if zt and t else "-"
            r3 = f"{gp['zerocopy'] / gp['enet']:.2f}" if "enet" in gp and "zerocopy" in gp else "-"
            cp = ", ".join(f"{med(pp[('pingpong', i, n)], 4):.2f}" if ("pingpong", i, n) in pp else "-"
                           for i in ("zerocopy", "copy", "auto"))
            cpu = f"{med(z, 3):.1f}, {med(c, 3):.1f}" if z and c else "-"
            cr = fr(ratio(c, z, 3)) if z and c else "-"
            print(f"| {fmt_size(n)} | " + " | ".join(cells) + f" | {r1} | {r2} | {r3} | {cpu} | {cr} | {cp} |")
            dat.write(f"{n} " + " ".join(f"{rt.get(i, float('nan'))} {gp.get(i, float('nan'))}" for i in impls) + "\n")
    print()
    print("Range of the zero-copy p50 over the passes (us): " + ", ".join(
        f"{fmt_size(n)} {rng(pp[('pingpong', 'zerocopy', n)], 0)[0]:.0f}-{rng(pp[('pingpong', 'zerocopy', n)], 0)[1]:.0f}"
        for n in sizes("pingpong") if ("pingpong", "zerocopy", n) in pp) + "\n")
    if any(k[1].endswith("-nogro") for k in pp):
        print("### Zero copy against copying, receiving with UDP GRO and without (MTU 1500)\n")
        print("Goodput in MB/s and CPU time per round trip in us (medians over the passes); "
              "the ratios are taken within each pass: median (range).\n")
        print("| size | zc GRO MB/s | copy GRO MB/s | zc no-GRO MB/s | copy no-GRO MB/s | zc/copy goodput, GRO | zc/copy goodput, no GRO | "
              "CPU us/rt zc, copy (GRO) | CPU us/rt zc, copy (no GRO) | copy/zc CPU, GRO | copy/zc CPU, no GRO | zc GRO/no-GRO goodput |")
        print("|" + " --- |" * 12)
        for n in sizes("pingpong"):
            zg, cg_, zn, cn = (pp.get(("pingpong", i, n)) for i in ("zerocopy", "copy", "zerocopy-nogro", "copy-nogro"))
            if not (zg and cg_ and zn and cn):
                continue
            print(f"| {fmt_size(n)} | {med(zg, 2):.0f} | {med(cg_, 2):.0f} | {med(zn, 2):.0f} | {med(cn, 2):.0f} | "
                  f"{fr(ratio(zg, cg_, 2))} | {fr(ratio(zn, cn, 2))} | {med(zg, 3):.1f}, {med(cg_, 3):.1f} | "
                  f"{med(zn, 3):.1f}, {med(cn, 3):.1f} | {fr(ratio(cg_, zg, 3))} | {fr(ratio(cn, zn, 3))} | "
                  f"{fr(ratio(zg, zn, 2))} |")
        print()
if sizes("jumbo"):
    print("### The same with 65535-byte datagrams (loopback MTU): zero copy against copying\n")
    print("| size | zerocopy rtt | copy rtt | zerocopy MB/s | copy MB/s | zc/copy goodput |")
    print("| --- | --- | --- | --- | --- | --- |")
    for n in sizes("jumbo"):
        z, c = pp.get(("jumbo", "zerocopy", n)), pp.get(("jumbo", "copy", n))
        if z and c:
            print(f"| {fmt_size(n)} | {med(z, 0):.0f} | {med(c, 0):.0f} | {med(z, 2):.0f} | {med(c, 2):.0f} | {fr(ratio(z, c, 2))} |")
    print()
ipk = sorted({k[0] for k in pp if k[0].startswith("ip-")}, key=lambda k: (int(k.split("-")[1]), k))
if ipk:
    print("### Over the bundled stack's UDP (in-memory link, no kernel): zero copy against copying by frame size\n")
    print("Cells: zero-copy goodput over copying goodput, then copying CPU per round trip over zero copy's; "
          "medians over the passes of the ratios taken within each pass (range).\n")
    cols = []
    for k in ipk:
        _, mtu, off = k.split("-")
        cols.append((k, f"MTU {mtu}, {'checksum offload' if off == '1' else 'software checksum'}"))
    ipsz = sorted({n for k in ipk for n in sizes(k)})
    print("| size | " + " | ".join(c[1] for c in cols) + " |")
    print("|" + " --- |" * (len(cols) + 1))
    for n in ipsz:
        cells = []
        for k, _ in cols:
            z, c = pp.get((k, "zerocopy-ip", n)), pp.get((k, "copy-ip", n))
            cells.append(f"{fr(ratio(z, c, 2))}; CPU {fr(ratio(c, z, 3))}" if z and c else "-")
        print(f"| {fmt_size(n)} | " + " | ".join(cells) + " |")
    print()
    print("| MTU, checksum | " + " | ".join(f"{fmt_size(n)} zc, copy MB/s" for n in ipsz) + " |")
    print("|" + " --- |" * (1 + len(ipsz)))
    for k, label in cols:
        cells = []
        for n in ipsz:
            z, c = pp.get((k, "zerocopy-ip", n)), pp.get((k, "copy-ip", n))
            cells.append(f"{med(z, 2):.0f}, {med(c, 2):.0f}" if z and c else "-")
        print(f"| {label} | " + " | ".join(cells) + " |")
    print()
crosses = {}
ssz = sorted({k[1] for k in st})
if ssz:
    print("### One-way streaming, corked writes of one size: MB/s and CPU ns per byte\n")
    print("| write | zerocopy MB/s | copy MB/s | auto MB/s | zc/copy | CPU ns/B zc, copy, auto | CPU ns/B without GRO: zc, copy, auto | copies/B auto |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for suffix in ("", "-nogro"):
        cross = None
        for n in ssz:
            z, c = st.get(("zerocopy" + suffix, n)), st.get(("copy" + suffix, n))
            if not (z and c):
                continue
            # CPU per byte decides (wall time moves with the machine's load).
            if med(z, 1) <= med(c, 1):
                if cross is None:
                    cross = n
            else:
                cross = None
        crosses[suffix] = cross
    for n in ssz:
        z, c, a = st.get(("zerocopy", n)), st.get(("copy", n)), st.get(("auto", n))
        zn, cn, an = st.get(("zerocopy-nogro", n)), st.get(("copy-nogro", n)), st.get(("auto-nogro", n))
        if not (z and c and a):
            continue
        nog = f"{med(zn, 1):.2f}, {med(cn, 1):.2f}, {med(an, 1):.2f}" if zn and cn and an else "-"
        print(f"| {fmt_size(n)} | {med(z, 0):.1f} | {med(c, 0):.1f} | {med(a, 0):.1f} | {fr(ratio(z, c, 0))} | "
              f"{med(z, 1):.2f}, {med(c, 1):.2f}, {med(a, 1):.2f} | {nog} | {med(a, 2):.2f} |")
    print()
    for suffix, label in (("", "with GRO"), ("-nogro", "without GRO")):
        if suffix in crosses:
            cr = crosses[suffix]
            print(f"Crossover {label} (smallest write from which zero copy costs at most the CPU per byte of "
                  f"copying, and stays so): {fmt_size(cr) if cr else 'none in the sweep'}\n")
if cg:
    print("### User-space instructions per round trip (callgrind, 100 round trips; independent of the load)\n")
    print("| size | zc GRO | copy GRO | zc no GRO | copy no GRO | copy/zc GRO | copy/zc no GRO | instructions per datagram zc GRO, no GRO |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for n in sorted({k[2] for k in cg}):
        v = [cg.get((i, g, n)) for i, g in (("zerocopy", True), ("copy", True), ("zerocopy", False), ("copy", False))]
        if None in v:
            continue
        dg = 2 * ((n + 1443) // 1444)  # data datagrams per round trip, both ways
        print(f"| {fmt_size(n)} | {v[0]:.0f} | {v[1]:.0f} | {v[2]:.0f} | {v[3]:.0f} | {v[1] / v[0]:.2f} | {v[3] / v[2]:.2f} | "
              f"{v[0] / dg:.0f}, {v[2] / dg:.0f} |")
    print()
if loss:
    print("### Under loss: 16-byte messages every 20 ms, echoed (message round trip, ms)\n")
    print("| model | implementation | average | p50 | p99 | maximum | wire bytes per payload byte | messages lost |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for (impl, model), v in sorted(loss.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        print(f"| {model} | {impl} | {v[0]:.0f} | {v[1]:.0f} | {v[2]:.0f} | {v[3]:.0f} | {v[4]:.2f} | {v[5]:.0f} |")
    print("| kcp | KCP fast mode, as published (test.cpp) | 138 | - | - | 392 | - | - |")
    print("| kcp | KCP normal mode, as published | 156 | - | - | 571 | - | - |")
    print()

# The targets of the issue, judged on these numbers.
print("### Targets\n")
def gp(kind, i, n):
    v = pp.get((kind, i, n))
    return med(v, 2) if v else None
for zi, ci, label in (("zerocopy", "copy", "with UDP GRO"), ("zerocopy-nogro", "copy-nogro", "without GRO")):
    big = [n for n in sizes("pingpong") if n >= 16384 and pp.get(("pingpong", zi, n)) and pp.get(("pingpong", ci, n))]
    if not big:
        continue
    rs = {n: ratio(pp[("pingpong", zi, n)], pp[("pingpong", ci, n)], 2)[0] for n in big}
    cs = {n: ratio(pp[("pingpong", ci, n)], pp[("pingpong", zi, n)], 3)[0] for n in big}
    met_from = None
    for n in big:
        if rs[n] >= 1.5:
            met_from = n if met_from is None else met_from
        else:
            met_from = None
    print(f"- zero-copy goodput >= 1.5x copying from 16 KiB up (MTU 1500, {label}): "
          f"{'met' if min(rs.values()) >= 1.5 else 'NOT met'}: " +
          ", ".join(f"{fmt_size(n)} {rs[n]:.2f}" for n in big) +
          (f"; met from {fmt_size(met_from)} up" if met_from and min(rs.values()) < 1.5 else ""))
    print(f"  (CPU time per round trip, copying over zero copy: " +
          ", ".join(f"{fmt_size(n)} {cs[n]:.2f}" for n in big) + ")")
for k in ipk:
    big = [n for n in sizes(k) if n >= 16384 and pp.get((k, "copy-ip", n))]
    if not big:
        continue
    rs = {n: ratio(pp[(k, "zerocopy-ip", n)], pp[(k, "copy-ip", n)], 2)[0] for n in big}
    _, mtu, off = k.split("-")
    print(f"- over the bundled stack, MTU {mtu}, {'checksum offload' if off == '1' else 'software checksum'}: "
          f"{'met' if min(rs.values()) >= 1.5 else 'NOT met'}: " + ", ".join(f"{fmt_size(n)} {rs[n]:.2f}" for n in big))
jb = [n for n in sizes("jumbo") if n >= 16384]
if jb:
    rs = [gp("jumbo", "zerocopy", n) / gp("jumbo", "copy", n) for n in jb if gp("jumbo", "copy", n)]
    print(f"- the same with 65535-byte datagrams: {'met' if min(rs) >= 1.5 else 'NOT met'} "
          f"(ratios {min(rs):.2f} to {max(rs):.2f})")
if ("pingpong", "tcp", 1024) in pp and ("pingpong", "zerocopy-vs-tcp", 1024) in pp:
    r = ratio(pp[("pingpong", "zerocopy-vs-tcp", 1024)], pp[("pingpong", "tcp", 1024)], 0)
    print(f"- p50 round trip at 1 KiB <= 1.5x kernel TCP: {'met' if r[0] <= 1.5 else 'NOT met'} "
          f"({fr(r)}x; {med(pp[('pingpong', 'zerocopy-vs-tcp', 1024)], 0):.0f} against "
          f"{med(pp[('pingpong', 'tcp', 1024)], 0):.0f} us, side by side)")
if ("pingpong", "enet", 65536) in pp:
    r = gp("pingpong", "zerocopy", 65536) / gp("pingpong", "enet", 65536)
    print(f"- goodput >= 2x ENet at 64 KiB: {'met' if r >= 2 else 'NOT met'} ({r:.2f}x)")
zc = [med(v, 4) for k, v in pp.items() if k[1] in ("zerocopy", "zerocopy-nogro")]
if zc:
    print(f"- 0 payload bytes copied in zero-copy mode: {'met' if max(zc) == 0 else 'NOT met'} "
          f"(largest bytes copied per payload byte over all sizes, GRO on and off: {max(zc):.3f})")
if ssz:
    print(f"- crossover measured: {fmt_size(crosses.get('')) if crosses.get('') else 'none'} with GRO, "
          f"{fmt_size(crosses.get('-nogro')) if crosses.get('-nogro') else 'none'} without "
          f"(the adaptive default copies below ZBUF_UDPSTREAM_COPY_BELOW = 1024 bytes)")
for model in ("issue", "kcp"):
    a, e = loss.get(("auto-nocc", model)), loss.get(("enet", model))
    c = loss.get(("auto", model))
    if a and e:
        print(f"- loss, {model} model: average {a[0]:.0f} ms (congestion control off) / "
              f"{c[0]:.0f} ms (on) against ENet {e[0]:.0f} ms; p99 {a[2]:.0f} / {c[2]:.0f} against {e[2]:.0f}; "
              f"wire overhead {a[4]:.2f} / {c[4]:.2f} against {e[4]:.2f}")
    if model == "kcp" and a:
        print(f"- against KCP's published fast mode (138 ms average, 392 ms maximum): "
              f"{a[0]:.0f} ms average, {a[3]:.0f} ms maximum with congestion control off")
PY

if [ "$PLOT" = 1 ] && want pingpong && command -v gnuplot >/dev/null && [ -s "$out/pingpong.dat" ]; then
  enet_rtt="" enet_gp=""
  if [ $have_enet = 1 ]; then
    enet_rtt=", '' using 1:10 with linespoints title 'ENet'"
    enet_gp=", '' using 1:11 with linespoints title 'ENet'"
  fi
  gnuplot <<EOF
set terminal pngcairo size 900,480 font ",10" noenhanced
set logscale xy
set grid
set key top left
set xlabel "message length (bytes)"
set xtics ("64" 64, "256" 256, "1K" 1024, "4K" 4096, "16K" 16384, "64K" 65536, "256K" 262144, "1M" 1048576)
set output "$root/docs/benchmarks-udpstream-rtt.png"
set ylabel "round trip, p50 (us)"
set title "Round trip against message length, loopback, MTU 1500"
plot "$out/pingpong.dat" using 1:2 with linespoints title 'zbuf-udpstream zero copy', \
     '' using 1:4 with linespoints title 'copying mode', '' using 1:6 with linespoints title 'adaptive', \
     '' using 1:8 with linespoints title 'kernel TCP (TCP_NODELAY)' $enet_rtt
set output "$root/docs/benchmarks-udpstream-goodput.png"
set ylabel "goodput (MB/s, 2 x length / round trip)"
set title "Effective bandwidth against message length, loopback, MTU 1500"
set key top left
plot "$out/pingpong.dat" using 1:3 with linespoints title 'zbuf-udpstream zero copy', \
     '' using 1:5 with linespoints title 'copying mode', '' using 1:7 with linespoints title 'adaptive', \
     '' using 1:9 with linespoints title 'kernel TCP (TCP_NODELAY)' $enet_gp
EOF
  echo "plots: docs/benchmarks-udpstream-rtt.png, docs/benchmarks-udpstream-goodput.png" >&2
fi
