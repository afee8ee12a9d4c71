#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The main demo, from a fresh clone: install what is missing, build, and run
# the segment demonstrations (tables of segments after insert, dup, cut, split).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build/release -j"$(nproc)" --target demo_segments >/dev/null
exec build/release/examples/demo_segments "$@"
