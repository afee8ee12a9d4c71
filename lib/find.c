/* SPDX-License-Identifier: MIT */
/*
 * Finding a byte without copying: memchr() run over each segment's memory
 * in turn, from a zbuf offset or from a cursor.  A file segment has no
 * memory; its bytes are read with pread() into a small stack window and
 * searched there.  Looking at bytes to find one is not a copy of data, so
 * nothing is added to zbuf_stats_t::bytes_copied either way (see the rule
 * in zbuf/stats.h).
 */
#include "internal.h"

/* Bytes of a file segment read per pread() while searching it. */
#define FILE_WINDOW 512

/* Search n bytes of segment s from byte `in` of it; *at receives the
 * offset of the match inside those n bytes.  0, -ENOENT or -EIO. */
static int find_in_seg(const struct zbuf_seg *s, size_t in, size_t n, uint8_t byte, size_t *at)
{
    if (s->buf->kind != ZBUF__BUF_FILE) {
        const uint8_t *p = zbuf__seg_ptr(s) + in;
        const uint8_t *hit = memchr(p, byte, n);
        if (hit == NULL)
            return -ENOENT;
        *at = (size_t)(hit - p);
        return 0;
    }
    uint8_t win[FILE_WINDOW];
    for (size_t done = 0; done < n;) {
        size_t k = n - done < sizeof win ? n - done : sizeof win;
        int rc = zbuf__buf_read(s->buf, s->off + in + done, win, k);
        if (rc != 0)
            return rc;
        const uint8_t *hit = memchr(win, byte, k);
        if (hit != NULL) {
            *at = done + (size_t)(hit - win);
            return 0;
        }
        done += k;
    }
    return -ENOENT;
}

/* Search len bytes from byte `in` of segment s on; *dist receives the
 * distance of the match from that first byte. */
static int find_from(const struct zbuf_seg *s, size_t in, size_t len, uint8_t byte,
                     size_t *dist)
{
    size_t walked = 0;
    for (; len > 0; s = s->next, in = 0) {
        size_t n = s->len - in < len ? s->len - in : len;
        size_t at;
        int rc = find_in_seg(s, in, n, byte, &at);
        if (rc == 0) {
            *dist = walked + at;
            return 0;
        }
        if (rc != -ENOENT)
            return rc;
        walked += n;
        len -= n;
    }
    return -ENOENT;
}

int zbuf_find(const zbuf_t *z, size_t off, size_t len, int byte, size_t *pos)
{
    if (!zbuf__valid(z) || pos == NULL || byte < 0 || byte > UINT8_MAX)
        return -EINVAL;
    if (off > z->len)
        return -ERANGE;
    if (len == ZBUF_TO_END)
        len = z->len - off;
    else if (len > z->len - off)
        return -ERANGE;
    if (len == 0)
        return -ENOENT;
    size_t in, dist;
    const struct zbuf_seg *s = zbuf_seg_find(z, off, &in);
    int rc = find_from(s, in, len, (uint8_t)byte, &dist);
    if (rc == 0)
        *pos = off + dist;
    return rc;
}

int zbuf_cursor_find(const zbuf_cursor_t *c, int byte, size_t max, size_t *dist)
{
    if (c == NULL || !zbuf__valid(c->z) || dist == NULL || byte < 0 || byte > UINT8_MAX)
        return -EINVAL;
    size_t left = c->z->len - c->pos;
    size_t len = max < left ? max : left; /* ZBUF_TO_END is the largest max */
    if (len == 0)
        return -ENOENT;
    /* The cursor's segment may be exhausted (it settles lazily): start at
     * the first segment that still has bytes. */
    const struct zbuf_seg *s = c->seg;
    size_t in = c->seg_off;
    while (s != NULL && in == s->len) {
        s = s->next;
        in = 0;
    }
    return s != NULL ? find_from(s, in, len, (uint8_t)byte, dist) : -ENOENT;
}
