/* SPDX-License-Identifier: MIT */
/*
 * The transmit fast path: a connection caches its route, the next hop's
 * MAC and its Ethernet and IP headers (zbuf_ip__route_ready()).  Whatever
 * they were made from may change between two segments of one connection:
 * the neighbour's MAC, the ARP entry's life, the interface itself, its MTU.
 * Each test changes one of them mid-connection and checks the next frame is
 * what the uncached path sends; the last ones inject allocation failures
 * into the header space.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "stack_internal.h"
#include "support.h"
#include "tcpfix.h"

ZT_SUITE(txroute);

#define PEER_ISN 7000u
#define EXP_PROTO 253 /* an IP protocol number for experiments (RFC 3692) */

static const uint8_t mac_c[6] = {0x02, 0x00, 0x00, 0x00, 0x00, 0x0c};
static const uint8_t mss1460[4] = {2, 4, 0x05, 0xb4};

/* A's MAC as B's frames address it. */
static const uint8_t *a_mac = zh_mac_a;

static int send_seg(zh_single_t *u, uint32_t seq, uint32_t ack, uint8_t flags, const char *data)
{
    uint8_t f[2048];
    size_t n = zh_tcp_frame(f, 4000, 80, seq, ack, flags, 65535, mss1460,
                            (flags & 0x02) ? sizeof mss1460 : 0, (const uint8_t *)data,
                            data ? strlen(data) : 0);
    memcpy(f, a_mac, 6);
    return zh_input(u, f, n, 0);
}

static const uint8_t bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

/* An ARP request from `ip` at `mac` for A; what A answers stays captured. */
static void arp_from(zh_single_t *u, const uint8_t mac[6], uint32_t ip)
{
    uint8_t f[42];
    size_t o = zh_eth(f, bcast, mac, 0x0806);
    uint8_t a[28] = {0, 1, 8, 0, 6, 4, 0, 1};
    memcpy(a + 8, mac, 6);
    for (int i = 0; i < 4; i++)
        a[14 + i] = (uint8_t)(ip >> (24 - 8 * i));
    a[24] = 192, a[25] = 0, a[26] = 2, a[27] = 1;
    memcpy(f + o, a, sizeof a);
    cr_assert_eq(zh_input(u, f, sizeof f, 0), 0);
}

static void arp_from_b(zh_single_t *u, const uint8_t mac[6])
{
    arp_from(u, mac, ZH_B);
}

/* Listen on 80 and complete a handshake from B:4000 (MSS 1460); returns
 * our ISS.  Nothing stays captured. */
static uint32_t establish(zh_single_t *u, ep_t *e)
{
    ep_listen(e, u->s, 80);
    arp_from_b(u, zh_mac_b);
    zh_single_clear(u);
    send_seg(u, PEER_ISN, 0, 0x02, NULL);
    zh_tcp_seg_t sa;
    cr_assert_eq(u->ntx, 1, "one SYN-ACK");
    cr_assert(zh_tx_tcp(u, 0, &sa));
    cr_assert_eq(sa.flags, 0x12);
    zh_single_clear(u);
    send_seg(u, PEER_ISN + 1, sa.seq + 1, 0x10, NULL);
    cr_assert_eq(e->accepted, 1);
    return sa.seq;
}

/* Check frame i: Ethernet from `src` to `dst`, an unfragmented IPv4
 * datagram from A to B (DF, TTL 64, right length and header checksum)
 * holding a TCP segment with a right checksum and payload `data`. */
