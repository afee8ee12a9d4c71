/* SPDX-License-Identifier: MIT */
/*
 * Fixed-size buffer pools.  One allocation holds the pool header, the
 * buffer headers and the data (each buffer 64-byte aligned).  A buffer whose
 * last reference goes is pushed back on the free list.  Deleting a pool with
 * buffers still out marks it; the last buffer to come back frees it.
 *
 * The free list is protected by a mutex: buffers are released on whatever
 * thread drops the last reference, and an uncontended lock costs less than
 * getting a lock-free stack right against ABA.
 *
 * Notify callbacks run outside the lock, so that they may take buffers.
 * `notifying` counts the calls in flight; zbuf_pool_notify_sync() and
 * zbuf_pool_delete() wait on `idle` until it is 0, so that when they return
 * no call of the old callback still runs and the pool's memory outlives
 * every call.  zbuf_pool_set_notify() itself does not wait: a caller may
 * hold a lock its callback takes (the libuv adapter does).  A thread inside a callback of a pool does not wait for that
 * pool (it would wait for itself): each thread keeps the callbacks it is in
 * on a list of stack frames, `in_notify`.  A pool deleted from inside its
 * own callback is freed when that call returns.
 *
 * Quotas (zbuf_pool_quota_create()) count, under the pool's lock, the
 * buffers taken through them that have not come back: a buffer remembers
 * its quota while it is out (u.pool.quota) and zbuf__pool_put() uncharges
 * it.  A quota's callback runs like a notify callback (outside the lock,
 * counted in `notifying`, waited for by zbuf_pool_quota_delete()).  A
 * deleted quota lives on until its last buffer is back; the pool lives on
 * until its last quota is freed (`nquotas`), so that a late return never
 * finds either gone.
 */
#include <pthread.h>

#include "internal.h"

#define POOL_ALIGN 64

struct zbuf_pool {
    pthread_mutex_t lock;
    struct zbuf_buf *free;  /* free list through u.pool.next_free */
    size_t nfree;           /* buffers on the free list */
    size_t count;           /* buffers in all */
    size_t buf_size;        /* bytes per buffer */
    size_t stride;          /* distance between two buffers' data */
    size_t mem_size;        /* size of this whole allocation */
    bool deleted;           /* zbuf_pool_delete() called: no more notify calls */
    bool orphaned;          /* zbuf_pool_delete() returned: the last buffer or
                               notify call to come back frees the pool */
    zbuf_pool_notify_cb notify; /* called when nfree goes 0 -> 1 */
    void *notify_arg;
    struct notify_watch {       /* zbuf_pool_add_notify() watchers, called after it */
        zbuf_pool_notify_cb cb;
        void *arg;
    } watch[ZBUF_POOL_WATCHERS_MAX];
    unsigned nwatch;
    size_t nquotas;         /* quotas not yet freed (they point at the pool) */
    unsigned notifying;     /* notify and quota calls in flight */
    unsigned idle_waiters;  /* threads waiting on `idle` */
    pthread_cond_t idle;    /* notifying dropped to 0 */
    struct zbuf_buf hdrs[]; /* count headers, then the data area */
};

struct zbuf_pool_quota {
    struct zbuf_pool *pool;
    size_t limit;          /* most buffers held at once, >= 1; under the pool's lock */
    size_t held;           /* buffers taken through it, not back yet; under the lock */
    zbuf_pool_quota_cb cb; /* called when held drops below limit again; may be NULL */
    void *arg;
    bool deleted;          /* zbuf_pool_quota_delete() called: no more calls, no more
                              buffers; freed when held reaches 0 */
};

static size_t round_up(size_t n, size_t a)
{
    return (n + a - 1) / a * a;
}

