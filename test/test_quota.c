/* SPDX-License-Identifier: MIT */
/*
 * Pool quotas: one consumer's share of a shared pool.  A quota counts the
 * buffers taken through it until they are back in the pool (however many
 * zbufs shared them), refuses more than its limit with -EDQUOT while the
 * pool still has buffers for others, calls back once when a full quota gets
 * room, and outlives neither its last buffer nor keeps a deleted pool alive
 * longer than needed.  Cross-thread returns: test_quota_threads.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "support.h"

ZT_SUITE(quota);

struct calls {
    int n;
    zbuf_pool_quota_t *q;        /* the quota the callback saw */
    zbuf_buf_t *taken;           /* a buffer taken from inside the callback */
    bool take, delete_self;
};

static void on_room(zbuf_pool_quota_t *q, void *arg)
{
    struct calls *c = arg;
    c->n++;
    c->q = q;
    if (c->take)
        cr_assert_eq(zbuf_pool_quota_get(q, &c->taken), 0, "a callback may take a buffer");
    if (c->delete_self)
        zbuf_pool_quota_delete(q);
}

Test(quota, counts_buffers_until_they_are_back_and_refuses_more_than_its_limit)
{
    zbuf_pool_t *p;
    zbuf_pool_quota_t *q;
    zbuf_buf_t *b[3];
    struct calls c = {0};
    cr_assert_eq(zbuf_pool_create(64, 4, &p), 0);
    cr_assert_eq(zbuf_pool_quota_create(p, 2, on_room, &c, &q), 0);
    cr_assert_eq(zbuf_pool_quota_limit(q), 2);
    cr_assert_eq(zbuf_pool_quota_held(q), 0);
    cr_assert_eq(zbuf_pool_quota_get(q, &b[0]), 0);
    cr_assert_eq(zbuf_pool_quota_get(q, &b[1]), 0);
    cr_assert_eq(zbuf_pool_quota_held(q), 2);
    b[2] = NULL;
    cr_assert_eq(zbuf_pool_quota_get(q, &b[2]), -EDQUOT);
    cr_assert_null(b[2], "a refused get leaves the output alone");
    cr_assert_eq(zbuf_pool_available(p), 2, "the pool still has buffers for the others");
    cr_assert_eq(zbuf_pool_get(p, &b[2]), 0);
    cr_assert_null(zbuf_buf_quota(b[2]), "a plain get charges nothing");
    cr_assert_eq(zbuf_buf_quota(b[0]), q);
    cr_assert_eq(zbuf_buf_pool(b[0]), p);
    cr_assert_eq(c.n, 0);
    zbuf_buf_unref(b[2]);
    cr_assert_eq(c.n, 0, "a buffer of no quota tells the quota nothing");
    zbuf_buf_unref(b[0]);
    cr_assert_eq(zbuf_pool_quota_held(q), 1);
    cr_assert_eq(c.n, 1, "room again in the full quota");
    cr_assert_eq(c.q, q);
    cr_assert_eq(zbuf_pool_quota_get(q, &b[0]), 0);
    zbuf_buf_unref(b[0]);
    zbuf_buf_unref(b[1]);
    cr_assert_eq(c.n, 2, "once per time the quota was full");
    cr_assert_eq(zbuf_pool_quota_held(q), 0);
    zbuf_pool_quota_delete(q);
    zbuf_pool_delete(p);
}

Test(quota, calls_back_only_when_a_full_quota_gets_room)
{
    zbuf_pool_t *p;
    zbuf_pool_quota_t *q;
    zbuf_buf_t *b[3];
    struct calls c = {0};
    cr_assert_eq(zbuf_pool_create(64, 8, &p), 0);
    cr_assert_eq(zbuf_pool_quota_create(p, 3, on_room, &c, &q), 0);
    cr_assert_eq(zbuf_pool_quota_get(q, &b[0]), 0);
    cr_assert_eq(zbuf_pool_quota_get(q, &b[1]), 0);
    zbuf_buf_unref(b[0]);
    cr_assert_eq(c.n, 0, "it was not full");
    cr_assert_eq(zbuf_pool_quota_get(q, &b[0]), 0);
    cr_assert_eq(zbuf_pool_quota_get(q, &b[2]), 0);
    zbuf_buf_unref(b[2]);
    zbuf_buf_unref(b[1]);
    zbuf_buf_unref(b[0]);
    cr_assert_eq(c.n, 1);
    zbuf_pool_quota_delete(q);
    zbuf_pool_delete(p);
}

