#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The io_uring engine's benchmarks, from a fresh clone: install what is
# missing, make an optimised build of bench_uring (in build/bench), run every
# mode side by side on loopback and print the markdown tables of
# docs/benchmarks.md (section io_uring), with the ratios and their spread.
#
# Usage: scripts/bench-uring.sh [quick]
# Environment: RUNS (repetitions, default 5), DUR (seconds per run, default
# 1), SIZES (TCP message sizes of the send table), UDP_SIZES, TCP_BUFS
# (receive tables), UDP_SOCKS (how many UDP sockets share the receiver's
# ring, a sweep), UDP_SOCKS_SIZE (their datagram size), UDP_RATES (UDP
# datagrams per second of a paced sender, a sweep), UDP_RATE_SIZE (their
# size), LAT_RATES (the delay from send to callback, at these datagrams
# per second, 0 for a flooding sender; LAT_RATES= skips it), LAT_SIZE
# (their size), ONLY (send, recv or calib: just that part), SEND_MODES
# (the send modes to run, e.g. "copy sock"; default all of them), TCP_CC
# (the congestion control of every TCP socket, default cubic: BBR's pacing
# slows a fast loopback sender, and the faster the mode the more),
# NODELAY_MODES, NODELAY_SIZES, NODELAY_RUNS (a second send pass with
# TCP_NODELAY, default "copy sock" at 64 B to 4 KiB, 2 x RUNS repetitions;
# NODELAY_MODES= skips it).
#
# Method.  The side under test runs on CPU 0, its peer on CPU 1 (taskset).
# Send side: every sender mode against the cheapest receiver (recv() with
# MSG_TRUNC, 1 MiB at a time, which discards without copying), so that the
# sender limits; messages are zbufs sharing one master buffer, queued up to a
# high-water mark.  Receive side: the receiver modes against the cheapest
# sender (sendmmsg() of 64 datagrams per call; sendfile() of a memfd for
# TCP).  Within a repetition every mode of a row runs once, in turn, so that
# drift in machine load hits all alike (the send modes start from a different
# one in each repetition); tables give medians over the
# repetitions, and ratios as the median of the ratio within a repetition.
# CPU is the user+system time of the side under test (getrusage), which on
# loopback includes the kernel's protocol work done in its context.
source "$(dirname "$0")/bench-lib.sh" build-bench-uring.log

RUNS=${RUNS:-5}
DUR=${DUR:-1}
SIZES=${SIZES:-"64 256 1024 4096 16384 65536 262144 1048576"}
UDP_SIZES=${UDP_SIZES:-"64 256 1024 4096 16384 60000"}
TCP_BUFS=${TCP_BUFS:-"4096 16384 65536"}
UDP_SOCKS=${UDP_SOCKS:-"1 4 16 64 256"}
UDP_SOCKS_SIZE=${UDP_SOCKS_SIZE:-1024}
UDP_RATES=${UDP_RATES:-"20000 100000 200000 400000"}
UDP_RATE_SIZE=${UDP_RATE_SIZE:-1024}
LAT_RATES=${LAT_RATES-"20000 100000 200000 400000 0"}
LAT_SIZE=${LAT_SIZE:-1024}
ONLY=${ONLY:-all}
TCP_CC=${TCP_CC:-cubic}
if [ "${1:-}" = quick ]; then
  RUNS=3 DUR=0.5 SIZES="64 1024 65536 1048576" UDP_SIZES="64 1024 16384" TCP_BUFS=16384
  UDP_SOCKS="1 64" UDP_RATES="20000 200000" LAT_RATES="200000 0"
fi
SEND_MODES=${SEND_MODES:-"copy sock epoll msgzc uring uring-zc uring-zc-fixed msgzc-always uring-zc-always uring-zc-fixed-always"}
NODELAY_MODES=${NODELAY_MODES-"copy sock"}
NODELAY_SIZES=${NODELAY_SIZES:-"64 256 1024 4096"}
NODELAY_RUNS=${NODELAY_RUNS:-$(( RUNS * 2 ))}

bench_build bench_uring
bin=$root/build/bench/adapters/uring/bench/bench_uring
out=$root/build/bench/uring
mkdir -p "$out"
res=$out/results.txt
: >"$res"

if ! probe=$("$bin" probe); then
  echo "==> io_uring unusable here ($probe): only the epoll rows can run" >&2
  SEND_MODES=$(for m in $SEND_MODES; do case $m in uring*) ;; *) echo "$m" ;; esac; done | xargs)
  uring_ok=0
