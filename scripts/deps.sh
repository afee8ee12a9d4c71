#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Install the Debian 12 packages libzbuf needs to build, test, benchmark and
# document itself, if any is missing.  Run as root (CI and the README do).
set -euo pipefail

pkgs=(cmake make gcc g++ clang pkg-config libclang-rt-14-dev
      libjemalloc-dev libcriterion-dev libuv1-dev liburing-dev
      libevent-dev liblwip-dev libenet-dev doxygen graphviz gnuplot-nox
      iproute2 iputils-ping nftables procps util-linux python3 python3-scapy
      groff-base man-db valgrind)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "deps: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    echo "deps: need root to install packages" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
