#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The socket adapter's benchmarks, from a fresh clone: install what is
# missing, make an optimised build of zbuf_blaster / zbuf_blastee (built
# with the benchmarks even when the examples are off; in
# build/bench), rerun the 1995 tcpBlaster/tcpBlastee experiment on loopback
# and the transferTo file table, and print markdown tables; the plot goes to
# docs/benchmarks-sock.png.  Results and how to read them:
# docs/benchmarks.md (section Sockets).
#
# Usage: scripts/bench-sock.sh [quick]
# Environment: RUNS (repetitions, default 5), DUR (seconds per stream run,
# default 2), FILE_MB (file sizes, default "7 21 63 98 200 350 700 1024"),
# FILE_RUNS (default 5), FILE_RECV (the receiver's read sizes in the file
# table, default "16384 65536 1048576"), FILE_CC (the TCP congestion
# controls the file table is run with, set on both sockets; default
# "cubic bbr": BBR paces a sendfile() sender on loopback), CC (the
# congestion control of the stream and gather runs, default cubic), FILE_DIR
# (default build/bench/files), PLOT (0: no PNG),
# CONFIGS (message:sockbuf pairs of the stream table), ONLY (stream, gather
# or file: run just that part), RT (1: both ends of every transfer run with
# real-time priority, chrt -f 50, so that on a shared machine other work
# does not interleave with the transfer; the results then say "RT").
#
# Method.  The sender runs on CPU 0 and the receiver on CPU 1 (taskset).
# Send side: each sender mode against the cheapest receiver (recv with
# MSG_TRUNC, which discards without copying), so the sender is what limits.
# Receive side: each receiver mode against the cheapest sender (sendfile of
# a memfd), so the receiver is what limits.  Within each repetition every
# mode of a row runs once, in turn, so that drift in machine load hits all
# modes alike; the tables give medians over the repetitions.
source "$(dirname "$0")/bench-lib.sh" build-bench.log

RUNS=${RUNS:-5}
DUR=${DUR:-2}
FILE_MB=${FILE_MB:-"7 21 63 98 200 350 700 1024"}
FILE_RUNS=${FILE_RUNS:-5}
FILE_RECV=${FILE_RECV:-"16384 65536 1048576"}
FILE_CC=${FILE_CC:-"cubic bbr"}
CC=${CC:-cubic}
FILE_DIR=${FILE_DIR:-$root/build/bench/files}
PLOT=${PLOT:-1}
if [ "${1:-}" = quick ]; then
  RUNS=3 DUR=1 FILE_MB="7 63 200" FILE_RUNS=3
fi

bench_build zbuf_blaster zbuf_blastee sock_overhead
echo "==> machine: $(bench_machine); stream and gather runs: $CC" >&2
bin=$root/build/bench/adapters/sock/examples
out=$root/build/bench/sock
mkdir -p "$out" "$FILE_DIR"
csv=$out/results.csv
echo "kind,size,sockbuf,mode,run,MBps,cpu,bytes,seconds,peer_cpu,cc" >"$csv"

snd="$(bench_rt) $(bench_cpu 0)" rcv="$(bench_rt) $(bench_cpu 1)"
if [ "${RT:-0}" = 1 ]; then
  echo "==> RT=1: sender and receiver run with SCHED_FIFO priority 50" >&2
fi

# Start a blastee on a free port (its options in "$@"); sets $port and $pid.
start_blastee() {
  rm -f "$out/port"
  $rcv "$bin/zbuf_blastee" -q -p "$out/port" "$@" 0 >"$out/ee.txt" &
  pid=$!
  port=$(bench_port "$out/port")
}

# pair KIND SIZE SOCKBUF SENDMODE RECVMODE RUN  (one retry if a side fails)
pair() {
  local kind=$1 size=$2 sb=$3 smode=$4 rmode=$5 run=$6 try res
  for try in 1 2; do
    start_blastee -m "$rmode" -s "$size" -b "$sb" -C "$CC"
    if res=$($snd "$bin/zbuf_blaster" -q -m "$smode" -s "$size" -b "$sb" -t "$DUR" -C "$CC" \
               127.0.0.1 "$port") &&
       wait "$pid"; then
      break
    fi
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    [ "$try" = 2 ] && { echo "pair $kind $size $smode/$rmode failed twice" >&2; return 0; }
  done
  local line mode
  if [ "$kind" = recv ]; then line=$(cat "$out/ee.txt") mode=$rmode; else line=$res mode=$smode; fi
  local mbps cpu bytes secs
  mbps=$(echo "$line" | sed -n 's/.*MBps=\([0-9.]*\).*/\1/p')
  cpu=$(echo "$line" | sed -n 's/.*cpu=\([0-9.]*\).*/\1/p')
  bytes=$(echo "$line" | sed -n 's/.*bytes=\([0-9]*\).*/\1/p')
  secs=$(echo "$line" | sed -n 's/.*seconds=\([0-9.]*\).*/\1/p')
  echo "$kind,$size,$sb,$mode,$run,$mbps,$cpu,$bytes,$secs,," >>"$csv"
  printf '  %-7s %8s/%-8s %-10s run %d: %8s MB/s\n' "$kind" "$size" "$sb" "$mode" "$run" "$mbps" >&2
}

