/* SPDX-License-Identifier: MIT */
/*
 * Pool exhaustion across threads: the zbufs a paused reader received are
 * deleted on another thread, whose return of the last reference runs the
 * pool's notify callback there; the adapter must wake the reader's loop
 * (uv_async_send()) and resume it on the loop's thread.  Also two loops on
 * two threads reading from one shared pool, with buffers coming back on a
 * third.
 *
 * These tests carry the CTest label "threads" (the file name) and run under
 * ThreadSanitizer in CI.  Criterion cannot start under TSan (see
 * test/test_threads.c), so, like that file, a TSan build has its own main()
 * that runs the same tests in order and exits non-zero on the first failed
 * check.  Checks on the loop threads are recorded and asserted by the main
 * thread afterwards; nothing here uses the Criterion-based helpers of uvt.c
 * except the pure data functions.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "uvt.h"

#include "zt_tsan.h"

#ifndef ZT_UNDER_TSAN
ZT_SUITE(uv_pause_thread);
#endif
#define PAUSE_TEST(name) ZT_TSAN_TEST(uv_pause_thread, name)

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* ------------------------------------------------------------ releaser */

/* A thread that deletes the zbufs handed to it, in batches. */
struct releaser {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    zbuf_t **q;
    size_t n, cap;
    bool stop;
    long hold_first_us; /* keep the first batch this long */
    long per_batch_us;  /* pause after each batch, so that the pool runs dry */
    unsigned spin_ns;   /* if not 0: poll the queue, and busy-wait a random
                         * 0..spin_ns before each batch */
    size_t min_batch;   /* wait for this many zbufs (until stopped) */
    pthread_t tid;
};

static void *releaser_main(void *arg)
{
    struct releaser *r = arg;
    zbuf_t **batch = NULL;
    size_t cap = 0;
    bool first = true;
    uint32_t rng = 2463534242u;
    for (;;) {
        pthread_mutex_lock(&r->lock);
        while ((r->n == 0 || r->n < r->min_batch) && !r->stop) {
            if (r->spin_ns == 0) {
                pthread_cond_wait(&r->cond, &r->lock);
            } else { /* poll: pick each zbuf up within a fraction of a microsecond */
                pthread_mutex_unlock(&r->lock);
                sched_yield();
                pthread_mutex_lock(&r->lock);
            }
        }
        size_t n = r->n;
        if (n == 0) {
            pthread_mutex_unlock(&r->lock);
            break;
        }
        if (n > cap) {
            cap = r->cap;
            if ((batch = realloc(batch, cap * sizeof(*batch))) == NULL)
                abort(); /* the test cannot go on; the crash names the line */
        }
        memcpy(batch, r->q, n * sizeof(*batch));
        r->n = 0;
        pthread_mutex_unlock(&r->lock);
        if (first && r->hold_first_us > 0)
            sleep_us(r->hold_first_us);
        if (r->spin_ns > 0) {
            rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5;
            for (uint64_t until = uv_hrtime() + rng % r->spin_ns; uv_hrtime() < until;)
                ;
        }
        first = false;
        for (size_t i = 0; i < n; i++)
            zbuf_delete(batch[i]); /* the notify callback runs here */
        if (r->per_batch_us > 0)
            sleep_us(r->per_batch_us);
    }
    free(batch);
    zbuf_thread_cache_flush();
    return NULL;
}

static void releaser_start_batched(struct releaser *r, long hold_first_us, long per_batch_us,
                                   unsigned spin_ns, size_t min_batch)
{
    memset(r, 0, sizeof(*r));
    r->min_batch = min_batch;
    T_OK(pthread_mutex_init(&r->lock, NULL));
    T_OK(pthread_cond_init(&r->cond, NULL));
    r->hold_first_us = hold_first_us;
    r->per_batch_us = per_batch_us;
    r->spin_ns = spin_ns;
    T_OK(pthread_create(&r->tid, NULL, releaser_main, r));
}

