/* SPDX-License-Identifier: MIT */
/*
 * The VxWorks zbufSockLib routines on an io_uring engine.
 *
 * zbuf_uring_vx_init() starts one thread, `zbuf-uring-vx`, that creates an
 * engine, owns it and runs it; the routines (on any thread) hand it
 * requests through a locked queue and a wake-up, then wait on a condition
 * variable for the answer.  The engine is installed into the socket
 * adapter's layer with zbuf_sock_vx_set_engine(), which answers -ENOSYS
 * ("do it yourself") whenever this engine cannot serve a call: io_uring
 * gone at shutdown, a datagram longer than a ring buffer, a ring run dry.
 *
 * Descriptors.  The application closes descriptors behind our back and the
 * kernel reuses the numbers, so each request checks the socket's identity
 * (device, inode) against the entry made for that number; a stale entry is
 * closed without touching the descriptor (its socket is opened with
 * KEEP_FD and closed without a deadline: requests the kernel still holds
 * keep their own reference to the socket, and their notifications still
 * come), and a new one is made.
 *
 * Ownership.  The layer borrows the zbuf for a send and deletes it after.
 * A send therefore moves the zbuf's segments into a new zbuf the engine
 * consumes (zbuf_split() at 0: no copy, no reference count change); bytes
 * that come back unsent are moved back, so the layer sees what was not
 * sent, as its contract says.
 *
 * A request is shared by the caller and the engine thread (refs = 2): a
 * caller that gives up after 30 s without progress leaves, and whoever
 * drops the last reference frees it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#include <zbuf/vxworks_sock.h>

#include "../vxworks/fdtab.h"
#include "uring_internal.h"

/* As the socket adapter's layer: a partly sent zbuf may wait this long. */
#define VXU_STALL_MS 30000
/* The receive ring's pool. */
#define VXU_POOL_BUFS 512
#define VXU_POOL_BUF_SIZE 16384

enum { VXU_SEND = 1, VXU_RECV = 2 };

struct vxu_req {
    int kind;
    int fd;
    int flags;
    bool dgram;
    bool nonblock;
    bool done;
    int refs;                     /* caller + engine; under vxu.lock */
    zbuf_t *z;                    /* send: the bytes (the engine's while queued) */
    size_t total;                 /* send: bytes asked */
    struct sockaddr_storage to;
    socklen_t tolen;
    size_t max;                   /* receive */
    ssize_t result;
    zbuf_t *back;                 /* send: unsent bytes; receive: the zbuf */
    struct sockaddr_storage from;
    socklen_t fromlen;
    struct vxu_req *next;
};

struct vxu_sock {
    zbuf_uring_sock_t *s;
    dev_t dev;
    ino_t ino;
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;          /* requests answered, state changes */
    int state;                    /* 0: off; 1: starting; 2: io_uring; 3: epoll (declined) */
    bool stopping;
    int stop_timeout;
    int stop_result;
    pthread_t thread;
    zbuf_uring_opts_t opts;
    zbuf_uring_t *u;              /* the engine (its thread only, once running) */
    struct vxu_req *head, *tail;  /* requests waiting for the engine thread */
    /* Engine thread only: */
    struct vxu_sock *tab;
    size_t ntab;
    zbuf_pool_t *pool;
    zbuf_uring_bufring_t *br;
    unsigned active;              /* requests the engine holds */
} vxu = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

static void req_unref_locked(struct vxu_req *r)
{
    if (--r->refs > 0)
        return;
    zbuf_delete(r->z);
    zbuf_delete(r->back);
    free(r);
}

/* Answer a request (engine thread). */
static void answer(struct vxu_req *r, ssize_t result)
{
    pthread_mutex_lock(&vxu.lock);
    r->result = result;
    r->done = true;
    vxu.active--;
    pthread_cond_broadcast(&vxu.cond);
    req_unref_locked(r);
    pthread_mutex_unlock(&vxu.lock);
}

/* ----------------------------------------------------------- engine side */

/* The engine's socket for descriptor fd, made on first use; NULL when it
 * cannot be had (the caller then declines the request). */
static zbuf_uring_sock_t *sock_for(int fd)
{
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode))
        return NULL;
    if ((size_t)fd >= vxu.ntab) {
        struct vxu_sock *t = zbuf_vx__fdtab_grow(vxu.tab, &vxu.ntab, sizeof *t, fd);
        if (t == NULL)
            return NULL;
        vxu.tab = t;
    }
    struct vxu_sock *e = &vxu.tab[fd];
    if (e->s != NULL && (e->dev != st.st_dev || e->ino != st.st_ino)) {
        /* The program closed it; the number is another socket's now. */
        zbuf_uring_sock_close(e->s, -1, NULL, NULL);
        e->s = NULL;
    }
    if (e->s == NULL) {
        zbuf_uring_sock_opts_t o;
        zbuf_uring_sock_opts_init(&o);
        o.flags = ZBUF_URING_SOCK_KEEP_FD | ZBUF_URING_SOCK_ZEROCOPY;
        if (zbuf_uring_sock_open(vxu.u, fd, &o, &e->s) != 0) {
            e->s = NULL;
            return NULL;
        }
        e->dev = st.st_dev;
        e->ino = st.st_ino;
    }
    return e->s;
}

