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

/* Polling period of the pool while reading is paused for want of buffers:
 * the pool has no "buffer returned" notification, and buffers may come back
 * on any thread, so a short timer is the one wake-up that always works. */
#define ZBUF_UV__RESUME_MS 1

/* Whether z is a live zbuf handle, in O(1) (zbuf_check() would walk it). */
static inline bool zbuf_uv__live(const zbuf_t *z)
{
    size_t abs;
    return zbuf_locate(z, NULL, ZBUF_REL_BEGIN, &abs) == 0;
}

/* Whether the zbuf holds a file segment (O(segments)). */
ZBUF_UV__HIDDEN bool zbuf_uv__has_file(const zbuf_t *z);

#endif /* ZBUF_UV_INTERNAL_H */
