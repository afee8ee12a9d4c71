/* SPDX-License-Identifier: MIT */
/* The UDP GRO receive path of the socket transport, against a peer the
 * test plays by hand on loopback (its own socket, datagrams forged field
 * by field, runs sent as UDP GSO so that the stream's GRO socket gets them
 * coalesced): cutting runs at datagram boundaries (a short last one), plain
 * datagrams packed densely into the 64 KiB pool buffers, a malformed
 * datagram inside a run dropped alone, the pool running dry in the middle
 * of runs (data dropped and counted, acknowledgements still read, every
 * byte delivered once the reader lets go), and the socket's UDP_GRO given
 * back.  Byte-exact transfers with GRO on and off between two streams are
 * in test_sock.c. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "support.h"
#include "ustest.h"
#include "../src/internal.h"

static void fini(void)
{
    zt_assert_no_leaks();
}
TestSuite(gro, .init = zt_leak_baseline, .fini = fini, .timeout = 240);

#define DGRAM 1472 /* datagram of a full segment at MTU 1500 */
#define MSS (DGRAM - ZBUF_UDPSTREAM_HEADER)

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

/* Skip unless the kernel has UDP GRO (Linux 5.0) and UDP GSO (4.18). */
static void need_gro(void)
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0), on = 1, seg = DGRAM;
    bool gro = setsockopt(fd, SOL_UDP, UDP_GRO, &on, sizeof on) == 0;
    bool gso = setsockopt(fd, SOL_UDP, UDP_SEGMENT, &seg, sizeof seg) == 0;
    close(fd);
    if (!gro || !gso)
        cr_skip_test("the kernel has no UDP GRO or GSO (Linux 5.0)");
}

/* ----------------------------------------------------- a peer by hand */

struct peer {
    int fd, sfd;             /* ours; the stream's */
    struct sockaddr_in me, srv;
    zbuf_udpstream_t *s;     /* the listening stream under test */
    uint32_t cid, scid;      /* our identifier; the stream's */
    uint32_t isn, s_isn;     /* our first segment number; the stream's */
    uint32_t una;            /* the stream's cumulative ACK, latest heard */
    uint16_t wnd;            /* its window, latest heard */
    unsigned acks;           /* datagrams heard from it */
};

/* The bytes of data segment @sn: @len pattern bytes from stream offset
 * @at, into @out; their count. */
static size_t peer_dgram(const struct peer *p, uint32_t sn, uint64_t at, size_t len, uint8_t *out)
{
    uint8_t payload[MSS];
    for (size_t i = 0; i < len; i++)
        payload[i] = ut_pat(at + i);
    zbuf_t *z = ut_forge(ZUS_DATA, 0, p->scid, sn, p->s_isn, 1024, payload, (uint16_t)len);
    size_t n = zbuf_length(z);
    cr_assert_eq(zbuf_copyout(z, 0, out, n), (ssize_t)n);
    zbuf_delete(z);
    return n;
}

/* Read what the stream sent us (acknowledgements). */
static void peer_hear(struct peer *p)
{
    uint8_t buf[2048];
    ssize_t n;
    while ((n = recv(p->fd, buf, sizeof buf, MSG_DONTWAIT)) > 0) {
        struct zus_hdr h;
        if (zbuf__us_parse_mem(buf, (size_t)n, &h) < 0)
            continue;
        p->acks++;
        if (h.type == ZUS_SYNACK) {
            struct zus_hello hl;
            cr_assert_eq(zbuf__us_parse_hello_mem(buf + zbuf__us_hdr_size(&h), &hl), 0);
            p->scid = hl.src_cid;
            p->s_isn = h.sn;
        }
        p->una = h.una;
        p->wnd = h.wnd;
    }
}

/* Let the stream run, then hear it. */
static void peer_pump(struct peer *p)
{
    for (int i = 0; i < 3; i++) {
        usleep(200);
        zbuf_udpstream_process(p->s);
        peer_hear(p);
    }
}

/* The @total bytes at @buf as one UDP GSO send of datagrams of @seg bytes
 * (the last may be shorter). */
static void peer_send_run(struct peer *p, const uint8_t *buf, size_t seg, size_t total)
{
    union {
        char b[CMSG_SPACE(sizeof(uint16_t))];
        struct cmsghdr align;
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = total};
    struct msghdr mh = {.msg_name = &p->srv, .msg_namelen = sizeof p->srv, .msg_iov = &iov,
                        .msg_iovlen = 1, .msg_control = ctl.b, .msg_controllen = sizeof ctl.b};
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_UDP;
    c->cmsg_type = UDP_SEGMENT;
    c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
    uint16_t g = (uint16_t)seg;
    memcpy(CMSG_DATA(c), &g, sizeof g);
    cr_assert_eq(sendmsg(p->fd, &mh, 0), (ssize_t)total, "GSO send: %s", strerror(errno));
}

