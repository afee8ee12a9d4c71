/* Checksums over zbuf segments, and the keyed hash behind ISNs. */
#include <stdlib.h>
#include <string.h>

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
