/* SPDX-License-Identifier: MIT */
/*
 * The error convention across the whole API: zbuf_strerror() and
 * zbuf_version(), and every function given a NULL or deleted zbuf, a NULL or
 * foreign segment, or a NULL output: it reports the documented error (or
 * the documented neutral value), changes nothing and runs no callback.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"
#include "internal.h" /* only to break a zbuf on purpose for zbuf_check() */

ZT_SUITE(errors);

/* ------------------------------------------------------------- version */

Test(errors, version_matches_the_headers)
{
    cr_assert_eq(zbuf_version(),
                 ZBUF_VERSION_MAJOR * 10000u + ZBUF_VERSION_MINOR * 100u + ZBUF_VERSION_PATCH);
}

/* ------------------------------------------------------------ strerror */

/* Every error the core API documents. */
static const int documented[] = {EINVAL, ERANGE, ENOMEM, ENOBUFS, EBUSY,
                                 EAGAIN, EIO,    EOVERFLOW, EFAULT};

Test(errors, strerror_names_every_documented_error_distinctly)
{
    size_t n = sizeof documented / sizeof documented[0];

    for (size_t i = 0; i < n; i++) {
        const char *s = zbuf_strerror(-documented[i]);
        cr_assert_not_null(s);
        cr_assert_gt(strlen(s), 0, "empty text for %d", documented[i]);
        for (size_t j = 0; j < i; j++)
            cr_assert_str_neq(s, zbuf_strerror(-documented[j]), "%d and %d read the same",
                              documented[i], documented[j]);
    }
}

Test(errors, strerror_reads_positive_codes_as_their_negation)
{
    size_t n = sizeof documented / sizeof documented[0];

    for (size_t i = 0; i < n; i++)
        cr_assert_str_eq(zbuf_strerror(documented[i]), zbuf_strerror(-documented[i]));
}

Test(errors, strerror_of_zero_and_unknown_codes_is_never_null)
{
    static const int odd[] = {0, 1, -1, 4095, -4095, 123456, -123456, INT_MAX, -INT_MAX};

    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        const char *s = zbuf_strerror(odd[i]);
        cr_assert_not_null(s, "NULL for %d", odd[i]);
        cr_assert_gt(strlen(s), 0, "empty text for %d", odd[i]);
    }
    cr_assert_str_neq(zbuf_strerror(0), zbuf_strerror(-EINVAL));
}

Test(errors, strerror_of_int_min_is_defined)
{
    /* -INT_MIN does not exist: reading it "as its negation" must not overflow. */
    const char *s = zbuf_strerror(INT_MIN);
    cr_assert_not_null(s);
}

Test(errors, strerror_text_is_static)
{
    const char *a = zbuf_strerror(-123456);
    char copy[256];

    cr_assert_not_null(a);
    strncpy(copy, a, sizeof copy - 1);
    copy[sizeof copy - 1] = '\0';
    (void)zbuf_strerror(-654321);
    (void)zbuf_strerror(-EINVAL);
    cr_assert_str_eq(a, copy, "the text of one call was overwritten by another");
}

static void *strerror_loop(void *arg)
{
    const char *want = arg;
    for (int i = 0; i < 100000; i++)
        if (strcmp(zbuf_strerror(-ERANGE), want) != 0)
            return (void *)1;
    return NULL;
}

Test(errors, strerror_is_thread_safe)
{
    const char *want = zbuf_strerror(-ERANGE);
    pthread_t t[2];
    void *r[2];

    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, strerror_loop, (void *)want), 0);
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(pthread_join(t[i], &r[i]), 0);
        cr_assert_null(r[i]);
    }
}

/* ----------------------------------------------------------- allocator */

static int foreign_allocs;

static void *foreign_alloc(void *ctx, size_t size)
{
    (void)ctx;
    foreign_allocs++;
    return malloc(size);
}

static void foreign_free(void *ctx, void *p, size_t size)
{
    (void)ctx;
    (void)size;
    free(p);
}

Test(errors, set_allocator_refuses_a_half_allocator)
{
    zbuf_allocator_t no_alloc = {NULL, foreign_free, NULL};
    zbuf_allocator_t no_free = {foreign_alloc, NULL, NULL};
    zbuf_buf_t *b;

    cr_assert_eq(zbuf_set_allocator(&no_alloc), -EINVAL);
    cr_assert_eq(zbuf_set_allocator(&no_free), -EINVAL);
    cr_assert_eq(zbuf_buf_alloc(64, &b), 0);
    cr_assert_eq(foreign_allocs, 0, "a refused allocator was installed");
    zbuf_buf_unref(b);
}

