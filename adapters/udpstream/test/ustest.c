/* SPDX-License-Identifier: MIT */
#include "ustest.h"


#include <stdlib.h>
#include <string.h>

#include "../src/internal.h"

uint64_t ut_scaled(uint64_t bytes, unsigned soak)
{
    const char *e = getenv("ZBUF_UDPSTREAM_SOAK");
    return e && *e && *e != '0' ? bytes * soak : bytes;
}

/* ----------------------------------------------------- virtual network */

struct unet_ep {
    struct unet *n;
    int side;
};
static struct unet_ep eps[2];

static uint64_t unet_clock(void *arg)
{
    return ((struct unet *)arg)->now;
}

static double frand(struct unet *n)
{
    return (double)(ut_rand(&n->rng) >> 11) / (double)(1ull << 53);
}

static bool pkt_less(const struct unet_pkt *a, const struct unet_pkt *b)
{
    return a->at < b->at || (a->at == b->at && a->seq < b->seq);
}

static void heap_push(struct unet *n, struct unet_pkt p)
{
    if (n->heap_n == n->heap_cap) {
        n->heap_cap = n->heap_cap ? n->heap_cap * 2 : 256;
        n->heap = realloc(n->heap, n->heap_cap * sizeof *n->heap);
        cr_assert_not_null(n->heap);
    }
    size_t i = n->heap_n++;
    while (i > 0 && pkt_less(&p, &n->heap[(i - 1) / 2])) {
        n->heap[i] = n->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    n->heap[i] = p;
}

static struct unet_pkt heap_pop(struct unet *n)
{
    struct unet_pkt top = n->heap[0], last = n->heap[--n->heap_n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n->heap_n)
            break;
        if (c + 1 < n->heap_n && pkt_less(&n->heap[c + 1], &n->heap[c]))
            c++;
        if (!pkt_less(&n->heap[c], &last))
            break;
        n->heap[i] = n->heap[c];
        i = c;
    }
    if (n->heap_n > 0)
        n->heap[i] = last;
    return top;
}

/* The emulated NIC: the datagram's bytes land in one receive buffer of
 * the other side (a device copy, not counted as the library's). */
static zbuf_t *nic_copy(struct unet *n, int to, const zbuf_t *d)
{
    zbuf_buf_t *b;
    size_t len = zbuf_length(d);
    if (len > zbuf_pool_buf_size(n->nic[to]) || zbuf_pool_get(n->nic[to], &b) < 0) {
        n->nic_drops++;
        return NULL;
    }
    struct iovec iov[64];
    int k = zbuf_iovec(d, 0, ZBUF_TO_END, iov, 64, NULL);
    uint8_t *p = zbuf_buf_data(b);
    for (int i = 0; i < k; i++) {
        memcpy(p, iov[i].iov_base, iov[i].iov_len);
        p += iov[i].iov_len;
    }
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    if (len > 0)
        cr_assert_eq(zbuf_append_ref(z, b, 0, len), 0);
    zbuf_buf_unref(b);
    return z;
}

static void schedule(struct unet *n, int to, const zbuf_t *d)
{
    uint64_t at = n->now + n->delay_us;
    if (n->jitter_us)
        at += ut_rand(&n->rng) % n->jitter_us;
    if (n->reorder > 0 && frand(n) < n->reorder)
        at += n->reorder_us;
    zbuf_t *z = nic_copy(n, to, d);
    if (z != NULL)
        heap_push(n, (struct unet_pkt){.at = at, .seq = n->seq++, .z = z, .to = to});
}

static void route(struct unet *n, int from, zbuf_t *d)
{
    n->sent++;
    if (n->tap != NULL && (d = n->tap(n, from, d, n->tap_arg)) == NULL)
        return;
    if (n->down || frand(n) < n->loss[from]) {
        n->lost++;
    } else {
        schedule(n, !from, d);
        if (n->dup > 0 && frand(n) < n->dup) {
            n->dups++;
            schedule(n, !from, d);
        }
    }
    zbuf_delete(d);
}

