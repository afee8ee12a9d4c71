/* SPDX-License-Identifier: MIT */
/*
 * The connection: one reliable byte stream between two UDP endpoints.
 *
 * Send side.  Written bytes wait in `sndq` (a zbuf: the caller's segments,
 * or slices of the send ring in the copying mode) until the windows let
 * them go; then each segment of at most `mss` bytes is split off the front
 * of `sndq` (zbuf_split_head(): references move, nothing is copied) into
 * the slot of its segment number in `segs`, a ring indexed by number.  A
 * datagram is a zbuf_dup() of the slot's bytes behind a header segment.
 * A slot's bytes are dropped (the caller's release callbacks may run) when
 * the peer acknowledges them, cumulatively or selectively: the receiver
 * never drops what it acknowledged selectively, since it holds it by
 * reference.  States of a slot:
 *   UNSENT  created, never sent, or its send was refused (EAGAIN)
 *   FLIGHT  sent, not acknowledged, not deemed lost       (counted in flight)
 *   LOST    deemed lost, waiting to be sent again         (counted in lost)
 *   ACKED   selectively acknowledged, bytes dropped
 * Invariants: snd_una <= snd_nxt <= snd_end (serial order); every slot in
 * [snd_nxt, snd_end) is UNSENT and none before snd_nxt is; flight and lost
 * count the slots in those states; snd_end - snd_una <= the ring's size.
 *
 * Receive side.  A segment's payload (a reference into its datagram's pool
 * buffer, or a copy in the receive ring) waits in `ooo`, a ring indexed by
 * number, until every segment before it is in; then it moves to `rcvq`,
 * the in-order bytes that reads split off.  Invariant: ooo[rcv_nxt] is
 * empty; ooo_cnt slots are full, all within the window.
 *
 * Failure strategy: a datagram is parsed and checked completely (shape,
 * peer, identifier, acknowledgement range) before it changes anything;
 * one that fails a check is counted and dropped.  A public call validates,
 * then allocates, then changes state, so a failure leaves the stream and
 * the caller's zbuf as they were.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "internal.h"

#define BATCH 64                /* datagrams per transport send */
#define RECV_ROUNDS 16          /* receive batches per zbuf_udpstream_process() */
#define DUPTHRESH 3             /* later segments acknowledged that make one lost */
#define HS_TRIES_MAX 16
#define RING_CHUNK 65536
#define ACK_DELAY_US 2000u      /* an ACK waits this long for data to ride on */
#define ACK_EVERY 2             /* in-order segments that make an ACK go at once */

enum { ST_LISTEN, ST_SYN_SENT, ST_SYN_RCVD, ST_OPEN, ST_TIME_WAIT, ST_CLOSED, ST_FAILED };
enum { SEG_FREE, SEG_UNSENT, SEG_FLIGHT, SEG_LOST, SEG_ACKED };

struct seg {
    zbuf_t *data;      /* the payload (NULL: empty FIN, or dropped once acked) */
    uint64_t sent_us;  /* last transmission */
    uint32_t len;
    uint16_t xmits;
    uint8_t state;
    uint8_t fin;
};

struct zbuf_udpstream {
    zbuf_udpstream_opts_t o;
    zbuf_udpstream_transport_t t;
    void *tctx;
    struct zus_transport_state ts;
    struct sockaddr_storage peer;
    socklen_t peerlen; /* 0 while listening */
    int state;
    int err;
    bool connected;
    uint32_t cid, peer_cid;
    uint32_t mss;      /* payload bytes per datagram we send */
    uint32_t rx_mss;   /* largest payload we accept */
    uint32_t isn;

    /* send */
    zbuf_t *sndq;
    size_t queued;     /* written and not yet acknowledged */
    struct seg *segs;
    uint32_t smask;
    uint32_t snd_una, snd_nxt, snd_end;
    uint32_t flight, lost;
    uint32_t peer_wnd, peer_edge;
    bool fin_queued, fin_made, fin_acked;
    bool tx_blocked;   /* the transport refused datagrams in this output */
    uint64_t rto_deadline;
    unsigned backoff;
    uint64_t rack_sent_us;
    struct zus_rtt rtt;
    struct zus_cc cc;
    struct zus_ring snd_ring, rcv_ring;

    /* receive */
    zbuf_t *rcvq;
    zbuf_t **ooo;
    uint32_t rmask;
    uint32_t rcv_nxt, ooo_cnt;
    bool fin_seen, eof;
    uint32_t fin_sn;
    bool ack_now;
    uint64_t ack_deadline; /* delayed ACK: 0 when none is pending */
    unsigned unacked;      /* in-order segments received since the last ACK sent */
    bool ack_owed;         /* ACK_EVERY in-order segments came in: an ACK goes
                              with the application's answer, else at the
                              next zbuf_udpstream_process() */
    uint32_t ts_recent;
    uint32_t adv_wnd;  /* window in the last header sent */

    /* timers */
    uint64_t last_rx_us;
    uint64_t hs_deadline;
    unsigned hs_tries;
    uint64_t probe_deadline;
    bool probe_out;    /* a probe was sent and nothing heard since */
    bool probe_wnd;    /* the probe timer is a window probe's */
    uint64_t tw_deadline;

    zbuf_udpstream_stats_t st;
    unsigned last_events;
    bool in_notify, new_data;
};

/* ------------------------------------------------------------- helpers */

uint64_t zbuf__us_default_clock(void *arg)
{
    (void)arg;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

static uint64_t now_us(const zbuf_udpstream_t *s)
{
    return s->o.clock(s->o.clock_arg);
}

struct zus_transport_state *zbuf__us_tstate(zbuf_udpstream_t *s)
{
    return &s->ts;
}

void zbuf__us_set_ctx(zbuf_udpstream_t *s, void *ctx)
{
    s->tctx = ctx;
}

void zbuf__us_count_no_buffer(zbuf_udpstream_t *s)
{
    s->st.no_buffer++;
}

void zbuf__us_count_bad(zbuf_udpstream_t *s, size_t n)
{
    s->st.bad_dgrams += n;
}

void zbuf__us_count_gro(zbuf_udpstream_t *s, size_t n)
{
    s->st.gro_dgrams += n;
}

uint32_t zbuf__us_max_dgram(const zbuf_udpstream_t *s)
{
    return s->o.mtu - 28;
}

static uint32_t rand32(void)
{
    uint32_t v = 0;
    while (v == 0)
        if (getrandom(&v, sizeof v, 0) != sizeof v)
            v = (uint32_t)zbuf__us_default_clock(NULL) * 2654435761u;
    return v;
}

static uint32_t pow2_at_least(uint32_t v)
{
    uint32_t p = 16;
    while (p < v)
        p <<= 1;
    return p;
}

static bool same_addr(const struct sockaddr_storage *a, const struct sockaddr *b, socklen_t blen)
{
    if (b == NULL || a->ss_family != b->sa_family)
        return false;
    if (b->sa_family == AF_INET && blen >= (socklen_t)sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
        return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
    }
    if (b->sa_family == AF_INET6 && blen >= (socklen_t)sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
        return x->sin6_port == y->sin6_port &&
               memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr) == 0;
    }
    return false;
}

static bool copies_payload(const zbuf_udpstream_t *s, size_t len)
{
    return s->o.mode == ZBUF_UDPSTREAM_COPY ||
           (s->o.mode == ZBUF_UDPSTREAM_AUTO && len < s->o.copy_below);
}

static void count_copy(zbuf_udpstream_t *s, size_t n)
{
    s->st.bytes_copied += n;
}

