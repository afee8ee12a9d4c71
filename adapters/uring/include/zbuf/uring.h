/* SPDX-License-Identifier: MIT */
/**
 * @file zbuf/uring.h
 * @brief An io_uring engine for zbufs: zero-copy sends released by the
 *        kernel's notification, receives into provided buffer rings fed
 *        from a pool, batched submission, accept and connect on the same
 *        ring; with the epoll path of zbuf-sock as its fallback.
 *
 * Library `zbuf-uring` (CMake target `zbuf::uring`, pkg-config
 * `zbuf-uring`), built on the core and on the socket adapter `zbuf-sock`,
 * whose public calls it uses for its fallback.  A sibling library and not a
 * mode of zbuf-sock because its model differs: zbuf-sock makes system calls
 * on the caller's thread and returns what the kernel did; this engine
 * queues requests, submits them in batches and reports results through
 * callbacks from zbuf_uring_run().  It is what an event-driven server or
 * messaging layer wants; zbuf-sock stays what a blocking program wants (and
 * its VxWorks layer can run on this engine: zbuf_uring_vx_init()).
 *
 * ### The engine
 *
 * A #zbuf_uring_t is one io_uring (or, on the fallback, one epoll
 * descriptor) and the sockets attached to it.  It belongs to the thread
 * that created it: every function of this header is called on that thread,
 * except zbuf_uring_probe(), zbuf_uring_wake() and the deletion of zbufs
 * the engine delivered (which may happen on any thread).  Nothing happens
 * in the background: requests are prepared when a function is called,
 * handed to the kernel in one batch by zbuf_uring_run() or
 * zbuf_uring_submit(), and their completions run the callbacks inside
 * zbuf_uring_run(), on that thread.
 *
 * Run it either way:
 * - on its own: `while (work) zbuf_uring_run(u, -1);`
 * - inside another event loop: poll zbuf_uring_fd() for readability, call
 *   `zbuf_uring_run(u, 0)` when it is readable or when zbuf_uring_timeout()
 *   says so, and zbuf_uring_submit() before the loop blocks (libuv:
 *   zbuf_uring_uv_attach() in `<zbuf/uring_uv.h>` does all three).
 *
 * ### Fallback: the epoll path
 *
 * zbuf_uring_create() probes the kernel (zbuf_uring_probe()).  When
 * io_uring cannot be used (kernel too old, `kernel.io_uring_disabled` set,
 * a seccomp policy as in many containers) the engine runs on epoll with the
 * calls of zbuf-sock instead (`sendmsg()` / `sendmmsg()`, `MSG_ZEROCOPY`
 * with its error-queue completions, `recv()` / `recvmmsg()` into pool
 * buffers) and says so once, in one line on standard error (or through
 * zbuf_uring_opts_t::log): `zbuf-uring: io_uring unavailable (<reason>);
 * using the epoll path (zbuf-sock)`.  Every function below works on both;
 * where their behaviour differs the function says so.
 * zbuf_uring_backend() tells which one runs.
 *
 * ### Sending
 *
 * zbuf_uring_send() *consumes* a zbuf: the engine queues it and owns it
 * from then on.  Per stream socket, the zbufs queued between two
 * submissions go out together: one `sendmsg` request whose iovec array
 * points into all their segments (up to `IOV_MAX` segments and
 * zbuf_uring_sock_opts_t::batch_max bytes per request), so a hundred small
 * messages cost one request, not a hundred system calls.  One request per
 * stream socket is in flight at a time, which keeps the byte order.  A
 * datagram socket sends one request per zbuf (one zbuf is one datagram),
 * many in flight.
 *
 * A request of at least zbuf_uring_sock_opts_t::zc_min bytes (64 KiB by
 * default; zc_min_fixed, 8 KiB, when every byte lies in a registered
 * pool), whose segments average 4 KiB or more, on a socket opened with
 * #ZBUF_URING_SOCK_ZEROCOPY is a zero-copy one
 * (`IORING_OP_SENDMSG_ZC`, or `IORING_OP_SEND_ZC` / `SENDMSG_ZC` on
 * registered buffers when every byte lies in a pool registered with
 * zbuf_uring_register_pool(): the kernel then skips pinning the pages at
 * every send).  Other requests are plain `sendmsg`: copying small
 * requests is cheaper than the zero-copy bookkeeping, and the kernel puts
 * each segment of a zero-copy request in fragments of its own, at most 17
 * per packet, so small segments would make small packets.
 *
 * ### When the bytes are released
 *
 * - Plain request: the kernel copied the bytes during the request, so
 *   their buffer references go when its completion arrives.
 * - Zero-copy request: the completion says how many bytes the kernel took;
 *   the engine keeps its references to them until the request's second
 *   completion, the *notification* (`IORING_CQE_F_NOTIF`), says the kernel
 *   no longer reads the pages (for TCP: once they are acknowledged).  Never
 *   before.  On the epoll path the same holds with `MSG_ZEROCOPY` and its
 *   error-queue notification.
 * Release callbacks of enrolled buffers (zbuf_insert_buf()) therefore run
 * inside zbuf_uring_run(), on the engine's thread, when the last reference
 * goes: at the notification, or later if other zbufs still share the
 * buffer.  The send callback (zbuf_uring_send_cb) is about acceptance, not
 * release: it runs once the kernel has taken every byte of that zbuf.
 *
 * ### The adaptive choice
 *
 * With `IORING_SEND_ZC_REPORT_USAGE` (Linux 6.2) the notification also
 * says whether the kernel copied the pages after all
 * (`IORING_NOTIF_USAGE_ZC_COPIED`): loopback, veth, tun and devices without
 * scatter-gather do.  After zbuf_uring_sock_opts_t::copied_limit such
 * notifications in a row a socket stops asking for zero copy, as the
 * `MSG_ZEROCOPY` path of zbuf-sock does, so a loopback connection costs
 * what plain sends cost; it asks again after reprobe_after requests when
 * that is not 0.  #ZBUF_URING_SOCK_ZEROCOPY_ALWAYS keeps asking (for
 * measurements).  A socket that does not support zero copy at all
 * (`EOPNOTSUPP`: AF_UNIX) and a kernel that refuses the pinned memory
 * (`ENOMEM`, `ENOBUFS`: the locked-memory limit) get the same bytes resent
 * as a plain request, without losing one.
 *
 * ### Receiving
 *
 * A #zbuf_uring_bufring_t is a provided buffer ring (Linux 5.19) whose
 * buffers are taken from a #zbuf_pool_t.  zbuf_uring_recv_start() arms a
 * multishot receive on a socket with that ring: the kernel picks a buffer
 * from the ring when data arrives and completes with its id; each
 * completion becomes a new zbuf of one segment that references the pool
 * buffer (no copy after the kernel's; on a stream socket, where the
 * kernel has `IORING_RECVSEND_BUNDLE`, one completion may fill several
 * buffers and its zbuf then has one segment per buffer, in order, so that
 * the kernel reads, and acknowledges, in large steps).  Deleting the zbuf returns the
 * buffer to the pool, and the engine puts it back into the ring at its next
 * run.  When the application holds every buffer, the ring runs dry: the
 * kernel ends the multishot receive with `ENOBUFS`, before reading a byte,
 * and the engine re-arms it as soon as buffers come back (the pool's
 * refill notification wakes the engine from whichever thread deleted the
 * zbuf).  Nothing is lost or reordered: the bytes wait in the socket, and
 * TCP flow control slows the peer down meanwhile.
 *
 * ### Errors and ownership
 *
 * Negative errno as everywhere in libzbuf (zbuf_strerror()).  A call that
 * returns an error consumed nothing and never calls its callback (the rule
 * of libuv).  Callbacks run inside zbuf_uring_run() on the engine's thread;
 * they may call any function of this header except zbuf_uring_run() and
 * zbuf_uring_destroy() (`-EBUSY`).
 *
 * @code
 * zbuf_uring_t *u;
 * zbuf_uring_sock_t *s;
 * zbuf_uring_sock_opts_t so;
 * zbuf_uring_create(NULL, &u);                  // io_uring, or epoll with a log line
 * zbuf_uring_sock_opts_init(&so);
 * so.flags = ZBUF_URING_SOCK_ZEROCOPY;
 * zbuf_uring_sock_open(u, fd, &so, &s);
 * zbuf_uring_send(s, z, 0, NULL, NULL);         // z is the engine's now
 * zbuf_uring_sock_close(s, 1000, NULL, NULL);   // after the notifications
 * while (zbuf_uring_run(u, -1) > 0 && zbuf_uring_sock_count(u) > 0)
 *     ;
 * zbuf_uring_destroy(u, 1000);
 * @endcode
 */
