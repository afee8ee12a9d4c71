/* SPDX-License-Identifier: MIT */
/*
 * zbufs: the segment list and every operation on it.
 *
 * Failure strategy, the same everywhere: a call first validates its
 * arguments, then allocates everything it could need (descriptors, a spare
 * segment for splitting a straddling segment in two, copy buffers) and reads
 * any file bytes, and only then changes the zbuf.  So an -EINVAL, -ERANGE,
 * -ENOMEM or -EIO return leaves the zbuf exactly as it was and releases
 * nothing.
 *
 * Release callbacks never run while a zbuf is half-modified: segments a call
 * removes are collected on a local list ("buried") and their buffer
 * references dropped once the zbuf is consistent again.
 *
 * Costs: locating an offset walks the list from whichever end is nearer;
 * everything else is O(segments touched).  No operation here looks at the
 * bytes except the ones that copy, and they say so.
 */
#include <limits.h>

#include "internal.h"

/* ------------------------------------------------------- list primitives */

/* Link s before `at` (at == NULL: append).  Accounts its length. */
static void link_before(struct zbuf *z, struct zbuf_seg *at, struct zbuf_seg *s)
{
    s->owner = z;
    s->next = at;
    s->prev = at ? at->prev : z->tail;
    if (s->prev)
        s->prev->next = s;
    else
        z->head = s;
    if (at)
        at->prev = s;
    else
        z->tail = s;
    z->nsegs++;
    z->len += s->len;
}

static void unlink_seg(struct zbuf *z, struct zbuf_seg *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        z->head = s->next;
    if (s->next)
        s->next->prev = s->prev;
    else
        z->tail = s->prev;
    z->nsegs--;
    z->len -= s->len;
}

static struct zbuf_seg *seg_set(struct zbuf_seg *s, struct zbuf_buf *b, size_t off, size_t len)
{
    s->buf = b;
    s->off = off;
    s->len = len;
    return s;
}

/* Drop segments collected by an operation (a NULL-terminated list through
 * ->next), once the zbuf is consistent: their references first (release
 * callbacks may run, and may use the library), then the descriptors, in one
 * splice onto the cache. */
static ZBUF__ALWAYS_INLINE void bury_inline(struct zbuf_seg *dead)
{
    if (dead == NULL)
        return;
    struct zbuf_seg *last = NULL;
    size_t n = 0;
    struct zbuf__owner *me = zbuf__run_enter();
    for (struct zbuf_seg *s = dead; s; s = s->next) {
        s->owner = NULL; /* a stale handle no longer matches any zbuf */
        zbuf__ref_put(me, s->buf);
        last = s;
        n++;
    }
    zbuf__run_leave(me);
    zbuf__seg_free_chain(dead, last, n);
}

/* bury_inline() out of line, for the calls where it is not hot (the
 * delete and the whole-zbuf cut inline it). */
static void bury(struct zbuf_seg *dead)
{
    bury_inline(dead);
}

/* Move the run first..last of `from` into `to`, before `at` (NULL: append). */
static void transfer(struct zbuf *from, struct zbuf_seg *first, struct zbuf_seg *last,
                     struct zbuf *to, struct zbuf_seg *at)
{
    size_t bytes = 0, n = 0;
    for (struct zbuf_seg *s = first;; s = s->next) {
        s->owner = to;
        bytes += s->len;
        n++;
        if (s == last)
            break;
    }
    /* out of `from` */
    if (first->prev)
        first->prev->next = last->next;
    else
        from->head = last->next;
    if (last->next)
        last->next->prev = first->prev;
    else
        from->tail = first->prev;
    from->len -= bytes;
    from->nsegs -= n;
    /* into `to` */
    first->prev = at ? at->prev : to->tail;
    last->next = at;
    if (first->prev)
        first->prev->next = first;
    else
        to->head = first;
    if (at)
        at->prev = last;
    else
        to->tail = last;
    to->len += bytes;
    to->nsegs += n;
}

/* Move the segments from `first` to the end of `from` into the empty `to`. */
static void transfer_tail(struct zbuf *from, struct zbuf_seg *first, struct zbuf *to)
{
    size_t bytes = 0, n = 0;
    for (struct zbuf_seg *s = first; s; s = s->next) {
        s->owner = to;
        bytes += s->len;
        n++;
    }
    to->head = first;
    to->tail = from->tail;
    to->len = bytes;
    to->nsegs = n;
    from->tail = first->prev;
    if (first->prev)
        first->prev->next = NULL;
    else
        from->head = NULL;
    first->prev = NULL;
    from->len -= bytes;
    from->nsegs -= n;
}

/* ------------------------------------------------------------- positions */

/* A byte position: segment and offset inside it; seg == NULL is the end. */
struct pos {
    struct zbuf_seg *seg;
    size_t in;
};

static struct pos find(const struct zbuf *z, size_t off)
{
    struct pos p = {NULL, 0};
    if (off >= z->len)
        return p;
    struct zbuf_seg *s;
    if (off < z->len / 2) {
        for (s = z->head; off >= s->len; s = s->next)
            off -= s->len;
        p.in = off;
    } else {
        size_t rem = z->len - off; /* bytes from off to the end, > 0 */
        for (s = z->tail; rem > s->len; s = s->prev)
            rem -= s->len;
        p.in = s->len - rem;
    }
    p.seg = s;
    return p;
}

