/* SPDX-License-Identifier: MIT */
/*
 * Threads meeting the engine, for ThreadSanitizer (plain C: Criterion's
 * runner cannot start under TSan).
 *
 * 1. Receive on the engine's thread, delete on another: the engine hands
 *    every zbuf to a consumer thread through a queue; the consumer checks
 *    the bytes in order and deletes them, so buffers go back to the pool
 *    (and the ring's refill notification wakes the engine) from a thread
 *    that is not the engine's.  A small pool keeps the ring running dry.
 * 2. Wake-ups from several threads while the engine waits.
 * 3. zbufSockLib routines on several threads at once, on the io_uring
 *    engine thread (skipped where io_uring is unusable).
 * Both machineries for 1 and 2.  Exit 0 when all is well.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <zbuf/uring.h>
#include <zbuf/vxworks_sock.h>

#define CHECK(c, ...)                                                                           \
    do {                                                                                        \
        if (!(c)) {                                                                             \
            fprintf(stderr, "stress_thread: %s:%d: ", __FILE__, __LINE__);                      \
            fprintf(stderr, __VA_ARGS__);                                                       \
            fputc('\n', stderr);                                                                \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

static uint8_t pat(uint64_t off)
{
    return (uint8_t)((off * 7u + (off >> 9)) % 251u);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void tcp_pair(int *a, int *b)
{
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t sl = sizeof sa;
    CHECK(bind(l, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(l, 4) == 0 &&
              getsockname(l, (struct sockaddr *)&sa, &sl) == 0, "listen");
    *a = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(connect(*a, (struct sockaddr *)&sa, sizeof sa) == 0, "connect");
    *b = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    CHECK(*b >= 0, "accept");
    close(l);
}

/* ------------------------------------------------ 1: delete elsewhere */

#define QCAP 4096
static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    zbuf_t *q[QCAP];
    unsigned head, tail;
    bool done;
    uint64_t checked;
    bool bad;
} cq = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

static void *consumer_main(void *arg)
{
    (void)arg;
    uint8_t buf[16384];
    for (;;) {
        pthread_mutex_lock(&cq.lock);
        while (cq.head == cq.tail && !cq.done)
            pthread_cond_wait(&cq.cond, &cq.lock);
        if (cq.head == cq.tail && cq.done) {
            pthread_mutex_unlock(&cq.lock);
            return NULL;
        }
        zbuf_t *z = cq.q[cq.head++ % QCAP];
        pthread_mutex_unlock(&cq.lock);
        size_t n = zbuf_length(z);
        for (size_t off = 0; off < n; off += sizeof buf) {
            size_t len = n - off < sizeof buf ? n - off : sizeof buf;
            zbuf_copyout(z, off, buf, len);
            for (size_t i = 0; i < len; i++)
                if (buf[i] != pat(cq.checked + off + i))
                    cq.bad = true;
        }
        cq.checked += n;
        usleep(cq.checked % 7 == 0 ? 200 : 0); /* let the ring run dry now and then */
        zbuf_delete(z); /* back to the pool from this thread */
    }
}

struct rx {
    uint64_t got;
    ssize_t end;
};

static void to_consumer(zbuf_uring_sock_t *s, ssize_t n, zbuf_t *z, const zbuf_uring_rx_t *rx,
                        void *arg)
{
    (void)s;
    (void)rx;
    struct rx *r = arg;
    if (z == NULL) {
        r->end = n;
        return;
    }
    r->got += (uint64_t)n;
    pthread_mutex_lock(&cq.lock);
    CHECK(cq.tail - cq.head < QCAP, "queue full");
    cq.q[cq.tail++ % QCAP] = z;
    pthread_cond_signal(&cq.cond);
    pthread_mutex_unlock(&cq.lock);
}

struct writer {
    int fd;
    uint64_t total;
};

