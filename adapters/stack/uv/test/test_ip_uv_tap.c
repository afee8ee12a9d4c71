/* SPDX-License-Identifier: MIT */
/* The stack on a TAP interface driven by a libuv loop, against the Linux
 * kernel in a network namespace of its own (each Criterion test runs in a
 * forked process; unshare(CLONE_NEWNET) moves that process only).  The
 * kernel's side (192.0.2.1) is a ping process and a libuv TCP client in this
 * very loop; the stack (192.0.2.2) is polled by the loop only.  Skipped
 * without root, /dev/net/tun, network namespaces or iproute2. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "uvpair.h"

ZT_SUITE(ip_uv_tap);

#define TAP "zbu0"
#define KERNEL_IP "192.0.2.1"
#define STACK_IP ZBUF_IP_ADDR(192, 0, 2, 2)

struct tap_env {
    uv_loop_t loop;
    uv_timer_t watchdog;
    bool timed_out;
    zbuf_ip_stack_t *s;
    zbuf_ip_netif_t *nif;
    zbuf_ip_uv_t *h;
    int closed;
};

static void enter_namespace_or_skip(void)
{
    if (geteuid() != 0)
        cr_skip_test("needs root (CAP_NET_ADMIN) for a namespace and a TAP device");
    if (access("/dev/net/tun", R_OK | W_OK) != 0)
        cr_skip_test("/dev/net/tun is not available");
    if (system("command -v ip >/dev/null 2>&1") != 0)
        cr_skip_test("iproute2 (ip) is missing");
    if (unshare(CLONE_NEWNET) != 0)
        cr_skip_test("unshare(CLONE_NEWNET): %s", strerror(errno));
    cr_assert_eq(system("ip link set lo up"), 0);
}

static void env_detach(struct tap_env *e);

static void on_watchdog(uv_timer_t *t)
{
    struct tap_env *e = t->data;
    e->timed_out = true;
    env_detach(e);
    uv_stop(t->loop);
}

static void on_env_closed(void *arg)
{
    ((struct tap_env *)arg)->closed++;
}

static void env_detach(struct tap_env *e)
{
    if (e->h && zbuf_ip_uv_close(e->h, on_env_closed, e) == 0)
        e->h = NULL;
}

/* A stack on TAP device zbu0 (pool of `pool_bufs` buffers), attached to
 * e->loop, the kernel side addressed and up.  The TAP interface is opened
 * through the integration, or with the plain zbuf_ip_tap_open() before the
 * attach (which must then find and watch it). */
static void env_init_tap(struct tap_env *e, unsigned pool_bufs, uint64_t limit_ms,
                         bool tap_before_attach)
{
    memset(e, 0, sizeof *e);
    enter_namespace_or_skip();
    cr_assert_eq(uv_loop_init(&e->loop), 0);
    cr_assert_eq(uv_timer_init(&e->loop, &e->watchdog), 0);
    e->watchdog.data = e;
    uv_timer_start(&e->watchdog, on_watchdog, limit_ms, 0);
    uv_unref((uv_handle_t *)&e->watchdog);
    cr_assert_eq(zbuf_ip_stack_create(NULL, &e->s), 0);
    zbuf_ip_netif_config_t nc = {.mac = {0x02, 0x7a, 0x62, 0x75, 0x76, 0x02},
                                 .addr = STACK_IP, .prefix_len = 24};
    int rc;
    if (tap_before_attach) {
        rc = zbuf_ip_tap_open(e->s, TAP, &nc, pool_bufs, &e->nif);
        cr_assert_eq(rc, 0, "tap open: %s", zbuf_strerror(rc));
        cr_assert_eq(zbuf_ip_uv_attach(&e->loop, e->s, &e->h), 0);
    } else {
        cr_assert_eq(zbuf_ip_uv_attach(&e->loop, e->s, &e->h), 0);
        rc = zbuf_ip_uv_tap_open(e->h, TAP, &nc, pool_bufs, &e->nif);
        cr_assert_eq(rc, 0, "tap open: %s", zbuf_strerror(rc));
    }
    cr_assert_eq(zbuf_ip_uv_watch(e->h, e->nif), -EEXIST, "the interface is watched already");
    zbuf_ip_uv_stats_t us;
    zbuf_ip_uv_stats(e->h, &us);
    cr_assert_eq(us.watched, 1);
    if (system("sysctl -qw net.ipv6.conf." TAP ".disable_ipv6=1 2>/dev/null") != 0) {
        /* IPv6 chatter only adds frames the stack drops */
    }
    cr_assert_eq(system("ip addr add " KERNEL_IP "/24 dev " TAP " && ip link set " TAP " up"), 0);
}

