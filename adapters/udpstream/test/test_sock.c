/* SPDX-License-Identifier: MIT */
/* Streams over kernel UDP sockets (the built-in transport through
 * zbuf-sock): loopback transfers in both modes, through an in-process
 * lossy relay (loss, duplication, reordering; the relay forwards plain
 * datagrams, so the GRO sockets get no runs there), through nftables
 * random drop in a private network namespace, with a reader that hoards
 * the receive pool, and with datagrams from a third socket; with UDP GRO
 * (the default) and without. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <net/if.h>
#include <netinet/udp.h>
#include <time.h>
#include <unistd.h>

#include "support.h"
#include "ustest.h"

static void fini(void)
{
    zt_assert_no_leaks();
}
TestSuite(sock, .init = zt_leak_baseline, .fini = fini, .timeout = 300);


static uint64_t mono_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

static int udp_socket(struct sockaddr_in *addr)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    cr_assert_geq(fd, 0);
    int big = 4 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t l = sizeof *addr;
    cr_assert_eq(getsockname(fd, (struct sockaddr *)addr, &l), 0);
    return fd;
}

/* ------------------------------------------------- in-process lossy relay */

struct held {
    uint64_t at;
    int to;             /* 0: towards the client, 1: towards the server */
    size_t len;
    uint8_t data[2048];
};

struct relay {
    int fd[2];          /* [0] faces the client, [1] faces the server */
    struct sockaddr_in addr[2], client, server;
    bool have_client;
    double loss, dup, reorder;
    uint64_t rng;
    struct held q[256];
    int nq;
    uint64_t dropped, duplicated, reordered;
};

static double rfrand(struct relay *r)
{
    return (double)(ut_rand(&r->rng) >> 11) / (double)(1ull << 53);
}

static void relay_out(struct relay *r, int to, const uint8_t *p, size_t len)
{
    const struct sockaddr_in *dst = to ? &r->server : &r->client;
    sendto(r->fd[to], p, len, MSG_DONTWAIT, (const struct sockaddr *)dst, sizeof *dst);
}

static void relay_pump(struct relay *r)
{
    uint8_t buf[2048];
    for (int side = 0; side < 2; side++) {
        for (int i = 0; i < 256; i++) {
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
            int to = !side;
            if (to == 0 && !r->have_client)
                continue;
            if (rfrand(r) < r->loss) {
                r->dropped++;
                continue;
            }
            int copies = rfrand(r) < r->dup ? 2 : 1;
            r->duplicated += (uint64_t)(copies - 1);
            for (int c = 0; c < copies; c++) {
                if (rfrand(r) < r->reorder && r->nq < 256) {
                    struct held *h = &r->q[r->nq++];
                    h->at = mono_us() + 2000;
                    h->to = to;
                    h->len = (size_t)n;
                    memcpy(h->data, buf, (size_t)n);
                    r->reordered++;
                } else {
                    relay_out(r, to, buf, (size_t)n);
                }
            }
        }
    }
    uint64_t now = mono_us();
    for (int i = 0; i < r->nq;) {
        if (r->q[i].at <= now) {
            relay_out(r, r->q[i].to, r->q[i].data, r->q[i].len);
            r->q[i] = r->q[--r->nq];
        } else {
            i++;
        }
    }
}

/* ---------------------------------------------------------------- a pair */

struct spair {
    int fd[2];
    zbuf_udpstream_t *s[2];
    struct relay *relay;
    uint64_t deadline_us;
};

static void spair_open(struct spair *p, const zbuf_udpstream_opts_t *o, struct relay *relay)
{
    memset(p, 0, sizeof *p);
    struct sockaddr_in a[2];
    for (int i = 0; i < 2; i++)
        p->fd[i] = udp_socket(&a[i]);
    struct sockaddr_in *to = &a[1];
    if (relay != NULL) {
        p->relay = relay;
        for (int i = 0; i < 2; i++)
            relay->fd[i] = udp_socket(&relay->addr[i]);
        relay->server = a[1];
        to = &relay->addr[0];
    }
    cr_assert_eq(zbuf_udpstream_listen_fd(p->fd[1], o, &p->s[1]), 0);
    cr_assert_eq(zbuf_udpstream_connect_fd(p->fd[0], (struct sockaddr *)to, sizeof *to, o,
                                           &p->s[0]),
                 0);
    p->deadline_us = mono_us() + 200u * 1000000u;
}

