/* SPDX-License-Identifier: MIT */
/*
 * The receive ring walker: TPACKET_V2 frames and TPACKET_V3 blocks, lent
 * to the caller as zbufs or copied into pool buffers.  No system call here;
 * see packet_internal.h for who writes which status word when.
 *
 * Failure strategy: a frame is always settled before the walker moves on:
 * handed out (lent or copied), or dropped and counted.  Its slot goes back
 * to the kernel at once unless it was lent, so the kernel never waits on a
 * frame nobody holds.
 *
 * A lent frame held across a whole lap blocks the kernel at its slot (it
 * fills strictly in order and drops what it cannot place).  When the walker
 * meets such a slot it *bounces* it: the pages of the slot in the loan view
 * are replaced, in one mremap(), by a private copy of themselves, so the
 * holders keep reading the same bytes at the same addresses, and the slot
 * goes back to the kernel at once.  The copy is counted; the slot's pages
 * stay private, so frames later written there are copied to the pool
 * instead of lent.  The ring never stays blocked by a holder, which is what
 * keeps a stack on it from going deaf (its out-of-order queue may wait for a
 * retransmission that could only arrive through the blocked slot).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>
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

static struct zpk_slot *slot_new(struct zpk_rx *rx, uint32_t i)
{
    struct zpk_slot *s = calloc(1, sizeof *s);
    if (s) {
        s->rx = rx;
        s->idx = i;
        atomic_init(&s->refs, 0);
        atomic_init(&s->state, SLOT_FREE);
    }
    return s;
}

int zpk_rx_init(struct zpk_rx *rx, unsigned loan_percent)
{
    rx->nslots = rx->version == ZBUF_PACKET_V3 ? rx->g.block_nr : rx->g.frame_nr;
    rx->slots = calloc(rx->nslots, sizeof *rx->slots);
    rx->page = (size_t)sysconf(_SC_PAGESIZE);
    size_t pages = (size_t)rx->g.block_size * rx->g.block_nr / rx->page;
    rx->page_private = calloc(pages ? pages : 1, sizeof(bool));
    bool ok = rx->slots && rx->page_private;
    for (uint32_t i = 0; ok && i < rx->nslots; i++)
        ok = (rx->slots[i] = slot_new(rx, i)) != NULL;
    if (!ok) {
        zpk_rx_free_slots(rx);
        return -ENOMEM;
    }
    if (rx->loan_base == NULL)
        rx->loan_base = rx->base;
    if (rx->loan_base == rx->base)
        rx->fd = -1;
    rx->head = 0;
    rx->walking = false;
    atomic_init(&rx->loans_out, 0);
    atomic_init(&rx->life, 1);
    rx->loan_max = (uint32_t)((uint64_t)rx->nslots * (loan_percent > 100 ? 100 : loan_percent) / 100);
    return 0;
}

void zpk_rx_free_slots(struct zpk_rx *rx)
{
    while (rx->bounced) {
        struct zpk_slot *s = rx->bounced;
        rx->bounced = s->next_bounced;
        free(s);
    }
    for (int k = 0; k < ZPK_SPARES; k++) {
        if (rx->spare[k])
            munmap(rx->spare[k], rx->map_len);
        free(rx->spare_used[k]);
        rx->spare[k] = NULL;
        rx->spare_used[k] = NULL;
    }
    for (uint32_t i = 0; rx->slots && i < rx->nslots; i++)
        free(rx->slots[i]);
    free(rx->slots);
    free(rx->page_private);
    rx->slots = NULL;
    rx->page_private = NULL;
}

static void loan_return(void *data, size_t size, void *arg);

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

/* Drop the slot's place in the loan share (by the winner of a CAS out of
 * SLOT_HELD only). */
static void unlend(struct zpk_rx *rx, struct zpk_slot *s)
{
    if (s->lent) {
        s->lent = false;
        atomic_fetch_sub_explicit(&rx->loans_out, 1, memory_order_relaxed);
    }
}

