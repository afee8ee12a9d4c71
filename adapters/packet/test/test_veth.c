/* SPDX-License-Identifier: MIT */
/*
 * zbuf-packet on real rings: a veth pair between two network namespaces
 * this test makes (anonymous: they vanish with the test process, however
 * it ends).  v0 in A is opened with zbuf-packet; v1 in B is read and
 * written with plain AF_PACKET sockets.  Frames use the local experimental
 * EtherType 0x88b5 and carry a sequence number and a checkable pattern.
 * Skipped with a reason without root, namespaces, veth or AF_PACKET.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <linux/net_tstamp.h>
#include <net/ethernet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zbuf/packet.h>

#include "nsutil.h"
#include "support.h"

#define ETYPE 0x88b5
#define MTU 1500

ZT_SUITE(veth);

static struct zpt_ns ns;
static atomic_int released;

static void setup(void)
{
    const char *skip = zpt_pair_up(&ns);
    if (skip)
        cr_skip_test("%s", skip);
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint8_t pat(uint64_t seq, size_t i)
{
    return (uint8_t)(seq * 31u + i * 13u + (i >> 7));
}

static void count_free(void *data, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    free(data);
    atomic_fetch_add(&released, 1);
}

/* A frame from `src` to `dst` of `len` bytes numbered seq, in `nseg`
 * enrolled segments (each release counted in `released`). */
static zbuf_t *frame(const uint8_t *dst, const uint8_t *src, size_t len, uint32_t seq, unsigned nseg)
{
    uint8_t *d = malloc(len);
    memcpy(d, dst, 6);
    memcpy(d + 6, src, 6);
    d[12] = ETYPE >> 8;
    d[13] = ETYPE & 0xff;
    memcpy(d + 14, &seq, 4);
    for (size_t i = 18; i < len; i++)
        d[i] = pat(seq, i);
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    size_t off = 0;
    for (unsigned k = 0; k < nseg; k++) {
        size_t n = k + 1 == nseg ? len - off : len / nseg;
        uint8_t *part = malloc(n);
        memcpy(part, d + off, n);
        cr_assert_eq(zbuf_append_buf(z, part, n, count_free, NULL), 0);
        off += n;
    }
    free(d);
    return z;
}

/* Check bytes of a received frame; returns its sequence number. */
static uint32_t check_bytes(const uint8_t *d, size_t len, size_t want_len)
{
    cr_assert_eq(len, want_len, "length %zu, sent %zu", len, want_len);
    uint32_t seq;
    memcpy(&seq, d + 14, 4);
    for (size_t i = 18; i < len; i++)
        cr_assert_eq(d[i], pat(seq, i), "frame %u byte %zu differs", seq, i);
    return seq;
}

static uint32_t check_zbuf(zbuf_t *z, size_t want_len)
{
    uint8_t *buf = malloc(zbuf_length(z) + 1);
    cr_assert_eq(zbuf_copyout(z, 0, buf, zbuf_length(z)), (ssize_t)zbuf_length(z));
    uint32_t seq = check_bytes(buf, zbuf_length(z), want_len);
    free(buf);
    return seq;
}

static int recv_one(int fd, uint8_t *buf, size_t cap, int timeout_ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, timeout_ms) <= 0)
        return -1;
    return (int)recv(fd, buf, cap, 0);
}

static zbuf_packet_t *open_v0(zbuf_packet_config_t *c)
{
    zbuf_packet_t *p;
    char why[256] = "";
    int rc = zbuf_packet_open("v0", c, &p, why, sizeof why);
    cr_assert_eq(rc, 0, "open: %s (%s)", zbuf_strerror(rc), why);
    return p;
}

static void config(zbuf_packet_config_t *c, unsigned version)
{
    zbuf_packet_config_init(c);
    c->version = version;
    c->protocol = ETYPE;
    c->frame_size = 2048; /* MTU-sized slots for these tests (no offload traffic) */
}

/* Wait for up to `want` frames from the ring, up to `ms`. */
static int recv_wait(zbuf_packet_t *p, zbuf_t **f, zbuf_packet_rxinfo_t *in, int want, int ms)
{
    int got = 0;
    uint64_t end = now_ms() + (uint64_t)ms;
    struct pollfd pfd = {.fd = zbuf_packet_fd(p), .events = POLLIN};
    while (got < want && now_ms() < end) {
        int n = zbuf_packet_recv(p, f + got, in ? in + got : NULL, (unsigned)(want - got));
        if (n > 0) {
            got += n;
            continue;
        }
        cr_assert_eq(n, -EAGAIN, "recv: %s", zbuf_strerror(n));
        poll(&pfd, 1, 50);
    }
    return got;
}

