#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The libuv adapter benchmarks, from a fresh clone: install what is missing,
# make an optimised build (in build/bench, apart from the test builds) and
# print markdown tables:
#   bench_uv_fanout  pub/sub fan-out of 64 KiB messages to 16 subscribers,
#                    zbuf dup against copying into per-subscriber uv_buf_t memory;
#   bench_uv_echo    framed echo throughput, 1 KiB to 1 MiB messages.
# Results and how to read them: docs/benchmarks.md (section libuv).
#
# Usage: scripts/bench-uv.sh [--quick] [--baseline REV [--rounds N]]
#   --quick          fewer runs and bytes, for a smoke test
#   --baseline REV   instead: build the commit REV of this repository as well
#                    (exported with git archive, built in build/bench-base),
#                    compile REV's fan-out benchmark program twice, the same
#                    way, against REV's libraries and against this tree's (so
#                    that only the library differs), run the two one after
#                    the other, N rounds (default 7, in alternating order),
#                    and print the zbuf broker of both side by side: messages
#                    per second and broker CPU per message, medians with
#                    their range, and the median of the per-round ratios;
#                    then run each under callgrind (300 messages, CGRUNS
#                    times, default 3) and print the user-space instructions
#                    per message of the zbuf broker run, which the machine's
#                    load does not change, with this tree's own benchmark's
#                    last variant (stream limits, stream writes) beside.
# Environment: FANOUT_ARGS / ECHO_ARGS replace each program's arguments;
# BASE_ARGS the fan-out arguments of a --baseline run (default --msgs 2000);
# TCP_CC the congestion control of every benchmark socket (default cubic:
# BBR, where it is the system's, paces loopback senders).
source "$(dirname "$0")/bench-lib.sh" build-bench-uv.log

runs=7 msgs=5000 mbytes=256 baseline= rounds=7 cgruns=${CGRUNS:-3}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) runs=1 msgs=300 mbytes=16 rounds=2 cgruns=1 ;;
    --baseline) baseline=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    *) echo "usage: scripts/bench-uv.sh [--quick] [--baseline REV [--rounds N]]" >&2; exit 2 ;;
  esac
  shift
done

build() { # source dir, build dir
  echo "==> configure+build $2 (Release)" >&2
  bench_configure "$1" "$2" -DZBUF_WITH_UV=ON
  bench_make "$2" bench_uv_fanout bench_uv_echo
}
build "$root" "$root/build/bench"
export BENCH_TCP_CC=${TCP_CC:-cubic} # read by the benchmark programs
bin=$root/build/bench/adapters/uv

