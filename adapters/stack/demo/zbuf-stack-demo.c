/* SPDX-License-Identifier: MIT */
/*
 * zbuf-stack-demo: the zbuf TCP/IP stack on a Linux TAP interface.
 *
 *   zbuf-stack-demo --tap NAME --addr A.B.C.D/N [--gw A.B.C.D] [--mtu N]
 *                   [--bufs N] [--mac 02:xx:xx:xx:xx:xx]
 *   zbuf-stack-demo --packet IFNAME --addr A.B.C.D/N [...]
 *
 * --packet runs the stack on an existing interface (a veth, a NIC) through
 * packet rings (<zbuf/ip_packet.h>): its MTU and, without --mac, its address
 * are the interface's.  Give that interface no address in the kernel.
 *
 * Answers ICMP echo and serves the classic services on TCP and UDP: echo
 * (RFC 862, port 7), discard (RFC 863, port 9) and chargen (RFC 864, port
 * 19).  UDP datagrams from ports below 1024 get no answer (see on_udp()).  Runs until SIGINT or SIGTERM, then prints its statistics, among them
 * the bytes the library copied per payload byte (0 is the goal: echo sends
 * back the very buffers the TAP driver read into; chargen sends slices of
 * one static buffer by reference).
 *
 * The TAP interface is created if missing (needs CAP_NET_ADMIN); configure
 * the kernel side yourself, e.g.
 *   ip tuntap add dev zb0 mode tap && ip addr add 192.0.2.1/24 dev zb0 &&
 *   ip link set zb0 up
 *   zbuf-stack-demo --tap zb0 --addr 192.0.2.2/24 &
 *   ping 192.0.2.2; nc 192.0.2.2 7
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zbuf/ip.h>
#ifdef ZBUF_DEMO_PACKET
#include <zbuf/ip_packet.h>
#endif

enum service { ECHO = 7, DISCARD = 9, CHARGEN = 19 };

struct conn {
    zbuf_ip_tcp_t *pcb;
    enum service svc;
    zbuf_t *pending; /* echo: received bytes not yet taken by the send queue */
    bool eof;        /* the peer closed its direction */
};

static volatile sig_atomic_t stop;
static zbuf_t *chargen_text; /* the RFC 864 rotating lines, one static buffer */
static size_t chargen_len;
static uint64_t conns_total;
static uint64_t udp_refused; /* datagrams from well-known ports, not answered */

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static void conn_close(struct conn *c)
{
    zbuf_ip_tcp_close(c->pcb);
    zbuf_delete(c->pending);
    free(c);
}

/* Echo: move pending bytes into the send queue as far as it takes them. */
static void echo_flush(struct conn *c)
{
    while (c->pending && zbuf_length(c->pending) > 0) {
        size_t room = zbuf_ip_tcp_sndbuf(c->pcb);
        size_t len = zbuf_length(c->pending);
        if (room == 0)
            return;
        zbuf_t *part = c->pending;
        if (len > room) {
            if (zbuf_split_head(c->pending, room, &part) != 0)
                return;
            len = room;
        } else {
            c->pending = NULL;
        }
        if (zbuf_ip_tcp_write(c->pcb, part) != 0) {
            /* Put it back in front and wait for the next sent callback. */
            if (c->pending) {
                zbuf_insert(c->pending, 0, part, NULL);
            } else {
                c->pending = part;
            }
            return;
        }
        zbuf_ip_tcp_recved(c->pcb, len);
    }
    if (c->eof)
        conn_close(c);
}

static void chargen_fill(struct conn *c)
{
    static size_t pos;
    for (int i = 0; i < 64; i++) {
        size_t room = zbuf_ip_tcp_sndbuf(c->pcb);
        size_t n = chargen_len - pos % chargen_len;
        if (n > room)
            n = room;
        if (n == 0)
            return;
        zbuf_t *z;
        if (zbuf_dup(chargen_text, pos % chargen_len, n, &z) != 0)
            return;
        if (zbuf_ip_tcp_write(c->pcb, z) != 0) {
            zbuf_delete(z);
            return;
        }
        pos += n;
    }
}

