/* SPDX-License-Identifier: MIT */
/* Loss recovery (RACK-TLP, SACK, PRR) and timestamps (RFC 7323) against a
 * crafted peer that offers what Linux offers: MSS, SACK-permitted,
 * timestamps, window scale.  Time is the harness's virtual clock; the peer
 * answers 10 ms after each flight. */
#include <stdio.h>
#include <stdlib.h>
#include "support.h"
#include "tcpfix.h"

ZT_SUITE(recovery);

#define PEER_ISN 5000u
#define RTT_MS 10u
#define SEG 1448u /* 1460 less the timestamps option */

/* The crafted peer: its TSval advances by one per millisecond. */
typedef struct peer {
    zh_single_t u;
    ep_t e;
    uint32_t iss;      /* our ISS */
    uint32_t tsecr;    /* the stack's latest TSval, echoed back */
    bool no_ts;        /* the peer does not do timestamps */
    uint32_t seg;      /* payload of a full segment */
} peer_t;

static uint32_t peer_tsval(const peer_t *p)
{
    return (uint32_t)p->u.now * 3u + 7u;
}

/* Send a segment from the peer: timestamps unless no_ts, SACK blocks when
 * `nsack` > 0 (pairs of byte offsets from our ISS + 1). */
static int peer_send(peer_t *p, uint32_t seq, uint32_t ack, uint8_t flags, uint32_t tsval,
                     const uint32_t (*sack)[2], int nsack, const char *data)
{
    uint8_t o[40] = {1, 1, 8, 10};
    o[4] = (uint8_t)(tsval >> 24), o[5] = (uint8_t)(tsval >> 16);
    o[6] = (uint8_t)(tsval >> 8), o[7] = (uint8_t)tsval;
    o[8] = (uint8_t)(p->tsecr >> 24), o[9] = (uint8_t)(p->tsecr >> 16);
    o[10] = (uint8_t)(p->tsecr >> 8), o[11] = (uint8_t)p->tsecr;
    size_t n = 12;
    if (p->no_ts)
        n = 0;
    if (nsack > 0) {
        o[n++] = 1;
        o[n++] = 1;
        o[n++] = 5;
        o[n++] = (uint8_t)(2 + 8 * nsack);
        for (int b = 0; b < nsack; b++)
            for (int w = 0; w < 2; w++, n += 4) {
                uint32_t v = p->iss + 1 + sack[b][w];
                o[n] = (uint8_t)(v >> 24), o[n + 1] = (uint8_t)(v >> 16);
                o[n + 2] = (uint8_t)(v >> 8), o[n + 3] = (uint8_t)v;
            }
    }
    uint8_t f[2048];
    size_t len = zh_tcp_frame(f, 4000, 80, seq, ack, flags, 65535, o, n, (const uint8_t *)data,
                              data ? strlen(data) : 0);
    return zh_input(&p->u, f, len, 0);
}

/* An ACK from the peer of our byte offset `acked`, with SACK blocks. */
static void peer_ack(peer_t *p, uint32_t acked, const uint32_t (*sack)[2], int nsack)
{
    peer_send(p, PEER_ISN + 1, p->iss + 1 + acked, 0x10, peer_tsval(p), sack, nsack, NULL);
}

/* Remember the TSval of the latest segment the stack sent (to echo it). */
static void peer_note(peer_t *p)
{
    for (int i = 0; i < p->u.ntx; i++) {
        zh_tcp_seg_t s;
        if (zh_tx_tcp(&p->u, i, &s) && s.has_ts)
            p->tsecr = s.tsval;
    }
}

/* The handshake; `ts`: the peer offers timestamps (else MSS, SACK and
 * window scale only, and segments of 1460 bytes). */
static void peer_open_ts(peer_t *p, bool ts)
{
    memset(p, 0, sizeof *p);
    p->no_ts = !ts;
    p->seg = ts ? SEG : SEG + 12;
    zh_single_init(&p->u, NULL);
    ep_listen(&p->e, p->u.s, 80);
    zh_learn_peer(&p->u);
    static const uint8_t syn_opts[20] = {
        2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0, 0, 0, 100, 0, 0, 0, 0, 1, 3, 3, 7,
    };
    static const uint8_t syn_opts_nots[12] = {2, 4, 0x05, 0xb4, 1, 1, 4, 2, 1, 3, 3, 7};
    uint8_t f[256];
    size_t n = zh_tcp_frame(f, 4000, 80, PEER_ISN, 0, 0x02, 65535, ts ? syn_opts : syn_opts_nots,
                            ts ? sizeof syn_opts : sizeof syn_opts_nots, NULL, 0);
    zh_input(&p->u, f, n, 0);
    zh_tcp_seg_t sa;
    cr_assert(zh_tx_tcp(&p->u, 0, &sa));
    cr_assert_eq(sa.has_ts, ts, "timestamps answered in the SYN-ACK if offered");
    cr_assert_eq(sa.tsecr, ts ? 100 : 0);
    p->iss = sa.seq;
    p->tsecr = sa.tsval;
    zh_single_clear(&p->u);
    p->u.now += RTT_MS;
    peer_send(p, PEER_ISN + 1, p->iss + 1, 0x10, peer_tsval(p), NULL, 0, NULL);
    cr_assert_eq(p->e.accepted, 1);
    zbuf_ip_tcp_info_t in;
    zbuf_ip_tcp_info(p->e.pcb, &in);
    cr_assert(in.ts_ok == ts && in.sack_ok);
    cr_assert_eq(in.mss, ts ? SEG : SEG + 12);
    cr_assert_eq(in.srtt_ms, RTT_MS, "handshake RTT");
}

static void peer_open(peer_t *p)
{
    peer_open_ts(p, true);
}

static void peer_close(peer_t *p)
{
    zbuf_ip_tcp_abort(p->e.pcb);
    zbuf_ip_tcp_close(p->e.listener);
    ep_fini(&p->e);
    zh_single_fini(&p->u);
}