static void check_frame(zh_single_t *u, int i, const uint8_t src[6], const uint8_t dst[6],
                        const char *data)
{
    uint8_t f[2048];
    size_t n = zh_tx_bytes(u, i, f, sizeof f);
    cr_assert_geq(n, 54u);
    cr_assert_eq(memcmp(f, dst, 6), 0, "frame %d: destination MAC", i);
    cr_assert_eq(memcmp(f + 6, src, 6), 0, "frame %d: source MAC", i);
    cr_assert_eq(f[12] << 8 | f[13], 0x0800);
    const uint8_t *ip = f + 14;
    cr_assert_eq(ip[0], 0x45);
    cr_assert_eq((size_t)(ip[2] << 8 | ip[3]), n - 14, "IP total length");
    cr_assert_eq(ip[4] << 8 | ip[5], 0, "id 0 on an atomic datagram");
    cr_assert_eq(ip[6] << 8 | ip[7], 0x4000, "DF, no fragment");
    cr_assert_eq(ip[8], 64);
    cr_assert_eq(ip[9], 6);
    cr_assert_eq(zh_csum(ip, 20), 0, "IP header checksum");
    cr_assert_eq(memcmp(ip + 12, (const uint8_t[]){192, 0, 2, 1, 192, 0, 2, 2}, 8), 0);
    const uint8_t *t = ip + 20;
    size_t tlen = n - 34, hl = (size_t)(t[12] >> 4) * 4;
    cr_assert_eq(zh_l4_csum(ZH_A, ZH_B, 6, t, tlen), 0, "TCP checksum");
    cr_assert_eq(tlen - hl, strlen(data));
    cr_assert_eq(memcmp(t + hl, data, tlen - hl), 0);
}

/* Write `text` (one enrolled buffer whose release increments *released,
 * if not NULL). */
static void write_text(ep_t *e, const char *text, int *released)
{
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_buf(z, (void *)text, strlen(text), released ? zt_count_release : NULL,
                                 released),
                 0);
    cr_assert_eq(zbuf_ip_tcp_write(e->pcb, z), 0);
}

/* The peer acknowledges everything up to our iss + 1 + `n`. */
static void ack_upto(zh_single_t *u, uint32_t iss, uint32_t n)
{
    send_seg(u, PEER_ISN + 1, iss + 1 + n, 0x10, NULL);
}

static void finish(zh_single_t *u, ep_t *e)
{
    if (e->pcb)
        zbuf_ip_tcp_abort(e->pcb);
    zbuf_ip_tcp_close(e->listener);
    zh_single_fini(u);
    ep_fini(e);
}

/* A connection from B that has sent "one" to B's MAC and had it
 * acknowledged: the route is cached.  Returns our ISS. */
static uint32_t one_acked(zh_single_t *u, ep_t *e)
{
    zh_single_init(u, NULL);
    uint32_t iss = establish(u, e);
    write_text(e, "one", NULL);
    cr_assert_eq(u->ntx, 1);
    check_frame(u, 0, zh_mac_a, zh_mac_b, "one");
    zh_single_clear(u);
    ack_upto(u, iss, 3);
    return iss;
}

Test(txroute, next_segment_after_the_neighbour_moved_goes_to_its_new_mac)
{
    zh_single_t u;
    ep_t e = {0};
    one_acked(&u, &e);
    arp_from_b(&u, mac_c); /* B announces itself at another MAC */
    zh_single_clear(&u);
    u.now += 1000;
    write_text(&e, "two", NULL);
    cr_assert_eq(u.ntx, 1);
    check_frame(&u, 0, zh_mac_a, mac_c, "two");
    /* The entry is marked in use (the table's LRU eviction spares it). */
    bool seen = false;
    for (int i = 0; i < ZBUF_IP_ARP_ENTRIES; i++) {
        const struct arp_entry *a = &u.s->arp[i];
        if (a->valid && a->ip == ZH_B) {
            cr_assert(a->sent);
            cr_assert_eq(a->used, u.now, "used by the latest segment");
            seen = true;
        }
    }
    cr_assert(seen);
    finish(&u, &e);
}

Test(txroute, next_segment_after_the_arp_entry_expired_waits_for_arp)
{
    zh_single_t u;
    ep_t e = {0};
    one_acked(&u, &e);
    u.now += ZBUF_IP_ARP_MAX_AGE_MS + 1;
    zbuf_ip_poll(u.s); /* the entry expires */
    zh_single_clear(&u);
    write_text(&e, "two", NULL);
    cr_assert_eq(u.ntx, 1, "only an ARP request: the segment waits");
    uint8_t f[64];
    cr_assert_eq(zh_tx_bytes(&u, 0, f, sizeof f), 60u, "ARP padded to the Ethernet minimum");
    cr_assert_eq(f[12] << 8 | f[13], 0x0806, "an ARP request, not the segment");
    zh_single_clear(&u);
    arp_from_b(&u, mac_c); /* B answers (from another MAC as well) */
    cr_assert_geq(u.ntx, 1);
    check_frame(&u, 0, zh_mac_a, mac_c, "two");
    finish(&u, &e);
}

