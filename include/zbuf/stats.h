/**
 * @file zbuf/stats.h
 * @brief Process-wide counters: bytes copied, live objects.
 *
 * Tests and benchmarks use these to prove that a path copies nothing
 * (zbuf_stats_t::bytes_copied does not move) and that nothing leaks (the live
 * counters return to their starting values).  Counting is per thread and
 * costs no atomic read-modify-write; zbuf_stats_get() adds the threads up.
 */
#ifndef ZBUF_STATS_H
#define ZBUF_STATS_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A snapshot of the library's counters. */
typedef struct zbuf_stats {
    uint64_t bytes_copied; /**< bytes the library copied, ever (copy in, copy out,
                                pullup, unshare, adapters' bounce copies) */
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
