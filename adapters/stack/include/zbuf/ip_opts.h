/**
 * @file zbuf/ip_opts.h
 * @brief Compile-time options of the zbuf TCP/IP stack: every limit on what a
 *        peer can make the stack hold, in one place.
 *
 * Each option has a default here; override it with `-D` when building the
 * library (and use the same value when building code that includes
 * <zbuf/ip.h>: the structures do not depend on these values, but the
 * documented limits do).  Bad combinations stop the build with `#error`.
 *
 * Several values also have a run-time override in zbuf_ip_config_t, which may
 * only lower a limit (never raise it above the value compiled here) or pick
 * a timer value; see zbuf_ip_config_init().
 */
#ifndef ZBUF_IP_OPTS_H
#define ZBUF_IP_OPTS_H

/* ------------------------------------------------------------ interfaces */

/** Network interfaces per stack. */
#ifndef ZBUF_IP_MAX_NETIFS
#define ZBUF_IP_MAX_NETIFS 4
#endif

/** Frames one zbuf_ip_poll() asks each driver for (bounds the work of one
 *  poll so that timers and the caller's other events are not starved). */
#ifndef ZBUF_IP_POLL_BUDGET
#define ZBUF_IP_POLL_BUDGET 64
#endif

/** Largest MTU accepted for an interface (bytes of IP packet; up to 65535,
 *  the IPv4 limit, as Linux's loopback uses).  Only a bound: an interface's
 *  MTU is set in zbuf_ip_netif_config_t and defaults to 1500. */
#ifndef ZBUF_IP_MAX_MTU
#define ZBUF_IP_MAX_MTU 65535
#endif

/* ------------------------------------------------------------------- ARP */

/** Entries of the ARP cache (resolved and pending together).  When full, a
 *  new entry evicts the oldest resolved one; pending ones are never evicted,
 *  so a flood of unresolvable destinations cannot grow memory. */
#ifndef ZBUF_IP_ARP_ENTRIES
#define ZBUF_IP_ARP_ENTRIES 64
#endif

/** IP packets queued per pending ARP entry while the address resolves; more
 *  are dropped (and counted). */
#ifndef ZBUF_IP_ARP_QUEUE
#define ZBUF_IP_ARP_QUEUE 16
#endif

/** Lifetime of a resolved ARP entry, milliseconds. */
#ifndef ZBUF_IP_ARP_MAX_AGE_MS
#define ZBUF_IP_ARP_MAX_AGE_MS 300000
#endif

/** Interval between ARP requests for a pending entry, milliseconds. */
#ifndef ZBUF_IP_ARP_RETRY_MS
#define ZBUF_IP_ARP_RETRY_MS 1000
#endif

/** ARP requests sent for one pending entry before its queue is dropped. */
#ifndef ZBUF_IP_ARP_TRIES
#define ZBUF_IP_ARP_TRIES 3
#endif

/* ------------------------------------------------------------------ IPv4 */

/** Default TTL of packets the stack sends. */
#ifndef ZBUF_IP_TTL
#define ZBUF_IP_TTL 64
#endif

/* Fragments are not reassembled: every fragment (MF set or non-zero
 * offset) is dropped and counted in zbuf_ip_stats_t::ip_frag_drops, so no
 * reassembly memory exists for an attacker to fill. */

/* ------------------------------------------------------------------- UDP */

/** UDP PCBs per stack. */
#ifndef ZBUF_IP_UDP_PCBS
#define ZBUF_IP_UDP_PCBS 64
#endif

/* ------------------------------------------------------------------- TCP */

/** TCP PCBs per stack: listeners, connections, connections being set up
 *  and connections in TIME_WAIT together. */
#ifndef ZBUF_IP_TCP_PCBS
#define ZBUF_IP_TCP_PCBS 256
#endif

/** Largest listen backlog (connections in SYN_RCVD plus established ones
 *  not yet accepted, per listener). */
#ifndef ZBUF_IP_TCP_BACKLOG_MAX
#define ZBUF_IP_TCP_BACKLOG_MAX 64
#endif

/** Largest send buffer per connection: bytes written and not yet
 *  acknowledged (they stay referenced in the retransmission queue). */
