/* SPDX-License-Identifier: MIT */
/*
 * Helpers of zbuf-uring's tests: an engine of either machinery (io_uring
 * tests skip, saying why, where io_uring is unusable), running it until a
 * condition holds, and a receiving side that checks the byte pattern of
 * sock_test_util.h.  Every test runs once per machinery (UT_BOTH).
 */
#ifndef ZBUF_URING_TEST_UT_H
#define ZBUF_URING_TEST_UT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <zbuf/uring.h>

#include "sock_test_util.h"
#include "support.h"

/* An engine on machinery `be`; skips the test when io_uring is asked for
 * and unusable (or lacks `need`: "zc", "report", "fixed"). */
zbuf_uring_t *ut_engine(zbuf_uring_backend_t be);
void ut_require(const char *need);

/* Run u until pred(arg) holds; fails the test after ms milliseconds. */
void ut_run_until(zbuf_uring_t *u, bool (*pred)(void *), void *arg, int ms, const char *what);
/* Destroy u and assert it went cleanly (0). */
void ut_destroy(zbuf_uring_t *u);

/* A receiving side on the engine: counts bytes, checks the pattern from
 * offset 0, deletes each zbuf (optionally holding up to `hold` of them). */
struct ut_sink {
    uint64_t got;
    uint64_t bad_at;     /* first wrong offset, UINT64_MAX */
    ssize_t end;         /* 1: running; 0: end of stream; < 0: error */
    unsigned calls;
    size_t maxsegs;      /* most segments seen in one zbuf */
    unsigned hold;       /* keep this many zbufs before deleting them all */
    unsigned nheld;
    struct zbuf *held[4096];
};
void ut_sink_init(struct ut_sink *k);
void ut_sink_cb(zbuf_uring_sock_t *s, ssize_t n, struct zbuf *z, const zbuf_uring_rx_t *rx, void *arg);
void ut_sink_release(struct ut_sink *k);
bool ut_sink_has(void *k_and_want); /* see ut_want */

struct ut_want {
    struct ut_sink *k;
    uint64_t bytes;
};

/* A receiving socket on the engine: a pool of `count` buffers of `size`
 * bytes, a ring of `entries` (0: the pool's count) over it, and a loopback
 * pair (TCP, or unconnected UDP) whose first end the engine owns as `s`. */
struct ut_rx {
    zbuf_uring_t *u;
    struct zbuf_pool *pool;
    zbuf_uring_bufring_t *br;
    zbuf_uring_sock_t *s;
    int peer;                     /* the other end, a plain socket */
};
void ut_rx_open(struct ut_rx *x, zbuf_uring_backend_t be, size_t size, size_t count,
                unsigned entries, bool udp);
/* Close everything, checking that the ring could not be deleted while the
 * socket used it and that every buffer came back to the pool. */
void ut_rx_close(struct ut_rx *x);

/* Log callback collecting the engine's lines. */
struct ut_logged {
    int lines;
    char last[400];
};
void ut_log_line(void *arg, const char *line);

/* Send-callback recorder. */
struct ut_sent {
    int calls;
    int status;          /* last non-zero status */
    int errors;
    size_t unsent;       /* bytes given back */
};
void ut_sent_cb(zbuf_uring_sock_t *s, int status, struct zbuf *unsent, void *arg);

/* Run both machineries of one test body. */
#define UT_BOTH(suite, name, ...)                                                               \
    static void name##_body(zbuf_uring_backend_t be);                                          \
    Test(suite, name##_io_uring, ##__VA_ARGS__) { name##_body(ZBUF_URING_BACKEND_IO_URING); }  \
    Test(suite, name##_epoll, ##__VA_ARGS__) { name##_body(ZBUF_URING_BACKEND_EPOLL); }        \
    static void name##_body(zbuf_uring_backend_t be)

#endif
