/* SPDX-License-Identifier: MIT */
/**
 * @file zbuf/vxworks.h
 * @brief VxWorks 5.x compatibility: the `zbufLib` routines, names and types.
 *
 * Code written for the VxWorks `zbufLib` facility compiles and runs against
 * libzbuf with only its `#include` lines changed to `<zbuf/vxworks.h>`.  This
 * is the one header of the library that keeps the VxWorks mixed-case
 * spelling; everything here is a thin layer over the modern API of
 * zbuf/core.h, and the handles are the modern ones: a #ZBUF_ID is a
 * `zbuf_t *` and a #ZBUF_SEG a `zbuf_seg_t *`, so a program may mix both
 * APIs on the same zbufs.  The notes below state the contract (the
 * documented behaviour of VxWorks 5.x `zbufLib`, in the project's words) and
 * how it maps onto libzbuf.
 *
 * **Addressing.**  Most routines take a location `(zbufSeg, offset)`:
 * `offset` counts bytes from the first byte of `zbufSeg`, and may be negative
 * (bytes before that segment) or run past its end into the following
 * segments.  `zbufSeg == NULL` means the first segment, so `offset` is then
 * absolute.  #ZBUF_BEGIN and #ZBUF_END mean the start and the end of the
 * whole zbuf whatever `zbufSeg` is.  The layer turns a location into an
 * absolute offset with zbuf_locate().
 *
 * - A *data* location must name a byte: for an N-byte zbuf the valid
 *   absolute offsets are 0 .. N-1 (so #ZBUF_END and any location in an empty
 *   zbuf are out of range).
 * - An *insertion* location says where the new bytes will begin: they go
 *   just before the addressed byte.  Absolute offsets 0 .. N are valid;
 *   `(seg, zbufSegLength(seg))` appends just after `seg`, #ZBUF_END appends
 *   to the zbuf.  In an empty zbuf the only position is 0: `(NULL, 0)`, or
 *   equally #ZBUF_BEGIN / #ZBUF_END with a NULL segment.
 * - A length `len` that is negative or reaches past the end means "to the
 *   end" (zbufExtractCopy(), zbufCut(), zbufDup()).
 *
 * **Errors.**  A failing routine returns #ERROR (or NULL), sets `errno` and
 * changes nothing: the zbufs hold the same bytes in the same segments, the
 * caller keeps every buffer and zbuf it owned, and no free routine runs.
 * The `errno` values are the standard ones of the modern API (VxWorks' own
 * `S_zbufLib_*` codes are not provided, because several of them would have to
 * share one value):
 * - `EINVAL`: a NULL or deleted #ZBUF_ID (a deleted one is recognised as long
 *   as its memory has not been reused for a new zbuf), a #ZBUF_SEG that is not a segment
 *   of that zbuf (including #ZBUF_NONE), a NULL buffer or pointer argument,
 *   a length that must be positive and is not;
 * - `ERANGE`: the location lies outside the zbuf;
 * - `ENOMEM`: memory ran out;
 * - `EOVERFLOW`: a count does not fit in an `int`.
 * Routines that return NULL also to mean "no such segment" (zbufSegNext(),
 * zbufSegPrev(), zbufSegFind()) leave `errno` alone in that case; clear it
 * before the call to tell the two apart.
 *
 * **Free routines.**  zbufInsertBuf() enrolls a caller's buffer with a free
 * routine of the shape
 * @code
 * void freeRtn(caddr_t buf, int freeArg);      // VxWorks 5.x
 * void freeRtn(caddr_t buf, long freeArg);     // VxWorks 6.x (pointer-sized)
 * @endcode
 * The library calls it exactly once, with the enrolled address and
 * `freeArg`, when no segment of any zbuf references the buffer any more.  It
 * runs synchronously on the thread that dropped the last reference, inside
 * the libzbuf call that dropped it (zbufDelete(), zbufCut() ...); it must not
 * block and must not use the zbuf whose operation is running (it may use
 * other zbufs and free or reuse the buffer).  See zbufInsertBuf() for how both
 * widths of `freeArg` are accepted.
 *
 * **Threads.**  As in the modern API, one zbuf is used by one thread at a
 * time; different zbufs sharing buffers may be used by different threads.
 *
 * **Inline.**  zbufDup(), zbufCut(), zbufSplit(), zbufExtractCopy(),
 * zbufDelete() and zbufLength() are also defined as function-like macros
 * over inline code: a call with an ordinary location (a segment or NULL,
 * and an offset relative to it) makes one call of the modern API
 * (zbuf_dup_at(), zbuf_cut_at(), zbuf_split_at(), zbuf_copyout_at(),
 * zbuf_delete(), zbuf_length()) and costs what that call costs; any other
 * call goes to the library's function.  The behaviour is the same either
 * way, to the `errno` value.  The functions themselves are exported as
 * always: a pointer to them, a call written `(zbufDup)(...)`, or
 * `ZBUF_VX_NO_INLINE` defined before the include use them.
 *
 * **Not provided.**  `zbufLibInit()`: there is nothing to initialise.
 *
 * **Library.**  Both halves, these `zbufLib` routines and the `zbufSockLib`
 * ones of zbuf/vxworks_sock.h (included at the end of this header), are the
 * component `zbuf-vxworks`: pkg-config `zbuf-vxworks`, CMake
 * `zbuf::vxworks`, `-lzbuf-vxworks -lzbuf-sock -lzbuf`.  It is built on the
 * public API of zbuf/core.h and zbuf/sock.h only.
 *
 * Typical use, as in the original tcpBlaster:
 * @code
 * #include <zbuf/vxworks.h>
 *
 * ZBUF_ID master = zbufCreate();
 * zbufInsertBuf(master, NULL, 0, pBuffer, sendSize, NULL, 0);
 * for (;;) {
 *     ZBUF_ID z = zbufDup(master, NULL, 0, sendSize);  // shares, no copy
 *     zbufSockSend(sFd, z, sendSize, 0);               // consumes z (zbufSockLib)
 * }
 * @endcode
 */
