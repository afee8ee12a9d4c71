/* SPDX-License-Identifier: MIT */
/*
 * Pool exhaustion, event-driven: a reader paused on a dry pool sleeps (no
 * timer, no polling) until a buffer comes back, resumes in the same loop
 * iteration as that return, and readers sharing a pool (streams and UDP
 * handles) resume in the order they paused, each taking a buffer, while the
 * others keep waiting.  Closing or stopping a paused reader unregisters it;
 * a wake-up pending on it goes to the next reader of the loop.  Cross-thread
 * returns are in test_uv_pause_thread.c (run under TSan too).
 *
 * Most tests take every buffer of the pool themselves first, so that a
 * reader pauses at its first read and the test decides exactly when, and how
 * many, buffers come back (zbuf_buf_unref() of its own references).
 */
#include <stdlib.h>
#include <string.h>

#include "uvt.h"

UVT_SUITE(uv_pause);

#define NBUFS 2

struct dry_pool {
    zbuf_pool_t *pool;
    zbuf_buf_t *taken[NBUFS]; /* the test's references, NULL once given back */
};

/* A pool of NBUFS buffers, all taken by the test. */
static void dry_open(struct dry_pool *d)
{
    cr_assert_eq(zbuf_pool_create(1024, NBUFS, &d->pool), 0);
    for (int i = 0; i < NBUFS; i++)
        cr_assert_eq(zbuf_pool_get(d->pool, &d->taken[i]), 0);
    cr_assert_eq(zbuf_pool_available(d->pool), 0);
}

static void dry_give_back(struct dry_pool *d, int i)
{
    zbuf_buf_unref(d->taken[i]);
    d->taken[i] = NULL;
}

static void dry_close(struct dry_pool *d)
{
    for (int i = 0; i < NBUFS; i++)
        if (d->taken[i] != NULL)
            dry_give_back(d, i);
    cr_assert_eq(zbuf_pool_available(d->pool), NBUFS, "every buffer came home");
    zbuf_pool_delete(d->pool);
}

/* Send len bytes of stream `seed` on p->a and run until p->b, reading into
 * k from pool, reports UV_ENOBUFS. */
static void pause_on(struct uvt_pair *p, struct uvt_sink *k, zbuf_pool_t *pool, size_t len,
                     uint32_t seed)
{
    const size_t sizes[] = {len};
    uvt_sink_start(&p->b, k, pool);
    cr_assert_eq(zbuf_uv_write(&p->a.stream, uvt_make(len, seed, 0, sizes, 1, NULL), NULL, NULL),
                 0);
    uvt_run_until(&k->enobufs, 5000, "UV_ENOBUFS");
    cr_assert(zbuf_uv_read_paused(&p->b));
    cr_assert_eq(k->len, 0, "nothing read from a dry pool");
}

/* ------------------------------------------- the loop sleeps while paused */

struct iter_probe {
    uv_prepare_t prepare;
    uv_check_t check;
    uv_timer_t release, bound;
    struct dry_pool *dry;
    zbuf_uv_stream_t *reader;
    int iters;         /* prepare callbacks: loop iterations */
    int release_iter;  /* iters when the buffer was given back */
    int resumed_iter;  /* iters at the first check phase that saw the reader resumed */
    int closed;
};

static void probe_prepare(uv_prepare_t *h)
{
    ((struct iter_probe *)h->data)->iters++;
}

static void probe_check(uv_check_t *h)
{
    struct iter_probe *pr = h->data;
    if (pr->release_iter >= 0 && pr->resumed_iter < 0 && !zbuf_uv_read_paused(pr->reader))
        pr->resumed_iter = pr->iters;
}

static void probe_release(uv_timer_t *h)
{
    struct iter_probe *pr = h->data;
    pr->release_iter = pr->iters;
    dry_give_back(pr->dry, 0); /* on the loop thread: the notify runs right here */
}

static void probe_bound(uv_timer_t *h)
{
    (void)h; /* only ends a uv_run(UV_RUN_ONCE) if nothing else does */
}

