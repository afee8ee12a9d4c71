/* SPDX-License-Identifier: MIT */
/*
 * The stack object, interfaces, and the layers below TCP: Ethernet II, ARP,
 * IPv4, ICMP echo and UDP.
 *
 * Receive path: zbuf_ip_netif_input() gets a frame the driver loaned; each
 * layer validates its header (read in place when contiguous, see
 * zbuf_ip__hdr()), cuts it off the front and passes the rest up.  Whatever
 * is not passed up is deleted, which returns the driver's buffers.
 *
 * Send path: each layer prepends its header with zbuf_prepend_space(),
 * which writes into the first segment's headroom when that buffer is
 * private to the packet and adds a small header segment otherwise (always
 * the case for TCP data, whose buffers the retransmission queue shares).
 * TCP takes a shorter way for the common case: each connection caches its
 * route (struct zbuf_ip__txroute: interface, next hop's ARP entry, the
 * Ethernet and IP headers ready but for the length and checksum), valid
 * while s->tx_gen has not moved (every interface or ARP table change bumps
 * it).  A segment that fits the MTU then gets its Ethernet, IP and TCP
 * headers in one zbuf_prepend_space() and goes straight to the driver
 * (zbuf_ip__route_ready(), zbuf_ip__output_ready()): the same bytes, the
 * same counters and ARP bookkeeping as zbuf_ip__output(), which takes
 * everything else (fragments, ARP to resolve, a stale route, UDP, ICMP).
 *
 * IPv4 fragments are reassembled in reasm.c; a datagram larger than the
 * interface's MTU leaves as fragments, each a zbuf_dup() of its byte range
 * behind its own IP header.  It is cut only when it is handed to the
 * driver (ip_transmit()), after ARP resolved the next hop: a datagram
 * waiting for ARP is queued whole, like Linux queues the whole skb in the
 * neighbour entry, so its size does not decide whether it survives.
 *
 * Failure strategy of the send functions that consume a packet: once a
 * packet is accepted it is either handed to a driver or deleted here; the
 * return value only says which.
 */
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>

#include "stack_internal.h"

static const uint8_t bcast_mac[ETH_ALEN] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

/* ------------------------------------------------------------ utilities */

const uint8_t *zbuf_ip__hdr(const zbuf_t *z, size_t off, size_t len, uint8_t *tmp)
{
    const void *p;
    int rc = zbuf_peek(z, off, len, NULL, &p);
    if (rc == 0)
        return p;
    if (rc != -EAGAIN)
        return NULL;
    /* The header straddles segments: gather it into the caller's scratch.
     * These are header bytes being parsed, not payload. */
    size_t in = 0, done = 0;
    zbuf_seg_t *seg = zbuf_seg_find(z, off, &in);
    while (seg != NULL && done < len) {
        const uint8_t *d = zbuf_seg_data(z, seg);
        if (d == NULL)
            return NULL;
        size_t n = zbuf_seg_length(z, seg) - in;
        if (n > len - done)
            n = len - done;
        memcpy(tmp + done, d + in, n);
        done += n;
        in = 0;
        seg = zbuf_seg_next(z, seg);
    }
    return done == len ? tmp : NULL;
}

size_t zbuf_ip__pinned(const zbuf_t *z)
{
    size_t c = 0;
    for (zbuf_seg_t *g = zbuf_seg_first(z); g != NULL; g = zbuf_seg_next(z, g)) {
        size_t len = zbuf_seg_length(z, g);
        zbuf_buf_t *b = zbuf_seg_buf(z, g);
        size_t size = b != NULL ? zbuf_buf_size(b) : len;
        c += size > len + ZBUF_IP__SLACK ? len + ZBUF_IP__SLACK : size > len ? size : len;
    }
    return c;
}

static uint64_t mono_ms(void *arg)
{
    (void)arg;
    /* The coarse clock is enough for millisecond timers and costs a fraction
     * of CLOCK_MONOTONIC; the stack reads it on every poll. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void zbuf_ip__tick(zbuf_ip_stack_t *s)
{
    if (s->depth > 0)
        return; /* inside a poll or another entry point: its sample holds */
    uint64_t t = s->cfg.clock(s->cfg.clock_arg);
    if (t > s->now)
        s->now = t;
}

/* Public entry points nest (a callback may call into the stack); PCBs
 * closed meanwhile are freed when the outermost one returns. */
static void enter(zbuf_ip_stack_t *s)
{
    if (s->depth == 0)
        zbuf_ip__tick(s);
    s->depth++;
}

static void rx_prune(zbuf_ip_stack_t *s);

static void leave(zbuf_ip_stack_t *s)
{
    if (s->depth == 1 && s->rx_prune_pending)
        rx_prune(s); /* out of every protocol's processing: lists may change */
    if (--s->depth == 0)
        zbuf_ip__tcp_reap(s);
}

static bool is_bcast(const zbuf_ip_netif_t *nif, uint32_t a)
{
    return a == IP_BROADCAST || (nif->mask != 0xffffffffu && a == (nif->cfg.addr | ~nif->mask));
}

/* Addresses that are never a datagram's source (RFC 1122 3.2.1.3 and
 * 3.2.1.7): multicast and class E (the limited broadcast among them),
 * loopback, "this network" 0/8, and for every attached subnet its directed
 * broadcast and its all-zeros host (the obsolete broadcast form); with
 * `or_ours`, our own addresses as well.  0.0.0.0 itself is for the caller
 * to judge (a host booting may use it). */
static bool martian(const zbuf_ip_stack_t *s, const zbuf_ip_netif_t *nif, uint32_t a,
                    bool or_ours)
{
    if ((a >> 28) >= 0xe || (a >> 24) == 127 || (a >> 24) == 0)
        return true;
    if (nif && (a & nif->mask) == (nif->cfg.addr & nif->mask)) {
        /* On the link it came from (the common case): that subnet's own
         * special addresses are the only ones it can be. */
        if (or_ours && a == nif->cfg.addr)
            return true;
        if (nif->cfg.prefix_len <= 30 &&
            (a == (nif->cfg.addr | ~nif->mask) || a == (nif->cfg.addr & nif->mask)))
            return true;
        if (s->nnetifs == 1)
            return false; /* no other subnet to be special in */
    }
    for (int i = 0; i < ZBUF_IP_MAX_NETIFS; i++) {
        const zbuf_ip_netif_t *n = &s->netifs[i];
        if (!n->in_use)
            continue;
        if ((or_ours && a == n->cfg.addr) ||
            (n->cfg.prefix_len <= 30 &&
             (a == (n->cfg.addr | ~n->mask) || a == (n->cfg.addr & n->mask))))
            return true;
    }
    return false;
}

uint16_t zbuf_ip__ephemeral(zbuf_ip_stack_t *s, uint32_t addr,
                            bool (*in_use)(zbuf_ip_stack_t *s, uint32_t addr, uint16_t port))
{
    for (int tries = 0; tries < PORT_DYNAMIC_COUNT; tries++) {
        uint16_t p = s->next_port++;
        if (s->next_port == 0)
            s->next_port = PORT_DYNAMIC_MIN;
        if (p >= PORT_DYNAMIC_MIN && !in_use(s, addr, p))
            return p;
    }
    return 0;
}

uint32_t zbuf_ip__random(zbuf_ip_stack_t *s)
{
    /* xorshift64*, seeded from the stack's key */
    s->rng ^= s->rng >> 12;
    s->rng ^= s->rng << 25;
    s->rng ^= s->rng >> 27;
    return (uint32_t)((s->rng * 0x2545f4914f6cdd1dull) >> 32);
}

/* ------------------------------------------------------- receive memory */

int zbuf_ip__collapse(zbuf_ip_stack_t *s, zbuf_t *z)
{
    size_t len = zbuf_length(z);
    if (len == 0)
        return 0;
    zbuf_buf_t *b;
    int rc = zbuf_buf_alloc(len, &b);
    if (rc)
        return rc;
    ssize_t n = zbuf_copyout(z, 0, zbuf_buf_data(b), len); /* the counted copy */
    if (n != (ssize_t)len) {
        zbuf_buf_unref(b);
        return n < 0 ? (int)n : -EIO;
    }
    rc = zbuf_insert_ref(z, len, b, 0, len, NULL);
    zbuf_buf_unref(b); /* the new segment holds it */
    if (rc)
        return rc;
    /* Cut exactly the old segments: a cut on a segment boundary needs no
     * new descriptor, so it cannot fail; the driver's buffers go back. */
    zbuf_cut(z, 0, len, NULL);
    s->st.rx_collapses++;
    s->st.rx_collapsed_bytes += len;
    return 0;
}

