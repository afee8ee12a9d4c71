/* SPDX-License-Identifier: MIT */
/*
 * The epoll machinery of zbuf-uring: the engine's fallback where io_uring
 * is unusable, made of zbuf-sock's public calls.
 *
 * Every socket is registered once, edge-triggered, for input and output;
 * `rx_ready` / `tx_ready` remember an edge until a call says EAGAIN.  So a
 * receive that paused on an empty pool, or a send that waited for room,
 * tries again at once when it resumes (an edge that came meanwhile is not
 * repeated).  Sends go through a zbuf-sock handle per socket (so zero
 * copy is `MSG_ZEROCOPY` with its adaptive COPIED fallback, and its
 * notifications are read when epoll reports EPOLLERR).  On a stream
 * socket, copying sends gather the queued zbufs into one `sendmsg()` (up
 * to 1024 iovecs and `batch_max` bytes, `MSG_MORE` while more follow);
 * a zero-copy send or a file segment goes alone through zbuf-sock.  One
 * `sendmmsg()` per batch of up to 64 datagrams.  Receives are
 * zbuf_sock_recv() and zbuf_sock_recvmmsg() into the ring's pool.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "uring_internal.h"

/* Events per epoll_wait(), datagrams per recvmmsg()/sendmmsg(). */
#define ZE_EVENTS 64
#define ZE_BATCH 64
/* Reads per socket per turn (then the others get theirs). */
#define ZE_READS 64
/* Bytes one stream receive asks for, at least. */
#define ZE_RECV_MIN 65536

static int ep_init(zbuf_uring_t *u)
{
    u->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (u->epfd < 0)
        return -errno;
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
    if (epoll_ctl(u->epfd, EPOLL_CTL_ADD, u->wake_fd, &ev) != 0) {
        int e = -errno;
        close(u->epfd);
        return e;
    }
    return 0;
}

static void ep_fini(zbuf_uring_t *u)
{
    if (u->epfd >= 0)
        close(u->epfd);
    u->epfd = -1;
}

static int ep_fd(zbuf_uring_t *u)
{
    return u->epfd;
}

static int ep_submit(zbuf_uring_t *u)
{
    (void)u;
    return 0;
}

/* After zero-copy notifications: whether zbuf-sock still asks for zero
 * copy (a "copied" notification turns it off).  Once it is off for good
 * (no reprobe), sends skip the handle and are gathered like plain ones. */
static void zc_refresh(struct zbuf_uring_sock *s)
{
    if (!s->zc_on || s->opts.reprobe_after != 0 ||
        (s->opts.flags & ZBUF_URING_SOCK_ZEROCOPY_ALWAYS))
        return;
    zbuf_sock_stats_t st;
    zbuf_sock_get_stats(s->h, &st);
    s->zc_on = st.zerocopy_on;
}

/* zbuf-sock's events: count the bytes it released. */
static void on_sock_event(zbuf_sock_t *h, const zbuf_sock_event_t *ev, void *arg)
{
    (void)h;
    struct zbuf_uring_sock *s = arg;
    if (ev->type == ZBUF_SOCK_RELEASED)
        s->st.bytes_released += ev->bytes;
}

static int ep_sock_open(struct zbuf_uring_sock *s)
{
    int fl = fcntl(s->fd, F_GETFL);
    if (fl < 0)
        return -errno;
    s->fl_saved = fl;
    if (!(fl & O_NONBLOCK) && fcntl(s->fd, F_SETFL, fl | O_NONBLOCK) != 0)
        return -errno;
    zbuf_sock_opts_t o;
    zbuf_sock_opts_init(&o);
    o.flags = ZBUF_SOCK_KEEP_FD;
    if (s->opts.flags & ZBUF_URING_SOCK_ZEROCOPY)
        o.flags |= ZBUF_SOCK_ZEROCOPY;
    if (s->opts.flags & ZBUF_URING_SOCK_ZEROCOPY_ALWAYS)
        o.flags |= ZBUF_SOCK_ZEROCOPY_ALWAYS;
    o.zerocopy_min = s->opts.zc_min;
    o.copied_limit = s->opts.copied_limit;
    o.reprobe_after = s->opts.reprobe_after;
    o.on_event = on_sock_event;
    o.event_arg = s;
    int rc = zbuf_sock_open(s->fd, &o, &s->h);
    if (rc < 0) {
        fcntl(s->fd, F_SETFL, fl);
        return rc;
    }
    struct epoll_event ev = {
        .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.ptr = s,
    };
    if (epoll_ctl(s->u->epfd, EPOLL_CTL_ADD, s->fd, &ev) != 0) {
        rc = -errno;
        zbuf_sock_close(s->h, 0);
        fcntl(s->fd, F_SETFL, fl);
        return rc;
    }
    zbuf_sock_stats_t st;
    zbuf_sock_get_stats(s->h, &st);
    s->zc_capable = st.zerocopy_on;
    s->zc_on = st.zerocopy_on;
    s->tx_ready = true;
    return 0;
}

