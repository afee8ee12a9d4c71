/* SPDX-License-Identifier: MIT */
/*
 * Helpers for the libuv adapter's tests: a loop per test with a time bound,
 * connected stream pairs over loopback TCP, Unix domain sockets and
 * anonymous pipes, and orderly teardown that proves nothing is left open.
 */
#ifndef ZBUF_UV_TEST_UVT_H
#define ZBUF_UV_TEST_UVT_H

#include <stdbool.h>
#include <stdint.h>

#include <zbuf/frame.h>
#include <zbuf/uv.h>

#include "support.h"

/* Kinds of stream pair. */
enum uvt_kind {
    UVT_TCP,  /* loopback TCP: a connected client and the accepted server side */
    UVT_UNIX, /* a Unix domain socketpair, both ends libuv pipes */
    UVT_PIPE, /* an anonymous pipe: a is the write end, b the read end */
};

/* Two connected streams: bytes written to a arrive at b (and, except for
 * UVT_PIPE, the other way round). */
struct uvt_pair {
    zbuf_uv_stream_t a, b;
    int closed;    /* close callbacks seen, 0..2 */
};

/* The loop of the running test (initialised by uvt_setup()). */
extern uv_loop_t *uvt_loop;

/* Create the loop; call first in each test (or from .init). */
void uvt_setup(void);
/* Run every remaining handle to closure and assert uv_loop_close() == 0. */
void uvt_teardown(void);

/* Run the loop until *flag is non-zero or ms milliseconds pass; asserts it
 * became non-zero. */
void uvt_run_until(const int *flag, unsigned ms, const char *what);
/* Run the loop until pred(arg) is true or ms milliseconds pass. */
bool uvt_run_while(bool (*pred)(void *arg), void *arg, unsigned ms);
/* Run the loop for about ms milliseconds. */
void uvt_run_for(unsigned ms);

/* Connect a pair of the given kind (asserting success). */
void uvt_pair_open(struct uvt_pair *p, enum uvt_kind kind);
/* Close both ends with zbuf_uv_close() and run the loop until they are
 * closed. */
void uvt_pair_close(struct uvt_pair *p);
/* Name of a kind, for messages. */
const char *uvt_kind_name(enum uvt_kind kind);

/* Deterministic test data: byte i of stream `seed`. */
static inline uint8_t uvt_byte(uint32_t seed, size_t i)
{
    uint32_t x = (uint32_t)i * 2654435761u + seed * 40503u;
    return (uint8_t)(x >> 24 ^ x >> 11 ^ x);
}
void uvt_fill(uint8_t *p, size_t len, uint32_t seed, size_t from);

/* A zbuf of len bytes of stream `seed` (from byte `from`) made of segments
 * whose sizes cycle through sizes[0..nsizes-1]; each segment an enrolled
 * caller buffer whose release is counted in *released (may be NULL). */
zbuf_t *uvt_make(size_t len, uint32_t seed, size_t from, const size_t *sizes, size_t nsizes,
                 int *released);

/* A sink collecting every byte read from a stream through the adapter. */
struct uvt_sink {
    uint8_t *data;
    size_t len, cap;
    int reads;       /* positive read callbacks */
    int eof;         /* UV_EOF callbacks */
    int enobufs;     /* UV_ENOBUFS callbacks */
    int errors;      /* other negative callbacks */
    ssize_t last_error;
    bool hold;       /* keep the zbufs instead of deleting them */
    zbuf_t *held[4096];
    int nheld;
};
/* Start reading s into k (k is stored in the handle's data). */
void uvt_sink_start(zbuf_uv_stream_t *s, struct uvt_sink *k, zbuf_pool_t *pool);
void uvt_sink_free(struct uvt_sink *k);
/* Delete the zbufs the sink holds (outside any read callback). */
void uvt_sink_release(struct uvt_sink *k);
/* Run the loop until the sink holds at least len bytes, or saw EOF or an
 * error, or ms milliseconds pass. */
void uvt_sink_wait(struct uvt_sink *k, size_t len, unsigned ms);
/* Assert the sink holds exactly len bytes of stream `seed`. */
void uvt_sink_expect(const struct uvt_sink *k, size_t len, uint32_t seed);

/* Suite whose tests each get a fresh loop, and end with every handle
 * closed (uv_loop_close() == 0) and the zbuf live counters at baseline. */
void uvt_init(void);
void uvt_fini(void);
#define UVT_SUITE(name) TestSuite(name, .init = uvt_init, .fini = uvt_fini, .timeout = 120)

/* Suite of the codec alone (no loop): the leak check of ZT_SUITE, after
 * the test thread's header slabs were given back. */
void uvt_codec_fini(void);
#define UVT_CODEC_SUITE(name) TestSuite(name, .init = zt_leak_baseline, .fini = uvt_codec_fini)

#endif
