/*
 * TCP (RFC 9293) with RFC 5961 (blind in-window attacks), RFC 6298 (RTO,
 * Karn), RFC 5681 (congestion control), RFC 7323 (window scaling,
 * timestamps, PAWS), RFC 6528 (keyed-hash ISNs), RFC 2018 SACK, and loss
 * recovery after RFC 8985 (RACK-TLP), RFC 6675 (SACK pipe), RFC 6937
 * (proportional rate reduction), RFC 6582 (NewReno, for peers without
 * SACK) and RFC 3042 (limited transmit).
 *
 * SACK: SACK-permitted is offered (and answered) because the receiver side
 * really works: every ACK sent while the out-of-order queue holds data
 * carries blocks built from that queue, the latest arrival's block first,
 * so a Linux sender recovers several losses per round trip instead of
 * stalling on timeouts.  Data segments shrink to carry the blocks too
 * (send_mss()).  A duplicate segment is reported by a D-SACK block first
 * (RFC 2883); D-SACKs received widen RACK's reordering window and undo a
 * recovery whose retransmissions all proved spurious (dsack_rx()).
 *
 * Loss recovery
 * -------------
 * Every segment sent and not yet cumulatively acknowledged has a record
 * (`struct txseg`, a ring in sequence order) with the time of its latest
 * transmission and flags: SACKed, lost, retransmission in flight.  From the
 * records: pipe (RFC 6675: bytes in the network) = outstanding - SACKed -
 * lost + retransmitted; a segment may leave while pipe < cwnd, lost ones
 * first (oldest first), then new data.  Losses are found by
 *  - RACK (RFC 8985): a segment sent before one the peer has since
 *    delivered is lost once it is older than that one by the RACK RTT plus
 *    a reordering window (0, or min_rtt/4 once reordering was seen, times
 *    a multiplier D-SACKs grow; min_rtt a 5-minute windowed minimum); a
 *    timer covers the rest.  Works for retransmissions too, so a lost
 *    retransmission is sent again without waiting for the RTO;
 *  - duplicate ACKs (3, fewer when little flies: RFC 5827) for the first
 *    segment, the only means with a peer that does not do SACK, where
 *    each duplicate also counts as one segment out of the pipe (limited
 *    transmit) and a partial ACK resends the next segment (NewReno);
 *  - the Tail Loss Probe (RFC 8985 section 7): 2 SRTT after the last
 *    transmission with data outstanding, new data or the last segment goes
 *    again, so a lost tail makes the peer SACK instead of waiting for an
 *    RTO; also in recovery and after a timeout (see tlp_schedule());
 *  - the RTO, which marks everything not SACKed lost (no go-back-N of
 *    SACKed data), cwnd one segment.  A timeout found spurious (a delay
 *    spike: Eifel with timestamps, F-RTO without, or D-SACKs of all its
 *    retransmissions; rto_check()) is undone: cwnd and ssthresh restored,
 *    the "lost" marks taken off what did not go again yet.
 * In recovery cwnd follows PRR (RFC 6937, slow-start reduction bound).
 *
 * Timestamps (RFC 7323): offered in the SYN and answered when the peer
 * offers them (configurable).  Once on, every segment but a RST carries
 * TSval = the stack's millisecond clock + a per-connection offset (keyed
 * hash of the four-tuple, RFC 7323 5.4) and TSecr = TS.Recent.  TSecr gives
 * one RTT sample per flight, retransmissions included; it also tells the
 * RACK whether an ACK is for an original or a retransmission.  PAWS drops
 * non-RST segments with a TSval older than TS.Recent (RSTs are judged by
 * sequence number alone), answering with an ACK at most every
 * #ZBUF_IP_TCP_INVALID_RATELIMIT_MS; TS.Recent lapses after 24 idle days.
 * A SYN with a newer timestamp reopens a connection in TIME_WAIT (RFC 6191).
 *
 * Buffers
 * -------
 * Send: `sndq` is one zbuf holding every byte written and not yet
 * acknowledged; byte i of it has sequence number snd_una + i.  A segment on
 * the wire is zbuf_dup(sndq, off, len) behind a fresh header segment, so the
 * driver gets its own zbuf and the queue is never modified by it.  An ACK
 * cuts the acknowledged prefix off `sndq`, which drops the references and
 * runs the release callbacks of buffers nobody else holds.
 *
 * Receive: in-order payload is handed to the application as the very zbuf
 * that came up from the driver, headers cut away.  Out-of-order payload is
 * kept as such zbufs in a list sorted by sequence number, without overlap,
 * bounded by #ZBUF_IP_TCP_OOO_SEGS entries and by the advertised window.
 *
 * PCB life cycle
 * --------------
 * The application owns a PCB from zbuf_ip_tcp_new() (or from the accept
 * callback) until zbuf_ip_tcp_close()/zbuf_ip_tcp_abort() or the error
 * callback.  After close the stack owns it until the connection ends.  A
 * PCB is never freed while a callback may still be running on it: it is
 * marked `dead` and freed when the outermost stack call returns
 * (zbuf_ip__tcp_reap()).
 */
#include <stdint.h>
#include <stdlib.h>

#include "stack_internal.h"

#define SEQ_LT(a, b) ((int32_t)((uint32_t)(a) - (uint32_t)(b)) < 0)
#define SEQ_LEQ(a, b) ((int32_t)((uint32_t)(a) - (uint32_t)(b)) <= 0)
#define SEQ_GT(a, b) SEQ_LT(b, a)
#define SEQ_GEQ(a, b) SEQ_LEQ(b, a)

/* A segment sent and not yet cumulatively acknowledged. */
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

/* An RTT sample and when it was taken (the windowed min filter). */
struct rtt_at {
    uint32_t rtt; /* ms */
    uint64_t at;  /* clock */
};

struct ooo {
    uint32_t seq;      /* first byte */
    uint32_t len;      /* payload bytes (zbuf_length(z)) */
    uint32_t charge;   /* what it costs the connection's receive memory */
    bool fin;          /* a FIN follows the last byte */
    zbuf_t *z;         /* payload, the driver's segments */
    struct ooo *next;  /* sorted by seq, no overlap */
};

struct zbuf_ip_tcp {
    zbuf_ip_stack_t *stack;
    struct zbuf_ip_tcp *next;       /* stack's list */
    uint8_t state;                  /* zbuf_ip_tcp_state_t */
    bool dead;                      /* freed at the next reap; invisible to lookups */
    bool app_closed;                /* zbuf_ip_tcp_close() called: no more callbacks */
    bool orphan;                    /* given up but still sending (zbuf_ip__tcp_set_orphan()) */
    bool bound;
    bool nodelay;
    bool fin_queued;                /* the application shut down its direction */
    bool fin_acked;                 /* our FIN was acknowledged */
    bool fin_rcvd;                  /* the peer's FIN was taken in order */
    bool ack_now;                   /* send an ACK at the end of this step */
    bool in_recovery;               /* fast recovery (PRR) until snd_una passes recover */
    bool timing;                    /* an RTT measurement runs (Karn: never on retransmits) */
    bool have_rtt;                  /* srtt/rttvar hold a sample */
    bool ws_ok;                     /* both sides sent window scale */
    bool sack_ok;                   /* both sides sent SACK-permitted: our ACKs carry
                                       SACK blocks describing the out-of-order queue */
    bool output_pending;            /* burst limit hit: continue on the next poll */
    bool ts_ok;                     /* both sides sent timestamps: every non-RST carries them */
    bool ts_recent_set;             /* ts_recent holds a value (RFC 7323 TS.Recent) */
    bool rack_valid;                /* rack_* describe a delivered segment */
    bool reordering_seen;           /* the peer delivered out of sending order (RACK) */
    bool tlp_valid;                 /* a loss probe is out: tlp_end.. */
    bool tlp_retrans;               /* ..and it was a retransmission */
    bool tlp_in_recovery;           /* ..sent in recovery or after a timeout */
    bool cookie;                    /* made from a SYN cookie (no SYN-ACK RTT sample) */
    bool tsval_syn_set;             /* a SYN-ACK carries tsval_syn (a cookie's options) */
    uint32_t tsval_syn;
    uint8_t snd_wscale, rcv_wscale; /* shifts: peer's window field, our window field */
    uint8_t dupacks;
    uint8_t nrexmit;                /* consecutive timeouts of the same data */
    uint8_t persist_shift;

    uint32_t laddr, raddr;
    uint16_t lport, rport;

    zbuf_ip_tcp_callbacks_t cb;
    void *arg;
    struct zbuf_ip_tcp *listener;   /* SYN_RCVD child: its listener, until accepted */
    unsigned backlog, pending;      /* listener: limit, children not yet accepted */
    uint64_t cookies_at;            /* listener: clock of its latest SYN cookie.. */
    bool cookies_sent;              /* ..if any (cookie ACKs are taken only then) */
    uint64_t born;                  /* clock at creation (early drop takes the oldest) */
    int soft_err;                   /* latest ICMP soft error (reported on a timeout) */

    /* Send sequence space.  snd_una <= snd_max; snd_max is the next new
     * byte (retransmissions go from the records, never by moving back). */
    uint32_t iss, snd_una, snd_max;
    uint32_t snd_wnd, max_snd_wnd, snd_wl1, snd_wl2;
    uint32_t cwnd, ssthresh, recover;
    uint16_t mss;                   /* send MSS: the peer's, clamped, less options */
    uint16_t mss_clamp;             /* the peer's MSS clamped to our interface (no options) */
    uint16_t pmtu;                  /* path MTU: the interface's, or lower (ICMP, RFC 1191) */
    zbuf_t *sndq;                   /* unacknowledged and unsent bytes from snd_una */
    uint32_t snd_buf;

    /* Records of the segments in flight: a ring of rq_cap (a power of two)
     * entries, rq_n used from rq_head, in sequence order, covering exactly
     * [snd_una, snd_max).  The byte counters sum the flags over them. */
    struct txseg *rq;
    uint32_t rq_cap, rq_head, rq_n;
    uint32_t sacked_out, lost_out, retrans_out;

    /* RACK (RFC 8985): the most recently sent segment the peer delivered. */
    uint64_t rack_xmit;
    uint32_t rack_end, rack_rtt, rack_fack; /* fack: highest end delivered */
    uint32_t min_rtt;               /* windowed minimum RTT, ms (UINT32_MAX: none) */
    struct rtt_at minrtt_s[3];      /* the min filter's best, second, third choice */
    uint32_t tlp_end;               /* snd_max after the probe */
    uint32_t tlp_tsval;             /* TSval the probe carried */
    /* D-SACK (RFC 2883) use: RACK's reordering window grows by min_rtt/4
     * per round trip with D-SACKs, for 16 recoveries (RFC 8985 6.2 step 4);
     * a recovery whose retransmissions were all reported duplicate by
     * D-SACK was spurious and its cwnd reduction is undone. */
    uint8_t reo_wnd_mult, reo_wnd_persist;
    bool dsack_round_set, undo_ok;
    uint32_t dsack_round;           /* no more growth until snd_una passes it */
    uint32_t undo_lo, undo_hi;      /* sequence range of the undoable episode */
    uint32_t undo_retrans;          /* its retransmissions not yet D-SACKed.. */
    uint32_t undo_sent;             /* ..of so many sent */
    uint32_t prior_cwnd, prior_ssthresh; /* cwnd and ssthresh before it */
    /* Spurious timeouts (rto_check()): the undoable episode is a timeout
     * (undo_rto, with undo_* above); Eifel (RFC 3522) waits for the first
     * ACK of new data, F-RTO (RFC 5682) counts the ACKs after it. */
    bool undo_rto, rto_eifel;
    uint8_t frto;                   /* F-RTO step: 0 off, 1 retransmitted, 2 new data sent */
    uint32_t rto_tsval;             /* TSval of the first retransmission after the timeout */
    uint32_t rto_high;              /* snd_max at the timeout (RFC 5682 "recover") */
    uint32_t rto_prior_recover;     /* recover before the timeout */
    uint32_t rto_prior;             /* RTO before its backoff */
    uint32_t frto_sacked;           /* bytes below rto_high SACKed at F-RTO step 2 */
    /* PRR (RFC 6937), valid in recovery. */
    uint32_t prr_delivered, prr_out, recover_fs;

    uint32_t rtt_seq;               /* timed segment: sample when ack passes it */
    uint64_t rtt_start;
    uint32_t srtt8, rttvar4, rto;   /* srtt*8, rttvar*4, ms */

    /* Timestamps (RFC 7323). */
    uint32_t ts_off;                /* our TSval = clock + ts_off */
    uint32_t ts_recent;             /* TS.Recent: the peer's TSval to echo */
    uint64_t ts_recent_age;         /* clock when ts_recent was set */
    uint32_t last_ack_sent;         /* Last.ACK.sent: rcv_nxt in our latest ACK */
    uint64_t oow_ack_at;            /* clock of the latest ACK to a PAWS-dropped or
                                       out-of-window segment, or challenge ACK.. */
    bool oow_acked;                 /* ..if any (the per-connection rate limit's state) */

    /* Receive sequence space. */
    uint32_t irs, rcv_nxt, rcv_adv; /* rcv_adv: right edge advertised, never moves left */
    uint32_t rcv_buf;
    size_t rcv_held;                /* delivered, not yet zbuf_ip_tcp_recved() */
    /* Receive memory (<zbuf/ip_opts.h>, ZBUF_IP_TCP_RCV_MEM_MULT): the charge of
     * rcv_held and of the out-of-order queue, against rcv_mem; rcv_ratio is
     * payload per charge seen lately, in 1/256 (the window follows it). */
    size_t rcv_held_charge, ooo_charge;
    uint32_t rcv_mem;
    uint32_t rcv_ratio;
    uint64_t ratio_len, ratio_charge; /* sums of the segments since rcv_ratio moved.. */
    unsigned ratio_n;                 /* ..and how many (it moves every 16) */
    unsigned segs_unacked;          /* in-order segments since our last ACK */
    struct ooo *ooo;
    unsigned nooo;
    size_t ooo_bytes;
    uint32_t ooo_last;              /* first byte of the latest segment queued out of
                                       order (its block is reported first, RFC 2018) */
    bool dsack_pending;             /* report [dsack_lo, dsack_hi) as a D-SACK block */
    uint32_t dsack_lo, dsack_hi;    /* bytes we received twice (RFC 2883) */

    /* Timers: absolute clock values, 0 when off.  t_rack: RACK reordering
     * window of a segment not yet deemed lost; t_tlp: loss probe. */
    uint64_t t_rtx, t_persist, t_delack, t_2msl, t_keep, t_rack, t_tlp;

    /* Keepalive (off while keep_idle is 0): t_keep is the next probe. */
    uint32_t keep_idle, keep_intvl;
    unsigned keep_count, keep_sent;

    uint64_t retransmits;
};

static const char *const state_names[] = {
    "CLOSED",     "LISTEN",     "SYN_SENT",   "SYN_RCVD", "ESTABLISHED", "FIN_WAIT_1",
    "FIN_WAIT_2", "CLOSE_WAIT", "CLOSING",    "LAST_ACK", "TIME_WAIT",
};

const char *zbuf_ip_tcp_state_name(zbuf_ip_tcp_state_t st)
{
    return (unsigned)st < sizeof state_names / sizeof state_names[0] ? state_names[st] : "?";
}

static uint32_t umin32(uint32_t a, uint32_t b)
{
    return a < b ? a : b;
}

static bool synchronized(const zbuf_ip_tcp_t *t)
{
    return t->state >= ZBUF_IP_TCP_ESTABLISHED;
}

/* ------------------------------------------------------------- life cycle */

/* Disarm all seven timers. */
static void timers_stop(zbuf_ip_tcp_t *t)
{
    t->t_rtx = t->t_persist = t->t_delack = t->t_2msl = t->t_keep = 0;
    t->t_rack = t->t_tlp = 0;
}

/* Receive memory: `*field` (rcv_held_charge or ooo_charge) grows or
 * shrinks by `n`, and the stack's gauge with it. */
static void mem_add(zbuf_ip_tcp_t *t, size_t *field, size_t n)
{
    *field += n;
    t->stack->st.tcp_rcv_mem_held += n;
}

static void mem_sub(zbuf_ip_tcp_t *t, size_t *field, size_t n)
{
    *field -= n;
    t->stack->st.tcp_rcv_mem_held -= n;
}

/* Unlink and free out-of-order entry *pp. */
static void ooo_unlink(zbuf_ip_tcp_t *t, struct ooo **pp)
{
    struct ooo *o = *pp;
    *pp = o->next;
    t->nooo--;
    t->ooo_bytes -= o->len;
    mem_sub(t, &t->ooo_charge, o->charge);
    zbuf_delete(o->z);
    free(o);
}

static void ooo_clear(zbuf_ip_tcp_t *t)
{
    while (t->ooo)
        ooo_unlink(t, &t->ooo);
}

/* Mark `t` for freeing: from now on it is invisible and silent.  Buffers it
 * holds are dropped right away, so release callbacks of unacknowledged data
 * run now. */
static void pcb_kill(zbuf_ip_tcp_t *t)
{
    if (t->dead)
        return;
    zbuf_ip_stack_t *s = t->stack;
    if (t->listener) {
        t->listener->pending--;
        t->listener = NULL;
    }
    /* Children of a dying listener go with it. */
    if (t->state == ZBUF_IP_TCP_LISTEN)
        for (zbuf_ip_tcp_t *c = s->tcps; c; c = c->next)
            if (c->listener == t) {
                c->listener = NULL;
                c->app_closed = true;
                pcb_kill(c);
            }
    t->dead = true;
    s->tcp_dead++;
    s->ntcp--; /* the slot is free now; the memory goes at the next reap */
    t->state = ZBUF_IP_TCP_CLOSED;
    timers_stop(t);
    t->output_pending = false;
    zbuf_delete(t->sndq);
    t->sndq = NULL;
    free(t->rq);
    t->rq = NULL;
    t->rq_n = t->rq_cap = 0;
    ooo_clear(t);
    mem_sub(t, &t->rcv_held_charge, t->rcv_held_charge);
    t->rcv_held = 0;
}

