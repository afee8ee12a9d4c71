/* SPDX-License-Identifier: MIT */
/*
 * Per-loop accounting: one record per libuv loop that has adapter streams,
 * so that zbuf_uv_stats() can say what the streams of a loop hold.
 *
 * libuv has no slot for a library's per-loop data (loop->data is the
 * application's), so the records sit in a process-wide list under a lock,
 * searched only when a stream attaches (its first call that needs the
 * record) and by zbuf_uv_stats().  Each stream keeps a pointer to its
 * record, so the hot paths (a write queued or completed) never search.  A
 * record counts the streams attached to it whose close has not completed,
 * and goes with the last of them: by then their pending writes have
 * completed (libuv cancels them before the close callback), so nothing
 * points at it any more.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "uv_internal.h"

static pthread_mutex_t loops_lock = PTHREAD_MUTEX_INITIALIZER;
static struct zbuf_uv_loop_ *loops; /* under loops_lock */

/* Under loops_lock. */
static struct zbuf_uv_loop_ *find_loop(const uv_loop_t *loop)
{
    struct zbuf_uv_loop_ *l = loops;
    while (l != NULL && l->loop != loop)
        l = l->next;
    return l;
}

int zbuf_uv__attach(zbuf_uv_stream_t *zs)
{
    if (zs->loop_ != NULL)
        return 0;
    pthread_mutex_lock(&loops_lock);
    struct zbuf_uv_loop_ *l = find_loop(zs->handle.loop);
    if (l == NULL && (l = calloc(1, sizeof(*l))) != NULL) {
        l->loop = zs->handle.loop;
        l->writes.prev = l->writes.next = &l->writes;
        l->next = loops;
        loops = l;
    }
    if (l != NULL)
        l->refs++;
    pthread_mutex_unlock(&loops_lock);
    if (l == NULL)
        return -ENOMEM;
    zs->loop_ = l;
    zs->lprev_ = NULL;
    zs->lnext_ = l->streams;
    if (l->streams != NULL)
        l->streams->lprev_ = zs;
    l->streams = zs;
    return 0;
}

void zbuf_uv__detach(zbuf_uv_stream_t *zs)
{
    struct zbuf_uv_loop_ *l = zs->loop_;
    if (l == NULL)
        return;
    *(zs->lprev_ != NULL ? &zs->lprev_->lnext_ : &l->streams) = zs->lnext_;
    if (zs->lnext_ != NULL)
        zs->lnext_->lprev_ = zs->lprev_;
    zs->lprev_ = zs->lnext_ = NULL;
}

void zbuf_uv__release(zbuf_uv_stream_t *zs)
{
    struct zbuf_uv_loop_ *l = zs->loop_;
    if (l == NULL)
        return;
    zs->loop_ = NULL;
    pthread_mutex_lock(&loops_lock);
    bool last = --l->refs == 0;
    if (last) {
        struct zbuf_uv_loop_ **pl = &loops;
        while (*pl != l)
            pl = &(*pl)->next;
        *pl = l->next;
    }
    pthread_mutex_unlock(&loops_lock);
    if (last)
        free(l);
}

int zbuf_uv_stats(const uv_loop_t *loop, zbuf_uv_stats_t *st)
{
    if (loop == NULL || st == NULL)
        return -EINVAL;
    memset(st, 0, sizeof(*st));
    /* The record can only go on this (the loop's) thread, when a close
     * completes: it stays valid after the lock is dropped. */
    pthread_mutex_lock(&loops_lock);
    struct zbuf_uv_loop_ *l = find_loop(loop);
    pthread_mutex_unlock(&loops_lock);
    if (l == NULL)
        return 0;
    for (const zbuf_uv_stream_t *zs = l->streams; zs != NULL; zs = zs->lnext_) {
        st->streams++;
        zbuf_uv__read_stats(zs, st);
    }
    st->write_reqs = l->nwrites;
    st->write_bytes = l->write_bytes;
    return zbuf_uv__write_mem(l, st);
}
