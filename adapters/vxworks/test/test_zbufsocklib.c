/* SPDX-License-Identifier: MIT */
/*
 * The VxWorks zbufSockLib layer: ownership of sent zbufs, free routines
 * exactly once, EWOULDBLOCK leaves the zbuf (or buffer) with the caller,
 * receives into zbufs, datagrams with addresses, and the 1995 pattern of a
 * program waiting in its own buffer pool for free routines, with zero copy
 * forced on so that only the completion thread can hand buffers back.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <semaphore.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zbuf/vxworks_sock.h>

#include "sock_test_util.h"
#include "support.h"

/* The layer's receive pool lives as long as the process: create it before
 * the leak baseline is taken. */
static void vx_init(void)
{
    zbufSockLibInit();
    zt_leak_baseline();
}
TestSuite(vxworks, .init = vx_init, .fini = zt_assert_no_leaks);

static atomic_int freed;
static atomic_intptr_t last_arg;

static void freeRtn(caddr_t buf, int freeArg)
{
    (void)buf;
    atomic_store(&last_arg, freeArg);
    atomic_fetch_add(&freed, 1);
}

/* Wait up to @p ms for @p want free routines: after a zero-copy send they
 * run on the notification thread, possibly after the reader has every
 * byte.  The caller asserts the exact count. */
static void wait_freed(int want, int64_t ms)
{
    int64_t t0 = st_now_ms();
    while (atomic_load(&freed) < want && st_now_ms() - t0 < ms)
        usleep(1000);
}

static char *pattern_buf(size_t len, uint64_t off)
{
    char *p = malloc(len);
    st_fill(p, len, off);
    return p;
}

Test(vxworks, send_consumes_the_zbuf_and_the_free_routine_runs_once)
{
    cr_assert_eq(zbufSockLibInit(), OK);
    cr_assert_eq(zbufSockLibInit(), OK, "harmless to call twice");
    int a, b;
    st_tcp_pair(&a, &b);
    struct st_reader r = { 0 };
    st_reader_start(&r, b, 65536, 0);
    atomic_store(&freed, 0);
    char *buf = pattern_buf(5000, 0);
    ZBUF_ID z = zbufCreate();
    cr_assert_not_null(zbufInsertBuf(z, NULL, 0, buf, 5000, (VOIDFUNCPTR)freeRtn, 42));
    cr_assert_eq(zbufSockSend(a, z, 5000, 0), 5000);
    cr_assert_eq(atomic_load(&freed), 1, "the kernel copied: the buffer is free at once");
    cr_assert_eq(atomic_load(&last_arg), 42);
    cr_assert_eq(zbufLength(z), ERROR, "the zbuf belongs to the library now");
    shutdown(a, SHUT_WR);
    st_reader_join(&r);
    cr_assert_eq(r.got, 5000);
    cr_assert_eq(r.bad_at, UINT64_MAX);
    free(buf);
    close(a);
    close(b);
}

Test(vxworks, blaster_pattern_dup_of_a_master_per_send)
{
    int a, b;
    st_tcp_pair(&a, &b);
    struct st_reader r = { 0 };
    st_reader_start(&r, b, 65536, 0);
    atomic_store(&freed, 0);
    const int size = 64 * 1024;
    /* Every message is the same bytes: the pattern from 0 repeats. */
    char *buf = pattern_buf((size_t)size, 0);
    ZBUF_ID master = zbufCreate();
    cr_assert_not_null(zbufInsertBuf(master, NULL, 0, buf, size, (VOIDFUNCPTR)freeRtn, 7));
    for (int i = 0; i < 100; i++) {
        ZBUF_ID z = zbufDup(master, NULL, 0, size);
        cr_assert_not_null(z);
        cr_assert_eq(zbufSockSend(a, z, size, 0), size);
    }
    cr_assert_eq(atomic_load(&freed), 0, "the master still holds the buffer");
    zbufDelete(master);
    shutdown(a, SHUT_WR);
    st_reader_join(&r);
    cr_assert_eq(r.got, 100 * (uint64_t)size);
    wait_freed(1, 5000); /* 64 KiB sends may go zero copy */
    cr_assert_eq(atomic_load(&freed), 1);
    free(buf);
    close(a);
    close(b);
}

Test(vxworks, buf_send_passes_a_pointer_sized_free_arg)
{
    int a, b;
    st_tcp_pair(&a, &b);
    atomic_store(&freed, 0);
    char *buf = pattern_buf(100, 0);
    static int ctx;
    cr_assert_eq(zbufSockBufSend(a, buf, 100, (VOIDFUNCPTR)freeRtn, (intptr_t)&ctx, 0), 100);
    cr_assert_eq(atomic_load(&freed), 1);
    char in[100];
    cr_assert_eq(read(b, in, 100), 100);
    cr_assert_eq(st_mismatch(in, 100, 0), (size_t)-1);
    free(buf);
    close(a);
    close(b);
}

