/* SPDX-License-Identifier: MIT */
/*
 * Private declarations of the stack's TCP, shared by its files:
 *
 *   tcp.c            the life cycle of a PCB and the calls of <zbuf/ip.h>
 *   tcp_in.c         segment input: demultiplexing, the state machine, the
 *                    processing of an ACK, ICMP errors
 *   tcp_out.c        segment output: headers and options, what goes next
 *                    (lost segments, new data, Nagle, silly-window
 *                    avoidance), resets
 *   tcp_ooo.c        the receive side: receive memory, delivery to the
 *                    application, the out-of-order queue, the SACK and
 *                    D-SACK blocks we send
 *   tcp_recovery.c   the sender's scoreboard and loss recovery: RACK, TLP,
 *                    PRR, undo of spurious episodes (D-SACK, F-RTO, Eifel)
 *   tcp_cc_reno.c    congestion control (NewReno) behind struct
 *                    zbuf_ip__tcp_cc: another algorithm is one more file
 *   tcp_timer.c      the timers and the RTT estimator
 *   tcp_syncookie.c  SYN cookies
 *
 * Names shared between these files are zbuf_ip__tcp_* (hidden); small
 * helpers are static inline here.
 */
#ifndef ZBUF_IP_TCP_INTERNAL_H
#define ZBUF_IP_TCP_INTERNAL_H

#include "stack_internal.h"

/* Sequence number comparisons modulo 2^32 (RFC 9293 3.4). */
#define SEQ_LT(a, b) ((int32_t)((uint32_t)(a) - (uint32_t)(b)) < 0)
#define SEQ_LEQ(a, b) ((int32_t)((uint32_t)(a) - (uint32_t)(b)) <= 0)
#define SEQ_GT(a, b) SEQ_LT(b, a)
#define SEQ_GEQ(a, b) SEQ_LEQ(b, a)

/* ------------------------------------------------------------ segments */

/* A received segment's header, parsed (tcp_in.c). */
struct tcp_seg {
    uint16_t sport, dport;
    uint32_t seq, ack;
    uint8_t flags;
    uint32_t wnd;            /* raw field */
    uint32_t len;            /* payload bytes */
    bool has_mss, has_ws, has_sackok;
    uint16_t mss;
    uint8_t ws;
    unsigned nsack;          /* SACK blocks of this segment */
    uint32_t sack[TCP_SACK_BLOCKS_MAX][2];
    bool has_ts;             /* timestamps option (RFC 7323) */
    uint32_t tsval, tsecr;
};

/* A segment sent and not yet cumulatively acknowledged: one record of the
 * scoreboard (tcp_recovery.c). */
struct txseg {
    uint32_t seq, end; /* [seq, end): end counts a FIN */
    uint64_t xmit;     /* clock of its latest transmission */
    uint8_t flags;     /* TX_* */
};
#define TX_SACKED 0x01      /* the peer reported holding it */
#define TX_LOST 0x02        /* deemed lost: to be sent again */
#define TX_RETRANS 0x04     /* a retransmission of it is in flight (counted in pipe) */
#define TX_EVER_RETRANS 0x08 /* sent more than once (its ACKs are ambiguous) */
#define TX_FIN 0x10         /* ends with our FIN */

/* A segment received out of order (tcp_ooo.c). */
struct ooo {
    uint32_t seq;      /* first byte */
    uint32_t len;      /* payload bytes (zbuf_length(z)) */
    uint32_t charge;   /* what it costs the connection's receive memory */
    bool fin;          /* a FIN follows the last byte */
    zbuf_t *z;         /* payload, the driver's segments */
    struct ooo *next;  /* sorted by seq, no overlap */
};

/* An RTT sample and when it was taken (the windowed min filter). */
struct rtt_at {
    uint32_t rtt; /* ms */
    uint64_t at;  /* clock */
};

/* ------------------------------------------------- congestion control */

struct zbuf_ip_tcp;

