/* SPDX-License-Identifier: MIT */
/*
 * zbuf_split() and zbuf_split_head(): cutting a zbuf in two at an offset by
 * moving segments.  A segment straddling the offset is split into two that
 * share its buffer; nothing is copied and nothing is released.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "support.h"

ZT_SUITE(split);

/* Whether @p off falls strictly inside one of the segments. */
static bool inside_a_segment(const size_t *lens, size_t n, size_t off)
{
    size_t pos = 0;
    for (size_t k = 0; k < n; k++) {
        if (off > pos && off < pos + lens[k])
            return true;
        pos += lens[k];
    }
    return false;
}

/* Split (or split_head) at every offset of a segmented zbuf and check both
 * halves: bytes, segment counts, no copy, no release, shared memory. */
static void split_everywhere(bool head)
{
    static const size_t lens[] = {3, 1, 4, 2};

    for (size_t off = 0; off <= 10; off++) {
        zbuf_t *z, *part = NULL, *front, *back;
        zbuf_stats_t st;
        size_t expect_segs;

        memset(zt_released, 0, sizeof zt_released);
        z = zt_make(lens, 4);
        st = zt_stats();
        if (head)
            cr_assert_eq(zbuf_split_head(z, off, &part), 0, "off %zu", off);
        else
            cr_assert_eq(zbuf_split(z, off, &part), 0, "off %zu", off);
        cr_assert_not_null(part);
        cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied);
        cr_assert_eq(zt_stats().live_zbufs, st.live_zbufs + 1);
        cr_assert_eq(zt_stats().live_bufs, st.live_bufs);
        zt_expect_released(zt_none, 4);
        front = head ? part : z;
        back = head ? z : part;
        zt_check(front);
        zt_check(back);
        zt_expect_pat(front, 0, off);
        zt_expect_pat(back, off, 10 - off);
        expect_segs = 4 + (inside_a_segment(lens, 4, off) ? 1 : 0);
        cr_assert_eq(zbuf_seg_count(front) + zbuf_seg_count(back), expect_segs, "off %zu",
                     off);
        if (off > 0 && off < 10) {
            /* The back starts where the front ended, in the same memory. */
            zbuf_seg_t *fl = zbuf_seg_last(front), *bf = zbuf_seg_first(back);
            if (inside_a_segment(lens, 4, off)) {
                cr_assert_eq(zbuf_seg_buf(front, fl), zbuf_seg_buf(back, bf));
                cr_assert_eq((uint8_t *)zbuf_seg_data(front, fl) + zbuf_seg_length(front, fl),
                             zbuf_seg_data(back, bf));
                cr_assert_eq(zbuf_buf_refs(zbuf_seg_buf(back, bf)), 2);
            } else {
                cr_assert_neq(zbuf_seg_buf(front, fl), zbuf_seg_buf(back, bf));
            }
        }
        cr_assert_eq(zbuf_delete(z), 0);
        cr_assert_eq(zbuf_delete(part), 0);
        for (size_t k = 0; k < 4; k++)
            cr_assert_eq(zt_released[k], 1, "off %zu buffer %zu released %d times", off, k,
                         zt_released[k]);
    }
}

Test(split, at_every_offset_moves_the_tail)
{
    split_everywhere(false);
}

Test(split, head_at_every_offset_moves_the_head)
{
    split_everywhere(true);
}

Test(split, at_zero_moves_everything)
{
    static const size_t lens[] = {3, 4};
    zbuf_t *z = zt_make(lens, 2);
    zbuf_t *t;

    cr_assert_eq(zbuf_split(z, 0, &t), 0);
    zt_check(z);
    zt_check(t);
    cr_assert_eq(zbuf_length(z), 0);
    cr_assert_eq(zbuf_seg_count(z), 0);
    cr_assert_null(zbuf_seg_first(z));
    zt_expect_pat(t, 0, 7);
    cr_assert_eq(zbuf_seg_data(t, zbuf_seg_first(t)), zt_mem[0]);
    cr_assert_eq(zbuf_delete(z), 0);
    zt_expect_released(zt_none, 2);
    cr_assert_eq(zbuf_delete(t), 0);
    cr_assert_eq(zt_released[0] + zt_released[1], 2);
}

