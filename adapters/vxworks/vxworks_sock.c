/* SPDX-License-Identifier: MIT */
/*
 * The VxWorks zbufSockLib routines over the socket adapter.
 *
 * Small sends go straight through zbuf_sock_send_fd() (one gather write, no
 * state).  Sends of at least zerocopy_min bytes go through a socket handle
 * per descriptor, kept in a table indexed by descriptor number, opened with
 * ZBUF_SOCK_HOLD_FD | ZBUF_SOCK_THREAD so that completions (and the free
 * routines) are driven by the completion thread, and so that a program that
 * close()s a descriptor right after sending does not lose them.
 *
 * The program closes descriptors behind our back and the kernel reuses the
 * numbers, so a table entry remembers the identity (device, inode) of the
 * socket it was made for and is checked before each use; an entry whose
 * socket is gone becomes a *zombie*: it forgets the number (its duplicate
 * keeps the old socket alive while sends are outstanding) and is closed once
 * nothing is outstanding.
 *
 * Another engine (zbuf-uring's) may take the sends and receives over
 * (zbuf_sock_vx_set_engine()); a read lock held across each call lets the
 * engine be swapped only when no routine is inside it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <zbuf/vxworks_sock.h>

#include "fdtab.h"


/* How long a partly sent zbuf may wait for the rest to be accepted. */
#define VX_STALL_MS 30000
/* The layer's receive pool: buffers and their size. */
#define VX_POOL_BUFS 512
#define VX_POOL_BUF_SIZE 16384

struct vx_entry {
    zbuf_sock_t *s;
    dev_t dev;
    ino_t ino;
};

static struct {
    pthread_mutex_t lock;
    bool ready;
    zbuf_sock_opts_t opts;
    struct vx_entry *tab;   /* indexed by descriptor */
    size_t ntab;
    zbuf_sock_t **zombies;  /* handles whose descriptor the program closed */
    size_t nzombies, capzombies;
    zbuf_pool_t *pool;      /* receive buffers */
} vx = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void default_opts(zbuf_sock_opts_t *o)
{
    zbuf_sock_opts_init(o);
    o->flags = ZBUF_SOCK_ZEROCOPY | ZBUF_SOCK_THREAD | ZBUF_SOCK_HOLD_FD;
}

/* The engine the routines run on, if any (zbuf_sock_vx_set_engine()). */
static pthread_rwlock_t engine_lock = PTHREAD_RWLOCK_INITIALIZER;
static zbuf_sock_vx_engine_t engine;
static bool engine_on;

int zbuf_sock_vx_set_engine(const zbuf_sock_vx_engine_t *e)
{
    if (e != NULL && (e->send == NULL || e->recv == NULL))
        return -EINVAL;
    pthread_rwlock_wrlock(&engine_lock);
    engine_on = e != NULL;
    if (e != NULL)
        engine = *e;
    pthread_rwlock_unlock(&engine_lock);
    return 0;
}

/* Under vx.lock. */
static int init_locked(void)
{
    if (vx.ready)
        return 0;
    default_opts(&vx.opts);
    int e = zbuf_pool_create(VX_POOL_BUF_SIZE, VX_POOL_BUFS, &vx.pool);
    if (e != 0)
        return e;
    vx.ready = true;
    return 0;
}

static int ensure_init(void)
{
    pthread_mutex_lock(&vx.lock);
    int e = init_locked();
    pthread_mutex_unlock(&vx.lock);
    return e;
}

STATUS zbufSockLibInit(void)
{
    int e = ensure_init();
    if (e != 0) {
        errno = -e;
        return ERROR;
    }
    return OK;
}

int zbuf_sock_vx_configure(const zbuf_sock_opts_t *o)
{
    zbuf_sock_opts_t n;
    if (o == NULL)
        default_opts(&n);
    else
        n = *o;
    if (n.max_outstanding == 0 || n.copied_limit == 0 || n.zerocopy_min == 0)
        return -EINVAL;
    n.flags |= ZBUF_SOCK_HOLD_FD | ZBUF_SOCK_KEEP_FD;
    pthread_mutex_lock(&vx.lock);
    int e = init_locked();
    if (e == 0)
        vx.opts = n;
    pthread_mutex_unlock(&vx.lock);
    return e;
}

