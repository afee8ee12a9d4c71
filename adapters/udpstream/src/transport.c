/* SPDX-License-Identifier: MIT */
/*
 * The built-in transports.
 *
 * UDP socket: sends gather each datagram's header segment and payload
 * segments straight into sendmmsg() (up to 64 datagrams per system call),
 * runs of equal-size datagrams as one UDP GSO send (UDP_SEGMENT), off for
 * good when the kernel or the route refuses it; a datagram that does not
 * fit the iovec arrays goes through zbuf_sock_sendmmsg_fd().  Receives are
 * zbuf_sock_recvmmsg() into buffers of the stream's own pool, or with UDP
 * GRO into larger pool regions that coalesced datagrams are split from by
 * reference, so that a peer can only ever hold this stream's buffers.  When the application holds every
 * buffer, one datagram at a time is read into a scratch buffer and only
 * its acknowledgement fields are used (its data, if any, is counted and
 * dropped): acknowledgements keep flowing while the reader is slow.
 *
 * The bundled stack's UDP (when built with it): a PCB whose receive
 * callback feeds the stream; sends are zbuf_ip_udp_sendto(), which puts
 * the IP and UDP headers in front of the same segments.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <zbuf/sock.h>

#include "internal.h"

#ifdef ZBUF_UDPSTREAM_WITH_STACK
#include <zbuf/ip.h>
#endif

/* ---------------------------------------------------------- UDP sockets */

#define GSO_MAX 64        /* the kernel's UDP_MAX_SEGMENTS (128 since Linux 6.9) */
#define GSO_BYTES 65000   /* below the 64 KiB a UDP GSO send may carry */
#define SEND_IOV 1024     /* IOV_MAX: iovecs of one send call, all datagrams */
#define MMSG_MAX 64       /* datagrams per sendmmsg() */

/* Datagrams dg[0..n) through zbuf_sock_sendmmsg_fd(); they are consumed.
 * The path for datagrams the gathering send cannot describe (a payload
 * of many small or file segments: zbuf-sock bounces those). */
static int fd_send(void *ctx, zbuf_t **dg, unsigned n, const struct sockaddr *to, socklen_t tolen)
{
    zbuf_udpstream_t *s = ctx;
    zbuf_sock_msg_t msgs[MMSG_MAX];
    if (n > MMSG_MAX)
        n = MMSG_MAX; /* the stream never batches more */
    for (unsigned i = 0; i < n; i++) {
        msgs[i].z = dg[i];
        memcpy(&msgs[i].addr, to, tolen);
        msgs[i].addrlen = tolen;
        msgs[i].flags = 0;
    }
    int rc = zbuf_sock_sendmmsg_fd(zbuf__us_tstate(s)->fd, msgs, n, MSG_DONTWAIT);
    for (unsigned i = 0; i < n; i++)
        zbuf_delete(dg[i]);
    return rc;
}

/* The iovecs of datagram @o (header, then the payload's segments by
 * reference) at @iov, room @room: how many, or -1 when the payload does
 * not fit in them or has a file segment. */
static int out_iov(const struct zus_out *o, struct iovec *iov, int room)
{
    if (room < 1)
        return -1;
    iov[0] = (struct iovec){.iov_base = (void *)o->hdr, .iov_len = o->hlen};
    if (o->plen == 0)
        return 1;
    size_t covered;
    int m = zbuf_iovec(o->payload, 0, ZBUF_TO_END, iov + 1, room - 1, &covered);
    return m < 0 || covered != o->plen ? -1 : m + 1;
}

/* How many datagrams from o[i] on may go as one GSO send: one length (the
 * last may be shorter), at most GSO_MAX of them and GSO_BYTES in all. */
