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

/*
 * Datagrams waiting for ARP.  While a next hop's address resolves, the
 * datagrams for it wait in its entry whole: the IP header is written and a
 * datagram above the MTU is cut into fragments only when the reply comes
 * (as Linux queues the whole skb in its neighbour entry), so a 64 KiB
 * datagram takes one place, not 45, and its fragments all leave or none
 * does.  Three bounds hold, each checked before a datagram is queued; one
 * that would exceed any of them is dropped at once and counted in
 * zbuf_ip_stats_t::arp_queue_drops, and so is every queued datagram when
 * the address does not resolve after #ZBUF_IP_ARP_TRIES requests.  Bytes
 * are counted as held memory: a datagram's length plus, per segment, the
 * unused rest of the buffer behind it up to 2 KiB (a driver's receive
 * buffer stays pinned while an echo reply quotes any byte of it); the
 * gauge zbuf_ip_stats_t::arp_queue_held shows the total.  The peer decides
 * what we answer (echo replies, TCP resets) and to which address, so the
 * worst case memory is the total bound, not entries x queue x 64 KiB.
 */

/** Datagrams queued per pending ARP entry while the address resolves.  The
 *  byte bounds below keep the memory in check, so the count can be as high
 *  as a burst of connection openings to one neighbour needs (Linux queues
 *  about 100 packets); with 16, 48 of 64 SYNs sent at once to a cold
 *  neighbour were dropped and sent again a second later. */
#ifndef ZBUF_IP_ARP_QUEUE
#define ZBUF_IP_ARP_QUEUE 64
#endif

/** Bytes (as held, see above) queued per pending ARP entry.  The default
 *  takes three 64 KiB datagrams, close to Linux's per-neighbour default
 *  (about 208 KiB of truesize); it must be at least 65535 + 2048, so that
 *  a datagram of the largest size in one buffer can wait. */
#ifndef ZBUF_IP_ARP_QUEUE_BYTES
#define ZBUF_IP_ARP_QUEUE_BYTES (256u * 1024u)
#endif

/** Bytes (as held) queued in all pending ARP entries of a stack together;
 *  at least #ZBUF_IP_ARP_QUEUE_BYTES.  The default is about what 64 entries
 *  of 16 full-size frames each held when frames, not datagrams, waited. */
#ifndef ZBUF_IP_ARP_QUEUE_TOTAL_BYTES
#define ZBUF_IP_ARP_QUEUE_TOTAL_BYTES (1024u * 1024u)
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

/*
 * Fragment reassembly (RFC 791, run-time switch
 * zbuf_ip_config_t::ip_reassembly, on by default).  Fragments are held as
 * the driver's own buffers, so every limit below bounds how many of the
 * driver's receive buffers a peer can pin:
 *
 * - A held fragment is charged the size of the buffers it references (like
 *   Linux's truesize: a 1-byte fragment in a 2 KiB pool buffer costs
 *   2 KiB), but each buffer at most 2 KiB more than the bytes used from it,
 *   so that slices of one large shared buffer are not charged many times.
 * - When a new datagram would exceed #ZBUF_IP_REASM_MAX or a fragment would
 *   exceed the byte budget, the OLDEST reassembly is evicted (counted in
 *   zbuf_ip_stats_t::ip_reasm_drops).  Dropping the newcomer instead would
 *   let a peer that sends first fragments and never the rest block every
 *   reassembly for the whole timeout; a genuine datagram completes within a
 *   round trip, so it is rarely the oldest.
 * - Any overlap between fragments (Teardrop and the overlap attacks that
 *   rewrite a header already checked) discards the whole datagram, the rule
 *   RFC 5722 sets for IPv6; an exact duplicate (same offset, length and MF
 *   bit, as a duplicating link makes) is ignored instead.
 * - A datagram whose end would pass 65535 bytes (the Ping of Death), a
 *   fragment with MF set whose length is not a multiple of 8, and a fragment
 *   without payload are dropped.
 */

/** Datagrams being reassembled at once, per stack. */
#ifndef ZBUF_IP_REASM_MAX
#define ZBUF_IP_REASM_MAX 16
#endif

/** Bytes of buffers all reassemblies together may hold (see the charging
 *  rule above).  Run-time: zbuf_ip_config_t::ip_reasm_bytes, which may only
 *  lower it. */
#ifndef ZBUF_IP_REASM_BYTES
#define ZBUF_IP_REASM_BYTES (256u * 1024)
#endif

/** Fragments held per datagram; one more discards the datagram.  64 takes
 *  a full 65535-byte datagram over a 1500-byte MTU (45 fragments), and
 *  datagrams of up to about 35 KB over the minimum MTU of 576. */
#ifndef ZBUF_IP_REASM_FRAGS
#define ZBUF_IP_REASM_FRAGS 64
#endif

/** Time from a datagram's first fragment until an incomplete datagram is
 *  freed (with ICMP time exceeded, code 1, to its sender if the fragment at
 *  offset 0 had arrived), milliseconds (Linux: 30 s; RFC 791 suggests 15 s; RFC 1122's
 *  60..120 s is the upper bound).  Run-time:
 *  zbuf_ip_config_t::ip_reasm_timeout_ms. */
