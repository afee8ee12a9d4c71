/* SPDX-License-Identifier: MIT */
/*
 * TCP's receive side: what received payload costs, its delivery to the
 * application, the out-of-order queue, and the SACK (RFC 2018) and D-SACK
 * (RFC 2883) blocks our ACKs carry.
 *
 * Receive memory (<zbuf/ip_opts.h>, ZBUF_IP_TCP_RCV_MEM_MULT).  A
 * connection is charged what its received payload pins, as Linux charges
 * an skb's truesize: the out-of-order queue, and what was delivered and not
 * yet released with zbuf_ip_tcp_recved(), each segment at its buffer (at
 * most ZBUF_IP__SLACK beyond its bytes) plus ZBUF_IP__SEG_COST of
 * descriptors.  Over the limit a segment is copied compact if that fits,
 * else the out-of-order queue is pruned from its far end, else the segment
 * is dropped (the peer sends it again).  The window advertised follows the
 * memory left at the payload-to-charge ratio seen on the connection
 * (Linux's scaling_ratio), so a peer sending tiny segments sees a smaller
 * window instead of drops.
 *
 * SACK: SACK-permitted is offered (and answered) because this side really
 * works: every ACK sent while the out-of-order queue holds data carries
 * blocks built from that queue, the latest arrival's block first, so a
 * Linux sender recovers several losses per round trip instead of stalling
 * on timeouts.  Data segments shrink to carry the blocks too (tcp_out.c,
 * send_mss()).  A duplicate segment is reported by a D-SACK block first,
 * so that the sender can undo a spurious retransmission.
 */
#include <stdlib.h>

#include "tcp_internal.h"

#define SACK_OPT_HDR 4 /* NOP NOP kind length, in front of the blocks */

/* ------------------------------------------------------ receive memory */

/* Room for more received bytes: what the application left of the window,
 * and what the receive memory left can hold at the payload-to-charge ratio
 * seen on this connection. */
uint32_t zbuf_ip__tcp_rcv_space(const zbuf_ip_tcp_t *t)
{
    uint32_t space = t->rmem.held >= t->rcv_buf ? 0 : t->rcv_buf - (uint32_t)t->rmem.held;
    uint64_t mem = t->rmem.held_charge >= t->rmem.limit ? 0 : t->rmem.limit - t->rmem.held_charge;
    uint64_t by_mem = mem * t->rmem.ratio / 256;
    return by_mem < space ? (uint32_t)by_mem : space;
}

/* The ratio the window follows: what this peer's segments cost, over 16
 * segments at a time (no division per segment). */
static void ratio_note(zbuf_ip_tcp_t *t, size_t len, size_t charge)
{
    t->rmem.ratio_len += len;
    t->rmem.ratio_charge += charge;
    if (++t->rmem.ratio_n == 16) {
        uint64_t sample = t->rmem.ratio_len * 256 / t->rmem.ratio_charge;
        t->rmem.ratio = (uint32_t)((t->rmem.ratio * 3 + (sample > 256 ? 256 : sample)) / 4);
        if (t->rmem.ratio < 1)
            t->rmem.ratio = 1;
        t->rmem.ratio_len = t->rmem.ratio_charge = 0;
        t->rmem.ratio_n = 0;
    }
}

static bool rmem_fits(const zbuf_ip_tcp_t *t, size_t charge)
{
    return t->rmem.held_charge + t->rmem.ooo_charge + charge <= t->rmem.limit;
}

static bool ooo_prune_tail(zbuf_ip_tcp_t *t, uint32_t above, bool any);

/* The pool's policy first (zbuf_ip__rx_hold()), then the connection's
 * limit: over it, a compact copy if that is cheaper, then the out-of-order
 * queue's far end goes.  Returns the charge, or 0 when `z` must be dropped
 * (counted; the caller deletes it). */
size_t zbuf_ip__tcp_rcv_admit(zbuf_ip_tcp_t *t, zbuf_t *z, bool ooo, uint32_t seq)
{
    zbuf_ip_stack_t *s = t->stack;
    if (zbuf_ip__rx_hold(s, z, ooo) != 0)
        return 0;
    /* The most a segment can pin, without looking at its buffers; the
     * exact charge only near the limit. */
    size_t len = zbuf_length(z);
    size_t c = len + (ZBUF_IP__SLACK + ZBUF_IP__SEG_COST) * zbuf_seg_count(z);
    if (!rmem_fits(t, c))
        c = zbuf_ip__charge(z);
    ratio_note(t, len, c);
    if (rmem_fits(t, c))
        return c;
    /* Over the limit: what a compact copy would cost, then room made by
     * pruning; copy only if it then fits. */
    size_t compact = len + ZBUF_IP__SEG_COST;
    size_t need = compact < c ? compact : c;
    while (!rmem_fits(t, need) && ooo_prune_tail(t, seq, !ooo))
        ;
    if (!rmem_fits(t, need)) {
        s->st.tcp_rcv_mem_drops++;
        return 0;
    }
    if (!rmem_fits(t, c)) {
        if (zbuf_ip__collapse(s, z) != 0) {
            s->st.tcp_rcv_mem_drops++;
            return 0;
        }
        c = zbuf_ip__charge(z);
    }
    return c;
}

