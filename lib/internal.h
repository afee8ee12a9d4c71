/* SPDX-License-Identifier: MIT */
/*
 * Private declarations shared by the files of lib/.  Nothing here is part of
 * the installed API; names are zbuf__ (double underscore) and hidden.
 *
 * Object model
 * ------------
 *   struct zbuf      one byte sequence: a doubly linked list of segments.
 *   struct zbuf_seg  one range [off, off + len) of one buffer; holds one
 *                    reference to that buffer; belongs to exactly one zbuf.
 *   struct zbuf_buf  the memory (or file range); counts references from
 *                    segments and from callers' handles.
 *
 * Two tiers of checks, as in lwIP: caller errors are always checked and
 * return -EINVAL/-ERANGE; internal invariants are ZBUF__ASSERT()s, compiled
 * in only with ZBUF_DEBUG, which also runs zbuf_check() after every
 * modifying call.
 */
#ifndef ZBUF_LIB_INTERNAL_H
#define ZBUF_LIB_INTERNAL_H

#include <assert.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zbuf/zbuf.h>

#define ZBUF__LIKELY(x) __builtin_expect(!!(x), 1)
#define ZBUF__UNLIKELY(x) __builtin_expect(!!(x), 0)
#define ZBUF__HIDDEN __attribute__((visibility("hidden")))
/* A hot helper the compiler must inline into its callers (measured: a call
 * costs the workload of bench_core about 1 % per helper). */
#define ZBUF__ALWAYS_INLINE inline __attribute__((always_inline))

#ifdef ZBUF_DEBUG
#define ZBUF__ASSERT(c)                                                                 \
    do {                                                                                \
        if (!(c)) {                                                                     \
            fprintf(stderr, "zbuf: assertion failed: %s (%s:%d)\n", #c, __FILE__,      \
                    __LINE__);                                                          \
            abort();                                                                    \
        }                                                                               \
    } while (0)
#else
#define ZBUF__ASSERT(c) ((void)0)
#endif

/* ---------------------------------------------------------------- buffers */

enum zbuf__buf_kind {
    ZBUF__BUF_HEAP = 0, /* library memory; data follows the header in one block */
    ZBUF__BUF_USER = 1, /* caller's memory enrolled with a release callback; read-only */
    ZBUF__BUF_POOL = 2, /* one buffer of a zbuf_pool; goes back to it on release */
    ZBUF__BUF_FILE = 3, /* a byte range of a file; no memory; read-only */
};

/*
 * A thread's record for biased reference counting (buf.c).  A buffer biased
 * to a record is counted by the thread that holds the record with plain
 * loads and stores; `in_cs` is not 0 while that thread may be between
 * reading a buffer's owner and storing its new count, so that another
 * thread taking the bias away can wait for the store (see "Biased
 * reference counts" in buf.c and zbuf__run_enter()).  Records are never
 * freed: a thread that exits puts its record on a free list and the next
 * new thread takes it over, with the buffers biased to it.
 */
struct zbuf__owner {
    _Atomic uint32_t in_cs;        /* runs the holding thread is in; written by it only */
    _Atomic uint32_t share_credit; /* new buffers of this thread start shared while > 0 */
    _Atomic uint32_t made;         /* buffers made biased to it (written by its thread) */
    _Atomic uint32_t made_at_conversion; /* `made` at the last conversion; 0: none yet */
    struct zbuf__owner *next_free; /* free list (buf.c), under its lock */
    struct zbuf__owner *next_all;  /* every record ever made, for fork() */
} __attribute__((aligned(64)));

/* A buffer's owner while a thread takes its bias away, and once it is
 * shared; never a thread's record, never NULL. */
extern struct zbuf__owner zbuf__owner_converting ZBUF__HIDDEN;
extern struct zbuf__owner zbuf__owner_shared ZBUF__HIDDEN;
#define ZBUF__SHARED (&zbuf__owner_shared)

