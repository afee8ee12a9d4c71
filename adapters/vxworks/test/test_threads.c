/* SPDX-License-Identifier: MIT */
/*
 * VxWorks free routines across threads (biased reference counting, see
 * test/test_threads_handover.c for the core's cases): a zbuf made with
 * zbufInsertBuf() on one thread, dup'ed and deleted on another, the last
 * reference dropped by either in a race.  The free routine must run exactly
 * once, with its address and argument, inside the zbufDelete() that dropped
 * the last reference.  Labels "vxworks" and "threads" (ThreadSanitizer in
 * CI; see test/zt_tsan.h for the TSan build's own main()).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include <zbuf/vxworks.h>

#include "internal.h"
#include "support.h"
#include "zt_tsan.h"

#ifndef ZT_UNDER_TSAN
ZT_SUITE(vxthreads);
#endif

/* Which test thread runs (2 for the dropper), and whether it is inside a
 * library call that may drop a last reference. */
static __thread int tid;
static __thread int in_call;

struct vx_case {
    char buf[300];
    atomic_int runs, bad, thread, inside;
    ZBUF_ID z[3];
    pthread_barrier_t b;
};

static void vx_free(caddr_t buf, intptr_t arg)
{
    struct vx_case *c = (struct vx_case *)arg;
    if (buf != c->buf)
        atomic_fetch_add(&c->bad, 1);
    atomic_store(&c->thread, tid);
    atomic_store(&c->inside, in_call);
    atomic_fetch_add(&c->runs, 1);
}

static void *vx_dropper(void *arg)
{
    struct vx_case *c = arg;
    tid = 2;
    pthread_barrier_wait(&c->b);
    ZBUF_ID d = zbufDup(c->z[1], NULL, 10, 50);
    T_CHECK(d != NULL, "zbufDup on another thread");
    in_call = 1;
    T_CHECK(zbufDelete(d) == OK, "zbufDelete");
    in_call = 0;
    pthread_barrier_wait(&c->b);
    in_call = 1;
    T_CHECK(zbufDelete(c->z[1]) == OK, "zbufDelete");
    in_call = 0;
    return NULL;
}

ZT_TSAN_TEST(vxthreads, free_routine_runs_once_on_the_last_thread)
{
    zbuf__bias_set_share_credit(0);
    for (int r = 0; r < 50; r++) {
        struct vx_case *c = calloc(1, sizeof *c);
        T_OK(pthread_barrier_init(&c->b, NULL, 2));
        pthread_t th;
        T_OK(pthread_create(&th, NULL, vx_dropper, c));
        c->z[0] = zbufCreate();
        T_CHECK(zbufInsertBuf(c->z[0], NULL, 0, c->buf, sizeof c->buf,
                              (VOIDFUNCPTR)vx_free, (intptr_t)c) != NULL,
                "zbufInsertBuf");
        c->z[1] = zbufDup(c->z[0], NULL, 0, -1);
        T_CHECK(c->z[1] != NULL, "zbufDup");
        pthread_barrier_wait(&c->b);
        pthread_barrier_wait(&c->b);
        in_call = 1;
        T_CHECK(zbufDelete(c->z[0]) == OK, "zbufDelete"); /* races with the other's */
        in_call = 0;
        T_OK(pthread_join(th, NULL));
        T_CHECK(atomic_load(&c->runs) == 1, "round %d: the free routine ran %d times", r,
                atomic_load(&c->runs));
        T_CHECK(atomic_load(&c->bad) == 0 && atomic_load(&c->inside) == 1,
                "the free routine got a wrong address or ran outside zbufDelete");
        pthread_barrier_destroy(&c->b);
        free(c);
    }
    zbuf__bias_set_share_credit(64);
}

#ifdef ZT_UNDER_TSAN
int main(void)
{
    static const zt_tsan_case_t tests[] = {
        {"free_routine_runs_once_on_the_last_thread", free_routine_runs_once_on_the_last_thread},
    };
    return zt_tsan_run("vxthreads", tests, sizeof tests / sizeof tests[0]);
}
#endif
