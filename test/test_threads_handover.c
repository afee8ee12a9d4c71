/* SPDX-License-Identifier: MIT */
/*
 * Biased reference counting across threads: the hand-over cases.
 *
 * A buffer is counted without atomics by the thread that made it (its
 * owner) until another thread takes or drops a reference while the owner
 * may still hold some; the count then moves to an atomic counter once and
 * for good (lib/buf.c).  Whatever path a reference takes, the release rule
 * must not change: the release callback (or pool return, or VxWorks free
 * routine) runs exactly once, on the thread that drops the last reference,
 * inside that call.  Every callback here records how often it ran, on which
 * test thread, and whether that thread was inside a library call that drops
 * references (`in_call`, set by the test around such calls).
 *
 * The cases: the owner thread exits while other threads hold references;
 * the last reference dropped on a thread that is not the owner, in either
 * order and racing; pool buffers taken on one thread and returned on others;
 * two-word release callbacks (the VxWorks layer's free routines have their
 * own test in adapters/vxworks/test/test_threads.c); the owner counting on while other
 * threads force the conversion; the differential model (test/model.c) with
 * its steps run on changing threads; and fork() while another thread is in
 * the middle of a count update.
 *
 * These tests carry the CTest label "threads" and run under ThreadSanitizer
 * in CI (see test/zt_tsan.h for why the TSan build has its own main()).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"
#include "support.h"
#include "zt_tsan.h"

#include "model.c"

#ifndef ZT_UNDER_TSAN
ZT_SUITE(handover);
#endif
#define HANDOVER_TEST(name) ZT_TSAN_TEST(handover, name)

/* Which test thread runs (1, 2, ...; 0 for the main thread), and whether it
 * is inside a library call that may drop a last reference. */
static __thread int tid;
static __thread int in_call;

/* What a release callback saw. */
struct seen {
    atomic_int runs;   /* times it ran */
    atomic_int thread; /* tid of the thread it ran on */
    atomic_int inside; /* that thread was inside a dropping call */
};

static void seen_note(struct seen *s)
{
    atomic_store(&s->thread, tid);
    atomic_store(&s->inside, in_call);
    atomic_fetch_add(&s->runs, 1);
}

static void seen_release(void *data, size_t size, void *arg)
{
    (void)data;
    (void)size;
    seen_note(arg);
}

/* zbuf_delete() marked as a dropping call. */
static void drop(zbuf_t *z)
{
    in_call = 1;
    T_OK(zbuf_delete(z));
    in_call = 0;
}

static void check_once(struct seen *s, int want_thread, const char *what)
{
    T_CHECK(atomic_load(&s->runs) == 1, "%s: released %d times", what, atomic_load(&s->runs));
    T_CHECK(atomic_load(&s->inside) == 1, "%s: released outside the dropping call", what);
    if (want_thread >= 0)
        T_CHECK(atomic_load(&s->thread) == want_thread, "%s: released on thread %d, not %d",
                what, atomic_load(&s->thread), want_thread);
}

/* A zbuf of `n` caller buffers, each with its own `seen`. */
#define NB 4
static uint8_t mem[NB][256];

static zbuf_t *make_msg(struct seen *s)
{
    zbuf_t *z;
    T_OK(zbuf_create(&z));
    for (int k = 0; k < NB; k++) {
        memset(mem[k], 'a' + k, sizeof mem[k]);
        T_OK(zbuf_append_buf(z, mem[k], sizeof mem[k], seen_release, &s[k]));
    }
    return z;
}

/* Check the bytes of a zbuf made by make_msg() (or a dup of all of it). */
static void check_msg(zbuf_t *z)
{
    uint8_t b[NB * 256];
    T_CHECK(zbuf_copyout(z, 0, b, sizeof b) == (ssize_t)sizeof b, "short message");
    for (int k = 0; k < NB; k++)
        T_CHECK(b[k * 256] == 'a' + k && b[k * 256 + 255] == 'a' + k, "wrong bytes");
}

/* ====================================================== the owner exits */

struct exiting_owner {
    struct seen seen[NB];
    zbuf_t *z[3]; /* made on the owner thread, which then exits */
};

static void *make_and_exit(void *arg)
{
    struct exiting_owner *e = arg;
    tid = 1;
    zbuf_t *z = make_msg(e->seen);
    e->z[0] = z;
    T_OK(zbuf_dup(z, 0, ZBUF_TO_END, &e->z[1]));
    T_OK(zbuf_dup(z, 100, 500, &e->z[2]));
    return NULL; /* the thread's record goes back to the free list */
}