/* Charged `charge` until zbuf_ip_tcp_recved(). */
void zbuf_ip__tcp_deliver(zbuf_ip_tcp_t *t, zbuf_t *z, size_t charge)
{
    size_t n = zbuf_length(z);
    t->rcv_nxt += (uint32_t)n;
    t->stack->st.tcp_rx_payload += n;
    if (!rcv_keeps(t)) {
        zbuf_delete(z); /* nobody reads: consume it right away */
        return;
    }
    t->rmem.held += n;
    tcp_mem_add(t, &t->rmem.held_charge, charge);
    t->cb.recv(t->arg, t, z);
}

/* ------------------------------------------------- out-of-order queue */

/* Take entry *pp out of the queue and out of the receive memory; the
 * caller owns it (and its zbuf) now. */
static struct ooo *ooo_pop(zbuf_ip_tcp_t *t, struct ooo **pp)
{
    struct ooo *o = *pp;
    *pp = o->next;
    t->ooo.n--;
    t->ooo.bytes -= o->len;
    tcp_mem_sub(t, &t->rmem.ooo_charge, o->charge);
    return o;
}

/* Unlink and free entry *pp. */
static void ooo_unlink(zbuf_ip_tcp_t *t, struct ooo **pp)
{
    struct ooo *o = ooo_pop(t, pp);
    zbuf_delete(o->z);
    free(o);
}

void zbuf_ip__tcp_ooo_clear(zbuf_ip_tcp_t *t)
{
    while (t->ooo.head)
        ooo_unlink(t, &t->ooo.head);
}

/* Drop the entry farthest ahead, if it starts after `above` (any, for
 * `any`).  Returns whether one went. */
