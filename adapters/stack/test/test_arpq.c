/* SPDX-License-Identifier: MIT */
/* Datagrams waiting for ARP: queued whole, cut into fragments only when the
 * next hop's address is known, bounded by datagrams and by bytes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "support.h"

ZT_SUITE(arpq);

#define CAP 512
#define UDP_PORT 9000

/* One stack (192.0.2.1/24, MAC zh_mac_a) whose driver keeps every frame. */
typedef struct fx {
    uint64_t now;
    zbuf_ip_stack_t *s;
    zbuf_ip_netif_t *nif;
    zbuf_t *tx[CAP];
    int ntx;
    zbuf_ip_udp_t *pcb; /* bound to port 5000 */
    int released;       /* releases of the buffers from big_zbuf() */
} fx_t;

static uint8_t big[65000];

static void fill_big(uint32_t salt)
{
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = zh_pattern(i, salt);
}

/* A zbuf of bytes [0, len) of `big`, one enrolled buffer whose release
 * increments *released. */
static zbuf_t *big_zbuf(size_t len, int *released)
{
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_buf(z, big, len, zt_count_release, released), 0);
    return z;
}

static zbuf_ip_udp_t *udp_pcb(zbuf_ip_stack_t *s)
{
    zbuf_ip_udp_t *u;
    cr_assert_eq(zbuf_ip_udp_new(s, &u), 0);
    cr_assert_eq(zbuf_ip_udp_bind(u, ZBUF_IP_ANY, 5000), 0);
    return u;
}

static int keep_tx(void *ctx, zbuf_t *frame)
{
    fx_t *x = ctx;
    cr_assert_lt(x->ntx, CAP, "more frames than the test expects");
    cr_assert_eq(zbuf_check(frame), 0);
    x->tx[x->ntx++] = frame;
    return 0;
}

/* Set up *x with config `c` (NULL: defaults) and fill `big` with pattern
 * `salt`. */
static void fx_init(fx_t *x, zbuf_ip_config_t *c, uint32_t salt)
{
    fill_big(salt);
    memset(x, 0, sizeof *x);
    x->now = 1000;
    zbuf_ip_config_t d;
    if (c == NULL) {
        zbuf_ip_config_init(&d);
        c = &d;
    }
    c->clock = zh_clock;
    c->clock_arg = &x->now;
    c->isn_key_set = true;
    memset(c->isn_key, 0x77, sizeof c->isn_key);
    cr_assert_eq(zbuf_ip_stack_create(c, &x->s), 0);
    zbuf_ip_netif_config_t nc = {.addr = ZH_A, .prefix_len = 24};
    memcpy(nc.mac, zh_mac_a, 6);
    zbuf_ip_driver_t drv = {.transmit = keep_tx};
    cr_assert_eq(zbuf_ip_netif_add(x->s, &nc, &drv, x, &x->nif), 0);
    x->pcb = udp_pcb(x->s);
}

/* Send bytes [0, len) of `big` to dst from x->pcb. */
static void fx_send(fx_t *x, size_t len, uint32_t dst)
{
    cr_assert_eq(zbuf_ip_udp_sendto(x->pcb, big_zbuf(len, &x->released), dst, UDP_PORT), 0);
}

static void fx_clear(fx_t *x)
{
    for (int i = 0; i < x->ntx; i++)
        zbuf_delete(x->tx[i]);
    x->ntx = 0;
}

static void fx_fini(fx_t *x)
{
    zbuf_ip_udp_delete(x->pcb);
    zbuf_ip_stack_delete(x->s);
    fx_clear(x);
}

/* End the test: free the frames, then the stack; by then exactly
 * `releases` buffers from big_zbuf() must have been released, once each. */
static void fx_done(fx_t *x, int releases)
{
    fx_clear(x);
    cr_assert_eq(x->released, releases, "each buffer released once, when its last user went");
    fx_fini(x);
    cr_assert_eq(x->released, releases, "nothing released twice");
}

static zbuf_ip_stats_t fx_stats(const fx_t *x)
{
    zbuf_ip_stats_t st;
    zbuf_ip_stats(x->s, &st);
    return st;
}