static void env_init(struct tap_env *e, unsigned pool_bufs, uint64_t limit_ms)
{
    env_init_tap(e, pool_bufs, limit_ms, false);
}

static void env_fini(struct tap_env *e)
{
    env_detach(e);
    uv_close((uv_handle_t *)&e->watchdog, NULL);
    uv_run(&e->loop, UV_RUN_DEFAULT);
    cr_assert_eq(e->closed, 1);
    zbuf_ip_stack_delete(e->s); /* after the close callback: closes the TAP descriptor */
    cr_assert_eq(uv_loop_close(&e->loop), 0, "handles left on the loop");
}

/* ------------------------------------------------------------------ ping */

struct ping_run {
    struct tap_env *e;
    int64_t exit_status;
    int term_signal;
    bool exited;
};

static void on_ping_exit(uv_process_t *proc, int64_t status, int sig)
{
    struct ping_run *r = proc->data;
    r->exit_status = status;
    r->term_signal = sig;
    r->exited = true;
    uv_close((uv_handle_t *)proc, NULL);
    env_detach(r->e);
}

Test(ip_uv_tap, kernel_pings_a_stack_whose_tap_was_opened_before_the_attach)
{
    struct tap_env e;
    env_init_tap(&e, 0, 20000, true);
    if (system("command -v ping >/dev/null 2>&1") != 0) {
        env_fini(&e);
        cr_skip_test("ping is missing");
    }
    struct ping_run r = {.e = &e};
    uv_process_t proc;
    proc.data = &r;
    char *args[] = {"ping", "-c", "5", "-i", "0.2", "-W", "2", "-q", "192.0.2.2", NULL};
    uv_process_options_t opt = {.file = "ping", .args = args, .exit_cb = on_ping_exit};
    cr_assert_eq(uv_spawn(&e.loop, &proc, &opt), 0);
    uv_run(&e.loop, UV_RUN_DEFAULT);
    zbuf_ip_stats_t st;
    zbuf_ip_stats(e.s, &st);
    cr_assert_not(e.timed_out);
    cr_assert(r.exited);
    cr_assert_eq(r.exit_status, 0, "ping failed (%lld)", (long long)r.exit_status);
    cr_assert_eq(st.icmp_echo_rx, 5);
    cr_assert_eq(st.icmp_echo_tx, 5);
    env_fini(&e);
}

/* ---------------------------------------- kernel TCP client, stack echo */

struct echo_srv {
    zbuf_ip_tcp_t *pcb;
    zbuf_t *pending;
    bool eof;
    size_t echoed;
    bool remove_netif_on_data; /* for the removal test */
    struct tap_env *e;
    zbuf_t *held;              /* zbufs kept to drain the driver's pool */
    bool hold;
    bool discard;              /* count and drop instead of echoing */
};

static void srv_flush(struct echo_srv *v)
{
    while (v->pcb && v->pending && zbuf_length(v->pending) > 0) {
        size_t room = zbuf_ip_tcp_sndbuf(v->pcb), len = zbuf_length(v->pending);
        if (room == 0)
            return;
        zbuf_t *part = v->pending;
        if (len > room) {
            cr_assert_eq(zbuf_split_head(v->pending, room, &part), 0);
            len = room;
        } else {
            v->pending = NULL;
        }
        cr_assert_eq(zbuf_ip_tcp_write(v->pcb, part), 0);
        zbuf_ip_tcp_recved(v->pcb, len);
        v->echoed += len;
    }
    if (v->pcb && v->eof) {
        zbuf_ip_tcp_close(v->pcb);
        v->pcb = NULL;
    }
}

