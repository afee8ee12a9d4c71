/* SPDX-License-Identifier: MIT */
/**
 * @file zbuf/uv.h
 * @brief libuv adapter: write zbufs to streams and UDP handles without
 *        copying, read them back as zbufs made of pool buffers.
 *
 * Link with `pkg-config --libs zbuf-uv` or the CMake target `zbuf::uv`.  The
 * core library never depends on libuv; this adapter is its own library.
 *
 * **Writing.**  zbuf_uv_write() hands libuv one `uv_buf_t` per segment of the
 * zbuf, pointing into the zbuf's buffers: no byte is copied.  The zbuf is
 * owned by the adapter from then on and deleted when libuv reports the bytes
 * written, just before the write callback runs; so a release callback of an
 * enrolled buffer runs on the loop thread, once the kernel has the bytes, and
 * the application may reuse its memory from then on.  At most
 * #ZBUF_UV_BUFS_PER_WRITE buffers go into one `uv_write()` (the `IOV_MAX` of
 * Linux): a zbuf with more segments is written by several `uv_write()`
 * calls queued back to back, and the callback runs once, after the last.
 *
 * **Reading.**  A stream read through the adapter is a #zbuf_uv_stream_t: a
 * struct that begins with the libuv handle (so `handle.data` stays the
 * application's) followed by the adapter's state.  Its alloc callback hands
 * libuv the free part of a buffer taken from a zbuf pool (through the
 * stream's quota of it, see below);
 * the read callback wraps the bytes received as one segment of a new zbuf
 * (zbuf_append_ref(), no copy) and gives that zbuf to the application.  A
 * pool buffer is filled by successive reads until little room is left in it,
 * so small messages do not each hold a whole buffer.  A stream keeps at
 * most one pool buffer between reads (it is *kept*), and only while zbufs
 * it delivered still use that buffer: one the read callback's zbufs no
 * longer use when the callback returns goes back to the pool at once, so a
 * connection that is idle, and whose bytes were handled, holds no buffer.
 * A kept buffer whose zbufs are deleted later, outside the read callback
 * (a queued write completed, a held message deleted), goes back as soon as
 * a reader of the pool finds it dry, or when the stream reads again; until
 * then zbuf_uv_stats() reports it as an idle holding.  A UDP handle keeps
 * no buffer between receives.  Size the pool for the zbufs the application
 * keeps plus one per reading stream.
 *
 * **One stream's share of the pool.**  Every reading stream takes its
 * buffers through its own quota of the pool (zbuf_pool_quota_create()), so
 * zbuf_uv_read_held() knows exactly how many pool buffers the stream's
 * bytes hold (kept, or used by zbufs it delivered that are still alive,
 * wherever they are).  zbuf_uv_read_set_limit() caps that number: a stream
 * at its limit pauses alone, as for a dry pool, while the others go on
 * reading, and resumes when one of its own buffers comes back.  A slow
 * consumer whose queued writes hold a publisher's buffers then stalls that
 * publisher, not every connection.  A stream that cannot get another buffer
 * (limit reached or pool dry) fills its kept buffer to the last byte before
 * it pauses.  The frame decoder (zbuf/frame.h) knows these limits from the
 * buffers it is fed: a frame that can never fit in what its stream may hold
 * is refused with `-EMSGSIZE` as soon as that is certain, instead of
 * holding the buffers forever.
 *
 * **Pool exhaustion.**  When the pool has no free buffer, libuv reports
 * `UV_ENOBUFS` before it reads anything, so no byte is lost; the adapter
 * then stops reading (the kernel's socket buffer fills and TCP flow control
 * slows the peer down), tells the application once with `UV_ENOBUFS`, and
 * resumes by itself when a buffer comes back to the pool (or, for a stream
 * at its own limit, to its share); the callback of
 * zbuf_uv_read_set_resume_cb() is told when it restarts, so that nobody
 * needs to poll zbuf_uv_read_paused().  Reading stopped this way is
 * *paused*, not failed.  A paused reader costs nothing while it waits: no
 * timer, no polling; the loop sleeps until the pool's refill notification
 * (a zbuf_pool_add_notify() watcher) or the quota's callback wakes it
 * through a `uv_async_t`, from whichever thread gave the buffer back.  A buffer given back on the
 * loop's own thread resumes the reader in the same loop iteration (its next
 * read comes in the following one).  Several streams and UDP handles, on
 * one loop or on loops of several threads, may share a pool: they resume
 * in the order they paused, each taking a buffer as it resumes, until the
 * pool is dry again; the others keep waiting.
 *
 * **The pool's notify callback stays the application's.**  The adapter
 * watches a pool with zbuf_pool_add_notify() while a reader is paused on
 * it (one watcher per pool, removed when no reader waits), so an
 * application may keep its own zbuf_pool_set_notify() callback, or its own
 * watchers, on a pool it gives to the adapter.  Pausing fails only if the
 * pool already has #ZBUF_POOL_WATCHERS_MAX watchers (the read callback then
 * gets `UV_ENOSPC` and reading stops).
 *
 * **Write queues.**  zbuf_uv_write_queue_size() is the stream's own queue:
 * bytes shared by several writes (a fan-out of zbuf_dup()s) count once per
 * stream they are queued on.  Writes made with zbuf_uv_stream_write() are
 * also counted per loop, where zbuf_uv_stats() gives the memory they pin,
 * each buffer counted once however many writes share it; and a stream may
 * have high- and low-water marks with a drain callback
 * (zbuf_uv_write_set_watermarks()).
 *
 * **No MSG_ZEROCOPY.**  The adapter never enables `SO_ZEROCOPY` or sends with
 * `MSG_ZEROCOPY` on a descriptor libuv owns.  Zero-copy send completions
 * arrive on the socket's error queue; libuv's epoll backend watches the
 * descriptor and reports `POLLERR` to the stream while that queue is not
 * empty, and libuv has no hook to drain it, so every loop iteration would
 * wake up for the same unread notification and the read and write paths
 * would spin.  The copy that the kernel makes on an ordinary `writev()` is
 * the one copy this adapter keeps; the user-space copies (into per-write or
 * per-subscriber `uv_buf_t` memory) are the ones it removes.
 *
 * **Threads.**  Like libuv itself: every function here is called on the
 * thread that runs the handle's loop, and every callback runs there.  The
 * zbufs delivered may be handed to other threads afterwards (their buffers
 * go back to the pool from whichever thread deletes them, and a reader
 * paused on that pool is woken on its own loop's thread).
 *
 * **Errors** are negative `errno` values (the `UV_E*` codes are the same
 * numbers on Unix).  As in libuv, a call that returns an error never calls
 * its callback, and leaves the zbuf it was given with the caller.  Like
 * any libuv program that writes to sockets and pipes, ignore `SIGPIPE`
 * (libuv does not), so that a vanished peer shows up as `UV_EPIPE`.
 */
