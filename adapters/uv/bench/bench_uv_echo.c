/* SPDX-License-Identifier: MIT */
/*
 * bench_uv_echo: framed echo throughput over loopback TCP, 1 KiB to 1 MiB
 * messages, a zbuf server against a copying one.
 *
 * Two threads:
 *   server  a libuv loop that echoes every whole frame (4-byte big-endian
 *           length + payload) back to the client;
 *   client  a non-blocking socket that keeps WINDOW bytes of frames in
 *           flight and discards the echoes with recv(MSG_TRUNC) (no copy),
 *           so that the server's cost is what is measured.
 *
 * Server variants:
 *   zbuf bulk  reads into a pool (zbuf_uv_read_start), takes every whole
 *              frame of the stream at once (zbuf_frame_decoder_next_frames:
 *              one header read per frame, one split per read) and writes
 *              them back with one zbuf_uv_write(): what a relay does.
 *   zbuf msg   the same reads, but every message is handled on its own, as
 *              an application would, picking the path by size: a payload
 *              of at most copy_max bytes lying in one segment is looked at
 *              in place (zbuf_frame_decoder_peek) and copied into the output
 *              (zbuf_frame_append_copy); a larger one is taken as a zbuf
 *              (zbuf_frame_decoder_next) and framed by reference
 *              (zbuf_frame_append).  The frames of one read go out in one
 *              write.  BENCH_COPY_MAX=n overrides copy_max.
 *   copy       plain libuv: reads into one buffer and copies each frame into
 *         uv_buf_t memory of its own for the write: complete frames of one
 *         read are copied into one batch buffer, a frame that straddles
 *         reads is copied piecewise into a buffer of its full size.  One
 *         copy per byte, the least a framed echo without zbufs needs.
 * Both stop reading above a write-queue high-water mark.
 *
 * Reported per size: echo throughput each way, median and best of the runs
 * (noise from other processes only ever adds time), and the server thread's
 * CPU time per MiB (median).  With --verify the client checks that
 * the echoed stream equals the sent one byte for byte.
 *
 * Usage: bench_uv_echo [--mbytes MB] [--runs R] [--verify] [--sizes a,b,...]
 * Environment: BENCH_VERBOSE=1 prints every run; BENCH_ONLY="zbuf msg" (or
 * "zbuf bulk", "copy") runs one variant only, for profiling.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <zbuf/frame.h>
#include <zbuf/uv.h>

#include "bench_util.h"

#define HIGH_WATER (4u << 20)
#define LOW_WATER (1u << 20)

static size_t mbytes = 256;
static zbuf_pool_t *pool; /* shared by the runs of the zbuf variants */
static int runs = 5;
static bool verify;
static size_t sizes[16] = {1024, 4096, 16384, 65536, 262144, 1048576};
static int nsizes = 6;

/* ================================================================ server */

enum variant { V_BULK, V_MSG, V_COPY, NVAR };
static const char *const vname[NVAR] = {"zbuf bulk", "zbuf msg", "copy"};

struct out_buf {              /* copy variant: one write's memory */
    uv_write_t req;
    size_t len;
    char data[];
};

static struct server {
    enum variant v;
    uv_loop_t loop;
    uv_tcp_t listener;
    int port;
    zbuf_uv_stream_t conn;
    bool reading;
    zbuf_pool_t *pool;
    zbuf_frame_decoder_t *dec;
    zbuf_frame_opts_t fopts;
    /* copy variant */
    char rx[64 * 1024];
    uint8_t hdr[4];
    size_t hdr_have;
    struct out_buf *partial;  /* a frame straddling reads, being filled */
    size_t partial_have;
    double cpu;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool ready;
} S;

static void read_start(void);

static void written(uv_stream_t *s, int status)
{
    if (status < 0 && status != UV_ECANCELED)
        bench_die("server write", status);
    if (!S.reading && zbuf_uv_write_queue_size(s) < LOW_WATER && !uv_is_closing(&S.conn.handle))
        read_start();
}