static int keep_tx(void *ctx, zbuf_t *frame)
{
    zh_single_t *u = ctx;
    cr_assert_lt(u->ntx, ZH_CAP_MAX);
    u->tx[u->ntx++] = frame;
    return 0;
}

/* Replace A's interface by one with MAC `mac`, MTU `mtu` and driver flags
 * `flags`, and make it learn B. */
static void replace_netif(zh_single_t *u, const uint8_t mac[6], uint16_t mtu, unsigned flags)
{
    zbuf_ip_netif_remove(u->nif);
    zbuf_ip_netif_config_t nc = {.addr = ZH_A, .prefix_len = 24, .mtu = mtu};
    memcpy(nc.mac, mac, 6);
    zbuf_ip_driver_t drv = {.transmit = keep_tx, .flags = flags};
    cr_assert_eq(zbuf_ip_netif_add(u->s, &nc, &drv, u, &u->nif), 0);
    arp_from_b(u, zh_mac_b);
    zh_single_clear(u);
}

Test(txroute, interface_removed_while_a_connection_sends)
{
    zh_single_t u;
    ep_t e = {0};
    uint32_t iss = one_acked(&u, &e);
    zbuf_ip_netif_remove(u.nif);
    int released = 0;
    write_text(&e, "two", &released);
    cr_assert_eq(u.ntx, 0, "no frame through a removed interface");
    u.nif = NULL; /* already removed */
    /* Another interface takes its place: the retransmission leaves from it. */
    replace_netif(&u, mac_c, 0, 0);
    a_mac = mac_c;
    for (int i = 0; i < 20 && u.ntx == 0; i++) {
        u.now += 250;
        zbuf_ip_poll(u.s);
    }
    cr_assert_eq(u.ntx, 1, "the segment is retransmitted");
    check_frame(&u, 0, mac_c, zh_mac_b, "two");
    zh_single_clear(&u); /* the frames share the buffer */
    cr_assert_eq(released, 0);
    ack_upto(&u, iss, 6);
    cr_assert_eq(released, 1, "released once, when acknowledged");
    finish(&u, &e);
}

Test(txroute, a_segment_above_a_shrunk_mtu_leaves_in_fragments)
{
    zh_single_t u;
    zh_single_init(&u, NULL);
    ep_t e = {0};
    establish(&u, &e);
    replace_netif(&u, zh_mac_a, 576, 0);
    static char big[1201];
    memset(big, 'x', sizeof big - 1);
    write_text(&e, big, NULL);
    cr_assert_eq(u.ntx, 3, "1220 bytes of IP payload in fragments of 552");
    size_t got = 0;
    for (int i = 0; i < u.ntx; i++) {
        uint8_t f[2048];
        size_t n = zh_tx_bytes(&u, i, f, sizeof f);
        const uint8_t *ip = f + 14;
        cr_assert_leq(n - 14, 576u);
        uint16_t frag = (uint16_t)(ip[6] << 8 | ip[7]);
        cr_assert_eq(frag & 0x1fff, got / 8, "fragment offset");
        cr_assert_eq((frag & 0x2000) != 0, i < u.ntx - 1, "more fragments");
        cr_assert_eq(frag & 0x4000, 0, "no DF on a fragment");
        cr_assert_eq(zh_csum(ip, 20), 0);
        got += n - 34;
    }
    cr_assert_eq(got, 20 + 1200u);
    finish(&u, &e);
}

/* Send `z` (`len` bytes of protocol EXP_PROTO) from A to `dst` the way TCP
 * does: through `rt` when it is ready, else through zbuf_ip__output(). */
static int send_via(zh_single_t *u, struct zbuf_ip__txroute *rt, uint32_t dst, zbuf_t *z,
                    size_t len)
{
    if (!zbuf_ip__route_ready(u->s, rt, len, ZH_A, dst, EXP_PROTO))
        return zbuf_ip__output(u->s, z, ZH_A, dst, EXP_PROTO);
    uint8_t *h;
    cr_assert_eq(zbuf_prepend_space(z, ZBUF_IP__L2_HLEN, (void **)&h), 0);
    return zbuf_ip__output_ready(u->s, rt, z, h, len);
}

