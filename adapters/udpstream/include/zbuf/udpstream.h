/* SPDX-License-Identifier: MIT */
/**
 * @file zbuf/udpstream.h
 * @brief Reliable byte streams over UDP, zero copy both ways.
 *
 * Library `zbuf-udpstream` (CMake target `zbuf::udpstream`, pkg-config
 * `zbuf-udpstream`).  A stream is one reliable, ordered, flow- and
 * congestion-controlled byte stream between two UDP endpoints, in the
 * manner of KCP or ENet's reliable channel, whose bytes move by reference:
 *
 * - **Send.**  zbuf_udpstream_write() consumes the caller's zbuf.  Its bytes
 *   are cut into segments of at most zbuf_udpstream_opts_t::mtu minus the
 *   IPv4, UDP and stream headers; each datagram is a small header in front
 *   of its range's own segments, sent by gather (on a socket, one
 *   `sendmmsg()` of up to 64 messages, each run of equal-size datagrams one
 *   UDP GSO message where the kernel takes it).  The stream keeps its
 *   reference to every byte until the peer has acknowledged it, so the
 *   caller's release callbacks run after the acknowledgement, never before
 *   (and once, also when the stream fails or is deleted).
 * - **Receive.**  Datagrams land in pool buffers.  A segment's payload is a
 *   reference into its datagram's buffer, held so also while it waits out
 *   of order; zbuf_udpstream_read() splits the bytes asked for off the
 *   in-order queue, without copying.
 * - **Copying mode.**  The same API with #ZBUF_UDPSTREAM_COPY copies as the
 *   classic design does: a write copies the caller's bytes into the send
 *   ring and releases them at once; a received payload is copied into the
 *   receive ring and its datagram's buffer goes back to the pool at once;
 *   a read copies from the ring into the caller's buffer.  The default,
 *   #ZBUF_UDPSTREAM_AUTO, copies writes and payloads shorter than
 *   zbuf_udpstream_opts_t::copy_below bytes (where copying was measured
 *   cheaper, see docs/benchmarks.md) and moves the rest by reference.
 *   zbuf_udpstream_stats_t::bytes_copied counts every payload byte the
 *   stream copied.
 *
 * ### Protocol
 *
 * Every datagram carries a 28-byte header: the receiver's connection
 * identifier, a segment number, the cumulative acknowledgement, the
 * receive window (in segments) and a timestamp with its echo; pure
 * acknowledgements add up to 8 selective-acknowledgement ranges.  A
 * three-way handshake exchanges random 32-bit connection identifiers; a
 * datagram from another address, or with another identifier (a stale or
 * forged one), is counted and dropped.  Losses are found by SACK (a
 * segment is lost once a segment sent a quarter round trip after it has
 * been acknowledged, RACK-style, or three later ones have) and by the
 * retransmission timeout (RFC 6298 estimator on timestamp samples,
 * exponential backoff).  Congestion control is NewReno-style (RFC 5681
 * slow start and congestion avoidance, one reduction per window of data
 * as in RFC 6582, SACK-based recovery as in RFC 6675), on by default; turn
 * it off for dedicated links (zbuf_udpstream_opts_t::no_congestion_control).
 * The sender never exceeds the window the receiver advertises (a window
 * that shrinks is respected and counted); a closed window is probed.
 * Keepalives probe an idle peer; a peer silent for
 * zbuf_udpstream_opts_t::timeout_ms while awaited fails the stream with
 * `-ETIMEDOUT`.  zbuf_udpstream_shutdown() sends a FIN after the queued
 * bytes; the stream is closed when both directions have ended and a short
 * TIME_WAIT has passed.  The wire format is described in
 * docs/udpstream.md.
 *
 * ### Driving a stream
 *
 * A stream has no thread and no timer of its own.  The caller's loop:
 * - waits for its descriptor (zbuf_udpstream_fd(), events from
 *   zbuf_udpstream_poll_events()) or, on the bundled stack, runs
 *   zbuf_ip_poll(), with a timeout of zbuf_udpstream_timeout();
 * - then calls zbuf_udpstream_process(): it receives what is waiting, runs
 *   the timers and sends what is due (acknowledgements, retransmissions,
 *   new data within the windows);
 * - reads and writes whenever it likes; zbuf_udpstream_write() sends what
 *   the windows allow before returning, zbuf_udpstream_read() sends a
 *   window update when reading opened a closed window.
 * <zbuf/udpstream_uv.h> does all of this on a libuv loop.
 *
 * ### Threads
 *
 * A stream is used by one thread at a time.  Its callbacks (the notify
 * callback, a custom transport's functions) run on that thread, inside the
 * stream call that caused them.  Release callbacks of written bytes run on
 * the thread that drops the last reference (normally the stream's, inside
 * the call that processed the acknowledgement).
 *
 * ### Errors
 *
 * Negative errno values, as everywhere in libzbuf; a call that fails
 * changes nothing (a zbuf it would have consumed is still the caller's).
 *
 * @code
 * zbuf_udpstream_t *s;
 * struct sockaddr_in peer = {.sin_family = AF_INET, .sin_port = htons(9000),
 *                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
 * int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
 * zbuf_udpstream_connect_fd(fd, (struct sockaddr *)&peer, sizeof peer, NULL, &s);
 * zbuf_udpstream_write(s, z);              // z consumed; released once acknowledged
 * zbuf_udpstream_shutdown(s);
 * while (!(zbuf_udpstream_events(s) & (ZBUF_UDPSTREAM_CLOSED | ZBUF_UDPSTREAM_ERROR))) {
 *     struct pollfd p = {fd, (short)zbuf_udpstream_poll_events(s), 0};
 *     poll(&p, 1, zbuf_udpstream_timeout(s));
 *     zbuf_udpstream_process(s);
 * }
 * zbuf_udpstream_delete(s);
 * close(fd);
 * @endcode
 */
