/* SPDX-License-Identifier: MIT */
/*
 * Private declarations of zbuf-uring.  Internal non-static names are
 * zbuf__uring_ (double underscore) and hidden.
 *
 * Layout of the library
 * ---------------------
 *   engine.c  what both machineries share: options, the run loop and its
 *             deadlines, the send queue of a socket (struct zu_msg), the
 *             socket and buffer-ring life cycles, wake-ups, the fallback
 *             decision and its log line;
 *   probe.c   zbuf_uring_probe(): what the kernel allows, tried once;
 *   ring.c    the io_uring machinery (struct zu_backend zbuf__uring_ring);
 *   epoll.c   the epoll machinery over zbuf-sock (zbuf__uring_epoll);
 *   vx.c      the zbufSockLib routines on an engine thread.
 *
 * Ownership of the bytes of a send
 * --------------------------------
 * A zbuf given to zbuf_uring_send() becomes a struct zu_msg on its socket's
 * queue.  The queue's zbufs hold the bytes not yet taken by the kernel, in
 * order.  A request points into them (iovecs); when it completes with n
 * bytes, n bytes are cut from the front of the queue (a head cut never
 * allocates, so it cannot fail).  A plain request's bytes are thereby
 * released.  A zero-copy request took, *before* it was submitted, its own
 * references to the bytes it covers (op->held, a zbuf_dup(): if that fails
 * the request goes out plain instead, so nothing can fail after the kernel
 * took the bytes), trims them to n at completion (a tail cut: cannot fail)
 * and deletes them at the notification.  Release callbacks thus run when
 * the last of those references goes, never before the kernel's word.
 *
 * Threads
 * -------
 * An engine is used by the thread that created it.  Other threads touch
 * only: zbuf_uring_wake() (an eventfd write) and, through the pool
 * watchers of buffer rings (which run on whichever thread returns a
 * buffer), the atomic `refill` flag of the engine and `starving` of a ring.
 */
#ifndef ZBUF_URING_INTERNAL_H
#define ZBUF_URING_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <zbuf/sock.h>
#include <zbuf/uring.h>

#include "coalesce.h"

#define ZBUF__URING_HIDDEN __attribute__((visibility("hidden")))

/* Largest iovec array of one request (the kernel's UIO_MAXIOV). */
#define ZU_IOV_MAX 1024
/* Inline iovecs of a datagram request; more segments are bounced. */
#define ZU_DGRAM_IOV 8
/* Fixed-buffer table: slots registered at setup, pools at most. */
#define ZU_FIXED_SLOTS 64
#define ZU_POOLS_MAX 16
/* Zero copy only for requests whose segments average at least this: the
 * kernel puts each segment of a zero-copy request in fragments of its own,
 * at most 17 per packet, so smaller ones make small packets (and pin a page
 * for a few bytes). */
#define ZU_ZC_MIN_SEG 4096
/* Largest registered buffer the kernel accepts (1 GiB). */
#define ZU_FIXED_MAX_LEN (1ul << 30)
/* Longest wait of the second close phase, at least. */
#define ZU_ABORT_MIN_MS 100
/* conn_status / shut_status: no result waiting. */
#define ZU_NO_STATUS 1
/* Space a datagram's buffer keeps in front of its payload: the most a
 * datagram may have is the buffer size less this (on both machineries). */
#define ZU_DGRAM_HEADROOM (sizeof(struct zu_recvmsg_out) + sizeof(struct sockaddr_storage))
/* Room for the sender's address a multishot recvmsg asks for: enough for
 * every family (sockaddr_un is the longest, 110 bytes), and so that the
 * payload starts 128 bytes into the buffer, on a cache line (pool buffers
 * are 64-byte aligned; a copy to a line-aligned destination is cheaper). */
#define ZU_DGRAM_NAMELEN 112

/* Layout of struct io_uring_recvmsg_out, for the epoll side's headroom
 * figure without including liburing there. */
struct zu_recvmsg_out {
    uint32_t namelen, controllen, payloadlen, flags;
};

