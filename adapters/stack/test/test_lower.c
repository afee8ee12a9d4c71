/* SPDX-License-Identifier: MIT */
/* Ethernet, ARP, IPv4, ICMP and UDP on crafted frames, and between two
 * stacks over the in-memory link. */
#include <errno.h>
#include <string.h>

#include "harness.h"
#include "support.h"

ZT_SUITE(lower);

static const uint8_t bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

static size_t arp_frame(uint8_t *f, uint16_t op, const uint8_t sha[6], uint32_t spa,
                        uint32_t tpa, const uint8_t dst[6])
{
    size_t o = zh_eth(f, dst, sha, 0x0806);
    uint8_t *a = f + o;
    memset(a, 0, 28);
    a[1] = 1;
    a[2] = 0x08;
    a[4] = 6;
    a[5] = 4;
    a[7] = (uint8_t)op;
    memcpy(a + 8, sha, 6);
    a[14] = (uint8_t)(spa >> 24);
    a[15] = (uint8_t)(spa >> 16);
    a[16] = (uint8_t)(spa >> 8);
    a[17] = (uint8_t)spa;
    a[24] = (uint8_t)(tpa >> 24);
    a[25] = (uint8_t)(tpa >> 16);
    a[26] = (uint8_t)(tpa >> 8);
    a[27] = (uint8_t)tpa;
    return o + 28;
}

Test(lower, arp_request_for_us_gets_a_reply)
{
    zh_single_t u;
    zh_single_init(&u, NULL);
    uint8_t f[64];
    size_t n = arp_frame(f, 1, zh_mac_b, ZH_B, ZH_A, bcast);
    cr_assert_eq(zh_input(&u, f, n, 5), 0); /* header split over segments */
    cr_assert_eq(u.ntx, 1);
    uint8_t r[64];
    size_t rn = zh_tx_bytes(&u, 0, r, sizeof r);
    cr_assert_geq(rn, 42);
    cr_assert_eq(memcmp(r, zh_mac_b, 6), 0, "reply goes to the asker");
    cr_assert_eq(r[21], 2, "ARP reply opcode");
    cr_assert_eq(memcmp(r + 22, zh_mac_a, 6), 0, "our MAC as sender");
    cr_assert_eq(memcmp(r + 32, zh_mac_b, 6), 0);
    zh_single_fini(&u);
}

Test(lower, arp_for_someone_else_is_not_answered)
{
    zh_single_t u;
    zh_single_init(&u, NULL);
    uint8_t f[64];
    size_t n = arp_frame(f, 1, zh_mac_b, ZH_B, ZBUF_IP_ADDR(192, 0, 2, 99), bcast);
    zh_input(&u, f, n, 0);
    cr_assert_eq(u.ntx, 0);
    zh_single_fini(&u);
}

Test(lower, malformed_arp_is_dropped)
{
    zh_single_t u;
    zh_single_init(&u, NULL);
    uint8_t f[64];
    size_t n = arp_frame(f, 1, zh_mac_b, ZH_B, ZH_A, bcast);
    cr_assert_eq(zh_input(&u, f, n - 1, 0), -EBADMSG, "truncated");
    uint8_t mc[6] = {0x01, 0, 0x5e, 0, 0, 1};
    n = arp_frame(f, 1, mc, ZH_B, ZH_A, bcast);
    cr_assert_eq(zh_input(&u, f, n, 0), -EBADMSG, "multicast sender");
    n = arp_frame(f, 1, zh_mac_b, ZH_A, ZH_A, bcast);
    cr_assert_eq(zh_input(&u, f, n, 0), -EBADMSG, "someone claims our address");
    n = arp_frame(f, 7, zh_mac_b, ZH_B, ZH_A, bcast);
    cr_assert_eq(zh_input(&u, f, n, 0), -EBADMSG, "unknown opcode");
    cr_assert_eq(u.ntx, 0);
    zbuf_ip_stats_t st;
    zbuf_ip_stats(u.s, &st);
    cr_assert_eq(st.bad_arp, 4);
    zh_single_fini(&u);
}

