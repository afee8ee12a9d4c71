/* SPDX-License-Identifier: MIT */
/*
 * bench_uv_fanout: a pub/sub broker fanning 64 KiB messages out to 16
 * subscribers over loopback TCP, zbuf dup against copying.
 *
 * Three threads, so that the broker is what is measured:
 *   publisher  a blocking socket that sends M framed messages as fast as the
 *              broker takes them (4-byte big-endian length, then the payload,
 *              whose first 8 bytes are the sequence number);
 *   broker     a libuv loop: reads the publisher, splits frames, writes each
 *              frame to every subscriber, with backpressure (the publisher is
 *              not read while a subscriber has more than HIGH_WATER queued);
 *   sink       epoll over the 16 subscriber sockets, discarding the bytes
 *              with recv(MSG_TRUNC) (no copy) and counting them.
 *
 * Broker variants:
 *   zbuf  zbuf_uv_read_start() into a pool, zbuf_frame_decoder (frames
 *         kept whole, header included, since they are forwarded as they
 *         came), and per subscriber a zbuf_dup() of the frame +
 *         zbuf_uv_write(): the payload is never copied in user space.
 *   copy  plain libuv as one writes it without zbufs: read into a buffer,
 *         and copy each message into one malloc'ed uv_buf_t per subscriber
 *         (payload bytes are copied straight from the read buffer into the
 *         16 destinations: no extra assembly copy), uv_write() each, free
 *         it in the write callback.
 *   copy, recycled buffers
 *         the same, but written buffers go on a free list and are reused:
 *         the copy without any allocation cost, the best case for copying.
 *   zbuf, limits + stream writes
 *         the zbuf broker as a server would run it with the adapter's
 *         protections: the publisher's stream limited to 64 pool buffers
 *         (zbuf_uv_read_set_limit()), subscribers written with
 *         zbuf_uv_stream_write() and their congestion tracked by water marks
 *         and the drain callback instead of polling the queue size: the
 *         cost of those features.
 *
 * Reported per variant: messages per second (median and best of the runs:
 * noise from other processes only ever adds time), delivered bytes per
 * second, and the broker thread's CPU time per message (median).  With
 * --verify the sink reads and checks every byte instead (slow; for
 * correctness, not timing).
 *
 * Usage: bench_uv_fanout [--msgs M] [--size BYTES] [--subs N] [--runs R] [--verify]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <zbuf/frame.h>
#include <zbuf/uv.h>

#include "bench_util.h"

#define MAX_SUBS 64
#define HIGH_WATER (1u << 20)
#define LOW_WATER (256u << 10)

static size_t msg_size = 64 * 1024;
static zbuf_pool_t *pool; /* shared by the runs of the zbuf variant */
static long msgs = 5000;
static int nsubs = 16;
static int runs = 5;
static bool verify;

/* Payload byte i of message seq (bytes 0..7 hold seq itself). */
static inline uint8_t pattern(uint64_t seq, size_t i)
{
    return (uint8_t)(i * 31 + seq * 7 + 1);
}

/* ================================================================ broker */

enum variant { V_ZBUF, V_COPY, V_RECYCLE, V_ZBUF_LIM, NVAR };
static const char *const vname[NVAR] = {"zbuf dup", "copy, malloc per write",
                                        "copy, recycled buffers",
                                        "zbuf dup, limits + stream writes"};

struct sub {
    zbuf_uv_stream_t zs;      /* first */
    bool congested;
};

struct broker {
    enum variant v;
    uv_loop_t loop;
    uv_tcp_t pub_listen, sub_listen;
    int pub_port, sub_port;
    zbuf_uv_stream_t pub;     /* the publisher connection */
    bool pub_open, pub_reading, pub_eof;
    struct sub subs[MAX_SUBS];
    int nsubs_conn;
    int ncongested;
    /* zbuf variant */
    zbuf_pool_t *pool;
    zbuf_frame_decoder_t *dec;
    /* copy variant: the message being received, copied into nsubs buffers */
    char rx[64 * 1024];
    uint8_t hdr[4];
    size_t hdr_have, frame_len, frame_have;
    struct copy_req *out[MAX_SUBS];
    /* results */
    long msgs_in;
    double cpu;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool ready;
};