/* ------------------------------------------------------------- options */

void zbuf_udpstream_opts_init(zbuf_udpstream_opts_t *o)
{
    if (o == NULL)
        return;
    *o = (zbuf_udpstream_opts_t){
        .mode = ZBUF_UDPSTREAM_AUTO, .copy_below = ZBUF_UDPSTREAM_COPY_BELOW, .mtu = 1500,
        .snd_wnd = 1024, .rcv_wnd = 1024, .sndbuf = 8u << 20, .rto_min_ms = 20,
        .rto_max_ms = 2000, .rto_initial_ms = 200, .keepalive_ms = 5000, .timeout_ms = 15000,
        .time_wait_ms = 300,
    };
}

static int check_opts(const zbuf_udpstream_opts_t *o)
{
    if (o->mode > ZBUF_UDPSTREAM_COPY || o->mtu < 576 || o->mtu > 65535 ||
        o->snd_wnd < 16 || o->snd_wnd > 32768 || o->rcv_wnd < 16 || o->rcv_wnd > 32768 ||
        o->sndbuf == 0 || o->rto_min_ms == 0 || o->rto_max_ms < o->rto_min_ms ||
        o->timeout_ms == 0)
        return -EINVAL;
    return 0;
}

/* -------------------------------------------------------------- events */

unsigned zbuf_udpstream_events(const zbuf_udpstream_t *s)
{
    if (s == NULL)
        return 0;
    unsigned ev = 0;
    if (zbuf_length(s->rcvq) > 0 || s->eof || s->err)
        ev |= ZBUF_UDPSTREAM_READABLE;
    if (!s->err && !s->fin_queued && s->state <= ST_OPEN && s->queued < s->o.sndbuf)
        ev |= ZBUF_UDPSTREAM_WRITABLE;
    if (s->connected)
        ev |= ZBUF_UDPSTREAM_CONNECTED;
    if (s->eof)
        ev |= ZBUF_UDPSTREAM_EOF;
    if (s->err)
        ev |= ZBUF_UDPSTREAM_ERROR;
    if (s->state == ST_CLOSED)
        ev |= ZBUF_UDPSTREAM_CLOSED;
    if (!s->err && s->queued == 0 && (!s->fin_queued || s->fin_acked))
        ev |= ZBUF_UDPSTREAM_FLUSHED;
    return ev;
}

/* Tell the application when the events changed or bytes came in; a
 * notify callback that changes them again is called again, not nested. */
static void notify(zbuf_udpstream_t *s)
{
    if (s->o.notify == NULL)
        return;
    if (s->in_notify)
        return; /* the loop below looks again when the callback returns */
    s->in_notify = true;
    for (int rounds = 0; rounds < 8; rounds++) {
        unsigned ev = zbuf_udpstream_events(s);
        if (ev == s->last_events && !s->new_data)
            break;
        s->last_events = ev;
        s->new_data = false;
        s->o.notify(s, ev, s->o.notify_arg);
    }
    s->in_notify = false;
}

/* Drop every queued byte: the release callbacks of written bytes run. */
static void drop_queues(zbuf_udpstream_t *s)
{
    for (uint32_t sn = s->snd_una; sn != s->snd_end; sn++) {
        struct seg *g = &s->segs[sn & s->smask];
        zbuf_delete(g->data);
        *g = (struct seg){0};
    }
    s->snd_end = s->snd_nxt = s->snd_una;
    s->flight = s->lost = 0;
    zbuf__us_ring_drop_run(&s->snd_ring);
    zbuf_cut(s->sndq, 0, ZBUF_TO_END, NULL);
    s->queued = 0;
    for (uint32_t i = 0; i <= s->rmask && s->ooo_cnt > 0; i++) {
        if (s->ooo[i] != NULL) {
            zbuf_delete(s->ooo[i]);
            s->ooo[i] = NULL;
            s->ooo_cnt--;
        }
    }
}

static void fail(zbuf_udpstream_t *s, int err)
{
    if (s->err)
        return;
    s->err = err;
    s->state = ST_FAILED;
    drop_queues(s);
}

/* ------------------------------------------------------------- windows */

/* Segments we accept from rcv_nxt on: the ring, less what waits in order
 * for the reader, less what the socket transport's receive memory could
 * not hold (in datagrams of the largest size). */
static uint32_t rcv_window(const zbuf_udpstream_t *s, bool advertise)
{
    size_t held = zbuf_seg_count(s->rcvq);
    uint32_t size = s->rmask + 1;
    uint32_t w = held >= size ? 0 : size - (uint32_t)held;
    if (advertise) {
        uint64_t avail = (uint64_t)zbuf__us_rx_room(&s->ts) + s->ooo_cnt;
        if (avail < w)
            w = (uint32_t)avail;
    }
    return w > 65535 ? 65535 : w;
}

/* -------------------------------------------------------------- output */

struct batch {
    struct zus_out out[BATCH];
    uint32_t sn[BATCH];
    uint8_t was[BATCH]; /* slot state before sending; SEG_FREE for control */
    unsigned n;
    uint32_t wnd1;      /* the window the headers advertise, plus 1; 0: not
                           computed yet (it does not change within a batch) */
};

static void fill_common(zbuf_udpstream_t *s, struct batch *b, struct zus_hdr *h, uint64_t now)
{
    s->ack_deadline = 0; /* every datagram carries the acknowledgement */
    s->unacked = 0;
    s->ack_owed = false;
    h->cid = s->peer_cid;
    h->una = s->rcv_nxt;
    if (b->wnd1 == 0)
        b->wnd1 = rcv_window(s, true) + 1;
    h->wnd = (uint16_t)(b->wnd1 - 1);
    s->adv_wnd = b->wnd1 - 1;
    h->ts = (uint32_t)now;
    if (h->ts == 0)
        h->ts = 1;
    h->ts_echo = s->ts_recent;
}

/* An empty batch.  (Not an initializer: the datagram array is large and
 * needs no clearing.) */
static void batch_init(struct batch *b)
{
    b->n = 0;
    b->wnd1 = 0;
}

/* The transport's answer for the batch: how many datagrams it took from
 * the first, or a negative errno. */
static int send_batch(zbuf_udpstream_t *s, struct batch *b)
{
    const struct sockaddr *to = (const struct sockaddr *)&s->peer;
    if (s->ts.send_out != NULL)
        return s->ts.send_out(s, b->out, b->n, to, s->peerlen);
    zbuf_t *dg[BATCH];
    unsigned m = 0;
    while (m < b->n && zbuf__us_out_zbuf(&b->out[m], &dg[m]) == 0)
        m++;
    return m > 0 ? s->t.send(s->tctx, dg, m, to, s->peerlen) : -ENOMEM;
}

/* Hand the batch to the transport; undo what it did not take. */
static void transmit(zbuf_udpstream_t *s, struct batch *b)
{
    if (b->n == 0)
        return;
    int k = send_batch(s, b);
    if (k < 0 && k != -EAGAIN && k != -ENOBUFS && k != -ENOMEM)
        k = (int)b->n; /* a hard error is a loss on the way: recovery resends */
    if (k < 0)
        k = 0;
    if ((unsigned)k < b->n) {
        s->ts.want_pollout = true;
        s->tx_blocked = true;
    } else {
        s->ts.want_pollout = false;
    }
    s->st.dgrams_tx += (unsigned)k;
    for (unsigned i = (unsigned)k; i < b->n; i++) {
        uint8_t was = b->was[i];
        if (was == SEG_FREE) {
            s->ack_now = true; /* a control datagram: it goes again next time */
            continue;
        }
        struct seg *g = &s->segs[b->sn[i] & s->smask];
        g->state = was;
        g->xmits--;
        s->flight--;
        s->st.data_tx--;
        if (was == SEG_LOST) {
            s->lost++;
            s->st.retransmits--;
        } else if (zus_diff(b->sn[i], s->snd_nxt) < 0) {
            s->snd_nxt = b->sn[i];
        }
    }
    b->n = 0;
}

