/* SPDX-License-Identifier: MIT */
/*
 * Cross-thread use: zbufs on different threads that share buffers, and a
 * pool whose buffers are taken on one thread and come back on others.
 *
 * Each thread owns its zbuf handles (the library's rule: one thread per
 * handle at a time); the buffers behind them are shared.  Release callbacks
 * count with atomics and must run exactly once per buffer, never while a
 * zbuf on any thread still holds bytes of it.  The callback poisons the
 * buffer, so a release that came too early shows up as wrong bytes in the
 * thread that still reads it (and, under ThreadSanitizer, as a data race).
 *
 * These tests carry the CTest label "threads" and run under TSan in CI.
 * Criterion cannot start under ThreadSanitizer (its BoxFort arena maps at
 * fixed addresses inside TSan's reserved ranges: "Could not initialize
 * inheritable arena", Criterion issue #274), so a TSan build of this file
 * has its own main() that runs the same tests in order, with the same
 * leak check, and exits non-zero on the first failed check.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

#include "zt_tsan.h"

#ifndef ZT_UNDER_TSAN
ZT_SUITE(threads);
#endif
#define THREADS_TEST(name) ZT_TSAN_TEST(threads, name)

#define NTHREADS 4

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static size_t rnd(uint64_t *s, size_t n)
{
    return n ? (size_t)(splitmix(s) % n) : 0;
}

/* Which test thread is running (0 .. NTHREADS-1), -1 on the main thread. */
static __thread int self = -1;

/* ============================================================ shared buffers */

#define NBUF 32
#define BUFSZ 64
#define MASTER (NBUF * BUFSZ)
#define HANDLES 6 /* the last one is a reserve the random steps leave alone */
#define WORK (HANDLES - 1)

static uint8_t pattern(unsigned pos)
{
    return (uint8_t)(pos * 31u + (pos >> 6) * 7u + 5u);
}

struct shared {
    uint8_t *mem[NBUF];
    _Atomic int released[NBUF]; /* callback runs per buffer */
    _Atomic int who[NBUF];      /* thread that ran it */
    _Atomic int late[NBUF];     /* ran during the final phase */
    _Atomic int final_phase;    /* only the designated thread runs now */
    _Atomic int errors;         /* problems seen inside callbacks */
    pthread_barrier_t start, phase1, phase2;
    int designated;         /* the thread that deletes last */
    zbuf_t *mine[NTHREADS]; /* each thread's starting dup */
    uint64_t seed;
    _Atomic long ops;
};

static struct shared sh;

static void shared_release(void *data, size_t size, void *arg)
{
    int i = (int)(intptr_t)arg;
    if (i < 0 || i >= NBUF || data != sh.mem[i] || size != BUFSZ) {
        atomic_fetch_add(&sh.errors, 1);
        return;
    }
    atomic_store(&sh.who[i], self);
    atomic_store(&sh.late[i], atomic_load(&sh.final_phase));
    if (atomic_fetch_add(&sh.released[i], 1) != 0)
        atomic_fetch_add(&sh.errors, 1);
    memset(data, 0xEE, size); /* a reader still using it would race with this */
}

/* One handle of a thread: the zbuf and, per byte, its position in the
 * master sequence (which gives the buffer it must come from). */
struct handle {
    zbuf_t *z;
    uint16_t org[MASTER * 2];
    size_t len;
};

struct worker {
    int index;
    uint64_t rng;
    struct handle h[HANDLES];
    uint8_t tmp[MASTER * 2];
    char failure[200]; /* first problem found, reported by the main thread */
    long idle, held;   /* steps with no zbuf left; bytes of the zbufs worked on */
};

#define W_CHECK(w, cond, ...)                                                                      \
    do {                                                                                           \
        if (!(cond) && !(w)->failure[0])                                                           \
            snprintf((w)->failure, sizeof(w)->failure, __VA_ARGS__);                               \
    } while (0)

