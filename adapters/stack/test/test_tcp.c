/* SPDX-License-Identifier: MIT */
/* TCP between two stacks over the in-memory link: the state machine, the
 * buffer contract, the timers. */
#include "support.h"
#include "tcpfix.h"

ZT_SUITE(tcp);

struct two {
    ep_t *a, *b;
};

static bool both_connected(void *arg)
{
    struct two *t = arg;
    return t->a->connected && t->b->accepted;
}

static bool b_has(void *arg)
{
    struct two *t = arg;
    return t->b->rx_bytes >= t->a->sent_bytes + 1 && t->b->rx_bytes > 0;
}

static bool b_eof(void *arg)
{
    return ((struct two *)arg)->b->eofs > 0;
}

static uint32_t tcp_pcbs(zbuf_ip_stack_t *s)
{
    zbuf_ip_stats_t st;
    zbuf_ip_stats(s, &st);
    return st.tcp_pcbs;
}

static bool idle_tcp(void *arg)
{
    (void)arg;
    return false;
}

static void rx_equals(ep_t *e, const char *s)
{
    size_t n = strlen(s);
    cr_assert_not_null(e->rx);
    cr_assert_eq(zbuf_length(e->rx), n, "received %zu bytes, want %zu", zbuf_length(e->rx), n);
    char buf[256];
    zbuf_copyout(e->rx, 0, buf, n);
    cr_assert_eq(memcmp(buf, s, n), 0);
}

Test(tcp, handshake_exchange_and_orderly_close)
{
    zh_pair_t p;
    zh_pair_init(&p, NULL, NULL);
    ep_t a = {0}, b = {0};
    struct two t = {&a, &b};
    ep_listen(&b, p.b, 80);
    ep_connect(&a, p.a, ZH_B, 80);
    cr_assert(zh_pair_run(&p, both_connected, &t, 5000));
    cr_assert_eq(zbuf_ip_tcp_state(a.pcb), ZBUF_IP_TCP_ESTABLISHED);
    cr_assert_eq(zbuf_ip_tcp_state(b.pcb), ZBUF_IP_TCP_ESTABLISHED);
    zbuf_ip_tcp_info_t ia;
    zbuf_ip_tcp_info(a.pcb, &ia);
    cr_assert(ia.ts_ok && ia.sack_ok, "both stacks offer timestamps and SACK");
    cr_assert_eq(ia.mss, 1460 - 12, "an MSS of 1460 less the timestamps option");
    cr_assert_eq(ia.remote_port, 80);
    cr_assert_eq(ia.rcv_wscale, 3, "256 KiB window needs shift 3");

    cr_assert_eq(zbuf_ip_tcp_write(a.pcb, ep_text("hello")), 0);
    cr_assert(zh_pair_run(&p, b_has, &t, 5000));
    rx_equals(&b, "hello");
    cr_assert_eq(zbuf_ip_tcp_write(b.pcb, ep_text("world!")), 0);
    zh_pair_run(&p, NULL, NULL, 1000);
    rx_equals(&a, "world!");
    cr_assert_eq(a.sent_bytes, 5);
    cr_assert_eq(b.sent_bytes, 6);

    /* A closes first: A ends in TIME_WAIT, B in LAST_ACK then gone. */
    cr_assert_eq(zbuf_ip_tcp_shutdown(a.pcb), 0);
    cr_assert(zh_pair_run(&p, b_eof, &t, 1000));
    cr_assert_eq(zbuf_ip_tcp_state(b.pcb), ZBUF_IP_TCP_CLOSE_WAIT);
    zbuf_ip_tcp_close(b.pcb);
    zh_pair_run(&p, idle_tcp, NULL, 1000);
    cr_assert_eq(zbuf_ip_tcp_state(a.pcb), ZBUF_IP_TCP_TIME_WAIT);
    cr_assert_eq(a.eofs, 1);
    zh_pair_run(&p, idle_tcp, NULL, ZBUF_IP_TCP_TIME_WAIT_MS + 1000);
    cr_assert_eq(zbuf_ip_tcp_state(a.pcb), ZBUF_IP_TCP_CLOSED, "TIME_WAIT lasts 2 MSL");
    cr_assert_eq(a.errors + b.errors, 0);
    zbuf_ip_tcp_close(a.pcb);
    zbuf_ip_tcp_close(b.listener);
    cr_assert_eq(tcp_pcbs(p.a), 0);
    cr_assert_eq(tcp_pcbs(p.b), 0);
    ep_fini(&a);
    ep_fini(&b);
    zh_pair_fini(&p);
}

