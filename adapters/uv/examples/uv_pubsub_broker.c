/* SPDX-License-Identifier: MIT */
/*
 * uv_pubsub_broker: a publish/subscribe broker over TCP that fans every
 * message out by reference, and stands up to slow, resetting, malformed and
 * slowloris clients.  uv_pubsub_load.c is its load client; the test suite
 * runs both (pubsub_load_test.sh).
 *
 * Protocol: 4-byte big-endian length-prefixed frames (zbuf/frame.h) whose
 * payload is a line of text, parsed in place (zbuf_cursor_find(), no copy):
 *   SUB <topic>             subscribe this connection to <topic>
 *   PUB <topic> <payload>   publish <payload> (any bytes) to <topic>
 *   SYNC                    answered with a SYNC frame once every earlier
 *                           frame of the connection was handled
 * A subscriber receives each message as a frame "<topic> <payload>".
 *
 * The fan-out copies no payload byte.  A published frame is read into pool
 * buffers and comes out of the decoder as a zbuf sharing them; the broker
 * cuts "PUB " off its front, writes the new frame header in front once
 * (zbuf_frame_encode(): into a header slab, no allocation), and then, for
 * each subscriber, zbuf_dup()s it (references only) and writes the
 * duplicate with zbuf_uv_stream_write().  The pool buffers go back when the
 * last subscriber's write has completed.
 *
 * What keeps one client from hurting the others:
 * - Each connection may hold at most --stream-limit pool buffers
 *   (zbuf_uv_read_set_limit()).  A publisher whose messages sit in a slow
 *   subscriber's queue pauses alone once they hold its share, and resumes
 *   (resume callback) when they drain: that is the backpressure, with no
 *   code here, and the pool is never drained by one peer.
 * - Frames above --max-frame are refused at their header, as are frames
 *   that could never fit in what the connection may hold (the decoder
 *   checks that by itself); malformed lengths and commands close the
 *   connection.
 * - A subscriber whose queue stays above --high-water
 *   (zbuf_uv_write_full()) for --slow-ms without draining to --low-water
 *   (drain callback) is disconnected as a slow consumer: its queued writes
 *   are cancelled, their buffers come back, and the publishers it held
 *   back resume.  Nobody waits for it longer than that, and nothing is
 *   dropped for anybody else.
 * - A partial frame that does not complete within --partial-ms (not
 *   counting the time its reading was paused) is a slowloris: the
 *   connection is closed and its buffers come back.
 * - A reset or vanished peer is closed; its queued writes are cancelled and
 *   their buffers come back.
 *
 * On SIGINT or SIGTERM the broker closes everything, prints its counters
 * and the library's (zbuf_stats_get()), and exits 1 if any zbuf, segment,
 * buffer or pool is still alive: every counter must be back at zero.
 * With --stats-ms it also prints, while running, its live counters beside
 * what the adapter says it holds (zbuf_uv_stats()), which match whenever
 * the broker is quiet.
 *
 * Usage: uv_pubsub_broker [--port N] [--port-file PATH] [--pool-bufs N]
 *          [--buf-size BYTES] [--stream-limit N] [--max-frame BYTES]
 *          [--high-water BYTES] [--low-water BYTES] [--slow-ms MS]
 *          [--partial-ms MS] [--sndbuf BYTES] [--stats-ms MS] [--verbose]
 * --port 0 picks a free port; --port-file writes it there once listening.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zbuf/frame.h>
#include <zbuf/uv.h>

#define MAX_TOPIC 64
#define MAX_PEERS 4096

static struct {
    int port;
    const char *port_file;
    size_t pool_bufs, buf_size, stream_limit, max_frame, high_water, low_water, sndbuf;
    unsigned slow_ms, partial_ms, stats_ms;
    bool verbose;
} opt = {7001, NULL, 1024, 64 * 1024, 64, 16u << 20, 4u << 20, 1u << 20, 0, 5000, 5000, 0, false};

/* A connection: publisher, subscriber, or both. */
struct peer {
    zbuf_uv_stream_t zs; /* first: the handle is inside */
    zbuf_frame_decoder_t *dec;
    uint8_t topic[MAX_TOPIC]; /* subscribed topic, when topic_len > 0 */
    size_t topic_len;
    uint64_t partial_since;   /* ms: a frame has been incomplete since then; 0 */
    uint64_t full_since;      /* ms: its queue has been full since then; 0 */
    unsigned long published, delivered;
    unsigned id;
    struct peer *prev, *next;
    bool closing;
};

