/* SPDX-License-Identifier: MIT */
/* TCP against crafted segments: options, RFC 5961 checks, malformed input. */
#include <stdio.h>
#include <stdlib.h>
#include "support.h"
#include "tcpfix.h"

ZT_SUITE(tcp_wire);

#define PEER_ISN 1000u

static int send_seg(zh_single_t *u, uint32_t seq, uint32_t ack, uint8_t flags, const uint8_t *opts,
                    size_t optlen, const char *data)
{
    uint8_t f[2048];
    size_t n = zh_tcp_frame(f, 4000, 80, seq, ack, flags, 65535, opts, optlen,
                            (const uint8_t *)data, data ? strlen(data) : 0);
    return zh_input(u, f, n, 0);
}

/* Listen on 80 and complete a handshake from B:4000 with `opts` in the SYN.
 * Returns our ISS; the captured SYN-ACK is parsed into *synack. */
static uint32_t establish(zh_single_t *u, ep_t *e, const uint8_t *opts, size_t optlen,
                          zh_tcp_seg_t *synack)
{
    ep_listen(e, u->s, 80);
    zh_learn_peer(u);
    send_seg(u, PEER_ISN, 0, 0x02, opts, optlen, NULL);
    cr_assert_eq(u->ntx, 1, "one SYN-ACK");
    cr_assert(zh_tx_tcp(u, 0, synack));
    cr_assert_eq(synack->flags, 0x12);
    cr_assert_eq(synack->ack, PEER_ISN + 1);
    zh_single_clear(u);
    send_seg(u, PEER_ISN + 1, synack->seq + 1, 0x10, NULL, 0, NULL);
    cr_assert_eq(e->accepted, 1);
    cr_assert_eq(u->ntx, 0);
    return synack->seq;
}

static const uint8_t mss1460[4] = {2, 4, 0x05, 0xb4};

static const uint8_t linux_syn_opts[20] = {
    2, 4, 0x05, 0xb4,              /* MSS 1460 */
    4, 2,                          /* SACK permitted */
    8, 10, 0, 0, 0, 1, 0, 0, 0, 0, /* timestamps */
    1,                             /* NOP */
    3, 3, 7,                       /* window scale 7 */
};

Test(tcp_wire, syn_ack_answers_mss_wscale_sack_permitted_and_timestamps)
{
    zh_single_t u;
    zh_single_init(&u, NULL);
    ep_t e = {0};
    zh_tcp_seg_t sa;
    establish(&u, &e, linux_syn_opts, sizeof linux_syn_opts, &sa);
    cr_assert_eq(sa.mss, 1460);
    cr_assert_eq(sa.wscale, 3);
    cr_assert(sa.sackok, "the receiver side generates SACK blocks: offer it back");
    cr_assert_eq(sa.hlen, 40, "MSS, SACK-permitted, timestamps, window scale");
    cr_assert(sa.has_ts);
    cr_assert_eq(sa.tsecr, 1, "the SYN's TSval is echoed");
    zbuf_ip_tcp_info_t in;
    zbuf_ip_tcp_info(e.pcb, &in);
    cr_assert(in.ts_ok && in.sack_ok);
    cr_assert_eq(in.snd_wscale, 7);
    cr_assert_eq(in.mss, 1460 - 12, "the timestamps take 12 bytes of each segment");
    cr_assert_eq(in.snd_wnd, 65535u << 7, "window scaled after the handshake");
    zbuf_ip_tcp_abort(e.pcb);
    zbuf_ip_tcp_close(e.listener);
    zh_single_fini(&u);
}

Test(tcp_wire, timestamps_switched_off_are_neither_offered_nor_answered)
{
    zbuf_ip_config_t c;
    zbuf_ip_config_init(&c);
    c.tcp_no_timestamps = true;
    zh_single_t u;
    zh_single_init(&u, &c);
    ep_t e = {0};
    zh_tcp_seg_t sa;
    establish(&u, &e, linux_syn_opts, sizeof linux_syn_opts, &sa);
    cr_assert_eq(sa.hlen, 32, "MSS, window scale, SACK-permitted; no timestamps");
    cr_assert(!sa.has_ts);
    zbuf_ip_tcp_info_t in;
    zbuf_ip_tcp_info(e.pcb, &in);
    cr_assert(!in.ts_ok);
    cr_assert_eq(in.mss, 1460);
    zbuf_ip_tcp_abort(e.pcb);
    zbuf_ip_tcp_close(e.listener);
    zh_single_fini(&u);
}

