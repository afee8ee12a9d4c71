/* SPDX-License-Identifier: MIT */
/*
 * The attacks of issue 10 on the in-memory link, one test per class, each
 * ending with the same check: A answers a ping within a second and a new
 * connection moves data through it (hx_check_recovered()).  The attacker
 * is a third station on the link that forges addresses (attack.h); A
 * reads into a pool of HX_POOL buffers, as a NIC driver would, and every
 * test also checks that the pool never ran dry (rx_no_buffer).
 *
 * The same classes over TAP against the kernel: test_hardening_tap.c.
 * ZBUF_STACK_SOAK=N repeats the mixed-attack stress N times with more
 * traffic (not in CI).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attack.h"
#include "support.h"

ZT_SUITE(hardening);

#define HX_POOL 512 /* A's receive buffers: 1 MiB of 2 KiB buffers */

static void assert_pool_never_dry(hx_t *h)
{
    zbuf_ip_stats_t st = hx_stats(h->p.a);
    zbuf_ip_link_stats_t ls;
    zbuf_ip_link_stats(h->p.link, &ls);
    cr_assert_eq(st.rx_no_buffer, 0, "A's pool ran dry: %llu frames dropped (link: %llu)",
                 (unsigned long long)st.rx_no_buffer, (unsigned long long)ls.no_buffer);
}

/* ------------------------------------------------ 1. pinning the pool */

Test(hardening, out_of_order_one_byte_segments_cannot_pin_the_pool)
{
    hx_t h;
    hx_init(&h, HX_POOL, NULL);
    /* Eight connections, each 128 one-byte segments behind a hole that is
     * never filled: 1024 segments for 512 buffers. */
    enum { CONNS = 8 };
    hx_conn_t c[CONNS];
    for (int k = 0; k < CONNS; k++) {
        c[k] = (hx_conn_t){.ip = ZBUF_IP_ADDR(192, 0, 2, 50 + k), .port = (uint16_t)(40000 + k)};
        hx_conn_open(&h, &c[k], HX_ECHO, 65535, NULL, 0);
    }
    for (int i = 0; i < ZBUF_IP_TCP_OOO_SEGS; i++) {
        for (int k = 0; k < CONNS; k++)
            hx_conn_send(&h, &c[k], HX_ECHO, 1 + (uint32_t)i, 0x10, 65535, (const uint8_t *)"x", 1);
        hx_run(&h, 1);
    }
    hx_run(&h, 50);
    zbuf_ip_stats_t st = hx_stats(h.p.a);
    fprintf(stderr, "ooo pinning: queued %llu, collapsed %llu bytes in %llu copies, pruned %llu, "
            "pressure drops %llu\n", (unsigned long long)st.tcp_ooo_queued,
            (unsigned long long)st.rx_collapsed_bytes, (unsigned long long)st.rx_collapses,
            (unsigned long long)st.tcp_ooo_pruned, (unsigned long long)st.rx_pressure_drops);
    /* The connections stay, their holes unfilled: A is not deaf. */
    hx_check_recovered(&h, 64 * 1024);
    assert_pool_never_dry(&h);
    cr_assert_gt(st.rx_collapses + st.tcp_ooo_pruned + st.rx_pressure_drops, 0,
                 "the pool's pressure was never met?");
    hx_fini(&h);
}

Test(hardening, zero_window_peer_feeding_the_echo_one_byte_segments_cannot_pin_the_pool)
{
    hx_t h;
    hx_init(&h, HX_POOL, NULL);
    /* The echo service puts what it receives into its send queue, which a
     * peer keeping its window shut never drains: 3000 one-byte segments in
     * order, each in a 2 KiB pool buffer. */
    hx_conn_t c = {.ip = ZBUF_IP_ADDR(192, 0, 2, 60), .port = 41000};
    hx_conn_open(&h, &c, HX_ECHO, 0, NULL, 0);
    for (int i = 0; i < 3000; i++) {
        hx_conn_send(&h, &c, HX_ECHO, 0, 0x18, 0, (const uint8_t *)"y", 1);
        c.snd_nxt++;
        if (i % 32 == 31)
            hx_run(&h, 1);
    }
    hx_run(&h, 100);
    zbuf_ip_stats_t st = hx_stats(h.p.a);
    fprintf(stderr, "zero-window echo: %llu bytes in, collapsed %llu bytes, echo holds %ld\n",
            (unsigned long long)st.tcp_rx_payload, (unsigned long long)st.rx_collapsed_bytes,
            h.svc.echoed);
    hx_check_recovered(&h, 64 * 1024);
    assert_pool_never_dry(&h);
    cr_assert_geq(h.svc.echoed, 2900, "the attack did not get through to the echo service");
    cr_assert_gt(st.rx_collapses, 0, "the pool's pressure was never met?");
    hx_fini(&h);
}

Test(hardening, out_of_order_full_segments_reach_the_reserve_and_are_pruned)
{
    hx_t h;
    hx_init(&h, HX_POOL, NULL);
    /* Segments of 1200 bytes use more than half their buffer: above the
     * reserve they stay where they are; twelve connections of 54 of them
     * (what a 65535-byte window takes) behind a hole would take more than
     * the 512 buffers.  At the reserve they are pruned, and further ones
     * dropped, rather than pinned. */
    enum { CONNS = 12 };
    static uint8_t big[1200];
    hx_conn_t c[CONNS];
    for (int k = 0; k < CONNS; k++) {
        c[k] = (hx_conn_t){.ip = ZBUF_IP_ADDR(192, 0, 2, 40 + k), .port = (uint16_t)(48000 + k)};
        hx_conn_open(&h, &c[k], HX_ECHO, 65535, NULL, 0);
    }
    for (int i = 0; i < 54; i++) {
        for (int k = 0; k < CONNS; k++)
            hx_conn_send(&h, &c[k], HX_ECHO, 1 + (uint32_t)sizeof big * (uint32_t)i, 0x10, 65535,
                         big, sizeof big);
        hx_run(&h, 1);
    }
    hx_run(&h, 50);
    zbuf_ip_stats_t st = hx_stats(h.p.a);
    fprintf(stderr, "full-sized out-of-order: queued %llu, prunes %llu (%llu segments), pressure "
            "drops %llu\n", (unsigned long long)st.tcp_ooo_queued,
            (unsigned long long)st.rx_pressure_prunes, (unsigned long long)st.tcp_ooo_pruned,
            (unsigned long long)st.rx_pressure_drops);
    hx_check_recovered(&h, 64 * 1024);
    assert_pool_never_dry(&h);
    cr_assert_geq(st.rx_pressure_prunes, 1, "the reserve was never reached?");
    cr_assert_gt(st.tcp_ooo_pruned, 0);
    hx_fini(&h);
}

