/* zbuf-udpstream (zero-copy, copying, adaptive modes) and kernel TCP with
 * TCP_NODELAY, in the scenarios of bench_common.h. */
#include <fcntl.h>
#include <netinet/tcp.h>
#include <zbuf/udpstream.h>

#include "bench_common.h"

/* -------------------------------------------------------------- udpstream */

static zbuf_udpstream_t *cli, *srv;
static int cfd = -1, sfd = -1;
static zbuf_buf_t *msgbuf;
static zbuf_udpstream_mode_t us_mode;
static bool us_nocc;

static void die(const char *what, int rc)
{
    fprintf(stderr, "%s: %s\n", what, zbuf_strerror(rc));
    exit(1);
}

static void us_opts(zbuf_udpstream_opts_t *o)
{
    zbuf_udpstream_opts_init(o);
    o->mode = us_mode;
    o->no_congestion_control = us_nocc;
    o->sndbuf = 64u << 20;
    o->cork = getenv("BENCH_CORK") != NULL;
    const char *gro = getenv("BENCH_GRO"); /* 0: receive without UDP GRO */
    o->no_gro = gro != NULL && strcmp(gro, "0") == 0;
    const char *mtu = getenv("BENCH_MTU"); /* loopback carries up to 65535 */
    if (mtu != NULL)
        o->mtu = (uint32_t)atoi(mtu);
}

static void us_pair(const struct sockaddr_in *via)
{
    zbuf_udpstream_opts_t o;
    us_opts(&o);
    int rc = zbuf_udpstream_connect_fd(cfd, (const struct sockaddr *)via, sizeof *via, &o, &cli);
    if (rc < 0)
        die("connect", rc);
}

/* The two sockets and the listening stream; the server's address in @sa. */
static void us_server(struct sockaddr_in *sa)
{
    struct sockaddr_in ca;
    sfd = bench_udp(sa);
    cfd = bench_udp(&ca);
    zbuf_udpstream_opts_t o;
    us_opts(&o);
    int rc = zbuf_udpstream_listen_fd(sfd, &o, &srv);
    if (rc < 0)
        die("listen", rc);
}

static void us_pp_open(size_t max)
{
    struct sockaddr_in sa;
    us_server(&sa);
    us_pair(&sa);
    int rc = zbuf_buf_alloc(max, &msgbuf);
    if (rc < 0)
        die("alloc", rc);
    memset(zbuf_buf_data(msgbuf), 0x42, max);
    while (!(zbuf_udpstream_events(srv) & ZBUF_UDPSTREAM_CONNECTED)) {
        zbuf_udpstream_process(cli);
        zbuf_udpstream_process(srv);
    }
}

static void us_pp_round(size_t size)
{
    zbuf_t *z;
    if (zbuf_create(&z) < 0 || zbuf_append_ref(z, msgbuf, 0, size) < 0)
        die("zbuf", -ENOMEM);
    int rc = zbuf_udpstream_write(cli, z);
    if (rc < 0)
        die("write", rc);
    size_t echoed = 0, back = 0;
    while (back < size) {
        zbuf_udpstream_process(srv);
        ssize_t n;
        while (echoed < size && (n = zbuf_udpstream_read(srv, 1, size - echoed, &z)) > 0) {
            echoed += (size_t)n;
            if ((rc = zbuf_udpstream_write(srv, z)) < 0) /* the echo: the same bytes */
                die("echo", rc);
        }
        zbuf_udpstream_process(cli);
        while (back < size && (n = zbuf_udpstream_read(cli, 1, size - back, &z)) > 0) {
            back += (size_t)n;
            zbuf_delete(z);
        }
        if (zbuf_udpstream_error(cli) || zbuf_udpstream_error(srv))
            die("stream", zbuf_udpstream_error(cli) ? zbuf_udpstream_error(cli)
                                                    : zbuf_udpstream_error(srv));
    }
}

/* Streaming: the client writes while the stream takes more (its queue
 * kept near 1 MiB), the server reads whatever is there. */