/*
 * A congestion control algorithm: what it decides, and nothing else.  The
 * core keeps the rest, which does not depend on the algorithm: loss
 * detection and the recovery state, PRR inside fast recovery (RFC 6937),
 * the loss window of one segment after a timeout (RFC 5681 3.1), the end
 * of fast recovery (cwnd brought to ssthresh), and the undo of an episode
 * found spurious (cwnd and ssthresh restored).  Another algorithm is one
 * file defining one of these tables, with its state in `cc.priv`; a PCB
 * takes its table in zbuf_ip__tcp_defaults().
 */
struct zbuf_ip__tcp_cc {
    const char *name;
    /* The connection is established: set cc.cwnd and cc.ssthresh. */
    void (*init)(struct zbuf_ip_tcp *t);
    /* A loss episode starts (fast recovery, a timeout, a loss probe that
     * repaired a loss): the new ssthresh. */
    uint32_t (*ssthresh)(struct zbuf_ip_tcp *t);
    /* Outside recovery, an ACK took `acked` new bytes off the flight;
     * `losses`: it also found losses, or lost segments still wait to go
     * again.  Grow cc.cwnd as the algorithm does. */
    void (*on_ack)(struct zbuf_ip_tcp *t, uint32_t acked, bool losses);
};
ZBUF_IP__HIDDEN extern const struct zbuf_ip__tcp_cc zbuf_ip__tcp_reno;

/* ----------------------------------------------------------- timers */

/* A PCB's timers (tcp_timer.c): absolute clock values, 0 when off. */
enum tcp_timer {
    TCP_T_RTX,     /* retransmission timeout (RFC 6298) */
    TCP_T_PERSIST, /* zero-window probe */
    TCP_T_DELACK,  /* delayed ACK */
    TCP_T_2MSL,    /* TIME_WAIT, or an orphaned FIN_WAIT_2 */
    TCP_T_KEEP,    /* next keepalive probe */
    TCP_T_RACK,    /* RACK reordering window of a segment not yet deemed lost */
    TCP_T_TLP,     /* tail loss probe */
    TCP_NTIMERS
};

/* ------------------------------------------------------------------ PCB */

/* Every field's group is one concern, with its invariants beside it; the
 * file that owns the concern is named in the group's comment. */
struct zbuf_ip_tcp {
    /* Identity and life cycle (tcp.c). */
    zbuf_ip_stack_t *stack;
    struct zbuf_ip_tcp *next;       /* stack's list */
    uint8_t state;                  /* zbuf_ip_tcp_state_t */
    bool dead;                      /* freed at the next reap; invisible to lookups,
                                       its buffers and scoreboard already gone */
    bool app_closed;                /* zbuf_ip_tcp_close() called: no more callbacks */
    bool orphan;                    /* given up but still sending (zbuf_ip__tcp_set_orphan()) */
    bool bound;
    bool nodelay;
    uint32_t laddr, raddr;
    uint16_t lport, rport;
    zbuf_ip_tcp_callbacks_t cb;
    void *arg;
    uint64_t born;                  /* clock at creation (early drop takes the oldest) */
    int soft_err;                   /* latest ICMP soft error (reported on a timeout) */
    uint64_t retransmits;
    struct zbuf_ip__txroute txr;    /* where its segments go (tcp_out.c, zbuf_ip__route_ready()) */

    /* A listener's half-open children (tcp_in.c, tcp_syncookie.c). */
    struct zbuf_ip_tcp *listener;   /* SYN_RCVD child: its listener, until accepted */
    unsigned backlog, pending;      /* listener: limit, children not yet accepted */
    uint64_t cookies_at;            /* listener: clock of its latest SYN cookie.. */
    bool cookies_sent;              /* ..if any (cookie ACKs are taken only then) */
    bool cookie;                    /* made from a SYN cookie (no SYN-ACK RTT sample) */

    /* Options agreed in the handshake (tcp_in.c). */
    bool ws_ok;                     /* both sides sent window scale */
    bool sack_ok;                   /* both sides sent SACK-permitted: our ACKs carry
                                       SACK blocks describing the out-of-order queue */
    uint8_t snd_wscale, rcv_wscale; /* shifts: peer's window field, our window field;
                                       both 0 unless ws_ok */

