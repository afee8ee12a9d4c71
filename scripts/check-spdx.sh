#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Every tracked source, build and script file names its license in an SPDX
# line (LICENSE holds the text).  Usage: scripts/check-spdx.sh (from anywhere).
set -euo pipefail
cd "$(dirname "$0")/.."
missing=$(git ls-files -- '*.c' '*.h' '*.map' '*.sh' '*.py' '*.cmake' '*.in' 'CMakeLists.txt' \
            '*/CMakeLists.txt' '*Makefile' '.ci/run' |
          while IFS= read -r f; do
            grep -q 'SPDX-License-Identifier: MIT' "$f" || echo "$f"
          done)
if [ -n "$missing" ]; then
  echo "check-spdx: no SPDX line in:" >&2
  echo "$missing" >&2
  exit 1
fi
echo "check-spdx: $(git ls-files -- '*.c' '*.h' | wc -l) C files and every script and build file carry an SPDX line"
