/* SPDX-License-Identifier: MIT */
#ifndef ZBUF_URING_RING_HOT_H
#define ZBUF_URING_RING_HOT_H

#include <stddef.h>
#include <unistd.h>

/*
 * The most bytes of buffers a receive ring holds per receiving socket
 * (ring.c, unless its ZU_RING_FEW buffers are more; the tests check the
 * bound with this same function): what the core's own cache (L2) keeps
 * while the kernel copies into them, as the C library reports it, within
 * ZU_RING_HOT_MIN..ZU_RING_HOT_MAX (ZU_RING_HOT_DEFAULT where it does not
 * say).  A deeper ring receives more per completion, but into buffers that
 * left the cache, and the copy then costs several times as much (measured
 * for 16 KiB TCP buffers: a ring grown to 300 buffers copied at a quarter
 * of the speed).  A shallower one runs dry at every completion of a busy
 * stream (a bundle takes every buffer the ring has), and each time costs a
 * re-armed receive and one more io_uring_enter(), whose bytes wait in the
 * socket meanwhile.  On a core with 1 MiB of L2, TCP receives with a
 * 1 MiB bound took 1.23x to 1.46x less CPU per byte than with 256 KiB,
 * and 4 MiB was worse again (docs/benchmarks.md, io_uring).
 */
#define ZU_RING_HOT_MIN (256u << 10)
#define ZU_RING_HOT_MAX (4u << 20)
#define ZU_RING_HOT_DEFAULT (1u << 20)

static inline size_t zu_ring_hot_bytes(void)
{
    long l2 = -1;
#ifdef _SC_LEVEL2_CACHE_SIZE
    l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
    size_t v = l2 > 0 ? (size_t)l2 : ZU_RING_HOT_DEFAULT;
    return v < ZU_RING_HOT_MIN ? ZU_RING_HOT_MIN : v > ZU_RING_HOT_MAX ? ZU_RING_HOT_MAX : v;
}

#endif
