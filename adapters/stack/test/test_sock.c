/* SPDX-License-Identifier: MIT */
/* The socket-like convenience layer over two stacks and the in-memory link. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "support.h"

ZT_SUITE(sock);

struct ctx {
    zbuf_ip_sock_t *k;
    unsigned want;
};

static bool has_event(void *arg)
{
    struct ctx *c = arg;
    return (zbuf_ip_sock_events(c->k) & c->want) != 0;
}

static void wait_event(zh_pair_t *p, zbuf_ip_sock_t *k, unsigned ev)
{
    struct ctx c = {k, ev};
    cr_assert(zh_pair_run(p, has_event, &c, 10000), "event %#x not seen (have %#x)", ev,
              zbuf_ip_sock_events(k));
}

static void count_release(void *data, size_t size, void *arg)
{
    (void)data;
    (void)size;
    ++*(int *)arg;
}

Test(sock, connect_accept_send_larger_than_the_buffer_recv_eof)
{
    zh_pair_t p;
    zh_pair_init(&p, NULL, NULL);
    zbuf_ip_sock_t *l, *c, *a;
    cr_assert_eq(zbuf_ip_sock_listen(p.b, ZBUF_IP_ANY, 7000, 4, &l), 0);
    cr_assert_eq(zbuf_ip_sock_accept(l, &a), -EAGAIN);
    cr_assert_eq(zbuf_ip_sock_connect(p.a, ZH_B, 7000, &c), 0);
    wait_event(&p, l, ZBUF_IP_SOCK_ACCEPTABLE);
    cr_assert_eq(zbuf_ip_sock_accept(l, &a), 0);
    wait_event(&p, c, ZBUF_IP_SOCK_CONNECTED);

    /* 1 MiB in one buffer: four times the send buffer, taken whole. */
    size_t n = 1u << 20;
    uint8_t *buf = malloc(n);
    for (size_t i = 0; i < n; i++)
        buf[i] = zh_pattern(i, 9);
    int released = 0;
    cr_assert_eq(zbuf_ip_sock_bufsend(c, buf, n, count_release, &released), 0);
    cr_assert(!(zbuf_ip_sock_events(c) & ZBUF_IP_SOCK_WRITABLE), "the rest waits in the socket");
    zbuf_t *more;
    zbuf_create(&more);
    zbuf_append_copy(more, "x", 1);
    cr_assert_eq(zbuf_ip_sock_send(c, more), -EAGAIN);
    zbuf_delete(more);
    cr_assert_eq(zbuf_ip_sock_shutdown(c), 0);

    size_t got = 0;
    bool eof = false;
    for (int round = 0; round < 10000 && !eof; round++) {
        wait_event(&p, a, ZBUF_IP_SOCK_READABLE);
        zbuf_t *z;
        ssize_t r = zbuf_ip_sock_recv(a, 100000, &z);
        cr_assert_geq(r, 0, "recv: %zd", r);
        if (r == 0) {
            cr_assert_null(z);
            eof = true;
            break;
        }
        cr_assert_leq(r, 100000);
        for (zbuf_seg_t *s = zbuf_seg_first(z); s; s = zbuf_seg_next(z, s)) {
            const uint8_t *d = zbuf_seg_data(z, s);
            for (size_t i = 0; i < zbuf_seg_length(z, s); i++)
                cr_assert_eq(d[i], zh_pattern(got + i, 9), "byte %zu", got + i);
            got += zbuf_seg_length(z, s);
        }
        zbuf_delete(z);
    }
    cr_assert(eof);
    cr_assert_eq(got, n);
    zh_pair_run(&p, NULL, NULL, 1000);
    cr_assert_eq(released, 1, "the buffer is released once, after the acks");
    free(buf);
    zbuf_ip_sock_close(a);
    zbuf_ip_sock_close(c);
    zbuf_ip_sock_close(l);
    zh_pair_fini(&p);
}

Test(sock, refused_connection_reports_the_error)
{
    zh_pair_t p;
    zh_pair_init(&p, NULL, NULL);
    zbuf_ip_sock_t *c;
    cr_assert_eq(zbuf_ip_sock_connect(p.a, ZH_B, 7001, &c), 0);
    wait_event(&p, c, ZBUF_IP_SOCK_ERROR);
    zbuf_t *z;
    cr_assert_eq(zbuf_ip_sock_recv(c, 10, &z), -ECONNREFUSED);
    cr_assert_eq(zbuf_ip_sock_error(c), -ECONNREFUSED);
    int released = 0;
    static char data[10];
    cr_assert_eq(zbuf_ip_sock_bufsend(c, data, sizeof data, count_release, &released), -EPIPE);
    cr_assert_eq(released, 0, "a refused send leaves the buffer to the caller");
    zbuf_ip_sock_close(c);
    zh_pair_fini(&p);
}

