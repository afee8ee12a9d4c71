/* SPDX-License-Identifier: MIT */
/* The stream protocol on a virtual network (custom transport, virtual
 * clock): byte-exact transfers in every mode and layout under loss,
 * duplication and reordering; flow control; keepalive; close and abort;
 * hostile input (forged, stale, spoofed, malformed datagrams). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"
#include "ustest.h"
#include "../src/internal.h"

static void fini(void)
{
    zt_assert_no_leaks();
}
TestSuite(stream, .init = zt_leak_baseline, .fini = fini, .timeout = 240);


static void opts(zbuf_udpstream_opts_t *o, zbuf_udpstream_mode_t mode)
{
    zbuf_udpstream_opts_init(o);
    o->mode = mode;
}

static void run_pair(struct unet *n, const zbuf_udpstream_opts_t *o, uint64_t total,
                     bool both, bool copy_api, bool exact, uint64_t seed,
                     zbuf_udpstream_stats_t st[2])
{
    unet_open(n, o);
    struct ut_xfer x;
    ut_xfer_init(&x, n->s[0], n->s[1], total, seed);
    x.both_ways = both;
    x.copy_api = copy_api;
    x.read_exact = exact;
    x.d[0].strict_release = x.d[1].strict_release =
        o->mode == ZBUF_UDPSTREAM_ZEROCOPY && n->loss[0] == 0 && n->loss[1] == 0 &&
        n->reorder == 0 && n->dup == 0;
    ut_xfer_run(&x, unet_pump, n);
    for (int i = 0; i < 2; i++)
        zbuf_udpstream_get_stats(n->s[i], &st[i]);
    unet_free(n);
}

Test(stream, zerocopy_mode_moves_every_byte_by_reference_and_releases_after_the_ack)
{
    struct unet n;
    unet_init(&n, 1);
    zbuf_udpstream_opts_t o;
    opts(&o, ZBUF_UDPSTREAM_ZEROCOPY);
    zbuf_stats_t before, after;
    zbuf_stats_get(&before);
    zbuf_udpstream_stats_t st[2];
    run_pair(&n, &o, ut_scaled(8u << 20, 16), true, false, false, 1, st);
    zbuf_stats_get(&after);
    cr_assert_eq(after.bytes_copied, before.bytes_copied, "the library copied %llu bytes",
                 (unsigned long long)(after.bytes_copied - before.bytes_copied));
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(st[i].bytes_copied, 0);
        cr_assert_eq(st[i].retransmits, 0);
        cr_assert_eq(st[i].bytes_acked, st[i].bytes_written);
    }
}

Test(stream, copying_mode_copies_once_on_send_and_twice_on_receive)
{
    struct unet n;
    unet_init(&n, 2);
    zbuf_udpstream_opts_t o;
    opts(&o, ZBUF_UDPSTREAM_COPY);
    zbuf_udpstream_stats_t st[2];
    uint64_t total = ut_scaled(4u << 20, 16);
    run_pair(&n, &o, total, false, false, false, 2, st);
    cr_assert_eq(st[0].bytes_copied, total, "sender: into the send ring");
    cr_assert_eq(st[1].bytes_copied, 2 * total, "receiver: into the ring, out to the caller");
}

Test(stream, copy_api_in_every_mode)
{
    for (int m = 0; m < 3; m++) {
        struct unet n;
        unet_init(&n, 3 + (uint64_t)m);
        zbuf_udpstream_opts_t o;
        opts(&o, (zbuf_udpstream_mode_t)m);
        zbuf_udpstream_stats_t st[2];
        run_pair(&n, &o, ut_scaled(1u << 20, 16), true, true, false, 3, st);
        cr_assert_geq(st[0].bytes_copied, 1u << 20);
    }
}

Test(stream, auto_mode_copies_small_writes_and_references_large_ones)
{
    struct unet n;
    unet_init(&n, 4);
    zbuf_udpstream_opts_t o;
    opts(&o, ZBUF_UDPSTREAM_AUTO);
    unet_open(&n, &o);
    struct ut_dir d = {.w = n.s[0], .r = n.s[1], .bad_at = UINT64_MAX};
    uint64_t rng = 9;
    while (!(zbuf_udpstream_events(n.s[0]) & ZBUF_UDPSTREAM_CONNECTED))
        cr_assert(unet_pump(&n));
    cr_assert_eq(ut_write_pattern(&d, 0, 100, 100, &rng), 0);
    cr_assert_eq(d.released, d.enrolled, "a 100-byte write is copied: released at once");
    int first = d.enrolled;
    cr_assert_eq(ut_write_pattern(&d, 100, 5000, 5000, &rng), 0);
    cr_assert_eq(d.released, first, "a 5000-byte write waits for its acknowledgement");
    for (int i = 0; i < 1000 && d.released < d.enrolled; i++)
        cr_assert(unet_pump(&n));
    cr_assert_eq(d.released, d.enrolled);
    zbuf_udpstream_stats_t st;
    zbuf_udpstream_get_stats(n.s[0], &st);
    cr_assert_eq(st.bytes_copied, 100);
    unet_free(&n);
}

static void lossy(struct unet *n, double loss, double dup, double reorder)
{
    n->loss[0] = n->loss[1] = loss;
    n->dup = dup;
    n->reorder = reorder;
    n->reorder_us = 3000;
    n->delay_us = 2000;
    n->jitter_us = 500;
}

static void lossy_run(zbuf_udpstream_mode_t mode, bool copy_api, uint64_t seed, double loss)
{
    struct unet n;
    unet_init(&n, seed);
    lossy(&n, loss, 0.02, 0.05);
    zbuf_udpstream_opts_t o;
    opts(&o, mode);
    zbuf_udpstream_stats_t st[2];
    run_pair(&n, &o, ut_scaled(3u << 20, 16), true, copy_api, false, seed, st);
    cr_assert_gt(st[0].retransmits + st[1].retransmits, 0);
    cr_assert_gt(st[0].dup_rx + st[1].dup_rx, 0);
    cr_assert_gt(st[0].ooo_rx + st[1].ooo_rx, 0);
}

Test(stream, zerocopy_both_ways_under_loss_duplication_and_reordering)
{
    lossy_run(ZBUF_UDPSTREAM_ZEROCOPY, false, 11, 0.05);
}

Test(stream, copying_both_ways_under_loss_duplication_and_reordering)
{
    lossy_run(ZBUF_UDPSTREAM_COPY, false, 12, 0.05);
}

Test(stream, auto_with_the_copy_api_under_loss_duplication_and_reordering)
{
    lossy_run(ZBUF_UDPSTREAM_AUTO, true, 13, 0.05);
}

Test(stream, a_transport_that_refuses_part_of_its_batches_loses_nothing)
{
    struct unet n;
    unet_init(&n, 16);
    lossy(&n, 0.02, 0.0, 0.0);
    n.refuse_every = 3;
    zbuf_udpstream_opts_t o;
    opts(&o, ZBUF_UDPSTREAM_AUTO);
    zbuf_udpstream_stats_t st[2];
    run_pair(&n, &o, ut_scaled(2u << 20, 16), true, false, false, 16, st);
    cr_assert_gt(n.refused, 0);
}

Test(stream, twenty_percent_loss_each_way)
{
    struct unet n;
    unet_init(&n, 14);
    lossy(&n, 0.2, 0.0, 0.0);
    zbuf_udpstream_opts_t o;
    opts(&o, ZBUF_UDPSTREAM_ZEROCOPY);
    zbuf_udpstream_stats_t st[2];
    run_pair(&n, &o, ut_scaled(512u << 10, 16), false, false, false, 14, st);
    cr_assert_gt(st[0].timeouts + st[0].fast_retransmits, 0);
}

Test(stream, exact_reads_get_exactly_what_they_ask)
{
    struct unet n;
    unet_init(&n, 15);
    lossy(&n, 0.02, 0.0, 0.02);
    zbuf_udpstream_opts_t o;
    opts(&o, ZBUF_UDPSTREAM_ZEROCOPY);
    zbuf_udpstream_stats_t st[2];
    run_pair(&n, &o, ut_scaled(2u << 20, 16), false, false, true, 15, st);
}

Test(stream, tiny_writes_and_segments_across_lengths)
{
    /* Lengths around the segment size (1444) and its multiples, in
     * one-byte to 300-byte pieces. */
    static const size_t lens[] = {1, 2, 1443, 1444, 1445, 2887, 2888, 2889, 65536, 100000};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        struct unet n;
        unet_init(&n, 20 + i);
        zbuf_udpstream_opts_t o;
        opts(&o, i % 2 ? ZBUF_UDPSTREAM_ZEROCOPY : ZBUF_UDPSTREAM_AUTO);
        unet_open(&n, &o);
        struct ut_xfer x;
        ut_xfer_init(&x, n.s[0], n.s[1], lens[i] * 7, 20 + i);
        x.write_max = lens[i];
        x.piece_max = 1 + i * 30;
        x.read_max = lens[i] + 1;
        ut_xfer_run(&x, unet_pump, &n);
        unet_free(&n);
    }
}

