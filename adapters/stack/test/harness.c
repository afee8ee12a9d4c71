/* SPDX-License-Identifier: MIT */
#include "harness.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

const uint8_t zh_mac_a[6] = {0x02, 0, 0, 0, 0, 0x0a};
const uint8_t zh_mac_b[6] = {0x02, 0, 0, 0, 0, 0x0b};

uint64_t zh_clock(void *arg)
{
    return *(uint64_t *)arg;
}

static zbuf_ip_config_t with_clock(const zbuf_ip_config_t *base, uint64_t *now, uint8_t keybyte)
{
    zbuf_ip_config_t c;
    if (base)
        c = *base;
    else
        zbuf_ip_config_init(&c);
    c.clock = zh_clock;
    c.clock_arg = now;
    if (!c.isn_key_set) {
        memset(c.isn_key, keybyte, sizeof c.isn_key);
        c.isn_key_set = true;
    }
    return c;
}

void zh_pair_init(zh_pair_t *p, const zbuf_ip_link_config_t *lc, const zbuf_ip_config_t *base)
{
    zh_pair_init_mtu(p, lc, base, 0);
}

void zh_pair_init_mtu(zh_pair_t *p, const zbuf_ip_link_config_t *lc, const zbuf_ip_config_t *base,
                      uint16_t mtu)
{
    memset(p, 0, sizeof *p);
    p->now = 1000;
    zbuf_ip_config_t ca = with_clock(base, &p->now, 0xa5), cb = with_clock(base, &p->now, 0x5a);
    cr_assert_eq(zbuf_ip_stack_create(&ca, &p->a), 0);
    cr_assert_eq(zbuf_ip_stack_create(&cb, &p->b), 0);
    cr_assert_eq(zbuf_ip_link_create(lc, &p->link), 0);
    zbuf_ip_netif_config_t na = {.addr = ZH_A, .prefix_len = 24, .mtu = mtu};
    memcpy(na.mac, zh_mac_a, 6);
    zbuf_ip_netif_config_t nb = {.addr = ZH_B, .prefix_len = 24, .mtu = mtu};
    memcpy(nb.mac, zh_mac_b, 6);
    cr_assert_eq(zbuf_ip_link_attach(p->link, 0, p->a, &na, &p->na), 0);
    cr_assert_eq(zbuf_ip_link_attach(p->link, 1, p->b, &nb, &p->nb), 0);
}

void zh_pair_fini(zh_pair_t *p)
{
    zbuf_ip_link_delete(p->link);
    zbuf_ip_stack_delete(p->a);
    zbuf_ip_stack_delete(p->b);
    memset(p, 0, sizeof *p);
}

bool zh_pair_run(zh_pair_t *p, bool (*cond)(void *), void *arg, uint64_t max_ms)
{
    uint64_t end = p->now + max_ms;
    for (long steps = 0; steps < 100000000L; steps++) {
        if (cond && cond(arg))
            return true;
        int n = zbuf_ip_poll(p->a);
        n += zbuf_ip_poll(p->b);
        if (n > 0)
            continue;
        uint64_t da = zbuf_ip_next_deadline(p->a), db = zbuf_ip_next_deadline(p->b);
        uint64_t d = da < db ? da : db;
        if (d == ZBUF_IP_NEVER)
            return cond ? cond(arg) : true;
        if (d <= p->now)
            d = p->now + 1;
        if (d > end)
            return cond ? cond(arg) : false;
        p->now = d;
    }
    return false;
}

void zh_pair_stall(zh_pair_t *p, zbuf_ip_stack_t *stalled, uint64_t ms)
{
    zbuf_ip_stack_t *live = stalled == p->a ? p->b : p->a;
    uint64_t end = p->now + ms;
    for (long steps = 0; steps < 10000000L; steps++) {
        if (zbuf_ip_poll(live) > 0)
            continue;
        uint64_t d = zbuf_ip_next_deadline(live);
        if (d <= p->now)
            d = p->now + 1;
        if (d > end)
            break;
        p->now = d;
    }
    p->now = end;
}

