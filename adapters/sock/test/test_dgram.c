/* SPDX-License-Identifier: MIT */
/*
 * Datagram sockets: one zbuf is one datagram, sendmmsg batches, pool
 * receives with the sender's address, recvmmsg batches.  Loopback UDP.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zbuf/sock.h>

#include "sock_test_util.h"
#include "support.h"

ZT_SUITE(dgram);

/* Receive one datagram with plain recv() and check it is the pattern from
 * offset `off`, `len` bytes. */
static void expect_plain(int fd, size_t len, uint64_t off)
{
    uint8_t *buf = malloc(len + 16);
    ssize_t n = recv(fd, buf, len + 16, 0);
    cr_assert_eq(n, (ssize_t)len, "datagram of %zd bytes, expected %zu", n, len);
    cr_assert_eq(st_mismatch(buf, len, off), (size_t)-1);
    free(buf);
}

Test(dgram, one_zbuf_is_one_datagram_in_every_layout)
{
    int a, b;
    st_udp_pair(&a, &b, true, NULL);
    size_t sizes[] = { 1, 100, 1472, 9000, 65507 };
    size_t segs[] = { 1, 7, 1000, 65536 };
    for (size_t i = 0; i < 5; i++) {
        for (size_t j = 0; j < 4; j++) {
            if (sizes[i] / segs[j] > 1000)
                continue; /* over IOV_MAX: covered below */
            atomic_int released = 0;
            zbuf_t *z = st_pattern_zbuf(sizes[i], i * 10 + j, segs[j], &released);
            int nbufs = (int)zbuf_seg_count(z);
            zbuf_stats_t s0, s1;
            zbuf_stats_get(&s0);
            cr_assert_eq(zbuf_sock_sendto_fd(a, z, 0, NULL, 0), (ssize_t)sizes[i]);
            zbuf_stats_get(&s1);
            cr_assert_eq(s1.bytes_copied, s0.bytes_copied, "no copy for a gather datagram");
            cr_assert_eq(zbuf_length(z), 0, "a sent datagram empties the zbuf");
            cr_assert_eq(atomic_load(&released), nbufs);
            expect_plain(b, sizes[i], i * 10 + j);
            zbuf_delete(z);
        }
    }
    close(a);
    close(b);
}

Test(dgram, more_segments_than_iov_max_go_through_one_counted_bounce)
{
    int a, b;
    st_udp_pair(&a, &b, true, NULL);
    atomic_int released = 0;
    zbuf_t *z = st_pattern_zbuf(3000, 5, 2, &released); /* 1500 segments */
    zbuf_stats_t s0, s1;
    zbuf_stats_get(&s0);
    cr_assert_eq(zbuf_sock_sendto_fd(a, z, 0, NULL, 0), 3000);
    zbuf_stats_get(&s1);
    cr_assert_eq(s1.bytes_copied - s0.bytes_copied, 3000, "the bounce copy is counted");
    cr_assert_eq(atomic_load(&released), 1500);
    expect_plain(b, 3000, 5);
    zbuf_delete(z);
    close(a);
    close(b);
}

Test(dgram, unconnected_sendto_and_recvfrom_give_the_addresses)
{
    int a, b;
    struct sockaddr_in addr_b;
    st_udp_pair(&a, &b, false, &addr_b);
    struct sockaddr_in addr_a;
    socklen_t l = sizeof addr_a;
    getsockname(a, (struct sockaddr *)&addr_a, &l);
    atomic_int released = 0;
    zbuf_t *z = st_pattern_zbuf(5000, 0, 1000, &released);
    cr_assert_eq(zbuf_sock_sendto_fd(a, z, 0, (struct sockaddr *)&addr_b, sizeof addr_b), 5000);
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(2048, 8, &pool), 0);
    zbuf_sock_msg_t m;
    cr_assert_eq(zbuf_sock_recvfrom(b, pool, 9000, 0, &m), 5000);
    cr_assert_eq(m.addrlen, sizeof addr_a);
    struct sockaddr_in *from = (struct sockaddr_in *)&m.addr;
    cr_assert_eq(from->sin_port, addr_a.sin_port, "the sender's address comes back");
    cr_assert_eq(m.flags & MSG_TRUNC, 0);
    cr_assert_eq(zbuf_seg_count(m.z), 3, "5000 bytes in three 2 KiB pool buffers");
    cr_assert_eq(zbuf_pool_available(pool), 5, "unused buffers went straight back");
    uint8_t out[5000];
    cr_assert_eq(zbuf_copyout(m.z, 0, out, 5000), 5000);
    cr_assert_eq(st_mismatch(out, 5000, 0), (size_t)-1);
    zbuf_delete(m.z);
    cr_assert_eq(zbuf_pool_available(pool), 8);
    zbuf_pool_delete(pool);
    zbuf_delete(z);
    close(a);
    close(b);
}

Test(dgram, a_datagram_larger_than_offered_is_flagged_truncated)
{
    int a, b;
    st_udp_pair(&a, &b, true, NULL);
    char buf[3000];
    st_fill(buf, sizeof buf, 0);
    cr_assert_eq(send(a, buf, sizeof buf, 0), 3000);
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(1024, 4, &pool), 0);
    zbuf_sock_msg_t m;
    cr_assert_eq(zbuf_sock_recvfrom(b, pool, 0, 0, &m), 1024, "max 0: one pool buffer");
    cr_assert(m.flags & MSG_TRUNC);
    zbuf_delete(m.z);
    cr_assert_eq(zbuf_sock_recvfrom(b, pool, 0, MSG_DONTWAIT, &m), -EAGAIN);
    cr_assert_null(m.z);
    cr_assert_eq(zbuf_pool_available(pool), 4);
    zbuf_pool_delete(pool);
    close(a);
    close(b);
}