Test(lower, packets_wait_for_arp_then_go_in_order)
{
    zh_single_t u;
    zh_single_init(&u, NULL);
    zbuf_ip_udp_t *pcb;
    cr_assert_eq(zbuf_ip_udp_new(u.s, &pcb), 0);
    cr_assert_eq(zbuf_ip_udp_bind(pcb, ZBUF_IP_ANY, 5000), 0);
    for (int i = 0; i < 3; i++) {
        zbuf_t *z;
        zbuf_create(&z);
        uint8_t b = (uint8_t)i;
        zbuf_append_copy(z, &b, 1);
        cr_assert_eq(zbuf_ip_udp_sendto(pcb, z, ZH_B, 6000), 0);
    }
    cr_assert_eq(u.ntx, 1, "only the ARP request goes out");
    uint8_t r[64];
    zh_tx_bytes(&u, 0, r, sizeof r);
    cr_assert_eq(memcmp(r, bcast, 6), 0);
    cr_assert_eq(r[21], 1);
    zh_single_clear(&u);
    uint8_t f[64];
    size_t n = arp_frame(f, 2, zh_mac_b, ZH_B, ZH_A, zh_mac_a);
    zh_input(&u, f, n, 0);
    cr_assert_eq(u.ntx, 3, "queued datagrams follow the reply");
    for (int i = 0; i < 3; i++) {
        uint8_t d[64];
        size_t dn = zh_tx_bytes(&u, i, d, sizeof d);
        cr_assert_eq(dn, 14 + 20 + 8 + 1);
        cr_assert_eq(memcmp(d, zh_mac_b, 6), 0);
        cr_assert_eq(d[42], i, "in order");
        cr_assert_eq(zh_csum(d + 14, 20), 0);
    }
    zbuf_ip_udp_delete(pcb);
    zh_single_fini(&u);
}

Test(lower, unanswered_arp_gives_up_and_drops_the_queue)
{
    zh_single_t u;
    zh_single_init(&u, NULL);
    zbuf_ip_udp_t *pcb;
    zbuf_ip_udp_new(u.s, &pcb);
    int released = 0;
    static char payload[100];
    for (int i = 0; i < ZBUF_IP_ARP_QUEUE + 5; i++) {
        zbuf_t *z;
        zbuf_create(&z);
        zbuf_append_buf(z, payload, sizeof payload, zt_count_release, &released);
        cr_assert_eq(zbuf_ip_udp_sendto(pcb, z, ZH_B, 9), 0);
    }
    cr_assert_eq(released, 5, "over-limit packets dropped at once");
    for (int i = 0; i < 10; i++) {
        u.now += 1000;
        zbuf_ip_poll(u.s);
    }
    cr_assert_eq(u.ntx, ZBUF_IP_ARP_TRIES, "one request per try");
    cr_assert_eq(released, ZBUF_IP_ARP_QUEUE + 5, "every queued buffer released");
    cr_assert_eq(zbuf_ip_next_deadline(u.s), ZBUF_IP_NEVER);
    zbuf_ip_udp_delete(pcb);
    zh_single_fini(&u);
}

static size_t udp_frame(uint8_t *f, uint16_t sport, uint16_t dport, const uint8_t *d, size_t dn,
                        bool good_sum)
{
    size_t o = zh_eth(f, zh_mac_a, zh_mac_b, 0x0800);
    o += zh_ip(f + o, ZH_B, ZH_A, 17, 8 + dn);
    uint8_t *p = f + o;
    p[0] = (uint8_t)(sport >> 8);
    p[1] = (uint8_t)sport;
    p[2] = (uint8_t)(dport >> 8);
    p[3] = (uint8_t)dport;
    p[4] = (uint8_t)((8 + dn) >> 8);
    p[5] = (uint8_t)(8 + dn);
    p[6] = p[7] = 0;
    if (dn)
        memcpy(p + 8, d, dn);
    uint16_t c = zh_l4_csum(ZH_B, ZH_A, 17, p, 8 + dn);
    if (!good_sum)
        c ^= 0x100;
    p[6] = (uint8_t)(c >> 8);
    p[7] = (uint8_t)c;
    return o + 8 + dn;
}

struct udp_rx {
    int n;
    uint8_t buf[256];
    size_t len;
    size_t segs;
};

