/* SPDX-License-Identifier: MIT */
/*
 * Segment handles: walking (first/last/next/prev), finding the segment of a
 * byte, what a segment says about itself (data, length, buffer, offset in
 * the buffer), and zbuf_locate()'s (segment, relative offset) addressing.
 * A segment handle of another zbuf is never accepted.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"
#include "support.h"

ZT_SUITE(seg);

Test(seg, walk_forward_and_back_visits_every_segment)
{
    static const size_t lens[] = {3, 1, 4, 2};
    zbuf_t *z = zt_make(lens, 4);
    zbuf_seg_t *fwd[4], *s;
    size_t k = 0;

    for (s = zbuf_seg_first(z); s != NULL; s = zbuf_seg_next(z, s)) {
        cr_assert_lt(k, 4);
        cr_assert_eq(zbuf_seg_data(z, s), zt_mem[k]);
        cr_assert_eq(zbuf_seg_length(z, s), lens[k]);
        fwd[k++] = s;
    }
    cr_assert_eq(k, 4);
    cr_assert_eq(zbuf_seg_last(z), fwd[3]);
    for (s = zbuf_seg_last(z); s != NULL; s = zbuf_seg_prev(z, s))
        cr_assert_eq(s, fwd[--k]);
    cr_assert_eq(k, 0);
    cr_assert_null(zbuf_seg_prev(z, fwd[0]));
    cr_assert_null(zbuf_seg_next(z, fwd[3]));
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(seg, one_segment_is_first_and_last)
{
    static const size_t lens[] = {5};
    zbuf_t *z = zt_make(lens, 1);
    zbuf_seg_t *s = zbuf_seg_first(z);

    cr_assert_not_null(s);
    cr_assert_eq(zbuf_seg_last(z), s);
    cr_assert_null(zbuf_seg_next(z, s));
    cr_assert_null(zbuf_seg_prev(z, s));
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(seg, empty_zbuf_has_no_segments)
{
    zbuf_t *z;
    size_t so = 77;

    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_null(zbuf_seg_first(z));
    cr_assert_null(zbuf_seg_last(z));
    cr_assert_null(zbuf_seg_find(z, 0, &so));
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(seg, find_every_byte)
{
    static const size_t lens[] = {3, 1, 4, 2};
    zbuf_t *z = zt_make(lens, 4);
    size_t pos = 0;

    for (size_t k = 0; k < 4; k++) {
        for (size_t i = 0; i < lens[k]; i++) {
            size_t so = 999;
            zbuf_seg_t *s = zbuf_seg_find(z, pos + i, &so);
            cr_assert_not_null(s, "byte %zu", pos + i);
            cr_assert_eq(zbuf_seg_data(z, s), zt_mem[k], "byte %zu", pos + i);
            cr_assert_eq(so, i, "byte %zu", pos + i);
            cr_assert_eq(zbuf_seg_find(z, pos + i, NULL), s);
        }
        pos += lens[k];
    }
    cr_assert_null(zbuf_seg_find(z, 10, NULL), "the end is not a byte");
    cr_assert_null(zbuf_seg_find(z, 11, NULL));
    cr_assert_null(zbuf_seg_find(z, SIZE_MAX, NULL));
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(seg, buffer_and_offset_of_split_segments)
{
    static const size_t lens[] = {10};
    zbuf_t *z = zt_make(lens, 1);
    zbuf_seg_t *a, *b;
    zbuf_buf_t *buf;

    cr_assert_eq(zbuf_cut(z, 3, 2, NULL), 0);
    zt_check(z);
    a = zbuf_seg_first(z);
    b = zbuf_seg_next(z, a);
    buf = zbuf_seg_buf(z, a);
    cr_assert_not_null(buf);
    cr_assert_eq(zbuf_seg_buf(z, b), buf);
    cr_assert_eq(zbuf_buf_data(buf), zt_mem[0]);
    cr_assert_eq(zbuf_buf_size(buf), 10);
    cr_assert_eq(zbuf_seg_buf_offset(z, a), 0);
    cr_assert_eq(zbuf_seg_buf_offset(z, b), 5);
    cr_assert_eq(zbuf_seg_length(z, b), 5);
    cr_assert_eq(zbuf_buf_refs(buf), 2);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(seg, buffer_handle_taken_from_a_segment_outlives_the_zbuf)
{
    static const size_t lens[] = {6};
    zbuf_t *z = zt_make(lens, 1);
    zbuf_buf_t *b = zbuf_buf_ref(zbuf_seg_buf(z, zbuf_seg_first(z)));

    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zt_released[0], 0);
    cr_assert_eq(zbuf_buf_refs(b), 1);
    zbuf_buf_unref(b);
    cr_assert_eq(zt_released[0], 1);
}

Test(seg, data_of_a_library_segment_is_writable_memory)
{
    static const size_t lens[] = {4};
    zbuf_t *z = zt_make_heap(lens, 1);
    zbuf_seg_t *s = zbuf_seg_first(z);
    uint8_t *p = zbuf_seg_data(z, s);

    cr_assert(zbuf_writable(z, 0, 4));
    p[2] = 0x42;
    {
        uint8_t want[4] = {ZT_PAT(0), ZT_PAT(1), 0x42, ZT_PAT(3)};
        zt_expect_bytes(z, want, 4);
    }
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(seg, file_segment_has_no_data_address)
{
    char path[] = "/tmp/zbuf-seg-XXXXXX";
    int fd = mkstemp(path);
    zbuf_buf_t *b;
    zbuf_t *z;
    zbuf_seg_t *s;

    cr_assert_geq(fd, 0);
    unlink(path);
    cr_assert_eq(write(fd, "abcdef", 6), 6);
    cr_assert_eq(zbuf_buf_wrap_file(fd, 0, 6, NULL, NULL, &b), 0);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_ref(z, b, 1, 4), 0);
    zt_check(z);
    zbuf_buf_unref(b);
    s = zbuf_seg_first(z);
    cr_assert_null(zbuf_seg_data(z, s));
    cr_assert_eq(zbuf_seg_length(z, s), 4);
    cr_assert_eq(zbuf_seg_buf_offset(z, s), 1);
    cr_assert(zbuf_buf_file(zbuf_seg_buf(z, s), NULL, NULL));
    cr_assert_eq(zbuf_seg_find(z, 3, NULL), s);
    cr_assert_eq(zbuf_delete(z), 0);
    close(fd);
}

Test(seg, foreign_segment_is_refused_everywhere)
{
    static const size_t la[] = {3, 4};
    zbuf_t *a = zt_make(la, 2);
    zbuf_t *b;
    zbuf_seg_t *foreign;
    size_t abs = 1234;

    cr_assert_eq(zbuf_create(&b), 0);
    cr_assert_eq(zbuf_append_copy(b, "xyz", 3), 0);
    zt_check(b);
    cr_assert_eq(zbuf_append_copy(b, "uvw", 3), 0);
    zt_check(b);
    foreign = zbuf_seg_first(b);
    cr_assert_null(zbuf_seg_next(a, foreign));
    cr_assert_null(zbuf_seg_prev(a, zbuf_seg_last(b)));
    cr_assert_null(zbuf_seg_data(a, foreign));
    cr_assert_eq(zbuf_seg_length(a, foreign), 0);
    cr_assert_null(zbuf_seg_buf(a, foreign));
    cr_assert_eq(zbuf_locate(a, foreign, 0, &abs), -EINVAL);
    cr_assert_eq(abs, 1234);
    /* ... and the right zbuf still accepts it. */
    cr_assert_not_null(zbuf_seg_next(b, foreign));
    cr_assert_eq(zbuf_seg_length(b, foreign), 3);
    zt_check(a);
    zt_check(b);
    cr_assert_eq(zbuf_delete(a), 0);
    cr_assert_eq(zbuf_delete(b), 0);
}