static void releaser_start(struct releaser *r, long hold_first_us, long per_batch_us,
                           unsigned spin_ns)
{
    releaser_start_batched(r, hold_first_us, per_batch_us, spin_ns, 1);
}

/* Hand z over; false if memory ran out (z is then the caller's). */
static bool releaser_give(struct releaser *r, zbuf_t *z)
{
    bool ok = true;
    pthread_mutex_lock(&r->lock);
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 256;
        zbuf_t **q = realloc(r->q, cap * sizeof(*q));
        if (q == NULL)
            ok = false;
        else {
            r->q = q;
            r->cap = cap;
        }
    }
    if (ok) {
        r->q[r->n++] = z;
        pthread_cond_signal(&r->cond);
    }
    pthread_mutex_unlock(&r->lock);
    return ok;
}

static void releaser_stop(struct releaser *r)
{
    pthread_mutex_lock(&r->lock);
    r->stop = true;
    pthread_cond_signal(&r->cond);
    pthread_mutex_unlock(&r->lock);
    pthread_join(r->tid, NULL);
    free(r->q);
    pthread_cond_destroy(&r->cond);
    pthread_mutex_destroy(&r->lock);
}

/* -------------------------------------------------------------- reader */

/* One loop with a Unix socketpair: `want` bytes of stream `seed` written on
 * a, read on b from `pool`, every zbuf handed to `rel` once checked. */
struct reader {
    uv_loop_t loop;
    zbuf_uv_stream_t a, b;
    uv_prepare_t prep;
    uv_timer_t bound;
    zbuf_pool_t *pool;
    struct releaser *rel;
    uint32_t seed;
    size_t want, len;
    size_t limit;            /* the stream's read limit, 0: none */
    int enobufs, errors, closed;
    int iters;               /* loop iterations (prepare callbacks) */
    int pause_iter;          /* iters at the first UV_ENOBUFS, -1 before */
    int resume_iter;         /* iters at the first read after it, -1 before */
    uint64_t pause_ns, resume_ns;
    char failure[200];       /* the first problem seen on the loop thread */
};

static void fail_on_loop(struct reader *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void fail_on_loop(struct reader *r, const char *fmt, ...)
{
    if (r->failure[0] != '\0')
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->failure, sizeof(r->failure), fmt, ap);
    va_end(ap);
}

static void reader_closed(uv_handle_t *h)
{
    struct reader *r = h->data;
    r->closed++;
}

static void reader_finish(struct reader *r)
{
    if (uv_is_closing((uv_handle_t *)&r->prep))
        return;
    zbuf_uv_close(&r->a, reader_closed);
    zbuf_uv_close(&r->b, reader_closed);
    uv_close((uv_handle_t *)&r->prep, reader_closed);
    uv_close((uv_handle_t *)&r->bound, reader_closed);
}

static void reader_read(zbuf_uv_stream_t *s, ssize_t status, zbuf_t *z)
{
    struct reader *r = s->handle.data;
    if (status == UV_ENOBUFS) {
        if (r->enobufs++ == 0) {
            r->pause_iter = r->iters;
            r->pause_ns = uv_hrtime();
        }
        return;
    }
    if (status < 0) {
        r->errors++;
        fail_on_loop(r, "read error %s", uv_err_name((int)status));
        reader_finish(r);
        return;
    }
    if (r->limit > 0 && zbuf_uv_read_held(s) > r->limit)
        fail_on_loop(r, "holds %zu buffers, limit %zu", zbuf_uv_read_held(s), r->limit);
    if (r->pause_iter >= 0 && r->resume_iter < 0) {
        r->resume_iter = r->iters;
        r->resume_ns = uv_hrtime();
    }
    uint8_t tmp[4096];
    for (size_t off = 0; off < (size_t)status;) {
        size_t n = (size_t)status - off < sizeof(tmp) ? (size_t)status - off : sizeof(tmp);
        if (zbuf_copyout(z, off, tmp, n) != (ssize_t)n)
            fail_on_loop(r, "copyout failed");
        for (size_t i = 0; i < n; i++)
            if (tmp[i] != uvt_byte(r->seed, r->len + off + i))
                fail_on_loop(r, "byte %zu of stream %u differs", r->len + off + i, r->seed);
        off += n;
    }
    r->len += (size_t)status;
    if (!releaser_give(r->rel, z)) {
        zbuf_delete(z);
        fail_on_loop(r, "out of memory");
    }
    if (r->len >= r->want || r->failure[0] != '\0')
        reader_finish(r);
}