static void peer_send(struct peer *p, const uint8_t *buf, size_t len)
{
    cr_assert_eq(sendto(p->fd, buf, len, 0, (struct sockaddr *)&p->srv, sizeof p->srv),
                 (ssize_t)len);
}

/* A listening stream with @o, and the handshake done by hand. */
static void peer_open(struct peer *p, const zbuf_udpstream_opts_t *o)
{
    memset(p, 0, sizeof *p);
    p->sfd = udp_socket(&p->srv);
    p->fd = udp_socket(&p->me);
    cr_assert_eq(zbuf_udpstream_listen_fd(p->sfd, o, &p->s), 0);
    p->cid = 0x5eed0001;
    p->isn = 1000;
    uint8_t hello[ZUS_HELLO_LEN];
    struct zus_hello hl = {.src_cid = p->cid, .mss = MSS};
    zbuf__us_write_hello(&hl, hello);
    zbuf_t *syn = ut_forge(ZUS_SYN, 0, 0, p->isn, 0, 1024, hello, sizeof hello);
    uint8_t buf[64];
    size_t n = zbuf_length(syn);
    zbuf_copyout(syn, 0, buf, n);
    zbuf_delete(syn);
    peer_send(p, buf, n);
    for (int i = 0; i < 200 && p->scid == 0; i++)
        peer_pump(p);
    cr_assert_neq(p->scid, 0, "no SYNACK");
}

static void peer_close(struct peer *p)
{
    zbuf_udpstream_delete(p->s);
    close(p->sfd);
    close(p->fd);
}

/* Read every byte the stream has and check it against the pattern from
 * @at; the new offset. */
static uint64_t read_check(struct peer *p, uint64_t at)
{
    zbuf_t *z;
    ssize_t n;
    while ((n = zbuf_udpstream_read(p->s, 1, SIZE_MAX, &z)) > 0) {
        uint8_t *b = malloc((size_t)n);
        cr_assert_eq(zbuf_copyout(z, 0, b, (size_t)n), n);
        for (ssize_t i = 0; i < n; i++)
            cr_assert_eq(b[i], ut_pat(at + (uint64_t)i), "byte %llu",
                         (unsigned long long)(at + (uint64_t)i));
        free(b);
        zbuf_delete(z);
        at += (uint64_t)n;
    }
    return at;
}

static zbuf_udpstream_stats_t stats(const struct peer *p)
{
    zbuf_udpstream_stats_t st;
    zbuf_udpstream_get_stats(p->s, &st);
    return st;
}

/* ------------------------------------------------------------- tests */

Test(gro, a_run_with_a_short_last_datagram_is_cut_at_the_datagram_boundaries)
{
    need_gro();
    struct peer p;
    peer_open(&p, NULL);
    /* Three full segments and a 100-byte one, one GSO send. */
    static uint8_t run[4 * DGRAM];
    size_t total = 0;
    for (uint32_t i = 0; i < 4; i++)
        total += peer_dgram(&p, p.isn + i, (uint64_t)i * MSS, i < 3 ? MSS : 100, run + total);
    cr_assert_eq(total, 3 * DGRAM + 128);
    peer_send_run(&p, run, DGRAM, total);
    peer_pump(&p);
    zbuf_udpstream_stats_t st = stats(&p);
    cr_assert_eq(st.gro_dgrams, 4, "the four arrived as one run (%llu)",
                 (unsigned long long)st.gro_dgrams);
    cr_assert_eq(st.bad_dgrams, 0);
    cr_assert_eq(zbuf_udpstream_readable(p.s), 3 * MSS + 100);
    cr_assert_eq(read_check(&p, 0), 3 * MSS + 100);
    cr_assert_eq(p.una, p.isn + 4, "acknowledged all four");
    /* A run of two whose last datagram has a single byte. */
    uint64_t at = 3 * MSS + 100;
    total = peer_dgram(&p, p.isn + 4, at, MSS, run);
    total += peer_dgram(&p, p.isn + 5, at + MSS, 1, run + total);
    cr_assert_eq(total, DGRAM + ZBUF_UDPSTREAM_HEADER + 1);
    peer_send_run(&p, run, DGRAM, total);
    peer_pump(&p);
    cr_assert_eq(stats(&p).gro_dgrams, 4 + 2);
    cr_assert_eq(read_check(&p, at), at + MSS + 1);
    peer_close(&p);
}