/* Close zombies with nothing outstanding.  Under vx.lock. */
static void sweep_zombies_locked(void)
{
    size_t keep = 0;
    for (size_t i = 0; i < vx.nzombies; i++) {
        zbuf_sock_t *z = vx.zombies[i];
        zbuf_sock_stats_t st;
        zbuf_sock_complete(z);
        zbuf_sock_get_stats(z, &st);
        if (st.outstanding == 0)
            zbuf_sock_close(z, 0);
        else
            vx.zombies[keep++] = z;
    }
    vx.nzombies = keep;
}

/* Under vx.lock.  On failure the handle is closed at once (it may abort a
 * connection whose program descriptor is gone, which is the best left). */
static void make_zombie_locked(zbuf_sock_t *s)
{
    zbuf_sock_forget_fd(s);
    if (vx.nzombies == vx.capzombies) {
        size_t cap = vx.capzombies ? vx.capzombies * 2 : 8;
        zbuf_sock_t **n = realloc(vx.zombies, cap * sizeof *n);
        if (n == NULL) {
            zbuf_sock_close(s, 1000);
            return;
        }
        vx.zombies = n;
        vx.capzombies = cap;
    }
    vx.zombies[vx.nzombies++] = s;
}

/* Whether a send of `bytes` may use zero copy at all. */
static bool worth_a_handle(size_t bytes)
{
    pthread_mutex_lock(&vx.lock);
    bool yes = (vx.opts.flags & ZBUF_SOCK_ZEROCOPY) && bytes >= vx.opts.zerocopy_min;
    pthread_mutex_unlock(&vx.lock);
    return yes;
}

/*
 * The handle for descriptor fd, made on first use; NULL when anything fails
 * (the caller then sends without a handle).
 */
static zbuf_sock_t *handle_for(int fd)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode))
        return NULL;
    pthread_mutex_lock(&vx.lock);
    zbuf_sock_t *h = NULL;
    if (init_locked() != 0)
        goto out;
    if (vx.nzombies > 0)
        sweep_zombies_locked();
    if ((size_t)fd >= vx.ntab) {
        struct vx_entry *t = zbuf_vx__fdtab_grow(vx.tab, &vx.ntab, sizeof *t, fd);
        if (t == NULL)
            goto out;
        vx.tab = t;
    }
    struct vx_entry *e = &vx.tab[fd];
    if (e->s != NULL && (e->dev != st.st_dev || e->ino != st.st_ino)) {
        make_zombie_locked(e->s); /* the program closed it; fd is a new socket */
        e->s = NULL;
    }
    if (e->s == NULL) {
        zbuf_sock_opts_t o = vx.opts;
        if (zbuf_sock_open(fd, &o, &e->s) != 0) {
            e->s = NULL;
            goto out;
        }
        e->dev = st.st_dev;
        e->ino = st.st_ino;
    }
    h = e->s;
out:
    pthread_mutex_unlock(&vx.lock);
    return h;
}

/* Wait until fd accepts more, or VX_STALL_MS pass.  0 or -ETIMEDOUT. */
static int wait_writable(int fd)
{
    struct pollfd p = { .fd = fd, .events = POLLOUT };
    int r;
    do
        r = poll(&p, 1, VX_STALL_MS);
    while (r < 0 && errno == EINTR);
    return r > 0 ? 0 : -ETIMEDOUT;
}

/*
 * Send all of z (stream) or z as one datagram.  Returns the byte count, or
 * -EWOULDBLOCK when nothing was sent on a non-blocking socket (z untouched),
 * or another negative errno (z holds what was not sent).
 */
static ssize_t send_plain(int fd, zbuf_t *z, int flags, bool dgram, const struct sockaddr *to,
                          socklen_t tolen);

static ssize_t send_whole(int fd, zbuf_t *z, int flags, bool dgram, const struct sockaddr *to,
                          socklen_t tolen)
{
    ssize_t r = -ENOSYS;
    pthread_rwlock_rdlock(&engine_lock);
    if (engine_on)
        r = engine.send(engine.ctx, fd, z, flags, dgram, to, tolen);
    pthread_rwlock_unlock(&engine_lock);
    return r != -ENOSYS ? r : send_plain(fd, z, flags, dgram, to, tolen);
}

