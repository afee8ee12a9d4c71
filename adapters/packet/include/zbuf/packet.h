/* SPDX-License-Identifier: MIT */
/**
 * @file zbuf/packet.h
 * @brief Raw Ethernet frames between a network interface and zbufs, through
 *        the rings Linux packet sockets share with user space
 *        (`PACKET_RX_RING`, `PACKET_TX_RING`).
 *
 * Library `zbuf-packet` (CMake target `zbuf::packet`, pkg-config
 * `zbuf-packet`), built on the core library and kept apart from it.
 *
 * ### Receive: loans out of the ring
 *
 * The kernel writes each received frame into the next slot of a ring mapped
 * into the process and flips the slot's status word to "user".
 * zbuf_packet_recv() hands each frame to the caller as a zbuf whose one
 * segment points into that slot: nothing is copied.  The frame is *loaned*,
 * as a VxWorks driver loans its receive buffers to the stack: when the last
 * reference to the zbuf's bytes goes (zbuf_delete(), zbuf_cut() ..., on any
 * thread), the library writes the kernel's status back into the slot, with
 * release ordering, exactly once, and the kernel may fill it again.
 *
 * The kernel fills slots strictly in ring order.  A frame held by the
 * application blocks the ring at its slot once the kernel has gone round
 * (it then drops frames and counts them in zbuf_packet_stats_t::kernel_drops).
 * So the library lends at most zbuf_packet_config_t::loan_max_percent of the
 * ring at once; beyond that share it copies new frames into buffers of a pool
 * (counted in zbuf_stats_t::bytes_copied and zbuf_packet_stats_t::rx_copied)
 * and gives their slots back at once, so the ring keeps moving however long
 * the application holds what it has.  When neither a loan nor a pool buffer
 * is to be had, the frame is dropped (zbuf_packet_stats_t::rx_no_buffer): the
 * library never stops draining the ring.  A loan held for longer than the
 * ring takes to fill still stops reception at its slot until it returns:
 * hold frames briefly, or take a copy (zbuf_unshare()) of what you keep.
 *
 * ### Transmit: one copy into the ring, one kick per batch
 *
 * zbuf_packet_send() gathers the zbuf's segments into the next free slot of
 * the transmit ring (the one copy of the path, counted in
 * zbuf_stats_t::bytes_copied), marks the slot "send request" and deletes
 * the zbuf: release callbacks of its buffers run as soon as the bytes are in
 * the ring, inside the call.  Slots are filled strictly in ring order and a
 * slot is marked only once completely written, so the kernel, which stops at
 * the first unmarked slot, never meets a gap.  One non-blocking `send()`
 * without data (the *kick*) hands every marked slot to the kernel; a batch
 * of frames costs one system call.  zbuf_packet_close() sends what is marked
 * and counts whatever the kernel did not take.
 *
 * ### The descriptor
 *
 * zbuf_packet_fd() is readable when new frames have arrived since the last
 * zbuf_packet_recv() that returned fewer frames than asked for (or
 * `-EAGAIN`), and reports an error when the interface goes down or away.  It
 * is an epoll descriptor watching the packet socket edge-triggered: the
 * packet socket itself stays readable for as long as its newest frame is on
 * loan, which would make a level-triggered event loop spin.  Use it with
 * poll(), epoll or any event loop.  Receive until a call returns fewer frames
 * than asked for, as with any edge-triggered source.
 *
 * ### Versions
 *
 * TPACKET_V2 (the default) moves frame by frame: a frame is readable as soon
 * as it is written, and each returns on its own.  TPACKET_V3 packs frames of
 * any length into blocks and hands a block over when it is full or when its
 * retire timeout expires (zbuf_packet_config_t::block_timeout_ms; the
 * kernel's default is about 8 ms): better for bulk capture of small frames,
 * but a lone frame waits for the timeout, so a round trip takes about that
 * long.  A block goes back to the kernel when every frame of it has.
 *
 * ### Frames larger than the MTU (GRO, GSO, LRO)
 *
 * With generic receive offload (on by default on most interfaces), LRO, or a
 * veth whose other end sends TSO/GSO super-frames (the kernel's own TCP on
 * the other side of a veth pair does), frames up to 64 KiB reach the packet
 * socket.  When zbuf_packet_config_t::frame_size is 0 the library sizes
 * receive slots for them on such interfaces (GRO or LRO on, or a veth), and
 * for the MTU otherwise.  A frame larger than its slot is truncated by the
 * kernel: the library delivers what was captured and says so
 * (#ZBUF_PACKET_RX_TRUNCATED, zbuf_packet_stats_t::rx_truncated).  To keep
 * small slots instead, turn the offloads off: `ethtool -K IF gro off lro off`
 * here, and `ethtool -K PEER tso off gso off` on the far end of a veth.
 * Transmit slots are always sized for the MTU.
 *
 * ### Privileges and errors
 *
 * Opening needs `CAP_NET_RAW` in the interface's network namespace
 * (`-EPERM` without it).  Errors are negative errno values as everywhere in
 * libzbuf; zbuf_packet_open() also writes a sentence saying what was wrong
 * (which geometry rule, which privilege) when given room for it.
 *
 * ### Threads
 *
 * A handle is used by one thread at a time.  Loaned frames may be released
 * on any thread: returning them is lock-free.  The handle (its ring
 * mapping) lives until it is closed *and* every loan has come back.
 *
 * @code
 * zbuf_packet_config_t cfg;
 * zbuf_packet_t *p;
 * char why[256];
 * zbuf_packet_config_init(&cfg);
 * if (zbuf_packet_open("eth0", &cfg, &p, why, sizeof why) < 0)
 *     errx(1, "%s", why);
 * zbuf_t *f[32];
 * int n = zbuf_packet_recv(p, f, NULL, 32);      // loans into the ring
 * for (int i = 0; i < n; i++)
 *     zbuf_packet_send(p, f[i], ZBUF_PACKET_MORE); // copied into the TX ring
 * zbuf_packet_flush(p);                            // one kick for the batch
 * zbuf_packet_close(p, 1000);
 * @endcode
 */
