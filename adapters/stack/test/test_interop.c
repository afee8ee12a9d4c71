/* SPDX-License-Identifier: MIT */
/* Interop with the Linux kernel: each test makes its own network namespace
 * with a TAP device (192.0.2.1 kernel side, 192.0.2.2 the stack), runs the
 * stack on it and has the kernel's own tools talk to it.  Skipped with a
 * reason without root, network namespaces, /dev/net/tun or python3.
 *
 * The namespace is anonymous (unshare(CLONE_NEWNET) of the forked test
 * process, see zt_netns.h): it and its TAP device vanish with the last
 * process in it, on every exit path.  A named one (ip netns add) outlives
 * a test that skips or times out, since Criterion then runs no .fini. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support.h"
#include "tcpfix.h"
#include "zt_netns.h"

#define TAP "zbt0"
#define KERNEL_IP "192.0.2.1"
#define STACK_IP ZBUF_IP_ADDR(192, 0, 2, 2)

TestSuite(interop, .init = zt_leak_baseline, .fini = zt_assert_no_leaks, .timeout = 300);

static void enter_namespace_or_skip(void)
{
    zt_netns_enter_or_skip(true);
}

static void kernel_side_up(void)
{
    zt_tap_kernel_side_up(TAP, KERNEL_IP "/24");
}

static int run_stack_until_exit(zbuf_ip_stack_t *s, zbuf_ip_netif_t *nif, pid_t pid, int limit_s)
{
    return zt_run_stack_until_exit(s, nif, pid, limit_s, NULL, NULL);
}

static zbuf_ip_stack_t *open_stack(zbuf_ip_netif_t **nif)
{
    zbuf_ip_stack_t *s;
    cr_assert_eq(zbuf_ip_stack_create(NULL, &s), 0);
    zbuf_ip_netif_config_t nc = {.mac = {0x02, 0x7a, 0x62, 0x75, 0x66, 0x02},
                                 .addr = STACK_IP, .prefix_len = 24};
    int rc = zbuf_ip_tap_open(s, TAP, &nc, 4096, nif);
    cr_assert_eq(rc, 0, "tap open: %s", zbuf_strerror(rc));
    kernel_side_up();
    return s;
}

/* ------------------------------------------------ a zero-copy echo server */

struct echo {
    zbuf_ip_tcp_t *pcb;
    zbuf_t *pending;
    size_t echoed, close_after;
    bool eof, closed;
    int accepted, errors;
    zbuf_ip_tcp_info_t info; /* as negotiated, when the connection was set up */
};

static void echo_close(struct echo *e)
{
    if (!e->closed) {
        e->closed = true;
        zbuf_ip_tcp_close(e->pcb);
    }
}

static void echo_flush(struct echo *e)
{
    while (!e->closed && e->pending && zbuf_length(e->pending)) {
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
        e->echoed += len;
    }
    if (e->eof || (e->close_after && e->echoed >= e->close_after))
        echo_close(e);
}

static void echo_recv(void *arg, zbuf_ip_tcp_t *pcb, zbuf_t *d)
{
    (void)pcb;
    struct echo *e = arg;
    if (d == NULL) {
        e->eof = true;
        echo_flush(e);
        return;
    }
    if (e->pending)
        zbuf_append(e->pending, d);
    else
        e->pending = d;
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
    struct echo *e = arg;
    e->errors++;
    e->closed = true;
}

static const zbuf_ip_tcp_callbacks_t echo_cbs = {
    .recv = echo_recv, .sent = echo_sent, .error = echo_error};

static int echo_accept(void *arg, zbuf_ip_tcp_t *l, zbuf_ip_tcp_t *c)
{
    (void)l;
    struct echo *e = arg;
    e->pcb = c;
    e->accepted++;
    zbuf_ip_tcp_info(c, &e->info);
    zbuf_ip_tcp_set_callbacks(c, &echo_cbs, e);
    return 0;
}

static void echo_connected(void *arg, zbuf_ip_tcp_t *pcb)
{
    struct echo *e = arg;
    e->pcb = pcb;
    e->accepted++;
    zbuf_ip_tcp_info(pcb, &e->info);
}

/* What Linux offers and the stack takes up: timestamps, SACK, window
 * scaling, the MSS of a 1500-byte MTU less the timestamp option. */