/* --------------------------------------------------------------- transmit */

static void transmit_sizes(unsigned version)
{
    setup();
    zbuf_packet_config_t c;
    config(&c, version);
    c.rx_ring = false;
    c.tx_frames = 64;
    zbuf_packet_t *p = open_v0(&c);
    int rd = zpt_raw_socket(ns.b, "v1", ETYPE);
    cr_assert_geq(rd, 0);
    zbuf_stats_t z0, z1;
    zbuf_stats_get(&z0);
    uint64_t bytes = 0;
    uint32_t seq = 0;
    uint8_t *buf = malloc(65536);
    for (size_t len = 60; len <= MTU + ETH_HLEN; len += len < 200 ? 1 : 37, seq++) {
        unsigned nseg = 1 + seq % 4;
        zbuf_t *z = frame(ns.mac1, ns.mac0, len, seq, nseg);
        atomic_store(&released, 0);
        int rc = zbuf_packet_send(p, z, 0);
        cr_assert_eq(rc, 0, "send %zu: %s", len, zbuf_strerror(rc));
        cr_assert_eq(atomic_load(&released), (int)nseg, "release callbacks not run at send");
        bytes += len;
        int n = recv_one(rd, buf, 65536, 5000);
        cr_assert_eq(n, (int)len, "frame of %zu bytes not received (got %d)", len, n);
        cr_assert_eq(check_bytes(buf, (size_t)n, len), seq);
    }
    zbuf_stats_get(&z1);
    cr_assert_eq(z1.bytes_copied - z0.bytes_copied, bytes, "the one copy into the ring, counted");
    zbuf_packet_stats_t st;
    zbuf_packet_stats(p, &st);
    cr_assert_eq(st.tx_frames, seq);
    cr_assert_eq(zbuf_packet_close(p, 1000), 0);
    close(rd);
    free(buf);
}

Test(veth, tx_ring_v2_frames_60_bytes_to_the_mtu_arrive_intact)
{
    transmit_sizes(ZBUF_PACKET_V2);
}

Test(veth, tx_ring_v3_frames_60_bytes_to_the_mtu_arrive_intact)
{
    transmit_sizes(ZBUF_PACKET_V3);
}

Test(veth, batch_of_frames_goes_with_one_kick)
{
    setup();
    zbuf_packet_config_t c;
    config(&c, ZBUF_PACKET_V2);
    c.rx_ring = false;
    zbuf_packet_t *p = open_v0(&c);
    int rd = zpt_raw_socket(ns.b, "v1", ETYPE);
    zbuf_t *f[32];
    for (uint32_t i = 0; i < 32; i++)
        f[i] = frame(ns.mac1, ns.mac0, 100 + i, i, 2);
    zbuf_packet_stats_t a, b;
    zbuf_packet_stats(p, &a);
    cr_assert_eq(zbuf_packet_send_batch(p, f, 32), 32);
    zbuf_packet_stats(p, &b);
    cr_assert_eq(b.tx_kicks - a.tx_kicks, 1, "one system call for the batch");
    uint8_t buf[2048];
    for (uint32_t i = 0; i < 32; i++) {
        int n = recv_one(rd, buf, sizeof buf, 5000);
        cr_assert_eq(check_bytes(buf, (size_t)n, 100 + i), i, "in order");
    }
    zbuf_packet_close(p, 1000);
    close(rd);
}

