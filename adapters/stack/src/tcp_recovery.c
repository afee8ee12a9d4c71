/* SPDX-License-Identifier: MIT */
/*
 * TCP loss recovery: the sender's scoreboard and what it tells.
 *
 * Every segment sent and not yet cumulatively acknowledged has a record
 * (`struct txseg`, a ring in sequence order) with the time of its latest
 * transmission and flags: SACKed, lost, retransmission in flight.  From the
 * records: pipe (RFC 6675: bytes in the network) = outstanding - SACKed -
 * lost + retransmitted; a segment may leave while pipe < cwnd, lost ones
 * first (oldest first), then new data (tcp_out.c).  Losses are found by
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
 *    RTO; also in recovery and after a timeout (see
 *    zbuf_ip__tcp_tlp_schedule());
 *  - the RTO, which marks everything not SACKed lost (no go-back-N of
 *    SACKed data), cwnd one segment.
 * In recovery cwnd follows PRR (RFC 6937, slow-start reduction bound);
 * outside it the congestion control algorithm grows it (tcp_cc_*.c).
 *
 * Undo.  An episode may prove spurious: a recovery whose retransmissions
 * the peer all reports receiving twice (D-SACK, RFC 2883 / 3708), or a
 * timeout that was a delay spike (Eifel with timestamps, F-RTO without, or
 * D-SACKs of all its retransmissions; rto_check()).  It is undone: cwnd
 * and ssthresh restored, and for a timeout the "lost" marks taken off what
 * did not go again yet.  D-SACKs also widen RACK's reordering window.
 */
#include <stdlib.h>

#include "tcp_internal.h"

/* ---------------------------------------------------------- scoreboard */

/* Double the ring (16 entries at first); false when memory or
 * ZBUF_IP_TCP_TX_SEGS_MAX says no. */
static bool rq_grow(zbuf_ip_tcp_t *t)
{
    if (t->rq.cap >= ZBUF_IP_TCP_TX_SEGS_MAX)
        return false;
    uint32_t cap = t->rq.cap ? t->rq.cap * 2 : 16;
    struct txseg *n = malloc(sizeof *n * cap);
    if (n == NULL)
        return false;
    for (uint32_t i = 0; i < t->rq.n; i++)
        n[i] = *rq_at(t, i);
    free(t->rq.rec);
    t->rq.rec = n;
    t->rq.cap = cap;
    t->rq.head = 0;
    return true;
}

bool zbuf_ip__tcp_rq_room(zbuf_ip_tcp_t *t)
{
    return zbuf_ip__tcp_rq_reserve(t, 1) == 1;
}

uint32_t zbuf_ip__tcp_rq_reserve(zbuf_ip_tcp_t *t, uint32_t k)
{
    while (t->rq.cap - t->rq.n < k && rq_grow(t))
        ;
    uint32_t room = t->rq.cap - t->rq.n;
    return room < k ? room : k;
}

/* Take the flags' bytes out of the counters (the record goes or shrinks by
 * `n` bytes). */
static void rq_uncount(zbuf_ip_tcp_t *t, const struct txseg *r, uint32_t n)
{
    if (r->flags & TX_SACKED)
        t->rq.sacked_out -= n;
    if (r->flags & TX_LOST)
        t->rq.lost_out -= n;
    if (r->flags & TX_RETRANS)
        t->rq.retrans_out -= n;
}

/* May `r` be (re)marked lost: not SACKed, and not lost while not yet sent
 * again? */
static bool lost_markable(const struct txseg *r)
{
    return !(r->flags & TX_SACKED) && (r->flags & (TX_LOST | TX_RETRANS)) != TX_LOST;
}

bool zbuf_ip__tcp_mark_lost(zbuf_ip_tcp_t *t, struct txseg *r)
{
    if (!lost_markable(r))
        return false;
    uint32_t n = seg_len(r);
    if (r->flags & TX_RETRANS) {
        r->flags &= (uint8_t)~TX_RETRANS;
        t->rq.retrans_out -= n;
        t->stack->st.tcp_lost_retransmits++;
    }
    if (!(r->flags & TX_LOST)) {
        r->flags |= TX_LOST;
        t->rq.lost_out += n;
    }
    return true;
}

