/* SPDX-License-Identifier: MIT */
/*
 * stack-wire-hash: the stack's wire behaviour as one hash per scenario, to
 * show that a change meant to be internal (files moved, timers scheduled
 * differently) sends the very same frames at the very same (virtual) times.
 *
 * Two stacks on the in-memory link with a virtual clock; in each scenario
 * (impairments, MTU, window, seed) both sides send a bulk stream to each
 * other through the TCP callback API and close.  The link's monitor hashes
 * every frame (side, virtual time, bytes) with FNV-1a.  Built and run by
 * scripts/stack-wire-hash.sh against two revisions; the outputs must match.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zbuf/ip.h>
#include <zbuf/zbuf.h>

static uint64_t now_ms = 1000;

static uint64_t vclock(void *arg)
{
    (void)arg;
    return now_ms;
}

struct hash {
    uint64_t h;
    uint64_t frames;
};

static void fnv(struct hash *x, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        x->h ^= b[i];
        x->h *= 0x100000001b3ull;
    }
}

static void monitor(void *arg, int side, const zbuf_t *frame)
{
    struct hash *x = arg;
    x->frames++;
    fnv(x, &side, sizeof side);
    fnv(x, &now_ms, sizeof now_ms);
    for (zbuf_seg_t *s = zbuf_seg_first(frame); s; s = zbuf_seg_next(frame, s))
        fnv(x, zbuf_seg_data(frame, s), zbuf_seg_length(frame, s));
}

struct end {
    zbuf_ip_tcp_t *pcb;
    uint64_t total, written, received;
    const uint8_t *data;
    size_t size;
    bool closed;
};

static void fill(struct end *e)
{
    while (e->pcb && e->written < e->total) {
        size_t room = zbuf_ip_tcp_sndbuf(e->pcb);
        size_t off = (size_t)(e->written % e->size);
        size_t n = e->size - off;
        if (n > e->total - e->written)
            n = (size_t)(e->total - e->written);
        if (n > room)
            n = room;
        if (n == 0)
            return;
        zbuf_t *z;
        if (zbuf_create(&z) != 0 || zbuf_append_buf(z, (void *)(e->data + off), n, NULL, NULL))
            exit(2);
        if (zbuf_ip_tcp_write(e->pcb, z) != 0) {
            zbuf_delete(z);
            return;
        }
        e->written += n;
    }
    if (e->pcb && !e->closed && e->written == e->total) {
        e->closed = true;
        zbuf_ip_tcp_shutdown(e->pcb);
    }
}

static void on_sent(void *arg, zbuf_ip_tcp_t *pcb, size_t n)
{
    (void)pcb;
    (void)n;
    fill(arg);
}

static void on_recv(void *arg, zbuf_ip_tcp_t *pcb, zbuf_t *d)
{
    struct end *e = arg;
    if (d == NULL)
        return;
    size_t n = zbuf_length(d);
    e->received += n;
    zbuf_ip_tcp_recved(pcb, n);
    zbuf_delete(d);
}

static void on_connected(void *arg, zbuf_ip_tcp_t *pcb)
{
    struct end *e = arg;
    e->pcb = pcb;
    fill(e);
}

static int on_accept(void *arg, zbuf_ip_tcp_t *l, zbuf_ip_tcp_t *c)
{
    (void)l;
    struct end *e = arg;
    e->pcb = c;
    zbuf_ip_tcp_callbacks_t cb = {.recv = on_recv, .sent = on_sent};
    zbuf_ip_tcp_set_callbacks(c, &cb, e);
    fill(e);
    return 0;
}

struct scenario {
    const char *name;
    zbuf_ip_link_config_t lc;
    uint16_t mtu;
    uint32_t wnd;
    uint64_t bytes;
};

static void run(const struct scenario *sc, const uint8_t *data, size_t size)
{
    now_ms = 1000;
    zbuf_ip_config_t cfg;
    zbuf_ip_config_init(&cfg);
    cfg.clock = vclock;
    memset(cfg.isn_key, 7, sizeof cfg.isn_key);
    cfg.isn_key_set = true;
    if (sc->wnd) {
        cfg.tcp_snd_buf = sc->wnd;
        cfg.tcp_rcv_buf = sc->wnd;
    }
    zbuf_ip_stack_t *a, *b;
    zbuf_ip_link_t *l;
    if (zbuf_ip_stack_create(&cfg, &a) || zbuf_ip_stack_create(&cfg, &b) ||
        zbuf_ip_link_create(&sc->lc, &l))
        exit(2);
    struct hash x = {0xcbf29ce484222325ull, 0};
    zbuf_ip_link_set_monitor(l, monitor, &x);
    zbuf_ip_netif_config_t na = {.mac = {2, 0, 0, 0, 0, 1}, .addr = ZBUF_IP_ADDR(192, 0, 2, 1),
                                 .prefix_len = 24, .mtu = sc->mtu};
    zbuf_ip_netif_config_t nb = {.mac = {2, 0, 0, 0, 0, 2}, .addr = ZBUF_IP_ADDR(192, 0, 2, 2),
                                 .prefix_len = 24, .mtu = sc->mtu};
    if (zbuf_ip_link_attach(l, 0, a, &na, NULL) || zbuf_ip_link_attach(l, 1, b, &nb, NULL))
        exit(2);
    struct end ea = {.total = sc->bytes, .data = data, .size = size};
    struct end eb = {.total = sc->bytes / 2, .data = data, .size = size};
    zbuf_ip_tcp_t *lis, *c;
    zbuf_ip_tcp_new(b, &lis);
    zbuf_ip_tcp_bind(lis, ZBUF_IP_ANY, 5001);
    zbuf_ip_tcp_listen(lis, 1);
    zbuf_ip_tcp_callbacks_t lcb = {.accept = on_accept};
    zbuf_ip_tcp_set_callbacks(lis, &lcb, &eb);
    zbuf_ip_tcp_new(a, &c);
    zbuf_ip_tcp_callbacks_t ccb = {.connected = on_connected, .sent = on_sent, .recv = on_recv};
    zbuf_ip_tcp_set_callbacks(c, &ccb, &ea);
    zbuf_ip_tcp_connect(c, ZBUF_IP_ADDR(192, 0, 2, 2), 5001);
    uint64_t end = now_ms + 600000;
    while (now_ms < end) {
        int n = zbuf_ip_poll(a) + zbuf_ip_poll(b);
        if (n > 0)
            continue;
        uint64_t d = zbuf_ip_next_deadline(a), db = zbuf_ip_next_deadline(b);
        if (db < d)
            d = db;
        if (d == ZBUF_IP_NEVER)
            break;
        now_ms = d > now_ms ? d : now_ms + 1;
    }
    printf("%-24s %016llx frames %-8llu got %llu/%llu %llu/%llu end %llu\n", sc->name,
           (unsigned long long)x.h, (unsigned long long)x.frames,
           (unsigned long long)eb.received, (unsigned long long)ea.total,
           (unsigned long long)ea.received, (unsigned long long)eb.total,
           (unsigned long long)now_ms);
    zbuf_ip_stack_delete(a);
    zbuf_ip_stack_delete(b);
    zbuf_ip_link_delete(l);
}

int main(void)
{
    size_t size = 1u << 20;
    uint8_t *data = malloc(size);
    if (data == NULL)
        return 2;
    for (size_t i = 0; i < size; i++)
        data[i] = (uint8_t)(i * 7 + (i >> 11));
    const struct scenario sc[] = {
        {"clean", {.seed = 1}, 0, 0, 4u << 20},
        {"delay5", {.delay_ms = 5, .seed = 2}, 0, 0, 4u << 20},
        {"loss1", {.loss = 0.01, .delay_ms = 2, .seed = 3}, 0, 0, 2u << 20},
        {"loss5", {.loss = 0.05, .delay_ms = 1, .seed = 4}, 0, 0, 1u << 20},
        {"reorder", {.reorder = 0.05, .reorder_ms = 3, .delay_ms = 2, .seed = 5}, 0, 0, 2u << 20},
        {"dup", {.dup = 0.03, .delay_ms = 1, .seed = 6}, 0, 0, 2u << 20},
        {"mix", {.loss = 0.02, .dup = 0.01, .reorder = 0.02, .reorder_ms = 4, .delay_ms = 3,
                 .seed = 7}, 0, 0, 2u << 20},
        {"mtu576-loss", {.loss = 0.02, .delay_ms = 2, .seed = 8}, 576, 0, 1u << 20},
        {"mtu9000", {.delay_ms = 1, .seed = 9}, 9000, 0, 4u << 20},
        {"win16k-loss", {.loss = 0.03, .delay_ms = 2, .seed = 10}, 0, 16384, 1u << 20},
        {"pool-loss", {.copy_to_pool = true, .loss = 0.01, .delay_ms = 1, .seed = 11}, 0, 0,
         2u << 20},
        {"offload", {.csum_offload = true, .delay_ms = 1, .seed = 12}, 0, 0, 2u << 20},
        {"queue64", {.queue_max = 64, .delay_ms = 2, .seed = 13}, 0, 0, 2u << 20},
    };
    for (size_t i = 0; i < sizeof sc / sizeof sc[0]; i++)
        run(&sc[i], data, size);
    free(data);
    return 0;
}
