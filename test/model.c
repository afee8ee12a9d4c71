/* SPDX-License-Identifier: MIT */
/*
 * The differential model of libzbuf: see model.h for what it checks.
 *
 * How the model knows where a byte must live
 * ------------------------------------------
 * Every model byte carries a tag: a source id and an offset into that
 * source, or ZM_ANON.  Sources are the buffers the test made and knows the
 * address of: caller memory enrolled with zbuf_insert_buf()/zbuf_buf_wrap()
 * (USER), zbuf_buf_alloc() buffers (HEAP) and pool buffers (POOL).  Bytes the
 * library made itself (insert_copy, prepend/append space, commit, pullup and
 * unshare copies) are ANON.
 *
 * Verification walks the segments: a tagged byte must sit at exactly
 * source.data + offset, which proves that dup, split, cut, insert and the
 * other non-copying calls did not copy it.  An ANON byte found inside a
 * HEAP or POOL source (the library grew a private buffer in place) is
 * re-tagged to it; one found inside a USER source, or inside a buffer the
 * test still holds a handle to, is an error (the library wrote into memory it
 * does not own alone).  After pullup and unshare, which may copy the whole
 * segments they touch, the bytes of those segments are checked leniently:
 * a tagged byte that moved becomes ANON.
 *
 * Per source the model counts the bytes tagged with it over every zbuf.  A
 * USER source with no bytes and no handle must have had its release
 * callback run exactly once; with bytes or a handle, not at all.  The
 * callback poisons and frees the memory, so a zbuf that still pointed at it
 * would show wrong bytes (or an AddressSanitizer report).
 *
 * With options.fault_one_in, allocations fail at random during each
 * operation's main call (between arm() and failed_cleanly()); a call that
 * fails must return -ENOMEM and leave every zbuf's segments, the live
 * counters, the pool and the release callbacks exactly as they were, and the
 * model then skips the operation.
 */
#include "model.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define ZM_SLOTS 6
#define ZM_MAX_LEN 1024
#define ZM_ANON (-1)
#define ZM_POOL_BUFS 6
#define ZM_POOL_BUF_SIZE 96

enum zm_kind { ZM_USER, ZM_HEAP, ZM_POOL };
static const char *const zm_kind_name[] = {"caller", "heap", "pool"};

/* State of a zbuf's zbuf_reserve() as far as the model can tell. */
enum zm_rsv {
    RSV_NONE,    /* none, or certainly dropped: zbuf_commit() must fail with -EINVAL */
    RSV_ACTIVE,  /* made and not disturbed: zbuf_commit() must work */
    RSV_UNKNOWN, /* disturbed by a call whose effect on it is not documented */
};

struct zm_src {
    uint8_t kind;  /* enum zm_kind */
    bool has_cb;   /* USER: enrolled with a release callback */
    uint8_t *data; /* first byte (USER: freed by the callback) */
    size_t size;
    zbuf_buf_t *handle; /* the test's own reference, or NULL */
    size_t bytes;       /* model bytes tagged with this source, over all zbufs */
    unsigned released;  /* USER with callback: how many times it ran */
};

struct zm_zbuf {
    zbuf_t *z; /* NULL: the slot is empty */
    size_t len, cap;
    uint8_t *data;  /* expected content */
    int32_t *src;   /* per byte: source id or ZM_ANON */
    uint32_t *soff; /* per byte: offset in the source */
    int rsv;        /* enum zm_rsv */
    size_t rsv_size;
    uint8_t *rsv_data; /* what the test wrote into the reserved space */
    struct iovec rsv_iov[2];
    int rsv_cnt;
};

/* A picture of a zbuf's segments, to prove that a call changed nothing. */
struct zm_snap {
    size_t n, cap, len;
    zbuf_seg_t **seg;
    size_t *slen;
    void **sdata;
};

struct zm {
    struct zm_options o;
    uint64_t rng;  /* choices, random mode */
    uint64_t crng; /* content bytes, both modes */
    const uint8_t *in;
    size_t in_left;
    uint64_t step, invalid, releases;
    char what[200]; /* the operation being run, for messages */
    int slot;
    struct zm_zbuf zb[ZM_SLOTS];
    bool touched[ZM_SLOTS];
    int lenient_slot; /* verification of this slot tolerates moved bytes in */
    size_t lenient_lo, lenient_hi;
    struct zm_src *src;
    size_t nsrc, src_cap;
    uint32_t *live; /* ids of sources still to be watched */
    size_t nlive, live_cap;
    zbuf_pool_t *pool;
    struct iovec *iov, *iov2;
    size_t iov_cap;
    size_t *starts;
    zbuf_seg_t **segs;
    uint8_t *tmp;
    size_t tmp_cap;
    struct zm_snap snap[2];
    /* Fault injection (options.fault_one_in). */
    uint64_t frng;
    bool armed;
    unsigned injected;
    uint64_t enomem;
    struct zm_snap fsnap[ZM_SLOTS];
    zbuf_stats_t fst;
    uint64_t frel;
    size_t fpool;
};

/* The model whose release callbacks are running (one at a time). */
static zm_t *zm_cur;

/* ------------------------------------------------------------ reporting */

static void zm_fail(const zm_t *m, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));

static void zm_fail(const zm_t *m, int line, const char *fmt, ...)
{
    char msg[1536], detail[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    if (m->o.input)
        snprintf(msg, sizeof msg, "model.c:%d: fuzz input, step %" PRIu64 " [%s]: %s", line,
                 m->step, m->what, detail);
    else
        snprintf(msg, sizeof msg,
                 "model.c:%d: seed %" PRIu64 ", step %" PRIu64 " [%s]: %s\n"
                 "  replay: ZBUF_SEED=%" PRIu64 " ZBUF_STEPS=%" PRIu64
                 " (ZBUF_TRACE=1 prints each step)",
                 line, m->o.seed, m->step, m->what, detail, m->o.seed, m->step);
    if (m->o.fail)
        m->o.fail(msg);
    fprintf(stderr, "%s\n", msg);
    abort();
}

#define ZM_CHECK(m, cond, ...)                                                                     \
    do {                                                                                           \
        if (!(cond))                                                                               \
            zm_fail((m), __LINE__, __VA_ARGS__);                                                   \
    } while (0)

/* A call that must succeed. */
#define ZM_OK(m, rc)                                                                               \
    do {                                                                                           \
        long long rc_ = (long long)(rc);                                                           \
        if (rc_ < 0)                                                                               \
            zm_fail((m), __LINE__, "unexpected error %lld (%s)", rc_, zbuf_strerror((int)rc_));    \
    } while (0)

/* A call that must fail with exactly `want`. */
#define ZM_ERR(m, rc, want)                                                                        \
    do {                                                                                           \
        long long rc_ = (long long)(rc);                                                           \
        if (rc_ != (want))                                                                         \
            zm_fail((m), __LINE__, "returned %lld (%s), documented error is %d (%s)", rc_,         \
                    rc_ < 0 ? zbuf_strerror((int)rc_) : "success", (want), zbuf_strerror(want));   \
    } while (0)

static void note(zm_t *m, int slot, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void note(zm_t *m, int slot, const char *fmt, ...)
{
    va_list ap;
    int n = snprintf(m->what, sizeof m->what, "slot %d: ", slot);
    va_start(ap, fmt);
    vsnprintf(m->what + n, sizeof m->what - (size_t)n, fmt, ap);
    va_end(ap);
    m->slot = slot;
    if (m->o.trace)
        fprintf(m->o.trace, "%" PRIu64 " %s\n", m->step, m->what);
}

/* ------------------------------------------------------------ choices */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A choice in [0, n). */
static size_t pick(zm_t *m, size_t n)
{
    uint64_t v = 0;
    if (n <= 1)
        return 0;
    if (m->o.input) {
        int k = n <= 256 ? 1 : n <= 65536 ? 2 : 4;
        for (int i = 0; i < k; i++) {
            v <<= 8;
            if (m->in_left) {
                v |= *m->in++;
                m->in_left--;
            }
        }
    } else {
        v = splitmix(&m->rng);
    }
    return (size_t)(v % n);
}

static bool chance(zm_t *m, size_t one_in)
{
    return pick(m, one_in) == 0;
}

static void fill(zm_t *m, void *p, size_t n)
{
    uint8_t *d = p;
    while (n) {
        uint64_t v = splitmix(&m->crng);
        for (int i = 0; i < 8 && n; i++, n--) {
            *d++ = (uint8_t)v;
            v >>= 8;
        }
    }
}

/* Mostly short, sometimes longer than a typical header or the headroom. */
static size_t pick_len(zm_t *m)
{
    switch (pick(m, 8)) {
    case 0:
        return 1 + pick(m, 256);
    case 1:
    case 2:
        return 1 + pick(m, 64);
    default:
        return 1 + pick(m, 16);
    }
}

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        fprintf(stderr, "model: out of memory\n");
        abort();
    }
    return q;
}

static uint8_t *scratch(zm_t *m, size_t n)
{
    if (n > m->tmp_cap) {
        m->tmp_cap = n + 1024;
        m->tmp = xrealloc(m->tmp, m->tmp_cap);
    }
    return m->tmp;
}

static void seg_room(zm_t *m, size_t n)
{
    if (n + 2 > m->iov_cap) {
        m->iov_cap = n + 64;
        m->iov = xrealloc(m->iov, m->iov_cap * sizeof *m->iov);
        m->iov2 = xrealloc(m->iov2, m->iov_cap * sizeof *m->iov2);
        m->starts = xrealloc(m->starts, m->iov_cap * sizeof *m->starts);
        m->segs = xrealloc(m->segs, m->iov_cap * sizeof *m->segs);
    }
}

static uint64_t copied_now(void)
{
    zbuf_stats_t st;
    zbuf_stats_get(&st);
    return st.bytes_copied;
}

/* ------------------------------------------------------- fault injection */

/* Internal test hook of the library (lib/internal.h): with false, zbuf and
 * segment descriptors bypass the per-thread caches, so every one of them
 * reaches the allocator and can be made to fail. */
void zbuf__cache_set_enabled(bool on);

static void *zm_fault_alloc(void *ctx, size_t size)
{
    zm_t *m = ctx;
    if (m->armed && splitmix(&m->frng) % m->o.fault_one_in == 0) {
        m->injected++;
        return NULL;
    }
    return malloc(size);
}

static void zm_fault_free(void *ctx, void *p, size_t size)
{
    (void)ctx;
    (void)size;
    free(p);
}

static void snap_take(zm_t *m, struct zm_snap *s, int k);
static void snap_same(zm_t *m, const struct zm_snap *s, int k);

/* Right before an operation's main call: with faults on, remember what the
 * call could change and let allocations fail. */
static void arm(zm_t *m)
{
    if (!m->o.fault_one_in)
        return;
    for (int k = 0; k < ZM_SLOTS; k++)
        if (m->zb[k].z)
            snap_take(m, &m->fsnap[k], k);
    zbuf_stats_get(&m->fst);
    m->frel = m->releases;
    m->fpool = m->pool ? zbuf_pool_available(m->pool) : 0;
    m->injected = 0;
    m->armed = true;
}

/* Right after it: true when it failed because of an injected allocation
 * failure, after checking that it returned -ENOMEM and changed nothing; the
 * operation then stops without touching the model. */
