/* SPDX-License-Identifier: MIT */
/*
 * Private declarations of the zbuf TCP/IP stack.  Names are zbuf_ip__
 * (double underscore) and hidden.
 *
 * Layering, bottom to top:
 *   drivers       link.c (in-memory link), tap.c (Linux TAP)
 *   stack.c       the stack object, interfaces, Ethernet, ARP, IPv4, ICMP, UDP
 *   reasm.c       IPv4 fragment reassembly
 *   tcp*.c        TCP (its files: tcp_internal.h)
 *   sock.c        the socket-like convenience layer over TCP
 *   cksum.c       checksums over zbuf segments, SipHash-2-4
 * Every packet is a zbuf.  On the way up each layer cuts its header off the
 * front of the zbuf (zbuf_cut of a prefix only moves the first segment's
 * offset), so what reaches the application are the driver's own segments.
 * On the way down each layer prepends its header with zbuf_prepend_space();
 * TCP, on a connection whose cached route is ready, prepends its Ethernet,
 * IP and TCP headers at once (struct zbuf_ip__txroute).
 */
#ifndef ZBUF_IP_STACK_INTERNAL_H
#define ZBUF_IP_STACK_INTERNAL_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <zbuf/ip.h>

#include "wire.h"

#define ZBUF_IP__HIDDEN __attribute__((visibility("hidden")))

/* ------------------------------------------------------------- checksums */

/* One's-complement sum of `len` bytes of `z` from `off`, continuing the
 * partial sum `sum` (not folded, not complemented).  Walks the segments in
 * place; a segment that starts at an odd position of the summed range has
 * its partial sum byte-swapped, which is how odd segment lengths are
 * handled without copying. */
ZBUF_IP__HIDDEN uint64_t zbuf_ip__sum_zbuf(const zbuf_t *z, size_t off, size_t len,
                                           uint64_t sum);
/* Partial sum of a flat buffer (even start). */
ZBUF_IP__HIDDEN uint64_t zbuf_ip__sum_mem(const void *p, size_t len, uint64_t sum);
/* zbuf_ip__sum_mem(hdr, 20, sum) in a few straight-line additions: an IPv4
 * header without options. */
ZBUF_IP__HIDDEN uint64_t zbuf_ip__sum_ip20(const void *hdr, uint64_t sum);
/* Fold and complement: the checksum field value (host order).  Inline, no
 * loop: two folds to 32 bits leave less than 2^32, two more to 16 bits
 * less than 2^16; a non-zero sum stays non-zero. */
static inline uint16_t zbuf_ip__fold(uint64_t sum)
{
    sum = (sum & 0xffffffffu) + (sum >> 32);
    sum = (sum & 0xffffffffu) + (sum >> 32);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    return (uint16_t)~sum;
}
/* Pseudo-header sum for TCP/UDP. */
static inline uint64_t zbuf_ip__pseudo(uint32_t src, uint32_t dst, uint8_t proto, uint32_t len)
{
    return (uint64_t)(src >> 16) + (src & 0xffff) + (dst >> 16) + (dst & 0xffff) + proto + len;
}

/* ------------------------------------------------------------ ISN hash */

/* SipHash-2-4 of `len` bytes under a 128-bit key. */
ZBUF_IP__HIDDEN uint64_t zbuf_ip__siphash(const uint8_t key[16], const void *data, size_t len);

/* ----------------------------------------------------------------- stack */

struct zbuf_ip_netif {
    zbuf_ip_stack_t *stack;
    zbuf_ip_netif_config_t cfg;
    uint32_t mask;          /* from cfg.prefix_len */
    zbuf_ip_driver_t drv;
    void *ctx;
    bool in_use;
    unsigned polling;       /* its driver's poll() is running (nested: a callback may poll) */
    bool detach_pending;    /* removed from inside that poll: detach when it returns */
};


/* An IPv4 datagram on its way out, before its IP header is written and
 * before it is cut into fragments: that happens only once the next hop's
 * address is known, so a datagram waiting for ARP takes one queue place
 * whatever its size.  Its identification is chosen when it is sent (0 if
 * it fits the MTU), so all its fragments carry the same one however late
 * they leave. */
