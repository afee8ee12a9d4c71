/* SPDX-License-Identifier: MIT */
#include "uvpair.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t up_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint8_t *up_pattern(size_t n, uint32_t salt)
{
    uint8_t *d = malloc(n);
    cr_assert_not_null(d);
    for (size_t i = 0; i < n; i++)
        d[i] = zh_pattern(i, salt);
    return d;
}

static void on_watchdog(uv_timer_t *t)
{
    up_pair_t *p = t->data;
    p->timed_out = true;
    up_pair_detach(p);
}

static void on_detached(void *arg)
{
    ((up_pair_t *)arg)->closed++;
}

void up_pair_init(up_pair_t *p, const zbuf_ip_config_t *cfg, const zbuf_ip_link_config_t *lc,
                  uint64_t limit_ms)
{
    memset(p, 0, sizeof *p);
    cr_assert_eq(uv_loop_init(&p->loop), 0);
    cr_assert_eq(uv_timer_init(&p->loop, &p->watchdog), 0);
    p->watchdog.data = p;
    cr_assert_eq(uv_timer_start(&p->watchdog, on_watchdog, limit_ms, 0), 0);
    uv_unref((uv_handle_t *)&p->watchdog); /* only the integrations keep the loop alive */

    zbuf_ip_config_t c;
    if (cfg)
        c = *cfg;
    else
        zbuf_ip_config_init(&c);
    c.clock = NULL; /* the loop needs the real clock */
    c.isn_key_set = true;
    memset(c.isn_key, 0xa5, sizeof c.isn_key);
    cr_assert_eq(zbuf_ip_stack_create(&c, &p->a), 0);
    memset(c.isn_key, 0x5a, sizeof c.isn_key);
    cr_assert_eq(zbuf_ip_stack_create(&c, &p->b), 0);
    cr_assert_eq(zbuf_ip_link_create(lc, &p->link), 0);
    zbuf_ip_netif_config_t na = {.addr = ZH_A, .prefix_len = 24};
    zbuf_ip_netif_config_t nb = {.addr = ZH_B, .prefix_len = 24};
    memcpy(na.mac, zh_mac_a, 6);
    memcpy(nb.mac, zh_mac_b, 6);
    cr_assert_eq(zbuf_ip_link_attach(p->link, 0, p->a, &na, &p->na), 0);
    cr_assert_eq(zbuf_ip_link_attach(p->link, 1, p->b, &nb, &p->nb), 0);
    cr_assert_eq(zbuf_ip_uv_attach(&p->loop, p->a, &p->ua), 0);
    cr_assert_eq(zbuf_ip_uv_attach(&p->loop, p->b, &p->ub), 0);
}

void up_pair_detach(up_pair_t *p)
{
    if (p->ua && zbuf_ip_uv_close(p->ua, on_detached, p) == 0)
        p->ua = NULL;
    if (p->ub && zbuf_ip_uv_close(p->ub, on_detached, p) == 0)
        p->ub = NULL;
}

void up_pair_fini(up_pair_t *p)
{
    up_pair_detach(p);
    uv_close((uv_handle_t *)&p->watchdog, NULL);
    uv_run(&p->loop, UV_RUN_DEFAULT);
    cr_assert_eq(p->closed, 2, "close callbacks: %d", p->closed);
    zbuf_ip_stack_delete(p->a);
    zbuf_ip_stack_delete(p->b);
    zbuf_ip_link_delete(p->link);
    p->a = p->b = NULL;
    p->link = NULL;
    cr_assert_eq(uv_loop_close(&p->loop), 0, "handles left on the loop");
}

/* ------------------------------------------------------------------ bulk */

struct chunk_tag {
    up_bulk_t *k;
    int idx;
};
static struct chunk_tag tags[UP_MAX_CHUNKS];

static void bulk_check_done(up_bulk_t *k)
{
    if (k->detach_when_done && k->eof && k->received == k->total && k->releases == k->chunks &&
        k->sent == k->total)
        up_pair_detach(k->p);
}

