/* SPDX-License-Identifier: MIT */
/*
 * zbuf-packet: the socket side.  Opens an AF_PACKET socket on an interface,
 * sets up and maps the rings (the walkers in rx.c and tx.c do the rest),
 * kicks the transmit ring, reads the kernel's counters, and keeps the
 * mapping alive until the handle is closed and every loan is back.
 *
 * Open order matters: the socket is created with protocol 0, so it receives
 * nothing until the rings are mapped, and bound to the interface and
 * protocol last.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/ethtool.h>
#include <net/if_arp.h>
#include <arpa/inet.h>
#include <linux/sockios.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "packet_internal.h"

#define DEFAULT_RX_FRAMES 1024u
#define DEFAULT_RX_FRAMES_OFFLOAD 128u
#define DEFAULT_TX_FRAMES 512u
#define DEFAULT_V3_BLOCK (256u * 1024u)
#define MIN_FRAME_DATA 64u /* a slot must hold at least a minimal Ethernet frame */

struct zbuf_packet {
    int fd;              /* the packet socket */
    int epfd;            /* epoll on fd, edge-triggered: zbuf_packet_fd() */
    uint8_t *map;        /* both rings: receive first, then transmit */
    uint8_t *loan_map;   /* the rings mapped again: lent frames point here, so
                            that a slot can be bounced (see rx.c) */
    size_t map_len;
    bool has_rx, has_tx;
    struct zpk_rx rx;    /* rx.life also keeps the handle: see handle_destroy() */
    struct zpk_tx tx;
    zbuf_pool_t *pool;   /* copies beyond the loan share */
    zbuf_packet_stats_t st;
    zbuf_packet_info_t info;
    int pending_err;     /* socket error seen on the descriptor, not yet returned */
    int kick_err;        /* error of the last kick, returned by the next flush */
};

