/* SPDX-License-Identifier: MIT */
/*
 * TCP input: a segment's header parsed and checked, the connection found,
 * and the state machine (RFC 9293 3.10.7) run on it.
 *
 * A segment for a connection past SYN_SENT goes through the steps of
 * zbuf_ip__tcp_conn_input() in the RFC's order: a retransmitted SYN, PAWS
 * (RFC 7323), acceptability in the window, RST and SYN (RFC 5961), trimming
 * to the window, the end of the handshake, the ACK, the payload.  A step
 * either lets the segment go on or says what becomes of it; there is one
 * place where its bytes are dropped, after which the step's answer (an ACK,
 * a challenge ACK, the end of the connection) is given.
 *
 * ICMP errors about segments we sent come here too (RFC 5927 checks, path
 * MTU discovery of RFC 1191).
 */
#include <stdlib.h>

#include "tcp_internal.h"

/* TS.Recent is valid for this long without a segment (RFC 7323 5.5). */
#define TS_RECENT_IDLE_MS (24ull * 24 * 3600 * 1000)

/* ---------------------------------------------------------- handshake */

/* The options of a segment.  Any malformed option ends the walk (an
 * option length below 2 would otherwise loop forever). */
static void parse_options(const uint8_t *o, size_t n, struct tcp_seg *sg)
{
    size_t i = 0;
    while (i < n) {
        uint8_t kind = o[i];
        if (kind == TCP_OPT_EOL)
            break;
        if (kind == TCP_OPT_NOP) {
            i++;
            continue;
        }
        if (i + 1 >= n)
            break;
        uint8_t olen = o[i + 1];
        if (olen < 2 || i + olen > n)
            break;
        if (kind == TCP_OPT_MSS && olen == TCP_OPT_MSS_LEN) {
            sg->has_mss = true;
            sg->mss = get16(o + i + 2);
        } else if (kind == TCP_OPT_WSCALE && olen == TCP_OPT_WSCALE_LEN) {
            sg->has_ws = true;
            sg->ws = o[i + 2];
        } else if (kind == TCP_OPT_SACK_PERM && olen == TCP_OPT_SACK_PERM_LEN) {
            sg->has_sackok = true;
        } else if (kind == TCP_OPT_TS && olen == TCP_OPT_TS_LEN) {
            sg->has_ts = true;
            sg->tsval = get32(o + i + 2);
            sg->tsecr = get32(o + i + 6);
        } else if (kind == TCP_OPT_SACK && olen >= 2 + TCP_OPT_SACK_BLOCK &&
                   (olen - 2) % TCP_OPT_SACK_BLOCK == 0) {
            for (size_t b = 0;
                 b < (size_t)(olen - 2) / TCP_OPT_SACK_BLOCK && sg->nsack < TCP_SACK_BLOCKS_MAX;
                 b++) {
                sg->sack[sg->nsack][0] = get32(o + i + 2 + TCP_OPT_SACK_BLOCK * b);
                sg->sack[sg->nsack][1] = get32(o + i + 6 + TCP_OPT_SACK_BLOCK * b);
                sg->nsack++;
            }
        }
        i += olen;
    }
}

/* The send MSS from the peer's (clamped), the path MTU and the options
 * every segment carries (timestamps, RFC 6691). */
static uint16_t mss_now(const zbuf_ip_tcp_t *t)
{
    uint32_t m = umin32(t->mss_clamp, (uint32_t)t->pmtu - IP_HLEN - TCP_HLEN);
    if (t->ts.ok)
        m = m > ZBUF_IP_TCP_MIN_MSS + TCP_OPT_TS_SPACE ? m - TCP_OPT_TS_SPACE : ZBUF_IP_TCP_MIN_MSS;
    return (uint16_t)(m < ZBUF_IP_TCP_MIN_MSS ? ZBUF_IP_TCP_MIN_MSS : m);
}

