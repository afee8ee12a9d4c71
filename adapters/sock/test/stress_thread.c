/* SPDX-License-Identifier: MIT */
/*
 * Completion-thread stress, a plain program (not Criterion: Criterion's
 * forking runner cannot start under ThreadSanitizer, see Criterion issue
 * #274), registered as the test sock_stress_thread with the label "threads"
 * so that scripts/test.sh runs it in the TSan build.
 *
 * Three senders on three loopback connections send zero-copy messages made
 * of buffers from their own small pools and wait in those pools for the
 * buffers to come back; the completion thread releases them, while the main
 * thread also calls zbuf_sock_complete() on the same handles, so completions
 * race with sends (the EARLY path) and with each other.  Then handles are
 * opened and closed while the thread runs.  Every buffer must come back
 * exactly once and every byte must arrive intact.  Exit status 0 on success.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zbuf/sock.h>

#define FAIL(...)                                                                       \
    do {                                                                                \
        fprintf(stderr, "stress_thread: " __VA_ARGS__);                                 \
        fputc('\n', stderr);                                                            \
        exit(1);                                                                        \
    } while (0)

static uint8_t pat(uint64_t off)
{
    return (uint8_t)((off * 7u + (off >> 9)) % 251u);
}

static void tcp_pair(int *a, int *b)
{
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t sl = sizeof sa;
    if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof sa) || listen(l, 4) ||
        getsockname(l, (struct sockaddr *)&sa, &sl))
        FAIL("listen: %s", strerror(errno));
    *a = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(*a, (struct sockaddr *)&sa, sizeof sa) != 0)
        FAIL("connect: %s", strerror(errno));
    *b = accept(l, NULL, NULL);
    close(l);
}

struct reader {
    int fd;
    uint64_t got;
    uint64_t bad;
    pthread_t tid;
};

static void *reader_main(void *arg)
{
    struct reader *r = arg;
    static _Thread_local uint8_t buf[65536];
    ssize_t n;
    while ((n = read(r->fd, buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < n; i++)
            if (buf[i] != pat(r->got + (uint64_t)i) && r->bad == 0)
                r->bad = r->got + (uint64_t)i + 1;
        r->got += (uint64_t)n;
    }
    return NULL;
}

/* A sender's own pool of buffers, handed back by release callbacks. */
struct sender {
    int id;
    zbuf_sock_t *s;
    sem_t free_count;
    pthread_mutex_t lock;
    void *bufs[4];
    int nfree;
    atomic_int returned;
    uint64_t sent;
    pthread_t tid;
};

enum { BUF = 96 * 1024, SENDS = 400 };

static void buf_back(void *data, size_t size, void *arg)
{
    (void)size;
    struct sender *x = arg;
    pthread_mutex_lock(&x->lock);
    x->bufs[x->nfree++] = data;
    pthread_mutex_unlock(&x->lock);
    atomic_fetch_add(&x->returned, 1);
    sem_post(&x->free_count);
}

static void *sender_main(void *arg)
{
    struct sender *x = arg;
    for (int i = 0; i < SENDS; i++) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 10;
        if (sem_timedwait(&x->free_count, &until) != 0)
            FAIL("sender %d: no buffer came back in 10 s (send %d): deadlock", x->id, i);
        pthread_mutex_lock(&x->lock);
        uint8_t *p = x->bufs[--x->nfree];
        pthread_mutex_unlock(&x->lock);
        for (size_t k = 0; k < BUF; k++)
            p[k] = pat(x->sent + k);
        zbuf_t *z;
        if (zbuf_create(&z) || zbuf_append_buf(z, p, BUF, buf_back, x))
            FAIL("zbuf");
        ssize_t n = zbuf_sock_send(x->s, z, 0);
        if (n != BUF)
            FAIL("sender %d: send returned %zd", x->id, n);
        x->sent += BUF;
        zbuf_delete(z);
    }
    return NULL;
}

static void churn_release(void *data, size_t size, void *arg)
{
    (void)size;
    free(data);
    atomic_fetch_add((atomic_int *)arg, 1);
}

