/* SPDX-License-Identifier: MIT */
/*
 * Allocation-failure injection.
 *
 * A counting allocator installed with zbuf_set_allocator() fails exactly the
 * N-th allocation of one call; the descriptor caches are switched off
 * (zbuf__cache_set_enabled(false)) so that every descriptor reaches it.  For
 * every call that can allocate, N runs 1, 2, ... until the call succeeds.
 * Each failing run must return -ENOMEM and leave everything as it was: the
 * same bytes in the same segments of every zbuf, the same live counts, no
 * block leaked at the allocator, no release callback run, and the call must
 * then succeed with allocation allowed.  Calls that must never allocate are
 * checked to make no allocation at all.
 *
 * The allocator also checks the sized-free contract: every free gets the
 * size its block was allocated with.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "support.h"

/* ------------------------------------------------------------ allocator */

struct block {
    void *p;
    size_t size;
};

static struct {
    long calls;     /* allocations asked since arming */
    long fail_at;   /* fail this one (1-based); 0: never */
    long injected;  /* failures injected since arming */
    long live;      /* blocks not yet freed */
    long bad_frees; /* frees of unknown blocks or with the wrong size */
    struct block *blocks;
    size_t nblocks, cap;
} fa;

static void *fa_alloc(void *ctx, size_t size)
{
    (void)ctx;
    if (++fa.calls == fa.fail_at) {
        fa.injected++;
        return NULL;
    }
    void *p = malloc(size);
    if (!p)
        return NULL;
    if (fa.nblocks == fa.cap) {
        fa.cap = fa.cap ? 2 * fa.cap : 256;
        fa.blocks = realloc(fa.blocks, fa.cap * sizeof *fa.blocks);
        if (!fa.blocks)
            abort();
    }
    fa.blocks[fa.nblocks++] = (struct block){p, size};
    fa.live++;
    return p;
}

static void fa_free(void *ctx, void *p, size_t size)
{
    (void)ctx;
    for (size_t i = 0; i < fa.nblocks; i++) {
        if (fa.blocks[i].p == p) {
            if (fa.blocks[i].size != size)
                fa.bad_frees++;
            fa.blocks[i] = fa.blocks[--fa.nblocks];
            fa.live--;
            free(p);
            return;
        }
    }
    fa.bad_frees++; /* not ours: leak it rather than crash */
}

static const zbuf_allocator_t fa_allocator = {fa_alloc, fa_free, NULL};

static void fa_install(void)
{
    memset(&fa, 0, sizeof fa);
    zbuf__cache_set_enabled(false);
    cr_assert_eq(zbuf_set_allocator(&fa_allocator), 0, "could not install the test allocator");
}

static void fa_uninstall(void)
{
    cr_assert_eq(fa.live, 0, "%ld blocks still allocated at the end", fa.live);
    cr_assert_eq(fa.bad_frees, 0, "%ld frees with a wrong size or an unknown block", fa.bad_frees);
    cr_assert_eq(zbuf_set_allocator(NULL), 0, "could not restore the default allocator");
    zbuf__cache_set_enabled(true);
    free(fa.blocks);
    fa.blocks = NULL;
}

/* ------------------------------------------------------------ fixture */

#define NZ 3
#define MAXSEG 16

/* z[0] = A(16) C(16) B(16): caller buffers A and B around a copied C.
 * z[1] = dup of z[0] bytes 8..40: shares A, C and B.
 * z[2] = two private copies of 10 bytes each. */
struct fx {
    zbuf_t *z[NZ];
    zbuf_t *out;
    zbuf_buf_t *h;
    zbuf_pool_t *pool;
    uint8_t a[16], b[16], c[16], d[20], data[64];
    int cb_a, cb_b, cb_new;
    bool enrolled; /* the call under test enrolled data with cb_new */
    void *p;
    struct iovec iov[2];
    int iovcnt;
    int fd;
};

static void fx_base(struct fx *f)
{
    memset(f, 0, sizeof *f);
    f->fd = -1;
    for (int i = 0; i < 16; i++) {
        f->a[i] = (uint8_t)('a' + i);
        f->c[i] = (uint8_t)('A' + i);
        f->b[i] = (uint8_t)('0' + i);
    }
    for (int i = 0; i < 20; i++)
        f->d[i] = (uint8_t)(0x80 + i);
    for (int i = 0; i < 64; i++)
        f->data[i] = (uint8_t)(0xC0 ^ i);
    for (int i = 0; i < NZ; i++)
        cr_assert_eq(zbuf_create(&f->z[i]), 0);
    cr_assert_eq(zbuf_append_buf(f->z[0], f->a, 16, zt_count_release, &f->cb_a), 0);
    cr_assert_eq(zbuf_append_copy(f->z[0], f->c, 16), 0);
    cr_assert_eq(zbuf_append_buf(f->z[0], f->b, 16, zt_count_release, &f->cb_b), 0);
    zbuf_delete(f->z[1]);
    cr_assert_eq(zbuf_dup(f->z[0], 8, 32, &f->z[1]), 0);
    cr_assert_eq(zbuf_append_copy(f->z[2], f->d, 10), 0);
    cr_assert_eq(zbuf_append_copy(f->z[2], f->d + 10, 10), 0);
}

