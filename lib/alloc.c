/*
 * Memory: the process-wide allocator and the per-thread descriptor caches.
 *
 * The default allocator is jemalloc through its own API: a dedicated arena
 * (so libzbuf's memory does not fragment the application's) and one explicit
 * thread cache per thread (so the arena lock is not taken on every call).
 * Without jemalloc it is malloc/free.
 *
 * Segment and zbuf descriptors are recycled through a bounded free list per
 * thread.  The hot operations (dup, split, cut, delete) then never reach the
 * allocator.  Each cache remembers the allocator its entries came from and a
 * generation number, so that zbuf_set_allocator() can retire caches of other
 * threads lazily and correctly.
 */
#include <pthread.h>

#include "internal.h"

#ifdef ZBUF_HAVE_JEMALLOC
#include <jemalloc/jemalloc.h>
#endif

/* ------------------------------------------------------------ allocators */

#ifdef ZBUF_HAVE_JEMALLOC
static unsigned je_arena;
static bool je_arena_ok;
static pthread_once_t je_once = PTHREAD_ONCE_INIT;

static void je_init(void)
{
    size_t sz = sizeof je_arena;
    je_arena_ok = mallctl("arenas.create", &je_arena, &sz, NULL, 0) == 0;
}
#endif

/* Per-thread state: descriptor caches and (with jemalloc) the tcache id. */
struct tstate {
    struct zbuf_seg *segs;  /* free list through ->next */
    struct zbuf *hdrs;      /* free list through ->head */
    unsigned nsegs;
    unsigned nhdrs;
    unsigned gen;           /* allocator generation the entries belong to */
    bool registered;        /* thread-exit destructor armed */
    zbuf_allocator_t alloc; /* allocator the cached entries came from */
#ifdef ZBUF_HAVE_JEMALLOC
    unsigned je_tcache;     /* explicit tcache id + 1; 0: none yet */
    bool je_tcache_failed;
#endif
};

static __thread struct tstate ts __attribute__((tls_model("initial-exec")));

#ifdef ZBUF_HAVE_JEMALLOC
static int je_tcache_flags(void)
{
    if (ZBUF__UNLIKELY(ts.je_tcache == 0) && !ts.je_tcache_failed) {
        unsigned tc;
        size_t sz = sizeof tc;
        if (mallctl("tcache.create", &tc, &sz, NULL, 0) == 0)
            ts.je_tcache = tc + 1;
        else
            ts.je_tcache_failed = true;
    }
    return ts.je_tcache ? MALLOCX_TCACHE(ts.je_tcache - 1) : MALLOCX_TCACHE_NONE;
}

static void *default_alloc(void *ctx, size_t size)
{
    (void)ctx;
    pthread_once(&je_once, je_init);
    return mallocx(size, je_tcache_flags() | (je_arena_ok ? MALLOCX_ARENA(je_arena) : 0));
}

static void default_free(void *ctx, void *p, size_t size)
{
    (void)ctx;
    sdallocx(p, size, je_tcache_flags());
}

static void je_thread_exit(void)
{
    if (ts.je_tcache) {
        unsigned tc = ts.je_tcache - 1;
        ts.je_tcache = 0;
        mallctl("tcache.destroy", NULL, NULL, &tc, sizeof tc);
    }
    ts.je_tcache_failed = true; /* no new tcache during teardown */
}

const char *zbuf_default_allocator_name(void)
{
    return "jemalloc";
}
#else
static void *default_alloc(void *ctx, size_t size)
{
    (void)ctx;
    return malloc(size);
}

static void default_free(void *ctx, void *p, size_t size)
{
    (void)ctx;
    (void)size;
    free(p);
}

static void je_thread_exit(void)
{
}

const char *zbuf_default_allocator_name(void)
{
    return "malloc";
}
#endif

static const zbuf_allocator_t default_allocator = {default_alloc, default_free, NULL};
static zbuf_allocator_t g_alloc = {default_alloc, default_free, NULL};
static _Atomic unsigned g_gen = 1;
static _Atomic bool g_cache_on = true;

void *zbuf__alloc(size_t size)
{
    ZBUF__COUNT(allocs, 1);
    return g_alloc.alloc(g_alloc.ctx, size);
}