/* The longest datagram payload a ring buffer of buf_size bytes takes. */
static inline size_t zu_dgram_room(size_t buf_size)
{
    return buf_size > ZU_DGRAM_HEADROOM ? buf_size - ZU_DGRAM_HEADROOM : 1;
}

/* --------------------------------------------------------------- messages */

/* One zbuf queued for sending. */
struct zu_msg {
    struct zu_msg *next;
    zbuf_t *z;                        /* the bytes not yet taken by the kernel */
    zbuf_uring_send_cb cb;
    void *arg;
    int flags;                        /* send() flags of this zbuf */
    int status;                       /* result, once finished (deferred callbacks) */
    socklen_t addrlen;                /* datagram destination, when given */
    struct sockaddr_storage *addr;    /* allocated only when given */
};

/* ------------------------------------------------------------- operations */

enum zu_kind {
    ZU_OP_IGNORE = 0, /* user_data 0: cancellations and the like */
    ZU_OP_SEND,       /* stream request over the queue's front */
    ZU_OP_DGRAM,      /* one datagram */
    ZU_OP_RECV,       /* multishot receive */
    ZU_OP_RECV_ONCE,  /* one receive (zbufSockLib) */
    ZU_OP_ACCEPT,     /* multishot accept */
    ZU_OP_CONNECT,
    ZU_OP_SHUTDOWN,
    ZU_OP_WAKE,       /* read of the wake eventfd */
};

/*
 * A request the kernel holds.  user_data is its address.  Requests of a
 * socket that are part of its state (receive, accept, connect, shutdown)
 * are embedded in it; sends are allocated (a zero-copy send outlives its
 * completion until the notification).
 */
struct zu_op {
    uint8_t kind;              /* enum zu_kind */
    bool in_kernel;            /* submitted, final CQE not yet seen */
    bool zc;                   /* zero-copy request: a notification follows */
    bool fixed;                /* on registered buffers */
    bool report;               /* asked IORING_SEND_ZC_REPORT_USAGE */
    bool notif_wait;           /* first CQE seen, notification pending */
    bool cancelled;            /* a cancel was submitted for it */
    bool copied;               /* ZU_OP_DGRAM: sent from a bounce copy */
    struct zbuf_uring_sock *s; /* NULL once detached from a freed socket */
    zbuf_uring_bufring_t *br;  /* receives: the ring it picks buffers from */
    struct zu_op *next;        /* free list */
    struct zu_op *lprev, *lnext; /* allocated requests: on their socket's list, or
                                    on the engine's list of detached ones */
    bool multishot;            /* receives: armed multishot */
    bool bundle;               /* receives: armed with IORING_RECVSEND_BUNDLE */
    uint32_t rx_wait;          /* receives: the engine's wait that last saw a
                                  completion of this one (ring.c: rx_socks) */
    size_t bytes;              /* bytes asked */
    zbuf_t *held;              /* zero copy: the bytes kept until the notification */
    struct zu_msg *msg;        /* ZU_OP_DGRAM: its message (until the first CQE) */
    struct msghdr mh;          /* ZU_OP_DGRAM */
    struct iovec iov[ZU_DGRAM_IOV];
    void *bounce;              /* ZU_OP_DGRAM: an iovec array for many segments, or a copy
                                  of a datagram with file or too many segments */
    /* ZU_OP_RECV_ONCE: where the result goes (vx.c). */
    void (*once_cb)(struct zbuf_uring_sock *s, ssize_t n, zbuf_t *z, const zbuf_uring_rx_t *rx,
                    void *arg);
    void *once_arg;
    struct sockaddr_storage from; /* ZU_OP_RECV_ONCE on a datagram socket */
};

/* --------------------------------------------------------------- sockets */

enum {
    ZS_CLOSING = 1u << 0,   /* zbuf_uring_sock_close() called */
    ZS_RECVING = 1u << 1,   /* the application wants receive callbacks */
    ZS_ACCEPTING = 1u << 2, /* the application wants accept callbacks */
    ZS_CONNECTING = 1u << 3,
    ZS_SHUT_WANTED = 1u << 4, /* shutdown queued behind the sends */
    ZS_SHUT_DONE = 1u << 5,   /* SHUT_WR done (or failed): no more sends */
    ZS_WAITING = 1u << 6,     /* on its buffer ring's list of sockets waiting for buffers */
    ZS_DIRTY = 1u << 7,       /* on the engine's list of sockets to flush */
    ZS_ABORTED = 1u << 8,     /* close: connection aborted (second phase) */
    ZS_DUE = 1u << 9,         /* on the engine's list of sockets with callbacks due */
};

