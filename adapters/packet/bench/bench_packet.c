/* SPDX-License-Identifier: MIT */
/*
 * bench_packet: packet rings against ordinary packet-socket calls, on a
 * veth pair between two anonymous network namespaces this program makes
 * (root).  One measurement per run, one markdown row on stdout; the
 * script scripts/bench-packet.sh interleaves runs and takes medians.
 *
 *   bench_packet tx  --mode ring|send|sendmmsg --size BYTES --frames N
 *       frames per second and CPU per frame of the sender (user + system,
 *       getrusage: the veth delivery runs in the sender's context too)
 *   bench_packet rx  --mode ring2|ring3|recvmmsg|recvmmsg-big --frames N
 *       a TX ring in the other namespace sends N 64-byte frames flat out;
 *       frames received, lost, and the receiver's CPU per frame received
 *   bench_packet lat --mode recvfrom|ring2|ring3 --rounds N [--tov MS]
 *       64-byte ping-pong between the namespaces: round trip p50 and p99
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zbuf/packet.h>

#include "bench_common.h"
#include "nsutil.h"

#define ETYPE 0x88b5

static struct zpt_ns ns;

static void build_frame(uint8_t *f, size_t len, const uint8_t *dst, const uint8_t *src)
{
    memset(f, 0x5a, len);
    memcpy(f, dst, 6);
    memcpy(f + 6, src, 6);
    f[12] = ETYPE >> 8;
    f[13] = ETYPE & 0xff;
}

static zbuf_packet_t *open_ring(const char *ifname, unsigned version, bool rx, bool tx,
                                uint32_t rx_frames, uint32_t tov)
{
    zbuf_packet_config_t c;
    zbuf_packet_config_init(&c);
    c.version = version;
    c.rx_ring = rx;
    c.tx_ring = tx;
    c.protocol = ETYPE;
    c.frame_size = 2048;
    c.tx_frames = 1024;
    c.rx_frames = rx_frames;
    c.block_timeout_ms = version == ZBUF_PACKET_V3 ? tov : 0;
    if (version == ZBUF_PACKET_V3)
        c.block_size = 1u << 20;
    c.sndbuf = 4 << 20;
    zbuf_packet_t *p;
    char why[256] = "";
    int rc = zbuf_packet_open(ifname, &c, &p, why, sizeof why);
    if (rc) {
        fprintf(stderr, "bench_packet: open %s: %s\n", ifname, why);
        exit(1);
    }
    return p;
}

/* Frames the interface in namespace nsfd has received (from /proc). */
static uint64_t rx_packets(int nsfd, const char *ifname)
{
    int here = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    zpt_enter(nsfd);
    FILE *f = fopen("/proc/thread-self/net/dev", "r");
    zpt_enter(here);
    close(here);
    uint64_t v = 0;
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        char *c = strchr(line, ':');
        if (!c)
            continue;
        *c = 0;
        char *name = line;
        while (*name == ' ')
            name++;
        if (strcmp(name, ifname) == 0)
            sscanf(c + 1, "%*s %" SCNu64, &v);
    }
    if (f)
        fclose(f);
    return v;
}

/* -------------------------------------------------------------------- tx */

