#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The stack's Internet checksum, from a fresh clone: install what is missing,
# make an optimised build (build/bench) and run bench_cksum, which prints a
# markdown table of GB/s per implementation (portable = the code before the
# vector versions, SSE2, AVX2, the one the stack uses) against a plain
# 16-bit loop and memcpy(), from 20-byte headers to 1 MiB, aligned and odd
# addresses, and a 64 KiB datagram summed in place over 1460-byte segments.
# Results and how to read them: docs/benchmarks.md (section TCP/IP stack,
# "Checksum").
# Usage: scripts/bench-cksum.sh [--reps N] [--target-ms MS]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
scripts/deps.sh

mkdir -p build
log=$root/build-bench-cksum.log
echo "==> configure+build build/bench (Release)" >&2
cmake -S "$root" -B "$root/build/bench" -DCMAKE_BUILD_TYPE=Release \
      -DZBUF_BUILD_BENCH=ON -DZBUF_BUILD_TESTS=OFF -DZBUF_BUILD_EXAMPLES=OFF \
      -DZBUF_BUILD_DOCS=OFF >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
cmake --build "$root/build/bench" -j"$(nproc)" --target bench_cksum >>"$log" 2>&1 ||
  { tail -n 60 "$log" >&2; exit 1; }
exec "$root/build/bench/adapters/stack/bench/bench_cksum" "$@"
