/* SPDX-License-Identifier: MIT */
/* Stress: many concurrent connections both ways over an impaired link,
 * connection churn through the PCB table, and a SYN flood on a listener.
 * Every loop is bounded in steps and in virtual time, so a hang fails. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"
#include "harness.h"

ZT_SUITE(stress);

/* ------------------------------------------------------------ common */

/* Payload by reference: byte `off` of a stream with shift `sh` is
 * pat[(off + sh) % PAT_PERIOD]; the tail repeats the head so that any slice
 * of up to PAT_SLICE bytes is one contiguous piece of this array. */
#define PAT_PERIOD 65521u
#define PAT_SLICE 16384u
static uint8_t pat[PAT_PERIOD + PAT_SLICE];

static void pat_init(void)
{
    for (uint32_t k = 0; k < PAT_PERIOD; k++)
        pat[k] = zh_pattern(k, 77);
    for (uint32_t k = 0; k < PAT_SLICE; k++)
        pat[PAT_PERIOD + k] = pat[k];
}

static uint8_t *pat_at(uint64_t off, uint32_t sh)
{
    return pat + (off + sh) % PAT_PERIOD;
}

/* Counts one release in the long pointed to by arg. */
static void count_release(void *data, size_t size, void *arg)
{
    (void)data;
    (void)size;
    (*(long *)arg)++;
}

/* Queue `n` pattern bytes at stream offset `off` by reference. */
static int write_slice(zbuf_ip_tcp_t *pcb, uint64_t off, uint32_t sh, size_t n, long *made,
                       long *released)
{
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_buf(z, pat_at(off, sh), n, count_release, released), 0);
    (*made)++;
    int rc = zbuf_ip_tcp_write(pcb, z);
    if (rc != 0)
        zbuf_delete(z); /* not taken: the release runs now */
    return rc;
}

/* Verify `d` in place against the pattern from stream offset `off`;
 * returns the offset of the first wrong byte, or UINT64_MAX. */
static uint64_t pat_verify(zbuf_t *d, uint64_t off, uint32_t sh)
{
    for (zbuf_seg_t *s = zbuf_seg_first(d); s; s = zbuf_seg_next(d, s)) {
        const uint8_t *q = zbuf_seg_data(d, s);
        size_t n = zbuf_seg_length(d, s);
        for (size_t i = 0; i < n; i++)
            if (q[i] != *pat_at(off + i, sh))
                return off + i;
        off += n;
    }
    return UINT64_MAX;
}

static zbuf_ip_stats_t stats_of(zbuf_ip_stack_t *s)
{
    zbuf_ip_stats_t st;
    zbuf_ip_stats(s, &st);
    return st;
}

static void print_counters(const char *name, zh_pair_t *p, uint64_t t0, long steps)
{
    zbuf_ip_stats_t a = stats_of(p->a), b = stats_of(p->b);
    zbuf_ip_link_stats_t ls;
    zbuf_ip_link_stats(p->link, &ls);
    fprintf(stderr,
            "%s: %llu ms virtual, %ld steps; retransmits %llu, RTOs %llu, fast recoveries %llu, "
            "window probes %llu, spurious RTO undos %llu, cwnd undos %llu, TLPs %llu, "
            "RSTs sent %llu, challenge ACKs %llu, PCB refusals %llu, collapsed %llu bytes, "
            "memory drops %llu, ooo pruned %llu; link lost %llu dup %llu "
            "reordered %llu overflow %llu\n",
            name, (unsigned long long)(p->now - t0), steps,
            (unsigned long long)(a.tcp_retransmits + b.tcp_retransmits),
            (unsigned long long)(a.tcp_rto + b.tcp_rto),
            (unsigned long long)(a.tcp_fast_retransmits + b.tcp_fast_retransmits),
            (unsigned long long)(a.tcp_window_probes + b.tcp_window_probes),
            (unsigned long long)(a.tcp_spurious_rto + b.tcp_spurious_rto),
            (unsigned long long)(a.tcp_spurious_undo + b.tcp_spurious_undo),
            (unsigned long long)(a.tcp_tlp + b.tcp_tlp),
            (unsigned long long)(a.tcp_rst_tx + b.tcp_rst_tx),
            (unsigned long long)(a.tcp_challenge_acks + b.tcp_challenge_acks),
            (unsigned long long)(a.tcp_pcb_limit + b.tcp_pcb_limit),
            (unsigned long long)(a.rx_collapsed_bytes + b.rx_collapsed_bytes),
            (unsigned long long)(a.tcp_rcv_mem_drops + b.tcp_rcv_mem_drops),
            (unsigned long long)(a.tcp_ooo_pruned + b.tcp_ooo_pruned), (unsigned long long)ls.lost,
            (unsigned long long)ls.duplicated, (unsigned long long)ls.reordered,
            (unsigned long long)ls.overflow);
}

/* Poll both stacks and run `step` (the application: it may call into the
 * stacks, and returns true when finished) between polls; virtual time jumps
 * to the next stack deadline or `wake` (the application's next timer).
 * Fails the test after `max_ms` of virtual time or `max_steps` iterations. */
