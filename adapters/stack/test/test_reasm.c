/* SPDX-License-Identifier: MIT */
/* IPv4 fragment reassembly (crafted fragments into one stack) and
 * fragmentation on output (between two stacks over the in-memory link). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "support.h"

ZT_SUITE(reasm);

#define UDP_PORT 9000
#define MAXDG 65536

/* ------------------------------------------------------------- builders */

static void w16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

/* A UDP datagram (header + `plen` pattern bytes) from B:5000 to A:UDP_PORT. */
static size_t udp_dgram(uint8_t *d, size_t plen, uint32_t salt)
{
    memset(d, 0, 8);
    w16(d, 5000);
    w16(d + 2, UDP_PORT);
    w16(d + 4, (uint16_t)(8 + plen));
    for (size_t i = 0; i < plen; i++)
        d[8 + i] = zh_pattern(i, salt);
    w16(d + 6, zh_l4_csum(ZH_B, ZH_A, 17, d, 8 + plen));
    return 8 + plen;
}

/* An ICMP echo request with `plen` pattern bytes. */
static size_t echo_dgram(uint8_t *d, size_t plen, uint32_t salt)
{
    memset(d, 0, 8);
    d[0] = 8;
    w16(d + 4, 0x1234);
    w16(d + 6, 7);
    for (size_t i = 0; i < plen; i++)
        d[8 + i] = zh_pattern(i, salt);
    w16(d + 2, zh_csum(d, 8 + plen));
    return 8 + plen;
}

/* One Ethernet frame carrying bytes [off, off+len) of datagram `d` as an
 * IPv4 fragment from B to `dst`. */
static size_t frag_frame_to(uint8_t *f, uint32_t dst, uint16_t id, uint8_t proto, size_t off,
                            bool mf, const uint8_t *d, size_t len)
{
    size_t o = zh_eth(f, zh_mac_a, zh_mac_b, 0x0800);
    uint8_t *h = f + o;
    zh_ip(h, ZH_B, dst, proto, len);
    w16(h + 4, id);
    w16(h + 6, (uint16_t)((mf ? 0x2000 : 0) | (off >> 3)));
    w16(h + 10, 0);
    w16(h + 10, zh_csum(h, 20));
    memcpy(h + 20, d + off, len);
    return o + 20 + len;
}

static size_t frag_frame(uint8_t *f, uint16_t id, uint8_t proto, size_t off, bool mf,
                         const uint8_t *d, size_t len)
{
    return frag_frame_to(f, ZH_A, id, proto, off, mf, d, len);
}

/* Feed fragment `k` of datagram `d` (`len` bytes cut in pieces of `fs`). */
static int feed_piece(zh_single_t *u, const uint8_t *d, size_t len, size_t fs, int k,
                      uint16_t id, uint8_t proto, int *released)
{
    static uint8_t f[MAXDG + 64];
    size_t off = (size_t)k * fs;
    size_t n = len - off < fs ? len - off : fs;
    size_t fl = frag_frame(f, id, proto, off, off + n < len, d, n);
    return zh_input_loaned(u, f, fl, released);
}

static int pieces(size_t len, size_t fs)
{
    return (int)((len + fs - 1) / fs);
}

/* Feed every fragment in `order` (NULL: in order). */
static void feed_all(zh_single_t *u, const uint8_t *d, size_t len, size_t fs, const int *order,
                     uint16_t id, uint8_t proto, int *released)
{
    int n = pieces(len, fs);
    for (int i = 0; i < n; i++) {
        int rc = feed_piece(u, d, len, fs, order ? order[i] : i, id, proto, released);
        cr_assert_eq(rc, 0, "fragment %d: %d", i, rc);
    }
}

/* ------------------------------------------------------------- receiver */

typedef struct rx {
    int n;          /* datagrams delivered */
    zbuf_t *last;   /* the last one, kept */
} rx_t;

static void rx_cb(void *arg, zbuf_ip_udp_t *pcb, zbuf_t *data, uint32_t src, uint16_t sport)
{
    (void)pcb;
    (void)sport;
    rx_t *r = arg;
    cr_assert(src == ZH_B || src == ZH_A);
    zt_check(data);
    zbuf_delete(r->last);
    r->last = data;
    r->n++;
}

static zbuf_ip_udp_t *listen_udp(zh_single_t *u, rx_t *r)
{
    zbuf_ip_udp_t *pcb;
    cr_assert_eq(zbuf_ip_udp_new(u->s, &pcb), 0);
    cr_assert_eq(zbuf_ip_udp_bind(pcb, ZBUF_IP_ANY, UDP_PORT), 0);
    zbuf_ip_udp_set_recv(pcb, rx_cb, r);
    return pcb;
}

