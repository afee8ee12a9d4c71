/* SPDX-License-Identifier: MIT */
/*
 * TCP (RFC 9293) with RFC 5961 (blind in-window attacks), RFC 6298 (RTO,
 * Karn), RFC 5681 (congestion control), RFC 7323 (window scaling,
 * timestamps, PAWS), RFC 6528 (keyed-hash ISNs), RFC 2018 SACK, and loss
 * recovery after RFC 8985 (RACK-TLP), RFC 6675 (SACK pipe), RFC 6937
 * (proportional rate reduction), RFC 6582 (NewReno, for peers without
 * SACK) and RFC 3042 (limited transmit).  Where each part lives:
 * tcp_internal.h.  This file: the life cycle of a PCB and the user calls.
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
 * bounded by #ZBUF_IP_TCP_OOO_SEGS entries and by the advertised window
 * (tcp_ooo.c).
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

#include "tcp_internal.h"

static const char *const state_names[] = {
    "CLOSED",     "LISTEN",     "SYN_SENT",   "SYN_RCVD", "ESTABLISHED", "FIN_WAIT_1",
    "FIN_WAIT_2", "CLOSE_WAIT", "CLOSING",    "LAST_ACK", "TIME_WAIT",
};

const char *zbuf_ip_tcp_state_name(zbuf_ip_tcp_state_t st)
{
    return (unsigned)st < sizeof state_names / sizeof state_names[0] ? state_names[st] : "?";
}

/* ------------------------------------------------------------- life cycle */

static void timers_stop(zbuf_ip_tcp_t *t)
{
    for (int k = 0; k < TCP_NTIMERS; k++)
        tcp_timer_stop(t, (enum tcp_timer)k);
}

void zbuf_ip__tcp_kill(zbuf_ip_tcp_t *t)
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
                zbuf_ip__tcp_kill(c);
            }
    t->dead = true;
    s->tcp_dead++;
    s->ntcp--; /* the slot is free now; the memory goes at the next reap */
    t->state = ZBUF_IP_TCP_CLOSED;
    timers_stop(t);
    t->output_pending = false;
    zbuf_delete(t->sndq);
    t->sndq = NULL;
    free(t->rq.rec);
    t->rq.rec = NULL;
    t->rq.n = t->rq.cap = 0;
    zbuf_ip__tcp_ooo_clear(t);
    tcp_mem_sub(t, &t->rmem.held_charge, t->rmem.held_charge);
    t->rmem.held = 0;
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
        zbuf_ip__tcp_kill(t);
    }
    s->acks_owed = NULL; /* owed by the dead */
    zbuf_ip__tcp_reap(s);
}

void zbuf_ip__tcp_fail(zbuf_ip_tcp_t *t, int err)
{
    if (t->dead)
        return;
    bool tell = !t->app_closed && t->listener == NULL && t->cb.error;
    zbuf_ip_tcp_callbacks_t cb = t->cb;
    void *arg = t->arg;
    zbuf_ip__tcp_kill(t);
    if (tell)
        cb.error(arg, err);
}

/* (TIME_WAIT over, LAST_ACK acknowledged, a RST in a closing state.) */
void zbuf_ip__tcp_finish(zbuf_ip_tcp_t *t)
{
    t->state = ZBUF_IP_TCP_CLOSED;
    timers_stop(t);
    if (t->app_closed)
        zbuf_ip__tcp_kill(t);
}

void zbuf_ip__tcp_defaults(zbuf_ip_stack_t *s, zbuf_ip_tcp_t *t)
{
    t->stack = s;
    t->born = s->now;
    t->snd_buf = s->cfg.tcp_snd_buf;
    t->rcv_buf = s->cfg.tcp_rcv_buf;
    t->rmem.limit = s->cfg.tcp_rcv_mem;
    /* Until segments tell, assume the window fits the memory exactly. */
    t->rmem.ratio = (uint32_t)((uint64_t)t->rcv_buf * 256 / t->rmem.limit);
    if (t->rmem.ratio < 1)
        t->rmem.ratio = 1;
    t->rtt.rto = ZBUF_IP_TCP_RTO_INIT_MS;
    t->mss = ZBUF_IP_TCP_DEFAULT_MSS;
    t->mss_clamp = ZBUF_IP_TCP_DEFAULT_MSS;
    t->pmtu = ZBUF_IP__MTU_DEFAULT;
    t->rtt.min = UINT32_MAX;
    t->rack.reo_wnd_mult = 1;
    t->cc.ops = &zbuf_ip__tcp_reno;
}