static bool run_app(zh_pair_t *p, bool (*step)(void *), uint64_t (*wake)(void *), void *arg,
                    uint64_t max_ms, long max_steps, long *steps)
{
    uint64_t end = p->now + max_ms;
    for (long n = 0; n < max_steps; n++, (*steps)++) {
        if (step(arg))
            return true;
        if (zbuf_ip_poll(p->a) + zbuf_ip_poll(p->b) > 0)
            continue;
        uint64_t da = zbuf_ip_next_deadline(p->a), db = zbuf_ip_next_deadline(p->b);
        uint64_t d = da < db ? da : db;
        uint64_t w = wake ? wake(arg) : ZBUF_IP_NEVER;
        if (w < d)
            d = w;
        if (d == ZBUF_IP_NEVER)
            return step(arg);
        if (d <= p->now)
            d = p->now + 1;
        if (d > end)
            return step(arg);
        p->now = d;
    }
    return false;
}

static bool no_pcbs(void *arg)
{
    zh_pair_t *p = arg;
    return stats_of(p->a).tcp_pcbs == 0 && stats_of(p->b).tcp_pcbs == 0;
}

/* ===================================================== 128 connections */

#define NCONN 128
enum close_kind { K_SHUT, K_SIMUL, K_CLOSE, K_ABORT };

struct conn;
struct end {
    struct conn *c;
    int side; /* 0: on A, 1: on B */
    zbuf_ip_tcp_t *pcb;
    uint64_t tx_total, written, rx_total, received;
    uint32_t tx_sh, rx_sh;
    size_t slice;
    long made, released;
    size_t unread;       /* received, recved() not yet called (slow readers) */
    uint32_t read_every; /* ms between recved() calls; 0: at once */
    uint64_t next_read;
    bool up, eof, shut, closed, aborted;
    int errors, err, eofs;
    uint64_t bad_at; /* first wrong byte, UINT64_MAX if none */
};
struct conn {
    int idx;
    enum close_kind kind;
    int active; /* side that connects */
    int aborter;
    uint16_t port; /* the active side's local port */
    struct end e[2];
};

struct many {
    zh_pair_t *p;
    struct conn c[NCONN];
    int done;
};

static void m_fill(struct end *e)
{
    while (e->pcb && !e->closed && e->written < e->tx_total) {
        uint64_t left = e->tx_total - e->written;
        size_t n = left < e->slice ? (size_t)left : e->slice;
        if (n > zbuf_ip_tcp_sndbuf(e->pcb))
            return;
        cr_assert_eq(write_slice(e->pcb, e->written, e->tx_sh, n, &e->made, &e->released), 0);
        e->written += n;
    }
}

static void m_recv(void *arg, zbuf_ip_tcp_t *pcb, zbuf_t *d)
{
    struct end *e = arg;
    if (d == NULL) {
        e->eof = true;
        e->eofs++;
        return;
    }
    size_t n = zbuf_length(d);
    if (e->bad_at == UINT64_MAX) {
        if (e->received + n > e->rx_total)
            e->bad_at = e->rx_total;
        else
            e->bad_at = pat_verify(d, e->received, e->rx_sh);
    }
    e->received += n;
    zbuf_delete(d);
    if (e->read_every == 0)
        zbuf_ip_tcp_recved(pcb, n);
    else
        e->unread += n;
}

static void m_sent(void *arg, zbuf_ip_tcp_t *pcb, size_t n)
{
    (void)pcb;
    (void)n;
    m_fill(arg);
}

static void m_error(void *arg, int err)
{
    struct end *e = arg;
    e->errors++;
    e->err = err;
    e->pcb = NULL;
}

static void m_connected(void *arg, zbuf_ip_tcp_t *pcb)
{
    struct end *e = arg;
    e->up = true;
    e->pcb = pcb;
    m_fill(e);
}

static const zbuf_ip_tcp_callbacks_t m_cbs = {
    .connected = m_connected, .recv = m_recv, .sent = m_sent, .error = m_error};

/* Listener of side `side`: find the connection by the peer's port. */
static int m_accept_side(struct many *m, int side, zbuf_ip_tcp_t *c)
{
    zbuf_ip_tcp_info_t in;
    cr_assert_eq(zbuf_ip_tcp_info(c, &in), 0);
    for (int i = 0; i < NCONN; i++) {
        struct conn *k = &m->c[i];
        if (k->active != side && k->port == in.remote_port) {
            struct end *e = &k->e[side];
            cr_assert(!e->up, "connection %d accepted twice", i);
            e->up = true;
            e->pcb = c;
            zbuf_ip_tcp_set_callbacks(c, &m_cbs, e);
            m_fill(e);
            return 0;
        }
    }
    cr_assert_fail("accepted an unknown connection from port %u", in.remote_port);
    return -ECONNREFUSED;
}

static int m_accept_a(void *arg, zbuf_ip_tcp_t *l, zbuf_ip_tcp_t *c)
{
    (void)l;
    return m_accept_side(arg, 0, c);
}

