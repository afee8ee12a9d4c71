/* SPDX-License-Identifier: MIT */
/*
 * Copying on request: zbuf_pullup() (make a range contiguous), zbuf_peek()
 * (look at a range, copying only when it spans segments), zbuf_writable()
 * and zbuf_unshare() (replace shared, enrolled or file bytes by private
 * copies).  Every copied byte is counted; ranges already in the wanted shape
 * cost nothing.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"
#include "support.h"

ZT_SUITE(pullup);
ZT_SUITE(peek);
ZT_SUITE(writable);
ZT_SUITE(unshare);

/* Index of the segment holding byte @p off (segment lengths @p lens). */
static size_t seg_of(const size_t *lens, size_t off)
{
    size_t k = 0, pos = 0;
    while (off >= pos + lens[k])
        pos += lens[k++];
    return k;
}

/* A file of @p n bytes ZT_PAT(0..n-1), already unlinked. */
static int pat_file(size_t n)
{
    char path[] = "/tmp/zbuf-pullup-XXXXXX";
    int fd = mkstemp(path);
    uint8_t buf[256];

    cr_assert_geq(fd, 0);
    cr_assert_leq(n, sizeof buf);
    unlink(path);
    for (size_t i = 0; i < n; i++)
        buf[i] = ZT_PAT(i);
    cr_assert_eq(write(fd, buf, n), (ssize_t)n);
    return fd;
}

/* ---------------------------------------------------------------- pullup */

Test(pullup, inside_one_segment_changes_and_copies_nothing)
{
    static const size_t lens[] = {10, 10};
    zbuf_t *z = zt_make(lens, 2);
    zt_snap_t before;
    void *data = NULL;
    zbuf_stats_t st;

    zt_snap(&before, z);
    st = zt_stats();
    cr_assert_eq(zbuf_pullup(z, 2, 5, &data), 0);
    cr_assert_eq(data, zt_mem[0] + 2);
    cr_assert_eq(zbuf_pullup(z, 10, 10, &data), 0);
    cr_assert_eq(data, zt_mem[1]);
    cr_assert_eq(zbuf_pullup(z, 19, 1, &data), 0);
    cr_assert_eq(data, zt_mem[1] + 9);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied);
    zt_assert_unchanged(&before, z);
    zt_expect_released(zt_none, 2);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(pullup, across_segments_copies_exactly_the_range)
{
    static const size_t lens[] = {3, 1, 4, 2};
    zbuf_t *z = zt_make(lens, 4);
    void *data = NULL;
    zbuf_stats_t st = zt_stats();
    size_t so = 99;
    static const int want_rel[4] = {0, 1, 0, 0};

    cr_assert_eq(zbuf_pullup(z, 2, 5, &data), 0);
    zt_check(z);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied + 5);
    for (size_t i = 0; i < 5; i++)
        cr_assert_eq(((uint8_t *)data)[i], ZT_PAT(2 + i));
    zt_expect_pat(z, 0, 10);
    cr_assert_eq(zbuf_seg_data(z, zbuf_seg_find(z, 2, &so)), data);
    cr_assert_eq(so, 0);
    cr_assert_eq(zbuf_seg_length(z, zbuf_seg_find(z, 2, NULL)), 5);
    /* [0,2) of #0 | new 5 | [3,4) of #2 | #3 */
    cr_assert_eq(zbuf_seg_count(z), 4);
    zt_expect_released(want_rel, 4);
    cr_assert(zbuf_writable(z, 2, 5));
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(pullup, every_range_matches_a_model)
{
    static const size_t lens[] = {3, 1, 4, 2};

    for (size_t off = 0; off < 10; off++) {
        for (size_t len = 1; off + len <= 10; len++) {
            zbuf_t *z = zt_make(lens, 4);
            void *data = NULL;
            zbuf_stats_t st = zt_stats();
            size_t first = seg_of(lens, off), last = seg_of(lens, off + len - 1);
            bool one = first == last;
            size_t pos = 0;

            cr_assert_eq(zbuf_pullup(z, off, len, &data), 0, "off %zu len %zu", off, len);
            zt_expect_pat(z, 0, 10);
            for (size_t i = 0; i < len; i++)
                cr_assert_eq(((uint8_t *)data)[i], ZT_PAT(off + i), "off %zu len %zu", off, len);
            cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied + (one ? 0 : len),
                         "off %zu len %zu", off, len);
            for (size_t k = 0; k < 4; k++) {
                int covered = !one && off <= pos && pos + lens[k] <= off + len;
                cr_assert_eq(zt_released[k], covered, "off %zu len %zu buffer %zu", off, len, k);
                pos += lens[k];
            }
            if (one)
                cr_assert_eq(zbuf_seg_count(z), 4);
            cr_assert_eq(zbuf_delete(z), 0);
        }
    }
}

