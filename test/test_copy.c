/* SPDX-License-Identifier: MIT */
/*
 * Getting bytes out by copying: zbuf_copyout().  Every byte it copies is
 * counted in zbuf_stats_t::bytes_copied; a rejected call copies nothing and
 * leaves the destination alone.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "support.h"

ZT_SUITE(copy);

Test(copy, whole_zbuf_across_segments)
{
    static const size_t lens[] = {3, 1, 4, 2};
    zbuf_t *z = zt_make(lens, 4);
    uint8_t out[10];
    zbuf_stats_t st = zt_stats();

    cr_assert_eq(zbuf_copyout(z, 0, out, 10), 10);
    for (size_t i = 0; i < 10; i++)
        cr_assert_eq(out[i], ZT_PAT(i));
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied + 10);
    cr_assert_gt(zt_stats().copies, st.copies);
    zt_expect_pat(z, 0, 10);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(copy, every_range_of_a_segmented_zbuf)
{
    static const size_t lens[] = {3, 1, 4, 2};
    zbuf_t *z = zt_make(lens, 4);
    zt_snap_t before;

    zt_snap(&before, z);
    for (size_t off = 0; off <= 10; off++) {
        for (size_t len = 0; off + len <= 10; len++) {
            uint8_t out[12];
            zbuf_stats_t st = zt_stats();

            memset(out, 0xee, sizeof out);
            cr_assert_eq(zbuf_copyout(z, off, out, len), (ssize_t)len, "off %zu len %zu", off,
                         len);
            for (size_t i = 0; i < len; i++)
                cr_assert_eq(out[i], ZT_PAT(off + i), "off %zu len %zu byte %zu", off, len, i);
            for (size_t i = len; i < sizeof out; i++)
                cr_assert_eq(out[i], 0xee, "wrote past len at %zu", i);
            cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied + len,
                         "off %zu len %zu counted %llu", off, len,
                         (unsigned long long)(zt_stats().bytes_copied - st.bytes_copied));
        }
    }
    zt_assert_unchanged(&before, z);
    zt_expect_released(zt_none, 4);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(copy, to_end_copies_what_remains)
{
    static const size_t lens[] = {5, 5};
    zbuf_t *z = zt_make(lens, 2);

    for (size_t off = 0; off <= 10; off++) {
        uint8_t out[10];
        zbuf_stats_t st = zt_stats();

        cr_assert_eq(zbuf_copyout(z, off, out, ZBUF_TO_END), (ssize_t)(10 - off));
        for (size_t i = 0; i < 10 - off; i++)
            cr_assert_eq(out[i], ZT_PAT(off + i));
        cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied + (10 - off));
    }
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(copy, inside_one_segment)
{
    static const size_t lens[] = {20};
    zbuf_t *z = zt_make(lens, 1);
    uint8_t out[5];

    cr_assert_eq(zbuf_copyout(z, 7, out, 5), 5);
    for (size_t i = 0; i < 5; i++)
        cr_assert_eq(out[i], ZT_PAT(7 + i));
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(copy, empty_zbuf_gives_zero_bytes)
{
    zbuf_t *z;
    uint8_t out[4] = {9, 9, 9, 9};
    zbuf_stats_t st = zt_stats();

    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_copyout(z, 0, out, 0), 0);
    cr_assert_eq(zbuf_copyout(z, 0, out, ZBUF_TO_END), 0);
    cr_assert_eq(zbuf_copyout(z, 0, out, 1), -ERANGE);
    cr_assert_eq(zbuf_copyout(z, 1, out, 0), -ERANGE);
    cr_assert_eq(out[0], 9);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied);
    zt_check(z);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(copy, at_the_end_gives_zero_bytes)
{
    static const size_t lens[] = {4};
    zbuf_t *z = zt_make(lens, 1);
    uint8_t out[4];

    cr_assert_eq(zbuf_copyout(z, 4, out, 0), 0);
    cr_assert_eq(zbuf_copyout(z, 4, out, ZBUF_TO_END), 0);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(copy, sees_later_writes_to_shared_memory)
{
    static const size_t lens[] = {8};
    zbuf_t *z = zt_make(lens, 1);
    uint8_t out[8];

    /* The zbuf refers to the caller's memory, it did not copy it. */
    zt_mem[0][3] = 0x77;
    cr_assert_eq(zbuf_copyout(z, 0, out, 8), 8);
    cr_assert_eq(out[3], 0x77);
    cr_assert_eq(zbuf_delete(z), 0);
}

