/* SPDX-License-Identifier: MIT */
/*
 * The engine's common half: options, the run loop, send queues, socket and
 * buffer-ring life cycles, wake-ups and the fallback decision.  The two
 * machineries (ring.c, epoll.c) plug in through struct zu_backend.
 *
 * Callbacks never run inside the call that caused them: a send callback
 * is queued on its socket's done list and a socket with something due goes
 * on the engine's `due` list; zbuf_uring_run() runs them (before it waits,
 * and after it dispatched the completions), so that the application never
 * sees a callback from inside zbuf_uring_send() or zbuf_uring_sock_close().
 * Receive and accept callbacks run straight from the dispatch of their
 * completion, except when bytes received while the application had
 * stopped receiving are still stashed: then new bytes join the stash, and
 * the stash is delivered in order.
 *
 * A socket is freed only when the kernel holds none of its requests
 * (`kops` == 0), because a completion names its request by address.  A
 * zero-copy request whose notification outlives a bounded close is
 * detached to the engine (op->s = NULL) and released when it comes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include "uring_internal.h"

/* Send flags a zbuf may carry. */
#define ZU_SEND_FLAGS (MSG_DONTWAIT | MSG_OOB | MSG_DONTROUTE | MSG_MORE | MSG_EOR | MSG_CONFIRM)
/* Free-list caps (objects kept for reuse). */
#define ZU_FREE_MAX 1024

int64_t zbuf__uring_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Whether z is a live zbuf, in O(1). */
static bool zbuf_ok(const zbuf_t *z)
{
    return z != NULL && zbuf_iovec(z, 0, 0, NULL, 0, NULL) == 0;
}

