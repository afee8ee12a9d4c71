/* SPDX-License-Identifier: MIT */
/*
 * bench_lwip: the same bulk TCP transfer as bench_stack, with lwIP's raw API
 * (Debian's liblwip, used as packaged) between two interfaces of one lwIP
 * instance joined by an equivalent in-memory link.
 *
 *   bench_lwip [--bytes N] [--runs R]
 *
 * lwIP keeps its state in globals, so both ends live in one instance: the
 * client PCB is bound to interface A (10.0.0.1) and the server to interface
 * B (10.0.0.2) with tcp_bind_netif(), so every segment, both ways, crosses
 * the link.  The link emulates a NIC exactly as bench_stack's copy mode:
 * each frame is copied into a fresh receive pbuf of the other side.  The
 * sender passes its data by reference (tcp_write without
 * TCP_WRITE_FLAG_COPY); Debian builds lwIP with LWIP_NETIF_TX_SINGLE_PBUF,
 * so tcp_write copies it into one pbuf per segment anyway (one copy per
 * payload byte, inside lwIP, not measurable from here).  The receiver
 * releases pbufs without reading them.  Debian's configuration fixes the
 * windows at 64 KiB (TCP_WND, TCP_SND_BUF).
 */
#include <lwip/etharp.h>
#include <lwip/init.h>
#include <lwip/netif.h>
#include <lwip/pbuf.h>
#include <lwip/tcp.h>
#include <lwip/tcpip.h>
#include <netif/ethernet.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"

#define MASTER (1u << 20)
#define QMAX 65536

struct side {
    struct netif nif;
    struct pbuf *q[QMAX]; /* frames travelling to this side */
    unsigned head, tail;
};

static struct side sides[2];
static uint8_t *data;
static uint64_t total, written, received;
static size_t off;
static struct tcp_pcb *client, *server_conn;
static atomic_int init_done;

static double last_cpu_rate; /* bytes per CPU second of the last run */

static err_t link_out(struct netif *nif, struct pbuf *p)
{
    struct side *to = nif == &sides[0].nif ? &sides[1] : &sides[0];
    if (to->tail - to->head >= QMAX)
        return ERR_OK; /* dropped, as a full ring would */
    struct pbuf *q = pbuf_alloc(PBUF_RAW, p->tot_len, PBUF_RAM);
    if (q == NULL)
        return ERR_MEM;
    pbuf_copy(q, p); /* the emulated NIC's DMA */
    to->q[to->tail++ % QMAX] = q;
    return ERR_OK;
}

static err_t nif_init(struct netif *nif)
{
    nif->hwaddr_len = 6;
    nif->mtu = 1500;
    nif->flags = NETIF_FLAG_BROADCAST | NETIF_FLAG_ETHARP | NETIF_FLAG_ETHERNET |
                 NETIF_FLAG_LINK_UP;
    nif->output = etharp_output;
    nif->linkoutput = link_out;
    nif->name[0] = 'z';
    nif->name[1] = 'b';
    return ERR_OK;
}

static void fill(void)
{
    while (client && written < total) {
        size_t n = MASTER - off;
        if (n > 16384)
            n = 16384;
        if (n > total - written)
            n = (size_t)(total - written);
        if (n > tcp_sndbuf(client))
            n = tcp_sndbuf(client);
        if (n == 0 || tcp_write(client, data + off, (u16_t)n, 0) != ERR_OK)
            break;
        written += n;
        off = (off + n) % MASTER;
    }
    if (client)
        tcp_output(client);
}

static err_t on_sent(void *arg, struct tcp_pcb *pcb, u16_t len)
{
    (void)arg;
    (void)pcb;
    (void)len;
    fill();
    return ERR_OK;
}

static err_t on_connected(void *arg, struct tcp_pcb *pcb, err_t err)
{
    (void)arg;
    (void)err;
    client = pcb;
    fill();
    return ERR_OK;
}

static err_t on_recv(void *arg, struct tcp_pcb *pcb, struct pbuf *p, err_t err)
{
    (void)arg;
    (void)err;
    if (p == NULL)
        return ERR_OK;
    received += p->tot_len;
    tcp_recved(pcb, p->tot_len);
    pbuf_free(p);
    return ERR_OK;
}

static err_t on_accept(void *arg, struct tcp_pcb *pcb, err_t err)
{
    (void)arg;
    (void)err;
    server_conn = pcb;
    tcp_recv(pcb, on_recv);
    return ERR_OK;
}