/* Make a segment boundary at p, using `spare` when p falls inside a segment.
 * Returns the segment that now starts at p (NULL: the end). */
static ZBUF__ALWAYS_INLINE struct zbuf_seg *cleave(struct zbuf *z, struct pos p,
                                                   struct zbuf_seg *spare)
{
    if (p.seg == NULL || p.in == 0)
        return p.seg;
    struct zbuf_seg *s = p.seg, *next = s->next;
    ZBUF__ASSERT(spare != NULL && p.in < s->len);
    seg_set(spare, s->buf, s->off + p.in, s->len - p.in);
    s->len = p.in;
    /* Link spare after s; the zbuf's length does not change. */
    spare->owner = z;
    spare->prev = s;
    spare->next = next;
    s->next = spare;
    if (next)
        next->prev = spare;
    else
        z->tail = spare;
    z->nsegs++;
    /* spare's reference, last: nothing is kept across it (s holds one all
     * along, so the buffer cannot go away in between). */
    zbuf__buf_get(spare->buf);
    return spare;
}

/* Allocate the spare segment a position needs, if any.  -ENOMEM or 0. */
static int spare_for(struct pos p, struct zbuf_seg **spare)
{
    *spare = NULL;
    if (p.seg == NULL || p.in == 0)
        return 0;
    *spare = zbuf__seg_alloc();
    return *spare ? 0 : -ENOMEM;
}

static void spare_free(struct zbuf_seg *spare)
{
    if (spare)
        zbuf__seg_free(spare);
}

/* Argument checks shared by every call. */
static int check_range(const struct zbuf *z, size_t off, size_t *len)
{
    if (off > z->len)
        return -ERANGE;
    if (*len == ZBUF_TO_END)
        *len = z->len - off;
    else if (*len > z->len - off)
        return -ERANGE;
    return 0;
}

static int check_point(const struct zbuf *z, size_t *off)
{
    if (*off == ZBUF_OFF_END)
        *off = z->len;
    else if (*off > z->len)
        return -ERANGE;
    return 0;
}

/* The absolute offset (0 .. length) of (seg, rel), as zbuf_locate()
 * defines it; z is valid. */
static int locate(const struct zbuf *z, const struct zbuf_seg *seg, int64_t rel, size_t *abs)
{
    if (seg != NULL && !zbuf__seg_of(z, seg))
        return -EINVAL;
    if (rel == ZBUF_REL_BEGIN) {
        *abs = 0;
        return 0;
    }
    if (rel == ZBUF_REL_END) {
        *abs = z->len;
        return 0;
    }
    size_t base = 0;
    if (seg != NULL)
        for (const struct zbuf_seg *s = z->head; s != seg; s = s->next)
            base += s->len;
    if (rel < 0 ? (uint64_t)(-rel) > base : (uint64_t)rel > z->len - base)
        return -ERANGE;
    *abs = rel < 0 ? base - (size_t)(-rel) : base + (size_t)rel;
    return 0;
}

/* The location of an `_at` call: (seg, rel) must name a byte (0 .. length
 * - 1); *len, an upper bound, is cut down to the bytes from there to the
 * end.  The common form (no segment, an offset from the start) is checked
 * inline.  z is valid. */
static inline int locate_byte(const struct zbuf *z, const struct zbuf_seg *seg, int64_t rel,
                              size_t *off, size_t *len)
{
    size_t o = (size_t)rel;
    if (ZBUF__UNLIKELY(seg != NULL || rel < 0)) {
        int rc = locate(z, seg, rel, &o);
        if (rc != 0)
            return rc;
    }
    if (o >= z->len)
        return -ERANGE;
    if (*len > z->len - o)
        *len = z->len - o;
    *off = o;
    return 0;
}

static bool is_mem(const struct zbuf_seg *s)
{
    return s->buf->kind != ZBUF__BUF_FILE;
}

/* Forget a reservation (see zbuf_reserve()).  Every modifying call does this
 * at the point where it commits. */
static __attribute__((noinline, cold)) void rsv_forget(struct zbuf *z)
{
    struct zbuf_buf *b = z->rsv_buf;
    z->rsv_buf = NULL;
    z->rsv_seg = NULL;
    z->rsv_tail = 0;
    if (b)
        zbuf__buf_put(b);
}

static inline void rsv_drop(struct zbuf *z)
{
    if (ZBUF__UNLIKELY(z->rsv_buf != NULL || z->rsv_seg != NULL))
        rsv_forget(z);
}

/* ------------------------------------------------------------ life cycle */

static struct zbuf *hdr_new(void)
{
    struct zbuf *z = zbuf__hdr_alloc();
    if (z != NULL) {
        memset(z, 0, sizeof *z);
        z->magic = ZBUF__MAGIC;
    }
    return z;
}

int zbuf_create(zbuf_t **out)
{
    if (out == NULL)
        return -EINVAL;
    struct zbuf *z = hdr_new();
    if (z == NULL)
        return -ENOMEM;
    *out = z;
    return 0;
}

/* Empty z (its reservation too) and return its segments, still holding
 * their references, for bury_inline() once z is consistent. */