static void assert_negotiated(const zbuf_ip_tcp_info_t *i)
{
    cr_assert(i->ts_ok, "TCP timestamps negotiated with Linux");
    cr_assert(i->sack_ok, "SACK negotiated with Linux");
    cr_assert_gt(i->snd_wscale, 0, "Linux's window scale taken");
    cr_assert_eq(i->mss, 1448, "MSS 1460 less 12 option bytes");
}

static zbuf_ip_tcp_t *echo_listen(zbuf_ip_stack_t *s, struct echo *e)
{
    zbuf_ip_tcp_t *l;
    cr_assert_eq(zbuf_ip_tcp_new(s, &l), 0);
    cr_assert_eq(zbuf_ip_tcp_bind(l, ZBUF_IP_ANY, 7), 0);
    cr_assert_eq(zbuf_ip_tcp_listen(l, 4), 0);
    zbuf_ip_tcp_callbacks_t cb = {.accept = echo_accept};
    zbuf_ip_tcp_set_callbacks(l, &cb, e);
    return l;
}

static void report(zbuf_ip_stack_t *s, const zbuf_stats_t *z0)
{
    zbuf_ip_stats_t st;
    zbuf_stats_t z1;
    zbuf_ip_stats(s, &st);
    zbuf_stats_get(&z1);
    fprintf(stderr,
            "stack: rx %llu frames, tx %llu frames, retransmits %llu (rto %llu, fast %llu), "
            "ooo %llu, bad checksum %llu, copied %llu bytes for %llu payload bytes\n",
            (unsigned long long)st.rx_frames, (unsigned long long)st.tx_frames,
            (unsigned long long)st.tcp_retransmits, (unsigned long long)st.tcp_rto,
            (unsigned long long)st.tcp_fast_retransmits, (unsigned long long)st.tcp_ooo_queued,
            (unsigned long long)st.bad_checksum,
            (unsigned long long)(z1.bytes_copied - z0->bytes_copied),
            (unsigned long long)(st.tcp_rx_payload + st.tcp_tx_payload));
    cr_assert_eq(z1.bytes_copied, z0->bytes_copied, "the stack copied payload");
}

/* ------------------------------------------------------------------ tests */

Test(interop, kernel_ping_gets_replies)
{
    enter_namespace_or_skip();
    zbuf_ip_netif_t *nif;
    zbuf_ip_stack_t *s = open_stack(&nif);
    pid_t pid = zt_spawn("ping -c 5 -i 0.2 -W 2 -s 1000 192.0.2.2 >&2");
    cr_assert_eq(run_stack_until_exit(s, nif, pid, 30), 0, "ping failed");
    zbuf_ip_stats_t st;
    zbuf_ip_stats(s, &st);
    cr_assert_geq(st.icmp_echo_tx, 5);
    zbuf_ip_stack_delete(s);
}

/* Kernel-side impairment of the TAP: a shell command run in the namespace
 * after the interface is up, the reason to skip when it fails, and a
 * command that succeeds only if the impairment really acted. */
struct impair {
    const char *setup, *skip, *verify;
};

static void kernel_client_echo(size_t nbytes, const struct impair *imp, double loss)
{
    enter_namespace_or_skip();
    zbuf_ip_netif_t *nif;
    zbuf_ip_stack_t *s = open_stack(&nif);
    if (imp && zt_sh("%s", imp->setup) != 0)
        cr_skip_test("%s", imp->skip);
    if (loss > 0)
        cr_assert_eq(zbuf_ip_tap_set_loss(nif, loss, loss, 42), 0);
    struct echo e = {0};
    zbuf_ip_tcp_t *l = echo_listen(s, &e);
    zbuf_stats_t z0;
    zbuf_stats_get(&z0);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "python3 %s/interop_peer.py client 192.0.2.2 7 %zu >&2",
             ZBUF_STACK_TEST_DIR, nbytes);
    int rc = run_stack_until_exit(s, nif, zt_spawn(cmd), 240);
    report(s, &z0);
    cr_assert_eq(rc, 0, "kernel client saw a mismatch or timed out");
    cr_assert_eq(e.accepted, 1);
    cr_assert_eq(e.errors, 0);
    cr_assert(e.closed, "kernel closed first, the stack followed");
    assert_negotiated(&e.info);
    cr_assert_eq(e.echoed, nbytes);
    if (imp && imp->verify)
        cr_assert_eq(zt_sh("%s", imp->verify), 0, "the kernel-side impairment never acted");
    zbuf_ip_tcp_close(l);
    zbuf_delete(e.pending);
    zbuf_ip_stack_delete(s);
}