static void put32be(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static void free_frame(void *data, size_t size, void *arg)
{
    (void)size, (void)arg;
    free(data);
}

/* Feed an ARP frame from `ip` with MAC `mac`: op 2 (a reply to us) or 1 (a
 * request for our address).  The frame is a malloc'd buffer loaned to the
 * stack like a driver's, so feeding it copies nothing. */
static void fx_arp_from(fx_t *x, uint16_t op, uint32_t ip, const uint8_t mac[6])
{
    uint8_t *f = calloc(1, 60);
    cr_assert_not_null(f);
    size_t o = zh_eth(f, zh_mac_a, mac, 0x0806);
    uint8_t *a = f + o;
    const uint8_t fixed[8] = {0, 1, 8, 0, 6, 4, 0, (uint8_t)op};
    memcpy(a, fixed, 8);
    memcpy(a + 8, mac, 6);
    put32be(a + 14, ip);
    memcpy(a + 18, zh_mac_a, 6);
    put32be(a + 24, ZH_A);
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_buf(z, f, 60, free_frame, NULL), 0);
    cr_assert_eq(zbuf_ip_netif_input(x->nif, z), 0);
}

/* Whether frame i is an ARP request for `ip` (any address if 0). */
static bool is_arp_request(const fx_t *x, int i, uint32_t ip)
{
    uint8_t f[42];
    if (i >= x->ntx || zbuf_copyout(x->tx[i], 0, f, sizeof f) != (ssize_t)sizeof f)
        return false;
    uint32_t tpa = (uint32_t)f[38] << 24 | (uint32_t)f[39] << 16 | (uint32_t)f[40] << 8 | f[41];
    return f[12] == 0x08 && f[13] == 0x06 && f[21] == 1 && (ip == 0 || tpa == ip);
}

/* What the fragments in frames [first, first + n) say about one datagram. */
typedef struct dgram {
    uint8_t data[65536]; /* its payload (transport header and data), put together */
    size_t len;
    uint16_t id;
    uint8_t proto;
} dgram_t;

/* Check frames [first, first + n) are the fragments of one datagram to
 * `dst_mac` in order (ids equal, offsets contiguous, MF on all but the
 * last, no DF, every frame within the MTU, header checksums right) and put
 * its payload together in *d. */
static void collect(const fx_t *x, int first, int n, const uint8_t dst_mac[6], dgram_t *d)
{
    d->len = 0;
    for (int i = 0; i < n; i++) {
        zbuf_t *z = x->tx[first + i];
        uint8_t f[14 + 1500];
        size_t fl = zbuf_length(z);
        cr_assert_leq(fl, sizeof f, "frame %d above the MTU", i);
        cr_assert_eq(zbuf_copyout(z, 0, f, fl), (ssize_t)fl);
        cr_assert_eq(memcmp(f, dst_mac, 6), 0, "frame %d goes to the resolved MAC", i);
        cr_assert_eq(f[12] << 8 | f[13], 0x0800);
        const uint8_t *h = f + 14;
        cr_assert_eq(zh_csum(h, 20), 0, "header checksum of fragment %d", i);
        size_t tl = (size_t)(h[2] << 8 | h[3]);
        uint16_t id = (uint16_t)(h[4] << 8 | h[5]), fr = (uint16_t)(h[6] << 8 | h[7]);
        cr_assert_eq(tl, fl - 14);
        if (i == 0) {
            d->id = id;
            d->proto = h[9];
        }
        cr_assert_eq(id, d->id, "one identification for every fragment");
        cr_assert_eq(h[9], d->proto);
        cr_assert_eq((size_t)(fr & 0x1fff) * 8, d->len, "fragment %d follows the previous", i);
        cr_assert_eq((fr & 0x2000) != 0, i < n - 1, "MF on all but the last (%d)", i);
        cr_assert_eq(fr & 0x4000, 0, "no DF on a fragment");
        cr_assert_leq(d->len + tl - 20, sizeof d->data);
        memcpy(d->data + d->len, h + 20, tl - 20);
        d->len += tl - 20;
    }
}

/* Fragments of a datagram of `len` payload bytes at MTU 1500. */
static int frags(size_t len)
{
    return (int)((len + 1479) / 1480);
}

/* ------------------------------------------------ whole datagrams wait */

