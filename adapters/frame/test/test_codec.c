/* SPDX-License-Identifier: MIT */
/*
 * The framing codec on its own: round trips for every length encoding,
 * frames split at every byte position (headers straddling segments),
 * partial frames waiting, oversized and malformed lengths rejected before
 * any payload is awaited, and no payload byte copied.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <zbuf/frame.h>

#include "support.h"

/* Header slabs kept by the test thread are not leaks. */
static void codec_fini(void)
{
    zbuf_frame_thread_flush();
    zt_assert_no_leaks();
}

TestSuite(frame, .init = zt_leak_baseline, .fini = codec_fini);

/* Byte i of the test stream `seed`: a message's content, checkable anywhere. */
static uint8_t codec_byte(uint32_t seed, size_t i)
{
    uint32_t x = (uint32_t)i * 2654435761u + seed * 40503u;
    return (uint8_t)(x >> 24 ^ x >> 11 ^ x);
}

static void codec_fill(uint8_t *p, size_t len, uint32_t seed, size_t from)
{
    for (size_t i = 0; i < len; i++)
        p[i] = codec_byte(seed, from + i);
}

static const zbuf_frame_len_t all_kinds[] = {ZBUF_FRAME_BE32, ZBUF_FRAME_BE16, ZBUF_FRAME_LE32,
                                             ZBUF_FRAME_BE64, ZBUF_FRAME_VARINT};

static zbuf_frame_opts_t opts_of(zbuf_frame_len_t kind, bool incl, size_t max)
{
    zbuf_frame_opts_t o;
    zbuf_frame_opts_default(&o);
    o.len_kind = kind;
    o.len_includes_header = incl;
    o.max_payload = max;
    return o;
}

/* A message of len bytes of stream `seed`, as one copied segment. */
static zbuf_t *message(size_t len, uint32_t seed)
{
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    if (len > 0) {
        uint8_t *p = malloc(len);
        codec_fill(p, len, seed, 0);
        cr_assert_eq(zbuf_append_copy(z, p, len), 0);
        free(p);
    }
    return z;
}

static void expect_message(zbuf_t *m, size_t len, uint32_t seed)
{
    zt_check(m);
    cr_assert_eq(zbuf_length(m), len);
    zbuf_cursor_t c;
    cr_assert_eq(zbuf_cursor_init(&c, m, 0), 0);
    for (size_t i = 0; i < len; i++) {
        uint8_t b;
        cr_assert_eq(zbuf_cursor_read_u8(&c, &b), 0);
        cr_assert_eq(b, codec_byte(seed, i), "byte %zu of a %zu-byte message", i, len);
    }
}

/* The bytes of several frames, flattened. */
static uint8_t *wire(const zbuf_frame_opts_t *o, const size_t *lens, size_t n, size_t *total)
{
    zbuf_t *all;
    cr_assert_eq(zbuf_create(&all), 0);
    for (size_t i = 0; i < n; i++) {
        zbuf_t *m = message(lens[i], (uint32_t)i);
        cr_assert_eq(zbuf_frame_encode(o, m), 0);
        cr_assert_eq(zbuf_length(m), lens[i] + zbuf_frame_header_size(o, lens[i]));
        cr_assert_eq(zbuf_append(all, m), 0);
    }
    *total = zbuf_length(all);
    uint8_t *flat = malloc(*total);
    cr_assert_eq(zbuf_copyout(all, 0, flat, *total), (ssize_t)*total);
    zbuf_delete(all);
    return flat;
}

/* Feed flat[from, to) as one zbuf. */
static void feed(zbuf_frame_decoder_t *d, const uint8_t *flat, size_t from, size_t to)
{
    if (to == from)
        return;
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_copy(z, flat + from, to - from), 0);
    cr_assert_eq(zbuf_frame_decoder_feed(d, z), 0);
}

/* Take every complete frame; returns how many, checking each. */
static size_t drain(zbuf_frame_decoder_t *d, const size_t *lens, size_t n, size_t got)
{
    zbuf_t *m;
    int rc;
    while ((rc = zbuf_frame_decoder_next(d, &m)) == 0) {
        cr_assert_lt(got, n, "more frames than were sent");
        expect_message(m, lens[got], (uint32_t)got);
        zbuf_delete(m);
        got++;
    }
    cr_assert_eq(rc, -EAGAIN, "next() = %d", rc);
    return got;
}

static const size_t sample_lens[] = {0, 1, 5, 127, 128, 300};

Test(frame, every_length_kind_round_trips)
{
    const size_t lens[] = {0, 1, 2, 126, 127, 128, 129, 255, 256, 16383, 16384, 65535, 70000};
    const size_t n = sizeof(lens) / sizeof(lens[0]);
    for (size_t k = 0; k < 5; k++) {
        for (int incl = 0; incl < 2; incl++) {
            zbuf_frame_opts_t o = opts_of(all_kinds[k], incl, 1 << 20);
            size_t nn = all_kinds[k] == ZBUF_FRAME_BE16 ? n - 1 : n; /* 70000 > 16 bits */
            if (all_kinds[k] == ZBUF_FRAME_BE16 && incl)
                nn--; /* 65535 + 2 does not fit either */
            size_t total;
            uint8_t *flat = wire(&o, lens, nn, &total);
            zbuf_frame_decoder_t *d;
            cr_assert_eq(zbuf_frame_decoder_create(&o, &d), 0);
            feed(d, flat, 0, total);
            cr_assert_eq(drain(d, lens, nn, 0), nn, "kind %zu incl %d", k, incl);
            cr_assert_eq(zbuf_frame_decoder_buffered(d), 0);
            zbuf_frame_decoder_delete(d);
            free(flat);
        }
    }
}