static void probe_closed(uv_handle_t *h)
{
    ((struct iter_probe *)h->data)->closed++;
}

Test(uv_pause, a_paused_reader_sleeps_and_resumes_in_the_iteration_of_the_return)
{
    struct dry_pool dry;
    struct uvt_pair p;
    struct uvt_sink sink = {0};
    struct iter_probe pr = {.dry = &dry, .reader = &p.b, .release_iter = -1, .resumed_iter = -1};
    dry_open(&dry);
    uvt_pair_open(&p, UVT_UNIX);
    pause_on(&p, &sink, dry.pool, 100, 31);

    pr.prepare.data = pr.check.data = pr.release.data = pr.bound.data = &pr;
    cr_assert_eq(uv_prepare_init(uvt_loop, &pr.prepare), 0);
    cr_assert_eq(uv_check_init(uvt_loop, &pr.check), 0);
    cr_assert_eq(uv_timer_init(uvt_loop, &pr.release), 0);
    cr_assert_eq(uv_timer_init(uvt_loop, &pr.bound), 0);
    cr_assert_eq(uv_prepare_start(&pr.prepare, probe_prepare), 0);
    cr_assert_eq(uv_check_start(&pr.check, probe_check), 0);
    cr_assert_eq(uv_timer_start(&pr.release, probe_release, 200, 0), 0);
    cr_assert_eq(uv_timer_start(&pr.bound, probe_bound, 5000, 0), 0);
    uint64_t t0 = uv_hrtime();
    while (pr.resumed_iter < 0 && uv_hrtime() - t0 < 5000000000u)
        uv_run(uvt_loop, UV_RUN_ONCE);

    cr_assert_geq(pr.release_iter, 0, "the release timer fired");
    /* A 1 ms polling timer would have woken the loop about 200 times. */
    cr_assert_leq(pr.release_iter, 3, "%d loop iterations in 200 ms of pause: the loop polls",
                  pr.release_iter);
    cr_assert_eq(pr.resumed_iter, pr.release_iter + 1,
                 "resumed %d iterations after the buffer came back, not in the same one",
                 pr.resumed_iter - pr.release_iter - 1);
    uvt_sink_wait(&sink, 100, 5000);
    uvt_sink_expect(&sink, 100, 31);
    cr_assert_eq(sink.enobufs, 1);

    uv_close((uv_handle_t *)&pr.prepare, probe_closed);
    uv_close((uv_handle_t *)&pr.check, probe_closed);
    uv_close((uv_handle_t *)&pr.release, probe_closed);
    uv_close((uv_handle_t *)&pr.bound, probe_closed);
    uvt_pair_close(&p);
    cr_assert_eq(pr.closed, 4);
    uvt_sink_free(&sink);
    dry_close(&dry);
}

Test(uv_pause, a_paused_reader_keeps_the_loop_alive_until_stopped)
{
    struct dry_pool dry;
    struct uvt_pair p;
    struct uvt_sink sink = {0};
    dry_open(&dry);
    uvt_pair_open(&p, UVT_UNIX);
    pause_on(&p, &sink, dry.pool, 100, 32);
    cr_assert(uv_loop_alive(uvt_loop), "a paused reader still wants its bytes");
    cr_assert_eq(zbuf_uv_read_stop(&p.b), 0);
    cr_assert(!zbuf_uv_read_paused(&p.b));
    cr_assert(!uv_loop_alive(uvt_loop), "a stopped reader does not hold the loop");
    dry_give_back(&dry, 0);
    uvt_run_for(30);
    cr_assert_eq(sink.len, 0, "no read after stop");
    cr_assert_eq(sink.enobufs, 1);
    cr_assert_eq(zbuf_pool_available(dry.pool), 1, "the stopped reader took no buffer");

    /* Reading again: served at once by the buffer that is free. */
    uvt_sink_start(&p.b, &sink, dry.pool);
    uvt_sink_wait(&sink, 100, 5000);
    uvt_sink_expect(&sink, 100, 32);
    uvt_pair_close(&p);
    uvt_sink_free(&sink);
    dry_close(&dry);
}

