/* SPDX-License-Identifier: MIT */
/*
 * Putting bytes into a zbuf: zbuf_insert_buf() (enrol caller memory),
 * zbuf_insert_ref() (share a buffer), zbuf_insert_copy() (copy), zbuf_insert()
 * (move another zbuf's segments) and their append/prepend wrappers.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "support.h"

ZT_SUITE(insert);

/* A model of the expected bytes: ZT_PAT(0 .. total-1) with @p n bytes of
 * @p ins put in at @p off. */
static void model_insert(uint8_t *out, size_t total, size_t off, const uint8_t *ins, size_t n)
{
    size_t j = 0;
    for (size_t i = 0; i < off; i++)
        out[j++] = ZT_PAT(i);
    for (size_t i = 0; i < n; i++)
        out[j++] = ins[i];
    for (size_t i = off; i < total; i++)
        out[j++] = ZT_PAT(i);
}

/* Number of segments after inserting one segment at @p off of a zbuf whose
 * segment lengths are @p lens: one more at a boundary, two more inside. */
static size_t segs_after_insert(const size_t *lens, size_t n, size_t off)
{
    size_t pos = 0;
    for (size_t k = 0; k < n; k++) {
        if (off > pos && off < pos + lens[k])
            return n + 2;
        pos += lens[k];
    }
    return n + 1;
}

/* ------------------------------------------------------------ insert_buf */

Test(insert, buf_into_empty_zbuf_at_zero)
{
    static uint8_t area[10] = "abcdefghi";
    zbuf_t *z;
    zbuf_seg_t *s = NULL;
    int rel = 0;

    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_insert_buf(z, 0, area, 10, zt_count_release, &rel, &s), 0);
    zt_check(z);
    cr_assert_eq(zbuf_length(z), 10);
    cr_assert_eq(zbuf_seg_count(z), 1);
    cr_assert_eq(s, zbuf_seg_first(z));
    cr_assert_eq(zbuf_seg_data(z, s), area, "enrolled memory must not be copied");
    cr_assert_eq(zbuf_seg_length(z, s), 10);
    cr_assert_eq(rel, 0);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(rel, 1);
}

Test(insert, buf_into_empty_zbuf_at_off_end)
{
    static uint8_t area[4] = {1, 2, 3, 4};
    zbuf_t *z;
    int rel = 0;

    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_insert_buf(z, ZBUF_OFF_END, area, 4, zt_count_release, &rel, NULL), 0);
    zt_expect_bytes(z, area, 4);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(rel, 1);
}

Test(insert, buf_at_every_offset_puts_bytes_before_that_byte)
{
    static const size_t lens[] = {3, 1, 4};
    static uint8_t area[5] = {0xa0, 0xa1, 0xa2, 0xa3, 0xa4};

    for (size_t off = 0; off <= 8; off++) {
        zbuf_t *z;
        zbuf_seg_t *s = NULL;
        uint8_t want[13];
        int rel = 0;

        memset(zt_released, 0, sizeof zt_released);
        z = zt_make(lens, 3);
        cr_assert_eq(zbuf_insert_buf(z, off, area, 5, zt_count_release, &rel, &s), 0);
        zt_check(z);
        model_insert(want, 8, off, area, 5);
        zt_expect_bytes(z, want, 13);
        cr_assert_eq(zbuf_seg_count(z), segs_after_insert(lens, 3, off), "off %zu", off);
        cr_assert_eq(zbuf_seg_data(z, s), area);
        cr_assert_eq(zbuf_seg_length(z, s), 5);
        {
            size_t at = 99;
            cr_assert_eq(zbuf_locate(z, s, 0, &at), 0);
            cr_assert_eq(at, off, "new segment starts at %zu, expected %zu", at, off);
        }
        zt_expect_released(zt_none, 3);
        cr_assert_eq(rel, 0);
        cr_assert_eq(zbuf_delete(z), 0);
        cr_assert_eq(rel, 1);
        for (size_t k = 0; k < 3; k++)
            cr_assert_eq(zt_released[k], 1);
    }
}