Test(frame, a_split_at_every_byte_position_gives_the_same_frames)
{
    for (size_t k = 0; k < 5; k++) {
        for (int incl = 0; incl < 2; incl++) {
            zbuf_frame_opts_t o = opts_of(all_kinds[k], incl, 4096);
            const size_t n = sizeof(sample_lens) / sizeof(sample_lens[0]);
            size_t total;
            uint8_t *flat = wire(&o, sample_lens, n, &total);
            for (size_t cut = 0; cut <= total; cut++) {
                zbuf_frame_decoder_t *d;
                cr_assert_eq(zbuf_frame_decoder_create(&o, &d), 0);
                feed(d, flat, 0, cut);
                size_t got = drain(d, sample_lens, n, 0);
                feed(d, flat, cut, total);
                got = drain(d, sample_lens, n, got);
                cr_assert_eq(got, n, "kind %zu, split at %zu", k, cut);
                cr_assert_eq(zbuf_frame_decoder_buffered(d), 0);
                zbuf_frame_decoder_delete(d);
            }
            free(flat);
        }
    }
}

Test(frame, byte_by_byte_feeding_waits_then_delivers)
{
    for (size_t k = 0; k < 5; k++) {
        zbuf_frame_opts_t o = opts_of(all_kinds[k], false, 4096);
        const size_t n = sizeof(sample_lens) / sizeof(sample_lens[0]);
        size_t total;
        uint8_t *flat = wire(&o, sample_lens, n, &total);
        zbuf_frame_decoder_t *d;
        cr_assert_eq(zbuf_frame_decoder_create(&o, &d), 0);
        size_t got = 0, frame_end = 0;
        for (size_t i = 0; i < total; i++) {
            feed(d, flat, i, i + 1);
            size_t before = got;
            got = drain(d, sample_lens, n, got);
            if (got > before) {
                /* A frame appears exactly when its last byte arrives. */
                frame_end += sample_lens[before] + zbuf_frame_header_size(&o, sample_lens[before]);
                cr_assert_eq(i + 1, frame_end, "kind %zu frame %zu", k, before);
                cr_assert_eq(got, before + 1);
            }
        }
        cr_assert_eq(got, n);
        zbuf_frame_decoder_delete(d);
        free(flat);
    }
}

Test(frame, a_header_straddling_segments_is_read_and_payload_shared)
{
    /* A 4-byte header split 1+3 over two received segments, payload in a
     * third: the message shares the third segment's buffer. */
    zbuf_frame_decoder_t *d;
    cr_assert_eq(zbuf_frame_decoder_create(NULL, &d), 0);
    static const uint8_t hdr[4] = {0, 0, 0x01, 0x00}; /* 256 */
    uint8_t *payload = malloc(256);
    codec_fill(payload, 256, 0, 0);
    int released = 0;
    zbuf_t *a, *b;
    cr_assert_eq(zbuf_create(&a), 0);
    cr_assert_eq(zbuf_append_copy(a, hdr, 1), 0);
    cr_assert_eq(zbuf_frame_decoder_feed(d, a), 0);
    cr_assert_eq(zbuf_create(&b), 0);
    cr_assert_eq(zbuf_append_copy(b, hdr + 1, 3), 0);
    cr_assert_eq(zbuf_append_buf(b, payload, 256, zt_count_release, &released), 0);
    zbuf_stats_t before, after;
    zbuf_stats_get(&before);
    cr_assert_eq(zbuf_frame_decoder_feed(d, b), 0);
    size_t pending = 0;
    cr_assert_eq(zbuf_frame_decoder_pending(d, &pending), 0);
    cr_assert_eq(pending, 256);
    zbuf_t *m;
    cr_assert_eq(zbuf_frame_decoder_next(d, &m), 0);
    zbuf_stats_get(&after);
    cr_assert_eq(after.bytes_copied, before.bytes_copied, "decoding copied %llu bytes",
                 (unsigned long long)(after.bytes_copied - before.bytes_copied));
    cr_assert_eq(zbuf_seg_count(m), 1);
    cr_assert_eq(zbuf_seg_data(m, zbuf_seg_first(m)), payload, "the payload was not copied");
    expect_message(m, 256, 0);
    cr_assert_eq(zbuf_frame_decoder_next(d, &m) == -EAGAIN, true);
    zbuf_frame_decoder_delete(d);
    cr_assert_eq(released, 0, "the message still holds the payload");
    zbuf_delete(m);
    cr_assert_eq(released, 1);
    free(payload);
}

Test(frame, an_oversized_length_is_rejected_before_the_payload)
{
    for (size_t k = 0; k < 5; k++) {
        zbuf_frame_opts_t big = opts_of(all_kinds[k], false, 1001);
        zbuf_frame_opts_t small = opts_of(all_kinds[k], false, 1000);
        zbuf_t *m = message(1001, 1);
        cr_assert_eq(zbuf_frame_encode(&small, m), -EMSGSIZE, "the encoder refuses too");
        cr_assert_eq(zbuf_length(m), 1001, "a refused encode changes nothing");
        cr_assert_eq(zbuf_frame_encode(&big, m), 0);
        size_t hl = zbuf_frame_header_size(&big, 1001);
        /* Only the header reaches the decoder: it must not wait for more. */
        zbuf_t *hdr;
        cr_assert_eq(zbuf_split_head(m, hl, &hdr), 0);
        zbuf_frame_decoder_t *d;
        cr_assert_eq(zbuf_frame_decoder_create(&small, &d), 0);
        cr_assert_eq(zbuf_frame_decoder_feed(d, hdr), 0);
        zbuf_t *out = NULL;
        cr_assert_eq(zbuf_frame_decoder_next(d, &out), -EMSGSIZE, "kind %zu", k);
        cr_assert_null(out);
        cr_assert_eq(zbuf_frame_decoder_next(d, &out), -EMSGSIZE, "the error is sticky");
        size_t pending;
        cr_assert_eq(zbuf_frame_decoder_pending(d, &pending), -EMSGSIZE);
        cr_assert_eq(zbuf_frame_decoder_feed(d, m), -EMSGSIZE);
        zt_check(m);
        cr_assert_eq(zbuf_length(m), 1001, "a refused feed leaves the zbuf to the caller");
        zbuf_delete(m);
        zbuf_frame_decoder_delete(d);
    }
}

