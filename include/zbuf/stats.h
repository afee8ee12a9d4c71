/* SPDX-License-Identifier: MIT */
/**
 * @file zbuf/stats.h
 * @brief Process-wide counters: bytes copied, live objects.
 *
 * Tests and benchmarks use these to prove that a path copies nothing
 * (zbuf_stats_t::bytes_copied does not move) and that nothing leaks (the live
 * counters return to their starting values).  Counting is per thread and
 * costs no atomic read-modify-write; zbuf_stats_get() adds the threads up.
 *
 * **What counts as a copied byte** (one rule, followed by every function of
 * the library and its adapters; see @ref concepts_copies):
 * - a byte the library writes, as a byte, into memory other than its own
 *   buffer: a caller's array (zbuf_copyout(), zbuf_cursor_read(),
 *   zbuf_peek() into its scratch area), a new or another buffer
 *   (zbuf_insert_copy(), zbuf_pullup(), zbuf_unshare(), zbuf_frame_append()
 *   of a small payload), an adapter's bounce copy; each such byte counts
 *   once, whatever its buffer (memory or file), and however the range
 *   falls on segments;
 * - not a byte that is only *decoded*: the cursor's integer reads
 *   (zbuf_cursor_read_u8() ... zbuf_cursor_read_le64()) turn 1 to 8 bytes
 *   into a value, which no zero-copy design can avoid reading, so they count
 *   nothing, even when the bytes straddle segments or lie in a file (and so
 *   does the frame decoder, which reads headers with them);
 * - not a byte only *looked at* where it is: zbuf_peek() and
 *   zbuf_cursor_peek() returning a pointer into the buffer, zbuf_find() and
 *   zbuf_cursor_find(), zbuf_iovec().
 *
 * So `bytes_copied` measures exactly the copies a zero-copy path avoids,
 * and a test comparing it before and after a path proves the path copied
 * no data.
 */
#ifndef ZBUF_STATS_H
#define ZBUF_STATS_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A snapshot of the library's counters. */
typedef struct zbuf_stats {
    uint64_t bytes_copied; /**< bytes the library copied, ever: written as bytes
                                into memory other than their buffer (copy in,
                                copy out, byte reads, pullup, unshare, adapters'
                                bounce copies); integer reads and in-place looks
                                are not copies (see the file comment) */
    uint64_t copies;       /**< copy operations counted in @c bytes_copied */
    int64_t live_zbufs;    /**< zbufs created and not yet deleted */
    int64_t live_segs;     /**< segments in existence */
    int64_t live_bufs;     /**< buffers not yet released (pool buffers count
                                while taken out of the pool) */
    int64_t live_pools;    /**< pools whose memory is not yet freed */
    uint64_t allocs;       /**< calls made to the allocator */
} zbuf_stats_t;

/**
 * @brief Add up every thread's counters.
 *
 * A consistent total once the threads that use the library are quiescent;
 * while they run, a close approximation.
 *
 * @param[out] st  filled in.
 */
ZBUF_EXPORT void zbuf_stats_get(zbuf_stats_t *st);

/**
 * @brief Count @p n bytes copied by code outside the core (adapters use it
 *        for their bounce copies, so that one counter covers every copy).
 */
ZBUF_EXPORT void zbuf_stats_count_copy(size_t n);

#ifdef __cplusplus
}
#endif

#endif /* ZBUF_STATS_H */