struct ip_dgram {
    zbuf_t *pkt;            /* transport header and payload */
    uint32_t src, dst;
    uint16_t id;
    uint8_t proto;
};

/* A resolved neighbour (the table's bounds: <zbuf/ip_opts.h>). */
struct arp_entry {
    bool valid;             /* false: a free place */
    uint8_t mac[6];
    uint32_t ip;
    zbuf_ip_netif_t *nif;
    uint64_t expires;       /* freed then (#ZBUF_IP_ARP_MAX_AGE_MS after it resolved) */
    bool sent;              /* it carried a datagram: `used` is valid */
    uint64_t used;          /* latest datagram sent through it; in use while recent */
};

/* A neighbour being resolved, and what waits for it. */
struct arp_pending {
    bool busy;              /* false: a free place */
    uint8_t rounds;         /* retry deadlines passed; gives up at ZBUF_IP_ARP_TRIES */
    uint32_t ip;
    zbuf_ip_netif_t *nif;
    uint64_t created;       /* eviction takes the oldest */
    uint64_t deadline;      /* next retry */
    struct ip_dgram queue[ZBUF_IP_ARP_QUEUE]; /* datagrams waiting, in order */
    unsigned nqueue;
    size_t qbytes;          /* what queue[0..nqueue) pins, see zbuf_ip__pinned() */
};

/* Destinations a UDP PCB sent to lately: ICMP errors must quote one. */
#define ZBUF_IP__UDP_RECENT 4

struct zbuf_ip_udp {
    zbuf_ip_stack_t *stack;
    uint32_t laddr;
    uint16_t lport;
    bool bound;
    bool broadcast;         /* zbuf_ip_udp_set_broadcast() */
    zbuf_ip_udp_recv_cb recv;
    void *arg;
    zbuf_ip_udp_error_cb error;
    void *error_arg;
    struct { uint32_t addr; uint16_t port; } recent[ZBUF_IP__UDP_RECENT]; /* ring */
    unsigned nrecent;       /* entries filled so far (the ring's cursor) */
    struct zbuf_ip_udp *next;
};

struct zbuf_ip_tcp;
struct ip_reasm; /* one datagram being reassembled (reasm.c) */

struct zbuf_ip_stack {
    zbuf_ip_config_t cfg;
    uint64_t now;           /* clock sampled at the entry of each public call */
    zbuf_ip_netif_t netifs[ZBUF_IP_MAX_NETIFS];
    unsigned nnetifs;       /* of them in use */
    unsigned offload_nifs;  /* of them with ZBUF_IP_DRV_CSUM_OFFLOAD */
    struct arp_entry arp[ZBUF_IP_ARP_ENTRIES];
    struct arp_pending arp_pend[ZBUF_IP_ARP_PENDING];
    uint64_t arp_tokens;    /* ARP request budget, thousandths of a request */
    uint64_t arp_tokens_at; /* clock of its latest refill */
    struct zbuf_ip_udp *udps;
    unsigned nudp;
    struct zbuf_ip_tcp *tcps; /* every PCB, listeners included */
    unsigned ntcp;
    unsigned tcp_dead;        /* PCBs killed, waiting for zbuf_ip__tcp_reap() */
    uint16_t next_port;     /* ephemeral port cursor */
    uint64_t challenge_window; /* start of the current 1-second window */
    unsigned challenge_count;  /* challenge ACKs sent in it */
    unsigned challenge_budget; /* drawn at random for each window */
    uint64_t rng;              /* xorshift state for the stack's random draws */
    uint64_t arp_next;      /* no ARP deadline is earlier (a lower bound) */
    /* No TCP timer is due earlier and no PCB has output pending before it
     * (a lower bound, lowered by every tcp_timer_set(); see
     * zbuf_ip__tcp_timers()): polls before it skip the walk of the PCBs. */
    uint64_t tcp_next;
#define ZBUF_IP__ID_BUCKETS 64
    uint16_t ip_ids[ZBUF_IP__ID_BUCKETS]; /* IPv4 id counters of fragmented datagrams */
    struct ip_reasm *reasm[ZBUF_IP_REASM_MAX]; /* NULL: free slot */
    uint64_t reasm_seq;     /* creation counter: the smallest alive is the oldest */
    zbuf_ip_stats_t st;
    int depth;              /* nesting of public entry points (for deferred frees) */
    bool rx_trusted;        /* the frame being processed came from a checksum-offload link */
    /* Receive pool pressure (see zbuf_ip__rx_hold()): the pool of the frame
     * being processed (NULL: none, or no frame), its level once looked at
     * (-1: not yet), and the reserve's pruning. */
    zbuf_pool_t *rx_pool;
    int rx_level;
    bool rx_pruned;         /* pruned since the pool last left the pressure zone */
    /* Frames of pool rx_ok_pool that may still come before its level needs
     * a look again: each frame takes at most one buffer, so from `left`
     * buffers the pressure mark is that many frames away. */
    zbuf_pool_t *rx_ok_pool;
    size_t rx_ok_frames;
    bool rx_prune_pending;  /* prune when the outermost stack call returns */
    /* Receive batches: driver polls in progress, and the connections whose
     * ACK waits for the end of the batch (zbuf_ip__tcp_acks_flush()). */
    int rx_batch;
    struct zbuf_ip_tcp *acks_owed;
    struct zbuf_ip__teardown *teardowns; /* see zbuf_ip__teardown_add() */
    /* Bumped by every change that may change where a datagram goes or to
     * which MAC: an interface added or removed, an ARP entry made, changed
     * or freed.  Starts at 1: a zeroed zbuf_ip__txroute is never valid. */
    uint64_t tx_gen;
};