if [[ -n "$baseline" ]]; then
  rev=$(git -C "$root" rev-parse --short "$baseline")
  src=$root/build/bench-base/src
  rm -rf "$src" && mkdir -p "$src"
  git -C "$root" archive "$baseline" | tar -x -C "$src"
  build "$src" "$root/build/bench-base/build"
  # REV's benchmark program against each library, compiled alike (with the
  # benchmarks' common helpers, where REV has them in bench/common).
  common=()
  if [ -f "$src/bench/common/bench_common.c" ]; then
    common=(-I"$src/bench/common" "$src/bench/common/bench_common.c")
  fi
  same() { # include root, build dir, output
    # The framing codec, a library of its own (adapters/frame) where the tree has it.
    local frame=()
    if [ -d "$2/adapters/frame" ]; then
      frame=(-I"$1/adapters/frame/include" -L"$2/adapters/frame" -lzbuf-frame
             -Wl,-rpath,"$2/adapters/frame")
    fi
    cc -std=gnu11 -O3 -DNDEBUG -I"$1/include" -I"$1/adapters/uv/include" "${common[@]}" \
       "$src/adapters/uv/bench/bench_uv_fanout.c" "$src/adapters/uv/bench/bench_util.c" \
       -o "$3" -L"$2/adapters/uv" -L"$2/lib" -lzbuf-uv "${frame[@]}" -lzbuf -luv -lpthread \
       -Wl,-rpath,"$2/adapters/uv:$2/lib" >>"$log" 2>&1 || bench_fail 30
  }
  old=$root/build/bench-base/fanout-before
  new=$root/build/bench-base/fanout-after
  same "$src" "$root/build/bench-base/build" "$old"
  same "$root" "$root/build/bench" "$new"
  here=$(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD -- . || echo +changes)
  echo "==> machine: $(bench_machine); benchmark sockets: $BENCH_TCP_CC" >&2
  "$new" --msgs 200 --runs 1 --verify >/dev/null 2>&1
  "$old" --msgs 200 --runs 1 --verify >/dev/null 2>&1
  # One run of a program; prints "messages/s CPU-us-per-message" of its zbuf dup row.
  one() {
    "$1" ${BASE_ARGS:---msgs 2000} --runs 1 2>/dev/null |
      awk -F'|' '$2 ~ /^ zbuf dup $/ { gsub(/ us/, "", $6); print $3 + 0, $6 + 0 }'
  }
  res=$(mktemp)
  for ((r = 0; r < rounds; r++)); do
    if ((r % 2 == 0)); then a=$(one "$old"); b=$(one "$new")
    else b=$(one "$new"); a=$(one "$old"); fi
    echo "$a $b" >>"$res"
    echo "round $r: $rev $a, $here $b (messages/s, broker us per message); load $(cut -d' ' -f1 /proc/loadavg)" >&2
  done
  awk -v rev="$rev" -v here="$here" -v load="$(bench_load)" -v n="$rounds" '
    function med(a, k,   i, j, t) { for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++)
                                       if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
                                     return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2 }
    function lo(a, k,   i, m) { m = a[1]; for (i = 2; i <= k; i++) if (a[i] < m) m = a[i]; return m }
    function hi(a, k,   i, m) { m = a[1]; for (i = 2; i <= k; i++) if (a[i] > m) m = a[i]; return m }
    { k++; om[k] = $1; oc[k] = $2; nm[k] = $3; nc[k] = $4; rm[k] = $3 / $1; rc[k] = $2 / $4 }
    END {
      printf "### Fan-out, zbuf broker before and after (%s benchmark program against each library, %d rounds, load average at the end %s)\n\n", rev, n, load
      printf "| build | messages/s, median (range) | broker CPU per message, median (range) |\n"
      printf "| --- | ---: | ---: |\n"
      printf "| %s (before) | %.0f (%.0f-%.0f) | %.1f us (%.1f-%.1f) |\n", rev, med(om, k), lo(om, k), hi(om, k), med(oc, k), lo(oc, k), hi(oc, k)
      printf "| %s (after) | %.0f (%.0f-%.0f) | %.1f us (%.1f-%.1f) |\n", here, med(nm, k), lo(nm, k), hi(nm, k), med(nc, k), lo(nc, k), hi(nc, k)
      printf "\nAfter / before, median of the per-round ratios (range): throughput %.2fx (%.2f-%.2f), CPU per message %.2fx less (%.2f-%.2f).\n",
             med(rm, k), lo(rm, k), hi(rm, k), med(rc, k), lo(rc, k), hi(rc, k)
    }' "$res"
  rm -f "$res"

  # Instructions: one run of each variant per program, a callgrind dump at
  # the start of each broker thread.  Dump 2 is the first run, the zbuf dup
  # broker (with its publisher and sink, the same code in both programs);
  # the last dump (no suffix) of this tree's own benchmark is its last
  # variant, the zbuf broker with stream limits and stream writes, and the
  # exit.  Valgrind runs the
  # threads one at a time, and how reads batch up varies from run to run
  # (a few percent): CGRUNS runs each (default 3), medians and ranges.
  cg=$root/build/bench-base/callgrind
  cgmsgs=300
  total() { awk '/^(summary|totals):/ { print $2; exit }' "$1"; }
  cgrun() { # program: prints "zbuf-dup-Ir last-dump-Ir"
    rm -rf "$cg" && mkdir -p "$cg"
    (cd "$cg" && valgrind --tool=callgrind --dump-before=broker_main \
       "$1" --msgs $cgmsgs --runs 1 >/dev/null 2>&1)
    echo "$(total "$(ls "$cg"/callgrind.out.*.2)")" \
         "$(total "$(ls "$cg"/callgrind.out.* | grep -E 'callgrind\.out\.[0-9]+$')")"
  }
  echo "==> callgrind, $cgmsgs messages, $cgruns runs each" >&2
  cgres=$(mktemp)
  for ((r = 0; r < cgruns; r++)); do
    echo "$(cgrun "$old") $(cgrun "$new") $(cgrun "$bin/bench_uv_fanout")" >>"$cgres"
  done
  awk -v m=$cgmsgs -v rev="$rev" -v here="$here" '
    function med(a, k,   i, j, t) { for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++)
                                       if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
                                     return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2 }
    function row(name, a, k, base,   md) {
      md = med(a, k) # sorts a
      printf "| %s | %.0f (%.0f-%.0f) |", name, md / m, a[1] / m, a[k] / m
      if (base > 0) printf " %.3fx |\n", md / base; else printf " |\n"
    }
    { k++; o[k] = $1; n[k] = $3; l[k] = $6 }
    END {
      printf "\n| build | user-space instructions per message, median (range) | after / before |\n"
      printf "| --- | ---: | ---: |\n"
      ob = med(o, k)
      row(rev " (before), zbuf dup", o, k, 0)
      row(here " (after), zbuf dup", n, k, ob)
      row(here " (after), its own benchmark: limits + stream writes, with the exit", l, k, ob)
    }' "$cgres"
  rm -f "$cgres"
  exit 0
fi

echo "==> machine: $(bench_machine); benchmark sockets: $BENCH_TCP_CC" >&2
echo "==> correctness pass (--verify)" >&2
"$bin/bench_uv_fanout" --msgs 200 --runs 1 --verify >/dev/null
"$bin/bench_uv_echo" --mbytes 8 --runs 1 --verify >/dev/null

# shellcheck disable=SC2086
"$bin/bench_uv_fanout" ${FANOUT_ARGS:---msgs $msgs --runs $runs}
# shellcheck disable=SC2086
"$bin/bench_uv_echo" ${ECHO_ARGS:---mbytes $mbytes --runs $runs}