/* A receive completed while the application had stopped receiving. */
struct zu_stash {
    struct zu_stash *next;
    zbuf_t *z;
    ssize_t n;
    int flags;
    socklen_t fromlen;
    struct sockaddr_storage from;
};

struct zbuf_uring_sock {
    zbuf_uring_t *u;
    int fd;
    int type;                      /* SOCK_STREAM, SOCK_DGRAM ... */
    unsigned state;                /* ZS_* */
    zbuf_uring_sock_opts_t opts;   /* copied at open, defaults applied */
    int send_err;                  /* stream: sticky error, later sends fail with it */

    /* Send queue (see the file comment). */
    struct zu_msg *qhead, *qtail;
    size_t qbytes;                 /* bytes in the queue */
    struct zu_msg *done_head, *done_tail; /* finished messages whose callbacks are due */
    struct zu_op *send_op;         /* stream: the request in flight */
    struct iovec *iov;             /* stream: its iovecs (ZU_IOV_MAX, allocated at first use) */
    struct msghdr mh;              /* stream: its header */
    unsigned dgram_inflight;       /* datagram requests in the kernel */
    size_t inflight_bytes;         /* datagram bytes in those requests */
    struct zu_op *ops;             /* allocated requests (sends, single receives) not
                                      finished: in the kernel or awaiting notification */
    bool plain_once;               /* the next request goes plain (a zero-copy one was
                                      refused for memory) */
    unsigned kops;                 /* requests in the kernel (the socket may not be freed) */

    /* Zero copy. */
    bool zc_capable;               /* the socket takes zero-copy requests */
    bool zc_on;                    /* requests of zc_min bytes ask for it now */
    bool zc_proven;                /* a notification said "not copied" since zc_on */
    bool zc_probing;               /* unproven: the one zero-copy request allowed in
                                      flight is out */
    unsigned copied_run;
    uint64_t since_off;

    /* Receive. */
    zbuf_uring_bufring_t *br;
    zbuf_uring_recv_cb recv_cb;
    void *recv_arg;
    struct zu_op recv_op;
    struct msghdr recv_mh;         /* datagram multishot recvmsg template */
    struct zbuf_uring_sock *next_wait; /* on br's waiting list */
    struct zu_stash *stash_head, *stash_tail; /* received while stopped, in order */
    int rx_err;                    /* a receive lost for want of memory: reported after
                                      the stash */

    /* Accept, connect, shutdown. */
    zbuf_uring_accept_cb accept_cb;
    void *accept_arg;
    struct zu_op accept_op;
    int *accepted;                 /* connections accepted while stopped */
    unsigned naccepted, capaccepted;
    zbuf_uring_status_cb conn_cb;
    void *conn_arg;
    struct zu_op conn_op;
    struct sockaddr_storage conn_addr;
    socklen_t conn_len;
    int conn_status;               /* epoll: result waiting for its callback, or
                                      ZU_NO_STATUS */
    zbuf_uring_status_cb shut_cb;
    void *shut_arg;
    struct zu_op shut_op;
    int shut_status;               /* as conn_status */

    /* Close. */
    zbuf_uring_close_cb close_cb;
    void *close_arg;
    int close_timeout;
    int64_t deadline;              /* ms; 0: none */

    /* Engine lists. */
    struct zbuf_uring_sock *prev, *next;  /* all sockets */
    struct zbuf_uring_sock *next_dirty;
    struct zbuf_uring_sock *next_due;
    struct zbuf_uring_sock *prev_closing, *next_closing; /* the engine's closing list */