#ifndef ZBUF_UV_H
#define ZBUF_UV_H

#include <stdbool.h>
#include <uv.h>
#include <zbuf/zbuf.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @cond INTERNAL */
#if defined(ZBUF_UV_STATIC)
#define ZBUF_UV_EXPORT
#elif defined(ZBUF_UV_BUILDING)
#define ZBUF_UV_EXPORT __attribute__((visibility("default")))
#else
#define ZBUF_UV_EXPORT
#endif
/** @endcond */

/**
 * Most `uv_buf_t` entries passed to one `uv_write()` or `uv_try_write()`:
 * `IOV_MAX` on Linux.  Longer zbufs are written in several requests.
 */
#define ZBUF_UV_BUFS_PER_WRITE 1024

/* ====================================================================== */
/** @name Writing to streams */
/** @{ */

/**
 * @brief Completion callback of zbuf_uv_write().
 *
 * @param stream  the stream written to.
 * @param status  0 when every byte was handed to the kernel; a negative
 *                error otherwise (`UV_ECANCELED` if the stream was closed
 *                first, `UV_EPIPE`, `UV_ECONNRESET` ...).  After an error an
 *                unknown prefix of the bytes was written.
 * @param arg     the argument given to zbuf_uv_write().
 *
 * Runs once per successful zbuf_uv_write(), on the loop thread, after the
 * zbuf was deleted (release callbacks of its buffers have run, unless other
 * zbufs still reference them).  It may write again, close the stream, or
 * free @p arg.
 */