int zbuf_ip__rx_level(zbuf_ip_stack_t *s)
{
    if (s->rx_pool == NULL)
        return ZBUF_IP__RX_OK;
    if (s->rx_level < 0) {
        size_t cap = zbuf_pool_capacity(s->rx_pool), left = zbuf_pool_available(s->rx_pool);
        size_t reserve = cap / ZBUF_IP_RX_RESERVE_DIV;
        if (reserve < 1)
            reserve = 1;
        if (left <= reserve) {
            s->rx_level = ZBUF_IP__RX_RESERVE;
            if (!s->rx_pruned)
                s->rx_prune_pending = true;
        } else if (left <= cap / ZBUF_IP_RX_PRESSURE_DIV) {
            s->rx_level = ZBUF_IP__RX_PRESSURE;
        } else {
            s->rx_level = ZBUF_IP__RX_OK;
            s->rx_pruned = false; /* the next time the reserve is reached, prune again */
            /* Half the distance to the mark, to be safe: no need to look
             * (a lock) for so many frames. */
            s->rx_ok_pool = s->rx_pool;
            s->rx_ok_frames = (left - cap / ZBUF_IP_RX_PRESSURE_DIV) / 2;
        }
    }
    return s->rx_level;
}

int zbuf_ip__rx_hold_slow(zbuf_ip_stack_t *s, zbuf_t *z, bool speculative)
{
    int level = zbuf_ip__rx_level(s);
    if (level == ZBUF_IP__RX_OK)
        return 0;
    size_t len = zbuf_length(z), pinned = zbuf_ip__pinned(z);
    if (level == ZBUF_IP__RX_RESERVE && speculative) {
        s->st.rx_pressure_drops++;
        return -ENOBUFS;
    }
    /* Reserve: whatever pins a buffer goes into a compact one.  Pressure:
     * only what uses less than half of what it pins. */
    bool collapse = level == ZBUF_IP__RX_RESERVE ? pinned > len : pinned > 2 * len;
    if (collapse && zbuf_ip__collapse(s, z) != 0 && level == ZBUF_IP__RX_RESERVE) {
        s->st.rx_pressure_drops++;
        return -ENOBUFS; /* no memory for the copy: do not pin the reserve either */
    }
    return 0;
}

/* The reserve was reached: free what pins pool buffers without being of
 * use yet (out-of-order segments, incomplete datagrams), so that the pool
 * comes back up even if those peers never fill their holes. */
static void rx_prune(zbuf_ip_stack_t *s)
{
    s->rx_prune_pending = false;
    s->rx_pruned = true;
    s->st.rx_pressure_prunes++;
    zbuf_ip__tcp_prune(s);
    zbuf_ip__reasm_flush(s, NULL);
}

/* ---------------------------------------------------------------- stack */

void zbuf_ip_config_init(zbuf_ip_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->tcp_snd_buf = ZBUF_IP_TCP_SND_BUF;
    cfg->tcp_rcv_buf = ZBUF_IP_TCP_RCV_BUF;
    cfg->tcp_rto_min_ms = ZBUF_IP_TCP_RTO_MIN_MS;
    cfg->tcp_time_wait_ms = ZBUF_IP_TCP_TIME_WAIT_MS;
    cfg->tcp_delack_ms = ZBUF_IP_TCP_DELACK_MS;
    cfg->ip_reassembly = true;
    cfg->ip_reasm_bytes = ZBUF_IP_REASM_BYTES;
    cfg->ip_reasm_timeout_ms = ZBUF_IP_REASM_TIMEOUT_MS;
}

int zbuf_ip_stack_create(const zbuf_ip_config_t *cfg, zbuf_ip_stack_t **out)
{
    if (out == NULL)
        return -EINVAL;
    zbuf_ip_config_t c;
    if (cfg)
        c = *cfg;
    else
        zbuf_ip_config_init(&c);
    if (c.tcp_rcv_mem == 0)
        c.tcp_rcv_mem = c.tcp_rcv_buf <= (1u << 30) / ZBUF_IP_TCP_RCV_MEM_MULT
                            ? ZBUF_IP_TCP_RCV_MEM_MULT * c.tcp_rcv_buf
                            : 1u << 30;
    if (c.tcp_snd_buf < 2048 || c.tcp_snd_buf > ZBUF_IP_TCP_SND_BUF_MAX ||
        c.tcp_rcv_mem < c.tcp_rcv_buf || c.tcp_rcv_mem > (1u << 30) ||
        c.tcp_rcv_buf < 2048 || c.tcp_rcv_buf > ZBUF_IP_TCP_RCV_BUF_MAX ||
        c.tcp_rto_min_ms < 1 || c.tcp_rto_min_ms > ZBUF_IP_TCP_RTO_MAX_MS ||
        c.tcp_delack_ms < 1 || c.tcp_delack_ms >= 500 || c.ip_reasm_bytes < 1 ||
        c.ip_reasm_bytes > ZBUF_IP_REASM_BYTES || c.ip_reasm_timeout_ms < 1 ||
        c.ip_reasm_timeout_ms > 120000)
        return -EINVAL;
    if (c.clock == NULL)
        c.clock = mono_ms;
    if (!c.isn_key_set) {
        if (getrandom(c.isn_key, sizeof c.isn_key, 0) != (ssize_t)sizeof c.isn_key) {
            /* No entropy source: fall back on the clock and addresses; ISNs
             * stay unpredictable only as far as those are. */
            uint64_t t = mono_ms(NULL) ^ (uint64_t)(uintptr_t)&c;
            memcpy(c.isn_key, &t, sizeof t);
        }
        c.isn_key_set = true;
    }
    zbuf_ip_stack_t *s = calloc(1, sizeof *s);
    if (s == NULL)
        return -ENOMEM;
    s->cfg = c;
    s->arp_next = ZBUF_IP_NEVER;
    s->tcp_next = ZBUF_IP_NEVER;
    s->tx_gen = 1;
    s->rx_level = -1;
    s->rng = zbuf_ip__siphash(c.isn_key, "rng", 3) | 1;
    s->next_port = (uint16_t)(PORT_DYNAMIC_MIN +
                              (c.isn_key[0] | (c.isn_key[1] << 8)) % PORT_DYNAMIC_COUNT);
    zbuf_ip__tick(s);
    s->arp_tokens = (uint64_t)ZBUF_IP_ARP_REQUESTS_PER_SEC * 1000;
    s->arp_tokens_at = s->now;
    zbuf_ip__tcp_challenge_window(s);
    *out = s;
    return 0;
}

void zbuf_ip__teardown_add(zbuf_ip_stack_t *s, struct zbuf_ip__teardown *t)
{
    t->next = s->teardowns;
    t->prev = &s->teardowns;
    if (s->teardowns)
        s->teardowns->prev = &t->next;
    s->teardowns = t;
}

void zbuf_ip__teardown_remove(struct zbuf_ip__teardown *t)
{
    *t->prev = t->next;
    if (t->next)
        t->next->prev = t->prev;
    t->next = NULL;
    t->prev = NULL;
}

static void arp_pend_drop(zbuf_ip_stack_t *s, struct arp_pending *e);

void zbuf_ip_stack_delete(zbuf_ip_stack_t *s)
{
    if (s == NULL)
        return;
    s->depth++; /* no reaping from inside the teardown */
    while (s->teardowns) {
        struct zbuf_ip__teardown *t = s->teardowns;
        zbuf_ip__teardown_remove(t);
        t->fn(t);
    }
    zbuf_ip__tcp_free_all(s);
    while (s->udps)
        zbuf_ip_udp_delete(s->udps);
    for (int i = 0; i < ZBUF_IP_MAX_NETIFS; i++)
        if (s->netifs[i].in_use)
            zbuf_ip_netif_remove(&s->netifs[i]);
    zbuf_ip__reasm_flush(s, NULL);
    free(s);
}

uint64_t zbuf_ip_now(const zbuf_ip_stack_t *s)
{
    return s ? s->cfg.clock(s->cfg.clock_arg) : 0;
}

void zbuf_ip_stats(const zbuf_ip_stack_t *s, zbuf_ip_stats_t *out)
{
    if (s && out) {
        *out = s->st;
        out->tcp_pcbs = s->ntcp;
        out->udp_pcbs = s->nudp;
    }
}

bool zbuf_ip__need_tx_csum(zbuf_ip_stack_t *s, uint32_t dst)
{
    if (s->offload_nifs == 0)
        return true; /* the common case: no route to look up */
    zbuf_ip_netif_t *nif = zbuf_ip__route(s, dst);
    return nif == NULL || !(nif->drv.flags & ZBUF_IP_DRV_CSUM_OFFLOAD);
}

