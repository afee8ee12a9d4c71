/* SPDX-License-Identifier: MIT */
/*
 * Buffer pools: a fixed number of equal buffers, taken with zbuf_pool_get()
 * and given back when the last reference goes.  Exhaustion is -ENOBUFS; a
 * pool deleted while buffers are out is freed when the last one returns.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "support.h"

ZT_SUITE(pool);

Test(pool, create_reports_its_geometry)
{
    zbuf_pool_t *p = NULL;
    zbuf_stats_t st = zt_stats();

    cr_assert_eq(zbuf_pool_create(512, 8, &p), 0);
    cr_assert_not_null(p);
    cr_assert_eq(zbuf_pool_buf_size(p), 512);
    cr_assert_eq(zbuf_pool_capacity(p), 8);
    cr_assert_eq(zbuf_pool_available(p), 8);
    cr_assert_eq(zt_stats().live_pools, st.live_pools + 1);
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs, "buffers in the pool are not live");
    zbuf_pool_delete(p);
    cr_assert_eq(zt_stats().live_pools, st.live_pools);
}

Test(pool, get_gives_a_private_writable_buffer_of_the_pool_size)
{
    zbuf_pool_t *p;
    zbuf_buf_t *b = NULL;
    zbuf_stats_t st;

    cr_assert_eq(zbuf_pool_create(100, 2, &p), 0);
    st = zt_stats();
    cr_assert_eq(zbuf_pool_get(p, &b), 0);
    cr_assert_not_null(b);
    cr_assert_eq(zbuf_buf_size(b), 100);
    cr_assert_not_null(zbuf_buf_data(b));
    cr_assert_eq(zbuf_buf_refs(b), 1);
    cr_assert(zbuf_buf_writable(b));
    cr_assert_not(zbuf_buf_file(b, NULL, NULL));
    memset(zbuf_buf_data(b), 0x5c, 100);
    cr_assert_eq(zbuf_pool_available(p), 1);
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs + 1);
    zbuf_buf_unref(b);
    cr_assert_eq(zbuf_pool_available(p), 2);
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs);
    zbuf_pool_delete(p);
}

Test(pool, buffers_are_distinct_and_do_not_overlap)
{
    enum { N = 16, SZ = 64 };
    zbuf_pool_t *p;
    zbuf_buf_t *b[N];

    cr_assert_eq(zbuf_pool_create(SZ, N, &p), 0);
    for (size_t i = 0; i < N; i++) {
        cr_assert_eq(zbuf_pool_get(p, &b[i]), 0);
        memset(zbuf_buf_data(b[i]), (int)i, SZ);
    }
    for (size_t i = 0; i < N; i++) {
        const uint8_t *d = zbuf_buf_data(b[i]);
        for (size_t j = 0; j < SZ; j++)
            cr_assert_eq(d[j], i, "buffer %zu overlaps another", i);
    }
    for (size_t i = 0; i < N; i++)
        zbuf_buf_unref(b[i]);
    cr_assert_eq(zbuf_pool_available(p), N);
    zbuf_pool_delete(p);
}

Test(pool, exhaustion_is_enobufs_until_a_buffer_returns)
{
    zbuf_pool_t *p;
    zbuf_buf_t *a, *b, *c = NULL;
    zbuf_stats_t st;

    cr_assert_eq(zbuf_pool_create(32, 2, &p), 0);
    cr_assert_eq(zbuf_pool_get(p, &a), 0);
    cr_assert_eq(zbuf_pool_get(p, &b), 0);
    cr_assert_eq(zbuf_pool_available(p), 0);
    st = zt_stats();
    cr_assert_eq(zbuf_pool_get(p, &c), -ENOBUFS);
    cr_assert_eq(zbuf_pool_get(p, &c), -ENOBUFS);
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs);
    cr_assert_eq(zbuf_pool_available(p), 0);
    zbuf_buf_unref(a);
    cr_assert_eq(zbuf_pool_available(p), 1);
    cr_assert_eq(zbuf_pool_get(p, &c), 0);
    cr_assert_not_null(c);
    cr_assert_eq(zbuf_buf_refs(c), 1);
    zbuf_buf_unref(b);
    zbuf_buf_unref(c);
    cr_assert_eq(zbuf_pool_available(p), 2);
    zbuf_pool_delete(p);
}

Test(pool, buffer_returns_when_the_zbuf_holding_it_is_deleted)
{
    zbuf_pool_t *p;
    zbuf_buf_t *b;
    zbuf_t *z;

    cr_assert_eq(zbuf_pool_create(64, 1, &p), 0);
    cr_assert_eq(zbuf_pool_get(p, &b), 0);
    memcpy(zbuf_buf_data(b), "received", 8);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_ref(z, b, 0, 8), 0);
    zt_check(z);
    zbuf_buf_unref(b); /* the receive path drops its own handle */
    cr_assert_eq(zbuf_pool_available(p), 0);
    cr_assert_eq(zbuf_pool_get(p, &b), -ENOBUFS);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zbuf_pool_available(p), 1);
    cr_assert_eq(zbuf_pool_get(p, &b), 0);
    zbuf_buf_unref(b);
    zbuf_pool_delete(p);
}

