/* SPDX-License-Identifier: MIT */
/*
 * Private declarations of the socket adapter (zbuf-sock).  Names are
 * zbuf__sock_ (double underscore) and hidden.
 *
 * Zero-copy bookkeeping
 * ---------------------
 * The kernel numbers the successful MSG_ZEROCOPY send calls of a socket with
 * a 32-bit counter that starts at 0 and wraps.  A notification names an
 * inclusive range [lo, hi] of those numbers; ranges may come out of order
 * (retransmissions, teardown) and consecutive ones may be merged.  We number
 * the same calls with a 64-bit id (id mod 2^32 is the kernel's number) and
 * keep one record per call in a ring indexed by id:
 *
 *      base                      next        next + reserved
 *       |  PENDING / DONE ...      |  RESERVED  |
 *
 * - ids below `base` are finished and forgotten;
 * - [base, next) are calls the kernel accepted: PENDING (its bytes held in
 *   `z`) or DONE (completed out of order, waiting for `base` to reach it);
 * - [next, next + reserved) are slots of a send call in progress: reserved
 *   before the system call and finalised after it, so that a completion
 *   racing with the return of the system call (the completion thread, or a
 *   loopback ACK processed inside the call) finds its slot (EARLY).
 * A 32-bit number maps to the id `base + (uint32_t)(lo - (uint32_t)base)`,
 * unambiguous because at most 65536 calls are outstanding.
 */
#ifndef ZBUF_SOCK_INTERNAL_H
#define ZBUF_SOCK_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <zbuf/sock.h>

#include "watch.h"

#define ZBUF__SOCK_HIDDEN __attribute__((visibility("hidden")))

enum zbuf__zrec_state {
    ZREC_FREE = 0,     /* slot unused */
    ZREC_RESERVED = 1, /* a send call in progress may use it */
    ZREC_EARLY = 2,    /* reserved, and its completion already arrived */
    ZREC_PENDING = 3,  /* accepted by the kernel, awaiting completion; z holds the bytes */
    ZREC_DONE = 4,     /* completed (z released), below-base bookkeeping only */
};

struct zbuf__zrec {
    zbuf_t *z;      /* the bytes the kernel may still read (PENDING only) */
    uint64_t seq;   /* event sequence number of the send call */
    size_t bytes;   /* bytes of the call */
    uint8_t state;  /* enum zbuf__zrec_state */
    bool copied;    /* EARLY: the notification said COPIED */
};

struct zbuf_sock {
    int fd;                   /* the socket; owned unless KEEP_FD */
    int type;                 /* SOCK_STREAM, SOCK_DGRAM ... */
    zbuf_sock_opts_t opts;    /* copied at open */

    /* Serialises send calls, so that the ids of one call are contiguous and
     * at most one call has slots reserved. */
    pthread_mutex_t send_lock;

    /* Protects everything below, and the error-queue reads. */
    pthread_mutex_t lock;
    bool zc_capable;          /* SO_ZEROCOPY accepted */
    bool zc_on;               /* sends of zerocopy_min bytes ask for MSG_ZEROCOPY */
    bool closing;             /* zbuf_sock_close() began: no new sends */
    bool fd_gone;             /* the descriptor was closed: no error-queue reads */
    bool fd_stale;            /* the program closed `fd` (its number may be another
                                 socket's now): use hold_fd only */
    unsigned copied_run;      /* COPIED completions in a row */
    unsigned enobufs_run;     /* ENOBUFS answers in a row */
    uint64_t since_off;       /* sends since zc was turned off (re-probe) */
    struct zbuf__zrec *ring;  /* capacity mask + 1, a power of two */
    uint32_t mask;
    uint64_t base, next;      /* see the file comment */
    unsigned reserved;
    uint64_t seq;             /* last event sequence number given */
    int hold_fd;              /* HOLD_FD: duplicate held while sends are outstanding */
    int64_t orphan_since;     /* HOLD_FD: when the program's descriptor was seen gone */
    unsigned releasing;       /* completers releasing records outside the lock */
    zbuf_sock_stats_t st;

    /* ZBUF_SOCK_THREAD: the completion watcher's entry (watch.h), which
     * also counts the references to the handle. */
    struct zbuf__watch watch;
};

#endif /* ZBUF_SOCK_INTERNAL_H */