static void fx_destroy(struct fx *f)
{
    for (int i = 0; i < NZ; i++)
        cr_assert_eq(zbuf_delete(f->z[i]), 0);
    cr_assert_eq(zbuf_delete(f->out), 0);
    zbuf_buf_unref(f->h);
    zbuf_pool_delete(f->pool);
    cr_assert_eq(f->cb_a, 1, "buffer A released %d times", f->cb_a);
    cr_assert_eq(f->cb_b, 1, "buffer B released %d times", f->cb_b);
    cr_assert_eq(f->cb_new, f->enrolled ? 1 : 0, "the new buffer released %d times", f->cb_new);
    if (f->fd >= 0)
        close(f->fd);
}

/* Expected content of a zbuf: compare with a list of (bytes, length). */
static void expect_bytes(const zbuf_t *z, const void *want, size_t n, const char *what)
{
    uint8_t got[512];
    cr_assert_leq(n, sizeof got);
    zt_check(z);
    cr_assert_eq(zbuf_length(z), n, "%s: length %zu, expected %zu", what, zbuf_length(z), n);
    cr_assert_eq(zbuf_copyout(z, 0, got, ZBUF_TO_END), (ssize_t)n, "%s: copyout", what);
    cr_assert_arr_eq(got, want, n, "%s: content differs", what);
}

/* The bytes of z[0] as built. */
static size_t base0(const struct fx *f, uint8_t *out)
{
    memcpy(out, f->a, 16);
    memcpy(out + 16, f->c, 16);
    memcpy(out + 32, f->b, 16);
    return 48;
}

/* ------------------------------------------------------------ snapshots */

struct shot {
    size_t len[NZ], nseg[NZ];
    zbuf_seg_t *seg[NZ][MAXSEG];
    size_t slen[NZ][MAXSEG];
    void *sdata[NZ][MAXSEG];
    uint8_t bytes[NZ][256];
    unsigned hrefs;
    size_t pool_avail;
    zbuf_stats_t st; /* taken first */
    uint64_t self;   /* bytes the snapshot's own copyouts counted */
    long live;
    int cb_a, cb_b, cb_new;
};

static void shot_take(const struct fx *f, struct shot *s)
{
    memset(s, 0, sizeof *s);
    zbuf_stats_get(&s->st);
    for (int i = 0; i < NZ; i++) {
        zbuf_t *z = f->z[i];
        if (!z)
            continue;
        s->len[i] = zbuf_length(z);
        s->nseg[i] = zbuf_seg_count(z);
        cr_assert_leq(s->nseg[i], MAXSEG);
        cr_assert_leq(s->len[i], sizeof s->bytes[i]);
        size_t k = 0;
        for (zbuf_seg_t *g = zbuf_seg_first(z); g; g = zbuf_seg_next(z, g), k++) {
            s->seg[i][k] = g;
            s->slen[i][k] = zbuf_seg_length(z, g);
            s->sdata[i][k] = zbuf_seg_data(z, g);
        }
        zbuf_copyout(z, 0, s->bytes[i], ZBUF_TO_END);
    }
    s->hrefs = f->h ? zbuf_buf_refs(f->h) : 0;
    s->pool_avail = f->pool ? zbuf_pool_available(f->pool) : 0;
    zbuf_stats_t after;
    zbuf_stats_get(&after);
    s->self = after.bytes_copied - s->st.bytes_copied;
    s->live = fa.live;
    s->cb_a = f->cb_a;
    s->cb_b = f->cb_b;
    s->cb_new = f->cb_new;
}