Test(pool, buffer_returns_only_when_every_sharing_zbuf_is_gone)
{
    zbuf_pool_t *p;
    zbuf_buf_t *b;
    zbuf_t *z, *d, *t;

    cr_assert_eq(zbuf_pool_create(64, 1, &p), 0);
    cr_assert_eq(zbuf_pool_get(p, &b), 0);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_ref(z, b, 0, 60), 0);
    zt_check(z);
    zbuf_buf_unref(b);
    cr_assert_eq(zbuf_dup(z, 10, 10, &d), 0);
    zt_check(z);
    zt_check(d);
    cr_assert_eq(zbuf_split(z, 30, &t), 0);
    zt_check(z);
    zt_check(t);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zbuf_pool_available(p), 0);
    cr_assert_eq(zbuf_delete(t), 0);
    cr_assert_eq(zbuf_pool_available(p), 0);
    cr_assert_eq(zbuf_delete(d), 0);
    cr_assert_eq(zbuf_pool_available(p), 1);
    zbuf_pool_delete(p);
}

Test(pool, buffer_returns_when_cut_away)
{
    zbuf_pool_t *p;
    zbuf_buf_t *b;
    zbuf_t *z;

    cr_assert_eq(zbuf_pool_create(64, 1, &p), 0);
    cr_assert_eq(zbuf_pool_get(p, &b), 0);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_copy(z, "hdr", 3), 0);
    zt_check(z);
    cr_assert_eq(zbuf_append_ref(z, b, 0, 64), 0);
    zt_check(z);
    zbuf_buf_unref(b);
    cr_assert_eq(zbuf_cut(z, 3, ZBUF_TO_END, NULL), 0);
    zt_check(z);
    cr_assert_eq(zbuf_pool_available(p), 1);
    cr_assert_eq(zbuf_delete(z), 0);
    zbuf_pool_delete(p);
}

Test(pool, deleted_pool_is_freed_when_the_last_buffer_returns)
{
    zbuf_pool_t *p;
    zbuf_buf_t *a, *b;
    zbuf_t *z;
    zbuf_stats_t st = zt_stats();

    cr_assert_eq(zbuf_pool_create(128, 4, &p), 0);
    cr_assert_eq(zbuf_pool_get(p, &a), 0);
    cr_assert_eq(zbuf_pool_get(p, &b), 0);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_ref(z, b, 0, 128), 0);
    zt_check(z);
    zbuf_buf_unref(b);
    memset(zbuf_buf_data(a), 1, 128);
    zbuf_pool_delete(p);
    cr_assert_eq(zt_stats().live_pools, st.live_pools + 1, "freed while buffers are out");
    /* Both buffers remain usable. */
    memset(zbuf_buf_data(a), 2, 128);
    cr_assert_eq(((uint8_t *)zbuf_seg_data(z, zbuf_seg_first(z)))[0],
                 ((uint8_t *)zbuf_buf_data(b))[0]);
    zbuf_buf_unref(a);
    cr_assert_eq(zt_stats().live_pools, st.live_pools + 1);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zt_stats().live_pools, st.live_pools);
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs);
}

Test(pool, deleted_pool_with_nothing_out_is_freed_at_once)
{
    zbuf_pool_t *p;
    zbuf_buf_t *a;
    zbuf_stats_t st = zt_stats();

    cr_assert_eq(zbuf_pool_create(16, 3, &p), 0);
    cr_assert_eq(zbuf_pool_get(p, &a), 0);
    zbuf_buf_unref(a);
    zbuf_pool_delete(p);
    cr_assert_eq(zt_stats().live_pools, st.live_pools);
}

Test(pool, delete_null_is_a_noop)
{
    zbuf_stats_t st = zt_stats();

    zbuf_pool_delete(NULL);
    cr_assert_eq(zt_stats().live_pools, st.live_pools);
}

