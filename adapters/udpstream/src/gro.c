/* SPDX-License-Identifier: MIT */
/*
 * The socket transport's UDP GRO receive path.
 *
 * With UDP_GRO set on a socket, the kernel hands a run of datagrams of one
 * flow to recvmsg() as one "super-datagram": on loopback a sender's UDP
 * GSO send arrives as it was sent (the kernel does not cut it up), and on
 * a network device the kernel's GRO coalesces the flow's same-size
 * datagrams.  A control message (SOL_UDP, UDP_GRO) gives the size of each
 * datagram of the run, the last of which may be shorter.  Where the plain
 * path takes one datagram per buffer and per slot of a recvmmsg(), this
 * one takes up to 44 (1472-byte) datagrams per slot, and the kernel's
 * work per datagram (one socket buffer, one queueing, one wake-up, one
 * copy call on each side) is done once per run.
 *
 * Memory.  The pool's buffers are 64 KiB, enough for any UDP datagram,
 * and they are filled densely.  Free space is a queue of regions (the
 * unfilled end of a buffer this path holds, or a whole fresh buffer); the
 * slots of one receive call take regions from its front, chained as one
 * iovec list of at least 64 KiB each (a run may be that long), so a
 * datagram lands right after the previous one, possibly straddling two
 * buffers (its zbuf then has two segments).  A datagram thus pins its own
 * bytes, never a whole buffer, whether it came in a run or alone: a peer
 * without GSO, or one sending tiny datagrams, gets the same density.  A
 * region whose buffer nobody else refers to any more (its datagrams were
 * all read and released) is rewound to the start of the buffer; one whose
 * end is smaller than GRO_MIN_REGION is given up, so a slot never chains
 * more than GRO_IOV regions.
 *
 * Accounting.  zbuf__us_gro_room() is what the stream advertises in its
 * receive window: the free bytes of the regions and of the pool's free
 * buffers, less GRO_MIN_REGION per buffer (an end that may be given up)
 * and less the last 64 KiB (a receive call needs that much to offer one
 * slot), in datagrams of the largest size.  The free bytes are real room
 * whatever the pattern of arrival, so a peer within the window always
 * finds it; beyond it, the transport's scratch path reads the
 * acknowledgement fields only (as with the plain pool).
 *
 * Each datagram of a run becomes a zbuf of references to its bytes (no
 * copy) and goes through zbuf_udpstream_input() on its own, so that a
 * malformed datagram inside a run is counted and dropped alone.
 *
 * Failure strategy: a receive call that finds no room fails with -ENOBUFS
 * before reading anything; a zbuf that cannot be made (ENOMEM) costs the
 * datagram (counted as no_buffer, recovered by retransmission), never the
 * others of its run; the region queue is updated after the datagrams were
 * handed on, and never loses track of a buffer.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <string.h>
#include <sys/socket.h>

#include "internal.h"

#ifndef UDP_GRO
#define UDP_GRO 104 /* linux/udp.h, for C libraries that lack it */
#endif

/* A region smaller than this is given up (its buffer goes back to the
 * pool once its datagrams are released), so that a slot's 64 KiB never
 * take more than GRO_IOV regions. */
#define GRO_MIN_REGION 4096
/* Regions one slot chains at most. */
#define GRO_IOV (ZUS_GRO_BUF / GRO_MIN_REGION)

/* Free bytes of region @r, counting a buffer nobody else refers to as
 * whole (it will be rewound). */
static size_t region_free(const struct zus_gro_region *r)
{
    return r->pos == 0 || zbuf_buf_writable(r->buf) ? ZUS_GRO_BUF : ZUS_GRO_BUF - r->pos;
}

