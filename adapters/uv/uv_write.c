/* SPDX-License-Identifier: MIT */
/*
 * Writing zbufs to libuv streams.
 *
 * A write is one heap block, struct wreq: the zbuf being written, the
 * application's callback, and as many uv_write_t requests as the zbuf needs
 * (one per ZBUF_UV_BUFS_PER_WRITE segments).  The uv_buf_t arrays are built
 * on the stack, or in a temporary block for long zbufs: libuv copies them
 * into its requests, so they need not outlive uv_write().
 *
 * Two ways through:
 *
 * - Memory-only zbufs (the common case) are queued at once, every request
 *   back to back, so libuv keeps them in order with other writes.  The last
 *   completion deletes the zbuf and calls the application.
 *
 * - A zbuf with file segments is written in steps, one at a time, each step
 *   started from the completion of the previous one (so from a loop
 *   callback, never from inside zbuf_uv_write()): a run of memory segments
 *   goes through uv_write(); a file segment goes through sendfile(2) on the
 *   stream's descriptor, which is only safe while libuv's write queue is
 *   empty, or bytes of a half-written request could be interleaved with the
 *   file's.  When the queue is not empty, or the socket is full, the step
 *   writes one byte of the file through uv_write() instead (a one-byte
 *   bounce copy): its completion means the queue ahead drained and the
 *   socket is writable again.  Each finished step cuts its bytes from the
 *   front of the zbuf, so buffers (and file descriptors closed by release
 *   callbacks) are let go as soon as they are sent.
 *
 * A write through zbuf_uv_stream_write() also knows its adapter stream: it
 * is linked in the list of its loop's pending writes (so that
 * zbuf_uv_stats() can count the memory they pin, each buffer once), and its
 * completion checks the stream's low-water mark.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/sendfile.h>
#include <unistd.h>

#include "uv_internal.h"

/* Bytes one sendfile() step may send before it yields to the loop (through
 * a bounce write), so that one big file does not starve other handles. */
#define SENDFILE_SLICE (1u << 20)

/* uv_buf_t entries kept on the stack; longer arrays are allocated. */
#define STACK_BUFS 64

struct wreq {
    zbuf_t *z;              /* owned; deleted before cb runs */
    uv_stream_t *stream;
    zbuf_uv_stream_t *zs;   /* zbuf_uv_stream_write(): the adapter stream, else NULL */
    struct zbuf_uv__wlink link; /* ... in its loop's pending writes */
    zbuf_uv_write_cb cb;
    void *arg;
    int status;             /* first error seen, or 0 */
    unsigned pending;       /* uv_write requests not yet completed */
    /* Stepped mode (file segments) only: */
    bool stepped;
    size_t step_bytes;      /* bytes of the front of z the current step covers */
    unsigned char bounce;   /* the one byte of a bounce write */
    uv_write_t reqs[];      /* req.data == this */
};

bool zbuf_uv__has_file(const zbuf_t *z)
{
    for (zbuf_seg_t *s = zbuf_seg_first(z); s != NULL; s = zbuf_seg_next(z, s))
        if (zbuf_buf_file(zbuf_seg_buf(z, s), NULL, NULL))
            return true;
    return false;
}

/* Count w in, or out of, its loop's pending stream writes. */
static void account(struct wreq *w, bool in)
{
    struct zbuf_uv_loop_ *l = w->zs->loop_;
    struct zbuf_uv__wlink *k = &w->link;
    if (in) {
        k->z = w->z;
        k->bytes = zbuf_length(w->z);
        k->prev = l->writes.prev;
        k->next = &l->writes;
        k->prev->next = k->next->prev = k;
        l->nwrites++;
        l->write_bytes += k->bytes;
    } else {
        k->prev->next = k->next;
        k->next->prev = k->prev;
        l->nwrites--;
        l->write_bytes -= k->bytes;
    }
}

/* After a stream write completed: the drain callback, when the queue fell
 * to the low-water mark. */
static void check_drain(zbuf_uv_stream_t *zs)
{
    if (!(zs->flags_ & ZBUF_UV__ST_FULL) || (zs->flags_ & ZBUF_UV__ST_CLOSING) ||
        uv_stream_get_write_queue_size(&zs->stream) > zs->write_low_)
        return;
    zs->flags_ &= ~ZBUF_UV__ST_FULL;
    if (zs->drain_cb_ != NULL)
        zs->drain_cb_(zs);
}

/* Inlined into each completion path: the plain writes' paths pay nothing
 * for the stream writes' accounting but a test the compiler folds. */
