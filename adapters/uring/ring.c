/* SPDX-License-Identifier: MIT */
/*
 * The io_uring machinery of zbuf-uring.
 *
 * One ring per engine, set up with SINGLE_ISSUER | DEFER_TASKRUN where the
 * kernel has them (completions are then processed only inside
 * zbuf_uring_run(), in one batch), a completion queue eight times the
 * submission queue (multishot receives post many completions per request),
 * and SUBMIT_ALL (one bad request does not hold back the others).
 *
 * Requests and their completions
 * ------------------------------
 * user_data is the address of a struct zu_op (0: a cancellation, ignored).
 * - Stream send: one request per socket in flight, over the front of its
 *   queue (engine.c's file comment says who holds which bytes).  The first
 *   completion gives the bytes taken: they are cut from the queue and the
 *   next request is prepared at the next flush.  With IORING_CQE_F_MORE a
 *   notification follows: the request's own references (op->held) go then.
 * - Datagram: one request per zbuf, many in flight; a zero-copy one keeps
 *   the datagram's zbuf itself until its notification.
 * - Receive: a multishot request picking buffers of a provided ring; every
 *   completion with IORING_CQE_F_BUFFER names the buffer (bid) it filled.
 *   A completion without IORING_CQE_F_MORE ends the request: re-armed while
 *   the application receives, except after ENOBUFS (the ring is empty),
 *   where the socket waits on its ring until buffers come back.
 * - Accept (multishot), connect, shutdown: embedded in the socket.
 * - Wake: a read of the wake eventfd, re-armed after each completion.
 *
 * A request refused for a reason that leaves the bytes untouched (an
 * unknown flag on an older kernel, EOPNOTSUPP for zero copy on this
 * socket, ENOMEM / ENOBUFS for pinned memory) is prepared again without
 * the feature; the refusal is remembered (per engine or per socket).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include "uring_internal.h"
#include "uring_compat.h"
#include "ring_hot.h"
#include "coalesce.h"

#define RING(u) ((struct io_uring *)(u)->ring)

/* Completion queue entries per submission queue entry. */
#define ZU_CQ_FACTOR 8
/* Completions handled per batch before looking for more. */
#define ZU_CQE_BATCH 256

/* ------------------------------------------------------------ submission */

static struct io_uring_sqe *get_sqe(zbuf_uring_t *u)
{
    struct io_uring *r = RING(u);
    struct io_uring_sqe *sqe = io_uring_get_sqe(r);
    while (sqe == NULL) {
        /* The submission queue is full: hand it over and take a slot. */
        int rc = io_uring_submit(r);
        u->st.enters++;
        if (rc > 0)
            u->st.sqes += (uint64_t)rc;
        u->prepared = 0;
        sqe = io_uring_get_sqe(r);
        if (sqe == NULL && rc <= 0) {
            /* The kernel takes nothing (completion queue overflow with an
             * old kernel): run completions to make room. */
            io_uring_get_events(r);
            sqe = io_uring_get_sqe(r);
            if (sqe == NULL)
                return NULL;
        }
    }
    u->prepared++;
    return sqe;
}

static void arm(struct io_uring_sqe *sqe, struct zu_op *op)
{
    io_uring_sqe_set_data(sqe, op);
    op->in_kernel = true;
    op->cancelled = false;
}

static int ring_submit(zbuf_uring_t *u)
{
    if (u->prepared == 0)
        return 0;
    int rc = io_uring_submit(RING(u));
    u->st.enters++;
    u->prepared = 0;
    if (rc > 0)
        u->st.sqes += (uint64_t)rc;
    return rc;
}

static void cancel_op(zbuf_uring_t *u, struct zu_op *op)
{
    if (!op->in_kernel || op->cancelled)
        return;
    struct io_uring_sqe *sqe = get_sqe(u);
    if (sqe == NULL)
        return;
    io_uring_prep_cancel64(sqe, (uint64_t)(uintptr_t)op, 0);
    io_uring_sqe_set_data64(sqe, 0);
    op->cancelled = true;
}

/* -------------------------------------------------------------- engine */

static bool arm_wake(zbuf_uring_t *u)
{
    struct io_uring_sqe *sqe = get_sqe(u);
    if (sqe == NULL)
        return false;
    io_uring_prep_read(sqe, u->wake_fd, &u->wake_buf, sizeof u->wake_buf, 0);
    arm(sqe, &u->wake_op);
    return true;
}

static int ring_init(zbuf_uring_t *u)
{
    struct io_uring *r = calloc(1, sizeof *r);
    if (r == NULL)
        return -ENOMEM;
    unsigned base = IORING_SETUP_CQSIZE | IORING_SETUP_SUBMIT_ALL;
    unsigned tries[3] = {
        base | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
        base | IORING_SETUP_COOP_TASKRUN,
        IORING_SETUP_CQSIZE,
    };
    int rc = -EINVAL;
    for (unsigned i = 0; i < 3; i++) {
        if (i == 0 && (!u->probe.defer_taskrun || (u->opts.flags & ZBUF_URING_NO_DEFER_TASKRUN)))
            continue;
        struct io_uring_params p = { .flags = tries[i],
                                     .cq_entries = u->opts.entries * ZU_CQ_FACTOR };
        rc = io_uring_queue_init_params(u->opts.entries, r, &p);
        if (rc != -EINVAL)
            break;
    }
    if (rc < 0) {
        free(r);
        return rc;
    }
    u->ring = r;
    u->report_usage = u->probe.zc_report_usage;
    u->fixed_vectored = u->probe.zc_fixed_vectored;
    u->wake_op.kind = ZU_OP_WAKE;
    if (!arm_wake(u)) {
        io_uring_queue_exit(r);
        free(r);
        u->ring = NULL;
        return -ENOMEM;
    }
    return 0;
}

static void ring_fini(zbuf_uring_t *u)
{
    struct io_uring *r = RING(u);
    if (r == NULL)
        return;
    if (u->notify_fd >= 0) {
        io_uring_unregister_eventfd(r);
        close(u->notify_fd);
        u->notify_fd = -1;
    }
    io_uring_queue_exit(r);
    free(r);
    u->ring = NULL;
}

static int ring_fd(zbuf_uring_t *u)
{
    if (u->notify_fd >= 0)
        return u->notify_fd;
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = io_uring_register_eventfd(RING(u), fd);
    if (rc < 0) {
        close(fd);
        return rc;
    }
    u->notify_fd = fd;
    return fd;
}

/* ------------------------------------------------------- fixed buffers */