static void h_verify(struct worker *w, struct handle *h)
{
    if (!h->z)
        return;
    W_CHECK(w, zbuf_check(h->z) == 0, "thread %d: zbuf_check failed", w->index);
    W_CHECK(w, zbuf_length(h->z) == h->len, "thread %d: length %zu, expected %zu", w->index,
            zbuf_length(h->z), h->len);
    if (h->len) {
        ssize_t got = zbuf_copyout(h->z, 0, w->tmp, ZBUF_TO_END);
        W_CHECK(w, got == (ssize_t)h->len, "thread %d: copyout gave %zd", w->index, got);
    }
    for (size_t i = 0; i < h->len; i++) {
        unsigned pos = h->org[i];
        W_CHECK(w, atomic_load_explicit(&sh.released[pos / BUFSZ], memory_order_relaxed) == 0,
                "thread %d: buffer %u was released while this thread holds its byte %u", w->index,
                pos / BUFSZ, pos % BUFSZ);
        W_CHECK(w, w->tmp[i] == pattern(pos),
                "thread %d: byte %zu is 0x%02x, expected 0x%02x (buffer %u released early?)",
                w->index, i, w->tmp[i], pattern(pos), pos / BUFSZ);
    }
}

static struct handle *free_handle(struct worker *w, const struct handle *keep)
{
    struct handle *h = &w->h[rnd(&w->rng, WORK)];
    for (int i = 0; i < WORK && (h->z || h == keep); i++)
        h = &w->h[(h - w->h + 1) % WORK];
    if (h->z && h != keep) {
        W_CHECK(w, zbuf_delete(h->z) == 0, "thread %d: delete failed", w->index);
        h->z = NULL;
        h->len = 0;
    }
    return h == keep ? NULL : h;
}

static struct handle *some_handle(struct worker *w)
{
    struct handle *h = &w->h[rnd(&w->rng, WORK)];
    for (int i = 0; i < WORK && !h->z; i++)
        h = &w->h[(h - w->h + 1) % WORK];
    return h->z ? h : NULL;
}