static void on_recv(void *arg, zbuf_ip_tcp_t *pcb, zbuf_t *data)
{
    struct conn *c = arg;
    if (data == NULL) {
        c->eof = true;
        if (c->svc == ECHO && c->pending)
            echo_flush(c);
        else
            conn_close(c);
        return;
    }
    if (c->svc == ECHO) {
        if (c->pending)
            zbuf_append(c->pending, data);
        else
            c->pending = data;
        echo_flush(c);
        return;
    }
    zbuf_ip_tcp_recved(pcb, zbuf_length(data));
    zbuf_delete(data); /* discard, and whatever a chargen client sends */
}

static void on_sent(void *arg, zbuf_ip_tcp_t *pcb, size_t acked)
{
    (void)pcb;
    (void)acked;
    struct conn *c = arg;
    if (c->svc == ECHO)
        echo_flush(c);
    else if (c->svc == CHARGEN && !c->eof)
        chargen_fill(c);
}

static void on_error(void *arg, int err)
{
    struct conn *c = arg;
    (void)err;
    zbuf_delete(c->pending);
    free(c);
}

static int on_accept(void *arg, zbuf_ip_tcp_t *listener, zbuf_ip_tcp_t *pcb)
{
    (void)listener;
    struct conn *c = calloc(1, sizeof *c);
    if (c == NULL)
        return -ENOMEM;
    c->pcb = pcb;
    c->svc = (enum service)(intptr_t)arg;
    zbuf_ip_tcp_callbacks_t cb = {.recv = on_recv, .sent = on_sent, .error = on_error};
    zbuf_ip_tcp_set_callbacks(pcb, &cb, c);
    conns_total++;
    if (c->svc == CHARGEN)
        chargen_fill(c);
    return 0;
}

/* Ports below 1024 are the well-known services (and the privileged ports
 * of most systems): a datagram "from" one is never a client of ours.
 * Answering it would let two hosts running echo, chargen and the like
 * bounce a forged datagram between them forever (the UDP ping-pong of
 * CERT CA-1996-01), so it gets no answer. */
#define FIRST_CLIENT_PORT 1024

static void on_udp(void *arg, zbuf_ip_udp_t *u, zbuf_t *data, uint32_t src, uint16_t sport)
{
    enum service svc = (enum service)(intptr_t)arg;
    if (sport < FIRST_CLIENT_PORT) {
        udp_refused++;
        zbuf_delete(data);
        return;
    }
    if (svc == ECHO) {
        if (zbuf_ip_udp_sendto(u, data, src, sport) != 0)
            zbuf_delete(data);
        return;
    }
    zbuf_delete(data);
    if (svc == CHARGEN) {
        zbuf_t *z;
        if (zbuf_dup(chargen_text, 0, 512, &z) == 0 && zbuf_ip_udp_sendto(u, z, src, sport) != 0)
            zbuf_delete(z);
    }
}

static int parse_ip(const char *s, uint32_t *out, int *prefix)
{
    unsigned a, b, c, d, p = 32;
    int n = 0;
    if (prefix) {
        if (sscanf(s, "%u.%u.%u.%u/%u%n", &a, &b, &c, &d, &p, &n) != 5 || s[n] || p > 32)
            return -1;
        *prefix = (int)p;
    } else if (sscanf(s, "%u.%u.%u.%u%n", &a, &b, &c, &d, &n) != 4 || s[n]) {
        return -1;
    }
    if (a > 255 || b > 255 || c > 255 || d > 255)
        return -1;
    *out = ZBUF_IP_ADDR(a, b, c, d);
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: zbuf-stack-demo {--tap NAME | --packet IFNAME} --addr A.B.C.D/N "
                    "[--gw A.B.C.D] [--mtu N] [--bufs N] [--mac 02:xx:xx:xx:xx:xx]\n");
    exit(2);
}

/* The command line. */
struct opts {
    const char *tap, *packet;   /* one of the two */
    zbuf_ip_netif_config_t nc;
    int prefix;
    unsigned bufs;
};

