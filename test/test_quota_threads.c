/* SPDX-License-Identifier: MIT */
/*
 * Pool quotas across threads: buffers taken through a quota on one thread
 * and given back on others are uncharged there, the callback runs on the
 * returning thread, the count never passes the limit, and deleting a quota
 * waits for a callback running on another thread.  Runs under TSan in CI
 * (label "threads"; see zt_tsan.h for why it has its own main() there).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "support.h"

#include "zt_tsan.h"

#ifndef ZT_UNDER_TSAN
ZT_SUITE(quota_threads);
#endif
#define QT_TEST(name) ZT_TSAN_TEST(quota_threads, name)

#define NRET 3      /* returning threads */
#define LIMIT 4
#define ROUNDS 2000

/* Buffers handed to the returners, one slot each, under a lock. */
struct handoff {
    pthread_mutex_t lock;
    zbuf_buf_t *slot[NRET][LIMIT];
    int n[NRET];
    atomic_int stop;
    atomic_int calls;          /* quota callbacks seen */
    atomic_int calls_on_main;  /* ... that ran on the taking thread */
    pthread_t main;
    zbuf_pool_quota_t *q;
};

static void on_room(zbuf_pool_quota_t *q, void *arg)
{
    struct handoff *h = arg;
    T_CHECK(q == h->q, "the callback names its quota");
    atomic_fetch_add(&h->calls, 1);
    if (pthread_equal(pthread_self(), h->main))
        atomic_fetch_add(&h->calls_on_main, 1);
}

struct returner {
    struct handoff *h;
    int id;
};

static void *returner_main(void *arg)
{
    struct returner *r = arg;
    struct handoff *h = r->h;
    for (;;) {
        zbuf_buf_t *b = NULL;
        pthread_mutex_lock(&h->lock);
        if (h->n[r->id] > 0)
            b = h->slot[r->id][--h->n[r->id]];
        pthread_mutex_unlock(&h->lock);
        if (b != NULL)
            zbuf_buf_unref(b); /* uncharged, maybe called back, on this thread */
        else if (atomic_load(&h->stop))
            break;
        else
            sched_yield();
    }
    zbuf_thread_cache_flush();
    return NULL;
}

QT_TEST(buffers_come_back_on_other_threads_and_the_count_stays_within_the_limit)
{
    zbuf_pool_t *p;
    struct handoff h = {.main = pthread_self()};
    pthread_mutex_init(&h.lock, NULL);
    T_OK(zbuf_pool_create(64, 2 * LIMIT, &p));
    T_OK(zbuf_pool_quota_create(p, LIMIT, on_room, &h, &h.q));
    pthread_t tid[NRET];
    struct returner r[NRET];
    for (int i = 0; i < NRET; i++) {
        r[i] = (struct returner){&h, i};
        T_OK(pthread_create(&tid[i], NULL, returner_main, &r[i]));
    }
    int taken = 0, refused = 0;
    for (int k = 0; k < ROUNDS; k++) {
        zbuf_buf_t *b;
        int rc = zbuf_pool_quota_get(h.q, &b);
        if (rc == -EDQUOT) {
            refused++;
            sched_yield();
            continue;
        }
        T_CHECK(rc == 0, "quota get: %d", rc);
        T_CHECK(zbuf_pool_quota_held(h.q) <= LIMIT, "held %zu", zbuf_pool_quota_held(h.q));
        T_CHECK(zbuf_pool_available(p) >= LIMIT, "the quota never took the others' share");
        taken++;
        pthread_mutex_lock(&h.lock);
        int t = k % NRET;
        if (h.n[t] < LIMIT)
            h.slot[t][h.n[t]++] = b, b = NULL;
        pthread_mutex_unlock(&h.lock);
        if (b != NULL)
            zbuf_buf_unref(b); /* that returner is busy: give it back here */
    }
    atomic_store(&h.stop, 1);
    for (int i = 0; i < NRET; i++)
        pthread_join(tid[i], NULL);
    T_CHECK(zbuf_pool_quota_held(h.q) == 0, "every buffer uncharged");
    T_CHECK(zbuf_pool_available(p) == 2 * LIMIT, "every buffer back");
    T_CHECK(taken > 0, "took buffers");
    if (refused > 0)
        T_CHECK(atomic_load(&h.calls) > 0, "%d refusals but no callback", refused);
    T_INFO("%d taken, %d refused, %d callbacks (%d on the taking thread)", taken, refused,
           atomic_load(&h.calls), atomic_load(&h.calls_on_main));
    zbuf_pool_quota_delete(h.q);
    zbuf_pool_delete(p);
    pthread_mutex_destroy(&h.lock);
}

/* A callback held open on a returning thread while the quota is deleted on
 * this one: the delete waits for it. */
struct slow {
    atomic_int entered, go, finished;
};

static void on_room_slow(zbuf_pool_quota_t *q, void *arg)
{
    struct slow *s = arg;
    atomic_store(&s->entered, 1);
    while (!atomic_load(&s->go))
        sched_yield();
    for (int i = 0; i < 1000; i++)
        sched_yield();
    (void)zbuf_pool_quota_limit(q); /* still valid */
    atomic_store(&s->finished, 1);
}

static void *unref_main(void *arg)
{
    zbuf_buf_unref(arg);
    zbuf_thread_cache_flush();
    return NULL;
}

QT_TEST(deleting_a_quota_waits_for_its_callback_on_another_thread)
{
    zbuf_pool_t *p;
    zbuf_pool_quota_t *q;
    zbuf_buf_t *b;
    struct slow *s = calloc(1, sizeof *s);
    T_OK(zbuf_pool_create(64, 2, &p));
    T_OK(zbuf_pool_quota_create(p, 1, on_room_slow, s, &q));
    T_OK(zbuf_pool_quota_get(q, &b));
    pthread_t th;
    T_OK(pthread_create(&th, NULL, unref_main, b));
    while (!atomic_load(&s->entered))
        sched_yield();
    atomic_store(&s->go, 1);
    zbuf_pool_quota_delete(q);
    T_CHECK(atomic_load(&s->finished) == 1, "the delete returned while the callback ran");
    free(s);
    T_OK(pthread_join(th, NULL));
    zbuf_pool_delete(p);
}

#ifdef ZT_UNDER_TSAN
int main(void)
{
    static const zt_tsan_case_t tests[] = {
        {"buffers_come_back_on_other_threads_and_the_count_stays_within_the_limit",
         buffers_come_back_on_other_threads_and_the_count_stays_within_the_limit},
        {"deleting_a_quota_waits_for_its_callback_on_another_thread",
         deleting_a_quota_waits_for_its_callback_on_another_thread},
    };
    return zt_tsan_run("quota_threads", tests, sizeof tests / sizeof tests[0]);
}
#endif