/* The delivered payload equals the pattern of `plen` bytes. */
static void assert_pattern(const zbuf_t *z, size_t plen, uint32_t salt)
{
    cr_assert_eq(zbuf_length(z), plen);
    uint8_t *buf = malloc(plen ? plen : 1);
    cr_assert_eq(zbuf_copyout(z, 0, buf, plen), (ssize_t)plen);
    for (size_t i = 0; i < plen; i++)
        cr_assert_eq(buf[i], zh_pattern(i, salt), "byte %zu", i);
    free(buf);
}

static zbuf_ip_stats_t stats(zh_single_t *u)
{
    zbuf_ip_stats_t st;
    zbuf_ip_stats(u->s, &st);
    return st;
}

/* One stack, a UDP receiver on UDP_PORT and a datagram `d` from B. */
typedef struct fx {
    zh_single_t u;
    rx_t r;
    zbuf_ip_udp_t *pcb;
    size_t len;    /* bytes of d */
    int released;  /* loaned frame buffers returned */
    uint8_t d[MAXDG + 64]; /* room for offsets past the 65535-byte limit */
} fx_t;

static fx_t *fx_new(const zbuf_ip_config_t *c, size_t plen, uint32_t salt)
{
    fx_t *x = calloc(1, sizeof *x);
    cr_assert_not_null(x);
    zh_single_init(&x->u, c);
    x->pcb = listen_udp(&x->u, &x->r);
    x->len = udp_dgram(x->d, plen, salt);
    return x;
}

/* Tear down; returns how many loaned buffers came back in all. */
static int fx_free(fx_t *x)
{
    zbuf_delete(x->r.last);
    zbuf_ip_udp_delete(x->pcb);
    zh_single_fini(&x->u);
    int n = x->released;
    free(x);
    return n;
}

/* Fragment k of d cut at 1480 bytes, datagram `id`. */
static int fx_piece(fx_t *x, int k, uint16_t id)
{
    return feed_piece(&x->u, x->d, x->len, 1480, k, id, 17, &x->released);
}

/* Bytes [off, off+len) of d as a fragment of datagram `id`. */
static int fx_raw(fx_t *x, uint16_t id, size_t off, bool mf, size_t len)
{
    static uint8_t f[MAXDG + 64];
    return zh_input_loaned(&x->u, f, frag_frame(f, id, 17, off, mf, x->d, len), &x->released);
}

/* Deliver an 8000-byte UDP payload fragmented at 1480 in `order` and check
 * it arrives whole, as the six loaned buffers, with nothing copied. */
static void udp_8000_in(const int *order)
{
    fx_t *x = fx_new(NULL, 8000, 11);
    zbuf_stats_t before, after;
    zbuf_stats_get(&before);
    feed_all(&x->u, x->d, x->len, 1480, order, 77, 17, &x->released);
    zbuf_stats_get(&after);
    cr_assert_eq(after.bytes_copied, before.bytes_copied, "reassembly copied %llu bytes",
                 (unsigned long long)(after.bytes_copied - before.bytes_copied));
    cr_assert_eq(x->r.n, 1);
    cr_assert_eq(zbuf_seg_count(x->r.last), 6, "one segment per fragment, the driver's buffers");
    cr_assert_eq(x->released, 0, "the application holds every buffer");
    assert_pattern(x->r.last, 8000, 11);
    zbuf_ip_stats_t st = stats(&x->u);
    cr_assert_eq(st.ip_frags_rx, 6);
    cr_assert_eq(st.ip_reassembled, 1);
    cr_assert_eq(st.ip_frag_drops, 0);
    cr_assert_eq(st.ip_reasm_pending, 0);
    cr_assert_eq(st.ip_reasm_held, 0);
    cr_assert_eq(st.udp_payload_rx, 8000);
    cr_assert_eq(zbuf_ip_next_deadline(x->u.s), ZBUF_IP_NEVER, "no timer left");
    zbuf_delete(x->r.last);
    x->r.last = NULL;
    cr_assert_eq(x->released, 6, "deleting the datagram returns the six buffers");
    cr_assert_eq(fx_free(x), 6);
}

/* ------------------------------------------------------------ in order */

Test(reasm, udp_in_order_is_delivered_without_copy)
{
    udp_8000_in(NULL);
}