Test(arpq, udp_of_65000_bytes_waits_whole_and_leaves_in_fragments_after_the_reply)
{
    static fx_t x;
    static dgram_t d;
    fx_init(&x, NULL, 1);
    zbuf_stats_t before, after;
    zbuf_stats_get(&before);
    fx_send(&x, 65000, ZH_B);
    cr_assert_eq(x.ntx, 1, "only the ARP request leaves");
    fx_clear(&x);
    zbuf_ip_stats_t st = fx_stats(&x);
    cr_assert_eq(st.ip_frags_tx, 0, "not cut yet");
    cr_assert_geq(st.arp_queue_held, 65008, "the whole datagram is held");
    cr_assert_eq(st.arp_queue_drops, 0);
    fx_arp_from(&x, 2, ZH_B, zh_mac_b);
    zbuf_stats_get(&after);
    cr_assert_eq(after.bytes_copied, before.bytes_copied, "nothing copied on the way out");
    int n = frags(65008);
    cr_assert_eq(n, 44);
    cr_assert_eq(x.ntx, n, "every fragment leaves once the address is known");
    st = fx_stats(&x);
    cr_assert_eq(st.ip_frags_tx, (uint64_t)n);
    cr_assert_eq(st.arp_queue_held, 0);
    cr_assert_eq(st.arp_queue_drops, 0);
    collect(&x, 0, n, zh_mac_b, &d);
    cr_assert_eq(d.proto, 17);
    cr_assert_eq(d.len, 65008);
    cr_assert_eq(d.data[4] << 8 | d.data[5], 65008, "UDP length");
    cr_assert_eq(zh_l4_csum(ZH_A, ZH_B, 17, d.data, d.len), 0, "UDP checksum over the whole");
    cr_assert_eq(memcmp(d.data + 8, big, 65000), 0, "payload byte for byte");
    cr_assert_eq(x.released, 0, "the fragments still reference the buffer");
    fx_done(&x, 1);
}

static void no_reply(void *arg, uint32_t from, uint16_t id, uint16_t seq, zbuf_t *data)
{
    (void)arg, (void)from, (void)id, (void)seq;
    zbuf_delete(data);
}

Test(arpq, ping_of_20000_bytes_waits_whole_and_leaves_in_fragments_after_the_reply)
{
    static fx_t x;
    static dgram_t d;
    zbuf_ip_config_t c;
    zbuf_ip_config_init(&c);
    c.ping_reply = no_reply;
    fx_init(&x, &c, 2);
    zbuf_stats_t before, after;
    zbuf_stats_get(&before);
    cr_assert_eq(zbuf_ip_ping(x.s, ZH_B, 0x4321, 9, big_zbuf(20000, &x.released)), 0);
    cr_assert_eq(x.ntx, 1);
    fx_clear(&x);
    fx_arp_from(&x, 2, ZH_B, zh_mac_b);
    zbuf_stats_get(&after);
    cr_assert_eq(after.bytes_copied, before.bytes_copied, "nothing copied on the way out");
    int n = frags(20008);
    cr_assert_eq(x.ntx, n);
    collect(&x, 0, n, zh_mac_b, &d);
    cr_assert_eq(d.proto, 1);
    cr_assert_eq(d.len, 20008);
    cr_assert_eq(d.data[0], 8, "echo request");
    cr_assert_eq(zh_csum(d.data, d.len), 0, "ICMP checksum over the whole");
    cr_assert_eq(d.data[4] << 8 | d.data[5], 0x4321);
    cr_assert_eq(memcmp(d.data + 8, big, 20000), 0);
    fx_done(&x, 1);
}