static void udp_rx_cb(void *arg, zbuf_ip_udp_t *u, zbuf_t *d, uint32_t src, uint16_t sport)
{
    (void)u;
    (void)src;
    (void)sport;
    struct udp_rx *r = arg;
    r->n++;
    r->len = zbuf_length(d);
    r->segs = zbuf_seg_count(d);
    if (r->len)
        zbuf_copyout(d, 0, r->buf, r->len < sizeof r->buf ? r->len : sizeof r->buf);
    zbuf_delete(d);
}

Test(lower, ipv4_header_validation)
{
    zh_single_t u;
    zh_single_init(&u, NULL);
    zbuf_ip_udp_t *pcb;
    zbuf_ip_udp_new(u.s, &pcb);
    zbuf_ip_udp_bind(pcb, ZBUF_IP_ANY, 7);
    struct udp_rx r = {0};
    zbuf_ip_udp_set_recv(pcb, udp_rx_cb, &r);
    uint8_t f[200], g[200];
    const uint8_t msg[5] = "hello";
    size_t n = udp_frame(f, 1234, 7, msg, 5, true);

    cr_assert_eq(zh_input(&u, f, n, 0), 0);
    cr_assert_eq(r.n, 1);
    cr_assert_eq(memcmp(r.buf, "hello", 5), 0);

    memcpy(g, f, n);
    g[14] = 0x65; /* version 6 */
    cr_assert_eq(zh_input(&u, g, n, 0), -EBADMSG);
    memcpy(g, f, n);
    g[14] = 0x44; /* IHL 4 */
    cr_assert_eq(zh_input(&u, g, n, 0), -EBADMSG);
    memcpy(g, f, n);
    g[14] = 0x4f; /* IHL 15: past the packet */
    cr_assert_eq(zh_input(&u, g, n, 0), -EBADMSG);
    cr_assert_eq(zh_input(&u, f, 14 + 19, 0), -EBADMSG, "truncated header");
    cr_assert_eq(zh_input(&u, f, 14, 0), -EBADMSG, "zero-length IP");
    cr_assert_eq(zh_input(&u, f, n - 1, 0), -EBADMSG, "total length past the frame");
    memcpy(g, f, n);
    g[24] ^= 1; /* header checksum */
    cr_assert_eq(zh_input(&u, g, n, 0), -EPROTO);
    memcpy(g, f, n);
    g[20] = 0x20; /* MF */
    g[24] = g[25] = 0;
    uint16_t c = zh_csum(g + 14, 20);
    g[24] = (uint8_t)(c >> 8);
    g[25] = (uint8_t)c;
    cr_assert_eq(zh_input(&u, g, n, 0), -EBADMSG, "MF with a length not a multiple of 8");
    cr_assert_eq(r.n, 1, "none of the bad ones was delivered");

    /* Ethernet padding after the IP packet is trimmed. */
    memcpy(g, f, n);
    memset(g + n, 0xee, 20);
    cr_assert_eq(zh_input(&u, g, n + 20, 0), 0);
    cr_assert_eq(r.n, 2);
    cr_assert_eq(r.len, 5);
    zbuf_ip_stats_t st;
    zbuf_ip_stats(u.s, &st);
    cr_assert_eq(st.ip_frag_drops, 1);
    cr_assert_eq(st.bad_checksum, 1);
    cr_assert_eq(u.ntx, 0);
    zbuf_ip_udp_delete(pcb);
    zh_single_fini(&u);
}