struct zbuf_buf {
    /* References: one per segment, one per handle a caller holds.  Their
     * number is `local` + `shared` and is never 0 while the buffer is
     * reachable.  Three states, told by `owner`:
     *  - biased (owner is a thread record): the record's thread counts in
     *    `local` without atomic read-modify-writes; `shared` is 0; any other
     *    thread goes through zbuf__ref_slow();
     *  - converting (owner == &zbuf__owner_converting): one thread is moving
     *    the count to `shared`; everybody else waits for it;
     *  - shared (owner == ZBUF__SHARED): `shared` is the whole count,
     *    updated with atomic read-modify-writes; `local` is unused.  Final
     *    until release.
     * `owner` is never NULL, so that a thread without a record (NULL)
     * never takes a buffer for its own. */
    _Atomic(struct zbuf__owner *) owner;
    _Atomic uint32_t local;
    _Atomic int32_t shared;
    int32_t fd;           /* FILE only */
    uint8_t kind;         /* enum zbuf__buf_kind */
    uint8_t cb2;          /* USER: the callback is a zbuf_release2_cb */
    uint16_t stamp;       /* biased: the owner's `made` when this was made (buf.c) */
    uint8_t *base;        /* first byte; NULL for FILE */
    size_t size;          /* bytes; > 0 */
    union {
        struct {          /* USER and FILE */
            void (*cb)(void); /* zbuf_release_cb, or zbuf_release2_cb if cb2 */
            void *arg;
            union {
                void *arg2;   /* USER with cb2 */
                off_t foff;   /* FILE: file offset of byte 0 */
            } x;
        } user;
        struct {          /* POOL */
            struct zbuf_pool *pool;
            struct zbuf_buf *next_free; /* valid while in the pool's free list */
            struct zbuf_pool_quota *quota; /* charged to while out of the pool, or NULL */
        } pool;
    } u;
};

/* Release a buffer whose last reference went (buf.c). */
ZBUF__HIDDEN void zbuf__buf_release(struct zbuf_buf *b);
/* Return a POOL buffer whose last reference went (pool.c). */
ZBUF__HIDDEN void zbuf__pool_put(struct zbuf_buf *b);
/* Allocate a HEAP buffer of `size` bytes with one reference. */
ZBUF__HIDDEN struct zbuf_buf *zbuf__buf_new_heap(size_t size);
/* Enrol caller memory as a USER buffer with one reference (no argument checks). */
ZBUF__HIDDEN struct zbuf_buf *zbuf__buf_new_user(void *data, size_t size, zbuf_release_cb cb,
                                                 void *arg);
/* The same with a two-word callback. */
ZBUF__HIDDEN struct zbuf_buf *zbuf__buf_new_user2(void *data, size_t size, zbuf_release2_cb cb,
                                                  void *arg, void *arg2);
/* Forget the release callback of a buffer that was never handed out. */
static inline void zbuf__buf_forget_cb(struct zbuf_buf *b)
{
    b->u.user.cb = NULL;
}
/* Copy `len` bytes from byte `in` of a segment of `b` (memory or file). */
ZBUF__HIDDEN int zbuf__buf_read(const struct zbuf_buf *b, size_t boff, void *dst, size_t len);
/* Give a buffer its first reference, biased to the calling thread when
 * biasing is on (buf.c; pools call it on every zbuf_pool_get()). */
ZBUF__HIDDEN void zbuf__buf_count_init(struct zbuf_buf *b);
/* References in all (a snapshot unless the caller holds the only one). */
ZBUF__HIDDEN uint32_t zbuf__buf_refs(const struct zbuf_buf *b);
/* This thread's record, attaching one if needed; NULL when biasing is off. */
ZBUF__HIDDEN struct zbuf__owner *zbuf__owner_self(void);
/* Give the calling thread's record back (its exit hook in alloc.c). */
ZBUF__HIDDEN void zbuf__owner_detach(void);
/* Test hooks (buf.c): biasing of new buffers on or off (off: they start
 * shared), whether it is available and on, how many buffers were converted
 * to shared counting and taken over by another thread, and how many buffers
 * a thread makes shared after a conversion (64). */
ZBUF__HIDDEN void zbuf__bias_set_enabled(bool on);
ZBUF__HIDDEN bool zbuf__bias_enabled(void);
ZBUF__HIDDEN uint64_t zbuf__bias_conversions(void);
ZBUF__HIDDEN uint64_t zbuf__bias_takeovers(void);
ZBUF__HIDDEN void zbuf__bias_set_share_credit(uint32_t n);

/* --------------------------------------------------------------- segments */

struct zbuf_seg {
    struct zbuf_seg *next; /* NULL for the last */
    struct zbuf_seg *prev; /* NULL for the first */
    struct zbuf *owner;    /* the zbuf whose list holds it; NULL once freed */
    struct zbuf_buf *buf;  /* holds one reference */
    size_t off;            /* off + len <= buf->size */
    size_t len;            /* > 0: no segment is ever empty */
};

