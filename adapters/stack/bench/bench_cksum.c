/* SPDX-License-Identifier: MIT */
/*
 * bench_cksum: the Internet checksum of the stack (adapters/stack/src/cksum.c)
 * in GB/s, each implementation side by side with the previous one (the
 * portable code, which was the whole checksum before the vector versions),
 * a plain 16-bit loop, and memcpy() of the same bytes as the yardstick of
 * "touching every byte once".
 *
 *   bench_cksum [--reps N] [--target-ms MS]
 *
 * Rows: lengths from an IP header (20 bytes) to 1 MiB, at an aligned and at
 * an odd address (20, 32 and 60 bytes are the short runs the stack sums
 * inline: in the "in use" column); then a 64 KiB datagram held as 45
 * segments of 1460 bytes (summed in place by zbuf_ip__sum_zbuf, which folds
 * across the segment boundaries) against the same bytes flat, and a TCP
 * segment as the stack sends one (a 32-byte header segment, a 1448-byte
 * payload segment).  Every figure is the median over
 * --reps repetitions of a batch lasting about --target-ms of this thread's
 * CPU time; ratios are per repetition, then the median.  Every result is
 * checked against the plain loop before timing and consumed after.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cksum.h"

#define MAX_REPS 99

static int reps = 7;
static double target_ns = 30e6;
static volatile uint64_t sink;

static uint64_t cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static double median(double *v, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The simplest correct checksum: 16-bit big-endian words. */
static uint16_t plain16(const uint8_t *p, size_t len)
{
    uint64_t s = 0;
    for (size_t i = 0; i + 1 < len; i += 2)
        s += (uint64_t)(p[i] << 8 | p[i + 1]);
    if (len & 1)
        s += (uint64_t)p[len - 1] << 8;
    while (s >> 16)
        s = (s & 0xffff) + (s >> 16);
    return (uint16_t)~s;
}

/* What one column measures. */
enum col { C_PLAIN, C_PORTABLE, C_SSE2, C_AVX2, C_STACK, C_MEMCPY, N_COL };
static const char *const col_name[N_COL] = {"plain 16-bit loop", "portable (before)", "sse2",
                                            "avx2", "in use", "memcpy"};

struct job {
    const uint8_t *src;
    uint8_t *dst;
    size_t len;
    const zbuf_t *z; /* C_STACK over a zbuf instead of src */
};

__attribute__((noinline)) static uint64_t run(enum col c, const struct job *j, size_t n)
{
    uint64_t acc = 0;
    for (size_t i = 0; i < n; i++) {
        switch (c) {
        case C_PLAIN:
            acc += plain16(j->src, j->len);
            break;
        case C_PORTABLE:
            acc += zbuf_ip__fold(zbuf_ip__sum_mem_with(ZBUF_IP__CKSUM_PORTABLE, j->src, j->len, 0));
            break;
        case C_SSE2:
            acc += zbuf_ip__fold(zbuf_ip__sum_mem_with(ZBUF_IP__CKSUM_SSE2, j->src, j->len, 0));
            break;
        case C_AVX2:
            acc += zbuf_ip__fold(zbuf_ip__sum_mem_with(ZBUF_IP__CKSUM_AVX2, j->src, j->len, 0));
            break;
        case C_STACK:
            acc += j->z ? zbuf_ip__fold(zbuf_ip__sum_zbuf(j->z, 0, j->len, 0))
                        : zbuf_ip__fold(zbuf_ip__sum_mem(j->src, j->len, 0));
            break;
        default:
            memcpy(j->dst, j->src, j->len);
            __asm__ volatile("" : : "r"(j->dst) : "memory");
            acc += j->dst[0];
            break;
        }
    }
    return acc;
}

static bool col_available(enum col c)
{
    if (c == C_SSE2)
        return zbuf_ip__cksum_available(ZBUF_IP__CKSUM_SSE2);
    if (c == C_AVX2)
        return zbuf_ip__cksum_available(ZBUF_IP__CKSUM_AVX2);
    return true;
}

