/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include "sock_test_util.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zbuf/zbuf.h>

void st_tcp_pair(int *a, int *b)
{
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert(l >= 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t sl = sizeof sa;
    cr_assert_eq(bind(l, (struct sockaddr *)&sa, sizeof sa), 0);
    cr_assert_eq(listen(l, 4), 0);
    cr_assert_eq(getsockname(l, (struct sockaddr *)&sa, &sl), 0);
    *a = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert(*a >= 0);
    cr_assert_eq(connect(*a, (struct sockaddr *)&sa, sizeof sa), 0, "connect: %s", strerror(errno));
    *b = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    cr_assert(*b >= 0);
    close(l);
}

void st_udp_pair(int *a, int *b, bool connected, struct sockaddr_in *addr_b)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    struct sockaddr_in sb = sa;
    socklen_t sl = sizeof sa;
    *a = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    *b = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    cr_assert(*a >= 0 && *b >= 0);
    cr_assert_eq(bind(*a, (struct sockaddr *)&sa, sizeof sa), 0);
    cr_assert_eq(bind(*b, (struct sockaddr *)&sb, sizeof sb), 0);
    cr_assert_eq(getsockname(*a, (struct sockaddr *)&sa, &sl), 0);
    sl = sizeof sb;
    cr_assert_eq(getsockname(*b, (struct sockaddr *)&sb, &sl), 0);
    if (connected) {
        cr_assert_eq(connect(*a, (struct sockaddr *)&sb, sizeof sb), 0);
        cr_assert_eq(connect(*b, (struct sockaddr *)&sa, sizeof sa), 0);
    }
    if (addr_b)
        *addr_b = sb;
}

void st_nonblock(int fd, bool on)
{
    int fl = fcntl(fd, F_GETFL);
    cr_assert(fl >= 0);
    cr_assert_eq(fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK), 0);
}

void st_bufsizes(int fd, int sndbuf, int rcvbuf)
{
    if (sndbuf)
        cr_assert_eq(setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf), 0);
    if (rcvbuf)
        cr_assert_eq(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf), 0);
}

void st_fill(void *dst, size_t len, uint64_t off)
{
    uint8_t *p = dst;
    for (size_t i = 0; i < len; i++)
        p[i] = st_pat(off + i);
}

size_t st_mismatch(const void *src, size_t len, uint64_t off)
{
    const uint8_t *p = src;
    for (size_t i = 0; i < len; i++)
        if (p[i] != st_pat(off + i))
            return i;
    return (size_t)-1;
}

static void *reader_main(void *arg)
{
    struct st_reader *r = arg;
    uint8_t *buf = malloc(r->chunk);
    r->bad_at = UINT64_MAX;
    for (;;) {
        size_t want = r->chunk;
        if (r->limit && r->limit - r->got < want)
            want = r->limit - r->got;
        if (want == 0)
            break;
        ssize_t n = read(r->fd, buf, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            r->err = errno;
            break;
        }
        if (n == 0)
            break;
        size_t m = st_mismatch(buf, (size_t)n, r->got);
        if (m != (size_t)-1 && r->bad_at == UINT64_MAX)
            r->bad_at = r->got + m;
        r->got += (uint64_t)n;
        if (r->delay_us)
            usleep(r->delay_us);
    }
    free(buf);
    return NULL;
}

void st_reader_start(struct st_reader *r, int fd, size_t chunk, unsigned delay_us)
{
    r->fd = fd;
    r->chunk = chunk;
    r->delay_us = delay_us;
    r->got = 0;
    r->err = 0;
    cr_assert_eq(pthread_create(&r->tid, NULL, reader_main, r), 0);
}

void st_reader_join(struct st_reader *r)
{
    pthread_join(r->tid, NULL);
}

void st_count_release(void *data, size_t size, void *arg)
{
    (void)size;
    free(data);
    atomic_fetch_add((atomic_int *)arg, 1);
}

struct zbuf *st_pattern_zbuf(size_t len, uint64_t off, size_t seg, atomic_int *count)
{
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    for (size_t done = 0; done < len;) {
        size_t n = len - done < seg ? len - done : seg;
        void *p = malloc(n);
        cr_assert(p != NULL);
        st_fill(p, n, off + done);
        cr_assert_eq(zbuf_append_buf(z, p, n, st_count_release, count), 0);
        done += n;
    }
    return z;
}

int64_t st_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