static void on_chunk_released(void *data, size_t size, void *arg)
{
    (void)data;
    (void)size;
    struct chunk_tag *t = arg;
    t->k->released[t->idx]++;
    t->k->releases++;
    bulk_check_done(t->k);
}

static void bulk_fill(up_bulk_t *k)
{
    while (k->client && k->sent < k->total) {
        size_t n = k->total - k->sent < UP_CHUNK ? k->total - k->sent : UP_CHUNK;
        if (zbuf_ip_tcp_sndbuf(k->client) < n)
            return;
        zbuf_t *z;
        cr_assert_eq(zbuf_create(&z), 0);
        struct chunk_tag *t = &tags[k->chunks];
        t->k = k;
        t->idx = k->chunks;
        cr_assert_eq(zbuf_append_buf(z, k->data + k->sent, n, on_chunk_released, t), 0);
        cr_assert_eq(zbuf_ip_tcp_write(k->client, z), 0);
        k->chunks++;
        k->sent += n;
    }
    if (k->client && k->sent == k->total) {
        zbuf_ip_tcp_close(k->client); /* FIN after the data; no callback after this */
        k->client = NULL;
    }
}

static void cli_connected(void *arg, zbuf_ip_tcp_t *pcb)
{
    (void)pcb;
    bulk_fill(arg);
}

static void cli_sent(void *arg, zbuf_ip_tcp_t *pcb, size_t n)
{
    (void)pcb;
    (void)n;
    bulk_fill(arg);
}

static void any_error(void *arg, int err)
{
    (void)err;
    ((up_bulk_t *)arg)->errors++;
}

static void srv_recv(void *arg, zbuf_ip_tcp_t *pcb, zbuf_t *z)
{
    up_bulk_t *k = arg;
    if (z == NULL) {
        k->eof = true;
        zbuf_ip_tcp_close(pcb);
        k->server = NULL;
        bulk_check_done(k);
        return;
    }
    size_t len = zbuf_length(z);
    for (zbuf_seg_t *s = zbuf_seg_first(z); s; s = zbuf_seg_next(z, s)) {
        size_t n = zbuf_seg_length(z, s);
        if (k->received + n > k->total ||
            memcmp(zbuf_seg_data(z, s), k->data + k->received, n) != 0)
            k->mismatches++;
        k->received += n;
    }
    zbuf_delete(z);
    zbuf_ip_tcp_recved(pcb, len);
}

static int srv_accept(void *arg, zbuf_ip_tcp_t *l, zbuf_ip_tcp_t *c)
{
    (void)l;
    up_bulk_t *k = arg;
    zbuf_ip_tcp_callbacks_t cb = {.recv = srv_recv, .error = any_error};
    zbuf_ip_tcp_set_callbacks(c, &cb, k);
    k->server = c;
    return 0;
}

void up_bulk_start(up_bulk_t *k, up_pair_t *p, size_t total)
{
    memset(k, 0, sizeof *k);
    cr_assert_leq((total + UP_CHUNK - 1) / UP_CHUNK, UP_MAX_CHUNKS);
    k->p = p;
    k->total = total;
    k->data = up_pattern(total, 7);
    cr_assert_eq(zbuf_ip_tcp_new(p->b, &k->listener), 0);
    cr_assert_eq(zbuf_ip_tcp_bind(k->listener, ZBUF_IP_ANY, 7), 0);
    cr_assert_eq(zbuf_ip_tcp_listen(k->listener, 4), 0);
    zbuf_ip_tcp_callbacks_t lcb = {.accept = srv_accept};
    zbuf_ip_tcp_set_callbacks(k->listener, &lcb, k);
    cr_assert_eq(zbuf_ip_tcp_new(p->a, &k->client), 0);
    zbuf_ip_tcp_callbacks_t ccb = {.connected = cli_connected, .sent = cli_sent,
                                   .error = any_error};
    zbuf_ip_tcp_set_callbacks(k->client, &ccb, k);
    cr_assert_eq(zbuf_ip_tcp_connect(k->client, ZH_B, 7), 0);
}

void up_bulk_free(up_bulk_t *k)
{
    free(k->data);
    k->data = NULL;
}