#ifndef ZBUF_VXWORKS_H
#define ZBUF_VXWORKS_H

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>
#include <zbuf/core.h>

/** @cond INTERNAL */
/* Visibility of the component's routines (zbuf-vxworks): exported from the
 * shared library, plain in the static one (ZBUF_VX_STATIC). */
#if defined(ZBUF_VX_STATIC)
#define ZBUF_VX_EXPORT
#elif defined(ZBUF_VX_BUILDING)
#define ZBUF_VX_EXPORT __attribute__((visibility("default")))
#else
#define ZBUF_VX_EXPORT
#endif
/** @endcond */

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------- */
/** @name VxWorks base types (what `vxWorks.h` gave zbuf code) */
/** @{ */

/** VxWorks status type: #OK or #ERROR. */
typedef int STATUS;

#ifndef OK
/** Success value of a #STATUS. */
#define OK 0
#endif
#ifndef ERROR
/** Failure value of a #STATUS or of an `int` count; `errno` says why. */
#define ERROR (-1)
#endif

/**
 * Byte address, `char *` as in VxWorks and BSD.  glibc's `<sys/types.h>`
 * declares the same type under `_DEFAULT_SOURCE`; C11 allows the repeated,
 * identical typedef.
 */
typedef char *caddr_t;

/*
 * FUNCPTR and VOIDFUNCPTR are deliberately old-style (unprototyped) so that
 * a routine taking pointers and ints (every free routine) converts to them
 * without a cast, as VxWorks code expects (`zbufInsertBuf(..., appBufRetn,
 * 0)`).  The build
 * warns about non-prototype declarations, so that warning is silenced here,
 * for these two lines only, never in the including code.  C++ and C23 have
 * no unprototyped functions; there they are `(...)`, which VxWorks C++ code
 * reaches with a cast, as it always had to.
 */
#if defined(__cplusplus) || (defined(__STDC_VERSION__) && __STDC_VERSION__ >= 202311L)
/** Pointer to a routine returning `int`, any parameters (VxWorks `FUNCPTR`). */
typedef int (*FUNCPTR)(...);
/** Pointer to a routine returning nothing, any parameters (VxWorks
 *  `VOIDFUNCPTR`); the type of a zbuf free routine. */