/* TCP checksums are left to the interface that offloads them, and only
 * to it, as interfaces come and go under a connection. */
Test(txroute, checksum_offload_follows_the_interface)
{
    zh_single_t u;
    ep_t e = {0};
    uint32_t iss = one_acked(&u, &e); /* checked: a computed checksum */
    replace_netif(&u, zh_mac_a, 0, ZBUF_IP_DRV_CSUM_OFFLOAD);
    write_text(&e, "two", NULL);
    cr_assert_eq(u.ntx, 1);
    uint8_t f[128];
    size_t n = zh_tx_bytes(&u, 0, f, sizeof f);
    cr_assert_eq(n, 34 + (f[34 + 12] >> 4) * 4 + 3u);
    cr_assert_eq(f[34 + 16] << 8 | f[34 + 17], 0, "checksum left to the interface");
    zh_single_clear(&u);
    ack_upto(&u, iss, 6);
    replace_netif(&u, zh_mac_a, 0, 0);
    write_text(&e, "three", NULL);
    cr_assert_eq(u.ntx, 1);
    check_frame(&u, 0, zh_mac_a, zh_mac_b, "three");
    finish(&u, &e);
}

/* A destination reached through the gateway of one interface; then an
 * interface on its own subnet is added: the cached route must not keep
 * the gateway.  (To the new subnet's broadcast address: no ARP entry is
 * made that would invalidate the route anyway.) */
Test(txroute, an_interface_added_takes_over_a_cached_route)
{
    zh_single_t u, other;
    zh_single_init(&u, NULL);
    memset(&other, 0, sizeof other);
    zbuf_ip_netif_remove(u.nif);
    zbuf_ip_netif_config_t nc = {.addr = ZH_A, .prefix_len = 24,
                                 .gateway = ZBUF_IP_ADDR(192, 0, 2, 254)};
    memcpy(nc.mac, zh_mac_a, 6);
    zbuf_ip_driver_t drv = {.transmit = keep_tx};
    cr_assert_eq(zbuf_ip_netif_add(u.s, &nc, &drv, &u, &u.nif), 0);
    arp_from(&u, mac_c, ZBUF_IP_ADDR(192, 0, 2, 254));
    zh_single_clear(&u);
    uint32_t dst = ZBUF_IP_ADDR(198, 51, 100, 255);
    struct zbuf_ip__txroute rt = {0};
    static uint8_t payload[8];
    for (int pass = 0; pass < 2; pass++) {
        zbuf_t *z;
        cr_assert_eq(zbuf_create(&z), 0);
        cr_assert_eq(zbuf_append_buf(z, payload, sizeof payload, NULL, NULL), 0);
        cr_assert_eq(send_via(&u, &rt, dst, z, sizeof payload), 0);
        if (pass == 0) {
            uint8_t f[64];
            cr_assert_eq(u.ntx, 1);
            zh_tx_bytes(&u, 0, f, sizeof f);
            cr_assert_eq(memcmp(f, mac_c, 6), 0, "to the gateway");
            zbuf_ip_netif_config_t n2 = {.addr = ZBUF_IP_ADDR(198, 51, 100, 1), .prefix_len = 24};
            memcpy(n2.mac, zh_mac_b, 6);
            zbuf_ip_netif_t *nif2;
            cr_assert_eq(zbuf_ip_netif_add(u.s, &n2, &drv, &other, &nif2), 0);
        }
    }
    cr_assert_eq(u.ntx, 1, "nothing more through the gateway");
    cr_assert_eq(other.ntx, 1, "the new interface's subnet");
    uint8_t f[64];
    zh_tx_bytes(&other, 0, f, sizeof f);
    cr_assert_eq(memcmp(f, bcast, 6), 0, "its broadcast");
    cr_assert_eq(memcmp(f + 6, zh_mac_b, 6), 0, "from the new interface");
    zh_single_clear(&other);
    zh_single_fini(&u);
}

/* ------------------------------------------------ allocation failures */

/* malloc with a switch: while `fail_from` is non-zero every allocation of
 * at least that many bytes fails (a header buffer is at least
 * ZBUF_HEADROOM_DEFAULT bytes; descriptors are smaller). */