static void send_done(zbuf_uring_sock_t *s, int status, zbuf_t *unsent, void *arg);

static int submit_send(zbuf_uring_sock_t *s, struct vxu_req *r, zbuf_t *z, int flags)
{
    if (r->dgram && r->tolen > 0)
        return zbuf_uring_sendto(s, z, flags, (struct sockaddr *)&r->to, r->tolen, send_done, r);
    return zbuf_uring_send(s, z, flags, send_done, r);
}

static void send_done(zbuf_uring_sock_t *s, int status, zbuf_t *unsent, void *arg)
{
    struct vxu_req *r = arg;
    size_t left = zbuf_length(unsent);
    if (status == -EAGAIN && r->nonblock && left < r->total && !r->dgram) {
        /* Part went out: the rest must follow (a zbuf is sent whole), now
         * waiting for room; the caller gives up after 30 s. */
        if (submit_send(s, r, unsent, r->flags & ~MSG_DONTWAIT) == 0)
            return;
    }
    r->back = unsent;
    if (status == 0)
        answer(r, (ssize_t)r->total);
    else if (status == -EAGAIN && left == r->total)
        answer(r, -EWOULDBLOCK);
    else
        answer(r, status);
}

static void recv_done(struct zbuf_uring_sock *s, ssize_t n, zbuf_t *z, const zbuf_uring_rx_t *rx,
                      void *arg)
{
    (void)s;
    struct vxu_req *r = arg;
    if (rx->from != NULL && rx->fromlen <= sizeof r->from) {
        memcpy(&r->from, rx->from, rx->fromlen);
        r->fromlen = rx->fromlen;
    }
    r->back = z;
    /* The ring ran dry, or the socket is going: the layer does it itself. */
    answer(r, n == -ENOBUFS || n == -ECANCELED ? -ENOSYS : n);
}

static void serve(struct vxu_req *r)
{
    zbuf_uring_sock_t *s = vxu.stopping ? NULL : sock_for(r->fd);
    int rc = -ENOSYS;
    if (s != NULL && r->kind == VXU_SEND) {
        zbuf_t *z = r->z;
        r->z = NULL;
        rc = submit_send(s, r, z, r->flags | (r->nonblock ? MSG_DONTWAIT : 0));
        if (rc < 0)
            r->z = z;
    } else if (s != NULL) {
        int f = r->flags | (r->nonblock ? MSG_DONTWAIT : 0);
        rc = zbuf__uring_recv_once(s, vxu.br, r->max, f, recv_done, r);
    }
    if (rc < 0)
        answer(r, rc == -EBADF || rc == -EINVAL ? -ENOSYS : rc);
}

/* Close every socket and fail what waits (engine thread, at shutdown). */
static void wind_down(void)
{
    for (size_t i = 0; i < vxu.ntab; i++) {
        if (vxu.tab[i].s != NULL)
            zbuf_uring_sock_close(vxu.tab[i].s, vxu.stop_timeout, NULL, NULL);
        vxu.tab[i].s = NULL;
    }
}

struct vxu_start {
    int rc;
    bool done;
};