static void say(char *why, size_t why_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say(char *why, size_t why_len, const char *fmt, ...)
{
    if (why == NULL || why_len == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, why_len, fmt, ap);
    va_end(ap);
}

void zbuf_packet_config_init(zbuf_packet_config_t *cfg)
{
    if (cfg == NULL)
        return;
    memset(cfg, 0, sizeof *cfg);
    cfg->version = ZBUF_PACKET_V2;
    cfg->rx_frames = 0; /* derived: see zbuf_packet_config_t */
    cfg->tx_frames = DEFAULT_TX_FRAMES;
    cfg->loan_max_percent = 50;
    cfg->copy_buf_size = 2048;
    cfg->copy_bufs = ZBUF_PACKET_COPY_AUTO;
    cfg->protocol = ETH_P_ALL;
    cfg->ignore_outgoing = true;
    cfg->tx_loss = true;
    cfg->tx_linear = true;
    cfg->rx_ring = true;
    cfg->tx_ring = true;
}

/* ------------------------------------------------------------- geometry */

static uint32_t rx_hdrlen(unsigned version)
{
    return version == ZBUF_PACKET_V3 ? (uint32_t)TPACKET3_HDRLEN : (uint32_t)TPACKET2_HDRLEN;
}

/* Where the kernel puts an Ethernet frame in a receive slot (tpacket_rcv:
 * the network header aligned to 16 after the header and 16 bytes). */
static uint32_t rx_macoff(unsigned version)
{
    return TPACKET_ALIGN(rx_hdrlen(version) + 16) - ETH_HLEN;
}

static uint32_t tx_dataoff(unsigned version)
{
    return rx_hdrlen(version) - (uint32_t)sizeof(struct sockaddr_ll);
}

int zpk_geom_check(const struct zpk_geom *g, unsigned version, bool rx, char *why, size_t why_len)
{
    const char *ring = rx ? "receive" : "transmit";
    long page = sysconf(_SC_PAGESIZE);
    uint32_t hdr = rx ? rx_hdrlen(version) : tx_dataoff(version);
    if (g->frame_size % TPACKET_ALIGNMENT != 0) {
        say(why, why_len, "%s ring: frame size %u is not a multiple of %d (TPACKET_ALIGNMENT)",
            ring, g->frame_size, TPACKET_ALIGNMENT);
        return -EINVAL;
    }
    if (g->frame_size < hdr + MIN_FRAME_DATA) {
        say(why, why_len, "%s ring: frame size %u leaves no room for a frame after the %u-byte "
            "TPACKET header (at least %u)", ring, g->frame_size, hdr, hdr + MIN_FRAME_DATA);
        return -EINVAL;
    }
    if (g->block_size == 0 || page <= 0 || g->block_size % (uint32_t)page != 0) {
        say(why, why_len, "%s ring: block size %u is not a multiple of the page size (%ld)",
            ring, g->block_size, page);
        return -EINVAL;
    }
    if (g->block_size < g->frame_size) {
        say(why, why_len, "%s ring: block size %u is smaller than the frame size %u", ring,
            g->block_size, g->frame_size);
        return -EINVAL;
    }
    if (version == ZBUF_PACKET_V3 && rx &&
        g->block_size <= TPACKET_ALIGN(sizeof(struct tpacket_block_desc)) + TPACKET3_HDRLEN) {
        say(why, why_len, "receive ring: block size %u cannot hold a TPACKET_V3 block header "
            "and a frame", g->block_size);
        return -EINVAL;
    }
    uint32_t fpb = g->block_size / g->frame_size;
    if (g->block_nr == 0 || g->frame_nr == 0 || (uint64_t)fpb * g->block_nr != g->frame_nr) {
        say(why, why_len, "%s ring: %u frames per block (block %u / frame %u) times %u blocks "
            "is %llu, not the frame count %u", ring, fpb, g->block_size, g->frame_size,
            g->block_nr, (unsigned long long)fpb * g->block_nr, g->frame_nr);
        return -EINVAL;
    }
    if ((uint64_t)g->block_size * g->block_nr > (1ull << 32)) {
        say(why, why_len, "%s ring: %llu bytes is more than 4 GiB", ring,
            (unsigned long long)g->block_size * g->block_nr);
        return -EINVAL;
    }
    return 0;
}

static uint32_t round_up(uint32_t v, uint32_t to)
{
    return (v + to - 1) / to * to;
}

/* Work out one ring's geometry from the configuration: explicit values are
 * taken as they are (and checked), zeros derived. */
static int geom_make(struct zpk_geom *g, unsigned version, bool rx, uint32_t frame_size,
                     uint32_t block_size, uint32_t frames, char *why, size_t why_len)
{
    uint32_t page = (uint32_t)sysconf(_SC_PAGESIZE);
    g->frame_size = frame_size;
    if (block_size) {
        g->block_size = block_size;
    } else if (version == ZBUF_PACKET_V3 && rx) {
        g->block_size = round_up(frame_size > DEFAULT_V3_BLOCK ? frame_size : DEFAULT_V3_BLOCK, page);
    } else {
        /* Up to 64 KiB per block (the kernel allocates each in one piece if
         * it can), at least one frame. */
        uint32_t fpb = frame_size ? 65536u / frame_size : 0;
        if (fpb == 0)
            fpb = 1;
        g->block_size = round_up(fpb * frame_size, page);
    }
    uint32_t fpb = frame_size && g->block_size >= frame_size ? g->block_size / frame_size : 0;
    if (version == ZBUF_PACKET_V3 && rx && !block_size && fpb) {
        /* V3 packs frames: the ring holds `frames` slot-sized frames' worth
         * of bytes, in at least 4 blocks so one can be filled while others
         * are read. */
        uint64_t bytes = (uint64_t)frames * frame_size;
        g->block_nr = (uint32_t)((bytes + g->block_size - 1) / g->block_size);
        if (g->block_nr < 4)
            g->block_nr = 4;
        g->frame_nr = fpb * g->block_nr;
    } else if (!block_size && fpb) {
        g->block_nr = (frames + fpb - 1) / fpb; /* rounded up to whole blocks */
        g->frame_nr = g->block_nr * fpb;
    } else {
        g->frame_nr = frames;
        g->block_nr = fpb ? frames / fpb : 0;
        if (fpb && frames % fpb != 0) {
            say(why, why_len, "%s ring: %u frames is not a whole number of blocks of %u frames "
                "(block %u / frame %u)", rx ? "receive" : "transmit", frames, fpb,
                g->block_size, frame_size);
            return -EINVAL;
        }
    }
    return zpk_geom_check(g, version, rx, why, why_len);
}

/* ------------------------------------------------------------ interface */

static int ethtool_value(int fd, const char *ifname, uint32_t cmd, uint32_t *out)
{
    struct ethtool_value ev = {.cmd = cmd};
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", ifname);
    ifr.ifr_data = (void *)&ev;
    if (ioctl(fd, SIOCETHTOOL, &ifr) != 0)
        return -errno;
    *out = ev.data;
    return 0;
}

/* Can frames above the MTU reach a packet socket on this interface?  With
 * GRO or LRO on, or on a veth (whose other end hands its TSO/GSO frames
 * over whole), yes. */
static bool offload_frames(int fd, const char *ifname)
{
    uint32_t v = 0;
    if (ethtool_value(fd, ifname, ETHTOOL_GGRO, &v) == 0 && v)
        return true;
    if (ethtool_value(fd, ifname, ETHTOOL_GFLAGS, &v) == 0 && (v & ETH_FLAG_LRO))
        return true;
    struct ethtool_drvinfo di = {.cmd = ETHTOOL_GDRVINFO};
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", ifname);
    ifr.ifr_data = (void *)&di;
    return ioctl(fd, SIOCETHTOOL, &ifr) == 0 && strcmp(di.driver, "veth") == 0;
}

static int iface_facts(int fd, const char *ifname, zbuf_packet_info_t *info, char *why,
                       size_t why_len)
{
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", ifname);
    if (ioctl(fd, SIOCGIFINDEX, &ifr) != 0) {
        int e = errno;
        say(why, why_len, "interface %s: %s", ifname, strerror(e));
        return e == ENODEV ? -ENODEV : -e;
    }
    info->ifindex = ifr.ifr_ifindex;
    if (ioctl(fd, SIOCGIFMTU, &ifr) != 0) {
        int e = errno;
        say(why, why_len, "interface %s: cannot read its MTU: %s", ifname, strerror(e));
        return -e;
    }
    info->mtu = (uint32_t)ifr.ifr_mtu;
    if (ioctl(fd, SIOCGIFHWADDR, &ifr) != 0) {
        int e = errno;
        say(why, why_len, "interface %s: cannot read its address: %s", ifname, strerror(e));
        return -e;
    }
    if (ifr.ifr_hwaddr.sa_family != ARPHRD_ETHER && ifr.ifr_hwaddr.sa_family != ARPHRD_LOOPBACK) {
        say(why, why_len, "interface %s is neither Ethernet nor loopback (ARPHRD %u)", ifname,
            (unsigned)ifr.ifr_hwaddr.sa_family);
        return -EINVAL;
    }
    memcpy(info->mac, ifr.ifr_hwaddr.sa_data, 6);
    return 0;
}

/* ------------------------------------------------------------ lifetime */

static void handle_destroy(struct zpk_rx *rx)
{
    zbuf_packet_t *p = (zbuf_packet_t *)((char *)rx - offsetof(zbuf_packet_t, rx));
    if (p->map)
        munmap(p->map, p->map_len);
    if (p->loan_map)
        munmap(p->loan_map, p->map_len); /* bounced pages included */
    zpk_rx_free_slots(rx);
    free(p);
}

/* Undo a partly done open (nothing lent yet). */
static int open_fail(zbuf_packet_t *p, int rc)
{
    if (p->epfd >= 0)
        close(p->epfd);
    if (p->fd >= 0)
        close(p->fd);
    zbuf_pool_delete(p->pool);
    handle_destroy(&p->rx);
    return rc;
}

static int sockopt(zbuf_packet_t *p, int level, int name, const void *v, socklen_t len,
                   const char *what, char *why, size_t why_len)
{
    if (setsockopt(p->fd, level, name, v, len) == 0)
        return 0;
    int e = errno;
    say(why, why_len, "setsockopt(%s): %s", what, strerror(e));
    return -e;
}

static int set_ring(zbuf_packet_t *p, int name, const struct zpk_geom *g, uint32_t tov_ms,
                    char *why, size_t why_len)
{
    struct tpacket_req3 req;
    memset(&req, 0, sizeof req);
    req.tp_block_size = g->block_size;
    req.tp_block_nr = g->block_nr;
    req.tp_frame_size = g->frame_size;
    req.tp_frame_nr = g->frame_nr;
    req.tp_retire_blk_tov = tov_ms;
    socklen_t len = p->info.version == ZBUF_PACKET_V3 ? sizeof req : sizeof(struct tpacket_req);
    return sockopt(p, SOL_PACKET, name, &req, len,
                   name == PACKET_RX_RING ? "PACKET_RX_RING" : "PACKET_TX_RING", why, why_len);
}

static int check_config(const zbuf_packet_config_t *c, char *why, size_t why_len)
{
    if (c->version != ZBUF_PACKET_V2 && c->version != ZBUF_PACKET_V3) {
        say(why, why_len, "version %u: only TPACKET_V2 (2) and TPACKET_V3 (3) are supported",
            c->version);
        return -EINVAL;
    }
    if (!c->rx_ring && !c->tx_ring) {
        say(why, why_len, "neither a receive nor a transmit ring asked for");
        return -EINVAL;
    }
    if (c->loan_max_percent > 100) {
        say(why, why_len, "loan_max_percent %u is above 100", c->loan_max_percent);
        return -EINVAL;
    }
    if (c->rx_ring && c->copy_bufs && c->copy_buf_size == 0) {
        say(why, why_len, "copy_buf_size 0 with a copy pool");
        return -EINVAL;
    }
    if (c->block_timeout_ms && c->version != ZBUF_PACKET_V3) {
        say(why, why_len, "block_timeout_ms is for TPACKET_V3 only");
        return -EINVAL;
    }
    return 0;
}

static int setup_rings(zbuf_packet_t *p, const zbuf_packet_config_t *c, const char *ifname,
                       char *why, size_t why_len)
{
    unsigned v = c->version;
    struct zpk_geom rg = {0}, tg = {0};
    int rc;
    if (c->rx_ring) {
        uint32_t fs = c->frame_size;
        bool big = fs == 0 && offload_frames(p->fd, ifname);
        if (fs == 0)
            fs = TPACKET_ALIGN(rx_macoff(v) + (big ? ZBUF_PACKET_FRAME_OFFLOAD
                                                   : p->info.mtu + ETH_HLEN + 4));
        uint32_t n = c->rx_frames ? c->rx_frames : big ? DEFAULT_RX_FRAMES_OFFLOAD : DEFAULT_RX_FRAMES;
        if ((rc = geom_make(&rg, v, true, fs, c->block_size, n, why, why_len)) != 0)
            return rc;
        p->info.offload_sized = big;
        p->info.rx_frames = rg.frame_nr;
        p->info.frame_size = rg.frame_size;
        p->info.block_size = rg.block_size;
        p->info.rx_max_frame = v == ZBUF_PACKET_V3
                                   ? rg.block_size - TPACKET_ALIGN(sizeof(struct tpacket_block_desc)) -
                                         rx_macoff(v)
                                   : rg.frame_size - rx_macoff(v);
    }
    if (c->tx_ring) {
        uint32_t fs = c->tx_frame_size ? c->tx_frame_size
                                       : TPACKET_ALIGN(tx_dataoff(v) + 10 /* virtio header */ +
                                                       p->info.mtu + ETH_HLEN + 4);
        uint32_t tb = c->tx_block_size;
        if ((rc = geom_make(&tg, v, false, fs, tb, c->tx_frames, why, why_len)) != 0)
            return rc;
        p->info.tx_frames = tg.frame_nr;
        p->info.tx_frame_size = tg.frame_size;
    }
    if ((rc = sockopt(p, SOL_PACKET, PACKET_VERSION, &(int){v == ZBUF_PACKET_V3 ? TPACKET_V3 : TPACKET_V2},
                      sizeof(int), "PACKET_VERSION", why, why_len)) != 0)
        return rc;
    if (c->tx_ring && c->tx_loss &&
        (rc = sockopt(p, SOL_PACKET, PACKET_LOSS, &(int){1}, sizeof(int), "PACKET_LOSS", why,
                      why_len)) != 0)
        return rc;
    if (c->qdisc_bypass &&
        (rc = sockopt(p, SOL_PACKET, PACKET_QDISC_BYPASS, &(int){1}, sizeof(int),
                      "PACKET_QDISC_BYPASS", why, why_len)) != 0)
        return rc;
    if (c->sndbuf > 0 && setsockopt(p->fd, SOL_SOCKET, SO_SNDBUFFORCE, &c->sndbuf, sizeof(int)) != 0 &&
        (rc = sockopt(p, SOL_SOCKET, SO_SNDBUF, &c->sndbuf, sizeof(int), "SO_SNDBUF", why,
                      why_len)) != 0)
        return rc;
    /* A transmit-only socket asks for linear copies (see tx.c); a socket
     * with a receive ring would get virtio headers on received frames too. */
    bool vnet = c->tx_ring && !c->rx_ring && c->tx_linear;
    if (vnet && setsockopt(p->fd, SOL_PACKET, PACKET_VNET_HDR, &(int){1}, sizeof(int)) != 0)
        vnet = false; /* an old kernel: attached pages then */
    if (c->rx_ring && (rc = set_ring(p, PACKET_RX_RING, &rg, v == ZBUF_PACKET_V3 ? c->block_timeout_ms : 0,
                                     why, why_len)) != 0)
        return rc;
    if (c->tx_ring && (rc = set_ring(p, PACKET_TX_RING, &tg, 0, why, why_len)) != 0)
        return rc;
    size_t rx_len = (size_t)rg.block_size * rg.block_nr, tx_len = (size_t)tg.block_size * tg.block_nr;
    p->map_len = rx_len + tx_len;
    void *m = mmap(NULL, p->map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, p->fd, 0);
    if (m == MAP_FAILED) {
        int e = errno;
        say(why, why_len, "mmap of the rings (%zu bytes): %s", p->map_len, strerror(e));
        p->map_len = 0;
        return -e;
    }
    p->map = m;
    if (c->rx_ring) {
        m = mmap(NULL, p->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, p->fd, 0);
        if (m == MAP_FAILED) {
            int e = errno;
            say(why, why_len, "second mmap of the rings (%zu bytes): %s", p->map_len, strerror(e));
            return -e;
        }
        p->loan_map = m;
        p->rx.base = p->map;
        p->rx.loan_base = p->loan_map;
        p->rx.fd = p->fd;
        p->rx.map_len = p->map_len;
        p->rx.g = rg;
        p->rx.version = v;
        if ((rc = zpk_rx_init(&p->rx, c->loan_max_percent)) != 0) {
            say(why, why_len, "out of memory");
            return rc;
        }
        p->rx.destroy = handle_destroy;
        p->rx.copy_below = c->copy_below;
        p->has_rx = true;
    }
    if (c->tx_ring) {
        p->tx.base = p->map + rx_len;
        p->tx.g = tg;
        p->tx.version = v;
        p->tx.max_frame = p->info.mtu + ETH_HLEN;
        p->tx.vnet_hdr = vnet;
        p->tx.st = &p->st;
        zpk_tx_init(&p->tx);
        p->info.tx_max_frame = p->tx.max_frame;
        p->has_tx = true;
    }
    return 0;
}

int zbuf_packet_open(const char *ifname, const zbuf_packet_config_t *cfg, zbuf_packet_t **out,
                     char *why, size_t why_len)
{
    if (ifname == NULL || out == NULL || strlen(ifname) >= IFNAMSIZ) {
        say(why, why_len, "no interface name, no place for the handle, or a name too long");
        return -EINVAL;
    }
    zbuf_packet_config_t c;
    if (cfg)
        c = *cfg;
    else
        zbuf_packet_config_init(&c);
    int rc = check_config(&c, why, why_len);
    if (rc)
        return rc;
    zbuf_packet_t *p = calloc(1, sizeof *p);
    if (p == NULL) {
        say(why, why_len, "out of memory");
        return -ENOMEM;
    }
    p->fd = p->epfd = -1;
    p->rx.destroy = handle_destroy;
    p->rx.st = &p->st;
    atomic_init(&p->rx.life, 1);
    p->info.version = c.version;
    p->fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
    if (p->fd < 0) {
        int e = errno;
        if (e == EPERM || e == EACCES)
            say(why, why_len, "packet sockets need CAP_NET_RAW (run as root, or give the "
                "program the capability: setcap cap_net_raw+ep PROGRAM)");
        else if (e == EAFNOSUPPORT)
            say(why, why_len, "this kernel has no AF_PACKET sockets (CONFIG_PACKET)");
        else
            say(why, why_len, "socket(AF_PACKET): %s", strerror(e));
        return open_fail(p, e == EACCES ? -EPERM : -e);
    }
    if ((rc = iface_facts(p->fd, ifname, &p->info, why, why_len)) != 0 ||
        (rc = setup_rings(p, &c, ifname, why, why_len)) != 0)
        return open_fail(p, rc);
    if (c.rx_ring && c.ignore_outgoing) {
        if (setsockopt(p->fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &(int){1}, sizeof(int)) == 0)
            p->info.ignore_outgoing_kernel = true;
        else
            p->rx.filter_outgoing = true; /* before Linux 4.20 */
    }
    struct sockaddr_ll sll = {.sll_family = AF_PACKET,
                              .sll_protocol = htons(c.rx_ring ? c.protocol : 0),
                              .sll_ifindex = p->info.ifindex};
    if (bind(p->fd, (struct sockaddr *)&sll, sizeof sll) != 0) {
        int e = errno;
        say(why, why_len, "bind to %s: %s", ifname, strerror(e));
        return open_fail(p, -e);
    }
    if (c.promiscuous) {
        struct packet_mreq mr = {.mr_ifindex = p->info.ifindex, .mr_type = PACKET_MR_PROMISC};
        if ((rc = sockopt(p, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof mr,
                          "PACKET_ADD_MEMBERSHIP promiscuous", why, why_len)) != 0)
            return open_fail(p, rc);
    }
    if (c.rx_ring) {
        uint32_t n = c.copy_bufs;
        if (n == ZBUF_PACKET_COPY_AUTO) {
            uint64_t half = (uint64_t)p->rx.g.block_size * p->rx.g.block_nr / 2 / c.copy_buf_size;
            n = half < 256 ? 256 : half > 1u << 20 ? 1u << 20 : (uint32_t)half;
        }
        if (n && (rc = zbuf_pool_create(c.copy_buf_size, n, &p->pool)) != 0) {
            say(why, why_len, "copy pool of %u buffers of %u bytes: %s", n, c.copy_buf_size,
                zbuf_strerror(rc));
            return open_fail(p, rc);
        }
        p->rx.pool = p->pool;
    }
    p->epfd = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLERR | EPOLLET, .data.ptr = p};
    if (p->epfd < 0 || epoll_ctl(p->epfd, EPOLL_CTL_ADD, p->fd, &ev) != 0) {
        int e = errno;
        say(why, why_len, "epoll: %s", strerror(e));
        return open_fail(p, -e);
    }
    *out = p;
    return 0;
}

