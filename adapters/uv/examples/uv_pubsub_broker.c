/*
 * uv_pubsub_broker: a publish/subscribe broker that fans every message out
 * to N subscribers by reference.
 *
 * Protocol: 4-byte big-endian length-prefixed frames (zbuf/frame.h).  A
 * client's frame payload starts with a command byte:
 *   'S'           subscribe this connection;
 *   'P' message   publish `message` to every subscriber.
 * Subscribers receive each message as one frame.
 *
 * The fan-out is where zbufs earn their keep.  A published message arrives
 * in pool buffers and comes out of the decoder as a zbuf sharing them; the
 * broker trims the command byte, writes the frame header in front once, and
 * then, for each subscriber, zbuf_dup()s the framed message (N references to
 * the same buffers, no bytes) and zbuf_uv_write()s the duplicate.  The
 * receive buffers return to the pool when the last subscriber's write has
 * completed.  The copying alternative (one malloc + memcpy per subscriber
 * per message) is what bench_uv_fanout measures against.
 *
 * Backpressure: a subscriber whose write queue passes HIGH_WATER marks the
 * broker congested; publishers are not read until every subscriber is below
 * LOW_WATER again, so a slow subscriber slows publishers down instead of
 * growing the broker's memory.
 *
 * Usage:
 *   uv_pubsub_broker [port]                   serve on 127.0.0.1:port (default 7001)
 *   uv_pubsub_broker --selftest N M SIZE      run N subscribers and a publisher
 *                                             in-process, publish M messages of
 *                                             SIZE bytes, check every delivery
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
    POOL_BUFS = 2048,
    HIGH_WATER = 4 * 1024 * 1024,
    LOW_WATER = 512 * 1024,
    MAX_SUBS = 1024,
};

/* A connection to the broker, publisher or subscriber or both. */
struct peer {
    zbuf_uv_stream_t zs;  /* first: the handle is inside */
    zbuf_frame_decoder_t *dec;
    bool subscribed;
    bool congested;       /* its write queue passed HIGH_WATER */
    bool publisher;       /* sent a 'P' at least once */
    bool reading;
    int slot;             /* index in peers[] */
};

static zbuf_pool_t *pool;
static uv_tcp_t server;
static struct peer *peers[MAX_SUBS];
static int npeers, nsubs, ncongested;
static unsigned long published, delivered_writes;

static void on_read(zbuf_uv_stream_t *zs, ssize_t status, zbuf_t *z);

/* Selftest hooks (NULL when serving). */
static void (*on_subscribed_hook)(void);

static void resume_publishers(void)
{
    for (int i = 0; i < npeers; i++) {
        struct peer *p = peers[i];
        if (p->publisher && !p->reading && zbuf_uv_read_start(&p->zs, pool, on_read) == 0)
            p->reading = true;
    }
}

static void on_peer_closed(uv_handle_t *h)
{
    struct peer *p = (struct peer *)h;
    zbuf_frame_decoder_delete(p->dec);
    free(p);
}

static void peer_close(struct peer *p)
{
    if (p->slot < 0)
        return;
    if (p->subscribed)
        nsubs--;
    if (p->congested && --ncongested == 0)
        resume_publishers();
    peers[p->slot] = peers[--npeers];
    peers[p->slot]->slot = p->slot;
    p->slot = -1;
    zbuf_uv_close(&p->zs, on_peer_closed);
}

static void on_delivered(uv_stream_t *s, int status, void *arg)
{
    (void)arg;
    struct peer *p = (struct peer *)s;
    if (status < 0)
        return;
    delivered_writes++;
    if (p->congested && zbuf_uv_write_queue_size(s) < LOW_WATER) {
        p->congested = false;
        if (--ncongested == 0)
            resume_publishers();
    }
}

/* Send the framed message to every subscriber: one dup (references, no
 * bytes) and one write each.  Consumes `framed`. */
static void fan_out(zbuf_t *framed)
{
    for (int i = 0; i < npeers; i++) {
        struct peer *p = peers[i];
        if (!p->subscribed)
            continue;
        zbuf_t *d;
        if (zbuf_dup(framed, 0, ZBUF_TO_END, &d) != 0)
            break;
        if (zbuf_uv_write(&p->zs.stream, d, on_delivered, NULL) != 0) {
            zbuf_delete(d);
            continue;
        }
        if (!p->congested && zbuf_uv_write_queue_size(&p->zs.stream) > HIGH_WATER) {
            p->congested = true;
            ncongested++;
        }
    }
    /* The subscribers' duplicates hold the buffers now; they go back to the
     * pool when the last write completes. */
    zbuf_delete(framed);
}

static void handle(struct peer *p, zbuf_t *msg)
{
    uint8_t cmd = 0;
    zbuf_cursor_t c;
    if (zbuf_cursor_init(&c, msg, 0) == 0)
        zbuf_cursor_read_u8(&c, &cmd); /* decoding a header byte is not a copy */
    if (cmd == 'S' && !p->subscribed) {
        p->subscribed = true;
        nsubs++;
        zbuf_delete(msg);
        if (on_subscribed_hook)
            on_subscribed_hook();
    } else if (cmd == 'P') {
        p->publisher = true;
        published++;
        zbuf_cut(msg, 0, 1, NULL); /* drop the command byte: a front cut */
        if (zbuf_frame_encode(NULL, msg) != 0) {
            zbuf_delete(msg);
            return;
        }
        fan_out(msg);
    } else {
        zbuf_delete(msg);
    }
}

