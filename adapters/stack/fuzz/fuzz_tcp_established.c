/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer: one TCP connection past its handshake, driven by a program of
 * steps relative to the live state, so that the established-state code
 * (out-of-order queue, SACK and D-SACK, timestamps and PAWS, RACK-TLP,
 * window updates, zero window, FIN, retransmission) gets the fuzzer's
 * attention instead of the handshake.
 *
 * The harness plays the peer (192.0.2.2) as a black box: it reads the
 * stack's sequence numbers, acknowledgments and timestamps from the frames
 * the stack sends (fz_tx_hook) and builds every segment from them.
 *
 * Input: three set-up bytes, then steps.
 *   byte 0: bit 0 active open (else the peer connects to a listener),
 *           bits 1..4 the peer offers MSS, window scale, SACK-permitted,
 *           timestamps; bit 5 the stack turns timestamps off; bits 6..7 the
 *           stack's buffer sizes
 *   byte 1: low nibble the peer's MSS, high nibble its window scale
 *   byte 2: the peer's window in its SYN
 * Step: op byte, kind = op & 7, arg = op >> 3 (0..31).
 *   0..2  peer segment: payload length plen_tab[arg], then bytes
 *         A flags: A & 3: 0 none, 1 FIN, 2 PSH, 3 RST (A & 4 clear) or SYN;
 *           8 no ACK, 16 URG, 32 no timestamp, 64 old TSval (PAWS),
 *           128 echo an old TSval of the stack (spurious-timeout checks)
 *         B seq = next peer byte + B as int8 (beyond +-8 in units of the
 *           payload length)
 *         C ack, by C >> 6: 0 everything sent, 1 last ack again (duplicate),
 *           2 last ack + (C & 63)/63 of what is outstanding, 3 last ack +
 *           (C & 63) - 32
 *         D window wnd_tab[D & 15]; (D >> 4) & 3 SACK blocks, one byte each
 *           (start and length in units of the stack's segment size above
 *           the last ack); D & 64: the first block is a D-SACK below it;
 *           D & 128: the frame arrives twice
 *   3     advance the clock by ms_tab[arg] (30: to the next deadline minus
 *         one, 31: to the next deadline) and poll
 *   4     the application writes len_tab[arg & 15] bytes by reference (in
 *         three buffers when arg & 16)
 *   5     the application calls recved for len_tab[arg & 15] bytes (all it
 *         holds when arg & 16)
 *   6     application control by arg & 7: shutdown, close, abort, nodelay
 *         toggle, keepalive on, output, poll, poll
 *   7     a pure ACK: last ack + arg units (31: everything), last window
 * After the steps every timer runs out and the stack is deleted: every
 * release callback must have run exactly once and the core's live counters
 * must be back where they were.
 */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PEER_ADDR ZBUF_IP_ADDR(192, 0, 2, 2)
#define PEER_ISS 0xfffff000u /* wraps soon: sequence arithmetic near 2^32 */
#define LISTEN_PORT 7
#define PEER_PORT 80
#define PEER_CPORT 4000
#define FRAME_MAX 4200

static const uint8_t peer_mac[6] = {0x02, 0, 0, 0, 0, 0x0b};

static const uint16_t plen_tab[32] = {0,    0,    0,    0,    1,    1,    2,    3,
                                      7,    8,    16,   50,   64,   100,  200,  300,
                                      500,  535,  536,  537,  1000, 1199, 1200, 1400,
                                      1447, 1448, 1459, 1460, 1461, 2000, 2920, 4000};
static const uint32_t wnd_tab[16] = {0,     1,     64,    536,    1000,    1460,
                                     2920,  4096,  8192,  16384,  32768,   65535,
                                     131072, 1u << 20, 1u << 24, 0xffffffffu};
static const uint32_t ms_tab[32] = {0,    1,    2,    5,    10,    20,    30,    40,
                                    50,   100,  150,  199,  200,   201,   250,   300,
                                    400,  500,  700,  1000, 1500,  2000,  3000,  5000,
                                    10000, 20000, 30000, 60000, 120000, 240000, 0, 0};
static const uint32_t len_tab[16] = {1,    10,   100,  535,  536,  1000, 1448,  1460,
                                     2000, 2920, 4000, 5000, 8000, 8192, 12000, 65536};
static const uint16_t mss_tab[16] = {536, 1460, 1448, 100, 64, 1, 0, 1000,
                                     1200, 8960, 65535, 536, 1460, 1460, 600, 2000};