static inline struct zbuf_seg *detach_all(struct zbuf *z)
{
    rsv_drop(z);
    struct zbuf_seg *s = z->head;
    z->head = z->tail = NULL;
    z->len = 0;
    z->nsegs = 0;
    return s;
}

static inline void delete_checked(struct zbuf *z)
{
    struct zbuf_seg *s = detach_all(z);
    z->magic = 0; /* re-entry from a release callback sees a dead handle */
    bury_inline(s);
    zbuf__hdr_free(z);
}

int zbuf_delete(zbuf_t *z)
{
    if (z == NULL)
        return 0;
    if (!zbuf__valid(z))
        return -EINVAL;
    delete_checked(z);
    return 0;
}

bool zbuf_valid(const zbuf_t *z)
{
    return zbuf__valid(z);
}

bool zbuf_seg_valid(const zbuf_t *z, const zbuf_seg_t *s)
{
    return zbuf__valid(z) && zbuf__seg_of(z, s);
}

size_t zbuf_length(const zbuf_t *z)
{
    return zbuf__valid(z) ? z->len : 0;
}

size_t zbuf_seg_count(const zbuf_t *z)
{
    return zbuf__valid(z) ? z->nsegs : 0;
}

/* -------------------------------------------------------------- inserting */

/* Insert one new segment over [boff, boff + len) of b at p.  The segment
 * takes a new reference to b. */
static int insert_seg(struct zbuf *z, struct pos p, struct zbuf_buf *b, size_t boff, size_t len,
                      zbuf_seg_t **segp)
{
    struct zbuf_seg *spare, *s = zbuf__seg_alloc();
    if (s == NULL)
        return -ENOMEM;
    if (spare_for(p, &spare) != 0) {
        zbuf__seg_free(s);
        return -ENOMEM;
    }
    rsv_drop(z);
    zbuf__buf_get(b);
    link_before(z, cleave(z, p, spare), seg_set(s, b, boff, len));
    if (segp)
        *segp = s;
    ZBUF__CHECKED(z);
    return 0;
}

/* Enrol a new USER buffer (made by the caller) and insert all of it; on
 * failure the buffer is released without its callback. */
static int insert_new_user(struct zbuf *z, size_t off, struct zbuf_buf *b, zbuf_seg_t **segp)
{
    if (b == NULL)
        return -ENOMEM;
    int rc = insert_seg(z, find(z, off), b, 0, b->size, segp);
    if (rc != 0)
        zbuf__buf_forget_cb(b); /* not enrolled after all: release silently */
    zbuf__buf_put(b);           /* the segment holds the only reference */
    return rc;
}

int zbuf_insert_buf(zbuf_t *z, size_t off, void *data, size_t len, zbuf_release_cb cb,
                    void *arg, zbuf_seg_t **segp)
{
    if (!zbuf__valid(z) || data == NULL || len == 0)
        return -EINVAL;
    if (check_point(z, &off) != 0)
        return -ERANGE;
    return insert_new_user(z, off, zbuf__buf_new_user(data, len, cb, arg), segp);
}

int zbuf_insert_buf2(zbuf_t *z, size_t off, void *data, size_t len, zbuf_release2_cb cb,
                     void *arg, void *arg2, zbuf_seg_t **segp)
{
    if (!zbuf__valid(z) || data == NULL || len == 0)
        return -EINVAL;
    if (check_point(z, &off) != 0)
        return -ERANGE;
    return insert_new_user(z, off, zbuf__buf_new_user2(data, len, cb, arg, arg2), segp);
}

int zbuf_insert_ref(zbuf_t *z, size_t off, zbuf_buf_t *b, size_t boff, size_t len,
                    zbuf_seg_t **segp)
{
    if (!zbuf__valid(z) || b == NULL || len == 0)
        return -EINVAL;
    if (check_point(z, &off) != 0 || boff > b->size || len > b->size - boff)
        return -ERANGE;
    struct pos p = find(z, off);
    struct zbuf_seg *prev = p.seg ? p.seg->prev : z->tail;
    if (p.in == 0 && prev != NULL && prev->buf == b && prev->off + prev->len == boff) {
        /* The range continues the segment before the insertion point: grow
         * that segment, which already holds a reference to b. */
        rsv_drop(z);
        prev->len += len;
        z->len += len;
        if (segp)
            *segp = prev;
        ZBUF__CHECKED(z);
        return 0;
    }
    return insert_seg(z, p, b, boff, len, segp);
}

int zbuf_insert_copy(zbuf_t *z, size_t off, const void *data, size_t len, zbuf_seg_t **segp)
{
    if (!zbuf__valid(z) || data == NULL || len == 0)
        return -EINVAL;
    if (check_point(z, &off) != 0)
        return -ERANGE;
    struct zbuf_buf *b = zbuf__buf_new_heap(len);
    if (b == NULL)
        return -ENOMEM;
    memcpy(b->base, data, len);
    int rc = insert_seg(z, find(z, off), b, 0, len, segp);
    zbuf__buf_put(b);
    if (rc == 0)
        zbuf__count_copy(len);
    return rc;
}