#ifndef ZBUF_URING_H
#define ZBUF_URING_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <zbuf/zbuf.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @cond INTERNAL */
#if defined(ZBUF_URING_STATIC)
#define ZBUF_URING_EXPORT
#elif defined(ZBUF_URING_BUILDING)
#define ZBUF_URING_EXPORT __attribute__((visibility("default")))
#else
#define ZBUF_URING_EXPORT
#endif
/** @endcond */

/* ---------------------------------------------------------------------- */
/** @name Probing the kernel */
/** @{ */

/** What the kernel allows this process, found by zbuf_uring_probe(). */
typedef struct zbuf_uring_probe {
    /** io_uring can be set up here.  When false, zbuf_uring_create() runs
     *  the epoll path. */
    bool usable;
    /** Why not: the negative errno of `io_uring_setup()` (`-ENOSYS`: not in
     *  this kernel or blocked by seccomp; `-EPERM`: disabled by
     *  `kernel.io_uring_disabled` or a policy) or of a missing feature
     *  (`-EOPNOTSUPP`); 0 when usable. */
    int error;
    /** The same in words, for a log line (names the sysctl value when it
     *  explains the refusal). */
    char reason[160];
    /** `IORING_OP_SEND_ZC` and `IORING_OP_SENDMSG_ZC` (Linux 6.0 / 6.1). */
    bool send_zc;
    /** `IORING_SEND_ZC_REPORT_USAGE`: notifications say whether the kernel
     *  copied (Linux 6.2).  Without it the adaptive choice cannot see
     *  copies and zero copy stays on. */
    bool zc_report_usage;
    /** `IORING_OP_SENDMSG_ZC` on registered buffers (vectored fixed
     *  buffers, Linux 6.15); without it only single-segment requests use
     *  them (`IORING_OP_SEND_ZC` with a fixed buffer). */
    bool zc_fixed_vectored;
    /** Provided buffer rings (Linux 5.19). */
    bool buf_ring;
    /** Multishot receive with a provided buffer ring (Linux 6.0). */
    bool recv_multishot;
    /** `IORING_RECVSEND_BUNDLE`: one stream receive may fill several ring
     *  buffers, so a receive reads as much as a `recv()` into as many
     *  buffers would (Linux 6.10). */
    bool recv_bundle;
    /** Multishot accept (Linux 5.19). */
    bool accept_multishot;
    /** `IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN` (Linux 6.1):
     *  completions are processed only when the engine runs. */
    bool defer_taskrun;
} zbuf_uring_probe_t;