static bool failed_cleanly(zm_t *m, long long rc)
{
    if (!m->armed)
        return false;
    m->armed = false;
    if (!m->injected || rc >= 0)
        return false;
    ZM_CHECK(m, rc == -ENOMEM, "an allocation failed and the call returned %lld (%s), not -ENOMEM",
             rc, zbuf_strerror((int)rc));
    zbuf_stats_t st;
    zbuf_stats_get(&st);
    ZM_CHECK(m,
             st.live_zbufs == m->fst.live_zbufs && st.live_segs == m->fst.live_segs &&
                 st.live_bufs == m->fst.live_bufs && st.bytes_copied == m->fst.bytes_copied,
             "a call that failed with -ENOMEM changed the counters (zbufs %+lld, segments "
             "%+lld, buffers %+lld, copied %+lld)",
             (long long)(st.live_zbufs - m->fst.live_zbufs),
             (long long)(st.live_segs - m->fst.live_segs),
             (long long)(st.live_bufs - m->fst.live_bufs),
             (long long)(st.bytes_copied - m->fst.bytes_copied));
    ZM_CHECK(m, m->releases == m->frel, "a call that failed with -ENOMEM ran a release callback");
    ZM_CHECK(m, !m->pool || zbuf_pool_available(m->pool) == m->fpool,
             "a call that failed with -ENOMEM changed the pool");
    for (int k = 0; k < ZM_SLOTS; k++)
        if (m->zb[k].z) {
            snap_same(m, &m->fsnap[k], k);
            m->touched[k] = true;
        }
    m->enomem++;
    if (m->o.trace)
        fprintf(m->o.trace, "%" PRIu64 "   -> -ENOMEM, nothing changed\n", m->step);
    return true;
}

/* ------------------------------------------------------------ sources */

static uint32_t src_new(zm_t *m, int kind, uint8_t *data, size_t size, bool has_cb)
{
    if (m->nsrc == m->src_cap) {
        m->src_cap = m->src_cap ? 2 * m->src_cap : 64;
        m->src = xrealloc(m->src, m->src_cap * sizeof *m->src);
    }
    if (m->nlive == m->live_cap) {
        m->live_cap = m->live_cap ? 2 * m->live_cap : 64;
        m->live = xrealloc(m->live, m->live_cap * sizeof *m->live);
    }
    uint32_t id = (uint32_t)m->nsrc++;
    m->src[id] =
        (struct zm_src){.kind = (uint8_t)kind, .has_cb = has_cb, .data = data, .size = size};
    m->live[m->nlive++] = id;
    return id;
}

static bool src_held(const struct zm_src *s)
{
    return s->bytes > 0 || s->handle != NULL;
}

/* Whether the source's memory is still the library's or ours to look at. */
static bool src_alive(const struct zm_src *s)
{
    if (s->kind == ZM_USER && s->has_cb && s->released)
        return false;
    return src_held(s);
}

/* For calls that must fail: counts in the int at arg, and must never run. */
static void zm_count_cb(void *data, size_t size, void *arg)
{
    (void)data;
    (void)size;
    ++*(int *)arg;
}

static void zm_release(void *data, size_t size, void *arg)
{
    zm_t *m = zm_cur;
    uintptr_t id = (uintptr_t)arg;
    if (!m) {
        fprintf(stderr, "model: release callback outside a model run\n");
        abort();
    }
    ZM_CHECK(m, id < m->nsrc && m->src[id].kind == ZM_USER && m->src[id].has_cb,
             "release callback with argument %" PRIuPTR ", which names no enrolled buffer", id);
    struct zm_src *s = &m->src[id];
    ZM_CHECK(m, data == s->data && size == s->size,
             "release callback of buffer %" PRIuPTR " got (%p, %zu); it was enrolled as (%p, %zu)",
             id, data, size, (void *)s->data, s->size);
    ZM_CHECK(m, s->released == 0, "release callback of buffer %" PRIuPTR " ran a second time", id);
    s->released = 1;
    m->releases++;
    /* Poison, then free: a zbuf still pointing here shows wrong bytes. */
    memset(data, 0xEE, size);
    free(data);
}

/* The source whose memory holds [p, p+n), or -1. */
static int32_t src_at(zm_t *m, const uint8_t *p, size_t n)
{
    uintptr_t a = (uintptr_t)p;
    for (size_t i = 0; i < m->nlive; i++) {
        const struct zm_src *s = &m->src[m->live[i]];
        uintptr_t lo = (uintptr_t)s->data, hi = lo + s->size;
        if (!src_alive(s) || a < lo || a >= hi)
            continue;
        ZM_CHECK(m, a + n <= hi,
                 "a segment of %zu bytes at %p runs past the end of %s buffer %u (%zu bytes at %p)",
                 n, (const void *)p, zm_kind_name[s->kind], m->live[i], s->size, (void *)s->data);
        return (int32_t)m->live[i];
    }
    return -1;
}

/* After every step: release callbacks and pool buffers match the model. */
static void check_sources(zm_t *m)
{
    size_t pool_out = 0;
    for (size_t i = 0; i < m->nlive;) {
        uint32_t id = m->live[i];
        struct zm_src *s = &m->src[id];
        bool held = src_held(s), done = false;
        if (s->handle) {
            unsigned r = zbuf_buf_refs(s->handle);
            ZM_CHECK(m, r >= 1u + (s->bytes > 0) && r <= 1u + s->bytes,
                     "%s buffer %u has %u references, but the test holds one and zbufs hold "
                     "%zu of its bytes",
                     zm_kind_name[s->kind], id, r, s->bytes);
        }
        switch (s->kind) {
        case ZM_USER:
            if (!s->has_cb) {
                done = !held; /* its memory is freed by zm_finish() */
            } else if (held) {
                ZM_CHECK(m, s->released == 0,
                         "release callback of buffer %u ran while zbufs still hold %zu of its "
                         "bytes%s",
                         id, s->bytes, s->handle ? " and the test holds a reference" : "");
            } else {
                ZM_CHECK(m, s->released == 1,
                         "no zbuf and no handle references buffer %u any more, but its release "
                         "callback has not run",
                         id);
                done = true;
            }
            break;
        case ZM_POOL:
            pool_out += held;
            done = !held;
            break;
        default:
            done = !held;
            break;
        }
        if (done)
            m->live[i] = m->live[--m->nlive];
        else
            i++;
    }
    if (m->pool) {
        size_t avail = zbuf_pool_available(m->pool);
        ZM_CHECK(m, avail == ZM_POOL_BUFS - pool_out,
                 "pool has %zu buffers available; %zu of %d are still referenced", avail, pool_out,
                 ZM_POOL_BUFS);
    }
}

/* ------------------------------------------------------ model byte arrays */

static void mz_open(struct zm_zbuf *b, size_t off, size_t n)
{
    if (n == 0)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap * 2 > b->len + n ? b->cap * 2 : b->len + n + 64;
        b->data = xrealloc(b->data, cap);
        b->src = xrealloc(b->src, cap * sizeof *b->src);
        b->soff = xrealloc(b->soff, cap * sizeof *b->soff);
        b->cap = cap;
    }
    size_t tail = b->len - off;
    memmove(b->data + off + n, b->data + off, tail);
    memmove(b->src + off + n, b->src + off, tail * sizeof *b->src);
    memmove(b->soff + off + n, b->soff + off, tail * sizeof *b->soff);
    b->len += n;
}

static void mz_count(zm_t *m, const struct zm_zbuf *b, size_t off, size_t n, bool add)
{
    for (size_t i = off; i < off + n; i++) {
        if (b->src[i] < 0)
            continue;
        if (add)
            m->src[b->src[i]].bytes++;
        else
            m->src[b->src[i]].bytes--;
    }
}

/* Insert n bytes at off, all from source sid starting at so (or ANON). */
static void mz_put(zm_t *m, struct zm_zbuf *b, size_t off, const void *d, int32_t sid, size_t so,
                   size_t n)
{
    if (n == 0)
        return;
    mz_open(b, off, n);
    memcpy(b->data + off, d, n);
    for (size_t i = 0; i < n; i++) {
        b->src[off + i] = sid;
        b->soff[off + i] = sid >= 0 ? (uint32_t)(so + i) : 0;
    }
    mz_count(m, b, off, n, true);
}

/* Insert a copy of from[foff, foff+n) at off (from != b). */
static void mz_put_from(zm_t *m, struct zm_zbuf *b, size_t off, const struct zm_zbuf *from,
                        size_t foff, size_t n)
{
    if (n == 0)
        return;
    mz_open(b, off, n);
    memcpy(b->data + off, from->data + foff, n);
    memcpy(b->src + off, from->src + foff, n * sizeof *b->src);
    memcpy(b->soff + off, from->soff + foff, n * sizeof *b->soff);
    mz_count(m, b, off, n, true);
}

static void mz_remove(zm_t *m, struct zm_zbuf *b, size_t off, size_t n)
{
    if (n == 0)
        return;
    mz_count(m, b, off, n, false);
    size_t tail = b->len - off - n;
    memmove(b->data + off, b->data + off + n, tail);
    memmove(b->src + off, b->src + off + n, tail * sizeof *b->src);
    memmove(b->soff + off, b->soff + off + n, tail * sizeof *b->soff);
    b->len -= n;
}

/* The source of byte i, if it is one the library must not write into. */
static int32_t foreign_src(const zm_t *m, const struct zm_zbuf *b, size_t i)
{
    int32_t sid = b->src[i];
    if (sid >= 0 && (m->src[sid].kind == ZM_USER || m->src[sid].handle))
        return sid;
    return -1;
}

/* ------------------------------------------------------------ slots */

static void slot_modified(zm_t *m, int k)
{
    m->touched[k] = true;
    m->zb[k].rsv = RSV_NONE; /* any modifying call drops a reservation */
}

/* A modifying call failed: it should have changed nothing, but whether that
 * includes the reservation is not documented. */
static void slot_failed(zm_t *m, int k)
{
    m->touched[k] = true;
    if (m->zb[k].rsv == RSV_ACTIVE)
        m->zb[k].rsv = RSV_UNKNOWN;
}

static void slot_create(zm_t *m, int k)
{
    struct zm_zbuf *b = &m->zb[k];
    zbuf_t *z = NULL;
    note(m, k, "create");
    ZM_OK(m, zbuf_create(&z));
    ZM_CHECK(m, z != NULL, "zbuf_create succeeded without a zbuf");
    ZM_CHECK(m,
             zbuf_length(z) == 0 && zbuf_seg_count(z) == 0 && zbuf_seg_first(z) == NULL &&
                 zbuf_seg_last(z) == NULL,
             "a new zbuf is not empty");
    b->z = z;
    b->len = 0;
    b->rsv = RSV_NONE;
    m->touched[k] = true;
}

static void slot_delete(zm_t *m, int k)
{
    struct zm_zbuf *b = &m->zb[k];
    note(m, k, "delete (%zu bytes, %zu segments)", b->len, zbuf_seg_count(b->z));
    uint64_t c0 = copied_now();
    ZM_OK(m, zbuf_delete(b->z));
    ZM_CHECK(m, copied_now() == c0, "zbuf_delete copied bytes");
    mz_remove(m, b, 0, b->len);
    b->z = NULL;
    b->rsv = RSV_NONE;
    m->touched[k] = true;
}

/* A slot holding a zbuf (created if the chosen slot is empty). */
static int live_slot(zm_t *m)
{
    int k = (int)pick(m, ZM_SLOTS);
    if (!m->zb[k].z)
        slot_create(m, k);
    return k;
}

/* A live slot other than k. */
static int other_live_slot(zm_t *m, int k)
{
    int j = (k + 1 + (int)pick(m, ZM_SLOTS - 1)) % ZM_SLOTS;
    if (!m->zb[j].z)
        slot_create(m, j);
    return j;
}

/* An empty slot other than k, to receive a new zbuf (one is emptied if
 * none is free). */
static int target_slot(zm_t *m, int k)
{
    int j = (k + 1 + (int)pick(m, ZM_SLOTS - 1)) % ZM_SLOTS;
    for (int i = 0; i < ZM_SLOTS; i++) {
        int c = (j + i) % ZM_SLOTS;
        if (c != k && !m->zb[c].z)
            return c;
    }
    slot_delete(m, j);
    return j;
}

/* Walk the segments of slot k into m->segs / m->starts / m->iov; returns
 * their count. */