static int ring_register_pool(zbuf_uring_t *u, zbuf_pool_t *p)
{
    void *base;
    size_t len;
    int rc = zbuf_pool_memory(p, &base, &len);
    if (rc < 0)
        return rc;
    for (unsigned i = 0; i < u->nregions; i++)
        if (u->regions[i].pool == p)
            return -EEXIST;
    if (u->nregions == ZU_POOLS_MAX)
        return -ENOSPC;
    unsigned need = (unsigned)((len + ZU_FIXED_MAX_LEN - 1) / ZU_FIXED_MAX_LEN);
    if (need == 0 || need > 16)
        return -ENOSPC;
    if (!u->fixed_ready) {
        rc = io_uring_register_buffers_sparse(RING(u), ZU_FIXED_SLOTS);
        if (rc < 0)
            return rc;
        u->fixed_ready = true;
    }
    /* `need` consecutive free slots. */
    unsigned first = 0, run = 0;
    for (unsigned i = 0; i < ZU_FIXED_SLOTS && run < need; i++) {
        if (u->slot_used[i]) {
            run = 0;
            first = i + 1;
        } else {
            run++;
        }
    }
    if (run < need)
        return -ENOSPC;
    struct iovec iov[16];
    for (unsigned i = 0; i < need; i++) {
        size_t off = (size_t)i * ZU_FIXED_MAX_LEN;
        iov[i].iov_base = (char *)base + off;
        iov[i].iov_len = len - off < ZU_FIXED_MAX_LEN ? len - off : ZU_FIXED_MAX_LEN;
    }
    rc = io_uring_register_buffers_update_tag(RING(u), first, iov, NULL, need);
    if (rc < 0)
        return rc;
    if ((unsigned)rc != need)
        return -ENOMEM;
    for (unsigned i = 0; i < need; i++)
        u->slot_used[first + i] = true;
    u->regions[u->nregions++] = (struct zu_region){
        .pool = p, .base = (uintptr_t)base, .len = len, .slot = first, .nslots = need,
    };
    return 0;
}

static int ring_unregister_pool(zbuf_uring_t *u, zbuf_pool_t *p)
{
    for (unsigned i = 0; i < u->nregions; i++) {
        struct zu_region *g = &u->regions[i];
        if (g->pool != p)
            continue;
        struct iovec none[16];
        memset(none, 0, sizeof none);
        io_uring_register_buffers_update_tag(RING(u), g->slot, none, NULL, g->nslots);
        for (unsigned k = 0; k < g->nslots; k++)
            u->slot_used[g->slot + k] = false;
        u->regions[i] = u->regions[--u->nregions];
        return 0;
    }
    return -ENOENT;
}

/* The fixed-buffer slot holding every iovec, or -1. */
static int fixed_slot(const zbuf_uring_t *u, const struct iovec *iov, unsigned n)
{
    if (u->nregions == 0 || n == 0)
        return -1;
    uintptr_t a = (uintptr_t)iov[0].iov_base;
    const struct zu_region *g = NULL;
    for (unsigned i = 0; i < u->nregions && g == NULL; i++)
        if (a >= u->regions[i].base && a - u->regions[i].base < u->regions[i].len)
            g = &u->regions[i];
    if (g == NULL)
        return -1;
    size_t slot = (a - g->base) / ZU_FIXED_MAX_LEN;
    uintptr_t lo = g->base + slot * ZU_FIXED_MAX_LEN;
    uintptr_t hi = lo + (g->len - slot * ZU_FIXED_MAX_LEN < ZU_FIXED_MAX_LEN
                             ? g->len - slot * ZU_FIXED_MAX_LEN
                             : ZU_FIXED_MAX_LEN);
    for (unsigned i = 0; i < n; i++) {
        uintptr_t b = (uintptr_t)iov[i].iov_base;
        if (b < lo || b + iov[i].iov_len > hi)
            return -1;
    }
    return (int)(g->slot + slot);
}

/* ------------------------------------------------------------- sockets */

static int ring_sock_open(struct zbuf_uring_sock *s)
{
    if (s->zc_capable && !s->u->probe.send_zc)
        s->zc_capable = false; /* the kernel has no zero-copy requests */
    return 0;
}

static void ring_sock_free(struct zbuf_uring_sock *s)
{
    (void)s;
}

/* The registered-buffer slot a zero-copy send of mh could name, or -1. */
static int send_slot(struct zbuf_uring_sock *s, const struct msghdr *mh)
{
    if (s->opts.flags & ZBUF_URING_SOCK_NO_FIXED)
        return -1;
    int slot = fixed_slot(s->u, mh->msg_iov, (unsigned)mh->msg_iovlen);
    if (slot >= 0 && mh->msg_iovlen != 1 && !s->u->fixed_vectored)
        return -1;
    return slot;
}

/* Prepare a zero-copy (on registered buffer `slot` when >= 0) or plain
 * send of `mh` (`bytes` bytes) for op. */
static bool prep_send(struct zbuf_uring_sock *s, struct zu_op *op, struct msghdr *mh,
                      size_t bytes, int flags, bool zc, int slot)
{
    zbuf_uring_t *u = s->u;
    struct io_uring_sqe *sqe = get_sqe(u);
    if (sqe == NULL)
        return false;
    op->zc = zc;
    op->fixed = false;
    op->report = false;
    op->bytes = bytes;
    if (!zc)
        slot = -1;
    if (!zc) {
        io_uring_prep_sendmsg(sqe, s->fd, mh, (unsigned)flags);
    } else if (slot >= 0 && mh->msg_iovlen == 1) {
        io_uring_prep_send_zc_fixed(sqe, s->fd, mh->msg_iov[0].iov_base, mh->msg_iov[0].iov_len,
                                    flags, 0, (unsigned)slot);
        if (mh->msg_name != NULL)
            io_uring_prep_send_set_addr(sqe, mh->msg_name, (uint16_t)mh->msg_namelen);
        op->fixed = true;
    } else {
        io_uring_prep_sendmsg_zc(sqe, s->fd, mh, (unsigned)flags);
        if (slot >= 0) {
            sqe->ioprio |= IORING_RECVSEND_FIXED_BUF;
            sqe->buf_index = (uint16_t)slot;
            op->fixed = true;
        }
    }
    if (zc && u->report_usage) {
        sqe->ioprio |= IORING_SEND_ZC_REPORT_USAGE;
        op->report = true;
    }
    arm(sqe, op);
    s->kops++;
    return true;
}

/*
 * The front message starts with a file segment: read it into a library
 * buffer in place (counted as a copy; io_uring has no sendfile).  Returns
 * 0 or a negative errno.
 */
static int unfile_front(zbuf_t *z)
{
    size_t seg_off;
    zbuf_seg_t *seg = zbuf_seg_find(z, 0, &seg_off);
    size_t len = seg != NULL ? zbuf_seg_length(z, seg) : 0;
    if (len == 0)
        return -EINVAL;
    zbuf_buf_t *b;
    int rc = zbuf_buf_alloc(len, &b);
    if (rc < 0)
        return rc;
    ssize_t got = zbuf_copyout(z, 0, zbuf_buf_data(b), len);
    if (got < 0 || (size_t)got != len) {
        zbuf_buf_unref(b);
        return got < 0 ? (int)got : -EIO;
    }
    rc = zbuf_insert_ref(z, 0, b, 0, len, NULL);
    zbuf_buf_unref(b);
    if (rc < 0)
        return rc;
    zbuf_cut(z, len, len, NULL); /* the file segment, now after the copy */
    return 0;
}