struct worker_arg {
    zbuf_t *z;
    int id;
    pthread_barrier_t *go;
};

/* Work on a zbuf of the exited owner's buffers, then drop it. */
static void *work_and_drop(void *arg)
{
    struct worker_arg *w = arg;
    tid = w->id;
    zbuf_t *d, *t;
    for (int i = 0; i < 50; i++) {
        T_OK(zbuf_dup(w->z, 0, ZBUF_TO_END, &d));
        if (zbuf_length(d) > 10)
            T_OK(zbuf_split(d, zbuf_length(d) / 2, &t));
        else
            T_OK(zbuf_create(&t));
        drop(t);
        drop(d);
    }
    pthread_barrier_wait(w->go);
    drop(w->z);
    return NULL;
}

HANDOVER_TEST(owner_thread_exits_while_others_hold_references)
{
    struct exiting_owner e;
    memset(&e, 0, sizeof e);
    pthread_t th;
    T_OK(pthread_create(&th, NULL, make_and_exit, &e));
    T_OK(pthread_join(th, NULL));
    check_msg(e.z[0]);
    check_msg(e.z[1]);
    for (int k = 0; k < NB; k++)
        T_CHECK(atomic_load(&e.seen[k].runs) == 0, "released while still referenced");

    /* Three threads share the exited owner's buffers, then drop them at
     * once: each buffer is released once, by whichever drops it last. */
    pthread_barrier_t go;
    T_OK(pthread_barrier_init(&go, NULL, 3));
    struct worker_arg w[3];
    pthread_t wt[3];
    for (int i = 0; i < 3; i++) {
        w[i] = (struct worker_arg){e.z[i], 10 + i, &go};
        T_OK(pthread_create(&wt[i], NULL, work_and_drop, &w[i]));
    }
    for (int i = 0; i < 3; i++)
        T_OK(pthread_join(wt[i], NULL));
    pthread_barrier_destroy(&go);
    for (int k = 0; k < NB; k++) {
        check_once(&e.seen[k], -1, "buffer of an exited owner");
        int t = atomic_load(&e.seen[k].thread);
        T_CHECK(t >= 10 && t <= 12, "released on thread %d, not one of the droppers", t);
    }
}

/* A new thread takes over the exited thread's record, and with it the
 * buffers still biased to it: it must count them correctly on its fast path. */
static void *make_keep(void *arg)
{
    struct exiting_owner *e = arg;
    tid = 1;
    e->z[0] = make_msg(e->seen);
    return NULL;
}

static void *dup_and_drop_all(void *arg)
{
    struct exiting_owner *e = arg;
    tid = 2;
    zbuf_t *d[8];
    for (int i = 0; i < 8; i++)
        T_OK(zbuf_dup(e->z[0], 0, ZBUF_TO_END, &d[i]));
    for (int i = 0; i < 8; i++)
        drop(d[i]);
    for (int k = 0; k < NB; k++)
        T_CHECK(atomic_load(&e->seen[k].runs) == 0, "released with a reference left");
    drop(e->z[0]);
    return NULL;
}

HANDOVER_TEST(a_later_thread_counts_buffers_of_an_exited_one)
{
    for (int round = 0; round < 20; round++) {
        struct exiting_owner e;
        memset(&e, 0, sizeof e);
        pthread_t th;
        T_OK(pthread_create(&th, NULL, make_keep, &e));
        T_OK(pthread_join(th, NULL));
        T_OK(pthread_create(&th, NULL, dup_and_drop_all, &e));
        T_OK(pthread_join(th, NULL));
        for (int k = 0; k < NB; k++)
            check_once(&e.seen[k], 2, "buffer of an exited owner, dropped by its successor");
    }
}

/* ============================ the last reference dropped elsewhere */

struct pair {
    struct seen seen[NB];
    zbuf_t *mine, *theirs;
    pthread_barrier_t b1, b2;
    int order; /* 0: owner drops first, 1: the other first, 2: at once */
};

static void *other_side(void *arg)
{
    struct pair *p = arg;
    tid = 2;
    pthread_barrier_wait(&p->b1); /* handed over */
    check_msg(p->theirs);
    if (p->order == 0)
        pthread_barrier_wait(&p->b2); /* the owner drops first */
    else if (p->order == 2)
        pthread_barrier_wait(&p->b2); /* both at once */
    drop(p->theirs);
    if (p->order == 1)
        pthread_barrier_wait(&p->b2);
    return NULL;
}

