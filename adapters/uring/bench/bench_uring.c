/* SPDX-License-Identifier: MIT */
/*
 * bench_uring: the io_uring engine against the epoll path, MSG_ZEROCOPY and
 * plain copying sends, on loopback (scripts/bench-uring.sh runs it; results
 * in docs/benchmarks.md, section io_uring).
 *
 *   bench_uring sink  [-b sockbuf] [-p portfile] port
 *       TCP: accept one connection, discard with recv(MSG_TRUNC) 1 MiB at a
 *       time until end of stream (the cheapest receiver: the sender limits).
 *   bench_uring send  -m MODE -s size -t seconds [-b sockbuf] [-c] [-N] host port
 *       TCP sender.  Messages of `size` bytes, each a zbuf sharing one
 *       master buffer (zbuf_dup()), kept queued up to a high-water mark.
 *       MODE: copy            send() of one buffer per message (BSD sockets)
 *             sock            the socket adapter's path as an application
 *                             drives it: zbuf_sock_send_fd() of each zbuf
 *                             (one sendmsg() each) on the blocking socket
 *             epoll           the engine on its epoll fallback: queued zbufs
 *                             gathered into one sendmsg() per batch
 *             msgzc           the same with MSG_ZEROCOPY (adaptive)
 *             uring           the engine on io_uring, plain requests
 *             uring-zc        io_uring, SEND_ZC / SENDMSG_ZC (adaptive)
 *             uring-zc-fixed  the same, the master in a registered pool
 *             msgzc-always, uring-zc-always, uring-zc-fixed-always
 *                             zero copy kept on whatever the kernel says
 *   bench_uring recv  -m MODE -s size -t seconds [-b rcvbuf] [-p portfile] [-u [-n N]] port
 *       Receiver: TCP (or UDP with -u) into pool buffers of `size` bytes,
 *       each zbuf deleted at once.  MODE: epoll (recv() / recvmmsg() into
 *       the pool, through zbuf-sock), uring (multishot receive into a
 *       provided buffer ring fed from the pool).  -n N: N UDP sockets, all
 *       into the one pool (the portfile then lists their ports, with
 *       commas).
 *   bench_uring blast -s size -t seconds [-u [-r rate]] host port[,port...]
 *       The cheapest sender for receive measurements: TCP sendfile() of a
 *       memfd, or UDP sendmmsg() of 64 datagrams of `size` per call, to
 *       the ports in turn when there are several.  -r: UDP datagrams per
 *       second, evenly spaced (the sender spins between them), instead of
 *       as many as it can: both receivers then see the same arrivals, and
 *       the receiver's CPU per datagram no longer depends on how fast the
 *       sender happened to be.
 *   -L (blast -u, recv -u): latency.  blast writes the time of sending
 *       (CLOCK_MONOTONIC, nanoseconds) into the first 8 bytes of each
 *       datagram; recv reads it back when the callback runs and prints the
 *       median, 99th and 99.9th percentile of that delay.  recv's MODE may
 *       then also be uring-nc: io_uring with ZBUF_URING_NO_COALESCE.
 *   bench_uring dsend -m MODE -s size -t seconds [-c] host port
 *       UDP sender for a destination behind a dummy interface (the script
 *       makes one in a network namespace of its own): the kernel frees each
 *       packet at once without copying it, as a NIC's completion would, so
 *       zero copy really happens and its cost can be set against the copy's.
 *       MODE: uring, uring-zc (adaptive), uring-zc-always,
 *       uring-zc-fixed-always.
 *   -c (send, dsend): messages from 64 MiB of buffers in turn, cold in the
 *       cache like fresh data, instead of one master sent over and over.
 *   -z bytes (send, dsend): the sockets' zc_min (the calibration lowers it
 *       to see zero copy at every size).
 *   -C name (every role): the congestion control of the TCP sockets
 *       (default: the system's).
 *   -N (send): TCP_NODELAY on the sender's socket: one segment per send(),
 *       so that copy and sock do the same kernel work per message (without
 *       it, how many messages Nagle's algorithm puts in a segment varies
 *       with the timing of both ends).
 *   bench_uring memcpy -s size
 *       Nanoseconds per byte of memcpy() at that size (cache-cold source),
 *       the copy a zero-copy send saves.
 *   bench_uring probe
 *       What zbuf_uring_probe() finds; exit status 1 when io_uring is unusable.
 *
 * The last line of every role is machine-readable:
 *   result role=R mode=M size=N seconds=S bytes=B msgs=K cpu=C [extra...]
 * where C is the process's user+system CPU seconds during the run; a TCP
 * sender adds segs=G, the data segments it sent meanwhile (TCP_INFO).  The
 * recv role's extras: user= (the user part of C), the socket's re-armed
 * receives and ENOBUFS stops, the engine's io_uring_enter calls (or
 * epoll_wait calls), completions (or events) and wake-ups during the run,
 * and the ring's buffers at the end and times it ran dry, and the -r
 * given to it (the script passes the sender's rate to both, 0: flood).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <zbuf/sock.h>
#include <zbuf/uring.h>

#include "bench_common.h"

/* -n: at most this many UDP sockets on the receive side. */
#define MAX_SOCKS 1024