void zbuf_ip__tcp_reap(zbuf_ip_stack_t *s)
{
    if (s->tcp_dead == 0)
        return; /* the common case: no walk at every public call */
    s->tcp_dead = 0;
    for (zbuf_ip_tcp_t **pp = &s->tcps; *pp;) {
        zbuf_ip_tcp_t *t = *pp;
        if (t->dead) {
            *pp = t->next;
            free(t);
        } else {
            pp = &t->next;
        }
    }
}

void zbuf_ip__tcp_free_all(zbuf_ip_stack_t *s)
{
    for (zbuf_ip_tcp_t *t = s->tcps; t; t = t->next) {
        t->listener = NULL;
        t->app_closed = true;
        pcb_kill(t);
    }
    zbuf_ip__tcp_reap(s);
}

/* The connection failed: tell the application (unless it closed) and free. */
static void pcb_fail(zbuf_ip_tcp_t *t, int err)
{
    if (t->dead)
        return;
    bool tell = !t->app_closed && t->listener == NULL && t->cb.error;
    zbuf_ip_tcp_callbacks_t cb = t->cb;
    void *arg = t->arg;
    pcb_kill(t);
    if (tell)
        cb.error(arg, err);
}

/* The connection ended normally (TIME_WAIT over, LAST_ACK acked): free it if
 * the application gave it back, else keep it CLOSED until it does. */
static void pcb_finish(zbuf_ip_tcp_t *t)
{
    t->state = ZBUF_IP_TCP_CLOSED;
    timers_stop(t);
    if (t->app_closed)
        pcb_kill(t);
}

/* What every PCB starts with (also the SYN-cookie answer's stand-in). */
static void pcb_defaults(zbuf_ip_stack_t *s, zbuf_ip_tcp_t *t)
{
    t->stack = s;
    t->born = s->now;
    t->snd_buf = s->cfg.tcp_snd_buf;
    t->rcv_buf = s->cfg.tcp_rcv_buf;
    t->rcv_mem = s->cfg.tcp_rcv_mem;
    /* Until segments tell, assume the window fits the memory exactly. */
    t->rcv_ratio = (uint32_t)((uint64_t)t->rcv_buf * 256 / t->rcv_mem);
    if (t->rcv_ratio < 1)
        t->rcv_ratio = 1;
    t->rto = ZBUF_IP_TCP_RTO_INIT_MS;
    t->mss = ZBUF_IP_TCP_DEFAULT_MSS;
    t->mss_clamp = ZBUF_IP_TCP_DEFAULT_MSS;
    t->pmtu = 1500;
    t->min_rtt = UINT32_MAX;
    t->reo_wnd_mult = 1;
}

static zbuf_ip_tcp_t *pcb_alloc(zbuf_ip_stack_t *s)
{
    if (s->ntcp >= ZBUF_IP_TCP_PCBS) {
        /* Recycle the oldest TIME_WAIT connection, as lwIP does: it has
         * nothing left to deliver.  Only one the application gave back:
         * the others are its handles until it closes them. */
        zbuf_ip_tcp_t *victim = NULL, *half = NULL;
        for (zbuf_ip_tcp_t *t = s->tcps; t; t = t->next) {
            if (t->dead)
                continue;
            if (t->app_closed && t->state == ZBUF_IP_TCP_TIME_WAIT &&
                (victim == NULL || t->t_2msl < victim->t_2msl))
                victim = t;
            /* Early drop: a half-open connection whose SYN-ACK went
             * unanswered is most likely a spoofed one. */
            if (t->state == ZBUF_IP_TCP_SYN_RCVD && t->listener && t->nrexmit > 0 &&
                (half == NULL || t->born < half->born))
                half = t;
        }
        if (victim == NULL && half != NULL) {
            victim = half;
            s->st.tcp_half_open_drops++;
        }
        if (victim == NULL) {
            s->st.tcp_pcb_limit++;
            return NULL;
        }
        victim->app_closed = true;
        pcb_kill(victim);
    }
    zbuf_ip_tcp_t *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    if (zbuf_create(&t->sndq) != 0) {
        free(t);
        return NULL;
    }
    pcb_defaults(s, t);
    t->next = s->tcps;
    s->tcps = t;
    s->ntcp++;
    return t;
}

int zbuf_ip__tcp_isn(zbuf_ip_stack_t *s, uint32_t laddr, uint16_t lport, uint32_t raddr,
                     uint16_t rport, uint32_t *isn)
{
    /* RFC 6528: ISN = M + F(4-tuple, key), M a 4-microsecond clock. */
    uint8_t b[12];
    put32(b, laddr);
    put16(b + 4, lport);
    put32(b + 6, raddr);
    put16(b + 10, rport);
    *isn = (uint32_t)zbuf_ip__siphash(s->cfg.isn_key, b, sizeof b) + (uint32_t)(s->now * 250u);
    return 0;
}

/* RFC 7323 5.4: a per-connection offset of the timestamp clock, a keyed
 * hash of the four-tuple (a different input from the ISN's), so that
 * TSvals reveal neither the stack's uptime nor other connections' values. */
static void ts_setup(zbuf_ip_tcp_t *t)
{
    uint8_t b[13];
    put32(b, t->laddr);
    put16(b + 4, t->lport);
    put32(b + 6, t->raddr);
    put16(b + 10, t->rport);
    b[12] = 'T';
    t->ts_off = (uint32_t)zbuf_ip__siphash(t->stack->cfg.isn_key, b, sizeof b);
}

/* Our TSval for a transmission at clock value `ms`. */
static uint32_t ts_val(const zbuf_ip_tcp_t *t, uint64_t ms)
{
    return (uint32_t)ms + t->ts_off;
}

/* ------------------------------------------------------- segment records */

static struct txseg *rq_at(const zbuf_ip_tcp_t *t, uint32_t i)
{
    return &t->rq[(t->rq_head + i) & (t->rq_cap - 1)];
}

static uint32_t seg_len(const struct txseg *r)
{
    return r->end - r->seq;
}

/* Room for one more record (grows the ring).  Returns false when memory or
 * #ZBUF_IP_TCP_TX_SEGS_MAX says no: then nothing new is sent now. */
static bool rq_room(zbuf_ip_tcp_t *t)
{
    if (t->rq_n < t->rq_cap)
        return true;
    if (t->rq_cap >= ZBUF_IP_TCP_TX_SEGS_MAX)
        return false;
    uint32_t cap = t->rq_cap ? t->rq_cap * 2 : 16;
    struct txseg *n = malloc(sizeof *n * cap);
    if (n == NULL)
        return false;
    for (uint32_t i = 0; i < t->rq_n; i++)
        n[i] = *rq_at(t, i);
    free(t->rq);
    t->rq = n;
    t->rq_cap = cap;
    t->rq_head = 0;
    return true;
}

/* Take the flags' bytes out of the counters (the record goes or shrinks by
 * `n` bytes). */
static void rq_uncount(zbuf_ip_tcp_t *t, const struct txseg *r, uint32_t n)
{
    if (r->flags & TX_SACKED)
        t->sacked_out -= n;
    if (r->flags & TX_LOST)
        t->lost_out -= n;
    if (r->flags & TX_RETRANS)
        t->retrans_out -= n;
}

/* Bytes in the network (RFC 6675 pipe).  A peer without SACK reports
 * nothing above a hole, so each duplicate ACK counts as one segment that
 * left the network (what RFC 3042 and NewReno's inflation amount to). */
static uint32_t tcp_pipe(const zbuf_ip_tcp_t *t)
{
    int64_t p = (int64_t)(uint32_t)(t->snd_max - t->snd_una) - t->sacked_out - t->lost_out +
                t->retrans_out;
    if (!t->sack_ok)
        p -= (int64_t)t->dupacks * t->mss;
    return p > 0 ? (uint32_t)p : 0;
}

/* May `r` be (re)marked lost: not SACKed, and not lost while not yet sent
 * again? */
static bool lost_markable(const struct txseg *r)
{
    return !(r->flags & TX_SACKED) && (r->flags & (TX_LOST | TX_RETRANS)) != TX_LOST;
}

static bool mark_lost(zbuf_ip_tcp_t *t, struct txseg *r)
{
    if (!lost_markable(r))
        return false;
    uint32_t n = seg_len(r);
    if (r->flags & TX_RETRANS) {
        r->flags &= (uint8_t)~TX_RETRANS;
        t->retrans_out -= n;
        t->stack->st.tcp_lost_retransmits++;
    }
    if (!(r->flags & TX_LOST)) {
        r->flags |= TX_LOST;
        t->lost_out += n;
    }
    return true;
}

/* ---------------------------------------------------------------- output */

/* Room for more received bytes: what the application left of the window,
 * and what the receive memory left can hold at the payload-to-charge ratio
 * seen on this connection (<zbuf/ip_opts.h>, ZBUF_IP_TCP_RCV_MEM_MULT). */
static uint32_t rcv_space(const zbuf_ip_tcp_t *t)
{
    uint32_t space = t->rcv_held >= t->rcv_buf ? 0 : t->rcv_buf - (uint32_t)t->rcv_held;
    uint64_t mem = t->rcv_held_charge >= t->rcv_mem ? 0 : t->rcv_mem - t->rcv_held_charge;
    uint64_t by_mem = mem * t->rcv_ratio / 256;
    return by_mem < space ? (uint32_t)by_mem : space;
}

/* The window field to send now.  It moves rcv_adv, the one right edge that
 * is both advertised and used to judge what arrives (RFC 9293 3.10.7.4):
 * the edge is exactly what the field says at our scale (a SYN's window is
 * never scaled, so it is at most 65535 bytes ahead, and so it stays
 * without window scaling); it never moves left (the field is rounded up
 * when the space shrank) and moves right only by a worthwhile amount
 * (receiver silly-window avoidance). */
static uint16_t rcv_window(zbuf_ip_tcp_t *t, bool syn)
{
    unsigned ws = syn ? 0 : t->rcv_wscale;
    uint32_t cur = SEQ_LT(t->rcv_adv, t->rcv_nxt) ? 0 : t->rcv_adv - t->rcv_nxt;
    uint32_t space = umin32(rcv_space(t), 65535u << ws);
    uint32_t w = cur;
    if (space > cur && (space - cur >= umin32(t->rcv_buf / 2, t->mss) || cur == 0))
        w = space;
    uint32_t field = w >> ws;
    if ((field << ws) < cur)
        field = (cur + (1u << ws) - 1) >> ws;
    if (field > 65535)
        field = 65535;
    t->rcv_adv = t->rcv_nxt + (field << ws);
    return (uint16_t)field;
}

/* SACK option (RFC 2018) describing the out-of-order queue: a D-SACK block
 * first if a duplicate arrived (RFC 2883), contiguous runs of queued
 * segments, the run holding the latest arrival first, then the others in
 * sequence order; as many as fit beside `len` payload bytes in one
 * MSS (4 at most, 3 beside timestamps: 40 option bytes).  t->mss already
 * leaves room for the timestamps.  Writes NOP NOP kind len blocks... into
 * `o`, returns its length (0 if no block fits). */
static size_t sack_blocks(zbuf_ip_tcp_t *t, uint8_t *o, size_t len)
{
    size_t room = t->mss > len + 4 ? (t->mss - len - 4) / 8 : 0;
    unsigned lim = t->ts_ok ? 3 : 4;
    unsigned max = room < lim ? (unsigned)room : lim;
    if (max == 0)
        return 0;
    /* A duplicate segment arrived: its block goes first (RFC 2883 D-SACK),
     * once; the blocks of the queue follow. */
    unsigned k = 0;
    if (t->dsack_pending) {
        put32(o + 4, t->dsack_lo);
        put32(o + 8, t->dsack_hi);
        k = 1;
        t->dsack_pending = false;
        t->stack->st.tcp_dsack_tx++;
    }
    /* Walk the runs of adjacent segments: keep the one holding the latest
     * arrival and the first three others (constant stack, any queue size). */
    uint32_t blk[4][2];
    unsigned n = 1;
    bool have_first = false;
    const struct ooo *q = t->ooo;
    while (q) {
        uint32_t lo = q->seq, hi = q->seq + q->len;
        for (q = q->next; q && q->seq == hi; q = q->next)
            hi = q->seq + q->len;
        if (lo == hi)
            continue;
        if (!have_first && SEQ_GEQ(t->ooo_last, lo) && SEQ_LT(t->ooo_last, hi)) {
            blk[0][0] = lo;
            blk[0][1] = hi;
            have_first = true;
        } else if (n < 4) {
            blk[n][0] = lo;
            blk[n][1] = hi;
            n++;
        }
    }
    unsigned start = have_first ? 0 : 1; /* no run holds it: report the others */
    for (unsigned i = start; i < n && k < max; i++, k++) {
        put32(o + 4 + 8 * k, blk[i][0]);
        put32(o + 8 + 8 * k, blk[i][1]);
    }
    if (k == 0)
        return 0;
    o[0] = 1;
    o[1] = 1;
    o[2] = 5;
    o[3] = (uint8_t)(2 + 8 * k);
    return 4 + 8 * k;
}

/* Payload of a new full-sized segment now: the MSS less the SACK option its
 * ACK carries while bytes are missing (RFC 6691: options come out of the
 * MSS).  Without that room, data segments flowing the other way would
 * carry no SACK blocks, and once the few pure ACKs that do are lost the
 * peer would learn nothing more of our out-of-order queue until it timed
 * out (seen in the bidirectional loss tests); Linux shrinks its segments
 * the same way. */
static uint32_t send_mss(const zbuf_ip_tcp_t *t)
{
    if (!t->sack_ok || (t->ooo == NULL && !t->dsack_pending))
        return t->mss;
    unsigned runs = 0, lim = t->ts_ok ? 3 : 4;
    for (const struct ooo *q = t->ooo; q && runs < lim; q = q->next)
        if (q->next == NULL || q->next->seq != q->seq + q->len)
            runs++;
    if (t->dsack_pending && runs < lim)
        runs++;
    uint32_t opt = 4 + 8 * runs;
    return t->mss > opt + ZBUF_IP_TCP_MIN_MSS ? t->mss - opt : t->mss;
}

/* Build and send one segment: header + optional dup of sndq[off, off+len).
 * Returns 0 or a negative errno (nothing sent). */
static int tcp_emit(zbuf_ip_tcp_t *t, uint32_t seq, uint8_t flags, size_t off, size_t len)
{
    zbuf_ip_stack_t *s = t->stack;
    zbuf_t *z;
    int rc = len ? zbuf_dup(t->sndq, off, len, &z) : zbuf_create(&z);
    if (rc)
        return rc;
    size_t optlen = 0;
    uint8_t opts[40];
    /* Timestamps ride on every segment but a RST once agreed (RFC 7323
     * 3.2); a SYN offers them, a SYN-ACK answers an offer. */
    bool syn = (flags & TCP_SYN) != 0;
    bool ts = !(flags & TCP_RST) &&
              (syn && !(flags & TCP_ACK) ? !s->cfg.tcp_no_timestamps : t->ts_ok);
    /* Window scale and SACK-permitted: in a SYN always, in a SYN-ACK only if
     * the peer sent them.  Layout as Linux's: MSS, SACK-permitted (or two
     * NOPs) and timestamps, NOP and window scale. */
    bool sackp = syn && (!(flags & TCP_ACK) || t->sack_ok);
    if (syn) {
        zbuf_ip_netif_t *nif = zbuf_ip__route(s, t->raddr);
        uint16_t mss = (uint16_t)((nif ? nif->cfg.mtu : 1500) - IP_HLEN - TCP_HLEN);
        opts[0] = 2;
        opts[1] = 4;
        put16(opts + 2, mss);
        optlen = 4;
    }
    if (ts) {
        opts[optlen++] = sackp ? 4 : 1;
        opts[optlen++] = sackp ? 2 : 1;
        opts[optlen++] = 8;
        opts[optlen++] = 10;
        put32(opts + optlen, syn && t->tsval_syn_set ? t->tsval_syn : ts_val(t, s->now));
        put32(opts + optlen + 4, (flags & TCP_ACK) ? t->ts_recent : 0);
        optlen += 8;
    }
    if (syn && (!(flags & TCP_ACK) || t->ws_ok)) {
        opts[optlen++] = 1;
        opts[optlen++] = 3;
        opts[optlen++] = 3;
        opts[optlen++] = t->rcv_wscale;
    }
    if (sackp && !ts) {
        opts[optlen++] = 1;
        opts[optlen++] = 1;
        opts[optlen++] = 4;
        opts[optlen++] = 2;
    }
    if (!syn && (flags & TCP_ACK) && !(flags & TCP_RST) && t->sack_ok &&
        (t->ooo || t->dsack_pending))
        optlen += sack_blocks(t, opts + optlen, len);
    uint8_t *h;
    size_t hlen = TCP_HLEN + optlen;
    rc = zbuf_prepend_space(z, hlen, (void **)&h);
    if (rc) {
        zbuf_delete(z);
        return rc;
    }
    uint16_t field = rcv_window(t, (flags & TCP_SYN) != 0);
    put16(h, t->lport);
    put16(h + 2, t->rport);
    put32(h + 4, seq);
    put32(h + 8, (flags & TCP_ACK) ? t->rcv_nxt : 0);
    h[12] = (uint8_t)((hlen / 4) << 4);
    h[13] = flags;
    put16(h + 14, field);
    put16(h + 16, 0);
    put16(h + 18, 0);
    if (optlen)
        memcpy(h + TCP_HLEN, opts, optlen);
    uint32_t tot = (uint32_t)(hlen + len);
    if (zbuf_ip__need_tx_csum(s, t->raddr))
        put16(h + 16, zbuf_ip__fold(zbuf_ip__sum_zbuf(
                          z, 0, tot, zbuf_ip__pseudo(t->laddr, t->raddr, IP_PROTO_TCP, tot))));
    if (flags & TCP_ACK) {
        t->ack_now = false;
        t->segs_unacked = 0;
        t->t_delack = 0;
        t->last_ack_sent = t->rcv_nxt;
    }
    s->st.tcp_tx_segs++;
    s->st.tcp_tx_payload += len;
    if (flags & TCP_RST)
        s->st.tcp_rst_tx++;
    zbuf_ip__output(s, z, t->laddr, t->raddr, IP_PROTO_TCP);
    return 0;
}

