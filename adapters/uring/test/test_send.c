/* SPDX-License-Identifier: MIT */
/*
 * Sending through the engine: every byte arrives, in order, whatever the
 * sizes and segment layouts; release callbacks run exactly once and never
 * before the kernel's word (completion for plain requests, notification
 * for zero-copy ones); short sends, MSG_DONTWAIT and bad arguments lose
 * nothing.  Each test runs on io_uring and on the epoll path.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <zbuf/uring.h>

#include "ut.h"

ZT_SUITE(send);

static zbuf_uring_sock_t *open_sock_opts(zbuf_uring_t *u, int fd, const zbuf_uring_sock_opts_t *o)
{
    zbuf_uring_sock_t *s;
    int rc = zbuf_uring_sock_open(u, fd, o, &s);
    cr_assert_eq(rc, 0, "zbuf_uring_sock_open: %s", zbuf_strerror(rc));
    return s;
}

static zbuf_uring_sock_t *open_sock(zbuf_uring_t *u, int fd, unsigned flags)
{
    zbuf_uring_sock_opts_t o;
    zbuf_uring_sock_opts_init(&o);
    o.flags = flags;
    o.zc_min = 4096; /* zero copy at every size worth it, not only from 64 KiB */
    return open_sock_opts(u, fd, &o);
}

struct counts {
    struct ut_sent *sent;
    int want;
    atomic_int *released;
    int bufs;
};

static bool all_done(void *arg)
{
    struct counts *c = arg;
    return c->sent->calls >= c->want && atomic_load(c->released) >= c->bufs;
}

static bool no_sockets(void *arg)
{
    return zbuf_uring_sock_count(arg) == 0;
}

static void close_and_wait(zbuf_uring_t *u, zbuf_uring_sock_t *s)
{
    cr_assert_eq(zbuf_uring_sock_close(s, 2000, NULL, NULL), 0);
    ut_run_until(u, no_sockets, u, 10000, "the close");
}

/* Close s, let reader r finish, and check that it got the `total` bytes
 * sent, in order. */
static void close_and_check(zbuf_uring_t *u, zbuf_uring_sock_t *s, struct st_reader *r,
                            uint64_t total)
{
    close_and_wait(u, s);
    st_reader_join(r);
    cr_assert_eq(r->got, total);
    cr_assert_eq(r->bad_at, UINT64_MAX, "byte %llu differs", (unsigned long long)r->bad_at);
}

/* Send zbufs of every size and segment layout on a TCP connection opened
 * with `flags`; a reader thread checks every byte. */
static void sizes_and_layouts(zbuf_uring_backend_t be, unsigned flags)
{
    static const size_t sizes[] = { 1, 63, 64, 1000, 4096, 65536, 300000, 1 << 20 };
    static const size_t segs[] = { 1, 7, 4096, 1 << 30 };
    zbuf_uring_t *u = ut_engine(be);
    int a, b;
    st_tcp_pair(&a, &b);
    zbuf_uring_sock_t *s = open_sock(u, a, flags);
    struct st_reader r = { .limit = 0 };
    st_reader_start(&r, b, 65536, 0);
    atomic_int released = 0;
    struct ut_sent sent = { 0 };
    struct counts c = { .sent = &sent, .released = &released };
    uint64_t off = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        for (size_t k = 0; k < sizeof segs / sizeof segs[0]; k++) {
            if (sizes[i] / segs[k] > 5000)
                continue; /* more than IOV_MAX already; more tell nothing new */
            size_t seg = segs[k] < sizes[i] ? segs[k] : sizes[i];
            zbuf_t *z = st_pattern_zbuf(sizes[i], off, seg, &released);
            c.bufs += (int)((sizes[i] + seg - 1) / seg);
            cr_assert_eq(zbuf_uring_send(s, z, 0, ut_sent_cb, &sent), 0);
            off += sizes[i];
            c.want++;
            if (c.want % 5 == 0)
                zbuf_uring_run(u, 0); /* some batches, some single zbufs */
        }
    }
    ut_run_until(u, all_done, &c, 30000, "every send and release");
    cr_assert_eq(sent.errors, 0, "send failed: %s", zbuf_strerror(sent.status));
    zbuf_uring_sock_stats_t st;
    zbuf_uring_sock_get_stats(s, &st);
    cr_assert_eq(st.bytes_sent, off);
    cr_assert_eq(st.messages_sent, (uint64_t)c.want);
    close_and_wait(u, s);
    st_reader_join(&r);
    cr_assert_eq(r.got, off, "received %llu of %llu", (unsigned long long)r.got,
                 (unsigned long long)off);
    cr_assert_eq(r.bad_at, UINT64_MAX, "wrong byte at %llu", (unsigned long long)r.bad_at);
    cr_assert_eq(atomic_load(&released), c.bufs, "every buffer released once");
    close(b);
    ut_destroy(u);
}