Test(reasm, udp_in_reverse_order_is_delivered)
{
    const int order[] = {5, 4, 3, 2, 1, 0};
    udp_8000_in(order);
}

Test(reasm, udp_shuffled_is_delivered)
{
    const int orders[][6] = {{2, 0, 5, 1, 4, 3}, {5, 0, 4, 1, 3, 2}, {1, 3, 5, 0, 2, 4}};
    for (size_t i = 0; i < sizeof orders / sizeof orders[0]; i++)
        udp_8000_in(orders[i]);
}

Test(reasm, headers_straddling_segments_and_tiny_fragments_still_reassemble)
{
    fx_t *x = fx_new(NULL, 64, 3); /* 72 bytes: nine fragments of 8 */
    uint8_t f[128];
    for (int k = pieces(x->len, 8) - 1; k >= 0; k--) {
        size_t fl = frag_frame(f, 9, 17, (size_t)k * 8, (size_t)k * 8 + 8 < x->len, x->d, 8);
        cr_assert_eq(zh_input(&x->u, f, fl, 7), 0, "piece %d (frame cut every 7 bytes)", k);
    }
    cr_assert_eq(x->r.n, 1);
    assert_pattern(x->r.last, 64, 3);
    fx_free(x);
}

/* ----------------------------------------------------- duplicates, overlap */

Test(reasm, exact_duplicate_is_ignored)
{
    fx_t *x = fx_new(NULL, 3000, 5);
    cr_assert_eq(fx_piece(x, 0, 1), 0);
    cr_assert_eq(fx_piece(x, 0, 1), -EEXIST);
    cr_assert_eq(x->released, 1, "the duplicate's buffer went back at once");
    cr_assert_eq(fx_piece(x, 2, 1), 0);
    cr_assert_eq(fx_piece(x, 2, 1), -EEXIST, "a duplicate last fragment too");
    cr_assert_eq(fx_piece(x, 1, 1), 0);
    cr_assert_eq(x->r.n, 1);
    assert_pattern(x->r.last, 3000, 5);
    zbuf_ip_stats_t st = stats(&x->u);
    cr_assert_eq(st.ip_frags_rx, 5);
    cr_assert_eq(st.ip_frag_drops, 2);
    cr_assert_eq(st.ip_reasm_overlaps, 0);
    cr_assert_eq(fx_free(x), 5);
}

Test(reasm, overlap_drops_the_whole_datagram)
{
    fx_t *x = fx_new(NULL, 3000, 5);
    /* [0,1480) then [1472,2952): Teardrop-style overlap of 8 bytes. */
    cr_assert_eq(fx_raw(x, 2, 0, true, 1480), 0);
    cr_assert_eq(fx_raw(x, 2, 1472, true, 1480), -EBADMSG);
    cr_assert_eq(x->released, 2, "both buffers returned");
    zbuf_ip_stats_t st = stats(&x->u);
    cr_assert_eq(st.ip_reasm_overlaps, 1);
    cr_assert_eq(st.ip_reasm_pending, 0);
    cr_assert_eq(st.ip_reasm_held, 0);
    cr_assert_eq(st.ip_frag_drops, 2);
    /* The rest of the datagram starts a new reassembly that never
     * completes: nothing reaches the application. */
    cr_assert_eq(fx_raw(x, 2, 2960, false, x->len - 2960), 0);
    /* A fragment inside another one, and one that covers two. */
    cr_assert_eq(fx_raw(x, 3, 0, true, 1480), 0);
    cr_assert_eq(fx_raw(x, 3, 8, true, 16), -EBADMSG);
    cr_assert_eq(fx_raw(x, 4, 8, true, 8), 0);
    cr_assert_eq(fx_raw(x, 4, 24, true, 8), 0);
    cr_assert_eq(fx_raw(x, 4, 0, true, 40), -EBADMSG);
    cr_assert_eq(x->r.n, 0);
    st = stats(&x->u);
    cr_assert_eq(st.ip_reasm_overlaps, 3);
    cr_assert_eq(st.ip_reasm_pending, 1, "only the tail of datagram 2 waits");
    cr_assert_eq(fx_free(x), 8, "stack delete freed the held tail");
}

