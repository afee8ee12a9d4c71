/* SPDX-License-Identifier: MIT */
/*
 * Room around the bytes: zbuf_headroom(), zbuf_tailroom(),
 * zbuf_prepend_space(), zbuf_append_space() and the receive path's
 * zbuf_reserve() / zbuf_commit().  Only library-owned buffers with a single
 * reference are ever written; enrolled, shared and file buffers read as
 * having no room, and growing next to them adds a segment instead.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"
#include "support.h"

ZT_SUITE(room);

/* A zbuf holding bytes [boff, boff + len) of a fresh 256-byte library
 * buffer filled with ZT_PAT(i - boff); the zbuf's segment is the only reference
 * unless @p keep receives a handle. */
static zbuf_t *make_room(size_t boff, size_t len, zbuf_buf_t **keep)
{
    zbuf_buf_t *b;
    zbuf_t *z;
    uint8_t *p;

    cr_assert_eq(zbuf_buf_alloc(256, &b), 0);
    p = zbuf_buf_data(b);
    for (size_t i = 0; i < 256; i++)
        p[i] = ZT_PAT(i - boff);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_insert_ref(z, 0, b, boff, len, NULL), 0);
    zt_check(z);
    if (keep != NULL)
        *keep = b;
    else
        zbuf_buf_unref(b);
    return z;
}

/* Whether [p, p + n) overlaps [q, q + m). */
static bool overlaps(const void *p, size_t n, const void *q, size_t m)
{
    const uint8_t *a = p, *b = q;
    return a < b + m && b < a + n;
}

/* ------------------------------------------------- headroom and tailroom */