    /* Send sequence space (tcp_out.c).  snd_una <= snd_max; snd_max is the
     * next new byte (retransmissions go from the scoreboard, never by moving
     * back); byte i of sndq has sequence number snd_una + i. */
    uint32_t iss, snd_una, snd_max;
    uint32_t snd_wnd, max_snd_wnd, snd_wl1, snd_wl2;
    uint16_t mss;                   /* send MSS: the peer's, clamped, less options;
                                       at least ZBUF_IP_TCP_MIN_MSS */
    uint16_t mss_clamp;             /* the peer's MSS clamped to our interface (no options) */
    uint16_t pmtu;                  /* path MTU: the interface's, or lower (ICMP, RFC 1191) */
    zbuf_t *sndq;                   /* unacknowledged and unsent bytes from snd_una */
    uint32_t snd_buf;
    bool fin_queued;                /* the application shut down its direction */
    bool fin_acked;                 /* our FIN was acknowledged */
    bool output_pending;            /* burst limit hit: continue on the next poll */
    uint8_t nrexmit;                /* consecutive timeouts of the same data */
    uint8_t persist_shift;          /* backoff of the zero-window probes */

    /* The scoreboard (tcp_recovery.c): records of the segments in flight,
     * a ring of `cap` (a power of two, or 0) entries, `n` used from `head`,
     * in sequence order, covering exactly [snd_una, snd_max).  The byte
     * counters are the sums of the records' lengths over their flags. */
    struct {
        struct txseg *rec;
        uint32_t cap, head, n;
        uint32_t sacked_out, lost_out, retrans_out;
    } rq;

    /* Loss recovery (tcp_recovery.c). */
    bool in_recovery;               /* fast recovery (PRR) until snd_una passes recover */
    uint32_t recover;               /* snd_max when the latest episode began (RFC 6582) */
    uint8_t dupacks;

    /* Congestion control (tcp_cc_*.c through `ops`; the core sets cwnd in
     * recovery and after a timeout). */
    struct {
        const struct zbuf_ip__tcp_cc *ops;
        uint32_t cwnd, ssthresh;
        /* Slow start after a timeout, until snd_una passes `recover`
         * (snd_max at the timeout): at most one segment per ACK (RFC 3465
         * 2.3, L = 1 SMSS). */
        bool after_rto;
        uint64_t priv[4];           /* the algorithm's own state */
    } cc;

    /* PRR (RFC 6937), valid while in_recovery. */
    struct {
        uint32_t delivered, out;    /* bytes the peer delivered, we sent, since it began */
        uint32_t recover_fs;        /* the flight when it began */
    } prr;

    /* RACK (RFC 8985): the most recently sent segment the peer delivered,
     * and the reordering window.  D-SACKs grow the window by min_rtt/4 per
     * round trip, for 16 recoveries (6.2 step 4). */
    struct {
        bool valid;                 /* xmit, end and rtt describe a delivered segment */
        bool reordering_seen;       /* the peer delivered out of sending order */
        uint64_t xmit;
        uint32_t end, rtt;
        uint32_t fack;              /* highest end delivered */
        uint8_t reo_wnd_mult;       /* >= 1 */
        uint8_t reo_wnd_persist;    /* recoveries left before the multiplier resets */
        bool dsack_round_set;
        uint32_t dsack_round;       /* no more growth until snd_una passes it */
    } rack;

    /* Tail loss probe (RFC 8985 7). */
    struct {
        bool valid;                 /* a probe is out, until snd_una passes `end` */
        bool retrans;               /* ..and it was a retransmission */
        bool in_recovery;           /* ..sent in recovery or after a timeout */
        uint32_t end;               /* snd_max after the probe */
        uint32_t tsval;             /* TSval the probe carried */
    } tlp;