typedef void (*zbuf_uv_write_cb)(uv_stream_t *stream, int status, void *arg);

/**
 * @brief Write every byte of @p z to @p stream, without copying.
 *
 * One `uv_buf_t` per segment points into the zbuf's buffers.  On success the
 * adapter **consumes** @p z: the caller must not touch it again; the adapter
 * deletes it once libuv has written the bytes (or failed to), then calls
 * @p cb.  Writes are queued in call order behind earlier writes on the same
 * stream, like `uv_write()`.  An empty zbuf is accepted and completes on the
 * next loop iteration.
 *
 * **File segments** (buffers from zbuf_buf_wrap_file()) are sent with
 * `sendfile(2)` from the loop thread, never read into memory: the memory
 * segments before a file segment are written first, and the file bytes go
 * out once libuv's write queue for the stream is empty.  Such a write is done
 * in steps, so the application must not issue other writes on the stream
 * until its callback has run (they could overtake the file bytes).  A file
 * range not in the page cache is read from disk by that `sendfile()` call,
 * which blocks the loop for as long; prefetch it (`posix_fadvise()`) if that
 * matters.  When the socket is full, the adapter waits for it to drain by
 * writing one byte of the file through `uv_write()` (counted as a copy in
 * zbuf_stats_t::bytes_copied).  Tested on TCP and Unix domain sockets.
 *
 * @param stream  a writable stream (TCP, pipe, TTY).
 * @param z       the zbuf; consumed on success only.
 * @param cb      called once when done; may be NULL.
 * @param arg     passed to @p cb.
 * @return 0; `-EINVAL` (NULL or invalid arguments); `-ENOMEM`; any error of
 *         `uv_write()` (`UV_EPIPE`, `UV_EBADF` ...).  On error @p cb is not
 *         called and the caller still owns @p z, unchanged.
 */
ZBUF_UV_EXPORT int zbuf_uv_write(uv_stream_t *stream, zbuf_t *z, zbuf_uv_write_cb cb, void *arg);

/**
 * @brief Write what the stream accepts right now and leave the rest in @p z.
 *
 * Like `uv_try_write()`: nothing is queued.  The bytes written are cut from
 * the front of @p z (this never allocates), so the release callbacks of
 * buffers wholly written run before this returns; @p z stays the caller's
 * either way, holding the unsent bytes.  Stops at the first file segment
 * (those need zbuf_uv_write()).
 *
 * @param stream  a writable stream.
 * @param z       the zbuf (borrowed; its written prefix is removed).
 * @return the number of bytes written, 1 or more; `UV_EAGAIN` when none could
 *         be written now (or writes are queued on the stream); `-EINVAL`
 *         (also for an empty zbuf or one that starts with a file segment);
 *         another `uv_try_write()` error.  On error @p z is unchanged.
 */
ZBUF_UV_EXPORT ssize_t zbuf_uv_try_write(uv_stream_t *stream, zbuf_t *z);

/**
 * @brief Bytes queued on @p stream that the kernel has not taken yet.
 *
 * The backpressure signal: stop producing for this stream (or stop reading
 * the connection that feeds it) while it is above a high-water mark of
 * your choice, resume from the write callback once it is low again.  It
 * counts every queued write, those of zbuf_uv_write() and plain
 * `uv_write()` alike (it is libuv's `write_queue_size`).
 *
 * @return bytes; 0 for NULL.
 */
ZBUF_UV_EXPORT size_t zbuf_uv_write_queue_size(const uv_stream_t *stream);

/** @} */
/* ====================================================================== */
/** @name Reading from streams */
/** @{ */

/** A stream reading into zbufs: a libuv stream handle followed by the
 *  adapter's read state (see struct zbuf_uv_stream). */
typedef struct zbuf_uv_stream zbuf_uv_stream_t;

