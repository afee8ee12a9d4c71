/* SPDX-License-Identifier: MIT */
/* The simulated kernel of ringsim.h. */
#define _GNU_SOURCE
#include "ringsim.h"

#include <net/ethernet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SIM_MACOFF_V2 (TPACKET_ALIGN(TPACKET2_HDRLEN + 16) - ETH_HLEN)
#define SIM_MACOFF_V3 (TPACKET_ALIGN(TPACKET3_HDRLEN + 16) - ETH_HLEN)
#define BLK_HDR TPACKET_ALIGN(sizeof(struct tpacket_block_desc))

static void sim_destroy(struct zpk_rx *rx)
{
    struct sim_rx *s = (struct sim_rx *)((char *)rx - offsetof(struct sim_rx, rx));
    s->destroyed++;
}

void sim_rx_init(struct sim_rx *s, unsigned version, uint32_t frame_size, uint32_t block_size,
                 uint32_t slots, unsigned loan_percent, zbuf_pool_t *pool, bool filter_out,
                 uint64_t seed, size_t max_frames, bool single_view)
{
    memset(s, 0, sizeof *s);
    struct zpk_geom g = {.block_size = block_size, .frame_size = frame_size};
    if (version == ZBUF_PACKET_V3) {
        g.block_nr = slots;
    } else {
        g.block_nr = slots / (block_size / frame_size);
    }
    g.frame_nr = g.block_nr * (block_size / frame_size);
    /* Two views of one shared memory, like the library's two mappings of
     * the ring: the simulated kernel and the walker's headers use one, lent
     * frames point into the other (where bouncing replaces pages). */
    s->mem_len = (size_t)block_size * g.block_nr;
    int fd = memfd_create("ringsim", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)s->mem_len) != 0)
        abort();
    s->mem = mmap(NULL, s->mem_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    s->loan = single_view ? s->mem : mmap(NULL, s->mem_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    s->fd = fd; /* for the walker's spare mappings */
    if (s->mem == MAP_FAILED || s->loan == MAP_FAILED)
        abort();
    s->rx.base = s->mem;
    s->rx.loan_base = s->loan;
    s->rx.fd = fd;
    s->rx.map_len = s->mem_len;
    s->rx.g = g;
    s->rx.version = version;
    s->rx.pool = pool;
    s->rx.filter_outgoing = filter_out;
    s->rx.st = &s->st;
    s->rx.destroy = sim_destroy;
    zpk_rx_init(&s->rx, loan_percent);
    s->rng.s = seed ? seed : 1;
    s->cap = max_frames;
    s->outgoing = calloc(max_frames / 64 + 1, sizeof(uint64_t));
    s->lens = calloc(max_frames, sizeof(uint32_t));
}

void sim_rx_free(struct sim_rx *s)
{
    zpk_rx_free_slots(&s->rx);
    close(s->fd);
    munmap(s->mem, s->mem_len);
    munmap(s->loan, s->mem_len);
    free(s->outgoing);
    free(s->lens);
}

/* Random flags the kernel may set on a frame (never USER's own bit). */
static uint32_t random_flags(struct sim_rng *r)
{
    static const uint32_t bits[] = {TP_STATUS_COPY, TP_STATUS_LOSING, TP_STATUS_CSUMNOTREADY,
                                    TP_STATUS_VLAN_VALID, TP_STATUS_CSUM_VALID,
                                    TP_STATUS_VLAN_TPID_VALID, TP_STATUS_TS_SOFTWARE,
                                    TP_STATUS_TS_RAW_HARDWARE};
    uint32_t f = 0;
    for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++)
        if (sim_below(r, 4) == 0)
            f |= bits[i];
    return f;
}

/* Pick a frame: length, truncation, direction; record the expectation. */
static void frame_pick(struct sim_rx *s, uint32_t room, uint32_t *wire, uint32_t *snap,
                       uint8_t *pkttype)
{
    uint32_t len = 14 + sim_below(&s->rng, 1500);
    if (sim_below(&s->rng, 16) == 0)
        len = room + 1 + sim_below(&s->rng, 4000); /* larger than the slot */
    *wire = len;
    *snap = len < room ? len : room;
    *pkttype = sim_below(&s->rng, 8) == 0 ? PACKET_OUTGOING : PACKET_HOST;
    if (s->kseq < s->cap) {
        s->lens[s->kseq] = *snap;
        if (*pkttype == PACKET_OUTGOING)
            s->outgoing[s->kseq / 64] |= 1ull << (s->kseq % 64);
    }
}

static void fill_data(uint8_t *d, uint32_t n, uint64_t seq)
{
    for (uint32_t i = 0; i < n; i++)
        d[i] = sim_byte(seq, i);
}