static int m_accept_b(void *arg, zbuf_ip_tcp_t *l, zbuf_ip_tcp_t *c)
{
    (void)l;
    return m_accept_side(arg, 1, c);
}

static bool end_done(const struct end *e)
{
    return e->closed || e->errors;
}

static bool all_in(const struct end *e)
{
    return e->written == e->tx_total && e->received == e->rx_total;
}

static void close_end(struct end *e)
{
    zbuf_ip_tcp_close(e->pcb);
    e->pcb = NULL;
    e->closed = true;
}

static void m_step_end(struct many *m, struct conn *k, struct end *e)
{
    uint64_t now = m->p->now;
    if (e->pcb && e->unread && now >= e->next_read) {
        zbuf_ip_tcp_recved(e->pcb, e->unread);
        e->unread = 0;
        e->next_read = now + e->read_every;
    }
    if (e->pcb == NULL || e->closed)
        return;
    switch (k->kind) {
    case K_SHUT:
        if (!e->shut && e->written == e->tx_total) {
            cr_assert_eq(zbuf_ip_tcp_shutdown(e->pcb), 0);
            e->shut = true;
        }
        if (e->shut && e->eof)
            close_end(e);
        break;
    case K_CLOSE:
        if (e->side == k->active ? all_in(e) : e->eof && e->written == e->tx_total)
            close_end(e);
        break;
    case K_SIMUL: {
        struct end *o = &k->e[1 - e->side];
        if (o->pcb && all_in(e) && all_in(o)) {
            close_end(e);
            close_end(o); /* both FINs cross on the link */
        }
        break;
    }
    case K_ABORT:
        if (e->side == k->aborter && e->received >= e->rx_total / 3) {
            zbuf_ip_tcp_abort(e->pcb);
            e->pcb = NULL;
            e->closed = e->aborted = true;
        }
        break;
    }
}

static bool m_step(void *arg)
{
    struct many *m = arg;
    int done = 0;
    for (int i = 0; i < NCONN; i++) {
        struct conn *k = &m->c[i];
        for (int s = 0; s < 2; s++)
            m_step_end(m, k, &k->e[s]);
        done += end_done(&k->e[0]) && end_done(&k->e[1]);
    }
    m->done = done;
    return done == NCONN;
}

static uint64_t m_wake(void *arg)
{
    struct many *m = arg;
    uint64_t w = ZBUF_IP_NEVER;
    for (int i = 0; i < NCONN; i++)
        for (int s = 0; s < 2; s++) {
            const struct end *e = &m->c[i].e[s];
            if (e->pcb && e->unread && e->next_read < w)
                w = e->next_read;
        }
    return w;
}

static uint64_t m_size(int i, int dir)
{
    unsigned k = (unsigned)(i * 7 + dir * 3) % 10; /* 1 KiB .. 512 KiB */
    uint64_t n = (uint64_t)1024 << k;
    if (k < 9)
        n += (uint64_t)(i * 37 + dir * 101) % 1000;
    return n;
}

static void m_setup(struct many *m, zh_pair_t *p)
{
    memset(m, 0, sizeof *m);
    m->p = p;
    for (int i = 0; i < NCONN; i++) {
        struct conn *k = &m->c[i];
        k->idx = i;
        k->active = i & 1;
        /* 6 of 8: shutdown then close, simultaneous, or plain close; a few
         * (i % 16 == 7) aborted midway by either side. */
        k->kind = i % 16 == 7 ? K_ABORT : (enum close_kind)(i % 3);
        k->aborter = (i / 16) & 1;
        for (int s = 0; s < 2; s++) {
            struct end *e = &k->e[s];
            e->c = k;
            e->side = s;
            e->tx_total = k->kind == K_ABORT ? 512 * 1024 - (uint64_t)s * 100000 : m_size(i, s);
            e->tx_sh = (uint32_t)(i * 7919 + s * 31337) % PAT_PERIOD;
            e->slice = 1000 + (size_t)(i * 523 + s * 97) % (PAT_SLICE - 1000);
            e->bad_at = UINT64_MAX;
            /* Slow readers: recved() every 250 or 1000 ms, so windows close and
             * the peers probe (the persist timer starts at the RTO, which the
             * pauses inflate beyond 600 ms). */
            e->read_every = (i + s) % 6 == 1 ? 250 : (i + s) % 6 == 4 ? 1000 : 0;
        }
        k->e[0].rx_total = k->e[1].tx_total;
        k->e[1].rx_total = k->e[0].tx_total;
        k->e[0].rx_sh = k->e[1].tx_sh;
        k->e[1].rx_sh = k->e[0].tx_sh;
    }
}

/* One run: `no_ts` turns timestamps off (F-RTO instead of Eifel),
 * `nic` makes the link copy frames into pool buffers like a NIC. */