/**
 * @brief Read callback of zbuf_uv_read_start().
 *
 * @param zs      the stream.
 * @param status  what happened:
 *   - `> 0`: @p z holds @p status new bytes, in order after the previous
 *     ones.  The callback **owns** @p z and must delete it (or pass it on).
 *   - `UV_EOF`: the peer finished sending.  Reading has stopped; no further
 *     read callback comes unless reading is started again.
 *   - `UV_ENOBUFS`: the pool ran dry, or the stream holds its limit of
 *     buffers (zbuf_uv_read_set_limit()); reading is **paused**, not
 *     stopped, and resumes by itself once buffers come back (delete
 *     received zbufs to give them back).  Told once per pause; no byte was
 *     lost.  zbuf_uv_read_held() against the limit tells which.
 *   - another negative value: a read error (`UV_ECONNRESET` ...) or
 *     `-ENOMEM` (the bytes just read could not be wrapped and are lost).
 *     Reading has stopped; close the stream.
 * @param z       the bytes, or NULL when @p status is not positive.
 *
 * Runs on the loop thread.  It may stop reading, write, or close the stream
 * with zbuf_uv_close().
 */
typedef void (*zbuf_uv_read_cb)(zbuf_uv_stream_t *zs, ssize_t status, zbuf_t *z);

/**
 * @brief Resume callback (zbuf_uv_read_set_resume_cb()): reading restarted
 *        after a pause.
 *
 * Runs on the loop thread, once per pause, right after the adapter restarted
 * reading because a buffer came back (to the pool, or to the stream's share
 * of it).  Not called when the application stops or restarts reading
 * itself.  It may stop reading, write, or close the stream.
 */
typedef void (*zbuf_uv_resume_cb)(zbuf_uv_stream_t *zs);

/** @brief Drain callback (zbuf_uv_write_set_watermarks()): the stream's
 *         write queue fell to its low-water mark after passing the
 *         high-water mark.  Runs on the loop thread, after the write
 *         callback of the write whose completion drained the queue. */
typedef void (*zbuf_uv_drain_cb)(zbuf_uv_stream_t *zs);

/** @cond INTERNAL */
/* Private: a reader as the adapter's registry of pools knows it (uv_read.c):
 * paused for want of buffers, or keeping a buffer for its next read.  Do
 * not touch. */
struct zbuf_uv_wait_ {
    uv_async_t async;            /* wakes the reader's loop; set up with the reader */
    struct zbuf_uv_wait_ *prev;  /* the pool's paused readers, in the order they paused */
    struct zbuf_uv_wait_ *next;
    zbuf_pool_t *pool;           /* the pool waited on; NULL when not waiting on it */
    struct zbuf_uv_wait_ *hprev; /* the pool's readers keeping a buffer */
    struct zbuf_uv_wait_ *hnext;
    zbuf_pool_t *hpool;          /* the pool of the kept buffer; NULL when none */
    zbuf_pool_quota_t *quota;    /* the reader's share of its pool, or NULL */
    zbuf_pool_t *rpool;          /* the pool the reader reads from, while paused */
    void (*resume)(struct zbuf_uv_wait_ *w, zbuf_buf_t *b); /* restarts reading with b */
    void (*reclaim)(struct zbuf_uv_wait_ *w); /* gives back a kept buffer nobody uses */
    unsigned woken;              /* a wake-up is pending on async */
    unsigned reclaim_due;        /* a reader of hpool found it dry: check the kept buffer */
    unsigned quota_wait;         /* paused at its quota's limit, waiting for room */
};
struct zbuf_uv_loop_;
/** @endcond */

/**
 * @brief A libuv stream with the adapter's read state.
 *
 * Allocate it (embedded in a connection struct, typically), initialise the
 * handle member with `uv_tcp_init()`, `uv_pipe_init()` or `uv_tty_init()`,
 * then call zbuf_uv_stream_init().  Use `&zs->stream` wherever libuv wants
 * the stream (`uv_accept()`, `uv_tcp_connect()`, zbuf_uv_write() ...);
 * `handle.data` is the application's.  Close it with zbuf_uv_close(), not
 * `uv_close()`, and keep its memory until the close callback has run.
 */
