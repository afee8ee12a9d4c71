/* SPDX-License-Identifier: MIT */
/*
 * Counters.  Each thread counts into the block inside its own thread state
 * (internal.h), registered here on first use, so counting never touches a
 * shared cache line.  zbuf_stats_get() adds the blocks up; a thread that
 * exits folds its block into the `retired` totals first.
 */
#include <pthread.h>

#include "internal.h"

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct zbuf__tstate *reg_head; /* live threads, under reg_lock */
static struct {                       /* exited threads, under reg_lock */
    uint64_t bytes_copied, copies, allocs;
    int64_t segs, zbufs, bufs, pools;
} retired;

#define L ZBUF__LOAD

static void fold(zbuf_stats_t *st, struct zbuf__counters *c)
{
    st->bytes_copied += L(c->bytes_copied);
    st->copies += L(c->copies);
    st->allocs += L(c->allocs);
    st->live_segs += L(c->seg_new) - L(c->seg_del) - L(c->seg_cached);
    st->live_zbufs += L(c->hdr_new) - L(c->hdr_del) - L(c->hdr_cached);
    st->live_bufs += L(c->bufs);
    st->live_pools += L(c->pools);
}

void zbuf__ts_register(struct zbuf__tstate *t)
{
    pthread_mutex_lock(&reg_lock);
    t->reg_prev = NULL;
    t->reg_next = reg_head;
    if (reg_head)
        reg_head->reg_prev = t;
    reg_head = t;
    pthread_mutex_unlock(&reg_lock);
}

void zbuf__ts_unregister(struct zbuf__tstate *t)
{
    zbuf_stats_t st = {0};
    pthread_mutex_lock(&reg_lock);
    fold(&st, &t->ctr);
    retired.bytes_copied += st.bytes_copied;
    retired.copies += st.copies;
    retired.allocs += st.allocs;
    retired.segs += st.live_segs;
    retired.zbufs += st.live_zbufs;
    retired.bufs += st.live_bufs;
    retired.pools += st.live_pools;
    if (t->reg_prev)
        t->reg_prev->reg_next = t->reg_next;
    else
        reg_head = t->reg_next;
    if (t->reg_next)
        t->reg_next->reg_prev = t->reg_prev;
    pthread_mutex_unlock(&reg_lock);
    memset(&t->ctr, 0, sizeof t->ctr); /* folded: a later use starts from zero */
}

void zbuf_stats_get(zbuf_stats_t *st)
{
    if (st == NULL)
        return;
    memset(st, 0, sizeof *st);
    pthread_mutex_lock(&reg_lock);
    st->bytes_copied = retired.bytes_copied;
    st->copies = retired.copies;
    st->allocs = retired.allocs;
    st->live_segs = retired.segs;
    st->live_zbufs = retired.zbufs;
    st->live_bufs = retired.bufs;
    st->live_pools = retired.pools;
    for (struct zbuf__tstate *t = reg_head; t; t = t->reg_next)
        fold(st, &t->ctr);
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