Test(gro, plain_datagrams_to_a_gro_socket_are_packed_densely)
{
    need_gro();
    /* A pool of 16 datagrams: with one buffer per datagram, the 600 tiny
     * ones below would find no room after 16 (plus the receive slack). */
    zbuf_udpstream_opts_t o;
    zbuf_udpstream_opts_init(&o);
    o.mode = ZBUF_UDPSTREAM_ZEROCOPY;
    o.pool_bufs = 16;
    struct peer p;
    peer_open(&p, &o);
    uint8_t b[64];
    for (uint32_t i = 0; i < 600; i++) {
        /* One byte each: segment i holds stream byte i * MSS. */
        zbuf_t *z = ut_forge(ZUS_DATA, 0, p.scid, p.isn + i, p.s_isn, 1024,
                             (uint8_t[]){ut_pat((uint64_t)i * MSS)}, 1);
        size_t n = zbuf_length(z);
        zbuf_copyout(z, 0, b, n);
        zbuf_delete(z);
        peer_send(&p, b, n);
        if (i % 50 == 49)
            peer_pump(&p);
    }
    peer_pump(&p);
    zbuf_udpstream_stats_t st = stats(&p);
    cr_assert_eq(st.no_buffer, 0, "%llu datagrams found no room",
                 (unsigned long long)st.no_buffer);
    cr_assert_eq(st.gro_dgrams, 0, "plain datagrams, no runs");
    cr_assert_eq(zbuf_udpstream_readable(p.s), 600);
    /* The window still counts the pool's free bytes: 600 datagrams of 29
     * bytes pinned about 17 KiB of the 640 KiB (one buffer each would
     * have closed it). */
    cr_assert_geq(p.wnd, 300, "window %u", p.wnd);
    zbuf_t *z;
    cr_assert_eq(zbuf_udpstream_read(p.s, 600, 600, &z), 600);
    for (size_t i = 0; i < 600; i++) {
        uint8_t c;
        zbuf_copyout(z, i, &c, 1);
        cr_assert_eq(c, ut_pat((uint64_t)i * MSS));
    }
    zbuf_delete(z);
    peer_close(&p);
}

Test(gro, a_malformed_datagram_inside_a_run_is_dropped_alone)
{
    need_gro();
    struct peer p;
    peer_open(&p, NULL);
    static uint8_t run[4 * DGRAM];
    for (uint32_t i = 0; i < 4; i++)
        peer_dgram(&p, p.isn + i, (uint64_t)i * MSS, MSS, run + i * DGRAM);
    uint8_t good[DGRAM];
    memcpy(good, run + DGRAM, DGRAM);
    run[DGRAM] ^= 0xff; /* the second one's magic */
    peer_send_run(&p, run, DGRAM, sizeof run);
    peer_pump(&p);
    zbuf_udpstream_stats_t st = stats(&p);
    cr_assert_eq(st.gro_dgrams, 4);
    cr_assert_eq(st.bad_dgrams, 1, "only the broken one");
    cr_assert_eq(st.ooo_rx, 2, "the two after it are kept, out of order");
    cr_assert_eq(read_check(&p, 0), MSS, "the first is readable");
    cr_assert_eq(p.una, p.isn + 1);
    /* The peer resends the second: everything is there, in order. */
    peer_send(&p, good, sizeof good);
    peer_pump(&p);
    cr_assert_eq(read_check(&p, MSS), 4 * MSS);
    /* A run whose datagrams cannot even hold a header: all counted. */
    memset(run, 0x5a, 200);
    peer_send_run(&p, run, 20, 200);
    peer_pump(&p);
    st = stats(&p);
    cr_assert_eq(st.bad_dgrams, 1 + 10, "%llu", (unsigned long long)st.bad_dgrams);
    /* A run of datagrams larger than the stream accepts (MTU 1500). */
    static uint8_t big[3 * 2000];
    memset(big, 0x5a, sizeof big);
    peer_send_run(&p, big, 2000, sizeof big);
    peer_pump(&p);
    st = stats(&p);
    cr_assert_eq(st.bad_dgrams, 1 + 10 + 3);
    cr_assert_eq(zbuf_udpstream_error(p.s), 0);
    peer_close(&p);
}

