/* SPDX-License-Identifier: MIT */
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

/*
 * Receive pool pressure.  A driver that reads frames into a pool names it
 * in zbuf_ip_driver_t::rx_pool; the stack then watches how many of its
 * buffers are left whenever it is about to keep a received payload beyond
 * the frame's processing (TCP receive and out-of-order queues, UDP
 * delivery, fragments waiting for reassembly, datagrams waiting for ARP):
 *
 * - above the pressure mark, payload stays in the driver's buffers (zero
 *   copy);
 * - at or below it, a payload that uses less than half of the buffers it
 *   pins (a 1-byte segment in a 1.5 KiB buffer) is collapsed: copied into
 *   a compact buffer of its own size (counted in zbuf_stats_t::bytes_copied
 *   and zbuf_ip_stats_t::rx_collapsed_bytes), so that the driver's buffer
 *   goes back to the pool at once;
 * - at or below the reserve mark, nothing received pins a pool buffer any
 *   more: data that makes progress (in-order TCP, UDP datagrams, replies
 *   waiting for ARP) is collapsed whatever its size, data that may never be
 *   used (out-of-order segments, fragments) is dropped, and the
 *   out-of-order queues and reassemblies that still pin pool buffers are
 *   pruned (once each time the reserve is reached).  The reserve is what
 *   ARP, ICMP, new connections and connections that make progress keep
 *   receiving into.
 *
 * These are the only copies the stack makes of received payload.  A driver
 * whose pool is empty still reads (and drops) what the device has, so it
 * never stops reading; see zbuf_ip_driver_t.
 */

/** Pool pressure mark: pressure when at most capacity / this many buffers
 *  are left (default 4: a quarter). */
#ifndef ZBUF_IP_RX_PRESSURE_DIV
#define ZBUF_IP_RX_PRESSURE_DIV 4
#endif

/** Pool reserve mark: at most capacity / this many buffers left (default
 *  16), and at least one buffer. */
#ifndef ZBUF_IP_RX_RESERVE_DIV
#define ZBUF_IP_RX_RESERVE_DIV 16
#endif

/** Largest MTU accepted for an interface (bytes of IP packet; up to 65535,
 *  the IPv4 limit, as Linux's loopback uses).  Only a bound: an interface's
 *  MTU is set in zbuf_ip_netif_config_t and defaults to 1500. */
#ifndef ZBUF_IP_MAX_MTU
#define ZBUF_IP_MAX_MTU 65535
#endif

/* ------------------------------------------------------------------- ARP */

/*
 * The neighbour table has two parts with separate bounds, so that
 * addresses that never resolve cannot push out those that did:
 *
 * - resolved entries (#ZBUF_IP_ARP_ENTRIES).  A new one (an answer to one
 *   of our requests, or a request for us from a new neighbour) takes a free
 *   place or the place of the least recently used entry that is not in use
 *   (not used to send for #ZBUF_IP_ARP_IN_USE_MS); when every entry is in
 *   use the new address is not cached (what waited for it is still sent);
 * - pending entries (#ZBUF_IP_ARP_PENDING), each with the datagrams waiting
 *   for it.  A new one takes a free place or evicts the OLDEST pending entry
 *   (its datagrams are dropped): a real neighbour answers within a round
 *   trip, so it is rarely the oldest, and never a resolved entry.
 *
 * ARP requests leave at most #ZBUF_IP_ARP_REQUESTS_PER_SEC per second per
 * stack (a token bucket holding one second's worth): a flood of datagrams
 * to unresolvable addresses (spoofed sources we answer) cannot turn into a
 * broadcast flood.  A request held back by the limit is sent at the entry's
 * next retry if there is a token then.
 */

/** Resolved entries of the ARP cache. */
#ifndef ZBUF_IP_ARP_ENTRIES
#define ZBUF_IP_ARP_ENTRIES 64
#endif

/** Pending entries (addresses being resolved), separate from the resolved
 *  ones. */
#ifndef ZBUF_IP_ARP_PENDING
#define ZBUF_IP_ARP_PENDING 16
#endif

/** A resolved entry used to send within this many milliseconds is in use:
 *  no new entry takes its place. */
#ifndef ZBUF_IP_ARP_IN_USE_MS
#define ZBUF_IP_ARP_IN_USE_MS 30000
#endif

/** ARP requests sent per second per stack at most. */
#ifndef ZBUF_IP_ARP_REQUESTS_PER_SEC
#define ZBUF_IP_ARP_REQUESTS_PER_SEC 50
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

