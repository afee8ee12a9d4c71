/* SPDX-License-Identifier: MIT */
/* Streams over the bundled stack's UDP: two stacks joined by the
 * in-memory link, which injects loss, duplication and reordering, on a
 * virtual clock; the same stream code as over kernel sockets. */
#include <stdlib.h>
#include <zbuf/ip.h>

#include "harness.h"
#include "support.h"
#include "ustest.h"

static void fini(void)
{
    zt_assert_no_leaks();
}
TestSuite(ip, .init = zt_leak_baseline, .fini = fini, .timeout = 300);


struct ipair {
    zh_pair_t p;
    zbuf_udpstream_t *s[2];
};

static uint64_t ipair_clock(void *arg)
{
    return ((zh_pair_t *)arg)->now * 1000u;
}

static bool ipair_pump(void *arg)
{
    struct ipair *ip = arg;
    int n = zbuf_ip_poll(ip->p.a) + zbuf_ip_poll(ip->p.b);
    for (int i = 0; i < 2; i++)
        zbuf_udpstream_process(ip->s[i]);
    if (n > 0)
        return true;
    uint64_t d = zbuf_ip_next_deadline(ip->p.a), db = zbuf_ip_next_deadline(ip->p.b);
    if (db < d)
        d = db;
    for (int i = 0; i < 2; i++) {
        uint64_t ds = zbuf_udpstream_next_deadline(ip->s[i]);
        if (ds != UINT64_MAX && (ds + 999) / 1000 < d)
            d = (ds + 999) / 1000;
    }
    if (d == ZBUF_IP_NEVER || d == UINT64_MAX) {
        unsigned done = ZBUF_UDPSTREAM_CLOSED | ZBUF_UDPSTREAM_ERROR;
        return (zbuf_udpstream_events(ip->s[0]) & done) && (zbuf_udpstream_events(ip->s[1]) & done);
    }
    ip->p.now = d > ip->p.now ? d : ip->p.now + 1;
    return ip->p.now < 10u * 60 * 1000;
}

static void ipair_run(zbuf_udpstream_mode_t mode, const zbuf_ip_link_config_t *lc,
                      uint64_t total, bool both, zbuf_udpstream_stats_t st[2])
{
    struct ipair ip;
    zh_pair_init(&ip.p, lc, NULL);
    zbuf_udpstream_opts_t o;
    zbuf_udpstream_opts_init(&o);
    o.mode = mode;
    o.clock = ipair_clock;
    o.clock_arg = &ip.p;
    cr_assert_eq(zbuf_udpstream_open_ip(ip.p.b, ZH_B, 5000, 0, 0, &o, &ip.s[1]), 0);
    cr_assert_eq(zbuf_udpstream_open_ip(ip.p.a, ZH_A, 0, ZH_B, 5000, &o, &ip.s[0]), 0);
    struct ut_xfer x;
    ut_xfer_init(&x, ip.s[0], ip.s[1], total, total + mode);
    x.both_ways = both;
    ut_xfer_run(&x, ipair_pump, &ip);
    for (int i = 0; i < 2; i++) {
        zbuf_udpstream_get_stats(ip.s[i], &st[i]);
        zbuf_udpstream_delete(ip.s[i]);
    }
    zh_pair_fini(&ip.p);
}

Test(ip, zerocopy_over_a_clean_link_references_every_byte)
{
    /* The link hands the receiving stack the very segments sent, so a
     * received byte is a reference to the sender's buffer: release
     * callbacks then wait for the reader too (still after the ack). */
    zbuf_stats_t before, after;
    zbuf_stats_get(&before);
    zbuf_udpstream_stats_t st[2];
    ipair_run(ZBUF_UDPSTREAM_ZEROCOPY, NULL, ut_scaled(16u << 20, 8), false, st);
    zbuf_stats_get(&after);
    cr_assert_eq(st[0].bytes_copied + st[1].bytes_copied, 0);
    cr_assert_eq(after.bytes_copied, before.bytes_copied);
}

Test(ip, both_modes_both_ways_with_loss_duplication_and_reordering)
{
    for (int m = ZBUF_UDPSTREAM_AUTO; m <= ZBUF_UDPSTREAM_COPY; m++) {
        zbuf_ip_link_config_t lc = {.loss = 0.04, .dup = 0.02, .reorder = 0.04, .delay_ms = 1,
                                    .reorder_ms = 3, .seed = 100 + (uint64_t)m,
                                    .copy_to_pool = true, .pool_bufs = 4096};
        zbuf_udpstream_stats_t st[2];
        ipair_run((zbuf_udpstream_mode_t)m, &lc, ut_scaled(3u << 20, 8), true, st);
        cr_assert_gt(st[0].retransmits + st[1].retransmits, 0);
        cr_assert_gt(st[0].ooo_rx + st[1].ooo_rx, 0);
    }
}

Test(ip, a_nic_copy_link_keeps_the_library_at_zero_copies)
{
    zbuf_ip_link_config_t lc = {.copy_to_pool = true, .pool_bufs = 4096, .loss = 0.01, .seed = 9};
    zbuf_udpstream_stats_t st[2];
    ipair_run(ZBUF_UDPSTREAM_ZEROCOPY, &lc, ut_scaled(8u << 20, 8), true, st);
    cr_assert_eq(st[0].bytes_copied + st[1].bytes_copied, 0);
}