/* ------------------------------------------------------------ single */

static int cap_tx(void *ctx, zbuf_t *frame)
{
    zh_single_t *u = ctx;
    if (u->ntx == ZH_CAP_MAX) {
        zbuf_delete(frame);
        return -ENOBUFS;
    }
    cr_assert_eq(zbuf_check(frame), 0);
    u->tx[u->ntx++] = frame;
    return 0;
}

/* The capture driver's receive side: what zh_queue() queued, oldest first. */
static int cap_poll(void *ctx, unsigned budget)
{
    zh_single_t *u = ctx;
    int n = 0;
    while (n < u->nrxq && (unsigned)n < budget) {
        zbuf_ip_netif_input(u->nif, u->rxq[n]);
        n++;
    }
    memmove(u->rxq, u->rxq + n, (size_t)(u->nrxq - n) * sizeof u->rxq[0]);
    u->nrxq -= n;
    return n;
}

void zh_queue(zh_single_t *u, const uint8_t *frame, size_t len)
{
    cr_assert_lt(u->nrxq, ZH_CAP_MAX);
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_copy(z, frame, len), 0);
    u->rxq[u->nrxq++] = z;
}

void zh_single_init(zh_single_t *u, const zbuf_ip_config_t *base)
{
    memset(u, 0, sizeof *u);
    u->now = 1000;
    zbuf_ip_config_t c = with_clock(base, &u->now, 0x33);
    cr_assert_eq(zbuf_ip_stack_create(&c, &u->s), 0);
    zbuf_ip_netif_config_t nc = {.addr = ZH_A, .prefix_len = 24};
    memcpy(nc.mac, zh_mac_a, 6);
    zbuf_ip_driver_t drv = {.transmit = cap_tx, .poll = cap_poll};
    cr_assert_eq(zbuf_ip_netif_add(u->s, &nc, &drv, u, &u->nif), 0);
}

void zh_single_clear(zh_single_t *u)
{
    for (int i = 0; i < u->ntx; i++)
        zbuf_delete(u->tx[i]);
    u->ntx = 0;
}

void zh_single_fini(zh_single_t *u)
{
    zbuf_ip_stack_delete(u->s);
    zh_single_clear(u);
    for (int i = 0; i < u->nrxq; i++)
        zbuf_delete(u->rxq[i]);
    u->nrxq = 0;
}

void zh_learn_peer(zh_single_t *u)
{
    static const uint8_t bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    uint8_t f[64];
    size_t o = zh_eth(f, bcast, zh_mac_b, 0x0806);
    uint8_t a[28] = {0, 1, 8, 0, 6, 4, 0, 1};
    memcpy(a + 8, zh_mac_b, 6);
    a[14] = 192, a[15] = 0, a[16] = 2, a[17] = 2;
    a[24] = 192, a[25] = 0, a[26] = 2, a[27] = 1;
    memcpy(f + o, a, 28);
    zh_input(u, f, o + 28, 0);
    zh_single_clear(u);
}

size_t zh_tx_bytes(zh_single_t *u, int i, uint8_t *buf, size_t cap)
{
    cr_assert(i < u->ntx, "frame %d not sent (only %d)", i, u->ntx);
    size_t len = zbuf_length(u->tx[i]);
    if (len > cap)
        len = cap;
    cr_assert_eq(zbuf_copyout(u->tx[i], 0, buf, len), (ssize_t)len);
    return len;
}

int zh_input(zh_single_t *u, const uint8_t *frame, size_t len, size_t chunk)
{
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    if (chunk == 0)
        chunk = len ? len : 1;
    for (size_t off = 0; off < len; off += chunk) {
        size_t n = len - off < chunk ? len - off : chunk;
        cr_assert_eq(zbuf_append_copy(z, frame + off, n), 0);
    }
    return zbuf_ip_netif_input(u->nif, z);
}