/**
 * @brief Find out what io_uring allows this process, by trying it.
 *
 * Sets up a small ring and tries each feature on a socket pair of its own
 * (no traffic leaves the process).  The first call does the work, later
 * calls return its result (thread-safe).  The environment variable
 * `ZBUF_URING_DISABLE=1` makes the probe report io_uring unusable (for
 * testing the fallback).
 *
 * @param[out] out  filled in.
 * @return 0 (also when io_uring is unusable: see @c out->usable);
 *         `-EINVAL` for NULL.
 */
ZBUF_URING_EXPORT int zbuf_uring_probe(zbuf_uring_probe_t *out);

/** @} */
/* ---------------------------------------------------------------------- */
/** @name The engine */
/** @{ */

/** An opaque engine: one io_uring (or epoll descriptor) and its sockets. */
typedef struct zbuf_uring zbuf_uring_t;

/** Which machinery an engine runs on (zbuf_uring_backend()). */
typedef enum zbuf_uring_backend {
    ZBUF_URING_BACKEND_IO_URING = 1, /**< io_uring */
    ZBUF_URING_BACKEND_EPOLL = 2,    /**< the epoll path: zbuf-sock calls */
} zbuf_uring_backend_t;

/** zbuf_uring_opts_t::flags: run the epoll path even where io_uring works
 *  (no log line: it was asked for). */
#define ZBUF_URING_FORCE_EPOLL 0x1u
/** zbuf_uring_opts_t::flags: fail with the probe's error instead of falling
 *  back to the epoll path. */
#define ZBUF_URING_NO_FALLBACK 0x2u
/** zbuf_uring_opts_t::flags: do not log the fallback. */
#define ZBUF_URING_QUIET 0x4u
/** zbuf_uring_opts_t::flags: do not set the ring up with
 *  `IORING_SETUP_DEFER_TASKRUN` (completions are then processed by the
 *  kernel as they happen rather than when the engine runs). */
#define ZBUF_URING_NO_DEFER_TASKRUN 0x8u
/** zbuf_uring_opts_t::flags: never hold completions back to batch them.
 *  By default, when receive completions have lately been coming fast enough
 *  that 16 or more are due within 50 us (about 320,000 a second), a wait
 *  asks the kernel for as many as are due within a window and returns when
 *  the window ends at the latest.  The window is 50 us; when that traffic
 *  is spread over many sockets, so that each brings fewer than 2 per wait,
 *  it doubles, up to 200 us.  Under such traffic a completion can then
 *  wait up to the window (plus the machine's timer wake-up), and the engine
 *  spends far less CPU per message (see @ref uring_coalesce).  With this
 *  flag every wait returns at the first completion.  No effect on the
 *  epoll path. */
#define ZBUF_URING_NO_COALESCE 0x10u

/** Default of zbuf_uring_opts_t::zc_min, measured (docs/benchmarks.md,
 *  section io_uring): the request size from which a zero-copy send whose
 *  pages the kernel must pin costs no more CPU than copying the bytes. */
#define ZBUF_URING_ZC_MIN_DEFAULT 65536u
/** Default of zbuf_uring_opts_t::zc_min_fixed, measured the same way: from
 *  this size a zero-copy send on registered buffers (no pinning) costs less
 *  CPU than copying. */
#define ZBUF_URING_ZC_MIN_FIXED_DEFAULT 8192u

/** Log callback of zbuf_uring_opts_t: one line, without a newline. */
typedef void (*zbuf_uring_log_cb)(void *arg, const char *line);

/** Options of zbuf_uring_create(); fill with zbuf_uring_opts_init() first. */
typedef struct zbuf_uring_opts {
    unsigned flags;       /**< ZBUF_URING_* flags above; default 0 */
    unsigned entries;     /**< submission queue entries, a power of two from 8
                               to 32768; default 256 (the completion queue has
                               8 times as many) */
    size_t zc_min;        /**< default zbuf_uring_sock_opts_t::zc_min for the
                               engine's sockets; default
                               #ZBUF_URING_ZC_MIN_DEFAULT */
    size_t zc_min_fixed;  /**< default zbuf_uring_sock_opts_t::zc_min_fixed;
                               default #ZBUF_URING_ZC_MIN_FIXED_DEFAULT */
    zbuf_uring_log_cb log; /**< where the fallback line goes; NULL: standard
                                error */
    void *log_arg;        /**< passed to @c log */
} zbuf_uring_opts_t;

/** Counters of an engine (zbuf_uring_get_stats()). */
typedef struct zbuf_uring_stats {
    uint64_t enters;   /**< system calls that submit or wait (`io_uring_enter`,
                            `epoll_wait`) */
    uint64_t sqes;     /**< requests submitted (io_uring) */
    uint64_t cqes;     /**< completions handled (io_uring) or events (epoll) */
    uint64_t wakes;    /**< wake-ups from zbuf_uring_wake() and pool refills */
    uint64_t sockets;  /**< sockets open now */
    uint64_t abandoned; /**< zero-copy requests whose buffers a bounded
                             teardown had to abandon (never released) */
} zbuf_uring_stats_t;

/** @brief Fill @p o with the defaults documented in #zbuf_uring_opts_t. */
ZBUF_URING_EXPORT void zbuf_uring_opts_init(zbuf_uring_opts_t *o);