Test(lower, udp_validation_and_zero_length)
{
    zh_single_t u;
    zh_single_init(&u, NULL);
    zbuf_ip_udp_t *pcb;
    zbuf_ip_udp_new(u.s, &pcb);
    zbuf_ip_udp_bind(pcb, ZBUF_IP_ANY, 7);
    struct udp_rx r = {0};
    zbuf_ip_udp_set_recv(pcb, udp_rx_cb, &r);
    uint8_t f[200], g[200];
    size_t n = udp_frame(f, 1234, 7, (const uint8_t *)"abc", 3, false);
    cr_assert_eq(zh_input(&u, f, n, 0), -EPROTO, "bad checksum");
    n = udp_frame(f, 1234, 7, NULL, 0, true);
    cr_assert_eq(zh_input(&u, f, n, 0), 0);
    cr_assert_eq(r.n, 1);
    cr_assert_eq(r.len, 0, "empty datagram delivered empty");
    n = udp_frame(f, 1234, 8, (const uint8_t *)"abc", 3, true);
    cr_assert_eq(zh_input(&u, f, n, 0), -ENOENT, "no one on port 8");
    n = udp_frame(f, 1234, 7, (const uint8_t *)"abcdef", 6, true);
    memcpy(g, f, n);
    g[38] = 0;
    g[39] = 200; /* UDP length past the packet */
    cr_assert_eq(zh_input(&u, g, n, 0), -EBADMSG);
    g[39] = 4; /* UDP length under the header */
    cr_assert_eq(zh_input(&u, g, n, 0), -EBADMSG);
    /* No checksum (0) is allowed over IPv4; odd segmenting of the frame. */
    memcpy(g, f, n);
    g[40] = g[41] = 0;
    cr_assert_eq(zh_input(&u, g, n, 3), 0);
    cr_assert_eq(r.n, 2);
    cr_assert_eq(memcmp(r.buf, "abcdef", 6), 0);
    zbuf_ip_udp_delete(pcb);
    zh_single_fini(&u);
}

Test(lower, icmp_echo_reply_reuses_the_request_payload)
{
    zh_single_t u;
    zh_single_init(&u, NULL);
    /* Teach it B's MAC first so the reply is not queued behind ARP. */
    uint8_t f[300];
    size_t n = arp_frame(f, 1, zh_mac_b, ZH_B, ZH_A, bcast);
    zh_input(&u, f, n, 0);
    zh_single_clear(&u);
    uint8_t payload[64];
    for (int i = 0; i < 64; i++)
        payload[i] = (uint8_t)(i ^ 0x5a);
    size_t o = zh_eth(f, zh_mac_a, zh_mac_b, 0x0800);
    o += zh_ip(f + o, ZH_B, ZH_A, 1, 8 + 64);
    uint8_t *ic = f + o;
    memset(ic, 0, 8);
    ic[0] = 8;
    ic[5] = 0x42;
    ic[7] = 3;
    memcpy(ic + 8, payload, 64);
    uint16_t c = zh_csum(ic, 72);
    ic[2] = (uint8_t)(c >> 8);
    ic[3] = (uint8_t)c;
    n = o + 72;
    zbuf_stats_t before, after;
    zbuf_stats_get(&before);
    cr_assert_eq(zh_input(&u, f, n, 0), 0);
    zbuf_stats_get(&after);
    cr_assert_eq(after.bytes_copied - before.bytes_copied, n, "only the test's own copy-in");
    cr_assert_eq(u.ntx, 1);
    uint8_t r[300];
    size_t rn = zh_tx_bytes(&u, 0, r, sizeof r);
    cr_assert_eq(rn, n);
    cr_assert_eq(r[34], 0, "echo reply");
    cr_assert_eq(zh_csum(r + 34, 72), 0, "ICMP checksum");
    cr_assert_eq(memcmp(r + 42, payload, 64), 0);
    cr_assert_eq(r[39], 0x42);
    /* Bad ICMP checksum: no reply. */
    ic[2] ^= 0xff;
    cr_assert_eq(zh_input(&u, f, n, 0), -EPROTO);
    cr_assert_eq(u.ntx, 1);
    zh_single_fini(&u);
}

struct ping_ctx {
    int replies;
    uint16_t seq;
    size_t len;
};

static void on_ping(void *arg, uint32_t from, uint16_t id, uint16_t seq, zbuf_t *d)
{
    struct ping_ctx *p = arg;
    cr_assert_eq(from, ZH_B);
    cr_assert_eq(id, 77);
    p->replies++;
    p->seq = seq;
    p->len = zbuf_length(d);
    zbuf_delete(d);
}

static bool got_reply(void *arg)
{
    return ((struct ping_ctx *)arg)->replies > 0;
}