#ifndef ZBUF_IP_TCP_SND_BUF_MAX
#define ZBUF_IP_TCP_SND_BUF_MAX (4u * 1024 * 1024)
#endif

/** Default send buffer (run-time: zbuf_ip_config_t::tcp_snd_buf). */
#ifndef ZBUF_IP_TCP_SND_BUF
#define ZBUF_IP_TCP_SND_BUF (256u * 1024)
#endif

/** Largest receive window per connection: bytes delivered to the application
 *  but not yet released with zbuf_ip_tcp_recved(), plus bytes held out of
 *  order. */
#ifndef ZBUF_IP_TCP_RCV_BUF_MAX
#define ZBUF_IP_TCP_RCV_BUF_MAX (4u * 1024 * 1024)
#endif

/** Default receive window (run-time: zbuf_ip_config_t::tcp_rcv_buf). */
#ifndef ZBUF_IP_TCP_RCV_BUF
#define ZBUF_IP_TCP_RCV_BUF (256u * 1024)
#endif

/** Out-of-order segments held per connection (each is a zbuf of the driver's
 *  buffers); further ones are dropped. */
#ifndef ZBUF_IP_TCP_OOO_SEGS
#define ZBUF_IP_TCP_OOO_SEGS 128
#endif

/** MSS the stack uses when the peer sends no MSS option (RFC 9293: 536). */
#ifndef ZBUF_IP_TCP_DEFAULT_MSS
#define ZBUF_IP_TCP_DEFAULT_MSS 536
#endif

/** Smallest MSS accepted from a peer: an MSS option of 0 (or anything below
 *  this) is clamped up to it, so that a peer cannot make the stack send
 *  zero-byte or tiny segments forever. */
#ifndef ZBUF_IP_TCP_MIN_MSS
#define ZBUF_IP_TCP_MIN_MSS 64
#endif

/** Window scale shifts above this are clamped (RFC 7323: 14). */
#ifndef ZBUF_IP_TCP_MAX_WSCALE
#define ZBUF_IP_TCP_MAX_WSCALE 14
#endif

/** Initial congestion window in segments (RFC 6928). */
#ifndef ZBUF_IP_TCP_INIT_CWND
#define ZBUF_IP_TCP_INIT_CWND 10
#endif

/** Segments one output call hands to the driver at most; the rest follow
 *  on the next poll, so that a TAP queue is not flooded. */
#ifndef ZBUF_IP_TCP_BURST
#define ZBUF_IP_TCP_BURST 64
#endif

/** Initial retransmission timeout, milliseconds (RFC 6298: 1 s). */
#ifndef ZBUF_IP_TCP_RTO_INIT_MS
#define ZBUF_IP_TCP_RTO_INIT_MS 1000
#endif

/** Lower bound of the retransmission timeout, milliseconds (RFC 6298 says
 *  1 s; Linux uses 200 ms).  Run-time: zbuf_ip_config_t::tcp_rto_min_ms. */
#ifndef ZBUF_IP_TCP_RTO_MIN_MS
#define ZBUF_IP_TCP_RTO_MIN_MS 200
#endif

/** Upper bound of the retransmission timeout after backoff, milliseconds. */
#ifndef ZBUF_IP_TCP_RTO_MAX_MS
#define ZBUF_IP_TCP_RTO_MAX_MS 60000
#endif

/** Retransmissions of one segment before the connection is given up
 *  (ETIMEDOUT). */
#ifndef ZBUF_IP_TCP_MAX_RETRIES
#define ZBUF_IP_TCP_MAX_RETRIES 12
#endif

/** Retransmissions of a SYN or SYN-ACK before giving up. */
#ifndef ZBUF_IP_TCP_SYN_RETRIES
#define ZBUF_IP_TCP_SYN_RETRIES 6
#endif

/** Delayed-ACK timeout, milliseconds (RFC 9293: under 500 ms). */
#ifndef ZBUF_IP_TCP_DELACK_MS
#define ZBUF_IP_TCP_DELACK_MS 40
#endif

/** TIME_WAIT duration (2 MSL), milliseconds.  Run-time:
 *  zbuf_ip_config_t::tcp_time_wait_ms. */