Test(frame, a_huge_claimed_length_allocates_nothing)
{
    /* 2^63 as a BE64 length with the default maximum. */
    static const uint8_t hdr[8] = {0x80, 0, 0, 0, 0, 0, 0, 0};
    zbuf_frame_opts_t o = opts_of(ZBUF_FRAME_BE64, false, ZBUF_FRAME_DEFAULT_MAX);
    zbuf_frame_decoder_t *d;
    cr_assert_eq(zbuf_frame_decoder_create(&o, &d), 0);
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_copy(z, hdr, 8), 0);
    cr_assert_eq(zbuf_frame_decoder_feed(d, z), 0);
    zbuf_stats_t before, after;
    zbuf_stats_get(&before);
    zbuf_t *m;
    cr_assert_eq(zbuf_frame_decoder_next(d, &m), -EMSGSIZE);
    zbuf_stats_get(&after);
    cr_assert_eq(after.allocs, before.allocs, "rejecting allocated");
    zbuf_frame_decoder_delete(d);
}

static int decode_one(const zbuf_frame_opts_t *o, const uint8_t *bytes, size_t n, size_t *len)
{
    zbuf_frame_decoder_t *d;
    cr_assert_eq(zbuf_frame_decoder_create(o, &d), 0);
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_copy(z, bytes, n), 0);
    cr_assert_eq(zbuf_frame_decoder_feed(d, z), 0);
    zbuf_t *m = NULL;
    int rc = zbuf_frame_decoder_next(d, &m);
    if (rc == 0) {
        *len = zbuf_length(m);
        zbuf_delete(m);
    }
    zbuf_frame_decoder_delete(d);
    return rc;
}

Test(frame, malformed_varints_are_rejected)
{
    zbuf_frame_opts_t o = opts_of(ZBUF_FRAME_VARINT, false, ZBUF_FRAME_DEFAULT_MAX);
    size_t len = 0;
    static const uint8_t padded[] = {0x81, 0x00, 'x'};           /* 1, not shortest */
    static const uint8_t zero_pad[] = {0x80, 0x00};              /* 0, not shortest */
    static const uint8_t eleven[11] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
                                       0x80, 0x80, 0x80, 0x80, 0x01};
    static const uint8_t overflow[10] = {0xff, 0xff, 0xff, 0xff, 0xff,
                                         0xff, 0xff, 0xff, 0xff, 0x02};
    static const uint8_t ok[] = {0x01, 'x'};
    static const uint8_t partial[] = {0x80, 0x80};
    cr_assert_eq(decode_one(&o, padded, sizeof(padded), &len), -EBADMSG);
    cr_assert_eq(decode_one(&o, zero_pad, sizeof(zero_pad), &len), -EBADMSG);
    cr_assert_eq(decode_one(&o, eleven, sizeof(eleven), &len), -EBADMSG);
    cr_assert_eq(decode_one(&o, overflow, sizeof(overflow), &len), -EBADMSG);
    cr_assert_eq(decode_one(&o, partial, sizeof(partial), &len), -EAGAIN);
    cr_assert_eq(decode_one(&o, ok, sizeof(ok), &len), 0);
    cr_assert_eq(len, 1);
}

Test(frame, a_length_below_its_own_header_is_malformed)
{
    zbuf_frame_opts_t o = opts_of(ZBUF_FRAME_BE32, true, 1 << 20);
    size_t len = 99;
    static const uint8_t three[] = {0, 0, 0, 3};
    static const uint8_t four[] = {0, 0, 0, 4};
    static const uint8_t six[] = {0, 0, 0, 6, 'h', 'i'};
    cr_assert_eq(decode_one(&o, three, 4, &len), -EBADMSG);
    cr_assert_eq(decode_one(&o, four, 4, &len), 0);
    cr_assert_eq(len, 0, "a header-only frame is an empty message");
    cr_assert_eq(decode_one(&o, six, 6, &len), 0);
    cr_assert_eq(len, 2);
}

Test(frame, the_field_limit_caps_the_maximum)
{
    zbuf_frame_opts_t o = opts_of(ZBUF_FRAME_BE16, false, ZBUF_FRAME_DEFAULT_MAX);
    zbuf_t *m = message(65536, 2);
    cr_assert_eq(zbuf_frame_encode(&o, m), -EMSGSIZE, "65536 does not fit in 16 bits");
    cr_assert_eq(zbuf_cut(m, 0, 1, NULL), 0);
    cr_assert_eq(zbuf_frame_encode(&o, m), 0);
    cr_assert_eq(zbuf_length(m), 65537);
    zbuf_frame_decoder_t *d;
    cr_assert_eq(zbuf_frame_decoder_create(&o, &d), 0);
    cr_assert_eq(zbuf_frame_decoder_feed(d, m), 0);
    zbuf_t *out;
    cr_assert_eq(zbuf_frame_decoder_next(d, &out), 0);
    cr_assert_eq(zbuf_length(out), 65535);
    zbuf_delete(out);
    zbuf_frame_decoder_delete(d);
}