static void on_read(zbuf_uv_stream_t *zs, ssize_t status, zbuf_t *z)
{
    struct peer *p = (struct peer *)zs;
    if (status == UV_ENOBUFS)
        return;
    if (status < 0) {
        peer_close(p);
        return;
    }
    if (zbuf_frame_decoder_feed(p->dec, z) != 0) {
        zbuf_delete(z);
        peer_close(p);
        return;
    }
    zbuf_t *msg;
    int rc;
    while ((rc = zbuf_frame_decoder_next(p->dec, &msg)) == 0)
        handle(p, msg);
    if (rc != -EAGAIN) {
        fprintf(stderr, "broker: protocol error (%s); closing\n", zbuf_strerror(rc));
        peer_close(p);
        return;
    }
    if (ncongested > 0 && p->publisher && p->reading) {
        zbuf_uv_read_stop(zs);
        p->reading = false;
    }
}

static void on_connection(uv_stream_t *srv, int status)
{
    if (status < 0 || npeers == MAX_SUBS)
        return;
    struct peer *p = calloc(1, sizeof(*p));
    if (p == NULL || zbuf_frame_decoder_create(NULL, &p->dec) != 0) {
        free(p);
        return;
    }
    uv_tcp_init(srv->loop, &p->zs.tcp);
    zbuf_uv_stream_init(&p->zs);
    p->slot = npeers;
    peers[npeers++] = p;
    if (uv_accept(srv, &p->zs.stream) != 0 || zbuf_uv_read_start(&p->zs, pool, on_read) != 0) {
        peer_close(p);
        return;
    }
    uv_tcp_nodelay(&p->zs.tcp, 1);
    p->reading = true;
}

static int listen_on(uv_loop_t *loop, int port)
{
    struct sockaddr_in addr;
    struct sockaddr_storage bound;
    int len = sizeof(bound);
    uv_ip4_addr("127.0.0.1", port, &addr);
    uv_tcp_init(loop, &server);
    int rc = uv_tcp_bind(&server, (const struct sockaddr *)&addr, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&server, 128, on_connection);
    if (rc != 0) {
        fprintf(stderr, "broker: cannot listen on port %d: %s\n", port, uv_strerror(rc));
        return -1;
    }
    uv_tcp_getsockname(&server, (struct sockaddr *)&bound, &len);
    return ntohs(((struct sockaddr_in *)&bound)->sin_port);
}

/* ------------------------------------------------------------ selftest */

/* In-process clients: N subscribers and one publisher on the same loop. */
struct client {
    zbuf_uv_stream_t zs;
    uv_connect_t req;
    zbuf_frame_decoder_t *dec;
    unsigned long got, bad;
};

static struct client *subs, pub;
static int st_subs;
static unsigned long st_msgs, st_sent, st_done_subs;
static size_t st_size;
static unsigned char *st_payload;
static zbuf_t *st_master;     /* 'P' + payload, enrolled once */
static zbuf_stats_t st_before;

static void client_closed(uv_handle_t *h)
{
    struct client *c = (struct client *)h;
    zbuf_frame_decoder_delete(c->dec);
}

static void finish_selftest(void)
{
    zbuf_stats_t after;
    zbuf_stats_get(&after);
    printf("selftest: %lu messages of %zu bytes fanned out to %d subscribers; "
           "bytes copied in user space meanwhile: %llu\n",
           st_msgs, st_size, st_subs,
           (unsigned long long)(after.bytes_copied - st_before.bytes_copied));
    for (int i = 0; i < st_subs; i++)
        zbuf_uv_close(&subs[i].zs, client_closed);
    zbuf_uv_close(&pub.zs, client_closed);
    while (npeers > 0)
        peer_close(peers[0]);
    uv_close((uv_handle_t *)&server, NULL);
}

static void publish_more(void);

static void on_published(uv_stream_t *s, int status, void *arg)
{
    (void)s;
    (void)arg;
    if (status == 0)
        publish_more();
}

static void publish_more(void)
{
    /* Keep a few publishes in flight; the broker applies backpressure. */
    while (st_sent < st_msgs && zbuf_uv_write_queue_size(&pub.zs.stream) < HIGH_WATER) {
        zbuf_t *m;
        if (zbuf_dup(st_master, 0, ZBUF_TO_END, &m) != 0 || zbuf_frame_encode(NULL, m) != 0 ||
            zbuf_uv_write(&pub.zs.stream, m, on_published, NULL) != 0) {
            fprintf(stderr, "selftest: publish failed\n");
            exit(1);
        }
        st_sent++;
    }
}

static void all_subscribed(void)
{
    if (nsubs == st_subs) {
        zbuf_stats_get(&st_before);
        publish_more();
    }
}