void zbuf__uring_log(const zbuf_uring_opts_t *o, const char *fmt, ...)
{
    char line[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (o != NULL && o->log != NULL)
        o->log(o->log_arg, line);
    else
        fprintf(stderr, "%s\n", line);
}

/* ------------------------------------------------------------ free lists */

struct zu_op *zbuf__uring_op_get(zbuf_uring_t *u, enum zu_kind kind, struct zbuf_uring_sock *s)
{
    struct zu_op *op = u->free_ops;
    if (op != NULL) {
        u->free_ops = op->next;
        u->nfree_ops--;
    } else if ((op = malloc(sizeof *op)) == NULL) {
        return NULL;
    }
    memset(op, 0, offsetof(struct zu_op, iov));
    op->kind = (uint8_t)kind;
    op->s = s;
    op->bounce = NULL;
    op->once_cb = NULL;
    return op;
}

void zbuf__uring_op_put(zbuf_uring_t *u, struct zu_op *op)
{
    free(op->bounce);
    op->bounce = NULL;
    if (u->nfree_ops < ZU_FREE_MAX) {
        op->next = u->free_ops;
        u->free_ops = op;
        u->nfree_ops++;
    } else {
        free(op);
    }
}

void zbuf__uring_op_link(zbuf_uring_t *u, struct zu_op *op)
{
    struct zu_op **head = op->s != NULL ? &op->s->ops : &u->detached;
    op->lprev = NULL;
    op->lnext = *head;
    if (*head != NULL)
        (*head)->lprev = op;
    *head = op;
}

void zbuf__uring_op_unlink(zbuf_uring_t *u, struct zu_op *op)
{
    struct zu_op **head = op->s != NULL ? &op->s->ops : &u->detached;
    if (op->lprev != NULL)
        op->lprev->lnext = op->lnext;
    else
        *head = op->lnext;
    if (op->lnext != NULL)
        op->lnext->lprev = op->lprev;
    op->lprev = op->lnext = NULL;
}

static struct zu_msg *msg_get(zbuf_uring_t *u)
{
    struct zu_msg *m = u->free_msgs;
    if (m != NULL) {
        u->free_msgs = m->next;
        u->nfree_msgs--;
    } else if ((m = malloc(sizeof *m)) == NULL) {
        return NULL;
    }
    memset(m, 0, sizeof *m);
    return m;
}

void zbuf__uring_msg_put(zbuf_uring_t *u, struct zu_msg *m)
{
    free(m->addr);
    m->addr = NULL;
    if (u->nfree_msgs < ZU_FREE_MAX) {
        m->next = u->free_msgs;
        u->free_msgs = m;
        u->nfree_msgs++;
    } else {
        free(m);
    }
}

/* ------------------------------------------------------------- options */

void zbuf_uring_opts_init(zbuf_uring_opts_t *o)
{
    if (o == NULL)
        return;
    memset(o, 0, sizeof *o);
    o->entries = 256;
    o->zc_min = ZBUF_URING_ZC_MIN_DEFAULT;
    o->zc_min_fixed = ZBUF_URING_ZC_MIN_FIXED_DEFAULT;
}

void zbuf_uring_sock_opts_init(zbuf_uring_sock_opts_t *o)
{
    if (o == NULL)
        return;
    memset(o, 0, sizeof *o);
    o->copied_limit = 1;
    o->batch_max = 4u << 20;
    o->dgram_inflight = 64;
}

/* -------------------------------------------------------------- engine */

int zbuf_uring_create(const zbuf_uring_opts_t *o, zbuf_uring_t **out)
{
    if (out == NULL)
        return -EINVAL;
    zbuf_uring_opts_t opts;
    if (o != NULL)
        opts = *o;
    else
        zbuf_uring_opts_init(&opts);
    if (opts.entries < 8 || opts.entries > 32768 || (opts.entries & (opts.entries - 1)) != 0 ||
        opts.zc_min == 0 || opts.zc_min_fixed == 0)
        return -EINVAL;
    zbuf_uring_t *u = calloc(1, sizeof *u);
    if (u == NULL)
        return -ENOMEM;
    u->opts = opts;
    u->notify_fd = -1;
    u->epfd = -1;
    atomic_init(&u->wake_sent, false);
    atomic_init(&u->refill, false);
    u->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (u->wake_fd < 0) {
        int e = -errno;
        free(u);
        return e;
    }
    zbuf_uring_probe(&u->probe);
    int rc = -EOPNOTSUPP;
    const char *why = u->probe.reason;
    char buf[200];
    if (!(opts.flags & ZBUF_URING_FORCE_EPOLL)) {
        if (u->probe.usable) {
            u->be = &zbuf__uring_ring;
            rc = u->be->init(u);
            if (rc < 0) {
                snprintf(buf, sizeof buf, "ring setup: %s", strerror(-rc));
                why = buf;
            }
        } else {
            rc = u->probe.error;
        }
        if (rc < 0 && (opts.flags & ZBUF_URING_NO_FALLBACK)) {
            close(u->wake_fd);
            free(u);
            return rc;
        }
        if (rc < 0 && !(opts.flags & ZBUF_URING_QUIET))
            zbuf__uring_log(&opts, "zbuf-uring: io_uring unavailable (%s); using the epoll path "
                            "(zbuf-sock)", why);
    }
    if (rc < 0) {
        u->be = &zbuf__uring_epoll;
        rc = u->be->init(u);
        if (rc < 0) {
            close(u->wake_fd);
            free(u);
            return rc;
        }
    }
    *out = u;
    return 0;
}

zbuf_uring_backend_t zbuf_uring_backend(const zbuf_uring_t *u)
{
    return u != NULL ? u->be->id : (zbuf_uring_backend_t)0;
}

int zbuf_uring_fd(zbuf_uring_t *u)
{
    return u != NULL ? u->be->fd(u) : -EINVAL;
}

int zbuf_uring_wake(zbuf_uring_t *u)
{
    if (u == NULL)
        return -EINVAL;
    /* One write wakes the engine; the engine clears wake_sent when it
     * reads the eventfd, so a burst of wake-ups costs one system call. */
    if (!atomic_exchange(&u->wake_sent, true)) {
        uint64_t one = 1;
        ssize_t w;
        do
            w = write(u->wake_fd, &one, sizeof one);
        while (w < 0 && errno == EINTR);
    }
    return 0;
}

int zbuf_uring_timeout(const zbuf_uring_t *u)
{
    if (u == NULL)
        return -1;
    if (u->due != NULL || u->dirty != NULL || atomic_load(&u->refill) || u->prepared > 0)
        return 0;
    int64_t now = 0, next = -1;
    for (const struct zbuf_uring_sock *s = u->closing; s != NULL; s = s->next_closing) {
        if (s->deadline == 0)
            continue;
        if (now == 0)
            now = zbuf__uring_now_ms();
        int64_t left = s->deadline > now ? s->deadline - now : 0;
        if (next < 0 || left < next)
            next = left;
    }
    return next > INT32_MAX ? INT32_MAX : (int)next;
}

void zbuf_uring_get_stats(const zbuf_uring_t *u, zbuf_uring_stats_t *st)
{
    if (u == NULL || st == NULL)
        return;
    *st = u->st;
    st->sockets = u->nsocks;
}

size_t zbuf_uring_sock_count(const zbuf_uring_t *u)
{
    return u != NULL ? u->nsocks : 0;
}

/* Push the sends of the sockets marked so far (each once: a socket that
 * marks itself again waits for the next run). */
static void flush_dirty(zbuf_uring_t *u)
{
    struct zbuf_uring_sock *list = u->dirty;
    u->dirty = NULL;
    while (list != NULL) {
        struct zbuf_uring_sock *s = list;
        list = s->next_dirty;
        s->state &= ~ZS_DIRTY;
        u->be->flush(s);
    }
}

int zbuf_uring_submit(zbuf_uring_t *u)
{
    if (u == NULL)
        return -EINVAL;
    flush_dirty(u);
    return u->be->submit(u);
}

int zbuf_uring_register_pool(zbuf_uring_t *u, zbuf_pool_t *p)
{
    if (u == NULL || p == NULL)
        return -EINVAL;
    return u->be->register_pool(u, p);
}

int zbuf_uring_unregister_pool(zbuf_uring_t *u, zbuf_pool_t *p)
{
    if (u == NULL || p == NULL)
        return -EINVAL;
    return u->be->unregister_pool(u, p);
}

/* ------------------------------------------------------- due and dirty */

void zbuf__uring_dirty(struct zbuf_uring_sock *s)
{
    if (s->state & ZS_DIRTY)
        return;
    s->state |= ZS_DIRTY;
    s->next_dirty = s->u->dirty;
    s->u->dirty = s;
}

void zbuf__uring_due(struct zbuf_uring_sock *s)
{
    if (s->state & ZS_DUE)
        return;
    s->state |= ZS_DUE;
    s->next_due = s->u->due;
    s->u->due = s;
}

void zbuf__uring_msg_done(struct zbuf_uring_sock *s, struct zu_msg *m, int status)
{
    m->status = status;
    m->next = NULL;
    if (status == 0 && m->z != NULL) {
        zbuf_delete(m->z); /* empty: its bytes were cut as the kernel took them */
        m->z = NULL;
    }
    if (status == 0)
        s->st.messages_sent++;
    if (s->done_tail != NULL)
        s->done_tail->next = m;
    else
        s->done_head = m;
    s->done_tail = m;
    zbuf__uring_due(s);
}

/* Pop the queue's front message. */
static struct zu_msg *pop_front(struct zbuf_uring_sock *s)
{
    struct zu_msg *m = s->qhead;
    s->qhead = m->next;
    if (s->qhead == NULL)
        s->qtail = NULL;
    s->qbytes -= zbuf_length(m->z);
    return m;
}

size_t zbuf__uring_consume(struct zbuf_uring_sock *s, size_t n)
{
    size_t done = 0;
    while (s->qhead != NULL) {
        struct zu_msg *m = s->qhead;
        size_t len = zbuf_length(m->z);
        if (len > n - done) {
            size_t take = n - done;
            if (take > 0) {
                zbuf_cut(m->z, 0, take, NULL); /* a head cut never allocates */
                s->qbytes -= take;
                done += take;
            }
            break;
        }
        done += len;
        zbuf__uring_msg_done(s, pop_front(s), 0);
    }
    return done;
}

unsigned zbuf__uring_gather(struct zbuf_uring_sock *s, size_t stop_at, size_t *bytes,
                            bool *file_front)
{
    unsigned n = 0;
    size_t total = 0;
    int flags = s->qhead->flags;
    *file_front = false;
    for (struct zu_msg *m = s->qhead; m != NULL && n < ZU_IOV_MAX; m = m->next) {
        if (m->flags != flags)
            break;
        size_t len = zbuf_length(m->z);
        if (len == 0)
            continue;
        if (len >= stop_at && m != s->qhead)
            break;
        size_t got = 0;
        int c = zbuf_iovec(m->z, 0, ZBUF_TO_END, s->iov + n, (int)(ZU_IOV_MAX - n), &got);
        if (c == 0 && n == 0 && got == 0) {
            *file_front = true; /* a file segment in front: the caller decides */
            break;
        }
        n += (unsigned)(c > 0 ? c : 0);
        total += got;
        if (got < len || total >= s->opts.batch_max)
            break; /* a file segment, a full array, or enough */
    }
    /* Not more than batch_max in one request. */
    if (total > s->opts.batch_max) {
        size_t keep = 0;
        unsigned i = 0;
        while (keep + s->iov[i].iov_len <= s->opts.batch_max)
            keep += s->iov[i++].iov_len;
        if (keep < s->opts.batch_max) {
            s->iov[i].iov_len = s->opts.batch_max - keep;
            keep = s->opts.batch_max;
            i++;
        }
        n = i;
        total = keep;
    }
    *bytes = total;
    return n;
}

void zbuf__uring_pop_done(struct zbuf_uring_sock *s)
{
    zbuf__uring_msg_done(s, pop_front(s), 0);
}

void zbuf__uring_fail_front(struct zbuf_uring_sock *s, int status)
{
    if (s->qhead != NULL)
        zbuf__uring_msg_done(s, pop_front(s), status);
}

void zbuf__uring_fail_all(struct zbuf_uring_sock *s, int status)
{
    while (s->qhead != NULL)
        zbuf__uring_fail_front(s, status);
}

/* ------------------------------------------------------------ zero copy */

/* The checks of zbuf__uring_zc_want() that need no side effect, with the
 * lower of the two thresholds: false means that it would say no. */
bool zbuf__uring_zc_maybe(const struct zbuf_uring_sock *s, size_t bytes, size_t nseg)
{
    size_t min = s->opts.zc_min < s->opts.zc_min_fixed ? s->opts.zc_min : s->opts.zc_min_fixed;
    return (s->opts.flags & ZBUF_URING_SOCK_ZEROCOPY) && s->zc_capable && bytes >= min &&
           nseg > 0 && bytes / nseg >= ZU_ZC_MIN_SEG && (s->zc_on || s->opts.reprobe_after != 0);
}

/*
 * The adaptive choice.  Until a notification has said that the kernel
 * really left the pages in place (`zc_proven`), only one zero-copy request
 * is in flight at a time and the others go plain: on a path that copies
 * anyway (loopback) the first notification turns zero copy off after one
 * request instead of after every request sent before it came back.
 */
bool zbuf__uring_zc_want(struct zbuf_uring_sock *s, size_t bytes, size_t nseg, bool fixed)
{
    size_t min = fixed ? s->opts.zc_min_fixed : s->opts.zc_min;
    if (!(s->opts.flags & ZBUF_URING_SOCK_ZEROCOPY) || !s->zc_capable || bytes < min ||
        nseg == 0 || bytes / nseg < ZU_ZC_MIN_SEG)
        return false;
    if (!s->zc_on && s->opts.reprobe_after != 0 && ++s->since_off >= s->opts.reprobe_after) {
        s->zc_on = true;
        s->zc_proven = false;
        s->copied_run = 0;
    }
    if (!s->zc_on)
        return false;
    if (s->opts.flags & ZBUF_URING_SOCK_ZEROCOPY_ALWAYS)
        return true;
    if (!s->zc_proven) {
        if (s->zc_probing)
            return false;
        s->zc_probing = true;
    }
    return true;
}

void zbuf__uring_zc_unmade(struct zbuf_uring_sock *s)
{
    s->zc_probing = false;
}

void zbuf__uring_zc_notified(struct zbuf_uring_sock *s, bool copied)
{
    s->st.zc_notifs++;
    s->zc_probing = false;
    if (!copied) {
        s->copied_run = 0;
        s->zc_proven = true;
        return;
    }
    s->st.zc_copied++;
    s->copied_run++;
    if (s->zc_on && !(s->opts.flags & ZBUF_URING_SOCK_ZEROCOPY_ALWAYS) &&
        s->copied_run >= s->opts.copied_limit) {
        s->zc_on = false;
        s->zc_proven = false;
        s->since_off = 0;
        s->st.zc_turned_off++;
    }
}

/* -------------------------------------------------------------- sockets */

int zbuf_uring_sock_open(zbuf_uring_t *u, int fd, const zbuf_uring_sock_opts_t *o,
                         zbuf_uring_sock_t **out)
{
    if (u == NULL || out == NULL || fd < 0)
        return -EINVAL;
    zbuf_uring_sock_opts_t opts;
    if (o != NULL)
        opts = *o;
    else
        zbuf_uring_sock_opts_init(&opts);
    if (opts.zc_min == 0)
        opts.zc_min = u->opts.zc_min;
    if (opts.zc_min_fixed == 0)
        opts.zc_min_fixed = u->opts.zc_min_fixed;
    if (opts.copied_limit == 0 || opts.batch_max == 0 || opts.dgram_inflight == 0 ||
        opts.batch_max > (size_t)0x7fffffff)
        return -EINVAL;
    int type;
    socklen_t tl = sizeof type;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0)
        return errno == ENOTSOCK ? -EINVAL : -errno;
    struct zbuf_uring_sock *s = calloc(1, sizeof *s);
    if (s == NULL)
        return -ENOMEM;
    s->u = u;
    s->fd = fd;
    s->type = type;
    s->opts = opts;
    s->zc_capable = (opts.flags & ZBUF_URING_SOCK_ZEROCOPY) != 0;
    s->zc_on = s->zc_capable;
    s->recv_op.kind = ZU_OP_RECV;
    s->recv_op.s = s;
    s->accept_op.kind = ZU_OP_ACCEPT;
    s->accept_op.s = s;
    s->conn_op.kind = ZU_OP_CONNECT;
    s->conn_op.s = s;
    s->shut_op.kind = ZU_OP_SHUTDOWN;
    s->shut_op.s = s;
    s->conn_status = s->shut_status = ZU_NO_STATUS;
    int rc = u->be->sock_open(s);
    if (rc < 0) {
        free(s);
        return rc;
    }
    s->next = u->socks;
    if (u->socks != NULL)
        u->socks->prev = s;
    u->socks = s;
    u->nsocks++;
    *out = s;
    return 0;
}

