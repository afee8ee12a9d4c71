/* SPDX-License-Identifier: MIT */
/*
 * Fixtures shared by the core unit tests (see fixture.h).
 */
#include "fixture.h"

#include <stdlib.h>
#include <string.h>

#include "support.h"

uint8_t zt_mem[ZT_MAXSEGS][ZT_SEGMAX];
int zt_released[ZT_MAXSEGS];
const int zt_none[ZT_MAXSEGS];

zbuf_t *zt_make(const size_t *lens, size_t n)
{
    zbuf_t *z;
    size_t pos = 0;

    cr_assert_leq(n, ZT_MAXSEGS);
    cr_assert_eq(zbuf_create(&z), 0);
    for (size_t k = 0; k < n; k++) {
        cr_assert_leq(lens[k], ZT_SEGMAX);
        zt_released[k] = 0;
        for (size_t i = 0; i < lens[k]; i++)
            zt_mem[k][i] = ZT_PAT(pos + i);
        cr_assert_eq(zbuf_insert_buf(z, ZBUF_OFF_END, zt_mem[k], lens[k], zt_count_release,
                                     &zt_released[k], NULL),
                     0);
        pos += lens[k];
        zt_check(z);
    }
    cr_assert_eq(zbuf_length(z), pos);
    cr_assert_eq(zbuf_seg_count(z), n);
    return z;
}

zbuf_t *zt_make_heap(const size_t *lens, size_t n)
{
    zbuf_t *z;
    size_t pos = 0;
    uint8_t tmp[ZT_SEGMAX];

    cr_assert_eq(zbuf_create(&z), 0);
    for (size_t k = 0; k < n; k++) {
        zbuf_seg_t *s = NULL;
        cr_assert_leq(lens[k], ZT_SEGMAX);
        for (size_t i = 0; i < lens[k]; i++)
            tmp[i] = ZT_PAT(pos + i);
        cr_assert_eq(zbuf_insert_copy(z, ZBUF_OFF_END, tmp, lens[k], &s), 0);
        zt_check(z);
        cr_assert_eq(zbuf_seg_length(z, s), lens[k]);
        pos += lens[k];
    }
    cr_assert_eq(zbuf_length(z), pos);
    cr_assert_eq(zbuf_seg_count(z), n);
    return z;
}

void zt_snap(zt_snap_t *s, const zbuf_t *z)
{
    size_t k = 0, pos = 0;

    memset(s, 0, sizeof *s);
    s->len = zbuf_length(z);
    s->nsegs = zbuf_seg_count(z);
    cr_assert_leq(s->len, ZT_SNAPBYTES);
    for (zbuf_seg_t *g = zbuf_seg_first(z); g != NULL; g = zbuf_seg_next(z, g), k++) {
        cr_assert_lt(k, ZT_SNAPSEGS);
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

void zt_assert_unchanged(const zt_snap_t *before, const zbuf_t *z)
{
    zt_snap_t *now = malloc(sizeof *now);

    cr_assert_not_null(now);
    zt_check(z);
    zt_snap(now, z);
    cr_assert_eq(now->len, before->len, "length %zu -> %zu", before->len, now->len);
    cr_assert_eq(now->nsegs, before->nsegs, "segments %zu -> %zu", before->nsegs, now->nsegs);
    for (size_t k = 0; k < now->nsegs; k++) {
        cr_assert_eq(now->data[k], before->data[k], "segment %zu moved", k);
        cr_assert_eq(now->seglen[k], before->seglen[k], "segment %zu resized", k);
    }
    cr_assert_eq(memcmp(now->bytes, before->bytes, now->len), 0, "bytes changed");
    free(now);
}

void zt_expect_bytes(const zbuf_t *z, const uint8_t *want, size_t n)
{
    zt_snap_t *now = malloc(sizeof *now);

    cr_assert_not_null(now);
    zt_check(z);
    zt_snap(now, z);
    cr_assert_eq(now->len, n, "length %zu, expected %zu", now->len, n);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(now->bytes[i], want[i], "byte %zu is %u, expected %u", i, now->bytes[i],
                     want[i]);
    free(now);
}

void zt_expect_pat(const zbuf_t *z, size_t from, size_t n)
{
    uint8_t want[ZT_SNAPBYTES];

    cr_assert_leq(n, ZT_SNAPBYTES);
    for (size_t i = 0; i < n; i++)
        want[i] = ZT_PAT(from + i);
    zt_expect_bytes(z, want, n);
}

zbuf_stats_t zt_stats(void)
{
    zbuf_stats_t st;
    zbuf_stats_get(&st);
    return st;
}

void zt_expect_released(const int *want, size_t n)
{
    for (size_t k = 0; k < n; k++)
        cr_assert_eq(zt_released[k], want[k], "buffer %zu released %d times, expected %d", k,
                     zt_released[k], want[k]);
}
