/* SPDX-License-Identifier: MIT */
/*
 * zbuf_dup(): a new zbuf sharing a byte range of another.  Nothing is
 * copied, the original is untouched, and a shared buffer is released only
 * when the last zbuf referring to it goes.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"
#include "support.h"

ZT_SUITE(dup);

/* Number of segments the range [off, off + len) touches. */
static size_t segs_touched(const size_t *lens, size_t n, size_t off, size_t len)
{
    size_t pos = 0, count = 0;

    for (size_t k = 0; k < n; k++) {
        if (len > 0 && off < pos + lens[k] && off + len > pos)
            count++;
        pos += lens[k];
    }
    return count;
}

Test(dup, whole_zbuf_shares_every_segment)
{
    static const size_t lens[] = {3, 1, 4};
    zbuf_t *z = zt_make(lens, 3);
    zbuf_t *d = NULL;
    zt_snap_t before, copy;
    zbuf_stats_t st;

    zt_snap(&before, z);
    st = zt_stats();
    cr_assert_eq(zbuf_dup(z, 0, ZBUF_TO_END, &d), 0);
    zt_check(z);
    zt_check(d);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied);
    cr_assert_eq(zt_stats().live_zbufs, st.live_zbufs + 1);
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs, "dup must not create buffers");
    zt_check(d);
    zt_assert_unchanged(&before, z);
    zt_snap(&copy, d);
    cr_assert_eq(copy.nsegs, 3);
    for (size_t k = 0; k < 3; k++) {
        cr_assert_eq(copy.data[k], zt_mem[k], "segment %zu of the dup is not shared", k);
        cr_assert_eq(copy.seglen[k], lens[k]);
    }
    for (zbuf_seg_t *s = zbuf_seg_first(d); s != NULL; s = zbuf_seg_next(d, s))
        cr_assert_eq(zbuf_buf_refs(zbuf_seg_buf(d, s)), 2);
    zt_expect_pat(d, 0, 8);
    cr_assert_eq(zbuf_delete(d), 0);
    zt_expect_released(zt_none, 3);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(dup, explicit_length_equals_to_end)
{
    static const size_t lens[] = {3, 1, 4};
    zbuf_t *z = zt_make(lens, 3);
    zbuf_t *d;

    cr_assert_eq(zbuf_dup(z, 0, 8, &d), 0);
    zt_check(z);
    zt_check(d);
    zt_expect_pat(d, 0, 8);
    cr_assert_eq(zbuf_seg_count(d), 3);
    cr_assert_eq(zbuf_delete(d), 0);
    cr_assert_eq(zbuf_dup(z, 5, ZBUF_TO_END, &d), 0);
    zt_check(z);
    zt_check(d);
    zt_expect_pat(d, 5, 3);
    cr_assert_eq(zbuf_delete(d), 0);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(dup, inside_one_segment_points_into_it)
{
    static const size_t lens[] = {20};
    zbuf_t *z = zt_make(lens, 1);
    zbuf_t *d;
    zbuf_seg_t *s;

    cr_assert_eq(zbuf_dup(z, 6, 9, &d), 0);
    zt_check(d);
    cr_assert_eq(zbuf_seg_count(d), 1);
    s = zbuf_seg_first(d);
    cr_assert_eq(zbuf_seg_data(d, s), zt_mem[0] + 6);
    cr_assert_eq(zbuf_seg_length(d, s), 9);
    cr_assert_eq(zbuf_seg_buf_offset(d, s), 6);
    cr_assert_eq(zbuf_seg_buf(d, s), zbuf_seg_buf(z, zbuf_seg_first(z)));
    cr_assert_eq(zbuf_seg_count(z), 1, "the original must not be split");
    cr_assert_eq(zbuf_delete(d), 0);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(dup, every_range_shares_and_copies_nothing)
{
    static const size_t lens[] = {3, 1, 4, 2};
    zbuf_t *z = zt_make(lens, 4);
    zt_snap_t before;

    zt_snap(&before, z);
    for (size_t off = 0; off <= 10; off++) {
        for (size_t len = 0; off + len <= 10; len++) {
            zbuf_t *d = NULL;
            zbuf_stats_t st = zt_stats();
            zbuf_seg_t *s;

            cr_assert_eq(zbuf_dup(z, off, len, &d), 0, "off %zu len %zu", off, len);
            cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied);
            zt_expect_pat(d, off, len);
            cr_assert_eq(zbuf_seg_count(d), segs_touched(lens, 4, off, len), "off %zu len %zu",
                         off, len);
            /* The dup's first byte is the original's byte, not a copy. */
            s = zbuf_seg_first(d);
            if (len > 0) {
                size_t so = 0;
                zbuf_seg_t *o = zbuf_seg_find(z, off, &so);
                cr_assert_not_null(o);
                cr_assert_eq(zbuf_seg_data(d, s), (uint8_t *)zbuf_seg_data(z, o) + so,
                             "off %zu len %zu", off, len);
            } else {
                cr_assert_null(s);
            }
            zt_assert_unchanged(&before, z);
            cr_assert_eq(zbuf_delete(d), 0);
        }
    }
    zt_expect_released(zt_none, 4);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(dup, empty_range_gives_an_empty_zbuf)
{
    static const size_t lens[] = {3, 4};
    zbuf_t *z = zt_make(lens, 2);
    zbuf_t *d;
    zbuf_stats_t st = zt_stats();

    cr_assert_eq(zbuf_dup(z, 3, 0, &d), 0);
    zt_check(d);
    cr_assert_eq(zbuf_length(d), 0);
    cr_assert_eq(zbuf_seg_count(d), 0);
    cr_assert_eq(zt_stats().live_segs, st.live_segs);
    cr_assert_eq(zbuf_delete(d), 0);
    cr_assert_eq(zbuf_dup(z, 7, ZBUF_TO_END, &d), 0);
    zt_check(z);
    zt_check(d);
    cr_assert_eq(zbuf_length(d), 0);
    cr_assert_eq(zbuf_delete(d), 0);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(dup, of_an_empty_zbuf)
{
    zbuf_t *z, *d;

    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_dup(z, 0, ZBUF_TO_END, &d), 0);
    zt_check(d);
    cr_assert_eq(zbuf_length(d), 0);
    cr_assert_eq(zbuf_delete(d), 0);
    cr_assert_eq(zbuf_dup(z, 0, 0, &d), 0);
    zt_check(z);
    zt_check(d);
    cr_assert_eq(zbuf_length(d), 0);
    cr_assert_eq(zbuf_delete(d), 0);
    cr_assert_eq(zbuf_dup(z, 0, 1, &d), -ERANGE);
    cr_assert_eq(zbuf_dup(z, 1, ZBUF_TO_END, &d), -ERANGE);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(dup, shared_buffer_is_released_when_the_original_goes_last)
{
    static const size_t lens[] = {6, 6};
    zbuf_t *z = zt_make(lens, 2);
    zbuf_t *d;

    cr_assert_eq(zbuf_dup(z, 2, 8, &d), 0);
    zt_check(z);
    zt_check(d);
    cr_assert_eq(zbuf_delete(d), 0);
    zt_expect_released(zt_none, 2);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zt_released[0], 1);
    cr_assert_eq(zt_released[1], 1);
}

Test(dup, shared_buffer_is_released_when_the_dup_goes_last)
{
    static const size_t lens[] = {6, 6};
    zbuf_t *z = zt_make(lens, 2);
    zbuf_t *d;

    cr_assert_eq(zbuf_dup(z, 2, 8, &d), 0);
    zt_check(z);
    zt_check(d);
    cr_assert_eq(zbuf_delete(z), 0);
    zt_expect_released(zt_none, 2);
    zt_expect_pat(d, 2, 8);
    cr_assert_eq(zbuf_delete(d), 0);
    cr_assert_eq(zt_released[0], 1);
    cr_assert_eq(zt_released[1], 1);
}

Test(dup, untouched_buffers_are_released_with_the_original)
{
    static const size_t lens[] = {3, 3, 3};
    zbuf_t *z = zt_make(lens, 3);
    zbuf_t *d;

    cr_assert_eq(zbuf_dup(z, 3, 3, &d), 0); /* shares only the middle buffer */
    cr_assert_eq(zbuf_seg_count(d), 1);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zt_released[0], 1);
    cr_assert_eq(zt_released[1], 0);
    cr_assert_eq(zt_released[2], 1);
    cr_assert_eq(zbuf_delete(d), 0);
    cr_assert_eq(zt_released[1], 1);
}

Test(dup, dup_of_a_dup_shares_the_same_memory)
{
    static const size_t lens[] = {10};
    zbuf_t *z = zt_make(lens, 1);
    zbuf_t *d1, *d2;

    cr_assert_eq(zbuf_dup(z, 2, 6, &d1), 0);
    zt_check(z);
    zt_check(d1);
    cr_assert_eq(zbuf_dup(d1, 1, 3, &d2), 0);
    zt_check(d1);
    zt_check(d2);
    cr_assert_eq(zbuf_seg_data(d2, zbuf_seg_first(d2)), zt_mem[0] + 3);
    cr_assert_eq(zbuf_buf_refs(zbuf_seg_buf(z, zbuf_seg_first(z))), 3);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zbuf_delete(d1), 0);
    cr_assert_eq(zt_released[0], 0);
    zt_expect_pat(d2, 3, 3);
    cr_assert_eq(zbuf_delete(d2), 0);
    cr_assert_eq(zt_released[0], 1);
}

