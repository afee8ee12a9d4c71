/* SPDX-License-Identifier: MIT */
#include "attack.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static const uint8_t bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

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

static uint32_t r32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

zbuf_ip_stats_t hx_stats(zbuf_ip_stack_t *s)
{
    zbuf_ip_stats_t st;
    zbuf_ip_stats(s, &st);
    return st;
}

/* ------------------------------------------------------- A's services */

/* The demo's zero-copy echo (struct hx_echo): what arrives goes into the
 * send queue as far as it takes it, and the window reopens as it does. */

static void echo_free(struct hx_echo *e)
{
    for (struct hx_echo **pp = &e->v->conns; *pp; pp = &(*pp)->next)
        if (*pp == e) {
            *pp = e->next;
            break;
        }
    zbuf_delete(e->pending);
    free(e);
}

static void echo_flush(struct hx_echo *e)
{
    while (e->pending && zbuf_length(e->pending) > 0) {
        size_t room = zbuf_ip_tcp_sndbuf(e->pcb), len = zbuf_length(e->pending);
        if (room == 0)
            return;
        zbuf_t *part = e->pending;
        if (len > room) {
            cr_assert_eq(zbuf_split_head(e->pending, room, &part), 0);
            len = room;
        } else {
            e->pending = NULL;
        }
        cr_assert_eq(zbuf_ip_tcp_write(e->pcb, part), 0);
        zbuf_ip_tcp_recved(e->pcb, len);
        e->v->echoed += (long)len;
    }
    if (e->eof) {
        zbuf_ip_tcp_close(e->pcb);
        echo_free(e);
    }
}

static void echo_recv(void *arg, zbuf_ip_tcp_t *pcb, zbuf_t *d)
{
    (void)pcb;
    struct hx_echo *e = arg;
    if (d == NULL) {
        e->eof = true;
    } else if (e->pending) {
        zbuf_append(e->pending, d);
    } else {
        e->pending = d;
    }
    echo_flush(e);
}

static void echo_sent(void *arg, zbuf_ip_tcp_t *pcb, size_t n)
{
    (void)pcb;
    (void)n;
    echo_flush(arg);
}

static void echo_error(void *arg, int err)
{
    (void)err;
    echo_free(arg);
}

static int echo_accept(void *arg, zbuf_ip_tcp_t *l, zbuf_ip_tcp_t *c)
{
    (void)l;
    hx_svc_t *v = arg;
    struct hx_echo *e = calloc(1, sizeof *e);
    cr_assert_not_null(e);
    e->v = v;
    e->pcb = c;
    e->next = v->conns;
    v->conns = e;
    zbuf_ip_tcp_callbacks_t cb = {.recv = echo_recv, .sent = echo_sent, .error = echo_error};
    zbuf_ip_tcp_set_callbacks(c, &cb, e);
    return 0;
}

static void udp_echo(void *arg, zbuf_ip_udp_t *u, zbuf_t *data, uint32_t src, uint16_t sport)
{
    (void)arg;
    if (zbuf_ip_udp_sendto(u, data, src, sport) != 0)
        zbuf_delete(data);
}

static void on_pong(void *arg, uint32_t from, uint16_t id, uint16_t seq, zbuf_t *data)
{
    hx_t *h = arg;
    zbuf_delete(data);
    if (from == ZH_A && id == 0x4858 && seq == h->pong_seq) {
        h->pongs++;
        h->pong_at = h->p.now;
    }
}

static void monitor(void *arg, int side, const zbuf_t *frame)
{
    hx_t *h = arg;
    if (side != 0)
        return; /* only what A sends */
    if (h->ncap == h->capmax) {
        h->capmax = h->capmax ? 2 * h->capmax : 1024;
        h->cap = realloc(h->cap, h->capmax * sizeof *h->cap);
        cr_assert_not_null(h->cap);
    }
    hx_frame_t *f = &h->cap[h->ncap++];
    size_t len = zbuf_length(frame);
    f->len = (uint16_t)len;
    zbuf_copyout(frame, 0, f->b, len < HX_HDR ? len : HX_HDR);
}

