/* SPDX-License-Identifier: MIT */
/*
 * An engine driven by a libuv loop: an echo server on the engine (accept,
 * receive, send back) while a client thread writes and reads plain
 * sockets; uv_run() returns by itself once the server closed its last
 * socket.  On both machineries.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include <zbuf/uring_uv.h>

#include "ut.h"

ZT_SUITE(uring_uv);

struct server {
    zbuf_uring_t *u;
    zbuf_uring_bufring_t *br;
    zbuf_uring_sock_t *listener;
    uint64_t echoed;
    int closed;
};

static void on_closed(zbuf_uring_sock_t *s, void *arg)
{
    (void)s;
    ((struct server *)arg)->closed++;
}

/* Our side is done too: close this connection and the listener; the loop
 * then has nothing left and uv_run() returns. */
static void on_shut(zbuf_uring_sock_t *s, int status, void *arg)
{
    struct server *sv = arg;
    cr_assert_eq(status, 0);
    zbuf_uring_sock_close(s, 1000, on_closed, sv);
    zbuf_uring_sock_close(sv->listener, 1000, on_closed, sv);
}

static void on_data(zbuf_uring_sock_t *s, ssize_t n, zbuf_t *z, const zbuf_uring_rx_t *rx, void *arg)
{
    (void)rx;
    struct server *sv = arg;
    if (z == NULL) {
        /* The client finished: end our side once the echo is out. */
        cr_assert_eq(zbuf_uring_shutdown(s, on_shut, sv), 0);
        return;
    }
    sv->echoed += (uint64_t)n;
    cr_assert_eq(zbuf_uring_send(s, z, 0, NULL, NULL), 0);
}

static void on_accept(zbuf_uring_sock_t *l, int fd, void *arg)
{
    (void)l;
    struct server *sv = arg;
    cr_assert_geq(fd, 0);
    zbuf_uring_sock_t *c;
    cr_assert_eq(zbuf_uring_sock_open(sv->u, fd, NULL, &c), 0);
    cr_assert_eq(zbuf_uring_recv_start(c, sv->br, on_data, sv), 0);
    zbuf_uring_accept_stop(l);
}

struct client {
    struct sockaddr_in to;
    uint64_t total, got;
    bool bad;
    pthread_t tid;
};

static void *client_main(void *arg)
{
    struct client *c = arg;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (connect(fd, (struct sockaddr *)&c->to, sizeof c->to) != 0)
        return NULL;
    uint8_t out[16384], in[16384];
    uint64_t sent = 0;
    while (c->got < c->total) {
        if (sent < c->total) {
            size_t n = sent + sizeof out <= c->total ? sizeof out : (size_t)(c->total - sent);
            st_fill(out, n, sent);
            ssize_t w = write(fd, out, n);
            if (w <= 0)
                break;
            sent += (uint64_t)w;
            if (sent == c->total)
                shutdown(fd, SHUT_WR);
        }
        ssize_t r = recv(fd, in, sizeof in, sent < c->total ? MSG_DONTWAIT : 0);
        if (r == 0)
            break;
        if (r > 0) {
            if (st_mismatch(in, (size_t)r, c->got) != (size_t)-1)
                c->bad = true;
            c->got += (uint64_t)r;
        }
    }
    close(fd);
    return NULL;
}

struct uvclosed {
    int calls;
};

static void on_uv_closed(zbuf_uring_uv_t *h, void *arg)
{
    (void)h;
    ((struct uvclosed *)arg)->calls++;
}

UT_BOTH(uring_uv, an_echo_server_on_the_engine_runs_inside_a_libuv_loop)
{
    zbuf_uring_t *u = ut_engine(be);
    uv_loop_t loop;
    cr_assert_eq(uv_loop_init(&loop), 0);
    zbuf_uring_uv_t *h;
    cr_assert_eq(zbuf_uring_uv_attach(&loop, u, &h), 0);
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(16384, 32, &pool), 0);
    struct server sv = { .u = u };
    cr_assert_eq(zbuf_uring_bufring_create(u, pool, 0, &sv.br), 0);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct client c = { .total = 4u << 20 };
    c.to = (struct sockaddr_in){ .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t sl = sizeof c.to;
    cr_assert_eq(bind(lfd, (struct sockaddr *)&c.to, sizeof c.to), 0);
    cr_assert_eq(listen(lfd, 4), 0);
    cr_assert_eq(getsockname(lfd, (struct sockaddr *)&c.to, &sl), 0);
    cr_assert_eq(zbuf_uring_sock_open(u, lfd, NULL, &sv.listener), 0);
    cr_assert_eq(zbuf_uring_accept_start(sv.listener, on_accept, &sv), 0);
    cr_assert_eq(pthread_create(&c.tid, NULL, client_main, &c), 0);
    cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    pthread_join(c.tid, NULL);
    cr_assert_eq(sv.closed, 2, "uv_run() returned before the closes");
    cr_assert_eq(zbuf_uring_sock_count(u), 0);
    cr_assert_eq(c.got, c.total);
    cr_assert(!c.bad);
    cr_assert_eq(sv.echoed, c.total);
    struct uvclosed uc = { 0 };
    zbuf_uring_uv_close(h, on_uv_closed, &uc);
    cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    cr_assert_eq(uc.calls, 1);
    cr_assert_eq(uv_loop_close(&loop), 0);
    cr_assert_eq(zbuf_uring_bufring_delete(sv.br), 0);
    ut_destroy(u);
    zbuf_pool_delete(pool);
}
