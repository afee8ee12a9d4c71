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
 * would spin on the readable socket) and registers the stream as a paused
 * reader of its pool.  The bytes stay in the kernel meanwhile; none is lost.
 * UDP handles (uv_udp.c) pause the same way, through the same registry.
 *
 * The registry of paused readers.  Buffers come back to a pool on any
 * thread, and a pool may feed readers on several loops, so the wake-up goes
 * through a watcher of the pool (zbuf_pool_add_notify(), run by the
 * thread that returned the buffer when the pool goes from 0 to 1 free) and
 * a uv_async_t, the one libuv call any thread may make.  The registry is
 * one list per process, under one mutex, of the pools some reader waits on,
 * each with the FIFO of its paused readers (struct zbuf_uv_wait_, embedded
 * in the stream or UDP handle).  An entry is created, and the watcher
 * added, when the first reader pauses on a pool; both go when the last one
 * stops waiting.  The application's own zbuf_pool_set_notify() slot is left
 * alone.
 *
 * - The notify callback (on_refill) sends a wake-up to the first paused
 *   reader of each loop waiting on the pool.  Its argument is NULL and all
 *   it does is look the pool up, by address, in the registry: the core
 *   calls it after dropping the pool's lock, so a call may still be under
 *   way after the watcher was removed, and must find nothing to touch.
 *   (zbuf_pool_notify_sync() would wait for it, but the watcher is removed
 *   under the registry lock, which the callback takes.)
 * - On the loop, the wake-up (on_wake) resumes the loop's paused readers,
 *   each pool's in the order they paused: for each it takes a buffer from
 *   the pool under the registry lock, unregisters it and hands it the
 *   buffer, so the reader resumed first is served first, and draining stops
 *   when the pool is dry again (the rest stay registered for the next
 *   refill).  The resume itself (uv_read_start() and, on error, the
 *   application's callback) runs without the lock.
 * - One uv_async_t per reader, embedded, set up at its first pause and
 *   closed by zbuf_uv_close() with the handle: its memory lives exactly as
 *   long as the reader, no per-loop object needs reference counting, and
 *   the close callback still runs once, after both handles closed.  It is
 *   referenced (keeps the loop alive) only while the reader waits, as the
 *   stopped read would otherwise let uv_run() return under a paused reader.
 *   A wake-up sent to one reader serves the whole loop, so one that stops
 *   waiting with a wake-up still pending passes it to another reader of its
 *   loop (its own handle may be about to close, and libuv drops the pending
 *   callback of a closed handle).
 * - The window between the failed zbuf_pool_get() and the registration: a
 *   buffer that came back in it notified nobody (or not this reader's
 *   loop), so registering re-checks zbuf_pool_available() under the lock
 *   and wakes its own loop if the pool has a buffer.  Any later return is
 *   seen by the notify callback, which takes the same lock.
 * - Lock order: the registry lock, then the pool's (zbuf_pool_get(),
 *   _available(), _add_notify(), _remove_notify() under the registry
 *   lock).  The notify callback runs with the pool's lock released; no
 *   buffer is dropped
 *   while the registry lock is held (that could call on_refill() on the
 *   same thread and deadlock).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "uv_internal.h"