static void run_pair(int order, int rounds)
{
    zbuf__bias_set_share_credit(0); /* every round's buffers start biased */
    uint64_t conv0 = zbuf__bias_conversions();
    for (int r = 0; r < rounds; r++) {
        struct pair p;
        memset(&p, 0, sizeof p);
        p.order = order;
        T_OK(pthread_barrier_init(&p.b1, NULL, 2));
        T_OK(pthread_barrier_init(&p.b2, NULL, 2));
        pthread_t th;
        T_OK(pthread_create(&th, NULL, other_side, &p));
        p.mine = make_msg(p.seen);
        T_OK(zbuf_dup(p.mine, 0, ZBUF_TO_END, &p.theirs));
        pthread_barrier_wait(&p.b1);
        if (order == 1)
            pthread_barrier_wait(&p.b2); /* the other side dropped */
        else if (order == 2)
            pthread_barrier_wait(&p.b2);
        drop(p.mine);
        if (order == 0)
            pthread_barrier_wait(&p.b2);
        T_OK(pthread_join(th, NULL));
        pthread_barrier_destroy(&p.b1);
        pthread_barrier_destroy(&p.b2);
        for (int k = 0; k < NB; k++)
            check_once(&p.seen[k], order == 0 ? 2 : order == 1 ? 0 : -1,
                       order == 0   ? "owner dropped first"
                       : order == 1 ? "the other thread dropped first"
                                    : "both dropped at once");
    }
    zbuf__bias_set_share_credit(64);
    /* The other thread dropping while the owner still holds references is
     * what converts; dropping after the owner is a hand-over of the only one. */
    if (zbuf__bias_enabled() && order == 1)
        T_CHECK(zbuf__bias_conversions() > conv0, "no buffer was converted to shared counting");
}

/* A thread that keeps handing new buffers to another thread while it holds
 * references to them has them converted one after the other; after the
 * second message its next buffers start shared, with no conversion at all
 * (and one long-lived buffer converted once gives no such credit). */
HANDOVER_TEST(a_thread_that_keeps_sharing_new_buffers_makes_them_shared)
{
    zbuf__bias_set_share_credit(64);
    if (!zbuf__bias_enabled())
        return;
    uint64_t conv[4];
    for (int r = 0; r < 4; r++) {
        conv[r] = zbuf__bias_conversions();
        struct pair p;
        memset(&p, 0, sizeof p);
        p.order = 1; /* the other thread drops while this one holds: converts */
        T_OK(pthread_barrier_init(&p.b1, NULL, 2));
        T_OK(pthread_barrier_init(&p.b2, NULL, 2));
        pthread_t th;
        T_OK(pthread_create(&th, NULL, other_side, &p));
        p.mine = make_msg(p.seen);
        T_OK(zbuf_dup(p.mine, 0, ZBUF_TO_END, &p.theirs));
        pthread_barrier_wait(&p.b1);
        pthread_barrier_wait(&p.b2);
        drop(p.mine);
        T_OK(pthread_join(th, NULL));
        pthread_barrier_destroy(&p.b1);
        pthread_barrier_destroy(&p.b2);
        for (int k = 0; k < NB; k++)
            check_once(&p.seen[k], 0, "message handed over while held");
    }
    uint64_t now = zbuf__bias_conversions();
    T_CHECK(conv[1] - conv[0] == NB && conv[2] - conv[1] == NB,
            "the first two messages are converted buffer by buffer (%llu, %llu)",
            (unsigned long long)(conv[1] - conv[0]), (unsigned long long)(conv[2] - conv[1]));
    T_CHECK(now - conv[2] == 0, "later messages still converted (%llu)",
            (unsigned long long)(now - conv[2]));
}

HANDOVER_TEST(last_reference_dropped_on_a_thread_that_is_not_the_owner)
{
    run_pair(0, 20);
}

HANDOVER_TEST(last_reference_dropped_on_the_owner_after_another_thread)
{
    run_pair(1, 20);
}

HANDOVER_TEST(owner_and_other_thread_drop_at_the_same_time)
{
    run_pair(2, 200);
}

/* ============================================================== pools */

struct pool_case {
    zbuf_pool_t *pool;
    zbuf_t *z;
    pthread_barrier_t b;
    atomic_int notified;
};