int zbuf_uring_sock_fd(const zbuf_uring_sock_t *s)
{
    return s != NULL ? s->fd : -EINVAL;
}

zbuf_uring_t *zbuf_uring_sock_engine(const zbuf_uring_sock_t *s)
{
    return s != NULL ? s->u : NULL;
}

void zbuf_uring_sock_get_stats(const zbuf_uring_sock_t *s, zbuf_uring_sock_stats_t *st)
{
    if (s == NULL || st == NULL)
        return;
    *st = s->st;
    st->zerocopy_on = s->zc_capable && s->zc_on;
    s->u->be->sock_stats(s, st);
}

size_t zbuf_uring_send_queued(const zbuf_uring_sock_t *s)
{
    return s != NULL ? s->qbytes + s->inflight_bytes : 0;
}

static int send_common(zbuf_uring_sock_t *s, zbuf_t *z, int flags, const struct sockaddr *to,
                       socklen_t tolen, zbuf_uring_send_cb cb, void *arg)
{
    if (s == NULL || !zbuf_ok(z) || (flags & ~ZU_SEND_FLAGS) != 0 ||
        (to != NULL && (tolen == 0 || tolen > sizeof(struct sockaddr_storage))) ||
        (to != NULL && s->type == SOCK_STREAM))
        return -EINVAL;
    if (s->state & ZS_CLOSING)
        return -EBADF;
    if (s->send_err != 0)
        return s->send_err;
    if (s->state & (ZS_SHUT_WANTED | ZS_SHUT_DONE))
        return -EPIPE;
    zbuf_uring_t *u = s->u;
    struct zu_msg *m = msg_get(u);
    if (m == NULL)
        return -ENOMEM;
    if (to != NULL) {
        m->addr = malloc(sizeof *m->addr);
        if (m->addr == NULL) {
            zbuf__uring_msg_put(u, m);
            return -ENOMEM;
        }
        memcpy(m->addr, to, tolen);
        m->addrlen = tolen;
    }
    m->z = z;
    m->cb = cb;
    m->arg = arg;
    m->flags = flags;
    if (s->qtail != NULL)
        s->qtail->next = m;
    else
        s->qhead = m;
    s->qtail = m;
    s->qbytes += zbuf_length(z);
    zbuf__uring_dirty(s);
    return 0;
}