static zbuf_sock_t *open_handle(int fd)
{
    zbuf_sock_opts_t o;
    zbuf_sock_opts_init(&o);
    o.flags = ZBUF_SOCK_ZEROCOPY | ZBUF_SOCK_ZEROCOPY_ALWAYS | ZBUF_SOCK_THREAD;
    o.max_outstanding = 8;
    zbuf_sock_t *s;
    int e = zbuf_sock_open(fd, &o, &s);
    if (e != 0)
        FAIL("open: %s", zbuf_strerror(e));
    return s;
}

int main(void)
{
    enum { NS = 3 };
    static struct sender x[NS];
    static struct reader r[NS];
    for (int i = 0; i < NS; i++) {
        int a, b;
        tcp_pair(&a, &b);
        r[i].fd = b;
        pthread_create(&r[i].tid, NULL, reader_main, &r[i]);
        x[i].id = i;
        x[i].s = open_handle(a);
        sem_init(&x[i].free_count, 0, 4);
        pthread_mutex_init(&x[i].lock, NULL);
        for (int k = 0; k < 4; k++)
            x[i].bufs[k] = malloc(BUF);
        x[i].nfree = 4;
        pthread_create(&x[i].tid, NULL, sender_main, &x[i]);
    }
    /* Race the completion thread from here. */
    for (int round = 0; round < 2000; round++) {
        for (int i = 0; i < NS; i++)
            zbuf_sock_complete(x[i].s);
        usleep(100);
    }
    for (int i = 0; i < NS; i++) {
        pthread_join(x[i].tid, NULL);
        int e = zbuf_sock_close(x[i].s, 5000);
        if (e != 0)
            FAIL("close %d: %s", i, zbuf_strerror(e));
        pthread_join(r[i].tid, NULL);
        if (r[i].got != (uint64_t)SENDS * BUF || r[i].bad)
            FAIL("reader %d: %llu bytes, first bad %llu", i, (unsigned long long)r[i].got,
                 (unsigned long long)r[i].bad);
        if (atomic_load(&x[i].returned) != SENDS || x[i].nfree != 4)
            FAIL("sender %d: %d buffers returned", i, atomic_load(&x[i].returned));
        for (int k = 0; k < 4; k++)
            free(x[i].bufs[k]);
        close(r[i].fd);
    }

    /* Handles come and go while the thread runs: four sends in flight,
     * then a close that waits, or (every other round) one that aborts at
     * once.  Each buffer must still be released exactly once. */
    static atomic_int churn_back;
    for (int round = 0; round < 30; round++) {
        int a, b;
        tcp_pair(&a, &b);
        struct reader rr = { .fd = b };
        pthread_create(&rr.tid, NULL, reader_main, &rr);
        zbuf_sock_t *s = open_handle(a);
        for (int i = 0; i < 4; i++) {
            uint8_t *p = malloc(BUF);
            for (size_t k = 0; k < BUF; k++)
                p[k] = pat((uint64_t)i * BUF + k);
            zbuf_t *z;
            if (zbuf_create(&z) || zbuf_append_buf(z, p, BUF, churn_release, &churn_back))
                FAIL("zbuf");
            if (zbuf_sock_send(s, z, 0) != BUF)
                FAIL("churn send");
            zbuf_delete(z);
        }
        zbuf_sock_close(s, round % 2 ? 0 : 1000);
        pthread_join(rr.tid, NULL);
        close(b);
        if (atomic_load(&churn_back) != 4 * (round + 1))
            FAIL("churn round %d: %d buffers back", round, atomic_load(&churn_back));
    }
    zbuf_thread_cache_flush();
    zbuf_stats_t st;
    zbuf_stats_get(&st);
    if (st.live_zbufs != 0 || st.live_bufs != 0)
        FAIL("leak: %lld zbufs, %lld buffers", (long long)st.live_zbufs, (long long)st.live_bufs);
    puts("stress_thread: OK");
    return 0;
}