int zbuf_packet_fd(const zbuf_packet_t *p)
{
    return p ? p->epfd : -1;
}

int zbuf_packet_socket(const zbuf_packet_t *p)
{
    return p ? p->fd : -1;
}

int zbuf_packet_info(const zbuf_packet_t *p, zbuf_packet_info_t *out)
{
    if (p == NULL || out == NULL)
        return -EINVAL;
    *out = p->info;
    return 0;
}

/* ------------------------------------------------------------- receive */

/* The socket's pending error, mapped: an interface that is gone reads as
 * -ENODEV rather than the -ENETDOWN the kernel reports for both. */
static int socket_error(zbuf_packet_t *p)
{
    int e = 0;
    socklen_t l = sizeof e;
    if (getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &e, &l) != 0 || e == 0)
        return 0;
    char name[IF_NAMESIZE];
    if (e == ENETDOWN && if_indextoname((unsigned)p->info.ifindex, name) == NULL)
        return -ENODEV;
    return -e;
}

/* Take the descriptor's edge (and the socket error it may carry). */
static void harvest(zbuf_packet_t *p)
{
    struct epoll_event ev;
    if (epoll_wait(p->epfd, &ev, 1, 0) == 1 && (ev.events & EPOLLERR)) {
        int e = socket_error(p);
        if (e)
            p->pending_err = e;
    }
}