UT_BOTH(send, stream_every_size_and_layout_arrives_exactly_plain)
{
    sizes_and_layouts(be, 0);
}

UT_BOTH(send, stream_every_size_and_layout_arrives_exactly_zero_copy_always)
{
    if (be == ZBUF_URING_BACKEND_IO_URING)
        ut_require("zc");
    sizes_and_layouts(be, ZBUF_URING_SOCK_ZEROCOPY | ZBUF_URING_SOCK_ZEROCOPY_ALWAYS);
}

UT_BOTH(send, stream_every_size_and_layout_arrives_exactly_adaptive)
{
    sizes_and_layouts(be, ZBUF_URING_SOCK_ZEROCOPY);
}

/* Many small zbufs queued at once go out in few requests (an io_uring
 * request or a gathered sendmsg() per batch) and arrive in order. */
UT_BOTH(send, many_small_zbufs_are_batched_and_ordered)
{
    zbuf_uring_t *u = ut_engine(be);
    int a, b;
    st_tcp_pair(&a, &b);
    zbuf_uring_sock_t *s = open_sock(u, a, 0);
    struct st_reader r = { .limit = 0 };
    st_reader_start(&r, b, 65536, 0);
    atomic_int released = 0;
    struct ut_sent sent = { 0 };
    struct counts c = { .sent = &sent, .released = &released };
    uint64_t off = 0;
    for (int i = 0; i < 5000; i++) {
        zbuf_t *z = st_pattern_zbuf(64, off, 64, &released);
        cr_assert_eq(zbuf_uring_send(s, z, 0, ut_sent_cb, &sent), 0);
        off += 64;
        c.want++;
        c.bufs++;
    }
    cr_assert_eq(zbuf_uring_send_queued(s), off);
    ut_run_until(u, all_done, &c, 30000, "every send");
    zbuf_uring_sock_stats_t st;
    zbuf_uring_sock_get_stats(s, &st);
    cr_assert_eq(st.messages_sent, 5000);
    /* io_uring: one request per batch; epoll: one gathered sendmsg() per
     * 1024 iovecs at most, more only when the socket buffer fills. */
    unsigned most = be == ZBUF_URING_BACKEND_IO_URING ? 10 : 100;
    cr_assert_leq(st.sends, most, "5000 zbufs took %llu requests", (unsigned long long)st.sends);
    close_and_wait(u, s);
    st_reader_join(&r);
    cr_assert_eq(r.got, off);
    cr_assert_eq(r.bad_at, UINT64_MAX);
    close(b);
    ut_destroy(u);
}

/* ----------------------------------------------------------- datagrams */

struct dgram_rx {
    int fd;
    unsigned n;
    size_t lens[64];
    bool ok[64];
};

