#!/bin/sh
# SPDX-License-Identifier: MIT
# Run uv_pubsub_broker with small limits, point uv_pubsub_load at it (good
# publishers and subscribers, a slow subscriber, resetting subscribers,
# malformed and slowloris clients), then stop the broker with SIGTERM: it
# exits non-zero if any zbuf, segment, buffer or pool is still alive.
#   pubsub_load_test.sh BROKER LOAD [load client arguments...]
# PUBSUB_LOAD_ARGS replaces the default arguments of the load client, for a
# longer soak: PUBSUB_LOAD_ARGS="--msgs 5000 --subs 16 --timeout-ms 600000".
set -u
broker=$1
load=$2
shift 2
dir=$(mktemp -d)
bpid=
cleanup() {
  [ -n "$bpid" ] && kill -KILL "$bpid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT INT TERM

"$broker" --port 0 --port-file "$dir/port" --pool-bufs 256 --buf-size 16384 \
  --stream-limit 32 --max-frame 300000 --high-water 262144 --low-water 65536 \
  --slow-ms 3000 --partial-ms 1000 --sndbuf 32768 --stats-ms 2000 &
bpid=$!
i=0
while [ ! -s "$dir/port" ]; do
  i=$((i + 1))
  if [ $i -gt 600 ] || ! kill -0 "$bpid" 2>/dev/null; then
    echo "pubsub_load_test: the broker did not start" >&2
    exit 1
  fi
  sleep 0.05
done
port=$(cat "$dir/port")

# shellcheck disable=SC2086
"$load" --port "$port" ${PUBSUB_LOAD_ARGS:---pubs 2 --subs 4 --msgs 200 --slow 1 --resetters 2 --slowloris 3 --timeout-ms 120000} "$@"
lrc=$?

kill -TERM "$bpid"
wait "$bpid"
brc=$?
bpid=
echo "pubsub_load_test: load client exit $lrc, broker exit $brc" >&2
[ $lrc -eq 0 ] && [ $brc -eq 0 ]
