/* SPDX-License-Identifier: MIT */
/*
 * Property tests of the ring walkers against a simulated kernel (ringsim.c)
 * playing random status sequences: random frame lengths and flags
 * (timestamp bits included), truncated and outgoing frames, random batch
 * sizes, frames held for random times, blocks retired early, transmit
 * completions in random amounts with timestamp bits.  No socket, no
 * privilege.  ZBUF_PACKET_PROP_ROUNDS=N runs N seeds instead of 20 (soak).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ringsim.h"
#include "support.h"

ZT_SUITE(ring);

static unsigned rounds(void)
{
    const char *e = getenv("ZBUF_PACKET_PROP_ROUNDS");
    return e && atoi(e) > 0 ? (unsigned)atoi(e) : 20;
}

#define HOLD_MAX 96
#define MAX_FRAMES 200000

struct held {
    zbuf_t *z;
    uint64_t seq;
};

/* The frame's bytes are still those the kernel wrote for seq. */
static bool intact(zbuf_t *z, uint64_t seq, uint32_t len)
{
    if (zbuf_length(z) != len)
        return false;
    size_t off = 0;
    for (zbuf_seg_t *g = zbuf_seg_first(z); g; g = zbuf_seg_next(z, g)) {
        const uint8_t *d = zbuf_seg_data(z, g);
        for (size_t i = 0; i < zbuf_seg_length(z, g); i++, off++)
            if (d[i] != sim_byte(seq, off))
                return false;
    }
    return true;
}

struct rx_run {
    struct sim_rx s;
    struct held held[HOLD_MAX];
    unsigned nheld;
    uint64_t next;      /* lowest sequence number not yet accounted for */
    uint64_t delivered, skipped;
};

/* Account for a delivered frame: the frames before it that were not
 * delivered must be exactly the ones the walker was allowed to skip. */
static void accept_frame(struct rx_run *r, zbuf_t *z, const zbuf_packet_rxinfo_t *in,
                         bool keep, struct sim_rng *rng)
{
    uint64_t seq = in->ts_sec; /* the simulator numbers frames in tp_sec */
    cr_assert_geq(seq, r->next, "frame %llu delivered again or out of order (expected >= %llu)",
                  (unsigned long long)seq, (unsigned long long)r->next);
    r->skipped += seq - r->next;
    r->next = seq + 1;
    cr_assert(intact(z, seq, r->s.lens[seq]), "frame %llu corrupt on delivery",
              (unsigned long long)seq);
    cr_assert_eq(!!(in->flags & ZBUF_PACKET_RX_TRUNCATED), in->wire_len > r->s.lens[seq]);
    if (r->s.rx.filter_outgoing)
        cr_assert_neq(in->pkttype, PACKET_OUTGOING, "own outgoing frame not filtered");
    r->delivered++;
    if (keep && r->nheld < HOLD_MAX) {
        r->held[r->nheld++] = (struct held){z, seq};
        return;
    }
    zbuf_delete(z);
    (void)rng;
}

static void release_one(struct rx_run *r, unsigned i)
{
    struct held h = r->held[i];
    cr_assert(intact(h.z, h.seq, r->s.lens[h.seq]),
              "held frame %llu overwritten: its slot went back to the kernel too early",
              (unsigned long long)h.seq);
    r->held[i] = r->held[--r->nheld];
    zbuf_delete(h.z);
}

static void take_some(struct rx_run *r, struct sim_rng *rng, unsigned max, unsigned hold_pct)
{
    zbuf_t *f[16];
    zbuf_packet_rxinfo_t in[16];
    int n = zpk_rx_take(&r->s.rx, f, in, max);
    cr_assert_geq(n, 0);
    for (int i = 0; i < n; i++)
        accept_frame(r, f[i], &in[i], sim_below(rng, 100) < hold_pct, rng);
}