UT_BOTH(send, datagrams_of_every_size_and_layout_arrive_whole)
{
    static const size_t sizes[] = { 0, 1, 100, 1472, 8000, 65000 };
    static const size_t segs[] = { 1, 13, 1000, 4096, 1 << 20 };
    zbuf_uring_t *u = ut_engine(be);
    for (int connected = 0; connected < 2; connected++) {
        int a, b;
        struct sockaddr_in to;
        st_udp_pair(&a, &b, connected, &to);
        st_bufsizes(b, 0, 4 << 20);
        zbuf_uring_sock_t *s =
            open_sock(u, a, ZBUF_URING_SOCK_ZEROCOPY | ZBUF_URING_SOCK_ZEROCOPY_ALWAYS);
        atomic_int released = 0;
        struct ut_sent sent = { 0 };
        struct counts c = { .sent = &sent, .released = &released };
        uint8_t *buf = malloc(70000);
        unsigned n = 0;
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            for (size_t k = 0; k < sizeof segs / sizeof segs[0]; k++) {
                if (sizes[i] / segs[k] > 2000)
                    continue;
                zbuf_t *z;
                if (sizes[i] == 0) {
                    cr_assert_eq(zbuf_create(&z), 0);
                } else {
                    size_t seg = segs[k] < sizes[i] ? segs[k] : sizes[i];
                    z = st_pattern_zbuf(sizes[i], 0, seg, &released);
                    c.bufs += (int)((sizes[i] + seg - 1) / seg);
                }
                int rc = connected ? zbuf_uring_send(s, z, 0, ut_sent_cb, &sent)
                                   : zbuf_uring_sendto(s, z, 0, (struct sockaddr *)&to,
                                                       sizeof to, ut_sent_cb, &sent);
                cr_assert_eq(rc, 0);
                c.want++;
                /* One at a time: the receive buffer (rmem_max) holds only
                 * a few large datagrams. */
                ut_run_until(u, all_done, &c, 30000, "the datagram");
                cr_assert_eq(sent.errors, 0, "datagram failed: %s", zbuf_strerror(sent.status));
                ssize_t got = recv(b, buf, 70000, 0);
                cr_assert_eq(got, (ssize_t)sizes[i], "datagram %u: %zd bytes, expected %zu", n,
                             got, sizes[i]);
                cr_assert_eq(st_mismatch(buf, (size_t)got, 0), (size_t)-1);
                n++;
            }
        }
        free(buf);
        close_and_wait(u, s);
        cr_assert_eq(atomic_load(&released), c.bufs);
        close(b);
    }
    ut_destroy(u);
}

/* ------------------------------------------- release after notification */

struct rel_probe {
    zbuf_uring_sock_t **s;
    uint64_t end;     /* stream offset just past this buffer */
    bool zc;
    atomic_int *count;
    atomic_int *early;
};

static void probe_release(void *data, size_t size, void *arg)
{
    (void)size;
    struct rel_probe *p = arg;
    zbuf_uring_sock_stats_t st;
    zbuf_uring_sock_get_stats(*p->s, &st);
    /* The engine counts the bytes it lets go before it lets them go. */
    if (st.bytes_released < p->end || (p->zc && st.zc_notifs == 0))
        atomic_fetch_add(p->early, 1);
    atomic_fetch_add(p->count, 1);
    free(data);
    free(p);
}

/* Each release callback runs after the completion or notification that
 * covers its bytes. */
static void release_order(zbuf_uring_backend_t be, unsigned flags, bool zc)
{
    zbuf_uring_t *u = ut_engine(be);
    int a, b;
    st_tcp_pair(&a, &b);
    static zbuf_uring_sock_t *s;
    s = open_sock(u, a, flags);
    struct st_reader r = { .limit = 0 };
    st_reader_start(&r, b, 65536, 100);
    atomic_int released = 0, early = 0;
    struct ut_sent sent = { 0 };
    struct counts c = { .sent = &sent, .released = &released };
    uint64_t off = 0;
    for (int i = 0; i < 64; i++) {
        size_t len = 20000 + (size_t)i * 3001;
        zbuf_t *z;
        cr_assert_eq(zbuf_create(&z), 0);
        for (size_t done = 0; done < len;) {
            size_t n = len - done < 16384 ? len - done : 16384;
            struct rel_probe *p = malloc(sizeof *p);
            void *mem = malloc(n);
            st_fill(mem, n, off + done);
            *p = (struct rel_probe){ .s = &s, .end = off + done + n, .zc = zc,
                                     .count = &released, .early = &early };
            cr_assert_eq(zbuf_append_buf(z, mem, n, probe_release, p), 0);
            done += n;
            c.bufs++;
        }
        cr_assert_eq(zbuf_uring_send(s, z, 0, ut_sent_cb, &sent), 0);
        off += len;
        c.want++;
        if (i % 8 == 7)
            zbuf_uring_run(u, 0);
    }
    ut_run_until(u, all_done, &c, 30000, "every release");
    cr_assert_eq(atomic_load(&early), 0, "%d buffers released before the kernel's word",
                 atomic_load(&early));
    zbuf_uring_sock_stats_t st;
    zbuf_uring_sock_get_stats(s, &st);
    if (zc) {
        cr_assert_gt(st.zc_sends, 0);
        cr_assert_eq(st.zc_notifs, st.zc_sends, "one notification per zero-copy request");
        cr_assert_eq(st.outstanding, 0);
    }
    cr_assert_eq(st.bytes_released, off);
    close_and_wait(u, s);
    st_reader_join(&r);
    cr_assert_eq(r.got, off);
    cr_assert_eq(r.bad_at, UINT64_MAX);
    close(b);
    ut_destroy(u);
}