#ifndef ZBUF_PACKET_H
#define ZBUF_PACKET_H

#include <stdbool.h>
#include <stdint.h>
#include <zbuf/zbuf.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @cond INTERNAL */
#if defined(ZBUF_PACKET_STATIC)
#define ZBUF_PACKET_EXPORT
#elif defined(ZBUF_PACKET_BUILDING)
#define ZBUF_PACKET_EXPORT __attribute__((visibility("default")))
#else
#define ZBUF_PACKET_EXPORT
#endif
/** @endcond */

/** An opaque packet-ring handle bound to one interface. */
typedef struct zbuf_packet zbuf_packet_t;

/** TPACKET_V2: frame by frame (the default). */
#define ZBUF_PACKET_V2 2
/** TPACKET_V3: frames packed into blocks with a retire timeout. */
#define ZBUF_PACKET_V3 3

/** zbuf_packet_config_t::copy_bufs: sized from the receive ring. */
#define ZBUF_PACKET_COPY_AUTO UINT32_MAX

/** Largest frame the kernel hands over with offloads (GRO/GSO/LRO): 64 KiB. */
#define ZBUF_PACKET_FRAME_OFFLOAD 65536u

/**
 * Configuration of a handle.  Fill it with zbuf_packet_config_init(), then
 * change what you need.  Sizes of 0 mean "derive it" as documented per
 * field; every other value is checked by zbuf_packet_open() before the
 * kernel sees it.
 */
