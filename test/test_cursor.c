/* SPDX-License-Identifier: MIT */
/*
 * Cursors: reading integers of every width in both byte orders, and byte
 * runs, across segment boundaries.  A read that does not fit fails with
 * -ERANGE and leaves both the cursor and the destination untouched, so a
 * parser can wait for more bytes and retry.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support.h"

ZT_SUITE(cursor);

/* Bytes with the high bit set in odd places, to catch sign extension. */
static const uint8_t src[24] = {0x81, 0x12, 0xf3, 0x34, 0xa5, 0x56, 0xe7, 0x78,
                                0x99, 0x0a, 0xbb, 0xcc, 0x1d, 0xfe, 0x2f, 0x80,
                                0x01, 0x7f, 0xff, 0x00, 0x42, 0xc3, 0x64, 0xd5};

/* A zbuf holding src[0 .. n) cut into segments at the offsets in @p cuts
 * (ascending, each strictly inside). */
static zbuf_t *make_cut(size_t n, const size_t *cuts, size_t ncuts)
{
    zbuf_t *z;
    size_t from = 0;

    cr_assert_leq(n, sizeof src);
    cr_assert_eq(zbuf_create(&z), 0);
    for (size_t k = 0; k <= ncuts; k++) {
        size_t to = k < ncuts ? cuts[k] : n;
        cr_assert_lt(from, to);
        cr_assert_eq(zbuf_append_copy(z, src + from, to - from), 0);
        from = to;
    }
    zt_check(z);
    cr_assert_eq(zbuf_seg_count(z), ncuts + 1);
    return z;
}

/* A zbuf with every byte of src[0 .. n) in a segment of its own. */
static zbuf_t *make_bytes(size_t n)
{
    size_t cuts[sizeof src];
    for (size_t i = 1; i < n; i++)
        cuts[i - 1] = i;
    return make_cut(n, cuts, n - 1);
}

static uint64_t expect_be(size_t at, size_t width)
{
    uint64_t v = 0;
    for (size_t i = 0; i < width; i++)
        v = v << 8 | src[at + i];
    return v;
}

static uint64_t expect_le(size_t at, size_t width)
{
    uint64_t v = 0;
    for (size_t i = width; i-- > 0;)
        v = v << 8 | src[at + i];
    return v;
}

/* Read one integer of @p width bytes in the given order (big-endian if
 * @p be) through the public functions; returns the rc, the value in *v. */
static int read_int(zbuf_cursor_t *c, size_t width, bool be, uint64_t *v)
{
    int rc;

    switch (width) {
    case 1: {
        uint8_t x = 0xa7;
        rc = zbuf_cursor_read_u8(c, &x);
        *v = x;
        return rc;
    }
    case 2: {
        uint16_t x = 0xa7a7;
        rc = be ? zbuf_cursor_read_be16(c, &x) : zbuf_cursor_read_le16(c, &x);
        *v = x;
        return rc;
    }
    case 4: {
        uint32_t x = 0xa7a7a7a7u;
        rc = be ? zbuf_cursor_read_be32(c, &x) : zbuf_cursor_read_le32(c, &x);
        *v = x;
        return rc;
    }
    default: {
        uint64_t x = 0xa7a7a7a7a7a7a7a7u;
        rc = be ? zbuf_cursor_read_be64(c, &x) : zbuf_cursor_read_le64(c, &x);
        *v = x;
        return rc;
    }
    }
}

/* The value a failed read_int() must leave in place. */
static uint64_t untouched(size_t width)
{
    return 0xa7a7a7a7a7a7a7a7u >> (64 - 8 * width);
}

static const size_t widths[] = {1, 2, 4, 8};

Test(cursor, every_width_and_order_across_every_split_position)
{
    for (size_t wi = 0; wi < 4; wi++) {
        size_t w = widths[wi];
        for (int be = 0; be <= 1; be++) {
            for (size_t pre = 0; pre <= 3; pre += 3) {
                /* The boundary falls after s bytes of the value, s = 0 .. w. */
                for (size_t s = 0; s <= w; s++) {
                    size_t n = pre + w + 2, cut = pre + s;
                    zbuf_t *z = cut > 0 && cut < n ? make_cut(n, &cut, 1) : make_cut(n, NULL, 0);
                    zbuf_cursor_t c;
                    uint64_t v = 0;

                    cr_assert_eq(zbuf_cursor_init(&c, z, pre), 0);
                    cr_assert_eq(read_int(&c, w, be, &v), 0, "w %zu be %d split %zu", w, be, s);
                    cr_assert_eq(v, be ? expect_be(pre, w) : expect_le(pre, w),
                                 "w %zu be %d pre %zu split %zu: %#llx", w, be, pre, s,
                                 (unsigned long long)v);
                    cr_assert_eq(zbuf_cursor_offset(&c), pre + w);
                    cr_assert_eq(zbuf_cursor_remaining(&c), 2);
                    cr_assert_eq(zbuf_delete(z), 0);
                }
            }
        }
    }
}