bool zbuf_ip__is_local(const zbuf_ip_stack_t *s, uint32_t a)
{
    for (int i = 0; i < ZBUF_IP_MAX_NETIFS; i++)
        if (s->netifs[i].in_use && s->netifs[i].cfg.addr == a)
            return true;
    return false;
}

/* ------------------------------------------------------------ interfaces */

static bool mtu_ok(uint16_t mtu)
{
#if ZBUF_IP_MAX_MTU < 65535
    if (mtu > ZBUF_IP_MAX_MTU)
        return false;
#endif
    return mtu >= IP_MIN_MTU;
}

int zbuf_ip_netif_add(zbuf_ip_stack_t *s, const zbuf_ip_netif_config_t *cfg,
                      const zbuf_ip_driver_t *drv, void *ctx, zbuf_ip_netif_t **out)
{
    if (s == NULL || cfg == NULL || drv == NULL || drv->transmit == NULL || out == NULL ||
        cfg->prefix_len > 32 || (cfg->mtu != 0 && !mtu_ok(cfg->mtu)))
        return -EINVAL;
    for (int i = 0; i < ZBUF_IP_MAX_NETIFS; i++) {
        zbuf_ip_netif_t *n = &s->netifs[i];
        if (n->in_use || n->detach_pending)
            continue;
        memset(n, 0, sizeof *n);
        n->stack = s;
        n->cfg = *cfg;
        if (n->cfg.mtu == 0)
            n->cfg.mtu = ZBUF_IP__MTU_DEFAULT;
        n->mask = cfg->prefix_len ? ~0u << (32 - cfg->prefix_len) : 0;
        n->drv = *drv;
        n->ctx = ctx;
        n->in_use = true;
        s->nnetifs++;
        s->offload_nifs += (drv->flags & ZBUF_IP_DRV_CSUM_OFFLOAD) != 0;
        s->tx_gen++; /* a new subnet may take routes */
        *out = n;
        return 0;
    }
    return -ENOSPC;
}

void zbuf_ip_netif_remove(zbuf_ip_netif_t *nif)
{
    if (nif == NULL || !nif->in_use)
        return;
    zbuf_ip_stack_t *s = nif->stack;
    s->tx_gen++;
    for (int i = 0; i < ZBUF_IP_ARP_ENTRIES; i++)
        if (s->arp[i].valid && s->arp[i].nif == nif)
            memset(&s->arp[i], 0, sizeof s->arp[i]);
    for (int i = 0; i < ZBUF_IP_ARP_PENDING; i++)
        if (s->arp_pend[i].busy && s->arp_pend[i].nif == nif)
            arp_pend_drop(s, &s->arp_pend[i]);
    zbuf_ip__reasm_flush(s, nif);
    nif->in_use = false; /* no more frames in or out */
    s->nnetifs--;
    s->offload_nifs -= (nif->drv.flags & ZBUF_IP_DRV_CSUM_OFFLOAD) != 0;
    if (nif->polling) {
        /* Called from a callback of this driver's own poll(), which still
         * runs and may still use its context: detach once it returned. */
        nif->detach_pending = true;
        return;
    }
    if (nif->drv.detach)
        nif->drv.detach(nif->ctx);
}

zbuf_ip_netif_t *zbuf_ip_netif_next(zbuf_ip_stack_t *s, zbuf_ip_netif_t *prev)
{
    if (s == NULL)
        return NULL;
    int i = prev ? (int)(prev - s->netifs) + 1 : 0;
    for (; i >= 0 && i < ZBUF_IP_MAX_NETIFS; i++)
        if (s->netifs[i].in_use)
            return &s->netifs[i];
    return NULL;
}

zbuf_ip_stack_t *zbuf_ip_netif_stack(const zbuf_ip_netif_t *nif)
{
    return nif ? nif->stack : NULL;
}

uint32_t zbuf_ip_netif_addr(const zbuf_ip_netif_t *nif)
{
    return nif ? nif->cfg.addr : 0;
}

static int driver_tx(zbuf_ip_netif_t *nif, zbuf_t *frame)
{
    zbuf_ip_stack_t *s = nif->stack;
    s->st.tx_frames++;
    s->st.tx_bytes += zbuf_length(frame);
    return nif->drv.transmit(nif->ctx, frame);
}

/* Prepend an Ethernet header and transmit; consumes `pkt`. */
static int eth_output(zbuf_ip_netif_t *nif, zbuf_t *pkt, const uint8_t dst[ETH_ALEN], uint16_t type)
{
    uint8_t *h;
    if (zbuf_prepend_space(pkt, ETH_HLEN, (void **)&h) != 0) {
        zbuf_delete(pkt);
        return -ENOMEM;
    }
    memcpy(h, dst, ETH_ALEN);
    memcpy(h + ETH_ALEN, nif->cfg.mac, ETH_ALEN);
    put16(h + 12, type);
    return driver_tx(nif, pkt);
}

/* ------------------------------------------------------------------- ARP */

static int ip_transmit(zbuf_ip_netif_t *nif, const struct ip_dgram *d, const uint8_t mac[ETH_ALEN]);

static int arp_send(zbuf_ip_netif_t *nif, uint16_t op, const uint8_t tha[ETH_ALEN], uint32_t tpa,
                    const uint8_t eth_dst[ETH_ALEN])
{
    zbuf_t *z;
    uint8_t *a;
    if (zbuf_create(&z) != 0)
        return -ENOMEM;
    /* 28 bytes of ARP plus 18 of padding up to the 60-byte Ethernet minimum. */
    if (zbuf_append_space(z, ETH_ZLEN - ETH_HLEN, (void **)&a) != 0) {
        zbuf_delete(z);
        return -ENOMEM;
    }
    memset(a, 0, ETH_ZLEN - ETH_HLEN);
    put16(a, ARP_HTYPE_ETHER);
    put16(a + 2, ETH_TYPE_IP);
    a[4] = ETH_ALEN;
    a[5] = 4; /* bytes of an IPv4 address */
    put16(a + 6, op);
    memcpy(a + 8, nif->cfg.mac, ETH_ALEN);
    put32(a + 14, nif->cfg.addr);
    memcpy(a + 18, tha, ETH_ALEN);
    put32(a + 24, tpa);
    if (op == ARP_OP_REQUEST)
        nif->stack->st.arp_requests_tx++;
    else
        nif->stack->st.arp_replies_tx++;
    return eth_output(nif, z, eth_dst, ETH_TYPE_ARP);
}

/* Keep s->arp_next, the earliest ARP deadline, a lower bound. */
static void arp_note(zbuf_ip_stack_t *s, uint64_t deadline)
{
    if (deadline < s->arp_next)
        s->arp_next = deadline;
}

/* May an ARP request leave now (#ZBUF_IP_ARP_REQUESTS_PER_SEC)?  A token
 * bucket holding one second's worth, in thousandths of a request. */
static bool arp_token(zbuf_ip_stack_t *s)
{
    const uint64_t full = (uint64_t)ZBUF_IP_ARP_REQUESTS_PER_SEC * 1000;
    uint64_t dt = s->now - s->arp_tokens_at;
    s->arp_tokens_at = s->now;
    s->arp_tokens = dt >= 1000 ? full : s->arp_tokens + dt * ZBUF_IP_ARP_REQUESTS_PER_SEC;
    if (s->arp_tokens > full)
        s->arp_tokens = full;
    if (s->arp_tokens < 1000) {
        s->st.arp_requests_limited++;
        return false;
    }
    s->arp_tokens -= 1000;
    return true;
}

static void arp_request(zbuf_ip_netif_t *nif, uint32_t ip)
{
    static const uint8_t zero[ETH_ALEN];
    if (arp_token(nif->stack))
        arp_send(nif, ARP_OP_REQUEST, zero, ip, bcast_mac);
}

static struct arp_entry *arp_find(zbuf_ip_stack_t *s, const zbuf_ip_netif_t *nif, uint32_t ip)
{
    for (int i = 0; i < ZBUF_IP_ARP_ENTRIES; i++) {
        struct arp_entry *e = &s->arp[i];
        if (e->valid && e->ip == ip && e->nif == nif)
            return e;
    }
    return NULL;
}

static struct arp_pending *arp_pend_find(zbuf_ip_stack_t *s, const zbuf_ip_netif_t *nif,
                                         uint32_t ip)
{
    for (int i = 0; i < ZBUF_IP_ARP_PENDING; i++) {
        struct arp_pending *e = &s->arp_pend[i];
        if (e->busy && e->ip == ip && e->nif == nif)
            return e;
    }
    return NULL;
}

