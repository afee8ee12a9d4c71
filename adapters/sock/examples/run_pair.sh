#!/bin/sh
# Run a blaster against a blastee on loopback for about a second in every
# mode and check that each side moved bytes.  Used by ctest.
#   run_pair.sh modern|vxworks BLASTER BLASTEE
set -eu
kind=$1 blaster=$2 blastee=$3
port=$(( 20000 + $$ % 20000 ))
fail=0
if [ "$kind" = modern ]; then
  for mode in copy zbuf zerocopy zc-always gather4 memcpy4 file; do
    for rmode in copy zbuf discard; do
      port=$((port + 1))
      out=$(mktemp)
      "$blastee" -q -m "$rmode" -s 65536 "$port" >"$out" &
      pid=$!
      res=$("$blaster" -q -m "$mode" -s 65536 -t 0.2 127.0.0.1 "$port")
      wait "$pid"
      sent=$(echo "$res" | sed -n 's/.*bytes=\([0-9]*\).*/\1/p')
      got=$(sed -n 's/.*bytes=\([0-9]*\).*/\1/p' "$out")
      rm -f "$out"
      if [ -z "$sent" ] || [ "$sent" -eq 0 ] || [ "$sent" != "$got" ]; then
        echo "FAIL $mode -> $rmode: sent '$sent' received '$got'"; fail=1
      else
        echo "ok   $mode -> $rmode: $sent bytes"
      fi
    done
  done
  # The file transfer mode, both ways.
  f=$(mktemp)
  head -c 3000000 /dev/urandom >"$f"
  for mode in readsend zfile zfile-sendfile zfile-mmap; do
    port=$((port + 1))
    out=$(mktemp)
    "$blastee" -q -m discard "$port" >"$out" &
    pid=$!
    res=$("$blaster" -q -f "$f" -m "$mode" 127.0.0.1 "$port")
    wait "$pid"
    got=$(sed -n 's/.*bytes=\([0-9]*\).*/\1/p' "$out")
    rm -f "$out"
    if [ "$got" != 3000000 ]; then echo "FAIL file $mode: $got"; fail=1; else echo "ok   file $mode"; fi
  done
  rm -f "$f"
else
  for z in 0 1; do
    port=$((port + 1))
    out=$(mktemp)
    "$blastee" "$port" 16384 49152 "$z" >"$out" &
    pid=$!
    sleep 0.2
    "$blaster" 127.0.0.1 "$port" 16384 49152 "$z" 1 >/dev/null
    wait "$pid"
    total=$(sed -n 's/blastee exit: \([0-9]*\) bytes/\1/p' "$out")
    rm -f "$out"
    if [ -z "$total" ] || [ "$total" -eq 0 ]; then echo "FAIL tcpBlast zbuf=$z"; fail=1
    else echo "ok   tcpBlast zbuf=$z: $total bytes"; fi
  done
fi
exit $fail