typedef void (*VOIDFUNCPTR)(...);
#else
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#if defined(__clang__) && defined(__has_warning)
#if __has_warning("-Wdeprecated-non-prototype")
#pragma GCC diagnostic ignored "-Wdeprecated-non-prototype"
#endif
#endif
#endif
/** Pointer to a routine returning `int`, any parameters (VxWorks `FUNCPTR`). */
typedef int (*FUNCPTR)();
/** Pointer to a routine returning nothing, any parameters (VxWorks
 *  `VOIDFUNCPTR`); the type of a zbuf free routine. */
typedef void (*VOIDFUNCPTR)();
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
#endif

/** @} */
/* ---------------------------------------------------------------------- */
/** @name zbufLib types and constants */
/** @{ */

/** Handle of one zbuf: the modern `zbuf_t *`.  NULL means "none" or, when
 *  returned, failure. */
typedef zbuf_t *ZBUF_ID;

/**
 * Handle of one segment of one zbuf: the modern `zbuf_seg_t *`.  Passed in,
 * NULL means the first segment; returned, NULL means failure (or "no such
 * segment" where the routine says so).  Valid until the segment is removed,
 * split or moved to another zbuf.
 */
typedef zbuf_seg_t *ZBUF_SEG;

/** Offset meaning the first byte of the whole zbuf, whatever the segment. */
#define ZBUF_BEGIN (-INT_MAX)

/** Offset meaning the end of the whole zbuf (just after the last byte),
 *  whatever the segment: the place to append. */
#define ZBUF_END INT_MAX

/** Returned by zbufCut() when no byte follows the cut (it reached the end).
 *  Not a segment: passing it to any routine fails with `EINVAL`. */
#define ZBUF_NONE ((ZBUF_SEG)-1)

/** @} */
/* ---------------------------------------------------------------------- */
/** @name zbufLib routines */
/** @{ */

/**
 * @brief Create an empty zbuf.
 *
 * @return a new zbuf, which the caller deletes with zbufDelete() (or hands
 *         to a routine that consumes it); NULL with `errno` = `ENOMEM`.
 */
ZBUF_VX_EXPORT ZBUF_ID zbufCreate(void);

/**
 * @brief Delete a zbuf and every segment in it.
 *
 * Each segment drops its reference to its buffer; a buffer no other zbuf
 * references is released now, on this thread: enrolled buffers get their
 * free routine called before this returns.  Buffers still shared with other
 * zbufs stay alive.
 *
 * @param zbufId  the zbuf (consumed on success; the handle is dead).
 * @return #OK; #ERROR with `errno` = `EINVAL` for a NULL or deleted handle.
 */
ZBUF_VX_EXPORT STATUS zbufDelete(ZBUF_ID zbufId);

/**
 * @brief Move every segment of @p zbufId2 into @p zbufId1 at a location.
 *
 * No byte is copied and no buffer is released: the segments change zbuf.
 * The bytes of @p zbufId2 begin at the insertion location `(zbufSeg,
 * offset)` (0 .. N; #ZBUF_END appends).
 *
 * @param zbufId1  the zbuf that grows.
 * @param zbufSeg, offset  insertion location in @p zbufId1.
 * @param zbufId2  consumed on success: deleted, the handle is dead.  On
 *                 failure the caller still owns it, unchanged.
 * @return the first inserted segment; NULL with `errno` = `EINVAL` (bad
 *         handle or segment, @p zbufId2 empty or the same zbuf as
 *         @p zbufId1), `ERANGE` (location outside), `ENOMEM`.
 */
ZBUF_VX_EXPORT ZBUF_SEG zbufInsert(ZBUF_ID zbufId1, ZBUF_SEG zbufSeg, int offset, ZBUF_ID zbufId2);

