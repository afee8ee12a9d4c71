#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The whole test suite, from a fresh clone: install what is missing, then
# build and run every test in three configurations:
#   release   gcc, optimised, jemalloc allocator, -Werror
#   asan      gcc, ASan + UBSan, debug chain checks after every call
#   tsan      clang, ThreadSanitizer, the tests labelled 'threads'
# plus a clang -Werror build of everything, the Doxygen docs (warnings fail),
# and scripts/test-install.sh: an install into build/prefix (run paths, man
# pages) consumed by examples/consumer through both CMake find_package() and
# pkg-config, and Debian packages unpacked into a scratch root.
# Usage: scripts/test.sh [--quick]   (--quick: release build only)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
scripts/deps.sh

jobs=$(nproc)
quick=0
[ "${1:-}" = "--quick" ] && quick=1
summary=()
total_pass=0
total_fail=0

build() { # name, cmake args...
  local name=$1; shift
  echo "==> configure+build $name"
  cmake -S "$root" -B "$root/build/$name" -DZBUF_WERROR=ON "$@" >"$root/build-$name.log" 2>&1 ||
    { cat "$root/build-$name.log"; return 1; }
  cmake --build "$root/build/$name" -j"$jobs" >>"$root/build-$name.log" 2>&1 ||
    { tail -n 60 "$root/build-$name.log"; return 1; }
}

runtests() { # name, ctest args...
  local name=$1; shift
  echo "==> tests: $name"
  local out rc=0
  out=$(cd "$root/build/$name" && ctest --output-on-failure --timeout 900 "$@" 2>&1) || rc=$?
  echo "$out" | tail -n 40
  local line pass fail
  line=$(echo "$out" | grep -E '[0-9]+% tests passed' | tail -n1 || true)
  fail=$(echo "$line" | sed -nE 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\1/p')
  pass=$(( $(echo "$line" | sed -nE 's/.*out of ([0-9]+).*/\1/p') - ${fail:-0} ))
  total_pass=$((total_pass + pass)); total_fail=$((total_fail + ${fail:-0}))
  summary+=("$name: $line")
  [ $rc -eq 0 ]
}

mkdir -p build
rc=0
scripts/check-spdx.sh || rc=1
build release -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX="$root/build/prefix" &&
  runtests release || rc=1
if [ $quick -eq 0 ]; then
  build asan -DCMAKE_BUILD_TYPE=Debug -DZBUF_SANITIZE=address,undefined -DZBUF_DEBUG=ON \
        -DZBUF_BUILD_BENCH=OFF -DZBUF_BUILD_DOCS=OFF && runtests asan || rc=1
  build tsan -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZBUF_SANITIZE=thread \
        -DZBUF_BUILD_BENCH=OFF -DZBUF_BUILD_DOCS=OFF && runtests tsan -L threads || rc=1
  # clang -Werror build of everything, and the libFuzzer harnesses run for a bounded time.
  build clang -DCMAKE_C_COMPILER=clang -DZBUF_FUZZ=ON && runtests clang -L fuzz || rc=1
  echo "==> install, man pages, consumers, Debian packages"
  scripts/test-install.sh build/release "$root/build/prefix" >build-install.log 2>&1 &&
    tail -n 8 build-install.log || { tail -n 40 build-install.log; rc=1; }
  echo "==> docs"
  cmake --build build/release --target docs >build-docs.log 2>&1 || { tail -n 40 build-docs.log; rc=1; }
fi

echo
for s in "${summary[@]}"; do echo "  $s"; done
[ $rc -eq 0 ] && echo "all configurations OK" || echo "SOME CONFIGURATION FAILED"
echo "$total_pass passed, $total_fail failed"
exit $rc
