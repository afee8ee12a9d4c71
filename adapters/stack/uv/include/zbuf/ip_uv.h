/* SPDX-License-Identifier: MIT */
/**
 * @file zbuf/ip_uv.h
 * @brief Run a zbuf TCP/IP stack (<zbuf/ip.h>) inside a libuv loop.
 *
 * Link with `pkg-config --libs zbuf-stack-uv` or the CMake target
 * `zbuf::stack_uv`.
 *
 * The stack has no thread and no loop of its own: it needs a zbuf_ip_poll()
 * when a driver's descriptor is readable and when zbuf_ip_next_deadline()
 * has passed.  zbuf_ip_uv_attach() sets that up with three kinds of libuv
 * handles, all owned by the integration:
 *
 * - one `uv_timer_t` aimed at zbuf_ip_next_deadline();
 * - one `uv_prepare_t`, which runs right before every blocking wait of the
 *   loop and re-aims the timer.  So whatever the loop's callbacks did to
 *   the stack in this iteration (a zbuf_ip_tcp_write(), a connect, a close,
 *   frames sent to an in-memory link) is accounted for before the loop
 *   sleeps, without the application doing anything;
 * - one `uv_poll_t` per interface that has a descriptor (a TAP interface,
 *   zbuf_ip_tap_fd() >= 0): those the stack has at attach time, those
 *   opened with zbuf_ip_uv_tap_open() and those added with
 *   zbuf_ip_uv_watch().
 *
 * **Busy interfaces.**  One zbuf_ip_poll() takes at most
 * #ZBUF_IP_POLL_BUDGET frames from each driver, so a busy interface never
 * holds the loop for long.  What is left is not forgotten: libuv watches
 * descriptors level-triggered (epoll without `EPOLLET`), so a TAP descriptor
 * with frames still queued is reported readable again at the very next
 * iteration, after the loop's other handles had their turn; and frames of an
 * in-memory link that are due keep zbuf_ip_next_deadline() in the past, so
 * the timer fires at once.  Level triggering has one trap: a descriptor that
 * stays readable while the driver does not read would wake the loop again
 * and again.  The bundled TAP driver always reads (with its pool empty it
 * reads and drops, and the stack keeps the pool from running dry: see
 * zbuf_ip_driver_t), but a driver might not; so the integration notices a
 * readable event after which the stack read nothing and stops watching
 * that descriptor for #ZBUF_IP_UV_RETRY_MS; frames wait in the kernel's
 * queue meanwhile.
 *
 * **Idle.**  With nothing due the loop blocks: the timer is stopped when
 * the stack has no deadline and is re-armed only when the deadline moves.
 * zbuf_ip_uv_stats() counts the wake-ups so this can be checked.
 *
 * **Clock.**  Deadlines are turned into libuv timeouts by subtracting
 * zbuf_ip_now(), so the stack's clock must run at the speed of real time in
 * milliseconds (the default clock, `CLOCK_MONOTONIC`, does).  A virtual
 * clock that only moves when a test advances it cannot be driven by a loop.
 *
 * **In-memory link.**  A zbuf_ip_link_t has no descriptor and needs no
 * watch: frames travelling on it are due at a clock value, and the link
 * reports the earliest of them through its driver's `next_deadline`, which
 * zbuf_ip_next_deadline() includes.  Attach both stacks of a link (each
 * with zbuf_ip_uv_attach(), on the same loop or on two loops of the same
 * thread) and the frames flow.
 *
 * **Ownership and lifetime.**  The stack stays the caller's: the integration
 * borrows it from zbuf_ip_uv_attach() until the callback of
 * zbuf_ip_uv_close() runs.  Delete the stack (zbuf_ip_stack_delete()) or a
 * link (zbuf_ip_link_delete()) only after that callback, or from it.  A TAP
 * descriptor must not be closed while libuv polls it (epoll would keep
 * watching a closed or, worse, reused descriptor): remove a watched
 * interface with zbuf_ip_uv_netif_remove(), or zbuf_ip_uv_unwatch() it
 * before zbuf_ip_netif_remove().  zbuf_ip_stack_delete() closes every TAP
 * descriptor of the stack, hence the rule above.
 *
 * **Keeping the loop alive.**  By default the integration's handles are
 * referenced: like a listening server socket, an attached stack keeps
 * `uv_run(loop, UV_RUN_DEFAULT)` running (a network host must answer ARP,
 * pings and retransmissions at any time), until zbuf_ip_uv_close().
 * zbuf_ip_uv_set_ref() with false makes the integration a passenger: the
 * loop runs while the application's own handles keep it alive, and the
 * stack is served during that time only.
 *
 * **Threads.**  Like libuv: every function here is called on the thread
 * that runs the loop, and every callback (the stack's and the close
 * callback) runs on that thread, from inside uv_run().  The stack must not
 * be used from another thread while attached.
 *
 * **Errors** are negative errno values (libuv's `UV_E*` codes are the same
 * numbers on Linux).  A call that fails changes nothing and never calls its
 * callback.
 *
 * A complete example: adapters/stack/examples/stack_uv.c.
 * @code
 *   zbuf_ip_uv_t *h;
 *   zbuf_ip_uv_attach(loop, stack, &h);
 *   zbuf_ip_uv_tap_open(h, "tap0", &netif_cfg, 0, &nif);  // or zbuf_ip_uv_watch()
 *   ...                                                    // listen, connect ...
 *   uv_run(loop, UV_RUN_DEFAULT);                          // until zbuf_ip_uv_close()
 *
 *   static void on_closed(void *arg) { zbuf_ip_stack_delete(arg); }
 *   zbuf_ip_uv_close(h, on_closed, stack);                 // from any loop callback
 * @endcode
 */
