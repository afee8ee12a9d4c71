/* SPDX-License-Identifier: MIT */
/**
 * @file zbuf/uring_uv.h
 * @brief Drive a zbuf-uring engine from a libuv loop.
 *
 * Library `zbuf-uring-uv` (CMake target `zbuf::uring_uv`, pkg-config
 * `zbuf-uring-uv`), its own library so that zbuf-uring never depends on
 * libuv.  zbuf_uring_uv_attach() makes the loop watch the engine: a
 * `uv_poll_t` on zbuf_uring_fd() runs `zbuf_uring_run(u, 0)` when the
 * engine has completions (or, on the epoll path, events), a `uv_prepare_t`
 * submits the requests the loop's callbacks prepared before the loop
 * blocks (zbuf_uring_submit()), and a `uv_timer_t` follows
 * zbuf_uring_timeout() (callbacks due, close deadlines).  The engine's
 * callbacks then run inside the loop's iteration, on the loop's thread,
 * which must be the thread that created the engine.
 *
 * The loop stays alive while the engine has sockets (zbuf_uring_sock_count(),
 * looked at in every loop iteration, and assumed from the attachment to the
 * first iteration); once the last is closed, uv_run() may return.
 *
 * @code
 * zbuf_uring_t *u;
 * zbuf_uring_uv_t *h;
 * zbuf_uring_create(NULL, &u);
 * zbuf_uring_uv_attach(uv_default_loop(), u, &h);
 * // ... sockets, sends, receives: callbacks run inside uv_run()
 * uv_run(uv_default_loop(), UV_RUN_DEFAULT);   // returns when no socket is left
 * zbuf_uring_uv_close(h, NULL, NULL);
 * uv_run(uv_default_loop(), UV_RUN_DEFAULT);   // the close callback
 * zbuf_uring_destroy(u, 1000);
 * @endcode
 */
#ifndef ZBUF_URING_UV_H
#define ZBUF_URING_UV_H

#include <uv.h>
#include <zbuf/uring.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @cond INTERNAL */
#if defined(ZBUF_URING_UV_STATIC)
#define ZBUF_URING_UV_EXPORT
#elif defined(ZBUF_URING_UV_BUILDING)
#define ZBUF_URING_UV_EXPORT __attribute__((visibility("default")))
#else
#define ZBUF_URING_UV_EXPORT
#endif
/** @endcond */

/** An opaque attachment of an engine to a libuv loop. */
typedef struct zbuf_uring_uv zbuf_uring_uv_t;

/** Close callback of zbuf_uring_uv_close(): @p h is freed when it returns. */
typedef void (*zbuf_uring_uv_close_cb)(zbuf_uring_uv_t *h, void *arg);

/**
 * @brief Make @p loop drive @p u.
 *
 * @param loop  the loop (borrowed; must outlive the attachment).
 * @param u     the engine (borrowed; must outlive the attachment).  Call
 *              this on the thread that created the engine and runs the loop.
 * @param[out] out  receives the attachment; close it with
 *              zbuf_uring_uv_close() before destroying the engine.
 * @return 0; `-EINVAL`; `-ENOMEM`; a negative errno from zbuf_uring_fd() or
 *         from libuv (`UV_E*` values are negative errno values on Linux).
 */
ZBUF_URING_UV_EXPORT int zbuf_uring_uv_attach(uv_loop_t *loop, zbuf_uring_t *u,
                                              zbuf_uring_uv_t **out);

/**
 * @brief Stop driving the engine and free the attachment.
 *
 * The libuv handles are closed; @p cb runs from the loop once they are,
 * then @p h is freed.  The engine is untouched (destroy it afterwards).
 *
 * @param h   the attachment (consumed); NULL is a no-op.
 * @param cb  called once from the loop, or NULL.
 */
ZBUF_URING_UV_EXPORT void zbuf_uring_uv_close(zbuf_uring_uv_t *h, zbuf_uring_uv_close_cb cb,
                                              void *arg);

#ifdef __cplusplus
}
#endif

#endif /* ZBUF_URING_UV_H */
