/*
 * Reading libuv streams as zbufs.
 *
 * libuv asks for memory (alloc callback) right before each read() and hands
 * it back with the result (read callback), synchronously, in the same loop
 * iteration.  The adapter keeps one pool buffer, cur_, and lends libuv its
 * free part, bytes [cur_used_, size).  What the kernel put there becomes a
 * segment of a new zbuf (zbuf_append_ref(): the zbuf takes its own
 * reference, no copy) and cur_used_ moves past it.  Successive reads thus
 * pack into one buffer until less than min_room() is left; then the adapter
 * drops its reference, and the buffer goes back to the pool once the zbufs
 * holding its bytes are deleted.
 *
 * When the socket is drained (libuv's read returns EAGAIN) the adapter
 * keeps the buffer only if zbufs of the application still use it (it is
 * pinned anyway, and its tail will take the next read); a buffer only the
 * adapter holds goes back to the pool, so an idle connection pins at most
 * one buffer, and only one its own messages keep alive.  A buffer only the
 * adapter references is reused from its start.
 *
 * Writing into the free part of a buffer other zbufs reference is safe:
 * those zbufs' segments cover only bytes before cur_used_, and the core
 * never writes into a buffer with more than one reference (our handle is
 * one), so nobody else writes past cur_used_ while we hold it.
 *
 * Pool exhaustion.  When zbuf_pool_get() fails, the alloc callback returns
 * an empty buffer, libuv reads nothing and reports UV_ENOBUFS.  libuv does
 * not stop polling by itself, so the adapter stops reading (or the loop
 * would spin on the readable socket) and starts the resume_ timer, which
 * polls the pool every ZBUF_UV__RESUME_MS and restarts reading once a buffer
 * is free.  The bytes stay in the kernel meanwhile; none is lost.
 */
#include <errno.h>

#include "uv_internal.h"

enum {
    INITED = 1u << 0,   /* zbuf_uv_stream_init() ran */
    READING = 1u << 1,  /* the application wants bytes (read_cb_ set) */
    PAUSED = 1u << 2,   /* stopped in libuv for want of buffers */
    TIMER = 1u << 3,    /* resume_ is initialised (must be closed) */
    CLOSING = 1u << 4,  /* zbuf_uv_close() was called */
};

static zbuf_uv_stream_t *of_stream(uv_stream_t *s)
{
    return ZBUF_UV__CONTAINER_OF(s, zbuf_uv_stream_t, stream);
}

/* Keep filling the current buffer while at least this much is free: an
 * eighth of a buffer, at most 4 KiB, so that a read still gets a useful
 * amount of room and small buffers are used whole. */
static size_t min_room(size_t bufsize)
{
    size_t m = bufsize / 8;
    return m == 0 ? 1 : m > 4096 ? 4096 : m;
}