static void write_v2(struct sim_rx *s)
{
    uint8_t *f = zpk_frame(s->mem, &s->rx.g, s->khead);
    struct tpacket2_hdr *h = (struct tpacket2_hdr *)f;
    if (zpk_load_status(&h->tp_status) != TP_STATUS_KERNEL) {
        s->kdrops++; /* the ring is full or blocked at this slot */
        return;
    }
    uint32_t wire, snap;
    uint8_t pt;
    frame_pick(s, s->rx.g.frame_size - SIM_MACOFF_V2, &wire, &snap, &pt);
    h->tp_len = wire;
    h->tp_snaplen = snap;
    h->tp_mac = SIM_MACOFF_V2;
    h->tp_net = SIM_MACOFF_V2 + ETH_HLEN;
    h->tp_sec = (uint32_t)s->kseq;
    h->tp_nsec = 0;
    struct sockaddr_ll *sll = (struct sockaddr_ll *)(f + TPACKET_ALIGN(sizeof *h));
    sll->sll_pkttype = pt;
    fill_data(f + SIM_MACOFF_V2, snap, s->kseq);
    zpk_store_status(&h->tp_status, TP_STATUS_USER | random_flags(&s->rng));
    s->kseq++;
    s->khead = s->khead + 1 == s->rx.g.frame_nr ? 0 : s->khead + 1;
}

static uint8_t *block(struct sim_rx *s, uint32_t i)
{
    return s->mem + (size_t)i * s->rx.g.block_size;
}

void sim_rx_kernel_retire(struct sim_rx *s)
{
    if (s->rx.version != ZBUF_PACKET_V3 || s->kblk_pkts == 0)
        return;
    struct tpacket_block_desc *bd = (struct tpacket_block_desc *)block(s, s->khead);
    bd->hdr.bh1.num_pkts = s->kblk_pkts;
    bd->hdr.bh1.offset_to_first_pkt = BLK_HDR;
    bd->hdr.bh1.blk_len = s->kblk_used;
    if (s->kblk_last)
        ((struct tpacket3_hdr *)s->kblk_last)->tp_next_offset = 0;
    zpk_store_status(&bd->hdr.bh1.block_status,
                     TP_STATUS_USER | (sim_below(&s->rng, 2) ? TP_STATUS_BLK_TMO : 0) |
                         (random_flags(&s->rng) & ZPK_TS_MASK));
    s->khead = s->khead + 1 == s->rx.g.block_nr ? 0 : s->khead + 1;
    s->kblk_pkts = 0;
    s->kblk_used = 0;
    s->kblk_last = NULL;
}

static void write_v3(struct sim_rx *s)
{
    struct tpacket_block_desc *bd = (struct tpacket_block_desc *)block(s, s->khead);
    if (s->kblk_pkts == 0 && zpk_load_status(&bd->hdr.bh1.block_status) != TP_STATUS_KERNEL) {
        s->kdrops++; /* frozen: the next block is still the user's */
        return;
    }
    uint32_t bs = s->rx.g.block_size;
    uint32_t wire, snap;
    uint8_t pt;
    uint32_t room = bs - BLK_HDR - SIM_MACOFF_V3;
    frame_pick(s, room, &wire, &snap, &pt);
    uint32_t need = TPACKET_ALIGN(SIM_MACOFF_V3 + snap);
    if (s->kblk_pkts && s->kblk_used + need > bs) {
        sim_rx_kernel_retire(s); /* full: close it, try the next one */
        bd = (struct tpacket_block_desc *)block(s, s->khead);
        if (zpk_load_status(&bd->hdr.bh1.block_status) != TP_STATUS_KERNEL) {
            s->kdrops++;
            if (s->kseq < s->cap) { /* undo the expectation: not written */
                s->outgoing[s->kseq / 64] &= ~(1ull << (s->kseq % 64));
            }
            return;
        }
    }
    if (s->kblk_pkts == 0)
        s->kblk_used = BLK_HDR;
    uint8_t *f = block(s, s->khead) + s->kblk_used;
    struct tpacket3_hdr *h = (struct tpacket3_hdr *)f;
    memset(h, 0, sizeof *h);
    h->tp_len = wire;
    h->tp_snaplen = snap;
    h->tp_mac = SIM_MACOFF_V3;
    h->tp_net = SIM_MACOFF_V3 + ETH_HLEN;
    h->tp_sec = (uint32_t)s->kseq;
    h->tp_status = TP_STATUS_USER | random_flags(&s->rng);
    struct sockaddr_ll *sll = (struct sockaddr_ll *)(f + TPACKET_ALIGN(sizeof *h));
    sll->sll_pkttype = pt;
    fill_data(f + SIM_MACOFF_V3, snap, s->kseq);
    if (s->kblk_last)
        ((struct tpacket3_hdr *)s->kblk_last)->tp_next_offset = (uint32_t)(f - s->kblk_last);
    s->kblk_last = f;
    s->kblk_used += need;
    s->kblk_pkts++;
    s->kseq++;
}

void sim_rx_kernel_write(struct sim_rx *s)
{
    if (s->rx.version == ZBUF_PACKET_V3)
        write_v3(s);
    else
        write_v2(s);
}

