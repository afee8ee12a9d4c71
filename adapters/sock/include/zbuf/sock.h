/* SPDX-License-Identifier: MIT */
/**
 * @file zbuf/sock.h
 * @brief zbufs over Linux sockets: gather sends, pool receives, MSG_ZEROCOPY
 *        and sendfile, without a copy in user space.
 *
 * Library `zbuf-sock` (CMake target `zbuf::sock`, pkg-config `zbuf-sock`),
 * built on the core library and kept apart from it so that the core never
 * depends on sockets.
 *
 * ### Two levels
 *
 * - **Plain calls on a descriptor** (`zbuf_sock_*_fd`, zbuf_sock_recv() ...):
 *   no state.  A send is one `sendmsg()` with one iovec per segment (at most
 *   `IOV_MAX` per call); the kernel copies the bytes during the call, so the
 *   bytes sent are removed from the zbuf (their buffers released, release
 *   callbacks run) before the call returns.
 * - **A socket handle** (#zbuf_sock_t, zbuf_sock_open()): the same calls plus
 *   `MSG_ZEROCOPY`.  The kernel then reads the application's pages after the
 *   call returns, so the handle keeps a reference to the bytes of every
 *   zero-copy send until the kernel's completion notification says it is
 *   done with them; only then are they released.
 *
 * ### The send contract
 *
 * A send *borrows* the zbuf and removes from its front exactly the bytes the
 * kernel accepted (zbuf_cut() for a copying send; for a zero-copy send the
 * handle keeps its own reference to those bytes until completion).  What
 * was not sent stays in the zbuf, in order, so a caller retries with the
 * same zbuf and never loses or duplicates a byte.
 *
 * - Stream socket, blocking: sends everything (several system calls when the
 *   zbuf has more than `IOV_MAX` segments or file segments); `EINTR` is
 *   retried.
 * - Stream socket, non-blocking: sends what fits; returns the count, or
 *   `-EAGAIN` when nothing fit.
 * - Datagram socket: one zbuf is one datagram, sent whole or not at all.
 * - `MSG_NOSIGNAL` is always added: a closed peer gives `-EPIPE`, never
 *   `SIGPIPE` (except inside `sendfile()`, which takes no flags: programs
 *   that send file segments should ignore `SIGPIPE`).
 *
 * ### File segments
 *
 * A segment of a buffer made by zbuf_buf_wrap_file() is sent without a
 * read(), the memory segments around it with `sendmsg()`, in order.  The
 * file segment goes out with `sendfile()`, 4 MiB per call: the kernel
 * references the page cache, and no byte is copied on the way to a network
 * device (a peer on this host gets the one copy every loopback delivery
 * makes).  Measured on loopback with CUBIC at receive sizes of 16 KiB to
 * 1 MiB, this costs the sender half the CPU of read() + write() and less
 * than writing from a mapping of the file, so it is used for every peer.
 * Under BBR the kernel paces the socket, and a `sendfile()` sender to a
 * local peer spends more CPU on the pacing than it saves on copies (it
 * measured slower than read() + write()): give sockets to peers on this
 * host another congestion control (`TCP_CONGESTION`, e.g. "cubic") where
 * BBR is the system's default (docs/benchmarks.md, "File to socket").
 * #ZBUF_SOCK_FILE_MMAP asks
 * for the mapped write instead (8 MiB windows, mapped with MAP_POPULATE);
 * #ZBUF_SOCK_FILE_SENDFILE, the default, is kept for programs that name it.  The
 * file buffer is released as soon as its bytes were accepted (closing the
 * file then is safe; changing its contents before the peer has read them
 * may change what is sent, as with any `sendfile()`).  A segment that runs
 * past the end of its file gives `-EIO` once the bytes that exist are sent.
 * Datagram sockets read file segments into a bounce buffer (counted as a
 * copy).
 *
 * ### Two events per send
 *
 * A handle reports, for every system call that accepted bytes, an
 * #ZBUF_SOCK_ACCEPTED event (the kernel took the bytes: flow control may
 * move on) and later exactly one #ZBUF_SOCK_RELEASED event with the same
 * sequence number (the kernel no longer references them: their buffers have
 * been released).  For a copying send both come before the call returns;
 * for a zero-copy send RELEASED never precedes the kernel's notification and
 * says whether the kernel copied after all.
 *
 * ### Zero copy, and when it is not used
 *
 * A handle opened with #ZBUF_SOCK_ZEROCOPY asks for `MSG_ZEROCOPY` on sends
 * of at least zbuf_sock_opts_t::zerocopy_min bytes (smaller ones are
 * cheaper to copy).  It falls back to a copying send, without losing a
 * byte, when:
 * - the socket does not support it (`SO_ZEROCOPY` refused: AF_UNIX,
 *   raw sockets, old kernels): never enabled, no notification is awaited;
 * - the kernel reports that it copied anyway (`SO_EE_CODE_ZEROCOPY_COPIED`:
 *   loopback, veth, tun, devices without scatter-gather): after
 *   zbuf_sock_opts_t::copied_limit such completions in a row the handle
 *   stops asking, so that a loopback connection runs as fast as plain
 *   sends; it asks again after zbuf_sock_opts_t::reprobe_after sends if
 *   that is not 0;
 * - the send fails with `ENOBUFS` (socket option memory or the locked-page
 *   limit): the handle reaps completions and resends the same bytes
 *   without `MSG_ZEROCOPY`;
 * - zbuf_sock_opts_t::max_outstanding sends already await completion.
 *
 * ### Completions
 *
 * Completions arrive on the socket's error queue (the socket polls with
 * `POLLERR`/`EPOLLERR`).  Drive them either way:
 * - call zbuf_sock_complete() when the event loop reports `POLLERR`
 *   (libuv: `UV_DISCONNECT` is not it; poll the fd for errors), or
 * - open the handle with #ZBUF_SOCK_THREAD: a background thread of the
 *   library (named `zbuf-sock-zc`) drives the completions of every such
 *   handle, so release callbacks run even if the program never calls back.
 * A handle also reaps on its own when it reaches max_outstanding and in
 * zbuf_sock_flush() / zbuf_sock_close().  A handle with zero copy owns its
 * socket's error queue: other error-queue messages (IP_RECVERR) are dropped.
 *
 * ### Threads and callbacks
 *
 * Sends on one handle are serialised by the handle (each call borrows its
 * zbuf, which only that call may use meanwhile).  zbuf_sock_complete() may
 * run on any thread at any time.  Release callbacks and events run on the
 * thread that processed the completion (the sender, a zbuf_sock_complete()
 * caller, or the completion thread), outside the handle's locks: they may
 * send on the handle, but must not block for long and must not call
 * zbuf_sock_close() on their own handle.
 *
 * ### Receive
 *
 * zbuf_sock_recv() reads into buffers taken from a #zbuf_pool_t and appends
 * them to a zbuf: the kernel's copy is the only one.  Deleting the zbuf
 * gives the buffers back to the pool.  Datagrams: one zbuf per datagram, with
 * the sender's address; zbuf_sock_recvmmsg() receives a batch.
 *
 * ### Errors
 *
 * Negative errno as everywhere in libzbuf; zbuf_strerror() names them.  A
 * call that fails before the kernel accepted anything changes nothing.
 *
 * @code
 * zbuf_sock_opts_t o;
 * zbuf_sock_t *s;
 * zbuf_sock_opts_init(&o);
 * o.flags = ZBUF_SOCK_ZEROCOPY | ZBUF_SOCK_THREAD;
 * if (zbuf_sock_open(fd, &o, &s) == 0) {
 *     zbuf_sock_send(s, z, 0);      // z keeps whatever was not sent
 *     zbuf_sock_close(s, 1000);     // waits for completions, closes fd
 * }
 * @endcode
 */