Test(stream, congestion_control_reacts_to_loss_and_can_be_off)
{
    for (int off = 0; off < 2; off++) {
        struct unet n;
        unet_init(&n, 30);
        lossy(&n, 0.03, 0.0, 0.0);
        zbuf_udpstream_opts_t o;
        opts(&o, ZBUF_UDPSTREAM_ZEROCOPY);
        o.no_congestion_control = off;
        zbuf_udpstream_stats_t st[2];
        run_pair(&n, &o, ut_scaled(2u << 20, 16), false, false, false, 30, st);
        if (off)
            cr_assert_eq(st[0].cwnd, UINT32_MAX);
        else
            cr_assert_lt(st[0].cwnd, 1000, "cwnd %u after losses", st[0].cwnd);
    }
}

/* ---------------------------------------------------------- flow control */

Test(stream, a_reader_that_does_not_read_closes_the_window_and_the_sender_waits)
{
    struct unet n;
    unet_init(&n, 40);
    zbuf_udpstream_opts_t o;
    opts(&o, ZBUF_UDPSTREAM_ZEROCOPY);
    o.rcv_wnd = 32;
    unet_open(&n, &o);
    struct ut_xfer x;
    ut_xfer_init(&x, n.s[0], n.s[1], 1u << 20, 40);
    uint64_t rng = 1;
    cr_assert_eq(ut_write_pattern(&x.d[0], 0, 1u << 20, 60000, &rng), 0);
    x.d[0].written = 1u << 20;
    uint64_t t0 = n.now;
    while (n.now < t0 + 5000000)
        cr_assert(unet_pump(&n));
    cr_assert_leq(zbuf_udpstream_readable(n.s[1]), 32u * 1444, "the receiver holds one window");
    zbuf_udpstream_stats_t st;
    zbuf_udpstream_get_stats(n.s[0], &st);
    cr_assert_eq(st.peer_wnd, 0);
    cr_assert_gt(st.keepalives, 0, "the closed window is probed");
    zbuf_udpstream_get_stats(n.s[1], &st);
    cr_assert_eq(st.out_of_window, 0, "the sender respected the window");
    cr_assert_eq(zbuf_udpstream_error(n.s[0]), 0);
    /* Reading opens it again and everything arrives. */
    ut_xfer_run(&x, unet_pump, &n);
    unet_free(&n);
}