void hx_init(hx_t *h, uint32_t pool_bufs, const zbuf_ip_config_t *cfg)
{
    memset(h, 0, sizeof *h);
    zbuf_ip_link_config_t lc = {.delay_ms = 1, .copy_to_pool = pool_bufs > 0,
                                .pool_bufs = pool_bufs, .queue_max = 1u << 20};
    zbuf_ip_config_t c;
    if (cfg)
        c = *cfg;
    else
        zbuf_ip_config_init(&c);
    c.ping_reply = on_pong;
    c.ping_arg = h;
    zh_pair_init(&h->p, &lc, &c);
    zbuf_ip_link_set_monitor(h->p.link, monitor, h);
    hx_svc_start(&h->svc, h->p.a);
    /* Neighbours know each other, and A has used its entry for B. */
    cr_assert(hx_ping(h, 1000), "no ping before the attack");
    zbuf_ip_ping(h->p.a, ZH_B, 1, 1, NULL);
    hx_run(h, 10);
}

void hx_svc_start(hx_svc_t *v, zbuf_ip_stack_t *s)
{
    memset(v, 0, sizeof *v);
    cr_assert_eq(zbuf_ip_tcp_new(s, &v->echo_l), 0);
    cr_assert_eq(zbuf_ip_tcp_bind(v->echo_l, ZBUF_IP_ANY, HX_ECHO), 0);
    cr_assert_eq(zbuf_ip_tcp_listen(v->echo_l, ZBUF_IP_TCP_BACKLOG_MAX), 0);
    zbuf_ip_tcp_callbacks_t lcb = {.accept = echo_accept};
    zbuf_ip_tcp_set_callbacks(v->echo_l, &lcb, v);
    cr_assert_eq(zbuf_ip_udp_new(s, &v->echo_u), 0);
    cr_assert_eq(zbuf_ip_udp_bind(v->echo_u, ZBUF_IP_ANY, HX_ECHO), 0);
    zbuf_ip_udp_set_recv(v->echo_u, udp_echo, v);
}

void hx_svc_stop(hx_svc_t *v)
{
    zbuf_ip_tcp_close(v->echo_l);
    zbuf_ip_udp_delete(v->echo_u);
    while (v->conns) {
        zbuf_ip_tcp_abort(v->conns->pcb);
        echo_free(v->conns);
    }
}

void hx_fini(hx_t *h)
{
    hx_svc_stop(&h->svc);
    zh_pair_fini(&h->p);
    free(h->cap);
}

void hx_run(hx_t *h, uint64_t ms)
{
    hx_until(h, NULL, NULL, ms);
}

bool hx_until(hx_t *h, bool (*cond)(void *), void *arg, uint64_t ms)
{
    zh_pair_t *p = &h->p;
    uint64_t end = p->now + ms;
    for (;;) {
        if (cond && cond(arg))
            return true;
        int n = zbuf_ip_poll(p->a);
        n += zbuf_ip_poll(p->b);
        if (n > 0)
            continue;
        uint64_t da = zbuf_ip_next_deadline(p->a), db = zbuf_ip_next_deadline(p->b);
        uint64_t d = da < db ? da : db;
        if (d <= p->now)
            d = p->now + 1;
        if (d > end)
            d = end;
        if (p->now >= end)
            return cond ? cond(arg) : true;
        p->now = d;
    }
}

void hx_cap_clear(hx_t *h)
{
    h->ncap = 0;
}

bool hx_ping(hx_t *h, uint64_t ms)
{
    int before = h->pongs;
    h->pong_seq++;
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    static const uint8_t payload[56] = "ping from the peer, 56 bytes of payload";
    cr_assert_eq(zbuf_append_copy(z, payload, sizeof payload), 0);
    cr_assert_eq(zbuf_ip_ping(h->p.b, ZH_A, 0x4858, h->pong_seq, z), 0);
    uint64_t end = h->p.now + ms;
    while (h->pongs == before && h->p.now < end) {
        int n = zbuf_ip_poll(h->p.a) + zbuf_ip_poll(h->p.b);
        if (n == 0)
            h->p.now++;
    }
    return h->pongs > before;
}