Test(split, at_the_end_gives_an_empty_tail)
{
    static const size_t lens[] = {3, 4};
    zbuf_t *z = zt_make(lens, 2);
    zbuf_t *t;
    zt_snap_t before;

    zt_snap(&before, z);
    cr_assert_eq(zbuf_split(z, 7, &t), 0);
    zt_check(t);
    cr_assert_eq(zbuf_length(t), 0);
    cr_assert_eq(zbuf_seg_count(t), 0);
    zt_assert_unchanged(&before, z);
    cr_assert_eq(zbuf_delete(t), 0);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(split, head_at_zero_gives_an_empty_head_and_at_end_takes_all)
{
    static const size_t lens[] = {3, 4};
    zbuf_t *z = zt_make(lens, 2);
    zbuf_t *h;
    zt_snap_t before;

    zt_snap(&before, z);
    cr_assert_eq(zbuf_split_head(z, 0, &h), 0);
    cr_assert_eq(zbuf_length(h), 0);
    zt_assert_unchanged(&before, z);
    cr_assert_eq(zbuf_delete(h), 0);
    cr_assert_eq(zbuf_split_head(z, 7, &h), 0);
    zt_expect_pat(h, 0, 7);
    cr_assert_eq(zbuf_length(z), 0);
    zt_check(z);
    cr_assert_eq(zbuf_delete(z), 0);
    zt_expect_released(zt_none, 2);
    cr_assert_eq(zbuf_delete(h), 0);
}

Test(split, of_an_empty_zbuf_at_zero)
{
    zbuf_t *z, *t;

    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_split(z, 0, &t), 0);
    zt_check(z);
    zt_check(t);
    cr_assert_eq(zbuf_length(t), 0);
    cr_assert_eq(zbuf_delete(t), 0);
    cr_assert_eq(zbuf_split_head(z, 0, &t), 0);
    cr_assert_eq(zbuf_length(t), 0);
    cr_assert_eq(zbuf_delete(t), 0);
    cr_assert_eq(zbuf_split(z, 1, &t), -ERANGE);
    cr_assert_eq(zbuf_split_head(z, 1, &t), -ERANGE);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(split, inside_a_segment_releases_the_buffer_after_both_halves)
{
    static const size_t lens[] = {10};
    zbuf_t *z = zt_make(lens, 1);
    zbuf_t *t;

    cr_assert_eq(zbuf_split(z, 4, &t), 0);
    cr_assert_eq(zbuf_seg_data(z, zbuf_seg_first(z)), zt_mem[0]);
    cr_assert_eq(zbuf_seg_data(t, zbuf_seg_first(t)), zt_mem[0] + 4);
    cr_assert_eq(zbuf_seg_buf_offset(t, zbuf_seg_first(t)), 4);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zt_released[0], 0);
    zt_expect_pat(t, 4, 6);
    cr_assert_eq(zbuf_delete(t), 0);
    cr_assert_eq(zt_released[0], 1);
}

Test(split, head_inside_a_segment_releases_the_buffer_after_both_halves)
{
    static const size_t lens[] = {10};
    zbuf_t *z = zt_make(lens, 1);
    zbuf_t *h;

    cr_assert_eq(zbuf_split_head(z, 4, &h), 0);
    cr_assert_eq(zbuf_seg_data(h, zbuf_seg_first(h)), zt_mem[0]);
    cr_assert_eq(zbuf_seg_data(z, zbuf_seg_first(z)), zt_mem[0] + 4);
    cr_assert_eq(zbuf_delete(h), 0);
    cr_assert_eq(zt_released[0], 0);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zt_released[0], 1);
}