static struct broker B;

static void pub_read_start(void);

static void check_congestion_cleared(void)
{
    if (B.ncongested == 0 && !B.pub_reading && B.pub_open && !B.pub_eof)
        pub_read_start();
}

static void note_queue(struct sub *s)
{
    size_t q = zbuf_uv_write_queue_size(&s->zs.stream);
    if (!s->congested && q > HIGH_WATER) {
        s->congested = true;
        B.ncongested++;
    } else if (s->congested && q < LOW_WATER) {
        s->congested = false;
        B.ncongested--;
    }
}

static void maybe_close_all(void);

/* V_ZBUF_LIM: congestion from the water marks, cleared by the drain
 * callback (the other variants poll the queue size in note_queue()). */
static void note_full(struct sub *s)
{
    if (!s->congested && zbuf_uv_write_full(&s->zs)) {
        s->congested = true;
        B.ncongested++;
    }
}

static void sub_drained(zbuf_uv_stream_t *zs)
{
    struct sub *s = (struct sub *)zs;
    if (s->congested) {
        s->congested = false;
        B.ncongested--;
    }
    check_congestion_cleared();
}

static void sub_written(struct sub *s, int status)
{
    if (status < 0)
        bench_die("subscriber write", status);
    note_queue(s);
    check_congestion_cleared();
    maybe_close_all();
}

/* ---- zbuf variant ---- */

static void zbuf_delivered(uv_stream_t *st, int status, void *arg)
{
    (void)arg;
    sub_written((struct sub *)st, status);
}

static void lim_delivered(uv_stream_t *st, int status, void *arg)
{
    (void)st;
    (void)arg;
    if (status < 0)
        bench_die("subscriber write", status);
    maybe_close_all(); /* congestion: note_full() and the drain callback */
}

/* V_ZBUF_LIM's fan-out of one frame. */
static void lim_fan_out(zbuf_t *m)
{
    for (int i = 0; i < B.nsubs_conn; i++) {
        zbuf_t *d;
        int rc;
        if ((rc = zbuf_dup(m, 0, ZBUF_TO_END, &d)) != 0)
            bench_die("dup", rc);
        if ((rc = zbuf_uv_stream_write(&B.subs[i].zs, d, lim_delivered, NULL)) != 0)
            bench_die("write", rc);
        note_full(&B.subs[i]);
    }
}

static void zbuf_pub_read(zbuf_uv_stream_t *zs, ssize_t status, zbuf_t *z)
{
    (void)zs;
    if (status == UV_ENOBUFS)
        return;
    if (status < 0) {
        if (status != UV_EOF)
            bench_die("publisher read", (int)status);
        B.pub_eof = true;
        maybe_close_all();
        return;
    }
    if (zbuf_frame_decoder_feed(B.dec, z) != 0)
        bench_die("feed", EINVAL);
    zbuf_t *m;
    int rc;
    while ((rc = zbuf_frame_decoder_next(B.dec, &m)) == 0) {
        /* keep_header: m is the whole frame, forwarded as it came. */
        B.msgs_in++;
        if (B.v == V_ZBUF_LIM) {
            lim_fan_out(m);
            zbuf_delete(m);
            continue;
        }
        for (int i = 0; i < B.nsubs_conn; i++) {
            zbuf_t *d;
            if ((rc = zbuf_dup(m, 0, ZBUF_TO_END, &d)) != 0)
                bench_die("dup", rc);
            if ((rc = zbuf_uv_write(&B.subs[i].zs.stream, d, zbuf_delivered, NULL)) != 0)
                bench_die("write", rc);
            note_queue(&B.subs[i]);
        }
        zbuf_delete(m);
    }
    if (rc != -EAGAIN)
        bench_die("decode", rc);
    if (B.ncongested > 0) {
        zbuf_uv_read_stop(&B.pub);
        B.pub_reading = false;
    }
}

/* ---- copy variant ---- */

struct copy_req {
    uv_write_t req;
    struct sub *s;
    size_t len, cap;
    struct copy_req *next_free;
    char data[];
};