static inline __attribute__((always_inline)) void finish(struct wreq *w)
{
    zbuf_uv_write_cb cb = w->cb;
    uv_stream_t *stream = w->stream;
    zbuf_uv_stream_t *zs = w->zs;
    void *arg = w->arg;
    int status = w->status;
    if (zs != NULL)
        account(w, false);
    zbuf_delete(w->z); /* release callbacks run here, after the bytes left */
    free(w);
    if (cb)
        cb(stream, status, arg);
    if (zs != NULL)
        check_drain(zs);
}

static void on_write(uv_write_t *req, int status)
{
    struct wreq *w = req->data;
    if (status < 0 && w->status == 0)
        w->status = status;
    if (--w->pending == 0)
        finish(w);
}

/* Queue every byte of a memory-only zbuf; returns 0 or the error of the
 * first uv_write(), in which case nothing was queued. */
static int write_all(struct wreq *w, unsigned nreq)
{
    uv_buf_t stack[STACK_BUFS];
    uv_buf_t *bufs = stack;
    size_t nsegs = zbuf_seg_count(w->z);
    size_t cap = nsegs < ZBUF_UV_BUFS_PER_WRITE ? nsegs : ZBUF_UV_BUFS_PER_WRITE;
    if (cap > STACK_BUFS && (bufs = malloc(cap * sizeof(*bufs))) == NULL)
        return -ENOMEM;

    size_t off = 0, len = zbuf_length(w->z);
    int rc = 0;
    w->pending = 0;
    for (unsigned i = 0; i < nreq; i++) {
        size_t bytes = 0;
        int n;
        if (len == 0) {
            /* Empty zbuf: one empty buffer, completed by libuv in order. */
            bufs[0] = uv_buf_init(NULL, 0);
            n = 1;
        } else {
            n = zbuf_iovec(w->z, off, ZBUF_TO_END, zbuf_uv__iov(bufs), (int)cap, &bytes);
        }
        w->reqs[i].data = w;
        rc = uv_write(&w->reqs[i], w->stream, bufs, (unsigned)n, on_write);
        if (rc < 0) {
            /* The first request failing leaves nothing queued; a later one
             * (unexpected: the stream accepted the first) cannot be undone,
             * so its error goes to the callback of the queued ones. */
            if (i > 0) {
                w->status = rc;
                rc = 0;
            }
            break;
        }
        w->pending++;
        off += bytes;
    }
    if (bufs != stack)
        free(bufs);
    return rc;
}

/* ------------------------------------------------------------ stepped mode */

static void step(struct wreq *w);

static void on_step(uv_write_t *req, int status)
{
    struct wreq *w = req->data;
    w->pending = 0;
    if (status < 0) {
        w->status = status;
        finish(w);
        return;
    }
    /* The step's bytes are written: let their buffers go now.  A cut at 0
     * never allocates, so it cannot fail here. */
    (void)zbuf_cut(w->z, 0, w->step_bytes, NULL);
    w->step_bytes = 0;
    step(w);
}

/* Start a uv_write() of the memory segments at the front of z. */
static int step_memory(struct wreq *w)
{
    uv_buf_t bufs[STACK_BUFS];
    size_t bytes = 0;
    int n = zbuf_iovec(w->z, 0, ZBUF_TO_END, zbuf_uv__iov(bufs), STACK_BUFS, &bytes);
    if (n <= 0)
        return n < 0 ? n : -EINVAL;
    w->step_bytes = bytes;
    w->reqs[0].data = w;
    int rc = uv_write(&w->reqs[0], w->stream, bufs, (unsigned)n, on_step);
    if (rc == 0)
        w->pending = 1;
    return rc;
}

/* Where the file segment at the front of z is. */
static int front_file(struct wreq *w, int *fd, off_t *foff, size_t *len)
{
    zbuf_seg_t *s = zbuf_seg_first(w->z);
    off_t base;
    if (s == NULL || !zbuf_buf_file(zbuf_seg_buf(w->z, s), fd, &base))
        return -EINVAL;
    *foff = base + (off_t)zbuf_seg_buf_offset(w->z, s);
    *len = zbuf_seg_length(w->z, s);
    return 0;
}

/* Write the first byte of the front file segment through libuv: completes
 * once everything queued before it is written and the socket took it. */
static int step_bounce(struct wreq *w, int fd, off_t foff)
{
    ssize_t r;
    do
        r = pread(fd, &w->bounce, 1, foff);
    while (r < 0 && errno == EINTR);
    if (r != 1)
        return r < 0 ? -errno : -EIO;
    zbuf_stats_count_copy(1);
    uv_buf_t b = uv_buf_init((char *)&w->bounce, 1);
    w->step_bytes = 1;
    w->reqs[0].data = w;
    int rc = uv_write(&w->reqs[0], w->stream, &b, 1, on_step);
    if (rc == 0)
        w->pending = 1;
    return rc;
}

