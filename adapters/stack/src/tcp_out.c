/* SPDX-License-Identifier: MIT */
/*
 * TCP output: segments built from the send queue, and what goes next.
 *
 * A segment on the wire is a fresh header segment (with the options this
 * segment carries, and its Ethernet and IP headers too when the
 * connection's cached route is ready, see stack.c) in front of
 * zbuf_dup(sndq, off, len): the payload is shared with the send queue,
 * never copied, and the driver gets its own zbuf.
 * zbuf_ip__tcp_output() decides what may leave now: an ACK owing
 * SACK blocks first, then segments deemed lost (oldest first) and new data
 * as far as the pipe (RFC 6675) stays below cwnd and the peer's window
 * allows, holding back small segments (Nagle, sender silly-window
 * avoidance), at most #ZBUF_IP_TCP_BURST segments per call.  On an
 * interface with segmentation offload one packet carries a run of
 * full-sized new segments (a record each on the scoreboard); what is
 * resent goes a segment at a time.
 */
#include <stdlib.h>

#include "tcp_internal.h"

/* The window field to send now.  It moves rcv_adv, the one right edge that
 * is both advertised and used to judge what arrives (RFC 9293 3.10.7.4):
 * the edge is exactly what the field says at our scale (a SYN's window is
 * never scaled, so it is at most 65535 bytes ahead, and so it stays
 * without window scaling); it never moves left (the field is rounded up
 * when the space shrank) and moves right only by a worthwhile amount
 * (receiver silly-window avoidance). */
