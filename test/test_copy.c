/*
 * Getting bytes out by copying: zbuf_copyout().  Every byte it copies is
 * counted in zbuf_stats_t::bytes_copied; a rejected call copies nothing and
 * leaves the destination alone.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

ZT_SUITE(copy);

/* Byte i of a zbuf built by make() or make_heap() is PAT(i), so any range
 * can be checked without keeping a copy. */
#define PAT(i) ((uint8_t)((size_t)(i) * 37u + 11u))

#define MAXSEGS 8
#define SEGMAX 64

/* Caller memory enrolled by make(), one release counter per buffer. */
static uint8_t mem[MAXSEGS][SEGMAX];
static int released[MAXSEGS];

/* A zbuf of enrolled segments of the given lengths (buffer k is mem[k],
 * counted in released[k], which starts at 0). */
static zbuf_t *make(const size_t *lens, size_t n)
{
    zbuf_t *z;
    size_t pos = 0;

    cr_assert_leq(n, MAXSEGS);
    cr_assert_eq(zbuf_create(&z), 0);
    for (size_t k = 0; k < n; k++) {
        cr_assert_leq(lens[k], SEGMAX);
        released[k] = 0;
        for (size_t i = 0; i < lens[k]; i++)
            mem[k][i] = PAT(pos + i);
        cr_assert_eq(zbuf_insert_buf(z, ZBUF_OFF_END, mem[k], lens[k], zt_count_release,
                                     &released[k], NULL),
                     0);
        pos += lens[k];
        zt_check(z);
    }
    cr_assert_eq(zbuf_length(z), pos);
    cr_assert_eq(zbuf_seg_count(z), n);
    return z;
}

#define SNAPSEGS 64
#define SNAPBYTES 4096

/* What a zbuf looks like: its bytes and the place and length of each
 * segment.  Taken without zbuf_copyout() so that bytes_copied is untouched. */
typedef struct {
    size_t len;
    size_t nsegs;
    const void *data[SNAPSEGS];
    size_t seglen[SNAPSEGS];
    uint8_t bytes[SNAPBYTES];
} snap_t;

static void snap(snap_t *s, const zbuf_t *z)
{
    size_t k = 0, pos = 0;

    memset(s, 0, sizeof *s);
    s->len = zbuf_length(z);
    s->nsegs = zbuf_seg_count(z);
    cr_assert_leq(s->len, SNAPBYTES);
    for (zbuf_seg_t *g = zbuf_seg_first(z); g != NULL; g = zbuf_seg_next(z, g), k++) {
        cr_assert_lt(k, SNAPSEGS);
        s->data[k] = zbuf_seg_data(z, g);
        s->seglen[k] = zbuf_seg_length(z, g);
        cr_assert_not_null(s->data[k]);
        cr_assert_gt(s->seglen[k], 0);
        cr_assert_leq(pos + s->seglen[k], s->len);
        memcpy(s->bytes + pos, s->data[k], s->seglen[k]);
        pos += s->seglen[k];
    }
    cr_assert_eq(k, s->nsegs, "walked %zu segments, seg_count says %zu", k, s->nsegs);
    cr_assert_eq(pos, s->len, "segments hold %zu bytes, length says %zu", pos, s->len);
}

/* The zbuf holds the same bytes in the same segments as in @p before. */
static void assert_unchanged(const snap_t *before, const zbuf_t *z)
{
    snap_t *now = malloc(sizeof *now);

    cr_assert_not_null(now);
    zt_check(z);
    snap(now, z);
    cr_assert_eq(now->len, before->len, "length %zu -> %zu", before->len, now->len);
    cr_assert_eq(now->nsegs, before->nsegs, "segments %zu -> %zu", before->nsegs, now->nsegs);
    for (size_t k = 0; k < now->nsegs; k++) {
        cr_assert_eq(now->data[k], before->data[k], "segment %zu moved", k);
        cr_assert_eq(now->seglen[k], before->seglen[k], "segment %zu resized", k);
    }
    cr_assert_eq(memcmp(now->bytes, before->bytes, now->len), 0, "bytes changed");
    free(now);
}

/* The zbuf holds exactly @p n bytes equal to @p want. */
static void expect_bytes(const zbuf_t *z, const uint8_t *want, size_t n)
{
    snap_t *now = malloc(sizeof *now);

    cr_assert_not_null(now);
    zt_check(z);
    snap(now, z);
    cr_assert_eq(now->len, n, "length %zu, expected %zu", now->len, n);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(now->bytes[i], want[i], "byte %zu is %u, expected %u", i, now->bytes[i],
                     want[i]);
    free(now);
}