Test(arpq, fragmented_echo_reply_waits_for_the_requester_address)
{
    /* B pings us in fragments before we know its MAC: the reply, made of the
     * request's own buffers, waits whole and leaves cut after the reply. */
    static fx_t x;
    static dgram_t d;
    static uint8_t req[4008];
    fx_init(&x, NULL, 3);
    req[0] = 8;
    req[4] = 0x12, req[5] = 0x34, req[7] = 5;
    for (size_t i = 8; i < sizeof req; i++)
        req[i] = zh_pattern(i, 3);
    uint16_t ck = zh_csum(req, sizeof req);
    req[2] = (uint8_t)(ck >> 8), req[3] = (uint8_t)ck;
    int released = 0;
    for (size_t off = 0; off < sizeof req; off += 1480) {
        size_t n = sizeof req - off < 1480 ? sizeof req - off : 1480;
        static uint8_t f[1514];
        size_t o = zh_eth(f, zh_mac_a, zh_mac_b, 0x0800);
        zh_ip(f + o, ZH_B, ZH_A, 1, n);
        f[o + 4] = 0xab, f[o + 5] = 0xcd;
        uint16_t fr = (uint16_t)((off + n < sizeof req ? 0x2000 : 0) | (off >> 3));
        f[o + 6] = (uint8_t)(fr >> 8), f[o + 7] = (uint8_t)fr;
        f[o + 10] = f[o + 11] = 0;
        uint16_t hc = zh_csum(f + o, 20);
        f[o + 10] = (uint8_t)(hc >> 8), f[o + 11] = (uint8_t)hc;
        memcpy(f + o + 20, req + off, n);
        /* The frame as a loaned driver buffer (one enrolled copy per frame,
         * which is the "DMA", not a library copy). */
        uint8_t *b = malloc(o + 20 + n);
        cr_assert_not_null(b);
        memcpy(b, f, o + 20 + n);
        zbuf_t *z;
        cr_assert_eq(zbuf_create(&z), 0);
        cr_assert_eq(zbuf_append_buf(z, b, o + 20 + n, zt_count_release, &released), 0);
        zbuf_ip_netif_input(x.nif, z);
    }
    zbuf_ip_stats_t st = fx_stats(&x);
    cr_assert_eq(st.icmp_echo_tx, 1);
    cr_assert_eq(x.ntx, 1, "the reply waits; only the ARP request left");
    cr_assert(is_arp_request(&x, 0, ZH_B));
    cr_assert_eq(released, 0, "the waiting reply holds the request's buffers");
    cr_assert_gt(st.arp_queue_held, sizeof req);
    fx_clear(&x);
    fx_arp_from(&x, 2, ZH_B, zh_mac_b);
    cr_assert_eq(x.ntx, 3);
    collect(&x, 0, 3, zh_mac_b, &d);
    cr_assert_eq(d.len, sizeof req);
    cr_assert_eq(d.data[0], 0, "echo reply");
    cr_assert_eq(zh_csum(d.data, d.len), 0);
    cr_assert_eq(memcmp(d.data + 4, req + 4, sizeof req - 4), 0);
    fx_clear(&x);
    cr_assert_eq(released, 3, "each loaned frame released once");
    fx_fini(&x);
}

Test(arpq, identification_is_chosen_when_the_datagram_is_sent)
{
    static fx_t x;
    static dgram_t d1, d2, d3;
    fx_init(&x, NULL, 4);
    fx_send(&x, 3000, ZH_B);
    fx_send(&x, 100, ZH_B);
    fx_send(&x, 5000, ZH_B);
    fx_clear(&x);
    fx_arp_from(&x, 2, ZH_B, zh_mac_b);
    fx_send(&x, 2000, ZH_B);
    cr_assert_eq(x.ntx, 3 + 1 + 4 + 2, "in the order sent");
    collect(&x, 0, 3, zh_mac_b, &d1);
    uint8_t f[64];
    cr_assert_eq(zbuf_copyout(x.tx[3], 0, f, 14 + 20), 14 + 20);
    cr_assert_eq(f[14 + 4] << 8 | f[14 + 5], 0, "what fits goes with id 0");
    cr_assert_eq(f[14 + 6] & 0x40, 0x40, "and DF");
    collect(&x, 4, 4, zh_mac_b, &d2);
    collect(&x, 8, 2, zh_mac_b, &d3);
    /* One counter per (source, destination, protocol): consecutive ids in
     * the order the datagrams were sent, the waiting ones included. */
    cr_assert_eq((uint16_t)(d2.id - d1.id), 1);
    cr_assert_eq((uint16_t)(d3.id - d2.id), 1);
    cr_assert_eq(memcmp(d2.data + 8, big, 5000), 0);
    fx_done(&x, 4);
}

