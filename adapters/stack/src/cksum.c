/* SPDX-License-Identifier: MIT */
/*
 * Internet checksums over zbuf segments, and the keyed hash for initial
 * sequence numbers.
 *
 * The one's-complement sum is independent of byte order and of the word
 * size it is accumulated in, as long as carries out of the word are added
 * back (RFC 1071): a memory run is summed in native order, 16, 32 or 64
 * bits at a time, into a 64-bit "partial" (see below), and the partials of
 * a zbuf's ranges are added with end-around carries and folded once.  A run
 * that starts at an odd position of the summed range contributes its bytes
 * in the other half of each 16-bit word; rotating its partial by 8 bits
 * (times 2^8 modulo 2^64 - 1, a multiple of 0xffff) accounts for that, and
 * the same rotation turns the native-order total into network order on a
 * little-endian machine.  So a zbuf whose segments have odd lengths is
 * summed in place, never flattened.
 *
 * Runs under 64 bytes (headers, the short segments of a frame) are summed
 * inline by straight-line 64-bit additions, and a 20-byte IPv4 header by
 * its own routine.  Three implementations of the longer runs, chosen once
 * at run time:
 *  - AVX2: 32-byte unaligned loads; each 16-bit word, biased to a signed
 *    one, is added by vpmaddwd into 32-bit lanes (three instructions per 32
 *    bytes); the last bytes by one masked load, no call;
 *  - SSE2 (every x86-64): the same 16 bytes at a time, the last 0..15
 *    bytes by the short routine;
 *  - portable: 64-bit words added into two accumulators that count their
 *    own carries (what this file did before the vector versions).
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

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define CKSUM_LE 1
#else
#define CKSUM_LE 0
#endif

/* A "partial" below is a run's one's-complement sum before folding: a
 * 64-bit value congruent modulo 0xffff to the sum of the run's 16-bit
 * native-order words, and zero only when every byte of the run is.  Any two
 * such values give the same checksum (zbuf_ip__fold() maps a non-zero value
 * into 1..0xffff by its residue), so each routine may accumulate in its own
 * way, and a zbuf's ranges are combined without folding each one. */

/* a + b with the end-around carry of one's-complement arithmetic. */
static inline uint64_t addc(uint64_t a, uint64_t b)
{
    uint64_t s = a + b;
    return s + (s < a);
}

/* A partial times 2^8 modulo 2^64 - 1 (a multiple of 0xffff): the partial
 * of the same bytes one position over, i.e. with the two bytes of every
 * 16-bit word swapped. */
static inline uint64_t rot8(uint64_t s)
{
    return (s << 8) | (s >> 56);
}

static inline uint64_t load64(const uint8_t *p)
{
    uint64_t w;
    memcpy(&w, p, sizeof w);
    return w;
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
    if (len)
        tail += CKSUM_LE ? p[0] : (uint64_t)p[0] << 8;
    return tail;
}

/* Partial of a run of fewer than 64 bytes (the headers, the pseudo header,
 * the short segments of a frame) without a loop: a jump into a straight
 * line of 64-bit additions for the whole words, then the last 1..7 bytes
 * through one 8-byte load that ends at the run's end, shifted so that only
 * they remain (they keep their position within a 16-bit word: the load
 * starts a whole number of words into the run). */
static inline uint64_t sum_short(const uint8_t *p, size_t len)
{
    uint64_t s = 0, c = 0; /* c counts the carries out of s, each worth 1 */
#define SHORT_ADD(w) (s += (w), c += s < (w))
    switch (len >> 3) {
    case 7: SHORT_ADD(load64(p + 48)); /* fall through */
    case 6: SHORT_ADD(load64(p + 40)); /* fall through */
    case 5: SHORT_ADD(load64(p + 32)); /* fall through */
    case 4: SHORT_ADD(load64(p + 24)); /* fall through */
    case 3: SHORT_ADD(load64(p + 16)); /* fall through */
    case 2: SHORT_ADD(load64(p + 8)); /* fall through */
    case 1: SHORT_ADD(load64(p)); /* fall through */
    default: break;
    }
    size_t r = len & 7;
    if (r != 0) {
        uint64_t t;
        if (len >= 8) {
            t = load64(p + len - 8);
            t = CKSUM_LE ? t >> (64 - 8 * r) : t << (64 - 8 * r);
        } else {
            t = sum_tail(p, r);
        }
        SHORT_ADD(t);
    }
#undef SHORT_ADD
    return addc(s, c);
}

/* Partial of a run, two independent 64-bit accumulators, each counting its
 * carries, keep the additions from waiting on one carry flag (twice the
 * speed of a single add-with-carry chain); a carry out of 64 bits is worth
 * 1 in one's complement arithmetic, so the counts are simply added back.
 * (The code before the vector versions, kept as the portable fallback.) */