static void backpressure(void)
{
    if (zbuf_uv_write_queue_size(&S.conn.stream) <= HIGH_WATER)
        return;
    if (S.v != V_COPY)
        zbuf_uv_read_stop(&S.conn);
    else
        uv_read_stop(&S.conn.stream);
    S.reading = false;
}

static void finish(void)
{
    S.cpu = bench_thread_cpu_s() - S.cpu;
    zbuf_uv_close(&S.conn, NULL);
}

/* ---- zbuf ---- */

static void zbuf_written(uv_stream_t *s, int status, void *arg)
{
    (void)arg;
    written(s, status);
}

static long pauses; /* pool ran dry (reported by BENCH_VERBOSE) */

static void zbuf_read(zbuf_uv_stream_t *zs, ssize_t status, zbuf_t *z)
{
    if (status == UV_ENOBUFS) {
        pauses++;
        return;
    }
    if (status < 0) {
        finish();
        return;
    }
    int rc = zbuf_frame_decoder_feed(S.dec, z);
    if (rc != 0)
        bench_die("feed", rc);
    zbuf_t *out = NULL, *m;
    if (S.v == V_BULK) {
        rc = zbuf_frame_decoder_next_frames(S.dec, 0, &out, NULL);
        if (rc != 0 && rc != -EAGAIN)
            bench_die("decode", rc);
        if (out != NULL && (rc = zbuf_uv_write(&zs->stream, out, zbuf_written, NULL)) != 0)
            bench_die("write", rc);
        backpressure();
        return;
    }
    if ((rc = zbuf_create(&out)) != 0)
        bench_die("create", rc);
    for (;;) {
        /* Small messages are copied from where they lie (no zbuf each);
         * larger ones are taken as zbufs and referenced. */
        const void *p;
        size_t len;
        rc = zbuf_frame_decoder_peek(S.dec, &p, &len);
        if (rc == 0 && len <= S.fopts.copy_max) {
            if ((rc = zbuf_frame_append_copy(&S.fopts, out, p, len)) != 0)
                bench_die("append", rc);
            zbuf_frame_decoder_skip(S.dec);
            continue;
        }
        if (rc != 0 && rc != -ENOBUFS)
            break;
        if ((rc = zbuf_frame_decoder_next(S.dec, &m)) != 0)
            break;
        if ((rc = zbuf_frame_append(&S.fopts, out, m)) != 0)
            bench_die("append", rc);
    }
    if (rc != -EAGAIN)
        bench_die("decode", rc);
    if (zbuf_length(out) == 0) {
        zbuf_delete(out);
        out = NULL;
    }
    if (out != NULL && (rc = zbuf_uv_write(&zs->stream, out, zbuf_written, NULL)) != 0)
        bench_die("write", rc);
    backpressure();
}

/* ---- copy ---- */

static void copy_written(uv_write_t *req, int status)
{
    struct out_buf *o = (struct out_buf *)req;
    uv_stream_t *s = req->handle;
    free(o);
    written(s, status);
}

static void copy_send(struct out_buf *o)
{
    uv_buf_t b = uv_buf_init(o->data, (unsigned)o->len);
    int rc = uv_write(&o->req, &S.conn.stream, &b, 1, copy_written);
    if (rc != 0)
        bench_die("uv_write", rc);
}

static void copy_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    (void)suggested;
    *buf = uv_buf_init(S.rx, sizeof(S.rx));
}

static size_t be32(const uint8_t *p)
{
    return (size_t)p[0] << 24 | (size_t)p[1] << 16 | (size_t)p[2] << 8 | p[3];
}

static struct out_buf *out_new(size_t len)
{
    struct out_buf *o = malloc(sizeof(*o) + len);
    if (o == NULL)
        bench_die("malloc", ENOMEM);
    o->len = len;
    return o;
}

