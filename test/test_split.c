/*
 * zbuf_split() and zbuf_split_head(): cutting a zbuf in two at an offset by
 * moving segments.  A segment straddling the offset is split into two that
 * share its buffer; nothing is copied and nothing is released.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

ZT_SUITE(split);

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

/* Whether @p off falls strictly inside one of the segments. */
static bool inside_a_segment(const size_t *lens, size_t n, size_t off)
{
    size_t pos = 0;
    for (size_t k = 0; k < n; k++) {
        if (off > pos && off < pos + lens[k])
            return true;
        pos += lens[k];
    }
    return false;
}

/* Split (or split_head) at every offset of a segmented zbuf and check both
 * halves: bytes, segment counts, no copy, no release, shared memory. */
static void split_everywhere(bool head)
{
    static const size_t lens[] = {3, 1, 4, 2};

    for (size_t off = 0; off <= 10; off++) {
        zbuf_t *z, *part = NULL, *front, *back;
        zbuf_stats_t st;
        size_t expect_segs;

        memset(released, 0, sizeof released);
        z = make(lens, 4);
        st = stats();
        if (head)
            cr_assert_eq(zbuf_split_head(z, off, &part), 0, "off %zu", off);
        else
            cr_assert_eq(zbuf_split(z, off, &part), 0, "off %zu", off);
        cr_assert_not_null(part);
        cr_assert_eq(stats().bytes_copied, st.bytes_copied);
        cr_assert_eq(stats().live_zbufs, st.live_zbufs + 1);
        cr_assert_eq(stats().live_bufs, st.live_bufs);
        expect_released(none, 4);
        front = head ? part : z;
        back = head ? z : part;
        zt_check(front);
        zt_check(back);
        expect_pat(front, 0, off);
        expect_pat(back, off, 10 - off);
        expect_segs = 4 + (inside_a_segment(lens, 4, off) ? 1 : 0);
        cr_assert_eq(zbuf_seg_count(front) + zbuf_seg_count(back), expect_segs, "off %zu",
                     off);
        if (off > 0 && off < 10) {
            /* The back starts where the front ended, in the same memory. */
            zbuf_seg_t *fl = zbuf_seg_last(front), *bf = zbuf_seg_first(back);
            if (inside_a_segment(lens, 4, off)) {
                cr_assert_eq(zbuf_seg_buf(front, fl), zbuf_seg_buf(back, bf));
                cr_assert_eq((uint8_t *)zbuf_seg_data(front, fl) + zbuf_seg_length(front, fl),
                             zbuf_seg_data(back, bf));
                cr_assert_eq(zbuf_buf_refs(zbuf_seg_buf(back, bf)), 2);
            } else {
                cr_assert_neq(zbuf_seg_buf(front, fl), zbuf_seg_buf(back, bf));
            }
        }
        cr_assert_eq(zbuf_delete(z), 0);
        cr_assert_eq(zbuf_delete(part), 0);
        for (size_t k = 0; k < 4; k++)
            cr_assert_eq(released[k], 1, "off %zu buffer %zu released %d times", off, k,
                         released[k]);
    }
}

Test(split, at_every_offset_moves_the_tail)
{
    split_everywhere(false);
}

Test(split, head_at_every_offset_moves_the_head)
{
    split_everywhere(true);
}

Test(split, at_zero_moves_everything)
{
    static const size_t lens[] = {3, 4};
    zbuf_t *z = make(lens, 2);
    zbuf_t *t;

    cr_assert_eq(zbuf_split(z, 0, &t), 0);
    zt_check(z);
    zt_check(t);
    cr_assert_eq(zbuf_length(z), 0);
    cr_assert_eq(zbuf_seg_count(z), 0);
    cr_assert_null(zbuf_seg_first(z));
    expect_pat(t, 0, 7);
    cr_assert_eq(zbuf_seg_data(t, zbuf_seg_first(t)), mem[0]);
    cr_assert_eq(zbuf_delete(z), 0);
    expect_released(none, 2);
    cr_assert_eq(zbuf_delete(t), 0);
    cr_assert_eq(released[0] + released[1], 2);
}

