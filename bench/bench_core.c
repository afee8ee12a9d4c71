/* SPDX-License-Identifier: MIT */
/*
 * bench_core: what libzbuf's core operations cost, measured side by side with
 * libevent's evbuffer and with plain copying, in one run of one program.
 *
 * Part 1, the protocol workload.  A message of four buffers of S bytes each
 * (S = 256 B, 4 KiB, 64 KiB, 1 MiB) is shared with a protocol layer that
 * strips a 20-byte header, splits the rest in the middle, copies 64 bytes out
 * of the first half and throws both halves away.  Four implementations do
 * the same logical work on the same bytes:
 *
 *   zbuf      zbuf_dup of a master zbuf of four enrolled buffers, zbuf_cut
 *             of the header, zbuf_split, zbuf_copyout, two zbuf_delete.
 *   vxworks   the same through the <zbuf/vxworks.h> names: zbufDup, zbufCut,
 *             zbufSplit, zbufExtractCopy, two zbufDelete.
 *   evbuffer  evbuffer_add_buffer_reference of a master evbuffer built with
 *             evbuffer_add_reference (libevent's sharing API), evbuffer_drain,
 *             evbuffer_remove_buffer, evbuffer_copyout_from, two evbuffer_free.
 *   copy      malloc + memcpy of the message, header stripped by moving a
 *             pointer, the second half memcpy'd into a second malloc'd
 *             buffer, memcpy of the 64 bytes, two free.
 *
 * The 64-byte window [S - 52, S + 12) of the first half always straddles the
 * boundary between its first two segments.
 *
 * Part 2, fan-out.  A message of four fresh 4 KiB caller buffers is enrolled
 * with a release callback, shared with 16 receivers and dropped: the sender's
 * zbuf and the 16 receivers' zbufs are deleted, and the last delete runs the
 * four release callbacks.  zbuf, vxworks and evbuffer share; copy gives every
 * receiver its own malloc'd copy.
 *
 * Part 3, cross-thread.  One thread dups a master zbuf of four 4 KiB
 * buffers, another deletes the dups (handed over in batches of 64 through a
 * mutex-protected queue): every reference is taken on one thread and dropped
 * on another, the slow path of biased reference counting.  Reported as wall
 * time and process CPU time per message.  It runs before the other parts
 * (see main()).
 *
 * Part 4, scaling.  dup, delete, split, cut and insert on a zbuf of eight
 * segments of 256 B and of 1 MiB.  Each operation is timed on its own: the
 * zbufs it works on are prepared outside the timed region.  A zero-copy
 * design makes the two costs equal; the check is a ratio within 1.5x.
 *
 * Part 5 prints the sizes of the private descriptors (lib/internal.h).  The
 * library's own count of bytes copied and allocator calls per operation
 * (zbuf_stats_t) is in the tables.
 *
 * Method: every implementation is warmed up and calibrated so that one batch
 * lasts about --target-ms; then --reps repetitions run the implementations
 * interleaved (in a rotating order, so slow drift hits all alike) and the
 * tables report medians of ns/op and medians of the per-repetition ratios.
 * Every result is consumed (a compiler barrier and a checksum), so that no
 * copy can be optimised away; before timing, each implementation is checked
 * to produce the same bytes.  --ops N fixes the batch size instead (no
 * warm-up, no calibration), for instruction counts under callgrind:
 * every run_* function below is one batch of one implementation.
 *
 * The program uses only API that libzbuf 0.1.0 had, so that
 * scripts/bench-core.sh can build it against an older commit of the library
 * and compare before and after in the same run.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <zbuf/vxworks.h>
#include <zbuf/zbuf.h>

/* Only for sizeof of the private descriptors (part 5); nothing else of it is
 * used, so the benchmark links against the public shared library. */
#include "internal.h"

#ifdef ZBUF_BENCH_HAVE_LIBEVENT
#include <event2/buffer.h>
#include <event2/event.h>
#endif

/* ------------------------------------------------------------ parameters */

#define NSEGS_MSG 4      /* buffers in the protocol message */
#define HDR_LEN 20       /* header stripped off the front */
#define COPY_LEN 64      /* bytes copied out */
#define FAN_SEG 4096     /* fan-out: bytes per buffer */
#define FAN_OUT 16       /* fan-out: receivers */
#define XT_BATCH 64      /* cross-thread: dups handed over at a time */
#define XT_QUEUE 4       /* cross-thread: batches in flight */
#define NSEGS_SCALE 8    /* segments of the scaling zbufs */
#define SCALE_CHUNK 256  /* zbufs prepared per timed sub-batch (part 4) */
#define MIN_OPS 16       /* fewest operations per batch */
#define MAX_OPS 400000   /* most operations per batch */
#define MAX_REPS 99

static const size_t msg_sizes[] = {256, 4096, 65536, 1u << 20};
#define N_MSG_SIZES (sizeof(msg_sizes) / sizeof(msg_sizes[0]))

static const size_t scale_sizes[] = {256, 1u << 20};
#define N_SCALE_SIZES 2

struct options {
    int reps;         /* repetitions of every batch */
    double target_ns; /* wanted duration of one batch */
    size_t ops;       /* fixed batch size (no calibration); 0 = calibrate */
    size_t only_seg;  /* part 1 with this segment size only; 0 = all */
    const char *only; /* one part (msg, fanout, xthread, scaling), or NULL */
    const char *impl; /* one implementation in parts 1 and 2, or NULL */
    bool tsv;         /* also print machine-readable result lines */
    bool wall;        /* time with the monotonic clock, not thread CPU time */
};

static struct options opt = {7, 50e6, 0, 0, NULL, NULL, false, false};

/* Everything computed from a result ends here, so that the compiler must
 * compute it. */
static volatile uint64_t sink;

__attribute__((noreturn, cold)) static void die(const char *what, long rc)
{
    fprintf(stderr, "bench_core: %s failed (%ld%s%s)\n", what, rc, rc < 0 ? ": " : "",
            rc < 0 ? zbuf_strerror((int)rc) : "");
    exit(1);
}