int zbuf_uring_send(zbuf_uring_sock_t *s, zbuf_t *z, int flags, zbuf_uring_send_cb cb, void *arg)
{
    return send_common(s, z, flags, NULL, 0, cb, arg);
}

int zbuf_uring_sendto(zbuf_uring_sock_t *s, zbuf_t *z, int flags, const struct sockaddr *to,
                      socklen_t tolen, zbuf_uring_send_cb cb, void *arg)
{
    return send_common(s, z, flags, to, to != NULL ? tolen : 0, cb, arg);
}

/* ---------------------------------------------------------------- receive */

static void stash_push(struct zbuf_uring_sock *s, ssize_t n, zbuf_t *z, const zbuf_uring_rx_t *rx)
{
    struct zu_stash *e = calloc(1, sizeof *e);
    if (e == NULL) {
        /* No memory to keep it: the bytes are lost, and the application
         * learns it, after what came before, as an error that ends the
         * receive instead of silently. */
        zbuf_delete(z);
        s->rx_err = -ENOMEM;
        return;
    }
    e->z = z;
    e->n = n;
    if (rx != NULL) {
        e->flags = rx->flags;
        if (rx->from != NULL && rx->fromlen <= sizeof e->from) {
            memcpy(&e->from, rx->from, rx->fromlen);
            e->fromlen = rx->fromlen;
        }
    }
    if (s->stash_tail != NULL)
        s->stash_tail->next = e;
    else
        s->stash_head = e;
    s->stash_tail = e;
}

void zbuf__uring_deliver(struct zbuf_uring_sock *s, ssize_t n, zbuf_t *z, const zbuf_uring_rx_t *rx)
{
    if (n > 0) {
        s->st.recvs++;
        s->st.bytes_received += (uint64_t)n;
    }
    if (!(s->state & ZS_RECVING) || s->stash_head != NULL || s->rx_err != 0 ||
        s->recv_cb == NULL) {
        if (s->state & ZS_CLOSING) {
            zbuf_delete(z); /* nobody will ever read it */
            return;
        }
        stash_push(s, n, z, rx);
        if (s->state & ZS_RECVING)
            zbuf__uring_due(s);
        return;
    }
    if (z == NULL)
        s->state &= ~ZS_RECVING; /* end of stream or error: receiving stops */
    zbuf_uring_rx_t none = { 0 };
    s->recv_cb(s, n, z, rx != NULL ? rx : &none, s->recv_arg);
}