static bool ooo_prune_tail(zbuf_ip_tcp_t *t, uint32_t above, bool any)
{
    struct ooo **pp = &t->ooo.head;
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

/* The reserve of a receive pool was reached (stack.c): free the
 * out-of-order segments that pin pool buffers. */
void zbuf_ip__tcp_prune(zbuf_ip_stack_t *s)
{
    for (zbuf_ip_tcp_t *t = s->tcps; t; t = t->next) {
        if (t->dead)
            continue;
        for (struct ooo **pp = &t->ooo.head; *pp;) {
            if (zbuf_ip__pinned((*pp)->z) > (*pp)->len) { /* not a compact copy */
                ooo_unlink(t, pp);
                s->st.tcp_ooo_pruned++;
            } else {
                pp = &(*pp)->next;
            }
        }
    }
}

/* Tell the peer in the next ACK (RFC 2883), so that it can undo a spurious
 * retransmission. */
void zbuf_ip__tcp_note_dsack(zbuf_ip_tcp_t *t, uint32_t lo, uint32_t hi)
{
    if (!t->sack_ok || lo == hi)
        return;
    t->dsack.pending = true;
    t->dsack.lo = lo;
    t->dsack.hi = hi;
}

/* Bytes [seq, end) are all queued already: drop them, and report the
 * duplicate (its run is the second block, RFC 2883). */
static void ooo_duplicate(zbuf_ip_tcp_t *t, zbuf_t *z, uint32_t seq, uint32_t end)
{
    zbuf_delete(z);
    if (seq != end) {
        zbuf_ip__tcp_note_dsack(t, seq, end);
        t->ooo.last = seq;
    }
}

void zbuf_ip__tcp_ooo_insert(zbuf_ip_tcp_t *t, uint32_t seq, zbuf_t *z, bool fin)
{
    zbuf_ip_stack_t *s = t->stack;
    uint32_t len = (uint32_t)zbuf_length(z);
    uint32_t end = seq + len;
    struct ooo **pp = &t->ooo.head, *prev = NULL;
    while (*pp && SEQ_LT((*pp)->seq, seq)) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    /* Trim what the queue holds already: the tail of the segment before,
     * the same bytes at the same place, segments this one covers, and the
     * start of the segment after. */
    if (prev) {
        uint32_t pend = prev->seq + prev->len;
        if (SEQ_GEQ(pend, end) && !(fin && pend == end && !prev->fin)) {
            ooo_duplicate(t, z, seq, end);
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
        ooo_duplicate(t, z, seq, end);
        return;
    }
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
    if (t->ooo.n < ZBUF_IP_TCP_OOO_SEGS && (charge = zbuf_ip__tcp_rcv_admit(t, z, true, seq)) != 0)
        o = malloc(sizeof *o);
    if (o == NULL) {
        s->st.tcp_ooo_drops++;
        zbuf_delete(z);
        return;
    }
    /* The admission may have pruned entries past this one: find the place
     * again (those before it are untouched). */
    for (pp = &t->ooo.head; *pp && SEQ_LT((*pp)->seq, seq);)
        pp = &(*pp)->next;
    o->seq = seq;
    o->len = len;
    o->charge = (uint32_t)charge;
    tcp_mem_add(t, &t->rmem.ooo_charge, charge);
    o->fin = fin;
    o->z = z;
    o->next = *pp;
    *pp = o;
    t->ooo.n++;
    t->ooo.bytes += len;
    t->ooo.last = seq;
    s->st.tcp_ooo_queued++;
}

void zbuf_ip__tcp_ooo_drain(zbuf_ip_tcp_t *t)
{
    while (!t->dead && t->ooo.head && SEQ_LEQ(t->ooo.head->seq, t->rcv_nxt)) {
        struct ooo *o = ooo_pop(t, &t->ooo.head);
        size_t charge = o->charge;
        uint32_t start = o->seq, end = o->seq + o->len;
        bool fin = o->fin;
        zbuf_t *z = o->z;
        free(o);
        if (SEQ_GT(end, t->rcv_nxt)) {
            if (t->rcv_nxt != start)
                zbuf_cut(z, 0, t->rcv_nxt - start, NULL);
            zbuf_ip__tcp_deliver(t, z, charge); /* admitted when it was queued */
        } else {
            zbuf_delete(z);
        }
        if (fin && !t->dead && end == t->rcv_nxt)
            zbuf_ip__tcp_take_fin(t);
    }
}

/* ------------------------------------------------------- SACK blocks */

/* At most this many blocks fit one header: 4, 3 beside timestamps. */
static unsigned sack_blocks_max(const zbuf_ip_tcp_t *t)
{
    return t->ts.ok ? 3 : TCP_SACK_BLOCKS_MAX;
}

uint32_t zbuf_ip__tcp_sack_len(const zbuf_ip_tcp_t *t)
{
    unsigned runs = 0, lim = sack_blocks_max(t);
    for (const struct ooo *q = t->ooo.head; q && runs < lim; q = q->next)
        if (q->next == NULL || q->next->seq != q->seq + q->len)
            runs++;
    if (t->dsack.pending && runs < lim)
        runs++;
    return SACK_OPT_HDR + TCP_OPT_SACK_BLOCK * runs;
}

/* The option describes the out-of-order queue: a D-SACK block first if a
 * duplicate arrived, contiguous runs of queued segments, the run holding
 * the latest arrival first, then the others in sequence order; as many as
 * fit beside `len` payload bytes in one MSS (t->mss already leaves room
 * for the timestamps).  Writes NOP NOP kind len blocks... into `o`,
 * returns its length (0 if no block fits). */
size_t zbuf_ip__tcp_sack_option(zbuf_ip_tcp_t *t, uint8_t *o, size_t len)
{
    size_t room = t->mss > len + SACK_OPT_HDR ? (t->mss - len - SACK_OPT_HDR) / TCP_OPT_SACK_BLOCK
                                              : 0;
    unsigned lim = sack_blocks_max(t);
    unsigned max = room < lim ? (unsigned)room : lim;
    if (max == 0)
        return 0;
    /* A duplicate segment arrived: its block goes first, once; the blocks
     * of the queue follow. */
    unsigned k = 0;
    if (t->dsack.pending) {
        put32(o + SACK_OPT_HDR, t->dsack.lo);
        put32(o + SACK_OPT_HDR + 4, t->dsack.hi);
        k = 1;
        t->dsack.pending = false;
        t->stack->st.tcp_dsack_tx++;
    }
    /* Walk the runs of adjacent segments: keep the one holding the latest
     * arrival and the first three others (constant stack, any queue size). */
    uint32_t blk[TCP_SACK_BLOCKS_MAX][2];
    unsigned n = 1;
    bool have_first = false;
    const struct ooo *q = t->ooo.head;
    while (q) {
        uint32_t lo = q->seq, hi = q->seq + q->len;
        for (q = q->next; q && q->seq == hi; q = q->next)
            hi = q->seq + q->len;
        if (lo == hi)
            continue;
        if (!have_first && SEQ_GEQ(t->ooo.last, lo) && SEQ_LT(t->ooo.last, hi)) {
            blk[0][0] = lo;
            blk[0][1] = hi;
            have_first = true;
        } else if (n < TCP_SACK_BLOCKS_MAX) {
            blk[n][0] = lo;
            blk[n][1] = hi;
            n++;
        }
    }
    unsigned start = have_first ? 0 : 1; /* no run holds it: report the others */
    for (unsigned i = start; i < n && k < max; i++, k++) {
        put32(o + SACK_OPT_HDR + TCP_OPT_SACK_BLOCK * k, blk[i][0]);
        put32(o + SACK_OPT_HDR + 4 + TCP_OPT_SACK_BLOCK * k, blk[i][1]);
    }
    if (k == 0)
        return 0;
    o[0] = TCP_OPT_NOP;
    o[1] = TCP_OPT_NOP;
    o[2] = TCP_OPT_SACK;
    o[3] = (uint8_t)(2 + TCP_OPT_SACK_BLOCK * k);
    return SACK_OPT_HDR + TCP_OPT_SACK_BLOCK * k;
}