static uint64_t us_st_step(size_t size)
{
    for (int i = 0; i < 64; i++) {
        zbuf_udpstream_stats_t st;
        zbuf_udpstream_get_stats(cli, &st);
        if (st.bytes_written - st.bytes_acked > (1u << 20))
            break;
        zbuf_t *z;
        if (zbuf_create(&z) < 0 || zbuf_append_ref(z, msgbuf, 0, size) < 0)
            die("zbuf", -ENOMEM);
        int rc = zbuf_udpstream_write(cli, z);
        if (rc < 0) {
            zbuf_delete(z);
            break;
        }
    }
    zbuf_udpstream_process(srv);
    uint64_t got = 0;
    zbuf_t *z;
    ssize_t n;
    while ((n = zbuf_udpstream_read(srv, 1, SIZE_MAX, &z)) > 0) {
        got += (uint64_t)n;
        zbuf_delete(z);
    }
    zbuf_udpstream_process(cli);
    return got;
}

static double us_copied(void)
{
    zbuf_udpstream_stats_t a, b;
    zbuf_udpstream_get_stats(cli, &a);
    zbuf_udpstream_get_stats(srv, &b);
    return (double)(a.bytes_copied + b.bytes_copied);
}

static void us_close(void)
{
    if (getenv("BENCH_STATS")) {
        zbuf_udpstream_stats_t a, b;
        zbuf_udpstream_get_stats(cli, &a);
        zbuf_udpstream_get_stats(srv, &b);
        fprintf(stderr, "cli: tx %llu rx %llu data %llu retx %llu fast %llu to %llu acks %llu srtt %u cwnd %u nobuf %llu oow %llu\n",
                (unsigned long long)a.dgrams_tx, (unsigned long long)a.dgrams_rx, (unsigned long long)a.data_tx, (unsigned long long)a.retransmits, (unsigned long long)a.fast_retransmits, (unsigned long long)a.timeouts, (unsigned long long)a.acks_tx, a.srtt_us, a.cwnd, (unsigned long long)a.no_buffer, (unsigned long long)a.out_of_window);
        fprintf(stderr, "srv: tx %llu rx %llu data %llu retx %llu fast %llu to %llu acks %llu srtt %u cwnd %u nobuf %llu oow %llu\n",
                (unsigned long long)b.dgrams_tx, (unsigned long long)b.dgrams_rx, (unsigned long long)b.data_tx, (unsigned long long)b.retransmits, (unsigned long long)b.fast_retransmits, (unsigned long long)b.timeouts, (unsigned long long)b.acks_tx, b.srtt_us, b.cwnd, (unsigned long long)b.no_buffer, (unsigned long long)b.out_of_window);
    }
    zbuf_udpstream_delete(cli);
    zbuf_udpstream_delete(srv);
    zbuf_buf_unref(msgbuf);
    msgbuf = NULL;
    close(cfd);
    close(sfd);
}

static void us_loss_open(struct sockaddr_in *server)
{
    us_server(server);
}

static void us_loss_send(const uint8_t *msg)
{
    ssize_t rc = zbuf_udpstream_write_copy(cli, msg, LOSS_PAYLOAD);
    if (rc < 0)
        die("write", (int)rc);
}