/* Send as much of the front file segment as the socket takes, up to one
 * slice.  Returns 0 when a write request is pending (bounce), 1 when the
 * segment is done and the next step may start, or a negative error. */
static int step_file(struct wreq *w)
{
    int fd, sock;
    off_t foff;
    size_t len;
    int rc = front_file(w, &fd, &foff, &len);
    if (rc < 0)
        return rc;
    if (uv_stream_get_write_queue_size(w->stream) > 0)
        return step_bounce(w, fd, foff);
    uv_os_fd_t ofd;
    if ((rc = uv_fileno((const uv_handle_t *)w->stream, &ofd)) < 0)
        return rc;
    sock = ofd;

    size_t sent = 0, want = len < SENDFILE_SLICE ? len : SENDFILE_SLICE;
    off_t o = foff;
    while (sent < want) {
        ssize_t r = sendfile(sock, fd, &o, want - sent);
        if (r > 0) {
            sent += (size_t)r;
        } else if (r == 0) {
            return -EIO; /* the file is shorter than the segment says */
        } else if (errno != EINTR) {
            if (errno != EAGAIN)
                return -errno;
            break;
        }
    }
    if (sent > 0)
        (void)zbuf_cut(w->z, 0, sent, NULL); /* front cut: never allocates */
    if (sent == len)
        return 1;
    /* Socket full or slice used up: wait through a bounce of the next byte. */
    return step_bounce(w, fd, foff + (off_t)sent);
}

/* Run steps until one is pending in libuv, then return; finish at the end
 * or on the first error.  Always called from a loop callback. */
static void step(struct wreq *w)
{
    for (;;) {
        if (zbuf_length(w->z) == 0) {
            finish(w);
            return;
        }
        int rc;
        if (zbuf_seg_data(w->z, zbuf_seg_first(w->z)) != NULL)
            rc = step_memory(w);
        else
            rc = step_file(w);
        if (rc == 0)
            return; /* a write is pending; on_step() continues */
        if (rc < 0) {
            w->status = rc;
            finish(w);
            return;
        }
    }
}

/* The first step of a stepped write, from inside zbuf_uv_write(): always a
 * uv_write() (of the leading memory run, or a bounce of the file's first
 * byte), so that sendfile() and the callback only ever run from the loop. */
static int step_first(struct wreq *w)
{
    if (zbuf_seg_data(w->z, zbuf_seg_first(w->z)) != NULL)
        return step_memory(w);
    int fd;
    off_t foff;
    size_t len;
    int rc = front_file(w, &fd, &foff, &len);
    return rc < 0 ? rc : step_bounce(w, fd, foff);
}

/* ------------------------------------------------------------------ API */

/* zbuf_uv_write(), and zbuf_uv_stream_write() when zs is set; inlined
 * into both, so that zs is a constant in each. */
static inline __attribute__((always_inline)) int
write_zbuf(uv_stream_t *stream, zbuf_uv_stream_t *zs, zbuf_t *z, zbuf_uv_write_cb cb, void *arg)
{
    if (stream == NULL || !zbuf_valid(z))
        return -EINVAL;
    bool stepped = zbuf_uv__has_file(z);
    size_t nsegs = zbuf_seg_count(z);
    unsigned nreq = 1;
    if (!stepped && nsegs > ZBUF_UV_BUFS_PER_WRITE)
        nreq = (unsigned)((nsegs + ZBUF_UV_BUFS_PER_WRITE - 1) / ZBUF_UV_BUFS_PER_WRITE);
    struct wreq *w = malloc(sizeof(*w) + nreq * sizeof(uv_write_t));
    if (w == NULL)
        return -ENOMEM;
    *w = (struct wreq){.z = z, .stream = stream, .zs = zs, .cb = cb, .arg = arg,
                       .stepped = stepped};
    if (zs != NULL)
        account(w, true); /* before the write: a stepped one may cut z at once */

    int rc;
    if (stepped) {
        /* The bounce of step_first() may consume a byte of z only once its
         * write is queued, and a failed first step leaves z whole. */
        rc = step_first(w);
    } else {
        rc = write_all(w, nreq);
    }
    if (rc < 0) {
        if (zs != NULL)
            account(w, false);
        free(w);
        return rc;
    }
    if (zs != NULL && zs->write_high_ > 0 &&
        uv_stream_get_write_queue_size(stream) > zs->write_high_)
        zs->flags_ |= ZBUF_UV__ST_FULL;
    return 0;
}