bool sim_rx_all_returned(struct sim_rx *s)
{
    if (atomic_load(&s->rx.loans_out) != 0)
        return false;
    for (uint32_t i = 0; i < s->rx.nslots; i++) {
        unsigned char st = atomic_load(&s->rx.slots[i]->state);
        if (st != 0 /* SLOT_FREE */ || atomic_load(&s->rx.slots[i]->refs) != 0)
            return false;
    }
    return true;
}

/* ------------------------------------------------------------- transmit */

void sim_tx_init(struct sim_tx *s, unsigned version, uint32_t frame_size, uint32_t block_size,
                 uint32_t frames, uint64_t seed)
{
    memset(s, 0, sizeof *s);
    uint32_t fpb = block_size / frame_size;
    s->tx.g = (struct zpk_geom){.block_size = block_size, .block_nr = frames / fpb,
                                .frame_size = frame_size, .frame_nr = frames};
    s->mem_len = (size_t)block_size * s->tx.g.block_nr;
    s->mem = aligned_alloc(4096, s->mem_len);
    memset(s->mem, 0, s->mem_len);
    s->tx.base = s->mem;
    s->tx.version = version;
    s->tx.max_frame = 1514;
    s->tx.st = &s->st;
    zpk_tx_init(&s->tx);
    s->inflight = calloc(frames, sizeof(uint32_t));
    s->rng.s = seed ? seed : 1;
}

void sim_tx_free(struct sim_tx *s)
{
    free(s->mem);
    free(s->inflight);
}

static uint32_t *tx_status(struct sim_tx *s, uint8_t *f)
{
    return s->tx.version == ZBUF_PACKET_V3 ? &((struct tpacket3_hdr *)f)->tp_status
                                           : &((struct tpacket2_hdr *)f)->tp_status;
}

void sim_tx_kernel_kick(struct sim_tx *s)
{
    for (;;) {
        uint8_t *f = zpk_frame(s->mem, &s->tx.g, s->khead);
        uint32_t *sw = tx_status(s, f);
        if ((zpk_load_status(sw) & ~(uint32_t)ZPK_TS_MASK) != TP_STATUS_SEND_REQUEST)
            return; /* the kernel stops at the first slot not marked */
        uint32_t len = s->tx.version == ZBUF_PACKET_V3 ? ((struct tpacket3_hdr *)f)->tp_len
                                                       : ((struct tpacket2_hdr *)f)->tp_len;
        const uint8_t *d = f + s->tx.data_off;
        /* Frames carry their sequence number in bytes 6..13. */
        uint64_t seq;
        memcpy(&seq, d + 6, 8);
        if (seq != s->sent || len < 14)
            s->bad++;
        for (uint32_t i = 14; i < len; i++)
            if (d[i] != sim_byte(seq, i)) {
                s->bad++;
                break;
            }
        s->sent++;
        zpk_store_status(sw, TP_STATUS_SENDING);
        s->inflight[(s->flight_head + s->nflight) % s->tx.g.frame_nr] = s->khead;
        s->nflight++;
        s->khead = s->khead + 1 == s->tx.g.frame_nr ? 0 : s->khead + 1;
    }
}

void sim_tx_kernel_complete(struct sim_tx *s, uint32_t n)
{
    while (n-- && s->nflight) {
        uint32_t slot = s->inflight[s->flight_head];
        s->flight_head = (s->flight_head + 1) % s->tx.g.frame_nr;
        s->nflight--;
        uint8_t *f = zpk_frame(s->mem, &s->tx.g, slot);
        /* Some kernels OR timestamp bits into a slot they hand back. */
        uint32_t ts = sim_below(&s->rng, 2) ? TP_STATUS_TS_SOFTWARE : 0;
        if (sim_below(&s->rng, 8) == 0)
            ts |= TP_STATUS_TS_RAW_HARDWARE;
        zpk_store_status(tx_status(s, f), TP_STATUS_AVAILABLE | ts);
    }
}

static void free_seg(void *data, size_t size, void *arg)
{
    (void)size;
    free(data);
    if (arg)
        atomic_fetch_add((atomic_int *)arg, 1);
}

zbuf_t *sim_tx_frame(uint64_t seq, size_t len, unsigned nseg, atomic_int *released)
{
    uint8_t *d = malloc(len);
    for (size_t i = 0; i < len; i++)
        d[i] = sim_byte(seq, i);
    memset(d, 0xff, 6);
    memcpy(d + 6, &seq, 8);
    zbuf_t *z;
    zbuf_create(&z);
    if (nseg < 1)
        nseg = 1;
    size_t per = len / nseg, off = 0;
    for (unsigned k = 0; k < nseg; k++) {
        size_t n = k + 1 == nseg ? len - off : per;
        uint8_t *part = malloc(n ? n : 1);
        memcpy(part, d + off, n);
        if (n)
            zbuf_append_buf(z, part, n, free_seg, released);
        else
            free(part);
        off += n;
    }
    free(d);
    return z;
}