#ifndef ZBUF_IP_UV_H
#define ZBUF_IP_UV_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>
#include <zbuf/ip.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @cond INTERNAL */
#if defined(ZBUF_IP_UV_BUILDING)
#define ZBUF_IP_UV_EXPORT __attribute__((visibility("default")))
#else
#define ZBUF_IP_UV_EXPORT
#endif
/** @endcond */

/**
 * How long a descriptor is left unwatched after a readable event from
 * which the stack could read nothing (its driver's pool was empty),
 * milliseconds.
 */
#define ZBUF_IP_UV_RETRY_MS 1

/** An opaque integration: one stack attached to one libuv loop. */
typedef struct zbuf_ip_uv zbuf_ip_uv_t;

/**
 * @brief Called once when zbuf_ip_uv_close() is complete: every libuv handle
 *        of the integration is closed and its memory freed.
 *
 * Runs on the loop thread from inside uv_run().  The stack may be deleted
 * here.
 */
typedef void (*zbuf_ip_uv_close_cb)(void *arg);

/** Counters of one integration, since zbuf_ip_uv_attach(). */
typedef struct zbuf_ip_uv_stats {
    uint64_t iterations;    /**< loop iterations about to wait (prepare callbacks) */
    uint64_t polls;         /**< zbuf_ip_poll() calls made */
    uint64_t empty_polls;   /**< of those, polls that found nothing to do */
    uint64_t timer_wakeups; /**< timer callbacks (a deadline came) */
    uint64_t io_wakeups;    /**< readable events of watched descriptors */
    uint64_t rearms;        /**< times the timer was started or moved */
    uint64_t pauses;        /**< descriptors left unwatched for #ZBUF_IP_UV_RETRY_MS */
    uint64_t poll_errors;   /**< watches ended by a libuv poll error */
    uint32_t watched;       /**< descriptors watched now (a gauge) */
} zbuf_ip_uv_stats_t;

/**
 * @brief Attach stack @p s to @p loop: from now on the loop polls the stack
 *        whenever it has timer work, and whenever the descriptor of one of
 *        its TAP interfaces is readable.  The TAP interfaces the stack has
 *        now are watched at once; add later ones with zbuf_ip_uv_tap_open()
 *        or zbuf_ip_uv_watch().
 *
 * @param loop  borrowed until the close callback runs.
 * @param s     borrowed until the close callback runs; stays the caller's.
 *              Its clock must follow real time (see the file comment).
 * @param[out] out  receives the integration; end it with zbuf_ip_uv_close().
 * @return 0; `-EINVAL` (a NULL argument); `-ENOMEM`; an error of
 *         `uv_timer_init()`, `uv_prepare_init()` or `uv_poll_init()`
 *         (nothing stays attached then).
 */
ZBUF_IP_UV_EXPORT int zbuf_ip_uv_attach(uv_loop_t *loop, zbuf_ip_stack_t *s, zbuf_ip_uv_t **out);

/**
 * @brief Poll the stack whenever the descriptor of interface @p nif
 *        (zbuf_ip_tap_fd()) is readable.
 *
 * Call it for each TAP interface, including those added after attaching
 * (zbuf_ip_uv_tap_open() does both steps).  The watch ends with
 * zbuf_ip_uv_unwatch(), zbuf_ip_uv_netif_remove() or zbuf_ip_uv_close().
 *
 * @param nif  an interface of the attached stack; borrowed while watched.
 * @return 0; `-EINVAL` (NULL, closing, another stack's interface, or an
 *         interface without a descriptor, such as an in-memory link's);
 *         `-EEXIST` (already watched, here or by another handle of the
 *         loop); `-ENOMEM`; an error of `uv_poll_init()`.
 */