/* A place for a newly resolved neighbour: a free one, or that of the least
 * recently used entry not in use; NULL when every entry is in use (then
 * the neighbour is not cached). */
static struct arp_entry *arp_alloc(zbuf_ip_stack_t *s)
{
    struct arp_entry *victim = NULL;
    for (int i = 0; i < ZBUF_IP_ARP_ENTRIES; i++) {
        struct arp_entry *e = &s->arp[i];
        if (!e->valid)
            return e;
        bool in_use = e->sent && s->now - e->used < ZBUF_IP_ARP_IN_USE_MS;
        if (!in_use && (victim == NULL || !e->sent || (victim->sent && e->used < victim->used)))
            victim = e;
    }
    if (victim == NULL) {
        s->st.arp_not_cached++;
        return NULL;
    }
    memset(victim, 0, sizeof *victim);
    s->tx_gen++;
    return victim;
}

/* Free pending entry `e` and the datagrams it queued (not counted as drops
 * here: the callers that drop for a reason count them). */
static void arp_pend_drop(zbuf_ip_stack_t *s, struct arp_pending *e)
{
    for (unsigned i = 0; i < e->nqueue; i++)
        zbuf_delete(e->queue[i].pkt);
    s->st.arp_queue_held -= e->qbytes;
    memset(e, 0, sizeof *e);
}

/* A place for a new pending entry: a free one, or the oldest pending one's,
 * whose datagrams are dropped.  Resolved entries are never touched. */
static struct arp_pending *arp_pend_alloc(zbuf_ip_stack_t *s)
{
    struct arp_pending *oldest = NULL;
    for (int i = 0; i < ZBUF_IP_ARP_PENDING; i++) {
        struct arp_pending *e = &s->arp_pend[i];
        if (!e->busy)
            return e;
        if (oldest == NULL || e->created < oldest->created)
            oldest = e;
    }
    s->st.arp_pending_evicted++;
    s->st.arp_queue_drops += oldest->nqueue;
    arp_pend_drop(s, oldest);
    return oldest;
}

/* Remember (or refresh) `ip` at `mac`: in a resolved entry if there is one
 * or a place for one.  Returns the entry, or NULL if not cached. */
static struct arp_entry *arp_learn(zbuf_ip_stack_t *s, zbuf_ip_netif_t *nif, uint32_t ip,
                                   const uint8_t mac[ETH_ALEN], bool create)
{
    struct arp_entry *e = arp_find(s, nif, ip);
    if (e == NULL) {
        if (!create || (e = arp_alloc(s)) == NULL)
            return NULL;
        e->valid = true;
        e->ip = ip;
        e->nif = nif;
        s->tx_gen++;
    } else if (memcmp(e->mac, mac, ETH_ALEN) != 0) {
        s->tx_gen++; /* the neighbour moved: cached headers are stale */
    }
    memcpy(e->mac, mac, ETH_ALEN);
    e->expires = s->now + ZBUF_IP_ARP_MAX_AGE_MS;
    arp_note(s, e->expires);
    return e;
}

/* Pending entry `p` resolved to `mac`: cache it if there is room, and send
 * what waited, in order, each datagram cut into fragments now if it is
 * above the MTU. */
static void arp_resolved(zbuf_ip_stack_t *s, struct arp_pending *p, const uint8_t mac[ETH_ALEN])
{
    zbuf_ip_netif_t *nif = p->nif;
    struct arp_entry *e = arp_learn(s, nif, p->ip, mac, true);
    if (e && p->nqueue > 0) {
        e->sent = true;
        e->used = s->now;
    }
    /* Take the queue, the interface and the address first: a driver's
     * transmit should not re-enter the stack, but if it does (even to
     * remove the interface) nothing here is freed twice. */
    unsigned n = p->nqueue;
    struct ip_dgram q[ZBUF_IP_ARP_QUEUE];
    memcpy(q, p->queue, n * sizeof q[0]);
    p->nqueue = 0;
    arp_pend_drop(s, p);
    uint8_t to[ETH_ALEN];
    memcpy(to, mac, ETH_ALEN);
    for (unsigned i = 0; i < n; i++) {
        if (nif->in_use) {
            ip_transmit(nif, &q[i], to);
        } else {
            s->st.arp_queue_drops++;
            zbuf_delete(q[i].pkt);
        }
    }
}

static int arp_input(zbuf_ip_netif_t *nif, zbuf_t *z)
{
    zbuf_ip_stack_t *s = nif->stack;
    uint8_t tmp[ARP_LEN];
    const uint8_t *a = zbuf_ip__hdr(z, 0, ARP_LEN, tmp);
    int rc = 0;
    if (a == NULL || get16(a) != ARP_HTYPE_ETHER || get16(a + 2) != ETH_TYPE_IP || a[4] != ETH_ALEN ||
        a[5] != 4) {
        s->st.bad_arp++;
        rc = -EBADMSG;
        goto out;
    }
    uint16_t op = get16(a + 6);
    uint8_t sha[ETH_ALEN];
    memcpy(sha, a + 8, ETH_ALEN);
    uint32_t spa = get32(a + 14), tpa = get32(a + 24);
    /* A multicast sender, someone claiming one of our addresses, or a
     * sender address no host may have (0.0.0.0 is an RFC 5227 probe). */
    if ((op != ARP_OP_REQUEST && op != ARP_OP_REPLY) || (sha[0] & 1) || (spa != 0 && martian(s, nif, spa, true))) {
        s->st.bad_arp++;
        rc = -EBADMSG;
        goto out;
    }
    if (spa != 0) {
        struct arp_pending *p = arp_pend_find(s, nif, spa);
        if (p)
            arp_resolved(s, p, sha);
        else /* they talk to us: we will likely answer them, remember them */
            arp_learn(s, nif, spa, sha, tpa == nif->cfg.addr);
    }
    if (op == ARP_OP_REQUEST && tpa == nif->cfg.addr && spa != 0)
        arp_send(nif, ARP_OP_REPLY, sha, spa, sha);
    else if (op == ARP_OP_REQUEST && tpa == nif->cfg.addr) /* RFC 5227 probe: answer by broadcast */
        arp_send(nif, ARP_OP_REPLY, sha, 0, bcast_mac);
out:
    zbuf_delete(z);
    if (rc != 0)
        s->st.rx_drops++;
    return rc;
}

/* Send datagram `d` to `nexthop` on `nif`, resolving its address first if
 * needed: while it resolves the datagram waits whole in a pending entry's
 * queue, bounded by ZBUF_IP_ARP_QUEUE datagrams and ZBUF_IP_ARP_QUEUE_BYTES
 * per entry and ZBUF_IP_ARP_QUEUE_TOTAL_BYTES in all (what it pins, see
 * zbuf_ip__pinned()); beyond those the new datagram is dropped.  Consumes
 * d->pkt. */
static int arp_output(zbuf_ip_netif_t *nif, const struct ip_dgram *d, uint32_t nexthop)
{
    zbuf_ip_stack_t *s = nif->stack;
    if (is_bcast(nif, nexthop))
        return ip_transmit(nif, d, bcast_mac);
    struct arp_entry *e = arp_find(s, nif, nexthop);
    if (e) {
        e->sent = true;
        e->used = s->now;
        return ip_transmit(nif, d, e->mac);
    }
    /* Waiting pins what the datagram holds: a reply quoting a received
     * payload keeps the driver's buffer, so the pool policy applies. */
    if (zbuf_ip__rx_hold(s, d->pkt, false) != 0) {
        s->st.arp_queue_drops++;
        zbuf_delete(d->pkt);
        return -ENOBUFS;
    }
    struct arp_pending *p = arp_pend_find(s, nif, nexthop);
    if (p == NULL) {
        p = arp_pend_alloc(s);
        p->busy = true;
        p->ip = nexthop;
        p->nif = nif;
        p->created = s->now;
        p->deadline = s->now + ZBUF_IP_ARP_RETRY_MS;
        arp_note(s, p->deadline);
        arp_request(nif, nexthop);
    }
    size_t cost = zbuf_ip__pinned(d->pkt);
    if (p->nqueue == ZBUF_IP_ARP_QUEUE || cost > ZBUF_IP_ARP_QUEUE_BYTES - p->qbytes ||
        cost > ZBUF_IP_ARP_QUEUE_TOTAL_BYTES - s->st.arp_queue_held) {
        s->st.arp_queue_drops++;
        zbuf_delete(d->pkt);
        return -ENOBUFS;
    }
    p->queue[p->nqueue++] = *d;
    p->qbytes += cost;
    s->st.arp_queue_held += cost;
    return 0;
}

