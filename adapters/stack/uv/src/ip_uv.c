/* SPDX-License-Identifier: MIT */
/*
 * The zbuf stack driven by a libuv loop.
 *
 * Three kinds of handles (see <zbuf/ip_uv.h> for the contract):
 *
 *   prepare  runs before every blocking wait; aims `timer` at the stack's
 *            next deadline (or at the end of a descriptor's pause), so that
 *            work the loop's callbacks gave the stack is never left waiting;
 *   timer    one-shot; its callback polls the stack;
 *   poll     one per watched descriptor; its callback polls the stack.
 *
 * Re-entrancy: zbuf_ip_poll() runs the application's stack callbacks, which
 * may call zbuf_ip_uv_close(), zbuf_ip_uv_unwatch() or
 * zbuf_ip_uv_netif_remove() on this integration.  None of them frees memory
 * synchronously: handles are freed in their close callbacks, which libuv
 * runs in a later phase of the loop, and interface removals asked for during
 * a poll are queued until the poll returns (the driver being polled may be
 * the one removed).  So after zbuf_ip_poll() returns, `h` and the watch
 * whose callback called it are still valid memory, and their flags say
 * whether to go on.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>

#include <zbuf/ip_uv.h>

struct watch {
    zbuf_ip_uv_t *h;
    zbuf_ip_netif_t *nif;
    int fd;
    bool active;        /* in the epoll set; false while paused or after unwatch */
    bool paused;        /* left unwatched until resume_at (empty driver pool) */
    uint64_t resume_at; /* stack clock, valid while paused */
    struct watch *next; /* h->watches; a watch leaves the list when unwatched */
    uv_poll_t poll;
};

struct zbuf_ip_uv {
    uv_loop_t *loop;
    zbuf_ip_stack_t *stack;
    uv_prepare_t prepare;
    uv_timer_t timer;
    struct watch *watches; /* watched (or paused) descriptors */
    uint64_t armed;        /* deadline the timer is aimed at; ZBUF_IP_NEVER when stopped */
    uint64_t stale;        /* a past deadline a poll did nothing about (see on_prepare) */
    unsigned open_handles; /* handles not yet through their close callback */
    bool ref;
    bool closing;
    zbuf_ip_uv_close_cb close_cb;
    void *close_arg;
    zbuf_ip_uv_stats_t st;
};

static void set_handle_ref(uv_handle_t *hd, bool ref)
{
    if (ref)
        uv_ref(hd);
    else
        uv_unref(hd);
}

/* ------------------------------------------------------------- closing */

static void handle_closed(zbuf_ip_uv_t *h)
{
    if (--h->open_handles > 0 || !h->closing)
        return;
    zbuf_ip_uv_close_cb cb = h->close_cb;
    void *arg = h->close_arg;
    free(h);
    if (cb)
        cb(arg);
}

static void on_watch_closed(uv_handle_t *hd)
{
    struct watch *w = hd->data;
    zbuf_ip_uv_t *h = w->h;
    free(w);
    handle_closed(h);
}

static void on_core_closed(uv_handle_t *hd)
{
    handle_closed(hd->data);
}

/* Take `w` off the list and out of the epoll set now; free it later. */
static void watch_end(struct watch *w)
{
    zbuf_ip_uv_t *h = w->h;
    for (struct watch **pp = &h->watches; *pp; pp = &(*pp)->next) {
        if (*pp == w) {
            *pp = w->next;
            break;
        }
    }
    h->st.watched--;
    w->active = false;
    w->paused = false;
    /* uv_close() stops the poll first, which removes the descriptor from
     * epoll synchronously: the descriptor may be closed from here on. */
    uv_close((uv_handle_t *)&w->poll, on_watch_closed);
}

static struct watch *find_watch(const zbuf_ip_uv_t *h, const zbuf_ip_netif_t *nif)
{
    for (struct watch *w = h->watches; w; w = w->next)
        if (w->nif == nif)
            return w;
    return NULL;
}

/* --------------------------------------------------------------- polling */

/* Poll the stack once; returns zbuf_ip_poll()'s count (0 when closing). */
static int poll_stack(zbuf_ip_uv_t *h)
{
    if (h->closing)
        return 0;
    int n = zbuf_ip_poll(h->stack);
    h->st.polls++;
    if (n <= 0)
        h->st.empty_polls++;
    return n;
}

static void on_readable(uv_poll_t *p, int status, int events);

static void watch_resume(struct watch *w)
{
    w->paused = false;
    if (uv_poll_start(&w->poll, UV_READABLE, on_readable) == 0)
        w->active = true;
    else
        w->h->st.poll_errors++; /* cannot happen for an open descriptor */
}

static bool still_readable(int fd)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    return poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLIN);
}