Test(sock, closing_a_listener_resets_unaccepted_connections)
{
    zh_pair_t p;
    zh_pair_init(&p, NULL, NULL);
    zbuf_ip_sock_t *l, *c;
    zbuf_ip_sock_listen(p.b, ZBUF_IP_ANY, 7002, 2, &l);
    zbuf_ip_sock_connect(p.a, ZH_B, 7002, &c);
    wait_event(&p, l, ZBUF_IP_SOCK_ACCEPTABLE);
    zbuf_ip_sock_close(l);
    wait_event(&p, c, ZBUF_IP_SOCK_ERROR);
    cr_assert_eq(zbuf_ip_sock_error(c), -ECONNRESET);
    zbuf_ip_sock_close(c);
    zh_pair_fini(&p);
}

/* Read everything from `k` until end of stream, checking the pattern. */
static size_t drain_until_eof(zh_pair_t *p, zbuf_ip_sock_t *k, uint32_t salt)
{
    size_t got = 0;
    for (int round = 0; round < 100000; round++) {
        wait_event(p, k, ZBUF_IP_SOCK_READABLE);
        zbuf_t *z;
        ssize_t r = zbuf_ip_sock_recv(k, ZBUF_TO_END, &z);
        cr_assert_geq(r, 0, "recv: %zd", r);
        if (r == 0)
            return got;
        for (zbuf_seg_t *s = zbuf_seg_first(z); s; s = zbuf_seg_next(z, s)) {
            const uint8_t *d = zbuf_seg_data(z, s);
            for (size_t i = 0; i < zbuf_seg_length(z, s); i++)
                cr_assert_eq(d[i], zh_pattern(got + i, salt), "byte %zu", got + i);
            got += zbuf_seg_length(z, s);
        }
        zbuf_delete(z);
    }
    cr_assert_fail("no end of stream");
    return got;
}

static uint8_t *pattern_buf(size_t n, uint32_t salt)
{
    uint8_t *buf = malloc(n);
    for (size_t i = 0; i < n; i++)
        buf[i] = zh_pattern(i, salt);
    return buf;
}

static void connected_pair(zh_pair_t *p, uint16_t port, zbuf_ip_sock_t **l, zbuf_ip_sock_t **c,
                           zbuf_ip_sock_t **a)
{
    cr_assert_eq(zbuf_ip_sock_listen(p->b, ZBUF_IP_ANY, port, 4, l), 0);
    cr_assert_eq(zbuf_ip_sock_connect(p->a, ZH_B, port, c), 0);
    wait_event(p, *l, ZBUF_IP_SOCK_ACCEPTABLE);
    cr_assert_eq(zbuf_ip_sock_accept(*l, a), 0);
    wait_event(p, *c, ZBUF_IP_SOCK_CONNECTED);
}

/* zbuf_ip_sock_bufsend() 1 MiB of pattern `salt` (four times the send
 * buffer) on c, counting its release; the caller frees the buffer. */
static uint8_t *bufsend_mib(zbuf_ip_sock_t *c, uint32_t salt, int *released)
{
    uint8_t *buf = pattern_buf(1u << 20, salt);
    cr_assert_eq(zbuf_ip_sock_bufsend(c, buf, 1u << 20, count_release, released), 0);
    return buf;
}

Test(sock, close_right_after_a_send_larger_than_the_buffer_delivers_every_byte)
{
    zh_pair_t p;
    zbuf_ip_config_t cfg;
    zbuf_ip_config_init(&cfg);
    cfg.tcp_time_wait_ms = 100;
    zh_pair_init(&p, NULL, &cfg);
    zbuf_ip_sock_t *l, *c, *a;
    connected_pair(&p, 7003, &l, &c, &a);

    /* Both send 1 MiB, four times the send buffer; c closes at once with
     * most of its bytes still in the socket and unread data arriving. */
    size_t n = 1u << 20;
    int rel_c = 0, rel_a = 0;
    uint8_t *from_a = bufsend_mib(a, 4, &rel_a), *from_c = bufsend_mib(c, 3, &rel_c);
    zh_pair_run(&p, NULL, NULL, 5);
    zbuf_ip_sock_close(c);
    cr_assert_eq(rel_c, 0, "queued bytes are not released by the close");

    cr_assert_eq(drain_until_eof(&p, a, 3), n, "every byte sent before the close arrives");
    zh_pair_run(&p, NULL, NULL, 2000);
    cr_assert_eq(rel_c, 1, "released once, after the peer acknowledged it");
    cr_assert_eq(rel_a, 1, "the closed side kept acknowledging (and discarding) a's bytes");
    zbuf_ip_stats_t st;
    zbuf_ip_stats(p.a, &st);
    cr_assert_eq(st.tcp_pcbs, 0, "the closed connection is gone (TIME_WAIT ended)");
    zbuf_ip_sock_close(a);
    zbuf_ip_sock_close(l);
    zh_pair_run(&p, NULL, NULL, 2000);
    zh_pair_fini(&p);
    free(from_c);
    free(from_a);
}