Test(room, empty_zbuf_has_none)
{
    zbuf_t *z;

    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_headroom(z), 0);
    cr_assert_eq(zbuf_tailroom(z), 0);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(room, private_library_buffer_has_room_on_both_sides)
{
    zbuf_t *z = make_room(100, 50, NULL);

    cr_assert_eq(zbuf_headroom(z), 100);
    cr_assert_eq(zbuf_tailroom(z), 106);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(room, buffer_a_caller_handle_holds_has_none)
{
    zbuf_buf_t *b;
    zbuf_t *z = make_room(100, 50, &b);

    cr_assert_eq(zbuf_headroom(z), 0);
    cr_assert_eq(zbuf_tailroom(z), 0);
    zbuf_buf_unref(b);
    cr_assert_eq(zbuf_headroom(z), 100);
    cr_assert_eq(zbuf_tailroom(z), 106);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(room, enrolled_buffer_reads_as_none)
{
    static uint8_t area[256];
    zbuf_buf_t *b;
    zbuf_t *z;

    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_buf(z, area + 64, 64, NULL, NULL), 0);
    cr_assert_eq(zbuf_headroom(z), 0);
    cr_assert_eq(zbuf_tailroom(z), 0);
    cr_assert_eq(zbuf_delete(z), 0);

    /* Even with unused enrolled bytes around the segment. */
    cr_assert_eq(zbuf_buf_wrap(area, sizeof area, NULL, NULL, &b), 0);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_ref(z, b, 64, 64), 0);
    zbuf_buf_unref(b);
    cr_assert_eq(zbuf_headroom(z), 0);
    cr_assert_eq(zbuf_tailroom(z), 0);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(room, shared_buffer_reads_as_none_in_both_zbufs)
{
    zbuf_t *z = make_room(100, 50, NULL);
    zbuf_t *d;

    cr_assert_eq(zbuf_dup(z, 10, 20, &d), 0);
    cr_assert_eq(zbuf_headroom(z), 0);
    cr_assert_eq(zbuf_tailroom(z), 0);
    cr_assert_eq(zbuf_headroom(d), 0);
    cr_assert_eq(zbuf_tailroom(d), 0);
    cr_assert_eq(zbuf_delete(d), 0);
    cr_assert_eq(zbuf_headroom(z), 100);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(room, split_buffer_reads_as_none_at_the_split)
{
    zbuf_t *z = make_room(100, 50, NULL);
    zbuf_t *t;

    /* Both halves hold the buffer: neither may grow into it. */
    cr_assert_eq(zbuf_split(z, 20, &t), 0);
    cr_assert_eq(zbuf_tailroom(z), 0);
    cr_assert_eq(zbuf_headroom(t), 0);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zbuf_headroom(t), 120);
    cr_assert_eq(zbuf_tailroom(t), 106);
    cr_assert_eq(zbuf_delete(t), 0);
}

Test(room, only_the_first_and_last_segments_count)
{
    zbuf_t *z = make_room(100, 50, NULL);
    static uint8_t area[8];

    cr_assert_eq(zbuf_prepend_buf(z, area, 8, NULL, NULL), 0);
    cr_assert_eq(zbuf_headroom(z), 0, "first segment is enrolled");
    cr_assert_eq(zbuf_tailroom(z), 106);
    cr_assert_eq(zbuf_append_buf(z, area, 8, NULL, NULL), 0);
    cr_assert_eq(zbuf_tailroom(z), 0, "last segment is enrolled");
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(room, pool_buffer_has_room)
{
    zbuf_pool_t *p;
    zbuf_buf_t *b;
    zbuf_t *z;

    cr_assert_eq(zbuf_pool_create(200, 1, &p), 0);
    cr_assert_eq(zbuf_pool_get(p, &b), 0);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_ref(z, b, 30, 70), 0);
    cr_assert_eq(zbuf_headroom(z), 0, "the caller still holds the pool buffer");
    zbuf_buf_unref(b);
    cr_assert_eq(zbuf_headroom(z), 30);
    cr_assert_eq(zbuf_tailroom(z), 100);
    cr_assert_eq(zbuf_delete(z), 0);
    zbuf_pool_delete(p);
}

Test(room, file_buffer_reads_as_none)
{
    char path[] = "/tmp/zbuf-room-XXXXXX";
    int fd = mkstemp(path);
    zbuf_buf_t *b;
    zbuf_t *z;
    void *data = NULL;

    cr_assert_geq(fd, 0);
    unlink(path);
    cr_assert_eq(ftruncate(fd, 100), 0);
    cr_assert_eq(zbuf_buf_wrap_file(fd, 0, 100, NULL, NULL, &b), 0);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_ref(z, b, 40, 20), 0);
    zbuf_buf_unref(b);
    cr_assert_eq(zbuf_headroom(z), 0);
    cr_assert_eq(zbuf_tailroom(z), 0);
    cr_assert_eq(zbuf_prepend_space(z, 4, &data), 0);
    cr_assert_eq(zbuf_seg_count(z), 2);
    cr_assert_eq(zbuf_append_space(z, 4, &data), 0);
    cr_assert_eq(zbuf_seg_count(z), 3);
    zt_check(z);
    cr_assert_eq(zbuf_delete(z), 0);
    close(fd);
}

/* -------------------------------------------------------- prepend_space */