/* The last reference to a slot record is gone: give the slot back to the
 * kernel, or free the record of a bounced slot (given back already).
 * Status first, then the state (both release): a walker that sees
 * SLOT_FREE sees KERNEL or a later USER. */
static void slot_put(struct zpk_rx *rx, struct zpk_slot *s)
{
    if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1)
        return;
    unsigned char st = SLOT_HELD;
    if (atomic_compare_exchange_strong_explicit(&s->state, &st, SLOT_RETURNING,
                                                memory_order_acq_rel, memory_order_acquire)) {
        unlend(rx, s);
        zpk_store_status(slot_status(rx, s->idx), TP_STATUS_KERNEL);
        atomic_store_explicit(&s->state, SLOT_FREE, memory_order_release);
    } else if (st == SLOT_BOUNCED) {
        /* The slot has a record of its own again; the walker restores the
         * pages and frees this one. */
        atomic_store_explicit(&s->state, SLOT_DONE, memory_order_release);
    }
}

/* Byte range of slot i in the ring. */
static void slot_range(struct zpk_rx *rx, uint32_t i, size_t *off, size_t *len)
{
    *off = (size_t)(slot_addr(rx, i) - rx->base);
    *len = rx->version == ZBUF_PACKET_V3 ? rx->g.block_size : rx->g.frame_size;
}

/* Are the loan view's pages of [off, off + len) still the ring's? */
static bool view_is_ring(struct zpk_rx *rx, size_t off, size_t len)
{
    for (size_t pg = off / rx->page; pg <= (off + len - 1) / rx->page; pg++)
        if (rx->page_private[pg])
            return false;
    return true;
}

/* Replace the loan view's pages of slot i by a private copy of themselves
 * (one mremap: a holder reading meanwhile sees the same bytes either way).
 * 0, or a negative errno with nothing changed. */
static int bounce_pages(struct zpk_rx *rx, uint32_t i)
{
    size_t off, len;
    slot_range(rx, i, &off, &len);
    size_t first = off / rx->page * rx->page, end = (off + len + rx->page - 1) / rx->page * rx->page;
    size_t n = end - first;
    void *copy = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (copy == MAP_FAILED)
        return -ENOMEM;
    memcpy(copy, rx->loan_base + first, n);
    if (mremap(copy, n, n, MREMAP_MAYMOVE | MREMAP_FIXED, rx->loan_base + first) == MAP_FAILED) {
        int e = -errno;
        munmap(copy, n);
        return e;
    }
    zbuf_stats_count_copy(n);
    for (size_t pg = first / rx->page; pg < end / rx->page; pg++)
        rx->page_private[pg] = true;
    return 0;
}

/* ThreadSanitizer does not follow mremap(): memory it moves keeps stale
 * shadow and the instrumented program faults.  Under TSan a held slot
 * stalls the ring as it would without a second view. */
#if defined(__SANITIZE_THREAD__)
#define ZPK_CAN_BOUNCE 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ZPK_CAN_BOUNCE 0
#endif
#endif
#ifndef ZPK_CAN_BOUNCE
#define ZPK_CAN_BOUNCE 1
#endif

/* The walker met slot i still lent: bounce it back to the kernel.  True
 * when the slot is the kernel's now. */
static bool bounce(struct zpk_rx *rx, uint32_t i)
{
    struct zpk_slot *s = rx->slots[i];
    if (rx->loan_base == rx->base || !ZPK_CAN_BOUNCE)
        return false; /* one view only: nothing to copy into */
    /* Hold the record while we work (unless its last loan is going right
     * now: then the slot is about to be free anyway). */
    unsigned r = atomic_load_explicit(&s->refs, memory_order_acquire);
    do {
        if (r == 0)
            return false;
    } while (!atomic_compare_exchange_weak_explicit(&s->refs, &r, r + 1, memory_order_acq_rel,
                                                    memory_order_acquire));
    struct zpk_slot *fresh = slot_new(rx, i);
    if (fresh == NULL || bounce_pages(rx, i) != 0) {
        free(fresh);
        slot_put(rx, s);
        return false;
    }
    /* Nobody else moves the state out of HELD while we hold a reference. */
    atomic_store_explicit(&s->state, SLOT_BOUNCED, memory_order_release);
    unlend(rx, s);
    s->next_bounced = rx->bounced;
    rx->bounced = s;
    rx->slots[i] = fresh;
    zpk_store_status(slot_status(rx, i), TP_STATUS_KERNEL);
    rx->st->rx_bounced++;
    slot_put(rx, s); /* DONE at once if the loans went meanwhile */
    return true;
}