_Noreturn static void usage(void)
{
    fprintf(stderr,
            "usage: bench_uring sink [-b sockbuf] [-p portfile] port\n"
            "       bench_uring send -m MODE -s size -t seconds [-b sockbuf] host port\n"
            "       bench_uring recv -m epoll|uring -s size -t seconds [-b rcvbuf] [-p portfile] "
            "[-u [-n sockets]] port\n"
            "       bench_uring blast -s size -t seconds [-u [-r rate]] host port[,port...]\n"
            "       bench_uring dsend -m MODE -s size -t seconds host port\n"
            "       bench_uring memcpy -s size\n"
            "       bench_uring probe\n"
            "       (every role: [-C congestion-control] for its TCP sockets)\n");
    exit(2);
}

static struct {
    const char *mode;
    size_t size;
    double seconds;
    int sockbuf;
    const char *portfile;
    bool udp;
    bool cold;
    size_t zc_min;               /* -z: the sockets' zc_min (0: the default) */
    const char *cc;              /* -C: TCP congestion control (NULL: the system's) */
    unsigned nsocks;             /* -n: UDP sockets of the receiver (recv) */
    double rate;                 /* -r: UDP datagrams per second of blast (0: flood) */
    bool nodelay;                /* -N: TCP_NODELAY on the sender's socket */
    bool latency;                /* -L: timestamped datagrams (blast), their delay (recv) */
} opt = { .mode = "uring", .size = 65536, .seconds = 2, .nsocks = 1 };

static void bufsize(int fd, int which, int n)
{
    if (n <= 0)
        return;
    /* Past net.core.[rw]mem_max where allowed (CAP_NET_ADMIN), so that a
     * receive side is not measured dropping datagrams it had no room for. */
    int force = which == SO_RCVBUF ? SO_RCVBUFFORCE : SO_SNDBUFFORCE;
    if (setsockopt(fd, SOL_SOCKET, force, &n, sizeof n) != 0 &&
        setsockopt(fd, SOL_SOCKET, which, &n, sizeof n) != 0)
        bench_die("setsockopt", errno);
}


/* A socket of `type` for bound() and connected().  A TCP one gets -C's
 * congestion control (a listener's is inherited by the connections it
 * accepts): BBR paces the sender, which on loopback decides how fast a fast
 * sender may go, so the script pins it. */
static int new_socket(int type)
{
    int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
    if (fd >= 0 && type == SOCK_STREAM)
        bench_tcp_cc_or_die(fd, opt.cc);
    return fd;
}

static int bound(int type, int port)
{
    int fd = new_socket(type);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
        bench_die("bind", errno);
    return fd;
}

static int connected(int type, const char *host, int port)
{
    int fd = new_socket(type);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
        bench_die(host, EINVAL);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
        bench_die("connect", errno);
    return fd;
}

static void result(const char *role, uint64_t bytes, uint64_t msgs, double secs, double cpu,
                   const char *extra)
{
    printf("result role=%s mode=%s size=%zu seconds=%.4f bytes=%llu msgs=%llu cpu=%.4f%s%s\n",
           role, opt.mode, opt.size, secs, (unsigned long long)bytes, (unsigned long long)msgs,
           cpu, extra[0] ? " " : "", extra);
}