/* The peer's view of the connection, kept from what the stack sends. */
typedef struct peer {
    zbuf_ip_stack_t *s;
    zbuf_ip_netif_t *nif;
    zbuf_ip_tcp_t *pcb;   /* the application's connection; NULL once gone */
    uint16_t lport;       /* the stack's port */
    uint16_t rport;       /* the peer's port */
    bool ts;              /* the peer offered timestamps */
    uint8_t ws;           /* the peer's window scale (0 without the option) */
    uint32_t snd_max;     /* highest sequence end the stack sent */
    uint32_t una;         /* the peer's latest cumulative ACK */
    uint32_t nxt;         /* the peer's next new byte: the stack's latest ACK, or
                             beyond it when the peer sent in order since */
    uint16_t wnd;         /* the window field the peer sent last */
    uint32_t unit;        /* largest payload the stack sent in one segment */
    uint32_t stk_ts[4];   /* the stack's latest TSvals, newest first */
    uint32_t ts_base;     /* the peer's TSval = ts_base + clock */
    size_t held;          /* delivered to the application, not yet recved */
    unsigned enrolled, released; /* application buffers */
} peer_t;

static peer_t fz_peer;
static uint8_t app_bytes[65536]; /* the application's data, never written */
static uint8_t frame[FRAME_MAX];

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put16(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
    put16(p, v >> 16);
    put16(p + 2, v);
}

static bool seq_gt(uint32_t a, uint32_t b)
{
    return (int32_t)(a - b) > 0;
}

/* Learn the stack's sequence numbers from a TCP segment it sent us. */
static void peer_watch(const zbuf_t *z)
{
    peer_t *p = &fz_peer;
    uint8_t h[14 + 60 + 60];
    size_t len = zbuf_length(z);
    ssize_t n = zbuf_copyout(z, 0, h, len < sizeof h ? len : sizeof h);
    if (n < 54 || get16(h + 12) != 0x0800 || h[23] != 6)
        return;
    size_t ihl = (size_t)(h[14] & 15) * 4;
    const uint8_t *t = h + 14 + ihl;
    size_t doff = (size_t)(t[12] >> 4) * 4;
    if (ihl < 20 || doff < 20 || 14 + ihl + doff > (size_t)n || get16(t + 2) != p->rport)
        return;
    size_t dlen = get16(h + 16) - ihl - doff;
    uint8_t flags = t[13];
    uint32_t seq = get32(t + 4);
    if (flags & 0x04)
        return; /* a RST: no state to learn */
    if (flags & 0x02) {
        p->lport = get16(t);
        p->una = seq;
        p->snd_max = seq;
    }
    uint32_t end = seq + (uint32_t)dlen + !!(flags & 0x02) + !!(flags & 0x01);
    if (seq_gt(end, p->snd_max))
        p->snd_max = end;
    if (dlen > p->unit)
        p->unit = (uint32_t)dlen;
    if (flags & 0x10)
        p->nxt = get32(t + 8);
    for (size_t i = 20; i + 10 <= doff;) {
        uint8_t kind = t[i];
        if (kind == 0)
            break;
        if (kind == 1) {
            i++;
            continue;
        }
        if (kind == 8 && t[i + 1] == 10 && get32(t + i + 2) != p->stk_ts[0]) {
            memmove(p->stk_ts + 1, p->stk_ts, 3 * sizeof p->stk_ts[0]);
            p->stk_ts[0] = get32(t + i + 2);
        }
        if (t[i + 1] < 2)
            break;
        i += t[i + 1];
    }
}

/* An ARP request from the peer, so that the stack knows its MAC. */
static void peer_arp(void)
{
    uint8_t f[42] = {0};
    memset(f, 0xff, 6);
    memcpy(f + 6, peer_mac, 6);
    put16(f + 12, 0x0806);
    put16(f + 14, 1);
    put16(f + 16, 0x0800);
    f[18] = 6;
    f[19] = 4;
    put16(f + 20, 1);
    memcpy(f + 22, peer_mac, 6);
    put32(f + 28, PEER_ADDR);
    put32(f + 38, FZ_ADDR);
    fz_feed(fz_peer.nif, f, sizeof f, 0);
}

/* Send one segment from the peer: `opt` (olen bytes, a multiple of 4) and
 * dlen bytes of payload; twice when `dup`. */