/* A rejected copyout: nothing copied, nothing counted, zbuf unchanged. */
static void copy_rejected(zbuf_t *z, size_t off, void *dst, size_t len, int want)
{
    zt_snap_t before;
    uint8_t *d = dst;
    zbuf_stats_t st;

    zt_snap(&before, z);
    if (d != NULL)
        memset(d, 0xee, 16);
    st = zt_stats();
    cr_assert_eq(zbuf_copyout(z, off, dst, len), want, "off %zu len %zu", off, len);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied);
    if (d != NULL)
        for (size_t i = 0; i < 16; i++)
            cr_assert_eq(d[i], 0xee, "rejected copyout wrote byte %zu", i);
    zt_assert_unchanged(&before, z);
}

Test(copy, range_past_the_end_is_erange_not_clamped)
{
    static const size_t lens[] = {3, 4};
    zbuf_t *z = zt_make(lens, 2);
    uint8_t out[16];

    copy_rejected(z, 0, out, 8, -ERANGE);
    copy_rejected(z, 5, out, 3, -ERANGE);
    copy_rejected(z, 7, out, 1, -ERANGE);
    copy_rejected(z, 8, out, 0, -ERANGE);
    copy_rejected(z, 8, out, ZBUF_TO_END, -ERANGE);
    copy_rejected(z, SIZE_MAX, out, 1, -ERANGE);
    copy_rejected(z, 1, out, SIZE_MAX - 1, -ERANGE); /* off + len wraps */
    copy_rejected(z, 2, out, SIZE_MAX - 1, -ERANGE);
    zt_expect_released(zt_none, 2);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(copy, null_destination_is_einval)
{
    static const size_t lens[] = {3, 4};
    zbuf_t *z = zt_make(lens, 2);

    copy_rejected(z, 0, NULL, 4, -EINVAL);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(copy, null_or_deleted_zbuf_is_einval)
{
    zbuf_t *z;
    uint8_t out[4];
    zbuf_stats_t st = zt_stats();

    cr_assert_eq(zbuf_copyout(NULL, 0, out, 1), -EINVAL);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_copy(z, "abcd", 4), 0);
    cr_assert_eq(zbuf_delete(z), 0);
    st = zt_stats();
    cr_assert_eq(zbuf_copyout(z, 0, out, 1), -EINVAL);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied);
}

Test(copy, large_zbuf_of_many_segments)
{
    enum { N = 200, SEG = 37 };
    zbuf_t *z;
    uint8_t *src = malloc(N * SEG), *out = malloc(N * SEG);
    zbuf_stats_t st;

    cr_assert_not_null(src);
    cr_assert_not_null(out);
    for (size_t i = 0; i < N * SEG; i++)
        src[i] = ZT_PAT(i);
    cr_assert_eq(zbuf_create(&z), 0);
    for (size_t k = 0; k < N; k++)
        cr_assert_eq(zbuf_append_buf(z, src + k * SEG, SEG, NULL, NULL), 0);
    zt_check(z);
    cr_assert_eq(zbuf_seg_count(z), N);
    st = zt_stats();
    cr_assert_eq(zbuf_copyout(z, 10, out, N * SEG - 20), N * SEG - 20);
    cr_assert_eq(memcmp(out, src + 10, N * SEG - 20), 0);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied + N * SEG - 20);
    cr_assert_eq(zbuf_delete(z), 0);
    free(src);
    free(out);
}
