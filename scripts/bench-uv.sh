#!/usr/bin/env bash
# The libuv adapter benchmarks, from a fresh clone: install what is missing,
# make an optimised build (in build/bench, apart from the test builds) and
# print markdown tables:
#   bench_uv_fanout  pub/sub fan-out of 64 KiB messages to 16 subscribers,
#                    zbuf dup against copying into per-subscriber uv_buf_t memory;
#   bench_uv_echo    framed echo throughput, 1 KiB to 1 MiB messages.
# Results and how to read them: docs/benchmarks.md (section libuv).
# Usage: scripts/bench-uv.sh [--quick]   (--quick: fewer runs and bytes, for a smoke test)
# Environment: FANOUT_ARGS / ECHO_ARGS replace each program's arguments.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
scripts/deps.sh

runs=7 msgs=5000 mbytes=256
if [[ "${1:-}" == "--quick" ]]; then
  runs=1 msgs=300 mbytes=16
fi

mkdir -p build
log=$root/build-bench-uv.log
echo "==> configure+build build/bench (Release)" >&2
cmake -S "$root" -B "$root/build/bench" -DCMAKE_BUILD_TYPE=Release \
      -DZBUF_BUILD_BENCH=ON -DZBUF_BUILD_TESTS=OFF -DZBUF_BUILD_EXAMPLES=OFF \
      -DZBUF_BUILD_DOCS=OFF -DZBUF_WITH_UV=ON >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
cmake --build "$root/build/bench" -j"$(nproc)" --target bench_uv_fanout bench_uv_echo >>"$log" 2>&1 ||
  { tail -n 60 "$log" >&2; exit 1; }
bin=$root/build/bench/adapters/uv

echo "==> machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg), $(uname -r)" >&2
echo "==> correctness pass (--verify)" >&2
"$bin/bench_uv_fanout" --msgs 200 --runs 1 --verify >/dev/null
"$bin/bench_uv_echo" --mbytes 8 --runs 1 --verify >/dev/null

# shellcheck disable=SC2086
"$bin/bench_uv_fanout" ${FANOUT_ARGS:---msgs $msgs --runs $runs}
# shellcheck disable=SC2086
"$bin/bench_uv_echo" ${ECHO_ARGS:---mbytes $mbytes --runs $runs}