int zbuf_insert(zbuf_t *dst, size_t off, zbuf_t *src, zbuf_seg_t **segp)
{
    if (!zbuf__valid(dst) || !zbuf__valid(src) || dst == src)
        return -EINVAL;
    if (check_point(dst, &off) != 0)
        return -ERANGE;
    struct zbuf_seg *first = src->head, *spare = NULL;
    if (first != NULL) {
        struct pos p = find(dst, off);
        if (spare_for(p, &spare) != 0)
            return -ENOMEM;
        rsv_drop(dst);
        transfer(src, first, src->tail, dst, cleave(dst, p, spare));
    }
    if (segp)
        *segp = first;
    zbuf_delete(src); /* now empty: releases nothing but its reservation */
    ZBUF__CHECKED(dst);
    return 0;
}

/* ---------------------------------------------------------- reading out */

/* Copy len bytes starting at p into dst (memory or file segments). */
static int read_from(struct pos p, void *dst, size_t len)
{
    uint8_t *d = dst;
    for (struct zbuf_seg *s = p.seg; len > 0; s = s->next) {
        size_t n = s->len - p.in;
        if (n > len)
            n = len;
        if (ZBUF__LIKELY(is_mem(s))) {
            memcpy(d, zbuf__seg_ptr(s) + p.in, n);
        } else {
            int rc = zbuf__buf_read(s->buf, s->off + p.in, d, n);
            if (rc != 0)
                return rc;
        }
        d += n;
        len -= n;
        p.in = 0;
    }
    return 0;
}

static inline int copyout_checked(const struct zbuf *z, size_t off, void *dst, size_t len)
{
    int rc = read_from(find(z, off), dst, len);
    if (rc == 0)
        zbuf__count_copy(len);
    return rc;
}

/* zbuf_copyout() once the handle and the range are checked. */
static inline ssize_t copyout_range(const struct zbuf *z, size_t off, void *dst, size_t len)
{
    if (len == 0)
        return 0;
    if (dst == NULL)
        return -EINVAL;
    if (len > (size_t)SSIZE_MAX)
        return -EOVERFLOW;
    int rc = copyout_checked(z, off, dst, len);
    return rc != 0 ? rc : (ssize_t)len;
}

ssize_t zbuf_copyout(const zbuf_t *z, size_t off, void *dst, size_t len)
{
    if (!zbuf__valid(z))
        return -EINVAL;
    if (check_range(z, off, &len) != 0)
        return -ERANGE;
    return copyout_range(z, off, dst, len);
}

int zbuf_peek(const zbuf_t *z, size_t off, size_t len, void *scratch, const void **out)
{
    if (!zbuf__valid(z) || out == NULL)
        return -EINVAL;
    if (check_range(z, off, &len) != 0)
        return -ERANGE;
    if (len == 0) {
        *out = scratch;
        return 0;
    }
    struct pos p = find(z, off);
    if (is_mem(p.seg) && len <= p.seg->len - p.in) {
        *out = zbuf__seg_ptr(p.seg) + p.in;
        return 0;
    }
    if (scratch == NULL)
        return -EAGAIN;
    int rc = read_from(p, scratch, len);
    if (rc != 0)
        return rc;
    zbuf__count_copy(len);
    *out = scratch;
    return 0;
}

int zbuf_iovec(const zbuf_t *z, size_t off, size_t len, struct iovec *iov, int iovcnt,
               size_t *bytes)
{
    if (!zbuf__valid(z) || iovcnt < 0 || (iov == NULL && iovcnt > 0))
        return -EINVAL;
    if (check_range(z, off, &len) != 0)
        return -ERANGE;
    struct pos p = find(z, off);
    size_t covered = 0;
    int i = 0;
    for (struct zbuf_seg *s = p.seg; covered < len && i < iovcnt; s = s->next) {
        if (!is_mem(s))
            break;
        size_t n = s->len - p.in;
        if (n > len - covered)
            n = len - covered;
        iov[i].iov_base = zbuf__seg_ptr(s) + p.in;
        iov[i].iov_len = n;
        covered += n;
        i++;
        p.in = 0;
    }
    if (bytes)
        *bytes = covered;
    return i;
}

/* ----------------------------------------------------------- rearranging */

static ZBUF__ALWAYS_INLINE struct zbuf *dup_checked(const struct zbuf *z, size_t off, size_t len)
{
    struct zbuf *d = hdr_new();
    if (d == NULL)
        return NULL;
    /* Build the copy's list directly: it is new, nobody else sees it. */
    struct pos p = find(z, off);
    struct zbuf_seg *prev = NULL, **link = &d->head;
    size_t total = len, nsegs = 0;
    struct zbuf__seg_batch sb;
    zbuf__seg_batch_begin(&sb);
    struct zbuf__owner *me = zbuf__run_enter();
    for (struct zbuf_seg *s = p.seg; len > 0; s = s->next) {
        size_t n = s->len - p.in;
        if (n > len)
            n = len;
        struct zbuf_seg *c = zbuf__seg_batch_alloc(&sb);
        if (c == NULL)
            break;
        struct zbuf_buf *b = s->buf;
        zbuf__ref_get(me, b);
        seg_set(c, b, s->off + p.in, n);
        c->owner = d;
        c->prev = prev;
        *link = c;
        link = &c->next;
        prev = c;
        nsegs++;
        len -= n;
        p.in = 0;
    }
    zbuf__run_leave(me);
    zbuf__seg_batch_end(&sb);
    *link = NULL;
    d->tail = prev;
    d->nsegs = nsegs;
    d->len = total - len;
    if (len > 0) {
        delete_checked(d); /* drops only the references d took: z keeps its own */
        return NULL;
    }
    ZBUF__CHECKED(d);
    return d;
}