/* An application that keeps what it receives (no zbuf_ip_tcp_recved()). */
static int hold_accept(void *arg, zbuf_ip_tcp_t *l, zbuf_ip_tcp_t *c);

struct holder {
    zbuf_ip_tcp_t *pcb;
    zbuf_t *held;
};

static void hold_recv(void *arg, zbuf_ip_tcp_t *pcb, zbuf_t *d)
{
    (void)pcb;
    struct holder *k = arg;
    if (d == NULL)
        return;
    if (k->held)
        zbuf_append(k->held, d);
    else
        k->held = d;
}

static int hold_accept(void *arg, zbuf_ip_tcp_t *l, zbuf_ip_tcp_t *c)
{
    (void)l;
    struct holder *k = arg;
    k->pcb = c;
    zbuf_ip_tcp_callbacks_t cb = {.recv = hold_recv};
    zbuf_ip_tcp_set_callbacks(c, &cb, k);
    return 0;
}

Test(hardening, a_connection_holds_at_most_its_receive_memory)
{
    hx_t h;
    hx_init(&h, 4096, NULL); /* a large pool: the connection's own limit binds */
    struct holder k = {0};
    zbuf_ip_tcp_t *l;
    cr_assert_eq(zbuf_ip_tcp_new(h.p.a, &l), 0);
    cr_assert_eq(zbuf_ip_tcp_bind(l, ZBUF_IP_ANY, 9), 0);
    cr_assert_eq(zbuf_ip_tcp_listen(l, 4), 0);
    zbuf_ip_tcp_callbacks_t lcb = {.accept = hold_accept};
    zbuf_ip_tcp_set_callbacks(l, &lcb, &k);
    /* One-byte segments in order, each in a 2 KiB buffer: the window
     * (bytes) would take 256 Ki of them; the memory limit stops them. */
    hx_conn_t c = {.ip = ZBUF_IP_ADDR(192, 0, 2, 30), .port = 49000};
    hx_conn_open(&h, &c, 9, 65535, NULL, 0);
    cr_assert_not_null(k.pcb);
    size_t taken = 0;
    for (int i = 0; i < 1500; i++) {
        hx_conn_send(&h, &c, 9, 0, 0x18, 65535, (const uint8_t *)"m", 1);
        c.snd_nxt++;
        if (i % 16 == 15)
            hx_run(&h, 1);
    }
    hx_run(&h, 50);
    taken = zbuf_length(k.held);
    zbuf_ip_tcp_info_t ti;
    zbuf_ip_tcp_info(k.pcb, &ti);
    zbuf_ip_stats_t st = hx_stats(h.p.a);
    fprintf(stderr, "receive memory: %zu one-byte segments held, %zu bytes charged, window %u, "
            "%llu dropped, %llu collapsed\n", taken, ti.rcv_mem, ti.rcv_wnd,
            (unsigned long long)st.tcp_rcv_mem_drops, (unsigned long long)st.rx_collapses);
    cr_assert_lt(taken, 1500, "every one-byte segment was kept");
    cr_assert_leq(ti.rcv_mem, (size_t)ZBUF_IP_TCP_RCV_MEM_MULT * ZBUF_IP_TCP_RCV_BUF);
    cr_assert_gt(st.tcp_rcv_mem_drops, 0);
    cr_assert_lt(ti.rcv_wnd, 65535, "the window did not follow the memory");
    /* The application lets go: the connection takes more, from where A's
     * ACKs say it stopped. */
    zbuf_ip_tcp_recved(k.pcb, taken);
    zbuf_delete(k.held);
    k.held = NULL;
    hx_seg_t s;
    for (size_t i = 0; hx_next_tcp(&h, &i, &s);)
        if (s.dst == c.ip)
            c.snd_nxt = s.t.ack;
    hx_conn_send(&h, &c, 9, 0, 0x18, 65535, (const uint8_t *)"n", 1);
    hx_run(&h, 10);
    cr_assert_eq(zbuf_length(k.held), 1, "nothing taken after the release");
    zbuf_ip_tcp_info(k.pcb, &ti);
    cr_assert_leq(ti.rcv_mem, 2 * (2048 + 128u));
    zbuf_delete(k.held);
    zbuf_ip_tcp_abort(k.pcb);
    zbuf_ip_tcp_close(l);
    hx_check_recovered(&h, 16 * 1024);
    hx_fini(&h);
}

/* ------------------------------------------------------ 2. SYN flood */

Test(hardening, syn_flood_from_spoofed_sources_leaves_the_port_open)
{
    hx_t h;
    hx_init(&h, HX_POOL, NULL);
    for (int i = 0; i < 2000; i++) {
        uint32_t src = ZBUF_IP_ADDR(192, 0, 2, 10 + i % 200); /* on-link, never answer ARP */
        hx_tcp(&h, src, (uint16_t)(1024 + i), HX_ECHO, 0x1000u * (uint32_t)i, 0, 0x02, 65535,
               (const uint8_t[]){2, 4, 0x05, 0xb4}, 4, NULL, 0);
        if (i % 50 == 49)
            hx_run(&h, 10);
    }
    zbuf_ip_stats_t st = hx_stats(h.p.a);
    fprintf(stderr, "SYN flood: %u PCBs, %llu cookies sent, %llu half-open dropped early, "
            "%llu ARP requests (%llu held back), %llu pending ARP entries evicted\n",
            st.tcp_pcbs, (unsigned long long)st.tcp_syncookies_sent,
            (unsigned long long)st.tcp_half_open_drops, (unsigned long long)st.arp_requests_tx,
            (unsigned long long)st.arp_requests_limited,
            (unsigned long long)st.arp_pending_evicted);
    hx_check_recovered(&h, 64 * 1024);
    cr_assert_leq(st.tcp_pcbs, 1 + ZBUF_IP_TCP_BACKLOG_MAX, "state beyond the backlog");
    cr_assert_gt(st.tcp_syncookies_sent, 1000);
    cr_assert_leq(st.arp_requests_tx, 3u * ZBUF_IP_ARP_REQUESTS_PER_SEC,
                  "ARP requests are rate-limited");
    st = hx_stats(h.p.a);
    cr_assert_geq(st.tcp_syncookies_ok, 1, "the new connection came through a cookie");
    assert_pool_never_dry(&h);
    hx_fini(&h);
}

