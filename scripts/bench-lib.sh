# SPDX-License-Identifier: MIT
# What every scripts/bench-*.sh does before it measures, in one place.  A
# script starts with
#   source "$(dirname "$0")/bench-lib.sh" build-bench-NAME.log
# which turns on strict mode, moves to the top of the tree ($root), installs
# what is missing (scripts/deps.sh) and empties the build log $root/<log>
# ($log); then it calls the functions below.  Every build is optimised
# (Release) and has the benchmarks without the tests, examples or docs.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
scripts/deps.sh
mkdir -p build
log=$root/${1:?bench-lib.sh: the name of the build log}
: >"$log"

# bench_fail [lines]: show the end of the build log and stop the script.
bench_fail() {
  tail -n "${1:-60}" "$log" >&2
  exit 1
}

# bench_configure SRC DIR [cmake options]: configure an optimised build of
# the tree SRC in DIR.
bench_configure() {
  local src=$1 dir=$2
  shift 2
  cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE=Release \
        -DZBUF_BUILD_BENCH=ON -DZBUF_BUILD_TESTS=OFF -DZBUF_BUILD_EXAMPLES=OFF \
        -DZBUF_BUILD_DOCS=OFF "$@" >>"$log" 2>&1 || bench_fail
}

# bench_make DIR TARGET...: build those targets of the configured DIR.
bench_make() {
  local dir=$1
  shift
  cmake --build "$dir" -j"$(nproc)" --target "$@" >>"$log" 2>&1 || bench_fail
}

# bench_build TARGET...: configure build/bench from this tree and build
# those targets of it.
bench_build() {
  echo "==> configure+build build/bench (Release)" >&2
  bench_configure "$root" "$root/build/bench"
  bench_make "$root/build/bench" "$@"
}

# bench_load: the load average over 1, 5 and 15 minutes.
bench_load() {
  cut -d' ' -f1-3 /proc/loadavg
}

# bench_machine: CPUs, load average, kernel and the system's TCP congestion
# control (BBR paces loopback senders: it decides some results), for the
# head of a table.
bench_machine() {
  echo "$(nproc) CPUs, load average $(bench_load), $(uname -r)," \
    "TCP $(cat /proc/sys/net/ipv4/tcp_congestion_control 2>/dev/null || echo ?)"
}

# bench_cpu N: the command prefix that runs a program on CPU N ("taskset -c
# N"), or nothing on a machine with one CPU.
bench_cpu() {
  if [ "$(nproc)" -ge 2 ]; then echo "taskset -c $1"; fi
}

# bench_rt: the command prefix that runs a program at real-time priority
# ("chrt -f 50") when RT=1, so that other work on a shared machine does not
# interleave with it; nothing otherwise.
bench_rt() {
  if [ "${RT:-0}" = 1 ]; then echo "chrt -f 50"; fi
}

# bench_port FILE: wait (up to 5 s) until a program started in the
# background has written the port it listens on to FILE, and print it.
bench_port() {
  local i
  for i in $(seq 1 500); do
    [ -s "$1" ] && break
    sleep 0.01
  done
  cat "$1"
}