/* Deliver the stash while the application keeps receiving. */
static void drain_stash(struct zbuf_uring_sock *s)
{
    while (s->stash_head != NULL && (s->state & ZS_RECVING) && !(s->state & ZS_CLOSING)) {
        struct zu_stash *e = s->stash_head;
        s->stash_head = e->next;
        if (s->stash_head == NULL)
            s->stash_tail = NULL;
        zbuf_uring_rx_t rx = { .from = e->fromlen ? (struct sockaddr *)&e->from : NULL,
                               .fromlen = e->fromlen, .flags = e->flags };
        if (e->z == NULL)
            s->state &= ~ZS_RECVING;
        zbuf_t *z = e->z;
        ssize_t n = e->n;
        free(e);
        s->recv_cb(s, n, z, &rx, s->recv_arg);
    }
    if (s->stash_head == NULL && s->rx_err != 0 && (s->state & ZS_RECVING) &&
        !(s->state & ZS_CLOSING)) {
        int e = s->rx_err;
        s->rx_err = 0;
        s->state &= ~ZS_RECVING;
        zbuf_uring_rx_t none = { 0 };
        s->recv_cb(s, e, NULL, &none, s->recv_arg);
    }
}

static void stash_free(struct zbuf_uring_sock *s)
{
    while (s->stash_head != NULL) {
        struct zu_stash *e = s->stash_head;
        s->stash_head = e->next;
        zbuf_delete(e->z);
        free(e);
    }
    s->stash_tail = NULL;
}

/* Take s off its ring's waiting list. */
static void unwait(struct zbuf_uring_sock *s)
{
    if (!(s->state & ZS_WAITING))
        return;
    zbuf_uring_bufring_t *br = s->br;
    struct zbuf_uring_sock **pp = &br->wait_head;
    while (*pp != s)
        pp = &(*pp)->next_wait;
    *pp = s->next_wait;
    s->state &= ~ZS_WAITING;
    br->st.waiting--;
}

int zbuf_uring_recv_start(zbuf_uring_sock_t *s, zbuf_uring_bufring_t *br, zbuf_uring_recv_cb cb,
                          void *arg)
{
    if (s == NULL || br == NULL || cb == NULL || br->u != s->u)
        return -EINVAL;
    if (s->state & ZS_CLOSING)
        return -EBADF;
    if (s->state & ZS_RECVING)
        return -EALREADY;
    if (s->br != br) {
        if (s->br != NULL)
            s->br->users--;
        s->br = br;
        br->users++;
    }
    s->recv_cb = cb;
    s->recv_arg = arg;
    s->state |= ZS_RECVING;
    if (s->stash_head != NULL || s->rx_err != 0)
        zbuf__uring_due(s); /* first what came while stopped */
    if (!s->recv_op.in_kernel) {
        int rc = s->u->be->recv_arm(s);
        if (rc < 0) {
            s->state &= ~ZS_RECVING;
            return rc;
        }
    }
    return 0;
}

int zbuf_uring_recv_stop(zbuf_uring_sock_t *s)
{
    if (s == NULL)
        return -EINVAL;
    if (!(s->state & ZS_RECVING))
        return 0;
    s->state &= ~ZS_RECVING;
    unwait(s);
    s->u->be->recv_cancel(s);
    return 0;
}

void zbuf__uring_recv_starved(struct zbuf_uring_sock *s)
{
    zbuf_uring_bufring_t *br = s->br;
    br->st.empty++;
    s->st.recv_nobufs++;
    if (!(s->state & ZS_WAITING)) {
        s->state |= ZS_WAITING;
        s->next_wait = br->wait_head;
        br->wait_head = s;
        br->st.waiting++;
    }
    /* Ask the pool's watcher to wake us, then look again: a buffer that
     * came back before the flag was up told nobody. */
    atomic_store(&br->starving, true);
    if (zbuf_pool_available(br->pool) > 0)
        atomic_store(&s->u->refill, true);
}

void zbuf__uring_refill_all(zbuf_uring_t *u)
{
    atomic_store(&u->refill, false);
    for (zbuf_uring_bufring_t *br = u->rings; br != NULL; br = br->next) {
        unsigned have = u->be->bufring_refill(br);
        if (have == 0 || br->wait_head == NULL)
            continue;
        atomic_store(&br->starving, false);
        while (br->wait_head != NULL) {
            struct zbuf_uring_sock *s = br->wait_head;
            unwait(s);
            if ((s->state & ZS_RECVING) && !s->recv_op.in_kernel) {
                s->st.recv_rearms++;
                if (u->be->recv_arm(s) < 0) {
                    zbuf__uring_deliver(s, -ENOMEM, NULL, NULL);
                }
            }
        }
    }
}

/* The pool watcher of a ring: any thread, after a buffer came back to an
 * empty pool.  Wakes the engine only when a socket waits. */
static void on_pool_refill(zbuf_pool_t *p, void *arg)
{
    (void)p;
    zbuf_uring_bufring_t *br = arg;
    if (atomic_load(&br->starving)) {
        atomic_store(&br->u->refill, true);
        zbuf_uring_wake(br->u);
    }
}

int zbuf_uring_bufring_create(zbuf_uring_t *u, zbuf_pool_t *pool, unsigned entries,
                              zbuf_uring_bufring_t **out)
{
    if (u == NULL || pool == NULL || out == NULL || entries > 32768 ||
        (entries & (entries - 1)) != 0 || zbuf_pool_buf_size(pool) > UINT32_MAX)
        return -EINVAL;
    if (entries == 0) {
        size_t cap = zbuf_pool_capacity(pool);
        entries = 1;
        while (entries < cap && entries < 32768)
            entries <<= 1;
    }
    zbuf_uring_bufring_t *br = calloc(1, sizeof *br);
    if (br == NULL)
        return -ENOMEM;
    br->u = u;
    br->pool = pool;
    br->buf_size = zbuf_pool_buf_size(pool);
    br->entries = entries;
    br->st.capacity = entries;
    atomic_init(&br->starving, false);
    /* A group id not in use (they are 16 bits). */
    for (unsigned tries = 0;; tries++) {
        if (tries > 65535) {
            free(br);
            return -ENOSPC;
        }
        uint16_t id = u->next_bgid++;
        bool used = false;
        for (zbuf_uring_bufring_t *o = u->rings; o != NULL && !used; o = o->next)
            used = o->bgid == id;
        if (!used) {
            br->bgid = id;
            break;
        }
    }
    int rc = u->be->bufring_init(br);
    if (rc < 0) {
        free(br);
        return rc;
    }
    rc = zbuf_pool_add_notify(pool, on_pool_refill, br);
    if (rc < 0) {
        u->be->bufring_fini(br);
        free(br);
        return rc;
    }
    br->next = u->rings;
    u->rings = br;
    u->be->bufring_refill(br);
    *out = br;
    return 0;
}