/* ------------------------------------------------------------------ sink */

static int role_sink(int port)
{
    int l = bound(SOCK_STREAM, port);
    bufsize(l, SO_RCVBUF, opt.sockbuf);
    if (listen(l, 1) != 0)
        bench_die("listen", errno);
    bench_write_port(l, opt.portfile);
    int fd = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        bench_die("accept", errno);
    double t0 = bench_now_s(), c0 = bench_cpu_s();
    uint64_t bytes = 0;
    for (;;) {
        ssize_t r = recv(fd, NULL, 1 << 20, MSG_TRUNC);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        bytes += (uint64_t)r;
    }
    result("sink", bytes, 0, bench_now_s() - t0, bench_cpu_s() - c0, "");
    return 0;
}

/* ------------------------------------------------------------------ send */

static bool has(const char *s)
{
    return strstr(opt.mode, s) != NULL;
}

/* TCP data segments the socket has sent so far (TCP_INFO), 0 for UDP.  Read
 * outside the timed part: on loopback, Nagle's algorithm coalesces small
 * messages into one segment as often as acknowledgements lag, and the
 * kernel's CPU per message follows the segments per message, which vary
 * from run to run with the timing of both ends; "segs=" shows it. */
static uint64_t tcp_segs(int fd)
{
    /* glibc's struct tcp_info stops before the counters (Linux 4.6) that
     * follow it in the kernel's, at the same offsets. */
    struct {
        struct tcp_info base;
        uint64_t pacing_rate, max_pacing_rate, bytes_acked, bytes_received;
        uint32_t segs_out, segs_in, notsent_bytes, min_rtt, data_segs_in, data_segs_out;
    } ti;
    socklen_t len = sizeof ti;
    if (opt.udp || getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
        len < offsetof(__typeof__(ti), data_segs_out) + sizeof ti.data_segs_out)
        return 0;
    return ti.data_segs_out;
}

static int send_copy(int fd)
{
    char *buf = malloc(opt.size);
    memset(buf, 'z', opt.size);
    uint64_t segs0 = tcp_segs(fd);
    double t0 = bench_now_s(), c0 = bench_cpu_s(), end = t0 + opt.seconds;
    uint64_t msgs = 0;
    while (bench_now_s() < end) {
        for (int i = 0; i < 64; i++) {
            for (size_t off = 0; off < opt.size;) {
                ssize_t w = send(fd, buf + off, opt.size - off, MSG_NOSIGNAL);
                if (w < 0 && errno == EINTR)
                    continue;
                if (w <= 0)
                    bench_die("send", errno);
                off += (size_t)w;
            }
            msgs++;
        }
    }
    double secs = bench_now_s() - t0, cpu = bench_cpu_s() - c0;
    char extra[64];
    snprintf(extra, sizeof extra, "segs=%llu", (unsigned long long)(tcp_segs(fd) - segs0));
    shutdown(fd, SHUT_WR);
    char c;
    while (recv(fd, &c, 1, 0) > 0)
        ;
    result("send", msgs * opt.size, msgs, secs, cpu, extra);
    free(buf);
    return 0;
}

/* The socket adapter on its own, as an application without the engine
 * drives it: one zbuf_sock_send_fd() per message (no handle: no zero copy
 * asked for) on the blocking socket, as `copy` sends; the messages are
 * dups of one master buffer, as in the engine's modes. */