Test(frame, encoding_writes_only_the_header)
{
    /* A payload in an enrolled (read-only) buffer gets a header segment in
     * front; in a private buffer with headroom, the header goes there. */
    int released = 0;
    static char text[] = "payload bytes";
    zbuf_t *m;
    cr_assert_eq(zbuf_create(&m), 0);
    cr_assert_eq(zbuf_append_buf(m, text, sizeof(text), zt_count_release, &released), 0);
    zbuf_stats_t before, after;
    zbuf_stats_get(&before);
    cr_assert_eq(zbuf_frame_encode(NULL, m), 0);
    zbuf_stats_get(&after);
    cr_assert_eq(after.bytes_copied, before.bytes_copied);
    cr_assert_eq(zbuf_seg_count(m), 2);
    cr_assert_eq(zbuf_seg_data(m, zbuf_seg_last(m)), text);
    uint8_t h[4];
    cr_assert_eq(zbuf_copyout(m, 0, h, 4), 4);
    cr_assert_eq(h[3], sizeof(text));
    cr_assert_eq(h[0] | h[1] | h[2], 0);
    /* A second header goes into the slab as well (the first header's
     * buffer is shared with the slab, so it offers no headroom). */
    cr_assert_eq(zbuf_frame_encode(NULL, m), 0);
    cr_assert_eq(zbuf_seg_count(m), 3);
    zbuf_delete(m);
    cr_assert_eq(released, 1);

    /* A private buffer with headroom takes the header in place. */
    zbuf_buf_t *b;
    cr_assert_eq(zbuf_buf_alloc(64, &b), 0);
    cr_assert_eq(zbuf_create(&m), 0);
    cr_assert_eq(zbuf_append_ref(m, b, 16, 10), 0);
    zbuf_buf_unref(b);
    cr_assert_eq(zbuf_frame_encode(NULL, m), 0);
    cr_assert_eq(zbuf_seg_count(m), 1);
    cr_assert_eq(zbuf_length(m), 14);
    zbuf_delete(m);
}

Test(frame, bad_arguments_are_refused)
{
    zbuf_frame_decoder_t *d;
    zbuf_frame_opts_t o = opts_of(ZBUF_FRAME_BE32, false, 0);
    cr_assert_eq(zbuf_frame_decoder_create(&o, &d), -EINVAL, "zero maximum");
    o = opts_of((zbuf_frame_len_t)42, false, 10);
    cr_assert_eq(zbuf_frame_decoder_create(&o, &d), -EINVAL, "unknown kind");
    cr_assert_eq(zbuf_frame_header_size(&o, 1), 0);
    cr_assert_eq(zbuf_frame_decoder_create(NULL, NULL), -EINVAL);
    cr_assert_eq(zbuf_frame_decoder_create(NULL, &d), 0);
    zbuf_t *m;
    cr_assert_eq(zbuf_frame_decoder_next(d, NULL), -EINVAL);
    cr_assert_eq(zbuf_frame_decoder_feed(d, NULL), -EINVAL);
    cr_assert_eq(zbuf_frame_decoder_next(NULL, &m), -EINVAL);
    cr_assert_eq(zbuf_frame_decoder_next(d, &m), -EAGAIN, "nothing fed");
    cr_assert_eq(zbuf_frame_encode(NULL, NULL), -EINVAL);
    cr_assert_eq(zbuf_frame_decoder_buffered(NULL), 0);
    zbuf_frame_decoder_delete(d);
    zbuf_frame_decoder_delete(NULL);
}

Test(frame, keep_header_returns_frames_as_they_came)
{
    zbuf_frame_opts_t o = opts_of(ZBUF_FRAME_VARINT, false, 4096);
    o.keep_header = true;
    const size_t n = sizeof(sample_lens) / sizeof(sample_lens[0]);
    size_t total;
    uint8_t *flat = wire(&o, sample_lens, n, &total);
    zbuf_frame_decoder_t *d;
    cr_assert_eq(zbuf_frame_decoder_create(&o, &d), 0);
    feed(d, flat, 0, total);
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        zbuf_t *m;
        cr_assert_eq(zbuf_frame_decoder_next(d, &m), 0);
        size_t len = zbuf_length(m);
        cr_assert_eq(len, zbuf_frame_header_size(&o, sample_lens[i]) + sample_lens[i]);
        uint8_t *b = malloc(len + 1);
        cr_assert_eq(zbuf_copyout(m, 0, b, len), (ssize_t)len);
        cr_assert_eq(memcmp(b, flat + off, len), 0, "frame %zu differs from the wire", i);
        off += len;
        free(b);
        zbuf_delete(m);
    }
    cr_assert_eq(off, total);
    zbuf_frame_decoder_delete(d);
    free(flat);
}

/* Take frames in bulk and check they are a prefix of the wire at *off. */
static size_t take_frames(zbuf_frame_decoder_t *d, size_t max, const uint8_t *flat, size_t *off)
{
    zbuf_t *z;
    size_t count = 0;
    int rc = zbuf_frame_decoder_next_frames(d, max, &z, &count);
    if (rc == -EAGAIN)
        return 0;
    cr_assert_eq(rc, 0);
    zt_check(z);
    size_t len = zbuf_length(z);
    uint8_t *b = malloc(len + 1);
    cr_assert_eq(zbuf_copyout(z, 0, b, len), (ssize_t)len);
    cr_assert_eq(memcmp(b, flat + *off, len), 0);
    *off += len;
    free(b);
    zbuf_delete(z);
    cr_assert_gt(count, 0);
    return count;
}

Test(frame, next_frames_takes_every_whole_frame_at_once)
{
    for (size_t k = 0; k < 5; k++) {
        zbuf_frame_opts_t o = opts_of(all_kinds[k], k % 2 == 1, 4096);
        const size_t n = sizeof(sample_lens) / sizeof(sample_lens[0]);
        size_t total;
        uint8_t *flat = wire(&o, sample_lens, n, &total);
        for (size_t cut = 0; cut <= total; cut++) {
            zbuf_frame_decoder_t *d;
            cr_assert_eq(zbuf_frame_decoder_create(&o, &d), 0);
            feed(d, flat, 0, cut);
            size_t off = 0, got = take_frames(d, 0, flat, &off);
            /* Exactly the frames that end at or before the cut. */
            size_t whole = 0, end = 0;
            for (size_t i = 0; i < n; i++) {
                end += zbuf_frame_header_size(&o, sample_lens[i]) + sample_lens[i];
                if (end <= cut)
                    whole++;
            }
            cr_assert_eq(got, whole, "kind %zu cut %zu", k, cut);
            cr_assert_eq(zbuf_frame_decoder_buffered(d), cut - off);
            feed(d, flat, cut, total);
            got += take_frames(d, 0, flat, &off);
            cr_assert_eq(got, n);
            cr_assert_eq(off, total);
            zbuf_frame_decoder_delete(d);
        }
        free(flat);
    }
}

