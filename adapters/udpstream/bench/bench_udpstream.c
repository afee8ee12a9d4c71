/* SPDX-License-Identifier: MIT */
/* zbuf-udpstream (zero-copy, copying, adaptive modes) and kernel TCP with
 * TCP_NODELAY, in the scenarios of bench_common.h; the stream modes also
 * over the bundled stack's UDP (two stacks joined by the in-memory link),
 * where no kernel copies the payload. */
#include <fcntl.h>
#include <netinet/tcp.h>
#include <zbuf/udpstream.h>
#ifdef BENCH_WITH_STACK
#include <zbuf/ip.h>
#endif

#include "bench_common.h"

/* -------------------------------------------------------------- udpstream */

/* A pair of streams (client, server) on two sockets; two may be open at
 * once (bench_slot), for the side-by-side runs. */
struct us_inst {
    zbuf_udpstream_t *cli, *srv;
    int cfd, sfd;
    zbuf_buf_t *msgbuf;
    zbuf_udpstream_mode_t mode;
    bool nocc, nogro;
#ifdef BENCH_WITH_STACK
    /* Over the bundled stack: the client on stack a, the server on b. */
    zbuf_ip_stack_t *sa, *sb;
    zbuf_ip_link_t *link;
#endif
};
static struct us_inst us_insts[2];
#define U (&us_insts[bench_slot])

static void die(const char *what, int rc)
{
    fprintf(stderr, "%s: %s\n", what, zbuf_strerror(rc));
    exit(1);
}

static void us_opts(zbuf_udpstream_opts_t *o)
{
    zbuf_udpstream_opts_init(o);
    o->mode = U->mode;
    o->no_congestion_control = U->nocc;
    o->sndbuf = 64u << 20;
    o->cork = getenv("BENCH_CORK") != NULL;
    const char *gro = getenv("BENCH_GRO"); /* 0: receive without UDP GRO */
    o->no_gro = U->nogro || (gro != NULL && strcmp(gro, "0") == 0);
    const char *mtu = getenv("BENCH_MTU"); /* loopback carries up to 65535 */
    if (mtu != NULL)
        o->mtu = (uint32_t)atoi(mtu);
}

static void us_pair(const struct sockaddr_in *via)
{
    zbuf_udpstream_opts_t o;
    us_opts(&o);
    int rc = zbuf_udpstream_connect_fd(U->cfd, (const struct sockaddr *)via, sizeof *via, &o, &U->cli);
    if (rc < 0)
        die("connect", rc);
}

/* The two sockets and the listening stream; the server's address in @sa. */
static void us_server(struct sockaddr_in *sa)
{
    struct sockaddr_in ca;
    U->sfd = bench_udp(sa);
    U->cfd = bench_udp(&ca);
    zbuf_udpstream_opts_t o;
    us_opts(&o);
    int rc = zbuf_udpstream_listen_fd(U->sfd, &o, &U->srv);
    if (rc < 0)
        die("listen", rc);
}

/* Run one end: its stack first (over the bundled stack), then the stream. */
static void us_drive(bool server)
{
#ifdef BENCH_WITH_STACK
    zbuf_ip_stack_t *st = server ? U->sb : U->sa;
    if (st != NULL)
        zbuf_ip_poll(st);
#endif
    zbuf_udpstream_process(server ? U->srv : U->cli);
}

/* The message buffer, then both ends driven until connected. */
static void us_pp_ready(size_t max)
{
    int rc = zbuf_buf_alloc(max, &U->msgbuf);
    if (rc < 0)
        die("alloc", rc);
    memset(zbuf_buf_data(U->msgbuf), 0x42, max);
    while (!(zbuf_udpstream_events(U->srv) & ZBUF_UDPSTREAM_CONNECTED)) {
        us_drive(false);
        us_drive(true);
    }
}

static void us_pp_open(size_t max)
{
    struct sockaddr_in sa;
    us_server(&sa);
    us_pair(&sa);
    us_pp_ready(max);
}

#ifdef BENCH_WITH_STACK
/* Two stacks (192.0.2.1 and .2, MTU 1500) joined by the in-memory link.
 * By default the link hands the receiving stack the very frames sent, as
 * a NIC's DMA engine would put them in memory without the CPU: nothing is
 * copied on the way.  BENCH_IP_DMA=1 makes the CPU do that DMA (a copy
 * into a receive pool per frame, charged to both modes alike);
 * BENCH_IP_OFFLOAD=1 gives both interfaces checksum offload (otherwise
 * the stacks checksum every datagram in software). */