Test(veth, frame_above_the_mtu_is_refused_with_emsgsize_and_left_untouched)
{
    setup();
    zbuf_packet_config_t c;
    config(&c, ZBUF_PACKET_V2);
    c.rx_ring = false;
    c.tx_frame_size = 4096; /* a slot larger than the MTU: the MTU is the limit */
    zbuf_packet_t *p = open_v0(&c);
    zbuf_t *z = frame(ns.mac1, ns.mac0, MTU + ETH_HLEN + 1, 1, 3);
    atomic_store(&released, 0);
    cr_assert_eq(zbuf_packet_send(p, z, 0), -EMSGSIZE);
    cr_assert_eq(zbuf_length(z), MTU + ETH_HLEN + 1);
    cr_assert_eq(zbuf_seg_count(z), 3);
    cr_assert_eq(atomic_load(&released), 0);
    zt_check(z);
    zbuf_delete(z);
    /* A VLAN-tagged frame may be 4 bytes longer. */
    z = frame(ns.mac1, ns.mac0, MTU + ETH_HLEN + 4, 2, 1);
    void *hdr;
    cr_assert_eq(zbuf_pullup(z, 0, 16, &hdr), 0);
    ((uint8_t *)hdr)[12] = 0x81;
    ((uint8_t *)hdr)[13] = 0x00;
    cr_assert_eq(zbuf_packet_send(p, z, 0), 0);
    /* A frame larger than the slot: refused too, never truncated. */
    zbuf_packet_close(p, 1000);
    config(&c, ZBUF_PACKET_V2);
    c.rx_ring = false;
    c.tx_frame_size = 1024;
    p = open_v0(&c);
    z = frame(ns.mac1, ns.mac0, 1200, 3, 2);
    cr_assert_eq(zbuf_packet_send(p, z, 0), -EMSGSIZE);
    cr_assert_eq(zbuf_length(z), 1200);
    zbuf_delete(z);
    cr_assert_eq(zbuf_packet_close(p, 1000), 0);
}

Test(veth, close_sends_every_marked_frame)
{
    setup();
    zbuf_packet_config_t c;
    config(&c, ZBUF_PACKET_V2);
    c.rx_ring = false;
    c.tx_frames = 256;
    zbuf_packet_t *p = open_v0(&c);
    int rd = zpt_raw_socket(ns.b, "v1", ETYPE);
    int sz = 4 << 20;
    zpt_enter(ns.b);
    setsockopt(rd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof sz);
    zpt_enter(ns.a);
    for (uint32_t i = 0; i < 200; i++)
        cr_assert_eq(zbuf_packet_send(p, frame(ns.mac1, ns.mac0, 300, i, 1), ZBUF_PACKET_MORE), 0);
    cr_assert_eq(zbuf_packet_close(p, 2000), 0, "frames left unsent at close");
    uint8_t buf[2048];
    for (uint32_t i = 0; i < 200; i++) {
        int n = recv_one(rd, buf, sizeof buf, 5000);
        cr_assert_eq(n, 300, "frame %u missing", i);
        cr_assert_eq(check_bytes(buf, (size_t)n, 300), i);
    }
    close(rd);
}

/* Timestamp bits in a transmit slot's status must not stop the ring: ask
 * the kernel for software timestamps on the socket, send many laps of a
 * small ring. */
Test(veth, transmit_ring_with_timestamping_on_keeps_going)
{
    setup();
    zbuf_packet_config_t c;
    config(&c, ZBUF_PACKET_V2);
    c.rx_ring = false;
    c.tx_frames = 16;
    zbuf_packet_t *p = open_v0(&c);
    int ts = SOF_TIMESTAMPING_SOFTWARE | SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_RAW_HARDWARE;
    cr_assert_eq(setsockopt(zbuf_packet_socket(p), SOL_PACKET, PACKET_TIMESTAMP, &ts, sizeof ts), 0);
    uint64_t end = now_ms() + 60000;
    uint32_t sent = 0;
    while (sent < 3000 && now_ms() < end) {
        zbuf_t *z = frame(ns.mac1, ns.mac0, 64, sent, 1);
        int rc = zbuf_packet_send(p, z, 0);
        if (rc == 0) {
            sent++;
        } else {
            cr_assert_eq(rc, -EAGAIN);
            zbuf_delete(z);
            usleep(100);
        }
    }
    cr_assert_eq(sent, 3000, "the ring stopped after %u frames", sent);
    cr_assert_eq(zbuf_packet_close(p, 2000), 0);
}

Test(veth, qdisc_bypass_and_packet_loss_options_are_set)
{
    setup();
    zbuf_packet_config_t c;
    config(&c, ZBUF_PACKET_V2);
    c.qdisc_bypass = true;
    c.tx_loss = true;
    zbuf_packet_t *p = open_v0(&c);
    int v = 0;
    socklen_t l = sizeof v;
    cr_assert_eq(getsockopt(zbuf_packet_socket(p), SOL_PACKET, PACKET_QDISC_BYPASS, &v, &l), 0);
    cr_assert_eq(v, 1);
    l = sizeof v;
    cr_assert_eq(getsockopt(zbuf_packet_socket(p), SOL_PACKET, PACKET_LOSS, &v, &l), 0);
    cr_assert_eq(v, 1);
    int rd = zpt_raw_socket(ns.b, "v1", ETYPE);
    cr_assert_eq(zbuf_packet_send(p, frame(ns.mac1, ns.mac0, 70, 5, 1), 0), 0);
    uint8_t buf[256];
    cr_assert_eq(recv_one(rd, buf, sizeof buf, 5000), 70, "bypassing the qdisc still sends");
    zbuf_packet_close(p, 1000);
    close(rd);
}