#ifndef ZBUF_SOCK_H
#define ZBUF_SOCK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <zbuf/zbuf.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @cond INTERNAL */
#if defined(ZBUF_SOCK_STATIC)
#define ZBUF_SOCK_EXPORT
#elif defined(ZBUF_SOCK_BUILDING)
#define ZBUF_SOCK_EXPORT __attribute__((visibility("default")))
#else
#define ZBUF_SOCK_EXPORT
#endif
/** @endcond */

/* ---------------------------------------------------------------------- */
/** @name Messages (datagrams) */
/** @{ */

/**
 * @brief One datagram for zbuf_sock_sendmmsg(), zbuf_sock_recvfrom() and
 *        zbuf_sock_recvmmsg().
 */
typedef struct zbuf_sock_msg {
    /** Send: the datagram (borrowed; emptied when sent).  Receive: set to a
     *  new zbuf holding the datagram, which the caller deletes. */
    zbuf_t *z;
    /** Send: destination, used when @c addrlen is not 0.  Receive: the
     *  sender's address. */
    struct sockaddr_storage addr;
    /** Length of @c addr; 0 on send means "the connected peer". */
    socklen_t addrlen;
    /** Receive: `msg_flags` of the datagram (`MSG_TRUNC` when it did not
     *  fit in the space offered and its tail was lost). */
    int flags;
} zbuf_sock_msg_t;

