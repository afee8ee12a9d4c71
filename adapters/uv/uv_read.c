/* SPDX-License-Identifier: MIT */
/*
 * Reading libuv streams as zbufs.
 *
 * libuv asks for memory (alloc callback) right before each read() and hands
 * it back with the result (read callback), synchronously, in the same loop
 * iteration.  The adapter keeps one pool buffer, cur_, and lends libuv its
 * free part, bytes [cur_used_, size).  What the kernel put there becomes a
 * segment of a new zbuf (zbuf_append_ref(): the zbuf takes its own
 * reference, no copy) and cur_used_ moves past it.  Successive reads thus
 * pack into one buffer, so that small messages the application keeps (a
 * decoder's partial frame, arriving a few bytes at a time) do not each hold
 * a whole buffer.
 *
 * When is cur_ let go (its reference dropped, so that it goes back to the
 * pool once the zbufs holding its bytes are deleted)?
 *
 * - When it is full, at once.
 * - When less than min_room() is left, at the next read, if another buffer
 *   can be had; if not (the stream's limit is reached, or the pool is dry)
 *   the small tail is lent too, down to the last byte, before the stream
 *   pauses.  The frame decoder counts on this (zbuf/frame.h): a stream
 *   that cannot grow uses all it has.
 * - When the read callback returns and no zbuf uses it any more (the
 *   application deleted them, or they were empty): an idle connection
 *   whose bytes were handled keeps nothing.  This also covers the read
 *   that drained the socket, after which libuv does not always call again
 *   (it makes no EAGAIN read after a short one).
 * - When the socket is drained (libuv reports EAGAIN) and no zbuf uses it.
 * - When the zbufs that used it are deleted later, outside the read
 *   callback, it is *kept idle*: only the adapter references it.  The next
 *   read reuses it from its start; and since a stream that keeps a buffer
 *   past its read callback registers as a holder of the pool, any reader
 *   that finds the pool dry asks the holders to give back such buffers
 *   (see "the registry" below).  zbuf_uv_stats() reports them meanwhile.
 *
 * Writing into the free part of a buffer other zbufs reference is safe:
 * those zbufs' segments cover only bytes before cur_used_, and the core
 * never writes into a buffer with more than one reference (our handle is
 * one), so nobody else writes past cur_used_ while we hold it.
 *
 * One stream's share.  Buffers are taken through the stream's quota of the
 * pool (zbuf_pool_quota_get()), which counts every buffer taken for the
 * stream until it is back in the pool, however the application passed its
 * zbufs around; zbuf_uv_read_set_limit() caps it.  The quota's callback
 * says when a full quota has room again.
 *
 * Pausing.  When no buffer can be had, the alloc callback returns an empty
 * buffer, libuv reads nothing and reports UV_ENOBUFS.  libuv does not stop
 * polling by itself, so the adapter stops reading (or the loop would spin
 * on the readable socket) and registers the stream as a paused reader: of
 * its pool when the pool is dry, of its quota when the stream holds its
 * limit.  The bytes stay in the kernel meanwhile; none is lost.  UDP
 * handles (uv_udp.c) pause the same way on their pool.
 *
 * The registry.  Buffers come back to a pool on any thread, and a pool may
 * feed readers on several loops, so the wake-up goes through a watcher of
 * the pool (zbuf_pool_add_notify(), run by the thread that returned the
 * buffer when the pool goes from 0 to 1 free), or the quota's callback,
 * and a uv_async_t, the one libuv call any thread may make.  The registry
 * is one list per process, under one mutex, of the pools some reader
 * waits on or keeps a buffer of, each with the FIFO of its paused readers
 * and the list of its holders (struct zbuf_uv_wait_, embedded in the stream
 * or UDP handle).  An entry is created when the first reader pauses on or
 * keeps a buffer of a pool, the watcher is added while some reader waits;
 * both go when they are no longer needed.  The application's own
 * zbuf_pool_set_notify() slot is left alone.
 *
 * - The notify callback (on_refill) sends a wake-up to the first paused
 *   reader of each loop waiting on the pool.  Its argument is NULL and all
 *   it does is look the pool up, by address, in the registry: the core
 *   calls it after dropping the pool's lock, so a call may still be under
 *   way after the watcher was removed, and must find nothing to touch.
 *   (zbuf_pool_notify_sync() would wait for it, but the watcher is removed
 *   under the registry lock, which the callback takes.)  The quota
 *   callback (zbuf_uv__quota_room) wakes the reader the quota belongs to;
 *   that one is waited for by zbuf_pool_quota_delete() at close, before the
 *   reader's memory can go.
 * - On the loop, the wake-up (on_wake) first does what was asked of its own
 *   reader (give back an idle kept buffer; retry its quota), then resumes
 *   the loop's paused readers, each pool's in the order they paused: for
 *   each it takes a buffer under the registry lock, unregisters it and
 *   hands it the buffer, so the reader resumed first is served first, and
 *   draining stops when the pool is dry again (the rest stay registered
 *   for the next refill).  A reader whose quota refuses the buffer moves to
 *   waiting on its quota.  The resume itself (uv_read_start(), the
 *   application's resume or error callback) runs without the lock.
 * - A reader pausing on a dry pool asks each holder of the pool, through
 *   its own uv_async_t, to give back its kept buffer if nobody uses it: the
 *   holder does so on its loop's thread, the pool refills, and the paused
 *   reader is woken as above.  So idle holdings cost a buffer only while
 *   nobody else needs one.
 * - One uv_async_t per reader, embedded, set up with the reader and closed
 *   by zbuf_uv_close() with the handle: its memory lives exactly as long as
 *   the reader, no per-loop object needs reference counting, and the close
 *   callback still runs once, after both handles closed.  It is referenced
 *   (keeps the loop alive) only while the reader waits, as the stopped read
 *   would otherwise let uv_run() return under a paused reader.  A wake-up
 *   sent to one reader serves the whole loop, so one that stops waiting
 *   with a wake-up still pending passes it to another reader of its loop
 *   (its own handle may be about to close, and libuv drops the pending
 *   callback of a closed handle).
 * - The window between the failed get and the registration: a buffer that
 *   came back in it notified nobody (or not this reader's loop), so
 *   registering re-checks the pool (or the quota) under the lock and wakes
 *   its own loop if there is room.  Any later return is seen by the
 *   callbacks, which take the same lock.
 * - Lock order: the registry lock, then the pool's (zbuf_pool_get(),
 *   _available(), _add_notify(), _remove_notify(), the quota calls under
 *   the registry lock).  The callbacks run with the pool's lock released;
 *   no buffer is dropped while the registry lock is held (that could call
 *   on_refill() on the same thread and deadlock).
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "uv_internal.h"

enum {
    INITED = ZBUF_UV__ST_INITED, /* zbuf_uv_stream_init() ran */
    READING = 1u << 1,  /* the application wants bytes (read_cb_ set) */
    PAUSED = 1u << 2,   /* stopped in libuv for want of buffers */
    WAIT = 1u << 3,     /* wait_ is set up (its async must be closed) */
    CLOSING = ZBUF_UV__ST_CLOSING, /* zbuf_uv_close() was called */
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