    /* Undo of a spurious episode: a recovery whose retransmissions were all
     * reported duplicate by D-SACK (RFC 3708), or a timeout found spurious
     * by Eifel (RFC 3522, with timestamps) or F-RTO (RFC 5682, without). */
    struct {
        bool ok;                    /* the episode may still be undone */
        bool rto;                   /* ..and it is a timeout */
        uint32_t lo, hi;            /* its sequence range */
        uint32_t retrans;           /* its retransmissions not yet D-SACKed.. */
        uint32_t sent;              /* ..of so many sent */
        uint32_t prior_cwnd, prior_ssthresh; /* cc before it */
        bool eifel;                 /* Eifel waits for the first ACK of new data */
        uint8_t frto;               /* F-RTO step: 0 off, 1 retransmitted, 2 new data sent */
        uint32_t rto_tsval;         /* TSval of the first retransmission after the timeout */
        uint32_t rto_high;          /* snd_max at the timeout (RFC 5682 "recover") */
        uint32_t prior_recover;     /* recover before the timeout */
        uint32_t prior_rto;         /* RTO before its backoff */
        uint32_t frto_sacked;       /* bytes below rto_high SACKed at F-RTO step 2 */
    } undo;

    /* RTT estimator (tcp_timer.c; RFC 6298, the min filter of RFC 8985). */
    struct {
        uint32_t srtt8, rttvar4;    /* srtt*8, rttvar*4, ms: valid when `have` */
        uint32_t rto;               /* ms, at most ZBUF_IP_TCP_RTO_MAX_MS */
        bool have;                  /* srtt8 and rttvar4 hold a sample */
        bool timing;                /* without timestamps: `seq` is timed (Karn:
                                       never a segment sent twice) */
        uint32_t seq;               /* sample once the ACK passes it */
        uint64_t start;             /* when the timed segment (or our SYN) left */
        uint32_t min;               /* windowed minimum, ms (UINT32_MAX: none) */
        struct rtt_at min_s[3];     /* the min filter's best, second, third choice */
    } rtt;

    /* Timestamps (RFC 7323). */
    struct {
        bool ok;                    /* both sides sent them: every non-RST carries them */
        uint32_t off;               /* our TSval = clock + off */
        bool recent_set;            /* `recent` holds a value */
        uint32_t recent;            /* TS.Recent: the peer's TSval to echo */
        uint64_t recent_age;        /* clock when `recent` was set */
        uint32_t last_ack_sent;     /* Last.ACK.sent: rcv_nxt in our latest ACK */
        bool syn_set;               /* a SYN-ACK carries syn_val (a cookie's options) */
        uint32_t syn_val;
    } ts;

    /* The per-connection limit on ACKs that unacceptable segments draw
     * (PAWS drops, out-of-window segments, challenges; tcp_in.c). */
    struct {
        bool sent;                  /* one went out at `at` */
        uint64_t at;
    } oow;

    /* Receive sequence space (tcp_in.c).  rcv_adv: the right edge
     * advertised, never moves left. */
    uint32_t irs, rcv_nxt, rcv_adv;
    uint32_t rcv_buf;
    bool fin_rcvd;                  /* the peer's FIN was taken in order */
    bool ack_now;                   /* send an ACK at the end of this step */
    unsigned segs_unacked;          /* in-order segments since our last ACK */
    bool ack_owed;                  /* on stack->acks_owed: ACK at the batch's end */
    struct zbuf_ip_tcp *ack_next;   /* next on stack->acks_owed */

    /* Receive memory (tcp_ooo.c; <zbuf/ip_opts.h>, ZBUF_IP_TCP_RCV_MEM_MULT):
     * held_charge + ooo_charge is what the connection pins, against
     * `limit`; `ratio` is payload per charge seen lately, in 1/256, >= 1
     * (the window follows it). */
    struct {
        size_t held;                /* delivered, not yet zbuf_ip_tcp_recved() */
        size_t held_charge, ooo_charge;
        uint32_t limit;
        uint32_t ratio;
        uint64_t ratio_len, ratio_charge; /* sums of the segments since ratio moved.. */
        unsigned ratio_n;                 /* ..and how many (it moves every 16) */
    } rmem;

