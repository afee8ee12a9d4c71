/* SPDX-License-Identifier: MIT */
/*
 * VxWorks zbufLib compatibility layer (see include/zbuf/vxworks.h).
 *
 * Every routine does three things: check its handles, turn the VxWorks
 * (segment, offset, len) arguments into the absolute offsets of the modern
 * API, and call that API, turning a negative errno into errno plus
 * ERROR/NULL.  The core guarantees that a failed call changes nothing, so
 * this layer needs no undo code of its own: it only has to do all of its
 * own checking before the one core call that modifies anything.
 *
 * Handles are checked with the public O(1) predicates zbuf_valid() and
 * zbuf_seg_valid(), so that a bad ZBUF_ID or ZBUF_SEG is an EINVAL rather
 * than something the core could only report through ambiguous NULL returns.
 * ZBUF_NONE is rejected before any segment pointer is looked at: it is not
 * an address.  The layer uses nothing but the installed API (zbuf/core.h):
 * it is its own library, zbuf-vxworks, with the zbufSockLib half
 * (vxworks_sock.c).
 *
 * Speed: zbufDup, zbufCut, zbufSplit and zbufExtractCopy make one call each
 * to the core's `_at` calls (zbuf_dup_at() ...), which take a location the
 * way VxWorks does (a segment and an offset relative to it, a length that
 * may run past the end) and check their arguments once; the layer only
 * maps ZBUF_BEGIN / ZBUF_END, ZBUF_NONE and a zero length, on its careful
 * paths (vx_where()).  Those fast paths are inline functions of the header
 * (zbuf__vx_dup_fast() ...), and the header also makes the six common
 * routines macros over them, so that a caller's common call skips this
 * library altogether; the routines here give the same answers, running
 * the same fast paths.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>

#include <zbuf/vxworks.h>

#if defined(__GNUC__)
#define VX_LIKELY(x) __builtin_expect(!!(x), 1)
/* The careful paths stay out of line, so that the fast path of a routine
 * saves no registers it does not use. */
#define VX_SLOW __attribute__((noinline, cold))
#else
#define VX_LIKELY(x) (x)
#define VX_SLOW
#endif

/* The free routine as this layer calls it; see zbufInsertBuf() in the header
 * for why one call shape serves both the int and the pointer-sized freeArg. */
typedef void (*vx_free_rtn)(caddr_t buf, intptr_t free_arg);

/* --------------------------------------------------------------- helpers */

VX_SLOW static int vx_fail(int neg_err)
{
    errno = -neg_err;
    return ERROR;
}

VX_SLOW static void *vx_fail_null(int neg_err)
{
    errno = -neg_err;
    return NULL;
}

/* 0 when z is a live zbuf and seg is NULL or one of its segments. */
static int vx_check(ZBUF_ID z, ZBUF_SEG seg)
{
    if (!zbuf_valid(z))
        return -EINVAL;
    if (seg != NULL && (seg == ZBUF_NONE || !zbuf_seg_valid(z, seg)))
        return -EINVAL;
    return 0;
}

/* Absolute offset (0 .. length) of the location (seg, offset), with
 * ZBUF_BEGIN / ZBUF_END mapped to the core's whole-zbuf markers.  This is
 * the check for an insertion point. */
static int vx_locate(ZBUF_ID z, ZBUF_SEG seg, int offset, size_t *abs)
{
    int64_t rel;
    int err = vx_check(z, seg);

    if (err != 0)
        return err;
    if (offset == ZBUF_BEGIN)
        rel = ZBUF_REL_BEGIN;
    else if (offset == ZBUF_END)
        rel = ZBUF_REL_END;
    else
        rel = offset;
    return zbuf_locate(z, seg, rel, abs);
}

/* The same for a location that must name a byte (0 .. length - 1). */
static int vx_locate_byte(ZBUF_ID z, ZBUF_SEG seg, int offset, size_t *abs)
{
    int err = vx_locate(z, seg, offset, abs);

    if (err == 0 && *abs >= zbuf_length(z))
        err = -ERANGE;
    return err;
}

/* The common case of both: no segment, a plain offset inside the zbuf (up
 * to the length itself for an insertion point).  Inline, so that a VxWorks
 * call costs the core call it makes and little more (see docs/benchmarks.md:
 * the layer must stay within 10 % of the modern API).  *len is the zbuf's
 * length on success.  zbuf_length() reads 0 for a dead handle, so only an
 * insertion at 0 needs the explicit zbuf_valid(). */