static uint64_t sum_portable(const uint8_t *p, size_t len)
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
    return addc(addc(s0, s1), addc(c0 + c1, sum_tail(p, len)));
}

#ifdef CKSUM_X86
/* The partial of a run of any length, from a routine that sums at most
 * 2^17 bytes at a time (the vector ones, whose 32-bit lanes hold any sum of
 * that many biased words, see below). */
static inline uint64_t sum_in_runs(uint64_t (*run)(const uint8_t *, size_t), const uint8_t *p,
                                   size_t len)
{
    const size_t part = (size_t)1 << 16;
    uint64_t s = 0;
    for (; len > 2 * part; p += part, len -= part)
        s = addc(s, run(p, part));
    return addc(s, run(p, len));
}

/* The vector loops turn each 16-bit word w into a signed one, w - 2^15 (an
 * exclusive or of its top bit), and (v)pmaddwd adds neighbouring pairs into
 * 32-bit lanes.  Every vector of 2n bytes adds n words, so the run's sum is
 * the lanes' total plus 2^15 * n per vector.  Any total of such words from
 * a run of at most 2^17 bytes fits a signed 32-bit lane. */
#define SSE2_WORDS(p)                                                                     \
    _mm_madd_epi16(_mm_xor_si128(_mm_loadu_si128((const __m128i *)(const void *)(p)), bias), one)

/* Partial of a run of at most 2^17 bytes, 16 bytes at a time (four
 * instructions each, with the load), the last 0..15 bytes by the short
 * routine. */
static uint64_t sum_sse2_run(const uint8_t *p, size_t len)
{
    const __m128i bias = _mm_set1_epi16(-0x8000), one = _mm_set1_epi16(1);
    __m128i acc = _mm_setzero_si128();
    uint64_t vectors = len / 16;
    while (len >= 64) {
        __m128i t = _mm_add_epi32(SSE2_WORDS(p), SSE2_WORDS(p + 16));
        __m128i u = _mm_add_epi32(SSE2_WORDS(p + 32), SSE2_WORDS(p + 48));
        acc = _mm_add_epi32(acc, _mm_add_epi32(t, u));
        p += 64;
        len -= 64;
    }
    while (len >= 16) {
        acc = _mm_add_epi32(acc, SSE2_WORDS(p));
        p += 16;
        len -= 16;
    }
    acc = _mm_add_epi32(acc, _mm_shuffle_epi32(acc, 0x4e));
    acc = _mm_add_epi32(acc, _mm_shuffle_epi32(acc, 0xb1));
    int32_t total = _mm_cvtsi128_si32(acc);
    return addc((uint64_t)((int64_t)total + (int64_t)(vectors << 18)), sum_short(p, len));
}

static uint64_t sum_sse2(const uint8_t *p, size_t len)
{
    return sum_in_runs(sum_sse2_run, p, len);
}

/* Byte i of keep_last + r is 0xff for i >= 32 - r: a load from there keeps
 * the last r bytes of a 32-byte vector. */
static const uint8_t keep_last[64] = {[32 ... 63] = 0xff};

#define AVX2_WORDS(v) _mm256_madd_epi16(_mm256_xor_si256((v), bias), one)
#define AVX2_LOAD(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))

/* Sum of the 16-bit words of a run of 32 bytes to 2^17 (a partial).  The
 * four vectors of a 128-byte step are added in a tree, then to the one
 * accumulator (one dependent addition per step, and no register copies,
 * which gcc makes for four accumulators).  The last len % 32 bytes: an odd
 * last byte added alone, the rest by one load that ends at the run's end,
 * masked to those bytes (the run is at least 32 bytes long, so the load
 * stays inside it, and it starts an even number of bytes in; the masked
 * words count as zeros). */