static void parse_args(int argc, char **argv, struct opts *o)
{
    bool mac_given = false;
    for (int i = 1; i < argc; i += 2) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--tap") && v) {
            o->tap = v;
        } else if (!strcmp(argv[i], "--packet") && v) {
            o->packet = v;
        } else if (!strcmp(argv[i], "--addr") && v) {
            if (parse_ip(v, &o->nc.addr, &o->prefix))
                usage();
        } else if (!strcmp(argv[i], "--gw") && v) {
            if (parse_ip(v, &o->nc.gateway, NULL))
                usage();
        } else if (!strcmp(argv[i], "--mtu") && v) {
            o->nc.mtu = (uint16_t)atoi(v);
        } else if (!strcmp(argv[i], "--bufs") && v) {
            o->bufs = (unsigned)atoi(v);
        } else if (!strcmp(argv[i], "--mac") && v) {
            unsigned m[6];
            if (sscanf(v, "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]) != 6)
                usage();
            for (int k = 0; k < 6; k++)
                o->nc.mac[k] = (uint8_t)m[k];
            mac_given = true;
        } else {
            usage();
        }
    }
    if ((o->tap == NULL) == (o->packet == NULL) || o->prefix < 0)
        usage();
#ifndef ZBUF_DEMO_PACKET
    if (o->packet) {
        fprintf(stderr, "zbuf-stack-demo: built without packet rings (zbuf-stack-packet)\n");
        exit(2);
    }
#endif
    if (o->packet && !mac_given)
        memset(o->nc.mac, 0, sizeof o->nc.mac); /* the interface's own */
    o->nc.prefix_len = (uint8_t)o->prefix;
}

/* RFC 864 text: 95 lines of 72 printable characters, each starting one
 * further along the printable set.  Returns the buffer behind chargen_text. */
