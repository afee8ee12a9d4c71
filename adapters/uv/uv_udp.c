/* SPDX-License-Identifier: MIT */
/*
 * UDP: a zbuf goes out as one datagram through a gathering sendmsg(), and
 * datagrams come in as zbufs whose single segment lies in a pool buffer.
 *
 * Receiving lends libuv a whole pool buffer per datagram (a datagram does
 * not fit in "what is left" of a buffer the way stream bytes do: the kernel
 * would truncate it).  With UV_UDP_RECVMMSG libuv cuts
 * one big buffer into several datagrams (UV_UDP_MMSG_CHUNK) and says when it
 * is done with it (UV_UDP_MMSG_FREE); each chunk becomes a segment at its
 * offset in that buffer.  When the socket is drained the buffer libuv did
 * not use goes back to the pool: an idle handle holds none.  Pool
 * exhaustion pauses receiving as for streams,
 * in the same registry of paused readers, until the pool's refill
 * notification resumes it (see uv_read.c).
 */
#include <errno.h>
#include <stdlib.h>

#include "uv_internal.h"

enum {
    INITED = 1u << 0,
    RECEIVING = 1u << 1,
    PAUSED = 1u << 2,
    WAIT = 1u << 3, /* wait_ is set up (its async must be closed) */
    CLOSING = 1u << 4,
};

/* ----------------------------------------------------------------- send */

struct sreq {
    zbuf_t *z;
    zbuf_uv_udp_send_cb cb;
    void *arg;
    uv_udp_send_t req;
};

static void on_send(uv_udp_send_t *req, int status)
{
    struct sreq *s = ZBUF_UV__CONTAINER_OF(req, struct sreq, req);
    zbuf_uv_udp_send_cb cb = s->cb;
    void *arg = s->arg;
    uv_udp_t *udp = req->handle;
    zbuf_delete(s->z);
    free(s);
    if (cb)
        cb(udp, status, arg);
}

/* Describe z as at most ZBUF_UV_BUFS_PER_WRITE buffers; *bufs is the stack
 * array or a new block the caller frees. */
static int describe(zbuf_t *z, uv_buf_t *stack, size_t nstack, uv_buf_t **bufs)
{
    size_t nsegs = zbuf_seg_count(z), bytes = 0;
    if (nsegs > ZBUF_UV_BUFS_PER_WRITE)
        return -EMSGSIZE;
    if (zbuf_uv__has_file(z))
        return -ENOTSUP;
    *bufs = stack;
    if (nsegs == 0) {
        stack[0] = uv_buf_init(NULL, 0); /* an empty datagram */
        return 1;
    }
    if (nsegs > nstack && (*bufs = malloc(nsegs * sizeof(uv_buf_t))) == NULL)
        return -ENOMEM;
    int n = zbuf_iovec(z, 0, ZBUF_TO_END, zbuf_uv__iov(*bufs), (int)nsegs, &bytes);
    if (n < 0 && *bufs != stack)
        free(*bufs);
    return n;
}

int zbuf_uv_udp_send(uv_udp_t *udp, zbuf_t *z, const struct sockaddr *addr,
                     zbuf_uv_udp_send_cb cb, void *arg)
{
    if (udp == NULL || !zbuf_valid(z))
        return -EINVAL;
    uv_buf_t stack[16], *bufs;
    struct sreq *s = malloc(sizeof(*s));
    if (s == NULL)
        return -ENOMEM;
    int n = describe(z, stack, 16, &bufs);
    if (n < 0) {
        free(s);
        return n;
    }
    *s = (struct sreq){.z = z, .cb = cb, .arg = arg};
    int rc = uv_udp_send(&s->req, udp, bufs, (unsigned)n, addr, on_send);
    if (bufs != stack)
        free(bufs);
    if (rc < 0)
        free(s);
    return rc;
}