/* At the PCB limit, the one to recycle: the oldest TIME_WAIT connection
 * the application gave back (lwIP does the same: it has nothing left to
 * deliver), else the oldest half-open one whose SYN-ACK went unanswered
 * (early drop: most likely spoofed).  NULL if none. */
static zbuf_ip_tcp_t *pcb_victim(zbuf_ip_stack_t *s)
{
    zbuf_ip_tcp_t *victim = NULL, *half = NULL;
    for (zbuf_ip_tcp_t *t = s->tcps; t; t = t->next) {
        if (t->dead)
            continue;
        if (t->app_closed && t->state == ZBUF_IP_TCP_TIME_WAIT &&
            (victim == NULL || t->timer[TCP_T_2MSL] < victim->timer[TCP_T_2MSL]))
            victim = t;
        if (t->state == ZBUF_IP_TCP_SYN_RCVD && t->listener && t->nrexmit > 0 &&
            (half == NULL || t->born < half->born))
            half = t;
    }
    if (victim == NULL && half != NULL) {
        victim = half;
        s->st.tcp_half_open_drops++;
    }
    return victim;
}

zbuf_ip_tcp_t *zbuf_ip__tcp_alloc(zbuf_ip_stack_t *s)
{
    if (s->ntcp >= ZBUF_IP_TCP_PCBS) {
        zbuf_ip_tcp_t *victim = pcb_victim(s);
        if (victim == NULL) {
            s->st.tcp_pcb_limit++;
            return NULL;
        }
        victim->app_closed = true;
        zbuf_ip__tcp_kill(victim);
    }
    zbuf_ip_tcp_t *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    if (zbuf_create(&t->sndq) != 0) {
        free(t);
        return NULL;
    }
    zbuf_ip__tcp_defaults(s, t);
    t->next = s->tcps;
    s->tcps = t;
    s->ntcp++;
    return t;
}

/* The four-tuple in the bytes the keyed hashes take. */
static void tuple_bytes(uint8_t b[12], uint32_t laddr, uint16_t lport, uint32_t raddr,
                        uint16_t rport)
{
    put32(b, laddr);
    put16(b + 4, lport);
    put32(b + 6, raddr);
    put16(b + 10, rport);
}

int zbuf_ip__tcp_isn(zbuf_ip_stack_t *s, uint32_t laddr, uint16_t lport, uint32_t raddr,
                     uint16_t rport, uint32_t *isn)
{
    /* RFC 6528: ISN = M + F(4-tuple, key), M a 4-microsecond clock. */
    uint8_t b[12];
    tuple_bytes(b, laddr, lport, raddr, rport);
    *isn = (uint32_t)zbuf_ip__siphash(s->cfg.isn_key, b, sizeof b) + (uint32_t)(s->now * 250u);
    return 0;
}

/* RFC 7323 5.4: a keyed hash of the four-tuple (a different input from the
 * ISN's), so that TSvals reveal neither the stack's uptime nor other
 * connections' values. */
void zbuf_ip__tcp_ts_setup(zbuf_ip_tcp_t *t)
{
    uint8_t b[13];
    tuple_bytes(b, t->laddr, t->lport, t->raddr, t->rport);
    b[12] = 'T';
    t->ts.off = (uint32_t)zbuf_ip__siphash(t->stack->cfg.isn_key, b, sizeof b);
}

