/* SPDX-License-Identifier: MIT */
/*
 * uring_echo: an echo server and its client, both running entirely on one
 * zbuf-uring engine (io_uring where the kernel allows it, the epoll path
 * otherwise): accept and connect through the engine, receive into a
 * provided buffer ring fed from a pool, send each received zbuf straight
 * back (the pool buffers the kernel filled are the ones it sends from: no
 * copy in user space), shut down, close.  The client checks every byte it
 * gets back, and the program exits 0 only if all came back in order.
 *
 *   uring_echo [bytes]        (default 8 MiB)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <zbuf/uring.h>

static zbuf_uring_t *u;
/* One ring (and pool) per side: the server holds the buffers it echoes
 * until the client has read them, so sharing one pool could leave the
 * client no buffer to read with, and both would wait for ever. */
static zbuf_uring_bufring_t *server_ring, *client_ring;
static zbuf_uring_sock_t *listener;
static uint64_t total, echoed, checked;
static int failed;

static uint8_t pattern(uint64_t off)
{
    return (uint8_t)(off * 31 % 251);
}

/* ------------------------------------------------------------- server */

static void server_shut(zbuf_uring_sock_t *s, int status, void *arg)
{
    (void)arg;
    if (status < 0)
        fprintf(stderr, "server shutdown: %s\n", zbuf_strerror(status));
    zbuf_uring_sock_close(s, 1000, NULL, NULL);
    zbuf_uring_sock_close(listener, 1000, NULL, NULL);
}

static void server_recv(zbuf_uring_sock_t *s, ssize_t n, zbuf_t *z, const zbuf_uring_rx_t *rx,
                        void *arg)
{
    (void)rx;
    (void)arg;
    if (z == NULL) { /* the client is done sending: finish after the echo */
        zbuf_uring_shutdown(s, server_shut, NULL);
        return;
    }
    echoed += (uint64_t)n;
    if (zbuf_uring_send(s, z, 0, NULL, NULL) < 0) /* the engine owns z now */
        zbuf_delete(z);
}

static void server_accept(zbuf_uring_sock_t *l, int fd, void *arg)
{
    (void)arg;
    zbuf_uring_sock_t *s;
    if (fd < 0 || zbuf_uring_sock_open(u, fd, NULL, &s) < 0 ||
        zbuf_uring_recv_start(s, server_ring, server_recv, NULL) < 0) {
        fprintf(stderr, "accept failed\n");
        failed = 1;
        return;
    }
    zbuf_uring_accept_stop(l); /* one client in this example */
}

/* ------------------------------------------------------------- client */

/* Release callback of the client's buffers: runs once the kernel is done
 * with them (after the send completion, or the zero-copy notification). */
static void give_back(void *data, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    free(data);
}

static void client_recv(zbuf_uring_sock_t *s, ssize_t n, zbuf_t *z, const zbuf_uring_rx_t *rx,
                        void *arg)
{
    (void)rx;
    (void)arg;
    if (z == NULL) {
        if (n < 0)
            failed = 1;
        zbuf_uring_sock_close(s, 1000, NULL, NULL);
        return;
    }
    /* Walk the segments: the bytes are read where the kernel put them. */
    for (zbuf_seg_t *g = zbuf_seg_first(z); g != NULL; g = zbuf_seg_next(z, g)) {
        const uint8_t *p = zbuf_seg_data(z, g);
        for (size_t i = 0; i < zbuf_seg_length(z, g); i++)
            failed |= p[i] != pattern(checked++);
    }
    zbuf_delete(z); /* its pool buffers go back to the ring */
}

static void client_connected(zbuf_uring_sock_t *s, int status, void *arg)
{
    (void)arg;
    if (status < 0) {
        fprintf(stderr, "connect: %s\n", zbuf_strerror(status));
        failed = 1;
        return;
    }
    zbuf_uring_recv_start(s, client_ring, client_recv, NULL);
    /* The whole message, from buffers of our own, loaned to the engine. */
    for (uint64_t off = 0; off < total;) {
        size_t len = total - off < 65536 ? (size_t)(total - off) : 65536;
        uint8_t *buf = malloc(len);
        for (size_t i = 0; i < len; i++)
            buf[i] = pattern(off + i);
        zbuf_t *z;
        zbuf_create(&z);
        zbuf_append_buf(z, buf, len, give_back, NULL);
        zbuf_uring_send(s, z, 0, NULL, NULL);
        off += len;
    }
    zbuf_uring_shutdown(s, NULL, NULL); /* end of stream after the last byte */
}

int main(int argc, char **argv)
{
    total = argc > 1 ? strtoull(argv[1], NULL, 0) : 8u << 20;
    int rc = zbuf_uring_create(NULL, &u); /* logs a line if it falls back to epoll */
    if (rc < 0) {
        fprintf(stderr, "zbuf_uring_create: %s\n", zbuf_strerror(rc));
        return 1;
    }
    zbuf_pool_t *server_pool, *client_pool;
    zbuf_pool_create(16384, 256, &server_pool);
    zbuf_pool_create(16384, 256, &client_pool);
    zbuf_uring_bufring_create(u, server_pool, 0, &server_ring);
    zbuf_uring_bufring_create(u, client_pool, 0, &client_ring);

    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t sl = sizeof sa;
    if (bind(lfd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(lfd, 8) != 0 ||
        getsockname(lfd, (struct sockaddr *)&sa, &sl) != 0) {
        perror("listen");
        return 1;
    }
    zbuf_uring_sock_open(u, lfd, NULL, &listener);
    zbuf_uring_accept_start(listener, server_accept, NULL);

    zbuf_uring_sock_t *client;
    zbuf_uring_sock_open(u, socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), NULL, &client);
    zbuf_uring_connect(client, (struct sockaddr *)&sa, sizeof sa, client_connected, NULL);

    while (zbuf_uring_sock_count(u) > 0 && !failed)
        zbuf_uring_run(u, 1000);

    printf("%s: %llu bytes echoed, %llu checked: %s\n",
           zbuf_uring_backend(u) == ZBUF_URING_BACKEND_IO_URING ? "io_uring" : "epoll",
           (unsigned long long)echoed, (unsigned long long)checked,
           !failed && checked == total ? "ok" : "FAILED");
    zbuf_uring_bufring_delete(server_ring);
    zbuf_uring_bufring_delete(client_ring);
    zbuf_uring_destroy(u, 1000);
    zbuf_pool_delete(server_pool);
    zbuf_pool_delete(client_pool);
    return !failed && checked == total ? 0 : 1;
}