uint32_t zbuf__us_gro_room(const struct zus_gro *g)
{
    /* Every free byte (regions, the pool's buffers), less what may be
     * given up at the end of each buffer, less the last 64 KiB (a receive
     * call needs that much room to offer one slot). */
    size_t bytes = zbuf_pool_available(g->pool) * (ZUS_GRO_BUF - GRO_MIN_REGION);
    for (unsigned i = 0; i < g->nreg; i++) {
        size_t f = region_free(&g->reg[i]);
        bytes += f > GRO_MIN_REGION ? f - GRO_MIN_REGION : 0;
    }
    if (bytes <= ZUS_GRO_BUF)
        return 0;
    size_t n = (bytes - ZUS_GRO_BUF) / g->max_dgram;
    return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

int zbuf__us_gro_open(struct zus_gro *g, int fd, uint32_t max_dgram, size_t dgrams)
{
    memset(g, 0, sizeof *g);
    int on = 1, prev = 0;
    socklen_t pl = sizeof prev;
    if (getsockopt(fd, SOL_UDP, UDP_GRO, &prev, &pl) < 0)
        prev = 0;
    if (setsockopt(fd, SOL_UDP, UDP_GRO, &on, sizeof on) < 0)
        return -errno; /* ENOPROTOOPT before Linux 5.0: the plain path */
    /* The bytes of @dgrams datagrams of the largest size, plus room for
     * a full receive call on top (so that a full window still leaves the
     * slots their 64 KiB each) and the buffer the room keeps back. */
    size_t bufs = (dgrams * max_dgram + ZUS_GRO_BUF - 1) / ZUS_GRO_BUF + ZUS_GRO_SLOTS + 1;
    int rc = zbuf_pool_create(ZUS_GRO_BUF, bufs, &g->pool);
    if (rc < 0) {
        if (prev == 0)
            setsockopt(fd, SOL_UDP, UDP_GRO, &prev, sizeof prev);
        return rc;
    }
    g->max_dgram = max_dgram;
    g->restore = prev == 0;
    return 0;
}

void zbuf__us_gro_close(struct zus_gro *g, int fd)
{
    for (unsigned i = 0; i < g->nreg; i++)
        zbuf_buf_unref(g->reg[i].buf);
    g->nreg = 0;
    zbuf_pool_delete(g->pool); /* buffers still read by the application stay valid */
    g->pool = NULL;
    if (g->restore) {
        int off = 0; /* the socket goes back to the caller as it came */
        setsockopt(fd, SOL_UDP, UDP_GRO, &off, sizeof off);
    }
}

int zbuf__us_gro_size(struct msghdr *mh)
{
    for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c != NULL; c = CMSG_NXTHDR(mh, c)) {
        if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO &&
            c->cmsg_len >= CMSG_LEN(sizeof(int))) {
            int v;
            memcpy(&v, CMSG_DATA(c), sizeof v);
            return v > 0 ? v : 0;
        }
    }
    return 0;
}

/* ------------------------------------------------------------- regions */

/* Rewind regions nobody else refers to, give up small ones. */
static void regions_tidy(struct zus_gro *g)
{
    unsigned k = 0;
    for (unsigned i = 0; i < g->nreg; i++) {
        struct zus_gro_region r = g->reg[i];
        if (zbuf_buf_writable(r.buf))
            r.pos = 0;
        if (ZUS_GRO_BUF - r.pos < GRO_MIN_REGION) {
            zbuf_buf_unref(r.buf);
            continue;
        }
        g->reg[k++] = r;
    }
    g->nreg = k;
}

/* Regions [from, from + n) as the room of one slot: at least ZUS_GRO_BUF
 * bytes (any datagram fits), a fresh buffer from the pool appended when
 * the queue has too few.  n (at most GRO_IOV: every region has at least
 * GRO_MIN_REGION bytes), or 0 when there is no room. */
