/* SPDX-License-Identifier: MIT */
/*
 * Buffers: creation in each of the four kinds, reference counting, release.
 *
 * A HEAP buffer is one allocation: the header, padded to 64 bytes so the
 * data that follows is cache-line aligned, then the bytes.  USER and FILE
 * buffers are a bare header pointing at the caller's memory or file range;
 * their release runs the caller's callback.  POOL headers live inside their
 * pool and go back to it.
 *
 * Biased reference counts
 * -----------------------
 * Most sharing stays on one thread: a protocol layer dups a message, cuts
 * and splits it and drops the pieces, all on the thread that received it.
 * An atomic read-modify-write per reference change costs 20 times a plain
 * increment, and such a round makes about ten of them.  So a buffer is
 * *biased* to the thread that created it (Choi, Shull and Torrellas, "Biased
 * Reference Counting", PACT 2018; CPython's free-threaded build does the
 * same): that thread counts in `local` with plain loads and stores.
 *
 * The paper lets other threads count in a second, atomic counter and, when
 * that counter goes negative, queues the object for its owner to merge the
 * two later.  That would release a buffer later, on the owner's thread,
 * where libzbuf promises the release on the thread that drops the last
 * reference, inside that call.  So here another thread never counts beside
 * the owner.  It either
 *
 *  - finds that it holds the only reference (`local` is 1 while the buffer
 *    is still biased to the same owner: all references are in `local`, and
 *    nobody can make a new one from a reference it does not hold).  It then
 *    releases the buffer (a drop) or takes the bias over (a new reference):
 *    a pool buffer filled on one thread and consumed on another changes
 *    owner and stays cheap; or
 *  - converts the buffer to shared counting, once and for good: it marks
 *    the buffer converting (a compare-and-swap on `owner`, so one thread
 *    converts and the others wait for it), makes sure the owner is not in
 *    the middle of a plain update, moves `local` into `shared` and clears
 *    `owner`.  From then on every thread, the owner too, counts in `shared`
 *    with atomics, exactly as before biasing existed.
 *
 * "Not in the middle of a plain update" is the delicate part.  The owner
 * makes its changes inside a *run* (internal.h: a dup's or a delete's loop
 * over its segments is one run): it increments in_cs, then loads `owner`
 * and stores `local` for each buffer, then decrements in_cs, with no fence,
 * so its loads may be satisfied before its store of in_cs is visible
 * (store-load reordering).  The converting thread therefore issues
 * membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) after its compare-and-swap:
 * every running thread of the process then executes a full barrier, so the
 * owner either has not loaded `owner` yet (and will see "converting") or
 * its in_cs increment is visible; the converter waits for in_cs to drop
 * back to 0, and the owner's last store to `local` is then visible too.  A
 * run never waits for anything and never calls user code (the release and
 * the slow path leave it), so the wait is short and cannot deadlock.  This is
 * the asymmetric fence of userspace RCU and of HotSpot's biased locking:
 * the rare side pays a system call so that the common side pays nothing.
 * Without membarrier() (old kernels, seccomp) biasing is off and every
 * buffer is shared from the start.
 *
 * A thread whose buffers keep getting converted (it hands references to
 * new buffers to other threads while keeping some) gets `share_credit`: its
 * next buffers start shared, so that it does not pay a conversion for each
 * one.  "Keep getting": a buffer is converted that was made after the
 * owner's previous conversion (each buffer carries a 16-bit stamp of its
 * owner's creation count); one long-lived buffer shared once, or the
 * buffers of one message converted together, do not count.
 *
 * Thread records outlive their threads: an exiting thread puts its record
 * on a free list and its buffers stay biased to the record (a later thread
 * that takes the record over owns them; until then other threads convert or
 * take them over as above).  After fork() the child gets back the records
 * of the threads it does not have.
 */
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

#define HEAP_HDR ZBUF__HEAP_HDR
_Static_assert(sizeof(struct zbuf_buf) <= HEAP_HDR, "buffer header must fit its padding");

/* Buffers a thread creates shared after one of its buffers was converted
 * (a variable for the tests, which want every buffer converted). */
static _Atomic uint32_t credit_per_conversion = 64;

struct zbuf__owner zbuf__owner_converting, zbuf__owner_shared;

/* ----------------------------------------------------------- thread records */