Test(arpq, tcp_syn_waits_for_arp_like_any_datagram)
{
    static fx_t x;
    fx_init(&x, NULL, 0);
    zbuf_ip_tcp_t *t;
    cr_assert_eq(zbuf_ip_tcp_new(x.s, &t), 0);
    cr_assert_eq(zbuf_ip_tcp_connect(t, ZH_B, 80), 0);
    cr_assert_eq(x.ntx, 1);
    cr_assert(is_arp_request(&x, 0, ZH_B));
    fx_clear(&x);
    fx_arp_from(&x, 2, ZH_B, zh_mac_b);
    cr_assert_eq(x.ntx, 1);
    uint8_t f[14 + 20 + 20];
    cr_assert_eq(zbuf_copyout(x.tx[0], 0, f, sizeof f), (ssize_t)sizeof f);
    cr_assert_eq(f[14 + 9], 6);
    cr_assert_eq(f[14 + 20 + 13] & 0x02, 0x02, "the SYN");
    zbuf_ip_tcp_abort(t);
    fx_fini(&x);
}

/* -------------------------------------------------------------- limits */

Test(arpq, queue_limit_counts_datagrams_not_fragments)
{
    static fx_t x;
    fx_init(&x, NULL, 5);
    for (int i = 0; i < ZBUF_IP_ARP_QUEUE + 3; i++)
        fx_send(&x, 3000, ZH_B); /* 3 fragments; the count binds before the bytes */
    zbuf_ip_stats_t st = fx_stats(&x);
    cr_assert_eq(st.arp_queue_drops, 3, "only datagrams past the count limit are dropped");
    cr_assert_eq(x.released, 3, "and x.released at once");
    fx_clear(&x);
    fx_arp_from(&x, 2, ZH_B, zh_mac_b);
    cr_assert_eq(x.ntx, ZBUF_IP_ARP_QUEUE * 3, "every queued datagram leaves in 3 fragments");
    fx_done(&x, ZBUF_IP_ARP_QUEUE + 3);
}

Test(arpq, queue_limit_by_bytes_per_entry)
{
    static fx_t x;
    fx_init(&x, NULL, 6);
    fx_send(&x, 65000, ZH_B);
    uint64_t cost = fx_stats(&x).arp_queue_held;
    cr_assert_geq(cost, 65008);
    int fit = (int)(ZBUF_IP_ARP_QUEUE_BYTES / cost);
    cr_assert_lt(fit, ZBUF_IP_ARP_QUEUE, "the byte limit, not the count, must bind here");
    int sent = fit + 2;
    for (int i = 1; i < sent; i++)
        fx_send(&x, 65000, ZH_B);
    zbuf_ip_stats_t st = fx_stats(&x);
    cr_assert_eq(st.arp_queue_drops, (uint64_t)(sent - fit));
    cr_assert_eq(st.arp_queue_held, cost * (uint64_t)fit);
    cr_assert_leq(st.arp_queue_held, ZBUF_IP_ARP_QUEUE_BYTES);
    cr_assert_eq(x.released, sent - fit, "dropped datagrams x.released at once");
    /* A small one still fits in what is left. */
    fx_send(&x, 100, ZH_B);
    cr_assert_eq(fx_stats(&x).arp_queue_drops, (uint64_t)(sent - fit));
    fx_clear(&x);
    fx_arp_from(&x, 2, ZH_B, zh_mac_b);
    cr_assert_eq(x.ntx, fit * 44 + 1);
    cr_assert_eq(fx_stats(&x).arp_queue_held, 0);
    fx_done(&x, sent + 1);
}

