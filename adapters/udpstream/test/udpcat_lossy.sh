#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# zbuf-udpcat round-trips a file in a private network namespace where
# nftables drops 5 % of the datagrams at random on input (both ways, as
# they all cross lo).  Exit 77 (skip) without root, unshare or nftables.
# Usage: udpcat_lossy.sh path/to/zbuf-udpcat [MiB]
set -euo pipefail
tool=$1
mib=${2:-${ZBUF_UDPSTREAM_SOAK:+64}}
mib=${mib:-8}
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root for a network namespace"; exit 77; }
command -v nft >/dev/null || { echo "SKIP: nft (nftables) missing"; exit 77; }
unshare -n true 2>/dev/null || { echo "SKIP: unshare -n refused"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
head -c $((mib << 20)) /dev/urandom >"$dir/in"
# Everything below runs in the namespace, which goes away with its last
# process: nothing to clean up on any exit path.
unshare -n bash -s "$tool" "$dir" <<'INNER'
set -euo pipefail
tool=$1 dir=$2
ip link set lo up
nft -f - <<'NFT' || { echo "SKIP: nftables (CONFIG_NF_TABLES, numgen) not available"; exit 77; }
table inet zbus {
  chain input {
    type filter hook input priority 0; policy accept;
    udp dport 7411 numgen random mod 100 < 5 counter drop
    udp sport 7411 numgen random mod 100 < 5 counter drop
  }
}
NFT
timeout 200 "$tool" --stats -l 7411 >"$dir/out" 2>"$dir/rx.log" &
rx=$!
sleep 0.3
rc=0
timeout 200 "$tool" --stats 127.0.0.1 7411 <"$dir/in" 2>"$dir/tx.log" || rc=$?
wait $rx || rc=$((rc ? rc : 100 + $?))
cat "$dir/tx.log" "$dir/rx.log"
nft list table inet zbus | grep -o 'counter packets [0-9]*' | sed 's/^/dropped: /'
drops=$(nft list table inet zbus | grep -o 'counter packets [0-9]*' | awk '{s+=$3} END {print s}')
[ "$rc" -eq 0 ] || { echo "FAIL: exit status $rc"; exit 1; }
cmp "$dir/in" "$dir/out" || { echo "FAIL: output differs"; exit 1; }
[ "$drops" -gt 0 ] || { echo "FAIL: nftables dropped nothing"; exit 1; }
grep -q 'retransmissions [1-9]' "$dir/tx.log" || { echo "FAIL: no retransmission"; exit 1; }
echo "OK: $(stat -c %s "$dir/out") bytes byte-exact through 5 % loss each way"
INNER
