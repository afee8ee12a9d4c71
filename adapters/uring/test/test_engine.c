/* SPDX-License-Identifier: MIT */
/*
 * The engine itself: the probe and the fallback to the epoll path (asked
 * for, by the environment, and by a seccomp policy as in containers), a
 * server and a client running entirely on the engine (accept, connect,
 * receive, echo, shutdown), the descriptor for other event loops, wake-ups
 * from other threads, and the calls a callback may not make.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <zbuf/uring.h>

#include "ut.h"

ZT_SUITE(engine);

static bool no_sockets(void *arg)
{
    return zbuf_uring_sock_count(arg) == 0;
}

/* --------------------------------------------------------------- probe */

Test(engine, the_probe_says_what_the_kernel_allows)
{
    zbuf_uring_probe_t p;
    cr_assert_eq(zbuf_uring_probe(NULL), -EINVAL);
    cr_assert_eq(zbuf_uring_probe(&p), 0);
    if (!p.usable) {
        cr_assert_lt(p.error, 0);
        cr_assert_neq(p.reason[0], '\0');
        cr_skip_test("io_uring unusable here: %s", p.reason);
    }
    cr_assert_eq(p.error, 0);
    cr_assert(p.buf_ring);
    cr_log_info("send_zc %d report %d fixed_vectored %d multishot recv %d bundle %d "
                "defer_taskrun %d",
                p.send_zc, p.zc_report_usage, p.zc_fixed_vectored, p.recv_multishot,
                p.recv_bundle, p.defer_taskrun);
}

/* ------------------------------------------------------------ fallback */

/* A short echo over the engine, to prove it works whatever it runs on. */
static void echo_once(zbuf_uring_t *u);

Test(engine, a_disabled_io_uring_falls_back_to_epoll_with_one_log_line)
{
    setenv("ZBUF_URING_DISABLE", "1", 1);
    zbuf_uring_probe_t p;
    zbuf_uring_probe(&p);
    cr_assert(!p.usable);
    struct ut_logged l = { 0 };
    zbuf_uring_opts_t o;
    zbuf_uring_opts_init(&o);
    o.log = ut_log_line;
    o.log_arg = &l;
    zbuf_uring_t *u;
    cr_assert_eq(zbuf_uring_create(&o, &u), 0);
    cr_assert_eq(zbuf_uring_backend(u), ZBUF_URING_BACKEND_EPOLL);
    cr_assert_eq(l.lines, 1);
    cr_assert(strstr(l.last, "io_uring unavailable (disabled by ZBUF_URING_DISABLE=1)") != NULL &&
                  strstr(l.last, "using the epoll path (zbuf-sock)") != NULL,
              "log line: %s", l.last);
    echo_once(u);
    ut_destroy(u);
    o.flags = ZBUF_URING_NO_FALLBACK;
    cr_assert_eq(zbuf_uring_create(&o, &u), -EPERM);
    o.flags = ZBUF_URING_QUIET;
    cr_assert_eq(zbuf_uring_create(&o, &u), 0);
    cr_assert_eq(l.lines, 1, "QUIET logs nothing");
    ut_destroy(u);
}

