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

struct zbuf_buf {
    /* References: one per segment, one per handle a caller holds.  Never 0
     * while reachable.  Updated without an atomic RMW while it is 1 (the
     * holder is then the only one who can see the buffer). */
    _Atomic uint32_t refs;
    uint8_t kind;         /* enum zbuf__buf_kind */
    uint8_t pad_[3];
    uint8_t *base;        /* first byte; NULL for FILE */
    size_t size;          /* bytes; > 0 */
    union {
        struct {          /* USER and FILE */
            zbuf_release_cb cb;
            void *arg;
            int fd;       /* FILE only */
            off_t foff;   /* FILE only: file offset of byte 0 */
        } user;
        struct {          /* POOL */
            struct zbuf_pool *pool;
            struct zbuf_buf *next_free; /* valid while in the pool's free list */
            struct zbuf_pool_quota *quota; /* charged to while out of the pool, or NULL */
        } pool;
    } u;
};

/* Drop a reference held by a segment or a handle; releases on the last. */
ZBUF__HIDDEN void zbuf__buf_release(struct zbuf_buf *b);
/* Return a POOL buffer whose last reference went (pool.c). */
ZBUF__HIDDEN void zbuf__pool_put(struct zbuf_buf *b);
/* Allocate a HEAP buffer of `size` bytes with refs == 1. */
ZBUF__HIDDEN struct zbuf_buf *zbuf__buf_new_heap(size_t size);
/* Enrol caller memory as a USER buffer with refs == 1 (no argument checks). */
ZBUF__HIDDEN struct zbuf_buf *zbuf__buf_new_user(void *data, size_t size, zbuf_release_cb cb,
                                                 void *arg);
/* Copy `len` bytes from byte `in` of a segment of `b` (memory or file). */
ZBUF__HIDDEN int zbuf__buf_read(const struct zbuf_buf *b, size_t boff, void *dst, size_t len);

static inline void zbuf__buf_get(struct zbuf_buf *b)
{
    uint32_t r = atomic_load_explicit(&b->refs, memory_order_relaxed);
    ZBUF__ASSERT(r > 0);
    if (r == 1)
        atomic_store_explicit(&b->refs, 2, memory_order_relaxed);
    else
        atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
}

static inline void zbuf__buf_put(struct zbuf_buf *b)
{
    /* Sole owner: nobody else can race with us, skip the atomic RMW. */
    if (atomic_load_explicit(&b->refs, memory_order_acquire) == 1 ||
        atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1)
        zbuf__buf_release(b);
}

static inline bool zbuf__buf_is_private(const struct zbuf_buf *b)
{
    return (b->kind == ZBUF__BUF_HEAP || b->kind == ZBUF__BUF_POOL) &&
           atomic_load_explicit(&((struct zbuf_buf *)b)->refs, memory_order_acquire) == 1;
}

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
    _Atomic int64_t bufs;       /* buffers created - released */
    _Atomic int64_t pools;      /* pools created - freed */
};

/* Everything libzbuf keeps per thread. */
struct zbuf__tstate {
    struct zbuf_seg *segs;  /* descriptor cache, through ->next */
    struct zbuf *hdrs;      /* header cache, through ->head */
    unsigned gen;           /* allocator generation the caches belong to */
    bool cache_on;          /* caching allowed in this generation */
    bool registered;        /* counters registered, exit destructor armed */
    zbuf_allocator_t alloc; /* allocator the cached entries came from */
    unsigned je_tcache;     /* jemalloc explicit tcache id + 1; 0: none */
    bool je_tcache_failed;
    struct zbuf__counters ctr;
    struct zbuf__tstate *reg_next, *reg_prev; /* registry links (stats.c) */
};

extern __thread struct zbuf__tstate zbuf__ts __attribute__((tls_model("initial-exec")));
/* Bumped by zbuf_set_allocator() and the cache switch: caches of an older
 * generation are drained on their thread's next slow path. */
extern _Atomic unsigned zbuf__gen;

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

static inline void zbuf__seg_free(struct zbuf_seg *s)
{
    struct zbuf__tstate *t = &zbuf__ts;
    s->owner = NULL; /* a stale handle no longer matches any zbuf */
    if (ZBUF__LIKELY(t->cache_on && zbuf__cache_current(t) &&
                     ZBUF__LOAD(t->ctr.seg_cached) < ZBUF__CACHE_MAX)) {
        s->next = t->segs;
        t->segs = s;
        ZBUF__ADD(t->ctr.seg_cached, 1);
        return;
    }
    zbuf__seg_free_slow(s);
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
    if (ZBUF__LIKELY(t->cache_on && zbuf__cache_current(t) &&
                     ZBUF__LOAD(t->ctr.hdr_cached) < ZBUF__CACHE_MAX)) {
        z->head = (struct zbuf_seg *)t->hdrs;
        t->hdrs = z;
        ZBUF__ADD(t->ctr.hdr_cached, 1);
        return;
    }
    zbuf__hdr_free_slow(z);
}

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
