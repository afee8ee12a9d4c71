/* SPDX-License-Identifier: MIT */
/*
 * Cursors: sequential reads across segment boundaries.  The common case, a
 * value wholly inside the current segment, is one bounds check and a load;
 * a value that straddles segments is gathered byte by byte into a small
 * local array first.  The copy rule of zbuf/stats.h: zbuf_cursor_read()
 * delivers bytes and counts them; integer reads decode values and count
 * nothing, even when they gather.
 */
#include "internal.h"

static void settle(zbuf_cursor_t *c)
{
    /* Move past exhausted segments so `seg` holds the next byte, or NULL. */
    while (c->seg && c->seg_off == c->seg->len) {
        c->seg = c->seg->next;
        c->seg_off = 0;
    }
}

int zbuf_cursor_init(zbuf_cursor_t *c, const zbuf_t *z, size_t off)
{
    if (c == NULL || !zbuf__valid(z))
        return -EINVAL;
    if (off > z->len)
        return -ERANGE;
    const zbuf_seg_t *s = zbuf_seg_find(z, off, &c->seg_off);
    c->z = z;
    c->seg = s;
    if (s == NULL)
        c->seg_off = 0;
    c->pos = off;
    return 0;
}

size_t zbuf_cursor_offset(const zbuf_cursor_t *c)
{
    return c ? c->pos : 0;
}

size_t zbuf_cursor_remaining(const zbuf_cursor_t *c)
{
    return c && c->z ? c->z->len - c->pos : 0;
}

/* Copy len bytes without counting (integer decoding) or with (bulk read). */
static int cursor_read(zbuf_cursor_t *c, void *dst, size_t len)
{
    if (c == NULL || c->z == NULL || (dst == NULL && len > 0))
        return -EINVAL;
    if (len > c->z->len - c->pos)
        return -ERANGE;
    zbuf_cursor_t t = *c;
    uint8_t *d = dst;
    size_t left = len;
    while (left > 0) {
        const struct zbuf_seg *s = t.seg;
        size_t n = s->len - t.seg_off;
        if (n > left)
            n = left;
        int rc = zbuf__buf_read(s->buf, s->off + t.seg_off, d, n);
        if (rc != 0)
            return rc;
        d += n;
        left -= n;
        t.seg_off += n;
        settle(&t);
    }
    t.pos += len;
    *c = t;
    return 0;
}

int zbuf_cursor_read(zbuf_cursor_t *c, void *dst, size_t len)
{
    int rc = cursor_read(c, dst, len);
    if (rc == 0)
        zbuf__count_copy(len);
    return rc;
}

int zbuf_cursor_skip(zbuf_cursor_t *c, size_t len)
{
    if (c == NULL || c->z == NULL)
        return -EINVAL;
    if (len > c->z->len - c->pos)
        return -ERANGE;
    size_t left = len;
    while (left > 0) {
        size_t n = c->seg->len - c->seg_off;
        if (n > left)
            n = left;
        c->seg_off += n;
        left -= n;
        settle(c);
    }
    c->pos += len;
    return 0;
}

const void *zbuf_cursor_peek(const zbuf_cursor_t *c, size_t len)
{
    if (c == NULL || c->z == NULL || c->seg == NULL || len > c->z->len - c->pos)
        return NULL;
    const struct zbuf_seg *s = c->seg;
    if (s->buf->kind == ZBUF__BUF_FILE || len > s->len - c->seg_off)
        return NULL;
    return zbuf__seg_ptr(s) + c->seg_off;
}

/* Fetch n <= 8 bytes for an integer: in place when contiguous. */
static int fetch(zbuf_cursor_t *c, uint8_t *tmp, size_t n, const uint8_t **p)
{
    if (c == NULL || c->z == NULL)
        return -EINVAL;
    const struct zbuf_seg *s = c->seg;
    if (s && s->buf->kind != ZBUF__BUF_FILE && n < s->len - c->seg_off) {
        /* strictly inside: no settle needed afterwards */
        *p = zbuf__seg_ptr(s) + c->seg_off;
        c->seg_off += n;
        c->pos += n;
        return 0;
    }
    int rc = cursor_read(c, tmp, n);
    *p = tmp;
    return rc;
}

/* Read an n-byte unsigned integer (n <= 8) in either byte order. */
static int read_uint(zbuf_cursor_t *c, size_t n, bool big_endian, uint64_t *v)
{
    uint8_t t[8];
    const uint8_t *p;
    int rc = fetch(c, t, n, &p);
    if (rc != 0)
        return rc;
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++)
        x = x << 8 | p[big_endian ? i : n - 1 - i];
    *v = x;
    return 0;
}

/* One public reader per width and order; each leaves *v untouched on error. */
#define CURSOR_READER(name, type, n, big)                                               \
    int zbuf_cursor_read_##name(zbuf_cursor_t *c, type *v)                              \
    {                                                                                   \
        uint64_t x;                                                                     \
        int rc = read_uint(c, n, big, &x);                                              \
        if (rc == 0)                                                                    \
            *v = (type)x;                                                               \
        return rc;                                                                      \
    }

CURSOR_READER(u8, uint8_t, 1, true)
CURSOR_READER(be16, uint16_t, 2, true)
CURSOR_READER(le16, uint16_t, 2, false)
CURSOR_READER(be32, uint32_t, 4, true)
CURSOR_READER(le32, uint32_t, 4, false)
CURSOR_READER(be64, uint64_t, 8, true)
CURSOR_READER(le64, uint64_t, 8, false)