Test(errors, set_allocator_is_busy_while_objects_live)
{
    zbuf_allocator_t a = {foreign_alloc, foreign_free, NULL};
    zbuf_t *z;
    zbuf_buf_t *b;
    zbuf_pool_t *p;

    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_set_allocator(&a), -EBUSY);
    cr_assert_eq(zbuf_delete(z), 0);

    cr_assert_eq(zbuf_buf_alloc(8, &b), 0);
    cr_assert_eq(zbuf_set_allocator(&a), -EBUSY);
    zbuf_buf_unref(b);

    cr_assert_eq(zbuf_pool_create(8, 2, &p), 0);
    cr_assert_eq(zbuf_set_allocator(&a), -EBUSY);
    zbuf_pool_delete(p);

    cr_assert_eq(zbuf_buf_alloc(8, &b), 0);
    zbuf_buf_unref(b);
    cr_assert_eq(foreign_allocs, 0, "a refused allocator was installed");
}

Test(errors, default_allocator_has_a_name)
{
    const char *n = zbuf_default_allocator_name();

    cr_assert_not_null(n);
    cr_assert(strcmp(n, "jemalloc") == 0 || strcmp(n, "malloc") == 0, "%s", n);
}

/* ------------------------------------------ bad handles, whole API */

/* A live zbuf, its enrolled buffer's release count, and what it looked like,
 * to prove that calls given bad handles leave other objects alone. */
static uint8_t witness_mem[16];
static int witness_released;

static zbuf_t *witness(void)
{
    zbuf_t *w;

    for (size_t i = 0; i < sizeof witness_mem; i++)
        witness_mem[i] = (uint8_t)(i + 1);
    cr_assert_eq(zbuf_create(&w), 0);
    cr_assert_eq(zbuf_append_buf(w, witness_mem, 8, zt_count_release, &witness_released), 0);
    cr_assert_eq(zbuf_append_copy(w, witness_mem + 8, 8), 0);
    return w;
}

static void witness_unchanged(zbuf_t *w)
{
    uint8_t out[16];

    zt_check(w);
    cr_assert_eq(zbuf_length(w), 16);
    cr_assert_eq(zbuf_seg_count(w), 2);
    cr_assert_eq(zbuf_copyout(w, 0, out, 16), 16);
    cr_assert_eq(memcmp(out, witness_mem, 16), 0);
    cr_assert_eq(witness_released, 0);
}

