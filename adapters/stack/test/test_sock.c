/* The socket-like convenience layer over two stacks and the in-memory link. */
#include <errno.h>
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
