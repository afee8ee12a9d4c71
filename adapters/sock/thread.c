/* SPDX-License-Identifier: MIT */
/*
 * The completion watcher: one background thread per process, started with
 * the first watch added and gone when the last one is removed.  It waits on
 * an epoll set for EPOLLERR on each watched descriptor and runs the watch's
 * on_error callback, and while any watch asks for it, calls every watch's
 * on_tick once per ZBUF__WATCH_TICK_MS.  It knows descriptors, callbacks and
 * reference counts only; see watch.h for the life of a watch.  The socket
 * adapter uses it so that release callbacks run even when the program never
 * calls back, as under VxWorks, whose network task called the free routines
 * (sock.c holds that policy).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include "watch.h"

/* Watches handed to the callbacks per epoll_wait(). */
#define WATCH_BATCH 64

static struct {
    pthread_mutex_t lock;
    bool running;               /* a thread exists (it clears this as it exits) */
    int epfd, evfd;             /* its epoll set and wake-up eventfd */
    unsigned users;             /* added watches */
    struct zbuf__watch *list;   /* added watches */
    struct zbuf__watch *grave;  /* retired watches awaiting the end of a batch */
} g = { .lock = PTHREAD_MUTEX_INITIALIZER, .epfd = -1, .evfd = -1 };

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void wake(void)
{
    uint64_t one = 1;
    if (write(g.evfd, &one, sizeof one) < 0) {
        /* The counter cannot overflow in practice; a failed wake-up only
         * delays freeing retired watches to the next event. */
    }
}

void zbuf__watch_init(struct zbuf__watch *w, int fd, void *ctx, void (*on_error)(void *),
                      bool (*on_tick)(void *, int64_t), void (*on_free)(void *))
{
    *w = (struct zbuf__watch){ .fd = fd, .ctx = ctx, .on_error = on_error,
                               .on_tick = on_tick, .on_free = on_free };
    atomic_init(&w->refs, 1);
}

void zbuf__watch_unref(struct zbuf__watch *w)
{
    if (atomic_fetch_sub_explicit(&w->refs, 1, memory_order_acq_rel) == 1)
        w->on_free(w->ctx);
}

/* Every watch's periodic look.  Under g.lock.  Whether any wants more. */
static bool tick_all(int64_t now)
{
    bool any = false;
    for (struct zbuf__watch *w = g.list; w != NULL; w = w->next_added)
        if (w->on_tick != NULL && w->on_tick(w->ctx, now))
            any = true;
    return any;
}

/* Take a reference to each watch the events name that is not removed,
 * draining the wake-up eventfd.  Under g.lock.  Returns the batch size. */
static unsigned collect(const struct epoll_event *ev, int n, struct zbuf__watch **batch)
{
    unsigned k = 0;
    for (int i = 0; i < n; i++) {
        struct zbuf__watch *w = ev[i].data.ptr;
        if (w == NULL) {
            uint64_t v;
            if (read(g.evfd, &v, sizeof v) < 0) {
                /* EAGAIN: another wake-up already consumed it */
            }
            continue;
        }
        if (!w->removed) {
            atomic_fetch_add_explicit(&w->refs, 1, memory_order_relaxed);
            batch[k++] = w;
        }
    }
    return k;
}

/* Close the set as the thread exits.  Under g.lock. */
static void stop_locked(void)
{
    close(g.epfd);
    close(g.evfd);
    g.epfd = g.evfd = -1;
    g.running = false;
}