static void us_ip_open(size_t max)
{
    const char *dma = getenv("BENCH_IP_DMA"), *off = getenv("BENCH_IP_OFFLOAD");
    zbuf_ip_link_config_t lc = {.copy_to_pool = dma != NULL && strcmp(dma, "1") == 0,
                                .pool_bufs = 4096,
                                .csum_offload = off != NULL && strcmp(off, "1") == 0};
    zbuf_ip_netif_config_t na = {.mac = {2, 0, 0, 0, 0, 1}, .addr = ZBUF_IP_ADDR(192, 0, 2, 1),
                                 .prefix_len = 24};
    zbuf_ip_netif_config_t nb = {.mac = {2, 0, 0, 0, 0, 2}, .addr = ZBUF_IP_ADDR(192, 0, 2, 2),
                                 .prefix_len = 24};
    const char *mtu = getenv("BENCH_MTU"); /* also the interfaces' MTU */
    if (mtu != NULL)
        na.mtu = nb.mtu = (uint16_t)atoi(mtu);
    int rc;
    if ((rc = zbuf_ip_stack_create(NULL, &U->sa)) < 0 ||
        (rc = zbuf_ip_stack_create(NULL, &U->sb)) < 0 ||
        (rc = zbuf_ip_link_create(&lc, &U->link)) < 0 ||
        (rc = zbuf_ip_link_attach(U->link, 0, U->sa, &na, NULL)) < 0 ||
        (rc = zbuf_ip_link_attach(U->link, 1, U->sb, &nb, NULL)) < 0)
        die("stack", rc);
    zbuf_udpstream_opts_t o;
    us_opts(&o);
    if ((rc = zbuf_udpstream_open_ip(U->sb, nb.addr, 5000, 0, 0, &o, &U->srv)) < 0 ||
        (rc = zbuf_udpstream_open_ip(U->sa, na.addr, 0, nb.addr, 5000, &o, &U->cli)) < 0)
        die("open_ip", rc);
    us_pp_ready(max);
}
#endif

static void us_pp_round(size_t size)
{
    zbuf_t *z;
    if (zbuf_create(&z) < 0 || zbuf_append_ref(z, U->msgbuf, 0, size) < 0)
        die("zbuf", -ENOMEM);
    int rc = zbuf_udpstream_write(U->cli, z);
    if (rc < 0)
        die("write", rc);
    size_t echoed = 0, back = 0;
    while (back < size) {
        us_drive(true);
        ssize_t n;
        while (echoed < size && (n = zbuf_udpstream_read(U->srv, 1, size - echoed, &z)) > 0) {
            echoed += (size_t)n;
            if ((rc = zbuf_udpstream_write(U->srv, z)) < 0) /* the echo: the same bytes */
                die("echo", rc);
        }
        us_drive(false);
        while (back < size && (n = zbuf_udpstream_read(U->cli, 1, size - back, &z)) > 0) {
            back += (size_t)n;
            zbuf_delete(z);
        }
        if (zbuf_udpstream_error(U->cli) || zbuf_udpstream_error(U->srv))
            die("stream", zbuf_udpstream_error(U->cli) ? zbuf_udpstream_error(U->cli)
                                                    : zbuf_udpstream_error(U->srv));
    }
}

/* Streaming: the client writes while the stream takes more (its queue
 * kept near 1 MiB), the server reads whatever is there. */
static uint64_t us_st_step(size_t size)
{
    for (int i = 0; i < 64; i++) {
        zbuf_udpstream_stats_t st;
        zbuf_udpstream_get_stats(U->cli, &st);
        if (st.bytes_written - st.bytes_acked > (1u << 20))
            break;
        zbuf_t *z;
        if (zbuf_create(&z) < 0 || zbuf_append_ref(z, U->msgbuf, 0, size) < 0)
            die("zbuf", -ENOMEM);
        int rc = zbuf_udpstream_write(U->cli, z);
        if (rc < 0) {
            zbuf_delete(z);
            break;
        }
    }
    us_drive(true);
    uint64_t got = 0;
    zbuf_t *z;
    ssize_t n;
    while ((n = zbuf_udpstream_read(U->srv, 1, SIZE_MAX, &z)) > 0) {
        got += (uint64_t)n;
        zbuf_delete(z);
    }
    us_drive(false);
    return got;
}

static double us_copied(void)
{
    zbuf_udpstream_stats_t a, b;
    zbuf_udpstream_get_stats(U->cli, &a);
    zbuf_udpstream_get_stats(U->srv, &b);
    return (double)(a.bytes_copied + b.bytes_copied);
}