/* Queue `nseg` full segments of data. */
static void write_segs(peer_t *p, unsigned nseg)
{
    static char data[64 * (SEG + 12)];
    cr_assert_leq(nseg, 64);
    zbuf_t *z;
    zbuf_create(&z);
    zbuf_append_buf(z, data, (size_t)nseg * p->seg, NULL, NULL);
    cr_assert_eq(zbuf_ip_tcp_write(p->e.pcb, z), 0);
}

/* Queue `nseg` segments, check how many the first flight holds, and let
 * one RTT pass (the captured frames dropped, their TSval noted). */
static void first_flight(peer_t *p, unsigned nseg, int expect)
{
    write_segs(p, nseg);
    cr_assert_eq(p->u.ntx, expect, "first flight");
    peer_note(p);
    zh_single_clear(&p->u);
    p->u.now += RTT_MS;
}

/* Did the stack send the data segment at byte offset `off` (captured)? */
static int sent_at(peer_t *p, uint32_t off)
{
    int n = 0;
    for (int i = 0; i < p->u.ntx; i++) {
        zh_tcp_seg_t s;
        if (zh_tx_tcp(&p->u, i, &s) && s.dlen > 0 && s.seq == p->iss + 1 + off)
            n++;
    }
    return n;
}

/* Run the stack's timers until `ms` of virtual time passed. */
static void advance(peer_t *p, uint64_t ms)
{
    uint64_t end = p->u.now + ms;
    for (int i = 0; i < 1000; i++) {
        uint64_t d = zbuf_ip_next_deadline(p->u.s);
        if (d > end)
            break;
        p->u.now = d > p->u.now ? d : p->u.now;
        zbuf_ip_poll(p->u.s);
    }
    p->u.now = end;
}

static zbuf_ip_stats_t stats(peer_t *p)
{
    zbuf_ip_stats_t st;
    zbuf_ip_stats(p->u.s, &st);
    return st;
}

/* One RTT later the peer acknowledges all `nseg` segments: nothing is left
 * and no timeout happened. */
static void ack_all_without_rto(peer_t *p, uint32_t nseg)
{
    peer_note(p);
    p->u.now += RTT_MS;
    peer_ack(p, nseg * SEG, NULL, 0);
    zbuf_ip_tcp_info_t in;
    zbuf_ip_tcp_info(p->e.pcb, &in);
    cr_assert_eq(in.unacked, 0);
    cr_assert_eq(stats(p).tcp_rto, 0);
}

/* The peer SACKs segments 1..3 of the first flight: segment 0 goes again
 * at once (fast retransmit). */
static void sack_behind_first(peer_t *p)
{
    static const uint32_t s3[1][2] = {{SEG, 4 * SEG}};
    peer_ack(p, 0, s3, 1);
    cr_assert_eq(sent_at(p, 0), 1, "fast retransmit");
}

Test(recovery, one_sacked_segment_arms_the_rack_timer_which_resends_the_hole)
{
    peer_t p;
    peer_open(&p);
    first_flight(&p, 10, 10);
    /* Segment 0 lost: only segment 1 is reported.  One SACKed segment is not
     * proof of a loss (it may be reordering): RACK waits a quarter RTT. */
    static const uint32_t s1[1][2] = {{SEG, 2 * SEG}};
    peer_ack(&p, 0, s1, 1);
    cr_assert_eq(sent_at(&p, 0), 0, "not yet: within the reordering window");
    uint64_t d = zbuf_ip_next_deadline(p.u.s);
    cr_assert_leq(d, p.u.now + RTT_MS / 4 + 1, "the RACK timer, long before the RTO");
    advance(&p, RTT_MS / 4 + 1);
    cr_assert_eq(sent_at(&p, 0), 1, "the hole resent when the RACK timer fired");
    zbuf_ip_stats_t st = stats(&p);
    cr_assert_eq(st.tcp_rack_losses, 1);
    cr_assert_eq(st.tcp_fast_retransmits, 1);
    cr_assert_eq(st.tcp_rto, 0);
    ack_all_without_rto(&p, 10);
    cr_assert_eq(stats(&p).tcp_retransmits, 1, "only the lost segment went twice");
    peer_close(&p);
}

Test(recovery, three_sacked_segments_resend_the_hole_at_once)
{
    peer_t p;
    peer_open(&p);
    first_flight(&p, 10, 10);
    static const uint32_t s3[1][2] = {{SEG, 4 * SEG}};
    peer_ack(&p, 0, s3, 1);
    cr_assert_eq(sent_at(&p, 0), 1, "fast retransmit on the ACK itself");
    zbuf_ip_tcp_info_t in;
    zbuf_ip_tcp_info(p.e.pcb, &in);
    cr_assert_eq(in.sacked_bytes, 3 * SEG);
    cr_assert_eq(in.ssthresh, 10 * SEG / 2);
    cr_assert_eq(stats(&p).tcp_rto, 0);
    peer_close(&p);
}