static void copy_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    if (nread < 0) {
        uv_read_stop(st);
        finish();
        return;
    }
    const uint8_t *p = (const uint8_t *)buf->base;
    size_t n = (size_t)nread;
    /* 1. Finish the frame that straddled the previous reads. */
    if (S.partial != NULL) {
        size_t k = S.partial->len - S.partial_have < n ? S.partial->len - S.partial_have : n;
        memcpy(S.partial->data + S.partial_have, p, k);
        S.partial_have += k;
        p += k;
        n -= k;
        if (S.partial_have < S.partial->len)
            return;
        copy_send(S.partial);
        S.partial = NULL;
    }
    /* A header split over reads: complete it from this read. */
    while (S.hdr_have > 0 && S.hdr_have < 4 && n > 0) {
        S.hdr[S.hdr_have++] = *p++;
        n--;
    }
    if (S.hdr_have == 4) {
        size_t len = be32(S.hdr);
        S.partial = out_new(4 + len);
        memcpy(S.partial->data, S.hdr, 4);
        S.partial_have = 4;
        S.hdr_have = 0;
        size_t k = len < n ? len : n;
        memcpy(S.partial->data + 4, p, k);
        S.partial_have += k;
        p += k;
        n -= k;
        if (S.partial_have < S.partial->len)
            return;
        copy_send(S.partial);
        S.partial = NULL;
    }
    /* 2. The complete frames of this read, copied into one batch. */
    size_t whole = 0;
    while (n - whole >= 4 && n - whole - 4 >= be32(p + whole))
        whole += 4 + be32(p + whole);
    if (whole > 0) {
        struct out_buf *o = out_new(whole);
        memcpy(o->data, p, whole);
        copy_send(o);
        p += whole;
        n -= whole;
    }
    /* 3. The start of a frame that continues in the next read. */
    if (n >= 4) {
        size_t len = be32(p);
        S.partial = out_new(4 + len);
        memcpy(S.partial->data, p, n);
        S.partial_have = n;
    } else if (n > 0) {
        memcpy(S.hdr, p, n);
        S.hdr_have = n;
    }
    backpressure();
}

static void read_start(void)
{
    int rc = S.v != V_COPY ? zbuf_uv_read_start(&S.conn, S.pool, zbuf_read)
                           : uv_read_start(&S.conn.stream, copy_alloc, copy_read);
    if (rc != 0)
        bench_die("read start", rc);
    S.reading = true;
}

static void on_conn(uv_stream_t *l, int status)
{
    bench_accept(l, status, &S.conn);
    uv_tcp_nodelay(&S.conn.tcp, 1);
    uv_close((uv_handle_t *)&S.listener, NULL);
    S.cpu = bench_thread_cpu_s();
    read_start();
}

static void *server_main(void *arg)
{
    (void)arg;
    uv_loop_init(&S.loop);
    S.port = bench_listen_loopback(&S.loop, &S.listener, 8, on_conn);
    bench_serve(&S.loop, &S.mu, &S.cv, &S.ready);
    return NULL;
}

/* ================================================================ client */

/* Sends total bytes of frames (cycling through one batch of whole frames),
 * keeping at most window bytes unanswered; returns the seconds taken. */