/* RST in answer to a segment no connection takes (RFC 9293 3.10.7.1). */
static void send_reset(zbuf_ip_stack_t *s, uint32_t src, uint32_t dst, uint16_t sport,
                       uint16_t dport, uint32_t seq, uint32_t ack, uint8_t flags)
{
    zbuf_t *z;
    uint8_t *h;
    if (zbuf_create(&z) != 0)
        return;
    if (zbuf_prepend_space(z, TCP_HLEN, (void **)&h) != 0) {
        zbuf_delete(z);
        return;
    }
    memset(h, 0, TCP_HLEN);
    put16(h, sport);
    put16(h + 2, dport);
    put32(h + 4, seq);
    put32(h + 8, ack);
    h[12] = (TCP_HLEN / 4) << 4;
    h[13] = flags;
    put16(h + 16, zbuf_ip__fold(zbuf_ip__sum_mem(
                      h, TCP_HLEN, zbuf_ip__pseudo(src, dst, IP_PROTO_TCP, TCP_HLEN))));
    s->st.tcp_tx_segs++;
    s->st.tcp_rst_tx++;
    zbuf_ip__output(s, z, src, dst, IP_PROTO_TCP);
}

static void send_syn(zbuf_ip_tcp_t *t)
{
    uint8_t flags = t->state == ZBUF_IP_TCP_SYN_RCVD ? (TCP_SYN | TCP_ACK) : TCP_SYN;
    tcp_emit(t, t->iss, flags, 0, 0);
}

/* The per-connection limit on ACKs that a peer's unacceptable segments
 * draw (PAWS drops, out-of-window segments without payload, challenges),
 * like Linux's tcp_oow_rate_limited(): true when one went out less than
 * #ZBUF_IP_TCP_INVALID_RATELIMIT_MS ago; otherwise this one is recorded. */
static bool oow_limited(zbuf_ip_tcp_t *t)
{
    zbuf_ip_stack_t *s = t->stack;
    if (t->oow_acked && s->now - t->oow_ack_at < ZBUF_IP_TCP_INVALID_RATELIMIT_MS)
        return true;
    t->oow_acked = true;
    t->oow_ack_at = s->now;
    return false;
}

void zbuf_ip__tcp_challenge_window(zbuf_ip_stack_t *s)
{
    /* A budget drawn anew each second between half and one and a half
     * times the average (Linux since CVE-2016-5696): an observer cannot
     * count the ACKs of a fixed budget. */
    s->challenge_window = s->now;
    s->challenge_count = 0;
    s->challenge_budget = ZBUF_IP_TCP_CHALLENGE_ACKS / 2 +
                          zbuf_ip__random(s) % ZBUF_IP_TCP_CHALLENGE_ACKS;
}

/* RFC 5961 challenge ACK, limited per connection and per stack (see
 * <zbuf/ip_opts.h>). */
static void challenge_ack(zbuf_ip_tcp_t *t)
{
    zbuf_ip_stack_t *s = t->stack;
    if (oow_limited(t)) {
        s->st.tcp_challenge_acks_limited++;
        return;
    }
    if (s->now >= s->challenge_window + 1000)
        zbuf_ip__tcp_challenge_window(s);
    if (s->challenge_count >= s->challenge_budget) {
        s->st.tcp_challenge_acks_limited++;
        return;
    }
    s->challenge_count++;
    s->st.tcp_challenge_acks++;
    tcp_emit(t, t->snd_max, TCP_ACK, 0, 0);
}

static bool can_send_data(const zbuf_ip_tcp_t *t)
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

/* Send one segment starting at `seq` (within what has been sent or may be
 * sent), up to `maxlen` bytes, with FIN if `fin_ok` and it reaches the
 * queued FIN.  Returns the sequence space sent (0: nothing). */
static size_t send_from(zbuf_ip_tcp_t *t, uint32_t seq, size_t maxlen, bool fin_ok)
{
    size_t qlen = zbuf_length(t->sndq);
    size_t off = seq - t->snd_una;
    if (off > qlen)
        return 0;
    size_t len = qlen - off;
    if (len > maxlen)
        len = maxlen;
    bool fin = fin_ok && t->fin_queued && off + len == qlen;
    if (len == 0 && !fin)
        return 0;
    uint8_t flags = TCP_ACK;
    if (len && off + len == qlen)
        flags |= TCP_PSH;
    if (fin)
        flags |= TCP_FIN;
    if (tcp_emit(t, seq, flags, off, len) != 0)
        return 0;
    if (SEQ_LT(seq, t->snd_max)) {
        t->retransmits++;
        t->stack->st.tcp_retransmits++;
        t->timing = false; /* Karn: no sample from anything retransmitted */
    }
    if (t->in_recovery)
        t->prr_out += (uint32_t)(len + fin);
    if (t->t_rtx == 0)
        t->t_rtx = t->stack->now + t->rto;
    return len + fin;
}

/* Send the segment of record `r` again (zero copy: a new dup of the queue):
 * one segment, or several of the MSS if it shrank since (path MTU). */
static bool resend(zbuf_ip_tcp_t *t, struct txseg *r)
{
    bool fin = (r->flags & TX_FIN) != 0;
    uint32_t len = seg_len(r) - fin, off = 0;
    bool sent = false;
    do {
        uint32_t n = umin32(len - off, t->mss);
        if (send_from(t, r->seq + off, n, fin && off + n == len) == 0)
            break;
        sent = true;
        off += n;
    } while (off < len);
    if (!sent)
        return false;
    if (!(r->flags & TX_RETRANS)) {
        r->flags |= TX_RETRANS;
        t->retrans_out += seg_len(r);
    }
    r->flags |= TX_EVER_RETRANS;
    r->xmit = t->stack->now;
    if (t->undo_ok && (t->in_recovery || (t->undo_rto && SEQ_LT(r->seq, t->undo_hi)))) {
        t->undo_sent++;
        t->undo_retrans++;
    }
    return true;
}

/* Send up to `len` new bytes (and the FIN if it follows them) at snd_max,
 * with its record.  Returns the sequence space sent. */
static size_t send_new(zbuf_ip_tcp_t *t, size_t len)
{
    zbuf_ip_stack_t *s = t->stack;
    if (!rq_room(t))
        return 0;
    uint32_t seq = t->snd_max;
    size_t n = send_from(t, seq, len, true);
    if (n == 0)
        return 0;
    struct txseg *r = rq_at(t, t->rq_n++);
    r->seq = seq;
    r->end = seq + (uint32_t)n;
    r->xmit = s->now;
    r->flags = (t->fin_queued && r->end - t->snd_una == zbuf_length(t->sndq) + 1) ? TX_FIN : 0;
    if (!t->timing && !t->ts_ok) {
        t->timing = true;
        t->rtt_seq = seq;
        t->rtt_start = s->now;
    }
    t->snd_max += (uint32_t)n;
    t->t_persist = 0;
    return n;
}

static void tlp_schedule(zbuf_ip_tcp_t *t);

static int tcp_output_inner(zbuf_ip_tcp_t *t)
{
    zbuf_ip_stack_t *s = t->stack;
    if (t->dead)
        return 0;
    int sent = 0;
    /* While bytes are missing, the peer learns which ones from SACK blocks;
     * full-sized data segments have no room for them, so a pure ACK with
     * the blocks goes first. */
    if (t->ack_now && t->sack_ok && (t->ooo || t->dsack_pending) && synchronized(t)) {
        tcp_emit(t, t->snd_max, TCP_ACK, 0, 0);
        t->ack_now = false;
    }
    if (can_send_data(t)) {
        /* Lost segments first, oldest first, as far as the pipe allows; not
         * while F-RTO waits for the ACK of the new data it sent (step 2). */
        for (uint32_t i = 0; i < t->rq_n && t->lost_out > 0 && t->frto != 2 &&
                             sent < ZBUF_IP_TCP_BURST;
             i++) {
            struct txseg *r = rq_at(t, i);
            if ((r->flags & (TX_LOST | TX_RETRANS | TX_SACKED)) != TX_LOST)
                continue;
            if (tcp_pipe(t) >= t->cwnd || !resend(t, r))
                break;
            sent++;
        }
        size_t qlen = zbuf_length(t->sndq);
        uint32_t smss = send_mss(t);
        while (sent < ZBUF_IP_TCP_BURST) {
            uint32_t flight = t->snd_max - t->snd_una;
            if (flight > qlen)
                break; /* FIN already sent */
            size_t avail = qlen - flight;
            uint32_t pipe = tcp_pipe(t);
            uint32_t cwnd_room = t->cwnd > pipe ? t->cwnd - pipe : 0;
            uint32_t wnd_room = t->snd_wnd > flight ? t->snd_wnd - flight : 0;
            uint32_t usable = umin32(cwnd_room, wnd_room);
            size_t len = avail;
            if (len > smss)
                len = smss;
            if (len > usable)
                len = usable;
            bool fin = t->fin_queued && flight + len == qlen;
            if (len == 0 && !fin)
                break;
            if (len < smss && !fin) {
                if (len < avail && len < t->max_snd_wnd / 2)
                    break; /* sender silly-window avoidance: wait for more window */
                if (len == avail && !t->nodelay && flight > 0)
                    break; /* Nagle: a small segment waits for the ACK of what flies */
            }
            if (send_new(t, len) == 0)
                break;
            sent++;
        }
        t->output_pending = sent == ZBUF_IP_TCP_BURST;
        if (sent)
            tlp_schedule(t);
        /* Data waits and nothing flies to bring an ACK: probe the window. */
        if (sent == 0 && t->snd_max == t->snd_una && qlen > 0 && t->t_rtx == 0 &&
            t->t_persist == 0) {
            uint32_t base = t->rto << (t->persist_shift < 10 ? t->persist_shift : 10);
            t->t_persist = s->now + (base > ZBUF_IP_TCP_RTO_MAX_MS ? ZBUF_IP_TCP_RTO_MAX_MS : base);
        }
    }
    if (sent == 0 && t->ack_now && t->state != ZBUF_IP_TCP_SYN_SENT &&
        t->state != ZBUF_IP_TCP_LISTEN && t->state != ZBUF_IP_TCP_CLOSED)
        tcp_emit(t, t->snd_max, TCP_ACK, 0, 0);
    return sent;
}

int zbuf_ip_tcp_output(zbuf_ip_tcp_t *t)
{
    if (t == NULL || t->dead)
        return -EINVAL;
    zbuf_ip__tick(t->stack);
    tcp_output_inner(t);
    return 0;
}

/* ------------------------------------------------------------ RTT and RTO */

/* Windowed minimum of the RTT samples over #ZBUF_IP_TCP_MIN_RTT_WLEN_MS
 * (RFC 8985 min_rtt), with Kathleen Nichols' algorithm (as in Linux's
 * win_minmax): three samples, the minimum and the best of the later
 * quarters and halves of the window, so that when the minimum ages out a
 * recent one takes its place at once.  Constant memory and time. */
static void min_rtt_update(zbuf_ip_tcp_t *t, uint32_t r)
{
    uint64_t now = t->stack->now, win = ZBUF_IP_TCP_MIN_RTT_WLEN_MS;
    struct rtt_at v = {r, now}, *m = t->minrtt_s;
    if (t->min_rtt == UINT32_MAX || r <= m[0].rtt || now - m[2].at > win) {
        m[0] = m[1] = m[2] = v; /* new minimum, or nothing in the window */
    } else {
        if (r <= m[1].rtt)
            m[1] = m[2] = v;
        else if (r <= m[2].rtt)
            m[2] = v;
        /* Age the choices: the best one left the window, or the second
         * or third choice stands for too old a part of it. */
        uint64_t dt = now - m[0].at;
        if (dt > win) {
            m[0] = m[1];
            m[1] = m[2];
            m[2] = v;
            if (now - m[0].at > win) {
                m[0] = m[1];
                m[1] = m[2];
                m[2] = v;
            }
        } else if (m[1].at == m[0].at && dt > win / 4) {
            m[1] = m[2] = v;
        } else if (m[2].at == m[1].at && dt > win / 2) {
            m[2] = v;
        }
    }
    t->min_rtt = m[0].rtt;
}

/* RTO = SRTT + 4 RTTVAR, bounded (RFC 6298 2.3): also ends a backoff. */
static void rto_update(zbuf_ip_tcp_t *t)
{
    uint32_t var = t->rttvar4 ? t->rttvar4 : 1;
    uint32_t rto = (t->srtt8 >> 3) + var;
    if (rto < t->stack->cfg.tcp_rto_min_ms)
        rto = t->stack->cfg.tcp_rto_min_ms;
    if (rto > ZBUF_IP_TCP_RTO_MAX_MS)
        rto = ZBUF_IP_TCP_RTO_MAX_MS;
    t->rto = rto;
}

static void rtt_sample(zbuf_ip_tcp_t *t, uint32_t r)
{
    min_rtt_update(t, r);
    if (!t->have_rtt) {
        t->srtt8 = r << 3;
        t->rttvar4 = r << 1;
        t->have_rtt = true;
    } else {
        int32_t delta = (int32_t)r - (int32_t)(t->srtt8 >> 3);
        t->srtt8 = (uint32_t)((int32_t)t->srtt8 + delta);
        uint32_t ad = (uint32_t)(delta < 0 ? -delta : delta);
        t->rttvar4 = t->rttvar4 + ad - (t->rttvar4 >> 2);
    }
    rto_update(t);
}

static void rto_backoff(zbuf_ip_tcp_t *t)
{
    t->rto = t->rto * 2 > ZBUF_IP_TCP_RTO_MAX_MS ? ZBUF_IP_TCP_RTO_MAX_MS : t->rto * 2;
}

/* ------------------------------------------------------------ user calls */

static bool tuple_in_use(zbuf_ip_stack_t *s, uint32_t la, uint16_t lp, uint32_t ra, uint16_t rp)
{
    for (zbuf_ip_tcp_t *t = s->tcps; t; t = t->next)
        if (!t->dead && t->lport == lp && t->laddr == la && t->raddr == ra && t->rport == rp &&
            t->state != ZBUF_IP_TCP_LISTEN && t->state != ZBUF_IP_TCP_CLOSED)
            return true;
    return false;
}

static bool port_in_use(zbuf_ip_stack_t *s, uint32_t addr, uint16_t port)
{
    for (zbuf_ip_tcp_t *t = s->tcps; t; t = t->next)
        if (!t->dead && t->bound && t->lport == port &&
            (t->laddr == addr || t->laddr == ZBUF_IP_ANY || addr == ZBUF_IP_ANY))
            return true;
    return false;
}

int zbuf_ip_tcp_new(zbuf_ip_stack_t *s, zbuf_ip_tcp_t **out)
{
    if (s == NULL || out == NULL)
        return -EINVAL;
    zbuf_ip__tick(s);
    zbuf_ip_tcp_t *t = pcb_alloc(s);
    if (t == NULL)
        return s->ntcp >= ZBUF_IP_TCP_PCBS ? -ENOSPC : -ENOMEM;
    *out = t;
    return 0;
}

void zbuf_ip_tcp_set_callbacks(zbuf_ip_tcp_t *t, const zbuf_ip_tcp_callbacks_t *cbs, void *arg)
{
    if (t == NULL)
        return;
    if (cbs)
        t->cb = *cbs;
    else
        memset(&t->cb, 0, sizeof t->cb);
    t->arg = arg;
}

static uint16_t ephemeral(zbuf_ip_stack_t *s, uint32_t addr)
{
    for (int tries = 0; tries < 16384; tries++) {
        uint16_t p = s->next_port++;
        if (s->next_port == 0)
            s->next_port = 49152;
        if (p >= 49152 && !port_in_use(s, addr, p))
            return p;
    }
    return 0;
}

int zbuf_ip_tcp_bind(zbuf_ip_tcp_t *t, uint32_t addr, uint16_t port)
{
    if (t == NULL || t->dead || t->bound || t->state != ZBUF_IP_TCP_CLOSED)
        return -EINVAL;
    zbuf_ip_stack_t *s = t->stack;
    if (addr != ZBUF_IP_ANY && !zbuf_ip__is_local(s, addr))
        return -EADDRNOTAVAIL;
    if (port == 0)
        port = ephemeral(s, addr);
    else if (port_in_use(s, addr, port))
        return -EADDRINUSE;
    if (port == 0)
        return -EADDRINUSE;
    t->laddr = addr;
    t->lport = port;
    t->bound = true;
    return 0;
}

int zbuf_ip_tcp_listen(zbuf_ip_tcp_t *t, unsigned backlog)
{
    if (t == NULL || t->dead || !t->bound || t->state != ZBUF_IP_TCP_CLOSED)
        return -EINVAL;
    if (backlog < 1)
        backlog = 1;
    if (backlog > ZBUF_IP_TCP_BACKLOG_MAX)
        backlog = ZBUF_IP_TCP_BACKLOG_MAX;
    t->backlog = backlog;
    t->state = ZBUF_IP_TCP_LISTEN;
    return 0;
}

/* Our receive window scale: the smallest shift that expresses rcv_buf. */
static uint8_t our_wscale(uint32_t rcv_buf)
{
    uint8_t sh = 0;
    while (sh < ZBUF_IP_TCP_MAX_WSCALE && (rcv_buf >> sh) > 65535)
        sh++;
    return sh;
}

int zbuf_ip_tcp_connect(zbuf_ip_tcp_t *t, uint32_t addr, uint16_t port)
{
    if (t == NULL || t->dead || t->state != ZBUF_IP_TCP_CLOSED || port == 0 || addr == 0)
        return -EINVAL;
    zbuf_ip_stack_t *s = t->stack;
    zbuf_ip__tick(s);
    zbuf_ip_netif_t *nif = zbuf_ip__route(s, addr);
    if (nif == NULL)
        return -ENETUNREACH;
    uint32_t laddr = t->laddr ? t->laddr : nif->cfg.addr;
    uint16_t lport = t->lport;
    if (!t->bound) {
        lport = ephemeral(s, laddr);
        if (lport == 0)
            return -EADDRINUSE;
    }
    if (tuple_in_use(s, laddr, lport, addr, port))
        return -EADDRINUSE;
    t->bound = true;
    t->laddr = laddr;
    t->lport = lport;
    t->raddr = addr;
    t->rport = port;
    zbuf_ip__tcp_isn(s, laddr, lport, addr, port, &t->iss);
    ts_setup(t);
    t->snd_una = t->iss;
    t->snd_max = t->iss + 1;
    t->recover = t->iss;
    t->rcv_wscale = our_wscale(t->rcv_buf);
    uint32_t m = nif->cfg.mtu - IP_HLEN - TCP_HLEN;
    t->pmtu = nif->cfg.mtu;
    t->mss = (uint16_t)umin32(m, ZBUF_IP_TCP_DEFAULT_MSS);
    t->state = ZBUF_IP_TCP_SYN_SENT;
    s->st.tcp_connects++;
    send_syn(t);
    t->t_rtx = s->now + t->rto;
    return 0;
}

