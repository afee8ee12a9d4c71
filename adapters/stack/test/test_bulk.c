/* SPDX-License-Identifier: MIT */
/* Bulk TCP both ways between two stacks over an impaired in-memory link:
 * byte-exact delivery, every release callback exactly once, no byte copied
 * by the library. */
#include <stdio.h>
#include <stdlib.h>

#include "support.h"
#include "tcpfix.h"

ZT_SUITE(bulk);

#define CHUNK (64 * 1024)

struct stream {
    zbuf_ip_tcp_t *pcb;
    uint32_t tx_salt, rx_salt;
    uint64_t total;       /* bytes to send and to receive */
    uint64_t written, received;
    long bufs_made, bufs_released;
    int eofs, errors, err;
    bool mismatch;
    uint64_t mismatch_at;
};

static void chunk_release(void *data, size_t size, void *arg)
{
    (void)size;
    struct stream *st = arg;
    st->bufs_released++;
    free(data);
}

static void fill(struct stream *st)
{
    while (st->pcb && st->written < st->total) {
        size_t room = zbuf_ip_tcp_sndbuf(st->pcb);
        size_t n = st->total - st->written < CHUNK ? (size_t)(st->total - st->written) : CHUNK;
        if (n > room)
            n = room;
        if (n < 4096 && n < st->total - st->written)
            return; /* wait for a worthwhile amount of room */
        uint8_t *b = malloc(n);
        for (size_t i = 0; i < n; i++)
            b[i] = zh_pattern(st->written + i, st->tx_salt);
        zbuf_t *z;
        zbuf_create(&z);
        cr_assert_eq(zbuf_append_buf(z, b, n, chunk_release, st), 0);
        st->bufs_made++;
        cr_assert_eq(zbuf_ip_tcp_write(st->pcb, z), 0);
        st->written += n;
    }
}

static void s_recv(void *arg, zbuf_ip_tcp_t *pcb, zbuf_t *d)
{
    struct stream *st = arg;
    if (d == NULL) {
        st->eofs++;
        return;
    }
    /* Verify in place, segment by segment: no copy. */
    for (zbuf_seg_t *s = zbuf_seg_first(d); s; s = zbuf_seg_next(d, s)) {
        const uint8_t *p = zbuf_seg_data(d, s);
        size_t n = zbuf_seg_length(d, s);
        for (size_t i = 0; i < n && !st->mismatch; i++)
            if (p[i] != zh_pattern(st->received + i, st->rx_salt)) {
                st->mismatch = true;
                st->mismatch_at = st->received + i;
            }
        st->received += n;
    }
    zbuf_ip_tcp_recved(pcb, zbuf_length(d));
    zbuf_delete(d);
}

static void s_sent(void *arg, zbuf_ip_tcp_t *pcb, size_t n)
{
    (void)pcb;
    (void)n;
    fill(arg);
}

static void s_error(void *arg, int err)
{
    struct stream *st = arg;
    st->err = err;
    st->errors++;
    st->pcb = NULL;
}

static const zbuf_ip_tcp_callbacks_t s_cbs = {.recv = s_recv, .sent = s_sent, .error = s_error};

static void s_connected(void *arg, zbuf_ip_tcp_t *pcb)
{
    struct stream *st = arg;
    st->pcb = pcb;
    fill(st);
}

static int s_accept(void *arg, zbuf_ip_tcp_t *l, zbuf_ip_tcp_t *c)
{
    (void)l;
    struct stream *st = arg;
    st->pcb = c;
    zbuf_ip_tcp_set_callbacks(c, &s_cbs, st);
    fill(st);
    return 0;
}

struct both {
    struct stream *a, *b;
};

static bool finished(void *arg)
{
    struct both *x = arg;
    return (x->a->received == x->a->total && x->b->received == x->b->total &&
            x->a->bufs_released == x->a->bufs_made && x->b->bufs_released == x->b->bufs_made &&
            x->a->written == x->a->total && x->b->written == x->b->total) ||
           x->a->errors || x->b->errors || x->a->mismatch || x->b->mismatch;
}

/* Most losses must be repaired without a retransmission timeout (RACK-TLP):
 * `max_rto` bounds the timeouts of both sides together. */