Test(tcp_wire, no_sack_permitted_when_the_peer_did_not_offer_it)
{
    zh_single_t u;
    zh_single_init(&u, NULL);
    ep_t e = {0};
    zh_tcp_seg_t sa;
    uint32_t iss = establish(&u, &e, mss1460, sizeof mss1460, &sa);
    cr_assert(!sa.sackok);
    cr_assert_eq(sa.wscale, -1, "no window scale either: the peer did not send it");
    send_seg(&u, PEER_ISN + 101, iss + 1, 0x18, NULL, 0, "hole");
    zh_tcp_seg_t r;
    cr_assert(zh_tx_tcp(&u, 0, &r));
    cr_assert_eq(r.nsack, 0, "no SACK blocks without agreement");
    zbuf_ip_tcp_abort(e.pcb);
    zbuf_ip_tcp_close(e.listener);
    zh_single_fini(&u);
}

Test(tcp_wire, sack_blocks_describe_the_out_of_order_queue_latest_first)
{
    zh_single_t u;
    zh_single_init(&u, NULL);
    ep_t e = {0};
    zh_tcp_seg_t sa;
    uint32_t iss = establish(&u, &e, linux_syn_opts, sizeof linux_syn_opts, &sa);
    uint32_t b = PEER_ISN + 1;
    send_seg(&u, b + 100, iss + 1, 0x10, NULL, 0, "0123456789");  /* [100,110) */
    send_seg(&u, b + 110, iss + 1, 0x10, NULL, 0, "0123456789");  /* [110,120): merges */
    send_seg(&u, b + 300, iss + 1, 0x10, NULL, 0, "0123456789");  /* [300,310) */
    send_seg(&u, b + 200, iss + 1, 0x10, NULL, 0, "0123456789");  /* [200,210), latest */
    cr_assert_eq(u.ntx, 4, "each out-of-order segment is acknowledged at once");
    zh_tcp_seg_t r;
    cr_assert(zh_tx_tcp(&u, 3, &r));
    cr_assert_eq(r.ack, b);
    cr_assert_eq(r.nsack, 3);
    cr_assert_eq(r.sack[0][0], b + 200, "the block of the latest arrival comes first");
    cr_assert_eq(r.sack[0][1], b + 210);
    cr_assert_eq(r.sack[1][0], b + 100);
    cr_assert_eq(r.sack[1][1], b + 120, "adjacent segments make one block");
    cr_assert_eq(r.sack[2][0], b + 300);
    cr_assert_eq(r.sack[2][1], b + 310);
    /* Fill the first hole: the blocks left are above the new ACK. */
    char fill[101];
    memset(fill, 'f', 100);
    fill[100] = 0;
    zh_single_clear(&u);
    send_seg(&u, b, iss + 1, 0x10, NULL, 0, fill);
    cr_assert_geq(u.ntx, 1);
    cr_assert(zh_tx_tcp(&u, u.ntx - 1, &r));
    cr_assert_eq(r.ack, b + 120);
    cr_assert_eq(r.nsack, 2);
    for (int i = 0; i < r.nsack; i++)
        cr_assert(r.sack[i][0] - r.ack < 0x80000000u, "no block at or below the ACK");
    cr_assert_eq(e.rx_bytes, 120);
    zbuf_ip_tcp_abort(e.pcb);
    zbuf_ip_tcp_close(e.listener);
    ep_fini(&e);
    zh_single_fini(&u);
}

Test(tcp_wire, mss_zero_and_huge_wscale_are_clamped)
{
    zh_single_t u;
    zh_single_init(&u, NULL);
    ep_t e = {0};
    const uint8_t opts[8] = {2, 4, 0, 0, 3, 3, 20, 0};
    zh_tcp_seg_t sa;
    uint32_t iss = establish(&u, &e, opts, sizeof opts, &sa);
    zbuf_ip_tcp_info_t in;
    zbuf_ip_tcp_info(e.pcb, &in);
    cr_assert_eq(in.mss, ZBUF_IP_TCP_MIN_MSS);
    cr_assert_eq(in.snd_wscale, 14);
    static char data[300];
    zbuf_t *z;
    zbuf_create(&z);
    zbuf_append_buf(z, data, sizeof data, NULL, NULL);
    cr_assert_eq(zbuf_ip_tcp_write(e.pcb, z), 0);
    cr_assert_gt(u.ntx, 1);
    size_t total = 0;
    for (int i = 0; i < u.ntx; i++) {
        zh_tcp_seg_t s;
        cr_assert(zh_tx_tcp(&u, i, &s));
        cr_assert_leq(s.dlen, ZBUF_IP_TCP_MIN_MSS);
        cr_assert_gt(s.dlen, 0, "never an empty data segment");
        cr_assert_eq(s.seq, iss + 1 + total);
        total += s.dlen;
    }
    zbuf_ip_tcp_abort(e.pcb);
    zbuf_ip_tcp_close(e.listener);
    zh_single_fini(&u);
}

