/* SPDX-License-Identifier: MIT */
/*
 * Receiving into buffers of a provided ring fed from a pool: every byte
 * arrives once, in order; an application that holds every buffer stops
 * the receive (the kernel reads nothing meanwhile) and gets it back when
 * it lets buffers go, from any thread; datagrams carry their sender and
 * their truncation; end of stream and resets are reported.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <zbuf/uring.h>

#include "ut.h"
#include "../ring_hot.h"
#include "../coalesce.h"
#include "../uring_internal.h"

ZT_SUITE(recv);

/* A writer thread: `total` pattern bytes to fd in chunks of varying size,
 * then shutdown(SHUT_WR) (or a reset when `reset_at` is reached). */
struct writer {
    int fd;
    uint64_t total;
    uint64_t reset_at;   /* 0: none */
    uint64_t sent;
    pthread_t tid;
};

static void *writer_main(void *arg)
{
    struct writer *w = arg;
    uint8_t *buf = malloc(70000);
    unsigned step = 1;
    while (w->sent < w->total) {
        size_t n = 1 + (step * 7919u) % 65536;
        step++;
        if (n > w->total - w->sent)
            n = (size_t)(w->total - w->sent);
        if (w->reset_at && w->sent + n > w->reset_at)
            n = (size_t)(w->reset_at - w->sent);
        st_fill(buf, n, w->sent);
        ssize_t r = write(w->fd, buf, n);
        if (r <= 0)
            break;
        w->sent += (uint64_t)r;
        if (w->reset_at && w->sent >= w->reset_at) {
            struct linger lg = { .l_onoff = 1, .l_linger = 0 };
            setsockopt(w->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
            break;
        }
    }
    if (!w->reset_at)
        shutdown(w->fd, SHUT_WR);
    free(buf);
    return NULL;
}

static void writer_start(struct writer *w, int fd, uint64_t total, uint64_t reset_at)
{
    *w = (struct writer){ .fd = fd, .total = total, .reset_at = reset_at };
    cr_assert_eq(pthread_create(&w->tid, NULL, writer_main, w), 0);
}

static zbuf_uring_sock_t *open_sock(zbuf_uring_t *u, int fd)
{
    zbuf_uring_sock_t *s;
    cr_assert_eq(zbuf_uring_sock_open(u, fd, NULL, &s), 0);
    return s;
}

/* A socket waits for buffers of br (the ring ran dry). */
static bool waiting(zbuf_uring_bufring_t *br)
{
    zbuf_uring_bufring_stats_t bs;
    zbuf_uring_bufring_get_stats(br, &bs);
    return bs.waiting > 0;
}

static bool no_sockets(void *arg)
{
    return zbuf_uring_sock_count(arg) == 0;
}

static bool ended(void *arg)
{
    return ((struct ut_sink *)arg)->end <= 0;
}

UT_BOTH(recv, stream_bytes_arrive_exactly_and_in_order)
{
    struct ut_rx x;
    ut_rx_open(&x, be, 16384, 64, 0, false);
    zbuf_uring_t *u = x.u;
    zbuf_uring_bufring_t *br = x.br;
    zbuf_uring_sock_t *s = x.s;
    struct ut_sink k;
    ut_sink_init(&k);
    cr_assert_eq(zbuf_uring_recv_start(s, br, ut_sink_cb, &k), 0);
    cr_assert_eq(zbuf_uring_recv_start(s, br, ut_sink_cb, &k), -EALREADY);
    struct writer w;
    writer_start(&w, x.peer, 8u << 20, 0);
    ut_run_until(u, ended, &k, 60000, "the end of the stream");
    pthread_join(w.tid, NULL);
    cr_assert_eq(k.end, 0, "receive failed: %s", zbuf_strerror((int)k.end));
    cr_assert_eq(k.got, w.total);
    cr_assert_eq(k.bad_at, UINT64_MAX, "wrong byte at %llu", (unsigned long long)k.bad_at);
    zbuf_uring_sock_stats_t st;
    zbuf_uring_sock_get_stats(s, &st);
    cr_assert_eq(st.bytes_received, w.total);
    zbuf_uring_probe_t p;
    zbuf_uring_probe(&p);
    if (be == ZBUF_URING_BACKEND_IO_URING && p.recv_bundle)
        cr_assert_gt(k.maxsegs, 1, "no completion filled more than one buffer (bundles)");
    ut_rx_close(&x);
}

/* A sink that also records which buffers the bytes arrived in. */
struct hot_sink {
    struct ut_sink k;
    unsigned nbufs;
    uintptr_t bufs[4096];
};

static void hot_cb(zbuf_uring_sock_t *s, ssize_t n, zbuf_t *z, const zbuf_uring_rx_t *rx,
                   void *arg)
{
    struct hot_sink *h = arg;
    struct iovec iov[64];
    int cnt = z != NULL ? zbuf_iovec(z, 0, ZBUF_TO_END, iov, 64, NULL) : 0;
    for (int i = 0; i < cnt; i++) {
        uintptr_t b = (uintptr_t)iov[i].iov_base;
        unsigned j = 0;
        while (j < h->nbufs && h->bufs[j] != b)
            j++;
        if (j == h->nbufs && h->nbufs < 4096)
            h->bufs[h->nbufs++] = b;
    }
    ut_sink_cb(s, n, z, rx, &h->k);
}

/* The ring's bound per receiving socket, in buffers of 16 KiB (the core's
 * L2 cache, ring_hot.h). */
static unsigned hot_bufs_16k(void)
{
    return (unsigned)(zu_ring_hot_bytes() / 16384);
}

/* An application that deletes each zbuf at once gets its bytes in a few
 * buffers used over and over (still in the cache), not in every buffer of
 * a large pool in turn; on io_uring the ring holds at most the core's L2
 * cache of buffers (hot_bufs_16k()) however much the kernel took at a
 * time. */
UT_BOTH(recv, a_prompt_reader_reuses_few_buffers)
{
    struct ut_rx x;
    unsigned cap = hot_bufs_16k();
    ut_rx_open(&x, be, 16384, 8 * cap, 0, false);
    struct hot_sink *h = calloc(1, sizeof *h);
    cr_assert_not_null(h);
    ut_sink_init(&h->k);
    cr_assert_eq(zbuf_uring_recv_start(x.s, x.br, hot_cb, h), 0);
    struct writer w;
    writer_start(&w, x.peer, 16u << 20, 0);
    uint64_t most = 0;
    while (h->k.end > 0) {
        int rc = zbuf_uring_run(x.u, 50);
        cr_assert(rc >= 0 || rc == -EINTR);
        zbuf_uring_bufring_stats_t bs;
        zbuf_uring_bufring_get_stats(x.br, &bs);
        most = bs.in_ring > most ? bs.in_ring : most;
    }
    pthread_join(w.tid, NULL);
    cr_assert_eq(h->k.end, 0);
    cr_assert_eq(h->k.got, w.total);
    cr_assert_eq(h->k.bad_at, UINT64_MAX);
    if (be == ZBUF_URING_BACKEND_IO_URING)
        cr_assert_leq(most, cap, "the ring held %llu buffers of 16 KiB, the bound is %u",
                      (unsigned long long)most, cap);
    /* Ring depth plus what one run delivers, with room to spare; 8 * cap
     * would mean every buffer of the pool in turn. */
    cr_assert_leq(h->nbufs, 2 * cap + 32, "the bytes went into %u different buffers (bound %u)",
                  h->nbufs, cap);
    free(h);
    ut_rx_close(&x);
}

static bool both_ended(void *arg)
{
    struct ut_sink *k = arg;
    return k[0].end <= 0 && k[1].end <= 0;
}

/* Two busy streams sharing one ring each get their bytes whole and in
 * order; the ring's bound grows with the sockets using it (hot_bufs_16k()
 * buffers of 16 KiB each), not beyond. */
UT_BOTH(recv, two_streams_share_a_bounded_ring)
{
    struct ut_rx x;
    unsigned cap = hot_bufs_16k();
    ut_rx_open(&x, be, 16384, 8 * cap, 0, false);
    int a, peer2;
    st_tcp_pair(&a, &peer2);
    zbuf_uring_sock_t *s2 = open_sock(x.u, a);
    struct ut_sink k[2];
    ut_sink_init(&k[0]);
    ut_sink_init(&k[1]);
    cr_assert_eq(zbuf_uring_recv_start(x.s, x.br, ut_sink_cb, &k[0]), 0);
    cr_assert_eq(zbuf_uring_recv_start(s2, x.br, ut_sink_cb, &k[1]), 0);
    struct writer w[2];
    writer_start(&w[0], x.peer, 8u << 20, 0);
    writer_start(&w[1], peer2, 8u << 20, 0);
    uint64_t most = 0;
    int64_t end = st_now_ms() + 60000;
    while (!both_ended(k)) {
        cr_assert_lt(st_now_ms(), end, "timed out");
        int rc = zbuf_uring_run(x.u, 50);
        cr_assert(rc >= 0 || rc == -EINTR);
        zbuf_uring_bufring_stats_t bs;
        zbuf_uring_bufring_get_stats(x.br, &bs);
        most = bs.in_ring > most ? bs.in_ring : most;
    }
    pthread_join(w[0].tid, NULL);
    pthread_join(w[1].tid, NULL);
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(k[i].end, 0, "stream %d: %s", i, zbuf_strerror((int)k[i].end));
        cr_assert_eq(k[i].got, w[i].total, "stream %d", i);
        cr_assert_eq(k[i].bad_at, UINT64_MAX, "stream %d", i);
    }
    if (be == ZBUF_URING_BACKEND_IO_URING)
        cr_assert_leq(most, 2 * cap, "the ring held %llu buffers of 16 KiB, the bound is %u",
                      (unsigned long long)most, 2 * cap);
    close(peer2);
    cr_assert_eq(zbuf_uring_sock_close(s2, 1000, NULL, NULL), 0);
    ut_rx_close(&x);
}