Test(dup, changes_to_shared_memory_are_seen_by_both)
{
    static const size_t lens[] = {8};
    zbuf_t *z = zt_make(lens, 1);
    zbuf_t *d;
    uint8_t a, b;

    cr_assert_eq(zbuf_dup(z, 0, ZBUF_TO_END, &d), 0);
    zt_check(z);
    zt_check(d);
    zt_mem[0][5] = 0x99;
    cr_assert_eq(zbuf_copyout(z, 5, &a, 1), 1);
    cr_assert_eq(zbuf_copyout(d, 5, &b, 1), 1);
    cr_assert_eq(a, 0x99);
    cr_assert_eq(b, 0x99);
    cr_assert_eq(zbuf_delete(d), 0);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(dup, makes_library_buffers_read_only_until_the_dup_goes)
{
    static const size_t lens[] = {8};
    zbuf_t *z = zt_make_heap(lens, 1);
    zbuf_t *d;

    cr_assert(zbuf_writable(z, 0, 8));
    cr_assert_eq(zbuf_dup(z, 2, 2, &d), 0);
    zt_check(z);
    zt_check(d);
    cr_assert_not(zbuf_writable(z, 0, 8), "a shared buffer must not be writable");
    cr_assert_not(zbuf_writable(d, 0, 2));
    cr_assert_eq(zbuf_delete(d), 0);
    cr_assert(zbuf_writable(z, 0, 8));
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(dup, modifying_the_dup_leaves_the_original_alone)
{
    static const size_t lens[] = {4, 4};
    zbuf_t *z = zt_make(lens, 2);
    zbuf_t *d;
    zt_snap_t before;

    zt_snap(&before, z);
    cr_assert_eq(zbuf_dup(z, 0, ZBUF_TO_END, &d), 0);
    zt_check(z);
    zt_check(d);
    cr_assert_eq(zbuf_cut(d, 2, 4, NULL), 0);
    zt_check(d);
    cr_assert_eq(zbuf_insert_copy(d, 1, "xx", 2, NULL), 0);
    zt_check(d);
    cr_assert_eq(zbuf_append_copy(d, "yy", 2), 0);
    zt_check(d);
    zt_assert_unchanged(&before, z);
    cr_assert_eq(zbuf_delete(d), 0);
    zt_expect_released(zt_none, 2);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(dup, of_library_and_pool_buffers_frees_them_once)
{
    zbuf_pool_t *p;
    zbuf_buf_t *b;
    zbuf_t *z, *d;
    zbuf_stats_t st = zt_stats();

    cr_assert_eq(zbuf_pool_create(64, 1, &p), 0);
    cr_assert_eq(zbuf_pool_get(p, &b), 0);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_ref(z, b, 0, 64), 0);
    zt_check(z);
    zbuf_buf_unref(b);
    cr_assert_eq(zbuf_append_copy(z, "abc", 3), 0);
    zt_check(z);
    cr_assert_eq(zbuf_dup(z, 10, ZBUF_TO_END, &d), 0);
    zt_check(z);
    zt_check(d);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zbuf_pool_available(p), 0, "pool buffer returned while the dup holds it");
    cr_assert_eq(zbuf_delete(d), 0);
    cr_assert_eq(zbuf_pool_available(p), 1);
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs);
    zbuf_pool_delete(p);
}