Test(pool, create_rejects_bad_geometry)
{
    zbuf_pool_t *p = (zbuf_pool_t *)&p;
    zbuf_stats_t st = zt_stats();

    cr_assert_eq(zbuf_pool_create(0, 4, &p), -EINVAL);
    cr_assert_eq(zbuf_pool_create(4, 0, &p), -EINVAL);
    cr_assert_eq(zbuf_pool_create(4, 4, NULL), -EINVAL);
    cr_assert_eq(zbuf_pool_create(SIZE_MAX / 2, 4, &p), -EOVERFLOW);
    cr_assert_eq(zbuf_pool_create(SIZE_MAX, SIZE_MAX, &p), -EOVERFLOW);
    cr_assert_eq(p, (zbuf_pool_t *)&p, "out written on failure");
    cr_assert_eq(zt_stats().live_pools, st.live_pools);
}

Test(pool, get_rejects_bad_arguments)
{
    zbuf_pool_t *p;
    zbuf_buf_t *b;

    cr_assert_eq(zbuf_pool_get(NULL, &b), -EINVAL);
    cr_assert_eq(zbuf_pool_create(16, 1, &p), 0);
    cr_assert_eq(zbuf_pool_get(p, NULL), -EINVAL);
    cr_assert_eq(zbuf_pool_available(p), 1);
    zbuf_pool_delete(p);
}

Test(pool, reused_buffer_is_private_again)
{
    zbuf_pool_t *p;
    zbuf_buf_t *b;
    zbuf_t *z;

    cr_assert_eq(zbuf_pool_create(64, 1, &p), 0);
    for (int round = 0; round < 5; round++) {
        cr_assert_eq(zbuf_pool_get(p, &b), 0);
        cr_assert_eq(zbuf_buf_refs(b), 1);
        cr_assert(zbuf_buf_writable(b));
        cr_assert_eq(zbuf_create(&z), 0);
        cr_assert_eq(zbuf_append_ref(z, b, 8, 16), 0);
        zt_check(z);
        zbuf_buf_unref(b);
        cr_assert_eq(zbuf_headroom(z), 8);
        cr_assert_eq(zbuf_tailroom(z), 40);
        cr_assert_eq(zbuf_delete(z), 0);
        cr_assert_eq(zbuf_pool_available(p), 1);
    }
    zbuf_pool_delete(p);
}

Test(pool, copies_nothing)
{
    zbuf_pool_t *p;
    zbuf_buf_t *b;
    zbuf_t *z, *d;
    zbuf_stats_t st;

    cr_assert_eq(zbuf_pool_create(1500, 4, &p), 0);
    st = zt_stats();
    cr_assert_eq(zbuf_pool_get(p, &b), 0);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_ref(z, b, 0, 1500), 0);
    zt_check(z);
    zbuf_buf_unref(b);
    cr_assert_eq(zbuf_dup(z, 0, ZBUF_TO_END, &d), 0);
    zt_check(z);
    zt_check(d);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zbuf_delete(d), 0);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied);
    zbuf_pool_delete(p);
}

/* ------------------------------------------------------------- threads */

enum { ROUNDS = 2000, POOL_N = 4 };

struct handoff {
    zbuf_pool_t *pool;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    zbuf_t *slot[POOL_N];
    size_t head, tail, count;
    bool done;
};

/* Consumer: deletes zbufs the producer filled, on its own thread. */
static void *consumer(void *arg)
{
    struct handoff *h = arg;

    pthread_mutex_lock(&h->lock);
    for (;;) {
        while (h->count == 0 && !h->done)
            pthread_cond_wait(&h->cond, &h->lock);
        if (h->count == 0 && h->done)
            break;
        zbuf_t *z = h->slot[h->head];
        h->head = (h->head + 1) % POOL_N;
        h->count--;
        pthread_mutex_unlock(&h->lock);
        zbuf_delete(z); /* returns the pool buffer from this thread */
        pthread_mutex_lock(&h->lock);
        pthread_cond_broadcast(&h->cond);
    }
    pthread_mutex_unlock(&h->lock);
    return NULL;
}