/* ---------------------------------------------------------------- receive */

static void receive_sizes(unsigned version)
{
    setup();
    zbuf_packet_config_t c;
    config(&c, version);
    c.tx_ring = false;
    c.rx_frames = 256;
    if (version == ZBUF_PACKET_V3)
        c.block_timeout_ms = 2;
    zbuf_packet_t *p = open_v0(&c);
    int wr = zpt_raw_socket(ns.b, "v1", ETYPE);
    zbuf_stats_t z0, z1;
    zbuf_stats_get(&z0);
    uint8_t *buf = malloc(2048);
    uint32_t seq = 0;
    for (size_t len = 60; len <= MTU + ETH_HLEN; len += len < 200 ? 1 : 37, seq++) {
        memcpy(buf, ns.mac0, 6);
        memcpy(buf + 6, ns.mac1, 6);
        buf[12] = ETYPE >> 8;
        buf[13] = ETYPE & 0xff;
        memcpy(buf + 14, &seq, 4);
        for (size_t i = 18; i < len; i++)
            buf[i] = pat(seq, i);
        zpt_enter(ns.b);
        cr_assert_eq(send(wr, buf, len, 0), (ssize_t)len);
        zpt_enter(ns.a);
        zbuf_t *f;
        zbuf_packet_rxinfo_t in;
        cr_assert_eq(recv_wait(p, &f, &in, 1, 5000), 1, "frame of %zu bytes not received", len);
        cr_assert(in.flags & ZBUF_PACKET_RX_LOANED);
        cr_assert_eq(zbuf_seg_count(f), 1, "one segment, in the ring");
        cr_assert_eq(in.wire_len, len);
        cr_assert_neq(in.ts_sec, 0, "timestamp");
        cr_assert_eq(check_zbuf(f, len), seq);
        zbuf_stats_t mid;
        zbuf_stats_get(&mid);
        zbuf_delete(f);
    }
    zbuf_stats_get(&z1);
    /* check_zbuf's copyout counts; the receive path itself copied nothing. */
    zbuf_packet_stats_t st;
    zbuf_packet_stats(p, &st);
    cr_assert_eq(st.rx_frames, seq);
    cr_assert_eq(st.rx_loaned, seq);
    cr_assert_eq(st.rx_copied, 0);
    cr_assert_eq(st.loans_out, 0, "every loan came back");
    cr_assert_eq(st.kernel_drops, 0);
    zbuf_packet_close(p, 0);
    close(wr);
    free(buf);
    (void)z0;
    (void)z1;
}

Test(veth, rx_ring_v2_lends_frames_60_bytes_to_the_mtu_and_gets_each_back)
{
    receive_sizes(ZBUF_PACKET_V2);
}

Test(veth, rx_ring_v3_lends_frames_60_bytes_to_the_mtu_and_gets_each_back)
{
    receive_sizes(ZBUF_PACKET_V3);
}

/* Send `n` frames of `len` bytes from B, numbered from seq0. */
static void send_from_b(int wr, uint32_t seq0, unsigned n, size_t len)
{
    uint8_t buf[2048];
    memcpy(buf, ns.mac0, 6);
    memcpy(buf + 6, ns.mac1, 6);
    buf[12] = ETYPE >> 8;
    buf[13] = ETYPE & 0xff;
    zpt_enter(ns.b);
    for (unsigned k = 0; k < n; k++) {
        uint32_t seq = seq0 + k;
        memcpy(buf + 14, &seq, 4);
        for (size_t i = 18; i < len; i++)
            buf[i] = pat(seq, i);
        while (send(wr, buf, len, 0) != (ssize_t)len) {
            cr_assert(errno == EAGAIN || errno == ENOBUFS, "send: %s", strerror(errno));
            usleep(100);
        }
    }
    zpt_enter(ns.a);
}

