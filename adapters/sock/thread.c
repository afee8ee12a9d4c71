/*
 * The completion thread: one background thread per process, started on the
 * first handle opened with ZBUF_SOCK_THREAD and gone when the last one is
 * closed.  It waits on an epoll set for EPOLLERR (the socket's error queue
 * has notifications) and runs zbuf_sock_complete() for the handle, so that
 * release callbacks run even when the program never calls back, as under
 * VxWorks, whose network task called the free routines.
 *
 * Lifetime of a handle seen by the thread.  epoll_wait() hands out raw
 * pointers, possibly for a handle that is being closed.  So:
 * - every handle carries a reference count; its owner holds one;
 * - the thread, under the global lock, takes a reference to each handle of a
 *   batch that is not yet detached, and drops it after completing;
 * - closing a handle first detaches it (EPOLL_CTL_DEL, `detached`), then
 *   *retires* it: the owner's reference goes onto a grave list that the
 *   thread empties only after it has looked at the batch that may still
 *   name the handle.  A handle is thus freed only when no batch can reach it.
 *
 * Handles with ZBUF_SOCK_HOLD_FD keep a duplicate descriptor while sends
 * are outstanding (see sock.h).  If the program has closed its own
 * descriptor and the completions stop coming (a peer that never reads),
 * the thread aborts the connection after ZS_ORPHAN_MS, so that the kernel
 * lets go of the pages and the hold ends: a bounded deferred close.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "sock_internal.h"

/* How long a held socket whose program descriptor is gone may wait for its
 * completions before the connection is aborted. */
#define ZS_ORPHAN_MS 10000
/* How often held sockets are looked at. */
#define ZS_SCAN_MS 1000

static struct {
    pthread_mutex_t lock;
    bool running;             /* a thread exists (it clears this as it exits) */
    int epfd, evfd;           /* its epoll set and wake-up eventfd */
    unsigned users;           /* attached handles */
    struct zbuf_sock *list;   /* attached handles */
    struct zbuf_sock *grave;  /* retired handles awaiting the end of a batch */
} g = { .lock = PTHREAD_MUTEX_INITIALIZER, .epfd = -1, .evfd = -1 };

static void wake(void)
{
    uint64_t one = 1;
    if (write(g.evfd, &one, sizeof one) < 0) {
        /* The counter cannot overflow in practice; a failed wake-up only
         * delays freeing retired handles to the next event. */
    }
}

/* Look at held sockets whose program descriptor is gone.  Under g.lock. */
static bool scan_holds(int64_t now)
{
    bool any = false;
    for (struct zbuf_sock *s = g.list; s != NULL; s = s->next_att) {
        pthread_mutex_lock(&s->lock);
        if (s->hold_fd >= 0 && !s->fd_gone) {
            any = true;
            struct stat a, b;
            bool same = !s->fd_stale && fstat(s->fd, &a) == 0 && fstat(s->hold_fd, &b) == 0 &&
                        a.st_dev == b.st_dev && a.st_ino == b.st_ino;
            if (same) {
                s->orphan_since = 0;
            } else if (s->orphan_since == 0) {
                s->orphan_since = now;
            } else if (now - s->orphan_since >= ZS_ORPHAN_MS) {
                struct sockaddr sa = { .sa_family = AF_UNSPEC };
                connect(s->hold_fd, &sa, sizeof sa); /* completions follow */
                s->orphan_since = now;
            }
        }
        pthread_mutex_unlock(&s->lock);
    }
    return any;
}

static void *completion_thread(void *arg)
{
    (void)arg;
    struct epoll_event ev[64];
    struct zbuf_sock *batch[64];
    int timeout = -1;
    int64_t last_scan = zbuf__sock_now_ms();
    for (;;) {
        int n = epoll_wait(g.epfd, ev, 64, timeout);
        unsigned k = 0;
        pthread_mutex_lock(&g.lock);
        for (int i = 0; i < n; i++) {
            if (ev[i].data.ptr == NULL) {
                uint64_t v;
                if (read(g.evfd, &v, sizeof v) < 0) {
                    /* EAGAIN: another wake-up already consumed it */
                }
                continue;
            }
            struct zbuf_sock *s = ev[i].data.ptr;
            if (!s->detached) {
                atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
                batch[k++] = s;
            }
        }
        /* The batch has been looked at: retired handles are unreachable. */
        struct zbuf_sock *grave = g.grave;
        g.grave = NULL;
        int64_t now = zbuf__sock_now_ms();
        if (now - last_scan >= ZS_SCAN_MS || n == 0) {
            timeout = scan_holds(now) ? ZS_SCAN_MS : -1;
            last_scan = now;
        } else if (timeout < 0) {
            timeout = ZS_SCAN_MS; /* a hold may have appeared: look again soon */
        }
        bool exit_now = g.users == 0 && k == 0;
        if (exit_now) {
            close(g.epfd);
            close(g.evfd);
            g.epfd = g.evfd = -1;
            g.running = false;
        }
        pthread_mutex_unlock(&g.lock);

        while (grave != NULL) {
            struct zbuf_sock *next = grave->next_grave;
            zbuf__sock_unref(grave);
            grave = next;
        }
        for (unsigned i = 0; i < k; i++) {
            zbuf_sock_complete(batch[i]);
            zbuf__sock_unref(batch[i]);
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
    int r = pthread_create(&tid, &a, completion_thread, NULL);
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

int zbuf__sock_thread_attach(struct zbuf_sock *s)
{
    pthread_mutex_lock(&g.lock);
    int e = 0;
    if (!g.running)
        e = start_locked();
    if (e == 0) {
        /* Edge-triggered: each new notification wakes the socket's wait
         * queue once, and we drain the queue each time. */
        struct epoll_event ev = { .events = EPOLLERR | EPOLLET, .data.ptr = s };
        if (epoll_ctl(g.epfd, EPOLL_CTL_ADD, s->fd, &ev) != 0) {
            e = -errno;
            wake(); /* a thread with no user exits */
        } else {
            s->attached = true;
            s->next_att = g.list;
            g.list = s;
            g.users++;
            wake(); /* re-evaluate the hold scan */
        }
    }
    pthread_mutex_unlock(&g.lock);
    return e;
}

void zbuf__sock_thread_detach(struct zbuf_sock *s)
{
    pthread_mutex_lock(&g.lock);
    if (s->attached && !s->detached) {
        /* ENOENT if the file went.  A stale number may be another socket's
         * now: leave the registration to go with its file. */
        pthread_mutex_lock(&s->lock);
        bool stale = s->fd_stale;
        pthread_mutex_unlock(&s->lock);
        if (!stale)
            epoll_ctl(g.epfd, EPOLL_CTL_DEL, s->fd, NULL);
        for (struct zbuf_sock **p = &g.list; *p != NULL; p = &(*p)->next_att) {
            if (*p == s) {
                *p = s->next_att;
                break;
            }
        }
        s->detached = true;
        g.users--;
    }
    pthread_mutex_unlock(&g.lock);
}

void zbuf__sock_retire(struct zbuf_sock *s)
{
    pthread_mutex_lock(&g.lock);
    if (s->attached && g.running) {
        s->next_grave = g.grave;
        g.grave = s;
        wake();
        pthread_mutex_unlock(&g.lock);
        return;
    }
    pthread_mutex_unlock(&g.lock);
    zbuf__sock_unref(s);
}