uint16_t zbuf_ip__tcp_rcv_window(zbuf_ip_tcp_t *t, bool syn)
{
    unsigned ws = syn ? 0 : t->rcv_wscale;
    uint32_t cur = SEQ_LT(t->rcv_adv, t->rcv_nxt) ? 0 : t->rcv_adv - t->rcv_nxt;
    uint32_t space = umin32(zbuf_ip__tcp_rcv_space(t), 65535u << ws);
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

/* Payload of a new full-sized segment now: the MSS less the SACK option its
 * ACK carries while bytes are missing (RFC 6691: options come out of the
 * MSS).  Without that room, data segments flowing the other way would
 * carry no SACK blocks, and once the few pure ACKs that do are lost the
 * peer would learn nothing more of our out-of-order queue until it timed
 * out (seen in the bidirectional loss tests); Linux shrinks its segments
 * the same way. */
static uint32_t send_mss(const zbuf_ip_tcp_t *t)
{
    if (!tcp_sack_owed(t))
        return t->mss;
    uint32_t opt = zbuf_ip__tcp_sack_len(t);
    return t->mss > opt + ZBUF_IP_TCP_MIN_MSS ? t->mss - opt : t->mss;
}

/* Options of a SYN or SYN-ACK, laid out as Linux's: MSS, SACK-permitted
 * (or two NOPs) and timestamps, NOP and window scale; SACK-permitted alone
 * (NOP NOP kind len) without timestamps.  Window scale and SACK-permitted
 * go in a SYN always, in a SYN-ACK only if the peer sent them.  Returns
 * the option bytes written into `o`. */
static size_t syn_options(zbuf_ip_tcp_t *t, uint8_t flags, bool ts, uint8_t *o)
{
    zbuf_ip_stack_t *s = t->stack;
    bool sackp = !(flags & TCP_ACK) || t->sack_ok;
    zbuf_ip_netif_t *nif = zbuf_ip__route(s, t->raddr);
    uint16_t mss = (uint16_t)((nif ? nif->cfg.mtu : ZBUF_IP__MTU_DEFAULT) - IP_HLEN - TCP_HLEN);
    size_t n = 0;
    o[n++] = TCP_OPT_MSS;
    o[n++] = TCP_OPT_MSS_LEN;
    put16(o + n, mss);
    n += 2;
    if (ts) {
        o[n++] = sackp ? TCP_OPT_SACK_PERM : TCP_OPT_NOP;
        o[n++] = sackp ? TCP_OPT_SACK_PERM_LEN : TCP_OPT_NOP;
        o[n++] = TCP_OPT_TS;
        o[n++] = TCP_OPT_TS_LEN;
        put32(o + n, t->ts.syn_set ? t->ts.syn_val : ts_val(t, s->now));
        put32(o + n + 4, (flags & TCP_ACK) ? t->ts.recent : 0);
        n += 8;
    }
    if (!(flags & TCP_ACK) || t->ws_ok) {
        o[n++] = TCP_OPT_NOP;
        o[n++] = TCP_OPT_WSCALE;
        o[n++] = TCP_OPT_WSCALE_LEN;
        o[n++] = t->rcv_wscale;
    }
    if (sackp && !ts) {
        o[n++] = TCP_OPT_NOP;
        o[n++] = TCP_OPT_NOP;
        o[n++] = TCP_OPT_SACK_PERM;
        o[n++] = TCP_OPT_SACK_PERM_LEN;
    }
    return n;
}

/* Options of any other segment: timestamps once agreed (RFC 7323 3.2: on
 * every segment but a RST), SACK blocks on an ACK while some are owed,
 * beside `len` payload bytes.  Returns the option bytes written into `o`. */
static size_t options(zbuf_ip_tcp_t *t, uint8_t flags, size_t len, uint8_t *o)
{
    size_t n = 0;
    if (t->ts.ok && !(flags & TCP_RST)) {
        o[n++] = TCP_OPT_NOP;
        o[n++] = TCP_OPT_NOP;
        o[n++] = TCP_OPT_TS;
        o[n++] = TCP_OPT_TS_LEN;
        put32(o + n, ts_val(t, t->stack->now));
        put32(o + n + 4, (flags & TCP_ACK) ? t->ts.recent : 0);
        n += 8;
    }
    if ((flags & TCP_ACK) && !(flags & TCP_RST) && tcp_sack_owed(t))
        n += zbuf_ip__tcp_sack_option(t, o + n, len);
    return n;
}

int zbuf_ip__tcp_emit(zbuf_ip_tcp_t *t, uint32_t seq, uint8_t flags, size_t off, size_t len)
{
    zbuf_ip_stack_t *s = t->stack;
    zbuf_t *z;
    int rc = len ? zbuf_dup(t->sndq, off, len, &z) : zbuf_create(&z);
    if (rc)
        return rc;
    uint8_t opts[TCP_OPT_MAX];
    bool syn = (flags & TCP_SYN) != 0;
    /* A SYN offers timestamps, a SYN-ACK answers an offer. */
    size_t optlen = syn ? syn_options(t, flags,
                                      !(flags & TCP_RST) && (flags & TCP_ACK ? t->ts.ok
                                                                             : !s->cfg.tcp_no_timestamps),
                                      opts)
                        : options(t, flags, len, opts);
    uint8_t *l2, *h;
    size_t hlen = TCP_HLEN + optlen;
    /* The common case: Ethernet, IP and TCP headers in one header segment. */
    size_t l2len = zbuf_ip__route_ready(s, &t->txr, hlen + len, t->laddr, t->raddr, IP_PROTO_TCP)
                       ? ZBUF_IP__L2_HLEN
                       : 0;
    rc = zbuf_prepend_space(z, l2len + hlen, (void **)&l2);
    if (rc) {
        zbuf_delete(z);
        return rc;
    }
    h = l2 + l2len;
    uint16_t field = zbuf_ip__tcp_rcv_window(t, syn);
    put16(h, t->lport);
    put16(h + 2, t->rport);
    put32(h + 4, seq);
    put32(h + 8, (flags & TCP_ACK) ? t->rcv_nxt : 0);
    h[12] = (uint8_t)((hlen / 4) << 4);
    h[13] = flags;
    put16(h + 14, field);
    put16(h + TCP_CSUM_OFF, 0);
    put16(h + 18, 0);
    if (optlen)
        memcpy(h + TCP_HLEN, opts, optlen);
    uint32_t tot = (uint32_t)(hlen + len);
    if (zbuf_ip__need_tx_csum(s, t->raddr))
        put16(h + TCP_CSUM_OFF,
              zbuf_ip__fold(zbuf_ip__sum_zbuf(
                  z, l2len + hlen, len,
                  zbuf_ip__sum_mem(h, hlen,
                                   zbuf_ip__pseudo(t->laddr, t->raddr, IP_PROTO_TCP, tot)))));
    if (flags & TCP_ACK) {
        t->ack_now = false;
        t->segs_unacked = 0;
        tcp_timer_stop(t, TCP_T_DELACK);
        t->ts.last_ack_sent = t->rcv_nxt;
    }
    s->st.tcp_tx_segs++;
    s->st.tcp_tx_payload += len;
    if (flags & TCP_RST)
        s->st.tcp_rst_tx++;
    if (l2len)
        zbuf_ip__output_ready(s, &t->txr, z, l2, tot);
    else
        zbuf_ip__output(s, z, t->laddr, t->raddr, IP_PROTO_TCP);
    return 0;
}

void zbuf_ip__tcp_send_reset(zbuf_ip_stack_t *s, uint32_t src, uint32_t dst, uint16_t sport,
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
    put16(h + TCP_CSUM_OFF, zbuf_ip__fold(zbuf_ip__sum_mem(
                                h, TCP_HLEN, zbuf_ip__pseudo(src, dst, IP_PROTO_TCP, TCP_HLEN))));
    s->st.tcp_tx_segs++;
    s->st.tcp_rst_tx++;
    zbuf_ip__output(s, z, src, dst, IP_PROTO_TCP);
}

void zbuf_ip__tcp_send_syn(zbuf_ip_tcp_t *t)
{
    uint8_t flags = t->state == ZBUF_IP_TCP_SYN_RCVD ? (TCP_SYN | TCP_ACK) : TCP_SYN;
    zbuf_ip__tcp_emit(t, t->iss, flags, 0, 0);
}

void zbuf_ip__tcp_syn_start(zbuf_ip_tcp_t *t)
{
    zbuf_ip__tcp_send_syn(t);
    tcp_rtx_restart(t);
    t->rtt.start = t->stack->now;
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
    if (zbuf_ip__tcp_emit(t, seq, flags, off, len) != 0)
        return 0;
    if (SEQ_LT(seq, t->snd_max)) {
        t->retransmits++;
        t->stack->st.tcp_retransmits++;
        t->rtt.timing = false; /* Karn: no sample from anything retransmitted */
    }
    if (t->in_recovery)
        t->prr.out += (uint32_t)(len + fin);
    if (!tcp_timer_armed(t, TCP_T_RTX))
        tcp_rtx_restart(t);
    return len + fin;
}

/* Zero copy: a new dup of the queue; one segment, or several of the MSS if
 * it shrank since (path MTU). */
bool zbuf_ip__tcp_resend(zbuf_ip_tcp_t *t, struct txseg *r)
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
        t->rq.retrans_out += seg_len(r);
    }
    r->flags |= TX_EVER_RETRANS;
    r->xmit = t->stack->now;
    if (t->undo.ok && (t->in_recovery || (t->undo.rto && SEQ_LT(r->seq, t->undo.hi)))) {
        t->undo.sent++;
        t->undo.retrans++;
    }
    return true;
}