/* The next datagram of @b: header @h (and @extra hello bytes), then
 * @plen bytes of @payload. */
static void add_dgram(zbuf_udpstream_t *s, struct batch *b, const struct zus_hdr *h,
                      const void *extra, const zbuf_t *payload, uint32_t plen, uint32_t sn,
                      uint8_t was)
{
    struct zus_out *o = &b->out[b->n];
    size_t hs = zbuf__us_hdr_size(h);
    zbuf__us_write_hdr(h, o->hdr);
    if (extra != NULL) {
        memcpy(o->hdr + hs, extra, ZUS_HELLO_LEN);
        hs += ZUS_HELLO_LEN;
    }
    o->hlen = (uint16_t)hs;
    o->payload = plen > 0 ? payload : NULL;
    o->plen = plen;
    b->sn[b->n] = sn;
    b->was[b->n] = was;
    if (++b->n == BATCH)
        transmit(s, b);
}

static int send_control(zbuf_udpstream_t *s, struct batch *b, uint8_t type, uint64_t now)
{
    struct zus_hdr h = {.type = type, .sn = s->snd_nxt};
    fill_common(s, b, &h, now);
    const void *extra = NULL;
    uint8_t hello[ZUS_HELLO_LEN];
    if (type == ZUS_SYN || type == ZUS_SYNACK) {
        struct zus_hello hl = {.src_cid = s->cid, .mss = (uint16_t)s->rx_mss};
        zbuf__us_write_hello(&hl, hello);
        extra = hello;
        h.sn = s->isn;
        h.len = ZUS_HELLO_LEN;
        if (type == ZUS_SYN) {
            h.cid = 0;
            h.una = 0;
        }
    }
    if (type == ZUS_ACK && s->ooo_cnt > 0) {
        /* SACK ranges: the first runs of held segments above rcv_nxt. */
        uint32_t found = 0, size = s->rmask + 1;
        for (uint32_t d = 1; d < size && found < s->ooo_cnt && h.nsack < ZBUF_UDPSTREAM_SACK_MAX;
             d++) {
            uint32_t sn = s->rcv_nxt + d;
            if (s->ooo[sn & s->rmask] == NULL)
                continue;
            uint32_t e = d;
            while (e < size && s->ooo[(s->rcv_nxt + e) & s->rmask] != NULL)
                e++;
            h.sack[h.nsack][0] = sn;
            h.sack[h.nsack][1] = s->rcv_nxt + e;
            h.nsack++;
            found += e - d;
            d = e;
        }
    }
    if (type == ZUS_ACK)
        s->st.acks_tx++;
    add_dgram(s, b, &h, extra, NULL, 0, 0, SEG_FREE);
    return 0;
}

static bool can_send_more(const zbuf_udpstream_t *s)
{
    return s->flight < s->cc.cwnd;
}

static int send_seg(zbuf_udpstream_t *s, struct batch *b, uint32_t sn, uint64_t now)
{
    struct seg *g = &s->segs[sn & s->smask];
    struct zus_hdr h = {.type = ZUS_DATA, .sn = sn, .len = (uint16_t)g->len,
                        .flags = g->fin ? ZUS_F_FIN : 0};
    fill_common(s, b, &h, now);
    uint8_t was = g->state;
    if (was == SEG_LOST) {
        s->lost--;
        s->st.retransmits++;
    }
    if (s->flight == 0)
        s->rto_deadline = now + ((uint64_t)s->rtt.rto_us << s->backoff);
    g->state = SEG_FLIGHT;
    g->sent_us = now;
    g->xmits++;
    s->flight++;
    s->st.data_tx++;
    if (was == SEG_UNSENT)
        s->snd_nxt = sn + 1; /* sn is snd_nxt: new segments go in order */
    add_dgram(s, b, &h, NULL, g->data, g->len, sn, was);
    return 0;
}

/* Cut the next segment off the send queue into slot snd_end. */
static int make_seg(zbuf_udpstream_t *s)
{
    struct seg *g = &s->segs[s->snd_end & s->smask];
    int rc = zbuf__us_ring_flush(&s->snd_ring);
    if (rc < 0)
        return rc;
    size_t len = zbuf_length(s->sndq);
    if (len > 0) {
        if (len > s->mss)
            len = s->mss;
        zbuf_t *data;
        rc = zbuf_split_head(s->sndq, len, &data);
        if (rc < 0)
            return rc;
        *g = (struct seg){.data = data, .len = (uint32_t)len, .state = SEG_UNSENT};
    } else {
        *g = (struct seg){.state = SEG_UNSENT, .fin = 1};
        s->fin_made = true;
    }
    s->snd_end++;
    return 0;
}

static bool have_new(const zbuf_udpstream_t *s)
{
    return s->snd_nxt != s->snd_end || zbuf_length(s->sndq) > 0 ||
           s->snd_ring.run_len > 0 || (s->fin_queued && !s->fin_made);
}

static bool in_peer_window(const zbuf_udpstream_t *s, uint32_t sn)
{
    return zus_diff(sn, s->snd_una) < (int32_t)s->peer_wnd;
}

/* Send what is due: lost segments, then new ones, then an ACK if one is
 * owed and no datagram carried it (or selective ranges must go). */
static void output(zbuf_udpstream_t *s, uint64_t now)
{
    struct batch b;
    batch_init(&b);
    if (s->state == ST_SYN_SENT || s->state == ST_LISTEN || s->state >= ST_CLOSED)
        goto out;
    if (s->state == ST_SYN_RCVD) {
        if (s->ack_now) {
            send_control(s, &b, ZUS_SYNACK, now);
            s->ack_now = false;
        }
        goto out;
    }
    unsigned data_sent = 0;
    s->tx_blocked = false;
    if (s->lost > 0) {
        for (uint32_t sn = s->snd_una;
             sn != s->snd_nxt && s->lost > 0 && can_send_more(s) && !s->tx_blocked; sn++) {
            if (s->segs[sn & s->smask].state == SEG_LOST && send_seg(s, &b, sn, now) == 0)
                data_sent++;
        }
    }
    while (s->lost == 0 && !s->tx_blocked && can_send_more(s) && have_new(s) &&
           in_peer_window(s, s->snd_nxt)) {
        if (s->snd_nxt == s->snd_end) {
            if (s->snd_end - s->snd_una > s->smask || make_seg(s) < 0)
                break;
        }
        if (send_seg(s, &b, s->snd_nxt, now) < 0)
            break;
        data_sent++;
    }
    if (s->ack_now && (data_sent == 0 || s->ooo_cnt > 0)) {
        if (send_control(s, &b, ZUS_ACK, now) == 0)
            s->ack_now = false;
    } else if (data_sent > 0) {
        s->ack_now = false;
    }
out:
    transmit(s, &b);
}

/* ------------------------------------------------------------- timers */

static bool awaiting_peer(const zbuf_udpstream_t *s)
{
    return s->state == ST_SYN_SENT || s->state == ST_SYN_RCVD || s->flight > 0 ||
           s->lost > 0 || s->probe_out || (s->state == ST_OPEN && have_new(s));
}

