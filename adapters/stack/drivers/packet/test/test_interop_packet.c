/* SPDX-License-Identifier: MIT */
/*
 * The stack over packet rings against the Linux kernel: a veth pair between
 * two anonymous network namespaces (see adapters/packet/test/nsutil.h): the
 * stack on v0 in A (192.0.2.2, the interface's own MAC, no kernel address),
 * the kernel on v1 in B (192.0.2.1).  Ping, TCP both ways byte-exact, UDP
 * with fragments, loss on the kernel's input hook (nftables numgen) and in
 * the driver, and the demo with --packet.  Skipped with a reason without
 * root, namespaces, veth, AF_PACKET or python3.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zbuf/ip_packet.h>

#include "nsutil.h"
#include "support.h"

#define STACK_IP ZBUF_IP_ADDR(192, 0, 2, 2)

static struct zpt_ns ns;

TestSuite(packet_interop, .init = zt_leak_baseline, .fini = zt_assert_no_leaks, .timeout = 600);

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void setup(void)
{
    const char *skip = zpt_pair_up(&ns);
    if (skip)
        cr_skip_test("%s", skip);
    if (zpt_sh(ns.b, "command -v python3 >/dev/null && command -v ping >/dev/null") != 0)
        cr_skip_test("python3 or ping is missing");
    cr_assert_eq(zpt_sh(ns.b, "ip addr add 192.0.2.1/24 dev v1"), 0);
}

/* Wait until a kernel server in B listens on `port` (python starts slowly
 * on a loaded machine). */
static void wait_listening(int port)
{
    cr_assert_eq(zpt_sh(ns.b, "for i in $(seq 300); do ss -ltn | grep -q ':%d ' && exit 0; "
                              "sleep 0.1; done; exit 1", port),
                 0, "the kernel server never listened on port %d", port);
}

static zbuf_ip_stack_t *open_stack(zbuf_ip_packet_t **drv)
{
    zbuf_ip_stack_t *s;
    cr_assert_eq(zbuf_ip_stack_create(NULL, &s), 0);
    zbuf_ip_netif_config_t nc = {.addr = STACK_IP, .prefix_len = 24};
    char why[256] = "";
    int rc = zbuf_ip_packet_open(s, "v0", &nc, NULL, drv, why, sizeof why);
    cr_assert_eq(rc, 0, "packet open: %s (%s)", zbuf_strerror(rc), why);
    return s;
}

/* Drive the stack until `pid` exits (its status) or `limit_s` passes (-1);
 * `step` runs after every poll (the application's part). */
