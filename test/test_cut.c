/*
 * zbuf_cut(): deleting a byte range.  Segments that become empty go (their
 * buffers released at once if nobody else holds them), a cut strictly inside
 * one segment splits it, and nothing is ever copied.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

ZT_SUITE(cut);

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

/* A zbuf of library-owned (writable) segments of the given lengths. */
static zbuf_t *make_heap(const size_t *lens, size_t n)
{
    zbuf_t *z;
    size_t pos = 0;
    uint8_t tmp[SEGMAX];

    cr_assert_eq(zbuf_create(&z), 0);
    for (size_t k = 0; k < n; k++) {
        zbuf_seg_t *s = NULL;
        cr_assert_leq(lens[k], SEGMAX);
        for (size_t i = 0; i < lens[k]; i++)
            tmp[i] = PAT(pos + i);
        cr_assert_eq(zbuf_insert_copy(z, ZBUF_OFF_END, tmp, lens[k], &s), 0);
        cr_assert_eq(zbuf_seg_length(z, s), lens[k]);
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

/* The segment @p after holds byte @p off of @p z (the first byte after a
 * cut made at @p off), or is NULL when @p off is the end. */
static void expect_after(const zbuf_t *z, const zbuf_seg_t *after, size_t off)
{
    size_t start = 0;

    if (off == zbuf_length(z)) {
        cr_assert_null(after, "cut reached the end: after must be NULL");
        return;
    }
    cr_assert_not_null(after, "no segment after the cut at %zu", off);
    cr_assert_eq(zbuf_locate(z, after, 0, &start), 0, "after is not a segment of z");
    cr_assert_leq(start, off);
    cr_assert_lt(off, start + zbuf_seg_length(z, after), "after does not hold byte %zu", off);
}

Test(cut, inside_one_segment_splits_it)
{
    static const size_t lens[] = {10};
    zbuf_t *z = make(lens, 1);
    zbuf_seg_t *after = NULL, *first;
    zbuf_stats_t st = stats();
    uint8_t want[6];

    cr_assert_eq(zbuf_cut(z, 3, 4, &after), 0);
    zt_check(z);
    cr_assert_eq(stats().bytes_copied, st.bytes_copied);
    cr_assert_eq(zbuf_seg_count(z), 2);
    first = zbuf_seg_first(z);
    cr_assert_eq(zbuf_seg_data(z, first), mem[0]);
    cr_assert_eq(zbuf_seg_length(z, first), 3);
    cr_assert_eq(after, zbuf_seg_next(z, first));
    cr_assert_eq(zbuf_seg_data(z, after), mem[0] + 7);
    cr_assert_eq(zbuf_seg_length(z, after), 3);
    cr_assert_eq(zbuf_buf_refs(zbuf_seg_buf(z, after)), 2);
    for (size_t i = 0; i < 3; i++) {
        want[i] = PAT(i);
        want[3 + i] = PAT(7 + i);
    }
    expect_bytes(z, want, 6);
    cr_assert_eq(released[0], 0);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(released[0], 1);
}

Test(cut, whole_segment_releases_its_buffer_now)
{
    static const size_t lens[] = {3, 4, 5};
    zbuf_t *z = make(lens, 3);
    zbuf_seg_t *after = NULL;
    static const int want[3] = {0, 1, 0};

    cr_assert_eq(zbuf_cut(z, 3, 4, &after), 0);
    zt_check(z);
    expect_released(want, 3);
    cr_assert_eq(zbuf_seg_count(z), 2);
    cr_assert_eq(zbuf_seg_data(z, after), mem[2]);
    expect_after(z, after, 3);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(released[0] + released[1] + released[2], 3);
}

Test(cut, front_of_a_segment_shortens_it_without_release)
{
    static const size_t lens[] = {6, 4};
    zbuf_t *z = make(lens, 2);
    zbuf_seg_t *after = NULL;

    cr_assert_eq(zbuf_cut(z, 0, 2, &after), 0);
    zt_check(z);
    cr_assert_eq(zbuf_seg_count(z), 2);
    cr_assert_eq(after, zbuf_seg_first(z));
    cr_assert_eq(zbuf_seg_data(z, after), mem[0] + 2);
    expect_pat(z, 2, 8);
    expect_released(none, 2);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(cut, end_of_a_segment_shortens_it_without_release)
{
    static const size_t lens[] = {6, 4};
    zbuf_t *z = make(lens, 2);
    zbuf_seg_t *after = NULL;
    uint8_t want[8];

    cr_assert_eq(zbuf_cut(z, 4, 2, &after), 0);
    zt_check(z);
    cr_assert_eq(zbuf_seg_count(z), 2);
    cr_assert_eq(zbuf_seg_data(z, after), mem[1]);
    for (size_t i = 0; i < 4; i++)
        want[i] = PAT(i);
    for (size_t i = 0; i < 4; i++)
        want[4 + i] = PAT(6 + i);
    expect_bytes(z, want, 8);
    expect_released(none, 2);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(cut, across_segments_releases_only_the_covered_ones)
{
    static const size_t lens[] = {4, 2, 3, 4};
    zbuf_t *z = make(lens, 4);
    zbuf_seg_t *after = NULL;
    static const int want_rel[4] = {0, 1, 1, 0};
    uint8_t want[6];

    /* bytes 2 .. 10: the tail of #0, all of #1 and #2, the head of #3 */
    cr_assert_eq(zbuf_cut(z, 2, 9, &after), 0);
    zt_check(z);
    expect_released(want_rel, 4);
    cr_assert_eq(zbuf_seg_count(z), 2);
    cr_assert_eq(zbuf_seg_data(z, after), mem[3] + 2);
    want[0] = PAT(0);
    want[1] = PAT(1);
    want[2] = PAT(11);
    want[3] = PAT(12);
    expect_bytes(z, want, 4);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(cut, to_end_reports_no_segment_after)
{
    static const size_t lens[] = {4, 4};
    zbuf_t *z = make(lens, 2);
    zbuf_seg_t *after = (zbuf_seg_t *)&after;
    static const int want_rel[2] = {0, 1};

    cr_assert_eq(zbuf_cut(z, 3, ZBUF_TO_END, &after), 0);
    zt_check(z);
    cr_assert_null(after);
    expect_pat(z, 0, 3);
    expect_released(want_rel, 2);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(cut, explicit_length_to_the_end_reports_no_segment_after)
{
    static const size_t lens[] = {4, 4};
    zbuf_t *z = make(lens, 2);
    zbuf_seg_t *after = (zbuf_seg_t *)&after;

    cr_assert_eq(zbuf_cut(z, 5, 3, &after), 0);
    cr_assert_null(after);
    expect_pat(z, 0, 5);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(cut, everything_leaves_an_empty_zbuf)
{
    static const size_t lens[] = {4, 4, 1};
    zbuf_t *z = make(lens, 3);
    zbuf_seg_t *after = (zbuf_seg_t *)&after;
    static const int all[3] = {1, 1, 1};
    zbuf_stats_t st = stats();

    cr_assert_eq(zbuf_cut(z, 0, ZBUF_TO_END, &after), 0);
    zt_check(z);
    cr_assert_null(after);
    cr_assert_eq(zbuf_length(z), 0);
    cr_assert_eq(zbuf_seg_count(z), 0);
    cr_assert_null(zbuf_seg_first(z));
    cr_assert_null(zbuf_seg_last(z));
    expect_released(all, 3);
    cr_assert_eq(stats().live_segs, st.live_segs - 3);
    /* The empty zbuf is still usable. */
    cr_assert_eq(zbuf_append_copy(z, "x", 1), 0);
    expect_bytes(z, (const uint8_t *)"x", 1);
    cr_assert_eq(zbuf_delete(z), 0);
    expect_released(all, 3);
}

Test(cut, every_range_matches_a_model)
{
    static const size_t lens[] = {3, 1, 4, 2};

    for (size_t off = 0; off <= 10; off++) {
        for (size_t len = 0; off + len <= 10; len++) {
            zbuf_t *z;
            zbuf_seg_t *after = NULL;
            zbuf_stats_t st;
            uint8_t want[10];
            size_t n = 0, pos = 0;

            memset(released, 0, sizeof released);
            z = make(lens, 4);
            st = stats();
            cr_assert_eq(zbuf_cut(z, off, len, &after), 0, "off %zu len %zu", off, len);
            cr_assert_eq(stats().bytes_copied, st.bytes_copied);
            for (size_t i = 0; i < 10; i++)
                if (i < off || i >= off + len)
                    want[n++] = PAT(i);
            expect_bytes(z, want, n);
            expect_after(z, after, off);
            /* A buffer is released exactly when the cut covers all of it. */
            for (size_t k = 0; k < 4; k++) {
                int covered = len > 0 && off <= pos && pos + lens[k] <= off + len;
                cr_assert_eq(released[k], covered, "off %zu len %zu buffer %zu", off, len, k);
                pos += lens[k];
            }
            cr_assert_eq(zbuf_delete(z), 0);
            for (size_t k = 0; k < 4; k++)
                cr_assert_eq(released[k], 1);
        }
    }
}

Test(cut, zero_length_changes_nothing)
{
    static const size_t lens[] = {3, 4};
    zbuf_t *z = make(lens, 2);
    snap_t before;

    snap(&before, z);
    for (size_t off = 0; off <= 7; off++) {
        zbuf_seg_t *after = NULL;
        cr_assert_eq(zbuf_cut(z, off, 0, &after), 0, "off %zu", off);
        expect_pat(z, 0, 7);
        expect_after(z, after, off);
    }
    cr_assert_eq(zbuf_length(z), before.len);
    expect_released(none, 2);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(cut, of_an_empty_zbuf)
{
    zbuf_t *z;
    zbuf_seg_t *after = (zbuf_seg_t *)&after;

    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_cut(z, 0, ZBUF_TO_END, &after), 0);
    cr_assert_null(after);
    cr_assert_eq(zbuf_cut(z, 0, 0, NULL), 0);
    cr_assert_eq(zbuf_cut(z, 0, 1, NULL), -ERANGE);
    cr_assert_eq(zbuf_cut(z, 1, ZBUF_TO_END, NULL), -ERANGE);
    zt_check(z);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(cut, shared_buffer_is_released_only_by_the_last_holder)
{
    static const size_t lens[] = {8};
    zbuf_t *z = make(lens, 1);
    zbuf_t *d;

    cr_assert_eq(zbuf_dup(z, 0, ZBUF_TO_END, &d), 0);
    cr_assert_eq(zbuf_cut(z, 0, ZBUF_TO_END, NULL), 0);
    cr_assert_eq(released[0], 0, "the dup still holds the buffer");
    expect_pat(d, 0, 8);
    cr_assert_eq(zbuf_cut(d, 0, 8, NULL), 0);
    cr_assert_eq(released[0], 1);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zbuf_delete(d), 0);
    cr_assert_eq(released[0], 1);
}

Test(cut, handle_held_buffer_survives_the_cut)
{
    zbuf_buf_t *b;
    zbuf_t *z;
    zbuf_stats_t st = stats();

    cr_assert_eq(zbuf_buf_alloc(16, &b), 0);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_ref(z, b, 0, 16), 0);
    cr_assert_eq(zbuf_cut(z, 0, ZBUF_TO_END, NULL), 0);
    cr_assert_eq(zbuf_buf_refs(b), 1);
    cr_assert_eq(stats().live_bufs, st.live_bufs + 1);
    zbuf_buf_unref(b);
    cr_assert_eq(stats().live_bufs, st.live_bufs);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(cut, library_buffer_is_freed_when_cut_away)
{
    static const size_t lens[] = {5, 5};
    zbuf_t *z = make_heap(lens, 2);
    zbuf_stats_t st = stats();

    cr_assert_eq(zbuf_cut(z, 0, 5, NULL), 0);
    cr_assert_eq(stats().live_bufs, st.live_bufs - 1);
    cr_assert_eq(stats().live_segs, st.live_segs - 1);
    expect_pat(z, 5, 5);
    cr_assert_eq(zbuf_delete(z), 0);
}

/* A rejected cut: the zbuf is unchanged and nothing is released. */
static void cut_rejected(size_t off, size_t len, int want)
{
    static const size_t lens[] = {3, 4};
    zbuf_t *z = make(lens, 2);
    snap_t before;
    zbuf_stats_t st;

    snap(&before, z);
    st = stats();
    cr_assert_eq(zbuf_cut(z, off, len, NULL), want, "off %zu len %zu", off, len);
    assert_unchanged(&before, z);
    cr_assert_eq(stats().live_segs, st.live_segs);
    expect_released(none, 2);
    cr_assert_eq(zbuf_delete(z), 0);
    memset(released, 0, sizeof released);
}

Test(cut, range_outside_is_erange)
{
    cut_rejected(8, 0, -ERANGE);
    cut_rejected(8, ZBUF_TO_END, -ERANGE);
    cut_rejected(0, 8, -ERANGE);
    cut_rejected(3, 5, -ERANGE);
    cut_rejected(6, 2, -ERANGE);
    cut_rejected(SIZE_MAX, 1, -ERANGE);
    cut_rejected(1, SIZE_MAX - 1, -ERANGE);
    cut_rejected(2, SIZE_MAX - 1, -ERANGE);
}

Test(cut, null_or_deleted_zbuf_is_einval)
{
    zbuf_t *z;

    cr_assert_eq(zbuf_cut(NULL, 0, 0, NULL), -EINVAL);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zbuf_cut(z, 0, ZBUF_TO_END, NULL), -EINVAL);
}