/** @} */
/* ---------------------------------------------------------------------- */
/** @name Plain calls on a descriptor (copying sends, pool receives) */
/** @{ */

/**
 * @brief Send a zbuf on a stream socket by gather writes.
 *
 * One `sendmsg()` per run of up to `IOV_MAX` memory segments (`MSG_MORE`
 * when more follows), file segments as described above, in order.  The
 * bytes accepted are cut from the front of @p z (their buffers released on
 * this thread); the rest stays in @p z.
 *
 * @param fd     a connected stream socket, blocking or not.
 * @param z      the bytes to send (borrowed; loses the bytes sent).
 * @param flags  `send()` flags; `MSG_NOSIGNAL` is added.
 * @return bytes sent (all of them for a blocking socket and an empty @p z
 *         gives 0); `-EAGAIN` when a non-blocking socket took nothing;
 *         `-EINVAL` for a bad argument; `-EIO` when a file segment lies
 *         past the end of its file; another negative errno from the kernel
 *         (`-EPIPE`, `-ECONNRESET` ...), in which case the bytes sent before
 *         the error are gone from @p z and the rest is still there.
 */
ZBUF_SOCK_EXPORT ssize_t zbuf_sock_send_fd(int fd, zbuf_t *z, int flags);

/**
 * @brief Send a zbuf as one datagram.
 *
 * The zbuf is sent whole or not at all.  More than `IOV_MAX` segments or a
 * file segment make the datagram go through one bounce buffer (counted in
 * zbuf_stats_t::bytes_copied).  On success @p z is emptied.
 *
 * @param fd     a datagram socket.
 * @param z      the datagram (borrowed); may be empty (a zero-length datagram).
 * @param to     destination, or NULL for a connected socket.
 * @param tolen  length of @p to.
 * @return bytes sent; `-EAGAIN`; `-EMSGSIZE`; `-EINVAL`; `-ENOMEM`; another
 *         negative errno.  On failure @p z is unchanged.
 */
ZBUF_SOCK_EXPORT ssize_t zbuf_sock_sendto_fd(int fd, zbuf_t *z, int flags,
                                             const struct sockaddr *to, socklen_t tolen);

/**
 * @brief Send a batch of datagrams with `sendmmsg()`.
 *
 * Sends @p msgs in order, up to 64 per system call, until all are sent or
 * the kernel stops (the socket would block, or an error).  Each datagram
 * sent has its zbuf emptied; the others are unchanged.
 *
 * @param msgs   datagrams; `z` and, for unconnected sockets, `addr`/`addrlen`
 *               filled in by the caller (borrowed).
 * @param n      number of entries.
 * @return the number of datagrams sent, counted from the first (less than
 *         @p n when the kernel stopped early); a negative errno when the
 *         first could not be sent (`-EAGAIN` ...).
 */
ZBUF_SOCK_EXPORT int zbuf_sock_sendmmsg_fd(int fd, zbuf_sock_msg_t *msgs, unsigned n, int flags);

/**
 * @brief Receive from a stream socket into pool buffers, appended to a zbuf.
 *
 * Takes as many buffers of @p pool as @p max bytes need (at most 64, fewer
 * if the pool runs short), reads with one `recvmsg()` into all of them and
 * appends the filled parts to @p z as segments; unused buffers go straight
 * back to the pool.  No byte is copied after the kernel's copy.  With a NULL
 * @p pool, library buffers of up to 64 KiB are allocated instead.
 *
 * @param fd     a connected stream socket (or a datagram socket, when the
 *               caller does not need the sender's address).
 * @param pool   where the memory comes from, or NULL.
 * @param max    most bytes to receive, 1 or more.
 * @param flags  `recv()` flags (`MSG_DONTWAIT`, `MSG_PEEK`, `MSG_WAITALL` ...).
 * @param z      the zbuf that grows (borrowed).
 * @return bytes received and appended; 0 at end of stream; `-EAGAIN`;
 *         `-ENOBUFS` when the pool has no free buffer; `-ENOMEM` (if memory
 *         for segment descriptors ran out after the kernel delivered bytes,
 *         those bytes are lost: treat the connection as broken);
 *         `-EINVAL`; another negative errno.  `EINTR` is retried.
 */