/* ------------------------------------------- readers sharing one pool */

/* Two readers on one dry pool: stream i of kind kinds[i] carries len bytes
 * of stream seed + i; they pause in the order first, 1 - first. */
struct two_readers {
    struct dry_pool dry;
    struct uvt_pair p[2];
    struct uvt_sink sink[2];
};

static void two_pause(struct two_readers *t, const enum uvt_kind kinds[2], int first, size_t len,
                      uint32_t seed)
{
    dry_open(&t->dry);
    for (int i = 0; i < 2; i++) {
        t->sink[i] = (struct uvt_sink){.hold = true};
        uvt_pair_open(&t->p[i], kinds[i]);
    }
    for (int k = 0; k < 2; k++) {
        int i = k == 0 ? first : 1 - first;
        pause_on(&t->p[i], &t->sink[i], t->dry.pool, len, seed + (uint32_t)i);
    }
}

static void two_close(struct two_readers *t)
{
    for (int i = 0; i < 2; i++) {
        uvt_pair_close(&t->p[i]);
        uvt_sink_free(&t->sink[i]);
    }
    dry_close(&t->dry);
}

Test(uv_pause, readers_sharing_a_pool_resume_in_the_order_they_paused)
{
    static const enum uvt_kind kinds[2] = {UVT_UNIX, UVT_TCP};
    for (int first = 0; first < 2; first++) {
        struct two_readers t;
        int second = 1 - first;
        two_pause(&t, kinds, first, 100, 40);

        /* One buffer: the reader that paused first takes it, the other
         * keeps waiting (the pool is dry again). */
        dry_give_back(&t.dry, 0);
        uvt_sink_wait(&t.sink[first], 100, 5000);
        uvt_run_for(30);
        uvt_sink_expect(&t.sink[first], 100, 40 + (uint32_t)first);
        cr_assert(!zbuf_uv_read_paused(&t.p[first].b));
        cr_assert(zbuf_uv_read_paused(&t.p[second].b), "stream %d paused second, served first",
                  second);
        cr_assert_eq(t.sink[second].len, 0);

        dry_give_back(&t.dry, 1);
        uvt_sink_wait(&t.sink[second], 100, 5000);
        uvt_sink_expect(&t.sink[second], 100, 40 + (uint32_t)second);
        cr_assert_eq(t.sink[0].enobufs + t.sink[1].enobufs, 2, "one notice per pause");
        two_close(&t);
    }
}

Test(uv_pause, buffers_returned_together_resume_every_reader)
{
    static const enum uvt_kind kinds[2] = {UVT_UNIX, UVT_UNIX};
    struct two_readers t;
    two_pause(&t, kinds, 0, 300, 50);
    dry_give_back(&t.dry, 0); /* 0 -> 1: the notification */
    dry_give_back(&t.dry, 1); /* 1 -> 2: none; the same wake-up serves both */
    for (int i = 0; i < 2; i++) {
        uvt_sink_wait(&t.sink[i], 300, 5000);
        uvt_sink_expect(&t.sink[i], 300, 50 + (uint32_t)i);
    }
    two_close(&t);
}

/* A UDP handle paused on the same pool as a stream. */
struct dgram_box {
    zbuf_t *got;
    int n, enobufs, errors;
};

static void on_dgram(zbuf_uv_udp_t *u, ssize_t status, zbuf_t *z, const struct sockaddr *addr,
                     unsigned flags)
{
    (void)addr;
    (void)flags;
    struct dgram_box *b = u->handle.data;
    if (status == UV_ENOBUFS)
        b->enobufs++;
    else if (status < 0)
        b->errors++;
    else if (z != NULL) {
        cr_assert_null(b->got, "one datagram expected");
        b->got = z;
        b->n++;
    }
}

static int udp_closed;

static void on_udp_closed(uv_handle_t *h)
{
    (void)h;
    udp_closed++;
}