static char *chargen_init(void)
{
    chargen_len = 95 * 74;
    char *text = malloc(chargen_len);
    if (text == NULL)
        return NULL;
    for (int l = 0; l < 95; l++) {
        for (int k = 0; k < 72; k++)
            text[l * 74 + k] = (char)(' ' + (l + k) % 95);
        text[l * 74 + 72] = '\r';
        text[l * 74 + 73] = '\n';
    }
    if (zbuf_create(&chargen_text) != 0 ||
        zbuf_append_buf(chargen_text, text, chargen_len, NULL, NULL) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

/* The stack on the interface the options name; its descriptor in *fd. */
static zbuf_ip_stack_t *open_stack(struct opts *o, int *fd)
{
    zbuf_ip_stack_t *s;
    zbuf_ip_netif_t *nif;
    char why[256] = "";
    int rc = zbuf_ip_stack_create(NULL, &s);
#ifdef ZBUF_DEMO_PACKET
    if (rc == 0 && o->packet) {
        zbuf_ip_packet_t *drv;
        rc = zbuf_ip_packet_open(s, o->packet, &o->nc, NULL, &drv, why, sizeof why);
        if (rc == 0)
            *fd = zbuf_ip_packet_fd(drv);
    }
#endif
    if (rc == 0 && o->tap) {
        rc = zbuf_ip_tap_open(s, o->tap, &o->nc, o->bufs, &nif);
        *fd = rc == 0 ? zbuf_ip_tap_fd(nif) : -1;
    }
    if (rc) {
        fprintf(stderr, "zbuf-stack-demo: %s: %s%s%s\n", o->tap ? o->tap : o->packet,
                zbuf_strerror(rc), why[0] ? ": " : "", why);
        return NULL;
    }
    return s;
}

/* Echo, discard and chargen over TCP and UDP.  0, or -1 (said why). */
static int listen_services(zbuf_ip_stack_t *s)
{
    static const enum service svcs[] = {ECHO, DISCARD, CHARGEN};
    for (int i = 0; i < 3; i++) {
        zbuf_ip_tcp_t *l;
        zbuf_ip_udp_t *u;
        zbuf_ip_tcp_callbacks_t cb = {.accept = on_accept};
        if (zbuf_ip_tcp_new(s, &l) || zbuf_ip_tcp_bind(l, ZBUF_IP_ANY, (uint16_t)svcs[i]) ||
            zbuf_ip_tcp_listen(l, ZBUF_IP_TCP_BACKLOG_MAX) || zbuf_ip_udp_new(s, &u) ||
            zbuf_ip_udp_bind(u, ZBUF_IP_ANY, (uint16_t)svcs[i])) {
            fprintf(stderr, "zbuf-stack-demo: cannot listen on port %d\n", svcs[i]);
            return -1;
        }
        zbuf_ip_tcp_set_callbacks(l, &cb, (void *)(intptr_t)svcs[i]);
        zbuf_ip_udp_set_recv(u, on_udp, (void *)(intptr_t)svcs[i]);
    }
    return 0;
}

static void print_stats(const zbuf_ip_stack_t *s)
{
    zbuf_ip_stats_t st;
    zbuf_ip_stats(s, &st);
    zbuf_stats_t zs;
    zbuf_stats_get(&zs);
    uint64_t payload = st.tcp_rx_payload + st.tcp_tx_payload + st.udp_payload_rx + st.udp_payload_tx;
    printf("packets: rx %llu tx %llu (dropped %llu, bad checksum %llu)\n",
           (unsigned long long)st.rx_frames, (unsigned long long)st.tx_frames,
           (unsigned long long)st.rx_drops, (unsigned long long)st.bad_checksum);
    printf("bytes: rx %llu tx %llu; payload tcp rx %llu tx %llu, udp rx %llu tx %llu\n",
           (unsigned long long)st.rx_bytes, (unsigned long long)st.tx_bytes,
           (unsigned long long)st.tcp_rx_payload, (unsigned long long)st.tcp_tx_payload,
           (unsigned long long)st.udp_payload_rx, (unsigned long long)st.udp_payload_tx);
    printf("icmp echo: %llu requests, %llu replies; tcp connections accepted: %llu\n",
           (unsigned long long)st.icmp_echo_rx, (unsigned long long)st.icmp_echo_tx,
           (unsigned long long)conns_total);
    printf("udp from well-known ports (not answered): %llu\n", (unsigned long long)udp_refused);
    printf("hardening: bad sources %llu, syn cookies %llu sent %llu used, "
           "collapsed %llu bytes, pool drops %llu, challenge acks %llu (limited %llu)\n",
           (unsigned long long)st.ip_bad_source, (unsigned long long)st.tcp_syncookies_sent,
           (unsigned long long)st.tcp_syncookies_ok, (unsigned long long)st.rx_collapsed_bytes,
           (unsigned long long)st.rx_no_buffer, (unsigned long long)st.tcp_challenge_acks,
           (unsigned long long)st.tcp_challenge_acks_limited);
    printf("ip fragments: rx %llu (datagrams reassembled %llu, dropped %llu), tx %llu\n",
           (unsigned long long)st.ip_frags_rx, (unsigned long long)st.ip_reassembled,
           (unsigned long long)st.ip_frag_drops, (unsigned long long)st.ip_frags_tx);
    printf("retransmissions: %llu (timeouts %llu, fast %llu)\n",
           (unsigned long long)st.tcp_retransmits, (unsigned long long)st.tcp_rto,
           (unsigned long long)st.tcp_fast_retransmits);
    printf("bytes copied by the library: %llu, per payload byte: %.6f\n",
           (unsigned long long)zs.bytes_copied,
           payload ? (double)zs.bytes_copied / (double)payload : 0.0);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    struct opts o = {.nc = {.mac = {0x02, 0x7a, 0x62, 0x75, 0x66, 0x01}}, .prefix = -1,
                     .bufs = 4096};
    parse_args(argc, argv, &o);
    char *text = chargen_init();
    if (text == NULL)
        return 1;
    int fd = -1;
    zbuf_ip_stack_t *s = open_stack(&o, &fd);
    if (s == NULL || listen_services(s) != 0)
        return 1;

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal; /* no SA_RESTART: poll() returns EINTR */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    uint32_t a = o.nc.addr;
    printf("zbuf-stack-demo: %s %u.%u.%u.%u/%d ready (echo 7, discard 9, chargen 19)\n",
           o.tap ? o.tap : o.packet, a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255, o.prefix);
    fflush(stdout);

    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    while (!stop) {
        uint64_t d = zbuf_ip_next_deadline(s), now = zbuf_ip_now(s);
        int timeout = d == ZBUF_IP_NEVER ? 1000 : d <= now ? 0 : (int)(d - now > 1000 ? 1000 : d - now);
        poll(&pfd, 1, timeout);
        zbuf_ip_poll(s);
    }
    print_stats(s);
    zbuf_ip_stack_delete(s);
    zbuf_delete(chargen_text);
    free(text);
    return 0;
}