ZBUF_SOCK_EXPORT ssize_t zbuf_sock_recv(int fd, zbuf_pool_t *pool, size_t max, int flags,
                                        zbuf_t *z);

/**
 * @brief Receive one datagram into pool buffers, with its sender's address.
 *
 * @param pool   where the memory comes from, or NULL for library buffers.
 * @param max    largest datagram accepted (bytes beyond are lost and
 *               `MSG_TRUNC` is set in @c msg->flags); 0 means one pool
 *               buffer (or 65535 bytes without a pool).
 * @param msg    receives the new zbuf in @c z (the caller deletes it; an
 *               empty zbuf for a zero-length datagram), the address and
 *               the flags.
 * @return bytes received; `-EAGAIN`; `-ENOBUFS`; `-ENOMEM`; `-EINVAL`;
 *         another negative errno.  On failure @c msg->z is left NULL.
 */
ZBUF_SOCK_EXPORT ssize_t zbuf_sock_recvfrom(int fd, zbuf_pool_t *pool, size_t max, int flags,
                                            zbuf_sock_msg_t *msg);

/**
 * @brief Receive up to @p n datagrams with one `recvmmsg()`.
 *
 * Like zbuf_sock_recvfrom() for each entry.  The batch shrinks when the
 * pool cannot cover all @p n datagrams of @p max bytes.
 *
 * @param flags  `recvmmsg()` flags (`MSG_DONTWAIT`, `MSG_WAITFORONE` ...).
 * @return the number of entries filled (each with a new zbuf the caller
 *         deletes); `-EAGAIN`; `-ENOBUFS`; `-ENOMEM`; `-EINVAL`; another
 *         negative errno.
 */
ZBUF_SOCK_EXPORT int zbuf_sock_recvmmsg(int fd, zbuf_pool_t *pool, size_t max,
                                        zbuf_sock_msg_t *msgs, unsigned n, int flags);

/** @} */
/* ---------------------------------------------------------------------- */
/** @name Socket handles: zero copy, events, deferred close */
/** @{ */

/** An opaque socket handle. */
typedef struct zbuf_sock zbuf_sock_t;

/** zbuf_sock_opts_t::flags: ask for `MSG_ZEROCOPY` (sets `SO_ZEROCOPY`). */
#define ZBUF_SOCK_ZEROCOPY 0x1u
/** zbuf_sock_opts_t::flags: send file segments with `sendfile()` (the
 *  default; kept so that programs that ask for it still build). */
#define ZBUF_SOCK_FILE_SENDFILE 0x20u
/** zbuf_sock_opts_t::flags: send file segments by writing from a mapping
 *  of the file instead of `sendfile()`. */
#define ZBUF_SOCK_FILE_MMAP 0x40u
/** zbuf_sock_opts_t::flags: drive completions from the library's
 *  background thread. */
#define ZBUF_SOCK_THREAD 0x2u
/** zbuf_sock_opts_t::flags: keep asking for zero copy even when the kernel
 *  reports copies (for measurements and tests; slower on loopback). */
#define ZBUF_SOCK_ZEROCOPY_ALWAYS 0x4u
/** zbuf_sock_opts_t::flags: the handle borrows the descriptor:
 *  zbuf_sock_close() does not close it. */
#define ZBUF_SOCK_KEEP_FD 0x8u
/**
 * zbuf_sock_opts_t::flags: while zero-copy sends are outstanding, the handle
 * holds a duplicate of the descriptor, so that a program that closes its
 * descriptor directly (the VxWorks layer's case) neither loses completions
 * nor frees buffers the kernel still reads: the socket really closes when
 * the last completion has arrived.  Implies #ZBUF_SOCK_KEEP_FD.
 */
#define ZBUF_SOCK_HOLD_FD 0x10u

/** Kind of a #zbuf_sock_event_t. */
typedef enum zbuf_sock_event_type {
    ZBUF_SOCK_ACCEPTED = 1, /**< the kernel accepted the bytes of one send call */
    ZBUF_SOCK_RELEASED = 2, /**< the kernel no longer references them */
} zbuf_sock_event_type_t;