Test(frame, next_frames_respects_the_byte_limit_and_stops_before_an_error)
{
    zbuf_frame_opts_t o = opts_of(ZBUF_FRAME_BE32, false, 1000);
    const size_t lens[] = {100, 100, 900, 5};
    size_t total;
    uint8_t *flat = wire(&o, lens, 4, &total);
    zbuf_frame_decoder_t *d;
    cr_assert_eq(zbuf_frame_decoder_create(&o, &d), 0);
    feed(d, flat, 0, total);
    static const uint8_t bad[4] = {0, 0, 0x10, 0}; /* 4096 > 1000 */
    feed(d, bad, 0, 4);
    size_t off = 0;
    cr_assert_eq(take_frames(d, 250, flat, &off), 2, "two 104-byte frames fit in 250");
    cr_assert_eq(take_frames(d, 250, flat, &off), 1, "a bigger frame still comes, alone");
    cr_assert_eq(take_frames(d, 0, flat, &off), 1, "the good frame before the bad header");
    zbuf_t *z;
    cr_assert_eq(zbuf_frame_decoder_next_frames(d, 0, &z, NULL), -EMSGSIZE);
    cr_assert_eq(zbuf_frame_decoder_next(d, &z), -EMSGSIZE, "sticky");
    cr_assert_eq(zbuf_frame_decoder_next_frames(NULL, 0, &z, NULL), -EINVAL);
    zbuf_frame_decoder_delete(d);
    free(flat);
}

Test(frame, append_copies_small_payloads_and_references_large_ones)
{
    zbuf_frame_opts_t o = opts_of(ZBUF_FRAME_BE32, false, 1 << 20);
    o.copy_max = 1024;
    zbuf_t *out;
    cr_assert_eq(zbuf_create(&out), 0);
    int small_rel = 0, big_rel = 0;
    char *small = malloc(1000), *big = malloc(5000);
    codec_fill((uint8_t *)small, 1000, 0, 0);
    codec_fill((uint8_t *)big, 5000, 1, 0);
    zbuf_t *a, *b;
    cr_assert_eq(zbuf_create(&a), 0);
    cr_assert_eq(zbuf_append_buf(a, small, 1000, zt_count_release, &small_rel), 0);
    cr_assert_eq(zbuf_create(&b), 0);
    cr_assert_eq(zbuf_append_buf(b, big, 5000, zt_count_release, &big_rel), 0);

    zbuf_stats_t s0, s1, s2;
    zbuf_stats_get(&s0);
    cr_assert_eq(zbuf_frame_append(&o, out, a), 0);
    zbuf_stats_get(&s1);
    cr_assert_eq(s1.bytes_copied - s0.bytes_copied, 1000, "the small payload is copied");
    cr_assert_eq(small_rel, 1, "and its buffer let go at once");
    cr_assert_eq(zbuf_frame_append(&o, out, b), 0);
    zbuf_stats_get(&s2);
    cr_assert_eq(s2.bytes_copied, s1.bytes_copied, "the large payload is referenced");
    cr_assert_eq(big_rel, 0);
    zt_check(out);
    cr_assert_eq(zbuf_length(out), 4 + 1000 + 4 + 5000);
    /* Segments: [hdr+small+hdr] in one chunk, then the big payload. */
    cr_assert_eq(zbuf_seg_count(out), 2);

    zbuf_frame_decoder_t *d;
    cr_assert_eq(zbuf_frame_decoder_create(&o, &d), 0);
    cr_assert_eq(zbuf_frame_decoder_feed(d, out), 0);
    zbuf_t *m;
    cr_assert_eq(zbuf_frame_decoder_next(d, &m), 0);
    expect_message(m, 1000, 0);
    zbuf_delete(m);
    cr_assert_eq(zbuf_frame_decoder_next(d, &m), 0);
    expect_message(m, 5000, 1);
    cr_assert_eq(zbuf_seg_data(m, zbuf_seg_first(m)), big);
    zbuf_delete(m);
    zbuf_frame_decoder_delete(d);
    cr_assert_eq(big_rel, 1);
    free(small);
    free(big);
}

Test(frame, many_small_appends_share_few_buffers)
{
    zbuf_frame_opts_t o = opts_of(ZBUF_FRAME_VARINT, false, 1 << 20);
    zbuf_t *out;
    cr_assert_eq(zbuf_create(&out), 0);
    const int n = 200;
    size_t lens[200];
    for (int i = 0; i < n; i++) {
        lens[i] = (size_t)(i * 37 % 900);
        cr_assert_eq(zbuf_frame_append(&o, out, message(lens[i], (uint32_t)i)), 0);
    }
    zt_check(out);
    size_t total = zbuf_length(out);
    cr_assert_leq(zbuf_seg_count(out), total / ZBUF_FRAME_APPEND_CHUNK + 2,
                  "%zu segments for %zu bytes", zbuf_seg_count(out), total);
    zbuf_frame_decoder_t *d;
    cr_assert_eq(zbuf_frame_decoder_create(&o, &d), 0);
    cr_assert_eq(zbuf_frame_decoder_feed(d, out), 0);
    cr_assert_eq(drain(d, lens, (size_t)n, 0), (size_t)n);
    zbuf_frame_decoder_delete(d);
}