static void shot_same(const struct fx *f, const struct shot *s, const char *what, long n)
{
    struct shot now;
    shot_take(f, &now);
    for (int i = 0; i < NZ; i++) {
        if (!f->z[i])
            continue;
        cr_assert_eq(zbuf_check(f->z[i]), 0, "%s, failing allocation %ld: zbuf %d inconsistent",
                     what, n, i);
        cr_assert(now.len[i] == s->len[i] && now.nseg[i] == s->nseg[i],
                  "%s, failing allocation %ld: zbuf %d went from %zu bytes/%zu segments to "
                  "%zu/%zu",
                  what, n, i, s->len[i], s->nseg[i], now.len[i], now.nseg[i]);
        for (size_t k = 0; k < s->nseg[i]; k++)
            cr_assert(now.seg[i][k] == s->seg[i][k] && now.slen[i][k] == s->slen[i][k] &&
                          now.sdata[i][k] == s->sdata[i][k],
                      "%s, failing allocation %ld: segment %zu of zbuf %d changed", what, n, k, i);
        cr_assert_arr_eq(now.bytes[i], s->bytes[i], s->len[i],
                         "%s, failing allocation %ld: bytes of zbuf %d changed", what, n, i);
    }
    cr_assert_eq(now.hrefs, s->hrefs, "%s, failing allocation %ld: buffer references %u -> %u",
                 what, n, s->hrefs, now.hrefs);
    cr_assert_eq(now.pool_avail, s->pool_avail, "%s, failing allocation %ld: pool changed", what,
                 n);
    cr_assert(now.st.live_zbufs == s->st.live_zbufs && now.st.live_segs == s->st.live_segs &&
                  now.st.live_bufs == s->st.live_bufs && now.st.live_pools == s->st.live_pools,
              "%s, failing allocation %ld: live counts changed (zbufs %+lld, segments %+lld, "
              "buffers %+lld, pools %+lld)",
              what, n, (long long)(now.st.live_zbufs - s->st.live_zbufs),
              (long long)(now.st.live_segs - s->st.live_segs),
              (long long)(now.st.live_bufs - s->st.live_bufs),
              (long long)(now.st.live_pools - s->st.live_pools));
    cr_assert_eq(now.st.bytes_copied, s->st.bytes_copied + s->self,
                 "%s, failing allocation %ld: counted copied bytes", what, n);
    cr_assert_eq(now.live, s->live, "%s, failing allocation %ld: %+ld blocks leaked", what, n,
                 now.live - s->live);
    cr_assert(now.cb_a == s->cb_a && now.cb_b == s->cb_b && now.cb_new == s->cb_new,
              "%s, failing allocation %ld: a release callback ran", what, n);
    cr_assert_null(f->out, "%s, failing allocation %ld: a result was returned", what, n);
}

/* ------------------------------------------------------------ the driver */

struct fault_case {
    const char *name;
    void (*build)(struct fx *f); /* NULL: fx_base */
    int (*call)(struct fx *f);   /* the call under test; >= 0 on success */
    void (*check)(struct fx *f); /* after success: the result is right */
};

/*
 * Fail allocation 1, 2, ... of the call until it succeeds.  Returns the
 * number of allocation points (failing runs).  The allocations the call
 * makes must reach the allocator as counted by zbuf_stats_t::allocs.
 */
static long run_case(const struct fault_case *c)
{
    long failures = 0;
    fa_install();
    for (long n = 1;; n++) {
        cr_assert_lt(n, 64, "%s: still failing after 64 allocations", c->name);
        struct fx f;
        (c->build ? c->build : fx_base)(&f);
        struct shot s;
        shot_take(&f, &s);
        fa.calls = 0;
        fa.injected = 0;
        fa.fail_at = n;
        int rc = c->call(&f);
        fa.fail_at = 0;
        zbuf_stats_t st;
        zbuf_stats_get(&st);
        cr_assert_eq(st.allocs - s.st.allocs, (uint64_t)fa.calls,
                     "%s: stats count %llu allocations, the allocator saw %ld", c->name,
                     (unsigned long long)(st.allocs - s.st.allocs), fa.calls);
        if (fa.injected == 0) {
            cr_assert_geq(rc, 0, "%s: failed with %d (%s) although no allocation failed", c->name,
                          rc, zbuf_strerror(rc));
            c->check(&f);
            fx_destroy(&f);
            break;
        }
        cr_assert_eq(rc, -ENOMEM, "%s: allocation %ld failed, but the call returned %d (%s)",
                     c->name, n, rc, rc < 0 ? zbuf_strerror(rc) : "success");
        shot_same(&f, &s, c->name, n);
        failures++;
        /* Nothing changed, so the same call now works. */
        rc = c->call(&f);
        cr_assert_geq(rc, 0, "%s: after allocation %ld failed, the retry failed with %d (%s)",
                      c->name, n, rc, zbuf_strerror(rc));
        c->check(&f);
        fx_destroy(&f);
    }
    fa_uninstall();
    cr_log_info("%s: failed at each of %ld allocations", c->name, failures);
    return failures;
}

#define EXPECT_ALLOCATES(kase)                                                                     \
    cr_assert_gt(run_case(&(kase)), 0, "%s: made no allocation", (kase).name)
#define EXPECT_NO_ALLOCATION(kase)                                                                 \
    cr_assert_eq(run_case(&(kase)), 0, "%s: allocated memory", (kase).name)

ZT_SUITE(faults);

/* ------------------------------------------------------------ creation */

static int call_create(struct fx *f)
{
    return zbuf_create(&f->out);
}

static void check_create(struct fx *f)
{
    cr_assert_not_null(f->out);
    expect_bytes(f->out, "", 0, "new zbuf");
}

Test(faults, create_fails_cleanly)
{
    struct fault_case c = {"zbuf_create", NULL, call_create, check_create};
    EXPECT_ALLOCATES(c);
}

/* ------------------------------------------------------------ inserting */

static int call_insert_buf_mid(struct fx *f)
{
    int rc = zbuf_insert_buf(f->z[0], 4, f->data, 8, zt_count_release, &f->cb_new, NULL);
    f->enrolled = rc == 0;
    return rc;
}

static void check_insert_buf_mid(struct fx *f)
{
    uint8_t want[64];
    memcpy(want, f->a, 4);
    memcpy(want + 4, f->data, 8);
    memcpy(want + 12, f->a + 4, 12);
    memcpy(want + 24, f->c, 16);
    memcpy(want + 40, f->b, 16);
    expect_bytes(f->z[0], want, 56, "insert_buf in a segment");
    cr_assert_eq(f->cb_new, 0);
}