/* A rejected dup: no zbuf made, original unchanged, no reference taken. */
static void dup_rejected(size_t off, size_t len, int want)
{
    static const size_t lens[] = {3, 4};
    zbuf_t *z = zt_make(lens, 2);
    zbuf_t *d = (zbuf_t *)&d;
    zt_snap_t before;
    zbuf_stats_t st;

    zt_snap(&before, z);
    st = zt_stats();
    cr_assert_eq(zbuf_dup(z, off, len, &d), want, "off %zu len %zu", off, len);
    cr_assert_eq(d, (zbuf_t *)&d, "out written on failure");
    zt_assert_unchanged(&before, z);
    cr_assert_eq(zt_stats().live_zbufs, st.live_zbufs);
    cr_assert_eq(zt_stats().live_segs, st.live_segs);
    for (zbuf_seg_t *s = zbuf_seg_first(z); s != NULL; s = zbuf_seg_next(z, s))
        cr_assert_eq(zbuf_buf_refs(zbuf_seg_buf(z, s)), 1);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zt_released[0] + zt_released[1], 2);
    memset(zt_released, 0, sizeof zt_released);
}

Test(dup, range_outside_is_erange)
{
    dup_rejected(8, 0, -ERANGE);
    dup_rejected(8, ZBUF_TO_END, -ERANGE);
    dup_rejected(0, 8, -ERANGE);
    dup_rejected(4, 4, -ERANGE);
    dup_rejected(SIZE_MAX, 1, -ERANGE);
    dup_rejected(1, SIZE_MAX - 1, -ERANGE);
    dup_rejected(2, SIZE_MAX - 1, -ERANGE);
}