int zbuf_ip_tcp_write(zbuf_ip_tcp_t *t, zbuf_t *data)
{
    if (t == NULL || t->dead || data == NULL || zbuf_length(data) == 0)
        return -EINVAL;
    if (t->fin_queued || t->app_closed ||
        (t->state != ZBUF_IP_TCP_ESTABLISHED && t->state != ZBUF_IP_TCP_CLOSE_WAIT &&
         t->state != ZBUF_IP_TCP_SYN_SENT && t->state != ZBUF_IP_TCP_SYN_RCVD))
        return -ENOTCONN;
    if (zbuf_length(data) > zbuf_ip_tcp_sndbuf(t))
        return -EAGAIN;
    int rc = zbuf_append(t->sndq, data);
    if (rc)
        return rc;
    zbuf_ip__tick(t->stack);
    tcp_output_inner(t);
    return 0;
}

size_t zbuf_ip_tcp_sndbuf(const zbuf_ip_tcp_t *t)
{
    if (t == NULL || t->dead || t->fin_queued)
        return 0;
    size_t q = zbuf_length(t->sndq);
    return q >= t->snd_buf ? 0 : t->snd_buf - q;
}

void zbuf_ip_tcp_recved(zbuf_ip_tcp_t *t, size_t n)
{
    if (t == NULL || t->dead)
        return;
    if (n > t->rcv_held)
        n = t->rcv_held;
    uint32_t before = t->rcv_adv - t->rcv_nxt;
    if (SEQ_LT(t->rcv_adv, t->rcv_nxt))
        before = 0;
    /* The charge goes in proportion (all of it with the last byte): the
     * application returns bytes, not the zbufs they came in. */
    size_t c = n == t->rcv_held ? t->rcv_held_charge
                                : (size_t)((uint64_t)t->rcv_held_charge * n / t->rcv_held);
    mem_sub(t, &t->rcv_held_charge, c);
    t->rcv_held -= n;
    uint32_t space = rcv_space(t);
    /* Tell the peer when this release grew the window by a quarter of the
     * buffer beyond what it knows, or it was nearly closed (so a
     * zero-window sender restarts quickly).  (Not for the growth past
     * the 65535 bytes a SYN could carry: the next ACK tells that.) */
    if (synchronized(t) && !t->fin_rcvd && space > before &&
        ((n >= t->rcv_buf / 4 && space - before >= t->rcv_buf / 4) || before < t->mss)) {
        t->ack_now = true;
        if (t->stack->depth == 0) {
            zbuf_ip__tick(t->stack);
            tcp_output_inner(t);
        }
    }
}

void zbuf_ip_tcp_set_nodelay(zbuf_ip_tcp_t *t, bool nodelay)
{
    if (t)
        t->nodelay = nodelay;
}

/* Anything from the peer shows it is alive: restart the idle period. */
static void keep_touch(zbuf_ip_tcp_t *t)
{
    if (t->keep_idle && synchronized(t) && t->state != ZBUF_IP_TCP_TIME_WAIT) {
        t->keep_sent = 0;
        t->t_keep = t->stack->now + t->keep_idle;
    }
}

int zbuf_ip_tcp_set_keepalive(zbuf_ip_tcp_t *t, uint32_t idle_ms, uint32_t interval_ms,
                              unsigned count)
{
    if (t == NULL || t->dead || (idle_ms && (interval_ms == 0 || count == 0)))
        return -EINVAL;
    t->keep_idle = idle_ms;
    t->keep_intvl = interval_ms;
    t->keep_count = count;
    t->t_keep = 0;
    zbuf_ip__tick(t->stack);
    keep_touch(t);
    return 0;
}

int zbuf_ip_tcp_shutdown(zbuf_ip_tcp_t *t)
{
    if (t == NULL || t->dead)
        return -EINVAL;
    if (t->fin_queued)
        return 0;
    switch (t->state) {
    case ZBUF_IP_TCP_ESTABLISHED:
    case ZBUF_IP_TCP_SYN_RCVD:
        t->state = ZBUF_IP_TCP_FIN_WAIT_1;
        break;
    case ZBUF_IP_TCP_CLOSE_WAIT:
        t->state = ZBUF_IP_TCP_LAST_ACK;
        break;
    default:
        return -ENOTCONN;
    }
    t->fin_queued = true;
    zbuf_ip__tick(t->stack);
    tcp_output_inner(t);
    return 0;
}

void zbuf_ip_tcp_close(zbuf_ip_tcp_t *t)
{
    if (t == NULL || t->dead)
        return;
    zbuf_ip_stack_t *s = t->stack;
    zbuf_ip__tick(s);
    t->app_closed = true;
    memset(&t->cb, 0, sizeof t->cb);
    switch (t->state) {
    case ZBUF_IP_TCP_ESTABLISHED:
    case ZBUF_IP_TCP_CLOSE_WAIT:
        zbuf_ip_tcp_shutdown(t);
        break;
    case ZBUF_IP_TCP_FIN_WAIT_1:
    case ZBUF_IP_TCP_CLOSING:
    case ZBUF_IP_TCP_LAST_ACK:
        break;
    case ZBUF_IP_TCP_FIN_WAIT_2:
        /* Orphaned: do not wait forever for the peer's FIN. */
        t->t_2msl = s->now + s->cfg.tcp_time_wait_ms;
        break;
    case ZBUF_IP_TCP_TIME_WAIT:
        break;
    case ZBUF_IP_TCP_SYN_RCVD:
    case ZBUF_IP_TCP_SYN_SENT:
        zbuf_ip_tcp_abort(t);
        return;
    default: /* CLOSED, LISTEN */
        pcb_kill(t);
        break;
    }
    if (s->depth == 0)
        zbuf_ip__tcp_reap(s);
}

void zbuf_ip_tcp_abort(zbuf_ip_tcp_t *t)
{
    if (t == NULL || t->dead)
        return;
    zbuf_ip_stack_t *s = t->stack;
    zbuf_ip__tick(s);
    if (t->state >= ZBUF_IP_TCP_SYN_RCVD && t->state != ZBUF_IP_TCP_TIME_WAIT)
        tcp_emit(t, t->snd_max, TCP_RST | TCP_ACK, 0, 0);
    t->app_closed = true;
    pcb_kill(t);
    if (s->depth == 0)
        zbuf_ip__tcp_reap(s);
}

zbuf_ip_tcp_state_t zbuf_ip_tcp_state(const zbuf_ip_tcp_t *t)
{
    return t ? (zbuf_ip_tcp_state_t)t->state : ZBUF_IP_TCP_CLOSED;
}

int zbuf_ip_tcp_info(const zbuf_ip_tcp_t *t, zbuf_ip_tcp_info_t *out)
{
    if (t == NULL || out == NULL)
        return -EINVAL;
    memset(out, 0, sizeof *out);
    out->state = (zbuf_ip_tcp_state_t)t->state;
    out->local_addr = t->laddr;
    out->remote_addr = t->raddr;
    out->local_port = t->lport;
    out->remote_port = t->rport;
    out->mss = t->mss;
    out->snd_wscale = t->snd_wscale;
    out->rcv_wscale = t->rcv_wscale;
    out->cwnd = t->cwnd;
    out->ssthresh = t->ssthresh;
    out->snd_wnd = t->snd_wnd;
    out->rcv_wnd = SEQ_LT(t->rcv_adv, t->rcv_nxt) ? 0 : t->rcv_adv - t->rcv_nxt;
    out->srtt_ms = t->srtt8 >> 3;
    out->rto_ms = t->rto;
    out->unacked = zbuf_length(t->sndq);
    out->ooo_bytes = t->ooo_bytes;
    out->retransmits = t->retransmits;
    out->ts_ok = t->ts_ok;
    out->sack_ok = t->sack_ok;
    out->min_rtt_ms = t->min_rtt;
    out->lost_bytes = t->lost_out;
    out->sacked_bytes = t->sacked_out;
    out->rcv_mem = t->rcv_held_charge + t->ooo_charge;
    out->pmtu = t->pmtu;
    out->syncookie = t->cookie;
    return 0;
}

/* ----------------------------------------------------------------- input */

struct seg {
    uint16_t sport, dport;
    uint32_t seq, ack;
    uint8_t flags;
    uint32_t wnd;       /* raw field */
    uint32_t len;       /* payload bytes */
    bool has_mss, has_ws, has_sackok;
    uint16_t mss;
    uint8_t ws;
    unsigned nsack;          /* SACK blocks of this segment */
    uint32_t sack[4][2];
    bool has_ts;             /* timestamps option (RFC 7323) */
    uint32_t tsval, tsecr;
};

/* Parse the options of a SYN.  Any malformed option ends the walk (an
 * option length below 2 would otherwise loop forever). */
static void parse_options(const uint8_t *o, size_t n, struct seg *sg)
{
    size_t i = 0;
    while (i < n) {
        uint8_t kind = o[i];
        if (kind == 0)
            break;
        if (kind == 1) {
            i++;
            continue;
        }
        if (i + 1 >= n)
            break;
        uint8_t olen = o[i + 1];
        if (olen < 2 || i + olen > n)
            break;
        if (kind == 2 && olen == 4) {
            sg->has_mss = true;
            sg->mss = get16(o + i + 2);
        } else if (kind == 3 && olen == 3) {
            sg->has_ws = true;
            sg->ws = o[i + 2];
        } else if (kind == 4 && olen == 2) {
            sg->has_sackok = true;
        } else if (kind == 8 && olen == 10) {
            sg->has_ts = true;
            sg->tsval = get32(o + i + 2);
            sg->tsecr = get32(o + i + 6);
        } else if (kind == 5 && olen >= 10 && (olen - 2) % 8 == 0) {
            for (size_t b = 0; b < (size_t)(olen - 2) / 8 && sg->nsack < 4; b++) {
                sg->sack[sg->nsack][0] = get32(o + i + 2 + 8 * b);
                sg->sack[sg->nsack][1] = get32(o + i + 6 + 8 * b);
                sg->nsack++;
            }
        }
        i += olen;
    }
}

/* The send MSS from the peer's (clamped), the path MTU and the options
 * every segment carries (timestamps: 12 bytes, RFC 6691). */
static uint16_t mss_now(const zbuf_ip_tcp_t *t)
{
    uint32_t m = umin32(t->mss_clamp, (uint32_t)t->pmtu - IP_HLEN - TCP_HLEN);
    if (t->ts_ok)
        m = m > ZBUF_IP_TCP_MIN_MSS + 12 ? m - 12 : ZBUF_IP_TCP_MIN_MSS;
    return (uint16_t)(m < ZBUF_IP_TCP_MIN_MSS ? ZBUF_IP_TCP_MIN_MSS : m);
}

static void apply_syn_options(zbuf_ip_tcp_t *t, const struct seg *sg)
{
    zbuf_ip_netif_t *nif = zbuf_ip__route(t->stack, t->raddr);
    t->pmtu = nif ? nif->cfg.mtu : 1500;
    uint32_t ours = (uint32_t)t->pmtu - IP_HLEN - TCP_HLEN;
    uint32_t mss = sg->has_mss ? sg->mss : ZBUF_IP_TCP_DEFAULT_MSS;
    if (mss < ZBUF_IP_TCP_MIN_MSS)
        mss = ZBUF_IP_TCP_MIN_MSS; /* an MSS of 0 must not make us send empty segments */
    t->mss_clamp = (uint16_t)umin32(mss, ours);
    t->sack_ok = sg->has_sackok;
    /* Timestamps: on when both sides offer them (our SYN did unless they are
     * switched off). */
    t->ts_ok = sg->has_ts && !t->stack->cfg.tcp_no_timestamps;
    if (t->ts_ok) {
        t->ts_recent = sg->tsval;
        t->ts_recent_set = true;
        t->ts_recent_age = t->stack->now;
    }
    t->mss = mss_now(t);
    if (sg->has_ws) {
        t->ws_ok = true;
        t->snd_wscale = sg->ws > ZBUF_IP_TCP_MAX_WSCALE ? ZBUF_IP_TCP_MAX_WSCALE : sg->ws;
    } else {
        t->ws_ok = false;
        t->snd_wscale = 0;
        t->rcv_wscale = 0;
    }
}

/* RTT of the handshake: from the echoed timestamp (valid even after a
 * retransmitted SYN), else only if the SYN went once (Karn). */
static void syn_rtt(zbuf_ip_tcp_t *t, const struct seg *sg)
{
    zbuf_ip_stack_t *s = t->stack;
    if (t->cookie)
        return; /* no SYN-ACK time kept, and the TSval carried options */
    if (t->ts_ok && sg->has_ts && sg->tsecr) {
        uint32_t r = ts_val(t, s->now) - sg->tsecr;
        if (r <= ZBUF_IP_TCP_RTO_MAX_MS) {
            rtt_sample(t, r);
            return;
        }
    }
    if (t->nrexmit == 0)
        rtt_sample(t, (uint32_t)(s->now - (t->t_rtx - t->rto)));
}

static void enter_established(zbuf_ip_tcp_t *t)
{
    t->state = ZBUF_IP_TCP_ESTABLISHED;
    keep_touch(t);
    t->rtt_seq = t->snd_una;
    t->rack_fack = t->snd_una;
    t->cwnd = (uint32_t)t->mss * ZBUF_IP_TCP_INIT_CWND;
    t->ssthresh = 0x7fffffff;
    t->nrexmit = 0;
    t->t_rtx = 0;
}

static void enter_time_wait(zbuf_ip_tcp_t *t)
{
    t->state = ZBUF_IP_TCP_TIME_WAIT;
    t->t_rtx = t->t_persist = t->t_delack = t->t_keep = 0;
    t->output_pending = false;
    t->t_2msl = t->stack->now + t->stack->cfg.tcp_time_wait_ms;
}

/* Will in-order payload be kept (by the application) or dropped at once? */
static bool rcv_keeps(const zbuf_ip_tcp_t *t)
{
    return !(t->app_closed || t->cb.recv == NULL || t->fin_rcvd);
}

/* Hand in-order payload to the application (consumes z), charging its
 * receive memory `charge` until zbuf_ip_tcp_recved(). */
static void deliver(zbuf_ip_tcp_t *t, zbuf_t *z, size_t charge)
{
    size_t n = zbuf_length(z);
    t->rcv_nxt += (uint32_t)n;
    t->stack->st.tcp_rx_payload += n;
    if (!rcv_keeps(t)) {
        zbuf_delete(z); /* nobody reads: consume it right away */
        return;
    }
    t->rcv_held += n;
    mem_add(t, &t->rcv_held_charge, charge);
    t->cb.recv(t->arg, t, z);
}

/* Drop the out-of-order entry farthest ahead, if it starts after `above`
 * (any, for `any`).  Returns whether one went. */
static bool ooo_prune_tail(zbuf_ip_tcp_t *t, uint32_t above, bool any)
{
    struct ooo **pp = &t->ooo;
    if (*pp == NULL)
        return false;
    while ((*pp)->next)
        pp = &(*pp)->next;
    if (!any && !SEQ_GT((*pp)->seq, above))
        return false;
    ooo_unlink(t, pp);
    t->stack->st.tcp_ooo_pruned++;
    return true;
}

/* Admit payload `z` (in order, or out of order at `seq`) into the
 * connection's receive memory: the pool's policy first, then the
 * connection's limit (<zbuf/ip_opts.h>, ZBUF_IP_TCP_RCV_MEM_MULT): over it, a
 * compact copy if that is cheaper, then the out-of-order queue's far end
 * goes.  Returns the charge, or 0 when `z` must be dropped (counted; the
 * caller deletes it). */
static size_t rcv_admit(zbuf_ip_tcp_t *t, zbuf_t *z, bool ooo, uint32_t seq)
{
    zbuf_ip_stack_t *s = t->stack;
    if (zbuf_ip__rx_hold(s, z, ooo) != 0)
        return 0;
    /* The most a segment can pin, without looking at its buffers; the
     * exact charge only near the limit. */
    size_t len = zbuf_length(z);
    size_t c = len + (ZBUF_IP__SLACK + ZBUF_IP__SEG_COST) * zbuf_seg_count(z);
    if (t->rcv_held_charge + t->ooo_charge + c > t->rcv_mem)
        c = zbuf_ip__charge(z);
    /* The ratio the window follows: what this peer's segments cost, over
     * 16 segments at a time (no division per segment). */
    t->ratio_len += len;
    t->ratio_charge += c;
    if (++t->ratio_n == 16) {
        uint64_t sample = t->ratio_len * 256 / t->ratio_charge;
        t->rcv_ratio = (uint32_t)((t->rcv_ratio * 3 + (sample > 256 ? 256 : sample)) / 4);
        if (t->rcv_ratio < 1)
            t->rcv_ratio = 1;
        t->ratio_len = t->ratio_charge = 0;
        t->ratio_n = 0;
    }
    if (t->rcv_held_charge + t->ooo_charge + c <= t->rcv_mem)
        return c;
    /* Over the limit: what a compact copy would cost, then room made by
     * pruning; copy only if it then fits. */
    size_t compact = len + ZBUF_IP__SEG_COST;
    size_t need = compact < c ? compact : c;
    while (t->rcv_held_charge + t->ooo_charge + need > t->rcv_mem && ooo_prune_tail(t, seq, !ooo))
        ;
    if (t->rcv_held_charge + t->ooo_charge + need > t->rcv_mem) {
        s->st.tcp_rcv_mem_drops++;
        return 0;
    }
    if (t->rcv_held_charge + t->ooo_charge + c > t->rcv_mem) {
        if (zbuf_ip__collapse(s, z) != 0) {
            s->st.tcp_rcv_mem_drops++;
            return 0;
        }
        c = zbuf_ip__charge(z);
    }
    return c;
}

