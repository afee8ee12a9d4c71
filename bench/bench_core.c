/*
 * bench_core: what libzbuf's core operations cost, measured side by side with
 * libevent's evbuffer and with plain copying, in one run of one program.
 *
 * Part 1, the protocol workload.  A message of four buffers of S bytes each
 * (S = 256 B, 4 KiB, 64 KiB) is shared with a protocol layer that strips a
 * 16-byte header, splits the rest in the middle, peeks at 64 bytes of the
 * first half and throws both halves away.  Three implementations do the same
 * logical work on the same bytes:
 *
 *   zbuf      zbuf_dup of a master zbuf of four enrolled buffers, zbuf_cut
 *             of the header, zbuf_split, zbuf_peek, two zbuf_delete.
 *   evbuffer  evbuffer_add_buffer_reference of a master evbuffer built with
 *             evbuffer_add_reference (libevent's sharing API), evbuffer_drain,
 *             evbuffer_remove_buffer, evbuffer_copyout_from, two evbuffer_free.
 *   copy      malloc + memcpy of the message, header stripped by moving a
 *             pointer, the second half memcpy'd into a second malloc'd
 *             buffer, memcpy of the 64 bytes, two free.
 *
 * The peek window [S - 48, S + 16) of the first half always straddles the
 * boundary between its first two segments, so it is the worst case for the
 * segmented buffers (zbuf_peek must copy into the scratch area).
 *
 * Part 2, scaling.  dup, delete, split, cut and insert on a zbuf of eight
 * segments of 256 B and of 1 MiB.  Each operation is timed on its own: the
 * zbufs it works on are prepared outside the timed region.  A zero-copy
 * design makes the two costs equal; the check is a ratio within 1.5x.
 *
 * Part 3 prints the sizes of the private descriptors (lib/internal.h) and
 * Part 4, within the tables, the library's own count of bytes copied per
 * operation (zbuf_stats_t::bytes_copied).
 *
 * Method: every implementation is warmed up and calibrated so that one batch
 * lasts about --target-ms; then --reps repetitions run the implementations
 * interleaved (in a rotating order, so slow drift hits all alike) and the
 * tables report medians of ns/op and ratios of medians.  Every result is
 * consumed (a compiler barrier and a checksum), so that no copy can be
 * optimised away; before timing, each implementation is checked to produce
 * the same bytes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <zbuf/zbuf.h>

/* Only for sizeof of the private descriptors (part 3); nothing else of it is
 * used, so the benchmark links against the public shared library. */
#include "internal.h"

#ifdef ZBUF_BENCH_HAVE_LIBEVENT
#include <event2/buffer.h>
#include <event2/event.h>
#endif

/* ------------------------------------------------------------ parameters */

#define NSEGS_MSG 4      /* buffers in the protocol message */
#define HDR_LEN 16       /* header stripped off the front */
#define PEEK_LEN 64      /* bytes peeked at */
#define NSEGS_SCALE 8    /* segments of the scaling zbufs */
#define SCALE_CHUNK 256  /* zbufs prepared per timed sub-batch (part 2) */
#define MIN_OPS 1000     /* fewest operations per batch */
#define MAX_OPS 200000   /* most operations per batch */
#define MAX_REPS 99

static const size_t msg_sizes[] = {256, 4096, 65536};
#define N_MSG_SIZES (sizeof(msg_sizes) / sizeof(msg_sizes[0]))

static const size_t scale_sizes[] = {256, 1u << 20};
#define N_SCALE_SIZES 2

struct options {
    int reps;         /* repetitions of every batch */
    double target_ns; /* wanted duration of one batch */
    size_t only_seg;  /* part 1 with this segment size only; 0 = all */
    const char *only; /* "zbuf", "evbuffer", "copy", "scaling" or NULL */
};

static struct options opt = {7, 50e6, 0, NULL};

/* Everything computed from a result ends here, so that the compiler must
 * compute it. */
static volatile uint64_t sink;