Test(insert, buf_off_end_appends_after_last_byte)
{
    static const size_t lens[] = {3, 1};
    static uint8_t area[2] = {0xee, 0xef};
    zbuf_t *z = zt_make(lens, 2);
    uint8_t want[6];

    cr_assert_eq(zbuf_insert_buf(z, ZBUF_OFF_END, area, 2, NULL, NULL, NULL), 0);
    model_insert(want, 4, 4, area, 2);
    zt_expect_bytes(z, want, 6);
    cr_assert_eq(zbuf_seg_count(z), 3);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(insert, buf_inside_a_segment_splits_it_around_the_new_one)
{
    static const size_t lens[] = {10};
    static uint8_t area[3] = {7, 7, 7};
    zbuf_t *z = zt_make(lens, 1);
    zbuf_seg_t *s1, *s2, *s3;

    cr_assert_eq(zbuf_insert_buf(z, 4, area, 3, NULL, NULL, NULL), 0);
    zt_check(z);
    cr_assert_eq(zbuf_seg_count(z), 3);
    s1 = zbuf_seg_first(z);
    s2 = zbuf_seg_next(z, s1);
    s3 = zbuf_seg_next(z, s2);
    cr_assert_eq(zbuf_seg_data(z, s1), zt_mem[0]);
    cr_assert_eq(zbuf_seg_length(z, s1), 4);
    cr_assert_eq(zbuf_seg_data(z, s2), area);
    cr_assert_eq(zbuf_seg_data(z, s3), zt_mem[0] + 4, "the tail must share, not copy");
    cr_assert_eq(zbuf_seg_length(z, s3), 6);
    cr_assert_eq(zbuf_seg_buf(z, s1), zbuf_seg_buf(z, s3));
    cr_assert_eq(zbuf_buf_refs(zbuf_seg_buf(z, s1)), 2);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zt_released[0], 1);
}

Test(insert, buf_never_writes_the_enrolled_memory)
{
    static const size_t lens[] = {8, 8};
    static uint8_t area[32];
    zbuf_t *z = zt_make(lens, 2);
    uint8_t saved[ZT_MAXSEGS][ZT_SEGMAX];

    memset(area, 0x5a, sizeof area);
    memcpy(saved, zt_mem, sizeof zt_mem);
    cr_assert_eq(zbuf_insert_buf(z, 3, area, sizeof area, NULL, NULL, NULL), 0);
    cr_assert_eq(zbuf_insert_copy(z, 0, "hdr", 3, NULL), 0);
    cr_assert_eq(zbuf_insert_copy(z, ZBUF_OFF_END, "trl", 3, NULL), 0);
    cr_assert_eq(zbuf_insert_copy(z, 20, "mid", 3, NULL), 0);
    zt_check(z);
    cr_assert_eq(memcmp(saved, zt_mem, sizeof zt_mem), 0);
    for (size_t i = 0; i < sizeof area; i++)
        cr_assert_eq(area[i], 0x5a, "enrolled byte %zu written", i);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(insert, buf_is_released_only_when_its_last_segment_goes)
{
    static const size_t lens[] = {12};
    zbuf_t *z = zt_make(lens, 1);

    /* Split the buffer over two segments by inserting in the middle. */
    cr_assert_eq(zbuf_insert_copy(z, 6, "--", 2, NULL), 0);
    cr_assert_eq(zbuf_seg_count(z), 3);
    cr_assert_eq(zbuf_cut(z, 0, 6, NULL), 0);
    zt_check(z);
    cr_assert_eq(zt_released[0], 0, "released while a segment still refers to it");
    cr_assert_eq(zbuf_cut(z, 2, ZBUF_TO_END, NULL), 0);
    zt_check(z);
    cr_assert_eq(zt_released[0], 1);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zt_released[0], 1);
}

Test(insert, buf_with_null_callback_is_accepted)
{
    static uint8_t area[3] = {1, 2, 3};
    zbuf_t *z;
    zbuf_stats_t st = zt_stats();

    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_prepend_buf(z, area, 3, NULL, NULL), 0);
    zt_expect_bytes(z, area, 3);
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs + 1);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs);
}

Test(insert, buf_copies_nothing)
{
    static const size_t lens[] = {5, 5};
    static uint8_t area[100];
    zbuf_t *z = zt_make(lens, 2);
    zbuf_stats_t st = zt_stats();

    cr_assert_eq(zbuf_insert_buf(z, 7, area, 100, NULL, NULL, NULL), 0);
    cr_assert_eq(zbuf_append_buf(z, area, 10, NULL, NULL), 0);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied);
    cr_assert_eq(zbuf_delete(z), 0);
}

/* Every rejected zbuf_insert_buf(): the zbuf is unchanged, nothing was
 * enrolled (no buffer counted, callback never runs, even after delete). */
