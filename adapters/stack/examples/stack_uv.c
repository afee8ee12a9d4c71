/* SPDX-License-Identifier: MIT */
/*
 * Running the zbuf stack in a libuv loop (<zbuf/ip_uv.h>).
 *
 * Two stacks joined by the in-memory link (no privileges needed; 1 ms
 * one-way delay): A connects to B's echo service on port 7, sends 4 MiB by
 * reference and checks that the same bytes come back.  Nothing here calls
 * zbuf_ip_poll(): zbuf_ip_uv_attach() lets the loop do it, whenever a
 * deadline comes (and, for a TAP interface, whenever its descriptor is
 * readable: open it with zbuf_ip_uv_tap_open() instead of the link).
 *
 * When the echo is back, both integrations are closed; uv_run() returns once
 * their handles are, and the stacks are deleted after that.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>
#include <zbuf/ip_uv.h>

#define TOTAL (4u << 20)
#define CHUNK 16384

static uint8_t *data;
static size_t sent_off, checked;
static int mismatches;
static zbuf_ip_uv_t *uv_a, *uv_b;

/* ------------------------------------------------ B: the echo server */

static zbuf_t *pending; /* received, waiting for room in the send buffer */
static bool peer_done;

/* Echo the very segments received (no copy).  The window reopens only as
 * they enter the send queue, so the client cannot outrun the echo. */
static void srv_flush(zbuf_ip_tcp_t *pcb)
{
    size_t len = zbuf_length(pending), room = zbuf_ip_tcp_sndbuf(pcb);
    if (len > 0 && room > 0) {
        zbuf_t *part = pending;
        if (len > room)
            zbuf_split_head(pending, room, &part);
        else
            zbuf_create(&pending);
        size_t n = zbuf_length(part);
        if (zbuf_ip_tcp_write(pcb, part) == 0)
            zbuf_ip_tcp_recved(pcb, n);
        else
            zbuf_insert(pending, 0, part, NULL);
    }
    if (peer_done && zbuf_length(pending) == 0) {
        zbuf_ip_tcp_close(pcb);
        peer_done = false;
    }
}

static void srv_recv(void *arg, zbuf_ip_tcp_t *pcb, zbuf_t *z)
{
    (void)arg;
    if (z == NULL)
        peer_done = true;
    else
        zbuf_append(pending, z);
    srv_flush(pcb);
}

static void srv_sent(void *arg, zbuf_ip_tcp_t *pcb, size_t n)
{
    (void)arg;
    (void)n;
    srv_flush(pcb);
}

static int srv_accept(void *arg, zbuf_ip_tcp_t *l, zbuf_ip_tcp_t *c)
{
    (void)arg;
    (void)l;
    zbuf_ip_tcp_callbacks_t cb = {.recv = srv_recv, .sent = srv_sent};
    zbuf_ip_tcp_set_callbacks(c, &cb, NULL);
    return 0;
}

/* ----------------------------------------------------- A: the client */

static void cli_fill(zbuf_ip_tcp_t *pcb)
{
    while (sent_off < TOTAL) {
        size_t n = TOTAL - sent_off < CHUNK ? TOTAL - sent_off : CHUNK;
        if (zbuf_ip_tcp_sndbuf(pcb) < n)
            return; /* the sent callback calls again */
        zbuf_t *z;
        zbuf_create(&z);
        zbuf_append_buf(z, data + sent_off, n, NULL, NULL); /* by reference */
        if (zbuf_ip_tcp_write(pcb, z) != 0) {
            zbuf_delete(z);
            return;
        }
        sent_off += n;
    }
    zbuf_ip_tcp_shutdown(pcb);
}

static void cli_connected(void *arg, zbuf_ip_tcp_t *pcb)
{
    (void)arg;
    cli_fill(pcb);
}

static void cli_sent(void *arg, zbuf_ip_tcp_t *pcb, size_t n)
{
    (void)arg;
    (void)n;
    cli_fill(pcb);
}