static void peer_send(uint32_t seq, uint32_t ack, uint8_t flags, uint16_t wnd, const uint8_t *opt,
                      size_t olen, size_t dlen, bool dup)
{
    peer_t *p = &fz_peer;
    size_t len = 14 + 20 + 20 + olen + dlen;
    memcpy(frame, fz_mac, 6);
    memcpy(frame + 6, peer_mac, 6);
    put16(frame + 12, 0x0800);
    uint8_t *ip = frame + 14;
    memset(ip, 0, 20);
    ip[0] = 0x45;
    put16(ip + 2, (uint32_t)(len - 14));
    put16(ip + 6, 0x4000);
    ip[8] = 64;
    ip[9] = 6;
    put32(ip + 12, PEER_ADDR);
    put32(ip + 16, FZ_ADDR); /* the checksums are not verified */
    uint8_t *t = ip + 20;
    memset(t, 0, 20);
    put16(t, p->rport);
    put16(t + 2, p->lport);
    put32(t + 4, seq);
    put32(t + 8, ack);
    t[12] = (uint8_t)((20 + olen) / 4 << 4);
    t[13] = flags;
    put16(t + 14, wnd);
    memcpy(t + 20, opt, olen);
    memset(t + 20 + olen, 'p', dlen);
    /* The peer's next byte moves on when this one is in order; the stack's
     * ACK, if it sends one now, overrides the guess. */
    uint32_t end = seq + (uint32_t)dlen + !!(flags & 0x01);
    if (!seq_gt(seq, p->nxt) && seq_gt(end, p->nxt) && !(flags & 0x06))
        p->nxt = end;
    for (int i = 0; i < 1 + dup; i++)
        fz_feed(p->nif, frame, len, 0);
}

/* The timestamp option (NOP, NOP, TS) into o; returns its length. */
static size_t opt_ts(uint8_t *o, uint32_t tsval, uint32_t tsecr)
{
    o[0] = 1;
    o[1] = 1;
    o[2] = 8;
    o[3] = 10;
    put32(o + 4, tsval);
    put32(o + 8, tsecr);
    return 12;
}

static uint32_t peer_tsval(void)
{
    return fz_peer.ts_base + (uint32_t)fz_now;
}

static void app_release(void *d, size_t n, void *arg)
{
    (void)d;
    (void)n;
    (void)arg;
    fz_peer.released++;
}

static void app_recv(void *arg, zbuf_ip_tcp_t *pcb, zbuf_t *d)
{
    (void)arg;
    (void)pcb;
    if (d) {
        fz_peer.held += zbuf_length(d);
        zbuf_delete(d);
    }
}

static void app_error(void *arg, int err)
{
    (void)arg;
    (void)err;
    fz_peer.pcb = NULL;
}

static const zbuf_ip_tcp_callbacks_t app_cb = {.recv = app_recv, .error = app_error};

static int app_accept(void *arg, zbuf_ip_tcp_t *l, zbuf_ip_tcp_t *c)
{
    (void)arg;
    (void)l;
    zbuf_ip_tcp_set_callbacks(c, &app_cb, NULL);
    fz_peer.pcb = c;
    return 0;
}

/* The peer's SYN or SYN-ACK options from set-up bytes b0, b1. */
static size_t syn_options(uint8_t *o, uint8_t b0, uint8_t b1)
{
    size_t n = 0;
    if (b0 & 2) {
        o[n++] = 2;
        o[n++] = 4;
        put16(o + n, mss_tab[b1 & 15]);
        n += 2;
    }
    if (b0 & 4) {
        uint8_t ws = (uint8_t)(b1 >> 4);
        fz_peer.ws = ws > 14 ? 14 : ws; /* the stack clamps it too */
        o[n++] = 1;
        o[n++] = 3;
        o[n++] = 3;
        o[n++] = ws;
    }
    if (b0 & 8) {
        o[n++] = 1;
        o[n++] = 1;
        o[n++] = 4;
        o[n++] = 2;
    }
    if (b0 & 16) {
        fz_peer.ts = true;
        n += opt_ts(o + n, peer_tsval(), fz_peer.stk_ts[0]);
    }
    return n;
}

/* Open the connection: the peer's SYN to the listener and its ACK, or the
 * application's connect and the peer's SYN-ACK. */