void zbuf_ip__tcp_prune(zbuf_ip_stack_t *s)
{
    for (zbuf_ip_tcp_t *t = s->tcps; t; t = t->next) {
        if (t->dead)
            continue;
        for (struct ooo **pp = &t->ooo; *pp;) {
            if (zbuf_ip__pinned((*pp)->z) > (*pp)->len) { /* not a compact copy */
                ooo_unlink(t, pp);
                s->st.tcp_ooo_pruned++;
            } else {
                pp = &(*pp)->next;
            }
        }
    }
}

static void take_fin(zbuf_ip_tcp_t *t)
{
    if (t->fin_rcvd)
        return;
    t->fin_rcvd = true;
    t->rcv_nxt++;
    t->ack_now = true;
    switch (t->state) {
    case ZBUF_IP_TCP_SYN_RCVD:
    case ZBUF_IP_TCP_ESTABLISHED:
        t->state = ZBUF_IP_TCP_CLOSE_WAIT;
        break;
    case ZBUF_IP_TCP_FIN_WAIT_1:
        if (t->fin_acked)
            enter_time_wait(t);
        else
            t->state = ZBUF_IP_TCP_CLOSING;
        break;
    case ZBUF_IP_TCP_FIN_WAIT_2:
        enter_time_wait(t);
        break;
    default:
        break;
    }
    if (!t->app_closed && t->cb.recv)
        t->cb.recv(t->arg, t, NULL);
}

/* Bytes [lo, hi) arrived a second time: tell the peer in the next ACK
 * (RFC 2883), so that it can undo a spurious retransmission. */
static void note_dsack(zbuf_ip_tcp_t *t, uint32_t lo, uint32_t hi)
{
    if (!t->sack_ok || lo == hi)
        return;
    t->dsack_pending = true;
    t->dsack_lo = lo;
    t->dsack_hi = hi;
}

/* Put an out-of-order segment in the queue (consumes z). */
static void ooo_insert(zbuf_ip_tcp_t *t, uint32_t seq, zbuf_t *z, bool fin)
{
    zbuf_ip_stack_t *s = t->stack;
    uint32_t len = (uint32_t)zbuf_length(z);
    uint32_t end = seq + len;
    struct ooo **pp = &t->ooo, *prev = NULL;
    while (*pp && SEQ_LT((*pp)->seq, seq)) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    if (prev) {
        uint32_t pend = prev->seq + prev->len;
        if (SEQ_GEQ(pend, end) && !(fin && pend == end && !prev->fin)) {
            zbuf_delete(z); /* all of it is queued already */
            if (len > 0) {
                note_dsack(t, seq, end);
                t->ooo_last = seq; /* its run is the second block (RFC 2883) */
            }
            return;
        }
        if (SEQ_GT(pend, seq)) {
            zbuf_cut(z, 0, pend - seq, NULL);
            seq = pend;
            len = end - seq;
        }
    }
    if (*pp && (*pp)->seq == seq && SEQ_GEQ((*pp)->seq + (*pp)->len, end) && len > 0 &&
        !(fin && (*pp)->seq + (*pp)->len == end && !(*pp)->fin)) {
        zbuf_delete(z); /* the same bytes are queued already */
        note_dsack(t, seq, end);
        t->ooo_last = seq;
        return;
    }
    /* Drop queued segments the new one covers entirely. */
    while (*pp && SEQ_LEQ((*pp)->seq + (*pp)->len, end)) {
        if ((*pp)->fin && (*pp)->seq + (*pp)->len == end)
            fin = true;
        ooo_unlink(t, pp);
    }
    if (*pp && SEQ_LT((*pp)->seq, end)) {
        zbuf_cut(z, (*pp)->seq - seq, ZBUF_TO_END, NULL);
        len = (*pp)->seq - seq;
        fin = false;
    }
    if (len == 0 && !fin) {
        zbuf_delete(z);
        return;
    }
    size_t charge = 0;
    struct ooo *o = NULL;
    if (t->nooo < ZBUF_IP_TCP_OOO_SEGS && (charge = rcv_admit(t, z, true, seq)) != 0)
        o = malloc(sizeof *o);
    if (o == NULL) {
        s->st.tcp_ooo_drops++;
        zbuf_delete(z);
        return;
    }
    /* The admission may have pruned entries past this one: find the place
     * again (those before it are untouched). */
    for (pp = &t->ooo; *pp && SEQ_LT((*pp)->seq, seq);)
        pp = &(*pp)->next;
    o->seq = seq;
    o->len = len;
    o->charge = (uint32_t)charge;
    mem_add(t, &t->ooo_charge, charge);
    o->fin = fin;
    o->z = z;
    o->next = *pp;
    *pp = o;
    t->nooo++;
    t->ooo_bytes += len;
    t->ooo_last = seq;
    s->st.tcp_ooo_queued++;
}

/* Deliver what the queue now holds in order. */
static void ooo_drain(zbuf_ip_tcp_t *t)
{
    while (!t->dead && t->ooo && SEQ_LEQ(t->ooo->seq, t->rcv_nxt)) {
        struct ooo *o = t->ooo;
        t->ooo = o->next;
        t->nooo--;
        t->ooo_bytes -= o->len;
        mem_sub(t, &t->ooo_charge, o->charge);
        size_t o_charge = o->charge;
        uint32_t start = o->seq, end = o->seq + o->len;
        bool fin = o->fin;
        zbuf_t *z = o->z;
        free(o);
        if (SEQ_GT(end, t->rcv_nxt)) {
            if (t->rcv_nxt != start)
                zbuf_cut(z, 0, t->rcv_nxt - start, NULL);
            deliver(t, z, o_charge); /* admitted when it was queued */
        } else {
            zbuf_delete(z);
        }
        if (fin && !t->dead && end == t->rcv_nxt)
            take_fin(t);
    }
}

/* ------------------------------------------------------- loss recovery */

/* Was (x1, e1) sent after (x2, e2)?  Same millisecond: the higher sequence
 * number went later (RFC 8985 6.2). */
static bool sent_after(uint64_t x1, uint32_t e1, uint64_t x2, uint32_t e2)
{
    return x1 > x2 || (x1 == x2 && SEQ_GT(e1, e2));
}

/* The peer delivered record `r` (cumulative ACK or SACK): advance the RACK
 * state (RFC 8985 6.2 step 2) to it if it is the latest sent so far. */
static void rack_update(zbuf_ip_tcp_t *t, const struct txseg *r, const struct seg *sg,
                        bool sacked)
{
    zbuf_ip_stack_t *s = t->stack;
    uint32_t rtt = (uint32_t)(s->now - r->xmit);
    if (r->flags & TX_EVER_RETRANS) {
        /* Was it the retransmission that arrived?  The echoed timestamp
         * says; without one, an RTT below the minimum means the original. */
        if (t->ts_ok && sg->has_ts ? SEQ_LT(sg->tsecr, ts_val(t, r->xmit)) : rtt < t->min_rtt)
            return;
    } else if (sacked && SEQ_LT(r->end, t->rack_fack)) {
        t->reordering_seen = true; /* an original overtaken by a later one */
    }
    if (!(r->flags & TX_EVER_RETRANS))
        min_rtt_update(t, rtt);
    if (!t->rack_valid || sent_after(r->xmit, r->end, t->rack_xmit, t->rack_end)) {
        t->rack_valid = true;
        t->rack_xmit = r->xmit;
        t->rack_end = r->end;
        t->rack_rtt = rtt;
    }
    if (SEQ_GT(r->end, t->rack_fack))
        t->rack_fack = r->end;
}

/* Drop the records the cumulative ACK covers (the peer has those bytes). */
static void rq_ack(zbuf_ip_tcp_t *t, uint32_t ack, const struct seg *sg)
{
    while (t->rq_n > 0) {
        struct txseg *r = rq_at(t, 0);
        if (SEQ_GT(r->end, ack)) {
            if (SEQ_GT(ack, r->seq)) { /* part of it: trim */
                rq_uncount(t, r, ack - r->seq);
                r->seq = ack;
            }
            break;
        }
        if (!(r->flags & TX_SACKED))
            rack_update(t, r, sg, false);
        rq_uncount(t, r, seg_len(r));
        t->rq_head = (t->rq_head + 1) & (t->rq_cap - 1);
        t->rq_n--;
    }
}

/* Restore cwnd and ssthresh to their values before the episode. */
static void undo_cwnd(zbuf_ip_tcp_t *t)
{
    t->undo_ok = false;
    if (t->prior_ssthresh > t->ssthresh)
        t->ssthresh = t->prior_ssthresh;
    if (t->prior_cwnd > t->cwnd)
        t->cwnd = t->prior_cwnd;
}

/* A timeout was spurious: the originals were only delayed.  The response
 * is Linux's undo rather than RFC 4015's more careful one: cwnd and
 * ssthresh as before the timeout, the segments it marked lost and that
 * did not go again yet are in flight after all (no go-back-N), and the
 * RTO loses its backoff. */
static void rto_undo(zbuf_ip_tcp_t *t)
{
    undo_cwnd(t);
    for (uint32_t i = 0; i < t->rq_n; i++) {
        struct txseg *r = rq_at(t, i);
        if (r->flags & TX_LOST) {
            r->flags &= (uint8_t)~TX_LOST;
            t->lost_out -= seg_len(r);
        }
    }
    t->recover = t->rto_prior_recover;
    t->undo_rto = t->rto_eifel = false;
    t->frto = 0;
    if (t->rto > t->rto_prior && (!t->ts_ok || !t->have_rtt))
        t->rto = t->rto_prior; /* no sample could end the backoff (Karn) */
    else if (t->have_rtt)
        rto_update(t);
    t->stack->st.tcp_spurious_rto++;
}

/* A recovery (or timeout) whose every retransmission the peer reported
 * receiving twice (D-SACK) was spurious: the originals had arrived.  Once
 * it is over, restore cwnd and ssthresh to their values before it (as
 * Linux's undo, after RFC 3708's detection). */
static void try_undo(zbuf_ip_tcp_t *t)
{
    if (!t->undo_ok || t->in_recovery || t->undo_sent == 0 || t->undo_retrans > 0)
        return;
    t->stack->st.tcp_spurious_undo++;
    if (t->undo_rto) {
        t->stack->st.tcp_spurious_rto_dsack++;
        rto_undo(t);
    } else {
        undo_cwnd(t);
    }
}

/* Bytes SACKed below `hi`. */
static uint32_t sacked_below(const zbuf_ip_tcp_t *t, uint32_t hi)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < t->rq_n && SEQ_LT(rq_at(t, i)->seq, hi); i++)
        if (rq_at(t, i)->flags & TX_SACKED)
            n += seg_len(rq_at(t, i));
    return n;
}

/* Was the timeout spurious?  Called with the ACKs that follow it (the
 * records and snd_una already updated by this ACK).
 *  - Eifel (RFC 3522), with timestamps: the first ACK of new data echoes
 *    a TSval older than the retransmission's: the original arrived.
 *  - F-RTO (RFC 5682, the SACK-enhanced variant of section 3), without:
 *    step 2, the first ACK advances snd_una below rto_high and new data
 *    may go: two new segments go instead of retransmissions; step 3, the
 *    next ACK acknowledges (cumulatively or by SACK) data below rto_high
 *    that was not retransmitted: the originals are arriving.  Any other
 *    ACK ends F-RTO: the conventional recovery (everything marked lost by
 *    the timeout goes again) continues. */
static void rto_check(zbuf_ip_tcp_t *t, const struct seg *sg, uint32_t acked)
{
    if (t->rto_eifel) {
        if (acked == 0)
            return; /* only an ACK of the retransmitted segment tells */
        t->rto_eifel = false;
        if (sg->has_ts && SEQ_LT(sg->tsecr, t->rto_tsval))
            rto_undo(t);
        return;
    }
    uint32_t flight = t->snd_max - t->snd_una;
    if (t->frto == 1) {
        size_t qlen = zbuf_length(t->sndq);
        t->frto = 0;
        if (acked && SEQ_LT(t->snd_una, t->rto_high) && qlen > flight && t->snd_wnd > flight) {
            t->frto = 2;
            t->frto_sacked = sacked_below(t, t->rto_high);
        }
        return;
    }
    t->frto = 0;
    if (acked || sacked_below(t, t->rto_high) > t->frto_sacked) {
        t->stack->st.tcp_spurious_rto_frto++;
        rto_undo(t);
    }
}

/* The peer reports bytes [lo, hi) received twice (RFC 2883).  RFC 8985 6.2
 * step 4: the reordering window grows (once per round trip) and keeps its
 * size for the next 16 recoveries; a duplicate retransmission of the
 * current episode counts towards its undo. */
static void dsack_rx(zbuf_ip_tcp_t *t, uint32_t lo, uint32_t hi)
{
    t->stack->st.tcp_dsack_rx++;
    t->reordering_seen = true;
    if (!t->dsack_round_set || SEQ_GEQ(t->snd_una, t->dsack_round)) {
        t->dsack_round_set = true;
        t->dsack_round = t->snd_max;
        if (t->reo_wnd_mult < 255)
            t->reo_wnd_mult++;
        t->reo_wnd_persist = 16;
    }
    if (t->undo_ok && SEQ_GEQ(lo, t->undo_lo) && SEQ_LEQ(hi, t->undo_hi)) {
        uint32_t n = (hi - lo + t->mss - 1) / t->mss;
        t->undo_retrans = n >= t->undo_retrans ? 0 : t->undo_retrans - n;
        try_undo(t);
    }
}

/* Mark the records this ACK's SACK blocks cover.  Blocks of data not sent,
 * below snd_una or inverted are ignored; a D-SACK block (RFC 2883: the
 * first block, below the cumulative ACK or inside the second block) goes
 * to dsack_rx().  Returns the bytes newly SACKed. */
static uint32_t rq_sack(zbuf_ip_tcp_t *t, const struct seg *sg)
{
    if (sg->nsack > 0) {
        uint32_t lo = sg->sack[0][0], hi = sg->sack[0][1];
        bool dup = SEQ_LT(lo, sg->ack) ||
                   (sg->nsack > 1 && SEQ_GEQ(lo, sg->sack[1][0]) && SEQ_LEQ(hi, sg->sack[1][1]));
        /* Only blocks of data we sent, within a window of the ACK. */
        if (dup && SEQ_LT(lo, hi) && SEQ_LEQ(hi, t->snd_max) &&
            SEQ_GEQ(lo, t->snd_una - t->max_snd_wnd) && SEQ_GT(lo, t->iss))
            dsack_rx(t, lo, hi);
    }
    /* In sequence order: the peer lists its latest block first, and taking
     * it first would make the older blocks look reordered to the RACK. */
    uint32_t blk[4][2];
    unsigned nb = sg->nsack;
    for (unsigned b = 0; b < nb; b++) {
        unsigned j = b;
        for (; j > 0 && SEQ_LT(sg->sack[b][0], blk[j - 1][0]); j--) {
            blk[j][0] = blk[j - 1][0];
            blk[j][1] = blk[j - 1][1];
        }
        blk[j][0] = sg->sack[b][0];
        blk[j][1] = sg->sack[b][1];
    }
    uint32_t news = 0;
    for (unsigned b = 0; b < nb; b++) {
        uint32_t lo = blk[b][0], hi = blk[b][1];
        if (!SEQ_LT(lo, hi) || !SEQ_LT(t->snd_una, hi) || SEQ_GT(hi, t->snd_max) ||
            SEQ_LT(lo, t->snd_una))
            continue;
        /* Binary search for the first record ending after lo. */
        uint32_t a = 0, z = t->rq_n;
        while (a < z) {
            uint32_t m = a + (z - a) / 2;
            if (SEQ_LEQ(rq_at(t, m)->end, lo))
                a = m + 1;
            else
                z = m;
        }
        for (uint32_t i = a; i < t->rq_n; i++) {
            struct txseg *r = rq_at(t, i);
            if (SEQ_GT(r->end, hi))
                break;
            if (SEQ_LT(r->seq, lo) || (r->flags & TX_SACKED))
                continue;
            rq_uncount(t, r, seg_len(r));
            r->flags = (uint8_t)((r->flags & (TX_EVER_RETRANS | TX_FIN)) | TX_SACKED);
            t->sacked_out += seg_len(r);
            news += seg_len(r);
            rack_update(t, r, sg, true);
        }
    }
    return news;
}

/* RACK reordering window (RFC 8985 6.2 step 4): min_rtt/4 times the
 * multiplier D-SACKs grow, at most SRTT. */
static uint32_t rack_reo_wnd(const zbuf_ip_tcp_t *t)
{
    if (!t->reordering_seen && (t->in_recovery || t->sacked_out >= 3u * t->mss))
        return 0;
    uint32_t w = t->min_rtt == UINT32_MAX ? 0 : t->min_rtt / 4 * t->reo_wnd_mult;
    uint32_t srtt = t->srtt8 >> 3;
    return w < srtt ? w : srtt;
}

/* RACK loss detection (RFC 8985 6.2 step 5): every segment, retransmissions
 * included, sent before the latest delivered one and older than it by
 * rack_rtt + reo_wnd is lost; the youngest of the others sets the RACK
 * timer.  Returns whether it marked any. */
static bool rack_detect(zbuf_ip_tcp_t *t)
{
    zbuf_ip_stack_t *s = t->stack;
    t->t_rack = 0;
    if (!t->rack_valid || (t->sacked_out == 0 && t->retrans_out == 0))
        return false; /* nothing was delivered beyond a segment still out */
    uint64_t reo = rack_reo_wnd(t), wait = 0;
    bool lost = false;
    for (uint32_t i = 0; i < t->rq_n; i++) {
        struct txseg *r = rq_at(t, i);
        if (!lost_markable(r))
            continue;
        if (!sent_after(t->rack_xmit, t->rack_end, r->xmit, r->end))
            continue;
        uint64_t due = r->xmit + t->rack_rtt + reo;
        if (due <= s->now) {
            mark_lost(t, r);
            s->st.tcp_rack_losses++;
            lost = true;
        } else if (due - s->now > wait) {
            wait = due - s->now;
        }
    }
    if (wait)
        t->t_rack = s->now + wait;
    return lost;
}

