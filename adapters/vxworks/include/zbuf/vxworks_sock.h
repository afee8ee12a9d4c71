/* SPDX-License-Identifier: MIT */
/**
 * @file zbuf/vxworks_sock.h
 * @brief VxWorks 5.x compatibility, second half: the `zbufSockLib` routines.
 *
 * Declared here and implemented, with the `zbufLib` half, in the VxWorks
 * component (`zbuf-vxworks`: pkg-config `zbuf-vxworks`, CMake
 * `zbuf::vxworks`) on top of the socket adapter (`zbuf-sock`), so that
 * neither the core nor the adapter depends on the other's compatibility
 * names.  `<zbuf/vxworks.h>` includes this header, so VxWorks code needs only
 * `#include <zbuf/vxworks.h>` and the standard socket headers, and links
 * with `-lzbuf-vxworks -lzbuf-sock -lzbuf`.
 *
 * **Ownership** (the contract of VxWorks `zbufSockLib`): a zbuf given to
 * zbufSockSend() or zbufSockSendto() belongs to the library from then on,
 * whatever the result, except where the call failed before anything was
 * handed to the kernel, in which case the caller keeps it, unchanged, and may
 * send it again: the zbuf handle or an argument is invalid (`EINVAL`), the
 * socket is non-blocking and nothing could be sent (`EWOULDBLOCK`), or the
 * layer could not start (`ENOMEM`).  For zbufSockBufSend() /
 * zbufSockBufSendto() the same cases leave the buffer with the caller and its
 * free routine is not called for that attempt; in every other case the free
 * routine runs exactly once, when the network no longer needs the buffer.
 *
 * **A zbuf is sent whole.**  The BSD stack under VxWorks appended a zbuf's
 * mbuf chain to the socket in one piece.  Linux may accept part of it on a
 * non-blocking socket; the layer then waits (poll, at most 30 seconds without
 * progress, then `ETIMEDOUT`) until the rest is accepted, so that a return
 * value is always all-or-`ERROR` and message boundaries survive.
 *
 * **Zero copy and free routines.**  Sends of at least 16 KiB go through a
 * socket handle with `MSG_ZEROCOPY` (see zbuf/sock.h), whose completions are
 * driven by the library's background thread: free routines run without the
 * application calling anything, as they did from the VxWorks network task,
 * so code that waits in its own buffer pool for a free routine does not
 * deadlock.  Where the kernel copies anyway (loopback) the layer turns zero
 * copy off for that socket after the first notification, and free routines
 * then run before the send returns.  Free routines therefore run either on
 * the sending thread or on the thread named `zbuf-sock-zc`; they must not
 * block.  The layer keeps its own duplicate of a descriptor while zero-copy
 * sends on it are outstanding, so a program may `close()` a socket right
 * after sending: the connection closes for real once the kernel has
 * released the buffers (or is aborted after 10 s without progress).
 * zbuf_sock_vx_configure() changes these choices.  The routines can also
 * run on zbuf-uring's io_uring engine, selected by calling
 * zbuf_uring_vx_init() once at start (zbuf_sock_vx_set_engine()).
 *
 * **Receive.**  zbufSockRecv() and zbufSockRecvfrom() receive into buffers
 * of a library pool (library heap buffers when the pool is empty): the
 * kernel's copy is the only one, and deleting the zbuf gives the memory back.
 *
 * **Errors** are reported through `errno` with #ERROR or NULL returns.
 */
#ifndef ZBUF_VXWORKS_SOCK_H
#define ZBUF_VXWORKS_SOCK_H

#include <stdbool.h>
#include <sys/socket.h>
#include <zbuf/sock.h>
#include <zbuf/vxworks.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief Prepare the zbuf socket facility.
 *
 * Harmless to call more than once, and optional: every routine below
 * initialises the layer on first use.
 *
 * @return #OK; #ERROR with `errno` = `ENOMEM`.
 */
ZBUF_VX_EXPORT STATUS zbufSockLibInit(void);

/**
 * @brief Send the whole of a zbuf on a stream (TCP) socket.
 *
 * @param s        the socket.
 * @param zbufId   the zbuf; consumed as described in the file comment.
 * @param zbufLen  the zbuf's length; only a hint (the real length is used).
 * @param flags    `send()` flags (`MSG_OOB`, `MSG_DONTROUTE` ...).
 * @return the number of bytes sent (the whole zbuf); #ERROR with `errno`:
 *         `EINVAL` (invalid zbuf; caller keeps it), `EWOULDBLOCK`
 *         (non-blocking socket, nothing sent; caller keeps it), `ENOMEM`
 *         (the layer could not start; caller keeps it), `EOVERFLOW` (more
 *         than `INT_MAX` bytes; caller keeps it), `ETIMEDOUT` (part sent,
 *         the rest not accepted within 30 s; the zbuf is deleted), or the
 *         socket's error (`EPIPE`, `ECONNRESET` ...; the zbuf is deleted).
 */
ZBUF_VX_EXPORT int zbufSockSend(int s, ZBUF_ID zbufId, int zbufLen, int flags);

/**
 * @brief Send a zbuf as one datagram (UDP).
 *
 * @param to, tolen  destination; NULL/0 for a connected socket.
 * @return the number of bytes sent; #ERROR with `errno` as for
 *         zbufSockSend() (`EMSGSIZE` for a datagram too large).
 */
ZBUF_VX_EXPORT int zbufSockSendto(int s, ZBUF_ID zbufId, int zbufLen, int flags,
                                    struct sockaddr *to, int tolen);

