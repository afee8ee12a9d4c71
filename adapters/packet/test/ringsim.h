/* SPDX-License-Identifier: MIT */
/*
 * A simulated kernel for the ring walkers: plays the kernel's side of
 * PACKET_RX_RING (V2 frames, V3 blocks) and PACKET_TX_RING on ordinary
 * memory, with random status flags (timestamp bits included), random frame
 * lengths, truncation and outgoing frames, and checks what the walkers do:
 * every frame written is delivered once, in order, intact while held; every
 * transmit slot marked is reached without a gap and sent in order.
 *
 * Used by the Criterion property tests (test_ring.c) and by the plain-C
 * thread stress program (ring_threads.c) that TSan runs.
 */
#ifndef ZBUF_PACKET_RINGSIM_H
#define ZBUF_PACKET_RINGSIM_H

#include <stdbool.h>
#include <stdint.h>

#include "packet_internal.h"

struct sim_rng {
    uint64_t s;
};

static inline uint64_t sim_next(struct sim_rng *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545f4914f6cdd1dull;
}

static inline uint32_t sim_below(struct sim_rng *r, uint32_t n)
{
    return n ? (uint32_t)(sim_next(r) % n) : 0;
}

/* The byte at offset i of frame number seq. */
static inline uint8_t sim_byte(uint64_t seq, size_t i)
{
    return (uint8_t)(seq * 131u + i * 7u + (i >> 8));
}

/* Receive side. */
struct sim_rx {
    struct zpk_rx rx;           /* the walker under test */
    zbuf_packet_stats_t st;
    uint8_t *mem;               /* the kernel's (and the walker's control) view */
    uint8_t *loan;              /* the loan view (== mem with single_view) */
    int fd;                     /* the memfd behind both */
    size_t mem_len;
    struct sim_rng rng;
    /* kernel state */
    uint32_t khead;             /* V2: next frame slot; V3: current block */
    uint32_t kblk_used;         /* V3: bytes used in the current block */
    uint32_t kblk_pkts;         /* V3: frames in it */
    uint8_t *kblk_last;         /* V3: last frame header written in it */
    uint64_t kseq;              /* frames written */
    uint64_t kdrops;            /* frames the kernel could not place */
    /* expectations: per written frame, whether the walker may skip it */
    uint64_t *outgoing;         /* bitmap of outgoing frames (filtered when set) */
    uint32_t *lens;             /* snap length per frame (truncated ones shorter) */
    size_t cap;                 /* room in the arrays */
    int destroyed;              /* destroy() ran */
};

/* Set up a ring of `slots` V2 frames or V3 blocks; single_view: no loan
 * view, so held slots cannot be bounced. */
void sim_rx_init(struct sim_rx *s, unsigned version, uint32_t frame_size, uint32_t block_size,
                 uint32_t slots, unsigned loan_percent, zbuf_pool_t *pool, bool filter_out,
                 uint64_t seed, size_t max_frames, bool single_view);
void sim_rx_free(struct sim_rx *s);
/* The kernel writes one frame (or drops it when the slot is not free). */
void sim_rx_kernel_write(struct sim_rx *s);
/* V3: the kernel retires the current block if it has frames. */
void sim_rx_kernel_retire(struct sim_rx *s);
/* Every slot back with the kernel and nothing lent. */
bool sim_rx_all_returned(struct sim_rx *s);

/* Transmit side. */
struct sim_tx {
    struct zpk_tx tx;
    zbuf_packet_stats_t st;
    uint8_t *mem;
    size_t mem_len;
    struct sim_rng rng;
    uint32_t khead;             /* the kernel's head */
    uint32_t *inflight;         /* slots the kernel is "sending", FIFO */
    uint32_t nflight, flight_head;
    uint64_t sent;              /* frames the kernel sent, in order */
    uint64_t bad;               /* frames out of order or corrupt */
};

void sim_tx_init(struct sim_tx *s, unsigned version, uint32_t frame_size, uint32_t block_size,
                 uint32_t frames, uint64_t seed);
void sim_tx_free(struct sim_tx *s);
/* A kick: the kernel takes every SEND_REQUEST slot from its head on,
 * checking order and contents. */
void sim_tx_kernel_kick(struct sim_tx *s);
/* The device finishes up to n frames in flight (AVAILABLE, maybe with
 * timestamp bits). */
void sim_tx_kernel_complete(struct sim_tx *s, uint32_t n);
/* A frame of `len` bytes numbered seq (in bytes 6..13), in `nseg` enrolled
 * segments whose release callbacks count in *released. */
zbuf_t *sim_tx_frame(uint64_t seq, size_t len, unsigned nseg, atomic_int *released);

#endif
