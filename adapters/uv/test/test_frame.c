/*
 * The framing codec on its own: round trips for every length encoding,
 * frames split at every byte position (headers straddling segments),
 * partial frames waiting, oversized and malformed lengths rejected before
 * any payload is awaited, and no payload byte copied.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "uvt.h"

ZT_SUITE(frame);

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
        uvt_fill(p, len, seed, 0);
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
        cr_assert_eq(b, uvt_byte(seed, i), "byte %zu of a %zu-byte message", i, len);
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
    uvt_fill(payload, 256, 0, 0);
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
    /* A second header goes into the first one's headroom: no new segment. */
    cr_assert_eq(zbuf_frame_encode(NULL, m), 0);
    cr_assert_eq(zbuf_seg_count(m), 2);
    zbuf_delete(m);
    cr_assert_eq(released, 1);
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
    uvt_fill((uint8_t *)small, 1000, 0, 0);
    uvt_fill((uint8_t *)big, 5000, 1, 0);
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
            cr_assert_eq(((const uint8_t *)p)[j], uvt_byte((uint32_t)i, j));
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
    uvt_fill(data, 300, 0, 0);
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