/* Every entry point given the bad zbuf @p bad (NULL or deleted). */
static void every_call_refuses(zbuf_t *bad, zbuf_t *w)
{
    static uint8_t area[8];
    zbuf_buf_t *b;
    zbuf_t *out = NULL;
    zbuf_seg_t *s = zbuf_seg_first(w);
    uint8_t bytes[8] = {0};
    struct iovec iov[2];
    size_t n = 77;
    const void *cp = NULL;
    void *p = NULL;
    int cnt = 0, rel = 0;
    zbuf_cursor_t c;
    zbuf_stats_t st;

    cr_assert_eq(zbuf_buf_alloc(8, &b), 0);
    zbuf_stats_get(&st);

    cr_assert_eq(zbuf_length(bad), 0);
    cr_assert_eq(zbuf_seg_count(bad), 0);
    cr_assert_eq(zbuf_check(bad), -EINVAL);

    cr_assert_eq(zbuf_insert_buf(bad, 0, area, 8, zt_count_release, &rel, NULL), -EINVAL);
    cr_assert_eq(zbuf_insert_ref(bad, 0, b, 0, 8, NULL), -EINVAL);
    cr_assert_eq(zbuf_insert_copy(bad, 0, area, 8, NULL), -EINVAL);
    cr_assert_eq(zbuf_insert(bad, 0, w, NULL), -EINVAL);
    cr_assert_eq(zbuf_insert(w, 0, bad, NULL), -EINVAL);
    cr_assert_eq(zbuf_append_buf(bad, area, 8, zt_count_release, &rel), -EINVAL);
    cr_assert_eq(zbuf_prepend_buf(bad, area, 8, zt_count_release, &rel), -EINVAL);
    cr_assert_eq(zbuf_append_ref(bad, b, 0, 8), -EINVAL);
    cr_assert_eq(zbuf_append_copy(bad, area, 8), -EINVAL);
    cr_assert_eq(zbuf_prepend_copy(bad, area, 8), -EINVAL);
    cr_assert_eq(zbuf_append(bad, w), -EINVAL);
    cr_assert_eq(zbuf_append(w, bad), -EINVAL);

    cr_assert_eq(zbuf_copyout(bad, 0, bytes, 0), -EINVAL);
    cr_assert_eq(zbuf_peek(bad, 0, 1, bytes, &cp), -EINVAL);
    cr_assert_eq(zbuf_iovec(bad, 0, 0, iov, 2, &n), -EINVAL);

    cr_assert_eq(zbuf_dup(bad, 0, 0, &out), -EINVAL);
    cr_assert_eq(zbuf_split(bad, 0, &out), -EINVAL);
    cr_assert_eq(zbuf_split_head(bad, 0, &out), -EINVAL);
    cr_assert_eq(zbuf_cut(bad, 0, 0, NULL), -EINVAL);
    cr_assert_null(out);

    cr_assert_eq(zbuf_headroom(bad), 0);
    cr_assert_eq(zbuf_tailroom(bad), 0);
    cr_assert_eq(zbuf_prepend_space(bad, 4, &p), -EINVAL);
    cr_assert_eq(zbuf_append_space(bad, 4, &p), -EINVAL);
    cr_assert_eq(zbuf_reserve(bad, 4, iov, &cnt), -EINVAL);
    cr_assert_eq(zbuf_commit(bad, 0), -EINVAL);
    cr_assert_null(p);

    cr_assert_eq(zbuf_pullup(bad, 0, 1, &p), -EINVAL);
    cr_assert_not(zbuf_writable(bad, 0, 0));
    cr_assert_eq(zbuf_unshare(bad, 0, 0), -EINVAL);

    cr_assert_null(zbuf_seg_first(bad));
    cr_assert_null(zbuf_seg_last(bad));
    cr_assert_null(zbuf_seg_next(bad, s));
    cr_assert_null(zbuf_seg_prev(bad, s));
    cr_assert_null(zbuf_seg_find(bad, 0, &n));
    cr_assert_null(zbuf_seg_data(bad, s));
    cr_assert_eq(zbuf_seg_length(bad, s), 0);
    cr_assert_null(zbuf_seg_buf(bad, s));
    cr_assert_eq(zbuf_locate(bad, NULL, 0, &n), -EINVAL);
    cr_assert_eq(n, 77);

    cr_assert_eq(zbuf_cursor_init(&c, bad, 0), -EINVAL);

    {
        zbuf_stats_t now;
        zbuf_stats_get(&now);
        cr_assert_eq(now.live_zbufs, st.live_zbufs);
        cr_assert_eq(now.live_segs, st.live_segs);
        cr_assert_eq(now.live_bufs, st.live_bufs);
        cr_assert_eq(now.bytes_copied, st.bytes_copied);
    }
    cr_assert_eq(zbuf_buf_refs(b), 1, "a refused call kept a reference");
    cr_assert_eq(rel, 0, "a refused enrolment called back");
    zbuf_buf_unref(b);
    witness_unchanged(w);
}

Test(errors, every_call_refuses_a_null_zbuf)
{
    zbuf_t *w = witness();

    every_call_refuses(NULL, w);
    cr_assert_eq(zbuf_delete(w), 0);
    cr_assert_eq(witness_released, 1);
}

Test(errors, every_call_refuses_a_deleted_zbuf)
{
    zbuf_t *w = witness();
    zbuf_t *gone;

    cr_assert_eq(zbuf_create(&gone), 0);
    cr_assert_eq(zbuf_append_copy(gone, "data", 4), 0);
    cr_assert_eq(zbuf_delete(gone), 0);
    every_call_refuses(gone, w);
    cr_assert_eq(zbuf_delete(gone), -EINVAL);
    cr_assert_eq(zbuf_delete(w), 0);
    cr_assert_eq(witness_released, 1);
}

