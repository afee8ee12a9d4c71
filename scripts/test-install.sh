#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installed means usable.  From a configured and built release directory:
#   1. install into PREFIX; every installed program and library resolves its
#      libraries with no LD_LIBRARY_PATH (relocatable run paths), and every
#      installed program starts;
#   2. every exported function has a man page that renders without warnings;
#   3. examples/consumer, built against PREFIX through find_package() and
#      through pkg-config, one program per library, runs with no
#      LD_LIBRARY_PATH;
#   4. Debian packages (cpack -G DEB, prefix /usr) unpack into a scratch root
#      and the consumer builds and runs against that root.
# Usage: scripts/test-install.sh BUILD_DIR PREFIX   (from the source root)
set -euo pipefail
build=$1 prefix=$2
root=$PWD
work=$root/build/install-test
rm -rf "$work" "$prefix"
mkdir -p "$work"

step() { echo "  -- $*"; }

run_all() { # dir: run every consumer program in it, with a clean loader path
  local n=0
  for p in "$1"/consumer*; do
    [ -x "$p" ] && [ -f "$p" ] || continue
    env -u LD_LIBRARY_PATH "$p" >/dev/null || { echo "test-install: $p failed" >&2; return 1; }
    n=$((n + 1))
  done
  [ $n -gt 1 ] || { echo "test-install: only $n consumer programs in $1" >&2; return 1; }
  step "$n consumer programs ran from $1"
}

# The build must have been configured for PREFIX (the pkg-config files record
# it); never install anywhere else, in particular not into /usr/local.
configured=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$build/CMakeCache.txt")
if [ "$(realpath -m "$configured")" != "$(realpath -m "$prefix")" ]; then
  echo "test-install: $build is configured for $configured, not $prefix" \
       "(configure it with -DCMAKE_INSTALL_PREFIX=$prefix)" >&2
  exit 1
fi
cmake --install "$build" --prefix "$prefix" >"$work/install.log"
step "installed into $prefix"

bad=0
while IFS= read -r f; do
  [ "$(head -c 4 "$f" | tail -c 3)" = ELF ] || continue
  if env -u LD_LIBRARY_PATH ldd "$f" | grep -q 'not found'; then
    echo "test-install: $f: $(env -u LD_LIBRARY_PATH ldd "$f" | grep 'not found')" >&2
    bad=1
  fi
done < <(find "$prefix/bin" "$prefix"/lib* -type f \( -perm -u+x -o -name '*.so*' \))
[ $bad -eq 0 ]
for p in "$prefix"/bin/*; do
  out=$(env -u LD_LIBRARY_PATH "$p" --help 2>&1 || true)
  if echo "$out" | grep -q 'error while loading shared libraries'; then
    echo "test-install: $p does not start: $out" >&2
    exit 1
  fi
done
step "installed programs and libraries find their libraries (no LD_LIBRARY_PATH)"

scripts/check-man.sh "$prefix"

# The installed headers ask nothing of a compiler beyond ISO C11 (a POSIX
# feature macro, as for <pthread.h> or <uv.h>) and also compile as C++11:
# every header, included at once, -pedantic-errors.
hdrs=$work/headers.c
while IFS= read -r h; do
  echo "#include <${h#"$prefix"/include/}>"
done < <(find "$prefix/include/zbuf" -name '*.h' | sort) >"$hdrs"
echo 'int main(void) { return 0; }' >>"$hdrs"
hflags=(-D_POSIX_C_SOURCE=200809L -pedantic-errors -Wall -Wextra -Werror -I"$prefix/include")
cc -std=c11 "${hflags[@]}" -c "$hdrs" -o "$work/headers.o"
cp "$hdrs" "$work/headers.cc"
c++ -std=c++11 "${hflags[@]}" -c "$work/headers.cc" -o "$work/headers-cxx.o"
step "$(grep -c include "$hdrs") installed headers compile as ISO C11 and as C++11 (-pedantic-errors)"

cmake -S examples/consumer -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" >"$work/consumer.log" 2>&1
cmake --build "$work/cmake" >>"$work/consumer.log" 2>&1
run_all "$work/cmake"
pcdir=$(dirname "$(find "$prefix" -name zbuf.pc | head -n1)")
PKG_CONFIG_PATH=$pcdir make -C examples/consumer OUT="$work/pc" >>"$work/consumer.log" 2>&1
run_all "$work/pc"

# Debian packages: a build for /usr, packed, unpacked into a scratch root.
cmake -S . -B "$work/deb" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr \
  -DZBUF_BUILD_TESTS=OFF -DZBUF_BUILD_BENCH=OFF -DZBUF_BUILD_EXAMPLES=OFF -DZBUF_WERROR=ON \
  >"$work/deb.log" 2>&1
cmake --build "$work/deb" -j"$(nproc)" >>"$work/deb.log" 2>&1
(cd "$work/deb" && cpack -G DEB >>"$work/deb.log" 2>&1)
debs=("$work"/deb/*.deb)
[ ${#debs[@]} -ge 3 ] || { echo "test-install: expected 3 packages, got ${debs[*]}" >&2; exit 1; }
sysroot=$work/debroot
for d in "${debs[@]}"; do dpkg-deb -x "$d" "$sysroot"; done
step "packages: $(cd "$work/deb" && ls *.deb | tr '\n' ' ')"
libdir=$(dirname "$(find "$sysroot" -name libzbuf.so.0 | head -n1)")
cmake -S examples/consumer -B "$work/deb-cmake" -DCMAKE_PREFIX_PATH="$sysroot/usr" \
  >>"$work/deb.log" 2>&1
cmake --build "$work/deb-cmake" >>"$work/deb.log" 2>&1
PKG_CONFIG_SYSROOT_DIR=$sysroot PKG_CONFIG_PATH=$libdir/pkgconfig \
  make -C examples/consumer OUT="$work/deb-pc" >>"$work/deb.log" 2>&1
for dir in "$work/deb-cmake" "$work/deb-pc"; do
  for p in "$dir"/consumer*; do
    [ -x "$p" ] && [ -f "$p" ] || continue
    LD_LIBRARY_PATH=$libdir "$p" >/dev/null || { echo "test-install: $p failed" >&2; exit 1; }
  done
done
step "consumer built and ran against the unpacked packages"
echo "install checks OK"