Test(arpq, queue_limit_by_bytes_over_all_entries_and_timeout_releases_all)
{
    static fx_t x;
    fx_init(&x, NULL, 7);
    fx_send(&x, 65000, ZBUF_IP_ADDR(192, 0, 2, 10));
    uint64_t cost = fx_stats(&x).arp_queue_held;
    int per = (int)(ZBUF_IP_ARP_QUEUE_BYTES / cost);
    int total = (int)(ZBUF_IP_ARP_QUEUE_TOTAL_BYTES / cost);
    int dests = total / per + 2;
    cr_assert_leq(dests, ZBUF_IP_ARP_ENTRIES);
    int sent = 1;
    for (int k = 0; k < dests; k++)
        for (int i = k == 0 ? 1 : 0; i < per; i++, sent++)
            fx_send(&x, 65000, ZBUF_IP_ADDR(192, 0, 2, 10 + k));
    cr_assert_gt(sent, total, "enough to pass the total");
    zbuf_ip_stats_t st = fx_stats(&x);
    cr_assert_eq(st.arp_queue_held, cost * (uint64_t)total);
    cr_assert_leq(st.arp_queue_held, ZBUF_IP_ARP_QUEUE_TOTAL_BYTES);
    cr_assert_eq(st.arp_queue_drops, (uint64_t)(sent - total));
    cr_assert_eq(x.released, sent - total);
    /* Nobody answers: every queued datagram is dropped once the tries are
     * spent, each buffer x.released once, and nothing but requests left. */
    for (int i = 0; i < ZBUF_IP_ARP_TRIES + 2; i++) {
        x.now += ZBUF_IP_ARP_RETRY_MS;
        zbuf_ip_poll(x.s);
    }
    st = fx_stats(&x);
    cr_assert_eq(x.released, sent);
    cr_assert_eq(st.arp_queue_drops, (uint64_t)sent);
    cr_assert_eq(st.arp_queue_held, 0);
    cr_assert_eq(st.ip_frags_tx, 0);
    cr_assert_eq(x.ntx, dests * ZBUF_IP_ARP_TRIES);
    for (int i = 0; i < x.ntx; i++)
        cr_assert(is_arp_request(&x, i, 0), "frame %d is an ARP request", i);
    cr_assert_eq(zbuf_ip_next_deadline(x.s), ZBUF_IP_NEVER);
    fx_done(&x, sent);
}

Test(arpq, unanswered_arp_drops_whole_datagrams_and_releases_each_once)
{
    static fx_t x;
    fx_init(&x, NULL, 8);
    fx_send(&x, 65000, ZH_B);
    cr_assert_eq(zbuf_ip_ping(x.s, ZH_B, 1, 1, big_zbuf(20000, &x.released)), 0);
    fx_send(&x, 10, ZH_B);
    for (int i = 0; i < ZBUF_IP_ARP_TRIES - 1; i++) {
        x.now += ZBUF_IP_ARP_RETRY_MS;
        zbuf_ip_poll(x.s);
        cr_assert_eq(x.released, 0, "still waiting after try %d", i + 1);
    }
    x.now += ZBUF_IP_ARP_RETRY_MS;
    zbuf_ip_poll(x.s);
    zbuf_ip_stats_t st = fx_stats(&x);
    cr_assert_eq(x.released, 3);
    cr_assert_eq(st.arp_queue_drops, 3, "three datagrams, however many fragments");
    cr_assert_eq(st.arp_queue_held, 0);
    cr_assert_eq(x.ntx, ZBUF_IP_ARP_TRIES);
    /* A late reply finds nothing to send. */
    fx_arp_from(&x, 2, ZH_B, zh_mac_b);
    cr_assert_eq(x.ntx, ZBUF_IP_ARP_TRIES);
    fx_done(&x, 3);
}

Test(arpq, removing_the_interface_releases_what_waits)
{
    static fx_t x;
    fx_init(&x, NULL, 9);
    fx_send(&x, 65000, ZH_B);
    fx_send(&x, 3000, ZBUF_IP_ADDR(192, 0, 2, 3));
    zbuf_ip_netif_remove(x.nif);
    cr_assert_eq(x.released, 2);
    cr_assert_eq(fx_stats(&x).arp_queue_held, 0);
    fx_done(&x, 2);
}

/* ----------------------------------------------------------- two stacks */

typedef struct rx {
    int n;
    zbuf_t *last;
} rx_t;

static void rx_cb(void *arg, zbuf_ip_udp_t *pcb, zbuf_t *data, uint32_t src, uint16_t sport)
{
    (void)pcb, (void)src, (void)sport;
    rx_t *r = arg;
    r->n++;
    zbuf_delete(r->last);
    r->last = data;
}

static bool got_one(void *arg)
{
    return ((rx_t *)arg)->n > 0;
}

static bool got_two(void *arg)
{
    return ((rx_t *)arg)->n > 1;
}