#ifndef ZBUF_UDPSTREAM_H
#define ZBUF_UDPSTREAM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <zbuf/zbuf.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @cond INTERNAL */
#if defined(ZBUF_UDPSTREAM_STATIC)
#define ZBUF_UDPSTREAM_EXPORT
#elif defined(ZBUF_UDPSTREAM_BUILDING)
#define ZBUF_UDPSTREAM_EXPORT __attribute__((visibility("default")))
#else
#define ZBUF_UDPSTREAM_EXPORT
#endif
/** @endcond */

/** An opaque stream. */
typedef struct zbuf_udpstream zbuf_udpstream_t;

/** Bytes of the stream header in front of every datagram's payload. */
#define ZBUF_UDPSTREAM_HEADER 28
/** Most selective-acknowledgement ranges one acknowledgement carries. */
#define ZBUF_UDPSTREAM_SACK_MAX 8
/**
 * Default of zbuf_udpstream_opts_t::copy_below: in #ZBUF_UDPSTREAM_AUTO,
 * writes and received payloads shorter than this are copied.  The
 * crossover measured by scripts/bench-udpstream.sh (docs/benchmarks.md).
 */
#define ZBUF_UDPSTREAM_COPY_BELOW 1024

/** How a stream moves payload bytes (zbuf_udpstream_opts_t::mode). */
typedef enum zbuf_udpstream_mode {
    /** By reference from #ZBUF_UDPSTREAM_COPY_BELOW bytes up, copied below. */
    ZBUF_UDPSTREAM_AUTO = 0,
    /** Always by reference: 0 payload bytes copied by the stream. */
    ZBUF_UDPSTREAM_ZEROCOPY = 1,
    /** Always copied: caller to send ring, datagram to receive ring, ring to
     *  caller (the classic design, for comparison and for tiny messages). */
    ZBUF_UDPSTREAM_COPY = 2,
} zbuf_udpstream_mode_t;