static void many_run(uint64_t seed, bool no_ts, bool nic)
{
    pat_init();
    zbuf_ip_link_config_t lc = {.loss = 0.02, .dup = 0.01, .reorder = 0.01, .delay_ms = 2,
                                .reorder_ms = 3, .seed = seed, .copy_to_pool = nic,
                                .pool_bufs = 8192};
    zbuf_ip_config_t cfg;
    zbuf_ip_config_init(&cfg);
    cfg.tcp_rcv_buf = 64 * 1024; /* slow readers close their windows quickly */
    cfg.tcp_time_wait_ms = 2000;
    cfg.tcp_no_timestamps = no_ts;
    zh_pair_t p;
    zh_pair_init(&p, &lc, &cfg);
    static struct many m;
    m_setup(&m, &p);

    zbuf_ip_tcp_t *la, *lb;
    cr_assert_eq(zbuf_ip_tcp_new(p.a, &la), 0);
    cr_assert_eq(zbuf_ip_tcp_new(p.b, &lb), 0);
    cr_assert_eq(zbuf_ip_tcp_bind(la, ZBUF_IP_ANY, 6000), 0);
    cr_assert_eq(zbuf_ip_tcp_bind(lb, ZBUF_IP_ANY, 6000), 0);
    cr_assert_eq(zbuf_ip_tcp_listen(la, NCONN), 0);
    cr_assert_eq(zbuf_ip_tcp_listen(lb, NCONN), 0);
    zbuf_ip_tcp_callbacks_t ca = {.accept = m_accept_a}, cb = {.accept = m_accept_b};
    zbuf_ip_tcp_set_callbacks(la, &ca, &m);
    zbuf_ip_tcp_set_callbacks(lb, &cb, &m);

    zbuf_stats_t z0, z1;
    zbuf_stats_get(&z0);
    uint64_t t0 = p.now;
    for (int i = 0; i < NCONN; i++) {
        struct conn *k = &m.c[i];
        struct end *e = &k->e[k->active];
        zbuf_ip_tcp_t *t;
        cr_assert_eq(zbuf_ip_tcp_new(k->active ? p.b : p.a, &t), 0);
        zbuf_ip_tcp_set_callbacks(t, &m_cbs, e);
        cr_assert_eq(zbuf_ip_tcp_connect(t, k->active ? ZH_A : ZH_B, 6000), 0);
        zbuf_ip_tcp_info_t in;
        cr_assert_eq(zbuf_ip_tcp_info(t, &in), 0);
        k->port = in.local_port;
    }
    long steps = 0;
    bool ok = run_app(&p, m_step, m_wake, &m, 600 * 1000, 4000000, &steps);
    char name[96];
    snprintf(name, sizeof name, "128 connections, seed %llu%s%s", (unsigned long long)seed,
             no_ts ? ", no timestamps" : "", nic ? ", NIC pool" : "");
    print_counters(name, &p, t0, steps);
    zbuf_stats_get(&z1);
    int aborts = 0;
    for (int i = 0; i < NCONN; i++) {
        struct conn *k = &m.c[i];
        for (int s = 0; s < 2; s++) {
            struct end *e = &k->e[s];
            cr_assert_eq(e->bad_at, UINT64_MAX, "connection %d side %d: wrong byte at %llu", i,
                         s, (unsigned long long)e->bad_at);
            cr_assert_leq(e->eofs, 1, "connection %d side %d: %d EOFs", i, s, e->eofs);
            if (k->kind != K_ABORT) {
                cr_assert_eq(e->errors, 0, "connection %d side %d failed: %d", i, s, e->err);
                cr_assert_eq(e->received, e->rx_total, "connection %d side %d: %llu of %llu",
                             i, s, (unsigned long long)e->received,
                             (unsigned long long)e->rx_total);
                cr_assert_eq(e->written, e->tx_total);
            } else if (s == k->aborter) {
                cr_assert(e->aborted && e->errors == 0, "connection %d side %d", i, s);
                cr_assert_lt(e->received, e->rx_total, "connection %d: not aborted midway", i);
                aborts++;
            } else {
                cr_assert_eq(e->errors, 1, "connection %d: the peer of the abort saw %d errors", i,
                             e->errors);
                cr_assert_eq(e->err, -ECONNRESET, "connection %d: error %d", i, e->err);
            }
        }
    }
    cr_assert(ok, "%d of %d connections finished in %llu ms, %ld steps", m.done, NCONN,
              (unsigned long long)(p.now - t0), steps);
    cr_assert_eq(aborts, NCONN / 16);
    /* Zero copy, except the compact copies the stack makes when a pool
     * nears its reserve or a connection its memory limit (128 slow readers
     * whose windows fill with small segments get there): each of those is
     * accounted. */
    zbuf_ip_stats_t sa = stats_of(p.a), sb = stats_of(p.b);
    cr_assert_eq(z1.bytes_copied - z0.bytes_copied, sa.rx_collapsed_bytes + sb.rx_collapsed_bytes,
                 "library copied %llu bytes, %llu of them collapses",
                 (unsigned long long)(z1.bytes_copied - z0.bytes_copied),
                 (unsigned long long)(sa.rx_collapsed_bytes + sb.rx_collapsed_bytes));
    cr_assert_eq(sa.rx_no_buffer + sb.rx_no_buffer, 0, "a pool ran dry");
    cr_assert_gt(sa.tcp_retransmits + sb.tcp_retransmits, 0);
    cr_assert_geq(sa.tcp_window_probes + sb.tcp_window_probes, 10, "too few zero-window probes");

    /* Listeners go; every connection leaves TIME_WAIT within its 2 s. */
    zbuf_ip_tcp_close(la);
    zbuf_ip_tcp_close(lb);
    long steps2 = 0;
    cr_assert(run_app(&p, no_pcbs, NULL, &p, 120 * 1000, 1000000, &steps2),
              "PCBs left: %u on A, %u on B", stats_of(p.a).tcp_pcbs, stats_of(p.b).tcp_pcbs);
    /* Every buffer was acknowledged or dropped with its connection. */
    for (int i = 0; i < NCONN; i++)
        for (int s = 0; s < 2; s++) {
            struct end *e = &m.c[i].e[s];
            cr_assert_eq(e->released, e->made, "connection %d side %d: %ld of %ld released", i,
                         s, e->released, e->made);
        }
    zh_pair_fini(&p);
    for (int i = 0; i < NCONN; i++)
        for (int s = 0; s < 2; s++)
            cr_assert_eq(m.c[i].e[s].released, m.c[i].e[s].made, "released twice");
}

