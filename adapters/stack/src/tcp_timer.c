/* SPDX-License-Identifier: MIT */
/*
 * TCP timers and the RTT estimator.
 *
 * Each PCB has the timers of enum tcp_timer, absolute clock values (0:
 * off).  zbuf_ip__tcp_timers() runs those that are due, at every
 * zbuf_ip_poll(); zbuf_ip__tcp_deadline() says when the next one is.  What
 * a timer does to the scoreboard (a timeout, a loss probe, RACK's
 * reordering timer) is tcp_recovery.c's; this file decides when, and
 * handles the timers of the connection itself: SYN retries, the limit on
 * retries, zero-window probes, keepalive, delayed ACKs and TIME_WAIT.
 *
 * RTT estimator (RFC 6298): SRTT and RTTVAR from one sample per flight (the
 * echoed timestamp with timestamps, RFC 7323 4.1, else one timed segment
 * never retransmitted, Karn), RTO = SRTT + 4 RTTVAR within
 * [tcp_rto_min_ms, #ZBUF_IP_TCP_RTO_MAX_MS], doubled on every timeout.
 * Beside it, the windowed minimum RTT of RFC 8985 that RACK uses.
 */
#include "tcp_internal.h"

/* ------------------------------------------------------- RTT estimator */

/* Windowed minimum of the RTT samples over #ZBUF_IP_TCP_MIN_RTT_WLEN_MS
 * (RFC 8985 min_rtt), with Kathleen Nichols' algorithm (as in Linux's
 * win_minmax): three samples, the minimum and the best of the later
 * quarters and halves of the window, so that when the minimum ages out a
 * recent one takes its place at once.  Constant memory and time. */