/* The first segment is deemed lost (duplicate ACKs, NewReno partial ACK). */
static bool mark_head_lost(zbuf_ip_tcp_t *t)
{
    return t->rq.n > 0 && zbuf_ip__tcp_mark_lost(t, rq_at(t, 0));
}

/* Bytes SACKed below `hi`. */
static uint32_t sacked_below(const zbuf_ip_tcp_t *t, uint32_t hi)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < t->rq.n && SEQ_LT(rq_at(t, i)->seq, hi); i++)
        if (rq_at(t, i)->flags & TX_SACKED)
            n += seg_len(rq_at(t, i));
    return n;
}

/* ---------------------------------------------------------------- RACK */

/* Was (x1, e1) sent after (x2, e2)?  Same millisecond: the higher sequence
 * number went later (RFC 8985 6.2). */
static bool sent_after(uint64_t x1, uint32_t e1, uint64_t x2, uint32_t e2)
{
    return x1 > x2 || (x1 == x2 && SEQ_GT(e1, e2));
}

/* The peer delivered record `r` (cumulative ACK or SACK): advance the RACK
 * state (RFC 8985 6.2 step 2) to it if it is the latest sent so far. */
static void rack_update(zbuf_ip_tcp_t *t, const struct txseg *r, const struct tcp_seg *sg,
                        bool sacked)
{
    zbuf_ip_stack_t *s = t->stack;
    uint32_t rtt = (uint32_t)(s->now - r->xmit);
    if (r->flags & TX_EVER_RETRANS) {
        /* Was it the retransmission that arrived?  The echoed timestamp
         * says; without one, an RTT below the minimum means the original. */
        if (t->ts.ok && sg->has_ts ? SEQ_LT(sg->tsecr, ts_val(t, r->xmit)) : rtt < t->rtt.min)
            return;
    } else if (sacked && SEQ_LT(r->end, t->rack.fack)) {
        t->rack.reordering_seen = true; /* an original overtaken by a later one */
    }
    if (!(r->flags & TX_EVER_RETRANS))
        zbuf_ip__tcp_min_rtt_update(t, rtt);
    if (!t->rack.valid || sent_after(r->xmit, r->end, t->rack.xmit, t->rack.end)) {
        t->rack.valid = true;
        t->rack.xmit = r->xmit;
        t->rack.end = r->end;
        t->rack.rtt = rtt;
    }
    if (SEQ_GT(r->end, t->rack.fack))
        t->rack.fack = r->end;
}

/* RACK reordering window (RFC 8985 6.2 step 4): min_rtt/4 times the
 * multiplier D-SACKs grow, at most SRTT. */
static uint32_t rack_reo_wnd(const zbuf_ip_tcp_t *t)
{
    if (!t->rack.reordering_seen && (t->in_recovery || t->rq.sacked_out >= 3u * t->mss))
        return 0;
    uint32_t w = t->rtt.min == UINT32_MAX ? 0 : t->rtt.min / 4 * t->rack.reo_wnd_mult;
    uint32_t srtt = t->rtt.srtt8 >> 3;
    return w < srtt ? w : srtt;
}

/* RACK loss detection (RFC 8985 6.2 step 5): every segment, retransmissions
 * included, sent before the latest delivered one and older than it by
 * rack.rtt + reo_wnd is lost; the youngest of the others sets the RACK
 * timer.  Returns whether it marked any. */
static bool rack_detect(zbuf_ip_tcp_t *t)
{
    zbuf_ip_stack_t *s = t->stack;
    tcp_timer_stop(t, TCP_T_RACK);
    if (!t->rack.valid || (t->rq.sacked_out == 0 && t->rq.retrans_out == 0))
        return false; /* nothing was delivered beyond a segment still out */
    uint64_t reo = rack_reo_wnd(t), wait = 0;
    bool lost = false;
    for (uint32_t i = 0; i < t->rq.n; i++) {
        struct txseg *r = rq_at(t, i);
        if (!lost_markable(r))
            continue;
        if (!sent_after(t->rack.xmit, t->rack.end, r->xmit, r->end))
            continue;
        uint64_t due = r->xmit + t->rack.rtt + reo;
        if (due <= s->now) {
            zbuf_ip__tcp_mark_lost(t, r);
            s->st.tcp_rack_losses++;
            lost = true;
        } else if (due - s->now > wait) {
            wait = due - s->now;
        }
    }
    if (wait)
        tcp_timer_set(t, TCP_T_RACK, s->now + wait);
    return lost;
}

