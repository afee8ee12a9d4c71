/* SPDX-License-Identifier: MIT */
/*
 * NewReno congestion control (RFC 5681, RFC 6582) behind struct
 * zbuf_ip__tcp_cc, with appropriate byte counting (RFC 3465): slow start
 * grows cwnd by the bytes each ACK acknowledges (up to ssthresh, the rest
 * counts for congestion avoidance), congestion avoidance by one segment
 * per cwnd bytes acknowledged, and half the flight after a loss.  Counting
 * bytes rather than ACKs keeps the growth per round trip whatever the
 * receiver's ACK rate: stretch ACKs (a receiver acknowledging a receive
 * batch at once, as this stack and Linux with GRO do) grow it as fast as
 * an ACK per segment.  Unlike RFC 3465's L limit, and like Linux, one ACK
 * may grow cwnd by more than two segments, except in the slow start after a
 * timeout while the flight it gave up on is acknowledged (one segment per
 * ACK there, RFC 3465 2.3).  What happens inside fast recovery (PRR) and
 * after a timeout is the core's (tcp_recovery.c), the same for every
 * algorithm.
 */
#include "tcp_internal.h"

/* cc.priv[0]: bytes acknowledged in congestion avoidance since cwnd last
 * grew. */
static void reno_init(zbuf_ip_tcp_t *t)
{
    t->cc.cwnd = (uint32_t)t->mss * ZBUF_IP_TCP_INIT_CWND;
    t->cc.ssthresh = 0x7fffffff; /* no loss yet: slow start until one */
    t->cc.priv[0] = 0;
}

/* Half the flight, at least two segments (RFC 5681 (4)). */
static uint32_t reno_ssthresh(zbuf_ip_tcp_t *t)
{
    uint32_t flight = t->snd_max - t->snd_una;
    t->cc.priv[0] = 0;
    return flight / 2 > 2u * t->mss ? flight / 2 : 2u * t->mss;
}

static void reno_on_ack(zbuf_ip_tcp_t *t, uint32_t acked, bool losses)
{
    if (t->cc.after_rto && !SEQ_LT(t->snd_una, t->recover))
        t->cc.after_rto = false;
    if (t->cc.cwnd < t->cc.ssthresh) {
        uint32_t grow = umin32(acked, t->cc.ssthresh - t->cc.cwnd); /* slow start */
        if (t->cc.after_rto && grow > t->mss)
            grow = t->mss; /* the flight the timeout gave up on: no bursts */
        t->cc.cwnd += grow;
        acked -= grow;
    }
    if (acked == 0 || losses || t->cc.cwnd < t->cc.ssthresh)
        return;
    /* Congestion avoidance: a segment per cwnd bytes acknowledged. */
    t->cc.priv[0] += acked;
    if (t->cc.priv[0] >= t->cc.cwnd) {
        t->cc.priv[0] -= t->cc.cwnd;
        t->cc.cwnd += t->mss;
    }
}

const struct zbuf_ip__tcp_cc zbuf_ip__tcp_reno = {
    .name = "newreno",
    .init = reno_init,
    .ssthresh = reno_ssthresh,
    .on_ack = reno_on_ack,
};
