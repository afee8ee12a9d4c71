/* SPDX-License-Identifier: MIT */
/* Checksums over zbuf segments, and the keyed hash behind ISNs. */
#include <stdlib.h>
#include <string.h>

#include "cksum.h"
#include "harness.h"
#include "stack_internal.h"
#include "support.h"

ZT_SUITE(cksum);

Test(cksum, rfc1071_example_matches)
{
    /* RFC 1071 section 3 example bytes: sum 0xddf2, checksum 0x220d. */
    const uint8_t b[] = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};
    cr_assert_eq(zbuf_ip__fold(zbuf_ip__sum_mem(b, sizeof b, 0)), 0x220d);
    cr_assert_eq(zh_csum(b, sizeof b), 0x220d);
}

Test(cksum, odd_segment_boundaries_give_the_flat_result)
{
    uint8_t data[1031];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i * 37 + 11);
    uint16_t flat = zh_csum(data, sizeof data);
    /* Every split into segments of lengths 1..17 (many odd), summed in place. */
    for (size_t chunk = 1; chunk <= 17; chunk++) {
        zbuf_t *z;
        cr_assert_eq(zbuf_create(&z), 0);
        for (size_t off = 0; off < sizeof data; off += chunk) {
            size_t n = sizeof data - off < chunk ? sizeof data - off : chunk;
            cr_assert_eq(zbuf_append_copy(z, data + off, n), 0);
        }
        zbuf_stats_t before, after;
        zbuf_stats_get(&before);
        uint16_t got = zbuf_ip__fold(zbuf_ip__sum_zbuf(z, 0, sizeof data, 0));
        zbuf_stats_get(&after);
        cr_assert_eq(got, flat, "chunk %zu: %#x != %#x", chunk, got, flat);
        cr_assert_eq(after.bytes_copied, before.bytes_copied, "checksum copied bytes");
        /* A sub-range starting at an odd offset too. */
        cr_assert_eq(zbuf_ip__fold(zbuf_ip__sum_zbuf(z, 3, 500, 0)), zh_csum(data + 3, 500));
        zbuf_delete(z);
    }
}

Test(cksum, pseudo_header_sum_matches_reference)
{
    uint8_t seg[33];
    for (size_t i = 0; i < sizeof seg; i++)
        seg[i] = (uint8_t)(0xf0 + i);
    seg[16] = seg[17] = 0;
    uint32_t src = ZBUF_IP_ADDR(192, 0, 2, 1), dst = ZBUF_IP_ADDR(192, 0, 2, 200);
    uint16_t ref = zh_l4_csum(src, dst, 6, seg, sizeof seg);
    uint16_t got = zbuf_ip__fold(zbuf_ip__sum_mem(seg, sizeof seg, zbuf_ip__pseudo(src, dst, 6, sizeof seg)));
    cr_assert_eq(got, ref);
}

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* n random bytes (from `seed`) into rnd, n bytes 0xff into ones. */
static void fill_rnd_ones(uint8_t *rnd, uint8_t *ones, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++)
        rnd[i] = (uint8_t)rng_next(&seed);
    memset(ones, 0xff, n);
}

#define MAXLEN 4096
#define ALIGNS 64

/* Every length 0..4096 at every alignment 0..63, for every implementation
 * this machine runs, against a plain 16-bit loop (kept incrementally, so
 * the reference costs nothing).  Random bytes, then all 0xff (every
 * addition carries), each with and without a partial sum carried in. */
static void all_lengths_and_alignments(enum zbuf_ip__cksum_impl impl, const uint8_t *buf)
{
    for (size_t a = 0; a < ALIGNS; a++) {
        const uint8_t *p = buf + a;
        uint64_t ref = 0; /* plain sum of the 16-bit big-endian words of p[0..len) */
        for (size_t len = 0; len <= MAXLEN; len++) {
            if (len > 0)
                ref += (len & 1) ? (uint64_t)p[len - 1] << 8 : p[len - 1];
            uint64_t r = ref;
            while (r >> 16)
                r = (r & 0xffff) + (r >> 16);
            uint16_t want = (uint16_t)~r;
            uint16_t got = zbuf_ip__fold(zbuf_ip__sum_mem_with(impl, p, len, 0));
            cr_assert_eq(got, want, "%s: length %zu at alignment %zu: %#x, want %#x",
                         zbuf_ip__cksum_name(impl), len, a, got, want);
            /* A partial sum carried in (a pseudo header) folds in the same. */
            uint64_t in = 0x1fffeull + len;
            r = ref + in;
            while (r >> 16)
                r = (r & 0xffff) + (r >> 16);
            got = zbuf_ip__fold(zbuf_ip__sum_mem_with(impl, p, len, in));
            cr_assert_eq(got, (uint16_t)~r, "%s: length %zu, alignment %zu, with a sum carried in",
                         zbuf_ip__cksum_name(impl), len, a);
        }
    }
}