/* zbuf_dup() once the arguments are checked. */
static inline int dup_range(const struct zbuf *z, size_t off, size_t len, zbuf_t **out)
{
    struct zbuf *d = dup_checked(z, off, len);
    if (d == NULL)
        return -ENOMEM;
    *out = d;
    return 0;
}

int zbuf_dup(const zbuf_t *z, size_t off, size_t len, zbuf_t **out)
{
    if (!zbuf__valid(z) || out == NULL)
        return -EINVAL;
    if (check_range(z, off, &len) != 0)
        return -ERANGE;
    return dup_range(z, off, len, out);
}

/* Split z at off; `tail_side` says which side moves to the new zbuf. */
/* Split z at off (0 .. length); `tail_side` says which side moves to the
 * new zbuf, which is returned (NULL: out of memory, nothing changed). */
static inline struct zbuf *split_checked(struct zbuf *z, size_t off, bool tail_side)
{
    struct zbuf *n = hdr_new();
    if (n == NULL)
        return NULL;
    struct pos p = find(z, off);
    struct zbuf_seg *spare;
    if (spare_for(p, &spare) != 0) {
        zbuf__hdr_free(n);
        return NULL;
    }
    rsv_drop(z);
    struct zbuf_seg *at = cleave(z, p, spare);
    if (tail_side && at != NULL)
        transfer_tail(z, at, n);
    else if (!tail_side && off > 0)
        transfer(z, z->head, at ? at->prev : z->tail, n, NULL);
    ZBUF__CHECKED(z);
    ZBUF__CHECKED(n);
    return n;
}

/* zbuf_split() / zbuf_split_head() once the arguments are checked. */
static inline int split_to(struct zbuf *z, size_t off, zbuf_t **out, bool tail_side)
{
    struct zbuf *n = split_checked(z, off, tail_side);
    if (n == NULL)
        return -ENOMEM;
    *out = n;
    return 0;
}

static int split(zbuf_t *z, size_t off, zbuf_t **out, bool tail_side)
{
    if (!zbuf__valid(z) || out == NULL)
        return -EINVAL;
    if (off > z->len)
        return -ERANGE;
    return split_to(z, off, out, tail_side);
}

int zbuf_split(zbuf_t *z, size_t off, zbuf_t **tail)
{
    return split(z, off, tail, true);
}

int zbuf_split_head(zbuf_t *z, size_t off, zbuf_t **head)
{
    return split(z, off, head, false);
}

/* Remove len > 0 bytes at p.  Needs `spare` when the range lies strictly
 * inside one segment.  Removed segments go on *dead.  Returns the segment
 * after the cut (NULL: the end). */
static struct zbuf_seg *cut_at(struct zbuf *z, struct pos p, size_t len, struct zbuf_seg *spare,
                               struct zbuf_seg **dead)
{
    struct zbuf_seg *s = p.seg;
    if (spare != NULL) {
        ZBUF__ASSERT(p.in > 0 && p.in + len < s->len);
        seg_set(spare, s->buf, s->off + p.in + len, s->len - p.in - len);
        zbuf__buf_get(s->buf);
        z->len -= s->len - p.in;
        s->len = p.in;
        link_before(z, s->next, spare);
        return spare;
    }
    if (p.in > 0) {
        size_t k = s->len - p.in;
        s->len = p.in;
        z->len -= k;
        len -= k;
        s = s->next;
    }
    while (len > 0) {
        if (len >= s->len) {
            struct zbuf_seg *next = s->next;
            len -= s->len;
            unlink_seg(z, s);
            s->next = *dead;
            *dead = s;
            s = next;
        } else {
            s->off += len;
            s->len -= len;
            z->len -= len;
            len = 0;
        }
    }
    return s;
}

/* Does removing len bytes at p split one segment in two? */
static bool cut_needs_spare(struct pos p, size_t len)
{
    return p.seg != NULL && p.in > 0 && p.in + len < p.seg->len;
}

static inline int cut_checked(struct zbuf *z, size_t off, size_t len, zbuf_seg_t **after)
{
    /* The common case first: a header stripped off the front, inside the
     * first segment (no descriptor, no reference changes). */
    struct zbuf_seg *h = z->head;
    if (off == 0 && len < h->len) {
        rsv_drop(z);
        h->off += len;
        h->len -= len;
        z->len -= len;
        if (after)
            *after = h;
        ZBUF__CHECKED(z);
        return 0;
    }
    if (off == 0 && len == z->len) { /* all of it (sent, consumed): no walk */
        struct zbuf_seg *dead = detach_all(z);
        if (after)
            *after = NULL;
        ZBUF__CHECKED(z);
        bury_inline(dead);
        return 0;
    }
    struct pos p = find(z, off);
    struct zbuf_seg *spare = NULL, *dead = NULL;
    if (cut_needs_spare(p, len) && (spare = zbuf__seg_alloc()) == NULL)
        return -ENOMEM;
    rsv_drop(z);
    struct zbuf_seg *next = cut_at(z, p, len, spare, &dead);
    if (after)
        *after = next;
    ZBUF__CHECKED(z);
    bury(dead);
    return 0;
}