struct zbuf_uv_stream {
    /** The libuv handle, under each of its names. */
    union {
        uv_handle_t handle; /**< as a handle (`data` is the application's) */
        uv_stream_t stream; /**< as a stream */
        uv_tcp_t tcp;       /**< as a TCP handle */
        uv_pipe_t pipe;     /**< as a pipe (Unix domain socket or pipe) */
        uv_tty_t tty;       /**< as a TTY */
    };
    /** @cond INTERNAL */
    /* Private: the adapter's state.  Do not touch. */
    zbuf_pool_t *pool_;        /* where receive buffers come from; borrowed */
    zbuf_pool_quota_t *quota_; /* the stream's share of pool_ (ours), or NULL */
    size_t read_limit_;        /* most buffers held, 0: no limit of its own */
    zbuf_uv_read_cb read_cb_;  /* NULL when not reading */
    zbuf_uv_resume_cb resume_cb_;
    zbuf_buf_t *cur_;          /* pool buffer being filled (our reference), or NULL */
    size_t cur_used_;          /* bytes of cur_ already handed out as segments */
    int get_err_;              /* why the last buffer could not be had */
    struct zbuf_uv_wait_ wait_; /* the registry's view of the reader; see flags_ */
    struct zbuf_uv_loop_ *loop_; /* per-loop accounting, or NULL (uv_loop.c) */
    zbuf_uv_stream_t *lprev_, *lnext_; /* the loop's streams */
    size_t write_high_, write_low_; /* water marks; high 0: none */
    zbuf_uv_drain_cb drain_cb_;
    unsigned flags_;           /* the flags in uv_read.c */
    unsigned closing_;         /* handle closes still to come */
    uv_close_cb close_cb_;     /* the application's, for zbuf_uv_close() */
    /** @endcond */
};

/**
 * @brief Prepare the adapter's state of @p zs.
 *
 * Call it once, after the handle member was initialised with
 * `uv_tcp_init()` / `uv_pipe_init()` / `uv_tty_init()` (or their `_ex`
 * forms) and before any other zbuf_uv_ call on @p zs.  It allocates nothing.
 *
 * @return 0; `-EINVAL` if @p zs is NULL or its handle is not an
 *         initialised stream.
 */
ZBUF_UV_EXPORT int zbuf_uv_stream_init(zbuf_uv_stream_t *zs);

/**
 * @brief Start reading @p zs as zbufs whose bytes live in @p pool's buffers.
 *
 * @param zs    an initialised, readable stream.
 * @param pool  the receive pool (borrowed: it must outlive reading, so stop
 *              or close every stream reading from it before
 *              zbuf_pool_delete(); several streams may share one).  Its
 *              buffer size bounds the bytes one read can return; 16 to
 *              64 KiB suits most uses.  While reading is paused on it the
 *              adapter watches it with zbuf_pool_add_notify() (see the
 *              file comment).
 * @param cb    called for every event (see #zbuf_uv_read_cb).
 * @return 0; `-EINVAL`; `-EALREADY` if already reading; an error of
 *         `uv_read_start()`.
 */
ZBUF_UV_EXPORT int zbuf_uv_read_start(zbuf_uv_stream_t *zs, zbuf_pool_t *pool,
                                      zbuf_uv_read_cb cb);

/**
 * @brief Cap the pool buffers the bytes read from @p zs may hold at once.
 *
 * Counted are the buffers taken for this stream that have not gone back to
 * the pool: the one kept for the next read and those still used by zbufs
 * the stream delivered, wherever they went (a decoder's partial frame,
 * queued writes, the application's own lists).  A stream at its limit
 * pauses (`UV_ENOBUFS`, as for a dry pool) while the other streams of the
 * pool go on, and resumes when one of its own buffers comes back.  So one
 * slow or hostile peer cannot take the whole pool.
 *
 * May be called before zbuf_uv_read_start() or while reading (a paused
 * stream whose limit is raised resumes); a lowered limit does not take
 * buffers back, it only stops the stream taking more until it is below.
 *
 * @param zs        an initialised stream.
 * @param max_bufs  1 or more; 0 removes the limit (the pool's capacity is
 *                  then the only bound).
 * @return 0; `-EINVAL`.
 */
ZBUF_UV_EXPORT int zbuf_uv_read_set_limit(zbuf_uv_stream_t *zs, size_t max_bufs);

