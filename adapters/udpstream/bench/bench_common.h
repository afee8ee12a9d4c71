/* SPDX-License-Identifier: MIT */
/*
 * What the UDP byte-stream benchmark programs share (scripts/bench-udpstream.sh
 * runs them):
 *
 *   PROG pingpong IMPL[,IMPL2] [SIZE...]
 *                                  round trips of SIZE-byte messages on
 *                                  loopback; with two implementations (both
 *                                  pairable) their runs alternate, so that
 *                                  their ratio is taken at the same moments
 *                                  of the machine's load; one line per size
 *                                  and implementation:
 *     pingpong IMPL SIZE p50_us p50_lo p50_hi p99_us goodput_MBps cpu_us copies
 *                                  (times timed in ns, printed in us)
 *   PROG stream IMPL[,IMPL2] [SIZE...]  one way, SIZE-byte writes back to back for
 *                                  0.2 s per run; one line per size:
 *     stream IMPL SIZE MBps MBps_lo MBps_hi cpu_ns_per_byte copies
 *   PROG loss IMPL [COUNT [MODEL]] COUNT 16-byte messages every 20 ms through
 *                                  an in-process relay, each echoed back;
 *                                  MODEL "issue" (default): 10 % of the
 *                                  datagrams dropped each way at random, each
 *                                  delayed 30..62.5 ms on its own (so they
 *                                  also reorder); MODEL "kcp": KCP's
 *                                  simulator (test.h): 5 % each way (its
 *                                  "10 %" is per round trip), exactly 5 of
 *                                  every 100, delays 30..61 ms, delivered in
 *                                  order;
 *     loss IMPL COUNT MODEL avg_ms p50_ms p99_ms max_ms overhead lost_msgs
 *
 * Environment (bench_udpstream): BENCH_GRO=0 receives without UDP GRO
 * (zbuf_udpstream_opts_t::no_gro); BENCH_MTU=N sets the MTU; BENCH_CORK=1
 * corks writes; BENCH_ROUNDS=N makes pingpong run exactly N round trips
 * per size and print nothing (for callgrind: instructions per round trip
 * are the count of pp_round's calls divided by N); BENCH_STATS=1 prints the
 * streams' counters at the end.  The implementations zerocopy-ip, copy-ip
 * and auto-ip run over the bundled stack's UDP (two stacks joined by the
 * in-memory link) instead of kernel sockets: BENCH_MTU is then also the
 * interfaces' MTU, BENCH_IP_OFFLOAD=1 gives them checksum offload and
 * BENCH_IP_DMA=1 has the link copy each frame into a receive pool (a NIC's
 * DMA done by the CPU; MTU 2000 at most).
 *
 * Both ends run in one thread of one process, driven in turn without
 * sleeping for pingpong (so a round trip is the cost of both ends and the
 * kernel, and the machine's scheduling noise stays out), and from poll()
 * for the loss scenario.  Goodput counts the message once each way:
 * 2 x SIZE per round trip.  p50 is the median of the per-run medians
 * (RUNS runs), lo..hi their range.  cpu_us is user+system CPU time per
 * round trip; copies is payload bytes the library copied per payload byte
 * delivered (udpstream only; -1 where not known).
 *
 * An implementation provides the hooks below; bench_main() does the rest.
 */
#ifndef ZBUF_BENCH_UDPSTREAM_COMMON_H
#define ZBUF_BENCH_UDPSTREAM_COMMON_H

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RUNS 5
#define LOSS_PAYLOAD 16

static inline uint64_t bench_now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

static inline uint64_t bench_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static inline uint64_t bench_cpu_us(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000u +
           (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

static inline int bench_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* A bound, non-blocking UDP socket on 127.0.0.1; its address in @a. */
static inline int bench_udp(struct sockaddr_in *a)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int big = 8 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    struct sockaddr_in b = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0 || bind(fd, (struct sockaddr *)&b, sizeof b) < 0) {
        perror("udp socket");
        exit(1);
    }
    socklen_t l = sizeof *a;
    getsockname(fd, (struct sockaddr *)a, &l);
    return fd;
}

/* ------------------------------------------------------ the lossy relay */

struct relay_pkt {
    uint64_t at;
    int to;
    uint16_t len;
    uint8_t data[1500];
};

/* Two sockets: [0] faces the client, [1] the server.  Datagrams cross
 * with a uniform random delay and a loss probability; the bytes are
 * counted as they enter, with 28 bytes of IPv4 and UDP header each. */
struct relay {
    int fd[2];
    struct sockaddr_in addr[2], client, server;
    bool have_client;
    double loss;
    uint32_t delay_lo_us, delay_hi_us;
    bool kcp;               /* KCP's simulator: permutation loss, in order */
    int perm[2][100], perm_left[2];
    uint64_t last_due[2];
    uint64_t rng;
    struct relay_pkt *q;
    size_t nq, cap;
    uint64_t wire_bytes, dgrams, dropped;
};

static inline double relay_rand(struct relay *r)
{
    r->rng ^= r->rng << 13;
    r->rng ^= r->rng >> 7;
    r->rng ^= r->rng << 17;
    return (double)(r->rng >> 11) / (double)(1ull << 53);
}