static void us_close(void)
{
    if (getenv("BENCH_STATS")) {
        zbuf_udpstream_stats_t a, b;
        zbuf_udpstream_get_stats(U->cli, &a);
        zbuf_udpstream_get_stats(U->srv, &b);
        fprintf(stderr, "cli: tx %llu rx %llu data %llu retx %llu fast %llu to %llu acks %llu srtt %u cwnd %u nobuf %llu oow %llu\n",
                (unsigned long long)a.dgrams_tx, (unsigned long long)a.dgrams_rx, (unsigned long long)a.data_tx, (unsigned long long)a.retransmits, (unsigned long long)a.fast_retransmits, (unsigned long long)a.timeouts, (unsigned long long)a.acks_tx, a.srtt_us, a.cwnd, (unsigned long long)a.no_buffer, (unsigned long long)a.out_of_window);
        fprintf(stderr, "srv: tx %llu rx %llu data %llu retx %llu fast %llu to %llu acks %llu srtt %u cwnd %u nobuf %llu oow %llu\n",
                (unsigned long long)b.dgrams_tx, (unsigned long long)b.dgrams_rx, (unsigned long long)b.data_tx, (unsigned long long)b.retransmits, (unsigned long long)b.fast_retransmits, (unsigned long long)b.timeouts, (unsigned long long)b.acks_tx, b.srtt_us, b.cwnd, (unsigned long long)b.no_buffer, (unsigned long long)b.out_of_window);
    }
    zbuf_udpstream_delete(U->cli);
    zbuf_udpstream_delete(U->srv);
    zbuf_buf_unref(U->msgbuf);
    U->msgbuf = NULL;
#ifdef BENCH_WITH_STACK
    if (U->sa != NULL) {
        zbuf_ip_link_delete(U->link);
        zbuf_ip_stack_delete(U->sa);
        zbuf_ip_stack_delete(U->sb);
        return;
    }
#endif
    close(U->cfd);
    close(U->sfd);
}

static void us_loss_open(struct sockaddr_in *server)
{
    us_server(server);
}

static void us_loss_send(const uint8_t *msg)
{
    ssize_t rc = zbuf_udpstream_write_copy(U->cli, msg, LOSS_PAYLOAD);
    if (rc < 0)
        die("write", (int)rc);
}

static void us_loss_poll(int64_t wait_us, void (*echoed)(const uint8_t *))
{
    struct pollfd pf[2] = {{.fd = U->cfd, .events = POLLIN}, {.fd = U->sfd, .events = POLLIN}};
    int ms = (int)(wait_us / 1000);
    int t = zbuf_udpstream_timeout(U->cli), u = zbuf_udpstream_timeout(U->srv);
    if (t >= 0 && t < ms)
        ms = t;
    if (u >= 0 && u < ms)
        ms = u;
    poll(pf, 2, ms);
    zbuf_udpstream_process(U->srv);
    zbuf_udpstream_process(U->cli);
    uint8_t m[LOSS_PAYLOAD];
    while (zbuf_udpstream_readable(U->srv) >= LOSS_PAYLOAD) {
        zbuf_udpstream_read_copy(U->srv, m, LOSS_PAYLOAD);
        zbuf_udpstream_write_copy(U->srv, m, LOSS_PAYLOAD);
    }
    while (zbuf_udpstream_readable(U->cli) >= LOSS_PAYLOAD) {
        zbuf_udpstream_read_copy(U->cli, m, LOSS_PAYLOAD);
        echoed(m);
    }
}

#define US_IMPL(nm, m_, nocc_, nogro_)                                                      \
    static void us_pp_open_##nm(size_t max)                                                 \
    {                                                                                       \
        *U = (struct us_inst){.mode = m_, .nocc = nocc_, .nogro = nogro_};                  \
        us_pp_open(max);                                                                    \
    }                                                                                       \
    static void us_loss_open_##nm(struct sockaddr_in *s)                                    \
    {                                                                                       \
        *U = (struct us_inst){.mode = m_, .nocc = nocc_, .nogro = nogro_};                  \
        us_loss_open(s);                                                                    \
    }
US_IMPL(zc, ZBUF_UDPSTREAM_ZEROCOPY, false, false)
US_IMPL(copy, ZBUF_UDPSTREAM_COPY, false, false)
US_IMPL(auto, ZBUF_UDPSTREAM_AUTO, false, false)
US_IMPL(nocc, ZBUF_UDPSTREAM_AUTO, true, false)
US_IMPL(zc_nogro, ZBUF_UDPSTREAM_ZEROCOPY, false, true)
US_IMPL(copy_nogro, ZBUF_UDPSTREAM_COPY, false, true)
US_IMPL(auto_nogro, ZBUF_UDPSTREAM_AUTO, false, true)