Test(dgram, zero_length_datagram_round_trips)
{
    int a, b;
    st_udp_pair(&a, &b, true, NULL);
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_sock_sendto_fd(a, z, 0, NULL, 0), 0);
    zbuf_sock_msg_t m;
    cr_assert_eq(zbuf_sock_recvfrom(b, NULL, 0, 0, &m), 0);
    cr_assert_not_null(m.z);
    cr_assert_eq(zbuf_length(m.z), 0);
    zbuf_delete(m.z);
    zbuf_delete(z);
    close(a);
    close(b);
}

Test(dgram, sendmmsg_and_recvmmsg_batches_keep_order_and_boundaries)
{
    int a, b;
    struct sockaddr_in addr_b;
    st_udp_pair(&a, &b, false, &addr_b);
    st_bufsizes(b, 0, 1 << 20);
    enum { N = 150 };
    zbuf_sock_msg_t out[N];
    atomic_int released = 0;
    uint64_t off = 0;
    size_t lens[N];
    for (int i = 0; i < N; i++) {
        lens[i] = 1 + (size_t)(i * 37) % 1400;
        out[i].z = st_pattern_zbuf(lens[i], off, 100, &released);
        memcpy(&out[i].addr, &addr_b, sizeof addr_b);
        out[i].addrlen = sizeof addr_b;
        off += lens[i];
    }
    cr_assert_eq(zbuf_sock_sendmmsg_fd(a, out, N, 0), N, "150 datagrams in three calls");
    for (int i = 0; i < N; i++) {
        cr_assert_eq(zbuf_length(out[i].z), 0);
        zbuf_delete(out[i].z);
    }
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(2048, 64, &pool), 0);
    int got = 0;
    off = 0;
    while (got < N) {
        zbuf_sock_msg_t in[32];
        int r = zbuf_sock_recvmmsg(b, pool, 0, in, 32, MSG_DONTWAIT);
        cr_assert(r > 0, "recvmmsg: %s", zbuf_strerror(r));
        for (int i = 0; i < r; i++, got++) {
            cr_assert_eq(zbuf_length(in[i].z), lens[got], "datagram %d", got);
            uint8_t buf[1400];
            cr_assert_eq(zbuf_copyout(in[i].z, 0, buf, lens[got]), (ssize_t)lens[got]);
            cr_assert_eq(st_mismatch(buf, lens[got], off), (size_t)-1, "datagram %d", got);
            off += lens[got];
            zbuf_delete(in[i].z);
        }
    }
    cr_assert_eq(zbuf_pool_available(pool), 64);
    zbuf_pool_delete(pool);
    close(a);
    close(b);
}

Test(dgram, recvmmsg_batch_shrinks_to_what_the_pool_can_hold)
{
    int a, b;
    st_udp_pair(&a, &b, true, NULL);
    char buf[100] = { 0 };
    for (int i = 0; i < 10; i++)
        cr_assert_eq(send(a, buf, sizeof buf, 0), 100);
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(512, 3, &pool), 0);
    zbuf_sock_msg_t in[10];
    cr_assert_eq(zbuf_sock_recvmmsg(b, pool, 0, in, 10, MSG_DONTWAIT), 3);
    cr_assert_eq(zbuf_sock_recvmmsg(b, pool, 0, in + 3, 7, MSG_DONTWAIT), -ENOBUFS);
    for (int i = 0; i < 3; i++)
        zbuf_delete(in[i].z);
    cr_assert_eq(zbuf_sock_recvmmsg(b, pool, 0, in, 10, MSG_DONTWAIT), 3);
    for (int i = 0; i < 3; i++)
        zbuf_delete(in[i].z);
    zbuf_pool_delete(pool);
    close(a);
    close(b);
}

Test(dgram, eagain_leaves_the_zbuf_unchanged)
{
    /* Loopback UDP never blocks (it drops), so use a Unix datagram pair,
     * whose receive queue fills up. */
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv), 0);
    st_nonblock(sv[0], true);
    atomic_int released = 0;
    int sent = 0, eagain = 0;
    for (int i = 0; i < 100000 && !eagain; i++) {
        zbuf_t *z = st_pattern_zbuf(1000, 0, 300, &released);
        ssize_t n = zbuf_sock_sendto_fd(sv[0], z, 0, NULL, 0);
        if (n == -EAGAIN) {
            eagain = 1;
            cr_assert_eq(zbuf_length(z), 1000, "EAGAIN changes nothing");
            cr_assert_eq(atomic_load(&released), 4 * sent, "no callback for an unsent datagram");
        } else {
            cr_assert_eq(n, 1000);
            sent++;
        }
        zbuf_delete(z);
    }
    cr_assert(eagain, "the queue never filled");
    cr_assert_eq(atomic_load(&released), 4 * (sent + 1));
    /* And a retry after draining one datagram succeeds. */
    char buf[1000];
    cr_assert_eq(recv(sv[1], buf, sizeof buf, 0), 1000);
    cr_assert_eq(st_mismatch(buf, 1000, 0), (size_t)-1);
    zbuf_t *z = st_pattern_zbuf(1000, 0, 300, &released);
    cr_assert_eq(zbuf_sock_sendto_fd(sv[0], z, 0, NULL, 0), 1000);
    zbuf_delete(z);
    close(sv[0]);
    close(sv[1]);
}
