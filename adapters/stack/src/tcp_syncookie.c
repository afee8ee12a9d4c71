/* SPDX-License-Identifier: MIT */
/*
 * SYN cookies: a listener whose backlog is full (or that finds no free PCB)
 * answers a SYN without keeping anything, and rebuilds the connection from
 * the ACK that comes back (<zbuf/ip_opts.h>, "SYN flood").
 *
 * Linux's scheme: the top 8 bits of the cookie (our ISN) carry a 64-second
 * counter, the low 24 a keyed hash of the connection and that counter plus
 * the index of the peer's MSS in cookie_mss[].  Window scale and
 * SACK-permitted ride in the low 6 bits of our TSval, which the peer
 * echoes; without timestamps neither is offered.  A cookie ACK is taken
 * only if the listener sent cookies lately.
 */
#include "tcp_internal.h"

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

void zbuf_ip__tcp_cookie_answer(zbuf_ip_tcp_t *l, const struct tcp_seg *sg, uint32_t src,
                                uint32_t dst)
{
    zbuf_ip_stack_t *s = l->stack;
    /* A stand-in PCB, never linked: zbuf_ip__tcp_emit() builds the SYN-ACK
     * from it exactly as it would for a real half-open connection. */
    zbuf_ip_tcp_t t;
    memset(&t, 0, sizeof t);
    zbuf_ip__tcp_defaults(s, &t);
    zbuf_ip__tcp_child_init(l, &t, sg, src, dst, 0, false);
    unsigned idx = 3;
    uint32_t peer = sg->has_mss ? sg->mss : ZBUF_IP_TCP_DEFAULT_MSS;
    while (idx > 0 && peer < cookie_mss[idx])
        idx--;
    t.iss = cookie_make(&t, idx);
    if (t.ts.ok) {
        uint32_t now = ts_val(&t, s->now);
        uint32_t opts = (t.ws_ok ? t.snd_wscale : COOKIE_TS_NO_WS) | (t.sack_ok ? COOKIE_TS_SACK : 0);
        uint32_t v = (now & ~((1u << COOKIE_TS_BITS) - 1)) | opts;
        if (SEQ_GT(v, now))
            v -= 1u << COOKIE_TS_BITS; /* never ahead of the clock the peer will see next */
        t.ts.syn_val = v;
        t.ts.syn_set = true;
    } else {
        /* Nowhere to keep them: offer neither window scaling nor SACK. */
        t.ws_ok = t.sack_ok = false;
        t.rcv_wscale = t.snd_wscale = 0;
    }
    zbuf_ip__tcp_emit(&t, t.iss, TCP_SYN | TCP_ACK, 0, 0);
    l->cookies_sent = true;
    l->cookies_at = s->now;
    s->st.tcp_syncookies_sent++;
}

/* The SYN that cookie index `idx` and the ACK `sg` describe, as far as the
 * cookie kept it.  False when the echoed options are not ours. */
static bool cookie_syn(const zbuf_ip_stack_t *s, const struct tcp_seg *sg, int idx,
                       struct tcp_seg *syn)
{
    memset(syn, 0, sizeof *syn);
    syn->sport = sg->sport;
    syn->dport = sg->dport;
    syn->seq = sg->seq - 1;
    syn->flags = TCP_SYN;
    syn->has_mss = true;
    syn->mss = cookie_mss[idx];
    if (sg->has_ts && !s->cfg.tcp_no_timestamps) {
        uint32_t o = sg->tsecr & ((1u << COOKIE_TS_BITS) - 1);
        if ((o & COOKIE_TS_NO_WS) != COOKIE_TS_NO_WS) {
            if ((o & COOKIE_TS_NO_WS) > ZBUF_IP_TCP_MAX_WSCALE)
                return false;
            syn->has_ws = true;
            syn->ws = (uint8_t)(o & COOKIE_TS_NO_WS);
        }
        syn->has_sackok = (o & COOKIE_TS_SACK) != 0;
        syn->has_ts = true;
        syn->tsval = sg->tsval;
    }
    return true;
}

/* Taken: a connection made and `z` processed on it, or dropped for lack
 * of a PCB. */
bool zbuf_ip__tcp_cookie_accept(zbuf_ip_tcp_t *l, zbuf_t *z, struct tcp_seg *sg, uint32_t src,
                                uint32_t dst)
{
    zbuf_ip_stack_t *s = l->stack;
    if (s->cfg.tcp_no_syncookies || !l->cookies_sent ||
        s->now - l->cookies_at >= ZBUF_IP_TCP_COOKIE_AGE_MS || (sg->flags & (TCP_SYN | TCP_RST)))
        return false;
    int idx = cookie_check(s, dst, sg->dport, src, sg->sport, sg->seq - 1, sg->ack - 1);
    struct tcp_seg syn;
    if (idx < 0 || !cookie_syn(s, sg, idx, &syn)) {
        s->st.tcp_syncookies_failed++;
        return false;
    }
    zbuf_ip_tcp_t *t = zbuf_ip__tcp_alloc(s);
    if (t == NULL) {
        zbuf_delete(z); /* no room: the peer sends again */
        return true;
    }
    zbuf_ip__tcp_child_init(l, t, &syn, src, dst, sg->ack - 1, true);
    t->cookie = true;
    zbuf_ip__tcp_rcv_window(t, true); /* the edge the cookie's SYN-ACK advertised (same state) */
    s->st.tcp_syncookies_ok++;
    zbuf_ip__tcp_conn_input(t, z, sg); /* the handshake completes as for a kept SYN */
    if (!t->dead && t->state == ZBUF_IP_TCP_SYN_RCVD) {
        /* The ACK was not taken after all (PAWS, a bad ACK number): this
         * half-open connection has no SYN-ACK to retransmit, so no timer
         * would ever end it. */
        t->app_closed = true;
        zbuf_ip__tcp_kill(t);
    }
    return true;
}