static void spair_close(struct spair *p)
{
    for (int i = 0; i < 2; i++) {
        zbuf_udpstream_delete(p->s[i]);
        close(p->fd[i]);
        if (p->relay)
            close(p->relay->fd[i]);
    }
}

static bool spair_pump(void *arg)
{
    struct spair *p = arg;
    struct pollfd pf[4];
    int n = 0, wait = 20;
    for (int i = 0; i < 2; i++) {
        pf[n++] = (struct pollfd){.fd = p->fd[i], .events = (short)zbuf_udpstream_poll_events(p->s[i])};
        int t = zbuf_udpstream_timeout(p->s[i]);
        if (t >= 0 && t < wait)
            wait = t;
    }
    if (p->relay) {
        for (int i = 0; i < 2; i++)
            pf[n++] = (struct pollfd){.fd = p->relay->fd[i], .events = POLLIN};
        if (p->relay->nq > 0)
            wait = 1;
    }
    poll(pf, (nfds_t)n, wait);
    if (p->relay)
        relay_pump(p->relay);
    for (int i = 0; i < 2; i++)
        zbuf_udpstream_process(p->s[i]);
    return mono_us() < p->deadline_us;
}

static bool kernel_has_gro(void)
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0), on = 1;
    bool ok = setsockopt(fd, SOL_UDP, UDP_GRO, &on, sizeof on) == 0;
    close(fd);
    return ok;
}

static void transfer_gro(zbuf_udpstream_mode_t mode, bool gro, struct relay *relay,
                         uint64_t total, bool both, zbuf_udpstream_stats_t st[2])
{
    zbuf_udpstream_opts_t o;
    zbuf_udpstream_opts_init(&o);
    o.mode = mode;
    o.no_gro = !gro;
    struct spair p;
    spair_open(&p, &o, relay);
    struct ut_xfer x;
    ut_xfer_init(&x, p.s[0], p.s[1], total, total ^ mode);
    x.both_ways = both;
    ut_xfer_run(&x, spair_pump, &p);
    for (int i = 0; i < 2; i++)
        zbuf_udpstream_get_stats(p.s[i], &st[i]);
    spair_close(&p);
}

static void transfer(zbuf_udpstream_mode_t mode, struct relay *relay, uint64_t total, bool both,
                     zbuf_udpstream_stats_t st[2])
{
    transfer_gro(mode, true, relay, total, both, st);
}

Test(sock, zerocopy_over_loopback_copies_no_payload_byte)
{
    zbuf_stats_t before, after;
    zbuf_stats_get(&before);
    zbuf_udpstream_stats_t st[2];
    transfer(ZBUF_UDPSTREAM_ZEROCOPY, NULL, ut_scaled(24u << 20, 8), false, st);
    zbuf_stats_get(&after);
    cr_assert_eq(st[0].bytes_copied + st[1].bytes_copied, 0);
    cr_assert_eq(after.bytes_copied, before.bytes_copied,
                 "%llu bytes copied by the library",
                 (unsigned long long)(after.bytes_copied - before.bytes_copied));
    cr_assert_gt(st[0].gso_sends, 0, "the sender used UDP GSO");
    if (kernel_has_gro())
        cr_assert_gt(st[1].gro_dgrams, st[1].dgrams_rx / 2,
                     "most datagrams arrived in runs (UDP GRO): %llu of %llu",
                     (unsigned long long)st[1].gro_dgrams, (unsigned long long)st[1].dgrams_rx);
}

Test(sock, both_modes_without_gro_over_loopback)
{
    zbuf_stats_t before, after;
    zbuf_udpstream_stats_t st[2];
    zbuf_stats_get(&before);
    transfer_gro(ZBUF_UDPSTREAM_ZEROCOPY, false, NULL, ut_scaled(6u << 20, 8), true, st);
    zbuf_stats_get(&after);
    cr_assert_eq(after.bytes_copied, before.bytes_copied);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(st[i].gro_dgrams, 0, "one datagram per receive buffer");
    uint64_t total = ut_scaled(3u << 20, 8);
    transfer_gro(ZBUF_UDPSTREAM_COPY, false, NULL, total, true, st);
    cr_assert_eq(st[0].bytes_copied, 3 * total);
    cr_assert_eq(st[1].gro_dgrams, 0);
}

Test(sock, copying_mode_both_ways_over_loopback)
{
    zbuf_udpstream_stats_t st[2];
    uint64_t total = ut_scaled(6u << 20, 8);
    transfer(ZBUF_UDPSTREAM_COPY, NULL, total, true, st);
    cr_assert_eq(st[0].bytes_copied, 3 * total, "each side copies its own sends once and its "
                                                "receives twice");
    if (kernel_has_gro())
        cr_assert_gt(st[0].gro_dgrams + st[1].gro_dgrams, 0, "the copying mode receives runs too");
}