/**
 * @brief Enroll a caller's buffer as a new segment, without copying it.
 *
 * The @p len bytes at @p buf become one new segment whose first byte is at
 * the insertion location `(zbufSeg, offset)` (0 .. N; #ZBUF_END appends).
 * From then on the buffer is *loaned* to the library: the caller must not
 * free or reuse it until @p freeRtn runs, and the library never writes into
 * it (the caller may, and every zbuf sharing it sees the change).
 *
 * When no segment of any zbuf (dups and splits included) references the
 * buffer any more, the library calls `freeRtn(buf, freeArg)` exactly once,
 * on the thread that dropped the last reference, inside that call.  A NULL
 * @p freeRtn means nobody is told.  If this routine fails, nothing was
 * enrolled: @p freeRtn is never called and the caller keeps the buffer.
 *
 * **Both widths of `freeArg`.**  VxWorks 5.x declares `freeArg` and the
 * free routine's second parameter as `int`; VxWorks 6 widened both to a
 * pointer-sized integer so that a pointer fits.  This layer declares the
 * parameter as `intptr_t`, stores it as such and calls the routine as
 * `void (*)(caddr_t, intptr_t)`:
 * - 5.x code passes an `int`; it converts to `intptr_t` without loss and a
 *   routine declared with `int freeArg` receives it back unchanged (on
 *   ILP32 the types are the same; on the LP64 ABIs Linux runs on, an `int`
 *   parameter is the low half of the register holding the value).
 * - 6.x code passes a pointer-sized value (`(long)pCtx`); a routine
 *   declared with `long` or `intptr_t` receives all of it.
 * A 5.x program therefore needs no change; a 6.x program gets its pointer
 * back intact.  The only thing not supported is a 5.x routine (`int`)
 * receiving a value that does not fit in an `int`, which 5.x could not
 * express either.
 *
 * @param zbufId  the zbuf.
 * @param zbufSeg, offset  insertion location.
 * @param buf  first byte; not NULL.  Loaned until @p freeRtn runs.
 * @param len  bytes, 1 or more.
 * @param freeRtn  `void freeRtn(caddr_t buf, int-or-long freeArg)`, or NULL.
 * @param freeArg  passed to @p freeRtn.
 * @return the new segment; NULL with `errno` = `EINVAL` (bad handle or
 *         segment, NULL @p buf, @p len not positive), `ERANGE`, `ENOMEM`.
 */
ZBUF_VX_EXPORT ZBUF_SEG zbufInsertBuf(ZBUF_ID zbufId, ZBUF_SEG zbufSeg, int offset, caddr_t buf,
                                   int len, VOIDFUNCPTR freeRtn, intptr_t freeArg);

/**
 * @brief Insert a copy of a caller's bytes.
 *
 * The @p len bytes at @p buf are copied into memory the library owns
 * (counted in zbuf_stats_t::bytes_copied) and inserted at `(zbufSeg,
 * offset)` (0 .. N; #ZBUF_END appends).  @p buf is only borrowed for the
 * call and is not tied to the zbuf afterwards.
 *
 * @param zbufId  the zbuf.
 * @param zbufSeg, offset  insertion location.
 * @param buf  source bytes (borrowed for the call); not NULL.
 * @param len  bytes, 1 or more.
 * @return the first inserted segment; NULL with `errno` = `EINVAL` (bad
 *         handle or segment, NULL @p buf, @p len not positive), `ERANGE`,
 *         `ENOMEM`.
 */
ZBUF_VX_EXPORT ZBUF_SEG zbufInsertCopy(ZBUF_ID zbufId, ZBUF_SEG zbufSeg, int offset, caddr_t buf,
                                    int len);

/**
 * @brief Copy bytes out of a zbuf into a caller's buffer.
 *
 * Copies from the byte at the data location `(zbufSeg, offset)` (0 .. N-1)
 * on, @p len bytes or up to the end of the zbuf, whichever comes first; a
 * negative @p len means "to the end".  The zbuf is not changed.  At most
 * `INT_MAX` bytes are copied in one call.
 *
 * @param zbufId  the zbuf (not changed).
 * @param zbufSeg, offset  data location of the first byte to copy.
 * @param buf  destination (borrowed); room for the bytes copied; not NULL.
 * @param len  bytes wanted; negative or too long = to the end; 0 copies
 *             nothing (the location is still checked).
 * @return the number of bytes copied; #ERROR with `errno` = `EINVAL`,
 *         `ERANGE` (no byte at the location), `EIO` (a file segment could not
 *         be read).
 */
ZBUF_VX_EXPORT int zbufExtractCopy(ZBUF_ID zbufId, ZBUF_SEG zbufSeg, int offset, caddr_t buf,
                                int len);

