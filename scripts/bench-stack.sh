#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The stack benchmark, from a fresh clone: install what is missing, make an
# optimised build (build/bench), then run bulk TCP over the in-memory link
# with the zbuf stack and with lwIP (Debian's liblwip), and Linux TCP over
# loopback (the system's congestion control, CUBIC and BBR, set on the
# sending socket; CUBIC also at MTU 1500, in a network namespace),
# interleaved round by round, and print medians as markdown.
# Results and how to read them: docs/benchmarks.md (section TCP/IP stack).
# Usage: scripts/bench-stack.sh [rounds (default 7)] [bytes per run (default 256 MiB)]
# A/B: BENCH_BASE=<git revision> also builds bench_stack from that revision
# (build/bench-base) and runs it in every round right after the current one;
# its rows are marked "(base)" and the table gains a column with the
# current/base ratio per configuration (median of per-round ratios).
source "$(dirname "$0")/bench-lib.sh" build-bench-stack.log
rounds=${1:-7}
bytes=${2:-268435456}

bench_build bench_stack bench_lwip
echo "==> machine: $(bench_machine)" >&2
base=${BENCH_BASE:-}
if [ -n "$base" ]; then
  echo "==> configure+build build/bench-base from $base" >&2
  src=$root/build/bench-base-src
  rm -rf "$src" && mkdir -p "$src"
  git -C "$root" archive "$base" | tar -x -C "$src"
  bench_configure "$src" "$root/build/bench-base"
  bench_make "$root/build/bench-base" bench_stack
fi

bin=$root/build/bench/adapters/stack/bench
rows=$root/build/bench-stack-rows.txt # every run's row, kept for a closer look
: >"$rows"
# Linux's loopback at the stack's MTU: a network namespace of our own whose
# lo has MTU 1500 (lo keeps its offloads: TSO, GRO, no checksums), where
# bench_stack's loopback-cubic row runs as loopback-cubic-mtu1500.  Needs
# root; without it the row is left out.
ns=zbst$$
if ip netns add "$ns" 2>/dev/null; then
  trap 'ip netns del "zbst$$" 2>/dev/null' EXIT INT TERM
  ip -n "$ns" link set lo mtu 1500 up || ns=
else
  echo "==> loopback-cubic-mtu1500 skipped: cannot make a network namespace here (needs root)" >&2
  ns=
fi
for r in $(seq "$rounds"); do
  echo "==> round $r/$rounds" >&2
  "$bin/bench_stack" --bytes "$bytes" --runs 1 >>"$rows"
  if [ -n "$ns" ]; then
    ip netns exec "$ns" "$bin/bench_stack" --bytes "$bytes" --runs 1 --which loopback-cubic |
      sed 's/loopback-cubic        /loopback-cubic-mtu1500/' >>"$rows"
  fi
  if [ -n "$base" ]; then
    "$root/build/bench-base/adapters/stack/bench/bench_stack" --bytes "$bytes" --runs 1 |
      sed -E 's/^\| *([^|]*[^ |]) *\|/| \1 (base) |/' >>"$rows"
  fi
  "$bin/bench_lwip" --bytes "$bytes" --runs 1 >>"$rows"
done

python3 - "$rows" "$rounds" "$bytes" <<'PY'
import statistics, sys
rows, rounds, nbytes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
data = {}
order = []
for line in open(rows):
    f = [x.strip() for x in line.strip().strip('|').split('|')]
    if len(f) < 4 or f[1] == "n/a":
        continue
    if f[0] not in data:
        order.append(f[0])
        data[f[0]] = ([], [], f[3])
    data[f[0]][0].append(float(f[1]))
    data[f[0]][1].append(float(f[2]))
med = {k: (statistics.median(v[0]), statistics.median(v[1])) for k, v in data.items()}

# The machine's speed drifts (a shared VM): compare within each round, where
# the runs are seconds apart, and take the median of those ratios.
def ratio(k, ref):
    if ref not in data or len(data[ref][1]) != len(data[k][1]):
        return "-"
    r = sorted(a / b for a, b in zip(data[k][1], data[ref][1]))
    return f"{statistics.median(r):.2f} ({r[0]:.2f}-{r[-1]:.2f})"

print(f"Bulk TCP, {nbytes >> 20} MiB per run, {rounds} interleaved rounds: medians, and for the "
      "ratios the median (range) of the per-round ratios.\n")
ab = any(k.endswith(" (base)") for k in order)
# Linux's loopback with each congestion control: BBR's pacing costs the
# kernel's sender most of its speed here, so both are references.
los = [r for r in ("loopback-cubic", "loopback-cubic-mtu1500", "loopback-bbr") if r in data]
print("| configuration | MB/s (wall) | MB per CPU-second | x lwIP (CPU) |"
      + "".join(f" x {r} (CPU) |" for r in los)
      + (" x base (CPU) |" if ab else "") + " bytes copied per payload byte |")
print("| --- | ---: | ---: | ---: |" + " ---: |" * len(los) + (" ---: |" if ab else "") + " --- |")
for k in order:
    w, c = med[k]
    col = (f" {ratio(k, k + ' (base)')} |" if ab else "")
    lo = "".join(f" {ratio(k, r)} |" for r in los)
    print(f"| {k} | {w:.0f} | {c:.0f} | {ratio(k, 'lwip')} |{lo}{col} {data[k][2]} |")
PY
