/*
 * Buffers: creation in each of the four kinds, reference counting, release.
 *
 * A HEAP buffer is one allocation: the header, padded to 64 bytes so the
 * data that follows is cache-line aligned, then the bytes.  USER and FILE
 * buffers are a bare header pointing at the caller's memory or file range;
 * their release runs the caller's callback.  POOL headers live inside their
 * pool and go back to it.
 */
#include <unistd.h>

#include "internal.h"

#define HEAP_HDR 64
_Static_assert(sizeof(struct zbuf_buf) <= HEAP_HDR, "buffer header must fit its padding");

struct zbuf_buf *zbuf__buf_new_heap(size_t size)
{
    if (size > SIZE_MAX - HEAP_HDR)
        return NULL;
    struct zbuf_buf *b = zbuf__alloc(HEAP_HDR + size);
    if (b == NULL)
        return NULL;
    atomic_init(&b->refs, 1);
    b->kind = ZBUF__BUF_HEAP;
    b->base = (uint8_t *)b + HEAP_HDR;
    b->size = size;
    ZBUF__COUNT(bufs, 1);
    return b;
}

static struct zbuf_buf *new_user(uint8_t kind, void *data, size_t size, zbuf_release_cb cb,
                                 void *arg)
{
    struct zbuf_buf *b = zbuf__alloc(sizeof *b);
    if (b == NULL)
        return NULL;
    atomic_init(&b->refs, 1);
    b->kind = kind;
    b->base = data;
    b->size = size;
    b->u.user.cb = cb;
    b->u.user.arg = arg;
    b->u.user.fd = -1;
    b->u.user.foff = 0;
    ZBUF__COUNT(bufs, 1);
    return b;
}

/* Called when the last reference is gone. */
void zbuf__buf_release(struct zbuf_buf *b)
{
    ZBUF__COUNT(bufs, -1);
    switch (b->kind) {
    case ZBUF__BUF_HEAP:
        zbuf__free(b, HEAP_HDR + b->size);
        break;
    case ZBUF__BUF_POOL:
        zbuf__pool_put(b);
        break;
    default: {
        /* Free our header first: the callback may re-enter the library. */
        zbuf_release_cb cb = b->u.user.cb;
        void *arg = b->u.user.arg, *data = b->base;
        size_t size = b->size;
        zbuf__free(b, sizeof *b);
        if (cb)
            cb(data, size, arg);
        break;
    }
    }
}

struct zbuf_buf *zbuf__buf_new_user(void *data, size_t size, zbuf_release_cb cb, void *arg)
{
    return new_user(ZBUF__BUF_USER, data, size, cb, arg);
}

int zbuf_buf_alloc(size_t size, zbuf_buf_t **out)
{
    if (size == 0 || out == NULL)
        return -EINVAL;
    struct zbuf_buf *b = zbuf__buf_new_heap(size);
    if (b == NULL)
        return -ENOMEM;
    *out = b;
    return 0;
}

int zbuf_buf_wrap(void *data, size_t size, zbuf_release_cb cb, void *arg, zbuf_buf_t **out)
{
    if (data == NULL || size == 0 || out == NULL)
        return -EINVAL;
    struct zbuf_buf *b = new_user(ZBUF__BUF_USER, data, size, cb, arg);
    if (b == NULL)
        return -ENOMEM;
    *out = b;
    return 0;
}

int zbuf_buf_wrap_file(int fd, off_t offset, size_t size, zbuf_release_cb cb, void *arg,
                       zbuf_buf_t **out)
{
    if (fd < 0 || offset < 0 || size == 0 || out == NULL)
        return -EINVAL;
    struct zbuf_buf *b = new_user(ZBUF__BUF_FILE, NULL, size, cb, arg);
    if (b == NULL)
        return -ENOMEM;
    b->u.user.fd = fd;
    b->u.user.foff = offset;
    *out = b;
    return 0;
}

zbuf_buf_t *zbuf_buf_ref(zbuf_buf_t *b)
{
    if (b)
        zbuf__buf_get(b);
    return b;
}

void zbuf_buf_unref(zbuf_buf_t *b)
{
    if (b)
        zbuf__buf_put(b);
}

void *zbuf_buf_data(const zbuf_buf_t *b)
{
    return b ? b->base : NULL;
}

size_t zbuf_buf_size(const zbuf_buf_t *b)
{
    return b ? b->size : 0;
}

unsigned zbuf_buf_refs(const zbuf_buf_t *b)
{
    return b ? atomic_load_explicit(&((zbuf_buf_t *)b)->refs, memory_order_relaxed) : 0;
}

bool zbuf_buf_writable(const zbuf_buf_t *b)
{
    return b && zbuf__buf_is_private(b);
}

bool zbuf_buf_file(const zbuf_buf_t *b, int *fd, off_t *offset)
{
    if (b == NULL || b->kind != ZBUF__BUF_FILE)
        return false;
    if (fd)
        *fd = b->u.user.fd;
    if (offset)
        *offset = b->u.user.foff;
    return true;
}

int zbuf__buf_read(const struct zbuf_buf *b, size_t boff, void *dst, size_t len)
{
    if (b->kind != ZBUF__BUF_FILE) {
        memcpy(dst, b->base + boff, len);
        return 0;
    }
    uint8_t *p = dst;
    off_t where = b->u.user.foff + (off_t)boff;
    while (len > 0) {
        ssize_t n = pread(b->u.user.fd, p, len, where);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -EIO; /* error, or the file shrank under us */
        p += n;
        where += n;
        len -= (size_t)n;
    }
    return 0;
}