static struct {
    uv_loop_t *loop;
    uv_tcp_t server;
    uv_timer_t sweep;
    uv_signal_t sigint, sigterm;
    zbuf_pool_t *pool;
    zbuf_frame_opts_t fo;
    struct peer *peers;
    size_t npeers;
    unsigned next_id;
    bool stopping;
    /* counters */
    unsigned long accepted, published, delivered, resumes, pauses;
    unsigned long closed_eof, closed_error, closed_protocol, closed_slowloris, closed_slow;
} B;

static uint64_t now_ms(void)
{
    return uv_now(B.loop);
}

static void say(const struct peer *p, const char *fmt, const char *what)
{
    if (opt.verbose)
        fprintf(stderr, "broker: peer %u: %s%s\n", p->id, fmt, what ? what : "");
}

/* ------------------------------------------------------------ closing */

static void on_peer_closed(uv_handle_t *h)
{
    struct peer *p = (struct peer *)h;
    zbuf_frame_decoder_delete(p->dec);
    free(p);
}

static void peer_close(struct peer *p, unsigned long *reason, const char *why)
{
    if (p->closing)
        return;
    p->closing = true;
    (*reason)++;
    say(p, "closed: ", why);
    *(p->prev != NULL ? &p->prev->next : &B.peers) = p->next;
    if (p->next != NULL)
        p->next->prev = p->prev;
    B.npeers--;
    /* Queued writes are cancelled; their buffers come back. */
    zbuf_uv_close(&p->zs, on_peer_closed);
}

/* ------------------------------------------------------------ fan-out */

static void on_delivered(uv_stream_t *s, int status, void *arg)
{
    (void)arg;
    if (status == 0) {
        ((struct peer *)s)->delivered++;
        B.delivered++;
    }
}

static void on_drained(zbuf_uv_stream_t *zs)
{
    struct peer *p = (struct peer *)zs;
    p->full_since = 0;
    say(p, "drained", NULL);
}

static void on_resumed(zbuf_uv_stream_t *zs)
{
    struct peer *p = (struct peer *)zs;
    B.resumes++;
    if (p->partial_since != 0)
        p->partial_since = now_ms(); /* the wait was ours, not the peer's */
}

/* Whether the zbuf's bytes [off, off + len) equal mem[0 .. len). */
static bool bytes_equal(const zbuf_t *z, size_t off, const uint8_t *mem, size_t len)
{
    zbuf_cursor_t c;
    if (zbuf_cursor_init(&c, z, off) != 0 || zbuf_cursor_remaining(&c) < len)
        return false;
    const uint8_t *p = zbuf_cursor_peek(&c, len); /* in place when contiguous */
    if (p != NULL)
        return memcmp(p, mem, len) == 0;
    for (size_t i = 0; i < len; i++) { /* straddles segments: byte by byte */
        uint8_t b;
        if (zbuf_cursor_read_u8(&c, &b) != 0 || b != mem[i])
            return false;
    }
    return true;
}

/* Send `framed` ("<topic> <payload>" with its header in front, the topic
 * topic_len bytes after the header) to every subscriber of the topic.
 * Consumes framed. */
static void fan_out(zbuf_t *framed, size_t hdr, size_t topic_len)
{
    for (struct peer *s = B.peers; s != NULL; s = s->next) {
        if (s->topic_len != topic_len || !bytes_equal(framed, hdr, s->topic, topic_len))
            continue;
        zbuf_t *d;
        if (zbuf_dup(framed, 0, ZBUF_TO_END, &d) != 0)
            break; /* out of memory: the others miss it too */
        if (zbuf_uv_stream_write(&s->zs, d, on_delivered, NULL) != 0) {
            zbuf_delete(d); /* the stream is failing: its read side reports it */
            continue;
        }
        if (zbuf_uv_write_full(&s->zs) && s->full_since == 0)
            s->full_since = now_ms();
    }
    zbuf_delete(framed); /* the duplicates hold the buffers now */
}

/* ----------------------------------------------------------- commands */

/* A reply frame of static bytes: enrolled, never copied. */
static int reply_static(struct peer *p, const char *text)
{
    zbuf_t *z;
    if (zbuf_create(&z) != 0)
        return -ENOMEM;
    int rc = zbuf_append_buf(z, (void *)text, strlen(text), NULL, NULL);
    if (rc == 0)
        rc = zbuf_frame_encode(&B.fo, z);
    if (rc == 0)
        rc = zbuf_uv_stream_write(&p->zs, z, NULL, NULL);
    if (rc != 0)
        zbuf_delete(z);
    return rc;
}