/* Page range [*first, *end) of the loan view covering slot i. */
static void slot_pages(struct zpk_rx *rx, uint32_t i, size_t *first, size_t *end)
{
    size_t off, len;
    slot_range(rx, i, &off, &len);
    *first = off / rx->page;
    *end = (off + len + rx->page - 1) / rx->page;
}

/* Put the ring's own pages [first, end) back into the loan view, moved
 * out of a spare mapping.  False when no spare can give them. */
static bool unbounce_pages(struct zpk_rx *rx, size_t first, size_t end)
{
    size_t pages = (size_t)rx->g.block_size * rx->g.block_nr / rx->page;
    for (int k = 0; k < ZPK_SPARES; k++) {
        if (rx->spare[k] == NULL) {
            void *m = mmap(NULL, rx->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, rx->fd, 0);
            rx->spare_used[k] = calloc(pages, sizeof(bool));
            if (m == MAP_FAILED || rx->spare_used[k] == NULL) {
                if (m != MAP_FAILED)
                    munmap(m, rx->map_len);
                free(rx->spare_used[k]);
                rx->spare_used[k] = NULL;
                return false;
            }
            rx->spare[k] = m;
        }
        bool free_run = true;
        for (size_t pg = first; pg < end && free_run; pg++)
            free_run = !rx->spare_used[k][pg];
        if (!free_run)
            continue;
        size_t n = (end - first) * rx->page;
        if (mremap(rx->spare[k] + first * rx->page, n, n, MREMAP_MAYMOVE | MREMAP_FIXED,
                   rx->loan_base + first * rx->page) == MAP_FAILED)
            return false;
        for (size_t pg = first; pg < end; pg++) {
            rx->spare_used[k][pg] = true;
            rx->page_private[pg] = false;
        }
        return true;
    }
    return false;
}

/* Free the records of bounced slots whose loans are all back, and give
 * the loan view the ring's pages again where no other bounced loan still
 * reads the private copy. */
static void reap_bounced(struct zpk_rx *rx)
{
    for (struct zpk_slot **pp = &rx->bounced; *pp;) {
        struct zpk_slot *s = *pp;
        if (atomic_load_explicit(&s->state, memory_order_acquire) != SLOT_DONE) {
            pp = &s->next_bounced;
            continue;
        }
        size_t first, end;
        slot_pages(rx, s->idx, &first, &end);
        bool shared = false; /* pages a live bounced neighbour still reads */
        for (struct zpk_slot *o = rx->bounced; o && !shared; o = o->next_bounced) {
            if (o == s || atomic_load_explicit(&o->state, memory_order_acquire) == SLOT_DONE)
                continue;
            size_t of, oe;
            slot_pages(rx, o->idx, &of, &oe);
            shared = of < end && first < oe;
        }
        if (shared)
            break; /* try again later, in order */
        if (rx->fd >= 0)
            unbounce_pages(rx, first, end);
        *pp = s->next_bounced;
        free(s);
    }
}

/* Release callback of a lent frame: runs once, on whichever thread drops
 * the last reference to the frame's bytes. */