static uint64_t hs_interval(const zbuf_udpstream_t *s)
{
    uint64_t iv = (uint64_t)s->o.rto_initial_ms * 1000u << (s->hs_tries < 10 ? s->hs_tries : 10);
    uint64_t cap = (uint64_t)s->o.rto_max_ms * 1000u;
    return iv > cap ? cap : iv;
}

static uint64_t probe_interval(const zbuf_udpstream_t *s)
{
    uint64_t iv = (uint64_t)s->rtt.rto_us << (s->backoff < 10 ? s->backoff : 10);
    uint64_t cap = (uint64_t)s->o.rto_max_ms * 1000u;
    return iv > cap ? cap : iv;
}

uint64_t zbuf_udpstream_next_deadline(const zbuf_udpstream_t *s)
{
    if (s == NULL || s->state >= ST_CLOSED)
        return UINT64_MAX;
    uint64_t d = UINT64_MAX;
#define MIN_D(x) do { if ((x) < d) d = (x); } while (0)
    if (s->state == ST_TIME_WAIT)
        return s->tw_deadline;
    if (s->state == ST_SYN_SENT || s->state == ST_SYN_RCVD)
        MIN_D(s->hs_deadline);
    if (awaiting_peer(s))
        MIN_D(s->last_rx_us + (uint64_t)s->o.timeout_ms * 1000u);
    if (s->flight > 0)
        MIN_D(s->rto_deadline);
    if (s->state == ST_OPEN && s->probe_deadline)
        MIN_D(s->probe_deadline);
    if (s->ack_deadline)
        MIN_D(s->ack_deadline);
    if (s->o.cork && s->state == ST_OPEN && s->lost == 0 && have_new(s) && can_send_more(s) &&
        in_peer_window(s, s->snd_nxt) && !s->ts.want_pollout)
        d = 0; /* corked writes wait for process() */
    /* Work due now, unless the socket refused datagrams: then POLLOUT
     * (zbuf_udpstream_poll_events()) is the wake-up, not a spin. */
    if ((s->ack_now || s->ack_owed) && s->state >= ST_SYN_RCVD && !s->ts.want_pollout)
        d = 0;
#undef MIN_D
    return d;
}

int zbuf_udpstream_timeout(const zbuf_udpstream_t *s)
{
    uint64_t d = zbuf_udpstream_next_deadline(s);
    if (d == UINT64_MAX)
        return -1;
    uint64_t now = now_us(s);
    if (d <= now)
        return 0;
    uint64_t ms = (d - now + 999) / 1000;
    return ms > 3600000 ? 3600000 : (int)ms;
}

/* The probe timer: a window probe while the peer's window holds back
 * data and nothing is in flight, else a keepalive after an idle spell.  A
 * probe sent and unanswered keeps the deadline run_timers() gave it. */
static void rearm_probe(zbuf_udpstream_t *s, uint64_t now)
{
    if (s->state != ST_OPEN || s->flight > 0 || s->lost > 0) {
        s->probe_deadline = 0;
        s->probe_wnd = false;
        return;
    }
    if (s->probe_out)
        return;
    if (have_new(s) && !in_peer_window(s, s->snd_nxt)) {
        if (!s->probe_wnd || s->probe_deadline == 0) {
            s->probe_wnd = true;
            s->probe_deadline = now + probe_interval(s);
        }
    } else {
        s->probe_wnd = false;
        s->probe_deadline =
            s->o.keepalive_ms ? s->last_rx_us + (uint64_t)s->o.keepalive_ms * 1000u : 0;
    }
}

static void run_timers(zbuf_udpstream_t *s, uint64_t now, struct batch *b)
{
    if (s->state == ST_TIME_WAIT) {
        if (now >= s->tw_deadline)
            s->state = ST_CLOSED;
        return;
    }
    if (s->state >= ST_CLOSED || s->state == ST_LISTEN)
        return;
    if (s->ack_deadline && now >= s->ack_deadline) {
        s->ack_now = true;
        s->ack_deadline = 0;
    }
    if (awaiting_peer(s) && now >= s->last_rx_us + (uint64_t)s->o.timeout_ms * 1000u) {
        fail(s, -ETIMEDOUT);
        return;
    }
    if (s->state == ST_SYN_SENT || s->state == ST_SYN_RCVD) {
        if (now >= s->hs_deadline) {
            if (++s->hs_tries > HS_TRIES_MAX) {
                fail(s, -ETIMEDOUT);
                return;
            }
            send_control(s, b, s->state == ST_SYN_SENT ? ZUS_SYN : ZUS_SYNACK, now);
            s->hs_deadline = now + hs_interval(s);
        }
        return;
    }
    if (s->flight > 0 && now >= s->rto_deadline) {
        /* Every segment in flight is deemed lost; resend from the oldest. */
        for (uint32_t sn = s->snd_una; sn != s->snd_nxt; sn++) {
            struct seg *g = &s->segs[sn & s->smask];
            if (g->state == SEG_FLIGHT) {
                g->state = SEG_LOST;
                s->lost++;
            }
        }
        zbuf__us_cc_on_timeout(&s->cc, s->flight);
        s->flight = 0;
        s->st.timeouts++;
        if (s->backoff < 16)
            s->backoff++;
    }
    if (s->probe_deadline && now >= s->probe_deadline && s->flight == 0 && s->lost == 0) {
        send_control(s, b, ZUS_PING, now);
        s->st.keepalives++;
        s->probe_out = true;
        if (s->backoff < 16)
            s->backoff++;
        s->probe_deadline = now + probe_interval(s);
    }
}

/* Both directions done: TIME_WAIT, during which a retransmitted FIN is
 * still acknowledged. */
static void check_closed(zbuf_udpstream_t *s, uint64_t now)
{
    if (s->state == ST_OPEN && s->eof && s->fin_acked) {
        /* Long enough for the peer to resend its FIN a few times if our
         * ACK of it was lost (its timeout is about ours). */
        uint64_t tw = (uint64_t)s->o.time_wait_ms * 1000u, three = 3 * probe_interval(s);
        s->state = ST_TIME_WAIT;
        s->tw_deadline = now + (tw > three ? tw : three);
        if (s->o.time_wait_ms == 0)
            s->state = ST_CLOSED;
    }
}

/* ---------------------------------------------------------------- input */

/* Selective and cumulative acknowledgement of [sn] by the peer. */
static uint32_t ack_slot(zbuf_udpstream_t *s, uint32_t sn, uint32_t echo)
{
    struct seg *g = &s->segs[sn & s->smask];
    if (g->state == SEG_ACKED || g->state == SEG_FREE)
        return 0;
    if (g->state == SEG_FLIGHT)
        s->flight--;
    else if (g->state == SEG_LOST)
        s->lost--;
    /* RACK: the newest transmission known delivered.  For a segment sent
     * more than once, only when the echo shows the retransmission arrived. */
    if (g->xmits == 1 || (echo != 0 && zus_diff(echo, (uint32_t)g->sent_us) >= 0)) {
        if (g->sent_us > s->rack_sent_us)
            s->rack_sent_us = g->sent_us;
    }
    zbuf_delete(g->data);
    g->data = NULL;
    g->state = SEG_ACKED;
    s->st.bytes_acked += g->len;
    s->queued -= g->len;
    return 1;
}

/* Deem lost the segments in flight that a later-sent one overtook by a
 * reordering window, or that DUPTHRESH later segments overtook. */
