/* SPDX-License-Identifier: MIT */
/*
 * NewReno congestion control (RFC 5681, RFC 6582) behind struct
 * zbuf_ip__tcp_cc: slow start with an increase of at most one segment per
 * ACK (L = 1 SMSS, also after a timeout), congestion avoidance of about one
 * segment per round trip, and half the flight after a loss.  What happens
 * inside fast recovery (PRR) and after a timeout is the core's
 * (tcp_recovery.c), the same for every algorithm.
 */
#include "tcp_internal.h"

static void reno_init(zbuf_ip_tcp_t *t)
{
    t->cc.cwnd = (uint32_t)t->mss * ZBUF_IP_TCP_INIT_CWND;
    t->cc.ssthresh = 0x7fffffff; /* no loss yet: slow start until one */
}

/* Half the flight, at least two segments (RFC 5681 (4)). */
static uint32_t reno_ssthresh(zbuf_ip_tcp_t *t)
{
    uint32_t flight = t->snd_max - t->snd_una;
    return flight / 2 > 2u * t->mss ? flight / 2 : 2u * t->mss;
}

static void reno_on_ack(zbuf_ip_tcp_t *t, uint32_t acked, bool losses)
{
    if (t->cc.cwnd < t->cc.ssthresh) {
        t->cc.cwnd += umin32(acked, t->mss); /* slow start */
    } else if (!losses) {
        /* Congestion avoidance: mss * mss / cwnd per ACK, rounded up. */
        t->cc.cwnd += umin32(acked, (uint32_t)((uint64_t)t->mss * t->mss /
                                               (t->cc.cwnd ? t->cc.cwnd : 1)) + 1);
    }
}

const struct zbuf_ip__tcp_cc zbuf_ip__tcp_reno = {
    .name = "newreno",
    .init = reno_init,
    .ssthresh = reno_ssthresh,
    .on_ack = reno_on_ack,
};