static pthread_mutex_t rec_lock = PTHREAD_MUTEX_INITIALIZER;
static struct zbuf__owner *rec_free; /* under rec_lock */
static struct zbuf__owner *rec_all;  /* under rec_lock; never shrinks */
static pthread_once_t bias_once = PTHREAD_ONCE_INIT;
static bool bias_available;          /* membarrier() registered (set once) */
static _Atomic bool bias_on = true;  /* test hook, zbuf__bias_set_enabled() */
static _Atomic uint64_t conversions; /* zbuf__bias_conversions() */
static _Atomic uint64_t takeovers;

static long membarrier(int cmd)
{
    return syscall(__NR_membarrier, cmd, 0, 0);
}

static void fork_prepare(void)
{
    pthread_mutex_lock(&rec_lock);
}

static void fork_parent(void)
{
    pthread_mutex_unlock(&rec_lock);
}

/* In the child only the forking thread exists: every other record is free
 * (a thread that was inside a run at the fork never leaves
 * it, so in_cs is cleared too). */
static void fork_child(void)
{
    struct zbuf__owner *mine = zbuf__ts.owner;
    rec_free = NULL;
    for (struct zbuf__owner *r = rec_all; r; r = r->next_all) {
        if (r == mine)
            continue;
        atomic_store_explicit(&r->in_cs, 0, memory_order_relaxed);
        r->next_free = rec_free;
        rec_free = r;
    }
    pthread_mutex_unlock(&rec_lock);
}

static void bias_init(void)
{
    const char *env = getenv("ZBUF_BIAS");
    if (env != NULL && strcmp(env, "0") == 0)
        return;
    long q = membarrier(MEMBARRIER_CMD_QUERY);
    if (q < 0 || !(q & MEMBARRIER_CMD_PRIVATE_EXPEDITED))
        return;
    if (membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) != 0)
        return;
    if (pthread_atfork(fork_prepare, fork_parent, fork_child) != 0)
        return;
    bias_available = true;
}

struct zbuf__owner *zbuf__owner_self(void)
{
    struct zbuf__owner *r = zbuf__ts.owner;
    if (ZBUF__LIKELY(r != NULL))
        return r;
    pthread_once(&bias_once, bias_init);
    if (!bias_available)
        return NULL;
    zbuf__ts_init(); /* arms the thread-exit hook that gives the record back */
    pthread_mutex_lock(&rec_lock);
    r = rec_free;
    if (r != NULL) {
        rec_free = r->next_free;
    } else if ((r = aligned_alloc(64, sizeof *r)) != NULL) {
        memset(r, 0, sizeof *r);
        r->next_all = rec_all;
        rec_all = r;
    }
    pthread_mutex_unlock(&rec_lock);
    zbuf__ts.owner = r; /* NULL if out of memory: this thread counts shared */
    return r;
}

void zbuf__owner_detach(void)
{
    struct zbuf__owner *r = zbuf__ts.owner;
    if (r == NULL)
        return;
    zbuf__ts.owner = NULL;
    pthread_mutex_lock(&rec_lock);
    r->next_free = rec_free;
    rec_free = r;
    pthread_mutex_unlock(&rec_lock);
}


void zbuf__bias_set_share_credit(uint32_t n)
{
    atomic_store_explicit(&credit_per_conversion, n, memory_order_relaxed);
    pthread_mutex_lock(&rec_lock);
    for (struct zbuf__owner *r = rec_all; r; r = r->next_all) {
        atomic_store_explicit(&r->share_credit, 0, memory_order_relaxed);
        atomic_store_explicit(&r->made_at_conversion, 0, memory_order_relaxed);
    }
    pthread_mutex_unlock(&rec_lock);
}

void zbuf__bias_set_enabled(bool on)
{
    atomic_store_explicit(&bias_on, on, memory_order_relaxed);
}

bool zbuf__bias_enabled(void)
{
    pthread_once(&bias_once, bias_init);
    return bias_available && atomic_load_explicit(&bias_on, memory_order_relaxed);
}

uint64_t zbuf__bias_conversions(void)
{
    return atomic_load_explicit(&conversions, memory_order_relaxed);
}

uint64_t zbuf__bias_takeovers(void)
{
    return atomic_load_explicit(&takeovers, memory_order_relaxed);
}

/* -------------------------------------------------------- reference counts */

