/* SPDX-License-Identifier: MIT */
/*
 * Private helpers shared by the files of the libuv adapter.  Nothing here is
 * installed; names are zbuf_uv__ and hidden.
 */
#ifndef ZBUF_UV_INTERNAL_H
#define ZBUF_UV_INTERNAL_H

#include <assert.h>
#include <limits.h>
#include <stddef.h>
#include <sys/uio.h>

#include <zbuf/uv.h>

#define ZBUF_UV__HIDDEN __attribute__((visibility("hidden")))

#define ZBUF_UV__CONTAINER_OF(ptr, type, member) \
    ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* On Unix a uv_buf_t is laid out like a struct iovec (libuv promises it), so
 * zbuf_iovec() can fill an array of uv_buf_t directly. */
static_assert(sizeof(uv_buf_t) == sizeof(struct iovec), "uv_buf_t is an iovec");
static_assert(offsetof(uv_buf_t, base) == offsetof(struct iovec, iov_base), "uv_buf_t.base");
static_assert(offsetof(uv_buf_t, len) == offsetof(struct iovec, iov_len), "uv_buf_t.len");

static inline struct iovec *zbuf_uv__iov(uv_buf_t *b)
{
    return (struct iovec *)(void *)b;
}

/* A uv_buf_t's length is an unsigned int: lend at most that much. */
static inline uv_buf_t zbuf_uv__lend(void *base, size_t len)
{
    return uv_buf_init(base, len > UINT_MAX ? UINT_MAX : (unsigned)len);
}

/* The registry of readers (uv_read.c): a stream or UDP handle whose pool
 * ran dry, or whose quota is full, registers here and is resumed, on its
 * loop's thread, when a buffer comes back; a stream keeping a buffer for
 * its next read registers as a holder, so that a reader finding the pool
 * dry can make it give back a buffer nobody uses.  All calls on the loop
 * thread of the handle. */
typedef struct zbuf_uv_wait_ zbuf_uv__wait_t;
typedef void (*zbuf_uv__resume_fn)(zbuf_uv__wait_t *w, zbuf_buf_t *b);
typedef void (*zbuf_uv__reclaim_fn)(zbuf_uv__wait_t *w);

/* Set up w (its uv_async_t, left unreferenced) on loop; resume(w, b) will
 * restart reading, b being a buffer just taken from the pool (through
 * w->quota when set) for it, its reference passing to resume; reclaim(w),
 * which may be NULL, gives back a kept buffer nobody uses.  Once this
 * succeeded the owner must call zbuf_uv__wait_stop(), drop any holding, and
 * then uv_close() w->async before it goes away.  Returns 0 or an error of
 * uv_async_init(). */
ZBUF_UV__HIDDEN int zbuf_uv__wait_init(zbuf_uv__wait_t *w, uv_loop_t *loop,
                                       zbuf_uv__resume_fn resume, zbuf_uv__reclaim_fn reclaim);
/* Wait for a buffer of pool (reading must be stopped in libuv already),
 * and ask the pool's holders to give back the buffers nobody uses.
 * Returns 0; -ENOMEM; -EINVAL (the pool was deleted); -ENOSPC (the pool has
 * all the watchers it takes). */
ZBUF_UV__HIDDEN int zbuf_uv__wait_start(zbuf_uv__wait_t *w, zbuf_pool_t *pool);
/* Wait for room in w->quota (its limit was reached). */
ZBUF_UV__HIDDEN void zbuf_uv__wait_quota(zbuf_uv__wait_t *w);
/* The quota callback of a reader: arg is its zbuf_uv__wait_t. */
ZBUF_UV__HIDDEN void zbuf_uv__quota_room(zbuf_pool_quota_t *q, void *arg);
/* Stop waiting (a no-op when w does not wait); after it no resume comes. */
ZBUF_UV__HIDDEN void zbuf_uv__wait_stop(zbuf_uv__wait_t *w);
/* Register w as keeping a buffer of pool for its next read, or (pool NULL)
 * as keeping none.  Best effort: without memory the holding is not
 * registered and only the reader itself can give it back. */
ZBUF_UV__HIDDEN void zbuf_uv__hold(zbuf_uv__wait_t *w, zbuf_pool_t *pool);

/* ------------------------------------------------ per-loop accounting */

/* A pending zbuf_uv_stream_write(), linked in its loop's list. */
struct zbuf_uv__wlink {
    struct zbuf_uv__wlink *prev, *next;
    const zbuf_t *z;   /* the bytes still to write */
    size_t bytes;      /* counted in the loop's write_bytes */
};

/* What the adapter knows of one loop: its streams (those that used a call
 * needing it, from then until zbuf_uv_close()) and their pending stream
 * writes.  Found through each stream's loop_ pointer; the registry of them
 * (uv_loop.c) is only searched when a stream attaches and by
 * zbuf_uv_stats().  Everything but `refs` and `next` belongs to the loop's
 * thread. */
struct zbuf_uv_loop_ {
    uv_loop_t *loop;
    unsigned refs;                 /* attached streams whose close has not completed */
    struct zbuf_uv_loop_ *next;    /* the registry, under its lock */
    zbuf_uv_stream_t *streams;     /* attached and not closing, through lnext_ */
    struct zbuf_uv__wlink writes;  /* ring of pending stream writes; this is its head */
    size_t nwrites, write_bytes;
};

/* Attach zs to its loop's record (once; later calls return 0 at once).
 * Returns 0 or -ENOMEM. */
ZBUF_UV__HIDDEN int zbuf_uv__attach(zbuf_uv_stream_t *zs);
/* zbuf_uv_close() began: zs is no longer counted. */
ZBUF_UV__HIDDEN void zbuf_uv__detach(zbuf_uv_stream_t *zs);
/* The close of zs completed (its writes too): let go of the record. */
ZBUF_UV__HIDDEN void zbuf_uv__release(zbuf_uv_stream_t *zs);
/* Add the read figures of zs to st (uv_read.c). */
ZBUF_UV__HIDDEN void zbuf_uv__read_stats(const zbuf_uv_stream_t *zs, zbuf_uv_stats_t *st);
/* Add the memory pinned by the loop's pending stream writes to st
 * (uv_write.c).  0 or -ENOMEM. */
ZBUF_UV__HIDDEN int zbuf_uv__write_mem(const struct zbuf_uv_loop_ *l, zbuf_uv_stats_t *st);

/* Flags of zbuf_uv_stream_t.flags_ that uv_write.c shares with uv_read.c
 * (which defines the others). */
#define ZBUF_UV__ST_INITED (1u << 0)  /* zbuf_uv_stream_init() ran */
#define ZBUF_UV__ST_CLOSING (1u << 4) /* zbuf_uv_close() was called */
#define ZBUF_UV__ST_FULL (1u << 5)    /* the write queue passed the high-water mark */

/* Whether the zbuf holds a file segment (O(segments)). */
ZBUF_UV__HIDDEN bool zbuf_uv__has_file(const zbuf_t *z);

#endif /* ZBUF_UV_INTERNAL_H */