static size_t seg_walk(zm_t *m, int k)
{
    zbuf_t *z = m->zb[k].z;
    size_t n = zbuf_seg_count(z), i = 0, pos = 0;
    seg_room(m, n);
    for (zbuf_seg_t *s = zbuf_seg_first(z); s; s = zbuf_seg_next(z, s)) {
        ZM_CHECK(m, i < n, "more segments on the list than zbuf_seg_count() says (%zu)", n);
        m->segs[i] = s;
        m->starts[i] = pos;
        m->iov[i].iov_base = zbuf_seg_data(z, s);
        m->iov[i].iov_len = zbuf_seg_length(z, s);
        pos += m->iov[i].iov_len;
        i++;
    }
    ZM_CHECK(m, i == n, "zbuf_seg_count() says %zu segments, the list has %zu", n, i);
    m->starts[n] = pos;
    return n;
}

/* An offset in [0, len], often at an edge or a segment boundary. */
static size_t pick_off(zm_t *m, int k)
{
    size_t len = m->zb[k].len;
    switch (pick(m, 5)) {
    case 0:
        return chance(m, 2) ? 0 : len;
    case 1: {
        size_t n = seg_walk(m, k);
        size_t at = m->starts[pick(m, n + 1)];
        if (chance(m, 2) && at > 0)
            at--;
        else if (chance(m, 2) && at < len)
            at++;
        return at;
    }
    default:
        return pick(m, len + 1);
    }
}

/* A range [off, off+eff) of slot k; *n is what to pass (maybe ZBUF_TO_END).
 * With min1, the range holds at least one byte (false if impossible).  One
 * time in `whole` the range runs to the end. */
static bool pick_range_ex(zm_t *m, int k, bool to_end, bool min1, size_t whole, size_t *off,
                          size_t *n, size_t *eff)
{
    size_t len = m->zb[k].len;
    if (min1 && len == 0)
        return false;
    *off = pick_off(m, k);
    if (min1 && *off == len)
        *off = len - 1;
    size_t rem = len - *off;
    if (to_end && chance(m, whole + 2)) {
        *n = ZBUF_TO_END;
        *eff = rem;
        return true;
    }
    if (chance(m, whole))
        *eff = rem;
    else
        *eff = min1 ? 1 + pick(m, rem) : pick(m, rem + 1);
    *n = *eff;
    return true;
}

static bool pick_range(zm_t *m, int k, bool to_end, bool min1, size_t *off, size_t *n, size_t *eff)
{
    return pick_range_ex(m, k, to_end, min1, 3, off, n, eff);
}

/* ------------------------------------------------------------ snapshots */

static void snap_take(zm_t *m, struct zm_snap *s, int k)
{
    zbuf_t *z = m->zb[k].z;
    size_t n = zbuf_seg_count(z), i = 0;
    if (n > s->cap) {
        s->cap = n + 32;
        s->seg = xrealloc(s->seg, s->cap * sizeof *s->seg);
        s->slen = xrealloc(s->slen, s->cap * sizeof *s->slen);
        s->sdata = xrealloc(s->sdata, s->cap * sizeof *s->sdata);
    }
    s->n = n;
    s->len = zbuf_length(z);
    for (zbuf_seg_t *g = zbuf_seg_first(z); g && i < n; g = zbuf_seg_next(z, g), i++) {
        s->seg[i] = g;
        s->slen[i] = zbuf_seg_length(z, g);
        s->sdata[i] = zbuf_seg_data(z, g);
    }
}

static void snap_same(zm_t *m, const struct zm_snap *s, int k)
{
    zbuf_t *z = m->zb[k].z;
    size_t i = 0;
    ZM_CHECK(m, zbuf_length(z) == s->len && zbuf_seg_count(z) == s->n,
             "slot %d changed: %zu bytes in %zu segments, was %zu in %zu", k, zbuf_length(z),
             zbuf_seg_count(z), s->len, s->n);
    for (zbuf_seg_t *g = zbuf_seg_first(z); g; g = zbuf_seg_next(z, g), i++) {
        ZM_CHECK(m,
                 i < s->n && g == s->seg[i] && zbuf_seg_length(z, g) == s->slen[i] &&
                     zbuf_seg_data(z, g) == s->sdata[i],
                 "segment %zu of slot %d changed", i, k);
    }
}

/* --------------------------------------------------------- verification */

/* Check the tags of the n bytes of slot k at pos, which the zbuf holds at p. */
static void check_tags(zm_t *m, int k, size_t pos, const uint8_t *p, size_t n)
{
    struct zm_zbuf *b = &m->zb[k];
    bool lenient = m->lenient_slot == k;
    int32_t home = -2;
    for (size_t j = 0; j < n; j++) {
        size_t i = pos + j;
        int32_t sid = b->src[i];
        if (sid >= 0) {
            struct zm_src *s = &m->src[sid];
            if ((uintptr_t)(p + j) == (uintptr_t)(s->data + b->soff[i]))
                continue;
            ZM_CHECK(m, lenient && i >= m->lenient_lo && i < m->lenient_hi,
                     "byte %zu of slot %d should be byte %u of %s buffer %d at %p (never "
                     "copied), but the zbuf has it at %p",
                     i, k, b->soff[i], zm_kind_name[s->kind], sid, (void *)(s->data + b->soff[i]),
                     (const void *)(p + j));
            s->bytes--; /* pullup/unshare copied it */
            b->src[i] = ZM_ANON;
        }
        if (home == -2)
            home = src_at(m, p, n);
        if (home >= 0) {
            struct zm_src *s = &m->src[home];
            ZM_CHECK(m, s->kind != ZM_USER,
                     "byte %zu of slot %d was made by the library, but it lies inside caller "
                     "buffer %d, which the library must never write",
                     i, k, home);
            ZM_CHECK(m, s->handle == NULL,
                     "byte %zu of slot %d was made by the library inside %s buffer %d, which the "
                     "test still references (shared, not writable)",
                     i, k, zm_kind_name[s->kind], home);
            b->src[i] = home;
            b->soff[i] = (uint32_t)(p + j - s->data);
            s->bytes++;
        }
    }
}

/* Everything about one slot: invariants, segment list, content, tags. */
static void verify(zm_t *m, int k)
{
    struct zm_zbuf *b = &m->zb[k];
    zbuf_t *z = b->z;
    if (!z) {
        ZM_CHECK(m, b->len == 0, "model of deleted slot %d still has bytes", k);
        return;
    }
    int rc = zbuf_check(z);
    ZM_CHECK(m, rc == 0, "zbuf_check(slot %d) = %d (%s)", k, rc, zbuf_strerror(rc));
    ZM_CHECK(m, zbuf_length(z) == b->len, "slot %d holds %zu bytes, the model %zu", k,
             zbuf_length(z), b->len);
    size_t n = seg_walk(m, k);
    ZM_CHECK(m, n <= b->len && (n == 0) == (b->len == 0),
             "slot %d: %zu segments for %zu bytes (no segment may be empty)", k, n, b->len);
    ZM_CHECK(m, zbuf_seg_last(z) == (n ? m->segs[n - 1] : NULL), "zbuf_seg_last is not the last");
    for (size_t i = 0; i < n; i++) {
        zbuf_seg_t *s = m->segs[i];
        ZM_CHECK(m, m->iov[i].iov_len > 0 && m->iov[i].iov_base != NULL,
                 "segment %zu of slot %d is empty or has no memory", i, k);
        ZM_CHECK(m, zbuf_seg_prev(z, s) == (i ? m->segs[i - 1] : NULL),
                 "zbuf_seg_prev of segment %zu is wrong", i);
        zbuf_buf_t *bb = zbuf_seg_buf(z, s);
        ZM_CHECK(m, bb != NULL, "segment %zu has no buffer", i);
        size_t bo = zbuf_seg_buf_offset(z, s);
        ZM_CHECK(m,
                 bo + m->iov[i].iov_len <= zbuf_buf_size(bb) &&
                     (uint8_t *)zbuf_buf_data(bb) + bo == (uint8_t *)m->iov[i].iov_base,
                 "segment %zu lies outside its buffer or its data is not buffer + offset", i);
        ZM_CHECK(m, zbuf_buf_refs(bb) >= 1, "segment %zu's buffer has no reference", i);
    }
    ZM_CHECK(m, m->starts[n] == b->len, "segment lengths add up to %zu, length is %zu",
             m->starts[n], b->len);

    /* The same through zbuf_iovec(), and the content through it. */
    size_t bytes = 0;
    rc = zbuf_iovec(z, 0, ZBUF_TO_END, m->iov2, (int)n + 1, &bytes);
    ZM_CHECK(m, rc == (int)n && bytes == b->len,
             "zbuf_iovec(whole) gave %d entries for %zu bytes; expected %zu for %zu", rc, bytes, n,
             b->len);
    for (size_t i = 0; i < n; i++) {
        ZM_CHECK(
            m, m->iov2[i].iov_base == m->iov[i].iov_base && m->iov2[i].iov_len == m->iov[i].iov_len,
            "zbuf_iovec entry %zu differs from segment %zu", i, i);
        const uint8_t *p = m->iov[i].iov_base;
        size_t pos = m->starts[i], len = m->iov[i].iov_len;
        if (memcmp(p, b->data + pos, len) != 0) {
            size_t j = 0;
            while (p[j] == b->data[pos + j])
                j++;
            ZM_CHECK(m, false, "slot %d byte %zu is 0x%02x, the model says 0x%02x", k, pos + j,
                     p[j], b->data[pos + j]);
        }
        check_tags(m, k, pos, p, len);
    }

    /* And through zbuf_copyout(). */
    if (b->len) {
        uint8_t *t = scratch(m, b->len);
        ssize_t got = zbuf_copyout(z, 0, t, ZBUF_TO_END);
        ZM_CHECK(m, got == (ssize_t)b->len, "zbuf_copyout(whole) returned %zd for %zu bytes", got,
                 b->len);
        ZM_CHECK(m, memcmp(t, b->data, b->len) == 0, "zbuf_copyout content differs from model");
    }
}

/* ------------------------------------------------------------ operations */

static void check_new_seg(zm_t *m, int k, zbuf_seg_t *seg, size_t off, size_t n, const void *where,
                          bool exact)
{
    zbuf_t *z = m->zb[k].z;
    size_t so = 99;
    ZM_CHECK(m, seg != NULL, "no segment returned");
    ZM_CHECK(m, zbuf_seg_find(z, off, &so) == seg, "the returned segment does not hold byte %zu",
             off);
    if (exact)
        ZM_CHECK(m, so == 0 && zbuf_seg_length(z, seg) == n,
                 "the new segment should hold exactly the %zu new bytes (offset %zu, length %zu)",
                 n, so, zbuf_seg_length(z, seg));
    if (where)
        ZM_CHECK(m, (uint8_t *)zbuf_seg_data(z, seg) + so == where,
                 "the new bytes are not where they were given (copied?)");
}

/* Keep a zbuf short: cut a large range. */
static void trim(zm_t *m, int k)
{
    struct zm_zbuf *b = &m->zb[k];
    size_t off = pick(m, b->len / 2), n = b->len / 2;
    note(m, k, "trim: cut(%zu, %zu)", off, n);
    ZM_OK(m, zbuf_cut(b->z, off, n, NULL));
    mz_remove(m, b, off, n);
    slot_modified(m, k);
}

/* Insertion point and the offset it means. */
static size_t pick_ins(zm_t *m, int k, size_t *eff)
{
    if (chance(m, 6)) {
        *eff = m->zb[k].len;
        return ZBUF_OFF_END;
    }
    return *eff = pick_off(m, k);
}