static bool both_open(void *arg)
{
    struct two *t = arg;
    return t->a->connected && t->b->connected;
}

Test(tcp, simultaneous_open_and_simultaneous_close)
{
    zh_pair_t p;
    zh_pair_init(&p, NULL, NULL);
    /* Resolve ARP first so that both SYNs cross on the wire. */
    zbuf_ip_ping(p.a, ZH_B, 1, 1, NULL);
    zh_pair_run(&p, NULL, NULL, 100);
    ep_t a = {0}, b = {0};
    struct two t = {&a, &b};
    cr_assert_eq(zbuf_ip_tcp_new(p.a, &a.pcb), 0);
    cr_assert_eq(zbuf_ip_tcp_new(p.b, &b.pcb), 0);
    zbuf_ip_tcp_set_callbacks(a.pcb, &ep_cbs, &a);
    zbuf_ip_tcp_set_callbacks(b.pcb, &ep_cbs, &b);
    cr_assert_eq(zbuf_ip_tcp_bind(a.pcb, ZBUF_IP_ANY, 1111), 0);
    cr_assert_eq(zbuf_ip_tcp_bind(b.pcb, ZBUF_IP_ANY, 2222), 0);
    cr_assert_eq(zbuf_ip_tcp_connect(a.pcb, ZH_B, 2222), 0);
    cr_assert_eq(zbuf_ip_tcp_connect(b.pcb, ZH_A, 1111), 0);
    cr_assert(zh_pair_run(&p, both_open, &t, 500), "simultaneous open completes without a timeout");
    cr_assert_eq(zbuf_ip_tcp_state(a.pcb), ZBUF_IP_TCP_ESTABLISHED);
    cr_assert_eq(zbuf_ip_tcp_state(b.pcb), ZBUF_IP_TCP_ESTABLISHED);
    zbuf_ip_tcp_write(a.pcb, ep_text("x"));
    zbuf_ip_tcp_write(b.pcb, ep_text("y"));
    zh_pair_run(&p, NULL, NULL, 500);
    rx_equals(&a, "y");
    rx_equals(&b, "x");

    /* Both shut down before either FIN arrives: CLOSING, then TIME_WAIT. */
    zbuf_ip_tcp_shutdown(a.pcb);
    zbuf_ip_tcp_shutdown(b.pcb);
    cr_assert_eq(zbuf_ip_tcp_state(a.pcb), ZBUF_IP_TCP_FIN_WAIT_1);
    zh_pair_run(&p, idle_tcp, NULL, 1000);
    cr_assert_eq(zbuf_ip_tcp_state(a.pcb), ZBUF_IP_TCP_TIME_WAIT);
    cr_assert_eq(zbuf_ip_tcp_state(b.pcb), ZBUF_IP_TCP_TIME_WAIT);
    cr_assert_eq(a.eofs, 1);
    cr_assert_eq(b.eofs, 1);
    zbuf_ip_tcp_close(a.pcb);
    zbuf_ip_tcp_close(b.pcb);
    zh_pair_run(&p, NULL, NULL, ZBUF_IP_TCP_TIME_WAIT_MS + 1000);
    cr_assert_eq(tcp_pcbs(p.a), 0, "closed PCBs are freed");
    cr_assert_eq(tcp_pcbs(p.b), 0, "closed PCBs are freed");
    ep_fini(&a);
    ep_fini(&b);
    zh_pair_fini(&p);
}

static bool a_failed(void *arg)
{
    return ((ep_t *)arg)->errors > 0;
}