static void buf_rejected(size_t off, void *data, size_t len, int want)
{
    static const size_t lens[] = {3, 4};
    zbuf_t *z = zt_make(lens, 2);
    zt_snap_t before;
    zbuf_stats_t st;
    zbuf_seg_t *s = (zbuf_seg_t *)&before;
    int rel = 0;

    zt_snap(&before, z);
    st = zt_stats();
    cr_assert_eq(zbuf_insert_buf(z, off, data, len, zt_count_release, &rel, &s), want);
    cr_assert_eq(s, (zbuf_seg_t *)&before, "seg written on failure");
    zt_assert_unchanged(&before, z);
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs);
    cr_assert_eq(zt_stats().live_segs, st.live_segs);
    zt_expect_released(zt_none, 2);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(rel, 0, "callback of a rejected enrolment ran");
}

Test(insert, buf_past_the_end_is_erange)
{
    static uint8_t area[4];
    buf_rejected(8, area, 4, -ERANGE);
    buf_rejected(SIZE_MAX - 1, area, 4, -ERANGE);
}

Test(insert, buf_zero_length_is_einval)
{
    static uint8_t area[4];
    buf_rejected(0, area, 0, -EINVAL);
    buf_rejected(ZBUF_OFF_END, area, 0, -EINVAL);
}

Test(insert, buf_null_data_is_einval)
{
    buf_rejected(0, NULL, 4, -EINVAL);
}

Test(insert, buf_into_null_or_deleted_zbuf_is_einval)
{
    static uint8_t area[4];
    zbuf_t *z;
    int rel = 0;

    cr_assert_eq(zbuf_insert_buf(NULL, 0, area, 4, zt_count_release, &rel, NULL), -EINVAL);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zbuf_insert_buf(z, 0, area, 4, zt_count_release, &rel, NULL), -EINVAL);
    cr_assert_eq(rel, 0);
}

Test(insert, buf_into_empty_zbuf_only_offset_zero_or_end)
{
    static uint8_t area[4];
    zbuf_t *z;
    int rel = 0;

    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_insert_buf(z, 1, area, 4, zt_count_release, &rel, NULL), -ERANGE);
    zt_check(z);
    cr_assert_eq(zbuf_length(z), 0);
    cr_assert_eq(zbuf_seg_count(z), 0);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(rel, 0);
}

/* ------------------------------------------------------------ insert_ref */

Test(insert, ref_takes_a_reference_and_the_caller_keeps_its_own)
{
    zbuf_buf_t *b;
    zbuf_t *z;
    zbuf_seg_t *s = NULL;
    zbuf_stats_t st = zt_stats();

    cr_assert_eq(zbuf_buf_alloc(64, &b), 0);
    for (size_t i = 0; i < 64; i++)
        ((uint8_t *)zbuf_buf_data(b))[i] = ZT_PAT(i);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_insert_ref(z, 0, b, 10, 20, &s), 0);
    zt_check(z);
    cr_assert_eq(zbuf_buf_refs(b), 2);
    cr_assert_eq(zbuf_seg_buf(z, s), b);
    cr_assert_eq(zbuf_seg_buf_offset(z, s), 10);
    cr_assert_eq(zbuf_seg_data(z, s), (uint8_t *)zbuf_buf_data(b) + 10);
    zt_expect_pat(z, 10, 20);
    zbuf_buf_unref(b); /* our handle; the segment keeps the buffer */
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs + 1);
    zt_expect_pat(z, 10, 20);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs);
}

Test(insert, ref_whole_buffer_and_last_byte)
{
    zbuf_buf_t *b;
    zbuf_t *z;

    cr_assert_eq(zbuf_buf_alloc(8, &b), 0);
    memcpy(zbuf_buf_data(b), "01234567", 8);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_insert_ref(z, 0, b, 0, 8, NULL), 0);
    cr_assert_eq(zbuf_append_ref(z, b, 7, 1), 0); /* does not continue [0, 8): a new segment */
    zt_expect_bytes(z, (const uint8_t *)"012345677", 9);
    cr_assert_eq(zbuf_seg_count(z), 2);
    cr_assert_eq(zbuf_buf_refs(b), 3);
    zbuf_buf_unref(b);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(insert, ref_inside_a_segment_splits_it)
{
    static const size_t lens[] = {6};
    zbuf_t *z = zt_make(lens, 1);
    zbuf_buf_t *b;
    uint8_t want[10];

    cr_assert_eq(zbuf_buf_alloc(4, &b), 0);
    memcpy(zbuf_buf_data(b), "WXYZ", 4);
    cr_assert_eq(zbuf_insert_ref(z, 2, b, 0, 4, NULL), 0);
    zbuf_buf_unref(b);
    model_insert(want, 6, 2, (const uint8_t *)"WXYZ", 4);
    zt_expect_bytes(z, want, 10);
    cr_assert_eq(zbuf_seg_count(z), 3);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zt_released[0], 1);
}

