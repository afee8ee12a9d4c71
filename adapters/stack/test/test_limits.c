/* SPDX-License-Identifier: MIT */
/* Limits on what a peer controls: connections, listen queues, ARP entries,
 * PCB tables; and TIME_WAIT reuse. */
#include <stdio.h>

#include "support.h"
#include "tcpfix.h"

ZT_SUITE(limits);

static const uint8_t bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

static void arp_from(zh_single_t *u, uint32_t ip, uint8_t macbyte)
{
    uint8_t f[64];
    uint8_t mac[6] = {0x02, 0, 0, 0, 1, macbyte};
    size_t o = zh_eth(f, bcast, mac, 0x0806);
    uint8_t a[28] = {0, 1, 8, 0, 6, 4, 0, 1};
    memcpy(a + 8, mac, 6);
    a[14] = (uint8_t)(ip >> 24), a[15] = (uint8_t)(ip >> 16), a[16] = (uint8_t)(ip >> 8),
    a[17] = (uint8_t)ip;
    a[24] = 192, a[25] = 0, a[26] = 2, a[27] = 1;
    memcpy(f + o, a, 28);
    zh_input(u, f, o + 28, 0);
}

static uint32_t pcbs(zbuf_ip_stack_t *s)
{
    zbuf_ip_stats_t st;
    zbuf_ip_stats(s, &st);
    return st.tcp_pcbs;
}

static void syn_flood(zh_single_t *u, int n)
{
    for (int i = 0; i < n; i++) {
        uint8_t f[128];
        size_t len = zh_tcp_frame(f, (uint16_t)(10000 + i), 80, 7, 0, 0x02, 65535, NULL, 0, NULL, 0);
        zh_input(u, f, len, 0);
    }
}

Test(limits, syn_flood_keeps_only_the_backlog_and_answers_the_rest_with_cookies)
{
    zh_single_t u;
    zh_single_init(&u, NULL);
    ep_t e = {0};
    ep_listen(&e, u.s, 80); /* backlog 8 */
    arp_from(&u, ZH_B, 0xb);
    zh_single_clear(&u);
    syn_flood(&u, 100);
    cr_assert_eq(u.ntx, ZH_CAP_MAX, "a SYN-ACK for every SYN (the capture keeps 64)");
    zbuf_ip_stats_t st;
    zbuf_ip_stats(u.s, &st);
    cr_assert_eq(st.tcp_syncookies_sent, 92, "cookies beyond the backlog");
    cr_assert_eq(pcbs(u.s), 1 + 8, "state only for the backlog");
    zh_single_clear(&u);
    /* The backlog is full, so under pressure: the half-open connections get
     * ZBUF_IP_TCP_SYNACK_RETRIES_PRESSURE retransmissions (1 + 2 + 4 s),
     * not two minutes of them. */
    uint64_t t0 = u.now;
    for (int i = 0; i < 200 && pcbs(u.s) > 1; i++) {
        u.now += 100;
        zbuf_ip_poll(u.s);
        zh_single_clear(&u);
    }
    cr_assert_eq(pcbs(u.s), 1, "half-open connections give up after their SYN-ACK retries");
    cr_assert_leq(u.now - t0, 8000, "within seconds (%llu ms)", (unsigned long long)(u.now - t0));
    zbuf_ip_stats(u.s, &st);
    cr_assert_eq(st.tcp_half_open_drops, 8);
    cr_assert_eq(e.accepted, 0);
    zbuf_ip_tcp_close(e.listener);
    zh_single_fini(&u);
}

Test(limits, without_syn_cookies_a_full_backlog_drops_syns)
{
    zbuf_ip_config_t c;
    zbuf_ip_config_init(&c);
    c.tcp_no_syncookies = true;
    zh_single_t u;
    zh_single_init(&u, &c);
    ep_t e = {0};
    ep_listen(&e, u.s, 80); /* backlog 8 */
    arp_from(&u, ZH_B, 0xb);
    zh_single_clear(&u);
    syn_flood(&u, 100);
    cr_assert_eq(u.ntx, 8, "SYN-ACKs only for the backlog");
    cr_assert_eq(pcbs(u.s), 1 + 8);
    zbuf_ip_tcp_close(e.listener);
    zh_single_fini(&u);
}

