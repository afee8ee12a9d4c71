/* SPDX-License-Identifier: MIT */
/*
 * Socket-like convenience layer over the TCP callback API.
 *
 * A socket owns its PCB until zbuf_ip_sock_close() (which hands the PCB to
 * the stack with zbuf_ip_tcp_close()) or until the PCB's error callback
 * (the PCB is gone then; the socket keeps the error for the caller).
 *
 *   rxq  received payload not yet taken: the driver's segments.  The window
 *        reopens only when zbuf_ip_sock_recv() takes bytes, so a slow reader
 *        slows the sender instead of filling memory.
 *   txq  bytes accepted by zbuf_ip_sock_send() that did not fit into the
 *        TCP send buffer yet; moved over on each sent callback.
 *
 * Closing a socket whose txq is not empty makes it an orphan: it leaves the
 * caller's hands but stays registered with the stack as a teardown hook
 * (zbuf_ip__teardown_add()), feeding txq into the
 * connection as acknowledgments make room; once txq is empty the PCB is
 * closed (FIN after the last byte) and the socket freed.  Bytes received
 * meanwhile are discarded and the window kept open.  A connection that fails
 * frees its orphan; so does zbuf_ip_stack_delete(), through the hook.
 */
#include <stddef.h>
#include <stdlib.h>

#include "stack_internal.h"

struct zbuf_ip_sock {
    zbuf_ip_stack_t *stack;
    zbuf_ip_tcp_t *pcb;        /* NULL once the connection failed */
    bool listener;
    bool connected, eof, shut;
    bool orphan;               /* closed by the caller, still draining txq */
    struct zbuf_ip__teardown teardown; /* registered while an orphan */
    int err;
    zbuf_t *rxq, *txq;
    struct zbuf_ip_sock **acq; /* listener: connections not yet accepted */
    unsigned nacq, backlog;
};

static void sock_free(zbuf_ip_sock_t *k)
{
    zbuf_delete(k->rxq);
    zbuf_delete(k->txq);
    free(k->acq);
    free(k);
}

static void orphan_free(zbuf_ip_sock_t *k)
{
    zbuf_ip__teardown_remove(&k->teardown);
    sock_free(k);
}

/* The stack is being deleted: it frees the PCB itself, without callbacks. */
static void orphan_teardown(struct zbuf_ip__teardown *t)
{
    sock_free((zbuf_ip_sock_t *)((char *)t - offsetof(zbuf_ip_sock_t, teardown)));
}

/* Move what fits from txq into the connection.  An orphan whose txq has
 * drained hands its PCB to the stack and is freed. */
static void push(zbuf_ip_sock_t *k)
{
    while (k->pcb && zbuf_length(k->txq) > 0) {
        size_t room = zbuf_ip_tcp_sndbuf(k->pcb);
        if (room == 0)
            return;
        size_t n = zbuf_length(k->txq);
        zbuf_t *part;
        if (n > room) {
            if (zbuf_split_head(k->txq, room, &part) != 0)
                return;
        } else {
            part = k->txq;
            if (zbuf_create(&k->txq) != 0) {
                k->txq = part; /* keep it and retry on the next sent callback */
                return;
            }
        }
        if (zbuf_ip_tcp_write(k->pcb, part) != 0) {
            zbuf_insert(k->txq, 0, part, NULL); /* cannot fail for lack of room: it came from there */
            return;
        }
    }
    if (k->orphan && zbuf_length(k->txq) == 0) {
        zbuf_ip_tcp_close(k->pcb);
        orphan_free(k);
    } else if (k->pcb && k->shut && zbuf_length(k->txq) == 0) {
        zbuf_ip_tcp_shutdown(k->pcb);
    }
}

static void on_recv(void *arg, zbuf_ip_tcp_t *pcb, zbuf_t *data)
{
    zbuf_ip_sock_t *k = arg;
    if (data == NULL) {
        k->eof = true;
        return;
    }
    if (k->orphan) { /* nobody will read it: drop it, keep the window open */
        size_t n = zbuf_length(data);
        zbuf_delete(data);
        zbuf_ip_tcp_recved(pcb, n);
        return;
    }
    zbuf_append(k->rxq, data);
}

static void on_sent(void *arg, zbuf_ip_tcp_t *pcb, size_t n)
{
    (void)pcb;
    (void)n;
    push(arg);
}

static void on_connected(void *arg, zbuf_ip_tcp_t *pcb)
{
    (void)pcb;
    zbuf_ip_sock_t *k = arg;
    k->connected = true;
    push(k);
}

static void on_error(void *arg, int err)
{
    zbuf_ip_sock_t *k = arg;
    if (k->orphan) {
        orphan_free(k); /* txq's buffers are released now */
        return;
    }
    k->pcb = NULL;
    k->err = err;
}