/* zbuf_cut() once the handle and the range are checked. */
static inline int cut_range(struct zbuf *z, size_t off, size_t len, zbuf_seg_t **after)
{
    if (len == 0) {
        if (after)
            *after = find(z, off).seg;
        return 0;
    }
    return cut_checked(z, off, len, after);
}

int zbuf_cut(zbuf_t *z, size_t off, size_t len, zbuf_seg_t **after)
{
    if (!zbuf__valid(z))
        return -EINVAL;
    if (check_range(z, off, &len) != 0)
        return -ERANGE;
    return cut_range(z, off, len, after);
}

/* ------------------------------------------- addressing a byte by segment */

/* The `_at` calls: one check of the handle and the location (locate_byte()),
 * then the same checked paths as the calls without `_at`. */

int zbuf_dup_at(const zbuf_t *z, const zbuf_seg_t *seg, int64_t rel, size_t len, zbuf_t **out)
{
    size_t off;
    if (!zbuf__valid(z) || out == NULL)
        return -EINVAL;
    int rc = locate_byte(z, seg, rel, &off, &len);
    return rc != 0 ? rc : dup_range(z, off, len, out);
}

int zbuf_cut_at(zbuf_t *z, const zbuf_seg_t *seg, int64_t rel, size_t len, zbuf_seg_t **after)
{
    size_t off;
    if (!zbuf__valid(z))
        return -EINVAL;
    int rc = locate_byte(z, seg, rel, &off, &len);
    return rc != 0 ? rc : cut_range(z, off, len, after);
}

int zbuf_split_at(zbuf_t *z, const zbuf_seg_t *seg, int64_t rel, zbuf_t **tail)
{
    size_t off, len = 0;
    if (!zbuf__valid(z) || tail == NULL)
        return -EINVAL;
    int rc = locate_byte(z, seg, rel, &off, &len);
    return rc != 0 ? rc : split_to(z, off, tail, true);
}

ssize_t zbuf_copyout_at(const zbuf_t *z, const zbuf_seg_t *seg, int64_t rel, void *dst,
                        size_t len)
{
    size_t off;
    if (!zbuf__valid(z))
        return -EINVAL;
    int rc = locate_byte(z, seg, rel, &off, &len);
    return rc != 0 ? rc : copyout_range(z, off, dst, len);
}

/* --------------------------------------------------- headroom / tailroom */

static size_t headroom_of(const struct zbuf_seg *s)
{
    return s && zbuf__buf_is_private(s->buf) ? s->off : 0;
}

static size_t tailroom_of(const struct zbuf_seg *s)
{
    return s && zbuf__buf_is_private(s->buf) ? s->buf->size - s->off - s->len : 0;
}

size_t zbuf_headroom(const zbuf_t *z)
{
    return zbuf__valid(z) ? headroom_of(z->head) : 0;
}

size_t zbuf_tailroom(const zbuf_t *z)
{
    if (!zbuf__valid(z) || z->rsv_seg != NULL)
        return 0; /* reserved tailroom is not free */
    return tailroom_of(z->tail);
}

/* Minimum buffer size for zbuf_append_space(), so that a run of small
 * appends fills one buffer instead of making one segment each. */
#define APPEND_MIN 512

int zbuf_prepend_space(zbuf_t *z, size_t len, void **data)
{
    if (!zbuf__valid(z) || len == 0 || data == NULL)
        return -EINVAL;
    struct zbuf_seg *h = z->head;
    if (headroom_of(h) >= len) {
        rsv_drop(z);
        h->off -= len;
        h->len += len;
        z->len += len;
        *data = zbuf__seg_ptr(h);
        ZBUF__CHECKED(z);
        return 0;
    }
    if (len > SIZE_MAX - ZBUF_HEADROOM_DEFAULT)
        return -ENOMEM;
    struct zbuf_buf *b = zbuf__buf_new_heap(ZBUF_HEADROOM_DEFAULT + len);
    if (b == NULL)
        return -ENOMEM;
    int rc = insert_seg(z, find(z, 0), b, ZBUF_HEADROOM_DEFAULT, len, NULL);
    zbuf__buf_put(b);
    if (rc == 0)
        *data = b->base + ZBUF_HEADROOM_DEFAULT;
    return rc;
}

int zbuf_append_space(zbuf_t *z, size_t len, void **data)
{
    if (!zbuf__valid(z) || len == 0 || data == NULL)
        return -EINVAL;
    struct zbuf_seg *t = z->tail;
    if (z->rsv_seg == NULL && tailroom_of(t) >= len) {
        rsv_drop(z);
        *data = zbuf__seg_ptr(t) + t->len;
        t->len += len;
        z->len += len;
        ZBUF__CHECKED(z);
        return 0;
    }
    struct zbuf_buf *b = zbuf__buf_new_heap(len < APPEND_MIN ? APPEND_MIN : len);
    if (b == NULL)
        return -ENOMEM;
    int rc = insert_seg(z, find(z, z->len), b, 0, len, NULL);
    zbuf__buf_put(b);
    if (rc == 0)
        *data = b->base;
    return rc;
}