Test(limits, pcb_tables_are_bounded)
{
    zh_single_t u;
    zh_single_init(&u, NULL);
    static zbuf_ip_tcp_t *t[ZBUF_IP_TCP_PCBS];
    for (int i = 0; i < ZBUF_IP_TCP_PCBS; i++)
        cr_assert_eq(zbuf_ip_tcp_new(u.s, &t[i]), 0);
    zbuf_ip_tcp_t *x;
    cr_assert_eq(zbuf_ip_tcp_new(u.s, &x), -ENOSPC);
    zbuf_ip_tcp_close(t[0]);
    cr_assert_eq(zbuf_ip_tcp_new(u.s, &t[0]), 0, "a closed PCB frees its slot");
    for (int i = 0; i < ZBUF_IP_TCP_PCBS; i++)
        zbuf_ip_tcp_close(t[i]);
    static zbuf_ip_udp_t *v[ZBUF_IP_UDP_PCBS];
    for (int i = 0; i < ZBUF_IP_UDP_PCBS; i++)
        cr_assert_eq(zbuf_ip_udp_new(u.s, &v[i]), 0);
    zbuf_ip_udp_t *y;
    cr_assert_eq(zbuf_ip_udp_new(u.s, &y), -ENOSPC);
    for (int i = 0; i < ZBUF_IP_UDP_PCBS; i++)
        zbuf_ip_udp_delete(v[i]);
    zh_single_fini(&u);
}

Test(limits, arp_flood_cannot_push_out_pending_resolutions)
{
    zh_single_t u;
    zh_single_init(&u, NULL);
    zbuf_ip_udp_t *pcb;
    zbuf_ip_udp_new(u.s, &pcb);
    /* Fill the pending table with resolutions of our own. */
    for (int i = 0; i < ZBUF_IP_ARP_PENDING; i++) {
        zbuf_t *z;
        zbuf_create(&z);
        zbuf_append_copy(z, "p", 1);
        cr_assert_eq(zbuf_ip_udp_sendto(pcb, z, ZBUF_IP_ADDR(192, 0, 2, 100 + i), 9), 0);
    }
    cr_assert_eq(u.ntx, ZBUF_IP_ARP_PENDING, "one request each");
    zh_single_clear(&u);
    /* A flood of strangers announcing themselves does not evict them... */
    int replies = 0;
    for (int i = 0; i < 300; i++) {
        arp_from(&u, ZBUF_IP_ADDR(198, 51, 100, i % 250 + 1), (uint8_t)i);
        replies += u.ntx;
        zh_single_clear(&u);
    }
    cr_assert_eq(replies, 300, "every request for us is answered");
    /* ...so the answer to one of ours still finds its queued datagram. */
    arp_from(&u, ZBUF_IP_ADDR(192, 0, 2, 100), 0x77);
    cr_assert_geq(u.ntx, 1);
    uint8_t r[128];
    bool sent_udp = false;
    for (int i = 0; i < u.ntx; i++) {
        size_t n = zh_tx_bytes(&u, i, r, sizeof r);
        if (n >= 42 && r[12] == 0x08 && r[13] == 0 && r[23] == 17)
            sent_udp = true;
    }
    cr_assert(sent_udp, "the queued datagram went out after its reply");
    zbuf_ip_stats_t st;
    zbuf_ip_stats(u.s, &st);
    cr_assert_eq(st.arp_queue_drops, 0);
    zbuf_ip_udp_delete(pcb);
    zh_single_fini(&u);
}

struct two {
    ep_t *a, *b;
};

static bool connected2(void *arg)
{
    struct two *t = arg;
    return t->a->connected && t->b->accepted;
}

static bool a_eof(void *arg)
{
    return ((struct two *)arg)->a->eofs > 0;
}