static int send_sock(int fd)
{
    zbuf_buf_t *mb;
    zbuf_t *master;
    int rc;
    if ((rc = zbuf_buf_alloc(opt.size, &mb)) < 0 || (rc = zbuf_create(&master)) < 0 ||
        (rc = zbuf_append_ref(master, mb, 0, opt.size)) < 0)
        bench_die("master", rc);
    memset(zbuf_buf_data(mb), 'z', opt.size);
    zbuf_buf_unref(mb);
    uint64_t segs0 = tcp_segs(fd);
    double t0 = bench_now_s(), c0 = bench_cpu_s(), end = t0 + opt.seconds;
    uint64_t msgs = 0;
    while (bench_now_s() < end) {
        for (int i = 0; i < 64; i++, msgs++) {
            zbuf_t *z;
            if ((rc = zbuf_dup(master, 0, ZBUF_TO_END, &z)) < 0)
                bench_die("zbuf_dup", rc);
            ssize_t w = zbuf_sock_send_fd(fd, z, 0); /* blocking: all of it */
            if (w < 0 || (size_t)w != opt.size)
                bench_die("zbuf_sock_send_fd", w < 0 ? (int)w : EIO);
            zbuf_delete(z);
        }
    }
    double secs = bench_now_s() - t0, cpu = bench_cpu_s() - c0;
    char extra[64];
    snprintf(extra, sizeof extra, "segs=%llu", (unsigned long long)(tcp_segs(fd) - segs0));
    zbuf_delete(master);
    shutdown(fd, SHUT_WR);
    char c;
    while (recv(fd, &c, 1, 0) > 0)
        ;
    result("send", msgs * opt.size, msgs, secs, cpu, extra);
    return 0;
}