static void worker_step(struct worker *w)
{
    struct handle *h = some_handle(w), *o;
    if (!h) {
        w->idle++;
        return;
    }
    w->held += (long)h->len;
    size_t off = rnd(&w->rng, h->len + 1), n = rnd(&w->rng, h->len - off + 1);
    zbuf_t *out = NULL;
    int rc;
    switch (rnd(&w->rng, 10)) {
    case 8: /* refill from the reserve, so the zbufs do not dwindle away */
    case 9: {
        struct handle *r = &w->h[HANDLES - 1];
        if (h->len > MASTER / 2 || !(o = free_handle(w, h)))
            break;
        off = rnd(&w->rng, r->len / 2);
        n = r->len / 2 + rnd(&w->rng, r->len / 2 - off);
        rc = zbuf_dup(r->z, off, n, &out);
        W_CHECK(w, rc == 0, "thread %d: dup of the reserve failed: %d", w->index, rc);
        if (rc)
            break;
        o->z = out;
        memcpy(o->org, r->org + off, n * sizeof *o->org);
        o->len = n;
        h_verify(w, o);
        break;
    }
    case 0: /* dup a range */
    case 1:
        if (!(o = free_handle(w, h)))
            break;
        rc = zbuf_dup(h->z, off, n, &out);
        W_CHECK(w, rc == 0, "thread %d: dup failed: %d", w->index, rc);
        if (rc)
            break;
        o->z = out;
        memcpy(o->org, h->org + off, n * sizeof *o->org);
        o->len = n;
        h_verify(w, o);
        break;
    case 2: /* split off the tail */
        if (!(o = free_handle(w, h)))
            break;
        rc = zbuf_split(h->z, off, &out);
        W_CHECK(w, rc == 0, "thread %d: split failed: %d", w->index, rc);
        if (rc)
            break;
        o->z = out;
        memcpy(o->org, h->org + off, (h->len - off) * sizeof *o->org);
        o->len = h->len - off;
        h->len = off;
        h_verify(w, o);
        break;
    case 3: /* split off the head */
        if (!(o = free_handle(w, h)))
            break;
        rc = zbuf_split_head(h->z, off, &out);
        W_CHECK(w, rc == 0, "thread %d: split_head failed: %d", w->index, rc);
        if (rc)
            break;
        o->z = out;
        memcpy(o->org, h->org, off * sizeof *o->org);
        o->len = off;
        memmove(h->org, h->org + off, (h->len - off) * sizeof *h->org);
        h->len -= off;
        h_verify(w, o);
        break;
    case 4: /* cut: may drop the last reference to a buffer */
    case 5:
        if (n > 16)
            n = 1 + rnd(&w->rng, 16);
        if (off + n > h->len)
            break;
        rc = zbuf_cut(h->z, off, n, NULL);
        W_CHECK(w, rc == 0, "thread %d: cut failed: %d", w->index, rc);
        if (rc)
            break;
        memmove(h->org + off, h->org + off + n, (h->len - off - n) * sizeof *h->org);
        h->len -= n;
        break;
    case 6: /* move another handle's bytes in */
        o = some_handle(w);
        if (!o || o == h || h->len + o->len > MASTER * 2)
            break;
        rc = zbuf_insert(h->z, off, o->z, NULL);
        W_CHECK(w, rc == 0, "thread %d: insert failed: %d", w->index, rc);
        if (rc)
            break;
        memmove(h->org + off + o->len, h->org + off, (h->len - off) * sizeof *h->org);
        memcpy(h->org + off, o->org, o->len * sizeof *o->org);
        h->len += o->len;
        o->z = NULL;
        o->len = 0;
        break;
    default: /* a handle's reference on a shared buffer, taken and dropped */
        if (h->len) {
            zbuf_seg_t *s = zbuf_seg_find(h->z, off < h->len ? off : 0, NULL);
            zbuf_buf_t *b = zbuf_buf_ref(zbuf_seg_buf(h->z, s));
            W_CHECK(w, b && zbuf_buf_refs(b) >= 2, "thread %d: buffer reference count", w->index);
            zbuf_buf_unref(b);
        }
        if (rnd(&w->rng, 8) == 0) {
            W_CHECK(w, zbuf_delete(h->z) == 0, "thread %d: delete failed", w->index);
            h->z = NULL;
            h->len = 0;
        }
        break;
    }
    if (h->z)
        h_verify(w, h);
}

static void delete_all(struct worker *w)
{
    for (int i = 0; i < HANDLES; i++) {
        if (w->h[i].z)
            W_CHECK(w, zbuf_delete(w->h[i].z) == 0, "thread %d: delete failed", w->index);
        w->h[i].z = NULL;
        w->h[i].len = 0;
    }
}

static void *shared_worker(void *arg)
{
    struct worker *w = arg;
    self = w->index;
    w->h[0].z = sh.mine[w->index];
    w->h[0].len = MASTER;
    for (unsigned i = 0; i < MASTER; i++)
        w->h[0].org[i] = (uint16_t)i;
    /* The reserve: a third of the buffers, kept to the end.  Buffers in no
     * thread's reserve may see their last reference dropped during the
     * random phase, on any thread; those in the designated thread's reserve
     * are released in the final phase, by that thread. */
    struct handle *r = &w->h[HANDLES - 1];
    size_t from = rnd(&w->rng, NBUF - NBUF / 3) * BUFSZ;
    W_CHECK(w, zbuf_dup(w->h[0].z, from, MASTER / 3, &r->z) == 0, "thread %d: dup failed",
            w->index);
    memcpy(r->org, w->h[0].org + from, MASTER / 3 * sizeof *r->org);
    r->len = MASTER / 3;
    pthread_barrier_wait(&sh.start);
    long steps = 4000 + (long)rnd(&w->rng, 4000);
    for (long i = 0; i < steps && !w->failure[0]; i++)
        worker_step(w);
    atomic_fetch_add(&sh.ops, steps);
    pthread_barrier_wait(&sh.phase1);
    h_verify(w, r);
    if (w->index != sh.designated)
        delete_all(w);
    pthread_barrier_wait(&sh.phase2);
    if (w->index == sh.designated) {
        atomic_store(&sh.final_phase, 1);
        delete_all(w);
    }
    zbuf_thread_cache_flush();
    return NULL;
}

