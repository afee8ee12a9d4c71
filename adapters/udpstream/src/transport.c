/*
 * The built-in transports.
 *
 * UDP socket (through zbuf-sock): sends are zbuf_sock_sendmmsg_fd(), up to
 * 64 gathered datagrams per system call, each a header segment and the
 * payload's own segments; receives are zbuf_sock_recvmmsg() into buffers
 * of the stream's own pool, one buffer per datagram, so that a peer can
 * only ever hold this stream's buffers.  When the application holds every
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

#define GSO_MIN 2         /* a run shorter than this goes with sendmmsg() */
#define GSO_MAX 64        /* the kernel's UDP_MAX_SEGMENTS */
#define GSO_BYTES 65000   /* below the 64 KiB a UDP GSO send may carry */
#define GSO_IOV 1024      /* IOV_MAX */

/* Datagrams dg[0..n) through zbuf_sock_sendmmsg_fd(); they are consumed. */
static int fd_send_mmsg(int fd, zbuf_t **dg, unsigned n, const struct sockaddr *to,
                        socklen_t tolen)
{
    zbuf_sock_msg_t msgs[64];
    if (n > 64)
        n = 64; /* the stream never batches more */
    for (unsigned i = 0; i < n; i++) {
        msgs[i].z = dg[i];
        memcpy(&msgs[i].addr, to, tolen);
        msgs[i].addrlen = tolen;
        msgs[i].flags = 0;
    }
    return zbuf_sock_sendmmsg_fd(fd, msgs, n, MSG_DONTWAIT);
}

/*
 * A run of datagrams of one length (the last may be shorter) as one UDP
 * GSO send (UDP_SEGMENT): the kernel cuts the gathered bytes into the
 * datagrams, with one pass through the stack instead of one per datagram.
 * The iovecs point into the datagrams' segments (header, then payload
 * ranges by reference), as for sendmmsg().  1: sent; 0: the kernel cannot
 * (GSO off from now on); negative errno.
 */
