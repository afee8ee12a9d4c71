/* SPDX-License-Identifier: MIT */
/*
 * uv_echo_server: a framed echo server on libuv and zbufs.
 *
 * Every connection reads into buffers of one shared pool (zbuf_uv_read_start),
 * feeds what arrives to a frame decoder (zbuf_frame_decoder_feed), and sends
 * each whole frame back: the payload zbuf the decoder returns shares the
 * receive buffers, zbuf_frame_encode() puts a new 4-byte header in front of
 * it, and zbuf_uv_write() hands libuv one uv_buf_t per segment.  No payload
 * byte is copied in user space; the receive buffers go back to the pool when
 * libuv has written them out again.
 *
 * Backpressure: when a connection's write queue passes HIGH_WATER the server
 * stops reading it, and reading resumes from the write callback once the
 * queue is below LOW_WATER.  A malformed or oversized frame closes the
 * connection.
 *
 * Usage: uv_echo_server [port] [--once]
 *   port    TCP port on 127.0.0.1 (default 7000; 0 picks one and prints it)
 *   --once  exit after the first connection closes (for scripted demos)
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zbuf/frame.h>
#include <zbuf/uv.h>

enum {
    POOL_BUF_SIZE = 64 * 1024,
    POOL_BUFS = 1024,             /* 64 MiB of receive memory for all connections */
    MAX_FRAME = 16 * 1024 * 1024,
    HIGH_WATER = 8 * 1024 * 1024, /* stop reading a connection above this */
    LOW_WATER = 1024 * 1024,      /* and resume below this */
};

struct conn {
    zbuf_uv_stream_t zs;          /* first: the handle is inside */
    zbuf_frame_decoder_t *dec;
    bool reading;
    unsigned long frames;
};

static zbuf_pool_t *pool;
static zbuf_frame_opts_t fopts;
static bool once;
static uv_tcp_t server;

static void on_read(zbuf_uv_stream_t *zs, ssize_t status, zbuf_t *z);

static void on_conn_closed(uv_handle_t *h)
{
    struct conn *c = (struct conn *)h; /* zs.handle is at offset 0 */
    fprintf(stderr, "echo: connection closed after %lu frames\n", c->frames);
    zbuf_frame_decoder_delete(c->dec);
    free(c);
    if (once)
        uv_close((uv_handle_t *)&server, NULL);
}

static void conn_close(struct conn *c)
{
    zbuf_uv_close(&c->zs, on_conn_closed);
}

static void on_echoed(uv_stream_t *s, int status, void *arg)
{
    (void)arg;
    struct conn *c = (struct conn *)s;
    if (status < 0)
        return; /* the read side reports the broken connection */
    if (!c->reading && zbuf_uv_write_queue_size(s) < LOW_WATER &&
        zbuf_uv_read_start(&c->zs, pool, on_read) == 0)
        c->reading = true;
}

static void on_read(zbuf_uv_stream_t *zs, ssize_t status, zbuf_t *z)
{
    struct conn *c = (struct conn *)zs;
    if (status == UV_ENOBUFS)
        return; /* paused until buffers come back; nothing to do */
    if (status < 0) {
        if (status != UV_EOF)
            fprintf(stderr, "echo: read: %s\n", uv_strerror((int)status));
        conn_close(c);
        return;
    }
    int rc = zbuf_frame_decoder_feed(c->dec, z);
    if (rc != 0) {
        zbuf_delete(z);
        conn_close(c);
        return;
    }
    zbuf_t *msg;
    while ((rc = zbuf_frame_decoder_next(c->dec, &msg)) == 0) {
        c->frames++;
        if (zbuf_frame_encode(&fopts, msg) != 0 ||
            zbuf_uv_write(&zs->stream, msg, on_echoed, NULL) != 0) {
            zbuf_delete(msg);
            conn_close(c);
            return;
        }
    }
    if (rc != -EAGAIN) {
        fprintf(stderr, "echo: protocol error: %s; closing\n", zbuf_strerror(rc));
        conn_close(c);
        return;
    }
    if (zbuf_uv_write_queue_size(&zs->stream) > HIGH_WATER) {
        zbuf_uv_read_stop(zs);
        c->reading = false;
    }
}

static void on_connection(uv_stream_t *srv, int status)
{
    if (status < 0) {
        fprintf(stderr, "echo: listen: %s\n", uv_strerror(status));
        return;
    }
    struct conn *c = calloc(1, sizeof(*c));
    if (c == NULL || zbuf_frame_decoder_create(&fopts, &c->dec) != 0) {
        free(c);
        return;
    }
    uv_tcp_init(srv->loop, &c->zs.tcp);
    zbuf_uv_stream_init(&c->zs);
    if (uv_accept(srv, &c->zs.stream) != 0 || zbuf_uv_read_start(&c->zs, pool, on_read) != 0) {
        conn_close(c);
        return;
    }
    uv_tcp_nodelay(&c->zs.tcp, 1);
    c->reading = true;
}

int main(int argc, char **argv)
{
    int port = 7000;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--once") == 0)
            once = true;
        else
            port = atoi(argv[i]);
    }
    signal(SIGPIPE, SIG_IGN); /* a vanished peer is an error code, not a signal */
    zbuf_frame_opts_default(&fopts);
    fopts.max_payload = MAX_FRAME;
    if (zbuf_pool_create(POOL_BUF_SIZE, POOL_BUFS, &pool) != 0)
        return 1;

    uv_loop_t *loop = uv_default_loop();
    struct sockaddr_in addr;
    struct sockaddr_storage bound;
    int len = sizeof(bound);
    uv_ip4_addr("127.0.0.1", port, &addr);
    uv_tcp_init(loop, &server);
    int rc = uv_tcp_bind(&server, (const struct sockaddr *)&addr, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&server, 128, on_connection);
    if (rc != 0) {
        fprintf(stderr, "echo: cannot listen on port %d: %s\n", port, uv_strerror(rc));
        return 1;
    }
    uv_tcp_getsockname(&server, (struct sockaddr *)&bound, &len);
    printf("listening on 127.0.0.1:%d\n", ntohs(((struct sockaddr_in *)&bound)->sin_port));
    fflush(stdout);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_loop_close(loop);
    zbuf_pool_delete(pool);
    return 0;
}