/* A connection made through a cookie keeps what the SYN negotiated: the
 * MSS (from the table: 1460 less the timestamps), window scale and SACK in
 * the timestamp's low bits; without timestamps, neither (as Linux). */
static void cookie_connection(bool timestamps)
{
    zbuf_ip_config_t cfg;
    zbuf_ip_config_init(&cfg);
    cfg.tcp_no_timestamps = !timestamps;
    hx_t h;
    hx_init(&h, HX_POOL, &cfg);
    for (int i = 0; i < ZBUF_IP_TCP_BACKLOG_MAX; i++) /* fill the backlog */
        hx_tcp(&h, ZBUF_IP_ADDR(192, 0, 2, 100 + i), (uint16_t)(3000 + i), HX_ECHO, 99, 0, 0x02,
               65535, NULL, 0, NULL, 0);
    hx_run(&h, 5);
    zbuf_ip_tcp_t *c;
    cr_assert_eq(zbuf_ip_tcp_new(h.p.b, &c), 0);
    cr_assert_eq(zbuf_ip_tcp_connect(c, ZH_A, HX_ECHO), 0);
    hx_run(&h, 20);
    cr_assert_eq(zbuf_ip_tcp_state(c), ZBUF_IP_TCP_ESTABLISHED);
    zbuf_ip_tcp_info_t bi, ai = {0};
    zbuf_ip_tcp_info(c, &bi);
    for (struct hx_echo *e = h.svc.conns; e; e = e->next) {
        zbuf_ip_tcp_info_t x;
        zbuf_ip_tcp_info(e->pcb, &x);
        if (x.remote_port == bi.local_port)
            ai = x;
    }
    cr_assert(ai.syncookie, "the connection did not come through a cookie");
    cr_assert_eq(ai.ts_ok, timestamps);
    cr_assert_eq(ai.sack_ok, timestamps, "SACK-permitted kept only in the timestamp");
    cr_assert_eq(ai.snd_wscale, timestamps ? bi.rcv_wscale : 0);
    cr_assert_eq(ai.rcv_wscale, timestamps ? bi.snd_wscale : 0);
    cr_assert_eq(ai.mss, timestamps ? 1460 - 12 : 1460);
    cr_assert_eq(bi.snd_wscale, ai.rcv_wscale, "both ends agree on the scales");
    zbuf_ip_tcp_abort(c);
    hx_check_recovered(&h, 256 * 1024); /* window scaling in use both ways */
    hx_fini(&h);
}

Test(hardening, syn_cookie_keeps_mss_window_scale_sack_and_timestamps)
{
    cookie_connection(true);
}

Test(hardening, syn_cookie_without_timestamps_keeps_the_mss_only)
{
    cookie_connection(false);
}

/* ------------------------------------------------- 3. neighbour table */

Test(hardening, unresolvable_neighbours_never_evict_one_in_use)
{
    hx_t h;
    hx_init(&h, HX_POOL, NULL);
    /* 200 spoofed on-link addresses that never answer ARP ping A, 100 per
     * second each way of the table's bounds, while B pings once a
     * second: every one of B's pings is answered at once. */
    int answered = 0;
    for (int sec = 0; sec < 5; sec++) {
        for (int i = 0; i < 200; i++) {
            uint32_t src = ZBUF_IP_ADDR(192, 0, 2, 20 + i);
            uint8_t echo[16] = {8, 0, 0, 0, 0, 1, 0, 1};
            echo[7] = (uint8_t)i;
            hx_icmp(&h, src, 8, 0, 0x00010001u, echo + 8, 8);
            if (i % 20 == 19)
                hx_run(&h, 5);
        }
        answered += hx_ping(&h, 1000);
        hx_run(&h, 300);
    }
    zbuf_ip_stats_t st = hx_stats(h.p.a);
    fprintf(stderr, "neighbour flood: B answered %d of 5; pending evicted %llu, ARP requests %llu "
            "(%llu held back), queue drops %llu\n", answered,
            (unsigned long long)st.arp_pending_evicted, (unsigned long long)st.arp_requests_tx,
            (unsigned long long)st.arp_requests_limited, (unsigned long long)st.arp_queue_drops);
    cr_assert_eq(answered, 5, "the real neighbour's pings went unanswered during the attack");
    cr_assert_gt(st.arp_pending_evicted, 0);
    cr_assert_leq(st.arp_requests_tx, 7u * ZBUF_IP_ARP_REQUESTS_PER_SEC,
                  "ARP requests are rate-limited");
    hx_check_recovered(&h, 64 * 1024);
    assert_pool_never_dry(&h);
    hx_fini(&h);
}

/* --------------------------------- 4. and 5. sources no host may have */

static void provoke_from(hx_t *h, uint32_t src, uint16_t sport)
{
    static const uint8_t echo_req[16] = {0, 0, 0, 0, 0, 0, 0, 0, 'm', 'a', 'r', 't', 'i', 'a', 'n'};
    hx_icmp(h, src, 8, 0, 0x00070007u, echo_req, sizeof echo_req);
    hx_udp(h, src, sport, ZH_A, HX_ECHO, (const uint8_t *)"echo me", 7);
    hx_tcp(h, src, sport, HX_ECHO, 1000, 0, 0x02, 65535, NULL, 0, NULL, 0); /* SYN */
    hx_tcp(h, src, sport, 9, 1000, 5000, 0x10, 65535, NULL, 0, NULL, 0);   /* draws a RST */
}