static void reader_prepare(uv_prepare_t *h)
{
    ((struct reader *)h->data)->iters++;
}

static void reader_timeout(uv_timer_t *h)
{
    struct reader *r = h->data;
    fail_on_loop(r, "timed out at %zu of %zu bytes, %s", r->len, r->want,
                 zbuf_uv_read_paused(&r->b) ? "paused" : "not paused");
    reader_finish(r);
}

static void free_release(void *data, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    free(data);
}

/* Set up r on its loop and queue the write; false (and r->failure) on error. */
static bool reader_open_limited(struct reader *r, zbuf_pool_t *pool, struct releaser *rel,
                                uint32_t seed, size_t want, size_t limit)
{
    int fds[2];
    memset(r, 0, sizeof(*r));
    r->limit = limit;
    r->pool = pool;
    r->rel = rel;
    r->seed = seed;
    r->want = want;
    r->pause_iter = r->resume_iter = -1;
    if (uv_loop_init(&r->loop) != 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0 ||
        uv_pipe_init(&r->loop, &r->a.pipe, 0) != 0 || uv_pipe_init(&r->loop, &r->b.pipe, 0) != 0 ||
        uv_pipe_open(&r->a.pipe, fds[0]) != 0 || uv_pipe_open(&r->b.pipe, fds[1]) != 0 ||
        zbuf_uv_stream_init(&r->a) != 0 || zbuf_uv_stream_init(&r->b) != 0 ||
        uv_prepare_init(&r->loop, &r->prep) != 0 || uv_timer_init(&r->loop, &r->bound) != 0) {
        fail_on_loop(r, "setup failed");
        return false;
    }
    r->a.handle.data = r->b.handle.data = r->prep.data = r->bound.data = r;
    uv_prepare_start(&r->prep, reader_prepare);
    uv_timer_start(&r->bound, reader_timeout, 20000, 0);
    uv_unref((uv_handle_t *)&r->prep);

    /* The data: 64 KiB enrolled buffers. */
    zbuf_t *z;
    if (zbuf_create(&z) != 0) {
        fail_on_loop(r, "zbuf_create failed");
        return false;
    }
    for (size_t done = 0; done < want;) {
        size_t n = want - done < 65536 ? want - done : 65536;
        uint8_t *p = malloc(n);
        if (p == NULL || zbuf_append_buf(z, p, n, free_release, NULL) != 0) {
            free(p);
            zbuf_delete(z);
            fail_on_loop(r, "out of memory");
            return false;
        }
        uvt_fill(p, n, seed, done);
        done += n;
    }
    if (zbuf_uv_write(&r->a.stream, z, NULL, NULL) != 0 ||
        (limit > 0 && zbuf_uv_read_set_limit(&r->b, limit) != 0) ||
        zbuf_uv_read_start(&r->b, pool, reader_read) != 0) {
        fail_on_loop(r, "write or read start failed");
        return false;
    }
    return true;
}

static bool reader_open(struct reader *r, zbuf_pool_t *pool, struct releaser *rel, uint32_t seed,
                        size_t want)
{
    return reader_open_limited(r, pool, rel, seed, want, 0);
}

/* Run r's loop to the end (every handle closed) and close it. */
static void *reader_run(void *arg)
{
    struct reader *r = arg;
    uv_run(&r->loop, UV_RUN_DEFAULT);
    if (uv_loop_close(&r->loop) != 0)
        fail_on_loop(r, "uv_loop_close: handles left open");
    zbuf_thread_cache_flush();
    return NULL;
}