Test(dup, null_out_or_zbuf_is_einval)
{
    static const size_t lens[] = {3, 4};
    zbuf_t *z = zt_make(lens, 2);
    zbuf_t *d;
    zt_snap_t before;
    zbuf_stats_t st;

    zt_snap(&before, z);
    st = zt_stats();
    cr_assert_eq(zbuf_dup(z, 0, 2, NULL), -EINVAL);
    cr_assert_eq(zbuf_dup(NULL, 0, 0, &d), -EINVAL);
    zt_assert_unchanged(&before, z);
    cr_assert_eq(zt_stats().live_zbufs, st.live_zbufs);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zbuf_dup(z, 0, 0, &d), -EINVAL, "deleted zbuf");
    cr_assert_eq(zt_stats().live_zbufs, st.live_zbufs - 1);
}

Test(dup, of_a_file_segment_shares_it)
{
    char path[] = "/tmp/zbuf-dup-XXXXXX";
    int fd = mkstemp(path);
    zbuf_buf_t *b;
    zbuf_t *z, *d;
    int rel = 0;
    char out[6];
    zbuf_stats_t st;

    cr_assert_geq(fd, 0);
    unlink(path);
    cr_assert_eq(write(fd, "0123456789", 10), 10);
    cr_assert_eq(zbuf_buf_wrap_file(fd, 2, 8, zt_count_release, &rel, &b), 0);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_ref(z, b, 0, 8), 0);
    zt_check(z);
    zbuf_buf_unref(b);
    st = zt_stats();
    cr_assert_eq(zbuf_dup(z, 1, 6, &d), 0);
    zt_check(z);
    zt_check(d);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied);
    cr_assert_eq(zbuf_seg_buf(d, zbuf_seg_first(d)), zbuf_seg_buf(z, zbuf_seg_first(z)));
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(rel, 0);
    cr_assert_eq(zbuf_copyout(d, 0, out, 6), 6);
    cr_assert_eq(memcmp(out, "345678", 6), 0);
    cr_assert_eq(zbuf_delete(d), 0);
    cr_assert_eq(rel, 1);
    close(fd);
}

static void count_release(void *data, size_t size, void *arg)
{
    (void)data;
    (void)size;
    (*(int *)arg)++;
}

/* A dup takes its descriptors from the thread's cache in one batch; when the
 * cache runs dry half way (600 segments, the cache holds at most a few
 * hundred and here starts with 100), the rest come from the allocator and
 * the statistics still count every descriptor exactly. */
Test(dup, more_segments_than_the_descriptor_cache_holds)
{
    static uint8_t mem[1200];
    int released = 0;
    zbuf_buf_t *b = NULL;
    zbuf_t *z = NULL, *d = NULL, *warm = NULL;

    for (size_t i = 0; i < sizeof mem; i++)
        mem[i] = (uint8_t)(i * 7);
    cr_assert_eq(zbuf_buf_wrap(mem, sizeof mem, count_release, &released, &b), 0);
    cr_assert_eq(zbuf_create(&z), 0);
    for (size_t i = 0; i < sizeof mem; i += 2) /* every other byte: no merging */
        cr_assert_eq(zbuf_insert_ref(z, zbuf_length(z), b, i, 1, NULL), 0);
    zbuf_buf_unref(b);
    cr_assert_eq(zbuf_seg_count(z), 600);

    zbuf_thread_cache_flush();
    cr_assert_eq(zbuf_dup(z, 0, 100, &warm), 0); /* 100 descriptors ... */
    cr_assert_eq(zbuf_delete(warm), 0);           /* ... now in the cache */
    zbuf_stats_t st = zt_stats();

    cr_assert_eq(zbuf_dup(z, 0, ZBUF_TO_END, &d), 0);
    zt_check(d);
    cr_assert_eq(zbuf_seg_count(d), 600);
    cr_assert_eq(zt_stats().live_segs, st.live_segs + 600);
    uint8_t out[600];
    cr_assert_eq(zbuf_copyout(d, 0, out, sizeof out), (ssize_t)sizeof out);
    for (size_t i = 0; i < sizeof out; i++)
        cr_assert_eq(out[i], mem[2 * i], "byte %zu", i);

    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(released, 0, "the dup still holds the buffer");
    cr_assert_eq(zbuf_delete(d), 0);
    cr_assert_eq(released, 1);
    cr_assert_eq(zt_stats().live_segs, st.live_segs - 600);
}