/**
 * @brief Create an engine on the calling thread.
 *
 * Probes the kernel (zbuf_uring_probe()) and sets up an io_uring with the
 * best setup flags it accepts; falls back to the epoll path when io_uring
 * is unusable, with one log line (see the file comment), unless
 * #ZBUF_URING_NO_FALLBACK.
 *
 * @param o  options (copied), or NULL for the defaults.
 * @param[out] out  receives the engine; the caller destroys it with
 *                  zbuf_uring_destroy(), on this thread.
 * @return 0; `-EINVAL` (bad options); `-ENOMEM`; `-EMFILE`; with
 *         #ZBUF_URING_NO_FALLBACK the probe's error (`-ENOSYS`, `-EPERM`,
 *         `-EOPNOTSUPP`).
 */
ZBUF_URING_EXPORT int zbuf_uring_create(const zbuf_uring_opts_t *o, zbuf_uring_t **out);

/**
 * @brief Destroy an engine, after closing every socket still open.
 *
 * Closes every socket as zbuf_uring_sock_close() with @p timeout_ms does
 * (their close callbacks run), runs the engine until all are gone, then
 * frees it.  Policy for zero-copy sends whose notification does not come
 * (a peer that stopped reading keeps the pages in the socket's queues):
 * after @p timeout_ms the connections are aborted, which makes the kernel
 * drop them, and the engine waits up to @p timeout_ms (at least 100 ms)
 * more; buffers still not notified after that are *abandoned*: never
 * released (their release callbacks never run), because the kernel may
 * still read them.
 *
 * @param u  the engine (consumed); NULL is a no-op returning 0.
 * @param timeout_ms  milliseconds per wait; negative waits for ever.
 * @return 0; `-ECONNABORTED` (connections were aborted, every buffer was
 *         released); `-ETIMEDOUT` (buffers were abandoned); `-EBUSY` when
 *         called from a callback (nothing done).
 */
ZBUF_URING_EXPORT int zbuf_uring_destroy(zbuf_uring_t *u, int timeout_ms);

/** @brief Which machinery @p u runs on. */
ZBUF_URING_EXPORT zbuf_uring_backend_t zbuf_uring_backend(const zbuf_uring_t *u);

/**
 * @brief Submit what is queued, wait for completions, run their callbacks.
 *
 * Hands every prepared request to the kernel in one system call, waits up
 * to @p timeout_ms for at least one completion (0: does not wait; negative:
 * waits for ever), then handles every completion available, running
 * callbacks and releasing buffers, refills the buffer rings and submits the
 * requests those callbacks queued.  Under heavy receive traffic a wait may
 * go on for up to 50 us after the first completion (200 us when the traffic
 * is spread over many sockets), to gather more (#ZBUF_URING_NO_COALESCE,
 * @ref uring_coalesce).
 *
 * @return the number of completions (or epoll events) handled, 0 when the
 *         wait timed out; `-EBUSY` when called from a callback; `-EINTR`
 *         when a signal interrupted the wait; another negative errno from
 *         the kernel.
 */
ZBUF_URING_EXPORT int zbuf_uring_run(zbuf_uring_t *u, int timeout_ms);

/**
 * @brief Hand the prepared requests to the kernel now, without waiting.
 *
 * For an engine driven by another event loop: call it before that loop
 * blocks.  (zbuf_uring_run() does it itself.)
 *
 * @return requests submitted (0 on the epoll path, where there are none:
 *         pending sends are written instead); a negative errno.
 */
ZBUF_URING_EXPORT int zbuf_uring_submit(zbuf_uring_t *u);

/**
 * @brief A descriptor that becomes readable when zbuf_uring_run() has work.
 *
 * io_uring: an eventfd registered with the ring (`IORING_REGISTER_EVENTFD`),
 * created at the first call, signalled for every completion; epoll: the
 * epoll descriptor.  Poll it for `POLLIN` in another event loop and call
 * `zbuf_uring_run(u, 0)` when it is readable; do not read it.  It belongs
 * to the engine.
 *
 * @return the descriptor; a negative errno (`-EMFILE` ...).
 */
ZBUF_URING_EXPORT int zbuf_uring_fd(zbuf_uring_t *u);

/**
 * @brief How soon zbuf_uring_run() must be called even if zbuf_uring_fd()
 *        stays quiet (for another event loop's timer).
 *
 * @return 0 when work is due now (callbacks queued, sends to push, buffers
 *         to put back in a ring); the milliseconds to the nearest close
 *         deadline; -1 when nothing is pending.
 */
ZBUF_URING_EXPORT int zbuf_uring_timeout(const zbuf_uring_t *u);

/**
 * @brief Make a zbuf_uring_run() waiting on another thread return (or make
 *        the next one return at once).  Any thread; async-signal-unsafe.
 * @return 0; `-EINVAL`.
 */
ZBUF_URING_EXPORT int zbuf_uring_wake(zbuf_uring_t *u);

/** @brief Counters of @p u (a snapshot). */
ZBUF_URING_EXPORT void zbuf_uring_get_stats(const zbuf_uring_t *u, zbuf_uring_stats_t *st);

/** @brief Sockets attached to @p u and not yet freed (closing ones count). */
ZBUF_URING_EXPORT size_t zbuf_uring_sock_count(const zbuf_uring_t *u);