static struct {
    size_t fail_from;
    long failed;
} fa;

static void *fa_alloc(void *ctx, size_t size)
{
    (void)ctx;
    if (fa.fail_from && size >= fa.fail_from) {
        fa.failed++;
        return NULL;
    }
    return malloc(size);
}

static void fa_free(void *ctx, void *p, size_t size)
{
    (void)ctx;
    (void)size;
    free(p);
}

/* The library's test hook (lib/internal.h): bypass the per-thread caches
 * so that every allocation reaches the allocator. */
void zbuf__cache_set_enabled(bool on);

static void fa_install(void)
{
    static const zbuf_allocator_t a = {.alloc = fa_alloc, .free = fa_free};
    memset(&fa, 0, sizeof fa);
    zbuf__cache_set_enabled(false);
    cr_assert_eq(zbuf_set_allocator(&a), 0);
}

static void fa_uninstall(void)
{
    cr_assert_eq(zbuf_set_allocator(NULL), 0);
    zbuf__cache_set_enabled(true);
}

Test(txroute, tcp_header_space_that_cannot_be_allocated_delays_the_segment)
{
    fa_install();
    zh_single_t u;
    zh_single_init(&u, NULL);
    ep_t e = {0};
    uint32_t iss = establish(&u, &e);
    int released = 0;
    fa.fail_from = ZBUF_HEADROOM_DEFAULT;
    write_text(&e, "one", &released);
    cr_assert_gt(fa.failed, 0, "the header buffer was asked for");
    cr_assert_eq(u.ntx, 0, "no segment without its header");
    fa.fail_from = 0;
    for (int i = 0; i < 40 && u.ntx == 0; i++) {
        u.now += 250;
        zbuf_ip_poll(u.s);
    }
    cr_assert_eq(u.ntx, 1, "sent once the header space can be had");
    check_frame(&u, 0, zh_mac_a, zh_mac_b, "one");
    zh_single_clear(&u);
    cr_assert_eq(released, 0);
    ack_upto(&u, iss, 3);
    cr_assert_eq(released, 1);
    finish(&u, &e);
    fa_uninstall();
}

/* The cached route allocates nothing of its own (its headers are reserved
 * by the sender); the uncached one, given a datagram without headroom (its
 * first buffer is the application's) and no memory for a header segment,
 * drops it with -ENOMEM and releases its buffer once. */
Test(txroute, the_cached_route_allocates_nothing_and_the_uncached_one_drops_once)
{
    fa_install();
    zh_single_t u;
    zh_single_init(&u, NULL);
    arp_from_b(&u, zh_mac_b);
    zh_single_clear(&u);
    static uint8_t payload[40];
    struct zbuf_ip__txroute rt = {0};
    for (int pass = 0; pass < 2; pass++) {
        int released = 0;
        zbuf_t *z;
        cr_assert_eq(zbuf_create(&z), 0);
        cr_assert_eq(zbuf_append_buf(z, payload, sizeof payload, zt_count_release, &released), 0);
        int rc;
        if (pass == 0) {
            uint8_t *h;
            cr_assert_eq(zbuf_prepend_space(z, ZBUF_IP__L2_HLEN, (void **)&h), 0);
            fa.fail_from = 1; /* every allocation */
            cr_assert(zbuf_ip__route_ready(u.s, &rt, sizeof payload, ZH_A, ZH_B, EXP_PROTO));
            rc = zbuf_ip__output_ready(u.s, &rt, z, h, sizeof payload);
            fa.fail_from = 0;
            cr_assert_eq(rc, 0);
            cr_assert_eq(fa.failed, 0, "nothing asked for");
            cr_assert_eq(u.ntx, 1);
            zh_single_clear(&u);
        } else {
            fa.fail_from = ZBUF_HEADROOM_DEFAULT;
            rc = zbuf_ip__output(u.s, z, ZH_A, ZH_B, EXP_PROTO);
            fa.fail_from = 0;
            cr_assert_eq(rc, -ENOMEM);
            cr_assert_gt(fa.failed, 0);
            cr_assert_eq(u.ntx, 0);
        }
        cr_assert_eq(released, 1, "pass %d: released exactly once", pass);
    }
    zh_single_fini(&u);
    fa_uninstall();
}