/** @name Events (zbuf_udpstream_events()) */
/** @{ */
#define ZBUF_UDPSTREAM_READABLE 0x01u  /**< zbuf_udpstream_read() has bytes, EOF or the error */
#define ZBUF_UDPSTREAM_WRITABLE 0x02u  /**< zbuf_udpstream_write() takes a zbuf */
#define ZBUF_UDPSTREAM_CONNECTED 0x04u /**< the handshake completed */
#define ZBUF_UDPSTREAM_EOF 0x08u       /**< the peer ended its direction (all its bytes are in) */
#define ZBUF_UDPSTREAM_ERROR 0x10u     /**< the stream failed: zbuf_udpstream_error() */
#define ZBUF_UDPSTREAM_CLOSED 0x20u    /**< both directions ended cleanly, TIME_WAIT over */
#define ZBUF_UDPSTREAM_FLUSHED 0x40u   /**< every byte written (and the FIN) is acknowledged */
/** @} */

/**
 * @brief Notification that the stream's events may have changed.
 *
 * Runs on the stream's thread inside the call that changed them
 * (zbuf_udpstream_process(), zbuf_udpstream_input() ...).  It may read,
 * write, shut down or abort the stream; it must not delete it.
 * @param events  zbuf_udpstream_events() now.
 */
typedef void (*zbuf_udpstream_notify_cb)(zbuf_udpstream_t *s, unsigned events, void *arg);

/** Options of a stream; fill with zbuf_udpstream_opts_init() first. */
typedef struct zbuf_udpstream_opts {
    zbuf_udpstream_mode_t mode; /**< default #ZBUF_UDPSTREAM_AUTO */
    size_t copy_below;     /**< AUTO: copy writes and payloads shorter than this;
                                default #ZBUF_UDPSTREAM_COPY_BELOW */
    uint32_t mtu;          /**< IP MTU the datagrams fit (576..65535), default 1500:
                                1444 payload bytes per datagram */
    uint32_t snd_wnd;      /**< most segments in flight (rounded up to a power of
                                two, 16..32768), default 1024 */
    uint32_t rcv_wnd;      /**< most segments held for the reader, in order or not
                                (power of two, 16..32768), default 1024 */
    size_t sndbuf;         /**< write takes a zbuf while fewer bytes than this are
                                queued (unacknowledged); default 8 MiB */
    bool no_congestion_control; /**< only the peer's window limits sending */
    uint32_t rto_min_ms;   /**< lower bound of the retransmission timeout; default 20 */
    uint32_t rto_max_ms;   /**< upper bound; default 2000 */
    uint32_t rto_initial_ms; /**< before any round-trip sample; default 200 */
    uint32_t keepalive_ms; /**< send a probe after this long without hearing the
                                peer; 0: never; default 5000 */
    uint32_t timeout_ms;   /**< fail with `-ETIMEDOUT` when the peer is silent this
                                long while awaited (data, handshake, FIN or probe
                                unanswered); default 15000 */
    uint32_t time_wait_ms; /**< TIME_WAIT after a clean close (answering a
                                retransmitted FIN); default 300 */
    /** Clock in microseconds, never going backwards; NULL: CLOCK_MONOTONIC. */
    uint64_t (*clock)(void *arg);
    void *clock_arg;       /**< passed to @c clock */
    zbuf_udpstream_notify_cb notify; /**< event notifications, or NULL */
    void *notify_arg;      /**< passed to @c notify */
    uint32_t pool_bufs;    /**< receive pool of the socket transport, in
                                datagrams of the largest size; 0: rcv_wnd +
                                128.  With UDP GRO (see @c no_gro) the pool
                                holds as many bytes in 64 KiB buffers, plus
                                9 buffers of room for the receive calls */
    bool cork;             /**< writes do not send: the next
                                zbuf_udpstream_process() does (and
                                zbuf_udpstream_timeout() says 0 meanwhile), so
                                that runs of small writes share datagrams.
                                Default false: each write sends at once, like
                                `TCP_NODELAY` */
    bool no_gro;           /**< socket transport: do not receive with UDP GRO.
                                By default the stream sets `UDP_GRO` on its
                                socket (Linux 5.0; where the kernel refuses,
                                it does without) and receives runs of
                                datagrams (a peer's UDP GSO sends, or the
                                kernel's coalescing) into 64 KiB pool buffers
                                filled densely, one system call and one copy
                                per run; each datagram is then cut off by
                                reference.  The option is given back to the
                                socket as it was by zbuf_udpstream_delete() */
} zbuf_udpstream_opts_t;

