/* SPDX-License-Identifier: MIT */
/* The stack driven by a libuv loop (zbuf_ip_uv_*): two stacks over the
 * in-memory link, on the real clock, with nothing but uv_run() calling
 * into them. */
#include <errno.h>
#include <stdio.h>
#include <sys/resource.h>

#include "uvpair.h"

ZT_SUITE(ip_uv);

static uint64_t cpu_us(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000u +
           (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

/* ------------------------------------------------------------ transfers */

static void bulk_run(const zbuf_ip_link_config_t *lc, size_t total, const char *what)
{
    up_pair_t p;
    up_bulk_t k;
    up_pair_init(&p, NULL, lc, 60000);
    up_bulk_start(&k, &p, total);
    k.detach_when_done = true;
    uint64_t t0 = up_now_ms();
    uv_run(&p.loop, UV_RUN_DEFAULT); /* returns once the integrations are closed */
    uint64_t ms = up_now_ms() - t0;
    zbuf_ip_stats_t sa;
    zbuf_ip_stats(p.a, &sa);
    fprintf(stderr, "ip_uv %s: %zu bytes in %llu ms (%.1f MiB/s), %llu retransmits\n", what,
            k.received, (unsigned long long)ms,
            ms ? (double)k.received / 1048576.0 / ((double)ms / 1000.0) : 0.0,
            (unsigned long long)sa.tcp_retransmits);
    cr_assert_not(p.timed_out, "watchdog: %zu of %zu bytes received", k.received, total);
    cr_assert_eq(p.closed, 2);
    cr_assert_eq(k.received, total);
    cr_assert_eq(k.mismatches, 0);
    cr_assert(k.eof);
    cr_assert_eq(k.errors, 0);
    cr_assert_eq(k.releases, k.chunks);
    for (int i = 0; i < k.chunks; i++)
        cr_assert_eq(k.released[i], 1, "chunk %d released %d times", i, k.released[i]);
    zbuf_ip_tcp_close(k.listener);
    up_pair_fini(&p);
    up_bulk_free(&k);
}

Test(ip_uv, bulk_over_a_delayed_link_is_byte_exact)
{
    zbuf_ip_link_config_t lc = {.delay_ms = 1};
    bulk_run(&lc, 8u << 20, "delay 1 ms");
}

Test(ip_uv, bulk_over_a_lossy_reordering_link_is_byte_exact)
{
    zbuf_ip_link_config_t lc = {.delay_ms = 2, .loss = 0.01, .dup = 0.005, .reorder = 0.01,
                                .reorder_ms = 1, .seed = 42};
    bulk_run(&lc, 4u << 20, "delay 2 ms, 1% loss");
}

/* The same transfer by a hand-written poll()-and-sleep loop, to compare. */
Test(ip_uv, manual_polling_reference)
{
    up_pair_t p;
    up_bulk_t k;
    zbuf_ip_link_config_t lc = {.delay_ms = 1};
    up_pair_init(&p, NULL, &lc, 60000);
    up_pair_detach(&p); /* no loop: this test drives the stacks itself */
    up_bulk_start(&k, &p, 8u << 20);
    uint64_t t0 = up_now_ms();
    while (!(k.eof && k.releases == k.chunks) && up_now_ms() - t0 < 60000) {
        zbuf_ip_poll(p.a);
        zbuf_ip_poll(p.b);
        uint64_t d = zbuf_ip_next_deadline(p.a), db = zbuf_ip_next_deadline(p.b);
        if (db < d)
            d = db;
        uint64_t now = zbuf_ip_now(p.a);
        if (d > now) {
            struct timespec ts = {0, (long)((d - now > 10 ? 10 : d - now) * 1000000)};
            nanosleep(&ts, NULL);
        }
    }
    uint64_t ms = up_now_ms() - t0;
    fprintf(stderr, "manual polling: %zu bytes in %llu ms (%.1f MiB/s)\n", k.received,
            (unsigned long long)ms,
            ms ? (double)k.received / 1048576.0 / ((double)ms / 1000.0) : 0.0);
    cr_assert_eq(k.received, k.total);
    cr_assert_eq(k.releases, k.chunks);
    zbuf_ip_tcp_close(k.listener);
    up_pair_fini(&p);
    up_bulk_free(&k);
}

/* --------------------------------------------------------------- timers */

struct small {
    up_pair_t *p;
    zbuf_ip_tcp_t *client, *listener, *server;
    bool connected;
    size_t acked, received;
    uint64_t t_write, t_acked, t_closed;
    int released;
};

static void small_connected(void *arg, zbuf_ip_tcp_t *pcb)
{
    (void)pcb;
    ((struct small *)arg)->connected = true;
}

static void small_sent(void *arg, zbuf_ip_tcp_t *pcb, size_t n)
{
    (void)pcb;
    struct small *m = arg;
    m->acked += n;
    m->t_acked = up_now_ms();
}

static void small_recv(void *arg, zbuf_ip_tcp_t *pcb, zbuf_t *z)
{
    struct small *m = arg;
    if (z == NULL) {
        zbuf_ip_tcp_close(pcb);
        m->server = NULL;
        return;
    }
    m->received += zbuf_length(z);
    zbuf_ip_tcp_recved(pcb, zbuf_length(z));
    zbuf_delete(z);
}

static int small_accept(void *arg, zbuf_ip_tcp_t *l, zbuf_ip_tcp_t *c)
{
    (void)l;
    struct small *m = arg;
    zbuf_ip_tcp_callbacks_t cb = {.recv = small_recv};
    zbuf_ip_tcp_set_callbacks(c, &cb, m);
    m->server = c;
    return 0;
}

/* Connect A to B:9, run the loop until established. */
static void small_connect(struct small *m, up_pair_t *p)
{
    memset(m, 0, sizeof *m);
    m->p = p;
    cr_assert_eq(zbuf_ip_tcp_new(p->b, &m->listener), 0);
    cr_assert_eq(zbuf_ip_tcp_bind(m->listener, ZBUF_IP_ANY, 9), 0);
    cr_assert_eq(zbuf_ip_tcp_listen(m->listener, 1), 0);
    zbuf_ip_tcp_callbacks_t lcb = {.accept = small_accept};
    zbuf_ip_tcp_set_callbacks(m->listener, &lcb, m);
    cr_assert_eq(zbuf_ip_tcp_new(p->a, &m->client), 0);
    zbuf_ip_tcp_callbacks_t ccb = {.connected = small_connected, .sent = small_sent};
    zbuf_ip_tcp_set_callbacks(m->client, &ccb, m);
    zbuf_ip_tcp_set_nodelay(m->client, true);
    cr_assert_eq(zbuf_ip_tcp_connect(m->client, ZH_B, 9), 0);
    for (int i = 0; i < 10000 && !(m->connected && m->server); i++)
        uv_run(&p->loop, UV_RUN_ONCE);
    cr_assert(m->connected && m->server);
}

static void small_write(struct small *m, size_t n)
{
    static uint8_t bytes[4096];
    zbuf_t *z;
    cr_assert_leq(n, sizeof bytes);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_buf(z, bytes, n, zt_count_release, &m->released), 0);
    m->t_write = up_now_ms();
    cr_assert_eq(zbuf_ip_tcp_write(m->client, z), 0);
}

/* Run the loop for `ms`. */
static void run_for(up_pair_t *p, uint64_t ms)
{
    uint64_t end = up_now_ms() + ms;
    while (up_now_ms() < end && !p->timed_out)
        uv_run(&p->loop, UV_RUN_ONCE);
}

/* Run the loop until A's data is acknowledged up to `n` bytes or `ms` pass. */
static bool run_until_acked(up_pair_t *p, const struct small *m, size_t n, uint64_t ms)
{
    uint64_t end = up_now_ms() + ms;
    while (m->acked < n && up_now_ms() < end)
        uv_run(&p->loop, UV_RUN_ONCE);
    return m->acked == n;
}

Test(ip_uv, delayed_ack_timer_fires_from_the_loop)
{
    zbuf_ip_config_t cfg;
    zbuf_ip_config_init(&cfg);
    cfg.tcp_delack_ms = 100;
    up_pair_t p;
    struct small m;
    up_pair_init(&p, &cfg, NULL, 20000);
    small_connect(&m, &p);
    uv_run(&p.loop, UV_RUN_NOWAIT);
    zbuf_ip_stats_t before;
    zbuf_ip_stats(p.b, &before);
    small_write(&m, 100); /* B has nothing to send back: only its delayed ACK acks this */
    bool acked = run_until_acked(&p, &m, 100, 3000);
    zbuf_ip_stats_t after;
    zbuf_ip_stats(p.b, &after);
    fprintf(stderr, "delayed ACK after %llu ms\n", (unsigned long long)(m.t_acked - m.t_write));
    cr_assert(acked, "no ACK within 3 s");
    cr_assert_eq(m.received, 100);
    cr_assert_eq(m.released, 1);
    cr_assert_geq(m.t_acked - m.t_write, 90, "ACK came after %llu ms: not delayed",
                  (unsigned long long)(m.t_acked - m.t_write));
    cr_assert_lt(m.t_acked - m.t_write, 1000);
    cr_assert_eq(after.tcp_tx_segs - before.tcp_tx_segs, 1, "B sent exactly the delayed ACK");
    zbuf_ip_tcp_close(m.client);
    zbuf_ip_tcp_close(m.listener);
    up_pair_fini(&p);
}

static void heal_link(uv_timer_t *t)
{
    up_pair_t *p = t->data;
    zbuf_ip_link_set_impairments(p->link, 0, 0, 0);
}

Test(ip_uv, retransmission_timer_fires_from_the_loop)
{
    zbuf_ip_config_t cfg;
    zbuf_ip_config_init(&cfg);
    cfg.tcp_rto_min_ms = 50;
    up_pair_t p;
    struct small m;
    up_pair_init(&p, &cfg, NULL, 20000);
    small_connect(&m, &p);
    zbuf_ip_link_set_impairments(p.link, 1.0, 0, 0); /* everything lost ... */
    uv_timer_t heal;
    uv_timer_init(&p.loop, &heal);
    heal.data = &p;
    uv_timer_start(&heal, heal_link, 300, 0); /* ... for 300 ms */
    small_write(&m, 1000);
    bool acked = run_until_acked(&p, &m, 1000, 10000);
    zbuf_ip_stats_t sa;
    zbuf_ip_stats(p.a, &sa);
    fprintf(stderr, "RTO: acked after %llu ms, %llu timeouts\n",
            (unsigned long long)(m.t_acked - m.t_write), (unsigned long long)sa.tcp_rto);
    cr_assert(acked);
    cr_assert_geq(sa.tcp_rto, 2, "the segment must have timed out while the link was down");
    cr_assert_geq(m.t_acked - m.t_write, 300);
    cr_assert_eq(m.received, 1000);
    cr_assert_eq(m.released, 1);
    uv_close((uv_handle_t *)&heal, NULL);
    zbuf_ip_tcp_close(m.client);
    zbuf_ip_tcp_close(m.listener);
    up_pair_fini(&p);
}

static void watch_pcbs(uv_timer_t *t)
{
    struct small *m = t->data;
    zbuf_ip_stats_t sa;
    zbuf_ip_stats(m->p->a, &sa);
    if (sa.tcp_pcbs == 0 && m->t_closed == 0) {
        m->t_closed = up_now_ms();
        uv_timer_stop(t);
    }
}

Test(ip_uv, time_wait_ends_from_the_loop)
{
    zbuf_ip_config_t cfg;
    zbuf_ip_config_init(&cfg);
    cfg.tcp_time_wait_ms = 150;
    up_pair_t p;
    struct small m;
    up_pair_init(&p, &cfg, NULL, 20000);
    small_connect(&m, &p);
    uint64_t t0 = up_now_ms();
    zbuf_ip_tcp_close(m.client); /* A closes first: A goes through TIME_WAIT */
    uv_timer_t poller;
    uv_timer_init(&p.loop, &poller);
    poller.data = &m;
    uv_timer_start(&poller, watch_pcbs, 5, 5);
    bool gone = false;
    while (!gone && up_now_ms() - t0 < 5000) {
        uv_run(&p.loop, UV_RUN_ONCE);
        gone = m.t_closed != 0;
    }
    zbuf_ip_stats_t sb;
    zbuf_ip_stats(p.b, &sb);
    fprintf(stderr, "TIME_WAIT: A's PCB gone %llu ms after close\n",
            (unsigned long long)(m.t_closed - t0));
    cr_assert(gone, "A's PCB still there after 5 s");
    cr_assert_geq(m.t_closed - t0, 140);
    cr_assert_lt(m.t_closed - t0, 2000);
    cr_assert_eq(sb.tcp_pcbs, 1, "B keeps only its listener");
    uv_close((uv_handle_t *)&poller, NULL);
    zbuf_ip_tcp_close(m.listener);
    up_pair_fini(&p);
}

/* ------------------------------------------------------- close and idle */

struct mid_close {
    up_pair_t *p;
    up_bulk_t *k;
    size_t received_at_close;
};

static void on_pair_closed(void *arg)
{
    /* Deleting the stacks from the close callback is allowed. */
    up_pair_t *p = arg;
    if (++p->closed == 2) {
        zbuf_ip_stack_delete(p->a);
        zbuf_ip_stack_delete(p->b);
        zbuf_ip_link_delete(p->link);
        p->a = p->b = NULL;
        p->link = NULL;
    }
}

/* Once 1 MiB got through, detach both stacks in the middle of the stream. */
static void close_mid_transfer(uv_timer_t *t)
{
    struct mid_close *c = t->data;
    if (c->k->received < (1u << 20))
        return;
    c->received_at_close = c->k->received;
    cr_assert_eq(zbuf_ip_uv_close(c->p->ua, on_pair_closed, c->p), 0);
    cr_assert_eq(zbuf_ip_uv_close(c->p->ub, on_pair_closed, c->p), 0);
    cr_assert_eq(zbuf_ip_uv_close(c->p->ua, on_pair_closed, c->p), -EALREADY);
    c->p->ua = c->p->ub = NULL;
    uv_close((uv_handle_t *)t, NULL);
}

Test(ip_uv, close_with_traffic_in_flight_leaks_nothing)
{
    up_pair_t p;
    up_bulk_t k;
    zbuf_ip_link_config_t lc = {.delay_ms = 2};
    up_pair_init(&p, NULL, &lc, 30000);
    up_bulk_start(&k, &p, 32u << 20);
    struct mid_close c = {.p = &p, .k = &k};
    uv_timer_t t;
    uv_timer_init(&p.loop, &t);
    t.data = &c;
    uv_timer_start(&t, close_mid_transfer, 1, 1);
    uv_run(&p.loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&p.watchdog, NULL);
    uv_run(&p.loop, UV_RUN_DEFAULT);
    cr_assert_eq(p.closed, 2);
    cr_assert_null(p.a, "stacks deleted by the close callback");
    cr_assert_gt(c.received_at_close, 0, "the transfer had started");
    cr_assert_lt(c.received_at_close, k.total, "the transfer was still going");
    cr_assert_gt(k.chunks, 0);
    cr_assert_eq(k.releases, k.chunks, "every chunk released once the stacks went");
    for (int i = 0; i < k.chunks; i++)
        cr_assert_eq(k.released[i], 1);
    cr_assert_eq(uv_loop_close(&p.loop), 0);
    up_bulk_free(&k);
}

static void detach_later(uv_timer_t *t)
{
    up_pair_detach(t->data);
    uv_close((uv_handle_t *)t, NULL);
}

Test(ip_uv, uv_run_returns_by_itself_once_detached)
{
    up_pair_t p;
    struct small m;
    up_pair_init(&p, NULL, NULL, 20000);
    small_connect(&m, &p); /* a live connection: ARP entries, a PCB on each side */
    uv_timer_t t;
    uv_timer_init(&p.loop, &t);
    t.data = &p;
    uv_timer_start(&t, detach_later, 100, 0);
    uint64_t t0 = up_now_ms();
    uv_close((uv_handle_t *)&p.watchdog, NULL);
    int r = uv_run(&p.loop, UV_RUN_DEFAULT);
    uint64_t ms = up_now_ms() - t0;
    cr_assert_eq(r, 0, "uv_run says handles are still alive");
    cr_assert_geq(ms, 95, "an attached stack keeps the loop running");
    cr_assert_lt(ms, 5000);
    cr_assert_eq(p.closed, 2);
    cr_assert_eq(uv_loop_close(&p.loop), 0, "no dangling handle");
    zbuf_ip_tcp_close(m.client);
    zbuf_ip_tcp_close(m.listener);
    zbuf_ip_stack_delete(p.a);
    zbuf_ip_stack_delete(p.b);
    zbuf_ip_link_delete(p.link);
}

Test(ip_uv, unreferenced_integration_does_not_keep_the_loop_alive)
{
    up_pair_t p;
    up_pair_init(&p, NULL, NULL, 20000);
    zbuf_ip_uv_set_ref(p.ua, false);
    zbuf_ip_uv_set_ref(p.ub, false);
    /* A connection attempt gives A pending timers (ARP, SYN). */
    zbuf_ip_tcp_t *c;
    cr_assert_eq(zbuf_ip_tcp_new(p.a, &c), 0);
    cr_assert_eq(zbuf_ip_tcp_connect(c, ZBUF_IP_ADDR(192, 0, 2, 99), 80), 0);
    cr_assert_neq(zbuf_ip_next_deadline(p.a), ZBUF_IP_NEVER);
    uint64_t t0 = up_now_ms();
    int r = uv_run(&p.loop, UV_RUN_DEFAULT);
    cr_assert_eq(r, 0);
    cr_assert_lt(up_now_ms() - t0, 500, "uv_run should return at once");
    zbuf_ip_uv_stats_t st;
    zbuf_ip_uv_stats(p.ua, &st);
    cr_assert_leq(st.iterations, 1);
    zbuf_ip_tcp_abort(c);
    up_pair_fini(&p);
}

static void stop_loop(uv_timer_t *t)
{
    uv_stop(t->loop);
}

/* Idle for `ms` with the loop running: count the wake-ups. */
static void measure_idle(up_pair_t *p, uint64_t ms, zbuf_ip_uv_stats_t *da, uint64_t *cpu)
{
    zbuf_ip_uv_stats_t s0;
    zbuf_ip_uv_stats(p->ua, &s0);
    uv_timer_t t;
    uv_timer_init(&p->loop, &t);
    uv_timer_start(&t, stop_loop, ms, 0);
    uint64_t c0 = cpu_us();
    uv_run(&p->loop, UV_RUN_DEFAULT);
    *cpu = cpu_us() - c0;
    zbuf_ip_uv_stats(p->ua, da);
    da->iterations -= s0.iterations;
    da->polls -= s0.polls;
    da->timer_wakeups -= s0.timer_wakeups;
    da->rearms -= s0.rearms;
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(&p->loop, UV_RUN_NOWAIT);
}

Test(ip_uv, idle_loop_blocks_instead_of_spinning)
{
    up_pair_t p;
    struct small m;
    up_pair_init(&p, NULL, NULL, 20000);
    small_connect(&m, &p);
    uv_run(&p.loop, UV_RUN_NOWAIT);
    /* Let the handshake's delayed ACKs and the like settle. */
    zbuf_ip_uv_stats_t st;
    uint64_t cpu;
    measure_idle(&p, 200, &st, &cpu);
    measure_idle(&p, 500, &st, &cpu);
    fprintf(stderr, "idle 500 ms with an open connection: %llu iterations, %llu polls, "
            "%llu timer wake-ups, %llu us CPU\n", (unsigned long long)st.iterations,
            (unsigned long long)st.polls, (unsigned long long)st.timer_wakeups,
            (unsigned long long)cpu);
    cr_assert_leq(st.iterations, 10, "the loop spins: %llu iterations in 500 ms",
                  (unsigned long long)st.iterations);
    cr_assert_leq(st.polls, 5);
    cr_assert_lt(cpu, 100000, "%llu us of CPU while idle", (unsigned long long)cpu);

    /* TIME_WAIT: a deadline far ahead must not wake the loop either. */
    zbuf_ip_tcp_close(m.client);
    run_for(&p, 100);
    measure_idle(&p, 500, &st, &cpu);
    fprintf(stderr, "idle 500 ms in TIME_WAIT: %llu iterations, %llu polls\n",
            (unsigned long long)st.iterations, (unsigned long long)st.polls);
    cr_assert_leq(st.iterations, 10);
    zbuf_ip_tcp_close(m.listener);
    up_pair_fini(&p);
}

/* --------------------------------------------------------- API contract */

Test(ip_uv, argument_errors_change_nothing)
{
    up_pair_t p;
    up_pair_init(&p, NULL, NULL, 20000);
    zbuf_ip_uv_t *h = (zbuf_ip_uv_t *)&p; /* must not be written */
    cr_assert_eq(zbuf_ip_uv_attach(NULL, p.a, &h), -EINVAL);
    cr_assert_eq(zbuf_ip_uv_attach(&p.loop, NULL, &h), -EINVAL);
    cr_assert_eq(zbuf_ip_uv_attach(&p.loop, p.a, NULL), -EINVAL);
    cr_assert_eq(h, (zbuf_ip_uv_t *)&p);
    /* An in-memory link has no descriptor to watch. */
    cr_assert_eq(zbuf_ip_uv_watch(p.ua, p.na), -EINVAL);
    cr_assert_eq(zbuf_ip_uv_watch(p.ua, p.nb), -EINVAL, "B's interface is not A's");
    cr_assert_eq(zbuf_ip_uv_unwatch(p.ua, p.na), -ENOENT);
    cr_assert_eq(zbuf_ip_uv_netif_remove(p.ua, p.nb), -EINVAL);
    cr_assert_eq(zbuf_ip_uv_close(NULL, NULL, NULL), -EINVAL);
    cr_assert_eq(zbuf_ip_uv_stack(p.ua), p.a);
    cr_assert_eq(zbuf_ip_uv_loop(p.ub), &p.loop);
    zbuf_ip_uv_stats_t st;
    zbuf_ip_uv_stats(NULL, &st);
    cr_assert_eq(st.polls, 0);
    /* Removing an interface through the integration works without a watch. */
    cr_assert_eq(zbuf_ip_uv_netif_remove(p.ua, p.na), 0);
    cr_assert_eq(zbuf_ip_ping(p.a, ZH_B, 1, 1, NULL), -ENETUNREACH);
    up_pair_fini(&p);
}

struct ping_count {
    int replies;
};

static void on_ping(void *arg, uint32_t from, uint16_t id, uint16_t seq, zbuf_t *data)
{
    (void)from;
    (void)id;
    (void)seq;
    zbuf_delete(data);
    ((struct ping_count *)arg)->replies++;
}

static struct ping_count pings;

static void check_pings(uv_timer_t *t)
{
    if (pings.replies >= 3) {
        up_pair_detach(t->data);
        uv_close((uv_handle_t *)t, NULL);
    }
}

Test(ip_uv, ping_over_the_link_resolves_arp_from_the_loop)
{
    zbuf_ip_config_t cfg;
    zbuf_ip_config_init(&cfg);
    cfg.ping_reply = on_ping;
    cfg.ping_arg = &pings;
    up_pair_t p;
    zbuf_ip_link_config_t lc = {.delay_ms = 3};
    up_pair_init(&p, &cfg, &lc, 10000);
    for (uint16_t i = 0; i < 3; i++)
        cr_assert_eq(zbuf_ip_ping(p.a, ZH_B, 7, i, NULL), 0);
    uv_timer_t t;
    uv_timer_init(&p.loop, &t);
    t.data = &p;
    uv_timer_start(&t, check_pings, 1, 1);
    uv_run(&p.loop, UV_RUN_DEFAULT);
    cr_assert_not(p.timed_out);
    cr_assert_eq(pings.replies, 3);
    up_pair_fini(&p);
}