    /* The out-of-order queue (tcp_ooo.c): at most ZBUF_IP_TCP_OOO_SEGS
     * entries, sorted, without overlap, all beyond rcv_nxt. */
    struct {
        struct ooo *head;
        unsigned n;
        size_t bytes;               /* sum of their lengths */
        uint32_t last;              /* first byte of the latest segment queued (its
                                       block is reported first, RFC 2018) */
    } ooo;

    /* A D-SACK block we owe the peer (RFC 2883): bytes received twice. */
    struct {
        bool pending;
        uint32_t lo, hi;
    } dsack;

    /* Keepalive (tcp_timer.c; off while idle is 0). */
    struct {
        uint32_t idle, intvl;
        unsigned count, sent;
    } keep;

    uint64_t timer[TCP_NTIMERS];    /* enum tcp_timer */
};

/* --------------------------------------------------------------- helpers */

static inline uint32_t umin32(uint32_t a, uint32_t b)
{
    return a < b ? a : b;
}

static inline bool synchronized(const zbuf_ip_tcp_t *t)
{
    return t->state >= ZBUF_IP_TCP_ESTABLISHED;
}

/* States in which data and a FIN may be sent. */
static inline bool tcp_can_send_data(const zbuf_ip_tcp_t *t)
{
    switch (t->state) {
    case ZBUF_IP_TCP_ESTABLISHED:
    case ZBUF_IP_TCP_CLOSE_WAIT:
    case ZBUF_IP_TCP_FIN_WAIT_1:
    case ZBUF_IP_TCP_CLOSING:
    case ZBUF_IP_TCP_LAST_ACK:
        return true;
    default:
        return false;
    }
}

/* Our TSval for a transmission at clock value `ms`. */
static inline uint32_t ts_val(const zbuf_ip_tcp_t *t, uint64_t ms)
{
    return (uint32_t)ms + t->ts.off;
}

/* Our receive window scale: the smallest shift that expresses rcv_buf. */
static inline uint8_t our_wscale(uint32_t rcv_buf)
{
    uint8_t sh = 0;
    while (sh < ZBUF_IP_TCP_MAX_WSCALE && (rcv_buf >> sh) > 65535)
        sh++;
    return sh;
}

/* Will in-order payload be kept (by the application) or dropped at once? */
static inline bool rcv_keeps(const zbuf_ip_tcp_t *t)
{
    return !(t->app_closed || t->cb.recv == NULL || t->fin_rcvd);
}

/* Receive memory: `*field` (rmem.held_charge or rmem.ooo_charge) grows or
 * shrinks by `n`, and the stack's gauge with it. */
static inline void tcp_mem_add(zbuf_ip_tcp_t *t, size_t *field, size_t n)
{
    *field += n;
    t->stack->st.tcp_rcv_mem_held += n;
}

static inline void tcp_mem_sub(zbuf_ip_tcp_t *t, size_t *field, size_t n)
{
    *field -= n;
    t->stack->st.tcp_rcv_mem_held -= n;
}

/* Scoreboard record i (0: the oldest). */
static inline struct txseg *rq_at(const zbuf_ip_tcp_t *t, uint32_t i)
{
    return &t->rq.rec[(t->rq.head + i) & (t->rq.cap - 1)];
}

static inline uint32_t seg_len(const struct txseg *r)
{
    return r->end - r->seq;
}

/* Bytes in the network (RFC 6675 pipe).  A peer without SACK reports
 * nothing above a hole, so each duplicate ACK counts as one segment that
 * left the network (what RFC 3042 and NewReno's inflation amount to). */
static inline uint32_t tcp_pipe(const zbuf_ip_tcp_t *t)
{
    int64_t p = (int64_t)(uint32_t)(t->snd_max - t->snd_una) - t->rq.sacked_out -
                t->rq.lost_out + t->rq.retrans_out;
    if (!t->sack_ok)
        p -= (int64_t)t->dupacks * t->mss;
    return p > 0 ? (uint32_t)p : 0;
}

