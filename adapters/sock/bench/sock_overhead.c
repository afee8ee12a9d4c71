/* SPDX-License-Identifier: MIT */
/*
 * sock_overhead: what a zbuf send adds in user space to the system call it
 * makes, measured without the system call: the blaster's per-message work
 * (zbuf_dup() of the master, zbuf_iovec(), zbuf_cut() of what was sent,
 * zbuf_delete()), and the locks a socket handle takes per send.  Compared
 * with the cost of the send itself (microseconds on loopback), it bounds how
 * much slower than a plain write() a zbuf send can be.
 *
 *   sock_overhead [iterations]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/uio.h>
#include <time.h>
#include <zbuf/zbuf.h>

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 2000000;
    static char buf[65536];
    for (int segs = 1; segs <= 4; segs *= 4) {
        zbuf_t *master;
        zbuf_create(&master);
        for (int i = 0; i < segs; i++)
            zbuf_append_buf(master, buf + i * 16384, 16384, NULL, NULL);
        struct iovec iov[8];
        double best = 1e30;
        for (int round = 0; round < 5; round++) {
            double t0 = now_ns();
            for (long i = 0; i < n; i++) {
                zbuf_t *z;
                size_t bytes;
                zbuf_dup(master, 0, ZBUF_TO_END, &z);
                zbuf_iovec(z, 0, ZBUF_TO_END, iov, 8, &bytes);
                zbuf_cut(z, 0, bytes, NULL);
                zbuf_delete(z);
            }
            double t = (now_ns() - t0) / (double)n;
            best = t < best ? t : best;
        }
        printf("dup + iovec + cut + delete, %d segment(s): %.1f ns per message\n", segs, best);
        zbuf_delete(master);
    }
    pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER;
    double best = 1e30;
    for (int round = 0; round < 5; round++) {
        double t0 = now_ns();
        for (long i = 0; i < n; i++) {
            /* send_lock, then the state lock twice (sequence number, and the
             * completion check of the event-loop style caller) */
            for (int k = 0; k < 3; k++) {
                pthread_mutex_lock(&a);
                pthread_mutex_unlock(&a);
            }
        }
        double t = (now_ns() - t0) / (double)n;
        best = t < best ? t : best;
    }
    printf("socket handle locks (3 uncontended lock/unlock pairs): %.1f ns per send\n", best);
    return 0;
}