# The original's message / socket-buffer pairs, then larger messages with
# socket buffers three times the message, as in the original.
configs=${CONFIGS:-"1024:5120 5120:15360 15360:46080 65536:196608 262144:786432 1048576:3145728 1024:0"}
ONLY=${ONLY:-all}
want() { [ "$ONLY" = all ] || [ "$ONLY" = "$1" ]; }
want stream && echo "==> stream runs: RUNS=$RUNS DUR=${DUR}s" >&2
want stream && for cfg in $configs; do
  size=${cfg%%:*} sb=${cfg##*:}
  for run in $(seq 1 "$RUNS"); do
    for m in copy zbuf zerocopy zc-always; do pair send "$size" "$sb" "$m" discard "$run"; done
    for m in copy zbuf; do pair recv "$size" "$sb" file "$m" "$run"; done
  done
done

want gather && echo "==> gather: 4 application buffers, gather write vs memcpy + write" >&2
want gather && for size in 16384 65536 262144; do
  for run in $(seq 1 "$RUNS"); do
    for m in memcpy4 gather4; do pair gather "$size" 0 "$m" discard "$run"; done
  done
done

# File to socket: for each file size, congestion control and read size of
# the receiver (which decides how the kernel's loopback delivery and the
# sender's sendfile() interleave), every mode once per run, in turn.
# Recorded: the sender's elapsed time, and the CPU time of both processes.
# Three things that are not the modes' doing are held equal:
# - the congestion control (-C on both sockets; FILE_CC): BBR paces the
#   sender, and on loopback a sendfile() sender runs into that pacing where
#   read+send does not;
# - the TCP metrics the kernel keeps for 127.0.0.1 (cached ssthresh and
#   RTT from the previous connection): forgotten before each transfer when
#   we may (root);
# - how the file sits in the page cache: written once, evicted, read back
#   by readahead (the layout a file read from disk has; writing leaves
#   4 KiB pages, readahead large folios up to 2 MiB).
want file && echo "==> file to socket: read+send vs zbuf file segments" >&2
forget_metrics() { ip tcp_metrics delete 127.0.0.1 >/dev/null 2>&1 || true; }
want file && for mb in $FILE_MB; do
  f=$FILE_DIR/file-${mb}M
  if [ ! -f "$f" ] || [ "$(stat -c %s "$f")" -ne $((mb * 1048576)) ]; then
    head -c $((mb * 1048576)) /dev/urandom >"$f"
  fi
  sync "$f"
  dd if="$f" iflag=nocache count=0 status=none # drop its pages
  cat "$f" >/dev/null # read back, as a repeated transfer would find it
  for run in $(seq 1 "$FILE_RUNS"); do
    for cc in $FILE_CC; do
      for rs in $FILE_RECV; do
        for m in readsend zfile zfile-mmap; do
          forget_metrics
          start_blastee -m discard -s "$rs" -C "$cc"
          res=$($snd "$bin/zbuf_blaster" -q -f "$f" -m "$m" -C "$cc" 127.0.0.1 "$port")
          wait "$pid"
          secs=$(echo "$res" | sed -n 's/.*seconds=\([0-9.]*\).*/\1/p')
          cpu=$(echo "$res" | sed -n 's/.*cpu=\([0-9.]*\).*/\1/p')
          pcpu=$(sed -n 's/.*cpu=\([0-9.]*\).*/\1/p' "$out/ee.txt")
          echo "file,$mb,$rs,$m,$run,0,$cpu,$((mb * 1048576)),$secs,$pcpu,$cc" >>"$csv"
          printf '  file %5s MB, %-5s reads of %7s: %-10s run %d: %8.1f ms\n' "$mb" "$cc" "$rs" \
            "$m" "$run" "$(awk -v s="$secs" 'BEGIN{print s*1000}')" >&2
        done
      done
    done
  done
done

echo "==> tables (medians)" >&2
python3 "$root/adapters/sock/bench/sock_tables.py" "$csv" "$out"
echo "### User-space bookkeeping per send (no system call), best of 5"
echo
"$root/build/bench/adapters/sock/sock_overhead" | sed 's/^/    /'

if [ "$PLOT" = 1 ] && want stream && command -v gnuplot >/dev/null; then
  gnuplot <<EOF
set terminal pngcairo size 1100,450 font ",10" noenhanced
set output "$root/docs/benchmarks-sock.png"
set multiplot layout 1,2 title "libzbuf socket adapter, loopback TCP (medians of $RUNS runs)"
set logscale x 2
set format x '%.0b%B'
set xlabel "message size (bytes)"
set ylabel "MB/s"
set key left top
set grid
set title "send side (receiver discards)"
plot "$out/plot-send.dat" u 1:2 w lp t "copy (write)", \
     "" u 1:3 w lp t "zbuf (gather)", \
     "" u 1:4 w lp t "zerocopy (adaptive)", \
     "" u 1:5 w lp t "zc-always"
set title "receive side (sender uses sendfile)"
plot "$out/plot-recv.dat" u 1:2 w lp t "copy (read)", \
     "" u 1:3 w lp t "zbuf (pool)"
unset multiplot
EOF
  echo "plot: docs/benchmarks-sock.png" >&2
fi
echo "raw results: $csv; tables: $out/tables.md" >&2