void zbuf__buf_count_init(struct zbuf_buf *b)
{
    struct zbuf__owner *me = NULL;
    b->stamp = 0;
    if (atomic_load_explicit(&bias_on, memory_order_relaxed))
        me = zbuf__owner_self();
    if (me != NULL) {
        uint32_t credit = atomic_load_explicit(&me->share_credit, memory_order_relaxed);
        if (credit > 0) {
            atomic_store_explicit(&me->share_credit, credit - 1, memory_order_relaxed);
            me = NULL;
        } else {
            uint32_t made = atomic_load_explicit(&me->made, memory_order_relaxed) + 1;
            atomic_store_explicit(&me->made, made, memory_order_relaxed);
            b->stamp = (uint16_t)made;
        }
    }
    atomic_store_explicit(&b->local, me ? 1 : 0, memory_order_relaxed);
    atomic_store_explicit(&b->shared, me ? 0 : 1, memory_order_relaxed);
    atomic_store_explicit(&b->owner, me ? me : ZBUF__SHARED, memory_order_release);
}

uint32_t zbuf__buf_refs(const struct zbuf_buf *b)
{
    struct zbuf_buf *w = (struct zbuf_buf *)b; /* atomics are loaded, not changed */
    for (;;) {
        struct zbuf__owner *o = atomic_load_explicit(&w->owner, memory_order_acquire);
        if (o == ZBUF__SHARED)
            return (uint32_t)atomic_load_explicit(&w->shared, memory_order_acquire);
        if (o == &zbuf__owner_converting)
            return 2; /* the converting thread and at least one other hold one */
        uint32_t l = atomic_load_explicit(&w->local, memory_order_acquire);
        if (atomic_load_explicit(&w->owner, memory_order_acquire) == o)
            return l;
    }
}

static void backoff(unsigned i)
{
    if (i < 64) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    } else {
        sched_yield();
    }
}

/* Wait until the thread holding `o` cannot be inside a plain update that
 * started before our compare-and-swap (see the file comment). */
static void owner_quiesce(struct zbuf__owner *o)
{
    if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0) {
        /* Registered at start-up and kept across fork(); nothing else
         * unregisters it.  Without the barrier the count could be lost. */
        fprintf(stderr, "zbuf: membarrier() failed after registration: %s\n", strerror(errno));
        abort();
    }
    for (unsigned i = 0; atomic_load_explicit(&o->in_cs, memory_order_acquire) != 0; i++)
        backoff(i);
}

/* Move the count of a buffer biased to `o` into `shared`.  Returns with the
 * buffer shared, or converting by another thread, or (if `o` no longer owns
 * it) untouched: the caller looks again. */
static void convert(struct zbuf_buf *b, struct zbuf__owner *o)
{
    struct zbuf__owner *expect = o;
    if (!atomic_compare_exchange_strong_explicit(&b->owner, &expect, &zbuf__owner_converting,
                                                 memory_order_acq_rel, memory_order_acquire))
        return;
    owner_quiesce(o);
    uint32_t l = atomic_load_explicit(&b->local, memory_order_acquire);
    atomic_store_explicit(&b->shared, (int32_t)l, memory_order_relaxed);
    atomic_store_explicit(&b->owner, ZBUF__SHARED, memory_order_release);
    /* A buffer made after the owner's previous conversion is converted too:
     * the owner keeps handing new buffers to other threads while it holds
     * references, so let its next ones start shared.  (Several buffers of
     * one message converted in a row, or one long-lived buffer, do not
     * count.) */
    uint32_t mark = atomic_load_explicit(&o->made_at_conversion, memory_order_relaxed);
    if (mark != 0 && (int16_t)(uint16_t)(b->stamp - (uint16_t)mark) > 0)
        atomic_store_explicit(&o->share_credit,
                              atomic_load_explicit(&credit_per_conversion, memory_order_relaxed),
                              memory_order_relaxed);
    atomic_store_explicit(&o->made_at_conversion,
                          atomic_load_explicit(&o->made, memory_order_relaxed),
                          memory_order_relaxed);
    atomic_fetch_add_explicit(&conversions, 1, memory_order_relaxed);
}

/*
 * A reference change (delta +1 or -1) on a buffer the fast paths could not
 * handle: biased to another thread, converting, or biased to a record this
 * thread has only just attached (it took over an exited thread's record).
 * Called outside any run.
 */
