#!/usr/bin/env bash
# The core benchmark, from a fresh clone: install what is missing, make an
# optimised build of the library and bench_core (in build/bench, apart from
# the test builds), and print its markdown tables: libzbuf against libevent's
# evbuffer and a copying baseline, scaling with bytes held, descriptor sizes.
# Results and how to read them: docs/benchmarks.md, section "Core".
# Usage: scripts/bench-core.sh [bench_core options]   (--help lists them)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
scripts/deps.sh

mkdir -p build
log=$root/build-bench.log
echo "==> configure+build build/bench (Release)" >&2
cmake -S "$root" -B "$root/build/bench" -DCMAKE_BUILD_TYPE=Release \
      -DZBUF_BUILD_BENCH=ON -DZBUF_BUILD_TESTS=OFF -DZBUF_BUILD_EXAMPLES=OFF \
      -DZBUF_BUILD_DOCS=OFF >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
cmake --build "$root/build/bench" -j"$(nproc)" --target bench_core >>"$log" 2>&1 ||
  { tail -n 60 "$log" >&2; exit 1; }

echo "==> build/bench/bench/bench_core $*" >&2
exec "$root/build/bench/bench/bench_core" "$@"