Test(lower, ping_between_two_stacks_over_the_link)
{
    struct ping_ctx pc = {0};
    zbuf_ip_config_t c;
    zbuf_ip_config_init(&c);
    c.ping_reply = on_ping;
    c.ping_arg = &pc;
    zh_pair_t p;
    zh_pair_init(&p, NULL, &c);
    zbuf_t *z;
    zbuf_create(&z);
    int released = 0;
    static char data[1000];
    zbuf_append_buf(z, data, sizeof data, zt_count_release, &released);
    cr_assert_eq(zbuf_ip_ping(p.a, ZH_B, 77, 5, z), 0);
    cr_assert(zh_pair_run(&p, got_reply, &pc, 5000));
    cr_assert_eq(pc.seq, 5);
    cr_assert_eq(pc.len, 1000);
    cr_assert_eq(released, 1, "the payload went there and back by reference");
    zh_pair_fini(&p);
}

Test(lower, udp_between_two_stacks_shares_the_buffers)
{
    zh_pair_t p;
    zh_pair_init(&p, NULL, NULL);
    zbuf_ip_udp_t *ua, *ub;
    zbuf_ip_udp_new(p.a, &ua);
    zbuf_ip_udp_new(p.b, &ub);
    zbuf_ip_udp_bind(ub, ZBUF_IP_ANY, 9000);
    struct udp_rx r = {0};
    zbuf_ip_udp_set_recv(ub, udp_rx_cb, &r);
    static char data[1400] = "payload";
    int released = 0;
    zbuf_stats_t before, after;
    zbuf_stats_get(&before);
    for (int i = 0; i < 10; i++) {
        zbuf_t *z;
        zbuf_create(&z);
        zbuf_append_buf(z, data, 200, zt_count_release, &released);
        zbuf_append_buf(z, data + 200, 1200, zt_count_release, &released);
        cr_assert_eq(zbuf_ip_udp_sendto(ua, z, ZH_B, 9000), 0);
    }
    zh_pair_run(&p, NULL, NULL, 1000);
    zbuf_stats_get(&after);
    cr_assert_eq(r.n, 10);
    cr_assert_eq(r.len, 1400);
    cr_assert_eq(r.segs, 2, "the sender's two segments arrive as such");
    cr_assert_eq(released, 20);
    /* The test's copyout of 10 x 256 bytes is the only copy. */
    cr_assert_eq(after.bytes_copied - before.bytes_copied, 10 * 256);
    zbuf_t *big;
    zbuf_create(&big);
    static char huge[65508];
    zbuf_append_buf(big, huge, sizeof huge, NULL, NULL);
    cr_assert_eq(zbuf_ip_udp_sendto(ua, big, ZH_B, 9000), -EMSGSIZE, "above the IPv4 limit");
    cr_assert_eq(zbuf_ip_udp_sendto(ua, big, ZBUF_IP_ADDR(198, 51, 100, 1), 9000), -ENETUNREACH);
    zbuf_delete(big);
    zbuf_ip_udp_delete(ua);
    zbuf_ip_udp_delete(ub);
    zh_pair_fini(&p);
}

Test(lower, arp_entries_age_out_and_are_asked_for_again)
{
    zh_single_t u;
    zh_single_init(&u, NULL);
    uint8_t f[64];
    size_t n = arp_frame(f, 2, zh_mac_b, ZH_B, ZH_A, zh_mac_a);
    zbuf_ip_udp_t *pcb;
    zbuf_ip_udp_new(u.s, &pcb);
    zbuf_t *z;
    zbuf_create(&z);
    zbuf_append_copy(z, "a", 1);
    zbuf_ip_udp_sendto(pcb, z, ZH_B, 9); /* ARP request, queued */
    zh_input(&u, f, n, 0);               /* reply: the datagram goes */
    cr_assert_eq(u.ntx, 2);
    zh_single_clear(&u);
    u.now += ZBUF_IP_ARP_MAX_AGE_MS + 1;
    zbuf_ip_poll(u.s);
    zbuf_create(&z);
    zbuf_append_copy(z, "b", 1);
    zbuf_ip_udp_sendto(pcb, z, ZH_B, 9);
    cr_assert_eq(u.ntx, 1);
    uint8_t r[64];
    zh_tx_bytes(&u, 0, r, sizeof r);
    cr_assert_eq(r[12], 0x08);
    cr_assert_eq(r[13], 0x06, "expired: asked again");
    zbuf_ip_udp_delete(pcb);
    zh_single_fini(&u);
}

/* A driver whose context dies in detach(), and whose poll() keeps using it
 * after handing each frame up: removing its interface from a receive
 * callback must wait for the poll to return. */