Test(split, halves_are_independent_zbufs)
{
    static const size_t lens[] = {5, 5};
    zbuf_t *z = zt_make(lens, 2);
    zbuf_t *t;
    uint8_t want[8];

    cr_assert_eq(zbuf_split(z, 5, &t), 0);
    cr_assert_eq(zbuf_append_copy(z, "ab", 2), 0);
    cr_assert_eq(zbuf_prepend_copy(t, "c", 1), 0);
    zt_check(z);
    zt_check(t);
    for (size_t i = 0; i < 5; i++)
        want[i] = ZT_PAT(i);
    memcpy(want + 5, "ab", 2);
    zt_expect_bytes(z, want, 7);
    want[0] = 'c';
    for (size_t i = 0; i < 5; i++)
        want[1 + i] = ZT_PAT(5 + i);
    zt_expect_bytes(t, want, 6);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zbuf_delete(t), 0);
}

Test(split, repeated_framing_takes_messages_off_the_front)
{
    static const size_t lens[] = {7, 2, 9, 3, 5};
    zbuf_t *z = zt_make(lens, 5);
    size_t pos = 0;

    /* Frames of 4 bytes, none aligned with a segment. */
    while (zbuf_length(z) >= 4) {
        zbuf_t *h;
        zbuf_stats_t st = zt_stats();

        cr_assert_eq(zbuf_split_head(z, 4, &h), 0);
        cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied);
        zt_expect_pat(h, pos, 4);
        zt_expect_pat(z, pos + 4, 26 - pos - 4);
        cr_assert_eq(zbuf_delete(h), 0);
        pos += 4;
    }
    cr_assert_eq(pos, 24);
    cr_assert_eq(zt_released[0] + zt_released[1] + zt_released[2] + zt_released[3], 4);
    cr_assert_eq(zt_released[4], 0);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zt_released[4], 1);
}

/* A rejected split: no new zbuf, z unchanged, nothing released. */
static void split_rejected(bool head, size_t off, bool null_out, int want)
{
    static const size_t lens[] = {3, 4};
    zbuf_t *z = zt_make(lens, 2);
    zbuf_t *t = NULL;
    zt_snap_t before;
    zbuf_stats_t st;
    int rc;

    zt_snap(&before, z);
    st = zt_stats();
    if (head)
        rc = zbuf_split_head(z, off, null_out ? NULL : &t);
    else
        rc = zbuf_split(z, off, null_out ? NULL : &t);
    cr_assert_eq(rc, want, "off %zu", off);
    zt_assert_unchanged(&before, z);
    cr_assert_eq(zt_stats().live_zbufs, st.live_zbufs);
    cr_assert_eq(zt_stats().live_segs, st.live_segs);
    zt_expect_released(zt_none, 2);
    cr_assert_eq(zbuf_delete(z), 0);
    memset(zt_released, 0, sizeof zt_released);
}

Test(split, past_the_end_is_erange)
{
    for (int head = 0; head <= 1; head++) {
        split_rejected(head, 8, false, -ERANGE);
        split_rejected(head, SIZE_MAX - 1, false, -ERANGE);
        split_rejected(head, ZBUF_OFF_END, false, -ERANGE);
    }
}

Test(split, null_out_is_einval)
{
    split_rejected(false, 3, true, -EINVAL);
    split_rejected(true, 3, true, -EINVAL);
}

Test(split, null_or_deleted_zbuf_is_einval)
{
    zbuf_t *z, *t;
    zbuf_stats_t st;

    cr_assert_eq(zbuf_split(NULL, 0, &t), -EINVAL);
    cr_assert_eq(zbuf_split_head(NULL, 0, &t), -EINVAL);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_delete(z), 0);
    st = zt_stats();
    cr_assert_eq(zbuf_split(z, 0, &t), -EINVAL);
    cr_assert_eq(zbuf_split_head(z, 0, &t), -EINVAL);
    cr_assert_eq(zt_stats().live_zbufs, st.live_zbufs);
}