static void on_refill(zbuf_pool_t *p, void *arg)
{
    (void)p;
    atomic_fetch_add(&((struct pool_case *)arg)->notified, 1);
}

/* Fill a pool buffer on this thread and hand the zbuf over, keeping nothing. */
static void *fill_and_hand_over(void *arg)
{
    struct pool_case *c = arg;
    tid = 1;
    zbuf_buf_t *b;
    T_OK(zbuf_pool_get(c->pool, &b));
    memset(zbuf_buf_data(b), 'p', 128);
    T_OK(zbuf_create(&c->z));
    T_OK(zbuf_append_ref(c->z, b, 0, 128));
    zbuf_buf_unref(b);
    return NULL;
}

HANDOVER_TEST(pool_buffers_filled_on_one_thread_return_from_another)
{
    struct pool_case c;
    memset(&c, 0, sizeof c);
    T_OK(zbuf_pool_create(128, 1, &c.pool));
    T_OK(zbuf_pool_set_notify(c.pool, on_refill, &c));
    /* This thread gets its own record first (making a buffer does that), so
     * that it does not inherit the exiting thread's on its first hand-over. */
    zbuf_buf_t *own;
    T_OK(zbuf_buf_alloc(8, &own));
    zbuf_buf_unref(own);
    uint64_t conv0 = zbuf__bias_conversions(), take0 = zbuf__bias_takeovers();
    for (int r = 0; r < 50; r++) {
        pthread_t th;
        T_OK(pthread_create(&th, NULL, fill_and_hand_over, &c));
        T_OK(pthread_join(th, NULL));
        T_CHECK(zbuf_pool_available(c.pool) == 0, "the buffer is out");
        /* Ours alone now: a dup takes the bias over, the deletes return it. */
        zbuf_t *d;
        T_OK(zbuf_dup(c.z, 0, ZBUF_TO_END, &d));
        T_CHECK(zbuf_writable(d, 0, 1) == false, "a shared pool buffer reads writable");
        drop(d);
        T_CHECK(zbuf_writable(c.z, 0, 128), "a pool buffer with one reference is writable");
        drop(c.z);
        T_CHECK(zbuf_pool_available(c.pool) == 1, "the buffer did not come back");
        T_CHECK(atomic_load(&c.notified) == r + 1, "notify ran %d times after %d returns",
                atomic_load(&c.notified), r + 1);
    }
    if (zbuf__bias_enabled()) {
        T_CHECK(zbuf__bias_conversions() == conv0,
                "a hand-over of the only reference converted the buffer");
        T_CHECK(zbuf__bias_takeovers() >= take0 + 50, "the bias was not taken over (%llu)",
                (unsigned long long)(zbuf__bias_takeovers() - take0));
    }
    zbuf_pool_delete(c.pool);
}

static void *share_pool_buffer(void *arg)
{
    struct pool_case *c = arg;
    tid = 2;
    zbuf_t *d;
    pthread_barrier_wait(&c->b); /* c->z made */
    T_OK(zbuf_dup(c->z, 0, ZBUF_TO_END, &d));
    pthread_barrier_wait(&c->b); /* both hold one */
    drop(d);
    return NULL;
}

HANDOVER_TEST(pool_buffer_shared_by_two_threads_returns_once)
{
    struct pool_case c;
    memset(&c, 0, sizeof c);
    zbuf__bias_set_share_credit(0);
    T_OK(zbuf_pool_create(128, 2, &c.pool));
    for (int r = 0; r < 100; r++) {
        T_OK(pthread_barrier_init(&c.b, NULL, 2));
        pthread_t th;
        T_OK(pthread_create(&th, NULL, share_pool_buffer, &c));
        zbuf_buf_t *b;
        T_OK(zbuf_pool_get(c.pool, &b));
        T_OK(zbuf_create(&c.z));
        T_OK(zbuf_append_ref(c.z, b, 0, 128));
        zbuf_buf_unref(b);
        pthread_barrier_wait(&c.b);
        pthread_barrier_wait(&c.b);
        drop(c.z); /* races with the other thread's drop */
        T_OK(pthread_join(th, NULL));
        pthread_barrier_destroy(&c.b);
        T_CHECK(zbuf_pool_available(c.pool) == 2, "round %d: %zu of 2 buffers back", r,
                zbuf_pool_available(c.pool));
    }
    zbuf__bias_set_share_credit(64);
    zbuf_pool_delete(c.pool);
}