Test(reasm, inconsistent_ends_drop_the_datagram)
{
    fx_t *x = fx_new(NULL, 3000, 5);
    /* Two last fragments with different ends. */
    cr_assert_eq(fx_raw(x, 5, 1480, false, 100), 0);
    cr_assert_eq(fx_raw(x, 5, 2960, false, 48), -EBADMSG);
    /* A fragment with MF set past the known end. */
    cr_assert_eq(fx_raw(x, 6, 1480, false, 100), 0);
    cr_assert_eq(fx_raw(x, 6, 2960, true, 40), -EBADMSG);
    /* A last fragment ending before a held one. */
    cr_assert_eq(fx_raw(x, 7, 1480, true, 800), 0);
    cr_assert_eq(fx_raw(x, 7, 800, false, 200), -EBADMSG);
    zbuf_ip_stats_t st = stats(&x->u);
    cr_assert_eq(st.ip_reasm_overlaps, 3);
    cr_assert_eq(st.ip_reasm_pending, 0);
    cr_assert_eq(x->released, 6);
    fx_free(x);
}

/* ----------------------------------------------------------- malformed */

Test(reasm, malformed_fragments_are_dropped)
{
    fx_t *x = fx_new(NULL, 3000, 5);
    cr_assert_eq(fx_raw(x, 8, 0, true, 1001), -EBADMSG, "MF with a length not a multiple of 8");
    cr_assert_eq(fx_raw(x, 8, 800, true, 0), -EBADMSG, "zero-length fragment with MF");
    cr_assert_eq(fx_raw(x, 8, 800, false, 0), -EBADMSG, "zero-length last fragment");
    /* A fragment for another host is not held (nor is it ours to route). */
    uint8_t f[2048];
    size_t fl = frag_frame_to(f, ZBUF_IP_ADDR(192, 0, 2, 77), 8, 17, 0, true, x->d, 1480);
    cr_assert_eq(zh_input_loaned(&x->u, f, fl, &x->released), -ENOENT);
    zbuf_ip_stats_t st = stats(&x->u);
    cr_assert_eq(st.ip_reasm_pending, 0, "none of them opened a reassembly");
    cr_assert_eq(st.ip_frags_rx, 3);
    cr_assert_eq(st.ip_frag_drops, 3);
    cr_assert_eq(st.ip_not_ours, 1);
    cr_assert_eq(x->released, 4);
    fx_free(x);
}

Test(reasm, datagram_beyond_65535_bytes_is_rejected)
{
    fx_t *x = fx_new(NULL, 0, 0);
    /* Ping of Death: held first part, then a fragment ending past 65535. */
    cr_assert_eq(fx_raw(x, 9, 0, true, 1480), 0);
    cr_assert_eq(fx_raw(x, 9, 65528, false, 16), -EMSGSIZE);
    zbuf_ip_stats_t st = stats(&x->u);
    cr_assert_eq(st.ip_reasm_oversize, 1);
    cr_assert_eq(st.ip_reasm_pending, 0, "the held part went too");
    cr_assert_eq(x->released, 2);
    /* Exactly 65535 bytes of IP datagram is fine: 65515 of payload. */
    cr_assert_eq(fx_raw(x, 10, 65512, false, 3), 0);
    cr_assert_eq(fx_raw(x, 10, 65512, false, 4), -EMSGSIZE);
    cr_assert_eq(fx_free(x), 4);
}

/* -------------------------------------------------------------- limits */

Test(reasm, too_many_fragments_drop_the_datagram)
{
    fx_t *x = fx_new(NULL, 0, 0);
    for (int k = 0; k < ZBUF_IP_REASM_FRAGS; k++)
        cr_assert_eq(fx_raw(x, 11, (size_t)k * 8, true, 8), 0);
    cr_assert_eq(stats(&x->u).ip_reasm_pending, 1);
    cr_assert_eq(fx_raw(x, 11, 8 * ZBUF_IP_REASM_FRAGS, false, 8), -ENOBUFS);
    zbuf_ip_stats_t st = stats(&x->u);
    cr_assert_eq(st.ip_reasm_drops, 1);
    cr_assert_eq(st.ip_reasm_pending, 0);
    cr_assert_eq(st.ip_frag_drops, ZBUF_IP_REASM_FRAGS + 1);
    cr_assert_eq(x->released, ZBUF_IP_REASM_FRAGS + 1);
    fx_free(x);
}

