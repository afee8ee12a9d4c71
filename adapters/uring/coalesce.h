/* SPDX-License-Identifier: MIT */
#ifndef ZBUF_URING_COALESCE_H
#define ZBUF_URING_COALESCE_H

/*
 * Completion coalescing (ring.c; the tests use the same numbers), as a
 * network card moderates its interrupts.  When one wait found at least
 * ZU_COALESCE_MIN receive completions, the traffic is heavy enough that
 * more are coming: the next wait asks the kernel for as many again (at most
 * ZU_COALESCE_MAX, and no more than the buffer rings can still fill: a dry
 * ring ends its receives) and gives up after ZU_COALESCE_NS.  The kernel
 * then runs the receives of several wake-ups in one io_uring_enter()
 * instead of returning to the engine every few datagrams.
 *
 * Measured on a guest where every system call flushes the TLB
 * (docs/benchmarks.md, io_uring, runs 7 and 8): UDP datagrams of 64 B to
 * 16 KiB from a flooding sender took 1.3x to 2.1x less CPU per byte with
 * it.
 * ZU_COALESCE_MIN at 16 also turned it on at 200,000 evenly spaced 1 KiB
 * datagrams a second, after any stall, for 5 to 10 % less CPU and 4 to 5 us
 * more median delay (about 50 us more at the 99th percentile); at 32 that
 * rate no longer triggers it and the flood keeps most of the gain.  A 20 us
 * window kept less of the gain (64 B: 1.71x instead of 2.05x).
 */
#define ZU_COALESCE_MIN 32u
#define ZU_COALESCE_MAX 64u
#define ZU_COALESCE_NS 50000

#endif