/* The application keeps every zbuf: the ring runs dry, the receive stops
 * without reading, and resumes when the zbufs are deleted. */
UT_BOTH(recv, an_exhausted_ring_pauses_and_resumes_without_loss)
{
    struct ut_rx x;
    ut_rx_open(&x, be, 4096, 8, 8, false);
    zbuf_uring_t *u = x.u;
    zbuf_uring_bufring_t *br = x.br;
    zbuf_uring_sock_t *s = x.s;
    zbuf_pool_t *pool = x.pool;
    struct ut_sink k;
    ut_sink_init(&k);
    k.hold = 100000; /* never released by the sink itself */
    cr_assert_eq(zbuf_uring_recv_start(s, br, ut_sink_cb, &k), 0);
    struct writer w;
    writer_start(&w, x.peer, 1u << 20, 0);
    int pauses = 0;
    while (k.end > 0) {
        int rc = zbuf_uring_run(u, 50);
        cr_assert(rc >= 0 || rc == -EINTR);
        if (waiting(br)) {
            /* Every buffer held and the receive stopped: no byte may come. */
            cr_assert_eq(zbuf_pool_available(pool), 0);
            uint64_t before = k.got;
            zbuf_uring_run(u, 20);
            cr_assert_eq(k.got, before, "bytes arrived with no buffer free");
            pauses++;
            ut_sink_release(&k);
        } else if (rc == 0 && k.nheld > 0) {
            ut_sink_release(&k); /* the writer is done; the ring may not be empty */
        }
    }
    ut_sink_release(&k);
    pthread_join(w.tid, NULL);
    cr_assert_eq(k.end, 0);
    cr_assert_eq(k.got, w.total);
    cr_assert_eq(k.bad_at, UINT64_MAX);
    cr_assert_gt(pauses, 0);
    zbuf_uring_sock_stats_t st;
    zbuf_uring_sock_get_stats(s, &st);
    cr_assert_gt(st.recv_nobufs, 0, "the ring never ran dry");
    if (be == ZBUF_URING_BACKEND_IO_URING)
        cr_assert_gt(st.recv_rearms, 0);
    zbuf_uring_bufring_stats_t bs;
    zbuf_uring_bufring_get_stats(br, &bs);
    cr_assert_gt(bs.empty, 0);
    ut_rx_close(&x);
}