/** Counters of a stream (zbuf_udpstream_get_stats()). */
typedef struct zbuf_udpstream_stats {
    uint64_t bytes_written;  /**< payload bytes the application wrote */
    uint64_t bytes_acked;    /**< of which the peer acknowledged */
    uint64_t bytes_read;     /**< payload bytes the application read */
    uint64_t bytes_copied;   /**< payload bytes the stream copied (modes COPY and
                                  AUTO, zbuf_udpstream_write_copy(),
                                  zbuf_udpstream_read_copy()); also counted in
                                  zbuf_stats_t::bytes_copied */
    uint64_t dgrams_tx;      /**< datagrams sent, all kinds */
    uint64_t dgrams_rx;      /**< datagrams received and accepted */
    uint64_t data_tx;        /**< data segments sent, retransmissions included */
    uint64_t retransmits;    /**< data segments sent again */
    uint64_t fast_retransmits; /**< segments found lost by acknowledgements */
    uint64_t timeouts;       /**< retransmission timeouts */
    uint64_t acks_tx;        /**< pure acknowledgements sent */
    uint64_t dup_rx;         /**< data segments received again (dropped) */
    uint64_t ooo_rx;         /**< data segments received out of order (kept) */
    uint64_t bad_dgrams;     /**< dropped: truncated, oversized, garbage, bad fields */
    uint64_t wrong_peer;     /**< dropped: another address or connection identifier */
    uint64_t bad_acks;       /**< acknowledgements of data never sent (ignored) */
    uint64_t wnd_shrinks;    /**< times the peer's window edge moved back */
    uint64_t out_of_window;  /**< data segments beyond the receive window (dropped) */
    uint64_t no_buffer;      /**< datagrams whose data was dropped: receive pool empty */
    uint64_t keepalives;     /**< keepalive and window probes sent */
    uint32_t srtt_us;        /**< smoothed round-trip time */
    uint32_t rto_us;         /**< current retransmission timeout */
    uint32_t cwnd;           /**< congestion window, segments (UINT32_MAX when off) */
    uint32_t in_flight;      /**< segments sent and not acknowledged */
    uint32_t peer_wnd;       /**< window the peer advertised last, segments */
    uint32_t mss;            /**< payload bytes per datagram */
    uint64_t gso_sends;      /**< socket transport: UDP GSO sends (one system call
                                  and one pass through the kernel for a run of
                                  datagrams) */
    uint64_t gro_dgrams;     /**< socket transport: datagrams received in runs
                                  (UDP GRO), also counted in dgrams_rx when
                                  accepted */
} zbuf_udpstream_stats_t;

/**
 * @brief A transport for zbuf_udpstream_create(): how datagrams leave.
 *
 * The socket and stack transports are built in (zbuf_udpstream_connect_fd(),
 * zbuf_udpstream_open_ip()); this one is for anything else (a test shim, a
 * demultiplexer serving many streams on one socket, a DTLS layer).
 */
typedef struct zbuf_udpstream_transport {
    /**
     * Send @p n datagrams to @p to, in order.  Consumes every zbuf of
     * @p dgrams, sent or not.  Must not write into them (their payload
     * segments are the stream's retransmission queue).
     * @return how many were sent, counted from the first (0..n); a negative
     *         errno when none was (`-EAGAIN`: try again later).
     */
    int (*send)(void *ctx, zbuf_t **dgrams, unsigned n, const struct sockaddr *to,
                socklen_t tolen);
    /** Optional: receive what is waiting and hand each datagram to
     *  zbuf_udpstream_input().  Called by zbuf_udpstream_process(). */
    int (*recv)(void *ctx, zbuf_udpstream_t *s);
    /** Optional: runs once, from zbuf_udpstream_delete(). */
    void (*close)(void *ctx);
} zbuf_udpstream_transport_t;