Test(stress, many_connections_both_ways_over_lossy_link, .timeout = 240)
{
    many_run(4242, false, false);
    many_run(7, true, false);
    many_run(8, false, true);
}

/* ======================================================= churn */

#define CHURN_N 2000
#define CHURN_SEQ 200 /* the first ones one at a time, the rest 64 at a time */
#define CHURN_WAVE 64
#define CHURN_PORT 7000

struct churn;
struct rr {
    struct churn *ch;
    zbuf_ip_tcp_t *cli, *srv;
    uint64_t req, resp;        /* bytes of request and response */
    uint64_t srv_got, cli_got; /* received so far */
    bool started, srv_up, cli_closed, srv_closed, cli_first;
    int errors, err;
    uint64_t bad_at;
    long made, released;
};

struct churn {
    zh_pair_t *p;
    struct rr r[CHURN_N];
    int16_t by_port[65536]; /* client port -> request in flight, -1 */
    int next, limit, inflight, done, connect_fail;
    uint32_t max_pcbs_a, max_pcbs_b;
};

static uint32_t rr_sh(const struct rr *r, int dir)
{
    return (uint32_t)((r - r->ch->r) * 131 + dir * 7) % PAT_PERIOD;
}

static void rr_finish_side(struct rr *r, bool client)
{
    zbuf_ip_tcp_t **pcb = client ? &r->cli : &r->srv;
    zbuf_ip_tcp_close(*pcb);
    *pcb = NULL;
    if (client)
        r->cli_closed = true;
    else
        r->srv_closed = true;
    if (r->cli_closed && r->srv_closed) {
        r->ch->inflight--;
        r->ch->done++;
    }
}

/* Verify, count and consume received bytes of direction `dir`. */
static void rr_take(struct rr *r, zbuf_ip_tcp_t *pcb, zbuf_t *d, uint64_t *got, uint64_t total,
                    int dir)
{
    size_t n = zbuf_length(d);
    if (r->bad_at == UINT64_MAX)
        r->bad_at = *got + n > total ? total : pat_verify(d, *got, rr_sh(r, dir));
    *got += n;
    zbuf_ip_tcp_recved(pcb, n);
    zbuf_delete(d);
}

static void rr_srv_recv(void *arg, zbuf_ip_tcp_t *pcb, zbuf_t *d)
{
    struct rr *r = arg;
    if (d == NULL) { /* the client closed first */
        rr_finish_side(r, false);
        return;
    }
    rr_take(r, pcb, d, &r->srv_got, r->req, 0);
    if (r->srv_got == r->req) {
        cr_assert_eq(write_slice(pcb, 0, rr_sh(r, 1), (size_t)r->resp, &r->made,
                                 &r->released),
                     0);
        if (!r->cli_first)
            rr_finish_side(r, false); /* the response, then our FIN */
    }
}

static void rr_cli_recv(void *arg, zbuf_ip_tcp_t *pcb, zbuf_t *d)
{
    struct rr *r = arg;
    if (d == NULL) { /* the server closed first */
        if (r->cli_got != r->resp)
            r->bad_at = r->cli_got;
        rr_finish_side(r, true);
        return;
    }
    rr_take(r, pcb, d, &r->cli_got, r->resp, 1);
    if (r->cli_got == r->resp && r->cli_first)
        rr_finish_side(r, true);
}

static void rr_error(void *arg, int err)
{
    struct rr *r = arg;
    r->errors++;
    r->err = err;
}

static void rr_connected(void *arg, zbuf_ip_tcp_t *pcb)
{
    struct rr *r = arg;
    cr_assert_eq(write_slice(pcb, 0, rr_sh(r, 0), (size_t)r->req, &r->made,
                             &r->released),
                 0);
}