static void op_insert_buf(zm_t *m)
{
    int k = live_slot(m);
    struct zm_zbuf *b = &m->zb[k];
    if (b->len > ZM_MAX_LEN) {
        trim(m, k);
        return;
    }
    size_t n = pick_len(m), off, eff;
    bool cb = !chance(m, 12);
    uint8_t *d = xrealloc(NULL, n);
    fill(m, d, n);
    uint32_t id = src_new(m, ZM_USER, d, n, cb);
    zbuf_release_cb fn = cb ? zm_release : NULL;
    void *arg = (void *)(uintptr_t)id;
    zbuf_seg_t *seg = NULL;
    uint64_t c0 = copied_now();
    int rc;
    arm(m);
    switch (pick(m, 3)) {
    case 0:
        off = pick_ins(m, k, &eff);
        note(m, k, "insert_buf(off %zu, %zu bytes%s) as buffer %u", eff, n,
             cb ? "" : ", no callback", id);
        rc = zbuf_insert_buf(b->z, off, d, n, fn, arg, chance(m, 4) ? NULL : &seg);
        break;
    case 1:
        eff = b->len;
        note(m, k, "append_buf(%zu bytes) as buffer %u", n, id);
        rc = zbuf_append_buf(b->z, d, n, fn, arg);
        break;
    default:
        eff = 0;
        note(m, k, "prepend_buf(%zu bytes) as buffer %u", n, id);
        rc = zbuf_prepend_buf(b->z, d, n, fn, arg);
        break;
    }
    if (failed_cleanly(m, rc)) {
        m->src[id].has_cb = false; /* never enrolled: the test frees it */
        return;
    }
    ZM_OK(m, rc);
    ZM_CHECK(m, copied_now() == c0, "zero-copy insert copied bytes");
    mz_put(m, b, eff, d, (int32_t)id, 0, n);
    if (seg)
        check_new_seg(m, k, seg, eff, n, d, true);
    slot_modified(m, k);
}

/* The test's handles: count them, or pick the i-th. */
static int32_t handle_src(zm_t *m, size_t want, size_t *count)
{
    size_t c = 0;
    for (size_t i = 0; i < m->nlive; i++) {
        if (m->src[m->live[i]].handle) {
            if (c == want)
                return (int32_t)m->live[i];
            c++;
        }
    }
    if (count)
        *count = c;
    return -1;
}

static void src_unref(zm_t *m, uint32_t id)
{
    struct zm_src *s = &m->src[id];
    note(m, -1, "buf_unref(%s buffer %u, %zu bytes in zbufs)", zm_kind_name[s->kind], id, s->bytes);
    zbuf_buf_t *h = s->handle;
    s->handle = NULL; /* before: the callback may run inside */
    zbuf_buf_unref(h);
}

static int32_t new_handle_src(zm_t *m)
{
    zbuf_buf_t *h = NULL;
    uint32_t id;
    switch (pick(m, 3)) {
    case 0: {
        size_t n = pick_len(m);
        uint8_t *d = xrealloc(NULL, n);
        fill(m, d, n);
        id = src_new(m, ZM_USER, d, n, true);
        note(m, -1, "buf_wrap(%zu bytes) as buffer %u", n, id);
        ZM_OK(m, zbuf_buf_wrap(d, n, zm_release, (void *)(uintptr_t)id, &h));
        ZM_CHECK(m,
                 h && zbuf_buf_data(h) == d && zbuf_buf_size(h) == n && zbuf_buf_refs(h) == 1 &&
                     !zbuf_buf_writable(h) && !zbuf_buf_file(h, NULL, NULL),
                 "a wrapped buffer does not describe the caller's memory (or claims writable)");
        break;
    }
    case 1: {
        size_t n = pick_len(m);
        note(m, -1, "buf_alloc(%zu)", n);
        ZM_OK(m, zbuf_buf_alloc(n, &h));
        ZM_CHECK(m,
                 h && zbuf_buf_data(h) && zbuf_buf_size(h) == n && zbuf_buf_refs(h) == 1 &&
                     zbuf_buf_writable(h),
                 "a new buffer is not %zu writable bytes with one reference", n);
        fill(m, zbuf_buf_data(h), n);
        id = src_new(m, ZM_HEAP, zbuf_buf_data(h), n, false);
        break;
    }
    default: {
        note(m, -1, "pool_get");
        int rc = zbuf_pool_get(m->pool, &h);
        if (rc == -ENOBUFS) {
            size_t out = 0;
            for (size_t i = 0; i < m->nlive; i++)
                out += m->src[m->live[i]].kind == ZM_POOL;
            ZM_CHECK(m, out == ZM_POOL_BUFS, "pool_get said -ENOBUFS with only %zu of %d taken",
                     out, ZM_POOL_BUFS);
            return -1;
        }
        ZM_OK(m, rc);
        ZM_CHECK(m,
                 h && zbuf_buf_size(h) == ZM_POOL_BUF_SIZE && zbuf_buf_refs(h) == 1 &&
                     zbuf_buf_writable(h),
                 "a pool buffer is not %d writable bytes with one reference", ZM_POOL_BUF_SIZE);
        fill(m, zbuf_buf_data(h), ZM_POOL_BUF_SIZE);
        id = src_new(m, ZM_POOL, zbuf_buf_data(h), ZM_POOL_BUF_SIZE, false);
        break;
    }
    }
    m->src[id].handle = h;
    return (int32_t)id;
}

static void op_insert_ref(zm_t *m)
{
    int k = live_slot(m);
    struct zm_zbuf *b = &m->zb[k];
    if (b->len > ZM_MAX_LEN) {
        trim(m, k);
        return;
    }
    size_t nh = 0;
    int32_t id = handle_src(m, SIZE_MAX, &nh);
    if (nh && chance(m, 2))
        id = handle_src(m, pick(m, nh), NULL);
    else if (nh >= 8 || (id = new_handle_src(m)) < 0)
        return;
    struct zm_src *s = &m->src[id];
    bool append = chance(m, 3);
    size_t off = 0, eff;
    if (append)
        eff = b->len;
    else
        off = pick_ins(m, k, &eff);
    size_t boff = pick(m, s->size);
    /* Often continue the segment that ends at the insertion point, when it
     * is of this buffer: insert_ref must then grow it (no new segment). */
    size_t so = 0;
    zbuf_seg_t *prev = eff > 0 ? zbuf_seg_find(b->z, eff - 1, &so) : NULL;
    bool merge = false;
    if (prev != NULL && so + 1 == zbuf_seg_length(b->z, prev) &&
        zbuf_seg_buf(b->z, prev) == s->handle) {
        size_t end = zbuf_seg_buf_offset(b->z, prev) + zbuf_seg_length(b->z, prev);
        if (end < s->size && (boff == end || chance(m, 2)))
            boff = end, merge = true;
    }
    size_t n = 1 + pick(m, s->size - boff), nsegs = zbuf_seg_count(b->z);
    zbuf_seg_t *seg = NULL;
    uint64_t c0 = copied_now();
    int rc;
    arm(m);
    if (append) {
        note(m, k, "append_ref(%s buffer %d [%zu, +%zu))", zm_kind_name[s->kind], id, boff, n);
        rc = zbuf_append_ref(b->z, s->handle, boff, n);
    } else {
        note(m, k, "insert_ref(off %zu, %s buffer %d [%zu, +%zu))", eff, zm_kind_name[s->kind], id,
             boff, n);
        rc = zbuf_insert_ref(b->z, off, s->handle, boff, n, &seg);
    }
    if (failed_cleanly(m, rc))
        return;
    ZM_OK(m, rc);
    ZM_CHECK(m, copied_now() == c0, "insert_ref copied bytes");
    if (merge)
        ZM_CHECK(m, zbuf_seg_count(b->z) == nsegs && (seg == NULL || seg == prev),
                 "insert_ref continuing a segment of the same buffer did not grow it");
    mz_put(m, b, eff, s->data + boff, id, boff, n);
    if (seg)
        check_new_seg(m, k, seg, eff, n, s->data + boff, false);
    slot_modified(m, k);
    if (chance(m, 2))
        src_unref(m, (uint32_t)id);
}

static void op_unref(zm_t *m)
{
    size_t nh = 0;
    handle_src(m, SIZE_MAX, &nh);
    if (!nh)
        return;
    uint32_t id = (uint32_t)handle_src(m, pick(m, nh), NULL);
    zbuf_buf_t *h = m->src[id].handle;
    if (chance(m, 3)) {
        unsigned r = zbuf_buf_refs(h);
        note(m, -1, "buf_ref/unref(buffer %u)", id);
        ZM_CHECK(m, zbuf_buf_ref(h) == h && zbuf_buf_refs(h) == r + 1,
                 "zbuf_buf_ref did not add a reference");
        zbuf_buf_unref(h);
        ZM_CHECK(m, zbuf_buf_refs(h) == r, "zbuf_buf_unref did not drop a reference");
        ZM_CHECK(m, !zbuf_buf_writable(h) || (r == 1 && m->src[id].kind != ZM_USER),
                 "buffer %u claims writable with %u references", id, r);
        return;
    }
    src_unref(m, id);
}

static void op_insert_copy(zm_t *m)
{
    int k = live_slot(m);
    struct zm_zbuf *b = &m->zb[k];
    if (b->len > ZM_MAX_LEN) {
        trim(m, k);
        return;
    }
    size_t n = pick_len(m), off, eff;
    uint8_t *d = scratch(m, n);
    fill(m, d, n);
    zbuf_seg_t *seg = NULL;
    uint64_t c0 = copied_now();
    int rc;
    arm(m);
    switch (pick(m, 3)) {
    case 0:
        off = pick_ins(m, k, &eff);
        note(m, k, "insert_copy(off %zu, %zu bytes)", eff, n);
        rc = zbuf_insert_copy(b->z, off, d, n, &seg);
        break;
    case 1:
        eff = b->len;
        note(m, k, "append_copy(%zu bytes)", n);
        rc = zbuf_append_copy(b->z, d, n);
        break;
    default:
        eff = 0;
        note(m, k, "prepend_copy(%zu bytes)", n);
        rc = zbuf_prepend_copy(b->z, d, n);
        break;
    }
    if (failed_cleanly(m, rc))
        return;
    ZM_OK(m, rc);
    ZM_CHECK(m, copied_now() - c0 == n, "insert_copy of %zu bytes counted %" PRIu64 " copied", n,
             copied_now() - c0);
    mz_put(m, b, eff, d, ZM_ANON, 0, n);
    if (seg)
        check_new_seg(m, k, seg, eff, n, NULL, true);
    slot_modified(m, k);
}

static void op_insert_zbuf(zm_t *m)
{
    int k = live_slot(m), j = other_live_slot(m, k);
    struct zm_zbuf *b = &m->zb[k], *from = &m->zb[j];
    if (b->len + from->len > ZM_MAX_LEN) {
        trim(m, b->len > from->len ? k : j);
        return;
    }
    size_t nd = zbuf_seg_count(b->z), ns = zbuf_seg_count(from->z), off, eff;
    zbuf_seg_t *seg = (zbuf_seg_t *)&seg;
    uint64_t c0 = copied_now();
    int rc;
    bool helper = chance(m, 3);
    arm(m);
    if (helper) {
        eff = b->len;
        note(m, k, "append(slot %d: %zu bytes)", j, from->len);
        rc = zbuf_append(b->z, from->z);
    } else {
        off = pick_ins(m, k, &eff);
        note(m, k, "insert(off %zu, slot %d: %zu bytes)", eff, j, from->len);
        rc = zbuf_insert(b->z, off, from->z, &seg);
    }
    if (failed_cleanly(m, rc))
        return;
    ZM_OK(m, rc);
    ZM_CHECK(m, copied_now() == c0, "zbuf_insert copied bytes");
    ZM_CHECK(m, zbuf_seg_count(b->z) <= nd + ns + 1, "inserting %zu segments into %zu made %zu", ns,
             nd, zbuf_seg_count(b->z));
    if (!helper) {
        if (from->len == 0)
            ZM_CHECK(m, seg == NULL, "inserting an empty zbuf returned a segment");
        else
            check_new_seg(m, k, seg, eff, from->len, NULL, false);
    }
    size_t moved = from->len;
    mz_put_from(m, b, eff, from, 0, moved);
    mz_remove(m, from, 0, moved);
    from->z = NULL; /* consumed */
    from->rsv = RSV_NONE;
    m->touched[j] = true;
    if (moved)
        slot_modified(m, k);
    else
        slot_failed(m, k); /* dst unchanged: whether its reservation stays is not documented */
}