/* B's client of the recovery check: sends `total` pattern bytes, checks
 * what comes back. */
struct client {
    zbuf_ip_tcp_t *pcb;
    uint8_t *data;
    size_t total, sent, got;
    bool connected, bad, closed;
    int err;
};

static void cl_fill(struct client *c)
{
    while (c->pcb && c->sent < c->total) {
        size_t n = c->total - c->sent < 8192 ? c->total - c->sent : 8192;
        if (zbuf_ip_tcp_sndbuf(c->pcb) < n)
            return;
        zbuf_t *z;
        cr_assert_eq(zbuf_create(&z), 0);
        cr_assert_eq(zbuf_append_buf(z, c->data + c->sent, n, NULL, NULL), 0);
        cr_assert_eq(zbuf_ip_tcp_write(c->pcb, z), 0);
        c->sent += n;
    }
}

static void cl_connected(void *arg, zbuf_ip_tcp_t *pcb)
{
    (void)pcb;
    struct client *c = arg;
    c->connected = true;
    cl_fill(c);
}

static void cl_recv(void *arg, zbuf_ip_tcp_t *pcb, zbuf_t *d)
{
    struct client *c = arg;
    if (d == NULL)
        return;
    size_t n = zbuf_length(d);
    uint8_t buf[2048];
    for (size_t off = 0; off < n;) {
        size_t k = n - off < sizeof buf ? n - off : sizeof buf;
        zbuf_copyout(d, off, buf, k);
        if (c->got + off + k > c->total || memcmp(buf, c->data + c->got + off, k) != 0)
            c->bad = true;
        off += k;
    }
    c->got += n;
    zbuf_delete(d);
    zbuf_ip_tcp_recved(pcb, n);
}

static void cl_sent(void *arg, zbuf_ip_tcp_t *pcb, size_t n)
{
    (void)pcb;
    (void)n;
    cl_fill(arg);
}

static void cl_error(void *arg, int err)
{
    struct client *c = arg;
    c->err = err;
    c->pcb = NULL;
}

static bool cl_done(void *arg)
{
    struct client *c = arg;
    return c->got >= c->total || c->pcb == NULL;
}

uint64_t hx_check_recovered(hx_t *h, size_t bytes)
{
    uint64_t t0 = h->p.now;
    cr_assert(hx_ping(h, 1000), "no answer to a ping within a second after the attack");
    uint64_t took = h->pong_at - t0;
    struct client c = {.total = bytes};
    c.data = malloc(bytes);
    cr_assert_not_null(c.data);
    for (size_t i = 0; i < bytes; i++)
        c.data[i] = zh_pattern(i, 77);
    cr_assert_eq(zbuf_ip_tcp_new(h->p.b, &c.pcb), 0);
    zbuf_ip_tcp_callbacks_t cb = {.connected = cl_connected, .recv = cl_recv, .sent = cl_sent,
                                  .error = cl_error};
    zbuf_ip_tcp_set_callbacks(c.pcb, &cb, &c);
    cr_assert_eq(zbuf_ip_tcp_connect(c.pcb, ZH_A, HX_ECHO), 0);
    uint64_t t1 = h->p.now;
    hx_until(h, cl_done, &c, 20000);
    cr_assert(c.connected, "a new connection after the attack did not connect (error %d)", c.err);
    cr_assert_eq(c.got, bytes, "a new connection moved %zu of %zu bytes in %llu ms (error %d)",
                 c.got, bytes, (unsigned long long)(h->p.now - t1), c.err);
    cr_assert_not(c.bad, "the echoed bytes differ");
    if (c.pcb)
        zbuf_ip_tcp_close(c.pcb);
    hx_run(h, 100);
    free(c.data);
    return took;
}

/* ------------------------------------------------------------ forging */