/* As in a container whose seccomp policy refuses io_uring_setup(2). */
Test(engine, a_seccomp_policy_against_io_uring_falls_back_to_epoll)
{
#if defined(__x86_64__)
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = { .len = sizeof filter / sizeof filter[0], .filter = filter };
    cr_assert_eq(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
        cr_skip_test("cannot install a seccomp filter: %s", strerror(errno));
    zbuf_uring_probe_t p;
    zbuf_uring_probe(&p);
    cr_assert(!p.usable);
    cr_assert_eq(p.error, -EPERM);
    cr_assert(strstr(p.reason, "io_uring_setup") != NULL, "reason: %s", p.reason);
    struct ut_logged l = { 0 };
    zbuf_uring_opts_t o;
    zbuf_uring_opts_init(&o);
    o.log = ut_log_line;
    o.log_arg = &l;
    zbuf_uring_t *u;
    cr_assert_eq(zbuf_uring_create(&o, &u), 0);
    cr_assert_eq(zbuf_uring_backend(u), ZBUF_URING_BACKEND_EPOLL);
    cr_assert_eq(l.lines, 1);
    cr_log_info("%s", l.last);
    echo_once(u);
    ut_destroy(u);
#else
    cr_skip_test("the seccomp filter of this test is written for x86_64");
#endif
}

/* ---------------------------------------------- a server on the engine */

struct server {
    zbuf_uring_t *u;
    zbuf_uring_bufring_t *br;
    zbuf_uring_sock_t *conn;
    int accepted;
    int echoed;
    bool eof;
};

static void server_recv(zbuf_uring_sock_t *s, ssize_t n, zbuf_t *z, const zbuf_uring_rx_t *rx,
                        void *arg)
{
    (void)rx;
    struct server *sv = arg;
    if (z == NULL) {
        /* The client is done: finish our side after what is queued. */
        sv->eof = true;
        zbuf_uring_shutdown(s, NULL, NULL);
        return;
    }
    sv->echoed += (int)n;
    cr_assert_eq(zbuf_uring_send(s, z, 0, NULL, NULL), 0); /* the same buffers go back */
}

static void server_accept(zbuf_uring_sock_t *l, int fd, void *arg)
{
    (void)l;
    struct server *sv = arg;
    cr_assert_geq(fd, 0, "accept: %s", zbuf_strerror(fd));
    sv->accepted++;
    cr_assert_eq(zbuf_uring_sock_open(sv->u, fd, NULL, &sv->conn), 0);
    cr_assert_eq(zbuf_uring_recv_start(sv->conn, sv->br, server_recv, sv), 0);
}

struct status {
    int calls;
    int status;
};

static void got_status(zbuf_uring_sock_t *s, int status, void *arg)
{
    (void)s;
    struct status *st = arg;
    st->calls++;
    st->status = status;
}

static bool status_called(void *arg)
{
    return ((struct status *)arg)->calls > 0;
}

static bool sink_ended(void *arg)
{
    return ((struct ut_sink *)arg)->end <= 0;
}

static void run_echo(zbuf_uring_t *u, uint64_t total)
{
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(16384, 64, &pool), 0);
    struct server sv = { .u = u };
    cr_assert_eq(zbuf_uring_bufring_create(u, pool, 0, &sv.br), 0);
    /* The listener. */
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t sl = sizeof sa;
    cr_assert_eq(bind(lfd, (struct sockaddr *)&sa, sizeof sa), 0);
    cr_assert_eq(listen(lfd, 16), 0);
    cr_assert_eq(getsockname(lfd, (struct sockaddr *)&sa, &sl), 0);
    zbuf_uring_sock_t *l;
    cr_assert_eq(zbuf_uring_sock_open(u, lfd, NULL, &l), 0);
    cr_assert_eq(zbuf_uring_accept_start(l, server_accept, &sv), 0);
    cr_assert_eq(zbuf_uring_accept_start(l, server_accept, &sv), -EALREADY);
    /* The client, connected through the engine. */
    int cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    zbuf_uring_sock_t *c;
    cr_assert_eq(zbuf_uring_sock_open(u, cfd, NULL, &c), 0);
    struct status cs = { 0 };
    cr_assert_eq(zbuf_uring_connect(c, (struct sockaddr *)&sa, sizeof sa, got_status, &cs), 0);
    ut_run_until(u, status_called, &cs, 10000, "the connection");
    cr_assert_eq(cs.status, 0, "connect: %s", zbuf_strerror(cs.status));
    struct ut_sink k;
    ut_sink_init(&k);
    cr_assert_eq(zbuf_uring_recv_start(c, sv.br, ut_sink_cb, &k), 0);
    atomic_int rel = 0;
    uint64_t off = 0;
    while (off < total) {
        size_t n = 1 + (size_t)(off * 31 % 40000);
        if (n > total - off)
            n = (size_t)(total - off);
        cr_assert_eq(zbuf_uring_send(c, st_pattern_zbuf(n, off, 4096, &rel), 0, NULL, NULL), 0);
        off += n;
        if (zbuf_uring_send_queued(c) > (1u << 20))
            zbuf_uring_run(u, 10);
    }
    struct status shut = { 0 };
    cr_assert_eq(zbuf_uring_shutdown(c, got_status, &shut), 0);
    ut_run_until(u, sink_ended, &k, 30000, "the echo and its end");
    cr_assert_eq(k.end, 0, "client receive: %s", zbuf_strerror((int)k.end));
    cr_assert_eq(k.got, total);
    cr_assert_eq(k.bad_at, UINT64_MAX);
    cr_assert_eq(shut.calls, 1);
    cr_assert_eq(shut.status, 0);
    cr_assert_eq(sv.accepted, 1);
    cr_assert(sv.eof);
    cr_assert_eq(zbuf_uring_accept_stop(l), 0);
    zbuf_uring_sock_close(l, 1000, NULL, NULL);
    zbuf_uring_sock_close(c, 1000, NULL, NULL);
    zbuf_uring_sock_close(sv.conn, 1000, NULL, NULL);
    ut_run_until(u, no_sockets, u, 10000, "the closes");
    cr_assert_eq(zbuf_uring_bufring_delete(sv.br), 0);
    zbuf_pool_delete(pool);
}

static void echo_once(zbuf_uring_t *u)
{
    run_echo(u, 100000);
}

UT_BOTH(engine, a_server_and_a_client_run_entirely_on_the_engine)
{
    zbuf_uring_t *u = ut_engine(be);
    run_echo(u, 4u << 20);
    zbuf_uring_stats_t st;
    zbuf_uring_get_stats(u, &st);
    cr_assert_gt(st.enters, 0);
    if (be == ZBUF_URING_BACKEND_IO_URING)
        cr_assert_gt(st.sqes, 0);
    cr_assert_gt(st.cqes, 0);
    ut_destroy(u);
}