static void reader_expect(const struct reader *r)
{
    T_CHECK(r->failure[0] == '\0', "stream %u: %s", r->seed, r->failure);
    T_CHECK(r->len == r->want, "stream %u: %zu of %zu bytes", r->seed, r->len, r->want);
    T_CHECK(r->errors == 0, "stream %u: read errors", r->seed);
    T_CHECK(r->closed == 4, "stream %u: %d close callbacks, 4 expected", r->seed, r->closed);
}

/* ---------------------------------------------------------------- tests */

PAUSE_TEST(buffers_given_back_on_another_thread_wake_the_sleeping_loop)
{
    zbuf_pool_t *pool;
    struct releaser rel;
    static struct reader r;
    T_OK(zbuf_pool_create(4096, 4, &pool));
    releaser_start(&rel, 200000, 100, 0); /* the first pause lasts 200 ms */
    T_CHECK(reader_open(&r, pool, &rel, 7, 4u << 20), "%s", r.failure);
    reader_run(&r);
    releaser_stop(&rel);
    reader_expect(&r);
    T_CHECK(r.enobufs > 0, "the pool never ran dry");
    T_CHECK(r.resume_iter >= 0, "no read after the first pause");
    double ms = (double)(r.resume_ns - r.pause_ns) / 1e6;
    T_INFO("%d pauses; the first lasted %.1f ms and %d loop iterations", r.enobufs, ms,
           r.resume_iter - r.pause_iter);
    T_CHECK(ms >= 150, "the first pause lasted %.1f ms only", ms);
    /* 1 ms polling would have taken about 200 iterations. */
    T_CHECK(r.resume_iter - r.pause_iter <= 3, "%d loop iterations while paused",
            r.resume_iter - r.pause_iter);
    T_CHECK(zbuf_pool_available(pool) == 4, "buffers home");
    zbuf_pool_delete(pool);
}

PAUSE_TEST(loops_on_two_threads_share_one_pool)
{
    zbuf_pool_t *pool;
    struct releaser rel;
    static struct reader r[2];
    pthread_t tid[2];
    T_OK(zbuf_pool_create(4096, 4, &pool));
    releaser_start(&rel, 0, 50, 0);
    for (int i = 0; i < 2; i++)
        T_CHECK(reader_open(&r[i], pool, &rel, 20 + (uint32_t)i, 2u << 20), "%s", r[i].failure);
    for (int i = 0; i < 2; i++)
        T_OK(pthread_create(&tid[i], NULL, reader_run, &r[i]));
    for (int i = 0; i < 2; i++)
        pthread_join(tid[i], NULL);
    releaser_stop(&rel);
    for (int i = 0; i < 2; i++) {
        reader_expect(&r[i]);
        T_INFO("loop %d: %d pauses, %d iterations", i, r[i].enobufs, r[i].iters);
    }
    T_CHECK(r[0].enobufs + r[1].enobufs > 0, "the pool never ran dry");
    T_CHECK(zbuf_pool_available(pool) == 4, "buffers home");
    zbuf_pool_delete(pool);
}

PAUSE_TEST(returns_racing_the_pause_never_strand_a_reader)
{
    /* One small buffer, given back by a thread that polls for it and
     * returns it within a random 0-800 ns: many returns land between the
     * adapter's failed zbuf_pool_get() and its registration as a paused
     * reader, where no notification reaches it; the re-check after
     * registering must catch them, or the transfer stalls until the time
     * bound (without the re-check it stalled in 4 runs out of 4). */
    zbuf_pool_t *pool;
    struct releaser rel;
    static struct reader r;
    T_OK(zbuf_pool_create(256, 1, &pool));
    releaser_start(&rel, 0, 0, 800); /* returns spread over the loop's path */
    T_CHECK(reader_open(&r, pool, &rel, 9, 8u << 20), "%s", r.failure);
    reader_run(&r);
    releaser_stop(&rel);
    reader_expect(&r);
    T_INFO("%d pauses", r.enobufs);
    T_CHECK(r.enobufs > 100, "only %d pauses", r.enobufs);
    zbuf_pool_delete(pool);
}

