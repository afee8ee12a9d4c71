/* SPDX-License-Identifier: MIT */
/*
 * zbuf_cut(): deleting a byte range.  Segments that become empty go (their
 * buffers released at once if nobody else holds them), a cut strictly inside
 * one segment splits it, and nothing is ever copied.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "support.h"

ZT_SUITE(cut);

/* The segment @p after holds byte @p off of @p z (the first byte after a
 * cut made at @p off), or is NULL when @p off is the end. */
static void expect_after(const zbuf_t *z, const zbuf_seg_t *after, size_t off)
{
    size_t start = 0;

    if (off == zbuf_length(z)) {
        cr_assert_null(after, "cut reached the end: after must be NULL");
        return;
    }
    cr_assert_not_null(after, "no segment after the cut at %zu", off);
    cr_assert_eq(zbuf_locate(z, after, 0, &start), 0, "after is not a segment of z");
    cr_assert_leq(start, off);
    cr_assert_lt(off, start + zbuf_seg_length(z, after), "after does not hold byte %zu", off);
}

Test(cut, inside_one_segment_splits_it)
{
    static const size_t lens[] = {10};
    zbuf_t *z = zt_make(lens, 1);
    zbuf_seg_t *after = NULL, *first;
    zbuf_stats_t st = zt_stats();
    uint8_t want[6];

    cr_assert_eq(zbuf_cut(z, 3, 4, &after), 0);
    zt_check(z);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied);
    cr_assert_eq(zbuf_seg_count(z), 2);
    first = zbuf_seg_first(z);
    cr_assert_eq(zbuf_seg_data(z, first), zt_mem[0]);
    cr_assert_eq(zbuf_seg_length(z, first), 3);
    cr_assert_eq(after, zbuf_seg_next(z, first));
    cr_assert_eq(zbuf_seg_data(z, after), zt_mem[0] + 7);
    cr_assert_eq(zbuf_seg_length(z, after), 3);
    cr_assert_eq(zbuf_buf_refs(zbuf_seg_buf(z, after)), 2);
    for (size_t i = 0; i < 3; i++) {
        want[i] = ZT_PAT(i);
        want[3 + i] = ZT_PAT(7 + i);
    }
    zt_expect_bytes(z, want, 6);
    cr_assert_eq(zt_released[0], 0);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zt_released[0], 1);
}

Test(cut, whole_segment_releases_its_buffer_now)
{
    static const size_t lens[] = {3, 4, 5};
    zbuf_t *z = zt_make(lens, 3);
    zbuf_seg_t *after = NULL;
    static const int want[3] = {0, 1, 0};

    cr_assert_eq(zbuf_cut(z, 3, 4, &after), 0);
    zt_check(z);
    zt_expect_released(want, 3);
    cr_assert_eq(zbuf_seg_count(z), 2);
    cr_assert_eq(zbuf_seg_data(z, after), zt_mem[2]);
    expect_after(z, after, 3);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zt_released[0] + zt_released[1] + zt_released[2], 3);
}