Test(recovery, lost_tail_is_repaired_by_a_loss_probe_without_rto)
{
    peer_t p;
    peer_open(&p);
    first_flight(&p, 10, 10);
    peer_ack(&p, 8 * SEG, NULL, 0); /* segments 8 and 9 lost: nothing follows them */
    cr_assert_eq(p.u.ntx, 0);
    uint64_t d = zbuf_ip_next_deadline(p.u.s);
    zbuf_ip_tcp_info_t in;
    zbuf_ip_tcp_info(p.e.pcb, &in);
    cr_assert_lt(d - p.u.now, in.rto_ms, "the probe comes before the RTO");
    cr_assert_leq(d - p.u.now, 2 * RTT_MS + 2, "PTO = 2 SRTT (+ clock granularity)");
    advance(&p, d - p.u.now);
    cr_assert_eq(p.u.ntx, 1, "one probe");
    cr_assert_eq(sent_at(&p, 9 * SEG), 1, "no new data: the last segment goes again");
    cr_assert_eq(stats(&p).tcp_tlp, 1);
    peer_note(&p);
    zh_single_clear(&p.u);
    /* The probe draws a SACK for segment 9: RACK finds segment 8 lost. */
    p.u.now += RTT_MS;
    static const uint32_t s9[1][2] = {{9 * SEG, 10 * SEG}};
    peer_ack(&p, 8 * SEG, s9, 1);
    advance(&p, RTT_MS / 4 + 1);
    cr_assert_eq(sent_at(&p, 8 * SEG), 1, "segment 8 resent after the probe's ACK");
    peer_note(&p);
    p.u.now += RTT_MS;
    peer_ack(&p, 10 * SEG, NULL, 0);
    zbuf_ip_tcp_info(p.e.pcb, &in);
    cr_assert_eq(in.unacked, 0);
    zbuf_ip_stats_t st = stats(&p);
    cr_assert_eq(st.tcp_rto, 0);
    cr_assert_eq(st.tcp_tlp, 1);
    cr_assert_geq(st.tcp_rack_losses, 1);
    peer_close(&p);
}

Test(recovery, lost_retransmission_is_detected_and_sent_again_without_rto)
{
    peer_t p;
    peer_open(&p);
    first_flight(&p, 20, 10);
    static const uint32_t s3[1][2] = {{SEG, 4 * SEG}};
    peer_ack(&p, 0, s3, 1);
    cr_assert_eq(sent_at(&p, 0), 1, "fast retransmit");
    cr_assert_eq(sent_at(&p, 10 * SEG), 1, "PRR lets new data follow it");
    peer_note(&p);
    zh_single_clear(&p.u);
    /* The retransmission of segment 0 is lost too; the new segment sent
     * with (after) it arrives, with the rest of the first flight. */
    p.u.now += RTT_MS;
    static const uint32_t s10[2][2] = {{10 * SEG, 11 * SEG}, {SEG, 10 * SEG}};
    peer_ack(&p, 0, s10, 2);
    advance(&p, 1);
    cr_assert_eq(sent_at(&p, 0), 1, "segment 0 a third time, no timeout");
    zbuf_ip_stats_t st = stats(&p);
    cr_assert_eq(st.tcp_lost_retransmits, 1);
    cr_assert_eq(st.tcp_rto, 0);
    cr_assert_eq(st.tcp_fast_retransmits, 1, "one recovery episode");
    peer_close(&p);
}

Test(recovery, timestamps_are_carried_and_echo_the_left_edge)
{
    peer_t p;
    peer_open(&p);
    write_segs(&p, 2);
    cr_assert_eq(p.u.ntx, 2);
    zh_tcp_seg_t a, b;
    cr_assert(zh_tx_tcp(&p.u, 0, &a));
    cr_assert(a.has_ts, "data segments carry timestamps");
    cr_assert_eq(a.hlen, 32, "header plus NOP NOP TS");
    cr_assert_eq(a.dlen, SEG, "payload + options fit the peer's MSS");
    uint32_t ts0 = a.tsval;
    zh_single_clear(&p.u);
    /* The peer's data at the left edge: its TSval becomes TS.Recent. */
    p.u.now += 5;
    uint32_t tv = peer_tsval(&p);
    peer_send(&p, PEER_ISN + 1, p.iss + 1, 0x18, tv, NULL, 0, "x");
    p.u.now += 50;
    zbuf_ip_poll(p.u.s); /* the delayed ACK */
    cr_assert_geq(p.u.ntx, 1);
    cr_assert(zh_tx_tcp(&p.u, p.u.ntx - 1, &b));
    cr_assert(b.has_ts);
    cr_assert_eq(b.tsecr, tv, "TSecr echoes the left-edge segment");
    cr_assert_eq(b.tsval - ts0, 55, "TSval follows the millisecond clock");
    /* A segment above the left edge is acknowledged but does not move
     * TS.Recent (RFC 7323 4.3). */
    zh_single_clear(&p.u);
    p.u.now += 1;
    peer_send(&p, PEER_ISN + 10, p.iss + 1, 0x18, tv + 100, NULL, 0, "later");
    cr_assert(zh_tx_tcp(&p.u, p.u.ntx - 1, &b));
    cr_assert_eq(b.tsecr, tv);
    peer_close(&p);
}

Test(recovery, timestamp_offsets_differ_per_connection)
{
    peer_t p, q;
    peer_open(&p);
    zh_tcp_seg_t a, b;
    write_segs(&p, 1);
    cr_assert(zh_tx_tcp(&p.u, 0, &a));
    peer_close(&p);
    /* Same stack key, another port: another offset. */
    memset(&q, 0, sizeof q);
    zh_single_init(&q.u, NULL);
    ep_listen(&q.e, q.u.s, 80);
    zh_learn_peer(&q.u);
    const uint8_t syn_opts[12] = {1, 1, 8, 10, 0, 0, 0, 100, 0, 0, 0, 0};
    uint8_t f[256];
    size_t n = zh_tcp_frame(f, 4001, 80, PEER_ISN, 0, 0x02, 65535, syn_opts, sizeof syn_opts,
                            NULL, 0);
    zh_input(&q.u, f, n, 0);
    cr_assert(zh_tx_tcp(&q.u, 0, &b));
    cr_assert(b.has_ts);
    uint32_t d = b.tsval - a.tsval;
    cr_assert(d > 100000 && d < 0xfffe0000u, "TSval offset step %u looks predictable", d);
    zbuf_ip_tcp_close(q.e.listener);
    zh_single_fini(&q.u);
}