Test(hardening, datagrams_from_broadcast_multicast_loopback_or_our_own_address_get_no_answer)
{
    hx_t h;
    hx_init(&h, HX_POOL, NULL);
    static const uint32_t bad[] = {
        ZBUF_IP_ADDR(192, 0, 2, 255),   /* the subnet's directed broadcast */
        ZBUF_IP_ADDR(192, 0, 2, 0),     /* its all-zeros host (old broadcast) */
        ZBUF_IP_ADDR(255, 255, 255, 255), ZBUF_IP_ADDR(224, 0, 0, 5), ZBUF_IP_ADDR(240, 0, 0, 1),
        ZBUF_IP_ADDR(127, 0, 0, 1),     ZBUF_IP_ADDR(0, 1, 2, 3),
        ZH_A,                           /* our own (LAND) */
    };
    size_t from = h.ncap;
    uint64_t bad0 = hx_stats(h.p.a).ip_bad_source;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        provoke_from(&h, bad[i], (uint16_t)(5000 + i));
    hx_run(&h, 2000);
    zbuf_ip_stats_t st = hx_stats(h.p.a);
    cr_assert_eq(hx_count_to(&h, from, 0), 0, "A answered a datagram from an impossible source");
    cr_assert_eq(st.ip_bad_source - bad0, 4 * (sizeof bad / sizeof bad[0]));

    /* A unicast datagram in a link-layer broadcast frame (RFC 1122 3.3.6),
     * and UDP to the subnet broadcast from a good source: no answer
     * either, unless the PCB asked for broadcasts. */
    static const uint8_t req[12] = {8, 0, 0, 0, 0, 9, 0, 9, 'b', 'c', 'a', 's'};
    uint8_t m[12];
    memcpy(m, req, sizeof m);
    uint16_t ck = zh_csum(m, sizeof m);
    m[2] = (uint8_t)(ck >> 8);
    m[3] = (uint8_t)ck;
    hx_ip(&h, NULL, ZBUF_IP_ADDR(192, 0, 2, 77), ZH_A, true, 1, m, sizeof m);
    hx_udp(&h, ZBUF_IP_ADDR(192, 0, 2, 77), 5555, ZBUF_IP_ADDR(192, 0, 2, 255), HX_ECHO,
           (const uint8_t *)"fraggle", 7);
    hx_arp_announce(&h, ZBUF_IP_ADDR(192, 0, 2, 77));
    hx_run(&h, 100);
    st = hx_stats(h.p.a);
    cr_assert_eq(st.ip_l2_bcast_drops, 1);
    cr_assert_eq(st.udp_bcast_drops, 1);
    cr_assert_eq(hx_count_to(&h, from, 0), 0, "A answered a broadcast");
    zbuf_ip_udp_set_broadcast(h.svc.echo_u, true); /* a service that wants them gets them */
    hx_udp(&h, ZBUF_IP_ADDR(192, 0, 2, 77), 5555, ZBUF_IP_ADDR(192, 0, 2, 255), HX_ECHO,
           (const uint8_t *)"wanted", 6);
    hx_run(&h, 100);
    cr_assert_eq(hx_count_to(&h, from, ZBUF_IP_ADDR(192, 0, 2, 77)), 1,
                 "the broadcast was delivered to the PCB that asked");
    hx_check_recovered(&h, 64 * 1024);
    assert_pool_never_dry(&h);
    hx_fini(&h);
}

Test(hardening, syns_from_our_own_address_fill_nothing)
{
    hx_t h;
    hx_init(&h, HX_POOL, NULL);
    /* LAND: 70 SYNs from A's own address to its echo port, more than its
     * backlog takes. */
    for (int i = 0; i < 70; i++)
        hx_tcp(&h, ZH_A, (uint16_t)(10000 + i), HX_ECHO, 0x5000u + (uint32_t)i * 77, 0, 0x02,
               65535, NULL, 0, NULL, 0);
    hx_run(&h, 100);
    zbuf_ip_stats_t st = hx_stats(h.p.a);
    hx_check_recovered(&h, 64 * 1024);
    cr_assert_eq(st.tcp_pcbs, 1, "half-open connections from ourselves: %u PCBs", st.tcp_pcbs);
    cr_assert_geq(st.ip_bad_source, 70);
    assert_pool_never_dry(&h);
    hx_fini(&h);
}

/* ------------------------------------------------- 6. challenge ACKs */

/* A's latest segment to B on B's connection (port `bport`). */
static bool last_to_b(hx_t *h, uint16_t bport, hx_seg_t *out)
{
    hx_seg_t s;
    bool found = false;
    for (size_t i = 0; hx_next_tcp(h, &i, &s);)
        if (s.dst == ZH_B && s.t.dport == bport) {
            *out = s;
            found = true;
        }
    return found;
}

Test(hardening, one_connection_cannot_spend_another_ones_challenge_acks)
{
    hx_t h;
    hx_init(&h, HX_POOL, NULL);
    /* B's connection, the one an off-path attacker would probe. */
    zbuf_ip_tcp_t *y;
    cr_assert_eq(zbuf_ip_tcp_new(h.p.b, &y), 0);
    cr_assert_eq(zbuf_ip_tcp_connect(y, ZH_A, HX_ECHO), 0);
    hx_run(&h, 50);
    cr_assert_eq(zbuf_ip_tcp_state(y), ZBUF_IP_TCP_ESTABLISHED);
    zbuf_ip_tcp_info_t yi;
    zbuf_ip_tcp_info(y, &yi);
    hx_seg_t s;
    cr_assert(last_to_b(&h, yi.local_port, &s));
    uint32_t b_seq = s.t.ack; /* what A expects from B next */
    /* The attacker's own connection, flooded with in-window RSTs. */
    hx_conn_t x = {.ip = ZBUF_IP_ADDR(192, 0, 2, 66), .port = 42000};
    hx_conn_open(&h, &x, HX_ECHO, 65535, NULL, 0);
    uint64_t ch0 = hx_stats(h.p.a).tcp_challenge_acks;
    size_t from = h.ncap;
    for (int i = 0; i < 300; i++) {
        hx_conn_send(&h, &x, HX_ECHO, 10, 0x04, 0, NULL, 0);
        if (i % 10 == 9)
            hx_run(&h, 2);
    }
    int to_x = hx_count_to(&h, from, x.ip);
    /* ...and in the same second, a forged in-window RST for B's. */
    from = h.ncap;
    hx_tcp(&h, ZH_B, yi.local_port, HX_ECHO, b_seq + 100, 0, 0x04, 0, NULL, 0, NULL, 0);
    hx_run(&h, 5);
    int to_y = 0;
    for (size_t i = from; hx_next_tcp(&h, &i, &s);)
        to_y += s.dst == ZH_B && s.t.dport == yi.local_port && s.t.flags == 0x10 &&
                s.t.ack == b_seq;
    zbuf_ip_stats_t st = hx_stats(h.p.a);
    fprintf(stderr, "challenge ACKs: %d to the flooding connection (of 300 RSTs), %d to the "
            "probed one; %llu sent, %llu limited\n", to_x, to_y,
            (unsigned long long)(st.tcp_challenge_acks - ch0),
            (unsigned long long)st.tcp_challenge_acks_limited);
    cr_assert_leq(to_x, 2, "per-connection limit: one per %d ms", ZBUF_IP_TCP_INVALID_RATELIMIT_MS);
    cr_assert_eq(to_y, 1, "the probed connection's challenge ACK was spent by another one");
    cr_assert_eq(zbuf_ip_tcp_state(y), ZBUF_IP_TCP_ESTABLISHED, "B's connection was reset");
    zbuf_ip_tcp_abort(y);
    hx_check_recovered(&h, 64 * 1024);
    hx_fini(&h);
}