Test(pullup, to_end_makes_the_whole_zbuf_one_segment)
{
    static const size_t lens[] = {3, 1, 4, 2};
    zbuf_t *z = zt_make(lens, 4);
    void *data = NULL;
    zbuf_stats_t st = zt_stats();
    static const int all[4] = {1, 1, 1, 1};

    cr_assert_eq(zbuf_pullup(z, 0, ZBUF_TO_END, &data), 0);
    zt_check(z);
    cr_assert_eq(zbuf_seg_count(z), 1);
    cr_assert_eq(zbuf_seg_data(z, zbuf_seg_first(z)), data);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied + 10);
    zt_expect_pat(z, 0, 10);
    zt_expect_released(all, 4);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(pullup, leaves_a_dup_of_the_same_bytes_alone)
{
    static const size_t lens[] = {3, 4};
    zbuf_t *z = zt_make(lens, 2);
    zbuf_t *d;
    zt_snap_t before;
    void *data;

    cr_assert_eq(zbuf_dup(z, 0, ZBUF_TO_END, &d), 0);
    zt_snap(&before, d);
    cr_assert_eq(zbuf_pullup(z, 1, 5, &data), 0);
    memset(data, 0, 5);
    zt_assert_unchanged(&before, d);
    zt_expect_released(zt_none, 2);
    cr_assert_eq(zbuf_delete(d), 0);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(pullup, of_a_file_segment_reads_it)
{
    int fd = pat_file(64);
    zbuf_buf_t *b;
    zbuf_t *z;
    void *data = NULL;
    int rel = 0;
    zbuf_stats_t st;

    cr_assert_eq(zbuf_buf_wrap_file(fd, 0, 64, zt_count_release, &rel, &b), 0);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_ref(z, b, 8, 40), 0);
    zbuf_buf_unref(b);
    st = zt_stats();
    cr_assert_eq(zbuf_pullup(z, 4, 10, &data), 0);
    zt_check(z);
    cr_assert_not_null(data);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied + 10);
    for (size_t i = 0; i < 10; i++)
        cr_assert_eq(((uint8_t *)data)[i], ZT_PAT(12 + i));
    cr_assert_eq(zbuf_length(z), 40);
    cr_assert_eq(rel, 0, "the rest of the file segment still refers to the file");
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(rel, 1);
    close(fd);
}

static void pullup_rejected(size_t off, size_t len, bool null_data, int want)
{
    static const size_t lens[] = {3, 4};
    zbuf_t *z = zt_make(lens, 2);
    zt_snap_t before;
    void *data = &before;
    zbuf_stats_t st;

    zt_snap(&before, z);
    st = zt_stats();
    cr_assert_eq(zbuf_pullup(z, off, len, null_data ? NULL : &data), want, "off %zu len %zu",
                 off, len);
    cr_assert_eq(data, (void *)&before, "data written on failure");
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied);
    zt_assert_unchanged(&before, z);
    zt_expect_released(zt_none, 2);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(pullup, empty_or_outside_range_is_erange)
{
    pullup_rejected(0, 0, false, -ERANGE);
    pullup_rejected(3, 0, false, -ERANGE);
    pullup_rejected(7, 0, false, -ERANGE);
    pullup_rejected(7, ZBUF_TO_END, false, -ERANGE);
    pullup_rejected(0, 8, false, -ERANGE);
    pullup_rejected(2, 6, false, -ERANGE);
    pullup_rejected(8, 1, false, -ERANGE);
    pullup_rejected(1, SIZE_MAX - 1, false, -ERANGE);
    pullup_rejected(2, SIZE_MAX - 1, false, -ERANGE);
}

