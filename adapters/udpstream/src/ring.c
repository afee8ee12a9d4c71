/*
 * The copying mode's rings (see internal.h).  A chunk is reused only when
 * its reference count is back to the ring's own reference: a slice still
 * queued, in flight in a transport, or held by a reader keeps its chunk
 * out of the circle's reuse, and the ring grows instead.  The rings'
 * growth is bounded by the callers (the send queue's byte limit, the
 * receive window).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void zbuf__us_ring_init(struct zus_ring *r, size_t chunk_size)
{
    *r = (struct zus_ring){.chunk_size = chunk_size};
}

void zbuf__us_ring_free(struct zus_ring *r)
{
    for (uint32_t i = 0; i < r->n; i++)
        zbuf_buf_unref(r->chunks[i]);
    free(r->chunks);
    zbuf__us_ring_init(r, r->chunk_size);
}

/* Make the current chunk one with at least @len bytes free. */
static int ring_room(struct zus_ring *r, size_t len)
{
    if (r->n > 0 && r->chunk_size - r->pos >= len)
        return 0;
    if (r->n > 0) {
        uint32_t next = (r->cur + 1) % r->n;
        if (zbuf_buf_refs(r->chunks[next]) == 1) {
            r->cur = next;
            r->pos = 0;
            return 0;
        }
    }
    if (r->n == r->cap) {
        uint32_t cap = r->cap ? r->cap * 2 : 4;
        zbuf_buf_t **c = realloc(r->chunks, cap * sizeof *c);
        if (c == NULL)
            return -ENOMEM;
        r->chunks = c;
        r->cap = cap;
    }
    zbuf_buf_t *b;
    int rc = zbuf_buf_alloc(r->chunk_size, &b);
    if (rc < 0)
        return rc;
    /* The new chunk goes after the current one, so the circle's order is
     * the order of filling. */
    uint32_t at = r->n ? r->cur + 1 : 0;
    memmove(r->chunks + at + 1, r->chunks + at, (r->n - at) * sizeof *r->chunks);
    r->chunks[at] = b;
    r->n++;
    r->cur = at;
    r->pos = 0;
    return 0;
}

/* Append one slice of the current chunk, @len bytes, filled by @fill. */
static int ring_slice(struct zus_ring *r, zbuf_t *z, size_t len, uint8_t **where)
{
    size_t want = len < r->chunk_size ? len : r->chunk_size;
    int rc = ring_room(r, want);
    if (rc < 0)
        return rc;
    size_t n = r->chunk_size - r->pos;
    if (n > len)
        n = len;
    zbuf_buf_t *b = r->chunks[r->cur];
    rc = zbuf_append_ref(z, b, r->pos, n);
    if (rc < 0)
        return rc;
    *where = (uint8_t *)zbuf_buf_data(b) + r->pos;
    r->pos += n;
    return (int)n;
}

int zbuf__us_ring_append_zbuf(struct zus_ring *r, zbuf_t *z, const zbuf_t *src, size_t off,
                              size_t len)
{
    size_t before = zbuf_length(z), done = 0;
    while (done < len) {
        uint8_t *p;
        int n = ring_slice(r, z, len - done, &p);
        if (n < 0) {
            if (zbuf_length(z) > before)
                zbuf_cut(z, before, ZBUF_TO_END, NULL);
            return n;
        }
        /* The copy itself: counted by zbuf_copyout() in the core's stats. */
        zbuf_copyout(src, off + done, p, (size_t)n);
        done += (size_t)n;
    }
    return 0;
}

int zbuf__us_ring_append(struct zus_ring *r, zbuf_t *z, const void *data, size_t len)
{
    size_t before = zbuf_length(z), done = 0;
    while (done < len) {
        uint8_t *p;
        int n = ring_slice(r, z, len - done, &p);
        if (n < 0) {
            if (zbuf_length(z) > before)
                zbuf_cut(z, before, ZBUF_TO_END, NULL);
            return n;
        }
        memcpy(p, (const uint8_t *)data + done, (size_t)n);
        zbuf_stats_count_copy((size_t)n);
        done += (size_t)n;
    }
    return 0;
}