Test(sock, both_modes_through_a_lossy_duplicating_reordering_relay)
{
    for (int m = ZBUF_UDPSTREAM_AUTO; m <= ZBUF_UDPSTREAM_COPY; m++) {
        struct relay r = {.loss = 0.05, .dup = 0.02, .reorder = 0.03, .rng = 77 + (uint64_t)m};
        zbuf_udpstream_stats_t st[2];
        transfer((zbuf_udpstream_mode_t)m, &r, ut_scaled(3u << 20, 8), true, st);
        cr_assert_gt(r.dropped, 0);
        cr_assert_gt(st[0].retransmits + st[1].retransmits, 0);
        cr_assert_gt(st[0].dup_rx + st[1].dup_rx, 0);
    }
}

/* Bring lo up in a new network namespace of this (forked) test process. */
static bool private_netns(void)
{
    if (unshare(CLONE_NEWNET) != 0)
        return false;
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct ifreq ifr = {0};
    strcpy(ifr.ifr_name, "lo");
    ioctl(fd, SIOCGIFFLAGS, &ifr);
    ifr.ifr_flags |= IFF_UP;
    bool ok = ioctl(fd, SIOCSIFFLAGS, &ifr) == 0;
    close(fd);
    return ok;
}

Test(sock, zerocopy_through_nftables_random_drop_in_a_namespace)
{
    if (geteuid() != 0)
        cr_skip_test("needs root for a network namespace and nftables");
    if (system("command -v nft >/dev/null 2>&1") != 0)
        cr_skip_test("nft (nftables) is not installed");
    /* Criterion runs each test in its own process: the namespace is
     * private to it and goes away with it, on every exit path. */
    if (!private_netns())
        cr_skip_test("cannot create a network namespace (needs CAP_SYS_ADMIN)");
    if (system("nft -f - >/dev/null 2>&1 <<'EOF'\n"
               "table inet zbus {\n"
               "  chain input {\n"
               "    type filter hook input priority 0; policy accept;\n"
               "    meta l4proto udp numgen random mod 100 < 5 counter drop\n"
               "  }\n"
               "}\n"
               "EOF") != 0)
        cr_skip_test("nftables random drop (CONFIG_NF_TABLES, numgen) is not available");
    zbuf_udpstream_stats_t st[2];
    transfer(ZBUF_UDPSTREAM_ZEROCOPY, NULL, ut_scaled(4u << 20, 8), true, st);
    cr_assert_gt(st[0].retransmits + st[1].retransmits, 0, "nftables dropped datagrams");
    cr_assert_eq(st[0].bytes_copied + st[1].bytes_copied, 0);
}

Test(sock, a_path_mtu_below_the_streams_makes_it_send_without_gso)
{
    if (geteuid() != 0)
        cr_skip_test("needs root for a network namespace");
    if (!private_netns())
        cr_skip_test("cannot create a network namespace (needs CAP_SYS_ADMIN)");
    /* Datagrams of 1472 bytes over a loopback of MTU 1400: the kernel
     * refuses UDP GSO sends (EINVAL: a segment larger than the path
     * allows), so the stream falls back to plain sends for good, which
     * the kernel fragments; every byte still arrives. */
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct ifreq ifr = {0};
    strcpy(ifr.ifr_name, "lo");
    ifr.ifr_mtu = 1400;
    bool ok = ioctl(fd, SIOCSIFMTU, &ifr) == 0;
    close(fd);
    if (!ok)
        cr_skip_test("cannot set the namespace's loopback MTU");
    zbuf_udpstream_stats_t st[2];
    transfer(ZBUF_UDPSTREAM_ZEROCOPY, NULL, ut_scaled(2u << 20, 8), true, st);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(st[i].gso_sends, 0, "side %d: %llu GSO sends", i,
                     (unsigned long long)st[i].gso_sends);
    cr_assert_gt(st[0].data_tx, 1000);
}