Test(tcp_wire, malformed_options_end_the_walk_without_hanging)
{
    static const uint8_t bad[][8] = {
        {2, 0, 1, 1, 1, 1, 1, 1}, /* length 0: would loop */
        {3, 1, 1, 1, 1, 1, 1, 1}, /* length 1 */
        {1, 1, 1, 1, 1, 1, 2, 9}, /* length past the header */
        {1, 1, 1, 1, 1, 1, 2, 4}, /* MSS cut off by the end of the header */
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        zh_single_t u;
        zh_single_init(&u, NULL);
        ep_t e = {0};
        zh_tcp_seg_t sa;
        establish(&u, &e, bad[k], 8, &sa);
        zbuf_ip_tcp_info_t in;
        zbuf_ip_tcp_info(e.pcb, &in);
        cr_assert_eq(in.mss, ZBUF_IP_TCP_DEFAULT_MSS, "case %zu: default MSS", k);
        zbuf_ip_tcp_abort(e.pcb);
        zbuf_ip_tcp_close(e.listener);
        zh_single_fini(&u);
    }
}

Test(tcp_wire, rst_must_match_rcv_nxt_exactly_rfc5961)
{
    zh_single_t u;
    zh_single_init(&u, NULL);
    ep_t e = {0};
    zh_tcp_seg_t sa;
    uint32_t iss = establish(&u, &e, NULL, 0, &sa);
    /* Out of the window: silently ignored. */
    send_seg(&u, PEER_ISN + 1 + 10000000, 0, 0x04, NULL, 0, NULL);
    cr_assert_eq(u.ntx, 0);
    cr_assert_eq(zbuf_ip_tcp_state(e.pcb), ZBUF_IP_TCP_ESTABLISHED);
    /* In the window but not exact: a challenge ACK, the connection stays. */
    send_seg(&u, PEER_ISN + 1 + 100, 0, 0x04, NULL, 0, NULL);
    cr_assert_eq(u.ntx, 1);
    zh_tcp_seg_t c;
    cr_assert(zh_tx_tcp(&u, 0, &c));
    cr_assert_eq(c.flags, 0x10);
    cr_assert_eq(c.ack, PEER_ISN + 1);
    cr_assert_eq(c.seq, iss + 1);
    cr_assert_eq(zbuf_ip_tcp_state(e.pcb), ZBUF_IP_TCP_ESTABLISHED);
    cr_assert_eq(e.errors, 0);
    /* Exact: reset. */
    send_seg(&u, PEER_ISN + 1, 0, 0x04, NULL, 0, NULL);
    cr_assert_eq(e.errors, 1);
    cr_assert_eq(e.err, -ECONNRESET);
    zbuf_ip_stats_t st;
    zbuf_ip_stats(u.s, &st);
    cr_assert_eq(st.tcp_challenge_acks, 1);
    zbuf_ip_tcp_close(e.listener);
    zh_single_fini(&u);
}

Test(tcp_wire, syn_on_an_established_connection_gets_a_challenge_ack)
{
    zh_single_t u;
    zh_single_init(&u, NULL);
    ep_t e = {0};
    zh_tcp_seg_t sa;
    establish(&u, &e, NULL, 0, &sa);
    send_seg(&u, PEER_ISN + 500, 0, 0x02, NULL, 0, NULL);
    cr_assert_eq(u.ntx, 1);
    zh_tcp_seg_t c;
    cr_assert(zh_tx_tcp(&u, 0, &c));
    cr_assert_eq(c.flags, 0x10, "challenge ACK, not a reset");
    cr_assert_eq(zbuf_ip_tcp_state(e.pcb), ZBUF_IP_TCP_ESTABLISHED);
    cr_assert_eq(e.errors, 0);
    zbuf_ip_tcp_abort(e.pcb);
    zbuf_ip_tcp_close(e.listener);
    zh_single_fini(&u);
}