Test(uv_pause, a_stream_and_a_udp_handle_share_a_pool_in_pause_order)
{
    struct dry_pool dry;
    struct uvt_pair p;
    struct uvt_sink sink = {.hold = true};
    zbuf_uv_udp_t tx, rx;
    struct dgram_box box = {0};
    struct sockaddr_in a;
    struct sockaddr_storage rx_addr;
    int alen = sizeof(rx_addr);
    dry_open(&dry);

    cr_assert_eq(uv_ip4_addr("127.0.0.1", 0, &a), 0);
    cr_assert_eq(uv_udp_init(uvt_loop, &tx.udp), 0);
    cr_assert_eq(uv_udp_init(uvt_loop, &rx.udp), 0);
    cr_assert_eq(zbuf_uv_udp_init(&tx), 0);
    cr_assert_eq(zbuf_uv_udp_init(&rx), 0);
    cr_assert_eq(uv_udp_bind(&rx.udp, (const struct sockaddr *)&a, 0), 0);
    cr_assert_eq(uv_udp_getsockname(&rx.udp, (struct sockaddr *)&rx_addr, &alen), 0);
    rx.handle.data = &box;
    cr_assert_eq(zbuf_uv_udp_recv_start(&rx, dry.pool, on_dgram), 0);
    const size_t sizes[] = {64};
    cr_assert_eq(zbuf_uv_udp_send(&tx.udp, uvt_make(64, 60, 0, sizes, 1, NULL),
                                  (const struct sockaddr *)&rx_addr, NULL, NULL),
                 0);
    uvt_run_until(&box.enobufs, 5000, "UV_ENOBUFS on UDP");

    uvt_pair_open(&p, UVT_UNIX);
    pause_on(&p, &sink, dry.pool, 100, 61);

    dry_give_back(&dry, 0);
    uvt_run_until(&box.n, 5000, "the datagram");
    uvt_run_for(30);
    cr_assert(zbuf_uv_read_paused(&p.b), "the stream paused after the UDP handle");
    cr_assert_eq(sink.len, 0);
    uint8_t first;
    cr_assert_eq(zbuf_length(box.got), 64);
    cr_assert_eq(zbuf_copyout(box.got, 0, &first, 1), 1);
    cr_assert_eq(first, uvt_byte(60, 0));

    dry_give_back(&dry, 1);
    uvt_sink_wait(&sink, 100, 5000);
    uvt_sink_expect(&sink, 100, 61);
    /* libuv asks for a buffer again right after a datagram: the handle
     * may have paused a second time, behind the stream. */
    cr_assert(box.enobufs == 1 || box.enobufs == 2, "%d pauses", box.enobufs);
    cr_assert_eq(box.errors, 0);

    zbuf_delete(box.got);
    udp_closed = 0;
    zbuf_uv_udp_close(&tx, on_udp_closed);
    zbuf_uv_udp_close(&rx, on_udp_closed);
    uvt_pair_close(&p);
    uvt_run_for(10);
    cr_assert_eq(udp_closed, 2);
    uvt_sink_free(&sink);
    dry_close(&dry);
}

/* ------------------------------------------- closing paused readers */

static int heap_closed;

static void on_heap_closed(uv_handle_t *h)
{
    (void)h;
    heap_closed++;
}

/* Close a heap-allocated pair whose reader is paused and free its memory
 * as soon as both close callbacks ran: any later touch is a use after free
 * for ASan. */
static void close_and_free(struct uvt_pair *hp)
{
    heap_closed = 0;
    zbuf_uv_close(&hp->b, on_heap_closed);
    zbuf_uv_close(&hp->a, on_heap_closed);
    for (int i = 0; i < 100 && heap_closed < 2; i++)
        uv_run(uvt_loop, UV_RUN_NOWAIT);
    cr_assert_eq(heap_closed, 2);
    free(hp);
}

/* Two readers paused on one pool, the first (on the heap) closed and freed:
 * the second must get the buffers, before or after the close. */