static const zbuf_ip_tcp_callbacks_t rr_cli_cbs = {
    .connected = rr_connected, .recv = rr_cli_recv, .error = rr_error};
static const zbuf_ip_tcp_callbacks_t rr_srv_cbs = {.recv = rr_srv_recv, .error = rr_error};

static int rr_accept(void *arg, zbuf_ip_tcp_t *l, zbuf_ip_tcp_t *c)
{
    (void)l;
    struct churn *ch = arg;
    zbuf_ip_tcp_info_t in;
    cr_assert_eq(zbuf_ip_tcp_info(c, &in), 0);
    int i = ch->by_port[in.remote_port];
    cr_assert_geq(i, 0, "accepted an unknown client port %u", in.remote_port);
    struct rr *r = &ch->r[i];
    cr_assert(!r->srv_up, "request %d accepted twice", i);
    r->srv_up = true;
    r->srv = c;
    zbuf_ip_tcp_set_callbacks(c, &rr_srv_cbs, r);
    return 0;
}

static void rr_start(struct churn *ch)
{
    int i = ch->next++;
    struct rr *r = &ch->r[i];
    r->started = true;
    zbuf_ip_tcp_t *t;
    int rc = zbuf_ip_tcp_new(ch->p->a, &t);
    cr_assert_eq(rc, 0, "request %d: no PCB (%d)", i, rc);
    r->cli = t;
    zbuf_ip_tcp_set_callbacks(t, &rr_cli_cbs, r);
    rc = zbuf_ip_tcp_connect(t, ZH_B, CHURN_PORT);
    if (rc != 0) {
        ch->connect_fail++;
        cr_assert_fail("request %d: connect %d", i, rc);
    }
    zbuf_ip_tcp_info_t in;
    cr_assert_eq(zbuf_ip_tcp_info(t, &in), 0);
    cr_assert_lt(ch->by_port[in.local_port], 0, "request %d: port %u used again", i,
                 in.local_port);
    ch->by_port[in.local_port] = (int16_t)i;
    ch->inflight++;
}

static bool churn_step(void *arg)
{
    struct churn *ch = arg;
    uint32_t pa = stats_of(ch->p->a).tcp_pcbs, pb = stats_of(ch->p->b).tcp_pcbs;
    cr_assert_leq(pa, ZBUF_IP_TCP_PCBS);
    cr_assert_leq(pb, ZBUF_IP_TCP_PCBS);
    if (pa > ch->max_pcbs_a)
        ch->max_pcbs_a = pa;
    if (pb > ch->max_pcbs_b)
        ch->max_pcbs_b = pb;
    while (ch->next < ch->limit && ch->inflight < (ch->next < CHURN_SEQ ? 1 : CHURN_WAVE))
        rr_start(ch);
    for (int i = 0; i < ch->next; i++)
        if (ch->r[i].errors)
            return true;
    return ch->done == ch->limit;
}

Test(stress, connection_churn_recycles_time_wait, .timeout = 240)
{
    pat_init();
    zbuf_ip_link_config_t lc = {.loss = 0.01, .dup = 0.01, .reorder = 0.01, .delay_ms = 1,
                                .reorder_ms = 2, .seed = 99};
    zh_pair_t p;
    zh_pair_init(&p, &lc, NULL); /* TIME_WAIT the default 60 s: the table fills */
    static struct churn ch;
    memset(&ch, 0, sizeof ch);
    memset(ch.by_port, 0xff, sizeof ch.by_port);
    ch.p = &p;
    for (int i = 0; i < CHURN_N; i++) {
        ch.r[i].ch = &ch;
        ch.r[i].req = 20 + (uint64_t)(i * 37) % 500;
        ch.r[i].resp = 100 + (uint64_t)(i * 53) % 4000;
        ch.r[i].cli_first = (i & 1) == 0;
        ch.r[i].bad_at = UINT64_MAX;
    }
    zbuf_ip_tcp_t *l;
    cr_assert_eq(zbuf_ip_tcp_new(p.b, &l), 0);
    cr_assert_eq(zbuf_ip_tcp_bind(l, ZBUF_IP_ANY, CHURN_PORT), 0);
    cr_assert_eq(zbuf_ip_tcp_listen(l, CHURN_WAVE), 0);
    zbuf_ip_tcp_callbacks_t lcb = {.accept = rr_accept};
    zbuf_ip_tcp_set_callbacks(l, &lcb, &ch);

    uint64_t t0 = p.now;
    long steps = 0;
    ch.limit = CHURN_N;
    bool ok = run_app(&p, churn_step, NULL, &ch, 600 * 1000, 4000000, &steps);
    print_counters("churn", &p, t0, steps);
    fprintf(stderr, "churn: %d done, most PCBs at once %u on A, %u on B\n", ch.done,
            ch.max_pcbs_a, ch.max_pcbs_b);
    for (int i = 0; i < CHURN_N; i++) {
        struct rr *r = &ch.r[i];
        cr_assert_eq(r->errors, 0, "request %d failed: %d", i, r->err);
        cr_assert_eq(r->bad_at, UINT64_MAX, "request %d: wrong byte at %llu", i,
                     (unsigned long long)r->bad_at);
    }
    cr_assert(ok, "%d of %d done in %llu ms", ch.done, CHURN_N, (unsigned long long)(p.now - t0));
    cr_assert_eq(ch.connect_fail, 0);
    zbuf_ip_stats_t sa = stats_of(p.a), sb = stats_of(p.b);
    cr_assert_eq(sa.tcp_pcb_limit + sb.tcp_pcb_limit, 0, "a connection was refused a PCB");
    cr_assert_eq(ch.max_pcbs_a, ZBUF_IP_TCP_PCBS, "the client's table never filled: no recycling");

    zbuf_ip_tcp_close(l);
    long steps2 = 0;
    cr_assert(run_app(&p, no_pcbs, NULL, &p, ZBUF_IP_TCP_TIME_WAIT_MS + 60000, 1000000, &steps2),
              "PCBs left: %u on A, %u on B", stats_of(p.a).tcp_pcbs, stats_of(p.b).tcp_pcbs);
    for (int i = 0; i < CHURN_N; i++)
        cr_assert_eq(ch.r[i].released, ch.r[i].made, "request %d: %ld of %ld released", i,
                     ch.r[i].released, ch.r[i].made);
    zh_pair_fini(&p);
}

