/* SPDX-License-Identifier: MIT */
/*
 * Internet checksums over zbuf segments, and the keyed hash for initial
 * sequence numbers.
 *
 * The one's-complement sum is independent of byte order and of the word
 * size it is accumulated in, as long as every partial sum is folded back to
 * 16 bits with end-around carries before it is combined (RFC 1071): so a
 * memory run is summed in native order, 32 or 64 bits at a time, folded to
 * 16 bits and turned into a network-order value.  A run that starts at an
 * odd position of the summed range contributes its bytes in the other half
 * of each 16-bit word; swapping the folded partial sum's two bytes accounts
 * for that.  So a zbuf whose segments have odd lengths is summed in place,
 * never flattened.
 *
 * Three implementations of the flat sum, chosen once at run time:
 *  - AVX2: 32-byte unaligned loads; each 64-bit lane of a load is split into
 *    its two 32-bit words, which are added into 64-bit lanes of four
 *    accumulators (no carry is ever lost: 2^32 additions of 32-bit words fit
 *    64 bits), two loads per accumulator and iteration;
 *  - SSE2 (every x86-64): the same 16 bytes at a time;
 *  - portable: 64-bit words added into two accumulators that count their
 *    own carries (what this file did before the vector versions).
 * Lengths under 64 bytes (IP headers, pseudo headers) always take the
 * portable code, which needs no call through the dispatch pointer.
 * ZBUF_IP_CKSUM=portable|sse2|avx2 in the environment forces one (for
 * measurements); an unsupported choice falls back to the best available.
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "cksum.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CKSUM_X86 1
#include <immintrin.h>
#endif

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

/* The bytes after the last whole 8-byte word (fewer than 8), in native
 * order, as a value to add. */
static uint64_t sum_tail(const uint8_t *p, size_t len)
{
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
    return tail;
}

/* Folded native-order sum of a run starting at an even position.  Two
 * independent 64-bit accumulators, each counting its carries, keep the
 * additions from waiting on one carry flag (twice the speed of a single
 * add-with-carry chain); a carry out of 64 bits is worth 1 in one's
 * complement arithmetic, so the counts are simply added back. */
static uint16_t sum_portable(const uint8_t *p, size_t len)
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
    uint64_t s = addc(addc(s0, s1), addc(c0 + c1, sum_tail(p, len)));
    s = (s & 0xffffffffu) + (s >> 32);
    s = (s & 0xffffffffu) + (s >> 32);
    return fold16(s);
}

#ifdef CKSUM_X86
/* Sum of the 32-bit words of 16-byte vectors, in 64-bit lanes. */
static inline __m128i add_words128(__m128i acc, __m128i v)
{
    const __m128i lo = _mm_set_epi32(0, -1, 0, -1);
    acc = _mm_add_epi64(acc, _mm_and_si128(v, lo));
    return _mm_add_epi64(acc, _mm_srli_epi64(v, 32));
}

/* The four 64-bit lane sums (each below 2^63 for any length this is called
 * with), and the rest of the run, folded. */
static uint16_t finish(uint64_t a, uint64_t b, uint64_t c, uint64_t d, const uint8_t *p,
                       size_t len)
{
    uint64_t s = addc(addc(a, b), addc(c, d));
    uint16_t rest = sum_portable(p, len);
    s = addc(s, rest);
    s = (s & 0xffffffffu) + (s >> 32);
    s = (s & 0xffffffffu) + (s >> 32);
    return fold16(s);
}

static uint16_t sum_sse2(const uint8_t *p, size_t len)
{
    __m128i a0 = _mm_setzero_si128(), a1 = a0, a2 = a0, a3 = a0;
    while (len >= 64) {
        a0 = add_words128(a0, _mm_loadu_si128((const __m128i *)p));
        a1 = add_words128(a1, _mm_loadu_si128((const __m128i *)(p + 16)));
        a2 = add_words128(a2, _mm_loadu_si128((const __m128i *)(p + 32)));
        a3 = add_words128(a3, _mm_loadu_si128((const __m128i *)(p + 48)));
        p += 64;
        len -= 64;
    }
    a0 = _mm_add_epi64(_mm_add_epi64(a0, a1), _mm_add_epi64(a2, a3));
    uint64_t l[2];
    _mm_storeu_si128((__m128i *)l, a0);
    return finish(l[0], l[1], 0, 0, p, len);
}

__attribute__((target("avx2"))) static inline __m256i add_words256(__m256i acc, __m256i v)
{
    const __m256i lo = _mm256_set_epi32(0, -1, 0, -1, 0, -1, 0, -1);
    acc = _mm256_add_epi64(acc, _mm256_and_si256(v, lo));
    return _mm256_add_epi64(acc, _mm256_srli_epi64(v, 32));
}