/**
 * @brief Send a caller's buffer on a stream socket without copying it.
 *
 * Wraps @p buf in a zbuf and sends it with zbufSockSend().
 * `freeRtn(buf, freeArg)` runs exactly once when the network no longer needs
 * the buffer (also after a failed send), except when #ERROR is returned with
 * `EINVAL` or `EWOULDBLOCK`: then the caller still owns @p buf and the
 * routine is not called.  @p freeArg may be an `int` (VxWorks 5) or a
 * pointer-sized value (VxWorks 6), as for zbufInsertBuf().
 *
 * @param buf      the bytes; loaned until @p freeRtn runs.
 * @param bufLen   bytes, 1 or more.
 * @param freeRtn  `void freeRtn(caddr_t buf, int-or-long freeArg)`, or NULL.
 * @return bytes sent; #ERROR with `errno` as for zbufSockSend(), or `ENOMEM`
 *         (nothing sent, caller keeps @p buf).
 */
ZBUF_VX_EXPORT int zbufSockBufSend(int s, char *buf, int bufLen, VOIDFUNCPTR freeRtn,
                                     intptr_t freeArg, int flags);

/** @brief zbufSockBufSend() for one datagram, to @p to (NULL: connected). */
ZBUF_VX_EXPORT int zbufSockBufSendto(int s, char *buf, int bufLen, VOIDFUNCPTR freeRtn,
                                       intptr_t freeArg, int flags, struct sockaddr *to,
                                       int tolen);

/**
 * @brief Receive up to `*pLen` bytes from a stream socket into a new zbuf.
 *
 * @param pLen  in: most bytes wanted (1 or more); out: bytes received.
 * @return a new zbuf the caller deletes (which hands the memory back); NULL
 *         at end of stream (`*pLen` = 0, `errno` = 0) or on error (`errno`:
 *         `EWOULDBLOCK`, `EINVAL`, `ENOMEM`, the socket's error).
 */
ZBUF_VX_EXPORT ZBUF_ID zbufSockRecv(int s, int flags, int *pLen);

/**
 * @brief Receive one datagram of up to `*pLen` bytes into a new zbuf.
 *
 * @param pLen      in: largest datagram accepted; out: bytes received (a
 *                  longer datagram is truncated, as with `recvfrom()`).
 * @param from      receives the sender's address, or NULL.
 * @param pFromLen  in: room at @p from; out: the address length.
 * @return a new zbuf the caller deletes; NULL on error (`errno`).
 */
ZBUF_VX_EXPORT ZBUF_ID zbufSockRecvfrom(int s, int flags, int *pLen, struct sockaddr *from,
                                          int *pFromLen);

/**
 * @brief libzbuf extension: options for the sockets the layer sends on.
 *
 * By default: `ZBUF_SOCK_ZEROCOPY | ZBUF_SOCK_THREAD | ZBUF_SOCK_HOLD_FD`,
 * zero copy from 16 KiB, the COPIED fallback on.  Takes effect for sockets
 * first used after the call.  `ZBUF_SOCK_HOLD_FD` is always added (the layer
 * never owns the application's descriptors); without `ZBUF_SOCK_ZEROCOPY`
 * every send copies and free routines run before the send returns.
 *
 * @param o  the options (copied); NULL restores the defaults.
 * @return 0; `-EINVAL` (the modern convention: this is a libzbuf name).
 */
ZBUF_VX_EXPORT int zbuf_sock_vx_configure(const zbuf_sock_opts_t *o);

/**
 * @brief libzbuf extension: another engine the routines above run on.
 *
 * zbuf_uring_vx_init() of zbuf-uring installs one, so that the routines
 * send and receive through io_uring; applications do not fill this in
 * themselves.  Each function may answer `-ENOSYS` ("not this one"): the
 * routine then does the work on its own socket path, as without an engine.
 */
typedef struct zbuf_sock_vx_engine {
    /**
     * Send all of @p z on the stream socket @p fd, or @p z as one datagram
     * (to @p to, or the connected peer when NULL).  @p z is borrowed and
     * keeps what was not sent.  Returns the bytes sent; `-EWOULDBLOCK` when
     * a non-blocking socket took nothing (@p z unchanged); `-ETIMEDOUT`
     * when part was sent and the rest was not taken within 30 s; another
     * negative errno; `-ENOSYS`.
     */
    ssize_t (*send)(void *ctx, int fd, zbuf_t *z, int flags, bool dgram,
                    const struct sockaddr *to, socklen_t tolen);
    /**
     * Receive up to @p max bytes (stream) or one datagram of at most
     * @p max bytes into a new zbuf stored in @p *out (which the caller
     * deletes), with the sender in @p from / @p fromlen for a datagram.
     * Returns the bytes received; 0 at the end of a stream (@p *out NULL);
     * a negative errno (`-EWOULDBLOCK` ...); `-ENOSYS`.
     */
    ssize_t (*recv)(void *ctx, int fd, size_t max, int flags, bool dgram, zbuf_t **out,
                    struct sockaddr_storage *from, socklen_t *fromlen);
    /** Passed to both. */
    void *ctx;
} zbuf_sock_vx_engine_t;

/**
 * @brief libzbuf extension: run the routines on @p e from now on (NULL:
 *        back to their own socket path).
 *
 * Waits until no routine is inside the previous engine, so that the
 * caller may then tear that engine down.  @p e is copied.
 *
 * @return 0; `-EINVAL` (a function missing).
 */
ZBUF_VX_EXPORT int zbuf_sock_vx_set_engine(const zbuf_sock_vx_engine_t *e);

#ifdef __cplusplus
}
#endif

#endif /* ZBUF_VXWORKS_SOCK_H */