THREADS_TEST(shared_buffers_are_released_exactly_once_on_any_thread)
{
    static struct worker workers[NTHREADS];
    int late_total = 0, late_elsewhere = 0;
    int by_thread[NTHREADS] = {0};
    long idle = 0, held = 0, steps = 0;
    const int rounds = 40;
    for (int round = 0; round < rounds; round++) {
        memset(&sh, 0, sizeof sh);
        sh.designated = round % NTHREADS;
        T_OK(pthread_barrier_init(&sh.start, NULL, NTHREADS));
        T_OK(pthread_barrier_init(&sh.phase1, NULL, NTHREADS));
        T_OK(pthread_barrier_init(&sh.phase2, NULL, NTHREADS));

        /* One master zbuf of NBUF enrolled buffers, a dup per thread. */
        zbuf_t *master;
        T_OK(zbuf_create(&master));
        for (int i = 0; i < NBUF; i++) {
            sh.mem[i] = malloc(BUFSZ);
            T_CHECK(sh.mem[i] != NULL, "out of memory");
            for (unsigned j = 0; j < BUFSZ; j++)
                sh.mem[i][j] = pattern((unsigned)i * BUFSZ + j);
            T_CHECK(
                zbuf_append_buf(master, sh.mem[i], BUFSZ, shared_release, (void *)(intptr_t)i) == 0,
                "append_buf failed");
        }
        for (int t = 0; t < NTHREADS; t++)
            T_OK(zbuf_dup(master, 0, ZBUF_TO_END, &sh.mine[t]));
        T_OK(zbuf_delete(master));

        pthread_t tid[NTHREADS];
        for (int t = 0; t < NTHREADS; t++) {
            memset(&workers[t], 0, sizeof workers[t]);
            workers[t].index = t;
            workers[t].rng = 0x1234 + (uint64_t)round * 977 + (uint64_t)t * 131;
            T_OK(pthread_create(&tid[t], NULL, shared_worker, &workers[t]));
        }
        for (int t = 0; t < NTHREADS; t++)
            pthread_join(tid[t], NULL);
        for (int t = 0; t < NTHREADS; t++) {
            T_CHECK(workers[t].failure[0] == 0, "round %d: %s", round, workers[t].failure);
            idle += workers[t].idle;
            held += workers[t].held;
        }
        steps += atomic_load(&sh.ops);

        T_CHECK(atomic_load(&sh.errors) == 0,
                "round %d: a release callback ran twice or with wrong arguments", round);
        for (int i = 0; i < NBUF; i++) {
            T_CHECK(atomic_load(&sh.released[i]) == 1, "round %d: buffer %d released %d times",
                    round, i, atomic_load(&sh.released[i]));
            int who = atomic_load(&sh.who[i]);
            T_CHECK(who >= 0 && who < NTHREADS,
                    "round %d: buffer %d released outside the worker threads", round, i);
            by_thread[who]++;
            if (atomic_load(&sh.late[i])) {
                late_total++;
                late_elsewhere += who != sh.designated;
            }
            free(sh.mem[i]);
        }
        pthread_barrier_destroy(&sh.start);
        pthread_barrier_destroy(&sh.phase1);
        pthread_barrier_destroy(&sh.phase2);
    }
    T_INFO("shared: %ld steps, %ld with no zbuf left, %ld bytes per zbuf worked on; %d buffers "
           "released in the final phase",
           steps, idle, held / (steps - idle + 1), late_total);
    T_CHECK(late_elsewhere == 0, "callbacks of the final deletions ran on another thread");
    T_CHECK(late_total > 0, "no buffer survived to the final phase: the test lost its point");
    for (int t = 0; t < NTHREADS; t++)
        T_CHECK(by_thread[t] > 0, "thread %d never dropped a last reference", t);
}

/* ============================================================ refcount hammer */

struct hammer {
    zbuf_t *z;
    zbuf_buf_t *h;
    long iters;
    char failure[160];
};

