/* SPDX-License-Identifier: MIT */
/*
 * bench_stack_packet: the zbuf stack over packet rings (a veth pair) against
 * the stack over TAP, bulk TCP to a Linux kernel peer, in anonymous network
 * namespaces this program makes (root).  One run, one markdown row:
 *
 *   bench_stack_packet --link packet|tap --bytes N [--dir send|recv]
 *
 * send: the stack connects to a kernel sink and sends N bytes from one
 * static buffer by reference; recv: the kernel sends N bytes to a stack
 * discard server.  Reported: MB/s (wall), MB per CPU-second of the stack's
 * process (user + system CPU time: the kernel's work on its behalf, TAP
 * reads and writes or ring kicks, is in it), bytes the library copied per
 * payload byte.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zbuf/ip_packet.h>

#include "bench_util.h"
#include "nsutil.h"

static struct zpt_ns ns;

/* The kernel peer, in namespace nsfd: sink (read until EOF) or source
 * (send N bytes to the stack's port 9, then close). */
static pid_t kernel_peer(int nsfd, bool sink, uint64_t n, int ready_fd)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    zpt_enter(nsfd);
    static char buf[1 << 18];
    if (sink) {
        int l = socket(AF_INET, SOCK_STREAM, 0);
        int one = 1;
        setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(5001),
                                .sin_addr.s_addr = htonl(0xc0000201)};
        if (bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 1))
            _exit(1);
        if (write(ready_fd, "r", 1) != 1)
            _exit(1);
        int c = accept(l, NULL, NULL);
        uint64_t got = 0;
        ssize_t r;
        while ((r = read(c, buf, sizeof buf)) > 0)
            got += (uint64_t)r;
        _exit(got == n ? 0 : 1);
    }
    if (write(ready_fd, "r", 1) != 1)
        _exit(1);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(9),
                            .sin_addr.s_addr = htonl(0xc0000202)};
    for (int i = 0; connect(s, (struct sockaddr *)&a, sizeof a) != 0; i++) {
        if (i > 100)
            _exit(1);
        close(s);
        s = socket(AF_INET, SOCK_STREAM, 0);
        usleep(50000);
    }
    memset(buf, 'k', sizeof buf);
    for (uint64_t left = n; left;) {
        ssize_t w = write(s, buf, left < sizeof buf ? left : sizeof buf);
        if (w <= 0)
            _exit(1);
        left -= (uint64_t)w;
    }
    close(s);
    _exit(0);
}

struct sender {
    zbuf_ip_sock_t *k;
    const uint8_t *data;
    size_t size, pos;
    uint64_t total, sent;
    bool closed;
};

static void sender_step(struct sender *x)
{
    if (x->closed || !(zbuf_ip_sock_events(x->k) & ZBUF_IP_SOCK_CONNECTED))
        return;
    while (x->sent < x->total && (zbuf_ip_sock_events(x->k) & ZBUF_IP_SOCK_WRITABLE)) {
        size_t n = x->size - x->pos;
        if (n > 65536)
            n = 65536;
        if (n > x->total - x->sent)
            n = (size_t)(x->total - x->sent);
        zbuf_t *z;
        zbuf_create(&z);
        zbuf_append_buf(z, (void *)(x->data + x->pos), n, NULL, NULL);
        if (zbuf_ip_sock_send(x->k, z) != 0) {
            zbuf_delete(z);
            break;
        }
        x->sent += n;
        x->pos = (x->pos + n) % x->size;
    }
    if (x->sent == x->total) {
        zbuf_ip_sock_close(x->k); /* the rest goes out, then a FIN */
        x->closed = true;
    }
}