Test(frame, append_never_copies_when_told_not_to_and_fails_cleanly)
{
    zbuf_frame_opts_t o = opts_of(ZBUF_FRAME_BE16, false, 100);
    o.copy_max = 0;
    zbuf_t *out;
    cr_assert_eq(zbuf_create(&out), 0);
    zbuf_t *small = message(10, 3);
    zbuf_stats_t s0, s1;
    zbuf_stats_get(&s0);
    cr_assert_eq(zbuf_frame_append(&o, out, small), 0);
    zbuf_stats_get(&s1);
    cr_assert_eq(s1.bytes_copied, s0.bytes_copied);
    zbuf_t *big = message(101, 4);
    cr_assert_eq(zbuf_frame_append(&o, out, big), -EMSGSIZE);
    cr_assert_eq(zbuf_length(out), 12, "a refused append leaves out as it was");
    cr_assert_eq(zbuf_length(big), 101);
    cr_assert_eq(zbuf_frame_append(&o, out, out), -EINVAL);
    cr_assert_eq(zbuf_frame_append(&o, NULL, big), -EINVAL);
    zbuf_delete(big);
    zbuf_delete(out);
}

Test(frame, peek_shows_contiguous_payloads_in_place_and_skip_drops_them)
{
    zbuf_frame_opts_t o = opts_of(ZBUF_FRAME_BE32, false, 4096);
    const size_t n = sizeof(sample_lens) / sizeof(sample_lens[0]);
    size_t total;
    uint8_t *flat = wire(&o, sample_lens, n, &total);
    zbuf_frame_decoder_t *d;
    cr_assert_eq(zbuf_frame_decoder_create(&o, &d), 0);
    /* Frame 5 (300 bytes) is split over two fed zbufs: not contiguous. */
    size_t cut = total - 100;
    feed(d, flat, 0, cut);
    feed(d, flat, cut, total);
    zbuf_stats_t s0, s1;
    zbuf_stats_get(&s0);
    for (size_t i = 0; i + 1 < n; i++) {
        const void *p;
        size_t len;
        cr_assert_eq(zbuf_frame_decoder_peek(d, &p, &len), 0, "frame %zu", i);
        cr_assert_eq(len, sample_lens[i]);
        for (size_t j = 0; j < len; j++)
            cr_assert_eq(((const uint8_t *)p)[j], codec_byte((uint32_t)i, j));
        cr_assert_eq(zbuf_frame_decoder_peek(d, &p, &len), 0, "peeking twice is harmless");
        cr_assert_eq(zbuf_frame_decoder_skip(d), 0);
    }
    zbuf_stats_get(&s1);
    cr_assert_eq(s1.bytes_copied, s0.bytes_copied, "peek copies nothing");
    cr_assert_eq(s1.live_zbufs, s0.live_zbufs, "peek and skip make no zbuf");
    const void *p;
    size_t len;
    cr_assert_eq(zbuf_frame_decoder_peek(d, &p, &len), -ENOBUFS);
    zbuf_t *m;
    cr_assert_eq(zbuf_frame_decoder_next(d, &m), 0, "a split payload comes as a zbuf");
    expect_message(m, 300, (uint32_t)(n - 1));
    zbuf_delete(m);
    cr_assert_eq(zbuf_frame_decoder_peek(d, &p, &len), -EAGAIN);
    cr_assert_eq(zbuf_frame_decoder_skip(d), -EAGAIN);
    cr_assert_eq(zbuf_frame_decoder_buffered(d), 0);
    zbuf_frame_decoder_delete(d);
    free(flat);
}

Test(frame, append_copy_frames_raw_bytes)
{
    zbuf_frame_opts_t o = opts_of(ZBUF_FRAME_VARINT, false, 1000);
    zbuf_t *out;
    cr_assert_eq(zbuf_create(&out), 0);
    uint8_t data[300];
    codec_fill(data, 300, 0, 0);
    cr_assert_eq(zbuf_frame_append_copy(&o, out, data, 300), 0);
    cr_assert_eq(zbuf_frame_append_copy(&o, out, NULL, 0), 0);
    cr_assert_eq(zbuf_frame_append_copy(&o, out, data, 1001), -EMSGSIZE);
    cr_assert_eq(zbuf_frame_append_copy(&o, out, NULL, 5), -EINVAL);
    cr_assert_eq(zbuf_length(out), 2 + 300 + 1);
    zbuf_frame_decoder_t *d;
    cr_assert_eq(zbuf_frame_decoder_create(&o, &d), 0);
    cr_assert_eq(zbuf_frame_decoder_feed(d, out), 0);
    const size_t lens[] = {300, 0};
    cr_assert_eq(drain(d, lens, 2, 0), 2);
    zbuf_frame_decoder_delete(d);
}

/* ------------------------------------------------------------ idle cost */

Test(frame, an_idle_decoder_holds_no_zbuf)
{
    zbuf_stats_t st0, st;
    zbuf_frame_decoder_t *d;
    zbuf_stats_get(&st0);
    cr_assert_eq(zbuf_frame_decoder_create(NULL, &d), 0);
    zbuf_stats_get(&st);
    cr_assert_eq(st.live_zbufs, st0.live_zbufs, "a new decoder holds no zbuf");
    const size_t lens[] = {10, 20};
    size_t total;
    uint8_t *flat = wire(NULL, lens, 2, &total);
    feed(d, flat, 0, 7); /* a partial frame: held */
    zbuf_stats_get(&st);
    cr_assert_eq(st.live_zbufs, st0.live_zbufs + 1);
    feed(d, flat, 7, total);
    cr_assert_eq(drain(d, lens, 2, 0), 2);
    zbuf_stats_get(&st);
    cr_assert_eq(st.live_zbufs, st0.live_zbufs, "drained: it holds nothing again");
    cr_assert_eq(st.live_segs, st0.live_segs);
    cr_assert_eq(zbuf_frame_decoder_buffered(d), 0);
    /* An empty zbuf fed is consumed and nothing kept. */
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_frame_decoder_feed(d, z), 0);
    zbuf_stats_get(&st);
    cr_assert_eq(st.live_zbufs, st0.live_zbufs);
    zbuf_frame_decoder_delete(d);
    free(flat);
}