Test(insert, ref_of_an_enrolled_buffer_shares_it_until_every_reference_goes)
{
    static uint8_t area[16];
    zbuf_buf_t *b;
    zbuf_t *a, *c;
    int rel = 0;

    cr_assert_eq(zbuf_buf_wrap(area, 16, zt_count_release, &rel, &b), 0);
    cr_assert_eq(zbuf_create(&a), 0);
    cr_assert_eq(zbuf_create(&c), 0);
    cr_assert_eq(zbuf_append_ref(a, b, 0, 8), 0);
    cr_assert_eq(zbuf_append_ref(c, b, 8, 8), 0);
    zbuf_buf_unref(b);
    cr_assert_eq(rel, 0);
    cr_assert_eq(zbuf_delete(a), 0);
    cr_assert_eq(rel, 0);
    cr_assert_eq(zbuf_delete(c), 0);
    cr_assert_eq(rel, 1);
}

Test(insert, ref_continuing_the_previous_segment_grows_it)
{
    zbuf_buf_t *b;
    zbuf_t *z;
    zbuf_seg_t *s1 = NULL, *s2 = NULL;
    zbuf_stats_t st;

    cr_assert_eq(zbuf_buf_alloc(64, &b), 0);
    for (size_t i = 0; i < 64; i++)
        ((uint8_t *)zbuf_buf_data(b))[i] = ZT_PAT(i);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_insert_ref(z, 0, b, 4, 10, &s1), 0);
    st = zt_stats();
    /* Appending bytes 14..29 of the same buffer continues the segment. */
    cr_assert_eq(zbuf_insert_ref(z, ZBUF_OFF_END, b, 14, 16, &s2), 0);
    zt_check(z);
    cr_assert_eq(s2, s1, "the grown segment is returned");
    cr_assert_eq(zbuf_seg_count(z), 1);
    cr_assert_eq(zbuf_seg_length(z, s1), 26);
    cr_assert_eq(zbuf_buf_refs(b), 2, "no new reference: the segment already holds one");
    cr_assert_eq(zt_stats().live_segs, st.live_segs);
    cr_assert_eq(zt_stats().allocs, st.allocs);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied);
    zt_expect_pat(z, 4, 26);
    /* And with append_ref, again. */
    cr_assert_eq(zbuf_append_ref(z, b, 30, 2), 0);
    cr_assert_eq(zbuf_seg_count(z), 1);
    zt_expect_pat(z, 4, 28);
    zbuf_buf_unref(b);
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs - 1);
}

Test(insert, ref_continuing_a_segment_in_the_middle_grows_it)
{
    zbuf_buf_t *b;
    zbuf_t *z;
    uint8_t tail[4] = {'t', 'a', 'i', 'l'};
    zbuf_seg_t *s1 = NULL, *s2 = NULL;

    cr_assert_eq(zbuf_buf_alloc(32, &b), 0);
    for (size_t i = 0; i < 32; i++)
        ((uint8_t *)zbuf_buf_data(b))[i] = ZT_PAT(i);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_insert_ref(z, 0, b, 0, 8, &s1), 0);
    cr_assert_eq(zbuf_append_copy(z, tail, 4), 0);
    /* At offset 8: the end of the first segment, whose bytes end at 8. */
    cr_assert_eq(zbuf_insert_ref(z, 8, b, 8, 8, &s2), 0);
    zt_check(z);
    cr_assert_eq(s2, s1);
    cr_assert_eq(zbuf_seg_count(z), 2);
    uint8_t got[20];
    cr_assert_eq(zbuf_copyout(z, 0, got, 20), 20);
    for (size_t i = 0; i < 16; i++)
        cr_assert_eq(got[i], ZT_PAT(i), "byte %zu", i);
    cr_assert_eq(memcmp(got + 16, tail, 4), 0);
    zbuf_buf_unref(b);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(insert, ref_not_continuing_makes_a_new_segment)
{
    zbuf_buf_t *b, *c;
    zbuf_t *z;

    cr_assert_eq(zbuf_buf_alloc(32, &b), 0);
    cr_assert_eq(zbuf_buf_alloc(32, &c), 0);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_ref(z, b, 0, 8), 0);
    cr_assert_eq(zbuf_append_ref(z, b, 9, 4), 0);  /* a gap of one byte */
    cr_assert_eq(zbuf_append_ref(z, c, 13, 4), 0); /* another buffer */
    cr_assert_eq(zbuf_append_ref(z, b, 0, 4), 0);  /* goes backwards */
    cr_assert_eq(zbuf_insert_ref(z, 0, b, 8, 1, NULL), 0); /* the next segment, not the previous */
    cr_assert_eq(zbuf_insert_ref(z, 3, b, 3, 1, NULL), 0); /* inside a segment: split, no merge */
    zt_check(z);
    cr_assert_eq(zbuf_seg_count(z), 7);
    zbuf_buf_unref(b);
    zbuf_buf_unref(c);
    cr_assert_eq(zbuf_delete(z), 0);
}