/*
 * Receive memory per connection.  What a connection holds of received data
 * is charged by what it pins, as Linux charges an skb's truesize, not by
 * its payload: each segment costs the whole buffer behind it (at most 2 KiB
 * more than the bytes it uses, so that slices of one large shared buffer
 * are not charged many times) plus 128 bytes for the descriptors.  Far
 * from the limit a segment is charged the most it can pin (its length plus
 * 2 KiB plus 128 bytes, found without looking at its buffers); near the
 * limit, exactly.  The charge covers the out-of-order queue and the bytes
 * delivered to the application and not yet released with
 * zbuf_ip_tcp_recved().
 *
 * A segment that would take a connection past its limit is first collapsed
 * into a compact buffer (a counted copy) if that makes it cheaper; an
 * out-of-order queue beyond it is pruned from its far end; what still does
 * not fit is dropped (zbuf_ip_stats_t::tcp_rcv_mem_drops) and the peer sends
 * it again.  The window advertised follows the memory left: the free part
 * of the limit times the ratio of payload to charge seen on the
 * connection (as Linux's scaling_ratio), so that a peer sending tiny
 * segments sees the window close instead of filling memory, and a peer
 * sending full-sized ones gets the whole #ZBUF_IP_TCP_RCV_BUF.
 */

/** Receive memory limit per connection, as a multiple of its receive
 *  window (run-time: zbuf_ip_config_t::tcp_rcv_mem sets it in bytes).
 *  Three times lets full-sized segments use the whole window in every
 *  buffer layout: 1448 bytes cost 1646 in a TAP buffer, 2176 in a 2 KiB
 *  pool buffer and 3624 as a slice of a large buffer shared with the
 *  sender (the in-memory link); Linux's receive buffer is twice its window
 *  for the same reason.  With the defaults: 768 KiB. */
#ifndef ZBUF_IP_TCP_RCV_MEM_MULT
#define ZBUF_IP_TCP_RCV_MEM_MULT 3
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

/*
 * SYN flood defence.
 *
 * - SYN cookies (RFC 4987), on by default (run-time switch
 *   zbuf_ip_config_t::tcp_no_syncookies): a SYN that finds its listener's
 *   backlog of half-open connections full, or no PCB free, is answered by a
 *   SYN-ACK whose initial sequence number encodes the connection, and
 *   nothing is kept.  The scheme is Linux's: ISN = H1(4-tuple) + the peer's
 *   ISN + (minute counter << 24) + ((H2(4-tuple, counter) + MSS index) mod
 *   2^24), H1 and H2 keyed SipHash-2-4, the MSS one of 536, 1300, 1440 and
 *   1460 (the largest not above the peer's); with timestamps, the low six
 *   bits of our TSval carry the peer's window scale (4 bits, 15 for none)
 *   and SACK-permitted (1 bit), and come back in the TSecr of the ACK.
 *   Without timestamps the SYN-ACK offers neither window scaling nor SACK
 *   (as Linux).  An ACK that completes a cookie within
 *   #ZBUF_IP_TCP_COOKIE_AGE_MS of the SYN creates the connection, if the
 *   listener sent cookies lately.
 * - Fewer SYN-ACK retransmissions under pressure: while a listener's
 *   backlog is half full or it sent SYN cookies in the last
 *   #ZBUF_IP_TCP_COOKIE_AGE_MS, a half-open connection gets
 *   #ZBUF_IP_TCP_SYNACK_RETRIES_PRESSURE retransmissions, not
 *   #ZBUF_IP_TCP_SYN_RETRIES, so that those from spoofed sources go within
 *   seconds instead of two minutes.
 * - Early drop: when every PCB is taken, a new connection (passive or
 *   active) recycles the oldest TIME_WAIT PCB the application gave back,
 *   or else the oldest half-open connection whose SYN-ACK already went
 *   unanswered; an ICMP destination unreachable about a half-open
 *   connection ends it at once.
 */

/** SYN-ACK retransmissions of a half-open connection while its listener's
 *  backlog is at least half full. */
#ifndef ZBUF_IP_TCP_SYNACK_RETRIES_PRESSURE
#define ZBUF_IP_TCP_SYNACK_RETRIES_PRESSURE 2
#endif

/** Lifetime of a SYN cookie, milliseconds: two to three ticks of its
 *  64-second counter, about Linux's two minutes. */
#ifndef ZBUF_IP_TCP_COOKIE_AGE_MS
#define ZBUF_IP_TCP_COOKIE_AGE_MS 128000
#endif

/** Delayed-ACK timeout, milliseconds (RFC 9293: under 500 ms). */
#ifndef ZBUF_IP_TCP_DELACK_MS
#define ZBUF_IP_TCP_DELACK_MS 40
#endif

/** In-order segments one ACK may cover when they arrive in one receive
 *  batch (the frames a driver hands over in one zbuf_ip_poll()).  Within a
 *  batch the ACK that every second segment would draw waits for the end of
 *  the batch, and goes at once only when this many are unacknowledged:
 *  like Linux, which acknowledges a GRO packet of up to 64 KiB as one
 *  segment.  2 restores an ACK for every second segment. */