Test(reasm, too_many_datagrams_evict_the_oldest)
{
    fx_t *x = fx_new(NULL, 3000, 21);
    /* First fragments of ZBUF_IP_REASM_MAX + 1 datagrams, ids 100.. */
    for (int i = 0; i <= ZBUF_IP_REASM_MAX; i++) {
        x->u.now++;
        cr_assert_eq(fx_piece(x, 0, (uint16_t)(100 + i)), 0);
    }
    zbuf_ip_stats_t st = stats(&x->u);
    cr_assert_eq(st.ip_reasm_pending, ZBUF_IP_REASM_MAX);
    cr_assert_eq(st.ip_reasm_drops, 1);
    cr_assert_eq(x->released, 1, "the oldest datagram's buffer was returned");
    /* The newest completes; the evicted oldest cannot any more. */
    fx_piece(x, 1, (uint16_t)(100 + ZBUF_IP_REASM_MAX));
    fx_piece(x, 2, (uint16_t)(100 + ZBUF_IP_REASM_MAX));
    cr_assert_eq(x->r.n, 1);
    assert_pattern(x->r.last, 3000, 21);
    fx_piece(x, 1, 100);
    fx_piece(x, 2, 100);
    cr_assert_eq(x->r.n, 1, "datagram 100 lost its first fragment to the eviction");
    cr_assert_eq(fx_free(x), ZBUF_IP_REASM_MAX + 1 + 4);
}

Test(reasm, byte_budget_evicts_the_oldest)
{
    zbuf_ip_config_t c;
    zbuf_ip_config_init(&c);
    c.ip_reasm_bytes = 4 * 1600; /* four 1514-byte frames' buffers */
    fx_t *x = fx_new(&c, 3000, 21);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(fx_piece(x, 0, (uint16_t)(200 + i)), 0);
    zbuf_ip_stats_t st = stats(&x->u);
    cr_assert_eq(st.ip_reasm_pending, 4);
    cr_assert_eq(st.ip_reasm_held, 4 * 1514,
                 "each fragment is charged its whole 1514-byte frame buffer, not its 1480 "
                 "payload bytes: %u", st.ip_reasm_held);
    cr_assert_eq(fx_piece(x, 0, 204), 0);
    st = stats(&x->u);
    cr_assert_eq(st.ip_reasm_pending, 4, "the oldest went for the newest");
    cr_assert_eq(st.ip_reasm_drops, 1);
    cr_assert_eq(x->released, 1);
    cr_assert_leq(st.ip_reasm_held, c.ip_reasm_bytes);
    cr_assert_eq(fx_free(x), 5);
}

Test(reasm, tiny_fragments_are_charged_their_whole_buffers)
{
    static uint8_t d[64];
    zh_single_t u;
    zh_single_init(&u, NULL);
    int released = 0;
    /* An 8-byte fragment at the end of a 4096-byte driver buffer. */
    uint8_t *b = malloc(4096);
    size_t fl = frag_frame(b + 4096 - 42, 300, 17, 0, true, d, 8);
    cr_assert_eq(fl, 42);
    zbuf_t *z;
    zbuf_create(&z);
    zbuf_buf_t *buf;
    cr_assert_eq(zbuf_buf_wrap(b, 4096, zt_count_release, &released, &buf), 0);
    cr_assert_eq(zbuf_append_ref(z, buf, 4096 - 42, 42), 0);
    zbuf_buf_unref(buf);
    cr_assert_eq(zbuf_ip_netif_input(u.nif, z), 0);
    cr_assert_eq(stats(&u).ip_reasm_held, 8 + 2048, "8 bytes used plus at most 2 KiB of slack");
    zh_single_fini(&u);
    cr_assert_eq(released, 1);
    free(b);
}

/* ------------------------------------------------------------- timeout */

Test(reasm, missing_piece_times_out_and_frees_the_buffers)
{
    fx_t *x = fx_new(NULL, 8000, 1);
    zh_learn_b(&x->u);
    uint64_t t0 = x->u.now;
    for (int k = 0; k < 6; k++)
        if (k != 3)
            cr_assert_eq(fx_piece(x, k, 12), 0);
    zbuf_ip_stats_t st = stats(&x->u);
    cr_assert_eq(st.ip_reasm_pending, 1);
    cr_assert_geq(st.ip_reasm_held, 4 * 1480 + 608, "at least the payload is charged");
    cr_assert_eq(zbuf_ip_next_deadline(x->u.s), t0 + ZBUF_IP_REASM_TIMEOUT_MS);
    x->u.now = t0 + ZBUF_IP_REASM_TIMEOUT_MS - 1;
    zbuf_ip_poll(x->u.s);
    cr_assert_eq(x->released, 0, "not yet");
    x->u.now = t0 + ZBUF_IP_REASM_TIMEOUT_MS;
    cr_assert_eq(zbuf_ip_poll(x->u.s), 1, "one timer event");
    cr_assert_eq(x->released, 5, "every held buffer returned, once");
    cr_assert_eq(x->u.ntx, 1, "ICMP time exceeded to the sender");
    st = stats(&x->u);
    cr_assert_eq(st.ip_reasm_timeouts, 1);
    cr_assert_eq(st.ip_reasm_pending, 0);
    cr_assert_eq(st.ip_reasm_held, 0);
    cr_assert_eq(st.ip_frag_drops, 5);
    cr_assert_eq(zbuf_ip_next_deadline(x->u.s), t0 + ZBUF_IP_ARP_MAX_AGE_MS,
                 "only the ARP entry's expiry is left");
    /* The missing piece alone now is a new, incomplete datagram. */
    cr_assert_eq(fx_piece(x, 3, 12), 0);
    cr_assert_eq(x->r.n, 0);
    cr_assert_eq(fx_free(x), 6);
}