/* Handle one frame's payload; consumes msg.  Returns false when the peer
 * was closed. */
static bool handle(struct peer *p, zbuf_t *msg)
{
    zbuf_cursor_t c;
    size_t verb = 0, topic = 0, len = zbuf_length(msg);
    if (zbuf_cursor_init(&c, msg, 0) != 0)
        goto bad;
    if (zbuf_cursor_find(&c, ' ', 5, &verb) != 0)
        verb = len; /* no argument */
    if (verb == 4 && bytes_equal(msg, 0, (const uint8_t *)"SYNC", 4)) {
        zbuf_delete(msg);
        if (reply_static(p, "SYNC") == 0)
            return true;
        peer_close(p, &B.closed_error, "cannot reply");
        return false;
    }
    if (verb != 3 || zbuf_cursor_skip(&c, 4) != 0)
        goto bad;
    if (zbuf_cursor_find(&c, ' ', MAX_TOPIC + 1, &topic) != 0)
        topic = zbuf_cursor_remaining(&c); /* the topic runs to the end */
    if (topic == 0 || topic > MAX_TOPIC)
        goto bad;
    if (bytes_equal(msg, 0, (const uint8_t *)"SUB", 3) && topic == len - 4) {
        /* The one copy the broker makes: a subscriber's topic, once. */
        if (zbuf_cursor_read(&c, p->topic, topic) != 0)
            goto bad;
        p->topic_len = topic;
        zbuf_delete(msg);
        return true;
    }
    if (bytes_equal(msg, 0, (const uint8_t *)"PUB", 3) && topic < len - 4) {
        p->published++;
        B.published++;
        (void)zbuf_cut(msg, 0, 4, NULL); /* "PUB ": a front cut, no copy */
        size_t hdr = zbuf_frame_header_size(&B.fo, zbuf_length(msg));
        if (zbuf_frame_encode(&B.fo, msg) != 0) {
            zbuf_delete(msg);
            peer_close(p, &B.closed_error, "out of memory");
            return false;
        }
        fan_out(msg, hdr, topic);
        return true;
    }
bad:
    zbuf_delete(msg);
    peer_close(p, &B.closed_protocol, "bad command");
    return false;
}

static void on_read(zbuf_uv_stream_t *zs, ssize_t status, zbuf_t *z)
{
    struct peer *p = (struct peer *)zs;
    if (status == UV_ENOBUFS) {
        B.pauses++; /* it resumes by itself; on_resumed counts it */
        return;
    }
    if (status < 0) {
        if (status == UV_EOF)
            peer_close(p, &B.closed_eof, "end of stream");
        else
            peer_close(p, &B.closed_error, uv_err_name((int)status));
        return;
    }
    int rc = zbuf_frame_decoder_feed(p->dec, z);
    if (rc != 0) {
        zbuf_delete(z);
        peer_close(p, &B.closed_protocol, zbuf_strerror(rc));
        return;
    }
    zbuf_t *msg;
    bool progress = false;
    while ((rc = zbuf_frame_decoder_next(p->dec, &msg)) == 0) {
        progress = true;
        if (!handle(p, msg))
            return;
    }
    if (rc != -EAGAIN) { /* -EMSGSIZE, -EBADMSG: the connection is done */
        peer_close(p, &B.closed_protocol, zbuf_strerror(rc));
        return;
    }
    /* A partial frame must complete within partial_ms of when it began. */
    if (zbuf_frame_decoder_buffered(p->dec) == 0)
        p->partial_since = 0;
    else if (progress || p->partial_since == 0)
        p->partial_since = now_ms();
}

/* ------------------------------------------------------- connections */

static void on_connection(uv_stream_t *srv, int status)
{
    if (status < 0 || B.stopping)
        return;
    struct peer *p = calloc(1, sizeof(*p));
    if (p == NULL || zbuf_frame_decoder_create(&B.fo, &p->dec) != 0) {
        free(p);
        return;
    }
    uv_tcp_init(B.loop, &p->zs.tcp);
    zbuf_uv_stream_init(&p->zs);
    p->id = B.next_id++;
    p->next = B.peers;
    if (B.peers != NULL)
        B.peers->prev = p;
    B.peers = p;
    B.npeers++;
    B.accepted++;
    if (uv_accept(srv, &p->zs.stream) != 0 || B.npeers > MAX_PEERS ||
        zbuf_uv_read_set_limit(&p->zs, opt.stream_limit) != 0 ||
        zbuf_uv_read_set_resume_cb(&p->zs, on_resumed) != 0 ||
        zbuf_uv_write_set_watermarks(&p->zs, opt.high_water, opt.low_water, on_drained) != 0 ||
        zbuf_uv_read_start(&p->zs, B.pool, on_read) != 0) {
        peer_close(p, &B.closed_error, "cannot set up");
        return;
    }
    uv_tcp_nodelay(&p->zs.tcp, 1);
    if (opt.sndbuf > 0) {
        int v = (int)opt.sndbuf;
        uv_send_buffer_size(&p->zs.handle, &v);
    }
}