Test(cursor, every_width_with_one_byte_per_segment)
{
    zbuf_t *z = make_bytes(24);

    for (size_t wi = 0; wi < 4; wi++) {
        size_t w = widths[wi];
        for (int be = 0; be <= 1; be++) {
            for (size_t at = 0; at + w <= 24; at++) {
                zbuf_cursor_t c;
                uint64_t v = 0;

                cr_assert_eq(zbuf_cursor_init(&c, z, at), 0);
                cr_assert_eq(read_int(&c, w, be, &v), 0);
                cr_assert_eq(v, be ? expect_be(at, w) : expect_le(at, w), "w %zu be %d at %zu",
                             w, be, at);
                cr_assert_eq(zbuf_cursor_offset(&c), at + w);
            }
        }
    }
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(cursor, short_read_is_erange_and_moves_nothing_at_every_split)
{
    for (size_t wi = 1; wi < 4; wi++) {
        size_t w = widths[wi];
        for (int be = 0; be <= 1; be++) {
            /* w - 1 bytes remain after the cursor at 2; split them anywhere. */
            for (size_t s = 0; s < w; s++) {
                size_t n = 2 + w - 1, cut = 2 + s;
                zbuf_t *z = cut < n ? make_cut(n, &cut, 1) : make_cut(n, NULL, 0);
                zbuf_cursor_t c, saved;
                uint64_t v = 0;
                uint8_t rest[8];

                cr_assert_eq(zbuf_cursor_init(&c, z, 2), 0);
                saved = c;
                cr_assert_eq(read_int(&c, w, be, &v), -ERANGE, "w %zu be %d split %zu", w, be,
                             s);
                cr_assert_eq(v, untouched(w), "value written on failure");
                cr_assert_eq(memcmp(&c, &saved, sizeof c), 0, "cursor moved on failure");
                cr_assert_eq(zbuf_cursor_offset(&c), 2);
                cr_assert_eq(zbuf_cursor_remaining(&c), w - 1);
                /* The same bytes are still there to read. */
                cr_assert_eq(zbuf_cursor_read(&c, rest, w - 1), 0);
                cr_assert_eq(memcmp(rest, src + 2, w - 1), 0);
                cr_assert_eq(zbuf_cursor_remaining(&c), 0);
                cr_assert_eq(read_int(&c, 1, be, &v), -ERANGE);
                cr_assert_eq(zbuf_delete(z), 0);
            }
        }
    }
}

Test(cursor, reads_at_the_end_and_on_an_empty_zbuf_are_erange)
{
    zbuf_t *z;
    zbuf_cursor_t c, saved;
    uint64_t v = 0;
    uint8_t b = 0x5a;

    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_cursor_init(&c, z, 0), 0);
    cr_assert_eq(zbuf_cursor_remaining(&c), 0);
    cr_assert_eq(zbuf_cursor_offset(&c), 0);
    saved = c;
    for (size_t wi = 0; wi < 4; wi++)
        for (int be = 0; be <= 1; be++)
            cr_assert_eq(read_int(&c, widths[wi], be, &v), -ERANGE);
    cr_assert_eq(zbuf_cursor_read(&c, &b, 1), -ERANGE);
    cr_assert_eq(b, 0x5a);
    cr_assert_eq(zbuf_cursor_skip(&c, 1), -ERANGE);
    cr_assert_null(zbuf_cursor_peek(&c, 1));
    cr_assert_eq(memcmp(&c, &saved, sizeof c), 0);
    cr_assert_eq(zbuf_cursor_read(&c, &b, 0), 0);
    cr_assert_eq(zbuf_cursor_skip(&c, 0), 0);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(cursor, init_places_the_cursor_anywhere_up_to_the_end)
{
    static const size_t cuts[] = {3, 4};
    zbuf_t *z = make_cut(8, cuts, 2);

    for (size_t off = 0; off <= 8; off++) {
        zbuf_cursor_t c;
        uint8_t b;

        cr_assert_eq(zbuf_cursor_init(&c, z, off), 0);
        cr_assert_eq(zbuf_cursor_offset(&c), off);
        cr_assert_eq(zbuf_cursor_remaining(&c), 8 - off);
        if (off < 8) {
            cr_assert_eq(zbuf_cursor_read_u8(&c, &b), 0);
            cr_assert_eq(b, src[off]);
        }
    }
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(cursor, init_outside_or_with_bad_handles_is_rejected)
{
    static const size_t cuts[] = {3};
    zbuf_t *z = make_cut(8, cuts, 1);
    zbuf_t *gone;
    zbuf_cursor_t c;

    cr_assert_eq(zbuf_cursor_init(&c, z, 9), -ERANGE);
    cr_assert_eq(zbuf_cursor_init(&c, z, SIZE_MAX), -ERANGE);
    cr_assert_eq(zbuf_cursor_init(NULL, z, 0), -EINVAL);
    cr_assert_eq(zbuf_cursor_init(&c, NULL, 0), -EINVAL);
    cr_assert_eq(zbuf_create(&gone), 0);
    cr_assert_eq(zbuf_delete(gone), 0);
    cr_assert_eq(zbuf_cursor_init(&c, gone, 0), -EINVAL);
    zt_check(z);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(cursor, read_bytes_across_many_segments)
{
    zbuf_t *z = make_bytes(24);
    zbuf_cursor_t c, saved;
    uint8_t out[24];

    cr_assert_eq(zbuf_cursor_init(&c, z, 1), 0);
    cr_assert_eq(zbuf_cursor_read(&c, out, 10), 0);
    cr_assert_eq(memcmp(out, src + 1, 10), 0);
    cr_assert_eq(zbuf_cursor_offset(&c), 11);
    memset(out, 0xee, sizeof out);
    saved = c;
    cr_assert_eq(zbuf_cursor_read(&c, out, 14), -ERANGE);
    cr_assert_eq(memcmp(&c, &saved, sizeof c), 0);
    for (size_t i = 0; i < sizeof out; i++)
        cr_assert_eq(out[i], 0xee, "dst written on failure");
    cr_assert_eq(zbuf_cursor_read(&c, out, 13), 0);
    cr_assert_eq(memcmp(out, src + 11, 13), 0);
    cr_assert_eq(zbuf_cursor_remaining(&c), 0);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(cursor, read_leaves_the_zbuf_alone)
{
    static const size_t cuts[] = {5, 9};
    zbuf_t *z = make_cut(16, cuts, 2);
    zbuf_cursor_t c;
    uint32_t v;
    zbuf_stats_t before, after;

    zbuf_stats_get(&before);
    cr_assert_eq(zbuf_cursor_init(&c, z, 0), 0);
    while (zbuf_cursor_read_be32(&c, &v) == 0)
        ;
    zbuf_stats_get(&after);
    cr_assert_eq(after.live_segs, before.live_segs);
    cr_assert_eq(zbuf_seg_count(z), 3);
    cr_assert_eq(zbuf_length(z), 16);
    zt_check(z);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(cursor, skip_moves_across_segments_and_refuses_too_far)
{
    static const size_t cuts[] = {3, 4, 9};
    zbuf_t *z = make_cut(12, cuts, 3);
    zbuf_cursor_t c, saved;
    uint8_t b;

    cr_assert_eq(zbuf_cursor_init(&c, z, 0), 0);
    cr_assert_eq(zbuf_cursor_skip(&c, 5), 0);
    cr_assert_eq(zbuf_cursor_offset(&c), 5);
    cr_assert_eq(zbuf_cursor_read_u8(&c, &b), 0);
    cr_assert_eq(b, src[5]);
    saved = c;
    cr_assert_eq(zbuf_cursor_skip(&c, 7), -ERANGE);
    cr_assert_eq(zbuf_cursor_skip(&c, SIZE_MAX), -ERANGE);
    cr_assert_eq(memcmp(&c, &saved, sizeof c), 0);
    cr_assert_eq(zbuf_cursor_skip(&c, 3), 0); /* to the boundary at 9 */
    cr_assert_eq(zbuf_cursor_read_u8(&c, &b), 0);
    cr_assert_eq(b, src[9]);
    cr_assert_eq(zbuf_cursor_skip(&c, 2), 0);
    cr_assert_eq(zbuf_cursor_remaining(&c), 0);
    cr_assert_eq(zbuf_cursor_offset(&c), 12);
    cr_assert_eq(zbuf_cursor_read_u8(&c, &b), -ERANGE);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(cursor, peek_points_into_a_segment_or_gives_null)
{
    static const size_t cuts[] = {4};
    zbuf_t *z = make_cut(10, cuts, 1);
    zbuf_cursor_t c, saved;
    uint8_t *seg0 = zbuf_seg_data(z, zbuf_seg_first(z));
    uint8_t *seg1 = zbuf_seg_data(z, zbuf_seg_last(z));

    cr_assert_eq(zbuf_cursor_init(&c, z, 1), 0);
    saved = c;
    cr_assert_eq(zbuf_cursor_peek(&c, 3), seg0 + 1);
    cr_assert_null(zbuf_cursor_peek(&c, 4), "spans two segments");
    cr_assert_eq(memcmp(&c, &saved, sizeof c), 0, "peek must not advance");
    cr_assert_eq(zbuf_cursor_skip(&c, 3), 0);
    cr_assert_eq(zbuf_cursor_peek(&c, 6), seg1);
    cr_assert_null(zbuf_cursor_peek(&c, 7), "past the end");
    cr_assert_eq(zbuf_cursor_skip(&c, 5), 0);
    cr_assert_eq(zbuf_cursor_peek(&c, 1), seg1 + 5);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(cursor, parses_a_header_split_over_segments)
{
    /* A made-up header: u8 type, be16 len, le32 id, be64 stamp, then payload. */
    uint8_t hdr[15 + 5];
    static const size_t cuts[] = {1, 2, 6, 7, 13};
    zbuf_t *z;
    zbuf_cursor_t c;
    uint8_t type;
    uint16_t len;
    uint32_t id;
    uint64_t stamp;
    size_t from = 0;

    hdr[0] = 7;
    hdr[1] = 0x01;
    hdr[2] = 0x02;
    hdr[3] = 0x78;
    hdr[4] = 0x56;
    hdr[5] = 0x34;
    hdr[6] = 0x12;
    for (int i = 0; i < 8; i++)
        hdr[7 + i] = (uint8_t)(0xf0 + i);
    memcpy(hdr + 15, "hello", 5);
    cr_assert_eq(zbuf_create(&z), 0);
    for (size_t k = 0; k <= 5; k++) {
        size_t to = k < 5 ? cuts[k] : sizeof hdr;
        cr_assert_eq(zbuf_append_copy(z, hdr + from, to - from), 0);
        from = to;
    }
    cr_assert_eq(zbuf_cursor_init(&c, z, 0), 0);
    cr_assert_eq(zbuf_cursor_read_u8(&c, &type), 0);
    cr_assert_eq(zbuf_cursor_read_be16(&c, &len), 0);
    cr_assert_eq(zbuf_cursor_read_le32(&c, &id), 0);
    cr_assert_eq(zbuf_cursor_read_be64(&c, &stamp), 0);
    cr_assert_eq(type, 7);
    cr_assert_eq(len, 0x0102);
    cr_assert_eq(id, 0x12345678u);
    cr_assert_eq(stamp, 0xf0f1f2f3f4f5f6f7u);
    cr_assert_eq(zbuf_cursor_remaining(&c), 5);
    cr_assert_eq(zbuf_delete(z), 0);
}

/* A file whose bytes are src[0 .. n), unlinked. */
static int src_file(size_t n)
{
    char path[] = "/tmp/zbuf-cursor-XXXXXX";
    int fd = mkstemp(path);

    cr_assert_geq(fd, 0);
    unlink(path);
    cr_assert_eq(write(fd, src, n), (ssize_t)n);
    return fd;
}

Test(cursor, reads_file_segments_and_never_peeks_into_them)
{
    int fd = src_file(16);
    zbuf_buf_t *b;
    zbuf_t *z;
    zbuf_cursor_t c;
    uint32_t v;

    cr_assert_eq(zbuf_buf_wrap_file(fd, 0, 16, NULL, NULL, &b), 0);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_copy(z, src, 2), 0);
    cr_assert_eq(zbuf_append_ref(z, b, 2, 14), 0); /* the file holds src too */
    zbuf_buf_unref(b);
    cr_assert_eq(zbuf_cursor_init(&c, z, 0), 0);
    cr_assert_eq(zbuf_cursor_read_be32(&c, &v), 0);
    cr_assert_eq(v, (uint32_t)expect_be(0, 4));
    cr_assert_null(zbuf_cursor_peek(&c, 1), "a file segment has no address");
    cr_assert_eq(zbuf_cursor_read_le32(&c, &v), 0);
    cr_assert_eq(v, (uint32_t)expect_le(4, 4));
    cr_assert_eq(zbuf_delete(z), 0);
    close(fd);
}

Test(cursor, unreadable_file_segment_is_eio_and_moves_nothing)
{
    int fd = src_file(4);
    zbuf_buf_t *b;
    zbuf_t *z;
    zbuf_cursor_t c, saved;
    uint64_t v = 77;

    /* The buffer claims 16 bytes of a 4-byte file. */
    cr_assert_eq(zbuf_buf_wrap_file(fd, 0, 16, NULL, NULL, &b), 0);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_ref(z, b, 0, 16), 0);
    zbuf_buf_unref(b);
    cr_assert_eq(zbuf_cursor_init(&c, z, 0), 0);
    saved = c;
    cr_assert_eq(zbuf_cursor_read_be64(&c, &v), -EIO);
    cr_assert_eq(v, 77);
    cr_assert_eq(memcmp(&c, &saved, sizeof c), 0);
    cr_assert_eq(zbuf_delete(z), 0);
    close(fd);
}