static void ep_sock_free(struct zbuf_uring_sock *s)
{
    epoll_ctl(s->u->epfd, EPOLL_CTL_DEL, s->fd, NULL);
    if (s->h != NULL)
        zbuf_sock_close(s->h, 0); /* nothing is outstanding by now */
    s->h = NULL;
    if (s->opts.flags & ZBUF_URING_SOCK_KEEP_FD)
        fcntl(s->fd, F_SETFL, s->fl_saved);
}

/* ----------------------------------------------------------------- send */

static void ep_maybe_shutdown(struct zbuf_uring_sock *s)
{
    if (!(s->state & ZS_SHUT_WANTED) || s->qhead != NULL)
        return;
    s->state &= ~ZS_SHUT_WANTED;
    s->state |= ZS_SHUT_DONE;
    s->shut_status = shutdown(s->fd, SHUT_WR) == 0 ? 0 : -errno;
    zbuf__uring_due(s);
}

/*
 * A copying send of the front of the queue: the queued zbufs of the
 * front's flags gathered into one sendmsg() (as the ring gathers them into
 * one request), so that small messages do not cost a system call each.
 * The kernel copies what it takes, so every byte sent is released at once
 * (zbuf__uring_consume()).  Returns bytes sent, a negative errno, or 0
 * when nothing could be gathered (a file segment in front, no memory for
 * the iovec array): the caller then sends the front message alone.
 */
static ssize_t send_gathered(struct zbuf_uring_sock *s)
{
    if (s->iov == NULL && (s->iov = malloc(ZU_IOV_MAX * sizeof *s->iov)) == NULL)
        return 0;
    size_t bytes;
    bool file_front;
    /* A message that may go zero copy is not swept into a copying send. */
    size_t stop_at = (s->opts.flags & ZBUF_URING_SOCK_ZEROCOPY) && s->zc_on ? s->opts.zc_min
                                                                          : SIZE_MAX;
    unsigned n = zbuf__uring_gather(s, stop_at, &bytes, &file_front);
    if (n == 0)
        return 0;
    struct msghdr mh = {.msg_iov = s->iov, .msg_iovlen = n};
    int f = s->qhead->flags | MSG_DONTWAIT | MSG_NOSIGNAL | (bytes < s->qbytes ? MSG_MORE : 0);
    ssize_t r;
    do
        r = sendmsg(s->fd, &mh, f);
    while (r < 0 && errno == EINTR);
    if (r < 0)
        return -errno;
    s->st.bytes_released += (uint64_t)r;
    s->st.sends++;
    s->st.bytes_sent += (uint64_t)r;
    if ((size_t)r < bytes)
        s->st.short_sends++;
    zbuf__uring_consume(s, (size_t)r);
    return r;
}

static void send_stream(struct zbuf_uring_sock *s)
{
    while (s->qhead != NULL && s->tx_ready) {
        struct zu_msg *m = s->qhead;
        size_t len = zbuf_length(m->z);
        if (len == 0) {
            zbuf__uring_consume(s, 0);
            continue;
        }
        int f = m->flags | MSG_DONTWAIT | (m->next != NULL ? MSG_MORE : 0);
        /* The handle only when zero copy may be asked for: its locks and
         * events cost what a small copying send is worth. */
        bool handle = (s->opts.flags & ZBUF_URING_SOCK_ZEROCOPY) && s->zc_on &&
                      len >= s->opts.zc_min;
        ssize_t r = handle ? 0 : send_gathered(s);
        if (r > 0)
            continue;
        if (r == 0)
            r = handle ? zbuf_sock_send(s->h, m->z, f) : zbuf_sock_send_fd(s->fd, m->z, f);
        if (r > 0 && !handle)
            s->st.bytes_released += (uint64_t)r; /* copied: released by the send */
        if (r > 0) {
            /* zbuf-sock cut what it sent from m->z already. */
            size_t left = zbuf_length(m->z);
            s->qbytes -= len - left;
            s->st.sends++;
            s->st.bytes_sent += (uint64_t)r;
            if ((size_t)r < len)
                s->st.short_sends++;
            if (left == 0)
                zbuf__uring_consume(s, 0);
            continue;
        }
        if (r == -EAGAIN && !(m->flags & MSG_DONTWAIT)) {
            s->tx_ready = false; /* EPOLLOUT sets it again */
            return;
        }
        if (r == -EAGAIN) {
            zbuf__uring_fail_front(s, -EAGAIN);
            continue;
        }
        s->send_err = (int)r;
        zbuf__uring_fail_all(s, (int)r);
    }
}

