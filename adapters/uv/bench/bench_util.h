/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the libuv adapter's benchmark programs: the clocks and
 * the fatal error exit of every benchmark (bench/common/bench_common.h), and
 * a receive pool touched up front.
 */
#ifndef ZBUF_UV_BENCH_UTIL_H
#define ZBUF_UV_BENCH_UTIL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <zbuf/uv.h>
#include <zbuf/zbuf.h>

#include "bench_common.h"

/* A pool of count buffers, each written once so that first-touch page
 * faults are not charged to whichever run meets them; dies on failure. */
zbuf_pool_t *bench_warm_pool(size_t bufsize, size_t count);
/* A blocking TCP socket connected to 127.0.0.1:port, with TCP_NODELAY (the
 * benchmarks' clients); dies on failure. */
int bench_connect_loopback(int port);
/* Listen on 127.0.0.1 at a free port with the handle t (initialised on
 * loop here), calling cb for each connection; returns the port, dies on
 * failure.  Both helpers give their socket the congestion control named by
 * the environment variable BENCH_TCP_CC (unset: the system's), which the
 * accepted connections inherit: BBR paces loopback senders, so
 * scripts/bench-uv.sh pins it. */
int bench_listen_loopback(uv_loop_t *loop, uv_tcp_t *t, int backlog, uv_connection_cb cb);
/* In a listener's connection callback: accept the connection into the
 * stream zs (a TCP handle on the listener's loop, set up for the adapter);
 * dies on failure. */
void bench_accept(uv_stream_t *listener, int status, zbuf_uv_stream_t *zs);
/* A server thread's side of the start-up hand-over: set *ready under mu and
 * signal cv (what the thread published before is then visible to the
 * waiter), run loop until nothing is left, close it; dies if handles are
 * still open. */
void bench_serve(uv_loop_t *loop, pthread_mutex_t *mu, pthread_cond_t *cv, bool *ready);
/* The other side: wait until *ready (set by bench_serve()). */
void bench_wait_ready(pthread_mutex_t *mu, pthread_cond_t *cv, bool *ready);

#endif
