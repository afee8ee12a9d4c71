/* SPDX-License-Identifier: MIT */
/**
 * @file zbuf/core.h
 * @brief zbufs: byte sequences made of segments that share buffers.
 *
 * A zbuf is an ordered list of *segments*; each segment names a byte range of
 * one buffer (see zbuf/buf.h).  The bytes of the zbuf are the bytes of its
 * segments in order.  Operations that rearrange bytes (dup, split, cut,
 * insert one zbuf into another) move or share segment references and never
 * copy data; their cost depends on the number of segments, never on the
 * number of bytes.  A segment straddling an operation's boundary is split
 * into two segments that reference the same buffer.  The only functions that
 * copy bytes say so in their name or doc (`_copy`, copyout, pullup, unshare)
 * and count every byte in zbuf_stats_t::bytes_copied.
 *
 * **Invariants** (zbuf_check() verifies them): no segment is empty; the
 * cached length equals the sum of the segment lengths; every segment lies
 * inside its buffer; each segment holds one reference to its buffer.
 *
 * **Addressing.** Byte positions are absolute offsets from the first byte
 * (0 .. length).  An insertion at offset `o` puts the new bytes just before
 * the byte now at `o`; #ZBUF_OFF_END appends.  A range is `(off, len)` with
 * `off + len <= length`, or `len == ZBUF_TO_END` for "to the end".
 * zbuf_locate() converts a VxWorks-style (segment, relative offset) pair into
 * an absolute offset.
 *
 * **Threads.** A zbuf handle is used by one thread at a time (the caller
 * serialises).  Different zbufs may share buffers and be used on different
 * threads at once; release callbacks may therefore run on any thread.
 *
 * **Errors.** See zbuf/common.h: negative errno, and a failed call changes
 * nothing.  `-EINVAL` is returned for a NULL or deleted handle or a segment
 * handle that does not belong to the zbuf, `-ERANGE` for an offset or range
 * outside the zbuf, `-ENOMEM` when memory runs out.
 */
#ifndef ZBUF_CORE_H
#define ZBUF_CORE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>
#include "buf.h"