Test(faults, insert_buf_inside_a_segment_fails_cleanly)
{
    struct fault_case c = {"zbuf_insert_buf(middle)", NULL, call_insert_buf_mid,
                           check_insert_buf_mid};
    EXPECT_ALLOCATES(c);
}

/* The two-word callback: counts like zt_count_release(), checks its second word. */
static void count_release2(void *data, size_t size, void *arg, void *arg2)
{
    zt_count_release(data, size, arg);
    if (arg2 != (void *)0x2222)
        ++*(int *)arg; /* a wrong second word counts twice: the test sees it */
}

static int call_insert_buf2_mid(struct fx *f)
{
    int rc = zbuf_insert_buf2(f->z[0], 4, f->data, 8, count_release2, &f->cb_new, (void *)0x2222,
                              NULL);
    f->enrolled = rc == 0;
    return rc;
}

Test(faults, insert_buf2_inside_a_segment_fails_cleanly)
{
    struct fault_case c = {"zbuf_insert_buf2(middle)", NULL, call_insert_buf2_mid,
                           check_insert_buf_mid};
    EXPECT_ALLOCATES(c);
}

static int call_insert_buf_edge(struct fx *f)
{
    int rc = zbuf_insert_buf(f->z[0], 16, f->data, 8, zt_count_release, &f->cb_new, NULL);
    f->enrolled = rc == 0;
    return rc;
}

static void check_insert_buf_edge(struct fx *f)
{
    uint8_t want[64];
    memcpy(want, f->a, 16);
    memcpy(want + 16, f->data, 8);
    memcpy(want + 24, f->c, 16);
    memcpy(want + 40, f->b, 16);
    expect_bytes(f->z[0], want, 56, "insert_buf at a boundary");
}

Test(faults, insert_buf_at_a_boundary_fails_cleanly)
{
    struct fault_case c = {"zbuf_insert_buf(boundary)", NULL, call_insert_buf_edge,
                           check_insert_buf_edge};
    EXPECT_ALLOCATES(c);
}

static int call_append_buf(struct fx *f)
{
    int rc = zbuf_append_buf(f->z[0], f->data, 8, zt_count_release, &f->cb_new);
    f->enrolled = rc == 0;
    return rc;
}

static void check_append_buf(struct fx *f)
{
    uint8_t want[64];
    size_t n = base0(f, want);
    memcpy(want + n, f->data, 8);
    expect_bytes(f->z[0], want, n + 8, "append_buf");
}

static int call_prepend_buf(struct fx *f)
{
    int rc = zbuf_prepend_buf(f->z[0], f->data, 8, zt_count_release, &f->cb_new);
    f->enrolled = rc == 0;
    return rc;
}

static void check_prepend_buf(struct fx *f)
{
    uint8_t want[64];
    memcpy(want, f->data, 8);
    size_t n = base0(f, want + 8);
    expect_bytes(f->z[0], want, n + 8, "prepend_buf");
}

Test(faults, append_and_prepend_buf_fail_cleanly)
{
    struct fault_case a = {"zbuf_append_buf", NULL, call_append_buf, check_append_buf};
    struct fault_case p = {"zbuf_prepend_buf", NULL, call_prepend_buf, check_prepend_buf};
    EXPECT_ALLOCATES(a);
    EXPECT_ALLOCATES(p);
}

static void build_with_handle(struct fx *f)
{
    fx_base(f);
    cr_assert_eq(zbuf_buf_alloc(32, &f->h), 0);
    memcpy(zbuf_buf_data(f->h), f->data, 32);
}

static int call_insert_ref(struct fx *f)
{
    return zbuf_insert_ref(f->z[0], 20, f->h, 4, 10, NULL);
}

static void check_insert_ref(struct fx *f)
{
    uint8_t want[64];
    memcpy(want, f->a, 16);
    memcpy(want + 16, f->c, 4);
    memcpy(want + 20, f->data + 4, 10);
    memcpy(want + 30, f->c + 4, 12);
    memcpy(want + 42, f->b, 16);
    expect_bytes(f->z[0], want, 58, "insert_ref");
    cr_assert_eq(zbuf_buf_refs(f->h), 2, "the zbuf holds one reference, the test one");
}

static int call_append_ref(struct fx *f)
{
    return zbuf_append_ref(f->z[2], f->h, 0, 32);
}

static void check_append_ref(struct fx *f)
{
    uint8_t want[64];
    memcpy(want, f->d, 20);
    memcpy(want + 20, f->data, 32);
    expect_bytes(f->z[2], want, 52, "append_ref");
}

Test(faults, insert_ref_fails_cleanly)
{
    struct fault_case c = {"zbuf_insert_ref", build_with_handle, call_insert_ref, check_insert_ref};
    struct fault_case a = {"zbuf_append_ref", build_with_handle, call_append_ref, check_append_ref};
    EXPECT_ALLOCATES(c);
    EXPECT_ALLOCATES(a);
}