static void tcpip_ready(void *arg)
{
    (void)arg;
    atomic_store(&init_done, 1);
}

/* Deliver queued frames (under the core lock). */
static int pump(void)
{
    int n = 0;
    for (int i = 0; i < 2; i++) {
        struct side *s = &sides[i];
        while (s->head != s->tail) {
            struct pbuf *p = s->q[s->head++ % QMAX];
            if (s->nif.input(p, &s->nif) != ERR_OK)
                pbuf_free(p);
            n++;
        }
    }
    return n;
}

static double run(uint64_t bytes, uint16_t port)
{
    total = bytes;
    written = received = 0;
    client = server_conn = NULL;
    LOCK_TCPIP_CORE();
    struct tcp_pcb *l = tcp_new();
    tcp_bind_netif(l, &sides[1].nif);
    ip_addr_t b_ip;
    IP_ADDR4(&b_ip, 10, 0, 0, 2);
    tcp_bind(l, &b_ip, port);
    l = tcp_listen(l);
    tcp_accept(l, on_accept);
    struct tcp_pcb *c = tcp_new();
    tcp_bind_netif(c, &sides[0].nif);
    tcp_sent(c, on_sent);
    tcp_connect(c, &b_ip, port, on_connected);
    UNLOCK_TCPIP_CORE();
    double t0 = 0, c0 = 0;
    for (;;) {
        LOCK_TCPIP_CORE();
        pump();
        if (t0 == 0 && server_conn) {
            t0 = now_s();
            c0 = cpu_s();
        }
        bool done = received >= total;
        UNLOCK_TCPIP_CORE();
        if (done)
            break;
    }
    double dt = now_s() - t0;
    last_cpu_rate = (double)bytes / (cpu_s() - c0);
    LOCK_TCPIP_CORE();
    tcp_abort(client);
    tcp_abort(server_conn);
    tcp_close(l);
    pump();
    UNLOCK_TCPIP_CORE();
    return (double)bytes / dt;
}

int main(int argc, char **argv)
{
    uint64_t bytes = 512ull << 20;
    int runs = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--bytes"))
            bytes = strtoull(argv[i + 1], NULL, 0);
        else if (!strcmp(argv[i], "--runs"))
            runs = atoi(argv[i + 1]);
    }
    if (runs < 1 || runs > 99)
        runs = 5;
    data = malloc(MASTER);
    for (size_t i = 0; i < MASTER; i++)
        data[i] = (uint8_t)(i * 7);
    tcpip_init(tcpip_ready, NULL);
    while (!atomic_load(&init_done))
        ;
    LOCK_TCPIP_CORE();
    ip4_addr_t a, b, mask, gw;
    IP4_ADDR(&a, 10, 0, 0, 1);
    IP4_ADDR(&b, 10, 0, 0, 2);
    IP4_ADDR(&mask, 255, 255, 255, 0);
    IP4_ADDR(&gw, 0, 0, 0, 0);
    netif_add(&sides[1].nif, &b, &mask, &gw, NULL, nif_init, ethernet_input);
    netif_add(&sides[0].nif, &a, &mask, &gw, NULL, nif_init, ethernet_input);
    memcpy(sides[0].nif.hwaddr, "\x02\x00\x00\x00\x00\x01", 6);
    memcpy(sides[1].nif.hwaddr, "\x02\x00\x00\x00\x00\x02", 6);
    for (int i = 0; i < 2; i++) {
        netif_set_up(&sides[i].nif);
        netif_set_link_up(&sides[i].nif);
    }
    UNLOCK_TCPIP_CORE();
    /* An untimed warm-up transfer, as bench_stack does. */
    run(bytes / 4, 5000);
    double r[99], c[99];
    for (int i = 0; i < runs; i++) {
        r[i] = run(bytes, (uint16_t)(5001 + i));
        c[i] = last_cpu_rate;
    }
    qsort(r, (size_t)runs, sizeof r[0], cmp_double);
    qsort(c, (size_t)runs, sizeof c[0], cmp_double);
    printf("| %-23s | %8.1f | %8.1f | %s |\n", "lwip", r[runs / 2] / 1e6, c[runs / 2] / 1e6,
           "1 (tcp_write copies: LWIP_NETIF_TX_SINGLE_PBUF)");
    return 0;
}