static void bench_tx(const char *mode, size_t size, uint64_t frames)
{
    uint8_t *f = malloc(size);
    build_frame(f, size, ns.mac1, ns.mac0);
    uint64_t before = rx_packets(ns.b, "v1");
    double t0 = 0, c0 = 0, t1, c1;
    if (strcmp(mode, "ring") == 0) {
        zbuf_packet_t *p = open_ring("v0", ZBUF_PACKET_V2, false, true, 0, 0);
        zbuf_t *master;
        zbuf_create(&master);
        zbuf_append_buf(master, f, size, NULL, NULL);
        zbuf_t *batch[32];
        t0 = bench_now_s();
        c0 = bench_cpu_s();
        for (uint64_t sent = 0; sent < frames;) {
            unsigned n = frames - sent < 32 ? (unsigned)(frames - sent) : 32;
            for (unsigned i = 0; i < n; i++)
                zbuf_dup(master, 0, ZBUF_TO_END, &batch[i]);
            unsigned k = 0;
            while (k < n) {
                int r = zbuf_packet_send_batch(p, batch + k, n - k);
                if (r > 0)
                    k += (unsigned)r;
                else if (r == -EAGAIN || r == 0)
                    zbuf_packet_flush(p);
                else
                    bench_die("send_batch", r);
            }
            sent += n;
        }
        while (zbuf_packet_tx_pending(p))
            zbuf_packet_flush(p);
        t1 = bench_now_s();
        c1 = bench_cpu_s();
        zbuf_delete(master);
        zbuf_packet_close(p, 1000);
    } else {
        int s = zpt_raw_socket(ns.a, "v0", ETYPE);
        int fl = fcntl(s, F_GETFL);
        fcntl(s, F_SETFL, fl & ~O_NONBLOCK);
        int sz = 4 << 20;
        setsockopt(s, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof sz);
        t0 = bench_now_s();
        c0 = bench_cpu_s();
        if (strcmp(mode, "send") == 0) {
            for (uint64_t i = 0; i < frames; i++)
                while (send(s, f, size, 0) < 0)
                    if (errno != ENOBUFS && errno != EAGAIN && errno != EINTR)
                        bench_die("send", errno);
        } else {
            struct mmsghdr m[32];
            struct iovec iov[32];
            memset(m, 0, sizeof m);
            for (int i = 0; i < 32; i++) {
                iov[i].iov_base = f;
                iov[i].iov_len = size;
                m[i].msg_hdr.msg_iov = &iov[i];
                m[i].msg_hdr.msg_iovlen = 1;
            }
            for (uint64_t sent = 0; sent < frames;) {
                unsigned n = frames - sent < 32 ? (unsigned)(frames - sent) : 32;
                int r = sendmmsg(s, m, n, 0);
                if (r > 0)
                    sent += (unsigned)r;
                else if (errno != ENOBUFS && errno != EAGAIN && errno != EINTR)
                    bench_die("sendmmsg", errno);
            }
        }
        t1 = bench_now_s();
        c1 = bench_cpu_s();
        close(s);
    }
    usleep(100 * 1000);
    uint64_t got = rx_packets(ns.b, "v1") - before;
    printf("| tx | %s | %zu | %.0f | %.1f | %" PRIu64 " | %" PRIu64 " |\n", mode, size,
           (double)frames / (t1 - t0), (c1 - c0) * 1e9 / (double)frames, frames, got);
    free(f);
}

/* -------------------------------------------------------------------- rx */