/* Whether deadline `at` has come; if not, it bounds arp_next. */
static bool arp_due(zbuf_ip_stack_t *s, uint64_t at)
{
    if (at > s->now) {
        arp_note(s, at);
        return false;
    }
    return true;
}

static int arp_timers(zbuf_ip_stack_t *s)
{
    int n = 0;
    if (s->now < s->arp_next)
        return 0; /* nothing due: skip the scan (every poll comes here) */
    s->arp_next = ZBUF_IP_NEVER;
    for (int i = 0; i < ZBUF_IP_ARP_ENTRIES; i++) {
        struct arp_entry *e = &s->arp[i];
        if (!e->valid || !arp_due(s, e->expires))
            continue;
        n++;
        memset(e, 0, sizeof *e);
        s->tx_gen++;
    }
    for (int i = 0; i < ZBUF_IP_ARP_PENDING; i++) {
        struct arp_pending *p = &s->arp_pend[i];
        if (!p->busy || !arp_due(s, p->deadline))
            continue;
        n++;
        if (++p->rounds >= ZBUF_IP_ARP_TRIES) {
            s->st.arp_queue_drops += p->nqueue;
            arp_pend_drop(s, p);
            continue;
        }
        p->deadline = s->now + ZBUF_IP_ARP_RETRY_MS;
        arp_note(s, p->deadline);
        arp_request(p->nif, p->ip);
    }
    return n;
}

/* ------------------------------------------------------------------ IPv4 */

zbuf_ip_netif_t *zbuf_ip__route(zbuf_ip_stack_t *s, uint32_t dst)
{
    zbuf_ip_netif_t *gw = NULL;
    for (int i = 0; i < ZBUF_IP_MAX_NETIFS; i++) {
        zbuf_ip_netif_t *n = &s->netifs[i];
        if (!n->in_use)
            continue;
        if (dst == IP_BROADCAST || (dst & n->mask) == (n->cfg.addr & n->mask))
            return n;
        if (gw == NULL && n->cfg.gateway != 0)
            gw = n;
    }
    return gw;
}

/* Identification of a datagram that must be fragmented (RFC 7739 5.3):
 * one of ZBUF_IP__ID_BUCKETS counters picked by a keyed hash of
 * (source, destination, protocol), plus a keyed offset.  Successive
 * datagrams to one destination get distinct ids, and an observer learns
 * nothing about the traffic to others, unlike with one global counter (the
 * "idle scan").  Datagrams that fit go with DF and id 0, as RFC 6864 allows
 * for atomic datagrams. */
static uint16_t ip_id_next(zbuf_ip_stack_t *s, uint32_t src, uint32_t dst, uint8_t proto)
{
    uint8_t b[9];
    put32(b, src);
    put32(b + 4, dst);
    b[8] = proto;
    uint64_t h = zbuf_ip__siphash(s->cfg.isn_key, b, sizeof b);
    uint16_t *c = &s->ip_ids[h % ZBUF_IP__ID_BUCKETS];
    return (uint16_t)(++*c + (uint16_t)(h >> 32));
}

/* Prepend an IP header with fragment field `frag` (flags and offset) to
 * `pkt`, a piece of datagram `d`, and hand it to the driver for `mac`;
 * consumes `pkt`. */
static int ip_send(zbuf_ip_netif_t *nif, const struct ip_dgram *d, zbuf_t *pkt, uint16_t frag,
                   const uint8_t mac[ETH_ALEN])
{
    size_t total = zbuf_length(pkt) + IP_HLEN;
    uint8_t *h;
    if (zbuf_prepend_space(pkt, IP_HLEN, (void **)&h) != 0) {
        zbuf_delete(pkt);
        return -ENOMEM;
    }
    h[0] = IP_VHL;
    h[1] = 0;
    put16(h + 2, (uint16_t)total);
    put16(h + 4, d->id);
    put16(h + 6, frag);
    h[8] = ZBUF_IP_TTL;
    h[9] = d->proto;
    put16(h + 10, 0);
    put32(h + 12, d->src);
    put32(h + 16, d->dst);
    put16(h + 10, zbuf_ip__fold(zbuf_ip__sum_ip20(h, 0)));
    return eth_output(nif, pkt, mac, ETH_TYPE_IP);
}

/* Hand datagram `d`, whose next hop is `mac`, to `nif`'s driver: whole with
 * DF if it fits the MTU, else as fragments of at most the MTU.  Each
 * fragment is a zbuf_dup() of its range: the payload is shared, never
 * copied, and each gets its own header segment.  Consumes d->pkt.  Stops
 * at the first fragment that cannot go: the datagram is lost anyway. */
static int ip_transmit(zbuf_ip_netif_t *nif, const struct ip_dgram *d, const uint8_t mac[ETH_ALEN])
{
    zbuf_ip_stack_t *s = nif->stack;
    zbuf_t *pkt = d->pkt;
    size_t plen = zbuf_length(pkt);
    if (zbuf_ip__fits(nif, d->proto, plen + IP_HLEN))
        return ip_send(nif, d, pkt, IP_DF, mac); /* DF on what fits: path MTU discovery */
    size_t max = ((size_t)nif->cfg.mtu - IP_HLEN) & ~(size_t)7; /* >= 552 */
    int rc = 0;
    for (size_t off = 0; off < plen && rc == 0; off += max) {
        size_t n = plen - off < max ? plen - off : max;
        zbuf_t *f;
        if (zbuf_dup(pkt, off, n, &f) != 0) {
            rc = -ENOMEM;
            break;
        }
        s->st.ip_frags_tx++;
        rc = ip_send(nif, d, f, (uint16_t)((off + n < plen ? IP_MF : 0) | (off >> 3)), mac);
    }
    zbuf_delete(pkt);
    return rc;
}

/* The next hop towards `dst` through `nif`: itself on the link, else the
 * interface's gateway. */
static uint32_t nexthop_of(const zbuf_ip_netif_t *nif, uint32_t dst)
{
    if (dst != IP_BROADCAST && (dst & nif->mask) != (nif->cfg.addr & nif->mask))
        return nif->cfg.gateway;
    return dst;
}

int zbuf_ip__output(zbuf_ip_stack_t *s, zbuf_t *pkt, uint32_t src, uint32_t dst, uint8_t proto)
{
    zbuf_ip_netif_t *nif = zbuf_ip__route(s, dst);
    if (nif == NULL || zbuf_ip__is_local(s, dst) || dst == 0) {
        zbuf_delete(pkt);
        return -ENETUNREACH;
    }
    size_t total = zbuf_length(pkt) + IP_HLEN;
    if (total > IP_MAX_DATAGRAM) {
        zbuf_delete(pkt);
        return -EMSGSIZE;
    }
    struct ip_dgram d = {.pkt = pkt, .src = src ? src : nif->cfg.addr, .dst = dst, .id = 0,
                         .proto = proto};
    uint32_t nexthop = nexthop_of(nif, dst);
    /* Chosen now, once: the fragments leave later if ARP must resolve. */
    if (!zbuf_ip__fits(nif, proto, total))
        d.id = ip_id_next(s, d.src, dst, proto);
    return arp_output(nif, &d, nexthop);
}

bool zbuf_ip__route_fill(zbuf_ip_stack_t *s, struct zbuf_ip__txroute *rt, uint32_t src,
                         uint32_t dst, uint8_t proto)
{
    rt->gen = 0;
    zbuf_ip_netif_t *nif = zbuf_ip__route(s, dst);
    if (nif == NULL || zbuf_ip__is_local(s, dst) || dst == 0)
        return false;
    uint32_t nexthop = nexthop_of(nif, dst);
    struct arp_entry *e = NULL;
    const uint8_t *mac = bcast_mac;
    if (!is_bcast(nif, nexthop)) {
        if ((e = arp_find(s, nif, nexthop)) == NULL)
            return false;
        mac = e->mac;
    }
    uint8_t *h = rt->hdr, *ip = rt->hdr + ETH_HLEN;
    memcpy(h, mac, ETH_ALEN);
    memcpy(h + ETH_ALEN, nif->cfg.mac, ETH_ALEN);
    put16(h + 12, ETH_TYPE_IP);
    memset(ip, 0, IP_HLEN);
    ip[0] = IP_VHL;
    put16(ip + 6, IP_DF); /* id 0: only a datagram that fits goes this way */
    ip[8] = ZBUF_IP_TTL;
    ip[9] = proto;
    put32(ip + 12, src ? src : nif->cfg.addr);
    put32(ip + 16, dst);
    rt->hsum = zbuf_ip__sum_ip20(ip, 0);
    rt->nif = nif;
    rt->arp = e;
    rt->src = src;
    rt->dst = dst;
    rt->proto = proto;
    rt->gen = s->tx_gen;
    return true;
}