    /* epoll machinery. */
    zbuf_sock_t *h;                /* zbuf-sock handle (sends, zero copy) */
    int fl_saved;                  /* the descriptor's file flags before open */
    bool rx_ready;                 /* edge-triggered: the socket may have bytes */
    bool tx_ready;                 /* edge-triggered: the socket may take bytes */
    unsigned rx_want;              /* pool buffers the next receive takes; 0: the most */

    zbuf_uring_sock_stats_t st;
};

/* ----------------------------------------------------------- buffer rings */

struct zbuf_uring_bufring {
    zbuf_uring_t *u;
    zbuf_pool_t *pool;
    size_t buf_size;
    uint16_t bgid;
    unsigned entries;              /* power of two */
    void *ring;                    /* struct io_uring_buf_ring, page aligned */
    size_t ring_bytes;
    zbuf_buf_t **slot;             /* bid -> the ring's reference, NULL when out */
    uint16_t *ring_bid;            /* ring position (mod entries) -> bid put there */
    uint32_t *pos_of;              /* bid -> ring position it was put at */
    uint32_t tail;                 /* ring positions filled so far (our copy of the tail) */
    uint16_t *free_bids;           /* bids not in the ring */
    unsigned nfree;
    unsigned target;               /* buffers to keep in the ring (adapts to the traffic) */
    size_t hot_bytes;              /* the most bytes of buffers per receiving socket (ring.c) */
    uint64_t seen_consumed;        /* st.consumed / st.empty at the last adaptation */
    uint64_t seen_empty;
    unsigned armed;                /* sockets' receive requests on it in the kernel */
    unsigned users;                /* sockets receiving with it */
    struct zbuf_uring_sock *wait_head; /* sockets waiting for buffers */
    atomic_bool starving;          /* a socket waits and the ring is empty */
    bool registered;               /* registered with the kernel */
    zbuf_uring_bufring_stats_t st;
    struct zbuf_uring_bufring *next;
};

/* ---------------------------------------------------------------- engine */

struct zu_region {
    zbuf_pool_t *pool;
    uintptr_t base;
    size_t len;
    unsigned slot;                 /* first fixed-buffer slot */
    unsigned nslots;               /* 1 GiB each at most */
};

struct zu_backend;

struct zbuf_uring {
    const struct zu_backend *be;
    zbuf_uring_opts_t opts;
    zbuf_uring_probe_t probe;
    bool running;                  /* inside zbuf_uring_run(): callbacks may be running */
    bool destroying;

    /* io_uring machinery (ring.c); opaque here. */
    void *ring;
    bool report_usage;             /* IORING_SEND_ZC_REPORT_USAGE works */
    bool fixed_vectored;           /* SENDMSG_ZC on fixed buffers works */
    unsigned prepared;             /* SQEs prepared and not yet submitted */
    unsigned rx_reaped;            /* receive completions the last wait brought */
    unsigned rx_socks;             /* and the receives (sockets) they came from */
    uint32_t wait_seq;             /* waits so far (rx_socks counts each receive once) */
    struct zu_rate rx_rate;        /* how fast they come (coalesce.h) */
    int notify_fd;                 /* eventfd registered with the ring, or -1 */
    struct zu_op wake_op;
    uint64_t wake_buf;
    struct zu_region regions[ZU_POOLS_MAX];
    unsigned nregions;
    bool slot_used[ZU_FIXED_SLOTS];
    bool fixed_ready;              /* the sparse table is registered */

    /* epoll machinery (epoll.c). */
    int epfd;

    int wake_fd;                   /* eventfd for zbuf_uring_wake() */
    atomic_bool wake_sent;         /* a wake-up is in flight: others need not write */
    atomic_bool refill;            /* some ring's pool got buffers back */

    struct zbuf_uring_sock *socks; /* all sockets */
    size_t nsocks;
    struct zbuf_uring_sock *dirty; /* sockets with sends to push */
    struct zbuf_uring_sock *due;   /* sockets with callbacks or a close due */
    struct zbuf_uring_sock *closing; /* sockets being closed (their deadlines) */
    zbuf_uring_bufring_t *rings;
    uint16_t next_bgid;
    struct zu_op *detached;        /* zero-copy requests of freed sockets, awaiting
                                      notification (lprev/lnext) */
    struct zu_msg *free_msgs;
    struct zu_op *free_ops;
    unsigned nfree_msgs, nfree_ops;
    zbuf_uring_stats_t st;
};