int zbuf_reserve(zbuf_t *z, size_t len, struct iovec *iov, int *iovcnt)
{
    if (!zbuf__valid(z) || len == 0 || iov == NULL || iovcnt == NULL)
        return -EINVAL;
    struct zbuf_seg *t = z->tail;
    size_t room = tailroom_of(t);
    struct zbuf_buf *b = NULL;
    if (room < len && (b = zbuf__buf_new_heap(len - room)) == NULL)
        return -ENOMEM;
    rsv_drop(z); /* a new reservation replaces the old one */
    int n = 0;
    if (room > 0) {
        iov[n].iov_base = zbuf__seg_ptr(t) + t->len;
        iov[n].iov_len = room;
        n++;
    }
    if (b != NULL) {
        iov[n].iov_base = b->base;
        iov[n].iov_len = b->size;
        n++;
    }
    z->rsv_seg = room > 0 ? t : NULL;
    z->rsv_end = room > 0 ? t->off + t->len : 0;
    z->rsv_tail = room;
    z->rsv_buf = b;
    *iovcnt = n;
    return 0;
}

int zbuf_commit(zbuf_t *z, size_t len)
{
    if (!zbuf__valid(z) || (z->rsv_seg == NULL && z->rsv_buf == NULL))
        return -EINVAL;
    struct zbuf_seg *t = z->rsv_seg;
    if (t != NULL && (t != z->tail || t->off + t->len != z->rsv_end))
        return -EINVAL; /* cannot happen unless the zbuf was bypassed */
    size_t room = z->rsv_tail, fresh = z->rsv_buf ? z->rsv_buf->size : 0;
    if (len > room + fresh)
        return -ERANGE;
    size_t in_tail = len < room ? len : room;
    struct zbuf_seg *s = NULL;
    if (len > in_tail && (s = zbuf__seg_alloc()) == NULL)
        return -ENOMEM;
    if (in_tail > 0) {
        t->len += in_tail;
        z->len += in_tail;
    }
    if (s != NULL) {
        zbuf__buf_get(z->rsv_buf);
        link_before(z, NULL, seg_set(s, z->rsv_buf, 0, len - in_tail));
    }
    rsv_drop(z);
    ZBUF__CHECKED(z);
    return 0;
}

/* ---------------------------------------------------- pullup and unshare */

int zbuf_pullup(zbuf_t *z, size_t off, size_t len, void **data)
{
    if (!zbuf__valid(z) || data == NULL)
        return -EINVAL;
    if (check_range(z, off, &len) != 0 || len == 0)
        return -ERANGE;
    struct pos p = find(z, off);
    if (is_mem(p.seg) && len <= p.seg->len - p.in) {
        *data = zbuf__seg_ptr(p.seg) + p.in;
        return 0;
    }
    struct zbuf_buf *b = zbuf__buf_new_heap(len);
    if (b == NULL)
        return -ENOMEM;
    struct zbuf_seg *s = zbuf__seg_alloc(), *spare = NULL, *dead = NULL;
    int rc = s ? 0 : -ENOMEM;
    if (rc == 0 && cut_needs_spare(p, len) && (spare = zbuf__seg_alloc()) == NULL)
        rc = -ENOMEM;
    if (rc == 0)
        rc = read_from(p, b->base, len);
    if (rc != 0) {
        spare_free(spare);
        spare_free(s);
        zbuf__buf_put(b);
        return rc;
    }
    rsv_drop(z);
    struct zbuf_seg *after = cut_at(z, p, len, spare, &dead);
    link_before(z, after, seg_set(s, b, 0, len)); /* takes over our reference */
    zbuf__count_copy(len);
    *data = b->base;
    ZBUF__CHECKED(z);
    bury(dead);
    return 0;
}

bool zbuf_writable(const zbuf_t *z, size_t off, size_t len)
{
    if (!zbuf__valid(z) || check_range(z, off, &len) != 0)
        return false;
    struct pos p = find(z, off);
    for (struct zbuf_seg *s = p.seg; len > 0; s = s->next) {
        if (!zbuf__buf_is_private(s->buf))
            return false;
        size_t n = s->len - p.in;
        len -= n < len ? n : len;
        p.in = 0;
    }
    return true;
}

/* The copies unshare makes are chained through the (otherwise unused) pool
 * fields of their HEAP headers, each tagged with the segment it replaces, so
 * the commit pass repeats exactly the decisions of the preparing pass even
 * if another thread drops a reference in between. */
#define COPY_FOR(b) ((b)->u.pool.pool)
#define COPY_NEXT(b) ((b)->u.pool.next_free)

static void copies_free(struct zbuf_buf *list)
{
    while (list) {
        struct zbuf_buf *next = COPY_NEXT(list);
        zbuf__buf_put(list);
        list = next;
    }
}