static unsigned gso_run(const struct zus_out *o, unsigned i, unsigned n)
{
    size_t seg = (size_t)o[i].hlen + o[i].plen, total = seg;
    unsigned j = i + 1;
    while (j < n && j - i < GSO_MAX) {
        size_t len = (size_t)o[j].hlen + o[j].plen;
        if (len > seg || total + len > GSO_BYTES)
            break;
        total += len;
        j++;
        if (len < seg)
            break; /* a shorter one ends the run */
    }
    return j - i;
}

/* The UDP_SEGMENT control message of a GSO send: the kernel cuts the
 * message's bytes into datagrams of @seg bytes (the last may be shorter),
 * with one pass through the stack for all of them (and on loopback a
 * receiver with UDP GRO gets them whole). */
union gso_ctl {
    char buf[CMSG_SPACE(sizeof(uint16_t))];
    struct cmsghdr align;
};

static void gso_cmsg(struct msghdr *mh, union gso_ctl *ctl, size_t seg)
{
    memset(ctl, 0, sizeof *ctl);
    mh->msg_control = ctl->buf;
    mh->msg_controllen = sizeof ctl->buf;
    struct cmsghdr *c = CMSG_FIRSTHDR(mh);
    c->cmsg_level = SOL_UDP;
    c->cmsg_type = UDP_SEGMENT;
    c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
    uint16_t gso = (uint16_t)seg;
    memcpy(CMSG_DATA(c), &gso, sizeof gso);
}

/* Whether a failed GSO send means the kernel or the route cannot do it:
 * no GSO (ENOPROTOOPT, EOPNOTSUPP), no checksum offload on the device
 * (EIO), or datagrams larger than the path's MTU, which GSO never
 * fragments (EMSGSIZE, EINVAL on older kernels) while plain sends do. */
static bool gso_refused(int err)
{
    return err == EIO || err == EINVAL || err == ENOPROTOOPT || err == EOPNOTSUPP ||
           err == EMSGSIZE;
}

/*
 * The socket transport's send (zus_transport_state::send_out): headers
 * and payload segments gathered straight into one sendmmsg() (no datagram
 * zbuf made), each run of equal-size datagrams one message with
 * UDP_SEGMENT (GSO), so that a 256 KiB write leaves in one system call.
 * A datagram whose payload cannot be gathered goes alone through
 * fd_send(); when the kernel refuses GSO, it is off for good.
 */
static int fd_send_out(zbuf_udpstream_t *s, const struct zus_out *o, unsigned n,
                       const struct sockaddr *to, socklen_t tolen)
{
    struct zus_transport_state *ts = zbuf__us_tstate(s);
    struct iovec iov[SEND_IOV];
    struct mmsghdr mm[MMSG_MAX];
    union gso_ctl ctl[MMSG_MAX];
    unsigned cnt[MMSG_MAX]; /* datagrams of each message */
    unsigned sent = 0;
    int rc = 0;
    while (sent < n) {
        unsigned c = 0, j = sent;
        int k = 0;
        while (j < n && c < MMSG_MAX) {
            unsigned run = ts->gso_off ? 1 : gso_run(o, j, n), d = 0;
            int k0 = k;
            for (int m; d < run && (m = out_iov(&o[j + d], iov + k, SEND_IOV - k)) > 0; d++)
                k += m;
            if (d == 0)
                break; /* o[j] cannot be gathered, or no iovec left */
            mm[c].msg_hdr = (struct msghdr){.msg_name = (void *)to, .msg_namelen = tolen,
                                            .msg_iov = iov + k0, .msg_iovlen = (size_t)(k - k0)};
            mm[c].msg_len = 0;
            if (d > 1)
                gso_cmsg(&mm[c].msg_hdr, &ctl[c], (size_t)o[j].hlen + o[j].plen);
            cnt[c++] = d;
            j += d;
            if (d < run)
                break;
        }
        if (c == 0) {
            zbuf_t *z; /* o[sent] cannot be gathered (file segment, IOV_MAX segments) */
            rc = zbuf__us_out_zbuf(&o[sent], &z);
            if (rc == 0 && (rc = fd_send(s, &z, 1, to, tolen)) > 0)
                sent++;
            if (rc < 0)
                break;
            continue;
        }
        int r;
        do
            r = sendmmsg(ts->fd, mm, c, MSG_DONTWAIT | MSG_NOSIGNAL);
        while (r < 0 && errno == EINTR);
        if (r < 0) {
            if (cnt[0] > 1 && gso_refused(errno)) {
                ts->gso_off = true; /* the kernel or the route cannot: plain sends */
                continue;
            }
            rc = -errno;
            break;
        }
        for (int i = 0; i < r; i++) {
            sent += cnt[i];
            if (cnt[i] > 1)
                ts->gso_sends++;
        }
        if ((unsigned)r < c)
            break; /* the kernel stopped early (a refused GSO run goes first next time) */
    }
    if (sent > 0 || rc >= 0) {
        ts->want_pollout = false;
        return (int)sent;
    }
    return rc;
}

