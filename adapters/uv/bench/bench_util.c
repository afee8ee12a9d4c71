/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE /* RUSAGE_THREAD, program_invocation_short_name */
#include "bench_util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

double bench_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double bench_thread_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

void bench_die(const char *what, int err)
{
    fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what,
            strerror(err < 0 ? -err : err));
    exit(1);
}

zbuf_pool_t *bench_warm_pool(size_t bufsize, size_t count)
{
    zbuf_pool_t *p;
    zbuf_buf_t **all = calloc(count, sizeof(*all));
    int rc = zbuf_pool_create(bufsize, count, &p);
    if (rc != 0 || all == NULL)
        bench_die("pool", rc ? rc : ENOMEM);
    for (size_t i = 0; i < count; i++) {
        if ((rc = zbuf_pool_get(p, &all[i])) != 0)
            bench_die("pool", rc);
        memset(zbuf_buf_data(all[i]), 0, bufsize);
    }
    for (size_t i = 0; i < count; i++)
        zbuf_buf_unref(all[i]);
    free(all);
    return p;
}