/**
 * @brief Pool buffers the bytes read from @p zs hold now: kept for the next
 *        read, or used by delivered zbufs still alive (see
 *        zbuf_uv_read_set_limit()).  A snapshot; 0 before the first
 *        zbuf_uv_read_start().
 */
ZBUF_UV_EXPORT size_t zbuf_uv_read_held(const zbuf_uv_stream_t *zs);

/**
 * @brief Be told when reading restarts after a pause (see
 *        #zbuf_uv_resume_cb), instead of polling zbuf_uv_read_paused().
 * @param cb  the callback, or NULL for none.
 * @return 0; `-EINVAL`.
 */
ZBUF_UV_EXPORT int zbuf_uv_read_set_resume_cb(zbuf_uv_stream_t *zs, zbuf_uv_resume_cb cb);

/**
 * @brief Stop reading (also ends a pause).
 *
 * The partly filled pool buffer the adapter kept for the next read is given
 * back (it returns to the pool once the zbufs holding its bytes are gone).
 * No read callback runs after this returns.  Stopping a stream that is not
 * reading is a no-op.
 *
 * @return 0; `-EINVAL`.
 */
ZBUF_UV_EXPORT int zbuf_uv_read_stop(zbuf_uv_stream_t *zs);

/**
 * @brief Whether reading is paused because the pool ran dry.
 *
 * True from the `UV_ENOBUFS` read callback until a buffer came back and the
 * adapter restarted reading (or reading was stopped).
 */
ZBUF_UV_EXPORT bool zbuf_uv_read_paused(const zbuf_uv_stream_t *zs);

/**
 * @brief Stop reading and close the stream and the adapter's wake-up handle.
 *
 * Pending writes complete with `UV_ECANCELED` (their zbufs are deleted), as
 * with `uv_close()`.  @p cb runs once everything is closed, with
 * `&zs->handle`; the memory of @p zs may be freed from then on.
 *
 * @param cb  close callback, or NULL.
 */
ZBUF_UV_EXPORT void zbuf_uv_close(zbuf_uv_stream_t *zs, uv_close_cb cb);

/** @} */
/* ====================================================================== */
/** @name Writing to adapter streams: water marks and accounting */
/** @{ */

/**
 * @brief zbuf_uv_write() to an adapter stream, counted in its water marks
 *        and in its loop's write figures (zbuf_uv_stats()).
 *
 * Everything zbuf_uv_write() says holds (the zbuf is consumed on success,
 * @p cb runs once, `&zs->stream` is what it receives).  In addition the
 * stream's high-water mark is checked once the write is queued, and its
 * low-water mark when the write completes (zbuf_uv_write_set_watermarks()).
 *
 * @return as zbuf_uv_write(); also `-ENOMEM` when the loop's accounting
 *         could not be set up (first use on a loop).
 */
ZBUF_UV_EXPORT int zbuf_uv_stream_write(zbuf_uv_stream_t *zs, zbuf_t *z, zbuf_uv_write_cb cb,
                                        void *arg);

/**
 * @brief Give @p zs a high- and a low-water mark for its write queue, the
 *        way Node's writable streams and most libuv servers do.
 *
 * When a zbuf_uv_stream_write() leaves more than @p high bytes queued
 * (zbuf_uv_write_queue_size()), zbuf_uv_write_full() turns true: stop
 * producing for this stream (a broker stops reading the publishers that
 * feed it).  When a write completes with at most @p low bytes left queued,
 * it turns false again and @p cb runs.  Plain uv_write() and zbuf_uv_write()
 * calls on the stream count in the queue, but only zbuf_uv_stream_write()
 * checks the marks.
 *
 * @param high  bytes, 1 or more; 0 removes the marks (and the full state).
 * @param low   bytes, at most @p high.
 * @param cb    drain callback, or NULL.
 * @return 0; `-EINVAL`; `-ENOMEM` (first use on a loop).
 */
ZBUF_UV_EXPORT int zbuf_uv_write_set_watermarks(zbuf_uv_stream_t *zs, size_t high, size_t low,
                                                zbuf_uv_drain_cb cb);

/** @brief Whether @p zs passed its high-water mark and has not drained to
 *         its low-water mark since (see zbuf_uv_write_set_watermarks()). */
