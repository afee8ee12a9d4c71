/* SPDX-License-Identifier: MIT */
/*
 * Linux TAP driver: /dev/net/tun with IFF_TAP | IFF_NO_PI, non-blocking.
 *
 * Receive: each read() fills one buffer taken from the driver's pool; the
 * frame goes up as a zbuf referencing that buffer, and the buffer returns to
 * the pool when the application (or the stack) deletes the last zbuf that
 * holds any of it.  The pool is the driver's rx_pool, so the stack keeps it
 * from running dry (<zbuf/ip_opts.h>, "Receive pool pressure").  Should it
 * run dry all the same (an application holding every buffer), reading goes
 * on into a scratch buffer and the frames are dropped (counted in
 * zbuf_ip_stats_t::rx_no_buffer): a device left unread would make the
 * stack deaf even to the ACKs and ARP replies that let buffers come back.
 *
 * Transmit: writev() straight from the frame's segments (header segment +
 * payload segments shared with TCP's retransmission queue); never flattened
 * unless a frame has more segments than one writev takes (counted as a copy
 * then).  The tun device takes a whole frame per write or none.
 */
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include "stack_internal.h"

#define TAP_IOV 64

struct tap {
    int fd;
    zbuf_pool_t *pool;
    uint8_t *scratch;        /* frames read while the pool is empty land here */
    size_t frame_max;        /* bytes of a pool buffer (and of scratch) */
    zbuf_ip_netif_t *nif;
    double rx_loss, tx_loss; /* zbuf_ip_tap_set_loss() */
    uint64_t rng;
};

static double rnd(struct tap *t)
{
    t->rng ^= t->rng >> 12;
    t->rng ^= t->rng << 25;
    t->rng ^= t->rng >> 27;
    return (double)((t->rng * 0x2545f4914f6cdd1dull) >> 11) / 9007199254740992.0;
}

static int tap_transmit(void *ctx, zbuf_t *frame)
{
    struct tap *t = ctx;
    if (t->tx_loss > 0 && rnd(t) < t->tx_loss) {
        zbuf_delete(frame);
        return 0;
    }
    struct iovec iov[TAP_IOV];
    size_t len = zbuf_length(frame), got = 0;
    int n = zbuf_iovec(frame, 0, ZBUF_TO_END, iov, TAP_IOV, &got);
    int rc = 0;
    if (n < 0) {
        rc = n;
    } else {
        if (got < len) {
            /* Too many segments for one writev: flatten (rare, counted). */
            void *p;
            if (zbuf_pullup(frame, 0, len, &p) != 0) {
                zbuf_delete(frame);
                return -ENOMEM;
            }
            iov[0].iov_base = p;
            iov[0].iov_len = len;
            n = 1;
        }
        ssize_t w = writev(t->fd, iov, n);
        if (w < 0)
            rc = -errno; /* EAGAIN: the kernel queue is full; TCP will retransmit */
    }
    zbuf_delete(frame);
    return rc;
}

static int tap_poll(void *ctx, unsigned budget)
{
    struct tap *t = ctx;
    int n = 0;
    while ((unsigned)n < budget) {
        zbuf_buf_t *b;
        if (zbuf_pool_get(t->pool, &b) != 0) {
            /* Drain and drop: never stop reading. */
            if (read(t->fd, t->scratch, t->frame_max) <= 0)
                break;
            n++;
            zbuf_ip_netif_rx_nobuf(t->nif, 1);
            continue;
        }
        ssize_t r = read(t->fd, zbuf_buf_data(b), zbuf_buf_size(b));
        if (r <= 0) {
            zbuf_buf_unref(b);
            break;
        }
        zbuf_t *z;
        if (zbuf_create(&z) != 0) {
            zbuf_buf_unref(b);
            break;
        }
        if (zbuf_insert_ref(z, 0, b, 0, (size_t)r, NULL) != 0) {
            zbuf_delete(z);
            zbuf_buf_unref(b);
            break;
        }
        zbuf_buf_unref(b);
        n++;
        if (t->rx_loss > 0 && rnd(t) < t->rx_loss)
            zbuf_delete(z);
        else
            zbuf_ip_netif_input(t->nif, z);
    }
    return n;
}

static void tap_detach(void *ctx)
{
    struct tap *t = ctx;
    close(t->fd);
    zbuf_pool_delete(t->pool); /* buffers still held by zbufs stay valid */
    free(t->scratch);
    free(t);
}

int zbuf_ip_tap_open(zbuf_ip_stack_t *s, const char *name, const zbuf_ip_netif_config_t *cfg,
                     unsigned pool_bufs, zbuf_ip_netif_t **out)
{
    if (s == NULL || name == NULL || cfg == NULL || out == NULL || strlen(name) >= IFNAMSIZ)
        return -EINVAL;
    struct tap *t = calloc(1, sizeof *t);
    if (t == NULL)
        return -ENOMEM;
    t->fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (t->fd < 0) {
        int e = -errno;
        free(t);
        return e;
    }
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
    memcpy(ifr.ifr_name, name, strlen(name));
    if (ioctl(t->fd, TUNSETIFF, &ifr) < 0) {
        int e = -errno;
        close(t->fd);
        free(t);
        return e;
    }
    uint16_t mtu = cfg->mtu ? cfg->mtu : ZBUF_IP__MTU_DEFAULT;
    t->frame_max = (size_t)mtu + ETH_HLEN + ETH_VLAN_LEN;
    t->scratch = malloc(t->frame_max);
    int rc = t->scratch ? zbuf_pool_create(t->frame_max, pool_bufs ? pool_bufs : 1024, &t->pool)
                        : -ENOMEM;
    if (rc) {
        close(t->fd);
        free(t->scratch);
        free(t);
        return rc;
    }
    const zbuf_ip_driver_t drv = {
        .transmit = tap_transmit,
        .poll = tap_poll,
        .detach = tap_detach,
        .rx_pool = t->pool,
    };
    rc = zbuf_ip_netif_add(s, cfg, &drv, t, &t->nif);
    if (rc) {
        close(t->fd);
        zbuf_pool_delete(t->pool);
        free(t->scratch);
        free(t);
        return rc;
    }
    *out = t->nif;
    return 0;
}

int zbuf_ip_tap_fd(const zbuf_ip_netif_t *nif)
{
    if (nif == NULL || !nif->in_use || nif->drv.transmit != tap_transmit)
        return -1;
    return ((const struct tap *)nif->ctx)->fd;
}

int zbuf_ip_tap_set_loss(zbuf_ip_netif_t *nif, double rx_loss, double tx_loss, uint64_t seed)
{
    if (zbuf_ip_tap_fd(nif) < 0 || !(rx_loss >= 0 && rx_loss <= 1) || !(tx_loss >= 0 && tx_loss <= 1))
        return -EINVAL;
    struct tap *t = nif->ctx;
    t->rx_loss = rx_loss;
    t->tx_loss = tx_loss;
    t->rng = seed ? seed : 0x9e3779b97f4a7c15ull;
    return 0;
}
