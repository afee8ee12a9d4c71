/*
 * The receive ring walker: TPACKET_V2 frames and TPACKET_V3 blocks, lent
 * to the caller as zbufs or copied into pool buffers.  No system call here;
 * see packet_internal.h for who writes which status word when.
 *
 * Failure strategy: a frame is always settled before the walker moves on:
 * handed out (lent or copied), or dropped and counted.  Its slot goes back
 * to the kernel at once unless it was lent, so the kernel never waits on a
 * frame nobody holds.
 */
#include <errno.h>
#include <net/ethernet.h>
#include <stdlib.h>
#include <string.h>

#include "packet_internal.h"

/* Frame header fields the walker needs, whatever the version. */
struct frame_view {
    uint8_t *data;
    uint32_t snaplen, len, status, sec, nsec;
    uint16_t vlan_tci, vlan_tpid;
    uint8_t pkttype;
};

int zpk_rx_init(struct zpk_rx *rx, unsigned loan_percent)
{
    rx->nslots = rx->version == ZBUF_PACKET_V3 ? rx->g.block_nr : rx->g.frame_nr;
    rx->slots = calloc(rx->nslots, sizeof *rx->slots);
    if (rx->slots == NULL)
        return -ENOMEM;
    for (uint32_t i = 0; i < rx->nslots; i++) {
        rx->slots[i].rx = rx;
        atomic_init(&rx->slots[i].refs, 0);
        atomic_init(&rx->slots[i].held, 0);
    }
    rx->head = 0;
    rx->walking = false;
    atomic_init(&rx->loans_out, 0);
    atomic_init(&rx->life, 1);
    rx->loan_max = (uint32_t)((uint64_t)rx->nslots * (loan_percent > 100 ? 100 : loan_percent) / 100);
    return 0;
}

static void life_put(struct zpk_rx *rx)
{
    if (atomic_fetch_sub_explicit(&rx->life, 1, memory_order_acq_rel) == 1)
        rx->destroy(rx);
}

static uint8_t *slot_addr(struct zpk_rx *rx, uint32_t i)
{
    if (rx->version == ZBUF_PACKET_V3)
        return rx->base + (size_t)i * rx->g.block_size;
    return zpk_frame(rx->base, &rx->g, i);
}

static uint32_t *slot_status(struct zpk_rx *rx, uint32_t i)
{
    uint8_t *a = slot_addr(rx, i);
    if (rx->version == ZBUF_PACKET_V3)
        return &((struct tpacket_block_desc *)a)->hdr.bh1.block_status;
    return &((struct tpacket2_hdr *)a)->tp_status;
}

/* Give slot i back to the kernel.  The order is the one the reader relies
 * on: status first, then `held` (both release). */
static void slot_return(struct zpk_rx *rx, uint32_t i)
{
    struct zpk_slot *s = &rx->slots[i];
    zpk_store_status(slot_status(rx, i), TP_STATUS_KERNEL);
    if (s->lent) {
        s->lent = false;
        atomic_fetch_sub_explicit(&rx->loans_out, 1, memory_order_relaxed);
    }
    atomic_store_explicit(&s->held, 0, memory_order_release);
}

/* V3: drop one reference to block i (a loan's or the walker's). */
static void block_put(struct zpk_rx *rx, uint32_t i)
{
    if (atomic_fetch_sub_explicit(&rx->slots[i].refs, 1, memory_order_acq_rel) == 1)
        slot_return(rx, i);
}

/* Release callback of a lent frame: runs once, on whichever thread drops
 * the last reference to the frame's bytes. */
static void loan_return(void *data, size_t size, void *arg)
{
    (void)data;
    (void)size;
    struct zpk_slot *s = arg;
    struct zpk_rx *rx = s->rx;
    uint32_t i = (uint32_t)(s - rx->slots);
    if (rx->version == ZBUF_PACKET_V3)
        block_put(rx, i);
    else
        slot_return(rx, i);
    life_put(rx);
}

static void view_v2(uint8_t *f, struct frame_view *v)
{
    struct tpacket2_hdr *h = (struct tpacket2_hdr *)f;
    const struct sockaddr_ll *sll =
        (const struct sockaddr_ll *)(f + TPACKET_ALIGN(sizeof(struct tpacket2_hdr)));
    v->data = f + h->tp_mac;
    v->snaplen = h->tp_snaplen;
    v->len = h->tp_len;
    v->sec = h->tp_sec;
    v->nsec = h->tp_nsec;
    v->vlan_tci = h->tp_vlan_tci;
    v->vlan_tpid = h->tp_vlan_tpid;
    v->pkttype = sll->sll_pkttype;
}