Test(recovery, paws_drops_an_old_timestamp_but_not_a_reset)
{
    peer_t p;
    peer_open(&p);
    uint32_t tv = peer_tsval(&p) + 1000;
    peer_send(&p, PEER_ISN + 1, p.iss + 1, 0x18, tv, NULL, 0, "new");
    cr_assert_eq(p.e.rx_bytes, 3);
    zh_single_clear(&p.u);
    /* The next bytes, in order, but stamped before TS.Recent: an old
     * duplicate from an earlier wrap of the sequence space. */
    peer_send(&p, PEER_ISN + 4, p.iss + 1, 0x18, tv - 10, NULL, 0, "old");
    cr_assert_eq(p.e.rx_bytes, 3, "dropped");
    cr_assert_eq(stats(&p).tcp_paws_drops, 1);
    cr_assert_eq(p.u.ntx, 1, "answered with an ACK");
    zh_tcp_seg_t c;
    cr_assert(zh_tx_tcp(&p.u, 0, &c));
    cr_assert_eq(c.ack, PEER_ISN + 4);
    /* Timestamps within the window are fine again. */
    peer_send(&p, PEER_ISN + 4, p.iss + 1, 0x18, tv, NULL, 0, "now");
    cr_assert_eq(p.e.rx_bytes, 6);
    /* A RST with an old timestamp still resets: RSTs skip PAWS. */
    peer_send(&p, PEER_ISN + 7, 0, 0x04, tv - 500, NULL, 0, NULL);
    cr_assert_eq(p.e.errors, 1);
    cr_assert_eq(p.e.err, -ECONNRESET);
    zbuf_ip_tcp_close(p.e.listener);
    ep_fini(&p.e);
    zh_single_fini(&p.u);
}

Test(recovery, retransmitted_data_gives_an_rtt_sample_with_timestamps)
{
    peer_t p;
    peer_open(&p);
    write_segs(&p, 1);
    zh_single_clear(&p.u);
    /* No answer: the segment times out (one probe first) and goes again. */
    advance(&p, 1500);
    cr_assert_geq(stats(&p).tcp_rto, 1);
    peer_note(&p);
    cr_assert_geq(sent_at(&p, 0), 1);
    zh_single_clear(&p.u);
    /* Its ACK echoes the retransmission: a valid sample of 30 ms, which
     * Karn's rule would have to discard without timestamps. */
    p.u.now += 30;
    peer_ack(&p, SEG, NULL, 0);
    zbuf_ip_tcp_info_t in;
    zbuf_ip_tcp_info(p.e.pcb, &in);
    cr_assert_eq(in.unacked, 0);
    cr_assert_gt(in.srtt_ms, RTT_MS, "the 30 ms sample moved SRTT");
    peer_close(&p);
}

Test(recovery, acks_to_paws_drops_are_rate_limited_per_connection)
{
    peer_t p;
    peer_open(&p);
    uint32_t tv = peer_tsval(&p) + 1000;
    peer_send(&p, PEER_ISN + 1, p.iss + 1, 0x18, tv, NULL, 0, "new");
    zh_single_clear(&p.u);
    /* A burst of replayed segments with an old timestamp: one ACK. */
    for (int i = 0; i < 5; i++)
        peer_send(&p, PEER_ISN + 4, p.iss + 1, 0x18, tv - 10, NULL, 0, "old");
    zbuf_ip_stats_t st = stats(&p);
    cr_assert_eq(st.tcp_paws_drops, 5);
    cr_assert_eq(p.u.ntx, 1, "one ACK for the burst");
    cr_assert_eq(st.tcp_paws_acks_limited, 4);
    zh_single_clear(&p.u);
    /* Once the limit's period passed, the next drop is answered again. */
    p.u.now += ZBUF_IP_TCP_INVALID_RATELIMIT_MS;
    peer_send(&p, PEER_ISN + 4, p.iss + 1, 0x18, tv - 10, NULL, 0, "old");
    cr_assert_eq(p.u.ntx, 1);
    cr_assert_eq(stats(&p).tcp_paws_acks_limited, 4);
    cr_assert_eq(p.e.rx_bytes, 3, "none of them delivered");
    peer_close(&p);
}

Test(recovery, a_duplicate_segment_is_reported_by_a_dsack_block_first)
{
    peer_t p;
    peer_open(&p);
    uint32_t b = PEER_ISN + 1;
    peer_send(&p, b, p.iss + 1, 0x18, peer_tsval(&p), NULL, 0, "0123456789");
    peer_send(&p, b + 20, p.iss + 1, 0x18, peer_tsval(&p), NULL, 0, "ooo");
    zh_single_clear(&p.u);
    /* The first segment again (a spurious retransmission of the peer). */
    peer_send(&p, b, p.iss + 1, 0x18, peer_tsval(&p), NULL, 0, "0123456789");
    cr_assert_eq(p.u.ntx, 1, "answered at once");
    zh_tcp_seg_t a;
    cr_assert(zh_tx_tcp(&p.u, 0, &a));
    cr_assert_eq(a.ack, b + 10);
    cr_assert_eq(a.nsack, 2, "the D-SACK block, then the queue's");
    cr_assert_eq(a.sack[0][0], b);
    cr_assert_eq(a.sack[0][1], b + 10, "first block: the duplicate, below the ACK");
    cr_assert_eq(a.sack[1][0], b + 20);
    cr_assert_eq(a.sack[1][1], b + 23);
    cr_assert_eq(stats(&p).tcp_dsack_tx, 1);
    /* Reported once: the next ACK carries only the queue's block. */
    zh_single_clear(&p.u);
    peer_send(&p, b + 30, p.iss + 1, 0x18, peer_tsval(&p), NULL, 0, "x");
    cr_assert(zh_tx_tcp(&p.u, 0, &a));
    cr_assert_eq(a.nsack, 2);
    cr_assert_neq(a.sack[0][0], b);
    cr_assert_neq(a.sack[1][0], b);
    /* A duplicate of queued out-of-order bytes: D-SACK, then its run. */
    zh_single_clear(&p.u);
    peer_send(&p, b + 20, p.iss + 1, 0x18, peer_tsval(&p), NULL, 0, "ooo");
    cr_assert(zh_tx_tcp(&p.u, 0, &a));
    cr_assert_geq(a.nsack, 2);
    cr_assert_eq(a.sack[0][0], b + 20);
    cr_assert_eq(a.sack[0][1], b + 23);
    cr_assert_eq(a.sack[1][0], b + 20, "second block: the run holding it");
    cr_assert_eq(stats(&p).tcp_dsack_tx, 2);
    cr_assert_eq(p.e.rx_bytes, 10);
    peer_close(&p);
}