/* Gather the front of the queue into s->iov (zbuf__uring_gather()); a
 * file segment in front is read into memory first.  Returns the iovec
 * count, 0 when nothing can go now. */
static unsigned gather(struct zbuf_uring_sock *s, size_t *bytes)
{
    bool file_front = false;
    unsigned n = zbuf__uring_gather(s, SIZE_MAX, bytes, &file_front);
    if (n == 0 && file_front) {
        int rc = unfile_front(s->qhead->z);
        if (rc < 0) {
            zbuf__uring_fail_front(s, rc);
            return 0;
        }
        n = zbuf__uring_gather(s, SIZE_MAX, bytes, &file_front);
    }
    return n;
}

/* Our own references to the first `bytes` bytes of the queue (for a
 * zero-copy request), or NULL when memory runs out. */
static zbuf_t *hold_front(struct zbuf_uring_sock *s, size_t bytes)
{
    zbuf_t *rec = NULL;
    size_t left = bytes;
    for (struct zu_msg *m = s->qhead; m != NULL && left > 0; m = m->next) {
        size_t len = zbuf_length(m->z);
        size_t take = len < left ? len : left;
        if (take == 0)
            continue;
        zbuf_t *d;
        if (zbuf_dup(m->z, 0, take, &d) < 0)
            goto fail;
        if (rec == NULL) {
            rec = d;
        } else if (zbuf_append(rec, d) < 0) {
            zbuf_delete(d);
            goto fail;
        }
        left -= take;
    }
    return rec;
fail:
    zbuf_delete(rec); /* the queue still references every byte: nothing released */
    return NULL;
}

static void maybe_shutdown(struct zbuf_uring_sock *s)
{
    if (!(s->state & ZS_SHUT_WANTED) || s->shut_op.in_kernel || s->send_op != NULL ||
        s->qhead != NULL || s->dgram_inflight > 0)
        return;
    s->state &= ~ZS_SHUT_WANTED;
    struct io_uring_sqe *sqe = get_sqe(s->u);
    if (sqe == NULL) {
        s->state |= ZS_SHUT_DONE;
        s->shut_status = -ENOMEM;
        zbuf__uring_due(s);
        return;
    }
    io_uring_prep_shutdown(sqe, s->fd, SHUT_WR);
    arm(sqe, &s->shut_op);
    s->kops++;
}

static void flush_stream(struct zbuf_uring_sock *s)
{
    if (s->send_op != NULL)
        return;
    if (s->send_err != 0 && s->qhead != NULL)
        zbuf__uring_fail_all(s, s->send_err);
    while (s->qhead != NULL && zbuf_length(s->qhead->z) == 0)
        zbuf__uring_consume(s, 0); /* empty zbufs are done when reached */
    if (s->qhead == NULL) {
        maybe_shutdown(s);
        return;
    }
    if (s->iov == NULL && (s->iov = malloc(ZU_IOV_MAX * sizeof *s->iov)) == NULL) {
        zbuf__uring_fail_front(s, -ENOMEM);
        zbuf__uring_dirty(s);
        return;
    }
    size_t bytes;
    int flags = s->qhead->flags;
    unsigned n = gather(s, &bytes);
    if (n == 0) {
        if (s->qhead != NULL)
            zbuf__uring_dirty(s); /* the front failed: the rest goes next time */
        return;
    }
    struct zu_op *op = zbuf__uring_op_get(s->u, ZU_OP_SEND, s);
    if (op == NULL) {
        zbuf__uring_fail_front(s, -ENOMEM);
        zbuf__uring_dirty(s);
        return;
    }
    s->mh = (struct msghdr){ .msg_iov = s->iov, .msg_iovlen = n };
    /* A registered buffer is looked for (a walk of every iovec) only when
     * zero copy may be chosen: below the threshold, or once the adaptive
     * choice turned it off, this is the plain path's code. */
    bool maybe = !s->plain_once && zbuf__uring_zc_maybe(s, bytes, n);
    int slot = maybe ? send_slot(s, &s->mh) : -1;
    bool zc = maybe && zbuf__uring_zc_want(s, bytes, n, slot >= 0);
    s->plain_once = false;
    if (zc && (op->held = hold_front(s, bytes)) == NULL) {
        zc = false; /* no memory for our references: this one goes plain */
        zbuf__uring_zc_unmade(s);
    }
    int f = flags | MSG_NOSIGNAL;
    if (!(s->opts.flags & ZBUF_URING_SOCK_NO_WAITALL))
        f |= MSG_WAITALL;
    if (!prep_send(s, op, &s->mh, bytes, f, zc, slot)) {
        if (zc)
            zbuf__uring_zc_unmade(s);
        zbuf_delete(op->held);
        zbuf__uring_op_put(s->u, op);
        zbuf__uring_dirty(s);
        return;
    }
    zbuf__uring_op_link(s->u, op);
    s->send_op = op;
}

static void flush_dgram(struct zbuf_uring_sock *s)
{
    zbuf_uring_t *u = s->u;
    while (s->qhead != NULL && s->dgram_inflight < s->opts.dgram_inflight) {
        struct zu_msg *m = s->qhead;
        size_t len = zbuf_length(m->z);
        struct zu_op *op = zbuf__uring_op_get(u, ZU_OP_DGRAM, s);
        if (op == NULL) {
            zbuf__uring_fail_front(s, -ENOMEM);
            continue;
        }
        size_t got = 0;
        struct iovec *iov = op->iov;
        int n = len > 0 ? zbuf_iovec(m->z, 0, ZBUF_TO_END, iov, ZU_DGRAM_IOV, &got) : 0;
        size_t nseg = zbuf_seg_count(m->z);
        if (got < len && nseg <= ZU_IOV_MAX && (iov = malloc(nseg * sizeof *iov)) != NULL) {
            /* More segments than the inline array: a bigger one (no copy). */
            op->bounce = iov;
            n = zbuf_iovec(m->z, 0, ZBUF_TO_END, iov, (int)nseg, &got);
        }
        if (got < len) {
            /* File segments or too many segments: one bounce copy. */
            free(op->bounce);
            op->bounce = malloc(len);
            ssize_t c = op->bounce != NULL ? zbuf_copyout(m->z, 0, op->bounce, len) : -ENOMEM;
            if (c < 0) {
                zbuf__uring_op_put(u, op);
                zbuf__uring_fail_front(s, (int)c);
                continue;
            }
            iov = op->iov;
            iov[0] = (struct iovec){ .iov_base = op->bounce, .iov_len = len };
            n = 1;
            op->copied = true;
        }
        op->mh = (struct msghdr){
            .msg_name = m->addr, .msg_namelen = m->addrlen,
            .msg_iov = iov, .msg_iovlen = (size_t)n,
        };
        bool maybe = !op->copied && len > 0 && !s->plain_once &&
                     zbuf__uring_zc_maybe(s, len, (size_t)n);
        int slot = maybe ? send_slot(s, &op->mh) : -1;
        bool zc = maybe && zbuf__uring_zc_want(s, len, (size_t)n, slot >= 0);
        s->plain_once = false;
        if (!prep_send(s, op, &op->mh, len, m->flags | MSG_NOSIGNAL, zc, slot)) {
            if (zc)
                zbuf__uring_zc_unmade(s);
            zbuf__uring_op_put(u, op);
            zbuf__uring_dirty(s);
            return;
        }
        /* The message rides with its request now. */
        s->qhead = m->next;
        if (s->qhead == NULL)
            s->qtail = NULL;
        s->qbytes -= len;
        s->inflight_bytes += len;
        m->next = NULL;
        op->msg = m;
        zbuf__uring_op_link(u, op);
        s->dgram_inflight++;
    }
    maybe_shutdown(s);
}