/* =========================================== two-word release callbacks */

/* The callback shape of zbuf_insert_buf2() (what the VxWorks free routines
 * of adapters/vxworks ride on; their own test is there). */
struct w2_case {
    char buf[300];
    atomic_int runs, bad, thread, inside;
    zbuf_t *z[2];
    pthread_barrier_t b;
};

static void w2_release(void *data, size_t size, void *arg, void *arg2)
{
    struct w2_case *c = arg;
    if (data != c->buf || size != sizeof c->buf || arg2 != (void *)c->buf)
        atomic_fetch_add(&c->bad, 1);
    atomic_store(&c->thread, tid);
    atomic_store(&c->inside, in_call);
    atomic_fetch_add(&c->runs, 1);
}

static void *w2_dropper(void *arg)
{
    struct w2_case *c = arg;
    zbuf_t *d;
    tid = 2;
    pthread_barrier_wait(&c->b);
    T_OK(zbuf_dup(c->z[1], 10, 50, &d));
    drop(d);
    pthread_barrier_wait(&c->b);
    drop(c->z[1]);
    return NULL;
}

HANDOVER_TEST(two_word_release_runs_once_on_the_last_thread)
{
    zbuf__bias_set_share_credit(0);
    for (int r = 0; r < 50; r++) {
        struct w2_case *c = calloc(1, sizeof *c);
        T_OK(pthread_barrier_init(&c->b, NULL, 2));
        pthread_t th;
        T_OK(pthread_create(&th, NULL, w2_dropper, c));
        T_OK(zbuf_create(&c->z[0]));
        T_OK(zbuf_insert_buf2(c->z[0], 0, c->buf, sizeof c->buf, w2_release, c, c->buf, NULL));
        T_OK(zbuf_dup(c->z[0], 0, ZBUF_TO_END, &c->z[1]));
        pthread_barrier_wait(&c->b);
        pthread_barrier_wait(&c->b);
        drop(c->z[0]); /* races with the other's */
        T_OK(pthread_join(th, NULL));
        T_CHECK(atomic_load(&c->runs) == 1, "round %d: the callback ran %d times", r,
                atomic_load(&c->runs));
        T_CHECK(atomic_load(&c->bad) == 0 && atomic_load(&c->inside) == 1,
                "the callback got wrong arguments or ran outside zbuf_delete");
        pthread_barrier_destroy(&c->b);
        free(c);
    }
    zbuf__bias_set_share_credit(64);
}

/* ============================ the owner counts on while others convert */

#define CONV_THREADS 3
#define CONV_ROUNDS 40

struct conv_case {
    struct seen seen[NB];
    zbuf_t *master;
    zbuf_t *given[CONV_THREADS];
    atomic_int stop;
    pthread_barrier_t go;
};

static void *converter(void *arg)
{
    struct worker_arg *w = arg;
    tid = w->id;
    pthread_barrier_wait(w->go);
    zbuf_t *d;
    for (int i = 0; i < 200; i++) {
        T_OK(zbuf_dup(w->z, (size_t)i % 300, 400, &d));
        drop(d);
    }
    drop(w->z);
    return NULL;
}

HANDOVER_TEST(owner_keeps_counting_while_other_threads_convert)
{
    zbuf__bias_set_share_credit(0);
    for (int round = 0; round < CONV_ROUNDS; round++) {
        struct conv_case c;
        memset(&c, 0, sizeof c);
        c.master = make_msg(c.seen);
        pthread_barrier_t go;
        T_OK(pthread_barrier_init(&go, NULL, CONV_THREADS + 1));
        struct worker_arg w[CONV_THREADS];
        pthread_t th[CONV_THREADS];
        for (int i = 0; i < CONV_THREADS; i++) {
            T_OK(zbuf_dup(c.master, 0, ZBUF_TO_END, &c.given[i]));
            w[i] = (struct worker_arg){c.given[i], 20 + i, &go};
            T_OK(pthread_create(&th[i], NULL, converter, &w[i]));
        }
        pthread_barrier_wait(&go);
        /* The owner dups and drops on its fast path while the others
         * convert the same buffers under it. */
        for (int i = 0; i < 300; i++) {
            zbuf_t *d, *t;
            T_OK(zbuf_dup(c.master, 0, ZBUF_TO_END, &d));
            T_OK(zbuf_split(d, 600, &t));
            drop(t);
            drop(d);
        }
        for (int i = 0; i < CONV_THREADS; i++)
            T_OK(pthread_join(th[i], NULL));
        pthread_barrier_destroy(&go);
        for (int k = 0; k < NB; k++)
            T_CHECK(atomic_load(&c.seen[k].runs) == 0, "released while the master holds it");
        check_msg(c.master);
        drop(c.master);
        for (int k = 0; k < NB; k++)
            check_once(&c.seen[k], 0, "buffer converted under its owner");
    }
    zbuf__bias_set_share_credit(64);
}