static _Atomic int hammer_released;

static void hammer_release(void *data, size_t size, void *arg)
{
    (void)data;
    (void)size;
    (void)arg;
    atomic_fetch_add(&hammer_released, 1);
}

static void *hammer_worker(void *arg)
{
    struct hammer *hm = arg;
    for (long i = 0; i < hm->iters; i++) {
        zbuf_t *d = NULL;
        if (zbuf_dup(hm->z, (size_t)(i % 8), 8, &d) != 0) {
            snprintf(hm->failure, sizeof hm->failure, "dup failed");
            break;
        }
        zbuf_buf_t *b = zbuf_buf_ref(hm->h);
        if (atomic_load(&hammer_released) != 0)
            snprintf(hm->failure, sizeof hm->failure, "released while referenced");
        zbuf_buf_unref(b);
        if (zbuf_delete(d) != 0)
            snprintf(hm->failure, sizeof hm->failure, "delete failed");
    }
    zbuf_thread_cache_flush();
    return NULL;
}

THREADS_TEST(one_buffer_referenced_from_every_thread_counts_exactly)
{
    static uint8_t mem[16] = "0123456789abcdef";
    zbuf_buf_t *h;
    atomic_store(&hammer_released, 0);
    T_OK(zbuf_buf_wrap(mem, sizeof mem, hammer_release, NULL, &h));
    struct hammer hm[NTHREADS];
    pthread_t tid[NTHREADS];
    for (int t = 0; t < NTHREADS; t++) {
        memset(&hm[t], 0, sizeof hm[t]);
        hm[t].h = h;
        hm[t].iters = 150000;
        T_OK(zbuf_create(&hm[t].z));
        T_OK(zbuf_append_ref(hm[t].z, h, 0, 16));
    }
    T_CHECK(zbuf_buf_refs(h) == 1 + NTHREADS, "references: %u", zbuf_buf_refs(h));
    for (int t = 0; t < NTHREADS; t++)
        T_OK(pthread_create(&tid[t], NULL, hammer_worker, &hm[t]));
    for (int t = 0; t < NTHREADS; t++)
        pthread_join(tid[t], NULL);
    for (int t = 0; t < NTHREADS; t++)
        T_CHECK(hm[t].failure[0] == 0, "thread %d: %s", t, hm[t].failure);
    T_CHECK(zbuf_buf_refs(h) == 1 + NTHREADS, "references lost or gained: %u", zbuf_buf_refs(h));
    zbuf_buf_unref(h);
    for (int t = 0; t < NTHREADS; t++) {
        T_CHECK(atomic_load(&hammer_released) == 0, "released while a zbuf holds it");
        T_OK(zbuf_delete(hm[t].z));
    }
    T_CHECK(atomic_load(&hammer_released) == 1, "released %d times", atomic_load(&hammer_released));
}

/* ============================================================ pool */

#define POOL_BUFS 16
#define POOL_BUFSZ 256
#define ITEMS 40000
#define QCAP 32

/* A bounded queue of zbufs from the producer to the consumers. */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t more, room;
    zbuf_t *item[QCAP];
    uint32_t seq[QCAP];
    size_t head, n;
    bool closed;
} q = {.lock = PTHREAD_MUTEX_INITIALIZER,
       .more = PTHREAD_COND_INITIALIZER,
       .room = PTHREAD_COND_INITIALIZER};

static void q_push(zbuf_t *z, uint32_t seq)
{
    pthread_mutex_lock(&q.lock);
    while (q.n == QCAP)
        pthread_cond_wait(&q.room, &q.lock);
    q.item[(q.head + q.n) % QCAP] = z;
    q.seq[(q.head + q.n) % QCAP] = seq;
    q.n++;
    pthread_cond_signal(&q.more);
    pthread_mutex_unlock(&q.lock);
}