Test(vxworks, ewouldblock_leaves_the_zbuf_and_the_buffer_with_the_caller)
{
    int a, b;
    st_tcp_pair(&a, &b);
    st_bufsizes(a, 4096, 0);
    st_nonblock(a, true);
    atomic_store(&freed, 0);
    /* Fill the socket with plain writes until it would block. */
    char *fill = pattern_buf(65536, 0);
    int full = 0;
    for (int i = 0; i < 10000 && !full; i++)
        full = write(a, fill, 65536) < 0 && errno == EAGAIN;
    cr_assert(full);
    ZBUF_ID z = zbufCreate();
    zbufInsertCopy(z, NULL, 0, fill, 4096);
    cr_assert_eq(zbufSockSend(a, z, 4096, 0), ERROR);
    cr_assert_eq(errno, EWOULDBLOCK);
    cr_assert_eq(zbufLength(z), 4096, "EWOULDBLOCK: the caller keeps its zbuf");
    zbufDelete(z);
    char *buf = pattern_buf(1000, 0);
    cr_assert_eq(zbufSockBufSend(a, buf, 1000, (VOIDFUNCPTR)freeRtn, 1, 0), ERROR);
    cr_assert_eq(errno, EWOULDBLOCK);
    cr_assert_eq(atomic_load(&freed), 0, "no free routine for a send the caller keeps");
    ZBUF_ID bad = NULL;
    cr_assert_eq(zbufSockSend(a, bad, 10, 0), ERROR);
    cr_assert_eq(errno, EINVAL);
    free(buf);
    free(fill);
    close(a);
    close(b);
}

Test(vxworks, a_failed_send_still_frees_the_buffer_once)
{
    int a, b;
    st_tcp_pair(&a, &b);
    struct linger lg = { 1, 0 };
    setsockopt(b, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(b); /* reset */
    /* Wait until the reset has reached `a` (readable with an error): on a
     * loaded machine the loopback may deliver it later than any fixed sleep,
     * and the sends below would then all go into the socket buffer. */
    struct pollfd pf = { .fd = a, .events = POLLIN };
    cr_assert_eq(poll(&pf, 1, 10000), 1, "the reset never arrived");
    atomic_store(&freed, 0);
    char *buf = pattern_buf(1000, 0);
    int r = OK;
    for (int i = 0; i < 10 && r != ERROR; i++) {
        r = zbufSockBufSend(a, buf, 1000, (VOIDFUNCPTR)freeRtn, 3, 0);
        cr_assert_eq(atomic_load(&freed), i + 1, "freed once per send, failed or not");
    }
    cr_assert_eq(r, ERROR);
    cr_assert(errno == ECONNRESET || errno == EPIPE, "errno %d", errno);
    free(buf);
    close(a);
}

Test(vxworks, recv_returns_zbufs_and_null_at_end_of_stream)
{
    int a, b;
    st_tcp_pair(&a, &b);
    char *buf = pattern_buf(100000, 0);
    size_t off = 0;
    while (off < 100000) {
        ssize_t k = write(a, buf + off, 100000 - off);
        cr_assert(k > 0);
        off += (size_t)k;
    }
    close(a);
    char *got = malloc(100000);
    size_t total = 0;
    for (;;) {
        int len = 30000;
        ZBUF_ID z = zbufSockRecv(b, 0, &len);
        if (z == NULL) {
            cr_assert_eq(len, 0);
            cr_assert_eq(errno, 0, "end of stream, not an error");
            break;
        }
        cr_assert(len > 0 && len <= 30000);
        cr_assert_eq(zbufLength(z), len);
        cr_assert_eq(zbufExtractCopy(z, NULL, 0, got + total, len), len);
        total += (size_t)len;
        zbufDelete(z);
    }
    cr_assert_eq(total, 100000);
    cr_assert_eq(memcmp(got, buf, 100000), 0);
    int len = 0;
    cr_assert_null(zbufSockRecv(b, 0, &len));
    cr_assert_eq(errno, EINVAL);
    free(got);
    free(buf);
    close(b);
}

Test(vxworks, datagrams_with_addresses)
{
    int a, b;
    struct sockaddr_in addr_b;
    st_udp_pair(&a, &b, false, &addr_b);
    atomic_store(&freed, 0);
    char *buf = pattern_buf(3000, 0);
    ZBUF_ID z = zbufCreate();
    zbufInsertBuf(z, NULL, 0, buf, 1000, (VOIDFUNCPTR)freeRtn, 0);
    zbufInsertBuf(z, NULL, ZBUF_END, buf + 1000, 2000, (VOIDFUNCPTR)freeRtn, 0);
    cr_assert_eq(zbufSockSendto(a, z, 3000, 0, (struct sockaddr *)&addr_b, sizeof addr_b), 3000);
    cr_assert_eq(atomic_load(&freed), 2);
    cr_assert_eq(zbufSockBufSendto(a, buf, 500, (VOIDFUNCPTR)freeRtn, 0, 0,
                                   (struct sockaddr *)&addr_b, sizeof addr_b),
                 500);
    struct sockaddr_in from;
    int fromlen = sizeof from;
    int len = 65536;
    ZBUF_ID in = zbufSockRecvfrom(b, 0, &len, (struct sockaddr *)&from, &fromlen);
    cr_assert_not_null(in);
    cr_assert_eq(len, 3000);
    cr_assert_eq(fromlen, sizeof from);
    struct sockaddr_in addr_a;
    socklen_t l = sizeof addr_a;
    getsockname(a, (struct sockaddr *)&addr_a, &l);
    cr_assert_eq(from.sin_port, addr_a.sin_port);
    char got[3000];
    cr_assert_eq(zbufExtractCopy(in, NULL, 0, got, 3000), 3000);
    cr_assert_eq(st_mismatch(got, 3000, 0), (size_t)-1);
    zbufDelete(in);
    len = 100;
    in = zbufSockRecvfrom(b, 0, &len, NULL, NULL);
    cr_assert_not_null(in);
    cr_assert_eq(len, 100, "truncated to what was asked, like recvfrom()");
    zbufDelete(in);
    free(buf);
    close(a);
    close(b);
}

/* The 1995 article's send side: a pool of fixed buffers that only free
 * routines refill, and a sender that waits on it. */
static sem_t pool_sem;
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static char *pool_bufs[4];
static int pool_free;

static void appBufRetn(caddr_t buf, int arg)
{
    (void)arg;
    pthread_mutex_lock(&pool_lock);
    pool_bufs[pool_free++] = buf;
    pthread_mutex_unlock(&pool_lock);
    atomic_fetch_add(&freed, 1);
    sem_post(&pool_sem);
}

static void force_zero_copy(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    int r = setsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof one);
    close(fd);
    if (r != 0)
        cr_skip_test("kernel without SO_ZEROCOPY");
    zbuf_sock_opts_t o;
    zbuf_sock_opts_init(&o);
    o.flags = ZBUF_SOCK_ZEROCOPY | ZBUF_SOCK_ZEROCOPY_ALWAYS | ZBUF_SOCK_THREAD;
    cr_assert_eq(zbuf_sock_vx_configure(&o), 0);
}

