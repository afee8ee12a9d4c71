/* SPDX-License-Identifier: MIT */
/*
 * Internals of zbuf-packet: the ring walkers (rx.c, tx.c), which know the
 * TPACKET frame and block layouts but no socket, and the socket side
 * (packet.c).  The walkers work on any memory laid out like a mapped ring,
 * so the property tests play the kernel on malloc'd memory.
 *
 * Who writes what (the whole correctness argument):
 * - RX status words: the kernel sets USER (plus flags) on a slot whose status
 *   is KERNEL, only at its own head, in ring order; we write KERNEL back,
 *   with release ordering, once per filled slot: at once for a frame we
 *   copied or dropped, from the release callback for a loaned one.
 * - A loaned slot keeps the kernel's USER status until it returns, so the
 *   reader cannot tell it from a freshly filled one by the status alone:
 *   `held` says "still ours from an earlier lap".  The release path writes
 *   KERNEL first and clears `held` after (release), and the reader loads
 *   `held` first (acquire): a reader that sees held == 0 sees KERNEL or a
 *   later USER, never the stale one.
 * - TX status words: we set SEND_REQUEST (release) on an AVAILABLE slot at
 *   our head once its bytes and length are written; the kernel sets SENDING
 *   and later AVAILABLE, possibly with timestamp bits (masked: TS_MASK).
 */
#ifndef ZBUF_PACKET_INTERNAL_H
#define ZBUF_PACKET_INTERNAL_H

#include <linux/if_packet.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <zbuf/packet.h>

#define ZPK_HIDDEN __attribute__((visibility("hidden")))

/* Timestamp bits the kernel may OR into any status word (also into TX slots
 * it hands back: some kernels do on veth, and a walker comparing the whole
 * word with AVAILABLE then stops for good). */
#define ZPK_TS_MASK (TP_STATUS_TS_SOFTWARE | TP_STATUS_TS_SYS_HARDWARE | TP_STATUS_TS_RAW_HARDWARE)

static inline uint32_t zpk_load_status(const void *p)
{
    return __atomic_load_n((const uint32_t *)p, __ATOMIC_ACQUIRE);
}

static inline void zpk_store_status(void *p, uint32_t v)
{
    __atomic_store_n((uint32_t *)p, v, __ATOMIC_RELEASE);
}

/* Ring geometry as given to the kernel (struct tpacket_req3 for both). */
struct zpk_geom {
    uint32_t block_size;
    uint32_t block_nr;
    uint32_t frame_size;
    uint32_t frame_nr;
};

/* Check a geometry the way the kernel does, with a sentence for each rule.
 * `v3` also checks that a block holds its header.  Returns 0 or -EINVAL. */
ZPK_HIDDEN int zpk_geom_check(const struct zpk_geom *g, unsigned version, bool rx, char *why,
                              size_t why_len);

/* Address of frame slot i of a frame ring (V2 RX and both TX layouts). */
static inline uint8_t *zpk_frame(uint8_t *base, const struct zpk_geom *g, uint32_t i)
{
    uint32_t fpb = g->block_size / g->frame_size;
    return base + (size_t)(i / fpb) * g->block_size + (size_t)(i % fpb) * g->frame_size;
}

/* --------------------------------------------------------------- receive */

struct zpk_rx;

/* Slot states (zpk_slot::state).  A slot is FREE while the kernel or the
 * walker has it; HELD while frames of it are lent through the loan view;
 * BOUNCED when the walker found it HELD across a lap (the kernel was
 * blocked at it), copied its pages in the loan view to private memory and
 * gave it back to the kernel: the loans still out read the copy; DONE once
 * those loans are gone too (the walker then puts the ring's pages back in
 * the loan view and frees the record); RETURNING for the instant a release
 * writes the status back. */
enum { SLOT_FREE = 0, SLOT_HELD = 1, SLOT_BOUNCED = 2, SLOT_RETURNING = 3, SLOT_DONE = 4 };

/* One per V2 frame slot or V3 block.  A bounced slot's record stays with
 * the loans still out (their release callbacks point at it) and is freed by
 * the last of them; the slot gets a fresh record. */
struct zpk_slot {
    struct zpk_rx *rx;
    uint32_t idx;       /* the slot's number */
    atomic_uint refs;   /* loans (V3: from the block, +1 while the walker walks it) */
    atomic_uchar state; /* SLOT_*; whoever moves it out of HELD owns `lent` */
    bool lent;          /* counted in loans_out */
    struct zpk_slot *next_bounced; /* the walker's list of bounced records */
};

