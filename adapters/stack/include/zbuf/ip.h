/* SPDX-License-Identifier: MIT */
/**
 * @file zbuf/ip.h
 * @brief A small TCP/IP stack whose only packet buffer is the zbuf.
 *
 * In the spirit of lwIP's raw API: no threads, no sockets; the caller drives
 * everything (frames in, timers, output) from its own event loop and is
 * called back.  What sets it apart is the buffer model:
 *
 * - **Receive.**  A driver loans each received frame to the stack as a zbuf
 *   of its own buffers (usually pool buffers).  The stack cuts the headers
 *   away and hands the payload to the application as segments of those same
 *   buffers.  When the application deletes the zbuf, the buffers go back to
 *   the driver.  No payload byte is copied.
 * - **Send.**  zbuf_ip_tcp_write() takes the application's zbuf by
 *   reference: its segments move into the connection's retransmission queue
 *   and stay there until the peer acknowledges them; only then are they
 *   dropped, and the release callbacks of the application's buffers run.
 *   Each segment handed to the driver is a zbuf_dup() of the queued bytes
 *   behind a small header segment made with zbuf_prepend_space(); the
 *   driver never sees (and so never modifies) the queue itself.
 * - **Checksums** are computed over the segments in place, whatever their
 *   lengths and alignment.
 *
 * **Protocols.** Ethernet II, ARP (cache with aging, whole datagrams
 * queued while resolving, cut into fragments only once resolved), IPv4
 * (options ignored; fragments reassembled within the limits
 * of <zbuf/ip_opts.h>, without copying, and datagrams larger than the MTU
 * sent as fragments with keyed per-destination identifications, RFC
 * 7739; datagrams that fit go with DF and identification 0, RFC 6864;
 * sources no host may have dropped, RFC 1122), ICMP echo (and time
 * exceeded when a reassembly times out; errors received validated as RFC
 * 5927 asks and used for path-MTU discovery, RFC 1191, and reported to
 * UDP PCBs), UDP and
 * TCP: RFC 9293 state machine with simultaneous open and close and
 * TIME_WAIT, RFC 5961 checks on RST, SYN and ACK (challenge ACKs limited
 * per connection and per stack), SYN cookies (RFC 4987), MSS, window scaling and
 * timestamps with PAWS (RFC 7323; timestamp clock offset per connection by
 * a keyed hash), SACK (RFC 2018; blocks generated from the out-of-order
 * queue, a per-segment scoreboard for recovery), loss recovery by RACK-TLP
 * (RFC 8985) with SACK pipe accounting (RFC 6675) and proportional rate
 * reduction (RFC 6937), NewReno (RFC 6582) and limited transmit (RFC 3042)
 * for peers without SACK, RFC 6298 RTO with Karn's rule and backoff,
 * RFC 5681 congestion control with byte counting (RFC 3465), Nagle
 * (zbuf_ip_tcp_set_nodelay()), delayed ACK (one ACK per receive batch of
 * in-order segments, #ZBUF_IP_TCP_ACK_BATCH_SEGS), zero-window probing,
 * keyed-hash initial sequence numbers (RFC 6528, SipHash-2-4).
 *
 * **Time.** Every timer is a deadline in milliseconds of the stack's clock
 * (zbuf_ip_config_t::clock).  Call zbuf_ip_poll() when a driver's descriptor
 * is readable or when zbuf_ip_next_deadline() has passed.
 *
 * **Addresses** are IPv4 addresses in host byte order (build them with
 * #ZBUF_IP_ADDR); ports are in host byte order too.
 *
 * **Errors** follow <zbuf/common.h>: a negative errno value, and a failed
 * call changes nothing (a zbuf the call would have consumed still belongs to
 * the caller).
 *
 * **Threads.** A stack and everything attached to it is used by one thread at
 * a time.  Callbacks run on that thread, inside the stack call that caused
 * them (zbuf_ip_poll(), zbuf_ip_netif_input(), zbuf_ip_tcp_write() ...).  A
 * callback may call any function of the same stack, including
 * zbuf_ip_tcp_abort() or zbuf_ip_tcp_close() on its own connection; it must
 * not delete the stack.
 *
 * Limits (connections, queued bytes, ARP entries, reassembly buffers,
 * receive memory and the driver pool's reserve ...) are set in
 * <zbuf/ip_opts.h>: no peer can make the stack hold more, or go deaf.
 */
#ifndef ZBUF_IP_H
#define ZBUF_IP_H

#include <stdbool.h>
#include <stdint.h>
#include <zbuf/zbuf.h>
#include <zbuf/ip_opts.h>