static void send_dgrams(struct zbuf_uring_sock *s)
{
    zbuf_sock_msg_t msgs[ZE_BATCH];
    size_t lens[ZE_BATCH];
    while (s->qhead != NULL && s->tx_ready) {
        unsigned n = 0;
        int flags = s->qhead->flags;
        for (struct zu_msg *m = s->qhead; m != NULL && n < ZE_BATCH && m->flags == flags;
             m = m->next) {
            msgs[n].z = m->z;
            lens[n] = zbuf_length(m->z);
            msgs[n].addrlen = m->addrlen;
            if (m->addrlen != 0)
                memcpy(&msgs[n].addr, m->addr, m->addrlen);
            n++;
        }
        bool handle = (s->opts.flags & ZBUF_URING_SOCK_ZEROCOPY) && s->zc_on;
        int r = handle ? zbuf_sock_sendmmsg(s->h, msgs, n, flags | MSG_DONTWAIT)
                       : zbuf_sock_sendmmsg_fd(s->fd, msgs, n, flags | MSG_DONTWAIT);
        if (r == -EMSGSIZE && s->zc_capable) {
            /* MSG_ZEROCOPY refuses a datagram spread over more pages than
             * an skb has fragments; copied, it goes.  (zbuf-sock does not
             * retry this itself.) */
            r = zbuf_sock_sendmmsg_fd(s->fd, msgs, 1, flags | MSG_DONTWAIT);
            if (r == 1)
                s->st.zc_fallbacks++;
        }
        for (int i = 0; i < r; i++) {
            s->st.sends++;
            s->st.bytes_sent += lens[i];
            if (!handle)
                s->st.bytes_released += lens[i];
            s->qbytes -= lens[i];
            zbuf__uring_pop_done(s); /* its zbuf was emptied by the send */
        }
        if (r > 0)
            continue;
        if (r == -EAGAIN && !(flags & MSG_DONTWAIT)) {
            s->tx_ready = false;
            return;
        }
        zbuf__uring_fail_front(s, r); /* this datagram only */
    }
}

/*
 * How many pool buffers the next receive of `s` takes, given that it may
 * take at most `most`.  Every call takes its buffers before it knows how
 * much is waiting and gives back those it did not fill, so asking for the
 * most where little is waiting (a lightly loaded socket, and the last call
 * of every turn, which finds the socket empty) costs more pool traffic than
 * the data.  So: as many as the previous call filled, doubled while calls
 * come back full, starting from the most.
 */
static unsigned rx_want(const struct zbuf_uring_sock *s, unsigned most)
{
    return s->rx_want == 0 || s->rx_want > most ? most : s->rx_want;
}

static void rx_filled(struct zbuf_uring_sock *s, unsigned want, unsigned filled)
{
    s->rx_want = filled >= want ? 2 * want : filled > 0 ? filled : 1;
}

/* Read while the socket has bytes, the application wants them and the
 * pool has buffers; at most ZE_READS times (then it is dirty again). */