Test(send, zero_copy_buffers_are_released_only_after_their_notification)
{
    ut_require("zc");
    release_order(ZBUF_URING_BACKEND_IO_URING,
                  ZBUF_URING_SOCK_ZEROCOPY | ZBUF_URING_SOCK_ZEROCOPY_ALWAYS, true);
}

Test(send, plain_buffers_are_released_only_after_their_completion)
{
    release_order(ZBUF_URING_BACKEND_IO_URING, 0, false);
}

/* On loopback the kernel copies zero-copy pages anyway and says so: the
 * socket turns zero copy off after the first such notification. */
Test(send, copied_notifications_turn_zero_copy_off)
{
    ut_require("report");
    zbuf_uring_t *u = ut_engine(ZBUF_URING_BACKEND_IO_URING);
    int a, b;
    st_tcp_pair(&a, &b);
    zbuf_uring_sock_t *s = open_sock(u, a, ZBUF_URING_SOCK_ZEROCOPY);
    struct st_reader r = { .limit = 0 };
    st_reader_start(&r, b, 65536, 0);
    atomic_int released = 0;
    struct ut_sent sent = { 0 };
    struct counts c = { .sent = &sent, .released = &released };
    uint64_t off = 0;
    for (int i = 0; i < 40; i++) {
        zbuf_t *z = st_pattern_zbuf(65536, off, 65536, &released);
        cr_assert_eq(zbuf_uring_send(s, z, 0, ut_sent_cb, &sent), 0);
        off += 65536;
        c.want++;
        c.bufs++;
        ut_run_until(u, all_done, &c, 10000, "the send"); /* one request each */
    }
    zbuf_uring_sock_stats_t st;
    zbuf_uring_sock_get_stats(s, &st);
    cr_assert_geq(st.zc_copied, 1);
    cr_assert_eq(st.zc_turned_off, 1);
    cr_assert(!st.zerocopy_on);
    cr_assert_lt(st.zc_sends, 5, "zero copy stayed on for %llu requests",
                 (unsigned long long)st.zc_sends);
    close_and_wait(u, s);
    st_reader_join(&r);
    cr_assert_eq(r.got, off);
    cr_assert_eq(r.bad_at, UINT64_MAX);
    close(b);
    ut_destroy(u);
}

/* The epoll path the same way, through zbuf-sock's MSG_ZEROCOPY: once a
 * "copied" notification turned zero copy off, zbufs above zc_min are
 * gathered into few sendmsg() calls like plain ones, and still arrive
 * whole and in order. */
Test(send, epoll_sends_are_gathered_once_zero_copy_is_off)
{
    zbuf_uring_t *u = ut_engine(ZBUF_URING_BACKEND_EPOLL);
    int a, b;
    st_tcp_pair(&a, &b);
    zbuf_uring_sock_t *s = open_sock(u, a, ZBUF_URING_SOCK_ZEROCOPY);
    zbuf_uring_sock_stats_t st;
    zbuf_uring_sock_get_stats(s, &st);
    if (!st.zerocopy_on)
        cr_skip_test("MSG_ZEROCOPY refused on this kernel: nothing to turn off");
    struct st_reader r = { .limit = 0 };
    st_reader_start(&r, b, 65536, 0);
    atomic_int released = 0;
    struct ut_sent sent = { 0 };
    struct counts c = { .sent = &sent, .released = &released };
    uint64_t off = 0;
    for (int i = 0; i < 40 && st.zerocopy_on; i++) {
        zbuf_t *z = st_pattern_zbuf(65536, off, 65536, &released);
        cr_assert_eq(zbuf_uring_send(s, z, 0, ut_sent_cb, &sent), 0);
        off += 65536;
        c.want++;
        c.bufs++;
        ut_run_until(u, all_done, &c, 10000, "the send");
        zbuf_uring_sock_get_stats(s, &st);
    }
    cr_assert(!st.zerocopy_on, "loopback copies: zero copy should be off by now");
    uint64_t sends_before = st.sends;
    for (int i = 0; i < 1000; i++) {
        zbuf_t *z = st_pattern_zbuf(8192, off, 4096, &released);
        cr_assert_eq(zbuf_uring_send(s, z, 0, ut_sent_cb, &sent), 0);
        off += 8192;
        c.want++;
        c.bufs += 2;
    }
    ut_run_until(u, all_done, &c, 30000, "every send and release");
    zbuf_uring_sock_get_stats(s, &st);
    cr_assert_leq(st.sends - sends_before, 200, "1000 zbufs took %llu sendmsg() calls",
                  (unsigned long long)(st.sends - sends_before));
    cr_assert_eq(st.messages_sent, (uint64_t)c.want);
    close_and_wait(u, s);
    st_reader_join(&r);
    cr_assert_eq(r.got, off);
    cr_assert_eq(r.bad_at, UINT64_MAX);
    cr_assert_eq(atomic_load(&released), c.bufs, "every buffer released once");
    close(b);
    ut_destroy(u);
}