static void op_copyout(zm_t *m)
{
    int k = live_slot(m);
    struct zm_zbuf *b = &m->zb[k];
    size_t off, n, eff;
    pick_range(m, k, true, false, &off, &n, &eff);
    uint8_t *t = scratch(m, eff + 1);
    note(m, k, "copyout(%zu, %zu)", off, eff);
    uint64_t c0 = copied_now();
    ssize_t got = zbuf_copyout(b->z, off, t, n);
    ZM_CHECK(m, got == (ssize_t)eff, "zbuf_copyout returned %zd, expected %zu", got, eff);
    ZM_CHECK(m, memcmp(t, b->data + off, eff) == 0, "copied-out bytes differ from the model");
    ZM_CHECK(m, copied_now() - c0 == eff, "copyout of %zu bytes counted %" PRIu64, eff,
             copied_now() - c0);
    m->touched[k] = true;
}

static void op_dup(zm_t *m)
{
    int k = live_slot(m);
    struct zm_zbuf *b = &m->zb[k];
    size_t off, n, eff;
    pick_range(m, k, true, false, &off, &n, &eff);
    int t = target_slot(m, k);
    zbuf_t *out = NULL;
    size_t ns = zbuf_seg_count(b->z);
    snap_take(m, &m->snap[0], k);
    note(m, k, "dup(%zu, %zu) into slot %d", off, eff, t);
    uint64_t c0 = copied_now();
    arm(m);
    int rc = zbuf_dup(b->z, off, n, &out);
    if (failed_cleanly(m, rc))
        return;
    ZM_OK(m, rc);
    ZM_CHECK(m, out != NULL && out != b->z, "zbuf_dup gave no new zbuf");
    ZM_CHECK(m, copied_now() == c0, "zbuf_dup copied bytes");
    ZM_CHECK(m, zbuf_seg_count(out) <= ns, "a dup has more segments (%zu) than its source (%zu)",
             zbuf_seg_count(out), ns);
    snap_same(m, &m->snap[0], k);
    m->zb[t].z = out;
    m->zb[t].rsv = RSV_NONE;
    mz_put_from(m, &m->zb[t], 0, b, off, eff);
    m->touched[t] = m->touched[k] = true;
}

static void op_split(zm_t *m)
{
    int k = live_slot(m);
    struct zm_zbuf *b = &m->zb[k];
    size_t off = pick_off(m, k), ns = zbuf_seg_count(b->z), len = b->len;
    int t = target_slot(m, k);
    zbuf_t *out = NULL;
    bool head = chance(m, 2);
    note(m, k, "%s(%zu) of %zu bytes into slot %d", head ? "split_head" : "split", off, len, t);
    uint64_t c0 = copied_now();
    arm(m);
    int rc = head ? zbuf_split_head(b->z, off, &out) : zbuf_split(b->z, off, &out);
    if (failed_cleanly(m, rc))
        return;
    ZM_OK(m, rc);
    ZM_CHECK(m, out != NULL && out != b->z, "no new zbuf");
    ZM_CHECK(m, copied_now() == c0, "split copied bytes");
    ZM_CHECK(m, zbuf_seg_count(b->z) + zbuf_seg_count(out) <= ns + 1,
             "split of %zu segments made %zu + %zu", ns, zbuf_seg_count(b->z), zbuf_seg_count(out));
    struct zm_zbuf *o = &m->zb[t];
    o->z = out;
    o->rsv = RSV_NONE;
    if (head) {
        mz_put_from(m, o, 0, b, 0, off);
        mz_remove(m, b, 0, off);
    } else {
        mz_put_from(m, o, 0, b, off, len - off);
        mz_remove(m, b, off, len - off);
    }
    m->touched[t] = true;
    if (off == (head ? 0 : len))
        slot_failed(m, k); /* z unchanged: whether its reservation stays is not documented */
    else
        slot_modified(m, k);
}

static void op_cut(zm_t *m)
{
    int k = live_slot(m);
    struct zm_zbuf *b = &m->zb[k];
    size_t off, n, eff;
    if (!pick_range_ex(m, k, true, true, 10, &off, &n, &eff))
        return;
    if (eff > 64 && b->len < ZM_MAX_LEN / 2 && !chance(m, 4)) {
        eff = 1 + pick(m, 64); /* mostly short cuts, so that zbufs grow */
        n = eff;
    }
    size_t ns = zbuf_seg_count(b->z);
    bool want_after = !chance(m, 4);
    zbuf_seg_t *after = (zbuf_seg_t *)&after;
    note(m, k, "cut(%zu, %zu) of %zu bytes", off, eff, b->len);
    uint64_t c0 = copied_now();
    arm(m);
    int rc = zbuf_cut(b->z, off, n, want_after ? &after : NULL);
    if (failed_cleanly(m, rc))
        return;
    ZM_OK(m, rc);
    ZM_CHECK(m, copied_now() == c0, "zbuf_cut copied bytes");
    ZM_CHECK(m, zbuf_seg_count(b->z) <= ns + 1, "cut turned %zu segments into %zu", ns,
             zbuf_seg_count(b->z));
    mz_remove(m, b, off, eff);
    if (want_after) {
        size_t so = 99;
        if (off < b->len)
            ZM_CHECK(m, after && zbuf_seg_find(b->z, off, &so) == after && so == 0,
                     "the segment returned by cut does not start at the first byte after the cut");
        else
            ZM_CHECK(m, after == NULL, "a cut to the end returned a segment");
    }
    slot_modified(m, k);
}

static void op_space(zm_t *m)
{
    int k = live_slot(m);
    struct zm_zbuf *b = &m->zb[k];
    if (b->len > ZM_MAX_LEN) {
        trim(m, k);
        return;
    }
    zbuf_t *z = b->z;
    size_t n = chance(m, 6) ? 100 + pick(m, 200) : 1 + pick(m, 48);
    size_t ns = zbuf_seg_count(z);
    void *d = NULL;
    uint64_t c0 = copied_now();
    if (chance(m, 2)) {
        size_t hr = zbuf_headroom(z);
        zbuf_seg_t *first = zbuf_seg_first(z);
        uint8_t *fd = first ? zbuf_seg_data(z, first) : NULL;
        if (b->len && foreign_src(m, b, 0) >= 0)
            ZM_CHECK(m, hr == 0, "headroom %zu in front of a caller's or shared buffer", hr);
        if (hr)
            ZM_CHECK(m, first && zbuf_buf_writable(zbuf_seg_buf(z, first)),
                     "headroom %zu in front of a buffer that is not writable", hr);
        note(m, k, "prepend_space(%zu), headroom %zu", n, hr);
        arm(m);
        int rc = zbuf_prepend_space(z, n, &d);
        if (failed_cleanly(m, rc))
            return;
        ZM_OK(m, rc);
        ZM_CHECK(m, d != NULL && zbuf_seg_data(z, zbuf_seg_first(z)) == d,
                 "the new space is not the start of the first segment");
        if (n <= hr)
            ZM_CHECK(m, zbuf_seg_count(z) == ns && (uint8_t *)d == fd - n,
                     "%zu bytes fit the headroom (%zu) but a new segment was made", n, hr);
        else
            ZM_CHECK(m, zbuf_seg_count(z) == ns + 1, "expected exactly one new segment");
        fill(m, d, n);
        mz_put(m, b, 0, d, ZM_ANON, 0, n);
    } else {
        size_t tr = zbuf_tailroom(z);
        zbuf_seg_t *last = zbuf_seg_last(z);
        uint8_t *end = last ? (uint8_t *)zbuf_seg_data(z, last) + zbuf_seg_length(z, last) : NULL;
        if (b->len && foreign_src(m, b, b->len - 1) >= 0)
            ZM_CHECK(m, tr == 0, "tailroom %zu after a caller's or shared buffer", tr);
        if (tr)
            ZM_CHECK(m, last && zbuf_buf_writable(zbuf_seg_buf(z, last)),
                     "tailroom %zu after a buffer that is not writable", tr);
        note(m, k, "append_space(%zu), tailroom %zu", n, tr);
        arm(m);
        int rc = zbuf_append_space(z, n, &d);
        if (failed_cleanly(m, rc))
            return;
        ZM_OK(m, rc);
        last = zbuf_seg_last(z);
        ZM_CHECK(m,
                 d != NULL && (uint8_t *)zbuf_seg_data(z, last) + zbuf_seg_length(z, last) ==
                                  (uint8_t *)d + n,
                 "the new space is not the end of the last segment");
        if (n <= tr)
            ZM_CHECK(m, zbuf_seg_count(z) == ns && d == end,
                     "%zu bytes fit the tailroom (%zu) but a new segment was made", n, tr);
        else
            ZM_CHECK(m, zbuf_seg_count(z) == ns + 1, "expected exactly one new segment");
        fill(m, d, n);
        mz_put(m, b, b->len, d, ZM_ANON, 0, n);
    }
    ZM_CHECK(m, copied_now() == c0, "making space copied bytes");
    slot_modified(m, k);
}

static void op_reserve(zm_t *m, int k)
{
    struct zm_zbuf *b = &m->zb[k];
    zbuf_t *z = b->z;
    size_t n = 1 + pick(m, chance(m, 4) ? 300 : 64);
    /* An active reservation hides the tailroom it holds; the new one
     * replaces it and may use that room again, so only compare with the
     * tailroom when no reservation can exist. */
    size_t tr = zbuf_tailroom(z);
    bool tr_known = b->rsv == RSV_NONE;
    zbuf_seg_t *last = zbuf_seg_last(z);
    uint8_t *end = last ? (uint8_t *)zbuf_seg_data(z, last) + zbuf_seg_length(z, last) : NULL;
    struct iovec iov[2] = {{NULL, 0}, {NULL, 0}};
    int cnt = -1;
    snap_take(m, &m->snap[0], k);
    note(m, k, "reserve(%zu), tailroom %zu", n, tr);
    uint64_t c0 = copied_now();
    arm(m);
    int rc = zbuf_reserve(z, n, iov, &cnt);
    if (failed_cleanly(m, rc))
        return; /* the previous reservation, if any, stands */
    ZM_OK(m, rc);
    ZM_CHECK(m, copied_now() == c0, "zbuf_reserve copied bytes");
    ZM_CHECK(m, cnt == 1 || cnt == 2, "zbuf_reserve used %d iovecs", cnt);
    size_t total = 0;
    for (int i = 0; i < cnt; i++) {
        ZM_CHECK(m, iov[i].iov_base && iov[i].iov_len, "reserved iovec %d is empty", i);
        total += iov[i].iov_len;
    }
    ZM_CHECK(m, total >= n, "reserved %zu bytes, asked for %zu", total, n);
    if (cnt == 2)
        ZM_CHECK(m, iov[0].iov_base == end && (!tr_known || iov[0].iov_len == tr),
                 "two iovecs, but the first is not the tailroom (%zu bytes)", tr);
    if (iov[0].iov_base == end && end && tr_known)
        ZM_CHECK(m, iov[0].iov_len <= tr, "reserved %zu bytes of tailroom, there are %zu",
                 iov[0].iov_len, tr);
    snap_same(m, &m->snap[0], k);
    b->rsv_data = xrealloc(b->rsv_data, total);
    fill(m, b->rsv_data, total);
    size_t pos = 0;
    for (int i = 0; i < cnt; i++) {
        memcpy(iov[i].iov_base, b->rsv_data + pos, iov[i].iov_len);
        pos += iov[i].iov_len;
        b->rsv_iov[i] = iov[i];
    }
    b->rsv_cnt = cnt;
    b->rsv_size = total;
    b->rsv = RSV_ACTIVE;
    m->touched[k] = true;
}