static int role_send(const char *host, int port)
{
    signal(SIGPIPE, SIG_IGN);
    int fd = connected(opt.udp ? SOCK_DGRAM : SOCK_STREAM, host, port);
    bufsize(fd, SO_SNDBUF, opt.sockbuf);
    int one = 1;
    if (opt.nodelay && !opt.udp && setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
        bench_die("TCP_NODELAY", errno);
    if (strcmp(opt.mode, "copy") == 0)
        return send_copy(fd);
    if (strcmp(opt.mode, "sock") == 0)
        return send_sock(fd);
    zbuf_uring_opts_t eo;
    zbuf_uring_opts_init(&eo);
    eo.flags = strncmp(opt.mode, "uring", 5) == 0 ? ZBUF_URING_NO_FALLBACK : ZBUF_URING_FORCE_EPOLL;
    zbuf_uring_t *u;
    int rc = zbuf_uring_create(&eo, &u);
    if (rc < 0)
        bench_die("zbuf_uring_create", rc);
    /* The master messages, in pool buffers (registered in the fixed modes):
     * one, sent over and over (the blaster), or with -c enough to cover
     * 64 MiB, sent in turn, so that every message is cold in the cache as
     * fresh data would be. */
    size_t nmaster = 1;
    if (opt.cold) {
        nmaster = (64u << 20) / opt.size;
        nmaster = nmaster < 1 ? 1 : nmaster > 16384 ? 16384 : nmaster;
    }
    zbuf_pool_t *pool;
    if ((rc = zbuf_pool_create(opt.size, nmaster, &pool)) < 0)
        bench_die("zbuf_pool_create", rc);
    zbuf_t **masters = calloc(nmaster, sizeof *masters);
    for (size_t i = 0; i < nmaster; i++) {
        zbuf_buf_t *mb;
        zbuf_pool_get(pool, &mb);
        memset(zbuf_buf_data(mb), 'z', opt.size);
        zbuf_create(&masters[i]);
        zbuf_append_ref(masters[i], mb, 0, opt.size);
        zbuf_buf_unref(mb);
    }
    size_t next_master = 0;
    if (has("fixed") && (rc = zbuf_uring_register_pool(u, pool)) < 0)
        bench_die("zbuf_uring_register_pool", rc);
    zbuf_uring_sock_opts_t so;
    zbuf_uring_sock_opts_init(&so);
    if (has("zc"))
        so.flags |= ZBUF_URING_SOCK_ZEROCOPY;
    if (has("always"))
        so.flags |= ZBUF_URING_SOCK_ZEROCOPY_ALWAYS;
    so.zc_min = opt.zc_min;
    zbuf_uring_sock_t *s;
    if ((rc = zbuf_uring_sock_open(u, fd, &so, &s)) < 0)
        bench_die("zbuf_uring_sock_open", rc);
    size_t hiwat = 4 * opt.size > (256u << 10) ? 4 * opt.size : (256u << 10);
    if (opt.udp)
        hiwat = 64 * opt.size; /* as many datagrams as may be in flight */
    uint64_t segs0 = tcp_segs(fd);
    double t0 = bench_now_s(), c0 = bench_cpu_s(), end = t0 + opt.seconds;
    while (bench_now_s() < end) {
        while (zbuf_uring_send_queued(s) < hiwat) {
            zbuf_t *z;
            zbuf_t *master = masters[next_master++ % nmaster];
            if ((rc = zbuf_dup(master, 0, ZBUF_TO_END, &z)) < 0)
                bench_die("zbuf_dup", rc);
            if ((rc = zbuf_uring_send(s, z, 0, NULL, NULL)) < 0)
                bench_die("zbuf_uring_send", rc);
        }
        if ((rc = zbuf_uring_run(u, 100)) < 0 && rc != -EINTR)
            bench_die("zbuf_uring_run", rc);
    }
    zbuf_uring_sock_stats_t st;
    zbuf_uring_sock_get_stats(s, &st);
    double secs = bench_now_s() - t0, cpu = bench_cpu_s() - c0;
    uint64_t msgs = st.messages_sent;
    char extra[256];
    zbuf_uring_stats_t es;
    zbuf_uring_get_stats(u, &es);
    snprintf(extra, sizeof extra,
             "requests=%llu zc_requests=%llu fixed=%llu copied=%llu zc_on=%d enters=%llu "
             "segs=%llu",
             (unsigned long long)st.sends, (unsigned long long)st.zc_sends,
             (unsigned long long)st.zc_fixed_sends, (unsigned long long)st.zc_copied,
             st.zerocopy_on, (unsigned long long)es.enters,
             (unsigned long long)(tcp_segs(fd) - segs0));
    /* Drain (not timed), then close and wait for the sink to finish. */
    zbuf_uring_sock_close(s, 5000, NULL, NULL);
    while (zbuf_uring_sock_count(u) > 0)
        zbuf_uring_run(u, 100);
    result(opt.udp ? "dsend" : "send", msgs * opt.size, msgs, secs, cpu, extra);
    for (size_t i = 0; i < nmaster; i++)
        zbuf_delete(masters[i]);
    free(masters);
    zbuf_uring_destroy(u, 1000);
    zbuf_pool_delete(pool);
    return 0;
}

/* ------------------------------------------------------------------ recv */

struct rcount {
    uint64_t bytes, msgs;
    bool end;
    bool timing;       /* -L and the clock runs: record delays */
    uint32_t *lat;     /* delays in ns, up to nlat_max */
    size_t nlat, nlat_max;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* " lat_p50=.. lat_p99=.. lat_p999=.. lat_n=.." (us) of c's delays. */
static void lat_summary(struct rcount *c, char *out, size_t cap)
{
    if (c->nlat == 0) {
        out[0] = '\0';
        return;
    }
    qsort(c->lat, c->nlat, sizeof *c->lat, cmp_u32);
    size_t n = c->nlat;
    snprintf(out, cap, " lat_p50=%.1f lat_p99=%.1f lat_p999=%.1f lat_n=%zu",
             c->lat[n / 2] / 1e3, c->lat[n * 99 / 100] / 1e3, c->lat[n * 999 / 1000] / 1e3, n);
}

static void on_recv(zbuf_uring_sock_t *s, ssize_t n, zbuf_t *z, const zbuf_uring_rx_t *rx,
                    void *arg)
{
    (void)s;
    (void)rx;
    struct rcount *c = arg;
    if (z == NULL) {
        c->end = true;
        return;
    }
    c->bytes += (uint64_t)n;
    c->msgs++;
    uint64_t sent;
    if (c->timing && c->nlat < c->nlat_max && zbuf_copyout(z, 0, &sent, sizeof sent) == 8) {
        uint64_t d = now_ns() - sent;
        c->lat[c->nlat++] = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
    }
    zbuf_delete(z); /* the buffer goes back to the pool */
}

/* User CPU seconds of the process (the rest of bench_cpu_s() is the
 * kernel's). */
static double user_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6;
}

static int role_recv(int port)
{
    int fds[MAX_SOCKS]; /* fds[0]: the TCP connection, or the first UDP socket */
    unsigned nfds = 1;
    if (opt.udp) {
        /* -n N: N sockets, the first on `port`, the others on ports of the
         * kernel's choice, all receiving into the one ring: a server with
         * many peers, each with little data ready at a time. */
        nfds = opt.nsocks;
        for (unsigned i = 0; i < nfds; i++) {
            fds[i] = bound(SOCK_DGRAM, i == 0 ? port : 0);
            bufsize(fds[i], SO_RCVBUF, opt.sockbuf > 0 ? opt.sockbuf : 8 << 20);
        }
        bench_write_ports(fds, nfds, opt.portfile);
    } else {
        int l = bound(SOCK_STREAM, port);
        bufsize(l, SO_RCVBUF, opt.sockbuf);
        if (listen(l, 1) != 0)
            bench_die("listen", errno);
        bench_write_port(l, opt.portfile);
        fds[0] = accept4(l, NULL, NULL, SOCK_CLOEXEC);
        if (fds[0] < 0)
            bench_die("accept", errno);
        close(l);
    }
    zbuf_uring_opts_t eo;
    zbuf_uring_opts_init(&eo);
    eo.flags = strncmp(opt.mode, "uring", 5) == 0 ? ZBUF_URING_NO_FALLBACK : ZBUF_URING_FORCE_EPOLL;
    if (strcmp(opt.mode, "uring-nc") == 0)
        eo.flags |= ZBUF_URING_NO_COALESCE;
    zbuf_uring_t *u;
    int rc = zbuf_uring_create(&eo, &u);
    if (rc < 0)
        bench_die("zbuf_uring_create", rc);
    /* Room for a datagram and the kernel's header in front of it. */
    size_t bsz = opt.udp ? opt.size + 144 : opt.size;
    /* 32 MiB of buffers (64 to 4096 of them): more than a socket queue
     * holds, so that a burst does not empty the ring. */
    size_t nbufs = (32u << 20) / bsz;
    nbufs = nbufs < 64 ? 64 : nbufs > 4096 ? 4096 : nbufs;
    zbuf_pool_t *pool;
    if ((rc = zbuf_pool_create(bsz, nbufs, &pool)) < 0)
        bench_die("zbuf_pool_create", rc);
    zbuf_uring_bufring_t *br;
    if ((rc = zbuf_uring_bufring_create(u, pool, 0, &br)) < 0)
        bench_die("zbuf_uring_bufring_create", rc);
    zbuf_uring_sock_t *socks[MAX_SOCKS];
    struct rcount c = { 0 };
    for (unsigned i = 0; i < nfds; i++) {
        if ((rc = zbuf_uring_sock_open(u, fds[i], NULL, &socks[i])) < 0)
            bench_die("zbuf_uring_sock_open", rc);
        if ((rc = zbuf_uring_recv_start(socks[i], br, on_recv, &c)) < 0)
            bench_die("zbuf_uring_recv_start", rc);
    }
    /* The clock starts at the first byte. */
    while (c.bytes == 0 && !c.end)
        zbuf_uring_run(u, 1000);
    zbuf_uring_stats_t e0, e1;
    zbuf_uring_get_stats(u, &e0);
    double t0 = bench_now_s(), c0 = bench_cpu_s(), u0 = user_s();
    uint64_t b0 = c.bytes, m0 = c.msgs;
    if (opt.latency && opt.udp) {
        c.nlat_max = 4u << 20;
        if ((c.lat = malloc(c.nlat_max * sizeof *c.lat)) == NULL)
            bench_die("malloc", ENOMEM);
        c.timing = true;
    }
    double end = t0 + opt.seconds;
    while (!c.end && bench_now_s() < end)
        zbuf_uring_run(u, 100);
    double secs = bench_now_s() - t0, cpu = bench_cpu_s() - c0, usr = user_s() - u0;
    zbuf_uring_get_stats(u, &e1);
    zbuf_uring_sock_stats_t st = { 0 };
    for (unsigned i = 0; i < nfds; i++) {
        zbuf_uring_sock_stats_t one;
        zbuf_uring_sock_get_stats(socks[i], &one);
        st.recv_rearms += one.recv_rearms;
        st.recv_nobufs += one.recv_nobufs;
    }
    zbuf_uring_bufring_stats_t bs;
    zbuf_uring_bufring_get_stats(br, &bs);
    c.timing = false;
    char lat[128];
    lat_summary(&c, lat, sizeof lat);
    free(c.lat);
    char extra[384];
    snprintf(extra, sizeof extra,
             "user=%.4f rearms=%llu nobufs=%llu enters=%llu cqes=%llu wakes=%llu in_ring=%llu "
             "empty=%llu socks=%u rate=%.0f%s",
             usr, (unsigned long long)st.recv_rearms, (unsigned long long)st.recv_nobufs,
             (unsigned long long)(e1.enters - e0.enters), (unsigned long long)(e1.cqes - e0.cqes),
             (unsigned long long)(e1.wakes - e0.wakes), (unsigned long long)bs.in_ring,
             (unsigned long long)bs.empty, nfds, opt.rate, lat);
    result("recv", c.bytes - b0, c.msgs - m0, secs, cpu, extra);
    for (unsigned i = 0; i < nfds; i++)
        zbuf_uring_sock_close(socks[i], 0, NULL, NULL);
    while (zbuf_uring_sock_count(u) > 0)
        zbuf_uring_run(u, 100);
    zbuf_uring_bufring_delete(br);
    zbuf_uring_destroy(u, 0);
    zbuf_pool_delete(pool);
    return 0;
}

/* ----------------------------------------------------------------- blast */

/* blast's UDP destinations: `ports` is a port or a comma-separated list
 * of them (the receiver's portfile with -n); sets `to` (at most `max`) and
 * returns how many. */
static unsigned parse_ports(const char *host, const char *ports, struct sockaddr_in *to,
                            unsigned max)
{
    unsigned n = 0;
    for (const char *p = ports; *p != '\0' && n < max; n++) {
        char *e;
        unsigned long v = strtoul(p, &e, 10);
        if (e == p || v == 0 || v > 65535)
            bench_die(ports, EINVAL);
        to[n] = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons((uint16_t)v) };
        if (inet_pton(AF_INET, host, &to[n].sin_addr) != 1)
            bench_die(host, EINVAL);
        p = *e == ',' ? e + 1 : e;
    }
    return n;
}