static inline int vx_where(ZBUF_ID z, ZBUF_SEG seg, int offset, bool point, size_t *abs,
                           size_t *len)
{
    if (VX_LIKELY(seg == NULL && offset >= 0 && offset != ZBUF_END)) {
        size_t n = zbuf_length(z);
        if ((size_t)offset < n || (point && (size_t)offset == n && (n > 0 || zbuf_valid(z)))) {
            *abs = (size_t)offset;
            *len = n;
            return 0;
        }
    }
    int err = point ? vx_locate(z, seg, offset, abs) : vx_locate_byte(z, seg, offset, abs);
    *len = zbuf_length(z);
    return err;
}

/* Whether (seg, offset) can go to the core's `_at` calls as it is: a
 * segment handle or NULL (not ZBUF_NONE, which is no address) and an offset
 * relative to it (not ZBUF_BEGIN / ZBUF_END).  Those calls take VxWorks'
 * location of a byte and its "len too long means to the end" themselves and
 * check everything once, so their error is the routine's error.  The fast
 * paths (zbuf__vx_dup_fast() ...) are in the header, shared with the inline
 * versions of the routines. */
static inline bool vx_plain(ZBUF_SEG seg, int offset)
{
    return zbuf__vx_plain(seg, offset);
}

/* A VxWorks length from byte `abs` of a zbuf of `total` bytes, as a count:
 * negative or past the end means "to the end". */
static inline size_t vx_count(size_t total, size_t abs, int len)
{
    size_t rest = total - abs;
    return len < 0 || (size_t)len > rest ? rest : (size_t)len;
}

/* The core's release callback for enrolled buffers: hand the buffer to the
 * VxWorks free routine.  The routine and its argument are the buffer's two
 * user words (zbuf_insert_buf2()), so nothing is allocated per buffer. */
static void vx_release(void *data, size_t size, void *rtn, void *arg)
{
    (void)size;
    ((vx_free_rtn)(void (*)(void))rtn)((caddr_t)data, (intptr_t)arg);
}

/* ---------------------------------------------------------- life cycle */

ZBUF_ID zbufCreate(void)
{
    zbuf_t *z;
    int err = zbuf_create(&z);

    return err == 0 ? z : vx_fail_null(err);
}

STATUS zbufDelete(ZBUF_ID zbufId)
{
    return zbuf__vx_delete(zbufId);
}

/* ----------------------------------------------------------- insertion */

ZBUF_SEG zbufInsert(ZBUF_ID zbufId1, ZBUF_SEG zbufSeg, int offset, ZBUF_ID zbufId2)
{
    zbuf_seg_t *first;
    size_t abs, total;
    int err = vx_where(zbufId1, zbufSeg, offset, true, &abs, &total);

    if (err != 0)
        return vx_fail_null(err);
    /* An empty zbufId2 would leave nothing to return; refuse it before the
     * core consumes it, so the caller still owns it. */
    if (zbufId2 == zbufId1 || zbuf_length(zbufId2) == 0)
        return vx_fail_null(-EINVAL);
    err = zbuf_insert(zbufId1, abs, zbufId2, &first);
    return err == 0 ? first : vx_fail_null(err);
}

ZBUF_SEG zbufInsertBuf(ZBUF_ID zbufId, ZBUF_SEG zbufSeg, int offset, caddr_t buf, int len,
                       VOIDFUNCPTR freeRtn, intptr_t freeArg)
{
    zbuf_seg_t *seg;
    size_t abs, total;
    int err = vx_where(zbufId, zbufSeg, offset, true, &abs, &total);

    if (err != 0)
        return vx_fail_null(err);
    if (buf == NULL || len <= 0)
        return vx_fail_null(-EINVAL);
    err = zbuf_insert_buf2(zbufId, abs, buf, (size_t)len, freeRtn != NULL ? vx_release : NULL,
                           (void *)(void (*)(void))freeRtn, (void *)freeArg, &seg);
    return err == 0 ? seg : vx_fail_null(err);
}