Test(recovery, dsack_of_every_retransmission_undoes_the_cwnd_reduction)
{
    peer_t p;
    peer_open(&p);
    first_flight(&p, 10, 10);
    zbuf_ip_tcp_info_t in;
    zbuf_ip_tcp_info(p.e.pcb, &in);
    uint32_t cwnd0 = in.cwnd, ssthresh0 = in.ssthresh;
    /* Segment 0 only delayed: the SACKs for 1..3 trigger a (spurious)
     * fast retransmit. */
    sack_behind_first(&p);
    zbuf_ip_tcp_info(p.e.pcb, &in);
    cr_assert_lt(in.ssthresh, ssthresh0);
    peer_note(&p);
    zh_single_clear(&p.u);
    p.u.now += RTT_MS;
    peer_ack(&p, 10 * SEG, NULL, 0); /* the original arrived: recovery over */
    zbuf_ip_tcp_info(p.e.pcb, &in);
    cr_assert_lt(in.cwnd, cwnd0, "reduced by the recovery");
    cr_assert_eq(stats(&p).tcp_spurious_undo, 0);
    /* Then the retransmission arrives: the peer reports it with a D-SACK. */
    static const uint32_t d0[1][2] = {{0, SEG}};
    peer_ack(&p, 10 * SEG, d0, 1);
    zbuf_ip_stats_t st = stats(&p);
    cr_assert_eq(st.tcp_dsack_rx, 1);
    cr_assert_eq(st.tcp_spurious_undo, 1);
    zbuf_ip_tcp_info(p.e.pcb, &in);
    cr_assert_geq(in.cwnd, cwnd0, "cwnd as before the spurious recovery");
    cr_assert_eq(in.ssthresh, ssthresh0);
    peer_close(&p);
}

Test(recovery, dsack_widens_the_rack_reordering_window)
{
    peer_t p;
    peer_open(&p);
    first_flight(&p, 10, 10);
    /* A D-SACK for data never retransmitted (a duplicate on the path):
     * counted, and reordering is assumed from now on. */
    static const uint32_t d0[1][2] = {{0, SEG}};
    peer_ack(&p, 2 * SEG, d0, 1);
    cr_assert_eq(stats(&p).tcp_dsack_rx, 1);
    cr_assert_eq(stats(&p).tcp_spurious_undo, 0);
    /* Segment 2 missing, 3 SACKed one RTT later: with min_rtt 10 ms and
     * the multiplier 2 the reordering window is 10/4 * 2 = 4 ms (2 ms
     * without the D-SACK): no resend after 3 ms, one after 5 ms. */
    p.u.now += RTT_MS;
    static const uint32_t s3[1][2] = {{3 * SEG, 4 * SEG}};
    peer_ack(&p, 2 * SEG, s3, 1);
    advance(&p, 3);
    cr_assert_eq(sent_at(&p, 2 * SEG), 0, "inside the widened window");
    advance(&p, 2);
    cr_assert_eq(sent_at(&p, 2 * SEG), 1, "resent once the window passed");
    peer_close(&p);
}

Test(recovery, a_lost_retransmission_at_the_tail_is_probed_not_timed_out)
{
    peer_t p;
    peer_open(&p);
    first_flight(&p, 4, 4);
    sack_behind_first(&p);
    peer_note(&p);
    zh_single_clear(&p.u);
    /* The retransmission is lost and nothing follows it: no later delivery
     * lets RACK judge it.  A probe in recovery sends it again. */
    advance(&p, 2 * RTT_MS + 2);
    cr_assert_eq(sent_at(&p, 0), 1, "probed after 2 SRTT");
    zbuf_ip_stats_t st = stats(&p);
    cr_assert_eq(st.tcp_tlp, 1);
    cr_assert_eq(st.tcp_rto, 0);
    ack_all_without_rto(&p, 4);
    peer_close(&p);
}

Test(recovery, data_segments_make_room_for_sack_blocks)
{
    peer_t p;
    peer_open(&p);
    uint32_t b = PEER_ISN + 1;
    peer_send(&p, b + 100, p.iss + 1, 0x18, peer_tsval(&p), NULL, 0, "hole before me");
    zh_single_clear(&p.u);
    write_segs(&p, 3);
    int data = 0;
    for (int i = 0; i < p.u.ntx; i++) {
        zh_tcp_seg_t s;
        cr_assert(zh_tx_tcp(&p.u, i, &s));
        if (s.dlen == 0)
            continue;
        data++;
        cr_assert_eq(s.nsack, 1, "segment %d carries the SACK block", i);
        cr_assert_eq(s.sack[0][0], b + 100);
        cr_assert_leq(s.dlen, SEG - 12, "the block's 12 bytes come out of the MSS");
    }
    cr_assert_geq(data, 3);
    peer_close(&p);
}