ZBUF_UV_EXPORT bool zbuf_uv_write_full(const zbuf_uv_stream_t *zs);

/** @} */
/* ====================================================================== */
/** @name Accounting per loop */
/** @{ */

/**
 * @brief What the adapter's streams of one loop hold: the figures a running
 *        server checks against the library's live counters
 *        (zbuf_stats_get()).
 *
 * Streams count from their first zbuf_uv_read_start(),
 * zbuf_uv_stream_write(), zbuf_uv_read_set_limit() or
 * zbuf_uv_write_set_watermarks() until zbuf_uv_close().  Byte figures are
 * snapshots taken on the loop thread.
 */
typedef struct zbuf_uv_stats {
    size_t streams;        /**< streams counted (see above) */
    size_t reading;        /**< ... reading */
    size_t paused;         /**< ... of which paused for want of buffers */
    size_t read_held;      /**< pool buffers their read bytes hold
                                (zbuf_uv_read_held() summed) */
    size_t read_kept;      /**< buffers kept for the next read (counted in
                                @c read_held too) */
    size_t read_kept_idle; /**< ... of which no zbuf uses any more: idle
                                holdings, given back as soon as a reader of
                                their pool finds it dry, or the stream reads */
    size_t write_reqs;     /**< zbuf_uv_stream_write() calls whose callback has
                                not run */
    size_t write_bytes;    /**< their bytes: a byte shared by several writes
                                counts once per write, as in the streams'
                                queues */
    size_t write_bufs;     /**< distinct buffers those writes reference (file
                                buffers aside) */
    size_t write_mem;      /**< memory those buffers pin, each buffer counted
                                once at its full size however many writes
                                share it: the honest figure for a fan-out */
    size_t write_pool_mem; /**< ... of which pool buffers */
} zbuf_uv_stats_t;

/**
 * @brief Fill @p st for the adapter's streams of @p loop.
 *
 * Call on the loop's thread.  Walks the loop's streams and queued writes
 * (O(streams + segments queued)): meant for monitoring, not for every
 * message.  A loop without adapter streams gives zeros.
 *
 * @return 0; `-EINVAL`; `-ENOMEM` (counting distinct buffers needs a
 *         temporary array).
 */
ZBUF_UV_EXPORT int zbuf_uv_stats(const uv_loop_t *loop, zbuf_uv_stats_t *st);

/** @} */
/* ====================================================================== */
/** @name UDP */
/** @{ */

/**
 * @brief Completion callback of zbuf_uv_udp_send().
 *
 * @param udp     the handle.
 * @param status  0 when the datagram was sent; a negative error otherwise.
 * @param arg     the argument given to zbuf_uv_udp_send().
 *
 * Runs once, on the loop thread, after the zbuf was deleted.
 */
typedef void (*zbuf_uv_udp_send_cb)(uv_udp_t *udp, int status, void *arg);

/**
 * @brief Send the bytes of @p z as one datagram, without copying them.
 *
 * One `uv_buf_t` per segment (a gathering `sendmsg()`).  On success the
 * adapter **consumes** @p z and deletes it once libuv has sent the datagram,
 * then calls @p cb.
 *
 * @param udp   a UDP handle.
 * @param z     the datagram, 0 or more bytes in at most
 *              #ZBUF_UV_BUFS_PER_WRITE memory segments.
 * @param addr  destination, or NULL for a connected handle.
 * @param cb    completion callback, or NULL.
 * @param arg   passed to @p cb.
 * @return 0; `-EINVAL`; `-EMSGSIZE` (too many segments, or more bytes than
 *         a datagram holds); `-ENOTSUP` (a file segment); `-ENOMEM`; an
 *         error of `uv_udp_send()`.  On error the caller still owns @p z.
 */
ZBUF_UV_EXPORT int zbuf_uv_udp_send(uv_udp_t *udp, zbuf_t *z, const struct sockaddr *addr,
                                    zbuf_uv_udp_send_cb cb, void *arg);