Test(cksum, every_length_and_alignment_matches_a_plain_sum)
{
    static uint8_t rnd[MAXLEN + ALIGNS], ones[MAXLEN + ALIGNS];
    fill_rnd_ones(rnd, ones, sizeof rnd, 1);
    int tested = 0;
    for (int i = 0; i < ZBUF_IP__CKSUM_N; i++) {
        if (!zbuf_ip__cksum_available((enum zbuf_ip__cksum_impl)i))
            continue;
        all_lengths_and_alignments((enum zbuf_ip__cksum_impl)i, rnd);
        all_lengths_and_alignments((enum zbuf_ip__cksum_impl)i, ones);
        tested++;
    }
    cr_assert_geq(tested, 1);
#if defined(__x86_64__)
    cr_assert(zbuf_ip__cksum_available(ZBUF_IP__CKSUM_SSE2), "SSE2 is part of x86-64");
#endif
    cr_log_info("checksum implementations tested: %d, in use: %s", tested,
                zbuf_ip__cksum_name(zbuf_ip__cksum_chosen()));
}

/* zbufs of random segment layouts (odd lengths, one-byte segments, any
 * alignment of each segment's memory), summed in place over random
 * sub-ranges, give the flat result, with each implementation in use. */
Test(cksum, random_segment_layouts_sum_like_the_flat_bytes)
{
    enum { TOTAL = 9000 };
    static uint8_t flat[TOTAL];
    uint8_t *mem = malloc(TOTAL + 64 * 200);
    cr_assert_not_null(mem);
    uint64_t seed = 42;
    for (int i = 0; i < ZBUF_IP__CKSUM_N; i++) {
        if (!zbuf_ip__cksum_available((enum zbuf_ip__cksum_impl)i))
            continue;
        zbuf_ip__cksum_force((enum zbuf_ip__cksum_impl)i);
        for (int layout = 0; layout < 150; layout++) {
            size_t total = 1 + rng_next(&seed) % TOTAL;
            for (size_t k = 0; k < total; k++)
                flat[k] = (uint8_t)rng_next(&seed);
            zbuf_t *z;
            cr_assert_eq(zbuf_create(&z), 0);
            size_t off = 0, at = 0;
            while (off < total) {
                size_t n;
                switch (rng_next(&seed) % 4) {
                case 0: n = 1; break;
                case 1: n = 1 + rng_next(&seed) % 17; break;
                case 2: n = 1 + rng_next(&seed) % 300; break;
                default: n = 1 + rng_next(&seed) % 1500; break;
                }
                if (n > total - off)
                    n = total - off;
                at += rng_next(&seed) % 64; /* any alignment of the segment's bytes */
                if (at + n > TOTAL + 64 * 200)
                    at = rng_next(&seed) % 64;
                memcpy(mem + at, flat + off, n);
                cr_assert_eq(zbuf_append_buf(z, mem + at, n, NULL, NULL), 0);
                at += n;
                off += n;
            }
            for (int r = 0; r < 8; r++) {
                size_t o = rng_next(&seed) % (total + 1), n = rng_next(&seed) % (total - o + 1);
                uint16_t got = zbuf_ip__fold(zbuf_ip__sum_zbuf(z, o, n, 0));
                cr_assert_eq(got, zh_csum(flat + o, n),
                             "%s: layout %d (%zu segments), bytes %zu..%zu",
                             zbuf_ip__cksum_name((enum zbuf_ip__cksum_impl)i), layout,
                             zbuf_seg_count(z), o, o + n);
            }
            zbuf_delete(z);
        }
    }
    zbuf_ip__cksum_force(ZBUF_IP__CKSUM_N);
    free(mem);
}

enum { SHORT_MAX = 128 };

/* One data set of short_runs_...: every length 0..128 at every alignment,
 * through the inline routine for runs under 64 bytes, zbuf_ip__sum_mem()
 * (that routine below 64 bytes, the implementation in use above) and, at 20
 * bytes, the IPv4 header routine; each with and without a sum carried in. */