static double client_run(int port, size_t msg, uint64_t total)
{
    int fd = bench_connect_loopback(port);

    size_t frame = 4 + msg, per = frame >= (256u << 10) ? 1 : (256u << 10) / frame;
    size_t blen = per * frame;
    uint8_t *batch = malloc(blen);
    for (size_t f = 0; f < per; f++) {
        uint8_t *p = batch + f * frame;
        p[0] = (uint8_t)(msg >> 24);
        p[1] = (uint8_t)(msg >> 16);
        p[2] = (uint8_t)(msg >> 8);
        p[3] = (uint8_t)msg;
        for (size_t i = 0; i < msg; i++)
            p[4 + i] = (uint8_t)(i * 13 + f * 101 + 5);
    }
    uint64_t window = 2 * (uint64_t)frame > (4u << 20) ? 2 * (uint64_t)frame : (4u << 20);
    static uint8_t rbuf[1 << 20];
    uint64_t sent = 0, got = 0;
    long bad = 0;
    double t0 = bench_now_s();
    while (got < total) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (sent < total && sent - got < window)
            pfd.events |= POLLOUT;
        if (poll(&pfd, 1, 10000) <= 0)
            bench_die("client timed out", ETIMEDOUT);
        if (pfd.revents & POLLOUT) {
            size_t off = (size_t)(sent % blen);
            uint64_t can = total - sent < window - (sent - got) ? total - sent : window - (sent - got);
            size_t n = blen - off < can ? blen - off : (size_t)can;
            ssize_t r = send(fd, batch + off, n, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (r > 0)
                sent += (uint64_t)r;
            else if (r < 0 && errno != EAGAIN)
                bench_die("send", errno);
        }
        if (pfd.revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t r = recv(fd, rbuf, sizeof(rbuf), MSG_DONTWAIT | (verify ? 0 : MSG_TRUNC));
            if (r > 0) {
                if (verify)
                    for (ssize_t i = 0; i < r; i++)
                        bad += rbuf[i] != batch[(got + (uint64_t)i) % blen];
                got += (uint64_t)r;
            } else if (r == 0) {
                bench_die("server closed early", EPIPE);
            } else if (errno != EAGAIN) {
                bench_die("recv", errno);
            }
        }
    }
    double secs = bench_now_s() - t0;
    close(fd);
    free(batch);
    if (bad)
        bench_die("echo differs from what was sent", EIO);
    return secs;
}

/* ================================================================ driver */

struct result {
    double secs, cpu;
};

static struct result run_once(enum variant v, size_t msg)
{
    memset(&S, 0, offsetof(struct server, mu));
    S.v = v;
    pthread_mutex_init(&S.mu, NULL);
    pthread_cond_init(&S.cv, NULL);
    S.ready = false;
    if (v != V_COPY) {
        zbuf_frame_opts_t o;
        zbuf_frame_opts_default(&o);
        o.max_payload = 64u << 20;
        if (getenv("BENCH_COPY_MAX"))
            o.copy_max = (size_t)atol(getenv("BENCH_COPY_MAX"));
        S.fopts = o;
        S.pool = pool;
        int rc = zbuf_frame_decoder_create(&o, &S.dec);
        if (rc != 0)
            bench_die("zbuf setup", rc);
    }
    pthread_t t;
    pthread_create(&t, NULL, server_main, NULL);
    bench_wait_ready(&S.mu, &S.cv, &S.ready);
    uint64_t frames = ((uint64_t)mbytes << 20) / (4 + msg);
    if (frames < 16)
        frames = 16;
    double secs = client_run(S.port, msg, frames * (4 + msg));
    pthread_join(t, NULL);
    if (v != V_COPY) {
        zbuf_frame_decoder_delete(S.dec);
        if (zbuf_pool_available(S.pool) != zbuf_pool_capacity(S.pool))
            bench_die("pool buffers not returned", EIO);
    } else {
        free(S.partial);
    }
    pthread_mutex_destroy(&S.mu);
    pthread_cond_destroy(&S.cv);
    double mib = (double)(frames * (4 + msg)) / (1 << 20);
    return (struct result){secs / mib, S.cpu / mib};
}