static int fd_send_gso(int fd, zbuf_t **dg, unsigned n, size_t seg, const struct sockaddr *to,
                       socklen_t tolen)
{
    struct iovec iov[GSO_IOV];
    int k = 0;
    for (unsigned i = 0; i < n; i++) {
        size_t covered;
        int m = zbuf_iovec(dg[i], 0, ZBUF_TO_END, iov + k, GSO_IOV - k, &covered);
        if (m < 0 || covered != zbuf_length(dg[i]))
            return 0; /* not describable (cannot happen for our datagrams) */
        k += m;
    }
    union {
        char buf[CMSG_SPACE(sizeof(uint16_t))];
        struct cmsghdr align;
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct msghdr mh = {.msg_name = (void *)to, .msg_namelen = tolen, .msg_iov = iov,
                        .msg_iovlen = (size_t)k, .msg_control = ctl.buf,
                        .msg_controllen = sizeof ctl.buf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_UDP;
    c->cmsg_type = UDP_SEGMENT;
    c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
    uint16_t gso = (uint16_t)seg;
    memcpy(CMSG_DATA(c), &gso, sizeof gso);
    ssize_t r;
    do
        r = sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
    while (r < 0 && errno == EINTR);
    if (r >= 0)
        return 1;
    if (errno == EIO || errno == EINVAL || errno == ENOPROTOOPT || errno == EOPNOTSUPP)
        return 0;
    return -errno;
}

/* How many datagrams from dg[i] on may go as one GSO send. */
static unsigned gso_run(zbuf_t **dg, unsigned i, unsigned n)
{
    size_t seg = zbuf_length(dg[i]), total = seg;
    unsigned j = i + 1;
    size_t segs = zbuf_seg_count(dg[i]);
    while (j < n && j - i < GSO_MAX && zbuf_length(dg[j]) <= seg &&
           total + zbuf_length(dg[j]) <= GSO_BYTES && segs + zbuf_seg_count(dg[j]) <= GSO_IOV) {
        total += zbuf_length(dg[j]);
        segs += zbuf_seg_count(dg[j]);
        if (zbuf_length(dg[j++]) < seg)
            break; /* a shorter one ends the run */
    }
    return j - i;
}

static int fd_send(void *ctx, zbuf_t **dg, unsigned n, const struct sockaddr *to, socklen_t tolen)
{
    zbuf_udpstream_t *s = ctx;
    struct zus_transport_state *ts = zbuf__us_tstate(s);
    unsigned sent = 0;
    int rc = 0;
    while (sent < n && rc >= 0) {
        unsigned run = ts->gso_off ? 0 : gso_run(dg, sent, n);
        if (run >= GSO_MIN) {
            rc = fd_send_gso(ts->fd, dg + sent, run, zbuf_length(dg[sent]), to, tolen);
            if (rc == 1) {
                sent += run;
                ts->gso_sends++;
                continue;
            }
            if (rc == 0) {
                ts->gso_off = true; /* the kernel or the route cannot: plain sends */
                rc = 0;
            }
            if (rc < 0)
                break;
        }
        /* The datagrams up to the next GSO run, with sendmmsg(). */
        unsigned j = sent + 1;
        while (j < n && (ts->gso_off || gso_run(dg, j, n) < GSO_MIN))
            j++;
        unsigned want = j - sent;
        int k = fd_send_mmsg(ts->fd, dg + sent, want, to, tolen);
        if (k < 0) {
            rc = k;
            break;
        }
        sent += (unsigned)k;
        if ((unsigned)k < want)
            break; /* the kernel stopped early */
    }
    for (unsigned i = 0; i < n; i++)
        zbuf_delete(dg[i]);
    if (sent > 0 || rc >= 0) {
        ts->want_pollout = false;
        return (int)sent;
    }
    return rc;
}

/* The pool is empty: read one datagram for its acknowledgement only. */
static int fd_recv_scratch(zbuf_udpstream_t *s, int fd)
{
    uint8_t scratch[ZBUF_UDPSTREAM_HEADER + 8 * ZBUF_UDPSTREAM_SACK_MAX + 64];
    struct sockaddr_storage from;
    socklen_t fromlen = sizeof from;
    ssize_t r = recvfrom(fd, scratch, sizeof scratch, MSG_DONTWAIT | MSG_TRUNC,
                         (struct sockaddr *)&from, &fromlen);
    if (r <= 0)
        return 0;
    /* Only the header part is looked at: a data segment's payload (past
     * the scratch) is dropped anyway, so give the parser a datagram whose
     * declared length it can check by trimming the payload claim. */
    size_t have = (size_t)r < sizeof scratch ? (size_t)r : sizeof scratch;
    zbuf_t *z;
    zbuf_buf_t *b;
    if (zbuf_create(&z) < 0)
        return 0;
    if (zbuf_buf_wrap(scratch, have, NULL, NULL, &b) < 0) {
        zbuf_delete(z);
        return 0;
    }
    int rc = zbuf_append_ref(z, b, 0, have);
    zbuf_buf_unref(b);
    if (rc < 0 || (size_t)r != have) {
        zbuf_delete(z); /* a datagram larger than an acknowledgement: data */
        zbuf__us_count_no_buffer(s);
        return 1;
    }
    zbuf__us_input_ack_only(s, z, (struct sockaddr *)&from, fromlen);
    return 1;
}

static int fd_recv(void *ctx, zbuf_udpstream_t *s)
{
    (void)ctx;
    struct zus_transport_state *ts = zbuf__us_tstate(s);
    zbuf_sock_msg_t msgs[ZUS_RECV_BATCH];
    /* The batch follows the traffic: each slot offered takes a pool
     * buffer for the call, so an idle socket is asked for few. */
    if (ts->recv_batch == 0)
        ts->recv_batch = 4;
    unsigned want = ts->recv_batch;
    int n = zbuf_sock_recvmmsg(ts->fd, ts->pool, zbuf__us_max_dgram(s), msgs, want,
                               MSG_DONTWAIT);
    if (n == -ENOBUFS)
        return fd_recv_scratch(s, ts->fd);
    if (n <= 0) {
        ts->recv_batch = 4;
        return 0;
    }
    if ((unsigned)n == want)
        ts->recv_batch = want * 2 > ZUS_RECV_BATCH ? ZUS_RECV_BATCH : want * 2;
    else if ((unsigned)n * 2 < want && want > 4)
        ts->recv_batch = want / 2;
    for (int i = 0; i < n; i++)
        zbuf_udpstream_input(s, msgs[i].z, (struct sockaddr *)&msgs[i].addr, msgs[i].addrlen);
    return (unsigned)n == want ? ZUS_RECV_BATCH : n; /* full: there may be more */
}

static void fd_close(void *ctx)
{
    zbuf_udpstream_t *s = ctx;
    zbuf_pool_delete(zbuf__us_tstate(s)->pool);
    zbuf__us_tstate(s)->pool = NULL;
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
    uint32_t bufs = o->pool_bufs ? o->pool_bufs : o->rcv_wnd + 128;
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