/** @brief Fill @p o with the defaults documented in #zbuf_udpstream_opts_t. */
ZBUF_UDPSTREAM_EXPORT void zbuf_udpstream_opts_init(zbuf_udpstream_opts_t *o);

/**
 * @brief Create a stream on a caller's transport.
 * @param o     options (copied), or NULL for the defaults.
 * @param t     the transport (copied).
 * @param ctx   passed to the transport's functions.
 * @param peer  the address to connect to (copied), or NULL to wait for the
 *              first peer that connects (then only that peer is heard).
 * @param peerlen  length of @p peer.
 * @param[out] out  the stream; delete it with zbuf_udpstream_delete().
 * @return 0; `-EINVAL` (bad options or arguments); `-ENOMEM`.  When
 *         connecting, the handshake's first datagram is sent before this
 *         returns.
 */
ZBUF_UDPSTREAM_EXPORT int zbuf_udpstream_create(const zbuf_udpstream_opts_t *o,
                                                const zbuf_udpstream_transport_t *t, void *ctx,
                                                const struct sockaddr *peer, socklen_t peerlen,
                                                zbuf_udpstream_t **out);

/**
 * @brief Connect a stream over a UDP socket (Linux, through zbuf-sock).
 * @param fd  a UDP socket, non-blocking (`SOCK_NONBLOCK`), bound or not;
 *            borrowed: the caller closes it after zbuf_udpstream_delete().
 *            The stream owns its receive queue meanwhile.
 * @param peer, peerlen  the server's address.
 * @return as zbuf_udpstream_create(); also `-ENOTSOCK`, `-EPROTOTYPE` (not a
 *         datagram socket), the errno of the first send.
 */
ZBUF_UDPSTREAM_EXPORT int zbuf_udpstream_connect_fd(int fd, const struct sockaddr *peer,
                                                    socklen_t peerlen,
                                                    const zbuf_udpstream_opts_t *o,
                                                    zbuf_udpstream_t **out);

/**
 * @brief Wait on a bound UDP socket for one peer to connect.
 * The first valid handshake fixes the peer; datagrams from anyone else are
 * counted (zbuf_udpstream_stats_t::wrong_peer) and dropped.
 * @return as zbuf_udpstream_connect_fd().
 */
ZBUF_UDPSTREAM_EXPORT int zbuf_udpstream_listen_fd(int fd, const zbuf_udpstream_opts_t *o,
                                                   zbuf_udpstream_t **out);

/** @cond INTERNAL */
struct zbuf_ip_stack;
/** @endcond */

/**
 * @brief A stream over the bundled stack's UDP (<zbuf/ip.h>).
 *
 * Makes a UDP PCB bound to @p laddr:@p lport (the stream owns it), and
 * connects to @p raddr:@p rport, or waits for a peer when @p raddr is 0.
 * Received datagrams arrive through the stack (zbuf_ip_poll()); call
 * zbuf_udpstream_process() after each zbuf_ip_poll() and at
 * zbuf_udpstream_timeout().  Addresses and ports in host byte order.
 * @param stack  borrowed; must outlive the stream.
 * @return as zbuf_udpstream_create(); the errors of zbuf_ip_udp_new() and
 *         zbuf_ip_udp_bind(); `-EOPNOTSUPP` when libzbuf was built without
 *         the stack.
 */
ZBUF_UDPSTREAM_EXPORT int zbuf_udpstream_open_ip(struct zbuf_ip_stack *stack, uint32_t laddr,
                                                 uint16_t lport, uint32_t raddr, uint16_t rport,
                                                 const zbuf_udpstream_opts_t *o,
                                                 zbuf_udpstream_t **out);