/* Buffers given back on another thread wake the engine out of a wait. */
struct late_release {
    struct ut_sink *k;
    unsigned delay_ms;
    pthread_t tid;
};

static void *release_later(void *arg)
{
    struct late_release *l = arg;
    usleep(l->delay_ms * 1000);
    ut_sink_release(l->k);
    return NULL;
}

UT_BOTH(recv, buffers_returned_on_another_thread_wake_the_engine)
{
    struct ut_rx x;
    ut_rx_open(&x, be, 4096, 4, 4, false);
    zbuf_uring_t *u = x.u;
    zbuf_uring_bufring_t *br = x.br;
    struct ut_sink k;
    ut_sink_init(&k);
    k.hold = 100000;
    cr_assert_eq(zbuf_uring_recv_start(x.s, br, ut_sink_cb, &k), 0);
    struct writer w;
    writer_start(&w, x.peer, 256u << 10, 0);
    while (k.end > 0) {
        /* Wait until every buffer is held and the receive has stopped. */
        while (!waiting(br) && k.end > 0)
            zbuf_uring_run(u, 50);
        if (k.end <= 0)
            break;
        struct late_release l = { .k = &k, .delay_ms = 30 };
        cr_assert_eq(pthread_create(&l.tid, NULL, release_later, &l), 0);
        uint64_t before = k.got;
        int64_t t0 = st_now_ms();
        /* One long wait: only the pool's refill notification can end it
         * early with new bytes. */
        while (k.got == before && k.end > 0 && st_now_ms() - t0 < 10000)
            zbuf_uring_run(u, 10000);
        pthread_join(l.tid, NULL);
        cr_assert_lt(st_now_ms() - t0, 9000, "the engine slept through the refill");
    }
    pthread_join(w.tid, NULL);
    cr_assert_eq(k.got, w.total);
    cr_assert_eq(k.bad_at, UINT64_MAX);
    ut_sink_release(&k);
    zbuf_uring_stats_t es;
    zbuf_uring_get_stats(u, &es);
    cr_assert_gt(es.wakes, 0);
    ut_rx_close(&x);
}