static const zbuf_ip_tcp_callbacks_t conn_cbs = {
    .connected = on_connected, .recv = on_recv, .sent = on_sent, .error = on_error};

static zbuf_ip_sock_t *sock_new(zbuf_ip_stack_t *s)
{
    zbuf_ip_sock_t *k = calloc(1, sizeof *k);
    if (k == NULL)
        return NULL;
    k->stack = s;
    if (zbuf_create(&k->rxq) != 0 || zbuf_create(&k->txq) != 0) {
        sock_free(k);
        return NULL;
    }
    return k;
}

static int on_accept(void *arg, zbuf_ip_tcp_t *l, zbuf_ip_tcp_t *c)
{
    (void)l;
    zbuf_ip_sock_t *lk = arg;
    if (lk->nacq >= lk->backlog)
        return -ENOBUFS;
    zbuf_ip_sock_t *k = sock_new(lk->stack);
    if (k == NULL)
        return -ENOMEM;
    k->pcb = c;
    k->connected = true;
    zbuf_ip_tcp_set_callbacks(c, &conn_cbs, k);
    lk->acq[lk->nacq++] = k;
    return 0;
}

int zbuf_ip_sock_connect(zbuf_ip_stack_t *s, uint32_t addr, uint16_t port, zbuf_ip_sock_t **out)
{
    if (s == NULL || out == NULL)
        return -EINVAL;
    zbuf_ip_sock_t *k = sock_new(s);
    if (k == NULL)
        return -ENOMEM;
    int rc = zbuf_ip_tcp_new(s, &k->pcb);
    if (rc == 0) {
        zbuf_ip_tcp_set_callbacks(k->pcb, &conn_cbs, k);
        rc = zbuf_ip_tcp_connect(k->pcb, addr, port);
        if (rc)
            zbuf_ip_tcp_abort(k->pcb);
    }
    if (rc) {
        sock_free(k);
        return rc;
    }
    *out = k;
    return 0;
}

int zbuf_ip_sock_listen(zbuf_ip_stack_t *s, uint32_t addr, uint16_t port, unsigned backlog,
                        zbuf_ip_sock_t **out)
{
    if (s == NULL || out == NULL)
        return -EINVAL;
    if (backlog < 1)
        backlog = 1;
    if (backlog > ZBUF_IP_TCP_BACKLOG_MAX)
        backlog = ZBUF_IP_TCP_BACKLOG_MAX;
    zbuf_ip_sock_t *k = sock_new(s);
    if (k == NULL)
        return -ENOMEM;
    k->listener = true;
    k->backlog = backlog;
    k->acq = calloc(backlog, sizeof *k->acq);
    int rc = k->acq ? zbuf_ip_tcp_new(s, &k->pcb) : -ENOMEM;
    if (rc == 0) {
        rc = zbuf_ip_tcp_bind(k->pcb, addr, port);
        if (rc == 0)
            rc = zbuf_ip_tcp_listen(k->pcb, backlog);
        if (rc)
            zbuf_ip_tcp_close(k->pcb);
    }
    if (rc) {
        sock_free(k);
        return rc;
    }
    zbuf_ip_tcp_callbacks_t cb = {.accept = on_accept};
    zbuf_ip_tcp_set_callbacks(k->pcb, &cb, k);
    *out = k;
    return 0;
}

int zbuf_ip_sock_accept(zbuf_ip_sock_t *l, zbuf_ip_sock_t **out)
{
    if (l == NULL || !l->listener || out == NULL)
        return -EINVAL;
    if (l->nacq == 0)
        return -EAGAIN;
    *out = l->acq[0];
    memmove(l->acq, l->acq + 1, (l->nacq - 1) * sizeof *l->acq);
    l->nacq--;
    return 0;
}

int zbuf_ip_sock_send(zbuf_ip_sock_t *k, zbuf_t *data)
{
    if (k == NULL || k->listener || data == NULL || zbuf_length(data) == 0)
        return -EINVAL;
    if (k->pcb == NULL || k->shut)
        return -EPIPE;
    /* Take the whole zbuf whenever nothing waits beyond the send buffer, so
     * that a zbuf larger than the buffer is never refused forever. */
    if (zbuf_length(k->txq) > 0 && zbuf_length(k->txq) >= k->stack->cfg.tcp_snd_buf)
        return -EAGAIN;
    int rc = zbuf_append(k->txq, data);
    if (rc)
        return rc;
    push(k);
    return 0;
}

/* The enrolment of a zbuf_ip_sock_bufsend() buffer: its release reaches the
 * caller only if the send was accepted ("armed"), so a failed send leaves
 * the caller's buffer alone, as the error convention wants. */
