/* SPDX-License-Identifier: MIT */
/**
 * @file zbuf/common.h
 * @brief Export macro, version, error convention and limits shared by every
 *        libzbuf header.
 *
 * Error convention (the whole modern API and every adapter): a function that
 * can fail returns an `int` that is `0` (or a non-negative count) on success
 * and a negative `errno` value on failure, like libuv and liburing.  A call
 * that fails changes nothing: the zbufs it was given hold the same bytes in
 * the same segments, the caller keeps every reference it had, and no release
 * callback runs because of the failed call.  zbuf_strerror() names an error.
 */
#ifndef ZBUF_COMMON_H
#define ZBUF_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @cond INTERNAL */
#if defined(ZBUF_STATIC)
#define ZBUF_EXPORT
#elif defined(ZBUF_BUILDING)
#define ZBUF_EXPORT __attribute__((visibility("default")))
#else
#define ZBUF_EXPORT
#endif
/** @endcond */

/** Major version of the library these headers describe. */
#define ZBUF_VERSION_MAJOR 0
/** Minor version of the library these headers describe. */
#define ZBUF_VERSION_MINOR 1
/** Patch version of the library these headers describe. */
#define ZBUF_VERSION_PATCH 0

/**
 * Length meaning "from the offset to the end of the zbuf", accepted by every
 * function that takes a byte count describing a range of a zbuf
 * (zbuf_dup(), zbuf_cut(), zbuf_copyout(), zbuf_iovec() ...).
 */
#define ZBUF_TO_END ((size_t)-1)

/**
 * Offset meaning "the end of the zbuf" for insertion functions: the new bytes
 * are appended.  Equal to #ZBUF_TO_END; a separate name reads better at an
 * insertion point.
 */
#define ZBUF_OFF_END ((size_t)-1)

/**
 * @brief The version of the library linked at run time.
 * @return `major * 10000 + minor * 100 + patch`.
 */
ZBUF_EXPORT unsigned zbuf_version(void);

/**
 * @brief Human-readable text for an error code returned by libzbuf.
 *
 * @param err  a negative errno value as returned by a libzbuf call (a positive
 *             value is accepted too and read as its negation).
 * @return a static, NUL-terminated string; never NULL.  Thread-safe.
 */
ZBUF_EXPORT const char *zbuf_strerror(int err);

#ifdef __cplusplus
}
#endif

#endif /* ZBUF_COMMON_H */
