/* SPDX-License-Identifier: MIT */
/*
 * Test helpers of zbuf-stack-uv: a libuv loop with a watchdog, two stacks on
 * the real clock joined by an in-memory link and attached to the loop, and a
 * bulk sender/receiver pair counting release callbacks.
 */
#ifndef ZBUF_STACK_UV_TEST_PAIR_H
#define ZBUF_STACK_UV_TEST_PAIR_H

#include <stdbool.h>
#include <stdint.h>
#include <zbuf/ip_uv.h>

#include "harness.h"
#include "support.h"

uint64_t up_now_ms(void);
/* A new malloc'ed buffer of `n` bytes of zh_pattern(i, salt); free() it. */
uint8_t *up_pattern(size_t n, uint32_t salt);

/* ------------------------------------------------------------- two stacks */
typedef struct up_pair {
    uv_loop_t loop;
    uv_timer_t watchdog;
    bool timed_out;
    zbuf_ip_stack_t *a, *b;
    zbuf_ip_link_t *link;
    zbuf_ip_netif_t *na, *nb;
    zbuf_ip_uv_t *ua, *ub;
    int closed; /* close callbacks of ua and ub */
} up_pair_t;

/* Stacks A (192.0.2.1) and B (192.0.2.2) with config `cfg` (NULL: defaults,
 * the real clock in any case) over a link `lc` (NULL: perfect), both
 * attached to p->loop; a watchdog ends the run after `limit_ms`. */
void up_pair_init(up_pair_t *p, const zbuf_ip_config_t *cfg, const zbuf_ip_link_config_t *lc,
                  uint64_t limit_ms);
/* Close both integrations (if not yet); close callbacks count in p->closed. */
void up_pair_detach(up_pair_t *p);
/* Detach, run the loop dry, delete stacks and link, assert the loop has no
 * handle left. */
void up_pair_fini(up_pair_t *p);

/* ------------------------------------------------ bulk one-way transfer */
#define UP_CHUNK 65536
#define UP_MAX_CHUNKS 1024

typedef struct up_bulk {
    up_pair_t *p;
    size_t total;              /* bytes to send A -> B */
    size_t sent, received;
    int mismatches;
    int chunks;                /* chunks written (each one buffer) */
    int released[UP_MAX_CHUNKS]; /* release callbacks per chunk */
    int releases;              /* sum of released[] */
    bool eof;                  /* B saw the FIN */
    bool detach_when_done;     /* close the integrations once complete */
    uint8_t *data;
    zbuf_ip_tcp_t *client, *listener, *server;
    int errors;
} up_bulk_t;

/* Start A connecting to B:7 and streaming `total` bytes (by reference, one
 * enrolled buffer per chunk) that B checks byte by byte. */
void up_bulk_start(up_bulk_t *k, up_pair_t *p, size_t total);
/* Free the data (after the stacks are gone: the queue references it). */
void up_bulk_free(up_bulk_t *k);

#endif
