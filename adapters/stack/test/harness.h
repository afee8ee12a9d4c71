/* SPDX-License-Identifier: MIT */
/*
 * Test helpers of the stack: a virtual clock, two stacks joined by an
 * in-memory link and run until a condition holds, a capturing driver for
 * unit tests on crafted frames, and packet builders.
 */
#ifndef ZBUF_STACK_TEST_HARNESS_H
#define ZBUF_STACK_TEST_HARNESS_H

#include <stdbool.h>
#include <stdint.h>
#include <zbuf/ip.h>

#define ZH_A ZBUF_IP_ADDR(192, 0, 2, 1)
#define ZH_B ZBUF_IP_ADDR(192, 0, 2, 2)
extern const uint8_t zh_mac_a[6], zh_mac_b[6];

/* Virtual clock: a uint64_t of milliseconds. */
uint64_t zh_clock(void *arg);

/* ------------------------------------------------ two stacks over a link */
typedef struct zh_pair {
    uint64_t now;
    zbuf_ip_stack_t *a, *b;
    zbuf_ip_link_t *link;
    zbuf_ip_netif_t *na, *nb;
} zh_pair_t;

/* Two stacks (A = 192.0.2.1, B = 192.0.2.2 on a /24) over a link with
 * config `lc` (NULL: perfect); `base` (NULL: defaults) is the stack config,
 * its clock replaced by the pair's virtual clock. */
void zh_pair_init(zh_pair_t *p, const zbuf_ip_link_config_t *lc, const zbuf_ip_config_t *base);
/* The same with both interfaces at `mtu` (0: 1500). */
void zh_pair_init_mtu(zh_pair_t *p, const zbuf_ip_link_config_t *lc, const zbuf_ip_config_t *base,
                      uint16_t mtu);
void zh_pair_fini(zh_pair_t *p);
/* Poll both stacks, advancing virtual time to the next deadline whenever
 * nothing is left to do, until cond(arg) holds (true) or `max_ms` of
 * virtual time passed or nothing is left at all (false).  cond may be NULL:
 * run until idle or max_ms. */
bool zh_pair_run(zh_pair_t *p, bool (*cond)(void *), void *arg, uint64_t max_ms);

/* A stall of the path towards `stalled` (one of p->a, p->b): for `ms` of
 * virtual time only the other stack is polled and its timers run, so what
 * it sends waits in the link and nothing comes back; frames due by then
 * are delivered together when `stalled` is polled again (a delay spike). */
void zh_pair_stall(zh_pair_t *p, zbuf_ip_stack_t *stalled, uint64_t ms);

/* ---------------------------------------- one stack with a capture driver */
#define ZH_CAP_MAX 64
typedef struct zh_single {
    uint64_t now;
    zbuf_ip_stack_t *s;
    zbuf_ip_netif_t *nif;
    zbuf_t *tx[ZH_CAP_MAX]; /* frames the stack sent, oldest first */
    int ntx;
    zbuf_t *rxq[ZH_CAP_MAX]; /* frames zh_queue() queued for the next poll */
    int nrxq;
} zh_single_t;

/* Stack with address 192.0.2.1/24, MAC zh_mac_a. */
void zh_single_init(zh_single_t *u, const zbuf_ip_config_t *base);
void zh_single_fini(zh_single_t *u);
/* Delete the captured frames. */
void zh_single_clear(zh_single_t *u);
/* Make the stack learn B's MAC (an ARP request for A from B), then drop
 * the captured reply. */
void zh_learn_peer(zh_single_t *u);
/* Copy frame i into buf (at most cap bytes); returns its length. */
size_t zh_tx_bytes(zh_single_t *u, int i, uint8_t *buf, size_t cap);
/* Feed raw frame bytes (copied into a fresh zbuf split into segments of
 * `chunk` bytes, 0 = one segment). */
int zh_input(zh_single_t *u, const uint8_t *frame, size_t len, size_t chunk);

/* Queue raw frame bytes for the driver's poll: the next zbuf_ip_poll()
 * hands every queued frame to the stack in one receive batch. */
void zh_queue(zh_single_t *u, const uint8_t *frame, size_t len);

/* Feed raw frame bytes the way a driver loans its buffers: the bytes go
 * into one fresh malloc'd buffer (the "DMA", not a library copy) enrolled
 * with a release callback that frees it and increments *released. */
int zh_input_loaned(zh_single_t *u, const uint8_t *frame, size_t len, int *released);
/* Make the stack learn B's MAC (an ARP request from B), then forget the
 * frames it sent. */
void zh_learn_b(zh_single_t *u);

/* ------------------------------------------------------ packet builders */
/* Ethernet header from B to A with type; returns 14. */
size_t zh_eth(uint8_t *p, const uint8_t dst[6], const uint8_t src[6], uint16_t type);
/* IPv4 header (20 bytes, checksum set) for a payload of plen bytes. */
size_t zh_ip(uint8_t *p, uint32_t src, uint32_t dst, uint8_t proto, size_t plen);
/* TCP/UDP checksum over pseudo-header + seg (field must be zero); returns value to store. */
uint16_t zh_l4_csum(uint32_t src, uint32_t dst, uint8_t proto, const uint8_t *seg, size_t len);
uint16_t zh_csum(const uint8_t *p, size_t len);
/* Whole Ethernet+IPv4+TCP frame from B:sport to A:dport.  opts may be NULL.
 * Returns the frame length. */
size_t zh_tcp_frame(uint8_t *buf, uint16_t sport, uint16_t dport, uint32_t seq, uint32_t ack,
                    uint8_t flags, uint16_t wnd, const uint8_t *opts, size_t optlen,
                    const uint8_t *data, size_t dlen);

/* A parsed TCP segment the single stack sent. */
typedef struct zh_tcp_seg {
    uint16_t sport, dport;
    uint32_t seq, ack;
    uint8_t flags;
    uint16_t wnd;
    size_t hlen, dlen;
    uint16_t mss;   /* from options, 0 if none */
    int wscale;     /* -1 if none */
    bool sackok;
    int nsack;          /* SACK blocks */
    uint32_t sack[4][2];
    bool has_ts;        /* timestamps option (RFC 7323) */
    uint32_t tsval, tsecr;
} zh_tcp_seg_t;
/* Parse captured frame i as TCP; false if it is not one. */
bool zh_tx_tcp(zh_single_t *u, int i, zh_tcp_seg_t *out);

/* Deterministic pattern byte at stream offset off (for byte-exact checks). */
static inline uint8_t zh_pattern(uint64_t off, uint32_t salt)
{
    uint64_t x = (off >> 3) * 0x9e3779b97f4a7c15ull + salt;
    x ^= x >> 29;
    return (uint8_t)(x >> (8 * (off & 7)));
}

/* A zbuf of one enrolled heap buffer holding zh_pattern(off + i, salt) for
 * i < n (n > 0), freed by its release callback. */
zbuf_t *zh_pattern_zbuf(uint64_t off, size_t n, uint32_t salt);

#endif