Test(recovery, min_rtt_is_a_windowed_minimum)
{
    peer_t p;
    peer_open(&p);
    zbuf_ip_tcp_info_t in;
    zbuf_ip_tcp_info(p.e.pcb, &in);
    cr_assert_eq(in.min_rtt_ms, RTT_MS);
    /* The path gets slower for good: after the filter's window only the
     * new RTT counts (a lifetime minimum would stay at 10 ms). */
    uint32_t acked = 0;
    for (int i = 0; i < 12; i++) {
        p.u.now += ZBUF_IP_TCP_MIN_RTT_WLEN_MS / 10;
        write_segs(&p, 1);
        peer_note(&p);
        zh_single_clear(&p.u);
        p.u.now += 3 * RTT_MS;
        acked += SEG;
        peer_ack(&p, acked, NULL, 0);
        zbuf_ip_tcp_info(p.e.pcb, &in);
        if (i < 5)
            cr_assert_eq(in.min_rtt_ms, RTT_MS, "still inside the window");
    }
    cr_assert_eq(in.min_rtt_ms, 3 * RTT_MS);
    peer_close(&p);
}

Test(recovery, syn_in_time_wait_with_a_newer_timestamp_reopens_rfc6191)
{
    peer_t p;
    peer_open(&p);
    uint32_t b = PEER_ISN + 1;
    /* We close first: FIN, the peer's ACK and FIN, TIME_WAIT. */
    zbuf_ip_tcp_t *old = p.e.pcb;
    zbuf_ip_tcp_close(old);
    peer_note(&p);
    zh_single_clear(&p.u);
    p.u.now += RTT_MS;
    peer_send(&p, b, p.iss + 2, 0x11, peer_tsval(&p), NULL, 0, NULL);
    cr_assert_eq(zbuf_ip_tcp_state(old), ZBUF_IP_TCP_TIME_WAIT);
    zh_single_clear(&p.u);
    p.u.now += RTT_MS;
    /* A SYN with an older timestamp but a higher ISN: the timestamp
     * decides, it may be an old duplicate (challenge ACK, no new PCB). */
    uint8_t f[256];
    uint32_t tv = peer_tsval(&p);
    uint8_t o[12] = {1, 1, 8, 10};
    uint32_t old_tv = tv - 1000;
    o[4] = (uint8_t)(old_tv >> 24), o[5] = (uint8_t)(old_tv >> 16), o[6] = (uint8_t)(old_tv >> 8),
    o[7] = (uint8_t)old_tv;
    size_t n = zh_tcp_frame(f, 4000, 80, b + 100000, 0, 0x02, 65535, o, sizeof o, NULL, 0);
    zh_input(&p.u, f, n, 0);
    cr_assert_eq(stats(&p).tcp_tw_recycled, 0);
    cr_assert_eq(zbuf_ip_tcp_state(old), ZBUF_IP_TCP_TIME_WAIT);
    zh_single_clear(&p.u);
    /* A SYN with a newer timestamp and a lower ISN: a new incarnation. */
    o[4] = (uint8_t)(tv >> 24), o[5] = (uint8_t)(tv >> 16), o[6] = (uint8_t)(tv >> 8),
    o[7] = (uint8_t)tv;
    n = zh_tcp_frame(f, 4000, 80, PEER_ISN - 5000, 0, 0x02, 65535, o, sizeof o, NULL, 0);
    zh_input(&p.u, f, n, 0);
    cr_assert_eq(stats(&p).tcp_tw_recycled, 1);
    zh_tcp_seg_t sa;
    cr_assert_eq(p.u.ntx, 1);
    cr_assert(zh_tx_tcp(&p.u, 0, &sa));
    cr_assert_eq(sa.flags, 0x12, "SYN-ACK from the listener");
    cr_assert_eq(sa.ack, PEER_ISN - 5000 + 1);
    zh_single_clear(&p.u);
    p.e.pcb = NULL;
    peer_send(&p, PEER_ISN - 5000 + 1, sa.seq + 1, 0x10, tv + 1, NULL, 0, NULL);
    cr_assert_eq(p.e.accepted, 2);
    peer_close(&p);
}

/* Found by fuzz_tcp_established: the application shut down but did not
 * close, so the connection in TIME_WAIT is still its handle.  A new SYN
 * ending the wait (RFC 6191) used to free that PCB under the application
 * (a use after free at its next call); it must only become CLOSED. */
Test(recovery, syn_in_time_wait_leaves_a_pcb_the_application_holds_closed)
{
    peer_t p;
    peer_open(&p);
    uint32_t b = PEER_ISN + 1;
    zbuf_ip_tcp_t *old = p.e.pcb;
    cr_assert_eq(zbuf_ip_tcp_shutdown(old), 0);
    peer_note(&p);
    zh_single_clear(&p.u);
    p.u.now += RTT_MS;
    peer_send(&p, b, p.iss + 2, 0x11, peer_tsval(&p), NULL, 0, NULL);
    cr_assert_eq(zbuf_ip_tcp_state(old), ZBUF_IP_TCP_TIME_WAIT);
    cr_assert_eq(p.e.eofs, 1);
    cr_assert_eq(stats(&p).tcp_pcbs, 2, "the listener and the connection");
    zh_single_clear(&p.u);
    p.u.now += RTT_MS;
    peer_send(&p, PEER_ISN + 100000, 0, 0x02, peer_tsval(&p), NULL, 0, NULL);
    cr_assert_eq(stats(&p).tcp_tw_recycled, 1);
    cr_assert_eq(stats(&p).tcp_pcbs, 3, "the old PCB stays, the application's");
    cr_assert_eq(zbuf_ip_tcp_state(old), ZBUF_IP_TCP_CLOSED);
    zbuf_ip_tcp_info_t in;
    cr_assert_eq(zbuf_ip_tcp_info(old, &in), 0);
    cr_assert_eq(p.e.errors, 0, "an orderly end, not a failure");
    zbuf_ip_tcp_close(old);
    cr_assert_eq(stats(&p).tcp_pcbs, 2, "closing it frees it");
    zh_tcp_seg_t sa;
    cr_assert(zh_tx_tcp(&p.u, 0, &sa));
    cr_assert_eq(sa.flags, 0x12, "SYN-ACK from the listener");
    zh_single_clear(&p.u);
    p.e.pcb = NULL;
    peer_send(&p, PEER_ISN + 100001, sa.seq + 1, 0x10, peer_tsval(&p) + 1, NULL, 0, NULL);
    cr_assert_eq(p.e.accepted, 2);
    peer_close(&p);
}