ssize_t zbuf_uv_udp_try_send(uv_udp_t *udp, zbuf_t *z, const struct sockaddr *addr)
{
    if (udp == NULL || !zbuf_valid(z))
        return -EINVAL;
    uv_buf_t stack[16], *bufs;
    int n = describe(z, stack, 16, &bufs);
    if (n < 0)
        return n;
    int rc = uv_udp_try_send(udp, bufs, (unsigned)n, addr);
    if (bufs != stack)
        free(bufs);
    if (rc >= 0)
        zbuf_delete(z);
    return rc;
}

/* -------------------------------------------------------------- receive */

static void drop_cur(zbuf_uv_udp_t *zu)
{
    zbuf_buf_unref(zu->cur_);
    zu->cur_ = NULL;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    zbuf_uv_udp_t *zu = ZBUF_UV__CONTAINER_OF(h, zbuf_uv_udp_t, handle);
    if (zu->cur_ == NULL && zbuf_pool_get(zu->pool_, &zu->cur_) != 0) {
        zu->cur_ = NULL;
        *buf = uv_buf_init(NULL, 0); /* libuv answers with UV_ENOBUFS */
        return;
    }
    *buf = zbuf_uv__lend(zbuf_buf_data(zu->cur_), zbuf_buf_size(zu->cur_));
}

static void on_recv(uv_udp_t *u, ssize_t nread, const uv_buf_t *buf,
                    const struct sockaddr *addr, unsigned flags);

/* A buffer came back for the paused handle: b takes the next datagram. */
static void resume_receiving(zbuf_uv__wait_t *w, zbuf_buf_t *b)
{
    zbuf_uv_udp_t *zu = ZBUF_UV__CONTAINER_OF(w, zbuf_uv_udp_t, wait_);
    zu->flags_ &= ~PAUSED;
    drop_cur(zu); /* none: the pause came from a failed zbuf_pool_get() */
    zu->cur_ = b; /* never NULL: a UDP handle has no quota to wait on */
    int rc = uv_udp_recv_start(&zu->udp, on_alloc, on_recv);
    if (rc < 0) {
        zbuf_uv_udp_recv_cb cb = zu->recv_cb_;
        zbuf_uv_udp_recv_stop(zu);
        cb(zu, rc, NULL, NULL, 0);
    }
}

static int pause_receiving(zbuf_uv_udp_t *zu)
{
    int rc;
    if (!(zu->flags_ & WAIT)) {
        if ((rc = zbuf_uv__wait_init(&zu->wait_, zu->handle.loop, resume_receiving, NULL)) < 0)
            return rc;
        zu->flags_ |= WAIT;
    }
    uv_udp_recv_stop(&zu->udp);
    if ((rc = zbuf_uv__wait_start(&zu->wait_, zu->pool_)) < 0)
        return rc;
    zu->flags_ |= PAUSED;
    return 0;
}

static void on_recv(uv_udp_t *u, ssize_t nread, const uv_buf_t *buf,
                    const struct sockaddr *addr, unsigned flags)
{
    zbuf_uv_udp_t *zu = ZBUF_UV__CONTAINER_OF(u, zbuf_uv_udp_t, udp);
    bool chunk = false;
#ifdef UV_UDP_MMSG_CHUNK
    chunk = (flags & UV_UDP_MMSG_CHUNK) != 0;
#endif
#ifdef UV_UDP_MMSG_FREE
    if (flags & UV_UDP_MMSG_FREE) {
        drop_cur(zu); /* libuv is done with the recvmmsg buffer */
        return;
    }
#endif
    if (nread == UV_ENOBUFS) {
        int rc = pause_receiving(zu);
        zbuf_uv_udp_recv_cb cb = zu->recv_cb_;
        if (rc < 0)
            zbuf_uv_udp_recv_stop(zu); /* could not wait: stop for good */
        cb(zu, rc < 0 ? rc : UV_ENOBUFS, NULL, NULL, 0);
        return;
    }
    if (nread < 0) {
        zu->recv_cb_(zu, nread, NULL, addr, flags);
        return;
    }
    if (nread == 0 && addr == NULL) {
        /* Nothing was waiting: the socket is drained.  The unused buffer
         * goes back, so that an idle handle holds none. */
        drop_cur(zu);
        return;
    }

    zbuf_t *z;
    if (zbuf_create(&z) != 0) {
        zu->recv_cb_(zu, -ENOMEM, NULL, addr, flags);
        return;
    }
    if (nread > 0) {
        size_t boff = (size_t)(buf->base - (char *)zbuf_buf_data(zu->cur_));
        if (zbuf_append_ref(z, zu->cur_, boff, (size_t)nread) != 0) {
            zbuf_delete(z);
            zu->recv_cb_(zu, -ENOMEM, NULL, addr, flags);
            return;
        }
    }
    if (!chunk && nread > 0)
        drop_cur(zu); /* the datagram's zbuf holds the buffer now */
    zu->recv_cb_(zu, nread, z, addr, flags);
}