void zbuf_ip__tcp_set_orphan(zbuf_ip_tcp_t *t)
{
    t->orphan = true;
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
    zbuf_ip_tcp_t *t = zbuf_ip__tcp_alloc(s);
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

int zbuf_ip_tcp_bind(zbuf_ip_tcp_t *t, uint32_t addr, uint16_t port)
{
    if (t == NULL || t->dead || t->bound || t->state != ZBUF_IP_TCP_CLOSED)
        return -EINVAL;
    zbuf_ip_stack_t *s = t->stack;
    if (addr != ZBUF_IP_ANY && !zbuf_ip__is_local(s, addr))
        return -EADDRNOTAVAIL;
    if (port == 0)
        port = zbuf_ip__ephemeral(s, addr, port_in_use);
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
        lport = zbuf_ip__ephemeral(s, laddr, port_in_use);
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
    zbuf_ip__tcp_ts_setup(t);
    t->snd_una = t->iss;
    t->snd_max = t->iss + 1;
    t->recover = t->iss;
    t->rcv_wscale = our_wscale(t->rcv_buf);
    uint32_t m = nif->cfg.mtu - IP_HLEN - TCP_HLEN;
    t->pmtu = nif->cfg.mtu;
    t->mss = (uint16_t)umin32(m, ZBUF_IP_TCP_DEFAULT_MSS);
    t->state = ZBUF_IP_TCP_SYN_SENT;
    s->st.tcp_connects++;
    zbuf_ip__tcp_syn_start(t);
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
    zbuf_ip__tcp_output(t);
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
    if (n > t->rmem.held)
        n = t->rmem.held;
    uint32_t before = t->rcv_adv - t->rcv_nxt;
    if (SEQ_LT(t->rcv_adv, t->rcv_nxt))
        before = 0;
    /* The charge goes in proportion (all of it with the last byte): the
     * application returns bytes, not the zbufs they came in. */
    size_t c = n == t->rmem.held ? t->rmem.held_charge
                                 : (size_t)((uint64_t)t->rmem.held_charge * n / t->rmem.held);
    tcp_mem_sub(t, &t->rmem.held_charge, c);
    t->rmem.held -= n;
    uint32_t space = zbuf_ip__tcp_rcv_space(t);
    /* Tell the peer when this release grew the window by a quarter of the
     * buffer beyond what it knows, or it was nearly closed (so a
     * zero-window sender restarts quickly).  (Not for the growth past
     * the 65535 bytes a SYN could carry: the next ACK tells that.) */
    if (synchronized(t) && !t->fin_rcvd && space > before &&
        ((n >= t->rcv_buf / 4 && space - before >= t->rcv_buf / 4) || before < t->mss)) {
        t->ack_now = true;
        if (t->stack->depth == 0) {
            zbuf_ip__tick(t->stack);
            zbuf_ip__tcp_output(t);
        }
    }
}

void zbuf_ip_tcp_set_nodelay(zbuf_ip_tcp_t *t, bool nodelay)
{
    if (t)
        t->nodelay = nodelay;
}

int zbuf_ip_tcp_set_keepalive(zbuf_ip_tcp_t *t, uint32_t idle_ms, uint32_t interval_ms,
                              unsigned count)
{
    if (t == NULL || t->dead || (idle_ms && (interval_ms == 0 || count == 0)))
        return -EINVAL;
    t->keep.idle = idle_ms;
    t->keep.intvl = interval_ms;
    t->keep.count = count;
    tcp_timer_stop(t, TCP_T_KEEP);
    zbuf_ip__tick(t->stack);
    zbuf_ip__tcp_keep_touch(t);
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
    zbuf_ip__tcp_output(t);
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
        tcp_timer_set(t, TCP_T_2MSL, s->now + s->cfg.tcp_time_wait_ms);
        break;
    case ZBUF_IP_TCP_TIME_WAIT:
        break;
    case ZBUF_IP_TCP_SYN_RCVD:
    case ZBUF_IP_TCP_SYN_SENT:
        zbuf_ip_tcp_abort(t);
        return;
    default: /* CLOSED, LISTEN */
        zbuf_ip__tcp_kill(t);
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
        zbuf_ip__tcp_emit(t, t->snd_max, TCP_RST | TCP_ACK, 0, 0);
    t->app_closed = true;
    zbuf_ip__tcp_kill(t);
    if (s->depth == 0)
        zbuf_ip__tcp_reap(s);
}

zbuf_ip_tcp_state_t zbuf_ip_tcp_state(const zbuf_ip_tcp_t *t)
{
    return t ? (zbuf_ip_tcp_state_t)t->state : ZBUF_IP_TCP_CLOSED;
}

int zbuf_ip_tcp_output(zbuf_ip_tcp_t *t)
{
    if (t == NULL || t->dead)
        return -EINVAL;
    zbuf_ip__tick(t->stack);
    zbuf_ip__tcp_output(t);
    return 0;
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
    out->cwnd = t->cc.cwnd;
    out->ssthresh = t->cc.ssthresh;
    out->snd_wnd = t->snd_wnd;
    out->rcv_wnd = SEQ_LT(t->rcv_adv, t->rcv_nxt) ? 0 : t->rcv_adv - t->rcv_nxt;
    out->srtt_ms = t->rtt.srtt8 >> 3;
    out->rto_ms = t->rtt.rto;
    out->unacked = zbuf_length(t->sndq);
    out->ooo_bytes = t->ooo.bytes;
    out->retransmits = t->retransmits;
    out->ts_ok = t->ts.ok;
    out->sack_ok = t->sack_ok;
    out->min_rtt_ms = t->rtt.min;
    out->lost_bytes = t->rq.lost_out;
    out->sacked_bytes = t->rq.sacked_out;
    out->rcv_mem = t->rmem.held_charge + t->rmem.ooo_charge;
    out->pmtu = t->pmtu;
    out->syncookie = t->cookie;
    return 0;
}