Test(quota, a_buffer_shared_by_zbufs_is_charged_until_the_last_segment_goes)
{
    zbuf_pool_t *p;
    zbuf_pool_quota_t *q;
    zbuf_buf_t *b;
    zbuf_t *z1, *z2;
    struct calls c = {0};
    cr_assert_eq(zbuf_pool_create(64, 2, &p), 0);
    cr_assert_eq(zbuf_pool_quota_create(p, 1, on_room, &c, &q), 0);
    cr_assert_eq(zbuf_pool_quota_get(q, &b), 0);
    cr_assert_eq(zbuf_create(&z1), 0);
    cr_assert_eq(zbuf_append_ref(z1, b, 0, 10), 0);
    zbuf_buf_unref(b);
    cr_assert_eq(zbuf_dup(z1, 2, 4, &z2), 0);
    zbuf_delete(z1);
    cr_assert_eq(zbuf_pool_quota_held(q), 1);
    cr_assert_eq(c.n, 0);
    zbuf_delete(z2);
    cr_assert_eq(zbuf_pool_quota_held(q), 0);
    cr_assert_eq(c.n, 1);
    cr_assert_eq(zbuf_pool_available(p), 2);
    zbuf_pool_quota_delete(q);
    zbuf_pool_delete(p);
}

Test(quota, a_dry_pool_is_enobufs_not_edquot)
{
    zbuf_pool_t *p;
    zbuf_pool_quota_t *q;
    zbuf_buf_t *b[3];
    cr_assert_eq(zbuf_pool_create(64, 2, &p), 0);
    cr_assert_eq(zbuf_pool_quota_create(p, 10, NULL, NULL, &q), 0);
    cr_assert_eq(zbuf_pool_quota_get(q, &b[0]), 0);
    cr_assert_eq(zbuf_pool_quota_get(q, &b[1]), 0);
    cr_assert_eq(zbuf_pool_quota_get(q, &b[2]), -ENOBUFS);
    cr_assert_eq(zbuf_pool_quota_held(q), 2);
    zbuf_buf_unref(b[0]);
    zbuf_buf_unref(b[1]);
    zbuf_pool_quota_delete(q);
    zbuf_pool_delete(p);
}

Test(quota, quotas_of_one_pool_count_apart)
{
    zbuf_pool_t *p;
    zbuf_pool_quota_t *q1, *q2;
    zbuf_buf_t *a, *b;
    struct calls c1 = {0}, c2 = {0};
    cr_assert_eq(zbuf_pool_create(64, 2, &p), 0);
    cr_assert_eq(zbuf_pool_quota_create(p, 1, on_room, &c1, &q1), 0);
    cr_assert_eq(zbuf_pool_quota_create(p, 1, on_room, &c2, &q2), 0);
    cr_assert_eq(zbuf_pool_quota_get(q1, &a), 0);
    cr_assert_eq(zbuf_pool_quota_get(q1, &b), -EDQUOT);
    cr_assert_eq(zbuf_pool_quota_get(q2, &b), 0);
    cr_assert_eq(zbuf_pool_quota_held(q1), 1);
    cr_assert_eq(zbuf_pool_quota_held(q2), 1);
    zbuf_buf_unref(b);
    cr_assert_eq(c1.n, 0);
    cr_assert_eq(c2.n, 1);
    zbuf_buf_unref(a);
    cr_assert_eq(c1.n, 1);
    zbuf_pool_quota_delete(q1);
    zbuf_pool_quota_delete(q2);
    zbuf_pool_delete(p);
}

static void count_notify(zbuf_pool_t *p, void *arg)
{
    (void)p;
    ++*(int *)arg;
}

Test(quota, the_pool_notify_and_the_quota_callback_both_run_for_one_return)
{
    zbuf_pool_t *p;
    zbuf_pool_quota_t *q;
    zbuf_buf_t *b;
    struct calls c = {0};
    int notified = 0;
    cr_assert_eq(zbuf_pool_create(64, 1, &p), 0);
    cr_assert_eq(zbuf_pool_set_notify(p, count_notify, &notified), 0);
    cr_assert_eq(zbuf_pool_quota_create(p, 1, on_room, &c, &q), 0);
    cr_assert_eq(zbuf_pool_quota_get(q, &b), 0);
    zbuf_buf_unref(b);
    cr_assert_eq(notified, 1);
    cr_assert_eq(c.n, 1);
    zbuf_pool_quota_delete(q);
    zbuf_pool_delete(p);
}

