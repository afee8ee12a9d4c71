/* SPDX-License-Identifier: MIT */
/*
 * The stack's link driver over packet rings: see <zbuf/ip_packet.h>.
 *
 * Only the public APIs of the stack and of zbuf-packet are used, so this
 * piece sits above both.  The one thing it does to a frame is complete a
 * partial TCP/UDP checksum (frames sent by this host with checksum offload,
 * where the field holds only the pseudo-header sum): the slot is ours until
 * we give it back, so the sum is written in place.
 */
#include <errno.h>
#include <linux/if_packet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <zbuf/ip_packet.h>

#define RX_BATCH 32

struct zbuf_ip_packet {
    zbuf_packet_t *pk;
    zbuf_ip_netif_t *nif;
    zbuf_ip_stack_t *stack;
    unsigned batch;
    unsigned unflushed;  /* frames put in the ring since the last flush */
    double rx_loss, tx_loss;
    uint64_t rng;
    zbuf_ip_packet_stats_t st;
};

void zbuf_ip_packet_config_init(zbuf_ip_packet_config_t *cfg)
{
    if (cfg == NULL)
        return;
    memset(cfg, 0, sizeof *cfg);
    zbuf_packet_config_init(&cfg->ring);
    cfg->ring.copy_below = 256;
    cfg->batch = 32;
}

static double rnd(zbuf_ip_packet_t *d)
{
    d->rng ^= d->rng >> 12;
    d->rng ^= d->rng << 25;
    d->rng ^= d->rng >> 27;
    return (double)((d->rng * 0x2545f4914f6cdd1dull) >> 11) / 9007199254740992.0;
}

/* ---------------------------------------------------- partial checksums */

/* Byte `off` of a frame, wherever its segment is. */
static uint8_t *byte_ptr(zbuf_t *z, size_t off)
{
    size_t in;
    zbuf_seg_t *s = zbuf_seg_find(z, off, &in);
    uint8_t *d = s ? zbuf_seg_data(z, s) : NULL;
    return d ? d + in : NULL;
}

/* One's complement sum of bytes [off, off + len) of z, across segments. */
static uint32_t sum_range(zbuf_t *z, size_t off, size_t len)
{
    uint64_t sum = 0;
    bool odd = false; /* the next byte is the low half of a 16-bit word */
    size_t in;
    for (zbuf_seg_t *s = zbuf_seg_find(z, off, &in); s && len; s = zbuf_seg_next(z, s), in = 0) {
        const uint8_t *p = (const uint8_t *)zbuf_seg_data(z, s) + in;
        size_t n = zbuf_seg_length(z, s) - in;
        if (n > len)
            n = len;
        len -= n;
        if (odd && n) {
            sum += *p++;
            n--;
            odd = false;
        }
        for (; n >= 2; n -= 2, p += 2)
            sum += (uint32_t)p[0] << 8 | p[1];
        if (n) {
            sum += (uint32_t)p[0] << 8;
            odd = true;
        }
    }
    while (sum >> 16)
        sum = (sum & 0xffff) + (sum >> 16);
    return (uint32_t)sum;
}

/* Complete the TCP or UDP checksum of an IPv4 frame whose field holds the
 * pseudo-header sum (Linux CHECKSUM_PARTIAL).  Anything else is left as it
 * is, for the stack to judge. */
static bool complete_checksum(zbuf_t *z)
{
    uint8_t h[34];
    size_t len = zbuf_length(z);
    if (len < sizeof h)
        return false;
    for (size_t i = 0; i < sizeof h; i++)
        h[i] = *byte_ptr(z, i);
    if (h[12] != 0x08 || h[13] != 0x00 || (h[14] >> 4) != 4)
        return false;
    size_t ihl = (size_t)(h[14] & 15) * 4, total = (size_t)h[16] << 8 | h[17];
    size_t l4 = 14 + ihl, field;
    if ((h[20] & 0x3f) || h[21] || ihl < 20 || total < ihl || 14 + total > len)
        return false; /* fragments never carry a partial sum */
    if (h[23] == 6)
        field = l4 + 16;
    else if (h[23] == 17)
        field = l4 + 6;
    else
        return false;
    if (field + 2 > 14 + total)
        return false;
    uint32_t sum = sum_range(z, l4, 14 + total - l4);
    uint16_t ck = (uint16_t)~sum;
    if (h[23] == 17 && ck == 0)
        ck = 0xffff;
    *byte_ptr(z, field) = (uint8_t)(ck >> 8);
    *byte_ptr(z, field + 1) = (uint8_t)ck;
    return true;
}