/**
 * @brief Delete a stream at once: nothing more is sent, every queued byte
 *        is dropped (the release callbacks of unacknowledged written bytes
 *        run now, on this thread), a built-in transport's PCB or pool goes.
 *        For a clean end, zbuf_udpstream_shutdown() first and wait for
 *        #ZBUF_UDPSTREAM_CLOSED.  NULL is a no-op.
 */
ZBUF_UDPSTREAM_EXPORT void zbuf_udpstream_delete(zbuf_udpstream_t *s);

/**
 * @brief Hand a received datagram to the stream (custom transports).
 * @param dgram  consumed in every case.
 * @param from, fromlen  the sender's address (borrowed).
 * @return 0 when accepted; a negative errno saying why it was dropped
 *         (`-EBADMSG` malformed, `-ESRCH` wrong peer or identifier ...),
 *         counted in the stats.  Nothing is sent from here (except the
 *         answer to a FIN resent to a closed stream): call
 *         zbuf_udpstream_process() after a batch.
 */
ZBUF_UDPSTREAM_EXPORT int zbuf_udpstream_input(zbuf_udpstream_t *s, zbuf_t *dgram,
                                               const struct sockaddr *from, socklen_t fromlen);

/**
 * @brief Receive (built-in socket transport), run the timers, send what is
 *        due.
 * @return 0; the stream's error once it failed; `-EINVAL`.
 */
ZBUF_UDPSTREAM_EXPORT int zbuf_udpstream_process(zbuf_udpstream_t *s);

/**
 * @brief Milliseconds until zbuf_udpstream_process() has timer work
 *        (rounded up), for poll(): 0 when it is due now, -1 when no timer
 *        runs.
 */
ZBUF_UDPSTREAM_EXPORT int zbuf_udpstream_timeout(const zbuf_udpstream_t *s);

/** @brief The next timer, in the stream clock's microseconds, or UINT64_MAX. */
ZBUF_UDPSTREAM_EXPORT uint64_t zbuf_udpstream_next_deadline(const zbuf_udpstream_t *s);

/** @brief The socket transport's descriptor, -1 for other transports. */
ZBUF_UDPSTREAM_EXPORT int zbuf_udpstream_fd(const zbuf_udpstream_t *s);

/** @brief `POLLIN`, plus `POLLOUT` while the socket refused datagrams
 *         (`EAGAIN`), for the socket transport's descriptor. */
ZBUF_UDPSTREAM_EXPORT unsigned zbuf_udpstream_poll_events(const zbuf_udpstream_t *s);

/**
 * @brief Queue every byte of @p z for sending and send what the windows
 *        allow.
 *
 * Any length is taken, as long as fewer than zbuf_udpstream_opts_t::sndbuf
 * bytes are queued when the call starts (#ZBUF_UDPSTREAM_WRITABLE).  With
 * zbuf_udpstream_opts_t::cork, nothing is sent before the next
 * zbuf_udpstream_process().  By
 * reference (modes ZEROCOPY, and AUTO from @c copy_below bytes): the
 * stream takes @p z's segments and drops its references once the peer has
 * acknowledged the bytes, so release callbacks of the caller's buffers run
 * then (or when the stream fails or is deleted), on the stream's thread;
 * until then the caller must not change those bytes.  Copying (COPY, short
 * writes in AUTO): the bytes are copied into the send ring and @p z's
 * buffers are released before this returns.
 * @param z  consumed on success (also when empty); the caller's on failure.
 * @return 0; `-EAGAIN` (send queue full); `-EPIPE` (after
 *         zbuf_udpstream_shutdown()); the stream's error once it failed;
 *         `-EINVAL`; `-ENOMEM`.
 */
ZBUF_UDPSTREAM_EXPORT int zbuf_udpstream_write(zbuf_udpstream_t *s, zbuf_t *z);