int zbuf_uring_bufring_delete(zbuf_uring_bufring_t *br)
{
    if (br == NULL)
        return 0;
    if (br->users > 0)
        return -EBUSY;
    zbuf_uring_t *u = br->u;
    zbuf_pool_remove_notify(br->pool, on_pool_refill, br);
    zbuf_pool_notify_sync(br->pool); /* a call on another thread may still read br */
    zbuf_uring_bufring_t **pp = &u->rings;
    while (*pp != br)
        pp = &(*pp)->next;
    *pp = br->next;
    u->be->bufring_fini(br);
    free(br);
    return 0;
}

void zbuf_uring_bufring_get_stats(const zbuf_uring_bufring_t *br, zbuf_uring_bufring_stats_t *st)
{
    if (br != NULL && st != NULL)
        *st = br->st;
}

/* --------------------------------------------------------------- accept */

void zbuf__uring_accepted(struct zbuf_uring_sock *s, int fd)
{
    if ((s->state & ZS_ACCEPTING) && s->naccepted == 0 && s->accept_cb != NULL) {
        if (fd < 0)
            s->state &= ~ZS_ACCEPTING;
        s->accept_cb(s, fd, s->accept_arg);
        return;
    }
    if (s->state & ZS_CLOSING) {
        if (fd >= 0)
            close(fd);
        return;
    }
    if (s->naccepted == s->capaccepted) {
        unsigned cap = s->capaccepted ? s->capaccepted * 2 : 8;
        int *n = realloc(s->accepted, cap * sizeof *n);
        if (n == NULL) {
            if (fd >= 0)
                close(fd); /* the peer sees a reset; better than a leak */
            return;
        }
        s->accepted = n;
        s->capaccepted = cap;
    }
    s->accepted[s->naccepted++] = fd;
    if (s->state & ZS_ACCEPTING)
        zbuf__uring_due(s);
}

static void drain_accepted(struct zbuf_uring_sock *s)
{
    unsigned i = 0;
    while (i < s->naccepted && (s->state & ZS_ACCEPTING) && !(s->state & ZS_CLOSING)) {
        int fd = s->accepted[i++];
        if (fd < 0)
            s->state &= ~ZS_ACCEPTING;
        s->accept_cb(s, fd, s->accept_arg);
    }
    memmove(s->accepted, s->accepted + i, (s->naccepted - i) * sizeof *s->accepted);
    s->naccepted -= i;
}

int zbuf_uring_accept_start(zbuf_uring_sock_t *s, zbuf_uring_accept_cb cb, void *arg)
{
    if (s == NULL || cb == NULL)
        return -EINVAL;
    if (s->state & ZS_CLOSING)
        return -EBADF;
    if (s->state & ZS_ACCEPTING)
        return -EALREADY;
    s->accept_cb = cb;
    s->accept_arg = arg;
    s->state |= ZS_ACCEPTING;
    if (s->naccepted > 0)
        zbuf__uring_due(s);
    if (!s->accept_op.in_kernel) {
        int rc = s->u->be->accept_arm(s);
        if (rc < 0) {
            s->state &= ~ZS_ACCEPTING;
            return rc;
        }
    }
    return 0;
}

int zbuf_uring_accept_stop(zbuf_uring_sock_t *s)
{
    if (s == NULL)
        return -EINVAL;
    if (s->state & ZS_ACCEPTING) {
        s->state &= ~ZS_ACCEPTING;
        s->u->be->accept_cancel(s);
    }
    return 0;
}

/* ------------------------------------------------- connect and shutdown */

int zbuf_uring_connect(zbuf_uring_sock_t *s, const struct sockaddr *addr, socklen_t addrlen,
                       zbuf_uring_status_cb cb, void *arg)
{
    if (s == NULL || addr == NULL || addrlen == 0 || addrlen > sizeof s->conn_addr)
        return -EINVAL;
    if (s->state & ZS_CLOSING)
        return -EBADF;
    if ((s->state & ZS_CONNECTING) || s->conn_op.in_kernel)
        return -EALREADY;
    memcpy(&s->conn_addr, addr, addrlen);
    s->conn_len = addrlen;
    s->conn_cb = cb;
    s->conn_arg = arg;
    s->state |= ZS_CONNECTING;
    int rc = s->u->be->connect(s);
    if (rc < 0)
        s->state &= ~ZS_CONNECTING;
    return rc;
}

int zbuf_uring_shutdown(zbuf_uring_sock_t *s, zbuf_uring_status_cb cb, void *arg)
{
    if (s == NULL)
        return -EINVAL;
    if (s->state & ZS_CLOSING)
        return -EBADF;
    if (s->state & (ZS_SHUT_WANTED | ZS_SHUT_DONE))
        return -EALREADY;
    s->shut_cb = cb;
    s->shut_arg = arg;
    s->state |= ZS_SHUT_WANTED;
    zbuf__uring_dirty(s); /* the flush starts it once the queue is empty */
    return 0;
}

/* ------------------------------------------------------------------ close */

