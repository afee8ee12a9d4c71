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

/* Waiting for pool buffers (uv_read.c): a stream or UDP handle whose pool
 * ran dry registers here and is resumed, on its loop's thread, when the
 * pool has a buffer again.  All calls on the loop thread of the handle. */
typedef struct zbuf_uv_wait_ zbuf_uv__wait_t;
typedef void (*zbuf_uv__resume_fn)(zbuf_uv__wait_t *w, zbuf_buf_t *b);

/* Set up w (its uv_async_t, left unreferenced) on loop; resume(w, b) will
 * restart reading, b being a buffer just taken from the pool for it (its
 * reference passes to resume).  Once this succeeded the owner must call
 * zbuf_uv__wait_stop() and then uv_close() w->async before it goes away.
 * Returns 0 or an error of uv_async_init(). */
ZBUF_UV__HIDDEN int zbuf_uv__wait_init(zbuf_uv__wait_t *w, uv_loop_t *loop,
                                       zbuf_uv__resume_fn resume);
/* Wait for a buffer of pool (reading must be stopped in libuv already).
 * Returns 0; -ENOMEM; -EINVAL (the pool was deleted). */
ZBUF_UV__HIDDEN int zbuf_uv__wait_start(zbuf_uv__wait_t *w, zbuf_pool_t *pool);
/* Stop waiting (a no-op when w does not wait); after it no resume comes. */
ZBUF_UV__HIDDEN void zbuf_uv__wait_stop(zbuf_uv__wait_t *w);

/* Whether the zbuf holds a file segment (O(segments)). */
ZBUF_UV__HIDDEN bool zbuf_uv__has_file(const zbuf_t *z);

#endif /* ZBUF_UV_INTERNAL_H */
