/* SPDX-License-Identifier: MIT */
/*
 * bench_stack: bulk TCP throughput of the zbuf stack between two instances
 * over the in-memory link, one thread, and Linux TCP over loopback with
 * both ends pinned to one CPU, as the reference ceiling: with the system's
 * congestion control ("loopback"), with CUBIC and with BBR.  The choice
 * matters on loopback: BBR paces the sender, and on a paravirtualised guest,
 * where every pacing timer exits to the hypervisor, BBR's loopback moved a
 * quarter of the bytes per CPU second that CUBIC's did (docs/benchmarks.md).
 *
 *   bench_stack [--bytes N] [--runs R]
 *               [--which NAME|all]   (names: see the table below)
 *
 * Prints one markdown table row per configuration: median wall-clock
 * throughput of R runs (MB/s), median throughput per CPU second of the
 * process (MB/CPU-s, which holds up on a shared machine), and the bytes
 * copied by the library per payload byte.
 *
 * zbuf-share:    the link hands the receiving stack the very segments sent.
 * zbuf-copy:     the link emulates a NIC: each frame is "DMA"d into a pool
 *                buffer of the receiver (that copy is the emulated hardware's
 *                and is not counted; it is the same work lwIP's bench link
 *                does).
 * zbuf-copy-64k: the same with 64 KiB windows and send buffers, the size
 *                Debian's lwIP is built with (the others use 1 MiB).
 * zbuf-share-csum-offload: zbuf-share on a link that declares checksum
 *                offload (ZBUF_IP_DRV_CSUM_OFFLOAD), as Linux's loopback
 *                does: no TCP checksum computed or verified.
 * zbuf-share-tso: zbuf-share on a link with segmentation offload
 *                (ZBUF_IP_DRV_TSO), as Linux's loopback has: MTU 1500 and
 *                segments of its MSS, up to 45 of them carried in one
 *                packet; checksums computed.
 * zbuf-share-tso-csum: the same with checksum offload too: the offloads
 *                Linux's loopback device has (scripts/bench-stack.sh also
 *                measures that device at MTU 1500, loopback-cubic-mtu1500).
 * zbuf-share-mtu9000, zbuf-share-mtu65535: zbuf-share with jumbo frames and
 *                with the 64 KiB MTU of Linux's loopback device (4 MiB
 *                windows for the latter); checksums computed.
 * zbuf-share-idle200: zbuf-share beside 200 idle established connections
 *                (each stack has 201 PCBs): what a poll's timer work costs
 *                when the stack serves many connections.
 * The sender writes slices of one static 1 MiB buffer by reference (like
 * VxWorks' tcpBlaster duplicating a master zbuf); the receiver releases what
 * it gets without reading it, as lwIP's bench receiver does.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zbuf/ip.h>

#include "bench_common.h"
#include "bench_util.h"

#define MASTER (1u << 20)

static double last_cpu_rate; /* bytes per CPU second of the last run */

/* ------------------------------------------------------------ zbuf stack */

struct bulk {
    zbuf_ip_tcp_t *tx, *rx;
    zbuf_t *master;
    uint64_t total, written, received;
    size_t off;
};

static void fill(struct bulk *b)
{
    while (b->tx && b->written < b->total) {
        size_t room = zbuf_ip_tcp_sndbuf(b->tx);
        size_t n = MASTER - b->off;
        if (n > 65536)
            n = 65536;
        if (n > b->total - b->written)
            n = (size_t)(b->total - b->written);
        if (room < 8192 && room < n)
            return; /* wait for a worthwhile amount of room */
        if (n > room)
            n = room;
        zbuf_t *z;
        if (zbuf_dup(b->master, b->off, n, &z) != 0)
            return;
        if (zbuf_ip_tcp_write(b->tx, z) != 0) {
            zbuf_delete(z);
            return;
        }
        b->written += n;
        b->off = (b->off + n) % MASTER;
    }
}

static void on_sent(void *arg, zbuf_ip_tcp_t *pcb, size_t n)
{
    (void)pcb;
    (void)n;
    fill(arg);
}

