/* SPDX-License-Identifier: MIT */
/*
 * The transmit ring walker: fills slots strictly in ring order, marks a
 * slot only once its bytes and length are written, and follows the
 * kernel's progress from the oldest marked slot.  The kick (a system call)
 * is the socket side's business (packet.c).
 *
 * The kernel sends from its own head and stops at the first slot not
 * marked SEND_REQUEST.  Filling in order and marking each slot last keeps
 * every marked slot reachable: there is never a gap for it to stop at.
 */
#include <errno.h>
#include <linux/virtio_net.h>
#include <net/ethernet.h>
#include <string.h>

#include "packet_internal.h"

static uint32_t *status_word(struct zpk_tx *tx, uint8_t *f)
{
    if (tx->version == ZBUF_PACKET_V3)
        return &((struct tpacket3_hdr *)f)->tp_status;
    return &((struct tpacket2_hdr *)f)->tp_status;
}

/* One byte of a frame, read in place (no copy is counted for it). */
static int byte_at(const zbuf_t *z, size_t off)
{
    size_t in;
    zbuf_seg_t *s = zbuf_seg_find(z, off, &in);
    const uint8_t *d = s ? zbuf_seg_data(z, s) : NULL;
    return d ? d[in] : -1;
}

void zpk_tx_init(struct zpk_tx *tx)
{
    tx->data_off = tx->version == ZBUF_PACKET_V3
                       ? (uint32_t)(TPACKET3_HDRLEN - sizeof(struct sockaddr_ll))
                       : (uint32_t)(TPACKET2_HDRLEN - sizeof(struct sockaddr_ll));
    if (tx->vnet_hdr)
        tx->data_off += (uint32_t)sizeof(struct virtio_net_hdr);
    tx->head = tx->tail = tx->in_ring = tx->unkicked = 0;
    tx->refused = false;
    uint32_t room = tx->g.frame_size - tx->data_off;
    if (tx->max_frame == 0 || tx->max_frame > room)
        tx->max_frame = room;
}

uint32_t zpk_tx_reap(struct zpk_tx *tx)
{
    while (tx->in_ring > 0) {
        uint8_t *f = zpk_frame(tx->base, &tx->g, tx->tail);
        uint32_t st = zpk_load_status(status_word(tx, f)) & ~(uint32_t)ZPK_TS_MASK;
        if (st == TP_STATUS_WRONG_FORMAT) {
            /* The kernel refused this frame and stopped the ring at it
             * (PACKET_LOSS off).  Count it once; the ring stays stopped. */
            if (!tx->refused)
                tx->st->tx_refused++;
            tx->refused = true;
            break;
        }
        if (st != TP_STATUS_AVAILABLE)
            break;
        tx->tail = tx->tail + 1 == tx->g.frame_nr ? 0 : tx->tail + 1;
        tx->in_ring--;
    }
    return tx->in_ring;
}

int zpk_tx_put(struct zpk_tx *tx, zbuf_t *frame)
{
    size_t len = zbuf_length(frame);
    if (len < ETH_HLEN)
        return -EINVAL;
    /* A VLAN-tagged frame carries 4 more bytes than the MTU allows for. */
    size_t limit = tx->max_frame;
    if (len >= ETH_HLEN + 4 && byte_at(frame, 12) == 0x81 && byte_at(frame, 13) == 0x00)
        limit += 4;
    if (limit > tx->g.frame_size - tx->data_off)
        limit = tx->g.frame_size - tx->data_off;
    if (len > limit)
        return -EMSGSIZE;
    if (tx->in_ring == tx->g.frame_nr && zpk_tx_reap(tx) == tx->g.frame_nr)
        return -EAGAIN;
    uint8_t *f = zpk_frame(tx->base, &tx->g, tx->head);
    uint32_t *sw = status_word(tx, f);
    if ((zpk_load_status(sw) & ~(uint32_t)ZPK_TS_MASK) != TP_STATUS_AVAILABLE)
        return -EAGAIN; /* cannot happen while in_ring < frame_nr; kept as a guard */
    if (zbuf_copyout(frame, 0, f + tx->data_off, len) != (ssize_t)len)
        return -EIO;
    uint32_t tp_len = (uint32_t)len;
    if (tx->vnet_hdr) {
        /* No offload asked for; hdr_len = the whole frame makes the kernel
         * copy it into the socket buffer's linear part instead of attaching
         * the ring's page, which a veth (or any device without
         * scatter-gather) would have to copy again into a new page. */
        struct virtio_net_hdr *vh = (struct virtio_net_hdr *)(f + tx->data_off) - 1;
        memset(vh, 0, sizeof *vh);
        vh->hdr_len = (uint16_t)len; /* little-endian virtio on the hosts Linux runs this on */
        tp_len += (uint32_t)sizeof *vh;
    }
    if (tx->version == ZBUF_PACKET_V3) {
        struct tpacket3_hdr *h = (struct tpacket3_hdr *)f;
        h->tp_len = tp_len;
        h->tp_snaplen = tp_len;
        h->tp_next_offset = 0;
    } else {
        struct tpacket2_hdr *h = (struct tpacket2_hdr *)f;
        h->tp_len = tp_len;
        h->tp_snaplen = tp_len;
    }
    zpk_store_status(sw, TP_STATUS_SEND_REQUEST);
    tx->head = tx->head + 1 == tx->g.frame_nr ? 0 : tx->head + 1;
    tx->in_ring++;
    tx->unkicked++;
    tx->st->tx_frames++;
    tx->st->tx_bytes += len;
    zbuf_delete(frame); /* the bytes are in the ring: release callbacks run now */
    return 0;
}