int main(int argc, char **argv)
{
    const char *link = "packet", *dir = "send";
    uint64_t bytes = 256u << 20;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--link"))
            link = argv[i + 1];
        else if (!strcmp(argv[i], "--bytes"))
            bytes = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--dir"))
            dir = argv[i + 1];
    }
    const char *skip = zpt_pair_up(&ns);
    if (skip) {
        fprintf(stderr, "bench_stack_packet: %s\n", skip);
        return 77;
    }
    bool tap = !strcmp(link, "tap"), send = !strcmp(dir, "send");
    zbuf_ip_stack_t *s;
    zbuf_ip_netif_t *nif;
    int fd;
    if (zbuf_ip_stack_create(NULL, &s) != 0)
        return 1;
    zbuf_ip_netif_config_t nc = {.addr = 0xc0000202, .prefix_len = 24};
    int peer_ns;
    if (tap) {
        /* The kernel on the TAP's own side, in A; the veth is not used. */
        memcpy(nc.mac, (uint8_t[]){0x02, 0x7a, 0x62, 0x75, 0x66, 0x02}, 6);
        if (zbuf_ip_tap_open(s, "zbt0", &nc, 4096, &nif) != 0)
            return 1;
        fd = zbuf_ip_tap_fd(nif);
        if (zpt_sh(ns.a, "ip addr add 192.0.2.1/24 dev zbt0 && ip link set zbt0 up") != 0)
            return 1;
        peer_ns = ns.a;
    } else {
        zbuf_ip_packet_t *d;
        char why[256] = "";
        if (zbuf_ip_packet_open(s, "v0", &nc, NULL, &d, why, sizeof why) != 0) {
            fprintf(stderr, "bench_stack_packet: %s\n", why);
            return 1;
        }
        nif = zbuf_ip_packet_netif(d);
        fd = zbuf_ip_packet_fd(d);
        if (zpt_sh(ns.b, "ip addr add 192.0.2.1/24 dev v1") != 0)
            return 1;
        peer_ns = ns.b;
    }
    (void)nif;
    int rp[2];
    if (pipe(rp))
        return 1;
    static uint8_t data[1 << 20];
    memset(data, 'z', sizeof data);
    struct sender x = {.data = data, .size = sizeof data, .total = bytes};
    zbuf_ip_sock_t *listener = NULL, *conn = NULL;
    if (!send && zbuf_ip_sock_listen(s, 0, 9, 1, &listener) != 0)
        return 1;
    pid_t pid = kernel_peer(peer_ns, send, bytes, rp[1]);
    char c;
    if (read(rp[0], &c, 1) != 1)
        return 1;
    zbuf_stats_t z0, z1;
    zbuf_stats_get(&z0);
    double t0 = now_s(), c0 = cpu_s();
    if (send && zbuf_ip_sock_connect(s, 0xc0000201, 5001, &x.k) != 0)
        return 1;
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    uint64_t got = 0;
    int status = -1;
    bool eof = false;
    double limit = t0 + 300;
    while (now_s() < limit) {
        uint64_t dl = zbuf_ip_next_deadline(s), now = zbuf_ip_now(s);
        poll(&pfd, 1, dl <= now ? 0 : (dl - now > 5 ? 5 : (int)(dl - now)));
        zbuf_ip_poll(s);
        if (send) {
            sender_step(&x);
            if (waitpid(pid, &status, WNOHANG) == pid)
                break;
            continue;
        }
        if (conn == NULL)
            zbuf_ip_sock_accept(listener, &conn);
        zbuf_t *z;
        ssize_t n;
        while (conn && (n = zbuf_ip_sock_recv(conn, ZBUF_TO_END, &z)) > 0) {
            got += (uint64_t)n;
            zbuf_delete(z);
        }
        if (conn && !eof && got == bytes) {
            eof = true;
            zbuf_ip_sock_close(conn);
            conn = NULL;
        }
        if (eof && waitpid(pid, &status, WNOHANG) == pid)
            break;
    }
    double t1 = now_s(), c1 = cpu_s();
    zbuf_stats_get(&z1);
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    printf("| %s %s | %.0f | %.0f | %.3f | %s |\n", tap ? "tap" : "packet", dir,
           (double)bytes / (t1 - t0) / 1e6, (double)bytes / (c1 - c0) / 1e6,
           (double)(z1.bytes_copied - z0.bytes_copied) / (double)bytes, ok ? "ok" : "FAILED");
    zbuf_ip_sock_close(listener);
    zbuf_ip_sock_close(conn);
    zbuf_ip_stack_delete(s);
    return ok ? 0 : 1;
}