static void *writer_main(void *arg)
{
    struct writer *w = arg;
    uint8_t buf[30000];
    for (uint64_t off = 0; off < w->total;) {
        size_t n = sizeof buf < w->total - off ? sizeof buf : (size_t)(w->total - off);
        for (size_t i = 0; i < n; i++)
            buf[i] = pat(off + i);
        ssize_t r = write(w->fd, buf, n);
        CHECK(r > 0, "write: %s", strerror(errno));
        off += (uint64_t)r;
    }
    shutdown(w->fd, SHUT_WR);
    return NULL;
}

static void delete_elsewhere(zbuf_uring_t *u, const char *name)
{
    zbuf_pool_t *pool;
    CHECK(zbuf_pool_create(4096, 6, &pool) == 0, "pool");
    zbuf_uring_bufring_t *br;
    CHECK(zbuf_uring_bufring_create(u, pool, 0, &br) == 0, "ring");
    int a, b;
    tcp_pair(&a, &b);
    zbuf_uring_sock_t *s;
    CHECK(zbuf_uring_sock_open(u, a, NULL, &s) == 0, "open");
    struct rx r = { .end = 1 };
    cq.head = cq.tail = 0;
    cq.done = false;
    cq.checked = 0;
    cq.bad = false;
    pthread_t ct, wt;
    struct writer w = { .fd = b, .total = 8u << 20 };
    CHECK(pthread_create(&ct, NULL, consumer_main, NULL) == 0, "consumer");
    CHECK(zbuf_uring_recv_start(s, br, to_consumer, &r) == 0, "recv");
    CHECK(pthread_create(&wt, NULL, writer_main, &w) == 0, "writer");
    int64_t t0 = now_ms();
    while (r.end > 0) {
        CHECK(now_ms() - t0 < 120000, "%s: stuck at %llu bytes", name, (unsigned long long)r.got);
        zbuf_uring_run(u, 1000);
    }
    pthread_join(wt, NULL);
    pthread_mutex_lock(&cq.lock);
    cq.done = true;
    pthread_cond_signal(&cq.cond);
    pthread_mutex_unlock(&cq.lock);
    pthread_join(ct, NULL);
    CHECK(r.end == 0, "%s: receive ended with %zd", name, r.end);
    CHECK(r.got == w.total && cq.checked == w.total && !cq.bad, "%s: bytes wrong", name);
    zbuf_uring_sock_stats_t st;
    zbuf_uring_sock_get_stats(s, &st);
    zbuf_uring_sock_close(s, 1000, NULL, NULL);
    while (zbuf_uring_sock_count(u) > 0)
        zbuf_uring_run(u, 50);
    CHECK(zbuf_uring_bufring_delete(br) == 0, "ring delete");
    CHECK(zbuf_pool_available(pool) == 6, "buffers lost");
    zbuf_pool_delete(pool);
    close(b);
    printf("%s: 8 MiB received, deleted on another thread, %llu empty-ring stops\n", name,
           (unsigned long long)st.recv_nobufs);
}

/* ------------------------------------------------------- 2: wake-ups */

static void *waker_main(void *arg)
{
    zbuf_uring_t *u = arg;
    for (int i = 0; i < 2000; i++) {
        zbuf_uring_wake(u);
        if (i % 100 == 0)
            usleep(100);
    }
    return NULL;
}

static void wakes(zbuf_uring_t *u, const char *name)
{
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        CHECK(pthread_create(&t[i], NULL, waker_main, u) == 0, "waker");
    int64_t t0 = now_ms();
    while (now_ms() - t0 < 300)
        zbuf_uring_run(u, 10);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    zbuf_uring_run(u, 0);
    zbuf_uring_stats_t st;
    zbuf_uring_get_stats(u, &st);
    CHECK(st.wakes > 0, "%s: no wake-up seen", name);
    printf("%s: 8000 wake-ups from 4 threads, %llu seen\n", name, (unsigned long long)st.wakes);
}

/* --------------------------------------------- 3: zbufSockLib threads */

static atomic_int vx_freed;

static void vx_free(caddr_t buf, int arg)
{
    (void)arg;
    free(buf);
    atomic_fetch_add(&vx_freed, 1);
}