/*
 * No receive buffer is free: read one message into a scratch buffer for
 * the acknowledgement fields only.  A message may be a run of datagrams
 * (UDP GRO): each that fits in the scratch (a pure acknowledgement) is
 * used; a data datagram does not fit, and is counted and dropped.
 */
static int fd_recv_scratch(zbuf_udpstream_t *s, int fd)
{
    uint8_t scratch[2 * (ZBUF_UDPSTREAM_HEADER + 8 * ZBUF_UDPSTREAM_SACK_MAX) + 64];
    struct sockaddr_storage from;
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = {.iov_base = scratch, .iov_len = sizeof scratch};
    struct msghdr mh = {.msg_name = &from, .msg_namelen = sizeof from, .msg_iov = &iov,
                        .msg_iovlen = 1, .msg_control = ctl.buf,
                        .msg_controllen = sizeof ctl.buf};
    ssize_t r;
    do
        r = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_TRUNC); /* r: the whole length */
    while (r < 0 && errno == EINTR);
    if (r < 0)
        return 0;
    size_t n = (size_t)r, have = n < sizeof scratch ? n : sizeof scratch;
    size_t seg = (size_t)zbuf__us_gro_size(&mh);
    if (seg == 0 || seg > n)
        seg = n;
    if (seg == 0) {
        zbuf__us_count_bad(s, 1); /* an empty datagram */
        return 1;
    }
    for (size_t off = 0; off < n; off += seg) {
        size_t len = n - off < seg ? n - off : seg;
        if (off + len > have) {
            /* Larger than an acknowledgement: data, for which there is no
             * room; the stream's window had said so. */
            for (; off < n; off += seg)
                zbuf__us_count_no_buffer(s);
            break;
        }
        struct zus_rx rx = {.p = scratch + off, .len = len};
        zbuf__us_input_rx(s, &rx, (struct sockaddr *)&from, mh.msg_namelen, true);
    }
    return 1;
}

/* The receive batch follows the traffic, between @lo and @hi: each slot
 * offered needs room for the call, so an idle socket is asked for few. */
static void adapt_batch(struct zus_transport_state *ts, unsigned want, int got, unsigned lo,
                        unsigned hi)
{
    if (got <= 0)
        ts->recv_batch = lo;
    else if ((unsigned)got == want)
        ts->recv_batch = want * 2 > hi ? hi : want * 2;
    else if ((unsigned)got * 2 < want && want > lo)
        ts->recv_batch = want / 2;
}