static void print_live(const char *when)
{
    zbuf_stats_t st;
    zbuf_uv_stats_t us;
    zbuf_stats_get(&st);
    if (zbuf_uv_stats(B.loop, &us) != 0)
        memset(&us, 0, sizeof(us));
    fprintf(stderr,
            "broker %s: live zbufs %" PRId64 ", segments %" PRId64 ", buffers %" PRId64
            "; the adapter's streams hold %zu (%zu kept for the next read, %zu of them idle), "
            "header slabs %zu; %zu streams, %zu paused; %zu writes queued (%zu bytes) pin "
            "%zu buffers (%zu bytes)\n",
            when, st.live_zbufs, st.live_segs, st.live_bufs, us.read_held, us.read_kept,
            us.read_kept_idle, zbuf_frame_header_bufs(), us.streams, us.paused, us.write_reqs,
            us.write_bytes, us.write_bufs, us.write_mem);
}

/* Every 250 ms: slowloris and slow consumers, and the optional stats. */
static void on_sweep(uv_timer_t *t)
{
    (void)t;
    static uint64_t last_stats;
    uint64_t now = now_ms();
    for (struct peer *p = B.peers, *next; p != NULL; p = next) {
        next = p->next;
        if (zbuf_uv_read_paused(&p->zs))
            p->partial_since = p->partial_since ? now : 0; /* we hold it back */
        else if (p->partial_since != 0 && now - p->partial_since > opt.partial_ms)
            peer_close(p, &B.closed_slowloris, "partial frame timed out");
        else if (p->full_since != 0 && now - p->full_since > opt.slow_ms)
            peer_close(p, &B.closed_slow, "slow consumer");
    }
    if (opt.stats_ms > 0 && now - last_stats >= opt.stats_ms) {
        last_stats = now;
        print_live("running");
    }
}

static void on_signal(uv_signal_t *s, int signum)
{
    (void)s;
    if (B.stopping)
        return;
    B.stopping = true;
    if (opt.verbose)
        fprintf(stderr, "broker: signal %d, closing %zu connections\n", signum, B.npeers);
    uv_close((uv_handle_t *)&B.server, NULL);
    uv_close((uv_handle_t *)&B.sweep, NULL);
    uv_close((uv_handle_t *)&B.sigint, NULL);
    uv_close((uv_handle_t *)&B.sigterm, NULL);
    while (B.peers != NULL)
        peer_close(B.peers, &B.closed_eof, "shutting down");
}

static int listen_on(int port)
{
    struct sockaddr_in addr;
    struct sockaddr_storage bound;
    int len = sizeof(bound);
    uv_ip4_addr("127.0.0.1", port, &addr);
    uv_tcp_init(B.loop, &B.server);
    int rc = uv_tcp_bind(&B.server, (const struct sockaddr *)&addr, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&B.server, 512, on_connection);
    if (rc == 0)
        rc = uv_tcp_getsockname(&B.server, (struct sockaddr *)&bound, &len);
    if (rc != 0) {
        fprintf(stderr, "broker: cannot listen on port %d: %s\n", port, uv_strerror(rc));
        return -1;
    }
    return ntohs(((struct sockaddr_in *)&bound)->sin_port);
}

static int usage(void)
{
    fprintf(stderr, "usage: uv_pubsub_broker [--port N] [--port-file PATH] [--pool-bufs N] "
                    "[--buf-size BYTES] [--stream-limit N] [--max-frame BYTES] "
                    "[--high-water BYTES] [--low-water BYTES] [--slow-ms MS] "
                    "[--partial-ms MS] [--sndbuf BYTES] [--stats-ms MS] [--verbose]\n");
    return 2;
}