/* ------------------------------------------------------- what an ACK says */

void zbuf_ip__tcp_rq_ack(zbuf_ip_tcp_t *t, uint32_t ack, const struct tcp_seg *sg)
{
    while (t->rq.n > 0) {
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
        t->rq.head = (t->rq.head + 1) & (t->rq.cap - 1);
        t->rq.n--;
    }
}

static void try_undo(zbuf_ip_tcp_t *t);

/* The peer reports bytes [lo, hi) received twice (RFC 2883).  RFC 8985 6.2
 * step 4: the reordering window grows (once per round trip) and keeps its
 * size for the next 16 recoveries; a duplicate retransmission of the
 * current episode counts towards its undo. */
static void dsack_rx(zbuf_ip_tcp_t *t, uint32_t lo, uint32_t hi)
{
    t->stack->st.tcp_dsack_rx++;
    t->rack.reordering_seen = true;
    if (!t->rack.dsack_round_set || SEQ_GEQ(t->snd_una, t->rack.dsack_round)) {
        t->rack.dsack_round_set = true;
        t->rack.dsack_round = t->snd_max;
        if (t->rack.reo_wnd_mult < 255)
            t->rack.reo_wnd_mult++;
        t->rack.reo_wnd_persist = 16;
    }
    if (t->undo.ok && SEQ_GEQ(lo, t->undo.lo) && SEQ_LEQ(hi, t->undo.hi)) {
        uint32_t n = (hi - lo + t->mss - 1) / t->mss;
        t->undo.retrans = n >= t->undo.retrans ? 0 : t->undo.retrans - n;
        try_undo(t);
    }
}

/* A D-SACK block (RFC 2883: the first block, below the cumulative ACK or
 * inside the second block) of data we sent, within a window of the ACK,
 * goes to dsack_rx(). */
static void sack_dsack(zbuf_ip_tcp_t *t, const struct tcp_seg *sg)
{
    uint32_t lo = sg->sack[0][0], hi = sg->sack[0][1];
    bool dup = SEQ_LT(lo, sg->ack) ||
               (sg->nsack > 1 && SEQ_GEQ(lo, sg->sack[1][0]) && SEQ_LEQ(hi, sg->sack[1][1]));
    if (dup && SEQ_LT(lo, hi) && SEQ_LEQ(hi, t->snd_max) &&
        SEQ_GEQ(lo, t->snd_una - t->max_snd_wnd) && SEQ_GT(lo, t->iss))
        dsack_rx(t, lo, hi);
}

/* Mark the records SACK block [lo, hi) covers.  Returns the bytes newly
 * SACKed. */
static uint32_t sack_block(zbuf_ip_tcp_t *t, const struct tcp_seg *sg, uint32_t lo, uint32_t hi)
{
    /* Binary search for the first record ending after lo. */
    uint32_t a = 0, z = t->rq.n;
    while (a < z) {
        uint32_t m = a + (z - a) / 2;
        if (SEQ_LEQ(rq_at(t, m)->end, lo))
            a = m + 1;
        else
            z = m;
    }
    uint32_t news = 0;
    for (uint32_t i = a; i < t->rq.n; i++) {
        struct txseg *r = rq_at(t, i);
        if (SEQ_GT(r->end, hi))
            break;
        if (SEQ_LT(r->seq, lo) || (r->flags & TX_SACKED))
            continue;
        rq_uncount(t, r, seg_len(r));
        r->flags = (uint8_t)((r->flags & (TX_EVER_RETRANS | TX_FIN)) | TX_SACKED);
        t->rq.sacked_out += seg_len(r);
        news += seg_len(r);
        rack_update(t, r, sg, true);
    }
    return news;
}

/* Mark the records this ACK's SACK blocks cover.  Blocks of data not sent,
 * below snd_una or inverted are ignored; a D-SACK block goes to
 * dsack_rx().  Returns the bytes newly SACKed. */
