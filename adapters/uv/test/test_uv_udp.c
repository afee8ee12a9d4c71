/* SPDX-License-Identifier: MIT */
/*
 * UDP through the adapter on loopback: a zbuf of many segments leaves as one
 * datagram, datagrams arrive as zbufs in pool buffers, truncation and pool
 * exhaustion are reported, and refused sends leave the zbuf to the caller.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "uvt.h"

UVT_SUITE(uv_udp);

struct dgrams {
    zbuf_t *got[64];
    unsigned flags[64];
    int n;
    int enobufs, errors;
    bool hold;
};

static void on_dgram(zbuf_uv_udp_t *u, ssize_t status, zbuf_t *z, const struct sockaddr *addr,
                     unsigned flags)
{
    struct dgrams *d = u->handle.data;
    if (status == UV_ENOBUFS) {
        cr_assert_null(z);
        d->enobufs++;
        return;
    }
    if (status < 0) {
        d->errors++;
        return;
    }
    cr_assert_not_null(z);
    cr_assert_not_null(addr);
    cr_assert_eq(zbuf_length(z), (size_t)status);
    zt_check(z);
    cr_assert_lt(d->n, 64);
    d->flags[d->n] = flags;
    d->got[d->n++] = z;
}

struct udp_pair {
    zbuf_uv_udp_t tx, rx;
    struct sockaddr_storage rx_addr;
};

static void udp_open(struct udp_pair *p, struct dgrams *d, zbuf_pool_t *pool)
{
    struct sockaddr_in a;
    int len = sizeof(p->rx_addr);
    memset(p, 0, sizeof(*p));
    cr_assert_eq(uv_ip4_addr("127.0.0.1", 0, &a), 0);
    cr_assert_eq(uv_udp_init(uvt_loop, &p->tx.udp), 0);
    cr_assert_eq(uv_udp_init(uvt_loop, &p->rx.udp), 0);
    cr_assert_eq(zbuf_uv_udp_init(&p->tx), 0);
    cr_assert_eq(zbuf_uv_udp_init(&p->rx), 0);
    cr_assert_eq(uv_udp_bind(&p->rx.udp, (const struct sockaddr *)&a, 0), 0);
    cr_assert_eq(uv_udp_getsockname(&p->rx.udp, (struct sockaddr *)&p->rx_addr, &len), 0);
    p->rx.handle.data = d;
    cr_assert_eq(zbuf_uv_udp_recv_start(&p->rx, pool, on_dgram), 0);
}

static int udp_closed;

static void on_udp_closed(uv_handle_t *h)
{
    (void)h;
    udp_closed++;
}

static void udp_close(struct udp_pair *p, struct dgrams *d)
{
    udp_closed = 0;
    zbuf_uv_udp_close(&p->tx, on_udp_closed);
    zbuf_uv_udp_close(&p->rx, on_udp_closed);
    for (int i = 0; i < 100 && udp_closed < 2; i++)
        uvt_run_for(2);
    cr_assert_eq(udp_closed, 2);
    for (int i = 0; i < d->n; i++)
        zbuf_delete(d->got[i]);
    d->n = 0;
}

struct sent {
    int calls, status, released_at_cb;
    const int *released;
};

static void on_sent(uv_udp_t *u, int status, void *arg)
{
    (void)u;
    struct sent *s = arg;
    s->calls++;
    s->status = status;
    s->released_at_cb = s->released ? *s->released : -1;
}

/* Run until d->n reaches n. */
static void wait_dgrams(struct dgrams *d, int n)
{
    for (int i = 0; i < 1000 && d->n < n; i++)
        uvt_run_for(2);
    cr_assert_geq(d->n, n, "%d datagrams, expected %d", d->n, n);
}

Test(uv_udp, a_zbuf_of_many_segments_is_one_datagram)
{
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(2048, 16, &pool), 0);
    struct dgrams d = {0};
    struct udp_pair p;
    udp_open(&p, &d, pool);
    int released = 0;
    struct sent s = {.released = &released};
    const size_t sizes[] = {100, 1, 500, 3};
    zbuf_t *z = uvt_make(1400, 21, 0, sizes, 4, &released);
    int nsegs = (int)zbuf_seg_count(z);
    cr_assert_eq(zbuf_uv_udp_send(&p.tx.udp, z, (const struct sockaddr *)&p.rx_addr, on_sent, &s),
                 0);
    cr_assert_eq(s.calls, 0);
    wait_dgrams(&d, 1);
    uvt_run_until(&s.calls, 2000, "send callback");
    cr_assert_eq(s.status, 0);
    cr_assert_eq(s.released_at_cb, nsegs);
    cr_assert_eq(zbuf_length(d.got[0]), 1400);
    cr_assert_eq(zbuf_seg_count(d.got[0]), 1, "a datagram lands in one pool buffer");
    cr_assert_eq(d.flags[0] & UV_UDP_PARTIAL, 0);
    uint8_t buf[1400];
    cr_assert_eq(zbuf_copyout(d.got[0], 0, buf, 1400), 1400);
    for (size_t i = 0; i < 1400; i++)
        cr_assert_eq(buf[i], uvt_byte(21, i));
    uvt_run_for(5);
    cr_assert_eq(s.calls, 1);
    cr_assert_eq(d.n, 1);
    udp_close(&p, &d);
    zbuf_pool_delete(pool);
}