Test(errors, segment_calls_refuse_foreign_and_null_segments)
{
    zbuf_t *w = witness();
    zbuf_t *other;
    zbuf_seg_t *f;
    size_t abs = 55;

    cr_assert_eq(zbuf_create(&other), 0);
    cr_assert_eq(zbuf_append_copy(other, "abcdef", 6), 0);
    f = zbuf_seg_first(other);
    for (int round = 0; round < 2; round++) {
        zbuf_seg_t *s = round == 0 ? f : NULL;
        cr_assert_null(zbuf_seg_next(w, s));
        cr_assert_null(zbuf_seg_prev(w, s));
        cr_assert_null(zbuf_seg_data(w, s));
        cr_assert_eq(zbuf_seg_length(w, s), 0);
        cr_assert_null(zbuf_seg_buf(w, s));
    }
    cr_assert_eq(zbuf_locate(w, f, 0, &abs), -EINVAL);
    cr_assert_eq(abs, 55);
    witness_unchanged(w);
    cr_assert_eq(zbuf_delete(other), 0);
    cr_assert_eq(zbuf_delete(w), 0);
}

Test(errors, null_outputs_are_einval_and_change_nothing)
{
    zbuf_t *w = witness();
    struct iovec iov[2];
    int cnt;

    cr_assert_eq(zbuf_create(NULL), -EINVAL);
    cr_assert_eq(zbuf_dup(w, 0, 1, NULL), -EINVAL);
    cr_assert_eq(zbuf_split(w, 1, NULL), -EINVAL);
    cr_assert_eq(zbuf_split_head(w, 1, NULL), -EINVAL);
    cr_assert_eq(zbuf_prepend_space(w, 1, NULL), -EINVAL);
    cr_assert_eq(zbuf_append_space(w, 1, NULL), -EINVAL);
    cr_assert_eq(zbuf_reserve(w, 1, NULL, &cnt), -EINVAL);
    cr_assert_eq(zbuf_reserve(w, 1, iov, NULL), -EINVAL);
    cr_assert_eq(zbuf_pullup(w, 0, 10, NULL), -EINVAL);
    cr_assert_eq(zbuf_peek(w, 0, 10, NULL, NULL), -EINVAL);
    cr_assert_eq(zbuf_locate(w, NULL, 0, NULL), -EINVAL);
    cr_assert_eq(zbuf_buf_alloc(1, NULL), -EINVAL);
    cr_assert_eq(zbuf_pool_create(1, 1, NULL), -EINVAL);
    cr_assert_eq(zbuf_cursor_init(NULL, w, 0), -EINVAL);
    witness_unchanged(w);
    cr_assert_eq(zbuf_delete(w), 0);
}

Test(errors, every_error_code_has_a_name)
{
    zbuf_t *w = witness();
    uint8_t out[32];
    const void *cp;

    /* The codes the calls really return are the ones strerror names. */
    cr_assert_str_eq(zbuf_strerror(zbuf_copyout(w, 0, out, 17)), zbuf_strerror(-ERANGE));
    cr_assert_str_eq(zbuf_strerror(zbuf_copyout(NULL, 0, out, 1)), zbuf_strerror(-EINVAL));
    cr_assert_str_eq(zbuf_strerror(zbuf_peek(w, 6, 4, NULL, &cp)), zbuf_strerror(-EAGAIN));
    cr_assert_eq(zbuf_delete(w), 0);
}

/* -------------------------------------------------------- chain checker */

Test(errors, check_finds_a_broken_chain)
{
    zbuf_t *z;
    struct zbuf *in;
    struct zbuf_seg *s;

    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_copy(z, "abcdef", 6), 0);
    cr_assert_eq(zbuf_append_copy(z, "ghij", 4), 0);
    zt_check(z);
    in = (struct zbuf *)z;
    s = in->head;

    in->len++;
    cr_assert_eq(zbuf_check(z), -EFAULT, "wrong cached length");
    in->len--;

    in->nsegs++;
    cr_assert_eq(zbuf_check(z), -EFAULT, "wrong segment count");
    in->nsegs--;

    s->len += s->buf->size; /* the segment runs past its buffer */
    in->len += s->buf->size;
    cr_assert_eq(zbuf_check(z), -EFAULT, "segment outside its buffer");
    s->len -= s->buf->size;
    in->len -= s->buf->size;

    s->owner = NULL;
    cr_assert_eq(zbuf_check(z), -EFAULT, "segment of nobody");
    s->owner = in;

    zt_check(z);
    cr_assert_eq(zbuf_delete(z), 0);
}