/* ------------------------------------------------------------ datagrams */

struct dgrams {
    unsigned n;
    size_t len[16];
    int flags[16];
    bool from_ok[16];
    bool bytes_ok[16];
    bool aligned[16];    /* the payload starts on a 64-byte line */
    struct sockaddr_in want_from;
};

static void dgram_cb(zbuf_uring_sock_t *s, ssize_t n, zbuf_t *z, const zbuf_uring_rx_t *rx,
                     void *arg)
{
    (void)s;
    struct dgrams *d = arg;
    cr_assert_not_null(z, "receive failed: %s", zbuf_strerror((int)n));
    unsigned i = d->n++;
    d->len[i] = (size_t)n;
    d->flags[i] = rx->flags;
    const struct sockaddr_in *f = (const struct sockaddr_in *)rx->from;
    d->from_ok[i] = f != NULL && rx->fromlen == sizeof *f && f->sin_port == d->want_from.sin_port &&
                    f->sin_addr.s_addr == d->want_from.sin_addr.s_addr;
    uint8_t buf[70000];
    d->bytes_ok[i] = zbuf_copyout(z, 0, buf, (size_t)n) == n &&
                     st_mismatch(buf, (size_t)n, 0) == (size_t)-1;
    struct iovec iov;
    d->aligned[i] = n == 0 || (zbuf_iovec(z, 0, ZBUF_TO_END, &iov, 1, NULL) == 1 &&
                               (uintptr_t)iov.iov_base % 64 == 0);
    zbuf_delete(z);
}

#define N_DGRAMS 8

static bool got_all(void *arg)
{
    return ((struct dgrams *)arg)->n >= N_DGRAMS;
}

/* A datagram longer than the buffer less its 144 bytes of headroom is
 * truncated at the same length on both machineries, also when the kernel
 * (whose header and address take 128 bytes on io_uring, so that the
 * payload starts on a cache line) delivered a few bytes more. */

UT_BOTH(recv, datagrams_carry_their_sender_and_truncation)
{
    struct ut_rx x;
    ut_rx_open(&x, be, 2048, 16, 0, true);
    zbuf_uring_t *u = x.u;
    int b = x.peer;
    struct sockaddr_in to_a, to_b;
    socklen_t l = sizeof to_a;
    cr_assert_eq(getsockname(zbuf_uring_sock_fd(x.s), (struct sockaddr *)&to_a, &l), 0);
    l = sizeof to_b;
    cr_assert_eq(getsockname(b, (struct sockaddr *)&to_b, &l), 0);
    struct dgrams d = { .want_from = to_b };
    cr_assert_eq(zbuf_uring_recv_start(x.s, x.br, dgram_cb, &d), 0);
    zbuf_uring_run(u, 0);
    size_t room = 2048 - 144;
    size_t sizes[N_DGRAMS] = { 0, 1, 500, 1400, room, room + 1, room + 16, 4000 };
    uint8_t buf[4000];
    st_fill(buf, sizeof buf, 0);
    for (int i = 0; i < N_DGRAMS; i++)
        cr_assert_eq(sendto(b, buf, sizes[i], 0, (struct sockaddr *)&to_a, sizeof to_a),
                     (ssize_t)sizes[i]);
    ut_run_until(u, got_all, &d, 10000, "eight datagrams");
    for (int i = 0; i < N_DGRAMS; i++) {
        size_t want = sizes[i] < room ? sizes[i] : room;
        cr_assert_eq(d.len[i], want, "datagram %d: %zu bytes", i, d.len[i]);
        cr_assert(d.from_ok[i], "datagram %d: wrong sender", i);
        cr_assert(d.bytes_ok[i], "datagram %d: wrong bytes", i);
        cr_assert_eq(d.flags[i] & MSG_TRUNC, sizes[i] > room ? MSG_TRUNC : 0, "datagram %d", i);
        cr_assert(d.aligned[i], "datagram %d: payload not on a 64-byte line", i);
    }
    ut_rx_close(&x);
}

/* ----------------------------------------------------------- coalescing */

static void count_cb(zbuf_uring_sock_t *s, ssize_t n, zbuf_t *z, const zbuf_uring_rx_t *rx,
                     void *arg)
{
    (void)s;
    (void)rx;
    cr_assert_not_null(z, "receive failed: %s", zbuf_strerror((int)n));
    (*(unsigned *)arg)++;
    zbuf_delete(z);
}

/* The arrival estimate, fed by hand: a steady stream above the threshold
 * turns coalescing on, one below it does not, and neither does the backlog
 * a long stall leaves at the lower rate, however the kernel splits it. */