static void loan_release(void *data, size_t size, void *arg)
{
    (void)size;
    free(data);
    ++*(int *)arg;
}

int zh_input_loaned(zh_single_t *u, const uint8_t *frame, size_t len, int *released)
{
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    if (len > 0) {
        uint8_t *b = malloc(len);
        cr_assert_not_null(b);
        memcpy(b, frame, len);
        cr_assert_eq(zbuf_append_buf(z, b, len, loan_release, released), 0);
    }
    return zbuf_ip_netif_input(u->nif, z);
}

static void free_release(void *data, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    free(data);
}

zbuf_t *zh_pattern_zbuf(uint64_t off, size_t n, uint32_t salt)
{
    uint8_t *b = malloc(n);
    cr_assert_not_null(b);
    for (size_t i = 0; i < n; i++)
        b[i] = zh_pattern(off + i, salt);
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_buf(z, b, n, free_release, NULL), 0);
    return z;
}

void zh_learn_b(zh_single_t *u)
{
    static const uint8_t bc[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    uint8_t f[42];
    size_t o = zh_eth(f, bc, zh_mac_b, 0x0806);
    const uint8_t a[28] = {0, 1, 8, 0, 6, 4, 0, 1, 0x02, 0, 0, 0, 0, 0x0b, 192, 0, 2, 2,
                           0, 0, 0, 0, 0, 0, 192, 0, 2, 1};
    memcpy(f + o, a, sizeof a);
    cr_assert_eq(zh_input(u, f, sizeof f, 0), 0);
    zh_single_clear(u);
}

/* ------------------------------------------------------------ builders */

static void w16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}
static void w32(uint8_t *p, uint32_t v)
{
    w16(p, (uint16_t)(v >> 16));
    w16(p + 2, (uint16_t)v);
}

uint16_t zh_csum(const uint8_t *p, size_t len)
{
    uint64_t s = 0; /* 64 bits: no length overflows it */
    for (size_t i = 0; i + 1 < len; i += 2)
        s += (uint64_t)(p[i] << 8 | p[i + 1]);
    if (len & 1)
        s += (uint64_t)p[len - 1] << 8;
    while (s >> 16)
        s = (s & 0xffff) + (s >> 16);
    return (uint16_t)~s;
}

uint16_t zh_l4_csum(uint32_t src, uint32_t dst, uint8_t proto, const uint8_t *seg, size_t len)
{
    uint8_t *buf = malloc(12 + len);
    w32(buf, src);
    w32(buf + 4, dst);
    buf[8] = 0;
    buf[9] = proto;
    w16(buf + 10, (uint16_t)len);
    memcpy(buf + 12, seg, len);
    uint16_t c = zh_csum(buf, 12 + len);
    free(buf);
    return c;
}

size_t zh_eth(uint8_t *p, const uint8_t dst[6], const uint8_t src[6], uint16_t type)
{
    memcpy(p, dst, 6);
    memcpy(p + 6, src, 6);
    w16(p + 12, type);
    return 14;
}

size_t zh_ip(uint8_t *p, uint32_t src, uint32_t dst, uint8_t proto, size_t plen)
{
    memset(p, 0, 20);
    p[0] = 0x45;
    w16(p + 2, (uint16_t)(20 + plen));
    w16(p + 4, 1234);
    w16(p + 6, 0x4000);
    p[8] = 64;
    p[9] = proto;
    w32(p + 12, src);
    w32(p + 16, dst);
    w16(p + 10, zh_csum(p, 20));
    return 20;
}