#define CHECK(cond, what, rc)                                                                      \
    do {                                                                                           \
        if (__builtin_expect(!(cond), 0))                                                          \
            die(what, (long)(rc));                                                                 \
    } while (0)

static uint64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The clock of the single-threaded parts: this thread's CPU time, so that
 * time spent descheduled by other work on the machine is not counted
 * (--wall: the monotonic clock instead). */
static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(opt.wall ? CLOCK_MONOTONIC : CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* User + system CPU time of the whole process (every thread), ns. */
static uint64_t cpu_ns(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000u +
           ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000u;
}

/* Make the compiler believe the memory at p is read here: stores into it
 * cannot be dropped, however dead they look (a buffer about to be freed). */
static inline void touch(const void *p)
{
    __asm__ volatile("" : : "r"(p) : "memory");
}

/* A checksum of a copied window that forces the window to exist. */
static inline uint64_t consume(const uint8_t *p)
{
    touch(p);
    return (uint64_t)p[0] * 131u + p[COPY_LEN - 1];
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

static bool part_wanted(const char *part)
{
    return opt.only == NULL || strcmp(opt.only, part) == 0;
}

/* -------------------------------------------------- implementations */

enum impl { IMPL_ZBUF, IMPL_VX, IMPL_EVBUFFER, IMPL_COPY, N_IMPL };
static const char *const impl_name[N_IMPL] = {"zbuf", "vxworks", "evbuffer", "copy"};

static bool impl_available(enum impl i)
{
#ifndef ZBUF_BENCH_HAVE_LIBEVENT
    if (i == IMPL_EVBUFFER)
        return false;
#endif
    return opt.impl == NULL || strcmp(opt.impl, impl_name[i]) == 0;
}

/* One timed batch of n operations of one implementation; returns a checksum. */
typedef uint64_t (*batch_fn)(const void *fixture, size_t n);

/* Warm up and pick a batch size that lasts about opt.target_ns. */
static size_t calibrate(batch_fn fn, const void *f)
{
    if (opt.ops)
        return opt.ops;
    size_t n = 4;
    uint64_t dt;
    for (;;) {
        uint64_t t0 = now_ns();
        sink += fn(f, n);
        dt = now_ns() - t0;
        if ((double)dt >= opt.target_ns / 4 || n >= MAX_OPS)
            break;
        n *= 2;
    }
    double per_op = (double)dt / (double)n;
    double want = opt.target_ns / (per_op > 0 ? per_op : 1);
    return want < MIN_OPS ? MIN_OPS : want > MAX_OPS ? MAX_OPS : (size_t)want;
}

/* Results of one table row: one batch function per implementation, run
 * interleaved over the repetitions. */
struct row {
    const char *name;       /* what the row is (for the TSV lines) */
    size_t size;            /* its parameter (segment size) */
    batch_fn fn[N_IMPL];    /* NULL: not in this row */
    const void *fixture;
    size_t batch[N_IMPL];
    double med[N_IMPL];     /* ns/op */
    double spread[N_IMPL];  /* % */
    double ratio[N_IMPL];   /* median over repetitions of ns[i] / ns[zbuf] */
    double vs_ev[N_IMPL];   /* median over repetitions of ns[evbuffer] / ns[i] */
    double copied[N_IMPL];  /* zbuf, vxworks: bytes_copied per op */
    double allocs[N_IMPL];  /* zbuf, vxworks: allocator calls per op */
};

static void row_run(struct row *r)
{
    double ns[N_IMPL][MAX_REPS];
    double ops[N_IMPL] = {0};
    zbuf_stats_t before, after;

    for (int i = 0; i < N_IMPL; i++)
        if (r->fn[i] != NULL)
            r->batch[i] = calibrate(r->fn[i], r->fixture);
    for (int rep = 0; rep < opt.reps; rep++) {
        for (int k = 0; k < N_IMPL; k++) {
            int i = (rep + k) % N_IMPL;
            if (r->fn[i] == NULL)
                continue;
            zbuf_stats_get(&before);
            uint64_t t0 = now_ns();
            sink += r->fn[i](r->fixture, r->batch[i]);
            uint64_t dt = now_ns() - t0;
            zbuf_stats_get(&after);
            ns[i][rep] = (double)dt / (double)r->batch[i];
            r->copied[i] += (double)(after.bytes_copied - before.bytes_copied);
            r->allocs[i] += (double)(after.allocs - before.allocs);
            ops[i] += (double)r->batch[i];
        }
    }
    for (int i = 0; i < N_IMPL; i++) {
        if (r->fn[i] == NULL)
            continue;
        double q[MAX_REPS];
        /* Paired: batches of one repetition ran back to back, so their ratio
         * cancels slow drift of the machine's speed. */
        if (r->fn[IMPL_ZBUF] != NULL) {
            for (int rep = 0; rep < opt.reps; rep++)
                q[rep] = ns[i][rep] / ns[IMPL_ZBUF][rep];
            r->ratio[i] = median(q, opt.reps);
        }
        if (r->fn[IMPL_EVBUFFER] != NULL) {
            for (int rep = 0; rep < opt.reps; rep++)
                q[rep] = ns[IMPL_EVBUFFER][rep] / ns[i][rep];
            r->vs_ev[i] = median(q, opt.reps);
        }
        r->copied[i] /= ops[i];
        r->allocs[i] /= ops[i];
        r->med[i] = median(ns[i], opt.reps);
        r->spread[i] = spread_pct(ns[i], opt.reps, r->med[i]);
        if (opt.tsv)
            printf("RESULT\t%s\t%zu\t%s\t%.2f\t%.3f\t%.3f\n", r->name, r->size, impl_name[i],
                   r->med[i], r->ratio[i], r->vs_ev[i]);
    }
}

static void cell_ns(char *buf, size_t cap, const struct row *r, enum impl i)
{
    if (r->fn[i] != NULL)
        snprintf(buf, cap, "%.1f (±%.0f%%)", r->med[i], r->spread[i] / 2);
    else
        snprintf(buf, cap, "n/a");
}

static void cell_x(char *buf, size_t cap, bool have, double x)
{
    if (have)
        snprintf(buf, cap, "%.2fx", x);
    else
        snprintf(buf, cap, "n/a");
}

/* The common table: ns/op per implementation and the ratios to evbuffer. */
static void rows_report(const struct row *rows, size_t n, const char *param)
{
    char c[N_IMPL][40], e0[16], e1[16], v[16], s[32];

    printf("| %s | zbuf ns/op | vxworks ns/op | evbuffer ns/op | copy ns/op | evbuffer / zbuf | "
           "evbuffer / vxworks | vxworks / zbuf |\n",
           param);
    printf("|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (size_t k = 0; k < n; k++) {
        const struct row *r = &rows[k];
        for (int i = 0; i < N_IMPL; i++)
            cell_ns(c[i], sizeof(c[i]), r, (enum impl)i);
        bool ev = r->fn[IMPL_EVBUFFER] != NULL;
        cell_x(e0, sizeof(e0), ev && r->fn[IMPL_ZBUF], r->vs_ev[IMPL_ZBUF]);
        cell_x(e1, sizeof(e1), ev && r->fn[IMPL_VX], r->vs_ev[IMPL_VX]);
        cell_x(v, sizeof(v), r->fn[IMPL_VX] && r->fn[IMPL_ZBUF], r->ratio[IMPL_VX]);
        printf("| %s | %s | %s | %s | %s | %s | %s | %s |\n", human_size(r->size, s, sizeof(s)),
               c[IMPL_ZBUF], c[IMPL_VX], c[IMPL_EVBUFFER], c[IMPL_COPY], e0, e1, v);
    }
    printf("\n");
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
    size_t copy_off;            /* in the first half; straddles segments 0 and 1 */
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
    f->copy_off = seg - HDR_LEN - COPY_LEN / 2 - 20;
    rc = zbuf_create(&f->zmaster);
    CHECK(rc == 0, "zbuf_create", rc);
#ifdef ZBUF_BENCH_HAVE_LIBEVENT
    f->emaster = evbuffer_new();
    CHECK(f->emaster != NULL, "evbuffer_new", -ENOMEM);
#endif
    for (int k = 0; k < NSEGS_MSG; k++) {
        f->src[k] = malloc(seg);
        CHECK(f->src[k] != NULL, "malloc", -ENOMEM);
        for (size_t j = 0; j < seg; j++)
            f->src[k][j] = pattern((size_t)k * seg + j);
        rc = zbuf_append_buf(f->zmaster, f->src[k], seg, count_release, f);
        CHECK(rc == 0, "zbuf_append_buf", rc);
#ifdef ZBUF_BENCH_HAVE_LIBEVENT
        rc = evbuffer_add_reference(f->emaster, f->src[k], seg, NULL, NULL);
        CHECK(rc == 0, "evbuffer_add_reference", rc);
#endif
    }
    CHECK(zbuf_seg_count(f->zmaster) == NSEGS_MSG, "zbuf_seg_count of the master",
          zbuf_seg_count(f->zmaster));
}

static void msg_fixture_fini(struct msg_fixture *f)
{
    int rc = zbuf_delete(f->zmaster);
    CHECK(rc == 0, "zbuf_delete", rc);
    CHECK(f->releases == NSEGS_MSG, "release callbacks of the master's buffers", f->releases);
#ifdef ZBUF_BENCH_HAVE_LIBEVENT
    evbuffer_free(f->emaster);
#endif
    for (int k = 0; k < NSEGS_MSG; k++)
        free(f->src[k]);
}

/*
 * The implementations of one operation.  Each runs it n times and returns a
 * checksum of what it saw.  noinline keeps them from being merged into the
 * timing loop, so each is compiled the same way whatever calls it (and so
 * that callgrind can count each one: --toggle-collect=run_msg_zbuf ...).
 */
__attribute__((noinline)) static uint64_t run_msg_zbuf(const void *fixture, size_t n)
{
    const struct msg_fixture *f = fixture;
    uint8_t out[COPY_LEN];
    uint64_t acc = 0;

    for (size_t i = 0; i < n; i++) {
        zbuf_t *m, *tail;
        int rc = zbuf_dup(f->zmaster, 0, ZBUF_TO_END, &m);
        CHECK(rc == 0, "zbuf_dup", rc);
        rc = zbuf_cut(m, 0, HDR_LEN, NULL);
        rc |= zbuf_split(m, f->split_off, &tail);
        CHECK(rc == 0, "zbuf_cut/zbuf_split", rc);
        ssize_t got = zbuf_copyout(m, f->copy_off, out, COPY_LEN);
        CHECK(got == COPY_LEN, "zbuf_copyout", got);
        acc += consume(out) + zbuf_length(tail);
        rc = zbuf_delete(tail);
        rc |= zbuf_delete(m);
        CHECK(rc == 0, "zbuf_delete", rc);
    }
    return acc;
}

__attribute__((noinline)) static uint64_t run_msg_vx(const void *fixture, size_t n)
{
    const struct msg_fixture *f = fixture;
    char out[COPY_LEN];
    uint64_t acc = 0;

    for (size_t i = 0; i < n; i++) {
        ZBUF_ID m = zbufDup(f->zmaster, NULL, 0, -1);
        CHECK(m != NULL, "zbufDup", -errno);
        CHECK(zbufCut(m, NULL, 0, HDR_LEN) != NULL, "zbufCut", -errno);
        ZBUF_ID tail = zbufSplit(m, NULL, (int)f->split_off);
        CHECK(tail != NULL, "zbufSplit", -errno);
        int got = zbufExtractCopy(m, NULL, (int)f->copy_off, out, COPY_LEN);
        CHECK(got == COPY_LEN, "zbufExtractCopy", got);
        acc += consume((const uint8_t *)out) + (uint64_t)zbufLength(tail);
        CHECK(zbufDelete(tail) == OK && zbufDelete(m) == OK, "zbufDelete", -errno);
    }
    return acc;
}

#ifdef ZBUF_BENCH_HAVE_LIBEVENT
__attribute__((noinline)) static uint64_t run_msg_evbuffer(const void *fixture, size_t n)
{
    const struct msg_fixture *f = fixture;
    uint8_t out[COPY_LEN];
    uint64_t acc = 0;

    for (size_t i = 0; i < n; i++) {
        struct evbuffer *m = evbuffer_new(), *head = evbuffer_new();
        struct evbuffer_ptr pos;
        CHECK(m != NULL && head != NULL, "evbuffer_new", -ENOMEM);
        int rc = evbuffer_add_buffer_reference(m, f->emaster);
        rc |= evbuffer_drain(m, HDR_LEN);
        CHECK(rc == 0, "evbuffer_add_buffer_reference/evbuffer_drain", rc);
        /* Moves the first split_off bytes to head: whole chains by pointer,
         * the part of the chain the split point falls in by copying. */
        rc = evbuffer_remove_buffer(m, head, f->split_off);
        CHECK(rc == (int)f->split_off, "evbuffer_remove_buffer", rc);
        rc = evbuffer_ptr_set(head, &pos, f->copy_off, EVBUFFER_PTR_SET);
        CHECK(rc == 0, "evbuffer_ptr_set", rc);
        ev_ssize_t got = evbuffer_copyout_from(head, &pos, out, COPY_LEN);
        CHECK(got == COPY_LEN, "evbuffer_copyout_from", got);
        acc += consume(out) + evbuffer_get_length(m);
        evbuffer_free(head);
        evbuffer_free(m);
    }
    return acc;
}
#endif

__attribute__((noinline)) static uint64_t run_msg_copy(const void *fixture, size_t n)
{
    const struct msg_fixture *f = fixture;
    const size_t seg = f->seg, tail_len = f->body_len - f->split_off;
    uint8_t out[COPY_LEN];
    uint64_t acc = 0;

    for (size_t i = 0; i < n; i++) {
        uint8_t *msg = malloc(NSEGS_MSG * seg);
        CHECK(msg != NULL, "malloc", -ENOMEM);
        for (int k = 0; k < NSEGS_MSG; k++)
            memcpy(msg + (size_t)k * seg, f->src[k], seg);
        uint8_t *body = msg + HDR_LEN; /* the header strip */
        uint8_t *tail = malloc(tail_len);
        CHECK(tail != NULL, "malloc", -ENOMEM);
        memcpy(tail, body + f->split_off, tail_len);
        memcpy(out, body + f->copy_off, COPY_LEN);
        touch(msg);
        touch(tail);
        acc += consume(out) + tail_len;
        free(tail);
        free(msg);
    }
    return acc;
}

/* Check that the implementations see the same bytes: the copied window, the
 * first byte of the second half and the lengths.  Any disagreement means the
 * comparison would not be of the same work. */
static void msg_verify(const struct msg_fixture *f)
{
    uint8_t want[COPY_LEN], out[COPY_LEN], first;
    zbuf_t *m, *tail;
    int rc;

    for (size_t i = 0; i < COPY_LEN; i++)
        want[i] = pattern(HDR_LEN + f->copy_off + i);
    const uint8_t tail_first = pattern(HDR_LEN + f->split_off);
    CHECK(f->copy_off < f->seg - HDR_LEN && f->copy_off + COPY_LEN > f->seg - HDR_LEN,
          "the window does not straddle the first segment boundary", 0);

    if ((rc = zbuf_dup(f->zmaster, 0, ZBUF_TO_END, &m)) != 0 ||
        (rc = zbuf_cut(m, 0, HDR_LEN, NULL)) != 0 ||
        (rc = zbuf_split(m, f->split_off, &tail)) != 0 ||
        (rc = (int)zbuf_copyout(m, f->copy_off, out, COPY_LEN)) != COPY_LEN)
        die("zbuf workload (verify)", rc);
    CHECK(memcmp(out, want, COPY_LEN) == 0 && zbuf_length(m) == f->split_off &&
              zbuf_length(tail) == f->body_len - f->split_off &&
              zbuf_copyout(tail, 0, &first, 1) == 1 && first == tail_first,
          "zbuf workload (verify): wrong bytes", 0);
    zbuf_delete(tail);
    zbuf_delete(m);

    ZBUF_ID vm = zbufDup(f->zmaster, NULL, 0, -1);
    ZBUF_ID vt = NULL;
    CHECK(vm != NULL && zbufCut(vm, NULL, 0, HDR_LEN) != NULL &&
              (vt = zbufSplit(vm, NULL, (int)f->split_off)) != NULL &&
              zbufExtractCopy(vm, NULL, (int)f->copy_off, (char *)out, COPY_LEN) == COPY_LEN,
          "vxworks workload (verify)", -errno);
    CHECK(memcmp(out, want, COPY_LEN) == 0 && zbufLength(vm) == (int)f->split_off &&
              zbufLength(vt) == (int)(f->body_len - f->split_off) &&
              zbufExtractCopy(vt, NULL, 0, (char *)&first, 1) == 1 && first == tail_first,
          "vxworks workload (verify): wrong bytes", 0);
    zbufDelete(vt);
    zbufDelete(vm);

#ifdef ZBUF_BENCH_HAVE_LIBEVENT
    struct evbuffer *em = evbuffer_new(), *head = evbuffer_new();
    struct evbuffer_ptr pos;
    CHECK(em != NULL && head != NULL && evbuffer_add_buffer_reference(em, f->emaster) == 0 &&
              evbuffer_drain(em, HDR_LEN) == 0 &&
              evbuffer_remove_buffer(em, head, f->split_off) == (int)f->split_off &&
              evbuffer_ptr_set(head, &pos, f->copy_off, EVBUFFER_PTR_SET) == 0 &&
              evbuffer_copyout_from(head, &pos, out, COPY_LEN) == COPY_LEN,
          "evbuffer workload (verify)", 0);
    CHECK(memcmp(out, want, COPY_LEN) == 0 && evbuffer_get_length(head) == f->split_off &&
              evbuffer_get_length(em) == f->body_len - f->split_off &&
              evbuffer_copyout(em, &first, 1) == 1 && first == tail_first,
          "evbuffer workload (verify): wrong bytes", 0);
    evbuffer_free(head);
    evbuffer_free(em);
#endif

    /* The copy baseline is plain C; check its arithmetic the same way. */
    const size_t seg = f->seg;
    uint8_t *msg = malloc(NSEGS_MSG * seg);
    CHECK(msg != NULL, "malloc", -ENOMEM);
    for (int k = 0; k < NSEGS_MSG; k++)
        memcpy(msg + (size_t)k * seg, f->src[k], seg);
    CHECK(memcmp(msg + HDR_LEN + f->copy_off, want, COPY_LEN) == 0 &&
              msg[HDR_LEN + f->split_off] == tail_first,
          "copy workload (verify): wrong bytes", 0);
    free(msg);
}

static void msg_bench(void)
{
    struct row rows[N_MSG_SIZES];
    struct msg_fixture fx[N_MSG_SIZES];
    size_t n = 0;
    char s[32];

    for (size_t k = 0; k < N_MSG_SIZES; k++) {
        if (opt.only_seg != 0 && msg_sizes[k] != opt.only_seg)
            continue;
        struct row *r = &rows[n];
        struct msg_fixture *f = &fx[n++];
        msg_fixture_init(f, msg_sizes[k]);
        msg_verify(f);
        memset(r, 0, sizeof(*r));
        r->name = "msg";
        r->size = msg_sizes[k];
        r->fixture = f;
        batch_fn fns[N_IMPL] = {run_msg_zbuf, run_msg_vx, NULL, run_msg_copy};
#ifdef ZBUF_BENCH_HAVE_LIBEVENT
        fns[IMPL_EVBUFFER] = run_msg_evbuffer;
#endif
        for (int i = 0; i < N_IMPL; i++)
            r->fn[i] = impl_available((enum impl)i) ? fns[i] : NULL;
        row_run(r);
    }
    if (n == 0)
        return;

    printf("### Protocol workload: share a 4-buffer message, strip a 20-byte header, split, "
           "copy 64 bytes out, free\n\n");
    printf("Median ns per operation over %d repetitions (± half the min-max spread). "
           "Ratios: medians over the repetitions of the ratio of the two times taken in the "
           "same repetition; evbuffer / X above 1 means X is faster than evbuffer.\n\n",
           opt.reps);
    rows_report(rows, n, "segment");

    printf("Bytes copied and allocator calls per operation (libzbuf's own counters over "
           "every timed batch; the only copy expected is the 64 bytes copied out):\n\n");
    printf("| segment | zbuf bytes copied/op | zbuf allocator calls/op | vxworks bytes copied/op "
           "| vxworks allocator calls/op |\n|---:|---:|---:|---:|---:|\n");
    for (size_t k = 0; k < n; k++)
        printf("| %s | %.1f | %.3f | %.1f | %.3f |\n", human_size(rows[k].size, s, sizeof(s)),
               rows[k].copied[IMPL_ZBUF], rows[k].allocs[IMPL_ZBUF], rows[k].copied[IMPL_VX],
               rows[k].allocs[IMPL_VX]);
    printf("\n");

    /* The targets, where this run measured them. */
    for (size_t k = 0; k < n; k++) {
        const struct row *r = &rows[k];
        if (r->size == 4096 && r->fn[IMPL_EVBUFFER] && r->fn[IMPL_ZBUF] && r->fn[IMPL_VX])
            printf("- Target evbuffer / zbuf >= 5 at 4 KiB: %.2fx, %s; evbuffer / vxworks >= 4.5: "
                   "%.2fx, %s\n",
                   r->vs_ev[IMPL_ZBUF], r->vs_ev[IMPL_ZBUF] >= 5 ? "MET" : "MISSED",
                   r->vs_ev[IMPL_VX], r->vs_ev[IMPL_VX] >= 4.5 ? "MET" : "MISSED");
    }
    double worst = 0;
    for (size_t k = 0; k < n; k++)
        if (rows[k].fn[IMPL_VX] && rows[k].fn[IMPL_ZBUF] && rows[k].ratio[IMPL_VX] > worst)
            worst = rows[k].ratio[IMPL_VX];
    if (worst > 0)
        printf("- Target vxworks / zbuf <= 1.1 at every size: worst %.2fx, %s\n", worst,
               worst <= 1.1 ? "MET" : "MISSED");
    if (n >= 2 && rows[0].size == 256 && rows[n - 1].size == (1u << 20))
        for (int i = IMPL_ZBUF; i <= IMPL_VX; i++)
            if (rows[0].fn[i] && rows[n - 1].fn[i]) {
                double q = rows[n - 1].med[i] / rows[0].med[i];
                printf("- Target %s cost at 1 MiB <= 1.5x cost at 256 B: %.2fx, %s\n",
                       impl_name[i], q, q <= 1.5 ? "MET" : "MISSED");
            }
    printf("\n");
    for (size_t k = 0; k < n; k++)
        msg_fixture_fini(&fx[k]);
}

/* ------------------------------------------------ part 2: fan-out */

struct fan_fixture {
    uint8_t *src[NSEGS_MSG];   /* the message's buffers, enrolled afresh each time */
    unsigned long released;    /* release callbacks (zbuf, vxworks, evbuffer) */
};

static void fan_release(void *data, size_t size, void *arg)
{
    (void)data;
    (void)size;
    ((struct fan_fixture *)arg)->released++;
}

static void fan_free_rtn(caddr_t buf, intptr_t arg)
{
    (void)buf;
    ((struct fan_fixture *)arg)->released++;
}

#ifdef ZBUF_BENCH_HAVE_LIBEVENT
static void fan_ev_cleanup(const void *data, size_t len, void *arg)
{
    (void)data;
    (void)len;
    ((struct fan_fixture *)arg)->released++;
}
#endif

__attribute__((noinline)) static uint64_t run_fan_zbuf(const void *fixture, size_t n)
{
    struct fan_fixture *f = (struct fan_fixture *)fixture;
    zbuf_t *rx[FAN_OUT];
    uint64_t acc = 0;

    for (size_t i = 0; i < n; i++) {
        zbuf_t *m;
        int rc = zbuf_create(&m);
        for (int k = 0; k < NSEGS_MSG; k++)
            rc |= zbuf_append_buf(m, f->src[k], FAN_SEG, fan_release, f);
        CHECK(rc == 0, "zbuf_create/zbuf_append_buf", rc);
        for (int r = 0; r < FAN_OUT; r++) {
            rc = zbuf_dup(m, 0, ZBUF_TO_END, &rx[r]);
            CHECK(rc == 0, "zbuf_dup", rc);
        }
        zbuf_delete(m);
        for (int r = 0; r < FAN_OUT; r++) {
            acc += zbuf_length(rx[r]);
            zbuf_delete(rx[r]); /* the last one runs the four release callbacks */
        }
    }
    return acc + f->released;
}

__attribute__((noinline)) static uint64_t run_fan_vx(const void *fixture, size_t n)
{
    struct fan_fixture *f = (struct fan_fixture *)fixture;
    ZBUF_ID rx[FAN_OUT];
    uint64_t acc = 0;

    for (size_t i = 0; i < n; i++) {
        ZBUF_ID m = zbufCreate();
        CHECK(m != NULL, "zbufCreate", -errno);
        for (int k = 0; k < NSEGS_MSG; k++)
            CHECK(zbufInsertBuf(m, NULL, ZBUF_END, (caddr_t)f->src[k], FAN_SEG,
                                (VOIDFUNCPTR)fan_free_rtn, (intptr_t)f) != NULL,
                  "zbufInsertBuf", -errno);
        for (int r = 0; r < FAN_OUT; r++) {
            rx[r] = zbufDup(m, NULL, 0, -1);
            CHECK(rx[r] != NULL, "zbufDup", -errno);
        }
        zbufDelete(m);
        for (int r = 0; r < FAN_OUT; r++) {
            acc += (uint64_t)zbufLength(rx[r]);
            zbufDelete(rx[r]);
        }
    }
    return acc + f->released;
}

#ifdef ZBUF_BENCH_HAVE_LIBEVENT
__attribute__((noinline)) static uint64_t run_fan_evbuffer(const void *fixture, size_t n)
{
    struct fan_fixture *f = (struct fan_fixture *)fixture;
    struct evbuffer *rx[FAN_OUT];
    uint64_t acc = 0;

    for (size_t i = 0; i < n; i++) {
        struct evbuffer *m = evbuffer_new();
        CHECK(m != NULL, "evbuffer_new", -ENOMEM);
        int rc = 0;
        for (int k = 0; k < NSEGS_MSG; k++)
            rc |= evbuffer_add_reference(m, f->src[k], FAN_SEG, fan_ev_cleanup, f);
        CHECK(rc == 0, "evbuffer_add_reference", rc);
        for (int r = 0; r < FAN_OUT; r++) {
            rx[r] = evbuffer_new();
            CHECK(rx[r] != NULL && evbuffer_add_buffer_reference(rx[r], m) == 0,
                  "evbuffer_add_buffer_reference", -ENOMEM);
        }
        evbuffer_free(m);
        for (int r = 0; r < FAN_OUT; r++) {
            acc += evbuffer_get_length(rx[r]);
            evbuffer_free(rx[r]);
        }
    }
    return acc + f->released;
}
#endif

__attribute__((noinline)) static uint64_t run_fan_copy(const void *fixture, size_t n)
{
    const struct fan_fixture *f = fixture;
    uint8_t *rx[FAN_OUT];
    uint64_t acc = 0;

    for (size_t i = 0; i < n; i++) {
        for (int r = 0; r < FAN_OUT; r++) {
            rx[r] = malloc(NSEGS_MSG * FAN_SEG);
            CHECK(rx[r] != NULL, "malloc", -ENOMEM);
            for (int k = 0; k < NSEGS_MSG; k++)
                memcpy(rx[r] + (size_t)k * FAN_SEG, f->src[k], FAN_SEG);
        }
        for (int r = 0; r < FAN_OUT; r++) {
            touch(rx[r]);
            acc += rx[r][0];
            free(rx[r]);
        }
    }
    return acc;
}

static void fan_bench(void)
{
    struct fan_fixture f;
    struct row r;

    memset(&f, 0, sizeof(f));
    for (int k = 0; k < NSEGS_MSG; k++) {
        f.src[k] = malloc(FAN_SEG);
        CHECK(f.src[k] != NULL, "malloc", -ENOMEM);
        memset(f.src[k], 0x40 + k, FAN_SEG);
    }
    memset(&r, 0, sizeof(r));
    r.name = "fanout";
    r.size = FAN_SEG;
    r.fixture = &f;
    r.fn[IMPL_ZBUF] = run_fan_zbuf;
    r.fn[IMPL_VX] = run_fan_vx;
#ifdef ZBUF_BENCH_HAVE_LIBEVENT
    r.fn[IMPL_EVBUFFER] = run_fan_evbuffer;
#endif
    r.fn[IMPL_COPY] = run_fan_copy;
    /* Every message's four buffers are released exactly once, by the last
     * receiver's delete. */
    for (int i = IMPL_ZBUF; i <= IMPL_EVBUFFER; i++) {
        if (r.fn[i] == NULL)
            continue;
        unsigned long before = f.released;
        sink += r.fn[i](&f, 3);
        CHECK(f.released - before == 3 * NSEGS_MSG, "fan-out release callbacks",
              f.released - before);
    }
    for (int i = 0; i < N_IMPL; i++)
        if (!impl_available((enum impl)i))
            r.fn[i] = NULL;
    row_run(&r);

    printf("### Fan-out: one 4-segment message shared with %d receivers and released\n\n",
           FAN_OUT);
    printf("Per operation: enrol four fresh 4 KiB caller buffers with a release callback, "
           "share the message with %d receivers (zbuf_dup / zbufDup / "
           "evbuffer_add_buffer_reference), delete the sender's and every receiver's zbuf; the "
           "last delete runs the four callbacks. copy: every receiver gets a malloc'd copy. "
           "Median ns per operation over %d repetitions.\n\n",
           FAN_OUT, opt.reps);
    rows_report(&r, 1, "buffers");
    printf("Allocator calls per operation: zbuf %.2f, vxworks %.2f.\n\n", r.allocs[IMPL_ZBUF],
           r.allocs[IMPL_VX]);
    for (int k = 0; k < NSEGS_MSG; k++)
        free(f.src[k]);
}

/* ------------------------------------------------ part 3: cross-thread */

struct xt_batch {
    zbuf_t *z[XT_BATCH];
};

struct xt {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct xt_batch q[XT_QUEUE]; /* ring of full batches */
    unsigned head, count;        /* under lock */
    bool done;
    zbuf_t *master;
    unsigned releases;
};

static void xt_release(void *data, size_t size, void *arg)
{
    (void)data;
    (void)size;
    ((struct xt *)arg)->releases++; /* only at teardown, on the main thread */
}

/* The consumer: delete every dup it is handed, on its own thread. */
static void *xt_consumer(void *arg)
{
    struct xt *x = arg;
    struct xt_batch b;
    pthread_mutex_lock(&x->lock);
    for (;;) {
        while (x->count == 0 && !x->done)
            pthread_cond_wait(&x->cond, &x->lock);
        if (x->count == 0)
            break;
        b = x->q[x->head];
        x->head = (x->head + 1) % XT_QUEUE;
        x->count--;
        pthread_cond_broadcast(&x->cond);
        pthread_mutex_unlock(&x->lock);
        for (int i = 0; i < XT_BATCH; i++)
            CHECK(zbuf_delete(b.z[i]) == 0, "zbuf_delete (consumer)", -EINVAL);
        pthread_mutex_lock(&x->lock);
    }
    pthread_mutex_unlock(&x->lock);
    return NULL;
}

/* n messages (rounded up to whole batches) dup'ed here, deleted there. */
__attribute__((noinline)) static uint64_t run_xthread(struct xt *x, size_t n)
{
    pthread_t th;
    x->done = false;
    x->head = x->count = 0;
    CHECK(pthread_create(&th, NULL, xt_consumer, x) == 0, "pthread_create", -errno);
    for (size_t done = 0; done < n; done += XT_BATCH) {
        struct xt_batch b;
        for (int i = 0; i < XT_BATCH; i++) {
            int rc = zbuf_dup(x->master, 0, ZBUF_TO_END, &b.z[i]);
            CHECK(rc == 0, "zbuf_dup (producer)", rc);
        }
        pthread_mutex_lock(&x->lock);
        while (x->count == XT_QUEUE)
            pthread_cond_wait(&x->cond, &x->lock);
        x->q[(x->head + x->count) % XT_QUEUE] = b;
        x->count++;
        pthread_cond_broadcast(&x->cond);
        pthread_mutex_unlock(&x->lock);
    }
    pthread_mutex_lock(&x->lock);
    x->done = true;
    pthread_cond_broadcast(&x->cond);
    pthread_mutex_unlock(&x->lock);
    pthread_join(th, NULL);
    return n;
}

static void xt_bench(void)
{
    static uint8_t mem[NSEGS_MSG][FAN_SEG];
    struct xt x;
    double wall[MAX_REPS], cpu[MAX_REPS];

    memset(&x, 0, sizeof(x));
    pthread_mutex_init(&x.lock, NULL);
    pthread_cond_init(&x.cond, NULL);
    CHECK(zbuf_create(&x.master) == 0, "zbuf_create", -ENOMEM);
    for (int k = 0; k < NSEGS_MSG; k++)
        CHECK(zbuf_append_buf(x.master, mem[k], FAN_SEG, xt_release, &x) == 0, "zbuf_append_buf",
              -ENOMEM);
    size_t n = opt.ops ? opt.ops : 0;
    if (n == 0) { /* calibrate on wall time, like the other parts */
        n = 4096;
        for (;;) {
            uint64_t t0 = wall_ns();
            run_xthread(&x, n);
            uint64_t dt = wall_ns() - t0;
            if ((double)dt >= opt.target_ns / 4 || n >= MAX_OPS * 4)
                break;
            n *= 2;
        }
    }
    n = (n + XT_BATCH - 1) / XT_BATCH * XT_BATCH;
    for (int rep = 0; rep < opt.reps; rep++) {
        uint64_t c0 = cpu_ns(), t0 = wall_ns();
        run_xthread(&x, n);
        wall[rep] = (double)(wall_ns() - t0) / (double)n;
        cpu[rep] = (double)(cpu_ns() - c0) / (double)n;
    }
    CHECK(x.releases == 0, "cross-thread: a buffer released while the master holds it",
          x.releases);
    zbuf_delete(x.master);
    CHECK(x.releases == NSEGS_MSG, "cross-thread: master's release callbacks", x.releases);
    pthread_cond_destroy(&x.cond);
    pthread_mutex_destroy(&x.lock);

    double w = median(wall, opt.reps), c = median(cpu, opt.reps);
    printf("### Cross-thread: dup on one thread, delete on another\n\n");
    printf("A master zbuf of four 4 KiB enrolled buffers; one thread dups it %zu times, a "
           "second thread deletes the dups (handed over %d at a time). Every reference is "
           "taken on one thread and dropped on the other. Median over %d repetitions.\n\n",
           n, XT_BATCH, opt.reps);
    printf("| wall ns per message | CPU ns per message (both threads) |\n|---:|---:|\n");
    printf("| %.1f (±%.0f%%) | %.1f (±%.0f%%) |\n\n", w, spread_pct(wall, opt.reps, w) / 2, c,
           spread_pct(cpu, opt.reps, c) / 2);
    if (opt.tsv) {
        printf("RESULT\txthread\t%d\twall\t%.2f\t0\t0\n", FAN_SEG, w);
        printf("RESULT\txthread\t%d\tcpu\t%.2f\t0\t0\n", FAN_SEG, c);
    }
}

/* ------------------------------------------------ part 4: scaling */

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
    CHECK(f->mem != NULL, "malloc", -ENOMEM);
    memset(f->mem, 0xa5, NSEGS_SCALE * seg); /* fault the pages in, untimed */
    rc = zbuf_create(&f->master);
    CHECK(rc == 0, "zbuf_create", rc);
    for (int k = 0; k < NSEGS_SCALE; k++) {
        rc = zbuf_append_buf(f->master, f->mem + (size_t)k * seg, seg, NULL, NULL);
        CHECK(rc == 0, "zbuf_append_buf", rc);
    }
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
        CHECK(rc == 0, "zbuf_dup", rc);
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
        CHECK(rc == 0, scale_name[op], rc);
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
        CHECK(rc == 0, "zbuf_dup (verify)", rc);
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
        CHECK(rc == 0 && zbuf_check(z) == 0, scale_name[op], rc);
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
        batch[op] = want < 1000 ? 1000 : want > MAX_OPS ? MAX_OPS : (size_t)want;
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

/* ------------------------------------------------ part 5: descriptor sizes */

static void sizes_report(void)
{
    printf("### Descriptor sizes (private, from lib/internal.h)\n\n");
    printf("| struct | bytes | target |\n|---|---:|---|\n");
    printf("| zbuf_seg (segment descriptor) | %zu | <= 64: %s |\n", sizeof(struct zbuf_seg),
           sizeof(struct zbuf_seg) <= 64 ? "ok" : "TOO BIG");
    printf("| zbuf (zbuf header) | %zu | |\n", sizeof(struct zbuf));
    printf("| zbuf_buf (buffer header) | %zu | <= 64 |\n", sizeof(struct zbuf_buf));
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
    if (opt.ops)
        printf("- %d repetitions of %zu operations per measurement", opt.reps, opt.ops);
    else
        printf("- %d repetitions per measurement, batches of about %.0f ms", opt.reps,
               opt.target_ns / 1e6);
    printf(", timed with %s\n\n",
           opt.wall ? "the monotonic clock" : "the thread's CPU clock (CLOCK_THREAD_CPUTIME_ID)");
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: bench_core [--reps N] [--target-ms MS] [--ops N] [--quick] [--seg BYTES]\n"
            "                  [--only PART] [--impl NAME] [--tsv] [--wall]\n"
            "  --reps N        repetitions of every batch (default 7, at most %d)\n"
            "  --target-ms MS  wanted duration of one batch (default 50)\n"
            "  --ops N         exactly N operations per batch, no warm-up (for callgrind)\n"
            "  --quick         3 repetitions of 10 ms batches (a smoke run)\n"
            "  --seg BYTES     the protocol workload at this segment size only\n"
            "  --only PART     msg (the workload), fanout, xthread or scaling\n"
            "  --impl NAME     zbuf, vxworks, evbuffer or copy: only this one in msg and fanout\n"
            "  --tsv           also print 'RESULT' lines for scripts\n"
            "  --wall          time with the monotonic clock (default: thread CPU time)\n",
            MAX_REPS);
}

static bool one_of(const char *v, const char *const *names, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (strcmp(v, names[k]) == 0)
            return true;
    return false;
}

static void parse_args(int argc, char **argv)
{
    static const char *const parts[] = {"msg", "fanout", "xthread", "scaling"};
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
        } else if (strcmp(a, "--ops") == 0 && v != NULL) {
            opt.ops = strtoul(v, NULL, 0);
            i++;
        } else if (strcmp(a, "--seg") == 0 && v != NULL) {
            opt.only_seg = strtoul(v, NULL, 0);
            i++;
        } else if (strcmp(a, "--only") == 0 && v != NULL) {
            opt.only = v;
            i++;
        } else if (strcmp(a, "--impl") == 0 && v != NULL) {
            opt.impl = v;
            i++;
        } else if (strcmp(a, "--tsv") == 0) {
            opt.tsv = true;
        } else if (strcmp(a, "--wall") == 0) {
            opt.wall = true;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else {
            usage(stderr);
            exit(2);
        }
    }
    if ((opt.only != NULL && !one_of(opt.only, parts, 4)) ||
        (opt.impl != NULL && !one_of(opt.impl, impl_name, N_IMPL)) || opt.reps < 1 ||
        opt.reps > MAX_REPS || opt.target_ns <= 0) {
        usage(stderr);
        exit(2);
    }
    if (opt.only_seg != 0) {
        bool ok = false;
        for (size_t k = 0; k < N_MSG_SIZES; k++)
            ok |= msg_sizes[k] == opt.only_seg;
        if (!ok) {
            fprintf(stderr, "bench_core: --seg must be one of 256, 4096, 65536, 1048576\n");
            exit(2);
        }
    }
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    machine_report();
    sizes_report();
    /* The cross-thread part first, on a fresh heap: its producer and
     * consumer allocate and free descriptors that share cache lines, and
     * which of them each thread gets depends on the allocation history the
     * other parts leave behind (measured: it moved this part by up to 50 %,
     * either way, for the same library). */
    if (part_wanted("xthread"))
        xt_bench();
    if (part_wanted("msg"))
        msg_bench();
    if (part_wanted("fanout"))
        fan_bench();
    if (part_wanted("scaling"))
        scale_bench();
    zbuf_thread_cache_flush();
    fprintf(stderr, "(checksum %" PRIu64 ")\n", (uint64_t)sink);
    return 0;
}
