/* SPDX-License-Identifier: MIT */
/* A TCP end point for tests: counts every callback, keeps what it received. */
#ifndef ZBUF_STACK_TEST_TCPFIX_H
#define ZBUF_STACK_TEST_TCPFIX_H

#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "harness.h"

typedef struct ep {
    zbuf_ip_tcp_t *pcb;
    zbuf_ip_tcp_t *listener;
    int connected, accepted, eofs, errors, err;
    size_t rx_bytes, sent_bytes;
    int rx_calls;
    bool hold;          /* do not call recved: let the window close */
    bool close_on_eof;  /* close when the peer's FIN arrives */
    int abort_at;       /* abort in the callback of this delivery (0: never) */
    zbuf_t *rx;         /* everything received, in order */
} ep_t;

static void ep_recv(void *arg, zbuf_ip_tcp_t *pcb, zbuf_t *d)
{
    ep_t *e = arg;
    if (d == NULL) {
        e->eofs++;
        if (e->close_on_eof) {
            zbuf_ip_tcp_close(pcb);
            e->pcb = NULL;
        }
        return;
    }
    cr_assert_eq(zbuf_check(d), 0);
    e->rx_calls++;
    e->rx_bytes += zbuf_length(d);
    if (e->abort_at == e->rx_calls) {
        zbuf_delete(d);
        zbuf_ip_tcp_abort(pcb);
        e->pcb = NULL;
        return;
    }
    if (!e->hold)
        zbuf_ip_tcp_recved(pcb, zbuf_length(d));
    if (e->rx == NULL)
        zbuf_create(&e->rx);
    zbuf_append(e->rx, d);
}

static void ep_sent(void *arg, zbuf_ip_tcp_t *pcb, size_t n)
{
    (void)pcb;
    ((ep_t *)arg)->sent_bytes += n;
}

static void ep_connected(void *arg, zbuf_ip_tcp_t *pcb)
{
    ep_t *e = arg;
    e->connected++;
    e->pcb = pcb;
}

static void ep_error(void *arg, int err)
{
    ep_t *e = arg;
    e->errors++;
    e->err = err;
    e->pcb = NULL;
}

static const zbuf_ip_tcp_callbacks_t ep_cbs = {
    .connected = ep_connected, .recv = ep_recv, .sent = ep_sent, .error = ep_error};

static int ep_accept(void *arg, zbuf_ip_tcp_t *l, zbuf_ip_tcp_t *c)
{
    (void)l;
    ep_t *e = arg;
    e->accepted++;
    e->pcb = c;
    zbuf_ip_tcp_set_callbacks(c, &ep_cbs, e);
    return 0;
}

static inline void ep_listen(ep_t *e, zbuf_ip_stack_t *s, uint16_t port)
{
    cr_assert_eq(zbuf_ip_tcp_new(s, &e->listener), 0);
    cr_assert_eq(zbuf_ip_tcp_bind(e->listener, ZBUF_IP_ANY, port), 0);
    cr_assert_eq(zbuf_ip_tcp_listen(e->listener, 8), 0);
    zbuf_ip_tcp_callbacks_t cb = {.accept = ep_accept};
    zbuf_ip_tcp_set_callbacks(e->listener, &cb, e);
}

static inline void ep_connect(ep_t *e, zbuf_ip_stack_t *s, uint32_t addr, uint16_t port)
{
    cr_assert_eq(zbuf_ip_tcp_new(s, &e->pcb), 0);
    zbuf_ip_tcp_set_callbacks(e->pcb, &ep_cbs, e);
    cr_assert_eq(zbuf_ip_tcp_connect(e->pcb, addr, port), 0);
}

static inline void ep_fini(ep_t *e)
{
    zbuf_delete(e->rx);
    e->rx = NULL;
}

static inline zbuf_t *ep_text(const char *s)
{
    zbuf_t *z;
    zbuf_create(&z);
    zbuf_append_buf(z, (void *)s, strlen(s), NULL, NULL);
    return z;
}

#endif
