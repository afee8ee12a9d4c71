/* SPDX-License-Identifier: MIT */
/*
 * uv_pubsub_load: the load client of uv_pubsub_broker, with the clients a
 * broker meets in real life, all on one libuv loop:
 *
 *   publishers    --pubs of them publish --msgs messages each to topic
 *                 "news", sizes from 5 bytes to --max-size, as fast as
 *                 their own queue (1 MiB) allows;
 *   subscribers   --subs good ones, which must receive every message of
 *                 every publisher, in order and byte-exact;
 *   slow          --slow subscribers with a tiny socket buffer that read in
 *                 short bursts: the broker disconnects them as slow
 *                 consumers; what they got must be exact and in order, and
 *                 the others must wait for them no longer than that;
 *   resetters     --resetters subscribers that reset their connection
 *                 (RST) after a few messages and come back, three times;
 *   malformed     clients that send an oversized length, unknown commands,
 *                 a topic too long, a command without its argument: the
 *                 broker must close each (--malformed 0 turns them off);
 *   slowloris     --slowloris clients holding a partial frame open, one
 *                 byte at a time: the broker must close them;
 *   idle          one client that connects and sends nothing: it must be
 *                 left alone (an idle connection costs the broker nothing).
 *
 * A message is 1 byte (its publisher), 4 bytes (its sequence number,
 * big-endian), then bytes that depend on both and on their position: a
 * subscriber checks each without a copy, walking the segments of the zbuf
 * the decoder gives it.
 *
 * Exit status 0 when every check passed: every good subscriber got every
 * message, every adversary was dealt with, within --timeout-ms.
 *
 * Usage: uv_pubsub_load --port N [--pubs N] [--subs N] [--msgs N]
 *          [--max-size BYTES] [--slow N] [--resetters N] [--malformed 0|1]
 *          [--slowloris N] [--timeout-ms MS] [--verbose]
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <zbuf/frame.h>
#include <zbuf/uv.h>

#define MAX_PUBS 16
#define PUB_QUEUE (1u << 20) /* bytes a publisher keeps queued at most */
#define RESETS 3             /* times a resetter resets */
#define RESET_AFTER 20       /* messages it takes before each reset ... */
#define RESET_MS 100         /* ... or milliseconds, whichever comes first */

static struct {
    int port;
    unsigned pubs, subs, msgs, slow, resetters, slowloris, timeout_ms;
    size_t max_size;
    bool malformed, verbose;
} opt = {0, 2, 4, 300, 256 * 1024, 1, 1, 2, 60000, true, false};

enum role { PUB, SUB, SLOW, RESETTER, MALFORMED, SLOWLORIS, IDLE };
static const char *const role_name[] = {"publisher", "subscriber", "slow subscriber", "resetter",
                                        "malformed client", "slowloris", "idle client"};

struct conn {
    zbuf_uv_stream_t zs; /* first */
    uv_connect_t req;
    uv_timer_t timer;    /* slow: read bursts; slowloris: one byte at a time */
    enum role role;
    int index;           /* among its role */
    zbuf_frame_decoder_t *dec;
    bool synced, done, closed_by_peer, closing;
    int timer_open;
    /* subscribers */
    uint32_t next[MAX_PUBS]; /* next sequence number expected per publisher */
    unsigned long got, gaps, got_here; /* got_here: on this connection */
    int resets;
    /* publishers */
    uint32_t sent;
    /* malformed and slowloris */
    size_t dripped;
    uint64_t opened_ms;
    struct conn *next_conn;
};

static uv_loop_t *loop;
static uv_timer_t deadline;
static zbuf_pool_t *pool;
static struct conn *conns;
static unsigned synced_subs, subs_to_sync, good_done, pubs_done, adversaries, adversaries_done;
static unsigned long failures;
static bool finishing;

static void fail(const struct conn *c, const char *what)
{
    failures++;
    fprintf(stderr, "load: %s %d: %s\n", role_name[c->role], c->index, what);
}

/* ----------------------------------------------------------- messages */

static uint32_t mix(uint32_t k, uint32_t i)
{
    uint32_t x = k * 0x9e3779b9u ^ i * 0x85ebca6bu;
    x ^= x >> 15;
    x *= 0xc2b2ae35u;
    return x ^ x >> 13;
}

/* Size of message i of publisher k: mostly small, some large. */
static size_t msg_size(uint32_t k, uint32_t i)
{
    uint32_t h = mix(k, i);
    size_t span = h % 10 < 7 ? 64 : h % 10 < 9 ? 8000 : opt.max_size - 4;
    return 5 + (h >> 8) % span;
}