static ssize_t send_plain(int fd, zbuf_t *z, int flags, bool dgram, const struct sockaddr *to,
                          socklen_t tolen)
{
    size_t total = zbuf_length(z);
    zbuf_sock_t *h = NULL;
    if (worth_a_handle(total))
        h = handle_for(fd);
    if (dgram) {
        ssize_t r = h ? zbuf_sock_sendto(h, z, flags, to, tolen)
                      : zbuf_sock_sendto_fd(fd, z, flags, to, tolen);
        if (r == -EBADF && h != NULL) /* a zombie: send without it */
            r = zbuf_sock_sendto_fd(fd, z, flags, to, tolen);
        return r == -EAGAIN ? -EWOULDBLOCK : r;
    }
    for (;;) {
        ssize_t r = h ? zbuf_sock_send(h, z, flags) : zbuf_sock_send_fd(fd, z, flags);
        if (r == -EBADF && h != NULL) {
            h = NULL;
            continue;
        }
        if (r == -EAGAIN) {
            if (zbuf_length(z) == total)
                return -EWOULDBLOCK;
            /* Part went out: the rest must follow, or the stream would
             * lose the message boundary the program relies on. */
            if (wait_writable(fd) != 0)
                return -ETIMEDOUT;
            continue;
        }
        if (r < 0)
            return r;
        if (zbuf_length(z) == 0)
            return (ssize_t)total;
    }
}

/*
 * The zbufSockSend() ownership rule, for both kinds: the zbuf is consumed,
 * except when *kept is set (invalid arguments, nothing sent on a
 * non-blocking socket, or the layer could not start).
 */
static int send_and_consume(int s, ZBUF_ID zbufId, int flags, bool dgram, struct sockaddr *to,
                            int tolen, bool *kept)
{
    *kept = true;
    if (!zbuf_valid(zbufId) ||
        (to == NULL && tolen > 0) || tolen < 0) {
        errno = EINVAL;
        return ERROR;
    }
    if (zbuf_length(zbufId) > INT_MAX) {
        errno = EOVERFLOW;
        return ERROR;
    }
    int e = ensure_init();
    if (e != 0) {
        errno = -e;
        return ERROR;
    }
    ssize_t r = send_whole(s, zbufId, flags, dgram, to, (socklen_t)tolen);
    if (r == -EWOULDBLOCK) {
        errno = EWOULDBLOCK; /* the caller keeps the zbuf */
        return ERROR;
    }
    *kept = false;
    zbuf_delete(zbufId); /* the library's now, sent or not */
    if (r < 0) {
        errno = (int)-r;
        return ERROR;
    }
    return (int)r;
}

int zbufSockSend(int s, ZBUF_ID zbufId, int zbufLen, int flags)
{
    (void)zbufLen; /* a hint only: the zbuf knows its length */
    bool kept;
    return send_and_consume(s, zbufId, flags, false, NULL, 0, &kept);
}

int zbufSockSendto(int s, ZBUF_ID zbufId, int zbufLen, int flags, struct sockaddr *to, int tolen)
{
    (void)zbufLen;
    bool kept;
    return send_and_consume(s, zbufId, flags, true, to, to ? tolen : 0, &kept);
}

/*
 * zbufSockBufSend(): the caller's buffer is enrolled with a thunk, so that
 * a send the caller keeps (EWOULDBLOCK) can drop the zbuf without calling
 * the free routine.
 */
struct vx_thunk {
    VOIDFUNCPTR rtn;
    intptr_t arg;
    bool cancelled;
};

typedef void (*vx_free_fn)(caddr_t, intptr_t);

static void vx_thunk_release(void *data, size_t size, void *arg)
{
    (void)size;
    struct vx_thunk *t = arg;
    if (!t->cancelled && t->rtn != NULL)
        ((vx_free_fn)(void (*)(void))t->rtn)((caddr_t)data, t->arg);
    free(t);
}

static int buf_send(int s, char *buf, int bufLen, VOIDFUNCPTR freeRtn, intptr_t freeArg,
                    int flags, bool dgram, struct sockaddr *to, int tolen)
{
    if (buf == NULL || bufLen <= 0 || (to == NULL && tolen > 0) || tolen < 0) {
        errno = EINVAL;
        return ERROR;
    }
    struct vx_thunk *t = malloc(sizeof *t);
    zbuf_t *z = NULL;
    if (t == NULL || zbuf_create(&z) != 0) {
        free(t);
        errno = ENOMEM;
        return ERROR;
    }
    *t = (struct vx_thunk){ .rtn = freeRtn, .arg = freeArg };
    if (zbuf_append_buf(z, buf, (size_t)bufLen, vx_thunk_release, t) != 0) {
        free(t);
        zbuf_delete(z);
        errno = ENOMEM;
        return ERROR;
    }
    bool kept;
    int r = send_and_consume(s, z, flags, dgram, to, tolen, &kept);
    if (kept) {
        int e = errno;
        t->cancelled = true; /* the caller keeps buf: no free routine */
        zbuf_delete(z);
        errno = e;
    }
    return r;
}