Test(veth, frames_beyond_the_loan_share_are_copied_and_do_not_hold_the_ring)
{
    setup();
    zbuf_packet_config_t c;
    config(&c, ZBUF_PACKET_V2);
    c.tx_ring = false;
    c.rx_frames = 64;
    c.block_size = 4096; /* 2 frames per block: 32 blocks */
    c.loan_max_percent = 50;
    zbuf_packet_t *p = open_v0(&c);
    int wr = zpt_raw_socket(ns.b, "v1", ETYPE);
    zbuf_t *f[104];
    zbuf_packet_rxinfo_t in[104];
    send_from_b(wr, 0, 40, 500);
    zbuf_stats_t z0, z1;
    zbuf_stats_get(&z0);
    cr_assert_eq(recv_wait(p, f, in, 40, 5000), 40);
    zbuf_stats_get(&z1);
    int lent = 0;
    for (int i = 0; i < 40; i++)
        lent += !!(in[i].flags & ZBUF_PACKET_RX_LOANED);
    cr_assert_eq(lent, 32, "half the ring lent");
    cr_assert_eq(z1.bytes_copied - z0.bytes_copied, 8 * 500, "the copies are counted");
    for (int i = 0; i < 40; i++)
        cr_assert_eq(check_zbuf(f[i], 500), (uint32_t)i);
    /* The lent frames go back; the copies are still held: the ring is free. */
    for (int i = 0; i < 40; i++)
        if (in[i].flags & ZBUF_PACKET_RX_LOANED)
            zbuf_delete(f[i]);
    send_from_b(wr, 40, 64, 500);
    cr_assert_eq(recv_wait(p, f + 40, in + 40, 64, 5000), 64);
    for (int i = 40; i < 104; i++)
        cr_assert_eq(check_zbuf(f[i], 500), (uint32_t)i);
    zbuf_packet_stats_t st;
    zbuf_packet_stats(p, &st);
    cr_assert_eq(st.kernel_drops, 0, "held copies blocked the ring");
    for (int i = 0; i < 104; i++)
        if (i >= 40 || !(in[i].flags & ZBUF_PACKET_RX_LOANED))
            zbuf_delete(f[i]);
    zbuf_packet_close(p, 0);
    close(wr);
}

/* A frame held across a lap of the ring would block the kernel at its
 * slot; the library bounces the slot instead: the holder keeps its bytes
 * at the same address (a private copy), the kernel gets the slot back, and
 * reception goes on while the frame is still held. */
Test(veth, a_loan_held_across_laps_is_bounced_and_reception_goes_on)
{
    setup();
    zbuf_packet_config_t c;
    config(&c, ZBUF_PACKET_V2);
    c.tx_ring = false;
    c.rx_frames = 16;
    c.block_size = 4096;
    c.loan_max_percent = 100;
    zbuf_packet_t *p = open_v0(&c);
    int wr = zpt_raw_socket(ns.b, "v1", ETYPE);
    zbuf_t *f[64];
    send_from_b(wr, 0, 1, 100);
    cr_assert_eq(recv_wait(p, f, NULL, 1, 5000), 1);
    zbuf_t *keep = f[0];
    const void *addr = zbuf_seg_data(keep, zbuf_seg_first(keep));
    uint32_t next = 1;
    for (int lap = 0; lap < 5; lap++) { /* 5 laps of 12 frames over 16 slots */
        send_from_b(wr, next, 12, 100);
        int got = recv_wait(p, f, NULL, 12, 5000);
        cr_assert_eq(got, 12, "lap %d: %d of 12 frames", lap, got);
        for (int i = 0; i < got; i++) {
            cr_assert_eq(check_zbuf(f[i], 100), next + (uint32_t)i);
            zbuf_delete(f[i]);
        }
        next += 12;
    }
    zbuf_packet_stats_t st;
    zbuf_packet_stats(p, &st);
    cr_assert_geq(st.rx_bounced, 1, "the held slot was not bounced");
    cr_assert_eq(st.kernel_drops, 0, "the kernel met the held slot");
    cr_assert_eq(zbuf_seg_data(keep, zbuf_seg_first(keep)), addr);
    cr_assert_eq(check_zbuf(keep, 100), 0, "the held frame changed");
    zbuf_delete(keep);
    zbuf_packet_close(p, 0);
    close(wr);
}

/* The descriptor is edge-triggered: while the newest frame is on loan the
 * packet socket itself polls readable for ever; zbuf_packet_fd() does not. */