static uint8_t msg_byte(uint32_t k, uint32_t i, size_t j)
{
    return (uint8_t)(j * 131 + i * 7 + k * 29);
}

static void free_mem(void *data, size_t len, void *arg)
{
    (void)len;
    (void)arg;
    free(data);
}

/* Frame of `text` then `len` bytes at `mem` (enrolled: freed with the zbuf). */
static zbuf_t *frame_of(const char *text, uint8_t *mem, size_t len)
{
    zbuf_t *z;
    if (zbuf_create(&z) != 0)
        return NULL;
    bool ok = zbuf_append_copy(z, text, strlen(text)) == 0;
    if (ok && len > 0) {
        ok = zbuf_append_buf(z, mem, len, free_mem, NULL) == 0;
        if (ok)
            mem = NULL;
    }
    free(mem);
    if (ok && zbuf_frame_encode(NULL, z) == 0)
        return z;
    zbuf_delete(z);
    return NULL;
}

/* Check one delivered frame, "news <message>", segment by segment. */
static void check_message(struct conn *c, zbuf_t *m)
{
    uint8_t head[10];
    size_t len = zbuf_length(m);
    if (len < 10 || zbuf_copyout(m, 0, head, 10) != 10 || memcmp(head, "news ", 5) != 0) {
        fail(c, "malformed delivery");
        return;
    }
    uint32_t k = head[5], i = (uint32_t)head[6] << 24 | head[7] << 16 | head[8] << 8 | head[9];
    if (k >= opt.pubs || i >= opt.msgs || i < c->next[k] || len - 5 != msg_size(k, i)) {
        fail(c, "unexpected message (publisher, sequence or size)");
        return;
    }
    if (i > c->next[k]) {
        if (c->role == SUB)
            fail(c, "a message is missing");
        c->gaps += i - c->next[k];
    }
    c->next[k] = i + 1;
    size_t pos = 0;
    for (zbuf_seg_t *s = zbuf_seg_first(m); s != NULL; s = zbuf_seg_next(m, s)) {
        const uint8_t *p = zbuf_seg_data(m, s);
        for (size_t n = zbuf_seg_length(m, s); n > 0; n--, pos++, p++)
            if (pos >= 10 && *p != msg_byte(k, i, pos - 5)) {
                fail(c, "a byte differs");
                return;
            }
    }
    c->got++;
}

/* ------------------------------------------------------------- ending */

static void maybe_finish(void);

static void on_closed(uv_handle_t *h)
{
    struct conn *c = h->data;
    if (--c->timer_open == 0) {
        zbuf_frame_decoder_delete(c->dec);
        c->dec = NULL;
    }
}

static void on_resetter_closed(uv_handle_t *h);

static void conn_close(struct conn *c)
{
    if (c->closing)
        return;
    c->closing = true;
    c->timer_open = 2;
    uv_close_cb cb = c->role == RESETTER ? on_resetter_closed : on_closed;
    uv_close((uv_handle_t *)&c->timer, cb);
    zbuf_uv_close(&c->zs, cb);
}

static void conn_done(struct conn *c)
{
    if (c->done)
        return;
    c->done = true;
    if (c->role == SUB)
        good_done++;
    else if (c->role == PUB)
        pubs_done++;
    else if (c->role != IDLE && c->role != SLOW)
        adversaries_done++;
    if (opt.verbose)
        fprintf(stderr, "load: %s %d done (%lu messages, %lu missed)\n", role_name[c->role],
                c->index, c->got, c->gaps);
    maybe_finish();
}

static void maybe_finish(void)
{
    if (finishing || good_done < opt.subs || pubs_done < opt.pubs || adversaries_done < adversaries)
        return;
    finishing = true;
    uv_close((uv_handle_t *)&deadline, NULL);
    for (struct conn *c = conns; c != NULL; c = c->next_conn)
        conn_close(c);
}

static void on_deadline(uv_timer_t *t)
{
    (void)t;
    for (struct conn *c = conns; c != NULL; c = c->next_conn)
        if (!c->done && c->role != IDLE && c->role != SLOW)
            fail(c, "not done in time");
    finishing = true;
    uv_close((uv_handle_t *)&deadline, NULL);
    for (struct conn *c = conns; c != NULL; c = c->next_conn)
        conn_close(c);
}

/* ---------------------------------------------------------- publishers */

static void publish_more(uv_stream_t *s, int status, void *arg);