Test(sock, closed_socket_still_sending_is_freed_by_a_reset)
{
    zh_pair_t p;
    zh_pair_init(&p, NULL, NULL);
    zbuf_ip_sock_t *l, *c;
    cr_assert_eq(zbuf_ip_sock_listen(p.b, ZBUF_IP_ANY, 7004, 4, &l), 0);
    cr_assert_eq(zbuf_ip_sock_connect(p.a, ZH_B, 7004, &c), 0);
    wait_event(&p, l, ZBUF_IP_SOCK_ACCEPTABLE);
    int released = 0;
    uint8_t *buf = bufsend_mib(c, 5, &released);
    zbuf_ip_sock_close(c);
    zbuf_ip_sock_close(l); /* resets the unaccepted connection */
    zh_pair_run(&p, NULL, NULL, 2000);
    cr_assert_eq(released, 1, "the reset released the queued bytes, once");
    zbuf_ip_stats_t st;
    zbuf_ip_stats(p.a, &st);
    cr_assert_eq(st.tcp_pcbs, 0);
    zh_pair_fini(&p);
    free(buf);
}

Test(sock, deleting_the_stack_releases_what_a_closed_socket_still_held)
{
    zh_pair_t p;
    zh_pair_init(&p, NULL, NULL);
    zbuf_ip_sock_t *l, *c, *a;
    connected_pair(&p, 7005, &l, &c, &a);
    int released = 0;
    uint8_t *buf = bufsend_mib(c, 6, &released);
    zbuf_ip_sock_close(c);
    zh_pair_run(&p, NULL, NULL, 2);
    cr_assert_eq(released, 0);
    zbuf_ip_sock_close(a);
    zbuf_ip_sock_close(l);
    zh_pair_fini(&p); /* the suite's leak check covers the orphan itself */
    cr_assert_eq(released, 1);
    free(buf);
}

Test(sock, deleting_the_stack_runs_each_orphans_teardown_once)
{
    zh_pair_t p;
    zh_pair_init(&p, NULL, NULL);
    enum { N = 3 };
    zbuf_ip_sock_t *l, *c[N], *a[N];
    cr_assert_eq(zbuf_ip_sock_listen(p.b, ZBUF_IP_ANY, 7009, N, &l), 0);
    int released[N] = {0};
    uint8_t *buf[N];
    for (int i = 0; i < N; i++) {
        cr_assert_eq(zbuf_ip_sock_connect(p.a, ZH_B, 7009, &c[i]), 0);
        wait_event(&p, l, ZBUF_IP_SOCK_ACCEPTABLE);
        cr_assert_eq(zbuf_ip_sock_accept(l, &a[i]), 0);
        wait_event(&p, c[i], ZBUF_IP_SOCK_CONNECTED);
        buf[i] = bufsend_mib(c[i], 20 + (uint32_t)i, &released[i]);
    }
    /* Close the middle one first, so the hooks are added out of order. */
    zbuf_ip_sock_close(c[1]);
    zbuf_ip_sock_close(c[0]);
    zbuf_ip_sock_close(c[2]);
    zh_pair_run(&p, NULL, NULL, 2);
    for (int i = 0; i < N; i++)
        cr_assert_eq(released[i], 0, "orphan %d still holds its bytes", i);
    for (int i = 0; i < N; i++)
        zbuf_ip_sock_close(a[i]);
    zbuf_ip_sock_close(l);
    zh_pair_fini(&p); /* deletes a's stack with the three orphans on it */
    for (int i = 0; i < N; i++) {
        cr_assert_eq(released[i], 1, "orphan %d released its bytes once", i);
        free(buf[i]);
    }
}

Test(sock, closed_socket_facing_a_shut_window_gives_up_after_bounded_probes)
{
    zh_pair_t p;
    zh_pair_init(&p, NULL, NULL);
    zbuf_ip_sock_t *l, *c, *a;
    connected_pair(&p, 7006, &l, &c, &a);
    /* a never reads: its window closes for good.  c sends 1 MiB and closes. */
    int released = 0;
    uint8_t *buf = bufsend_mib(c, 7, &released);
    zh_pair_run(&p, NULL, NULL, 50);
    zbuf_ip_sock_close(c);
    zbuf_ip_stats_t st;
    zh_pair_run(&p, NULL, NULL, 30000);
    zbuf_ip_stats(p.a, &st);
    cr_assert_eq(released, 0, "still probing after 30 s");
    cr_assert_gt(st.tcp_window_probes, 0);
    zh_pair_run(&p, NULL, NULL, 10u * 60 * 1000);
    zbuf_ip_stats(p.a, &st);
    cr_assert_eq(st.tcp_pcbs, 0, "given up");
    cr_assert_leq(st.tcp_window_probes, ZBUF_IP_TCP_ORPHAN_PROBES + 1);
    cr_assert_eq(st.tcp_rst_tx, 1);
    wait_event(&p, a, ZBUF_IP_SOCK_ERROR);
    cr_assert_eq(zbuf_ip_sock_error(a), -ECONNRESET, "the peer accepted our reset");
    /* The link is zero-copy: a's unread bytes are c's buffer. */
    cr_assert_eq(released, 0);
    zbuf_ip_sock_close(a);
    cr_assert_eq(released, 1, "released once, by the last holder");
    zbuf_ip_sock_close(l);
    zh_pair_fini(&p);
    free(buf);
}