Test(room, prepend_space_uses_private_headroom_without_a_new_segment)
{
    zbuf_t *z = make_room(100, 50, NULL);
    void *first = zbuf_seg_data(z, zbuf_seg_first(z));
    void *data = NULL;
    zbuf_stats_t st = zt_stats();
    uint8_t want[60];

    cr_assert_eq(zbuf_prepend_space(z, 10, &data), 0);
    zt_check(z);
    cr_assert_eq(data, (uint8_t *)first - 10);
    cr_assert_eq(zbuf_seg_count(z), 1);
    cr_assert_eq(zbuf_length(z), 60);
    cr_assert_eq(zbuf_headroom(z), 90);
    cr_assert_eq(zbuf_seg_data(z, zbuf_seg_first(z)), data);
    memset(data, 0xab, 10);
    memset(want, 0xab, 10);
    for (size_t i = 0; i < 50; i++)
        want[10 + i] = ZT_PAT(i);
    zt_expect_bytes(z, want, 60);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied, "existing bytes must not move");
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(room, prepend_space_uses_all_of_the_headroom_then_adds_a_segment)
{
    zbuf_t *z = make_room(100, 50, NULL);
    void *data = NULL;

    cr_assert_eq(zbuf_prepend_space(z, 100, &data), 0);
    cr_assert_eq(zbuf_seg_count(z), 1);
    cr_assert_eq(zbuf_headroom(z), 0);
    cr_assert_eq(zbuf_prepend_space(z, 1, &data), 0);
    cr_assert_eq(zbuf_seg_count(z), 2);
    cr_assert_eq(zbuf_length(z), 151);
    zt_check(z);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(room, prepend_space_larger_than_the_headroom_adds_a_segment)
{
    zbuf_t *z = make_room(100, 50, NULL);
    void *first = zbuf_seg_data(z, zbuf_seg_first(z));
    void *data = NULL;

    cr_assert_eq(zbuf_prepend_space(z, 101, &data), 0);
    zt_check(z);
    cr_assert_eq(zbuf_seg_count(z), 2);
    cr_assert_eq(zbuf_length(z), 151);
    cr_assert_eq(zbuf_seg_data(z, zbuf_seg_first(z)), data);
    cr_assert_eq(zbuf_seg_data(z, zbuf_seg_last(z)), first);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(room, prepend_space_on_an_empty_zbuf_leaves_default_headroom)
{
    zbuf_t *z;
    void *data = NULL, *again = NULL;

    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_prepend_space(z, 20, &data), 0);
    zt_check(z);
    cr_assert_not_null(data);
    cr_assert_eq(zbuf_length(z), 20);
    cr_assert_eq(zbuf_seg_count(z), 1);
    cr_assert_geq(zbuf_headroom(z), ZBUF_HEADROOM_DEFAULT);
    memcpy(data, "....................", 20);
    /* The next layer's header fits in front without a new segment. */
    cr_assert_eq(zbuf_prepend_space(z, ZBUF_HEADROOM_DEFAULT, &again), 0);
    cr_assert_eq(zbuf_seg_count(z), 1);
    cr_assert_eq(again, (uint8_t *)data - ZBUF_HEADROOM_DEFAULT);
    zt_check(z);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(room, prepend_space_never_writes_into_enrolled_memory)
{
    static uint8_t area[256];
    zbuf_buf_t *b;
    zbuf_t *z;
    void *data = NULL;
    zbuf_stats_t st;

    memset(area, 0xa5, sizeof area);
    cr_assert_eq(zbuf_buf_wrap(area, sizeof area, NULL, NULL, &b), 0);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_ref(z, b, 128, 64), 0);
    zbuf_buf_unref(b);
    st = zt_stats();
    cr_assert_eq(zbuf_prepend_space(z, 16, &data), 0);
    zt_check(z);
    cr_assert_eq(zbuf_seg_count(z), 2, "must add a segment in front of enrolled memory");
    cr_assert_eq(zbuf_length(z), 80);
    cr_assert(!overlaps(data, 16, area, sizeof area), "space handed out inside enrolled memory");
    memset(data, 0x11, 16);
    cr_assert_eq(zbuf_seg_data(z, zbuf_seg_last(z)), area + 128);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied);
    cr_assert_eq(zbuf_append_space(z, 16, &data), 0);
    cr_assert(!overlaps(data, 16, area, sizeof area), "space handed out inside enrolled memory");
    memset(data, 0x22, 16);
    cr_assert_eq(zbuf_seg_count(z), 3);
    zt_check(z);
    for (size_t i = 0; i < sizeof area; i++)
        cr_assert_eq(area[i], 0xa5, "enrolled byte %zu was written", i);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(room, prepend_space_on_a_shared_buffer_leaves_the_other_zbuf_alone)
{
    zbuf_t *z = make_room(100, 50, NULL);
    zbuf_t *d;
    zt_snap_t before;
    void *data = NULL;
    uint8_t *base = (uint8_t *)zbuf_seg_data(z, zbuf_seg_first(z)) - 100;
    uint8_t saved[256];

    memcpy(saved, base, 256);
    cr_assert_eq(zbuf_dup(z, 0, ZBUF_TO_END, &d), 0);
    zt_snap(&before, d);
    cr_assert_eq(zbuf_prepend_space(z, 8, &data), 0);
    cr_assert_eq(zbuf_seg_count(z), 2);
    cr_assert(!overlaps(data, 8, base, 256), "wrote into a shared buffer's headroom");
    memset(data, 0, 8);
    cr_assert_eq(zbuf_append_space(z, 8, &data), 0);
    cr_assert(!overlaps(data, 8, base, 256), "wrote into a shared buffer's tailroom");
    memset(data, 0, 8);
    cr_assert_eq(memcmp(saved, base, 256), 0, "shared buffer written");
    zt_assert_unchanged(&before, d);
    cr_assert_eq(zbuf_delete(d), 0);
    cr_assert_eq(zbuf_delete(z), 0);
}

static void space_rejected(bool front, zbuf_t *z, size_t len, void **data, int want)
{
    zt_snap_t before;
    zbuf_stats_t st = zt_stats();

    zt_snap(&before, z);
    if (front)
        cr_assert_eq(zbuf_prepend_space(z, len, data), want);
    else
        cr_assert_eq(zbuf_append_space(z, len, data), want);
    zt_assert_unchanged(&before, z);
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs);
}