/* ================================= the model on changing threads */

static void model_fail(const char *msg)
{
    T_CHECK(0, "%s", msg);
    abort(); /* not reached */
}

struct hop {
    zm_t *m;
    int steps;
};

static void *hop_steps(void *arg)
{
    struct hop *h = arg;
    for (int i = 0; i < h->steps; i++)
        zm_step(h->m);
    return NULL;
}

/* Each batch of steps runs on a new thread: every earlier owner has exited
 * and its record is taken over by the next thread. */
HANDOVER_TEST(model_with_every_batch_on_a_new_thread)
{
    struct zm_options o = {.seed = 77, .fail = model_fail};
    zm_t *m = zm_new(&o);
    for (int batch = 0; batch < 60; batch++) {
        struct hop h = {m, 50};
        pthread_t th;
        T_OK(pthread_create(&th, NULL, hop_steps, &h));
        T_OK(pthread_join(th, NULL));
    }
    zm_finish(m);
}

/* Two live threads take turns, one step each: the other thread, owner of
 * half the buffers, is alive (blocked) while this one converts them. */
struct turns {
    zm_t *m;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int turn, left;
};

struct turn_arg {
    struct turns *t;
    int me;
};

static void *take_turns(void *arg)
{
    struct turn_arg *a = arg;
    struct turns *t = a->t;
    tid = 1 + a->me;
    pthread_mutex_lock(&t->lock);
    for (;;) {
        while (t->left > 0 && t->turn % 2 != a->me)
            pthread_cond_wait(&t->cond, &t->lock);
        if (t->left == 0)
            break;
        t->left--;
        zm_step(t->m);
        t->turn++;
        pthread_cond_broadcast(&t->cond);
    }
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

HANDOVER_TEST(model_with_steps_alternating_between_two_threads)
{
    zbuf__bias_set_share_credit(0);
    struct zm_options o = {.seed = 78, .fail = model_fail};
    struct turns t = {.m = zm_new(&o), .left = 3000};
    pthread_mutex_init(&t.lock, NULL);
    pthread_cond_init(&t.cond, NULL);
    struct turn_arg a[2] = {{&t, 0}, {&t, 1}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        T_OK(pthread_create(&th[i], NULL, take_turns, &a[i]));
    for (int i = 0; i < 2; i++)
        T_OK(pthread_join(th[i], NULL));
    pthread_cond_destroy(&t.cond);
    pthread_mutex_destroy(&t.lock);
    zm_finish(t.m);
    zbuf__bias_set_share_credit(64);
}

/* ========================================== biasing switched off */

HANDOVER_TEST(buffers_made_with_biasing_off_count_shared)
{
    struct seen s[NB];
    memset(s, 0, sizeof s);
    zbuf__bias_set_enabled(false);
    zbuf_t *z = make_msg(s);
    zbuf__bias_set_enabled(true);
    struct pair p;
    memset(&p, 0, sizeof p);
    p.order = 2;
    p.mine = z;
    T_OK(zbuf_dup(z, 0, ZBUF_TO_END, &p.theirs));
    T_OK(pthread_barrier_init(&p.b1, NULL, 2));
    T_OK(pthread_barrier_init(&p.b2, NULL, 2));
    uint64_t conv0 = zbuf__bias_conversions();
    pthread_t th;
    T_OK(pthread_create(&th, NULL, other_side, &p));
    pthread_barrier_wait(&p.b1);
    pthread_barrier_wait(&p.b2);
    drop(p.mine);
    T_OK(pthread_join(th, NULL));
    pthread_barrier_destroy(&p.b1);
    pthread_barrier_destroy(&p.b2);
    for (int k = 0; k < NB; k++)
        check_once(&s[k], -1, "buffer counted shared from the start");
    T_CHECK(zbuf__bias_conversions() == conv0, "a shared buffer was converted");
}

/* ================================================================ fork */

#ifndef ZT_UNDER_TSAN
/* fork() while another thread is inside a run (between loading a buffer's
 * owner and storing its count): in the child that thread does not exist and
 * never leaves the run, so the child must not wait for it. */
struct forking {
    struct seen seen[NB];
    zbuf_t *z, *d;
    pthread_barrier_t b;
};

static void *stuck_in_a_run(void *arg)
{
    struct forking *f = arg;
    tid = 1;
    f->z = make_msg(f->seen);
    T_OK(zbuf_dup(f->z, 0, ZBUF_TO_END, &f->d));
    struct zbuf__owner *me = zbuf__run_enter(); /* as if preempted inside a run */
    pthread_barrier_wait(&f->b);                /* the main thread forks now */
    pthread_barrier_wait(&f->b);
    zbuf__run_leave(me);
    drop(f->z);
    return NULL;
}

Test(handover, fork_while_another_thread_is_inside_a_count_update)
{
    struct forking f;
    memset(&f, 0, sizeof f);
    zbuf_buf_t *own; /* this thread's own record first: the child must convert */
    T_OK(zbuf_buf_alloc(8, &own));
    zbuf_buf_unref(own);
    T_OK(pthread_barrier_init(&f.b, NULL, 2));
    pthread_t th;
    T_OK(pthread_create(&th, NULL, stuck_in_a_run, &f));
    pthread_barrier_wait(&f.b);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        /* The child holds both zbufs of the vanished owner; dropping the
         * dup needs a conversion (the owner's zbuf still holds one).  A
         * child that waited for the vanished thread would hang: SIGALRM. */
        alarm(30);
        zbuf_t *dd;
        int ok = zbuf_dup(f.d, 0, ZBUF_TO_END, &dd) == 0;
        in_call = 1;
        ok &= zbuf_delete(dd) == 0 && zbuf_delete(f.d) == 0 && zbuf_delete(f.z) == 0;
        in_call = 0;
        for (int k = 0; k < NB; k++)
            ok &= atomic_load(&f.seen[k].runs) == 1 && atomic_load(&f.seen[k].inside) == 1;
        ok &= zbuf__bias_conversions() > 0 || !zbuf__bias_enabled();
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    pthread_barrier_wait(&f.b);
    drop(f.d);
    T_OK(pthread_join(th, NULL));
    pthread_barrier_destroy(&f.b);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "the child could not release the buffers of a thread it does not have "
              "(status %#x)", status);
    for (int k = 0; k < NB; k++)
        check_once(&f.seen[k], -1, "parent after fork");
}
#endif

#ifdef ZT_UNDER_TSAN
int main(void)
{
    static const zt_tsan_case_t tests[] = {
        {"owner_thread_exits_while_others_hold_references",
         owner_thread_exits_while_others_hold_references},
        {"a_later_thread_counts_buffers_of_an_exited_one",
         a_later_thread_counts_buffers_of_an_exited_one},
        {"a_thread_that_keeps_sharing_new_buffers_makes_them_shared",
         a_thread_that_keeps_sharing_new_buffers_makes_them_shared},
        {"last_reference_dropped_on_a_thread_that_is_not_the_owner",
         last_reference_dropped_on_a_thread_that_is_not_the_owner},
        {"last_reference_dropped_on_the_owner_after_another_thread",
         last_reference_dropped_on_the_owner_after_another_thread},
        {"owner_and_other_thread_drop_at_the_same_time",
         owner_and_other_thread_drop_at_the_same_time},
        {"pool_buffers_filled_on_one_thread_return_from_another",
         pool_buffers_filled_on_one_thread_return_from_another},
        {"pool_buffer_shared_by_two_threads_returns_once",
         pool_buffer_shared_by_two_threads_returns_once},
        {"two_word_release_runs_once_on_the_last_thread",
         two_word_release_runs_once_on_the_last_thread},
        {"owner_keeps_counting_while_other_threads_convert",
         owner_keeps_counting_while_other_threads_convert},
        {"model_with_every_batch_on_a_new_thread", model_with_every_batch_on_a_new_thread},
        {"model_with_steps_alternating_between_two_threads",
         model_with_steps_alternating_between_two_threads},
        {"buffers_made_with_biasing_off_count_shared", buffers_made_with_biasing_off_count_shared},
    };
    return zt_tsan_run("handover", tests, sizeof tests / sizeof tests[0]);
}
#endif