#ifndef ZBUF_IP_REASM_TIMEOUT_MS
#define ZBUF_IP_REASM_TIMEOUT_MS 30000
#endif

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

/** Zero-window probes a connection the application has given up
 *  (zbuf_ip_tcp_close(), or a zbuf_ip_sock_close() with bytes still to
 *  send) sends to a peer that keeps its window shut, before it resets the
 *  connection and frees everything queued.  Without this bound such a peer
 *  would pin the connection and its buffers forever.  Connections the
 *  application still holds probe as long as the peer answers. */
#ifndef ZBUF_IP_TCP_ORPHAN_PROBES
#define ZBUF_IP_TCP_ORPHAN_PROBES 8
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

/** Segments in flight per connection at most (each has a 24-byte record of
 *  its sending time and state for loss recovery; the records grow with the
 *  flight).  More wait until some are acknowledged. */
#ifndef ZBUF_IP_TCP_TX_SEGS_MAX
#define ZBUF_IP_TCP_TX_SEGS_MAX 65536
#endif

/** Worst-case delayed-ACK time of a peer, milliseconds, added to the tail
 *  loss probe timeout when only one segment is in flight (RFC 8985 7.2:
 *  WCDelAckT). */
#ifndef ZBUF_IP_TCP_TLP_DELACK_MS
#define ZBUF_IP_TCP_TLP_DELACK_MS 200
#endif

/** Per connection, the least time in milliseconds between two ACKs sent in
 *  answer to segments dropped by PAWS (RFC 7323 5.3: an old timestamp), like
 *  Linux's tcp_invalid_ratelimit: a peer (or an attacker replaying old
 *  segments) cannot make us answer each one. */
#ifndef ZBUF_IP_TCP_INVALID_RATELIMIT_MS
#define ZBUF_IP_TCP_INVALID_RATELIMIT_MS 500
#endif

/** Window of the minimum RTT filter, milliseconds (RFC 8985 min_rtt: a
 *  windowed minimum, kept with Kathleen Nichols' three-sample algorithm).
 *  RACK's reordering window is a quarter of it.  Five minutes, as Linux's
 *  tcp_min_rtt_wlen: long enough that a queue built by our own sending does
 *  not hide the path's propagation delay, short enough to follow a route
 *  change. */
#ifndef ZBUF_IP_TCP_MIN_RTT_WLEN_MS
#define ZBUF_IP_TCP_MIN_RTT_WLEN_MS 300000
#endif

/** 1: detect spurious retransmission timeouts (a delay spike longer than
 *  the RTO) and undo them: Eifel detection (RFC 3522) with timestamps,
 *  F-RTO (RFC 5682) without, D-SACK of the retransmissions (RFC 3708) as a
 *  late detection; the response restores cwnd and ssthresh, takes the
 *  "lost" marks off the segments not yet resent and ends the RTO backoff.
 *  0: every timeout is taken for a loss (go-back-N of what the peer did not
 *  SACK, cwnd one segment), as before. */
#ifndef ZBUF_IP_TCP_SPURIOUS_RTO
#define ZBUF_IP_TCP_SPURIOUS_RTO 1
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
#if ZBUF_IP_ARP_QUEUE_BYTES < 65535 + 2048 || ZBUF_IP_ARP_QUEUE_TOTAL_BYTES < ZBUF_IP_ARP_QUEUE_BYTES
#error "ZBUF_IP_ARP_QUEUE_BYTES must hold a 65535-byte datagram, and the total at least that"
#endif
#if ZBUF_IP_TTL < 1 || ZBUF_IP_TTL > 255
#error "ZBUF_IP_TTL must be 1..255"
#endif
#if ZBUF_IP_REASM_MAX < 1 || ZBUF_IP_REASM_MAX > 1024
#error "ZBUF_IP_REASM_MAX must be 1..1024"
#endif
#if ZBUF_IP_REASM_FRAGS < 2 || ZBUF_IP_REASM_FRAGS > 8192
#error "ZBUF_IP_REASM_FRAGS must be 2..8192"
#endif
#if ZBUF_IP_REASM_BYTES < 4096
#error "ZBUF_IP_REASM_BYTES must be at least 4096"
#endif
#if ZBUF_IP_REASM_TIMEOUT_MS < 1 || ZBUF_IP_REASM_TIMEOUT_MS > 120000
#error "ZBUF_IP_REASM_TIMEOUT_MS must be 1..120000 (RFC 1122: at most 120 s)"
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
#if ZBUF_IP_TCP_TX_SEGS_MAX < 16 || (ZBUF_IP_TCP_TX_SEGS_MAX & (ZBUF_IP_TCP_TX_SEGS_MAX - 1))
#error "ZBUF_IP_TCP_TX_SEGS_MAX must be a power of two, at least 16"
#endif

#endif /* ZBUF_IP_OPTS_H */