static int call_insert_copy(struct fx *f)
{
    return zbuf_insert_copy(f->z[0], 40, f->data, 12, NULL);
}

static void check_insert_copy(struct fx *f)
{
    uint8_t want[64];
    base0(f, want);
    memmove(want + 52, want + 40, 8);
    memcpy(want + 40, f->data, 12);
    expect_bytes(f->z[0], want, 60, "insert_copy");
}

static int call_append_copy(struct fx *f)
{
    return zbuf_append_copy(f->z[1], f->data, 12);
}

static void check_append_copy(struct fx *f)
{
    uint8_t want[64], all[48];
    base0(f, all);
    memcpy(want, all + 8, 32);
    memcpy(want + 32, f->data, 12);
    expect_bytes(f->z[1], want, 44, "append_copy");
}

static int call_prepend_copy(struct fx *f)
{
    return zbuf_prepend_copy(f->z[2], f->data, 12);
}

static void check_prepend_copy(struct fx *f)
{
    uint8_t want[64];
    memcpy(want, f->data, 12);
    memcpy(want + 12, f->d, 20);
    expect_bytes(f->z[2], want, 32, "prepend_copy");
}

Test(faults, insert_copy_fails_cleanly)
{
    struct fault_case c = {"zbuf_insert_copy", NULL, call_insert_copy, check_insert_copy};
    struct fault_case a = {"zbuf_append_copy", NULL, call_append_copy, check_append_copy};
    struct fault_case p = {"zbuf_prepend_copy", NULL, call_prepend_copy, check_prepend_copy};
    EXPECT_ALLOCATES(c);
    EXPECT_ALLOCATES(a);
    EXPECT_ALLOCATES(p);
}

static int call_insert_zbuf(struct fx *f)
{
    int rc = zbuf_insert(f->z[0], 20, f->z[2], NULL);
    if (rc == 0)
        f->z[2] = NULL; /* consumed */
    return rc;
}

static void check_insert_zbuf(struct fx *f)
{
    uint8_t want[80];
    base0(f, want);
    memmove(want + 40, want + 20, 28);
    memcpy(want + 20, f->d, 20);
    expect_bytes(f->z[0], want, 68, "insert of a zbuf");
}

Test(faults, insert_of_a_zbuf_inside_a_segment_fails_cleanly)
{
    struct fault_case c = {"zbuf_insert", NULL, call_insert_zbuf, check_insert_zbuf};
    EXPECT_ALLOCATES(c);
}

static int call_append_zbuf(struct fx *f)
{
    int rc = zbuf_append(f->z[0], f->z[2]);
    if (rc == 0)
        f->z[2] = NULL;
    return rc;
}

static void check_append_zbuf(struct fx *f)
{
    uint8_t want[80];
    size_t n = base0(f, want);
    memcpy(want + n, f->d, 20);
    expect_bytes(f->z[0], want, n + 20, "append of a zbuf");
}

Test(faults, append_of_a_zbuf_never_allocates)
{
    struct fault_case c = {"zbuf_append", NULL, call_append_zbuf, check_append_zbuf};
    EXPECT_NO_ALLOCATION(c);
}

/* ------------------------------------------------------------ rearranging */

static int call_dup(struct fx *f)
{
    return zbuf_dup(f->z[0], 4, 40, &f->out);
}

static void check_dup(struct fx *f)
{
    uint8_t all[48];
    base0(f, all);
    expect_bytes(f->out, all + 4, 40, "dup");
    expect_bytes(f->z[0], all, 48, "dup source");
}

static int call_dup_whole(struct fx *f)
{
    return zbuf_dup(f->z[1], 0, ZBUF_TO_END, &f->out);
}

static void check_dup_whole(struct fx *f)
{
    uint8_t all[48];
    base0(f, all);
    expect_bytes(f->out, all + 8, 32, "dup of a whole zbuf");
}

Test(faults, dup_fails_cleanly)
{
    struct fault_case c = {"zbuf_dup(range)", NULL, call_dup, check_dup};
    struct fault_case w = {"zbuf_dup(whole)", NULL, call_dup_whole, check_dup_whole};
    EXPECT_ALLOCATES(c);
    EXPECT_ALLOCATES(w);
}

static int call_split(struct fx *f)
{
    return zbuf_split(f->z[0], 20, &f->out);
}

static void check_split(struct fx *f)
{
    uint8_t all[48];
    base0(f, all);
    expect_bytes(f->z[0], all, 20, "split head");
    expect_bytes(f->out, all + 20, 28, "split tail");
}

static int call_split_boundary(struct fx *f)
{
    return zbuf_split(f->z[0], 32, &f->out);
}

static void check_split_boundary(struct fx *f)
{
    uint8_t all[48];
    base0(f, all);
    expect_bytes(f->z[0], all, 32, "split head");
    expect_bytes(f->out, all + 32, 16, "split tail");
}

static int call_split_head(struct fx *f)
{
    return zbuf_split_head(f->z[1], 5, &f->out);
}