#ifndef ZBUF_IP_TCP_ACK_BATCH_SEGS
#define ZBUF_IP_TCP_ACK_BATCH_SEGS 64
#endif

/** TIME_WAIT duration (2 MSL), milliseconds.  Run-time:
 *  zbuf_ip_config_t::tcp_time_wait_ms. */
#ifndef ZBUF_IP_TCP_TIME_WAIT_MS
#define ZBUF_IP_TCP_TIME_WAIT_MS 60000
#endif

/*
 * Challenge ACKs (RFC 5961) are limited as Linux limits them since
 * CVE-2016-5696: per connection, at most one every
 * #ZBUF_IP_TCP_INVALID_RATELIMIT_MS (the same limit as the ACKs to
 * PAWS-dropped and out-of-window segments without payload); and per stack a
 * budget per second that is drawn at random each second between half and
 * one and a half times #ZBUF_IP_TCP_CHALLENGE_ACKS.  An off-path attacker
 * can therefore neither exhaust a budget shared with the connection it
 * probes nor count the ACKs of a fixed one to learn whether the
 * connection exists.
 */

/** Challenge ACKs per second per stack, on average (see above). */
#ifndef ZBUF_IP_TCP_CHALLENGE_ACKS
#define ZBUF_IP_TCP_CHALLENGE_ACKS 1000
#endif

/** Smallest path MTU an ICMP "fragmentation needed" message may set for a
 *  connection (path-MTU discovery, RFC 1191): below it the message is
 *  taken as this value, so that forged messages cannot make the stack send
 *  tiny segments (Linux's min_pmtu: 552). */
#ifndef ZBUF_IP_TCP_PMTU_MIN
#define ZBUF_IP_TCP_PMTU_MIN 552
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
#if ZBUF_IP_ARP_ENTRIES < 1 || ZBUF_IP_ARP_PENDING < 1 || ZBUF_IP_ARP_QUEUE < 1 || \
    ZBUF_IP_ARP_TRIES < 1 || ZBUF_IP_ARP_REQUESTS_PER_SEC < 1
#error "ARP tables, queue, tries and request rate must be at least 1"
#endif
#if ZBUF_IP_RX_PRESSURE_DIV < 2 || ZBUF_IP_RX_RESERVE_DIV <= ZBUF_IP_RX_PRESSURE_DIV
#error "need 2 <= ZBUF_IP_RX_PRESSURE_DIV < ZBUF_IP_RX_RESERVE_DIV (the reserve below the pressure mark)"
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
#if ZBUF_IP_TCP_ACK_BATCH_SEGS < 2
#error "ZBUF_IP_TCP_ACK_BATCH_SEGS must be at least 2"
#endif
#if ZBUF_IP_TCP_BURST < 1 || ZBUF_IP_TCP_INIT_CWND < 1 || ZBUF_IP_TCP_OOO_SEGS < 0
#error "burst and initial window must be at least 1"
#endif
#if ZBUF_IP_TCP_RCV_MEM_MULT < 1 || ZBUF_IP_TCP_RCV_MEM_MULT > 64
#error "ZBUF_IP_TCP_RCV_MEM_MULT must be 1..64"
#endif
#if ZBUF_IP_TCP_SYNACK_RETRIES_PRESSURE < 0 || ZBUF_IP_TCP_SYNACK_RETRIES_PRESSURE > ZBUF_IP_TCP_SYN_RETRIES
#error "ZBUF_IP_TCP_SYNACK_RETRIES_PRESSURE must be 0..ZBUF_IP_TCP_SYN_RETRIES"
#endif
#if ZBUF_IP_TCP_COOKIE_AGE_MS < 64000 || ZBUF_IP_TCP_COOKIE_AGE_MS > 64000 * 200
#error "ZBUF_IP_TCP_COOKIE_AGE_MS must be 64000..12800000 (the counter has 8 bits)"
#endif
#if ZBUF_IP_TCP_CHALLENGE_ACKS < 2
#error "ZBUF_IP_TCP_CHALLENGE_ACKS must be at least 2"
#endif
#if ZBUF_IP_TCP_PMTU_MIN < 68 || ZBUF_IP_TCP_PMTU_MIN > 1500
#error "ZBUF_IP_TCP_PMTU_MIN must be 68..1500"
#endif
#if ZBUF_IP_TCP_TX_SEGS_MAX < 16 || (ZBUF_IP_TCP_TX_SEGS_MAX & (ZBUF_IP_TCP_TX_SEGS_MAX - 1))
#error "ZBUF_IP_TCP_TX_SEGS_MAX must be a power of two, at least 16"
#endif

#endif /* ZBUF_IP_OPTS_H */