static bool q_pop(zbuf_t **z, uint32_t *seq)
{
    pthread_mutex_lock(&q.lock);
    while (q.n == 0 && !q.closed)
        pthread_cond_wait(&q.more, &q.lock);
    bool got = q.n > 0;
    if (got) {
        *z = q.item[q.head];
        *seq = q.seq[q.head];
        q.head = (q.head + 1) % QCAP;
        q.n--;
        pthread_cond_signal(&q.room);
    }
    pthread_mutex_unlock(&q.lock);
    return got;
}

static void q_close(void)
{
    pthread_mutex_lock(&q.lock);
    q.closed = true;
    pthread_cond_broadcast(&q.more);
    pthread_mutex_unlock(&q.lock);
}

static zbuf_pool_t *pool;

/* Item `seq` is bytes seq_byte(seq, 0 .. item_len(seq)-1). */
static size_t item_len(uint32_t seq)
{
    return 1 + (seq * 2654435761u) % POOL_BUFSZ;
}

static uint8_t seq_byte(uint32_t seq, size_t i)
{
    return (uint8_t)(seq * 131u + i * 7u);
}

struct pool_stats {
    long items, retries, copied_bytes, copyouts;
    char failure[160];
};

static void *producer(void *arg)
{
    struct pool_stats *ps = arg;
    self = 0;
    for (uint32_t seq = 0; seq < ITEMS; seq++) {
        zbuf_buf_t *b;
        int rc;
        while ((rc = zbuf_pool_get(pool, &b)) == -ENOBUFS) {
            ps->retries++;
            sched_yield();
        }
        if (rc != 0) {
            snprintf(ps->failure, sizeof ps->failure, "pool_get: %d", rc);
            break;
        }
        size_t n = item_len(seq);
        uint8_t *d = zbuf_buf_data(b);
        for (size_t i = 0; i < n; i++)
            d[i] = seq_byte(seq, i);
        zbuf_t *z;
        if (zbuf_create(&z) != 0) {
            snprintf(ps->failure, sizeof ps->failure, "create failed");
            zbuf_buf_unref(b);
            break;
        }
        /* Two segments of the same pool buffer when there is room. */
        size_t cut = n / 2;
        if (cut)
            zbuf_append_ref(z, b, 0, cut);
        zbuf_append_ref(z, b, cut, n - cut);
        zbuf_buf_unref(b); /* the zbuf's segments hold it now */
        q_push(z, seq);
        ps->items++;
        size_t avail = zbuf_pool_available(pool);
        if (avail > POOL_BUFS)
            snprintf(ps->failure, sizeof ps->failure, "pool has %zu of %d available", avail,
                     POOL_BUFS);
    }
    q_close();
    zbuf_thread_cache_flush();
    return NULL;
}

static void *consumer(void *arg)
{
    struct pool_stats *ps = arg;
    zbuf_t *backlog[3] = {NULL, NULL, NULL};
    uint64_t rng = (uint64_t)(uintptr_t)arg;
    zbuf_t *z;
    uint32_t seq;
    uint8_t tmp[POOL_BUFSZ];
    while (q_pop(&z, &seq)) {
        size_t n = item_len(seq);
        if (zbuf_length(z) != n || zbuf_copyout(z, 0, tmp, ZBUF_TO_END) != (ssize_t)n) {
            snprintf(ps->failure, sizeof ps->failure, "item %u: wrong length", seq);
            break;
        }
        ps->copied_bytes += (long)n;
        ps->copyouts++;
        for (size_t i = 0; i < n; i++)
            if (tmp[i] != seq_byte(seq, i)) {
                snprintf(ps->failure, sizeof ps->failure,
                         "item %u byte %zu wrong: a pool buffer was reused while in use", seq, i);
                break;
            }
        /* Keep a few around, split some: buffers come back out of order. */
        zbuf_t *tail = NULL;
        if (n > 1 && rnd(&rng, 2) == 0 && zbuf_split(z, n / 3, &tail) == 0) {
            zbuf_delete(z);
            z = tail;
        }
        size_t slot = rnd(&rng, 3);
        zbuf_delete(backlog[slot]);
        backlog[slot] = z;
        ps->items++;
    }
    for (int i = 0; i < 3; i++)
        zbuf_delete(backlog[i]);
    zbuf_thread_cache_flush();
    return NULL;
}

