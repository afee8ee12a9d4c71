/* SPDX-License-Identifier: MIT */
/**
 * @file zbuf/alloc.h
 * @brief Pluggable memory allocator and the per-thread descriptor caches.
 *
 * Every byte libzbuf allocates (zbuf headers, segment descriptors, buffer
 * headers, copies, pool memory) comes from one process-wide allocator.  The
 * default is jemalloc used through its non-standard API, in an arena of its
 * own (`mallocx` / `sdallocx`), unless the library was built with
 * `-DZBUF_WITH_JEMALLOC=OFF`, in which case it is `malloc` / `free`.
 * Embedded users install their own with zbuf_set_allocator().
 *
 * zbuf and segment descriptors are recycled through small per-thread caches
 * so that dup, split, cut and delete do not reach the allocator on the hot
 * path.  A descriptor freed on another thread than the one that allocated it
 * simply joins the freeing thread's cache.
 */
#ifndef ZBUF_ALLOC_H
#define ZBUF_ALLOC_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief A memory allocator, as a pair of functions and a context pointer.
 *
 * `alloc(ctx, size)` returns memory aligned for any object type
 * (`max_align_t`) or NULL when out of memory; libzbuf turns NULL into
 * `-ENOMEM` for its caller.  `free(ctx, ptr, size)` receives the same `size`
 * that was passed to `alloc` for `ptr` (sized deallocation) and is never
 * called with NULL.  Both may be called from any thread, concurrently, and
 * must not call back into libzbuf.
 */
typedef struct zbuf_allocator {
    void *(*alloc)(void *ctx, size_t size);          /**< allocate @p size bytes */
    void (*free)(void *ctx, void *ptr, size_t size); /**< release a block */
    void *ctx;                                       /**< passed to both */
} zbuf_allocator_t;

/**
 * @brief Replace the process-wide allocator.
 *
 * Call it at start-up, before any zbuf, buffer or pool exists.  The calling
 * thread's descriptor cache is emptied through the previous allocator; other
 * threads drop theirs the next time they use the library.
 *
 * @param a  the new allocator (copied; the struct need not outlive the call),
 *           or NULL to restore the built-in default.
 * @return 0; `-EINVAL` if @p a lacks a function; `-EBUSY` if zbufs,
 *         segments, buffers or pools are still alive.
 */
ZBUF_EXPORT int zbuf_set_allocator(const zbuf_allocator_t *a);

/**
 * @brief Name of the built-in allocator this library was compiled with.
 * @return `"jemalloc"` or `"malloc"`; a static string.
 */
ZBUF_EXPORT const char *zbuf_default_allocator_name(void);

/**
 * @brief Empty the calling thread's caches: segment descriptors, zbuf
 *        headers (at most 256 of each) and small library buffers (at most
 *        64 blocks of 320 bytes, the header space made by
 *        zbuf_prepend_space()).
 *
 * Threads empty their caches automatically when they exit; call this to give
 * the memory back earlier (for example before a leak check).  A buffer goes
 * to the cache of the thread that drops its last reference.
 */
ZBUF_EXPORT void zbuf_thread_cache_flush(void);

#ifdef __cplusplus
}
#endif

#endif /* ZBUF_ALLOC_H */