static int role_blast(const char *host, const char *ports)
{
    signal(SIGPIPE, SIG_IGN);
    double end = bench_now_s() + opt.seconds;
    uint64_t bytes = 0;
    if (opt.udp) {
        static struct sockaddr_in to[MAX_SOCKS];
        unsigned nto = parse_ports(host, ports, to, MAX_SOCKS);
        /* One destination: a connected socket.  Several: each sendmmsg()
         * addresses its 64 datagrams to them in turn, carrying on from
         * where the previous call stopped. */
        int fd = nto == 1 ? connected(SOCK_DGRAM, host, ntohs(to[0].sin_port))
                          : new_socket(SOCK_DGRAM);
        char *buf = calloc(1, opt.size);
        struct mmsghdr mm[64];
        struct iovec iov = { .iov_base = buf, .iov_len = opt.size };
        for (int i = 0; i < 64; i++)
            mm[i] = (struct mmsghdr){ .msg_hdr = { .msg_iov = &iov, .msg_iovlen = 1 } };
        unsigned next = 0;
        double t0 = bench_now_s();
        uint64_t sent = 0;
        while (bench_now_s() < end) {
            /* Flooding: 64 per call.  Paced (-r): whatever is due by now
             * (one, unless the sender fell behind), spinning until the
             * next one is due, so that datagrams arrive evenly spaced. */
            int k = 64;
            if (opt.rate > 0) {
                double due = (bench_now_s() - t0) * opt.rate - (double)sent;
                if (due < 1)
                    continue;
                k = due < 64 ? (int)due : 64;
            }
            if (opt.latency && opt.size >= 8) {
                uint64_t t = now_ns(); /* the k datagrams of this call share it */
                memcpy(buf, &t, sizeof t);
            }
            if (nto > 1)
                for (int i = 0; i < k; i++, next = (next + 1) % nto) {
                    mm[i].msg_hdr.msg_name = &to[next];
                    mm[i].msg_hdr.msg_namelen = sizeof to[next];
                }
            int r = sendmmsg(fd, mm, (unsigned)k, 0);
            if (r > 0) {
                bytes += (uint64_t)r * opt.size;
                sent += (uint64_t)r;
            }
        }
        free(buf);
        close(fd);
    } else {
        int fd = connected(SOCK_STREAM, host, atoi(ports));
        int mfd = memfd_create("bench_uring", 0);
        size_t chunk = 4u << 20;
        if (mfd < 0 || ftruncate(mfd, (off_t)chunk) != 0)
            bench_die("memfd", errno);
        char *m = mmap(NULL, chunk, PROT_WRITE, MAP_SHARED, mfd, 0);
        memset(m, 'z', chunk);
        munmap(m, chunk);
        while (bench_now_s() < end) {
            off_t off = 0;
            ssize_t r = sendfile(fd, mfd, &off, chunk);
            if (r <= 0)
                break;
            bytes += (uint64_t)r;
        }
        close(fd);
        close(mfd);
    }
    result("blast", bytes, 0, opt.seconds, 0, "");
    return 0;
}

