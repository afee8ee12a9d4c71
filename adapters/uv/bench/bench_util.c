/* SPDX-License-Identifier: MIT */
#include "bench_util.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

zbuf_pool_t *bench_warm_pool(size_t bufsize, size_t count)
{
    zbuf_pool_t *p;
    zbuf_buf_t **all = calloc(count, sizeof(*all));
    int rc = zbuf_pool_create(bufsize, count, &p);
    if (rc != 0 || all == NULL)
        bench_die("pool", rc ? rc : ENOMEM);
    for (size_t i = 0; i < count; i++) {
        if ((rc = zbuf_pool_get(p, &all[i])) != 0)
            bench_die("pool", rc);
        memset(zbuf_buf_data(all[i]), 0, bufsize);
    }
    for (size_t i = 0; i < count; i++)
        zbuf_buf_unref(all[i]);
    free(all);
    return p;
}

/* BENCH_TCP_CC, if set, as the congestion control of the TCP socket fd. */
static void pin_cc(int fd)
{
    bench_tcp_cc_or_die(fd, getenv("BENCH_TCP_CC"));
}

int bench_connect_loopback(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int one = 1;
    if (fd < 0)
        bench_die("socket", errno);
    pin_cc(fd);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
        bench_die("connect", errno);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

void bench_accept(uv_stream_t *listener, int status, zbuf_uv_stream_t *zs)
{
    if (status < 0)
        bench_die("accept", status);
    uv_tcp_init(listener->loop, &zs->tcp);
    zbuf_uv_stream_init(zs);
    if (uv_accept(listener, &zs->stream) != 0)
        bench_die("accept", EINVAL);
}

void bench_serve(uv_loop_t *loop, pthread_mutex_t *mu, pthread_cond_t *cv, bool *ready)
{
    pthread_mutex_lock(mu);
    *ready = true;
    pthread_cond_signal(cv);
    pthread_mutex_unlock(mu);
    uv_run(loop, UV_RUN_DEFAULT);
    if (uv_loop_close(loop) != 0)
        bench_die("uv_loop_close", EBUSY);
}

void bench_wait_ready(pthread_mutex_t *mu, pthread_cond_t *cv, bool *ready)
{
    pthread_mutex_lock(mu);
    while (!*ready)
        pthread_cond_wait(cv, mu);
    pthread_mutex_unlock(mu);
}

int bench_listen_loopback(uv_loop_t *loop, uv_tcp_t *t, int backlog, uv_connection_cb cb)
{
    struct sockaddr_in a;
    struct sockaddr_storage bound;
    int len = sizeof(bound);
    uv_os_fd_t fd;
    uv_ip4_addr("127.0.0.1", 0, &a);
    uv_tcp_init(loop, t);
    if (uv_tcp_bind(t, (const struct sockaddr *)&a, 0) != 0 ||
        uv_fileno((uv_handle_t *)t, &fd) != 0)
        bench_die("bind", errno);
    pin_cc(fd);
    if (uv_listen((uv_stream_t *)t, backlog, cb) != 0)
        bench_die("listen", errno);
    uv_tcp_getsockname(t, (struct sockaddr *)&bound, &len);
    return ntohs(((struct sockaddr_in *)&bound)->sin_port);
}