PAUSE_TEST(a_stream_at_its_limit_is_woken_by_its_buffers_coming_back_on_another_thread)
{
    /* A limit of 2 in a pool of 8: the stream pauses on its own quota,
     * never on the pool, and the quota's callback (on the releasing
     * thread) wakes its loop.  Returns racing the pause are caught as for
     * the pool. */
    zbuf_pool_t *pool;
    struct releaser rel;
    static struct reader r;
    T_OK(zbuf_pool_create(4096, 8, &pool));
    /* The releaser waits until the stream holds its limit, so the stream
     * reaches it whatever the speed of the two threads (a releaser that
     * gave each zbuf back at once kept a stream on two idle cores below the
     * limit almost always: 1-4 pauses in 4 MiB). */
    releaser_start_batched(&rel, 0, 0, 800, 2);
    T_CHECK(reader_open_limited(&r, pool, &rel, 11, 4u << 20, 2), "%s", r.failure);
    reader_run(&r);
    releaser_stop(&rel);
    reader_expect(&r);
    T_INFO("%d pauses at the limit", r.enobufs);
    T_CHECK(r.enobufs > 10, "only %d pauses", r.enobufs);
    T_CHECK(zbuf_pool_available(pool) == 8, "buffers home");
    zbuf_pool_delete(pool);
}

/* Idle holdings on one loop, given back to a reader of another: loop A
 * reads a few bytes on each of POOL_N streams, keeps the zbufs past the
 * read callback and deletes them later (a timer), so every buffer of the
 * pool is kept idle by A's streams; then a reader on loop B, another
 * thread, finds the pool dry and must be served. */
#define POOL_N 3

struct holder_loop {
    uv_loop_t loop;
    zbuf_uv_stream_t a[POOL_N], b[POOL_N];
    zbuf_t *held[POOL_N];
    int got, closed;
    uv_timer_t tick;
    zbuf_pool_t *pool;
    atomic_int idle_ready; /* A's buffers are all kept idle */
    atomic_int done;       /* B has read its bytes: A may finish */
    char failure[200];
};

static void holder_read(zbuf_uv_stream_t *s, ssize_t status, zbuf_t *z)
{
    struct holder_loop *h = s->handle.data;
    if (status <= 0) {
        if (status != UV_ENOBUFS && h->failure[0] == '\0')
            snprintf(h->failure, sizeof(h->failure), "holder read %zd", status);
        return;
    }
    h->held[h->got++] = z; /* kept past the callback */
}

static void holder_closed(uv_handle_t *hd)
{
    ((struct holder_loop *)hd->data)->closed++;
}

static void holder_tick(uv_timer_t *t)
{
    struct holder_loop *h = t->data;
    if (h->got == POOL_N && !atomic_load(&h->idle_ready)) {
        for (int i = 0; i < POOL_N; i++)
            zbuf_delete(h->held[i]); /* outside the read callback: kept idle */
        atomic_store(&h->idle_ready, 1);
    }
    if (atomic_load(&h->done)) {
        uv_close((uv_handle_t *)&h->tick, holder_closed);
        for (int i = 0; i < POOL_N; i++) {
            zbuf_uv_close(&h->a[i], holder_closed);
            zbuf_uv_close(&h->b[i], holder_closed);
        }
    }
}

static void *holder_run(void *arg)
{
    struct holder_loop *h = arg;
    uv_run(&h->loop, UV_RUN_DEFAULT);
    if (uv_loop_close(&h->loop) != 0 && h->failure[0] == '\0')
        snprintf(h->failure, sizeof(h->failure), "holder loop: handles left open");
    zbuf_thread_cache_flush();
    return NULL;
}