static void *engine_main(void *arg)
{
    struct vxu_start *start = arg;
    zbuf_uring_opts_t o = vxu.opts;
    o.flags |= ZBUF_URING_NO_FALLBACK | ZBUF_URING_QUIET;
    int rc = zbuf_uring_create(&o, &vxu.u);
    if (rc == 0 && (rc = zbuf_pool_create(VXU_POOL_BUF_SIZE, VXU_POOL_BUFS, &vxu.pool)) == 0 &&
        (rc = zbuf_uring_bufring_create(vxu.u, vxu.pool, 0, &vxu.br)) < 0) {
        zbuf_pool_delete(vxu.pool);
        vxu.pool = NULL;
    }
    if (rc < 0 && vxu.u != NULL) {
        zbuf_uring_destroy(vxu.u, 0);
        vxu.u = NULL;
    }
    pthread_mutex_lock(&vxu.lock);
    start->rc = rc;
    start->done = true;
    pthread_cond_broadcast(&vxu.cond);
    pthread_mutex_unlock(&vxu.lock);
    if (rc < 0)
        return NULL;
    bool wound = false;
    for (;;) {
        pthread_mutex_lock(&vxu.lock);
        struct vxu_req *list = vxu.head;
        vxu.head = vxu.tail = NULL;
        bool stopping = vxu.stopping;
        pthread_mutex_unlock(&vxu.lock);
        while (list != NULL) {
            struct vxu_req *r = list;
            list = r->next;
            serve(r);
        }
        if (stopping && !wound) {
            wind_down();
            wound = true;
        }
        if (wound) {
            pthread_mutex_lock(&vxu.lock);
            bool idle = vxu.active == 0 && vxu.head == NULL;
            pthread_mutex_unlock(&vxu.lock);
            if (idle)
                break;
        }
        zbuf_uring_run(vxu.u, wound ? 50 : -1);
    }
    zbuf_uring_bufring_delete(vxu.br); /* only when no socket uses it; destroy handles the rest */
    int res = zbuf_uring_destroy(vxu.u, vxu.stop_timeout);
    zbuf_pool_delete(vxu.pool);
    vxu.u = NULL;
    vxu.br = NULL;
    vxu.pool = NULL;
    free(vxu.tab);
    vxu.tab = NULL;
    vxu.ntab = 0;
    pthread_mutex_lock(&vxu.lock);
    vxu.stop_result = res;
    pthread_mutex_unlock(&vxu.lock);
    return NULL;
}

/* ---------------------------------------------------------- caller side */

/* Hand r to the engine and wait for the answer (up to VXU_STALL_MS once a
 * send has begun; a receive waits as long as a blocking recv() would). */
static ssize_t call(struct vxu_req *r)
{
    pthread_mutex_lock(&vxu.lock);
    if (vxu.state != 2 || vxu.stopping) {
        pthread_mutex_unlock(&vxu.lock);
        return -ENOSYS;
    }
    r->refs = 2;
    vxu.active++;
    if (vxu.tail != NULL)
        vxu.tail->next = r;
    else
        vxu.head = r;
    vxu.tail = r;
    /* Under the lock: the engine thread cannot have finished its engine
     * (it looks at the queue under the lock before it does). */
    zbuf_uring_wake(vxu.u);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += VXU_STALL_MS / 1000;
    while (!r->done) {
        if (r->kind == VXU_RECV) {
            pthread_cond_wait(&vxu.cond, &vxu.lock);
        } else if (pthread_cond_timedwait(&vxu.cond, &vxu.lock, &until) == ETIMEDOUT) {
            break;
        }
    }
    ssize_t res = r->done ? r->result : -ETIMEDOUT;
    pthread_mutex_unlock(&vxu.lock);
    return res;
}

static bool fd_nonblocking(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    return fl >= 0 && (fl & O_NONBLOCK);
}

static ssize_t vxu_send(void *ctx, int fd, zbuf_t *z, int flags, bool dgram,
                        const struct sockaddr *to, socklen_t tolen)
{
    (void)ctx;
    if (tolen > sizeof(struct sockaddr_storage))
        return -ENOSYS;
    struct vxu_req *r = calloc(1, sizeof *r);
    if (r == NULL)
        return -ENOSYS;
    r->kind = VXU_SEND;
    r->fd = fd;
    r->flags = flags & ~MSG_DONTWAIT;
    r->nonblock = (flags & MSG_DONTWAIT) || fd_nonblocking(fd);
    r->dgram = dgram;
    r->total = zbuf_length(z);
    if (to != NULL && tolen > 0) {
        memcpy(&r->to, to, tolen);
        r->tolen = tolen;
    }
    /* Move the bytes into a zbuf of the engine's; z stays, empty. */
    if (zbuf_split(z, 0, &r->z) < 0) {
        free(r);
        return -ENOSYS;
    }
    ssize_t res = call(r);
    pthread_mutex_lock(&vxu.lock);
    zbuf_t *back = NULL;
    if (r->done) {
        back = r->back;
        r->back = NULL;
    } else if (res == -ENOSYS) {
        back = r->z; /* never handed over */
        r->z = NULL;
        r->refs = 1;
    }
    req_unref_locked(r);
    pthread_mutex_unlock(&vxu.lock);
    if (back != NULL && zbuf_append(z, back) < 0)
        zbuf_delete(back); /* ENOMEM: the layer deletes z anyway */
    return res;
}