/* ------------------------------------------------------- 7. window edge */

Test(hardening, the_window_accepted_is_the_window_advertised)
{
    hx_t h;
    hx_init(&h, HX_POOL, NULL);
    /* Without window scaling the field says at most 65535 bytes, however
     * large the buffer (256 KiB here): nothing beyond is taken, and a RST
     * beyond it is not challenged. */
    hx_conn_t c = {.ip = ZBUF_IP_ADDR(192, 0, 2, 70), .port = 43000};
    hx_conn_open(&h, &c, HX_ECHO, 65535, NULL, 0);
    cr_assert_leq(c.a_wnd, 65535);
    uint64_t q0 = hx_stats(h.p.a).tcp_ooo_queued, ch0 = hx_stats(h.p.a).tcp_challenge_acks;
    hx_conn_send(&h, &c, HX_ECHO, 65535 + 100, 0x10, 65535, (const uint8_t *)"beyond", 6);
    hx_run(&h, 600);
    hx_conn_send(&h, &c, HX_ECHO, 70000, 0x04, 0, NULL, 0);
    hx_run(&h, 600);
    zbuf_ip_stats_t st = hx_stats(h.p.a);
    cr_assert_eq(st.tcp_ooo_queued, q0, "a segment beyond the advertised window was queued");
    cr_assert_eq(st.tcp_challenge_acks, ch0, "a RST beyond the advertised window was challenged");
    hx_conn_send(&h, &c, HX_ECHO, 30000, 0x04, 0, NULL, 0);
    hx_run(&h, 10);
    cr_assert_eq(hx_stats(h.p.a).tcp_challenge_acks, ch0 + 1, "in the window: challenged");
    cr_assert_eq(hx_stats(h.p.a).tcp_rst_rx, st.tcp_rst_rx + 1);

    /* With window scaling, a SYN-ACK's field is not scaled: until the next
     * segment, the edge is 65535 bytes ahead, not the buffer's. */
    hx_conn_t d = {.ip = ZBUF_IP_ADDR(192, 0, 2, 71), .port = 43001};
    static const uint8_t ws[] = {1, 3, 3, 7}; /* NOP, window scale 7 */
    hx_arp_announce(&h, d.ip);
    hx_run(&h, 5);
    uint8_t opts[8] = {2, 4, 0x05, 0xb4};
    memcpy(opts + 4, ws, 4);
    d.snd_nxt = 777;
    size_t from = h.ncap;
    hx_tcp(&h, d.ip, d.port, HX_ECHO, d.snd_nxt++, 0, 0x02, 65535, opts, 8, NULL, 0);
    hx_run(&h, 5);
    hx_seg_t s;
    bool found = false;
    while (!found && hx_next_tcp(&h, &from, &s))
        found = s.dst == d.ip && s.t.flags == 0x12;
    cr_assert(found);
    d.rcv_nxt = s.t.seq + 1;
    cr_assert_eq(s.t.wnd, 65535);
    /* The handshake's ACK carries data just past 65535. */
    q0 = hx_stats(h.p.a).tcp_ooo_queued;
    hx_tcp(&h, d.ip, d.port, HX_ECHO, d.snd_nxt + 65535 + 10, d.rcv_nxt, 0x10, 512, NULL, 0,
           (const uint8_t *)"past", 4);
    hx_run(&h, 10);
    cr_assert_eq(hx_stats(h.p.a).tcp_ooo_queued, q0, "taken beyond the SYN-ACK's window");
    hx_check_recovered(&h, 64 * 1024);
    hx_fini(&h);
}

/* ------------------------------------------------------- 8. ICMP errors */

/* An ICMP error quoting a datagram src -> dst (proto, total length `len`)
 * whose transport header starts with sport, dport and `word` (TCP: the
 * sequence number). */
static void icmp_err(hx_t *h, uint32_t from, uint8_t type, uint8_t code, uint16_t mtu,
                     uint32_t src, uint32_t dst, uint8_t proto, uint16_t len, uint16_t sport,
                     uint16_t dport, uint32_t word)
{
    uint8_t q[28];
    zh_ip(q, src, dst, proto, len - 20);
    q[20] = (uint8_t)(sport >> 8), q[21] = (uint8_t)sport;
    q[22] = (uint8_t)(dport >> 8), q[23] = (uint8_t)dport;
    q[24] = (uint8_t)(word >> 24), q[25] = (uint8_t)(word >> 16), q[26] = (uint8_t)(word >> 8),
    q[27] = (uint8_t)word;
    hx_icmp(h, from, type, code, mtu, q, sizeof q);
}

/* The sequence number of A's latest data segment to B's port `bport`. */
static uint32_t latest_data_seq(hx_t *h, uint16_t bport)
{
    hx_seg_t s, last = {0};
    for (size_t i = 0; hx_next_tcp(h, &i, &s);)
        if (s.dst == ZH_B && s.t.dport == bport && s.t.dlen > 0)
            last = s;
    cr_assert_gt(last.t.dlen, 0, "A sent no data yet");
    return last.t.seq;
}

struct bulk {
    zbuf_ip_tcp_t *pcb;
    size_t total, sent, got;
    uint8_t *data;
    bool bad;
};

static void bk_fill(struct bulk *b)
{
    while (b->sent < b->total) {
        size_t n = b->total - b->sent < 16384 ? b->total - b->sent : 16384;
        if (zbuf_ip_tcp_sndbuf(b->pcb) < n)
            return;
        zbuf_t *z;
        zbuf_create(&z);
        zbuf_append_buf(z, b->data + b->sent, n, NULL, NULL);
        cr_assert_eq(zbuf_ip_tcp_write(b->pcb, z), 0);
        b->sent += n;
    }
}

static void bk_sent(void *arg, zbuf_ip_tcp_t *pcb, size_t n)
{
    (void)pcb;
    (void)n;
    bk_fill(arg);
}

static void bk_recv(void *arg, zbuf_ip_tcp_t *pcb, zbuf_t *d)
{
    struct bulk *b = arg;
    if (d == NULL)
        return;
    size_t n = zbuf_length(d);
    uint8_t *tmp = malloc(n);
    zbuf_copyout(d, 0, tmp, n);
    if (b->got + n > b->total || memcmp(tmp, b->data + b->got, n) != 0)
        b->bad = true;
    free(tmp);
    b->got += n;
    zbuf_delete(d);
    zbuf_ip_tcp_recved(pcb, n);
}

