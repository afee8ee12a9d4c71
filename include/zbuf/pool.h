/* SPDX-License-Identifier: MIT */
/**
 * @file zbuf/pool.h
 * @brief Fixed-size buffer pools for receive paths.
 *
 * A pool owns @c count buffers of @c buf_size bytes, allocated once when the
 * pool is created (like VxWorks' segment pools and lwIP's PBUF_POOL).  A
 * receive path takes a buffer with zbuf_pool_get(), fills it, puts the filled
 * part into a zbuf with zbuf_insert_ref() (or zbuf_append_ref()) and drops
 * its own handle; when the last segment referring to the buffer goes, the
 * buffer returns to the pool instead of being freed.
 *
 * Pools are thread-safe: buffers may be taken on one thread and come back on
 * another.
 *
 * **Quotas.**  Several consumers (connections, typically) sharing one pool
 * can each be held to a share of it: a consumer takes its buffers through a
 * quota (zbuf_pool_quota_get()), which counts the buffers taken through it
 * that have not come back yet, refuses more than its limit, and calls back
 * when a buffer comes back to a full quota.  So one greedy or stuck consumer
 * cannot drain the pool for the others.
 */
#ifndef ZBUF_POOL_H
#define ZBUF_POOL_H

#include "buf.h"

#ifdef __cplusplus
extern "C" {
#endif

/** An opaque pool of equal-sized buffers. */
typedef struct zbuf_pool zbuf_pool_t;

/**
 * @brief Create a pool of @p count buffers of @p buf_size bytes each.
 *
 * @param buf_size  bytes per buffer, 1 or more.
 * @param count     number of buffers, 1 or more.
 * @param[out] out  receives the new pool; the caller deletes it with
 *                  zbuf_pool_delete().
 * @return 0; `-EINVAL`; `-ENOMEM`; `-EOVERFLOW` if the total size overflows.
 */
ZBUF_EXPORT int zbuf_pool_create(size_t buf_size, size_t count, zbuf_pool_t **out);

/**
 * @brief Delete a pool.
 *
 * Buffers still referenced by zbufs stay valid: the pool's memory is freed
 * when the last of them comes back.  No notify callback starts after this
 * is called; one running on another thread is waited for (as by
 * zbuf_pool_notify_sync(), so do not call this holding a lock the
 * callback takes), so the pool handle stays valid in every callback.  Called from the pool's own notify
 * callback, the pool is freed once that callback returns.  NULL is a no-op.
 *
 * @param p  the pool (consumed): no zbuf_pool_get() may follow.
 */
ZBUF_EXPORT void zbuf_pool_delete(zbuf_pool_t *p);

/**
 * @brief Take a buffer from the pool.
 *
 * @param p  the pool.
 * @param[out] out  receives a new reference to a writable buffer of the
 *                  pool's buffer size.  Dropping the last reference to it
 *                  (zbuf_buf_unref(), or deleting the zbufs that hold it)
 *                  returns it to the pool.
 * @return 0; `-EINVAL` (also after zbuf_pool_delete()); `-ENOBUFS` when
 *         every buffer is in use.
 */
ZBUF_EXPORT int zbuf_pool_get(zbuf_pool_t *p, zbuf_buf_t **out);

/**
 * @brief Callback of zbuf_pool_set_notify(): a buffer came back to a pool
 *        that had none free.
 * @param p    the pool.
 * @param arg  the argument given to zbuf_pool_set_notify().
 */
typedef void (*zbuf_pool_notify_cb)(zbuf_pool_t *p, void *arg);

/**
 * @brief Be told when an exhausted pool has a buffer again.
 *
 * @p cb runs each time the number of free buffers goes from 0 to 1, on the
 * thread that dropped the last reference to the returning buffer (inside
 * that thread's zbuf_delete(), zbuf_buf_unref() ...), after the pool's lock
 * is released.  It must not block; it may call zbuf_pool_get().  A receive
 * path that stopped reading on `-ENOBUFS` uses it to resume (for an event
 * loop on another thread, wake the loop from the callback).  It may also
 * call zbuf_pool_set_notify() and zbuf_pool_delete() on its own pool.
 *
 * No call of the previous callback starts once this returns, but one may
 * still be running on another thread (callbacks run after the pool's lock
 * is released).  Before freeing the previous @p arg, call
 * zbuf_pool_notify_sync().  This function does not wait, so it may be
 * called while holding a lock the callback takes.
 *
 * @param p    the pool.
 * @param cb   the callback, or NULL to stop notifications.
 * @param arg  passed to @p cb.
 * @return 0; `-EINVAL` for a NULL or deleted pool.
 */
ZBUF_EXPORT int zbuf_pool_set_notify(zbuf_pool_t *p, zbuf_pool_notify_cb cb, void *arg);

/** Most watchers zbuf_pool_add_notify() takes per pool. */
#define ZBUF_POOL_WATCHERS_MAX 8

/**
 * @brief Add a watcher: like zbuf_pool_set_notify(), but several coexist.
 *
 * For libraries that share a pool with the application or with each other
 * (the libuv adapter uses this, so the zbuf_pool_set_notify() slot stays
 * the application's).  Each watcher is called, in no promised order, when
 * the number of free buffers goes from 0 to 1, on the same terms as the
 * zbuf_pool_set_notify() callback, after it.  A watcher may remove itself
 * or others from inside a call; one removed while a call is in flight on
 * another thread may still be running: see zbuf_pool_notify_sync().
 *
 * @return 0; `-EINVAL` (NULL pool or callback, deleted pool); `-EEXIST`
 *         (this @p cb with this @p arg is there already); `-ENOSPC`
 *         (#ZBUF_POOL_WATCHERS_MAX watchers).
 */
ZBUF_EXPORT int zbuf_pool_add_notify(zbuf_pool_t *p, zbuf_pool_notify_cb cb, void *arg);

/**
 * @brief Remove the watcher added with this @p cb and @p arg.
 * @return 0; `-EINVAL`; `-ENOENT` (no such watcher).
 */
ZBUF_EXPORT int zbuf_pool_remove_notify(zbuf_pool_t *p, zbuf_pool_notify_cb cb, void *arg);

/**
 * @brief Wait until no notify callback of @p p runs on another thread.
 *
 * After `zbuf_pool_set_notify(p, NULL, NULL)` (or a change of callback),
 * this makes sure the previous callback is done with its argument, which
 * may then be freed.  It waits only briefly, since callbacks must not
 * block.  The caller must not hold a lock that the callback takes, or the
 * two wait for each other.  Called from inside a callback of @p p, it
 * returns at once: it would wait for itself.
 *
 * @return 0; `-EINVAL` for NULL.
 */
ZBUF_EXPORT int zbuf_pool_notify_sync(zbuf_pool_t *p);

/* ---------------------------------------------------------------------- */
/** @name Quotas: one consumer's share of a pool */
/** @{ */

/** An opaque quota: the buffers of one pool that one consumer holds, and
 *  the most it may hold. */
typedef struct zbuf_pool_quota zbuf_pool_quota_t;

/**
 * @brief Callback of a quota: a buffer came back to a quota that was full.
 *
 * Runs each time the number of buffers held through @p q drops below its
 * limit again (from `limit` to `limit - 1`), on the thread that dropped the
 * last reference to the returning buffer, after the pool's lock is released,
 * like a zbuf_pool_set_notify() callback and on the same terms (before the
 * pool's notify callbacks of the same return): it must not block; it may
 * call zbuf_pool_quota_get() and zbuf_pool_quota_delete() on @p q.  Not
 * called after zbuf_pool_delete() of the pool or zbuf_pool_quota_delete() of
 * @p q.
 *
 * @param q    the quota.
 * @param arg  the argument given to zbuf_pool_quota_create().
 */
typedef void (*zbuf_pool_quota_cb)(zbuf_pool_quota_t *q, void *arg);

/**
 * @brief Create a quota of @p limit buffers of pool @p p.
 *
 * @param p      the pool (the quota keeps it alive: a deleted pool's memory
 *               goes only once its quotas are deleted too).
 * @param limit  most buffers held through the quota at once, 1 or more (a
 *               limit above the pool's capacity limits nothing, but still
 *               counts).
 * @param cb     called when a buffer comes back to the full quota; may be
 *               NULL.
 * @param arg    passed to @p cb.
 * @param[out] out  receives the quota; delete it with zbuf_pool_quota_delete().
 * @return 0; `-EINVAL` (NULL pool or @p out, @p limit 0, deleted pool);
 *         `-ENOMEM`.
 */
ZBUF_EXPORT int zbuf_pool_quota_create(zbuf_pool_t *p, size_t limit, zbuf_pool_quota_cb cb,
                                       void *arg, zbuf_pool_quota_t **out);

/**
 * @brief Delete a quota.
 *
 * No callback of @p q starts after this is called, and one running on
 * another thread is waited for (as by zbuf_pool_notify_sync(): do not call
 * it holding a lock the callback takes).  Buffers still out stay valid and
 * come back to the pool as usual; the quota's memory goes with the last of
 * them.  NULL is a no-op.
 *
 * @param q  the quota (consumed: no zbuf_pool_quota_ call may follow).
 */
ZBUF_EXPORT void zbuf_pool_quota_delete(zbuf_pool_quota_t *q);

/**
 * @brief Take a buffer of the quota's pool and charge it to the quota.
 *
 * Like zbuf_pool_get(); the buffer counts against @p q until its last
 * reference goes and it is back in the pool.
 *
 * @param q  the quota.
 * @param[out] out  receives a new reference to a writable buffer.
 * @return 0; `-EDQUOT` when @p q already holds its limit; `-ENOBUFS` when
 *         the pool has no free buffer; `-EINVAL` (NULL arguments, deleted
 *         pool).
 */
ZBUF_EXPORT int zbuf_pool_quota_get(zbuf_pool_quota_t *q, zbuf_buf_t **out);

/**
 * @brief Change the limit of @p q (1 or more).
 *
 * Buffers already held stay held, even above a lowered limit (the quota is
 * then full until enough come back).  Raising the limit does not run the
 * callback: the caller knows there is room.
 *
 * @return 0; `-EINVAL`.
 */
ZBUF_EXPORT int zbuf_pool_quota_set_limit(zbuf_pool_quota_t *q, size_t limit);

/** @brief Buffers held through @p q now (a snapshot); 0 for NULL. */
ZBUF_EXPORT size_t zbuf_pool_quota_held(const zbuf_pool_quota_t *q);

/** @brief The limit of @p q; 0 for NULL. */
ZBUF_EXPORT size_t zbuf_pool_quota_limit(const zbuf_pool_quota_t *q);

/**
 * @brief The pool @p b belongs to.
 * @return the pool (borrowed), or NULL when @p b is not a pool buffer.
 */
ZBUF_EXPORT zbuf_pool_t *zbuf_buf_pool(const zbuf_buf_t *b);

/**
 * @brief The quota @p b is charged to.
 * @param b  a buffer the caller holds a reference to.
 * @return the quota (borrowed: valid while @p b is held), or NULL when @p b
 *         is not a pool buffer or was taken with zbuf_pool_get().
 */
ZBUF_EXPORT zbuf_pool_quota_t *zbuf_buf_quota(const zbuf_buf_t *b);

/** @} */

/** @brief Bytes per buffer of @p p. */
ZBUF_EXPORT size_t zbuf_pool_buf_size(const zbuf_pool_t *p);

/** @brief Number of buffers of @p p currently free (a snapshot). */
ZBUF_EXPORT size_t zbuf_pool_available(const zbuf_pool_t *p);

/** @brief Total number of buffers of @p p. */
ZBUF_EXPORT size_t zbuf_pool_capacity(const zbuf_pool_t *p);

/**
 * @brief The one run of memory that holds the data of every buffer of @p p.
 *
 * For registering a pool with the kernel once instead of at every I/O
 * (io_uring fixed buffers: zbuf_uring_register_pool() in zbuf-uring).  The
 * run is fixed for the pool's life: buffer @c i of the pool starts at a
 * 64-byte aligned offset of it and ends within it.  It is the pool's own
 * memory: it stays valid until the pool is freed (zbuf_pool_delete() and
 * the return of the last buffer).
 *
 * @param p  the pool (borrowed).
 * @param[out] base  receives the first byte.
 * @param[out] size  receives the length in bytes.
 * @return 0; `-EINVAL` for a NULL argument.
 */
ZBUF_EXPORT int zbuf_pool_memory(const zbuf_pool_t *p, void **base, size_t *size);

#ifdef __cplusplus
}
#endif

#endif /* ZBUF_POOL_H */
