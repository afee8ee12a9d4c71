/* SPDX-License-Identifier: MIT */
/*
 * The completion watcher (thread.c): a background thread that waits for
 * EPOLLERR on registered descriptors and runs each one's callback.  It knows
 * descriptors, callbacks and reference counts, nothing of what they belong
 * to; the socket adapter (sock.c) embeds one struct zbuf__watch per handle
 * opened with ZBUF_SOCK_THREAD and keeps its policy (what an error event
 * means, when a held socket is abandoned) in the callbacks.  Names are
 * zbuf__watch_ (double underscore) and hidden.
 *
 * Life of a watch.  epoll_wait() hands out raw pointers, possibly to a watch
 * being removed.  So a watch carries a reference count: its owner holds one
 * (from zbuf__watch_init()) and the thread takes one, under its lock, for
 * each watch of a batch not yet removed, dropped after the callback.  The
 * owner ends with zbuf__watch_remove() (no new batch picks the watch up)
 * and then zbuf__watch_retire(): its reference waits on a grave list that
 * the thread empties only after looking at the batch that may still name
 * the watch.  on_free runs when the last reference goes, so a watch is
 * freed only when no batch can reach it.
 */
#ifndef ZBUF_SOCK_WATCH_H
#define ZBUF_SOCK_WATCH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define ZBUF__WATCH_HIDDEN __attribute__((visibility("hidden")))

/* While any watch's on_tick asks for it, the ticks come this often. */
#define ZBUF__WATCH_TICK_MS 1000

struct zbuf__watch {
    int fd;    /* watched for EPOLLERR, edge-triggered */
    void *ctx; /* the callbacks' argument */
    /* The descriptor reported EPOLLERR.  On the watcher thread, no lock
     * held, with a reference taken for the call. */
    void (*on_error)(void *ctx);
    /* Periodic look (may be NULL); `now` in CLOCK_MONOTONIC ms.  On the
     * watcher thread under its lock: must not call zbuf__watch_*().
     * Returns whether it wants further ticks. */
    bool (*on_tick)(void *ctx, int64_t now);
    /* The last reference went: free the owner.  Any thread, no lock held. */
    void (*on_free)(void *ctx);

    /* The watcher's bookkeeping. */
    atomic_uint refs;               /* the owner's + one per batch in progress */
    bool added;                     /* registered (zbuf__watch_add() succeeded) */
    bool removed;                   /* unregistered: no new batch picks it up */
    struct zbuf__watch *next_added; /* the watcher's list, under its lock */
    struct zbuf__watch *next_grave; /* retired, waiting for the thread's batch */
};

/* Fill in a watch; the caller holds the one reference. */
ZBUF__WATCH_HIDDEN void zbuf__watch_init(struct zbuf__watch *w, int fd, void *ctx,
                                         void (*on_error)(void *),
                                         bool (*on_tick)(void *, int64_t),
                                         void (*on_free)(void *));
/* Register: the thread starts on the first watch.  0 or -errno (nothing
 * registered). */
ZBUF__WATCH_HIDDEN int zbuf__watch_add(struct zbuf__watch *w);
/* Unregister; a batch in progress may still hold the watch.  `fd_valid`
 * false: the number may be another file's by now, so it is not passed to
 * epoll (its registration goes with its file).  No-op unless added. */
ZBUF__WATCH_HIDDEN void zbuf__watch_remove(struct zbuf__watch *w, bool fd_valid);
/* Drop the owner's reference once no batch can reach the watch. */
ZBUF__WATCH_HIDDEN void zbuf__watch_retire(struct zbuf__watch *w);
/* Drop one reference (the last runs on_free). */
ZBUF__WATCH_HIDDEN void zbuf__watch_unref(struct zbuf__watch *w);

#endif /* ZBUF_SOCK_WATCH_H */