static bool bk_done(void *arg)
{
    struct bulk *b = arg;
    return b->got == b->total;
}

Test(hardening, fragmentation_needed_lowers_the_path_mtu_of_that_connection_only)
{
    hx_t h;
    hx_init(&h, HX_POOL, NULL);
    hx_conn_t other = {.ip = ZBUF_IP_ADDR(192, 0, 2, 97), .port = 45000};
    hx_conn_open(&h, &other, HX_ECHO, 65535, NULL, 0);
    struct bulk b = {.total = 8u << 20};
    b.data = malloc(b.total);
    for (size_t i = 0; i < b.total; i++)
        b.data[i] = zh_pattern(i, 5);
    cr_assert_eq(zbuf_ip_tcp_new(h.p.b, &b.pcb), 0);
    zbuf_ip_tcp_callbacks_t cb = {.recv = bk_recv, .sent = bk_sent};
    zbuf_ip_tcp_set_callbacks(b.pcb, &cb, &b);
    cr_assert_eq(zbuf_ip_tcp_connect(b.pcb, ZH_A, HX_ECHO), 0);
    hx_run(&h, 20);
    bk_fill(&b);
    hx_run(&h, 20); /* A echoes: its segments are in flight */
    zbuf_ip_tcp_info_t bi;
    zbuf_ip_tcp_info(b.pcb, &bi);
    zbuf_ip_tcp_t *a_side = NULL;
    for (struct hx_echo *e = h.svc.conns; e; e = e->next) {
        zbuf_ip_tcp_info_t oi;
        zbuf_ip_tcp_info(e->pcb, &oi);
        if (oi.remote_addr == ZH_B)
            a_side = e->pcb;
    }
    cr_assert_not_null(a_side);
    uint32_t router = ZBUF_IP_ADDR(192, 0, 2, 254);
    zbuf_ip_stats_t s0 = hx_stats(h.p.a);
    /* Each message quotes A's latest data segment, still in flight: B is
     * not polled while A reads the message. */
    uint32_t seq = latest_data_seq(&h, bi.local_port);
    /* Forged: a sequence number outside the flight; an MTU the quoted
     * datagram would have fitted in.  Both ignored. */
    icmp_err(&h, router, 3, 4, 1000, ZH_A, ZH_B, 6, 1500, HX_ECHO, bi.local_port, seq - 10000000u);
    icmp_err(&h, router, 3, 4, 1400, ZH_A, ZH_B, 6, 1000, HX_ECHO, bi.local_port, seq);
    zh_pair_stall(&h.p, h.p.b, 3);
    zbuf_ip_tcp_info_t ai;
    zbuf_ip_tcp_info(a_side, &ai);
    cr_assert_eq(ai.pmtu, 1500);
    cr_assert_eq(hx_stats(h.p.a).icmp_errors_ignored, s0.icmp_errors_ignored + 2);
    /* The real thing: 1000 bytes. */
    hx_run(&h, 3);
    seq = latest_data_seq(&h, bi.local_port);
    icmp_err(&h, router, 3, 4, 1000, ZH_A, ZH_B, 6, 1500, HX_ECHO, bi.local_port, seq);
    zh_pair_stall(&h.p, h.p.b, 3);
    zbuf_ip_tcp_info(a_side, &ai);
    cr_assert_eq(ai.pmtu, 1000);
    cr_assert_eq(ai.mss, 1000 - 40 - 12);
    cr_assert_lt(b.got, b.total / 2, "the transfer is not under way: %zu of %zu", b.got, b.total);
    size_t from = h.ncap;
    cr_assert(hx_until(&h, bk_done, &b, 60000), "%zu of %zu echoed", b.got, b.total);
    cr_assert_not(b.bad);
    int big = 0, small = 0;
    for (size_t i = from; i < h.ncap; i++)
        if (h.cap[i].b[12] == 0x08 && h.cap[i].b[23] == 6) {
            big += h.cap[i].len - 14 > 1000;
            small += h.cap[i].len - 14 <= 1000;
        }
    fprintf(stderr, "path MTU 1000: %d segments after the ICMP, %d above it\n", small + big, big);
    cr_assert_eq(big, 0, "%d segments above the path MTU after the ICMP", big);
    cr_assert_gt(small, 100);
    /* A's other connection keeps its path MTU. */
    for (struct hx_echo *e = h.svc.conns; e; e = e->next) {
        zbuf_ip_tcp_info_t oi;
        zbuf_ip_tcp_info(e->pcb, &oi);
        if (oi.remote_addr == other.ip)
            cr_assert_eq(oi.pmtu, 1500, "another connection's path MTU changed");
    }
    zbuf_ip_tcp_close(b.pcb);
    hx_run(&h, 100);
    free(b.data);
    hx_check_recovered(&h, 64 * 1024);
    hx_fini(&h);
}

Test(hardening, fragmentation_needed_below_the_floor_stops_at_the_floor)
{
    hx_t h;
    hx_init(&h, HX_POOL, NULL);
    struct bulk b = {.total = 512u << 10};
    b.data = malloc(b.total);
    for (size_t i = 0; i < b.total; i++)
        b.data[i] = zh_pattern(i, 6);
    cr_assert_eq(zbuf_ip_tcp_new(h.p.b, &b.pcb), 0);
    zbuf_ip_tcp_callbacks_t cb = {.recv = bk_recv, .sent = bk_sent};
    zbuf_ip_tcp_set_callbacks(b.pcb, &cb, &b);
    cr_assert_eq(zbuf_ip_tcp_connect(b.pcb, ZH_A, HX_ECHO), 0);
    hx_run(&h, 20);
    bk_fill(&b);
    hx_run(&h, 20);
    zbuf_ip_tcp_info_t bi, ai;
    zbuf_ip_tcp_info(b.pcb, &bi);
    icmp_err(&h, ZBUF_IP_ADDR(192, 0, 2, 254), 3, 4, 100, ZH_A, ZH_B, 6, 1500, HX_ECHO,
             bi.local_port, latest_data_seq(&h, bi.local_port));
    zh_pair_stall(&h.p, h.p.b, 3);
    zbuf_ip_tcp_info(h.svc.conns->pcb, &ai);
    cr_assert_eq(ai.pmtu, ZBUF_IP_TCP_PMTU_MIN);
    cr_assert(hx_until(&h, bk_done, &b, 60000), "%zu of %zu echoed", b.got, b.total);
    cr_assert_not(b.bad);
    zbuf_ip_tcp_close(b.pcb);
    hx_run(&h, 100);
    free(b.data);
    hx_check_recovered(&h, 16 * 1024);
    hx_fini(&h);
}