Test(limits, new_syn_ends_time_wait_of_the_same_pair)
{
    zh_pair_t p;
    zh_pair_init(&p, NULL, NULL);
    ep_t a = {0}, b = {0};
    struct two t = {&a, &b};
    ep_listen(&b, p.b, 80);
    cr_assert_eq(zbuf_ip_tcp_new(p.a, &a.pcb), 0);
    zbuf_ip_tcp_set_callbacks(a.pcb, &ep_cbs, &a);
    zbuf_ip_tcp_bind(a.pcb, ZBUF_IP_ANY, 1234);
    zbuf_ip_tcp_connect(a.pcb, ZH_B, 80);
    cr_assert(zh_pair_run(&p, connected2, &t, 5000));
    /* The server closes first and waits in TIME_WAIT. */
    zbuf_ip_tcp_t *server = b.pcb;
    zbuf_ip_tcp_shutdown(server);
    cr_assert(zh_pair_run(&p, a_eof, &t, 2000));
    zbuf_ip_tcp_close(a.pcb);
    zh_pair_run(&p, NULL, NULL, 1000);
    cr_assert_eq(zbuf_ip_tcp_state(server), ZBUF_IP_TCP_TIME_WAIT);
    zbuf_ip_tcp_close(server);
    /* The client comes back from the same port a few seconds later. */
    p.now += 5000;
    ep_t a2 = {0};
    b.accepted = 0;
    struct two t2 = {&a2, &b};
    cr_assert_eq(zbuf_ip_tcp_new(p.a, &a2.pcb), 0);
    zbuf_ip_tcp_set_callbacks(a2.pcb, &ep_cbs, &a2);
    cr_assert_eq(zbuf_ip_tcp_bind(a2.pcb, ZBUF_IP_ANY, 1234), 0);
    cr_assert_eq(zbuf_ip_tcp_connect(a2.pcb, ZH_B, 80), 0);
    cr_assert(zh_pair_run(&p, connected2, &t2, 3000),
              "the SYN above the old sequence space replaced TIME_WAIT at once");
    zbuf_ip_tcp_abort(a2.pcb);
    zbuf_ip_tcp_abort(b.pcb);
    zbuf_ip_tcp_close(b.listener);
    ep_fini(&a);
    ep_fini(&b);
    ep_fini(&a2);
    zh_pair_fini(&p);
}

Test(limits, rst_in_syn_sent_needs_an_acceptable_ack)
{
    zh_single_t u;
    zh_single_init(&u, NULL);
    arp_from(&u, ZH_B, 0xb);
    zh_single_clear(&u);
    ep_t a = {0};
    ep_connect(&a, u.s, ZH_B, 80);
    zh_tcp_seg_t syn;
    cr_assert(zh_tx_tcp(&u, 0, &syn));
    cr_assert_eq(syn.flags, 0x02);
    cr_assert(syn.sackok);
    uint8_t f[128];
    /* RST without ACK, and RST with a wrong ACK: ignored. */
    size_t n = zh_tcp_frame(f, 80, syn.sport, 0, 0, 0x04, 0, NULL, 0, NULL, 0);
    zh_input(&u, f, n, 0);
    n = zh_tcp_frame(f, 80, syn.sport, 0, syn.seq + 77, 0x14, 0, NULL, 0, NULL, 0);
    zh_input(&u, f, n, 0);
    cr_assert_eq(a.errors, 0);
    cr_assert_eq(zbuf_ip_tcp_state(a.pcb), ZBUF_IP_TCP_SYN_SENT);
    /* RST acknowledging our SYN: refused. */
    n = zh_tcp_frame(f, 80, syn.sport, 0, syn.seq + 1, 0x14, 0, NULL, 0, NULL, 0);
    zh_input(&u, f, n, 0);
    cr_assert_eq(a.errors, 1);
    cr_assert_eq(a.err, -ECONNREFUSED);
    zh_single_fini(&u);
}