Test(tcp, connect_to_a_closed_port_is_refused)
{
    zh_pair_t p;
    zh_pair_init(&p, NULL, NULL);
    ep_t a = {0};
    ep_connect(&a, p.a, ZH_B, 81);
    cr_assert(zh_pair_run(&p, a_failed, &a, 2000));
    cr_assert_eq(a.err, -ECONNREFUSED);
    cr_assert_eq(a.connected, 0);
    zh_pair_fini(&p);
}

Test(tcp, connect_times_out_when_nothing_answers)
{
    zbuf_ip_link_config_t lc = {.loss = 1.0};
    zh_pair_t p;
    zh_pair_init(&p, &lc, NULL);
    ep_t a = {0};
    ep_connect(&a, p.a, ZH_B, 80);
    uint64_t t0 = p.now;
    cr_assert(zh_pair_run(&p, a_failed, &a, 600000));
    cr_assert_eq(a.err, -ETIMEDOUT);
    /* ARP gives up first (the SYN waits behind it); SYNs back off 1,2,4.. s. */
    cr_assert_geq(p.now - t0, 3000);
    zh_pair_fini(&p);
}

static bool all_acked(void *arg)
{
    struct two *t = arg;
    return t->a->sent_bytes == 3000;
}

Test(tcp, written_buffers_are_released_when_acknowledged_not_before)
{
    zh_pair_t p;
    zh_pair_init(&p, NULL, NULL);
    ep_t a = {0}, b = {0};
    struct two t = {&a, &b};
    ep_listen(&b, p.b, 80);
    ep_connect(&a, p.a, ZH_B, 80);
    cr_assert(zh_pair_run(&p, both_connected, &t, 5000));
    static char bufs[3][1000];
    int released = 0;
    zbuf_stats_t before, after;
    zbuf_stats_get(&before);
    for (int i = 0; i < 3; i++) {
        memset(bufs[i], 'a' + i, sizeof bufs[i]);
        zbuf_t *z;
        zbuf_create(&z);
        zbuf_append_buf(z, bufs[i], sizeof bufs[i], zt_count_release, &released);
        cr_assert_eq(zbuf_ip_tcp_write(a.pcb, z), 0);
    }
    cr_assert_eq(released, 0, "in flight: still referenced by the retransmission queue");
    zbuf_ip_tcp_info_t ia;
    zbuf_ip_tcp_info(a.pcb, &ia);
    cr_assert_eq(ia.unacked, 3000);
    cr_assert(zh_pair_run(&p, all_acked, &t, 5000));
    /* B still holds the bytes it received: the buffers are shared with it. */
    cr_assert_eq(b.rx_bytes, 3000);
    cr_assert_eq(released, 0, "receiver holds the segments");
    zbuf_delete(b.rx);
    b.rx = NULL;
    cr_assert_eq(released, 3, "each release callback once, after ack and receiver's delete");
    zbuf_stats_get(&after);
    cr_assert_eq(after.bytes_copied, before.bytes_copied, "zero bytes copied");
    zbuf_ip_tcp_abort(a.pcb);
    zh_pair_run(&p, NULL, NULL, 1000);
    cr_assert_eq(b.errors, 1);
    cr_assert_eq(b.err, -ECONNRESET);
    zbuf_ip_tcp_close(b.listener);
    ep_fini(&a);
    ep_fini(&b);
    zh_pair_fini(&p);
}

static bool b_got(void *arg)
{
    struct two *t = arg;
    return t->b->rx_bytes >= 50;
}