Test(vxworks, waiting_in_an_application_pool_for_free_routines_does_not_deadlock)
{
    force_zero_copy();
    int a, b;
    st_tcp_pair(&a, &b);
    struct st_reader r = { 0 };
    st_reader_start(&r, b, 65536, 0);
    const int size = 64 * 1024;
    sem_init(&pool_sem, 0, 4);
    for (int i = 0; i < 4; i++)
        pool_bufs[i] = malloc((size_t)size);
    pool_free = 4;
    atomic_store(&freed, 0);
    enum { N = 400 };
    for (int i = 0; i < N; i++) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 5;
        cr_assert_eq(sem_timedwait(&pool_sem, &until), 0,
                     "deadlock: no free routine ran within 5 s (send %d)", i);
        pthread_mutex_lock(&pool_lock);
        char *p = pool_bufs[--pool_free];
        pthread_mutex_unlock(&pool_lock);
        st_fill(p, (size_t)size, (uint64_t)i * (uint64_t)size);
        ZBUF_ID z = zbufCreate();
        cr_assert_not_null(zbufInsertBuf(z, NULL, 0, p, size, (VOIDFUNCPTR)appBufRetn, 0));
        cr_assert_eq(zbufSockSend(a, z, size, 0), size);
    }
    /* close() right away, with sends outstanding: the layer's duplicate
     * keeps the socket until the kernel lets go, then it closes for real. */
    close(a);
    wait_freed(N, 10000);
    cr_assert_eq(atomic_load(&freed), N, "every free routine ran exactly once");
    st_reader_join(&r); /* returns at end of stream: the socket really closed */
    cr_assert_eq(r.got, (uint64_t)N * (uint64_t)size);
    cr_assert_eq(r.bad_at, UINT64_MAX);
    for (int i = 0; i < 4; i++)
        free(pool_bufs[i]);
    close(b);
}

Test(vxworks, a_reused_descriptor_number_gets_a_fresh_handle)
{
    force_zero_copy();
    atomic_store(&freed, 0);
    const int size = 32 * 1024;
    char *buf = pattern_buf((size_t)size, 0);
    for (int round = 0; round < 5; round++) {
        int a, b;
        st_tcp_pair(&a, &b);
        struct st_reader r = { 0 };
        st_reader_start(&r, b, 65536, 0);
        cr_assert_eq(zbufSockBufSend(a, buf, size, (VOIDFUNCPTR)freeRtn, round, 0), size);
        close(a); /* the next round's socket is likely to get the same number */
        st_reader_join(&r);
        cr_assert_eq(r.got, (uint64_t)size, "round %d", round);
        cr_assert_eq(r.bad_at, UINT64_MAX);
        close(b);
    }
    wait_freed(5, 5000);
    cr_assert_eq(atomic_load(&freed), 5);
    free(buf);
}
