/* SPDX-License-Identifier: MIT */
/*
 * Helpers of the socket adapter's tests: loopback socket pairs, a byte
 * pattern whose every offset is checkable, a draining reader thread, and
 * atomic callback counters (release callbacks may run on the completion
 * thread).
 */
#ifndef ZBUF_SOCK_TEST_UTIL_H
#define ZBUF_SOCK_TEST_UTIL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <netinet/in.h>

/* A connected TCP pair on 127.0.0.1: *a is the connecting side, *b the
 * accepted one.  Asserts on failure. */
void st_tcp_pair(int *a, int *b);
/* Two UDP sockets on 127.0.0.1, each connected to the other unless
 * `connected` is false; *addr_b receives b's address. */
void st_udp_pair(int *a, int *b, bool connected, struct sockaddr_in *addr_b);
/* O_NONBLOCK on or off. */
void st_nonblock(int fd, bool on);
/* Socket buffer sizes (0 leaves one alone). */
void st_bufsizes(int fd, int sndbuf, int rcvbuf);

/* The pattern byte at stream offset `off` (period 251, a prime, so that
 * shifted or duplicated runs show). */
static inline uint8_t st_pat(uint64_t off)
{
    return (uint8_t)((off * 7u + (off >> 9)) % 251u);
}
/* Fill dst with the pattern from stream offset `off`. */
void st_fill(void *dst, size_t len, uint64_t off);
/* Index of the first byte of src that differs from the pattern at `off`,
 * or (size_t)-1 when all match. */
size_t st_mismatch(const void *src, size_t len, uint64_t off);

/* A reader thread: reads fd until EOF (or `limit` bytes), checking the
 * pattern, optionally sleeping between reads.  Results after st_reader_join. */
struct st_reader {
    int fd;
    size_t chunk;          /* bytes per read() */
    unsigned delay_us;     /* sleep between reads */
    uint64_t limit;        /* stop after this many bytes (0: until EOF) */
    uint64_t got;          /* bytes read */
    uint64_t bad_at;       /* first mismatching offset, or UINT64_MAX */
    int err;               /* errno of a failed read, 0 at EOF */
    pthread_t tid;
};
void st_reader_start(struct st_reader *r, int fd, size_t chunk, unsigned delay_us);
void st_reader_join(struct st_reader *r);

/* Atomic counter release callback: arg is an atomic_int *. */
void st_count_release(void *data, size_t size, void *arg);

/* A zbuf of `len` pattern bytes from stream offset `off`, made of
 * enrolled buffers of `seg` bytes each (the last shorter), each with
 * st_count_release on `count` and its memory freed by the callback's
 * companion (see st_free_count_release). */
struct zbuf;
struct zbuf *st_pattern_zbuf(size_t len, uint64_t off, size_t seg, atomic_int *count);

/* Milliseconds since some fixed point. */
int64_t st_now_ms(void);

#endif