/**
 * @brief Send @p z as one datagram now, or not at all.
 *
 * @return the number of bytes sent (the whole datagram), after which @p z
 *         was **consumed** (deleted); `UV_EAGAIN` if it cannot be sent now;
 *         the errors of zbuf_uv_udp_send().  On error the caller still owns
 *         @p z, unchanged.
 */
ZBUF_UV_EXPORT ssize_t zbuf_uv_udp_try_send(uv_udp_t *udp, zbuf_t *z,
                                            const struct sockaddr *addr);

/** A UDP handle receiving datagrams as zbufs (see struct zbuf_uv_udp). */
typedef struct zbuf_uv_udp zbuf_uv_udp_t;

/**
 * @brief Receive callback of zbuf_uv_udp_recv_start().
 *
 * @param zu      the handle.
 * @param status  `>= 0`: one datagram of @p status bytes is in @p z (which
 *                the callback **owns** and must delete; an empty datagram
 *                gives an empty zbuf).  `UV_ENOBUFS`: the pool ran dry and
 *                receiving is paused until buffers come back (datagrams that
 *                arrive meanwhile queue in the kernel, which drops them when
 *                its buffer is full, as UDP does).  Another negative value:
 *                a receive error, and receiving goes on; or, when pausing
 *                or resuming failed (`-ENOMEM`, a libuv error), receiving
 *                has stopped.
 * @param z       the datagram, or NULL when @p status is negative.
 * @param addr    the sender (borrowed for the call), or NULL.
 * @param flags   libuv's flags; `UV_UDP_PARTIAL` means the datagram was
 *                longer than a pool buffer and was truncated.
 */
typedef void (*zbuf_uv_udp_recv_cb)(zbuf_uv_udp_t *zu, ssize_t status, zbuf_t *z,
                                    const struct sockaddr *addr, unsigned flags);

/**
 * @brief A libuv UDP handle with the adapter's receive state.
 *
 * Initialise the handle with `uv_udp_init()` (or `_ex`), then call
 * zbuf_uv_udp_init().  Close it with zbuf_uv_udp_close().
 */
struct zbuf_uv_udp {
    /** The libuv handle, under each of its names. */
    union {
        uv_handle_t handle; /**< as a handle (`data` is the application's) */
        uv_udp_t udp;       /**< as a UDP handle */
    };
    /** @cond INTERNAL */
    zbuf_pool_t *pool_;
    zbuf_uv_udp_recv_cb recv_cb_;
    zbuf_buf_t *cur_;          /* pool buffer lent to libuv (our reference) */
    struct zbuf_uv_wait_ wait_; /* waits for the pool while paused */
    unsigned flags_;
    unsigned closing_;
    uv_close_cb close_cb_;
    /** @endcond */
};

/**
 * @brief Prepare the adapter's state of @p zu; see zbuf_uv_stream_init().
 * @return 0; `-EINVAL`.
 */
ZBUF_UV_EXPORT int zbuf_uv_udp_init(zbuf_uv_udp_t *zu);

/**
 * @brief Start receiving datagrams as zbufs, one pool buffer each.
 *
 * A datagram longer than the pool's buffer size is truncated (the kernel
 * drops the rest) and reported with `UV_UDP_PARTIAL`.
 *
 * @param pool  receive pool (borrowed; must outlive receiving; may be
 *              shared with streams and other handles).  While receiving is
 *              paused on it the adapter watches it, as for
 *              zbuf_uv_read_start().
 * @return 0; `-EINVAL`; `-EALREADY`; an error of `uv_udp_recv_start()`.
 */
ZBUF_UV_EXPORT int zbuf_uv_udp_recv_start(zbuf_uv_udp_t *zu, zbuf_pool_t *pool,
                                          zbuf_uv_udp_recv_cb cb);

/** @brief Stop receiving (also ends a pause).  @return 0; `-EINVAL`. */
ZBUF_UV_EXPORT int zbuf_uv_udp_recv_stop(zbuf_uv_udp_t *zu);

/**
 * @brief Stop receiving and close the handle and the adapter's wake-up
 *        handle;
 *        @p cb (may be NULL) runs when all is closed.
 */
ZBUF_UV_EXPORT void zbuf_uv_udp_close(zbuf_uv_udp_t *zu, uv_close_cb cb);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* ZBUF_UV_H */