void hx_mac(uint32_t ip, uint8_t mac[6])
{
    mac[0] = 0x02;
    mac[1] = 0x66;
    w32(mac + 2, ip);
}

static void free_frame(void *data, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    free(data);
}

void hx_inject(hx_t *h, const uint8_t *frame, size_t len)
{
    /* The attacker's own buffer: nothing the library copies. */
    uint8_t *b = malloc(len);
    cr_assert_not_null(b);
    memcpy(b, frame, len);
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_buf(z, b, len, free_frame, NULL), 0);
    zbuf_ip_link_inject(h->p.link, 1, z);
}

void hx_arp_announce(hx_t *h, uint32_t ip)
{
    uint8_t f[60] = {0}, mac[6];
    hx_mac(ip, mac);
    zh_eth(f, bcast, mac, 0x0806);
    uint8_t *a = f + 14;
    w16(a, 1);
    w16(a + 2, 0x0800);
    a[4] = 6;
    a[5] = 4;
    w16(a + 6, 1);
    memcpy(a + 8, mac, 6);
    w32(a + 14, ip);
    w32(a + 24, ZH_A);
    hx_inject(h, f, sizeof f);
}

void hx_ip(hx_t *h, const uint8_t *smac, uint32_t src, uint32_t dst, bool l2_bcast, uint8_t proto,
           const uint8_t *l4, size_t len)
{
    uint8_t *f = calloc(1, 14 + 20 + len + 60);
    cr_assert_not_null(f);
    uint8_t mac[6];
    if (smac == NULL) {
        hx_mac(src, mac);
        smac = mac;
    }
    size_t o = zh_eth(f, l2_bcast ? bcast : zh_mac_a, smac, 0x0800);
    o += zh_ip(f + o, src, dst, proto, len);
    memcpy(f + o, l4, len);
    if (proto == 6 || proto == 17) {
        uint8_t *ck = f + o + (proto == 6 ? 16 : 6);
        ck[0] = ck[1] = 0;
        uint16_t c = zh_l4_csum(src, dst, proto, f + o, len);
        w16(ck, proto == 17 && c == 0 ? 0xffff : c);
    }
    size_t n = o + len < 60 ? 60 : o + len;
    hx_inject(h, f, n);
    free(f);
}

void hx_tcp(hx_t *h, uint32_t src, uint16_t sport, uint16_t dport, uint32_t seq, uint32_t ack,
            uint8_t flags, uint16_t wnd, const uint8_t *opts, size_t optlen, const uint8_t *data,
            size_t dlen)
{
    size_t hl = 20 + ((optlen + 3) & ~(size_t)3);
    uint8_t *t = calloc(1, hl + dlen);
    cr_assert_not_null(t);
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
    hx_ip(h, NULL, src, ZH_A, false, 6, t, hl + dlen);
    free(t);
}

void hx_udp(hx_t *h, uint32_t src, uint16_t sport, uint32_t dst, uint16_t dport,
            const uint8_t *data, size_t dlen)
{
    uint8_t *u = calloc(1, 8 + dlen);
    cr_assert_not_null(u);
    w16(u, sport);
    w16(u + 2, dport);
    w16(u + 4, (uint16_t)(8 + dlen));
    memcpy(u + 8, data, dlen);
    bool bc = dst == 0xffffffffu || (dst & 0xff) == 0xff;
    hx_ip(h, NULL, src, dst, bc, 17, u, 8 + dlen);
    free(u);
}

void hx_icmp(hx_t *h, uint32_t src, uint8_t type, uint8_t code, uint32_t rest,
             const uint8_t *data, size_t dlen)
{
    uint8_t *m = calloc(1, 8 + dlen);
    cr_assert_not_null(m);
    m[0] = type;
    m[1] = code;
    w32(m + 4, rest);
    memcpy(m + 8, data, dlen);
    w16(m + 2, zh_csum(m, 8 + dlen));
    hx_ip(h, NULL, src, ZH_A, false, 1, m, 8 + dlen);
    free(m);
}

