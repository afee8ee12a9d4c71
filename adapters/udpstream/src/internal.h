/* SPDX-License-Identifier: MIT */
/*
 * Private declarations of zbuf-udpstream.  Nothing here is installed.
 *
 * Files, by concern (as lwIP and smoltcp split a transport):
 *   wire.c       the datagram format: parse and build headers (fuzzed)
 *   rtt.c        the RFC 6298 round-trip estimator and the NewReno-style
 *                congestion controller, behind small interfaces
 *   ring.c       the copying mode's rings of reusable chunks
 *   stream.c     the connection: handshake, send and receive queues, loss
 *                recovery, timers, the public stream API
 *   transport.c  the built-in transports: UDP sockets through zbuf-sock,
 *                the bundled stack's UDP
 */
#ifndef ZBUF_UDPSTREAM_INTERNAL_H
#define ZBUF_UDPSTREAM_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <zbuf/udpstream.h>

#define ZBUF__US_HIDDEN __attribute__((visibility("hidden")))

/* ------------------------------------------------------------------ wire */

#define ZUS_MAGIC 0x5au     /* first byte of every datagram ('Z') */
#define ZUS_VERSION 1u      /* second byte */

enum zus_type {
    ZUS_SYN = 1,    /* connection request: payload = struct zus_hello */
    ZUS_SYNACK = 2, /* its answer: payload = struct zus_hello */
    ZUS_DATA = 3,   /* a segment (may carry the FIN flag, may be empty with it) */
    ZUS_ACK = 4,    /* acknowledgement only, with SACK ranges */
    ZUS_PING = 5,   /* keepalive or window probe: asks for an ACK */
    ZUS_RST = 6,    /* the sender aborted the connection */
};

#define ZUS_F_FIN 0x01u /* DATA: the last segment of the sender's direction */

/* Bytes of a SYN / SYNACK payload: source connection id (4), largest
 * payload the sender accepts (2), flags (2, must be 0 in this version). */
#define ZUS_HELLO_LEN 8

/*
 * Header, 28 bytes, big-endian:
 *   0 magic  1 version  2 type  3 flags(low 4 bits) | nsack(high 4 bits)
 *   4 cid      connection identifier of the receiver (0 in a SYN)
 *   8 sn       DATA: segment number; SYN/SYNACK: initial segment number;
 *              others: the sender's next segment number
 *  12 una      the next segment number the sender expects (cumulative ACK)
 *  16 wnd      segments the sender accepts from una on
 *  18 len      payload bytes after the SACK ranges
 *  20 ts       sender's clock, microseconds, modulo 2^32
 *  24 ts_echo  ts of the latest datagram the sender received (0: none)
 * then nsack ranges [start, end) of segment numbers (8 bytes each), then
 * the payload.
 */
struct zus_hdr {
    uint8_t type;
    uint8_t flags;
    uint8_t nsack;
    uint32_t cid;
    uint32_t sn;
    uint32_t una;
    uint16_t wnd;
    uint16_t len;
    uint32_t ts;
    uint32_t ts_echo;
    uint32_t sack[ZBUF_UDPSTREAM_SACK_MAX][2];
};

struct zus_hello {
    uint32_t src_cid;
    uint16_t mss;
    uint16_t flags;
};

/* Largest header bytes a datagram starts with: header, SACK ranges, and
 * a SYN's hello (which counts as its payload). */
#define ZUS_HDR_MAX (ZBUF_UDPSTREAM_HEADER + 8 * ZBUF_UDPSTREAM_SACK_MAX + ZUS_HELLO_LEN)

/* A datagram on its way out: @hlen header bytes, then the @plen bytes of
 * @payload (borrowed: a segment's bytes, which stay in the send queue
 * until acknowledged; NULL when @plen is 0).  A transport that gathers
 * by itself sends these as they are; others get zbuf__us_out_zbuf(). */
struct zus_out {
    const zbuf_t *payload;
    uint32_t plen;
    uint16_t hlen;
    uint8_t hdr[ZUS_HDR_MAX];
};

/* The datagram @o as a new zbuf: a header segment in front of a
 * zbuf_dup() of the payload.  0 or -ENOMEM. */
ZBUF__US_HIDDEN int zbuf__us_out_zbuf(const struct zus_out *o, zbuf_t **out);