Test(gro, a_pool_running_dry_in_the_middle_of_runs_drops_data_counted_then_recovers)
{
    need_gro();
    /* A small pool (16 datagrams: 1 + 9 buffers of 64 KiB, about 390
     * full segments), a reader that keeps everything, and a peer that
     * sends 20 runs of 44 segments without looking at the window. */
    zbuf_udpstream_opts_t o;
    zbuf_udpstream_opts_init(&o);
    o.mode = ZBUF_UDPSTREAM_ZEROCOPY;
    o.pool_bufs = 16;
    struct peer p;
    peer_open(&p, &o);
    enum { RUN = 44, RUNS = 20, SEGS = RUN * RUNS };
    static uint8_t run[RUN * DGRAM];
    for (uint32_t r = 0; r < RUNS; r++) {
        for (uint32_t i = 0; i < RUN; i++)
            peer_dgram(&p, p.isn + r * RUN + i, (uint64_t)(r * RUN + i) * MSS, MSS,
                       run + i * DGRAM);
        peer_send_run(&p, run, DGRAM, sizeof run);
        peer_pump(&p);
    }
    zbuf_t *hoard[64];
    int nh = 0;
    while (nh < 64 && zbuf_udpstream_read(p.s, 1, SIZE_MAX, &hoard[nh]) > 0)
        nh++;
    peer_pump(&p);
    zbuf_udpstream_stats_t st = stats(&p);
    cr_assert_gt(st.no_buffer, 0, "the pool ran dry");
    cr_assert_lt(p.una - p.isn, SEGS, "not everything could be taken");
    cr_assert_gt(p.una - p.isn, 0);
    unsigned heard = p.acks;
    /* The stream still hears control datagrams: a probe is answered. */
    zbuf_t *ping = ut_forge(ZUS_PING, 0, p.scid, p.isn + SEGS, p.s_isn, 1024, NULL, 0);
    uint8_t pb[ZBUF_UDPSTREAM_HEADER];
    zbuf_copyout(ping, 0, pb, sizeof pb);
    zbuf_delete(ping);
    peer_send(&p, pb, sizeof pb);
    peer_pump(&p);
    cr_assert_gt(p.acks, heard, "an answer to the probe");
    /* The reader checks and lets go; the peer resends from the stream's
     * acknowledgement on, in runs, until all is acknowledged. */
    uint64_t at = 0;
    for (int i = 0; i < nh; i++) {
        size_t n = zbuf_length(hoard[i]);
        for (size_t k = 0; k < n; k++) {
            uint8_t c;
            zbuf_copyout(hoard[i], k, &c, 1);
            cr_assert_eq(c, ut_pat(at + k));
        }
        at += n;
        zbuf_delete(hoard[i]);
    }
    for (int round = 0; round < 200 && p.una != p.isn + SEGS; round++) {
        uint32_t from = p.una, end = p.isn + SEGS;
        uint32_t n = end - from < RUN ? end - from : RUN;
        for (uint32_t i = 0; i < n; i++)
            peer_dgram(&p, from + i, (uint64_t)(from + i - p.isn) * MSS, MSS, run + i * DGRAM);
        if (n > 1)
            peer_send_run(&p, run, DGRAM, n * DGRAM);
        else
            peer_send(&p, run, DGRAM);
        peer_pump(&p);
        at = read_check(&p, at);
    }
    cr_assert_eq(p.una, p.isn + SEGS, "all acknowledged");
    cr_assert_eq(at, (uint64_t)SEGS * MSS, "every byte read once, in order");
    cr_assert_eq(zbuf_udpstream_error(p.s), 0);
    peer_close(&p);
}