static void short_runs_flat(const uint8_t *buf)
{
    for (size_t a = 0; a < ALIGNS; a++) {
        const uint8_t *p = buf + a;
        for (size_t len = 0; len <= SHORT_MAX; len++) {
            uint16_t want = zh_csum(p, len);
            uint64_t in = 0x2fffdull + len; /* a pseudo header's size */
            uint64_t r = (uint64_t)(uint16_t)~want + in;
            while (r >> 16)
                r = (r & 0xffff) + (r >> 16);
            uint16_t want_in = (uint16_t)~r;
            if (len < 64) {
                cr_assert_eq(zbuf_ip__fold(zbuf_ip__sum_short(p, len, 0)), want,
                             "short routine: length %zu at alignment %zu", len, a);
                cr_assert_eq(zbuf_ip__fold(zbuf_ip__sum_short(p, len, in)), want_in,
                             "short routine: length %zu at alignment %zu, sum carried in", len, a);
            }
            cr_assert_eq(zbuf_ip__fold(zbuf_ip__sum_mem(p, len, 0)), want,
                         "sum_mem: length %zu at alignment %zu", len, a);
            cr_assert_eq(zbuf_ip__fold(zbuf_ip__sum_mem(p, len, in)), want_in,
                         "sum_mem: length %zu at alignment %zu, sum carried in", len, a);
            if (len == 20) {
                cr_assert_eq(zbuf_ip__fold(zbuf_ip__sum_ip20(p, 0)), want, "ip20 at alignment %zu",
                             a);
                cr_assert_eq(zbuf_ip__fold(zbuf_ip__sum_ip20(p, in)), want_in,
                             "ip20 at alignment %zu, sum carried in", a);
            }
        }
    }
}

/* Every length 0..128 split into two segments at every point, each
 * segment's bytes at an odd address, summed whole, from byte 1 (an odd
 * start), and from the split point on, alone and continuing the first
 * segment's sum (how the stack sums a payload behind the header it
 * wrote). */
static void short_runs_split(const uint8_t *p)
{
    static uint8_t m1[SHORT_MAX + 2], m2[SHORT_MAX + 2];
    for (size_t len = 0; len <= SHORT_MAX; len++)
        for (size_t cut = 0; cut <= len; cut++) {
            zbuf_t *z;
            cr_assert_eq(zbuf_create(&z), 0);
            memcpy(m1 + 1, p, cut);
            memcpy(m2 + 1, p + cut, len - cut);
            if (cut > 0)
                cr_assert_eq(zbuf_append_buf(z, m1 + 1, cut, NULL, NULL), 0);
            if (len > cut)
                cr_assert_eq(zbuf_append_buf(z, m2 + 1, len - cut, NULL, NULL), 0);
            cr_assert_eq(zbuf_ip__fold(zbuf_ip__sum_zbuf(z, 0, len, 0)), zh_csum(p, len),
                         "%s: length %zu split at %zu",
                         zbuf_ip__cksum_name(zbuf_ip__cksum_chosen()), len, cut);
            if (len > 0)
                cr_assert_eq(zbuf_ip__fold(zbuf_ip__sum_zbuf(z, 1, len - 1, 0)),
                             zh_csum(p + 1, len - 1), "length %zu split at %zu, from byte 1",
                             len, cut);
            cr_assert_eq(zbuf_ip__fold(zbuf_ip__sum_zbuf(z, cut, len - cut, 0)),
                         zh_csum(p + cut, len - cut), "length %zu, from the split at %zu",
                         len, cut);
            /* The header's sum carried into the rest's (an even split, as
             * the stack sums a segment it sends; an empty rest too). */
            if ((cut & 1) == 0)
                cr_assert_eq(zbuf_ip__fold(zbuf_ip__sum_zbuf(z, cut, len - cut,
                                                             zbuf_ip__sum_mem(p, cut, 0))),
                             zh_csum(p, len), "length %zu, the first %zu carried in", len, cut);
            zbuf_delete(z);
        }
}

/* Runs of 0..128 bytes: the inline short routine (headers, the short
 * segments of a frame), at every alignment, and split in two segments at
 * every point, with random bytes and with all 0xff (every addition
 * carries), under every implementation this machine runs. */