static uint64_t segs_for_small_writes(bool nodelay)
{
    zbuf_ip_link_config_t lc = {.delay_ms = 10};
    zh_pair_t p;
    zh_pair_init(&p, &lc, NULL);
    ep_t a = {0}, b = {0};
    struct two t = {&a, &b};
    ep_listen(&b, p.b, 80);
    ep_connect(&a, p.a, ZH_B, 80);
    cr_assert(zh_pair_run(&p, both_connected, &t, 5000));
    zbuf_ip_tcp_set_nodelay(a.pcb, nodelay);
    zbuf_ip_stats_t s0, s1;
    zbuf_ip_stats(p.a, &s0);
    for (int i = 0; i < 50; i++)
        cr_assert_eq(zbuf_ip_tcp_write(a.pcb, ep_text("z")), 0);
    cr_assert(zh_pair_run(&p, b_got, &t, 5000));
    zbuf_ip_stats(p.a, &s1);
    cr_assert_eq(b.rx_bytes, 50);
    zbuf_ip_tcp_abort(a.pcb);
    zbuf_ip_tcp_abort(b.pcb);
    zbuf_ip_tcp_close(b.listener);
    ep_fini(&a);
    ep_fini(&b);
    zh_pair_fini(&p);
    return s1.tcp_tx_segs - s0.tcp_tx_segs;
}

Test(tcp, nagle_coalesces_small_writes_and_nodelay_does_not)
{
    uint64_t nagle = segs_for_small_writes(false);
    uint64_t nodelay = segs_for_small_writes(true);
    cr_assert_leq(nagle, 3, "Nagle: one small segment in flight, the rest coalesced (%llu)",
                  (unsigned long long)nagle);
    cr_assert_geq(nodelay, 50, "nodelay: one segment per write (%llu)", (unsigned long long)nodelay);
}

static bool b_has_window(void *arg)
{
    struct two *t = arg;
    return t->b->rx_bytes >= 256 * 1024 - 8; /* window scale 3: 8-byte granularity */
}

static bool b_has_all(void *arg)
{
    struct two *t = arg;
    return t->b->rx_bytes >= 400 * 1024;
}

Test(tcp, zero_window_is_probed_and_reopened)
{
    zh_pair_t p;
    zh_pair_init(&p, NULL, NULL);
    ep_t a = {0}, b = {0};
    struct two t = {&a, &b};
    ep_listen(&b, p.b, 80);
    ep_connect(&a, p.a, ZH_B, 80);
    cr_assert(zh_pair_run(&p, both_connected, &t, 5000));
    b.hold = true; /* B's application does not consume: the window closes */
    static char data[400 * 1024];
    zbuf_t *z;
    zbuf_create(&z);
    zbuf_append_buf(z, data, 200 * 1024, NULL, NULL);
    cr_assert_eq(zbuf_ip_tcp_write(a.pcb, z), 0);
    zbuf_create(&z);
    zbuf_append_buf(z, data + 200 * 1024, 200 * 1024, NULL, NULL);
    cr_assert_eq(zbuf_ip_tcp_write(a.pcb, z), -EAGAIN, "over the send buffer");
    zh_pair_run(&p, NULL, NULL, 100);
    cr_assert_eq(zbuf_ip_tcp_write(a.pcb, z), 0, "room again after acks");
    cr_assert(zh_pair_run(&p, b_has_window, &t, 5000), "B got %zu", b.rx_bytes);
    zh_pair_run(&p, idle_tcp, NULL, 100); /* let the last ACK go */
    zbuf_ip_tcp_info_t ia, ib;
    zbuf_ip_tcp_info(a.pcb, &ia);
    zbuf_ip_tcp_info(b.pcb, &ib);
    cr_assert_eq(ia.snd_wnd, 0, "peer advertised a zero window");
    cr_assert_lt(ib.rcv_wnd, 8, "below what the scaled field can express");
    zbuf_ip_stats_t s0, s1;
    zbuf_ip_stats(p.a, &s0);
    zh_pair_run(&p, idle_tcp, NULL, 30000);
    zbuf_ip_stats(p.a, &s1);
    cr_assert_geq(s1.tcp_tx_segs - s0.tcp_tx_segs, 3, "window probes while it stays shut");
    cr_assert_leq(s1.tcp_tx_segs - s0.tcp_tx_segs, 20, "probes back off");
    cr_assert_leq(b.rx_bytes, 256 * 1024, "nothing beyond the window was taken");
    cr_assert_geq(b.rx_bytes, 256 * 1024 - 8);
    /* The application consumes: a window update restarts the sender. */
    zbuf_ip_tcp_recved(b.pcb, b.rx_bytes);
    b.hold = false;
    cr_assert(zh_pair_run(&p, b_has_all, &t, 5000), "got %zu", b.rx_bytes);
    cr_assert_eq(zbuf_length(b.rx), 400 * 1024);
    zbuf_ip_tcp_abort(a.pcb);
    zbuf_ip_tcp_abort(b.pcb);
    zbuf_ip_tcp_close(b.listener);
    ep_fini(&a);
    ep_fini(&b);
    zh_pair_fini(&p);
}