Test(coalesce, the_estimate_reads_the_rate_not_the_batch)
{
    const uint64_t us = 1000;
    struct zu_rate r = { .last_ns = 1000000 * us };
    uint64_t t = r.last_ns;
    for (int i = 0; i < 40; i++) /* 1,000,000 a second, 50 every 50 us */
        zu_rate_fold(&r, t += 50 * us, 50, 1);
    cr_assert_geq(zu_rate_expect(&r), 49);
    cr_assert_leq(zu_rate_expect(&r), 51);

    zu_rate_fold(&r, t += 10000 * us, 0, 0); /* idle: the estimate starts over */
    cr_assert_lt(zu_rate_expect(&r), 1);
    for (int i = 0; i < 400; i++) /* 200,000 a second, one every 5 us */
        zu_rate_fold(&r, t += 5 * us, 1, 1);
    cr_assert_lt(zu_rate_expect(&r), ZU_COALESCE_MIN);
    cr_assert_gt(zu_rate_expect(&r), 8);

    /* A 1 ms stall at that rate: 200 datagrams, handed over in runs of 32
     * a few microseconds apart. */
    unsigned left = 200;
    zu_rate_fold(&r, t += 1000 * us, 32, 1);
    for (left -= 32; left > 0; left -= left < 32 ? left : 32) {
        zu_rate_fold(&r, t += 3 * us, left < 32 ? left : 32, 1);
        cr_assert_lt(zu_rate_expect(&r), ZU_COALESCE_MIN, "%u datagrams left: %.1f", left,
                     zu_rate_expect(&r));
    }
    /* A clock that does not move forward changes nothing but the count. */
    struct zu_rate z = { .last_ns = t };
    zu_rate_fold(&z, t - 1, 5, 1);
    cr_assert_eq(zu_rate_expect(&z), 0);
}

/* The window, fed by hand: one busy socket keeps the shortest; the same
 * rate spread over 64 sockets, about one completion each a wait, lengthens
 * it step by step to the longest and no further; a rate too low to
 * coalesce, or one socket again, brings it back. */
Test(coalesce, the_window_grows_with_the_sockets_a_wait_serves)
{
    const uint64_t us = 1000;
    struct zu_rate r = { .last_ns = 1000000 * us };
    uint64_t t = r.last_ns;
    for (int i = 0; i < 40; i++) /* 600,000 a second from one socket */
        zu_rate_fold(&r, t += 50 * us, 30, 1);
    cr_assert_eq(zu_rate_window(&r), ZU_COALESCE_NS);

    uint32_t last = zu_rate_window(&r);
    unsigned steps = 0;
    for (int i = 0; i < 40; i++) { /* the same rate over 64 sockets */
        uint32_t w = zu_rate_window(&r);
        unsigned n = (unsigned)(0.6 * w / us); /* due in the window */
        zu_rate_fold(&r, t += w, n, n < 64 ? n : 64);
        cr_assert_geq(zu_rate_window(&r), last, "the window shrank at %u us", w / 1000);
        steps += zu_rate_window(&r) != last;
        last = zu_rate_window(&r);
    }
    cr_assert_eq(last, ZU_WINDOW_MAX_NS);
    cr_assert_geq(steps, 2, "the window jumped instead of doubling");
    cr_assert_geq(zu_rate_expect_in(&r, last), 100);

    for (int i = 0; i < 40; i++) /* one socket again: its batches shrink it */
        zu_rate_fold(&r, t += zu_rate_window(&r), (unsigned)(0.6 * zu_rate_window(&r) / us), 1);
    cr_assert_eq(zu_rate_window(&r), ZU_COALESCE_NS);

    for (int i = 0; i < 40; i++) /* 64 sockets again, then a slow trickle */
        zu_rate_fold(&r, t += zu_rate_window(&r), 64, 64);
    cr_assert_gt(zu_rate_window(&r), ZU_COALESCE_NS);
    zu_rate_fold(&r, t += 10000 * us, 1, 1);
    cr_assert_eq(zu_rate_window(&r), ZU_COALESCE_NS);
}

/* Send 2 x ZU_COALESCE_MIN datagrams of 100 bytes at once and receive
 * them all; then make the engine's estimate read a stream fast enough to
 * coalesce (ZU_COALESCE_MAX completions due within the window, from as
 * many sockets: the longest window), as a flood over many sockets would,
 * whatever this machine's speed (a sanitizer's slower runs read a lower
 * rate): the estimate itself is tested above. */