/* ------------------------------------------------------- fixed buffers */

/* A pool of `count` buffers of `size` bytes registered with u (the test is
 * skipped when the locked-memory limit refuses it). */
static zbuf_pool_t *registered_pool(zbuf_uring_t *u, size_t size, size_t count)
{
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(size, count, &pool), 0);
    int rc = zbuf_uring_register_pool(u, pool);
    if (rc == -ENOMEM)
        cr_skip_test("cannot pin the pool: raise RLIMIT_MEMLOCK");
    cr_assert_eq(rc, 0, "register: %s", zbuf_strerror(rc));
    return pool;
}

/* Append to z a buffer of the pool holding stream bytes [off, off+len),
 * waiting (running u) until a notification gives one back. */
static void append_pool_bytes(zbuf_uring_t *u, zbuf_pool_t *pool, zbuf_t *z, size_t len,
                              uint64_t off)
{
    int64_t t0 = st_now_ms();
    while (zbuf_pool_available(pool) == 0 && st_now_ms() - t0 < 10000)
        zbuf_uring_run(u, 50);
    zbuf_buf_t *bb;
    cr_assert_eq(zbuf_pool_get(pool, &bb), 0);
    st_fill(zbuf_buf_data(bb), len, off);
    cr_assert_eq(zbuf_append_ref(z, bb, 0, len), 0);
    zbuf_buf_unref(bb);
}

static void fixed_buffers(size_t segs_per_zbuf)
{
    ut_require("zc");
    if (segs_per_zbuf > 1)
        ut_require("fixed");
    zbuf_uring_t *u = ut_engine(ZBUF_URING_BACKEND_IO_URING);
    zbuf_pool_t *pool = registered_pool(u, 16384, 64);
    cr_assert_eq(zbuf_uring_register_pool(u, pool), -EEXIST);
    int a, b;
    st_tcp_pair(&a, &b);
    zbuf_uring_sock_t *s =
        open_sock(u, a, ZBUF_URING_SOCK_ZEROCOPY | ZBUF_URING_SOCK_ZEROCOPY_ALWAYS);
    struct st_reader r = { .limit = 0 };
    st_reader_start(&r, b, 65536, 0);
    struct ut_sent sent = { 0 };
    uint64_t off = 0;
    for (int i = 0; i < 32; i++) {
        /* Buffers come back at the notifications. */
        zbuf_t *z;
        cr_assert_eq(zbuf_create(&z), 0);
        for (size_t k = 0; k < segs_per_zbuf; k++) {
            append_pool_bytes(u, pool, z, 16384, off);
            off += 16384;
        }
        cr_assert_eq(zbuf_uring_send(s, z, 0, ut_sent_cb, &sent), 0);
        /* One zbuf per request, so each request lies in the pool. */
        while (sent.calls < i + 1)
            zbuf_uring_run(u, 100);
    }
    while (zbuf_pool_available(pool) < 64)
        zbuf_uring_run(u, 50);
    zbuf_uring_sock_stats_t st;
    zbuf_uring_sock_get_stats(s, &st);
    cr_assert_eq(st.zc_fixed_sends, st.zc_sends, "%llu of %llu on registered buffers",
                 (unsigned long long)st.zc_fixed_sends, (unsigned long long)st.zc_sends);
    cr_assert_geq(st.zc_sends, 32);
    close_and_wait(u, s);
    st_reader_join(&r);
    cr_assert_eq(r.got, off);
    cr_assert_eq(r.bad_at, UINT64_MAX);
    close(b);
    cr_assert_eq(zbuf_uring_unregister_pool(u, pool), 0);
    cr_assert_eq(zbuf_uring_unregister_pool(u, pool), -ENOENT);
    ut_destroy(u);
    zbuf_pool_delete(pool);
}