Test(stream, keepalives_keep_an_idle_stream_and_a_vanished_peer_times_out)
{
    struct unet n;
    unet_init(&n, 41);
    zbuf_udpstream_opts_t o;
    opts(&o, ZBUF_UDPSTREAM_AUTO);
    o.keepalive_ms = 1000;
    o.timeout_ms = 5000;
    unet_open(&n, &o);
    uint64_t t0 = n.now;
    while (n.now < t0 + 30000000)
        cr_assert(unet_pump(&n));
    zbuf_udpstream_stats_t st;
    zbuf_udpstream_get_stats(n.s[0], &st);
    cr_assert_geq(st.keepalives, 10);
    cr_assert_eq(zbuf_udpstream_error(n.s[0]), 0);
    cr_assert_eq(zbuf_udpstream_error(n.s[1]), 0);
    n.down = true;
    t0 = n.now;
    while (n.now < t0 + 30000000 &&
           !(zbuf_udpstream_error(n.s[0]) && zbuf_udpstream_error(n.s[1])))
        cr_assert(unet_pump(&n));
    cr_assert_eq(zbuf_udpstream_error(n.s[0]), -ETIMEDOUT);
    cr_assert_eq(zbuf_udpstream_error(n.s[1]), -ETIMEDOUT);
    unet_free(&n);
}

