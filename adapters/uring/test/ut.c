/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include "ut.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zbuf/zbuf.h>

void ut_require(const char *need)
{
    zbuf_uring_probe_t p;
    zbuf_uring_probe(&p);
    if (!p.usable)
        cr_skip_test("io_uring unusable here: %s", p.reason);
    if (need == NULL)
        return;
    if (strcmp(need, "zc") == 0 && !p.send_zc)
        cr_skip_test("this kernel has no IORING_OP_SEND_ZC");
    if (strcmp(need, "report") == 0 && !p.zc_report_usage)
        cr_skip_test("this kernel has no IORING_SEND_ZC_REPORT_USAGE (Linux 6.2)");
    if (strcmp(need, "fixed") == 0 && !p.zc_fixed_vectored)
        cr_skip_test("this kernel has no vectored fixed buffers for SENDMSG_ZC (Linux 6.15)");
}

zbuf_uring_t *ut_engine(zbuf_uring_backend_t be)
{
    zbuf_uring_opts_t o;
    zbuf_uring_opts_init(&o);
    if (be == ZBUF_URING_BACKEND_IO_URING) {
        ut_require(NULL);
        o.flags = ZBUF_URING_NO_FALLBACK;
    } else {
        o.flags = ZBUF_URING_FORCE_EPOLL;
    }
    zbuf_uring_t *u;
    int rc = zbuf_uring_create(&o, &u);
    cr_assert_eq(rc, 0, "zbuf_uring_create: %s", zbuf_strerror(rc));
    cr_assert_eq(zbuf_uring_backend(u), be);
    return u;
}

void ut_run_until(zbuf_uring_t *u, bool (*pred)(void *), void *arg, int ms, const char *what)
{
    int64_t end = st_now_ms() + ms;
    while (!pred(arg)) {
        cr_assert(st_now_ms() < end, "timed out waiting for %s", what);
        int rc = zbuf_uring_run(u, 20);
        cr_assert(rc >= 0 || rc == -EINTR, "zbuf_uring_run: %s", zbuf_strerror(rc));
    }
}

void ut_destroy(zbuf_uring_t *u)
{
    int rc = zbuf_uring_destroy(u, 2000);
    cr_assert_eq(rc, 0, "zbuf_uring_destroy: %s", zbuf_strerror(rc));
}

void ut_sink_init(struct ut_sink *k)
{
    memset(k, 0, sizeof *k);
    k->bad_at = UINT64_MAX;
    k->end = 1;
}

void ut_sink_release(struct ut_sink *k)
{
    for (unsigned i = 0; i < k->nheld; i++)
        zbuf_delete(k->held[i]);
    k->nheld = 0;
}

void ut_sink_cb(zbuf_uring_sock_t *s, ssize_t n, zbuf_t *z, const zbuf_uring_rx_t *rx, void *arg)
{
    (void)s;
    (void)rx;
    struct ut_sink *k = arg;
    k->calls++;
    if (z == NULL) {
        k->end = n;
        return;
    }
    cr_assert_eq((size_t)n, zbuf_length(z));
    if (zbuf_seg_count(z) > k->maxsegs)
        k->maxsegs = zbuf_seg_count(z);
    uint8_t buf[4096];
    for (size_t off = 0; off < (size_t)n; off += sizeof buf) {
        size_t len = (size_t)n - off < sizeof buf ? (size_t)n - off : sizeof buf;
        cr_assert_eq(zbuf_copyout(z, off, buf, len), (ssize_t)len);
        size_t m = st_mismatch(buf, len, k->got + off);
        if (m != (size_t)-1 && k->bad_at == UINT64_MAX)
            k->bad_at = k->got + off + m;
    }
    k->got += (uint64_t)n;
    if (k->hold > 0 && k->nheld < sizeof k->held / sizeof k->held[0]) {
        k->held[k->nheld++] = z;
        if (k->nheld >= k->hold)
            ut_sink_release(k);
    } else {
        zbuf_delete(z);
    }
}

bool ut_sink_has(void *arg)
{
    struct ut_want *w = arg;
    return w->k->got >= w->bytes || w->k->end <= 0;
}

void ut_sent_cb(zbuf_uring_sock_t *s, int status, zbuf_t *unsent, void *arg)
{
    (void)s;
    struct ut_sent *r = arg;
    r->calls++;
    if (status != 0) {
        r->status = status;
        r->errors++;
    }
    r->unsent += zbuf_length(unsent);
    zbuf_delete(unsent);
}

static bool no_sockets(void *arg)
{
    return zbuf_uring_sock_count(arg) == 0;
}

void ut_rx_open(struct ut_rx *x, zbuf_uring_backend_t be, size_t size, size_t count,
                unsigned entries, bool udp)
{
    x->u = ut_engine(be);
    cr_assert_eq(zbuf_pool_create(size, count, &x->pool), 0);
    cr_assert_eq(zbuf_uring_bufring_create(x->u, x->pool, entries, &x->br), 0);
    int a;
    if (udp)
        st_udp_pair(&a, &x->peer, false, NULL);
    else
        st_tcp_pair(&a, &x->peer);
    cr_assert_eq(zbuf_uring_sock_open(x->u, a, NULL, &x->s), 0);
}

void ut_rx_close(struct ut_rx *x)
{
    if (x->peer >= 0)
        close(x->peer);
    cr_assert_eq(zbuf_uring_bufring_delete(x->br), -EBUSY, "the socket still uses the ring");
    cr_assert_eq(zbuf_uring_sock_close(x->s, 1000, NULL, NULL), 0);
    ut_run_until(x->u, no_sockets, x->u, 10000, "the close");
    cr_assert_eq(zbuf_uring_bufring_delete(x->br), 0);
    ut_destroy(x->u);
    cr_assert_eq(zbuf_pool_available(x->pool), zbuf_pool_capacity(x->pool),
                 "every buffer came back");
    zbuf_pool_delete(x->pool);
}

void ut_log_line(void *arg, const char *line)
{
    struct ut_logged *l = arg;
    l->lines++;
    snprintf(l->last, sizeof l->last, "%s", line);
}
