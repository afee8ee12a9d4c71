#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Does a change leave the stack's wire behaviour alone?  Builds zbuf-stack
# from the work tree and from a base revision, runs scripts/stack-wire-hash.c
# (13 link scenarios: loss, duplication, reordering, delay, MTUs, a small
# window, pool copies, checksum offload, a short queue; virtual clock) with
# each, and compares the per-scenario hashes of every frame (side, time,
# bytes).  Exit status 0: identical.
# Usage: scripts/stack-wire-hash.sh [base revision (default main)]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
base=${1:-main}
log=$root/build-wire-hash.log
: >"$log"

build() { # source dir, build dir
  cmake -S "$1" -B "$2" -DCMAKE_BUILD_TYPE=Release -DZBUF_BUILD_TESTS=OFF \
        -DZBUF_BUILD_EXAMPLES=OFF -DZBUF_BUILD_DOCS=OFF -DZBUF_BUILD_BENCH=OFF >>"$log" 2>&1 &&
    cmake --build "$2" -j2 --target zbuf_stack >>"$log" 2>&1 ||
    { tail -n 40 "$log" >&2; exit 1; }
}

run() { # source dir (headers), build dir, output
  local stack
  stack=$(dirname "$(find "$2/adapters/stack" -name 'libzbuf-stack.so' | head -n 1)")
  cc -O2 -std=gnu11 -Wall -Wextra -I"$1/include" -I"$1/adapters/stack/include" \
     "$root/scripts/stack-wire-hash.c" -L"$2/lib" -L"$stack" -lzbuf-stack -lzbuf \
     -Wl,-rpath,"$2/lib:$stack" -o "$2/stack-wire-hash"
  "$2/stack-wire-hash" >"$3"
}

echo "==> build the work tree (build/wire-hash)" >&2
build "$root" "$root/build/wire-hash"
echo "==> build $base (build/wire-hash-base)" >&2
src=$root/build/wire-hash-base-src
rm -rf "$src" && mkdir -p "$src"
git -C "$root" archive "$base" | tar -x -C "$src"
build "$src" "$root/build/wire-hash-base"
run "$root" "$root/build/wire-hash" "$root/build/wire-hash.txt"
run "$src" "$root/build/wire-hash-base" "$root/build/wire-hash-base.txt"
if diff -u "$root/build/wire-hash-base.txt" "$root/build/wire-hash.txt"; then
  cat "$root/build/wire-hash.txt"
  echo "identical: every frame of every scenario matches $base" >&2
else
  echo "DIFFERENT from $base (see the diff above)" >&2
  exit 1
fi
