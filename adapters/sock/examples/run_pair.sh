#!/bin/sh
# SPDX-License-Identifier: MIT
# Run a blaster against a blastee on loopback for a moment in every mode and
# check that each side moved the same bytes.  Used by ctest.
#   run_pair.sh modern|vxworks BLASTER BLASTEE
set -eu
kind=$1 blaster=$2 blastee=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0

# modern_pair BLASTEE-ARGS -- BLASTER-ARGS: prints "sent received".
modern_pair() {
  rm -f "$dir/port"
  ee_args=""
  while [ "$1" != -- ]; do ee_args="$ee_args $1"; shift; done
  shift
  # shellcheck disable=SC2086
  "$blastee" -q -p "$dir/port" $ee_args 0 >"$dir/ee" &
  pid=$!
  i=0
  while [ ! -s "$dir/port" ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i + 1)); done
  res=$("$blaster" -q "$@" 127.0.0.1 "$(cat "$dir/port")") || res=""
  wait "$pid" || true
  sent=$(echo "$res" | sed -n 's/.*bytes=\([0-9]*\).*/\1/p')
  got=$(sed -n 's/.*bytes=\([0-9]*\).*/\1/p' "$dir/ee")
  echo "${sent:-0} ${got:-none}"
}

if [ "$kind" = modern ]; then
  for mode in copy zbuf zerocopy zc-always gather4 memcpy4 file; do
    for rmode in copy zbuf discard; do
      set -- $(modern_pair -m "$rmode" -s 65536 -- -m "$mode" -s 65536 -t 0.2)
      if [ "$1" -eq 0 ] || [ "$1" != "$2" ]; then
        echo "FAIL $mode -> $rmode: sent $1 received $2"; fail=1
      else
        echo "ok   $mode -> $rmode: $1 bytes"
      fi
    done
  done
  head -c 3000000 /dev/urandom >"$dir/file"
  for mode in readsend zfile zfile-sendfile zfile-mmap; do
    set -- $(modern_pair -m discard -- -f "$dir/file" -m "$mode")
    if [ "$2" != 3000000 ]; then echo "FAIL file $mode: $2"; fail=1; else echo "ok   file $mode"; fi
  done
  # -C: the benchmarks pin the congestion control (Reno is always built in).
  set -- $(modern_pair -m discard -C reno -- -f "$dir/file" -m zfile -C reno)
  if [ "$2" != 3000000 ]; then echo "FAIL file with -C reno: $2"; fail=1; else echo "ok   -C reno"; fi
  if "$blaster" -q -C no-such-cc -f "$dir/file" -m zfile 127.0.0.1 9 2>"$dir/err"; then
    echo "FAIL -C no-such-cc was accepted"; fail=1
  elif ! grep -q "congestion control no-such-cc" "$dir/err"; then
    echo "FAIL -C no-such-cc: $(cat "$dir/err")"; fail=1
  else
    echo "ok   -C no-such-cc refused"
  fi
else
  for z in 0 1; do
    total=""
    for try in 1 2 3 4 5; do
      port=$(( 20000 + ($$ * 7 + try * 131 + z) % 40000 ))
      "$blastee" "$port" 16384 49152 "$z" >"$dir/ee" &
      pid=$!
      sleep 0.2
      if kill -0 "$pid" 2>/dev/null; then
        "$blaster" 127.0.0.1 "$port" 16384 49152 "$z" 1 >/dev/null || true
        wait "$pid" || true
        total=$(sed -n 's/blastee exit: \([0-9]*\) bytes/\1/p' "$dir/ee")
        break
      fi
      wait "$pid" || true # the port was taken: try another
    done
    if [ -z "$total" ] || [ "$total" -eq 0 ]; then echo "FAIL tcpBlast zbuf=$z"; fail=1
    else echo "ok   tcpBlast zbuf=$z: $total bytes"; fi
  done
fi
exit $fail