enum {
    INITED = 1u << 0,   /* zbuf_uv_stream_init() ran */
    READING = 1u << 1,  /* the application wants bytes (read_cb_ set) */
    PAUSED = 1u << 2,   /* stopped in libuv for want of buffers */
    WAIT = 1u << 3,     /* wait_ is set up (its async must be closed) */
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
static void end_reading(zbuf_uv_stream_t *zs, ssize_t status);

/* A buffer came back for the paused stream: b becomes the buffer of its
 * next read. */
static void resume_reading(zbuf_uv__wait_t *w, zbuf_buf_t *b)
{
    zbuf_uv_stream_t *zs = ZBUF_UV__CONTAINER_OF(w, zbuf_uv_stream_t, wait_);
    zs->flags_ &= ~PAUSED;
    drop_cur(zs); /* none: the pause came from a failed zbuf_pool_get() */
    zs->cur_ = b;
    int rc = uv_read_start(&zs->stream, on_alloc, on_read);
    if (rc < 0)
        end_reading(zs, rc);
}

/* Stop libuv reading and wait for the pool to have a buffer again. */
static int pause_reading(zbuf_uv_stream_t *zs)
{
    int rc;
    if (!(zs->flags_ & WAIT)) {
        if ((rc = zbuf_uv__wait_init(&zs->wait_, zs->handle.loop, resume_reading)) < 0)
            return rc;
        zs->flags_ |= WAIT;
    }
    uv_read_stop(&zs->stream);
    if ((rc = zbuf_uv__wait_start(&zs->wait_, zs->pool_)) < 0)
        return rc;
    zs->flags_ |= PAUSED;
    return 0;
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
    if (zs->flags_ & WAIT)
        zbuf_uv__wait_stop(&zs->wait_); /* also hands on a pending wake-up */
    if ((zs->flags_ & (READING | PAUSED)) == READING)
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

static void on_close_wait(uv_handle_t *h)
{
    closed_one(ZBUF_UV__CONTAINER_OF(h, zbuf_uv_stream_t, wait_.async));
}

void zbuf_uv_close(zbuf_uv_stream_t *zs, uv_close_cb cb)
{
    if (zs == NULL || !(zs->flags_ & INITED) || (zs->flags_ & CLOSING))
        return;
    zbuf_uv_read_stop(zs);
    zs->flags_ |= CLOSING;
    zs->close_cb_ = cb;
    zs->closing_ = 1;
    if (zs->flags_ & WAIT) {
        zs->closing_++;
        uv_close((uv_handle_t *)&zs->wait_.async, on_close_wait);
    }
    uv_close(&zs->handle, on_close_stream);
}

/* ------------------------------------------------ waiting for pool buffers */

/* The paused readers of one pool, in the order they paused. */
struct waiters {
    zbuf_pool_t *pool; /* the key: on_refill() compares it, never follows it */
    zbuf_uv__wait_t *head, *tail;
    struct waiters *next;
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct waiters *reg; /* one entry per pool with a paused reader; under reg_lock */

/* Under reg_lock. */
static struct waiters *find_waiters(const zbuf_pool_t *p)
{
    struct waiters *e = reg;
    while (e != NULL && e->pool != p)
        e = e->next;
    return e;
}

/* Under reg_lock: ask for one on_wake() on w's loop.  uv_async_send()
 * coalesces by itself; `woken` also spares the write to the loop's eventfd
 * when a wake-up is pending already. */
static void wake(zbuf_uv__wait_t *w)
{
    if (!w->woken) {
        w->woken = 1;
        uv_async_send(&w->async);
    }
}

static void on_refill(zbuf_pool_t *p, void *arg);

/* Under reg_lock: take w off e's list; an emptied entry goes, and with it
 * the adapter's watcher on the pool. */
static void unlink_waiter(struct waiters *e, zbuf_uv__wait_t *w)
{
    *(w->prev != NULL ? &w->prev->next : &e->head) = w->next;
    *(w->next != NULL ? &w->next->prev : &e->tail) = w->prev;
    w->prev = w->next = NULL;
    w->pool = NULL;
    if (e->head != NULL)
        return;
    struct waiters **pe = &reg;
    while (*pe != e)
        pe = &(*pe)->next;
    *pe = e->next;
    zbuf_pool_remove_notify(e->pool, on_refill, NULL);
    free(e);
}

/* The pool's notify callback, on whichever thread returned a buffer (maybe
 * after the slot was cleared or the pool deleted: see the file comment). */
static void on_refill(zbuf_pool_t *p, void *arg)
{
    (void)arg;
    uv_loop_t *seen[8]; /* loops woken so far; past 8, duplicates cost a syscall each */
    size_t nseen = 0;
    pthread_mutex_lock(&reg_lock);
    struct waiters *e = find_waiters(p);
    for (zbuf_uv__wait_t *w = e != NULL ? e->head : NULL; w != NULL; w = w->next) {
        size_t i = 0;
        while (i < nseen && seen[i] != w->async.loop)
            i++;
        if (i < nseen)
            continue; /* its loop's first reader was woken: that serves it */
        if (nseen < sizeof(seen) / sizeof(seen[0]))
            seen[nseen++] = w->async.loop;
        wake(w);
    }
    pthread_mutex_unlock(&reg_lock);
}

/* Under reg_lock: the first paused reader of loop to which a pool gives a
 * buffer now (*b), taken off the registry; NULL if none. */
static zbuf_uv__wait_t *next_to_resume(const uv_loop_t *loop, zbuf_buf_t **b)
{
    for (struct waiters *e = reg; e != NULL; e = e->next) {
        zbuf_uv__wait_t *w = e->head;
        while (w != NULL && w->async.loop != loop)
            w = w->next;
        if (w != NULL && zbuf_pool_get(e->pool, b) == 0) {
            unlink_waiter(e, w); /* may free e: return at once */
            return w;
        }
    }
    return NULL;
}

/* A wake-up on the loop: resume its paused readers while their pools have
 * buffers, each pool's in the order they paused. */
static void on_wake(uv_async_t *a)
{
    zbuf_uv__wait_t *w = ZBUF_UV__CONTAINER_OF(a, zbuf_uv__wait_t, async);
    zbuf_buf_t *b = NULL;
    pthread_mutex_lock(&reg_lock);
    w->woken = 0; /* before draining: a refill from now on wakes again */
    while ((w = next_to_resume(a->loop, &b)) != NULL) {
        pthread_mutex_unlock(&reg_lock);
        uv_unref((uv_handle_t *)&w->async);
        w->resume(w, b); /* may stop, close or pause any reader */
        pthread_mutex_lock(&reg_lock);
    }
    pthread_mutex_unlock(&reg_lock);
}

int zbuf_uv__wait_init(zbuf_uv__wait_t *w, uv_loop_t *loop, zbuf_uv__resume_fn resume)
{
    int rc = uv_async_init(loop, &w->async, on_wake);
    if (rc < 0)
        return rc;
    uv_unref((uv_handle_t *)&w->async);
    w->prev = w->next = NULL;
    w->pool = NULL;
    w->resume = resume;
    w->woken = 0;
    return 0;
}

int zbuf_uv__wait_start(zbuf_uv__wait_t *w, zbuf_pool_t *pool)
{
    int rc = 0;
    pthread_mutex_lock(&reg_lock);
    struct waiters *e = find_waiters(pool);
    if (e == NULL) {
        if ((e = calloc(1, sizeof(*e))) == NULL) {
            rc = -ENOMEM;
        } else if ((rc = zbuf_pool_add_notify(pool, on_refill, NULL)) < 0) {
            free(e);
        } else {
            e->pool = pool;
            e->next = reg;
            reg = e;
        }
    }
    if (rc == 0) {
        w->pool = pool;
        w->prev = e->tail;
        w->next = NULL;
        *(e->tail != NULL ? &e->tail->next : &e->head) = w;
        e->tail = w;
        /* A buffer back since the failed zbuf_pool_get() told nobody. */
        if (zbuf_pool_available(pool) > 0)
            wake(w);
    }
    pthread_mutex_unlock(&reg_lock);
    if (rc == 0)
        uv_ref((uv_handle_t *)&w->async);
    return rc;
}

void zbuf_uv__wait_stop(zbuf_uv__wait_t *w)
{
    bool waited = false;
    pthread_mutex_lock(&reg_lock);
    if (w->pool != NULL) {
        unlink_waiter(find_waiters(w->pool), w);
        waited = true;
    }
    if (w->woken) {
        /* The pending wake-up may be lost with w's handle: give it to
         * another paused reader of the loop, if any. */
        zbuf_uv__wait_t *x = NULL;
        for (struct waiters *e = reg; e != NULL && x == NULL; e = e->next)
            for (x = e->head; x != NULL && x->async.loop != w->async.loop;)
                x = x->next;
        w->woken = 0;
        if (x != NULL)
            wake(x);
    }
    pthread_mutex_unlock(&reg_lock);
    if (waited)
        uv_unref((uv_handle_t *)&w->async);
}