static void srv_recv(void *arg, zbuf_ip_tcp_t *pcb, zbuf_t *z)
{
    (void)pcb;
    struct echo_srv *v = arg;
    if (z == NULL) {
        v->eof = true;
    } else if (v->remove_netif_on_data) {
        /* From inside the poll of this very interface: deferred. */
        v->remove_netif_on_data = false;
        cr_assert_eq(zbuf_ip_uv_netif_remove(v->e->h, v->e->nif), 0);
        zbuf_delete(z);
        return;
    } else if (v->discard && !v->hold) {
        size_t n = zbuf_length(z);
        zbuf_delete(z);
        zbuf_ip_tcp_recved(v->pcb, n);
        v->echoed += n;
        return;
    } else if (v->hold) {
        if (v->held)
            zbuf_append(v->held, z);
        else
            v->held = z;
        return;
    } else if (v->pending) {
        zbuf_append(v->pending, z);
    } else {
        v->pending = z;
    }
    srv_flush(v);
}

static void srv_sent(void *arg, zbuf_ip_tcp_t *pcb, size_t n)
{
    (void)pcb;
    (void)n;
    srv_flush(arg);
}

static int srv_accept(void *arg, zbuf_ip_tcp_t *l, zbuf_ip_tcp_t *c)
{
    (void)l;
    struct echo_srv *v = arg;
    zbuf_ip_tcp_callbacks_t cb = {.recv = srv_recv, .sent = srv_sent};
    zbuf_ip_tcp_set_callbacks(c, &cb, v);
    v->pcb = c;
    return 0;
}

static zbuf_ip_tcp_t *srv_listen(struct tap_env *e, struct echo_srv *v)
{
    memset(v, 0, sizeof *v);
    v->e = e;
    zbuf_ip_tcp_t *l;
    cr_assert_eq(zbuf_ip_tcp_new(e->s, &l), 0);
    cr_assert_eq(zbuf_ip_tcp_bind(l, ZBUF_IP_ANY, 7), 0);
    cr_assert_eq(zbuf_ip_tcp_listen(l, 4), 0);
    zbuf_ip_tcp_callbacks_t cb = {.accept = srv_accept};
    zbuf_ip_tcp_set_callbacks(l, &cb, v);
    return l;
}

/* The kernel's TCP client, a libuv handle in the same loop. */
struct client {
    struct tap_env *e;
    uv_tcp_t tcp;
    uv_connect_t conn;
    uv_write_t wr;
    uv_shutdown_t sh;
    uint8_t *data;
    size_t total, received;
    int mismatches;
    bool eof, write_done, no_read;
    int status;
    char rbuf[65536];
};

static void cli_closed(uv_handle_t *hd)
{
    struct client *c = hd->data;
    env_detach(c->e);
}

static void cli_alloc(uv_handle_t *hd, size_t hint, uv_buf_t *buf)
{
    (void)hint;
    struct client *c = hd->data;
    *buf = uv_buf_init(c->rbuf, sizeof c->rbuf);
}

static void cli_shutdown_done(uv_shutdown_t *req, int status)
{
    (void)req;
    (void)status;
}

static void cli_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
    struct client *c = st->data;
    if (n > 0) {
        if (c->received + (size_t)n > c->total ||
            memcmp(buf->base, c->data + c->received, (size_t)n) != 0)
            c->mismatches++;
        c->received += (size_t)n;
        if (c->received == c->total)
            uv_shutdown(&c->sh, st, cli_shutdown_done); /* the server closes on our FIN */
        return;
    }
    if (n < 0) {
        c->eof = n == UV_EOF;
        if (!c->eof)
            c->status = (int)n;
        uv_close((uv_handle_t *)st, cli_closed);
    }
}

static void cli_written(uv_write_t *req, int status)
{
    struct client *c = req->data;
    c->write_done = status == 0;
    if (status)
        c->status = status;
}

