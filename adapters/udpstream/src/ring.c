/* SPDX-License-Identifier: MIT */
/*
 * The copying mode's rings (see internal.h).  A chunk is reused only when
 * its reference count is back to the ring's own reference: a slice still
 * queued, in flight in a transport, or held by a reader keeps its chunk
 * out of the circle's reuse, and the ring grows instead.  The rings'
 * growth is bounded by the callers (the send queue's byte limit, the
 * receive window).
 *
 * Successive copies into the send ring extend one open run of bytes,
 * which becomes a single segment of the send queue only when something
 * needs it there (zbuf__us_ring_flush()), so a stream of small writes
 * costs one copy each and one segment per run, not one per write.
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

int zbuf__us_ring_flush(struct zus_ring *r)
{
    if (r->run_len == 0)
        return 0;
    int rc = zbuf_append_ref(r->run_z, r->chunks[r->cur], r->run_off, r->run_len);
    if (rc < 0)
        return rc;
    r->run_len = 0;
    r->run_z = NULL;
    return 0;
}

void zbuf__us_ring_drop_run(struct zus_ring *r)
{
    if (r->run_len > 0 && r->pos == r->run_off + r->run_len)
        r->pos = r->run_off; /* nobody refers to those bytes */
    r->run_len = 0;
    r->run_z = NULL;
}

/* Make the current chunk one with at least @len bytes free. */
static int ring_room(struct zus_ring *r, size_t len)
{
    if (r->n > 0 && r->chunk_size - r->pos >= len)
        return 0;
    int rc = zbuf__us_ring_flush(r); /* the run stays in the chunk it is in */
    if (rc < 0)
        return rc;
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
    rc = zbuf_buf_alloc(r->chunk_size, &b);
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

/* Room for up to @len bytes at the write position, as part of @z's open
 * run; the address to copy to, and how many fit, in *n. */
static uint8_t *ring_take(struct zus_ring *r, zbuf_t *z, size_t len, size_t *n, int *err)
{
    size_t want = len < r->chunk_size ? len : r->chunk_size;
    int rc = ring_room(r, want);
    if (rc == 0 && r->run_len > 0 && (r->run_z != z || r->run_off + r->run_len != r->pos))
        rc = zbuf__us_ring_flush(r);
    if (rc < 0) {
        *err = rc;
        return NULL;
    }
    if (r->run_len == 0) {
        r->run_z = z;
        r->run_off = r->pos;
    }
    *n = r->chunk_size - r->pos < len ? r->chunk_size - r->pos : len;
    uint8_t *p = (uint8_t *)zbuf_buf_data(r->chunks[r->cur]) + r->pos;
    r->pos += *n;
    r->run_len += *n;
    return p;
}

int zbuf__us_ring_append(struct zus_ring *r, zbuf_t *z, const void *data, const zbuf_t *src,
                         size_t off, size_t len)
{
    size_t done = 0;
    while (done < len) {
        size_t n;
        int err = 0;
        uint8_t *p = ring_take(r, z, len - done, &n, &err);
        if (p == NULL)
            return err; /* what was copied before stays queued: see the caller */
        if (src != NULL) {
            zbuf_copyout(src, off + done, p, n); /* counted by the core */
        } else {
            memcpy(p, (const uint8_t *)data + done, n);
            zbuf_stats_count_copy(n);
        }
        done += n;
    }
    return 0;
}