void zbuf__free(void *p, size_t size)
{
    g_alloc.free(g_alloc.ctx, p, size);
}

/* ---------------------------------------------------------------- caches */

/* Bound per thread: enough for bursts of dup/split, small enough not to hoard. */
#define CACHE_MAX 256

static pthread_key_t cache_key;
static pthread_once_t cache_key_once = PTHREAD_ONCE_INIT;

static void cache_drain(void)
{
    while (ts.segs) {
        struct zbuf_seg *s = ts.segs;
        ts.segs = s->next;
        ts.alloc.free(ts.alloc.ctx, s, sizeof *s);
    }
    while (ts.hdrs) {
        struct zbuf *z = ts.hdrs;
        ts.hdrs = (struct zbuf *)z->head;
        ts.alloc.free(ts.alloc.ctx, z, sizeof *z);
    }
    ts.nsegs = ts.nhdrs = 0;
}

static void cache_thread_exit(void *unused)
{
    (void)unused;
    cache_drain();
    je_thread_exit();
}

static void cache_key_init(void)
{
    if (pthread_key_create(&cache_key, cache_thread_exit) != 0)
        abort(); /* out of thread keys at start-up: nothing sane to do */
}

/* Ready the calling thread's cache for the current allocator.  Returns
 * false when caching is off (the caller then uses the allocator directly). */
static bool cache_ready(void)
{
    unsigned gen = atomic_load_explicit(&g_gen, memory_order_acquire);
    if (ZBUF__LIKELY(ts.gen == gen))
        return atomic_load_explicit(&g_cache_on, memory_order_relaxed);
    cache_drain(); /* entries of an older allocator go back to it */
    ts.gen = gen;
    ts.alloc = g_alloc;
    if (!ts.registered) {
        pthread_once(&cache_key_once, cache_key_init);
        pthread_setspecific(cache_key, &ts);
        ts.registered = true;
    }
    return atomic_load_explicit(&g_cache_on, memory_order_relaxed);
}

struct zbuf_seg *zbuf__seg_alloc(void)
{
    struct zbuf_seg *s;
    if (cache_ready() && (s = ts.segs) != NULL) {
        ts.segs = s->next;
        ts.nsegs--;
    } else if ((s = zbuf__alloc(sizeof *s)) == NULL) {
        return NULL;
    }
    ZBUF__COUNT(segs, 1);
    return s;
}

void zbuf__seg_free(struct zbuf_seg *s)
{
    ZBUF__COUNT(segs, -1);
    s->owner = NULL; /* a stale handle no longer matches any zbuf */
    if (cache_ready() && ts.nsegs < CACHE_MAX) {
        s->next = ts.segs;
        ts.segs = s;
        ts.nsegs++;
    } else {
        zbuf__free(s, sizeof *s);
    }
}

struct zbuf *zbuf__hdr_alloc(void)
{
    struct zbuf *z;
    if (cache_ready() && (z = ts.hdrs) != NULL) {
        ts.hdrs = (struct zbuf *)z->head;
        ts.nhdrs--;
    } else if ((z = zbuf__alloc(sizeof *z)) == NULL) {
        return NULL;
    }
    ZBUF__COUNT(zbufs, 1);
    return z;
}

void zbuf__hdr_free(struct zbuf *z)
{
    ZBUF__COUNT(zbufs, -1);
    z->magic = 0;
    if (cache_ready() && ts.nhdrs < CACHE_MAX) {
        z->head = (struct zbuf_seg *)ts.hdrs;
        ts.hdrs = z;
        ts.nhdrs++;
    } else {
        zbuf__free(z, sizeof *z);
    }
}

void zbuf_thread_cache_flush(void)
{
    cache_drain();
}

void zbuf__cache_set_enabled(bool on)
{
    cache_drain();
    atomic_store_explicit(&g_cache_on, on, memory_order_relaxed);
}

int zbuf_set_allocator(const zbuf_allocator_t *a)
{
    if (a != NULL && (a->alloc == NULL || a->free == NULL))
        return -EINVAL;
    if (zbuf__anything_live())
        return -EBUSY;
    cache_drain();
    g_alloc = a ? *a : default_allocator;
    atomic_fetch_add_explicit(&g_gen, 1, memory_order_release);
    return 0;
}
