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
source "$(dirname "$0")/bench-lib.sh" build-bench-cksum.log
bench_build bench_cksum
exec "$root/build/bench/adapters/stack/bench/bench_cksum" "$@"