#define ZBUF__MAGIC 0x7a627566u /* "zbuf" */

struct zbuf {
    uint32_t magic;          /* ZBUF__MAGIC while alive, 0 once deleted */
    uint32_t pad_;
    struct zbuf_seg *head;   /* NULL iff len == 0 */
    struct zbuf_seg *tail;
    size_t len;              /* sum of segment lengths */
    size_t nsegs;            /* number of segments */
    /* Reservation made by zbuf_reserve(): rsv_seg's tailroom (rsv_tail bytes
     * from its end at rsv_end) and then rsv_buf (a fresh buffer, our
     * reference).  Dropped by any other modifying call. */
    struct zbuf_seg *rsv_seg;
    size_t rsv_end;
    size_t rsv_tail;
    struct zbuf_buf *rsv_buf;
};

static inline uint8_t *zbuf__seg_ptr(const struct zbuf_seg *s)
{
    return s->buf->base + s->off;
}

static inline bool zbuf__valid(const struct zbuf *z)
{
    return z != NULL && z->magic == ZBUF__MAGIC;
}

static inline bool zbuf__seg_of(const struct zbuf *z, const struct zbuf_seg *s)
{
    return s != NULL && s->owner == z;
}

/* ---------------------------------------------- per-thread state, counters */

/* Counters of one thread.  Only the owning thread writes them (a relaxed
 * load and store, no read-modify-write); zbuf_stats_get() reads every
 * thread's.  Live segments and zbufs are not counted per operation: they are
 * derived as (taken from the allocator) - (given back) - (sitting in caches),
 * so the cached fast path updates nothing but its cache length. */
struct zbuf__counters {
    _Atomic uint64_t bytes_copied;
    _Atomic uint64_t copies;
    _Atomic uint64_t allocs;
    _Atomic int64_t seg_new;    /* segment descriptors from the allocator */
    _Atomic int64_t seg_del;    /* ... given back to it */
    _Atomic int64_t seg_cached; /* ... in this thread's cache */
    _Atomic int64_t hdr_new;    /* the same for zbuf headers */
    _Atomic int64_t hdr_del;
    _Atomic int64_t hdr_cached;
    _Atomic int64_t small_cached; /* small heap buffers in this thread's cache */
    _Atomic int64_t bufs;       /* buffers created - released */
    _Atomic int64_t pools;      /* pools created - freed */
};

/* Everything libzbuf keeps per thread. */
struct zbuf__tstate {
    struct zbuf_seg *segs;  /* descriptor cache, through ->next */
    struct zbuf *hdrs;      /* header cache, through ->head */
    void *smalls;           /* small heap buffer blocks, linked through their first word */
    unsigned gen;           /* allocator generation the caches belong to */
    int64_t cache_max;      /* bound of each cache in this generation; 0: caching off */
    bool registered;        /* counters registered, exit destructor armed */
    zbuf_allocator_t alloc; /* allocator the cached entries came from */
    unsigned je_tcache;     /* jemalloc explicit tcache id + 1; 0: none */
    bool je_tcache_failed;
    struct zbuf__counters ctr;
    struct zbuf__tstate *reg_next, *reg_prev; /* registry links (stats.c) */
    struct zbuf__owner *owner; /* record for biased counts (buf.c); NULL: none yet */
};

extern __thread struct zbuf__tstate zbuf__ts __attribute__((tls_model("initial-exec")));
/* Bumped by zbuf_set_allocator() and the cache switch: caches of an older
 * generation are drained on their thread's next slow path. */
extern _Atomic unsigned zbuf__gen ZBUF__HIDDEN;

ZBUF__HIDDEN void zbuf__ts_init(void);          /* register this thread (alloc.c) */
ZBUF__HIDDEN void zbuf__ts_register(struct zbuf__tstate *t);   /* stats.c */
ZBUF__HIDDEN void zbuf__ts_unregister(struct zbuf__tstate *t); /* stats.c */

#define ZBUF__LOAD(f) atomic_load_explicit(&(f), memory_order_relaxed)
#define ZBUF__ADD(f, d) atomic_store_explicit(&(f), ZBUF__LOAD(f) + (d), memory_order_relaxed)

/* Count into this thread's block. */
#define ZBUF__COUNT(field, delta)                                                       \
    do {                                                                                \
        if (ZBUF__UNLIKELY(!zbuf__ts.registered))                                       \
            zbuf__ts_init();                                                            \
        ZBUF__ADD(zbuf__ts.ctr.field, (delta));                                         \
    } while (0)