else
  uring_ok=1
fi
echo "==> machine: $(bench_machine); benchmark TCP sockets: $TCP_CC; $probe" >&2
echo "machine cpus=$(nproc) load=$(cut -d' ' -f1 /proc/loadavg) kernel=$(uname -r)" >>"$res"

me=$(bench_cpu 0) peer=$(bench_cpu 1)
want() { [ "$ONLY" = all ] || [ "$ONLY" = "$1" ]; }

# Start a listening peer (its arguments in "$@"); sets $port and $pid.
start_peer() {
  rm -f "$out/port"
  $peer "$bin" "$@" -C "$TCP_CC" -p "$out/port" 0 >"$out/peer.txt" &
  pid=$!
  port=$(bench_port "$out/port")
}

record() { # kind run line
  echo "kind=$1 run=$2 $3" >>"$res"
  printf '  %-5s run %s: %s\n' "$1" "$2" "$(echo "$3" | cut -d' ' -f3-8)" >&2
}

want send && echo "==> send side: RUNS=$RUNS DUR=${DUR}s sizes: $SIZES" >&2
# rotate N WORDS...: the words starting from the Nth (mod their count), so
# that no mode always runs first (or right after a given one) in a row.
rotate() {
  local n=$1; shift
  local k=$(( n % $# ))
  echo "${@:k+1}" "${@:1:k}"
}

want send && for run in $(seq 1 "$RUNS"); do
  for size in $SIZES; do
    # shellcheck disable=SC2086
    for m in $(rotate "$run" $SEND_MODES); do
      start_peer sink
      line=$($me "$bin" send -C "$TCP_CC" -m "$m" -s "$size" -t "$DUR" 127.0.0.1 "$port" |
        grep '^result') || true
      wait "$pid" || true
      # The receiver's CPU too: on loopback, whose context runs the
      # kernel's transmit work for queued data depends on timing.
      pcpu=$(sed -n 's/^result .* cpu=\([0-9.]*\).*/\1/p' "$out/peer.txt")
      [ -n "$line" ] && record send "$run" "$line${pcpu:+ peer_cpu=$pcpu}"
    done
  done
done

# The one-send-per-message modes again with TCP_NODELAY (kind sendnd): one
# segment per send(), so the kernel's work per message is the same for both
# and their ratio is the adapter's own cost, not Nagle's timing lottery.
want send && [ -n "$NODELAY_MODES" ] && echo "==> send side with TCP_NODELAY: $NODELAY_MODES, sizes: $NODELAY_SIZES" >&2
want send && [ -n "$NODELAY_MODES" ] && for run in $(seq 1 "$NODELAY_RUNS"); do
  for size in $NODELAY_SIZES; do
    # shellcheck disable=SC2086
    for m in $(rotate "$run" $NODELAY_MODES); do
      start_peer sink
      line=$($me "$bin" send -N -C "$TCP_CC" -m "$m" -s "$size" -t "$DUR" 127.0.0.1 "$port" |
        grep '^result') || true
      wait "$pid" || true
      [ -n "$line" ] && record sendnd "$run" "$line"
    done
  done
done

recv_modes="epoll"
[ "$uring_ok" = 1 ] && recv_modes="epoll uring"
lat_modes="epoll"
[ "$uring_ok" = 1 ] && lat_modes="epoll uring uring-nc"

# recv_pair KIND RUN MODE SIZE [-u]: a receiver of MODE on our CPU for DUR
# seconds, the cheapest sender on the other for a second more.
recv_pair() {
  local kind=$1 run=$2 m=$3 size=$4; shift 4
  rm -f "$out/port"
  $me "$bin" recv "$@" -C "$TCP_CC" -m "$m" -s "$size" -t "$DUR" -p "$out/port" 0 >"$out/me.txt" &
  pid=$!
  local port bsize=$size
  port=$(bench_port "$out/port")
  [ "$kind" = tcp ] && bsize=65536
  $peer "$bin" blast "$@" -C "$TCP_CC" -s "$bsize" -t "$(awk -v d="$DUR" 'BEGIN { print d + 1 }')" \
    127.0.0.1 "$port" >/dev/null &
  local bpid=$!
  wait "$pid" || true
  wait "$bpid" || true
  local line
  line=$(grep '^result' "$out/me.txt" || true)
  [ -n "$line" ] && record "$kind" "$run" "$line"
  return 0
}

want recv && echo "==> receive side: UDP sizes: $UDP_SIZES; UDP sockets: $UDP_SOCKS ($UDP_SOCKS_SIZE B); UDP rates: $UDP_RATES ($UDP_RATE_SIZE B); TCP buffers: $TCP_BUFS; delay at: $LAT_RATES ($LAT_SIZE B)" >&2
want recv && for run in $(seq 1 "$RUNS"); do
  for size in $UDP_SIZES; do
    for m in $recv_modes; do recv_pair udp "$run" "$m" "$size" -u; done
  done
  # Many sockets into one ring, the sender addressing them in turn.
  for n in $UDP_SOCKS; do
    for m in $recv_modes; do recv_pair udpn "$run" "$m" "$UDP_SOCKS_SIZE" -u -n "$n"; done
  done
  # A paced sender: the same evenly spaced arrivals for both receivers.
  # The fewer datagrams each wake-up finds, the more of the receiver's CPU
  # is the wake-up itself, which both paths pay alike.
  for rate in $UDP_RATES; do
    for m in $recv_modes; do recv_pair udpr "$run" "$m" "$UDP_RATE_SIZE" -u -r "$rate"; done
  done
  for size in $TCP_BUFS; do
    for m in $recv_modes; do recv_pair tcp "$run" "$m" "$size"; done
  done
  # Delay from send to callback (-L: the sender's timestamp in each
  # datagram), with and without completion coalescing (uring-nc), paced
  # and flooding (rate 0).
  for rate in $LAT_RATES; do
    rflag=()
    [ "$rate" != 0 ] && rflag=(-r "$rate")
    for m in $lat_modes; do recv_pair lat "$run" "$m" "$LAT_SIZE" -u -L "${rflag[@]}"; done
  done
done

want calib && echo "==> memcpy cost (what a zero-copy send saves)" >&2
want calib && for size in 16384 65536 262144 1048576; do
  record memcpy 1 "$($me "$bin" memcpy -s "$size" | grep '^result')"
done

# Zero copy where the kernel really keeps the pages: UDP from a network
# namespace over a veth pair to a peer namespace whose nftables input hook
# drops the datagrams (on the receiving side, so the sender never sees an
# error), which frees them without copying, as a NIC's transmit completion
# would.  Cold messages (64 MiB of buffers in turn), zc_min lowered to 1 so
# that every size goes zero-copy.  Names carry our pid; removed on exit.
calib_ns() {
  nsa=zbua$$ nsb=zbub$$
  trap 'ip netns del "$nsa" 2>/dev/null; ip netns del "$nsb" 2>/dev/null' EXIT INT TERM
  ip netns add "$nsa" && ip netns add "$nsb" &&
    ip -n "$nsa" link add "va$$" type veth peer name "vb$$" netns "$nsb" &&
    ip -n "$nsa" addr add 192.0.2.1/24 dev "va$$" && ip -n "$nsb" addr add 192.0.2.2/24 dev "vb$$" &&
    ip -n "$nsa" link set "va$$" mtu 65535 up && ip -n "$nsb" link set "vb$$" mtu 65535 up &&
    ip netns exec "$nsb" nft 'add table inet zbuf; add chain inet zbuf in { type filter hook input priority 0; }; add rule inet zbuf in udp dport 9 drop'
}
CALIB_SIZES=${CALIB_SIZES:-"4096 8192 16384 32768 65000"}
if want calib && [ "$uring_ok" = 1 ]; then
  if calib_ns 2>/dev/null; then
    echo "==> zero-copy threshold: veth to a dropping peer, sizes $CALIB_SIZES" >&2
    for run in $(seq 1 "$RUNS"); do
      for size in $CALIB_SIZES; do
        for m in uring uring-zc-always uring-zc-fixed-always; do
          line=$(ip netns exec "$nsa" $me "$bin" dsend -c -z 1 -m "$m" -s "$size" -t "$DUR" 192.0.2.2 9 |
                 grep '^result') || true
          [ -n "$line" ] && record dsend "$run" "$line"
        done
      done
    done
  else
    echo "==> zero-copy threshold skipped: cannot make network namespaces here (needs root)" >&2
  fi
fi

echo "==> tables (medians)" >&2
python3 "$root/adapters/uring/bench/uring_tables.py" "$res" | tee "$out/tables.md"
echo "raw results: $res; tables: $out/tables.md" >&2