static void bench_rx(const char *mode, uint64_t frames)
{
    int go[2], res[2];
    if (pipe(go) || pipe(res))
        bench_die("pipe", errno);
    /* The receiver is ready before the sender starts. */
    zbuf_packet_t *p = NULL;
    int s = -1;
    uint32_t ring_frames = 4096;
    if (strcmp(mode, "ring2") == 0)
        p = open_ring("v0", ZBUF_PACKET_V2, true, false, ring_frames, 0);
    else if (strcmp(mode, "ring3") == 0)
        p = open_ring("v0", ZBUF_PACKET_V3, true, false, ring_frames, 1);
    else {
        s = zpt_raw_socket(ns.a, "v0", ETYPE);
        if (strcmp(mode, "recvmmsg-big") == 0) {
            int sz = (int)(ring_frames * 2048); /* the ring's memory */
            setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof sz);
        }
    }
    pid_t pid = fork();
    if (pid == 0) { /* the sender, in B: a TX ring flat out */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        zpt_enter(ns.b);
        zbuf_packet_t *t = open_ring("v1", ZBUF_PACKET_V2, false, true, 0, 0);
        uint8_t f[64];
        build_frame(f, sizeof f, ns.mac0, ns.mac1);
        zbuf_t *master;
        zbuf_create(&master);
        zbuf_append_buf(master, f, sizeof f, NULL, NULL);
        char c;
        if (read(go[0], &c, 1) != 1)
            _exit(1);
        double t0 = bench_now_s();
        zbuf_t *batch[64];
        for (uint64_t sent = 0; sent < frames;) {
            unsigned n = frames - sent < 64 ? (unsigned)(frames - sent) : 64;
            for (unsigned i = 0; i < n; i++)
                zbuf_dup(master, 0, ZBUF_TO_END, &batch[i]);
            unsigned k = 0;
            while (k < n) {
                int r = zbuf_packet_send_batch(t, batch + k, n - k);
                if (r > 0)
                    k += (unsigned)r;
                else
                    zbuf_packet_flush(t);
            }
            sent += n;
        }
        while (zbuf_packet_tx_pending(t))
            zbuf_packet_flush(t);
        double rate = (double)frames / (bench_now_s() - t0);
        if (write(res[1], &rate, sizeof rate) != sizeof rate)
            _exit(1);
        zbuf_packet_close(t, 1000);
        _exit(0);
    }
    usleep(200 * 1000);
    double c0 = bench_cpu_s();
    if (write(go[1], "x", 1) != 1)
        bench_die("pipe", errno);
    uint64_t got = 0;
    double rate = 0;
    bool sender_done = false;
    struct pollfd pf[2] = {{.fd = p ? zbuf_packet_fd(p) : s, .events = POLLIN},
                           {.fd = res[0], .events = POLLIN}};
    for (;;) {
        int pr = poll(pf, 2, sender_done ? 300 : 2000);
        if (pf[1].revents & POLLIN) {
            if (read(res[0], &rate, sizeof rate) == sizeof rate)
                sender_done = true;
            pf[1].fd = -1;
        }
        int n = 0;
        if (p) {
            zbuf_t *fr[64];
            while ((n = zbuf_packet_recv(p, fr, NULL, 64)) > 0) {
                for (int i = 0; i < n; i++)
                    zbuf_delete(fr[i]);
                got += (uint64_t)n;
            }
        } else {
            static uint8_t bufs[64][128];
            struct mmsghdr m[64];
            struct iovec iov[64];
            memset(m, 0, sizeof m);
            for (int i = 0; i < 64; i++) {
                iov[i].iov_base = bufs[i];
                iov[i].iov_len = sizeof bufs[i];
                m[i].msg_hdr.msg_iov = &iov[i];
                m[i].msg_hdr.msg_iovlen = 1;
            }
            while ((n = recvmmsg(s, m, 64, MSG_DONTWAIT, NULL)) > 0)
                got += (uint64_t)n;
        }
        if (pr == 0 && sender_done)
            break;
    }
    double c1 = bench_cpu_s();
    waitpid(pid, NULL, 0);
    zbuf_packet_stats_t st = {0};
    if (p) {
        zbuf_packet_stats(p, &st);
        zbuf_packet_close(p, 0);
    } else {
        close(s);
    }
    printf("| rx | %s | %" PRIu64 " | %" PRIu64 " | %.2f | %.1f | %.0f |\n", mode, frames, got,
           100.0 * (double)(frames - (got > frames ? frames : got)) / (double)frames,
           got ? (c1 - c0) * 1e9 / (double)got : 0.0, rate);
}

/* ------------------------------------------------------------------- lat */

struct side {
    zbuf_packet_t *p;
    int s;
};

static void side_send(struct side *x, uint8_t *f)
{
    if (x->p) {
        zbuf_t *z;
        zbuf_create(&z);
        zbuf_append_copy(z, f, 64);
        int rc;
        while ((rc = zbuf_packet_send(x->p, z, 0)) == -EAGAIN)
            zbuf_packet_flush(x->p);
        if (rc)
            bench_die("send", rc);
    } else if (send(x->s, f, 64, 0) != 64) {
        bench_die("send", errno);
    }
}