Test(pool, buffers_taken_on_one_thread_return_on_another)
{
    struct handoff h = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
    pthread_t t;
    size_t got = 0;

    cr_assert_eq(zbuf_pool_create(256, POOL_N, &h.pool), 0);
    cr_assert_eq(pthread_create(&t, NULL, consumer, &h), 0);
    while (got < ROUNDS) {
        zbuf_buf_t *b;
        zbuf_t *z;
        int rc = zbuf_pool_get(h.pool, &b);

        if (rc == -ENOBUFS) {
            /* Every buffer is in flight: wait for the consumer. */
            pthread_mutex_lock(&h.lock);
            while (h.count == POOL_N)
                pthread_cond_wait(&h.cond, &h.lock);
            pthread_mutex_unlock(&h.lock);
            sched_yield();
            continue;
        }
        cr_assert_eq(rc, 0);
        memset(zbuf_buf_data(b), (int)(got & 0xff), 256);
        cr_assert_eq(zbuf_create(&z), 0);
        cr_assert_eq(zbuf_append_ref(z, b, 0, 256), 0);
        zt_check(z);
        zbuf_buf_unref(b);
        pthread_mutex_lock(&h.lock);
        while (h.count == POOL_N)
            pthread_cond_wait(&h.cond, &h.lock);
        h.slot[h.tail] = z;
        h.tail = (h.tail + 1) % POOL_N;
        h.count++;
        pthread_cond_broadcast(&h.cond);
        pthread_mutex_unlock(&h.lock);
        got++;
    }
    pthread_mutex_lock(&h.lock);
    h.done = true;
    pthread_cond_broadcast(&h.cond);
    pthread_mutex_unlock(&h.lock);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(zbuf_pool_available(h.pool), POOL_N);
    zbuf_pool_delete(h.pool);
}

struct notify_log {
    int calls;
    zbuf_pool_t *pool;
    size_t available_seen;
};

static void on_pool_refill(zbuf_pool_t *p, void *arg)
{
    struct notify_log *log = arg;
    log->calls++;
    log->pool = p;
    log->available_seen = zbuf_pool_available(p);
}

Test(pool, notify_runs_once_when_an_exhausted_pool_gets_a_buffer_back)
{
    zbuf_pool_t *p;
    zbuf_buf_t *a, *b;
    struct notify_log log = {0};

    cr_assert_eq(zbuf_pool_create(64, 2, &p), 0);
    cr_assert_eq(zbuf_pool_set_notify(p, on_pool_refill, &log), 0);
    cr_assert_eq(zbuf_pool_get(p, &a), 0);
    zbuf_buf_unref(a); /* 1 -> 2 free: not an exhausted pool, no call */
    cr_assert_eq(log.calls, 0);
    cr_assert_eq(zbuf_pool_get(p, &a), 0);
    cr_assert_eq(zbuf_pool_get(p, &b), 0);
    zbuf_buf_unref(a); /* 0 -> 1 free: one call, after the buffer is back */
    cr_assert_eq(log.calls, 1);
    cr_assert_eq(log.pool, p);
    cr_assert_eq(log.available_seen, 1);
    zbuf_buf_unref(b); /* 1 -> 2: no call */
    cr_assert_eq(log.calls, 1);
    cr_assert_eq(zbuf_pool_set_notify(p, NULL, NULL), 0);
    cr_assert_eq(zbuf_pool_get(p, &a), 0);
    cr_assert_eq(zbuf_pool_get(p, &b), 0);
    zbuf_buf_unref(a);
    cr_assert_eq(log.calls, 1, "a cleared notification must not run");
    zbuf_buf_unref(b);
    zbuf_pool_delete(p);
}

Test(pool, notify_rejects_null_and_deleted_pools)
{
    zbuf_pool_t *p;
    zbuf_buf_t *a;
    struct notify_log log = {0};

    cr_assert_eq(zbuf_pool_set_notify(NULL, on_pool_refill, &log), -EINVAL);
    cr_assert_eq(zbuf_pool_create(64, 1, &p), 0);
    cr_assert_eq(zbuf_pool_get(p, &a), 0);
    cr_assert_eq(zbuf_pool_set_notify(p, on_pool_refill, &log), 0);
    zbuf_pool_delete(p); /* a buffer is out: the pool waits for it */
    zbuf_buf_unref(a);   /* frees the pool; a deleted pool notifies nobody */
    cr_assert_eq(log.calls, 0);
}

/* A callback that deletes its own pool, or swaps the callback, from
 * inside: neither may deadlock, and the pool must outlive the call. */
struct self_action {
    int calls;
    bool delete_pool, clear_notify;
    size_t seen_after;
};

static void on_refill_act(zbuf_pool_t *p, void *arg)
{
    struct self_action *a = arg;
    a->calls++;
    if (a->clear_notify) {
        cr_assert_eq(zbuf_pool_set_notify(p, NULL, NULL), 0);
        cr_assert_eq(zbuf_pool_notify_sync(p), 0, "returns at once inside the callback");
    }
    if (a->delete_pool)
        zbuf_pool_delete(p);
    a->seen_after = zbuf_pool_available(p); /* still valid inside the call */
}

static void exhaust(zbuf_pool_t *p, zbuf_buf_t **held, size_t n)
{
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(zbuf_pool_get(p, &held[i]), 0);
    zbuf_buf_t *none;
    cr_assert_eq(zbuf_pool_get(p, &none), -ENOBUFS);
}

