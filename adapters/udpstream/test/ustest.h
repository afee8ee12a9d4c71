/* SPDX-License-Identifier: MIT */
/*
 * Helpers of the udpstream tests:
 *  - a virtual network: two streams on custom transports joined by queues
 *    with loss, duplication, reordering and delay, on a virtual clock, with
 *    an emulated NIC that lands every datagram in a pool buffer of the
 *    receiving side (so that received bytes are references, as with a
 *    socket, and the sender's buffers are not held by the receiver);
 *  - a transfer driver that writes pattern bytes in random lengths and
 *    segment layouts (each segment an enrolled buffer whose release is
 *    counted), reads them back in random lengths and checks every byte,
 *    over any pair of streams and any "pump" that moves the world on.
 */
#ifndef ZBUF_USTEST_H
#define ZBUF_USTEST_H

#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <zbuf/udpstream.h>

/* Pattern byte at stream offset @off (period 251, with a slow drift, so
 * shifted or repeated runs show). */
static inline uint8_t ut_pat(uint64_t off)
{
    return (uint8_t)((off * 7u + (off >> 11)) % 251u);
}

static inline uint64_t ut_rand(uint64_t *st)
{
    uint64_t x = *st;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *st = x;
}

/* @bytes, times @soak when ZBUF_UDPSTREAM_SOAK is set (long runs). */
uint64_t ut_scaled(uint64_t bytes, unsigned soak);

/* ----------------------------------------------------- virtual network */

struct unet;
/* Sees (and may replace or drop, by returning NULL) each datagram sent by
 * side @from before the impairments; for tests of hostile peers. */
typedef zbuf_t *(*unet_tap_fn)(struct unet *n, int from, zbuf_t *d, void *arg);

struct unet_pkt {
    uint64_t at, seq;
    zbuf_t *z;
    int to;
};

struct unet {
    uint64_t now;              /* virtual microseconds */
    zbuf_udpstream_t *s[2];
    struct sockaddr_in addr[2];
    double loss[2], dup, reorder; /* loss[i]: datagrams sent by side i */
    uint32_t delay_us, jitter_us, reorder_us;
    uint64_t rng, seq;
    struct unet_pkt *heap;
    size_t heap_n, heap_cap;
    zbuf_pool_t *nic[2];       /* receive buffers of each side */
    uint64_t sent, lost, dups, delivered, nic_drops;
    unet_tap_fn tap;
    void *tap_arg;
    bool down;                 /* every datagram is lost */
    unsigned refuse_every;     /* every n-th send call takes only part of
                                  its batch (as a full socket would) */
    uint64_t send_calls, refused;
};

/* A network with the given impairments; streams not yet made. */
void unet_init(struct unet *n, uint64_t seed);
/* Make the two streams: side 0 connects to side 1, which listens.  @o for
 * both (NULL: defaults), clock and transport filled in here. */
void unet_open(struct unet *n, const zbuf_udpstream_opts_t *o);
/* Deliver what is due, run both streams; advance the clock to the next
 * event when nothing is due.  False when nothing will ever happen. */
bool unet_pump(void *n);
/* Inject a datagram as if side @from had sent it (from @from's address,
 * or from @spoof when not NULL). */
void unet_inject(struct unet *n, int from, zbuf_t *d, const struct sockaddr_in *spoof);
/* Delete the streams and everything in flight. */
void unet_free(struct unet *n);

/* A datagram built from raw header fields (for forged input). */
zbuf_t *ut_forge(uint8_t type, uint8_t flags, uint32_t cid, uint32_t sn, uint32_t una,
                 uint16_t wnd, const void *payload, uint16_t len);

/* ----------------------------------------------------------- transfers */

struct ut_dir {
    zbuf_udpstream_t *w, *r;
    uint64_t written, got;
    int enrolled, released;
    bool shut, eof;
    bool strict_release;       /* check: released bytes are with the reader */
    uint64_t early_release;    /* releases that broke the check */
    uint64_t bad_at;           /* first offset that did not match, or UINT64_MAX */
};

struct ut_xfer {
    uint64_t total;            /* bytes per direction */
    size_t write_max, piece_max, read_max;
    bool read_exact;           /* read with min == max */
    bool copy_api;             /* zbuf_udpstream_write_copy() / read_copy() */
    bool both_ways;
    uint64_t rng;
    struct ut_dir d[2];
    uint64_t max_steps;
};

/* Prepare a transfer from a to b (and back when both_ways). */
void ut_xfer_init(struct ut_xfer *x, zbuf_udpstream_t *a, zbuf_udpstream_t *b, uint64_t total,
                  uint64_t seed);
/* Run until both streams are closed (after a clean shutdown both ways),
 * one fails, or the pump gives up.  Asserts byte-exact delivery. */
void ut_xfer_run(struct ut_xfer *x, bool (*pump)(void *), void *ctx);

/* Write @len pattern bytes from @off as a zbuf of enrolled pieces of at
 * most @piece_max bytes, each release counted in @d.  The write result. */
int ut_write_pattern(struct ut_dir *d, uint64_t off, size_t len, size_t piece_max,
                     uint64_t *rng);

#endif