/**
 * @brief Delete bytes from a zbuf.
 *
 * Deletes @p len bytes from the byte at the data location `(zbufSeg,
 * offset)` (0 .. N-1); a negative or too long @p len means "to the end".
 * Segments left empty are removed (their buffers released if nobody else
 * references them: free routines may run now, on this thread); a cut
 * strictly inside one segment splits it in two.  Segment handles of removed
 * or split segments die.
 *
 * @param zbufId  the zbuf.
 * @param zbufSeg, offset  data location of the first byte to delete.
 * @param len  bytes to delete, not 0; negative or too long = to the end.
 * @return the segment holding the first byte after the cut, or #ZBUF_NONE
 *         when the cut reached the end of the zbuf; NULL with `errno` =
 *         `EINVAL` (bad handle or segment, @p len 0), `ERANGE`, `ENOMEM`
 *         (only when a segment must be split).
 */
ZBUF_VX_EXPORT ZBUF_SEG zbufCut(ZBUF_ID zbufId, ZBUF_SEG zbufSeg, int offset, int len);

/**
 * @brief Split a zbuf in two at a byte.
 *
 * The byte at the data location `(zbufSeg, offset)` (0 .. N-1) becomes the
 * first byte of a new zbuf that receives it and everything after it;
 * @p zbufId keeps the bytes before it (none, if the location is the first
 * byte).  No byte is copied; a segment straddling the split point becomes two
 * segments sharing its buffer.
 *
 * @param zbufId  the zbuf; keeps the head.
 * @param zbufSeg, offset  data location of the first byte of the tail.
 * @return a new zbuf with the tail, which the caller deletes; NULL with
 *         `errno` = `EINVAL` (bad handle or segment), `ERANGE` (no byte at
 *         the location), `ENOMEM`.
 */
ZBUF_VX_EXPORT ZBUF_ID zbufSplit(ZBUF_ID zbufId, ZBUF_SEG zbufSeg, int offset);

/**
 * @brief A new zbuf sharing bytes of another, without copying.
 *
 * The new zbuf holds @p len bytes from the data location `(zbufSeg,
 * offset)` (0 .. N-1) on; a negative or too long @p len means "to the end".
 * Its segments reference the same buffers: a change to those bytes is seen
 * through both zbufs, and a buffer's free routine runs only once every zbuf
 * referencing it is done with it.  @p zbufId is not changed.
 *
 * @param zbufId  the zbuf to share from (not changed).
 * @param zbufSeg, offset  data location of the first byte to share.
 * @param len  bytes to share, not 0; negative or too long = to the end.
 * @return a new zbuf, which the caller deletes; NULL with `errno` =
 *         `EINVAL` (bad handle or segment, @p len 0), `ERANGE`, `ENOMEM`.
 */
ZBUF_VX_EXPORT ZBUF_ID zbufDup(ZBUF_ID zbufId, ZBUF_SEG zbufSeg, int offset, int len);

/**
 * @brief Number of bytes in a zbuf (O(1)).
 *
 * @param zbufId  the zbuf.
 * @return the byte count (0 for an empty zbuf); #ERROR with `errno` =
 *         `EINVAL` for a bad handle, `EOVERFLOW` for more than `INT_MAX`
 *         bytes.
 */
ZBUF_VX_EXPORT int zbufLength(ZBUF_ID zbufId);

/**
 * @brief The segment holding a byte, and the byte's offset inside it.
 *
 * Finds the byte at the data location `(zbufSeg, *pOffset)` and rewrites
 * `*pOffset` as its offset from the start of the returned segment, so that
 * `(returned, *pOffset)` names the same byte.
 *
 * @param zbufId  the zbuf.
 * @param zbufSeg  segment the offset counts from; NULL for the first.
 * @param pOffset  in: offset relative to @p zbufSeg (#ZBUF_BEGIN allowed);
 *                 out: offset relative to the returned segment.  Unchanged
 *                 when NULL is returned.
 * @return the segment; NULL if the location is outside the zbuf (`errno`
 *         untouched), or NULL with `errno` = `EINVAL` for a bad handle,
 *         segment or NULL @p pOffset.
 */
ZBUF_VX_EXPORT ZBUF_SEG zbufSegFind(ZBUF_ID zbufId, ZBUF_SEG zbufSeg, int *pOffset);