Test(pullup, null_data_is_einval)
{
    pullup_rejected(2, 3, true, -EINVAL);
}

Test(pullup, empty_zbuf_and_bad_handles)
{
    zbuf_t *z;
    void *data = NULL;

    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_pullup(z, 0, ZBUF_TO_END, &data), -ERANGE);
    cr_assert_eq(zbuf_pullup(z, 0, 1, &data), -ERANGE);
    zt_check(z);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zbuf_pullup(z, 0, 1, &data), -EINVAL, "deleted zbuf");
    cr_assert_eq(zbuf_pullup(NULL, 0, 1, &data), -EINVAL);
}

/* ------------------------------------------------------------------ peek */

Test(peek, every_range_points_in_or_copies_out)
{
    static const size_t lens[] = {3, 1, 4, 2};
    zbuf_t *z = zt_make(lens, 4);
    zt_snap_t before;

    zt_snap(&before, z);
    for (size_t off = 0; off < 10; off++) {
        for (size_t len = 1; off + len <= 10; len++) {
            uint8_t scratch[16];
            const void *out = NULL;
            zbuf_stats_t st = zt_stats();
            size_t first = seg_of(lens, off), last = seg_of(lens, off + len - 1);

            memset(scratch, 0xee, sizeof scratch);
            cr_assert_eq(zbuf_peek(z, off, len, scratch, &out), 0, "off %zu len %zu", off,
                         len);
            for (size_t i = 0; i < len; i++)
                cr_assert_eq(((const uint8_t *)out)[i], ZT_PAT(off + i));
            if (first == last) {
                size_t so = 0;
                zbuf_seg_t *s = zbuf_seg_find(z, off, &so);
                cr_assert_eq(out, (uint8_t *)zbuf_seg_data(z, s) + so, "off %zu len %zu", off,
                             len);
                cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied);
                cr_assert_eq(scratch[0], 0xee, "scratch used without need");
            } else {
                cr_assert_eq(out, (const void *)scratch);
                cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied + len);
                cr_assert_eq(scratch[len], 0xee, "wrote past len");
            }
        }
    }
    zt_assert_unchanged(&before, z);
    zt_expect_released(zt_none, 4);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(peek, without_scratch_only_the_no_copy_case)
{
    static const size_t lens[] = {3, 4};
    zbuf_t *z = zt_make(lens, 2);
    zt_snap_t before;
    const void *out = &before;
    zbuf_stats_t st;

    zt_snap(&before, z);
    st = zt_stats();
    cr_assert_eq(zbuf_peek(z, 1, 2, NULL, &out), 0);
    cr_assert_eq(out, zt_mem[0] + 1);
    out = &before;
    cr_assert_eq(zbuf_peek(z, 2, 2, NULL, &out), -EAGAIN);
    cr_assert_eq(out, (const void *)&before, "out written on failure");
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied);
    zt_assert_unchanged(&before, z);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(peek, to_end)
{
    static const size_t lens[] = {3, 4};
    zbuf_t *z = zt_make(lens, 2);
    uint8_t scratch[8];
    const void *out = NULL;

    cr_assert_eq(zbuf_peek(z, 3, ZBUF_TO_END, NULL, &out), 0);
    cr_assert_eq(out, zt_mem[1]);
    cr_assert_eq(zbuf_peek(z, 0, ZBUF_TO_END, scratch, &out), 0);
    cr_assert_eq(out, (const void *)scratch);
    for (size_t i = 0; i < 7; i++)
        cr_assert_eq(scratch[i], ZT_PAT(i));
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(peek, file_segment_always_needs_the_scratch)
{
    int fd = pat_file(32);
    zbuf_buf_t *b;
    zbuf_t *z;
    uint8_t scratch[8];
    const void *out = NULL;
    zbuf_stats_t st;

    cr_assert_eq(zbuf_buf_wrap_file(fd, 0, 32, NULL, NULL, &b), 0);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_ref(z, b, 0, 32), 0);
    zbuf_buf_unref(b);
    st = zt_stats();
    cr_assert_eq(zbuf_peek(z, 4, 8, NULL, &out), -EAGAIN);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied);
    cr_assert_eq(zbuf_peek(z, 4, 8, scratch, &out), 0);
    cr_assert_eq(out, (const void *)scratch);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied + 8);
    for (size_t i = 0; i < 8; i++)
        cr_assert_eq(scratch[i], ZT_PAT(4 + i));
    cr_assert_eq(zbuf_delete(z), 0);
    close(fd);
}