/* Teardown hooks: a layer above the stack (the socket layer's closed
 * sockets that still send, for one) keeps objects alive on the stack's
 * behalf.  It embeds one of these in each and adds it; zbuf_ip_stack_delete()
 * calls every hook still added, once, before it frees the PCBs (which go
 * without callbacks).  The hook frees its object and must not call into the
 * stack.  The core knows only this callback, never the layer's types. */
struct zbuf_ip__teardown {
    void (*fn)(struct zbuf_ip__teardown *t); /* frees the object holding t */
    struct zbuf_ip__teardown *next, **prev;
};
/* Add `t` (t->fn set by the caller) to s's hooks; O(1), cannot fail. */
ZBUF_IP__HIDDEN void zbuf_ip__teardown_add(zbuf_ip_stack_t *s, struct zbuf_ip__teardown *t);
/* Take `t` off its stack's hooks (the object is freed another way); O(1). */
ZBUF_IP__HIDDEN void zbuf_ip__teardown_remove(struct zbuf_ip__teardown *t);

/* Sample the clock: the outermost public entry point does, so that a poll
 * reads it once and callbacks calling back into the stack see the poll's
 * time; nested calls leave it. */
ZBUF_IP__HIDDEN void zbuf_ip__tick(zbuf_ip_stack_t *s);

/* Send an IP packet: `pkt` holds the transport header and payload and is
 * consumed in every case.  Prepends the IP header and routes it.
 * Returns 0 or a negative errno (the packet was dropped). */
ZBUF_IP__HIDDEN int zbuf_ip__output(zbuf_ip_stack_t *s, zbuf_t *pkt, uint32_t src, uint32_t dst,
                                    uint8_t proto);
/* A sender's cached route (a TCP connection keeps one): what
 * zbuf_ip__output() decides for datagrams from `src` to `dst` of protocol
 * `proto` while neither the interfaces nor the ARP table change (while
 * `gen` equals the stack's tx_gen), with their Ethernet and IP headers
 * prepared.  Zeroed memory is an empty one. */
struct zbuf_ip__txroute {
    uint64_t gen;           /* s->tx_gen when filled */
    zbuf_ip_netif_t *nif;
    struct arp_entry *arp;  /* the next hop's entry, marked used per datagram; NULL: broadcast */
    uint32_t src, dst;
    uint8_t proto;
    uint64_t hsum;          /* partial sum of the IP header without its total length */
    uint8_t hdr[ETH_HLEN + IP_HLEN]; /* Ethernet and IP headers, total length and checksum 0 */
};
/* Bytes of the Ethernet and IP headers a cached route writes. */
#define ZBUF_IP__L2_HLEN (ETH_HLEN + IP_HLEN)
/* Whether an IP packet of `len` bytes (header included) of protocol
 * `proto` leaves `nif` whole, without fragments: it fits the MTU, or it is
 * TCP on an interface with segmentation offload (#ZBUF_IP_DRV_TSO), where
 * tcp_out.c hands over runs of full-sized segments in one packet. */