static void burst(struct ut_rx *x, const struct sockaddr_in *to, unsigned *got)
{
    uint8_t buf[100] = { 0 };
    struct iovec iov = { .iov_base = buf, .iov_len = sizeof buf };
    struct mmsghdr mm[2 * ZU_COALESCE_MIN];
    for (unsigned i = 0; i < 2 * ZU_COALESCE_MIN; i++)
        mm[i] = (struct mmsghdr){ .msg_hdr = { .msg_name = (void *)to,
                                                .msg_namelen = sizeof *to,
                                                .msg_iov = &iov,
                                                .msg_iovlen = 1 } };
    unsigned want = *got + 2 * ZU_COALESCE_MIN;
    cr_assert_eq(sendmmsg(x->peer, mm, 2 * ZU_COALESCE_MIN, 0), (int)(2 * ZU_COALESCE_MIN));
    for (int64_t end = st_now_ms() + 10000; *got < want;) {
        cr_assert_lt(st_now_ms(), end, "timed out waiting for a burst of datagrams");
        int rc = zbuf_uring_run(x->u, 20);
        cr_assert(rc >= 0 || rc == -EINTR, "zbuf_uring_run: %s", zbuf_strerror(rc));
    }
    x->u->rx_rate = (struct zu_rate){
        .last_ns = zu_mono_ns(),
        .count = ZU_COALESCE_MAX,
        .span = ZU_COALESCE_NS,
        .rounds = ZU_COALESCE_MAX, /* many sockets: the longest window */
        .window_ns = ZU_WINDOW_MAX_NS,
    };
}

/* After a burst the engine batches completions (ZBUF_URING_NO_COALESCE),
 * but a lone datagram still comes within the coalescing delay, not at the
 * end of the caller's timeout, and a wait that finds nothing still lasts
 * the caller's whole timeout. */
UT_BOTH(recv, after_a_burst_a_lone_datagram_is_not_held_back)
{
    struct ut_rx x;
    ut_rx_open(&x, be, 2048, 256, 0, true);
    struct sockaddr_in to;
    socklen_t l = sizeof to;
    cr_assert_eq(getsockname(zbuf_uring_sock_fd(x.s), (struct sockaddr *)&to, &l), 0);
    unsigned got = 0;
    cr_assert_eq(zbuf_uring_recv_start(x.s, x.br, count_cb, &got), 0);
    zbuf_uring_run(x.u, 0);
    burst(&x, &to, &got);

    /* The epoll path may still report the socket's last readiness; a
     * signal (the test runner's) may cut a wait short. */
    int64_t t0;
    int rc, tries = 0, extra = 0;
    do {
        t0 = st_now_ms();
        rc = zbuf_uring_run(x.u, 300);
        cr_assert(rc >= 0 || rc == -EINTR, "zbuf_uring_run: %s", zbuf_strerror(rc));
        extra += rc > 0;
    } while (rc != 0 && ++tries < 5);
    cr_assert_eq(rc, 0);
    cr_assert(be == ZBUF_URING_BACKEND_EPOLL || extra == 0, "completions from nowhere");
    cr_assert_geq(st_now_ms() - t0, 250, "a wait with nothing to find ended early");

    burst(&x, &to, &got);
    unsigned before = got;
    uint8_t one[100] = { 0 };
    cr_assert_eq(sendto(x.peer, one, sizeof one, 0, (struct sockaddr *)&to, sizeof to), 100);
    t0 = st_now_ms();
    do
        rc = zbuf_uring_run(x.u, 2000);
    while (rc == -EINTR);
    cr_assert_geq(rc, 1, "zbuf_uring_run: %d", rc);
    cr_assert_eq(got, before + 1);
    cr_assert_lt(st_now_ms() - t0, 1000, "a lone datagram was held back");
    ut_rx_close(&x);
}

/* -------------------------------------------------------- stop / restart */

/* A sink that stops receiving, from inside its callback, every 5 zbufs. */
struct stopper {
    struct ut_sink k;
    unsigned stop_at;
};

static void stop_every_5(zbuf_uring_sock_t *s, ssize_t n, zbuf_t *z, const zbuf_uring_rx_t *rx,
                         void *arg)
{
    struct stopper *st = arg;
    ut_sink_cb(s, n, z, rx, &st->k);
    if (z != NULL && st->k.calls >= st->stop_at)
        cr_assert_eq(zbuf_uring_recv_stop(s), 0);
}