Test(tcp, retransmission_timer_backs_off_and_recovers)
{
    zbuf_ip_link_config_t lc = {.delay_ms = 5};
    zh_pair_t p;
    zh_pair_init(&p, &lc, NULL);
    ep_t a = {0}, b = {0};
    struct two t = {&a, &b};
    ep_listen(&b, p.b, 80);
    ep_connect(&a, p.a, ZH_B, 80);
    cr_assert(zh_pair_run(&p, both_connected, &t, 5000));
    zbuf_ip_link_set_impairments(p.link, 1.0, 0, 0); /* the wire is cut */
    cr_assert_eq(zbuf_ip_tcp_write(a.pcb, ep_text("are you there?")), 0);
    zh_pair_run(&p, idle_tcp, NULL, 7000);
    zbuf_ip_tcp_info_t ia;
    zbuf_ip_tcp_info(a.pcb, &ia);
    cr_assert_geq(ia.retransmits, 3);
    cr_assert_geq(ia.rto_ms, 1600, "RTO doubled on each timeout (%u)", ia.rto_ms);
    zbuf_ip_link_set_impairments(p.link, 0, 0, 0);
    cr_assert(zh_pair_run(&p, b_has, &t, 70000));
    rx_equals(&b, "are you there?");
    zh_pair_run(&p, NULL, NULL, 100);
    zbuf_ip_tcp_info(a.pcb, &ia);
    cr_assert_eq(ia.unacked, 0);
    zbuf_ip_tcp_abort(a.pcb);
    zbuf_ip_tcp_abort(b.pcb);
    zbuf_ip_tcp_close(b.listener);
    ep_fini(&a);
    ep_fini(&b);
    zh_pair_fini(&p);
}

Test(tcp, connection_gives_up_after_max_retries)
{
    zh_pair_t p;
    zh_pair_init(&p, NULL, NULL);
    ep_t a = {0}, b = {0};
    struct two t = {&a, &b};
    ep_listen(&b, p.b, 80);
    ep_connect(&a, p.a, ZH_B, 80);
    cr_assert(zh_pair_run(&p, both_connected, &t, 5000));
    zbuf_ip_link_set_impairments(p.link, 1.0, 0, 0);
    int released = 0;
    static char d[100];
    zbuf_t *z;
    zbuf_create(&z);
    zbuf_append_buf(z, d, sizeof d, zt_count_release, &released);
    zbuf_ip_tcp_write(a.pcb, z);
    cr_assert(zh_pair_run(&p, a_failed, &a, 3600000));
    cr_assert_eq(a.err, -ETIMEDOUT);
    cr_assert_eq(released, 1, "unacknowledged data released when the connection dies");
    zbuf_ip_tcp_abort(b.pcb);
    zbuf_ip_tcp_close(b.listener);
    ep_fini(&a);
    ep_fini(&b);
    zh_pair_fini(&p);
}

static bool a_eof_two(void *arg)
{
    return ((struct two *)arg)->a->eofs > 0;
}