int zbuf_packet_recv(zbuf_packet_t *p, zbuf_t **frames, zbuf_packet_rxinfo_t *info, unsigned max)
{
    if (p == NULL || frames == NULL || max == 0 || !p->has_rx)
        return -EINVAL;
    /* While frames flow, no system call: the walk finds them.  Only when
     * the ring looks empty is the edge taken, and the ring looked at once
     * more: a frame that arrived before the edge was taken is found by that
     * second look, one arriving after it raises a new edge. */
    int n = p->pending_err ? 0 : zpk_rx_take(&p->rx, frames, info, max);
    if (n > 0)
        return n;
    harvest(p);
    if (p->pending_err) {
        int e = p->pending_err;
        p->pending_err = 0;
        /* Frames received before the error may still be in the ring: re-arm
         * so that the descriptor says so. */
        struct epoll_event re = {.events = EPOLLIN | EPOLLERR | EPOLLET, .data.ptr = p};
        epoll_ctl(p->epfd, EPOLL_CTL_MOD, p->fd, &re);
        return e;
    }
    n = zpk_rx_take(&p->rx, frames, info, max);
    return n > 0 ? n : -EAGAIN;
}

bool zbuf_packet_rx_pending(zbuf_packet_t *p)
{
    return p && p->has_rx && zpk_rx_ready(&p->rx);
}