static bool parse_args(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        size_t *sz = strcmp(a, "--pool-bufs") == 0      ? &opt.pool_bufs
                     : strcmp(a, "--buf-size") == 0     ? &opt.buf_size
                     : strcmp(a, "--stream-limit") == 0 ? &opt.stream_limit
                     : strcmp(a, "--max-frame") == 0    ? &opt.max_frame
                     : strcmp(a, "--high-water") == 0   ? &opt.high_water
                     : strcmp(a, "--low-water") == 0    ? &opt.low_water
                     : strcmp(a, "--sndbuf") == 0       ? &opt.sndbuf
                                                        : NULL;
        unsigned *ms = strcmp(a, "--slow-ms") == 0      ? &opt.slow_ms
                       : strcmp(a, "--partial-ms") == 0 ? &opt.partial_ms
                       : strcmp(a, "--stats-ms") == 0   ? &opt.stats_ms
                                                        : NULL;
        if (strcmp(a, "--verbose") == 0) {
            opt.verbose = true;
            continue;
        }
        if (v == NULL)
            return false;
        i++;
        if (sz != NULL)
            *sz = (size_t)strtoull(v, NULL, 10);
        else if (ms != NULL)
            *ms = (unsigned)strtoul(v, NULL, 10);
        else if (strcmp(a, "--port") == 0)
            opt.port = atoi(v);
        else if (strcmp(a, "--port-file") == 0)
            opt.port_file = v;
        else
            return false;
    }
    return opt.pool_bufs > 0 && opt.buf_size > 0 && opt.stream_limit > 0 &&
           opt.max_frame > 0 && opt.low_water <= opt.high_water && opt.high_water > 0;
}

int main(int argc, char **argv)
{
    if (!parse_args(argc, argv))
        return usage();
    signal(SIGPIPE, SIG_IGN);
    B.loop = uv_default_loop();
    if (zbuf_pool_create(opt.buf_size, opt.pool_bufs, &B.pool) != 0)
        return 1;
    zbuf_frame_opts_default(&B.fo);
    B.fo.max_payload = opt.max_frame;
    int port = listen_on(opt.port);
    if (port < 0)
        return 1;
    if (opt.port_file != NULL) {
        char tmp[4096];
        snprintf(tmp, sizeof(tmp), "%s.tmp", opt.port_file);
        FILE *f = fopen(tmp, "w");
        if (f == NULL || fprintf(f, "%d\n", port) < 0 || fclose(f) != 0 ||
            rename(tmp, opt.port_file) != 0) {
            perror("broker: port file");
            return 1;
        }
    }
    fprintf(stderr, "broker: listening on 127.0.0.1:%d (pool %zu x %zu bytes, %zu per stream)\n",
            port, opt.pool_bufs, opt.buf_size, opt.stream_limit);
    uv_timer_init(B.loop, &B.sweep);
    uv_timer_start(&B.sweep, on_sweep, 250, 250);
    uv_signal_init(B.loop, &B.sigint);
    uv_signal_init(B.loop, &B.sigterm);
    uv_signal_start(&B.sigint, on_signal, SIGINT);
    uv_signal_start(&B.sigterm, on_signal, SIGTERM);

    zbuf_stats_t st0;
    zbuf_stats_get(&st0);
    uv_run(B.loop, UV_RUN_DEFAULT);
    int rc = uv_loop_close(B.loop) == 0 ? 0 : 1;
    zbuf_pool_delete(B.pool);
    zbuf_frame_thread_flush();
    zbuf_thread_cache_flush();

    zbuf_stats_t st;
    zbuf_stats_get(&st);
    fprintf(stderr,
            "broker: %lu connections; %lu published, %lu delivered; %lu pauses, %lu resumes; "
            "closed: %lu end, %lu error, %lu protocol, %lu slowloris, %lu slow consumer\n",
            B.accepted, B.published, B.delivered, B.pauses, B.resumes, B.closed_eof,
            B.closed_error, B.closed_protocol, B.closed_slowloris, B.closed_slow);
    fprintf(stderr,
            "broker: bytes copied %" PRIu64 " (subscription topics only); live at exit: "
            "zbufs %" PRId64 ", segments %" PRId64 ", buffers %" PRId64 ", pools %" PRId64 "\n",
            st.bytes_copied - st0.bytes_copied, st.live_zbufs, st.live_segs, st.live_bufs,
            st.live_pools);
    if (st.live_zbufs != 0 || st.live_segs != 0 || st.live_bufs != 0 || st.live_pools != 0) {
        fprintf(stderr, "broker: LEAK: a counter is not back to zero\n");
        rc = 1;
    }
    return rc;
}