__attribute__((target("avx2"))) static uint64_t sum_avx2_run(const uint8_t *p, size_t len)
{
    const __m256i bias = _mm256_set1_epi16(-0x8000), one = _mm256_set1_epi16(1);
    __m256i acc = _mm256_setzero_si256();
    uint64_t vectors = (len + 30) / 32; /* loads below (an odd last byte is not loaded) */
    while (len >= 128) {
        __m256i t = _mm256_add_epi32(AVX2_WORDS(AVX2_LOAD(p)), AVX2_WORDS(AVX2_LOAD(p + 32)));
        __m256i u = _mm256_add_epi32(AVX2_WORDS(AVX2_LOAD(p + 64)), AVX2_WORDS(AVX2_LOAD(p + 96)));
        acc = _mm256_add_epi32(acc, _mm256_add_epi32(t, u));
        p += 128;
        len -= 128;
    }
    while (len >= 32) {
        acc = _mm256_add_epi32(acc, AVX2_WORDS(AVX2_LOAD(p)));
        p += 32;
        len -= 32;
    }
    uint64_t odd = 0;
    if (len & 1) {
        len--;
        odd = CKSUM_LE ? p[len] : (uint64_t)p[len] << 8;
    }
    if (len != 0) {
        __m256i v = _mm256_and_si256(AVX2_LOAD(p + len - 32), AVX2_LOAD(keep_last + len));
        acc = _mm256_add_epi32(acc, AVX2_WORDS(v));
    }
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    int32_t total = _mm_cvtsi128_si32(s);
    /* Leave the upper halves of the vector registers clean before any SSE
     * code runs again: on some processors every later SSE instruction pays
     * for merging dirty upper halves (measured: the SSE2 sum 5 times
     * slower). */
    _mm256_zeroupper();
    return (uint64_t)((int64_t)total + (int64_t)(vectors << 19)) + odd;
}

__attribute__((target("avx2"))) static uint64_t sum_avx2(const uint8_t *p, size_t len)
{
    if (len < 32)
        return sum_short(p, len);
    return sum_in_runs(sum_avx2_run, p, len);
}
#endif

/* ------------------------------------------------------------ dispatch */

typedef uint64_t (*sum_fn)(const uint8_t *p, size_t len);

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

/* Partial of a run: short ones inline, the others by the chosen routine. */
static inline uint64_t sum_native(const uint8_t *p, size_t len)
{
    if (len < 64)
        return sum_short(p, len);
    sum_fn fn = atomic_load_explicit(&chosen, memory_order_acquire);
    if (__builtin_expect(fn == NULL, 0))
        fn = choose();
    return fn(p, len);
}

/* A native-order partial as a partial of the network-order words, below
 * 2^33: safe to add to a caller's sum. */
static inline uint64_t to_network(uint64_t s)
{
    if (CKSUM_LE)
        s = rot8(s);
    return (s & 0xffffffffu) + (s >> 32);
}

/* zbuf_ip__sum_mem() of 64 bytes or more: out of line, so that the short
 * runs need no stack frame. */
__attribute__((noinline)) static uint64_t sum_mem_long(const void *p, size_t len, uint64_t sum)
{
    return sum + to_network(sum_native(p, len));
}

uint64_t zbuf_ip__sum_mem(const void *p, size_t len, uint64_t sum)
{
    if (len < 64)
        return sum + to_network(sum_short(p, len));
    return sum_mem_long(p, len, sum);
}

uint64_t zbuf_ip__sum_ip20(const void *hdr, uint64_t sum)
{
    const uint8_t *p = hdr;
    uint32_t w;
    memcpy(&w, p + 16, sizeof w);
    return sum + to_network(addc(addc(load64(p), load64(p + 8)), w));
}

uint64_t zbuf_ip__sum_mem_with(enum zbuf_ip__cksum_impl i, const void *p, size_t len,
                               uint64_t sum)
{
    return sum + to_network(impls[i].fn(p, len));
}

uint64_t zbuf_ip__sum_short(const void *p, size_t len, uint64_t sum)
{
    return sum + to_network(sum_short(p, len));
}

/* The segments are walked with the public accessors (zbuf_iovec() into a
 * small array was measured no cheaper, and zbuf_seg_first() is cheaper
 * than zbuf_seg_find() for the usual whole-zbuf sum).  Each range's
 * partial is rotated by a byte when it starts at an odd position of the
 * summed range, and the whole is folded once, by the caller. */
uint64_t zbuf_ip__sum_zbuf(const zbuf_t *z, size_t off, size_t len, uint64_t sum)
{
    if (len == 0)
        return sum;
    size_t in = 0;
    zbuf_seg_t *seg = off == 0 ? zbuf_seg_first(z) : zbuf_seg_find(z, off, &in);
    size_t pos = 0; /* bytes summed so far: its parity says which half we are in */
    uint64_t acc = 0;
    while (seg != NULL && len > 0) {
        const uint8_t *p = zbuf_seg_data(z, seg);
        size_t n = zbuf_seg_length(z, seg) - in;
        if (n > len)
            n = len;
        if (p != NULL) { /* file segments have no memory and are never sent here */
            uint64_t s = sum_native(p + in, n);
            acc = addc(acc, (pos & 1) ? rot8(s) : s);
        }
        pos += n;
        len -= n;
        in = 0;
        seg = zbuf_seg_next(z, seg);
    }
    return sum + to_network(acc);
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
