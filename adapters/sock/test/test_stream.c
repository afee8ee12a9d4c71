/* SPDX-License-Identifier: MIT */
/*
 * Stream sockets: gather sends of every segment layout, blocking and
 * non-blocking, partial writes, EAGAIN, EINTR, a peer reset mid-stream, and
 * pool receives.  Loopback TCP only.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>
#include <zbuf/sock.h>

#include "sock_test_util.h"
#include "support.h"

ZT_SUITE(stream);

/* Send `len` pattern bytes in segments of `seg` bytes, read them back on the
 * other side, and check bytes and callbacks. */
static void roundtrip(size_t len, size_t seg)
{
    int a, b;
    st_tcp_pair(&a, &b);
    atomic_int released = 0;
    zbuf_t *z = st_pattern_zbuf(len, 0, seg, &released);
    int nbufs = (int)((len + seg - 1) / seg);
    struct st_reader r = { 0 };
    st_reader_start(&r, b, 65536, 0);

    zbuf_stats_t before, after;
    zbuf_stats_get(&before);
    ssize_t n = zbuf_sock_send_fd(a, z, 0);
    zbuf_stats_get(&after);
    cr_assert_eq(n, (ssize_t)len, "sent %zd of %zu (seg %zu): %s", n, len, seg,
                 n < 0 ? zbuf_strerror((int)n) : "");
    cr_assert_eq(zbuf_length(z), 0);
    cr_assert_eq(after.bytes_copied, before.bytes_copied, "a gather send copied bytes");
    cr_assert_eq(atomic_load(&released), nbufs, "every buffer released once, when sent");
    zt_check(z);
    shutdown(a, SHUT_WR);
    st_reader_join(&r);
    cr_assert_eq(r.got, len);
    cr_assert_eq(r.bad_at, UINT64_MAX, "byte %llu differs", (unsigned long long)r.bad_at);
    zbuf_delete(z);
    cr_assert_eq(atomic_load(&released), nbufs);
    close(a);
    close(b);
}

Test(stream, one_segment_of_every_size_arrives_intact)
{
    size_t sizes[] = { 1, 2, 100, 4095, 4096, 65536, 1 << 20, 5 << 20 };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        roundtrip(sizes[i], sizes[i]);
}

Test(stream, small_segments_arrive_intact)
{
    roundtrip(10000, 1);
    roundtrip(100000, 37);
    roundtrip(1 << 20, 4000);
}

Test(stream, more_segments_than_iov_max_arrive_intact)
{
    roundtrip(3 * 1024 * 16 + 5, 16); /* 3073 segments: four sendmsg calls */
}

Test(stream, shared_and_split_segments_arrive_intact)
{
    /* A master of 3 segments, duplicated piecewise and reassembled in a
     * different segment layout: dups, splits and cuts, no copy. */
    int a, b;
    st_tcp_pair(&a, &b);
    atomic_int released = 0;
    zbuf_t *master = st_pattern_zbuf(30000, 0, 10000, &released);
    zbuf_t *msg;
    cr_assert_eq(zbuf_create(&msg), 0);
    for (size_t off = 0; off < 30000; off += 777) {
        zbuf_t *piece;
        size_t n = 30000 - off < 777 ? 30000 - off : 777;
        cr_assert_eq(zbuf_dup(master, off, n, &piece), 0);
        cr_assert_eq(zbuf_append(msg, piece), 0);
    }
    zt_check(msg);
    struct st_reader r = { 0 };
    st_reader_start(&r, b, 4096, 0);
    cr_assert_eq(zbuf_sock_send_fd(a, msg, 0), 30000);
    cr_assert_eq(atomic_load(&released), 0, "the master still holds the buffers");
    zbuf_delete(master);
    cr_assert_eq(atomic_load(&released), 3);
    shutdown(a, SHUT_WR);
    st_reader_join(&r);
    cr_assert_eq(r.got, 30000);
    cr_assert_eq(r.bad_at, UINT64_MAX);
    zbuf_delete(msg);
    close(a);
    close(b);
}