/* V_COPY mallocs each subscriber's buffer and frees it in the write
 * callback, as plain code does.  V_RECYCLE keeps written buffers on a free
 * list instead, so that it pays for the copy alone and not for malloc/free
 * (glibc gives freed 64 KiB blocks back to the kernel and faults them in
 * again): the most favourable copying baseline. */
static struct copy_req *copy_free;

static struct copy_req *copy_req_get(size_t len)
{
    struct copy_req *c = copy_free;
    if (B.v == V_RECYCLE && c != NULL && c->cap >= len) {
        copy_free = c->next_free;
        return c;
    }
    c = malloc(sizeof(*c) + len);
    if (c == NULL)
        bench_die("malloc", ENOMEM);
    c->cap = len;
    return c;
}

static void copy_req_put(struct copy_req *c)
{
    if (B.v != V_RECYCLE) {
        free(c);
        return;
    }
    c->next_free = copy_free;
    copy_free = c;
}

static void copy_free_all(void)
{
    while (copy_free != NULL) {
        struct copy_req *c = copy_free;
        copy_free = c->next_free;
        free(c);
    }
}

static void copy_delivered(uv_write_t *req, int status)
{
    struct copy_req *c = (struct copy_req *)req;
    struct sub *s = c->s;
    copy_req_put(c);
    sub_written(s, status);
}

static void copy_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    (void)suggested;
    *buf = uv_buf_init(B.rx, sizeof(B.rx));
}

/* Copy n payload bytes into every subscriber's buffer for this message. */
static void copy_in(const char *p, size_t n)
{
    for (int i = 0; i < B.nsubs_conn; i++)
        memcpy(B.out[i]->data + 4 + B.frame_have, p, n);
    B.frame_have += n;
}

static void copy_frame_start(void)
{
    for (int i = 0; i < B.nsubs_conn; i++) {
        struct copy_req *c = copy_req_get(4 + B.frame_len);
        c->s = &B.subs[i];
        c->len = 4 + B.frame_len;
        memcpy(c->data, B.hdr, 4);
        B.out[i] = c;
    }
    B.frame_have = 0;
}

static void copy_frame_send(void)
{
    B.msgs_in++;
    for (int i = 0; i < B.nsubs_conn; i++) {
        struct copy_req *c = B.out[i];
        uv_buf_t b = uv_buf_init(c->data, (unsigned)c->len);
        int rc = uv_write(&c->req, &B.subs[i].zs.stream, &b, 1, copy_delivered);
        if (rc != 0)
            bench_die("uv_write", rc);
        note_queue(&B.subs[i]);
        B.out[i] = NULL;
    }
}

static void copy_pub_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    (void)st;
    if (nread < 0) {
        B.pub_eof = true;
        uv_read_stop(st);
        maybe_close_all();
        return;
    }
    const char *p = buf->base;
    size_t n = (size_t)nread;
    while (n > 0) {
        if (B.hdr_have < 4) {
            size_t k = 4 - B.hdr_have < n ? 4 - B.hdr_have : n;
            memcpy(B.hdr + B.hdr_have, p, k);
            B.hdr_have += k;
            p += k;
            n -= k;
            if (B.hdr_have == 4) {
                B.frame_len = (size_t)B.hdr[0] << 24 | (size_t)B.hdr[1] << 16 |
                              (size_t)B.hdr[2] << 8 | B.hdr[3];
                copy_frame_start();
                if (B.frame_len == 0) {
                    copy_frame_send();
                    B.hdr_have = 0;
                }
            }
            continue;
        }
        size_t k = B.frame_len - B.frame_have < n ? B.frame_len - B.frame_have : n;
        copy_in(p, k);
        p += k;
        n -= k;
        if (B.frame_have == B.frame_len) {
            copy_frame_send();
            B.hdr_have = 0;
        }
    }
    if (B.ncongested > 0) {
        uv_read_stop(&B.pub.stream);
        B.pub_reading = false;
    }
}

/* ---- common ---- */

static void pub_read_start(void)
{
    bool zb = B.v == V_ZBUF || B.v == V_ZBUF_LIM;
    int rc = zb ? zbuf_uv_read_start(&B.pub, B.pool, zbuf_pub_read)
                : uv_read_start(&B.pub.stream, copy_alloc, copy_pub_read);
    /* (both copy variants read the same way) */
    if (rc != 0)
        bench_die("read start", rc);
    B.pub_reading = true;
}