void zbuf_ip__tcp_min_rtt_update(zbuf_ip_tcp_t *t, uint32_t r)
{
    uint64_t now = t->stack->now, win = ZBUF_IP_TCP_MIN_RTT_WLEN_MS;
    struct rtt_at v = {r, now}, *m = t->rtt.min_s;
    if (t->rtt.min == UINT32_MAX || r <= m[0].rtt || now - m[2].at > win) {
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
    t->rtt.min = m[0].rtt;
}

/* RTO = SRTT + 4 RTTVAR, bounded (RFC 6298 2.3). */
void zbuf_ip__tcp_rto_update(zbuf_ip_tcp_t *t)
{
    uint32_t var = t->rtt.rttvar4 ? t->rtt.rttvar4 : 1;
    uint32_t rto = (t->rtt.srtt8 >> 3) + var;
    if (rto < t->stack->cfg.tcp_rto_min_ms)
        rto = t->stack->cfg.tcp_rto_min_ms;
    if (rto > ZBUF_IP_TCP_RTO_MAX_MS)
        rto = ZBUF_IP_TCP_RTO_MAX_MS;
    t->rtt.rto = rto;
}

void zbuf_ip__tcp_rtt_sample(zbuf_ip_tcp_t *t, uint32_t r)
{
    zbuf_ip__tcp_min_rtt_update(t, r);
    if (!t->rtt.have) {
        t->rtt.srtt8 = r << 3;
        t->rtt.rttvar4 = r << 1;
        t->rtt.have = true;
    } else {
        int32_t delta = (int32_t)r - (int32_t)(t->rtt.srtt8 >> 3);
        t->rtt.srtt8 = (uint32_t)((int32_t)t->rtt.srtt8 + delta);
        uint32_t ad = (uint32_t)(delta < 0 ? -delta : delta);
        t->rtt.rttvar4 = t->rtt.rttvar4 + ad - (t->rtt.rttvar4 >> 2);
    }
    zbuf_ip__tcp_rto_update(t);
}

static void rto_backoff(zbuf_ip_tcp_t *t)
{
    t->rtt.rto = t->rtt.rto * 2 > ZBUF_IP_TCP_RTO_MAX_MS ? ZBUF_IP_TCP_RTO_MAX_MS : t->rtt.rto * 2;
}

/* ------------------------------------------------------------- timers */

void zbuf_ip__tcp_keep_touch(zbuf_ip_tcp_t *t)
{
    if (t->keep.idle && synchronized(t) && t->state != ZBUF_IP_TCP_TIME_WAIT) {
        t->keep.sent = 0;
        tcp_timer_set(t, TCP_T_KEEP, t->stack->now + t->keep.idle);
    }
}

/* The RTO backed off once more per probe already sent, at most
 * #ZBUF_IP_TCP_RTO_MAX_MS. */
void zbuf_ip__tcp_persist_arm(zbuf_ip_tcp_t *t)
{
    uint32_t base = t->rtt.rto << (t->persist_shift < 10 ? t->persist_shift : 10);
    tcp_timer_set(t, TCP_T_PERSIST,
                  t->stack->now + (base > ZBUF_IP_TCP_RTO_MAX_MS ? ZBUF_IP_TCP_RTO_MAX_MS : base));
}

/* Our SYN or SYN-ACK went unanswered: again, or give up.  A listener whose
 * backlog is half full, or that had to answer with SYN cookies lately, is
 * under pressure: its half-open connections get fewer retransmissions. */
static void syn_timeout(zbuf_ip_tcp_t *t)
{
    zbuf_ip_stack_t *s = t->stack;
    zbuf_ip_tcp_t *l = t->listener;
    bool pressure = l && (2 * l->pending >= l->backlog ||
                          (l->cookies_sent && s->now - l->cookies_at < ZBUF_IP_TCP_COOKIE_AGE_MS));
    if (++t->nrexmit > (pressure ? ZBUF_IP_TCP_SYNACK_RETRIES_PRESSURE : ZBUF_IP_TCP_SYN_RETRIES)) {
        if (t->listener) {
            if (pressure)
                s->st.tcp_half_open_drops++;
            t->app_closed = true;
            zbuf_ip__tcp_kill(t);
        } else {
            zbuf_ip__tcp_fail(t, t->soft_err ? t->soft_err : -ETIMEDOUT);
        }
        return;
    }
    s->st.tcp_rto++;
    s->st.tcp_retransmits++;
    t->retransmits++;
    rto_backoff(t);
    zbuf_ip__tcp_send_syn(t);
    tcp_rtx_restart(t);
}

static void on_rto(zbuf_ip_tcp_t *t)
{
    tcp_timer_stop(t, TCP_T_RTX);
    if (t->state == ZBUF_IP_TCP_SYN_SENT || t->state == ZBUF_IP_TCP_SYN_RCVD) {
        syn_timeout(t);
        return;
    }
    if (t->snd_una == t->snd_max)
        return;
    if (++t->nrexmit > ZBUF_IP_TCP_MAX_RETRIES) {
        zbuf_ip__tcp_emit(t, t->snd_max, TCP_RST | TCP_ACK, 0, 0);
        zbuf_ip__tcp_fail(t, t->soft_err ? t->soft_err : -ETIMEDOUT);
        return;
    }
    t->stack->st.tcp_rto++;
    zbuf_ip__tcp_rto_recovery(t);
    t->rtt.timing = false;
    rto_backoff(t);
    zbuf_ip__tcp_output(t);
    if (!tcp_timer_armed(t, TCP_T_RTX) && !t->dead)
        tcp_rtx_restart(t);
}

static void on_persist(zbuf_ip_tcp_t *t)
{
    zbuf_ip_stack_t *s = t->stack;
    tcp_timer_stop(t, TCP_T_PERSIST);
    if ((t->app_closed || t->orphan) && t->persist_shift >= ZBUF_IP_TCP_ORPHAN_PROBES) {
        /* Nobody waits for these bytes and the peer will not take them. */
        zbuf_ip__tcp_emit(t, t->snd_una, TCP_RST | TCP_ACK, 0, 0); /* the peer took all below */
        zbuf_ip__tcp_fail(t, -ETIMEDOUT);
        return;
    }
    if (t->persist_shift < 16)
        t->persist_shift++;
    uint32_t flight = t->snd_max - t->snd_una;
    uint32_t win = umin32(t->snd_wnd, t->cc.cwnd);
    if (win > flight && zbuf_ip__tcp_send_new(t, umin32(win - flight, t->mss)) > 0)
        return; /* some window, held back by silly-window avoidance: use it now */
    /* Zero window probe: an old sequence number makes the peer answer with
     * its current window. */
    zbuf_ip__tcp_emit(t, t->snd_una - 1, TCP_ACK, 0, 0);
    s->st.tcp_window_probes++;
    zbuf_ip__tcp_persist_arm(t);
}

/* A keepalive probe, or the end after keep.count unanswered ones. */
static void on_keep(zbuf_ip_tcp_t *t, uint64_t now)
{
    if (t->keep.sent >= t->keep.count) {
        zbuf_ip__tcp_emit(t, t->snd_max, TCP_RST | TCP_ACK, 0, 0);
        zbuf_ip__tcp_fail(t, -ETIMEDOUT);
        return;
    }
    /* A segment one below snd_una: the peer must answer with an ACK. */
    t->keep.sent++;
    t->stack->st.tcp_keepalive_probes++;
    zbuf_ip__tcp_emit(t, t->snd_una - 1, TCP_ACK, 0, 0);
    tcp_timer_set(t, TCP_T_KEEP, now + t->keep.intvl);
}

/* The timers in the order they run when several are due at once: the end
 * of TIME_WAIT first (nothing else matters then), the delayed ACK last (a
 * segment sent by another one carried the ACK already). */
static const enum tcp_timer fire_order[TCP_NTIMERS] = {
    TCP_T_2MSL, TCP_T_RTX, TCP_T_RACK, TCP_T_TLP, TCP_T_PERSIST, TCP_T_KEEP, TCP_T_DELACK,
};

/* Timer `k` of `t` is due at `now`. */
static void fire(zbuf_ip_tcp_t *t, enum tcp_timer k, uint64_t now)
{
    switch (k) {
    case TCP_T_2MSL: /* TIME_WAIT (or an orphaned FIN_WAIT_2) is over */
        tcp_timer_stop(t, k);
        zbuf_ip__tcp_finish(t);
        break;
    case TCP_T_RTX:
        on_rto(t);
        break;
    case TCP_T_RACK:
        zbuf_ip__tcp_rack_fire(t);
        break;
    case TCP_T_TLP:
        zbuf_ip__tcp_tlp_fire(t);
        break;
    case TCP_T_PERSIST:
        on_persist(t);
        break;
    case TCP_T_KEEP:
        on_keep(t, now);
        break;
    case TCP_T_DELACK:
        tcp_timer_stop(t, k);
        t->ack_now = true;
        zbuf_ip__tcp_output(t);
        break;
    case TCP_NTIMERS:
        break;
    }
}

/* Run the timers of `t` that are due at `now`, then a burst that hit
 * #ZBUF_IP_TCP_BURST goes on; returns how many ran. */
static int pcb_timers(zbuf_ip_tcp_t *t, uint64_t now)
{
    int n = 0;
    bool acked = false;
    for (int i = 0; i < TCP_NTIMERS; i++) {
        enum tcp_timer k = fire_order[i];
        if (!tcp_timer_armed(t, k) || now < t->timer[k])
            continue;
        n++;
        fire(t, k, now);
        if (t->dead)
            return n;
        acked |= k == TCP_T_DELACK;
    }
    if (!acked && t->output_pending) {
        n++;
        zbuf_ip__tcp_output(t);
    }
    return n;
}

/* The earliest of t's armed timers, or now if a burst waits to go on. */
static uint64_t pcb_next(const zbuf_ip_tcp_t *t, uint64_t now)
{
    if (t->output_pending)
        return now;
    uint64_t d = ZBUF_IP_NEVER;
    for (int k = 0; k < TCP_NTIMERS; k++)
        if (t->timer[k] && t->timer[k] < d)
            d = t->timer[k];
    return d;
}

/* Every poll comes here: before s->tcp_next nothing is due, and the PCBs
 * are not walked.  A walk runs what is due and gathers the new bound from
 * the timers left armed (timers set meanwhile lower it themselves). */
int zbuf_ip__tcp_timers(zbuf_ip_stack_t *s)
{
    int n = 0;
    uint64_t now = s->now; /* one clock for the walk */
    if (now < s->tcp_next)
        return 0;
    s->tcp_next = ZBUF_IP_NEVER;
    for (zbuf_ip_tcp_t *t = s->tcps; t; t = t->next) {
        if (t->dead)
            continue;
        n += pcb_timers(t, now);
        uint64_t d = t->dead ? ZBUF_IP_NEVER : pcb_next(t, now);
        if (d < s->tcp_next)
            s->tcp_next = d;
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
        uint64_t n = pcb_next(t, s->now);
        if (n < d)
            d = n;
    }
    return d;
}