Test(stream, empty_zbuf_sends_nothing)
{
    int a, b;
    st_tcp_pair(&a, &b);
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_sock_send_fd(a, z, 0), 0);
    cr_assert_eq(zbuf_sock_send_fd(a, NULL, 0), -EINVAL);
    cr_assert_eq(zbuf_sock_send_fd(-1, z, 0), -EINVAL);
    zbuf_delete(z);
    close(a);
    close(b);
}

Test(stream, nonblocking_send_leaves_exactly_the_unsent_remainder)
{
    int a, b;
    st_tcp_pair(&a, &b);
    st_bufsizes(a, 4096, 0);
    st_nonblock(a, true);
    const size_t len = 4 << 20;
    atomic_int released = 0;
    zbuf_t *z = st_pattern_zbuf(len, 0, 3000, &released);

    /* The receiver does not read: the first send fills the buffers and
     * returns a partial count, the next one -EAGAIN. */
    ssize_t n = zbuf_sock_send_fd(a, z, 0);
    cr_assert(n > 0 && (size_t)n < len, "partial send expected, got %zd", n);
    cr_assert_eq(zbuf_length(z), len - (size_t)n, "the zbuf holds exactly what was not sent");
    zt_check(z);
    int whole = (int)((size_t)n / 3000);
    cr_assert(atomic_load(&released) >= whole && atomic_load(&released) <= whole + 1,
              "buffers wholly sent are released (%d, %d)", atomic_load(&released), whole);
    cr_assert_eq(zbuf_sock_send_fd(a, z, 0), -EAGAIN);
    cr_assert_eq(zbuf_length(z), len - (size_t)n, "EAGAIN changes nothing");

    /* Now read, and retry until everything went out. */
    struct st_reader r = { 0 };
    st_reader_start(&r, b, 8192, 0);
    uint64_t total = (uint64_t)n;
    int eagains = 0;
    int64_t t0 = st_now_ms();
    while (zbuf_length(z) > 0 && st_now_ms() - t0 < 30000) {
        n = zbuf_sock_send_fd(a, z, 0);
        if (n == -EAGAIN) {
            eagains++;
            struct pollfd p = { .fd = a, .events = POLLOUT };
            poll(&p, 1, 100);
            continue;
        }
        cr_assert(n > 0, "send: %s", zbuf_strerror((int)n));
        total += (uint64_t)n;
        cr_assert_eq(zbuf_length(z), len - total);
    }
    cr_assert_eq(total, len);
    shutdown(a, SHUT_WR);
    st_reader_join(&r);
    cr_assert_eq(r.got, len, "no byte lost or duplicated");
    cr_assert_eq(r.bad_at, UINT64_MAX, "byte %llu differs", (unsigned long long)r.bad_at);
    cr_assert_eq(atomic_load(&released), (int)((len + 2999) / 3000));
    zbuf_delete(z);
    close(a);
    close(b);
}

static volatile sig_atomic_t alarms;
static void on_alarm(int sig)
{
    (void)sig;
    alarms++;
}