/* ---------------------------------------------------------------- memcpy */

static int role_memcpy(void)
{
    /* A source larger than the caches, walked in messages of `size`. */
    size_t span = 256u << 20;
    char *src = malloc(span), *dst = malloc(opt.size);
    memset(src, 1, span);
    memset(dst, 0, opt.size);
    uint64_t bytes = 0;
    double t0 = bench_now_s(), end = t0 + 1.0;
    size_t off = 0;
    while (bench_now_s() < end) {
        for (int i = 0; i < 64; i++) {
            if (off + opt.size > span)
                off = 0;
            memcpy(dst, src + off, opt.size);
            off += opt.size;
            bytes += opt.size;
        }
    }
    double secs = bench_now_s() - t0;
    char extra[64];
    snprintf(extra, sizeof extra, "ns_per_byte=%.5f", secs * 1e9 / (double)bytes);
    result("memcpy", bytes, bytes / opt.size, secs, secs, extra);
    if (dst[0] == 7)
        puts(""); /* keep the copies */
    free(src);
    free(dst);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        usage();
    const char *role = argv[1];
    int o;
    optind = 2;
    while ((o = getopt(argc, argv, "m:s:t:b:p:ucz:C:n:r:NL")) != -1) {
        switch (o) {
        case 'm': opt.mode = optarg; break;
        case 's': opt.size = strtoul(optarg, NULL, 0); break;
        case 't': opt.seconds = atof(optarg); break;
        case 'b': opt.sockbuf = atoi(optarg); break;
        case 'p': opt.portfile = optarg; break;
        case 'u': opt.udp = true; break;
        case 'c': opt.cold = true; break;
        case 'z': opt.zc_min = strtoul(optarg, NULL, 0); break;
        case 'C': opt.cc = optarg; break;
        case 'n': opt.nsocks = (unsigned)strtoul(optarg, NULL, 0); break;
        case 'r': opt.rate = atof(optarg); break;
        case 'N': opt.nodelay = true; break;
        case 'L': opt.latency = true; break;
        default: usage();
        }
    }
    if (opt.size == 0 || opt.nsocks == 0 || opt.nsocks > MAX_SOCKS)
        usage();
    if (strcmp(role, "memcpy") == 0)
        return role_memcpy();
    if (strcmp(role, "probe") == 0) {
        zbuf_uring_probe_t p;
        zbuf_uring_probe(&p);
        printf("usable=%d send_zc=%d report_usage=%d fixed_vectored=%d reason=%s\n", p.usable,
               p.send_zc, p.zc_report_usage, p.zc_fixed_vectored, p.reason);
        return p.usable ? 0 : 1;
    }
    if (strcmp(role, "sink") == 0 && optind + 1 == argc)
        return role_sink(atoi(argv[optind]));
    if (strcmp(role, "recv") == 0 && optind + 1 == argc)
        return role_recv(atoi(argv[optind]));
    if (strcmp(role, "send") == 0 && optind + 2 == argc)
        return role_send(argv[optind], atoi(argv[optind + 1]));
    if (strcmp(role, "dsend") == 0 && optind + 2 == argc) {
        opt.udp = true;
        return role_send(argv[optind], atoi(argv[optind + 1]));
    }
    if (strcmp(role, "blast") == 0 && optind + 2 == argc)
        return role_blast(argv[optind], argv[optind + 1]);
    usage();
}