Test(frame, a_frame_that_is_all_of_the_stream_is_handed_out_without_a_split)
{
    zbuf_frame_decoder_t *d;
    cr_assert_eq(zbuf_frame_decoder_create(NULL, &d), 0);
    zbuf_t *m = message(100, 3), *got;
    cr_assert_eq(zbuf_frame_encode(NULL, m), 0);
    zbuf_t *sent = m;
    cr_assert_eq(zbuf_frame_decoder_feed(d, m), 0);
    cr_assert_eq(zbuf_frame_decoder_next(d, &got), 0);
    cr_assert_eq(got, sent, "the zbuf fed comes back as the frame");
    expect_message(got, 100, 3);
    zbuf_delete(got);
    zbuf_frame_decoder_delete(d);
}

/* ------------------------------------------- frames that can never fit */

/* What a reader of pool p does: bytes of the wire go into pool buffers
 * taken through quota q (NULL: straight from the pool), each piece of
 * pieces[] one read, a new buffer when the current one has less than
 * `min_room` left.  The buffers end up held by the zbufs fed. */
struct reader {
    zbuf_pool_t *pool;
    zbuf_pool_quota_t *q;
    zbuf_buf_t *cur;
    size_t used, min_room;
};

static int reader_feed(struct reader *r, zbuf_frame_decoder_t *d, const uint8_t *bytes, size_t n)
{
    size_t size = zbuf_pool_buf_size(r->pool);
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    while (n > 0) {
        if (r->cur == NULL || size - r->used == 0 || size - r->used < r->min_room) {
            zbuf_buf_t *b;
            int rc = r->q ? zbuf_pool_quota_get(r->q, &b) : zbuf_pool_get(r->pool, &b);
            if (rc != 0 && r->cur != NULL && r->used < size) {
                b = NULL; /* cannot grow: use the tail */
            } else {
                /* A real reader would pause here, for good. */
                cr_assert_eq(rc, 0, "the reader is stuck and the decoder did not notice");
                zbuf_buf_unref(r->cur);
                r->cur = b;
                r->used = 0;
            }
        }
        size_t k = size - r->used < n ? size - r->used : n;
        memcpy((uint8_t *)zbuf_buf_data(r->cur) + r->used, bytes, k);
        cr_assert_eq(zbuf_append_ref(z, r->cur, r->used, k), 0);
        r->used += k;
        bytes += k;
        n -= k;
    }
    return zbuf_frame_decoder_feed(d, z);
}

static void reader_done(struct reader *r)
{
    zbuf_buf_unref(r->cur);
    r->cur = NULL;
}

static uint8_t *frame_bytes(size_t payload, size_t *total)
{
    const size_t lens[] = {payload};
    return wire(NULL, lens, 1, total);
}

Test(frame, a_frame_larger_than_the_pool_is_refused_once_its_header_shows_it)
{
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(1024, 4, &pool), 0);
    struct reader r = {.pool = pool, .min_room = 128};
    zbuf_frame_decoder_t *d;
    cr_assert_eq(zbuf_frame_decoder_create(NULL, &d), 0);
    size_t total;
    uint8_t *flat = frame_bytes(4 * 1024, &total); /* 4 KiB + header: 5 buffers */
    cr_assert_eq(reader_feed(&r, d, flat, 100), 0);
    zbuf_t *m;
    cr_assert_eq(zbuf_frame_decoder_next(d, &m), -EMSGSIZE);
    cr_assert_eq(zbuf_frame_decoder_next(d, &m), -EMSGSIZE, "sticky");
    zbuf_t *more = message(1, 1);
    cr_assert_eq(zbuf_frame_decoder_feed(d, more), -EMSGSIZE);
    zbuf_delete(more);
    zbuf_frame_decoder_delete(d);
    reader_done(&r);
    cr_assert_eq(zbuf_pool_available(pool), 4);
    free(flat);

    /* One byte less fits in the four buffers: it is awaited, then whole. */
    cr_assert_eq(zbuf_frame_decoder_create(NULL, &d), 0);
    flat = frame_bytes(4 * 1024 - 4, &total);
    cr_assert_eq(reader_feed(&r, d, flat, 100), 0);
    cr_assert_eq(zbuf_frame_decoder_next(d, &m), -EAGAIN);
    cr_assert_eq(reader_feed(&r, d, flat + 100, total - 100), 0);
    cr_assert_eq(zbuf_frame_decoder_next(d, &m), 0);
    expect_message(m, 4 * 1024 - 4, 0);
    zbuf_delete(m);
    zbuf_frame_decoder_delete(d);
    reader_done(&r);
    cr_assert_eq(zbuf_pool_available(pool), 4);
    free(flat);
    zbuf_pool_delete(pool);
}

/* min_room 0 packs perfectly; 400 abandons every tail below 400 bytes. */
static int feed_in_pieces(size_t limit, size_t min_room, size_t payload, size_t piece)
{
    zbuf_pool_t *pool;
    zbuf_pool_quota_t *q;
    cr_assert_eq(zbuf_pool_create(1024, 16, &pool), 0);
    cr_assert_eq(zbuf_pool_quota_create(pool, limit, NULL, NULL, &q), 0);
    struct reader r = {.pool = pool, .q = q, .min_room = min_room};
    zbuf_frame_decoder_t *d;
    cr_assert_eq(zbuf_frame_decoder_create(NULL, &d), 0);
    size_t total;
    uint8_t *flat = frame_bytes(payload, &total);
    int rc = -EAGAIN;
    zbuf_t *m = NULL;
    for (size_t off = 0; off < total && rc == -EAGAIN; off += piece) {
        size_t n = total - off < piece ? total - off : piece;
        cr_assert_eq(reader_feed(&r, d, flat + off, n), 0);
        rc = zbuf_frame_decoder_next(d, &m);
        cr_assert_leq(zbuf_pool_quota_held(q), limit);
    }
    if (rc == 0) {
        expect_message(m, payload, 0);
        zbuf_delete(m);
    }
    zbuf_frame_decoder_delete(d);
    reader_done(&r);
    zbuf_pool_quota_delete(q);
    cr_assert_eq(zbuf_pool_available(pool), 16);
    zbuf_pool_delete(pool);
    free(flat);
    return rc;
}