static void handshake(const uint8_t *in)
{
    peer_t *p = &fz_peer;
    uint8_t o[40];
    uint16_t wnd = in[2] ? (uint16_t)(in[2] << 8 | 0xff) : 0;
    peer_arp();
    if (in[0] & 1) {
        zbuf_ip_tcp_new(p->s, &p->pcb);
        zbuf_ip_tcp_set_callbacks(p->pcb, &app_cb, NULL);
        p->rport = PEER_PORT;
        if (zbuf_ip_tcp_connect(p->pcb, PEER_ADDR, PEER_PORT) != 0)
            abort();
        size_t n = syn_options(o, in[0], in[1]);
        peer_send(PEER_ISS, p->snd_max, 0x12, wnd, o, n, 0, false);
    } else {
        zbuf_ip_tcp_t *l;
        zbuf_ip_tcp_callbacks_t lcb = {.accept = app_accept};
        zbuf_ip_tcp_new(p->s, &l);
        zbuf_ip_tcp_bind(l, ZBUF_IP_ANY, LISTEN_PORT);
        zbuf_ip_tcp_listen(l, 1);
        zbuf_ip_tcp_set_callbacks(l, &lcb, NULL);
        p->rport = PEER_CPORT;
        p->lport = LISTEN_PORT;
        size_t n = syn_options(o, in[0], in[1]);
        peer_send(PEER_ISS, 0, 0x02, wnd, o, n, 0, false);
        fz_now += 1;
        n = p->ts ? opt_ts(o, peer_tsval(), p->stk_ts[0]) : 0;
        peer_send(PEER_ISS + 1, p->snd_max, 0x10, wnd, o, n, 0, false);
    }
    p->una = p->snd_max;
    p->wnd = wnd;
}

/* A peer segment step at `in` (arg: the op's high bits); returns the bytes
 * it used, 0 if the input ends first. */
static size_t step_segment(const uint8_t *in, size_t avail, unsigned arg)
{
    peer_t *p = &fz_peer;
    if (avail < 4)
        return 0;
    uint8_t a = in[0], b = in[1], c = in[2], d = in[3];
    unsigned nsack = (d >> 4) & 3;
    if (avail < 4 + nsack)
        return 0;
    size_t dlen = plen_tab[arg];
    int8_t k = (int8_t)b;
    int32_t delta = k;
    if (k > 8 || k < -8)
        delta = (k > 0 ? k - 8 : k + 8) * (int32_t)(dlen ? dlen : 512);
    uint32_t seq = p->nxt + (uint32_t)delta;

    uint32_t ack;
    uint32_t out = p->snd_max - p->una;
    switch (c >> 6) {
    case 0:
        ack = p->snd_max;
        break;
    case 1:
        ack = p->una;
        break;
    case 2:
        ack = p->una + (uint32_t)((uint64_t)out * (c & 63) / 63);
        break;
    default:
        ack = p->una + (uint32_t)((int)(c & 63) - 32);
        break;
    }
    if (seq_gt(ack, p->una) && !seq_gt(ack, p->snd_max))
        p->una = ack;

    static const uint8_t low_flags[4] = {0, 0x01, 0x08, 0x04};
    uint8_t flags = low_flags[a & 3];
    if ((a & 3) == 3 && (a & 4))
        flags = 0x02;
    if (!(a & 8))
        flags |= 0x10;
    if (a & 16)
        flags |= 0x20;
    uint32_t w = wnd_tab[d & 15] >> p->ws;
    p->wnd = (uint16_t)(w > 0xffff ? 0xffff : w);

    uint8_t o[40];
    size_t n = 0;
    if (p->ts && !(a & 32))
        n = opt_ts(o, peer_tsval() - ((a & 64) ? 1000u : 0u), p->stk_ts[(a & 128) ? 3 : 0]);
    if (nsack) {
        uint32_t u = p->unit ? p->unit : 536;
        o[n++] = 1;
        o[n++] = 1;
        o[n++] = 5;
        o[n++] = (uint8_t)(2 + 8 * nsack);
        for (unsigned i = 0; i < nsack; i++) {
            uint8_t s = in[4 + i];
            uint32_t lo = p->una + (s & 15) * u;
            if (i == 0 && (d & 64))
                lo = p->una - ((s & 15) + 1) * u;
            put32(o + n, lo);
            put32(o + n + 4, lo + ((s >> 4) + 1) * u / 2);
            n += 8;
        }
    }
    peer_send(seq, ack, flags, p->wnd, o, n, dlen, (d & 128) != 0);
    return 4 + nsack;
}

static void step_write(unsigned arg)
{
    peer_t *p = &fz_peer;
    if (p->pcb == NULL)
        return;
    size_t len = len_tab[arg & 15];
    size_t parts = (arg & 16) && len >= 3 ? 3 : 1;
    zbuf_t *z;
    if (zbuf_create(&z) != 0)
        abort();
    for (size_t i = 0, off = 0; i < parts; i++) {
        size_t n = i + 1 < parts ? len / parts : len - off;
        if (zbuf_append_buf(z, app_bytes + off, n, app_release, NULL) == 0)
            p->enrolled++;
        off += n;
    }
    if (zbuf_ip_tcp_write(p->pcb, z) != 0)
        zbuf_delete(z);
}