/* `offload`: the ZBUF_IP_DRV_* flags both ends of the link get. */
static void bulk_ex(double loss, double dup, double reorder, bool copy_to_pool, uint64_t mib,
                    unsigned offload, uint16_t mtu, uint64_t max_rto)
{
    zbuf_ip_link_config_t lc = {.loss = loss, .dup = dup, .reorder = reorder, .delay_ms = 1,
                                .reorder_ms = 3, .seed = 12345, .copy_to_pool = copy_to_pool,
                                .csum_offload = (offload & ZBUF_IP_DRV_CSUM_OFFLOAD) != 0,
                                .tso = (offload & ZBUF_IP_DRV_TSO) != 0};
    zh_pair_t p;
    zh_pair_init_mtu(&p, &lc, NULL, mtu);
    struct stream a = {.tx_salt = 1, .rx_salt = 2, .total = mib << 20};
    struct stream b = {.tx_salt = 2, .rx_salt = 1, .total = mib << 20};
    struct both x = {&a, &b};
    zbuf_ip_tcp_t *l;
    cr_assert_eq(zbuf_ip_tcp_new(p.b, &l), 0);
    zbuf_ip_tcp_bind(l, ZBUF_IP_ANY, 5001);
    zbuf_ip_tcp_listen(l, 4);
    zbuf_ip_tcp_callbacks_t lcb = {.accept = s_accept};
    zbuf_ip_tcp_set_callbacks(l, &lcb, &b);
    zbuf_ip_tcp_t *c;
    cr_assert_eq(zbuf_ip_tcp_new(p.a, &c), 0);
    zbuf_ip_tcp_callbacks_t ccb = s_cbs;
    ccb.connected = s_connected;
    zbuf_ip_tcp_set_callbacks(c, &ccb, &a);
    cr_assert_eq(zbuf_ip_tcp_connect(c, ZH_B, 5001), 0);

    zbuf_stats_t z0, z1;
    zbuf_stats_get(&z0);
    bool ok = zh_pair_run(&p, finished, &x, 3600 * 1000);
    zbuf_stats_get(&z1);
    zbuf_ip_stats_t sa, sb;
    zbuf_ip_stats(p.a, &sa);
    zbuf_ip_stats(p.b, &sb);
    zbuf_ip_link_stats_t ls;
    zbuf_ip_link_stats(p.link, &ls);
    fprintf(stderr, "loss %.2f dup %.2f reorder %.2f copy %d: %llu ms virtual, retransmits %llu+%llu "
                "(rto %llu, fast %llu, rack %llu, tlp %llu), lost %llu dup %llu reordered %llu, "
                "ooo queued %llu\n",
                loss, dup, reorder, copy_to_pool, (unsigned long long)(p.now - 1000),
                (unsigned long long)sa.tcp_retransmits, (unsigned long long)sb.tcp_retransmits,
                (unsigned long long)(sa.tcp_rto + sb.tcp_rto),
                (unsigned long long)(sa.tcp_fast_retransmits + sb.tcp_fast_retransmits),
                (unsigned long long)(sa.tcp_rack_losses + sb.tcp_rack_losses),
                (unsigned long long)(sa.tcp_tlp + sb.tcp_tlp), (unsigned long long)ls.lost, (unsigned long long)ls.duplicated,
                (unsigned long long)ls.reordered,
                (unsigned long long)(sa.tcp_ooo_queued + sb.tcp_ooo_queued));
    cr_assert(!a.mismatch && !b.mismatch, "byte mismatch at %llu / %llu",
              (unsigned long long)a.mismatch_at, (unsigned long long)b.mismatch_at);
    cr_assert_eq(a.errors + b.errors, 0, "errors %d %d after %llu/%llu bytes", a.err, b.err,
                 (unsigned long long)a.received, (unsigned long long)b.received);
    cr_assert(ok, "A got %llu, B got %llu of %llu; released %ld/%ld, %ld/%ld",
              (unsigned long long)a.received, (unsigned long long)b.received,
              (unsigned long long)a.total, a.bufs_released, a.bufs_made, b.bufs_released,
              b.bufs_made);
    cr_assert_eq(z1.bytes_copied, z0.bytes_copied, "library copied %llu bytes",
                 (unsigned long long)(z1.bytes_copied - z0.bytes_copied));
    if (loss > 0)
        cr_assert_gt(sa.tcp_retransmits + sb.tcp_retransmits, 0);
    /* With segmentation offload, a packet stands for several segments:
     * bulk data goes in far fewer frames than segments. */
    uint64_t segs = sa.tcp_tx_segs + sb.tcp_tx_segs;
    if (offload & ZBUF_IP_DRV_TSO)
        cr_assert_lt(ls.frames * 4, segs, "%llu frames for %llu segments",
                     (unsigned long long)ls.frames, (unsigned long long)segs);
    cr_assert_leq(sa.tcp_rto + sb.tcp_rto, max_rto, "%llu timeouts",
                  (unsigned long long)(sa.tcp_rto + sb.tcp_rto));

    /* Orderly close both ways; every PCB goes. */
    zbuf_ip_tcp_close(a.pcb);
    zbuf_ip_tcp_close(b.pcb);
    zbuf_ip_tcp_close(l);
    zh_pair_run(&p, NULL, NULL, ZBUF_IP_TCP_TIME_WAIT_MS + 120000);
    zbuf_ip_stats(p.a, &sa);
    zbuf_ip_stats(p.b, &sb);
    cr_assert_eq(sa.tcp_pcbs + sb.tcp_pcbs, 0);
    zh_pair_fini(&p);
    /* Nothing is left to release: each callback ran exactly once. */
    cr_assert_eq(a.bufs_released, a.bufs_made);
    cr_assert_eq(b.bufs_released, b.bufs_made);
}