Test(stream, a_vanished_peer_fails_the_writer_and_every_release_callback_runs_once)
{
    struct unet n;
    unet_init(&n, 42);
    zbuf_udpstream_opts_t o;
    opts(&o, ZBUF_UDPSTREAM_ZEROCOPY);
    o.timeout_ms = 3000;
    unet_open(&n, &o);
    struct ut_dir d = {.w = n.s[0], .r = NULL, .bad_at = UINT64_MAX};
    uint64_t rng = 2;
    cr_assert_eq(ut_write_pattern(&d, 0, 4u << 20, 3000, &rng), 0);
    for (int i = 0; i < 50; i++)
        cr_assert(unet_pump(&n));
    n.down = true;
    uint64_t t0 = n.now;
    while (n.now < t0 + 10000000 && !zbuf_udpstream_error(n.s[0]))
        cr_assert(unet_pump(&n));
    cr_assert_eq(zbuf_udpstream_error(n.s[0]), -ETIMEDOUT);
    cr_assert_eq(d.released, d.enrolled, "%d of %d released", d.released, d.enrolled);
    cr_assert(zbuf_udpstream_events(n.s[0]) & ZBUF_UDPSTREAM_ERROR);
    cr_assert_eq(zbuf_udpstream_write(n.s[0], NULL), -EINVAL);
    unet_free(&n);
    cr_assert_eq(d.released, d.enrolled);
}

Test(stream, a_handshake_nobody_answers_times_out)
{
    struct unet n;
    unet_init(&n, 43);
    n.down = true;
    zbuf_udpstream_opts_t o;
    opts(&o, ZBUF_UDPSTREAM_AUTO);
    o.timeout_ms = 2000;
    unet_open(&n, &o);
    while (unet_pump(&n) && !zbuf_udpstream_error(n.s[0]))
        cr_assert_lt(n.now, 60000000);
    cr_assert_eq(zbuf_udpstream_error(n.s[0]), -ETIMEDOUT);
    cr_assert_eq(zbuf_udpstream_error(n.s[1]), 0, "the listener waits for ever");
    unet_free(&n);
}

/* --------------------------------------------------------- close, abort */

Test(stream, abort_resets_the_peer_and_releases_the_queue)
{
    struct unet n;
    unet_init(&n, 44);
    zbuf_udpstream_opts_t o;
    opts(&o, ZBUF_UDPSTREAM_ZEROCOPY);
    unet_open(&n, &o);
    struct ut_dir d = {.w = n.s[0], .bad_at = UINT64_MAX};
    uint64_t rng = 3;
    while (!(zbuf_udpstream_events(n.s[1]) & ZBUF_UDPSTREAM_CONNECTED))
        cr_assert(unet_pump(&n));
    n.loss[0] = 0.5; /* some bytes stay unacknowledged */
    cr_assert_eq(ut_write_pattern(&d, 0, 1u << 20, 10000, &rng), 0);
    for (int i = 0; i < 5; i++)
        cr_assert(unet_pump(&n));
    n.loss[0] = 0;
    zbuf_udpstream_abort(n.s[0]);
    cr_assert_eq(zbuf_udpstream_error(n.s[0]), -ECONNABORTED);
    cr_assert_eq(d.released, d.enrolled);
    for (int i = 0; i < 100 && !zbuf_udpstream_error(n.s[1]); i++)
        cr_assert(unet_pump(&n));
    cr_assert_eq(zbuf_udpstream_error(n.s[1]), -ECONNRESET);
    unet_free(&n);
}

Test(stream, delete_with_queued_bytes_runs_every_release_callback)
{
    struct unet n;
    unet_init(&n, 45);
    unet_open(&n, NULL);
    struct ut_dir d = {.w = n.s[0], .bad_at = UINT64_MAX};
    uint64_t rng = 4;
    cr_assert_eq(ut_write_pattern(&d, 0, 300000, 7000, &rng), 0);
    cr_assert_eq(d.released, 0, "nothing is acknowledged before the handshake");
    unet_free(&n);
    cr_assert_eq(d.released, d.enrolled);
}