static void publish(struct conn *c)
{
    while (c->sent < opt.msgs && zbuf_uv_write_queue_size(&c->zs.stream) < PUB_QUEUE) {
        uint32_t k = (uint32_t)c->index, i = c->sent;
        size_t size = msg_size(k, i);
        uint8_t *mem = malloc(size);
        if (mem == NULL) {
            fail(c, "out of memory");
            return;
        }
        mem[0] = (uint8_t)k;
        mem[1] = (uint8_t)(i >> 24), mem[2] = (uint8_t)(i >> 16);
        mem[3] = (uint8_t)(i >> 8), mem[4] = (uint8_t)i;
        for (size_t j = 5; j < size; j++)
            mem[j] = msg_byte(k, i, j);
        zbuf_t *z = frame_of("PUB news ", mem, size);
        if (z == NULL || zbuf_uv_write(&c->zs.stream, z, publish_more, c) != 0) {
            zbuf_delete(z);
            fail(c, "cannot publish");
            return;
        }
        c->sent++;
    }
}

static void publish_more(uv_stream_t *s, int status, void *arg)
{
    (void)s;
    struct conn *c = arg;
    if (status < 0) {
        if (!c->closing)
            fail(c, uv_strerror(status));
        return;
    }
    publish(c);
    if (c->sent == opt.msgs && zbuf_uv_write_queue_size(&c->zs.stream) == 0)
        conn_done(c);
}

static void start_publishers(void)
{
    for (struct conn *c = conns; c != NULL; c = c->next_conn)
        if (c->role == PUB && c->synced)
            publish(c);
}

/* --------------------------------------------------------- subscribers */

static void sub_connect(struct conn *c);