/* ===================================================== SYN flood */

#define FLOOD_PORT 8000

struct flood {
    zh_pair_t *p;
    struct end a[ZBUF_IP_TCP_PCBS];  /* clients on A: one per PCB A has */
    struct end b[ZBUF_IP_TCP_PCBS + 8]; /* accepted on B, held */
    int held;
    bool closing; /* B closed some: its PCBs include closing ones */
    uint32_t max_half_open;
};

static void f_recv(void *arg, zbuf_ip_tcp_t *pcb, zbuf_t *d)
{
    struct end *e = arg;
    if (d) {
        zbuf_ip_tcp_recved(pcb, zbuf_length(d));
        zbuf_delete(d);
        return;
    }
    e->eofs++;
    zbuf_ip_tcp_close(pcb);
    e->pcb = NULL;
    e->closed = true;
}

static void f_connected(void *arg, zbuf_ip_tcp_t *pcb)
{
    (void)pcb;
    ((struct end *)arg)->up = true;
}

static const zbuf_ip_tcp_callbacks_t f_cbs = {
    .connected = f_connected, .recv = f_recv, .error = m_error};

/* Keeps every connection and does nothing with it. */
static int f_accept(void *arg, zbuf_ip_tcp_t *l, zbuf_ip_tcp_t *c)
{
    (void)l;
    struct flood *f = arg;
    cr_assert_lt(f->held, ZBUF_IP_TCP_PCBS + 8, "more connections than clients");
    struct end *e = &f->b[f->held++];
    e->pcb = c;
    zbuf_ip_tcp_set_callbacks(c, &f_cbs, e);
    return 0;
}

/* B's half-open connections (SYN_RCVD) are its PCBs less the listener and
 * the established ones it holds, as long as it closed none. */
static void f_invariants(struct flood *f)
{
    uint32_t pb = stats_of(f->p->b).tcp_pcbs;
    cr_assert_leq(pb, ZBUF_IP_TCP_PCBS);
    if (f->closing)
        return;
    int open = 0;
    for (int i = 0; i < f->held; i++)
        open += f->b[i].pcb != NULL;
    uint32_t half = pb - 1 - (uint32_t)open;
    if (half > f->max_half_open)
        f->max_half_open = half;
    cr_assert_leq(half, ZBUF_IP_TCP_BACKLOG_MAX, "%u half-open connections", half);
}

static int f_count(struct flood *f)
{
    int n = 0;
    for (int i = 0; i < ZBUF_IP_TCP_PCBS; i++) {
        n += f->a[i].up;
        cr_assert_eq(f->a[i].errors, 0, "client %d failed: %d", i, f->a[i].err);
    }
    return n;
}

/* Every PCB of B in use, one client still knocking. */
static bool f_table_full(void *arg)
{
    struct flood *f = arg;
    f_invariants(f);
    return f->held == ZBUF_IP_TCP_PCBS - 1 && stats_of(f->p->b).tcp_pcb_limit > 0;
}

static bool f_all_connected(void *arg)
{
    struct flood *f = arg;
    f_invariants(f);
    return f_count(f) == ZBUF_IP_TCP_PCBS && f->held == ZBUF_IP_TCP_PCBS;
}

static bool f_a_empty(void *arg)
{
    struct flood *f = arg;
    f_invariants(f);
    return stats_of(f->p->a).tcp_pcbs == 0;
}

/* Without SYN cookies (a full backlog drops SYNs, the clients retry): the
 * backlog and PCB limits hold and every client gets in as room appears.
 * With cookies, test_hardening.c. */