Test(stream, shutdown_ends_writing_and_the_reader_sees_the_end)
{
    struct unet n;
    unet_init(&n, 46);
    unet_open(&n, NULL);
    cr_assert_eq(zbuf_udpstream_write_copy(n.s[0], "hello", 5), 5);
    cr_assert_eq(zbuf_udpstream_shutdown(n.s[0]), 0);
    cr_assert_eq(zbuf_udpstream_write_copy(n.s[0], "x", 1), -EPIPE);
    char buf[16];
    ssize_t r;
    int guard = 0;
    while ((r = zbuf_udpstream_read_copy(n.s[1], buf, sizeof buf)) == -EAGAIN)
        cr_assert(unet_pump(&n) && ++guard < 1000);
    cr_assert_eq(r, 5);
    cr_assert_eq(memcmp(buf, "hello", 5), 0);
    while ((r = zbuf_udpstream_read_copy(n.s[1], buf, sizeof buf)) == -EAGAIN)
        cr_assert(unet_pump(&n) && ++guard < 2000);
    cr_assert_eq(r, 0, "end of stream");
    cr_assert(zbuf_udpstream_events(n.s[1]) & ZBUF_UDPSTREAM_EOF);
    cr_assert(!(zbuf_udpstream_events(n.s[0]) & ZBUF_UDPSTREAM_CLOSED),
              "the other direction is still open");
    cr_assert_eq(zbuf_udpstream_write_copy(n.s[1], "bye", 3), 3);
    cr_assert_eq(zbuf_udpstream_shutdown(n.s[1]), 0);
    while (!(zbuf_udpstream_events(n.s[0]) & ZBUF_UDPSTREAM_CLOSED) ||
           !(zbuf_udpstream_events(n.s[1]) & ZBUF_UDPSTREAM_CLOSED)) {
        cr_assert(unet_pump(&n) && ++guard < 5000);
    }
    cr_assert_eq(zbuf_udpstream_read_copy(n.s[0], buf, sizeof buf), 3);
    cr_assert_eq(zbuf_udpstream_read_copy(n.s[0], buf, sizeof buf), 0);
    unet_free(&n);
}

Test(stream, bad_arguments_change_nothing)
{
    zbuf_udpstream_opts_t o;
    zbuf_udpstream_opts_init(&o);
    zbuf_udpstream_transport_t t = {0};
    zbuf_udpstream_t *s = NULL;
    cr_assert_eq(zbuf_udpstream_create(&o, &t, NULL, NULL, 0, &s), -EINVAL);
    o.mtu = 100;
    t.send = (int (*)(void *, zbuf_t **, unsigned, const struct sockaddr *, socklen_t))1;
    cr_assert_eq(zbuf_udpstream_create(&o, &t, NULL, NULL, 0, &s), -EINVAL);
    cr_assert_null(s);
    struct unet n;
    unet_init(&n, 47);
    unet_open(&n, NULL);
    zbuf_t *z;
    cr_assert_eq(zbuf_udpstream_read(n.s[1], 1, 10, &z), -EAGAIN);
    cr_assert_eq(zbuf_udpstream_read(n.s[1], 11, 10, &z), -EINVAL);
    cr_assert_eq(zbuf_udpstream_read(n.s[1], 1, 0, &z), -EINVAL);
    cr_assert_eq(zbuf_udpstream_write(NULL, NULL), -EINVAL);
    /* A full send queue refuses a write and leaves the zbuf to the caller. */
    zbuf_udpstream_opts_t small;
    zbuf_udpstream_opts_init(&small);
    unet_free(&n);
    unet_init(&n, 48);
    small.sndbuf = 1000;
    unet_open(&n, &small);
    int rel = 0;
    static char mem[2000];
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_buf(z, mem, 2000, zt_count_release, &rel), 0);
    cr_assert_eq(zbuf_udpstream_write(n.s[0], z), 0, "any length while below sndbuf");
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_buf(z, mem, 10, zt_count_release, &rel), 0);
    cr_assert_eq(zbuf_udpstream_write(n.s[0], z), -EAGAIN);
    cr_assert_eq(zbuf_length(z), 10);
    cr_assert_eq(rel, 0);
    zbuf_delete(z);
    cr_assert_eq(rel, 1);
    unet_free(&n);
    cr_assert_eq(rel, 2);
}

/* ----------------------------------------------------------- hostility */