Test(cut, front_of_a_segment_shortens_it_without_release)
{
    static const size_t lens[] = {6, 4};
    zbuf_t *z = zt_make(lens, 2);
    zbuf_seg_t *after = NULL;

    cr_assert_eq(zbuf_cut(z, 0, 2, &after), 0);
    zt_check(z);
    cr_assert_eq(zbuf_seg_count(z), 2);
    cr_assert_eq(after, zbuf_seg_first(z));
    cr_assert_eq(zbuf_seg_data(z, after), zt_mem[0] + 2);
    zt_expect_pat(z, 2, 8);
    zt_expect_released(zt_none, 2);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(cut, end_of_a_segment_shortens_it_without_release)
{
    static const size_t lens[] = {6, 4};
    zbuf_t *z = zt_make(lens, 2);
    zbuf_seg_t *after = NULL;
    uint8_t want[8];

    cr_assert_eq(zbuf_cut(z, 4, 2, &after), 0);
    zt_check(z);
    cr_assert_eq(zbuf_seg_count(z), 2);
    cr_assert_eq(zbuf_seg_data(z, after), zt_mem[1]);
    for (size_t i = 0; i < 4; i++)
        want[i] = ZT_PAT(i);
    for (size_t i = 0; i < 4; i++)
        want[4 + i] = ZT_PAT(6 + i);
    zt_expect_bytes(z, want, 8);
    zt_expect_released(zt_none, 2);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(cut, across_segments_releases_only_the_covered_ones)
{
    static const size_t lens[] = {4, 2, 3, 4};
    zbuf_t *z = zt_make(lens, 4);
    zbuf_seg_t *after = NULL;
    static const int want_rel[4] = {0, 1, 1, 0};
    uint8_t want[6];

    /* bytes 2 .. 10: the tail of #0, all of #1 and #2, the head of #3 */
    cr_assert_eq(zbuf_cut(z, 2, 9, &after), 0);
    zt_check(z);
    zt_expect_released(want_rel, 4);
    cr_assert_eq(zbuf_seg_count(z), 2);
    cr_assert_eq(zbuf_seg_data(z, after), zt_mem[3] + 2);
    want[0] = ZT_PAT(0);
    want[1] = ZT_PAT(1);
    want[2] = ZT_PAT(11);
    want[3] = ZT_PAT(12);
    zt_expect_bytes(z, want, 4);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(cut, to_end_reports_no_segment_after)
{
    static const size_t lens[] = {4, 4};
    zbuf_t *z = zt_make(lens, 2);
    zbuf_seg_t *after = (zbuf_seg_t *)&after;
    static const int want_rel[2] = {0, 1};

    cr_assert_eq(zbuf_cut(z, 3, ZBUF_TO_END, &after), 0);
    zt_check(z);
    cr_assert_null(after);
    zt_expect_pat(z, 0, 3);
    zt_expect_released(want_rel, 2);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(cut, explicit_length_to_the_end_reports_no_segment_after)
{
    static const size_t lens[] = {4, 4};
    zbuf_t *z = zt_make(lens, 2);
    zbuf_seg_t *after = (zbuf_seg_t *)&after;

    cr_assert_eq(zbuf_cut(z, 5, 3, &after), 0);
    cr_assert_null(after);
    zt_expect_pat(z, 0, 5);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(cut, everything_leaves_an_empty_zbuf)
{
    static const size_t lens[] = {4, 4, 1};
    zbuf_t *z = zt_make(lens, 3);
    zbuf_seg_t *after = (zbuf_seg_t *)&after;
    static const int all[3] = {1, 1, 1};
    zbuf_stats_t st = zt_stats();

    cr_assert_eq(zbuf_cut(z, 0, ZBUF_TO_END, &after), 0);
    zt_check(z);
    cr_assert_null(after);
    cr_assert_eq(zbuf_length(z), 0);
    cr_assert_eq(zbuf_seg_count(z), 0);
    cr_assert_null(zbuf_seg_first(z));
    cr_assert_null(zbuf_seg_last(z));
    zt_expect_released(all, 3);
    cr_assert_eq(zt_stats().live_segs, st.live_segs - 3);
    /* The empty zbuf is still usable. */
    cr_assert_eq(zbuf_append_copy(z, "x", 1), 0);
    zt_expect_bytes(z, (const uint8_t *)"x", 1);
    cr_assert_eq(zbuf_delete(z), 0);
    zt_expect_released(all, 3);
}

Test(cut, every_range_matches_a_model)
{
    static const size_t lens[] = {3, 1, 4, 2};

    for (size_t off = 0; off <= 10; off++) {
        for (size_t len = 0; off + len <= 10; len++) {
            zbuf_t *z;
            zbuf_seg_t *after = NULL;
            zbuf_stats_t st;
            uint8_t want[10];
            size_t n = 0, pos = 0;

            memset(zt_released, 0, sizeof zt_released);
            z = zt_make(lens, 4);
            st = zt_stats();
            cr_assert_eq(zbuf_cut(z, off, len, &after), 0, "off %zu len %zu", off, len);
            cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied);
            for (size_t i = 0; i < 10; i++)
                if (i < off || i >= off + len)
                    want[n++] = ZT_PAT(i);
            zt_expect_bytes(z, want, n);
            expect_after(z, after, off);
            /* A buffer is released exactly when the cut covers all of it. */
            for (size_t k = 0; k < 4; k++) {
                int covered = len > 0 && off <= pos && pos + lens[k] <= off + len;
                cr_assert_eq(zt_released[k], covered, "off %zu len %zu buffer %zu", off, len, k);
                pos += lens[k];
            }
            cr_assert_eq(zbuf_delete(z), 0);
            for (size_t k = 0; k < 4; k++)
                cr_assert_eq(zt_released[k], 1);
        }
    }
}

Test(cut, zero_length_changes_nothing)
{
    static const size_t lens[] = {3, 4};
    zbuf_t *z = zt_make(lens, 2);
    zt_snap_t before;

    zt_snap(&before, z);
    for (size_t off = 0; off <= 7; off++) {
        zbuf_seg_t *after = NULL;
        cr_assert_eq(zbuf_cut(z, off, 0, &after), 0, "off %zu", off);
        zt_expect_pat(z, 0, 7);
        expect_after(z, after, off);
    }
    cr_assert_eq(zbuf_length(z), before.len);
    zt_expect_released(zt_none, 2);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(cut, of_an_empty_zbuf)
{
    zbuf_t *z;
    zbuf_seg_t *after = (zbuf_seg_t *)&after;

    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_cut(z, 0, ZBUF_TO_END, &after), 0);
    cr_assert_null(after);
    cr_assert_eq(zbuf_cut(z, 0, 0, NULL), 0);
    cr_assert_eq(zbuf_cut(z, 0, 1, NULL), -ERANGE);
    cr_assert_eq(zbuf_cut(z, 1, ZBUF_TO_END, NULL), -ERANGE);
    zt_check(z);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(cut, shared_buffer_is_released_only_by_the_last_holder)
{
    static const size_t lens[] = {8};
    zbuf_t *z = zt_make(lens, 1);
    zbuf_t *d;

    cr_assert_eq(zbuf_dup(z, 0, ZBUF_TO_END, &d), 0);
    cr_assert_eq(zbuf_cut(z, 0, ZBUF_TO_END, NULL), 0);
    cr_assert_eq(zt_released[0], 0, "the dup still holds the buffer");
    zt_expect_pat(d, 0, 8);
    cr_assert_eq(zbuf_cut(d, 0, 8, NULL), 0);
    cr_assert_eq(zt_released[0], 1);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zbuf_delete(d), 0);
    cr_assert_eq(zt_released[0], 1);
}

Test(cut, handle_held_buffer_survives_the_cut)
{
    zbuf_buf_t *b;
    zbuf_t *z;
    zbuf_stats_t st = zt_stats();

    cr_assert_eq(zbuf_buf_alloc(16, &b), 0);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_ref(z, b, 0, 16), 0);
    cr_assert_eq(zbuf_cut(z, 0, ZBUF_TO_END, NULL), 0);
    cr_assert_eq(zbuf_buf_refs(b), 1);
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs + 1);
    zbuf_buf_unref(b);
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(cut, library_buffer_is_freed_when_cut_away)
{
    static const size_t lens[] = {5, 5};
    zbuf_t *z = zt_make_heap(lens, 2);
    zbuf_stats_t st = zt_stats();

    cr_assert_eq(zbuf_cut(z, 0, 5, NULL), 0);
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs - 1);
    cr_assert_eq(zt_stats().live_segs, st.live_segs - 1);
    zt_expect_pat(z, 5, 5);
    cr_assert_eq(zbuf_delete(z), 0);
}

/* A rejected cut: the zbuf is unchanged and nothing is released. */
static void cut_rejected(size_t off, size_t len, int want)
{
    static const size_t lens[] = {3, 4};
    zbuf_t *z = zt_make(lens, 2);
    zt_snap_t before;
    zbuf_stats_t st;

    zt_snap(&before, z);
    st = zt_stats();
    cr_assert_eq(zbuf_cut(z, off, len, NULL), want, "off %zu len %zu", off, len);
    zt_assert_unchanged(&before, z);
    cr_assert_eq(zt_stats().live_segs, st.live_segs);
    zt_expect_released(zt_none, 2);
    cr_assert_eq(zbuf_delete(z), 0);
    memset(zt_released, 0, sizeof zt_released);
}

Test(cut, range_outside_is_erange)
{
    cut_rejected(8, 0, -ERANGE);
    cut_rejected(8, ZBUF_TO_END, -ERANGE);
    cut_rejected(0, 8, -ERANGE);
    cut_rejected(3, 5, -ERANGE);
    cut_rejected(6, 2, -ERANGE);
    cut_rejected(SIZE_MAX, 1, -ERANGE);
    cut_rejected(1, SIZE_MAX - 1, -ERANGE);
    cut_rejected(2, SIZE_MAX - 1, -ERANGE);
}

Test(cut, null_or_deleted_zbuf_is_einval)
{
    zbuf_t *z;

    cr_assert_eq(zbuf_cut(NULL, 0, 0, NULL), -EINVAL);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zbuf_cut(z, 0, ZBUF_TO_END, NULL), -EINVAL);
}