Test(cksum, short_runs_at_every_length_alignment_and_split)
{
    static uint8_t rnd[SHORT_MAX + ALIGNS], ones[SHORT_MAX + ALIGNS];
    fill_rnd_ones(rnd, ones, sizeof rnd, 7);
    short_runs_flat(rnd);
    short_runs_flat(ones);
    for (int i = 0; i < ZBUF_IP__CKSUM_N; i++) {
        if (!zbuf_ip__cksum_available((enum zbuf_ip__cksum_impl)i))
            continue;
        zbuf_ip__cksum_force((enum zbuf_ip__cksum_impl)i);
        short_runs_split(rnd);
        short_runs_split(ones);
    }
    zbuf_ip__cksum_force(ZBUF_IP__CKSUM_N);
}

/* The ends of vector runs: every length mod 32 after 1 to 5 and 45 whole
 * 32-byte vectors (the AVX2 code's masked last load and odd last byte), at
 * alignments 0, 1 and 31; and every length within 32 bytes of the largest
 * run the vector code sums in 32-bit lanes (2^17 bytes) and of the lengths
 * it splits into such runs (3 * 2^16, 2^18).  Bytes all 0x00 (each word
 * at the bottom of the signed range the lanes add, and a sum that must stay
 * zero), all 0xff (at the top) and random; every implementation. */
Test(cksum, vector_run_ends_and_the_largest_runs)
{
    enum { BIG = (1 << 18) + 64 };
    uint8_t *bufs[3];
    uint64_t seed = 99;
    for (int b = 0; b < 3; b++) {
        bufs[b] = malloc(BIG + 32);
        cr_assert_not_null(bufs[b]);
        for (size_t i = 0; i < BIG + 32; i++)
            bufs[b][i] = b == 0 ? 0 : b == 1 ? 0xff : (uint8_t)rng_next(&seed);
    }
    static const size_t vectors[] = {1, 2, 3, 4, 5, 45}, aligns[] = {0, 1, 31};
    static const size_t big[] = {1 << 17, 3 << 16, 1 << 18};
    for (int i = 0; i < ZBUF_IP__CKSUM_N; i++) {
        enum zbuf_ip__cksum_impl impl = (enum zbuf_ip__cksum_impl)i;
        if (!zbuf_ip__cksum_available(impl))
            continue;
        for (int b = 0; b < 3; b++) {
            for (size_t v = 0; v < sizeof vectors / sizeof vectors[0]; v++)
                for (size_t a = 0; a < sizeof aligns / sizeof aligns[0]; a++)
                    for (size_t r = 0; r < 32; r++) {
                        const uint8_t *p = bufs[b] + aligns[a];
                        size_t len = 32 * vectors[v] + r;
                        cr_assert_eq(zbuf_ip__fold(zbuf_ip__sum_mem_with(impl, p, len, 0)),
                                     zh_csum(p, len), "%s: %zu bytes at alignment %zu, data %d",
                                     zbuf_ip__cksum_name(impl), len, aligns[a], b);
                    }
            for (size_t k = 0; k < sizeof big / sizeof big[0]; k++) {
                const uint8_t *p = bufs[b] + 1;
                uint64_t ref = 0; /* plain sum of p[0..len), kept incrementally */
                for (size_t j = 0; j < big[k] - 32; j++)
                    ref += (j & 1) ? p[j] : (uint64_t)p[j] << 8;
                for (size_t len = big[k] - 32; len <= big[k] + 32; len++) {
                    uint64_t f = ref;
                    while (f >> 16)
                        f = (f & 0xffff) + (f >> 16);
                    cr_assert_eq(zbuf_ip__fold(zbuf_ip__sum_mem_with(impl, p, len, 0)),
                                 (uint16_t)~f, "%s: %zu bytes, data %d",
                                 zbuf_ip__cksum_name(impl), len, b);
                    ref += (len & 1) ? p[len] : (uint64_t)p[len] << 8;
                }
            }
        }
    }
    for (int b = 0; b < 3; b++)
        free(bufs[b]);
}

Test(cksum, siphash_reference_vectors)
{
    /* Reference vectors of the SipHash paper (key 00..0f, message 00..n-1). */
    uint8_t key[16], msg[64];
    for (int i = 0; i < 16; i++)
        key[i] = (uint8_t)i;
    for (int i = 0; i < 64; i++)
        msg[i] = (uint8_t)i;
    cr_assert_eq(zbuf_ip__siphash(key, msg, 0), 0x726fdb47dd0e0e31ull);
    cr_assert_eq(zbuf_ip__siphash(key, msg, 15), 0xa129ca6149be45e5ull);
    cr_assert_neq(zbuf_ip__siphash(key, msg, 16), zbuf_ip__siphash(key, msg, 15));
}