int zbuf_pool_create(size_t buf_size, size_t count, zbuf_pool_t **out)
{
    if (buf_size == 0 || count == 0 || out == NULL)
        return -EINVAL;
    size_t stride = round_up(buf_size, POOL_ALIGN);
    if (stride < buf_size || count > (SIZE_MAX / 2) / stride ||
        count > (SIZE_MAX / 4) / sizeof(struct zbuf_buf))
        return -EOVERFLOW;
    size_t head = round_up(sizeof(struct zbuf_pool) + count * sizeof(struct zbuf_buf), POOL_ALIGN);
    size_t total = head + count * stride + POOL_ALIGN;
    struct zbuf_pool *p = zbuf__alloc(total);
    if (p == NULL)
        return -ENOMEM;
    if (pthread_mutex_init(&p->lock, NULL) != 0) {
        zbuf__free(p, total);
        return -ENOMEM;
    }
    if (pthread_cond_init(&p->idle, NULL) != 0) {
        pthread_mutex_destroy(&p->lock);
        zbuf__free(p, total);
        return -ENOMEM;
    }
    p->count = p->nfree = count;
    p->buf_size = buf_size;
    p->stride = stride;
    p->mem_size = total;
    p->deleted = p->orphaned = false;
    p->free = NULL;
    p->notify = NULL;
    p->notify_arg = NULL;
    p->notifying = p->idle_waiters = 0;
    p->nwatch = 0;
    p->nquotas = 0;
    uint8_t *data = (uint8_t *)round_up((uintptr_t)p + head, POOL_ALIGN);
    for (size_t i = count; i-- > 0;) {
        struct zbuf_buf *b = &p->hdrs[i];
        atomic_init(&b->owner, ZBUF__SHARED);
        atomic_init(&b->local, 0);
        atomic_init(&b->shared, 0);
        b->kind = ZBUF__BUF_POOL;
        b->cb2 = 0;
        b->fd = -1;
        b->base = data + i * stride;
        b->size = buf_size;
        b->u.pool.pool = p;
        b->u.pool.quota = NULL;
        b->u.pool.next_free = p->free;
        p->free = b;
    }
    ZBUF__COUNT(pools, 1);
    *out = p;
    return 0;
}

static void pool_free(struct zbuf_pool *p)
{
    pthread_cond_destroy(&p->idle);
    pthread_mutex_destroy(&p->lock);
    ZBUF__COUNT(pools, -1);
    zbuf__free(p, p->mem_size);
}

/* The notify callbacks running on this thread, innermost first. */
struct notify_frame {
    const struct zbuf_pool *pool;
    struct notify_frame *up;
};
static _Thread_local struct notify_frame *in_notify;

static bool in_notify_of(const struct zbuf_pool *p)
{
    for (const struct notify_frame *f = in_notify; f; f = f->up)
        if (f->pool == p)
            return true;
    return false;
}

/* With the lock held: wait until no notify call of `p` runs on another
 * thread (unless this thread is inside one, see the file comment). */
static void wait_notify_idle(struct zbuf_pool *p)
{
    if (in_notify_of(p))
        return;
    p->idle_waiters++;
    while (p->notifying > 0)
        pthread_cond_wait(&p->idle, &p->lock);
    p->idle_waiters--;
}

/* With the lock held: may the pool's memory go now? */
static bool pool_done(const struct zbuf_pool *p)
{
    return p->orphaned && p->nfree == p->count && p->notifying == 0 && p->nquotas == 0;
}

void zbuf_pool_delete(zbuf_pool_t *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->lock);
    p->deleted = true;
    wait_notify_idle(p);
    p->orphaned = true;
    bool done = pool_done(p);
    pthread_mutex_unlock(&p->lock);
    if (done)
        pool_free(p);
}

/* With the lock held: the first free buffer, charged to q (may be NULL),
 * or NULL. */
static struct zbuf_buf *take_locked(struct zbuf_pool *p, struct zbuf_pool_quota *q)
{
    struct zbuf_buf *b = p->deleted ? NULL : p->free;
    if (b) {
        p->free = b->u.pool.next_free;
        p->nfree--;
        b->u.pool.quota = q;
    }
    return b;
}

/* A buffer just taken becomes the caller's new reference. */
static void hand_out(struct zbuf_buf *b, zbuf_buf_t **out)
{
    zbuf__buf_count_init(b); /* biased to the thread that took it */
    ZBUF__COUNT(bufs, 1);
    *out = b;
}

int zbuf_pool_get(zbuf_pool_t *p, zbuf_buf_t **out)
{
    if (p == NULL || out == NULL)
        return -EINVAL;
    pthread_mutex_lock(&p->lock);
    struct zbuf_buf *b = take_locked(p, NULL);
    bool deleted = p->deleted;
    pthread_mutex_unlock(&p->lock);
    if (b == NULL)
        return deleted ? -EINVAL : -ENOBUFS;
    hand_out(b, out);
    return 0;
}

/* With the lock held: uncharge a returning buffer from its quota.  Returns
 * the quota when its callback is due (it was full and has room now), and
 * sets *dead when the quota was deleted and this was its last buffer. */
static struct zbuf_pool_quota *uncharge_locked(struct zbuf_pool *p, struct zbuf_buf *b,
                                               struct zbuf_pool_quota **dead);