Test(quota, the_callback_may_take_a_buffer_or_delete_its_quota)
{
    zbuf_pool_t *p;
    zbuf_pool_quota_t *q;
    zbuf_buf_t *b;
    struct calls c = {.take = true};
    cr_assert_eq(zbuf_pool_create(64, 2, &p), 0);
    cr_assert_eq(zbuf_pool_quota_create(p, 1, on_room, &c, &q), 0);
    cr_assert_eq(zbuf_pool_quota_get(q, &b), 0);
    zbuf_buf_unref(b);
    cr_assert_eq(c.n, 1);
    cr_assert_not_null(c.taken);
    cr_assert_eq(zbuf_pool_quota_held(q), 1);
    c.take = false;
    c.delete_self = true;
    zbuf_buf_unref(c.taken);
    cr_assert_eq(c.n, 2, "and the quota deleted itself");
    cr_assert_eq(zbuf_pool_available(p), 2);
    zbuf_pool_delete(p);
}

Test(quota, set_limit_lowers_and_raises_without_calling_back)
{
    zbuf_pool_t *p;
    zbuf_pool_quota_t *q;
    zbuf_buf_t *b[3];
    struct calls c = {0};
    cr_assert_eq(zbuf_pool_create(64, 4, &p), 0);
    cr_assert_eq(zbuf_pool_quota_create(p, 3, on_room, &c, &q), 0);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(zbuf_pool_quota_get(q, &b[i]), 0);
    cr_assert_eq(zbuf_pool_quota_set_limit(q, 1), 0);
    cr_assert_eq(zbuf_pool_quota_limit(q), 1);
    zbuf_buf_unref(b[0]);
    cr_assert_eq(c.n, 0, "still at or above the lowered limit");
    zbuf_buf_unref(b[1]);
    cr_assert_eq(c.n, 0);
    cr_assert_eq(zbuf_pool_quota_get(q, &b[0]), -EDQUOT);
    cr_assert_eq(zbuf_pool_quota_set_limit(q, 2), 0);
    cr_assert_eq(c.n, 0, "raising tells nobody");
    cr_assert_eq(zbuf_pool_quota_get(q, &b[0]), 0);
    zbuf_buf_unref(b[0]);
    cr_assert_eq(c.n, 1);
    zbuf_buf_unref(b[2]);
    cr_assert_eq(zbuf_pool_quota_set_limit(q, 0), -EINVAL);
    zbuf_pool_quota_delete(q);
    zbuf_pool_delete(p);
}

Test(quota, deleted_with_buffers_out_it_goes_with_the_last_one_and_calls_nobody)
{
    zbuf_pool_t *p;
    zbuf_pool_quota_t *q;
    zbuf_buf_t *b;
    struct calls c = {0};
    zbuf_stats_t st = zt_stats();
    cr_assert_eq(zbuf_pool_create(64, 2, &p), 0);
    cr_assert_eq(zbuf_pool_quota_create(p, 1, on_room, &c, &q), 0);
    cr_assert_eq(zbuf_pool_quota_get(q, &b), 0);
    zbuf_pool_quota_delete(q);
    memset(zbuf_buf_data(b), 0xab, 64); /* still a valid buffer */
    zbuf_buf_unref(b);
    cr_assert_eq(c.n, 0, "a deleted quota is not called");
    cr_assert_eq(zbuf_pool_available(p), 2);
    zbuf_pool_delete(p);
    cr_assert_eq(zt_stats().live_pools, st.live_pools);
}

Test(quota, a_deleted_pool_lives_until_its_quotas_and_buffers_are_gone)
{
    zbuf_pool_t *p;
    zbuf_pool_quota_t *q;
    zbuf_buf_t *b, *x;
    struct calls c = {0};
    zbuf_stats_t st = zt_stats();
    cr_assert_eq(zbuf_pool_create(64, 2, &p), 0);
    cr_assert_eq(zbuf_pool_quota_create(p, 1, on_room, &c, &q), 0);
    cr_assert_eq(zbuf_pool_quota_get(q, &b), 0);
    zbuf_pool_delete(p);
    cr_assert_eq(zbuf_pool_quota_get(q, &x), -EINVAL, "the pool is deleted");
    zbuf_buf_unref(b);
    cr_assert_eq(c.n, 0, "no callback after the pool's deletion");
    cr_assert_eq(zt_stats().live_pools, st.live_pools + 1, "the quota keeps the pool");
    cr_assert_eq(zbuf_pool_quota_held(q), 0);
    zbuf_pool_quota_delete(q);
    cr_assert_eq(zt_stats().live_pools, st.live_pools);

    /* The other order: the quota goes first, the pool with its last buffer. */
    cr_assert_eq(zbuf_pool_create(64, 2, &p), 0);
    cr_assert_eq(zbuf_pool_quota_create(p, 1, NULL, NULL, &q), 0);
    cr_assert_eq(zbuf_pool_quota_get(q, &b), 0);
    zbuf_pool_quota_delete(q);
    zbuf_pool_delete(p);
    cr_assert_eq(zt_stats().live_pools, st.live_pools + 1);
    zbuf_buf_unref(b);
    cr_assert_eq(zt_stats().live_pools, st.live_pools);
}