Test(tcp, passive_side_closes_first)
{
    zh_pair_t p;
    zh_pair_init(&p, NULL, NULL);
    ep_t a = {0}, b = {0};
    struct two t = {&a, &b};
    a.close_on_eof = true;
    ep_listen(&b, p.b, 80);
    ep_connect(&a, p.a, ZH_B, 80);
    cr_assert(zh_pair_run(&p, both_connected, &t, 5000));
    zbuf_ip_tcp_t *bp = b.pcb;
    zbuf_ip_tcp_write(bp, ep_text("bye"));
    zbuf_ip_tcp_shutdown(bp);
    cr_assert(zh_pair_run(&p, a_eof_two, &t, 2000));
    rx_equals(&a, "bye");
    zh_pair_run(&p, idle_tcp, NULL, 1000);
    cr_assert_eq(zbuf_ip_tcp_state(bp), ZBUF_IP_TCP_TIME_WAIT, "B closed first: B waits");
    zbuf_ip_tcp_close(bp);
    zbuf_ip_tcp_close(b.listener);
    zh_pair_run(&p, NULL, NULL, ZBUF_IP_TCP_TIME_WAIT_MS + 1000);
    cr_assert_eq(tcp_pcbs(p.a), 0);
    cr_assert_eq(tcp_pcbs(p.b), 0);
    ep_fini(&a);
    ep_fini(&b);
    zh_pair_fini(&p);
}

Test(tcp, keepalive_probes_an_idle_peer_and_gives_up_when_it_is_gone)
{
    zh_pair_t p;
    zh_pair_init(&p, NULL, NULL);
    ep_t a = {0}, b = {0};
    struct two t = {&a, &b};
    ep_listen(&b, p.b, 80);
    ep_connect(&a, p.a, ZH_B, 80);
    cr_assert(zh_pair_run(&p, both_connected, &t, 5000));
    cr_assert_eq(zbuf_ip_tcp_set_keepalive(a.pcb, 1000, 0, 3), -EINVAL);
    cr_assert_eq(zbuf_ip_tcp_set_keepalive(a.pcb, 1000, 500, 3), 0);
    zh_pair_run(&p, idle_tcp, NULL, 10000);
    zbuf_ip_stats_t st;
    zbuf_ip_stats(p.a, &st);
    cr_assert_geq(st.tcp_keepalive_probes, 5, "one probe per idle second");
    cr_assert_eq(a.errors, 0, "the peer answers every probe");
    cr_assert_eq(zbuf_ip_tcp_state(a.pcb), ZBUF_IP_TCP_ESTABLISHED);
    zbuf_ip_link_set_impairments(p.link, 1.0, 0, 0);
    cr_assert(zh_pair_run(&p, a_failed, &a, 10000));
    cr_assert_eq(a.err, -ETIMEDOUT);
    zbuf_ip_tcp_abort(b.pcb);
    zbuf_ip_tcp_close(b.listener);
    ep_fini(&a);
    ep_fini(&b);
    zh_pair_fini(&p);
}

/* What a monitor sees of one side's TCP packets on a link with
 * segmentation offload. */
struct tso_watch {
    int side;         /* the sender watched */
    size_t mss;
    int runs;         /* packets carrying more than one MSS of payload */
    int runs_fin;     /* ... of which with FIN */
    size_t largest;   /* the largest payload seen since the last reset */
};

static void tso_monitor(void *arg, int side, const zbuf_t *frame)
{
    struct tso_watch *w = arg;
    uint8_t h[14 + 20 + 60];
    if (side != w->side || zbuf_length(frame) < sizeof h ||
        zbuf_copyout(frame, 0, h, sizeof h) != (ssize_t)sizeof h || h[12] != 0x08 || h[13] != 0 ||
        h[14] != 0x45 || h[23] != 6)
        return;
    size_t tot = (size_t)h[16] << 8 | h[17];
    size_t payload = tot - 20 - (size_t)(h[14 + 20 + 12] >> 4) * 4;
    if (payload > w->largest)
        w->largest = payload;
    if (payload > w->mss) {
        w->runs++;
        w->runs_fin += (h[14 + 20 + 13] & 0x01) != 0;
    }
}

static void rx_pattern(ep_t *e, size_t n, uint32_t salt)
{
    cr_assert_not_null(e->rx);
    cr_assert_eq(zbuf_length(e->rx), n, "received %zu bytes, want %zu", zbuf_length(e->rx), n);
    uint8_t *b = malloc(n);
    zbuf_copyout(e->rx, 0, b, n);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(b[i], zh_pattern(i, salt), "byte %zu", i);
    free(b);
}