static void ring_flush(struct zbuf_uring_sock *s)
{
    if (s->type == SOCK_STREAM)
        flush_stream(s);
    else
        flush_dgram(s);
}

/* A request's life in the kernel is over (no more completions). */
static void op_finished(zbuf_uring_t *u, struct zu_op *op)
{
    struct zbuf_uring_sock *s = op->s;
    zbuf__uring_op_unlink(u, op);
    if (op->held != NULL) {
        if (s != NULL)
            s->st.bytes_released += zbuf_length(op->held);
        zbuf_delete(op->held); /* release callbacks run here */
        op->held = NULL;
    }
    zbuf__uring_op_put(u, op);
    if (s != NULL) {
        s->kops--;
        zbuf__uring_kop_done(s);
    }
}

/* A zero-copy refusal that left the bytes untouched: resend without the
 * feature.  Returns true when the request is to be prepared again. */
static bool zc_refused(struct zbuf_uring_sock *s, struct zu_op *op, int res)
{
    zbuf_uring_t *u = s->u;
    if (!op->zc)
        return false;
    if (res == -EOPNOTSUPP) {
        s->zc_capable = false; /* this socket takes no zero-copy request */
    } else if (res == -ENOMEM || res == -ENOBUFS) {
        s->plain_once = true; /* pinned-memory limit: this one goes plain */
    } else if ((res == -EINVAL || res == -EFAULT) && op->fixed && u->fixed_vectored &&
               op->mh.msg_iovlen != 1) {
        u->fixed_vectored = false;
    } else if (res == -EINVAL && op->report) {
        u->report_usage = false;
    } else if (res == -EMSGSIZE && op->kind == ZU_OP_DGRAM) {
        /* A datagram in more pages than an skb takes as fragments: the
         * kernel refuses it zero-copy but takes it copied. */
        s->plain_once = true;
    } else {
        return false;
    }
    s->st.zc_fallbacks++;
    return true;
}

static void send_notif(zbuf_uring_t *u, struct zu_op *op, const struct io_uring_cqe *cqe)
{
    struct zbuf_uring_sock *s = op->s;
    if (s != NULL) {
        s->st.outstanding--;
        zbuf__uring_zc_notified(s, op->report && (cqe->res & IORING_NOTIF_USAGE_ZC_COPIED));
    }
    op_finished(u, op);
}

/* After the first completion of a send: push what is queued, and keep the
 * request for its notification (`more`) or finish it now. */
static void send_done(zbuf_uring_t *u, struct zbuf_uring_sock *s, struct zu_op *op, bool more)
{
    if (!(s->state & ZS_CLOSING) && (s->qhead != NULL || (s->state & ZS_SHUT_WANTED)))
        zbuf__uring_dirty(s);
    if (more) {
        op->notif_wait = true;
        s->st.outstanding++;
    } else {
        if (op->zc)
            zbuf__uring_zc_unmade(s); /* no notification will come */
        op_finished(u, op);
    }
}

static void stream_cqe(zbuf_uring_t *u, struct zu_op *op, const struct io_uring_cqe *cqe)
{
    struct zbuf_uring_sock *s = op->s;
    bool more = (cqe->flags & IORING_CQE_F_MORE) != 0;
    int res = cqe->res;
    op->in_kernel = false;
    s->send_op = NULL;
    if (res >= 0) {
        size_t n = (size_t)res;
        s->st.sends++;
        s->st.bytes_sent += n;
        if (op->zc) {
            s->st.zc_sends++;
            if (op->fixed)
                s->st.zc_fixed_sends++;
            if (n < zbuf_length(op->held))
                zbuf_cut(op->held, n, ZBUF_TO_END, NULL); /* a tail cut: cannot fail */
        } else {
            s->st.bytes_released += n; /* the kernel copied them */
        }
        if (n < op->bytes)
            s->st.short_sends++;
        zbuf__uring_consume(s, n);
    } else if (zc_refused(s, op, res) || res == -EINTR) {
        /* nothing was taken: the same bytes go again */
    } else if (res == -EAGAIN || res == -EWOULDBLOCK) {
        zbuf__uring_fail_front(s, -EAGAIN); /* MSG_DONTWAIT and no room */
    } else if (res == -ECANCELED && (s->state & ZS_CLOSING)) {
        zbuf__uring_fail_all(s, -ECANCELED);
    } else {
        s->send_err = res; /* the stream is broken: nothing later may go */
        zbuf__uring_fail_all(s, res);
    }
    if (s->state & ZS_CLOSING)
        zbuf__uring_fail_all(s, -ECANCELED);
    send_done(u, s, op, more);
}

static void dgram_cqe(zbuf_uring_t *u, struct zu_op *op, const struct io_uring_cqe *cqe)
{
    struct zbuf_uring_sock *s = op->s;
    bool more = (cqe->flags & IORING_CQE_F_MORE) != 0;
    int res = cqe->res;
    struct zu_msg *m = op->msg;
    size_t len = zbuf_length(m->z);
    op->in_kernel = false;
    op->msg = NULL;
    s->dgram_inflight--;
    s->inflight_bytes -= len;
    if (res >= 0) {
        s->st.sends++;
        s->st.bytes_sent += (size_t)res;
        if (op->zc) {
            s->st.zc_sends++;
            if (op->fixed)
                s->st.zc_fixed_sends++;
            op->held = m->z; /* the datagram's own zbuf waits for the notification */
            m->z = NULL;
        } else {
            s->st.bytes_released += len;
        }
        zbuf__uring_msg_done(s, m, 0);
    } else if ((zc_refused(s, op, res) || res == -EINTR) && !(s->state & ZS_CLOSING)) {
        /* Again, first in line. */
        m->next = s->qhead;
        s->qhead = m;
        if (s->qtail == NULL)
            s->qtail = m;
        s->qbytes += len;
    } else {
        zbuf__uring_msg_done(s, m, res == -EWOULDBLOCK ? -EAGAIN : res);
    }
    send_done(u, s, op, more);
}