static void on_connected(void *arg, zbuf_ip_tcp_t *pcb)
{
    struct bulk *b = arg;
    b->tx = pcb;
    fill(b);
}

static void on_recv(void *arg, zbuf_ip_tcp_t *pcb, zbuf_t *d)
{
    struct bulk *b = arg;
    if (d == NULL)
        return;
    size_t n = zbuf_length(d);
    b->received += n;
    zbuf_ip_tcp_recved(pcb, n);
    zbuf_delete(d);
}

static int on_accept(void *arg, zbuf_ip_tcp_t *l, zbuf_ip_tcp_t *c)
{
    (void)l;
    struct bulk *b = arg;
    b->rx = c;
    zbuf_ip_tcp_callbacks_t cb = {.recv = on_recv};
    zbuf_ip_tcp_set_callbacks(c, &cb, b);
    return 0;
}

static int on_accept_idle(void *arg, zbuf_ip_tcp_t *l, zbuf_ip_tcp_t *c)
{
    (void)l;
    (void)c;
    ++*(unsigned *)arg;
    return 0;
}

/* Open `n` connections from a to b that then stay idle, in batches below
 * the listen backlog. */
static void open_idle(zbuf_ip_stack_t *a, zbuf_ip_stack_t *b, unsigned n)
{
    if (n == 0)
        return;
    unsigned accepted = 0;
    zbuf_ip_tcp_t *lis;
    zbuf_ip_tcp_callbacks_t lcb = {.accept = on_accept_idle};
    if (zbuf_ip_tcp_new(b, &lis) || zbuf_ip_tcp_bind(lis, ZBUF_IP_ANY, 5002) ||
        zbuf_ip_tcp_listen(lis, 32))
        exit(1);
    zbuf_ip_tcp_set_callbacks(lis, &lcb, &accepted);
    for (unsigned opened = 0; opened < n;) {
        for (unsigned k = 0; k < 16 && opened < n; k++, opened++) {
            zbuf_ip_tcp_t *c;
            if (zbuf_ip_tcp_new(a, &c) || zbuf_ip_tcp_connect(c, ZBUF_IP_ADDR(192, 0, 2, 2), 5002))
                exit(1);
        }
        for (int i = 0; i < 100000 && accepted < opened; i++) {
            zbuf_ip_poll(a);
            zbuf_ip_poll(b);
        }
    }
    if (accepted < n)
        exit(1);
    zbuf_ip_tcp_close(lis);
}