Test(veth, descriptor_does_not_spin_while_the_newest_frame_is_on_loan)
{
    setup();
    zbuf_packet_config_t c;
    config(&c, ZBUF_PACKET_V2);
    c.tx_ring = false;
    zbuf_packet_t *p = open_v0(&c);
    int wr = zpt_raw_socket(ns.b, "v1", ETYPE);
    struct pollfd pfd = {.fd = zbuf_packet_fd(p), .events = POLLIN};
    cr_assert_eq(poll(&pfd, 1, 0), 0, "readable with nothing received");
    send_from_b(wr, 0, 1, 80);
    cr_assert_eq(poll(&pfd, 1, 5000), 1, "not readable after a frame arrived");
    zbuf_t *f;
    cr_assert_eq(zbuf_packet_recv(p, &f, NULL, 4), 1);
    zbuf_t *none;
    cr_assert_eq(zbuf_packet_recv(p, &none, NULL, 1), -EAGAIN);
    struct pollfd raw = {.fd = zbuf_packet_socket(p), .events = POLLIN};
    cr_assert_eq(poll(&raw, 1, 0), 1, "the packet socket is readable while its frame is lent");
    cr_assert_eq(poll(&pfd, 1, 100), 0, "zbuf_packet_fd() spins while a frame is lent");
    send_from_b(wr, 1, 1, 80);
    cr_assert_eq(poll(&pfd, 1, 5000), 1, "a new frame wakes it");
    zbuf_t *g;
    cr_assert_eq(zbuf_packet_recv(p, &g, NULL, 4), 1);
    zbuf_delete(f);
    zbuf_delete(g);
    zbuf_packet_close(p, 0);
    close(wr);
}

/* A packet socket never sees what it sends itself, but it does see what
 * the host sends on the interface otherwise (the kernel's own traffic,
 * other sockets): a stack on the ring would read its host's frames. */
Test(veth, outgoing_frames_of_the_host_are_not_received)
{
    setup();
    int other = zpt_raw_socket(ns.a, "v0", ETYPE);
    cr_assert_geq(other, 0);
    for (int ignore = 1; ignore >= 0; ignore--) {
        zbuf_packet_config_t c;
        config(&c, ZBUF_PACKET_V2);
        c.protocol = ETH_P_ALL; /* only ETH_P_ALL sockets see outgoing frames at all */
        c.ignore_outgoing = ignore;
        zbuf_packet_t *p = open_v0(&c);
        uint8_t buf[64];
        memcpy(buf, ns.mac1, 6);
        memcpy(buf + 6, ns.mac0, 6);
        buf[12] = ETYPE >> 8;
        buf[13] = ETYPE & 0xff;
        for (uint32_t i = 0; i < 10; i++) {
            memcpy(buf + 14, &i, 4);
            cr_assert_eq(send(other, buf, sizeof buf, 0), (ssize_t)sizeof buf);
        }
        zbuf_t *f[16];
        zbuf_packet_rxinfo_t in[16];
        int got = recv_wait(p, f, in, 10, ignore ? 300 : 5000);
        if (ignore) {
            cr_assert_eq(got, 0, "outgoing frames came back with ignore_outgoing");
        } else {
            cr_assert_eq(got, 10, "without the option the socket sees them");
            cr_assert_eq(in[0].pkttype, PACKET_OUTGOING);
        }
        for (int i = 0; i < got; i++)
            zbuf_delete(f[i]);
        zbuf_packet_close(p, 1000);
    }
    close(other);
}

Test(veth, kernel_drop_counters_are_exposed)
{
    setup();
    zbuf_packet_config_t c;
    config(&c, ZBUF_PACKET_V2);
    c.tx_ring = false;
    c.rx_frames = 8;
    c.block_size = 4096;
    zbuf_packet_t *p = open_v0(&c);
    int wr = zpt_raw_socket(ns.b, "v1", ETYPE);
    send_from_b(wr, 0, 50, 60);
    usleep(100 * 1000);
    zbuf_packet_stats_t st;
    zbuf_packet_stats(p, &st);
    cr_assert_eq(st.kernel_packets, 50);
    cr_assert_eq(st.kernel_drops, 42);
    zbuf_t *f[8];
    cr_assert_eq(recv_wait(p, f, NULL, 8, 2000), 8);
    for (int i = 0; i < 8; i++)
        zbuf_delete(f[i]);
    zbuf_packet_close(p, 0);
    close(wr);
}

/* --------------------------------------------------------- the interface */