static void detect_losses(zbuf_udpstream_t *s, uint32_t high)
{
    uint32_t reo = s->rtt.min_us == UINT32_MAX ? 1000 : s->rtt.min_us / 4;
    unsigned above = 0;
    bool any = false;
    for (uint32_t sn = high; sn != s->snd_una;) {
        sn--;
        struct seg *g = &s->segs[sn & s->smask];
        if (g->state == SEG_ACKED) {
            above++;
        } else if (g->state == SEG_FLIGHT &&
                   ((g->xmits == 1 && above >= DUPTHRESH) ||
                    g->sent_us + reo < s->rack_sent_us)) {
            g->state = SEG_LOST;
            s->flight--;
            s->lost++;
            s->st.fast_retransmits++;
            any = true;
        }
    }
    if (any)
        zbuf__us_cc_on_loss(&s->cc, s->flight + s->lost, s->snd_nxt);
}

/* The acknowledgement fields of a datagram from the peer.  A cumulative
 * acknowledgement beyond what was sent makes the whole ACK suspect: it is
 * ignored and counted. */
static void take_ack(zbuf_udpstream_t *s, const struct zus_hdr *h, uint64_t now)
{
    if (zus_diff(h->una, s->snd_nxt) > 0 || zus_diff(h->una, s->snd_una) < 0) {
        if (zus_diff(h->una, s->snd_nxt) > 0)
            s->st.bad_acks++;
        return; /* beyond what was sent, or older than what we know: stale */
    }
    uint32_t newly = 0, high = s->snd_una;
    uint32_t old_una = s->snd_una;
    for (uint32_t sn = s->snd_una; sn != h->una; sn++)
        newly += ack_slot(s, sn, h->ts_echo);
    s->snd_una = h->una;
    if (zus_diff(h->una, old_una) > 0) {
        s->backoff = 0;
        s->rto_deadline = now + s->rtt.rto_us;
    }
    high = s->snd_una;
    for (unsigned i = 0; i < h->nsack; i++) {
        uint32_t a = h->sack[i][0], e = h->sack[i][1];
        if (zus_diff(a, s->snd_una) < 0 || zus_diff(e, s->snd_nxt) > 0) {
            s->st.bad_acks++;
            continue;
        }
        for (uint32_t sn = a; sn != e; sn++)
            newly += ack_slot(s, sn, h->ts_echo);
        if (zus_diff(e, high) > 0)
            high = e;
    }
    /* Our direction is done when the cumulative acknowledgement passes the
     * FIN (a selective one of the FIN alone leaves data before it). */
    if (s->fin_made && s->snd_una == s->snd_end)
        s->fin_acked = true;
    /* The peer's window: it may shrink (counted), and we respect it. */
    uint32_t edge = h->una + h->wnd;
    if (zus_diff(edge, s->peer_edge) < 0)
        s->st.wnd_shrinks++;
    s->peer_edge = edge;
    s->peer_wnd = h->wnd;
    if (newly > 0) {
        if (h->ts_echo != 0) {
            uint32_t sample = (uint32_t)now - h->ts_echo;
            if (sample < 60000000u)
                zbuf__us_rtt_sample(&s->rtt, sample);
        }
        if (zus_diff(high, s->snd_una) > 0 || s->flight > 0)
            detect_losses(s, zus_diff(high, s->snd_una) > 0 ? high : s->snd_nxt);
        zbuf__us_cc_on_ack(&s->cc, newly, s->snd_una);
    }
}

/* Move the segments that are now in order to the reader's queue. */
static void deliver(zbuf_udpstream_t *s)
{
    zbuf_t **slot;
    while (*(slot = &s->ooo[s->rcv_nxt & s->rmask]) != NULL) {
        zbuf_t *z = *slot;
        *slot = NULL;
        s->ooo_cnt--;
        if (zbuf_length(z) > 0) {
            s->new_data = true;
            if (zbuf_append(s->rcvq, z) < 0)
                zbuf_delete(z); /* cannot happen for appends (no allocation) */
        } else {
            zbuf_delete(z);
        }
        if (s->fin_seen && s->rcv_nxt == s->fin_sn)
            s->eof = true;
        s->rcv_nxt++;
    }
}

/* The datagram's resources go (a zbuf is deleted; borrowed bytes are
 * simply not used). */
static void rx_drop(struct zus_rx *rx)
{
    if (rx->z != NULL)
        zbuf_delete(rx->z);
    rx->z = NULL;
}

/* The payload [hs, hs + len) of @rx as a new zbuf of references (consumes
 * a zbuf datagram: its header is cut off).  0 or -ENOMEM (@rx dropped). */
static int rx_payload(struct zus_rx *rx, size_t hs, size_t len, zbuf_t **out)
{
    int rc;
    if (rx->z != NULL) {
        rc = zbuf_cut(rx->z, 0, hs, NULL);
        if (rc == 0) {
            *out = rx->z;
            rx->z = NULL;
        }
    } else {
        zbuf_t *z;
        rc = zbuf_create(&z);
        if (rc == 0 && (rc = zbuf_append_ref(z, rx->buf, rx->off + hs, len)) < 0)
            zbuf_delete(z);
        if (rc == 0)
            *out = z;
    }
    if (rc < 0)
        rx_drop(rx);
    return rc;
}

/* The segment rcv_nxt (ooo[rcv_nxt] is empty): its payload goes straight
 * to the reader's queue, as a copy in the receive ring or as references,
 * then the segments it makes in order follow.  Consumes @rx. */
static void take_in_order(zbuf_udpstream_t *s, const struct zus_hdr *h, struct zus_rx *rx,
                          size_t hs)
{
    int rc = 0;
    if (h->len > 0 && copies_payload(s, h->len)) {
        rc = zbuf__us_ring_append(&s->rcv_ring, s->rcvq, rx->z ? NULL : rx->p + hs, rx->z, hs,
                                  h->len);
        if (rc == 0)
            rc = zbuf__us_ring_flush(&s->rcv_ring);
        if (rc < 0)
            zbuf__us_ring_drop_run(&s->rcv_ring); /* (nothing of it reached rcvq) */
        else
            count_copy(s, h->len);
    } else if (h->len > 0 && rx->z != NULL) {
        rc = zbuf_cut(rx->z, 0, hs, NULL);
        if (rc == 0 && (rc = zbuf_append(s->rcvq, rx->z)) == 0)
            rx->z = NULL; /* consumed */
    } else if (h->len > 0) {
        rc = zbuf_append_ref(s->rcvq, rx->buf, rx->off + hs, h->len);
    }
    rx_drop(rx);
    if (rc < 0) {
        s->st.no_buffer++;
        return;
    }
    if (h->flags & ZUS_F_FIN) {
        s->fin_seen = true;
        s->fin_sn = h->sn;
        s->eof = true;
    }
    if (h->len > 0)
        s->new_data = true;
    s->rcv_nxt++;
    deliver(s);
}