ZBUF_SEG zbufInsertCopy(ZBUF_ID zbufId, ZBUF_SEG zbufSeg, int offset, caddr_t buf, int len)
{
    zbuf_seg_t *seg;
    size_t abs, total;
    int err = vx_where(zbufId, zbufSeg, offset, true, &abs, &total);

    if (err != 0)
        return vx_fail_null(err);
    if (buf == NULL || len <= 0)
        return vx_fail_null(-EINVAL);
    err = zbuf_insert_copy(zbufId, abs, buf, (size_t)len, &seg);
    return err == 0 ? seg : vx_fail_null(err);
}

/* -------------------------------------------------------------- copy out */

/* zbufExtractCopy() with every check, for any location. */
VX_SLOW static int vx_extract_slow(ZBUF_ID zbufId, ZBUF_SEG zbufSeg, int offset, caddr_t buf,
                                   int len)
{
    size_t abs, total, n;
    ssize_t got;
    int err = vx_where(zbufId, zbufSeg, offset, false, &abs, &total);

    if (err != 0)
        return vx_fail(err);
    if (buf == NULL)
        return vx_fail(-EINVAL);
    if (len == 0)
        return 0;
    /* The count must fit an int. */
    n = vx_count(total, abs, len);
    if (n > INT_MAX)
        n = INT_MAX;
    got = zbuf_copyout(zbufId, abs, buf, n);
    return got >= 0 ? (int)got : vx_fail((int)got);
}

int zbufExtractCopy(ZBUF_ID zbufId, ZBUF_SEG zbufSeg, int offset, caddr_t buf, int len)
{
    if (VX_LIKELY(vx_plain(zbufSeg, offset) && buf != NULL))
        return zbuf__vx_extract_fast(zbufId, zbufSeg, offset, buf, len);
    return vx_extract_slow(zbufId, zbufSeg, offset, buf, len);
}

/* --------------------------------------------------------- rearranging */

/* The bytes a zbufCut() or zbufDup() names, checked: the location, then a
 * length of 0 refused (in that order, as VxWorks reports them). */
VX_SLOW static int vx_range(ZBUF_ID z, ZBUF_SEG seg, int offset, int len, size_t *abs,
                            size_t *count)
{
    size_t total;
    int err = vx_where(z, seg, offset, false, abs, &total);
    if (err == 0 && len == 0)
        err = -EINVAL;
    if (err == 0)
        *count = vx_count(total, *abs, len);
    return err;
}

/* zbufCut() with every check, for any location. */
VX_SLOW static ZBUF_SEG vx_cut_slow(ZBUF_ID zbufId, ZBUF_SEG zbufSeg, int offset, int len)
{
    zbuf_seg_t *after;
    size_t abs, count;
    int err = vx_range(zbufId, zbufSeg, offset, len, &abs, &count);

    if (err == 0)
        err = zbuf_cut(zbufId, abs, count, &after);
    if (err != 0)
        return vx_fail_null(err);
    return after != NULL ? after : ZBUF_NONE;
}

ZBUF_SEG zbufCut(ZBUF_ID zbufId, ZBUF_SEG zbufSeg, int offset, int len)
{
    /* One core call (a length of 0 is refused after the location checks,
     * by the careful path). */
    if (VX_LIKELY(vx_plain(zbufSeg, offset) && len != 0))
        return zbuf__vx_cut_fast(zbufId, zbufSeg, offset, len);
    return vx_cut_slow(zbufId, zbufSeg, offset, len);
}

/* zbufSplit() with every check, for any location. */
VX_SLOW static ZBUF_ID vx_split_slow(ZBUF_ID zbufId, ZBUF_SEG zbufSeg, int offset)
{
    zbuf_t *tail;
    size_t abs, total;
    int err = vx_where(zbufId, zbufSeg, offset, false, &abs, &total);

    if (err == 0)
        err = zbuf_split(zbufId, abs, &tail);
    return err == 0 ? tail : vx_fail_null(err);
}

ZBUF_ID zbufSplit(ZBUF_ID zbufId, ZBUF_SEG zbufSeg, int offset)
{
    /* One core call: zbuf_split_at() also refuses the end of the zbuf,
     * which VxWorks calls out of range. */
    if (VX_LIKELY(vx_plain(zbufSeg, offset)))
        return zbuf__vx_split_fast(zbufId, zbufSeg, offset);
    return vx_split_slow(zbufId, zbufSeg, offset);
}