static inline void zbuf__count_copy(size_t n)
{
    ZBUF__COUNT(bytes_copied, n);
    ZBUF__ADD(zbuf__ts.ctr.copies, 1);
}

/* ------------------------------------------ reference counting fast paths */

/*
 * A *run* of reference changes by one thread: zbuf__run_enter() ..
 * zbuf__run_leave(), with zbuf__ref_get()/zbuf__ref_put() in between.  The
 * thread's record counts the runs it is in (`in_cs`); while it is not 0 the
 * thread may be between loading a buffer's owner and storing its `local`,
 * which is what a converting thread waits out (buf.c).  The compiler
 * barriers keep every owner load and `local` store inside the run; the CPU
 * may still move the owner load before the in_cs store becomes visible,
 * which the converting thread's membarrier() covers.  Nothing in a run may
 * block or call back into user code: the out-of-line paths leave the run
 * around the release and the slow path.  `me` is zbuf__ts.owner, possibly
 * NULL (the thread has no record: everything goes the shared or slow way).
 */
static inline struct zbuf__owner *zbuf__run_enter(void)
{
    struct zbuf__owner *me = zbuf__ts.owner;
    if (ZBUF__LIKELY(me != NULL)) {
        uint32_t n = atomic_load_explicit(&me->in_cs, memory_order_relaxed);
        atomic_store_explicit(&me->in_cs, n + 1, memory_order_relaxed);
        atomic_signal_fence(memory_order_seq_cst);
    }
    return me;
}

static inline void zbuf__run_leave(struct zbuf__owner *me)
{
    if (ZBUF__LIKELY(me != NULL)) {
        atomic_signal_fence(memory_order_seq_cst);
        uint32_t n = atomic_load_explicit(&me->in_cs, memory_order_relaxed);
        atomic_store_explicit(&me->in_cs, n - 1, memory_order_release);
    }
}

/* Out of line, inside a run: a change the fast paths cannot make, and the
 * release of a buffer whose last reference went (both leave the run while
 * they work: the release may call the user's callback). */
ZBUF__HIDDEN void zbuf__ref_slow(struct zbuf__owner *me, struct zbuf_buf *b, int delta);
ZBUF__HIDDEN void zbuf__ref_release(struct zbuf__owner *me, struct zbuf_buf *b);

/* Take one more reference, inside a run.  The owner thread of a biased
 * buffer stores the new count without a read-modify-write; a shared buffer
 * takes an atomic add; everything else is out of line. */
static inline void zbuf__ref_get(struct zbuf__owner *me, struct zbuf_buf *b)
{
    struct zbuf__owner *o = atomic_load_explicit(&b->owner, memory_order_acquire);
    if (ZBUF__LIKELY(o == me)) {
        uint32_t n = atomic_load_explicit(&b->local, memory_order_relaxed) + 1;
        atomic_store_explicit(&b->local, n, memory_order_release);
    } else if (o == ZBUF__SHARED) {
        atomic_fetch_add_explicit(&b->shared, 1, memory_order_relaxed);
    } else {
        zbuf__ref_slow(me, b, 1);
    }
}

/* Drop a reference held by a segment or a handle, inside a run; the last
 * one releases the buffer, on this thread, before this returns. */
static inline void zbuf__ref_put(struct zbuf__owner *me, struct zbuf_buf *b)
{
    struct zbuf__owner *o = atomic_load_explicit(&b->owner, memory_order_acquire);
    if (ZBUF__LIKELY(o == me)) {
        uint32_t n = atomic_load_explicit(&b->local, memory_order_relaxed) - 1;
        atomic_store_explicit(&b->local, n, memory_order_release);
        if (n == 0)
            zbuf__ref_release(me, b);
    } else if (o == ZBUF__SHARED) {
        /* Sole holder: nobody else can race with us, skip the atomic RMW. */
        if (atomic_load_explicit(&b->shared, memory_order_acquire) == 1 ||
            atomic_fetch_sub_explicit(&b->shared, 1, memory_order_acq_rel) == 1)
            zbuf__ref_release(me, b);
    } else {
        zbuf__ref_slow(me, b, -1);
    }
}

/* One reference change, a run of its own. */
static inline void zbuf__buf_get(struct zbuf_buf *b)
{
    struct zbuf__owner *me = zbuf__run_enter();
    zbuf__ref_get(me, b);
    zbuf__run_leave(me);
}