PAUSE_TEST(idle_buffers_kept_on_one_loop_are_given_back_to_a_reader_of_another)
{
    zbuf_pool_t *pool;
    static struct holder_loop h;
    static struct reader r;
    struct releaser rel;
    memset(&h, 0, sizeof(h));
    T_OK(zbuf_pool_create(4096, POOL_N, &pool));
    h.pool = pool;
    T_OK(uv_loop_init(&h.loop));
    for (int i = 0; i < POOL_N; i++) {
        int fds[2];
        T_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, fds));
        T_OK(uv_pipe_init(&h.loop, &h.a[i].pipe, 0));
        T_OK(uv_pipe_init(&h.loop, &h.b[i].pipe, 0));
        T_OK(uv_pipe_open(&h.a[i].pipe, fds[0]));
        T_OK(uv_pipe_open(&h.b[i].pipe, fds[1]));
        T_OK(zbuf_uv_stream_init(&h.a[i]));
        T_OK(zbuf_uv_stream_init(&h.b[i]));
        h.a[i].handle.data = h.b[i].handle.data = &h;
        T_OK(zbuf_uv_read_start(&h.b[i], pool, holder_read));
        zbuf_t *z;
        T_OK(zbuf_create(&z));
        T_OK(zbuf_append_copy(z, "ten bytes!", 10));
        T_OK(zbuf_uv_write(&h.a[i].stream, z, NULL, NULL));
    }
    T_OK(uv_timer_init(&h.loop, &h.tick));
    h.tick.data = &h;
    T_OK(uv_timer_start(&h.tick, holder_tick, 1, 1));
    pthread_t ta;
    T_OK(pthread_create(&ta, NULL, holder_run, &h));
    for (int i = 0; i < 20000 && !atomic_load(&h.idle_ready); i++)
        sleep_us(1000);
    T_CHECK(atomic_load(&h.idle_ready), "loop A never read its bytes: %s", h.failure);
    T_CHECK(zbuf_pool_available(pool) == 0, "A keeps every buffer idle");

    releaser_start(&rel, 0, 0, 0);
    T_CHECK(reader_open(&r, pool, &rel, 13, 64u << 10), "%s", r.failure);
    reader_run(&r); /* on this thread: loop B */
    releaser_stop(&rel);
    atomic_store(&h.done, 1);
    pthread_join(ta, NULL);
    reader_expect(&r);
    T_CHECK(h.failure[0] == '\0', "%s", h.failure);
    T_CHECK(h.closed == 1 + 2 * POOL_N, "holder loop: %d closes", h.closed);
    T_CHECK(zbuf_pool_available(pool) == POOL_N, "buffers home");
    zbuf_pool_delete(pool);
}

#ifdef ZT_UNDER_TSAN
/* The runner of the TSan build (see the file comment).  Arguments meant for
 * Criterion (--jobs 1 --ascii) are ignored. */
int main(void)
{
    static const zt_tsan_case_t tests[] = {
        {"buffers_given_back_on_another_thread_wake_the_sleeping_loop",
         buffers_given_back_on_another_thread_wake_the_sleeping_loop},
        {"loops_on_two_threads_share_one_pool", loops_on_two_threads_share_one_pool},
        {"returns_racing_the_pause_never_strand_a_reader",
         returns_racing_the_pause_never_strand_a_reader},
        {"a_stream_at_its_limit_is_woken_by_its_buffers_coming_back_on_another_thread",
         a_stream_at_its_limit_is_woken_by_its_buffers_coming_back_on_another_thread},
        {"idle_buffers_kept_on_one_loop_are_given_back_to_a_reader_of_another",
         idle_buffers_kept_on_one_loop_are_given_back_to_a_reader_of_another},
    };
    return zt_tsan_run("uv_pause_thread", tests, sizeof tests / sizeof tests[0]);
}
#endif