int zbuf_unshare(zbuf_t *z, size_t off, size_t len)
{
    if (!zbuf__valid(z))
        return -EINVAL;
    if (check_range(z, off, &len) != 0)
        return -ERANGE;
    struct pos p = find(z, off);
    struct zbuf_buf *copies = NULL, **tailp = &copies;
    struct zbuf_seg *spares[2] = {NULL, NULL};
    int nspare = 0, rc = 0;
    size_t copied = 0;

    /* Prepare: copy every shared piece, count the splits needed. */
    size_t rem = len, in = p.in;
    for (struct zbuf_seg *s = p.seg; rem > 0 && rc == 0; s = s->next) {
        size_t n = s->len - in < rem ? s->len - in : rem;
        if (!zbuf__buf_is_private(s->buf)) {
            struct zbuf_buf *c = zbuf__buf_new_heap(n);
            if (c == NULL) {
                rc = -ENOMEM;
                break;
            }
            COPY_FOR(c) = (struct zbuf_pool *)s;
            COPY_NEXT(c) = NULL;
            *tailp = c;
            tailp = &COPY_NEXT(c);
            rc = zbuf__buf_read(s->buf, s->off + in, c->base, n);
            copied += n;
            nspare += (in > 0) + (in + n < s->len);
        }
        rem -= n;
        in = 0;
    }
    for (int i = 0; i < nspare && rc == 0; i++)
        if ((spares[i] = zbuf__seg_alloc()) == NULL)
            rc = -ENOMEM;
    if (rc != 0) {
        spare_free(spares[0]);
        spare_free(spares[1]);
        copies_free(copies);
        return rc;
    }
    if (copies == NULL)
        return 0;

    /* Commit: split out each shared piece and point it at its copy. */
    rsv_drop(z);
    int used = 0;
    rem = len;
    in = p.in;
    for (struct zbuf_seg *s = p.seg; rem > 0;) {
        size_t n = s->len - in < rem ? s->len - in : rem;
        if (copies != NULL && COPY_FOR(copies) == (struct zbuf_pool *)s) {
            struct zbuf_buf *c = copies;
            copies = COPY_NEXT(c);
            if (in > 0)
                s = cleave(z, (struct pos){s, in}, spares[used++]);
            if (n < s->len)
                cleave(z, (struct pos){s, n}, spares[used++]);
            struct zbuf_buf *old = s->buf;
            seg_set(s, c, 0, n); /* takes over the copy's reference */
            zbuf__buf_put(old);  /* the zbuf is consistent here */
        }
        rem -= n;
        in = 0;
        s = s->next;
    }
    zbuf__count_copy(copied);
    ZBUF__CHECKED(z);
    return 0;
}

/* ------------------------------------------------------------- segments */

zbuf_seg_t *zbuf_seg_first(const zbuf_t *z)
{
    return zbuf__valid(z) ? z->head : NULL;
}

zbuf_seg_t *zbuf_seg_last(const zbuf_t *z)
{
    return zbuf__valid(z) ? z->tail : NULL;
}

zbuf_seg_t *zbuf_seg_next(const zbuf_t *z, const zbuf_seg_t *s)
{
    return zbuf__valid(z) && zbuf__seg_of(z, s) ? s->next : NULL;
}

zbuf_seg_t *zbuf_seg_prev(const zbuf_t *z, const zbuf_seg_t *s)
{
    return zbuf__valid(z) && zbuf__seg_of(z, s) ? s->prev : NULL;
}

zbuf_seg_t *zbuf_seg_find(const zbuf_t *z, size_t off, size_t *seg_off)
{
    if (!zbuf__valid(z) || off >= z->len)
        return NULL;
    struct pos p = find(z, off);
    if (seg_off)
        *seg_off = p.in;
    return p.seg;
}

void *zbuf_seg_data(const zbuf_t *z, const zbuf_seg_t *s)
{
    if (!zbuf__valid(z) || !zbuf__seg_of(z, s) || !is_mem(s))
        return NULL;
    return zbuf__seg_ptr(s);
}

size_t zbuf_seg_length(const zbuf_t *z, const zbuf_seg_t *s)
{
    return zbuf__valid(z) && zbuf__seg_of(z, s) ? s->len : 0;
}

zbuf_buf_t *zbuf_seg_buf(const zbuf_t *z, const zbuf_seg_t *s)
{
    return zbuf__valid(z) && zbuf__seg_of(z, s) ? s->buf : NULL;
}

size_t zbuf_seg_buf_offset(const zbuf_t *z, const zbuf_seg_t *s)
{
    return zbuf__valid(z) && zbuf__seg_of(z, s) ? s->off : 0;
}

int zbuf_locate(const zbuf_t *z, const zbuf_seg_t *seg, int64_t rel, size_t *abs)
{
    if (!zbuf__valid(z) || abs == NULL)
        return -EINVAL;
    return locate(z, seg, rel, abs);
}

/* ---------------------------------------------------------------- checker */

int zbuf_check(const zbuf_t *z)
{
    if (!zbuf__valid(z))
        return -EINVAL;
    size_t len = 0, n = 0;
    const struct zbuf_seg *prev = NULL;
    for (const struct zbuf_seg *s = z->head; s; prev = s, s = s->next) {
        if (s->owner != z || s->prev != prev || s->len == 0 || s->buf == NULL)
            return -EFAULT;
        if (s->off > s->buf->size || s->len > s->buf->size - s->off)
            return -EFAULT;
        if (zbuf__buf_refs(s->buf) == 0)
            return -EFAULT;
        len += s->len;
        if (++n > z->nsegs)
            return -EFAULT; /* also stops a cycle */
    }
    if (prev != z->tail || len != z->len || n != z->nsegs)
        return -EFAULT;
    if ((z->head == NULL) != (z->len == 0))
        return -EFAULT;
    return 0;
}

_Static_assert(sizeof(struct zbuf_seg) <= 64, "a segment descriptor fits one cache line");