static void view_v3(uint8_t *f, struct frame_view *v)
{
    struct tpacket3_hdr *h = (struct tpacket3_hdr *)f;
    const struct sockaddr_ll *sll =
        (const struct sockaddr_ll *)(f + TPACKET_ALIGN(sizeof(struct tpacket3_hdr)));
    v->data = f + h->tp_mac;
    v->snaplen = h->tp_snaplen;
    v->len = h->tp_len;
    v->status = h->tp_status;
    v->sec = h->tp_sec;
    v->nsec = h->tp_nsec;
    v->vlan_tci = h->hv1.tp_vlan_tci;
    v->vlan_tpid = h->hv1.tp_vlan_tpid;
    v->pkttype = sll->sll_pkttype;
}

/* A frame header the kernel wrote, checked against the slot it sits in, so
 * that a corrupt or hostile header can never make us read outside the ring. */
static bool view_sane(const struct frame_view *v, const uint8_t *lo, const uint8_t *hi)
{
    return v->data >= lo && v->data <= hi && v->snaplen <= (size_t)(hi - v->data);
}

/* Copy a frame into as many pool buffers as it takes.  NULL when the pool
 * cannot hold it (nothing is kept then). */
static zbuf_t *copy_to_pool(struct zpk_rx *rx, const uint8_t *data, size_t len)
{
    zbuf_t *z;
    if (rx->pool == NULL || zbuf_create(&z) != 0)
        return NULL;
    size_t done = 0;
    while (done < len) {
        zbuf_buf_t *b;
        if (zbuf_pool_get(rx->pool, &b) != 0) {
            zbuf_delete(z);
            return NULL;
        }
        size_t n = zbuf_buf_size(b);
        if (n > len - done)
            n = len - done;
        memcpy(zbuf_buf_data(b), data + done, n);
        int rc = zbuf_append_ref(z, b, 0, n);
        zbuf_buf_unref(b);
        if (rc != 0) {
            zbuf_delete(z);
            return NULL;
        }
        done += n;
    }
    zbuf_stats_count_copy(len);
    return z;
}

/* Lend a frame of slot i: a zbuf of one enrolled segment whose release
 * callback returns the slot (V2) or a block reference (V3). */
static zbuf_t *lend(struct zpk_rx *rx, uint32_t i, uint8_t *data, size_t len)
{
    zbuf_t *z;
    struct zpk_slot *s = &rx->slots[i];
    if (zbuf_create(&z) != 0)
        return NULL;
    if (rx->version == ZBUF_PACKET_V3)
        atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&rx->life, 1, memory_order_relaxed);
    if (zbuf_append_buf(z, data, len, loan_return, s) != 0) {
        zbuf_delete(z);
        atomic_fetch_sub_explicit(&rx->life, 1, memory_order_relaxed);
        if (rx->version == ZBUF_PACKET_V3)
            atomic_fetch_sub_explicit(&s->refs, 1, memory_order_relaxed);
        return NULL;
    }
    if (!s->lent) {
        s->lent = true;
        atomic_fetch_add_explicit(&rx->loans_out, 1, memory_order_relaxed);
    }
    return z;
}

/* Hand one frame out, or drop it.  Returns true when *out was filled; for
 * V2 the slot is settled (returned or lent) either way. */
static bool deliver(struct zpk_rx *rx, uint32_t i, const struct frame_view *v, uint32_t status,
                    zbuf_t **out, zbuf_packet_rxinfo_t *info)
{
    zbuf_packet_stats_t *st = rx->st;
    if (rx->filter_outgoing && v->pkttype == PACKET_OUTGOING) {
        st->rx_outgoing_filtered++;
        return false;
    }
    zbuf_t *z = NULL;
    bool lent = false;
    if (v->snaplen > 0) {
        struct zpk_slot *s = &rx->slots[i];
        if (s->lent || atomic_load_explicit(&rx->loans_out, memory_order_relaxed) < rx->loan_max) {
            z = lend(rx, i, v->data, v->snaplen);
            lent = z != NULL;
        }
        if (z == NULL)
            z = copy_to_pool(rx, v->data, v->snaplen);
    }
    if (z == NULL) {
        st->rx_no_buffer++;
        return false;
    }
    if (lent)
        st->rx_loaned++;
    else
        st->rx_copied++;
    st->rx_frames++;
    st->rx_bytes += v->snaplen;
    unsigned flags = lent ? ZBUF_PACKET_RX_LOANED : 0;
    if (v->snaplen < v->len) {
        flags |= ZBUF_PACKET_RX_TRUNCATED;
        st->rx_truncated++;
    }
    if (status & TP_STATUS_VLAN_VALID)
        flags |= ZBUF_PACKET_RX_VLAN;
    if (status & TP_STATUS_CSUMNOTREADY)
        flags |= ZBUF_PACKET_RX_CSUM_PARTIAL;
    if (status & TP_STATUS_CSUM_VALID)
        flags |= ZBUF_PACKET_RX_CSUM_VALID;
    if (status & TP_STATUS_TS_RAW_HARDWARE)
        flags |= ZBUF_PACKET_RX_TS_HARDWARE;
    *out = z;
    if (info) {
        info->wire_len = v->len;
        info->ts_sec = v->sec;
        info->ts_nsec = v->nsec;
        info->vlan_tci = (status & TP_STATUS_VLAN_VALID) ? v->vlan_tci : 0;
        info->vlan_tpid = (status & TP_STATUS_VLAN_TPID_VALID) ? v->vlan_tpid : 0;
        info->pkttype = v->pkttype;
        info->flags = flags;
    }
    return true;
}