static void op_commit(zm_t *m)
{
    int k = live_slot(m);
    struct zm_zbuf *b = &m->zb[k];
    if (b->len > ZM_MAX_LEN) {
        trim(m, k);
        return;
    }
    if (b->rsv == RSV_UNKNOWN || (b->rsv == RSV_NONE && !chance(m, 4))) {
        op_reserve(m, k);
        if (b->rsv != RSV_ACTIVE || chance(m, 2))
            return;
    }
    zbuf_t *z = b->z;
    if (b->rsv == RSV_NONE) {
        snap_take(m, &m->snap[0], k);
        note(m, k, "commit without a reservation");
        m->invalid++;
        ZM_ERR(m, zbuf_commit(z, 0), -EINVAL);
        snap_same(m, &m->snap[0], k);
        m->touched[k] = true;
        return;
    }
    if (chance(m, 8)) {
        size_t c = b->rsv_size + 1 + pick(m, 8);
        snap_take(m, &m->snap[0], k);
        note(m, k, "commit(%zu) of %zu reserved", c, b->rsv_size);
        m->invalid++;
        ZM_ERR(m, zbuf_commit(z, c), -ERANGE);
        snap_same(m, &m->snap[0], k);
        slot_failed(m, k);
        return;
    }
    size_t c = chance(m, 3) ? b->rsv_size : pick(m, b->rsv_size + 1), len0 = b->len;
    size_t ns = zbuf_seg_count(z);
    note(m, k, "commit(%zu) of %zu reserved", c, b->rsv_size);
    uint64_t c0 = copied_now();
    arm(m);
    int rc = zbuf_commit(z, c);
    if (failed_cleanly(m, rc))
        return; /* the reservation stands: a later commit must work */
    ZM_OK(m, rc);
    ZM_CHECK(m, copied_now() == c0, "zbuf_commit copied bytes");
    ZM_CHECK(m, zbuf_seg_count(z) <= ns + 2, "commit made more than two segments");
    mz_put(m, b, len0, b->rsv_data, ZM_ANON, 0, c);
    b->rsv = RSV_NONE;
    /* The committed bytes are the very bytes the reservation described. */
    if (c) {
        seg_room(m, zbuf_seg_count(z));
        int cnt = zbuf_iovec(z, len0, c, m->iov2, (int)zbuf_seg_count(z) + 1, NULL);
        ZM_OK(m, cnt);
        size_t ri = 0, roff = 0;
        for (int i = 0; i < cnt; i++) {
            uint8_t *p = m->iov2[i].iov_base;
            for (size_t q = 0; q < m->iov2[i].iov_len; q++) {
                while (ri < (size_t)b->rsv_cnt && roff == b->rsv_iov[ri].iov_len) {
                    ri++;
                    roff = 0;
                }
                ZM_CHECK(m, ri < (size_t)b->rsv_cnt, "committed more bytes than were reserved");
                ZM_CHECK(m, p + q == (uint8_t *)b->rsv_iov[ri].iov_base + roff,
                         "committed byte %zu is not where zbuf_reserve said to write it", len0 + q);
                roff++;
            }
        }
    }
    m->touched[k] = true;
    if (chance(m, 4)) {
        note(m, k, "second commit");
        m->invalid++;
        ZM_ERR(m, zbuf_commit(z, 0), -EINVAL);
    }
}

/* Whether [off, off+n) lies in one segment of slot k, and where. */
static bool in_one_seg(zm_t *m, int k, size_t off, size_t n, uint8_t **p)
{
    zbuf_t *z = m->zb[k].z;
    size_t so = 0;
    zbuf_seg_t *s = zbuf_seg_find(z, off, &so);
    ZM_CHECK(m, s != NULL, "zbuf_seg_find(%zu) found nothing in %zu bytes", off, m->zb[k].len);
    *p = (uint8_t *)zbuf_seg_data(z, s) + so;
    return so + n <= zbuf_seg_length(z, s);
}

/* The model range covered by the segments holding bytes off .. off+n-1. */
static void seg_extent(zm_t *m, int k, size_t off, size_t n, size_t *lo, size_t *hi)
{
    zbuf_t *z = m->zb[k].z;
    size_t so = 0, so2 = 0;
    zbuf_seg_t *a = zbuf_seg_find(z, off, &so);
    zbuf_seg_t *e = zbuf_seg_find(z, off + n - 1, &so2);
    ZM_CHECK(m, a && e, "zbuf_seg_find failed inside the zbuf");
    *lo = off - so;
    *hi = off + n - 1 - so2 + zbuf_seg_length(z, e);
}

static void op_pullup(zm_t *m)
{
    int k = live_slot(m);
    struct zm_zbuf *b = &m->zb[k];
    if (!b->len)
        return;
    size_t off = pick(m, b->len), n = 1 + pick(m, chance(m, 2) ? b->len - off : 24);
    if (n > b->len - off)
        n = b->len - off;
    uint8_t *p0;
    bool single = in_one_seg(m, k, off, n, &p0);
    size_t ns = zbuf_seg_count(b->z);
    void *d = NULL;
    snap_take(m, &m->snap[0], k);
    note(m, k, "pullup(%zu, %zu), %s", off, n, single ? "in one segment" : "spanning segments");
    uint64_t c0 = copied_now();
    arm(m);
    int rc = zbuf_pullup(b->z, off, n, &d);
    if (failed_cleanly(m, rc))
        return;
    ZM_OK(m, rc);
    ZM_CHECK(m, d && memcmp(d, b->data + off, n) == 0, "pulled-up bytes differ from the model");
    if (single) {
        ZM_CHECK(m, d == p0 && copied_now() == c0,
                 "pullup of a range inside one segment moved or copied it");
        snap_same(m, &m->snap[0], k);
        if (b->rsv == RSV_ACTIVE)
            b->rsv = RSV_UNKNOWN;
        m->touched[k] = true;
        return;
    }
    ZM_CHECK(m, copied_now() - c0 >= n, "pullup copied %" PRIu64 " bytes for a %zu-byte range",
             copied_now() - c0, n);
    /* The spanned segments (two or more) become at most three: the kept
     * head of the first, the new one, the kept tail of the last. */
    ZM_CHECK(m, zbuf_seg_count(b->z) <= ns + 1, "pullup made %zu segments out of %zu",
             zbuf_seg_count(b->z), ns);
    uint8_t *p1;
    ZM_CHECK(m, in_one_seg(m, k, off, n, &p1) && p1 == d,
             "after pullup the range is not one segment at the returned address");
    m->lenient_slot = k;
    seg_extent(m, k, off, n, &m->lenient_lo, &m->lenient_hi);
    verify(m, k);
    m->lenient_slot = -1;
    slot_modified(m, k);
}

static void op_peek(zm_t *m)
{
    int k = live_slot(m);
    struct zm_zbuf *b = &m->zb[k];
    if (!b->len)
        return;
    size_t off = pick(m, b->len), n = 1 + pick(m, chance(m, 2) ? b->len - off : 16);
    if (n > b->len - off)
        n = b->len - off;
    uint8_t *p0;
    bool single = in_one_seg(m, k, off, n, &p0), with = !chance(m, 3);
    uint8_t *t = with ? scratch(m, n) : NULL;
    const void *out = NULL;
    snap_take(m, &m->snap[0], k);
    note(m, k, "peek(%zu, %zu) %s scratch, %s", off, n, with ? "with" : "without",
         single ? "in one segment" : "spanning segments");
    uint64_t c0 = copied_now();
    int rc = zbuf_peek(b->z, off, n, t, &out);
    if (single) {
        ZM_OK(m, rc);
        ZM_CHECK(m, out == p0 && copied_now() == c0,
                 "peek inside one segment did not point into it");
    } else if (with) {
        ZM_OK(m, rc);
        ZM_CHECK(m, out == t && copied_now() - c0 == n,
                 "peek across segments did not copy to scratch");
    } else {
        ZM_ERR(m, rc, -EAGAIN);
    }
    if (rc == 0)
        ZM_CHECK(m, memcmp(out, b->data + off, n) == 0, "peeked bytes differ from the model");
    snap_same(m, &m->snap[0], k);
    m->touched[k] = true;
}

static void op_unshare(zm_t *m)
{
    int k = live_slot(m);
    struct zm_zbuf *b = &m->zb[k];
    size_t off, n, eff;
    if (!pick_range(m, k, true, true, &off, &n, &eff))
        return;
    note(m, k, "unshare(%zu, %zu)", off, eff);
    uint64_t c0 = copied_now();
    arm(m);
    int rc = zbuf_unshare(b->z, off, n);
    if (failed_cleanly(m, rc))
        return;
    ZM_OK(m, rc);
    uint64_t c1 = copied_now() - c0;
    ZM_CHECK(m, c1 <= eff, "unshare of %zu bytes copied %" PRIu64, eff, c1);
    ZM_CHECK(m, zbuf_writable(b->z, off, eff), "the range is not writable after zbuf_unshare");
    m->lenient_slot = k;
    seg_extent(m, k, off, eff, &m->lenient_lo, &m->lenient_hi);
    verify(m, k);
    m->lenient_slot = -1;
    for (size_t i = off; i < off + eff; i++)
        ZM_CHECK(m, foreign_src(m, b, i) < 0,
                 "after unshare byte %zu still lies in a caller's or shared buffer %d", i,
                 b->src[i]);
    /* Write through the segments: no other zbuf may see it. */
    seg_room(m, zbuf_seg_count(b->z));
    int cnt = zbuf_iovec(b->z, off, eff, m->iov2, (int)zbuf_seg_count(b->z) + 1, NULL);
    size_t pos = off;
    for (int i = 0; i < cnt; i++) {
        fill(m, m->iov2[i].iov_base, m->iov2[i].iov_len);
        memcpy(b->data + pos, m->iov2[i].iov_base, m->iov2[i].iov_len);
        pos += m->iov2[i].iov_len;
    }
    ZM_CHECK(m, pos == off + eff, "zbuf_iovec did not cover the unshared range");
    m->touched[k] = true;
    if (c1) /* it copied, so it modified the zbuf */
        slot_modified(m, k);
    else if (b->rsv == RSV_ACTIVE)
        b->rsv = RSV_UNKNOWN;
    for (int j = 0; j < ZM_SLOTS; j++)
        m->touched[j] = true;
}

static void op_iovec(zm_t *m)
{
    int k = live_slot(m);
    struct zm_zbuf *b = &m->zb[k];
    size_t off, n, eff;
    pick_range(m, k, true, false, &off, &n, &eff);
    size_t ns = seg_walk(m, k);
    /* The pieces the range must give, segment by segment. */
    size_t want = 0, wbytes = 0;
    int cap = 1 + (int)pick(m, ns + 1);
    struct iovec *iov = m->iov2;
    note(m, k, "iovec(%zu, %zu, %d entries)", off, eff, cap);
    uint64_t c0 = copied_now();
    size_t got = 99;
    int rc = zbuf_iovec(b->z, off, n, iov, cap, &got);
    ZM_CHECK(m, copied_now() == c0, "zbuf_iovec copied bytes");
    for (size_t i = 0; i < ns && eff; i++) {
        size_t s0 = m->starts[i], s1 = m->starts[i + 1];
        if (s1 <= off || s0 >= off + eff)
            continue;
        size_t a = off > s0 ? off : s0, e = off + eff < s1 ? off + eff : s1;
        if ((int)want < cap) {
            ZM_CHECK(m, (int)want < rc, "zbuf_iovec gave %d entries, fewer than it could", rc);
            ZM_CHECK(m,
                     iov[want].iov_base == (uint8_t *)m->iov[i].iov_base + (a - s0) &&
                         iov[want].iov_len == e - a,
                     "zbuf_iovec entry %zu is not segment %zu's part of the range", want, i);
            wbytes += e - a;
        }
        want++;
    }
    ZM_CHECK(m, rc == (int)(want < (size_t)cap ? want : (size_t)cap),
             "zbuf_iovec gave %d entries, expected %zu (room for %d)", rc, want, cap);
    ZM_CHECK(m, got == wbytes, "zbuf_iovec said it covers %zu bytes, the entries cover %zu", got,
             wbytes);
    m->touched[k] = true;
}

