/* SPDX-License-Identifier: MIT */
/*
 * The VxWorks zbufSockLib routines running on the io_uring engine
 * (zbuf_uring_vx_init()): the same contract as on their own path
 * (ownership, free routines exactly once, EWOULDBLOCK keeps the zbuf, a
 * zbuf sent whole, datagrams with addresses), free routines run at the
 * notification on the engine's thread, and the fallback when io_uring is
 * unusable.  Each test is its own process (Criterion), so each starts the
 * engine afresh.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zbuf/vxworks_sock.h>

#include <zbuf/uring.h>

#include "ut.h"

/* The layer's receive pool and the engine's live as long as the process
 * (or the engine): start them before the leak baseline is taken. */
static void vx_setup(void)
{
    zbufSockLibInit();
}
TestSuite(vx, .init = vx_setup);

static atomic_int freed;

static void freeRtn(caddr_t buf, int freeArg)
{
    (void)freeArg;
    free(buf);
    atomic_fetch_add(&freed, 1);
}

static char *pattern_buf(size_t len, uint64_t off)
{
    char *p = malloc(len);
    st_fill(p, len, off);
    return p;
}

static void wait_freed(int want)
{
    int64_t t0 = st_now_ms();
    while (atomic_load(&freed) < want && st_now_ms() - t0 < 10000)
        usleep(1000);
    cr_assert_eq(atomic_load(&freed), want, "free routines: %d of %d", atomic_load(&freed), want);
}

static void start(void)
{
    ut_require("zc");
    int rc = zbuf_uring_vx_init(NULL);
    cr_assert_eq(rc, ZBUF_URING_BACKEND_IO_URING, "zbuf_uring_vx_init: %d", rc);
    cr_assert_eq(zbuf_uring_vx_init(NULL), ZBUF_URING_BACKEND_IO_URING, "again: the same");
}

Test(vx, sends_go_through_the_engine_and_free_routines_run_once)
{
    start();
    int a, b;
    st_tcp_pair(&a, &b);
    struct st_reader r = { 0 };
    st_reader_start(&r, b, 65536, 0);
    atomic_store(&freed, 0);
    uint64_t off = 0;
    int bufs = 0;
    for (int i = 0; i < 50; i++) {
        size_t len = 1000 + (size_t)i * 4000; /* below and above 16 KiB */
        ZBUF_ID z = zbufCreate();
        for (size_t done = 0; done < len; done += 8192) {
            size_t n = len - done < 8192 ? len - done : 8192;
            cr_assert_not_null(zbufInsertBuf(z, NULL, ZBUF_END, pattern_buf(n, off + done), (int)n,
                                             (VOIDFUNCPTR)freeRtn, 0));
            bufs++;
        }
        cr_assert_eq(zbufSockSend(a, z, (int)len, 0), (int)len);
        off += len;
        char *one = pattern_buf(3000, off);
        cr_assert_eq(zbufSockBufSend(a, one, 3000, (VOIDFUNCPTR)freeRtn, 1, 0), 3000);
        off += 3000;
        bufs++;
    }
    shutdown(a, SHUT_WR);
    st_reader_join(&r);
    cr_assert_eq(r.got, off);
    cr_assert_eq(r.bad_at, UINT64_MAX);
    wait_freed(bufs);
    close(a);
    close(b);
    cr_assert_eq(zbuf_uring_vx_shutdown(1000), 0);
}

Test(vx, receives_come_from_the_ring_and_go_back_when_deleted)
{
    start();
    int a, b;
    st_tcp_pair(&a, &b);
    char out[50000];
    st_fill(out, sizeof out, 0);
    cr_assert_eq(write(b, out, sizeof out), (ssize_t)sizeof out);
    shutdown(b, SHUT_WR);
    uint64_t got = 0;
    for (;;) {
        int len = 20000;
        ZBUF_ID z = zbufSockRecv(a, 0, &len);
        if (z == NULL) {
            cr_assert_eq(errno, 0, "recv: %s", strerror(errno));
            break;
        }
        cr_assert_gt(len, 0);
        cr_assert_leq(len, 20000);
        char in[20000];
        cr_assert_eq(zbufExtractCopy(z, NULL, 0, in, len), len);
        cr_assert_eq(st_mismatch(in, (size_t)len, got), (size_t)-1);
        got += (uint64_t)len;
        zbufDelete(z);
    }
    cr_assert_eq(got, sizeof out);
    close(a);
    close(b);
    cr_assert_eq(zbuf_uring_vx_shutdown(1000), 0);
}