/* Duplicate ACKs that mean a loss: 3, or fewer when so little flies that 3
 * can never come back and nothing new waits to be sent (early retransmit,
 * RFC 5827). */
static unsigned dupthresh(const zbuf_ip_tcp_t *t, uint32_t flight)
{
    uint32_t oseg = (flight + t->mss - 1) / t->mss;
    bool unsent = zbuf_length(t->sndq) > (size_t)(t->snd_max - t->snd_una);
    if (oseg < 4 && !unsent)
        return oseg > 1 ? oseg - 1 : 1;
    return 3;
}

/* May a new loss episode start (RFC 6582: not for losses of the episode a
 * timeout or an earlier recovery already handled)? */
static bool may_recover(const zbuf_ip_tcp_t *t)
{
    return !t->in_recovery && (SEQ_GT(t->snd_una, t->recover) || t->recover == t->iss);
}

/* PRR (RFC 6937) with the slow-start reduction bound: set cwnd so that what
 * leaves in recovery follows what the peer delivers, ending near ssthresh. */
static void prr_update(zbuf_ip_tcp_t *t, uint32_t delivered)
{
    t->prr_delivered += delivered;
    uint32_t pipe = tcp_pipe(t);
    int64_t sndcnt;
    if (pipe > t->ssthresh) {
        uint64_t fs = t->recover_fs ? t->recover_fs : 1;
        sndcnt = (int64_t)(((uint64_t)t->prr_delivered * t->ssthresh + fs - 1) / fs) - t->prr_out;
    } else {
        int64_t limit = (int64_t)t->prr_delivered - t->prr_out;
        if (limit < (int64_t)delivered)
            limit = delivered;
        limit += t->mss;
        sndcnt = (int64_t)(t->ssthresh - pipe);
        if (sndcnt > limit)
            sndcnt = limit;
    }
    if (sndcnt < 0)
        sndcnt = 0;
    /* Whole segments, as Linux counts them: a fraction of one still lets a
     * full segment go (rounding up), else it would wait for silly-window
     * avoidance. */
    sndcnt = (sndcnt + t->mss - 1) / t->mss * t->mss;
    t->cwnd = pipe + (uint32_t)sndcnt;
}

/* ssthresh after a loss: half the flight, at least two segments. */
static uint32_t loss_ssthresh(const zbuf_ip_tcp_t *t, uint32_t flight)
{
    return flight / 2 > 2u * t->mss ? flight / 2 : 2u * t->mss;
}

/* Let at least one segment go beyond the pipe. */
static void cwnd_floor(zbuf_ip_tcp_t *t)
{
    uint32_t need = tcp_pipe(t) + t->mss;
    if (t->cwnd < need)
        t->cwnd = need;
}

/* Start an episode that may be undone: remember what to restore and the
 * range [snd_una, snd_max) it covers. */
static void undo_begin(zbuf_ip_tcp_t *t, bool ok, bool rto)
{
    t->undo_ok = ok;
    t->undo_rto = rto;
    t->undo_lo = t->snd_una;
    t->undo_hi = t->snd_max;
    t->undo_retrans = t->undo_sent = 0;
    t->prior_cwnd = t->cwnd;
    t->prior_ssthresh = t->ssthresh;
}

/* A loss was found: start fast recovery (RFC 6675 / 6937).  The first lost
 * segment goes at once, whatever PRR says (the fast retransmit). */
static void enter_recovery(zbuf_ip_tcp_t *t)
{
    zbuf_ip_stack_t *s = t->stack;
    uint32_t flight = t->snd_max - t->snd_una;
    undo_begin(t, true, false);
    t->ssthresh = loss_ssthresh(t, flight);
    t->recover = t->snd_max;
    t->in_recovery = true;
    t->recover_fs = flight;
    t->prr_delivered = 0;
    t->prr_out = 0;
    t->t_tlp = 0;
    s->st.tcp_fast_retransmits++;
    prr_update(t, 0);
    cwnd_floor(t);
}

/* The first segment is deemed lost (duplicate ACKs, NewReno partial ACK). */
static bool mark_head_lost(zbuf_ip_tcp_t *t)
{
    return t->rq_n > 0 && mark_lost(t, rq_at(t, 0));
}

/* Loss probe timer (RFC 8985 7.2): armed after new data is sent or an ACK
 * arrives, while data is outstanding, with SACK.  The probe comes 2 SRTT
 * after the last transmission (plus the peer's worst delayed ACK when one
 * segment flies), but never after the RTO.
 *
 * Unlike RFC 8985 and Linux, which probe only outside recovery, the timer
 * is also armed in fast recovery and after a timeout: there a lost
 * retransmission at the tail, or the lost ACK of the last segments while
 * cwnd holds everything else back, leaves nothing that could bring an ACK,
 * and RACK has no later delivery to judge by.  Measured on the 5 % loss
 * bulk tests, most timeouts were such stalls.  One probe per stall (until
 * the probe is acknowledged), and ACKs push the timer back, so a recovery
 * that makes progress never probes. */
static void tlp_schedule(zbuf_ip_tcp_t *t)
{
    zbuf_ip_stack_t *s = t->stack;
    t->t_tlp = 0;
    if (!t->sack_ok || t->tlp_valid || t->snd_una == t->snd_max || !can_send_data(t))
        return;
    uint64_t pto = ZBUF_IP_TCP_RTO_INIT_MS;
    if (t->have_rtt) {
        pto = 2u * (t->srtt8 >> 3) + 2; /* + 2 ms of clock granularity */
        if ((uint32_t)(t->snd_max - t->snd_una) <= t->mss)
            pto += ZBUF_IP_TCP_TLP_DELACK_MS;
    }
    uint64_t at = s->now + pto;
    if (t->t_rtx && at >= t->t_rtx)
        return; /* the RTO comes first */
    t->t_tlp = at;
}

/* After the probe's ACK: a probe that was a retransmission and whose ACK
 * echoes the probe's own timestamp (or any, without timestamps: RFC 8985
 * 7.4.2 without D-SACK) repaired a loss; congestion control reacts as to a
 * recovery episode. */
static void tlp_acked(zbuf_ip_tcp_t *t, const struct seg *sg)
{
    t->tlp_valid = false;
    if (!t->tlp_retrans || t->tlp_in_recovery || t->in_recovery)
        return; /* a recovery or timeout already reduced cwnd for this episode */
    if (t->ts_ok && sg->has_ts && SEQ_LT(sg->tsecr, t->tlp_tsval))
        return; /* the original's ACK: nothing was lost */
    uint32_t flight = t->snd_max - t->snd_una;
    t->ssthresh = loss_ssthresh(t, flight);
    if (t->cwnd > t->ssthresh)
        t->cwnd = t->ssthresh;
}

/* Process an acceptable ACK in a synchronized state.  Returns false if the
 * segment must be dropped. */
static bool process_ack(zbuf_ip_tcp_t *t, const struct seg *sg)
{
    zbuf_ip_stack_t *s = t->stack;
    uint32_t ack = sg->ack;
    if (SEQ_GT(ack, t->snd_max)) {
        t->ack_now = true; /* acks something not yet sent */
        return false;
    }
    if (SEQ_LT(ack, t->snd_una - t->max_snd_wnd)) {
        t->ack_now = true; /* RFC 5961 5.2: too old to be real */
        return false;
    }
    uint32_t wnd = sg->wnd << t->snd_wscale;
    bool wnd_changed = false;
    if (SEQ_LT(t->snd_wl1, sg->seq) || (t->snd_wl1 == sg->seq && SEQ_LEQ(t->snd_wl2, ack))) {
        wnd_changed = t->snd_wnd != wnd;
        t->snd_wnd = wnd;
        t->snd_wl1 = sg->seq;
        t->snd_wl2 = ack;
        if (wnd > t->max_snd_wnd)
            t->max_snd_wnd = wnd;
        if (wnd > 0) {
            t->t_persist = 0;
            t->persist_shift = 0;
        }
    }
    uint32_t flight = t->snd_max - t->snd_una;
    uint32_t prior_sacked = t->sacked_out;
    uint32_t acked = SEQ_GT(ack, t->snd_una) ? ack - t->snd_una : 0;
    size_t data = 0;
    if (acked) {
        size_t qlen = zbuf_length(t->sndq);
        data = acked > qlen ? qlen : acked;
        /* RTT: from the echoed timestamp once per flight (RFC 7323 4.1;
         * retransmissions too), else from the timed segment (Karn). */
        if (t->ts_ok && sg->has_ts && SEQ_GT(ack, t->rtt_seq)) {
            uint32_t r = ts_val(t, s->now) - sg->tsecr;
            if (r <= ZBUF_IP_TCP_RTO_MAX_MS) {
                rtt_sample(t, r);
                t->rtt_seq = t->snd_max;
            }
        } else if (t->timing && SEQ_GT(ack, t->rtt_seq)) {
            t->timing = false;
            rtt_sample(t, (uint32_t)(s->now - t->rtt_start));
        }
        rq_ack(t, ack, sg);
        if (data)
            zbuf_cut(t->sndq, 0, data, NULL); /* release callbacks of acked buffers run */
        if (acked > qlen && t->fin_queued)
            t->fin_acked = true;
        t->snd_una = ack;
        t->nrexmit = 0;
    }
    uint32_t news = t->sack_ok ? rq_sack(t, sg) : 0;
    if (t->rto_eifel || t->frto)
        rto_check(t, sg, acked);
    /* Duplicate ACK: with SACK one that reports new data (RFC 6675), which
     * counts even when it rides on data flowing the other way; without, an
     * ACK with nothing else in it (RFC 5681). */
    bool dup = !acked && flight > 0 && ack == t->snd_una &&
               (t->sack_ok ? news > 0
                           : sg->len == 0 && !(sg->flags & (TCP_SYN | TCP_FIN)) && !wnd_changed);
    uint32_t delivered = acked + (t->sacked_out - prior_sacked);
    if (acked)
        t->dupacks = 0;
    else if (dup && t->dupacks < 255) {
        t->dupacks++;
        if (!t->sack_ok)
            delivered = t->mss;
    }

    /* Loss detection. */
    bool lost = rack_detect(t);
    uint32_t fl = t->snd_max - t->snd_una;
    if (!t->in_recovery && (t->dupacks >= dupthresh(t, fl) || t->sacked_out >= 3u * t->mss))
        lost |= mark_head_lost(t);
    bool partial = t->in_recovery && acked && SEQ_LT(ack, t->recover) && !t->sack_ok;
    if (partial)
        lost |= mark_head_lost(t); /* NewReno partial ACK: the next one is lost too */
    if (lost && may_recover(t)) {
        enter_recovery(t);
        partial = true; /* the fast retransmit goes now */
    }

    if (t->in_recovery && acked && SEQ_GEQ(ack, t->recover)) {
        /* Full acknowledgment: leave fast recovery (RFC 6582 3.2 step 3). */
        t->cwnd = umin32(t->ssthresh, (fl > t->mss ? fl : t->mss) + t->mss);
        t->in_recovery = false;
        t->dupacks = 0;
        if (t->reo_wnd_persist && --t->reo_wnd_persist == 0)
            t->reo_wnd_mult = 1;
        try_undo(t);
    } else if (t->in_recovery) {
        prr_update(t, delivered);
        if (partial)
            cwnd_floor(t);
    } else if (acked && t->cwnd < t->ssthresh) {
        /* Slow start (RFC 5681, L = 1 SMSS), after a timeout too. */
        t->cwnd += umin32(acked, t->mss);
    } else if (acked && lost == false && t->lost_out == 0) {
        t->cwnd += umin32(acked, (uint32_t)((uint64_t)t->mss * t->mss / (t->cwnd ? t->cwnd : 1)) + 1);
    }
    if (t->tlp_valid && SEQ_GEQ(t->snd_una, t->tlp_end))
        tlp_acked(t, sg);

    if (t->snd_una == t->snd_max) {
        t->t_rtx = t->t_rack = t->t_tlp = 0;
        t->tlp_valid = false;
    } else if (acked) {
        t->t_rtx = s->now + t->rto; /* RFC 6298 5.3 */
    }
    if (acked || dup)
        tlp_schedule(t);
    if (data && !t->app_closed && t->cb.sent)
        t->cb.sent(t->arg, t, data);
    return true;
}

/* Set up `t`, a new child of listener `l`, from the peer's SYN `sg`
 * (`src` and `dst` its addresses), in SYN_RCVD with `iss`.  `t` may be a
 * stand-in that is never linked (a SYN cookie's answer): then `l` is not
 * told. */
static void child_init(zbuf_ip_tcp_t *l, zbuf_ip_tcp_t *t, const struct seg *sg, uint32_t src,
                       uint32_t dst, uint32_t iss, bool linked)
{
    t->bound = true;
    t->laddr = dst;
    t->lport = sg->dport;
    t->raddr = src;
    t->rport = sg->sport;
    if (linked) {
        t->listener = l;
        l->pending++;
    }
    t->cb = l->cb;
    t->arg = l->arg;
    t->nodelay = l->nodelay;
    ts_setup(t);
    t->irs = sg->seq;
    t->rcv_nxt = sg->seq + 1;
    t->rcv_adv = t->rcv_nxt;
    t->rcv_wscale = our_wscale(t->rcv_buf);
    apply_syn_options(t, sg);
    t->snd_wnd = sg->wnd; /* unscaled in a SYN */
    t->max_snd_wnd = t->snd_wnd;
    t->snd_wl1 = sg->seq;
    t->iss = iss;
    t->snd_una = t->iss;
    t->snd_max = t->iss + 1;
    t->snd_wl2 = t->iss;
    t->recover = t->iss;
    t->state = ZBUF_IP_TCP_SYN_RCVD;
}

/* ------------------------------------------------------------ SYN cookies */

/* Linux's scheme (see <zbuf/ip_opts.h>): the top 8 bits of the cookie carry
 * a 64-second counter, the low 24 a keyed hash of the connection and that
 * counter plus the index of the MSS in this table. */
static const uint16_t cookie_mss[4] = {536, 1300, 1440, 1460};
#define COOKIE_PERIOD_MS 64000u
#define COOKIE_BITS 24
#define COOKIE_MASK ((1u << COOKIE_BITS) - 1)
/* Low bits of a cookie SYN-ACK's TSval: the peer's window scale (15: none)
 * and SACK-permitted. */
#define COOKIE_TS_BITS 6
#define COOKIE_TS_NO_WS 0xfu
#define COOKIE_TS_SACK 0x10u

static uint32_t cookie_hash(const zbuf_ip_stack_t *s, uint32_t la, uint16_t lp, uint32_t ra,
                            uint16_t rp, uint32_t count, uint8_t which)
{
    uint8_t b[18];
    put32(b, la);
    put16(b + 4, lp);
    put32(b + 6, ra);
    put16(b + 10, rp);
    put32(b + 12, count);
    b[16] = 'C';
    b[17] = which;
    return (uint32_t)zbuf_ip__siphash(s->cfg.isn_key, b, sizeof b);
}

static uint32_t cookie_make(const zbuf_ip_tcp_t *t, unsigned mssidx)
{
    const zbuf_ip_stack_t *s = t->stack;
    uint32_t count = (uint32_t)(s->now / COOKIE_PERIOD_MS);
    return cookie_hash(s, t->laddr, t->lport, t->raddr, t->rport, 0, 1) + t->irs +
           (count << COOKIE_BITS) +
           ((cookie_hash(s, t->laddr, t->lport, t->raddr, t->rport, count, 2) + mssidx) &
            COOKIE_MASK);
}

/* The MSS index `cookie` carries for this connection (the peer's ISN
 * `irs`), or -1 if it is not one of ours or too old. */
static int cookie_check(const zbuf_ip_stack_t *s, uint32_t la, uint16_t lp, uint32_t ra,
                        uint16_t rp, uint32_t irs, uint32_t cookie)
{
    uint32_t count = (uint32_t)(s->now / COOKIE_PERIOD_MS);
    uint32_t diff = cookie - cookie_hash(s, la, lp, ra, rp, 0, 1) - irs;
    uint32_t age = (count - (diff >> COOKIE_BITS)) & 0xffu;
    if (age >= ZBUF_IP_TCP_COOKIE_AGE_MS / COOKIE_PERIOD_MS)
        return -1;
    uint32_t idx = ((diff & COOKIE_MASK) - cookie_hash(s, la, lp, ra, rp, count - age, 2)) &
                   COOKIE_MASK;
    return idx < 4 ? (int)idx : -1;
}

/* Answer SYN `sg` for listener `l` with a SYN cookie, keeping nothing. */
static void cookie_answer(zbuf_ip_tcp_t *l, const struct seg *sg, uint32_t src, uint32_t dst)
{
    zbuf_ip_stack_t *s = l->stack;
    /* A stand-in PCB, never linked: tcp_emit() builds the SYN-ACK from it
     * exactly as it would for a real half-open connection. */
    zbuf_ip_tcp_t t;
    memset(&t, 0, sizeof t);
    pcb_defaults(s, &t);
    child_init(l, &t, sg, src, dst, 0, false);
    unsigned idx = 3;
    uint32_t peer = sg->has_mss ? sg->mss : ZBUF_IP_TCP_DEFAULT_MSS;
    while (idx > 0 && peer < cookie_mss[idx])
        idx--;
    t.iss = cookie_make(&t, idx);
    if (t.ts_ok) {
        uint32_t now = ts_val(&t, s->now);
        uint32_t opts = (t.ws_ok ? t.snd_wscale : COOKIE_TS_NO_WS) | (t.sack_ok ? COOKIE_TS_SACK : 0);
        uint32_t v = (now & ~((1u << COOKIE_TS_BITS) - 1)) | opts;
        if (SEQ_GT(v, now))
            v -= 1u << COOKIE_TS_BITS; /* never ahead of the clock the peer will see next */
        t.tsval_syn = v;
        t.tsval_syn_set = true;
    } else {
        /* Nowhere to keep them: offer neither window scaling nor SACK. */
        t.ws_ok = t.sack_ok = false;
        t.rcv_wscale = t.snd_wscale = 0;
    }
    tcp_emit(&t, t.iss, TCP_SYN | TCP_ACK, 0, 0);
    l->cookies_sent = true;
    l->cookies_at = s->now;
    s->st.tcp_syncookies_sent++;
}