Test(seg, null_segment_is_not_a_segment)
{
    static const size_t la[] = {3};
    zbuf_t *z = zt_make(la, 1);

    cr_assert_null(zbuf_seg_next(z, NULL));
    cr_assert_null(zbuf_seg_prev(z, NULL));
    cr_assert_null(zbuf_seg_data(z, NULL));
    cr_assert_eq(zbuf_seg_length(z, NULL), 0);
    cr_assert_null(zbuf_seg_buf(z, NULL));
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(seg, walking_a_null_or_deleted_zbuf_gives_nothing)
{
    static const size_t la[] = {3};
    zbuf_t *z = zt_make(la, 1);
    zbuf_seg_t *s = zbuf_seg_first(z);

    cr_assert_null(zbuf_seg_first(NULL));
    cr_assert_null(zbuf_seg_last(NULL));
    cr_assert_null(zbuf_seg_find(NULL, 0, NULL));
    cr_assert_null(zbuf_seg_next(NULL, s));
    cr_assert_null(zbuf_seg_data(NULL, s));
    cr_assert_eq(zbuf_seg_length(NULL, s), 0);
    cr_assert_null(zbuf_seg_buf(NULL, s));
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_null(zbuf_seg_first(z));
    cr_assert_null(zbuf_seg_last(z));
    cr_assert_null(zbuf_seg_find(z, 0, NULL));
}

Test(seg, handles_of_moved_segments_belong_to_the_new_zbuf)
{
    static const size_t la[] = {3, 4};
    zbuf_t *a = zt_make(la, 2);
    zbuf_t *t;
    zbuf_seg_t *s;

    cr_assert_eq(zbuf_split(a, 3, &t), 0);
    zt_check(a);
    zt_check(t);
    s = zbuf_seg_first(t);
    cr_assert_eq(zbuf_seg_data(t, s), zt_mem[1]);
    cr_assert_null(zbuf_seg_data(a, s), "a segment of t is foreign to a");
    cr_assert_eq(zbuf_seg_length(a, s), 0);
    cr_assert_eq(zbuf_delete(a), 0);
    cr_assert_eq(zbuf_delete(t), 0);
}

/* ---------------------------------------------------------------- locate */

Test(seg, locate_null_segment_means_absolute)
{
    static const size_t lens[] = {3, 1, 4};
    zbuf_t *z = zt_make(lens, 3);

    for (int64_t rel = 0; rel <= 8; rel++) {
        size_t abs = 999;
        cr_assert_eq(zbuf_locate(z, NULL, rel, &abs), 0);
        cr_assert_eq(abs, (size_t)rel);
    }
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(seg, locate_relative_to_every_segment_forward_and_back)
{
    static const size_t lens[] = {3, 1, 4};
    zbuf_t *z = zt_make(lens, 3);
    size_t start = 0;

    for (zbuf_seg_t *s = zbuf_seg_first(z); s != NULL; s = zbuf_seg_next(z, s)) {
        for (int64_t rel = -(int64_t)start; rel <= (int64_t)(8 - start); rel++) {
            size_t abs = 999;
            cr_assert_eq(zbuf_locate(z, s, rel, &abs), 0, "start %zu rel %lld", start,
                         (long long)rel);
            cr_assert_eq(abs, (size_t)((int64_t)start + rel));
        }
        /* One byte before the start and one past the end are outside. */
        {
            size_t abs = 999;
            cr_assert_eq(zbuf_locate(z, s, -(int64_t)start - 1, &abs), -ERANGE);
            cr_assert_eq(zbuf_locate(z, s, (int64_t)(8 - start) + 1, &abs), -ERANGE);
            cr_assert_eq(abs, 999, "abs written on failure");
        }
        start += zbuf_seg_length(z, s);
    }
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(seg, locate_begin_and_end_ignore_the_segment)
{
    static const size_t lens[] = {3, 1, 4};
    zbuf_t *z = zt_make(lens, 3);
    zbuf_seg_t *mid = zbuf_seg_next(z, zbuf_seg_first(z));
    size_t abs = 999;

    cr_assert_eq(zbuf_locate(z, mid, ZBUF_REL_BEGIN, &abs), 0);
    cr_assert_eq(abs, 0);
    cr_assert_eq(zbuf_locate(z, mid, ZBUF_REL_END, &abs), 0);
    cr_assert_eq(abs, 8);
    cr_assert_eq(zbuf_locate(z, NULL, ZBUF_REL_BEGIN, &abs), 0);
    cr_assert_eq(abs, 0);
    cr_assert_eq(zbuf_locate(z, NULL, ZBUF_REL_END, &abs), 0);
    cr_assert_eq(abs, 8);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(seg, locate_in_an_empty_zbuf_only_the_start)
{
    zbuf_t *z;
    size_t abs = 999;

    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_locate(z, NULL, 0, &abs), 0);
    cr_assert_eq(abs, 0);
    abs = 999;
    cr_assert_eq(zbuf_locate(z, NULL, ZBUF_REL_END, &abs), 0);
    cr_assert_eq(abs, 0);
    abs = 999;
    cr_assert_eq(zbuf_locate(z, NULL, ZBUF_REL_BEGIN, &abs), 0);
    cr_assert_eq(abs, 0);
    abs = 999;
    cr_assert_eq(zbuf_locate(z, NULL, 1, &abs), -ERANGE);
    cr_assert_eq(zbuf_locate(z, NULL, -1, &abs), -ERANGE);
    cr_assert_eq(abs, 999);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(seg, locate_outside_is_erange)
{
    static const size_t lens[] = {3, 4};
    zbuf_t *z = zt_make(lens, 2);
    size_t abs = 999;

    cr_assert_eq(zbuf_locate(z, NULL, 8, &abs), -ERANGE);
    cr_assert_eq(zbuf_locate(z, NULL, -1, &abs), -ERANGE);
    cr_assert_eq(zbuf_locate(z, NULL, INT64_MAX - 1, &abs), -ERANGE);
    cr_assert_eq(zbuf_locate(z, NULL, INT64_MIN + 1, &abs), -ERANGE);
    cr_assert_eq(zbuf_locate(z, zbuf_seg_last(z), INT64_MAX - 1, &abs), -ERANGE);
    cr_assert_eq(zbuf_locate(z, zbuf_seg_last(z), INT64_MIN + 1, &abs), -ERANGE);
    cr_assert_eq(abs, 999);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(seg, locate_bad_handles_are_einval)
{
    static const size_t lens[] = {3, 4};
    zbuf_t *z = zt_make(lens, 2);
    zbuf_t *gone;
    size_t abs = 999;

    cr_assert_eq(zbuf_locate(NULL, NULL, 0, &abs), -EINVAL);
    cr_assert_eq(zbuf_locate(z, NULL, 0, NULL), -EINVAL);
    cr_assert_eq(zbuf_create(&gone), 0);
    cr_assert_eq(zbuf_delete(gone), 0);
    cr_assert_eq(zbuf_locate(gone, NULL, 0, &abs), -EINVAL);
    cr_assert_eq(abs, 999);
    zt_expect_released(zt_none, 2);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(seg, locate_agrees_with_find)
{
    static const size_t lens[] = {2, 5, 1, 3};
    zbuf_t *z = zt_make(lens, 4);

    for (size_t off = 0; off < 11; off++) {
        size_t so = 0, abs = 999;
        zbuf_seg_t *s = zbuf_seg_find(z, off, &so);
        cr_assert_eq(zbuf_locate(z, s, (int64_t)so, &abs), 0);
        cr_assert_eq(abs, off);
    }
    cr_assert_eq(zbuf_delete(z), 0);
}

/* ------------------------------------------------------------ _at calls */

/* The lengths every `_at` test asks for: empty, short, exact, past the end,
 * and "to the end". */
static const size_t at_lens[] = {0, 1, 3, 5, 100, ZBUF_TO_END};
#define AT_NLENS (sizeof at_lens / sizeof at_lens[0])
static const size_t at_segs[] = {3, 1, 4};
#define AT_TOTAL 8

/* Call fn(seg, rel, abs, ok) for the segments of a fresh zt_make(at_segs)
 * zbuf (index -1: NULL) and every rel from one before the zbuf to one past
 * its end; abs is where it points, ok whether that is a byte. */
typedef void (*at_case_fn)(int segk, int64_t rel, size_t abs, bool ok);

static void at_every_location(at_case_fn fn)
{
    size_t start = 0;
    for (int k = -1; k < 3; k++) {
        if (k > 0)
            start += at_segs[k - 1];
        for (int64_t rel = -(int64_t)start - 1; rel <= (int64_t)(AT_TOTAL - start) + 1; rel++) {
            int64_t a = (int64_t)start + rel;
            fn(k, rel, (size_t)a, a >= 0 && a < AT_TOTAL);
        }
    }
}

static zbuf_seg_t *at_seg(zbuf_t *z, int k)
{
    zbuf_seg_t *s = k < 0 ? NULL : zbuf_seg_first(z);
    for (int i = 0; i < k; i++)
        s = zbuf_seg_next(z, s);
    return s;
}

static size_t at_clamp(size_t len, size_t abs)
{
    return len > AT_TOTAL - abs ? AT_TOTAL - abs : len;
}

static void dup_at_case(int k, int64_t rel, size_t abs, bool ok)
{
    for (size_t i = 0; i < AT_NLENS; i++) {
        zbuf_t *z = zt_make(at_segs, 3), *d = NULL;
        zt_snap_t before;
        zt_snap(&before, z);
        int rc = zbuf_dup_at(z, at_seg(z, k), rel, at_lens[i], &d);
        if (!ok) {
            cr_assert_eq(rc, -ERANGE, "seg %d rel %lld", k, (long long)rel);
            cr_assert_null(d);
        } else {
            cr_assert_eq(rc, 0, "seg %d rel %lld len %zu", k, (long long)rel, at_lens[i]);
            zt_expect_pat(d, abs, at_clamp(at_lens[i], abs));
            cr_assert_eq(zbuf_delete(d), 0);
        }
        zt_assert_unchanged(&before, z);
        cr_assert_eq(zbuf_delete(z), 0);
    }
}

static void cut_at_case(int k, int64_t rel, size_t abs, bool ok)
{
    for (size_t i = 0; i < AT_NLENS; i++) {
        zbuf_t *z = zt_make(at_segs, 3);
        zbuf_seg_t *after = (zbuf_seg_t *)&after;
        zt_snap_t before;
        zt_snap(&before, z);
        int rc = zbuf_cut_at(z, at_seg(z, k), rel, at_lens[i], &after);
        if (!ok) {
            cr_assert_eq(rc, -ERANGE, "seg %d rel %lld", k, (long long)rel);
            cr_assert_eq(after, (zbuf_seg_t *)&after, "after written on failure");
            zt_assert_unchanged(&before, z);
        } else {
            size_t n = at_clamp(at_lens[i], abs);
            uint8_t want[AT_TOTAL];
            for (size_t b = 0, w = 0; b < AT_TOTAL; b++)
                if (b < abs || b >= abs + n)
                    want[w++] = ZT_PAT(b);
            cr_assert_eq(rc, 0, "seg %d rel %lld len %zu", k, (long long)rel, at_lens[i]);
            zt_expect_bytes(z, want, AT_TOTAL - n);
            cr_assert_eq(after, abs < AT_TOTAL - n ? zbuf_seg_find(z, abs, NULL) : NULL);
        }
        cr_assert_eq(zbuf_delete(z), 0);
    }
}

static void split_at_case(int k, int64_t rel, size_t abs, bool ok)
{
    zbuf_t *z = zt_make(at_segs, 3), *t = NULL;
    zt_snap_t before;
    zt_snap(&before, z);
    int rc = zbuf_split_at(z, at_seg(z, k), rel, &t);
    if (!ok) {
        cr_assert_eq(rc, -ERANGE, "seg %d rel %lld", k, (long long)rel);
        cr_assert_null(t);
        zt_assert_unchanged(&before, z);
    } else {
        cr_assert_eq(rc, 0, "seg %d rel %lld", k, (long long)rel);
        zt_expect_pat(z, 0, abs);
        zt_expect_pat(t, abs, AT_TOTAL - abs);
        cr_assert_eq(zbuf_delete(t), 0);
    }
    cr_assert_eq(zbuf_delete(z), 0);
}

static void copyout_at_case(int k, int64_t rel, size_t abs, bool ok)
{
    zbuf_t *z = zt_make(at_segs, 3);
    zt_snap_t before;
    zt_snap(&before, z);
    for (size_t i = 0; i < AT_NLENS; i++) {
        uint8_t out[AT_TOTAL + 1];
        size_t room = at_lens[i] < sizeof out ? at_lens[i] : sizeof out;
        memset(out, 0xee, sizeof out);
        /* Never more than `room` is asked for: the count is an upper bound
         * and no location has more than AT_TOTAL bytes after it. */
        ssize_t got = zbuf_copyout_at(z, at_seg(z, k), rel, out, room);
        if (!ok) {
            cr_assert_eq(got, -ERANGE, "seg %d rel %lld", k, (long long)rel);
        } else {
            size_t n = at_clamp(room, abs);
            cr_assert_eq(got, (ssize_t)n, "seg %d rel %lld len %zu", k, (long long)rel, room);
            for (size_t b = 0; b < n; b++)
                cr_assert_eq(out[b], ZT_PAT(abs + b));
            cr_assert_eq(out[n], 0xee, "wrote past the count");
        }
    }
    zt_assert_unchanged(&before, z);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(seg, dup_at_every_location_and_count)
{
    at_every_location(dup_at_case);
}

Test(seg, cut_at_every_location_and_count)
{
    at_every_location(cut_at_case);
}

Test(seg, split_at_every_location)
{
    at_every_location(split_at_case);
}

Test(seg, copyout_at_every_location_and_count)
{
    at_every_location(copyout_at_case);
}

Test(seg, at_calls_take_begin_and_refuse_end_whatever_the_segment)
{
    zbuf_t *z = zt_make(at_segs, 3), *d, *t;
    zbuf_seg_t *mid = at_seg(z, 1), *after;
    uint8_t out[2];

    cr_assert_eq(zbuf_dup_at(z, mid, ZBUF_REL_BEGIN, 2, &d), 0);
    zt_expect_pat(d, 0, 2);
    cr_assert_eq(zbuf_delete(d), 0);
    cr_assert_eq(zbuf_copyout_at(z, mid, ZBUF_REL_BEGIN, out, 2), 2);
    cr_assert_eq(out[1], ZT_PAT(1));
    cr_assert_eq(zbuf_dup_at(z, mid, ZBUF_REL_END, 1, &d), -ERANGE);
    cr_assert_eq(zbuf_cut_at(z, mid, ZBUF_REL_END, 1, &after), -ERANGE);
    cr_assert_eq(zbuf_split_at(z, mid, ZBUF_REL_END, &t), -ERANGE);
    cr_assert_eq(zbuf_copyout_at(z, NULL, ZBUF_REL_END, out, 1), -ERANGE);
    cr_assert_eq(zbuf_split_at(z, mid, ZBUF_REL_BEGIN, &t), 0);
    cr_assert_eq(zbuf_length(z), 0);
    zt_expect_pat(t, 0, AT_TOTAL);
    /* An empty zbuf has no byte to name, not even its start. */
    cr_assert_eq(zbuf_dup_at(z, NULL, ZBUF_REL_BEGIN, 0, &d), -ERANGE);
    cr_assert_eq(zbuf_cut_at(z, NULL, 0, 0, NULL), -ERANGE);
    cr_assert_eq(zbuf_copyout_at(z, NULL, 0, out, 0), -ERANGE);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zbuf_delete(t), 0);
}

Test(seg, at_calls_refuse_bad_handles_and_change_nothing)
{
    zbuf_t *z = zt_make(at_segs, 3), *other, *gone, *d = NULL, *t = NULL;
    zbuf_seg_t *foreign, *after = NULL;
    uint8_t out[4];
    zt_snap_t before;

    cr_assert_eq(zbuf_create(&other), 0);
    cr_assert_eq(zbuf_append_copy(other, "ab", 2), 0);
    foreign = zbuf_seg_first(other);
    cr_assert_eq(zbuf_create(&gone), 0);
    cr_assert_eq(zbuf_delete(gone), 0);
    zt_snap(&before, z);
    cr_assert_eq(zbuf_dup_at(z, foreign, 0, 1, &d), -EINVAL);
    cr_assert_eq(zbuf_dup_at(z, NULL, 0, 1, NULL), -EINVAL);
    cr_assert_eq(zbuf_dup_at(NULL, NULL, 0, 1, &d), -EINVAL);
    cr_assert_eq(zbuf_dup_at(gone, NULL, 0, 1, &d), -EINVAL);
    cr_assert_eq(zbuf_cut_at(z, foreign, 0, 1, &after), -EINVAL);
    cr_assert_eq(zbuf_cut_at(NULL, NULL, 0, 1, &after), -EINVAL);
    cr_assert_eq(zbuf_split_at(z, foreign, 0, &t), -EINVAL);
    cr_assert_eq(zbuf_split_at(z, NULL, 1, NULL), -EINVAL);
    cr_assert_eq(zbuf_split_at(gone, NULL, 0, &t), -EINVAL);
    cr_assert_eq(zbuf_copyout_at(z, foreign, 0, out, 1), -EINVAL);
    cr_assert_eq(zbuf_copyout_at(z, NULL, 0, NULL, 1), -EINVAL);
    cr_assert_eq(zbuf_copyout_at(NULL, NULL, 0, out, 1), -EINVAL);
    /* A foreign segment is refused before the location is looked at. */
    cr_assert_eq(zbuf_dup_at(z, foreign, 1000, 1, &d), -EINVAL);
    cr_assert_null(d);
    cr_assert_null(t);
    cr_assert_null(after);
    zt_assert_unchanged(&before, z);
    zt_expect_released(zt_none, 3);
    cr_assert_eq(zbuf_delete(other), 0);
    cr_assert_eq(zbuf_delete(z), 0);
}