UT_BOTH(recv, stopping_and_restarting_loses_nothing)
{
    struct ut_rx x;
    ut_rx_open(&x, be, 8192, 64, 0, false);
    zbuf_uring_t *u = x.u;
    struct stopper st;
    ut_sink_init(&st.k);
    struct writer w;
    /* One completion may fill the whole ring (64 x 8 KiB, bundles), so a
     * cycle of 5 callbacks takes at most 2.5 MiB: 16 MiB are at least 7
     * cycles however the writer and the loop are scheduled (4 MiB gave 3
     * on a loaded machine). */
    writer_start(&w, x.peer, 16u << 20, 0);
    unsigned cycles = 0;
    while (st.k.end > 0) {
        st.stop_at = st.k.calls + 5;
        cr_assert_eq(zbuf_uring_recv_start(x.s, x.br, stop_every_5, &st), 0);
        while (st.k.calls < st.stop_at && st.k.end > 0)
            zbuf_uring_run(u, 50);
        unsigned calls = st.k.calls;
        zbuf_uring_run(u, 5);
        zbuf_uring_run(u, 5);
        cr_assert_eq(st.k.calls, calls, "a callback after zbuf_uring_recv_stop()");
        cycles++;
    }
    pthread_join(w.tid, NULL);
    cr_assert_eq(st.k.end, 0);
    cr_assert_eq(st.k.got, w.total);
    cr_assert_eq(st.k.bad_at, UINT64_MAX);
    cr_assert_gt(cycles, 3);
    ut_rx_close(&x);
}

/* ------------------------------------------------------------- resets */

UT_BOTH(recv, a_peer_reset_mid_stream_is_reported_after_the_bytes_before_it)
{
    struct ut_rx x;
    ut_rx_open(&x, be, 16384, 32, 0, false);
    zbuf_uring_t *u = x.u;
    struct ut_sink k;
    ut_sink_init(&k);
    cr_assert_eq(zbuf_uring_recv_start(x.s, x.br, ut_sink_cb, &k), 0);
    struct writer w;
    writer_start(&w, x.peer, 4u << 20, 300000);
    /* Read what came before the reset, then close with a reset. */
    struct ut_want want = { .k = &k, .bytes = 300000 };
    ut_run_until(u, ut_sink_has, &want, 20000, "the bytes before the reset");
    pthread_join(w.tid, NULL);
    close(x.peer); /* SO_LINGER 0: a reset */
    x.peer = -1;
    ut_run_until(u, ended, &k, 10000, "the reset");
    cr_assert_eq(k.got, 300000);
    cr_assert_eq(k.bad_at, UINT64_MAX);
    cr_assert(k.end == -ECONNRESET || k.end == 0, "end: %s", zbuf_strerror((int)k.end));
    ut_rx_close(&x);
}

/* Sending to a peer that resets: the queued zbufs come back with the
 * error, every buffer is released exactly once, later sends fail. */
struct many_sent {
    int calls, errors;
    size_t unsent;
    int first_err;
};

static void count_sent(zbuf_uring_sock_t *s, int status, zbuf_t *unsent, void *arg)
{
    (void)s;
    struct many_sent *m = arg;
    m->calls++;
    if (status != 0) {
        m->errors++;
        if (m->first_err == 0)
            m->first_err = status;
    }
    m->unsent += zbuf_length(unsent);
    zbuf_delete(unsent);
}

struct sent_and_released {
    struct many_sent *m;
    int want;
    atomic_int *rel;
    int bufs;
};

static bool all_back(void *arg)
{
    struct sent_and_released *x = arg;
    return x->m->calls >= x->want && atomic_load(x->rel) >= x->bufs;
}

