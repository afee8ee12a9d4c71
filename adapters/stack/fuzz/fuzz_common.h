/* SPDX-License-Identifier: MIT */
/*
 * Shared set-up of the stack's libFuzzer harnesses: one stack on a
 * capturing driver (sent frames are checked and dropped), checksums not
 * verified (so the fuzzer reaches the parsers behind them), a virtual clock,
 * a fixed ISN key, TCP listeners and UDP sockets on ports 7 and 9 that echo
 * and discard.  fz_tx_hook, when set, sees every frame sent before it is
 * dropped (a harness that plays the peer reads the stack's sequence numbers
 * from it).
 *
 * Received frames go into a pool of FZ_POOL_BUFS buffers, the driver's
 * rx_pool, as a NIC's would (larger ones into heap buffers): so small a
 * pool that the stack's pressure policy (compact copies, the reserve's
 * drops and prunes) runs all the time, and a full one drops the frame as
 * the driver contract says.  After every input each pool buffer must be
 * back (fz_stack_delete() aborts otherwise): no sequence of packets may
 * keep one.
 */
#ifndef ZBUF_STACK_FUZZ_COMMON_H
#define ZBUF_STACK_FUZZ_COMMON_H

#include <stdlib.h>
#include <string.h>
#include <zbuf/ip.h>

static uint64_t fz_now;
#define FZ_POOL_BUFS 16
#define FZ_POOL_BUF 2048
static zbuf_pool_t *fz_pool; /* made once, reused by every input */

static zbuf_pool_t *fz_rx_pool(void)
{
    if (fz_pool == NULL && zbuf_pool_create(FZ_POOL_BUF, FZ_POOL_BUFS, &fz_pool) != 0)
        abort();
    return fz_pool;
}

/* Delete the stack; every buffer it held must be back in the pool. */
static inline void fz_stack_delete(zbuf_ip_stack_t *s)
{
    zbuf_ip_stack_delete(s);
    if (zbuf_pool_available(fz_rx_pool()) != FZ_POOL_BUFS)
        abort();
}
static const uint8_t fz_mac[6] = {0x02, 0, 0, 0, 0, 0x0a};
#define FZ_ADDR ZBUF_IP_ADDR(192, 0, 2, 1)

static uint64_t fz_clock(void *arg)
{
    (void)arg;
    return fz_now;
}

static void (*fz_tx_hook)(const zbuf_t *frame);

/* The interface's driver flags (a harness built with -DFZ_DRV_FLAGS=...
 * runs with segmentation offload, say). */
#ifndef FZ_DRV_FLAGS
#define FZ_DRV_FLAGS 0u
#endif

static int fz_tx(void *ctx, zbuf_t *frame)
{
    (void)ctx;
    if (zbuf_check(frame) != 0)
        abort();
    if (fz_tx_hook)
        fz_tx_hook(frame);
    zbuf_delete(frame);
    return 0;
}

static void fz_recv(void *arg, zbuf_ip_tcp_t *pcb, zbuf_t *d)
{
    (void)arg;
    if (d == NULL) {
        zbuf_ip_tcp_close(pcb);
        return;
    }
    size_t n = zbuf_length(d);
    if (zbuf_ip_tcp_write(pcb, d) != 0)
        zbuf_delete(d);
    zbuf_ip_tcp_recved(pcb, n);
}

static int fz_accept(void *arg, zbuf_ip_tcp_t *l, zbuf_ip_tcp_t *c)
{
    (void)arg;
    (void)l;
    zbuf_ip_tcp_callbacks_t cb = {.recv = fz_recv};
    zbuf_ip_tcp_set_callbacks(c, &cb, NULL);
    return 0;
}

static void fz_udp(void *arg, zbuf_ip_udp_t *u, zbuf_t *d, uint32_t src, uint16_t sport)
{
    (void)arg;
    if (zbuf_ip_udp_sendto(u, d, src, sport) != 0)
        zbuf_delete(d);
}

/* The harnesses' configuration: virtual clock, fixed ISN key, checksums
 * not verified, 8 KiB buffers. */