static void ring_close_begin(struct zbuf_uring_sock *s)
{
    zbuf_uring_t *u = s->u;
    for (struct zu_op *op = s->ops; op != NULL; op = op->lnext)
        cancel_op(u, op);
    cancel_op(u, &s->conn_op);
    cancel_op(u, &s->recv_op);
    cancel_op(u, &s->accept_op);
    /* Datagrams not yet handed over were failed by the engine; those in
     * flight finish (or are cancelled) on their own. */
}

static void ring_close_abort(struct zbuf_uring_sock *s)
{
    /* A TCP reset: the kernel drops the queues that hold our pages, so the
     * notifications come.  (On UDP it only dissolves the association.) */
    struct sockaddr sa = { .sa_family = AF_UNSPEC };
    (void)connect(s->fd, &sa, sizeof sa);
    ring_close_begin(s);
}

static bool ring_close_pending(struct zbuf_uring_sock *s)
{
    (void)s;
    return false; /* kops counts everything the kernel holds */
}

static void ring_sock_stats(const struct zbuf_uring_sock *s, zbuf_uring_sock_stats_t *st)
{
    (void)s;
    (void)st;
}

/* ---------------------------------------------------------- buffer rings */

static int ring_bufring_init(zbuf_uring_bufring_t *br)
{
    zbuf_uring_t *u = br->u;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t bytes = br->entries * sizeof(struct io_uring_buf);
    bytes = (bytes + page - 1) / page * page;
    void *mem = NULL;
    if (posix_memalign(&mem, page, bytes) != 0)
        return -ENOMEM;
    br->slot = calloc(br->entries, sizeof *br->slot);
    br->free_bids = malloc(br->entries * sizeof *br->free_bids);
    br->ring_bid = malloc(br->entries * sizeof *br->ring_bid);
    br->pos_of = malloc(br->entries * sizeof *br->pos_of);
    if (br->slot == NULL || br->free_bids == NULL || br->ring_bid == NULL || br->pos_of == NULL) {
        free(br->slot);
        free(br->free_bids);
        free(br->ring_bid);
        free(br->pos_of);
        free(mem);
        return -ENOMEM;
    }
    memset(mem, 0, bytes);
    io_uring_buf_ring_init(mem);
    struct io_uring_buf_reg reg = {
        .ring_addr = (uintptr_t)mem, .ring_entries = br->entries, .bgid = br->bgid,
    };
    int rc = io_uring_register_buf_ring(RING(u), &reg, 0);
    if (rc < 0) {
        free(br->slot);
        free(br->free_bids);
        free(br->ring_bid);
        free(br->pos_of);
        free(mem);
        return rc == -EINVAL ? -EOPNOTSUPP : rc;
    }
    br->ring = mem;
    br->ring_bytes = bytes;
    br->hot_bytes = zu_ring_hot_bytes();
    for (unsigned i = 0; i < br->entries; i++)
        br->free_bids[i] = (uint16_t)(br->entries - 1 - i);
    br->nfree = br->entries;
    br->registered = true;
    return 0;
}

static void ring_bufring_fini(zbuf_uring_bufring_t *br)
{
    if (br->registered)
        io_uring_unregister_buf_ring(RING(br->u), br->bgid);
    br->registered = false;
    for (unsigned i = 0; i < br->entries; i++)
        zbuf_buf_unref(br->slot[i]); /* back to the pool */
    free(br->slot);
    free(br->free_bids);
    free(br->ring_bid);
    free(br->pos_of);
    free(br->ring);
    br->slot = NULL;
    br->free_bids = NULL;
    br->ring_bid = NULL;
    br->pos_of = NULL;
    br->ring = NULL;
}

/*
 * How many buffers the ring should hold: a quarter more than the kernel
 * took since the last refill, at least ZU_RING_MIN, doubled after the ring
 * ran dry.  While the engine waits for a coalesced batch the kernel may
 * run more receives than the batch, and each one that finds the ring dry
 * ends its request: with 64 sockets flooded and a 50 us window, a
 * ZU_RING_MIN of 32 ran dry 4 to 5 times as often as 128.  Longer windows
 * grow the ring further as it runs dry.
 * Not all `entries`: the pool hands back its most recently returned
 * buffers first, still in the cache, and a ring kept just deep enough for
 * the traffic receives into those; a ring always full cycles through all
 * its buffers, each one cold when the kernel copies into it (measured:
 * several times the CPU per byte for 16 KiB datagrams).
 */
#define ZU_RING_MIN 128u
/* A ring may always hold this many buffers, however large. */
#define ZU_RING_FEW 4
/* The deepest the ring may grow: hot_bytes of buffers (at least
 * ZU_RING_FEW) for each socket receiving with it (armed, or waiting for
 * buffers: sockets sharing a ring each need their share at once), at most
 * its entries. */
static unsigned ring_cap(const zbuf_uring_bufring_t *br)
{
    size_t cap = br->hot_bytes / br->buf_size;
    if (cap < ZU_RING_FEW)
        cap = ZU_RING_FEW;
    size_t socks = (size_t)br->armed + br->st.waiting;
    if (socks > 1)
        cap = socks > br->entries / cap ? br->entries : cap * socks;
    return cap < br->entries ? (unsigned)cap : br->entries;
}

static unsigned ring_target(zbuf_uring_bufring_t *br)
{
    uint64_t took = br->st.consumed - br->seen_consumed;
    bool dry = br->st.empty != br->seen_empty;
    br->seen_consumed = br->st.consumed;
    br->seen_empty = br->st.empty;
    uint64_t t = took + took / 4;
    if (dry)
        t = (uint64_t)br->target * 2;
    else if (t < br->target)
        t = br->target - (br->target - t) / 8; /* shrink slowly */
    if (t < ZU_RING_MIN)
        t = ZU_RING_MIN;
    if (t > ring_cap(br))
        t = ring_cap(br);
    br->target = (unsigned)t;
    return br->target;
}

static unsigned ring_bufring_refill(zbuf_uring_bufring_t *br)
{
    if (!br->registered)
        return 0;
    struct io_uring_buf_ring *ring = br->ring;
    int mask = io_uring_buf_ring_mask(br->entries);
    int n = 0;
    unsigned target = ring_target(br);
    while (br->nfree > 0 && br->st.in_ring + (unsigned)n < target) {
        zbuf_buf_t *b;
        if (zbuf_pool_get(br->pool, &b) != 0)
            break;
        uint16_t bid = br->free_bids[--br->nfree];
        br->slot[bid] = b;
        uint32_t pos = br->tail + (uint32_t)n;
        br->ring_bid[pos & (uint32_t)mask] = bid;
        br->pos_of[bid] = pos;
        io_uring_buf_ring_add(ring, zbuf_buf_data(b), (unsigned)br->buf_size, bid, mask, n);
        n++;
    }
    if (n > 0) {
        br->tail += (uint32_t)n;
        io_uring_buf_ring_advance(ring, n);
        br->st.in_ring += (unsigned)n;
        br->st.refilled += (unsigned)n;
    }
    return (unsigned)br->st.in_ring;
}