struct uerr {
    int calls, err;
    uint32_t dst;
    uint16_t dport;
};

static void on_uerr(void *arg, zbuf_ip_udp_t *u, int err, uint32_t dst, uint16_t dport)
{
    (void)u;
    struct uerr *e = arg;
    e->calls++;
    e->err = err;
    e->dst = dst;
    e->dport = dport;
}

Test(hardening, port_unreachable_reaches_the_udp_pcb_that_sent_there)
{
    hx_t h;
    hx_init(&h, HX_POOL, NULL);
    zbuf_ip_udp_t *u;
    cr_assert_eq(zbuf_ip_udp_new(h.p.a, &u), 0);
    cr_assert_eq(zbuf_ip_udp_bind(u, ZBUF_IP_ANY, 6000), 0);
    struct uerr e = {0};
    zbuf_ip_udp_set_error(u, on_uerr, &e);
    zbuf_t *z;
    zbuf_create(&z);
    zbuf_append_copy(z, "anyone?", 7);
    cr_assert_eq(zbuf_ip_udp_sendto(u, z, ZH_B, 9999), 0);
    hx_run(&h, 5);
    /* Forged: a destination this PCB never sent to; a port nobody has. */
    icmp_err(&h, ZH_B, 3, 3, 0, ZH_A, ZH_B, 17, 35, 6000, 8888, 0x0023abcd);
    icmp_err(&h, ZH_B, 3, 3, 0, ZH_A, ZH_B, 17, 35, 6001, 9999, 0x0023abcd);
    hx_run(&h, 5);
    cr_assert_eq(e.calls, 0);
    /* B's kernel would say this: */
    icmp_err(&h, ZH_B, 3, 3, 0, ZH_A, ZH_B, 17, 35, 6000, 9999, 0x0023abcd);
    hx_run(&h, 5);
    cr_assert_eq(e.calls, 1);
    cr_assert_eq(e.err, -ECONNREFUSED);
    cr_assert_eq(e.dst, ZH_B);
    cr_assert_eq(e.dport, 9999);
    cr_assert_eq(hx_stats(h.p.a).udp_icmp_errors, 1);
    zbuf_ip_udp_delete(u);
    hx_check_recovered(&h, 16 * 1024);
    hx_fini(&h);
}

struct cerr {
    int err, up;
};

static void ce_error(void *arg, int err)
{
    ((struct cerr *)arg)->err = err;
}

static void ce_connected(void *arg, zbuf_ip_tcp_t *pcb)
{
    (void)pcb;
    ((struct cerr *)arg)->up++;
}

Test(hardening, tcp_icmp_errors_count_only_inside_the_flight)
{
    hx_t h;
    hx_init(&h, HX_POOL, NULL);
    /* A connects to a host that has no such service. */
    uint32_t far = ZBUF_IP_ADDR(192, 0, 2, 99);
    hx_arp_announce(&h, far);
    hx_run(&h, 5);
    struct cerr ce = {0};
    zbuf_ip_tcp_t *t;
    cr_assert_eq(zbuf_ip_tcp_new(h.p.a, &t), 0);
    zbuf_ip_tcp_callbacks_t cb = {.connected = ce_connected, .error = ce_error};
    zbuf_ip_tcp_set_callbacks(t, &cb, &ce);
    size_t from = h.ncap;
    cr_assert_eq(zbuf_ip_tcp_connect(t, far, 80), 0);
    hx_run(&h, 1);
    hx_seg_t s;
    bool found = false;
    while (!found && hx_next_tcp(&h, &from, &s))
        found = s.dst == far && s.t.flags == 0x02;
    cr_assert(found);
    /* Quoting another sequence number: not ours, ignored. */
    icmp_err(&h, far, 3, 3, 0, ZH_A, far, 6, 60, s.t.sport, 80, s.t.seq + 1);
    hx_run(&h, 1);
    cr_assert_eq(ce.err, 0);
    cr_assert_eq(zbuf_ip_tcp_state(t), ZBUF_IP_TCP_SYN_SENT);
    /* Our SYN: a hard error while connecting. */
    icmp_err(&h, far, 3, 3, 0, ZH_A, far, 6, 60, s.t.sport, 80, s.t.seq);
    hx_run(&h, 1);
    cr_assert_eq(ce.err, -ECONNREFUSED, "connect ended with %d", ce.err);

    /* A half-open connection whose SYN-ACK met "host unreachable" goes at
     * once. */
    hx_conn_t c = {.ip = ZBUF_IP_ADDR(192, 0, 2, 98), .port = 44000};
    hx_arp_announce(&h, c.ip);
    hx_run(&h, 5);
    from = h.ncap;
    hx_tcp(&h, c.ip, c.port, HX_ECHO, 5000, 0, 0x02, 65535, NULL, 0, NULL, 0);
    hx_run(&h, 1);
    found = false;
    while (!found && hx_next_tcp(&h, &from, &s))
        found = s.dst == c.ip && s.t.flags == 0x12;
    cr_assert(found);
    cr_assert_eq(hx_stats(h.p.a).tcp_pcbs, 2);
    icmp_err(&h, ZBUF_IP_ADDR(192, 0, 2, 254), 3, 1, 0, ZH_A, c.ip, 6, 44, HX_ECHO, c.port,
             s.t.seq);
    hx_run(&h, 1);
    cr_assert_eq(hx_stats(h.p.a).tcp_pcbs, 1, "the half-open connection stayed");
    cr_assert_eq(hx_stats(h.p.a).tcp_icmp_aborts, 2);
    hx_check_recovered(&h, 16 * 1024);
    hx_fini(&h);
}

/* ------------------------------------------------- everything at once */

/* Floods, pool pinning, table filling and forged errors at once, for two
 * seconds, while B moves data through A's echo service and pings it: the
 * transfers complete byte for byte, B's pings are answered, A's pool never
 * runs dry, and A works normally afterwards.  Under ASan/UBSan in CI;
 * ZBUF_STACK_SOAK=N runs N rounds with eight times the traffic. */