static void reset_now(struct conn *c)
{
    struct linger lg = {1, 0}; /* close with a RST */
    uv_os_fd_t fd;
    if (uv_fileno(&c->zs.handle, &fd) == 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    c->resets++;
    conn_close(c);
}

static void reset_tick(uv_timer_t *t)
{
    reset_now(t->data);
}

static void sub_read(zbuf_uv_stream_t *zs, ssize_t status, zbuf_t *z)
{
    struct conn *c = (struct conn *)zs;
    if (status == UV_ENOBUFS)
        return;
    if (status < 0) {
        c->closed_by_peer = true;
        if ((c->role == SUB || c->role == RESETTER) && !finishing)
            fail(c, "the broker closed a subscriber that kept up");
        conn_close(c);
        return;
    }
    if (zbuf_frame_decoder_feed(c->dec, z) != 0) {
        zbuf_delete(z);
        fail(c, "bad frames from the broker");
        conn_close(c);
        return;
    }
    zbuf_t *m;
    while (!c->closing && zbuf_frame_decoder_next(c->dec, &m) == 0) {
        if (!c->synced) {
            c->synced = zbuf_length(m) == 4; /* "SYNC" */
            zbuf_delete(m);
            if (!c->synced)
                fail(c, "no SYNC");
            else if (c->role != RESETTER || c->resets == 0) {
                if (++synced_subs == subs_to_sync)
                    start_publishers();
            }
            if (c->synced && c->role == RESETTER)
                uv_timer_start(&c->timer, reset_tick, RESET_MS, 0);
            continue;
        }
        check_message(c, m);
        zbuf_delete(m);
        c->got_here++;
        if (c->role == SUB && c->got == (unsigned long)opt.pubs * opt.msgs)
            conn_done(c);
        if (c->role == RESETTER && c->got_here >= RESET_AFTER)
            reset_now(c); /* in the middle of a burst, with writes queued */
    }
}

/* The slow subscriber reads 20 ms out of every 300. */
static void slow_tick(uv_timer_t *t)
{
    struct conn *c = t->data;
    if (c->closing)
        return;
    if (zbuf_uv_read_stop(&c->zs) == 0 && c->timer.repeat == 280) {
        uv_timer_set_repeat(&c->timer, 20);
        zbuf_uv_read_start(&c->zs, pool, sub_read);
    } else {
        uv_timer_set_repeat(&c->timer, 280);
    }
}

static void on_sub_connected(uv_connect_t *req, int status)
{
    struct conn *c = req->data;
    if (status < 0) {
        fail(c, uv_strerror(status));
        return;
    }
    zbuf_t *sub = frame_of("SUB news", NULL, 0), *sync = frame_of("SYNC", NULL, 0);
    if (sub == NULL || sync == NULL || zbuf_uv_write(&c->zs.stream, sub, NULL, NULL) != 0 ||
        zbuf_uv_write(&c->zs.stream, sync, NULL, NULL) != 0 ||
        zbuf_uv_read_start(&c->zs, pool, sub_read) != 0) {
        fail(c, "cannot subscribe");
        return;
    }
    if (c->role == SLOW) {
        int small = 4096;
        uv_recv_buffer_size(&c->zs.handle, &small);
        uv_timer_start(&c->timer, slow_tick, 280, 280);
    }
}

/* ------------------------------------------------------- adversaries */

static void adversary_read(zbuf_uv_stream_t *zs, ssize_t status, zbuf_t *z)
{
    struct conn *c = (struct conn *)zs;
    zbuf_delete(z); /* whatever the broker says */
    if (status < 0 && status != UV_ENOBUFS) {
        c->closed_by_peer = true;
        if (c->role == IDLE) { /* an idle connection must be left alone */
            if (!finishing)
                fail(c, "the broker closed an idle connection");
        } else {
            conn_done(c); /* closed by the broker, as it should be */
        }
        conn_close(c);
    }
}

/* What each malformed client sends. */
static const struct {
    const char *what;
    uint8_t bytes[16];
    size_t len;
} bad[] = {
    {"an oversized length", {0x7f, 0xff, 0xff, 0xff, 'P', 'U', 'B'}, 7},
    {"an unknown command", {0, 0, 0, 7, 'B', 'O', 'G', 'U', 'S', ' ', 'x'}, 11},
    {"a command without its topic", {0, 0, 0, 3, 'P', 'U', 'B'}, 7},
    {"a publish without its payload", {0, 0, 0, 8, 'P', 'U', 'B', ' ', 'n', 'e', 'w', 's'}, 12},
    {"an empty frame", {0, 0, 0, 0}, 4},
};

static void slowloris_tick(uv_timer_t *t)
{
    struct conn *c = t->data;
    static const uint8_t hdr[] = {0, 0, 0xea, 0x60, 'P', 'U', 'B', ' ', 'n', 'e', 'w', 's', ' '};
    uint8_t b = c->dripped < sizeof(hdr) ? hdr[c->dripped] : (uint8_t)c->dripped;
    zbuf_t *z;
    if (c->closing || zbuf_create(&z) != 0)
        return;
    if (zbuf_append_copy(z, &b, 1) != 0 || zbuf_uv_write(&c->zs.stream, z, NULL, NULL) != 0) {
        zbuf_delete(z);
        return; /* the broker closed it: the read side tells */
    }
    c->dripped++;
}

static void on_adversary_connected(uv_connect_t *req, int status)
{
    struct conn *c = req->data;
    if (status < 0) {
        fail(c, uv_strerror(status));
        return;
    }
    zbuf_uv_read_start(&c->zs, pool, adversary_read);
    if (c->role == MALFORMED) {
        zbuf_t *z;
        if (zbuf_create(&z) == 0 &&
            zbuf_append_copy(z, bad[c->index].bytes, bad[c->index].len) == 0 &&
            zbuf_uv_write(&c->zs.stream, z, NULL, NULL) == 0)
            return;
        fail(c, "cannot send");
    } else if (c->role == SLOWLORIS) {
        uv_timer_start(&c->timer, slowloris_tick, 0, 50);
    }
}

/* ------------------------------------------------------------ set-up */

static void on_pub_connected(uv_connect_t *req, int status)
{
    struct conn *c = req->data;
    if (status < 0) {
        fail(c, uv_strerror(status));
        return;
    }
    c->synced = true;
    if (synced_subs == subs_to_sync)
        publish(c);
}

static void conn_connect(struct conn *c, uv_connect_cb cb)
{
    struct sockaddr_in addr;
    uv_ip4_addr("127.0.0.1", opt.port, &addr);
    c->closing = false;
    if (c->dec == NULL)
        zbuf_frame_decoder_create(NULL, &c->dec);
    uv_tcp_init(loop, &c->zs.tcp);
    zbuf_uv_stream_init(&c->zs);
    uv_timer_init(loop, &c->timer);
    c->zs.handle.data = c->timer.data = c->req.data = c;
    uv_tcp_nodelay(&c->zs.tcp, 1);
    if (uv_tcp_connect(&c->req, &c->zs.tcp, (const struct sockaddr *)&addr, cb) != 0)
        fail(c, "cannot connect");
}

static void sub_connect(struct conn *c)
{
    c->synced = false;
    conn_connect(c, on_sub_connected);
}

/* A resetter reconnects once its old connection is gone. */
static void on_resetter_closed(uv_handle_t *h)
{
    struct conn *c = h->data;
    if (--c->timer_open > 0)
        return;
    if (c->resets >= RESETS || finishing || c->closed_by_peer) {
        zbuf_frame_decoder_delete(c->dec);
        c->dec = NULL;
        conn_done(c);
        return;
    }
    zbuf_frame_decoder_delete(c->dec); /* the rest of the old stream */
    c->dec = NULL;
    memset(c->next, 0, sizeof(c->next)); /* a new subscription starts where it is */
    c->got_here = 0;
    sub_connect(c);
}

static struct conn *add(enum role r, int index)
{
    struct conn *c = calloc(1, sizeof(*c));
    if (c == NULL)
        exit(1);
    c->role = r;
    c->index = index;
    c->next_conn = conns;
    conns = c;
    return c;
}

static bool parse_args(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc || (i < argc && strcmp(argv[i], "--verbose") == 0); i++) {
        const char *a = argv[i];
        if (strcmp(a, "--verbose") == 0) {
            opt.verbose = true;
            continue;
        }
        unsigned long v = strtoul(argv[++i], NULL, 10);
        if (strcmp(a, "--port") == 0)
            opt.port = (int)v;
        else if (strcmp(a, "--pubs") == 0)
            opt.pubs = (unsigned)v;
        else if (strcmp(a, "--subs") == 0)
            opt.subs = (unsigned)v;
        else if (strcmp(a, "--msgs") == 0)
            opt.msgs = (unsigned)v;
        else if (strcmp(a, "--max-size") == 0)
            opt.max_size = v;
        else if (strcmp(a, "--slow") == 0)
            opt.slow = (unsigned)v;
        else if (strcmp(a, "--resetters") == 0)
            opt.resetters = (unsigned)v;
        else if (strcmp(a, "--malformed") == 0)
            opt.malformed = v != 0;
        else if (strcmp(a, "--slowloris") == 0)
            opt.slowloris = (unsigned)v;
        else if (strcmp(a, "--timeout-ms") == 0)
            opt.timeout_ms = (unsigned)v;
        else
            return false;
    }
    return opt.port > 0 && opt.pubs >= 1 && opt.pubs <= MAX_PUBS && opt.msgs >= 1 &&
           opt.max_size >= 10;
}