/* --------------------------------------------------------------- driver */

static void flush(zbuf_ip_packet_t *d)
{
    if (d->unflushed == 0 && !zbuf_packet_tx_needs_kick(d->pk))
        return;
    d->unflushed = 0;
    int rc = zbuf_packet_flush(d->pk);
    if (rc == -ENETDOWN || rc == -ENXIO || rc == -ENODEV)
        d->st.link_errors++;
}

static int pk_transmit(void *ctx, zbuf_t *frame)
{
    zbuf_ip_packet_t *d = ctx;
    if (d->tx_loss > 0 && rnd(d) < d->tx_loss) {
        d->st.tx_lost++;
        zbuf_delete(frame);
        return 0;
    }
    int rc = zbuf_packet_send(d->pk, frame, ZBUF_PACKET_MORE);
    if (rc != 0) {
        if (rc == -EAGAIN)
            d->st.tx_ring_full++; /* like a full NIC queue: TCP retransmits */
        zbuf_delete(frame);
        return rc;
    }
    if (++d->unflushed >= d->batch)
        flush(d);
    return 0;
}

static int pk_poll(void *ctx, unsigned budget)
{
    zbuf_ip_packet_t *d = ctx;
    flush(d);
    int done = 0;
    while ((unsigned)done < budget) {
        zbuf_t *f[RX_BATCH];
        zbuf_packet_rxinfo_t in[RX_BATCH];
        unsigned want = budget - (unsigned)done < RX_BATCH ? budget - (unsigned)done : RX_BATCH;
        int n = zbuf_packet_recv(d->pk, f, in, want);
        if (n == -EAGAIN)
            break;
        if (n < 0) {
            d->st.link_errors++; /* down or gone: the stack carries on */
            break;
        }
        for (int i = 0; i < n; i++) {
            done++;
            if (in[i].flags & ZBUF_PACKET_RX_TRUNCATED) {
                d->st.rx_truncated++;
                zbuf_delete(f[i]);
                continue;
            }
            if (d->rx_loss > 0 && rnd(d) < d->rx_loss) {
                d->st.rx_lost++;
                zbuf_delete(f[i]);
                continue;
            }
            if ((in[i].flags & ZBUF_PACKET_RX_CSUM_PARTIAL) && complete_checksum(f[i]))
                d->st.rx_csum_completed++;
            zbuf_ip_netif_input(d->nif, f[i]);
        }
        if ((unsigned)n < want)
            break;
    }
    flush(d); /* what the input produced (ACKs, replies) */
    return done;
}

static uint64_t pk_deadline(void *ctx)
{
    zbuf_ip_packet_t *d = ctx;
    if (d->unflushed || zbuf_packet_tx_needs_kick(d->pk) || zbuf_packet_rx_pending(d->pk))
        return zbuf_ip_now(d->stack); /* a poll now: kick, or read past the budget */
    return ZBUF_IP_NEVER;
}

static void pk_detach(void *ctx)
{
    zbuf_ip_packet_t *d = ctx;
    zbuf_packet_close(d->pk, 200);
    free(d);
}