int zbuf_ip__output_ready(zbuf_ip_stack_t *s, struct zbuf_ip__txroute *rt, zbuf_t *pkt,
                          uint8_t *h, size_t len)
{
    zbuf_ip_netif_t *nif = rt->nif;
    size_t total = len + IP_HLEN;
    if (rt->arp) {
        rt->arp->sent = true;
        rt->arp->used = s->now;
    }
    memcpy(h, rt->hdr, ZBUF_IP__L2_HLEN);
    put16(h + ETH_HLEN + 2, (uint16_t)total);
    put16(h + ETH_HLEN + 10, zbuf_ip__fold(rt->hsum + total));
    s->st.tx_frames++;
    s->st.tx_bytes += total + ETH_HLEN;
    return nif->drv.transmit(nif->ctx, pkt);
}

/* ------------------------------------------------------------------ ICMP */

/* Send an ICMP message of `type` and `code` whose rest-of-header is id and
 * seq (0 and 0 for errors) in front of `payload` (consumed). */
static int icmp_send(zbuf_ip_stack_t *s, zbuf_t *payload, uint8_t type, uint8_t code,
                     uint16_t id, uint16_t seq, uint32_t src, uint32_t dst)
{
    uint8_t *h;
    if (zbuf_prepend_space(payload, ICMP_HLEN, (void **)&h) != 0) {
        zbuf_delete(payload);
        return -ENOMEM;
    }
    h[0] = type;
    h[1] = code;
    put16(h + 2, 0);
    put16(h + 4, id);
    put16(h + 6, seq);
    put16(h + 2, zbuf_ip__fold(zbuf_ip__sum_zbuf(payload, 0, zbuf_length(payload), 0)));
    return zbuf_ip__output(s, payload, src, dst, IP_PROTO_ICMP);
}

static void udp_icmp_error(zbuf_ip_stack_t *s, const struct zbuf_ip__icmp_err *e);

/* An ICMP error message (destination unreachable, source quench, time
 * exceeded, parameter problem): validate what it quotes (RFC 5927: a
 * datagram we sent, from one of our addresses, with its whole IP header and
 * at least 8 bytes of transport header) and hand it to the transport,
 * which checks it against its own state.  Consumes `z`. */
static int icmp_error_input(zbuf_ip_stack_t *s, zbuf_t *z, const uint8_t *h)
{
    s->st.icmp_errors_rx++;
    uint8_t tmp[IP_HLEN_MAX + ICMP_QUOTE_PAYLOAD];
    size_t len = zbuf_length(z);
    const uint8_t *q = len >= ICMP_HLEN + IP_HLEN + ICMP_QUOTE_PAYLOAD ? zbuf_ip__hdr(z, ICMP_HLEN, IP_HLEN, tmp)
                                                      : NULL;
    size_t qhl = q ? (size_t)(q[0] & 0xf) * 4 : 0;
    struct zbuf_ip__icmp_err e = {.type = h[0], .code = h[1], .mtu = get16(h + 6)};
    int rc = -ENOENT;
    if (q == NULL || (q[0] >> 4) != 4 || qhl < IP_HLEN || len < ICMP_HLEN + qhl + 8 ||
        (get16(q + 6) & IP_OFFMASK) != 0) /* a later fragment quotes no transport header */
        goto out;
    uint8_t proto = q[9];
    e.qlen = get16(q + 2);
    e.src = get32(q + 12);
    e.dst = get32(q + 16);
    if (!zbuf_ip__is_local(s, e.src) || (proto != IP_PROTO_TCP && proto != IP_PROTO_UDP))
        goto out;
    const uint8_t *t = zbuf_ip__hdr(z, ICMP_HLEN + qhl, 8, tmp + 60);
    if (t == NULL)
        goto out;
    e.sport = get16(t);
    e.dport = get16(t + 2);
    e.seq = get32(t + 4);
    if (proto == IP_PROTO_TCP) {
        rc = zbuf_ip__tcp_icmp_error(s, &e);
    } else if (e.type == ICMP_DEST_UNREACH) {
        udp_icmp_error(s, &e);
        rc = 0;
    }
out:
    if (rc != 0)
        s->st.icmp_errors_ignored++;
    zbuf_delete(z);
    return rc;
}

static int icmp_input(zbuf_ip_netif_t *nif, zbuf_t *z, uint32_t src, uint32_t dst)
{
    zbuf_ip_stack_t *s = nif->stack;
    uint8_t tmp[ICMP_HLEN];
    const uint8_t *h = zbuf_ip__hdr(z, 0, ICMP_HLEN, tmp);
    if (h == NULL) {
        s->st.bad_icmp++;
        goto drop;
    }
    if (zbuf_ip__verify_rx(s) && zbuf_ip__fold(zbuf_ip__sum_zbuf(z, 0, zbuf_length(z), 0))) {
        s->st.bad_checksum++;
        zbuf_delete(z);
        s->st.rx_drops++;
        return -EPROTO;
    }
    uint8_t type = h[0], code = h[1];
    uint16_t id = get16(h + 4), seq = get16(h + 6);
    if (type == ICMP_ECHO && code == 0 && dst == nif->cfg.addr) {
        s->st.icmp_echo_rx++;
        /* Echo the request's own payload segments behind a new header. */
        zbuf_cut(z, 0, ICMP_HLEN, NULL);
        s->st.icmp_echo_tx++;
        icmp_send(s, z, ICMP_ECHO_REPLY, 0, id, seq, dst, src);
        return 0;
    }
    if (type == ICMP_ECHO_REPLY && code == 0 && s->cfg.ping_reply && dst == nif->cfg.addr) {
        zbuf_cut(z, 0, ICMP_HLEN, NULL);
        s->cfg.ping_reply(s->cfg.ping_arg, src, id, seq, z);
        return 0;
    }
    /* Errors about what we sent; only to our own address (never to a
     * broadcast: RFC 1122 3.2.2 forbids sending them there). */
    if ((type == ICMP_DEST_UNREACH || type == ICMP_SOURCE_QUENCH || type == ICMP_TIME_EXCEEDED ||
         type == ICMP_PARAM_PROBLEM) &&
        dst == nif->cfg.addr)
        return icmp_error_input(s, z, h);
drop:
    zbuf_delete(z);
    s->st.rx_drops++;
    return h == NULL ? -EBADMSG : -ENOENT;
}

int zbuf_ip__icmp_reasm_timeout(zbuf_ip_stack_t *s, const uint8_t *orig, size_t len)
{
    uint32_t from = get32(orig + 16), to = get32(orig + 12);
    /* Only about datagrams sent to us by a unicast source (RFC 1122
     * 3.2.2), and never about an ICMP error. */
    if (!zbuf_ip__is_local(s, from) || martian(s, NULL, to, false) || to == 0 ||
        (orig[9] == IP_PROTO_ICMP && (len < IP_HLEN + 1 || orig[IP_HLEN] != 8)))
        return -EINVAL;
    zbuf_t *z;
    uint8_t *p;
    if (zbuf_create(&z) != 0)
        return -ENOMEM;
    if (zbuf_append_space(z, len, (void **)&p) != 0) {
        zbuf_delete(z);
        return -ENOMEM;
    }
    memcpy(p, orig, len); /* the quoted header, built like any header */
    return icmp_send(s, z, ICMP_TIME_EXCEEDED, ICMP_EXC_FRAGTIME, 0, 0, from, to);
}

int zbuf_ip_ping(zbuf_ip_stack_t *s, uint32_t dst, uint16_t id, uint16_t seq, zbuf_t *data)
{
    if (s == NULL)
        return -EINVAL;
    if (zbuf_ip__route(s, dst) == NULL)
        return -ENETUNREACH;
    zbuf_t *z = data;
    if (z == NULL && zbuf_create(&z) != 0)
        return -ENOMEM;
    enter(s);
    icmp_send(s, z, ICMP_ECHO, 0, id, seq, 0, dst); /* consumed either way: a drop is a loss */
    leave(s);
    return 0;
}

/* ------------------------------------------------------------------- UDP */

static zbuf_ip_udp_t *udp_lookup(zbuf_ip_stack_t *s, uint32_t addr, uint16_t port)
{
    for (zbuf_ip_udp_t *u = s->udps; u; u = u->next)
        if (u->bound && u->lport == port && (u->laddr == ZBUF_IP_ANY || u->laddr == addr))
            return u;
    return NULL;
}