static void rx_property(unsigned version, uint64_t seed)
{
    struct sim_rng rng = {seed * 0x9e3779b97f4a7c15ull + 1};
    static const unsigned shares[] = {0, 25, 50, 100};
    unsigned share = shares[sim_below(&rng, 4)];
    bool filter = sim_below(&rng, 2);
    bool single = sim_below(&rng, 3) == 0; /* no loan view: held slots stall */
    zbuf_pool_t *pool = NULL;
    if (sim_below(&rng, 4) != 0) /* sometimes no pool: frames beyond the share drop */
        cr_assert_eq(zbuf_pool_create(256 << sim_below(&rng, 4), 32 + sim_below(&rng, 200), &pool), 0);
    struct rx_run *r = calloc(1, sizeof *r);
    if (version == ZBUF_PACKET_V3)
        sim_rx_init(&r->s, version, 2048, 8192, 6, share, pool, filter, seed, MAX_FRAMES,
                    single);
    else
        sim_rx_init(&r->s, version, 2048, 4096, 2 * (4 + sim_below(&rng, 30)), share, pool,
                    filter, seed, MAX_FRAMES, single);
    unsigned hold_pct = sim_below(&rng, 60);
    (void)0;
    for (unsigned step = 0; step < 4000 && r->s.kseq + 8 < MAX_FRAMES; step++) {
        switch (sim_below(&rng, 6)) {
        case 0:
        case 1:
            for (uint32_t k = 1 + sim_below(&rng, 6); k; k--)
                sim_rx_kernel_write(&r->s);
            break;
        case 2:
            sim_rx_kernel_retire(&r->s);
            break;
        case 3:
        case 4:
            take_some(r, &rng, 1 + sim_below(&rng, 16), hold_pct);
            break;
        default:
            for (uint32_t k = sim_below(&rng, 4); k && r->nheld; k--)
                release_one(r, sim_below(&rng, r->nheld));
            break;
        }
    }
    /* Let everything go, then drain what the kernel still has. */
    while (r->nheld)
        release_one(r, r->nheld - 1);
    sim_rx_kernel_retire(&r->s);
    for (int guard = 0; guard < 10000; guard++) {
        int before = (int)r->delivered;
        take_some(r, &rng, 16, 0);
        if ((int)r->delivered == before && !zpk_rx_ready(&r->s.rx))
            break;
    }
    uint64_t written = r->s.kseq;
    cr_assert_eq(r->next + (written - r->next), written);
    r->skipped += written - r->next; /* trailing frames filtered or dropped */
    const zbuf_packet_stats_t *st = &r->s.st;
    cr_assert_eq(st->rx_frames, r->delivered);
    cr_assert_eq(r->delivered + r->skipped, written, "frames lost by the walker");
    cr_assert_eq(r->skipped, st->rx_outgoing_filtered + st->rx_no_buffer,
                 "skipped %llu frames, counted %llu filtered + %llu without buffer",
                 (unsigned long long)r->skipped, (unsigned long long)st->rx_outgoing_filtered,
                 (unsigned long long)st->rx_no_buffer);
    cr_assert_eq(st->rx_loaned + st->rx_copied, st->rx_frames);
    if (share == 0)
        cr_assert_eq(st->rx_loaned, 0);
    cr_assert(sim_rx_all_returned(&r->s), "a slot is still held after every frame was deleted");
    cr_assert_eq(r->s.destroyed, 0);
    zpk_rx_release_owner(&r->s.rx);
    cr_assert_eq(r->s.destroyed, 1, "the ring was not freed exactly once");
    sim_rx_free(&r->s);
    free(r);
    zbuf_pool_delete(pool);
}

Test(ring, v2_receive_delivers_every_frame_once_in_order_under_random_statuses)
{
    for (unsigned s = 1; s <= rounds(); s++)
        rx_property(ZBUF_PACKET_V2, s);
}

Test(ring, v3_receive_delivers_every_frame_once_and_returns_blocks_with_their_last_loan)
{
    for (unsigned s = 1; s <= rounds(); s++)
        rx_property(ZBUF_PACKET_V3, s);
}

/* A slot still lent when the kernel comes round again is not read twice:
 * the walker stops at it, counts a stall, and resumes once it returns. */