struct capture {
    uint32_t cid_of[2];     /* the identifier side i expects */
    zbuf_t *last_ack[2];    /* a copy of the last ACK side i sent */
};

static zbuf_t *capture_tap(struct unet *n, int from, zbuf_t *d, void *arg)
{
    (void)n;
    struct capture *c = arg;
    struct zus_hdr h;
    if (zbuf__us_parse(d, &h) == 0 && h.cid != 0) {
        c->cid_of[!from] = h.cid;
        if (h.type == ZUS_ACK) {
            zbuf_delete(c->last_ack[from]);
            zbuf_dup(d, 0, ZBUF_TO_END, &c->last_ack[from]);
        }
    }
    return d;
}

static zbuf_t *copy_of(const zbuf_t *d)
{
    size_t len = zbuf_length(d);
    uint8_t *buf = malloc(len);
    zbuf_copyout(d, 0, buf, len);
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_copy(z, buf, len), 0);
    free(buf);
    return z;
}

Test(stream, forged_stale_spoofed_and_malformed_datagrams_are_counted_and_dropped)
{
    struct unet n;
    unet_init(&n, 50);
    struct capture cap = {0};
    n.tap = capture_tap;
    n.tap_arg = &cap;
    zbuf_udpstream_opts_t o;
    opts(&o, ZBUF_UDPSTREAM_ZEROCOPY);
    unet_open(&n, &o);
    struct ut_xfer x;
    ut_xfer_init(&x, n.s[0], n.s[1], 1u << 20, 50);
    /* Start the transfer, then attack the sender (side 0) with everything. */
    while (cap.last_ack[1] == NULL)
        cr_assert(unet_pump(&n));
    struct zus_hdr h;
    cr_assert_eq(zbuf__us_parse(cap.last_ack[1], &h), 0);
    zbuf_udpstream_stats_t a, b;
    zbuf_udpstream_get_stats(n.s[0], &a);

    /* An acknowledgement of a million segments never sent. */
    unet_inject(&n, 1, ut_forge(ZUS_ACK, 0, cap.cid_of[0], h.sn, h.una + 1000000, 100, NULL, 0),
                NULL);
    /* A stale identifier (an old connection's). */
    unet_inject(&n, 1, ut_forge(ZUS_ACK, 0, cap.cid_of[0] + 1, h.sn, h.una, 100, NULL, 0), NULL);
    /* The right identifier from another address. */
    struct sockaddr_in spoof = n.addr[1];
    spoof.sin_port = htons(6666);
    unet_inject(&n, 1, copy_of(cap.last_ack[1]), &spoof);
    /* A reset from another address must not kill the stream. */
    unet_inject(&n, 1, ut_forge(ZUS_RST, 0, cap.cid_of[0], 0, 0, 0, NULL, 0), &spoof);
    /* A connection request to a connected stream. */
    uint8_t hello[ZUS_HELLO_LEN] = {0, 0, 0, 9, 5, 0x9c, 0, 0};
    unet_inject(&n, 1, ut_forge(ZUS_SYN, 0, 0, 1, 0, 100, hello, sizeof hello), NULL);
    /* Garbage, a truncated datagram, trailing bytes, bad fields. */
    static const uint8_t junk[40] = {0xde, 0xad, 0xbe, 0xef};
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_copy(z, junk, sizeof junk), 0);
    unet_inject(&n, 1, z, NULL);
    z = copy_of(cap.last_ack[1]);
    cr_assert_eq(zbuf_cut(z, 10, ZBUF_TO_END, NULL), 0);
    unet_inject(&n, 1, z, NULL);
    z = copy_of(cap.last_ack[1]);
    cr_assert_eq(zbuf_append_copy(z, junk, 3), 0);
    unet_inject(&n, 1, z, NULL);
    unet_inject(&n, 1, ut_forge(ZUS_DATA, 0, cap.cid_of[0], h.sn, h.una, 100, NULL, 0), NULL);
    unet_inject(&n, 1, ut_forge(9, 0, cap.cid_of[0], h.sn, h.una, 100, NULL, 0), NULL);
    unet_inject(&n, 1, ut_forge(ZUS_ACK, 4, cap.cid_of[0], h.sn, h.una, 100, NULL, 0), NULL);
    zbuf_udpstream_get_stats(n.s[0], &b);
    cr_assert_eq(b.bad_acks - a.bad_acks, 1);
    cr_assert_eq(b.wrong_peer - a.wrong_peer, 4);
    cr_assert_eq(b.bad_dgrams - a.bad_dgrams, 6);
    cr_assert_eq(zbuf_udpstream_error(n.s[0]), 0);

    /* Data far outside the receiver's window, with the right identifier. */
    uint8_t data[100] = {1};
    zbuf_udpstream_get_stats(n.s[1], &a);
    unet_inject(&n, 0, ut_forge(ZUS_DATA, 0, cap.cid_of[1], h.una + 100000, 0, 100, data, 100),
                NULL);
    zbuf_udpstream_get_stats(n.s[1], &b);
    cr_assert_eq(b.out_of_window - a.out_of_window, 1);

    /* The transfer is unharmed. */
    ut_xfer_run(&x, unet_pump, &n);
    zbuf_delete(cap.last_ack[0]);
    zbuf_delete(cap.last_ack[1]);
    unet_free(&n);
}