static void close_the_first_of_two(bool give_back_before_close, uint32_t seed)
{
    struct dry_pool dry;
    struct uvt_pair *hp = malloc(sizeof(*hp)), p;
    struct uvt_sink hsink = {0}, sink = {.hold = true};
    cr_assert_not_null(hp);
    dry_open(&dry);
    uvt_pair_open(hp, UVT_UNIX);
    uvt_pair_open(&p, UVT_UNIX);
    pause_on(hp, &hsink, dry.pool, 100, seed);
    pause_on(&p, &sink, dry.pool, 100, seed + 1);
    if (give_back_before_close)
        dry_give_back(&dry, 0);
    close_and_free(hp);
    if (!give_back_before_close)
        dry_give_back(&dry, 0);
    uvt_sink_wait(&sink, 100, 2000);
    uvt_sink_expect(&sink, 100, seed + 1);
    dry_give_back(&dry, 1);
    uvt_run_for(30);
    cr_assert_eq(heap_closed, 2, "each close callback ran once");
    cr_assert_eq(hsink.len, 0);
    uvt_pair_close(&p);
    uvt_sink_free(&sink);
    uvt_sink_free(&hsink);
    dry_close(&dry);
}

Test(uv_pause, closing_a_paused_stream_unregisters_it)
{
    /* The closed stream was first in line: the buffer goes to the next. */
    close_the_first_of_two(false, 70);
}

Test(uv_pause, a_wakeup_pending_on_a_closed_stream_goes_to_the_next_reader)
{
    /* The return wakes the loop through the first paused reader, which is
     * closed before the loop runs: libuv drops the callback of a closed
     * async handle, and no second notification comes (the pool is not dry
     * any more), so the wake-up must be handed on. */
    close_the_first_of_two(true, 72);
}

Test(uv_pause, a_reader_stopped_before_its_wakeup_runs_is_not_resumed)
{
    /* The second reader stops after the return that will wake the loop,
     * before the loop runs: the wake-up resumes only the first, and the
     * second buffer stays in the pool. */
    static const enum uvt_kind kinds[2] = {UVT_UNIX, UVT_UNIX};
    struct two_readers t;
    two_pause(&t, kinds, 0, 100, 80);
    dry_give_back(&t.dry, 0);
    cr_assert_eq(zbuf_uv_read_stop(&t.p[1].b), 0); /* before the loop serves it */
    dry_give_back(&t.dry, 1);
    uvt_sink_wait(&t.sink[0], 100, 5000);
    uvt_run_for(30);
    uvt_sink_expect(&t.sink[0], 100, 80);
    cr_assert_eq(t.sink[1].len, 0);
    cr_assert(!zbuf_uv_read_paused(&t.p[1].b));
    cr_assert_eq(zbuf_pool_available(t.dry.pool), 1);
    two_close(&t);
}

/* ------------------------------------------- no byte lost across pauses */

#define BIG (4u << 20)

struct checked {
    zbuf_uv_stream_t *s;
    uint32_t seed;
    size_t len;        /* bytes received and checked */
    int enobufs, errors;
    zbuf_t *held[512]; /* given back at the next loop iteration */
    int nheld;
};

static void checked_read(zbuf_uv_stream_t *s, ssize_t status, zbuf_t *z)
{
    struct checked *c = s->handle.data;
    if (status == UV_ENOBUFS) {
        c->enobufs++;
        return;
    }
    if (status < 0) {
        c->errors++;
        return;
    }
    uint8_t tmp[4096];
    for (size_t off = 0; off < (size_t)status;) {
        size_t n = (size_t)status - off < sizeof(tmp) ? (size_t)status - off : sizeof(tmp);
        cr_assert_eq(zbuf_copyout(z, off, tmp, n), (ssize_t)n);
        for (size_t i = 0; i < n; i++)
            if (tmp[i] != uvt_byte(c->seed, c->len + off + i))
                cr_assert_fail("byte %zu of stream %u differs", c->len + off + i, c->seed);
        off += n;
    }
    c->len += (size_t)status;
    cr_assert_lt(c->nheld, 512);
    c->held[c->nheld++] = z;
}