static void check_split_head(struct fx *f)
{
    uint8_t all[48];
    base0(f, all);
    expect_bytes(f->out, all + 8, 5, "split_head head");
    expect_bytes(f->z[1], all + 13, 27, "split_head rest");
}

Test(faults, split_fails_cleanly)
{
    struct fault_case c = {"zbuf_split(inside)", NULL, call_split, check_split};
    struct fault_case b = {"zbuf_split(boundary)", NULL, call_split_boundary, check_split_boundary};
    struct fault_case h = {"zbuf_split_head", NULL, call_split_head, check_split_head};
    EXPECT_ALLOCATES(c);
    EXPECT_ALLOCATES(b);
    EXPECT_ALLOCATES(h);
}

static int call_cut_inside(struct fx *f)
{
    return zbuf_cut(f->z[0], 18, 4, NULL);
}

static void check_cut_inside(struct fx *f)
{
    uint8_t all[48];
    base0(f, all);
    memmove(all + 18, all + 22, 26);
    expect_bytes(f->z[0], all, 44, "cut inside a segment");
    cr_assert_eq(zbuf_seg_count(f->z[0]), 4, "the cut segment is split in two");
}

Test(faults, cut_inside_a_segment_fails_cleanly)
{
    struct fault_case c = {"zbuf_cut(inside)", NULL, call_cut_inside, check_cut_inside};
    EXPECT_ALLOCATES(c);
}

/* The `_at` calls: the same checked paths, reached with a location relative
 * to a segment and a count past the end (z[0]'s segments are 16 bytes each:
 * its second segment starts at byte 16). */
static int call_dup_at(struct fx *f)
{
    return zbuf_dup_at(f->z[0], zbuf_seg_next(f->z[0], zbuf_seg_first(f->z[0])), -12, 1000,
                       &f->out);
}

static int call_split_at(struct fx *f)
{
    return zbuf_split_at(f->z[0], zbuf_seg_next(f->z[0], zbuf_seg_first(f->z[0])), 4, &f->out);
}

static int call_cut_at_inside(struct fx *f)
{
    return zbuf_cut_at(f->z[0], zbuf_seg_next(f->z[0], zbuf_seg_first(f->z[0])), 2, 4, NULL);
}

static void check_dup_at(struct fx *f)
{
    uint8_t all[48];
    base0(f, all);
    expect_bytes(f->out, all + 4, 44, "dup_at");
    expect_bytes(f->z[0], all, 48, "dup_at source");
}

Test(faults, at_calls_fail_cleanly)
{
    struct fault_case d = {"zbuf_dup_at", NULL, call_dup_at, check_dup_at};
    struct fault_case s = {"zbuf_split_at", NULL, call_split_at, check_split};
    struct fault_case c = {"zbuf_cut_at(inside)", NULL, call_cut_at_inside, check_cut_inside};
    EXPECT_ALLOCATES(d);
    EXPECT_ALLOCATES(s);
    EXPECT_ALLOCATES(c);
}

static int call_cut_across(struct fx *f)
{
    return zbuf_cut(f->z[0], 10, 30, NULL);
}

static void check_cut_across(struct fx *f)
{
    uint8_t all[48];
    base0(f, all);
    memmove(all + 10, all + 40, 8);
    expect_bytes(f->z[0], all, 18, "cut across segments");
}

static int call_cut_all_of_a(struct fx *f)
{
    return zbuf_cut(f->z[0], 0, 16, NULL);
}

static void check_cut_all_of_a(struct fx *f)
{
    uint8_t all[48];
    base0(f, all);
    expect_bytes(f->z[0], all + 16, 32, "cut of a whole segment");
    cr_assert_eq(f->cb_a, 0, "buffer A is still shared with zbuf 1");
}

Test(faults, cut_that_splits_no_segment_never_allocates)
{
    struct fault_case c = {"zbuf_cut(across)", NULL, call_cut_across, check_cut_across};
    struct fault_case w = {"zbuf_cut(whole segment)", NULL, call_cut_all_of_a, check_cut_all_of_a};
    EXPECT_NO_ALLOCATION(c);
    EXPECT_NO_ALLOCATION(w);
}

static int call_delete(struct fx *f)
{
    int rc = zbuf_delete(f->z[1]);
    f->z[1] = NULL;
    return rc;
}

static void check_delete(struct fx *f)
{
    (void)f;
}

Test(faults, delete_never_allocates)
{
    struct fault_case c = {"zbuf_delete", NULL, call_delete, check_delete};
    EXPECT_NO_ALLOCATION(c);
}

/* ------------------------------------------------------------ space */

static int call_prepend_space(struct fx *f)
{
    return zbuf_prepend_space(f->z[0], 20, &f->p);
}

static void check_prepend_space(struct fx *f)
{
    uint8_t want[80];
    memset(f->p, 'h', 20);
    memset(want, 'h', 20);
    base0(f, want + 20);
    expect_bytes(f->z[0], want, 68, "prepend_space");
}

static int call_append_space(struct fx *f)
{
    return zbuf_append_space(f->z[0], 20, &f->p);
}