/* zbufDup() with every check, for any location. */
VX_SLOW static ZBUF_ID vx_dup_slow(ZBUF_ID zbufId, ZBUF_SEG zbufSeg, int offset, int len)
{
    zbuf_t *dup;
    size_t abs, count;
    int err = vx_range(zbufId, zbufSeg, offset, len, &abs, &count);

    if (err == 0)
        err = zbuf_dup(zbufId, abs, count, &dup);
    return err == 0 ? dup : vx_fail_null(err);
}

ZBUF_ID zbufDup(ZBUF_ID zbufId, ZBUF_SEG zbufSeg, int offset, int len)
{
    /* One core call (a length of 0 is refused after the location checks,
     * by the careful path). */
    if (VX_LIKELY(vx_plain(zbufSeg, offset) && len != 0))
        return zbuf__vx_dup_fast(zbufId, zbufSeg, offset, len);
    return vx_dup_slow(zbufId, zbufSeg, offset, len);
}

int zbufLength(ZBUF_ID zbufId)
{
    /* zbuf_length() reads 0 for a dead handle: check only then. */
    size_t len = zbuf_length(zbufId);

    if (len == 0 && !zbuf_valid(zbufId))
        return vx_fail(-EINVAL);
    return len <= INT_MAX ? (int)len : vx_fail(-EOVERFLOW);
}

/* -------------------------------------------------------------- segments */

ZBUF_SEG zbufSegFind(ZBUF_ID zbufId, ZBUF_SEG zbufSeg, int *pOffset)
{
    zbuf_seg_t *seg;
    size_t abs, seg_off;
    int err;

    if (pOffset == NULL)
        return vx_fail_null(-EINVAL);
    err = vx_locate_byte(zbufId, zbufSeg, *pOffset, &abs);
    if (err == -ERANGE)
        return NULL; /* outside the zbuf: "no such segment", not an error */
    if (err != 0)
        return vx_fail_null(err);
    seg = zbuf_seg_find(zbufId, abs, &seg_off);
    if (seg == NULL || seg_off > INT_MAX)
        return vx_fail_null(seg == NULL ? -EFAULT : -EOVERFLOW);
    *pOffset = (int)seg_off;
    return seg;
}

ZBUF_SEG zbufSegNext(ZBUF_ID zbufId, ZBUF_SEG zbufSeg)
{
    int err = vx_check(zbufId, zbufSeg);

    if (err != 0)
        return vx_fail_null(err);
    if (zbufSeg == NULL) {
        zbufSeg = zbuf_seg_first(zbufId);
        if (zbufSeg == NULL)
            return NULL; /* empty: no first segment, so nothing after it */
    }
    return zbuf_seg_next(zbufId, zbufSeg);
}

ZBUF_SEG zbufSegPrev(ZBUF_ID zbufId, ZBUF_SEG zbufSeg)
{
    int err = vx_check(zbufId, zbufSeg);

    if (err != 0)
        return vx_fail_null(err);
    if (zbufSeg == NULL)
        return NULL; /* the first segment has no predecessor */
    return zbuf_seg_prev(zbufId, zbufSeg);
}

/* The segment a NULL-means-first argument names, or NULL with errno set. */
static ZBUF_SEG vx_seg_or_first(ZBUF_ID zbufId, ZBUF_SEG zbufSeg)
{
    int err = vx_check(zbufId, zbufSeg);

    if (err != 0)
        return vx_fail_null(err);
    if (zbufSeg == NULL && (zbufSeg = zbuf_seg_first(zbufId)) == NULL)
        return vx_fail_null(-EINVAL);
    return zbufSeg;
}

caddr_t zbufSegData(ZBUF_ID zbufId, ZBUF_SEG zbufSeg)
{
    void *data;

    zbufSeg = vx_seg_or_first(zbufId, zbufSeg);
    if (zbufSeg == NULL)
        return NULL;
    data = zbuf_seg_data(zbufId, zbufSeg);
    return data != NULL ? (caddr_t)data : vx_fail_null(-ENOTSUP);
}

int zbufSegLength(ZBUF_ID zbufId, ZBUF_SEG zbufSeg)
{
    size_t len;

    zbufSeg = vx_seg_or_first(zbufId, zbufSeg);
    if (zbufSeg == NULL)
        return ERROR;
    len = zbuf_seg_length(zbufId, zbufSeg);
    return len <= INT_MAX ? (int)len : vx_fail(-EOVERFLOW);
}