#define ZPK_SPARES 4

struct zpk_rx {
    uint8_t *base;           /* the receive ring's first byte: the control view
                                (headers, status words) */
    uint8_t *loan_base;      /* the same ring mapped again: the loan view lent
                                frames point into (== base: no bouncing) */
    struct zpk_geom g;
    unsigned version;
    uint32_t nslots;         /* V2: frames; V3: blocks */
    uint32_t head;           /* next slot to read */
    struct zpk_slot **slots;
    bool *page_private;      /* per page of the loan view: bounced, no longer the
                                ring's (the walker's thread only) */
    size_t page;             /* page size */
    struct zpk_slot *bounced; /* records of bounced slots, loans still out or DONE */
    int fd;                  /* mapped again for spare pages (-1: never restore) */
    size_t map_len;          /* bytes of one mapping of the rings */
    uint8_t *spare[ZPK_SPARES]; /* extra mappings whose pages move into the loan
                                   view to undo a bounce */
    bool *spare_used[ZPK_SPARES]; /* per page: moved out already */
    /* V3: the block being walked. */
    bool walking;
    uint32_t left;           /* frames not yet taken from it */
    uint8_t *next;           /* the next of them */
    atomic_uint loans_out;   /* slots held by loans (V2 frames, V3 blocks) */
    uint32_t loan_max;       /* lend no more slots than this */
    uint32_t copy_below;     /* copy frames shorter than this */
    zbuf_pool_t *pool;       /* copies beyond the loan share (NULL: drop them) */
    bool filter_outgoing;    /* drop PACKET_OUTGOING frames here */
    bool stalled;            /* the last walk stopped at a held slot */
    zbuf_packet_stats_t *st; /* counters to bump (the reader's thread only) */
    /* Lifetime: 1 for the owner + 1 per loaned frame; the last one to go
     * calls destroy (from a release callback on any thread, or the owner). */
    atomic_uint life;
    void (*destroy)(struct zpk_rx *rx);
};

/* Set up the walker over an already filled-in base/loan_base/g/version.
 * loan_percent 0..100.  Returns 0 or -ENOMEM. */
ZPK_HIDDEN int zpk_rx_init(struct zpk_rx *rx, unsigned loan_percent);
/* Free the slot records and page map (the owner's destroy calls it). */
ZPK_HIDDEN void zpk_rx_free_slots(struct zpk_rx *rx);
/* Take up to max frames (see zbuf_packet_recv()); 0 when none. */
ZPK_HIDDEN int zpk_rx_take(struct zpk_rx *rx, zbuf_t **frames, zbuf_packet_rxinfo_t *info,
                           unsigned max);
/* Whether the next slot has a frame for us (for the stack driver's deadline). */
ZPK_HIDDEN bool zpk_rx_ready(struct zpk_rx *rx);
/* The owner lets go: stop walking (a V3 block being walked goes back when its
 * loans do) and drop the owner's reference. */
ZPK_HIDDEN void zpk_rx_release_owner(struct zpk_rx *rx);

/* -------------------------------------------------------------- transmit */

struct zpk_tx {
    uint8_t *base;
    struct zpk_geom g;
    unsigned version;
    uint32_t data_off;   /* where frame bytes start in a slot (after the
                            virtio header with vnet_hdr) */
    bool vnet_hdr;       /* PACKET_VNET_HDR: a struct virtio_net_hdr precedes
                            each frame, asking the kernel for a linear copy */
    uint32_t max_frame;  /* MTU + Ethernet header and slot limits */
    uint32_t head;       /* next slot to fill */
    uint32_t tail;       /* oldest slot we marked and have not seen back */
    uint32_t in_ring;    /* marked or in flight */
    uint32_t unkicked;   /* marked since the last successful kick */
    bool refused;        /* the kernel marked a slot WRONG_FORMAT */
    zbuf_packet_stats_t *st;
};

ZPK_HIDDEN void zpk_tx_init(struct zpk_tx *tx);
/* Copy one frame into the next slot and mark it.  0 (frame consumed),
 * -EAGAIN (full), -EMSGSIZE, -EINVAL: frame untouched. */
ZPK_HIDDEN int zpk_tx_put(struct zpk_tx *tx, zbuf_t *frame);
/* Advance tail over slots the kernel gave back; returns in_ring. */
ZPK_HIDDEN uint32_t zpk_tx_reap(struct zpk_tx *tx);

#endif