static void ref_rejected(size_t off, zbuf_buf_t *b, size_t boff, size_t len, int want)
{
    static const size_t lens[] = {3, 4};
    zbuf_t *z = zt_make(lens, 2);
    zt_snap_t before;
    unsigned refs = b ? zbuf_buf_refs(b) : 0;
    zbuf_stats_t st;

    zt_snap(&before, z);
    st = zt_stats();
    cr_assert_eq(zbuf_insert_ref(z, off, b, boff, len, NULL), want,
                 "off %zu boff %zu len %zu", off, boff, len);
    zt_assert_unchanged(&before, z);
    if (b != NULL)
        cr_assert_eq(zbuf_buf_refs(b), refs);
    cr_assert_eq(zt_stats().live_segs, st.live_segs);
    zt_expect_released(zt_none, 2);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(insert, ref_range_outside_the_buffer_is_erange)
{
    zbuf_buf_t *b;

    cr_assert_eq(zbuf_buf_alloc(16, &b), 0);
    ref_rejected(0, b, 0, 17, -ERANGE);
    ref_rejected(0, b, 16, 1, -ERANGE);
    ref_rejected(0, b, 10, 7, -ERANGE);
    ref_rejected(0, b, 17, 1, -ERANGE);
    ref_rejected(0, b, 1, SIZE_MAX, -ERANGE);
    ref_rejected(0, b, SIZE_MAX, 2, -ERANGE);
    cr_assert_eq(zbuf_buf_refs(b), 1);
    zbuf_buf_unref(b);
}

Test(insert, ref_offset_past_the_end_is_erange)
{
    zbuf_buf_t *b;

    cr_assert_eq(zbuf_buf_alloc(16, &b), 0);
    ref_rejected(8, b, 0, 4, -ERANGE);
    ref_rejected(SIZE_MAX - 1, b, 0, 4, -ERANGE);
    zbuf_buf_unref(b);
}

Test(insert, ref_zero_length_or_null_buffer_is_einval)
{
    zbuf_buf_t *b;

    cr_assert_eq(zbuf_buf_alloc(16, &b), 0);
    ref_rejected(0, b, 0, 0, -EINVAL);
    ref_rejected(0, b, 16, 0, -EINVAL);
    ref_rejected(0, NULL, 0, 4, -EINVAL);
    zbuf_buf_unref(b);
}

Test(insert, ref_into_null_or_deleted_zbuf_is_einval)
{
    zbuf_buf_t *b;
    zbuf_t *z;

    cr_assert_eq(zbuf_buf_alloc(16, &b), 0);
    cr_assert_eq(zbuf_insert_ref(NULL, 0, b, 0, 4, NULL), -EINVAL);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zbuf_insert_ref(z, 0, b, 0, 4, NULL), -EINVAL);
    cr_assert_eq(zbuf_buf_refs(b), 1);
    zbuf_buf_unref(b);
}

Test(insert, ref_copies_nothing)
{
    zbuf_buf_t *b;
    zbuf_t *z;
    zbuf_stats_t st;

    cr_assert_eq(zbuf_buf_alloc(1000, &b), 0);
    cr_assert_eq(zbuf_create(&z), 0);
    st = zt_stats();
    cr_assert_eq(zbuf_append_ref(z, b, 0, 1000), 0);
    cr_assert_eq(zbuf_insert_ref(z, 500, b, 100, 300, NULL), 0);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied);
    zbuf_buf_unref(b);
    cr_assert_eq(zbuf_delete(z), 0);
}

/* ----------------------------------------------------------- insert_copy */