static void on_readable(uv_poll_t *p, int status, int events)
{
    (void)events;
    struct watch *w = p->data;
    zbuf_ip_uv_t *h = w->h;
    if (status < 0) {
        /* EBADF and the like: the descriptor is unusable; stop watching it
         * rather than report the same error at every iteration. */
        h->st.poll_errors++;
        watch_end(w);
        return;
    }
    h->st.io_wakeups++;
    int n = poll_stack(h);
    if (n == 0 && w->active && !h->closing && still_readable(w->fd)) {
        /* Readable, yet nothing was read: the driver has no buffer to read
         * into.  Level-triggered epoll would wake us again at once, so step
         * back for a moment; prepare aims the timer at the resume time.
         * (Without the check, a descriptor drained by the poll of another
         * descriptor's event in the same iteration would be paused too.) */
        uv_poll_stop(&w->poll);
        w->active = false;
        w->paused = true;
        w->resume_at = zbuf_ip_now(h->stack) + ZBUF_IP_UV_RETRY_MS;
        h->st.pauses++;
    }
}

/* Restart the paused watches whose time came; returns the earliest resume
 * time of those still paused. */
static uint64_t resume_due(zbuf_ip_uv_t *h, uint64_t now)
{
    uint64_t next = ZBUF_IP_NEVER;
    for (struct watch *w = h->watches; w; w = w->next) {
        if (!w->paused)
            continue;
        if (w->resume_at <= now)
            watch_resume(w);
        else if (w->resume_at < next)
            next = w->resume_at;
    }
    return next;
}

static void on_timer(uv_timer_t *t)
{
    zbuf_ip_uv_t *h = t->data;
    h->st.timer_wakeups++;
    h->armed = ZBUF_IP_NEVER; /* one-shot: it is stopped now */
    uint64_t due = zbuf_ip_next_deadline(h->stack);
    int n = poll_stack(h);
    if (h->closing)
        return;
    uint64_t now = zbuf_ip_now(h->stack);
    if (n == 0 && due <= now && zbuf_ip_next_deadline(h->stack) == due)
        h->stale = due;
    resume_due(h, now);
}

/* Right before the loop blocks: aim the timer at the next deadline. */
static void on_prepare(uv_prepare_t *p)
{
    zbuf_ip_uv_t *h = p->data;
    h->st.iterations++;
    if (h->closing)
        return;
    uint64_t now = zbuf_ip_now(h->stack);
    uint64_t d = zbuf_ip_next_deadline(h->stack);
    uint64_t r = resume_due(h, now);
    if (r < d)
        d = r;
    if (d == ZBUF_IP_NEVER) {
        if (h->armed != ZBUF_IP_NEVER) {
            uv_timer_stop(&h->timer);
            h->armed = ZBUF_IP_NEVER;
        }
        return;
    }
    if (d == h->armed)
        return; /* already aimed there */
    /* A deadline in the past that a poll at that very deadline did nothing
     * about would fire the timer at every iteration: a busy loop.  That is a
     * stack bug, but wait a millisecond between such polls anyway. */
    uint64_t timeout = d > now ? d - now : 0;
    if (d == h->stale && timeout == 0)
        timeout = 1;
    /* The timeout counts from the loop's time, cached at the start of the
     * iteration; callbacks may have run for a while since. */
    uv_update_time(h->loop);
    uv_timer_start(&h->timer, on_timer, timeout, 0);
    h->armed = d;
    h->st.rearms++;
}

/* ------------------------------------------------------------ public API */

int zbuf_ip_uv_attach(uv_loop_t *loop, zbuf_ip_stack_t *s, zbuf_ip_uv_t **out)
{
    if (loop == NULL || s == NULL || out == NULL)
        return -EINVAL;
    zbuf_ip_uv_t *h = calloc(1, sizeof *h);
    if (h == NULL)
        return -ENOMEM;
    h->loop = loop;
    h->stack = s;
    h->armed = ZBUF_IP_NEVER;
    h->stale = ZBUF_IP_NEVER;
    h->ref = true;
    int rc = uv_timer_init(loop, &h->timer);
    if (rc) {
        free(h);
        return rc;
    }
    h->timer.data = h;
    h->open_handles = 1;
    rc = uv_prepare_init(loop, &h->prepare);
    if (rc == 0) {
        h->prepare.data = h;
        h->open_handles = 2;
        rc = uv_prepare_start(&h->prepare, on_prepare);
    }
    if (rc) {
        /* Undo: close what was initialised; `h` goes in the last close
         * callback, and no user callback is called. */
        h->closing = true;
        uv_close((uv_handle_t *)&h->timer, on_core_closed);
        if (h->open_handles == 2)
            uv_close((uv_handle_t *)&h->prepare, on_core_closed);
        return rc;
    }
    /* TAP interfaces opened before the attach are watched too. */
    for (zbuf_ip_netif_t *nif = zbuf_ip_netif_next(s, NULL); nif; nif = zbuf_ip_netif_next(s, nif)) {
        if (zbuf_ip_tap_fd(nif) < 0)
            continue;
        if ((rc = zbuf_ip_uv_watch(h, nif)) != 0) {
            zbuf_ip_uv_close(h, NULL, NULL); /* h goes with its last handle */
            return rc;
        }
    }
    *out = h;
    return 0;
}