static inline bool zbuf_ip__fits(const zbuf_ip_netif_t *nif, uint8_t proto, size_t len)
{
    return len <= nif->cfg.mtu ||
           (proto == IP_PROTO_TCP && (nif->drv.flags & ZBUF_IP_DRV_TSO) && len <= IP_MAX_DATAGRAM);
}
/* Fill `rt` with what zbuf_ip__output() would decide for (src, dst,
 * proto) now; false, and `rt` left empty, unless the datagram would go
 * straight to a driver: a route, a destination that is not ours, and the
 * next hop's MAC known (or broadcast). */
ZBUF_IP__HIDDEN bool zbuf_ip__route_fill(zbuf_ip_stack_t *s, struct zbuf_ip__txroute *rt,
                                         uint32_t src, uint32_t dst, uint8_t proto);
/* Whether a datagram of `len` bytes (transport header and payload) from
 * `src` to `dst` of protocol `proto` goes straight to a driver through `rt`
 * (refilled if it is stale): it fits the interface's MTU and the next hop's
 * MAC is known.  Then its sender may reserve ZBUF_IP__L2_HLEN bytes in
 * front of its transport header, in the same zbuf_prepend_space(), and
 * hand it to zbuf_ip__output_ready(); otherwise it takes zbuf_ip__output().
 * Only the stack's own code between the two calls (no callback). */
static inline bool zbuf_ip__route_ready(zbuf_ip_stack_t *s, struct zbuf_ip__txroute *rt,
                                        size_t len, uint32_t src, uint32_t dst, uint8_t proto)
{
    if ((rt->gen != s->tx_gen || rt->src != src || rt->dst != dst || rt->proto != proto) &&
        !zbuf_ip__route_fill(s, rt, src, dst, proto))
        return false;
    /* Else fragments (the MTU is below IP_MAX_DATAGRAM). */
    return zbuf_ip__fits(rt->nif, proto, len + IP_HLEN);
}
/* Write the Ethernet and IP headers of `rt` at `h`, the first
 * ZBUF_IP__L2_HLEN bytes of `pkt`, for `len` bytes behind them, and hand
 * `pkt` to the driver: byte for byte the frame, counters and ARP
 * bookkeeping of zbuf_ip__output().  Consumes `pkt`; returns the driver's
 * answer. */
ZBUF_IP__HIDDEN int zbuf_ip__output_ready(zbuf_ip_stack_t *s, struct zbuf_ip__txroute *rt,
                                          zbuf_t *pkt, uint8_t *h, size_t len);
/* The interface and source address used to reach dst; NULL if none. */
ZBUF_IP__HIDDEN zbuf_ip_netif_t *zbuf_ip__route(zbuf_ip_stack_t *s, uint32_t dst);
/* Whether received checksums must be verified now. */
static inline bool zbuf_ip__verify_rx(const zbuf_ip_stack_t *s)
{
    return !s->cfg.skip_rx_checksum && !s->rx_trusted;
}
/* Whether segments to `dst` need a computed TCP/UDP checksum. */
ZBUF_IP__HIDDEN bool zbuf_ip__need_tx_csum(zbuf_ip_stack_t *s, uint32_t dst);
/* Is `a` one of our addresses? */
ZBUF_IP__HIDDEN bool zbuf_ip__is_local(const zbuf_ip_stack_t *s, uint32_t a);

/* What holding `z` pins in memory: its length plus, per segment, the rest
 * of the buffer behind it, at most ZBUF_IP__SLACK bytes more (a driver's
 * receive buffer is not returned while any byte of it is held). */
#define ZBUF_IP__SLACK 2048u
ZBUF_IP__HIDDEN size_t zbuf_ip__pinned(const zbuf_t *z);