int zbuf_ip_packet_open(zbuf_ip_stack_t *s, const char *ifname, const zbuf_ip_netif_config_t *nc,
                        const zbuf_ip_packet_config_t *cfg, zbuf_ip_packet_t **out, char *why,
                        size_t why_len)
{
    if (s == NULL || ifname == NULL || nc == NULL || out == NULL)
        return -EINVAL;
    zbuf_ip_packet_config_t c;
    if (cfg)
        c = *cfg;
    else
        zbuf_ip_packet_config_init(&c);
    if (c.batch == 0)
        c.batch = 1;
    zbuf_ip_packet_t *d = calloc(1, sizeof *d);
    if (d == NULL)
        return -ENOMEM;
    d->batch = c.batch;
    d->stack = s;
    d->rng = 0x9e3779b97f4a7c15ull;
    c.ring.protocol = 0x0003; /* ETH_P_ALL: ARP and IPv4 both */
    c.ring.rx_ring = c.ring.tx_ring = true;
    /* Learn the interface first (its address, MTU, whether it hands over
     * offload frames), then open with what follows from it. */
    static const uint8_t zero[6];
    zbuf_ip_netif_config_t n = *nc;
    int rc = zbuf_packet_open(ifname, &c.ring, &d->pk, why, why_len);
    if (rc) {
        free(d);
        return rc;
    }
    zbuf_packet_info_t info;
    zbuf_packet_info(d->pk, &info);
    if (memcmp(n.mac, zero, 6) == 0) {
        memcpy(n.mac, info.mac, 6);
    } else if (memcmp(n.mac, info.mac, 6) != 0) {
        /* Frames to another address reach us only in promiscuous mode
         * (undone when the socket closes). */
        struct packet_mreq mr = {.mr_ifindex = info.ifindex, .mr_type = PACKET_MR_PROMISC};
        if (setsockopt(zbuf_packet_socket(d->pk), SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr,
                       sizeof mr) != 0) {
            rc = -errno;
            if (why && why_len)
                snprintf(why, why_len, "promiscuous mode on %s: %s", ifname, strerror(errno));
            zbuf_packet_close(d->pk, 0);
            free(d);
            return rc;
        }
    }
    if (n.mtu == 0) {
        n.mtu = (uint16_t)(info.mtu > 65535 ? 65535 : info.mtu);
    } else if (n.mtu > info.mtu) {
        if (why && why_len)
            snprintf(why, why_len, "MTU %u is above %s's %u", n.mtu, ifname, info.mtu);
        zbuf_packet_close(d->pk, 0);
        free(d);
        return -EINVAL;
    }
    static const zbuf_ip_driver_t drv = {
        .transmit = pk_transmit,
        .poll = pk_poll,
        .next_deadline = pk_deadline,
        .detach = pk_detach,
    };
    rc = zbuf_ip_netif_add(s, &n, &drv, d, &d->nif);
    if (rc) {
        if (why && why_len)
            snprintf(why, why_len, "cannot add the interface to the stack: %s", zbuf_strerror(rc));
        zbuf_packet_close(d->pk, 0);
        free(d);
        return rc;
    }
    *out = d;
    return 0;
}

zbuf_ip_netif_t *zbuf_ip_packet_netif(const zbuf_ip_packet_t *d)
{
    return d ? d->nif : NULL;
}

int zbuf_ip_packet_fd(const zbuf_ip_packet_t *d)
{
    return d ? zbuf_packet_fd(d->pk) : -1;
}

zbuf_packet_t *zbuf_ip_packet_handle(const zbuf_ip_packet_t *d)
{
    return d ? d->pk : NULL;
}

int zbuf_ip_packet_stats(const zbuf_ip_packet_t *d, zbuf_ip_packet_stats_t *out)
{
    if (d == NULL || out == NULL)
        return -EINVAL;
    *out = d->st;
    return 0;
}

int zbuf_ip_packet_set_loss(zbuf_ip_packet_t *d, double rx_loss, double tx_loss, uint64_t seed)
{
    if (d == NULL || !(rx_loss >= 0 && rx_loss <= 1) || !(tx_loss >= 0 && tx_loss <= 1))
        return -EINVAL;
    d->rx_loss = rx_loss;
    d->tx_loss = tx_loss;
    d->rng = seed ? seed : 0x9e3779b97f4a7c15ull;
    return 0;
}