/**
 * @brief Register a pool's memory as io_uring fixed buffers.
 *
 * Zero-copy requests whose bytes all lie in the pool then name the
 * registered buffer instead of having the kernel pin the pages at every
 * send.  The pool is *borrowed*: it must stay alive (not deleted) until
 * zbuf_uring_unregister_pool() or zbuf_uring_destroy().  Registration pins
 * the pool's pages once and counts against `RLIMIT_MEMLOCK` for users
 * without `CAP_IPC_LOCK`.
 *
 * @return 0; `-EEXIST` (registered already); `-ENOSPC` (16 pools, or a
 *         pool larger than 16 GiB); `-ENOMEM` (the memory could not be
 *         pinned: raise the locked-memory limit); `-EOPNOTSUPP` on the
 *         epoll path (nothing to register; harmless to ignore); `-EINVAL`.
 */
ZBUF_URING_EXPORT int zbuf_uring_register_pool(zbuf_uring_t *u, zbuf_pool_t *p);

/**
 * @brief Undo zbuf_uring_register_pool().  Requests already submitted keep
 *        their buffers (the kernel holds them until they complete).
 * @return 0; `-ENOENT` (not registered); `-EINVAL`.
 */
ZBUF_URING_EXPORT int zbuf_uring_unregister_pool(zbuf_uring_t *u, zbuf_pool_t *p);

/** @} */
/* ---------------------------------------------------------------------- */
/** @name Provided buffer rings */
/** @{ */

/** An opaque provided buffer ring fed from a pool. */
typedef struct zbuf_uring_bufring zbuf_uring_bufring_t;

/** Counters of a buffer ring (zbuf_uring_bufring_get_stats()). */
typedef struct zbuf_uring_bufring_stats {
    uint64_t in_ring;   /**< buffers in the ring now (the kernel may pick them) */
    uint64_t capacity;  /**< ring entries */
    uint64_t consumed;  /**< buffers the kernel filled (completions with data) */
    uint64_t refilled;  /**< buffers put (back) into the ring */
    uint64_t empty;     /**< times a receive found the ring empty (ENOBUFS) */
    uint64_t waiting;   /**< sockets waiting for buffers now */
} zbuf_uring_bufring_stats_t;

/**
 * @brief Create a provided buffer ring whose buffers come from @p pool.
 *
 * Takes up to @p entries buffers from the pool (as many as it has free)
 * into the ring, and more whenever buffers come back.  The pool is
 * *borrowed*: it must outlive the ring.  Its zbuf_pool_set_notify() slot
 * stays the application's (the ring adds a watcher: zbuf_pool_add_notify()).
 * Several sockets may receive with one ring (they share its buffers).
 *
 * Buffers must hold what one completion delivers: a stream receive fills
 * at most one buffer per completion; a datagram needs its payload plus 144
 * bytes (the kernel's header and the sender's address, which sit in front
 * of the payload in the same buffer; on io_uring the payload starts 128
 * bytes in, on a cache line); a longer datagram is truncated and flagged
 * `MSG_TRUNC`.
 *
 * The ring holds only as many buffers as the traffic needs (a quarter more
 * than the kernel took between two runs, twice as many after it ran dry,
 * at least 32), and never more bytes of buffers than the core's L2 cache
 * (`sysconf(_SC_LEVEL2_CACHE_SIZE)`, within 256 KiB and 4 MiB; 1 MiB where
 * it does not say), or 4 buffers where 4 are more, for each socket
 * receiving with it: the pool gives back its most recently returned
 * buffers first, still in the cache, so the kernel's copy lands in warm
 * memory.  What does not fit
 * waits in the socket until the next run refills the ring.
 *
 * A received zbuf keeps its buffer until it is deleted, also while it waits
 * in a send queue (an echo): a socket that sends back what it receives can
 * hold every buffer of a shared ring while its peer, which needs a buffer to
 * read the echo, waits for it.  Give such sides rings (and pools) of their
 * own, or stop receiving while zbuf_uring_send_queued() is high.
 *
 * On the epoll path there is no ring: the object names the pool that
 * `recv()` / `recvmmsg()` take their buffers from, with the same
 * exhaustion and resume behaviour.
 *
 * @param entries  ring size, a power of two up to 32768; 0: the pool's
 *                 capacity rounded up to one (at most 32768).
 * @param[out] out  receives the ring; delete it with
 *                  zbuf_uring_bufring_delete().
 * @return 0; `-EINVAL`; `-ENOMEM`; `-ENOSPC` (the pool has
 *         #ZBUF_POOL_WATCHERS_MAX watchers, or 65536 rings exist);
 *         `-EOPNOTSUPP` (the kernel has no buffer rings).
 */
ZBUF_URING_EXPORT int zbuf_uring_bufring_create(zbuf_uring_t *u, zbuf_pool_t *pool,
                                                unsigned entries, zbuf_uring_bufring_t **out);

/**
 * @brief Delete a buffer ring: its buffers go back to the pool; buffers
 *        held in zbufs go back when those are deleted.
 * @param br  the ring (consumed on success); NULL is a no-op.
 * @return 0; `-EBUSY` (a socket still receives with it: stop it first).
 */
ZBUF_URING_EXPORT int zbuf_uring_bufring_delete(zbuf_uring_bufring_t *br);

/** @brief Counters of @p br (a snapshot). */
ZBUF_URING_EXPORT void zbuf_uring_bufring_get_stats(const zbuf_uring_bufring_t *br,
                                                    zbuf_uring_bufring_stats_t *st);

/** @} */
/* ---------------------------------------------------------------------- */
/** @name Sockets */
/** @{ */