/* GB/s per column (0: not measured), and each one's ratio to "portable"; a
 * job over a zbuf measures the stack's own sum only. */
static void measure(const struct job *j, double gbps[N_COL], double ratio[N_COL])
{
    double ns[N_COL][MAX_REPS];
    size_t batch[N_COL] = {0};
    for (int c = 0; c < N_COL; c++) {
        gbps[c] = ratio[c] = 0;
        if (!col_available((enum col)c) || (j->z != NULL && c != C_STACK))
            continue;
        size_t n = 16;
        for (;;) {
            uint64_t t0 = cpu_now();
            sink += run((enum col)c, j, n);
            uint64_t dt = cpu_now() - t0;
            if ((double)dt >= target_ns / 4 || n >= ((size_t)1 << 30)) {
                batch[c] = (size_t)((double)n * target_ns / (double)(dt ? dt : 1)) + 1;
                break;
            }
            n *= 2;
        }
    }
    for (int r = 0; r < reps; r++)
        for (int k = 0; k < N_COL; k++) {
            int c = (r + k) % N_COL;
            if (batch[c] == 0)
                continue;
            uint64_t t0 = cpu_now();
            sink += run((enum col)c, j, batch[c]);
            ns[c][r] = (double)(cpu_now() - t0) / (double)batch[c];
        }
    for (int c = 0; c < N_COL; c++) {
        if (batch[c] == 0)
            continue;
        double q[MAX_REPS];
        if (batch[C_PORTABLE] != 0) {
            for (int r = 0; r < reps; r++)
                q[r] = ns[C_PORTABLE][r] / ns[c][r];
            ratio[c] = median(q, reps);
        }
        gbps[c] = (double)j->len / median(ns[c], reps);
    }
}

static void print_row(const char *what, const double gbps[N_COL], const double ratio[N_COL])
{
    printf("| %s |", what);
    for (int c = 0; c < N_COL; c++) {
        if (gbps[c] == 0)
            printf(" n/a |");
        else if (c == C_PORTABLE || c == C_MEMCPY)
            printf(" %.2f |", gbps[c]);
        else
            printf(" %.2f (%.2fx) |", gbps[c], ratio[c]);
    }
    printf("\n");
}

