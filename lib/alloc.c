/* SPDX-License-Identifier: MIT */
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

__thread struct zbuf__tstate zbuf__ts __attribute__((tls_model("initial-exec")));
_Atomic unsigned zbuf__gen = 1;

/* Short name inside this file. */
#define ts zbuf__ts

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

/* ------------------------------------------------------ per-thread state */

static pthread_key_t ts_key;
static pthread_once_t ts_key_once = PTHREAD_ONCE_INIT;

/* Give every cached descriptor back to the allocator it came from. */
static void cache_drain(void)
{
    int64_t n = 0;
    while (ts.segs) {
        struct zbuf_seg *s = ts.segs;
        ts.segs = s->next;
        ts.alloc.free(ts.alloc.ctx, s, sizeof *s);
        n++;
    }
    ZBUF__ADD(ts.ctr.seg_del, n);
    ZBUF__ADD(ts.ctr.seg_cached, -n);
    n = 0;
    while (ts.hdrs) {
        struct zbuf *z = ts.hdrs;
        ts.hdrs = (struct zbuf *)z->head;
        ts.alloc.free(ts.alloc.ctx, z, sizeof *z);
        n++;
    }
    ZBUF__ADD(ts.ctr.hdr_del, n);
    ZBUF__ADD(ts.ctr.hdr_cached, -n);
    n = 0;
    while (ts.smalls) {
        void *p = ts.smalls;
        memcpy(&ts.smalls, p, sizeof ts.smalls);
        ts.alloc.free(ts.alloc.ctx, p, ZBUF__SMALL_BLOCK);
        n++;
    }
    ZBUF__ADD(ts.ctr.small_cached, -n);
}

static void ts_thread_exit(void *unused)
{
    (void)unused;
    cache_drain();
    je_thread_exit();
    ts.gen = 0; /* a later use on this thread starts over */
    ts.registered = false;
    zbuf__ts_unregister(&ts);
    zbuf__owner_detach(); /* buffers biased to this thread stay with its record */
}

static void ts_key_init(void)
{
    if (pthread_key_create(&ts_key, ts_thread_exit) != 0)
        abort(); /* out of thread keys at start-up: nothing sane to do */
}

void zbuf__ts_init(void)
{
    if (ts.registered)
        return;
    pthread_once(&ts_key_once, ts_key_init);
    ts.registered = true;
    zbuf__ts_register(&ts);
    pthread_setspecific(ts_key, &ts);
}

/* Bring the calling thread's caches to the current generation. */
static void cache_sync(void)
{
    zbuf__ts_init();
    unsigned gen = atomic_load_explicit(&zbuf__gen, memory_order_acquire);
    if (ts.gen == gen)
        return;
    cache_drain(); /* entries of an older allocator go back to it */
    ts.gen = gen;
    ts.alloc = g_alloc;
    ts.cache_max = atomic_load_explicit(&g_cache_on, memory_order_relaxed) ? ZBUF__CACHE_MAX : 0;
}

struct zbuf_seg *zbuf__seg_alloc_slow(void)
{
    cache_sync();
    struct zbuf_seg *s = ts.segs;
    if (s != NULL) {
        ts.segs = s->next;
        ZBUF__ADD(ts.ctr.seg_cached, -1);
        return s;
    }
    if ((s = zbuf__alloc(sizeof *s)) != NULL)
        ZBUF__ADD(ts.ctr.seg_new, 1);
    return s;
}

void zbuf__seg_free_slow(struct zbuf_seg *s)
{
    cache_sync();
    if (ZBUF__LOAD(ts.ctr.seg_cached) < ts.cache_max) {
        s->next = ts.segs;
        ts.segs = s;
        ZBUF__ADD(ts.ctr.seg_cached, 1);
        return;
    }
    zbuf__free(s, sizeof *s);
    ZBUF__ADD(ts.ctr.seg_del, 1);
}

struct zbuf *zbuf__hdr_alloc_slow(void)
{
    cache_sync();
    struct zbuf *z = ts.hdrs;
    if (z != NULL) {
        ts.hdrs = (struct zbuf *)z->head;
        ZBUF__ADD(ts.ctr.hdr_cached, -1);
        return z;
    }
    if ((z = zbuf__alloc(sizeof *z)) != NULL)
        ZBUF__ADD(ts.ctr.hdr_new, 1);
    return z;
}

void zbuf__hdr_free_slow(struct zbuf *z)
{
    cache_sync();
    if (ZBUF__LOAD(ts.ctr.hdr_cached) < ts.cache_max) {
        z->head = (struct zbuf_seg *)ts.hdrs;
        ts.hdrs = z;
        ZBUF__ADD(ts.ctr.hdr_cached, 1);
        return;
    }
    zbuf__free(z, sizeof *z);
    ZBUF__ADD(ts.ctr.hdr_del, 1);
}

void *zbuf__small_alloc(void)
{
    void *p = ts.smalls;
    if (p == NULL || !zbuf__cache_current(&ts)) {
        cache_sync();
        if ((p = ts.smalls) == NULL)
            return zbuf__alloc(ZBUF__SMALL_BLOCK);
    }
    memcpy(&ts.smalls, p, sizeof ts.smalls);
    ZBUF__ADD(ts.ctr.small_cached, -1);
    return p;
}

void zbuf__small_free(void *p)
{
    int64_t c = ZBUF__LOAD(ts.ctr.small_cached);
    if (!zbuf__cache_current(&ts)) {
        cache_sync();
        c = ZBUF__LOAD(ts.ctr.small_cached);
    }
    if (c >= ZBUF__SMALL_CACHE_MAX || ts.cache_max == 0) {
        zbuf__free(p, ZBUF__SMALL_BLOCK);
        return;
    }
    memcpy(p, &ts.smalls, sizeof ts.smalls);
    ts.smalls = p;
    atomic_store_explicit(&ts.ctr.small_cached, c + 1, memory_order_relaxed);
}

void zbuf_thread_cache_flush(void)
{
    cache_drain();
}

void zbuf__cache_set_enabled(bool on)
{
    cache_drain();
    atomic_store_explicit(&g_cache_on, on, memory_order_relaxed);
    atomic_fetch_add_explicit(&zbuf__gen, 1, memory_order_release);
}

int zbuf_set_allocator(const zbuf_allocator_t *a)
{
    if (a != NULL && (a->alloc == NULL || a->free == NULL))
        return -EINVAL;
    if (zbuf__anything_live())
        return -EBUSY;
    cache_drain();
    g_alloc = a ? *a : default_allocator;
    atomic_fetch_add_explicit(&zbuf__gen, 1, memory_order_release);
    return 0;
}