static uint64_t expect_int(const uint8_t *p, int size, bool big)
{
    uint64_t v = 0;
    for (int i = 0; i < size; i++)
        v |= (uint64_t)p[i] << (8 * (big ? size - 1 - i : i));
    return v;
}

static void op_cursor(zm_t *m)
{
    int k = live_slot(m);
    struct zm_zbuf *b = &m->zb[k];
    size_t pos = pick_off(m, k);
    zbuf_cursor_t c;
    note(m, k, "cursor at %zu of %zu", pos, b->len);
    ZM_OK(m, zbuf_cursor_init(&c, b->z, pos));
    for (int r = 1 + (int)pick(m, 10); r > 0; r--) {
        size_t rem = b->len - pos;
        ZM_CHECK(m, zbuf_cursor_offset(&c) == pos && zbuf_cursor_remaining(&c) == rem,
                 "cursor says offset %zu, %zu remaining; expected %zu, %zu", zbuf_cursor_offset(&c),
                 zbuf_cursor_remaining(&c), pos, rem);
        unsigned what = (unsigned)pick(m, 10);
        static const int sizes[] = {1, 2, 2, 4, 4, 8, 8};
        if (what < 7) {
            int size = sizes[what];
            bool big = what == 1 || what == 3 || what == 5;
            uint64_t v = 0xA5A5A5A5A5A5A5A5ull;
            uint8_t v8 = 0xA5;
            uint16_t v16 = 0xA5A5;
            uint32_t v32 = 0xA5A5A5A5;
            int rc;
            note(m, k, "cursor at %zu: read %d bytes %s-endian", pos, size, big ? "big" : "little");
            switch (what) {
            case 0:
                rc = zbuf_cursor_read_u8(&c, &v8);
                v = v8;
                break;
            case 1:
                rc = zbuf_cursor_read_be16(&c, &v16);
                v = v16;
                break;
            case 2:
                rc = zbuf_cursor_read_le16(&c, &v16);
                v = v16;
                break;
            case 3:
                rc = zbuf_cursor_read_be32(&c, &v32);
                v = v32;
                break;
            case 4:
                rc = zbuf_cursor_read_le32(&c, &v32);
                v = v32;
                break;
            case 5:
                rc = zbuf_cursor_read_be64(&c, &v);
                break;
            default:
                rc = zbuf_cursor_read_le64(&c, &v);
                break;
            }
            if ((size_t)size > rem) {
                uint64_t untouched = size == 8   ? 0xA5A5A5A5A5A5A5A5ull
                                     : size == 4 ? 0xA5A5A5A5u
                                     : size == 2 ? 0xA5A5u
                                                 : 0xA5u;
                ZM_ERR(m, rc, -ERANGE);
                ZM_CHECK(m, v == untouched, "a failed read changed its output");
                continue;
            }
            ZM_OK(m, rc);
            uint64_t want = expect_int(b->data + pos, size, big);
            ZM_CHECK(m, v == want, "read 0x%" PRIx64 ", expected 0x%" PRIx64, v, want);
            pos += (size_t)size;
            continue;
        }
        size_t n = 1 + pick(m, 40);
        if (what == 7) {
            uint8_t *t = scratch(m, n);
            note(m, k, "cursor at %zu: read(%zu)", pos, n);
            int rc = zbuf_cursor_read(&c, t, n);
            if (n > rem) {
                ZM_ERR(m, rc, -ERANGE);
                continue;
            }
            ZM_OK(m, rc);
            ZM_CHECK(m, memcmp(t, b->data + pos, n) == 0, "cursor read bytes differ from model");
            pos += n;
        } else if (what == 8) {
            note(m, k, "cursor at %zu: skip(%zu)", pos, n);
            int rc = zbuf_cursor_skip(&c, n);
            if (n > rem) {
                ZM_ERR(m, rc, -ERANGE);
                continue;
            }
            ZM_OK(m, rc);
            pos += n;
        } else {
            note(m, k, "cursor at %zu: peek(%zu)", pos, n);
            const uint8_t *p = zbuf_cursor_peek(&c, n);
            uint8_t *where;
            if (n > rem) {
                ZM_CHECK(m, p == NULL, "cursor peek past the end returned bytes");
            } else if (in_one_seg(m, k, pos, n, &where)) {
                ZM_CHECK(m, p == where, "cursor peek inside one segment did not point into it");
                ZM_CHECK(m, memcmp(p, b->data + pos, n) == 0, "cursor peek bytes differ");
            } else {
                ZM_CHECK(m, p == NULL, "cursor peek across segments returned an address");
            }
        }
    }
    m->touched[k] = true;
}

static void op_segs(zm_t *m)
{
    int k = live_slot(m);
    struct zm_zbuf *b = &m->zb[k];
    zbuf_t *z = b->z;
    size_t ns = seg_walk(m, k), len = b->len, abs = 12345, so = 99;
    note(m, k, "segment queries");
    if (len) {
        size_t off = pick(m, len), i = 0;
        while (m->starts[i + 1] <= off)
            i++;
        ZM_CHECK(m, zbuf_seg_find(z, off, &so) == m->segs[i] && so == off - m->starts[i],
                 "zbuf_seg_find(%zu) is not segment %zu at %zu", off, i, off - m->starts[i]);
    }
    ZM_CHECK(m, zbuf_seg_find(z, len, NULL) == NULL, "zbuf_seg_find(length) found a segment");

    /* (segment, relative offset) -> absolute, including outside values. */
    size_t si = pick(m, ns + 1);
    const zbuf_seg_t *seg = si < ns ? m->segs[si] : NULL;
    int64_t base = si < ns ? (int64_t)m->starts[si] : 0, rel, want;
    switch (pick(m, 4)) {
    case 0:
        rel = chance(m, 2) ? ZBUF_REL_BEGIN : ZBUF_REL_END;
        want = rel == ZBUF_REL_BEGIN ? 0 : (int64_t)len;
        break;
    default:
        rel = (int64_t)pick(m, len + 7) - base - 3;
        want = base + rel;
        break;
    }
    note(m, k, "locate(segment %zu, %" PRId64 ") of %zu bytes", si, rel, len);
    int rc = zbuf_locate(z, seg, rel, &abs);
    if (want >= 0 && want <= (int64_t)len) {
        ZM_OK(m, rc);
        ZM_CHECK(m, abs == (size_t)want, "located %zu, expected %" PRId64, abs, want);
    } else {
        m->invalid++;
        ZM_ERR(m, rc, -ERANGE);
    }

    /* A segment of another zbuf is foreign here. */
    int j = (k + 1 + (int)pick(m, ZM_SLOTS - 1)) % ZM_SLOTS;
    zbuf_seg_t *fs = m->zb[j].z ? zbuf_seg_first(m->zb[j].z) : NULL;
    if (fs) {
        note(m, k, "foreign segment of slot %d", j);
        m->invalid++;
        ZM_CHECK(m,
                 zbuf_seg_next(z, fs) == NULL && zbuf_seg_prev(z, fs) == NULL &&
                     zbuf_seg_length(z, fs) == 0 && zbuf_seg_data(z, fs) == NULL &&
                     zbuf_seg_buf(z, fs) == NULL,
                 "a segment of another zbuf was accepted");
        ZM_ERR(m, zbuf_locate(z, fs, 0, &abs), -EINVAL);
    }

    /* Writability of a range follows from who owns its bytes. */
    if (len) {
        size_t off = pick(m, len), n = 1 + pick(m, len - off);
        bool w = zbuf_writable(z, off, n), foreign = false;
        for (size_t i = off; i < off + n; i++)
            foreign |= foreign_src(m, b, i) >= 0;
        note(m, k, "writable(%zu, %zu) = %d", off, n, w);
        ZM_CHECK(m, !(w && foreign), "a range holding caller or shared bytes claims writable");
        if (w)
            for (size_t i = 0; i < ns; i++)
                if (m->starts[i + 1] > off && m->starts[i] < off + n)
                    ZM_CHECK(m, zbuf_buf_writable(zbuf_seg_buf(z, m->segs[i])),
                             "writable range over segment %zu whose buffer is not", i);
        ZM_CHECK(m, !zbuf_writable(z, off, len - off + 1), "a range past the end is writable");
    }
    m->touched[k] = true;
}