typedef struct zbuf_packet_config {
    unsigned version;          /**< #ZBUF_PACKET_V2 (default) or #ZBUF_PACKET_V3 */
    bool rx_ring;              /**< set up a receive ring (default true) */
    bool tx_ring;              /**< set up a transmit ring (default true) */
    uint32_t rx_frames;        /**< receive ring slots; 0 (the default): 1024, or 128
                                    when the slots are sized for 64 KiB frames.  V3:
                                    the ring holds this many frames of
                                    @c frame_size bytes, packed, in at least 4 blocks */
    uint32_t tx_frames;        /**< transmit ring slots (default 512) */
    uint32_t frame_size;       /**< bytes per receive slot, header included: a multiple
                                    of 16 (TPACKET_ALIGNMENT).  0: sized for the
                                    interface (MTU, or 64 KiB when offloads can hand
                                    over larger frames; see the file comment) */
    uint32_t tx_frame_size;    /**< bytes per transmit slot (multiple of 16).  0: sized
                                    for the interface's MTU */
    uint32_t block_size;       /**< bytes per receive ring block: a multiple of the page
                                    size holding whole slots; frames per block times
                                    blocks must equal @c rx_frames.  0: derived (up to
                                    64 KiB for V2, 256 KiB for V3), and the frame count
                                    rounded up to whole blocks */
    uint32_t tx_block_size;    /**< the same for the transmit ring and @c tx_frames */
    uint32_t block_timeout_ms; /**< V3 only: a block that is not full is handed over
                                    after this long (0: the kernel's default, about
                                    8 ms) */
    unsigned loan_max_percent; /**< most of the ring lent out at once, 0..100 (default
                                    50): beyond it frames are copied into pool
                                    buffers.  0 copies every frame, 100 never copies */
    uint32_t copy_below;       /**< frames shorter than this many bytes are copied
                                    rather than lent (default 0: lend every frame
                                    within the share).  Copying a small frame costs
                                    about what lending it does, and a small frame
                                    held for long (an out-of-order queue) then pins a
                                    pool buffer instead of a ring slot */
    uint32_t copy_buf_size;    /**< bytes per buffer of the copy pool (default 2048); a
                                    larger frame takes several */
    uint32_t copy_bufs;        /**< buffers in the copy pool; #ZBUF_PACKET_COPY_AUTO (the
                                    default): half the receive ring's bytes; 0: no
                                    pool, so frames beyond the loan share are dropped */
    uint16_t protocol;         /**< EtherType to receive, host order (default
                                    ETH_P_ALL: everything) */
    bool ignore_outgoing;      /**< do not receive the frames this host sends on the
                                    interface (PACKET_IGNORE_OUTGOING, or filtered here
                                    on kernels before 4.20); default true */
    bool promiscuous;          /**< put the interface in promiscuous mode while open
                                    (PACKET_MR_PROMISC; undone on close); default false */
    bool qdisc_bypass;         /**< transmit straight to the driver, skipping the
                                    interface's queueing discipline
                                    (PACKET_QDISC_BYPASS); default false */
    bool tx_loss;              /**< PACKET_LOSS: the kernel skips a malformed transmit
                                    slot instead of stopping the ring at it; default
                                    true (see zbuf_packet_flush()) */
    bool tx_linear;            /**< transmit-only handles: have the kernel copy each
                                    frame into its buffer (PACKET_VNET_HDR with the
                                    whole frame as header) rather than attach the
                                    ring's page to it, which a veth or a device
                                    without scatter-gather copies again into a newly
                                    allocated page; default true.  Handles with a
                                    receive ring always attach */
    int sndbuf;                /**< socket send buffer in bytes, which bounds the
                                    frames in flight between a kick and the device
                                    (0: the system default; root may exceed
                                    net.core.wmem_max) */
} zbuf_packet_config_t;

/** @brief Fill @p cfg with the defaults documented on each field. */
ZBUF_PACKET_EXPORT void zbuf_packet_config_init(zbuf_packet_config_t *cfg);