/* Buffer `i` of the completion (0: the one it names; a bundle goes on with
 * the buffers put into the ring after it): the ring's reference moves to
 * the caller.  NULL when there is none. */
static zbuf_buf_t *take_buf(zbuf_uring_bufring_t *br, uint32_t cflags, unsigned i)
{
    if (!(cflags & IORING_CQE_F_BUFFER))
        return NULL;
    uint16_t bid = (uint16_t)(cflags >> IORING_CQE_BUFFER_SHIFT);
    if (bid >= br->entries)
        return NULL;
    if (i > 0)
        bid = br->ring_bid[(br->pos_of[bid] + i) & (br->entries - 1)];
    if (br->slot[bid] == NULL)
        return NULL;
    zbuf_buf_t *b = br->slot[bid];
    br->slot[bid] = NULL;
    br->free_bids[br->nfree++] = bid;
    br->st.in_ring--;
    br->st.consumed++;
    return b;
}

/* ---------------------------------------------------------------- receive */

static int arm_recv(struct zbuf_uring_sock *s, struct zu_op *op, zbuf_uring_bufring_t *br,
                    size_t max, int flags, bool multishot)
{
    struct io_uring_sqe *sqe = get_sqe(s->u);
    if (sqe == NULL)
        return -ENOMEM;
    if (s->type == SOCK_STREAM) {
        io_uring_prep_recv(sqe, s->fd, NULL, max, flags);
    } else {
        struct msghdr *mh = op->kind == ZU_OP_RECV ? &s->recv_mh : &op->mh;
        *mh = (struct msghdr){ 0 };
        if (multishot) {
            mh->msg_namelen = ZU_DGRAM_NAMELEN;
        } else {
            mh->msg_name = &op->from;
            mh->msg_namelen = sizeof op->from;
            op->iov[0] = (struct iovec){ .iov_base = NULL, .iov_len = max };
            mh->msg_iov = op->iov;
            mh->msg_iovlen = 1;
        }
        io_uring_prep_recvmsg(sqe, s->fd, mh, (unsigned)flags);
    }
    if (multishot)
        sqe->ioprio |= IORING_RECV_MULTISHOT;
    op->bundle = multishot && s->type == SOCK_STREAM && s->u->probe.recv_bundle;
    if (op->bundle)
        sqe->ioprio |= IORING_RECVSEND_BUNDLE;
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = br->bgid;
    op->br = br;
    op->multishot = multishot;
    br->users++; /* the request names the ring until its last completion */
    if (op->kind == ZU_OP_RECV)
        br->armed++;
    arm(sqe, op);
    s->kops++;
    return 0;
}

static int ring_recv_arm(struct zbuf_uring_sock *s)
{
    return arm_recv(s, &s->recv_op, s->br, 0, 0, s->u->probe.recv_multishot);
}

static void ring_recv_cancel(struct zbuf_uring_sock *s)
{
    cancel_op(s->u, &s->recv_op);
}

int zbuf__uring_ring_recv_once(struct zbuf_uring_sock *s, struct zu_op *op, size_t max, int flags)
{
    if (max > op->br->buf_size)
        max = op->br->buf_size;
    int rc = arm_recv(s, op, op->br, max, flags, false);
    if (rc == 0)
        zbuf__uring_op_link(s->u, op);
    return rc;
}

/* A zbuf of the bytes a receive completion delivered in buffer b (whose
 * reference it consumes).  *rx gets the datagram's details. */
static ssize_t rx_zbuf(struct zbuf_uring_sock *s, struct zu_op *op, zbuf_buf_t *b, int res,
                       zbuf_t **out, zbuf_uring_rx_t *rx)
{
    size_t off = 0, len = (size_t)res;
    *rx = (zbuf_uring_rx_t){ 0 };
    if (s->type != SOCK_STREAM && op->multishot) {
        struct io_uring_recvmsg_out *o =
            io_uring_recvmsg_validate(zbuf_buf_data(b), res, &s->recv_mh);
        if (o == NULL) {
            zbuf_buf_unref(b);
            return -EBADMSG;
        }
        rx->from = io_uring_recvmsg_name(o);
        rx->fromlen = o->namelen < ZU_DGRAM_NAMELEN ? o->namelen : ZU_DGRAM_NAMELEN;
        rx->flags = (int)(o->flags & MSG_TRUNC);
        off = (size_t)((char *)io_uring_recvmsg_payload(o, &s->recv_mh) - (char *)zbuf_buf_data(b));
        len = io_uring_recvmsg_payload_length(o, res, &s->recv_mh);
        /* The payload may have taken the headroom's last bytes: the same
         * limit as the epoll path's, MSG_TRUNC beyond it. */
        size_t room = zu_dgram_room(op->br->buf_size);
        if (len > room) {
            len = room;
            rx->flags |= MSG_TRUNC;
        }
    } else if (s->type != SOCK_STREAM) {
        rx->from = (struct sockaddr *)&op->from;
        rx->fromlen = op->mh.msg_namelen;
        rx->flags = op->mh.msg_flags & MSG_TRUNC;
    }
    zbuf_t *z;
    int rc = zbuf_create(&z);
    if (rc == 0 && len > 0 && (rc = zbuf_append_ref(z, b, off, len)) < 0)
        zbuf_delete(z);
    zbuf_buf_unref(b); /* the zbuf's segment holds it now (or it goes back) */
    if (rc < 0)
        return rc;
    *out = z;
    return (ssize_t)len;
}

/*
 * A bundle completion of `res` bytes over ceil(res / buf_size) buffers,
 * the first of which (b) is taken already: one zbuf in *out with a segment
 * per buffer.  Every buffer is full but the last.
 */
static ssize_t rx_bundle(zbuf_uring_bufring_t *br, uint32_t cflags, zbuf_buf_t *b, int res,
                         zbuf_t **out)
{
    size_t left = (size_t)res;
    unsigned nbufs = (unsigned)((left + br->buf_size - 1) / br->buf_size);
    zbuf_t *z;
    int rc = zbuf_create(&z);
    for (unsigned i = 0; i < nbufs; i++) {
        zbuf_buf_t *bi = i == 0 ? b : take_buf(br, cflags, i);
        size_t len = left < br->buf_size ? left : br->buf_size;
        if (bi == NULL && rc == 0)
            rc = -EIO; /* the ring and the kernel disagree: cannot happen */
        if (rc == 0)
            rc = zbuf_append_ref(z, bi, 0, len);
        zbuf_buf_unref(bi); /* the segment holds it now (or it goes back) */
        left -= len;
    }
    if (rc < 0) {
        zbuf_delete(z);
        return rc;
    }
    *out = z;
    return res;
}