static int unet_send(void *ctx, zbuf_t **dg, unsigned cnt, const struct sockaddr *to,
                     socklen_t tolen)
{
    struct unet_ep *ep = ctx;
    struct unet *n = ep->n;
    (void)to, (void)tolen;
    unsigned take = cnt;
    if (n->refuse_every && ++n->send_calls % n->refuse_every == 0) {
        take = cnt / 2; /* the rest is refused: consumed, not sent */
        n->refused += cnt - take;
    }
    for (unsigned i = 0; i < cnt; i++) {
        if (i < take)
            route(n, ep->side, dg[i]);
        else
            zbuf_delete(dg[i]);
    }
    return take > 0 ? (int)take : -EAGAIN;
}

void unet_init(struct unet *n, uint64_t seed)
{
    memset(n, 0, sizeof *n);
    n->rng = seed * 0x9e3779b97f4a7c15ull + 1;
    n->now = 1000000;
    n->delay_us = 100;
    for (int i = 0; i < 2; i++) {
        n->addr[i].sin_family = AF_INET;
        n->addr[i].sin_port = htons((uint16_t)(4000 + i));
        n->addr[i].sin_addr.s_addr = htonl(0xc0000201u + (uint32_t)i);
        cr_assert_eq(zbuf_pool_create(2048, 8192, &n->nic[i]), 0);
    }
}

void unet_open(struct unet *n, const zbuf_udpstream_opts_t *o)
{
    zbuf_udpstream_opts_t oo;
    if (o)
        oo = *o;
    else
        zbuf_udpstream_opts_init(&oo);
    oo.clock = unet_clock;
    oo.clock_arg = n;
    static const zbuf_udpstream_transport_t t = {.send = unet_send};
    for (int i = 0; i < 2; i++)
        eps[i] = (struct unet_ep){.n = n, .side = i};
    cr_assert_eq(zbuf_udpstream_create(&oo, &t, &eps[1], NULL, 0, &n->s[1]), 0);
    cr_assert_eq(zbuf_udpstream_create(&oo, &t, &eps[0], (struct sockaddr *)&n->addr[1],
                                       sizeof n->addr[1], &n->s[0]),
                 0);
}

void unet_inject(struct unet *n, int from, zbuf_t *d, const struct sockaddr_in *spoof)
{
    const struct sockaddr_in *a = spoof ? spoof : &n->addr[from];
    zbuf_udpstream_input(n->s[!from], d, (const struct sockaddr *)a, sizeof *a);
}

bool unet_pump(void *arg)
{
    struct unet *n = arg;
    bool did = false;
    while (n->heap_n > 0 && n->heap[0].at <= n->now) {
        struct unet_pkt p = heap_pop(n);
        n->delivered++;
        zbuf_udpstream_input(n->s[p.to], p.z, (struct sockaddr *)&n->addr[!p.to],
                             sizeof n->addr[0]);
        did = true;
    }
    for (int i = 0; i < 2; i++)
        if (n->s[i])
            zbuf_udpstream_process(n->s[i]);
    if (did)
        return true;
    uint64_t next = n->heap_n ? n->heap[0].at : UINT64_MAX;
    for (int i = 0; i < 2; i++) {
        uint64_t d = n->s[i] ? zbuf_udpstream_next_deadline(n->s[i]) : UINT64_MAX;
        if (d < next)
            next = d;
    }
    if (next == UINT64_MAX) {
        /* Nothing will happen any more: fine if both streams are done. */
        unsigned done = ZBUF_UDPSTREAM_CLOSED | ZBUF_UDPSTREAM_ERROR;
        return (zbuf_udpstream_events(n->s[0]) & done) && (zbuf_udpstream_events(n->s[1]) & done);
    }
    if (next > n->now)
        n->now = next;
    return true;
}

void unet_free(struct unet *n)
{
    for (int i = 0; i < 2; i++) {
        zbuf_udpstream_delete(n->s[i]);
        n->s[i] = NULL;
    }
    while (n->heap_n > 0)
        zbuf_delete(heap_pop(n).z);
    free(n->heap);
    n->heap = NULL;
    for (int i = 0; i < 2; i++)
        zbuf_pool_delete(n->nic[i]);
}