Test(tcp_wire, malformed_segments_are_dropped)
{
    zh_single_t u;
    zh_single_init(&u, NULL);
    ep_t e = {0};
    zh_tcp_seg_t sa;
    uint32_t iss = establish(&u, &e, NULL, 0, &sa);
    uint8_t f[2048];
    size_t n = zh_tcp_frame(f, 4000, 80, PEER_ISN + 1, iss + 1, 0x18, 65535, NULL, 0,
                            (const uint8_t *)"data", 4);
    uint8_t g[2048];
    memcpy(g, f, n);
    g[14 + 20 + 16] ^= 0x55; /* TCP checksum */
    zh_input(&u, g, n, 0);
    memcpy(g, f, n);
    g[14 + 20 + 12] = 0x40; /* data offset 4 words */
    zh_input(&u, g, n, 0);
    memcpy(g, f, n);
    g[14 + 20 + 12] = 0xf0; /* data offset 60 bytes > segment */
    zh_input(&u, g, n, 0);
    zh_input(&u, f, 14 + 20 + 10, 0); /* truncated header (IP length lies) */
    cr_assert_eq(u.ntx, 0);
    cr_assert_eq(e.rx_bytes, 0);
    zbuf_ip_stats_t st;
    zbuf_ip_stats(u.s, &st);
    cr_assert_geq(st.bad_tcp + st.bad_checksum + st.bad_ip, 4);
    /* The good one is taken, in segments split at odd places. */
    cr_assert_eq(zh_input(&u, f, n, 7), 0);
    cr_assert_eq(e.rx_bytes, 4);
    zbuf_ip_tcp_abort(e.pcb);
    zbuf_ip_tcp_close(e.listener);
    ep_fini(&e);
    zh_single_fini(&u);
}

Test(tcp_wire, ack_for_unsent_data_is_answered_and_ignored)
{
    zh_single_t u;
    zh_single_init(&u, NULL);
    ep_t e = {0};
    zh_tcp_seg_t sa;
    uint32_t iss = establish(&u, &e, NULL, 0, &sa);
    send_seg(&u, PEER_ISN + 1, iss + 5000, 0x18, NULL, 0, "junk");
    cr_assert_eq(e.rx_bytes, 0, "the segment is dropped");
    cr_assert_eq(u.ntx, 1);
    zh_tcp_seg_t c;
    zh_tx_tcp(&u, 0, &c);
    cr_assert_eq(c.flags, 0x10);
    cr_assert_eq(c.ack, PEER_ISN + 1);
    zbuf_ip_tcp_abort(e.pcb);
    zbuf_ip_tcp_close(e.listener);
    zh_single_fini(&u);
}

Test(tcp_wire, segment_for_no_connection_gets_a_reset)
{
    zh_single_t u;
    zh_single_init(&u, NULL);
    zh_learn_peer(&u);
    send_seg(&u, 777, 0, 0x02, NULL, 0, NULL);
    cr_assert_eq(u.ntx, 1);
    zh_tcp_seg_t r;
    zh_tx_tcp(&u, 0, &r);
    cr_assert_eq(r.flags, 0x14, "RST|ACK");
    cr_assert_eq(r.ack, 778);
    zh_single_clear(&u);
    send_seg(&u, 777, 4242, 0x10, NULL, 0, NULL);
    zh_tx_tcp(&u, 0, &r);
    cr_assert_eq(r.flags, 0x04);
    cr_assert_eq(r.seq, 4242, "RST takes the ACK's number");
    zh_single_clear(&u);
    send_seg(&u, 777, 0, 0x04, NULL, 0, NULL);
    cr_assert_eq(u.ntx, 0, "never answer a RST");
    zh_single_fini(&u);
}