Test(stream, eintr_in_a_blocking_send_is_retried_without_loss)
{
    int a, b;
    st_tcp_pair(&a, &b);
    st_bufsizes(a, 8192, 0);
    struct sigaction sa = { .sa_handler = on_alarm }; /* no SA_RESTART */
    struct sigaction old;
    sigemptyset(&sa.sa_mask);
    cr_assert_eq(sigaction(SIGALRM, &sa, &old), 0);
    /* The reader is slow, so the sender sleeps in sendmsg() while signals
     * arrive every 2 ms. */
    struct st_reader r = { 0 };
    st_reader_start(&r, b, 4096, 300);
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &block, NULL); /* signals for this thread only */
    pthread_sigmask(SIG_UNBLOCK, &block, NULL);
    alarms = 0;
    struct itimerval it = { .it_interval = { 0, 2000 }, .it_value = { 0, 2000 } };
    cr_assert_eq(setitimer(ITIMER_REAL, &it, NULL), 0);

    const size_t len = 2 << 20;
    atomic_int released = 0;
    zbuf_t *z = st_pattern_zbuf(len, 0, 65536, &released);
    ssize_t n = zbuf_sock_send_fd(a, z, 0);
    struct itimerval off = { 0 };
    setitimer(ITIMER_REAL, &off, NULL);
    sigaction(SIGALRM, &old, NULL);

    cr_assert_eq(n, (ssize_t)len, "blocking send returns everything, got %zd", n);
    cr_assert(alarms > 0, "no signal arrived during the send");
    shutdown(a, SHUT_WR);
    st_reader_join(&r);
    cr_assert_eq(r.got, len);
    cr_assert_eq(r.bad_at, UINT64_MAX, "byte %llu differs", (unsigned long long)r.bad_at);
    zbuf_delete(z);
    cr_assert_eq(atomic_load(&released), 32);
    close(a);
    close(b);
}

struct resetter {
    struct st_reader r;
    int fd;
    pthread_t tid;
};

/* Wait for the reader to have read its limit, then reset the connection. */
static void *resetter_main(void *arg)
{
    struct resetter *x = arg;
    st_reader_join(&x->r);
    struct linger lg = { .l_onoff = 1, .l_linger = 0 };
    setsockopt(x->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(x->fd);
    return NULL;
}

Test(stream, peer_reset_mid_stream_reports_error_and_releases_everything_once)
{
    int a, b;
    st_tcp_pair(&a, &b);
    st_bufsizes(a, 16384, 0);
    st_bufsizes(b, 0, 16384);
    /* The peer reads 100 KB, then resets the connection. */
    struct resetter x = { .fd = b };
    x.r.limit = 100000;
    st_reader_start(&x.r, b, 4096, 0);
    cr_assert_eq(pthread_create(&x.tid, NULL, resetter_main, &x), 0);
    const size_t len = 8 << 20;
    atomic_int released = 0;
    zbuf_t *z = st_pattern_zbuf(len, 0, 8192, &released);
    ssize_t n;
    int calls = 0;
    do
        n = zbuf_sock_send_fd(a, z, 0);
    while (n > 0 && ++calls < 1000);
    pthread_join(x.tid, NULL);
    cr_assert(n == -ECONNRESET || n == -EPIPE, "got %zd (%s)", n, zbuf_strerror((int)n));
    cr_assert_eq(x.r.got, 100000);
    cr_assert_eq(x.r.bad_at, UINT64_MAX);
    cr_assert(zbuf_length(z) > 0 && zbuf_length(z) < len, "left %zu", zbuf_length(z));
    zt_check(z);
    int before = atomic_load(&released);
    cr_assert(before < (int)(len / 8192));
    zbuf_delete(z);
    cr_assert_eq(atomic_load(&released), (int)(len / 8192), "every callback runs exactly once");
    close(a);
}

struct writer {
    int fd;
    const uint8_t *p;
    size_t len;
};

static void *writer_main(void *arg)
{
    struct writer *w = arg;
    size_t off = 0;
    while (off < w->len) {
        ssize_t k = write(w->fd, w->p + off, w->len - off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        off += (size_t)k;
    }
    shutdown(w->fd, SHUT_WR);
    return NULL;
}

Test(stream, receive_into_pool_buffers_without_copy)
{
    int a, b;
    st_tcp_pair(&a, &b);
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(2048, 256, &pool), 0);
    const size_t len = 1 << 20;
    uint8_t *src = malloc(len);
    st_fill(src, len, 0);
    struct writer w = { a, src, len };
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, writer_main, &w), 0);

    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    uint64_t copied_by_recv = 0;
    size_t total = 0, checked = 0;
    uint8_t *chk = malloc(512 * 1024);
    for (;;) {
        zbuf_stats_t s0, s1;
        zbuf_stats_get(&s0);
        ssize_t n = zbuf_sock_recv(b, pool, 65536, 0, z);
        zbuf_stats_get(&s1);
        copied_by_recv += s1.bytes_copied - s0.bytes_copied;
        cr_assert(n >= 0, "recv: %s", zbuf_strerror((int)n));
        cr_assert_eq(zbuf_length(z), total + (size_t)n - checked);
        total += (size_t)n;
        /* Check and drop what arrived whenever it grows, so that the pool
         * (512 KiB) never runs dry; at the end check the rest. */
        if (n == 0 || zbuf_length(z) > 256 * 1024) {
            size_t have = zbuf_length(z);
            cr_assert_eq(zbuf_copyout(z, 0, chk, have), (ssize_t)have);
            cr_assert_eq(st_mismatch(chk, have, checked), (size_t)-1, "bytes differ near %zu",
                         checked);
            checked += have;
            zbuf_cut(z, 0, ZBUF_TO_END, NULL);
            cr_assert_eq(zbuf_pool_available(pool), 256, "cutting gives the buffers back");
        }
        if (n == 0)
            break;
    }
    free(chk);
    cr_assert_eq(copied_by_recv, 0, "pool receives copied %llu bytes",
                 (unsigned long long)copied_by_recv);
    cr_assert_eq(total, len);
    cr_assert_eq(checked, len);
    zbuf_delete(z);
    pthread_join(t, NULL);
    zbuf_pool_delete(pool);
    free(src);
    close(a);
    close(b);
}