Test(limits, syn_ack_window_is_not_scaled_the_next_one_is)
{
    zh_single_t u;
    zh_single_init(&u, NULL);
    arp_from(&u, ZH_B, 0xb);
    zh_single_clear(&u);
    ep_t a = {0};
    ep_connect(&a, u.s, ZH_B, 80);
    zh_tcp_seg_t syn;
    cr_assert(zh_tx_tcp(&u, 0, &syn));
    const uint8_t opts[8] = {2, 4, 0x05, 0xb4, 1, 3, 3, 7};
    uint8_t f[128];
    size_t n = zh_tcp_frame(f, 80, syn.sport, 5000, syn.seq + 1, 0x12, 1000, opts, 8, NULL, 0);
    zh_input(&u, f, n, 0);
    cr_assert_eq(a.connected, 1);
    zbuf_ip_tcp_info_t in;
    zbuf_ip_tcp_info(a.pcb, &in);
    cr_assert_eq(in.snd_wscale, 7);
    cr_assert_eq(in.snd_wnd, 1000, "RFC 7323: the window of a SYN is never scaled");
    n = zh_tcp_frame(f, 80, syn.sport, 5001, syn.seq + 1, 0x10, 1000, NULL, 0, NULL, 0);
    zh_input(&u, f, n, 0);
    zbuf_ip_tcp_info(a.pcb, &in);
    cr_assert_eq(in.snd_wnd, 1000u << 7);
    zbuf_ip_tcp_abort(a.pcb);
    zh_single_fini(&u);
}

static bool state_is(void *arg)
{
    void **v = arg;
    return zbuf_ip_tcp_state(v[0]) == (zbuf_ip_tcp_state_t)(uintptr_t)v[1];
}

static void run_until_state(zh_pair_t *p, zbuf_ip_tcp_t *t, zbuf_ip_tcp_state_t st)
{
    void *v[2] = {t, (void *)(uintptr_t)st};
    cr_assert(zh_pair_run(p, state_is, v, 5000), "state %s not reached (%s)",
              zbuf_ip_tcp_state_name(st), zbuf_ip_tcp_state_name(zbuf_ip_tcp_state(t)));
}

/* A full table of TIME_WAIT connections the application still holds (it
 * shut them down but never closed them) must not be recycled under it: a
 * new PCB is refused instead.  Once the application gives one back, that
 * one is recycled. */
Test(limits, time_wait_pcbs_the_application_holds_are_never_recycled)
{
    zh_pair_t p;
    zh_pair_init(&p, NULL, NULL);
    ep_t b = {.close_on_eof = true};
    ep_listen(&b, p.b, 80);
    static zbuf_ip_tcp_t *held[ZBUF_IP_TCP_PCBS];
    for (int i = 0; i < ZBUF_IP_TCP_PCBS; i++) {
        cr_assert_eq(zbuf_ip_tcp_new(p.a, &held[i]), 0, "connection %d", i);
        cr_assert_eq(zbuf_ip_tcp_connect(held[i], ZH_B, 80), 0);
        run_until_state(&p, held[i], ZBUF_IP_TCP_ESTABLISHED);
        cr_assert_eq(zbuf_ip_tcp_shutdown(held[i]), 0);
        run_until_state(&p, held[i], ZBUF_IP_TCP_TIME_WAIT);
    }
    zbuf_ip_tcp_t *extra;
    cr_assert_eq(zbuf_ip_tcp_new(p.a, &extra), -ENOSPC, "no PCB the application holds is taken");
    for (int i = 0; i < ZBUF_IP_TCP_PCBS; i++)
        cr_assert_eq(zbuf_ip_tcp_state(held[i]), ZBUF_IP_TCP_TIME_WAIT, "handle %d intact", i);
    zbuf_ip_tcp_close(held[7]); /* given back: TIME_WAIT goes on, recyclable */
    cr_assert_eq(zbuf_ip_tcp_new(p.a, &extra), 0, "the one given back is recycled");
    zbuf_ip_tcp_abort(extra);
    for (int i = 0; i < ZBUF_IP_TCP_PCBS; i++)
        if (i != 7)
            zbuf_ip_tcp_close(held[i]);
    zbuf_ip_tcp_close(b.listener);
    ep_fini(&b);
    zh_pair_fini(&p);
}