/**
 * @brief Open a packet socket on interface @p ifname with rings as
 *        configured, map them and bind.
 *
 * @param ifname  the interface's name (borrowed).
 * @param cfg     borrowed; NULL means the defaults.
 * @param[out] out  the new handle; close it with zbuf_packet_close().
 * @param why     NULL, or room for a sentence saying why the call failed
 *                (written only on failure, always NUL-terminated).
 * @param why_len bytes at @p why.
 * @return 0; `-EINVAL` (a bad configuration value or ring geometry: @p why
 *         says which rule); `-ENODEV` (no such interface); `-EPERM` (no
 *         CAP_NET_RAW); `-EAFNOSUPPORT` (no AF_PACKET in this kernel);
 *         `-ENOMEM`; another errno of socket(), setsockopt(), mmap() or
 *         bind().
 */
ZBUF_PACKET_EXPORT int zbuf_packet_open(const char *ifname, const zbuf_packet_config_t *cfg,
                                        zbuf_packet_t **out, char *why, size_t why_len);

/**
 * @brief Send what is marked, wait up to @p timeout_ms for the kernel to
 *        take it, and release the handle.
 *
 * Frames the kernel has not taken by then are counted in
 * zbuf_packet_stats_t::tx_dropped_at_close.  Frames still on loan stay valid:
 * the ring is unmapped when the last of them is released.  NULL is a no-op.
 *
 * @param p  consumed.
 * @return the number of marked frames that were not sent (0 normally).
 */
ZBUF_PACKET_EXPORT int zbuf_packet_close(zbuf_packet_t *p, int timeout_ms);

/**
 * @brief The descriptor to wait on for received frames and errors (an epoll
 *        descriptor, edge-triggered on the packet socket; see the file
 *        comment).  Owned by the handle.
 */
ZBUF_PACKET_EXPORT int zbuf_packet_fd(const zbuf_packet_t *p);

/**
 * @brief The packet socket itself, for options the library does not set
 *        (a BPF filter, fanout, timestamping).  Owned by the handle: do not
 *        close it, read from it or send on it.
 */
ZBUF_PACKET_EXPORT int zbuf_packet_socket(const zbuf_packet_t *p);

/** Facts about the interface and the rings as opened. */
typedef struct zbuf_packet_info {
    int ifindex;               /**< interface index */
    uint8_t mac[6];            /**< the interface's hardware address */
    uint32_t mtu;              /**< its MTU when opened */
    unsigned version;          /**< #ZBUF_PACKET_V2 or #ZBUF_PACKET_V3 */
    uint32_t rx_frames;        /**< receive slots (after rounding) */
    uint32_t tx_frames;        /**< transmit slots */
    uint32_t frame_size;       /**< bytes per receive slot */
    uint32_t tx_frame_size;    /**< bytes per transmit slot */
    uint32_t block_size;       /**< bytes per receive block */
    uint32_t rx_max_frame;     /**< largest frame a receive slot holds whole */
    uint32_t tx_max_frame;     /**< largest frame zbuf_packet_send() accepts */
    bool offload_sized;        /**< receive slots were sized for 64 KiB frames */
    bool ignore_outgoing_kernel; /**< PACKET_IGNORE_OUTGOING is in force (else the
                                      library filters) */
} zbuf_packet_info_t;

/** @brief Fill @p out.  @return 0; `-EINVAL`. */
ZBUF_PACKET_EXPORT int zbuf_packet_info(const zbuf_packet_t *p, zbuf_packet_info_t *out);

/** @name Receive */
/** @{ */

#define ZBUF_PACKET_RX_LOANED 0x01u        /**< the zbuf points into the ring */
#define ZBUF_PACKET_RX_TRUNCATED 0x02u     /**< the frame was larger than its slot: the zbuf
                                                holds only the first bytes */
#define ZBUF_PACKET_RX_VLAN 0x04u          /**< the device removed a VLAN tag: see
                                                @c vlan_tci and @c vlan_tpid */
#define ZBUF_PACKET_RX_CSUM_PARTIAL 0x08u  /**< sent from this host with checksum
                                                offload: the TCP/UDP checksum field
                                                holds only the pseudo-header sum */
