/* SPDX-License-Identifier: MIT */
/**
 * @file zbuf/ip_packet.h
 * @brief A link driver of the zbuf TCP/IP stack over packet rings
 *        (<zbuf/packet.h>): the stack on a real interface (a NIC, a veth).
 *
 * Library `zbuf-stack-packet` (CMake target `zbuf::stack_packet`,
 * pkg-config `zbuf-stack-packet`).  It depends on both `zbuf-stack` and
 * `zbuf-packet`; neither depends on it, so the stack builds without packet
 * rings and the rings without the stack.
 *
 * The stack runs over it exactly as over the TAP driver (zbuf_ip_tap_open()):
 *
 * - **Receive.**  Frames are lent out of the receive ring: the stack's
 *   zbufs (and the application's, once payload is handed up) point into the
 *   ring, and each slot goes back to the kernel when the last of them is
 *   deleted.  Frames beyond the loan share, and frames shorter than
 *   zbuf_packet_config_t::copy_below (256 bytes here by default: ACKs,
 *   small segments), are copied into pool buffers.  When neither is
 *   possible the frame is dropped: the driver never stops draining the
 *   ring, so the stack is never left deaf by its own buffers.
 * - **Transmit.**  Each frame the stack emits is copied into the transmit
 *   ring (the one copy of the path) and its segments are released at once;
 *   one kick sends a batch: when zbuf_ip_packet_config_t::batch frames wait,
 *   or at the next zbuf_ip_poll(), which the driver asks for at once through
 *   zbuf_ip_next_deadline().
 * - **Follows the interface.**  The MTU (0 in the interface configuration)
 *   is the interface's; the hardware address (all zero) is the interface's,
 *   and another address puts the interface in promiscuous mode.  Receive
 *   slots are sized for 64 KiB frames when the interface can hand over
 *   frames above its MTU (GRO, LRO, a veth whose other end uses TSO), and
 *   the copy pool for the ring.  Frames sent from this host with checksum
 *   offload carry a partial TCP/UDP checksum (the packet ring says so per
 *   frame): the driver completes it before the stack verifies it.  Frames
 *   cut short by a slot are dropped and counted.
 *
 * Give the interface no IPv4 address in the kernel (or not the stack's):
 * the kernel sees the same frames and would answer too.
 *
 * **A frame held across a lap of the ring blocks reception at its slot**
 * (see <zbuf/packet.h>): what the stack can hold is bounded by its TCP
 * windows, its reassembly and ARP limits, so give the ring more slots than
 * your connections can hold frames (rx_frames), or a larger copy share.
 */
#ifndef ZBUF_IP_PACKET_H
#define ZBUF_IP_PACKET_H

#include <zbuf/ip.h>
#include <zbuf/packet.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @cond INTERNAL */
#if defined(ZBUF_IP_PACKET_BUILDING)
#define ZBUF_IP_PACKET_EXPORT __attribute__((visibility("default")))
#else
#define ZBUF_IP_PACKET_EXPORT
#endif
/** @endcond */

/** An opaque packet-ring driver instance (one interface of one stack). */
typedef struct zbuf_ip_packet zbuf_ip_packet_t;

/** Configuration of the driver; fill it with zbuf_ip_packet_config_init(). */
typedef struct zbuf_ip_packet_config {
    zbuf_packet_config_t ring; /**< the rings (defaults of zbuf_packet_config_init(),
                                    but copy_below 256); the driver sets the protocol
                                    (everything) and asks for both rings */
    unsigned batch;            /**< kick the transmit ring once this many frames wait
                                    (default 32) */
} zbuf_ip_packet_config_t;

/** @brief Fill @p cfg with the defaults. */
ZBUF_IP_PACKET_EXPORT void zbuf_ip_packet_config_init(zbuf_ip_packet_config_t *cfg);

/**
 * @brief Open packet rings on @p ifname and attach them to @p s as a new
 *        interface.
 *
 * @param nc   the interface's addressing (borrowed); an all-zero @c mac means
 *             the interface's own, @c mtu 0 its MTU (a larger one is refused).
 * @param cfg  borrowed; NULL means the defaults.
 * @param[out] out  the driver; it lives as long as the interface: removing the
 *             interface (zbuf_ip_netif_remove(), zbuf_ip_stack_delete())
 *             closes the rings and frees it.
 * @param why, why_len  as for zbuf_packet_open().
 * @return 0; the errors of zbuf_packet_open() and zbuf_ip_netif_add();
 *         `-EINVAL` (an MTU above the interface's).
 */
ZBUF_IP_PACKET_EXPORT int zbuf_ip_packet_open(zbuf_ip_stack_t *s, const char *ifname,
                                              const zbuf_ip_netif_config_t *nc,
                                              const zbuf_ip_packet_config_t *cfg,
                                              zbuf_ip_packet_t **out, char *why, size_t why_len);

/** @brief The interface made by zbuf_ip_packet_open(). */
ZBUF_IP_PACKET_EXPORT zbuf_ip_netif_t *zbuf_ip_packet_netif(const zbuf_ip_packet_t *d);

/** @brief The descriptor to wait on before zbuf_ip_poll() (zbuf_packet_fd()). */
ZBUF_IP_PACKET_EXPORT int zbuf_ip_packet_fd(const zbuf_ip_packet_t *d);

/** @brief The packet handle underneath, for its counters (zbuf_packet_stats()). */
ZBUF_IP_PACKET_EXPORT zbuf_packet_t *zbuf_ip_packet_handle(const zbuf_ip_packet_t *d);

/** Counters of the driver itself. */
typedef struct zbuf_ip_packet_stats {
    uint64_t rx_truncated;     /**< frames dropped: cut short by their slot */
    uint64_t rx_csum_completed; /**< partial checksums completed (frames from this host) */
    uint64_t rx_lost;          /**< frames dropped by zbuf_ip_packet_set_loss() */
    uint64_t tx_ring_full;     /**< frames dropped: transmit ring full */
    uint64_t tx_lost;          /**< frames dropped by zbuf_ip_packet_set_loss() */
    uint64_t link_errors;      /**< interface down or gone (receive or kick errors) */
} zbuf_ip_packet_stats_t;

/** @brief Copy the driver's counters.  @return 0; `-EINVAL`. */
ZBUF_IP_PACKET_EXPORT int zbuf_ip_packet_stats(const zbuf_ip_packet_t *d,
                                               zbuf_ip_packet_stats_t *out);

/**
 * @brief Drop frames at random in the driver (tests, where the kernel has
 *        no netem): received frames with probability @p rx_loss, frames to
 *        send with @p tx_loss.
 * @return 0; `-EINVAL` (a probability outside 0..1).
 */
ZBUF_IP_PACKET_EXPORT int zbuf_ip_packet_set_loss(zbuf_ip_packet_t *d, double rx_loss,
                                                  double tx_loss, uint64_t seed);

#ifdef __cplusplus
}
#endif

#endif /* ZBUF_IP_PACKET_H */