int zbuf_uv_write(uv_stream_t *stream, zbuf_t *z, zbuf_uv_write_cb cb, void *arg)
{
    return write_zbuf(stream, NULL, z, cb, arg);
}

/* Whether zs may be written through (initialised, not closing). */
static bool stream_usable(const zbuf_uv_stream_t *zs)
{
    return zs != NULL && (zs->flags_ & ZBUF_UV__ST_INITED) && !(zs->flags_ & ZBUF_UV__ST_CLOSING);
}

int zbuf_uv_stream_write(zbuf_uv_stream_t *zs, zbuf_t *z, zbuf_uv_write_cb cb, void *arg)
{
    if (!stream_usable(zs))
        return -EINVAL;
    int rc = zbuf_uv__attach(zs);
    return rc < 0 ? rc : write_zbuf(&zs->stream, zs, z, cb, arg);
}

int zbuf_uv_write_set_watermarks(zbuf_uv_stream_t *zs, size_t high, size_t low,
                                 zbuf_uv_drain_cb cb)
{
    if (!stream_usable(zs) || low > high)
        return -EINVAL;
    int rc = zbuf_uv__attach(zs);
    if (rc < 0)
        return rc;
    zs->write_high_ = high;
    zs->write_low_ = low;
    zs->drain_cb_ = cb;
    if (high == 0)
        zs->flags_ &= ~ZBUF_UV__ST_FULL;
    return 0;
}

bool zbuf_uv_write_full(const zbuf_uv_stream_t *zs)
{
    return zs != NULL && (zs->flags_ & ZBUF_UV__ST_FULL) != 0;
}

static int cmp_ptr(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
    return x < y ? -1 : x > y;
}

int zbuf_uv__write_mem(const struct zbuf_uv_loop_ *l, zbuf_uv_stats_t *st)
{
    size_t n = 0;
    for (const struct zbuf_uv__wlink *k = l->writes.next; k != &l->writes; k = k->next)
        n += zbuf_seg_count(k->z);
    if (n == 0)
        return 0;
    zbuf_buf_t **bufs = malloc(n * sizeof(*bufs));
    if (bufs == NULL)
        return -ENOMEM;
    size_t m = 0;
    for (const struct zbuf_uv__wlink *k = l->writes.next; k != &l->writes; k = k->next) {
        for (zbuf_seg_t *s = zbuf_seg_first(k->z); s != NULL; s = zbuf_seg_next(k->z, s)) {
            zbuf_buf_t *b = zbuf_seg_buf(k->z, s);
            if (!zbuf_buf_file(b, NULL, NULL))
                bufs[m++] = b;
        }
    }
    qsort(bufs, m, sizeof(*bufs), cmp_ptr);
    for (size_t i = 0; i < m; i++) {
        if (i > 0 && bufs[i] == bufs[i - 1])
            continue;
        st->write_bufs++;
        st->write_mem += zbuf_buf_size(bufs[i]);
        if (zbuf_buf_pool(bufs[i]) != NULL)
            st->write_pool_mem += zbuf_buf_size(bufs[i]);
    }
    free(bufs);
    return 0;
}

ssize_t zbuf_uv_try_write(uv_stream_t *stream, zbuf_t *z)
{
    if (stream == NULL || !zbuf_valid(z) || zbuf_length(z) == 0)
        return -EINVAL;
    uv_buf_t stack[STACK_BUFS];
    uv_buf_t *bufs = stack;
    size_t nsegs = zbuf_seg_count(z);
    size_t cap = nsegs < ZBUF_UV_BUFS_PER_WRITE ? nsegs : ZBUF_UV_BUFS_PER_WRITE;
    if (cap > STACK_BUFS && (bufs = malloc(cap * sizeof(*bufs))) == NULL)
        return -ENOMEM;
    int n = zbuf_iovec(z, 0, ZBUF_TO_END, zbuf_uv__iov(bufs), (int)cap, NULL);
    int r = n > 0 ? uv_try_write(stream, bufs, (unsigned)n) : -EINVAL;
    if (bufs != stack)
        free(bufs);
    if (r > 0)
        (void)zbuf_cut(z, 0, (size_t)r, NULL); /* front cut: never allocates */
    return r;
}

size_t zbuf_uv_write_queue_size(const uv_stream_t *stream)
{
    return stream ? uv_stream_get_write_queue_size(stream) : 0;
}