static uint32_t rq_sack(zbuf_ip_tcp_t *t, const struct tcp_seg *sg)
{
    if (sg->nsack > 0)
        sack_dsack(t, sg);
    /* In sequence order: the peer lists its latest block first, and taking
     * it first would make the older blocks look reordered to the RACK. */
    uint32_t blk[TCP_SACK_BLOCKS_MAX][2];
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
        news += sack_block(t, sg, lo, hi);
    }
    return news;
}

/* ---------------------------------------------------------------- undo */

/* Start an episode that may be undone: remember what to restore and the
 * range [snd_una, snd_max) it covers. */
static void undo_begin(zbuf_ip_tcp_t *t, bool ok, bool rto)
{
    t->undo.ok = ok;
    t->undo.rto = rto;
    t->undo.lo = t->snd_una;
    t->undo.hi = t->snd_max;
    t->undo.retrans = t->undo.sent = 0;
    t->undo.prior_cwnd = t->cc.cwnd;
    t->undo.prior_ssthresh = t->cc.ssthresh;
}

/* Restore cwnd and ssthresh to their values before the episode. */
static void undo_cwnd(zbuf_ip_tcp_t *t)
{
    t->undo.ok = false;
    if (t->undo.prior_ssthresh > t->cc.ssthresh)
        t->cc.ssthresh = t->undo.prior_ssthresh;
    if (t->undo.prior_cwnd > t->cc.cwnd)
        t->cc.cwnd = t->undo.prior_cwnd;
    t->cc.after_rto = false;
}

/* A timeout was spurious: the originals were only delayed.  The response
 * is Linux's undo rather than RFC 4015's more careful one: cwnd and
 * ssthresh as before the timeout, the segments it marked lost and that
 * did not go again yet are in flight after all (no go-back-N), and the
 * RTO loses its backoff. */
static void rto_undo(zbuf_ip_tcp_t *t)
{
    undo_cwnd(t);
    for (uint32_t i = 0; i < t->rq.n; i++) {
        struct txseg *r = rq_at(t, i);
        if (r->flags & TX_LOST) {
            r->flags &= (uint8_t)~TX_LOST;
            t->rq.lost_out -= seg_len(r);
        }
    }
    t->recover = t->undo.prior_recover;
    t->undo.rto = t->undo.eifel = false;
    t->undo.frto = 0;
    if (t->rtt.rto > t->undo.prior_rto && (!t->ts.ok || !t->rtt.have))
        t->rtt.rto = t->undo.prior_rto; /* no sample could end the backoff (Karn) */
    else if (t->rtt.have)
        zbuf_ip__tcp_rto_update(t);
    t->stack->st.tcp_spurious_rto++;
}

/* A recovery (or timeout) whose every retransmission the peer reported
 * receiving twice (D-SACK) was spurious: the originals had arrived.  Once
 * it is over, restore cwnd and ssthresh to their values before it (as
 * Linux's undo, after RFC 3708's detection). */