Test(insert, copy_counts_exactly_the_bytes_copied)
{
    static const size_t lens[] = {3, 4};
    zbuf_t *z = zt_make(lens, 2);
    uint8_t src[300];
    zbuf_stats_t st;

    memset(src, 0x33, sizeof src);
    st = zt_stats();
    cr_assert_eq(zbuf_insert_copy(z, 5, src, 300, NULL), 0);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied + 300);
    cr_assert_geq(zt_stats().copies, st.copies + 1);
    cr_assert_eq(zbuf_insert_copy(z, 0, src, 1, NULL), 0);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied + 301);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(insert, copy_only_borrows_the_source)
{
    uint8_t src[8] = "abcdefg";
    zbuf_t *z;

    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_copy(z, src, 8), 0);
    memset(src, 0, sizeof src);
    zt_expect_bytes(z, (const uint8_t *)"abcdefg", 8);
    cr_assert_neq(zbuf_seg_data(z, zbuf_seg_first(z)), (void *)src);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(insert, copy_at_every_offset_puts_bytes_before_that_byte)
{
    static const size_t lens[] = {3, 1, 4};
    static const uint8_t ins[3] = {0xc0, 0xc1, 0xc2};

    for (size_t off = 0; off <= 8; off++) {
        zbuf_t *z;
        zbuf_seg_t *s = NULL;
        uint8_t want[11];
        size_t at = 99;

        memset(zt_released, 0, sizeof zt_released);
        z = zt_make(lens, 3);
        cr_assert_eq(zbuf_insert_copy(z, off, ins, 3, &s), 0);
        model_insert(want, 8, off, ins, 3);
        zt_expect_bytes(z, want, 11);
        cr_assert_eq(zbuf_seg_count(z), segs_after_insert(lens, 3, off), "off %zu", off);
        cr_assert_eq(zbuf_seg_length(z, s), 3);
        cr_assert_eq(zbuf_locate(z, s, 0, &at), 0);
        cr_assert_eq(at, off);
        zt_expect_released(zt_none, 3);
        cr_assert_eq(zbuf_delete(z), 0);
    }
}

Test(insert, copy_prepend_and_append_wrappers)
{
    zbuf_t *z;

    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_copy(z, "cd", 2), 0);
    cr_assert_eq(zbuf_prepend_copy(z, "ab", 2), 0);
    cr_assert_eq(zbuf_append_copy(z, "ef", 2), 0);
    zt_expect_bytes(z, (const uint8_t *)"abcdef", 6);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(insert, copy_leaves_enrolled_neighbours_untouched)
{
    static const size_t lens[] = {4, 4};
    zbuf_t *z = zt_make(lens, 2);
    uint8_t saved[ZT_MAXSEGS][ZT_SEGMAX];

    memcpy(saved, zt_mem, sizeof zt_mem);
    cr_assert_eq(zbuf_insert_copy(z, 4, "zz", 2, NULL), 0);
    cr_assert_eq(zbuf_append_copy(z, "zz", 2), 0);
    cr_assert_eq(zbuf_prepend_copy(z, "zz", 2), 0);
    cr_assert_eq(memcmp(saved, zt_mem, sizeof zt_mem), 0);
    cr_assert_eq(zbuf_delete(z), 0);
}

static void copy_rejected(size_t off, const void *data, size_t len, int want)
{
    static const size_t lens[] = {3, 4};
    zbuf_t *z = zt_make(lens, 2);
    zt_snap_t before;
    zbuf_stats_t st;

    zt_snap(&before, z);
    st = zt_stats();
    cr_assert_eq(zbuf_insert_copy(z, off, data, len, NULL), want);
    zt_assert_unchanged(&before, z);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied);
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs);
    zt_expect_released(zt_none, 2);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(insert, copy_past_the_end_is_erange)
{
    copy_rejected(8, "abc", 3, -ERANGE);
    copy_rejected(SIZE_MAX - 1, "abc", 3, -ERANGE);
}

Test(insert, copy_of_null_data_is_einval)
{
    copy_rejected(0, NULL, 3, -EINVAL);
}

Test(insert, copy_of_zero_bytes_adds_no_segment)
{
    static const size_t lens[] = {3, 4};
    zbuf_t *z = zt_make(lens, 2);
    zt_snap_t before;
    int rc;

    zt_snap(&before, z);
    /* The header does not say whether 0 bytes is an error; either way no
     * empty segment may appear. */
    rc = zbuf_insert_copy(z, 3, "abc", 0, NULL);
    cr_assert(rc == 0 || rc == -EINVAL, "rc %d", rc);
    zt_assert_unchanged(&before, z);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(insert, copy_into_null_or_deleted_zbuf_is_einval)
{
    zbuf_t *z;
    zbuf_stats_t st = zt_stats();

    cr_assert_eq(zbuf_insert_copy(NULL, 0, "abc", 3, NULL), -EINVAL);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zbuf_insert_copy(z, 0, "abc", 3, NULL), -EINVAL);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied);
}

/* ------------------------------------------------- insert (move a zbuf) */