/* Is slot `head` ours to read now?  Sets rx->stalled when it is still lent
 * from the previous lap. */
static bool head_ready(struct zpk_rx *rx, uint32_t *status)
{
    struct zpk_slot *s = &rx->slots[rx->head];
    if (atomic_load_explicit(&s->held, memory_order_acquire)) {
        if (!rx->stalled)
            rx->st->rx_stalls++;
        rx->stalled = true;
        return false;
    }
    rx->stalled = false;
    *status = zpk_load_status(slot_status(rx, rx->head));
    return (*status & TP_STATUS_USER) != 0;
}

static int take_v2(struct zpk_rx *rx, zbuf_t **frames, zbuf_packet_rxinfo_t *info, unsigned max)
{
    unsigned n = 0;
    uint32_t status;
    while (n < max && head_ready(rx, &status)) {
        uint32_t i = rx->head;
        uint8_t *f = slot_addr(rx, i);
        struct frame_view v;
        view_v2(f, &v);
        struct zpk_slot *s = &rx->slots[i];
        atomic_store_explicit(&s->held, 1, memory_order_relaxed);
        bool ok = view_sane(&v, f + TPACKET2_HDRLEN, f + rx->g.frame_size) &&
                  deliver(rx, i, &v, status, &frames[n], info ? &info[n] : NULL);
        if (!(ok && s->lent))
            slot_return(rx, i); /* copied or dropped: back at once */
        if (ok)
            n++;
        rx->head = rx->head + 1 == rx->nslots ? 0 : rx->head + 1;
    }
    return (int)n;
}

/* V3: finish the block being walked (the walker's reference goes; the
 * block returns now or with its last loan). */
static void v3_block_done(struct zpk_rx *rx)
{
    rx->walking = false;
    uint32_t i = rx->head;
    rx->head = rx->head + 1 == rx->nslots ? 0 : rx->head + 1;
    block_put(rx, i);
}

static int take_v3(struct zpk_rx *rx, zbuf_t **frames, zbuf_packet_rxinfo_t *info, unsigned max)
{
    unsigned n = 0;
    while (n < max) {
        if (!rx->walking) {
            uint32_t status;
            if (!head_ready(rx, &status))
                break;
            struct tpacket_block_desc *bd = (struct tpacket_block_desc *)slot_addr(rx, rx->head);
            struct zpk_slot *s = &rx->slots[rx->head];
            atomic_store_explicit(&s->held, 1, memory_order_relaxed);
            atomic_store_explicit(&s->refs, 1, memory_order_relaxed);
            rx->walking = true;
            rx->left = bd->hdr.bh1.num_pkts;
            uint32_t first = bd->hdr.bh1.offset_to_first_pkt;
            rx->next = first < rx->g.block_size ? (uint8_t *)bd + first : NULL;
        }
        uint8_t *blk = slot_addr(rx, rx->head), *end = blk + rx->g.block_size;
        if (rx->left == 0 || rx->next == NULL || rx->next + TPACKET3_HDRLEN > end) {
            v3_block_done(rx);
            continue;
        }
        uint8_t *f = rx->next;
        struct frame_view v;
        view_v3(f, &v);
        uint32_t step = ((struct tpacket3_hdr *)f)->tp_next_offset;
        rx->left--;
        rx->next = step && step <= (size_t)(end - f) ? f + step : NULL;
        if (view_sane(&v, f + TPACKET3_HDRLEN, end) &&
            deliver(rx, rx->head, &v, v.status, &frames[n], info ? &info[n] : NULL))
            n++;
    }
    /* Nothing more in a block walked to its end: let it go now rather than
     * at the next call. */
    if (rx->walking && rx->left == 0)
        v3_block_done(rx);
    return (int)n;
}

int zpk_rx_take(struct zpk_rx *rx, zbuf_t **frames, zbuf_packet_rxinfo_t *info, unsigned max)
{
    return rx->version == ZBUF_PACKET_V3 ? take_v3(rx, frames, info, max)
                                         : take_v2(rx, frames, info, max);
}

bool zpk_rx_ready(struct zpk_rx *rx)
{
    if (rx->walking)
        return true;
    struct zpk_slot *s = &rx->slots[rx->head];
    if (atomic_load_explicit(&s->held, memory_order_acquire))
        return false;
    return (zpk_load_status(slot_status(rx, rx->head)) & TP_STATUS_USER) != 0;
}

void zpk_rx_release_owner(struct zpk_rx *rx)
{
    if (rx->walking) {
        rx->walking = false;
        block_put(rx, rx->head);
    }
    life_put(rx);
}