/* Bytes of descriptors charged per segment held (a zbuf, a segment, list
 * entries): a connection's receive memory counts them (ZBUF_IP_TCP_RCV_MEM_MULT). */
#define ZBUF_IP__SEG_COST 128u
/* What holding `z` costs a connection's receive memory. */
static inline size_t zbuf_ip__charge(const zbuf_t *z)
{
    return zbuf_ip__pinned(z) + ZBUF_IP__SEG_COST * zbuf_seg_count(z);
}

/* Levels of the receive pool of the frame being processed. */
enum { ZBUF_IP__RX_OK, ZBUF_IP__RX_PRESSURE, ZBUF_IP__RX_RESERVE };
/* The level of the pool the frame being processed came from (OK outside
 * frame processing or without a pool). */
ZBUF_IP__HIDDEN int zbuf_ip__rx_level(zbuf_ip_stack_t *s);
/* `z`, payload of the frame being processed, is about to be kept beyond
 * this frame (a queue, or the application); `speculative`: it may never be
 * used (an out-of-order segment, a fragment).  Applies the pool policy of
 * <zbuf/ip_opts.h>: keeps it as it is, collapses it in place into a compact
 * buffer (0), or says to drop it (-ENOBUFS, counted in rx_pressure_drops;
 * the caller deletes it). */
ZBUF_IP__HIDDEN int zbuf_ip__rx_hold_slow(zbuf_ip_stack_t *s, zbuf_t *z, bool speculative);
static inline int zbuf_ip__rx_hold(zbuf_ip_stack_t *s, zbuf_t *z, bool speculative)
{
    /* The common case inline: no pool, or one known to be far from its mark. */
    if (s->rx_pool == NULL || s->rx_level == ZBUF_IP__RX_OK)
        return 0;
    return zbuf_ip__rx_hold_slow(s, z, speculative);
}
/* Replace the segments of `z` by one compact buffer of its length (a
 * counted copy).  0, or a negative errno with `z` unchanged. */
ZBUF_IP__HIDDEN int zbuf_ip__collapse(zbuf_ip_stack_t *s, zbuf_t *z);
/* A free ephemeral port for `addr`: the next from the stack's cursor over
 * the dynamic range that `in_use` says is free; 0 if none. */
ZBUF_IP__HIDDEN uint16_t zbuf_ip__ephemeral(zbuf_ip_stack_t *s, uint32_t addr,
                                            bool (*in_use)(zbuf_ip_stack_t *s, uint32_t addr,
                                                           uint16_t port));
/* A random 32-bit number (not cryptographic: jitter for rate limits). */
ZBUF_IP__HIDDEN uint32_t zbuf_ip__random(zbuf_ip_stack_t *s);

/* Copy up to `len` header bytes starting at `off` into `tmp` unless they are
 * contiguous, and return where they are.  Header bytes are read for parsing,
 * like the cursor's integer reads; payload is never read this way. */
ZBUF_IP__HIDDEN const uint8_t *zbuf_ip__hdr(const zbuf_t *z, size_t off, size_t len,
                                            uint8_t *tmp);

/* ------------------------------------------------------------ reassembly */

/* Offer a fragment of datagram (src, dst, proto, id): `frag` is its payload
 * (IP header and link padding cut away), `off` its offset in bytes, `mf` the
 * more-fragments bit, `iph` its first 20 IP header bytes (quoted in an ICMP
 * error should the datagram time out), `hlen` the length of its IP header
 * (for the 65535-byte bound).  Consumes `frag` in every case.  Returns 1 with the whole
 * datagram's payload in *out (a new zbuf of the fragments' segments) when
 * this fragment completed it; 0 when the fragment is held; a negative errno
 * when it was dropped (counted; rx_drops of this fragment left to the
 * caller). */
ZBUF_IP__HIDDEN int zbuf_ip__reasm_input(zbuf_ip_netif_t *nif, zbuf_t *frag, uint32_t src,
                                         uint32_t dst, uint8_t proto, uint16_t id, uint32_t off,
                                         bool mf, const uint8_t *iph, size_t hlen,
                                         zbuf_t **out);