ZBUF_IP_UV_EXPORT int zbuf_ip_uv_watch(zbuf_ip_uv_t *h, zbuf_ip_netif_t *nif);

/**
 * @brief Stop watching the descriptor of @p nif.
 *
 * The descriptor is out of the loop's epoll set when this returns, so the
 * interface may be removed (and its descriptor closed) right after.  The
 * `uv_poll_t` itself is closed asynchronously; zbuf_ip_uv_close() waits for
 * it.
 *
 * @return 0; `-EINVAL` (NULL); `-ENOENT` (not watched).
 */
ZBUF_IP_UV_EXPORT int zbuf_ip_uv_unwatch(zbuf_ip_uv_t *h, zbuf_ip_netif_t *nif);

/**
 * @brief Open a TAP interface on the attached stack (zbuf_ip_tap_open())
 *        and watch it.
 *
 * @param name, cfg, pool_bufs  as for zbuf_ip_tap_open().
 * @param[out] out  the interface, owned by the stack; remove it with
 *                  zbuf_ip_uv_netif_remove() (or let zbuf_ip_stack_delete()
 *                  remove it after the close callback).
 * @return 0; the errors of zbuf_ip_tap_open() and zbuf_ip_uv_watch(); on
 *         error no interface is left behind.
 */
ZBUF_IP_UV_EXPORT int zbuf_ip_uv_tap_open(zbuf_ip_uv_t *h, const char *name,
                                          const zbuf_ip_netif_config_t *cfg, unsigned pool_bufs,
                                          zbuf_ip_netif_t **out);

/**
 * @brief Remove interface @p nif of the attached stack safely: unwatch its
 *        descriptor (if watched), then zbuf_ip_netif_remove().
 *
 * May be called from any callback, including the stack's own callbacks that
 * run inside a poll of that very interface: the descriptor is unwatched and
 * the interface stops at once, and the stack detaches its driver once that
 * poll has returned (see zbuf_ip_netif_remove()).  Works for interfaces
 * without a descriptor too.
 *
 * @return 0; `-EINVAL` (NULL, or not an interface of the attached stack).
 */
ZBUF_IP_UV_EXPORT int zbuf_ip_uv_netif_remove(zbuf_ip_uv_t *h, zbuf_ip_netif_t *nif);

/**
 * @brief Whether the integration keeps the loop alive (true, the default)
 *        or not (false: like `uv_unref()` on all its handles, present and
 *        future).  With false, stack timers due while the loop is not
 *        running fire when it runs again.
 */
ZBUF_IP_UV_EXPORT void zbuf_ip_uv_set_ref(zbuf_ip_uv_t *h, bool ref);

/**
 * @brief Detach: close every handle of the integration; @p cb runs once
 *        they are all closed, on a later iteration of the loop.
 *
 * The stack is not polled any more from the moment this returns (a poll
 * in progress finishes), and is left as it is: connections stay open, their
 * timers simply do not fire until it is attached again or deleted.  After
 * @p cb the handle @p h is gone; before it, only this module's lookups
 * (zbuf_ip_uv_stats()) may still be called.  May be called from any loop
 * callback, including a callback of the stack.
 *
 * @param cb   may be NULL.
 * @param arg  passed to @p cb.
 * @return 0; `-EINVAL` (NULL); `-EALREADY` (closing already: @p cb will
 *         not be called).
 */
ZBUF_IP_UV_EXPORT int zbuf_ip_uv_close(zbuf_ip_uv_t *h, zbuf_ip_uv_close_cb cb, void *arg);

/** @brief The stack attached by @p h (NULL for NULL). */
ZBUF_IP_UV_EXPORT zbuf_ip_stack_t *zbuf_ip_uv_stack(const zbuf_ip_uv_t *h);

/** @brief The loop of @p h (NULL for NULL). */
ZBUF_IP_UV_EXPORT uv_loop_t *zbuf_ip_uv_loop(const zbuf_ip_uv_t *h);

/** @brief Copy the counters of @p h into @p out (zeros for NULL @p h). */
ZBUF_IP_UV_EXPORT void zbuf_ip_uv_stats(const zbuf_ip_uv_t *h, zbuf_ip_uv_stats_t *out);

#ifdef __cplusplus
}
#endif

#endif /* ZBUF_IP_UV_H */