#define ZBUF_PACKET_RX_CSUM_VALID 0x10u    /**< the device verified the checksums */
#define ZBUF_PACKET_RX_TS_HARDWARE 0x20u   /**< the timestamp is the device's */

/** What the kernel said about one received frame. */
typedef struct zbuf_packet_rxinfo {
    uint32_t wire_len;   /**< the frame's length on the wire (> the zbuf's when truncated) */
    uint32_t ts_sec;     /**< arrival time, CLOCK_REALTIME seconds */
    uint32_t ts_nsec;    /**< and nanoseconds */
    uint16_t vlan_tci;   /**< with #ZBUF_PACKET_RX_VLAN */
    uint16_t vlan_tpid;  /**< with #ZBUF_PACKET_RX_VLAN (0 when the kernel did not say) */
    uint8_t pkttype;     /**< PACKET_HOST, PACKET_BROADCAST, PACKET_OTHERHOST ... */
    unsigned flags;      /**< ZBUF_PACKET_RX_* */
} zbuf_packet_rxinfo_t;

/**
 * @brief Take up to @p max received frames.
 *
 * @param frames  room for @p max pointers; each filled one is a new zbuf
 *                holding one whole Ethernet frame (the caller deletes it).
 *                A loaned frame's segment points into the ring and is
 *                read-only; a copied one is in pool buffers.
 * @param info    NULL, or room for @p max descriptions, filled alongside.
 * @return the number of frames (1..@p max; fewer than @p max means the ring
 *         is empty for now); `-EAGAIN` when none is there; `-ENETDOWN` once
 *         when the interface went down (reception resumes when it comes up
 *         again) and `-ENODEV` when it went away; `-EINVAL` (NULL, @p max 0,
 *         no receive ring).
 */
ZBUF_PACKET_EXPORT int zbuf_packet_recv(zbuf_packet_t *p, zbuf_t **frames,
                                        zbuf_packet_rxinfo_t *info, unsigned max);

/**
 * @brief Whether a frame is waiting in the receive ring now (after a
 *        zbuf_packet_recv() that returned as many frames as asked for, the
 *        descriptor does not say so again).
 */
ZBUF_PACKET_EXPORT bool zbuf_packet_rx_pending(zbuf_packet_t *p);

/** @} */
/** @name Transmit */
/** @{ */

/** zbuf_packet_send() flag: more frames follow, do not kick yet. */
#define ZBUF_PACKET_MORE 0x1u

/**
 * @brief Copy one Ethernet frame into the transmit ring and (unless
 *        #ZBUF_PACKET_MORE) kick the kernel.
 *
 * @param frame  consumed on success: deleted once its bytes are in the ring,
 *               so its release callbacks have run when this returns.  On
 *               failure the caller keeps it, unchanged.
 * @return 0; `-EMSGSIZE` (longer than the MTU plus the Ethernet header, and
 *         4 more for a VLAN-tagged frame, or than a slot: never truncated);
 *         `-EINVAL` (shorter than an Ethernet header, NULL, no transmit
 *         ring); `-EIO` (reading a file segment failed); `-EAGAIN` (the ring
 *         is full: the kernel has not sent the earlier frames yet; try again
 *         a little later: the kernel reports `POLLOUT` even when the ring is
 *         full, so polling does not help).  An error of the kick itself
 *         (`-ENETDOWN`, `-ENXIO`: the interface is down or gone) does not
 *         fail the call, since the frame is in the ring by then: the next
 *         zbuf_packet_flush() returns it.
 */
ZBUF_PACKET_EXPORT int zbuf_packet_send(zbuf_packet_t *p, zbuf_t *frame, unsigned flags);

/**
 * @brief Copy up to @p n frames into the ring in order and kick once.
 * @param frames  the first k (the return value) are consumed as by
 *                zbuf_packet_send(); the rest are untouched.
 * @return k, the frames taken (0..@p n; fewer when the ring filled up or a
 *         frame was refused); the error of the first frame when it was
 *         refused (k would be 0).
 */