#ifdef BENCH_WITH_STACK
#define US_IP_IMPL(nm, m_)                                                                  \
    static void us_ip_open_##nm(size_t max)                                                 \
    {                                                                                       \
        *U = (struct us_inst){.mode = m_};                                                  \
        us_ip_open(max);                                                                    \
    }
US_IP_IMPL(zc, ZBUF_UDPSTREAM_ZEROCOPY)
US_IP_IMPL(copy, ZBUF_UDPSTREAM_COPY)
US_IP_IMPL(auto, ZBUF_UDPSTREAM_AUTO)
#endif

/* ------------------------------------------------------------ kernel TCP */

/* A connected pair (two may be open at once, as for the streams). */
struct tcp_inst {
    int tc, ts;
    uint8_t *tbuf, *tsbuf;
    size_t tmax;
};
static struct tcp_inst tcp_insts[2];
#define T (&tcp_insts[bench_slot])

static void tcp_pp_open(size_t max)
{
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 1) < 0 ||
        getsockname(l, (struct sockaddr *)&a, &al) < 0) {
        perror("tcp");
        exit(1);
    }
    T->tc = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(T->tc, (struct sockaddr *)&a, sizeof a) < 0) {
        perror("connect");
        exit(1);
    }
    T->ts = accept(l, NULL, NULL);
    close(l);
    setsockopt(T->tc, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(T->ts, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(T->tc, F_SETFL, O_NONBLOCK);
    fcntl(T->ts, F_SETFL, O_NONBLOCK);
    T->tmax = max;
    T->tbuf = malloc(max);
    T->tsbuf = malloc(max);
    memset(T->tbuf, 0x42, max);
}

/* The same shape as the stream's round: the server echoes what it has
 * as it comes, everything driven in turn. */
static void tcp_pp_round(size_t size)
{
    size_t sent = 0, got = 0, echo_in = 0, echo_out = 0, back = 0;
    while (back < size) {
        if (sent < size) {
            ssize_t n = send(T->tc, T->tbuf + sent, size - sent, MSG_DONTWAIT);
            if (n > 0)
                sent += (size_t)n;
        }
        ssize_t n = recv(T->ts, T->tsbuf + echo_in, size - echo_in, MSG_DONTWAIT);
        if (n > 0)
            echo_in += (size_t)n;
        if (echo_out < echo_in) {
            n = send(T->ts, T->tsbuf + echo_out, echo_in - echo_out, MSG_DONTWAIT);
            if (n > 0)
                echo_out += (size_t)n;
        }
        n = recv(T->tc, T->tbuf, size - back, MSG_DONTWAIT);
        if (n > 0)
            back += (size_t)n;
    }
    (void)got;
}

static uint64_t tcp_st_step(size_t size)
{
    for (int i = 0; i < 64; i++)
        if (send(T->tc, T->tbuf, size, MSG_DONTWAIT) <= 0)
            break;
    uint64_t got = 0;
    ssize_t n;
    while ((n = recv(T->ts, T->tsbuf, T->tmax, MSG_DONTWAIT)) > 0)
        got += (uint64_t)n;
    return got;
}

static void tcp_pp_close(void)
{
    close(T->tc);
    close(T->ts);
    free(T->tbuf);
    free(T->tsbuf);
}

#define US_ROW(name, nm)                                                                    \
    {name, us_pp_open_##nm, us_pp_round, us_copied, us_close, us_st_step, us_loss_open_##nm,  \
     us_pair, us_loss_send, us_loss_poll, us_close, true}
static const struct bench_impl impls[] = {
    US_ROW("zerocopy", zc),
    US_ROW("copy", copy),
    US_ROW("auto", auto),
    US_ROW("auto-nocc", nocc),
    /* Receiving without UDP GRO (zbuf_udpstream_opts_t::no_gro). */
    US_ROW("zerocopy-nogro", zc_nogro),
    US_ROW("copy-nogro", copy_nogro),
    US_ROW("auto-nogro", auto_nogro),
    {"tcp", tcp_pp_open, tcp_pp_round, NULL, tcp_pp_close, tcp_st_step, NULL, NULL, NULL, NULL,
     NULL, true},
#ifdef BENCH_WITH_STACK
/* Over the bundled stack's UDP (us_ip_open()): no loss scenario. */
#define US_IP_ROW(name, nm)                                                                 \
    {name, us_ip_open_##nm, us_pp_round, us_copied, us_close, us_st_step, NULL, NULL, NULL,   \
     NULL, NULL, true}
    US_IP_ROW("zerocopy-ip", zc),
    US_IP_ROW("copy-ip", copy),
    US_IP_ROW("auto-ip", auto),
#endif
};

int main(int argc, char **argv)
{
    return bench_main(argc, argv, impls, sizeof impls / sizeof impls[0]);
}