Test(hardening, mixed_attacks_with_normal_traffic, .timeout = 600)
{
    const char *soak = getenv("ZBUF_STACK_SOAK");
    int rounds = soak ? atoi(soak) : 1;
    size_t per = soak ? 16u << 20 : 2u << 20;
    for (int round = 0; round < (rounds > 0 ? rounds : 1); round++) {
        hx_t h;
        hx_init(&h, HX_POOL, NULL);
        enum { BULKS = 4, PIN = 8, ZW = 2 };
        struct bulk b[BULKS];
        zbuf_ip_tcp_callbacks_t cb = {.recv = bk_recv, .sent = bk_sent};
        for (int k = 0; k < BULKS; k++) {
            b[k] = (struct bulk){.total = per};
            b[k].data = malloc(per);
            for (size_t i = 0; i < per; i++)
                b[k].data[i] = zh_pattern(i, (uint32_t)(k + 10 * round));
            cr_assert_eq(zbuf_ip_tcp_new(h.p.b, &b[k].pcb), 0);
            zbuf_ip_tcp_set_callbacks(b[k].pcb, &cb, &b[k]);
            cr_assert_eq(zbuf_ip_tcp_connect(b[k].pcb, ZH_A, HX_ECHO), 0);
        }
        hx_run(&h, 10);
        for (int k = 0; k < BULKS; k++)
            bk_fill(&b[k]);
        hx_conn_t pin[PIN], zw[ZW], rst = {.ip = ZBUF_IP_ADDR(192, 0, 2, 90), .port = 47000};
        for (int k = 0; k < PIN; k++) {
            pin[k] = (hx_conn_t){.ip = ZBUF_IP_ADDR(192, 0, 2, 80 + k), .port = (uint16_t)(46000 + k)};
            hx_conn_open(&h, &pin[k], HX_ECHO, 65535, NULL, 0);
        }
        for (int k = 0; k < ZW; k++) {
            zw[k] = (hx_conn_t){.ip = ZBUF_IP_ADDR(192, 0, 2, 88 + k), .port = (uint16_t)(46100 + k)};
            hx_conn_open(&h, &zw[k], HX_ECHO, 0, NULL, 0);
        }
        hx_conn_open(&h, &rst, HX_ECHO, 65535, NULL, 0);
        int pings = 0, pongs = 0;
        /* Each round a different mix: flood rate, addresses, forged errors. */
        int syns = 2 + round % 5;
        uint32_t n = (uint32_t)round * 7919u;
        for (int ms = 0; ms < 2000; ms++, n++) {
            uint32_t spoof = ZBUF_IP_ADDR(192, 0, 2, 100 + n % 150);
            for (int i = 0; i < syns; i++) /* SYN flood */
                hx_tcp(&h, ZBUF_IP_ADDR(192, 0, 2, 100 + (n * 4 + (uint32_t)i) % 150),
                       (uint16_t)(2000 + (n * 4 + (uint32_t)i) % 60000), HX_ECHO, n * 7919u, 0,
                       0x02, 65535, NULL, 0, NULL, 0);
            hx_conn_send(&h, &pin[ms % PIN], HX_ECHO, 1 + ((uint32_t)ms / PIN) % ZBUF_IP_TCP_OOO_SEGS, 0x10,
                         65535, (const uint8_t *)"p", 1); /* pool pinning */
            hx_conn_send(&h, &zw[ms % ZW], HX_ECHO, 0, 0x18, 0, (const uint8_t *)"z", 1);
            zw[ms % ZW].snd_nxt++;
            static const uint8_t echo[8] = {'e', 'c', 'h', 'o'};
            hx_icmp(&h, spoof, 8, 0, n, echo, sizeof echo); /* neighbour table */
            hx_conn_send(&h, &rst, HX_ECHO, 100, 0x04, 0, NULL, 0); /* challenge ACKs */
            if (ms % 16 == 0) {
                provoke_from(&h, ZBUF_IP_ADDR(192, 0, 2, 255), 9000); /* impossible sources */
                provoke_from(&h, ZH_A, HX_ECHO);
                uint8_t junk[16] = {(uint8_t)n, (uint8_t)(n >> 8)};
                icmp_err(&h, spoof, 3, (uint8_t)(n % 5), (uint16_t)(n % 1600), ZH_A, ZH_B, 6,
                         1500, HX_ECHO, (uint16_t)(n * 31), n * 2654435761u); /* forged errors */
                hx_icmp(&h, spoof, (uint8_t)(n % 20), 0, n, junk, sizeof junk);
            }
            if (ms % 200 == 0) {
                pings++;
                pongs += hx_ping(&h, 1000);
            }
            hx_run(&h, 1);
        }
        zbuf_ip_stats_t st = hx_stats(h.p.a);
        size_t got = 0;
        for (int k = 0; k < BULKS; k++)
            got += b[k].got;
        fprintf(stderr,
                "mixed attacks, round %d: pings %d/%d, echoed %zu of %zu during the attack; "
                "cookies %llu, collapsed %llu bytes, pruned %llu, pressure drops %llu, memory "
                "drops %llu, bad sources %llu, challenge ACKs %llu (limited %llu), ICMP ignored "
                "%llu, ARP requests %llu (limited %llu)\n",
                round, pongs, pings, got, (size_t)BULKS * per,
                (unsigned long long)st.tcp_syncookies_sent,
                (unsigned long long)st.rx_collapsed_bytes, (unsigned long long)st.tcp_ooo_pruned,
                (unsigned long long)st.rx_pressure_drops, (unsigned long long)st.tcp_rcv_mem_drops,
                (unsigned long long)st.ip_bad_source, (unsigned long long)st.tcp_challenge_acks,
                (unsigned long long)st.tcp_challenge_acks_limited,
                (unsigned long long)st.icmp_errors_ignored, (unsigned long long)st.arp_requests_tx,
                (unsigned long long)st.arp_requests_limited);
        cr_assert_eq(pongs, pings, "B's pings went unanswered during the attacks");
        for (int k = 0; k < BULKS; k++) {
            cr_assert(hx_until(&h, bk_done, &b[k], 120000), "bulk %d: %zu of %zu", k, b[k].got,
                      b[k].total);
            cr_assert_not(b[k].bad, "bulk %d: the echoed bytes differ", k);
            zbuf_ip_tcp_close(b[k].pcb);
        }
        hx_run(&h, 200);
        hx_check_recovered(&h, 64 * 1024);
        assert_pool_never_dry(&h);
        hx_fini(&h);
        for (int k = 0; k < BULKS; k++)
            free(b[k].data);
    }
}