/** An opaque socket attached to an engine. */
typedef struct zbuf_uring_sock zbuf_uring_sock_t;

/** zbuf_uring_sock_opts_t::flags: zero-copy sends from @c zc_min bytes
 *  (adaptive, see the file comment). */
#define ZBUF_URING_SOCK_ZEROCOPY 0x1u
/** zbuf_uring_sock_opts_t::flags: keep asking for zero copy even when the
 *  kernel reports copies (for measurements; slower on loopback). */
#define ZBUF_URING_SOCK_ZEROCOPY_ALWAYS 0x2u
/** zbuf_uring_sock_opts_t::flags: closing the socket does not close its
 *  descriptor (which must then stay open until the close callback). */
#define ZBUF_URING_SOCK_KEEP_FD 0x4u
/** zbuf_uring_sock_opts_t::flags: stream requests complete after a short
 *  send (the engine submits the rest) instead of the kernel retrying until
 *  every byte is taken (`MSG_WAITALL`, the default).  io_uring only. */
#define ZBUF_URING_SOCK_NO_WAITALL 0x8u
/** zbuf_uring_sock_opts_t::flags: never use registered buffers. */
#define ZBUF_URING_SOCK_NO_FIXED 0x10u

/** Options of zbuf_uring_sock_open(); fill with zbuf_uring_sock_opts_init(). */
typedef struct zbuf_uring_sock_opts {
    unsigned flags;          /**< ZBUF_URING_SOCK_* flags; default 0 (plain sends) */
    size_t zc_min;           /**< smallest request (bytes) sent zero-copy; default
                                  the engine's zbuf_uring_opts_t::zc_min */
    size_t zc_min_fixed;     /**< the same for a request whose bytes all lie in a
                                  registered pool; default the engine's
                                  zbuf_uring_opts_t::zc_min_fixed */
    unsigned copied_limit;   /**< "copied" notifications in a row that turn zero
                                  copy off; default 1 */
    uint64_t reprobe_after;  /**< requests after which zero copy is tried again
                                  once turned off; 0 (default) = never */
    size_t batch_max;        /**< most bytes in one stream request; default 4 MiB */
    unsigned dgram_inflight; /**< most datagram requests in flight; default 64 */
} zbuf_uring_sock_opts_t;

/** Counters of a socket (zbuf_uring_sock_get_stats()). */
typedef struct zbuf_uring_sock_stats {
    uint64_t sends;          /**< send requests that took bytes */
    uint64_t bytes_sent;     /**< bytes they took */
    uint64_t messages_sent;  /**< zbufs completely sent */
    uint64_t zc_sends;       /**< of the requests, zero-copy ones */
    uint64_t zc_fixed_sends; /**< of those, on registered buffers */
    uint64_t zc_notifs;      /**< zero-copy notifications received */
    uint64_t zc_copied;      /**< of which said the kernel copied */
    uint64_t zc_turned_off;  /**< times the adaptive choice turned zero copy off */
    uint64_t zc_fallbacks;   /**< zero-copy requests resent plain (EOPNOTSUPP,
                                  ENOMEM, ENOBUFS, unsupported flags) */
    uint64_t short_sends;    /**< requests that took fewer bytes than asked
                                  (the rest was submitted again) */
    uint64_t bytes_released; /**< bytes whose buffer references the engine has
                                  dropped (after completion or notification) */
    uint64_t outstanding;    /**< zero-copy requests awaiting notification now */
    uint64_t recvs;          /**< receive completions with data */
    uint64_t bytes_received; /**< their bytes */
    uint64_t recv_rearms;    /**< multishot receives armed again (after the ring
                                  ran dry, or the kernel ended one) */
    uint64_t recv_nobufs;    /**< receives stopped because the ring was empty */
    bool zerocopy_on;        /**< requests of zc_min bytes ask for zero copy now */
} zbuf_uring_sock_stats_t;

/** @brief Fill @p o with the defaults documented in #zbuf_uring_sock_opts_t. */
ZBUF_URING_EXPORT void zbuf_uring_sock_opts_init(zbuf_uring_sock_opts_t *o);

/**
 * @brief Attach a socket to an engine.
 *
 * @param fd  an open socket (TCP, UDP, or any stream or datagram socket;
 *            zero copy only on TCP and UDP).  The engine owns it from now
 *            on (closed by zbuf_uring_sock_close()) unless
 *            #ZBUF_URING_SOCK_KEEP_FD.  It may be blocking or not.
 * @param o   options (copied), or NULL for the defaults.
 * @param[out] out  receives the socket; close it with zbuf_uring_sock_close().
 * @return 0; `-EINVAL` (not a socket, bad options); `-ENOMEM`; another
 *         negative errno from the epoll path's registration.  On failure
 *         the caller still owns @p fd.
 */
ZBUF_URING_EXPORT int zbuf_uring_sock_open(zbuf_uring_t *u, int fd,
                                           const zbuf_uring_sock_opts_t *o,
                                           zbuf_uring_sock_t **out);

/** @brief The descriptor of @p s. */
ZBUF_URING_EXPORT int zbuf_uring_sock_fd(const zbuf_uring_sock_t *s);

/** @brief The engine @p s is attached to. */
ZBUF_URING_EXPORT zbuf_uring_t *zbuf_uring_sock_engine(const zbuf_uring_sock_t *s);

/** @brief Counters of @p s (a snapshot). */
ZBUF_URING_EXPORT void zbuf_uring_sock_get_stats(const zbuf_uring_sock_t *s,
                                                 zbuf_uring_sock_stats_t *st);