Test(tcp_wire, out_of_order_queue_is_bounded_and_drains_in_order)
{
    zh_single_t u;
    zh_single_init(&u, NULL);
    ep_t e = {0};
    zh_tcp_seg_t sa;
    uint32_t iss = establish(&u, &e, NULL, 0, &sa);
    /* Segments 1..N+10 of 10 bytes each; segment 0 missing. */
    char d[11];
    for (int i = 1; i <= ZBUF_IP_TCP_OOO_SEGS + 10; i++) {
        snprintf(d, sizeof d, "%010d", i);
        send_seg(&u, PEER_ISN + 1 + (uint32_t)i * 10, iss + 1, 0x10, NULL, 0, d);
    }
    zbuf_ip_stats_t st;
    zbuf_ip_stats(u.s, &st);
    cr_assert_eq(st.tcp_ooo_queued, ZBUF_IP_TCP_OOO_SEGS);
    cr_assert_eq(st.tcp_ooo_drops, 10);
    cr_assert_eq(e.rx_bytes, 0);
    /* A duplicate of a queued one and an overlapping one change nothing. */
    send_seg(&u, PEER_ISN + 1 + 20, iss + 1, 0x10, NULL, 0, "0000000002");
    send_seg(&u, PEER_ISN + 1 + 25, iss + 1, 0x10, NULL, 0, "00003000000003");
    zh_single_clear(&u);
    snprintf(d, sizeof d, "%010d", 0);
    send_seg(&u, PEER_ISN + 1, iss + 1, 0x10, NULL, 0, d);
    cr_assert_eq(e.rx_bytes, 10u * (ZBUF_IP_TCP_OOO_SEGS + 1));
    char buf[64];
    for (int i = 0; i <= ZBUF_IP_TCP_OOO_SEGS; i++) {
        zbuf_copyout(e.rx, (size_t)i * 10, buf, 10);
        buf[10] = 0;
        cr_assert_eq(atoi(buf), i, "segment %d in order", i);
    }
    zh_tcp_seg_t c;
    cr_assert(zh_tx_tcp(&u, u.ntx - 1, &c));
    cr_assert_eq(c.ack, PEER_ISN + 1 + 10u * (ZBUF_IP_TCP_OOO_SEGS + 1));
    zbuf_ip_tcp_abort(e.pcb);
    zbuf_ip_tcp_close(e.listener);
    ep_fini(&e);
    zh_single_fini(&u);
}

Test(tcp_wire, isns_differ_per_connection_and_are_not_a_counter)
{
    zh_single_t u;
    zh_single_init(&u, NULL);
    ep_t e = {0};
    ep_listen(&e, u.s, 80);
    zh_learn_peer(&u);
    uint32_t isn[4];
    for (int i = 0; i < 4; i++) {
        uint8_t f[256];
        size_t n = zh_tcp_frame(f, (uint16_t)(4000 + i), 80, 5, 0, 0x02, 65535, NULL, 0, NULL, 0);
        zh_input(&u, f, n, 0);
        zh_tcp_seg_t s;
        cr_assert(zh_tx_tcp(&u, u.ntx - 1, &s));
        isn[i] = s.seq;
    }
    for (int i = 1; i < 4; i++) {
        uint32_t d = isn[i] - isn[i - 1];
        cr_assert(d > 1000000 && d < 0xfff00000u, "ISN step %u looks predictable", d);
    }
    zbuf_ip_tcp_close(e.listener);
    zh_single_fini(&u);
}


Test(tcp_wire, three_duplicate_acks_trigger_fast_retransmit_and_newreno_partial_acks)
{
    zh_single_t u;
    zh_single_init(&u, NULL);
    ep_t e = {0};
    zh_tcp_seg_t sa;
    uint32_t iss = establish(&u, &e, mss1460, sizeof mss1460, &sa);
    static char data[10 * 1460];
    zbuf_t *z;
    zbuf_create(&z);
    zbuf_append_buf(z, data, sizeof data, NULL, NULL);
    cr_assert_eq(zbuf_ip_tcp_write(e.pcb, z), 0);
    cr_assert_eq(u.ntx, 10, "initial window of ten segments");
    zh_single_clear(&u);
    uint32_t base = iss + 1;
    send_seg(&u, PEER_ISN + 1, base + 1460, 0x10, NULL, 0, NULL); /* segment 1 arrived */
    zh_single_clear(&u);
    for (int i = 0; i < 3; i++)
        send_seg(&u, PEER_ISN + 1, base + 1460, 0x10, NULL, 0, NULL); /* segment 2 lost */
    cr_assert_geq(u.ntx, 1);
    zh_tcp_seg_t r;
    cr_assert(zh_tx_tcp(&u, 0, &r));
    cr_assert_eq(r.seq, base + 1460, "fast retransmit of the first unacknowledged segment");
    cr_assert_eq(r.dlen, 1460);
    zh_single_clear(&u);
    /* Partial ACK (segment 4 was lost too): NewReno resends it at once. */
    send_seg(&u, PEER_ISN + 1, base + 3 * 1460, 0x10, NULL, 0, NULL);
    cr_assert_geq(u.ntx, 1);
    cr_assert(zh_tx_tcp(&u, 0, &r));
    cr_assert_eq(r.seq, base + 3 * 1460, "partial ACK retransmits the next hole");
    zh_single_clear(&u);
    send_seg(&u, PEER_ISN + 1, base + 10 * 1460, 0x10, NULL, 0, NULL);
    zbuf_ip_stats_t st;
    zbuf_ip_stats(u.s, &st);
    cr_assert_eq(st.tcp_fast_retransmits, 1);
    cr_assert_eq(st.tcp_retransmits, 2);
    cr_assert_eq(st.tcp_rto, 0);
    zbuf_ip_tcp_info_t in;
    zbuf_ip_tcp_info(e.pcb, &in);
    cr_assert_eq(in.unacked, 0);
    cr_assert_eq(in.ssthresh, 9 * 1460 / 2, "half of what flew at the third duplicate");
    cr_assert_eq(in.cwnd, 2 * 1460, "RFC 6582: min(ssthresh, max(FlightSize, SMSS) + SMSS)");
    zbuf_ip_tcp_abort(e.pcb);
    zbuf_ip_tcp_close(e.listener);
    zh_single_fini(&u);
}

