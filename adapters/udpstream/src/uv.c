/* SPDX-License-Identifier: MIT */
/*
 * The libuv driver of a stream: a poll handle on the socket, a timer for
 * the stream's deadlines, and a prepare handle that re-arms both before
 * the loop blocks (the application may have written or read since).
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <zbuf/udpstream_uv.h>

struct zbuf_udpstream_uv {
    uv_poll_t poll;
    uv_timer_t timer;
    uv_prepare_t prepare;
    zbuf_udpstream_t *s;
    zbuf_udpstream_uv_cb cb;
    void *arg;
    unsigned last_events;
    uint64_t last_read;
    int poll_events;    /* UV_* events the poll handle watches */
    int open_handles;
    bool closing;
    void (*done)(void *);
    void *done_arg;
};

static void run(zbuf_udpstream_uv_t *h)
{
    if (h->closing)
        return;
    zbuf_udpstream_process(h->s);
    zbuf_udpstream_stats_t st;
    zbuf_udpstream_get_stats(h->s, &st);
    unsigned ev = zbuf_udpstream_events(h->s);
    uint64_t rx = st.bytes_read + zbuf_udpstream_readable(h->s);
    if (ev != h->last_events || rx != h->last_read) {
        h->cb(h, h->s, ev, h->arg);
        /* What the callback left (it may have read or written) is the
         * state the next change is measured against. */
        if (!h->closing) {
            zbuf_udpstream_get_stats(h->s, &st);
            h->last_events = zbuf_udpstream_events(h->s);
            h->last_read = st.bytes_read + zbuf_udpstream_readable(h->s);
        }
    }
}

static void on_poll(uv_poll_t *p, int status, int events)
{
    (void)status, (void)events;
    run(p->data);
}

static void on_timer(uv_timer_t *t)
{
    run(t->data);
}

/* Before the loop blocks: the timer at the stream's next deadline, the
 * poll handle on what the socket needs. */
static void on_prepare(uv_prepare_t *p)
{
    zbuf_udpstream_uv_t *h = p->data;
    if (h->closing)
        return;
    int ms = zbuf_udpstream_timeout(h->s);
    if (ms < 0)
        uv_timer_stop(&h->timer);
    else
        uv_timer_start(&h->timer, on_timer, (uint64_t)ms, 0);
    int want = UV_READABLE | ((zbuf_udpstream_poll_events(h->s) & POLLOUT) ? UV_WRITABLE : 0);
    if (want != h->poll_events) {
        h->poll_events = want;
        uv_poll_start(&h->poll, want, on_poll);
    }
}

int zbuf_udpstream_uv_start(uv_loop_t *loop, zbuf_udpstream_t *s, zbuf_udpstream_uv_cb cb,
                            void *arg, zbuf_udpstream_uv_t **out)
{
    if (loop == NULL || s == NULL || cb == NULL || out == NULL || zbuf_udpstream_fd(s) < 0)
        return -EINVAL;
    zbuf_udpstream_uv_t *h = calloc(1, sizeof *h);
    if (h == NULL)
        return -ENOMEM;
    h->s = s;
    h->cb = cb;
    h->arg = arg;
    h->last_events = zbuf_udpstream_events(s);
    int rc = uv_poll_init_socket(loop, &h->poll, zbuf_udpstream_fd(s));
    if (rc < 0) {
        free(h);
        return rc;
    }
    uv_timer_init(loop, &h->timer);
    uv_prepare_init(loop, &h->prepare);
    h->poll.data = h->timer.data = h->prepare.data = h;
    h->open_handles = 3;
    h->poll_events = UV_READABLE;
    uv_poll_start(&h->poll, UV_READABLE, on_poll);
    uv_prepare_start(&h->prepare, on_prepare);
    *out = h;
    return 0;
}

static void on_closed(uv_handle_t *u)
{
    zbuf_udpstream_uv_t *h = u->data;
    if (--h->open_handles == 0) {
        void (*done)(void *) = h->done;
        void *arg = h->done_arg;
        free(h);
        if (done)
            done(arg);
    }
}

void zbuf_udpstream_uv_close(zbuf_udpstream_uv_t *h, void (*done)(void *arg), void *arg)
{
    if (h == NULL || h->closing)
        return;
    h->closing = true;
    h->done = done;
    h->done_arg = arg;
    uv_close((uv_handle_t *)&h->poll, on_closed);
    uv_close((uv_handle_t *)&h->timer, on_closed);
    uv_close((uv_handle_t *)&h->prepare, on_closed);
}