/* One machinery.  Every function runs on the engine's thread. */
struct zu_backend {
    zbuf_uring_backend_t id;
    int (*init)(zbuf_uring_t *u);
    void (*fini)(zbuf_uring_t *u);
    /* Submit, wait up to timeout_ms, dispatch.  Returns completions handled. */
    int (*wait)(zbuf_uring_t *u, int timeout_ms);
    int (*submit)(zbuf_uring_t *u);
    int (*fd)(zbuf_uring_t *u);
    int (*sock_open)(struct zbuf_uring_sock *s);
    void (*sock_free)(struct zbuf_uring_sock *s);
    /* Push queued sends of a socket (called for dirty sockets). */
    void (*flush)(struct zbuf_uring_sock *s);
    int (*recv_arm)(struct zbuf_uring_sock *s);
    void (*recv_cancel)(struct zbuf_uring_sock *s);
    int (*accept_arm)(struct zbuf_uring_sock *s);
    void (*accept_cancel)(struct zbuf_uring_sock *s);
    int (*connect)(struct zbuf_uring_sock *s);
    /* Close began: cancel what the kernel holds that need not finish. */
    void (*close_begin)(struct zbuf_uring_sock *s);
    /* First close deadline passed: abort the connection. */
    void (*close_abort)(struct zbuf_uring_sock *s);
    /* Whether zero-copy requests still await notification. */
    bool (*close_pending)(struct zbuf_uring_sock *s);
    int (*bufring_init)(zbuf_uring_bufring_t *br);
    void (*bufring_fini)(zbuf_uring_bufring_t *br);
    /* Put pool buffers into the ring; returns buffers in the ring after. */
    unsigned (*bufring_refill)(zbuf_uring_bufring_t *br);
    int (*register_pool)(zbuf_uring_t *u, zbuf_pool_t *p);
    int (*unregister_pool)(zbuf_uring_t *u, zbuf_pool_t *p);
    void (*sock_stats)(const struct zbuf_uring_sock *s, zbuf_uring_sock_stats_t *st);
};

ZBUF__URING_HIDDEN extern const struct zu_backend zbuf__uring_ring;
ZBUF__URING_HIDDEN extern const struct zu_backend zbuf__uring_epoll;

/* ----------------------------------------------------- engine.c services */

ZBUF__URING_HIDDEN int64_t zbuf__uring_now_ms(void);
ZBUF__URING_HIDDEN struct zu_op *zbuf__uring_op_get(zbuf_uring_t *u, enum zu_kind kind,
                                                    struct zbuf_uring_sock *s);
ZBUF__URING_HIDDEN void zbuf__uring_op_put(zbuf_uring_t *u, struct zu_op *op);
ZBUF__URING_HIDDEN void zbuf__uring_msg_put(zbuf_uring_t *u, struct zu_msg *m);

/* Mark a socket as having sends to push at the next flush. */
ZBUF__URING_HIDDEN void zbuf__uring_dirty(struct zbuf_uring_sock *s);
/* Cut `n` bytes from the front of the queue: finished messages move to the
 * done list with status 0.  Returns bytes cut. */
ZBUF__URING_HIDDEN size_t zbuf__uring_consume(struct zbuf_uring_sock *s, size_t n);
/* Gather the front of a stream's queue (messages of the front's flags,
 * up to ZU_IOV_MAX iovecs and opts.batch_max bytes, stopping before a
 * message of `stop_at` bytes or more other than the front) into s->iov,
 * which must be allocated.  Returns the iovec count and *bytes covered; 0
 * with *file_front set when the front message starts with a file segment. */
ZBUF__URING_HIDDEN unsigned zbuf__uring_gather(struct zbuf_uring_sock *s, size_t stop_at,
                                               size_t *bytes, bool *file_front);