/* Parse the header of @dgram (borrowed) into @h.  0, or -EBADMSG when the
 * magic, version, type, flags, SACK count or lengths are wrong; the
 * datagram must hold exactly header + SACK + len bytes. */
ZBUF__US_HIDDEN int zbuf__us_parse(const zbuf_t *dgram, struct zus_hdr *h);
/* The same for a datagram of @len contiguous bytes at @p. */
ZBUF__US_HIDDEN int zbuf__us_parse_mem(const uint8_t *p, size_t len, struct zus_hdr *h);
/* Bytes of the header @h would be written as. */
ZBUF__US_HIDDEN size_t zbuf__us_hdr_size(const struct zus_hdr *h);
/* Write @h (its len must be set) into @out, zbuf__us_hdr_size() bytes. */
ZBUF__US_HIDDEN void zbuf__us_write_hdr(const struct zus_hdr *h, uint8_t *out);
/* Hello payload coding. */
ZBUF__US_HIDDEN void zbuf__us_write_hello(const struct zus_hello *hl, uint8_t *out);
ZBUF__US_HIDDEN int zbuf__us_parse_hello(const zbuf_t *dgram, size_t off, struct zus_hello *hl);
ZBUF__US_HIDDEN int zbuf__us_parse_hello_mem(const uint8_t *p, struct zus_hello *hl);

/* Serial-number comparison of 32-bit segment numbers (RFC 1982). */
static inline int32_t zus_diff(uint32_t a, uint32_t b)
{
    return (int32_t)(a - b);
}

/* ------------------------------------------------------ round trip, cwnd */

struct zus_rtt {
    uint32_t srtt_us;   /* 0 until the first sample */
    uint32_t rttvar_us;
    uint32_t min_us;    /* smallest sample seen (RACK's reordering window) */
    uint32_t rto_us;    /* without backoff */
    uint32_t rto_min_us, rto_max_us;
};

ZBUF__US_HIDDEN void zbuf__us_rtt_init(struct zus_rtt *r, uint32_t initial_us, uint32_t min_us,
                                       uint32_t max_us);
ZBUF__US_HIDDEN void zbuf__us_rtt_sample(struct zus_rtt *r, uint32_t sample_us);

/* A congestion controller: NewReno-style in whole segments. */
struct zus_cc {
    bool off;            /* congestion control disabled: cwnd unlimited */
    uint32_t cwnd;       /* segments */
    uint32_t ssthresh;
    uint32_t acc;        /* congestion avoidance: segments acked toward +1 */
    bool recovery;
    uint32_t recover;    /* recovery ends when una passes this sn */
};

ZBUF__US_HIDDEN void zbuf__us_cc_init(struct zus_cc *c, bool off);
/* @acked segments newly acknowledged (cumulative or selective); @una now. */
ZBUF__US_HIDDEN void zbuf__us_cc_on_ack(struct zus_cc *c, uint32_t acked, uint32_t una);
/* A loss found by acknowledgements; @flight segments in flight, @snd_nxt
 * the next new segment number (the recovery point). */
ZBUF__US_HIDDEN void zbuf__us_cc_on_loss(struct zus_cc *c, uint32_t flight, uint32_t snd_nxt);
/* A retransmission timeout. */
ZBUF__US_HIDDEN void zbuf__us_cc_on_timeout(struct zus_cc *c, uint32_t flight);

/* ------------------------------------------------------------------ ring */

/*
 * The copying mode's ring: a circle of chunks of one size.  Bytes copied in
 * land at the write position of the current chunk; a full chunk makes the
 * ring move to the next one, which is reused once no zbuf refers to it any
 * more (its reference count is back to the ring's own), or else a new chunk
 * is put into the circle there.  Slices are handed out as references, so
 * the queues treat copied and referenced bytes alike.
 */
struct zus_ring {
    zbuf_buf_t **chunks;  /* the circle; each holds the ring's reference */
    uint32_t n, cap;      /* chunks in the circle, room in the array */
    uint32_t cur;         /* chunk being filled */
    size_t pos;           /* write position in it */
    size_t chunk_size;
    zbuf_t *run_z;        /* the zbuf the open run belongs to */
    size_t run_off, run_len; /* the open run: bytes [run_off, pos) of chunk cur
                                copied for run_z and not yet put into it */
};