static void set_cur(zbuf_uv_stream_t *zs, zbuf_buf_t *b)
{
    zs->cur_ = b;
    zs->cur_used_ = 0;
}

static void drop_cur(zbuf_uv_stream_t *zs)
{
    if (zs->cur_ == NULL)
        return;
    if (zs->wait_.hpool != NULL)
        zbuf_uv__hold(&zs->wait_, NULL);
    zbuf_buf_unref(zs->cur_); /* after: it may notify the registry */
    zs->cur_ = NULL;
    zs->cur_used_ = 0;
}

/* Whether no zbuf uses the kept buffer any more (only our reference).  The
 * check has acquire ordering: a zbuf deleted on another thread is done
 * with the bytes before the next read overwrites them. */
static bool cur_idle(const zbuf_uv_stream_t *zs)
{
    return zs->cur_ != NULL && zbuf_buf_writable(zs->cur_);
}

/* The read callback returned, or the socket is drained: the buffer goes
 * back if no zbuf uses it; if one does, the stream keeps it for its next
 * read, registered as a holder of the pool (once: a buffer filled and let
 * go within a burst of reads never is). */
static void keep_or_drop(zbuf_uv_stream_t *zs)
{
    if (cur_idle(zs))
        drop_cur(zs);
    else if (zs->cur_ != NULL && zs->wait_.hpool == NULL)
        zbuf_uv__hold(&zs->wait_, zs->pool_);
}

