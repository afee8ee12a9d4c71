#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The core benchmark, from a fresh clone: install what is missing, make an
# optimised build of the library and bench_core (in build/bench, apart from
# the test builds), and print its markdown tables: libzbuf (modern API and
# VxWorks names) against libevent's evbuffer and a copying baseline, fan-out,
# cross-thread, scaling with bytes held, descriptor sizes.
#
# Before/after: with BEFORE=<git revision>, the library of that revision is
# built too (build/bench-before), with this tree's bench_core.c (which uses
# only API that 0.1.0 had), and ROUNDS (default 3) rounds run both programs
# in turn; a table of the medians over the rounds compares them (with the
# median and range over the rounds of each layer's time over zbuf's).
# With CALLGRIND=1, instructions per operation of each implementation (and
# of the before build) are counted with valgrind --tool=callgrind: a measure
# the load of a shared machine does not disturb.
#
# With RT=1 the benchmark runs at real-time priority (chrt -f 50), so that
# on a shared machine other work does not interleave with it (the cross-
# thread part in particular measures hand-overs between two threads).
#
# Results and how to read them: docs/benchmarks.md, section "Core".
# Usage: [BEFORE=rev] [ROUNDS=n] [CALLGRIND=1] [RT=1] scripts/bench-core.sh [bench_core options]
#        (bench_core --help lists the options)
source "$(dirname "$0")/bench-lib.sh" build-bench.log

ROUNDS=${ROUNDS:-3}
BEFORE=${BEFORE:-}
CALLGRIND=${CALLGRIND:-0}
rt=$(bench_rt)

# build_bench SRC BUILD [cmake options]: an optimised bench_core of the
# library in SRC.
build_bench() {
  local src=$1 dir=$2
  shift 2
  bench_configure "$src" "$dir" "$@"
  bench_make "$dir" bench_core
}

echo "==> configure+build build/bench (Release)" >&2
build_bench "$root" "$root/build/bench"
after=$root/build/bench/bench/bench_core

if [ -z "$BEFORE" ]; then
  if [ "$CALLGRIND" != 1 ]; then
    echo "==> $rt $after $*" >&2
    exec $rt "$after" "$@"
  fi
  $rt "$after" "$@"
else
  rev=$(git rev-parse --short "$BEFORE")
  src=$root/build/bench-before/src
  echo "==> configure+build build/bench-before (libzbuf at $rev, this bench_core.c)" >&2
  rm -rf "$src" && mkdir -p "$src"
  git archive "$rev" | tar -x -C "$src"
  cp bench/bench_core.c bench/CMakeLists.txt "$src/bench/"
  build_bench "$src" "$root/build/bench-before/build" -DZBUF_WITH_STACK=OFF
  before=$root/build/bench-before/build/bench/bench_core
  out=$root/build/bench-before/runs
  rm -rf "$out" && mkdir -p "$out"
  for r in $(seq 1 "$ROUNDS"); do
    echo "==> round $r/$ROUNDS: after, then before ($rev)" >&2
    $rt "$after" --tsv "$@" >"$out/after-$r.md" 2>/dev/null
    $rt "$before" --tsv "$@" >"$out/before-$r.md" 2>/dev/null
  done
  grep -v '^RESULT' "$out/after-1.md"
  python3 - "$out" "$ROUNDS" "$rev" <<'PY'
import statistics, sys
out, rounds, rev = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def load(which):
    d = {}
    for r in range(1, rounds + 1):
        for line in open(f"{out}/{which}-{r}.md"):
            f = line.rstrip("\n").split("\t")
            if f[0] != "RESULT":
                continue
            k = (f[1], int(f[2]), f[3])
            d.setdefault(k, []).append((float(f[4]), float(f[5]), float(f[6])))
    return d
a, b = load("after"), load("before")
def med(d, k, i):
    v = [x[i] for x in d.get(k, [])]
    return statistics.median(v) if v else float("nan")
def spread(d, k, i):
    v = [x[i] for x in d.get(k, [])]
    return f"{min(v):.2f}-{max(v):.2f}" if v else "n/a"
def size(n):
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB" if n >= 1024 else f"{n} B"
print(f"### Before ({rev}) and after, medians over {rounds} rounds (each round runs both programs)\n")
print("| workload | segment | implementation | after ns/op | before ns/op | after / before "
      "| evbuffer / X after | evbuffer / X before | X / zbuf after (range) "
      "| X / zbuf before |")
print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
for k in sorted(a, key=lambda k: (k[0], k[1], k[2])):
    name, sz, impl = k
    if name == "xthread" or impl in ("evbuffer", "copy"):
        continue
    x, y = med(a, k, 0), med(b, k, 0)
    print(f"| {name} | {size(sz)} | {impl} | {x:.1f} | {y:.1f} | {x / y:.2f} | "
          f"{med(a, k, 2):.2f}x | {med(b, k, 2):.2f}x | {med(a, k, 1):.2f}x ({spread(a, k, 1)}) | "
          f"{med(b, k, 1):.2f}x |")
for what in ("wall", "cpu"):
    k = ("xthread", 4096, what)
    if k in a:
        x, y = med(a, k, 0), med(b, k, 0)
        print(f"| cross-thread ({what} ns per message) | 4 KiB | zbuf | {x:.1f} | {y:.1f} | "
              f"{x / y:.2f} | | | | |")
PY
fi

if [ "$CALLGRIND" = 1 ]; then
  command -v valgrind >/dev/null || { echo "CALLGRIND=1 needs valgrind" >&2; exit 1; }
  ops=20000
  # count BIN FUNCTION ARGS...: instructions per operation of one batch function
  count() {
    local bin=$1 fn=$2 f
    shift 2
    f=$(mktemp)
    valgrind --tool=callgrind --callgrind-out-file="$f.out" --toggle-collect="$fn" \
      "$bin" --ops "$ops" --reps 1 "$@" >/dev/null 2>"$f"
    awk -v n="$ops" '/Collected :/ {printf "%.0f", $NF / n}' "$f"
    rm -f "$f" "$f.out"
  }
  echo
  echo "### Instructions per operation (callgrind, $ops operations, 4 KiB segments)"
  echo
  echo "| operation | zbuf | vxworks | evbuffer | copy | zbuf before | vxworks before |"
  echo "|---|---:|---:|---:|---:|---:|---:|"
  for part in msg fanout; do
    fn=run_${part%out}_ # the batch functions: run_msg_zbuf ... run_fan_copy
    row="| $part |"
    for impl in zbuf vx evbuffer copy; do
      row="$row $(count "$after" "$fn$impl" --only "$part" --seg 4096) |"
    done
    for impl in zbuf vx; do
      if [ -n "$BEFORE" ]; then
        row="$row $(count "$before" "$fn$impl" --only "$part" --seg 4096) |"
      else
        row="$row n/a |"
      fi
    done
    echo "$row"
  done
fi