static inline void tcp_timer_set(zbuf_ip_tcp_t *t, enum tcp_timer k, uint64_t at)
{
    t->timer[k] = at;
    if (at < t->stack->tcp_next)
        t->stack->tcp_next = at;
}

static inline void tcp_timer_stop(zbuf_ip_tcp_t *t, enum tcp_timer k)
{
    t->timer[k] = 0;
}

static inline bool tcp_timer_armed(const zbuf_ip_tcp_t *t, enum tcp_timer k)
{
    return t->timer[k] != 0;
}

/* The retransmission timer from now (RFC 6298 5.1, 5.3). */
static inline void tcp_rtx_restart(zbuf_ip_tcp_t *t)
{
    tcp_timer_set(t, TCP_T_RTX, t->stack->now + t->rtt.rto);
}

/* ------------------------------------------------------------ tcp.c */

/* A PCB with every default, linked into the stack (it may recycle a
 * TIME_WAIT or half-open one); NULL at the PCB limit or without memory. */
ZBUF_IP__HIDDEN zbuf_ip_tcp_t *zbuf_ip__tcp_alloc(zbuf_ip_stack_t *s);
/* What every PCB starts with (also the SYN-cookie answer's stand-in). */
ZBUF_IP__HIDDEN void zbuf_ip__tcp_defaults(zbuf_ip_stack_t *s, zbuf_ip_tcp_t *t);
/* Mark `t` for freeing: from now on it is invisible and silent.  Buffers it
 * holds are dropped at once (release callbacks of unacknowledged data run
 * now). */
ZBUF_IP__HIDDEN void zbuf_ip__tcp_kill(zbuf_ip_tcp_t *t);
/* The connection failed: tell the application (unless it closed), kill. */
ZBUF_IP__HIDDEN void zbuf_ip__tcp_fail(zbuf_ip_tcp_t *t, int err);
/* The connection ended normally: killed if the application gave it back,
 * else CLOSED until it does. */
ZBUF_IP__HIDDEN void zbuf_ip__tcp_finish(zbuf_ip_tcp_t *t);
/* The per-connection offset of the timestamp clock (RFC 7323 5.4). */
ZBUF_IP__HIDDEN void zbuf_ip__tcp_ts_setup(zbuf_ip_tcp_t *t);

/* ---------------------------------------------------------- tcp_in.c */

/* `t`, a new child of listener `l`, from the peer's SYN `sg` (`src`, `dst`
 * its addresses), in SYN_RCVD with `iss`; `linked`: `t` is a real PCB the
 * listener counts (not a SYN cookie answer's stand-in). */
ZBUF_IP__HIDDEN void zbuf_ip__tcp_child_init(zbuf_ip_tcp_t *l, zbuf_ip_tcp_t *t,
                                             const struct tcp_seg *sg, uint32_t src,
                                             uint32_t dst, uint32_t iss, bool linked);
/* A segment for a connection past SYN_SENT (consumes z). */
ZBUF_IP__HIDDEN void zbuf_ip__tcp_conn_input(zbuf_ip_tcp_t *t, zbuf_t *z, struct tcp_seg *sg);
/* The peer's FIN, in order. */
ZBUF_IP__HIDDEN void zbuf_ip__tcp_take_fin(zbuf_ip_tcp_t *t);

/* --------------------------------------------------------- tcp_out.c */

/* Build and send one segment: a header with the options this segment
 * carries, and sndq[off, off + len) shared.  0 or a negative errno (nothing
 * sent). */
ZBUF_IP__HIDDEN int zbuf_ip__tcp_emit(zbuf_ip_tcp_t *t, uint32_t seq, uint8_t flags, size_t off,
                                      size_t len);
/* Our SYN, or SYN-ACK in SYN_RCVD. */
ZBUF_IP__HIDDEN void zbuf_ip__tcp_send_syn(zbuf_ip_tcp_t *t);
/* The first SYN or SYN-ACK of a connection: sent, the retransmission timer
 * armed, and its time kept for the handshake's RTT sample. */