/* Send ICMP time exceeded, code 1, about a datagram whose reassembly timed
 * out: `orig` is its first fragment's 20-byte IP header followed by up to 8
 * bytes of its payload (`len` in all).  Returns 0 or a negative errno
 * (nothing sent: not to us, from a bad source, or about an ICMP error). */
ZBUF_IP__HIDDEN int zbuf_ip__icmp_reasm_timeout(zbuf_ip_stack_t *s, const uint8_t *orig,
                                                size_t len);
/* Free the datagrams whose time is up; returns how many. */
ZBUF_IP__HIDDEN int zbuf_ip__reasm_timers(zbuf_ip_stack_t *s);
/* Earliest reassembly deadline, or ZBUF_IP_NEVER. */
ZBUF_IP__HIDDEN uint64_t zbuf_ip__reasm_deadline(const zbuf_ip_stack_t *s);
/* Free every datagram that arrived on `nif` (NULL: every datagram). */
ZBUF_IP__HIDDEN void zbuf_ip__reasm_flush(zbuf_ip_stack_t *s, const zbuf_ip_netif_t *nif);

/* ------------------------------------------------------------------- TCP */

/* An ICMP error about a TCP segment we sent (RFC 5927 checks are made by
 * the callee): `type`, `code` and `mtu` (next-hop MTU of "fragmentation
 * needed", 0 if none) of the message; the quoted datagram's addresses,
 * ports and sequence number, and its total length. */
struct zbuf_ip__icmp_err {
    uint8_t type, code;
    uint16_t mtu;
    uint32_t src, dst;      /* of the quoted datagram: ours, the peer's */
    uint16_t sport, dport;
    uint32_t seq;           /* TCP: the quoted sequence number */
    uint16_t qlen;          /* the quoted datagram's total length */
};
/* The errno a destination unreachable of `code` stands for. */
ZBUF_IP__HIDDEN int zbuf_ip__unreach_errno(uint8_t code);
/* Returns 0 when the error was used, -ENOENT when it was ignored. */
ZBUF_IP__HIDDEN int zbuf_ip__tcp_icmp_error(zbuf_ip_stack_t *s, const struct zbuf_ip__icmp_err *e);
/* Start a new second of the challenge ACK budget (a random one). */
ZBUF_IP__HIDDEN void zbuf_ip__tcp_challenge_window(zbuf_ip_stack_t *s);
/* Free the out-of-order segments that pin pool buffers (the reserve). */
ZBUF_IP__HIDDEN void zbuf_ip__tcp_prune(zbuf_ip_stack_t *s);

ZBUF_IP__HIDDEN void zbuf_ip__tcp_input(zbuf_ip_stack_t *s, zbuf_t *seg, uint32_t src,
                                        uint32_t dst);
ZBUF_IP__HIDDEN int zbuf_ip__tcp_timers(zbuf_ip_stack_t *s);
/* The end of a receive batch: send the ACKs that waited for it. */
ZBUF_IP__HIDDEN void zbuf_ip__tcp_acks_flush(zbuf_ip_stack_t *s);
ZBUF_IP__HIDDEN uint64_t zbuf_ip__tcp_deadline(const zbuf_ip_stack_t *s);
ZBUF_IP__HIDDEN void zbuf_ip__tcp_free_all(zbuf_ip_stack_t *s);
/* The application gave the connection up but keeps it sending (the socket
 * layer's orphans): bound its zero-window probing like a closed PCB's. */
ZBUF_IP__HIDDEN void zbuf_ip__tcp_set_orphan(zbuf_ip_tcp_t *t);
/* Free PCBs closed while callbacks were running. */
ZBUF_IP__HIDDEN void zbuf_ip__tcp_reap(zbuf_ip_stack_t *s);
/* Initial sequence number of a connection (RFC 6528: keyed hash of the
 * four-tuple plus a 4-microsecond clock). */
ZBUF_IP__HIDDEN int zbuf_ip__tcp_isn(zbuf_ip_stack_t *s, uint32_t laddr, uint16_t lport,
                                     uint32_t raddr, uint16_t rport, uint32_t *isn);

#endif