static void cli_connected(uv_connect_t *req, int status)
{
    struct client *c = req->data;
    if (status) {
        c->status = status;
        uv_close((uv_handle_t *)&c->tcp, cli_closed);
        return;
    }
    uv_buf_t b = uv_buf_init((char *)c->data, (unsigned)c->total);
    c->wr.data = c;
    cr_assert_eq(uv_write(&c->wr, (uv_stream_t *)&c->tcp, &b, 1, cli_written), 0);
    if (!c->no_read)
        cr_assert_eq(uv_read_start((uv_stream_t *)&c->tcp, cli_alloc, cli_read), 0);
}

static void client_start(struct client *c, struct tap_env *e, size_t total)
{
    memset(c, 0, sizeof *c);
    c->e = e;
    c->total = total;
    c->data = up_pattern(total, 3);
    cr_assert_eq(uv_tcp_init(&e->loop, &c->tcp), 0);
    c->tcp.data = c;
    c->conn.data = c;
    struct sockaddr_in sa;
    uv_ip4_addr("192.0.2.2", 7, &sa);
    cr_assert_eq(uv_tcp_connect(&c->conn, &c->tcp, (struct sockaddr *)&sa, cli_connected), 0);
}

Test(ip_uv_tap, kernel_tcp_client_exchanges_data_with_a_stack_server)
{
    struct tap_env e;
    env_init(&e, 0, 60000);
    struct echo_srv v;
    zbuf_ip_tcp_t *l = srv_listen(&e, &v);
    struct client c;
    client_start(&c, &e, 8u << 20);
    uint64_t t0 = up_now_ms();
    uv_run(&e.loop, UV_RUN_DEFAULT); /* ends when the client closed and detached */
    uint64_t ms = up_now_ms() - t0;
    fprintf(stderr, "TAP echo: %zu bytes each way in %llu ms (%.1f MiB/s)\n", c.received,
            (unsigned long long)ms,
            ms ? (double)c.received / 1048576.0 / ((double)ms / 1000.0) : 0.0);
    cr_assert_not(e.timed_out, "watchdog: %zu of %zu bytes back", c.received, c.total);
    cr_assert_eq(c.status, 0, "client error %s", uv_strerror(c.status));
    cr_assert(c.write_done);
    cr_assert_eq(c.received, c.total);
    cr_assert_eq(c.mismatches, 0);
    cr_assert(c.eof, "the stack closed its side after our FIN");
    cr_assert_eq(v.echoed, c.total);
    zbuf_ip_tcp_close(l);
    zbuf_delete(v.pending);
    env_fini(&e);
    free(c.data);
}

/* ----------------------------------------------- removal and exhaustion */

static void finish_later(uv_timer_t *t)
{
    struct client *c = t->data;
    if (!uv_is_closing((uv_handle_t *)&c->tcp))
        uv_close((uv_handle_t *)&c->tcp, cli_closed);
    uv_close((uv_handle_t *)t, NULL);
}

Test(ip_uv_tap, netif_removed_from_inside_its_own_poll_is_safe)
{
    struct tap_env e;
    env_init(&e, 0, 20000);
    struct echo_srv v;
    zbuf_ip_tcp_t *l = srv_listen(&e, &v);
    v.remove_netif_on_data = true;
    struct client c;
    client_start(&c, &e, 256u << 10);
    bool removed = false;
    for (int i = 0; i < 100000 && !removed && !e.timed_out; i++) {
        uv_run(&e.loop, UV_RUN_ONCE);
        removed = !v.remove_netif_on_data;
    }
    cr_assert(removed);
    zbuf_ip_uv_stats_t st;
    zbuf_ip_uv_stats(e.h, &st);
    cr_assert_eq(st.watched, 0);
    cr_assert_eq(zbuf_ip_tap_fd(e.nif), -1, "the interface is gone");
    /* Without its interface, the loop must go quiet: the client retransmits
     * into a device nobody reads. */
    uv_timer_t t;
    uv_timer_init(&e.loop, &t);
    t.data = &c;
    uv_timer_start(&t, finish_later, 200, 0);
    uv_run(&e.loop, UV_RUN_DEFAULT);
    cr_assert_not(e.timed_out);
    zbuf_ip_tcp_close(l);
    zbuf_delete(v.pending);
    env_fini(&e);
    free(c.data);
}

