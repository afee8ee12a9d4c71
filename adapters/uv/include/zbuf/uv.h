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
 * libuv the free part of a buffer taken from a zbuf pool (zbuf_pool_get());
 * the read callback wraps the bytes received as one segment of a new zbuf
 * (zbuf_append_ref(), no copy) and gives that zbuf to the application.  A
 * pool buffer is filled by successive reads until little room is left in it,
 * so small messages do not each hold a whole buffer.  A stream keeps at
 * most one pool buffer between reads, and only while zbufs it delivered
 * still use that buffer: size the pool for the zbufs the application keeps
 * plus one per reading stream.
 *
 * **Pool exhaustion.**  When the pool has no free buffer, libuv reports
 * `UV_ENOBUFS` before it reads anything, so no byte is lost; the adapter
 * then stops reading (the kernel's socket buffer fills and TCP flow control
 * slows the peer down), tells the application once with `UV_ENOBUFS`, and
 * resumes by itself when a buffer comes back to the pool.  Reading stopped
 * this way is *paused*, not failed.  A paused reader costs nothing while it
 * waits: no timer, no polling; the loop sleeps until the pool's refill
 * notification (a zbuf_pool_add_notify() watcher) wakes it through a `uv_async_t`,
 * from whichever thread gave the buffer back.  A buffer given back on the
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
#if defined(ZBUF_UV_BUILDING)
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
 *   - `UV_ENOBUFS`: the pool ran dry; reading is **paused**, not stopped, and
 *     resumes by itself once buffers come back (delete received zbufs to
 *     give them back).  Told once per pause; no byte was lost.
 *   - another negative value: a read error (`UV_ECONNRESET` ...) or
 *     `-ENOMEM` (the bytes just read could not be wrapped and are lost).
 *     Reading has stopped; close the stream.
 * @param z       the bytes, or NULL when @p status is not positive.
 *
 * Runs on the loop thread.  It may stop reading, write, or close the stream
 * with zbuf_uv_close().
 */
typedef void (*zbuf_uv_read_cb)(zbuf_uv_stream_t *zs, ssize_t status, zbuf_t *z);

/** @cond INTERNAL */
/* Private: a reader paused for want of pool buffers, as the adapter's
 * registry of paused readers knows it (uv_read.c).  Do not touch. */
struct zbuf_uv_wait_ {
    uv_async_t async;            /* wakes the reader's loop; set up at the first pause */
    struct zbuf_uv_wait_ *prev;  /* the pool's paused readers, in the order they paused */
    struct zbuf_uv_wait_ *next;
    zbuf_pool_t *pool;           /* the pool waited on; NULL when not waiting */
    void (*resume)(struct zbuf_uv_wait_ *w, zbuf_buf_t *b); /* restarts reading with b */
    unsigned woken;              /* a wake-up is pending on async */
};
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
    zbuf_uv_read_cb read_cb_;  /* NULL when not reading */
    zbuf_buf_t *cur_;          /* pool buffer being filled (our reference), or NULL */
    size_t cur_used_;          /* bytes of cur_ already handed out as segments */
    struct zbuf_uv_wait_ wait_; /* waits for the pool while paused; see flags_ */
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