Test(insert, zbuf_moves_segments_and_consumes_src)
{
    static const size_t la[] = {3, 3};
    zbuf_t *dst = zt_make(la, 2);
    zbuf_t *src;
    static uint8_t b1[4] = {0xb0, 0xb1, 0xb2, 0xb3}, b2[2] = {0xb4, 0xb5};
    int r1 = 0, r2 = 0;
    zbuf_seg_t *first = NULL;
    zbuf_stats_t st;
    uint8_t want[12];

    cr_assert_eq(zbuf_create(&src), 0);
    cr_assert_eq(zbuf_append_buf(src, b1, 4, zt_count_release, &r1), 0);
    cr_assert_eq(zbuf_append_buf(src, b2, 2, zt_count_release, &r2), 0);
    st = zt_stats();
    cr_assert_eq(zbuf_insert(dst, 3, src, &first), 0);
    zt_check(dst);
    cr_assert_eq(zt_stats().live_zbufs, st.live_zbufs - 1, "src must be deleted");
    cr_assert_eq(zt_stats().live_segs, st.live_segs);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied);
    cr_assert_eq(r1 + r2, 0, "moving segments released a buffer");
    zt_expect_released(zt_none, 2);
    cr_assert_eq(zbuf_seg_count(dst), 4);
    cr_assert_eq(zbuf_seg_data(dst, first), b1);
    model_insert(want, 6, 3, (const uint8_t[]){0xb0, 0xb1, 0xb2, 0xb3, 0xb4, 0xb5}, 6);
    zt_expect_bytes(dst, want, 12);
    cr_assert_eq(zbuf_delete(dst), 0);
    cr_assert_eq(r1, 1);
    cr_assert_eq(r2, 1);
    cr_assert_eq(zt_released[0], 1);
    cr_assert_eq(zt_released[1], 1);
}

Test(insert, zbuf_at_every_offset_of_every_split_shape)
{
    static const size_t la[] = {3, 1, 4};
    static const uint8_t ins[5] = {0xd0, 0xd1, 0xd2, 0xd3, 0xd4};

    for (size_t off = 0; off <= 8; off++) {
        zbuf_t *dst, *src;
        zbuf_seg_t *first = NULL;
        uint8_t want[13];
        zbuf_stats_t st;
        size_t at = 99;

        memset(zt_released, 0, sizeof zt_released);
        dst = zt_make(la, 3);
        cr_assert_eq(zbuf_create(&src), 0);
        cr_assert_eq(zbuf_append_copy(src, ins, 2), 0);
        cr_assert_eq(zbuf_append_copy(src, ins + 2, 3), 0);
        st = zt_stats();
        cr_assert_eq(zbuf_insert(dst, off, src, &first), 0);
        cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied);
        model_insert(want, 8, off, ins, 5);
        zt_expect_bytes(dst, want, 13);
        cr_assert_eq(zbuf_seg_count(dst), segs_after_insert(la, 3, off) + 1, "off %zu", off);
        cr_assert_eq(zbuf_locate(dst, first, 0, &at), 0);
        cr_assert_eq(at, off);
        cr_assert_eq(zbuf_seg_length(dst, first), 2);
        zt_expect_released(zt_none, 3);
        cr_assert_eq(zbuf_delete(dst), 0);
    }
}

Test(insert, zbuf_off_end_and_append_wrapper_append)
{
    zbuf_t *a, *b, *c;

    cr_assert_eq(zbuf_create(&a), 0);
    cr_assert_eq(zbuf_create(&b), 0);
    cr_assert_eq(zbuf_create(&c), 0);
    cr_assert_eq(zbuf_append_copy(a, "ab", 2), 0);
    cr_assert_eq(zbuf_append_copy(b, "cd", 2), 0);
    cr_assert_eq(zbuf_append_copy(c, "ef", 2), 0);
    cr_assert_eq(zbuf_insert(a, ZBUF_OFF_END, b, NULL), 0);
    cr_assert_eq(zbuf_append(a, c), 0);
    zt_expect_bytes(a, (const uint8_t *)"abcdef", 6);
    cr_assert_eq(zbuf_delete(a), 0);
}

Test(insert, zbuf_into_empty_dst)
{
    static const size_t ls[] = {2, 5};
    zbuf_t *src = zt_make(ls, 2);
    zbuf_t *dst;
    zbuf_seg_t *first = NULL;

    cr_assert_eq(zbuf_create(&dst), 0);
    cr_assert_eq(zbuf_insert(dst, 0, src, &first), 0);
    zt_expect_pat(dst, 0, 7);
    cr_assert_eq(zbuf_seg_count(dst), 2);
    cr_assert_eq(first, zbuf_seg_first(dst));
    cr_assert_eq(zbuf_seg_data(dst, first), zt_mem[0]);
    cr_assert_eq(zbuf_delete(dst), 0);
    cr_assert_eq(zt_released[0] + zt_released[1], 2);
}