#ifdef __cplusplus
extern "C" {
#endif

/** An IPv4 address from its four dotted-quad parts, host byte order. */
#define ZBUF_IP_ADDR(a, b, c, d)                                                        \
    (((uint32_t)(a) << 24) | ((uint32_t)(b) << 16) | ((uint32_t)(c) << 8) | (uint32_t)(d))

/** The wildcard address for bind(). */
#define ZBUF_IP_ANY 0u

/** The value zbuf_ip_next_deadline() returns when no timer is running. */
#define ZBUF_IP_NEVER UINT64_MAX

/** An opaque stack instance. */
typedef struct zbuf_ip_stack zbuf_ip_stack_t;
/** An opaque network interface of a stack. */
typedef struct zbuf_ip_netif zbuf_ip_netif_t;
/** An opaque TCP protocol control block (a connection or a listener). */
typedef struct zbuf_ip_tcp zbuf_ip_tcp_t;
/** An opaque UDP protocol control block. */
typedef struct zbuf_ip_udp zbuf_ip_udp_t;

/* ====================================================================== */
/** @name Stack */
/** @{ */

/**
 * @brief The stack's clock: milliseconds from an arbitrary origin, never
 *        going backwards.
 */
typedef uint64_t (*zbuf_ip_clock_cb)(void *arg);

/**
 * @brief Called when an ICMP echo reply arrives for a request sent with
 *        zbuf_ip_ping().
 *
 * @param data  the echoed payload (consumed: the callee deletes it).
 */
typedef void (*zbuf_ip_ping_cb)(void *arg, uint32_t from, uint16_t id, uint16_t seq,
                                zbuf_t *data);

/** Run-time configuration of a stack; fill it with zbuf_ip_config_init(). */
typedef struct zbuf_ip_config {
    zbuf_ip_clock_cb clock;    /**< NULL: CLOCK_MONOTONIC in milliseconds */
    void *clock_arg;           /**< passed to @c clock */
    uint8_t isn_key[16];       /**< key of the initial-sequence-number hash */
    bool isn_key_set;          /**< false: the key is drawn from getrandom() */
    uint32_t tcp_snd_buf;      /**< send buffer per connection, bytes
                                    (up to #ZBUF_IP_TCP_SND_BUF_MAX) */
    uint32_t tcp_rcv_buf;      /**< receive window per connection, bytes
                                    (up to #ZBUF_IP_TCP_RCV_BUF_MAX) */
    uint32_t tcp_rto_min_ms;   /**< lower bound of the RTO */
    uint32_t tcp_time_wait_ms; /**< TIME_WAIT duration */
    uint32_t tcp_delack_ms;    /**< delayed-ACK timeout (1..499) */
    bool skip_rx_checksum;     /**< accept packets without verifying checksums
                                    (fuzzing harnesses only) */
    zbuf_ip_ping_cb ping_reply; /**< echo replies; NULL drops them */
    void *ping_arg;            /**< passed to @c ping_reply */
    bool ip_reassembly;        /**< reassemble IPv4 fragments (default true);
                                    false drops every fragment */
    uint32_t ip_reasm_bytes;   /**< bytes all reassemblies may hold
                                    (1..#ZBUF_IP_REASM_BYTES) */
    uint32_t ip_reasm_timeout_ms; /**< lifetime of an incomplete datagram
                                    (1..120000) */
    bool tcp_no_timestamps;    /**< true: TCP neither offers nor accepts timestamps
                                    (RFC 7323); the default (false) negotiates them */
    uint32_t tcp_rcv_mem;      /**< receive memory per connection, bytes as charged
                                    (tcp_rcv_buf..1 GiB; 0, the default: #ZBUF_IP_TCP_RCV_MEM_MULT
                                    times tcp_rcv_buf) */
    bool tcp_no_syncookies;    /**< true: a SYN that finds the backlog full is dropped
                                    instead of answered with a SYN cookie */
} zbuf_ip_config_t;

/** @brief Fill @p cfg with the defaults of <zbuf/ip_opts.h>. */
ZBUF_EXPORT void zbuf_ip_config_init(zbuf_ip_config_t *cfg);

/**
 * @brief Create a stack.
 * @param cfg  borrowed for the call; NULL means the defaults.
 * @param[out] out  receives the stack; delete it with zbuf_ip_stack_delete().
 * @return 0; `-EINVAL` (a value out of range); `-ENOMEM`.
 */
ZBUF_EXPORT int zbuf_ip_stack_create(const zbuf_ip_config_t *cfg, zbuf_ip_stack_t **out);

/**
 * @brief Delete a stack: every connection is dropped without sending
 *        anything and without callbacks, every interface removed (drivers'
 *        detach callbacks run), every queued zbuf deleted (so release
 *        callbacks of unacknowledged data run now).  NULL is a no-op.
 */
ZBUF_EXPORT void zbuf_ip_stack_delete(zbuf_ip_stack_t *s);

/** @brief The stack's clock now, milliseconds. */
ZBUF_EXPORT uint64_t zbuf_ip_now(const zbuf_ip_stack_t *s);

/**
 * @brief Do the stack's pending work: ask every driver for up to
 *        #ZBUF_IP_POLL_BUDGET received frames, run expired timers, send what
 *        connections have ready.
 *
 * @return the number of frames and timer events handled (0: nothing was
 *         due); `-EINVAL` for NULL.
 */
ZBUF_EXPORT int zbuf_ip_poll(zbuf_ip_stack_t *s);

/**
 * @brief The earliest clock value at which zbuf_ip_poll() has timer work
 *        (stack timers and the drivers' own deadlines), or #ZBUF_IP_NEVER.
 *
 * A driver with a descriptor (zbuf_ip_tap_fd()) also needs a poll when the
 * descriptor becomes readable.
 */
ZBUF_EXPORT uint64_t zbuf_ip_next_deadline(const zbuf_ip_stack_t *s);

/** Counters of one stack (all since creation, except the two gauges). */
typedef struct zbuf_ip_stats {
    uint64_t rx_frames;            /**< frames handed in by drivers */
    uint64_t rx_bytes;             /**< bytes of those frames */
    uint64_t tx_frames;            /**< frames handed to drivers */
    uint64_t tx_bytes;             /**< bytes of those frames */
    uint64_t rx_drops;             /**< received frames dropped, for any reason */
    uint64_t bad_eth;              /**< malformed Ethernet frames */
    uint64_t bad_arp;              /**< malformed or suspicious ARP packets */
    uint64_t bad_ip;               /**< malformed IPv4 headers, bad source addresses */
    uint64_t bad_icmp;             /**< malformed ICMP messages */
    uint64_t bad_udp;              /**< malformed UDP headers */
    uint64_t bad_tcp;              /**< malformed TCP headers */
    uint64_t bad_checksum;         /**< any checksum mismatch */
    uint64_t ip_frag_drops;        /**< fragments dropped: malformed, duplicate,
                                        reassembly off, or discarded with their
                                        datagram (overlap, limit, timeout) */
    uint64_t ip_not_ours;          /**< packets for other hosts */
    uint64_t arp_requests_tx;      /**< ARP requests sent */
    uint64_t arp_replies_tx;       /**< ARP replies sent */
    uint64_t arp_queue_drops;      /**< datagrams dropped waiting for ARP (no entry free,
                                        queue full by count or bytes, no answer); a
                                        datagram queued whole counts once, however
                                        many fragments it would have made */
    uint64_t icmp_echo_rx;         /**< echo requests received */
    uint64_t icmp_echo_tx;         /**< echo replies sent */
    uint64_t udp_rx;               /**< datagrams delivered */
    uint64_t udp_tx;               /**< datagrams sent */
    uint64_t udp_no_port;          /**< datagrams for a port nobody has */
    uint64_t tcp_rx_segs;          /**< TCP segments received (valid headers) */
    uint64_t tcp_tx_segs;          /**< TCP segments sent (a packet carrying a run of them,
                                        on a link with #ZBUF_IP_DRV_TSO, counts each) */
    uint64_t tcp_rx_payload;       /**< in-order payload bytes delivered */
    uint64_t tcp_tx_payload;       /**< payload bytes sent, retransmissions included */
    uint64_t tcp_retransmits;      /**< segments sent again (any reason) */
    uint64_t tcp_rto;              /**< retransmission timeouts */
    uint64_t tcp_fast_retransmits; /**< fast recoveries entered (duplicate ACKs or SACK) */
    uint64_t tcp_ooo_queued;       /**< segments put in an out-of-order queue */
    uint64_t tcp_ooo_drops;        /**< out-of-order segments refused (limits) */
    uint64_t tcp_rst_rx;           /**< RSTs received in the window */
    uint64_t tcp_rst_tx;           /**< RSTs sent */
    uint64_t tcp_challenge_acks;   /**< RFC 5961 challenge ACKs sent */
    uint64_t tcp_window_probes;    /**< zero-window probes sent */
    uint64_t tcp_keepalive_probes; /**< keepalive probes sent */
    uint64_t tcp_accepts;          /**< connections established through a listener */
    uint64_t tcp_connects;         /**< active opens started */
    uint64_t tcp_pcb_limit;        /**< connections refused for lack of PCBs */
    uint64_t udp_payload_rx;       /**< UDP payload bytes received */
    uint64_t udp_payload_tx;       /**< UDP payload bytes sent */
    uint32_t tcp_pcbs;             /**< TCP PCBs alive now (a gauge) */
    uint32_t udp_pcbs;             /**< UDP PCBs alive now (a gauge) */
    uint64_t ip_frags_rx;          /**< IPv4 fragments received for us (valid headers) */
    uint64_t ip_reassembled;       /**< datagrams reassembled and passed up */
    uint64_t ip_reasm_timeouts;    /**< incomplete datagrams freed on timeout */
    uint64_t ip_reasm_overlaps;    /**< datagrams discarded: overlapping or
                                        inconsistent fragments */
    uint64_t ip_reasm_oversize;    /**< datagrams discarded: end beyond 65535 bytes */
    uint64_t ip_reasm_drops;       /**< datagrams discarded for limits (evicted,
                                        too many fragments, byte budget) */
    uint64_t ip_frags_tx;          /**< fragments sent (datagrams above the MTU) */
    uint32_t ip_reasm_pending;     /**< datagrams being reassembled now (a gauge) */
    uint32_t ip_reasm_held;        /**< bytes they hold, as charged (a gauge) */
    uint64_t tcp_rack_losses;      /**< segments RACK (RFC 8985) deemed lost */
    uint64_t tcp_lost_retransmits; /**< retransmissions deemed lost in turn (sent again
                                        without waiting for a timeout) */
    uint64_t tcp_tlp;              /**< tail loss probes sent (RFC 8985 section 7) */
    uint64_t tcp_paws_drops;       /**< segments dropped by PAWS (RFC 7323: old timestamp) */
    uint64_t tcp_paws_acks_limited; /**< ACKs to PAWS-dropped segments not sent: the
                                         per-connection limit
                                         (#ZBUF_IP_TCP_INVALID_RATELIMIT_MS) held them */
    uint64_t tcp_dsack_rx;         /**< D-SACK blocks received (RFC 2883: the peer got
                                        bytes twice) */
    uint64_t tcp_dsack_tx;         /**< D-SACK blocks sent: duplicate segments reported */
    uint64_t tcp_spurious_undo;    /**< congestion window reductions undone because
                                        D-SACKs proved every retransmission spurious */
    uint64_t tcp_tw_recycled;      /**< TIME_WAIT connections ended by a new SYN
                                        (RFC 6191) */
    uint64_t tcp_spurious_rto;     /**< retransmission timeouts found spurious and undone
                                        (cwnd and ssthresh restored, no go-back-N): by
                                        Eifel (RFC 3522), F-RTO or D-SACK; see the next two */
    uint64_t tcp_spurious_rto_frto; /**< of tcp_spurious_rto: found by F-RTO (RFC 5682,
                                         connections without timestamps) */
    uint64_t tcp_spurious_rto_dsack; /**< of tcp_spurious_rto: found late, by D-SACKs of
                                          every retransmission after the timeout
                                          (RFC 3708); also counted in tcp_spurious_undo */
    uint64_t arp_queue_held;       /**< bytes the datagrams waiting for ARP hold now, as
                                        charged against #ZBUF_IP_ARP_QUEUE_TOTAL_BYTES
                                        (a gauge) */
    uint64_t rx_no_buffer;         /**< frames drivers read and dropped because their
                                        pool was empty (zbuf_ip_netif_rx_nobuf()) */
    uint64_t rx_collapses;         /**< received payloads copied into compact buffers
                                        (pool pressure or a connection's memory limit) */
    uint64_t rx_collapsed_bytes;   /**< bytes those copies moved (also in
                                        zbuf_stats_t::bytes_copied) */
    uint64_t rx_pressure_drops;    /**< payloads dropped to keep the pool's reserve
                                        (out-of-order segments, fragments) */
    uint64_t rx_pressure_prunes;   /**< times the reserve was reached and the queues
                                        pinning pool buffers were pruned */
    uint64_t tcp_ooo_pruned;       /**< out-of-order segments pruned (pool reserve, or a
                                        connection's memory limit) */
    uint64_t tcp_rcv_mem_drops;    /**< segments dropped because a connection's receive
                                        memory was full (#ZBUF_IP_TCP_RCV_MEM_MULT) */
    uint64_t tcp_rcv_mem_held;     /**< receive memory all connections hold now, as
                                        charged (a gauge) */
    uint64_t ip_bad_source;        /**< datagrams dropped silently for their source
                                        address (RFC 1122: broadcast, multicast, class
                                        E, loopback, this network, one of ours) */
    uint64_t ip_l2_bcast_drops;    /**< unicast datagrams received in link-layer
                                        broadcast frames, dropped (RFC 1122 3.3.6) */
    uint64_t udp_bcast_drops;      /**< datagrams to a broadcast address for a UDP PCB
                                        that did not ask for them
                                        (zbuf_ip_udp_set_broadcast()) */
    uint64_t arp_pending_evicted;  /**< pending ARP entries evicted by newer ones */
    uint64_t arp_not_cached;       /**< addresses resolved but not cached: every entry
                                        was in use */
    uint64_t arp_requests_limited; /**< ARP requests held back by
                                        #ZBUF_IP_ARP_REQUESTS_PER_SEC */
    uint64_t icmp_errors_rx;       /**< ICMP error messages received (destination
                                        unreachable, time exceeded ...) */
    uint64_t icmp_errors_ignored;  /**< of those, ignored: malformed quote, not about
                                        something we sent, sequence number outside the
                                        connection's flight (RFC 5927) */
    uint64_t tcp_pmtu_reductions;  /**< path MTU lowered by "fragmentation needed" */
    uint64_t tcp_icmp_aborts;      /**< connections ended by an ICMP error (a hard error
                                        while connecting, or a half-open connection) */
    uint64_t udp_icmp_errors;      /**< ICMP errors passed to a UDP PCB's error callback */
    uint64_t tcp_syncookies_sent;  /**< SYN-ACKs with a SYN cookie (no state kept) */
    uint64_t tcp_syncookies_ok;    /**< connections made from a valid cookie */
    uint64_t tcp_syncookies_failed; /**< ACKs to a listener with a cookie that did not
                                         check out (answered with a RST) */
    uint64_t tcp_half_open_drops;  /**< half-open connections dropped early (pressure
                                        retries, PCB recycling, ICMP errors) */
    uint64_t tcp_challenge_acks_limited; /**< challenge ACKs not sent: the per-connection
                                              or the stack's limit */
    uint64_t tcp_oow_acks_limited; /**< ACKs to out-of-window segments without payload
                                        not sent: the per-connection limit */
} zbuf_ip_stats_t;

/** @brief Copy the stack's counters into @p out. */
ZBUF_EXPORT void zbuf_ip_stats(const zbuf_ip_stack_t *s, zbuf_ip_stats_t *out);

/** @} */
/* ====================================================================== */
/** @name Interfaces and the driver contract */
/** @{ */

/**
 * @brief What a driver provides.
 *
 * **Transmit.** `transmit(ctx, frame)` receives a complete Ethernet frame
 * and consumes it: the driver sends it by gather (zbuf_iovec() + writev, or
 * the DMA descriptors of a NIC) and deletes it once the bytes are gone.  It
 * must not write into the frame: its payload segments are shared with the
 * retransmission queue.  It returns 0 or a negative errno (the frame is
 * consumed in both cases; an error only counts a drop).
 *
 * **Receive.** `poll(ctx, budget)` hands at most @p budget received frames
 * to zbuf_ip_netif_input() and returns how many frames it took from the
 * device.  A frame is a zbuf whose buffers the driver loans: it gets them
 * back when the last zbuf that references them is deleted (pool buffers
 * return to their pool).  A driver may also call zbuf_ip_netif_input()
 * from elsewhere on the stack's thread.
 *
 * **Receive pool.** A driver that reads into a pool names it in @c rx_pool:
 * the stack then keeps the pool from running dry (it copies into compact
 * buffers, or drops, what it would otherwise hold once few buffers are
 * left; see <zbuf/ip_opts.h>, "Receive pool pressure").  Each frame may take
 * at most one buffer of that pool (the stack reads the pool's level only
 * as often as that allows it to be sure of it).  Whatever the
 * stack does, a driver must never stop reading because its pool is empty:
 * it goes on taking frames from the device, up to the budget, into a
 * scratch buffer of its own, drops them and reports them with
 * zbuf_ip_netif_rx_nobuf().  A device left unread fills its queue and the
 * stack goes deaf even to the frames that would free buffers (ACKs) or
 * that the reserve exists for (ARP, ICMP, new connections).
 *
 * `next_deadline(ctx)` (optional) returns when the driver next needs a poll
 * without an external event (#ZBUF_IP_NEVER if not).  `detach(ctx)`
 * (optional) runs once when the interface is removed.
 */
typedef struct zbuf_ip_driver {
    int (*transmit)(void *ctx, zbuf_t *frame);      /**< consumes @p frame */
    int (*poll)(void *ctx, unsigned budget);        /**< optional */
    uint64_t (*next_deadline)(void *ctx);           /**< optional */
    void (*detach)(void *ctx);                      /**< optional */
    unsigned flags;                                 /**< ZBUF_IP_DRV_* */
    zbuf_pool_t *rx_pool;                           /**< optional: the pool received
                                                         frames are read into (borrowed;
                                                         it must outlive the interface) */
} zbuf_ip_driver_t;

/**
 * Driver flag: the link carries TCP and UDP checksums for us, like Linux's
 * loopback or a NIC with checksum offload between two such NICs.  Frames
 * received on it are not verified and TCP/UDP segments sent on it carry no
 * computed checksum (the IPv4 header checksum is always computed).  Only for
 * links whose both ends set it.
 */
#define ZBUF_IP_DRV_CSUM_OFFLOAD 0x1u

/**
 * Driver flag: segmentation offload, as Linux's loopback does it with TSO
 * on one end and GRO on the other.  TCP may hand this interface one IP
 * packet of up to 65535 bytes carrying a run of full-sized segments (the
 * connection's MSS, which the MTU still sets) in place of the run itself,
 * and the link delivers it to the other end as it is: a receiving stack
 * takes such a packet as one segment, whatever its MTU.  Only for links
 * whose both ends set it.  The sender keeps one retransmission record per
 * segment, so SACK, RACK, the congestion window and zbuf_ip_stats_t's
 * segment counts see the same segments as without offload, and what is
 * resent after a loss goes a segment at a time; what is saved is the
 * per-packet work (headers, checksum set-up, the driver, IP and TCP input,
 * the ACKs) on both ends.
 */
#define ZBUF_IP_DRV_TSO 0x2u

/** Addressing of one interface. */
typedef struct zbuf_ip_netif_config {
    uint8_t mac[6];     /**< Ethernet address */
    uint32_t addr;      /**< IPv4 address */
    uint8_t prefix_len; /**< netmask length, 0..32 */
    uint32_t gateway;   /**< next hop off the subnet, or 0 for none */
    uint16_t mtu;       /**< IP MTU; 0 means 1500 */
} zbuf_ip_netif_config_t;

/**
 * @brief Attach an interface to a stack.
 * @param drv  copied; @c transmit is required.
 * @param ctx  the driver's context, passed to each driver function.
 * @param[out] out  receives the interface (owned by the stack).
 * @return 0; `-EINVAL`; `-ENOSPC` (#ZBUF_IP_MAX_NETIFS reached); `-ENOMEM`.
 */
ZBUF_EXPORT int zbuf_ip_netif_add(zbuf_ip_stack_t *s, const zbuf_ip_netif_config_t *cfg,
                                  const zbuf_ip_driver_t *drv, void *ctx,
                                  zbuf_ip_netif_t **out);

/**
 * @brief Remove an interface: its ARP entries, queued packets and fragments
 *        go, the driver's detach callback runs.  NULL is a no-op.
 *
 * Safe from any callback of the stack, including one running inside this
 * very driver's poll() (a receive callback fed by it): the interface stops
 * taking and sending frames at once, and the detach callback is deferred
 * until that poll() has returned, so the driver never loses its context
 * while still running.
 */
ZBUF_EXPORT void zbuf_ip_netif_remove(zbuf_ip_netif_t *nif);

/**
 * @brief Walk a stack's interfaces: the first one for @p prev NULL, else
 *        the one after @p prev; NULL after the last.
 *
 * For integrations that must find every interface (the libuv one watches
 * each TAP descriptor).  Removing the interface returned ends the walk's
 * validity for it: take the next one first.
 */
ZBUF_EXPORT zbuf_ip_netif_t *zbuf_ip_netif_next(zbuf_ip_stack_t *s, zbuf_ip_netif_t *prev);

/**
 * @brief Hand a received Ethernet frame to the stack (for drivers).
 * @param frame  consumed, in every case.
 * @return 0 when the frame was taken up; a negative errno saying why it was
 *         dropped (`-EBADMSG` malformed, `-EPROTO` checksum, `-ENOENT`
 *         nobody listens ...) — for tests; drivers may ignore it.
 */
ZBUF_EXPORT int zbuf_ip_netif_input(zbuf_ip_netif_t *nif, zbuf_t *frame);

/**
 * @brief Report @p frames frames a driver read from its device and dropped
 *        because its pool had no buffer (for drivers; see
 *        #zbuf_ip_driver_t).  Counted in zbuf_ip_stats_t::rx_no_buffer and
 *        rx_drops.  NULL is a no-op.
 */
ZBUF_EXPORT void zbuf_ip_netif_rx_nobuf(zbuf_ip_netif_t *nif, unsigned frames);

/** @brief The stack an interface belongs to. */
ZBUF_EXPORT zbuf_ip_stack_t *zbuf_ip_netif_stack(const zbuf_ip_netif_t *nif);

/** @brief The IPv4 address of an interface. */
ZBUF_EXPORT uint32_t zbuf_ip_netif_addr(const zbuf_ip_netif_t *nif);

/**
 * @brief Send an ICMP echo request; the reply goes to
 *        zbuf_ip_config_t::ping_reply.
 * @param data  payload (may be NULL for none); consumed unless the call
 *              returns `-EINVAL` or `-ENETUNREACH` (then nothing was sent and
 *              the caller keeps it).  Once accepted, a packet that cannot be
 *              sent (no memory, ARP queue full) is dropped like on a lossy
 *              network.
 * @return 0; `-EINVAL`; `-ENETUNREACH`; `-ENOMEM` (only with NULL @p data).
 */
ZBUF_EXPORT int zbuf_ip_ping(zbuf_ip_stack_t *s, uint32_t dst, uint16_t id, uint16_t seq,
                             zbuf_t *data);

/** @} */
/* ====================================================================== */
/** @name In-memory link (for tests and benchmarks) */
/** @{ */

/** An opaque point-to-point Ethernet link between two interfaces. */
typedef struct zbuf_ip_link zbuf_ip_link_t;

/** Impairments and mode of an in-memory link. */
typedef struct zbuf_ip_link_config {
    double loss;          /**< probability a frame is dropped, 0..1 */
    double dup;           /**< probability a frame is delivered twice */
    double reorder;       /**< probability a frame is held back behind the next ones */
    uint32_t delay_ms;    /**< one-way delay */
    uint32_t reorder_ms;  /**< extra delay of a frame held back */
    uint64_t seed;        /**< of the impairment random numbers */
    uint32_t queue_max;   /**< frames in flight per direction; more are dropped (0: 4096) */
    bool copy_to_pool;    /**< emulate a NIC: "DMA" every frame into a pool buffer of the
                               receiving side (a copy made by the emulated hardware, counted in
                               zbuf_ip_link_stats_t::dma_bytes, not in zbuf_stats_get()); false:
                               the receiving stack gets the very segments sent (zero copy).
                               Pool buffers hold 2048 bytes: larger frames are dropped (use
                               an MTU of 2000 or less in this mode) */
    uint32_t pool_bufs;   /**< with @c copy_to_pool: buffers per side (0: 1024) */
    bool csum_offload;    /**< both interfaces get #ZBUF_IP_DRV_CSUM_OFFLOAD */
    bool tso;             /**< both interfaces get #ZBUF_IP_DRV_TSO (not with
                               @c copy_to_pool, whose buffers hold 2048 bytes:
                               zbuf_ip_link_create() says `-EINVAL`) */
} zbuf_ip_link_config_t;

/** Counters of one link. */
typedef struct zbuf_ip_link_stats {
    uint64_t frames;     /**< frames handed to the link */
    uint64_t delivered;  /**< frames delivered (duplicates included) */
    uint64_t lost;       /**< frames dropped by the loss setting */
    uint64_t duplicated; /**< frames delivered twice */
    uint64_t reordered;  /**< frames held back */
    uint64_t overflow;   /**< frames dropped: queue full */
    uint64_t no_buffer;  /**< frames dropped: receiver's pool empty (copy_to_pool) */
    uint64_t dma_bytes;  /**< bytes the emulated NIC copied (copy_to_pool) */
} zbuf_ip_link_stats_t;

/**
 * @brief Create a link.  Attach one interface to each side with
 *        zbuf_ip_link_attach().
 * @param cfg  borrowed; NULL means a perfect link.
 * @return 0; `-EINVAL`; `-ENOMEM`.
 */
ZBUF_EXPORT int zbuf_ip_link_create(const zbuf_ip_link_config_t *cfg, zbuf_ip_link_t **out);

/**
 * @brief Attach side @p side (0 or 1) of @p l to stack @p s as a new
 *        interface.  Frames are delivered when the receiving stack polls.
 * @return 0; `-EINVAL`; `-EBUSY` (side taken); the errors of
 *         zbuf_ip_netif_add().
 */
ZBUF_EXPORT int zbuf_ip_link_attach(zbuf_ip_link_t *l, int side, zbuf_ip_stack_t *s,
                                    const zbuf_ip_netif_config_t *cfg, zbuf_ip_netif_t **out);

/** @brief Change the impairments of a running link (mode and pool stay). */
ZBUF_EXPORT void zbuf_ip_link_set_impairments(zbuf_ip_link_t *l, double loss, double dup,
                                              double reorder);

/** @brief Copy the link's counters. */
ZBUF_EXPORT void zbuf_ip_link_stats(const zbuf_ip_link_t *l, zbuf_ip_link_stats_t *out);

/**
 * @brief Watches the frames a link carries, like a capture on the wire.
 * @param side   the side that sent the frame (0 or 1).
 * @param frame  borrowed for the call; read it (zbuf_copyout(), zbuf_peek()),
 *               do not change or keep it.
 *
 * Runs on the sending stack's thread, inside that stack's call that sent the
 * frame, before impairments; it must not call into either stack.
 */
typedef void (*zbuf_ip_link_monitor_cb)(void *arg, int side, const zbuf_t *frame);

/** @brief Set the link's monitor (NULL: none). */
ZBUF_EXPORT void zbuf_ip_link_set_monitor(zbuf_ip_link_t *l, zbuf_ip_link_monitor_cb cb,
                                          void *arg);

/**
 * @brief Put a frame on the link as if side @p side had sent it: a third
 *        station on the segment (tests use it to play an attacker that
 *        forges addresses).  The frame meets the link's impairments and,
 *        in copy_to_pool mode, the receiving side's pool like any other.
 * @param frame  consumed in every case.
 * @return 0; `-EINVAL` (bad side, NULL); `-ENOTCONN` (the other side has no
 *         interface); `-ENOBUFS` (the queue is full).
 */
ZBUF_EXPORT int zbuf_ip_link_inject(zbuf_ip_link_t *l, int side, zbuf_t *frame);

/** @brief Delete a link: removes the attached interfaces and deletes the
 *         frames in flight.  NULL is a no-op. */
ZBUF_EXPORT void zbuf_ip_link_delete(zbuf_ip_link_t *l);

/** @} */
/* ====================================================================== */
/** @name Linux TAP driver */
/** @{ */

/**
 * @brief Open (creating if needed) the TAP interface @p name
 *        (IFF_TAP|IFF_NO_PI, non-blocking) and attach it to @p s.
 *
 * Frames are read into buffers of a pool of @p pool_bufs buffers (0: 1024)
 * and written with writev() straight from the zbuf's segments.
 * The kernel side of the interface is not configured here (bring it up and
 * address it with `ip`).
 *
 * @return 0; `-EINVAL`; the errno of open()/ioctl() (`-ENOENT` without
 *         /dev/net/tun, `-EPERM` without CAP_NET_ADMIN); `-ENOMEM`.
 */
ZBUF_EXPORT int zbuf_ip_tap_open(zbuf_ip_stack_t *s, const char *name,
                                 const zbuf_ip_netif_config_t *cfg, unsigned pool_bufs,
                                 zbuf_ip_netif_t **out);

/** @brief The TAP descriptor of an interface made by zbuf_ip_tap_open(), to
 *         wait for readability; -1 for another interface. */
ZBUF_EXPORT int zbuf_ip_tap_fd(const zbuf_ip_netif_t *nif);

/**
 * @brief Drop frames at random on a TAP interface, for tests where the
 *        kernel has no `tc netem`: received frames are discarded with
 *        probability @p rx_loss before the stack sees them (the kernel's
 *        segments are lost), frames to send with @p tx_loss.
 * @return 0; `-EINVAL` (not a TAP interface, or a probability outside 0..1).
 */
ZBUF_EXPORT int zbuf_ip_tap_set_loss(zbuf_ip_netif_t *nif, double rx_loss, double tx_loss,
                                     uint64_t seed);

/** @} */
/* ====================================================================== */
/** @name UDP */
/** @{ */

/**
 * @brief Receive callback of a UDP PCB.
 * @param data  the datagram's payload as segments of the driver's buffers
 *              (consumed: the callee deletes it, which returns them).
 */
typedef void (*zbuf_ip_udp_recv_cb)(void *arg, zbuf_ip_udp_t *pcb, zbuf_t *data,
                                    uint32_t src, uint16_t sport);

/** @brief New UDP PCB.  @return 0; `-EINVAL`; `-ENOSPC` (limit); `-ENOMEM`. */
ZBUF_EXPORT int zbuf_ip_udp_new(zbuf_ip_stack_t *s, zbuf_ip_udp_t **out);

/** @brief Bind to a local address (or #ZBUF_IP_ANY) and port (0: an
 *         ephemeral one).  @return 0; `-EINVAL`; `-EADDRINUSE`. */
ZBUF_EXPORT int zbuf_ip_udp_bind(zbuf_ip_udp_t *u, uint32_t addr, uint16_t port);

/** @brief Set the receive callback (NULL drops datagrams). */
ZBUF_EXPORT void zbuf_ip_udp_set_recv(zbuf_ip_udp_t *u, zbuf_ip_udp_recv_cb cb, void *arg);

/**
 * @brief Error callback of a UDP PCB: an ICMP destination unreachable
 *        message quoted a datagram this PCB sent to @p dst : @p dport.
 * @param err  `-ECONNREFUSED` (port unreachable), `-ENOPROTOOPT` (protocol
 *             unreachable), `-EHOSTUNREACH`, `-ENETUNREACH`, `-EMSGSIZE`
 *             (fragmentation needed).
 *
 * Runs on the stack's thread inside zbuf_ip_poll() (or whichever call fed
 * the ICMP message in).  The PCB stays usable.
 */
typedef void (*zbuf_ip_udp_error_cb)(void *arg, zbuf_ip_udp_t *pcb, int err, uint32_t dst,
                                     uint16_t dport);

/**
 * @brief Set the error callback (NULL: errors are ignored, the default).
 *
 * Only messages about one of the last four destinations this PCB sent to
 * are passed on (RFC 5927: an error must quote something we sent); the
 * others are counted in zbuf_ip_stats_t::icmp_errors_ignored.
 */
ZBUF_EXPORT void zbuf_ip_udp_set_error(zbuf_ip_udp_t *u, zbuf_ip_udp_error_cb cb, void *arg);

/**
 * @brief Let the PCB receive datagrams sent to a broadcast address (the
 *        limited broadcast or its interface's directed broadcast) and send
 *        to one, like SO_BROADCAST.  Off by default: such datagrams are
 *        dropped (zbuf_ip_stats_t::udp_bcast_drops), so that a service
 *        never answers a broadcast unless it asked to (RFC 1122 3.2.2 and
 *        the "fraggle" amplification), and zbuf_ip_udp_sendto() to a
 *        broadcast address fails with `-EACCES`.
 */
ZBUF_EXPORT void zbuf_ip_udp_set_broadcast(zbuf_ip_udp_t *u, bool on);

/**
 * @brief Send one datagram.  The payload is not copied: headers go in front
 *        of it (into its headroom or a small new segment).
 * @param data  consumed on success; on failure the caller keeps it unchanged.
 *        A datagram larger than the interface's MTU is sent as IPv4
 *        fragments, each a zbuf_dup() of its range behind its own header.
 * @return 0; `-EINVAL`; `-EMSGSIZE` (payload above 65507 bytes, the IPv4
 *         limit); `-ENETUNREACH`; `-EACCES` (a broadcast address without
 *         zbuf_ip_udp_set_broadcast()); `-ENOMEM`.
 */
ZBUF_EXPORT int zbuf_ip_udp_sendto(zbuf_ip_udp_t *u, zbuf_t *data, uint32_t dst,
                                   uint16_t dport);

/** @brief Delete a UDP PCB.  NULL is a no-op. */
ZBUF_EXPORT void zbuf_ip_udp_delete(zbuf_ip_udp_t *u);

/** @} */
/* ====================================================================== */
/** @name TCP */
/** @{ */

/** Connection states (RFC 9293). */
typedef enum zbuf_ip_tcp_state {
    ZBUF_IP_TCP_CLOSED = 0,  /**< no connection (new, or ended and not yet closed by the app) */
    ZBUF_IP_TCP_LISTEN,      /**< a listener */
    ZBUF_IP_TCP_SYN_SENT,    /**< active open, our SYN sent */
    ZBUF_IP_TCP_SYN_RCVD,    /**< SYN received, our SYN-ACK sent */
    ZBUF_IP_TCP_ESTABLISHED, /**< data flows both ways */
    ZBUF_IP_TCP_FIN_WAIT_1,  /**< we shut down; our FIN not yet acknowledged */
    ZBUF_IP_TCP_FIN_WAIT_2,  /**< our FIN acknowledged; waiting for the peer's */
    ZBUF_IP_TCP_CLOSE_WAIT,  /**< the peer shut down; we may still send */
    ZBUF_IP_TCP_CLOSING,     /**< both shut down at once; our FIN not yet acknowledged */
    ZBUF_IP_TCP_LAST_ACK,    /**< the peer shut down first, then we; waiting for the last ACK */
    ZBUF_IP_TCP_TIME_WAIT,   /**< both done; 2 MSL of waiting for stray segments */
} zbuf_ip_tcp_state_t;

/**
 * @brief Callbacks of a TCP PCB.  Each may be NULL.  All get the @c arg
 *        given to zbuf_ip_tcp_set_callbacks().
 */
typedef struct zbuf_ip_tcp_callbacks {
    /** A listener got a new connection (ESTABLISHED).  Set its callbacks here.
     *  Return 0 to keep it, or a negative errno to have it reset.
     *  Without an accept callback, connections are reset. */
    int (*accept)(void *arg, zbuf_ip_tcp_t *listener, zbuf_ip_tcp_t *conn);
    /** An active open completed. */
    void (*connected)(void *arg, zbuf_ip_tcp_t *pcb);
    /** In-order payload arrived: @p data is consumed by the callee (its
     *  segments are the driver's buffers; deleting it returns them).
     *  @p data NULL means the peer closed its direction (FIN).  Received
     *  bytes keep the window closed until zbuf_ip_tcp_recved() is called. */
    void (*recv)(void *arg, zbuf_ip_tcp_t *pcb, zbuf_t *data);
    /** The peer acknowledged @p acked more bytes: they left the queue and the
     *  release callbacks of buffers nobody else holds have run. */
    void (*sent)(void *arg, zbuf_ip_tcp_t *pcb, size_t acked);
    /** The connection is gone (reset, timed out, refused): the PCB is freed
     *  already and must not be used.  Not called after zbuf_ip_tcp_abort()
     *  or for a PCB closed with zbuf_ip_tcp_close(). */
    void (*error)(void *arg, int err);
} zbuf_ip_tcp_callbacks_t;

/** @brief New TCP PCB (CLOSED).  @return 0; `-EINVAL`; `-ENOSPC`; `-ENOMEM`. */
ZBUF_EXPORT int zbuf_ip_tcp_new(zbuf_ip_stack_t *s, zbuf_ip_tcp_t **out);

/** @brief Set the callbacks (copied) and their argument. */
ZBUF_EXPORT void zbuf_ip_tcp_set_callbacks(zbuf_ip_tcp_t *t, const zbuf_ip_tcp_callbacks_t *cbs,
                                           void *arg);

/** @brief Bind a CLOSED PCB to a local address and port (0: ephemeral).
 *  @return 0; `-EINVAL`; `-EADDRINUSE`. */
ZBUF_EXPORT int zbuf_ip_tcp_bind(zbuf_ip_tcp_t *t, uint32_t addr, uint16_t port);

/** @brief Listen on a bound PCB.  @p backlog is clamped to
 *         1..#ZBUF_IP_TCP_BACKLOG_MAX.  @return 0; `-EINVAL`. */
ZBUF_EXPORT int zbuf_ip_tcp_listen(zbuf_ip_tcp_t *t, unsigned backlog);

/**
 * @brief Start an active open.  The connected callback reports success, the
 *        error callback failure (`-ECONNREFUSED`, `-ETIMEDOUT`).
 * @return 0; `-EINVAL` (not CLOSED); `-ENETUNREACH`; `-EADDRINUSE`.
 */
ZBUF_EXPORT int zbuf_ip_tcp_connect(zbuf_ip_tcp_t *t, uint32_t addr, uint16_t port);

/**
 * @brief Queue @p data for sending, by reference.
 *
 * On success @p data is consumed: its segments join the retransmission
 * queue; their buffers are released (release callbacks run) once the peer
 * acknowledged every byte of them.  Until then the caller must not change
 * the bytes.  Segments are sent from the queue by zbuf_ip_tcp_output(),
 * which this calls.
 *
 * @return 0; `-EINVAL` (NULL, empty); `-ENOTCONN` (not yet or no longer able
 *         to send); `-EAGAIN` when @p data does not fit in the free send
 *         buffer (zbuf_ip_tcp_sndbuf()): nothing was queued, the caller keeps
 *         @p data and may split it or wait for the sent callback.
 */
ZBUF_EXPORT int zbuf_ip_tcp_write(zbuf_ip_tcp_t *t, zbuf_t *data);

/** @brief Bytes zbuf_ip_tcp_write() accepts now. */
ZBUF_EXPORT size_t zbuf_ip_tcp_sndbuf(const zbuf_ip_tcp_t *t);

/** @brief Send what the windows allow now (writes call it). */
ZBUF_EXPORT int zbuf_ip_tcp_output(zbuf_ip_tcp_t *t);

/** @brief The application is done with @p n received bytes: reopen the
 *         window by that much (sending a window update when it grew a lot). */
ZBUF_EXPORT void zbuf_ip_tcp_recved(zbuf_ip_tcp_t *t, size_t n);

/** @brief Disable (true) or enable (false, the default) Nagle's algorithm. */
ZBUF_EXPORT void zbuf_ip_tcp_set_nodelay(zbuf_ip_tcp_t *t, bool nodelay);

/**
 * @brief Keepalive (RFC 1122 4.2.3.6; off by default): after @p idle_ms
 *        without a segment from the peer, send a probe every
 *        @p interval_ms; after @p count unanswered probes the connection
 *        fails with `-ETIMEDOUT`.  @p idle_ms 0 turns it off.
 * @return 0; `-EINVAL` (@p interval_ms or @p count 0 with keepalive on).
 */
ZBUF_EXPORT int zbuf_ip_tcp_set_keepalive(zbuf_ip_tcp_t *t, uint32_t idle_ms,
                                          uint32_t interval_ms, unsigned count);

/** @brief Close the sending direction: a FIN follows the queued data.
 *         Receiving continues.  @return 0; `-ENOTCONN`. */
ZBUF_EXPORT int zbuf_ip_tcp_shutdown(zbuf_ip_tcp_t *t);

/**
 * @brief Give the PCB back to the stack: a listener stops at once; a
 *        connection sends its queued data and a FIN, later bytes from the peer
 *        are discarded, and the stack frees it when the close completes.  No
 *        callback runs after this returns.  The caller must not use @p t
 *        again.
 */
ZBUF_EXPORT void zbuf_ip_tcp_close(zbuf_ip_tcp_t *t);

/** @brief Reset the connection (RST) and free the PCB now; no callback runs. */
ZBUF_EXPORT void zbuf_ip_tcp_abort(zbuf_ip_tcp_t *t);

/** @brief Current state. */
ZBUF_EXPORT zbuf_ip_tcp_state_t zbuf_ip_tcp_state(const zbuf_ip_tcp_t *t);

/** @brief Name of a state ("ESTABLISHED" ...). */
ZBUF_EXPORT const char *zbuf_ip_tcp_state_name(zbuf_ip_tcp_state_t st);

/** Snapshot of a connection's variables. */
typedef struct zbuf_ip_tcp_info {
    zbuf_ip_tcp_state_t state; /**< current state */
    uint32_t local_addr;       /**< our address */
    uint32_t remote_addr;      /**< the peer's address */
    uint16_t local_port;       /**< our port */
    uint16_t remote_port;      /**< the peer's port */
    uint16_t mss;              /**< send MSS */
    uint8_t snd_wscale;        /**< shift applied to the peer's window field */
    uint8_t rcv_wscale;        /**< shift applied to ours */
    uint32_t cwnd;             /**< congestion window, bytes */
    uint32_t ssthresh;         /**< slow-start threshold, bytes */
    uint32_t snd_wnd;          /**< the peer's receive window, bytes */
    uint32_t rcv_wnd;          /**< window we advertise now, bytes */
    uint32_t srtt_ms;          /**< smoothed round-trip time */
    uint32_t rto_ms;           /**< retransmission timeout (with backoff) */
    size_t unacked;            /**< bytes in the retransmission queue */
    size_t ooo_bytes;          /**< bytes held out of order */
    uint64_t retransmits;      /**< segments sent again */
    bool ts_ok;                /**< timestamps (RFC 7323) negotiated: every segment but a
                                    RST carries them, and @c mss is 12 bytes smaller */
    bool sack_ok;              /**< SACK (RFC 2018) negotiated */
    uint32_t min_rtt_ms;       /**< smallest round-trip time measured (UINT32_MAX: none) */
    size_t lost_bytes;         /**< bytes deemed lost, not yet acknowledged or SACKed */
    size_t sacked_bytes;       /**< bytes the peer SACKed above the cumulative ACK */
    size_t rcv_mem;            /**< receive memory held, as charged (out-of-order queue
                                    and bytes not yet released with
                                    zbuf_ip_tcp_recved()); see #ZBUF_IP_TCP_RCV_MEM_MULT */
    uint16_t pmtu;             /**< path MTU (the interface's, or lower after ICMP
                                    "fragmentation needed") */
    bool syncookie;            /**< the connection was made from a SYN cookie */
} zbuf_ip_tcp_info_t;

/** @brief Fill @p out.  @return 0; `-EINVAL`. */
ZBUF_EXPORT int zbuf_ip_tcp_info(const zbuf_ip_tcp_t *t, zbuf_ip_tcp_info_t *out);

/** @} */
/* ====================================================================== */
/** @name Socket-like convenience layer (in the spirit of zbufSockLib)
 *
 * A non-blocking, poll-style wrapper over the callback API for code that
 * would rather pull than be called: received payload waits in the socket
 * (still the driver's segments) until zbuf_ip_sock_recv() takes it, which
 * is also what reopens the window; zbuf_ip_sock_send() takes a whole zbuf
 * even when it is larger than the TCP send buffer and feeds it in as the
 * peer acknowledges.  Drive the stack (zbuf_ip_poll()) and look at
 * zbuf_ip_sock_events() in between.
 */
/** @{ */

/** An opaque socket of the convenience layer. */
typedef struct zbuf_ip_sock zbuf_ip_sock_t;

#define ZBUF_IP_SOCK_READABLE 0x01  /**< zbuf_ip_sock_recv() has something (data, EOF or error) */
#define ZBUF_IP_SOCK_WRITABLE 0x02  /**< zbuf_ip_sock_send() would take a zbuf */
#define ZBUF_IP_SOCK_CONNECTED 0x04 /**< the connection is (or was) established */
#define ZBUF_IP_SOCK_EOF 0x08       /**< the peer closed its direction */
#define ZBUF_IP_SOCK_ERROR 0x10     /**< the connection failed (see zbuf_ip_sock_error()) */
#define ZBUF_IP_SOCK_ACCEPTABLE 0x20 /**< a listener has a connection for zbuf_ip_sock_accept() */

/**
 * @brief Start a connection; ZBUF_IP_SOCK_CONNECTED or ZBUF_IP_SOCK_ERROR
 *        follow.
 * @param[out] out  the socket; close it with zbuf_ip_sock_close().
 * @return 0; the errors of zbuf_ip_tcp_new() and zbuf_ip_tcp_connect().
 */
ZBUF_EXPORT int zbuf_ip_sock_connect(zbuf_ip_stack_t *s, uint32_t addr, uint16_t port,
                                     zbuf_ip_sock_t **out);

/**
 * @brief Listen on @p addr (or #ZBUF_IP_ANY) and @p port; at most
 *        @p backlog connections wait for zbuf_ip_sock_accept(), further ones
 *        are reset.
 * @return 0; the errors of zbuf_ip_tcp_new(), _bind(), _listen().
 */
ZBUF_EXPORT int zbuf_ip_sock_listen(zbuf_ip_stack_t *s, uint32_t addr, uint16_t port,
                                    unsigned backlog, zbuf_ip_sock_t **out);

/** @brief Take the oldest waiting connection.  @return 0; `-EAGAIN`; `-EINVAL`. */
ZBUF_EXPORT int zbuf_ip_sock_accept(zbuf_ip_sock_t *listener, zbuf_ip_sock_t **out);

/**
 * @brief Send a zbuf, by reference.
 *
 * On success @p data is consumed: what fits goes into the connection's
 * retransmission queue now, the rest waits in the socket and follows as
 * acknowledgments make room; buffers are released once acknowledged.
 * @return 0; `-EAGAIN` when bytes already wait in the socket beyond the send
 *         buffer (the caller keeps @p data; ZBUF_IP_SOCK_WRITABLE says when
 *         to retry); `-EPIPE` after shutdown or failure; `-EINVAL`.
 */
ZBUF_EXPORT int zbuf_ip_sock_send(zbuf_ip_sock_t *k, zbuf_t *data);

/**
 * @brief zbufSockBufSend(): enrol @p buf (no copy) and send it; @p cb runs
 *        once the peer has acknowledged every byte of it (or the connection
 *        is gone).
 * @return as zbuf_ip_sock_send(); on failure @p cb is not called and the
 *         caller keeps @p buf.
 */
ZBUF_EXPORT int zbuf_ip_sock_bufsend(zbuf_ip_sock_t *k, void *buf, size_t len,
                                     zbuf_release_cb cb, void *arg);

/**
 * @brief Take up to @p max received bytes (ZBUF_TO_END: all there are).
 * @param[out] out  a new zbuf of the driver's segments (the caller deletes
 *                  it); NULL at end of stream.
 * @return the bytes taken (> 0); 0 at end of stream; `-EAGAIN` when nothing
 *         is there yet; the connection's error (`-ECONNRESET`, `-ETIMEDOUT`,
 *         `-ECONNREFUSED`) once received data is exhausted; `-EINVAL`.
 */
ZBUF_EXPORT ssize_t zbuf_ip_sock_recv(zbuf_ip_sock_t *k, size_t max, zbuf_t **out);

/** @brief Current ZBUF_IP_SOCK_* flags. */
ZBUF_EXPORT unsigned zbuf_ip_sock_events(const zbuf_ip_sock_t *k);

/** @brief The error that ended the connection (negative errno), or 0. */
ZBUF_EXPORT int zbuf_ip_sock_error(const zbuf_ip_sock_t *k);

/** @brief Send a FIN once everything queued is sent.  @return 0; `-ENOTCONN`. */
ZBUF_EXPORT int zbuf_ip_sock_shutdown(zbuf_ip_sock_t *k);

/**
 * @brief Free the socket.  A connection is closed gracefully in the
 *        background: every byte accepted by zbuf_ip_sock_send() still goes
 *        out, even the ones waiting beyond the send buffer, then a FIN; the
 *        buffers are released as the peer acknowledges them (or when the
 *        connection fails, or with zbuf_ip_stack_delete()).  Received data
 *        not taken, and data arriving later, is dropped.  A listener resets
 *        the connections nobody accepted.  The caller must not use @p k
 *        again.  NULL is a no-op.
 */
ZBUF_EXPORT void zbuf_ip_sock_close(zbuf_ip_sock_t *k);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* ZBUF_IP_H */