Test(stream, receive_reports_eagain_eof_and_an_empty_pool)
{
    int a, b;
    st_tcp_pair(&a, &b);
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(1024, 2, &pool), 0);
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_sock_recv(b, pool, 4096, MSG_DONTWAIT, z), -EAGAIN);
    cr_assert_eq(zbuf_pool_available(pool), 2, "a failed receive keeps no buffer");
    cr_assert_eq(zbuf_length(z), 0);
    char data[3000];
    st_fill(data, sizeof data, 0);
    cr_assert_eq(write(a, data, sizeof data), (ssize_t)sizeof data);
    usleep(10000);
    /* Only two 1 KiB buffers: the first receive gets 2048 bytes. */
    cr_assert_eq(zbuf_sock_recv(b, pool, 4096, 0, z), 2048);
    cr_assert_eq(zbuf_seg_count(z), 2);
    cr_assert_eq(zbuf_sock_recv(b, pool, 4096, 0, z), -ENOBUFS);
    zbuf_cut(z, 0, 1024, NULL);
    cr_assert_eq(zbuf_pool_available(pool), 1);
    cr_assert_eq(zbuf_sock_recv(b, pool, 4096, 0, z), 952);
    char out[2000];
    cr_assert_eq(zbuf_copyout(z, 0, out, 1976), 1976);
    cr_assert_eq(st_mismatch(out, 1976, 1024), (size_t)-1);
    close(a);
    zbuf_cut(z, 0, ZBUF_TO_END, NULL);
    cr_assert_eq(zbuf_sock_recv(b, pool, 4096, 0, z), 0, "end of stream");
    cr_assert_eq(zbuf_sock_recv(b, pool, 0, 0, z), -EINVAL);
    zbuf_delete(z);
    zbuf_pool_delete(pool);
    close(b);
}

Test(stream, receive_without_pool_uses_library_buffers)
{
    int a, b;
    st_tcp_pair(&a, &b);
    char data[5000];
    st_fill(data, sizeof data, 0);
    cr_assert_eq(write(a, data, sizeof data), (ssize_t)sizeof data);
    usleep(10000);
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_sock_recv(b, NULL, 10000, 0, z), 5000);
    char out[5000];
    cr_assert_eq(zbuf_copyout(z, 0, out, 5000), 5000);
    cr_assert_eq(st_mismatch(out, 5000, 0), (size_t)-1);
    zbuf_delete(z);
    close(a);
    close(b);
}