/** An event of a socket handle. */
typedef struct zbuf_sock_event {
    zbuf_sock_event_type_t type; /**< accepted or released */
    uint64_t seq;                /**< number of the send call on this handle (1, 2 ...);
                                      the RELEASED event repeats its ACCEPTED's */
    size_t bytes;                /**< bytes of that call */
    bool zerocopy;               /**< the call avoided the user-to-kernel copy
                                      (MSG_ZEROCOPY or sendfile) */
    bool copied;                 /**< RELEASED: the kernel copied the bytes after all
                                      (always true for a copying send) */
} zbuf_sock_event_t;

/**
 * @brief Event callback of a socket handle.
 *
 * Runs on the thread that sent (ACCEPTED) or that processed the completion
 * (RELEASED), outside the handle's locks.  @p ev is borrowed for the call.
 */
typedef void (*zbuf_sock_event_cb)(zbuf_sock_t *s, const zbuf_sock_event_t *ev, void *arg);

/** Options of zbuf_sock_open(); fill with zbuf_sock_opts_init() first. */
typedef struct zbuf_sock_opts {
    unsigned flags;           /**< ZBUF_SOCK_* flags; default 0 (copying sends) */
    size_t zerocopy_min;      /**< smallest send (bytes) that asks for zero copy;
                                   default 16384 */
    unsigned max_outstanding; /**< most zero-copy sends awaiting completion; more
                                   are sent copying; default 1024, at most 65536 */
    unsigned copied_limit;    /**< COPIED completions in a row that turn zero copy
                                   off; default 1 */
    uint64_t reprobe_after;   /**< sends after which zero copy is tried again once
                                   turned off; 0 (default) = never */
    zbuf_sock_event_cb on_event; /**< events, or NULL */
    void *event_arg;          /**< passed to @c on_event */
} zbuf_sock_opts_t;

/** Counters of a socket handle (zbuf_sock_get_stats()). */
typedef struct zbuf_sock_stats {
    uint64_t sends;        /**< send system calls that accepted bytes */
    uint64_t bytes;        /**< bytes they accepted */
    uint64_t zc_sends;     /**< of which MSG_ZEROCOPY calls */
    uint64_t zc_completed; /**< zero-copy calls whose completion arrived */
    uint64_t zc_copied;    /**< of which the kernel reported it copied */
    uint64_t zc_enobufs;   /**< ENOBUFS answers resent without zero copy */
    uint64_t zc_capped;    /**< sends made copying because max_outstanding was reached */
    uint64_t zc_turned_off; /**< times the COPIED fallback turned zero copy off */
    uint64_t file_bytes;   /**< bytes sent by sendfile() */
    uint64_t stray;        /**< completion ids matching no send (0 unless the kernel
                                or another reader misbehaves) */
    uint64_t abandoned;    /**< sends whose buffers zbuf_sock_close() abandoned */
    uint64_t outstanding;  /**< zero-copy sends awaiting completion now */
    bool zerocopy_on;      /**< whether sends of zerocopy_min bytes ask for it now */
} zbuf_sock_stats_t;

/**
 * @brief Fill @p o with the defaults documented in #zbuf_sock_opts_t.
 */
ZBUF_SOCK_EXPORT void zbuf_sock_opts_init(zbuf_sock_opts_t *o);

/**
 * @brief Make a handle for a socket.
 *
 * With #ZBUF_SOCK_ZEROCOPY, sets `SO_ZEROCOPY` on TCP and UDP sockets; when
 * the kernel refuses it (or the socket is of another kind) the handle works
 * with copying sends and awaits no notification.
 *
 * @param fd   an open socket.  The handle owns it from now on (closed by
 *             zbuf_sock_close()) unless #ZBUF_SOCK_KEEP_FD is set.
 * @param o    options (copied), or NULL for the defaults.
 * @param[out] out  receives the handle; the caller closes it with
 *             zbuf_sock_close().
 * @return 0; `-EINVAL` (bad descriptor or options, @c max_outstanding over
 *         65536); `-ENOMEM`; `-EAGAIN` (the completion thread could not be
 *         started).  On failure the caller still owns @p fd.
 */
ZBUF_SOCK_EXPORT int zbuf_sock_open(int fd, const zbuf_sock_opts_t *o, zbuf_sock_t **out);

/** @brief The descriptor of @p s. */
ZBUF_SOCK_EXPORT int zbuf_sock_fd(const zbuf_sock_t *s);

/**
 * @brief zbuf_sock_send_fd() through a handle: zero copy when enabled and
 *        the run of memory segments is at least zerocopy_min bytes.
 *
 * Zero-copy sends keep a reference to the bytes sent until their completion;
 * copying sends release them before returning.  Events as described above.
 *
 * @return as zbuf_sock_send_fd(); also `-EBADF` after zbuf_sock_close() began.
 */