ZBUF__US_HIDDEN void zbuf__us_ring_init(struct zus_ring *r, size_t chunk_size);
ZBUF__US_HIDDEN void zbuf__us_ring_free(struct zus_ring *r);
/* Copy @len bytes (from @data, or from @src at @off when @src is not NULL)
 * into the ring, for the end of @z; counted as copies.  The bytes join
 * @z's open run: they are in @z once zbuf__us_ring_flush() ran (every
 * other ring call on another zbuf flushes first).  0, or -ENOMEM after
 * which the bytes copied so far are in the run. */
ZBUF__US_HIDDEN int zbuf__us_ring_append(struct zus_ring *r, zbuf_t *z, const void *data,
                                         const zbuf_t *src, size_t off, size_t len);
/* Put the open run into its zbuf (one segment).  0 or -ENOMEM. */
ZBUF__US_HIDDEN int zbuf__us_ring_flush(struct zus_ring *r);
/* Forget the open run (its zbuf is being emptied). */
ZBUF__US_HIDDEN void zbuf__us_ring_drop_run(struct zus_ring *r);

/* ------------------------------------------------------------ transports */

/* ------------------------------------------------------------- UDP GRO */

#define ZUS_GRO_BUF 65536   /* pool buffer: any UDP datagram fits in one */
#define ZUS_GRO_SLOTS 8     /* messages (each a run of datagrams) per recvmmsg() */
#define ZUS_GRO_REGIONS 40  /* free regions tracked (>= slots x 4 iovecs + 8) */

/* The unfilled end [pos, ZUS_GRO_BUF) of a buffer the GRO path holds. */
struct zus_gro_region {
    zbuf_buf_t *buf;        /* holds one reference */
    uint32_t pos;           /* 0: nothing of ours in it (fresh or rewound) */
};

/* The GRO receive path's state (gro.c).  Invariant: every buffer of the
 * pool is in the pool, in reg[] (once), or referred to only by zbufs of
 * received datagrams. */
struct zus_gro {
    zbuf_pool_t *pool;      /* 64 KiB buffers; NULL: GRO not in use */
    struct zus_gro_region reg[ZUS_GRO_REGIONS]; /* free space, filled in this order */
    unsigned nreg;
    uint32_t max_dgram;     /* largest datagram accepted */
    bool restore;           /* UDP_GRO was off on the socket: set it off at the end */
};

/* Set UDP_GRO on @fd and make the pool for @dgrams datagrams of
 * @max_dgram bytes.  0, or a negative errno (-ENOPROTOOPT: the kernel has
 * no UDP GRO) after which the socket is as it was. */
ZBUF__US_HIDDEN int zbuf__us_gro_open(struct zus_gro *g, int fd, uint32_t max_dgram,
                                      size_t dgrams);
/* Drop the path's buffers and pool, give the socket its UDP_GRO back. */
ZBUF__US_HIDDEN void zbuf__us_gro_close(struct zus_gro *g, int fd);
/* One recvmmsg() of up to @want messages (*@offered: as many as there
 * was room for); each datagram of each goes to the stream.  Messages
 * received; -ENOBUFS (no room for one message: nothing was read);
 * -EAGAIN; another negative errno. */
ZBUF__US_HIDDEN int zbuf__us_gro_recv(zbuf_udpstream_t *s, struct zus_gro *g, int fd,
                                      unsigned want, unsigned *offered);
/* The datagrams of a run of @n bytes at @off of @b, cut every @seg bytes
 * (0: one datagram), to the stream as the receive path hands them on
 * (for the fuzzing harness and tests). */
ZBUF__US_HIDDEN void zbuf__us_gro_split(zbuf_udpstream_t *s, zbuf_buf_t *b, size_t off,
                                        size_t n, size_t seg, uint32_t max_dgram,
                                        const struct sockaddr *from, socklen_t fromlen);
/* Datagrams of the largest size the path can still take for sure. */
ZBUF__US_HIDDEN uint32_t zbuf__us_gro_room(const struct zus_gro *g);
/* The datagram size of a received run (the UDP_GRO control message of
 * @mh), or 0 when the message is a single datagram. */