int zbuf_uring_sock_close(zbuf_uring_sock_t *s, int timeout_ms, zbuf_uring_close_cb cb, void *arg)
{
    if (s == NULL)
        return -EINVAL;
    if (s->state & ZS_CLOSING)
        return -EBADF;
    zbuf_uring_recv_stop(s);
    zbuf_uring_accept_stop(s);
    s->state |= ZS_CLOSING;
    s->close_cb = cb;
    s->close_arg = arg;
    s->close_timeout = timeout_ms;
    s->deadline = timeout_ms >= 0 ? zbuf__uring_now_ms() + timeout_ms : 0;
    s->next_closing = s->u->closing;
    if (s->u->closing != NULL)
        s->u->closing->prev_closing = s;
    s->u->closing = s;
    stash_free(s);
    if (s->state & ZS_SHUT_WANTED) {
        s->state &= ~ZS_SHUT_WANTED; /* its callback learns it will not happen */
        s->shut_status = -ECANCELED;
    }
    for (unsigned i = 0; i < s->naccepted; i++)
        if (s->accepted[i] >= 0)
            close(s->accepted[i]);
    s->naccepted = 0;
    /* What the kernel does not hold yet will never go.  The front of the
     * queue that a stream request in flight covers stays until its
     * completion says how much went. */
    if (s->send_op == NULL)
        zbuf__uring_fail_all(s, -ECANCELED);
    else
        while (s->qhead != NULL && s->qhead->next != NULL) {
            struct zu_msg *last = s->qhead;
            while (last->next != s->qtail)
                last = last->next;
            struct zu_msg *m = s->qtail;
            last->next = NULL;
            s->qtail = last;
            s->qbytes -= zbuf_length(m->z);
            zbuf__uring_msg_done(s, m, -ECANCELED);
        }
    s->u->be->close_begin(s);
    zbuf__uring_due(s);
    return 0;
}

/* Take s off a singly linked list of sockets (next at offset `link`). */
static void unlink_from(struct zbuf_uring_sock **head, struct zbuf_uring_sock *s, size_t link)
{
    for (struct zbuf_uring_sock **pp = head; *pp != NULL;
         pp = (struct zbuf_uring_sock **)((char *)*pp + link)) {
        if (*pp == s) {
            *pp = *(struct zbuf_uring_sock **)((char *)s + link);
            return;
        }
    }
}

/* Unlink and free a socket whose close is complete. */
static void sock_finish(struct zbuf_uring_sock *s)
{
    zbuf_uring_t *u = s->u;
    /* A callback of its own may have put it on a list again. */
    if (s->state & ZS_DUE)
        unlink_from(&u->due, s, offsetof(struct zbuf_uring_sock, next_due));
    if (s->state & ZS_DIRTY)
        unlink_from(&u->dirty, s, offsetof(struct zbuf_uring_sock, next_dirty));
    unwait(s);
    u->be->sock_free(s);
    if (!(s->opts.flags & ZBUF_URING_SOCK_KEEP_FD))
        close(s->fd);
    if (s->br != NULL)
        s->br->users--;
    zbuf_uring_close_cb cb = s->close_cb;
    void *arg = s->close_arg;
    if (cb != NULL)
        cb(s, arg);
    if (s->prev_closing != NULL)
        s->prev_closing->next_closing = s->next_closing;
    else
        u->closing = s->next_closing;
    if (s->next_closing != NULL)
        s->next_closing->prev_closing = s->prev_closing;
    if (s->prev != NULL)
        s->prev->next = s->next;
    else
        u->socks = s->next;
    if (s->next != NULL)
        s->next->prev = s->prev;
    u->nsocks--;
    free(s->iov);
    free(s->accepted);
    free(s);
}

void zbuf__uring_kop_done(struct zbuf_uring_sock *s)
{
    if ((s->state & ZS_CLOSING) && s->kops == 0)
        zbuf__uring_due(s);
}

/* Close deadlines: abort, then detach what still waits.  Returns the
 * milliseconds to the nearest deadline left, or -1. */
static int64_t close_deadlines(zbuf_uring_t *u)
{
    int64_t now = 0, next = -1;
    for (struct zbuf_uring_sock *s = u->closing; s != NULL; s = s->next_closing) {
        if (s->deadline == 0)
            continue;
        if (now == 0)
            now = zbuf__uring_now_ms();
        if (now >= s->deadline) {
            if (!(s->state & ZS_ABORTED)) {
                s->state |= ZS_ABORTED;
                int t = s->close_timeout > ZU_ABORT_MIN_MS ? s->close_timeout : ZU_ABORT_MIN_MS;
                s->deadline = now + t;
                u->be->close_abort(s);
            } else {
                s->deadline = 0;
            }
            zbuf__uring_due(s);
        }
        if (s->deadline != 0 && (next < 0 || s->deadline - now < next))
            next = s->deadline - now;
    }
    return next;
}

/* After the second close deadline: requests that only await their
 * notification are handed to the engine (released when it comes, or
 * abandoned by zbuf_uring_destroy()); the socket need not wait for them. */
static void detach_notif_waiters(struct zbuf_uring_sock *s)
{
    zbuf_uring_t *u = s->u;
    struct zu_op *op = s->ops;
    while (op != NULL) {
        struct zu_op *next = op->lnext;
        if (op->notif_wait && !op->in_kernel) {
            zbuf__uring_op_unlink(u, op);
            op->s = NULL;
            zbuf__uring_op_link(u, op);
            s->kops--;
            s->st.outstanding--;
        }
        op = next;
    }
}

/* Callbacks and frees that are due, for one socket.  Returns true when
 * the socket was freed. */