/* Queue `n` in-order segments of 100 bytes from stream offset `from` (0:
 * the first byte after the handshake) for the next poll. */
static void queue_data(zh_single_t *u, uint32_t iss, unsigned from, unsigned n)
{
    char data[101];
    memset(data, 'x', 100);
    data[100] = 0;
    for (unsigned i = from; i < from + n; i++) {
        uint8_t f[2048];
        size_t len = zh_tcp_frame(f, 4000, 80, PEER_ISN + 1 + 100 * i, iss + 1, 0x18, 65535,
                                  NULL, 0, (const uint8_t *)data, 100);
        zh_queue(u, f, len);
    }
}

Test(tcp_wire, a_receive_batch_is_acknowledged_once_at_its_end)
{
    zh_single_t u;
    zh_single_init(&u, NULL);
    ep_t e = {0};
    zh_tcp_seg_t sa, r;
    uint32_t iss = establish(&u, &e, NULL, 0, &sa);
    queue_data(&u, iss, 0, 10);
    zbuf_ip_poll(u.s);
    cr_assert_eq(e.rx_bytes, 1000);
    cr_assert_eq(u.ntx, 1, "one ACK for the batch, not one per second segment");
    zh_tx_tcp(&u, 0, &r);
    cr_assert_eq(r.ack, PEER_ISN + 1 + 1000);
    zh_single_clear(&u);
    /* An odd batch: its last segment is acknowledged with it, no delayed
     * ACK is left behind. */
    queue_data(&u, iss, 10, 3);
    zbuf_ip_poll(u.s);
    cr_assert_eq(u.ntx, 1);
    zh_tx_tcp(&u, 0, &r);
    cr_assert_eq(r.ack, PEER_ISN + 1 + 1300);
    zh_single_clear(&u);
    u.now += ZBUF_IP_TCP_DELACK_MS + 1;
    zbuf_ip_poll(u.s);
    cr_assert_eq(u.ntx, 0, "no delayed ACK left behind");
    /* Outside a batch (frames handed over one by one), every second one. */
    for (unsigned i = 13; i < 17; i++) {
        queue_data(&u, iss, i, 1);
        zbuf_ip_netif_input(u.nif, u.rxq[--u.nrxq]);
    }
    cr_assert_eq(u.ntx, 2);
    zbuf_ip_tcp_abort(e.pcb);
    zbuf_ip_tcp_close(e.listener);
    zh_single_fini(&u);
}

Test(tcp_wire, a_hole_in_a_receive_batch_is_acknowledged_at_once)
{
    zh_single_t u;
    zh_single_init(&u, NULL);
    ep_t e = {0};
    zh_tcp_seg_t sa, r;
    uint32_t iss = establish(&u, &e, NULL, 0, &sa);
    queue_data(&u, iss, 0, 2);
    queue_data(&u, iss, 3, 2); /* segment 2 missing */
    zbuf_ip_poll(u.s);
    cr_assert_eq(e.rx_bytes, 200);
    cr_assert_eq(u.ntx, 2, "a duplicate ACK for each segment above the hole, nothing more");
    for (int i = 0; i < 2; i++) {
        zh_tx_tcp(&u, i, &r);
        cr_assert_eq(r.ack, PEER_ISN + 1 + 200, "ACK %d points at the hole", i);
    }
    zh_single_clear(&u);
    /* The hole filled in the next batch: acknowledged at once, in full. */
    queue_data(&u, iss, 2, 1);
    zbuf_ip_poll(u.s);
    cr_assert_eq(e.rx_bytes, 500);
    cr_assert_eq(u.ntx, 1);
    zh_tx_tcp(&u, 0, &r);
    cr_assert_eq(r.ack, PEER_ISN + 1 + 500);
    zbuf_ip_tcp_abort(e.pcb);
    zbuf_ip_tcp_close(e.listener);
    zh_single_fini(&u);
}