Test(gro, a_peer_within_the_window_always_finds_room_while_the_reader_hoards)
{
    need_gro();
    /* A small pool (1 + 9 buffers of 64 KiB), a reader that keeps every
     * byte it reads, and a peer that sends exactly what the window allows,
     * in runs of random length and datagram size and in plain datagrams:
     * the window shrinks to 0 as the pool fills, and no datagram within it
     * ever finds the pool without room. */
    zbuf_udpstream_opts_t o;
    zbuf_udpstream_opts_init(&o);
    o.mode = ZBUF_UDPSTREAM_ZEROCOPY;
    o.pool_bufs = 16;
    struct peer p;
    peer_open(&p, &o);
    enum { MAXSEG = 20000 };
    uint64_t *off = calloc(MAXSEG + 1, sizeof *off); /* stream offset of segment i */
    zbuf_t **hoard = calloc(MAXSEG, sizeof *hoard);
    uint32_t next = 0; /* segments sent */
    int nh = 0, closed_rounds = 0;
    uint64_t rng = 42, got = 0;
    static uint8_t run[44 * DGRAM];
    while (closed_rounds < 5 && next < MAXSEG - 44) {
        uint32_t allowed = p.una + p.wnd - (p.isn + next);
        if (p.wnd == 0 || (int32_t)allowed <= 0) {
            closed_rounds++;
        } else {
            closed_rounds = 0;
            uint32_t k = 1 + (uint32_t)(ut_rand(&rng) % 44);
            if (k > allowed)
                k = allowed;
            size_t len = ut_rand(&rng) % 2 ? MSS : 1 + ut_rand(&rng) % MSS;
            size_t total = 0;
            for (uint32_t i = 0; i < k; i++) {
                size_t l = i + 1 < k ? len : 1 + ut_rand(&rng) % len;
                total += peer_dgram(&p, p.isn + next, off[next], l, run + total);
                off[next + 1] = off[next] + l;
                next++;
            }
            if (k > 1 && ut_rand(&rng) % 4)
                peer_send_run(&p, run, len + ZBUF_UDPSTREAM_HEADER, total);
            else
                for (size_t at = 0; at < total; at += len + ZBUF_UDPSTREAM_HEADER)
                    peer_send(&p, run + at, total - at < len + ZBUF_UDPSTREAM_HEADER
                                                ? total - at
                                                : len + ZBUF_UDPSTREAM_HEADER);
        }
        peer_pump(&p);
        zbuf_t *z;
        while (nh < MAXSEG && zbuf_udpstream_read(p.s, 1, SIZE_MAX, &z) > 0) {
            got += zbuf_length(z);
            hoard[nh++] = z;
        }
    }
    zbuf_udpstream_stats_t st = stats(&p);
    cr_assert_eq(st.no_buffer, 0, "%llu datagrams within the window found no room",
                 (unsigned long long)st.no_buffer);
    cr_assert_eq(st.out_of_window, 0);
    cr_assert_eq(st.bad_dgrams, 0);
    cr_assert_eq(p.wnd, 0, "the window closed as the pool filled (%u segments sent)", next);
    cr_assert_eq(got, off[next], "every byte sent was read");
    cr_assert_gt(st.gro_dgrams, 0);
    /* Check and let go: the window opens again. */
    uint64_t at = 0;
    for (int i = 0; i < nh; i++) {
        for (zbuf_seg_t *sg = zbuf_seg_first(hoard[i]); sg; sg = zbuf_seg_next(hoard[i], sg)) {
            const uint8_t *d = zbuf_seg_data(hoard[i], sg);
            for (size_t k = 0; k < zbuf_seg_length(hoard[i], sg); k++, at++)
                cr_assert_eq(d[k], ut_pat(at));
        }
        zbuf_delete(hoard[i]);
    }
    zbuf_t *ping = ut_forge(ZUS_PING, 0, p.scid, p.isn + next, p.s_isn, 1024, NULL, 0);
    uint8_t pb[ZBUF_UDPSTREAM_HEADER];
    zbuf_copyout(ping, 0, pb, sizeof pb);
    zbuf_delete(ping);
    peer_send(&p, pb, sizeof pb);
    peer_pump(&p);
    cr_assert_gt(p.wnd, 300, "window %u after the reader let go", p.wnd);
    free(off);
    free(hoard);
    peer_close(&p);
}

Test(gro, the_socket_gets_its_udp_gro_option_back)
{
    need_gro();
    struct sockaddr_in a;
    int fd = udp_socket(&a), v = 1;
    socklen_t l = sizeof v;
    zbuf_udpstream_t *s;
    cr_assert_eq(zbuf_udpstream_listen_fd(fd, NULL, &s), 0);
    cr_assert_eq(getsockopt(fd, SOL_UDP, UDP_GRO, &v, &l), 0);
    cr_assert_eq(v, 1, "set while the stream runs");
    zbuf_udpstream_delete(s);
    cr_assert_eq(getsockopt(fd, SOL_UDP, UDP_GRO, &v, &l), 0);
    cr_assert_eq(v, 0, "off again, as it came");
    /* Without GRO asked for, the option is left alone. */
    zbuf_udpstream_opts_t o;
    zbuf_udpstream_opts_init(&o);
    o.no_gro = true;
    cr_assert_eq(zbuf_udpstream_listen_fd(fd, &o, &s), 0);
    cr_assert_eq(getsockopt(fd, SOL_UDP, UDP_GRO, &v, &l), 0);
    cr_assert_eq(v, 0);
    zbuf_udpstream_delete(s);
    close(fd);
}