static void drop_cur(zbuf_uv_stream_t *zs)
{
    zbuf_buf_unref(zs->cur_);
    zs->cur_ = NULL;
    zs->cur_used_ = 0;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested; /* the pool decides the size */
    zbuf_uv_stream_t *zs = ZBUF_UV__CONTAINER_OF(h, zbuf_uv_stream_t, handle);
    if (zs->cur_ != NULL) {
        size_t size = zbuf_buf_size(zs->cur_);
        if (zbuf_buf_refs(zs->cur_) == 1)
            zs->cur_used_ = 0; /* every zbuf of it is gone: all of it is free */
        if (size - zs->cur_used_ >= min_room(size)) {
            *buf = zbuf_uv__lend((char *)zbuf_buf_data(zs->cur_) + zs->cur_used_,
                                 size - zs->cur_used_);
            return;
        }
        drop_cur(zs);
    }
    if (zbuf_pool_get(zs->pool_, &zs->cur_) != 0) {
        zs->cur_ = NULL;
        *buf = uv_buf_init(NULL, 0); /* libuv answers with UV_ENOBUFS */
        return;
    }
    zs->cur_used_ = 0;
    *buf = zbuf_uv__lend(zbuf_buf_data(zs->cur_), zbuf_buf_size(zs->cur_));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

static void on_resume(uv_timer_t *t)
{
    zbuf_uv_stream_t *zs = ZBUF_UV__CONTAINER_OF(t, zbuf_uv_stream_t, resume_);
    if (zbuf_pool_available(zs->pool_) == 0)
        return;
    uv_timer_stop(t);
    zs->flags_ &= ~PAUSED;
    int rc = uv_read_start(&zs->stream, on_alloc, on_read);
    if (rc < 0) {
        zbuf_uv_read_cb cb = zs->read_cb_;
        zs->flags_ &= ~READING;
        zs->read_cb_ = NULL;
        cb(zs, rc, NULL);
    }
}

/* Stop libuv reading and poll the pool until a buffer is free. */
static int pause_reading(zbuf_uv_stream_t *zs)
{
    int rc;
    if (!(zs->flags_ & TIMER)) {
        if ((rc = uv_timer_init(zs->handle.loop, &zs->resume_)) < 0)
            return rc;
        zs->flags_ |= TIMER;
    }
    uv_read_stop(&zs->stream);
    zs->flags_ |= PAUSED;
    return uv_timer_start(&zs->resume_, on_resume, ZBUF_UV__RESUME_MS, ZBUF_UV__RESUME_MS);
}

/* Reading ended (EOF or error): tell the application last, after the state
 * is consistent, since it may close the stream from its callback. */
static void end_reading(zbuf_uv_stream_t *zs, ssize_t status)
{
    zbuf_uv_read_cb cb = zs->read_cb_;
    zbuf_uv_read_stop(zs);
    cb(zs, status, NULL);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf; /* always the free part of cur_, handed out by on_alloc() */
    zbuf_uv_stream_t *zs = of_stream(s);
    if (nread > 0) {
        zbuf_t *z;
        if (zbuf_create(&z) != 0) {
            end_reading(zs, -ENOMEM);
            return;
        }
        if (zbuf_append_ref(z, zs->cur_, zs->cur_used_, (size_t)nread) != 0) {
            zbuf_delete(z);
            end_reading(zs, -ENOMEM);
            return;
        }
        zs->cur_used_ += (size_t)nread;
        size_t size = zbuf_buf_size(zs->cur_);
        if (size - zs->cur_used_ < min_room(size))
            drop_cur(zs); /* full: let it go back to the pool with its zbufs */
        zs->read_cb_(zs, nread, z);
    } else if (nread == UV_ENOBUFS) {
        int rc = pause_reading(zs);
        if (rc < 0)
            end_reading(zs, rc);
        else
            zs->read_cb_(zs, UV_ENOBUFS, NULL);
    } else if (nread < 0) {
        end_reading(zs, nread); /* UV_EOF, UV_ECONNRESET ... */
    } else if (zs->cur_ != NULL && (zs->cur_used_ == 0 || zbuf_buf_refs(zs->cur_) == 1)) {
        /* nread == 0: EAGAIN, the socket is drained.  A buffer no zbuf uses
         * goes back to the pool, so that idle connections hold none; one
         * that received zbufs still use stays, its free tail for the next
         * read. */
        drop_cur(zs);
    }
}

int zbuf_uv_stream_init(zbuf_uv_stream_t *zs)
{
    if (zs == NULL)
        return -EINVAL;
    uv_handle_type t = zs->handle.type;
    if (t != UV_TCP && t != UV_NAMED_PIPE && t != UV_TTY)
        return -EINVAL;
    zs->pool_ = NULL;
    zs->read_cb_ = NULL;
    zs->cur_ = NULL;
    zs->cur_used_ = 0;
    zs->flags_ = INITED;
    zs->closing_ = 0;
    zs->close_cb_ = NULL;
    return 0;
}

int zbuf_uv_read_start(zbuf_uv_stream_t *zs, zbuf_pool_t *pool, zbuf_uv_read_cb cb)
{
    if (zs == NULL || !(zs->flags_ & INITED) || (zs->flags_ & CLOSING) || pool == NULL ||
        cb == NULL)
        return -EINVAL;
    if (zs->flags_ & READING)
        return -EALREADY;
    zs->pool_ = pool;
    zs->read_cb_ = cb;
    int rc = uv_read_start(&zs->stream, on_alloc, on_read);
    if (rc < 0) {
        zs->read_cb_ = NULL;
        return rc;
    }
    zs->flags_ |= READING;
    return 0;
}

int zbuf_uv_read_stop(zbuf_uv_stream_t *zs)
{
    if (zs == NULL || !(zs->flags_ & INITED))
        return -EINVAL;
    if (zs->flags_ & PAUSED)
        uv_timer_stop(&zs->resume_);
    else if (zs->flags_ & READING)
        uv_read_stop(&zs->stream);
    zs->flags_ &= ~(READING | PAUSED);
    zs->read_cb_ = NULL;
    drop_cur(zs);
    return 0;
}

bool zbuf_uv_read_paused(const zbuf_uv_stream_t *zs)
{
    return zs != NULL && (zs->flags_ & PAUSED) != 0;
}

static void closed_one(zbuf_uv_stream_t *zs)
{
    if (--zs->closing_ == 0 && zs->close_cb_ != NULL)
        zs->close_cb_(&zs->handle);
}

static void on_close_stream(uv_handle_t *h)
{
    closed_one(ZBUF_UV__CONTAINER_OF(h, zbuf_uv_stream_t, handle));
}

static void on_close_timer(uv_handle_t *h)
{
    closed_one(ZBUF_UV__CONTAINER_OF(h, zbuf_uv_stream_t, resume_));
}

void zbuf_uv_close(zbuf_uv_stream_t *zs, uv_close_cb cb)
{
    if (zs == NULL || !(zs->flags_ & INITED) || (zs->flags_ & CLOSING))
        return;
    zbuf_uv_read_stop(zs);
    zs->flags_ |= CLOSING;
    zs->close_cb_ = cb;
    zs->closing_ = 1;
    if (zs->flags_ & TIMER) {
        zs->closing_++;
        uv_close((uv_handle_t *)&zs->resume_, on_close_timer);
    }
    uv_close(&zs->handle, on_close_stream);
}