THREADS_TEST(pool_buffers_come_back_from_other_threads)
{
    zbuf_stats_t st0, st1;
    zbuf_stats_get(&st0);
    T_OK(zbuf_pool_create(POOL_BUFSZ, POOL_BUFS, &pool));
    struct pool_stats ps[NTHREADS];
    memset(ps, 0, sizeof ps);
    pthread_t tid[NTHREADS];
    T_OK(pthread_create(&tid[0], NULL, producer, &ps[0]));
    for (int t = 1; t < NTHREADS; t++)
        T_OK(pthread_create(&tid[t], NULL, consumer, &ps[t]));
    for (int t = 0; t < NTHREADS; t++)
        pthread_join(tid[t], NULL);
    long consumed = 0, copied = 0, copyouts = 0;
    for (int t = 0; t < NTHREADS; t++) {
        T_CHECK(ps[t].failure[0] == 0, "thread %d: %s", t, ps[t].failure);
        if (t) {
            consumed += ps[t].items;
            copied += ps[t].copied_bytes;
            copyouts += ps[t].copyouts;
        }
    }
    T_CHECK(ps[0].items == ITEMS, "producer made %ld of %d items", ps[0].items, ITEMS);
    T_CHECK(consumed == ITEMS, "consumers saw %ld of %d items", consumed, ITEMS);
    T_CHECK(zbuf_pool_available(pool) == POOL_BUFS, "buffers did not all come back");

    /* The counters of exited threads are kept: totals add up after join. */
    zbuf_stats_get(&st1);
    T_CHECK(st1.bytes_copied - st0.bytes_copied == (uint64_t)copied,
            "copied bytes counted %llu, the consumers copied %ld",
            (unsigned long long)(st1.bytes_copied - st0.bytes_copied), copied);
    T_CHECK(st1.copies - st0.copies == (uint64_t)copyouts, "copies counted %llu, made %ld",
            (unsigned long long)(st1.copies - st0.copies), copyouts);
    T_CHECK(st1.live_zbufs == st0.live_zbufs, "zbufs leaked across threads");
    T_CHECK(st1.live_segs == st0.live_segs, "segments leaked across threads");
    T_CHECK(st1.live_bufs == st0.live_bufs, "pool buffers still counted as taken");
    T_CHECK(st1.live_pools == st0.live_pools + 1, "the pool is not counted");
    zbuf_pool_delete(pool);
    zbuf_stats_get(&st1);
    T_CHECK(st1.live_pools == st0.live_pools, "the deleted pool is still counted");
    T_INFO("pool: %d items, producer waited %ld times for a buffer", ITEMS, ps[0].retries);
}

/* A pool deleted while its buffers are out on other threads is freed by the
 * thread that returns the last one. */
struct holder {
    zbuf_t *z;
    pthread_barrier_t *go;
};

static void *late_returner(void *arg)
{
    struct holder *hd = arg;
    pthread_barrier_wait(hd->go);
    zbuf_delete(hd->z);
    zbuf_thread_cache_flush();
    return NULL;
}

THREADS_TEST(pool_deleted_with_buffers_out_is_freed_by_the_last_returner)
{
    zbuf_stats_t st0, st1;
    zbuf_stats_get(&st0);
    pthread_barrier_t go;
    T_OK(pthread_barrier_init(&go, NULL, NTHREADS + 1));
    T_OK(zbuf_pool_create(64, NTHREADS, &pool));
    struct holder hd[NTHREADS];
    pthread_t tid[NTHREADS];
    for (int t = 0; t < NTHREADS; t++) {
        zbuf_buf_t *b;
        T_OK(zbuf_pool_get(pool, &b));
        memset(zbuf_buf_data(b), 'a' + t, 64);
        T_OK(zbuf_create(&hd[t].z));
        T_OK(zbuf_append_ref(hd[t].z, b, 0, 64));
        zbuf_buf_unref(b);
        hd[t].go = &go;
        T_OK(pthread_create(&tid[t], NULL, late_returner, &hd[t]));
    }
    zbuf_pool_delete(pool);
    zbuf_stats_get(&st1);
    T_CHECK(st1.live_pools == st0.live_pools + 1, "the pool is kept while buffers are out");
    pthread_barrier_wait(&go);
    for (int t = 0; t < NTHREADS; t++)
        pthread_join(tid[t], NULL);
    pthread_barrier_destroy(&go);
    zbuf_stats_get(&st1);
    T_CHECK(st1.live_pools == st0.live_pools, "the last returner frees the pool");
    T_CHECK(st1.live_bufs == st0.live_bufs, "pool buffers still counted");
}