int main(int argc, char **argv)
{
    if (!parse_args(argc, argv)) {
        fprintf(stderr, "usage: uv_pubsub_load --port N [--pubs N] [--subs N] [--msgs N] "
                        "[--max-size BYTES] [--slow N] [--resetters N] [--malformed 0|1] "
                        "[--slowloris N] [--timeout-ms MS] [--verbose]\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    loop = uv_default_loop();
    if (zbuf_pool_create(64 * 1024, 256, &pool) != 0)
        return 1;
    uv_timer_init(loop, &deadline);
    uv_timer_start(&deadline, on_deadline, opt.timeout_ms, 0);

    for (unsigned i = 0; i < opt.subs; i++)
        sub_connect(add(SUB, (int)i));
    for (unsigned i = 0; i < opt.slow; i++)
        sub_connect(add(SLOW, (int)i));
    for (unsigned i = 0; i < opt.resetters; i++)
        sub_connect(add(RESETTER, (int)i));
    subs_to_sync = opt.subs + opt.slow + opt.resetters;
    for (unsigned i = 0; opt.malformed && i < sizeof(bad) / sizeof(bad[0]); i++)
        conn_connect(add(MALFORMED, (int)i), on_adversary_connected);
    for (unsigned i = 0; i < opt.slowloris; i++)
        conn_connect(add(SLOWLORIS, (int)i), on_adversary_connected);
    conn_connect(add(IDLE, 0), on_adversary_connected);
    for (unsigned i = 0; i < opt.pubs; i++)
        conn_connect(add(PUB, (int)i), on_pub_connected);
    adversaries = opt.resetters + (opt.malformed ? sizeof(bad) / sizeof(bad[0]) : 0) +
                  opt.slowloris;

    uv_run(loop, UV_RUN_DEFAULT);
    uv_loop_close(loop);

    unsigned long slow_got = 0, slow_gaps = 0;
    for (struct conn *c = conns, *next; c != NULL; c = next) {
        next = c->next_conn;
        if (c->role == SLOW) {
            slow_got += c->got;
            slow_gaps += c->gaps;
        }
        zbuf_frame_decoder_delete(c->dec);
        free(c);
    }
    zbuf_pool_delete(pool);
    fprintf(stderr,
            "load: %u publishers x %u messages to %u subscribers: %u complete; slow subscribers "
            "got %lu and missed %lu; %u of %u adversaries dealt with; %lu failures\n",
            opt.pubs, opt.msgs, opt.subs, good_done, slow_got, slow_gaps, adversaries_done,
            adversaries, failures);
    return failures == 0 && good_done == opt.subs && adversaries_done == adversaries ? 0 : 1;
}