Test(interop, kernel_client_exchanges_32mib_with_the_stack_both_ways)
{
    kernel_client_echo(32u << 20, NULL, 0);
}

Test(interop, kernel_client_with_two_percent_loss_each_way_at_the_tap)
{
    /* Lost kernel segments make Linux recover with our SACK blocks; lost
     * stack segments exercise our retransmissions against Linux. */
    kernel_client_echo(8u << 20, NULL, 0.02);
}

Test(interop, kernel_client_under_netem_loss_and_reordering)
{
    static const struct impair netem = {
        "tc qdisc add dev " TAP " root netem loss 2% delay 1ms 1ms reorder 5% 50% 2>/dev/null",
        "tc netem is not available (kernel without sch_netem); the nftables test covers "
        "kernel-side loss",
        NULL};
    kernel_client_echo(8u << 20, &netem, 0);
}

/* Where netem is missing (CONFIG_NET_SCH_NETEM off, as on this project's CI
 * kernel), nftables drops 2 % of the kernel's packets in each direction at
 * random (numgen), and a token-bucket qdisc caps the kernel's sending rate
 * so that its queue overflows and drops bursts as well: loss made by the
 * kernel itself, both isolated and in bursts. */
Test(interop, kernel_client_under_nftables_random_loss_and_tbf_queue_drops)
{
    static const struct impair nft = {
        "nft -f - <<'EOF' 2>/dev/null && tc qdisc add dev " TAP
        " root tbf rate 200mbit burst 32kb latency 5ms 2>/dev/null\n"
        "table inet zbt {\n"
        "  chain out { type filter hook output priority 0; oifname \"" TAP
        "\" numgen random mod 100 < 2 counter drop; }\n"
        "  chain in { type filter hook input priority 0; iifname \"" TAP
        "\" numgen random mod 100 < 2 counter drop; }\n"
        "}\n"
        "EOF",
        "nftables (nft, CONFIG_NF_TABLES, CONFIG_NFT_NUMGEN) or the tbf qdisc is not available",
        /* both rules dropped packets */
        "test \"$(nft list table inet zbt | grep -c 'counter packets [1-9]')\" = 2"};
    kernel_client_echo(8u << 20, &nft, 0);
}

Test(interop, stack_connects_to_a_kernel_server_and_closes_first)
{
    enter_namespace_or_skip();
    zbuf_ip_netif_t *nif;
    zbuf_ip_stack_t *s = open_stack(&nif);
    size_t nbytes = 32u << 20;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "python3 %s/interop_peer.py server " KERNEL_IP " 5000 %zu >&2",
             ZBUF_STACK_TEST_DIR, nbytes);
    pid_t pid = zt_spawn(cmd);
    zt_wait_listening(5000, 30);
    struct echo e = {.close_after = nbytes};
    zbuf_ip_tcp_t *c;
    cr_assert_eq(zbuf_ip_tcp_new(s, &c), 0);
    zbuf_ip_tcp_callbacks_t cb = echo_cbs;
    cb.connected = echo_connected;
    zbuf_ip_tcp_set_callbacks(c, &cb, &e);
    e.pcb = c;
    cr_assert_eq(zbuf_ip_tcp_connect(c, ZBUF_IP_ADDR(192, 0, 2, 1), 5000), 0);
    zbuf_stats_t z0;
    zbuf_stats_get(&z0);
    int rc = run_stack_until_exit(s, nif, pid, 240);
    report(s, &z0);
    cr_assert_eq(rc, 0, "kernel server saw a mismatch or timed out");
    cr_assert_eq(e.accepted, 1, "connected");
    cr_assert(e.closed);
    assert_negotiated(&e.info);
    cr_assert_eq(e.errors, 0);
    zbuf_delete(e.pending);
    zbuf_ip_stack_delete(s);
}