/* The front message was sent whole (its zbuf is empty): finish it. */
ZBUF__URING_HIDDEN void zbuf__uring_pop_done(struct zbuf_uring_sock *s);
/* Finish the front message with `status` (its rest goes back to its callback). */
ZBUF__URING_HIDDEN void zbuf__uring_fail_front(struct zbuf_uring_sock *s, int status);
/* Finish every queued message with `status`. */
ZBUF__URING_HIDDEN void zbuf__uring_fail_all(struct zbuf_uring_sock *s, int status);
/* A message finished: queue its callback (runs at the end of dispatch). */
ZBUF__URING_HIDDEN void zbuf__uring_msg_done(struct zbuf_uring_sock *s, struct zu_msg *m,
                                             int status);
/* Put a socket on the list of those with callbacks or a close due. */
ZBUF__URING_HIDDEN void zbuf__uring_due(struct zbuf_uring_sock *s);
/* Run the due callbacks, and free the sockets whose close has finished. */
ZBUF__URING_HIDDEN void zbuf__uring_deferred(zbuf_uring_t *u);
/* An accepted connection: to the application, or kept while stopped. */
ZBUF__URING_HIDDEN void zbuf__uring_accepted(struct zbuf_uring_sock *s, int fd);

/* Could a request of `bytes` in `nseg` segments go zero copy at all, on
 * registered buffers or not?  No side effect: a no means that
 * zbuf__uring_zc_want() would say no too, so that a plain request is
 * prepared without looking for a registered buffer. */
ZBUF__URING_HIDDEN bool zbuf__uring_zc_maybe(const struct zbuf_uring_sock *s, size_t bytes,
                                             size_t nseg);
/* Zero-copy policy: may a request of `bytes` ask for it?  A yes counts as
 * the request being made (call zbuf__uring_zc_unmade() if it is not). */
ZBUF__URING_HIDDEN bool zbuf__uring_zc_want(struct zbuf_uring_sock *s, size_t bytes,
                                            size_t nseg, bool fixed);
ZBUF__URING_HIDDEN void zbuf__uring_zc_unmade(struct zbuf_uring_sock *s);
/* A notification arrived (copied: the kernel says it copied). */
ZBUF__URING_HIDDEN void zbuf__uring_zc_notified(struct zbuf_uring_sock *s, bool copied);

/* Deliver received data (or end/error) to the application, or stash it. */
ZBUF__URING_HIDDEN void zbuf__uring_deliver(struct zbuf_uring_sock *s, ssize_t n, zbuf_t *z,
                                            const zbuf_uring_rx_t *rx);
/* The socket's receive stopped for want of buffers: wait on its ring. */
ZBUF__URING_HIDDEN void zbuf__uring_recv_starved(struct zbuf_uring_sock *s);
/* Refill every ring and re-arm waiting sockets that can go on. */
ZBUF__URING_HIDDEN void zbuf__uring_refill_all(zbuf_uring_t *u);

/* The socket's last request left the kernel: free it if it is closed. */
ZBUF__URING_HIDDEN void zbuf__uring_kop_done(struct zbuf_uring_sock *s);
/* Allocated requests: link to / unlink from the socket's list (or, for
 * op->s == NULL, the engine's detached list). */
ZBUF__URING_HIDDEN void zbuf__uring_op_link(zbuf_uring_t *u, struct zu_op *op);
ZBUF__URING_HIDDEN void zbuf__uring_op_unlink(zbuf_uring_t *u, struct zu_op *op);

/* Internal single receive (vx.c): one receive into a buffer of br. */
ZBUF__URING_HIDDEN int zbuf__uring_recv_once(zbuf_uring_sock_t *s, zbuf_uring_bufring_t *br,
                                             size_t max, int flags,
                                             void (*cb)(struct zbuf_uring_sock *, ssize_t, zbuf_t *,
                                                        const zbuf_uring_rx_t *, void *),
                                             void *arg);
ZBUF__URING_HIDDEN int zbuf__uring_ring_recv_once(struct zbuf_uring_sock *s, struct zu_op *op,
                                                  size_t max, int flags);

/* Log a line through the engine's options (or standard error). */
ZBUF__URING_HIDDEN void zbuf__uring_log(const zbuf_uring_opts_t *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif /* ZBUF_URING_INTERNAL_H */
