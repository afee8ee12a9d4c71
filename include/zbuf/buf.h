/* SPDX-License-Identifier: MIT */
/**
 * @file zbuf/buf.h
 * @brief Data buffers: the shared, reference-counted memory behind segments.
 *
 * A *buffer* is a run of bytes that segments of any number of zbufs point
 * into.  It counts its references (one per segment, one per handle a caller
 * holds); when the last one goes, the buffer is released:
 *
 * - a buffer the library allocated (zbuf_buf_alloc(), zbuf_insert_copy() ...)
 *   is freed;
 * - a buffer taken from a pool (zbuf_pool_get()) goes back to its pool;
 * - a caller's buffer enrolled with zbuf_buf_wrap() or zbuf_insert_buf() has
 *   its release callback called, exactly once.
 *
 * **Release callbacks** run synchronously, on whichever thread drops the last
 * reference, inside the libzbuf call that dropped it (zbuf_delete(),
 * zbuf_cut(), zbuf_buf_unref(), an adapter's completion handler ...).  They
 * must not block for long and must not use the zbuf whose operation is
 * running; they may call libzbuf on other zbufs and may free the memory.
 *
 * **Writability.** The library writes into a buffer only when it owns the
 * bytes: the buffer was allocated by libzbuf or a pool, and exactly one
 * reference exists.  An enrolled caller buffer is read-only to the library
 * (the caller may still write into it, and every zbuf sharing it sees the
 * change).
 *
 * **Threads.** Segments of one buffer may live in zbufs used by different
 * threads.  Counting is *biased*: a buffer belongs to the thread that made
 * it (or took it from a pool), and while its references are taken and
 * dropped on that thread they cost plain loads and stores, no atomic
 * read-modify-write.  The first time a thread other than the owner takes or
 * drops a reference while the owner may still hold some, the count moves,
 * once and for good, to an atomic counter (which costs that thread one
 * `membarrier()` system call, a microsecond or two); a buffer whose only
 * reference moved to another thread simply changes owner.  None of this
 * changes the release rule above.  See docs/concepts.md.
 */
#ifndef ZBUF_BUF_H
#define ZBUF_BUF_H

#include <stdbool.h>
#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** An opaque, reference-counted data buffer. */
typedef struct zbuf_buf zbuf_buf_t;

/**
 * @brief Release callback of an enrolled buffer.
 *
 * @param data  the address the buffer was enrolled with.
 * @param size  the size it was enrolled with.
 * @param arg   the user argument given at enrolment.
 *
 * Runs exactly once, when the last reference to the buffer goes, on the
 * thread that drops it.  See the file comment for what it may do.
 */
typedef void (*zbuf_release_cb)(void *data, size_t size, void *arg);

/**
 * @brief Release callback with two user words (see zbuf_buf_wrap2()).
 *
 * Runs exactly like a #zbuf_release_cb; @p arg and @p arg2 are the two words
 * given at enrolment.  It saves a caller that needs two words (a function
 * and its argument, a pool and an index ...) an allocation per buffer.
 */
typedef void (*zbuf_release2_cb)(void *data, size_t size, void *arg, void *arg2);

/**
 * @brief Allocate a library-owned buffer of @p size bytes.
 *
 * @param size  bytes of data, 1 or more.
 * @param[out] out  receives a new reference to the buffer; the caller drops
 *                  it with zbuf_buf_unref() once it has put the buffer into
 *                  zbufs (which take references of their own).
 * @return 0; `-EINVAL` for a zero size or NULL @p out; `-ENOMEM`.
 */
ZBUF_EXPORT int zbuf_buf_alloc(size_t size, zbuf_buf_t **out);

/**
 * @brief Enrol a caller's memory as a buffer, without copying it.
 *
 * The memory is borrowed by the library until @p cb runs; until then the
 * caller must not free or reuse it.  The library never writes into it.
 *
 * @param data  first byte; not NULL.
 * @param size  bytes, 1 or more.
 * @param cb    called once with (@p data, @p size, @p arg) when the last
 *              reference goes; NULL means nobody is told.
 * @param arg   passed to @p cb.
 * @param[out] out  receives a new reference.
 * @return 0; `-EINVAL`; `-ENOMEM` (then @p cb is not called and the
 *         caller still owns @p data).
 */
ZBUF_EXPORT int zbuf_buf_wrap(void *data, size_t size, zbuf_release_cb cb, void *arg,
                              zbuf_buf_t **out);

/**
 * @brief zbuf_buf_wrap() with a callback that receives two user words.
 *
 * @param cb    called once with (@p data, @p size, @p arg, @p arg2) when the
 *              last reference goes; NULL means nobody is told.
 * @return 0; `-EINVAL`; `-ENOMEM` (then @p cb is not called and the caller
 *         still owns @p data).
 */
ZBUF_EXPORT int zbuf_buf_wrap2(void *data, size_t size, zbuf_release2_cb cb, void *arg, void *arg2,
                               zbuf_buf_t **out);

/**
 * @brief Enrol a byte range of an open file as a buffer.
 *
 * A segment of such a buffer holds no memory: adapters send it with
 * `sendfile()`, and zbuf_copyout() reads it with `pread()` (counted as a copy).
 * zbuf_seg_data() returns NULL for it and zbuf_iovec() stops before it.
 * The descriptor is borrowed: it must stay open until @p cb runs (the callback
 * is the natural place to close it).
 *
 * @param fd      an open, readable file descriptor.
 * @param offset  file offset of the first byte, 0 or more.
 * @param size    bytes, 1 or more.
 * @param cb, arg as for zbuf_buf_wrap(); the callback's `data` is NULL.
 * @param[out] out  receives a new reference.
 * @return 0; `-EINVAL`; `-ENOMEM`.
 */
ZBUF_EXPORT int zbuf_buf_wrap_file(int fd, off_t offset, size_t size, zbuf_release_cb cb,
                                   void *arg, zbuf_buf_t **out);

/**
 * @brief Take one more reference to @p b.
 * @param b  a buffer the caller holds a reference to.
 * @return @p b.
 */
ZBUF_EXPORT zbuf_buf_t *zbuf_buf_ref(zbuf_buf_t *b);

/**
 * @brief Drop one reference; the last one releases the buffer.
 * @param b  a reference the caller owns (consumed); NULL is a no-op.
 */
ZBUF_EXPORT void zbuf_buf_unref(zbuf_buf_t *b);

/**
 * @brief First byte of the buffer's memory.
 * @return the address; NULL for a file buffer.
 */
ZBUF_EXPORT void *zbuf_buf_data(const zbuf_buf_t *b);

/** @brief Size of the buffer in bytes. */
ZBUF_EXPORT size_t zbuf_buf_size(const zbuf_buf_t *b);

/**
 * @brief Current number of references (segments plus handles).
 *
 * A snapshot: other threads may change it at any time.  Reading it never
 * changes how the buffer is counted.
 */
ZBUF_EXPORT unsigned zbuf_buf_refs(const zbuf_buf_t *b);

/**
 * @brief Whether the library may write into @p b: library- or pool-owned
 *        memory with a single reference.
 */
ZBUF_EXPORT bool zbuf_buf_writable(const zbuf_buf_t *b);

/**
 * @brief The descriptor and file offset of a file buffer.
 * @param[out] fd, offset  filled in when @p b is a file buffer (either may be NULL).
 * @return true for a file buffer, false otherwise.
 */
ZBUF_EXPORT bool zbuf_buf_file(const zbuf_buf_t *b, int *fd, off_t *offset);

#ifdef __cplusplus
}
#endif

#endif /* ZBUF_BUF_H */