static void conn_input(zbuf_ip_tcp_t *t, zbuf_t *z, struct seg *sg);

/* An ACK for listener `l` that may complete a SYN cookie.  Returns false
 * if it does not (the caller answers with a RST); true when it was taken
 * (a connection made and `z` processed on it, or dropped for lack of a
 * PCB). */
static bool cookie_accept(zbuf_ip_tcp_t *l, zbuf_t *z, struct seg *sg, uint32_t src,
                          uint32_t dst)
{
    zbuf_ip_stack_t *s = l->stack;
    if (s->cfg.tcp_no_syncookies || !l->cookies_sent ||
        s->now - l->cookies_at >= ZBUF_IP_TCP_COOKIE_AGE_MS || (sg->flags & (TCP_SYN | TCP_RST)))
        return false;
    int idx = cookie_check(s, dst, sg->dport, src, sg->sport, sg->seq - 1, sg->ack - 1);
    if (idx < 0) {
        s->st.tcp_syncookies_failed++;
        return false;
    }
    /* The SYN, as far as the cookie kept it. */
    struct seg syn;
    memset(&syn, 0, sizeof syn);
    syn.sport = sg->sport;
    syn.dport = sg->dport;
    syn.seq = sg->seq - 1;
    syn.flags = TCP_SYN;
    syn.has_mss = true;
    syn.mss = cookie_mss[idx];
    if (sg->has_ts && !s->cfg.tcp_no_timestamps) {
        uint32_t o = sg->tsecr & ((1u << COOKIE_TS_BITS) - 1);
        if ((o & COOKIE_TS_NO_WS) != COOKIE_TS_NO_WS) {
            if ((o & COOKIE_TS_NO_WS) > ZBUF_IP_TCP_MAX_WSCALE) {
                s->st.tcp_syncookies_failed++;
                return false;
            }
            syn.has_ws = true;
            syn.ws = (uint8_t)(o & COOKIE_TS_NO_WS);
        }
        syn.has_sackok = (o & COOKIE_TS_SACK) != 0;
        syn.has_ts = true;
        syn.tsval = sg->tsval;
    }
    zbuf_ip_tcp_t *t = pcb_alloc(s);
    if (t == NULL) {
        zbuf_delete(z); /* no room: the peer sends again */
        return true;
    }
    child_init(l, t, &syn, src, dst, sg->ack - 1, true);
    t->cookie = true;
    rcv_window(t, true); /* the edge the cookie's SYN-ACK advertised (same state) */
    s->st.tcp_syncookies_ok++;
    conn_input(t, z, sg); /* the handshake completes as for a kept SYN */
    if (!t->dead && t->state == ZBUF_IP_TCP_SYN_RCVD) {
        /* The ACK was not taken after all (PAWS, a bad ACK number): this
         * half-open connection has no SYN-ACK to retransmit, so no timer
         * would ever end it. */
        t->app_closed = true;
        pcb_kill(t);
    }
    return true;
}

/* A segment for a listener: maybe a new connection (consumes z). */
static void listen_input(zbuf_ip_tcp_t *l, zbuf_t *z, struct seg *sg, uint32_t src, uint32_t dst)
{
    zbuf_ip_stack_t *s = l->stack;
    if (sg->flags & TCP_RST) {
        zbuf_delete(z);
        return;
    }
    if (sg->flags & TCP_ACK) {
        if (cookie_accept(l, z, sg, src, dst))
            return;
        zbuf_delete(z);
        send_reset(s, dst, src, sg->dport, sg->sport, sg->ack, 0, TCP_RST);
        return;
    }
    zbuf_delete(z); /* data on a SYN is not taken: the peer sends it again */
    if (!(sg->flags & TCP_SYN) || (sg->flags & TCP_FIN))
        return;
    bool cookies = !s->cfg.tcp_no_syncookies;
    zbuf_ip_tcp_t *t = NULL;
    if (l->pending < l->backlog)
        t = pcb_alloc(s);
    if (t == NULL) {
        if (cookies) /* backlog full or no PCB: keep nothing, answer with a cookie */
            cookie_answer(l, sg, src, dst);
        return; /* without cookies, like Linux: drop, the peer retries */
    }
    uint32_t iss;
    zbuf_ip__tcp_isn(s, dst, sg->dport, src, sg->sport, &iss);
    child_init(l, t, sg, src, dst, iss, true);
    send_syn(t);
    t->t_rtx = s->now + t->rto;
}

static void syn_sent_input(zbuf_ip_tcp_t *t, zbuf_t *z, const struct seg *sg)
{
    zbuf_ip_stack_t *s = t->stack;
    bool ack_ok = false;
    if (sg->flags & TCP_ACK) {
        if (SEQ_LEQ(sg->ack, t->iss) || SEQ_GT(sg->ack, t->snd_max)) {
            if (!(sg->flags & TCP_RST))
                send_reset(s, t->laddr, t->raddr, t->lport, t->rport, sg->ack, 0, TCP_RST);
            zbuf_delete(z);
            return;
        }
        ack_ok = true;
    }
    if (sg->flags & TCP_RST) {
        zbuf_delete(z);
        if (ack_ok) /* RFC 5961 3.2: only a RST acknowledging our SYN counts */
            pcb_fail(t, -ECONNREFUSED);
        return;
    }
    if (!(sg->flags & TCP_SYN)) {
        zbuf_delete(z);
        return;
    }
    zbuf_delete(z); /* data on a SYN-ACK is rare; the peer sends it again */
    t->irs = sg->seq;
    t->rcv_nxt = sg->seq + 1;
    t->rcv_adv = t->rcv_nxt;
    apply_syn_options(t, sg);
    if (ack_ok) {
        t->snd_una = sg->ack;
        t->timing = false;
        syn_rtt(t, sg);
        enter_established(t);
        t->snd_wnd = sg->wnd; /* never scaled in a SYN segment (RFC 7323 2.2) */
        t->max_snd_wnd = t->snd_wnd;
        t->snd_wl1 = sg->seq;
        t->snd_wl2 = sg->ack;
        t->ack_now = true;
        tcp_output_inner(t);
        if (!t->app_closed && t->cb.connected)
            t->cb.connected(t->arg, t);
        if (!t->dead)
            tcp_output_inner(t);
    } else {
        /* Simultaneous open (RFC 9293 figure 7). */
        t->state = ZBUF_IP_TCP_SYN_RCVD;
        t->snd_wnd = sg->wnd;
        t->snd_wl1 = sg->seq;
        send_syn(t);
        t->t_rtx = s->now + t->rto;
    }
}

/* The main path: a segment for a connection past SYN_SENT (consumes z). */
static void conn_input(zbuf_ip_tcp_t *t, zbuf_t *z, struct seg *sg)
{
    zbuf_ip_stack_t *s = t->stack;
    uint32_t seq = sg->seq;
    uint8_t flags = sg->flags;

    /* (A new SYN for a pair in TIME_WAIT was handled by the caller.) */
    if (t->state == ZBUF_IP_TCP_SYN_RCVD && (flags & TCP_SYN) && !(flags & TCP_ACK) &&
        seq == t->irs) {
        send_syn(t); /* our SYN-ACK was lost */
        zbuf_delete(z);
        return;
    }
    /* An old SYN (retransmitted SYN-ACK after our ACK was lost): drop the SYN
     * and keep the rest, and answer so the peer leaves SYN_RCVD. */
    if ((flags & TCP_SYN) && seq == t->irs) {
        flags &= (uint8_t)~TCP_SYN;
        seq++;
        t->ack_now = true;
    }

    /* PAWS (RFC 7323 5.3 R1): a TSval older than TS.Recent marks a segment
     * of an earlier incarnation of the sequence space; it is answered with
     * an ACK and dropped.  Not for RSTs, which carry no timestamps and are
     * judged by sequence number alone (RFC 7323 5.2).  TS.Recent idle for
     * 24 days is no longer valid (5.5). */
    if (t->ts_ok && sg->has_ts && t->ts_recent_set && !(flags & TCP_RST)) {
        if (s->now - t->ts_recent_age > 24ull * 24 * 3600 * 1000) {
            t->ts_recent_set = false;
        } else if (SEQ_LT(sg->tsval, t->ts_recent)) {
            s->st.tcp_paws_drops++;
            zbuf_delete(z);
            /* At most one such ACK per ZBUF_IP_TCP_INVALID_RATELIMIT_MS, like
             * Linux's tcp_invalid_ratelimit: a flood of replayed segments
             * must not turn into a flood of ACKs. */
            if (oow_limited(t)) {
                s->st.tcp_paws_acks_limited++;
                return;
            }
            t->ack_now = true;
            tcp_output_inner(t);
            return;
        }
    }

    uint32_t len = sg->len;
    uint32_t seglen = len + ((flags & TCP_FIN) ? 1 : 0) + ((flags & TCP_SYN) ? 1 : 0);
    uint32_t rwnd = SEQ_LT(t->rcv_adv, t->rcv_nxt) ? 0 : t->rcv_adv - t->rcv_nxt;
    bool ok;
    if (seglen == 0)
        ok = rwnd == 0 ? seq == t->rcv_nxt
                       : SEQ_GEQ(seq, t->rcv_nxt) && SEQ_LT(seq, t->rcv_nxt + rwnd);
    else
        ok = rwnd != 0 && ((SEQ_GEQ(seq, t->rcv_nxt) && SEQ_LT(seq, t->rcv_nxt + rwnd)) ||
                           (SEQ_GEQ(seq + seglen - 1, t->rcv_nxt) &&
                            SEQ_LT(seq + seglen - 1, t->rcv_nxt + rwnd)));
    bool ack_only = false;
    if (!ok) {
        if (flags & TCP_RST) {
            zbuf_delete(z);
            return;
        }
        if (rwnd == 0 && seq == t->rcv_nxt && (flags & TCP_ACK)) {
            ack_only = true; /* zero window: still take the ACK (RFC 9293 3.10.7.4) */
        } else {
            zbuf_delete(z);
            /* Segments without payload (blind ACKs, forged or not) draw one
             * ACK per ZBUF_IP_TCP_INVALID_RATELIMIT_MS at most, as in
             * Linux; duplicates of data are always answered (D-SACK). */
            if (seglen == 0 && oow_limited(t)) {
                s->st.tcp_oow_acks_limited++;
                return;
            }
            if (len > 0 && SEQ_LEQ(seq + len, t->rcv_nxt) && SEQ_GEQ(seq, t->rcv_nxt - t->rcv_buf))
                note_dsack(t, seq, seq + len); /* an old duplicate (RFC 2883) */
            t->ack_now = true;
            tcp_output_inner(t);
            return;
        }
    }

    keep_touch(t); /* an acceptable segment: the peer is alive */

    /* RFC 7323 4.3: echo the TSval of the segment at the left edge of the
     * window (SEG.SEQ <= Last.ACK.sent), so that the peer's RTT samples
     * include our delayed ACKs and no later segment's value. */
    if (t->ts_ok && sg->has_ts && !(flags & TCP_RST) && SEQ_LEQ(sg->seq, t->last_ack_sent) &&
        (!t->ts_recent_set || SEQ_GEQ(sg->tsval, t->ts_recent))) {
        t->ts_recent = sg->tsval;
        t->ts_recent_set = true;
        t->ts_recent_age = s->now;
    }

    /* RST (RFC 5961 3.2): exact match resets, in-window gets a challenge. */
    if (flags & TCP_RST) {
        zbuf_delete(z);
        s->st.tcp_rst_rx++;
        if (seq == t->rcv_nxt) {
            if (t->state == ZBUF_IP_TCP_SYN_RCVD && t->listener) {
                t->app_closed = true;
                pcb_kill(t);
            } else if (t->state == ZBUF_IP_TCP_TIME_WAIT || t->state == ZBUF_IP_TCP_CLOSING ||
                       t->state == ZBUF_IP_TCP_LAST_ACK) {
                pcb_finish(t);
            } else {
                pcb_fail(t, -ECONNRESET);
            }
        } else {
            challenge_ack(t);
        }
        return;
    }
    /* SYN in a synchronized state (RFC 5961 4.2): challenge ACK, drop. */
    if (flags & TCP_SYN) {
        zbuf_delete(z);
        challenge_ack(t);
        return;
    }
    if (!(flags & TCP_ACK)) {
        zbuf_delete(z);
        return;
    }

    /* Trim to the window: bytes already received, bytes past the edge. */
    if (ack_only) {
        zbuf_delete(z);
        z = NULL;
        len = 0;
        flags &= (uint8_t)~TCP_FIN;
        t->ack_now = true;
    } else {
        if (SEQ_LT(seq, t->rcv_nxt)) {
            uint32_t d = t->rcv_nxt - seq;
            if (len > 0)
                note_dsack(t, seq, d < len ? t->rcv_nxt : seq + len);
            if (d >= len) {
                if (d > len)
                    flags &= (uint8_t)~TCP_FIN; /* an old FIN */
                zbuf_cut(z, 0, ZBUF_TO_END, NULL);
                len = 0;
            } else {
                zbuf_cut(z, 0, d, NULL);
                len -= d;
            }
            seq = t->rcv_nxt;
            t->ack_now = true;
        }
        if (rwnd == 0 ? len > 0 : SEQ_GT(seq + len, t->rcv_nxt + rwnd)) {
            uint32_t keep = rwnd == 0 ? 0 : t->rcv_nxt + rwnd - seq;
            zbuf_cut(z, keep, ZBUF_TO_END, NULL);
            len = keep;
            flags &= (uint8_t)~TCP_FIN;
            t->ack_now = true;
        }
    }

    /* ACK. */
    if (t->state == ZBUF_IP_TCP_SYN_RCVD) {
        if (SEQ_LEQ(sg->ack, t->snd_una) || SEQ_GT(sg->ack, t->snd_max)) {
            send_reset(s, t->laddr, t->raddr, t->lport, t->rport, sg->ack, 0, TCP_RST);
            zbuf_delete(z);
            return;
        }
        t->timing = false;
        syn_rtt(t, sg);
        t->snd_una = t->iss + 1;
        enter_established(t);
        /* The window of a SYN-ACK (simultaneous open) is not scaled. */
        t->snd_wnd = (sg->flags & TCP_SYN) ? sg->wnd : sg->wnd << t->snd_wscale;
        t->max_snd_wnd = t->snd_wnd;
        t->snd_wl1 = seq;
        t->snd_wl2 = sg->ack;
        if (t->fin_queued) /* shut down before the handshake completed */
            t->state = ZBUF_IP_TCP_FIN_WAIT_1;
        zbuf_ip_tcp_t *l = t->listener;
        if (l) {
            l->pending--;
            t->listener = NULL;
            s->st.tcp_accepts++;
            int rc = l->cb.accept && !l->app_closed ? l->cb.accept(l->arg, l, t) : -ECONNREFUSED;
            if (rc != 0 && !t->dead) {
                zbuf_ip_tcp_abort(t);
            }
            if (t->dead) {
                zbuf_delete(z);
                return;
            }
        } else if (!t->app_closed && t->cb.connected) {
            t->cb.connected(t->arg, t);
            if (t->dead) {
                zbuf_delete(z);
                return;
            }
        }
    }
    if (!process_ack(t, sg)) {
        zbuf_delete(z);
        tcp_output_inner(t);
        return;
    }
    if (t->dead) {
        zbuf_delete(z);
        return;
    }
    if (t->fin_acked) {
        switch (t->state) {
        case ZBUF_IP_TCP_FIN_WAIT_1:
            t->state = ZBUF_IP_TCP_FIN_WAIT_2;
            if (t->app_closed)
                t->t_2msl = s->now + s->cfg.tcp_time_wait_ms;
            break;
        case ZBUF_IP_TCP_CLOSING:
            enter_time_wait(t);
            break;
        case ZBUF_IP_TCP_LAST_ACK:
            zbuf_delete(z);
            pcb_finish(t);
            return;
        default:
            break;
        }
    }

    /* Payload. */
    bool data_state = t->state == ZBUF_IP_TCP_ESTABLISHED ||
                      t->state == ZBUF_IP_TCP_FIN_WAIT_1 || t->state == ZBUF_IP_TCP_FIN_WAIT_2;
    if (len > 0 && data_state && !t->fin_rcvd) {
        size_t charge = 0;
        if (seq == t->rcv_nxt && rcv_keeps(t) && (charge = rcv_admit(t, z, false, seq)) == 0) {
            /* No memory for it: dropped like a lost segment; the ACK tells. */
            zbuf_delete(z);
            z = NULL;
            len = 0;
            flags &= (uint8_t)~TCP_FIN;
            t->ack_now = true;
        } else if (seq == t->rcv_nxt) {
            bool had_ooo = t->ooo != NULL;
            deliver(t, z, charge);
            z = NULL;
            if (!t->dead && had_ooo) {
                ooo_drain(t);
                t->ack_now = true; /* filled a hole: tell the sender at once */
            }
            if (!t->dead && ++t->segs_unacked >= 2)
                t->ack_now = true;
        } else {
            ooo_insert(t, seq, z, (flags & TCP_FIN) != 0);
            z = NULL;
            flags &= (uint8_t)~TCP_FIN;
            t->ack_now = true; /* duplicate ACK drives the peer's fast retransmit */
        }
    } else if (len > 0) {
        t->ack_now = true;
    }
    zbuf_delete(z);
    if (t->dead)
        return;

    /* FIN, in order. */
    if ((flags & TCP_FIN) && seq + len == t->rcv_nxt && !t->fin_rcvd)
        take_fin(t);
    else if ((flags & TCP_FIN) && t->state == ZBUF_IP_TCP_TIME_WAIT) {
        t->ack_now = true; /* retransmitted FIN: ACK and restart the wait */
        t->t_2msl = s->now + s->cfg.tcp_time_wait_ms;
    }
    if (t->dead)
        return;
    if (!t->ack_now && t->segs_unacked > 0 && t->t_delack == 0)
        t->t_delack = s->now + s->cfg.tcp_delack_ms;
    tcp_output_inner(t);
}