Test(frame, a_quota_limit_bounds_the_frame_and_waste_is_caught_when_the_buffers_are_full)
{
    /* 3 buffers of 1 KiB: a 3068-byte payload (3072 with its header). */
    cr_assert_eq(feed_in_pieces(3, 0, 3068, 500), 0, "fits when packed");
    cr_assert_eq(feed_in_pieces(3, 0, 3069, 500), -EMSGSIZE, "one byte too many");
    cr_assert_eq(feed_in_pieces(2, 0, 3068, 500), -EMSGSIZE, "a lower limit");
    cr_assert_eq(feed_in_pieces(4, 400, 3068, 700), 0, "one spare buffer absorbs the waste");
    cr_assert_eq(feed_in_pieces(3, 400, 3068, 700), -EMSGSIZE,
                 "the abandoned tails make it too long for three");
}

Test(frame, bytes_outside_pools_are_not_counted)
{
    zbuf_frame_decoder_t *d;
    cr_assert_eq(zbuf_frame_decoder_create(NULL, &d), 0);
    const size_t lens[] = {1 << 20};
    size_t total;
    uint8_t *flat = wire(NULL, lens, 1, &total);
    feed(d, flat, 0, 1000);
    zbuf_t *m;
    cr_assert_eq(zbuf_frame_decoder_next(d, &m), -EAGAIN, "heap memory: only max_payload");
    feed(d, flat, 1000, total);
    cr_assert_eq(zbuf_frame_decoder_next(d, &m), 0);
    zbuf_delete(m);
    zbuf_frame_decoder_delete(d);
    free(flat);
}

/* --------------------------------------------------------- header slabs */

Test(frame, framing_shared_messages_allocates_nothing_in_the_steady_state)
{
    enum { LIVE = 300, ROUNDS = 20000 };
    zbuf_buf_t *b;
    zbuf_t *live[LIVE] = {0};
    cr_assert_eq(zbuf_buf_alloc(4096, &b), 0);
    memset(zbuf_buf_data(b), 'x', 4096);
    zbuf_stats_t st0, st1;
    for (int i = 0; i < ROUNDS; i++) {
        if (i == 2 * LIVE)
            zbuf_stats_get(&st0); /* after the warm-up */
        /* A message whose only buffer is shared: no headroom. */
        zbuf_t *m;
        cr_assert_eq(zbuf_create(&m), 0);
        cr_assert_eq(zbuf_append_ref(m, b, (size_t)i % 64, 100), 0);
        cr_assert_eq(zbuf_frame_encode(NULL, m), 0);
        cr_assert_eq(zbuf_length(m), 104);
        if (i % 1000 == 0) {
            uint8_t h[4];
            cr_assert_eq(zbuf_copyout(m, 0, h, 4), 4);
            cr_assert_eq(h[0] | h[1] | h[2], 0);
            cr_assert_eq(h[3], 100);
        }
        zbuf_delete(live[i % LIVE]); /* LIVE messages alive at any time */
        live[i % LIVE] = m;
    }
    zbuf_stats_get(&st1);
    cr_assert_eq(st1.allocs, st0.allocs, "%llu allocations for %d frames",
                 (unsigned long long)(st1.allocs - st0.allocs), ROUNDS - 2 * LIVE);
    cr_assert_gt(zbuf_frame_header_bufs(), 0);
    cr_assert_leq(zbuf_frame_header_bufs(), 16);
    for (int i = 0; i < LIVE; i++)
        zbuf_delete(live[i]);
    zbuf_buf_unref(b);
    zbuf_stats_get(&st0);
    zbuf_frame_thread_flush();
    zbuf_stats_get(&st1);
    cr_assert_eq(zbuf_frame_header_bufs(), 0);
    cr_assert_lt(st1.live_bufs, st0.live_bufs, "the flush gave the slabs back");
}

Test(frame, a_slab_in_use_outlives_its_thread_and_a_flush)
{
    zbuf_buf_t *b;
    cr_assert_eq(zbuf_buf_alloc(64, &b), 0);
    zbuf_t *m;
    cr_assert_eq(zbuf_create(&m), 0);
    cr_assert_eq(zbuf_append_ref(m, b, 0, 10), 0);
    zbuf_buf_unref(b);
    zbuf_t *keep;
    cr_assert_eq(zbuf_dup(m, 0, ZBUF_TO_END, &keep), 0); /* shared: no headroom */
    cr_assert_eq(zbuf_frame_encode(NULL, m), 0);
    zbuf_frame_thread_flush(); /* the header's slab stays alive with m */
    uint8_t h[14];
    cr_assert_eq(zbuf_copyout(m, 0, h, 14), 14);
    cr_assert_eq(h[3], 10);
    zbuf_delete(m);
    zbuf_delete(keep);
}

static void *encode_on_a_thread(void *arg)
{
    zbuf_t *m = arg;
    cr_assert_eq(zbuf_frame_encode(NULL, m), 0);
    zbuf_thread_cache_flush();
    return NULL; /* its slab goes at exit; the header's segment keeps it */
}

Test(frame, a_thread_gives_its_slabs_back_when_it_exits)
{
    zbuf_t *m = message(10, 1), *keep;
    cr_assert_eq(zbuf_dup(m, 0, ZBUF_TO_END, &keep), 0);
    size_t before = zbuf_frame_header_bufs();
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, encode_on_a_thread, m), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(zbuf_frame_header_bufs(), before);
    cr_assert_eq(zbuf_length(m), 14);
    zbuf_delete(m);
    zbuf_delete(keep);
}
