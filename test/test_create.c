/* SPDX-License-Identifier: MIT */
/*
 * zbuf_create(), zbuf_delete(), zbuf_length(), zbuf_seg_count(): the life
 * cycle of a zbuf and when deleting it releases the buffers it referenced.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "fixture.h"
#include "support.h"

ZT_SUITE(create);

Test(create, new_zbuf_is_empty_and_consistent)
{
    zbuf_t *z = NULL;
    size_t seg_off = 99;

    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_not_null(z);
    zt_check(z);
    cr_assert_eq(zbuf_length(z), 0);
    cr_assert_eq(zbuf_seg_count(z), 0);
    cr_assert_null(zbuf_seg_first(z));
    cr_assert_null(zbuf_seg_last(z));
    cr_assert_null(zbuf_seg_find(z, 0, &seg_off));
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(create, counts_one_live_zbuf_until_deleted)
{
    zbuf_stats_t before = zt_stats();
    zbuf_t *z;

    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zt_stats().live_zbufs, before.live_zbufs + 1);
    cr_assert_eq(zt_stats().live_segs, before.live_segs);
    cr_assert_eq(zt_stats().live_bufs, before.live_bufs);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zt_stats().live_zbufs, before.live_zbufs);
}

Test(create, two_zbufs_are_distinct_handles)
{
    zbuf_t *a, *b;

    cr_assert_eq(zbuf_create(&a), 0);
    cr_assert_eq(zbuf_create(&b), 0);
    cr_assert_neq(a, b);
    cr_assert_eq(zbuf_append_copy(a, "xy", 2), 0);
    zt_check(a);
    cr_assert_eq(zbuf_length(a), 2);
    cr_assert_eq(zbuf_length(b), 0);
    zt_check(a);
    zt_check(b);
    cr_assert_eq(zbuf_delete(a), 0);
    cr_assert_eq(zbuf_delete(b), 0);
}

Test(create, null_out_is_einval_and_creates_nothing)
{
    zbuf_stats_t before = zt_stats();

    cr_assert_eq(zbuf_create(NULL), -EINVAL);
    cr_assert_eq(zt_stats().live_zbufs, before.live_zbufs);
}

Test(create, delete_null_is_a_noop)
{
    zbuf_stats_t before = zt_stats();

    cr_assert_eq(zbuf_delete(NULL), 0);
    cr_assert_eq(zt_stats().live_zbufs, before.live_zbufs);
}

Test(create, delete_twice_is_einval)
{
    zbuf_t *z;

    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zbuf_delete(z), -EINVAL);
}

Test(create, length_and_seg_count_of_null_are_zero)
{
    cr_assert_eq(zbuf_length(NULL), 0);
    cr_assert_eq(zbuf_seg_count(NULL), 0);
}

Test(create, length_and_seg_count_follow_the_segments)
{
    static const size_t lens[] = {3, 1, 7, 2};
    zbuf_t *z = zt_make(lens, 4);

    cr_assert_eq(zbuf_length(z), 13);
    cr_assert_eq(zbuf_seg_count(z), 4);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(create, delete_releases_every_enrolled_buffer_once)
{
    static const size_t lens[] = {5, 9, 1};
    zbuf_t *z = zt_make(lens, 3);
    zbuf_stats_t before = zt_stats();

    for (size_t k = 0; k < 3; k++)
        cr_assert_eq(zt_released[k], 0, "buffer %zu released before delete", k);
    cr_assert_eq(zbuf_delete(z), 0);
    for (size_t k = 0; k < 3; k++)
        cr_assert_eq(zt_released[k], 1, "buffer %zu released %d times", k, zt_released[k]);
    cr_assert_eq(zt_stats().live_segs, before.live_segs - 3);
    cr_assert_eq(zt_stats().live_bufs, before.live_bufs - 3);
    cr_assert_eq(zt_stats().live_zbufs, before.live_zbufs - 1);
}

/* Records what the release callback received. */
struct seen {
    void *data;
    size_t size;
    int calls;
};