static void cli_recv(void *arg, zbuf_ip_tcp_t *pcb, zbuf_t *z)
{
    (void)arg;
    if (z == NULL) { /* the echo is complete: detach both stacks */
        zbuf_ip_tcp_close(pcb);
        zbuf_ip_uv_close(uv_a, NULL, NULL);
        zbuf_ip_uv_close(uv_b, NULL, NULL);
        return;
    }
    for (zbuf_seg_t *s = zbuf_seg_first(z); s; s = zbuf_seg_next(z, s)) {
        size_t n = zbuf_seg_length(z, s);
        if (checked + n > TOTAL || memcmp(zbuf_seg_data(z, s), data + checked, n) != 0)
            mismatches++;
        checked += n;
    }
    zbuf_ip_tcp_recved(pcb, zbuf_length(z));
    zbuf_delete(z);
}

int main(void)
{
    uv_loop_t *loop = uv_default_loop();
    data = malloc(TOTAL);
    if (data == NULL)
        return 1;
    for (size_t i = 0; i < TOTAL; i++)
        data[i] = (uint8_t)(i * 131 + (i >> 12));
    zbuf_create(&pending);

    /* Two stacks on one link, each attached to the loop. */
    zbuf_ip_stack_t *a, *b;
    zbuf_ip_link_t *link;
    zbuf_ip_link_config_t lc = {.delay_ms = 1};
    zbuf_ip_netif_config_t na = {.mac = {2, 0, 0, 0, 0, 1}, .addr = ZBUF_IP_ADDR(192, 0, 2, 1),
                                 .prefix_len = 24};
    zbuf_ip_netif_config_t nb = {.mac = {2, 0, 0, 0, 0, 2}, .addr = ZBUF_IP_ADDR(192, 0, 2, 2),
                                 .prefix_len = 24};
    if (zbuf_ip_stack_create(NULL, &a) || zbuf_ip_stack_create(NULL, &b) ||
        zbuf_ip_link_create(&lc, &link) || zbuf_ip_link_attach(link, 0, a, &na, NULL) ||
        zbuf_ip_link_attach(link, 1, b, &nb, NULL) || zbuf_ip_uv_attach(loop, a, &uv_a) ||
        zbuf_ip_uv_attach(loop, b, &uv_b))
        return 1;

    zbuf_ip_tcp_t *l, *c;
    zbuf_ip_tcp_new(b, &l);
    zbuf_ip_tcp_bind(l, ZBUF_IP_ANY, 7);
    zbuf_ip_tcp_listen(l, 1);
    zbuf_ip_tcp_callbacks_t lcb = {.accept = srv_accept};
    zbuf_ip_tcp_set_callbacks(l, &lcb, NULL);
    zbuf_ip_tcp_new(a, &c);
    zbuf_ip_tcp_callbacks_t ccb = {.connected = cli_connected, .sent = cli_sent, .recv = cli_recv};
    zbuf_ip_tcp_set_callbacks(c, &ccb, NULL);
    zbuf_ip_tcp_connect(c, ZBUF_IP_ADDR(192, 0, 2, 2), 7);

    uv_run(loop, UV_RUN_DEFAULT); /* returns once both integrations closed */

    zbuf_stats_t zs;
    zbuf_stats_get(&zs);
    printf("stack_uv: %zu bytes echoed through libuv-driven stacks, %d mismatches, "
           "%llu bytes copied by the library\n",
           checked, mismatches, (unsigned long long)zs.bytes_copied);
    zbuf_ip_tcp_close(l);
    zbuf_ip_stack_delete(a); /* connections in TIME_WAIT go with their stack */
    zbuf_ip_stack_delete(b);
    zbuf_ip_link_delete(link);
    zbuf_delete(pending);
    free(data);
    int rc = uv_loop_close(loop); /* 0: no handle left behind */
    return checked == TOTAL && mismatches == 0 && rc == 0 ? 0 : 1;
}