Test(reasm, timeout_sends_time_exceeded_when_the_first_fragment_came)
{
    fx_t *x = fx_new(NULL, 3000, 1);
    zh_learn_b(&x->u);
    cr_assert_eq(fx_piece(x, 0, 0x5151), 0);
    cr_assert_eq(fx_piece(x, 2, 0x5252), 0); /* datagram 0x5252 lacks its first */
    x->u.now += ZBUF_IP_REASM_TIMEOUT_MS;
    cr_assert_eq(zbuf_ip_poll(x->u.s), 2);
    cr_assert_eq(x->u.ntx, 1, "one ICMP message, about 0x5151 only");
    uint8_t f[128];
    size_t n = zh_tx_bytes(&x->u, 0, f, sizeof f);
    cr_assert_eq(n, 14 + 20 + 8 + 28);
    const uint8_t *ic = f + 34;
    cr_assert_eq(f[23], 1, "ICMP");
    cr_assert_eq(ic[0], 11, "time exceeded");
    cr_assert_eq(ic[1], 1, "fragment reassembly time exceeded");
    cr_assert_eq(zh_csum(ic, 36), 0);
    cr_assert_eq(ic[8 + 4], 0x51, "quotes the datagram's header");
    cr_assert_eq(ic[8 + 5], 0x51);
    cr_assert_eq(memcmp(ic + 8 + 20, x->d, 8), 0, "and its first 8 payload bytes");
    cr_assert_eq(fx_free(x), 2);
}

Test(reasm, timeout_is_configurable)
{
    zbuf_ip_config_t c;
    zbuf_ip_config_init(&c);
    c.ip_reasm_timeout_ms = 500;
    fx_t *x = fx_new(&c, 3000, 1);
    cr_assert_eq(fx_piece(x, 0, 13), 0);
    cr_assert_eq(zbuf_ip_next_deadline(x->u.s), x->u.now + 500);
    x->u.now += 500;
    zbuf_ip_poll(x->u.s);
    cr_assert_eq(x->released, 1);
    fx_free(x);
    c.ip_reasm_timeout_ms = 0;
    zbuf_ip_stack_t *s;
    cr_assert_eq(zbuf_ip_stack_create(&c, &s), -EINVAL);
    c.ip_reasm_timeout_ms = 500;
    c.ip_reasm_bytes = ZBUF_IP_REASM_BYTES + 1;
    cr_assert_eq(zbuf_ip_stack_create(&c, &s), -EINVAL, "may only lower the compiled limit");
}

/* ------------------------------------------------- teardown and switch */

Test(reasm, netif_removal_frees_held_fragments)
{
    fx_t *x = fx_new(NULL, 3000, 1);
    for (int id = 0; id < 3; id++)
        cr_assert_eq(fx_piece(x, 1, (uint16_t)id), 0);
    cr_assert_eq(x->released, 0);
    zbuf_ip_netif_remove(x->u.nif);
    cr_assert_eq(x->released, 3);
    cr_assert_eq(stats(&x->u).ip_reasm_pending, 0);
    cr_assert_eq(zbuf_ip_next_deadline(x->u.s), ZBUF_IP_NEVER);
    cr_assert_eq(fx_free(x), 3, "exactly once");
}

Test(reasm, switched_off_drops_every_fragment)
{
    zbuf_ip_config_t c;
    zbuf_ip_config_init(&c);
    c.ip_reassembly = false;
    fx_t *x = fx_new(&c, 3000, 1);
    for (int k = 0; k < 3; k++)
        cr_assert_eq(fx_piece(x, k, 1), -EMSGSIZE);
    cr_assert_eq(x->released, 3);
    zbuf_ip_stats_t st = stats(&x->u);
    cr_assert_eq(st.ip_frag_drops, 3);
    cr_assert_eq(st.ip_reassembled, 0);
    cr_assert_eq(st.ip_reasm_pending, 0);
    fx_free(x);
}