/* What the peer's SYN offers: MSS, SACK, timestamps, window scale. */
static void apply_syn_options(zbuf_ip_tcp_t *t, const struct tcp_seg *sg)
{
    zbuf_ip_netif_t *nif = zbuf_ip__route(t->stack, t->raddr);
    t->pmtu = nif ? nif->cfg.mtu : ZBUF_IP__MTU_DEFAULT;
    uint32_t ours = (uint32_t)t->pmtu - IP_HLEN - TCP_HLEN;
    uint32_t mss = sg->has_mss ? sg->mss : ZBUF_IP_TCP_DEFAULT_MSS;
    if (mss < ZBUF_IP_TCP_MIN_MSS)
        mss = ZBUF_IP_TCP_MIN_MSS; /* an MSS of 0 must not make us send empty segments */
    t->mss_clamp = (uint16_t)umin32(mss, ours);
    t->sack_ok = sg->has_sackok;
    /* Timestamps: on when both sides offer them (our SYN did unless they are
     * switched off). */
    t->ts.ok = sg->has_ts && !t->stack->cfg.tcp_no_timestamps;
    if (t->ts.ok) {
        t->ts.recent = sg->tsval;
        t->ts.recent_set = true;
        t->ts.recent_age = t->stack->now;
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
static void syn_rtt(zbuf_ip_tcp_t *t, const struct tcp_seg *sg)
{
    zbuf_ip_stack_t *s = t->stack;
    if (t->cookie)
        return; /* no SYN-ACK time kept, and the TSval carried options */
    if (t->ts.ok && sg->has_ts && sg->tsecr) {
        uint32_t r = ts_val(t, s->now) - sg->tsecr;
        if (r <= ZBUF_IP_TCP_RTO_MAX_MS) {
            zbuf_ip__tcp_rtt_sample(t, r);
            return;
        }
    }
    if (t->nrexmit == 0)
        zbuf_ip__tcp_rtt_sample(t, (uint32_t)(s->now - t->rtt.start));
}

static void enter_established(zbuf_ip_tcp_t *t)
{
    t->state = ZBUF_IP_TCP_ESTABLISHED;
    zbuf_ip__tcp_keep_touch(t);
    t->rtt.seq = t->snd_una;
    t->rack.fack = t->snd_una;
    t->cc.ops->init(t);
    t->nrexmit = 0;
    tcp_timer_stop(t, TCP_T_RTX);
}

static void enter_time_wait(zbuf_ip_tcp_t *t)
{
    t->state = ZBUF_IP_TCP_TIME_WAIT;
    tcp_timer_stop(t, TCP_T_RTX);
    tcp_timer_stop(t, TCP_T_PERSIST);
    tcp_timer_stop(t, TCP_T_DELACK);
    tcp_timer_stop(t, TCP_T_KEEP);
    t->output_pending = false;
    tcp_timer_set(t, TCP_T_2MSL, t->stack->now + t->stack->cfg.tcp_time_wait_ms);
}

void zbuf_ip__tcp_take_fin(zbuf_ip_tcp_t *t)
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

/* `t` may be a stand-in that is never linked (a SYN cookie's answer):
 * then `l` is not told. */
void zbuf_ip__tcp_child_init(zbuf_ip_tcp_t *l, zbuf_ip_tcp_t *t, const struct tcp_seg *sg,
                             uint32_t src, uint32_t dst, uint32_t iss, bool linked)
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
    zbuf_ip__tcp_ts_setup(t);
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

/* A segment for a listener: maybe a new connection (consumes z).  Data on
 * a SYN is not taken: the peer sends it again. */
static void listen_input(zbuf_ip_tcp_t *l, zbuf_t *z, struct tcp_seg *sg, uint32_t src,
                         uint32_t dst)
{
    zbuf_ip_stack_t *s = l->stack;
    if ((sg->flags & (TCP_RST | TCP_ACK)) == TCP_ACK &&
        zbuf_ip__tcp_cookie_accept(l, z, sg, src, dst))
        return;
    zbuf_delete(z); /* a listener keeps no bytes */
    if (sg->flags & TCP_RST)
        return;
    if (sg->flags & TCP_ACK) {
        zbuf_ip__tcp_send_reset(s, dst, src, sg->dport, sg->sport, sg->ack, 0, TCP_RST);
        return;
    }
    if (!(sg->flags & TCP_SYN) || (sg->flags & TCP_FIN))
        return;
    bool cookies = !s->cfg.tcp_no_syncookies;
    zbuf_ip_tcp_t *t = NULL;
    if (l->pending < l->backlog)
        t = zbuf_ip__tcp_alloc(s);
    if (t == NULL) {
        if (cookies) /* backlog full or no PCB: keep nothing, answer with a cookie */
            zbuf_ip__tcp_cookie_answer(l, sg, src, dst);
        return; /* without cookies, like Linux: drop, the peer retries */
    }
    uint32_t iss;
    zbuf_ip__tcp_isn(s, dst, sg->dport, src, sg->sport, &iss);
    zbuf_ip__tcp_child_init(l, t, sg, src, dst, iss, true);
    zbuf_ip__tcp_syn_start(t);
}

/* Our SYN is out: a SYN-ACK completes the handshake, a SYN alone is a
 * simultaneous open (RFC 9293 figure 7).  Data on a SYN-ACK is rare and is
 * not taken; the peer sends it again. */
static void syn_sent_input(zbuf_ip_tcp_t *t, zbuf_t *z, const struct tcp_seg *sg)
{
    zbuf_ip_stack_t *s = t->stack;
    bool has_ack = (sg->flags & TCP_ACK) != 0;
    bool ack_ok = has_ack && SEQ_GT(sg->ack, t->iss) && SEQ_LEQ(sg->ack, t->snd_max);
    if (has_ack && !ack_ok && !(sg->flags & TCP_RST))
        zbuf_ip__tcp_send_reset(s, t->laddr, t->raddr, t->lport, t->rport, sg->ack, 0, TCP_RST);
    zbuf_delete(z);
    if (has_ack && !ack_ok)
        return;
    if (sg->flags & TCP_RST) {
        if (ack_ok) /* RFC 5961 3.2: only a RST acknowledging our SYN counts */
            zbuf_ip__tcp_fail(t, -ECONNREFUSED);
        return;
    }
    if (!(sg->flags & TCP_SYN))
        return;
    t->irs = sg->seq;
    t->rcv_nxt = sg->seq + 1;
    t->rcv_adv = t->rcv_nxt;
    apply_syn_options(t, sg);
    if (!ack_ok) {
        t->state = ZBUF_IP_TCP_SYN_RCVD;
        t->snd_wnd = sg->wnd;
        t->snd_wl1 = sg->seq;
        zbuf_ip__tcp_syn_start(t);
        return;
    }
    t->snd_una = sg->ack;
    t->rtt.timing = false;
    syn_rtt(t, sg);
    enter_established(t);
    t->snd_wnd = sg->wnd; /* never scaled in a SYN segment (RFC 7323 2.2) */
    t->max_snd_wnd = t->snd_wnd;
    t->snd_wl1 = sg->seq;
    t->snd_wl2 = sg->ack;
    t->ack_now = true;
    zbuf_ip__tcp_output(t);
    if (!t->app_closed && t->cb.connected)
        t->cb.connected(t->arg, t);
    if (!t->dead)
        zbuf_ip__tcp_output(t);
}

/* ------------------------------------------------- unacceptable input */

/* The per-connection limit on ACKs that a peer's unacceptable segments
 * draw (PAWS drops, out-of-window segments without payload, challenges),
 * like Linux's tcp_oow_rate_limited(): true when one went out less than
 * #ZBUF_IP_TCP_INVALID_RATELIMIT_MS ago; otherwise this one is recorded. */
static bool oow_limited(zbuf_ip_tcp_t *t)
{
    zbuf_ip_stack_t *s = t->stack;
    if (t->oow.sent && s->now - t->oow.at < ZBUF_IP_TCP_INVALID_RATELIMIT_MS)
        return true;
    t->oow.sent = true;
    t->oow.at = s->now;
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
    zbuf_ip__tcp_emit(t, t->snd_max, TCP_ACK, 0, 0);
}

/* ---------------------------------------------------------------- ACK */

/* An ACK of something not yet sent, or too old to be real (RFC 5961 5.2),
 * is answered with an ACK and the segment dropped. */
static bool ack_acceptable(zbuf_ip_tcp_t *t, const struct tcp_seg *sg)
{
    if (SEQ_GT(sg->ack, t->snd_max) || SEQ_LT(sg->ack, t->snd_una - t->max_snd_wnd)) {
        t->ack_now = true;
        return false;
    }
    return true;
}

/* The peer's window, from the most recent segment (RFC 9293 3.10.7.4:
 * SND.WL1, SND.WL2).  Returns whether it changed. */
static bool snd_wnd_update(zbuf_ip_tcp_t *t, const struct tcp_seg *sg)
{
    uint32_t wnd = sg->wnd << t->snd_wscale;
    if (!(SEQ_LT(t->snd_wl1, sg->seq) || (t->snd_wl1 == sg->seq && SEQ_LEQ(t->snd_wl2, sg->ack))))
        return false;
    bool changed = t->snd_wnd != wnd;
    t->snd_wnd = wnd;
    t->snd_wl1 = sg->seq;
    t->snd_wl2 = sg->ack;
    if (wnd > t->max_snd_wnd)
        t->max_snd_wnd = wnd;
    if (wnd > 0) {
        tcp_timer_stop(t, TCP_T_PERSIST);
        t->persist_shift = 0;
    }
    return changed;
}

/* `acked` new bytes are acknowledged: an RTT sample, the scoreboard's
 * records and the send queue's bytes go (their release callbacks run).
 * Returns the bytes of data acknowledged (a FIN is not data). */
static size_t ack_advance(zbuf_ip_tcp_t *t, const struct tcp_seg *sg, uint32_t acked)
{
    zbuf_ip_stack_t *s = t->stack;
    uint32_t ack = sg->ack;
    size_t qlen = zbuf_length(t->sndq);
    size_t data = acked > qlen ? qlen : acked;
    /* RTT: from the echoed timestamp once per flight (RFC 7323 4.1;
     * retransmissions too), else from the timed segment (Karn). */
    if (t->ts.ok && sg->has_ts && SEQ_GT(ack, t->rtt.seq)) {
        uint32_t r = ts_val(t, s->now) - sg->tsecr;
        if (r <= ZBUF_IP_TCP_RTO_MAX_MS) {
            zbuf_ip__tcp_rtt_sample(t, r);
            t->rtt.seq = t->snd_max;
        }
    } else if (t->rtt.timing && SEQ_GT(ack, t->rtt.seq)) {
        t->rtt.timing = false;
        zbuf_ip__tcp_rtt_sample(t, (uint32_t)(s->now - t->rtt.start));
    }
    zbuf_ip__tcp_rq_ack(t, ack, sg);
    if (data)
        zbuf_cut(t->sndq, 0, data, NULL); /* release callbacks of acked buffers run */
    if (acked > qlen && t->fin_queued)
        t->fin_acked = true;
    t->snd_una = ack;
    t->nrexmit = 0;
    return data;
}

/* Process an acceptable ACK in a synchronized state.  Returns false if the
 * segment must be dropped. */
static bool process_ack(zbuf_ip_tcp_t *t, const struct tcp_seg *sg)
{
    if (!ack_acceptable(t, sg))
        return false;
    bool wnd_changed = snd_wnd_update(t, sg);
    uint32_t flight = t->snd_max - t->snd_una;
    uint32_t prior_sacked = t->rq.sacked_out;
    uint32_t acked = SEQ_GT(sg->ack, t->snd_una) ? sg->ack - t->snd_una : 0;
    size_t data = acked ? ack_advance(t, sg, acked) : 0;
    zbuf_ip__tcp_recover(t, sg, acked, flight, prior_sacked, wnd_changed);
    if (data && !t->app_closed && t->cb.sent)
        t->cb.sent(t->arg, t, data);
    return true;
}

/* ------------------------------------------------- the main path's steps */

/* What a step of conn_input() makes of the segment: on to the next step,
 * or dropped (its bytes go at the one exit), then what follows. */
enum rx_verdict {
    RX_GO,             /* on to the next step; after the last, FIN and ACK */
    RX_DROP,           /* dropped; any answer it needed was given */
    RX_DROP_OUTPUT,    /* dropped; then output (an ACK is owed) */
    RX_DROP_RESET,     /* an acceptable RST: dropped, then it is taken */
    RX_DROP_CHALLENGE, /* a SYN in a synchronized state: dropped, then a challenge ACK */
    RX_DROP_FINISH,    /* our FIN acknowledged in LAST_ACK: dropped, then the end */
};

/* A segment on its way through conn_input(): what is left of it. */
struct rx {
    zbuf_t *z;         /* payload not yet delivered or queued (NULL once it is) */
    uint32_t seq, len; /* its first sequence number and length as trimmed so far */
    uint8_t flags;     /* its flags as still taken (a trimmed FIN is cleared) */
    uint32_t rwnd;     /* our window when it arrived */
    bool ack_only;     /* it met a zero window: only its ACK is taken */
};

/* (The new SYN for a pair in TIME_WAIT was handled by the caller.)  Our
 * SYN-ACK was lost: send it again.  An old SYN (a retransmitted SYN-ACK
 * after our ACK was lost): drop the SYN, keep the rest, and answer so the
 * peer leaves SYN_RCVD. */
static enum rx_verdict rx_resent_syn(zbuf_ip_tcp_t *t, struct rx *rx)
{
    if (t->state == ZBUF_IP_TCP_SYN_RCVD && (rx->flags & TCP_SYN) && !(rx->flags & TCP_ACK) &&
        rx->seq == t->irs) {
        zbuf_ip__tcp_send_syn(t);
        return RX_DROP;
    }
    if ((rx->flags & TCP_SYN) && rx->seq == t->irs) {
        rx->flags &= (uint8_t)~TCP_SYN;
        rx->seq++;
        t->ack_now = true;
    }
    return RX_GO;
}

/* PAWS (RFC 7323 5.3 R1): a TSval older than TS.Recent marks a segment of
 * an earlier incarnation of the sequence space; it is answered with an ACK
 * and dropped.  Not for RSTs, which carry no timestamps and are judged by
 * sequence number alone (RFC 7323 5.2).  TS.Recent idle for 24 days is no
 * longer valid (5.5). */
static enum rx_verdict rx_paws(zbuf_ip_tcp_t *t, const struct tcp_seg *sg, struct rx *rx)
{
    zbuf_ip_stack_t *s = t->stack;
    if (!t->ts.ok || !sg->has_ts || !t->ts.recent_set || (rx->flags & TCP_RST))
        return RX_GO;
    if (s->now - t->ts.recent_age > TS_RECENT_IDLE_MS) {
        t->ts.recent_set = false;
        return RX_GO;
    }
    if (!SEQ_LT(sg->tsval, t->ts.recent))
        return RX_GO;
    s->st.tcp_paws_drops++;
    /* At most one such ACK per ZBUF_IP_TCP_INVALID_RATELIMIT_MS, like
     * Linux's tcp_invalid_ratelimit: a flood of replayed segments must not
     * turn into a flood of ACKs. */
    if (oow_limited(t)) {
        s->st.tcp_paws_acks_limited++;
        return RX_DROP;
    }
    t->ack_now = true;
    return RX_DROP_OUTPUT;
}

/* Is the segment acceptable (RFC 9293 3.10.7.4: some of it inside the
 * window, or empty at its left edge)? */
static bool rx_in_window(const zbuf_ip_tcp_t *t, const struct rx *rx)
{
    uint32_t seglen = rx->len + ((rx->flags & TCP_FIN) ? 1 : 0) + ((rx->flags & TCP_SYN) ? 1 : 0);
    uint32_t nxt = t->rcv_nxt, wnd = rx->rwnd;
    if (seglen == 0)
        return wnd == 0 ? rx->seq == nxt : SEQ_GEQ(rx->seq, nxt) && SEQ_LT(rx->seq, nxt + wnd);
    return wnd != 0 && ((SEQ_GEQ(rx->seq, nxt) && SEQ_LT(rx->seq, nxt + wnd)) ||
                        (SEQ_GEQ(rx->seq + seglen - 1, nxt) && SEQ_LT(rx->seq + seglen - 1, nxt + wnd)));
}

/* Outside the window: dropped with an ACK, except the ACK of a segment
 * that meets a zero window at its edge, which is still taken.  Inside it:
 * the peer is alive, and its timestamp may be the one to echo. */
static enum rx_verdict rx_acceptable(zbuf_ip_tcp_t *t, const struct tcp_seg *sg, struct rx *rx)
{
    zbuf_ip_stack_t *s = t->stack;
    rx->rwnd = SEQ_LT(t->rcv_adv, t->rcv_nxt) ? 0 : t->rcv_adv - t->rcv_nxt;
    if (!rx_in_window(t, rx)) {
        if (rx->flags & TCP_RST)
            return RX_DROP;
        if (rx->rwnd == 0 && rx->seq == t->rcv_nxt && (rx->flags & TCP_ACK)) {
            rx->ack_only = true; /* zero window: still take the ACK (RFC 9293 3.10.7.4) */
        } else {
            /* Segments without payload (blind ACKs, forged or not) draw one
             * ACK per ZBUF_IP_TCP_INVALID_RATELIMIT_MS at most, as in
             * Linux; duplicates of data are always answered (D-SACK). */
            bool empty = rx->len == 0 && !(rx->flags & (TCP_SYN | TCP_FIN));
            if (empty && oow_limited(t)) {
                s->st.tcp_oow_acks_limited++;
                return RX_DROP;
            }
            if (rx->len > 0 && SEQ_LEQ(rx->seq + rx->len, t->rcv_nxt) &&
                SEQ_GEQ(rx->seq, t->rcv_nxt - t->rcv_buf))
                zbuf_ip__tcp_note_dsack(t, rx->seq, rx->seq + rx->len); /* an old duplicate */
            t->ack_now = true;
            return RX_DROP_OUTPUT;
        }
    }
    zbuf_ip__tcp_keep_touch(t);
    /* RFC 7323 4.3: echo the TSval of the segment at the left edge of the
     * window (SEG.SEQ <= Last.ACK.sent), so that the peer's RTT samples
     * include our delayed ACKs and no later segment's value. */
    if (t->ts.ok && sg->has_ts && !(rx->flags & TCP_RST) && SEQ_LEQ(sg->seq, t->ts.last_ack_sent) &&
        (!t->ts.recent_set || SEQ_GEQ(sg->tsval, t->ts.recent))) {
        t->ts.recent = sg->tsval;
        t->ts.recent_set = true;
        t->ts.recent_age = s->now;
    }
    return RX_GO;
}

/* RST and SYN in a synchronized state (RFC 5961 3.2, 4.2), and a segment
 * without ACK, which carries nothing we take. */
static enum rx_verdict rx_control(const struct rx *rx)
{
    if (rx->flags & TCP_RST)
        return RX_DROP_RESET;
    if (rx->flags & TCP_SYN)
        return RX_DROP_CHALLENGE;
    if (!(rx->flags & TCP_ACK))
        return RX_DROP;
    return RX_GO;
}

/* Trim to the window: bytes already received (reported as a D-SACK),
 * bytes past the edge, or all of it when it met a zero window. */
static void rx_trim(zbuf_ip_tcp_t *t, struct rx *rx)
{
    if (rx->ack_only) {
        zbuf_cut(rx->z, 0, ZBUF_TO_END, NULL); /* the payload goes now */
        rx->len = 0;
        rx->flags &= (uint8_t)~TCP_FIN;
        t->ack_now = true;
        return;
    }
    if (SEQ_LT(rx->seq, t->rcv_nxt)) {
        uint32_t d = t->rcv_nxt - rx->seq;
        if (rx->len > 0)
            zbuf_ip__tcp_note_dsack(t, rx->seq, d < rx->len ? t->rcv_nxt : rx->seq + rx->len);
        if (d >= rx->len) {
            if (d > rx->len)
                rx->flags &= (uint8_t)~TCP_FIN; /* an old FIN */
            zbuf_cut(rx->z, 0, ZBUF_TO_END, NULL);
            rx->len = 0;
        } else {
            zbuf_cut(rx->z, 0, d, NULL);
            rx->len -= d;
        }
        rx->seq = t->rcv_nxt;
        t->ack_now = true;
    }
    if (rx->rwnd == 0 ? rx->len > 0 : SEQ_GT(rx->seq + rx->len, t->rcv_nxt + rx->rwnd)) {
        uint32_t keep = rx->rwnd == 0 ? 0 : t->rcv_nxt + rx->rwnd - rx->seq;
        zbuf_cut(rx->z, keep, ZBUF_TO_END, NULL);
        rx->len = keep;
        rx->flags &= (uint8_t)~TCP_FIN;
        t->ack_now = true;
    }
}

/* The ACK of our SYN-ACK completes the handshake: the application learns
 * of the connection (the listener's accept callback, or connected after a
 * simultaneous open).  A bad ACK is answered with a RST. */
static enum rx_verdict rx_handshake(zbuf_ip_tcp_t *t, const struct tcp_seg *sg, const struct rx *rx)
{
    zbuf_ip_stack_t *s = t->stack;
    if (t->state != ZBUF_IP_TCP_SYN_RCVD)
        return RX_GO;
    if (SEQ_LEQ(sg->ack, t->snd_una) || SEQ_GT(sg->ack, t->snd_max)) {
        zbuf_ip__tcp_send_reset(s, t->laddr, t->raddr, t->lport, t->rport, sg->ack, 0, TCP_RST);
        return RX_DROP;
    }
    t->rtt.timing = false;
    syn_rtt(t, sg);
    t->snd_una = t->iss + 1;
    enter_established(t);
    /* The window of a SYN-ACK (simultaneous open) is not scaled. */
    t->snd_wnd = (sg->flags & TCP_SYN) ? sg->wnd : sg->wnd << t->snd_wscale;
    t->max_snd_wnd = t->snd_wnd;
    t->snd_wl1 = rx->seq;
    t->snd_wl2 = sg->ack;
    if (t->fin_queued) /* shut down before the handshake completed */
        t->state = ZBUF_IP_TCP_FIN_WAIT_1;
    zbuf_ip_tcp_t *l = t->listener;
    if (l) {
        l->pending--;
        t->listener = NULL;
        s->st.tcp_accepts++;
        int rc = l->cb.accept && !l->app_closed ? l->cb.accept(l->arg, l, t) : -ECONNREFUSED;
        if (rc != 0 && !t->dead)
            zbuf_ip_tcp_abort(t);
    } else if (!t->app_closed && t->cb.connected) {
        t->cb.connected(t->arg, t);
    }
    return t->dead ? RX_DROP : RX_GO;
}

/* The ACK, and what our FIN's acknowledgment changes in the state. */
static enum rx_verdict rx_ack(zbuf_ip_tcp_t *t, const struct tcp_seg *sg)
{
    zbuf_ip_stack_t *s = t->stack;
    if (!process_ack(t, sg))
        return RX_DROP_OUTPUT;
    if (t->dead)
        return RX_DROP;
    if (!t->fin_acked)
        return RX_GO;
    switch (t->state) {
    case ZBUF_IP_TCP_FIN_WAIT_1:
        t->state = ZBUF_IP_TCP_FIN_WAIT_2;
        if (t->app_closed)
            tcp_timer_set(t, TCP_T_2MSL, s->now + s->cfg.tcp_time_wait_ms);
        return RX_GO;
    case ZBUF_IP_TCP_CLOSING:
        enter_time_wait(t);
        return RX_GO;
    case ZBUF_IP_TCP_LAST_ACK:
        return RX_DROP_FINISH;
    default:
        return RX_GO;
    }
}

/* In-order data owes an ACK for every second segment (RFC 5681 4.2).
 * Inside a receive batch it waits for the batch's end, up to
 * ZBUF_IP_TCP_ACK_BATCH_SEGS segments: one ACK for what one poll brought,
 * as Linux acknowledges a GRO packet.  Holes, duplicates, window updates
 * and FINs are acknowledged at once as before. */
static void ack_in_order(zbuf_ip_tcp_t *t)
{
    zbuf_ip_stack_t *s = t->stack;
    if (s->rx_batch == 0 || t->segs_unacked >= ZBUF_IP_TCP_ACK_BATCH_SEGS) {
        t->ack_now = true;
    } else if (!t->ack_owed) {
        t->ack_owed = true;
        t->ack_next = s->acks_owed;
        s->acks_owed = t;
    }
}

void zbuf_ip__tcp_acks_flush(zbuf_ip_stack_t *s)
{
    while (s->acks_owed != NULL) {
        zbuf_ip_tcp_t *t = s->acks_owed;
        s->acks_owed = t->ack_next;
        t->ack_next = NULL;
        t->ack_owed = false;
        /* Dead PCBs are freed only when the outermost call returns, after
         * this; one whose data or ACK went out meanwhile owes nothing. */
        if (!t->dead && t->segs_unacked > 0) {
            t->ack_now = true;
            zbuf_ip__tcp_output(t);
        }
    }
}

/* The payload, in a state that takes it: delivered if it is next (and
 * what it completes of the out-of-order queue with it), else queued out
 * of order.  No receive memory for it: it stays in rx->z, dropped like a
 * lost segment; the ACK tells. */
static void rx_payload(zbuf_ip_tcp_t *t, struct rx *rx)
{
    bool data_state = t->state == ZBUF_IP_TCP_ESTABLISHED ||
                      t->state == ZBUF_IP_TCP_FIN_WAIT_1 || t->state == ZBUF_IP_TCP_FIN_WAIT_2;
    if (rx->len == 0)
        return;
    if (!data_state || t->fin_rcvd) {
        t->ack_now = true;
        return;
    }
    size_t charge = 0;
    if (rx->seq == t->rcv_nxt && rcv_keeps(t) &&
        (charge = zbuf_ip__tcp_rcv_admit(t, rx->z, false, rx->seq)) == 0) {
        rx->len = 0;
        rx->flags &= (uint8_t)~TCP_FIN;
        t->ack_now = true;
    } else if (rx->seq == t->rcv_nxt) {
        bool had_ooo = t->ooo.head != NULL;
        zbuf_ip__tcp_deliver(t, rx->z, charge);
        rx->z = NULL;
        if (!t->dead && had_ooo) {
            zbuf_ip__tcp_ooo_drain(t);
            t->ack_now = true; /* filled a hole: tell the sender at once */
        }
        if (!t->dead && ++t->segs_unacked >= 2)
            ack_in_order(t);
    } else {
        zbuf_ip__tcp_ooo_insert(t, rx->seq, rx->z, (rx->flags & TCP_FIN) != 0);
        rx->z = NULL;
        rx->flags &= (uint8_t)~TCP_FIN;
        t->ack_now = true; /* duplicate ACK drives the peer's fast retransmit */
    }
}

/* An acceptable RST (RFC 5961 3.2): the exact sequence number resets, one
 * elsewhere in the window draws a challenge ACK. */
static void rx_take_rst(zbuf_ip_tcp_t *t, uint32_t seq)
{
    t->stack->st.tcp_rst_rx++;
    if (seq != t->rcv_nxt) {
        challenge_ack(t);
    } else if (t->state == ZBUF_IP_TCP_SYN_RCVD && t->listener) {
        t->app_closed = true;
        zbuf_ip__tcp_kill(t);
    } else if (t->state == ZBUF_IP_TCP_TIME_WAIT || t->state == ZBUF_IP_TCP_CLOSING ||
               t->state == ZBUF_IP_TCP_LAST_ACK) {
        zbuf_ip__tcp_finish(t);
    } else {
        zbuf_ip__tcp_fail(t, -ECONNRESET);
    }
}

/* After a segment went through every step: its FIN if in order (or a
 * retransmitted FIN in TIME_WAIT: ACK it, restart the wait), then the ACK
 * now or delayed, and whatever else may go. */
static void rx_fin_and_ack(zbuf_ip_tcp_t *t, const struct rx *rx)
{
    zbuf_ip_stack_t *s = t->stack;
    if (t->dead)
        return;
    if ((rx->flags & TCP_FIN) && rx->seq + rx->len == t->rcv_nxt && !t->fin_rcvd) {
        zbuf_ip__tcp_take_fin(t);
    } else if ((rx->flags & TCP_FIN) && t->state == ZBUF_IP_TCP_TIME_WAIT) {
        t->ack_now = true;
        tcp_timer_set(t, TCP_T_2MSL, s->now + s->cfg.tcp_time_wait_ms);
    }
    if (t->dead)
        return;
    if (!t->ack_now && t->segs_unacked > 0 && !tcp_timer_armed(t, TCP_T_DELACK))
        tcp_timer_set(t, TCP_T_DELACK, s->now + s->cfg.tcp_delack_ms);
    zbuf_ip__tcp_output(t);
}

/* The main path (consumes z). */
void zbuf_ip__tcp_conn_input(zbuf_ip_tcp_t *t, zbuf_t *z, struct tcp_seg *sg)
{
    struct rx rx = {.z = z, .seq = sg->seq, .len = sg->len, .flags = sg->flags};
    enum rx_verdict v;
    if ((v = rx_resent_syn(t, &rx)) == RX_GO && (v = rx_paws(t, sg, &rx)) == RX_GO &&
        (v = rx_acceptable(t, sg, &rx)) == RX_GO && (v = rx_control(&rx)) == RX_GO) {
        rx_trim(t, &rx);
        if ((v = rx_handshake(t, sg, &rx)) == RX_GO && (v = rx_ack(t, sg)) == RX_GO)
            rx_payload(t, &rx);
    }
    zbuf_delete(rx.z); /* the one exit of what was neither delivered nor queued */
    switch (v) {
    case RX_GO:
        rx_fin_and_ack(t, &rx);
        break;
    case RX_DROP:
        break;
    case RX_DROP_OUTPUT:
        zbuf_ip__tcp_output(t);
        break;
    case RX_DROP_RESET:
        rx_take_rst(t, rx.seq);
        break;
    case RX_DROP_CHALLENGE:
        challenge_ack(t);
        break;
    case RX_DROP_FINISH:
        zbuf_ip__tcp_finish(t);
        break;
    }
}

/* ------------------------------------------------------------- demux */

/* RFC 6191: may a SYN reopen a connection in TIME_WAIT?  When the old
 * connection used timestamps and the SYN carries one, the timestamp decides
 * (greater than the last one seen: it cannot be an old duplicate, whatever
 * its sequence number); otherwise, as RFC 1122, an ISN above the old
 * connection's final sequence number.  A refused SYN is treated like any
 * SYN in a synchronized state (PAWS, then a challenge ACK). */
static bool time_wait_reusable(const zbuf_ip_tcp_t *t, const struct tcp_seg *sg)
{
    if (t->ts.ok && t->ts.recent_set && sg->has_ts)
        return SEQ_GT(sg->tsval, t->ts.recent);
    return SEQ_GT(sg->seq, t->rcv_nxt);
}

/* The connection of a four-tuple, else the listener of the port (one bound
 * to `dst` before one bound to any address). */
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

/* Check the header of segment `z` (from `src` to `dst`) and parse it into
 * *sg; the header is cut off.  Returns false when the segment must be
 * dropped (counted). */
static bool seg_parse(zbuf_ip_stack_t *s, zbuf_t *z, uint32_t src, uint32_t dst,
                      struct tcp_seg *sg)
{
    uint8_t tmp[TCP_HLEN + TCP_OPT_MAX];
    size_t len = zbuf_length(z);
    const uint8_t *h = zbuf_ip__hdr(z, 0, TCP_HLEN, tmp);
    size_t hlen = h ? (size_t)(h[12] >> 4) * 4 : 0;
    if (h == NULL || hlen < TCP_HLEN || hlen > len) {
        s->st.bad_tcp++;
        return false;
    }
    if (zbuf_ip__verify_rx(s) &&
        zbuf_ip__fold(zbuf_ip__sum_zbuf(z, 0, len, zbuf_ip__pseudo(src, dst, IP_PROTO_TCP, (uint32_t)len)))) {
        s->st.bad_checksum++;
        return false;
    }
    memset(sg, 0, sizeof *sg);
    sg->sport = get16(h);
    sg->dport = get16(h + 2);
    sg->seq = get32(h + 4);
    sg->ack = get32(h + 8);
    sg->flags = h[13] & TCP_FLAGS;
    sg->wnd = get16(h + 14);
    sg->len = (uint32_t)(len - hlen);
    if (sg->sport == 0 || sg->dport == 0) {
        s->st.bad_tcp++;
        return false;
    }
    if (hlen > TCP_HLEN) {
        const uint8_t *o = zbuf_ip__hdr(z, TCP_HLEN, hlen - TCP_HLEN, tmp);
        if (o)
            parse_options(o, hlen - TCP_HLEN, sg);
    }
    s->st.tcp_rx_segs++;
    zbuf_cut(z, 0, hlen, NULL);
    return true;
}

/* No connection takes the segment: a RST answers it (RFC 9293 3.10.7.1),
 * unless it is one. */
static void no_connection(zbuf_ip_stack_t *s, const struct tcp_seg *sg, uint32_t src, uint32_t dst)
{
    if (sg->flags & TCP_RST)
        return;
    if (sg->flags & TCP_ACK)
        zbuf_ip__tcp_send_reset(s, dst, src, sg->dport, sg->sport, sg->ack, 0, TCP_RST);
    else
        zbuf_ip__tcp_send_reset(s, dst, src, sg->dport, sg->sport, 0,
                                sg->seq + sg->len + ((sg->flags & TCP_SYN) ? 1 : 0) +
                                    ((sg->flags & TCP_FIN) ? 1 : 0),
                                TCP_RST | TCP_ACK);
}

void zbuf_ip__tcp_input(zbuf_ip_stack_t *s, zbuf_t *z, uint32_t src, uint32_t dst)
{
    struct tcp_seg sg;
    if (!seg_parse(s, z, src, dst, &sg)) {
        s->st.rx_drops++;
        zbuf_delete(z);
        return;
    }
    zbuf_ip_tcp_t *t = lookup(s, src, sg.sport, dst, sg.dport);
    /* A new SYN for a pair in TIME_WAIT that cannot be taken for an old
     * segment ends the wait and goes to the listener (RFC 6191).  The old
     * PCB ends as after its 2 MSL: freed if the application gave it back,
     * else CLOSED and still the application's (lookups skip it). */
    if (t && t->state == ZBUF_IP_TCP_TIME_WAIT && (sg.flags & TCP_SYN) &&
        !(sg.flags & (TCP_ACK | TCP_RST)) && time_wait_reusable(t, &sg)) {
        s->st.tcp_tw_recycled++;
        zbuf_ip__tcp_finish(t);
        t = lookup(s, src, sg.sport, dst, sg.dport);
    }
    if (t == NULL) {
        zbuf_delete(z);
        no_connection(s, &sg, src, dst);
    } else if (t->state == ZBUF_IP_TCP_LISTEN) {
        listen_input(t, z, &sg, src, dst);
    } else if (t->state == ZBUF_IP_TCP_SYN_SENT) {
        syn_sent_input(t, z, &sg);
    } else {
        zbuf_ip__tcp_conn_input(t, z, &sg);
    }
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
    for (uint32_t i = 0; i < t->rq.n; i++) {
        struct txseg *r = rq_at(t, i);
        if (seg_len(r) - ((r->flags & TX_FIN) != 0) > t->mss)
            zbuf_ip__tcp_mark_lost(t, r);
    }
    if (tcp_can_send_data(t))
        zbuf_ip__tcp_output(t);
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
    if (e->type == ICMP_DEST_UNREACH && e->code == ICMP_UNREACH_NEEDFRAG)
        return pmtu_reduce(t, e);
    if (e->type != ICMP_DEST_UNREACH && e->type != ICMP_TIME_EXCEEDED)
        return 0; /* source quench (RFC 6633), parameter problem: nothing to do */
    int err = e->type == ICMP_TIME_EXCEEDED ? -EHOSTUNREACH : zbuf_ip__unreach_errno(e->code);
    if (e->type == ICMP_DEST_UNREACH && t->state == ZBUF_IP_TCP_SYN_RCVD && t->listener) {
        /* A half-open connection to a host that cannot be reached: drop it
         * now (as Linux drops the request) instead of after its SYN-ACK
         * retries. */
        s->st.tcp_half_open_drops++;
        s->st.tcp_icmp_aborts++;
        t->app_closed = true;
        zbuf_ip__tcp_kill(t);
        return 0;
    }
    if (e->type == ICMP_DEST_UNREACH && t->state == ZBUF_IP_TCP_SYN_SENT &&
        (e->code == ICMP_UNREACH_PROTO || e->code == ICMP_UNREACH_PORT)) {
        /* A hard error while connecting (RFC 1122 4.2.3.9, RFC 5461). */
        s->st.tcp_icmp_aborts++;
        zbuf_ip__tcp_fail(t, err);
        return 0;
    }
    t->soft_err = err; /* reported if the connection times out */
    return 0;
}