/* New data from snd_max: up to `len` bytes (and the FIN if it is reached)
 * in one packet, with a scoreboard record per `seg` bytes of it, as if
 * each had gone alone: more than one only on an interface with
 * segmentation offload (output_new()).  Returns the sequence space sent
 * (0: nothing). */
static size_t send_new_segs(zbuf_ip_tcp_t *t, size_t len, uint32_t seg)
{
    zbuf_ip_stack_t *s = t->stack;
    uint32_t want = len ? (uint32_t)((len + seg - 1) / seg) : 1;
    uint32_t k = zbuf_ip__tcp_rq_reserve(t, want);
    if (k == 0)
        return 0;
    if (k < want)
        len = (size_t)k * seg;
    uint32_t seq = t->snd_max;
    size_t n = send_from(t, seq, len, true);
    if (n == 0)
        return 0;
    uint32_t end = seq + (uint32_t)n;
    bool fin = t->fin_queued && end - t->snd_una == zbuf_length(t->sndq) + 1;
    uint32_t data_end = end - fin, at = seq, recs = 0;
    do {
        struct txseg *r = rq_at(t, t->rq.n++);
        uint32_t e = data_end - at > seg ? at + seg : end; /* the last takes the FIN */
        r->seq = at;
        r->end = e;
        r->xmit = s->now;
        r->flags = e == end && fin ? TX_FIN : 0;
        at = e;
        recs++;
    } while (at != end);
    s->st.tcp_tx_segs += recs - 1; /* the segments the packet stands for */
    if (!t->rtt.timing && !t->ts.ok) {
        t->rtt.timing = true;
        t->rtt.seq = seq;
        t->rtt.start = s->now;
    }
    t->snd_max += (uint32_t)n;
    tcp_timer_stop(t, TCP_T_PERSIST);
    return n;
}

size_t zbuf_ip__tcp_send_new(zbuf_ip_tcp_t *t, size_t len)
{
    return send_new_segs(t, len, UINT32_MAX);
}

/* Full-sized segments of `smss` bytes that one packet may carry now: more
 * than one when the route goes straight to an interface with segmentation
 * offload (#ZBUF_IP_DRV_TSO), as many as fit a 64 KiB IP packet. */