/* `offload`: the ZBUF_IP_DRV_* flags both ends of the link get. */
static double run_zbuf(uint64_t bytes, bool copy, uint32_t wnd, unsigned offload, uint16_t mtu,
                       unsigned idle, double *copied_per_byte)
{
    static uint8_t *data;
    if (data == NULL) {
        data = malloc(MASTER);
        for (size_t i = 0; i < MASTER; i++)
            data[i] = (uint8_t)(i * 7);
    }
    zbuf_ip_config_t cfg;
    zbuf_ip_config_init(&cfg);
    cfg.tcp_snd_buf = wnd;
    cfg.tcp_rcv_buf = wnd;
    zbuf_ip_stack_t *a, *b;
    zbuf_ip_link_t *l;
    zbuf_ip_link_config_t lc = {.copy_to_pool = copy, .pool_bufs = 2048,
                                .csum_offload = (offload & ZBUF_IP_DRV_CSUM_OFFLOAD) != 0,
                                .tso = (offload & ZBUF_IP_DRV_TSO) != 0};
    if (zbuf_ip_stack_create(&cfg, &a) || zbuf_ip_stack_create(&cfg, &b) ||
        zbuf_ip_link_create(&lc, &l))
        exit(1);
    zbuf_ip_netif_config_t na = {.mac = {2, 0, 0, 0, 0, 1}, .addr = ZBUF_IP_ADDR(192, 0, 2, 1),
                                 .prefix_len = 24, .mtu = mtu};
    zbuf_ip_netif_config_t nb = {.mac = {2, 0, 0, 0, 0, 2}, .addr = ZBUF_IP_ADDR(192, 0, 2, 2),
                                 .prefix_len = 24, .mtu = mtu};
    if (zbuf_ip_link_attach(l, 0, a, &na, NULL) || zbuf_ip_link_attach(l, 1, b, &nb, NULL))
        exit(1);
    open_idle(a, b, idle);
    struct bulk st = {.total = bytes};
    zbuf_create(&st.master);
    zbuf_append_buf(st.master, data, MASTER, NULL, NULL);
    zbuf_ip_tcp_t *lis, *c;
    zbuf_ip_tcp_new(b, &lis);
    zbuf_ip_tcp_bind(lis, ZBUF_IP_ANY, 5001);
    zbuf_ip_tcp_listen(lis, 1);
    zbuf_ip_tcp_callbacks_t lcb = {.accept = on_accept};
    zbuf_ip_tcp_set_callbacks(lis, &lcb, &st);
    zbuf_ip_tcp_new(a, &c);
    zbuf_ip_tcp_callbacks_t ccb = {.connected = on_connected, .sent = on_sent};
    zbuf_ip_tcp_set_callbacks(c, &ccb, &st);
    zbuf_ip_tcp_connect(c, ZBUF_IP_ADDR(192, 0, 2, 2), 5001);
    /* Handshake first, so the timed part is the transfer. */
    while (st.rx == NULL) {
        zbuf_ip_poll(a);
        zbuf_ip_poll(b);
    }
    zbuf_stats_t z0, z1;
    zbuf_stats_get(&z0);
    double t0 = now_s(), c0 = cpu_s();
    while (st.received < bytes) {
        zbuf_ip_poll(a);
        zbuf_ip_poll(b);
    }
    double dt = now_s() - t0;
    last_cpu_rate = (double)bytes / (cpu_s() - c0);
    zbuf_stats_get(&z1);
    *copied_per_byte = (double)(z1.bytes_copied - z0.bytes_copied) / (double)bytes;
    zbuf_ip_stack_delete(a);
    zbuf_ip_stack_delete(b);
    zbuf_ip_link_delete(l);
    zbuf_delete(st.master);
    return (double)bytes / dt;
}

/* ------------------------------------------------------- kernel loopback */

struct lo_args {
    int fd;
    uint64_t bytes;
};

static void pin0(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void *lo_sender(void *arg)
{
    struct lo_args *a = arg;
    pin0();
    static char buf[65536];
    uint64_t left = a->bytes;
    while (left) {
        ssize_t w = send(a->fd, buf, left < sizeof buf ? left : sizeof buf, 0);
        if (w <= 0)
            break;
        left -= (uint64_t)w;
    }
    close(a->fd);
    return NULL;
}

/* One loopback transfer with the congestion control cc on the sending
 * socket (NULL: the system's); 0 if the kernel refuses cc. */
static double run_loopback(uint64_t bytes, const char *cc)
{
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(ls, (struct sockaddr *)&sa, sizeof sa) || listen(ls, 1))
        exit(1);
    socklen_t sl = sizeof sa;
    getsockname(ls, (struct sockaddr *)&sa, &sl);
    int cs = socket(AF_INET, SOCK_STREAM, 0);
    if (bench_tcp_cc(cs, cc) != 0) {
        close(cs);
        close(ls);
        return 0;
    }
    if (connect(cs, (struct sockaddr *)&sa, sizeof sa))
        exit(1);
    int as = accept(ls, NULL, NULL);
    pin0();
    struct lo_args a = {cs, bytes};
    pthread_t th;
    static char buf[262144];
    double t0 = now_s(), c0 = cpu_s();
    pthread_create(&th, NULL, lo_sender, &a);
    uint64_t got = 0;
    for (;;) {
        ssize_t r = recv(as, buf, sizeof buf, 0);
        if (r <= 0)
            break;
        got += (uint64_t)r;
    }
    double dt = now_s() - t0;
    pthread_join(th, NULL);
    last_cpu_rate = (double)got / (cpu_s() - c0);
    close(as);
    close(ls);
    return (double)got / dt;
}

