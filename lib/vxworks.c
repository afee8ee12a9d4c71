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
 * Handles are checked with the library's private predicates (internal.h) so
 * that a bad ZBUF_ID or ZBUF_SEG is an O(1) EINVAL rather than something the
 * core could only report through ambiguous NULL returns.  ZBUF_NONE is
 * rejected before any segment pointer is looked at: it is not an address.
 *
 * The zbufSockLib half lives in the socket adapter, not here: the core
 * library must not depend on sockets (see the marked place in the header).
 */
#include "internal.h"

#include <zbuf/vxworks.h>

/* The free routine as this layer calls it; see zbufInsertBuf() in the header
 * for why one call shape serves both the int and the pointer-sized freeArg. */
typedef void (*vx_free_rtn)(caddr_t buf, intptr_t free_arg);

/* --------------------------------------------------------------- helpers */

static int vx_fail(int neg_err)
{
    errno = -neg_err;
    return ERROR;
}

static void *vx_fail_null(int neg_err)
{
    errno = -neg_err;
    return NULL;
}

/* 0 when z is a live zbuf and seg is NULL or one of its segments. */
static int vx_check(ZBUF_ID z, ZBUF_SEG seg)
{
    if (!zbuf__valid(z))
        return -EINVAL;
    if (seg != NULL && (seg == ZBUF_NONE || !zbuf__seg_of(z, seg)))
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
 * the layer must stay within 10 % of the modern API). */
static inline int vx_where(ZBUF_ID z, ZBUF_SEG seg, int offset, bool point, size_t *abs)
{
    if (ZBUF__LIKELY(seg == NULL && offset >= 0 && offset != ZBUF_END && zbuf__valid(z) &&
                     ((size_t)offset < z->len || (point && (size_t)offset == z->len)))) {
        *abs = (size_t)offset;
        return 0;
    }
    return point ? vx_locate(z, seg, offset, abs) : vx_locate_byte(z, seg, offset, abs);
}

/* A VxWorks length from byte `abs` on, as a count: negative or past the end
 * means "to the end". */
static inline size_t vx_count(ZBUF_ID z, size_t abs, int len)
{
    size_t rest = z->len - abs;
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
    /* The core treats NULL as a no-op; VxWorks calls it an invalid id. */
    if (!zbuf__valid(zbufId))
        return vx_fail(-EINVAL);
    return zbuf__delete(zbufId); /* 0 == OK: a tail call */
}

/* ----------------------------------------------------------- insertion */

ZBUF_SEG zbufInsert(ZBUF_ID zbufId1, ZBUF_SEG zbufSeg, int offset, ZBUF_ID zbufId2)
{
    zbuf_seg_t *first;
    size_t abs;
    int err = vx_where(zbufId1, zbufSeg, offset, true, &abs);

    if (err != 0)
        return vx_fail_null(err);
    /* An empty zbufId2 would leave nothing to return; refuse it before the
     * core consumes it, so the caller still owns it. */
    if (!zbuf__valid(zbufId2) || zbufId2 == zbufId1 || zbuf_length(zbufId2) == 0)
        return vx_fail_null(-EINVAL);
    err = zbuf_insert(zbufId1, abs, zbufId2, &first);
    return err == 0 ? first : vx_fail_null(err);
}

ZBUF_SEG zbufInsertBuf(ZBUF_ID zbufId, ZBUF_SEG zbufSeg, int offset, caddr_t buf, int len,
                       VOIDFUNCPTR freeRtn, intptr_t freeArg)
{
    zbuf_seg_t *seg;
    size_t abs;
    int err = vx_where(zbufId, zbufSeg, offset, true, &abs);

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
    size_t abs;
    int err = vx_where(zbufId, zbufSeg, offset, true, &abs);

    if (err != 0)
        return vx_fail_null(err);
    if (buf == NULL || len <= 0)
        return vx_fail_null(-EINVAL);
    err = zbuf_insert_copy(zbufId, abs, buf, (size_t)len, &seg);
    return err == 0 ? seg : vx_fail_null(err);
}

/* -------------------------------------------------------------- copy out */

int zbufExtractCopy(ZBUF_ID zbufId, ZBUF_SEG zbufSeg, int offset, caddr_t buf, int len)
{
    size_t abs, n;
    int err = vx_where(zbufId, zbufSeg, offset, false, &abs);

    if (err != 0)
        return vx_fail(err);
    if (buf == NULL)
        return vx_fail(-EINVAL);
    if (len == 0)
        return 0;
    /* The count must fit an int. */
    n = vx_count(zbufId, abs, len);
    if (n > INT_MAX)
        n = INT_MAX;
    err = zbuf__copyout(zbufId, abs, buf, n);
    return err == 0 ? (int)n : vx_fail(err);
}

/* --------------------------------------------------------- rearranging */

ZBUF_SEG zbufCut(ZBUF_ID zbufId, ZBUF_SEG zbufSeg, int offset, int len)
{
    zbuf_seg_t *after;
    size_t abs;
    int err = vx_where(zbufId, zbufSeg, offset, false, &abs);

    if (err != 0)
        return vx_fail_null(err);
    if (len == 0)
        return vx_fail_null(-EINVAL);
    err = zbuf__cut(zbufId, abs, vx_count(zbufId, abs, len), &after);
    if (err != 0)
        return vx_fail_null(err);
    return after != NULL ? after : ZBUF_NONE;
}

ZBUF_ID zbufSplit(ZBUF_ID zbufId, ZBUF_SEG zbufSeg, int offset)
{
    zbuf_t *tail;
    size_t abs;
    int err = vx_where(zbufId, zbufSeg, offset, false, &abs);

    if (err != 0)
        return vx_fail_null(err);
    tail = zbuf__split(zbufId, abs);
    return tail != NULL ? tail : vx_fail_null(-ENOMEM);
}

ZBUF_ID zbufDup(ZBUF_ID zbufId, ZBUF_SEG zbufSeg, int offset, int len)
{
    zbuf_t *dup;
    size_t abs;
    int err = vx_where(zbufId, zbufSeg, offset, false, &abs);

    if (err != 0)
        return vx_fail_null(err);
    if (len == 0)
        return vx_fail_null(-EINVAL);
    dup = zbuf__dup(zbufId, abs, vx_count(zbufId, abs, len));
    return dup != NULL ? dup : vx_fail_null(-ENOMEM);
}

int zbufLength(ZBUF_ID zbufId)
{
    if (!zbuf__valid(zbufId))
        return vx_fail(-EINVAL);
    size_t len = zbufId->len;
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