struct vx_pair {
    int a, b;
    uint64_t sent, got;
    bool bad;
};

static void *vx_sender(void *arg)
{
    struct vx_pair *p = arg;
    for (int i = 0; i < 200; i++) {
        int len = 1000 + (i * 7919) % 40000;
        char *buf = malloc((size_t)len);
        for (int k = 0; k < len; k++)
            buf[k] = (char)pat(p->sent + (uint64_t)k);
        CHECK(zbufSockBufSend(p->a, buf, len, (VOIDFUNCPTR)vx_free, 0, 0) == len, "vx send");
        p->sent += (uint64_t)len;
    }
    shutdown(p->a, SHUT_WR);
    return NULL;
}

static void *vx_receiver(void *arg)
{
    struct vx_pair *p = arg;
    char buf[65536];
    for (;;) {
        int len = sizeof buf;
        ZBUF_ID z = zbufSockRecv(p->b, 0, &len);
        if (z == NULL)
            break;
        zbufExtractCopy(z, NULL, 0, buf, len);
        for (int k = 0; k < len; k++)
            if ((uint8_t)buf[k] != pat(p->got + (uint64_t)k))
                p->bad = true;
        p->got += (uint64_t)len;
        zbufDelete(z);
    }
    return NULL;
}

static void vx_threads(void)
{
    int rc = zbuf_uring_vx_init(NULL);
    if (rc != ZBUF_URING_BACKEND_IO_URING) {
        printf("zbufSockLib: io_uring unusable here, threads part skipped\n");
        zbuf_uring_vx_shutdown(0);
        return;
    }
    enum { PAIRS = 3 };
    struct vx_pair p[PAIRS];
    pthread_t st[PAIRS], rt[PAIRS];
    atomic_store(&vx_freed, 0);
    for (int i = 0; i < PAIRS; i++) {
        p[i] = (struct vx_pair){ 0 };
        tcp_pair(&p[i].a, &p[i].b);
        CHECK(pthread_create(&rt[i], NULL, vx_receiver, &p[i]) == 0, "receiver");
        CHECK(pthread_create(&st[i], NULL, vx_sender, &p[i]) == 0, "sender");
    }
    for (int i = 0; i < PAIRS; i++) {
        pthread_join(st[i], NULL);
        pthread_join(rt[i], NULL);
        CHECK(p[i].got == p[i].sent && !p[i].bad, "zbufSockLib pair %d: %llu of %llu", i,
              (unsigned long long)p[i].got, (unsigned long long)p[i].sent);
        close(p[i].a);
        close(p[i].b);
    }
    int64_t t0 = now_ms();
    while (atomic_load(&vx_freed) < PAIRS * 200 && now_ms() - t0 < 20000)
        usleep(1000);
    CHECK(atomic_load(&vx_freed) == PAIRS * 200, "free routines: %d", atomic_load(&vx_freed));
    CHECK(zbuf_uring_vx_shutdown(1000) == 0, "vx shutdown");
    printf("zbufSockLib on io_uring: %d threads sending and receiving, every free routine once\n",
           2 * PAIRS);
}

int main(void)
{
    zbuf_uring_probe_t p;
    zbuf_uring_probe(&p);
    for (int be = 0; be < 2; be++) {
        if (be == 0 && !p.usable) {
            printf("io_uring unusable here (%s): its part skipped\n", p.reason);
            continue;
        }
        zbuf_uring_opts_t o;
        zbuf_uring_opts_init(&o);
        o.flags = be == 0 ? ZBUF_URING_NO_FALLBACK : ZBUF_URING_FORCE_EPOLL;
        zbuf_uring_t *u;
        CHECK(zbuf_uring_create(&o, &u) == 0, "create");
        const char *name = be == 0 ? "io_uring" : "epoll";
        delete_elsewhere(u, name);
        wakes(u, name);
        CHECK(zbuf_uring_destroy(u, 1000) == 0, "destroy");
    }
    vx_threads();
    return 0;
}