static inline void zbuf__buf_put(struct zbuf_buf *b)
{
    struct zbuf__owner *me = zbuf__run_enter();
    zbuf__ref_put(me, b);
    zbuf__run_leave(me);
}

static inline bool zbuf__buf_is_private(const struct zbuf_buf *b)
{
    return (b->kind == ZBUF__BUF_HEAP || b->kind == ZBUF__BUF_POOL) && zbuf__buf_refs(b) == 1;
}

/* memcpy() for the short runs header code copies (a peek window, a field
 * straddling segments): overlapping fixed-size moves, no call. */
static inline void zbuf__copy(void *dst, const void *src, size_t n)
{
    uint8_t *d = dst;
    const uint8_t *s = src;
    if (n > 64) {
        memcpy(d, s, n);
    } else if (n >= 16) {
        memcpy(d, s, 16);
        memcpy(d + n - 16, s + n - 16, 16);
        if (n > 32) {
            memcpy(d + 16, s + 16, 16);
            memcpy(d + n - 32, s + n - 32, 16);
        }
    } else if (n >= 8) {
        memcpy(d, s, 8);
        memcpy(d + n - 8, s + n - 8, 8);
    } else if (n >= 4) {
        memcpy(d, s, 4);
        memcpy(d + n - 4, s + n - 4, 4);
    } else if (n > 0) {
        d[0] = s[0];
        d[n / 2] = s[n / 2];
        d[n - 1] = s[n - 1];
    }
}

/* ------------------------------------------------------ memory and caches */

ZBUF__HIDDEN void *zbuf__alloc(size_t size);
ZBUF__HIDDEN void zbuf__free(void *p, size_t size);
ZBUF__HIDDEN struct zbuf_seg *zbuf__seg_alloc_slow(void);
ZBUF__HIDDEN void zbuf__seg_free_slow(struct zbuf_seg *s);
ZBUF__HIDDEN struct zbuf *zbuf__hdr_alloc_slow(void);
ZBUF__HIDDEN void zbuf__hdr_free_slow(struct zbuf *z);

/* Bound of each per-thread cache: enough for bursts of dup/split, small
 * enough not to hoard memory. */
#define ZBUF__CACHE_MAX 256

static inline bool zbuf__cache_current(const struct zbuf__tstate *t)
{
    return t->gen == atomic_load_explicit(&zbuf__gen, memory_order_relaxed);
}

/* The fast paths below are a cache pop or push; everything else (first use
 * of a thread, a new allocator, an empty or full cache) is out of line. */
static inline struct zbuf_seg *zbuf__seg_alloc(void)
{
    struct zbuf__tstate *t = &zbuf__ts;
    struct zbuf_seg *s = t->segs;
    if (ZBUF__LIKELY(s != NULL && zbuf__cache_current(t))) {
        t->segs = s->next;
        ZBUF__ADD(t->ctr.seg_cached, -1);
        return s;
    }
    return zbuf__seg_alloc_slow();
}

/* Several descriptors for one call (a dup's loop): the generation is
 * checked once and the cache count written once, at zbuf__seg_batch_end(),
 * instead of per descriptor.  Between begin and end the calling thread makes
 * no other cache call. */
struct zbuf__seg_batch {
    struct zbuf_seg *next; /* the cache's entries still to take; NULL: none usable */
    int64_t taken;         /* taken from the cache, not yet subtracted */
};

static inline void zbuf__seg_batch_begin(struct zbuf__seg_batch *sb)
{
    struct zbuf__tstate *t = &zbuf__ts;
    sb->next = zbuf__cache_current(t) ? t->segs : NULL;
    sb->taken = 0;
}

static inline void zbuf__seg_batch_end(struct zbuf__seg_batch *sb)
{
    struct zbuf__tstate *t = &zbuf__ts;
    if (sb->taken == 0)
        return;
    t->segs = sb->next;
    ZBUF__ADD(t->ctr.seg_cached, -sb->taken);
    sb->taken = 0;
}

static inline struct zbuf_seg *zbuf__seg_batch_alloc(struct zbuf__seg_batch *sb)
{
    struct zbuf_seg *s = sb->next;
    if (ZBUF__LIKELY(s != NULL)) {
        sb->next = s->next;
        sb->taken++;
        return s;
    }
    zbuf__seg_batch_end(sb); /* the slow path sees an up-to-date cache */
    s = zbuf__seg_alloc_slow();
    zbuf__seg_batch_begin(sb);
    return s;
}