/* The zbuf holds exactly PAT(from) .. PAT(from + n - 1). */
static void expect_pat(const zbuf_t *z, size_t from, size_t n)
{
    uint8_t want[SNAPBYTES];

    cr_assert_leq(n, SNAPBYTES);
    for (size_t i = 0; i < n; i++)
        want[i] = PAT(from + i);
    expect_bytes(z, want, n);
}

static zbuf_stats_t stats(void)
{
    zbuf_stats_t st;
    zbuf_stats_get(&st);
    return st;
}

/* Every counter of released[] equals the one in @p want. */
static void expect_released(const int *want, size_t n)
{
    for (size_t k = 0; k < n; k++)
        cr_assert_eq(released[k], want[k], "buffer %zu released %d times, expected %d", k,
                     released[k], want[k]);
}

static const int none[MAXSEGS];

Test(copy, whole_zbuf_across_segments)
{
    static const size_t lens[] = {3, 1, 4, 2};
    zbuf_t *z = make(lens, 4);
    uint8_t out[10];
    zbuf_stats_t st = stats();

    cr_assert_eq(zbuf_copyout(z, 0, out, 10), 10);
    for (size_t i = 0; i < 10; i++)
        cr_assert_eq(out[i], PAT(i));
    cr_assert_eq(stats().bytes_copied, st.bytes_copied + 10);
    cr_assert_gt(stats().copies, st.copies);
    expect_pat(z, 0, 10);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(copy, every_range_of_a_segmented_zbuf)
{
    static const size_t lens[] = {3, 1, 4, 2};
    zbuf_t *z = make(lens, 4);
    snap_t before;

    snap(&before, z);
    for (size_t off = 0; off <= 10; off++) {
        for (size_t len = 0; off + len <= 10; len++) {
            uint8_t out[12];
            zbuf_stats_t st = stats();

            memset(out, 0xee, sizeof out);
            cr_assert_eq(zbuf_copyout(z, off, out, len), (ssize_t)len, "off %zu len %zu", off,
                         len);
            for (size_t i = 0; i < len; i++)
                cr_assert_eq(out[i], PAT(off + i), "off %zu len %zu byte %zu", off, len, i);
            for (size_t i = len; i < sizeof out; i++)
                cr_assert_eq(out[i], 0xee, "wrote past len at %zu", i);
            cr_assert_eq(stats().bytes_copied, st.bytes_copied + len,
                         "off %zu len %zu counted %llu", off, len,
                         (unsigned long long)(stats().bytes_copied - st.bytes_copied));
        }
    }
    assert_unchanged(&before, z);
    expect_released(none, 4);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(copy, to_end_copies_what_remains)
{
    static const size_t lens[] = {5, 5};
    zbuf_t *z = make(lens, 2);

    for (size_t off = 0; off <= 10; off++) {
        uint8_t out[10];
        zbuf_stats_t st = stats();

        cr_assert_eq(zbuf_copyout(z, off, out, ZBUF_TO_END), (ssize_t)(10 - off));
        for (size_t i = 0; i < 10 - off; i++)
            cr_assert_eq(out[i], PAT(off + i));
        cr_assert_eq(stats().bytes_copied, st.bytes_copied + (10 - off));
    }
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(copy, inside_one_segment)
{
    static const size_t lens[] = {20};
    zbuf_t *z = make(lens, 1);
    uint8_t out[5];

    cr_assert_eq(zbuf_copyout(z, 7, out, 5), 5);
    for (size_t i = 0; i < 5; i++)
        cr_assert_eq(out[i], PAT(7 + i));
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(copy, empty_zbuf_gives_zero_bytes)
{
    zbuf_t *z;
    uint8_t out[4] = {9, 9, 9, 9};
    zbuf_stats_t st = stats();

    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_copyout(z, 0, out, 0), 0);
    cr_assert_eq(zbuf_copyout(z, 0, out, ZBUF_TO_END), 0);
    cr_assert_eq(zbuf_copyout(z, 0, out, 1), -ERANGE);
    cr_assert_eq(zbuf_copyout(z, 1, out, 0), -ERANGE);
    cr_assert_eq(out[0], 9);
    cr_assert_eq(stats().bytes_copied, st.bytes_copied);
    zt_check(z);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(copy, at_the_end_gives_zero_bytes)
{
    static const size_t lens[] = {4};
    zbuf_t *z = make(lens, 1);
    uint8_t out[4];

    cr_assert_eq(zbuf_copyout(z, 4, out, 0), 0);
    cr_assert_eq(zbuf_copyout(z, 4, out, ZBUF_TO_END), 0);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(copy, sees_later_writes_to_shared_memory)
{
    static const size_t lens[] = {8};
    zbuf_t *z = make(lens, 1);
    uint8_t out[8];

    /* The zbuf refers to the caller's memory, it did not copy it. */
    mem[0][3] = 0x77;
    cr_assert_eq(zbuf_copyout(z, 0, out, 8), 8);
    cr_assert_eq(out[3], 0x77);
    cr_assert_eq(zbuf_delete(z), 0);
}

/* A rejected copyout: nothing copied, nothing counted, zbuf unchanged. */
static void copy_rejected(zbuf_t *z, size_t off, void *dst, size_t len, int want)
{
    snap_t before;
    uint8_t *d = dst;
    zbuf_stats_t st;

    snap(&before, z);
    if (d != NULL)
        memset(d, 0xee, 16);
    st = stats();
    cr_assert_eq(zbuf_copyout(z, off, dst, len), want, "off %zu len %zu", off, len);
    cr_assert_eq(stats().bytes_copied, st.bytes_copied);
    if (d != NULL)
        for (size_t i = 0; i < 16; i++)
            cr_assert_eq(d[i], 0xee, "rejected copyout wrote byte %zu", i);
    assert_unchanged(&before, z);
}

Test(copy, range_past_the_end_is_erange_not_clamped)
{
    static const size_t lens[] = {3, 4};
    zbuf_t *z = make(lens, 2);
    uint8_t out[16];

    copy_rejected(z, 0, out, 8, -ERANGE);
    copy_rejected(z, 5, out, 3, -ERANGE);
    copy_rejected(z, 7, out, 1, -ERANGE);
    copy_rejected(z, 8, out, 0, -ERANGE);
    copy_rejected(z, 8, out, ZBUF_TO_END, -ERANGE);
    copy_rejected(z, SIZE_MAX, out, 1, -ERANGE);
    copy_rejected(z, 1, out, SIZE_MAX - 1, -ERANGE); /* off + len wraps */
    copy_rejected(z, 2, out, SIZE_MAX - 1, -ERANGE);
    expect_released(none, 2);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(copy, null_destination_is_einval)
{
    static const size_t lens[] = {3, 4};
    zbuf_t *z = make(lens, 2);

    copy_rejected(z, 0, NULL, 4, -EINVAL);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(copy, null_or_deleted_zbuf_is_einval)
{
    zbuf_t *z;
    uint8_t out[4];
    zbuf_stats_t st = stats();

    cr_assert_eq(zbuf_copyout(NULL, 0, out, 1), -EINVAL);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_copy(z, "abcd", 4), 0);
    cr_assert_eq(zbuf_delete(z), 0);
    st = stats();
    cr_assert_eq(zbuf_copyout(z, 0, out, 1), -EINVAL);
    cr_assert_eq(stats().bytes_copied, st.bytes_copied);
}

Test(copy, large_zbuf_of_many_segments)
{
    enum { N = 200, SEG = 37 };
    zbuf_t *z;
    uint8_t *src = malloc(N * SEG), *out = malloc(N * SEG);
    zbuf_stats_t st;

    cr_assert_not_null(src);
    cr_assert_not_null(out);
    for (size_t i = 0; i < N * SEG; i++)
        src[i] = PAT(i);
    cr_assert_eq(zbuf_create(&z), 0);
    for (size_t k = 0; k < N; k++)
        cr_assert_eq(zbuf_append_buf(z, src + k * SEG, SEG, NULL, NULL), 0);
    zt_check(z);
    cr_assert_eq(zbuf_seg_count(z), N);
    st = stats();
    cr_assert_eq(zbuf_copyout(z, 10, out, N * SEG - 20), N * SEG - 20);
    cr_assert_eq(memcmp(out, src + 10, N * SEG - 20), 0);
    cr_assert_eq(stats().bytes_copied, st.bytes_copied + N * SEG - 20);
    cr_assert_eq(zbuf_delete(z), 0);
    free(src);
    free(out);
}