static void check(const uint8_t *p, size_t len)
{
    uint16_t want = plain16(p, len);
    for (int i = 0; i < ZBUF_IP__CKSUM_N; i++) {
        if (!zbuf_ip__cksum_available((enum zbuf_ip__cksum_impl)i))
            continue;
        uint16_t got = zbuf_ip__fold(zbuf_ip__sum_mem_with((enum zbuf_ip__cksum_impl)i, p, len, 0));
        if (got != want) {
            fprintf(stderr, "bench_cksum: %s gives %#x for %zu bytes, want %#x\n",
                    zbuf_ip__cksum_name((enum zbuf_ip__cksum_impl)i), got, len, want);
            exit(1);
        }
    }
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--target-ms") == 0 && i + 1 < argc)
            target_ns = atof(argv[++i]) * 1e6;
        else {
            fprintf(stderr, "usage: bench_cksum [--reps N] [--target-ms MS]\n");
            return 2;
        }
    }
    if (reps < 1 || reps > MAX_REPS || target_ns <= 0) {
        fprintf(stderr, "bench_cksum: bad --reps or --target-ms\n");
        return 2;
    }
    /* 20, 32, 60: the short runs (an IPv4 header, a TCP header with
     * timestamps, the longest TCP header), summed inline under 64 bytes. */
    static const size_t lens[] = {20, 32, 60, 64, 576, 1500, 9000, 65536, 1u << 20};
    const size_t maxlen = 1u << 20;
    uint8_t *src = aligned_alloc(64, maxlen + 64), *dst = aligned_alloc(64, maxlen + 64);
    if (src == NULL || dst == NULL)
        return 1;
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < maxlen + 64; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        src[i] = (uint8_t)x;
        dst[i] = 0;
    }
    double load[3] = {0, 0, 0};
    if (getloadavg(load, 3) != 3)
        load[0] = -1;
    printf("## bench_cksum\n\n");
    printf("- implementation in use: %s; load average at start %.2f %.2f %.2f\n",
           zbuf_ip__cksum_name(zbuf_ip__cksum_chosen()), load[0], load[1], load[2]);
    printf("- GB/s (10^9 bytes per second of this thread's CPU time), median of %d "
           "repetitions of about %.0f ms; in parentheses the median ratio to the portable "
           "code (the checksum before this version) in the same repetition\n\n",
           reps, target_ns / 1e6);
    printf("| bytes, address |");
    for (int c = 0; c < N_COL; c++)
        printf(" %s |", col_name[c]);
    printf("\n|---|");
    for (int c = 0; c < N_COL; c++)
        printf("---:|");
    printf("\n");
    double g[N_COL], r[N_COL];
    char what[64];
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++)
        for (int odd = 0; odd <= 1; odd++) {
            struct job j = {src + odd, dst + odd, lens[k], NULL};
            check(j.src, j.len);
            measure(&j, g, r);
            snprintf(what, sizeof what, "%zu, %s", lens[k], odd ? "odd" : "aligned");
            print_row(what, g, r);
        }

    /* A 64 KiB datagram received as TCP-sized segments, summed in place. */
    zbuf_t *z;
    if (zbuf_create(&z) != 0)
        return 1;
    size_t total = 65536;
    for (size_t off = 0; off < total; off += 1460) {
        size_t n = total - off < 1460 ? total - off : 1460;
        if (zbuf_append_buf(z, src + off, n, NULL, NULL) != 0)
            return 1;
    }
    if (zbuf_ip__fold(zbuf_ip__sum_zbuf(z, 0, total, 0)) != plain16(src, total)) {
        fprintf(stderr, "bench_cksum: the segmented sum differs\n");
        return 1;
    }
    struct job flat = {src, dst, total, NULL}, seg = {src, dst, total, z};
    measure(&flat, g, r);
    double gflat = g[C_STACK];
    measure(&seg, g, r);
    printf("\nA 64 KiB datagram as %zu segments of at most 1460 bytes, summed in place "
           "(zbuf_ip__sum_zbuf, %s): %.2f GB/s, against %.2f GB/s for the same bytes flat.\n",
           zbuf_seg_count(z), zbuf_ip__cksum_name(zbuf_ip__cksum_chosen()), g[C_STACK], gflat);
    zbuf_delete(z);

    /* A TCP segment as sent: header and payload in two segments. */
    if (zbuf_create(&z) != 0 || zbuf_append_buf(z, src + 4096, 32, NULL, NULL) != 0 ||
        zbuf_append_buf(z, src + 8192, 1448, NULL, NULL) != 0)
        return 1;
    memcpy(dst, src + 4096, 32);
    memcpy(dst + 32, src + 8192, 1448);
    if (zbuf_ip__fold(zbuf_ip__sum_zbuf(z, 0, 1480, 0)) != plain16(dst, 1480)) {
        fprintf(stderr, "bench_cksum: the TCP segment's sum differs\n");
        return 1;
    }
    struct job tflat = {dst, dst + 2048, 1480, NULL}, tseg = {dst, dst + 2048, 1480, z};
    measure(&tflat, g, r);
    gflat = g[C_STACK];
    measure(&tseg, g, r);
    printf("A TCP segment as a 32-byte header segment and a 1448-byte payload segment "
           "(zbuf_ip__sum_zbuf): %.2f GB/s, against %.2f GB/s for the same 1480 bytes flat.\n",
           g[C_STACK], gflat);
    zbuf_delete(z);
    free(src);
    free(dst);
    fprintf(stderr, "(checksum %" PRIu64 ")\n", (uint64_t)sink);
    return 0;
}