/**
 * @brief Send callback: the kernel has taken every byte of the zbuf, or the
 *        send failed.
 *
 * @param status  0, or a negative errno: the socket's error (`-EPIPE`,
 *                `-ECONNRESET` ...; on a stream socket every later zbuf
 *                fails with it too), `-EAGAIN` (`MSG_DONTWAIT` and the
 *                socket was full), `-ECANCELED` (the socket was closed
 *                first), `-EMSGSIZE` (datagram too large).
 * @param unsent  NULL on success; on failure the bytes the kernel did not
 *                take (all of a datagram), as a zbuf the callback now owns
 *                (delete it or send it again), or NULL when none are left.
 * @param arg     the argument given with the zbuf.
 *
 * Runs on the engine's thread inside zbuf_uring_run().  The bytes taken
 * may still be held for a zero-copy notification.
 */
typedef void (*zbuf_uring_send_cb)(zbuf_uring_sock_t *s, int status, zbuf_t *unsent, void *arg);

/**
 * @brief Queue a zbuf for sending on a stream socket (or as one datagram on
 *        a connected datagram socket).
 *
 * @param s      the socket.
 * @param z      the bytes (consumed on success: the engine deletes what it
 *               sent, at the times the file comment gives; may be empty,
 *               which completes at once for a stream socket and sends an
 *               empty datagram on a datagram socket).  File segments
 *               (zbuf_buf_wrap_file()) are read into library buffers when
 *               their turn comes (counted as copies).
 * @param flags  `MSG_DONTWAIT` (fail with `-EAGAIN` instead of waiting for
 *               room), `MSG_OOB`, `MSG_DONTROUTE`, `MSG_MORE`, `MSG_EOR`,
 *               `MSG_CONFIRM`; zbufs are batched only with neighbours of the
 *               same flags.
 * @param cb     called once (see #zbuf_uring_send_cb), or NULL (then bytes
 *               left by a failure are deleted).
 * @param arg    passed to @p cb.
 * @return 0 (queued); `-EINVAL` (bad zbuf or flags); `-EPIPE` or the
 *         socket's earlier send error; `-EBADF` (closing).  On failure the
 *         caller keeps @p z and @p cb is not called.
 */
ZBUF_URING_EXPORT int zbuf_uring_send(zbuf_uring_sock_t *s, zbuf_t *z, int flags,
                                      zbuf_uring_send_cb cb, void *arg);

/**
 * @brief Queue a zbuf as one datagram to @p to (NULL: the connected peer).
 * @return as zbuf_uring_send(); `-EINVAL` also for an address longer than
 *         a `struct sockaddr_storage`.
 */
ZBUF_URING_EXPORT int zbuf_uring_sendto(zbuf_uring_sock_t *s, zbuf_t *z, int flags,
                                        const struct sockaddr *to, socklen_t tolen,
                                        zbuf_uring_send_cb cb, void *arg);

/** @brief Bytes queued on @p s that the kernel has not taken yet (for flow
 *         control: stop producing above a high-water mark). */
ZBUF_URING_EXPORT size_t zbuf_uring_send_queued(const zbuf_uring_sock_t *s);

/** What a receive callback learns besides the bytes. */
typedef struct zbuf_uring_rx {
    const struct sockaddr *from; /**< datagram: the sender (borrowed for the
                                      call); NULL for a stream */
    socklen_t fromlen;           /**< length of @c from */
    int flags;                   /**< datagram: `MSG_TRUNC` when it did not fit
                                      a buffer and its tail was lost */
} zbuf_uring_rx_t;

/**
 * @brief Receive callback.
 *
 * @param nread  > 0: bytes received, in @p z.  0 with @p z not NULL: an
 *               empty datagram.  0 with @p z NULL: end of stream (the
 *               receive has stopped).  < 0: the socket's error (the receive
 *               has stopped).
 * @param z      a new zbuf the callback owns (delete it when done: that
 *               gives the buffer back), or NULL.
 * @param rx     details (borrowed for the call).
 * @param arg    the argument given to zbuf_uring_recv_start().
 */
typedef void (*zbuf_uring_recv_cb)(zbuf_uring_sock_t *s, ssize_t nread, zbuf_t *z,
                                   const zbuf_uring_rx_t *rx, void *arg);

/**
 * @brief Receive continuously into buffers of @p br.
 *
 * io_uring: a multishot receive (`IORING_OP_RECV` on stream sockets,
 * `IORING_OP_RECVMSG` with the sender's address on datagram sockets) that
 * picks buffers from the ring; epoll: `recv()` / `recvmmsg()` into the
 * pool when the socket is readable.  Callbacks come in the order of the
 * bytes.  When the ring runs dry, receiving pauses and resumes by itself
 * (see the file comment).
 *
 * @return 0; `-EALREADY` (receiving); `-EBADF` (closing); `-EINVAL`;
 *         `-ENOMEM`.
 */
ZBUF_URING_EXPORT int zbuf_uring_recv_start(zbuf_uring_sock_t *s, zbuf_uring_bufring_t *br,
                                            zbuf_uring_recv_cb cb, void *arg);

/**
 * @brief Stop receiving.  No receive callback runs after this returns; a
 *        receive the kernel completes meanwhile keeps its bytes for the
 *        next zbuf_uring_recv_start() (nothing is lost).
 * @return 0; `-EINVAL`.
 */
ZBUF_URING_EXPORT int zbuf_uring_recv_stop(zbuf_uring_sock_t *s);

