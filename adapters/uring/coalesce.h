/* SPDX-License-Identifier: MIT */
#ifndef ZBUF_URING_COALESCE_H
#define ZBUF_URING_COALESCE_H

#include <stdint.h>
#include <time.h>

/*
 * Completion coalescing (ring.c; the tests use the same numbers), as a
 * network card moderates its interrupts.  The engine keeps an estimate of
 * how fast receive completions arrive (struct zu_rate).  When at least
 * ZU_COALESCE_MIN of them are due within ZU_COALESCE_NS, the next wait asks
 * the kernel for that many (at most ZU_COALESCE_MAX, and no more than the
 * buffer rings can still fill: a dry ring ends its receives) and gives up
 * after ZU_COALESCE_NS.  The kernel then runs the receives of several
 * wake-ups in one io_uring_enter() instead of returning to the engine every
 * few datagrams.
 *
 * The estimate is completions over elapsed time, both decayed linearly
 * over ZU_RATE_NS, so a backlog found after a stall counts with the stall's
 * length and reads as the rate that built it, not as a fast stream (the
 * kernel hands a backlog over in runs of up to 32; an earlier trigger,
 * ZU_COALESCE_MIN completions in one wait, took such runs for a stream and
 * held up the rest of the backlog: at 200,000 evenly spaced datagrams a
 * second it doubled the 99th percentile of the delay and saved no CPU).
 *
 * Measured on a guest where every system call flushes the TLB
 * (docs/benchmarks.md, io_uring, runs 7 to 9): from a flooding sender, UDP
 * datagrams of 64 B to 16 KiB took 1.3x to 2.3x less CPU per byte with it;
 * at 400,000 evenly spaced 1 KiB datagrams a second 1.75x less, for 55 us
 * more median delay (on that guest a timed wake-up itself takes 40 to 50 us
 * beyond its time) and a 99th percentile of 770 us instead of 178; below
 * 320,000 a second it stays off.  Shorter windows (10 and 25 us) kept less
 * of the gain and did not shorten that tail.
 */
#define ZU_COALESCE_MIN 16u
#define ZU_COALESCE_MAX 64u
#define ZU_COALESCE_NS 50000
#define ZU_RATE_NS 200000.0

/* Receive completions per elapsed time, decayed alike (see above). */
struct zu_rate {
    uint64_t last_ns; /* when the last wait returned (CLOCK_MONOTONIC) */
    double count;     /* completions */
    double span;      /* nanoseconds they came in */
};

/* CLOCK_MONOTONIC in nanoseconds, the clock of struct zu_rate. */
static inline uint64_t zu_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Fold in a wait that returned at `now_ns` with `n` receive completions. */
static inline void zu_rate_fold(struct zu_rate *r, uint64_t now_ns, unsigned n)
{
    double dt = now_ns > r->last_ns ? (double)(now_ns - r->last_ns) : 0;
    double keep = dt >= ZU_RATE_NS ? 0 : 1 - dt / ZU_RATE_NS;
    r->last_ns = now_ns;
    r->count = r->count * keep + n;
    r->span = r->span * keep + dt;
}

/* How many receive completions the estimate expects in ZU_COALESCE_NS. */
static inline double zu_rate_expect(const struct zu_rate *r)
{
    return r->span > 0 ? r->count / r->span * ZU_COALESCE_NS : 0;
}

#endif