/* A data segment; consumes @rx. */
static void take_data(zbuf_udpstream_t *s, const struct zus_hdr *h, struct zus_rx *rx, size_t hs,
                      uint64_t now)
{
    int32_t d = zus_diff(h->sn, s->rcv_nxt);
    /* In-order data may wait for an answer to carry its ACK (for at most
     * ACK_DELAY_US, or until the application's turn is over once
     * ACK_EVERY segments came in); anything else is acknowledged at once. */
    if (d == 0 && s->ooo_cnt == 0 && !(h->flags & ZUS_F_FIN)) {
        if (++s->unacked >= ACK_EVERY)
            s->ack_owed = true;
        else if (s->ack_deadline == 0)
            s->ack_deadline = now + ACK_DELAY_US;
    } else {
        s->ack_now = true;
    }
    if (d < 0 || (d < (int32_t)(s->rmask + 1) && s->ooo[h->sn & s->rmask] != NULL)) {
        s->st.dup_rx++;
        rx_drop(rx);
        return;
    }
    if ((s->fin_seen && zus_diff(h->sn, s->fin_sn) > 0) || d >= (int32_t)rcv_window(s, false) ||
        h->len > s->rx_mss || ((h->flags & ZUS_F_FIN) && s->fin_seen && h->sn != s->fin_sn)) {
        s->st.out_of_window++;
        rx_drop(rx);
        return;
    }
    if (d == 0) {
        take_in_order(s, h, rx, hs);
        return;
    }
    zbuf_t *payload;
    if (h->len > 0 && copies_payload(s, h->len)) {
        if (zbuf_create(&payload) < 0 ||
            zbuf__us_ring_append(&s->rcv_ring, payload, rx->z ? NULL : rx->p + hs, rx->z, hs,
                                 h->len) < 0 ||
            zbuf__us_ring_flush(&s->rcv_ring) < 0) {
            zbuf__us_ring_drop_run(&s->rcv_ring);
            zbuf_delete(payload);
            rx_drop(rx);
            s->st.no_buffer++;
            return;
        }
        count_copy(s, h->len);
        rx_drop(rx); /* its pool buffer goes back now */
    } else if (rx_payload(rx, hs, h->len, &payload) < 0) {
        s->st.no_buffer++;
        return;
    }
    if (h->flags & ZUS_F_FIN) {
        s->fin_seen = true;
        s->fin_sn = h->sn;
    }
    if (d > 0)
        s->st.ooo_rx++;
    s->ooo[h->sn & s->rmask] = payload;
    s->ooo_cnt++;
    deliver(s);
}

static int hello_from(const struct zus_rx *rx, const struct zus_hdr *h, struct zus_hello *hl)
{
    size_t hs = zbuf__us_hdr_size(h);
    return rx->z ? zbuf__us_parse_hello(rx->z, hs, hl) : zbuf__us_parse_hello_mem(rx->p + hs, hl);
}

static void set_peer_mss(zbuf_udpstream_t *s, uint32_t peer_mss)
{
    s->mss = peer_mss < s->rx_mss ? peer_mss : s->rx_mss;
}

/* A listening stream's first datagram: a connection request from a new
 * peer, whose address and identifier the stream keeps from now on. */
static int input_listen(zbuf_udpstream_t *s, struct zus_rx *rx, const struct zus_hdr *h,
                        const struct sockaddr *from, socklen_t fromlen, uint64_t now)
{
    struct zus_hello hl;
    if (h->type != ZUS_SYN || h->cid != 0 || hello_from(rx, h, &hl) < 0 || from == NULL ||
        fromlen > sizeof s->peer || fromlen == 0) {
        s->st.wrong_peer++;
        rx_drop(rx);
        return -ESRCH;
    }
    memcpy(&s->peer, from, fromlen);
    s->peerlen = fromlen;
    s->peer_cid = hl.src_cid;
    s->rcv_nxt = h->sn;
    set_peer_mss(s, hl.mss);
    s->peer_wnd = h->wnd;
    s->peer_edge = s->snd_una + h->wnd;
    s->ts_recent = h->ts;
    s->state = ST_SYN_RCVD;
    s->last_rx_us = now;
    s->hs_deadline = now + hs_interval(s);
    s->ack_now = true;
    s->st.dgrams_rx++;
    rx_drop(rx);
    return 0;
}

static int input(zbuf_udpstream_t *s, struct zus_rx *rx, const struct sockaddr *from,
                 socklen_t fromlen, bool ack_only)
{
    struct zus_hdr h;
    int rc = rx->z ? zbuf__us_parse(rx->z, &h) : zbuf__us_parse_mem(rx->p, rx->len, &h);
    if (rc < 0) {
        s->st.bad_dgrams++;
        rx_drop(rx);
        return rc;
    }
    uint64_t now = now_us(s);
    struct zus_hello hl;
    if (s->state == ST_LISTEN)
        return input_listen(s, rx, &h, from, fromlen, now);
    if (!same_addr(&s->peer, from, fromlen)) {
        s->st.wrong_peer++;
        rx_drop(rx);
        return -ESRCH;
    }
    if (h.type == ZUS_SYN) {
        /* A retransmitted request of our peer gets the answer again. */
        if (s->state == ST_SYN_RCVD && hello_from(rx, &h, &hl) == 0 &&
            hl.src_cid == s->peer_cid) {
            s->ack_now = true;
            s->st.dgrams_rx++;
            rx_drop(rx);
            return 0;
        }
        s->st.wrong_peer++;
        rx_drop(rx);
        return -ESRCH;
    }
    if (h.cid == s->cid && s->state == ST_CLOSED && h.type == ZUS_DATA &&
        zus_diff(h.sn, s->rcv_nxt) < 0) {
        /* Closed, and the peer resends: our last ACK was lost.  Answer
         * for as long as the application keeps the stream. */
        struct batch b;
        batch_init(&b);
        s->st.dup_rx++;
        rx_drop(rx);
        if (send_control(s, &b, ZUS_ACK, now) == 0)
            transmit(s, &b);
        return 0;
    }
    if (h.cid != s->cid || s->state >= ST_CLOSED) {
        s->st.wrong_peer++;
        rx_drop(rx);
        return -ESRCH;
    }
    if (h.type == ZUS_SYNACK) {
        if (hello_from(rx, &h, &hl) < 0) {
            s->st.bad_dgrams++;
            rx_drop(rx);
            return -EBADMSG;
        }
        if (s->state == ST_SYN_SENT) {
            s->peer_cid = hl.src_cid;
            s->rcv_nxt = h.sn;
            set_peer_mss(s, hl.mss);
            s->state = ST_OPEN;
            s->connected = true;
            s->peer_edge = s->snd_una;
        } else if (hl.src_cid != s->peer_cid) {
            s->st.wrong_peer++;
            rx_drop(rx);
            return -ESRCH;
        }
        s->ack_now = true; /* (again, if our first ACK was lost) */
    } else if (s->state == ST_SYN_SENT) {
        s->st.wrong_peer++; /* nothing but the answer is expected yet */
        rx_drop(rx);
        return -ESRCH;
    } else if (s->state == ST_SYN_RCVD) {
        s->state = ST_OPEN;
        s->connected = true;
    }
    s->st.dgrams_rx++;
    s->last_rx_us = now;
    s->probe_out = false;
    if (zus_diff(h.ts, s->ts_recent) > 0 || s->ts_recent == 0)
        s->ts_recent = h.ts;
    if (h.type == ZUS_RST) {
        rx_drop(rx);
        fail(s, -ECONNRESET);
        return 0;
    }
    take_ack(s, &h, now);
    if (h.type == ZUS_PING)
        s->ack_now = true;
    if (h.type == ZUS_DATA) {
        if (ack_only) {
            s->st.no_buffer++;
            rx_drop(rx);
        } else {
            take_data(s, &h, rx, zbuf__us_hdr_size(&h), now);
        }
    } else {
        rx_drop(rx);
    }
    rearm_probe(s, now);
    check_closed(s, now);
    return 0;
}

int zbuf_udpstream_input(zbuf_udpstream_t *s, zbuf_t *dgram, const struct sockaddr *from,
                         socklen_t fromlen)
{
    if (s == NULL || dgram == NULL) {
        zbuf_delete(dgram);
        return -EINVAL;
    }
    struct zus_rx rx = {.z = dgram};
    int rc = input(s, &rx, from, fromlen, false);
    notify(s);
    return rc;
}