Test(send, pool_data_goes_on_registered_buffers_single_segment)
{
    fixed_buffers(1);
}

Test(send, pool_data_goes_on_registered_buffers_vectored)
{
    fixed_buffers(4);
}

Test(send, registering_a_pool_on_the_epoll_path_says_so)
{
    zbuf_uring_t *u = ut_engine(ZBUF_URING_BACKEND_EPOLL);
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(4096, 4, &pool), 0);
    cr_assert_eq(zbuf_uring_register_pool(u, pool), -EOPNOTSUPP);
    ut_destroy(u);
    zbuf_pool_delete(pool);
}

/* The two thresholds apart: zc_min far above the message size, zc_min_fixed
 * below it.  Messages in the registered pool go zero copy on registered
 * buffers, messages elsewhere and pool messages under zc_min_fixed go
 * plain (a plain request does not even look for a registered buffer);
 * every byte arrives in order and every buffer is released once. */
Test(send, the_registered_threshold_applies_to_registered_buffers_only)
{
    ut_require("zc");
    zbuf_uring_t *u = ut_engine(ZBUF_URING_BACKEND_IO_URING);
    zbuf_pool_t *pool = registered_pool(u, 16384, 8);
    int a, b;
    st_tcp_pair(&a, &b);
    zbuf_uring_sock_opts_t o;
    zbuf_uring_sock_opts_init(&o);
    o.flags = ZBUF_URING_SOCK_ZEROCOPY | ZBUF_URING_SOCK_ZEROCOPY_ALWAYS;
    o.zc_min = 1u << 30;
    o.zc_min_fixed = 8192;
    zbuf_uring_sock_t *s = open_sock_opts(u, a, &o);
    struct st_reader r = { .limit = 0 };
    st_reader_start(&r, b, 65536, 0);
    atomic_int released = 0;
    struct ut_sent sent = { 0 };
    uint64_t off = 0;
    int pool_big = 0;
    for (int i = 0; i < 18; i++) {
        zbuf_t *z;
        if (i % 3 == 2) {
            z = st_pattern_zbuf(16384, off, 16384, &released); /* not registered */
            off += 16384;
        } else {
            size_t len = i % 3 == 0 ? 16384 : 4096; /* above, below zc_min_fixed */
            cr_assert_eq(zbuf_create(&z), 0);
            append_pool_bytes(u, pool, z, len, off);
            off += len;
            pool_big += len == 16384;
        }
        cr_assert_eq(zbuf_uring_send(s, z, 0, ut_sent_cb, &sent), 0);
        while (sent.calls < i + 1) /* one zbuf per request */
            zbuf_uring_run(u, 100);
    }
    int64_t t0 = st_now_ms();
    while ((zbuf_pool_available(pool) < 8 || atomic_load(&released) < 6) &&
           st_now_ms() - t0 < 10000)
        zbuf_uring_run(u, 50);
    cr_assert_eq(atomic_load(&released), 6, "every unregistered buffer released once");
    cr_assert_eq(zbuf_pool_available(pool), 8, "every pool buffer back");
    cr_assert_eq(sent.errors, 0);
    zbuf_uring_sock_stats_t st;
    zbuf_uring_sock_get_stats(s, &st);
    cr_assert_eq(st.zc_sends, (uint64_t)pool_big, "%llu zero-copy requests, %d wanted",
                 (unsigned long long)st.zc_sends, pool_big);
    cr_assert_eq(st.zc_fixed_sends, st.zc_sends);
    cr_assert_eq(st.messages_sent, 18);
    close_and_check(u, s, &r, off);
    close(b);
    cr_assert_eq(zbuf_uring_unregister_pool(u, pool), 0);
    ut_destroy(u);
    zbuf_pool_delete(pool);
}

/* reprobe_after counts the requests that could have gone zero copy, not
 * the small ones: on loopback every probe is copied and turns zero copy
 * off again, so 30 large requests (each waited for) make a probe of the
 * first and of every fifth after it, whatever small requests run between. */