static void maybe_close_all(void)
{
    if (!B.pub_eof || !B.pub_open)
        return;
    for (int i = 0; i < B.nsubs_conn; i++)
        if (zbuf_uv_write_queue_size(&B.subs[i].zs.stream) > 0)
            return;
    B.cpu = bench_thread_cpu_s() - B.cpu;
    B.pub_open = false;
    zbuf_uv_close(&B.pub, NULL);
    for (int i = 0; i < B.nsubs_conn; i++)
        zbuf_uv_close(&B.subs[i].zs, NULL);
}

static void on_sub_conn(uv_stream_t *l, int status)
{
    if (B.nsubs_conn == MAX_SUBS)
        bench_die("accept", EMFILE);
    struct sub *s = &B.subs[B.nsubs_conn++];
    bench_accept(l, status, &s->zs);
    uv_tcp_nodelay(&s->zs.tcp, 1);
    if (B.v == V_ZBUF_LIM &&
        zbuf_uv_write_set_watermarks(&s->zs, HIGH_WATER, LOW_WATER, sub_drained) != 0)
        bench_die("water marks", ENOMEM);
    if (B.nsubs_conn == nsubs)
        uv_close((uv_handle_t *)&B.sub_listen, NULL);
}

static void on_pub_conn(uv_stream_t *l, int status)
{
    bench_accept(l, status, &B.pub);
    uv_close((uv_handle_t *)&B.pub_listen, NULL);
    if (B.v == V_ZBUF_LIM && zbuf_uv_read_set_limit(&B.pub, 64) != 0)
        bench_die("read limit", EINVAL);
    B.pub_open = true;
    B.cpu = bench_thread_cpu_s();
    pub_read_start();
}

static void *broker_main(void *arg)
{
    (void)arg;
    uv_loop_init(&B.loop);
    B.pub_port = bench_listen_loopback(&B.loop, &B.pub_listen, 128, on_pub_conn);
    B.sub_port = bench_listen_loopback(&B.loop, &B.sub_listen, 128, on_sub_conn);
    bench_serve(&B.loop, &B.mu, &B.cv, &B.ready);
    copy_free_all();
    return NULL;
}

/* ============================================================ clients */

static int pub_fd;
static int sub_fds[MAX_SUBS];
static double t_start, t_end;
static double pub_cpu, sink_cpu; /* CPU seconds of those threads */

static void *publisher_main(void *arg)
{
    (void)arg;
    size_t flen = 4 + msg_size;
    uint8_t *f = malloc(flen);
    f[0] = (uint8_t)(msg_size >> 24);
    f[1] = (uint8_t)(msg_size >> 16);
    f[2] = (uint8_t)(msg_size >> 8);
    f[3] = (uint8_t)msg_size;
    for (size_t i = 0; i < msg_size; i++)
        f[4 + i] = pattern(0, i);
    t_start = bench_now_s();
    for (long seq = 0; seq < msgs; seq++) {
        uint64_t s = (uint64_t)seq;
        if (msg_size >= 8)
            memcpy(f + 4, &s, 8);
        if (verify)
            for (size_t i = 8; i < msg_size; i++)
                f[4 + i] = pattern(s, i);
        size_t off = 0;
        while (off < flen) {
            ssize_t r = send(pub_fd, f + off, flen - off, MSG_NOSIGNAL);
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0)
                bench_die("publish", errno);
            off += (size_t)r;
        }
    }
    shutdown(pub_fd, SHUT_WR);
    free(f);
    pub_cpu = bench_thread_cpu_s();
    return NULL;
}

/* Per-subscriber frame checker for --verify. */
struct checker {
    uint8_t hdr[4];
    size_t hdr_have, len, have;
    uint64_t seq, next_seq;
    uint8_t seqb[8];
    long bad;
};