static int udp_input(zbuf_ip_netif_t *nif, zbuf_t *z, uint32_t src, uint32_t dst)
{
    zbuf_ip_stack_t *s = nif->stack;
    uint8_t tmp[UDP_HLEN];
    const uint8_t *h = zbuf_ip__hdr(z, 0, UDP_HLEN, tmp);
    size_t len = zbuf_length(z);
    if (h == NULL || get16(h + 4) < UDP_HLEN || get16(h + 4) > len) {
        s->st.bad_udp++;
        zbuf_delete(z);
        s->st.rx_drops++;
        return -EBADMSG;
    }
    uint16_t sport = get16(h), dport = get16(h + 2), ulen = get16(h + 4), ck = get16(h + 6);
    if (ulen < len)
        zbuf_cut(z, ulen, ZBUF_TO_END, NULL);
    if (ck != 0 && zbuf_ip__verify_rx(s) &&
        zbuf_ip__fold(zbuf_ip__sum_zbuf(z, 0, ulen, zbuf_ip__pseudo(src, dst, IP_PROTO_UDP, ulen)))) {
        s->st.bad_checksum++;
        zbuf_delete(z);
        s->st.rx_drops++;
        return -EPROTO;
    }
    zbuf_ip_udp_t *u = udp_lookup(s, dst, dport);
    if (u == NULL || u->recv == NULL) {
        s->st.udp_no_port++;
        zbuf_delete(z);
        s->st.rx_drops++;
        return -ENOENT;
    }
    if (dst != nif->cfg.addr && !u->broadcast) {
        s->st.udp_bcast_drops++; /* a service answers broadcasts only if it asked */
        zbuf_delete(z);
        s->st.rx_drops++;
        return -ENOENT;
    }
    zbuf_cut(z, 0, UDP_HLEN, NULL);
    if (zbuf_ip__rx_hold(s, z, false) != 0) {
        zbuf_delete(z);
        s->st.rx_drops++;
        return -ENOBUFS;
    }
    s->st.udp_rx++;
    s->st.udp_payload_rx += zbuf_length(z);
    u->recv(u->arg, u, z, src, sport);
    return 0;
}

static bool udp_port_in_use(zbuf_ip_stack_t *s, uint32_t addr, uint16_t port)
{
    return udp_lookup(s, addr, port) != NULL;
}

int zbuf_ip_udp_new(zbuf_ip_stack_t *s, zbuf_ip_udp_t **out)
{
    if (s == NULL || out == NULL)
        return -EINVAL;
    if (s->nudp >= ZBUF_IP_UDP_PCBS)
        return -ENOSPC;
    zbuf_ip_udp_t *u = calloc(1, sizeof *u);
    if (u == NULL)
        return -ENOMEM;
    u->stack = s;
    u->next = s->udps;
    s->udps = u;
    s->nudp++;
    *out = u;
    return 0;
}

int zbuf_ip_udp_bind(zbuf_ip_udp_t *u, uint32_t addr, uint16_t port)
{
    if (u == NULL || u->bound)
        return -EINVAL;
    zbuf_ip_stack_t *s = u->stack;
    if (port == 0) {
        port = zbuf_ip__ephemeral(s, addr, udp_port_in_use);
        if (port == 0)
            return -EADDRINUSE;
    } else {
        for (zbuf_ip_udp_t *o = s->udps; o; o = o->next)
            if (o->bound && o->lport == port &&
                (o->laddr == addr || o->laddr == ZBUF_IP_ANY || addr == ZBUF_IP_ANY))
                return -EADDRINUSE;
    }
    u->laddr = addr;
    u->lport = port;
    u->bound = true;
    return 0;
}

void zbuf_ip_udp_set_recv(zbuf_ip_udp_t *u, zbuf_ip_udp_recv_cb cb, void *arg)
{
    if (u) {
        u->recv = cb;
        u->arg = arg;
    }
}

void zbuf_ip_udp_set_error(zbuf_ip_udp_t *u, zbuf_ip_udp_error_cb cb, void *arg)
{
    if (u) {
        u->error = cb;
        u->error_arg = arg;
    }
}

void zbuf_ip_udp_set_broadcast(zbuf_ip_udp_t *u, bool on)
{
    if (u)
        u->broadcast = on;
}

int zbuf_ip__unreach_errno(uint8_t code)
{
    switch (code) {
    case ICMP_UNREACH_NET:
        return -ENETUNREACH;
    case ICMP_UNREACH_PROTO:
        return -ENOPROTOOPT;
    case ICMP_UNREACH_PORT:
        return -ECONNREFUSED;
    case ICMP_UNREACH_NEEDFRAG:
        return -EMSGSIZE;
    default:
        return -EHOSTUNREACH;
    }
}

/* A destination unreachable quoting a UDP datagram: passed to the PCB that
 * sent it, if that PCB sent to the quoted destination lately (a UDP PCB
 * has no sequence numbers; this is the check RFC 5927 leaves it). */
static void udp_icmp_error(zbuf_ip_stack_t *s, const struct zbuf_ip__icmp_err *e)
{
    zbuf_ip_udp_t *u = udp_lookup(s, e->src, e->sport);
    bool sent = false;
    unsigned n = u ? (u->nrecent < ZBUF_IP__UDP_RECENT ? u->nrecent : ZBUF_IP__UDP_RECENT) : 0;
    for (unsigned i = 0; i < n; i++)
        sent |= u->recent[i].addr == e->dst && u->recent[i].port == e->dport;
    if (!sent || u->error == NULL) {
        s->st.icmp_errors_ignored++;
        return;
    }
    s->st.udp_icmp_errors++;
    u->error(u->error_arg, u, zbuf_ip__unreach_errno(e->code), e->dst, e->dport);
}

int zbuf_ip_udp_sendto(zbuf_ip_udp_t *u, zbuf_t *data, uint32_t dst, uint16_t dport)
{
    if (u == NULL || data == NULL || dport == 0)
        return -EINVAL;
    zbuf_ip_stack_t *s = u->stack;
    if (!u->bound) {
        int rc = zbuf_ip_udp_bind(u, ZBUF_IP_ANY, 0);
        if (rc)
            return rc;
    }
    zbuf_ip_netif_t *nif = zbuf_ip__route(s, dst);
    if (nif == NULL || zbuf_ip__is_local(s, dst) || dst == 0)
        return -ENETUNREACH;
    if (is_bcast(nif, dst) && !u->broadcast)
        return -EACCES;
    size_t plen = zbuf_length(data);
    if (plen + UDP_HLEN + IP_HLEN > IP_MAX_DATAGRAM)
        return -EMSGSIZE; /* above the MTU is fine: it leaves in fragments */
    uint8_t *h;
    int rc = zbuf_prepend_space(data, UDP_HLEN, (void **)&h);
    if (rc)
        return rc;
    enter(s);
    uint32_t src = u->laddr ? u->laddr : nif->cfg.addr;
    uint16_t ulen = (uint16_t)(plen + UDP_HLEN);
    put16(h, u->lport);
    put16(h + 2, dport);
    put16(h + 4, ulen);
    put16(h + 6, 0);
    if (!(nif->drv.flags & ZBUF_IP_DRV_CSUM_OFFLOAD)) {
        uint16_t ck = zbuf_ip__fold(
            zbuf_ip__sum_zbuf(data, 0, ulen, zbuf_ip__pseudo(src, dst, IP_PROTO_UDP, ulen)));
        put16(h + UDP_CSUM_OFF, ck ? ck : 0xffff); /* 0 means none (RFC 768) */
    }
    s->st.udp_tx++;
    s->st.udp_payload_tx += plen;
    bool known = false;
    for (unsigned i = 0; i < ZBUF_IP__UDP_RECENT && i < u->nrecent; i++)
        known |= u->recent[i].addr == dst && u->recent[i].port == dport;
    if (!known) {
        unsigned k = u->nrecent++ % ZBUF_IP__UDP_RECENT;
        u->recent[k].addr = dst;
        u->recent[k].port = dport;
        if (u->nrecent == 2 * ZBUF_IP__UDP_RECENT)
            u->nrecent = ZBUF_IP__UDP_RECENT; /* the ring is full; keep the cursor small */
    }
    zbuf_ip__output(s, data, src, dst, IP_PROTO_UDP);
    leave(s);
    return 0;
}

void zbuf_ip_udp_delete(zbuf_ip_udp_t *u)
{
    if (u == NULL)
        return;
    zbuf_ip_stack_t *s = u->stack;
    for (zbuf_ip_udp_t **pp = &s->udps; *pp; pp = &(*pp)->next)
        if (*pp == u) {
            *pp = u->next;
            break;
        }
    s->nudp--;
    free(u);
}

/* ----------------------------------------------------------- IPv4 input */