/* Give the pool its buffers back (as a discard server would have). */
static void release_held(uv_timer_t *t)
{
    struct echo_srv *v = t->data;
    v->hold = false;
    if (v->held) {
        size_t n = zbuf_length(v->held);
        zbuf_delete(v->held);
        v->held = NULL;
        zbuf_ip_tcp_recved(v->pcb, n);
        v->echoed += n;
    }
    uv_close((uv_handle_t *)t, NULL);
}

struct discard_wait {
    struct echo_srv *v;
    struct client *c;
};

/* Once the stack has every byte, close the client (which detaches). */
static void check_discarded(uv_timer_t *t)
{
    struct discard_wait *w = t->data;
    if (w->v->echoed == w->c->total) {
        uv_close((uv_handle_t *)&w->c->tcp, cli_closed);
        uv_close((uv_handle_t *)t, NULL);
    }
}

struct iter_probe {
    struct tap_env *e;
    uint64_t it_start, it_end, pauses;
};

static void probe_end(uv_timer_t *t)
{
    struct iter_probe *p = t->data;
    zbuf_ip_uv_stats_t st;
    zbuf_ip_uv_stats(p->e->h, &st);
    p->it_end = st.iterations;
    p->pauses = st.pauses;
    uv_close((uv_handle_t *)t, NULL);
}

/* An application that keeps every received zbuf would once have emptied
 * the TAP pool (the loop then paused its watch, ZBUF_IP_UV_RETRY_MS at a
 * time).  The stack now keeps the pool's reserve: once few buffers are
 * left it copies what it delivers into compact buffers, so the pool never
 * runs dry, the driver never drops for lack of a buffer, the loop neither
 * spins nor pauses, and the transfer completes once the application lets
 * go. */
Test(ip_uv_tap, application_holding_every_buffer_neither_empties_the_pool_nor_spins)
{
    struct tap_env e;
    env_init(&e, 16, 60000); /* 16 receive buffers */
    struct echo_srv v;
    zbuf_ip_tcp_t *l = srv_listen(&e, &v);
    v.hold = true; /* keep every received zbuf */
    v.discard = true;
    struct client c;
    client_start(&c, &e, 4u << 20);
    c.no_read = true;
    struct discard_wait dw = {.v = &v, .c = &c};
    uv_timer_t rel, probe, chk;
    uv_timer_init(&e.loop, &chk);
    chk.data = &dw;
    uv_timer_start(&chk, check_discarded, 5, 5);
    struct iter_probe ip = {.e = &e};
    uv_timer_init(&e.loop, &rel);
    uv_timer_init(&e.loop, &probe);
    rel.data = &v;
    probe.data = &ip;
    zbuf_ip_uv_stats_t st;
    zbuf_ip_uv_stats(e.h, &st);
    ip.it_start = st.iterations;
    uv_timer_start(&probe, probe_end, 400, 0);
    uv_timer_start(&rel, release_held, 400, 0);
    uv_run(&e.loop, UV_RUN_DEFAULT);
    zbuf_ip_stats_t ss;
    zbuf_ip_stats(e.s, &ss);
    fprintf(stderr, "held for 400 ms: %llu loop iterations, %llu pauses, %llu bytes collapsed, "
            "%llu frames without a buffer\n",
            (unsigned long long)(ip.it_end - ip.it_start), (unsigned long long)ip.pauses,
            (unsigned long long)ss.rx_collapsed_bytes, (unsigned long long)ss.rx_no_buffer);
    cr_assert_not(e.timed_out, "watchdog: %zu of %zu bytes in", v.echoed, c.total);
    cr_assert_gt(ss.rx_collapsed_bytes, 0, "the pool's reserve was never reached?");
    cr_assert_eq(ss.rx_no_buffer, 0, "the pool ran dry");
    cr_assert_lt(ip.it_end - ip.it_start, 4000, "the loop spun on a readable descriptor");
    cr_assert_eq(v.echoed, c.total, "the transfer completed once the buffers came back");
    cr_assert(c.write_done);
    zbuf_ip_tcp_close(l);
    zbuf_delete(v.pending);
    zbuf_delete(v.held);
    env_fini(&e);
    free(c.data);
}