/* ------------------------------------------------ spurious timeouts */

/* Queue 20 segments (10 fly), then let no ACK come until the first
 * retransmission timeout fired (a loss probe of new data comes first).
 * Returns cwnd and ssthresh before the timeout.  The peer's TSecr echoes
 * the retransmission if `rtx_arrived`, else still the first flight. */
static zbuf_ip_tcp_info_t stall_until_rto(peer_t *p, bool rtx_arrived)
{
    first_flight(p, 20, 10);
    zbuf_ip_tcp_info_t before;
    zbuf_ip_tcp_info(p->e.pcb, &before);
    for (int i = 0; i < 2000 && stats(p).tcp_rto == 0; i++)
        advance(p, 1);
    cr_assert_eq(stats(p).tcp_rto, 1);
    cr_assert_eq(sent_at(p, 0), 1, "the timeout resends the first segment");
    zbuf_ip_tcp_info_t in;
    zbuf_ip_tcp_info(p->e.pcb, &in);
    cr_assert_eq(in.cwnd, in.mss, "cwnd one segment after the timeout");
    if (rtx_arrived)
        peer_note(p);
    zh_single_clear(&p->u);
    return before;
}

/* No data segment at offsets [from, to) segments was sent (captured). */
static void none_sent(peer_t *p, unsigned from, unsigned to)
{
    for (unsigned k = from; k < to; k++)
        cr_assert_eq(sent_at(p, k * p->seg), 0, "segment %u went again", k);
}

/* One timeout found spurious (`frto` of them by F-RTO) and undone: cwnd and
 * ssthresh as before it, nothing marked lost, no backoff. */
static void assert_undone(peer_t *p, const zbuf_ip_tcp_info_t *before, uint64_t frto)
{
    zbuf_ip_stats_t st = stats(p);
    cr_assert_eq(st.tcp_spurious_rto, 1);
    cr_assert_eq(st.tcp_spurious_rto_frto, frto);
    zbuf_ip_tcp_info_t in;
    zbuf_ip_tcp_info(p->e.pcb, &in);
    cr_assert_geq(in.cwnd, before->cwnd, "cwnd as before the timeout");
    cr_assert_eq(in.ssthresh, before->ssthresh);
    cr_assert_eq(in.lost_bytes, 0, "nothing is marked lost any more");
    cr_assert_lt(in.rto_ms, 2 * before->rto_ms, "the backoff is over");
}

Test(recovery, eifel_undoes_a_spurious_timeout_without_go_back_n)
{
    peer_t p;
    peer_open(&p);
    zbuf_ip_tcp_info_t before = stall_until_rto(&p, false);
    uint64_t rtx = stats(&p).tcp_retransmits;
    /* The delay ends: the ACK of the originals echoes their TSval, older
     * than the retransmission's. */
    p.u.now += 5;
    peer_ack(&p, 2 * SEG, NULL, 0);
    assert_undone(&p, &before, 0);
    none_sent(&p, 2, 11);
    cr_assert_eq(stats(&p).tcp_retransmits, rtx);
    /* The rest of the flight is acknowledged: still nothing went twice. */
    p.u.now += 5;
    peer_ack(&p, 11 * SEG, NULL, 0);
    none_sent(&p, 2, 11);
    cr_assert_eq(stats(&p).tcp_retransmits, rtx, "only the timeout's retransmission");
    peer_close(&p);
}

Test(recovery, frto_undoes_a_spurious_timeout_without_timestamps)
{
    peer_t p;
    peer_open_ts(&p, false);
    uint32_t m = p.seg;
    zbuf_ip_tcp_info_t before = stall_until_rto(&p, false);
    /* F-RTO step 2: the first ACK advances: two new segments, no
     * retransmission. */
    p.u.now += 5;
    peer_ack(&p, 2 * m, NULL, 0);
    cr_assert_eq(sent_at(&p, 11 * m) + sent_at(&p, 12 * m), 2, "two new segments");
    cr_assert_eq(p.u.ntx, 2);
    none_sent(&p, 2, 11);
    cr_assert_eq(stats(&p).tcp_spurious_rto, 0, "not decided yet");
    zh_single_clear(&p.u);
    /* Step 3: the next ACK acknowledges segments never retransmitted. */
    peer_ack(&p, 4 * m, NULL, 0);
    assert_undone(&p, &before, 1);
    none_sent(&p, 4, 11);
    peer_ack(&p, 13 * m, NULL, 0);
    none_sent(&p, 4, 11);
    cr_assert_eq(stats(&p).tcp_retransmits, 1, "only the timeout's retransmission");
    peer_close(&p);
}

/* RFC 3465 byte counting: a stretch ACK (a receiver acknowledging a
 * batch at once) grows cwnd in slow start by all it acknowledges. */
Test(recovery, slow_start_counts_the_bytes_a_stretch_ack_acknowledges)
{
    peer_t p;
    peer_open(&p);
    first_flight(&p, 40, 10);
    zbuf_ip_tcp_info_t in;
    zbuf_ip_tcp_info(p.e.pcb, &in);
    cr_assert_eq(in.cwnd, 10 * SEG);
    peer_ack(&p, 10 * SEG, NULL, 0);
    zbuf_ip_tcp_info(p.e.pcb, &in);
    cr_assert_eq(in.cwnd, 20 * SEG, "ten segments acknowledged by one ACK: ten more");
    cr_assert_eq(p.u.ntx, 20, "the window doubled in one round trip");
    peer_close(&p);
}