struct dying_driver {
    zbuf_ip_netif_t *nif;
    uint8_t frame[200];
    size_t len;
    int to_deliver, delivered;
    int *detached;
};

static int dying_poll(void *ctx, unsigned budget)
{
    struct dying_driver *d = ctx;
    int n = 0;
    while (d->to_deliver > 0 && (unsigned)n < budget) {
        zbuf_t *z;
        zbuf_create(&z);
        zbuf_append_copy(z, d->frame, d->len);
        d->to_deliver--;
        zbuf_ip_netif_input(d->nif, z); /* may remove the interface */
        d->delivered++;                 /* ASan: the context must still be alive */
        n++;
    }
    return n;
}

static void dying_detach(void *ctx)
{
    struct dying_driver *d = ctx;
    ++*d->detached;
    free(d);
}

static int dying_transmit(void *ctx, zbuf_t *frame)
{
    (void)ctx;
    zbuf_delete(frame);
    return 0;
}

struct remover {
    zbuf_ip_netif_t *nif;
    int got;
    bool poll_first; /* call zbuf_ip_poll() from the callback before removing */
};

static void remove_on_recv(void *arg, zbuf_ip_udp_t *u, zbuf_t *d, uint32_t src, uint16_t sport)
{
    (void)u;
    (void)src;
    (void)sport;
    struct remover *r = arg;
    r->got++;
    zbuf_delete(d);
    if (r->poll_first)
        zbuf_ip_poll(zbuf_ip_netif_stack(r->nif)); /* nested: the driver's poll runs again */
    zbuf_ip_netif_remove(r->nif);
    zbuf_ip_netif_remove(r->nif); /* twice: still one detach */
}

static void remove_inside_poll(bool poll_first)
{
    zbuf_ip_stack_t *s;
    cr_assert_eq(zbuf_ip_stack_create(NULL, &s), 0);
    int detached = 0;
    struct dying_driver *d = calloc(1, sizeof *d);
    d->detached = &detached;
    d->len = udp_frame(d->frame, 1234, 7, (const uint8_t *)"abc", 3, true);
    d->to_deliver = 5;
    static const zbuf_ip_driver_t drv = {
        .transmit = dying_transmit, .poll = dying_poll, .detach = dying_detach};
    zbuf_ip_netif_config_t nc = {.addr = ZH_A, .prefix_len = 24};
    memcpy(nc.mac, zh_mac_a, 6);
    cr_assert_eq(zbuf_ip_netif_add(s, &nc, &drv, d, &d->nif), 0);
    zbuf_ip_netif_t *nif = d->nif;
    cr_assert_eq(zbuf_ip_netif_next(s, NULL), nif);
    cr_assert_null(zbuf_ip_netif_next(s, nif));

    zbuf_ip_udp_t *pcb;
    zbuf_ip_udp_new(s, &pcb);
    zbuf_ip_udp_bind(pcb, ZBUF_IP_ANY, 7);
    struct remover r = {nif, 0, poll_first};
    zbuf_ip_udp_set_recv(pcb, remove_on_recv, &r);

    if (poll_first) {
        /* Each callback polls, which re-enters the driver: every frame is
         * delivered one level deeper, the innermost callback removes. */
        cr_assert_eq(zbuf_ip_poll(s), 1, "the outer poll delivered one frame");
        cr_assert_eq(r.got, 5);
    } else {
        cr_assert_eq(zbuf_ip_poll(s), 5, "the driver delivered its five frames");
        cr_assert_eq(r.got, 1, "frames after the removal are dropped");
    }
    cr_assert_eq(detached, 1, "detached once, after the poll returned");
    cr_assert_null(zbuf_ip_netif_next(s, NULL));
    zbuf_ip_netif_remove(nif); /* a removed interface: no-op */
    cr_assert_eq(detached, 1);
    zbuf_ip_udp_delete(pcb);
    zbuf_ip_stack_delete(s);
}

Test(lower, netif_removed_from_inside_its_own_drivers_poll_detaches_after_it)
{
    remove_inside_poll(false);
}

Test(lower, netif_removed_after_a_nested_poll_still_detaches_after_the_outer_one)
{
    remove_inside_poll(true);
}