static void fz_config(zbuf_ip_config_t *c)
{
    zbuf_ip_config_init(c);
    c->clock = fz_clock;
    c->isn_key_set = true;
    c->skip_rx_checksum = true;
    c->tcp_rcv_buf = 8192;
    c->tcp_snd_buf = 8192;
}

/* A stack made with `c` (clock at 1000) and its capturing interface. */
static zbuf_ip_stack_t *fz_stack_with(const zbuf_ip_config_t *c, zbuf_ip_netif_t **nif)
{
    fz_now = 1000;
    zbuf_ip_stack_t *s;
    if (zbuf_ip_stack_create(c, &s) != 0)
        abort();
    zbuf_ip_netif_config_t nc = {.addr = FZ_ADDR, .prefix_len = 24,
                                 .gateway = ZBUF_IP_ADDR(192, 0, 2, 254)};
    memcpy(nc.mac, fz_mac, 6);
    zbuf_ip_driver_t drv = {.transmit = fz_tx, .rx_pool = fz_rx_pool(), .flags = FZ_DRV_FLAGS};
    if (zbuf_ip_netif_add(s, &nc, &drv, NULL, nif) != 0)
        abort();
    return s;
}

static inline zbuf_ip_stack_t *fz_stack(zbuf_ip_netif_t **nif)
{
    zbuf_ip_config_t c;
    fz_config(&c);
    zbuf_ip_stack_t *s = fz_stack_with(&c, nif);
    for (uint16_t port = 7; port <= 9; port += 2) {
        zbuf_ip_tcp_t *l;
        zbuf_ip_udp_t *u;
        zbuf_ip_tcp_callbacks_t cb = {.accept = fz_accept};
        zbuf_ip_tcp_new(s, &l);
        zbuf_ip_tcp_bind(l, ZBUF_IP_ANY, port);
        zbuf_ip_tcp_listen(l, 4);
        zbuf_ip_tcp_set_callbacks(l, &cb, NULL);
        zbuf_ip_udp_new(s, &u);
        zbuf_ip_udp_bind(u, ZBUF_IP_ANY, port);
        zbuf_ip_udp_set_recv(u, fz_udp, NULL);
    }
    /* One active connection too, so SYN_SENT is reachable. */
    zbuf_ip_tcp_t *c2;
    zbuf_ip_tcp_new(s, &c2);
    zbuf_ip_tcp_callbacks_t cb2 = {.recv = fz_recv};
    zbuf_ip_tcp_set_callbacks(c2, &cb2, NULL);
    zbuf_ip_tcp_connect(c2, ZBUF_IP_ADDR(192, 0, 2, 2), 80);
    return s;
}

/* Feed `len` bytes as one frame, split into segments at `split` (0: one
 * segment) so that headers straddle segment boundaries. */
static void fz_feed(zbuf_ip_netif_t *nif, const uint8_t *p, size_t len, size_t split)
{
    zbuf_t *z;
    if (len > 0 && len <= FZ_POOL_BUF) {
        zbuf_buf_t *b;
        if (zbuf_pool_get(fz_rx_pool(), &b) != 0) {
            zbuf_ip_netif_rx_nobuf(nif, 1); /* drained and dropped */
            return;
        }
        memcpy(zbuf_buf_data(b), p, len); /* the NIC's DMA */
        if (zbuf_create(&z) != 0)
            abort();
        if (split && split < len) {
            if (zbuf_insert_ref(z, 0, b, 0, split, NULL) != 0 ||
                zbuf_insert_ref(z, split, b, split, len - split, NULL) != 0)
                abort();
        } else if (zbuf_insert_ref(z, 0, b, 0, len, NULL) != 0) {
            abort();
        }
        zbuf_buf_unref(b);
        zbuf_ip_netif_input(nif, z);
        return;
    }
    if (zbuf_create(&z) != 0)
        abort();
    if (split && split < len) {
        zbuf_append_copy(z, p, split);
        zbuf_append_copy(z, p + split, len - split);
    } else if (len) {
        zbuf_append_copy(z, p, len);
    }
    zbuf_ip_netif_input(nif, z);
}

#endif