Test(tcp_wire, a_connection_aborted_in_its_receive_batch_owes_no_ack)
{
    zh_single_t u;
    zh_single_init(&u, NULL);
    ep_t e = {0};
    zh_tcp_seg_t sa, r;
    uint32_t iss = establish(&u, &e, NULL, 0, &sa);
    e.abort_at = 3; /* after the second segment put it on the list */
    queue_data(&u, iss, 0, 4);
    zbuf_ip_poll(u.s);
    cr_assert_null(e.pcb);
    cr_assert_eq(e.rx_bytes, 300);
    cr_assert_eq(u.ntx, 2, "the abort's reset, and one for the segment after it");
    for (int i = 0; i < u.ntx; i++) {
        zh_tx_tcp(&u, i, &r);
        cr_assert(r.flags & 0x04, "frame %d: a reset, no ACK of the batch", i);
    }
    zh_single_clear(&u);
    zbuf_ip_tcp_close(e.listener);
    zh_single_fini(&u);
}

Test(tcp_wire, delayed_ack_waits_for_a_second_segment_or_the_timer)
{
    zh_single_t u;
    zh_single_init(&u, NULL);
    ep_t e = {0};
    zh_tcp_seg_t sa;
    uint32_t iss = establish(&u, &e, NULL, 0, &sa);
    send_seg(&u, PEER_ISN + 1, iss + 1, 0x18, NULL, 0, "one");
    cr_assert_eq(e.rx_bytes, 3);
    cr_assert_eq(u.ntx, 0, "first segment: ACK delayed");
    send_seg(&u, PEER_ISN + 4, iss + 1, 0x18, NULL, 0, "two");
    cr_assert_eq(u.ntx, 1, "second segment: ACK now");
    zh_tcp_seg_t r;
    zh_tx_tcp(&u, 0, &r);
    cr_assert_eq(r.ack, PEER_ISN + 7);
    zh_single_clear(&u);
    send_seg(&u, PEER_ISN + 7, iss + 1, 0x18, NULL, 0, "three");
    cr_assert_eq(u.ntx, 0);
    uint64_t d = zbuf_ip_next_deadline(u.s);
    cr_assert_leq(d, u.now + ZBUF_IP_TCP_DELACK_MS);
    u.now = d;
    zbuf_ip_poll(u.s);
    cr_assert_eq(u.ntx, 1, "the delayed-ACK timer sends it");
    zh_tx_tcp(&u, 0, &r);
    cr_assert_eq(r.ack, PEER_ISN + 12);
    zbuf_ip_tcp_abort(e.pcb);
    zbuf_ip_tcp_close(e.listener);
    ep_fini(&e);
    zh_single_fini(&u);
}

Test(tcp_wire, out_of_order_segment_is_acked_at_once_with_the_old_number)
{
    zh_single_t u;
    zh_single_init(&u, NULL);
    ep_t e = {0};
    zh_tcp_seg_t sa;
    uint32_t iss = establish(&u, &e, NULL, 0, &sa);
    send_seg(&u, PEER_ISN + 11, iss + 1, 0x18, NULL, 0, "later");
    cr_assert_eq(u.ntx, 1, "a duplicate ACK drives the sender's fast retransmit");
    zh_tcp_seg_t r;
    zh_tx_tcp(&u, 0, &r);
    cr_assert_eq(r.ack, PEER_ISN + 1);
    zbuf_ip_tcp_abort(e.pcb);
    zbuf_ip_tcp_close(e.listener);
    zh_single_fini(&u);
}