/** Accept callback: @p fd is a new connected socket the callback owns, or
 *  a negative errno (the listener has stopped). */
typedef void (*zbuf_uring_accept_cb)(zbuf_uring_sock_t *s, int fd, void *arg);

/**
 * @brief Accept connections on a listening socket until stopped
 *        (multishot accept on io_uring).  New sockets are `SOCK_CLOEXEC`
 *        and blocking; attach them with zbuf_uring_sock_open().
 * @return 0; `-EALREADY`; `-EBADF`; `-EINVAL`.
 */
ZBUF_URING_EXPORT int zbuf_uring_accept_start(zbuf_uring_sock_t *s, zbuf_uring_accept_cb cb,
                                              void *arg);

/** @brief Stop accepting; no accept callback runs after this returns.
 *  @return 0; `-EINVAL`. */
ZBUF_URING_EXPORT int zbuf_uring_accept_stop(zbuf_uring_sock_t *s);

/** Callback of zbuf_uring_connect() and zbuf_uring_shutdown(): 0 or a
 *  negative errno. */
typedef void (*zbuf_uring_status_cb)(zbuf_uring_sock_t *s, int status, void *arg);

/**
 * @brief Connect @p s to @p addr through the engine.
 * @param addr  copied.
 * @return 0 (@p cb runs with the result); `-EALREADY`; `-EBADF`; `-EINVAL`.
 */
ZBUF_URING_EXPORT int zbuf_uring_connect(zbuf_uring_sock_t *s, const struct sockaddr *addr,
                                         socklen_t addrlen, zbuf_uring_status_cb cb, void *arg);

/**
 * @brief Shut the sending direction down (`SHUT_WR`, the peer reads end
 *        of stream) once every zbuf queued so far is taken by the kernel.
 *        Later sends fail with `-EPIPE`.
 * @return 0 (@p cb runs with the result); `-EALREADY`; `-EBADF`; `-EINVAL`.
 */
ZBUF_URING_EXPORT int zbuf_uring_shutdown(zbuf_uring_sock_t *s, zbuf_uring_status_cb cb,
                                          void *arg);

/** Close callback: @p s is freed when it returns. */
typedef void (*zbuf_uring_close_cb)(zbuf_uring_sock_t *s, void *arg);

/**
 * @brief Close a socket once the kernel has released its buffers.
 *
 * Stops receiving and accepting; zbufs queued and not yet handed to the
 * kernel fail with `-ECANCELED` (their send callbacks get them back); a
 * request in flight is cancelled (the bytes it had sent stay sent).  Then
 * the socket waits for the notification of every zero-copy request, with
 * the policy of zbuf_uring_destroy(): after @p timeout_ms it aborts the
 * connection (`connect(AF_UNSPEC)`: a TCP reset), waits up to @p timeout_ms
 * (at least 100 ms) more, then abandons what is still not notified.  Then
 * it closes the descriptor (unless #ZBUF_URING_SOCK_KEEP_FD), runs @p cb
 * and frees itself.  All of this happens inside later zbuf_uring_run()
 * calls.
 *
 * @param s  the socket (consumed: no other call on it may follow).
 * @param timeout_ms  negative waits for ever.
 * @param cb  called once, or NULL.
 * @return 0; `-EINVAL`; `-EBADF` (closed already).
 */
ZBUF_URING_EXPORT int zbuf_uring_sock_close(zbuf_uring_sock_t *s, int timeout_ms,
                                            zbuf_uring_close_cb cb, void *arg);

/** @} */
/* ---------------------------------------------------------------------- */
/** @name The VxWorks zbufSockLib routines on this engine */
/** @{ */

/**
 * @brief Run the `zbufSockLib` routines of `<zbuf/vxworks_sock.h>` on an
 *        io_uring engine from now on.
 *
 * Starts a thread (named `zbuf-uring-vx`) that owns an engine and serves
 * the routines' requests: zbufSockSend() and friends queue their zbuf on
 * the engine (zero copy from the engine's measured thresholds, adaptive)
 * and wait until the kernel has taken it; zbufSockRecv() and zbufSockRecvfrom() receive once into a
 * provided buffer ring fed from a pool of 16 KiB buffers.  Free routines
 * run on that thread, at the notification.  The routines keep their
 * contract (ownership, errors, a zbuf sent whole); see
 * `<zbuf/vxworks_sock.h>`.
 *
 * When io_uring is unusable, the routines stay on their epoll path
 * (zbuf-sock) and one line is logged, as for zbuf_uring_create().
 *
 * @param o  engine options (copied), or NULL.
 * @return #ZBUF_URING_BACKEND_IO_URING (the routines now run on io_uring),
 *         #ZBUF_URING_BACKEND_EPOLL (they stay on the epoll path); a
 *         negative errno (`-ENOMEM`, `-EAGAIN`: the thread could not start).
 *         Calling it again returns the current choice.
 */
ZBUF_URING_EXPORT int zbuf_uring_vx_init(const zbuf_uring_opts_t *o);

/**
 * @brief Put the `zbufSockLib` routines back on the epoll path and stop
 *        the engine thread (destroying the engine as zbuf_uring_destroy()
 *        with @p timeout_ms does).  Routines running on other threads are
 *        waited for.
 * @return as zbuf_uring_destroy(); 0 when the engine was not in use.
 */
ZBUF_URING_EXPORT int zbuf_uring_vx_shutdown(int timeout_ms);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* ZBUF_URING_H */