Test(peek, outside_or_bad_arguments_are_rejected)
{
    static const size_t lens[] = {3, 4};
    zbuf_t *z = zt_make(lens, 2);
    zt_snap_t before;
    uint8_t scratch[16];
    const void *out = &before;
    zbuf_stats_t st;

    zt_snap(&before, z);
    memset(scratch, 0xee, sizeof scratch);
    st = zt_stats();
    cr_assert_eq(zbuf_peek(z, 0, 8, scratch, &out), -ERANGE);
    cr_assert_eq(zbuf_peek(z, 5, 3, scratch, &out), -ERANGE);
    cr_assert_eq(zbuf_peek(z, 8, ZBUF_TO_END, scratch, &out), -ERANGE);
    cr_assert_eq(zbuf_peek(z, 1, SIZE_MAX - 1, scratch, &out), -ERANGE);
    cr_assert_eq(zbuf_peek(z, 0, 2, scratch, NULL), -EINVAL);
    cr_assert_eq(zbuf_peek(NULL, 0, 2, scratch, &out), -EINVAL);
    cr_assert_eq(out, (const void *)&before);
    cr_assert_eq(scratch[0], 0xee);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied);
    zt_assert_unchanged(&before, z);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zbuf_peek(z, 0, 1, scratch, &out), -EINVAL, "deleted zbuf");
}

/* -------------------------------------------------------------- writable */

