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
 * the kernel for as many as are due within the window (at most
 * ZU_COALESCE_MAX, and no more than the buffer rings can still fill: a dry
 * ring ends its receives) and gives up when the window ends.  The kernel
 * then runs the receives of several wake-ups in one io_uring_enter()
 * instead of returning to the engine every few datagrams.
 *
 * The estimate is completions over elapsed time, both decayed linearly
 * over ZU_RATE_NS, so a backlog found after a stall counts with the stall's
 * length and reads as the rate that built it, not as a fast stream (the
 * kernel hands a backlog over in runs of up to 32; an earlier trigger,
 * ZU_COALESCE_MIN completions in one wait, took such runs for a stream and
 * held up the rest of the backlog: at 200,000 evenly spaced datagrams a
 * second it doubled the 99th percentile of the delay and saved no CPU).
 *
 * The window is ZU_COALESCE_NS unless the traffic is spread over many
 * sockets.  The kernel's cost is per receive run, not per datagram: each
 * socket that has data is one task-work item, whose receive takes what the
 * socket holds and then tries once more and finds it empty.  When each
 * receive brings fewer than ZU_SOCK_BATCH completions a wait, the window
 * doubles, up to ZU_WINDOW_MAX_NS, so that each socket gathers a few
 * datagrams per run (the kernel counts task-work items, not completions,
 * towards the count a wait asks for: with many sockets the window, not the
 * count, ends the wait).  64 sockets, 1 KiB datagrams (docs/benchmarks.md,
 * io_uring, run 10): flooded, 1.11 us of CPU per datagram instead of 1.71
 * (the epoll path 1.66); at 400,000 a second 1.34 us instead of 2.00, for
 * a median delay of 183 us instead of 54 (the epoll path's was 177, its CPU
 * saturated).  Longer windows saved more CPU and cost more delay.
 *
 * Measured on a guest where every system call flushes the TLB
 * (docs/benchmarks.md, io_uring, runs 7 to 10): from a flooding sender, UDP
 * datagrams of 64 B to 16 KiB took 1.3x to 2.3x less CPU per byte with it;
 * at 400,000 evenly spaced 1 KiB datagrams a second from one socket 1.75x
 * less, for 55 us more median delay (on that guest a timed wake-up itself
 * takes 40 to 50 us beyond its time) and a 99th percentile of 770 us
 * instead of 178; below 320,000 a second it stays off.  Shorter windows (10
 * and 25 us) kept less of the gain and did not shorten that tail.
 */
#define ZU_COALESCE_MIN 16u
#define ZU_COALESCE_MAX 256u
#define ZU_COALESCE_NS 50000u
#define ZU_WINDOW_MAX_NS 200000u
#define ZU_SOCK_BATCH 2.0
#define ZU_RATE_NS 200000.0

/* Receive completions per elapsed time, decayed alike, and the window
 * (see above). */
struct zu_rate {
    uint64_t last_ns;   /* when the last wait returned (CLOCK_MONOTONIC) */
    double count;       /* completions */
    double span;        /* nanoseconds they came in */
    double rounds;      /* the receives they came from, each counted once a wait */
    uint32_t window_ns; /* the coalescing window; 0: ZU_COALESCE_NS */
};

/* CLOCK_MONOTONIC in nanoseconds, the clock of struct zu_rate. */
static inline uint64_t zu_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* How many receive completions the estimate expects in `ns`. */
static inline double zu_rate_expect_in(const struct zu_rate *r, double ns)
{
    return r->span > 0 ? r->count / r->span * ns : 0;
}

/* How many it expects in ZU_COALESCE_NS: at least ZU_COALESCE_MIN, and the
 * engine coalesces. */
static inline double zu_rate_expect(const struct zu_rate *r)
{
    return zu_rate_expect_in(r, ZU_COALESCE_NS);
}

/* How long the next coalesced wait may last. */
static inline uint32_t zu_rate_window(const struct zu_rate *r)
{
    return r->window_ns != 0 ? r->window_ns : ZU_COALESCE_NS;
}

/* Fold in a wait that returned at `now_ns` with `n` receive completions
 * from `socks` receives, and set the next window: twice as long while each
 * receive brings fewer than ZU_SOCK_BATCH completions a wait, half as long
 * once it brings four times that (between the two a doubling or halving
 * does not undo itself), within ZU_COALESCE_NS..ZU_WINDOW_MAX_NS, and
 * ZU_COALESCE_NS whenever the rate is too low to coalesce. */
static inline void zu_rate_fold(struct zu_rate *r, uint64_t now_ns, unsigned n, unsigned socks)
{
    double dt = now_ns > r->last_ns ? (double)(now_ns - r->last_ns) : 0;
    double keep = dt >= ZU_RATE_NS ? 0 : 1 - dt / ZU_RATE_NS;
    r->last_ns = now_ns;
    r->count = r->count * keep + n;
    r->span = r->span * keep + dt;
    r->rounds = r->rounds * keep + socks;
    uint32_t w = zu_rate_window(r);
    if (zu_rate_expect(r) < ZU_COALESCE_MIN)
        w = ZU_COALESCE_NS;
    else if (socks > 0 && r->count < ZU_SOCK_BATCH * r->rounds)
        w = w < ZU_WINDOW_MAX_NS / 2 ? 2 * w : ZU_WINDOW_MAX_NS;
    else if (socks > 0 && r->count > 4 * ZU_SOCK_BATCH * r->rounds)
        w = w > 2 * ZU_COALESCE_NS ? w / 2 : ZU_COALESCE_NS;
    r->window_ns = w;
}

#endif