int main(int argc, char **argv)
{
    uint64_t bytes = 512ull << 20;
    int runs = 5;
    const char *which = "all";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--bytes"))
            bytes = strtoull(argv[i + 1], NULL, 0);
        else if (!strcmp(argv[i], "--runs"))
            runs = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--which"))
            which = argv[i + 1];
    }
    if (runs < 1 || runs > 99)
        runs = 5;
    static const struct {
        const char *name;
        bool copy;
        unsigned offload;
        uint32_t wnd;
        uint16_t mtu;
        unsigned idle;
        const char *cc; /* loopback rows: the sender's congestion control */
    } cfgs[] = {
        {"zbuf-share", false, 0, 1u << 20, 1500, 0, NULL},
        {"zbuf-copy", true, 0, 1u << 20, 1500, 0, NULL},
        {"zbuf-copy-64k", true, 0, 65536, 1500, 0, NULL},
        {"zbuf-share-csum-offload", false, ZBUF_IP_DRV_CSUM_OFFLOAD, 1u << 20, 1500, 0, NULL},
        {"zbuf-share-tso", false, ZBUF_IP_DRV_TSO, 1u << 20, 1500, 0, NULL},
        {"zbuf-share-tso-csum", false, ZBUF_IP_DRV_TSO | ZBUF_IP_DRV_CSUM_OFFLOAD, 1u << 20, 1500,
         0, NULL},
        {"zbuf-share-mtu9000", false, 0, 1u << 20, 9000, 0, NULL},
        {"zbuf-share-mtu65535", false, 0, 4u << 20, 65535, 0, NULL},
        {"zbuf-share-idle200", false, 0, 1u << 20, 1500, 200, NULL},
        {"loopback", false, 0, 0, 0, 0, NULL},
        {"loopback-cubic", false, 0, 0, 0, 0, "cubic"},
        {"loopback-bbr", false, 0, 0, 0, 0, "bbr"},
    };
    /* Warm up (allocator arenas, page faults, caches, CPU frequency) with an
     * untimed transfer, so that the first configuration measured does not
     * pay for it: without this, zbuf-share, measured first, varied by 1.8x
     * from one process to the next where the others varied by 1.1x. */
    double warm_cpb;
    run_zbuf(bytes / 4, false, 1u << 20, 0, 1500, 0, &warm_cpb);
    for (size_t k = 0; k < sizeof cfgs / sizeof cfgs[0]; k++) {
        bool lo = cfgs[k].wnd == 0;
        if (strcmp(which, "all") && strcmp(which, cfgs[k].name))
            continue;
        double r[99], c[99], cpb = 0;
        for (int i = 0; i < runs; i++) {
            r[i] = lo ? run_loopback(bytes, cfgs[k].cc)
                      : run_zbuf(bytes, cfgs[k].copy, cfgs[k].wnd, cfgs[k].offload,
                                 cfgs[k].mtu, cfgs[k].idle, &cpb);
            c[i] = last_cpu_rate;
        }
        qsort(r, (size_t)runs, sizeof r[0], cmp_double);
        qsort(c, (size_t)runs, sizeof c[0], cmp_double);
        if (lo && r[runs / 2] == 0)
            printf("| %-23s | %8s | %8s | %s |\n", cfgs[k].name, "n/a", "n/a",
                   "congestion control not available");
        else if (lo)
            printf("| %-23s | %8.1f | %8.1f | %s |\n", cfgs[k].name, r[runs / 2] / 1e6,
                   c[runs / 2] / 1e6, "n/a (kernel)");
        else
            printf("| %-23s | %8.1f | %8.1f | %.4f |\n", cfgs[k].name, r[runs / 2] / 1e6,
                   c[runs / 2] / 1e6, cpb);
        fflush(stdout);
    }
    return 0;
}