/**
 * @brief The segment after @p zbufSeg.
 *
 * @param zbufId  the zbuf.
 * @param zbufSeg  a segment of @p zbufId, or NULL meaning the first segment
 *                 (so the result is the second).
 * @return the next segment; NULL after the last one or for an empty zbuf
 *         (`errno` untouched); NULL with `errno` = `EINVAL` for a bad handle
 *         or segment.
 */
ZBUF_VX_EXPORT ZBUF_SEG zbufSegNext(ZBUF_ID zbufId, ZBUF_SEG zbufSeg);

/**
 * @brief The segment before @p zbufSeg.
 *
 * @param zbufId  the zbuf.
 * @param zbufSeg  a segment of @p zbufId; NULL (the first segment) has no
 *                 predecessor.
 * @return the previous segment; NULL before the first one or for a NULL
 *         @p zbufSeg (`errno` untouched); NULL with `errno` = `EINVAL` for a
 *         bad handle or segment.
 */
ZBUF_VX_EXPORT ZBUF_SEG zbufSegPrev(ZBUF_ID zbufId, ZBUF_SEG zbufSeg);

/**
 * @brief Address of a segment's first byte.
 *
 * The segment's bytes are `zbufSegLength()` contiguous bytes from there,
 * valid while the segment exists.  They may be shared with other zbufs
 * (zbufDup(), zbufSplit()) and may be a caller's loaned buffer: treat them
 * as read-only unless you know the zbuf is their only user.
 *
 * @param zbufId  the zbuf.
 * @param zbufSeg  a segment of @p zbufId, or NULL for the first segment.
 * @return the address; NULL with `errno` = `EINVAL` (bad handle or segment,
 *         or NULL for an empty zbuf), `ENOTSUP` (a segment of a file range
 *         enrolled with zbuf_buf_wrap_file(), which has no address).
 */
ZBUF_VX_EXPORT caddr_t zbufSegData(ZBUF_ID zbufId, ZBUF_SEG zbufSeg);

/**
 * @brief Number of bytes in a segment (never 0).
 *
 * @param zbufId  the zbuf.
 * @param zbufSeg  a segment of @p zbufId, or NULL for the first segment.
 * @return the byte count; #ERROR with `errno` = `EINVAL` (bad handle or
 *         segment, or NULL for an empty zbuf), `EOVERFLOW` (more than
 *         `INT_MAX` bytes).
 */
ZBUF_VX_EXPORT int zbufSegLength(ZBUF_ID zbufId, ZBUF_SEG zbufSeg);

/** @} */

/** @cond INTERNAL */
/*
 * The common calls, inline.  zbufDup(), zbufCut(), zbufSplit(),
 * zbufExtractCopy(), zbufDelete() and zbufLength() are also function-like
 * macros over the inline functions below, so that a call with an ordinary
 * location (a segment or NULL, and an offset relative to it) makes the
 * core's call itself (zbuf_dup_at() ...), which checks every argument once,
 * and costs what the modern call costs.  Anything else (ZBUF_BEGIN /
 * ZBUF_END, ZBUF_NONE, a zero length, an empty or huge zbuf for
 * zbufLength()) goes to the library's function, which gives the same
 * answer for every argument: it runs the same fast paths (the *_fast
 * helpers) and the careful ones.  The functions stay: `(zbufDup)(...)`, a
 * pointer to zbufDup, or ZBUF_VX_NO_INLINE defined before the include
 * reach them.
 */
#include <errno.h>

/* Whether the core's `_at` calls take (seg, offset) as it is. */
static inline int zbuf__vx_plain(ZBUF_SEG seg, int offset)
{
    return seg != ZBUF_NONE && offset > ZBUF_BEGIN && offset < ZBUF_END;
}

/* The core's count for a VxWorks length: an upper bound, so a negative one
 * ("to the end") becomes a huge one. */
static inline size_t zbuf__vx_bound(int len)
{
    return (size_t)(int64_t)len;
}

/* The routines' fast paths, for a plain location (and a length not 0). */
static inline ZBUF_ID zbuf__vx_dup_fast(ZBUF_ID z, ZBUF_SEG seg, int offset, int len)
{
    zbuf_t *dup;
    int err = zbuf_dup_at(z, seg, offset, zbuf__vx_bound(len), &dup);
    if (err == 0)
        return dup;
    errno = -err;
    return NULL;
}