ZBUF_SOCK_EXPORT ssize_t zbuf_sock_send(zbuf_sock_t *s, zbuf_t *z, int flags);

/** @brief zbuf_sock_sendto_fd() through a handle (zero copy as for
 *         zbuf_sock_send()). */
ZBUF_SOCK_EXPORT ssize_t zbuf_sock_sendto(zbuf_sock_t *s, zbuf_t *z, int flags,
                                          const struct sockaddr *to, socklen_t tolen);

/** @brief zbuf_sock_sendmmsg_fd() through a handle: each datagram of at
 *         least zerocopy_min bytes is one zero-copy send. */
ZBUF_SOCK_EXPORT int zbuf_sock_sendmmsg(zbuf_sock_t *s, zbuf_sock_msg_t *msgs, unsigned n,
                                        int flags);

/**
 * @brief Process the completion notifications waiting on the socket's error
 *        queue, without blocking.
 *
 * Releases the bytes of every zero-copy send the kernel has finished with
 * (their release callbacks and RELEASED events run now, on this thread),
 * in whatever order the kernel reports them, and applies the COPIED
 * fallback.  Call it when the socket polls `POLLERR`.
 *
 * @return the number of sends released; `-EINVAL`.
 */
ZBUF_SOCK_EXPORT int zbuf_sock_complete(zbuf_sock_t *s);

/**
 * @brief Wait until no zero-copy send is outstanding, processing completions.
 *
 * @param timeout_ms  most milliseconds to wait; negative waits for ever.
 * @return 0 when none is outstanding; `-ETIMEDOUT`; `-EINVAL`.
 */
ZBUF_SOCK_EXPORT int zbuf_sock_flush(zbuf_sock_t *s, int timeout_ms);

/**
 * @brief Counters of @p s (a snapshot).
 * @param[out] st  filled in.
 */
ZBUF_SOCK_EXPORT void zbuf_sock_get_stats(zbuf_sock_t *s, zbuf_sock_stats_t *st);

/**
 * @brief Close a handle, deferring until the kernel has released every
 *        zero-copy send, with a bounded wait.
 *
 * Policy:
 * 1. Waits up to @p timeout_ms for the outstanding completions
 *    (zbuf_sock_flush()).  If they all arrive: returns 0.
 * 2. Otherwise aborts the connection (`connect(AF_UNSPEC)`: a TCP socket
 *    drops its unsent and unacknowledged data and sends a reset), which makes
 *    the kernel let go of the pages, and waits up to one more
 *    @p timeout_ms (at least 100 ms) for the completions that follow.  If
 *    they all arrive: returns `-ECONNABORTED` (every release callback ran,
 *    but the peer may not have received everything).
 * 3. Sends still outstanding after that are *abandoned*: their bytes are
 *    never released (their release callbacks never run), because the
 *    kernel may still read them.  Returns `-ETIMEDOUT`.
 * Then closes the descriptor (unless #ZBUF_SOCK_KEEP_FD) and frees the
 * handle, in every case.
 *
 * @param s  the handle (consumed); NULL is a no-op returning 0.
 * @param timeout_ms  milliseconds for step 1; negative waits for ever.
 * @return 0; `-ECONNABORTED`; `-ETIMEDOUT`.
 */
ZBUF_SOCK_EXPORT int zbuf_sock_close(zbuf_sock_t *s, int timeout_ms);

/**
 * @brief Tell a handle that the program has closed (or is about to close)
 *        the descriptor it was opened on.
 *
 * From then on the handle never touches that descriptor number again (the
 * kernel may already have given it to another socket): completions of the
 * sends still outstanding are read through the duplicate a
 * #ZBUF_SOCK_HOLD_FD handle holds, and new sends are refused with `-EBADF`.
 * The handle must still be closed with zbuf_sock_close(), which releases the
 * rest (see there) and never closes the forgotten number.  This is what a
 * layer that tracks descriptors it does not own does when it sees one reused
 * (the VxWorks layer, zbuf/vxworks_sock.h).
 *
 * @param s  borrowed.
 * @return 0; `-EINVAL` for NULL.
 */
ZBUF_SOCK_EXPORT int zbuf_sock_forget_fd(zbuf_sock_t *s);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* ZBUF_SOCK_H */