ZBUF__US_HIDDEN int zbuf__us_gro_size(struct msghdr *mh);

/* What a built-in transport adds to a stream. */
struct zus_transport_state {
    int fd;                 /* socket transport, else -1 */
    zbuf_pool_t *pool;      /* its receive pool (the plain path) */
    struct zus_gro gro;     /* the GRO path (gro.pool set when in use) */
    void *ip_pcb;           /* stack transport's zbuf_ip_udp_t */
    bool want_pollout;      /* the socket said EAGAIN */
    unsigned recv_batch;    /* datagrams the next receive call asks for */
    bool gso_off;           /* the kernel refused UDP GSO: plain sendmmsg() */
    /* The socket transport's gathering send of datagrams @o[0..n), in
     * order: how many were sent from the first, or a negative errno when
     * none was.  NULL for other transports. */
    int (*send_out)(zbuf_udpstream_t *s, const struct zus_out *o, unsigned n,
                    const struct sockaddr *to, socklen_t tolen);
    uint64_t gso_sends;     /* GSO sends made */
};

ZBUF__US_HIDDEN struct zus_transport_state *zbuf__us_tstate(zbuf_udpstream_t *s);
ZBUF__US_HIDDEN uint32_t zbuf__us_max_dgram(const zbuf_udpstream_t *s);
/*
 * A received datagram as a built-in transport hands it over: a zbuf
 * (consumed), or @len bytes lying contiguously at @p, offset @off of
 * @buf (borrowed for the call), of which the stream takes references
 * only for a payload it keeps, so that control datagrams and copied
 * payloads never become zbufs.
 */
struct zus_rx {
    zbuf_t *z;              /* the datagram, or NULL */
    zbuf_buf_t *buf;        /* else: its buffer */
    const uint8_t *p;       /* its first byte */
    size_t off, len;        /* p's offset in buf; bytes */
};

/* zbuf_udpstream_input() for @rx; with @ack_only, only the acknowledgement
 * fields are used (the bytes lie in a scratch buffer about to be
 * reused: a data payload is counted as no_buffer and dropped). */
ZBUF__US_HIDDEN int zbuf__us_input_rx(zbuf_udpstream_t *s, struct zus_rx *rx,
                                      const struct sockaddr *from, socklen_t fromlen,
                                      bool ack_only);
/* Datagrams one transport receive call takes at most. */
#define ZUS_RECV_BATCH 32

/* zbuf_udpstream_create() without the first send, for the built-in
 * transports, which set their state up in between; then zbuf__us_start()
 * sends the connection request (if connecting). */
ZBUF__US_HIDDEN int zbuf__us_create(const zbuf_udpstream_opts_t *o,
                                    const zbuf_udpstream_transport_t *t, void *ctx,
                                    const struct sockaddr *peer, socklen_t peerlen,
                                    zbuf_udpstream_t **out);
ZBUF__US_HIDDEN int zbuf__us_start(zbuf_udpstream_t *s);
/* Set the context the transport's functions get. */
ZBUF__US_HIDDEN void zbuf__us_set_ctx(zbuf_udpstream_t *s, void *ctx);
/* Count a datagram whose data was dropped for want of a buffer. */
ZBUF__US_HIDDEN void zbuf__us_count_no_buffer(zbuf_udpstream_t *s);
/* Count @n malformed datagrams dropped before zbuf_udpstream_input(). */
ZBUF__US_HIDDEN void zbuf__us_count_bad(zbuf_udpstream_t *s, size_t n);
/* Count @n datagrams that arrived as one run (UDP GRO). */
ZBUF__US_HIDDEN void zbuf__us_count_gro(zbuf_udpstream_t *s, size_t n);
/* Datagrams of the largest size the built-in transport's receive memory
 * can still take (UINT32_MAX: not limited by it). */
ZBUF__US_HIDDEN uint32_t zbuf__us_rx_room(const struct zus_transport_state *ts);
/* One line of the connection's state, for tests that failed. */
ZBUF__US_HIDDEN void zbuf__us_dump(const zbuf_udpstream_t *s, FILE *f);
/* Clock of the stream, microseconds. */
ZBUF__US_HIDDEN uint64_t zbuf__us_default_clock(void *arg);

#endif