Test(writable, private_library_bytes_are_writable)
{
    static const size_t lens[] = {3, 4};
    zbuf_t *z = zt_make_heap(lens, 2);

    cr_assert(zbuf_writable(z, 0, 7));
    cr_assert(zbuf_writable(z, 2, 3));
    cr_assert(zbuf_writable(z, 0, ZBUF_TO_END));
    cr_assert(zbuf_writable(z, 6, 1));
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(writable, enrolled_shared_and_file_bytes_are_not)
{
    static const size_t lens[] = {4};
    zbuf_t *z = zt_make(lens, 1);
    zbuf_t *h = zt_make_heap(lens, 1);
    zbuf_t *d;
    int fd = pat_file(8);
    zbuf_buf_t *b;

    cr_assert_not(zbuf_writable(z, 0, 4));
    cr_assert_not(zbuf_writable(z, 1, 1));

    cr_assert_eq(zbuf_dup(h, 1, 2, &d), 0);
    cr_assert_not(zbuf_writable(h, 0, 1), "a dup shares the whole buffer");
    cr_assert_not(zbuf_writable(d, 0, 2));
    cr_assert_eq(zbuf_delete(d), 0);
    cr_assert(zbuf_writable(h, 0, 4));

    cr_assert_eq(zbuf_buf_wrap_file(fd, 0, 8, NULL, NULL, &b), 0);
    cr_assert_eq(zbuf_append_ref(h, b, 0, 8), 0);
    zbuf_buf_unref(b);
    cr_assert(zbuf_writable(h, 0, 4));
    cr_assert_not(zbuf_writable(h, 4, 1));
    cr_assert_not(zbuf_writable(h, 0, ZBUF_TO_END), "one file byte spoils the range");
    cr_assert_eq(zbuf_delete(h), 0);
    cr_assert_eq(zbuf_delete(z), 0);
    close(fd);
}

Test(writable, a_caller_handle_makes_a_buffer_shared)
{
    zbuf_buf_t *b;
    zbuf_t *z;

    cr_assert_eq(zbuf_buf_alloc(8, &b), 0);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_ref(z, b, 0, 8), 0);
    cr_assert_not(zbuf_writable(z, 0, 8));
    zbuf_buf_unref(b);
    cr_assert(zbuf_writable(z, 0, 8));
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(writable, two_segments_of_one_buffer_share_it)
{
    static const size_t lens[] = {8};
    zbuf_t *z = zt_make_heap(lens, 1);

    /* Cutting the middle leaves two segments on one buffer: two references. */
    cr_assert_eq(zbuf_cut(z, 3, 2, NULL), 0);
    cr_assert_eq(zbuf_seg_count(z), 2);
    cr_assert_not(zbuf_writable(z, 0, 1));
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(writable, mixed_range_is_not_and_bad_input_is_false)
{
    static const size_t lens[] = {4};
    zbuf_t *z = zt_make_heap(lens, 1);
    static uint8_t area[4];

    cr_assert_eq(zbuf_append_buf(z, area, 4, NULL, NULL), 0);
    cr_assert(zbuf_writable(z, 0, 4));
    cr_assert_not(zbuf_writable(z, 3, 2));
    cr_assert_not(zbuf_writable(z, 0, 9), "range outside");
    cr_assert_not(zbuf_writable(z, 9, 0), "offset outside");
    cr_assert_not(zbuf_writable(z, 1, SIZE_MAX - 1));
    cr_assert_not(zbuf_writable(NULL, 0, 1));
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_not(zbuf_writable(z, 0, 1), "deleted zbuf");
}

/* --------------------------------------------------------------- unshare */

Test(unshare, enrolled_segments_are_replaced_by_private_copies)
{
    static const size_t lens[] = {3, 1, 4, 2};
    zbuf_t *z = zt_make(lens, 4);
    uint8_t saved[ZT_MAXSEGS][ZT_SEGMAX];
    zbuf_stats_t st;
    static const int want_rel[4] = {0, 1, 1, 0};

    memcpy(saved, zt_mem, sizeof zt_mem);
    st = zt_stats();
    cr_assert_eq(zbuf_unshare(z, 3, 5), 0); /* exactly segments #1 and #2 */
    zt_check(z);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied + 5);
    cr_assert(zbuf_writable(z, 3, 5));
    cr_assert_not(zbuf_writable(z, 0, 1));
    cr_assert_not(zbuf_writable(z, 8, 1));
    zt_expect_pat(z, 0, 10);
    zt_expect_released(want_rel, 4);
    cr_assert_eq(memcmp(saved, zt_mem, sizeof zt_mem), 0, "enrolled memory written");
    /* Writes now land in private memory. */
    *(uint8_t *)zbuf_seg_data(z, zbuf_seg_find(z, 3, NULL)) = 0;
    cr_assert_eq(zt_mem[1][0], saved[1][0]);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(unshare, writable_range_copies_nothing)
{
    static const size_t lens[] = {3, 4};
    zbuf_t *z = zt_make_heap(lens, 2);
    zt_snap_t before;
    zbuf_stats_t st;

    zt_snap(&before, z);
    st = zt_stats();
    cr_assert_eq(zbuf_unshare(z, 0, ZBUF_TO_END), 0);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied);
    zt_assert_unchanged(&before, z);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(unshare, copies_only_the_shared_segments_of_a_mixed_range)
{
    static const size_t lens[] = {5};
    zbuf_t *z = zt_make_heap(lens, 1);
    static uint8_t area[6] = {1, 2, 3, 4, 5, 6};
    zbuf_stats_t st;
    void *heap = zbuf_seg_data(z, zbuf_seg_first(z));
    int rel = 0;

    cr_assert_eq(zbuf_append_buf(z, area, 6, zt_count_release, &rel), 0);
    st = zt_stats();
    cr_assert_eq(zbuf_unshare(z, 0, ZBUF_TO_END), 0);
    zt_check(z);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied + 6);
    cr_assert_eq(zbuf_seg_data(z, zbuf_seg_first(z)), heap, "private segment was copied");
    cr_assert(zbuf_writable(z, 0, 11));
    cr_assert_eq(rel, 1);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(rel, 1);
}

Test(unshare, separates_a_zbuf_from_its_dup)
{
    static const size_t lens[] = {4, 4};
    zbuf_t *z = zt_make_heap(lens, 2);
    zbuf_t *d;
    zt_snap_t before;
    zbuf_stats_t st;

    cr_assert_eq(zbuf_dup(z, 0, ZBUF_TO_END, &d), 0);
    zt_snap(&before, d);
    st = zt_stats();
    cr_assert_eq(zbuf_unshare(z, 0, ZBUF_TO_END), 0);
    zt_check(z);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied + 8);
    cr_assert(zbuf_writable(z, 0, 8));
    for (zbuf_seg_t *s = zbuf_seg_first(z); s != NULL; s = zbuf_seg_next(z, s))
        memset(zbuf_seg_data(z, s), 0, zbuf_seg_length(z, s));
    zt_assert_unchanged(&before, d);
    zt_expect_pat(d, 0, 8);
    cr_assert(zbuf_writable(d, 0, 8), "the dup is now the only holder");
    cr_assert_eq(zbuf_delete(d), 0);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(unshare, part_of_an_enrolled_segment)
{
    static const size_t lens[] = {20};
    zbuf_t *z = zt_make(lens, 1);
    zbuf_stats_t st = zt_stats();
    uint64_t copied;

    cr_assert_eq(zbuf_unshare(z, 5, 4), 0);
    zt_check(z);
    copied = zt_stats().bytes_copied - st.bytes_copied;
    cr_assert_geq(copied, 4);
    cr_assert_leq(copied, 20);
    cr_assert(zbuf_writable(z, 5, 4));
    zt_expect_pat(z, 0, 20);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zt_released[0], 1);
}