/* RFC 6191: may a SYN reopen a connection in TIME_WAIT?  When the old
 * connection used timestamps and the SYN carries one, the timestamp decides
 * (greater than the last one seen: it cannot be an old duplicate, whatever
 * its sequence number); otherwise, as RFC 1122, an ISN above the old
 * connection's final sequence number.  A refused SYN is treated like any
 * SYN in a synchronized state (PAWS, then a challenge ACK). */
static bool time_wait_reusable(const zbuf_ip_tcp_t *t, const struct seg *sg)
{
    if (t->ts_ok && t->ts_recent_set && sg->has_ts)
        return SEQ_GT(sg->tsval, t->ts_recent);
    return SEQ_GT(sg->seq, t->rcv_nxt);
}

static zbuf_ip_tcp_t *lookup(zbuf_ip_stack_t *s, uint32_t src, uint16_t sport, uint32_t dst,
                             uint16_t dport)
{
    zbuf_ip_tcp_t *lis = NULL;
    for (zbuf_ip_tcp_t *t = s->tcps; t; t = t->next) {
        if (t->dead || t->lport != dport)
            continue;
        if (t->state == ZBUF_IP_TCP_LISTEN) {
            if (t->laddr == ZBUF_IP_ANY || t->laddr == dst)
                if (lis == NULL || t->laddr != ZBUF_IP_ANY)
                    lis = t;
            continue;
        }
        if (t->state != ZBUF_IP_TCP_CLOSED && t->rport == sport && t->raddr == src &&
            t->laddr == dst)
            return t;
    }
    return lis;
}

void zbuf_ip__tcp_input(zbuf_ip_stack_t *s, zbuf_t *z, uint32_t src, uint32_t dst)
{
    uint8_t tmp[60];
    size_t len = zbuf_length(z);
    const uint8_t *h = zbuf_ip__hdr(z, 0, TCP_HLEN, tmp);
    size_t hlen = h ? (size_t)(h[12] >> 4) * 4 : 0;
    if (h == NULL || hlen < TCP_HLEN || hlen > len) {
        s->st.bad_tcp++;
        s->st.rx_drops++;
        zbuf_delete(z);
        return;
    }
    if (zbuf_ip__verify_rx(s) &&
        zbuf_ip__fold(zbuf_ip__sum_zbuf(z, 0, len, zbuf_ip__pseudo(src, dst, IP_PROTO_TCP, (uint32_t)len)))) {
        s->st.bad_checksum++;
        s->st.rx_drops++;
        zbuf_delete(z);
        return;
    }
    struct seg sg;
    memset(&sg, 0, sizeof sg);
    sg.sport = get16(h);
    sg.dport = get16(h + 2);
    sg.seq = get32(h + 4);
    sg.ack = get32(h + 8);
    sg.flags = h[13] & 0x3f;
    sg.wnd = get16(h + 14);
    sg.len = (uint32_t)(len - hlen);
    if (sg.sport == 0 || sg.dport == 0) {
        s->st.bad_tcp++;
        s->st.rx_drops++;
        zbuf_delete(z);
        return;
    }
    if (hlen > TCP_HLEN) {
        const uint8_t *o = zbuf_ip__hdr(z, TCP_HLEN, hlen - TCP_HLEN, tmp);
        if (o)
            parse_options(o, hlen - TCP_HLEN, &sg);
    }
    s->st.tcp_rx_segs++;
    zbuf_cut(z, 0, hlen, NULL);

    zbuf_ip_tcp_t *t = lookup(s, src, sg.sport, dst, sg.dport);
    /* A new SYN for a pair in TIME_WAIT that cannot be taken for an old
     * segment ends the wait and goes to the listener (RFC 6191).  The old
     * PCB ends as after its 2 MSL: freed if the application gave it back,
     * else CLOSED and still the application's (lookups skip it). */
    if (t && t->state == ZBUF_IP_TCP_TIME_WAIT && (sg.flags & TCP_SYN) &&
        !(sg.flags & (TCP_ACK | TCP_RST)) && time_wait_reusable(t, &sg)) {
        s->st.tcp_tw_recycled++;
        pcb_finish(t);
        t = lookup(s, src, sg.sport, dst, sg.dport);
    }
    if (t == NULL) {
        zbuf_delete(z);
        if (sg.flags & TCP_RST)
            return;
        if (sg.flags & TCP_ACK)
            send_reset(s, dst, src, sg.dport, sg.sport, sg.ack, 0, TCP_RST);
        else
            send_reset(s, dst, src, sg.dport, sg.sport, 0,
                       sg.seq + sg.len + ((sg.flags & TCP_SYN) ? 1 : 0) +
                           ((sg.flags & TCP_FIN) ? 1 : 0),
                       TCP_RST | TCP_ACK);
        return;
    }
    if (t->state == ZBUF_IP_TCP_LISTEN)
        listen_input(t, z, &sg, src, dst);
    else if (t->state == ZBUF_IP_TCP_SYN_SENT)
        syn_sent_input(t, z, &sg);
    else
        conn_input(t, z, &sg);
}

/* ------------------------------------------------------------ ICMP errors */

/* RFC 1191 plateaus, for a "fragmentation needed" without the next-hop MTU
 * (old routers): the largest below the datagram that did not fit. */
static uint16_t mtu_plateau(uint16_t len)
{
    static const uint16_t plateau[] = {32000, 17914, 8166, 4352, 2002, 1492, 1006, 508, 296, 68};
    for (size_t i = 0; i < sizeof plateau / sizeof plateau[0]; i++)
        if (plateau[i] < len)
            return plateau[i];
    return 68;
}

/* Path-MTU discovery (RFC 1191): a router could not forward a segment of
 * ours of `e->qlen` bytes.  Lower the connection's path MTU (not below
 * #ZBUF_IP_TCP_PMTU_MIN), and so its MSS, and send again at once what was
 * in flight above the new size, as pieces of the new MSS: that loss was
 * not congestion, so cwnd stays (Linux's tcp_simple_retransmit()). */
static int pmtu_reduce(zbuf_ip_tcp_t *t, const struct zbuf_ip__icmp_err *e)
{
    uint32_t mtu = e->mtu ? e->mtu : mtu_plateau(e->qlen);
    if (mtu >= e->qlen)
        return -ENOENT; /* the datagram it quotes would have fit: not true */
    if (mtu < ZBUF_IP_TCP_PMTU_MIN)
        mtu = ZBUF_IP_TCP_PMTU_MIN;
    if (mtu >= t->pmtu)
        return 0;
    t->pmtu = (uint16_t)mtu;
    t->mss = mss_now(t);
    t->stack->st.tcp_pmtu_reductions++;
    for (uint32_t i = 0; i < t->rq_n; i++) {
        struct txseg *r = rq_at(t, i);
        if (seg_len(r) - ((r->flags & TX_FIN) != 0) > t->mss)
            mark_lost(t, r);
    }
    if (can_send_data(t))
        tcp_output_inner(t);
    return 0;
}

int zbuf_ip__tcp_icmp_error(zbuf_ip_stack_t *s, const struct zbuf_ip__icmp_err *e)
{
    zbuf_ip_tcp_t *t = lookup(s, e->dst, e->dport, e->src, e->sport);
    if (t == NULL || t->state == ZBUF_IP_TCP_LISTEN || t->state == ZBUF_IP_TCP_CLOSED)
        return -ENOENT;
    /* RFC 5927 4.1: only about a segment in flight.  A blind attacker
     * would have to guess the sequence numbers as for a RST. */
    if (SEQ_LT(e->seq, t->snd_una) || SEQ_GEQ(e->seq, t->snd_max))
        return -ENOENT;
    if (e->type == 3 && e->code == 4)
        return pmtu_reduce(t, e);
    if (e->type != 3 && e->type != 11)
        return 0; /* source quench (RFC 6633), parameter problem: nothing to do */
    int err = e->type == 11 ? -EHOSTUNREACH
              : e->code == 0 ? -ENETUNREACH
              : e->code == 2 ? -ENOPROTOOPT
              : e->code == 3 ? -ECONNREFUSED
                             : -EHOSTUNREACH;
    if (e->type == 3 && t->state == ZBUF_IP_TCP_SYN_RCVD && t->listener) {
        /* A half-open connection to a host that cannot be reached: drop it
         * now (as Linux drops the request) instead of after its SYN-ACK
         * retries. */
        s->st.tcp_half_open_drops++;
        s->st.tcp_icmp_aborts++;
        t->app_closed = true;
        pcb_kill(t);
        return 0;
    }
    if (e->type == 3 && t->state == ZBUF_IP_TCP_SYN_SENT && (e->code == 2 || e->code == 3)) {
        /* A hard error while connecting (RFC 1122 4.2.3.9, RFC 5461). */
        s->st.tcp_icmp_aborts++;
        pcb_fail(t, err);
        return 0;
    }
    t->soft_err = err; /* reported if the connection times out */
    return 0;
}

/* ---------------------------------------------------------------- timers */

static void on_rto(zbuf_ip_tcp_t *t)
{
    zbuf_ip_stack_t *s = t->stack;
    t->t_rtx = 0;
    if (t->state == ZBUF_IP_TCP_SYN_SENT || t->state == ZBUF_IP_TCP_SYN_RCVD) {
        /* A listener whose backlog is half full, or that had to answer
         * with SYN cookies lately, is under pressure: its half-open
         * connections get fewer retransmissions. */
        zbuf_ip_tcp_t *l = t->listener;
        bool pressure = l && (2 * l->pending >= l->backlog ||
                              (l->cookies_sent && s->now - l->cookies_at < ZBUF_IP_TCP_COOKIE_AGE_MS));
        if (++t->nrexmit >
            (pressure ? ZBUF_IP_TCP_SYNACK_RETRIES_PRESSURE : ZBUF_IP_TCP_SYN_RETRIES)) {
            if (t->listener) {
                if (pressure)
                    s->st.tcp_half_open_drops++;
                t->app_closed = true;
                pcb_kill(t);
            } else {
                pcb_fail(t, t->soft_err ? t->soft_err : -ETIMEDOUT);
            }
            return;
        }
        s->st.tcp_rto++;
        s->st.tcp_retransmits++;
        t->retransmits++;
        rto_backoff(t);
        send_syn(t);
        t->t_rtx = s->now + t->rto;
        return;
    }
    if (t->snd_una == t->snd_max)
        return;
    if (++t->nrexmit > ZBUF_IP_TCP_MAX_RETRIES) {
        tcp_emit(t, t->snd_max, TCP_RST | TCP_ACK, 0, 0);
        pcb_fail(t, t->soft_err ? t->soft_err : -ETIMEDOUT);
        return;
    }
    s->st.tcp_rto++;
    if (t->nrexmit == 1 && !t->in_recovery) {
        /* A new timeout episode, maybe spurious (rto_check()): remember
         * what to restore. */
        undo_begin(t, ZBUF_IP_TCP_SPURIOUS_RTO, ZBUF_IP_TCP_SPURIOUS_RTO);
        t->rto_prior_recover = t->recover;
        t->rto_prior = t->rto;
        t->rto_high = t->snd_max;
        t->rto_tsval = ts_val(t, s->now);
        t->rto_eifel = ZBUF_IP_TCP_SPURIOUS_RTO && t->ts_ok;
        t->frto = ZBUF_IP_TCP_SPURIOUS_RTO && !t->ts_ok ? 1 : 0;
    } else if (!t->undo_rto) {
        t->undo_ok = false; /* a timeout in fast recovery is not undone */
        t->rto_eifel = false;
    }
    t->frto = t->nrexmit == 1 ? t->frto : 0; /* F-RTO judges the first timeout only */
    uint32_t flight = t->snd_max - t->snd_una;
    t->ssthresh = loss_ssthresh(t, flight);
    t->cwnd = t->mss;
    t->recover = t->snd_max;
    t->in_recovery = false;
    t->dupacks = 0;
    t->tlp_valid = false;
    t->t_tlp = t->t_rack = 0;
    /* Every segment not SACKed is lost (RFC 6675 5.1, RFC 8985 6.3): they go
     * again oldest first as the window opens, what the peer SACKed does
     * not.  When timeouts repeat, the peer may have dropped ("reneged")
     * out-of-order data: then everything goes again. */
    for (uint32_t i = 0; i < t->rq_n; i++) {
        struct txseg *r = rq_at(t, i);
        if ((r->flags & TX_SACKED) && t->nrexmit >= 2) {
            rq_uncount(t, r, seg_len(r));
            r->flags &= (uint8_t)~TX_SACKED;
        }
        if (lost_markable(r)) {
            rq_uncount(t, r, seg_len(r));
            r->flags = (uint8_t)((r->flags & ~TX_RETRANS) | TX_LOST);
            t->lost_out += seg_len(r);
        }
    }
    t->timing = false;
    rto_backoff(t);
    tcp_output_inner(t);
    if (t->t_rtx == 0 && !t->dead)
        t->t_rtx = s->now + t->rto;
}

/* Loss probe (RFC 8985 7.3): one new segment if the windows allow, else the
 * last segment again, to draw an ACK with SACK blocks from the peer. */
static void on_tlp(zbuf_ip_tcp_t *t)
{
    zbuf_ip_stack_t *s = t->stack;
    t->t_tlp = 0;
    if (t->snd_una == t->snd_max || !can_send_data(t))
        return;
    size_t qlen = zbuf_length(t->sndq);
    uint32_t flight = t->snd_max - t->snd_una;
    size_t avail = flight <= qlen ? qlen - flight : 0;
    size_t len = avail < t->mss ? avail : t->mss;
    bool sent = false;
    t->tlp_retrans = false;
    if ((len > 0 || (t->fin_queued && flight == qlen)) && t->snd_wnd >= flight + len)
        sent = send_new(t, len) > 0;
    for (uint32_t i = t->rq_n; !sent && i-- > 0;) {
        struct txseg *r = rq_at(t, i);
        if (r->flags & TX_SACKED)
            continue;
        sent = resend(t, r);
        t->tlp_retrans = sent;
        break;
    }
    if (!sent)
        return;
    s->st.tcp_tlp++;
    t->tlp_valid = true;
    t->tlp_in_recovery = t->lost_out > 0 || !may_recover(t);
    t->tlp_end = t->snd_max;
    t->tlp_tsval = ts_val(t, s->now);
    t->t_rtx = s->now + t->rto;
}

void zbuf_ip__tcp_set_orphan(zbuf_ip_tcp_t *t)
{
    t->orphan = true;
}

static void on_persist(zbuf_ip_tcp_t *t)
{
    zbuf_ip_stack_t *s = t->stack;
    t->t_persist = 0;
    if ((t->app_closed || t->orphan) && t->persist_shift >= ZBUF_IP_TCP_ORPHAN_PROBES) {
        /* Nobody waits for these bytes and the peer will not take them. */
        tcp_emit(t, t->snd_una, TCP_RST | TCP_ACK, 0, 0); /* the peer took all below */
        pcb_fail(t, -ETIMEDOUT);
        return;
    }
    if (t->persist_shift < 16)
        t->persist_shift++;
    uint32_t flight = t->snd_max - t->snd_una;
    uint32_t win = umin32(t->snd_wnd, t->cwnd);
    if (win > flight && send_new(t, umin32(win - flight, t->mss)) > 0)
        return; /* some window, held back by silly-window avoidance: use it now */
    /* Zero window probe: an old sequence number makes the peer answer with
     * its current window. */
    tcp_emit(t, t->snd_una - 1, TCP_ACK, 0, 0);
    s->st.tcp_window_probes++;
    uint32_t base = t->rto << (t->persist_shift < 10 ? t->persist_shift : 10);
    t->t_persist = s->now + (base > ZBUF_IP_TCP_RTO_MAX_MS ? ZBUF_IP_TCP_RTO_MAX_MS : base);
}

int zbuf_ip__tcp_timers(zbuf_ip_stack_t *s)
{
    int n = 0;
    uint64_t now = s->now;
    for (zbuf_ip_tcp_t *t = s->tcps; t; t = t->next) {
        if (t->dead)
            continue;
        if (t->t_2msl && now >= t->t_2msl) {
            n++;
            t->t_2msl = 0;
            pcb_finish(t);
            if (t->app_closed)
                continue;
        }
        if (t->t_rtx && now >= t->t_rtx) {
            n++;
            on_rto(t);
        }
        if (t->dead)
            continue;
        if (t->t_rack && now >= t->t_rack) {
            n++;
            if (rack_detect(t) && may_recover(t))
                enter_recovery(t);
            tcp_output_inner(t);
        }
        if (t->t_tlp && now >= t->t_tlp) {
            n++;
            on_tlp(t);
        }
        if (t->dead)
            continue;
        if (t->t_persist && now >= t->t_persist) {
            n++;
            on_persist(t);
        }
        if (t->t_keep && now >= t->t_keep) {
            n++;
            if (t->keep_sent >= t->keep_count) {
                tcp_emit(t, t->snd_max, TCP_RST | TCP_ACK, 0, 0);
                pcb_fail(t, -ETIMEDOUT);
                continue;
            }
            /* A segment one below snd_una: the peer must answer with an ACK. */
            t->keep_sent++;
            t->stack->st.tcp_keepalive_probes++;
            tcp_emit(t, t->snd_una - 1, TCP_ACK, 0, 0);
            t->t_keep = now + t->keep_intvl;
        }
        if (t->t_delack && now >= t->t_delack) {
            n++;
            t->t_delack = 0;
            t->ack_now = true;
            tcp_output_inner(t);
        } else if (t->output_pending) {
            n++;
            tcp_output_inner(t);
        }
    }
    return n;
}

uint64_t zbuf_ip__tcp_deadline(const zbuf_ip_stack_t *s)
{
    uint64_t d = ZBUF_IP_NEVER;
    for (const zbuf_ip_tcp_t *t = s->tcps; t; t = t->next) {
        if (t->dead)
            continue;
        if (t->output_pending)
            return s->now;
        const uint64_t ts[7] = {t->t_rtx,  t->t_persist, t->t_delack, t->t_2msl,
                                t->t_keep, t->t_rack,    t->t_tlp};
        for (int i = 0; i < 7; i++)
            if (ts[i] && ts[i] < d)
                d = ts[i];
    }
    return d;
}