__attribute__((noreturn, cold)) static void die(const char *what, long rc)
{
    fprintf(stderr, "bench_core: %s failed (%ld%s%s)\n", what, rc, rc < 0 ? ": " : "",
            rc < 0 ? zbuf_strerror((int)rc) : "");
    exit(1);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Make the compiler believe the memory at p is read here: stores into it
 * cannot be dropped, however dead they look (a buffer about to be freed). */
static inline void touch(const void *p)
{
    __asm__ volatile("" : : "r"(p) : "memory");
}

/* A checksum of a peeked window that forces the window to exist. */
static inline uint64_t consume(const uint8_t *p)
{
    touch(p);
    return (uint64_t)p[0] * 131u + p[PEEK_LEN - 1];
}

/* The byte at offset x of a message: not periodic in any segment size, so
 * that a window taken from the wrong place is noticed. */
static inline uint8_t pattern(size_t x)
{
    return (uint8_t)((x * 131u) ^ (x >> 9) ^ 0x5a);
}

static double median(double *v, int n)
{
    for (int i = 1; i < n; i++) { /* insertion sort: n is small */
        double x = v[i];
        int j = i - 1;
        while (j >= 0 && v[j] > x) {
            v[j + 1] = v[j];
            j--;
        }
        v[j + 1] = x;
    }
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* (max - min) / median in percent: how much the repetitions disagree. */
static double spread_pct(const double *v, int n, double med)
{
    double lo = v[0], hi = v[0];
    for (int i = 1; i < n; i++) {
        lo = v[i] < lo ? v[i] : lo;
        hi = v[i] > hi ? v[i] : hi;
    }
    return med > 0 ? 100.0 * (hi - lo) / med : 0;
}

static const char *human_size(size_t n, char *buf, size_t cap)
{
    if (n >= (1u << 20) && n % (1u << 20) == 0)
        snprintf(buf, cap, "%zu MiB", n >> 20);
    else if (n >= 1024 && n % 1024 == 0)
        snprintf(buf, cap, "%zu KiB", n >> 10);
    else
        snprintf(buf, cap, "%zu B", n);
    return buf;
}

/* ------------------------------------------------ part 1: the workload */

/*
 * One message of NSEGS_MSG buffers of `seg` bytes, held three ways: the raw
 * buffers (the copy baseline reads them), a master zbuf and a master
 * evbuffer that both reference the same raw buffers without copying.
 */
struct msg_fixture {
    size_t seg;                 /* S */
    size_t body_len;            /* 4S - header */
    size_t split_off;           /* middle of the body: the first half's length */
    size_t peek_off;            /* in the first half; straddles segments 0 and 1 */
    uint8_t *src[NSEGS_MSG];    /* the message's buffers */
    zbuf_t *zmaster;
    unsigned releases;          /* release callbacks run for zmaster's buffers */
#ifdef ZBUF_BENCH_HAVE_LIBEVENT
    struct evbuffer *emaster;
#endif
};

static void count_release(void *data, size_t size, void *arg)
{
    (void)data;
    (void)size;
    ((struct msg_fixture *)arg)->releases++;
}

static void msg_fixture_init(struct msg_fixture *f, size_t seg)
{
    int rc;

    memset(f, 0, sizeof(*f));
    f->seg = seg;
    f->body_len = NSEGS_MSG * seg - HDR_LEN;
    f->split_off = f->body_len / 2;
    f->peek_off = seg - HDR_LEN - PEEK_LEN / 2;
    if ((rc = zbuf_create(&f->zmaster)) != 0)
        die("zbuf_create", rc);
#ifdef ZBUF_BENCH_HAVE_LIBEVENT
    f->emaster = evbuffer_new();
    if (f->emaster == NULL)
        die("evbuffer_new", -ENOMEM);
#endif
    for (int k = 0; k < NSEGS_MSG; k++) {
        f->src[k] = malloc(seg);
        if (f->src[k] == NULL)
            die("malloc", -ENOMEM);
        for (size_t j = 0; j < seg; j++)
            f->src[k][j] = pattern((size_t)k * seg + j);
        rc = zbuf_append_buf(f->zmaster, f->src[k], seg, count_release, f);
        if (rc != 0)
            die("zbuf_append_buf", rc);
#ifdef ZBUF_BENCH_HAVE_LIBEVENT
        rc = evbuffer_add_reference(f->emaster, f->src[k], seg, NULL, NULL);
        if (rc != 0)
            die("evbuffer_add_reference", rc);
#endif
    }
    if (zbuf_seg_count(f->zmaster) != NSEGS_MSG)
        die("zbuf_seg_count of the master", (long)zbuf_seg_count(f->zmaster));
}

static void msg_fixture_fini(struct msg_fixture *f)
{
    int rc = zbuf_delete(f->zmaster);
    if (rc != 0)
        die("zbuf_delete", rc);
    if (f->releases != NSEGS_MSG)
        die("release callbacks of the master's buffers", f->releases);
#ifdef ZBUF_BENCH_HAVE_LIBEVENT
    evbuffer_free(f->emaster);
#endif
    for (int k = 0; k < NSEGS_MSG; k++)
        free(f->src[k]);
}

/*
 * The three implementations of one operation.  Each runs it n times and
 * returns a checksum of what it saw.  noinline keeps them from being merged
 * into the timing loop, so each is compiled the same way whatever calls it.
 */
__attribute__((noinline)) static uint64_t run_zbuf(const struct msg_fixture *f, size_t n)
{
    uint8_t scratch[PEEK_LEN];
    uint64_t acc = 0;

    for (size_t i = 0; i < n; i++) {
        zbuf_t *m, *tail;
        const void *p;
        int rc = zbuf_dup(f->zmaster, 0, ZBUF_TO_END, &m);
        if (ZBUF__UNLIKELY(rc != 0))
            die("zbuf_dup", rc);
        rc = zbuf_cut(m, 0, HDR_LEN, NULL);
        rc |= zbuf_split(m, f->split_off, &tail);
        if (ZBUF__UNLIKELY(rc != 0))
            die("zbuf_cut/zbuf_split", rc);
        rc = zbuf_peek(m, f->peek_off, PEEK_LEN, scratch, &p);
        if (ZBUF__UNLIKELY(rc != 0))
            die("zbuf_peek", rc);
        acc += consume(p) + zbuf_length(tail);
        rc = zbuf_delete(tail);
        rc |= zbuf_delete(m);
        if (ZBUF__UNLIKELY(rc != 0))
            die("zbuf_delete", rc);
    }
    return acc;
}

#ifdef ZBUF_BENCH_HAVE_LIBEVENT
__attribute__((noinline)) static uint64_t run_evbuffer(const struct msg_fixture *f, size_t n)
{
    uint8_t scratch[PEEK_LEN];
    uint64_t acc = 0;

    for (size_t i = 0; i < n; i++) {
        struct evbuffer *m = evbuffer_new(), *head = evbuffer_new();
        struct evbuffer_ptr pos;
        if (ZBUF__UNLIKELY(m == NULL || head == NULL))
            die("evbuffer_new", -ENOMEM);
        int rc = evbuffer_add_buffer_reference(m, f->emaster);
        rc |= evbuffer_drain(m, HDR_LEN);
        if (ZBUF__UNLIKELY(rc != 0))
            die("evbuffer_add_buffer_reference/evbuffer_drain", rc);
        /* Moves the first split_off bytes to head: whole chains by pointer,
         * the part of the chain the split point falls in by copying. */
        rc = evbuffer_remove_buffer(m, head, f->split_off);
        if (ZBUF__UNLIKELY(rc != (int)f->split_off))
            die("evbuffer_remove_buffer", rc);
        rc = evbuffer_ptr_set(head, &pos, f->peek_off, EVBUFFER_PTR_SET);
        if (ZBUF__UNLIKELY(rc != 0))
            die("evbuffer_ptr_set", rc);
        ev_ssize_t got = evbuffer_copyout_from(head, &pos, scratch, PEEK_LEN);
        if (ZBUF__UNLIKELY(got != PEEK_LEN))
            die("evbuffer_copyout_from", (long)got);
        acc += consume(scratch) + evbuffer_get_length(m);
        evbuffer_free(head);
        evbuffer_free(m);
    }
    return acc;
}
#endif

__attribute__((noinline)) static uint64_t run_copy(const struct msg_fixture *f, size_t n)
{
    const size_t seg = f->seg, tail_len = f->body_len - f->split_off;
    uint8_t scratch[PEEK_LEN];
    uint64_t acc = 0;

    for (size_t i = 0; i < n; i++) {
        uint8_t *msg = malloc(NSEGS_MSG * seg);
        if (ZBUF__UNLIKELY(msg == NULL))
            die("malloc", -ENOMEM);
        for (int k = 0; k < NSEGS_MSG; k++)
            memcpy(msg + (size_t)k * seg, f->src[k], seg);
        uint8_t *body = msg + HDR_LEN; /* the header strip */
        uint8_t *tail = malloc(tail_len);
        if (ZBUF__UNLIKELY(tail == NULL))
            die("malloc", -ENOMEM);
        memcpy(tail, body + f->split_off, tail_len);
        memcpy(scratch, body + f->peek_off, PEEK_LEN);
        touch(msg);
        touch(tail);
        acc += consume(scratch) + tail_len;
        free(tail);
        free(msg);
    }
    return acc;
}

/* Check that the three implementations see the same bytes: the peek window,
 * the first byte of the second half and the lengths.  Any disagreement means
 * the comparison would not be of the same work. */
static void msg_verify(const struct msg_fixture *f)
{
    uint8_t want[PEEK_LEN], scratch[PEEK_LEN], first;
    const void *p;
    zbuf_t *m, *tail;
    int rc;

    for (size_t i = 0; i < PEEK_LEN; i++)
        want[i] = pattern(HDR_LEN + f->peek_off + i);
    const uint8_t tail_first = pattern(HDR_LEN + f->split_off);

    if ((rc = zbuf_dup(f->zmaster, 0, ZBUF_TO_END, &m)) != 0 ||
        (rc = zbuf_cut(m, 0, HDR_LEN, NULL)) != 0 ||
        (rc = zbuf_split(m, f->split_off, &tail)) != 0 ||
        (rc = zbuf_peek(m, f->peek_off, PEEK_LEN, scratch, &p)) != 0)
        die("zbuf workload (verify)", rc);
    if (memcmp(p, want, PEEK_LEN) != 0 || zbuf_length(m) != f->split_off ||
        zbuf_length(tail) != f->body_len - f->split_off ||
        zbuf_copyout(tail, 0, &first, 1) != 1 || first != tail_first)
        die("zbuf workload (verify): wrong bytes", 0);
    if (p != scratch) /* the window is laid out to straddle a boundary */
        die("zbuf workload (verify): peek window in one segment", 0);
    zbuf_delete(tail);
    zbuf_delete(m);

#ifdef ZBUF_BENCH_HAVE_LIBEVENT
    struct evbuffer *em = evbuffer_new(), *head = evbuffer_new();
    struct evbuffer_ptr pos;
    if (em == NULL || head == NULL || evbuffer_add_buffer_reference(em, f->emaster) != 0 ||
        evbuffer_drain(em, HDR_LEN) != 0 ||
        evbuffer_remove_buffer(em, head, f->split_off) != (int)f->split_off ||
        evbuffer_ptr_set(head, &pos, f->peek_off, EVBUFFER_PTR_SET) != 0 ||
        evbuffer_copyout_from(head, &pos, scratch, PEEK_LEN) != PEEK_LEN)
        die("evbuffer workload (verify)", 0);
    if (memcmp(scratch, want, PEEK_LEN) != 0 || evbuffer_get_length(head) != f->split_off ||
        evbuffer_get_length(em) != f->body_len - f->split_off ||
        evbuffer_copyout(em, &first, 1) != 1 || first != tail_first)
        die("evbuffer workload (verify): wrong bytes", 0);
    evbuffer_free(head);
    evbuffer_free(em);
#endif

    /* The copy baseline is plain C; check its arithmetic the same way. */
    const size_t seg = f->seg;
    uint8_t *msg = malloc(NSEGS_MSG * seg);
    if (msg == NULL)
        die("malloc", -ENOMEM);
    for (int k = 0; k < NSEGS_MSG; k++)
        memcpy(msg + (size_t)k * seg, f->src[k], seg);
    if (memcmp(msg + HDR_LEN + f->peek_off, want, PEEK_LEN) != 0 ||
        msg[HDR_LEN + f->split_off] != tail_first)
        die("copy workload (verify): wrong bytes", 0);
    free(msg);
}

enum impl { IMPL_ZBUF, IMPL_EVBUFFER, IMPL_COPY, N_IMPL };
static const char *const impl_name[N_IMPL] = {"zbuf", "evbuffer", "copy"};

static bool impl_available(enum impl i)
{
#ifndef ZBUF_BENCH_HAVE_LIBEVENT
    if (i == IMPL_EVBUFFER)
        return false;
#endif
    return opt.only == NULL || strcmp(opt.only, impl_name[i]) == 0;
}

static uint64_t run_impl(enum impl i, const struct msg_fixture *f, size_t n)
{
    switch (i) {
    case IMPL_ZBUF:
        return run_zbuf(f, n);
#ifdef ZBUF_BENCH_HAVE_LIBEVENT
    case IMPL_EVBUFFER:
        return run_evbuffer(f, n);
#endif
    case IMPL_COPY:
        return run_copy(f, n);
    default:
        return 0;
    }
}

/* Warm up and pick a batch size that lasts about opt.target_ns. */
static size_t calibrate(enum impl i, const struct msg_fixture *f)
{
    size_t n = 64;
    uint64_t dt;

    for (;;) {
        uint64_t t0 = now_ns();
        sink += run_impl(i, f, n);
        dt = now_ns() - t0;
        if ((double)dt >= opt.target_ns / 4 || n >= MAX_OPS)
            break;
        n *= 2;
    }
    double per_op = (double)dt / (double)n;
    double want = opt.target_ns / (per_op > 0 ? per_op : 1);
    return want < MIN_OPS ? MIN_OPS : want > MAX_OPS ? MAX_OPS : (size_t)want;
}

struct msg_result {
    size_t seg;
    bool have[N_IMPL];
    size_t batch[N_IMPL];
    double med[N_IMPL];     /* ns/op */
    double spread[N_IMPL];  /* % */
    double ratio[N_IMPL];   /* median over repetitions of ns[i] / ns[zbuf] */
    double copied_per_op;   /* zbuf: bytes_copied per op */
    double copies_per_op;   /* zbuf: copy operations per op */
    double allocs_per_op;   /* zbuf: allocator calls per op */
};

static void msg_bench(size_t seg, struct msg_result *r)
{
    struct msg_fixture f;
    double ns[N_IMPL][MAX_REPS];
    uint64_t zops = 0;
    zbuf_stats_t before, after, total = {0};

    memset(r, 0, sizeof(*r));
    r->seg = seg;
    msg_fixture_init(&f, seg);
    msg_verify(&f);
    for (int i = 0; i < N_IMPL; i++) {
        r->have[i] = impl_available((enum impl)i);
        if (r->have[i])
            r->batch[i] = calibrate((enum impl)i, &f);
    }
    for (int rep = 0; rep < opt.reps; rep++) {
        for (int k = 0; k < N_IMPL; k++) {
            enum impl i = (enum impl)((rep + k) % N_IMPL);
            if (!r->have[i])
                continue;
            zbuf_stats_get(&before);
            uint64_t t0 = now_ns();
            sink += run_impl(i, &f, r->batch[i]);
            uint64_t dt = now_ns() - t0;
            zbuf_stats_get(&after);
            ns[i][rep] = (double)dt / (double)r->batch[i];
            if (i == IMPL_ZBUF) {
                total.bytes_copied += after.bytes_copied - before.bytes_copied;
                total.copies += after.copies - before.copies;
                total.allocs += after.allocs - before.allocs;
                zops += r->batch[i];
            }
        }
    }
    for (int i = 0; i < N_IMPL; i++) {
        if (!r->have[i])
            continue;
        double q[MAX_REPS];
        if (r->have[IMPL_ZBUF]) {
            /* Paired: batches of one repetition ran back to back, so their
             * ratio cancels slow drift of the machine's speed. */
            for (int rep = 0; rep < opt.reps; rep++)
                q[rep] = ns[i][rep] / ns[IMPL_ZBUF][rep];
            r->ratio[i] = median(q, opt.reps);
        }
        r->med[i] = median(ns[i], opt.reps);
        r->spread[i] = spread_pct(ns[i], opt.reps, r->med[i]);
    }
    if (zops) {
        r->copied_per_op = (double)total.bytes_copied / (double)zops;
        r->copies_per_op = (double)total.copies / (double)zops;
        r->allocs_per_op = (double)total.allocs / (double)zops;
    }
    msg_fixture_fini(&f);
}

/* Bytes each implementation copies per operation, by construction (for the
 * zbuf column the library's counter is printed instead). */
static size_t evbuffer_copied(size_t seg)
{
    /* evbuffer_remove_buffer copies the bytes of the chain holding the split
     * point that precede it; evbuffer_copyout_from copies the window. */
    return (HDR_LEN + (NSEGS_MSG * seg - HDR_LEN) / 2) % seg + PEEK_LEN;
}

static size_t copy_copied(size_t seg)
{
    size_t body = NSEGS_MSG * seg - HDR_LEN;
    return NSEGS_MSG * seg + (body - body / 2) + PEEK_LEN;
}

static void ratio_cell(char *buf, size_t cap, const struct msg_result *r, enum impl other)
{
    if (r->have[IMPL_ZBUF] && r->have[other])
        snprintf(buf, cap, "%.2fx", r->ratio[other]);
    else
        snprintf(buf, cap, "n/a");
}

static void ns_cell(char *buf, size_t cap, const struct msg_result *r, enum impl i)
{
    if (r->have[i])
        snprintf(buf, cap, "%.1f (±%.0f%%)", r->med[i], r->spread[i] / 2);
    else
        snprintf(buf, cap, "n/a");
}

static void msg_report(const struct msg_result *res, size_t n)
{
    char a[32], b[32], c[32], d[32], e[32], s[32];

    printf("### Protocol workload: share a 4-buffer message, strip a header, split, "
           "peek 64 bytes, free\n\n");
    printf("Median ns per operation over %d repetitions (± half the min-max spread). "
           "Ratios: the other implementation's time over zbuf's in the same repetition, "
           "median over the repetitions; above 1 means zbuf is faster.\n\n",
           opt.reps);
    printf("| segment | zbuf ns/op | evbuffer ns/op | copy ns/op | evbuffer / zbuf | "
           "copy / zbuf | ops per batch (zbuf/evbuffer/copy) |\n");
    printf("|---:|---:|---:|---:|---:|---:|---:|\n");
    for (size_t k = 0; k < n; k++) {
        const struct msg_result *r = &res[k];
        ns_cell(a, sizeof(a), r, IMPL_ZBUF);
        ns_cell(b, sizeof(b), r, IMPL_EVBUFFER);
        ns_cell(c, sizeof(c), r, IMPL_COPY);
        ratio_cell(d, sizeof(d), r, IMPL_EVBUFFER);
        ratio_cell(e, sizeof(e), r, IMPL_COPY);
        printf("| %s | %s | %s | %s | %s | %s | %zu / %zu / %zu |\n",
               human_size(r->seg, s, sizeof(s)), a, b, c, d, e, r->batch[IMPL_ZBUF],
               r->batch[IMPL_EVBUFFER], r->batch[IMPL_COPY]);
    }

    printf("\n### Bytes copied per operation\n\n");
    printf("zbuf: the library's own counter (zbuf_stats_t) over every timed batch; "
           "the only copy expected is the 64-byte peek, whose window straddles a "
           "segment boundary. evbuffer and copy: by construction.\n\n");
    printf("| segment | zbuf bytes copied/op | zbuf copies/op | zbuf allocator calls/op | "
           "evbuffer bytes copied/op | copy bytes copied/op |\n");
    printf("|---:|---:|---:|---:|---:|---:|\n");
    for (size_t k = 0; k < n; k++) {
        const struct msg_result *r = &res[k];
        if (r->have[IMPL_ZBUF])
            printf("| %s | %.1f | %.2f | %.3f | %zu | %zu |\n", human_size(r->seg, s, sizeof(s)),
                   r->copied_per_op, r->copies_per_op, r->allocs_per_op,
                   evbuffer_copied(r->seg), copy_copied(r->seg));
        else
            printf("| %s | n/a | n/a | n/a | %zu | %zu |\n", human_size(r->seg, s, sizeof(s)),
                   evbuffer_copied(r->seg), copy_copied(r->seg));
    }

    for (size_t k = 0; k < n; k++) {
        const struct msg_result *r = &res[k];
        if (r->seg != 4096 || !r->have[IMPL_ZBUF] || !r->have[IMPL_EVBUFFER])
            continue;
        double x = r->ratio[IMPL_EVBUFFER];
        printf("\nTarget, zbuf at least 3x faster than evbuffer at 4 KiB segments: "
               "%.3fx, %s\n",
               x, x >= 3.0 ? "MET" : "MISSED");
    }
    printf("\n");
}

/* ------------------------------------------------ part 2: scaling */

enum scale_op { SC_DUP, SC_DELETE, SC_SPLIT, SC_CUT, SC_INSERT, N_SCALE_OPS };
static const char *const scale_name[N_SCALE_OPS] = {
    "dup (from mid segment 0 to mid segment 7)",
    "delete (8 segments)",
    "split (inside segment 4)",
    "cut (mid segment 3 to mid segment 5)",
    "insert (2-segment zbuf, inside segment 4)",
};

struct scale_fixture {
    size_t seg;
    uint8_t *mem;    /* NSEGS_SCALE * seg bytes, one buffer per segment */
    zbuf_t *master;
};

static void scale_fixture_init(struct scale_fixture *f, size_t seg)
{
    int rc;

    f->seg = seg;
    f->mem = malloc(NSEGS_SCALE * seg);
    if (f->mem == NULL)
        die("malloc", -ENOMEM);
    memset(f->mem, 0xa5, NSEGS_SCALE * seg); /* fault the pages in, untimed */
    if ((rc = zbuf_create(&f->master)) != 0)
        die("zbuf_create", rc);
    for (int k = 0; k < NSEGS_SCALE; k++)
        if ((rc = zbuf_append_buf(f->master, f->mem + (size_t)k * seg, seg, NULL, NULL)) != 0)
            die("zbuf_append_buf", rc);
}

static void scale_fixture_fini(struct scale_fixture *f)
{
    zbuf_delete(f->master);
    free(f->mem);
}

static void dup_all(const struct scale_fixture *f, zbuf_t **z, size_t n, size_t off, size_t len)
{
    for (size_t i = 0; i < n; i++) {
        int rc = zbuf_dup(f->master, off, len, &z[i]);
        if (rc != 0)
            die("zbuf_dup", rc);
    }
}

static void delete_all(zbuf_t **z, size_t n)
{
    for (size_t i = 0; i < n; i++)
        zbuf_delete(z[i]);
}

/*
 * Time `ops` operations of one kind, SCALE_CHUNK at a time: the zbufs each
 * chunk works on are made before the clock starts and deleted after it
 * stops, so only the operation itself is timed.  Returns nanoseconds.
 */
__attribute__((noinline)) static uint64_t scale_run(const struct scale_fixture *f,
                                                    enum scale_op op, size_t ops)
{
    zbuf_t *a[SCALE_CHUNK], *b[SCALE_CHUNK];
    const size_t S = f->seg, mid = (NSEGS_SCALE / 2) * S + S / 2;
    uint64_t total = 0;

    for (size_t done = 0; done < ops; done += SCALE_CHUNK) {
        const size_t n = ops - done < SCALE_CHUNK ? ops - done : SCALE_CHUNK;
        uint64_t t0, t1;
        int rc = 0;

        if (op != SC_DUP)
            dup_all(f, a, n, 0, ZBUF_TO_END);
        if (op == SC_INSERT)
            dup_all(f, b, n, S / 4, S);

        switch (op) {
        case SC_DUP:
            t0 = now_ns();
            for (size_t i = 0; i < n; i++)
                rc |= zbuf_dup(f->master, S / 2, (NSEGS_SCALE - 1) * S, &a[i]);
            t1 = now_ns();
            break;
        case SC_DELETE:
            t0 = now_ns();
            for (size_t i = 0; i < n; i++)
                rc |= zbuf_delete(a[i]);
            t1 = now_ns();
            break;
        case SC_SPLIT:
            t0 = now_ns();
            for (size_t i = 0; i < n; i++)
                rc |= zbuf_split(a[i], mid, &b[i]);
            t1 = now_ns();
            break;
        case SC_CUT:
            t0 = now_ns();
            for (size_t i = 0; i < n; i++)
                rc |= zbuf_cut(a[i], mid - S, 2 * S, NULL);
            t1 = now_ns();
            break;
        case SC_INSERT:
            t0 = now_ns();
            for (size_t i = 0; i < n; i++)
                rc |= zbuf_insert(a[i], mid, b[i], NULL);
            t1 = now_ns();
            break;
        default:
            abort();
        }
        if (rc != 0)
            die(scale_name[op], rc);
        total += t1 - t0;

        /* Consume a result of every chunk, then clean up, untimed. */
        if (op != SC_DELETE) {
            sink += zbuf_length(a[0]) + zbuf_seg_count(a[n - 1]);
            delete_all(a, n);
        }
        if (op == SC_SPLIT)
            delete_all(b, n);
    }
    return total;
}

/* What each scaling operation must leave, checked once per segment size so
 * that both sizes provably do the same work. */
static void scale_verify(const struct scale_fixture *f)
{
    static const size_t want_segs[N_SCALE_OPS] = {
        NSEGS_SCALE,         /* dup: partial first and last segments */
        0,                   /* delete: nothing to look at */
        NSEGS_SCALE / 2 + 1, /* split: segments 0..3 and the front of 4 */
        NSEGS_SCALE - 1,     /* cut: segment 4 gone, 3 and 5 trimmed */
        NSEGS_SCALE + 3,     /* insert: 4 split in two, two segments added */
    };
    const size_t S = f->seg, mid = (NSEGS_SCALE / 2) * S + S / 2;
    zbuf_t *z, *t;
    int rc;

    for (int op = 0; op < N_SCALE_OPS; op++) {
        if (op == SC_DELETE)
            continue;
        if (op == SC_DUP)
            rc = zbuf_dup(f->master, S / 2, (NSEGS_SCALE - 1) * S, &z);
        else
            rc = zbuf_dup(f->master, 0, ZBUF_TO_END, &z);
        if (rc != 0)
            die("zbuf_dup (verify)", rc);
        t = NULL;
        if (op == SC_SPLIT)
            rc = zbuf_split(z, mid, &t);
        else if (op == SC_CUT)
            rc = zbuf_cut(z, mid - S, 2 * S, NULL);
        else if (op == SC_INSERT) {
            if ((rc = zbuf_dup(f->master, S / 4, S, &t)) == 0)
                rc = zbuf_insert(z, mid, t, NULL);
            t = NULL;
        }
        if (rc != 0 || zbuf_check(z) != 0)
            die(scale_name[op], rc);
        if (zbuf_seg_count(z) != want_segs[op]) {
            fprintf(stderr, "bench_core: %s left %zu segments, expected %zu\n", scale_name[op],
                    zbuf_seg_count(z), want_segs[op]);
            exit(1);
        }
        zbuf_delete(t);
        zbuf_delete(z);
    }
}

static void scale_bench(void)
{
    struct scale_fixture f[N_SCALE_SIZES];
    size_t batch[N_SCALE_OPS];
    double ns[N_SCALE_OPS][N_SCALE_SIZES][MAX_REPS];
    double copied[N_SCALE_OPS][N_SCALE_SIZES] = {{0}};
    zbuf_stats_t before, after;
    char s0[32], s1[32];

    for (int k = 0; k < N_SCALE_SIZES; k++) {
        scale_fixture_init(&f[k], scale_sizes[k]);
        scale_verify(&f[k]);
    }

    /* Calibrate on the small segments (warming both up), one batch size per
     * operation so that both sizes run exactly the same number of ops. */
    for (int op = 0; op < N_SCALE_OPS; op++) {
        uint64_t dt = 0;
        size_t n = SCALE_CHUNK;
        for (int k = N_SCALE_SIZES - 1; k >= 0; k--)
            sink += scale_run(&f[k], (enum scale_op)op, n);
        while ((dt = scale_run(&f[0], (enum scale_op)op, n)) < opt.target_ns / 4 &&
               n < MAX_OPS)
            n *= 2;
        double want = opt.target_ns / ((double)dt / (double)n);
        batch[op] = want < MIN_OPS ? MIN_OPS : want > MAX_OPS ? MAX_OPS : (size_t)want;
    }

    for (int rep = 0; rep < opt.reps; rep++)
        for (int op = 0; op < N_SCALE_OPS; op++)
            for (int j = 0; j < N_SCALE_SIZES; j++) {
                int k = (rep + j) % N_SCALE_SIZES;
                zbuf_stats_get(&before);
                uint64_t dt = scale_run(&f[k], (enum scale_op)op, batch[op]);
                zbuf_stats_get(&after);
                ns[op][k][rep] = (double)dt / (double)batch[op];
                copied[op][k] += (double)(after.bytes_copied - before.bytes_copied);
            }

    printf("### Scaling: cost against bytes held (%d segments each)\n\n", NSEGS_SCALE);
    printf("Median ns per operation over %d repetitions; only the operation itself is "
           "timed (its inputs are made and its outputs deleted outside the clock). "
           "Ratio: 1 MiB time over 256 B time in the same repetition, median over the "
           "repetitions. Target: at most 1.5x.\n\n",
           opt.reps);
    printf("| operation | %s segments ns/op | %s segments ns/op | ratio | bytes copied/op | "
           "verdict |\n",
           human_size(scale_sizes[0], s0, sizeof(s0)), human_size(scale_sizes[1], s1, sizeof(s1)));
    printf("|---|---:|---:|---:|---:|---|\n");
    for (int op = 0; op < N_SCALE_OPS; op++) {
        double q[MAX_REPS];
        for (int rep = 0; rep < opt.reps; rep++)
            q[rep] = ns[op][1][rep] / ns[op][0][rep];
        double ratio = median(q, opt.reps);
        double m0 = median(ns[op][0], opt.reps), m1 = median(ns[op][1], opt.reps);
        double cp = (copied[op][0] + copied[op][1]) / (2.0 * opt.reps * (double)batch[op]);
        printf("| %s | %.1f | %.1f | %.2fx | %.1f | %s |\n", scale_name[op], m0, m1, ratio, cp,
               ratio <= 1.5 ? "ok" : "GROWS WITH BYTES");
    }
    printf("\n");

    for (int k = 0; k < N_SCALE_SIZES; k++)
        scale_fixture_fini(&f[k]);
}

/* ------------------------------------------------ part 3: descriptor sizes */

static void sizes_report(void)
{
    printf("### Descriptor sizes (private, from lib/internal.h)\n\n");
    printf("| struct | bytes | target |\n|---|---:|---|\n");
    printf("| zbuf_seg (segment descriptor) | %zu | <= 64: %s |\n", sizeof(struct zbuf_seg),
           sizeof(struct zbuf_seg) <= 64 ? "ok" : "TOO BIG");
    printf("| zbuf (zbuf header) | %zu | |\n", sizeof(struct zbuf));
    printf("| zbuf_buf (buffer header) | %zu | |\n", sizeof(struct zbuf_buf));
    printf("\n");
}

/* ------------------------------------------------------------ main */

static void machine_report(void)
{
    char model[256] = "unknown", line[512], date[64];
    struct utsname u;
    time_t t = time(NULL);
    FILE *fp = fopen("/proc/cpuinfo", "r");

    if (fp != NULL) {
        while (fgets(line, sizeof(line), fp) != NULL) {
            char *colon = strchr(line, ':');
            if (strncmp(line, "model name", 10) == 0 && colon != NULL) {
                snprintf(model, sizeof(model), "%s", colon + 2);
                model[strcspn(model, "\n")] = '\0';
                break;
            }
        }
        fclose(fp);
    }
    strftime(date, sizeof(date), "%Y-%m-%d %H:%M UTC", gmtime(&t));
    if (uname(&u) != 0)
        memset(&u, 0, sizeof(u));

    printf("## bench_core\n\n");
    printf("- date: %s\n", date);
    printf("- machine: %ld CPUs online, %s, Linux %s %s\n", sysconf(_SC_NPROCESSORS_ONLN), model,
           u.release, u.machine);
    printf("- compiler: %s, flags of the build type used by the script\n",
#ifdef __clang__
           "clang " __clang_version__
#else
           "gcc " __VERSION__
#endif
    );
    unsigned v = zbuf_version();
    printf("- libzbuf %u.%u.%u (allocator: %s)", v / 10000, v / 100 % 100, v % 100,
           zbuf_default_allocator_name());
#ifdef ZBUF_BENCH_HAVE_LIBEVENT
    printf(", libevent %s (no locking: evthread not enabled)", event_get_version());
#else
    printf(", libevent not available");
#endif
    printf("; copy baseline uses the C library's malloc\n");
    double load[3] = {0, 0, 0};
    if (getloadavg(load, 3) != 3)
        load[0] = load[1] = load[2] = -1;
    printf("- load average at start: %.2f %.2f %.2f (other work on the machine adds noise)\n",
           load[0], load[1], load[2]);
    printf("- %d repetitions per measurement, batches of about %.0f ms\n\n", opt.reps,
           opt.target_ns / 1e6);
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: bench_core [--reps N] [--target-ms MS] [--quick] [--seg BYTES]\n"
            "                  [--only zbuf|evbuffer|copy|scaling]\n"
            "  --reps N        repetitions of every batch (default 7, at most %d)\n"
            "  --target-ms MS  wanted duration of one batch (default 50)\n"
            "  --quick         3 repetitions of 10 ms batches (a smoke run)\n"
            "  --seg BYTES     the protocol workload at this segment size only\n"
            "  --only NAME     run one implementation of the workload, or only the\n"
            "                  scaling part (for profiling)\n",
            MAX_REPS);
}

static void parse_args(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--quick") == 0) {
            opt.reps = 3;
            opt.target_ns = 10e6;
        } else if (strcmp(a, "--reps") == 0 && v != NULL) {
            opt.reps = atoi(v);
            i++;
        } else if (strcmp(a, "--target-ms") == 0 && v != NULL) {
            opt.target_ns = atof(v) * 1e6;
            i++;
        } else if (strcmp(a, "--seg") == 0 && v != NULL) {
            opt.only_seg = strtoul(v, NULL, 0);
            i++;
        } else if (strcmp(a, "--only") == 0 && v != NULL) {
            opt.only = v;
            i++;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else {
            usage(stderr);
            exit(2);
        }
    }
    if (opt.reps < 1 || opt.reps > MAX_REPS || opt.target_ns <= 0 ||
        (opt.only_seg != 0 && opt.only_seg < 2 * PEEK_LEN)) {
        usage(stderr);
        exit(2);
    }
    if (opt.only != NULL && strcmp(opt.only, "zbuf") != 0 && strcmp(opt.only, "evbuffer") != 0 &&
        strcmp(opt.only, "copy") != 0 && strcmp(opt.only, "scaling") != 0) {
        usage(stderr);
        exit(2);
    }
}

int main(int argc, char **argv)
{
    struct msg_result res[N_MSG_SIZES];
    size_t n = 0;

    parse_args(argc, argv);
    machine_report();
    sizes_report();

    if (opt.only == NULL || strcmp(opt.only, "scaling") != 0) {
        if (opt.only_seg != 0)
            msg_bench(opt.only_seg, &res[n++]);
        else
            for (size_t k = 0; k < N_MSG_SIZES; k++)
                msg_bench(msg_sizes[k], &res[n++]);
        msg_report(res, n);
    }
    if (opt.only == NULL || strcmp(opt.only, "scaling") == 0)
        scale_bench();

    zbuf_thread_cache_flush();
    fprintf(stderr, "(checksum %" PRIu64 ")\n", (uint64_t)sink);
    return 0;
}