Test(uv_udp, an_empty_datagram_arrives_as_an_empty_zbuf)
{
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(2048, 4, &pool), 0);
    struct dgrams d = {0};
    struct udp_pair p;
    udp_open(&p, &d, pool);
    struct sent s = {0};
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_uv_udp_send(&p.tx.udp, z, (const struct sockaddr *)&p.rx_addr, on_sent, &s),
                 0);
    wait_dgrams(&d, 1);
    cr_assert_eq(zbuf_length(d.got[0]), 0);
    uvt_run_until(&s.calls, 2000, "send callback");
    cr_assert_eq(s.status, 0);
    udp_close(&p, &d);
    zbuf_pool_delete(pool);
}

Test(uv_udp, a_long_datagram_is_truncated_and_flagged)
{
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(256, 4, &pool), 0);
    struct dgrams d = {0};
    struct udp_pair p;
    udp_open(&p, &d, pool);
    const size_t sizes[] = {1000};
    cr_assert_eq(zbuf_uv_udp_send(&p.tx.udp, uvt_make(1000, 22, 0, sizes, 1, NULL),
                                  (const struct sockaddr *)&p.rx_addr, NULL, NULL),
                 0);
    wait_dgrams(&d, 1);
    cr_assert_eq(zbuf_length(d.got[0]), 256);
    cr_assert(d.flags[0] & UV_UDP_PARTIAL);
    udp_close(&p, &d);
    zbuf_pool_delete(pool);
}

Test(uv_udp, pool_exhaustion_pauses_receiving_until_buffers_return)
{
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(512, 2, &pool), 0);
    struct dgrams d = {0};
    struct udp_pair p;
    udp_open(&p, &d, pool);
    for (int i = 0; i < 5; i++) {
        const size_t sizes[] = {100};
        cr_assert_eq(zbuf_uv_udp_send(&p.tx.udp, uvt_make(100, (uint32_t)i, 0, sizes, 1, NULL),
                                      (const struct sockaddr *)&p.rx_addr, NULL, NULL),
                     0);
    }
    uvt_run_until(&d.enobufs, 2000, "UV_ENOBUFS");
    uvt_run_for(20);
    cr_assert_eq(d.n, 2, "as many datagrams as pool buffers");
    cr_assert_eq(d.enobufs, 1);
    for (int i = 0; i < d.n; i++)
        zbuf_delete(d.got[i]);
    d.n = 0;
    wait_dgrams(&d, 2);
    for (int i = 0; i < d.n; i++)
        zbuf_delete(d.got[i]);
    d.n = 0;
    wait_dgrams(&d, 1);
    cr_assert_eq(zbuf_length(d.got[0]), 100);
    uint8_t b;
    cr_assert_eq(zbuf_copyout(d.got[0], 0, &b, 1), 1);
    cr_assert_eq(b, uvt_byte(4, 0), "the fifth datagram came last");
    cr_assert_eq(d.errors, 0);
    udp_close(&p, &d);
    zbuf_pool_delete(pool);
}

Test(uv_udp, refused_sends_leave_the_zbuf_with_the_caller)
{
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(512, 2, &pool), 0);
    struct dgrams d = {0};
    struct udp_pair p;
    udp_open(&p, &d, pool);
    const struct sockaddr *to = (const struct sockaddr *)&p.rx_addr;
    int released = 0;
    const size_t one[] = {1};
    zbuf_t *z = uvt_make(ZBUF_UV_BUFS_PER_WRITE + 1, 1, 0, one, 1, &released);
    cr_assert_eq(zbuf_uv_udp_send(&p.tx.udp, z, to, NULL, NULL), -EMSGSIZE);
    cr_assert_eq(zbuf_uv_udp_try_send(&p.tx.udp, z, to), -EMSGSIZE);
    zt_check(z);
    cr_assert_eq(released, 0);
    zbuf_delete(z);

    char path[] = "/tmp/zbuf-uv-udp-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    unlink(path);
    cr_assert_eq(write(fd, "file bytes", 10), 10);
    zbuf_buf_t *fb;
    cr_assert_eq(zbuf_buf_wrap_file(fd, 0, 10, NULL, NULL, &fb), 0);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_ref(z, fb, 0, 10), 0);
    zbuf_buf_unref(fb);
    cr_assert_eq(zbuf_uv_udp_send(&p.tx.udp, z, to, NULL, NULL), -ENOTSUP);
    cr_assert_eq(zbuf_length(z), 10);
    zbuf_delete(z);
    close(fd);
    cr_assert_eq(zbuf_uv_udp_send(NULL, NULL, to, NULL, NULL), -EINVAL);
    uvt_run_for(10);
    cr_assert_eq(d.n, 0, "nothing was sent");
    udp_close(&p, &d);
    zbuf_pool_delete(pool);
}

Test(uv_udp, try_send_sends_now_and_consumes)
{
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(2048, 8, &pool), 0);
    struct dgrams d = {0};
    struct udp_pair p;
    udp_open(&p, &d, pool);
    int released = 0;
    const size_t sizes[] = {10, 20};
    zbuf_t *z = uvt_make(300, 23, 0, sizes, 2, &released);
    int nsegs = (int)zbuf_seg_count(z);
    ssize_t r = zbuf_uv_udp_try_send(&p.tx.udp, z, (const struct sockaddr *)&p.rx_addr);
    cr_assert_eq(r, 300);
    cr_assert_eq(released, nsegs, "the zbuf was deleted by the call");
    wait_dgrams(&d, 1);
    cr_assert_eq(zbuf_length(d.got[0]), 300);
    udp_close(&p, &d);
    zbuf_pool_delete(pool);
}