ZBUF_IP__HIDDEN void zbuf_ip__tcp_syn_start(zbuf_ip_tcp_t *t);
/* A RST in answer to a segment no connection takes (RFC 9293 3.10.7.1). */
ZBUF_IP__HIDDEN void zbuf_ip__tcp_send_reset(zbuf_ip_stack_t *s, uint32_t src, uint32_t dst,
                                             uint16_t sport, uint16_t dport, uint32_t seq,
                                             uint32_t ack, uint8_t flags);
/* The window field to send now; moves rcv_adv. */
ZBUF_IP__HIDDEN uint16_t zbuf_ip__tcp_rcv_window(zbuf_ip_tcp_t *t, bool syn);
/* Send the segment of record `r` again.  Whether anything went. */
ZBUF_IP__HIDDEN bool zbuf_ip__tcp_resend(zbuf_ip_tcp_t *t, struct txseg *r);
/* Send up to `len` new bytes (and a FIN that follows them) with a record.
 * Returns the sequence space sent. */
ZBUF_IP__HIDDEN size_t zbuf_ip__tcp_send_new(zbuf_ip_tcp_t *t, size_t len);
/* Send what may go now: lost segments, new data, an ACK owed.  Returns the
 * segments sent (not counting a pure ACK). */
ZBUF_IP__HIDDEN int zbuf_ip__tcp_output(zbuf_ip_tcp_t *t);

/* --------------------------------------------------------- tcp_ooo.c */

/* Room for more received bytes (window and receive memory). */
ZBUF_IP__HIDDEN uint32_t zbuf_ip__tcp_rcv_space(const zbuf_ip_tcp_t *t);
/* Admit payload `z` (in order, or out of order at `seq`) into the
 * receive memory.  Returns its charge, or 0 when it must be dropped. */
ZBUF_IP__HIDDEN size_t zbuf_ip__tcp_rcv_admit(zbuf_ip_tcp_t *t, zbuf_t *z, bool ooo, uint32_t seq);
/* Hand in-order payload to the application (consumes z), charging `charge`. */
ZBUF_IP__HIDDEN void zbuf_ip__tcp_deliver(zbuf_ip_tcp_t *t, zbuf_t *z, size_t charge);
/* Queue an out-of-order segment (consumes z). */
ZBUF_IP__HIDDEN void zbuf_ip__tcp_ooo_insert(zbuf_ip_tcp_t *t, uint32_t seq, zbuf_t *z, bool fin);
/* Deliver what the queue now holds in order. */
ZBUF_IP__HIDDEN void zbuf_ip__tcp_ooo_drain(zbuf_ip_tcp_t *t);
/* Free the whole queue. */
ZBUF_IP__HIDDEN void zbuf_ip__tcp_ooo_clear(zbuf_ip_tcp_t *t);
/* Bytes [lo, hi) arrived a second time: a D-SACK block is owed. */
ZBUF_IP__HIDDEN void zbuf_ip__tcp_note_dsack(zbuf_ip_tcp_t *t, uint32_t lo, uint32_t hi);
/* Whether an ACK owes SACK blocks (out-of-order data, or a D-SACK). */
static inline bool tcp_sack_owed(const zbuf_ip_tcp_t *t)
{
    return t->sack_ok && (t->ooo.head != NULL || t->dsack.pending);
}
/* Bytes of the SACK option a full ACK would carry now (0 if none owed). */
ZBUF_IP__HIDDEN uint32_t zbuf_ip__tcp_sack_len(const zbuf_ip_tcp_t *t);
/* Write the SACK option beside `len` payload bytes into `o`; its length. */
ZBUF_IP__HIDDEN size_t zbuf_ip__tcp_sack_option(zbuf_ip_tcp_t *t, uint8_t *o, size_t len);

/* ---------------------------------------------------- tcp_recovery.c */

/* Room for one more scoreboard record (grows the ring); false when memory
 * or ZBUF_IP_TCP_TX_SEGS_MAX says no. */