Test(pool, notify_callback_may_clear_itself_without_waiting_for_itself)
{
    zbuf_pool_t *p;
    zbuf_buf_t *held[2];
    cr_assert_eq(zbuf_pool_create(64, 2, &p), 0);
    struct self_action a = {.clear_notify = true};
    cr_assert_eq(zbuf_pool_set_notify(p, on_refill_act, &a), 0);
    exhaust(p, held, 2);
    zbuf_buf_unref(held[0]); /* 0 -> 1 free: the callback clears itself */
    cr_assert_eq(a.calls, 1);
    zbuf_buf_t *again;
    cr_assert_eq(zbuf_pool_get(p, &again), 0);
    zbuf_buf_unref(again); /* 0 -> 1 again: no callback any more */
    cr_assert_eq(a.calls, 1);
    zbuf_buf_unref(held[1]);
    cr_assert_eq(zbuf_pool_notify_sync(p), 0);
    cr_assert_eq(zbuf_pool_notify_sync(NULL), -EINVAL);
    zbuf_pool_delete(p);
}

Test(pool, pool_deleted_from_its_own_callback_is_freed_when_the_call_returns)
{
    zbuf_stats_t st0, st1;
    zbuf_stats_get(&st0);
    zbuf_pool_t *p;
    zbuf_buf_t *held[1];
    cr_assert_eq(zbuf_pool_create(64, 1, &p), 0);
    struct self_action a = {.delete_pool = true};
    cr_assert_eq(zbuf_pool_set_notify(p, on_refill_act, &a), 0);
    exhaust(p, held, 1);
    zbuf_buf_unref(held[0]); /* the last buffer home, deleted inside: freed after */
    cr_assert_eq(a.calls, 1);
    cr_assert_eq(a.seen_after, 1, "the pool was still there inside the callback");
    zbuf_stats_get(&st1);
    cr_assert_eq(st1.live_pools, st0.live_pools, "freed once the callback returned");
}

static void count_watch(zbuf_pool_t *p, void *arg)
{
    (void)p;
    ++*(int *)arg;
}

struct self_remover {
    int calls;
};

static void remove_self(zbuf_pool_t *p, void *arg)
{
    struct self_remover *r = arg;
    r->calls++;
    cr_assert_eq(zbuf_pool_remove_notify(p, remove_self, r), 0);
}

Test(pool, watchers_are_called_with_the_notify_callback_and_may_leave)
{
    zbuf_pool_t *p;
    zbuf_buf_t *held[1];
    cr_assert_eq(zbuf_pool_create(64, 1, &p), 0);
    int slot = 0, w[ZBUF_POOL_WATCHERS_MAX] = {0};
    struct self_remover once = {0};
    cr_assert_eq(zbuf_pool_set_notify(p, count_watch, &slot), 0);
    cr_assert_eq(zbuf_pool_add_notify(p, remove_self, &once), 0);
    for (int i = 0; i < ZBUF_POOL_WATCHERS_MAX - 1; i++)
        cr_assert_eq(zbuf_pool_add_notify(p, count_watch, &w[i]), 0);
    cr_assert_eq(zbuf_pool_add_notify(p, count_watch, &w[ZBUF_POOL_WATCHERS_MAX - 1]), -ENOSPC);
    cr_assert_eq(zbuf_pool_add_notify(p, count_watch, &w[0]), -EEXIST);
    cr_assert_eq(zbuf_pool_add_notify(p, NULL, NULL), -EINVAL);

    exhaust(p, held, 1);
    zbuf_buf_unref(held[0]);
    cr_assert_eq(slot, 1, "the set_notify callback still runs");
    cr_assert_eq(once.calls, 1);
    for (int i = 0; i < ZBUF_POOL_WATCHERS_MAX - 1; i++)
        cr_assert_eq(w[i], 1, "watcher %d", i);

    exhaust(p, held, 1);
    zbuf_buf_unref(held[0]);
    cr_assert_eq(once.calls, 1, "it removed itself");
    cr_assert_eq(w[0], 2);
    cr_assert_eq(zbuf_pool_remove_notify(p, remove_self, &once), -ENOENT);
    cr_assert_eq(zbuf_pool_remove_notify(p, count_watch, &w[0]), 0);
    exhaust(p, held, 1);
    zbuf_buf_unref(held[0]);
    cr_assert_eq(w[0], 2, "removed");
    cr_assert_eq(w[1], 3);
    cr_assert_eq(slot, 3);
    zbuf_pool_delete(p);
}