UT_BOTH(recv, a_peer_reset_fails_queued_sends_and_releases_every_buffer_once)
{
    zbuf_uring_t *u = ut_engine(be);
    int a, b;
    st_tcp_pair(&a, &b);
    st_bufsizes(b, 0, 16384);
    zbuf_uring_sock_opts_t o;
    zbuf_uring_sock_opts_init(&o);
    o.flags = ZBUF_URING_SOCK_ZEROCOPY | ZBUF_URING_SOCK_ZEROCOPY_ALWAYS;
    o.zc_min = 4096;
    zbuf_uring_sock_t *s;
    cr_assert_eq(zbuf_uring_sock_open(u, a, &o, &s), 0);
    atomic_int rel = 0;
    struct many_sent m = { 0 };
    struct sent_and_released x = { .m = &m, .rel = &rel };
    uint64_t off = 0;
    for (int i = 0; i < 64; i++) {
        zbuf_t *z = st_pattern_zbuf(131072, off, 32768, &rel);
        cr_assert_eq(zbuf_uring_send(s, z, 0, count_sent, &m), 0);
        off += 131072;
        x.want++;
        x.bufs += 4;
    }
    for (int i = 0; i < 10; i++)
        zbuf_uring_run(u, 10);
    struct linger lg = { .l_onoff = 1, .l_linger = 0 };
    cr_assert_eq(setsockopt(b, SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
    close(b);
    ut_run_until(u, all_back, &x, 20000, "every callback and release");
    cr_assert_gt(m.errors, 0, "the reset was not reported");
    cr_assert(m.first_err == -ECONNRESET || m.first_err == -EPIPE, "error: %s",
              zbuf_strerror(m.first_err));
    cr_assert_eq(atomic_load(&rel), x.bufs, "released %d of %d", atomic_load(&rel), x.bufs);
    zbuf_uring_sock_stats_t st;
    zbuf_uring_sock_get_stats(s, &st);
    cr_assert_eq(st.bytes_sent + m.unsent, off, "sent %llu + given back %zu != %llu",
                 (unsigned long long)st.bytes_sent, m.unsent, (unsigned long long)off);
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_copy(z, "x", 1), 0);
    int rc = zbuf_uring_send(s, z, 0, NULL, NULL);
    cr_assert(rc == -ECONNRESET || rc == -EPIPE, "send after the reset: %s", zbuf_strerror(rc));
    zbuf_delete(z);
    cr_assert_eq(zbuf_uring_sock_close(s, 1000, NULL, NULL), 0);
    ut_run_until(u, no_sockets, u, 10000, "the close");
    ut_destroy(u);
}

/* ------------------------------------------------------------ teardown */

struct closed {
    int calls;
};

static void on_closed(zbuf_uring_sock_t *s, void *arg)
{
    (void)s;
    ((struct closed *)arg)->calls++;
}

/* Destroy the engine while zero-copy sends wait for a peer that does not
 * read: queued zbufs come back cancelled, the connection is aborted after
 * the timeout, every buffer is released exactly once (ASan watches for
 * the kernel's pages being freed early). */
UT_BOTH(recv, destroying_the_engine_with_sends_in_flight_releases_every_buffer_once)
{
    zbuf_uring_t *u = ut_engine(be);
    int a, b;
    st_tcp_pair(&a, &b);
    st_bufsizes(b, 0, 16384);
    st_bufsizes(a, 65536, 0);
    zbuf_uring_sock_opts_t o;
    zbuf_uring_sock_opts_init(&o);
    o.flags = ZBUF_URING_SOCK_ZEROCOPY | ZBUF_URING_SOCK_ZEROCOPY_ALWAYS;
    o.zc_min = 4096;
    zbuf_uring_sock_t *s;
    cr_assert_eq(zbuf_uring_sock_open(u, a, &o, &s), 0);
    atomic_int rel = 0;
    struct many_sent m = { 0 };
    int bufs = 0;
    uint64_t off = 0;
    for (int i = 0; i < 64; i++) {
        zbuf_t *z = st_pattern_zbuf(131072, off, 16384, &rel);
        cr_assert_eq(zbuf_uring_send(s, z, 0, count_sent, &m), 0);
        off += 131072;
        bufs += 8;
    }
    for (int i = 0; i < 20; i++)
        zbuf_uring_run(u, 5);
    zbuf_uring_sock_stats_t st;
    zbuf_uring_sock_get_stats(s, &st);
    cr_assert_lt(st.bytes_sent, off, "the peer was meant to stop the sender");
    struct closed c = { 0 };
    cr_assert_eq(zbuf_uring_sock_close(s, 300, on_closed, &c), 0);
    int rc = zbuf_uring_destroy(u, 300);
    cr_assert(rc == 0 || rc == -ECONNABORTED, "destroy: %s", zbuf_strerror(rc));
    cr_assert_eq(c.calls, 1);
    cr_assert_eq(m.calls, 64, "every send callback ran once");
    cr_assert_eq(atomic_load(&rel), bufs, "released %d of %d", atomic_load(&rel), bufs);
    close(b);
}

UT_BOTH(recv, closing_with_queued_sends_gives_them_back_cancelled)
{
    zbuf_uring_t *u = ut_engine(be);
    int a, b;
    st_tcp_pair(&a, &b);
    st_bufsizes(b, 0, 16384);
    zbuf_uring_sock_t *s = open_sock(u, a);
    atomic_int rel = 0;
    struct many_sent m = { 0 };
    for (int i = 0; i < 16; i++) {
        zbuf_t *z = st_pattern_zbuf(1 << 20, 0, 1 << 20, &rel);
        cr_assert_eq(zbuf_uring_send(s, z, 0, count_sent, &m), 0);
    }
    zbuf_uring_run(u, 10);
    zbuf_uring_run(u, 10);
    struct closed c = { 0 };
    int before = m.calls;
    cr_assert_eq(zbuf_uring_sock_close(s, 200, on_closed, &c), 0);
    cr_assert_eq(m.calls, before, "callbacks run inside zbuf_uring_run() only");
    ut_run_until(u, no_sockets, u, 10000, "the close");
    cr_assert_eq(c.calls, 1);
    cr_assert_eq(m.calls, 16);
    cr_assert_gt(m.errors, 0);
    cr_assert_eq(atomic_load(&rel), 16);
    close(b);
    ut_destroy(u);
}