Test(send, zero_copy_is_tried_again_after_reprobe_after_requests)
{
    ut_require("report");
    zbuf_uring_t *u = ut_engine(ZBUF_URING_BACKEND_IO_URING);
    int a, b;
    st_tcp_pair(&a, &b);
    zbuf_uring_sock_opts_t o;
    zbuf_uring_sock_opts_init(&o);
    o.flags = ZBUF_URING_SOCK_ZEROCOPY;
    o.zc_min = 4096;
    o.reprobe_after = 5;
    zbuf_uring_sock_t *s = open_sock_opts(u, a, &o);
    struct st_reader r = { .limit = 0 };
    st_reader_start(&r, b, 65536, 0);
    atomic_int released = 0;
    struct ut_sent sent = { 0 };
    struct counts c = { .sent = &sent, .released = &released };
    uint64_t off = 0;
    for (int i = 0; i < 60; i++) {
        size_t len = i % 2 ? 1024 : 65536; /* below zc_min, above it */
        zbuf_t *z = st_pattern_zbuf(len, off, len, &released);
        cr_assert_eq(zbuf_uring_send(s, z, 0, ut_sent_cb, &sent), 0);
        off += len;
        c.want++;
        c.bufs++;
        ut_run_until(u, all_done, &c, 10000, "the send and its release");
    }
    zbuf_uring_sock_stats_t st;
    zbuf_uring_sock_get_stats(s, &st);
    cr_assert_eq(st.zc_sends, 6, "%llu probes", (unsigned long long)st.zc_sends);
    cr_assert_eq(st.zc_turned_off, 6);
    cr_assert_eq(sent.errors, 0);
    close_and_check(u, s, &r, off);
    cr_assert_eq(atomic_load(&released), c.bufs, "every buffer released once");
    close(b);
    ut_destroy(u);
}

/* ------------------------------------------------------- short sends */

/* A tiny send buffer and a slow reader: requests take part of their bytes;
 * the engine sends the rest, in order. */
UT_BOTH(send, short_sends_are_completed_in_order)
{
    zbuf_uring_t *u = ut_engine(be);
    int a, b;
    st_tcp_pair(&a, &b);
    st_bufsizes(a, 16384, 0);
    st_bufsizes(b, 0, 32768);
    zbuf_uring_sock_t *s = open_sock(u, a, ZBUF_URING_SOCK_NO_WAITALL);
    struct st_reader r = { .limit = 0 };
    /* Slow: 3000 bytes every 100 us.  A reader that drains as fast as the
     * sender writes can let a 150000-byte request through whole on
     * loopback (seen on two idle cores), and then nothing here is short. */
    st_reader_start(&r, b, 3000, 100);
    atomic_int released = 0;
    struct ut_sent sent = { 0 };
    struct counts c = { .sent = &sent, .released = &released };
    uint64_t off = 0;
    for (int i = 0; i < 8; i++) {
        zbuf_t *z = st_pattern_zbuf(150000, off, 1500, &released);
        c.bufs += 100;
        cr_assert_eq(zbuf_uring_send(s, z, 0, ut_sent_cb, &sent), 0);
        off += 150000;
        c.want++;
    }
    ut_run_until(u, all_done, &c, 60000, "every send");
    cr_assert_eq(sent.errors, 0);
    zbuf_uring_sock_stats_t st;
    zbuf_uring_sock_get_stats(s, &st);
    cr_assert_gt(st.short_sends, 0, "no short send happened");
    cr_assert_eq(st.bytes_sent, off);
    close_and_wait(u, s);
    st_reader_join(&r);
    cr_assert_eq(r.got, off);
    cr_assert_eq(r.bad_at, UINT64_MAX);
    cr_assert_eq(atomic_load(&released), c.bufs);
    close(b);
    ut_destroy(u);
}

/* MSG_DONTWAIT on a full socket: -EAGAIN, and the zbuf comes back whole. */
struct back {
    int status;
    zbuf_t *z;
    int calls;
};

static void keep_back(zbuf_uring_sock_t *s, int status, zbuf_t *unsent, void *arg)
{
    (void)s;
    struct back *k = arg;
    k->calls++;
    k->status = status;
    k->z = unsent;
}

static bool back_called(void *arg)
{
    return ((struct back *)arg)->calls > 0;
}

