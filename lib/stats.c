/*
 * Counters.  Each thread counts into a block of its own, registered in a
 * global list on first use, so counting is a plain load and store with no
 * shared cache line.  zbuf_stats_get() adds the blocks up; a thread that exits
 * folds its block into the `retired` totals first.
 */
#include <pthread.h>

#include "internal.h"

__thread struct zbuf__counters *zbuf__ctr_tls __attribute__((tls_model("initial-exec")));

struct ctr_node {
    struct zbuf__counters c; /* first: zbuf__ctr_tls points here */
    struct ctr_node *next;
    struct ctr_node *prev;
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ctr_node *reg_head;   /* live threads' blocks, under reg_lock */
static zbuf_stats_t retired;        /* exited threads' totals, under reg_lock */
static pthread_key_t ctr_key;
static pthread_once_t ctr_key_once = PTHREAD_ONCE_INIT;

#define LOAD(f) atomic_load_explicit(&(f), memory_order_relaxed)

static void add_block(zbuf_stats_t *st, struct zbuf__counters *c)
{
    st->bytes_copied += LOAD(c->bytes_copied);
    st->copies += LOAD(c->copies);
    st->allocs += LOAD(c->allocs);
    st->live_zbufs += LOAD(c->zbufs);
    st->live_segs += LOAD(c->segs);
    st->live_bufs += LOAD(c->bufs);
    st->live_pools += LOAD(c->pools);
}

static void ctr_thread_exit(void *p)
{
    struct ctr_node *n = p;
    pthread_mutex_lock(&reg_lock);
    add_block(&retired, &n->c);
    if (n->prev)
        n->prev->next = n->next;
    else
        reg_head = n->next;
    if (n->next)
        n->next->prev = n->prev;
    pthread_mutex_unlock(&reg_lock);
    zbuf__ctr_tls = NULL;
    free(n); /* counters live outside the zbuf allocator: they outlast it */
}

static void ctr_key_init(void)
{
    if (pthread_key_create(&ctr_key, ctr_thread_exit) != 0)
        abort(); /* only when the process is out of keys: nothing sane to do */
}

struct zbuf__counters *zbuf__ctr_slow(void)
{
    struct ctr_node *n = calloc(1, sizeof *n);
    if (n == NULL) {
        /* Counting must not fail a data path; fold into a shared block. */
        static struct zbuf__counters overflow;
        return &overflow;
    }
    pthread_once(&ctr_key_once, ctr_key_init);
    pthread_mutex_lock(&reg_lock);
    n->next = reg_head;
    if (reg_head)
        reg_head->prev = n;
    reg_head = n;
    pthread_mutex_unlock(&reg_lock);
    pthread_setspecific(ctr_key, n);
    zbuf__ctr_tls = &n->c;
    return &n->c;
}

void zbuf_stats_get(zbuf_stats_t *st)
{
    if (st == NULL)
        return;
    pthread_mutex_lock(&reg_lock);
    *st = retired;
    for (struct ctr_node *n = reg_head; n; n = n->next)
        add_block(st, &n->c);
    pthread_mutex_unlock(&reg_lock);
}

void zbuf_stats_count_copy(size_t n)
{
    zbuf__count_copy(n);
}

bool zbuf__anything_live(void)
{
    zbuf_stats_t st;
    zbuf_stats_get(&st);
    return st.live_zbufs || st.live_segs || st.live_bufs || st.live_pools;
}