Test(stress, syn_flood_stays_within_backlog_and_pcbs_and_recovers, .timeout = 240)
{
    zh_pair_t p;
    zbuf_ip_link_config_t lc = {.delay_ms = 1};
    zbuf_ip_config_t cfg;
    zbuf_ip_config_init(&cfg);
    cfg.tcp_no_syncookies = true;
    zh_pair_init(&p, &lc, &cfg);
    static struct flood f;
    memset(&f, 0, sizeof f);
    f.p = &p;
    zbuf_ip_tcp_t *l;
    cr_assert_eq(zbuf_ip_tcp_new(p.b, &l), 0);
    cr_assert_eq(zbuf_ip_tcp_bind(l, ZBUF_IP_ANY, FLOOD_PORT), 0);
    cr_assert_eq(zbuf_ip_tcp_listen(l, 100000), 0); /* clamped to the maximum */
    zbuf_ip_tcp_callbacks_t lcb = {.accept = f_accept};
    zbuf_ip_tcp_set_callbacks(l, &lcb, &f);
    /* Resolve ARP both ways first, so the flood is not cut by the ARP queue. */
    zbuf_ip_ping(p.a, ZH_B, 1, 1, NULL);
    zh_pair_run(&p, NULL, NULL, 100);

    /* Every PCB of A connects at once... */
    for (int i = 0; i < ZBUF_IP_TCP_PCBS; i++) {
        struct end *e = &f.a[i];
        cr_assert_eq(zbuf_ip_tcp_new(p.a, &e->pcb), 0);
        zbuf_ip_tcp_set_callbacks(e->pcb, &f_cbs, e);
        cr_assert_eq(zbuf_ip_tcp_connect(e->pcb, ZH_B, FLOOD_PORT), 0);
    }
    zbuf_ip_tcp_t *x;
    cr_assert_eq(zbuf_ip_tcp_new(p.a, &x), -ENOSPC);
    /* ... and A goes silent: B sees the SYNs, its SYN-ACKs go unanswered. */
    uint64_t t0 = p.now;
    zh_pair_stall(&p, p.a, 300);
    zbuf_ip_stats_t sb = stats_of(p.b);
    cr_assert_eq(sb.tcp_pcbs, 1 + ZBUF_IP_TCP_BACKLOG_MAX, "half-open connections beyond the backlog");
    cr_assert_eq(f.held, 0);

    /* A answers again: handshakes complete in backlog-sized batches as SYNs
     * are sent again, until B's table is full and a SYN is refused. */
    long steps = 0;
    cr_assert(run_app(&p, f_table_full, NULL, &f, 120 * 1000, 1000000, &steps),
              "held %d, PCB refusals %llu", f.held,
              (unsigned long long)stats_of(p.b).tcp_pcb_limit);
    cr_assert_eq(f_count(&f), ZBUF_IP_TCP_PCBS - 1);

    /* The flood stops: B's application closes half of what it held; their
     * TIME_WAIT PCBs are recycled for the client still trying. */
    f.closing = true;
    for (int i = 0; i < f.held; i += 2) {
        zbuf_ip_tcp_close(f.b[i].pcb);
        f.b[i].pcb = NULL;
        f.b[i].closed = true;
    }
    cr_assert(run_app(&p, f_all_connected, NULL, &f, 120 * 1000, 1000000, &steps),
              "%d of %d clients connected, %d accepted", f_count(&f), ZBUF_IP_TCP_PCBS, f.held);

    /* Everything closes; a new connection works as on a fresh stack. */
    for (int i = 0; i < f.held; i++)
        if (f.b[i].pcb) {
            zbuf_ip_tcp_close(f.b[i].pcb);
            f.b[i].pcb = NULL;
            f.b[i].closed = true;
        }
    cr_assert(run_app(&p, f_a_empty, NULL, &f, 120 * 1000, 1000000, &steps),
              "%u PCBs left on A", stats_of(p.a).tcp_pcbs);
    for (int i = 0; i < ZBUF_IP_TCP_PCBS; i++)
        cr_assert_eq(f.a[i].eofs, 1, "client %d", i);
    struct end late = {0};
    cr_assert_eq(zbuf_ip_tcp_new(p.a, &late.pcb), 0);
    zbuf_ip_tcp_set_callbacks(late.pcb, &f_cbs, &late);
    cr_assert_eq(zbuf_ip_tcp_connect(late.pcb, ZH_B, FLOOD_PORT), 0);
    int before = f.held;
    for (int i = 0; i < 1000 && !(late.up && f.held > before); i++)
        zh_pair_run(&p, NULL, NULL, 10);
    cr_assert(late.up && f.held == before + 1, "no connection after the flood");
    print_counters("SYN flood", &p, t0, steps);
    fprintf(stderr, "SYN flood: most half-open at once %u, PCB refusals %llu\n",
            f.max_half_open, (unsigned long long)stats_of(p.b).tcp_pcb_limit);
    zbuf_ip_tcp_abort(late.pcb);
    zbuf_ip_tcp_abort(f.b[before].pcb);
    zbuf_ip_tcp_close(l);
    cr_assert(zh_pair_run(&p, no_pcbs, &p, ZBUF_IP_TCP_TIME_WAIT_MS + 60000));
    zh_pair_fini(&p);
}