static void record_release(void *data, size_t size, void *arg)
{
    struct seen *s = arg;
    s->data = data;
    s->size = size;
    s->calls++;
}

Test(create, release_callback_gets_the_enrolled_address_and_size)
{
    static uint8_t area[40];
    struct seen seen = {0};
    zbuf_t *z;

    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_insert_buf(z, 0, area, sizeof area, record_release, &seen, NULL), 0);
    zt_check(z);
    /* Cutting the middle splits the segment: still one buffer. */
    cr_assert_eq(zbuf_cut(z, 10, 5, NULL), 0);
    zt_check(z);
    cr_assert_eq(seen.calls, 0);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(seen.calls, 1);
    cr_assert_eq(seen.data, area);
    cr_assert_eq(seen.size, sizeof area);
}

Test(create, delete_of_a_null_callback_buffer_releases_silently)
{
    static uint8_t area[16];
    zbuf_stats_t before = zt_stats();
    zbuf_t *z;

    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_insert_buf(z, 0, area, sizeof area, NULL, NULL, NULL), 0);
    zt_check(z);
    cr_assert_eq(zt_stats().live_bufs, before.live_bufs + 1);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zt_stats().live_bufs, before.live_bufs);
}

Test(create, delete_keeps_buffers_another_zbuf_shares)
{
    static const size_t lens[] = {4, 4};
    zbuf_t *z = zt_make(lens, 2);
    zbuf_t *d;

    cr_assert_eq(zbuf_dup(z, 2, 4, &d), 0); /* shares both buffers */
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zt_released[0], 0);
    cr_assert_eq(zt_released[1], 0);
    zt_check(d);
    cr_assert_eq(zbuf_length(d), 4);
    cr_assert_eq(zbuf_delete(d), 0);
    cr_assert_eq(zt_released[0], 1);
    cr_assert_eq(zt_released[1], 1);
}

Test(create, delete_keeps_buffers_a_caller_handle_holds)
{
    zbuf_buf_t *b;
    zbuf_t *z;
    zbuf_stats_t before = zt_stats();

    cr_assert_eq(zbuf_buf_alloc(32, &b), 0);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_ref(z, b, 0, 32), 0);
    zt_check(z);
    cr_assert_eq(zbuf_buf_refs(b), 2);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zbuf_buf_refs(b), 1);
    cr_assert_eq(zt_stats().live_bufs, before.live_bufs + 1);
    zbuf_buf_unref(b);
    cr_assert_eq(zt_stats().live_bufs, before.live_bufs);
}

Test(create, delete_of_an_empty_zbuf_releases_nothing)
{
    zbuf_t *z;
    zbuf_stats_t before = zt_stats();

    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zt_stats().live_bufs, before.live_bufs);
    cr_assert_eq(zt_stats().live_segs, before.live_segs);
}

Test(create, many_zbufs_come_and_go_without_leaks)
{
    zbuf_t *zs[100];
    zbuf_stats_t before = zt_stats();

    for (int round = 0; round < 3; round++) {
        for (size_t i = 0; i < 100; i++) {
            cr_assert_eq(zbuf_create(&zs[i]), 0);
            cr_assert_eq(zbuf_append_copy(zs[i], &i, sizeof i), 0);
        }
        cr_assert_eq(zt_stats().live_zbufs, before.live_zbufs + 100);
        for (size_t i = 0; i < 100; i++) {
            size_t v = 0;
            cr_assert_eq(zbuf_copyout(zs[i], 0, &v, sizeof v), (ssize_t)sizeof v);
            cr_assert_eq(v, i);
            cr_assert_eq(zbuf_delete(zs[i]), 0);
        }
        cr_assert_eq(zt_stats().live_zbufs, before.live_zbufs);
        cr_assert_eq(zt_stats().live_bufs, before.live_bufs);
    }
}

Test(create, check_of_null_or_deleted_zbuf_is_einval)
{
    zbuf_t *z;

    cr_assert_eq(zbuf_check(NULL), -EINVAL);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zbuf_check(z), -EINVAL);
}