static void check_bytes(struct checker *c, const uint8_t *p, size_t n)
{
    while (n > 0) {
        if (c->hdr_have < 4) {
            c->hdr[c->hdr_have++] = *p++;
            n--;
            if (c->hdr_have == 4) {
                c->len = (size_t)c->hdr[0] << 24 | (size_t)c->hdr[1] << 16 |
                         (size_t)c->hdr[2] << 8 | c->hdr[3];
                c->have = 0;
                if (c->len != msg_size)
                    c->bad++;
            }
            continue;
        }
        uint8_t b = *p++;
        n--;
        if (c->have < 8) {
            c->seqb[c->have] = b;
            if (c->have == 7) {
                memcpy(&c->seq, c->seqb, 8);
                if (c->seq != c->next_seq)
                    c->bad++;
                c->next_seq = c->seq + 1;
            }
        } else if (b != pattern(c->seq, c->have)) {
            c->bad++;
        }
        if (++c->have == c->len)
            c->hdr_have = 0;
    }
}

static long sink_bad;

static void *sink_main(void *arg)
{
    (void)arg;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    static uint8_t buf[1 << 20];
    struct checker *chk = calloc((size_t)nsubs, sizeof(*chk));
    for (int i = 0; i < nsubs; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        epoll_ctl(ep, EPOLL_CTL_ADD, sub_fds[i], &ev);
    }
    uint64_t each = (uint64_t)msgs * (4 + msg_size), want = (uint64_t)nsubs * each, got = 0;
    uint64_t *got_sub = calloc((size_t)nsubs, sizeof(*got_sub));
    while (got < want) {
        struct epoll_event evs[MAX_SUBS];
        int n = epoll_wait(ep, evs, MAX_SUBS, 10000);
        if (n <= 0)
            bench_die("sink timed out", ETIMEDOUT);
        for (int i = 0; i < n; i++) {
            int s = (int)evs[i].data.u32;
            ssize_t r = recv(sub_fds[s], buf, sizeof(buf), MSG_DONTWAIT | (verify ? 0 : MSG_TRUNC));
            if (r > 0) {
                got += (uint64_t)r;
                got_sub[s] += (uint64_t)r;
                if (verify)
                    check_bytes(&chk[s], buf, (size_t)r);
            } else if (r == 0) {
                /* The broker closes every subscriber once all is written;
                 * one may end while others still have bytes in flight. */
                if (got_sub[s] != each)
                    bench_die("subscriber closed early", EPIPE);
                epoll_ctl(ep, EPOLL_CTL_DEL, sub_fds[s], NULL);
            } else if (errno != EAGAIN) {
                bench_die("sink recv", errno);
            }
        }
    }
    t_end = bench_now_s();
    sink_cpu = bench_thread_cpu_s();
    for (int i = 0; i < nsubs; i++)
        sink_bad += chk[i].bad + (verify && chk[i].next_seq != (uint64_t)msgs);
    free(chk);
    free(got_sub);
    close(ep);
    return NULL;
}

/* ============================================================== driver */

struct result {
    double secs, cpu_per_msg;
};