static void change_slow(struct zbuf_buf *b, int delta)
{
    for (unsigned i = 0;; i++) {
        struct zbuf__owner *o = atomic_load_explicit(&b->owner, memory_order_acquire);
        if (o == ZBUF__SHARED) {
            if (delta > 0)
                atomic_fetch_add_explicit(&b->shared, 1, memory_order_relaxed);
            else if (atomic_fetch_sub_explicit(&b->shared, 1, memory_order_acq_rel) == 1)
                zbuf__buf_release(b);
            return;
        }
        if (o == &zbuf__owner_converting) {
            backoff(i);
            continue;
        }
        struct zbuf__owner *me = zbuf__owner_self();
        if (o == me) {
            struct zbuf__owner *run = zbuf__run_enter();
            bool mine = atomic_load_explicit(&b->owner, memory_order_relaxed) == me;
            uint32_t n = 1;
            if (mine) {
                n = atomic_load_explicit(&b->local, memory_order_relaxed) + (uint32_t)delta;
                atomic_store_explicit(&b->local, n, memory_order_release);
            }
            zbuf__run_leave(run);
            if (!mine)
                continue;
            if (n == 0)
                zbuf__buf_release(b);
            return;
        }
        /* Biased to another thread, running or gone.  All references are
         * in `local` while that lasts; if it reads 1 the one is ours, and
         * nobody else can touch the buffer any more. */
        uint32_t l = atomic_load_explicit(&b->local, memory_order_acquire);
        if (l == 1 && atomic_load_explicit(&b->owner, memory_order_acquire) == o) {
            if (delta < 0) {
                zbuf__buf_release(b);
                return;
            }
            if (me != NULL) {
                atomic_store_explicit(&b->local, 2, memory_order_relaxed);
                b->stamp = (uint16_t)atomic_load_explicit(&me->made, memory_order_relaxed);
            } else
                atomic_store_explicit(&b->shared, 2, memory_order_relaxed);
            atomic_store_explicit(&b->owner, me ? me : ZBUF__SHARED, memory_order_release);
            atomic_fetch_add_explicit(&takeovers, 1, memory_order_relaxed);
            return;
        }
        convert(b, o);
    }
}

/* Leave every run this thread is in (for work that may wait or call user
 * code), and come back. */
static uint32_t run_suspend(struct zbuf__owner *me)
{
    if (me == NULL)
        return 0;
    atomic_signal_fence(memory_order_seq_cst);
    uint32_t n = atomic_load_explicit(&me->in_cs, memory_order_relaxed);
    atomic_store_explicit(&me->in_cs, 0, memory_order_release);
    return n;
}