static int fd_recv(void *ctx, zbuf_udpstream_t *s)
{
    (void)ctx;
    struct zus_transport_state *ts = zbuf__us_tstate(s);
    if (ts->gro.pool != NULL) {
        if (ts->recv_batch == 0)
            ts->recv_batch = 2;
        unsigned want = ts->recv_batch, offered = 0;
        int n = zbuf__us_gro_recv(s, &ts->gro, ts->fd, want, &offered);
        if (n == -ENOBUFS)
            return fd_recv_scratch(s, ts->fd);
        if (n != -EAGAIN && offered == want) /* (an idle call costs nothing per slot here) */
            adapt_batch(ts, want, n, 2, ZUS_GRO_SLOTS);
        /* Every slot offered was filled: there may be more. */
        return n <= 0 ? 0 : (unsigned)n == offered ? ZUS_RECV_BATCH : n;
    }
    zbuf_sock_msg_t msgs[ZUS_RECV_BATCH];
    if (ts->recv_batch == 0)
        ts->recv_batch = 4;
    unsigned want = ts->recv_batch;
    int n = zbuf_sock_recvmmsg(ts->fd, ts->pool, zbuf__us_max_dgram(s), msgs, want,
                               MSG_DONTWAIT);
    if (n == -ENOBUFS)
        return fd_recv_scratch(s, ts->fd);
    adapt_batch(ts, want, n, 4, ZUS_RECV_BATCH);
    if (n <= 0)
        return 0;
    for (int i = 0; i < n; i++)
        zbuf_udpstream_input(s, msgs[i].z, (struct sockaddr *)&msgs[i].addr, msgs[i].addrlen);
    return (unsigned)n == want ? ZUS_RECV_BATCH : n; /* full: there may be more */
}

uint32_t zbuf__us_rx_room(const struct zus_transport_state *ts)
{
    if (ts->gro.pool != NULL)
        return zbuf__us_gro_room(&ts->gro);
    if (ts->pool != NULL) {
        size_t n = zbuf_pool_available(ts->pool);
        return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
    }
    return UINT32_MAX;
}

static void fd_close(void *ctx)
{
    zbuf_udpstream_t *s = ctx;
    struct zus_transport_state *ts = zbuf__us_tstate(s);
    if (ts->gro.pool != NULL)
        zbuf__us_gro_close(&ts->gro, ts->fd);
    zbuf_pool_delete(ts->pool);
    ts->pool = NULL;
}

static int fd_open(int fd, const struct sockaddr *peer, socklen_t peerlen,
                   const zbuf_udpstream_opts_t *o, zbuf_udpstream_t **out)
{
    int type = 0;
    socklen_t tl = sizeof type;
    if (fd < 0 || out == NULL)
        return -EINVAL;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0)
        return -errno;
    if (type != SOCK_DGRAM)
        return -EPROTOTYPE;
    zbuf_udpstream_opts_t def;
    if (o == NULL) {
        zbuf_udpstream_opts_init(&def);
        o = &def;
    }
    static const zbuf_udpstream_transport_t t = {.send = fd_send, .recv = fd_recv,
                                                 .close = fd_close};
    zbuf_udpstream_t *s;
    int rc = zbuf__us_create(o, &t, NULL, peer, peerlen, &s);
    if (rc < 0)
        return rc;
    zbuf__us_set_ctx(s, s);
    struct zus_transport_state *ts = zbuf__us_tstate(s);
    ts->fd = fd;
    ts->send_out = fd_send_out;
    uint32_t bufs = o->pool_bufs ? o->pool_bufs : o->rcv_wnd + 128;
    /* UDP GRO when the kernel has it (Linux 5.0), else the plain path. */
    if (o->no_gro || zbuf__us_gro_open(&ts->gro, fd, zbuf__us_max_dgram(s), bufs) < 0)
        rc = zbuf_pool_create(zbuf__us_max_dgram(s), bufs, &ts->pool);
    if (rc == 0)
        rc = zbuf__us_start(s);
    if (rc < 0) {
        zbuf_udpstream_delete(s);
        return rc;
    }
    *out = s;
    return 0;
}

int zbuf_udpstream_connect_fd(int fd, const struct sockaddr *peer, socklen_t peerlen,
                              const zbuf_udpstream_opts_t *o, zbuf_udpstream_t **out)
{
    if (peer == NULL)
        return -EINVAL;
    return fd_open(fd, peer, peerlen, o, out);
}