int zbufSockBufSend(int s, char *buf, int bufLen, VOIDFUNCPTR freeRtn, intptr_t freeArg,
                    int flags)
{
    return buf_send(s, buf, bufLen, freeRtn, freeArg, flags, false, NULL, 0);
}

int zbufSockBufSendto(int s, char *buf, int bufLen, VOIDFUNCPTR freeRtn, intptr_t freeArg,
                      int flags, struct sockaddr *to, int tolen)
{
    return buf_send(s, buf, bufLen, freeRtn, freeArg, flags, true, to, to ? tolen : 0);
}

/*
 * A receive through the engine.  For a stream, *z is the zbuf the caller
 * made: on success the engine's zbuf replaces it.  For a datagram, m gets
 * the zbuf and the sender.  -ENOSYS: no engine, or it declined.
 */
static ssize_t engine_recv(int fd, size_t max, int flags, bool dgram, zbuf_t **z,
                           zbuf_sock_msg_t *m)
{
    ssize_t r = -ENOSYS;
    zbuf_t *got = NULL;
    struct sockaddr_storage from = { 0 };
    socklen_t fromlen = 0;
    pthread_rwlock_rdlock(&engine_lock);
    if (engine_on)
        r = engine.recv(engine.ctx, fd, max, flags, dgram, &got, &from, &fromlen);
    pthread_rwlock_unlock(&engine_lock);
    if (r < 0 || got == NULL)
        return r;
    if (dgram) {
        m->z = got;
        m->addr = from;
        m->addrlen = fromlen;
        m->flags = 0;
    } else {
        zbuf_delete(*z);
        *z = got;
    }
    return r;
}

ZBUF_ID zbufSockRecv(int s, int flags, int *pLen)
{
    if (pLen == NULL || *pLen <= 0) {
        errno = EINVAL;
        return NULL;
    }
    int e = ensure_init();
    zbuf_t *z = NULL;
    if (e == 0)
        e = zbuf_create(&z);
    if (e != 0) {
        errno = -e;
        return NULL;
    }
    ssize_t r = engine_recv(s, (size_t)*pLen, flags, false, &z, NULL);
    if (r == -ENOSYS)
        r = zbuf_sock_recv(s, vx.pool, (size_t)*pLen, flags, z);
    if (r == -ENOBUFS) /* the pool is lent out: library buffers then */
        r = zbuf_sock_recv(s, NULL, (size_t)*pLen, flags, z);
    if (r <= 0) {
        zbuf_delete(z);
        *pLen = 0;
        errno = r == 0 ? 0 : (r == -EAGAIN ? EWOULDBLOCK : (int)-r);
        return NULL;
    }
    *pLen = (int)r;
    return z;
}

ZBUF_ID zbufSockRecvfrom(int s, int flags, int *pLen, struct sockaddr *from, int *pFromLen)
{
    if (pLen == NULL || *pLen <= 0 || (from != NULL && (pFromLen == NULL || *pFromLen < 0))) {
        errno = EINVAL;
        return NULL;
    }
    int e = ensure_init();
    if (e != 0) {
        errno = -e;
        return NULL;
    }
    zbuf_sock_msg_t m = { .z = NULL };
    ssize_t r = engine_recv(s, (size_t)*pLen, flags, true, &m.z, &m);
    if (r == -ENOSYS)
        r = zbuf_sock_recvfrom(s, vx.pool, (size_t)*pLen, flags, &m);
    if (r == -ENOBUFS || r == -EINVAL)
        r = zbuf_sock_recvfrom(s, NULL, (size_t)*pLen, flags, &m);
    if (r < 0) {
        *pLen = 0;
        errno = r == -EAGAIN ? EWOULDBLOCK : (int)-r;
        return NULL;
    }
    if (from != NULL) {
        size_t n = m.addrlen < (socklen_t)*pFromLen ? m.addrlen : (size_t)*pFromLen;
        memcpy(from, &m.addr, n);
        *pFromLen = (int)m.addrlen;
    }
    *pLen = (int)r;
    return m.z;
}