int zbuf_ip_uv_watch(zbuf_ip_uv_t *h, zbuf_ip_netif_t *nif)
{
    if (h == NULL || nif == NULL || h->closing || zbuf_ip_netif_stack(nif) != h->stack)
        return -EINVAL;
    int fd = zbuf_ip_tap_fd(nif);
    if (fd < 0)
        return -EINVAL;
    if (find_watch(h, nif))
        return -EEXIST;
    struct watch *w = calloc(1, sizeof *w);
    if (w == NULL)
        return -ENOMEM;
    w->h = h;
    w->nif = nif;
    w->fd = fd;
    int rc = uv_poll_init(h->loop, &w->poll, fd);
    if (rc) {
        free(w);
        return rc;
    }
    w->poll.data = w;
    h->open_handles++;
    h->st.watched++;
    w->next = h->watches;
    h->watches = w;
    if (!h->ref)
        uv_unref((uv_handle_t *)&w->poll);
    rc = uv_poll_start(&w->poll, UV_READABLE, on_readable);
    if (rc) {
        watch_end(w); /* frees it in its close callback */
        return rc;
    }
    w->active = true;
    return 0;
}

int zbuf_ip_uv_unwatch(zbuf_ip_uv_t *h, zbuf_ip_netif_t *nif)
{
    if (h == NULL || nif == NULL)
        return -EINVAL;
    struct watch *w = find_watch(h, nif);
    if (w == NULL)
        return -ENOENT;
    watch_end(w);
    return 0;
}

int zbuf_ip_uv_tap_open(zbuf_ip_uv_t *h, const char *name, const zbuf_ip_netif_config_t *cfg,
                        unsigned pool_bufs, zbuf_ip_netif_t **out)
{
    if (h == NULL || out == NULL || h->closing)
        return -EINVAL;
    zbuf_ip_netif_t *nif;
    int rc = zbuf_ip_tap_open(h->stack, name, cfg, pool_bufs, &nif);
    if (rc)
        return rc;
    rc = zbuf_ip_uv_watch(h, nif);
    if (rc) {
        zbuf_ip_netif_remove(nif);
        return rc;
    }
    *out = nif;
    return 0;
}

int zbuf_ip_uv_netif_remove(zbuf_ip_uv_t *h, zbuf_ip_netif_t *nif)
{
    if (h == NULL || nif == NULL || zbuf_ip_netif_stack(nif) != h->stack)
        return -EINVAL;
    struct watch *w = find_watch(h, nif);
    if (w)
        watch_end(w);
    /* Safe inside a poll too: the stack defers the driver's detach until
     * that driver's poll has returned. */
    zbuf_ip_netif_remove(nif);
    return 0;
}

void zbuf_ip_uv_set_ref(zbuf_ip_uv_t *h, bool ref)
{
    if (h == NULL || h->closing)
        return;
    h->ref = ref;
    set_handle_ref((uv_handle_t *)&h->prepare, ref);
    set_handle_ref((uv_handle_t *)&h->timer, ref);
    for (struct watch *w = h->watches; w; w = w->next)
        set_handle_ref((uv_handle_t *)&w->poll, ref);
}

int zbuf_ip_uv_close(zbuf_ip_uv_t *h, zbuf_ip_uv_close_cb cb, void *arg)
{
    if (h == NULL)
        return -EINVAL;
    if (h->closing)
        return -EALREADY;
    h->closing = true;
    h->close_cb = cb;
    h->close_arg = arg;
    while (h->watches)
        watch_end(h->watches);
    uv_close((uv_handle_t *)&h->timer, on_core_closed);
    uv_close((uv_handle_t *)&h->prepare, on_core_closed);
    return 0;
}

zbuf_ip_stack_t *zbuf_ip_uv_stack(const zbuf_ip_uv_t *h)
{
    return h ? h->stack : NULL;
}

uv_loop_t *zbuf_ip_uv_loop(const zbuf_ip_uv_t *h)
{
    return h ? h->loop : NULL;
}

void zbuf_ip_uv_stats(const zbuf_ip_uv_t *h, zbuf_ip_uv_stats_t *out)
{
    if (out == NULL)
        return;
    if (h == NULL) {
        *out = (zbuf_ip_uv_stats_t){0};
        return;
    }
    *out = h->st;
}