Test(room, space_with_null_data_is_einval)
{
    static const size_t lens[] = {4};
    zbuf_t *z = zt_make(lens, 1);

    space_rejected(true, z, 4, NULL, -EINVAL);
    space_rejected(false, z, 4, NULL, -EINVAL);
    zt_expect_released(zt_none, 1);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(room, space_of_zero_bytes_adds_no_segment)
{
    static const size_t lens[] = {4};
    zbuf_t *z = zt_make(lens, 1);
    zt_snap_t before;
    void *data;
    int rc;

    zt_snap(&before, z);
    rc = zbuf_prepend_space(z, 0, &data);
    cr_assert(rc == 0 || rc == -EINVAL, "rc %d", rc);
    rc = zbuf_append_space(z, 0, &data);
    cr_assert(rc == 0 || rc == -EINVAL, "rc %d", rc);
    zt_assert_unchanged(&before, z);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(room, space_on_null_or_deleted_zbuf_is_einval)
{
    zbuf_t *z;
    void *data = NULL;

    cr_assert_eq(zbuf_prepend_space(NULL, 4, &data), -EINVAL);
    cr_assert_eq(zbuf_append_space(NULL, 4, &data), -EINVAL);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zbuf_prepend_space(z, 4, &data), -EINVAL);
    cr_assert_eq(zbuf_append_space(z, 4, &data), -EINVAL);
    cr_assert_eq(zbuf_headroom(NULL), 0);
    cr_assert_eq(zbuf_tailroom(NULL), 0);
}

/* --------------------------------------------------------- append_space */

Test(room, append_space_uses_private_tailroom_without_a_new_segment)
{
    zbuf_t *z = make_room(100, 50, NULL);
    uint8_t *first = zbuf_seg_data(z, zbuf_seg_first(z));
    void *data = NULL;
    zbuf_stats_t st = zt_stats();
    uint8_t want[156];

    cr_assert_eq(zbuf_append_space(z, 106, &data), 0);
    zt_check(z);
    cr_assert_eq(data, first + 50);
    cr_assert_eq(zbuf_seg_count(z), 1);
    cr_assert_eq(zbuf_length(z), 156);
    cr_assert_eq(zbuf_tailroom(z), 0);
    memset(data, 0xcd, 106);
    for (size_t i = 0; i < 50; i++)
        want[i] = ZT_PAT(i);
    memset(want + 50, 0xcd, 106);
    zt_expect_bytes(z, want, 156);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(room, append_space_larger_than_the_tailroom_adds_a_segment)
{
    zbuf_t *z = make_room(100, 50, NULL);
    void *data = NULL;

    cr_assert_eq(zbuf_append_space(z, 107, &data), 0);
    zt_check(z);
    cr_assert_eq(zbuf_seg_count(z), 2);
    cr_assert_eq(zbuf_seg_data(z, zbuf_seg_last(z)), data);
    cr_assert_eq(zbuf_seg_length(z, zbuf_seg_last(z)), 107);
    cr_assert_eq(zbuf_length(z), 157);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(room, append_space_grows_into_the_room_it_made)
{
    zbuf_t *z;
    void *a = NULL, *b = NULL;
    size_t room;

    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_space(z, 10, &a), 0);
    zt_check(z);
    cr_assert_eq(zbuf_seg_count(z), 1);
    memset(a, 'a', 10);
    room = zbuf_tailroom(z);
    cr_assert_eq(zbuf_append_space(z, 5, &b), 0);
    zt_check(z);
    memset(b, 'b', 5);
    if (room >= 5) {
        cr_assert_eq(zbuf_seg_count(z), 1, "tailroom %zu was not used", room);
        cr_assert_eq(b, (uint8_t *)a + 10);
    } else {
        cr_assert_eq(zbuf_seg_count(z), 2);
    }
    zt_expect_bytes(z, (const uint8_t *)"aaaaaaaaaabbbbb", 15);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(room, append_space_after_an_enrolled_segment_adds_one)
{
    static const size_t lens[] = {8};
    zbuf_t *z = zt_make(lens, 1);
    uint8_t saved[ZT_SEGMAX];
    void *data = NULL;

    memcpy(saved, zt_mem[0], ZT_SEGMAX);
    cr_assert_eq(zbuf_append_space(z, 4, &data), 0);
    zt_check(z);
    cr_assert_eq(zbuf_seg_count(z), 2);
    cr_assert(!overlaps(data, 4, zt_mem[0], ZT_SEGMAX));
    memset(data, 0xff, 4);
    cr_assert_eq(memcmp(saved, zt_mem[0], ZT_SEGMAX), 0);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zt_released[0], 1);
}

/* ------------------------------------------------------ reserve, commit */

Test(room, reserve_on_empty_zbuf_gives_one_fresh_area)
{
    zbuf_t *z;
    struct iovec iov[2];
    int cnt = 0;
    zbuf_stats_t st = zt_stats();

    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_reserve(z, 100, iov, &cnt), 0);
    cr_assert_eq(cnt, 1);
    cr_assert_geq(iov[0].iov_len, 100);
    cr_assert_not_null(iov[0].iov_base);
    cr_assert_eq(zbuf_length(z), 0, "reserved space is not part of the zbuf");
    cr_assert_eq(zbuf_seg_count(z), 0);
    zt_check(z);
    for (size_t i = 0; i < 100; i++)
        ((uint8_t *)iov[0].iov_base)[i] = ZT_PAT(i);
    cr_assert_eq(zbuf_commit(z, 60), 0);
    zt_check(z);
    zt_expect_pat(z, 0, 60);
    cr_assert_eq(zbuf_seg_count(z), 1);
    cr_assert_eq(zbuf_seg_data(z, zbuf_seg_first(z)), iov[0].iov_base);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(room, reserve_uses_private_tailroom_first_then_a_fresh_buffer)
{
    zbuf_t *z = make_room(0, 200, NULL); /* 56 bytes of tailroom */
    uint8_t *end = (uint8_t *)zbuf_seg_data(z, zbuf_seg_first(z)) + 200;
    struct iovec iov[2];
    int cnt = 0;
    size_t n = 0;

    cr_assert_eq(zbuf_reserve(z, 100, iov, &cnt), 0);
    cr_assert_eq(cnt, 2);
    cr_assert_eq(iov[0].iov_base, end);
    cr_assert_eq(iov[0].iov_len, 56);
    cr_assert_geq(iov[0].iov_len + iov[1].iov_len, 100);
    cr_assert(!overlaps(iov[1].iov_base, iov[1].iov_len, end - 200, 256));
    cr_assert_eq(zbuf_length(z), 200);
    for (int k = 0; k < cnt; k++)
        for (size_t i = 0; i < iov[k].iov_len; i++, n++)
            ((uint8_t *)iov[k].iov_base)[i] = ZT_PAT(200 + n);
    cr_assert_eq(zbuf_commit(z, 90), 0);
    zt_check(z);
    zt_expect_pat(z, 0, 290);
    cr_assert_eq(zbuf_seg_count(z), 2, "the tailroom extends the last segment");
    cr_assert_eq(zbuf_seg_length(z, zbuf_seg_first(z)), 256);
    cr_assert_eq(zbuf_seg_data(z, zbuf_seg_last(z)), iov[1].iov_base);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(room, commit_within_the_tailroom_extends_the_last_segment)
{
    zbuf_t *z = make_room(0, 200, NULL);
    struct iovec iov[2];
    int cnt = 0;

    cr_assert_eq(zbuf_reserve(z, 100, iov, &cnt), 0);
    memset(iov[0].iov_base, 0x7e, 30);
    cr_assert_eq(zbuf_commit(z, 30), 0);
    zt_check(z);
    cr_assert_eq(zbuf_seg_count(z), 1);
    cr_assert_eq(zbuf_length(z), 230);
    cr_assert_eq(zbuf_tailroom(z), 26);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(room, reserve_that_fits_the_tailroom_starts_there)
{
    zbuf_t *z = make_room(0, 200, NULL);
    uint8_t *end = (uint8_t *)zbuf_seg_data(z, zbuf_seg_first(z)) + 200;
    struct iovec iov[2];
    int cnt = 0;

    cr_assert_eq(zbuf_reserve(z, 40, iov, &cnt), 0);
    cr_assert(cnt == 1 || cnt == 2, "cnt %d", cnt);
    cr_assert_eq(iov[0].iov_base, end);
    cr_assert_geq(iov[0].iov_len, 40);
    memset(end, 1, 40);
    cr_assert_eq(zbuf_commit(z, 40), 0);
    cr_assert_eq(zbuf_seg_count(z), 1);
    cr_assert_eq(zbuf_length(z), 240);
    zt_check(z);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(room, reserve_after_an_enrolled_or_shared_segment_uses_only_a_fresh_buffer)
{
    static const size_t lens[] = {8};
    zbuf_t *z = zt_make(lens, 1);
    zbuf_t *r = make_room(0, 200, NULL);
    zbuf_t *d;
    struct iovec iov[2];
    int cnt = 0;
    uint8_t saved[ZT_SEGMAX];
    uint8_t *rbase = zbuf_seg_data(r, zbuf_seg_first(r));

    memcpy(saved, zt_mem[0], ZT_SEGMAX);
    cr_assert_eq(zbuf_reserve(z, 16, iov, &cnt), 0);
    cr_assert_eq(cnt, 1);
    cr_assert(!overlaps(iov[0].iov_base, iov[0].iov_len, zt_mem[0], ZT_SEGMAX));
    memset(iov[0].iov_base, 0, 16);
    cr_assert_eq(zbuf_commit(z, 16), 0);
    cr_assert_eq(zbuf_seg_count(z), 2);
    cr_assert_eq(memcmp(saved, zt_mem[0], ZT_SEGMAX), 0);
    zt_check(z);

    cr_assert_eq(zbuf_dup(r, 0, 10, &d), 0);
    cr_assert_eq(zbuf_reserve(r, 16, iov, &cnt), 0);
    cr_assert_eq(cnt, 1);
    cr_assert(!overlaps(iov[0].iov_base, iov[0].iov_len, rbase, 256));
    cr_assert_eq(zbuf_commit(r, 0), 0);
    cr_assert_eq(zbuf_seg_count(r), 1);
    cr_assert_eq(zbuf_delete(d), 0);
    cr_assert_eq(zbuf_delete(r), 0);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(room, commit_zero_drops_the_reservation)
{
    zbuf_t *z = make_room(0, 100, NULL);
    zt_snap_t before;
    struct iovec iov[2];
    int cnt = 0;
    zbuf_stats_t st = zt_stats();

    zt_snap(&before, z);
    cr_assert_eq(zbuf_reserve(z, 500, iov, &cnt), 0);
    cr_assert_eq(zbuf_commit(z, 0), 0);
    zt_assert_unchanged(&before, z);
    cr_assert_eq(zbuf_commit(z, 0), -EINVAL, "the reservation must be gone");
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs, "the fresh buffer must be freed");
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(room, commit_without_reserve_is_einval)
{
    zbuf_t *z = make_room(0, 100, NULL);
    zt_snap_t before;

    zt_snap(&before, z);
    cr_assert_eq(zbuf_commit(z, 0), -EINVAL);
    cr_assert_eq(zbuf_commit(z, 10), -EINVAL);
    zt_assert_unchanged(&before, z);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(room, commit_more_than_reserved_is_erange_and_keeps_the_reservation)
{
    zbuf_t *z;
    struct iovec iov[2];
    int cnt = 0;
    size_t total;

    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_copy(z, "abc", 3), 0);
    cr_assert_eq(zbuf_reserve(z, 50, iov, &cnt), 0);
    total = iov[0].iov_len + (cnt == 2 ? iov[1].iov_len : 0);
    cr_assert_eq(zbuf_commit(z, total + 1), -ERANGE);
    cr_assert_eq(zbuf_commit(z, SIZE_MAX), -ERANGE);
    cr_assert_eq(zbuf_length(z), 3);
    zt_check(z);
    memset(iov[0].iov_base, 'd', 1);
    cr_assert_eq(zbuf_commit(z, 1), 0);
    zt_expect_bytes(z, (const uint8_t *)"abcd", 4);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(room, commit_of_everything_reserved)
{
    zbuf_t *z = make_room(0, 240, NULL);
    struct iovec iov[2];
    int cnt = 0;
    size_t total;

    cr_assert_eq(zbuf_reserve(z, 64, iov, &cnt), 0);
    total = iov[0].iov_len + (cnt == 2 ? iov[1].iov_len : 0);
    cr_assert_geq(total, 64);
    for (int k = 0; k < cnt; k++)
        memset(iov[k].iov_base, 0x3c, iov[k].iov_len);
    cr_assert_eq(zbuf_commit(z, total), 0);
    zt_check(z);
    cr_assert_eq(zbuf_length(z), 240 + total);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(room, a_modifying_call_drops_the_reservation)
{
    zbuf_t *z = make_room(0, 100, NULL);
    struct iovec iov[2];
    int cnt = 0;
    zbuf_stats_t st = zt_stats();
    void *data;

    cr_assert_eq(zbuf_reserve(z, 50, iov, &cnt), 0);
    cr_assert_eq(zbuf_append_copy(z, "x", 1), 0);
    cr_assert_eq(zbuf_commit(z, 10), -EINVAL);
    cr_assert_eq(zbuf_length(z), 101);

    cr_assert_eq(zbuf_reserve(z, 50, iov, &cnt), 0);
    cr_assert_eq(zbuf_cut(z, 0, 1, NULL), 0);
    cr_assert_eq(zbuf_commit(z, 10), -EINVAL);

    cr_assert_eq(zbuf_reserve(z, 50, iov, &cnt), 0);
    cr_assert_eq(zbuf_prepend_space(z, 1, &data), 0);
    cr_assert_eq(zbuf_commit(z, 10), -EINVAL);
    cr_assert_eq(zbuf_length(z), 101);
    zt_check(z);
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs + (int64_t)zbuf_seg_count(z) - 1,
                 "a dropped reservation leaked its buffer");
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(room, read_only_calls_keep_the_reservation)
{
    zbuf_t *z = make_room(0, 100, NULL);
    struct iovec iov[2], out[4];
    int cnt = 0;
    uint8_t tmp[10];
    zbuf_cursor_t c;

    cr_assert_eq(zbuf_reserve(z, 50, iov, &cnt), 0);
    memset(iov[0].iov_base, 0x44, 50 < iov[0].iov_len ? 50 : iov[0].iov_len);
    cr_assert_eq(zbuf_copyout(z, 0, tmp, 10), 10);
    cr_assert_eq(zbuf_length(z), 100);
    cr_assert_eq(zbuf_iovec(z, 0, ZBUF_TO_END, out, 4, NULL), 1);
    cr_assert_eq(zbuf_cursor_init(&c, z, 0), 0);
    cr_assert_eq(zbuf_cursor_skip(&c, 100), 0);
    zt_check(z);
    cr_assert_eq(zbuf_commit(z, 20), 0);
    cr_assert_eq(zbuf_length(z), 120);
    zt_check(z);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(room, second_reserve_replaces_the_first)
{
    zbuf_t *z;
    struct iovec iov[2];
    int cnt = 0;
    zbuf_stats_t st;

    cr_assert_eq(zbuf_create(&z), 0);
    st = zt_stats();
    cr_assert_eq(zbuf_reserve(z, 100, iov, &cnt), 0);
    cr_assert_eq(zbuf_reserve(z, 10, iov, &cnt), 0);
    cr_assert_eq(cnt, 1);
    memcpy(iov[0].iov_base, "0123456789", 10);
    cr_assert_eq(zbuf_commit(z, 10), 0);
    zt_expect_bytes(z, (const uint8_t *)"0123456789", 10);
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs + 1, "the first reservation leaked");
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(room, delete_with_a_reservation_frees_it)
{
    zbuf_t *z;
    struct iovec iov[2];
    int cnt = 0;

    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_reserve(z, 1000, iov, &cnt), 0);
    cr_assert_eq(zbuf_delete(z), 0);
    /* the suite's leak check proves the fresh buffer went too */
}

Test(room, reserve_rejects_bad_arguments)
{
    zbuf_t *z = make_room(0, 100, NULL);
    zt_snap_t before;
    struct iovec iov[2];
    int cnt = 0, rc;
    zbuf_stats_t st = zt_stats();

    zt_snap(&before, z);
    cr_assert_eq(zbuf_reserve(z, 10, NULL, &cnt), -EINVAL);
    cr_assert_eq(zbuf_reserve(z, 10, iov, NULL), -EINVAL);
    cr_assert_eq(zbuf_reserve(NULL, 10, iov, &cnt), -EINVAL);
    rc = zbuf_reserve(z, 0, iov, &cnt);
    cr_assert(rc == 0 || rc == -EINVAL, "rc %d", rc);
    if (rc == 0)
        cr_assert_eq(zbuf_commit(z, 0), 0);
    zt_assert_unchanged(&before, z);
    cr_assert_eq(zbuf_commit(z, 0), -EINVAL);
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zbuf_reserve(z, 10, iov, &cnt), -EINVAL, "deleted zbuf");
    cr_assert_eq(zbuf_commit(z, 0), -EINVAL, "deleted zbuf");
    cr_assert_eq(zbuf_commit(NULL, 0), -EINVAL);
}

Test(room, readv_into_a_reservation)
{
    int fds[2];
    zbuf_t *z;
    struct iovec iov[2];
    int cnt = 0;
    ssize_t n;
    char msg[300];

    for (size_t i = 0; i < sizeof msg; i++)
        msg[i] = (char)ZT_PAT(i);
    cr_assert_eq(pipe(fds), 0);
    cr_assert_eq(write(fds[1], msg, sizeof msg), (ssize_t)sizeof msg);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_reserve(z, sizeof msg, iov, &cnt), 0);
    n = readv(fds[0], iov, cnt);
    cr_assert_eq(n, (ssize_t)sizeof msg);
    cr_assert_eq(zbuf_commit(z, (size_t)n), 0);
    zt_expect_pat(z, 0, sizeof msg);
    cr_assert_eq(zbuf_delete(z), 0);
    close(fds[0]);
    close(fds[1]);
}