Test(recovery, eifel_keeps_a_timeout_that_repaired_a_loss)
{
    peer_t p;
    peer_open(&p);
    stall_until_rto(&p, true);
    /* The flight was lost: the ACK echoes the retransmission's TSval. */
    p.u.now += RTT_MS;
    peer_ack(&p, SEG, NULL, 0);
    zbuf_ip_stats_t st = stats(&p);
    cr_assert_eq(st.tcp_spurious_rto, 0);
    zbuf_ip_tcp_info_t in;
    zbuf_ip_tcp_info(p.e.pcb, &in);
    cr_assert_leq(in.cwnd, 2 * SEG, "slow start from one segment");
    cr_assert_eq(sent_at(&p, SEG), 1, "the recovery goes on with the next segment");
    cr_assert_gt(in.lost_bytes, 0);
    peer_close(&p);
}

Test(recovery, frto_keeps_a_timeout_that_repaired_a_loss)
{
    peer_t p;
    peer_open_ts(&p, false);
    uint32_t m = p.seg;
    stall_until_rto(&p, false);
    /* Segment 1 was lost, the rest of the flight (and the probe) too. */
    p.u.now += RTT_MS;
    peer_ack(&p, m, NULL, 0);
    cr_assert_eq(sent_at(&p, 11 * m) + sent_at(&p, 12 * m), 2, "F-RTO step 2");
    zh_single_clear(&p.u);
    /* Only the new segments arrive: a duplicate ACK SACKing them. */
    static const uint32_t s11[1][2] = {{11 * (SEG + 12), 13 * (SEG + 12)}};
    peer_ack(&p, m, s11, 1);
    cr_assert_eq(stats(&p).tcp_spurious_rto, 0);
    cr_assert_eq(sent_at(&p, m), 1, "conventional recovery: segment 1 goes again");
    peer_close(&p);
}

/* --------------------------------- a delay spike between two stacks */

struct xfer {
    ep_t tx, rx;
    uint64_t total, written;
    uint64_t stop_at; /* cond: rx_bytes reached this */
};

static bool xfer_connected(void *arg)
{
    return ((struct xfer *)arg)->tx.connected > 0;
}

static bool xfer_pump(void *arg)
{
    struct xfer *x = arg;
    while (x->tx.pcb && x->written < x->total) {
        size_t n = x->total - x->written < 16384 ? (size_t)(x->total - x->written) : 16384;
        if (zbuf_ip_tcp_sndbuf(x->tx.pcb) < n)
            break;
        cr_assert_eq(zbuf_ip_tcp_write(x->tx.pcb, zh_pattern_zbuf(x->written, n, 77)), 0);
        x->written += n;
    }
    return x->rx.rx_bytes >= x->stop_at;
}

/* Send 1 MiB from A to B over a 5 ms link, stall it 1.5 s at a third and
 * check delivery byte by byte; returns A's counters. */
static zbuf_ip_stats_t transfer_with_spike(bool timestamps)
{
    zh_pair_t pr;
    zbuf_ip_link_config_t lc = {.delay_ms = 5};
    zbuf_ip_config_t cfg;
    zbuf_ip_config_init(&cfg);
    cfg.tcp_no_timestamps = !timestamps;
    zh_pair_init(&pr, &lc, &cfg);
    struct xfer x = {.total = 1u << 20};
    ep_listen(&x.rx, pr.b, 80);
    ep_connect(&x.tx, pr.a, ZH_B, 80);
    cr_assert(zh_pair_run(&pr, xfer_connected, &x, 200));
    cr_assert_eq(x.tx.connected, 1);
    x.stop_at = x.total / 3;
    cr_assert(zh_pair_run(&pr, xfer_pump, &x, 10000));
    zh_pair_stall(&pr, pr.b, 1500);
    x.stop_at = x.total;
    cr_assert(zh_pair_run(&pr, xfer_pump, &x, 60000), "transfer completes");
    cr_assert_eq(x.rx.rx_bytes, x.total);
    uint64_t off = 0;
    for (zbuf_seg_t *sg = zbuf_seg_first(x.rx.rx); sg; sg = zbuf_seg_next(x.rx.rx, sg)) {
        const uint8_t *d = zbuf_seg_data(x.rx.rx, sg);
        size_t n = zbuf_seg_length(x.rx.rx, sg);
        for (size_t i = 0; i < n; i++)
            cr_assert_eq(d[i], zh_pattern(off + i, 77), "byte %llu", (unsigned long long)(off + i));
        off += n;
    }
    zbuf_ip_stats_t st;
    zbuf_ip_stats(pr.a, &st);
    fprintf(stderr,
            "spike (%s): rto %llu spurious %llu (frto %llu dsack %llu) retransmits %llu, "
            "retransmitted bytes %llu\n",
            timestamps ? "timestamps" : "no timestamps", (unsigned long long)st.tcp_rto,
            (unsigned long long)st.tcp_spurious_rto, (unsigned long long)st.tcp_spurious_rto_frto,
            (unsigned long long)st.tcp_spurious_rto_dsack, (unsigned long long)st.tcp_retransmits,
            (unsigned long long)(st.tcp_tx_payload - x.total));
    zbuf_ip_tcp_abort(x.tx.pcb);
    zbuf_ip_tcp_abort(x.rx.pcb);
    zbuf_ip_tcp_close(x.rx.listener);
    ep_fini(&x.tx);
    ep_fini(&x.rx);
    zh_pair_fini(&pr);
    return st;
}

Test(recovery, delay_spike_between_two_stacks_is_undone)
{
    zbuf_ip_stats_t st = transfer_with_spike(true);
    cr_assert_geq(st.tcp_rto, 1, "the spike outlasted the RTO");
    if (ZBUF_IP_TCP_SPURIOUS_RTO) {
        cr_assert_eq(st.tcp_spurious_rto, 1);
        cr_assert_leq(st.tcp_retransmits, st.tcp_rto + 2,
                      "the timeouts' (and a probe's) retransmissions only");
    }
    transfer_with_spike(false); /* numbers only: F-RTO judges a first timeout alone */
}
