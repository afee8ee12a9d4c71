/* SPDX-License-Identifier: MIT */
/**
 * @file zbuf/cursor.h
 * @brief Reading integers and bytes across segment boundaries.
 *
 * A cursor is a read position in one zbuf.  It is a small struct the caller
 * owns (usually on the stack); it borrows the zbuf, which must not be
 * modified while the cursor is in use (any modification invalidates it:
 * initialise it again).  Reads that do not fit in the bytes that remain fail
 * with `-ERANGE` and leave the cursor where it was, so a parser can read a
 * header, find it incomplete, and wait for more bytes.
 *
 * @code
 * zbuf_cursor_t c;
 * uint32_t len;
 * zbuf_cursor_init(&c, stream, 0);
 * if (zbuf_cursor_read_be32(&c, &len) == 0 && zbuf_cursor_remaining(&c) >= len)
 *     ... a whole frame is there ...
 * @endcode
 */
#ifndef ZBUF_CURSOR_H
#define ZBUF_CURSOR_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief A read position in a zbuf.  The fields are private: use the
 *        functions below.
 */
typedef struct zbuf_cursor {
    const zbuf_t *z;       /**< @private the zbuf read */
    const zbuf_seg_t *seg; /**< @private segment holding the next byte, NULL at the end */
    size_t seg_off;        /**< @private offset of the next byte inside @c seg */
    size_t pos;            /**< @private absolute offset of the next byte */
} zbuf_cursor_t;

/**
 * @brief Place @p c at byte @p off of @p z (0 .. length).
 * @return 0; `-EINVAL`; `-ERANGE`.
 */
ZBUF_EXPORT int zbuf_cursor_init(zbuf_cursor_t *c, const zbuf_t *z, size_t off);

/** @brief Absolute offset of the next byte. */
ZBUF_EXPORT size_t zbuf_cursor_offset(const zbuf_cursor_t *c);

/** @brief Bytes between the cursor and the end of the zbuf. */
ZBUF_EXPORT size_t zbuf_cursor_remaining(const zbuf_cursor_t *c);

/**
 * @brief Copy the next @p len bytes into @p dst and advance past them.
 *
 * A copy of bytes: counted in zbuf_stats_t::bytes_copied (unlike the
 * integer reads below, which decode values; see zbuf/stats.h).
 *
 * @return 0; `-ERANGE` if fewer remain (cursor unchanged); `-EIO` for an
 *         unreadable file segment.
 */
ZBUF_EXPORT int zbuf_cursor_read(zbuf_cursor_t *c, void *dst, size_t len);

/** @brief Advance by @p len bytes.  @return 0; `-ERANGE` if fewer remain. */
ZBUF_EXPORT int zbuf_cursor_skip(zbuf_cursor_t *c, size_t len);

/**
 * @brief Address of the next @p len bytes if they are contiguous in memory
 *        (no copy), without advancing.
 * @return the address; NULL if fewer remain, the bytes span segments, or
 *         they lie in a file segment.
 */
ZBUF_EXPORT const void *zbuf_cursor_peek(const zbuf_cursor_t *c, size_t len);

/**
 * @brief Distance from the cursor to the next byte equal to @p byte, without
 *        copying and without moving the cursor.
 *
 * Searches at most @p max bytes from the cursor (#ZBUF_TO_END: up to the
 * end), segment by segment with `memchr()`, like zbuf_find().  A text
 * parser finds the end of a token, then takes it with zbuf_cursor_peek(),
 * zbuf_cursor_read() or a split, and skips past it:
 *
 * @code
 * size_t n;
 * if (zbuf_cursor_find(&c, ' ', 64, &n) == 0) {   // "PUB topic payload"
 *     ... the token is the next n bytes ...
 *     zbuf_cursor_skip(&c, n + 1);
 * }
 * @endcode
 *
 * @param c     the cursor (borrowed; not moved).
 * @param byte  the value sought, 0 .. 255.
 * @param max   most bytes searched, or #ZBUF_TO_END.
 * @param[out] dist  receives the number of bytes before the match (0 when
 *                   the next byte matches).
 * @return 0; `-ENOENT` when none of the bytes searched matches (also at the
 *         end of the zbuf or for @p max 0); `-EINVAL`; `-EIO` (a file
 *         segment could not be read).  On error @p *dist is untouched.
 */
ZBUF_EXPORT int zbuf_cursor_find(const zbuf_cursor_t *c, int byte, size_t max, size_t *dist);

/** @name Integer reads
 *  Each reads the next bytes in the named byte order, stores the value in
 *  @p v and advances; on `-ERANGE` nothing moves and @p v is untouched.
 *  Decoding a value is not a copy of data: nothing is added to
 *  zbuf_stats_t::bytes_copied, wherever the bytes lie (zbuf/stats.h). */
/** @{ */
ZBUF_EXPORT int zbuf_cursor_read_u8(zbuf_cursor_t *c, uint8_t *v);    /**< 1 byte */
ZBUF_EXPORT int zbuf_cursor_read_be16(zbuf_cursor_t *c, uint16_t *v); /**< big-endian 16 */
ZBUF_EXPORT int zbuf_cursor_read_le16(zbuf_cursor_t *c, uint16_t *v); /**< little-endian 16 */
ZBUF_EXPORT int zbuf_cursor_read_be32(zbuf_cursor_t *c, uint32_t *v); /**< big-endian 32 */
ZBUF_EXPORT int zbuf_cursor_read_le32(zbuf_cursor_t *c, uint32_t *v); /**< little-endian 32 */
ZBUF_EXPORT int zbuf_cursor_read_be64(zbuf_cursor_t *c, uint64_t *v); /**< big-endian 64 */
ZBUF_EXPORT int zbuf_cursor_read_le64(zbuf_cursor_t *c, uint64_t *v); /**< little-endian 64 */
/** @} */

#ifdef __cplusplus
}
#endif

#endif /* ZBUF_CURSOR_H */