static void loan_return(void *data, size_t size, void *arg)
{
    (void)data;
    (void)size;
    struct zpk_slot *s = arg;
    struct zpk_rx *rx = s->rx;
    slot_put(rx, s);
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
    struct zpk_slot *s = rx->slots[i];
    size_t off = (size_t)(data - rx->base);
    if (!view_is_ring(rx, off, len) || zbuf_create(&z) != 0)
        return NULL; /* bounced pages: copy instead */
    /* V3: the walker's own reference keeps the block HELD; V2: the loan's
     * reference is the only one. */
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
    if (rx->version != ZBUF_PACKET_V3)
        atomic_store_explicit(&s->state, SLOT_HELD, memory_order_relaxed);
    atomic_fetch_add_explicit(&rx->life, 1, memory_order_relaxed);
    if (zbuf_append_buf(z, rx->loan_base + off, len, loan_return, s) != 0) {
        zbuf_delete(z);
        atomic_fetch_sub_explicit(&rx->life, 1, memory_order_relaxed);
        atomic_fetch_sub_explicit(&s->refs, 1, memory_order_relaxed);
        if (rx->version != ZBUF_PACKET_V3)
            atomic_store_explicit(&s->state, SLOT_FREE, memory_order_relaxed);
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
        struct zpk_slot *s = rx->slots[i];
        if (v->snaplen >= rx->copy_below &&
            (s->lent || atomic_load_explicit(&rx->loans_out, memory_order_relaxed) < rx->loan_max)) {
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

/* Is slot `head` ours to read now?  A slot still lent from the previous
 * lap is bounced first (rx->stalled when that is not possible). */
static bool head_ready(struct zpk_rx *rx, uint32_t *status)
{
    struct zpk_slot *s = rx->slots[rx->head];
    unsigned char st = atomic_load_explicit(&s->state, memory_order_acquire);
    if (st == SLOT_HELD || st == SLOT_RETURNING) {
        if (st == SLOT_RETURNING || !bounce(rx, rx->head)) {
            if (!rx->stalled)
                rx->st->rx_stalls++;
            rx->stalled = true;
            return false;
        }
    }
    rx->stalled = false;
    *status = zpk_load_status(slot_status(rx, rx->head));
    return (*status & TP_STATUS_USER) != 0;
}

/* Bounce a slot still lent a quarter of a lap ahead of the walker, before
 * the kernel, which runs ahead of the walker, reaches it. */
static void look_ahead(struct zpk_rx *rx)
{
    uint32_t ahead = rx->nslots / 4 ? rx->nslots / 4 : 1;
    uint32_t i = (rx->head + ahead) % rx->nslots;
    if (atomic_load_explicit(&rx->slots[i]->state, memory_order_acquire) == SLOT_HELD &&
        !(rx->walking && i == rx->head))
        bounce(rx, i);
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
        bool ok = view_sane(&v, f + TPACKET2_HDRLEN, f + rx->g.frame_size) &&
                  deliver(rx, i, &v, status, &frames[n], info ? &info[n] : NULL);
        bool held = atomic_load_explicit(&rx->slots[i]->state, memory_order_relaxed) == SLOT_HELD;
        if (!(ok && held))
            zpk_store_status(slot_status(rx, i), TP_STATUS_KERNEL); /* copied or dropped */
        if (ok)
            n++;
        rx->head = rx->head + 1 == rx->nslots ? 0 : rx->head + 1;
        look_ahead(rx);
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
    slot_put(rx, rx->slots[i]);
    look_ahead(rx);
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
            struct zpk_slot *s = rx->slots[rx->head];
            atomic_store_explicit(&s->state, SLOT_HELD, memory_order_relaxed);
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
    if (rx->bounced)
        reap_bounced(rx);
    return rx->version == ZBUF_PACKET_V3 ? take_v3(rx, frames, info, max)
                                         : take_v2(rx, frames, info, max);
}

bool zpk_rx_ready(struct zpk_rx *rx)
{
    if (rx->walking)
        return true;
    unsigned char st = atomic_load_explicit(&rx->slots[rx->head]->state, memory_order_acquire);
    if (st == SLOT_HELD)
        return rx->loan_base != rx->base && ZPK_CAN_BOUNCE && !rx->stalled; /* bounced next */
    if (st == SLOT_RETURNING)
        return false;
    return (zpk_load_status(slot_status(rx, rx->head)) & TP_STATUS_USER) != 0;
}

void zpk_rx_release_owner(struct zpk_rx *rx)
{
    if (rx->walking) {
        rx->walking = false;
        slot_put(rx, rx->slots[rx->head]);
    }
    life_put(rx);
}