Test(quota, bad_arguments_are_rejected)
{
    zbuf_pool_t *p;
    zbuf_pool_quota_t *q = NULL;
    zbuf_buf_t *b;
    cr_assert_eq(zbuf_pool_create(64, 2, &p), 0);
    cr_assert_eq(zbuf_pool_quota_create(NULL, 1, NULL, NULL, &q), -EINVAL);
    cr_assert_eq(zbuf_pool_quota_create(p, 0, NULL, NULL, &q), -EINVAL);
    cr_assert_eq(zbuf_pool_quota_create(p, 1, NULL, NULL, NULL), -EINVAL);
    cr_assert_null(q);
    cr_assert_eq(zbuf_pool_quota_get(NULL, &b), -EINVAL);
    cr_assert_eq(zbuf_pool_quota_create(p, 1, NULL, NULL, &q), 0);
    cr_assert_eq(zbuf_pool_quota_get(q, NULL), -EINVAL);
    cr_assert_eq(zbuf_pool_quota_set_limit(NULL, 1), -EINVAL);
    cr_assert_eq(zbuf_pool_quota_held(NULL), 0);
    cr_assert_eq(zbuf_pool_quota_limit(NULL), 0);
    cr_assert_null(zbuf_buf_pool(NULL));
    cr_assert_null(zbuf_buf_quota(NULL));
    zbuf_pool_quota_delete(NULL);
    zbuf_pool_quota_delete(q);
    zbuf_pool_delete(p);
    cr_assert_eq(zbuf_pool_create(64, 2, &p), 0);
    zbuf_pool_delete(p); /* nothing out: freed at once */
    cr_assert_eq(zbuf_buf_alloc(8, &b), 0);
    cr_assert_null(zbuf_buf_pool(b), "a heap buffer has no pool");
    cr_assert_null(zbuf_buf_quota(b));
    zbuf_buf_unref(b);
}

Test(quota, copies_and_allocates_nothing_per_buffer)
{
    zbuf_pool_t *p;
    zbuf_pool_quota_t *q;
    cr_assert_eq(zbuf_pool_create(64, 4, &p), 0);
    cr_assert_eq(zbuf_pool_quota_create(p, 2, NULL, NULL, &q), 0);
    zbuf_stats_t st = zt_stats();
    for (int i = 0; i < 100; i++) {
        zbuf_buf_t *b;
        cr_assert_eq(zbuf_pool_quota_get(q, &b), 0);
        zbuf_buf_unref(b);
    }
    cr_assert_eq(zt_stats().allocs, st.allocs);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied);
    zbuf_pool_quota_delete(q);
    zbuf_pool_delete(p);
}

static void delete_quota_on_refill(zbuf_pool_t *p, void *arg)
{
    (void)p;
    zbuf_pool_quota_delete(*(zbuf_pool_quota_t **)arg);
    *(zbuf_pool_quota_t **)arg = NULL;
}

Test(quota, a_notify_callback_may_delete_a_quota_called_back_by_the_same_return)
{
    zbuf_pool_t *p;
    zbuf_pool_quota_t *q;
    zbuf_buf_t *b;
    struct calls c = {0};
    cr_assert_eq(zbuf_pool_create(64, 1, &p), 0);
    cr_assert_eq(zbuf_pool_quota_create(p, 1, on_room, &c, &q), 0);
    cr_assert_eq(zbuf_pool_set_notify(p, delete_quota_on_refill, &q), 0);
    cr_assert_eq(zbuf_pool_quota_get(q, &b), 0);
    zbuf_buf_unref(b); /* both due: the quota's callback runs first */
    cr_assert_eq(c.n, 1);
    cr_assert_null(q, "deleted by the pool's callback after");
    zbuf_pool_delete(p);
}