Test(insert, zbuf_empty_src_is_consumed_and_first_is_null)
{
    static const size_t la[] = {2, 5};
    zbuf_t *dst = zt_make(la, 2);
    zbuf_t *src;
    zt_snap_t before;
    zbuf_seg_t *first = (zbuf_seg_t *)&before;
    zbuf_stats_t st;

    cr_assert_eq(zbuf_create(&src), 0);
    zt_snap(&before, dst);
    st = zt_stats();
    cr_assert_eq(zbuf_insert(dst, 3, src, &first), 0);
    cr_assert_null(first);
    cr_assert_eq(zt_stats().live_zbufs, st.live_zbufs - 1);
    zt_assert_unchanged(&before, dst);
    cr_assert_eq(zbuf_delete(dst), 0);
}

Test(insert, zbuf_shared_with_dst_releases_only_after_both_copies_go)
{
    static const size_t la[] = {6};
    zbuf_t *z = zt_make(la, 1);
    zbuf_t *d;

    cr_assert_eq(zbuf_dup(z, 1, 3, &d), 0);
    cr_assert_eq(zbuf_insert(z, ZBUF_OFF_END, d, NULL), 0);
    zt_check(z);
    cr_assert_eq(zbuf_seg_count(z), 2);
    cr_assert_eq(zbuf_buf_refs(zbuf_seg_buf(z, zbuf_seg_first(z))), 2);
    cr_assert_eq(zbuf_cut(z, 0, 6, NULL), 0);
    cr_assert_eq(zt_released[0], 0);
    {
        uint8_t want[3] = {ZT_PAT(1), ZT_PAT(2), ZT_PAT(3)};
        zt_expect_bytes(z, want, 3);
    }
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zt_released[0], 1);
}

/* A rejected zbuf_insert(): both zbufs unchanged, src still the caller's. */
static void move_rejected(size_t off, bool same, int want)
{
    static const size_t la[] = {3, 4};
    static uint8_t sb[5] = {1, 2, 3, 4, 5};
    zbuf_t *dst = zt_make(la, 2);
    zbuf_t *src;
    zt_snap_t bd, bs;
    zbuf_stats_t st;
    int rs = 0;

    cr_assert_eq(zbuf_create(&src), 0);
    cr_assert_eq(zbuf_append_buf(src, sb, 5, zt_count_release, &rs), 0);
    zt_snap(&bd, dst);
    zt_snap(&bs, src);
    st = zt_stats();
    cr_assert_eq(zbuf_insert(dst, off, same ? dst : src, NULL), want);
    zt_assert_unchanged(&bd, dst);
    zt_assert_unchanged(&bs, src);
    cr_assert_eq(zt_stats().live_zbufs, st.live_zbufs);
    cr_assert_eq(rs, 0);
    zt_expect_released(zt_none, 2);
    cr_assert_eq(zbuf_delete(src), 0, "src must still belong to the caller");
    cr_assert_eq(rs, 1);
    cr_assert_eq(zbuf_delete(dst), 0);
}

Test(insert, zbuf_past_the_end_is_erange_and_keeps_src)
{
    move_rejected(8, false, -ERANGE);
    move_rejected(SIZE_MAX - 1, false, -ERANGE);
}

Test(insert, zbuf_into_itself_is_einval)
{
    move_rejected(0, true, -EINVAL);
    move_rejected(ZBUF_OFF_END, true, -EINVAL);
}

Test(insert, zbuf_with_null_or_deleted_handles_is_einval)
{
    zbuf_t *a, *gone;
    zt_snap_t sa;

    cr_assert_eq(zbuf_create(&a), 0);
    cr_assert_eq(zbuf_append_copy(a, "abc", 3), 0);
    cr_assert_eq(zbuf_create(&gone), 0);
    cr_assert_eq(zbuf_delete(gone), 0);
    zt_snap(&sa, a);
    cr_assert_eq(zbuf_insert(NULL, 0, a, NULL), -EINVAL);
    zt_assert_unchanged(&sa, a);
    cr_assert_eq(zbuf_insert(a, 0, NULL, NULL), -EINVAL);
    zt_assert_unchanged(&sa, a);
    cr_assert_eq(zbuf_insert(gone, 0, a, NULL), -EINVAL);
    zt_assert_unchanged(&sa, a);
    cr_assert_eq(zbuf_insert(a, 0, gone, NULL), -EINVAL);
    zt_assert_unchanged(&sa, a);
    cr_assert_eq(zbuf_delete(a), 0, "a must still belong to the caller");
}