/* ------------------------------------------------------------ transmit */

/* One kick: the kernel takes every marked slot from its head on.  With
 * MSG_DONTWAIT it may stop early (socket buffer full) and still return a
 * count, so whether it took our newest slot is read from that slot. */
static int kick(zbuf_packet_t *p)
{
    if (p->tx.unkicked == 0)
        return 0;
    p->st.tx_kicks++;
    ssize_t r;
    do {
        r = sendto(p->fd, NULL, 0, MSG_DONTWAIT, NULL, 0);
    } while (r < 0 && errno == EINTR);
    int e = r < 0 ? errno : 0;
    if (r < 0 && e != EAGAIN && e != EWOULDBLOCK && e != ENOBUFS)
        return -e;
    uint32_t last = p->tx.head == 0 ? p->tx.g.frame_nr - 1 : p->tx.head - 1;
    uint8_t *f = zpk_frame(p->tx.base, &p->tx.g, last);
    uint32_t st = zpk_load_status(f) & ~(uint32_t)ZPK_TS_MASK; /* tp_status is first in V2 */
    if (p->tx.version == ZBUF_PACKET_V3)
        st = zpk_load_status(&((struct tpacket3_hdr *)f)->tp_status) & ~(uint32_t)ZPK_TS_MASK;
    if (st == TP_STATUS_SEND_REQUEST) {
        p->st.tx_kick_retries++; /* not all taken: the next send or flush kicks again */
        return 0;
    }
    p->tx.unkicked = 0;
    return 0;
}