static inline void zbuf__seg_free(struct zbuf_seg *s)
{
    struct zbuf__tstate *t = &zbuf__ts;
    s->owner = NULL; /* a stale handle no longer matches any zbuf */
    int64_t c = ZBUF__LOAD(t->ctr.seg_cached);
    if (ZBUF__LIKELY(c < t->cache_max && zbuf__cache_current(t))) {
        s->next = t->segs;
        t->segs = s;
        atomic_store_explicit(&t->ctr.seg_cached, c + 1, memory_order_relaxed);
        return;
    }
    zbuf__seg_free_slow(s);
}

/* Free the descriptors first..last (n of them, linked through ->next, the
 * last's next NULL) in one splice onto the cache when it has room. */
static inline void zbuf__seg_free_chain(struct zbuf_seg *first, struct zbuf_seg *last, size_t n)
{
    struct zbuf__tstate *t = &zbuf__ts;
    int64_t c = ZBUF__LOAD(t->ctr.seg_cached) + (int64_t)n;
    if (ZBUF__LIKELY(c <= t->cache_max && zbuf__cache_current(t))) {
        last->next = t->segs;
        t->segs = first;
        atomic_store_explicit(&t->ctr.seg_cached, c, memory_order_relaxed);
        return;
    }
    while (first) {
        struct zbuf_seg *next = first->next;
        zbuf__seg_free(first);
        first = next;
    }
}

static inline struct zbuf *zbuf__hdr_alloc(void)
{
    struct zbuf__tstate *t = &zbuf__ts;
    struct zbuf *z = t->hdrs;
    if (ZBUF__LIKELY(z != NULL && zbuf__cache_current(t))) {
        t->hdrs = (struct zbuf *)z->head;
        ZBUF__ADD(t->ctr.hdr_cached, -1);
        return z;
    }
    return zbuf__hdr_alloc_slow();
}

static inline void zbuf__hdr_free(struct zbuf *z)
{
    struct zbuf__tstate *t = &zbuf__ts;
    z->magic = 0;
    int64_t c = ZBUF__LOAD(t->ctr.hdr_cached);
    if (ZBUF__LIKELY(c < t->cache_max && zbuf__cache_current(t))) {
        z->head = (struct zbuf_seg *)t->hdrs;
        t->hdrs = z;
        atomic_store_explicit(&t->ctr.hdr_cached, c + 1, memory_order_relaxed);
        return;
    }
    zbuf__hdr_free_slow(z);
}

/* Heap buffers of (ZBUF__SMALL_SIZE / 2, ZBUF__SMALL_SIZE] data bytes (a
 * header made by zbuf_prepend_space(): ZBUF_HEADROOM_DEFAULT plus the
 * header) all take a block of ZBUF__SMALL_BLOCK bytes, which a per-thread
 * cache of at most ZBUF__SMALL_CACHE_MAX blocks recycles without the
 * allocator: a packet's headers cost a cache pop and push. */
#define ZBUF__HEAP_HDR 64
#define ZBUF__SMALL_SIZE 256
#define ZBUF__SMALL_BLOCK (ZBUF__HEAP_HDR + ZBUF__SMALL_SIZE)
#define ZBUF__SMALL_CACHE_MAX 64

static inline bool zbuf__heap_is_small(size_t size)
{
    return size > ZBUF__SMALL_SIZE / 2 && size <= ZBUF__SMALL_SIZE;
}

/* A block of ZBUF__SMALL_BLOCK bytes (NULL: out of memory); give it back
 * with zbuf__small_free(). */
ZBUF__HIDDEN void *zbuf__small_alloc(void);
ZBUF__HIDDEN void zbuf__small_free(void *p);

/* Test hook: with false, descriptors bypass the per-thread caches so that
 * every allocation reaches the allocator (fault-injection tests).  Flushes
 * the calling thread's cache. */
ZBUF__HIDDEN void zbuf__cache_set_enabled(bool on);

/* Do we have live objects (zbuf_set_allocator refuses then)? */
ZBUF__HIDDEN bool zbuf__anything_live(void);

#ifdef ZBUF_DEBUG
#define ZBUF__CHECKED(z)                                                                \
    do {                                                                                \
        if (zbuf_check(z) != 0) {                                                       \
            fprintf(stderr, "zbuf: chain check failed after %s\n", __func__);           \
            abort();                                                                    \
        }                                                                               \
    } while (0)
#else
#define ZBUF__CHECKED(z) ((void)0)
#endif

#endif /* ZBUF_LIB_INTERNAL_H */