static void us_loss_poll(int64_t wait_us, void (*echoed)(const uint8_t *))
{
    struct pollfd pf[2] = {{.fd = cfd, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
    int ms = (int)(wait_us / 1000);
    int t = zbuf_udpstream_timeout(cli), u = zbuf_udpstream_timeout(srv);
    if (t >= 0 && t < ms)
        ms = t;
    if (u >= 0 && u < ms)
        ms = u;
    poll(pf, 2, ms);
    zbuf_udpstream_process(srv);
    zbuf_udpstream_process(cli);
    uint8_t m[LOSS_PAYLOAD];
    while (zbuf_udpstream_readable(srv) >= LOSS_PAYLOAD) {
        zbuf_udpstream_read_copy(srv, m, LOSS_PAYLOAD);
        zbuf_udpstream_write_copy(srv, m, LOSS_PAYLOAD);
    }
    while (zbuf_udpstream_readable(cli) >= LOSS_PAYLOAD) {
        zbuf_udpstream_read_copy(cli, m, LOSS_PAYLOAD);
        echoed(m);
    }
}

#define US_IMPL(nm, mode, nocc)                                                             \
    static void us_pp_open_##nm(size_t m)                                                   \
    {                                                                                       \
        us_mode = mode;                                                                     \
        us_nocc = nocc;                                                                     \
        us_pp_open(m);                                                                      \
    }                                                                                       \
    static void us_loss_open_##nm(struct sockaddr_in *s)                                    \
    {                                                                                       \
        us_mode = mode;                                                                     \
        us_nocc = nocc;                                                                     \
        us_loss_open(s);                                                                    \
    }
US_IMPL(zc, ZBUF_UDPSTREAM_ZEROCOPY, false)
US_IMPL(copy, ZBUF_UDPSTREAM_COPY, false)
US_IMPL(auto, ZBUF_UDPSTREAM_AUTO, false)
US_IMPL(nocc, ZBUF_UDPSTREAM_AUTO, true)

/* ------------------------------------------------------------ kernel TCP */

static int tc = -1, ts = -1;
static uint8_t *tbuf, *tsbuf;
static size_t tmax;

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
    tc = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(tc, (struct sockaddr *)&a, sizeof a) < 0) {
        perror("connect");
        exit(1);
    }
    ts = accept(l, NULL, NULL);
    close(l);
    setsockopt(tc, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(ts, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(tc, F_SETFL, O_NONBLOCK);
    fcntl(ts, F_SETFL, O_NONBLOCK);
    tmax = max;
    tbuf = malloc(max);
    tsbuf = malloc(max);
    memset(tbuf, 0x42, max);
}

/* The same shape as the stream's round: the server echoes what it has
 * as it comes, everything driven in turn. */
static void tcp_pp_round(size_t size)
{
    size_t sent = 0, got = 0, echo_in = 0, echo_out = 0, back = 0;
    while (back < size) {
        if (sent < size) {
            ssize_t n = send(tc, tbuf + sent, size - sent, MSG_DONTWAIT);
            if (n > 0)
                sent += (size_t)n;
        }
        ssize_t n = recv(ts, tsbuf + echo_in, size - echo_in, MSG_DONTWAIT);
        if (n > 0)
            echo_in += (size_t)n;
        if (echo_out < echo_in) {
            n = send(ts, tsbuf + echo_out, echo_in - echo_out, MSG_DONTWAIT);
            if (n > 0)
                echo_out += (size_t)n;
        }
        n = recv(tc, tbuf, size - back, MSG_DONTWAIT);
        if (n > 0)
            back += (size_t)n;
    }
    (void)got;
}

static uint64_t tcp_st_step(size_t size)
{
    for (int i = 0; i < 64; i++)
        if (send(tc, tbuf, size, MSG_DONTWAIT) <= 0)
            break;
    uint64_t got = 0;
    ssize_t n;
    while ((n = recv(ts, tsbuf, tmax, MSG_DONTWAIT)) > 0)
        got += (uint64_t)n;
    return got;
}

static void tcp_pp_close(void)
{
    close(tc);
    close(ts);
    free(tbuf);
    free(tsbuf);
}

static const struct bench_impl impls[] = {
    {"zerocopy", us_pp_open_zc, us_pp_round, us_copied, us_close, us_st_step, us_loss_open_zc,
     us_pair, us_loss_send, us_loss_poll, us_close},
    {"copy", us_pp_open_copy, us_pp_round, us_copied, us_close, us_st_step, us_loss_open_copy,
     us_pair, us_loss_send, us_loss_poll, us_close},
    {"auto", us_pp_open_auto, us_pp_round, us_copied, us_close, us_st_step, us_loss_open_auto,
     us_pair, us_loss_send, us_loss_poll, us_close},
    {"auto-nocc", us_pp_open_nocc, us_pp_round, us_copied, us_close, us_st_step,
     us_loss_open_nocc, us_pair, us_loss_send, us_loss_poll, us_close},
    {"tcp", tcp_pp_open, tcp_pp_round, NULL, tcp_pp_close, tcp_st_step, NULL, NULL, NULL, NULL,
     NULL},
};

int main(int argc, char **argv)
{
    return bench_main(argc, argv, impls, sizeof impls / sizeof impls[0]);
}