Test(ring, v2_walker_stops_at_a_slot_still_on_loan_and_resumes_after_its_return)
{
    struct sim_rx s;
    sim_rx_init(&s, ZBUF_PACKET_V2, 2048, 4096, 4, 100, NULL, false, 7, 64, true);
    zbuf_t *f[4];
    for (int i = 0; i < 4; i++)
        sim_rx_kernel_write(&s);
    cr_assert_eq(zpk_rx_take(&s.rx, f, NULL, 4), 4);
    zbuf_delete(f[1]);
    zbuf_delete(f[2]);
    zbuf_delete(f[3]);
    sim_rx_kernel_write(&s); /* slot 0 is still lent: the kernel drops */
    cr_assert_eq(s.kdrops, 1);
    cr_assert_eq(zpk_rx_take(&s.rx, f + 1, NULL, 4), 0);
    cr_assert_eq(s.st.rx_stalls, 1);
    zbuf_delete(f[0]);
    sim_rx_kernel_write(&s);
    cr_assert_eq(zpk_rx_take(&s.rx, f, NULL, 4), 1);
    zbuf_delete(f[0]);
    cr_assert(sim_rx_all_returned(&s));
    zpk_rx_release_owner(&s.rx);
    cr_assert_eq(s.destroyed, 1);
    sim_rx_free(&s);
}

/* With a loan view, a slot still lent a lap later is bounced: its holder
 * keeps the same bytes at the same address (a private copy of the pages)
 * and the kernel gets the slot back at once. */
static void bounce_case(unsigned version)
{
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(2048, 64, &pool), 0);
    struct sim_rx s;
    if (version == ZBUF_PACKET_V3)
        sim_rx_init(&s, version, 2048, 8192, 4, 100, pool, false, 5, 256, false);
    else
        sim_rx_init(&s, version, 2048, 4096, 4, 100, pool, false, 5, 256, false);
    zbuf_t *keep[2], *f[16];
    zbuf_packet_rxinfo_t in[16];
    sim_rx_kernel_write(&s);
    sim_rx_kernel_write(&s);
    sim_rx_kernel_retire(&s);
    cr_assert_eq(zpk_rx_take(&s.rx, keep, in, 2), 2);
    const void *addr = zbuf_seg_data(keep[0], zbuf_seg_first(keep[0]));
    uint32_t len0 = s.lens[0];
    cr_assert(intact(keep[0], 0, len0));
    /* Laps of traffic while both are held: the kernel never meets a
     * blocked slot for more than one walk. */
    uint64_t drops_before = s.kdrops;
    for (int lap = 0; lap < 20; lap++) {
        for (int k = 0; k < 3; k++)
            sim_rx_kernel_write(&s);
        sim_rx_kernel_retire(&s);
        int n = zpk_rx_take(&s.rx, f, in, 16);
        for (int i = 0; i < n; i++)
            zbuf_delete(f[i]);
    }
    cr_assert_gt(s.st.rx_bounced, 0, "no slot was bounced");
    cr_assert_eq(s.st.rx_stalls, 0);
    cr_assert_eq(zbuf_seg_data(keep[0], zbuf_seg_first(keep[0])), addr, "the address moved");
    cr_assert(intact(keep[0], 0, len0), "the held frame changed under its holder");
    cr_assert(intact(keep[1], 1, s.lens[1]));
    cr_assert_lt(s.kdrops - drops_before, 20, "the kernel kept meeting the held slot");
    zbuf_delete(keep[0]);
    zbuf_delete(keep[1]);
    cr_assert(sim_rx_all_returned(&s));
    zpk_rx_release_owner(&s.rx);
    cr_assert_eq(s.destroyed, 1);
    sim_rx_free(&s);
    zbuf_pool_delete(pool);
}

Test(ring, v2_slot_held_across_a_lap_is_bounced_and_its_holder_keeps_its_bytes)
{
    bounce_case(ZBUF_PACKET_V2);
}

Test(ring, v3_block_held_across_a_lap_is_bounced_and_its_holders_keep_their_bytes)
{
    bounce_case(ZBUF_PACKET_V3);
}

/* Beyond the loan share frames are copied (counted) and their slots go back
 * at once, so held frames never block the kernel. */