static void check_append_space(struct fx *f)
{
    uint8_t want[80];
    memset(f->p, 't', 20);
    size_t n = base0(f, want);
    memset(want + n, 't', 20);
    expect_bytes(f->z[0], want, n + 20, "append_space");
}

Test(faults, prepend_and_append_space_fail_cleanly)
{
    struct fault_case p = {"zbuf_prepend_space", NULL, call_prepend_space, check_prepend_space};
    struct fault_case a = {"zbuf_append_space", NULL, call_append_space, check_append_space};
    EXPECT_ALLOCATES(p);
    EXPECT_ALLOCATES(a);
}

static int call_reserve(struct fx *f)
{
    return zbuf_reserve(f->z[2], 100, f->iov, &f->iovcnt);
}

static void check_reserve(struct fx *f)
{
    size_t total = 0;
    cr_assert(f->iovcnt == 1 || f->iovcnt == 2);
    for (int i = 0; i < f->iovcnt; i++)
        total += f->iov[i].iov_len;
    cr_assert_geq(total, 100);
    expect_bytes(f->z[2], f->d, 20, "reserve leaves the bytes alone");
}

/* z[2] with a reservation of 600 bytes in a fresh buffer, filled with 'r'. */
static void build_reserved(struct fx *f)
{
    fx_base(f);
    cr_assert_eq(zbuf_reserve(f->z[2], 600, f->iov, &f->iovcnt), 0);
    for (int i = 0; i < f->iovcnt; i++)
        memset(f->iov[i].iov_base, 'r', f->iov[i].iov_len);
}

static int call_commit(struct fx *f)
{
    return zbuf_commit(f->z[2], 300);
}

static void check_commit(struct fx *f)
{
    uint8_t want[320];
    memcpy(want, f->d, 20);
    memset(want + 20, 'r', 300);
    expect_bytes(f->z[2], want, 320, "commit");
}

Test(faults, reserve_and_commit_fail_cleanly)
{
    struct fault_case r = {"zbuf_reserve", NULL, call_reserve, check_reserve};
    struct fault_case c = {"zbuf_commit", build_reserved, call_commit, check_commit};
    EXPECT_ALLOCATES(r);
    EXPECT_ALLOCATES(c); /* and a failed commit keeps the reservation: the retry works */
}

/* ------------------------------------------------------------ copying */

static int call_pullup(struct fx *f)
{
    return zbuf_pullup(f->z[0], 10, 20, &f->p);
}

static void check_pullup(struct fx *f)
{
    uint8_t all[48];
    base0(f, all);
    cr_assert_arr_eq(f->p, all + 10, 20, "pulled-up bytes");
    expect_bytes(f->z[0], all, 48, "pullup keeps the bytes");
    expect_bytes(f->z[1], all + 8, 32, "pullup does not touch the dup");
}

static int call_pullup_whole(struct fx *f)
{
    return zbuf_pullup(f->z[1], 0, 32, &f->p);
}

static void check_pullup_whole(struct fx *f)
{
    uint8_t all[48];
    base0(f, all);
    cr_assert_arr_eq(f->p, all + 8, 32, "pulled-up bytes");
    expect_bytes(f->z[1], all + 8, 32, "pullup keeps the bytes");
    cr_assert_eq(zbuf_seg_count(f->z[1]), 1);
}

Test(faults, pullup_fails_cleanly)
{
    struct fault_case c = {"zbuf_pullup(range)", NULL, call_pullup, check_pullup};
    struct fault_case w = {"zbuf_pullup(whole)", NULL, call_pullup_whole, check_pullup_whole};
    EXPECT_ALLOCATES(c);
    EXPECT_ALLOCATES(w);
}

static int call_unshare(struct fx *f)
{
    return zbuf_unshare(f->z[1], 4, 16);
}

static void check_unshare(struct fx *f)
{
    uint8_t all[48];
    base0(f, all);
    cr_assert(zbuf_writable(f->z[1], 4, 16), "the range is writable after unshare");
    expect_bytes(f->z[1], all + 8, 32, "unshare keeps the bytes");
    expect_bytes(f->z[0], all, 48, "unshare does not touch the other zbuf");
}

static int call_unshare_all(struct fx *f)
{
    return zbuf_unshare(f->z[0], 0, ZBUF_TO_END);
}

static void check_unshare_all(struct fx *f)
{
    uint8_t all[48];
    base0(f, all);
    cr_assert(zbuf_writable(f->z[0], 0, 48));
    expect_bytes(f->z[0], all, 48, "unshare keeps the bytes");
}

Test(faults, unshare_fails_cleanly)
{
    struct fault_case c = {"zbuf_unshare(range)", NULL, call_unshare, check_unshare};
    struct fault_case w = {"zbuf_unshare(whole)", NULL, call_unshare_all, check_unshare_all};
    EXPECT_ALLOCATES(c);
    EXPECT_ALLOCATES(w);
}