/**
 * @brief Write a copy of @p len bytes of @p data (borrowed for the call).
 * @return bytes taken (all of them) or the errors of zbuf_udpstream_write().
 */
ZBUF_UDPSTREAM_EXPORT ssize_t zbuf_udpstream_write_copy(zbuf_udpstream_t *s, const void *data,
                                                        size_t len);

/**
 * @brief Take received bytes off the stream, as a new zbuf.
 *
 * Gives at most @p max bytes: all that is in order when fewer, but never
 * fewer than @p min (then `-EAGAIN`, unless the peer ended the stream: the
 * rest is given, then 0).  Read exactly N bytes with @p min = @p max = N;
 * whatever is there with @p min = 1.  By reference (0 bytes copied) except
 * in #ZBUF_UDPSTREAM_COPY mode, where the bytes are copied into one new
 * buffer.  The zbuf's segments refer to the receive pool's buffers: delete
 * it soon, or the window (and the pool) stays smaller.
 * @param[out] out  a new zbuf the caller deletes (only when > 0 returned).
 * @return bytes given; 0 at end of stream; `-EAGAIN`; the stream's error once
 *         the bytes that arrived before it are read; `-EINVAL`; `-ENOMEM`.
 */
ZBUF_UDPSTREAM_EXPORT ssize_t zbuf_udpstream_read(zbuf_udpstream_t *s, size_t min, size_t max,
                                                  zbuf_t **out);

/**
 * @brief Copy up to @p len received bytes into @p buf (whatever is there).
 * @return bytes copied; 0 at end of stream; the errors of
 *         zbuf_udpstream_read().
 */
ZBUF_UDPSTREAM_EXPORT ssize_t zbuf_udpstream_read_copy(zbuf_udpstream_t *s, void *buf,
                                                       size_t len);

/** @brief Bytes ready to read now (in order). */
ZBUF_UDPSTREAM_EXPORT size_t zbuf_udpstream_readable(const zbuf_udpstream_t *s);

/**
 * @brief End the sending direction: a FIN follows the queued bytes.
 *        Reading goes on until the peer ends its own.
 * @return 0 (also when already shut down); the stream's error; `-EINVAL`.
 */
ZBUF_UDPSTREAM_EXPORT int zbuf_udpstream_shutdown(zbuf_udpstream_t *s);

/**
 * @brief Fail the stream now with `-ECONNABORTED` and tell the peer (a
 *        reset, which fails it there with `-ECONNRESET`).  Queued bytes are
 *        dropped and their release callbacks run.
 */
ZBUF_UDPSTREAM_EXPORT void zbuf_udpstream_abort(zbuf_udpstream_t *s);

/** @brief The ZBUF_UDPSTREAM_* event bits that hold now. */
ZBUF_UDPSTREAM_EXPORT unsigned zbuf_udpstream_events(const zbuf_udpstream_t *s);

/** @brief Why the stream failed (`-ETIMEDOUT`, `-ECONNRESET`,
 *         `-ECONNABORTED`, a transport's errno), or 0. */
ZBUF_UDPSTREAM_EXPORT int zbuf_udpstream_error(const zbuf_udpstream_t *s);

/** @brief Copy the stream's counters into @p st. */
ZBUF_UDPSTREAM_EXPORT void zbuf_udpstream_get_stats(const zbuf_udpstream_t *s,
                                                    zbuf_udpstream_stats_t *st);

/**
 * @brief Parse a datagram's header without a stream (for demultiplexers
 *        and the fuzzing harness).
 * @param dgram  borrowed.
 * @param[out] cid  the destination connection identifier (0 in a
 *                  connection request).
 * @return 0 when the header and its lengths are well formed; `-EBADMSG`.
 */
ZBUF_UDPSTREAM_EXPORT int zbuf_udpstream_peek(const zbuf_t *dgram, uint32_t *cid);

#ifdef __cplusplus
}
#endif

#endif /* ZBUF_UDPSTREAM_H */