static void try_undo(zbuf_ip_tcp_t *t)
{
    if (!t->undo.ok || t->in_recovery || t->undo.sent == 0 || t->undo.retrans > 0)
        return;
    t->stack->st.tcp_spurious_undo++;
    if (t->undo.rto) {
        t->stack->st.tcp_spurious_rto_dsack++;
        rto_undo(t);
    } else {
        undo_cwnd(t);
    }
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
static void rto_check(zbuf_ip_tcp_t *t, const struct tcp_seg *sg, uint32_t acked)
{
    if (t->undo.eifel) {
        if (acked == 0)
            return; /* only an ACK of the retransmitted segment tells */
        t->undo.eifel = false;
        if (sg->has_ts && SEQ_LT(sg->tsecr, t->undo.rto_tsval))
            rto_undo(t);
        return;
    }
    uint32_t flight = t->snd_max - t->snd_una;
    if (t->undo.frto == 1) {
        size_t qlen = zbuf_length(t->sndq);
        t->undo.frto = 0;
        if (acked && SEQ_LT(t->snd_una, t->undo.rto_high) && qlen > flight && t->snd_wnd > flight) {
            t->undo.frto = 2;
            t->undo.frto_sacked = sacked_below(t, t->undo.rto_high);
        }
        return;
    }
    t->undo.frto = 0;
    if (acked || sacked_below(t, t->undo.rto_high) > t->undo.frto_sacked) {
        t->stack->st.tcp_spurious_rto_frto++;
        rto_undo(t);
    }
}

/* ------------------------------------------------------ fast recovery */

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
    t->prr.delivered += delivered;
    uint32_t pipe = tcp_pipe(t);
    int64_t sndcnt;
    if (pipe > t->cc.ssthresh) {
        uint64_t fs = t->prr.recover_fs ? t->prr.recover_fs : 1;
        sndcnt = (int64_t)(((uint64_t)t->prr.delivered * t->cc.ssthresh + fs - 1) / fs) -
                 t->prr.out;
    } else {
        int64_t limit = (int64_t)t->prr.delivered - t->prr.out;
        if (limit < (int64_t)delivered)
            limit = delivered;
        limit += t->mss;
        sndcnt = (int64_t)(t->cc.ssthresh - pipe);
        if (sndcnt > limit)
            sndcnt = limit;
    }
    if (sndcnt < 0)
        sndcnt = 0;
    /* Whole segments, as Linux counts them: a fraction of one still lets a
     * full segment go (rounding up), else it would wait for silly-window
     * avoidance. */
    sndcnt = (sndcnt + t->mss - 1) / t->mss * t->mss;
    t->cc.cwnd = pipe + (uint32_t)sndcnt;
}

/* Let at least one segment go beyond the pipe. */
static void cwnd_floor(zbuf_ip_tcp_t *t)
{
    uint32_t need = tcp_pipe(t) + t->mss;
    if (t->cc.cwnd < need)
        t->cc.cwnd = need;
}

/* A loss was found: start fast recovery (RFC 6675 / 6937).  The first lost
 * segment goes at once, whatever PRR says (the fast retransmit). */
static void enter_recovery(zbuf_ip_tcp_t *t)
{
    zbuf_ip_stack_t *s = t->stack;
    uint32_t flight = t->snd_max - t->snd_una;
    undo_begin(t, true, false);
    t->cc.ssthresh = t->cc.ops->ssthresh(t);
    t->recover = t->snd_max;
    t->in_recovery = true;
    t->prr.recover_fs = flight;
    t->prr.delivered = 0;
    t->prr.out = 0;
    tcp_timer_stop(t, TCP_T_TLP);
    s->st.tcp_fast_retransmits++;
    prr_update(t, 0);
    cwnd_floor(t);
}

/* Full acknowledgment: leave fast recovery (RFC 6582 3.2 step 3), cwnd at
 * ssthresh or what flies, whichever is less. */
static void leave_recovery(zbuf_ip_tcp_t *t)
{
    uint32_t fl = t->snd_max - t->snd_una;
    t->cc.cwnd = umin32(t->cc.ssthresh, (fl > t->mss ? fl : t->mss) + t->mss);
    t->in_recovery = false;
    t->dupacks = 0;
    if (t->rack.reo_wnd_persist && --t->rack.reo_wnd_persist == 0)
        t->rack.reo_wnd_mult = 1;
    try_undo(t);
}

/* ------------------------------------------------------------------ TLP */

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
void zbuf_ip__tcp_tlp_schedule(zbuf_ip_tcp_t *t)
{
    zbuf_ip_stack_t *s = t->stack;
    tcp_timer_stop(t, TCP_T_TLP);
    if (!t->sack_ok || t->tlp.valid || t->snd_una == t->snd_max || !tcp_can_send_data(t))
        return;
    uint64_t pto = ZBUF_IP_TCP_RTO_INIT_MS;
    if (t->rtt.have) {
        pto = 2u * (t->rtt.srtt8 >> 3) + 2; /* + 2 ms of clock granularity */
        if ((uint32_t)(t->snd_max - t->snd_una) <= t->mss)
            pto += ZBUF_IP_TCP_TLP_DELACK_MS;
    }
    uint64_t at = s->now + pto;
    if (tcp_timer_armed(t, TCP_T_RTX) && at >= t->timer[TCP_T_RTX])
        return; /* the RTO comes first */
    tcp_timer_set(t, TCP_T_TLP, at);
}