Test(veth, interface_down_then_up_while_frames_are_on_loan)
{
    setup();
    zbuf_packet_config_t c;
    config(&c, ZBUF_PACKET_V2);
    zbuf_packet_t *p = open_v0(&c);
    int wr = zpt_raw_socket(ns.b, "v1", ETYPE);
    zbuf_t *f[8];
    send_from_b(wr, 0, 4, 100);
    cr_assert_eq(recv_wait(p, f, NULL, 4, 5000), 4);
    cr_assert_eq(zpt_sh(ns.a, "ip link set v0 down"), 0);
    struct pollfd pfd = {.fd = zbuf_packet_fd(p), .events = POLLIN};
    cr_assert_eq(poll(&pfd, 1, 5000), 1, "the descriptor reports the interface going down");
    cr_assert_eq(zbuf_packet_recv(p, f + 4, NULL, 4), -ENETDOWN);
    cr_assert_eq(zbuf_packet_send(p, frame(ns.mac1, ns.mac0, 64, 9, 1), 0), 0);
    int e = zbuf_packet_flush(p);
    cr_assert(e == -ENETDOWN || e == -ENXIO, "flush on a down interface: %s", zbuf_strerror(e));
    for (int i = 0; i < 4; i++)
        zbuf_delete(f[i]); /* the loans come back although the interface is down */
    cr_assert_eq(zpt_sh(ns.a, "ip link set v0 up"), 0);
    usleep(200 * 1000);
    send_from_b(wr, 10, 3, 100);
    cr_assert_eq(recv_wait(p, f, NULL, 3, 5000), 3, "reception resumes after the interface is up");
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(check_zbuf(f[i], 100), (uint32_t)(10 + i));
        zbuf_delete(f[i]);
    }
    zbuf_packet_stats_t st;
    zbuf_packet_stats(p, &st);
    cr_assert_eq(st.loans_out, 0);
    zbuf_packet_close(p, 500);
    close(wr);
}

Test(veth, interface_removed_while_mapped_gives_enodev_and_loans_still_return)
{
    setup();
    zbuf_packet_config_t c;
    config(&c, ZBUF_PACKET_V3);
    c.block_timeout_ms = 1;
    zbuf_packet_t *p = open_v0(&c);
    int wr = zpt_raw_socket(ns.b, "v1", ETYPE);
    zbuf_t *f[8];
    send_from_b(wr, 0, 3, 100);
    cr_assert_eq(recv_wait(p, f, NULL, 3, 5000), 3);
    close(wr);
    cr_assert_eq(zpt_sh(ns.a, "ip link del v0"), 0);
    struct pollfd pfd = {.fd = zbuf_packet_fd(p), .events = POLLIN};
    cr_assert_eq(poll(&pfd, 1, 5000), 1);
    cr_assert_eq(zbuf_packet_recv(p, f + 3, NULL, 4), -ENODEV);
    cr_assert_eq(zbuf_packet_recv(p, f + 3, NULL, 4), -EAGAIN);
    zbuf_t *z = frame(ns.mac1, ns.mac0, 64, 1, 1);
    cr_assert_eq(zbuf_packet_send(p, z, 0), 0);
    cr_assert_neq(zbuf_packet_flush(p), 0, "sending on a removed interface must fail");
    cr_assert_eq(zbuf_packet_close(p, 200), 1, "the unsent frame is counted at close");
    /* The handle is closed, the interface gone: the loans are still valid
     * memory and go back without a fault (ASan watches). */
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(check_zbuf(f[i], 100), (uint32_t)i);
        zbuf_delete(f[i]);
    }
}

/* Frames above the MTU (the other end's TSO/GSO over veth): whole in
 * slots sized for them, cut and flagged in MTU-sized slots. */
static void tcp_through(void)
{
    cr_assert_eq(zpt_sh(ns.a, "ip addr add 192.0.2.1/24 dev v0"), 0);
    cr_assert_eq(zpt_sh(ns.b, "ip addr add 192.0.2.2/24 dev v1"), 0);
    /* The kernel in B sends 2 MiB to a sink in A over TCP. */
    pid_t sink = zpt_spawn(ns.a, "exec python3 -c 'import socket; s=socket.socket(); "
                                 "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
                                 "s.bind((\"192.0.2.1\", 7000)); s.listen(1); s.settimeout(20); "
                                 "c,_=s.accept(); n=0\nwhile True:\n b=c.recv(1<<20)\n if not b: break\n n+=len(b)\n'");
    usleep(500 * 1000);
    cr_assert_eq(zpt_sh(ns.b, "python3 -c 'import socket; s=socket.create_connection((\"192.0.2.1\", 7000), timeout=20); "
                              "s.sendall(b\"x\" * (2 << 20)); s.close()'"),
                 0);
    int st;
    waitpid(sink, &st, 0);
}