int zbuf__us_input_rx(zbuf_udpstream_t *s, struct zus_rx *rx, const struct sockaddr *from,
                      socklen_t fromlen, bool ack_only)
{
    int rc = input(s, rx, from, fromlen, ack_only);
    notify(s);
    return rc;
}

/* ------------------------------------------------------------ life cycle */

int zbuf__us_create(const zbuf_udpstream_opts_t *o, const zbuf_udpstream_transport_t *t,
                    void *ctx, const struct sockaddr *peer, socklen_t peerlen,
                    zbuf_udpstream_t **out)
{
    zbuf_udpstream_opts_t def;
    if (o == NULL) {
        zbuf_udpstream_opts_init(&def);
        o = &def;
    }
    if (t == NULL || t->send == NULL || out == NULL || check_opts(o) < 0 ||
        (peer != NULL && (peerlen == 0 || peerlen > sizeof(struct sockaddr_storage))))
        return -EINVAL;
    zbuf_udpstream_t *s = calloc(1, sizeof *s);
    if (s == NULL)
        return -ENOMEM;
    s->o = *o;
    if (s->o.clock == NULL)
        s->o.clock = zbuf__us_default_clock;
    s->t = *t;
    s->tctx = ctx;
    s->ts.fd = -1;
    uint32_t sw = pow2_at_least(o->snd_wnd), rw = pow2_at_least(o->rcv_wnd);
    s->segs = calloc(sw, sizeof *s->segs);
    s->ooo = calloc(rw, sizeof *s->ooo);
    if (s->segs == NULL || s->ooo == NULL || zbuf_create(&s->sndq) < 0 ||
        zbuf_create(&s->rcvq) < 0) {
        free(s->segs);
        free(s->ooo);
        zbuf_delete(s->sndq);
        free(s);
        return -ENOMEM;
    }
    s->smask = sw - 1;
    s->rmask = rw - 1;
    s->rx_mss = o->mtu - 28 - ZBUF_UDPSTREAM_HEADER;
    s->mss = s->rx_mss;
    s->cid = rand32();
    s->isn = rand32();
    s->snd_una = s->snd_nxt = s->snd_end = s->isn;
    zbuf__us_rtt_init(&s->rtt, o->rto_initial_ms * 1000u, o->rto_min_ms * 1000u,
                      o->rto_max_ms * 1000u);
    zbuf__us_cc_init(&s->cc, o->no_congestion_control);
    zbuf__us_ring_init(&s->snd_ring, RING_CHUNK);
    zbuf__us_ring_init(&s->rcv_ring, RING_CHUNK);
    uint64_t now = now_us(s);
    s->last_rx_us = now;
    if (peer != NULL) {
        memcpy(&s->peer, peer, peerlen);
        s->peerlen = peerlen;
        s->state = ST_SYN_SENT;
        s->hs_deadline = now + hs_interval(s);
    } else {
        s->state = ST_LISTEN;
    }
    *out = s;
    return 0;
}

int zbuf__us_start(zbuf_udpstream_t *s)
{
    if (s->state != ST_SYN_SENT)
        return 0;
    struct batch b;
    batch_init(&b);
    uint64_t now = now_us(s);
    int rc = send_control(s, &b, ZUS_SYN, now);
    if (rc == 0) {
        int k = send_batch(s, &b);
        if (k > 0)
            s->st.dgrams_tx += (unsigned)k;
        else if (k < 0 && k != -EAGAIN && k != -ENOBUFS)
            rc = k;
    }
    return rc;
}

int zbuf_udpstream_create(const zbuf_udpstream_opts_t *o, const zbuf_udpstream_transport_t *t,
                          void *ctx, const struct sockaddr *peer, socklen_t peerlen,
                          zbuf_udpstream_t **out)
{
    zbuf_udpstream_t *s;
    int rc = zbuf__us_create(o, t, ctx, peer, peerlen, &s);
    if (rc < 0)
        return rc;
    s->t.close = NULL; /* a failed start must not close the caller's transport */
    rc = zbuf__us_start(s);
    if (rc < 0) {
        zbuf_udpstream_delete(s);
        return rc;
    }
    s->t.close = t->close;
    *out = s;
    return 0;
}

void zbuf_udpstream_delete(zbuf_udpstream_t *s)
{
    if (s == NULL)
        return;
    drop_queues(s);
    zbuf_delete(s->sndq);
    zbuf_delete(s->rcvq);
    zbuf__us_ring_free(&s->snd_ring);
    zbuf__us_ring_free(&s->rcv_ring);
    if (s->t.close)
        s->t.close(s->tctx);
    free(s->segs);
    free(s->ooo);
    free(s);
}

int zbuf_udpstream_process(zbuf_udpstream_t *s)
{
    if (s == NULL)
        return -EINVAL;
    /* The application had its turn since in-order data came in without
     * answering it: acknowledge now. */
    if (s->ack_owed)
        s->ack_now = true;
    if (s->t.recv != NULL) {
        for (int i = 0; i < RECV_ROUNDS && s->state < ST_CLOSED; i++) {
            int n = s->t.recv(s->tctx, s);
            if (s->ack_now && s->state >= ST_SYN_RCVD)
                output(s, now_us(s));
            if (n < ZUS_RECV_BATCH)
                break;
        }
    }
    uint64_t now = now_us(s);
    struct batch b;
    batch_init(&b);
    run_timers(s, now, &b);
    transmit(s, &b);
    output(s, now);
    rearm_probe(s, now);
    check_closed(s, now);
    notify(s);
    return s->err;
}

int zbuf_udpstream_fd(const zbuf_udpstream_t *s)
{
    return s ? s->ts.fd : -1;
}

unsigned zbuf_udpstream_poll_events(const zbuf_udpstream_t *s)
{
    if (s == NULL)
        return 0;
    return POLLIN | (s->ts.want_pollout ? POLLOUT : 0);
}

/* --------------------------------------------------------- reading, writing */

/*
 * Copy @len bytes (from @data, or from @src) into the send ring, behind
 * the queued bytes.  On failure (no memory for a chunk or a segment) the
 * queue is put back as it was: the bytes of this call leave the open run,
 * or the queue if they had reached it.
 */
static int copy_in(zbuf_udpstream_t *s, const void *data, const zbuf_t *src, size_t len)
{
    struct zus_ring *r = &s->snd_ring;
    size_t q0 = zbuf_length(s->sndq), run0 = r->run_z == s->sndq ? r->run_len : 0;
    uint32_t cur0 = r->cur;
    int rc = zbuf__us_ring_append(r, s->sndq, data, src, 0, len);
    if (rc == 0) {
        count_copy(s, len);
        return 0;
    }
    if (zbuf_length(s->sndq) == q0 && r->cur == cur0) {
        r->pos -= r->run_len - run0; /* all of it is still in the open run */
        r->run_len = run0;
        if (run0 == 0)
            r->run_z = NULL;
    } else {
        zbuf__us_ring_drop_run(r);
        zbuf_cut(s->sndq, q0 + run0, ZBUF_TO_END, NULL); /* the tail: no allocation */
    }
    return rc;
}

/* Whether a write may be taken now: 0, or why not. */
static int write_ready(const zbuf_udpstream_t *s)
{
    if (s->err)
        return s->err;
    if (s->fin_queued || s->state > ST_OPEN)
        return -EPIPE;
    return s->queued >= s->o.sndbuf ? -EAGAIN : 0;
}

/* @len more bytes are queued: account for them and send (unless corked). */
static void written(zbuf_udpstream_t *s, size_t len)
{
    s->queued += len;
    s->st.bytes_written += len;
    uint64_t now = now_us(s);
    if (!s->o.cork)
        output(s, now);
    rearm_probe(s, now);
    notify(s);
}