UT_BOTH(send, dontwait_on_a_full_socket_gives_the_zbuf_back)
{
    zbuf_uring_t *u = ut_engine(be);
    int a, b;
    st_tcp_pair(&a, &b);
    st_bufsizes(a, 4096, 0);
    st_bufsizes(b, 0, 4096);
    /* Fill both socket buffers. */
    st_nonblock(a, true);
    char junk[4096];
    memset(junk, 0, sizeof junk);
    size_t filled = 0;
    while (send(a, junk, sizeof junk, MSG_DONTWAIT) > 0)
        filled += sizeof junk;
    st_nonblock(a, false);
    zbuf_uring_sock_t *s = open_sock(u, a, 0);
    atomic_int released = 0;
    zbuf_t *z = st_pattern_zbuf(50000, 0, 5000, &released);
    struct back k = { 0 };
    cr_assert_eq(zbuf_uring_send(s, z, MSG_DONTWAIT, keep_back, &k), 0);
    ut_run_until(u, back_called, &k, 10000, "the send callback");
    cr_assert_eq(k.status, -EAGAIN);
    cr_assert_not_null(k.z);
    cr_assert_eq(zbuf_length(k.z), 50000);
    uint8_t *buf = malloc(50000);
    cr_assert_eq(zbuf_copyout(k.z, 0, buf, 50000), 50000);
    cr_assert_eq(st_mismatch(buf, 50000, 0), (size_t)-1);
    free(buf);
    cr_assert_eq(atomic_load(&released), 0);
    zbuf_delete(k.z);
    cr_assert_eq(atomic_load(&released), 10);
    close_and_wait(u, s);
    close(b);
    (void)filled;
    ut_destroy(u);
}

/* ------------------------------------------------------- bad arguments */

UT_BOTH(send, bad_arguments_change_nothing)
{
    zbuf_uring_t *u = ut_engine(be);
    int a, b;
    st_tcp_pair(&a, &b);
    zbuf_uring_sock_t *s = open_sock(u, a, 0);
    atomic_int released = 0;
    zbuf_t *z = st_pattern_zbuf(1000, 0, 100, &released);
    struct sockaddr_in to = { .sin_family = AF_INET };
    cr_assert_eq(zbuf_uring_send(NULL, z, 0, NULL, NULL), -EINVAL);
    cr_assert_eq(zbuf_uring_send(s, NULL, 0, NULL, NULL), -EINVAL);
    cr_assert_eq(zbuf_uring_send(s, z, MSG_WAITALL, NULL, NULL), -EINVAL);
    cr_assert_eq(zbuf_uring_sendto(s, z, 0, (struct sockaddr *)&to, sizeof to, NULL, NULL),
                 -EINVAL, "sendto on a stream socket");
    cr_assert_eq(zbuf_uring_sendto(s, z, 0, (struct sockaddr *)&to, 4096, NULL, NULL), -EINVAL);
    cr_assert_eq(zbuf_length(z), 1000);
    cr_assert_eq(zbuf_seg_count(z), 10);
    cr_assert_eq(atomic_load(&released), 0);
    cr_assert_eq(zbuf_uring_recv_start(s, NULL, ut_sink_cb, NULL), -EINVAL);
    cr_assert_eq(zbuf_uring_connect(s, NULL, 0, NULL, NULL), -EINVAL);
    cr_assert_eq(zbuf_uring_sock_open(u, -1, NULL, &s), -EINVAL);
    int pipefd[2];
    cr_assert_eq(pipe(pipefd), 0);
    zbuf_uring_sock_t *bad;
    cr_assert_eq(zbuf_uring_sock_open(u, pipefd[0], NULL, &bad), -EINVAL, "not a socket");
    close(pipefd[0]);
    close(pipefd[1]);
    zbuf_uring_sock_opts_t o;
    zbuf_uring_sock_opts_init(&o);
    o.batch_max = 0;
    cr_assert_eq(zbuf_uring_sock_open(u, b, &o, &bad), -EINVAL);
    /* After a close: -EBADF, and still nothing consumed. */
    cr_assert_eq(zbuf_uring_sock_close(s, 1000, NULL, NULL), 0);
    cr_assert_eq(zbuf_uring_send(s, z, 0, NULL, NULL), -EBADF);
    cr_assert_eq(zbuf_uring_sock_close(s, 1000, NULL, NULL), -EBADF);
    ut_run_until(u, no_sockets, u, 10000, "the close");
    zbuf_delete(z);
    cr_assert_eq(atomic_load(&released), 10);
    zbuf_uring_opts_t eo;
    zbuf_uring_opts_init(&eo);
    eo.entries = 100;
    zbuf_uring_t *u2;
    cr_assert_eq(zbuf_uring_create(&eo, &u2), -EINVAL);
    close(b);
    ut_destroy(u);
}