static void do_recv(struct zbuf_uring_sock *s)
{
    zbuf_uring_bufring_t *br = s->br;
    for (unsigned i = 0; i < ZE_READS; i++) {
        if (!s->rx_ready || !(s->state & ZS_RECVING) || (s->state & (ZS_WAITING | ZS_CLOSING)))
            return;
        if (s->type == SOCK_STREAM) {
            zbuf_t *z;
            if (zbuf_create(&z) < 0) {
                zbuf__uring_deliver(s, -ENOMEM, NULL, NULL);
                return;
            }
            size_t most = br->buf_size > ZE_RECV_MIN ? br->buf_size : ZE_RECV_MIN;
            unsigned want = rx_want(s, (unsigned)((most + br->buf_size - 1) / br->buf_size));
            ssize_t r = zbuf_sock_recv(s->fd, br->pool, want * br->buf_size, MSG_DONTWAIT, z);
            if (r > 0) {
                rx_filled(s, want, (unsigned)(((size_t)r + br->buf_size - 1) / br->buf_size));
                zbuf__uring_deliver(s, r, z, NULL);
                continue;
            }
            zbuf_delete(z);
            if (r == -EAGAIN) {
                s->rx_ready = false;
            } else if (r == -ENOBUFS) {
                zbuf__uring_recv_starved(s);
            } else {
                zbuf__uring_deliver(s, r, NULL, NULL); /* 0: end of stream */
            }
            return;
        }
        zbuf_sock_msg_t msgs[ZE_BATCH];
        size_t max = zu_dgram_room(br->buf_size);
        unsigned want = rx_want(s, ZE_BATCH);
        int r = zbuf_sock_recvmmsg(s->fd, br->pool, max, msgs, want, MSG_DONTWAIT);
        if (r == -EAGAIN) {
            s->rx_ready = false;
            return;
        }
        if (r == -ENOBUFS) {
            zbuf__uring_recv_starved(s);
            return;
        }
        if (r < 0) {
            zbuf__uring_deliver(s, r, NULL, NULL);
            return;
        }
        rx_filled(s, want, (unsigned)r);
        for (int k = 0; k < r; k++) {
            zbuf_uring_rx_t rx = { .from = (struct sockaddr *)&msgs[k].addr,
                                   .fromlen = msgs[k].addrlen, .flags = msgs[k].flags & MSG_TRUNC };
            zbuf__uring_deliver(s, (ssize_t)zbuf_length(msgs[k].z), msgs[k].z, &rx);
        }
    }
    zbuf__uring_dirty(s); /* more next turn */
}

static void do_accept(struct zbuf_uring_sock *s)
{
    for (unsigned i = 0; i < ZE_READS; i++) {
        if (!s->rx_ready || !(s->state & ZS_ACCEPTING) || (s->state & ZS_CLOSING))
            return;
        int fd = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd >= 0) {
            zbuf__uring_accepted(s, fd);
            continue;
        }
        int e = errno;
        if (e == EAGAIN || e == EWOULDBLOCK) {
            s->rx_ready = false;
            return;
        }
        if (e == EINTR || e == ECONNABORTED)
            continue;
        zbuf__uring_accepted(s, -e);
        return;
    }
    zbuf__uring_dirty(s);
}

static void ep_flush(struct zbuf_uring_sock *s)
{
    if (s->state & ZS_CLOSING)
        return;
    if (!(s->state & ZS_CONNECTING)) {
        if (s->send_err != 0 && s->qhead != NULL)
            zbuf__uring_fail_all(s, s->send_err);
        if (s->type == SOCK_STREAM)
            send_stream(s);
        else
            send_dgrams(s);
        ep_maybe_shutdown(s);
    }
    if (s->state & ZS_RECVING)
        do_recv(s);
    if (s->state & ZS_ACCEPTING)
        do_accept(s);
}

/* ------------------------------------------------- receive, accept, connect */

static int ep_recv_arm(struct zbuf_uring_sock *s)
{
    s->rx_ready = true; /* an edge may have passed while we did not read */
    zbuf__uring_dirty(s);
    return 0;
}

static void ep_nothing(struct zbuf_uring_sock *s)
{
    (void)s;
}

static int ep_connect(struct zbuf_uring_sock *s)
{
    if (connect(s->fd, (struct sockaddr *)&s->conn_addr, s->conn_len) == 0) {
        s->conn_status = 0;
    } else if (errno == EINPROGRESS || errno == EAGAIN) {
        return 0; /* EPOLLOUT says when */
    } else {
        s->conn_status = -errno;
    }
    s->state &= ~ZS_CONNECTING;
    zbuf__uring_due(s);
    return 0;
}

static void connect_done(struct zbuf_uring_sock *s)
{
    int err = 0;
    socklen_t l = sizeof err;
    if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &l) != 0)
        err = errno;
    s->state &= ~ZS_CONNECTING;
    s->conn_status = -err;
    zbuf__uring_due(s);
}

/* -------------------------------------------------------------- close */