static void sub_read(zbuf_uv_stream_t *zs, ssize_t status, zbuf_t *z)
{
    struct client *c = (struct client *)zs;
    if (status < 0)
        return;
    zbuf_frame_decoder_feed(c->dec, z);
    zbuf_t *m;
    while (zbuf_frame_decoder_next(c->dec, &m) == 0) {
        /* Check in place, segment by segment: the payload was never copied. */
        size_t off = 0;
        bool ok = zbuf_length(m) == st_size;
        for (zbuf_seg_t *s = zbuf_seg_first(m); ok && s; s = zbuf_seg_next(m, s)) {
            size_t n = zbuf_seg_length(m, s);
            ok = memcmp(zbuf_seg_data(m, s), st_payload + off, n) == 0;
            off += n;
        }
        c->bad += !ok;
        c->got++;
        zbuf_delete(m);
        if (c->got == st_msgs && ++st_done_subs == (unsigned long)st_subs)
            finish_selftest();
    }
}

static void send_command(struct client *c, char cmd)
{
    zbuf_t *z;
    zbuf_create(&z);
    zbuf_append_copy(z, &cmd, 1);
    zbuf_frame_encode(NULL, z);
    zbuf_uv_write(&c->zs.stream, z, NULL, NULL);
}

static void sub_connected(uv_connect_t *req, int status)
{
    struct client *c = req->data;
    if (status < 0) {
        fprintf(stderr, "selftest: connect: %s\n", uv_strerror(status));
        exit(1);
    }
    zbuf_uv_read_start(&c->zs, pool, sub_read);
    send_command(c, 'S');
}

static void pub_connected(uv_connect_t *req, int status)
{
    (void)req;
    if (status < 0)
        exit(1);
}

static void client_connect(uv_loop_t *loop, struct client *c, int port, uv_connect_cb cb)
{
    struct sockaddr_in addr;
    uv_ip4_addr("127.0.0.1", port, &addr);
    zbuf_frame_decoder_create(NULL, &c->dec);
    uv_tcp_init(loop, &c->zs.tcp);
    zbuf_uv_stream_init(&c->zs);
    uv_tcp_nodelay(&c->zs.tcp, 1);
    c->req.data = c;
    uv_tcp_connect(&c->req, &c->zs.tcp, (const struct sockaddr *)&addr, cb);
}

static void free_payload(void *data, size_t len, void *arg)
{
    (void)len;
    (void)arg;
    free(data);
}

static int selftest(uv_loop_t *loop, int n, unsigned long m, size_t size)
{
    int port = listen_on(loop, 0);
    if (port < 0)
        return 1;
    st_subs = n;
    st_msgs = m;
    st_size = size;
    subs = calloc((size_t)n, sizeof(*subs));
    /* The published message: 'P' then the payload, in one enrolled buffer. */
    unsigned char *mem = malloc(size + 1);
    mem[0] = 'P';
    for (size_t i = 0; i < size; i++)
        mem[1 + i] = (unsigned char)(i * 7 + 3);
    st_payload = mem + 1;
    zbuf_create(&st_master);
    zbuf_append_buf(st_master, mem, size + 1, free_payload, NULL);

    on_subscribed_hook = all_subscribed;
    for (int i = 0; i < n; i++)
        client_connect(loop, &subs[i], port, sub_connected);
    client_connect(loop, &pub, port, pub_connected);
    uv_run(loop, UV_RUN_DEFAULT);

    unsigned long bad = 0, got = 0;
    for (int i = 0; i < n; i++) {
        bad += subs[i].bad;
        got += subs[i].got;
    }
    zbuf_delete(st_master);
    free(subs);
    printf("selftest: %lu of %lu deliveries, %lu bad, %lu broker writes completed\n", got,
           m * (unsigned long)n, bad, delivered_writes);
    return got == m * (unsigned long)n && bad == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    if (zbuf_pool_create(POOL_BUF_SIZE, POOL_BUFS, &pool) != 0)
        return 1;
    uv_loop_t *loop = uv_default_loop();
    int rc = 0;
    if (argc > 1 && strcmp(argv[1], "--selftest") == 0) {
        int n = argc > 2 ? atoi(argv[2]) : 16;
        unsigned long m = argc > 3 ? strtoul(argv[3], NULL, 10) : 1000;
        size_t size = argc > 4 ? (size_t)strtoul(argv[4], NULL, 10) : 65536;
        if (n < 1 || n > MAX_SUBS - 1 || m < 1 || size < 1) {
            fprintf(stderr, "usage: uv_pubsub_broker --selftest N M SIZE\n");
            return 2;
        }
        rc = selftest(loop, n, m, size);
    } else {
        int port = listen_on(loop, argc > 1 ? atoi(argv[1]) : 7001);
        if (port < 0)
            return 1;
        printf("broker listening on 127.0.0.1:%d\n", port);
        fflush(stdout);
        uv_run(loop, UV_RUN_DEFAULT);
    }
    uv_loop_close(loop);
    zbuf_pool_delete(pool);
    return rc;
}
