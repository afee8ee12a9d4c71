# SPDX-License-Identifier: MIT
# Every option of the build, in one place (included first by the top-level
# CMakeLists.txt).  A component whose option is ON but whose dependency is
# missing (libuv, liburing, a kernel header) says so at configure time and
# is left out; the components that need it are left out with it.

# The core.
option(ZBUF_WITH_JEMALLOC "Default allocator is jemalloc (mallocx/sdallocx in a dedicated arena)" ON)
option(ZBUF_DEBUG "Run the chain checker after every modifying call and keep internal assertions" OFF)

# The adapters and components (adapters/<name>).
option(ZBUF_WITH_SOCK "Build the Linux socket adapter (zbuf-sock)" ON)
option(ZBUF_WITH_VXWORKS "Build the VxWorks compatibility component (zbuf-vxworks; needs zbuf-sock)" ON)
option(ZBUF_WITH_URING "Build the io_uring engine (zbuf-uring; needs zbuf-sock and liburing)" ON)
option(ZBUF_WITH_UV "Build the libuv adapter (zbuf-uv) and the libuv drivers of the stack, zbuf-uring and zbuf-udpstream" ON)
option(ZBUF_WITH_PACKET "Build the packet-ring adapter (zbuf-packet)" ON)
option(ZBUF_WITH_STACK "Build the zbuf TCP/IP stack (zbuf-stack)" ON)
option(ZBUF_WITH_UDPSTREAM "Build the UDP byte streams (zbuf-udpstream; needs zbuf-sock)" ON)

# What is built besides the libraries.
option(ZBUF_BUILD_TESTS "Build the Criterion test suite" ON)
option(ZBUF_BUILD_EXAMPLES "Build the examples" ON)
option(ZBUF_BUILD_BENCH "Build the benchmark programs" ON)
option(ZBUF_BUILD_DOCS "Add the Doxygen 'docs' target" ON)
option(ZBUF_DOCS_STRICT "docs: also fail when a function documents only some of its parameters" OFF)

# Checking.
option(ZBUF_WERROR "Treat warnings as errors" OFF)
set(ZBUF_SANITIZE "" CACHE STRING "Sanitizers for every target: '', 'address,undefined' or 'thread'")
option(ZBUF_FUZZ "Build libFuzzer harnesses and their bounded CTest runs (clang only)" OFF)
set(ZBUF_STACK_FUZZ_SECONDS 30 CACHE STRING "Seconds each stack fuzz test runs in CTest")
set(ZBUF_UDPSTREAM_FUZZ_SECONDS 30 CACHE STRING "Seconds the udpstream fuzz test runs in CTest")