Test(interop, demo_serves_ping_echo_discard_chargen_and_reports_zero_copy)
{
    enter_namespace_or_skip();
    int out[2];
    cr_assert_eq(pipe(out), 0);
    pid_t demo = fork();
    cr_assert_geq(demo, 0);
    if (demo == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test (see zt_netns.h) */
        dup2(out[1], 1);
        close(out[0]);
        execl(ZBUF_STACK_DEMO, "zbuf-stack-demo", "--tap", TAP, "--addr", "192.0.2.2/24",
              (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    FILE *f = fdopen(out[0], "r");
    char line[512];
    cr_assert_not_null(fgets(line, sizeof line, f), "demo printed nothing");
    cr_assert(strstr(line, "ready") != NULL, "demo: %s", line);
    kernel_side_up();
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "ping -c 3 -i 0.2 -W 2 192.0.2.2 >&2 && "
             "python3 %s/interop_peer.py client 192.0.2.2 7 4194304 >&2 && "
             "python3 %s/interop_peer.py sink 192.0.2.2 19 1048576 >&2 && "
             "python3 -c 'import socket,sys; s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); "
             "s.settimeout(5); s.sendto(b\"hi udp\",(\"192.0.2.2\",7)); "
             "sys.exit(0 if s.recv(100)==b\"hi udp\" else 1)' && "
             "python3 -c 'import socket; s=socket.create_connection((\"192.0.2.2\",9),timeout=5); "
             "s.sendall(b\"x\"*100000); s.close()' && "
             /* From well-known ports (chargen's 19, echo's 7), no answer:
              * two such services would bounce a datagram forever. */
             "python3 -c 'import socket,sys\n"
             "for p in (19, 7):\n"
             "    s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.bind((\"192.0.2.1\",p))\n"
             "    s.settimeout(1); s.sendto(b\"ping-pong\",(\"192.0.2.2\",7))\n"
             "    try:\n"
             "        s.recv(100); sys.exit(1)\n"
             "    except socket.timeout:\n"
             "        pass' && "
             /* Fragments both ways: the kernel fragments the requests, the
              * stack reassembles them and fragments its replies, which the
              * kernel reassembles and compares. */
             "ping -c 3 -i 0.2 -W 2 -s 4000 -M dont 192.0.2.2 >&2 && "
             "ping -c 2 -i 0.2 -W 2 -s 65000 -M dont 192.0.2.2 >&2 && "
             "python3 -c 'import socket,os; s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); "
             "s.settimeout(5)\n"
             "for n in (1473, 8000, 30000, 65507):\n"
             "    d=os.urandom(n); s.sendto(d,(\"192.0.2.2\",7)); assert s.recv(70000)==d, n'",
             ZBUF_STACK_TEST_DIR, ZBUF_STACK_TEST_DIR);
    int st;
    pid_t pid = zt_spawn(cmd);
    uint64_t end = zt_mono_ms() + 120000;
    while (waitpid(pid, &st, WNOHANG) == 0 && zt_mono_ms() < end)
        usleep(10000);
    if (zt_mono_ms() >= end) {
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
    cr_assert(strstr(all, "retransmissions:") != NULL);
    cr_assert(strstr(all, "per payload byte: 0.000000") != NULL, "demo copied payload");
    const char *fr = strstr(all, "ip fragments: rx ");
    unsigned long long frx = 0, reasm = 0, fdrop = 0, ftx = 0;
    cr_assert(fr && sscanf(fr, "ip fragments: rx %llu (datagrams reassembled %llu, dropped %llu), "
                                "tx %llu", &frx, &reasm, &fdrop, &ftx) == 4);
    /* 3 + 2 pings and 4 UDP datagrams, each way; fragments of 1480 bytes */
    cr_assert_geq(reasm, 9, "kernel fragments reassembled: %llu", reasm);
    cr_assert_geq(ftx, 3 * 3 + 2 * 44 + 2 + 6 + 21 + 45, "replies fragmented: %llu", ftx);
    cr_assert_eq(fdrop, 0);
    cr_assert(strstr(all, "udp from well-known ports (not answered): 2") != NULL,
              "the demo answered (or never saw) datagrams from ports 19 and 7");
}

Test(interop, scapy_malformed_frames_from_the_kernel_side_do_no_harm)
{
    enter_namespace_or_skip();
    if (zt_sh("/usr/bin/python3 -c 'import scapy.all' 2>/dev/null") != 0)
        cr_skip_test("python3-scapy is not installed");
    zbuf_ip_netif_t *nif;
    zbuf_ip_stack_t *s = open_stack(&nif);
    struct echo e = {0};
    zbuf_ip_tcp_t *l = echo_listen(s, &e);
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 %s/interop_scapy.py " TAP " 02:7a:62:75:66:02 192.0.2.2 >&2",
             ZBUF_STACK_TEST_DIR);
    int rc = run_stack_until_exit(s, nif, zt_spawn(cmd), 120);
    zbuf_ip_stats_t st;
    zbuf_ip_stats(s, &st);
    fprintf(stderr, "stack: dropped %llu (bad eth %llu arp %llu ip %llu icmp %llu udp %llu tcp %llu, "
            "checksum %llu, fragments %llu), rst rx %llu, challenge acks %llu\n",
            (unsigned long long)st.rx_drops, (unsigned long long)st.bad_eth,
            (unsigned long long)st.bad_arp, (unsigned long long)st.bad_ip,
            (unsigned long long)st.bad_icmp, (unsigned long long)st.bad_udp,
            (unsigned long long)st.bad_tcp, (unsigned long long)st.bad_checksum,
            (unsigned long long)st.ip_frag_drops, (unsigned long long)st.tcp_rst_rx,
            (unsigned long long)st.tcp_challenge_acks);
    cr_assert_eq(rc, 0, "the stack stopped answering after the malformed frames");
    cr_assert_gt(st.rx_drops, 50);
    zbuf_ip_tcp_close(l);
    zbuf_delete(e.pending);
    zbuf_ip_stack_delete(s);
}

/* A kernel reader that does not read for two seconds: its window closes,
 * the stack probes it, and resumes when it opens. */
struct writer {
    zbuf_ip_tcp_t *pcb;
    const uint8_t *data;
    size_t total, off;
    int connected, errors;
};

static void writer_fill(struct writer *w)
{
    while (w->off < w->total) {
        size_t n = w->total - w->off < 65536 ? w->total - w->off : 65536;
        if (zbuf_ip_tcp_sndbuf(w->pcb) < n)
            return;
        zbuf_t *z;
        zbuf_create(&z);
        zbuf_append_buf(z, (void *)(w->data + w->off), n, NULL, NULL);
        cr_assert_eq(zbuf_ip_tcp_write(w->pcb, z), 0);
        w->off += n;
    }
    if (w->off == w->total) {
        zbuf_ip_tcp_close(w->pcb); /* FIN after the data; the stack finishes it */
        w->off++;
    }
}

static void writer_connected(void *arg, zbuf_ip_tcp_t *pcb)
{
    (void)pcb;
    struct writer *w = arg;
    w->connected++;
    writer_fill(w);
}

static void writer_sent(void *arg, zbuf_ip_tcp_t *pcb, size_t n)
{
    (void)pcb;
    (void)n;
    writer_fill(arg);
}

static void writer_error(void *arg, int err)
{
    (void)err;
    ((struct writer *)arg)->errors++;
}

Test(interop, slow_kernel_reader_closes_the_window_and_gets_probed)
{
    enter_namespace_or_skip();
    zbuf_ip_netif_t *nif;
    zbuf_ip_stack_t *s = open_stack(&nif);
    size_t n = 8u << 20;
    uint8_t *data = malloc(n);
    for (size_t i = 0; i < n; i++)
        data[i] = (uint8_t)(i % 251);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "python3 %s/interop_peer.py slow " KERNEL_IP " 5002 %zu >&2",
             ZBUF_STACK_TEST_DIR, n);
    pid_t pid = zt_spawn(cmd);
    zt_wait_listening(5002, 30);
    struct writer w = {.data = data, .total = n};
    cr_assert_eq(zbuf_ip_tcp_new(s, &w.pcb), 0);
    zbuf_ip_tcp_callbacks_t cb = {.connected = writer_connected, .sent = writer_sent,
                                  .error = writer_error};
    zbuf_ip_tcp_set_callbacks(w.pcb, &cb, &w);
    cr_assert_eq(zbuf_ip_tcp_connect(w.pcb, ZBUF_IP_ADDR(192, 0, 2, 1), 5002), 0);
    int rc = run_stack_until_exit(s, nif, pid, 120);
    zbuf_ip_stats_t st;
    zbuf_ip_stats(s, &st);
    fprintf(stderr, "stack: %llu window probes, %llu retransmits\n",
            (unsigned long long)st.tcp_window_probes, (unsigned long long)st.tcp_retransmits);
    cr_assert_eq(rc, 0, "the kernel reader saw a mismatch or timed out");
    cr_assert_eq(w.connected, 1);
    cr_assert_eq(w.errors, 0);
    cr_assert_geq(st.tcp_window_probes, 1, "the zero window was probed");
    zbuf_ip_stack_delete(s);
    free(data);
}