Test(ring, beyond_the_loan_share_frames_are_copied_and_counted)
{
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(512, 64, &pool), 0);
    struct sim_rx s;
    sim_rx_init(&s, ZBUF_PACKET_V2, 2048, 4096, 16, 50, pool, false, 9, 64, false);
    zbuf_t *f[16];
    for (int i = 0; i < 10; i++)
        sim_rx_kernel_write(&s);
    zbuf_stats_t a, b;
    zbuf_stats_get(&a);
    cr_assert_eq(zpk_rx_take(&s.rx, f, NULL, 10), 10);
    zbuf_stats_get(&b);
    cr_assert_eq(s.st.rx_loaned, 8);
    cr_assert_eq(s.st.rx_copied, 2);
    cr_assert_eq(b.bytes_copied - a.bytes_copied, zbuf_length(f[8]) + zbuf_length(f[9]));
    /* Once the lent frames return, the whole ring is the kernel's again:
     * the copied frames' slots went back when they were copied, although
     * the application still holds the copies. */
    for (int i = 0; i < 8; i++)
        zbuf_delete(f[i]);
    for (int i = 0; i < 16; i++)
        sim_rx_kernel_write(&s);
    cr_assert_eq(s.kdrops, 0);
    zbuf_delete(f[8]);
    zbuf_delete(f[9]);
    cr_assert_eq(zpk_rx_take(&s.rx, f, NULL, 16), 16);
    for (int i = 0; i < 16; i++)
        zbuf_delete(f[i]);
    cr_assert(sim_rx_all_returned(&s));
    zpk_rx_release_owner(&s.rx);
    sim_rx_free(&s);
    zbuf_pool_delete(pool);
}

/* The ring outlives its owner while frames are lent. */
Test(ring, owner_release_with_frames_on_loan_frees_the_ring_with_the_last_loan)
{
    struct sim_rx s;
    sim_rx_init(&s, ZBUF_PACKET_V3, 2048, 8192, 4, 100, NULL, false, 3, 64, false);
    for (int i = 0; i < 3; i++)
        sim_rx_kernel_write(&s);
    sim_rx_kernel_retire(&s);
    zbuf_t *f[4];
    cr_assert_eq(zpk_rx_take(&s.rx, f, NULL, 2), 2); /* stops inside the block */
    zpk_rx_release_owner(&s.rx);
    cr_assert_eq(s.destroyed, 0);
    zbuf_delete(f[0]);
    cr_assert_eq(s.destroyed, 0);
    zbuf_delete(f[1]);
    cr_assert_eq(s.destroyed, 1);
    cr_assert_eq(zpk_load_status(s.mem), 0, "the block went back to the kernel");
    sim_rx_free(&s);
}

/* ------------------------------------------------------------- transmit */

static void tx_property(unsigned version, uint64_t seed)
{
    struct sim_rng rng = {seed * 0x51ed27ull + 3};
    struct sim_tx s;
    uint32_t frames = 2 * (1 + sim_below(&rng, 16));
    sim_tx_init(&s, version, 2048, 4096, frames, seed);
    atomic_int released = 0;
    uint64_t put = 0;
    int segs_out = 0;
    for (unsigned step = 0; step < 3000; step++) {
        switch (sim_below(&rng, 5)) {
        case 0:
        case 1: {
            size_t len = 14 + sim_below(&rng, 1501);
            bool oversize = sim_below(&rng, 20) == 0;
            if (oversize)
                len = 1515 + sim_below(&rng, 600);
            unsigned nseg = 1 + sim_below(&rng, 4);
            zbuf_t *z = sim_tx_frame(put, len, nseg, &released);
            size_t segs = zbuf_seg_count(z);
            int before = atomic_load(&released);
            int rc = zpk_tx_put(&s.tx, z);
            if (oversize) {
                cr_assert_eq(rc, -EMSGSIZE);
            }
            if (rc == 0) {
                cr_assert_eq(atomic_load(&released), before + (int)segs,
                             "release callbacks must run once the bytes are in the ring");
                segs_out += (int)segs;
                put++;
            } else {
                cr_assert(rc == -EAGAIN || rc == -EMSGSIZE, "rc %d", rc);
                if (rc == -EAGAIN)
                    cr_assert_eq(s.tx.in_ring, frames, "-EAGAIN with room in the ring");
                cr_assert_eq(zbuf_length(z), len, "a refused frame was changed");
                cr_assert_eq(atomic_load(&released), before);
                zbuf_delete(z);
                segs_out += (int)segs;
            }
            break;
        }
        case 2:
            sim_tx_kernel_kick(&s);
            break;
        case 3:
            sim_tx_kernel_complete(&s, sim_below(&rng, 6));
            break;
        default:
            zpk_tx_reap(&s.tx);
            break;
        }
    }
    sim_tx_kernel_kick(&s);
    sim_tx_kernel_complete(&s, UINT32_MAX);
    cr_assert_eq(zpk_tx_reap(&s.tx), 0, "slots the kernel gave back (with TS bits) still counted");
    cr_assert_eq(s.sent, put, "marked frames the kernel never reached (a gap?)");
    cr_assert_eq(s.bad, 0, "frames sent out of order or corrupt");
    cr_assert_eq(s.st.tx_frames, put);
    cr_assert_eq(atomic_load(&released), segs_out);
    sim_tx_free(&s);
}

