/* SPDX-License-Identifier: MIT */
/*
 * Round-trip estimation and congestion control, each behind a small
 * interface so that the connection code only says what happened.
 *
 * RTT: RFC 6298 (SRTT, RTTVAR, RTO = SRTT + max(G, 4 RTTVAR), clamped),
 * fed with timestamp-echo samples, which stay valid for retransmitted
 * segments (as with TCP timestamps, RFC 7323), so Karn's rule is not needed.
 *
 * Congestion control: RFC 5681 in whole segments (slow start from an
 * initial window of 10 segments as in RFC 6928, congestion avoidance of one
 * segment per window acknowledged), entered loss recovery halves the window
 * once per window of data (RFC 6582's recovery point), a timeout restarts
 * from one segment.  The loss detection that drives it (SACK scoreboard,
 * RACK-style time threshold) lives in stream.c, as RFC 6675 separates it.
 */
#include <stdint.h>

#include "internal.h"

#define RTT_G_US 1000u          /* clock granularity term of RFC 6298 */
#define CC_INITIAL_WINDOW 10u   /* RFC 6928 */
#define CC_MIN_WINDOW 2u

static uint32_t clamp(uint64_t v, uint32_t lo, uint32_t hi)
{
    return v < lo ? lo : v > hi ? hi : (uint32_t)v;
}

void zbuf__us_rtt_init(struct zus_rtt *r, uint32_t initial_us, uint32_t min_us, uint32_t max_us)
{
    *r = (struct zus_rtt){.rto_min_us = min_us, .rto_max_us = max_us, .min_us = UINT32_MAX};
    r->rto_us = clamp(initial_us, min_us, max_us);
}

void zbuf__us_rtt_sample(struct zus_rtt *r, uint32_t m)
{
    if (m == 0)
        m = 1;
    if (m < r->min_us)
        r->min_us = m;
    if (r->srtt_us == 0) {
        r->srtt_us = m;
        r->rttvar_us = m / 2;
    } else {
        uint32_t err = m > r->srtt_us ? m - r->srtt_us : r->srtt_us - m;
        r->rttvar_us = (uint32_t)(((uint64_t)r->rttvar_us * 3 + err) / 4);
        r->srtt_us = (uint32_t)(((uint64_t)r->srtt_us * 7 + m) / 8);
    }
    uint64_t var = (uint64_t)r->rttvar_us * 4;
    r->rto_us = clamp(r->srtt_us + (var > RTT_G_US ? var : RTT_G_US), r->rto_min_us,
                      r->rto_max_us);
}

void zbuf__us_cc_init(struct zus_cc *c, bool off)
{
    *c = (struct zus_cc){.off = off, .cwnd = off ? UINT32_MAX : CC_INITIAL_WINDOW,
                         .ssthresh = UINT32_MAX};
}

void zbuf__us_cc_on_ack(struct zus_cc *c, uint32_t acked, uint32_t una)
{
    if (c->off)
        return;
    if (c->recovery) {
        if (zus_diff(una, c->recover) < 0)
            return; /* the window stays reduced until the recovery point is acked */
        c->recovery = false;
    }
    if (c->cwnd < c->ssthresh) {
        uint32_t room = c->ssthresh - c->cwnd;
        uint32_t grow = acked < room ? acked : room;
        c->cwnd += grow;
        acked -= grow;
    }
    c->acc += acked;
    while (c->cwnd > 0 && c->acc >= c->cwnd) {
        c->acc -= c->cwnd;
        c->cwnd++;
    }
    if (c->cwnd > (1u << 20))
        c->cwnd = 1u << 20;
}

void zbuf__us_cc_on_loss(struct zus_cc *c, uint32_t flight, uint32_t snd_nxt)
{
    if (c->off || c->recovery)
        return;
    uint32_t half = flight / 2;
    c->ssthresh = half > CC_MIN_WINDOW ? half : CC_MIN_WINDOW;
    c->cwnd = c->ssthresh;
    c->acc = 0;
    c->recovery = true;
    c->recover = snd_nxt;
}

void zbuf__us_cc_on_timeout(struct zus_cc *c, uint32_t flight)
{
    if (c->off)
        return;
    uint32_t half = flight / 2;
    c->ssthresh = half > CC_MIN_WINDOW ? half : CC_MIN_WINDOW;
    c->cwnd = 1;
    c->acc = 0;
    c->recovery = false;
}