Test(sock, a_reader_holding_every_pool_buffer_closes_the_window_until_it_lets_go)
{
    zbuf_udpstream_opts_t o;
    zbuf_udpstream_opts_init(&o);
    o.mode = ZBUF_UDPSTREAM_ZEROCOPY;
    o.rcv_wnd = 64;
    o.pool_bufs = 80;
    struct spair p;
    spair_open(&p, &o, NULL);
    struct ut_xfer x;
    ut_xfer_init(&x, p.s[0], p.s[1], 1u << 20, 5);
    uint64_t rng = 5;
    cr_assert_eq(ut_write_pattern(&x.d[0], 0, 1u << 20, 20000, &rng), 0);
    x.d[0].written = 1u << 20;
    /* Read everything that comes, and keep it. */
    zbuf_t *hoard[4096];
    int nh = 0;
    uint64_t end = mono_us() + 1500000;
    while (mono_us() < end) {
        spair_pump(&p);
        zbuf_t *z;
        while (nh < 4096 && zbuf_udpstream_read(p.s[1], 1, SIZE_MAX, &z) > 0)
            hoard[nh++] = z;
    }
    uint64_t held = 0;
    for (int i = 0; i < nh; i++)
        held += zbuf_length(hoard[i]);
    cr_assert_lt(held, 1u << 20, "the pool (80 buffers) cannot hold 1 MiB");
    zbuf_udpstream_stats_t st;
    zbuf_udpstream_get_stats(p.s[0], &st);
    cr_assert_eq(zbuf_udpstream_error(p.s[0]), 0, "acknowledgements still flow");
    /* Check and give back what was hoarded, then finish normally. */
    for (int i = 0; i < nh; i++) {
        size_t at = 0;
        for (zbuf_seg_t *sg = zbuf_seg_first(hoard[i]); sg; sg = zbuf_seg_next(hoard[i], sg)) {
            const uint8_t *d = zbuf_seg_data(hoard[i], sg);
            for (size_t k = 0; k < zbuf_seg_length(hoard[i], sg); k++, at++)
                cr_assert_eq(d[k], ut_pat(x.d[0].got + at));
        }
        x.d[0].got += at;
        zbuf_delete(hoard[i]);
    }
    ut_xfer_run(&x, spair_pump, &p);
    spair_close(&p);
}

Test(sock, datagrams_from_a_third_socket_are_counted_and_dropped)
{
    struct spair p;
    spair_open(&p, NULL, NULL);
    struct ut_xfer x;
    ut_xfer_init(&x, p.s[0], p.s[1], 2u << 20, 6);
    /* Let the handshake finish, then spray both ends from elsewhere. */
    while (!(zbuf_udpstream_events(p.s[1]) & ZBUF_UDPSTREAM_CONNECTED))
        cr_assert(spair_pump(&p));
    struct sockaddr_in me, dst[2];
    int evil = udp_socket(&me);
    for (int i = 0; i < 2; i++) {
        socklen_t l = sizeof dst[i];
        getsockname(p.fd[i], (struct sockaddr *)&dst[i], &l);
    }
    uint8_t junk[3000];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (uint8_t)(i * 31);
    junk[0] = 0x5a;
    junk[1] = 1;
    for (int k = 0; k < 50; k++) {
        zbuf_t *z = ut_forge(4, 0, (uint32_t)k, 0, 0, 10, NULL, 0);
        uint8_t hdr[28];
        zbuf_copyout(z, 0, hdr, sizeof hdr);
        zbuf_delete(z);
        for (int i = 0; i < 2; i++) {
            sendto(evil, hdr, sizeof hdr, 0, (struct sockaddr *)&dst[i], sizeof dst[i]);
            sendto(evil, junk, 1 + (size_t)k * 53, 0, (struct sockaddr *)&dst[i], sizeof dst[i]);
        }
    }
    ut_xfer_run(&x, spair_pump, &p);
    zbuf_udpstream_stats_t st[2];
    for (int i = 0; i < 2; i++) {
        zbuf_udpstream_get_stats(p.s[i], &st[i]);
        cr_assert_geq(st[i].wrong_peer + st[i].bad_dgrams, 100, "side %d: %llu + %llu", i,
                      (unsigned long long)st[i].wrong_peer,
                      (unsigned long long)st[i].bad_dgrams);
    }
    close(evil);
    spair_close(&p);
}

Test(sock, refuses_what_is_not_a_udp_socket)
{
    zbuf_udpstream_t *s;
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    cr_assert_eq(zbuf_udpstream_listen_fd(sv[0], NULL, &s), -EPROTOTYPE);
    int fd = open("/dev/null", O_RDONLY);
    cr_assert_eq(zbuf_udpstream_listen_fd(fd, NULL, &s), -ENOTSOCK);
    cr_assert_eq(zbuf_udpstream_listen_fd(-1, NULL, &s), -EINVAL);
    close(fd);
    close(sv[0]);
    close(sv[1]);
}