static void step_control(unsigned arg)
{
    peer_t *p = &fz_peer;
    if (p->pcb == NULL) {
        zbuf_ip_poll(p->s);
        return;
    }
    switch (arg & 7) {
    case 0:
        zbuf_ip_tcp_shutdown(p->pcb);
        break;
    case 1:
        zbuf_ip_tcp_close(p->pcb);
        p->pcb = NULL;
        break;
    case 2:
        zbuf_ip_tcp_abort(p->pcb);
        p->pcb = NULL;
        break;
    case 3:
        zbuf_ip_tcp_set_nodelay(p->pcb, arg & 8);
        break;
    case 4:
        zbuf_ip_tcp_set_keepalive(p->pcb, 1000, 300, 2);
        break;
    case 5:
        zbuf_ip_tcp_output(p->pcb);
        break;
    default:
        zbuf_ip_poll(p->s);
        break;
    }
}

static void step_clock(unsigned arg)
{
    uint64_t next = zbuf_ip_next_deadline(fz_peer.s);
    if (arg >= 30) {
        if (next != ZBUF_IP_NEVER && next > fz_now)
            fz_now = next - (arg == 30);
    } else {
        fz_now += ms_tab[arg];
    }
    zbuf_ip_poll(fz_peer.s);
}

/* What the stack reports must hang together. */
static void check_info(void)
{
    zbuf_ip_tcp_info_t ti;
    if (fz_peer.pcb == NULL || zbuf_ip_tcp_info(fz_peer.pcb, &ti) != 0)
        return;
    if (ti.sacked_bytes > ti.unacked + 1 || ti.lost_bytes > ti.unacked + 1 || ti.mss == 0)
        abort();
}

/* One step at in[0]; returns the bytes it used, 0 at the end. */
static size_t step(const uint8_t *in, size_t avail)
{
    peer_t *p = &fz_peer;
    unsigned kind = in[0] & 7, arg = in[0] >> 3;
    size_t used = 1;
    switch (kind) {
    case 0:
    case 1:
    case 2: {
        size_t n = step_segment(in + 1, avail - 1, arg);
        if (n == 0)
            return 0;
        used += n;
        break;
    }
    case 3:
        step_clock(arg);
        break;
    case 4:
        step_write(arg);
        break;
    case 5: {
        size_t n = (arg & 16) ? p->held : len_tab[arg & 15];
        n = n < p->held ? n : p->held;
        if (p->pcb && n) {
            p->held -= n;
            zbuf_ip_tcp_recved(p->pcb, n);
        }
        break;
    }
    case 6:
        step_control(arg);
        break;
    default: {
        uint32_t u = p->unit ? p->unit : 536;
        uint32_t ack = p->una + arg * u;
        if (arg == 31 || seq_gt(ack, p->snd_max))
            ack = p->snd_max;
        p->una = ack;
        uint8_t o[12];
        size_t n = p->ts ? opt_ts(o, peer_tsval(), p->stk_ts[0]) : 0;
        peer_send(p->nxt, ack, 0x10, p->wnd, o, n, 0, false);
        break;
    }
    }
    check_info();
    return used;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    zbuf_stats_t before, after;
    zbuf_stats_get(&before);
    memset(&fz_peer, 0, sizeof fz_peer);
    peer_t *p = &fz_peer;
    p->ts_base = 0x7ffff000u;
    static const uint32_t bufs[4] = {8192, 2048, 65536, 262144};
    zbuf_ip_config_t c;
    fz_config(&c);
    c.tcp_no_timestamps = (data[0] & 32) != 0;
    c.tcp_rcv_buf = c.tcp_snd_buf = bufs[data[0] >> 6];
    fz_tx_hook = peer_watch;
    p->s = fz_stack_with(&c, &p->nif);
    handshake(data);
    size_t i = 3;
    for (int steps = 0; i < size && steps < 512; steps++) {
        size_t n = step(data + i, size - i);
        if (n == 0)
            break;
        i += n;
    }
    fz_now += 400000; /* let every timer run out */
    zbuf_ip_poll(p->s);
    fz_stack_delete(p->s);
    fz_tx_hook = NULL;
    zbuf_stats_get(&after);
    if (p->released != p->enrolled || after.live_zbufs != before.live_zbufs ||
        after.live_segs != before.live_segs || after.live_bufs != before.live_bufs)
        abort();
    return 0;
}