zbuf_t *ut_forge(uint8_t type, uint8_t flags, uint32_t cid, uint32_t sn, uint32_t una,
                 uint16_t wnd, const void *payload, uint16_t len)
{
    struct zus_hdr h = {.type = type, .flags = flags, .cid = cid, .sn = sn, .una = una,
                        .wnd = wnd, .len = len, .ts = 1};
    uint8_t buf[ZBUF_UDPSTREAM_HEADER];
    zbuf__us_write_hdr(&h, buf);
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_copy(z, buf, sizeof buf), 0);
    if (len > 0)
        cr_assert_eq(zbuf_append_copy(z, payload, len), 0);
    return z;
}

/* ----------------------------------------------------------- transfers */

struct piece {
    struct ut_dir *d;
    uint64_t end;
};

static void piece_release(void *data, size_t size, void *arg)
{
    (void)size;
    struct piece *p = arg;
    struct ut_dir *d = p->d;
    d->released++;
    if (d->strict_release && d->r != NULL) {
        zbuf_udpstream_stats_t st;
        zbuf_udpstream_get_stats(d->r, &st);
        if (p->end > st.bytes_read + zbuf_udpstream_readable(d->r))
            d->early_release++;
    }
    free(data);
    free(p);
}

int ut_write_pattern(struct ut_dir *d, uint64_t off, size_t len, size_t piece_max,
                     uint64_t *rng)
{
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    int pieces = 0;
    size_t done = 0;
    while (done < len) {
        size_t k = 1 + (size_t)(ut_rand(rng) % piece_max);
        if (k > len - done)
            k = len - done;
        uint8_t *buf = malloc(k);
        struct piece *p = malloc(sizeof *p);
        cr_assert(buf && p);
        for (size_t i = 0; i < k; i++)
            buf[i] = ut_pat(off + done + i);
        *p = (struct piece){.d = d, .end = off + done + k};
        cr_assert_eq(zbuf_append_buf(z, buf, k, piece_release, p), 0);
        done += k;
        pieces++;
    }
    int rc = zbuf_udpstream_write(d->w, z);
    if (rc < 0) {
        d->enrolled += pieces; /* the delete below releases them */
        zbuf_delete(z);
        return rc;
    }
    d->enrolled += pieces;
    return 0;
}

void ut_xfer_init(struct ut_xfer *x, zbuf_udpstream_t *a, zbuf_udpstream_t *b, uint64_t total,
                  uint64_t seed)
{
    memset(x, 0, sizeof *x);
    x->total = total;
    x->write_max = 100000;
    x->piece_max = 5000;
    x->read_max = 70000;
    x->rng = seed * 0x2545f4914f6cdd1dull + 7;
    x->max_steps = 50u * 1000 * 1000;
    x->d[0] = (struct ut_dir){.w = a, .r = b, .bad_at = UINT64_MAX};
    x->d[1] = (struct ut_dir){.w = b, .r = a, .bad_at = UINT64_MAX};
}

static void check_bytes(struct ut_dir *d, const uint8_t *p, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (p[i] != ut_pat(d->got + i) && d->bad_at == UINT64_MAX) {
            d->bad_at = d->got + i;
            break;
        }
    }
    d->got += len;
}

static void read_side(struct ut_xfer *x, struct ut_dir *d)
{
    for (int i = 0; i < 64 && !d->eof; i++) {
        size_t max = 1 + (size_t)(ut_rand(&x->rng) % x->read_max);
        ssize_t n;
        if (x->copy_api) {
            uint8_t *buf = malloc(max);
            n = zbuf_udpstream_read_copy(d->r, buf, max);
            if (n > 0)
                check_bytes(d, buf, (size_t)n);
            free(buf);
        } else {
            zbuf_t *z;
            size_t min = x->read_exact ? max : 1;
            n = zbuf_udpstream_read(d->r, min, max, &z);
            if (n > 0) {
                cr_assert_eq((size_t)n, zbuf_length(z));
                if (x->read_exact && d->got + max <= x->total)
                    cr_assert_eq((size_t)n, max, "an exact read gives exactly what it asks");
                size_t at = 0;
                for (zbuf_seg_t *sg = zbuf_seg_first(z); sg; sg = zbuf_seg_next(z, sg)) {
                    size_t l = zbuf_seg_length(z, sg);
                    check_bytes(d, zbuf_seg_data(z, sg), l);
                    at += l;
                }
                cr_assert_eq(at, (size_t)n);
                zbuf_delete(z);
            }
        }
        if (n == 0)
            d->eof = true;
        if (n <= 0)
            break;
    }
}

