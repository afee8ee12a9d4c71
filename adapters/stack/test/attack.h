/* SPDX-License-Identifier: MIT */
/*
 * An attacker on the in-memory link, for the hardening tests.
 *
 * Three stations share one Ethernet segment: the victim, stack A
 * (192.0.2.1), which reads into a receive pool as a NIC would (the link's
 * copy_to_pool mode); stack B (192.0.2.2), the legitimate user; and the
 * attacker, who forges whatever frames it likes (injected from B's side of
 * the link, so they meet A's pool like any other) and sees every frame A
 * sends (the link's monitor), which lets it complete handshakes from
 * addresses it does not own.  A runs the services the issue attacked in
 * zbuf-stack-demo: TCP echo on port 7 (zero copy, the received zbufs go
 * back out) and UDP echo on port 7.
 *
 * Virtual time: hx_run() polls both stacks and moves the clock on when
 * neither has anything to do.
 */
#ifndef ZBUF_STACK_TEST_ATTACK_H
#define ZBUF_STACK_TEST_ATTACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "harness.h"

#define HX_ECHO 7
#define HX_HDR 128 /* bytes of each frame of A kept by the capture */

typedef struct hx_frame {
    uint16_t len;
    uint8_t b[HX_HDR];
} hx_frame_t;

/* The services the issue attacked in zbuf-stack-demo, on any stack: TCP
 * echo on port 7 (zero copy: the received zbufs go back out, the window
 * reopening as the send queue takes them) and UDP echo on port 7. */
struct hx_echo {
    struct hx_svc *v;
    zbuf_ip_tcp_t *pcb;
    zbuf_t *pending;
    bool eof;
    struct hx_echo *next;
};

typedef struct hx_svc {
    zbuf_ip_tcp_t *echo_l; /* the TCP echo listener */
    zbuf_ip_udp_t *echo_u; /* the UDP echo */
    struct hx_echo *conns; /* its connections */
    long echoed;           /* bytes the TCP echo sent back */
} hx_svc_t;

void hx_svc_start(hx_svc_t *v, zbuf_ip_stack_t *s);
/* Close the listener and UDP PCB, abort the connections. */
void hx_svc_stop(hx_svc_t *v);

typedef struct hx {
    zh_pair_t p;
    hx_frame_t *cap; /* frames A sent, oldest first (their first HX_HDR bytes) */
    size_t ncap, capmax;
    int pongs;       /* echo replies B got */
    uint16_t pong_seq;
    uint64_t pong_at;
    hx_svc_t svc;    /* A's services */
} hx_t;

/* A and B on a copy_to_pool link with `pool_bufs` receive buffers per side
 * (0: no pool, the shared zero-copy link), both with config `cfg` (NULL:
 * defaults); A's services listening, the two neighbours known to each
 * other (a ping each way). */
void hx_init(hx_t *h, uint32_t pool_bufs, const zbuf_ip_config_t *cfg);
void hx_fini(hx_t *h);
/* Poll both stacks for `ms` of virtual time. */
void hx_run(hx_t *h, uint64_t ms);
/* Poll until cond(arg) or `ms` passed; returns cond's last value. */
bool hx_until(hx_t *h, bool (*cond)(void *), void *arg, uint64_t ms);
/* Forget the captured frames. */
void hx_cap_clear(hx_t *h);
/* The stats of a stack. */
zbuf_ip_stats_t hx_stats(zbuf_ip_stack_t *s);

/* After an attack: A answers a ping from B within a second of virtual time
 * (asserted, and returned in ms), and a new connection from B moves
 * `bytes` through A's echo service and back, byte for byte. */
uint64_t hx_check_recovered(hx_t *h, size_t bytes);
/* B pings A once; true if the reply came within `ms`. */
bool hx_ping(hx_t *h, uint64_t ms);

/* ------------------------------------------------------------ forging */

/* The attacker's MAC address for a forged IPv4 address. */
void hx_mac(uint32_t ip, uint8_t mac[6]);
/* Put raw frame bytes on the wire (towards A). */
void hx_inject(hx_t *h, const uint8_t *frame, size_t len);
/* An ARP request from `ip` (with hx_mac(ip)) for A: A learns the address. */
void hx_arp_announce(hx_t *h, uint32_t ip);
/* An IPv4 datagram from `src` (link source hx_mac(src), or `smac`) to
 * `dst` (link destination A, or broadcast when `l2_bcast`) carrying `l4`
 * (`len` bytes of a transport header and payload whose checksum field is
 * filled in here for TCP and UDP). */
void hx_ip(hx_t *h, const uint8_t *smac, uint32_t src, uint32_t dst, bool l2_bcast, uint8_t proto,
           const uint8_t *l4, size_t len);
/* A TCP segment from src:sport to A:dport. */
void hx_tcp(hx_t *h, uint32_t src, uint16_t sport, uint16_t dport, uint32_t seq, uint32_t ack,
            uint8_t flags, uint16_t wnd, const uint8_t *opts, size_t optlen, const uint8_t *data,
            size_t dlen);
/* A UDP datagram from src:sport to dst:dport (dst may be a broadcast). */
void hx_udp(hx_t *h, uint32_t src, uint16_t sport, uint32_t dst, uint16_t dport,
            const uint8_t *data, size_t dlen);
/* An ICMP message from `src` to A: type, code, the 4 rest-of-header bytes,
 * then `data`. */
void hx_icmp(hx_t *h, uint32_t src, uint8_t type, uint8_t code, uint32_t rest,
             const uint8_t *data, size_t dlen);

/* A TCP segment A sent, parsed from the capture. */
typedef struct hx_seg {
    zh_tcp_seg_t t;
    uint32_t src, dst;      /* IP addresses */
    uint8_t eth_dst[6];
} hx_seg_t;
/* The next TCP segment A sent from capture index *i on (advanced past
 * it); false when there is none. */
bool hx_next_tcp(hx_t *h, size_t *i, hx_seg_t *out);
/* Frames A sent from capture index `from` on whose IP destination is
 * `dst` (any IP frame for 0). */
int hx_count_to(hx_t *h, size_t from, uint32_t dst);

/* A connection the attacker holds from a forged address. */
typedef struct hx_conn {
    uint32_t ip;
    uint16_t port;
    uint32_t snd_nxt, rcv_nxt; /* the attacker's view */
    uint16_t a_wnd;            /* the window field A advertised last */
} hx_conn_t;
/* Open `c` (ip and port set) to A:dport: announce the address, SYN with
 * the MSS option and `syn_opts` after it, read A's SYN-ACK from the
 * capture, ACK it with window `wnd`.  Asserts it worked. */
void hx_conn_open(hx_t *h, hx_conn_t *c, uint16_t dport, uint16_t wnd, const uint8_t *syn_opts,
                  size_t optlen);
/* A segment on `c` at seq `c->snd_nxt + off` (not advancing snd_nxt). */
void hx_conn_send(hx_t *h, hx_conn_t *c, uint16_t dport, uint32_t off, uint8_t flags,
                  uint16_t wnd, const uint8_t *data, size_t dlen);

#endif