bool hx_next_tcp(hx_t *h, size_t *i, hx_seg_t *out)
{
    for (; *i < h->ncap; (*i)++) {
        const uint8_t *f = h->cap[*i].b;
        if (h->cap[*i].len < 54 || f[12] != 0x08 || f[13] != 0 || f[23] != 6)
            continue;
        size_t ihl = (size_t)(f[14] & 15) * 4;
        const uint8_t *t = f + 14 + ihl;
        memset(out, 0, sizeof *out);
        out->t.wscale = -1;
        memcpy(out->eth_dst, f, 6);
        out->src = r32(f + 26);
        out->dst = r32(f + 30);
        out->t.sport = (uint16_t)(t[0] << 8 | t[1]);
        out->t.dport = (uint16_t)(t[2] << 8 | t[3]);
        out->t.seq = r32(t + 4);
        out->t.ack = r32(t + 8);
        out->t.hlen = (size_t)(t[12] >> 4) * 4;
        out->t.flags = t[13];
        out->t.wnd = (uint16_t)(t[14] << 8 | t[15]);
        out->t.dlen = (size_t)(f[16] << 8 | f[17]) - ihl - out->t.hlen;
        for (size_t k = 20; k < out->t.hlen && 14 + ihl + k + 1 < HX_HDR;) {
            uint8_t kind = t[k], l = kind > 1 ? t[k + 1] : 1;
            if (kind == 0 || l < 1)
                break;
            if (kind == 3)
                out->t.wscale = t[k + 2];
            if (kind == 2)
                out->t.mss = (uint16_t)(t[k + 2] << 8 | t[k + 3]);
            if (kind == 4)
                out->t.sackok = true;
            if (kind == 8 && l == 10) {
                out->t.has_ts = true;
                out->t.tsval = r32(t + k + 2);
                out->t.tsecr = r32(t + k + 6);
            }
            k += l;
        }
        (*i)++;
        return true;
    }
    return false;
}

int hx_count_to(hx_t *h, size_t from, uint32_t dst)
{
    int n = 0;
    for (size_t i = from; i < h->ncap; i++) {
        const uint8_t *f = h->cap[i].b;
        if (h->cap[i].len >= 34 && f[12] == 0x08 && f[13] == 0 && (dst == 0 || r32(f + 30) == dst))
            n++;
    }
    return n;
}

void hx_conn_open(hx_t *h, hx_conn_t *c, uint16_t dport, uint16_t wnd, const uint8_t *syn_opts,
                  size_t optlen)
{
    hx_arp_announce(h, c->ip);
    hx_run(h, 5);
    uint8_t opts[40] = {2, 4, 0x05, 0xb4}; /* MSS 1460 */
    cr_assert_leq(optlen, 36);
    if (optlen)
        memcpy(opts + 4, syn_opts, optlen);
    c->snd_nxt = 0x1000000u + c->port;
    size_t from = h->ncap;
    hx_tcp(h, c->ip, c->port, dport, c->snd_nxt, 0, 0x02, wnd, opts, 4 + optlen, NULL, 0);
    c->snd_nxt++;
    hx_run(h, 5);
    hx_seg_t s;
    bool found = false;
    while (!found && hx_next_tcp(h, &from, &s))
        found = s.dst == c->ip && s.t.dport == c->port && s.t.flags == 0x12;
    cr_assert(found, "no SYN-ACK to the attacker's SYN from port %u", c->port);
    c->rcv_nxt = s.t.seq + 1;
    c->a_wnd = s.t.wnd;
    hx_tcp(h, c->ip, c->port, dport, c->snd_nxt, c->rcv_nxt, 0x10, wnd, NULL, 0, NULL, 0);
    hx_run(h, 5);
}

void hx_conn_send(hx_t *h, hx_conn_t *c, uint16_t dport, uint32_t off, uint8_t flags,
                  uint16_t wnd, const uint8_t *data, size_t dlen)
{
    hx_tcp(h, c->ip, c->port, dport, c->snd_nxt + off, c->rcv_nxt, flags, wnd, NULL, 0, data,
           dlen);
}