static int do_send(zbuf_packet_t *p, zbuf_t *frame)
{
    int rc = zpk_tx_put(&p->tx, frame);
    if (rc == -EAGAIN && p->tx.unkicked) {
        int k = kick(p);
        if (k)
            p->kick_err = k;
        zpk_tx_reap(&p->tx);
        rc = zpk_tx_put(&p->tx, frame);
    }
    if (rc == -EAGAIN)
        p->st.tx_ring_full++;
    return rc;
}

int zbuf_packet_send(zbuf_packet_t *p, zbuf_t *frame, unsigned flags)
{
    if (p == NULL || frame == NULL || !p->has_tx)
        return -EINVAL;
    int rc = do_send(p, frame);
    if (rc)
        return rc;
    /* Kick now unless more follow; kick anyway once half the ring waits. */
    if (!(flags & ZBUF_PACKET_MORE) || p->tx.unkicked >= p->tx.g.frame_nr / 2) {
        int k = kick(p);
        if (k)
            p->kick_err = k;
    }
    return 0;
}

int zbuf_packet_send_batch(zbuf_packet_t *p, zbuf_t *const *frames, unsigned n)
{
    if (p == NULL || (frames == NULL && n) || !p->has_tx)
        return -EINVAL;
    unsigned k = 0;
    int rc = 0;
    while (k < n && (rc = do_send(p, frames[k])) == 0)
        k++;
    int e = kick(p);
    if (e)
        p->kick_err = e;
    return k > 0 || rc == 0 ? (int)k : rc;
}