static uint32_t tso_segs(zbuf_ip_tcp_t *t, uint32_t smss)
{
    if (!zbuf_ip__route_ready(t->stack, &t->txr, 0, t->laddr, t->raddr, IP_PROTO_TCP) ||
        !(t->txr.nif->drv.flags & ZBUF_IP_DRV_TSO))
        return 1;
    uint32_t n = (IP_MAX_DATAGRAM - IP_HLEN - TCP_HLEN - TCP_OPT_MAX) / smss;
    return n > 1 ? n : 1;
}

/* Segments deemed lost go again, oldest first, as far as the pipe allows;
 * not while F-RTO waits for the ACK of the new data it sent (step 2).
 * `sent` segments went already in this call; returns the new count. */
static int output_lost(zbuf_ip_tcp_t *t, int sent)
{
    for (uint32_t i = 0;
         i < t->rq.n && t->rq.lost_out > 0 && t->undo.frto != 2 && sent < ZBUF_IP_TCP_BURST; i++) {
        struct txseg *r = rq_at(t, i);
        if ((r->flags & (TX_LOST | TX_RETRANS | TX_SACKED)) != TX_LOST)
            continue;
        if (tcp_pipe(t) >= t->cc.cwnd || !zbuf_ip__tcp_resend(t, r))
            break;
        sent++;
    }
    return sent;
}

/* New data, as far as cwnd and the peer's window allow, in segments of
 * `smss`, holding back what Nagle and silly-window avoidance hold back.
 * `sent` as above. */
static int output_new(zbuf_ip_tcp_t *t, int sent, size_t qlen, uint32_t smss)
{
    size_t most = (size_t)smss * tso_segs(t, smss);
    while (sent < ZBUF_IP_TCP_BURST) {
        uint32_t flight = t->snd_max - t->snd_una;
        if (flight > qlen)
            break; /* FIN already sent */
        size_t avail = qlen - flight;
        uint32_t pipe = tcp_pipe(t);
        uint32_t cwnd_room = t->cc.cwnd > pipe ? t->cc.cwnd - pipe : 0;
        uint32_t wnd_room = t->snd_wnd > flight ? t->snd_wnd - flight : 0;
        uint32_t usable = umin32(cwnd_room, wnd_room);
        size_t len = avail;
        if (len > most)
            len = most;
        if (len > usable)
            len = usable;
        if (len > smss)
            len -= len % smss; /* whole segments; a shorter tail goes on its own */
        bool fin = t->fin_queued && flight + len == qlen;
        if (len == 0 && !fin)
            break;
        if (len < smss && !fin) {
            if (len < avail && len < t->max_snd_wnd / 2)
                break; /* sender silly-window avoidance: wait for more window */
            if (len == avail && !t->nodelay && flight > 0)
                break; /* Nagle: a small segment waits for the ACK of what flies */
        }
        if (send_new_segs(t, len, smss) == 0)
            break;
        sent++;
    }
    return sent;
}

int zbuf_ip__tcp_output(zbuf_ip_tcp_t *t)
{
    if (t->dead)
        return 0;
    int sent = 0;
    /* While bytes are missing, the peer learns which ones from SACK blocks;
     * full-sized data segments have no room for them, so a pure ACK with
     * the blocks goes first. */
    if (t->ack_now && tcp_sack_owed(t) && synchronized(t)) {
        zbuf_ip__tcp_emit(t, t->snd_max, TCP_ACK, 0, 0);
        t->ack_now = false;
    }
    if (tcp_can_send_data(t)) {
        sent = output_lost(t, sent);
        size_t qlen = zbuf_length(t->sndq);
        sent = output_new(t, sent, qlen, send_mss(t));
        t->output_pending = sent == ZBUF_IP_TCP_BURST;
        if (t->output_pending && t->stack->now < t->stack->tcp_next)
            t->stack->tcp_next = t->stack->now; /* the next poll goes on */
        if (sent)
            zbuf_ip__tcp_tlp_schedule(t);
        /* Data waits and nothing flies to bring an ACK: probe the window. */
        if (sent == 0 && t->snd_max == t->snd_una && qlen > 0 &&
            !tcp_timer_armed(t, TCP_T_RTX) && !tcp_timer_armed(t, TCP_T_PERSIST))
            zbuf_ip__tcp_persist_arm(t);
    }
    if (sent == 0 && t->ack_now && t->state != ZBUF_IP_TCP_SYN_SENT &&
        t->state != ZBUF_IP_TCP_LISTEN && t->state != ZBUF_IP_TCP_CLOSED)
        zbuf_ip__tcp_emit(t, t->snd_max, TCP_ACK, 0, 0);
    return sent;
}