ZBUF_PACKET_EXPORT int zbuf_packet_send_batch(zbuf_packet_t *p, zbuf_t *const *frames,
                                              unsigned n);

/**
 * @brief Kick the kernel if frames are marked and not yet kicked.
 * @return 0; `-ENETDOWN`, `-ENXIO` (interface down or gone: the frames stay
 *         marked and go when it comes back, or are counted at close);
 *         `-EMSGSIZE` when the kernel refused a frame (the MTU was lowered
 *         after open) and PACKET_LOSS is off: the ring stops at that frame.
 *         `-EAGAIN` and `-ENOBUFS` (socket buffer or queue full) are not
 *         errors: the kick is retried by the next send or flush.
 */
ZBUF_PACKET_EXPORT int zbuf_packet_flush(zbuf_packet_t *p);

/**
 * @brief Frames marked for sending that the kernel has not finished with
 *        (marked, or in flight).
 */
ZBUF_PACKET_EXPORT unsigned zbuf_packet_tx_pending(zbuf_packet_t *p);

/**
 * @brief Whether marked frames wait for a kick: sent with #ZBUF_PACKET_MORE
 *        since, or left by a kick that stopped early (full socket buffer).
 *        An event loop calls zbuf_packet_flush() soon when this is true.
 */
ZBUF_PACKET_EXPORT bool zbuf_packet_tx_needs_kick(const zbuf_packet_t *p);

/** @} */

/** Counters of a handle (since open, except the gauges). */
typedef struct zbuf_packet_stats {
    uint64_t rx_frames;        /**< frames handed out by zbuf_packet_recv() */
    uint64_t rx_bytes;         /**< their bytes */
    uint64_t rx_loaned;        /**< of them, loaned from the ring */
    uint64_t rx_copied;        /**< of them, copied into pool buffers (loan share
                                    exceeded) */
    uint64_t rx_no_buffer;     /**< frames dropped: neither a loan nor pool buffers */
    uint64_t rx_truncated;     /**< frames larger than their slot (delivered cut) */
    uint64_t rx_outgoing_filtered; /**< own outgoing frames dropped here (old kernels) */
    uint64_t rx_bounced;       /**< lent slots met again a lap later and given back to
                                    the kernel, their holders moved to a private copy
                                    of the pages (counted in bytes_copied) */
    uint64_t rx_stalls;        /**< times the reader found the next slot still on loan
                                    and could not bounce it (the kernel drops meanwhile) */
    uint64_t kernel_packets;   /**< frames the kernel saw for this socket (PACKET_STATISTICS) */
    uint64_t kernel_drops;     /**< of them, dropped by the kernel: ring full or blocked */
    uint64_t kernel_freezes;   /**< V3: times the ring was frozen full */
    uint64_t tx_frames;        /**< frames put into the transmit ring */
    uint64_t tx_bytes;         /**< their bytes */
    uint64_t tx_kicks;         /**< kicks (system calls) made */
    uint64_t tx_kick_retries;  /**< kicks that met a full socket buffer or queue */
    uint64_t tx_ring_full;     /**< sends refused with `-EAGAIN` */
    uint64_t tx_refused;       /**< frames the kernel refused (wrong format) */
    uint64_t tx_dropped_at_close; /**< marked frames the kernel had not sent at close */
    uint32_t loans_out;        /**< frames on loan now (a gauge) */
    uint32_t tx_in_ring;       /**< frames marked or in flight now (a gauge) */
} zbuf_packet_stats_t;

/**
 * @brief Copy the counters into @p out; reads (and adds up) the kernel's
 *        PACKET_STATISTICS, which the kernel resets on every read.
 * @return 0; `-EINVAL`.
 */
ZBUF_PACKET_EXPORT int zbuf_packet_stats(zbuf_packet_t *p, zbuf_packet_stats_t *out);

#ifdef __cplusplus
}
#endif

#endif /* ZBUF_PACKET_H */