#ifdef __cplusplus
extern "C" {
#endif

/** An opaque zbuf handle. */
typedef struct zbuf zbuf_t;

/** An opaque handle of one segment of one zbuf.  Valid until that segment
 *  is removed (cut, pullup, delete) or moved to another zbuf (insert, split);
 *  a split inside it keeps the handle for the first part.  Passing a handle
 *  of another zbuf is detected (`-EINVAL` / NULL); a handle of a removed
 *  segment is detected only while its descriptor is not reused, so do not
 *  rely on it. */
typedef struct zbuf_seg zbuf_seg_t;

/** For zbuf_locate(): the start of the zbuf, whatever the segment. */
#define ZBUF_REL_BEGIN INT64_MIN
/** For zbuf_locate(): the end of the zbuf, whatever the segment. */
#define ZBUF_REL_END INT64_MAX

/** Bytes of headroom a buffer allocated for zbuf_prepend_space() leaves in
 *  front of the new bytes, so further headers fit without a new segment. */
#define ZBUF_HEADROOM_DEFAULT 128

/* ---------------------------------------------------------------------- */
/** @name Life cycle */
/** @{ */

/**
 * @brief Create an empty zbuf.
 * @param[out] out  receives the new zbuf; the caller deletes it.
 * @return 0; `-EINVAL` for NULL @p out; `-ENOMEM`.
 */
ZBUF_EXPORT int zbuf_create(zbuf_t **out);

/**
 * @brief Delete a zbuf and drop every segment's buffer reference.
 *
 * Buffers no other zbuf or handle references are released now, on this
 * thread (their release callbacks run before this returns).
 *
 * @param z  the zbuf (consumed); NULL is a no-op.
 * @return 0; `-EINVAL` for a handle that is not a live zbuf.
 */
ZBUF_EXPORT int zbuf_delete(zbuf_t *z);

/**
 * @brief Whether @p z is a live zbuf handle, in O(1).
 *
 * True from zbuf_create() (or any call returning a new zbuf) until
 * zbuf_delete() (or a call that consumes it, such as zbuf_insert()).  A
 * deleted handle reads false as long as its memory has not been reused for
 * another zbuf; like free(), a deleted handle must not be relied upon.  This
 * is the check every call makes on its zbuf arguments, offered to layers
 * that must refuse a bad handle before they do anything else.
 *
 * @param z  borrowed; NULL reads false.
 */
ZBUF_EXPORT bool zbuf_valid(const zbuf_t *z);

/**
 * @brief Whether @p s is a segment of the live zbuf @p z, in O(1).
 *
 * The check behind every segment argument (-EINVAL / NULL elsewhere); a
 * handle of a removed segment reads false while its descriptor is not
 * reused (see #zbuf_seg_t).
 *
 * @param z, s  borrowed; NULL reads false.
 */
ZBUF_EXPORT bool zbuf_seg_valid(const zbuf_t *z, const zbuf_seg_t *s);

/** @brief Bytes in @p z (cached, O(1)); 0 for NULL. */
ZBUF_EXPORT size_t zbuf_length(const zbuf_t *z);

/** @brief Segments in @p z (cached, O(1)); 0 for NULL. */
ZBUF_EXPORT size_t zbuf_seg_count(const zbuf_t *z);

/** @} */
/* ---------------------------------------------------------------------- */
/** @name Putting bytes in */
/** @{ */

/**
 * @brief Insert a caller's buffer, without copying it.
 *
 * Enrols @p data like zbuf_buf_wrap() and inserts all of it at @p off.
 * On success the library owns the job of releasing the memory: @p cb runs
 * exactly once, when no zbuf references any of its bytes any more.  On
 * failure nothing was enrolled: the caller still owns @p data and @p cb is
 * not called.
 *
 * @param z     the zbuf.
 * @param off   insertion point, 0 .. length, or #ZBUF_OFF_END.
 * @param data  first byte (borrowed until @p cb runs; never written by the
 *              library).
 * @param len   bytes, 1 or more.
 * @param cb    release callback, or NULL.
 * @param arg   passed to @p cb.
 * @param[out] seg  if not NULL, receives the new segment.
 * @return 0; `-EINVAL`; `-ERANGE`; `-ENOMEM`.
 */
ZBUF_EXPORT int zbuf_insert_buf(zbuf_t *z, size_t off, void *data, size_t len,
                                zbuf_release_cb cb, void *arg, zbuf_seg_t **seg);

/**
 * @brief zbuf_insert_buf() with a release callback of two user words.
 *
 * Identical to zbuf_insert_buf() but for the callback, which receives
 * @p arg and @p arg2 (see zbuf_buf_wrap2()).  The VxWorks layer enrols
 * `freeRtn` and `freeArg` this way, with no allocation of its own.
 *
 * @return 0; `-EINVAL`; `-ERANGE`; `-ENOMEM`.
 */
ZBUF_EXPORT int zbuf_insert_buf2(zbuf_t *z, size_t off, void *data, size_t len,
                                 zbuf_release2_cb cb, void *arg, void *arg2, zbuf_seg_t **seg);

/**
 * @brief Insert @p len bytes of buffer @p b, starting at @p boff, at @p off.
 *
 * Takes a reference to @p b: the caller keeps its own.  When @p off is the
 * end of a segment of @p b whose bytes end at @p boff (the range continues
 * that segment, as consecutive pieces of one receive buffer do), that
 * segment grows instead: no new segment, no new reference, and @p *seg is
 * that segment, whose first byte then lies before @p off.
 *
 * @param[out] seg  if not NULL, receives the segment holding the new bytes.
 * @return 0; `-EINVAL` (NULL, zero @p len); `-ERANGE` (@p off outside @p z,
 *         or the range outside @p b); `-ENOMEM`.
 */
ZBUF_EXPORT int zbuf_insert_ref(zbuf_t *z, size_t off, zbuf_buf_t *b, size_t boff, size_t len,
                                zbuf_seg_t **seg);

/**
 * @brief Insert a copy of @p len bytes of @p data at @p off.
 *
 * The bytes are copied into one new library buffer (counted in
 * zbuf_stats_t::bytes_copied); @p data is only borrowed for the call.
 *
 * @param[out] seg  if not NULL, receives the new segment.
 * @return 0; `-EINVAL` (also for @p len 0); `-ERANGE`; `-ENOMEM`.
 */
ZBUF_EXPORT int zbuf_insert_copy(zbuf_t *z, size_t off, const void *data, size_t len,
                                 zbuf_seg_t **seg);

/**
 * @brief Move every segment of @p src into @p dst at @p off.
 *
 * No byte is copied and no buffer is released.  On success @p src is
 * consumed (deleted); on failure both zbufs are unchanged and the caller
 * still owns @p src.
 *
 * @param[out] seg  if not NULL, receives the first inserted segment (NULL if
 *                  @p src was empty).
 * @return 0; `-EINVAL` (also when @p src is @p dst); `-ERANGE`; `-ENOMEM`.
 */
ZBUF_EXPORT int zbuf_insert(zbuf_t *dst, size_t off, zbuf_t *src, zbuf_seg_t **seg);

/** @brief zbuf_insert_buf() at the end. */
static inline int zbuf_append_buf(zbuf_t *z, void *data, size_t len, zbuf_release_cb cb, void *arg)
{
    return zbuf_insert_buf(z, ZBUF_OFF_END, data, len, cb, arg, NULL);
}
/** @brief zbuf_insert_buf() at the front. */
static inline int zbuf_prepend_buf(zbuf_t *z, void *data, size_t len, zbuf_release_cb cb, void *arg)
{
    return zbuf_insert_buf(z, 0, data, len, cb, arg, NULL);
}
/** @brief zbuf_insert_ref() at the end. */
static inline int zbuf_append_ref(zbuf_t *z, zbuf_buf_t *b, size_t boff, size_t len)
{
    return zbuf_insert_ref(z, ZBUF_OFF_END, b, boff, len, NULL);
}
/** @brief zbuf_insert_copy() at the end. */
static inline int zbuf_append_copy(zbuf_t *z, const void *data, size_t len)
{
    return zbuf_insert_copy(z, ZBUF_OFF_END, data, len, NULL);
}
/** @brief zbuf_insert_copy() at the front. */
static inline int zbuf_prepend_copy(zbuf_t *z, const void *data, size_t len)
{
    return zbuf_insert_copy(z, 0, data, len, NULL);
}
/** @brief zbuf_insert() at the end: moves @p src's segments after @p dst's. */
static inline int zbuf_append(zbuf_t *dst, zbuf_t *src)
{
    return zbuf_insert(dst, ZBUF_OFF_END, src, NULL);
}

/** @} */
/* ---------------------------------------------------------------------- */
/** @name Getting bytes out */
/** @{ */

/**
 * @brief Copy bytes out of @p z into @p dst.
 *
 * @param off  first byte, 0 .. length.
 * @param dst  destination (borrowed), room for @p len bytes.
 * @param len  bytes, or #ZBUF_TO_END; a longer count than remains is an error
 *             (the VxWorks layer clamps instead).
 * @return bytes copied (counted as a copy); `-EINVAL`; `-ERANGE`; `-EIO`
 *         if reading a file segment failed; `-EOVERFLOW` if @p len does not
 *         fit the return type (only possible with huge file segments).
 */
ZBUF_EXPORT ssize_t zbuf_copyout(const zbuf_t *z, size_t off, void *dst, size_t len);

/**
 * @brief Look at @p len bytes from @p off as one contiguous run, without
 *        changing @p z.
 *
 * When the bytes lie in one memory segment, @p *out points into it (no copy);
 * otherwise they are copied into @p scratch (counted) and @p *out is
 * @p scratch.
 *
 * @param scratch  room for @p len bytes; may be NULL if the caller only wants
 *                 the no-copy case (then `-EAGAIN` when a copy would be needed).
 * @return 0; `-EINVAL`; `-ERANGE`; `-EAGAIN`; `-EIO`.
 */
ZBUF_EXPORT int zbuf_peek(const zbuf_t *z, size_t off, size_t len, void *scratch,
                          const void **out);

/**
 * @brief Describe a byte range as an array of `struct iovec` for
 *        `writev`/`sendmsg`, without copying.
 *
 * Fills at most @p iovcnt entries, one per segment touched, stopping early at
 * a file segment (which has no memory address) or when the array is full.
 * The iovecs point into the zbuf's buffers and stay valid while @p z keeps
 * those bytes.
 *
 * @param len  bytes, or #ZBUF_TO_END.
 * @param[out] bytes  if not NULL, receives the number of bytes the filled
 *                    entries cover (less than asked if stopped early).
 * @return the number of entries filled (0 for an empty range or a range
 *         that starts with a file segment); `-EINVAL`; `-ERANGE`.
 */
ZBUF_EXPORT int zbuf_iovec(const zbuf_t *z, size_t off, size_t len, struct iovec *iov,
                           int iovcnt, size_t *bytes);

/**
 * @brief Find the first byte equal to @p byte in a range of @p z, without
 *        copying: `memchr()` over each segment in turn.
 *
 * The way to parse text protocols (a line ending, a space between fields)
 * across segment boundaries without looking at one byte at a time.  Bytes of
 * a file segment are read with `pread()` in small pieces to be searched.
 * Nothing is copied out and zbuf_stats_t::bytes_copied does not change (see
 * zbuf/stats.h for what counts as a copy).
 *
 * @code
 * size_t eol;
 * if (zbuf_find(z, 0, ZBUF_TO_END, '\n', &eol) == 0)
 *     zbuf_split_head(z, eol + 1, &line);   // one whole line, no copy
 * @endcode
 *
 * @param z     the zbuf (borrowed).
 * @param off   first byte searched, 0 .. length.
 * @param len   bytes searched, or #ZBUF_TO_END.
 * @param byte  the value sought, 0 .. 255.
 * @param[out] pos  receives the absolute offset of the first match.
 * @return 0; `-ENOENT` when no byte of the range matches (also for an empty
 *         range); `-EINVAL` (NULL or deleted handle, NULL @p pos, @p byte
 *         outside 0 .. 255); `-ERANGE` (range outside @p z); `-EIO` (a file
 *         segment could not be read).  On error @p *pos is untouched.
 */
ZBUF_EXPORT int zbuf_find(const zbuf_t *z, size_t off, size_t len, int byte, size_t *pos);

/** @} */
/* ---------------------------------------------------------------------- */
/** @name Rearranging without copying */
/** @{ */

/**
 * @brief A new zbuf sharing @p len bytes of @p z from @p off.
 *
 * Segments are shared (each buffer gains a reference); no byte is copied
 * and @p z is not modified.
 *
 * @param len  bytes, or #ZBUF_TO_END.
 * @param[out] out  receives the new zbuf; the caller deletes it.
 * @return 0; `-EINVAL`; `-ERANGE`; `-ENOMEM`.
 */
ZBUF_EXPORT int zbuf_dup(const zbuf_t *z, size_t off, size_t len, zbuf_t **out);

/**
 * @brief Split @p z at @p off: bytes from @p off on move to a new zbuf.
 *
 * The byte at @p off becomes the first byte of @p *tail; @p z keeps the
 * bytes before it.  @p off may be 0 (everything moves) or the length
 * (@p *tail is empty).
 *
 * @param[out] tail  receives the new zbuf; the caller deletes it.
 * @return 0; `-EINVAL`; `-ERANGE`; `-ENOMEM`.
 */
ZBUF_EXPORT int zbuf_split(zbuf_t *z, size_t off, zbuf_t **tail);

/**
 * @brief Split off the first @p off bytes of @p z into a new zbuf.
 *
 * The complement of zbuf_split(): @p *head receives bytes `0 .. off-1`,
 * @p z keeps the rest.  This is how a framing layer takes one whole message
 * off the front of a stream.
 *
 * @param[out] head  receives the new zbuf; the caller deletes it.
 * @return 0; `-EINVAL`; `-ERANGE`; `-ENOMEM`.
 */
ZBUF_EXPORT int zbuf_split_head(zbuf_t *z, size_t off, zbuf_t **head);

/**
 * @brief Delete @p len bytes from @p off.
 *
 * Segments that become empty are removed (their buffers released if nobody
 * else references them, on this thread); a cut strictly inside one segment
 * splits it in two.
 *
 * @param len  bytes, or #ZBUF_TO_END.
 * @param[out] after  if not NULL, receives the segment holding the first
 *                    byte after the cut, or NULL if the cut reached the end.
 * @return 0; `-EINVAL`; `-ERANGE`; `-ENOMEM` (only when a segment must be
 *         split in two).
 */
ZBUF_EXPORT int zbuf_cut(zbuf_t *z, size_t off, size_t len, zbuf_seg_t **after);

/** @} */
/* ---------------------------------------------------------------------- */
/** @name Headroom, tailroom, reserve/commit */
/** @{ */

/** @brief Writable bytes just before the first byte of @p z without a new
 *         segment: 0 when the first buffer is shared, enrolled or a file,
 *         and for an empty, NULL or deleted zbuf. */
ZBUF_EXPORT size_t zbuf_headroom(const zbuf_t *z);

/** @brief Writable bytes just after the last byte of @p z without a new
 *         segment: 0 when the last buffer is shared, enrolled or a file,
 *         while a zbuf_reserve() is pending, and for an empty, NULL or
 *         deleted zbuf. */
ZBUF_EXPORT size_t zbuf_tailroom(const zbuf_t *z);

/**
 * @brief Make @p len new bytes at the front of @p z and return where to write
 *        them (a protocol header, typically).
 *
 * Uses the first segment's headroom when it is writable and large enough;
 * otherwise adds a new segment in a buffer that keeps
 * #ZBUF_HEADROOM_DEFAULT bytes of headroom for the next layer.  Existing
 * bytes are never copied or written.
 *
 * @param[out] data  receives the address of the new, uninitialised bytes;
 *                   valid while @p z holds them.
 * @return 0; `-EINVAL` (also for @p len 0); `-ENOMEM`.
 */
ZBUF_EXPORT int zbuf_prepend_space(zbuf_t *z, size_t len, void **data);

/**
 * @brief Make @p len new contiguous bytes at the end of @p z and return where
 *        to write them.
 *
 * Uses the last segment's tailroom when it is writable and large enough,
 * otherwise adds a new segment.
 *
 * @return 0; `-EINVAL` (also for @p len 0); `-ENOMEM`.
 */
ZBUF_EXPORT int zbuf_append_space(zbuf_t *z, size_t len, void **data);

/**
 * @brief Reserve at least @p len writable bytes after the end of @p z, for a
 *        receive path (`readv` into them, then zbuf_commit()).
 *
 * Describes the space as up to two iovecs: the last segment's tailroom, when
 * writable, then a fresh buffer.  The space is not part of @p z until
 * committed.  A new reserve replaces the previous one.  Between reserve and
 * commit only zbuf_commit(), zbuf_delete() and read-only calls may be used on
 * @p z; any other call that modifies @p z drops the reservation (a call that
 * turns out to change nothing, such as inserting an empty zbuf, keeps it).
 * While a reservation is pending zbuf_tailroom() reads 0.
 *
 * @param iov  array of at least 2 entries, filled in.
 * @param[out] iovcnt  receives the number of entries used (1 or 2).
 * @return 0; `-EINVAL` (also for @p len 0); `-ENOMEM`.
 */
ZBUF_EXPORT int zbuf_reserve(zbuf_t *z, size_t len, struct iovec *iov, int *iovcnt);

/**
 * @brief Append the first @p len bytes of the space reserved by
 *        zbuf_reserve() to @p z, and drop the reservation.
 *
 * @param len  0 .. the reserved size.
 * @return 0; `-EINVAL` (no reservation, or it was dropped); `-ERANGE`;
 *         `-ENOMEM`.
 */
ZBUF_EXPORT int zbuf_commit(zbuf_t *z, size_t len);

/** @} */
/* ---------------------------------------------------------------------- */
/** @name Copying on request: pullup and unshare */
/** @{ */

/**
 * @brief Make @p len bytes from @p off contiguous and writable-by-position,
 *        and return their address.
 *
 * When the range already lies in one memory segment nothing changes and no
 * byte is copied.  Otherwise the range is copied into one new buffer
 * (counted) which replaces the segments it spanned; parts of the first and
 * last of those outside the range stay as they were, so the segment count
 * can grow by one.
 *
 * @param[out] data  receives the address of the first byte.
 * @return 0; `-EINVAL`; `-ERANGE` (also for an empty range); `-ENOMEM`;
 *         `-EIO` (file segment unreadable).
 */
ZBUF_EXPORT int zbuf_pullup(zbuf_t *z, size_t off, size_t len, void **data);

/**
 * @brief Whether every byte of the range lies in buffers the library may
 *        write into (library/pool memory referenced only by @p z's one
 *        segment).
 * @return true or false; false for a NULL or deleted zbuf or a range
 *         outside it; true for an empty range.
 */
ZBUF_EXPORT bool zbuf_writable(const zbuf_t *z, size_t off, size_t len);

/**
 * @brief Make a range writable: every segment of it that lies in a shared,
 *        enrolled or file buffer is replaced by a private copy (counted).
 *
 * Afterwards zbuf_writable() holds for the range, and writes through
 * zbuf_seg_data() are seen by nobody else.  An empty range, or one already
 * writable, is a successful no-op.
 *
 * @return 0; `-EINVAL`; `-ERANGE`; `-ENOMEM`; `-EIO`.
 */
ZBUF_EXPORT int zbuf_unshare(zbuf_t *z, size_t off, size_t len);

/** @} */
/* ---------------------------------------------------------------------- */
/** @name Segments */
/** @{ */

/** @brief First segment of @p z, or NULL if empty or invalid. */
ZBUF_EXPORT zbuf_seg_t *zbuf_seg_first(const zbuf_t *z);

/** @brief Last segment of @p z, or NULL if empty or invalid. */
ZBUF_EXPORT zbuf_seg_t *zbuf_seg_last(const zbuf_t *z);

/** @brief Segment after @p s, or NULL after the last (or if @p s is not a
 *         segment of @p z). */
ZBUF_EXPORT zbuf_seg_t *zbuf_seg_next(const zbuf_t *z, const zbuf_seg_t *s);

/** @brief Segment before @p s, or NULL before the first (or if @p s is not
 *         a segment of @p z). */
ZBUF_EXPORT zbuf_seg_t *zbuf_seg_prev(const zbuf_t *z, const zbuf_seg_t *s);

/**
 * @brief The segment holding byte @p off.
 * @param[out] seg_off  if not NULL, receives the offset of that byte inside
 *                      the segment.
 * @return the segment, or NULL if @p off is not a byte of @p z.
 */
ZBUF_EXPORT zbuf_seg_t *zbuf_seg_find(const zbuf_t *z, size_t off, size_t *seg_off);

/** @brief Address of the first byte of @p s; NULL for a file segment or a
 *         segment not of @p z.  Writable only if zbuf_writable() says so. */
ZBUF_EXPORT void *zbuf_seg_data(const zbuf_t *z, const zbuf_seg_t *s);

/** @brief Bytes in @p s; 0 if @p s is not a segment of @p z. */
ZBUF_EXPORT size_t zbuf_seg_length(const zbuf_t *z, const zbuf_seg_t *s);

/** @brief The buffer behind @p s (borrowed: take a reference with
 *         zbuf_buf_ref() to keep it); NULL if @p s is not of @p z. */
ZBUF_EXPORT zbuf_buf_t *zbuf_seg_buf(const zbuf_t *z, const zbuf_seg_t *s);

/** @brief Offset of @p s's first byte inside its buffer. */
ZBUF_EXPORT size_t zbuf_seg_buf_offset(const zbuf_t *z, const zbuf_seg_t *s);

/**
 * @brief Convert a (segment, relative offset) location to an absolute one.
 *
 * @p rel counts bytes from the start of @p seg (NULL: the first segment); it
 * may be negative (bytes before @p seg) or run past its end.  #ZBUF_REL_BEGIN
 * and #ZBUF_REL_END mean the start and end of the zbuf whatever @p seg is.
 *
 * @param[out] abs  receives the absolute offset, 0 .. length.
 * @return 0; `-EINVAL` (bad handle or foreign segment); `-ERANGE` (outside).
 */
ZBUF_EXPORT int zbuf_locate(const zbuf_t *z, const zbuf_seg_t *seg, int64_t rel, size_t *abs);

/** @} */
/* ---------------------------------------------------------------------- */
/**
 * @name Addressing a byte by segment
 *
 * The same operations as zbuf_dup(), zbuf_cut(), zbuf_split() and
 * zbuf_copyout(), with the location given the way zbuf_locate() takes it
 * and the count taken as an upper bound, in one call that checks its
 * arguments once.  This is how the VxWorks names (zbuf/vxworks.h) reach the
 * core, and how a parser that holds a segment (from zbuf_seg_find(), say)
 * works relative to it.
 *
 * - The location (@p seg, @p rel) must name a *byte* of @p z: its absolute
 *   offset is 0 .. length - 1, so an empty zbuf has no location, and
 *   #ZBUF_REL_END is always out of range (`-ERANGE`).  @p seg NULL means
 *   the first segment; #ZBUF_REL_BEGIN the first byte whatever @p seg is.
 *   A segment of another zbuf is `-EINVAL`.
 * - The count @p len is at most what the call takes: fewer bytes when the
 *   zbuf ends first, so #ZBUF_TO_END takes every byte to the end.  0 is an
 *   empty range.
 * - Everything else (ownership, copies counted, errors, nothing changed on
 *   failure) is as for the call without `_at`.
 */
/** @{ */

/**
 * @brief zbuf_dup() of up to @p len bytes from the byte at (@p seg, @p rel).
 *
 * The location must name a byte of @p z (absolute offset 0 .. length - 1);
 * the copy holds @p len bytes from there, or every byte to the end when
 * fewer remain.
 *
 * @param z    the zbuf (borrowed; not modified).
 * @param seg  a segment of @p z (borrowed), or NULL for the first.
 * @param rel  bytes from the start of @p seg (may be negative), or
 *             #ZBUF_REL_BEGIN.
 * @param len  bytes at most; #ZBUF_TO_END for all the rest.
 * @param[out] out  receives the new zbuf (a new reference to each buffer it
 *                  shares); the caller deletes it.
 * @return 0; `-EINVAL` (bad handle, foreign segment, NULL @p out);
 *         `-ERANGE` (the location is not a byte of @p z); `-ENOMEM`.
 */
ZBUF_EXPORT int zbuf_dup_at(const zbuf_t *z, const zbuf_seg_t *seg, int64_t rel, size_t len,
                            zbuf_t **out);

/**
 * @brief zbuf_cut() of up to @p len bytes from the byte at (@p seg, @p rel).
 *
 * The location must name a byte of @p z (absolute offset 0 .. length - 1);
 * the cut takes @p len bytes from there, or every byte to the end when fewer
 * remain.  @p seg is borrowed and may itself be cut.
 *
 * @param z    the zbuf.
 * @param seg  a segment of @p z, or NULL for the first.
 * @param rel  bytes from the start of @p seg (may be negative), or
 *             #ZBUF_REL_BEGIN.
 * @param len  bytes at most; #ZBUF_TO_END for all the rest; 0 cuts nothing.
 * @param[out] after  if not NULL, receives the segment holding the first
 *                    byte after the cut, or NULL if the cut reached the end.
 * @return 0; `-EINVAL` (bad handle, foreign segment); `-ERANGE` (the
 *         location is not a byte of @p z); `-ENOMEM` (only when a segment
 *         must be split in two).
 */
ZBUF_EXPORT int zbuf_cut_at(zbuf_t *z, const zbuf_seg_t *seg, int64_t rel, size_t len,
                            zbuf_seg_t **after);

/**
 * @brief zbuf_split() at the byte at (@p seg, @p rel): that byte becomes the
 *        first byte of @p *tail.
 *
 * The location must name a byte of @p z (absolute offset 0 .. length - 1),
 * so it is never the end of @p z: zbuf_split() allows the end (an empty
 * tail), this call does not.
 *
 * @param z    the zbuf; keeps the bytes before the location.
 * @param seg  a segment of @p z, or NULL for the first.
 * @param rel  bytes from the start of @p seg (may be negative), or
 *             #ZBUF_REL_BEGIN.
 * @param[out] tail  receives the new zbuf; the caller deletes it.
 * @return 0; `-EINVAL` (bad handle, foreign segment, NULL @p tail);
 *         `-ERANGE` (the location is not a byte of @p z); `-ENOMEM`.
 */
ZBUF_EXPORT int zbuf_split_at(zbuf_t *z, const zbuf_seg_t *seg, int64_t rel, zbuf_t **tail);

/**
 * @brief zbuf_copyout() of up to @p len bytes from the byte at
 *        (@p seg, @p rel).
 *
 * The location must name a byte of @p z (absolute offset 0 .. length - 1);
 * the copy stops after @p len bytes or at the end of @p z, whichever comes
 * first.
 *
 * @param z    the zbuf (borrowed; not modified).
 * @param seg  a segment of @p z, or NULL for the first.
 * @param rel  bytes from the start of @p seg (may be negative), or
 *             #ZBUF_REL_BEGIN.
 * @param len  bytes at most; 0 copies nothing (the location is still
 *             checked).
 * @param dst  destination (borrowed), room for @p len bytes.
 * @return bytes copied, @p len or fewer when @p z ends first (counted as a
 *         copy); `-EINVAL` (bad handle, foreign segment, NULL @p dst with
 *         @p len not 0); `-ERANGE` (the location is not a byte of @p z);
 *         `-EIO` if reading a file segment failed; `-EOVERFLOW` if the
 *         count does not fit the return type.
 */
ZBUF_EXPORT ssize_t zbuf_copyout_at(const zbuf_t *z, const zbuf_seg_t *seg, int64_t rel,
                                    void *dst, size_t len);

/** @} */
/* ---------------------------------------------------------------------- */
/** @name Checking */
/** @{ */

/**
 * @brief Verify every invariant of @p z (see the file comment).
 *
 * O(segments).  Debug builds (`-DZBUF_DEBUG=ON`) run it after every
 * modifying call and abort on failure; tests call it after every step.
 *
 * @return 0 when consistent; `-EINVAL` for a bad handle; `-EFAULT` when an
 *         invariant is broken.
 */
ZBUF_EXPORT int zbuf_check(const zbuf_t *z);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* ZBUF_CORE_H */