static void recv_cqe(zbuf_uring_t *u, struct zu_op *op, const struct io_uring_cqe *cqe)
{
    struct zbuf_uring_sock *s = op->s;
    zbuf_uring_bufring_t *br = op->br;
    bool more = (cqe->flags & IORING_CQE_F_MORE) != 0;
    int res = cqe->res;
    zbuf_buf_t *b = take_buf(br, cqe->flags, 0);
    if (!more) {
        op->in_kernel = false;
        br->users--;
        br->armed--;
        s->kops--;
    }
    bool stop = false;
    if (res > 0 && b != NULL && op->bundle && (size_t)res > br->buf_size) {
        zbuf_t *z = NULL;
        ssize_t n = rx_bundle(br, cqe->flags, b, res, &z);
        zbuf__uring_deliver(s, n, n < 0 ? NULL : z, NULL);
        stop = n < 0;
    } else if (res > 0 && b != NULL) {
        zbuf_t *z = NULL;
        zbuf_uring_rx_t rx;
        ssize_t n = rx_zbuf(s, op, b, res, &z, &rx);
        zbuf__uring_deliver(s, n, n < 0 ? NULL : z, &rx);
        stop = n < 0;
    } else {
        zbuf_buf_unref(b); /* NULL-safe */
        if (res == 0 && s->type == SOCK_STREAM) {
            zbuf__uring_deliver(s, 0, NULL, NULL); /* end of stream */
            stop = true;
        } else if (res == -ENOBUFS) {
            if (!more && (s->state & ZS_RECVING))
                zbuf__uring_recv_starved(s);
        } else if (res == -ECANCELED) {
            /* stopped or closing */
        } else if (res == -EINVAL && op->multishot && !more) {
            u->probe.recv_multishot = false; /* an older kernel: single receives */
        } else if (res < 0) {
            zbuf__uring_deliver(s, res, NULL, NULL);
            stop = true;
        }
    }
    if (more)
        return;
    if (res > 0 && op->bundle && br->st.in_ring == 0)
        br->st.empty++; /* a bundle that emptied the ring ends the request: deepen it */
    if (!stop && (s->state & ZS_RECVING) && !(s->state & (ZS_WAITING | ZS_CLOSING)) &&
        !op->in_kernel) {
        s->st.recv_rearms++;
        if (ring_recv_arm(s) < 0)
            zbuf__uring_deliver(s, -ENOMEM, NULL, NULL);
    }
    zbuf__uring_kop_done(s);
}

static void once_cqe(zbuf_uring_t *u, struct zu_op *op, const struct io_uring_cqe *cqe)
{
    struct zbuf_uring_sock *s = op->s;
    int res = cqe->res;
    zbuf_buf_t *b = take_buf(op->br, cqe->flags, 0);
    op->in_kernel = false;
    op->br->users--;
    zbuf_t *z = NULL;
    zbuf_uring_rx_t rx = { 0 };
    ssize_t n;
    if (res > 0 && b != NULL) {
        n = rx_zbuf(s, op, b, res, &z, &rx);
    } else {
        zbuf_buf_unref(b);
        n = res;
        if (s->type != SOCK_STREAM && res == 0 && zbuf_create(&z) < 0)
            n = -ENOMEM;
    }
    if (n < 0)
        z = NULL;
    void (*cb)(struct zbuf_uring_sock *, ssize_t, zbuf_t *, const zbuf_uring_rx_t *, void *) =
        op->once_cb;
    void *arg = op->once_arg;
    zbuf__uring_op_unlink(u, op);
    zbuf__uring_op_put(u, op);
    s->kops--;
    cb(s, n, z, &rx, arg);
    zbuf__uring_kop_done(s);
}

/* ------------------------------------------------ accept, connect, shutdown */

static int ring_accept_arm(struct zbuf_uring_sock *s)
{
    struct io_uring_sqe *sqe = get_sqe(s->u);
    if (sqe == NULL)
        return -ENOMEM;
    if (s->u->probe.accept_multishot)
        io_uring_prep_multishot_accept(sqe, s->fd, NULL, NULL, SOCK_CLOEXEC);
    else
        io_uring_prep_accept(sqe, s->fd, NULL, NULL, SOCK_CLOEXEC);
    s->accept_op.multishot = s->u->probe.accept_multishot;
    arm(sqe, &s->accept_op);
    s->kops++;
    return 0;
}

static void ring_accept_cancel(struct zbuf_uring_sock *s)
{
    cancel_op(s->u, &s->accept_op);
}

static void accept_cqe(zbuf_uring_t *u, struct zu_op *op, const struct io_uring_cqe *cqe)
{
    struct zbuf_uring_sock *s = op->s;
    bool more = (cqe->flags & IORING_CQE_F_MORE) != 0;
    int res = cqe->res;
    if (!more) {
        op->in_kernel = false;
        s->kops--;
    }
    bool stop = false;
    if (res >= 0) {
        zbuf__uring_accepted(s, res);
    } else if (res == -ECANCELED) {
        stop = true;
    } else if (res == -EINVAL && op->multishot) {
        u->probe.accept_multishot = false; /* an older kernel: single accepts */
    } else if (res == -EINTR || res == -ECONNABORTED) {
        /* that connection went before we took it: go on */
    } else {
        zbuf__uring_accepted(s, res);
        stop = true;
    }
    if (!more) {
        if (!stop && (s->state & ZS_ACCEPTING) && !(s->state & ZS_CLOSING))
            ring_accept_arm(s);
        zbuf__uring_kop_done(s);
    }
}

static int ring_connect(struct zbuf_uring_sock *s)
{
    struct io_uring_sqe *sqe = get_sqe(s->u);
    if (sqe == NULL)
        return -ENOMEM;
    io_uring_prep_connect(sqe, s->fd, (struct sockaddr *)&s->conn_addr, s->conn_len);
    arm(sqe, &s->conn_op);
    s->kops++;
    return 0;
}

static void conn_cqe(struct zu_op *op, const struct io_uring_cqe *cqe)
{
    struct zbuf_uring_sock *s = op->s;
    op->in_kernel = false;
    s->kops--;
    s->state &= ~ZS_CONNECTING;
    if (s->conn_cb != NULL)
        s->conn_cb(s, cqe->res, s->conn_arg);
    zbuf__uring_kop_done(s);
}

static void shut_cqe(struct zu_op *op, const struct io_uring_cqe *cqe)
{
    struct zbuf_uring_sock *s = op->s;
    op->in_kernel = false;
    s->kops--;
    s->state |= ZS_SHUT_DONE;
    if (s->shut_cb != NULL && !(s->state & ZS_CLOSING))
        s->shut_cb(s, cqe->res, s->shut_arg);
    zbuf__uring_kop_done(s);
}