static inline void relay_init(struct relay *r, const struct sockaddr_in *server, uint64_t seed,
                              bool kcp)
{
    memset(r, 0, sizeof *r);
    for (int i = 0; i < 2; i++)
        r->fd[i] = bench_udp(&r->addr[i]);
    r->server = *server;
    r->kcp = kcp;
    r->loss = kcp ? 0.05 : 0.10;
    r->delay_lo_us = 30000;
    r->delay_hi_us = kcp ? 61000 : 62500;
    r->rng = seed * 2654435761u + 1;
}

/* Whether the next datagram of direction @dir is lost. */
static inline bool relay_lose(struct relay *r, int dir)
{
    if (!r->kcp)
        return relay_rand(r) < r->loss;
    /* KCP's Random(100): draw 0..99 without replacement, lose below 5. */
    if (r->perm_left[dir] == 0) {
        for (int i = 0; i < 100; i++)
            r->perm[dir][i] = i;
        r->perm_left[dir] = 100;
    }
    int i = (int)(relay_rand(r) * r->perm_left[dir]);
    int x = r->perm[dir][i];
    r->perm[dir][i] = r->perm[dir][--r->perm_left[dir]];
    return x < 5;
}

static inline void relay_pump(struct relay *r)
{
    uint8_t buf[2048];
    for (int side = 0; side < 2; side++) {
        for (;;) {
            struct sockaddr_in from;
            socklen_t fl = sizeof from;
            ssize_t n = recvfrom(r->fd[side], buf, sizeof buf, MSG_DONTWAIT,
                                 (struct sockaddr *)&from, &fl);
            if (n < 0)
                break;
            if (side == 0) {
                r->client = from;
                r->have_client = true;
            }
            r->dgrams++;
            r->wire_bytes += (uint64_t)n + 28;
            if (relay_lose(r, side) || n > 1500 || (side == 1 && !r->have_client)) {
                r->dropped++;
                continue;
            }
            if (r->nq == r->cap) {
                r->cap = r->cap ? r->cap * 2 : 256;
                r->q = realloc(r->q, r->cap * sizeof *r->q);
            }
            struct relay_pkt *p = &r->q[r->nq++];
            p->at = bench_now_us() + r->delay_lo_us +
                    (uint64_t)(relay_rand(r) * (r->delay_hi_us - r->delay_lo_us));
            if (r->kcp) { /* KCP's tunnel is a FIFO: nothing overtakes */
                if (p->at < r->last_due[side])
                    p->at = r->last_due[side];
                r->last_due[side] = p->at;
            }
            p->to = !side;
            p->len = (uint16_t)n;
            memcpy(p->data, buf, (size_t)n);
        }
    }
    uint64_t now = bench_now_us();
    for (size_t i = 0; i < r->nq;) {
        struct relay_pkt *p = &r->q[i];
        if (p->at <= now) {
            const struct sockaddr_in *dst = p->to ? &r->server : &r->client;
            sendto(r->fd[p->to], p->data, p->len, MSG_DONTWAIT, (const struct sockaddr *)dst,
                   sizeof *dst);
            r->q[i] = r->q[--r->nq];
        } else {
            i++;
        }
    }
}

/* Microseconds until the relay must send something, or -1. */
static inline int64_t relay_wait_us(const struct relay *r)
{
    if (r->nq == 0)
        return -1;
    uint64_t next = UINT64_MAX, now = bench_now_us();
    for (size_t i = 0; i < r->nq; i++)
        if (r->q[i].at < next)
            next = r->q[i].at;
    return next <= now ? 0 : (int64_t)(next - now);
}

/* -------------------------------------------------- implementation hooks */

/* The instance the hooks act on: 0, or 1 for the second implementation
 * of a side-by-side run (the drivers set it before every hook call). */
extern int bench_slot;

struct bench_impl {
    const char *name;
    /* Ping-pong on loopback. */
    void (*pp_open)(size_t max_size);
    /* One round trip of @size bytes, driven to completion. */
    void (*pp_round)(size_t size);
    /* Payload bytes the library copied so far (or -1). */
    double (*pp_copied)(void);
    void (*pp_close)(void);
    /* Streaming (after pp_open): write messages of @size while the
     * transport takes them, and drain the receiver; bytes received. */
    uint64_t (*st_step)(size_t size);
    /* Loss scenario: client and server; the client reaches the server
     * through @via (the relay's client-facing address). */
    void (*loss_open)(struct sockaddr_in *server_addr_out);
    void (*loss_connect)(const struct sockaddr_in *via);
    /* Send one message (client); */
    void (*loss_send)(const uint8_t *msg);
    /* Drive both ends for at most @wait_us; call @echoed for every message
     * the client got back. */
    void (*loss_poll)(int64_t wait_us, void (*echoed)(const uint8_t *msg));
    void (*loss_close)(void);
    /* Two instances may be open at once (bench_slot says which one). */
    bool pairable;
};

int bench_main(int argc, char **argv, const struct bench_impl *impls, size_t n);

#endif