Test(veth, offload_frames_above_the_mtu_arrive_whole_in_slots_sized_for_them)
{
    setup();
    if (zpt_sh(ns.a, "command -v python3 >/dev/null") != 0)
        cr_skip_test("python3 is not installed");
    zbuf_packet_config_t c;
    zbuf_packet_config_init(&c);
    c.tx_ring = false;
    c.protocol = ETH_P_IP;
    zbuf_packet_t *big = open_v0(&c); /* slots sized by the library */
    zbuf_packet_info_t info;
    zbuf_packet_info(big, &info);
    cr_assert(info.offload_sized, "a veth's slots must be sized for offload frames");
    cr_assert_geq(info.rx_max_frame, 65536);
    c.frame_size = 2048; /* MTU-sized: the same frames arrive cut */
    zbuf_packet_t *small = open_v0(&c);
    tcp_through();
    size_t largest = 0;
    zbuf_t *f[64];
    zbuf_packet_rxinfo_t in[64];
    int n;
    while ((n = zbuf_packet_recv(big, f, in, 64)) > 0)
        for (int i = 0; i < n; i++) {
            cr_assert_eq(zbuf_length(f[i]), in[i].wire_len, "a frame cut in a 64 KiB slot");
            if (in[i].wire_len > largest)
                largest = in[i].wire_len;
            zbuf_delete(f[i]);
        }
    zbuf_packet_stats_t sb, ss;
    size_t cut = 0;
    while ((n = zbuf_packet_recv(small, f, in, 64)) > 0)
        for (int i = 0; i < n; i++) {
            if (in[i].flags & ZBUF_PACKET_RX_TRUNCATED) {
                cr_assert_lt(zbuf_length(f[i]), in[i].wire_len);
                cut++;
            }
            zbuf_delete(f[i]);
        }
    zbuf_packet_stats(big, &sb);
    zbuf_packet_stats(small, &ss);
    cr_log_info("largest frame %zu bytes; %zu frames cut in 2 KiB slots", largest, cut);
    if (largest <= MTU + ETH_HLEN)
        cr_skip_test("the peer sent no frame above the MTU (TSO/GSO off on this kernel's veth?)");
    cr_assert_eq(sb.rx_truncated, 0);
    cr_assert_gt(ss.rx_truncated, 0, "frames above the MTU must be reported as cut");
    cr_assert_eq(ss.rx_truncated, cut);
    zbuf_packet_close(big, 0);
    zbuf_packet_close(small, 0);
}

/* ------------------------------------------------------ configuration */

Test(veth, bad_geometry_is_refused_with_a_reason_before_the_kernel_sees_it)
{
    setup();
    static const struct {
        uint32_t frame, block, frames;
        const char *says;
    } bad[] = {
        {1372, 0, 64, "multiple of 16"},
        {2048, 6000, 64, "page size"},
        {2048, 8192, 63, "whole number of blocks"},
        {8192, 4096, 64, "smaller than the frame size"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        zbuf_packet_config_t c;
        zbuf_packet_config_init(&c);
        c.frame_size = bad[i].frame;
        c.block_size = bad[i].block;
        c.rx_frames = bad[i].frames;
        zbuf_packet_t *p = NULL;
        char why[256] = "";
        cr_assert_eq(zbuf_packet_open("v0", &c, &p, why, sizeof why), -EINVAL);
        cr_assert_null(p);
        cr_assert(strstr(why, bad[i].says), "reason \"%s\" lacks \"%s\"", why, bad[i].says);
    }
    zbuf_packet_config_t c;
    zbuf_packet_config_init(&c);
    char why[256] = "";
    zbuf_packet_t *p;
    cr_assert_eq(zbuf_packet_open("nosuch0", &c, &p, why, sizeof why), -ENODEV);
    cr_assert(strstr(why, "nosuch0"), "%s", why);
    c.version = 1;
    cr_assert_eq(zbuf_packet_open("v0", &c, &p, why, sizeof why), -EINVAL);
    cr_assert(strstr(why, "TPACKET_V2"), "%s", why);
}

Test(veth, without_cap_net_raw_open_fails_with_eperm_and_says_why)
{
    setup();
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        if (setgid(65534) != 0 || setuid(65534) != 0)
            _exit(3);
        zbuf_packet_t *p;
        char why[256] = "";
        int rc = zbuf_packet_open("v0", NULL, &p, why, sizeof why);
        _exit(rc == -EPERM && strstr(why, "CAP_NET_RAW") ? 0 : 1);
    }
    int st;
    waitpid(pid, &st, 0);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) != 3, "cannot drop privileges");
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "open without CAP_NET_RAW");
}
