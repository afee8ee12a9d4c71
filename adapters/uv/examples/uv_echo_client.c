/* SPDX-License-Identifier: MIT */
/*
 * uv_echo_client: sends framed messages to uv_echo_server, checks every
 * echo byte for byte, and prints the round-trip throughput.
 *
 * The send side is the VxWorks "blaster" pattern: one master zbuf enrolls
 * the message memory once (zbuf_append_buf, no copy); every send is a
 * zbuf_dup() of it (new references, no bytes) with its own frame header in
 * front.  The master buffer's release callback runs once, after the last
 * duplicate's write completed and the master itself was deleted.
 *
 * Usage: uv_echo_client [port] [count] [size] [window]
 *   port    server port on 127.0.0.1 (default 7000)
 *   count   messages to send (default 1000)
 *   size    payload bytes per message (default 65536)
 *   window  messages in flight at most (default 8)
 * Exits 0 when every echo matched.
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
static zbuf_t *master;           /* the message, enrolled once */
static unsigned char *payload;
static size_t size;
static long count, window, sent, echoed, bad;
static int released;             /* the master buffer's release callback ran */
static uint64_t t0;

static void on_release(void *data, size_t len, void *arg)
{
    (void)len;
    (void)arg;
    free(data);
    released++;
}

static void send_more(void);

static void on_sent(uv_stream_t *s, int status, void *arg)
{
    (void)s;
    (void)arg;
    if (status < 0)
        fprintf(stderr, "client: write: %s\n", uv_strerror(status));
}

static void send_more(void)
{
    while (sent < count && sent - echoed < window) {
        zbuf_t *m;
        if (zbuf_dup(master, 0, ZBUF_TO_END, &m) != 0)
            return;
        if (zbuf_frame_encode(NULL, m) != 0 || zbuf_uv_write(&conn.stream, m, on_sent, NULL) != 0) {
            zbuf_delete(m);
            zbuf_uv_close(&conn, NULL);
            return;
        }
        sent++;
    }
}

/* Compare an echoed message with the payload, segment by segment. */
static bool same(const zbuf_t *m)
{
    if (zbuf_length(m) != size)
        return false;
    size_t off = 0;
    for (zbuf_seg_t *s = zbuf_seg_first(m); s != NULL; s = zbuf_seg_next(m, s)) {
        size_t n = zbuf_seg_length(m, s);
        if (memcmp(zbuf_seg_data(m, s), payload + off, n) != 0)
            return false;
        off += n;
    }
    return true;
}

static void on_read(zbuf_uv_stream_t *zs, ssize_t status, zbuf_t *z)
{
    if (status == UV_ENOBUFS)
        return;
    if (status < 0) {
        fprintf(stderr, "client: connection ended: %s\n", uv_strerror((int)status));
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
        if (!same(m))
            bad++;
        zbuf_delete(m);
        echoed++;
    }
    if (echoed == count) {
        double s = (double)(uv_hrtime() - t0) / 1e9;
        printf("%ld messages of %zu bytes echoed in %.3f s: %.1f MB/s each way, %ld bad\n",
               echoed, size, s, (double)echoed * (double)size / s / 1e6, bad);
        zbuf_uv_close(zs, NULL);
        return;
    }
    send_more();
}

static void on_connect(uv_connect_t *req, int status)
{
    (void)req;
    if (status < 0) {
        fprintf(stderr, "client: connect: %s\n", uv_strerror(status));
        zbuf_uv_close(&conn, NULL);
        return;
    }
    uv_tcp_nodelay(&conn.tcp, 1);
    t0 = uv_hrtime();
    zbuf_uv_read_start(&conn, pool, on_read);
    send_more();
}

int main(int argc, char **argv)
{
    int port = argc > 1 ? atoi(argv[1]) : 7000;
    count = argc > 2 ? atol(argv[2]) : 1000;
    size = argc > 3 ? (size_t)atol(argv[3]) : 65536;
    window = argc > 4 ? atol(argv[4]) : 8;
    if (count < 1 || size < 1 || window < 1) {
        fprintf(stderr, "usage: uv_echo_client [port] [count] [size] [window]\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);

    payload = malloc(size);
    for (size_t i = 0; i < size; i++)
        payload[i] = (unsigned char)(i * 131 + 7);
    if (zbuf_create(&master) != 0 ||
        zbuf_append_buf(master, payload, size, on_release, NULL) != 0 ||
        zbuf_pool_create(65536, 256, &pool) != 0 || zbuf_frame_decoder_create(NULL, &dec) != 0)
        return 1;

    uv_loop_t *loop = uv_default_loop();
    struct sockaddr_in addr;
    uv_connect_t req;
    uv_ip4_addr("127.0.0.1", port, &addr);
    uv_tcp_init(loop, &conn.tcp);
    zbuf_uv_stream_init(&conn);
    uv_tcp_connect(&req, &conn.tcp, (const struct sockaddr *)&addr, on_connect);
    uv_run(loop, UV_RUN_DEFAULT);

    zbuf_frame_decoder_delete(dec);
    zbuf_delete(master); /* the last reference: on_release() runs now */
    zbuf_pool_delete(pool);
    uv_loop_close(loop);
    printf("master buffer released %d time(s)\n", released);
    return echoed == count && bad == 0 && released == 1 ? 0 : 1;
}
