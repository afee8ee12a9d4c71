/*
 * uv_pubsub_client: a client for uv_pubsub_broker.
 *
 *   uv_pubsub_client sub [port]                 subscribe; print each message's size
 *   uv_pubsub_client pub [port] [count] [size]  publish count messages of size bytes
 *
 * A publisher builds its message once (zbuf_append_buf: the memory is
 * enrolled, not copied) and sends a zbuf_dup() of it per publish, each with
 * its own frame header, so publishing N messages copies no payload byte.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zbuf/frame.h>
#include <zbuf/uv.h>

static zbuf_uv_stream_t conn;
static zbuf_pool_t *pool;
static zbuf_frame_decoder_t *dec;
static zbuf_t *message;  /* 'P' + payload, for publishing */
static long remaining;
static unsigned long received;

static void on_read(zbuf_uv_stream_t *zs, ssize_t status, zbuf_t *z)
{
    if (status == UV_ENOBUFS)
        return;
    if (status < 0) {
        fprintf(stderr, "sub: connection ended: %s (%lu messages)\n",
                uv_strerror((int)status), received);
        zbuf_uv_close(zs, NULL);
        return;
    }
    if (zbuf_frame_decoder_feed(dec, z) != 0) {
        zbuf_delete(z);
        zbuf_uv_close(zs, NULL);
        return;
    }
    zbuf_t *m;
    while (zbuf_frame_decoder_next(dec, &m) == 0) {
        received++;
        printf("message %lu: %zu bytes in %zu segments\n", received, zbuf_length(m),
               zbuf_seg_count(m));
        zbuf_delete(m);
    }
}

static void publish_more(uv_stream_t *s, int status, void *arg);

/* Keep up to 16 publishes queued; each completion queues the next. */
static void publish_more(uv_stream_t *s, int status, void *arg)
{
    (void)arg;
    if (status < 0) {
        fprintf(stderr, "pub: write: %s\n", uv_strerror(status));
        return;
    }
    while (remaining > 0 && zbuf_uv_write_queue_size(s) < 16 * zbuf_length(message)) {
        zbuf_t *m;
        if (zbuf_dup(message, 0, ZBUF_TO_END, &m) != 0 || zbuf_frame_encode(NULL, m) != 0 ||
            zbuf_uv_write(s, m, publish_more, NULL) != 0)
            return;
        remaining--;
    }
    if (remaining == 0 && zbuf_uv_write_queue_size(s) == 0) {
        remaining = -1;
        zbuf_uv_close(&conn, NULL);
    }
}

static void on_connect(uv_connect_t *req, int status)
{
    if (status < 0) {
        fprintf(stderr, "connect: %s\n", uv_strerror(status));
        zbuf_uv_close(&conn, NULL);
        return;
    }
    if (req->data == NULL) { /* subscriber */
        zbuf_t *z;
        zbuf_create(&z);
        zbuf_append_copy(z, "S", 1);
        zbuf_frame_encode(NULL, z);
        zbuf_uv_write(&conn.stream, z, NULL, NULL);
        zbuf_uv_read_start(&conn, pool, on_read);
    } else {
        publish_more(&conn.stream, 0, NULL);
    }
}

static void free_mem(void *data, size_t len, void *arg)
{
    (void)len;
    (void)arg;
    free(data);
}

int main(int argc, char **argv)
{
    if (argc < 2 || (strcmp(argv[1], "sub") != 0 && strcmp(argv[1], "pub") != 0)) {
        fprintf(stderr, "usage: uv_pubsub_client sub|pub [port] [count] [size]\n");
        return 2;
    }
    bool pub = strcmp(argv[1], "pub") == 0;
    int port = argc > 2 ? atoi(argv[2]) : 7001;
    remaining = argc > 3 ? atol(argv[3]) : 100;
    size_t size = argc > 4 ? (size_t)atol(argv[4]) : 65536;
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0); /* one line per message, even into a pipe */
    if (zbuf_pool_create(65536, 256, &pool) != 0 || zbuf_frame_decoder_create(NULL, &dec) != 0)
        return 1;
    if (pub) {
        unsigned char *mem = malloc(size + 1);
        mem[0] = 'P';
        memset(mem + 1, 'x', size);
        zbuf_create(&message);
        zbuf_append_buf(message, mem, size + 1, free_mem, NULL);
    }
    uv_loop_t *loop = uv_default_loop();
    struct sockaddr_in addr;
    uv_connect_t req = {.data = pub ? &conn : NULL};
    uv_ip4_addr("127.0.0.1", port, &addr);
    uv_tcp_init(loop, &conn.tcp);
    zbuf_uv_stream_init(&conn);
    uv_tcp_connect(&req, &conn.tcp, (const struct sockaddr *)&addr, on_connect);
    uv_run(loop, UV_RUN_DEFAULT);
    zbuf_delete(message);
    zbuf_frame_decoder_delete(dec);
    zbuf_pool_delete(pool);
    uv_loop_close(loop);
    return 0;
}