static int run_until_exit(zbuf_ip_stack_t *s, zbuf_ip_packet_t *d, pid_t pid, int limit_s,
                          void (*step)(void *), void *arg)
{
    struct pollfd pfd = {.fd = zbuf_ip_packet_fd(d), .events = POLLIN};
    uint64_t end = mono_ms() + (uint64_t)limit_s * 1000, tail = 0;
    int status = -1;
    for (;;) {
        if (tail == 0 && waitpid(pid, &status, WNOHANG) == pid)
            tail = mono_ms() + 300; /* a little more for the last FIN/ACK */
        if (tail && mono_ms() > tail)
            break;
        if (mono_ms() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        uint64_t dl = zbuf_ip_next_deadline(s), now = zbuf_ip_now(s);
        int timeout = dl <= now ? 0 : (dl - now > 10 ? 10 : (int)(dl - now));
        poll(&pfd, 1, timeout);
        zbuf_ip_poll(s);
        if (step)
            step(arg);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* ------------------------------------------- echo over the socket layer */

#define MAX_CONNS 4

struct echo {
    zbuf_ip_sock_t *listener;
    zbuf_ip_sock_t *conn[MAX_CONNS];
    size_t echoed;
    size_t close_after; /* close a connection once it echoed this much (0: at EOF) */
    int accepted;
};

static void echo_step(void *arg)
{
    struct echo *e = arg;
    zbuf_ip_sock_t *c;
    while (e->listener && zbuf_ip_sock_accept(e->listener, &c) == 0) {
        e->accepted++;
        for (int i = 0; i < MAX_CONNS; i++)
            if (e->conn[i] == NULL) {
                e->conn[i] = c;
                c = NULL;
                break;
            }
        if (c)
            zbuf_ip_sock_close(c);
    }
    for (int i = 0; i < MAX_CONNS; i++) {
        zbuf_ip_sock_t *k = e->conn[i];
        if (k == NULL)
            continue;
        for (;;) {
            if (!(zbuf_ip_sock_events(k) & ZBUF_IP_SOCK_WRITABLE))
                break;
            zbuf_t *z;
            ssize_t n = zbuf_ip_sock_recv(k, 256 * 1024, &z);
            if (n == -EAGAIN)
                break;
            if (n <= 0) { /* end of stream or error: close, echo done */
                zbuf_ip_sock_close(k);
                e->conn[i] = NULL;
                break;
            }
            /* Zero copy: the received segments (ring loans or pool
             * buffers) go straight back into the send queue. */
            cr_assert_eq(zbuf_ip_sock_send(k, z), 0);
            e->echoed += (size_t)n;
            if (e->close_after && e->echoed >= e->close_after) {
                zbuf_ip_sock_close(k); /* sends what is queued, then a FIN */
                e->conn[i] = NULL;
                break;
            }
        }
    }
}

static void echo_close(struct echo *e)
{
    for (int i = 0; i < MAX_CONNS; i++)
        zbuf_ip_sock_close(e->conn[i]);
    zbuf_ip_sock_close(e->listener);
}

static void report(zbuf_ip_stack_t *s, zbuf_ip_packet_t *d, const zbuf_stats_t *z0)
{
    zbuf_ip_stats_t st;
    zbuf_stats_t z1;
    zbuf_packet_stats_t ps;
    zbuf_ip_packet_stats_t ds;
    zbuf_ip_stats(s, &st);
    zbuf_stats_get(&z1);
    zbuf_packet_stats(zbuf_ip_packet_handle(d), &ps);
    zbuf_ip_packet_stats(d, &ds);
    uint64_t copied = z1.bytes_copied - z0->bytes_copied;
    fprintf(stderr,
            "stack: rx %llu frames (%llu lent, %llu copied, %llu partial checksums completed), "
            "tx %llu frames, retransmits %llu (rto %llu), bad checksum %llu; kernel drops %llu, "
            "stalls %llu, bounced %llu; copied %llu bytes = %.3f per byte sent\n",
            (unsigned long long)st.rx_frames, (unsigned long long)ps.rx_loaned,
            (unsigned long long)ps.rx_copied, (unsigned long long)ds.rx_csum_completed,
            (unsigned long long)st.tx_frames, (unsigned long long)st.tcp_retransmits,
            (unsigned long long)st.tcp_rto, (unsigned long long)st.bad_checksum,
            (unsigned long long)ps.kernel_drops, (unsigned long long)ps.rx_stalls,
            (unsigned long long)ps.rx_bounced,
            (unsigned long long)copied, st.tx_bytes ? (double)copied / (double)st.tx_bytes : 0.0);
    cr_assert_eq(st.bad_checksum, 0, "partial checksums must be completed");
}

static void kernel_client_echo(size_t nbytes, bool lossy)
{
    setup();
    zbuf_ip_packet_t *d;
    zbuf_ip_stack_t *s = open_stack(&d);
    if (lossy) {
        /* Loss made by the kernel on its input hook (stack -> kernel), and
         * by the driver (kernel -> stack). */
        if (zpt_sh(ns.b, "nft -f - <<'EOF' 2>/dev/null\n"
                         "table inet zbpk {\n"
                         "  chain in { type filter hook input priority 0; iifname \"v1\" "
                         "numgen random mod 100 < 2 counter drop; }\n"
                         "}\n"
                         "EOF") != 0)
            cr_skip_test("nftables (nft, CONFIG_NF_TABLES, CONFIG_NFT_NUMGEN) is not available");
        cr_assert_eq(zbuf_ip_packet_set_loss(d, 0.02, 0, 42), 0);
    }
    struct echo e = {0};
    cr_assert_eq(zbuf_ip_sock_listen(s, ZBUF_IP_ANY, 7, 4, &e.listener), 0);
    zbuf_stats_t z0;
    zbuf_stats_get(&z0);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "exec python3 %s/interop_peer.py client 192.0.2.2 7 %zu >&2",
             ZBUF_STACK_TEST_DIR, nbytes);
    int rc = run_until_exit(s, d, zpt_spawn(ns.b, cmd), 300, echo_step, &e);
    report(s, d, &z0);
    cr_assert_eq(rc, 0, "kernel client saw a mismatch or timed out");
    cr_assert_eq(e.accepted, 1);
    cr_assert_eq(e.echoed, nbytes);
    if (lossy) {
        cr_assert_eq(zpt_sh(ns.b, "nft list table inet zbpk | grep -q 'counter packets [1-9]'"), 0,
                     "the input hook never dropped");
        zbuf_ip_packet_stats_t ds;
        zbuf_ip_packet_stats(d, &ds);
        cr_assert_gt(ds.rx_lost, 0);
    }
    echo_close(&e);
    zbuf_ip_stack_delete(s);
}

Test(packet_interop, kernel_pings_the_stack)
{
    setup();
    zbuf_ip_packet_t *d;
    zbuf_ip_stack_t *s = open_stack(&d);
    int rc = run_until_exit(s, d, zpt_spawn(ns.b, "exec ping -c 5 -i 0.2 -W 2 -s 1000 192.0.2.2 >&2"),
                            30, NULL, NULL);
    cr_assert_eq(rc, 0, "ping failed");
    zbuf_ip_stats_t st;
    zbuf_ip_stats(s, &st);
    cr_assert_geq(st.icmp_echo_tx, 5);
    zbuf_ip_stack_delete(s);
}

Test(packet_interop, kernel_client_exchanges_32mib_with_the_stack_both_ways)
{
    kernel_client_echo(32u << 20, false);
}

Test(packet_interop, kernel_client_echo_under_nftables_input_loss_and_driver_loss)
{
    kernel_client_echo(8u << 20, true);
}

struct pump {
    zbuf_ip_sock_t *k;
    size_t total, sent, got;
    uint8_t *data;
    bool bad, closed;
};

/* The stack sends `total` pattern bytes to a kernel server that echoes
 * them, checks the echo byte by byte, and closes first. */
static void pump_step(void *arg)
{
    struct pump *p = arg;
    if (p->k == NULL || p->closed)
        return;
    unsigned ev = zbuf_ip_sock_events(p->k);
    if (!(ev & ZBUF_IP_SOCK_CONNECTED))
        return;
    while (p->sent < p->total && (zbuf_ip_sock_events(p->k) & ZBUF_IP_SOCK_WRITABLE)) {
        size_t n = p->total - p->sent < 65536 ? p->total - p->sent : 65536;
        zbuf_t *z;
        cr_assert_eq(zbuf_create(&z), 0);
        cr_assert_eq(zbuf_append_buf(z, p->data + p->sent, n, NULL, NULL), 0);
        if (zbuf_ip_sock_send(p->k, z) != 0) {
            zbuf_delete(z);
            break;
        }
        p->sent += n;
    }
    zbuf_t *z;
    ssize_t n;
    while ((n = zbuf_ip_sock_recv(p->k, ZBUF_TO_END, &z)) > 0) {
        size_t off = 0;
        for (zbuf_seg_t *g = zbuf_seg_first(z); g; g = zbuf_seg_next(z, g)) {
            size_t l = zbuf_seg_length(z, g);
            if (memcmp(zbuf_seg_data(z, g), p->data + p->got + off, l) != 0)
                p->bad = true;
            off += l;
        }
        p->got += (size_t)n;
        zbuf_delete(z);
    }
    if (p->got == p->total && !p->closed) {
        p->closed = true;
        zbuf_ip_sock_close(p->k);
        p->k = NULL;
    }
}

Test(packet_interop, stack_connects_to_a_kernel_server_and_exchanges_32mib)
{
    setup();
    zbuf_ip_packet_t *d;
    zbuf_ip_stack_t *s = open_stack(&d);
    size_t nbytes = 32u << 20;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "exec python3 %s/interop_peer.py server 192.0.2.1 5000 %zu >&2",
             ZBUF_STACK_TEST_DIR, nbytes);
    pid_t pid = zpt_spawn(ns.b, cmd);
    wait_listening(5000);
    /* interop_peer.py server sends random bytes and expects them back:
     * echo with the sock layer instead of the pattern pump. */
    struct echo e = {.close_after = nbytes};
    cr_assert_eq(zbuf_ip_sock_connect(s, ZBUF_IP_ADDR(192, 0, 2, 1), 5000, &e.conn[0]), 0);
    zbuf_stats_t z0;
    zbuf_stats_get(&z0);
    int rc = run_until_exit(s, d, pid, 300, echo_step, &e);
    report(s, d, &z0);
    cr_assert_eq(rc, 0, "kernel server saw a mismatch or timed out");
    cr_assert_eq(e.echoed, nbytes);
    echo_close(&e);
    zbuf_ip_stack_delete(s);
}

Test(packet_interop, stack_sends_a_pattern_the_kernel_echoes_byte_exact)
{
    setup();
    zbuf_ip_packet_t *d;
    zbuf_ip_stack_t *s = open_stack(&d);
    /* A kernel echo server in B (socat-free: python). */
    pid_t srv = zpt_spawn(ns.b, "exec python3 -c 'import socket\n"
                                "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
                                "s.bind((\"192.0.2.1\", 5001)); s.listen(1); s.settimeout(60)\n"
                                "c,_=s.accept(); c.settimeout(60)\n"
                                "while True:\n"
                                "    b=c.recv(262144)\n"
                                "    if not b: break\n"
                                "    c.sendall(b)\n"
                                "c.close()'");
    wait_listening(5001);
    struct pump p = {.total = 24u << 20};
    p.data = malloc(p.total);
    for (size_t i = 0; i < p.total; i++)
        p.data[i] = (uint8_t)(i * 7 + (i >> 11));
    cr_assert_eq(zbuf_ip_sock_connect(s, ZBUF_IP_ADDR(192, 0, 2, 1), 5001, &p.k), 0);
    int rc = run_until_exit(s, d, srv, 300, pump_step, &p);
    cr_assert_eq(rc, 0, "kernel echo server failed");
    cr_assert_eq(p.got, p.total, "echoed %zu of %zu bytes", p.got, p.total);
    cr_assert(!p.bad, "the echo differs");
    zbuf_ip_stack_delete(s);
    free(p.data);
}

Test(packet_interop, demo_with_packet_serves_ping_tcp_and_udp)
{
    setup();
    int out[2];
    cr_assert_eq(pipe(out), 0);
    pid_t demo = fork();
    cr_assert_geq(demo, 0);
    if (demo == 0) {
        dup2(out[1], 1);
        close(out[0]);
        execl(ZBUF_STACK_DEMO, "zbuf-stack-demo", "--packet", "v0", "--addr", "192.0.2.2/24",
              (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    FILE *f = fdopen(out[0], "r");
    char line[512];
    cr_assert_not_null(fgets(line, sizeof line, f), "demo printed nothing");
    cr_assert(strstr(line, "ready") != NULL, "demo: %s", line);
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "ping -c 3 -i 0.2 -W 2 192.0.2.2 >&2 && "
             "python3 %s/interop_peer.py client 192.0.2.2 7 4194304 >&2 && "
             "python3 %s/interop_peer.py sink 192.0.2.2 19 1048576 >&2 && "
             "python3 -c 'import socket,os; s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); "
             "s.settimeout(5)\n"
             "for n in (6, 1472, 1473, 8000, 30000):\n"
             "    d=os.urandom(n); s.sendto(d,(\"192.0.2.2\",7)); assert s.recv(70000)==d, n'",
             ZBUF_STACK_TEST_DIR, ZBUF_STACK_TEST_DIR);
    pid_t pid = zpt_spawn(ns.b, cmd);
    int st = -1;
    uint64_t end = mono_ms() + 120000;
    while (waitpid(pid, &st, WNOHANG) == 0 && mono_ms() < end)
        usleep(10000);
    if (mono_ms() >= end) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
    }
    usleep(300 * 1000);
    kill(demo, SIGTERM);
    char all[4096] = "";
    while (fgets(line, sizeof line, f))
        strncat(all, line, sizeof all - strlen(all) - 1);
    fclose(f);
    int dst;
    waitpid(demo, &dst, 0);
    fprintf(stderr, "%s", all);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "kernel-side clients failed");
    cr_assert(WIFEXITED(dst) && WEXITSTATUS(dst) == 0, "demo did not exit cleanly");
    cr_assert(strstr(all, "icmp echo: ") != NULL);
}