static void bulk(double loss, double dup, double reorder, bool copy_to_pool, uint64_t mib,
                 uint64_t max_rto)
{
    bulk_ex(loss, dup, reorder, copy_to_pool, mib, 0, 0, max_rto);
}

Test(bulk, checksum_offload_link_8mib_each_way)
{
    bulk_ex(0.01, 0, 0.01, false, 8, ZBUF_IP_DRV_CSUM_OFFLOAD, 0, 3);
}

/* Segmentation offload at the default MTU (1500): one packet carries up to
 * 45 segments, a lost packet takes all of them, and what is resent goes a
 * segment at a time. */
Test(bulk, segmentation_offload_link_clean_and_lossy_16mib_each_way)
{
    bulk_ex(0, 0, 0, false, 16, ZBUF_IP_DRV_TSO, 0, 0);
    bulk_ex(0.01, 0.01, 0.01, false, 16, ZBUF_IP_DRV_TSO, 0, 4);
    bulk_ex(0.02, 0, 0.02, false, 16, ZBUF_IP_DRV_TSO | ZBUF_IP_DRV_CSUM_OFFLOAD, 0, 4);
}

Test(bulk, segmentation_offload_refused_with_nic_emulation)
{
    zbuf_ip_link_config_t lc = {.copy_to_pool = true, .tso = true};
    zbuf_ip_link_t *l = NULL;
    cr_assert_eq(zbuf_ip_link_create(&lc, &l), -EINVAL);
    cr_assert_null(l);
}

Test(bulk, jumbo_and_64k_mtu_with_loss_16mib_each_way)
{
    bulk_ex(0.02, 0.01, 0.02, false, 16, 0, 9000, 4);
    bulk_ex(0.02, 0.01, 0.02, false, 16, 0, 65535, 4);
}

Test(bulk, clean_link_32mib_each_way_shared_segments)
{
    bulk(0, 0, 0, false, 32, 0);
}

Test(bulk, clean_link_32mib_each_way_nic_emulation)
{
    bulk(0, 0, 0, true, 32, 0);
}

/* Timeout bounds: before RACK-TLP these runs needed 10, 178 and 130; with
 * RACK-TLP 0, 25 and 9.  Since loss probes also go in recovery and after a
 * timeout, and data segments carry SACK blocks, 0, 3 and 6 (over link seeds
 * 1..12: loss+dup+reorder at most 6, mean 2.6, against 34 and 25 before;
 * loss only at most 3, mean 1.6, against 21 and 10); with D-SACK 0, 0, 6.  What is left is whole-flight loss: every
 * segment sent since the last one delivered, the probe included, or their
 * ACKs, lost (RFC 8985 leaves those to the RTO). */
Test(bulk, one_percent_loss_dup_reorder_16mib_each_way)
{
    bulk(0.01, 0.01, 0.01, false, 16, 2);
}

Test(bulk, five_percent_loss_dup_reorder_16mib_each_way)
{
    bulk(0.05, 0.05, 0.05, true, 16, 8);
}

Test(bulk, five_percent_loss_only_16mib_each_way)
{
    bulk(0.05, 0, 0, false, 16, 9);
}