UT_BOTH(engine, a_refused_connection_is_reported)
{
    zbuf_uring_t *u = ut_engine(be);
    /* A port nobody listens on: bind one, close it. */
    int tmp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t sl = sizeof sa;
    cr_assert_eq(bind(tmp, (struct sockaddr *)&sa, sizeof sa), 0);
    cr_assert_eq(getsockname(tmp, (struct sockaddr *)&sa, &sl), 0);
    close(tmp);
    zbuf_uring_sock_t *c;
    cr_assert_eq(zbuf_uring_sock_open(u, socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), NULL, &c),
                 0);
    struct status cs = { 0 };
    cr_assert_eq(zbuf_uring_connect(c, (struct sockaddr *)&sa, sizeof sa, got_status, &cs), 0);
    ut_run_until(u, status_called, &cs, 10000, "the refusal");
    cr_assert_eq(cs.status, -ECONNREFUSED, "connect: %s", zbuf_strerror(cs.status));
    zbuf_uring_sock_close(c, 1000, NULL, NULL);
    ut_run_until(u, no_sockets, u, 10000, "the close");
    ut_destroy(u);
}

/* ------------------------------------------------- other loops, threads */

UT_BOTH(engine, its_descriptor_becomes_readable_when_there_is_work)
{
    struct ut_rx x;
    ut_rx_open(&x, be, 4096, 8, 0, false);
    zbuf_uring_t *u = x.u;
    int fd = zbuf_uring_fd(u);
    cr_assert_geq(fd, 0);
    cr_assert_eq(zbuf_uring_fd(u), fd, "one descriptor");
    struct ut_sink k;
    ut_sink_init(&k);
    cr_assert_eq(zbuf_uring_recv_start(x.s, x.br, ut_sink_cb, &k), 0);
    cr_assert_geq(zbuf_uring_submit(u), 0);
    zbuf_uring_run(u, 0);
    struct pollfd p = { .fd = fd, .events = POLLIN };
    cr_assert_eq(poll(&p, 1, 50), 0, "readable with nothing to do");
    uint8_t buf[1000];
    st_fill(buf, sizeof buf, 0);
    cr_assert_eq(write(x.peer, buf, sizeof buf), (ssize_t)sizeof buf);
    cr_assert_eq(poll(&p, 1, 5000), 1, "not readable after data arrived");
    int64_t t0 = st_now_ms();
    while (k.got < sizeof buf && st_now_ms() - t0 < 5000)
        zbuf_uring_run(u, 0);
    cr_assert_eq(k.got, sizeof buf);
    cr_assert_eq(k.bad_at, UINT64_MAX);
    ut_rx_close(&x);
}

struct waker {
    zbuf_uring_t *u;
    pthread_t tid;
};

static void *wake_later(void *arg)
{
    struct waker *w = arg;
    usleep(50000);
    zbuf_uring_wake(w->u);
    return NULL;
}

UT_BOTH(engine, a_wake_from_another_thread_ends_a_wait)
{
    zbuf_uring_t *u = ut_engine(be);
    zbuf_uring_run(u, 0);
    struct waker w = { .u = u };
    cr_assert_eq(pthread_create(&w.tid, NULL, wake_later, &w), 0);
    int64_t t0 = st_now_ms();
    while (st_now_ms() - t0 < 20000) {
        zbuf_uring_stats_t st;
        zbuf_uring_get_stats(u, &st);
        if (st.wakes > 0)
            break;
        zbuf_uring_run(u, 20000);
    }
    pthread_join(w.tid, NULL);
    cr_assert_lt(st_now_ms() - t0, 10000, "the wake-up did not end the wait");
    cr_assert_eq(zbuf_uring_wake(NULL), -EINVAL);
    ut_destroy(u);
}

/* -------------------------------------------------- re-entrance refused */

struct reenter {
    zbuf_uring_t *u;
    int run_rc, destroy_rc;
    bool called;
};

static void reenter_cb(zbuf_uring_sock_t *s, ssize_t n, zbuf_t *z, const zbuf_uring_rx_t *rx,
                       void *arg)
{
    (void)s;
    (void)n;
    (void)rx;
    struct reenter *r = arg;
    r->run_rc = zbuf_uring_run(r->u, 0);
    r->destroy_rc = zbuf_uring_destroy(r->u, 0);
    r->called = true;
    zbuf_delete(z);
}

static bool reentered(void *arg)
{
    return ((struct reenter *)arg)->called;
}

UT_BOTH(engine, run_and_destroy_from_a_callback_are_refused)
{
    struct ut_rx x;
    ut_rx_open(&x, be, 4096, 8, 0, false);
    struct reenter r = { .u = x.u };
    cr_assert_eq(zbuf_uring_recv_start(x.s, x.br, reenter_cb, &r), 0);
    cr_assert_eq(write(x.peer, "hello", 5), 5);
    ut_run_until(x.u, reentered, &r, 5000, "the callback");
    cr_assert_eq(r.run_rc, -EBUSY);
    cr_assert_eq(r.destroy_rc, -EBUSY);
    ut_rx_close(&x);
}