Test(ring, v2_transmit_fills_in_order_without_gaps_and_masks_timestamp_bits)
{
    for (unsigned s = 1; s <= rounds(); s++)
        tx_property(ZBUF_PACKET_V2, s);
}

Test(ring, v3_transmit_fills_in_order_without_gaps_and_masks_timestamp_bits)
{
    for (unsigned s = 1; s <= rounds(); s++)
        tx_property(ZBUF_PACKET_V3, s);
}

/* The regression itself: a slot handed back as AVAILABLE|TS_SOFTWARE is free. */
Test(ring, transmit_slot_returned_with_timestamp_bits_is_reused)
{
    struct sim_tx s;
    sim_tx_init(&s, ZBUF_PACKET_V2, 2048, 4096, 2, 1);
    for (uint64_t i = 0; i < 300; i++) {
        zbuf_t *z = sim_tx_frame(i, 60, 1, NULL);
        cr_assert_eq(zpk_tx_put(&s.tx, z), 0, "ring hung after %llu frames", (unsigned long long)i);
        sim_tx_kernel_kick(&s);
        uint8_t *f = zpk_frame(s.mem, &s.tx.g, (uint32_t)(i % 2));
        zpk_store_status(f, TP_STATUS_AVAILABLE | TP_STATUS_TS_SOFTWARE);
        s.nflight = 0;
    }
    cr_assert_eq(s.sent, 300);
    sim_tx_free(&s);
}

/* ------------------------------------------------------------- geometry */

static void geom_refused(struct zpk_geom g, unsigned v, bool rx, const char *words)
{
    char why[256] = "";
    cr_assert_eq(zpk_geom_check(&g, v, rx, why, sizeof why), -EINVAL, "accepted: %s", words);
    cr_assert(strstr(why, words) != NULL, "reason \"%s\" does not say \"%s\"", why, words);
}

Test(ring, geometry_rules_are_checked_with_a_reason_before_the_kernel_sees_them)
{
    struct zpk_geom ok = {.block_size = 4096, .block_nr = 4, .frame_size = 2048, .frame_nr = 8};
    cr_assert_eq(zpk_geom_check(&ok, ZBUF_PACKET_V2, true, NULL, 0), 0);
    struct zpk_geom g = ok;
    g.frame_size = 1372; /* the unaligned size an MTU of ~1300 gives */
    geom_refused(g, ZBUF_PACKET_V2, true, "not a multiple of 16");
    g = ok;
    g.block_size = 6000;
    geom_refused(g, ZBUF_PACKET_V2, false, "not a multiple of the page size");
    g = ok;
    g.frame_nr = 7;
    geom_refused(g, ZBUF_PACKET_V2, true, "not the frame count 7");
    g = ok;
    g.frame_size = 64;
    geom_refused(g, ZBUF_PACKET_V2, true, "no room for a frame");
    g = ok;
    g.block_size = 4096;
    g.frame_size = 8192;
    geom_refused(g, ZBUF_PACKET_V3, true, "smaller than the frame size");
}