ZBUF_IP__HIDDEN bool zbuf_ip__tcp_rq_room(zbuf_ip_tcp_t *t);
/* Room for `k` more records, growing the ring as far as it may; returns
 * how many of the `k` there is room for. */
ZBUF_IP__HIDDEN uint32_t zbuf_ip__tcp_rq_reserve(zbuf_ip_tcp_t *t, uint32_t k);
/* Drop the records the cumulative ACK `ack` covers. */
ZBUF_IP__HIDDEN void zbuf_ip__tcp_rq_ack(zbuf_ip_tcp_t *t, uint32_t ack, const struct tcp_seg *sg);
/* Mark record `r` lost (unless SACKed or lost and not yet resent). */
ZBUF_IP__HIDDEN bool zbuf_ip__tcp_mark_lost(zbuf_ip_tcp_t *t, struct txseg *r);
/* The loss-recovery part of an acceptable ACK: SACK blocks, spurious
 * timeouts, duplicate ACKs, loss detection, recovery and congestion
 * window, the probe and retransmission timers.  `acked` new bytes,
 * `flight` and `prior_sacked` as before this ACK.  Returns whether it was
 * a duplicate ACK. */
ZBUF_IP__HIDDEN bool zbuf_ip__tcp_recover(zbuf_ip_tcp_t *t, const struct tcp_seg *sg,
                                          uint32_t acked, uint32_t flight,
                                          uint32_t prior_sacked, bool wnd_changed);
/* Arm the loss probe timer (RFC 8985 7.2). */
ZBUF_IP__HIDDEN void zbuf_ip__tcp_tlp_schedule(zbuf_ip_tcp_t *t);
/* The loss probe timer fired. */
ZBUF_IP__HIDDEN void zbuf_ip__tcp_tlp_fire(zbuf_ip_tcp_t *t);
/* The RACK reordering timer fired. */
ZBUF_IP__HIDDEN void zbuf_ip__tcp_rack_fire(zbuf_ip_tcp_t *t);
/* A retransmission timeout of data: a new episode (maybe spurious), the
 * loss window, every record not SACKed lost. */
ZBUF_IP__HIDDEN void zbuf_ip__tcp_rto_recovery(zbuf_ip_tcp_t *t);

/* -------------------------------------------------------- tcp_timer.c */

/* The RTT estimator: a sample of `r` ms (updates the min filter too). */
ZBUF_IP__HIDDEN void zbuf_ip__tcp_rtt_sample(zbuf_ip_tcp_t *t, uint32_t r);
/* The min filter alone (RACK's samples of original transmissions). */
ZBUF_IP__HIDDEN void zbuf_ip__tcp_min_rtt_update(zbuf_ip_tcp_t *t, uint32_t r);
/* RTO from SRTT and RTTVAR, bounded (also ends a backoff). */
ZBUF_IP__HIDDEN void zbuf_ip__tcp_rto_update(zbuf_ip_tcp_t *t);
/* Anything from the peer shows it is alive: restart the keepalive idle. */
ZBUF_IP__HIDDEN void zbuf_ip__tcp_keep_touch(zbuf_ip_tcp_t *t);
/* Arm the zero-window probe (the current backoff of the RTO). */
ZBUF_IP__HIDDEN void zbuf_ip__tcp_persist_arm(zbuf_ip_tcp_t *t);

/* --------------------------------------------------- tcp_syncookie.c */

/* Answer SYN `sg` for listener `l` with a SYN cookie, keeping nothing. */
ZBUF_IP__HIDDEN void zbuf_ip__tcp_cookie_answer(zbuf_ip_tcp_t *l, const struct tcp_seg *sg,
                                                uint32_t src, uint32_t dst);
/* An ACK for listener `l` that may complete a SYN cookie: false if it does
 * not (the caller answers with a RST); true when it was taken (consumes z). */
ZBUF_IP__HIDDEN bool zbuf_ip__tcp_cookie_accept(zbuf_ip_tcp_t *l, zbuf_t *z, struct tcp_seg *sg,
                                                uint32_t src, uint32_t dst);

#endif