static int ip_input(zbuf_ip_netif_t *nif, zbuf_t *z, bool l2_bcast)
{
    zbuf_ip_stack_t *s = nif->stack;
    uint8_t tmp[IP_HLEN];
    size_t len = zbuf_length(z);
    const uint8_t *h = zbuf_ip__hdr(z, 0, IP_HLEN, tmp);
    size_t hlen = h ? (size_t)(h[0] & 0xf) * 4 : 0;
    size_t total = h ? get16(h + 2) : 0;
    if (h == NULL || (h[0] >> 4) != 4 || hlen < IP_HLEN || hlen > len || total < hlen ||
        total > len) {
        s->st.bad_ip++;
        goto drop_bad;
    }
    if (zbuf_ip__verify_rx(s) && zbuf_ip__fold(hlen == IP_HLEN ? zbuf_ip__sum_ip20(h, 0)
                                                : zbuf_ip__sum_zbuf(z, 0, hlen, 0))) {
        s->st.bad_checksum++;
        zbuf_delete(z);
        s->st.rx_drops++;
        return -EPROTO;
    }
    uint16_t id = get16(h + 4), frag = get16(h + 6);
    uint8_t proto = h[9];
    uint32_t src = get32(h + 12), dst = get32(h + 16);
    /* RFC 1122 3.2.1.3: drop silently what comes from an address no host
     * has, or from one of ours (a LAND attack, or a reflection); 0.0.0.0
     * only from a host booting, as UDP to the limited broadcast (DHCP). */
    if (src == 0 ? !(proto == IP_PROTO_UDP && dst == IP_BROADCAST)
                 : martian(s, nif, src, true)) {
        s->st.bad_ip++;
        s->st.ip_bad_source++;
        goto drop_bad;
    }
    if (dst != nif->cfg.addr && !is_bcast(nif, dst)) {
        s->st.ip_not_ours++;
        zbuf_delete(z);
        s->st.rx_drops++;
        return -ENOENT;
    }
    if (l2_bcast && dst == nif->cfg.addr) {
        /* RFC 1122 3.3.6: a unicast datagram in a link-layer broadcast is
         * someone's mistake or trick; answering it would answer everyone. */
        s->st.ip_l2_bcast_drops++;
        zbuf_delete(z);
        s->st.rx_drops++;
        return -ENOENT;
    }
    uint8_t iph[IP_HLEN]; /* h may point into a segment the cuts below free */
    if (frag & IP_FRAG_BITS)
        memcpy(iph, h, IP_HLEN); /* only fragments need the header later */
    if (total < len)
        zbuf_cut(z, total, ZBUF_TO_END, NULL); /* Ethernet padding */
    zbuf_cut(z, 0, hlen, NULL);                /* options, if any, are ignored */
    if (frag & IP_FRAG_BITS) { /* MF or an offset: a fragment */
        zbuf_t *whole = NULL;
        int rc = zbuf_ip__reasm_input(nif, z, src, dst, proto, id, (uint32_t)(frag & IP_OFFMASK) * 8,
                                      (frag & IP_MF) != 0, iph, hlen, &whole);
        if (rc <= 0) {
            if (rc < 0)
                s->st.rx_drops++;
            return rc; /* held (0) or dropped */
        }
        z = whole; /* the last piece: on with the whole datagram */
    }
    switch (proto) {
    case IP_PROTO_ICMP:
        return icmp_input(nif, z, src, dst);
    case IP_PROTO_UDP:
        return udp_input(nif, z, src, dst);
    case IP_PROTO_TCP:
        if (dst != nif->cfg.addr) { /* no TCP to broadcast addresses */
            s->st.bad_tcp++;
            goto drop_bad;
        }
        zbuf_ip__tcp_input(s, z, src, dst);
        return 0;
    default:
        zbuf_delete(z);
        s->st.rx_drops++;
        return -EPROTONOSUPPORT;
    }
drop_bad:
    zbuf_delete(z);
    s->st.rx_drops++;
    return -EBADMSG;
}

/* -------------------------------------------------------------- Ethernet */

int zbuf_ip_netif_input(zbuf_ip_netif_t *nif, zbuf_t *frame)
{
    if (nif == NULL || !nif->in_use || frame == NULL) {
        zbuf_delete(frame);
        return -EINVAL;
    }
    zbuf_ip_stack_t *s = nif->stack;
    enter(s);
    s->st.rx_frames++;
    s->st.rx_bytes += zbuf_length(frame);
    /* The pool policy looks at this frame's pool (nested calls restore the
     * outer frame's). */
    zbuf_pool_t *outer_pool = s->rx_pool;
    int outer_level = s->rx_level;
    s->rx_pool = nif->drv.rx_pool;
    s->rx_level = -1;
    if (s->rx_pool && s->rx_pool == s->rx_ok_pool && s->rx_ok_frames > 0) {
        s->rx_ok_frames--;
        s->rx_level = ZBUF_IP__RX_OK; /* known to be far from the mark */
    }
    uint8_t tmp[ETH_HLEN];
    const uint8_t *h = zbuf_ip__hdr(frame, 0, ETH_HLEN, tmp);
    int rc;
    if (h == NULL) {
        s->st.bad_eth++;
        s->st.rx_drops++;
        zbuf_delete(frame);
        rc = -EBADMSG;
    } else if (memcmp(h, nif->cfg.mac, ETH_ALEN) != 0 && memcmp(h, bcast_mac, ETH_ALEN) != 0) {
        s->st.rx_drops++; /* someone else's unicast, or multicast we never joined */
        zbuf_delete(frame);
        rc = -ENOENT;
    } else {
        uint16_t type = get16(h + 12);
        bool l2_bcast = h[0] & 1; /* h may point into the cut header: read it first */
        zbuf_cut(frame, 0, ETH_HLEN, NULL);
        s->rx_trusted = (nif->drv.flags & ZBUF_IP_DRV_CSUM_OFFLOAD) != 0;
        if (type == ETH_TYPE_ARP) {
            rc = arp_input(nif, frame);
        } else if (type == ETH_TYPE_IP) {
            rc = ip_input(nif, frame, l2_bcast);
        } else {
            s->st.rx_drops++;
            zbuf_delete(frame);
            rc = -EPROTONOSUPPORT;
        }
        s->rx_trusted = false;
    }
    s->rx_pool = outer_pool;
    s->rx_level = outer_level;
    leave(s);
    return rc;
}

void zbuf_ip_netif_rx_nobuf(zbuf_ip_netif_t *nif, unsigned frames)
{
    if (nif == NULL)
        return;
    nif->stack->st.rx_no_buffer += frames;
    nif->stack->st.rx_drops += frames;
}

/* ------------------------------------------------------------------ poll */

int zbuf_ip_poll(zbuf_ip_stack_t *s)
{
    if (s == NULL)
        return -EINVAL;
    enter(s);
    int n = 0;
    for (int i = 0; i < ZBUF_IP_MAX_NETIFS; i++) {
        zbuf_ip_netif_t *nif = &s->netifs[i];
        if (nif->in_use && nif->drv.poll) {
            nif->polling++;
            s->rx_batch++;
            int r = nif->drv.poll(nif->ctx, ZBUF_IP_POLL_BUDGET);
            s->rx_batch--;
            nif->polling--;
            if (r > 0)
                n += r;
            if (nif->polling == 0 && nif->detach_pending) {
                nif->detach_pending = false;
                if (nif->drv.detach)
                    nif->drv.detach(nif->ctx);
            }
        }
    }
    zbuf_ip__tcp_acks_flush(s);
    /* The clock was read on entry; the driver polls above take microseconds,
     * not worth a second clock read on every poll. */
    n += arp_timers(s);
    n += zbuf_ip__reasm_timers(s);
    n += zbuf_ip__tcp_timers(s);
    leave(s);
    return n;
}

uint64_t zbuf_ip_next_deadline(const zbuf_ip_stack_t *s)
{
    if (s == NULL)
        return ZBUF_IP_NEVER;
    uint64_t d = zbuf_ip__tcp_deadline(s);
    if (s->arp_next < d)
        d = s->arp_next; /* may be early (an entry went): a poll then finds nothing */
    uint64_t r = zbuf_ip__reasm_deadline(s);
    if (r < d)
        d = r;
    for (int i = 0; i < ZBUF_IP_MAX_NETIFS; i++) {
        const zbuf_ip_netif_t *nif = &s->netifs[i];
        if (nif->in_use && nif->drv.next_deadline) {
            uint64_t t = nif->drv.next_deadline(nif->ctx);
            if (t < d)
                d = t;
        }
    }
    return d;
}