static void give_back_held(uv_prepare_t *h)
{
    struct checked *c = h->data;
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < c[k].nheld; i++)
            zbuf_delete(c[k].held[i]);
        c[k].nheld = 0;
    }
}

static bool checked_short(void *arg)
{
    const struct checked *c = arg;
    return (c[0].len < BIG || c[1].len < BIG) && c[0].errors + c[1].errors == 0;
}

static int prepare_closed;

static void on_prepare_closed(uv_handle_t *h)
{
    (void)h;
    prepare_closed++;
}

Test(uv_pause, megabytes_through_a_tiny_shared_pool_arrive_intact)
{
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(4096, 4, &pool), 0); /* 16 KiB for two streams */
    struct uvt_pair p[2];
    struct checked c[2];
    uv_prepare_t prep;
    const size_t sizes[] = {65536, 1000, 7};
    uvt_pair_open(&p[0], UVT_TCP);
    uvt_pair_open(&p[1], UVT_UNIX);
    for (int i = 0; i < 2; i++) {
        c[i] = (struct checked){.s = &p[i].b, .seed = 90 + (uint32_t)i};
        p[i].b.handle.data = &c[i];
        cr_assert_eq(zbuf_uv_read_start(&p[i].b, pool, checked_read), 0);
        cr_assert_eq(zbuf_uv_write(&p[i].a.stream, uvt_make(BIG, c[i].seed, 0, sizes, 3, NULL),
                                   NULL, NULL),
                     0);
    }
    /* Keep each iteration's zbufs until the next: the pool runs dry in
     * every burst of reads, and comes back in the prepare phase. */
    prep.data = c;
    cr_assert_eq(uv_prepare_init(uvt_loop, &prep), 0);
    cr_assert_eq(uv_prepare_start(&prep, give_back_held), 0);
    cr_assert(uvt_run_while(checked_short, c, 60000), "stalled at %zu and %zu of %u bytes",
              c[0].len, c[1].len, BIG);
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(c[i].len, BIG);
        cr_assert_eq(c[i].errors, 0);
        cr_log_info("stream %d: %d pauses", i, c[i].enobufs);
    }
    cr_assert_gt(c[0].enobufs + c[1].enobufs, 10, "the pool did run dry");
    prepare_closed = 0;
    uv_close((uv_handle_t *)&prep, on_prepare_closed);
    give_back_held(&prep);
    for (int i = 0; i < 2; i++)
        uvt_pair_close(&p[i]);
    cr_assert_eq(prepare_closed, 1);
    cr_assert_eq(zbuf_pool_available(pool), 4);
    zbuf_pool_delete(pool);
}

/* ------------------------------- the application's notify callback stays */

static void count_refills(zbuf_pool_t *pool, void *arg)
{
    (void)pool;
    ++*(int *)arg;
}

Test(uv_pause, the_applications_own_notify_callback_keeps_working_beside_the_adapter)
{
    struct dry_pool dry;
    struct uvt_pair p;
    struct uvt_sink sink = {0};
    int app_refills = 0;
    dry_open(&dry);
    cr_assert_eq(zbuf_pool_set_notify(dry.pool, count_refills, &app_refills), 0);
    uvt_pair_open(&p, UVT_UNIX);
    pause_on(&p, &sink, dry.pool, 100, 37);
    dry_give_back(&dry, 0); /* wakes both the application and the adapter */
    uvt_sink_wait(&sink, 100, 5000);
    uvt_sink_expect(&sink, 100, 37);
    /* Once for the buffer given back, and once more when the reader gave
     * it back too (its bytes were handled and it keeps no buffer idle). */
    cr_assert_geq(app_refills, 1, "the application's callback ran");
    cr_assert(!zbuf_uv_read_paused(&p.b), "and the reader resumed");
    uvt_pair_close(&p);
    uvt_sink_free(&sink);
    cr_assert_eq(zbuf_pool_set_notify(dry.pool, NULL, NULL), 0);
    dry_close(&dry);
}