struct bufsend {
    zbuf_release_cb cb;
    void *arg;
    bool armed;
};

static void bufsend_release(void *data, size_t size, void *arg)
{
    struct bufsend *b = arg;
    if (b->armed && b->cb)
        b->cb(data, size, b->arg);
    free(b);
}

int zbuf_ip_sock_bufsend(zbuf_ip_sock_t *k, void *buf, size_t len, zbuf_release_cb cb, void *arg)
{
    if (k == NULL || k->listener || buf == NULL || len == 0)
        return -EINVAL;
    struct bufsend *b = malloc(sizeof *b);
    if (b == NULL)
        return -ENOMEM;
    b->cb = cb;
    b->arg = arg;
    b->armed = false;
    zbuf_t *z;
    if (zbuf_create(&z) != 0) {
        free(b);
        return -ENOMEM;
    }
    if (zbuf_append_buf(z, buf, len, bufsend_release, b) != 0) {
        zbuf_delete(z);
        free(b);
        return -ENOMEM;
    }
    int rc = zbuf_ip_sock_send(k, z);
    if (rc) {
        zbuf_delete(z); /* b is not armed: the caller's callback does not run */
        return rc;
    }
    b->armed = true; /* nothing released it yet: the send only queued it */
    return 0;
}

ssize_t zbuf_ip_sock_recv(zbuf_ip_sock_t *k, size_t max, zbuf_t **out)
{
    if (k == NULL || k->listener || out == NULL || max == 0)
        return -EINVAL;
    *out = NULL;
    size_t have = zbuf_length(k->rxq);
    if (have == 0) {
        if (k->err)
            return k->err;
        return k->eof ? 0 : -EAGAIN;
    }
    size_t n = max < have ? max : have;
    zbuf_t *z;
    if (n == have) {
        z = k->rxq;
        if (zbuf_create(&k->rxq) != 0) {
            k->rxq = z;
            return -ENOMEM;
        }
    } else if (zbuf_split_head(k->rxq, n, &z) != 0) {
        return -ENOMEM;
    }
    if (k->pcb)
        zbuf_ip_tcp_recved(k->pcb, n);
    *out = z;
    return (ssize_t)n;
}

unsigned zbuf_ip_sock_events(const zbuf_ip_sock_t *k)
{
    if (k == NULL)
        return 0;
    unsigned ev = 0;
    if (k->listener)
        return k->nacq ? ZBUF_IP_SOCK_ACCEPTABLE : 0;
    if (zbuf_length(k->rxq) || k->eof || k->err)
        ev |= ZBUF_IP_SOCK_READABLE;
    if (k->pcb && !k->shut &&
        (zbuf_length(k->txq) == 0 || zbuf_length(k->txq) < k->stack->cfg.tcp_snd_buf))
        ev |= ZBUF_IP_SOCK_WRITABLE;
    if (k->connected)
        ev |= ZBUF_IP_SOCK_CONNECTED;
    if (k->eof)
        ev |= ZBUF_IP_SOCK_EOF;
    if (k->err)
        ev |= ZBUF_IP_SOCK_ERROR;
    return ev;
}

int zbuf_ip_sock_error(const zbuf_ip_sock_t *k)
{
    return k ? k->err : -EINVAL;
}

int zbuf_ip_sock_shutdown(zbuf_ip_sock_t *k)
{
    if (k == NULL || k->listener)
        return -EINVAL;
    if (k->pcb == NULL)
        return -ENOTCONN;
    k->shut = true;
    push(k); /* the FIN goes once txq is empty */
    return 0;
}

void zbuf_ip_sock_close(zbuf_ip_sock_t *k)
{
    if (k == NULL)
        return;
    if (k->listener) {
        for (unsigned i = 0; i < k->nacq; i++) {
            zbuf_ip_tcp_abort(k->acq[i]->pcb);
            sock_free(k->acq[i]);
        }
        k->nacq = 0;
        zbuf_ip_tcp_close(k->pcb);
        sock_free(k);
        return;
    }
    if (k->pcb) {
        push(k);
        if (zbuf_length(k->txq) > 0) {
            /* Bytes wait beyond the send buffer: keep feeding them in the
             * background (see the orphan comment at the top). */
            size_t unread = zbuf_length(k->rxq);
            if (unread > 0 && zbuf_cut(k->rxq, 0, unread, NULL) == 0)
                zbuf_ip_tcp_recved(k->pcb, unread);
            k->orphan = true;
            k->shut = true;
            zbuf_ip__tcp_set_orphan(k->pcb);
            k->teardown.fn = orphan_teardown;
            zbuf_ip__teardown_add(k->stack, &k->teardown);
            return;
        }
        zbuf_ip_tcp_close(k->pcb);
    }
    sock_free(k);
}