/* A receiver that advertises less than it did: the sender holds back. */
static zbuf_t *shrink_tap(struct unet *n, int from, zbuf_t *d, void *arg)
{
    (void)n;
    int *count = arg;
    struct zus_hdr h;
    if (from == 1 && zbuf__us_parse(d, &h) == 0 && h.type == ZUS_ACK && h.wnd > 4 &&
        (*count)++ % 3 == 1) {
        zbuf_t *f = ut_forge(ZUS_ACK, 0, h.cid, h.sn, h.una, 4, NULL, 0);
        zbuf_delete(d);
        return f;
    }
    return d;
}

Test(stream, a_window_that_shrinks_is_respected_and_counted)
{
    struct unet n;
    unet_init(&n, 51);
    int count = 0;
    n.tap = shrink_tap;
    n.tap_arg = &count;
    zbuf_udpstream_opts_t o;
    opts(&o, ZBUF_UDPSTREAM_AUTO);
    zbuf_udpstream_stats_t st[2];
    run_pair(&n, &o, ut_scaled(2u << 20, 16), false, false, false, 51, st);
    cr_assert_gt(st[0].wnd_shrinks, 0);
}

/* The last data segment is lost and the FIN behind it arrives: the FIN is
 * acknowledged selectively, but the direction is not over until the data
 * is in (a stream once closed with a byte unacknowledged here). */
static zbuf_t *drop_third_data_tap(struct unet *n, int from, zbuf_t *d, void *arg)
{
    (void)n;
    int *seen = arg;
    struct zus_hdr h;
    if (from == 0 && zbuf__us_parse(d, &h) == 0 && h.type == ZUS_DATA && h.len > 0 &&
        ++*seen == 3) {
        zbuf_delete(d);
        return NULL;
    }
    return d;
}

Test(stream, a_selectively_acknowledged_fin_does_not_end_the_direction_before_its_data)
{
    struct unet n;
    unet_init(&n, 52);
    int seen = 0;
    n.tap = drop_third_data_tap;
    n.tap_arg = &seen;
    zbuf_udpstream_opts_t o;
    opts(&o, ZBUF_UDPSTREAM_ZEROCOPY);
    unet_open(&n, &o);
    struct ut_xfer x;
    ut_xfer_init(&x, n.s[0], n.s[1], 3000, 52);
    /* The other direction ends first, so that only the FIN's
     * acknowledgement stands between side 0 and its close. */
    while (!(zbuf_udpstream_events(n.s[1]) & ZBUF_UDPSTREAM_CONNECTED))
        cr_assert(unet_pump(&n));
    cr_assert_eq(zbuf_udpstream_shutdown(n.s[1]), 0);
    x.d[1].shut = true;
    uint64_t rng = 52;
    cr_assert_eq(ut_write_pattern(&x.d[0], 0, 3000, 3000, &rng), 0);
    x.d[0].written = 3000;
    ut_xfer_run(&x, unet_pump, &n);
    cr_assert_geq(seen, 3);
    zbuf_udpstream_stats_t st;
    zbuf_udpstream_get_stats(n.s[0], &st);
    cr_assert_geq(st.retransmits, 1);
    unet_free(&n);
}