static unsigned slot_regions(struct zus_gro *g, unsigned from)
{
    size_t room = 0;
    unsigned n = 0;
    while (room < ZUS_GRO_BUF) {
        if (from + n == g->nreg) {
            zbuf_buf_t *b;
            if (g->nreg == ZUS_GRO_REGIONS || zbuf_pool_get(g->pool, &b) < 0)
                return 0;
            g->reg[g->nreg++] = (struct zus_gro_region){.buf = b, .pos = 0};
        }
        room += ZUS_GRO_BUF - g->reg[from + n].pos;
        n++;
    }
    return n;
}

/* Give back whole free buffers beyond @keep (the queue has a fixed size). */
static void regions_trim(struct zus_gro *g, unsigned keep)
{
    unsigned whole = 0, k = 0;
    for (unsigned i = 0; i < g->nreg; i++) {
        struct zus_gro_region r = g->reg[i];
        if (r.pos == 0 && ++whole > keep) {
            zbuf_buf_unref(r.buf);
            continue;
        }
        g->reg[k++] = r;
    }
    g->nreg = k;
}

/* ---------------------------------------------------------- the datagrams */

/* Where one received message lies: @n pieces of regions. */
struct span {
    zbuf_buf_t *buf[GRO_IOV];
    size_t off[GRO_IOV], len[GRO_IOV];
    unsigned n;
};

/* A new zbuf of the bytes [off, off + len) of @sp, by reference. */
static int span_dgram(const struct span *sp, size_t off, size_t len, zbuf_t **out)
{
    zbuf_t *z = NULL;
    int rc = zbuf_create(&z);
    for (unsigned i = 0; rc == 0 && i < sp->n && len > 0; i++) {
        if (off >= sp->len[i]) {
            off -= sp->len[i];
            continue;
        }
        size_t take = sp->len[i] - off < len ? sp->len[i] - off : len;
        rc = zbuf_append_ref(z, sp->buf[i], sp->off[i] + off, take);
        off = 0;
        len -= take;
    }
    if (rc < 0) {
        if (z != NULL)
            zbuf_delete(z);
        return rc;
    }
    *out = z;
    return 0;
}

/*
 * Hand the datagrams of one received message (@n bytes in @sp, cut every
 * @seg bytes; @seg 0: one datagram) to the stream.  A run whose datagram
 * size could not hold a header, or exceeds the largest datagram the
 * stream accepts, is malformed as a whole (every datagram of it would
 * be); @trunc: the kernel cut the message, so its last datagram is
 * incomplete.
 */
static void deliver(zbuf_udpstream_t *s, uint32_t max_dgram, const struct span *sp, size_t n,
                    size_t seg, bool trunc, const struct sockaddr *from, socklen_t fromlen)
{
    if (n == 0) {
        zbuf__us_count_bad(s, 1); /* an empty datagram */
        return;
    }
    if (seg == 0 || seg >= n) {
        seg = n;
    } else {
        size_t count = (n + seg - 1) / seg;
        if (seg < ZBUF_UDPSTREAM_HEADER || seg > max_dgram) {
            zbuf__us_count_bad(s, count);
            return;
        }
        zbuf__us_count_gro(s, count);
    }
    if (n > max_dgram && seg == n) {
        zbuf__us_count_bad(s, 1); /* as the plain path, which truncates it */
        return;
    }
    size_t off = 0;
    do {
        size_t len = n - off < seg ? n - off : seg;
        if (trunc && off + len == n) {
            zbuf__us_count_bad(s, 1);
            break;
        }
        struct zus_rx rx = {.len = len};
        unsigned i = 0;
        size_t at = off;
        while (i + 1 < sp->n && at >= sp->len[i]) /* the piece it starts in */
            at -= sp->len[i++];
        if (at + len <= sp->len[i]) {
            /* In one piece, as nearly all are: bytes in place. */
            rx.buf = sp->buf[i];
            rx.off = sp->off[i] + at;
            rx.p = (const uint8_t *)zbuf_buf_data(rx.buf) + rx.off;
        } else if (span_dgram(sp, off, len, &rx.z) < 0) {
            zbuf__us_count_no_buffer(s);
            off += len;
            continue;
        }
        zbuf__us_input_rx(s, &rx, from, fromlen, false);
        off += len;
    } while (off < n);
}

