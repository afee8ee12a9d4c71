/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the libuv adapter's benchmark programs: clocks, a fatal
 * error exit, and a receive pool touched up front.
 */
#ifndef ZBUF_UV_BENCH_UTIL_H
#define ZBUF_UV_BENCH_UTIL_H

#include <stddef.h>
#include <zbuf/zbuf.h>

/* Monotonic wall-clock time, in seconds. */
double bench_now_s(void);
/* CPU time (user + system) of the calling thread, in seconds. */
double bench_thread_cpu_s(void);
/* Print "<program>: <what>: <error>" and exit(1); err may be negative. */
_Noreturn void bench_die(const char *what, int err);
/* A pool of count buffers, each written once so that first-touch page
 * faults are not charged to whichever run meets them; dies on failure. */
zbuf_pool_t *bench_warm_pool(size_t bufsize, size_t count);

#endif