Test(split, at_the_end_gives_an_empty_tail)
{
    static const size_t lens[] = {3, 4};
    zbuf_t *z = make(lens, 2);
    zbuf_t *t;
    snap_t before;

    snap(&before, z);
    cr_assert_eq(zbuf_split(z, 7, &t), 0);
    zt_check(t);
    cr_assert_eq(zbuf_length(t), 0);
    cr_assert_eq(zbuf_seg_count(t), 0);
    assert_unchanged(&before, z);
    cr_assert_eq(zbuf_delete(t), 0);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(split, head_at_zero_gives_an_empty_head_and_at_end_takes_all)
{
    static const size_t lens[] = {3, 4};
    zbuf_t *z = make(lens, 2);
    zbuf_t *h;
    snap_t before;

    snap(&before, z);
    cr_assert_eq(zbuf_split_head(z, 0, &h), 0);
    cr_assert_eq(zbuf_length(h), 0);
    assert_unchanged(&before, z);
    cr_assert_eq(zbuf_delete(h), 0);
    cr_assert_eq(zbuf_split_head(z, 7, &h), 0);
    expect_pat(h, 0, 7);
    cr_assert_eq(zbuf_length(z), 0);
    zt_check(z);
    cr_assert_eq(zbuf_delete(z), 0);
    expect_released(none, 2);
    cr_assert_eq(zbuf_delete(h), 0);
}

Test(split, of_an_empty_zbuf_at_zero)
{
    zbuf_t *z, *t;

    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_split(z, 0, &t), 0);
    zt_check(z);
    zt_check(t);
    cr_assert_eq(zbuf_length(t), 0);
    cr_assert_eq(zbuf_delete(t), 0);
    cr_assert_eq(zbuf_split_head(z, 0, &t), 0);
    cr_assert_eq(zbuf_length(t), 0);
    cr_assert_eq(zbuf_delete(t), 0);
    cr_assert_eq(zbuf_split(z, 1, &t), -ERANGE);
    cr_assert_eq(zbuf_split_head(z, 1, &t), -ERANGE);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(split, inside_a_segment_releases_the_buffer_after_both_halves)
{
    static const size_t lens[] = {10};
    zbuf_t *z = make(lens, 1);
    zbuf_t *t;

    cr_assert_eq(zbuf_split(z, 4, &t), 0);
    cr_assert_eq(zbuf_seg_data(z, zbuf_seg_first(z)), mem[0]);
    cr_assert_eq(zbuf_seg_data(t, zbuf_seg_first(t)), mem[0] + 4);
    cr_assert_eq(zbuf_seg_buf_offset(t, zbuf_seg_first(t)), 4);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(released[0], 0);
    expect_pat(t, 4, 6);
    cr_assert_eq(zbuf_delete(t), 0);
    cr_assert_eq(released[0], 1);
}

Test(split, head_inside_a_segment_releases_the_buffer_after_both_halves)
{
    static const size_t lens[] = {10};
    zbuf_t *z = make(lens, 1);
    zbuf_t *h;

    cr_assert_eq(zbuf_split_head(z, 4, &h), 0);
    cr_assert_eq(zbuf_seg_data(h, zbuf_seg_first(h)), mem[0]);
    cr_assert_eq(zbuf_seg_data(z, zbuf_seg_first(z)), mem[0] + 4);
    cr_assert_eq(zbuf_delete(h), 0);
    cr_assert_eq(released[0], 0);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(released[0], 1);
}

Test(split, halves_are_independent_zbufs)
{
    static const size_t lens[] = {5, 5};
    zbuf_t *z = make(lens, 2);
    zbuf_t *t;
    uint8_t want[8];

    cr_assert_eq(zbuf_split(z, 5, &t), 0);
    cr_assert_eq(zbuf_append_copy(z, "ab", 2), 0);
    cr_assert_eq(zbuf_prepend_copy(t, "c", 1), 0);
    zt_check(z);
    zt_check(t);
    for (size_t i = 0; i < 5; i++)
        want[i] = PAT(i);
    memcpy(want + 5, "ab", 2);
    expect_bytes(z, want, 7);
    want[0] = 'c';
    for (size_t i = 0; i < 5; i++)
        want[1 + i] = PAT(5 + i);
    expect_bytes(t, want, 6);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zbuf_delete(t), 0);
}

Test(split, repeated_framing_takes_messages_off_the_front)
{
    static const size_t lens[] = {7, 2, 9, 3, 5};
    zbuf_t *z = make(lens, 5);
    size_t pos = 0;

    /* Frames of 4 bytes, none aligned with a segment. */
    while (zbuf_length(z) >= 4) {
        zbuf_t *h;
        zbuf_stats_t st = stats();

        cr_assert_eq(zbuf_split_head(z, 4, &h), 0);
        cr_assert_eq(stats().bytes_copied, st.bytes_copied);
        expect_pat(h, pos, 4);
        expect_pat(z, pos + 4, 26 - pos - 4);
        cr_assert_eq(zbuf_delete(h), 0);
        pos += 4;
    }
    cr_assert_eq(pos, 24);
    cr_assert_eq(released[0] + released[1] + released[2] + released[3], 4);
    cr_assert_eq(released[4], 0);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(released[4], 1);
}

/* A rejected split: no new zbuf, z unchanged, nothing released. */
static void split_rejected(bool head, size_t off, bool null_out, int want)
{
    static const size_t lens[] = {3, 4};
    zbuf_t *z = make(lens, 2);
    zbuf_t *t = NULL;
    snap_t before;
    zbuf_stats_t st;
    int rc;

    snap(&before, z);
    st = stats();
    if (head)
        rc = zbuf_split_head(z, off, null_out ? NULL : &t);
    else
        rc = zbuf_split(z, off, null_out ? NULL : &t);
    cr_assert_eq(rc, want, "off %zu", off);
    assert_unchanged(&before, z);
    cr_assert_eq(stats().live_zbufs, st.live_zbufs);
    cr_assert_eq(stats().live_segs, st.live_segs);
    expect_released(none, 2);
    cr_assert_eq(zbuf_delete(z), 0);
    memset(released, 0, sizeof released);
}

Test(split, past_the_end_is_erange)
{
    for (int head = 0; head <= 1; head++) {
        split_rejected(head, 8, false, -ERANGE);
        split_rejected(head, SIZE_MAX - 1, false, -ERANGE);
        split_rejected(head, ZBUF_OFF_END, false, -ERANGE);
    }
}

Test(split, null_out_is_einval)
{
    split_rejected(false, 3, true, -EINVAL);
    split_rejected(true, 3, true, -EINVAL);
}

Test(split, null_or_deleted_zbuf_is_einval)
{
    zbuf_t *z, *t;
    zbuf_stats_t st;

    cr_assert_eq(zbuf_split(NULL, 0, &t), -EINVAL);
    cr_assert_eq(zbuf_split_head(NULL, 0, &t), -EINVAL);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_delete(z), 0);
    st = stats();
    cr_assert_eq(zbuf_split(z, 0, &t), -EINVAL);
    cr_assert_eq(zbuf_split_head(z, 0, &t), -EINVAL);
    cr_assert_eq(stats().live_zbufs, st.live_zbufs);
}