Test(tcp_wire, a_driver_scribbling_on_sent_frames_cannot_corrupt_retransmissions)
{
    zh_single_t u;
    zh_single_init(&u, NULL);
    ep_t e = {0};
    zh_tcp_seg_t sa;
    establish(&u, &e, mss1460, sizeof mss1460, &sa);
    /* Library-owned payload: writable while only the application's zbuf
     * holds it; shared (hence read-only) once TCP queues it and sends a dup. */
    zbuf_t *z;
    zbuf_create(&z);
    char msg[600];
    for (size_t i = 0; i < sizeof msg; i++)
        msg[i] = (char)('a' + i % 26);
    zbuf_append_copy(z, msg, sizeof msg);
    cr_assert(zbuf_writable(z, 0, sizeof msg));
    cr_assert_eq(zbuf_ip_tcp_write(e.pcb, z), 0);
    cr_assert_eq(u.ntx, 1);
    zbuf_t *f = u.tx[0];
    size_t hdrs = 14 + 20 + 20;
    cr_assert_eq(zbuf_length(f), hdrs + sizeof msg);
    cr_assert(!zbuf_writable(f, hdrs, sizeof msg), "payload shared with the retransmission queue");
    cr_assert(zbuf_writable(f, 0, hdrs), "headers are the frame's own");
    cr_assert_geq(zbuf_seg_count(f), 2, "headers in a separate segment, no flattening");
    /* The driver does what it may: scribble over every writable byte. */
    for (zbuf_seg_t *s = zbuf_seg_first(f); s; s = zbuf_seg_next(f, s)) {
        size_t off;
        cr_assert_eq(zbuf_locate(f, s, 0, &off), 0);
        if (zbuf_writable(f, off, zbuf_seg_length(f, s)))
            memset(zbuf_seg_data(f, s), 0xee, zbuf_seg_length(f, s));
    }
    zh_single_clear(&u);
    u.now = zbuf_ip_next_deadline(u.s); /* the retransmission timer */
    zbuf_ip_poll(u.s);
    cr_assert_eq(u.ntx, 1, "retransmitted");
    zh_tcp_seg_t r;
    cr_assert(zh_tx_tcp(&u, 0, &r), "a valid TCP segment (checksums verified)");
    cr_assert_eq(r.dlen, sizeof msg);
    char got[sizeof msg];
    zbuf_copyout(u.tx[0], hdrs, got, sizeof got);
    cr_assert_eq(memcmp(got, msg, sizeof msg), 0, "payload intact");
    zbuf_ip_tcp_abort(e.pcb);
    zbuf_ip_tcp_close(e.listener);
    zh_single_fini(&u);
}

Test(tcp_wire, limited_transmit_then_fast_retransmit_and_early_retransmit)
{
    zh_single_t u;
    zh_single_init(&u, NULL);
    ep_t e = {0};
    zh_tcp_seg_t sa, r;
    uint32_t iss = establish(&u, &e, mss1460, sizeof mss1460, &sa);
    uint32_t base = iss + 1;
    static char data[14 * 1460];
    zbuf_t *z;
    zbuf_create(&z);
    zbuf_append_buf(z, data, sizeof data, NULL, NULL);
    cr_assert_eq(zbuf_ip_tcp_write(e.pcb, z), 0);
    cr_assert_eq(u.ntx, 10, "the congestion window holds ten");
    zh_single_clear(&u);
    /* First loss: each of the first two duplicates lets one new segment out. */
    for (int d = 1; d <= 2; d++) {
        send_seg(&u, PEER_ISN + 1, base, 0x10, NULL, 0, NULL);
        cr_assert_eq(u.ntx, 1, "duplicate %d: one new segment (RFC 3042)", d);
        cr_assert(zh_tx_tcp(&u, 0, &r));
        cr_assert_eq(r.seq, base + (uint32_t)(9 + d) * 1460);
        zh_single_clear(&u);
    }
    send_seg(&u, PEER_ISN + 1, base, 0x10, NULL, 0, NULL);
    cr_assert_geq(u.ntx, 1);
    cr_assert(zh_tx_tcp(&u, 0, &r));
    cr_assert_eq(r.seq, base, "third duplicate: fast retransmit");
    zh_single_clear(&u);
    /* Everything sent so far arrives: recovery ends, the last two go. */
    send_seg(&u, PEER_ISN + 1, base + 12 * 1460, 0x10, NULL, 0, NULL);
    cr_assert_eq(u.ntx, 2);
    zh_single_clear(&u);
    send_seg(&u, PEER_ISN + 1, base + 13 * 1460, 0x10, NULL, 0, NULL);
    cr_assert_eq(u.ntx, 0);
    /* One segment flies, nothing new waits: one duplicate is enough
     * (RFC 5827 early retransmit). */
    send_seg(&u, PEER_ISN + 1, base + 13 * 1460, 0x10, NULL, 0, NULL);
    cr_assert_geq(u.ntx, 1, "early retransmit");
    cr_assert(zh_tx_tcp(&u, 0, &r));
    cr_assert_eq(r.seq, base + 13 * 1460);
    zbuf_ip_stats_t st;
    zbuf_ip_stats(u.s, &st);
    cr_assert_eq(st.tcp_fast_retransmits, 2);
    cr_assert_eq(st.tcp_rto, 0);
    zbuf_ip_tcp_abort(e.pcb);
    zbuf_ip_tcp_close(e.listener);
    zh_single_fini(&u);
}
