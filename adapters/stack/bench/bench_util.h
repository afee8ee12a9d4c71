/* SPDX-License-Identifier: MIT */
/*
 * What the stack's benchmarks share: the clocks they measure with and the
 * sort of their per-run results.
 */
#ifndef ZBUF_STACK_BENCH_UTIL_H
#define ZBUF_STACK_BENCH_UTIL_H

#include <time.h>

/* Wall clock, seconds. */
static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU seconds of the whole process (all threads): a measure that holds up
 * when other work shares the machine. */
static inline double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* qsort() order of doubles. */
static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#endif