/* A new buffer from the stream's share of the pool, or an error kept for
 * the pause: -EDQUOT (its limit) or -ENOBUFS (the pool is dry). */
static int get_buf(zbuf_uv_stream_t *zs, zbuf_buf_t **b)
{
    int rc = zbuf_pool_quota_get(zs->quota_, b);
    if (rc < 0)
        zs->get_err_ = rc;
    return rc;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested; /* the pool decides the size */
    zbuf_uv_stream_t *zs = ZBUF_UV__CONTAINER_OF(h, zbuf_uv_stream_t, handle);
    zbuf_buf_t *b;
    if (zs->cur_ != NULL) {
        size_t size = zbuf_buf_size(zs->cur_);
        if (cur_idle(zs))
            zs->cur_used_ = 0; /* every zbuf of it is gone: all of it is free */
        size_t room = size - zs->cur_used_;
        if (room < min_room(size) && get_buf(zs, &b) == 0) {
            drop_cur(zs);
            set_cur(zs, b);
            room = size;
        }
        /* Room enough, or the small tail of a stream that cannot grow. */
        if (room > 0) {
            *buf = zbuf_uv__lend((char *)zbuf_buf_data(zs->cur_) + zs->cur_used_, room);
            return;
        }
        drop_cur(zs); /* full, and no other buffer to be had */
        *buf = uv_buf_init(NULL, 0);
        return;
    }
    if (get_buf(zs, &b) != 0) {
        *buf = uv_buf_init(NULL, 0); /* libuv answers with UV_ENOBUFS */
        return;
    }
    set_cur(zs, b);
    *buf = zbuf_uv__lend(zbuf_buf_data(b), zbuf_buf_size(b));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
static void end_reading(zbuf_uv_stream_t *zs, ssize_t status);

/* A buffer came back for the paused stream: b becomes the buffer of its
 * next read. */
static void resume_reading(zbuf_uv__wait_t *w, zbuf_buf_t *b)
{
    zbuf_uv_stream_t *zs = ZBUF_UV__CONTAINER_OF(w, zbuf_uv_stream_t, wait_);
    zs->flags_ &= ~PAUSED;
    drop_cur(zs); /* none: the pause came from a failed get */
    if (b != NULL)
        set_cur(zs, b);
    int rc = uv_read_start(&zs->stream, on_alloc, on_read);
    if (rc < 0)
        end_reading(zs, rc);
    else if (zs->resume_cb_ != NULL)
        zs->resume_cb_(zs);
}

/* A reader of the pool found it dry: give back the kept buffer if no zbuf
 * uses it. */
static void reclaim_kept(zbuf_uv__wait_t *w)
{
    zbuf_uv_stream_t *zs = ZBUF_UV__CONTAINER_OF(w, zbuf_uv_stream_t, wait_);
    if (cur_idle(zs))
        drop_cur(zs);
}

/* The registry's view of the stream, set up once. */
static int setup_wait(zbuf_uv_stream_t *zs)
{
    if (zs->flags_ & WAIT)
        return 0;
    int rc = zbuf_uv__wait_init(&zs->wait_, zs->handle.loop, resume_reading, reclaim_kept);
    if (rc == 0)
        zs->flags_ |= WAIT;
    return rc;
}

/* Stop libuv reading and wait for a buffer to come back. */
static int pause_reading(zbuf_uv_stream_t *zs)
{
    uv_read_stop(&zs->stream);
    zs->wait_.quota = zs->quota_;
    zs->wait_.rpool = zs->pool_;
    if (zs->get_err_ == -EDQUOT) {
        zbuf_uv__wait_quota(&zs->wait_);
    } else {
        int rc = zbuf_uv__wait_start(&zs->wait_, zs->pool_);
        if (rc < 0)
            return rc;
    }
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
        if (zs->cur_used_ == zbuf_buf_size(zs->cur_))
            drop_cur(zs); /* full: let it go back to the pool with its zbufs */
        zs->read_cb_(zs, nread, z);
        /* The callback may have stopped, restarted or closed the stream,
         * which drops cur_.  A buffer its zbufs no longer use goes back now:
         * the socket may be drained, and libuv may not call again. */
        keep_or_drop(zs);
    } else if (nread == UV_ENOBUFS) {
        int rc = pause_reading(zs);
        if (rc < 0)
            end_reading(zs, rc);
        else
            zs->read_cb_(zs, UV_ENOBUFS, NULL);
    } else if (nread < 0) {
        end_reading(zs, nread); /* UV_EOF, UV_ECONNRESET ... */
    } else if (zs->cur_ != NULL && zs->cur_used_ == 0) {
        drop_cur(zs); /* nread == 0: EAGAIN, the socket is drained */
    } else {
        keep_or_drop(zs);
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
    zs->quota_ = NULL;
    zs->read_limit_ = 0;
    zs->read_cb_ = NULL;
    zs->resume_cb_ = NULL;
    zs->cur_ = NULL;
    zs->cur_used_ = 0;
    zs->get_err_ = 0;
    zs->loop_ = NULL;
    zs->lprev_ = zs->lnext_ = NULL;
    zs->write_high_ = zs->write_low_ = 0;
    zs->drain_cb_ = NULL;
    zs->flags_ = INITED;
    zs->closing_ = 0;
    zs->close_cb_ = NULL;
    return 0;
}

static bool usable(const zbuf_uv_stream_t *zs)
{
    return zs != NULL && (zs->flags_ & INITED) && !(zs->flags_ & CLOSING);
}

/* The stream's share of pool: made at the first read_start, remade when
 * the pool changes. */
static int quota_for(zbuf_uv_stream_t *zs, zbuf_pool_t *pool)
{
    if (zs->quota_ != NULL && zs->pool_ == pool)
        return 0;
    zbuf_pool_quota_t *q;
    size_t limit = zs->read_limit_ ? zs->read_limit_ : SIZE_MAX;
    int rc = zbuf_pool_quota_create(pool, limit, zbuf_uv__quota_room, &zs->wait_, &q);
    if (rc < 0)
        return rc;
    zbuf_pool_quota_delete(zs->quota_); /* no read, no wait: nothing refers to it */
    zs->quota_ = q;
    return 0;
}

int zbuf_uv_read_start(zbuf_uv_stream_t *zs, zbuf_pool_t *pool, zbuf_uv_read_cb cb)
{
    if (!usable(zs) || pool == NULL || cb == NULL)
        return -EINVAL;
    if (zs->flags_ & READING)
        return -EALREADY;
    int rc;
    if ((rc = setup_wait(zs)) < 0 || (rc = zbuf_uv__attach(zs)) < 0 ||
        (rc = quota_for(zs, pool)) < 0)
        return rc;
    zs->pool_ = pool;
    zs->read_cb_ = cb;
    rc = uv_read_start(&zs->stream, on_alloc, on_read);
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

int zbuf_uv_read_set_limit(zbuf_uv_stream_t *zs, size_t max_bufs)
{
    if (!usable(zs))
        return -EINVAL;
    int rc = zbuf_uv__attach(zs);
    if (rc < 0)
        return rc;
    zs->read_limit_ = max_bufs;
    if (zs->quota_ == NULL)
        return 0;
    if ((rc = zbuf_pool_quota_set_limit(zs->quota_, max_bufs ? max_bufs : SIZE_MAX)) < 0)
        return rc;
    /* A raised limit calls no quota callback: wake a reader paused at the
     * old one ourselves (it checks the quota again and keeps waiting if it
     * is still full). */
    if ((zs->flags_ & PAUSED) && zs->wait_.quota_wait)
        zbuf_uv__quota_room(zs->quota_, &zs->wait_);
    return 0;
}

size_t zbuf_uv_read_held(const zbuf_uv_stream_t *zs)
{
    return zs != NULL ? zbuf_pool_quota_held(zs->quota_) : 0;
}

int zbuf_uv_read_set_resume_cb(zbuf_uv_stream_t *zs, zbuf_uv_resume_cb cb)
{
    if (!usable(zs))
        return -EINVAL;
    zs->resume_cb_ = cb;
    return 0;
}

void zbuf_uv__read_stats(const zbuf_uv_stream_t *zs, zbuf_uv_stats_t *st)
{
    st->reading += (zs->flags_ & READING) != 0;
    st->paused += (zs->flags_ & PAUSED) != 0;
    st->read_held += zbuf_pool_quota_held(zs->quota_);
    st->read_kept += zs->cur_ != NULL;
    st->read_kept_idle += cur_idle(zs);
}

static void closed_one(zbuf_uv_stream_t *zs)
{
    if (--zs->closing_ > 0)
        return;
    zbuf_uv__release(zs); /* its writes have completed by now */
    if (zs->close_cb_ != NULL)
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
    if (!usable(zs))
        return;
    zbuf_uv_read_stop(zs);
    zbuf_uv__detach(zs);
    /* Waits for a quota callback running on another thread: after this
     * none refers to wait_, whose async can close. */
    zbuf_pool_quota_delete(zs->quota_);
    zs->quota_ = NULL;
    zs->flags_ |= CLOSING;
    zs->close_cb_ = cb;
    zs->closing_ = 1;
    if (zs->flags_ & WAIT) {
        zs->closing_++;
        uv_close((uv_handle_t *)&zs->wait_.async, on_close_wait);
    }
    uv_close(&zs->handle, on_close_stream);
}

/* ------------------------------------------------ the registry of readers */

/* The readers of one pool: paused ones in the order they paused, and the
 * holders of a kept buffer. */
struct pool_entry {
    zbuf_pool_t *pool; /* the key: on_refill() compares it, never follows it */
    zbuf_uv__wait_t *head, *tail;
    zbuf_uv__wait_t *holders;
    bool watching;     /* our watcher is on the pool */
    struct pool_entry *next;
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pool_entry *reg; /* one entry per pool with readers; under reg_lock */

/* Under reg_lock. */
static struct pool_entry *find_entry(const zbuf_pool_t *p)
{
    struct pool_entry *e = reg;
    while (e != NULL && e->pool != p)
        e = e->next;
    return e;
}

/* Under reg_lock: the entry of p, made if needed; NULL without memory. */
static struct pool_entry *get_entry(zbuf_pool_t *p)
{
    struct pool_entry *e = find_entry(p);
    if (e == NULL && (e = calloc(1, sizeof(*e))) != NULL) {
        e->pool = p;
        e->next = reg;
        reg = e;
    }
    return e;
}

static void on_refill(zbuf_pool_t *p, void *arg);

/* Under reg_lock: drop the watcher nobody waits for, and the entry nobody
 * needs.  Returns false when e was freed. */
static bool tidy_entry(struct pool_entry *e)
{
    if (e->head == NULL && e->watching) {
        zbuf_pool_remove_notify(e->pool, on_refill, NULL);
        e->watching = false;
    }
    if (e->head != NULL || e->holders != NULL)
        return true;
    struct pool_entry **pe = &reg;
    while (*pe != e)
        pe = &(*pe)->next;
    *pe = e->next;
    free(e);
    return false;
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

/* Under reg_lock: take w off e's paused readers (e may go: returns false). */
static bool unlink_waiter(struct pool_entry *e, zbuf_uv__wait_t *w)
{
    *(w->prev != NULL ? &w->prev->next : &e->head) = w->next;
    *(w->next != NULL ? &w->next->prev : &e->tail) = w->prev;
    w->prev = w->next = NULL;
    w->pool = NULL;
    return tidy_entry(e);
}

/* The pool's notify callback, on whichever thread returned a buffer (maybe
 * after the watcher was removed or the pool deleted: see the file comment). */
static void on_refill(zbuf_pool_t *p, void *arg)
{
    (void)arg;
    uv_loop_t *seen[8]; /* loops woken so far; past 8, duplicates cost a syscall each */
    size_t nseen = 0;
    pthread_mutex_lock(&reg_lock);
    struct pool_entry *e = find_entry(p);
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

void zbuf_uv__quota_room(zbuf_pool_quota_t *q, void *arg)
{
    (void)q;
    zbuf_uv__wait_t *w = arg;
    pthread_mutex_lock(&reg_lock);
    if (w->quota_wait)
        wake(w);
    pthread_mutex_unlock(&reg_lock);
}

/* Under reg_lock: a buffer for w, through its quota when it has one. */
static int take_for(zbuf_uv__wait_t *w, zbuf_pool_t *pool, zbuf_buf_t **b)
{
    return w->quota != NULL ? zbuf_pool_quota_get(w->quota, b) : zbuf_pool_get(pool, b);
}

/* Under reg_lock: the first paused reader of loop to which a pool gives a
 * buffer now (*b), taken off the registry; NULL if none.  A reader whose
 * quota is full moves to waiting on its quota. */
static zbuf_uv__wait_t *next_to_resume(const uv_loop_t *loop, zbuf_buf_t **b)
{
    struct pool_entry *e = reg;
    while (e != NULL) {
        zbuf_uv__wait_t *w = e->head;
        while (w != NULL && w->async.loop != loop)
            w = w->next;
        int rc = w != NULL ? take_for(w, e->pool, b) : -ENOBUFS;
        if (rc == 0) {
            unlink_waiter(e, w); /* may free e: return at once */
            return w;
        }
        if (rc == -EDQUOT) {
            bool kept = unlink_waiter(e, w);
            w->quota_wait = 1; /* its quota's callback will wake it */
            if (!kept) {
                e = reg; /* e is gone: start over */
                continue;
            }
            continue; /* the next reader of this loop, same pool */
        }
        e = e->next;
    }
    return NULL;
}

/* Under reg_lock: ask the holders of e's pool, other than w, to give back
 * the kept buffers nobody uses. */
static void ask_holders(struct pool_entry *e, const zbuf_uv__wait_t *w)
{
    for (zbuf_uv__wait_t *h = e->holders; h != NULL; h = h->hnext) {
        if (h != w && !h->reclaim_due) {
            h->reclaim_due = 1;
            wake(h);
        }
    }
}

/* Under reg_lock: put w at the end of pool's paused readers, with our
 * watcher on the pool, and ask the pool's holders for idle buffers.
 * Returns 0, -ENOMEM or an error of zbuf_pool_add_notify(). */
static int link_waiter(zbuf_uv__wait_t *w, zbuf_pool_t *pool)
{
    struct pool_entry *e = get_entry(pool);
    if (e == NULL)
        return -ENOMEM;
    if (!e->watching) {
        int rc = zbuf_pool_add_notify(pool, on_refill, NULL);
        if (rc < 0) {
            tidy_entry(e);
            return rc;
        }
        e->watching = true;
    }
    w->pool = pool;
    w->prev = e->tail;
    w->next = NULL;
    *(e->tail != NULL ? &e->tail->next : &e->head) = w;
    e->tail = w;
    /* A buffer back since the failed get told nobody. */
    if (zbuf_pool_available(pool) > 0)
        wake(w);
    ask_holders(e, w);
    return 0;
}

/* Under reg_lock: a reader whose quota was full, woken.  Returns it with a
 * buffer (*b) when the quota and the pool give one now; on a dry pool it
 * joins the pool's paused readers (or, if even that fails, is resumed
 * without a buffer: reading restarts, and pauses again the ordinary way,
 * telling the application any error). */
static zbuf_uv__wait_t *quota_retry(zbuf_uv__wait_t *w, zbuf_buf_t **b)
{
    if (!w->quota_wait)
        return NULL;
    int rc = zbuf_pool_quota_get(w->quota, b);
    if (rc == -EDQUOT)
        return NULL; /* still full: the callback will come */
    w->quota_wait = 0;
    if (rc == 0)
        return w;
    if (link_waiter(w, w->rpool) == 0)
        return NULL;
    *b = NULL;
    return w;
}

/* A wake-up on the loop: do what was asked of w itself, then resume the
 * loop's paused readers while their pools have buffers, each pool's in the
 * order they paused. */
static void on_wake(uv_async_t *a)
{
    zbuf_uv__wait_t *w = ZBUF_UV__CONTAINER_OF(a, zbuf_uv__wait_t, async);
    zbuf_buf_t *b = NULL;
    pthread_mutex_lock(&reg_lock);
    w->woken = 0; /* before draining: a refill from now on wakes again */
    bool reclaim = w->reclaim_due;
    w->reclaim_due = 0;
    pthread_mutex_unlock(&reg_lock);
    if (reclaim && w->reclaim != NULL)
        w->reclaim(w); /* may give a buffer back: the drain below sees it */

    pthread_mutex_lock(&reg_lock);
    zbuf_uv__wait_t *r = quota_retry(w, &b);
    while (r != NULL || (r = next_to_resume(a->loop, &b)) != NULL) {
        pthread_mutex_unlock(&reg_lock);
        uv_unref((uv_handle_t *)&r->async);
        r->resume(r, b); /* may stop, close or pause any reader */
        r = NULL;
        pthread_mutex_lock(&reg_lock);
    }
    pthread_mutex_unlock(&reg_lock);
}

int zbuf_uv__wait_init(zbuf_uv__wait_t *w, uv_loop_t *loop, zbuf_uv__resume_fn resume,
                       zbuf_uv__reclaim_fn reclaim)
{
    int rc = uv_async_init(loop, &w->async, on_wake);
    if (rc < 0)
        return rc;
    uv_unref((uv_handle_t *)&w->async);
    w->prev = w->next = w->hprev = w->hnext = NULL;
    w->pool = w->hpool = w->rpool = NULL;
    w->quota = NULL;
    w->resume = resume;
    w->reclaim = reclaim;
    w->woken = w->reclaim_due = w->quota_wait = 0;
    return 0;
}

int zbuf_uv__wait_start(zbuf_uv__wait_t *w, zbuf_pool_t *pool)
{
    pthread_mutex_lock(&reg_lock);
    w->rpool = pool;
    int rc = link_waiter(w, pool);
    pthread_mutex_unlock(&reg_lock);
    if (rc == 0)
        uv_ref((uv_handle_t *)&w->async);
    return rc;
}

void zbuf_uv__wait_quota(zbuf_uv__wait_t *w)
{
    pthread_mutex_lock(&reg_lock);
    w->quota_wait = 1;
    /* A buffer back since the failed get called nobody (it was not full
     * for the quota's callback, or we were not registered yet). */
    if (zbuf_pool_quota_held(w->quota) < zbuf_pool_quota_limit(w->quota))
        wake(w);
    pthread_mutex_unlock(&reg_lock);
    uv_ref((uv_handle_t *)&w->async);
}

void zbuf_uv__wait_stop(zbuf_uv__wait_t *w)
{
    bool waited = w->quota_wait != 0;
    pthread_mutex_lock(&reg_lock);
    w->quota_wait = 0;
    if (w->pool != NULL) {
        unlink_waiter(find_entry(w->pool), w);
        waited = true;
    }
    if (w->woken) {
        /* The pending wake-up may be lost with w's handle: give it to
         * another paused reader of the loop, if any. */
        zbuf_uv__wait_t *x = NULL;
        for (struct pool_entry *e = reg; e != NULL && x == NULL; e = e->next)
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

void zbuf_uv__hold(zbuf_uv__wait_t *w, zbuf_pool_t *pool)
{
    if (w->hpool == pool)
        return;
    pthread_mutex_lock(&reg_lock);
    if (w->hpool != NULL) {
        struct pool_entry *e = find_entry(w->hpool);
        *(w->hprev != NULL ? &w->hprev->hnext : &e->holders) = w->hnext;
        if (w->hnext != NULL)
            w->hnext->hprev = w->hprev;
        w->hprev = w->hnext = NULL;
        w->hpool = NULL;
        tidy_entry(e);
    }
    struct pool_entry *e = pool != NULL ? get_entry(pool) : NULL;
    if (e != NULL) {
        w->hpool = pool;
        w->hprev = NULL;
        w->hnext = e->holders;
        if (e->holders != NULL)
            e->holders->hprev = w;
        e->holders = w;
    }
    pthread_mutex_unlock(&reg_lock);
}