static void *watcher_thread(void *arg)
{
    (void)arg;
    struct epoll_event ev[WATCH_BATCH];
    struct zbuf__watch *batch[WATCH_BATCH];
    int timeout = -1;
    int64_t last_tick = now_ms();
    for (;;) {
        int n = epoll_wait(g.epfd, ev, WATCH_BATCH, timeout);
        pthread_mutex_lock(&g.lock);
        unsigned k = collect(ev, n, batch);
        /* The batch has been looked at: retired watches are unreachable. */
        struct zbuf__watch *grave = g.grave;
        g.grave = NULL;
        int64_t now = now_ms();
        if (now - last_tick >= ZBUF__WATCH_TICK_MS || n == 0) {
            timeout = tick_all(now) ? ZBUF__WATCH_TICK_MS : -1;
            last_tick = now;
        } else if (timeout < 0) {
            timeout = ZBUF__WATCH_TICK_MS; /* a watch may want ticks now: look again soon */
        }
        bool exit_now = g.users == 0 && k == 0;
        if (exit_now)
            stop_locked();
        pthread_mutex_unlock(&g.lock);

        while (grave != NULL) {
            struct zbuf__watch *next = grave->next_grave;
            zbuf__watch_unref(grave);
            grave = next;
        }
        for (unsigned i = 0; i < k; i++) {
            batch[i]->on_error(batch[i]->ctx);
            zbuf__watch_unref(batch[i]);
        }
        if (exit_now)
            return NULL;
    }
}

static int start_locked(void)
{
    g.epfd = epoll_create1(EPOLL_CLOEXEC);
    if (g.epfd < 0)
        return -errno;
    g.evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    struct epoll_event e = { .events = EPOLLIN, .data.ptr = NULL };
    if (g.evfd < 0 || epoll_ctl(g.epfd, EPOLL_CTL_ADD, g.evfd, &e) != 0) {
        int err = -errno;
        close(g.epfd);
        if (g.evfd >= 0)
            close(g.evfd);
        g.epfd = g.evfd = -1;
        return err;
    }
    pthread_attr_t a;
    pthread_t tid;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    int r = pthread_create(&tid, &a, watcher_thread, NULL);
    pthread_attr_destroy(&a);
    if (r != 0) {
        close(g.epfd);
        close(g.evfd);
        g.epfd = g.evfd = -1;
        return -EAGAIN;
    }
    pthread_setname_np(tid, "zbuf-sock-zc");
    g.running = true;
    return 0;
}

int zbuf__watch_add(struct zbuf__watch *w)
{
    pthread_mutex_lock(&g.lock);
    int e = 0;
    if (!g.running)
        e = start_locked();
    if (e == 0) {
        /* Edge-triggered: each new error wakes the descriptor's wait queue
         * once; on_error drains it each time. */
        struct epoll_event ev = { .events = EPOLLERR | EPOLLET, .data.ptr = w };
        if (epoll_ctl(g.epfd, EPOLL_CTL_ADD, w->fd, &ev) != 0) {
            e = -errno;
            wake(); /* a thread with no user exits */
        } else {
            w->added = true;
            w->next_added = g.list;
            g.list = w;
            g.users++;
            wake(); /* re-evaluate the ticks */
        }
    }
    pthread_mutex_unlock(&g.lock);
    return e;
}

void zbuf__watch_remove(struct zbuf__watch *w, bool fd_valid)
{
    pthread_mutex_lock(&g.lock);
    if (w->added && !w->removed) {
        if (fd_valid)
            epoll_ctl(g.epfd, EPOLL_CTL_DEL, w->fd, NULL); /* ENOENT if the file went */
        for (struct zbuf__watch **p = &g.list; *p != NULL; p = &(*p)->next_added) {
            if (*p == w) {
                *p = w->next_added;
                break;
            }
        }
        w->removed = true;
        g.users--;
    }
    pthread_mutex_unlock(&g.lock);
}

void zbuf__watch_retire(struct zbuf__watch *w)
{
    pthread_mutex_lock(&g.lock);
    if (w->added && g.running) {
        w->next_grave = g.grave;
        g.grave = w;
        wake();
        pthread_mutex_unlock(&g.lock);
        return;
    }
    pthread_mutex_unlock(&g.lock);
    zbuf__watch_unref(w);
}
