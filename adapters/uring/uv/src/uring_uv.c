/* SPDX-License-Identifier: MIT */
/*
 * zbuf-uring driven by a libuv loop: three handles per attachment.
 *
 * - poll:    zbuf_uring_fd() readable -> zbuf_uring_run(u, 0).  The only
 *            handle that keeps the loop alive, and only while the engine
 *            has sockets (looked at in every iteration; referenced from the
 *            attachment to the first iteration).
 * - prepare: before the loop blocks, submit what callbacks of this
 *            iteration prepared, then arm the timer from zbuf_uring_timeout().
 * - timer:   zbuf_uring_timeout() elapsed (0: work is due now, so the loop
 *            does not block) -> zbuf_uring_run(u, 0).
 * The attachment is freed when the last of the three close callbacks ran.
 */
#include <errno.h>
#include <stdlib.h>

#include <zbuf/uring_uv.h>

struct zbuf_uring_uv {
    uv_poll_t poll;
    uv_prepare_t prepare;
    uv_timer_t timer;
    zbuf_uring_t *u;
    int closing;                 /* handles still to close */
    zbuf_uring_uv_close_cb cb;
    void *arg;
};

/* Keep the loop alive exactly while the engine has sockets. */
static void update_ref(zbuf_uring_uv_t *h)
{
    if (zbuf_uring_sock_count(h->u) > 0)
        uv_ref((uv_handle_t *)&h->poll);
    else
        uv_unref((uv_handle_t *)&h->poll);
}

static void drive(zbuf_uring_uv_t *h)
{
    zbuf_uring_run(h->u, 0);
    update_ref(h);
}

static void on_poll(uv_poll_t *p, int status, int events)
{
    (void)status;
    (void)events;
    drive(p->data);
}

static void on_timer(uv_timer_t *t)
{
    drive(t->data);
}

static void on_prepare(uv_prepare_t *p)
{
    zbuf_uring_uv_t *h = p->data;
    zbuf_uring_submit(h->u);
    int t = zbuf_uring_timeout(h->u);
    if (t >= 0)
        uv_timer_start(&h->timer, on_timer, (uint64_t)t, 0);
    else
        uv_timer_stop(&h->timer);
    update_ref(h);
}

int zbuf_uring_uv_attach(uv_loop_t *loop, zbuf_uring_t *u, zbuf_uring_uv_t **out)
{
    if (loop == NULL || u == NULL || out == NULL)
        return -EINVAL;
    int fd = zbuf_uring_fd(u);
    if (fd < 0)
        return fd;
    zbuf_uring_uv_t *h = calloc(1, sizeof *h);
    if (h == NULL)
        return -ENOMEM;
    h->u = u;
    int rc = uv_poll_init(loop, &h->poll, fd);
    if (rc < 0) {
        free(h);
        return rc;
    }
    /* From here on the handles exist and can only be closed. */
    uv_prepare_init(loop, &h->prepare);
    uv_timer_init(loop, &h->timer);
    h->poll.data = h->prepare.data = h->timer.data = h;
    uv_unref((uv_handle_t *)&h->prepare);
    uv_unref((uv_handle_t *)&h->timer);
    if ((rc = uv_poll_start(&h->poll, UV_READABLE, on_poll)) < 0 ||
        (rc = uv_prepare_start(&h->prepare, on_prepare)) < 0) {
        zbuf_uring_uv_close(h, NULL, NULL);
        return rc;
    }
    /* Referenced until the first iteration looks (on_prepare): sockets
     * opened between this call and uv_run() keep the loop alive. */
    *out = h;
    return 0;
}

static void on_closed(uv_handle_t *hd)
{
    zbuf_uring_uv_t *h = hd->data;
    if (--h->closing > 0)
        return;
    if (h->cb != NULL)
        h->cb(h, h->arg);
    free(h);
}

void zbuf_uring_uv_close(zbuf_uring_uv_t *h, zbuf_uring_uv_close_cb cb, void *arg)
{
    if (h == NULL || h->closing > 0)
        return;
    h->cb = cb;
    h->arg = arg;
    h->closing = 3;
    uv_close((uv_handle_t *)&h->poll, on_closed);
    uv_close((uv_handle_t *)&h->prepare, on_closed);
    uv_close((uv_handle_t *)&h->timer, on_closed);
}