static void assert_big(const zbuf_t *z, size_t len)
{
    static uint8_t back[65000];
    cr_assert_eq(zbuf_length(z), len);
    cr_assert_eq(zbuf_copyout(z, 0, back, len), (ssize_t)len);
    cr_assert_eq(memcmp(back, big, len), 0, "the bytes sent");
}

Test(arpq, two_stacks_with_cold_caches_exchange_60000_byte_datagrams)
{
    zh_pair_t p;
    zh_pair_init(&p, NULL, NULL);
    fill_big(10);
    zbuf_ip_udp_t *ua = udp_pcb(p.a), *ub;
    cr_assert_eq(zbuf_ip_udp_new(p.b, &ub), 0);
    cr_assert_eq(zbuf_ip_udp_bind(ub, ZBUF_IP_ANY, UDP_PORT), 0);
    rx_t ra = {0}, rb = {0};
    zbuf_ip_udp_set_recv(ua, rx_cb, &ra);
    zbuf_ip_udp_set_recv(ub, rx_cb, &rb);
    int released = 0;
    zbuf_stats_t before, after;
    zbuf_stats_get(&before);
    /* Two at once, both waiting for the same resolution. */
    cr_assert_eq(zbuf_ip_udp_sendto(ua, big_zbuf(60000, &released), ZH_B, UDP_PORT), 0);
    cr_assert_eq(zbuf_ip_udp_sendto(ua, big_zbuf(60000, &released), ZH_B, UDP_PORT), 0);
    zbuf_ip_stats_t sa;
    zbuf_ip_stats(p.a, &sa);
    cr_assert_eq(sa.ip_frags_tx, 0, "waiting for ARP");
    cr_assert(zh_pair_run(&p, got_two, &rb, 1000));
    zbuf_stats_get(&after);
    cr_assert_eq(after.bytes_copied, before.bytes_copied, "no byte copied either way");
    cr_assert_eq(rb.n, 2, "both datagrams arrived whole");
    assert_big(rb.last, 60000);
    /* B answers on the port it heard from: its cache learned A from A's request,
     * so this one does not wait; the exchange still ends whole. */
    zbuf_t *back = rb.last;
    rb.last = NULL;
    cr_assert_eq(zbuf_ip_udp_sendto(ub, back, ZH_A, 5000), 0);
    cr_assert(zh_pair_run(&p, got_one, &ra, 1000));
    assert_big(ra.last, 60000);
    zbuf_delete(ra.last);
    zbuf_ip_stats_t sb;
    zh_pair_run(&p, NULL, NULL, 100); /* let the last frames drain */
    zbuf_ip_stats(p.a, &sa);
    zbuf_ip_stats(p.b, &sb);
    cr_assert_eq(sa.arp_queue_drops, 0);
    cr_assert_eq(sa.ip_frags_tx, 2 * 41);
    cr_assert_eq(sb.ip_reassembled, 2);
    cr_assert_eq(sa.ip_reassembled, 1);
    cr_assert_eq(released, 2, "each sent buffer released once");
    zbuf_ip_udp_delete(ua);
    zbuf_ip_udp_delete(ub);
    zh_pair_fini(&p);
}

static void count_reply(void *arg, uint32_t from, uint16_t id, uint16_t seq, zbuf_t *data)
{
    (void)from, (void)id, (void)seq;
    rx_t *r = arg;
    r->n++;
    zbuf_delete(r->last);
    r->last = data;
}

Test(arpq, two_stacks_with_cold_caches_ping_20000_bytes)
{
    zh_pair_t p;
    rx_t r = {0};
    zbuf_ip_config_t c;
    zbuf_ip_config_init(&c);
    c.ping_reply = count_reply;
    c.ping_arg = &r;
    zh_pair_init(&p, NULL, &c);
    fill_big(11);
    int released = 0;
    cr_assert_eq(zbuf_ip_ping(p.a, ZH_B, 3, 4, big_zbuf(20000, &released)), 0);
    cr_assert(zh_pair_run(&p, got_one, &r, 1000));
    assert_big(r.last, 20000);
    zbuf_delete(r.last);
    zh_pair_fini(&p);
    cr_assert_eq(released, 1);
}