static void write_side(struct ut_xfer *x, struct ut_dir *d)
{
    for (int i = 0; i < 64 && d->written < x->total; i++) {
        if (!(zbuf_udpstream_events(d->w) & ZBUF_UDPSTREAM_WRITABLE))
            break;
        size_t len = 1 + (size_t)(ut_rand(&x->rng) % x->write_max);
        if (len > x->total - d->written)
            len = (size_t)(x->total - d->written);
        int rc;
        if (x->copy_api) {
            uint8_t *buf = malloc(len);
            for (size_t k = 0; k < len; k++)
                buf[k] = ut_pat(d->written + k);
            ssize_t w = zbuf_udpstream_write_copy(d->w, buf, len);
            free(buf);
            rc = w < 0 ? (int)w : 0;
        } else {
            rc = ut_write_pattern(d, d->written, len, x->piece_max, &x->rng);
        }
        if (rc == -EAGAIN)
            break;
        cr_assert_eq(rc, 0, "write: %s", zbuf_strerror(rc));
        d->written += len;
    }
    if (d->written == x->total && !d->shut) {
        cr_assert_eq(zbuf_udpstream_shutdown(d->w), 0);
        d->shut = true;
    }
}

void ut_xfer_run(struct ut_xfer *x, bool (*pump)(void *), void *ctx)
{
    int dirs = x->both_ways ? 2 : 1;
    if (!x->both_ways) {
        /* The reader's side ends too, once it has everything. */
        x->d[1].written = x->total; // nothing to write that way
    }
    uint64_t steps = 0;
    for (;;) {
        for (int i = 0; i < dirs; i++)
            write_side(x, &x->d[i]);
        for (int i = 0; i < dirs; i++)
            read_side(x, &x->d[i]);
        if (!x->both_ways && x->d[0].eof && !x->d[1].shut) {
            cr_assert_eq(zbuf_udpstream_shutdown(x->d[0].r), 0);
            x->d[1].shut = true;
        }
        unsigned e0 = zbuf_udpstream_events(x->d[0].w), e1 = zbuf_udpstream_events(x->d[0].r);
        if ((e0 & ZBUF_UDPSTREAM_ERROR) || (e1 & ZBUF_UDPSTREAM_ERROR) || steps + 1 >= x->max_steps) {
            zbuf__us_dump(x->d[0].w, stderr);
            zbuf__us_dump(x->d[0].r, stderr);
        }
        if ((e0 & ZBUF_UDPSTREAM_ERROR) || (e1 & ZBUF_UDPSTREAM_ERROR))
            cr_assert_fail("stream failed: %s / %s", zbuf_strerror(zbuf_udpstream_error(x->d[0].w)),
                     zbuf_strerror(zbuf_udpstream_error(x->d[0].r)));
        if ((e0 & ZBUF_UDPSTREAM_CLOSED) && (e1 & ZBUF_UDPSTREAM_CLOSED))
            break;
        cr_assert(++steps < x->max_steps, "transfer did not finish (%llu of %llu bytes)",
                  (unsigned long long)x->d[0].got, (unsigned long long)x->total);
        cr_assert(pump(ctx), "the network stalled at %llu of %llu bytes",
                  (unsigned long long)x->d[0].got, (unsigned long long)x->total);
    }
    for (int i = 0; i < dirs; i++) {
        cr_assert_eq(x->d[i].bad_at, UINT64_MAX, "byte %llu differs",
                     (unsigned long long)x->d[i].bad_at);
        cr_assert_eq(x->d[i].got, x->total, "got %llu of %llu bytes",
                     (unsigned long long)x->d[i].got, (unsigned long long)x->total);
        cr_assert(x->d[i].eof);
        cr_assert_eq(x->d[i].released, x->d[i].enrolled,
                     "every enrolled piece is released once the peer acknowledged it");
        cr_assert_eq(x->d[i].early_release, 0, "no piece is released before the peer has it");
    }
}