static void run_resume(struct zbuf__owner *me, uint32_t n)
{
    if (me == NULL)
        return;
    atomic_store_explicit(&me->in_cs, n, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
}

void zbuf__ref_slow(struct zbuf__owner *me, struct zbuf_buf *b, int delta)
{
    uint32_t n = run_suspend(me);
    change_slow(b, delta);
    run_resume(me, n);
}

void zbuf__ref_release(struct zbuf__owner *me, struct zbuf_buf *b)
{
    uint32_t n = run_suspend(me);
    zbuf__buf_release(b);
    run_resume(me, n);
}

/* ------------------------------------------------------------------ kinds */

struct zbuf_buf *zbuf__buf_new_heap(size_t size)
{
    if (size > SIZE_MAX - HEAP_HDR)
        return NULL;
    struct zbuf_buf *b = zbuf__heap_is_small(size) ? zbuf__small_alloc()
                                                   : zbuf__alloc(HEAP_HDR + size);
    if (b == NULL)
        return NULL;
    zbuf__buf_count_init(b);
    b->kind = ZBUF__BUF_HEAP;
    b->cb2 = 0;
    b->base = (uint8_t *)b + HEAP_HDR;
    b->size = size;
    ZBUF__COUNT(bufs, 1);
    return b;
}

static struct zbuf_buf *new_user(uint8_t kind, void *data, size_t size, void (*cb)(void),
                                 bool cb2, void *arg, void *arg2)
{
    struct zbuf_buf *b = zbuf__alloc(sizeof *b);
    if (b == NULL)
        return NULL;
    zbuf__buf_count_init(b);
    b->kind = kind;
    b->cb2 = cb2;
    b->fd = -1;
    b->base = data;
    b->size = size;
    b->u.user.cb = cb;
    b->u.user.arg = arg;
    b->u.user.x.arg2 = arg2;
    ZBUF__COUNT(bufs, 1);
    return b;
}

/* Called when the last reference is gone. */
void zbuf__buf_release(struct zbuf_buf *b)
{
    ZBUF__COUNT(bufs, -1);
    switch (b->kind) {
    case ZBUF__BUF_HEAP:
        if (zbuf__heap_is_small(b->size))
            zbuf__small_free(b);
        else
            zbuf__free(b, HEAP_HDR + b->size);
        break;
    case ZBUF__BUF_POOL:
        zbuf__pool_put(b);
        break;
    default: {
        /* Free our header first: the callback may re-enter the library. */
        void (*cb)(void) = b->u.user.cb;
        bool two = b->cb2;
        void *arg = b->u.user.arg, *arg2 = b->u.user.x.arg2, *data = b->base;
        size_t size = b->size;
        zbuf__free(b, sizeof *b);
        if (cb == NULL)
            break;
        if (two)
            ((zbuf_release2_cb)cb)(data, size, arg, arg2);
        else
            ((zbuf_release_cb)cb)(data, size, arg);
        break;
    }
    }
}

struct zbuf_buf *zbuf__buf_new_user(void *data, size_t size, zbuf_release_cb cb, void *arg)
{
    return new_user(ZBUF__BUF_USER, data, size, (void (*)(void))cb, false, arg, NULL);
}

struct zbuf_buf *zbuf__buf_new_user2(void *data, size_t size, zbuf_release2_cb cb, void *arg,
                                     void *arg2)
{
    return new_user(ZBUF__BUF_USER, data, size, (void (*)(void))cb, true, arg, arg2);
}

int zbuf_buf_alloc(size_t size, zbuf_buf_t **out)
{
    if (size == 0 || out == NULL)
        return -EINVAL;
    struct zbuf_buf *b = zbuf__buf_new_heap(size);
    if (b == NULL)
        return -ENOMEM;
    *out = b;
    return 0;
}

int zbuf_buf_wrap(void *data, size_t size, zbuf_release_cb cb, void *arg, zbuf_buf_t **out)
{
    if (data == NULL || size == 0 || out == NULL)
        return -EINVAL;
    struct zbuf_buf *b = zbuf__buf_new_user(data, size, cb, arg);
    if (b == NULL)
        return -ENOMEM;
    *out = b;
    return 0;
}

int zbuf_buf_wrap2(void *data, size_t size, zbuf_release2_cb cb, void *arg, void *arg2,
                   zbuf_buf_t **out)
{
    if (data == NULL || size == 0 || out == NULL)
        return -EINVAL;
    struct zbuf_buf *b = zbuf__buf_new_user2(data, size, cb, arg, arg2);
    if (b == NULL)
        return -ENOMEM;
    *out = b;
    return 0;
}

int zbuf_buf_wrap_file(int fd, off_t offset, size_t size, zbuf_release_cb cb, void *arg,
                       zbuf_buf_t **out)
{
    if (fd < 0 || offset < 0 || size == 0 || out == NULL)
        return -EINVAL;
    struct zbuf_buf *b = new_user(ZBUF__BUF_FILE, NULL, size, (void (*)(void))cb, false, arg,
                                  NULL);
    if (b == NULL)
        return -ENOMEM;
    b->fd = fd;
    b->u.user.x.foff = offset;
    *out = b;
    return 0;
}

zbuf_buf_t *zbuf_buf_ref(zbuf_buf_t *b)
{
    if (b)
        zbuf__buf_get(b);
    return b;
}

void zbuf_buf_unref(zbuf_buf_t *b)
{
    if (b)
        zbuf__buf_put(b);
}

void *zbuf_buf_data(const zbuf_buf_t *b)
{
    return b ? b->base : NULL;
}

size_t zbuf_buf_size(const zbuf_buf_t *b)
{
    return b ? b->size : 0;
}

unsigned zbuf_buf_refs(const zbuf_buf_t *b)
{
    return b ? zbuf__buf_refs(b) : 0;
}

bool zbuf_buf_writable(const zbuf_buf_t *b)
{
    return b && zbuf__buf_is_private(b);
}

bool zbuf_buf_file(const zbuf_buf_t *b, int *fd, off_t *offset)
{
    if (b == NULL || b->kind != ZBUF__BUF_FILE)
        return false;
    if (fd)
        *fd = b->fd;
    if (offset)
        *offset = b->u.user.x.foff;
    return true;
}

int zbuf__buf_read(const struct zbuf_buf *b, size_t boff, void *dst, size_t len)
{
    if (b->kind != ZBUF__BUF_FILE) {
        memcpy(dst, b->base + boff, len);
        return 0;
    }
    uint8_t *p = dst;
    off_t where = b->u.user.x.foff + (off_t)boff;
    while (len > 0) {
        ssize_t n = pread(b->fd, p, len, where);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -EIO; /* error, or the file shrank under us */
        p += n;
        where += n;
        len -= (size_t)n;
    }
    return 0;
}
