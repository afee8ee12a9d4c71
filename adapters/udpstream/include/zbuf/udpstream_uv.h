/* SPDX-License-Identifier: MIT */
/**
 * @file zbuf/udpstream_uv.h
 * @brief Drive a UDP byte stream (<zbuf/udpstream.h>) from a libuv loop.
 *
 * Library `zbuf-udpstream-uv` (CMake target `zbuf::udpstream_uv`,
 * pkg-config `zbuf-udpstream-uv`).  The handle watches the stream's socket
 * (`uv_poll_t`: readable, and writable while the socket refused datagrams),
 * runs zbuf_udpstream_process() when it is ready or when the stream's next
 * timer is due (`uv_timer_t`), and re-arms the timer before the loop
 * blocks (`uv_prepare_t`), so reads and writes the application makes
 * anywhere on the loop's thread are covered without a call back here.
 *
 * Threads: everything on the loop's thread, like libuv.
 */
#ifndef ZBUF_UDPSTREAM_UV_H
#define ZBUF_UDPSTREAM_UV_H

#include <uv.h>
#include <zbuf/udpstream.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @cond INTERNAL */
#if defined(ZBUF_UDPSTREAM_UV_STATIC)
#define ZBUF_UDPSTREAM_UV_EXPORT
#elif defined(ZBUF_UDPSTREAM_UV_BUILDING)
#define ZBUF_UDPSTREAM_UV_EXPORT __attribute__((visibility("default")))
#else
#define ZBUF_UDPSTREAM_UV_EXPORT
#endif
/** @endcond */

/** An opaque libuv driver of one stream. */
typedef struct zbuf_udpstream_uv zbuf_udpstream_uv_t;

/**
 * @brief Called after the handle processed the stream, when its events
 *        changed or bytes came in.
 * @param events  zbuf_udpstream_events() now.
 * Read until zbuf_udpstream_read() says `-EAGAIN` or 0 (the end): the
 * callback runs again only when something changes after it returns.
 * It may read, write, shut down or abort the stream and call
 * zbuf_udpstream_uv_close(); it must not delete the stream (do that in the
 * close callback).
 */
typedef void (*zbuf_udpstream_uv_cb)(zbuf_udpstream_uv_t *h, zbuf_udpstream_t *s,
                                     unsigned events, void *arg);

/**
 * @brief Start driving @p s on @p loop.
 * @param s  a stream of the socket transport (zbuf_udpstream_connect_fd(),
 *           zbuf_udpstream_listen_fd()); borrowed until the close callback.
 * @param cb  event callback (required).
 * @param[out] out  the handle; close it with zbuf_udpstream_uv_close().
 * @return 0; `-EINVAL` (NULL, or a stream without a descriptor); `-ENOMEM`;
 *         a libuv error.
 */
ZBUF_UDPSTREAM_UV_EXPORT int zbuf_udpstream_uv_start(uv_loop_t *loop, zbuf_udpstream_t *s,
                                                     zbuf_udpstream_uv_cb cb, void *arg,
                                                     zbuf_udpstream_uv_t **out);

/**
 * @brief Stop driving the stream and free the handle once libuv has closed
 *        its handles; then @p done runs (it may delete the stream).
 *        The stream itself is not touched.  NULL is a no-op.
 */
ZBUF_UDPSTREAM_UV_EXPORT void zbuf_udpstream_uv_close(zbuf_udpstream_uv_t *h,
                                                      void (*done)(void *arg), void *arg);

#ifdef __cplusplus
}
#endif

#endif /* ZBUF_UDPSTREAM_UV_H */