void zbuf__us_gro_split(zbuf_udpstream_t *s, zbuf_buf_t *b, size_t off, size_t n, size_t seg,
                        uint32_t max_dgram, const struct sockaddr *from, socklen_t fromlen)
{
    struct span sp = {.buf = {b}, .off = {off}, .len = {n}, .n = 1};
    deliver(s, max_dgram, &sp, n, seg, false, from, fromlen);
}

int zbuf__us_gro_recv(zbuf_udpstream_t *s, struct zus_gro *g, int fd, unsigned want,
                      unsigned *offered)
{
    struct mmsghdr mm[ZUS_GRO_SLOTS];
    struct iovec iov[ZUS_GRO_REGIONS]; /* iov[i]: region i */
    struct sockaddr_storage from[ZUS_GRO_SLOTS];
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl[ZUS_GRO_SLOTS];
    unsigned first[ZUS_GRO_SLOTS + 1];
    if (want > ZUS_GRO_SLOTS)
        want = ZUS_GRO_SLOTS;
    regions_tidy(g);
    unsigned m = 0, at = 0;
    for (; m < want; m++) {
        unsigned k = slot_regions(g, at);
        if (k == 0)
            break;
        first[m] = at;
        for (unsigned j = 0; j < k; j++) {
            struct zus_gro_region *r = &g->reg[at + j];
            iov[at + j] = (struct iovec){.iov_base = (uint8_t *)zbuf_buf_data(r->buf) + r->pos,
                                       .iov_len = ZUS_GRO_BUF - r->pos};
        }
        mm[m].msg_hdr = (struct msghdr){.msg_name = &from[m], .msg_namelen = sizeof from[m],
                                        .msg_iov = iov + at, .msg_iovlen = k,
                                        .msg_control = ctl[m].buf,
                                        .msg_controllen = sizeof ctl[m].buf};
        mm[m].msg_len = 0;
        at += k;
    }
    first[m] = at;
    *offered = m;
    if (m == 0)
        return -ENOBUFS;
    int r;
    do
        r = recvmmsg(fd, mm, m, MSG_DONTWAIT, NULL);
    while (r < 0 && errno == EINTR);
    if (r < 0)
        return -errno;
    /* Hand the datagrams on (their zbufs take references), then account
     * for the bytes the kernel wrote into the regions. */
    uint32_t used[ZUS_GRO_SLOTS];
    for (int i = 0; i < r; i++) {
        struct msghdr *mh = &mm[i].msg_hdr;
        struct span sp = {.n = 0};
        size_t left = mm[i].msg_len;
        for (unsigned j = first[i]; j < first[i + 1] && left > 0; j++) {
            size_t cap = ZUS_GRO_BUF - g->reg[j].pos, take = left < cap ? left : cap;
            sp.buf[sp.n] = g->reg[j].buf;
            sp.off[sp.n] = g->reg[j].pos;
            sp.len[sp.n++] = take;
            left -= take;
        }
        used[i] = mm[i].msg_len;
        deliver(s, g->max_dgram, &sp, mm[i].msg_len, (size_t)zbuf__us_gro_size(mh),
                (mh->msg_flags & MSG_TRUNC) != 0, (struct sockaddr *)&from[i], mh->msg_namelen);
    }
    for (int i = 0; i < r; i++) {
        size_t left = used[i];
        for (unsigned j = first[i]; j < first[i + 1] && left > 0; j++) {
            size_t cap = ZUS_GRO_BUF - g->reg[j].pos, take = left < cap ? left : cap;
            g->reg[j].pos += (uint32_t)take;
            left -= take;
        }
    }
    regions_tidy(g);
    regions_trim(g, ZUS_GRO_SLOTS);
    return r;
}