__attribute__((target("avx2"))) static uint16_t sum_avx2(const uint8_t *p, size_t len)
{
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    while (len >= 128) {
        a0 = add_words256(a0, _mm256_loadu_si256((const __m256i *)p));
        a1 = add_words256(a1, _mm256_loadu_si256((const __m256i *)(p + 32)));
        a2 = add_words256(a2, _mm256_loadu_si256((const __m256i *)(p + 64)));
        a3 = add_words256(a3, _mm256_loadu_si256((const __m256i *)(p + 96)));
        p += 128;
        len -= 128;
    }
    while (len >= 32) {
        a0 = add_words256(a0, _mm256_loadu_si256((const __m256i *)p));
        p += 32;
        len -= 32;
    }
    a0 = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
    /* Two lanes of at most 2^63 each: their sum does not carry out. */
    __m128i h = _mm_add_epi64(_mm256_castsi256_si128(a0), _mm256_extracti128_si256(a0, 1));
    uint64_t x = (uint64_t)_mm_cvtsi128_si64(h), y = (uint64_t)_mm_extract_epi64(h, 1);
    /* Leave the upper halves of the vector registers clean, with nothing
     * left in them, before any SSE code runs again: on some processors every
     * later SSE instruction pays for merging dirty upper halves (measured: the
     * SSE2 sum 5 times slower). */
    _mm256_zeroupper();
    return finish(x, y, 0, 0, p, len);
}
#endif

/* ------------------------------------------------------------ dispatch */

typedef uint16_t (*sum_fn)(const uint8_t *p, size_t len);

static const struct {
    const char *name;
    sum_fn fn;
} impls[] = {
    [ZBUF_IP__CKSUM_PORTABLE] = {"portable", sum_portable},
#ifdef CKSUM_X86
    [ZBUF_IP__CKSUM_SSE2] = {"sse2", sum_sse2},
    [ZBUF_IP__CKSUM_AVX2] = {"avx2", sum_avx2},
#endif
};

bool zbuf_ip__cksum_available(enum zbuf_ip__cksum_impl i)
{
    if ((size_t)i >= sizeof impls / sizeof impls[0] || impls[i].fn == NULL)
        return false;
#ifdef CKSUM_X86
    if (i == ZBUF_IP__CKSUM_AVX2) {
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2");
    }
#endif
    return true;
}

const char *zbuf_ip__cksum_name(enum zbuf_ip__cksum_impl i)
{
    return (size_t)i < sizeof impls / sizeof impls[0] && impls[i].name ? impls[i].name : "?";
}

/* The implementation in use; chosen on the first large sum. */
static _Atomic(sum_fn) chosen;
static _Atomic int chosen_id = -1;

static sum_fn choose(void)
{
    int best = ZBUF_IP__CKSUM_PORTABLE;
    for (int i = ZBUF_IP__CKSUM_N - 1; i >= 0; i--)
        if (zbuf_ip__cksum_available((enum zbuf_ip__cksum_impl)i)) {
            best = i;
            break;
        }
    const char *env = getenv("ZBUF_IP_CKSUM");
    for (int i = 0; env != NULL && i < ZBUF_IP__CKSUM_N; i++)
        if (strcmp(env, zbuf_ip__cksum_name((enum zbuf_ip__cksum_impl)i)) == 0 &&
            zbuf_ip__cksum_available((enum zbuf_ip__cksum_impl)i))
            best = i;
    atomic_store_explicit(&chosen_id, best, memory_order_relaxed);
    atomic_store_explicit(&chosen, impls[best].fn, memory_order_release);
    return impls[best].fn;
}

void zbuf_ip__cksum_force(enum zbuf_ip__cksum_impl i)
{
    if (i == ZBUF_IP__CKSUM_N) {
        choose();
        return;
    }
    if (!zbuf_ip__cksum_available(i))
        i = ZBUF_IP__CKSUM_PORTABLE;
    atomic_store_explicit(&chosen_id, (int)i, memory_order_relaxed);
    atomic_store_explicit(&chosen, impls[i].fn, memory_order_release);
}

enum zbuf_ip__cksum_impl zbuf_ip__cksum_chosen(void)
{
    if (atomic_load_explicit(&chosen, memory_order_acquire) == NULL)
        choose();
    return (enum zbuf_ip__cksum_impl)atomic_load_explicit(&chosen_id, memory_order_relaxed);
}

/* Folded native-order sum of a run starting at an even position. */
static uint16_t sum_native(const uint8_t *p, size_t len)
{
    if (len < 64)
        return sum_portable(p, len);
    sum_fn fn = atomic_load_explicit(&chosen, memory_order_acquire);
    if (__builtin_expect(fn == NULL, 0))
        fn = choose();
    return fn(p, len);
}

static uint64_t to_network(uint16_t v)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    v = swap16(v);
#endif
    return v;
}

uint64_t zbuf_ip__sum_mem(const void *p, size_t len, uint64_t sum)
{
    return sum + to_network(sum_native(p, len));
}

uint64_t zbuf_ip__sum_mem_with(enum zbuf_ip__cksum_impl i, const void *p, size_t len,
                               uint64_t sum)
{
    return sum + to_network(impls[i].fn(p, len));
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
            uint16_t f = fold16(to_network(sum_native(p + in, n)));
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
