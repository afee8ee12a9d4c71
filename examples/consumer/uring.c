/* SPDX-License-Identifier: MIT */
/*
 * A program outside the libzbuf tree using the installed io_uring engine,
 * found through find_package(zbuf) (target zbuf::uring) or pkg-config
 * (zbuf-uring): a zbuf goes out through the engine on one end of a socket
 * pair and comes back in on the other end into a provided buffer ring.
 * Where io_uring is unusable the engine says so and runs on epoll.
 */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zbuf/uring.h>

static char got[64];
static size_t ngot;

static void on_recv(zbuf_uring_sock_t *s, ssize_t n, zbuf_t *z, const zbuf_uring_rx_t *rx,
                    void *arg)
{
    (void)s;
    (void)rx;
    (void)arg;
    if (z == NULL)
        return;
    if (ngot + (size_t)n < sizeof got)
        ngot += (size_t)zbuf_copyout(z, 0, got + ngot, (size_t)n);
    zbuf_delete(z);
}

int main(void)
{
    static const char msg[] = "sent and received through zbuf-uring";
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        return 1;
    zbuf_uring_t *u;
    zbuf_pool_t *pool;
    zbuf_uring_bufring_t *ring;
    zbuf_uring_sock_t *a, *b;
    zbuf_t *z;
    int rc;
    if ((rc = zbuf_uring_create(NULL, &u)) || (rc = zbuf_pool_create(4096, 8, &pool)) ||
        (rc = zbuf_uring_bufring_create(u, pool, 0, &ring)) ||
        (rc = zbuf_uring_sock_open(u, sv[0], NULL, &a)) ||
        (rc = zbuf_uring_sock_open(u, sv[1], NULL, &b)) ||
        (rc = zbuf_uring_recv_start(b, ring, on_recv, NULL)) || (rc = zbuf_create(&z)) ||
        (rc = zbuf_append_buf(z, (void *)msg, sizeof msg, NULL, NULL)) ||
        (rc = zbuf_uring_send(a, z, 0, NULL, NULL))) {
        fprintf(stderr, "zbuf-uring: %s\n", zbuf_strerror(rc));
        return 1;
    }
    for (int i = 0; i < 100 && ngot < sizeof msg; i++)
        zbuf_uring_run(u, 100);
    zbuf_uring_sock_close(a, 1000, NULL, NULL);
    zbuf_uring_sock_close(b, 1000, NULL, NULL);
    while (zbuf_uring_sock_count(u) > 0)
        zbuf_uring_run(u, 100);
    printf("zbuf-uring on %s: \"%s\"\n",
           zbuf_uring_backend(u) == ZBUF_URING_BACKEND_IO_URING ? "io_uring" : "epoll",
           ngot == sizeof msg ? got : "(nothing)");
    zbuf_uring_bufring_delete(ring);
    zbuf_uring_destroy(u, 1000);
    zbuf_pool_delete(pool);
    return ngot == sizeof msg && strcmp(got, msg) == 0 ? 0 : 1;
}