/* After the probe's ACK: a probe that was a retransmission and whose ACK
 * echoes the probe's own timestamp (or any, without timestamps: RFC 8985
 * 7.4.2 without D-SACK) repaired a loss; congestion control reacts as to a
 * recovery episode. */
static void tlp_acked(zbuf_ip_tcp_t *t, const struct tcp_seg *sg)
{
    t->tlp.valid = false;
    if (!t->tlp.retrans || t->tlp.in_recovery || t->in_recovery)
        return; /* a recovery or timeout already reduced cwnd for this episode */
    if (t->ts.ok && sg->has_ts && SEQ_LT(sg->tsecr, t->tlp.tsval))
        return; /* the original's ACK: nothing was lost */
    t->cc.ssthresh = t->cc.ops->ssthresh(t);
    if (t->cc.cwnd > t->cc.ssthresh)
        t->cc.cwnd = t->cc.ssthresh;
}

/* The probe (RFC 8985 7.3): one new segment if the windows allow, else the
 * last segment again, to draw an ACK with SACK blocks from the peer. */
void zbuf_ip__tcp_tlp_fire(zbuf_ip_tcp_t *t)
{
    zbuf_ip_stack_t *s = t->stack;
    tcp_timer_stop(t, TCP_T_TLP);
    if (t->snd_una == t->snd_max || !tcp_can_send_data(t))
        return;
    size_t qlen = zbuf_length(t->sndq);
    uint32_t flight = t->snd_max - t->snd_una;
    size_t avail = flight <= qlen ? qlen - flight : 0;
    size_t len = avail < t->mss ? avail : t->mss;
    bool sent = false;
    t->tlp.retrans = false;
    if ((len > 0 || (t->fin_queued && flight == qlen)) && t->snd_wnd >= flight + len)
        sent = zbuf_ip__tcp_send_new(t, len) > 0;
    for (uint32_t i = t->rq.n; !sent && i-- > 0;) {
        struct txseg *r = rq_at(t, i);
        if (r->flags & TX_SACKED)
            continue;
        sent = zbuf_ip__tcp_resend(t, r);
        t->tlp.retrans = sent;
        break;
    }
    if (!sent)
        return;
    s->st.tcp_tlp++;
    t->tlp.valid = true;
    t->tlp.in_recovery = t->rq.lost_out > 0 || !may_recover(t);
    t->tlp.end = t->snd_max;
    t->tlp.tsval = ts_val(t, s->now);
    tcp_rtx_restart(t);
}

/* ------------------------------------------------------- entry points */

/* Loss detection on an ACK: RACK, duplicate ACKs, a NewReno partial ACK.
 * Starts fast recovery when a loss begins a new episode.  Returns whether
 * a loss was found, and in *partial whether one segment must go beyond
 * PRR now (a partial ACK, or the fast retransmit). */
static bool detect_losses(zbuf_ip_tcp_t *t, const struct tcp_seg *sg, uint32_t acked,
                          bool *partial)
{
    bool lost = rack_detect(t);
    uint32_t fl = t->snd_max - t->snd_una;
    if (!t->in_recovery && (t->dupacks >= dupthresh(t, fl) || t->rq.sacked_out >= 3u * t->mss))
        lost |= mark_head_lost(t);
    *partial = t->in_recovery && acked && SEQ_LT(sg->ack, t->recover) && !t->sack_ok;
    if (*partial)
        lost |= mark_head_lost(t); /* NewReno partial ACK: the next one is lost too */
    if (lost && may_recover(t)) {
        enter_recovery(t);
        *partial = true; /* the fast retransmit goes now */
    }
    return lost;
}