size_t zh_tcp_frame(uint8_t *buf, uint16_t sport, uint16_t dport, uint32_t seq, uint32_t ack,
                    uint8_t flags, uint16_t wnd, const uint8_t *opts, size_t optlen,
                    const uint8_t *data, size_t dlen)
{
    size_t hl = 20 + ((optlen + 3) & ~(size_t)3);
    size_t off = zh_eth(buf, zh_mac_a, zh_mac_b, 0x0800);
    off += zh_ip(buf + off, ZH_B, ZH_A, 6, hl + dlen);
    uint8_t *t = buf + off;
    memset(t, 0, hl);
    w16(t, sport);
    w16(t + 2, dport);
    w32(t + 4, seq);
    w32(t + 8, ack);
    t[12] = (uint8_t)((hl / 4) << 4);
    t[13] = flags;
    w16(t + 14, wnd);
    if (optlen)
        memcpy(t + 20, opts, optlen);
    if (dlen)
        memcpy(t + hl, data, dlen);
    w16(t + 16, zh_l4_csum(ZH_B, ZH_A, 6, t, hl + dlen));
    return off + hl + dlen;
}

bool zh_tx_tcp(zh_single_t *u, int i, zh_tcp_seg_t *o)
{
    uint8_t f[2048];
    size_t n = zh_tx_bytes(u, i, f, sizeof f);
    memset(o, 0, sizeof *o);
    o->wscale = -1;
    if (n < 54 || f[12] != 0x08 || f[13] != 0 || f[23] != 6)
        return false;
    size_t ihl = (size_t)(f[14] & 15) * 4;
    size_t tot = (size_t)(f[16] << 8 | f[17]);
    cr_assert_eq(zh_csum(f + 14, ihl), 0, "bad IP header checksum in sent frame");
    const uint8_t *t = f + 14 + ihl;
    size_t tl = tot - ihl;
    uint32_t src = (uint32_t)f[26] << 24 | (uint32_t)f[27] << 16 | (uint32_t)f[28] << 8 | f[29];
    uint32_t dst = (uint32_t)f[30] << 24 | (uint32_t)f[31] << 16 | (uint32_t)f[32] << 8 | f[33];
    /* Verify the checksum the stack wrote. */
    uint8_t *copy = malloc(tl);
    memcpy(copy, t, tl);
    uint16_t got = (uint16_t)(copy[16] << 8 | copy[17]);
    copy[16] = copy[17] = 0;
    cr_assert_eq(zh_l4_csum(src, dst, 6, copy, tl), got, "bad TCP checksum in sent frame");
    free(copy);
    o->sport = (uint16_t)(t[0] << 8 | t[1]);
    o->dport = (uint16_t)(t[2] << 8 | t[3]);
    o->seq = (uint32_t)t[4] << 24 | (uint32_t)t[5] << 16 | (uint32_t)t[6] << 8 | t[7];
    o->ack = (uint32_t)t[8] << 24 | (uint32_t)t[9] << 16 | (uint32_t)t[10] << 8 | t[11];
    o->hlen = (size_t)(t[12] >> 4) * 4;
    o->flags = t[13];
    o->wnd = (uint16_t)(t[14] << 8 | t[15]);
    o->dlen = tl - o->hlen;
    for (size_t k = 20; k < o->hlen;) {
        uint8_t kind = t[k];
        if (kind == 0)
            break;
        if (kind == 1) {
            k++;
            continue;
        }
        uint8_t l = t[k + 1];
        if (l < 2)
            break;
        if (kind == 2)
            o->mss = (uint16_t)(t[k + 2] << 8 | t[k + 3]);
        if (kind == 3)
            o->wscale = t[k + 2];
        if (kind == 4)
            o->sackok = true;
        if (kind == 8 && l == 10) {
            const uint8_t *q = t + k + 2;
            o->has_ts = true;
            o->tsval = (uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 | (uint32_t)q[2] << 8 | q[3];
            o->tsecr = (uint32_t)q[4] << 24 | (uint32_t)q[5] << 16 | (uint32_t)q[6] << 8 | q[7];
        }
        if (kind == 5)
            for (int b = 0; b < (l - 2) / 8 && b < 4; b++, o->nsack++)
                for (int w = 0; w < 2; w++) {
                    const uint8_t *q = t + k + 2 + 8 * b + 4 * w;
                    o->sack[b][w] = (uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 |
                                    (uint32_t)q[2] << 8 | q[3];
                }
        k += l;
    }
    return true;
}