static int call_readers(struct fx *f)
{
    uint8_t buf[64];
    struct iovec iov[8];
    const void *out;
    zbuf_cursor_t c;
    uint32_t v;
    if (zbuf_copyout(f->z[0], 3, buf, 40) != 40 || zbuf_iovec(f->z[0], 0, 48, iov, 8, NULL) != 3 ||
        zbuf_peek(f->z[0], 10, 20, buf, &out) != 0 || zbuf_cursor_init(&c, f->z[0], 14) != 0 ||
        zbuf_cursor_read_be32(&c, &v) != 0 || !zbuf_writable(f->z[2], 0, 20) ||
        zbuf_headroom(f->z[0]) != 0 || zbuf_seg_find(f->z[0], 30, NULL) == NULL)
        return -EIO;
    return 0;
}

static void check_readers(struct fx *f)
{
    (void)f;
}

Test(faults, reading_calls_never_allocate)
{
    struct fault_case c = {"read-only calls", NULL, call_readers, check_readers};
    EXPECT_NO_ALLOCATION(c);
}

/* ------------------------------------------------------------ buffers, pools */

static int call_buf_alloc(struct fx *f)
{
    return zbuf_buf_alloc(100, &f->h);
}

static void check_buf_alloc(struct fx *f)
{
    cr_assert(f->h && zbuf_buf_size(f->h) == 100 && zbuf_buf_refs(f->h) == 1);
}

static int call_buf_wrap(struct fx *f)
{
    int rc = zbuf_buf_wrap(f->data, 64, zt_count_release, &f->cb_new, &f->h);
    f->enrolled = rc == 0;
    return rc;
}

static void check_buf_wrap(struct fx *f)
{
    cr_assert(f->h && zbuf_buf_data(f->h) == f->data && zbuf_buf_size(f->h) == 64);
}

static void build_with_file(struct fx *f)
{
    char path[] = "/tmp/zbuf-faults-XXXXXX";
    fx_base(f);
    f->fd = mkstemp(path);
    cr_assert_geq(f->fd, 0);
    unlink(path);
    cr_assert_eq(write(f->fd, "0123456789", 10), 10);
}

static int call_buf_wrap_file(struct fx *f)
{
    int rc = zbuf_buf_wrap_file(f->fd, 2, 6, zt_count_release, &f->cb_new, &f->h);
    f->enrolled = rc == 0;
    return rc;
}

static void check_buf_wrap_file(struct fx *f)
{
    int fd = -1;
    off_t off = -1;
    cr_assert(f->h && zbuf_buf_file(f->h, &fd, &off) && fd == f->fd && off == 2);
}

static int call_pool_create(struct fx *f)
{
    return zbuf_pool_create(64, 4, &f->pool);
}

static void check_pool_create(struct fx *f)
{
    cr_assert(f->pool && zbuf_pool_available(f->pool) == 4 && zbuf_pool_capacity(f->pool) == 4);
}

Test(faults, buffer_and_pool_creation_fail_cleanly)
{
    struct fault_case a = {"zbuf_buf_alloc", NULL, call_buf_alloc, check_buf_alloc};
    struct fault_case w = {"zbuf_buf_wrap", NULL, call_buf_wrap, check_buf_wrap};
    struct fault_case fw = {"zbuf_buf_wrap_file", build_with_file, call_buf_wrap_file,
                            check_buf_wrap_file};
    struct fault_case p = {"zbuf_pool_create", NULL, call_pool_create, check_pool_create};
    EXPECT_ALLOCATES(a);
    EXPECT_ALLOCATES(w);
    EXPECT_ALLOCATES(fw);
    EXPECT_ALLOCATES(p);
}

static void build_with_pool(struct fx *f)
{
    fx_base(f);
    cr_assert_eq(zbuf_pool_create(64, 2, &f->pool), 0);
}

static int call_pool_get(struct fx *f)
{
    return zbuf_pool_get(f->pool, &f->h);
}

static void check_pool_get(struct fx *f)
{
    cr_assert(f->h && zbuf_buf_size(f->h) == 64 && zbuf_pool_available(f->pool) == 1);
}

Test(faults, pool_get_never_allocates)
{
    struct fault_case c = {"zbuf_pool_get", build_with_pool, call_pool_get, check_pool_get};
    EXPECT_NO_ALLOCATION(c);
}

/* ------------------------------------------------------------ the allocator API */

Test(faults, allocator_cannot_change_while_objects_live)
{
    zbuf_t *z = NULL;
    zbuf_allocator_t half = {fa_alloc, NULL, NULL};
    cr_assert_eq(zbuf_set_allocator(&half), -EINVAL, "an allocator without free is refused");
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_set_allocator(&fa_allocator), -EBUSY, "a live zbuf blocks the change");
    cr_assert_eq(zbuf_delete(z), 0);
    zbuf_thread_cache_flush();
    cr_assert_eq(zbuf_set_allocator(&fa_allocator), 0);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_gt(fa.live, 0, "the new allocator is used");
    cr_assert_eq(zbuf_delete(z), 0);
    zbuf_thread_cache_flush();
    cr_assert_eq(fa.live, 0, "descriptors go back to the allocator they came from");
    cr_assert_eq(zbuf_set_allocator(NULL), 0);
}