int zbuf_uv_udp_init(zbuf_uv_udp_t *zu)
{
    if (zu == NULL || zu->handle.type != UV_UDP)
        return -EINVAL;
    zu->pool_ = NULL;
    zu->recv_cb_ = NULL;
    zu->cur_ = NULL;
    zu->flags_ = INITED;
    zu->closing_ = 0;
    zu->close_cb_ = NULL;
    return 0;
}

int zbuf_uv_udp_recv_start(zbuf_uv_udp_t *zu, zbuf_pool_t *pool, zbuf_uv_udp_recv_cb cb)
{
    if (zu == NULL || !(zu->flags_ & INITED) || (zu->flags_ & CLOSING) || pool == NULL ||
        cb == NULL)
        return -EINVAL;
    if (zu->flags_ & RECEIVING)
        return -EALREADY;
    zu->pool_ = pool;
    zu->recv_cb_ = cb;
    int rc = uv_udp_recv_start(&zu->udp, on_alloc, on_recv);
    if (rc < 0) {
        zu->recv_cb_ = NULL;
        return rc;
    }
    zu->flags_ |= RECEIVING;
    return 0;
}

int zbuf_uv_udp_recv_stop(zbuf_uv_udp_t *zu)
{
    if (zu == NULL || !(zu->flags_ & INITED))
        return -EINVAL;
    if (zu->flags_ & WAIT)
        zbuf_uv__wait_stop(&zu->wait_);
    if ((zu->flags_ & (RECEIVING | PAUSED)) == RECEIVING)
        uv_udp_recv_stop(&zu->udp);
    zu->flags_ &= ~(RECEIVING | PAUSED);
    zu->recv_cb_ = NULL;
    drop_cur(zu);
    return 0;
}

static void closed_one(zbuf_uv_udp_t *zu)
{
    if (--zu->closing_ == 0 && zu->close_cb_ != NULL)
        zu->close_cb_(&zu->handle);
}

static void on_close_udp(uv_handle_t *h)
{
    closed_one(ZBUF_UV__CONTAINER_OF(h, zbuf_uv_udp_t, handle));
}

static void on_close_wait(uv_handle_t *h)
{
    closed_one(ZBUF_UV__CONTAINER_OF(h, zbuf_uv_udp_t, wait_.async));
}

void zbuf_uv_udp_close(zbuf_uv_udp_t *zu, uv_close_cb cb)
{
    if (zu == NULL || !(zu->flags_ & INITED) || (zu->flags_ & CLOSING))
        return;
    zbuf_uv_udp_recv_stop(zu);
    zu->flags_ |= CLOSING;
    zu->close_cb_ = cb;
    zu->closing_ = 1;
    if (zu->flags_ & WAIT) {
        zu->closing_++;
        uv_close((uv_handle_t *)&zu->wait_.async, on_close_wait);
    }
    uv_close(&zu->handle, on_close_udp);
}