static bool ep_close_pending(struct zbuf_uring_sock *s)
{
    if (s->h == NULL)
        return false;
    zbuf_sock_complete(s->h);
    zbuf_sock_stats_t st;
    zbuf_sock_get_stats(s->h, &st);
    return st.outstanding > 0;
}

static void ep_close_abort(struct zbuf_uring_sock *s)
{
    /* zbuf-sock's own bounded policy: abort, wait a little, abandon. */
    if (s->h != NULL && ep_close_pending(s)) {
        zbuf_sock_stats_t st;
        zbuf_sock_close(s->h, 0);
        s->h = NULL;
        (void)st;
    }
}

static void ep_sock_stats(const struct zbuf_uring_sock *s, zbuf_uring_sock_stats_t *st)
{
    if (s->h == NULL)
        return;
    zbuf_sock_stats_t h;
    zbuf_sock_get_stats(s->h, &h);
    st->zc_sends = h.zc_sends;
    st->zc_notifs = h.zc_completed;
    st->zc_copied = h.zc_copied;
    st->zc_turned_off = h.zc_turned_off;
    st->zc_fallbacks = s->st.zc_fallbacks + h.zc_enobufs;
    st->outstanding = h.outstanding;
    st->zerocopy_on = h.zerocopy_on;
}

/* --------------------------------------------------------- buffer rings */

static int ep_bufring_init(zbuf_uring_bufring_t *br)
{
    (void)br;
    return 0;
}

static void ep_bufring_fini(zbuf_uring_bufring_t *br)
{
    (void)br;
}

static unsigned ep_bufring_refill(zbuf_uring_bufring_t *br)
{
    return (unsigned)zbuf_pool_available(br->pool);
}

static int ep_register_pool(zbuf_uring_t *u, zbuf_pool_t *p)
{
    (void)u;
    (void)p;
    return -EOPNOTSUPP;
}

static int ep_unregister_pool(zbuf_uring_t *u, zbuf_pool_t *p)
{
    (void)u;
    (void)p;
    return -ENOENT;
}

/* ----------------------------------------------------------------- run */

static int ep_wait(zbuf_uring_t *u, int timeout_ms)
{
    struct epoll_event evs[ZE_EVENTS];
    int n = epoll_wait(u->epfd, evs, ZE_EVENTS, timeout_ms);
    u->st.enters++;
    if (n < 0)
        return errno == EINTR ? -EINTR : -errno;
    for (int i = 0; i < n; i++) {
        struct zbuf_uring_sock *s = evs[i].data.ptr;
        uint32_t e = evs[i].events;
        if (s == NULL) {
            uint64_t v;
            if (read(u->wake_fd, &v, sizeof v) < 0 && errno != EAGAIN)
                continue;
            atomic_store(&u->wake_sent, false);
            u->st.wakes++;
            continue;
        }
        if ((e & EPOLLERR) && s->h != NULL && zbuf_sock_complete(s->h) > 0) {
            e &= ~(uint32_t)EPOLLERR; /* zero-copy notifications, not an error */
            zc_refresh(s);
        }
        if (e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
            s->rx_ready = true;
        if (e & (EPOLLOUT | EPOLLHUP | EPOLLERR))
            s->tx_ready = true;
        if ((s->state & ZS_CONNECTING) && (e & (EPOLLOUT | EPOLLHUP | EPOLLERR)))
            connect_done(s);
        zbuf__uring_dirty(s);
    }
    u->st.cqes += (uint64_t)n;
    return n; /* zbuf_uring_run() serves the sockets marked dirty */
}

const struct zu_backend zbuf__uring_epoll = {
    .id = ZBUF_URING_BACKEND_EPOLL,
    .init = ep_init,
    .fini = ep_fini,
    .wait = ep_wait,
    .submit = ep_submit,
    .fd = ep_fd,
    .sock_open = ep_sock_open,
    .sock_free = ep_sock_free,
    .flush = ep_flush,
    .recv_arm = ep_recv_arm,
    .recv_cancel = ep_nothing,
    .accept_arm = ep_recv_arm,
    .accept_cancel = ep_nothing,
    .connect = ep_connect,
    .close_begin = ep_nothing,
    .close_abort = ep_close_abort,
    .close_pending = ep_close_pending,
    .bufring_init = ep_bufring_init,
    .bufring_fini = ep_bufring_fini,
    .bufring_refill = ep_bufring_refill,
    .register_pool = ep_register_pool,
    .unregister_pool = ep_unregister_pool,
    .sock_stats = ep_sock_stats,
};