/* ----------------------------------------------------------------- run */

static void dispatch(zbuf_uring_t *u, const struct io_uring_cqe *cqe)
{
    struct zu_op *op = io_uring_cqe_get_data(cqe);
    if (op == NULL)
        return;
    switch (op->kind) {
    case ZU_OP_WAKE:
        op->in_kernel = false;
        atomic_store(&u->wake_sent, false);
        u->st.wakes++;
        arm_wake(u);
        break;
    case ZU_OP_SEND:
    case ZU_OP_DGRAM:
        if (cqe->flags & IORING_CQE_F_NOTIF)
            send_notif(u, op, cqe);
        else if (op->s == NULL)
            op_finished(u, op); /* detached; cannot happen before the first completion */
        else if (op->kind == ZU_OP_SEND)
            stream_cqe(u, op, cqe);
        else
            dgram_cqe(u, op, cqe);
        break;
    case ZU_OP_RECV:
        u->rx_reaped++;
        if (op->rx_wait != u->wait_seq) {
            op->rx_wait = u->wait_seq;
            u->rx_socks++;
        }
        recv_cqe(u, op, cqe);
        break;
    case ZU_OP_RECV_ONCE:
        once_cqe(u, op, cqe);
        break;
    case ZU_OP_ACCEPT:
        accept_cqe(u, op, cqe);
        break;
    case ZU_OP_CONNECT:
        conn_cqe(op, cqe);
        break;
    case ZU_OP_SHUTDOWN:
        shut_cqe(op, cqe);
        break;
    default:
        break;
    }
}

/* Handle every completion available; returns how many. */
static int reap(zbuf_uring_t *u)
{
    struct io_uring *r = RING(u);
    int total = 0;
    u->rx_reaped = 0;
    u->rx_socks = 0;
    u->wait_seq++;
    for (;;) {
        struct io_uring_cqe *cqes[ZU_CQE_BATCH];
        unsigned n = io_uring_peek_batch_cqe(r, cqes, ZU_CQE_BATCH);
        if (n == 0)
            break;
        /* Copy them out first: a callback may prepare requests, and the
         * slots must be free before the kernel may reuse them. */
        struct io_uring_cqe copy[ZU_CQE_BATCH];
        for (unsigned i = 0; i < n; i++)
            copy[i] = *cqes[i];
        io_uring_cq_advance(r, n);
        for (unsigned i = 0; i < n; i++)
            dispatch(u, &copy[i]);
        total += (int)n;
        u->st.cqes += n;
        if (n < ZU_CQE_BATCH && !io_uring_cq_has_overflow(r))
            break;
        if (io_uring_cq_has_overflow(r))
            io_uring_get_events(r);
    }
    return total;
}

/* How many completions the next wait asks for (coalesce.h). */
static unsigned coalesce_want(const zbuf_uring_t *u)
{
    if ((u->opts.flags & ZBUF_URING_NO_COALESCE) || zu_rate_expect(&u->rx_rate) < ZU_COALESCE_MIN)
        return 1;
    unsigned in_ring = 0;
    for (const zbuf_uring_bufring_t *br = u->rings; br != NULL; br = br->next)
        in_ring += (unsigned)br->st.in_ring;
    double due = zu_rate_expect_in(&u->rx_rate, zu_rate_window(&u->rx_rate));
    unsigned want = due < ZU_COALESCE_MAX ? (unsigned)due : ZU_COALESCE_MAX;
    return want < in_ring ? want : in_ring > 0 ? in_ring : 1;
}

/* What ring_wait() returns after an io_uring_enter() that returned rc:
 * the kernel's error, or the count of completions reaped (-EINTR when a
 * signal cut the wait short before any came). */
static int wait_result(zbuf_uring_t *u, int rc)
{
    if (rc < 0 && rc != -EINTR && rc != -EBUSY && rc != -EAGAIN)
        return rc;
    int n = reap(u);
    zu_rate_fold(&u->rx_rate, zu_mono_ns(), u->rx_reaped, u->rx_socks);
    return n > 0 ? n : (rc == -EINTR ? -EINTR : 0);
}

static int ring_wait(zbuf_uring_t *u, int timeout_ms)
{
    struct io_uring *r = RING(u);
    if (u->notify_fd >= 0) {
        uint64_t v;
        /* Clear it before looking at the queue: a completion after this
         * read signals again. */
        if (read(u->notify_fd, &v, sizeof v) < 0 && errno != EAGAIN)
            return -errno;
    }
    int rc;
    unsigned sub = u->prepared;
    u->prepared = 0;
    unsigned want = timeout_ms == 0 ? 1 : coalesce_want(u);
    struct io_uring_cqe *cqe;
    if (want > 1 && io_uring_cq_ready(r) < want) {
        struct __kernel_timespec ts = { .tv_nsec = zu_rate_window(&u->rx_rate) };
        rc = io_uring_submit_and_wait_timeout(r, &cqe, want, &ts, NULL);
        u->st.enters++;
        u->st.sqes += sub;
        sub = 0;
        if (rc == -ETIME)
            rc = 0;
        if (io_uring_cq_ready(r) > 0 || (rc < 0 && rc != -EBUSY && rc != -EAGAIN))
            return wait_result(u, rc);
        /* Nothing came: wait as asked. */
    }
    if (timeout_ms == 0 || io_uring_cq_ready(r) > 0) {
        rc = io_uring_submit_and_get_events(r);
    } else {
        struct __kernel_timespec ts = {
            .tv_sec = timeout_ms / 1000, .tv_nsec = (long long)(timeout_ms % 1000) * 1000000,
        };
        rc = io_uring_submit_and_wait_timeout(r, &cqe, 1, timeout_ms > 0 ? &ts : NULL, NULL);
        if (rc == -ETIME)
            rc = 0;
    }
    u->st.enters++;
    u->st.sqes += sub;
    return wait_result(u, rc);
}

const struct zu_backend zbuf__uring_ring = {
    .id = ZBUF_URING_BACKEND_IO_URING,
    .init = ring_init,
    .fini = ring_fini,
    .wait = ring_wait,
    .submit = ring_submit,
    .fd = ring_fd,
    .sock_open = ring_sock_open,
    .sock_free = ring_sock_free,
    .flush = ring_flush,
    .recv_arm = ring_recv_arm,
    .recv_cancel = ring_recv_cancel,
    .accept_arm = ring_accept_arm,
    .accept_cancel = ring_accept_cancel,
    .connect = ring_connect,
    .close_begin = ring_close_begin,
    .close_abort = ring_close_abort,
    .close_pending = ring_close_pending,
    .bufring_init = ring_bufring_init,
    .bufring_fini = ring_bufring_fini,
    .bufring_refill = ring_bufring_refill,
    .register_pool = ring_register_pool,
    .unregister_pool = ring_unregister_pool,
    .sock_stats = ring_sock_stats,
};