static bool a_has_all(void *arg)
{
    struct two *t = arg;
    return t->a->rx != NULL && zbuf_length(t->a->rx) == 8 * (size_t)1448;
}

/* On a link with segmentation offload a run of full-sized segments leaves
 * as one packet, the FIN with the last of them; a lost run is repaired a
 * segment at a time, every byte delivered once and in order. */
Test(tcp, segmentation_offload_sends_runs_with_the_fin_and_repairs_them_by_segment)
{
    zbuf_ip_link_config_t lc = {.tso = true};
    zh_pair_t p;
    zh_pair_init(&p, &lc, NULL);
    struct tso_watch w = {.side = 0, .mss = 1448};
    zbuf_ip_link_set_monitor(p.link, tso_monitor, &w);
    ep_t a = {0}, b = {0};
    struct two t = {&a, &b};
    ep_listen(&b, p.b, 80);
    ep_connect(&a, p.a, ZH_B, 80);
    cr_assert(zh_pair_run(&p, both_connected, &t, 5000));
    zbuf_ip_tcp_info_t ia;
    zbuf_ip_tcp_info(a.pcb, &ia);
    cr_assert_eq(ia.mss, 1448, "the MSS still comes from the MTU");

    /* Eighteen segments, then the FIN: the initial window (ten segments)
     * leaves at once as one packet, the other eight wait for its ACK and
     * then go as one packet with the FIN. */
    size_t n = 18 * (size_t)ia.mss;
    cr_assert_eq(zbuf_ip_tcp_write(a.pcb, zh_pattern_zbuf(0, n, 7)), 0);
    cr_assert_eq(w.runs, 1, "the initial window left as one packet");
    cr_assert_eq(w.largest, 10 * (size_t)ia.mss);
    cr_assert_eq(zbuf_ip_tcp_shutdown(a.pcb), 0);
    cr_assert(zh_pair_run(&p, b_eof, &t, 5000));
    rx_pattern(&b, n, 7);
    cr_assert_eq(w.runs, 2, "%d packets of more than one segment", w.runs);
    cr_assert_eq(w.runs_fin, 1, "the FIN rides with the last run");
    zbuf_ip_stats_t sa;
    zbuf_ip_stats(p.a, &sa);
    cr_assert_eq(sa.tcp_tx_payload, n);
    cr_assert_eq(sa.tcp_retransmits, 0);
    n = 8 * (size_t)ia.mss;

    /* B answers with eight segments in one packet, which is lost. */
    w = (struct tso_watch){.side = 1, .mss = 1448};
    zbuf_ip_link_set_impairments(p.link, 1.0, 0, 0);
    cr_assert_eq(zbuf_ip_tcp_write(b.pcb, zh_pattern_zbuf(0, n, 9)), 0);
    zh_pair_run(&p, idle_tcp, NULL, 1);
    cr_assert_eq(w.runs, 1, "B's answer left as one packet");
    zbuf_ip_link_set_impairments(p.link, 0, 0, 0);
    w.largest = 0;
    cr_assert(zh_pair_run(&p, a_has_all, &t, 10000));
    rx_pattern(&a, n, 9);
    zbuf_ip_stats_t sb;
    zbuf_ip_stats(p.b, &sb);
    cr_assert_geq(sb.tcp_retransmits, 1);
    cr_assert_leq(w.largest, ia.mss, "what is resent goes a segment at a time (%zu bytes)",
                  w.largest);
    cr_assert_eq(a.errors + b.errors, 0);

    zbuf_ip_tcp_close(b.pcb);
    zbuf_ip_tcp_close(b.listener);
    zh_pair_run(&p, idle_tcp, NULL, ZBUF_IP_TCP_TIME_WAIT_MS + 1000);
    zbuf_ip_tcp_close(a.pcb);
    cr_assert_eq(tcp_pcbs(p.a) + tcp_pcbs(p.b), 0);
    ep_fini(&a);
    ep_fini(&b);
    zh_pair_fini(&p);
}