static struct result run_once(enum variant v)
{
    memset(&B, 0, offsetof(struct broker, mu));
    B.v = v;
    pthread_mutex_init(&B.mu, NULL);
    pthread_cond_init(&B.cv, NULL);
    B.ready = false;
    if (v == V_ZBUF || v == V_ZBUF_LIM) {
        zbuf_frame_opts_t o;
        zbuf_frame_opts_default(&o);
        o.keep_header = true;
        B.pool = pool;
        int rc = zbuf_frame_decoder_create(&o, &B.dec);
        if (rc != 0)
            bench_die("zbuf setup", rc);
    }
    pthread_t bt, pt, st;
    pthread_create(&bt, NULL, broker_main, NULL);
    bench_wait_ready(&B.mu, &B.cv, &B.ready);
    for (int i = 0; i < nsubs; i++)
        sub_fds[i] = bench_connect_loopback(B.sub_port);
    /* Let the broker accept every subscriber before the publisher starts. */
    while (__atomic_load_n(&B.nsubs_conn, __ATOMIC_ACQUIRE) < nsubs)
        usleep(1000);
    pub_fd = bench_connect_loopback(B.pub_port);
    pthread_create(&st, NULL, sink_main, NULL);
    pthread_create(&pt, NULL, publisher_main, NULL);
    pthread_join(pt, NULL);
    pthread_join(st, NULL);
    pthread_join(bt, NULL);
    for (int i = 0; i < nsubs; i++)
        close(sub_fds[i]);
    close(pub_fd);
    if (B.msgs_in != msgs)
        bench_die("messages lost in the broker", EIO);
    if (v == V_ZBUF || v == V_ZBUF_LIM) {
        zbuf_frame_decoder_delete(B.dec);
        if (zbuf_pool_available(B.pool) != zbuf_pool_capacity(B.pool))
            bench_die("pool buffers not returned", EIO);
    }
    pthread_mutex_destroy(&B.mu);
    pthread_cond_destroy(&B.cv);
    return (struct result){t_end - t_start, B.cpu / (double)msgs};
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--msgs") == 0 && i + 1 < argc)
            msgs = atol(argv[++i]);
        else if (strcmp(argv[i], "--size") == 0 && i + 1 < argc)
            msg_size = (size_t)atol(argv[++i]);
        else if (strcmp(argv[i], "--subs") == 0 && i + 1 < argc)
            nsubs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--verify") == 0)
            verify = true;
        else {
            fprintf(stderr, "usage: bench_uv_fanout [--msgs M] [--size BYTES] [--subs N] "
                            "[--runs R] [--verify]\n");
            return 2;
        }
    }
    if (msgs < 1 || msg_size < 8 || msg_size > (64u << 20) || nsubs < 1 || nsubs > MAX_SUBS ||
        runs < 1 || runs > 99)
        bench_die("bad arguments", EINVAL);
    signal(SIGPIPE, SIG_IGN);
    pool = bench_warm_pool(64 * 1024, 1024);

    double secs[NVAR][99], cpu[NVAR][99];
    for (int r = 0; r < runs; r++) {
        /* Rotate the order so that drift hits every variant alike. */
        for (int k = 0; k < NVAR; k++) {
            enum variant var = (enum variant)((k + r) % NVAR);
            struct result res = run_once(var);
            secs[var][r] = res.secs;
            cpu[var][r] = res.cpu_per_msg;
            if (sink_bad)
                bench_die("subscribers received wrong bytes", EIO);
            fprintf(stderr, "run %d %s: %.3f s, broker %.1f us/msg (publisher %.1f, sink %.1f)\n",
                    r, vname[var], res.secs, res.cpu_per_msg * 1e6,
                    pub_cpu / (double)msgs * 1e6, sink_cpu / (double)msgs * 1e6);
        }
    }
    double sm[NVAR], sb[NVAR], cm[NVAR];
    for (int v = 0; v < NVAR; v++) {
        sm[v] = bench_median(secs[v], runs);
        sb[v] = secs[v][0]; /* sorted by bench_median() */
        cm[v] = bench_median(cpu[v], runs);
    }
    double bytes = (double)msgs * (double)nsubs * (double)msg_size;
    printf("### Fan-out: %ld messages of %zu bytes to %d subscribers (%d runs%s)\n\n", msgs,
           msg_size, nsubs, runs, verify ? ", verified" : "");
    printf("| broker | messages/s, median | best | delivered MB/s, median | "
           "broker CPU per message, median | zbuf speed-up: median, best, CPU |\n");
    printf("| --- | ---: | ---: | ---: | ---: | ---: |\n");
    for (int v = 0; v < NVAR; v++) {
        printf("| %s | %.0f | %.0f | %.0f | %.1f us |", vname[v], (double)msgs / sm[v],
               (double)msgs / sb[v], bytes / sm[v] / 1e6, cm[v] * 1e6);
        if (v == V_ZBUF)
            printf(" |\n");
        else
            printf(" %.2fx, %.2fx, %.2fx |\n", sm[v] / sm[V_ZBUF], sb[v] / sb[V_ZBUF],
                   cm[v] / cm[V_ZBUF]);
    }
    printf("\nIn flight per message: zbuf %zu bytes shared by all subscribers; "
           "copying %zu bytes (one copy each).\n\n", msg_size + 4, (msg_size + 4) * (size_t)nsubs);
    zbuf_pool_delete(pool);
    return 0;
}