/* Wait for one frame; its bytes into f.  False on timeout. */
static bool side_recv(struct side *x, uint8_t *f, int timeout_ms)
{
    if (x->p) {
        struct pollfd pf = {.fd = zbuf_packet_fd(x->p), .events = POLLIN};
        for (;;) {
            zbuf_t *z;
            int n = zbuf_packet_recv(x->p, &z, NULL, 1);
            if (n == 1) {
                zbuf_copyout(z, 0, f, 64);
                zbuf_delete(z);
                return true;
            }
            if (poll(&pf, 1, timeout_ms) == 0)
                return false;
        }
    }
    struct pollfd pf = {.fd = x->s, .events = POLLIN};
    if (poll(&pf, 1, timeout_ms) <= 0)
        return false;
    return recv(x->s, f, 64, 0) > 0;
}

static struct side side_open(const char *mode, const char *ifname, int nsfd, uint32_t tov)
{
    struct side x = {NULL, -1};
    if (strcmp(mode, "recvfrom") == 0) {
        x.s = zpt_raw_socket(nsfd, ifname, ETYPE);
        int fl = fcntl(x.s, F_GETFL);
        fcntl(x.s, F_SETFL, fl & ~O_NONBLOCK);
    } else {
        bool v3 = strcmp(mode, "ring3") == 0;
        x.p = open_ring(ifname, v3 ? ZBUF_PACKET_V3 : ZBUF_PACKET_V2, true, true, v3 ? 2048 : 256,
                        tov);
    }
    return x;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void bench_lat(const char *mode, unsigned rounds, uint32_t tov)
{
    pid_t pid = fork();
    if (pid == 0) { /* the echo side, in B */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        zpt_enter(ns.b);
        struct side e = side_open(mode, "v1", ns.b, tov);
        uint8_t f[64];
        while (side_recv(&e, f, 5000)) {
            memcpy(f, ns.mac0, 6);
            memcpy(f + 6, ns.mac1, 6);
            side_send(&e, f);
        }
        _exit(0);
    }
    struct side c = side_open(mode, "v0", ns.a, tov);
    usleep(300 * 1000);
    double *rtt = calloc(rounds, sizeof *rtt);
    uint8_t f[64];
    build_frame(f, sizeof f, ns.mac1, ns.mac0);
    unsigned warm = rounds / 10 + 5, done = 0;
    for (unsigned i = 0; i < rounds + warm; i++) {
        memcpy(f + 14, &i, 4);
        double t0 = bench_now_s();
        side_send(&c, f);
        uint8_t g[64];
        if (!side_recv(&c, g, 2000)) {
            fprintf(stderr, "bench_packet: lat: no reply to %u\n", i);
            break;
        }
        if (i >= warm)
            rtt[done++] = (bench_now_s() - t0) * 1e6;
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    qsort(rtt, done, sizeof *rtt, cmp_double);
    char name[32];
    snprintf(name, sizeof name, "%s%s", mode, strcmp(mode, "ring3") == 0 ? "" : "");
    printf("| lat | %s | %u | %.1f | %.1f | %u |\n", name, tov, done ? rtt[done / 2] : 0,
           done ? rtt[done * 99 / 100] : 0, done);
    free(rtt);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_packet tx|rx|lat --mode M [--size B] [--frames N] "
                        "[--rounds N] [--tov MS]\n");
        return 2;
    }
    const char *mode = "ring";
    size_t size = 64;
    uint64_t frames = 1000000;
    unsigned rounds = 20000;
    uint32_t tov = 0;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--mode"))
            mode = argv[i + 1];
        else if (!strcmp(argv[i], "--size"))
            size = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--frames"))
            frames = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--rounds"))
            rounds = (unsigned)strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--tov"))
            tov = (uint32_t)strtoul(argv[i + 1], NULL, 10);
    }
    const char *skip = zpt_pair_up(&ns);
    if (skip) {
        fprintf(stderr, "bench_packet: %s\n", skip);
        return 77;
    }
    if (!strcmp(argv[1], "tx"))
        bench_tx(mode, size, frames);
    else if (!strcmp(argv[1], "rx"))
        bench_rx(mode, frames);
    else if (!strcmp(argv[1], "lat"))
        bench_lat(mode, rounds, tov);
    else
        return 2;
    fflush(stdout);
    return 0;
}