/* zbuf_pool_notify_sync() after clearing the callback, and zbuf_pool_delete(),
 * on one thread while a notify callback runs on another: both wait for the
 * call to finish, so the callback's argument can be freed and the pool
 * stays valid in it. */
struct slow_notify {
    atomic_int entered, finished;
    atomic_int go;
};

static void on_slow_refill(zbuf_pool_t *p, void *arg)
{
    struct slow_notify *n = arg;
    atomic_store(&n->entered, 1);
    while (!atomic_load(&n->go)) /* hold the call open until the main thread acts */
        sched_yield();
    for (int i = 0; i < 1000; i++) /* and a little longer */
        sched_yield();
    (void)zbuf_pool_available(p);  /* the pool must still be valid */
    atomic_store(&n->finished, 1);
}

struct returner {
    zbuf_buf_t *buf;
};

static void *return_buffer(void *arg)
{
    struct returner *r = arg;
    zbuf_buf_unref(r->buf); /* runs the notify callback on this thread */
    zbuf_thread_cache_flush();
    return NULL;
}

static void run_slow_notify(bool delete_pool)
{
    zbuf_pool_t *p;
    T_OK(zbuf_pool_create(64, 1, &p));
    struct slow_notify *n = calloc(1, sizeof *n);
    T_OK(zbuf_pool_set_notify(p, on_slow_refill, n));
    struct returner r;
    T_OK(zbuf_pool_get(p, &r.buf));
    pthread_t th;
    T_OK(pthread_create(&th, NULL, return_buffer, &r));
    while (!atomic_load(&n->entered))
        sched_yield();
    atomic_store(&n->go, 1);
    if (delete_pool)
        zbuf_pool_delete(p); /* waits for the call; then frees the pool */
    else
        T_OK(zbuf_pool_set_notify(p, NULL, NULL) || zbuf_pool_notify_sync(p));
    T_CHECK(atomic_load(&n->finished) == 1, "returned while the callback still ran");
    free(n); /* safe now: no call can use it any more */
    T_OK(pthread_join(th, NULL));
    if (!delete_pool)
        zbuf_pool_delete(p);
}

THREADS_TEST(clearing_or_deleting_waits_for_a_notify_call_on_another_thread)
{
    run_slow_notify(false);
    run_slow_notify(true);
}

#ifdef ZT_UNDER_TSAN
/* The runner of the TSan build (see the file comment).  Arguments meant for
 * Criterion (--jobs 1 --ascii) are ignored. */
int main(void)
{
    static const zt_tsan_case_t tests[] = {
        {"shared_buffers_are_released_exactly_once_on_any_thread",
         shared_buffers_are_released_exactly_once_on_any_thread},
        {"one_buffer_referenced_from_every_thread_counts_exactly",
         one_buffer_referenced_from_every_thread_counts_exactly},
        {"pool_buffers_come_back_from_other_threads", pool_buffers_come_back_from_other_threads},
        {"pool_deleted_with_buffers_out_is_freed_by_the_last_returner",
         pool_deleted_with_buffers_out_is_freed_by_the_last_returner},
        {"clearing_or_deleting_waits_for_a_notify_call_on_another_thread",
         clearing_or_deleting_waits_for_a_notify_call_on_another_thread},
    };
    return zt_tsan_run("threads", tests, sizeof tests / sizeof tests[0]);
}
#endif