static ssize_t vxu_recv(void *ctx, int fd, size_t max, int flags, bool dgram, zbuf_t **out,
                        struct sockaddr_storage *from, socklen_t *fromlen)
{
    (void)ctx;
    /* A datagram longer than a ring buffer would be cut: the layer's own
     * path takes it whole. */
    if (max == 0 || (dgram && max > VXU_POOL_BUF_SIZE))
        return -ENOSYS;
    struct vxu_req *r = calloc(1, sizeof *r);
    if (r == NULL)
        return -ENOSYS;
    r->kind = VXU_RECV;
    r->fd = fd;
    r->flags = flags & ~MSG_DONTWAIT;
    r->nonblock = (flags & MSG_DONTWAIT) || fd_nonblocking(fd);
    r->dgram = dgram;
    r->max = max;
    ssize_t res = call(r);
    pthread_mutex_lock(&vxu.lock);
    if (res == -ENOSYS && !r->done)
        r->refs = 1;
    if (r->done) {
        *out = r->back;
        r->back = NULL;
        if (from != NULL && fromlen != NULL) {
            *from = r->from;
            *fromlen = r->fromlen;
        }
    }
    req_unref_locked(r);
    pthread_mutex_unlock(&vxu.lock);
    if (res == -EAGAIN)
        res = -EWOULDBLOCK;
    return res;
}

/* ----------------------------------------------------------------- API */

int zbuf_uring_vx_init(const zbuf_uring_opts_t *o)
{
    zbuf_uring_opts_t opts;
    if (o != NULL)
        opts = *o;
    else
        zbuf_uring_opts_init(&opts);
    pthread_mutex_lock(&vxu.lock);
    if (vxu.state == 2 || vxu.state == 3) {
        int cur = vxu.state == 2 ? ZBUF_URING_BACKEND_IO_URING : ZBUF_URING_BACKEND_EPOLL;
        pthread_mutex_unlock(&vxu.lock);
        return cur;
    }
    if (vxu.state != 0) {
        pthread_mutex_unlock(&vxu.lock);
        return -EBUSY;
    }
    vxu.state = 1;
    vxu.opts = opts;
    vxu.stopping = false;
    pthread_mutex_unlock(&vxu.lock);

    int rc = zbufSockLibInit() == OK ? 0 : -errno;
    struct vxu_start start = { 0 };
    zbuf_uring_probe_t p;
    zbuf_uring_probe(&p);
    if (rc == 0 && !(opts.flags & ZBUF_URING_FORCE_EPOLL) && p.usable) {
        rc = pthread_create(&vxu.thread, NULL, engine_main, &start);
        if (rc != 0) {
            rc = -rc;
        } else {
            pthread_setname_np(vxu.thread, "zbuf-uring-vx");
            pthread_mutex_lock(&vxu.lock);
            while (!start.done)
                pthread_cond_wait(&vxu.cond, &vxu.lock);
            pthread_mutex_unlock(&vxu.lock);
            if (start.rc < 0)
                pthread_join(vxu.thread, NULL);
            rc = start.rc;
        }
    } else if (rc == 0) {
        rc = p.usable ? -ECANCELED : p.error;
    }
    int result;
    if (rc == 0) {
        static const zbuf_sock_vx_engine_t eng = { .send = vxu_send, .recv = vxu_recv };
        pthread_mutex_lock(&vxu.lock);
        vxu.state = 2;
        pthread_mutex_unlock(&vxu.lock);
        zbuf_sock_vx_set_engine(&eng);
        result = ZBUF_URING_BACKEND_IO_URING;
    } else if (rc == -ENOMEM || rc == -EAGAIN) {
        pthread_mutex_lock(&vxu.lock);
        vxu.state = 0;
        pthread_mutex_unlock(&vxu.lock);
        return rc;
    } else {
        if (!(opts.flags & (ZBUF_URING_QUIET | ZBUF_URING_FORCE_EPOLL)))
            zbuf__uring_log(&opts, "zbuf-uring: io_uring unavailable (%s); zbufSockLib stays on "
                            "the epoll path (zbuf-sock)", p.usable ? strerror(-rc) : p.reason);
        pthread_mutex_lock(&vxu.lock);
        vxu.state = 3;
        pthread_mutex_unlock(&vxu.lock);
        result = ZBUF_URING_BACKEND_EPOLL;
    }
    return result;
}

int zbuf_uring_vx_shutdown(int timeout_ms)
{
    pthread_mutex_lock(&vxu.lock);
    int state = vxu.state;
    if (state != 2) {
        if (state == 3)
            vxu.state = 0;
        pthread_mutex_unlock(&vxu.lock);
        return 0;
    }
    vxu.stopping = true;
    vxu.stop_timeout = timeout_ms;
    zbuf_uring_wake(vxu.u); /* under the lock, as in call() */
    pthread_mutex_unlock(&vxu.lock);
    pthread_join(vxu.thread, NULL);
    zbuf_sock_vx_set_engine(NULL); /* waits for routines still inside vxu_send/vxu_recv */
    pthread_mutex_lock(&vxu.lock);
    vxu.state = 0;
    int res = vxu.stop_result;
    pthread_mutex_unlock(&vxu.lock);
    return res;
}