void zbuf__pool_put(struct zbuf_buf *b)
{
    struct zbuf_pool *p = b->u.pool.pool;
    struct zbuf_pool_quota *dead = NULL;
    pthread_mutex_lock(&p->lock);
    struct zbuf_pool_quota *qcall = uncharge_locked(p, b, &dead);
    b->u.pool.next_free = p->free;
    p->free = b;
    p->nfree++;
    bool done = pool_done(p);
    /* The callbacks to run, copied: they run without the lock, and may
     * change the set. */
    struct notify_watch calls[ZBUF_POOL_WATCHERS_MAX + 1];
    unsigned ncalls = 0;
    if (p->nfree == 1 && !p->deleted) {
        if (p->notify)
            calls[ncalls++] = (struct notify_watch){p->notify, p->notify_arg};
        for (unsigned i = 0; i < p->nwatch; i++)
            calls[ncalls++] = p->watch[i];
    }
    if (ncalls || qcall)
        p->notifying++;
    pthread_mutex_unlock(&p->lock);
    if (dead)
        zbuf__free(dead, sizeof *dead);
    if (done) {
        pool_free(p);
        return;
    }
    if (ncalls == 0 && qcall == NULL)
        return;
    struct notify_frame frame = {p, in_notify};
    in_notify = &frame;
    /* The quota first: a notify callback may delete it (on this thread, so
     * without waiting for this call). */
    if (qcall)
        qcall->cb(qcall, qcall->arg);
    for (unsigned i = 0; i < ncalls; i++)
        calls[i].cb(p, calls[i].arg);
    in_notify = frame.up;
    pthread_mutex_lock(&p->lock);
    if (--p->notifying == 0 && p->idle_waiters > 0)
        pthread_cond_broadcast(&p->idle);
    done = pool_done(p); /* deleted from inside the callback */
    pthread_mutex_unlock(&p->lock);
    if (done)
        pool_free(p);
}

int zbuf_pool_set_notify(zbuf_pool_t *p, zbuf_pool_notify_cb cb, void *arg)
{
    if (p == NULL)
        return -EINVAL;
    pthread_mutex_lock(&p->lock);
    bool deleted = p->deleted;
    if (!deleted) {
        p->notify = cb;
        p->notify_arg = arg;
    }
    pthread_mutex_unlock(&p->lock);
    return deleted ? -EINVAL : 0;
}

int zbuf_pool_add_notify(zbuf_pool_t *p, zbuf_pool_notify_cb cb, void *arg)
{
    if (p == NULL || cb == NULL)
        return -EINVAL;
    int rc = 0;
    pthread_mutex_lock(&p->lock);
    if (p->deleted) {
        rc = -EINVAL;
    } else {
        for (unsigned i = 0; i < p->nwatch && rc == 0; i++)
            if (p->watch[i].cb == cb && p->watch[i].arg == arg)
                rc = -EEXIST;
        if (rc == 0 && p->nwatch == ZBUF_POOL_WATCHERS_MAX)
            rc = -ENOSPC;
        if (rc == 0)
            p->watch[p->nwatch++] = (struct notify_watch){cb, arg};
    }
    pthread_mutex_unlock(&p->lock);
    return rc;
}

int zbuf_pool_remove_notify(zbuf_pool_t *p, zbuf_pool_notify_cb cb, void *arg)
{
    if (p == NULL || cb == NULL)
        return -EINVAL;
    int rc = -ENOENT;
    pthread_mutex_lock(&p->lock);
    for (unsigned i = 0; i < p->nwatch; i++) {
        if (p->watch[i].cb == cb && p->watch[i].arg == arg) {
            p->watch[i] = p->watch[--p->nwatch]; /* order is not promised */
            rc = 0;
            break;
        }
    }
    pthread_mutex_unlock(&p->lock);
    return rc;
}

int zbuf_pool_notify_sync(zbuf_pool_t *p)
{
    if (p == NULL)
        return -EINVAL;
    pthread_mutex_lock(&p->lock);
    wait_notify_idle(p);
    pthread_mutex_unlock(&p->lock);
    return 0;
}

size_t zbuf_pool_buf_size(const zbuf_pool_t *p)
{
    return p ? p->buf_size : 0;
}

size_t zbuf_pool_available(const zbuf_pool_t *p)
{
    if (p == NULL)
        return 0;
    pthread_mutex_lock((pthread_mutex_t *)&p->lock);
    size_t n = p->nfree;
    pthread_mutex_unlock((pthread_mutex_t *)&p->lock);
    return n;
}

size_t zbuf_pool_capacity(const zbuf_pool_t *p)
{
    return p ? p->count : 0;
}

/* ------------------------------------------------------------------ quotas */