int zbuf_udpstream_write(zbuf_udpstream_t *s, zbuf_t *z)
{
    if (s == NULL || z == NULL)
        return -EINVAL;
    int rc = write_ready(s);
    if (rc < 0)
        return rc;
    size_t len = zbuf_length(z);
    if (len > 0 && copies_payload(s, len)) {
        rc = copy_in(s, NULL, z, len);
        if (rc < 0)
            return rc;
        zbuf_delete(z); /* the caller's buffers are released now */
    } else {
        rc = zbuf__us_ring_flush(&s->snd_ring); /* bytes copied before go first */
        if (rc == 0)
            rc = zbuf_append(s->sndq, z);
        if (rc < 0)
            return rc;
    }
    written(s, len);
    return 0;
}

ssize_t zbuf_udpstream_write_copy(zbuf_udpstream_t *s, const void *data, size_t len)
{
    if (s == NULL || (data == NULL && len > 0))
        return -EINVAL;
    if (len == 0)
        return 0;
    int rc = write_ready(s);
    if (rc < 0)
        return rc;
    if (s->o.mode == ZBUF_UDPSTREAM_ZEROCOPY || !copies_payload(s, len)) {
        /* One copy into a buffer of its own, then by reference. */
        zbuf_t *z = NULL;
        rc = zbuf_create(&z);
        if (rc == 0)
            rc = zbuf_append_copy(z, data, len);
        if (rc == 0)
            rc = zbuf_udpstream_write(s, z);
        if (rc < 0) {
            zbuf_delete(z);
            return rc;
        }
        count_copy(s, len);
        return (ssize_t)len;
    }
    rc = copy_in(s, data, NULL, len);
    if (rc < 0)
        return rc;
    written(s, len);
    return (ssize_t)len;
}

/* After a read: tell the peer when the window reopened. */
static void after_read(zbuf_udpstream_t *s, size_t n)
{
    s->st.bytes_read += n;
    uint32_t quarter = (s->rmask + 1) / 4;
    if (s->state == ST_OPEN && s->adv_wnd < quarter && rcv_window(s, true) >= quarter) {
        s->ack_now = true;
        output(s, now_us(s));
    }
    notify(s);
}

/* How much a read may take now, or a negative errno / 0 at the end. */
static ssize_t read_amount(const zbuf_udpstream_t *s, size_t min, size_t max)
{
    size_t have = zbuf_length(s->rcvq);
    if (have == 0)
        return s->eof ? 0 : s->err ? s->err : -EAGAIN;
    if (have < min && !s->eof && !s->err)
        return -EAGAIN;
    return (ssize_t)(have < max ? have : max);
}

ssize_t zbuf_udpstream_read(zbuf_udpstream_t *s, size_t min, size_t max, zbuf_t **out)
{
    if (s == NULL || out == NULL || max == 0 || min > max)
        return -EINVAL;
    ssize_t n = read_amount(s, min, max);
    if (n <= 0)
        return n;
    zbuf_t *z;
    int rc;
    if (s->o.mode == ZBUF_UDPSTREAM_COPY) {
        /* The classic design: the caller's buffer gets a copy of the ring. */
        zbuf_buf_t *b;
        rc = zbuf_buf_alloc((size_t)n, &b);
        if (rc < 0)
            return rc;
        rc = zbuf_create(&z);
        if (rc == 0) {
            rc = zbuf_append_ref(z, b, 0, (size_t)n);
            if (rc < 0)
                zbuf_delete(z);
        }
        if (rc < 0) {
            zbuf_buf_unref(b);
            return rc;
        }
        zbuf_copyout(s->rcvq, 0, zbuf_buf_data(b), (size_t)n);
        zbuf_buf_unref(b);
        count_copy(s, (size_t)n);
        zbuf_cut(s->rcvq, 0, (size_t)n, NULL);
    } else {
        rc = zbuf_split_head(s->rcvq, (size_t)n, &z);
        if (rc < 0)
            return rc;
    }
    *out = z;
    after_read(s, (size_t)n);
    return n;
}

ssize_t zbuf_udpstream_read_copy(zbuf_udpstream_t *s, void *buf, size_t len)
{
    if (s == NULL || buf == NULL || len == 0)
        return -EINVAL;
    ssize_t n = read_amount(s, 1, len);
    if (n <= 0)
        return n;
    zbuf_copyout(s->rcvq, 0, buf, (size_t)n);
    count_copy(s, (size_t)n);
    zbuf_cut(s->rcvq, 0, (size_t)n, NULL);
    after_read(s, (size_t)n);
    return n;
}

size_t zbuf_udpstream_readable(const zbuf_udpstream_t *s)
{
    return s ? zbuf_length(s->rcvq) : 0;
}

int zbuf_udpstream_shutdown(zbuf_udpstream_t *s)
{
    if (s == NULL)
        return -EINVAL;
    if (s->err)
        return s->err;
    if (s->fin_queued)
        return 0;
    s->fin_queued = true;
    uint64_t now = now_us(s);
    output(s, now);
    rearm_probe(s, now);
    check_closed(s, now);
    notify(s);
    return 0;
}

void zbuf_udpstream_abort(zbuf_udpstream_t *s)
{
    if (s == NULL || s->err)
        return;
    if (s->state >= ST_SYN_RCVD && s->state <= ST_TIME_WAIT) {
        struct batch b;
        batch_init(&b);
        send_control(s, &b, ZUS_RST, now_us(s));
        transmit(s, &b);
    }
    fail(s, -ECONNABORTED);
    notify(s);
}

int zbuf_udpstream_error(const zbuf_udpstream_t *s)
{
    return s ? s->err : -EINVAL;
}

void zbuf__us_dump(const zbuf_udpstream_t *s, FILE *f)
{
    uint64_t now = now_us(s);
    fprintf(f,
            "state %d err %d una %u nxt %u end %u flight %u lost %u peer_wnd %u cwnd %u sndq %zu "
            "run %zu fin q%d m%d a%d | rcv_nxt %u ooo %u rcvq %zu eof %d fin_seen %d | rto in "
            "%lld probe in %lld (out %d wnd %d) ack_now %d last_rx %lld ago backoff %u "
            "rto %u srtt %u\n",
            s->state, s->err, s->snd_una, s->snd_nxt, s->snd_end, s->flight, s->lost, s->peer_wnd,
            s->cc.cwnd, zbuf_length(s->sndq), s->snd_ring.run_len, s->fin_queued, s->fin_made,
            s->fin_acked, s->rcv_nxt, s->ooo_cnt, zbuf_length(s->rcvq), s->eof, s->fin_seen,
            s->flight ? (long long)(s->rto_deadline - now) : -1,
            s->probe_deadline ? (long long)(s->probe_deadline - now) : -1, s->probe_out,
            s->probe_wnd, s->ack_now, (long long)(now - s->last_rx_us), s->backoff,
            s->rtt.rto_us, s->rtt.srtt_us);
}

void zbuf_udpstream_get_stats(const zbuf_udpstream_t *s, zbuf_udpstream_stats_t *st)
{
    if (s == NULL || st == NULL)
        return;
    *st = s->st;
    st->srtt_us = s->rtt.srtt_us;
    st->rto_us = s->rtt.rto_us;
    st->cwnd = s->cc.cwnd;
    st->in_flight = s->flight;
    st->peer_wnd = s->peer_wnd;
    st->mss = s->mss;
    st->gso_sends = s->ts.gso_sends;
}