int zbuf_udpstream_listen_fd(int fd, const zbuf_udpstream_opts_t *o, zbuf_udpstream_t **out)
{
    return fd_open(fd, NULL, 0, o, out);
}

/* ------------------------------------------------------------ the stack */

#ifdef ZBUF_UDPSTREAM_WITH_STACK

struct ip_ctx {
    zbuf_udpstream_t *s;
    zbuf_ip_udp_t *pcb;
};

static void ip_recv(void *arg, zbuf_ip_udp_t *pcb, zbuf_t *data, uint32_t src, uint16_t sport)
{
    (void)pcb;
    struct ip_ctx *c = arg;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(sport),
                            .sin_addr.s_addr = htonl(src)};
    zbuf_udpstream_input(c->s, data, (struct sockaddr *)&a, sizeof a);
}

static int ip_send(void *ctx, zbuf_t **dg, unsigned n, const struct sockaddr *to, socklen_t tolen)
{
    struct ip_ctx *c = ctx;
    const struct sockaddr_in *a = (const void *)to;
    int rc = 0;
    unsigned i = 0;
    if (tolen < (socklen_t)sizeof *a || a->sin_family != AF_INET)
        rc = -EAFNOSUPPORT;
    for (; rc == 0 && i < n; i++) {
        rc = zbuf_ip_udp_sendto(c->pcb, dg[i], ntohl(a->sin_addr.s_addr), ntohs(a->sin_port));
        if (rc < 0)
            break; /* dg[i] is still ours */
    }
    unsigned sent = i;
    for (; i < n; i++)
        zbuf_delete(dg[i]);
    return sent > 0 ? (int)sent : rc;
}

static void ip_close(void *ctx)
{
    struct ip_ctx *c = ctx;
    zbuf_ip_udp_delete(c->pcb);
    free(c);
}

int zbuf_udpstream_open_ip(struct zbuf_ip_stack *stack, uint32_t laddr, uint16_t lport,
                           uint32_t raddr, uint16_t rport, const zbuf_udpstream_opts_t *o,
                           zbuf_udpstream_t **out)
{
    if (stack == NULL || out == NULL || (raddr != 0 && rport == 0))
        return -EINVAL;
    struct ip_ctx *c = calloc(1, sizeof *c);
    if (c == NULL)
        return -ENOMEM;
    int rc = zbuf_ip_udp_new(stack, &c->pcb);
    if (rc == 0)
        rc = zbuf_ip_udp_bind(c->pcb, laddr, lport);
    if (rc < 0) {
        zbuf_ip_udp_delete(c->pcb);
        free(c);
        return rc;
    }
    struct sockaddr_in peer = {.sin_family = AF_INET, .sin_port = htons(rport),
                               .sin_addr.s_addr = htonl(raddr)};
    static const zbuf_udpstream_transport_t t = {.send = ip_send, .close = ip_close};
    rc = zbuf__us_create(o, &t, c, raddr ? (struct sockaddr *)&peer : NULL,
                         raddr ? sizeof peer : 0, &c->s);
    if (rc < 0) {
        ip_close(c);
        return rc;
    }
    zbuf_ip_udp_set_recv(c->pcb, ip_recv, c);
    zbuf_udpstream_t *s = c->s;
    rc = zbuf__us_start(s);
    if (rc < 0) {
        zbuf_udpstream_delete(s);
        return rc;
    }
    *out = s;
    return 0;
}

#else

int zbuf_udpstream_open_ip(struct zbuf_ip_stack *stack, uint32_t laddr, uint16_t lport,
                           uint32_t raddr, uint16_t rport, const zbuf_udpstream_opts_t *o,
                           zbuf_udpstream_t **out)
{
    (void)stack, (void)laddr, (void)lport, (void)raddr, (void)rport, (void)o, (void)out;
    return -EOPNOTSUPP; /* libzbuf built without the stack (ZBUF_WITH_STACK=OFF) */
}

#endif