Test(unshare, file_segment_becomes_memory)
{
    int fd = pat_file(16);
    zbuf_buf_t *b;
    zbuf_t *z;
    int rel = 0;
    zbuf_stats_t st;

    cr_assert_eq(zbuf_buf_wrap_file(fd, 0, 16, zt_count_release, &rel, &b), 0);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_ref(z, b, 0, 16), 0);
    zbuf_buf_unref(b);
    st = zt_stats();
    cr_assert_eq(zbuf_unshare(z, 0, ZBUF_TO_END), 0);
    zt_check(z);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied + 16);
    cr_assert_eq(rel, 1);
    cr_assert_not_null(zbuf_seg_data(z, zbuf_seg_first(z)));
    zt_expect_pat(z, 0, 16);
    cr_assert(zbuf_writable(z, 0, 16));
    cr_assert_eq(zbuf_delete(z), 0);
    close(fd);
}

Test(unshare, outside_range_or_bad_handle_changes_nothing)
{
    static const size_t lens[] = {3, 4};
    zbuf_t *z = zt_make(lens, 2);
    zt_snap_t before;
    zbuf_stats_t st;
    int rc;

    zt_snap(&before, z);
    st = zt_stats();
    cr_assert_eq(zbuf_unshare(z, 0, 8), -ERANGE);
    cr_assert_eq(zbuf_unshare(z, 8, 0), -ERANGE);
    cr_assert_eq(zbuf_unshare(z, 8, ZBUF_TO_END), -ERANGE);
    cr_assert_eq(zbuf_unshare(z, 4, 4), -ERANGE);
    cr_assert_eq(zbuf_unshare(z, 1, SIZE_MAX - 1), -ERANGE);
    cr_assert_eq(zbuf_unshare(NULL, 0, 1), -EINVAL);
    rc = zbuf_unshare(z, 3, 0); /* an empty range has nothing to unshare */
    cr_assert(rc == 0 || rc == -ERANGE, "rc %d", rc);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied);
    zt_assert_unchanged(&before, z);
    zt_expect_released(zt_none, 2);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zbuf_unshare(z, 0, 1), -EINVAL, "deleted zbuf");
}