static inline ZBUF_SEG zbuf__vx_cut_fast(ZBUF_ID z, ZBUF_SEG seg, int offset, int len)
{
    zbuf_seg_t *after;
    int err = zbuf_cut_at(z, seg, offset, zbuf__vx_bound(len), &after);
    if (err == 0)
        return after != NULL ? after : ZBUF_NONE;
    errno = -err;
    return NULL;
}

static inline ZBUF_ID zbuf__vx_split_fast(ZBUF_ID z, ZBUF_SEG seg, int offset)
{
    zbuf_t *tail;
    int err = zbuf_split_at(z, seg, offset, &tail);
    if (err == 0)
        return tail;
    errno = -err;
    return NULL;
}

/* For a buffer that is not NULL; "to the end" copies at most INT_MAX bytes,
 * so that the count fits the int returned. */
static inline int zbuf__vx_extract_fast(ZBUF_ID z, ZBUF_SEG seg, int offset, caddr_t buf, int len)
{
    ssize_t got = zbuf_copyout_at(z, seg, offset, buf, (size_t)(len < 0 ? INT_MAX : len));
    if (got >= 0)
        return (int)got;
    errno = (int)-got;
    return ERROR;
}

static inline STATUS zbuf__vx_delete(ZBUF_ID z)
{
    /* The core treats NULL as a no-op; VxWorks calls it an invalid id. */
    int err = z != NULL ? zbuf_delete(z) : -EINVAL;
    if (err == 0)
        return OK;
    errno = -err;
    return ERROR;
}

#if !defined(ZBUF_VX_BUILDING) && !defined(ZBUF_VX_NO_INLINE)
static inline ZBUF_ID zbuf__vx_dup(ZBUF_ID z, ZBUF_SEG seg, int offset, int len)
{
    return zbuf__vx_plain(seg, offset) && len != 0 ? zbuf__vx_dup_fast(z, seg, offset, len)
                                                   : (zbufDup)(z, seg, offset, len);
}

static inline ZBUF_SEG zbuf__vx_cut(ZBUF_ID z, ZBUF_SEG seg, int offset, int len)
{
    return zbuf__vx_plain(seg, offset) && len != 0 ? zbuf__vx_cut_fast(z, seg, offset, len)
                                                   : (zbufCut)(z, seg, offset, len);
}

static inline ZBUF_ID zbuf__vx_split(ZBUF_ID z, ZBUF_SEG seg, int offset)
{
    return zbuf__vx_plain(seg, offset) ? zbuf__vx_split_fast(z, seg, offset)
                                       : (zbufSplit)(z, seg, offset);
}

static inline int zbuf__vx_extract(ZBUF_ID z, ZBUF_SEG seg, int offset, caddr_t buf, int len)
{
    return zbuf__vx_plain(seg, offset) && buf != NULL
               ? zbuf__vx_extract_fast(z, seg, offset, buf, len)
               : (zbufExtractCopy)(z, seg, offset, buf, len);
}

static inline int zbuf__vx_length(ZBUF_ID z)
{
    size_t len = zbuf_length(z);
    /* 0 (empty, or not a zbuf) and more than INT_MAX: the function. */
    return len - 1 < (size_t)INT_MAX ? (int)len : (zbufLength)(z);
}

#define zbufDup(zbufId, zbufSeg, offset, len) zbuf__vx_dup(zbufId, zbufSeg, offset, len)
#define zbufCut(zbufId, zbufSeg, offset, len) zbuf__vx_cut(zbufId, zbufSeg, offset, len)
#define zbufSplit(zbufId, zbufSeg, offset) zbuf__vx_split(zbufId, zbufSeg, offset)
#define zbufExtractCopy(zbufId, zbufSeg, offset, buf, len)                              \
    zbuf__vx_extract(zbufId, zbufSeg, offset, buf, len)
#define zbufDelete(zbufId) zbuf__vx_delete(zbufId)
#define zbufLength(zbufId) zbuf__vx_length(zbufId)
#endif
/** @endcond */

#ifdef __cplusplus
}
#endif

/* The zbufSockLib half (zbufSockSend() ...): its own header, the same
 * library, so that VxWorks code needs no other include. */
#include <zbuf/vxworks_sock.h>

#endif /* ZBUF_VXWORKS_H */