static bool run_due(struct zbuf_uring_sock *s)
{
    while (s->done_head != NULL) {
        struct zu_msg *m = s->done_head;
        s->done_head = m->next;
        if (s->done_head == NULL)
            s->done_tail = NULL;
        zbuf_t *rest = m->z;
        if (rest != NULL && zbuf_length(rest) == 0 && m->status != 0) {
            zbuf_delete(rest); /* nothing left to give back */
            rest = NULL;
        }
        zbuf_uring_send_cb cb = m->cb;
        void *arg = m->arg;
        int status = m->status;
        m->z = NULL;
        zbuf__uring_msg_put(s->u, m);
        if (cb != NULL)
            cb(s, status, rest, arg);
        else
            zbuf_delete(rest);
    }
    if (s->conn_status != ZU_NO_STATUS) {
        int st = s->conn_status;
        s->conn_status = ZU_NO_STATUS;
        if (s->conn_cb != NULL)
            s->conn_cb(s, st, s->conn_arg);
    }
    if (s->shut_status != ZU_NO_STATUS) {
        int st = s->shut_status;
        s->shut_status = ZU_NO_STATUS;
        if (s->shut_cb != NULL)
            s->shut_cb(s, st, s->shut_arg);
    }
    drain_stash(s);
    if (s->naccepted > 0)
        drain_accepted(s);
    if (!(s->state & ZS_CLOSING))
        return false;
    /* Close: done when the kernel holds nothing of ours.  After the second
     * deadline, zero-copy requests still waiting are handed to the engine. */
    if ((s->state & ZS_ABORTED) && s->deadline == 0)
        detach_notif_waiters(s);
    if (s->kops > 0 || s->send_op != NULL || s->u->be->close_pending(s))
        return false;
    sock_finish(s);
    return true;
}

void zbuf__uring_deferred(zbuf_uring_t *u)
{
    /* One at a time from the head: a callback may put sockets (this one
     * too) on the list again, and a socket may be freed here. */
    while (u->due != NULL) {
        struct zbuf_uring_sock *s = u->due;
        u->due = s->next_due;
        s->state &= ~ZS_DUE;
        run_due(s);
    }
}

/* ------------------------------------------------------------------- run */

int zbuf_uring_run(zbuf_uring_t *u, int timeout_ms)
{
    if (u == NULL)
        return -EINVAL;
    if (u->running)
        return -EBUSY;
    u->running = true;
    zbuf__uring_deferred(u);
    if (atomic_load(&u->refill))
        zbuf__uring_refill_all(u);
    flush_dirty(u);
    int64_t next = close_deadlines(u);
    int t = timeout_ms;
    if (u->due != NULL || u->dirty != NULL || atomic_load(&u->refill))
        t = 0;
    if (next >= 0 && (t < 0 || next < t))
        t = (int)next;
    int n = u->be->wait(u, t);
    flush_dirty(u);
    zbuf__uring_deferred(u);
    /* Put back into the rings what the kernel took and the callbacks gave
     * back (every run: a ring is kept only as deep as the traffic needs). */
    if (u->rings != NULL)
        zbuf__uring_refill_all(u);
    close_deadlines(u);
    zbuf__uring_deferred(u);
    int rc = zbuf_uring_submit(u);
    u->running = false;
    if (n < 0)
        return n;
    return rc < 0 ? rc : n;
}

int zbuf_uring_destroy(zbuf_uring_t *u, int timeout_ms)
{
    if (u == NULL)
        return 0;
    if (u->running)
        return -EBUSY;
    u->destroying = true;
    bool aborted = false;
    for (struct zbuf_uring_sock *s = u->socks; s != NULL; s = s->next)
        if (!(s->state & ZS_CLOSING))
            zbuf_uring_sock_close(s, timeout_ms, s->close_cb, s->close_arg);
    int64_t start = zbuf__uring_now_ms();
    int64_t limit = timeout_ms < 0 ? -1 : 2 * (int64_t)timeout_ms + 2 * ZU_ABORT_MIN_MS + 1000;
    /* Run until every socket is gone and every detached request notified,
     * within the sockets' own two deadlines (plus a margin). */
    while (u->nsocks > 0 || u->detached != NULL) {
        for (struct zbuf_uring_sock *s = u->socks; s != NULL; s = s->next)
            aborted |= (s->state & ZS_ABORTED) != 0;
        if (limit >= 0 && zbuf__uring_now_ms() - start > limit)
            break;
        if (u->nsocks == 0 && limit < 0 && u->detached != NULL)
            break; /* nothing can make them come now */
        int rc = zbuf_uring_run(u, 50);
        if (rc < 0 && rc != -EINTR)
            break;
    }
    int result = aborted ? -ECONNABORTED : 0;
    /* Whatever still waits is abandoned: the kernel may read it. */
    while (u->detached != NULL) {
        struct zu_op *op = u->detached;
        u->detached = op->lnext;
        u->st.abandoned++;
        op->held = NULL; /* never released, on purpose */
        free(op);
        result = -ETIMEDOUT;
    }
    while (u->socks != NULL) {
        struct zbuf_uring_sock *s = u->socks;
        u->st.abandoned += s->kops;
        u->socks = s->next;
        result = -ETIMEDOUT;
        /* The kernel may still hold its requests: leave the memory. */
    }
    while (u->rings != NULL) {
        zbuf_uring_bufring_t *br = u->rings;
        br->users = 0;
        zbuf_uring_bufring_delete(br);
    }
    u->be->fini(u);
    close(u->wake_fd);
    while (u->free_ops != NULL) {
        struct zu_op *op = u->free_ops;
        u->free_ops = op->next;
        free(op);
    }
    while (u->free_msgs != NULL) {
        struct zu_msg *m = u->free_msgs;
        u->free_msgs = m->next;
        free(m);
    }
    free(u);
    return result;
}

/* ---------------------------------------------------- single receive */

int zbuf__uring_recv_once(zbuf_uring_sock_t *s, zbuf_uring_bufring_t *br, size_t max, int flags,
                          void (*cb)(struct zbuf_uring_sock *, ssize_t, zbuf_t *,
                                     const zbuf_uring_rx_t *, void *),
                          void *arg)
{
    if (s->u->be->id != ZBUF_URING_BACKEND_IO_URING)
        return -EOPNOTSUPP;
    if (s->state & ZS_CLOSING)
        return -EBADF;
    struct zu_op *op = zbuf__uring_op_get(s->u, ZU_OP_RECV_ONCE, s);
    if (op == NULL)
        return -ENOMEM;
    op->br = br;
    op->once_cb = cb;
    op->once_arg = arg;
    int rc = zbuf__uring_ring_recv_once(s, op, max, flags);
    if (rc < 0)
        zbuf__uring_op_put(s->u, op);
    return rc;
}
