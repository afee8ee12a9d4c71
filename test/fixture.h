/* SPDX-License-Identifier: MIT */
/*
 * Fixtures shared by the core unit tests: zbufs built from a known byte
 * pattern, counted release callbacks for enrolled caller memory, and
 * snapshots that prove an operation left a zbuf exactly as it was.
 *
 * Every helper asserts with Criterion, so it may only be called from a
 * test (or its init/fini); a failed check ends the test at once.  None of
 * them copies through zbuf_copyout(), so bytes_copied in zbuf_stats_t only
 * moves when the code under test copies.
 */
#ifndef ZBUF_TEST_FIXTURE_H
#define ZBUF_TEST_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include <zbuf/zbuf.h>

/* Byte i of a zbuf built by zt_make() or zt_make_heap() is ZT_PAT(i), so any
 * range can be checked without keeping a copy. */
#define ZT_PAT(i) ((uint8_t)((size_t)(i) * 37u + 11u))

/* At most ZT_MAXSEGS enrolled buffers of at most ZT_SEGMAX bytes each. */
#define ZT_MAXSEGS 8
#define ZT_SEGMAX 64

/* A snapshot holds at most ZT_SNAPSEGS segments and ZT_SNAPBYTES bytes. */
#define ZT_SNAPSEGS 64
#define ZT_SNAPBYTES 4096

/* Caller memory enrolled by zt_make(): buffer k is zt_mem[k], and its
 * release callback counts in zt_released[k]. */
extern uint8_t zt_mem[ZT_MAXSEGS][ZT_SEGMAX];
extern int zt_released[ZT_MAXSEGS];

/* All zeros: pass to zt_expect_released() for "nothing released". */
extern const int zt_none[ZT_MAXSEGS];

/* A new zbuf of @p n enrolled segments of lengths @p lens (n <= ZT_MAXSEGS,
 * each <= ZT_SEGMAX).  Segment k is zt_mem[k]; zt_released[k] is reset to 0
 * and counts its release.  The caller deletes the zbuf. */
zbuf_t *zt_make(const size_t *lens, size_t n);

/* A new zbuf of @p n library-owned (writable, copied-in) segments of lengths
 * @p lens (each <= ZT_SEGMAX).  The caller deletes the zbuf. */
zbuf_t *zt_make_heap(const size_t *lens, size_t n);

/* What a zbuf looks like: its bytes and the place and length of each
 * segment. */
typedef struct {
    size_t len;
    size_t nsegs;
    const void *data[ZT_SNAPSEGS];
    size_t seglen[ZT_SNAPSEGS];
    uint8_t bytes[ZT_SNAPBYTES];
} zt_snap_t;

/* Fill @p s from @p z (borrowed), checking that the segment walk agrees with
 * zbuf_length() and zbuf_seg_count() and that no segment is empty. */
void zt_snap(zt_snap_t *s, const zbuf_t *z);

/* Assert that @p z passes the chain check and holds the same bytes in the
 * same segments (same addresses, same lengths) as in @p before. */
void zt_assert_unchanged(const zt_snap_t *before, const zbuf_t *z);

/* Assert that @p z passes the chain check and holds exactly the @p n bytes
 * at @p want. */
void zt_expect_bytes(const zbuf_t *z, const uint8_t *want, size_t n);

/* Assert that @p z holds exactly ZT_PAT(from) .. ZT_PAT(from + n - 1). */
void zt_expect_pat(const zbuf_t *z, size_t from, size_t n);

/* The process-wide counters right now. */
zbuf_stats_t zt_stats(void);

/* Assert that zt_released[k] == want[k] for every k < @p n. */
void zt_expect_released(const int *want, size_t n);

#endif