int zbuf_packet_flush(zbuf_packet_t *p)
{
    if (p == NULL || !p->has_tx)
        return -EINVAL;
    int e = kick(p);
    zpk_tx_reap(&p->tx);
    if (e == 0 && p->tx.refused && !p->kick_err)
        e = -EMSGSIZE;
    if (e == 0) {
        e = p->kick_err;
        p->kick_err = 0;
    }
    return e;
}

unsigned zbuf_packet_tx_pending(zbuf_packet_t *p)
{
    if (p == NULL || !p->has_tx)
        return 0;
    return zpk_tx_reap(&p->tx);
}

bool zbuf_packet_tx_needs_kick(const zbuf_packet_t *p)
{
    return p && p->has_tx && p->tx.unkicked > 0;
}

/* -------------------------------------------------------------- counters */

static void kernel_counters(zbuf_packet_t *p)
{
    if (!p->has_rx || p->fd < 0)
        return;
    struct tpacket_stats_v3 ks;
    memset(&ks, 0, sizeof ks);
    socklen_t l = p->info.version == ZBUF_PACKET_V3 ? sizeof ks : sizeof(struct tpacket_stats);
    if (getsockopt(p->fd, SOL_PACKET, PACKET_STATISTICS, &ks, &l) == 0) {
        p->st.kernel_packets += ks.tp_packets;
        p->st.kernel_drops += ks.tp_drops;
        if (p->info.version == ZBUF_PACKET_V3)
            p->st.kernel_freezes += ks.tp_freeze_q_cnt;
    }
}