/* ----------------------------------------------------------- checksums */

Test(reasm, checksum_is_verified_over_the_reassembled_segments)
{
    fx_t *x = fx_new(NULL, 8000, 2);
    x->d[5000] ^= 0x40; /* damage one payload byte of the fourth fragment */
    for (int k = 0; k < 5; k++)
        cr_assert_eq(fx_piece(x, k, 14), 0);
    cr_assert_eq(fx_piece(x, 5, 14), -EPROTO);
    cr_assert_eq(x->r.n, 0);
    zbuf_ip_stats_t st = stats(&x->u);
    cr_assert_eq(st.ip_reassembled, 1);
    cr_assert_eq(st.bad_checksum, 1);
    cr_assert_eq(x->released, 6);
    fx_free(x);
}

/* ---------------------------------------------------- ICMP echo of 4000 */

Test(reasm, icmp_echo_of_4000_bytes_is_answered_in_fragments)
{
    static uint8_t d[4008], back[4008];
    zh_single_t u;
    zh_single_init(&u, NULL);
    zh_learn_b(&u);
    size_t len = echo_dgram(d, 4000, 9);
    int released = 0;
    zbuf_stats_t before, after;
    zbuf_stats_get(&before);
    feed_all(&u, d, len, 1480, (const int[]){2, 1, 0}, 0x4242, 1, &released);
    zbuf_stats_get(&after);
    cr_assert_eq(after.bytes_copied, before.bytes_copied, "nothing copied in or out");
    zbuf_ip_stats_t st = stats(&u);
    cr_assert_eq(st.icmp_echo_rx, 1);
    cr_assert_eq(st.icmp_echo_tx, 1);
    cr_assert_eq(st.ip_frags_tx, 3);
    cr_assert_eq(u.ntx, 3, "the reply leaves in three fragments");
    cr_assert_eq(released, 0, "the reply's fragments still reference the request's buffers");
    /* Reassemble the reply by hand and compare. */
    uint16_t id0 = 0;
    size_t total = 0;
    for (int i = 0; i < u.ntx; i++) {
        uint8_t f[1600];
        size_t n = zh_tx_bytes(&u, i, f, sizeof f);
        cr_assert_leq(n, 14 + 1500);
        const uint8_t *h = f + 14;
        cr_assert_eq(zh_csum(h, 20), 0, "header checksum of fragment %d", i);
        uint16_t id = (uint16_t)(h[4] << 8 | h[5]), fr = (uint16_t)(h[6] << 8 | h[7]);
        size_t tl = (size_t)(h[2] << 8 | h[3]), off = (size_t)(fr & 0x1fff) * 8;
        if (i == 0)
            id0 = id;
        cr_assert_eq(id, id0, "one identification for all fragments");
        cr_assert_eq((fr & 0x2000) != 0, i < 2, "MF on all but the last");
        cr_assert_eq(fr & 0x4000, 0, "no DF on fragments");
        cr_assert_eq(h[9], 1);
        cr_assert_leq(off + tl - 20, sizeof back);
        memcpy(back + off, h + 20, tl - 20);
        total += tl - 20;
    }
    cr_assert_eq(total, len);
    cr_assert_eq(back[0], 0, "echo reply");
    cr_assert_eq(zh_csum(back, len), 0, "ICMP checksum over the whole reply");
    cr_assert_eq(memcmp(back + 4, d + 4, len - 4), 0, "identifier, sequence and payload echoed");
    zh_single_clear(&u);
    cr_assert_eq(released, 3);
    zh_single_fini(&u);
}

/* --------------------------------------- output fragmentation, two stacks */

static bool got_one(void *arg)
{
    return ((rx_t *)arg)->n > 0;
}