static void parse_sizes(const char *s)
{
    nsizes = 0;
    while (*s && nsizes < 16) {
        char *end;
        unsigned long v = strtoul(s, &end, 10);
        if (*end == 'k' || *end == 'K')
            v <<= 10, end++;
        else if (*end == 'm' || *end == 'M')
            v <<= 20, end++;
        if (v == 0 || v > (64ul << 20))
            bench_die("bad size", EINVAL);
        sizes[nsizes++] = v;
        s = *end == ',' ? end + 1 : end;
        if (end == s && *s)
            bench_die("bad size list", EINVAL);
    }
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--mbytes") == 0 && i + 1 < argc)
            mbytes = (size_t)atol(argv[++i]);
        else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--sizes") == 0 && i + 1 < argc)
            parse_sizes(argv[++i]);
        else if (strcmp(argv[i], "--verify") == 0)
            verify = true;
        else {
            fprintf(stderr, "usage: bench_uv_echo [--mbytes MB] [--runs R] [--verify] "
                            "[--sizes 1k,64k,1m]\n");
            return 2;
        }
    }
    if (mbytes < 1 || runs < 1 || runs > 99)
        bench_die("bad arguments", EINVAL);
    signal(SIGPIPE, SIG_IGN);
    pool = bench_warm_pool(64 * 1024, 512);

    printf("### Echo: %zu MiB each way per run, %d runs%s: median (best)\n\n", mbytes, runs,
           verify ? ", verified" : "");
    printf("| message | zbuf bulk MB/s | zbuf msg MB/s | copy MB/s | bulk / copy | msg / copy "
           "| server CPU per MiB: bulk, msg, copy |\n");
    printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (int s = 0; s < nsizes; s++) {
        double t[NVAR][99], c[NVAR][99];
        for (int r = 0; r < runs; r++)
            for (int k = 0; k < NVAR; k++) {
                /* Rotate the order so that drift hits every variant alike. */
                enum variant v = (enum variant)((k + r) % NVAR);
                const char *only = getenv("BENCH_ONLY");
                if (only && strcmp(only, vname[v]) != 0) {
                    t[v][r] = c[v][r] = 1;
                    continue;
                }
                struct result res = run_once(v, sizes[s]);
                t[v][r] = res.secs;
                c[v][r] = res.cpu;
                if (getenv("BENCH_VERBOSE"))
                    fprintf(stderr, "%zu %s: %.0f MB/s, %.0f us/MiB, %ld pool pauses\n", sizes[s],
                            vname[v], 1.048576 / res.secs, res.cpu * 1e6, pauses);
                pauses = 0;
            }
        /* Median and best (noise only ever adds time) of each variant. */
        double tm[NVAR], tb[NVAR], cm[NVAR];
        for (int v = 0; v < NVAR; v++) {
            tm[v] = bench_median(t[v], runs);
            tb[v] = t[v][0];
            cm[v] = bench_median(c[v], runs);
        }
        char label[32];
        if (sizes[s] >= (1u << 20) && sizes[s] % (1u << 20) == 0)
            snprintf(label, sizeof(label), "%zu MiB", sizes[s] >> 20);
        else if (sizes[s] >= 1024 && sizes[s] % 1024 == 0)
            snprintf(label, sizeof(label), "%zu KiB", sizes[s] >> 10);
        else
            snprintf(label, sizeof(label), "%zu B", sizes[s]);
        printf("| %s | %.0f (%.0f) | %.0f (%.0f) | %.0f (%.0f) | %.2fx (%.2fx) | %.2fx (%.2fx) "
               "| %.0f, %.0f, %.0f us |\n",
               label, 1.048576 / tm[V_BULK], 1.048576 / tb[V_BULK], 1.048576 / tm[V_MSG],
               1.048576 / tb[V_MSG], 1.048576 / tm[V_COPY], 1.048576 / tb[V_COPY],
               tm[V_COPY] / tm[V_BULK], tb[V_COPY] / tb[V_BULK], tm[V_COPY] / tm[V_MSG],
               tb[V_COPY] / tb[V_MSG], cm[V_BULK] * 1e6, cm[V_MSG] * 1e6, cm[V_COPY] * 1e6);
        fflush(stdout);
    }
    printf("\n");
    zbuf_pool_delete(pool);
    return 0;
}