#ifndef ZBUF_IP_TCP_TIME_WAIT_MS
#define ZBUF_IP_TCP_TIME_WAIT_MS 60000
#endif

/** Challenge ACKs (RFC 5961) sent per second per stack at most. */
#ifndef ZBUF_IP_TCP_CHALLENGE_ACKS
#define ZBUF_IP_TCP_CHALLENGE_ACKS 100
#endif

/* ------------------------------------------------------ consistency checks */

#if ZBUF_IP_MAX_NETIFS < 1 || ZBUF_IP_MAX_NETIFS > 64
#error "ZBUF_IP_MAX_NETIFS must be 1..64"
#endif
#if ZBUF_IP_POLL_BUDGET < 1
#error "ZBUF_IP_POLL_BUDGET must be at least 1"
#endif
#if ZBUF_IP_MAX_MTU < 576 || ZBUF_IP_MAX_MTU > 65535
#error "ZBUF_IP_MAX_MTU must be 576..65535"
#endif
#if ZBUF_IP_ARP_ENTRIES < 1 || ZBUF_IP_ARP_QUEUE < 1 || ZBUF_IP_ARP_TRIES < 1
#error "ARP table, queue and tries must be at least 1"
#endif
#if ZBUF_IP_TTL < 1 || ZBUF_IP_TTL > 255
#error "ZBUF_IP_TTL must be 1..255"
#endif
#if ZBUF_IP_TCP_PCBS < 2 || ZBUF_IP_UDP_PCBS < 1
#error "need at least 2 TCP PCBs and 1 UDP PCB"
#endif
#if ZBUF_IP_TCP_BACKLOG_MAX < 1 || ZBUF_IP_TCP_BACKLOG_MAX > ZBUF_IP_TCP_PCBS
#error "ZBUF_IP_TCP_BACKLOG_MAX must be 1..ZBUF_IP_TCP_PCBS"
#endif
#if ZBUF_IP_TCP_SND_BUF > ZBUF_IP_TCP_SND_BUF_MAX || ZBUF_IP_TCP_SND_BUF < 2048
#error "ZBUF_IP_TCP_SND_BUF must be 2048..ZBUF_IP_TCP_SND_BUF_MAX"
#endif
#if ZBUF_IP_TCP_RCV_BUF > ZBUF_IP_TCP_RCV_BUF_MAX || ZBUF_IP_TCP_RCV_BUF < 2048
#error "ZBUF_IP_TCP_RCV_BUF must be 2048..ZBUF_IP_TCP_RCV_BUF_MAX"
#endif
#if ZBUF_IP_TCP_RCV_BUF_MAX > (65535u << 14) || ZBUF_IP_TCP_SND_BUF_MAX > (1u << 30)
#error "TCP buffers cannot exceed what window scaling can express (1 GiB)"
#endif
#if ZBUF_IP_TCP_MAX_WSCALE > 14
#error "ZBUF_IP_TCP_MAX_WSCALE above 14 violates RFC 7323"
#endif
#if ZBUF_IP_TCP_MIN_MSS < 1 || ZBUF_IP_TCP_MIN_MSS > ZBUF_IP_TCP_DEFAULT_MSS
#error "ZBUF_IP_TCP_MIN_MSS must be 1..ZBUF_IP_TCP_DEFAULT_MSS"
#endif
#if ZBUF_IP_TCP_RTO_MIN_MS < 1 || ZBUF_IP_TCP_RTO_MIN_MS > ZBUF_IP_TCP_RTO_MAX_MS || \
    ZBUF_IP_TCP_RTO_INIT_MS < ZBUF_IP_TCP_RTO_MIN_MS
#error "need 1 <= RTO_MIN <= RTO_INIT and RTO_MIN <= RTO_MAX"
#endif
#if ZBUF_IP_TCP_DELACK_MS < 1 || ZBUF_IP_TCP_DELACK_MS >= 500
#error "ZBUF_IP_TCP_DELACK_MS must be 1..499 (RFC 9293)"
#endif
#if ZBUF_IP_TCP_BURST < 1 || ZBUF_IP_TCP_INIT_CWND < 1 || ZBUF_IP_TCP_OOO_SEGS < 0
#error "burst and initial window must be at least 1"
#endif

#endif /* ZBUF_IP_OPTS_H */
