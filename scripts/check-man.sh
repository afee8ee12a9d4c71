#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Check the installed man pages: every function a libzbuf library exports has
# a page in PREFIX's share/man/man3, and every page renders without a warning
# (groff -ww, as `man --warnings` would run it).
# Usage: scripts/check-man.sh PREFIX
set -euo pipefail
prefix=$1
mandir=$prefix/share/man
[ -d "$mandir/man3" ] || { echo "check-man: no $mandir/man3" >&2; exit 1; }
missing=0 bad=0 pages=0
for lib in $(find "$prefix" -name 'libzbuf*.so' -type f -o -name 'libzbuf*.so' -type l | sort -u); do
  for sym in $(nm -D --defined-only "$lib" | awk '$2 == "T" { sub(/@.*/, "", $3); print $3 }'); do
    if [ ! -f "$mandir/man3/$sym.3" ]; then
      echo "check-man: $sym (exported by $(basename "$lib")) has no page" >&2
      missing=$((missing + 1))
    fi
  done
done
for page in "$mandir"/man3/*.3 "$mandir"/man7/*.7; do
  pages=$((pages + 1))
  out=$(groff -man -ww -z -Tutf8 "$page" 2>&1) || true
  if [ -n "$out" ]; then
    echo "check-man: $page: $out" >&2
    bad=$((bad + 1))
  fi
done
# man(1) itself must find a page by name.
MANPATH=$mandir man -w zbuf_dup >/dev/null
echo "check-man: $pages pages, $missing exported functions without a page, $bad pages with warnings"
[ $missing -eq 0 ] && [ $bad -eq 0 ]