bool zbuf_ip__tcp_recover(zbuf_ip_tcp_t *t, const struct tcp_seg *sg, uint32_t acked,
                          uint32_t flight, uint32_t prior_sacked, bool wnd_changed)
{
    uint32_t news = t->sack_ok ? rq_sack(t, sg) : 0;
    if (t->undo.eifel || t->undo.frto)
        rto_check(t, sg, acked);
    /* Duplicate ACK: with SACK one that reports new data (RFC 6675), which
     * counts even when it rides on data flowing the other way; without, an
     * ACK with nothing else in it (RFC 5681). */
    bool dup = !acked && flight > 0 && sg->ack == t->snd_una &&
               (t->sack_ok ? news > 0
                           : sg->len == 0 && !(sg->flags & (TCP_SYN | TCP_FIN)) && !wnd_changed);
    uint32_t delivered = acked + (t->rq.sacked_out - prior_sacked);
    if (acked)
        t->dupacks = 0;
    else if (dup && t->dupacks < 255) {
        t->dupacks++;
        if (!t->sack_ok)
            delivered = t->mss;
    }

    bool partial;
    bool lost = detect_losses(t, sg, acked, &partial);
    if (t->in_recovery && acked && SEQ_GEQ(sg->ack, t->recover)) {
        leave_recovery(t);
    } else if (t->in_recovery) {
        prr_update(t, delivered);
        if (partial)
            cwnd_floor(t);
    } else if (acked) {
        t->cc.ops->on_ack(t, acked, lost || t->rq.lost_out != 0);
    }
    if (t->tlp.valid && SEQ_GEQ(t->snd_una, t->tlp.end))
        tlp_acked(t, sg);

    if (t->snd_una == t->snd_max) {
        tcp_timer_stop(t, TCP_T_RTX);
        tcp_timer_stop(t, TCP_T_RACK);
        tcp_timer_stop(t, TCP_T_TLP);
        t->tlp.valid = false;
    } else if (acked) {
        tcp_rtx_restart(t); /* RFC 6298 5.3 */
    }
    if (acked || dup)
        zbuf_ip__tcp_tlp_schedule(t);
    return dup;
}

void zbuf_ip__tcp_rack_fire(zbuf_ip_tcp_t *t)
{
    if (rack_detect(t) && may_recover(t))
        enter_recovery(t);
    zbuf_ip__tcp_output(t);
}

void zbuf_ip__tcp_rto_recovery(zbuf_ip_tcp_t *t)
{
    zbuf_ip_stack_t *s = t->stack;
    if (t->nrexmit == 1 && !t->in_recovery) {
        /* A new timeout episode, maybe spurious (rto_check()): remember
         * what to restore. */
        undo_begin(t, ZBUF_IP_TCP_SPURIOUS_RTO, ZBUF_IP_TCP_SPURIOUS_RTO);
        t->undo.prior_recover = t->recover;
        t->undo.prior_rto = t->rtt.rto;
        t->undo.rto_high = t->snd_max;
        t->undo.rto_tsval = ts_val(t, s->now);
        t->undo.eifel = ZBUF_IP_TCP_SPURIOUS_RTO && t->ts.ok;
        t->undo.frto = ZBUF_IP_TCP_SPURIOUS_RTO && !t->ts.ok ? 1 : 0;
    } else if (!t->undo.rto) {
        t->undo.ok = false; /* a timeout in fast recovery is not undone */
        t->undo.eifel = false;
    }
    t->undo.frto = t->nrexmit == 1 ? t->undo.frto : 0; /* F-RTO judges the first timeout only */
    t->cc.ssthresh = t->cc.ops->ssthresh(t);
    t->cc.cwnd = t->mss;
    t->cc.after_rto = true;
    t->recover = t->snd_max;
    t->in_recovery = false;
    t->dupacks = 0;
    t->tlp.valid = false;
    tcp_timer_stop(t, TCP_T_TLP);
    tcp_timer_stop(t, TCP_T_RACK);
    /* Every segment not SACKed is lost (RFC 6675 5.1, RFC 8985 6.3): they go
     * again oldest first as the window opens, what the peer SACKed does
     * not.  When timeouts repeat, the peer may have dropped ("reneged")
     * out-of-order data: then everything goes again. */
    for (uint32_t i = 0; i < t->rq.n; i++) {
        struct txseg *r = rq_at(t, i);
        if ((r->flags & TX_SACKED) && t->nrexmit >= 2) {
            rq_uncount(t, r, seg_len(r));
            r->flags &= (uint8_t)~TX_SACKED;
        }
        if (lost_markable(r)) {
            rq_uncount(t, r, seg_len(r));
            r->flags = (uint8_t)((r->flags & ~TX_RETRANS) | TX_LOST);
            t->rq.lost_out += seg_len(r);
        }
    }
}