Test(vx, datagrams_keep_their_addresses)
{
    start();
    int a, b;
    struct sockaddr_in to_b;
    st_udp_pair(&a, &b, false, &to_b);
    atomic_store(&freed, 0);
    for (int i = 0; i < 20; i++) {
        int len = 100 + i * 1000;
        char *buf = pattern_buf((size_t)len, 0);
        cr_assert_eq(zbufSockBufSendto(a, buf, len, (VOIDFUNCPTR)freeRtn, 0, 0,
                                       (struct sockaddr *)&to_b, sizeof to_b),
                     len);
        struct sockaddr_in from;
        int fromlen = sizeof from;
        int rlen = 65536;
        ZBUF_ID z = zbufSockRecvfrom(b, 0, &rlen, (struct sockaddr *)&from, &fromlen);
        cr_assert_not_null(z, "recvfrom: %s", strerror(errno));
        cr_assert_eq(rlen, len);
        cr_assert_eq(fromlen, (int)sizeof from);
        char in[20000];
        cr_assert_eq(zbufExtractCopy(z, NULL, 0, in, rlen), rlen);
        cr_assert_eq(st_mismatch(in, (size_t)rlen, 0), (size_t)-1);
        zbufDelete(z);
    }
    wait_freed(20);
    close(a);
    close(b);
    cr_assert_eq(zbuf_uring_vx_shutdown(1000), 0);
}

Test(vx, ewouldblock_leaves_the_zbuf_with_the_caller)
{
    start();
    int a, b;
    st_tcp_pair(&a, &b);
    st_bufsizes(a, 4096, 0);
    st_bufsizes(b, 0, 4096);
    st_nonblock(a, true);
    char junk[4096] = { 0 };
    while (send(a, junk, sizeof junk, MSG_DONTWAIT) > 0)
        ;
    atomic_store(&freed, 0);
    char *buf = pattern_buf(20000, 0);
    ZBUF_ID z = zbufCreate();
    cr_assert_not_null(zbufInsertBuf(z, NULL, 0, buf, 20000, (VOIDFUNCPTR)freeRtn, 0));
    cr_assert_eq(zbufSockSend(a, z, 20000, 0), ERROR);
    cr_assert_eq(errno, EWOULDBLOCK);
    cr_assert_eq(zbufLength(z), 20000, "the caller keeps the whole zbuf");
    char in[20000];
    cr_assert_eq(zbufExtractCopy(z, NULL, 0, in, 20000), 20000);
    cr_assert_eq(st_mismatch(in, 20000, 0), (size_t)-1);
    cr_assert_eq(atomic_load(&freed), 0);
    zbufDelete(z);
    cr_assert_eq(atomic_load(&freed), 1);
    close(a);
    close(b);
    cr_assert_eq(zbuf_uring_vx_shutdown(1000), 0);
}

Test(vx, closing_right_after_a_send_still_frees_the_buffer_once)
{
    start();
    atomic_store(&freed, 0);
    for (int i = 0; i < 20; i++) {
        int a, b;
        st_tcp_pair(&a, &b);
        char *buf = pattern_buf(100000, 0);
        cr_assert_eq(zbufSockBufSend(a, buf, 100000, (VOIDFUNCPTR)freeRtn, 0, 0), 100000);
        close(a);
        char in[65536];
        uint64_t got = 0;
        ssize_t n;
        while ((n = read(b, in, sizeof in)) > 0)
            got += (uint64_t)n;
        cr_assert_eq(got, 100000);
        close(b);
    }
    wait_freed(20);
    cr_assert_eq(zbuf_uring_vx_shutdown(1000), 0);
}

Test(vx, after_shutdown_the_routines_run_on_their_own_path)
{
    start();
    cr_assert_eq(zbuf_uring_vx_shutdown(1000), 0);
    cr_assert_eq(zbuf_uring_vx_shutdown(1000), 0, "twice is harmless");
    int a, b;
    st_tcp_pair(&a, &b);
    atomic_store(&freed, 0);
    char *buf = pattern_buf(5000, 0);
    cr_assert_eq(zbufSockBufSend(a, buf, 5000, (VOIDFUNCPTR)freeRtn, 0, 0), 5000);
    cr_assert_eq(atomic_load(&freed), 1, "copied on the plain path: freed at once");
    char in[5000];
    cr_assert_eq(read(b, in, sizeof in), 5000);
    close(a);
    close(b);
}

Test(vx, without_io_uring_the_routines_stay_on_the_epoll_path_and_say_so)
{
    setenv("ZBUF_URING_DISABLE", "1", 1);
    struct ut_logged l = { 0 };
    zbuf_uring_opts_t o;
    zbuf_uring_opts_init(&o);
    o.log = ut_log_line;
    o.log_arg = &l;
    cr_assert_eq(zbuf_uring_vx_init(&o), ZBUF_URING_BACKEND_EPOLL);
    cr_assert_eq(l.lines, 1);
    cr_assert(strstr(l.last, "zbufSockLib stays on the epoll path") != NULL, "%s", l.last);
    int a, b;
    st_tcp_pair(&a, &b);
    atomic_store(&freed, 0);
    char *buf = pattern_buf(5000, 0);
    cr_assert_eq(zbufSockBufSend(a, buf, 5000, (VOIDFUNCPTR)freeRtn, 0, 0), 5000);
    char in[5000];
    cr_assert_eq(read(b, in, sizeof in), 5000);
    cr_assert_eq(st_mismatch(in, 5000, 0), (size_t)-1);
    close(a);
    close(b);
    cr_assert_eq(zbuf_uring_vx_shutdown(0), 0);
}