int zbuf_packet_stats(zbuf_packet_t *p, zbuf_packet_stats_t *out)
{
    if (p == NULL || out == NULL)
        return -EINVAL;
    kernel_counters(p);
    if (p->has_tx)
        zpk_tx_reap(&p->tx);
    *out = p->st;
    out->loans_out = p->has_rx ? atomic_load_explicit(&p->rx.loans_out, memory_order_relaxed) : 0;
    out->tx_in_ring = p->has_tx ? p->tx.in_ring : 0;
    return 0;
}

/* ----------------------------------------------------------------- close */

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int zbuf_packet_close(zbuf_packet_t *p, int timeout_ms)
{
    if (p == NULL)
        return 0;
    int dropped = 0;
    if (p->has_tx) {
        uint64_t end = now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
        for (;;) {
            if (p->tx.in_ring && !p->tx.unkicked)
                p->tx.unkicked = 1; /* re-kick: a kick may have stopped early */
            int e = kick(p);
            if (zpk_tx_reap(&p->tx) == 0 || e == -ENXIO || e == -ENODEV || p->tx.refused ||
                now_ms() >= end)
                break;
            struct timespec ts = {0, 200 * 1000};
            nanosleep(&ts, NULL);
        }
        dropped = (int)p->tx.in_ring;
        p->st.tx_dropped_at_close += p->tx.in_ring;
    }
    close(p->epfd);
    close(p->fd); /* the mapping stays valid until munmap */
    p->rx.fd = -1;
    p->epfd = p->fd = -1;
    zbuf_pool_delete(p->pool); /* buffers still held stay valid */
    p->pool = NULL;
    p->rx.pool = NULL;
    zpk_rx_release_owner(&p->rx); /* frees the handle now, or with the last loan */
    return dropped;
}