/* Calls with bad arguments: the documented error, and nothing changes. */
static void op_invalid(zm_t *m)
{
    int k = live_slot(m), j = -1;
    struct zm_zbuf *b = &m->zb[k];
    zbuf_t *z = b->z, *out = NULL;
    size_t len = b->len, past = len + 1 + pick(m, 100), abs = 0;
    int cbs = 0, rc = 0, want = -ERANGE;
    bool modifying = true;
    uint8_t small[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint8_t *t = scratch(m, len + 64);
    zbuf_buf_t *h = NULL;
    void *d = NULL;
    const void *cd = NULL;
    struct iovec iov[4];
    zbuf_cursor_t c;
    unsigned what = (unsigned)pick(m, 19);
    if (what == 4 || what == 5)
        ZM_OK(m, zbuf_buf_alloc(16, &h));
    if (what == 6 || what == 7)
        j = other_live_slot(m, k);
    snap_take(m, &m->snap[0], k);
    if (j >= 0)
        snap_take(m, &m->snap[1], j);
    zbuf_stats_t st0, st1;
    zbuf_stats_get(&st0);
    uint64_t rel0 = m->releases;
    m->invalid++;
    switch (what) {
    case 0:
        note(m, k, "insert_buf at %zu of %zu", past, len);
        rc = zbuf_insert_buf(z, past, small, 8, zm_count_cb, &cbs, NULL);
        break;
    case 1:
        note(m, k, "insert_buf of 0 bytes");
        want = -EINVAL;
        rc = zbuf_insert_buf(z, 0, small, 0, zm_count_cb, &cbs, NULL);
        break;
    case 2:
        note(m, k, "insert_buf of NULL");
        want = -EINVAL;
        rc = zbuf_insert_buf(z, 0, NULL, 8, zm_count_cb, &cbs, NULL);
        break;
    case 3:
        note(m, k, "insert_copy at %zu of %zu", past, len);
        rc = zbuf_insert_copy(z, past, small, 8, NULL);
        break;
    case 4: {
        static const size_t bad[][2] = {{10, 7}, {16, 1}, {17, 1}, {8, SIZE_MAX - 4}};
        size_t v = pick(m, 4);
        note(m, k, "insert_ref of [%zu, +%zu) of a 16-byte buffer", bad[v][0], bad[v][1]);
        rc = zbuf_insert_ref(z, 0, h, bad[v][0], bad[v][1], NULL);
        break;
    }
    case 5:
        if (chance(m, 2)) {
            note(m, k, "insert_ref of 0 bytes");
            want = -EINVAL;
            rc = zbuf_insert_ref(z, 0, h, 0, 0, NULL);
        } else {
            note(m, k, "insert_ref at %zu of %zu", past, len);
            rc = zbuf_insert_ref(z, past, h, 0, 4, NULL);
        }
        break;
    case 6:
        note(m, k, "insert(slot %d) at %zu of %zu", j, past, len);
        rc = zbuf_insert(z, past, m->zb[j].z, NULL);
        break;
    case 7:
        note(m, k, "insert into itself");
        want = -EINVAL;
        rc = zbuf_insert(z, 0, z, NULL);
        break;
    case 8:
        modifying = false;
        switch (pick(m, 3)) {
        case 0:
            note(m, k, "copyout from %zu of %zu", past, len);
            rc = (int)zbuf_copyout(z, past, t, chance(m, 2) ? ZBUF_TO_END : 1);
            break;
        case 1: {
            size_t off = pick(m, len + 1);
            note(m, k, "copyout(%zu, %zu) of %zu", off, len - off + 1, len);
            rc = (int)zbuf_copyout(z, off, t, len - off + 1);
            break;
        }
        default:
            note(m, k, "copyout(1, SIZE_MAX - 1)");
            rc = (int)zbuf_copyout(z, 1, t, SIZE_MAX - 1);
            break;
        }
        break;
    case 9: {
        size_t off = pick(m, len + 1);
        modifying = false;
        note(m, k, "dup(%zu, %zu) of %zu", off, len - off + 1, len);
        rc = zbuf_dup(z, off, len - off + 1 + pick(m, 4), &out);
        break;
    }
    case 10:
        note(m, k, "split at %zu of %zu", past, len);
        rc = chance(m, 2) ? zbuf_split(z, past, &out) : zbuf_split_head(z, past, &out);
        break;
    case 11: {
        size_t off = pick(m, len + 1);
        if (chance(m, 3)) {
            note(m, k, "cut from %zu to the end of %zu", past, len);
            rc = zbuf_cut(z, past, ZBUF_TO_END, NULL);
        } else if (chance(m, 2)) {
            note(m, k, "cut(%zu, SIZE_MAX - 1)", off);
            rc = zbuf_cut(z, off, SIZE_MAX - 1, NULL);
        } else {
            note(m, k, "cut(%zu, %zu) of %zu", off, len - off + 1, len);
            rc = zbuf_cut(z, off, len - off + 1, NULL);
        }
        break;
    }
    case 12:
        if (chance(m, 2)) {
            note(m, k, "pullup of 0 bytes");
            rc = zbuf_pullup(z, pick(m, len + 1), 0, &d);
        } else {
            size_t off = pick(m, len + 1);
            note(m, k, "pullup(%zu, %zu) of %zu", off, len - off + 1, len);
            rc = zbuf_pullup(z, off, len - off + 1, &d);
        }
        break;
    case 13: {
        size_t off = pick(m, len + 1);
        modifying = false;
        note(m, k, "peek(%zu, %zu) of %zu", off, len - off + 1, len);
        rc = zbuf_peek(z, off, len - off + 1, t, &cd);
        break;
    }
    case 14: {
        size_t off = pick(m, len + 1);
        modifying = false;
        note(m, k, "iovec(%zu, %zu) of %zu", off, len - off + 1, len);
        if (chance(m, 2))
            rc = zbuf_iovec(z, off, len - off + 1, iov, 4, NULL);
        else
            rc = zbuf_iovec(z, past, chance(m, 2) ? ZBUF_TO_END : 1, iov, 4, NULL);
        break;
    }
    case 15: {
        size_t off = pick(m, len + 1);
        note(m, k, "unshare(%zu, %zu) of %zu", off, len - off + 1, len);
        rc = zbuf_unshare(z, off, len - off + 1);
        break;
    }
    case 16:
        modifying = false;
        note(m, k, "cursor_init at %zu of %zu", past, len);
        rc = zbuf_cursor_init(&c, z, past);
        break;
    case 17:
        modifying = false;
        if (chance(m, 2)) {
            note(m, k, "locate(NULL, %zu) of %zu", past, len);
            rc = zbuf_locate(z, NULL, (int64_t)past, &abs);
        } else {
            note(m, k, "locate(NULL, -1) of %zu", len);
            rc = zbuf_locate(z, NULL, -1, &abs);
        }
        break;
    default:
        modifying = false;
        note(m, k, "seg_find/zbuf_length on bad input");
        ZM_CHECK(m,
                 zbuf_length(NULL) == 0 && zbuf_seg_count(NULL) == 0 &&
                     zbuf_seg_first(NULL) == NULL && zbuf_check(NULL) == -EINVAL &&
                     zbuf_seg_find(z, past, NULL) == NULL,
                 "NULL or out-of-range queries did not answer nothing");
        want = rc = 0;
        break;
    }
    ZM_ERR(m, rc, want);
    ZM_CHECK(m, cbs == 0, "a failed call ran a release callback");
    ZM_CHECK(m, m->releases == rel0, "a failed call released a buffer");
    zbuf_stats_get(&st1);
    ZM_CHECK(m, st1.bytes_copied == st0.bytes_copied, "a failed call counted copied bytes");
    ZM_CHECK(m,
             st1.live_zbufs == st0.live_zbufs && st1.live_segs == st0.live_segs &&
                 st1.live_bufs == st0.live_bufs,
             "a failed call changed the live counts (zbufs %+lld, segments %+lld, buffers %+lld)",
             (long long)(st1.live_zbufs - st0.live_zbufs),
             (long long)(st1.live_segs - st0.live_segs),
             (long long)(st1.live_bufs - st0.live_bufs));
    snap_same(m, &m->snap[0], k);
    if (j >= 0) {
        snap_same(m, &m->snap[1], j);
        m->touched[j] = true;
    }
    if (h)
        zbuf_buf_unref(h);
    if (modifying)
        slot_failed(m, k);
    m->touched[k] = true;
}

static void op_create_delete(zm_t *m)
{
    int k = (int)pick(m, ZM_SLOTS);
    if (m->zb[k].z && (m->zb[k].len > ZM_MAX_LEN / 2 || chance(m, 3)))
        slot_delete(m, k);
    else if (m->zb[k].z)
        verify(m, k);
    else
        slot_create(m, k);
}

/* ------------------------------------------------------------ driver */

struct zm_op {
    void (*run)(zm_t *m);
    unsigned weight;
};

static const struct zm_op zm_ops[] = {
    {op_create_delete, 4}, {op_insert_buf, 9},  {op_insert_ref, 9}, {op_unref, 3},
    {op_insert_copy, 6},   {op_insert_zbuf, 6}, {op_copyout, 4},    {op_dup, 7},
    {op_split, 6},         {op_cut, 8},         {op_space, 6},      {op_commit, 6},
    {op_pullup, 4},        {op_peek, 3},        {op_unshare, 3},    {op_iovec, 4},
    {op_cursor, 4},        {op_segs, 3},        {op_invalid, 5},
};

zm_t *zm_new(const struct zm_options *o)
{
    zm_t *m = xrealloc(NULL, sizeof *m);
    memset(m, 0, sizeof *m);
    m->o = *o;
    if (!m->o.full_check_every)
        m->o.full_check_every = 16;
    m->rng = o->seed;
    m->crng = o->seed ^ 0x5a6275665a627566ull;
    m->in = o->input;
    m->in_left = o->input_len;
    m->lenient_slot = -1;
    m->frng = o->seed ^ 0xfa17fa17fa17fa17ull ^ o->input_len;
    zm_cur = m;
    if (o->fault_one_in) {
        zbuf_allocator_t a = {zm_fault_alloc, zm_fault_free, m};
        zbuf__cache_set_enabled(false);
        note(m, -1, "install the failing allocator");
        ZM_OK(m, zbuf_set_allocator(&a));
    }
    note(m, -1, "pool_create(%d, %d)", ZM_POOL_BUF_SIZE, ZM_POOL_BUFS);
    ZM_OK(m, zbuf_pool_create(ZM_POOL_BUF_SIZE, ZM_POOL_BUFS, &m->pool));
    ZM_CHECK(m,
             zbuf_pool_capacity(m->pool) == ZM_POOL_BUFS &&
                 zbuf_pool_available(m->pool) == ZM_POOL_BUFS &&
                 zbuf_pool_buf_size(m->pool) == ZM_POOL_BUF_SIZE,
             "a new pool does not describe itself");
    for (int k = 0; k < ZM_SLOTS; k++) {
        struct zm_zbuf *b = &m->zb[k];
        b->cap = 64; /* never NULL, even for memcmp of 0 bytes */
        b->data = xrealloc(NULL, b->cap);
        b->src = xrealloc(NULL, b->cap * sizeof *b->src);
        b->soff = xrealloc(NULL, b->cap * sizeof *b->soff);
        slot_create(m, k);
    }
    return m;
}

bool zm_step(zm_t *m)
{
    if (m->o.input && m->in_left == 0)
        return false;
    zm_cur = m;
    m->step++;
    memset(m->touched, 0, sizeof m->touched);
    unsigned total = 0;
    for (size_t i = 0; i < sizeof zm_ops / sizeof zm_ops[0]; i++)
        total += zm_ops[i].weight;
    size_t w = pick(m, total), i = 0;
    while (w >= zm_ops[i].weight)
        w -= zm_ops[i++].weight;
    zm_ops[i].run(m);
    bool full = m->step % m->o.full_check_every == 0;
    for (int k = 0; k < ZM_SLOTS; k++)
        if (full || m->touched[k])
            verify(m, k);
    check_sources(m);
    if (m->o.trace && m->step % 500 == 0) {
        fprintf(m->o.trace, "%" PRIu64 " population:", m->step);
        for (int k = 0; k < ZM_SLOTS; k++)
            if (m->zb[k].z)
                fprintf(m->o.trace, " %zu bytes/%zu segs", m->zb[k].len,
                        zbuf_seg_count(m->zb[k].z));
        fprintf(m->o.trace, ", %zu buffers watched\n", m->nlive);
    }
    return true;
}

void zm_finish(zm_t *m)
{
    zm_cur = m;
    m->step++;
    note(m, -1, "finish");
    /* Deleting the pool first must leave its buffers in the zbufs valid. */
    if (chance(m, 2)) {
        note(m, -1, "pool_delete with buffers out");
        zbuf_pool_delete(m->pool);
        m->pool = NULL;
        for (int k = 0; k < ZM_SLOTS; k++)
            verify(m, k);
    }
    int first = (int)pick(m, ZM_SLOTS);
    for (int i = 0; i < ZM_SLOTS; i++) {
        int k = (first + i) % ZM_SLOTS;
        if (m->zb[k].z)
            slot_delete(m, k);
        check_sources(m);
    }
    int32_t id;
    while ((id = handle_src(m, 0, NULL)) >= 0) {
        src_unref(m, (uint32_t)id);
        check_sources(m);
    }
    note(m, -1, "finish: every buffer released");
    ZM_CHECK(m, m->nlive == 0, "%zu buffers are still referenced after everything was deleted",
             m->nlive);
    for (size_t i = 0; i < m->nsrc; i++) {
        struct zm_src *s = &m->src[i];
        if (s->kind != ZM_USER)
            continue;
        if (s->has_cb)
            ZM_CHECK(m, s->released == 1, "release callback of buffer %zu ran %u times", i,
                     s->released);
        else
            free(s->data);
    }
    if (m->pool) {
        ZM_CHECK(m, zbuf_pool_available(m->pool) == ZM_POOL_BUFS,
                 "the pool did not get every buffer back");
        zbuf_pool_delete(m->pool);
    }
    if (m->o.fault_one_in) {
        note(m, -1, "restore the default allocator");
        ZM_CHECK(m, zbuf_set_allocator(NULL) == 0,
                 "the allocator cannot be restored: something is still alive");
        zbuf__cache_set_enabled(true);
    }
    for (int k = 0; k < ZM_SLOTS; k++) {
        free(m->fsnap[k].seg);
        free(m->fsnap[k].slen);
        free(m->fsnap[k].sdata);
    }
    for (int k = 0; k < ZM_SLOTS; k++) {
        free(m->zb[k].data);
        free(m->zb[k].src);
        free(m->zb[k].soff);
        free(m->zb[k].rsv_data);
    }
    for (int i = 0; i < 2; i++) {
        free(m->snap[i].seg);
        free(m->snap[i].slen);
        free(m->snap[i].sdata);
    }
    free(m->src);
    free(m->live);
    free(m->iov);
    free(m->iov2);
    free(m->starts);
    free(m->segs);
    free(m->tmp);
    free(m);
    zm_cur = NULL;
}

uint64_t zm_steps(const zm_t *m)
{
    return m->step;
}

uint64_t zm_invalid_ops(const zm_t *m)
{
    return m->invalid;
}

uint64_t zm_releases(const zm_t *m)
{
    return m->releases;
}

uint64_t zm_enomem_ops(const zm_t *m)
{
    return m->enomem;
}