Test(reasm, udp_above_the_mtu_is_fragmented_and_reassembled_between_stacks)
{
    zh_pair_t p;
    zh_pair_init(&p, NULL, NULL);
    zbuf_ip_udp_t *ua, *ub;
    rx_t r = {0};
    cr_assert_eq(zbuf_ip_udp_new(p.a, &ua), 0);
    cr_assert_eq(zbuf_ip_udp_new(p.b, &ub), 0);
    cr_assert_eq(zbuf_ip_udp_bind(ub, ZBUF_IP_ANY, UDP_PORT), 0);
    zbuf_ip_udp_set_recv(ub, rx_cb, &r);
    static uint8_t payload[60000];
    for (size_t i = 0; i < sizeof payload; i++)
        payload[i] = zh_pattern(i, 44);
    int released = 0;
    zbuf_stats_t before, after;
    zbuf_stats_get(&before);
    for (size_t size = 8000; size <= sizeof payload; size += 52000) {
        zbuf_t *z;
        zbuf_create(&z);
        zbuf_append_buf(z, payload, size, zt_count_release, &released);
        cr_assert_eq(zbuf_ip_udp_sendto(ua, z, ZH_B, UDP_PORT), 0);
        cr_assert(zh_pair_run(&p, got_one, &r, 1000));
        zbuf_stats_get(&after);
        cr_assert_eq(after.bytes_copied, before.bytes_copied, "no byte copied either way");
        cr_assert_eq(zbuf_length(r.last), size);
        assert_pattern(r.last, size, 44);
        zbuf_stats_get(&before); /* the check above copied */
        zbuf_delete(r.last);
        r.last = NULL;
        r.n = 0;
    }
    zbuf_ip_stats_t sa, sb;
    zbuf_ip_stats(p.a, &sa);
    zbuf_ip_stats(p.b, &sb);
    cr_assert_eq(sa.ip_frags_tx, 6 + 41);
    cr_assert_eq(sb.ip_frags_rx, 6 + 41);
    cr_assert_eq(sb.ip_reassembled, 2);
    cr_assert_eq(released, 2, "the sender's buffer released once per datagram");
    zbuf_ip_udp_delete(ua);
    zbuf_ip_udp_delete(ub);
    zh_pair_fini(&p);
}

Test(reasm, ping_above_the_mtu_between_stacks_is_answered)
{
    zh_pair_t p;
    zh_pair_init(&p, NULL, NULL);
    zbuf_ip_stats_t sa, sb;
    zbuf_t *z;
    zbuf_create(&z);
    static uint8_t payload[4000];
    int released = 0;
    zbuf_append_buf(z, payload, sizeof payload, zt_count_release, &released);
    cr_assert_eq(zbuf_ip_ping(p.a, ZH_B, 1, 1, z), 0);
    zh_pair_run(&p, NULL, NULL, 1000);
    zbuf_ip_stats(p.a, &sa);
    zbuf_ip_stats(p.b, &sb);
    cr_assert_eq(sb.icmp_echo_rx, 1);
    cr_assert_eq(sb.icmp_echo_tx, 1);
    cr_assert_eq(sa.ip_reassembled, 1, "the reply came back whole");
    cr_assert_eq(sb.ip_reassembled, 1);
    cr_assert_eq(released, 1);
    zh_pair_fini(&p);
}

static uint16_t tx_ip_id(zh_single_t *u, int i)
{
    uint8_t f[1600];
    cr_assert_geq(zh_tx_bytes(u, i, f, sizeof f), 14 + 20);
    return (uint16_t)(f[14 + 4] << 8 | f[14 + 5]);
}

Test(reasm, identification_is_zero_with_df_and_distinct_per_fragmented_datagram)
{
    zh_single_t u;
    zh_single_init(&u, NULL);
    zh_learn_b(&u);
    zbuf_ip_udp_t *pcb;
    cr_assert_eq(zbuf_ip_udp_new(u.s, &pcb), 0);
    static uint8_t small[100], big[3000];
    uint16_t ids[3];
    for (int k = 0; k < 3; k++) {
        zh_single_clear(&u);
        zbuf_t *z;
        zbuf_create(&z);
        zbuf_append_buf(z, big, sizeof big, NULL, NULL);
        cr_assert_eq(zbuf_ip_udp_sendto(pcb, z, ZH_B, 9), 0);
        cr_assert_eq(u.ntx, 3);
        ids[k] = tx_ip_id(&u, 0);
        cr_assert_eq(tx_ip_id(&u, 1), ids[k]);
        cr_assert_eq(tx_ip_id(&u, 2), ids[k]);
    }
    cr_assert(ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ids[2],
              "ids %u %u %u", ids[0], ids[1], ids[2]);
    zh_single_clear(&u);
    zbuf_t *z;
    zbuf_create(&z);
    zbuf_append_buf(z, small, sizeof small, NULL, NULL);
    cr_assert_eq(zbuf_ip_udp_sendto(pcb, z, ZH_B, 9), 0);
    cr_assert_eq(u.ntx, 1);
    cr_assert_eq(tx_ip_id(&u, 0), 0, "an atomic datagram (DF) carries id 0");
    zbuf_ip_udp_delete(pcb);
    zh_single_fini(&u);
}
