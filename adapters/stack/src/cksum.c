/*
 * Internet checksums over zbuf segments, and the keyed hash for initial
 * sequence numbers.
 *
 * The one's-complement sum is independent of byte order if every partial
 * sum is folded before it is combined (RFC 1071), so each memory run is
 * summed in native order 32 bits at a time, folded to 16 bits and turned
 * into a network-order value.  A run that starts at an odd position of the
 * summed range contributes its bytes in the other half of each 16-bit word;
 * swapping the folded partial sum's two bytes accounts for that.  So a zbuf
 * whose segments have odd lengths is summed in place, never flattened.
 */
#include "stack_internal.h"

static uint16_t swap16(uint16_t v)
{
    return (uint16_t)((v << 8) | (v >> 8));
}

static uint16_t fold16(uint64_t acc)
{
    while (acc >> 16)
        acc = (acc & 0xffff) + (acc >> 16);
    return (uint16_t)acc;
}

/* a + b with the end-around carry of one's-complement arithmetic. */
static uint64_t addc(uint64_t a, uint64_t b)
{
    uint64_t s = a + b;
    return s + (s < a);
}

/* Folded native-order sum of a run starting at an even position.  Two
 * independent 64-bit accumulators, each counting its carries, keep the
 * additions from waiting on one carry flag (twice the speed of a single
 * add-with-carry chain); a carry out of 64 bits is worth 1 in one's
 * complement arithmetic, so the counts are simply added back. */
static uint16_t sum_native(const uint8_t *p, size_t len)
{
    uint64_t s0 = 0, s1 = 0, c0 = 0, c1 = 0;
    while (len >= 32) {
        uint64_t w[4];
        memcpy(w, p, sizeof w);
        s0 += w[0];
        c0 += s0 < w[0];
        s1 += w[1];
        c1 += s1 < w[1];
        s0 += w[2];
        c0 += s0 < w[2];
        s1 += w[3];
        c1 += s1 < w[3];
        p += 32;
        len -= 32;
    }
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        s0 += w;
        c0 += s0 < w;
        p += 8;
        len -= 8;
    }
    uint64_t tail = 0;
    if (len >= 4) {
        uint32_t w;
        memcpy(&w, p, 4);
        tail += w;
        p += 4;
        len -= 4;
    }
    if (len >= 2) {
        uint16_t h;
        memcpy(&h, p, 2);
        tail += h;
        p += 2;
        len -= 2;
    }
    if (len) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        tail += p[0];
#else
        tail += (uint64_t)p[0] << 8;
#endif
    }
    uint64_t s = addc(addc(s0, s1), addc(c0 + c1, tail));
    s = (s & 0xffffffffu) + (s >> 32);
    s = (s & 0xffffffffu) + (s >> 32);
    return fold16(s);
}

uint64_t zbuf_ip__sum_mem(const void *p, size_t len, uint64_t sum)
{
    uint16_t v = sum_native(p, len);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    v = swap16(v);
#endif
    return sum + v;
}

uint64_t zbuf_ip__sum_zbuf(const zbuf_t *z, size_t off, size_t len, uint64_t sum)
{
    size_t in = 0;
    zbuf_seg_t *seg = zbuf_seg_find(z, off, &in);
    size_t pos = 0; /* bytes summed so far: its parity says which half we are in */
    while (seg != NULL && len > 0) {
        const uint8_t *p = zbuf_seg_data(z, seg);
        size_t n = zbuf_seg_length(z, seg) - in;
        if (n > len)
            n = len;
        if (p != NULL) { /* file segments have no memory and are never sent here */
            uint64_t part = zbuf_ip__sum_mem(p + in, n, 0);
            uint16_t f = fold16(part);
            sum += (pos & 1) ? swap16(f) : f;
        }
        pos += n;
        len -= n;
        in = 0;
        seg = zbuf_seg_next(z, seg);
    }
    return sum;
}

uint16_t zbuf_ip__fold(uint64_t sum)
{
    return (uint16_t)~fold16(sum);
}

/* ------------------------------------------------------- SipHash-2-4 */

static uint64_t rotl64(uint64_t x, unsigned b)
{
    return (x << b) | (x >> (64 - b));
}

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

#define SIPROUND()                                                                      \
    do {                                                                                \
        v0 += v1;                                                                       \
        v1 = rotl64(v1, 13);                                                            \
        v1 ^= v0;                                                                       \
        v0 = rotl64(v0, 32);                                                            \
        v2 += v3;                                                                       \
        v3 = rotl64(v3, 16);                                                            \
        v3 ^= v2;                                                                       \
        v0 += v3;                                                                       \
        v3 = rotl64(v3, 21);                                                            \
        v3 ^= v0;                                                                       \
        v2 += v1;                                                                       \
        v1 = rotl64(v1, 17);                                                            \
        v1 ^= v2;                                                                       \
        v2 = rotl64(v2, 32);                                                            \
    } while (0)

uint64_t zbuf_ip__siphash(const uint8_t key[16], const void *data, size_t len)
{
    const uint8_t *in = data;
    uint64_t k0 = le64(key), k1 = le64(key + 8);
    uint64_t v0 = k0 ^ 0x736f6d6570736575ull;
    uint64_t v1 = k1 ^ 0x646f72616e646f6dull;
    uint64_t v2 = k0 ^ 0x6c7967656e657261ull;
    uint64_t v3 = k1 ^ 0x7465646279746573ull;
    size_t whole = len & ~(size_t)7;
    for (size_t i = 0; i < whole; i += 8) {
        uint64_t m = le64(in + i);
        v3 ^= m;
        SIPROUND();
        SIPROUND();
        v0 ^= m;
    }
    uint64_t b = (uint64_t)len << 56;
    for (size_t i = 0; i < (len & 7); i++)
        b |= (uint64_t)in[whole + i] << (8 * i);
    v3 ^= b;
    SIPROUND();
    SIPROUND();
    v0 ^= b;
    v2 ^= 0xff;
    SIPROUND();
    SIPROUND();
    SIPROUND();
    SIPROUND();
    return v0 ^ v1 ^ v2 ^ v3;
}