static struct zbuf_pool_quota *uncharge_locked(struct zbuf_pool *p, struct zbuf_buf *b,
                                               struct zbuf_pool_quota **dead)
{
    struct zbuf_pool_quota *q = b->u.pool.quota;
    if (q == NULL)
        return NULL;
    b->u.pool.quota = NULL;
    bool was_full = q->held >= q->limit;
    q->held--;
    if (q->deleted) {
        if (q->held == 0) {
            p->nquotas--;
            *dead = q;
        }
        return NULL;
    }
    return was_full && q->held < q->limit && q->cb != NULL && !p->deleted ? q : NULL;
}

int zbuf_pool_quota_create(zbuf_pool_t *p, size_t limit, zbuf_pool_quota_cb cb, void *arg,
                           zbuf_pool_quota_t **out)
{
    if (p == NULL || limit == 0 || out == NULL)
        return -EINVAL;
    struct zbuf_pool_quota *q = zbuf__alloc(sizeof *q);
    if (q == NULL)
        return -ENOMEM;
    *q = (struct zbuf_pool_quota){.pool = p, .limit = limit, .cb = cb, .arg = arg};
    pthread_mutex_lock(&p->lock);
    bool deleted = p->deleted;
    if (!deleted)
        p->nquotas++;
    pthread_mutex_unlock(&p->lock);
    if (deleted) {
        zbuf__free(q, sizeof *q);
        return -EINVAL;
    }
    *out = q;
    return 0;
}

void zbuf_pool_quota_delete(zbuf_pool_quota_t *q)
{
    if (q == NULL)
        return;
    struct zbuf_pool *p = q->pool;
    pthread_mutex_lock(&p->lock);
    q->deleted = true;
    wait_notify_idle(p);
    bool free_now = q->held == 0;
    if (free_now)
        p->nquotas--;
    bool done = pool_done(p);
    pthread_mutex_unlock(&p->lock);
    if (free_now)
        zbuf__free(q, sizeof *q);
    if (done)
        pool_free(p);
}

int zbuf_pool_quota_get(zbuf_pool_quota_t *q, zbuf_buf_t **out)
{
    if (q == NULL || out == NULL)
        return -EINVAL;
    struct zbuf_pool *p = q->pool;
    int rc = 0;
    struct zbuf_buf *b = NULL;
    pthread_mutex_lock(&p->lock);
    if (q->deleted || p->deleted)
        rc = -EINVAL;
    else if (q->held >= q->limit)
        rc = -EDQUOT;
    else if ((b = take_locked(p, q)) == NULL)
        rc = -ENOBUFS;
    else
        q->held++;
    pthread_mutex_unlock(&p->lock);
    if (rc == 0)
        hand_out(b, out);
    return rc;
}

int zbuf_pool_quota_set_limit(zbuf_pool_quota_t *q, size_t limit)
{
    if (q == NULL || limit == 0)
        return -EINVAL;
    pthread_mutex_lock(&q->pool->lock);
    int rc = q->deleted ? -EINVAL : 0;
    if (rc == 0)
        q->limit = limit;
    pthread_mutex_unlock(&q->pool->lock);
    return rc;
}

/* Read one field of q under its pool's lock. */
static size_t quota_read(const zbuf_pool_quota_t *q, bool limit)
{
    if (q == NULL)
        return 0;
    pthread_mutex_t *lock = &q->pool->lock;
    pthread_mutex_lock(lock);
    size_t v = limit ? q->limit : q->held;
    pthread_mutex_unlock(lock);
    return v;
}

size_t zbuf_pool_quota_held(const zbuf_pool_quota_t *q)
{
    return quota_read(q, false);
}

size_t zbuf_pool_quota_limit(const zbuf_pool_quota_t *q)
{
    return quota_read(q, true);
}

zbuf_pool_t *zbuf_buf_pool(const zbuf_buf_t *b)
{
    return b != NULL && b->kind == ZBUF__BUF_POOL ? b->u.pool.pool : NULL;
}

zbuf_pool_quota_t *zbuf_buf_quota(const zbuf_buf_t *b)
{
    return b != NULL && b->kind == ZBUF__BUF_POOL ? b->u.pool.quota : NULL;
}

int zbuf_pool_memory(const zbuf_pool_t *p, void **base, size_t *size)
{
    if (p == NULL || base == NULL || size == NULL)
        return -EINVAL;
    /* Buffer i's data is at hdrs[0].base + i * stride (zbuf_pool_create). */
    *base = p->hdrs[0].base;
    *size = p->count * p->stride;
    return 0;
}
