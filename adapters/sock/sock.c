/* SPDX-License-Identifier: MIT */
/*
 * zbufs over Linux sockets: gather sends, datagrams, pool receives,
 * MSG_ZEROCOPY completions and sendfile.
 *
 * The whole adapter rests on one rule of the core: a zbuf's bytes stay
 * valid while some zbuf references their buffers.  A copying send therefore
 * cuts the bytes the kernel accepted from the caller's zbuf (the kernel has
 * copied them); a zero-copy send first duplicates them into a record zbuf
 * (segments shared, no byte copied), so that cutting them from the caller's
 * zbuf drops only the caller's references, and deletes the record when the
 * kernel's completion says the pages are no longer read.  Release callbacks
 * thus run exactly once, from zbuf_delete()/zbuf_cut(), when the last of
 * those references goes.
 *
 * Failure strategy of every send: nothing is removed from the caller's zbuf
 * unless the kernel accepted it; a record is finalised only for a call that
 * returned > 0, which is exactly when the kernel consumed a completion id.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/errqueue.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "sock_internal.h"

#ifndef SO_ZEROCOPY
#define SO_ZEROCOPY 60
#endif
#ifndef MSG_ZEROCOPY
#define MSG_ZEROCOPY 0x4000000
#endif
#ifndef SO_EE_ORIGIN_ZEROCOPY
#define SO_EE_ORIGIN_ZEROCOPY 5
#endif
#ifndef SO_EE_CODE_ZEROCOPY_COPIED
#define SO_EE_CODE_ZEROCOPY_COPIED 1
#endif

/* Largest iovec array of one call (the kernel's UIO_MAXIOV). */
#define ZS_IOV_MAX IOV_MAX
/* Datagrams per sendmmsg()/recvmmsg() call. */
#define ZS_BATCH 64
/* Buffers per stream receive. */
#define ZS_RECV_BUFS 64
/* Size of library buffers when no pool is given. */
#define ZS_HEAP_CHUNK 65536
/* Largest record count zbuf_sock_open() accepts. */
#define ZS_MAX_OUTSTANDING 65536u

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------ events */

static void emit(struct zbuf_sock *s, zbuf_sock_event_type_t type, uint64_t seq, size_t bytes,
                 bool zerocopy, bool copied)
{
    if (s == NULL || s->opts.on_event == NULL)
        return;
    zbuf_sock_event_t ev = {
        .type = type, .seq = seq, .bytes = bytes, .zerocopy = zerocopy, .copied = copied,
    };
    s->opts.on_event(s, &ev, s->opts.event_arg);
}

/* ------------------------------------------------------ completion records */

/* Records to release, gathered under the lock and released outside it. */
struct rel {
    zbuf_t *z;
    uint64_t seq;
    size_t bytes;
    bool copied;
};
#define REL_BATCH 128

static void release_all(struct zbuf_sock *s, struct rel *r, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        zbuf_delete(r[i].z);
        emit(s, ZBUF_SOCK_RELEASED, r[i].seq, r[i].bytes, true, r[i].copied);
    }
}

/* Move base past the finished slots.  Under s->lock. */
static void advance_base(struct zbuf_sock *s)
{
    while (s->base < s->next) {
        struct zbuf__zrec *r = &s->ring[s->base & s->mask];
        if (r->state != ZREC_DONE)
            break;
        r->state = ZREC_FREE;
        s->base++;
    }
}

/* The COPIED fallback.  Under s->lock. */
static void note_completion(struct zbuf_sock *s, bool copied)
{
    s->st.zc_completed++;
    if (!copied) {
        s->copied_run = 0;
        return;
    }
    s->st.zc_copied++;
    s->copied_run++;
    if (s->zc_on && !(s->opts.flags & ZBUF_SOCK_ZEROCOPY_ALWAYS) &&
        s->copied_run >= s->opts.copied_limit) {
        s->zc_on = false;
        s->since_off = 0;
        s->st.zc_turned_off++;
    }
}

/*
 * Mark ids [*pos, end) completed.  Records whose bytes can go are moved to
 * out[] (room for `room`); returns how many, leaving *pos where it stopped
 * when out[] filled up.  Under s->lock.
 */
static unsigned mark_range(struct zbuf_sock *s, uint64_t *pos, uint64_t end, bool copied,
                           struct rel *out, unsigned room)
{
    unsigned n = 0;
    uint64_t lim = s->next + s->reserved;
    for (; *pos < end && n < room; ++*pos) {
        uint64_t id = *pos;
        if (id < s->base || id >= lim) {
            s->st.stray++;
            continue;
        }
        struct zbuf__zrec *r = &s->ring[id & s->mask];
        switch (r->state) {
        case ZREC_PENDING:
            out[n++] = (struct rel){ .z = r->z, .seq = r->seq, .bytes = r->bytes, .copied = copied };
            r->z = NULL;
            r->state = ZREC_DONE;
            s->st.outstanding--;
            note_completion(s, copied);
            break;
        case ZREC_RESERVED:
            r->state = ZREC_EARLY; /* the sender will release it when it finalises */
            r->copied = copied;
            break;
        default:
            s->st.stray++;
            break;
        }
    }
    advance_base(s);
    return n;
}

/* Close the duplicate descriptor once nothing is outstanding.  Under lock. */
static void maybe_drop_hold(struct zbuf_sock *s)
{
    if (s->hold_fd >= 0 && s->st.outstanding == 0 && s->reserved == 0) {
        close(s->hold_fd);
        s->hold_fd = -1;
    }
}

/* The descriptor to read completions from, or -1.  Under lock. */
static int err_fd(const struct zbuf_sock *s)
{
    if (s->hold_fd >= 0)
        return s->hold_fd;
    return s->fd_stale || s->fd_gone ? -1 : s->fd;
}

int zbuf_sock_forget_fd(zbuf_sock_t *s)
{
    if (s == NULL)
        return -EINVAL;
    pthread_mutex_lock(&s->lock);
    s->fd_stale = true;
    s->closing = true;
    pthread_mutex_unlock(&s->lock);
    return 0;
}

/*
 * Read one notification from the error queue.  Returns 1 with the range
 * and the COPIED bit, 0 when the queue is empty, 2 for a message that is not
 * a zero-copy notification (dropped).  Under lock.
 */
static int read_notification(struct zbuf_sock *s, uint32_t *lo, uint32_t *hi, bool *copied)
{
    char control[128];
    struct msghdr mh = { .msg_control = control, .msg_controllen = sizeof control };
    int efd = err_fd(s);
    ssize_t r;
    if (efd < 0)
        return 0;
    do
        r = recvmsg(efd, &mh, MSG_ERRQUEUE | MSG_DONTWAIT);
    while (r < 0 && errno == EINTR);
    if (r < 0)
        return 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c)) {
        bool v4 = c->cmsg_level == SOL_IP && c->cmsg_type == IP_RECVERR;
        bool v6 = c->cmsg_level == SOL_IPV6 && c->cmsg_type == IPV6_RECVERR;
        if (!v4 && !v6)
            continue;
        struct sock_extended_err ee;
        memcpy(&ee, CMSG_DATA(c), sizeof ee);
        if (ee.ee_errno != 0 || ee.ee_origin != SO_EE_ORIGIN_ZEROCOPY)
            continue;
        *lo = ee.ee_info;
        *hi = ee.ee_data;
        *copied = (ee.ee_code & SO_EE_CODE_ZEROCOPY_COPIED) != 0;
        return 1;
    }
    return 2;
}

/*
 * Apply one notification: the kernel's numbers [lo, hi] are done.  Releases
 * the records outside the lock, in batches.  Returns how many.
 */
static int process_range(struct zbuf_sock *s, uint32_t lo, uint32_t hi, bool copied)
{
    struct rel out[REL_BATCH];
    int total = 0;
    pthread_mutex_lock(&s->lock);
    /* 32-bit kernel numbers to our 64-bit ids, relative to base. */
    uint64_t pos = s->base + (uint32_t)(lo - (uint32_t)s->base);
    uint64_t end = pos + (uint64_t)(uint32_t)(hi - lo) + 1;
    for (;;) {
        unsigned n = mark_range(s, &pos, end, copied, out, REL_BATCH);
        maybe_drop_hold(s);
        if (n > 0)
            s->releasing++; /* zbuf_sock_flush() waits for us too */
        pthread_mutex_unlock(&s->lock);
        if (n == 0)
            return total;
        release_all(s, out, n);
        total += (int)n;
        pthread_mutex_lock(&s->lock);
        s->releasing--;
        if (pos >= end) {
            pthread_mutex_unlock(&s->lock);
            return total;
        }
    }
}

int zbuf_sock_complete(zbuf_sock_t *s)
{
    if (s == NULL)
        return -EINVAL;
    int total = 0;
    for (;;) {
        uint32_t lo = 0, hi = 0;
        bool copied = false;
        int k = 0;
        pthread_mutex_lock(&s->lock);
        /* Nothing outstanding: nothing to read (and the descriptor may
         * already be another socket's, for a handle that borrows it). */
        if (!s->fd_gone && (s->st.outstanding > 0 || s->reserved > 0))
            k = read_notification(s, &lo, &hi, &copied);
        else
            maybe_drop_hold(s);
        pthread_mutex_unlock(&s->lock);
        if (k == 0)
            return total;
        if (k == 1)
            total += process_range(s, lo, hi, copied);
    }
}

/* Test hooks (hidden; the tests link the static library). */
ZBUF__SOCK_HIDDEN int zbuf__sock_test_notify(struct zbuf_sock *s, uint32_t lo, uint32_t hi,
                                             bool copied);
ZBUF__SOCK_HIDDEN void zbuf__sock_test_set_ids(struct zbuf_sock *s, uint64_t id);

int zbuf__sock_test_notify(struct zbuf_sock *s, uint32_t lo, uint32_t hi, bool copied)
{
    return process_range(s, lo, hi, copied);
}

void zbuf__sock_test_set_ids(struct zbuf_sock *s, uint64_t id)
{
    pthread_mutex_lock(&s->lock);
    s->base = s->next = id;
    pthread_mutex_unlock(&s->lock);
}

/*
 * Decide whether `count` send calls of `bytes` each may ask for zero copy,
 * and reserve their slots.  Returns false (nothing reserved) when they are
 * to be sent copying.
 */
static bool zc_begin(struct zbuf_sock *s, unsigned count, size_t bytes)
{
    if (s == NULL || !s->zc_capable || bytes < s->opts.zerocopy_min || bytes == 0)
        return false;
    for (int attempt = 0;; attempt++) {
        pthread_mutex_lock(&s->lock);
        if (!s->zc_on && s->opts.reprobe_after != 0 && ++s->since_off >= s->opts.reprobe_after) {
            s->zc_on = true;
            s->copied_run = 0;
        }
        if (!s->zc_on || s->closing) {
            pthread_mutex_unlock(&s->lock);
            return false;
        }
        if (s->next + count - s->base <= (uint64_t)s->mask + 1) {
            for (unsigned i = 0; i < count; i++)
                s->ring[(s->next + i) & s->mask] = (struct zbuf__zrec){ .state = ZREC_RESERVED };
            s->reserved = count;
            pthread_mutex_unlock(&s->lock);
            return true;
        }
        if (attempt > 0) {
            s->st.zc_capped++;
            pthread_mutex_unlock(&s->lock);
            return false;
        }
        pthread_mutex_unlock(&s->lock);
        zbuf_sock_complete(s); /* make room, then look again */
    }
}

/* Give back the reserved slots of a call that failed.  Under lock. */
static void zc_unreserve_locked(struct zbuf_sock *s)
{
    for (unsigned i = 0; i < s->reserved; i++) {
        struct zbuf__zrec *r = &s->ring[(s->next + i) & s->mask];
        if (r->state == ZREC_EARLY)
            s->st.stray++; /* a completion for a call that did not happen */
        r->state = ZREC_FREE;
    }
    s->reserved = 0;
}

static void zc_unreserve(struct zbuf_sock *s)
{
    pthread_mutex_lock(&s->lock);
    zc_unreserve_locked(s);
    pthread_mutex_unlock(&s->lock);
}

/*
 * Finalise the next reserved slot for a call that accepted rec's bytes.
 * Returns true when its completion already arrived: *copied says how, and
 * the caller releases rec.  Under lock.
 */
static bool zc_finish_one(struct zbuf_sock *s, zbuf_t *rec, uint64_t seq, size_t bytes,
                          bool *copied)
{
    struct zbuf__zrec *r = &s->ring[s->next & s->mask];
    bool early = r->state == ZREC_EARLY;
    s->next++;
    s->reserved--;
    s->st.zc_sends++;
    if (early) {
        *copied = r->copied;
        r->state = ZREC_DONE;
        note_completion(s, r->copied);
    } else {
        *r = (struct zbuf__zrec){ .z = rec, .seq = seq, .bytes = bytes, .state = ZREC_PENDING };
        s->st.outstanding++;
        if ((s->opts.flags & ZBUF_SOCK_HOLD_FD) && s->hold_fd < 0 && !s->fd_stale)
            s->hold_fd = fcntl(s->fd, F_DUPFD_CLOEXEC, 0); /* -1: we just do without */
    }
    advance_base(s);
    return early;
}

/* An ENOBUFS answer to a zero-copy call: reap, then resend copying. */
static void zc_enobufs(struct zbuf_sock *s)
{
    pthread_mutex_lock(&s->lock);
    zc_unreserve_locked(s);
    s->st.zc_enobufs++;
    pthread_mutex_unlock(&s->lock);
    zbuf_sock_complete(s);
}

static uint64_t next_seq(struct zbuf_sock *s, size_t bytes, bool file)
{
    pthread_mutex_lock(&s->lock);
    uint64_t seq = ++s->seq;
    s->st.sends++;
    s->st.bytes += bytes;
    if (file)
        s->st.file_bytes += bytes;
    pthread_mutex_unlock(&s->lock);
    return seq;
}

/* --------------------------------------------------------------- sending */

/*
 * One sendmsg() of the first `bytes` bytes of z, which mh's iovecs describe
 * (or a bounce copy of them).  On success removes the bytes the kernel took
 * from the front of z and returns their count.  `dgram`: all or nothing.
 */
static ssize_t send_once(struct zbuf_sock *s, int fd, zbuf_t *z, struct msghdr *mh, size_t bytes,
                         int flags, bool bounced)
{
    zbuf_t *rec = NULL;
    bool zc = !bounced && zc_begin(s, 1, bytes);
    if (zc && zbuf_dup(z, 0, bytes, &rec) != 0) {
        zc_unreserve(s);
        zc = false;
    }
    /* One run of memory to a connected socket: send() spares the kernel
     * reading a msghdr and importing an iovec array. */
    bool single = !zc && mh->msg_iovlen == 1 && mh->msg_name == NULL && mh->msg_controllen == 0;
    ssize_t n;
    for (;;) {
        n = single ? send(fd, mh->msg_iov[0].iov_base, mh->msg_iov[0].iov_len, flags)
                   : sendmsg(fd, mh, flags | (zc ? MSG_ZEROCOPY : 0));
        if (n >= 0)
            break;
        int e = errno;
        if (e == EINTR)
            continue;
        if (zc && e == ENOBUFS) {
            zc_enobufs(s);
            zbuf_delete(rec); /* z still references every byte: nothing released */
            rec = NULL;
            zc = false;
            continue;
        }
        if (zc) {
            zc_unreserve(s);
            zbuf_delete(rec);
        }
        return -e;
    }
    if (s != NULL) {
        uint64_t seq = next_seq(s, (size_t)n, false);
        emit(s, ZBUF_SOCK_ACCEPTED, seq, (size_t)n, zc, false);
        if (zc) {
            bool copied = false;
            if ((size_t)n < bytes)
                zbuf_cut(rec, (size_t)n, ZBUF_TO_END, NULL); /* tail cut: cannot fail */
            pthread_mutex_lock(&s->lock);
            bool early = zc_finish_one(s, rec, seq, (size_t)n, &copied);
            pthread_mutex_unlock(&s->lock);
            zbuf_cut(z, 0, (size_t)n, NULL);
            if (early) {
                zbuf_delete(rec);
                emit(s, ZBUF_SOCK_RELEASED, seq, (size_t)n, true, copied);
            }
        } else {
            zbuf_cut(z, 0, (size_t)n, NULL);
            emit(s, ZBUF_SOCK_RELEASED, seq, (size_t)n, false, true);
        }
    } else {
        zbuf_cut(z, 0, (size_t)n, NULL); /* head cut: cannot fail */
    }
    return n;
}

/* Test hook: account a zero-copy send of all of z as if the kernel had
 * accepted it (no system call), so that tests can feed notifications of
 * their own.  Returns the event sequence number, or 0 if zero copy was not
 * chosen. */
ZBUF__SOCK_HIDDEN uint64_t zbuf__sock_test_fake_send(struct zbuf_sock *s, zbuf_t *z);

uint64_t zbuf__sock_test_fake_send(struct zbuf_sock *s, zbuf_t *z)
{
    size_t bytes = zbuf_length(z);
    zbuf_t *rec;
    if (!zc_begin(s, 1, bytes))
        return 0;
    if (zbuf_dup(z, 0, bytes, &rec) != 0) {
        zc_unreserve(s);
        return 0;
    }
    uint64_t seq = next_seq(s, bytes, false);
    bool copied;
    pthread_mutex_lock(&s->lock);
    bool early = zc_finish_one(s, rec, seq, bytes, &copied);
    pthread_mutex_unlock(&s->lock);
    zbuf_cut(z, 0, bytes, NULL);
    if (early)
        zbuf_delete(rec);
    return seq;
}

/*
 * Bytes of a file segment per sendfile() call, so that one blocking call
 * stays bounded.  Larger calls cost less: 63 and 200 MB to a discarding
 * receiver over loopback with CUBIC (7 interleaved runs each, sender's CPU
 * against read+send): calls of 256 KiB 1.75x to 1.94x, 1 MiB 1.91x to
 * 2.21x, 4 MiB 2.00x to 2.36x.  Under BBR, which paces a sendfile() sender
 * on loopback, every size measured slower than read+send and within the
 * noise of each other (docs/benchmarks.md, "File to socket").
 */
#define ZS_SENDFILE_CHUNK (4u << 20)

/* sendfile() of (part of) the file segment at the front of z: at most
 * ZS_SENDFILE_CHUNK bytes, the caller goes on with the rest. */
static ssize_t send_file_seg(struct zbuf_sock *s, int fd, zbuf_t *z, zbuf_seg_t *seg, int ffd,
                             off_t foff)
{
    off_t o = foff + (off_t)zbuf_seg_buf_offset(z, seg);
    size_t len = zbuf_seg_length(z, seg);
    if (len > ZS_SENDFILE_CHUNK)
        len = ZS_SENDFILE_CHUNK;
    ssize_t n;
    do
        n = sendfile(fd, ffd, &o, len);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -errno;
    if (n == 0)
        return -EIO; /* the file ends before the segment does */
    uint64_t seq = s ? next_seq(s, (size_t)n, true) : 0;
    emit(s, ZBUF_SOCK_ACCEPTED, seq, (size_t)n, true, false);
    zbuf_cut(z, 0, (size_t)n, NULL);
    emit(s, ZBUF_SOCK_RELEASED, seq, (size_t)n, true, false);
    return n;
}

/* Bytes of a file segment mapped and sent per system call. */
#define ZS_MAP_WINDOW (8u << 20)

/*
 * Send (part of) the file segment at the front of z by mapping the file and
 * writing from the mapping: one copy, done by the kernel, and no read().
 * Only on request (ZBUF_SOCK_FILE_MMAP): sendfile() costs less CPU on both
 * ends at every receive size measured, even to a local peer, where the
 * kernel copies on delivery anyway (docs/benchmarks.md, "File to socket").
 * The window is mapped with MAP_POPULATE: page tables filled in one go
 * instead of a fault per page when sendmsg() reads it.
 */
static ssize_t send_file_mapped(struct zbuf_sock *s, int fd, zbuf_t *z, zbuf_seg_t *seg, int ffd,
                                off_t foff, int flags)
{
    off_t start = foff + (off_t)zbuf_seg_buf_offset(z, seg);
    size_t len = zbuf_seg_length(z, seg);
    struct stat st;
    if (fstat(ffd, &st) != 0)
        return -errno;
    if (start >= st.st_size)
        return -EIO; /* the file ends before the segment does */
    if ((off_t)len > st.st_size - start)
        len = (size_t)(st.st_size - start);
    if (len > ZS_MAP_WINDOW)
        len = ZS_MAP_WINDOW;
    off_t page = (off_t)sysconf(_SC_PAGESIZE);
    off_t base = start - start % page;
    size_t lead = (size_t)(start - base);
    void *map = mmap(NULL, lead + len, PROT_READ, MAP_SHARED | MAP_POPULATE, ffd, base);
    if (map == MAP_FAILED)
        return send_file_seg(s, fd, z, seg, ffd, foff); /* not mappable: sendfile */
    struct iovec iov = { .iov_base = (char *)map + lead, .iov_len = len };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
    if (len < zbuf_length(z))
        flags |= MSG_MORE;
    ssize_t n;
    do
        n = sendmsg(fd, &mh, flags);
    while (n < 0 && errno == EINTR);
    int e = n < 0 ? errno : 0;
    munmap(map, lead + len);
    if (n < 0)
        return e == EFAULT ? -EIO : -e; /* EFAULT: the file shrank under us */
    if (n == 0)
        return -EAGAIN;
    uint64_t seq = s ? next_seq(s, (size_t)n, true) : 0;
    emit(s, ZBUF_SOCK_ACCEPTED, seq, (size_t)n, false, false);
    zbuf_cut(z, 0, (size_t)n, NULL);
    emit(s, ZBUF_SOCK_RELEASED, seq, (size_t)n, false, true);
    return n;
}

/*
 * The memory segments at the front of z go out by gather writes; a file
 * segment is only looked at when zbuf_iovec() stops before it, so that a
 * zbuf of memory costs one walk of its segments per system call (a small
 * send on loopback is a few microseconds of kernel work: every walk shows).
 */
static ssize_t stream_send(struct zbuf_sock *s, int fd, zbuf_t *z, int flags)
{
    bool file_map = s != NULL && (s->opts.flags & ZBUF_SOCK_FILE_MMAP) != 0;
    if (!zbuf_valid(z) || fd < 0)
        return -EINVAL;
    struct iovec iov[ZS_IOV_MAX];
    size_t total = 0, left = zbuf_length(z);
    flags |= MSG_NOSIGNAL;
    while (left > 0) {
        size_t bytes;
        int cnt = zbuf_iovec(z, 0, ZBUF_TO_END, iov, ZS_IOV_MAX, &bytes);
        zbuf_seg_t *first;
        int ffd;
        off_t foff;
        ssize_t n;
        if (bytes == 0 && (first = zbuf_seg_first(z)) != NULL &&
            zbuf_buf_file(zbuf_seg_buf(z, first), &ffd, &foff)) {
            n = file_map ? send_file_mapped(s, fd, z, first, ffd, foff, flags)
                         : send_file_seg(s, fd, z, first, ffd, foff);
        } else {
            struct msghdr mh = { .msg_iov = iov, .msg_iovlen = (size_t)(cnt > 0 ? cnt : 0) };
            /* More follows at once: let TCP fill segments. */
            n = send_once(s, fd, z, &mh, bytes, bytes < left ? flags | MSG_MORE : flags, false);
        }
        if (n == -EAGAIN || n == -EWOULDBLOCK || n == 0)
            return total > 0 ? (ssize_t)total : -EAGAIN;
        if (n < 0)
            return n;
        total += (size_t)n;
        left -= (size_t)n;
    }
    return (ssize_t)total;
}

/* One sendmmsg() worth of datagrams being sent by dgram_batch(). */
struct dgram_run {
    struct iovec iov[ZS_IOV_MAX];
    struct mmsghdr mm[ZS_BATCH];
    zbuf_t *recs[ZS_BATCH]; /* zero copy: what the kernel may still read */
    size_t lens[ZS_BATCH];
    unsigned k;             /* datagrams in the run */
    void *bounce;           /* the one copied datagram, if any */
    bool want_zc;           /* every datagram of the run reaches the threshold */
    bool zc;                /* the run is sent with MSG_ZEROCOPY */
};

/* Gather into `run` consecutive datagrams of msgs[0..n) that fit and share
 * one zero-copy choice.  0, or a negative errno about msgs[0]. */
static int dgram_gather(struct zbuf_sock *s, zbuf_sock_msg_t *msgs, unsigned n,
                        struct dgram_run *run)
{
    unsigned used = 0;
    run->k = 0;
    run->bounce = NULL;
    run->want_zc = false;
    while (run->k < n && run->k < ZS_BATCH) {
        zbuf_sock_msg_t *m = &msgs[run->k];
        if (!zbuf_valid(m->z))
            return -EINVAL;
        size_t len = zbuf_length(m->z), bytes = 0;
        int cnt = 0;
        if (len > 0) {
            if (used == ZS_IOV_MAX)
                break;
            cnt = zbuf_iovec(m->z, 0, ZBUF_TO_END, run->iov + used, (int)(ZS_IOV_MAX - used),
                             &bytes);
        }
        if (bytes < len) {
            if (run->k > 0)
                break; /* send what we have; this one goes alone */
            /* File segments or too many segments: one bounce copy. */
            run->bounce = malloc(len);
            if (run->bounce == NULL)
                return -ENOMEM;
            ssize_t c = zbuf_copyout(m->z, 0, run->bounce, len);
            if (c < 0) {
                free(run->bounce);
                run->bounce = NULL;
                return (int)c;
            }
            run->iov[0] = (struct iovec){ .iov_base = run->bounce, .iov_len = len };
            cnt = 1;
        }
        bool zc_here = run->bounce == NULL && s != NULL && s->zc_capable &&
                       len >= s->opts.zerocopy_min && len > 0;
        if (run->k > 0 && zc_here != run->want_zc)
            break;
        run->want_zc = zc_here;
        run->mm[run->k].msg_hdr = (struct msghdr){
            .msg_name = m->addrlen ? &m->addr : NULL,
            .msg_namelen = m->addrlen,
            .msg_iov = run->iov + used,
            .msg_iovlen = (size_t)cnt,
        };
        run->mm[run->k].msg_len = 0;
        run->lens[run->k] = len;
        used += (unsigned)cnt;
        run->k++;
        if (run->bounce != NULL)
            break;
    }
    return 0;
}

/* Decide zero copy for the run: reserve its records and take a dup of each
 * datagram for the kernel to read from.  Sets run->zc. */
static void dgram_zc_prepare(struct zbuf_sock *s, zbuf_sock_msg_t *msgs, struct dgram_run *run)
{
    size_t minlen = SIZE_MAX;
    for (unsigned i = 0; i < run->k; i++)
        minlen = run->lens[i] < minlen ? run->lens[i] : minlen;
    run->zc = run->want_zc && zc_begin(s, run->k, minlen);
    if (!run->zc)
        return;
    for (unsigned i = 0; i < run->k; i++) {
        if (zbuf_dup(msgs[i].z, 0, ZBUF_TO_END, &run->recs[i]) != 0) {
            while (i > 0)
                zbuf_delete(run->recs[--i]);
            zc_unreserve(s);
            run->zc = false;
            return;
        }
    }
}

/* sendmmsg() the run, retrying EINTR, and without zero copy after
 * ENOBUFS.  Datagrams sent, or a negative errno. */
static int dgram_sendmmsg(struct zbuf_sock *s, int fd, struct dgram_run *run, int flags)
{
    int r;
    for (;;) {
        r = sendmmsg(fd, run->mm, run->k, flags | (run->zc ? MSG_ZEROCOPY : 0));
        if (r >= 0)
            break;
        int e = errno;
        if (e == EINTR)
            continue;
        if (run->zc) {
            if (e == ENOBUFS)
                zc_enobufs(s);
            else
                zc_unreserve(s);
            for (unsigned i = 0; i < run->k; i++)
                zbuf_delete(run->recs[i]);
            run->zc = false;
            if (e == ENOBUFS)
                continue;
        }
        r = -e;
        break;
    }
    free(run->bounce);
    run->bounce = NULL;
    return r;
}

/* The first `sent` datagrams of the run left: empty them, record or
 * release their bytes and tell the events; drop the records of the rest. */
static void dgram_finish(struct zbuf_sock *s, zbuf_sock_msg_t *msgs, struct dgram_run *run,
                         unsigned sent)
{
    for (unsigned i = 0; i < sent; i++) {
        zbuf_t *z = msgs[i].z;
        size_t len = run->lens[i];
        uint64_t seq = s ? next_seq(s, len, false) : 0;
        emit(s, ZBUF_SOCK_ACCEPTED, seq, len, run->zc, false);
        if (run->zc) {
            bool copied = false;
            pthread_mutex_lock(&s->lock);
            bool early = zc_finish_one(s, run->recs[i], seq, len, &copied);
            pthread_mutex_unlock(&s->lock);
            if (len > 0)
                zbuf_cut(z, 0, ZBUF_TO_END, NULL);
            if (early) {
                zbuf_delete(run->recs[i]);
                emit(s, ZBUF_SOCK_RELEASED, seq, len, true, copied);
            }
        } else {
            if (len > 0)
                zbuf_cut(z, 0, ZBUF_TO_END, NULL);
            emit(s, ZBUF_SOCK_RELEASED, seq, len, false, true);
        }
    }
    if (run->zc) {
        for (unsigned i = sent; i < run->k; i++)
            zbuf_delete(run->recs[i]);
        if (sent < run->k)
            zc_unreserve(s);
    }
}

/*
 * A batch of datagrams: msgs[0..n).  Each is sent whole; zero copy is asked
 * for runs of datagrams that all reach the threshold.  Returns the number
 * sent or a negative errno when the first failed.
 */
static int dgram_batch(struct zbuf_sock *s, int fd, zbuf_sock_msg_t *msgs, unsigned n, int flags)
{
    struct dgram_run run;
    unsigned done = 0;
    flags |= MSG_NOSIGNAL;

    while (done < n) {
        int r = dgram_gather(s, msgs + done, n - done, &run);
        if (r == 0 && run.k == 0)
            r = -EINVAL; /* cannot happen: one always fits */
        if (r < 0)
            return done > 0 ? (int)done : r;
        dgram_zc_prepare(s, msgs + done, &run);
        r = dgram_sendmmsg(s, fd, &run, flags);
        if (r < 0)
            return done > 0 ? (int)done : r;
        dgram_finish(s, msgs + done, &run, (unsigned)r);
        done += (unsigned)r;
        if ((unsigned)r < run.k)
            break; /* the kernel stopped: would block, or an error it will report next */
    }
    return (int)done;
}

static ssize_t dgram_send(struct zbuf_sock *s, int fd, zbuf_t *z, int flags,
                          const struct sockaddr *to, socklen_t tolen)
{
    if (!zbuf_valid(z) || fd < 0 || (to == NULL && tolen != 0) ||
        tolen > sizeof(struct sockaddr_storage))
        return -EINVAL;
    zbuf_sock_msg_t m = { .z = z, .addrlen = to ? tolen : 0 };
    if (to != NULL)
        memcpy(&m.addr, to, tolen);
    size_t len = zbuf_length(z);
    int r = dgram_batch(s, fd, &m, 1, flags);
    if (r < 0)
        return r;
    if (r == 0)
        return -EAGAIN;
    return (ssize_t)len;
}

ssize_t zbuf_sock_send_fd(int fd, zbuf_t *z, int flags)
{
    return stream_send(NULL, fd, z, flags);
}

ssize_t zbuf_sock_sendto_fd(int fd, zbuf_t *z, int flags, const struct sockaddr *to,
                            socklen_t tolen)
{
    return dgram_send(NULL, fd, z, flags, to, tolen);
}

int zbuf_sock_sendmmsg_fd(int fd, zbuf_sock_msg_t *msgs, unsigned n, int flags)
{
    if (fd < 0 || (msgs == NULL && n > 0))
        return -EINVAL;
    return n == 0 ? 0 : dgram_batch(NULL, fd, msgs, n, flags);
}

/* Enter a handle's send path: serialised, refused once closing. */
static int send_enter(struct zbuf_sock *s)
{
    if (s == NULL)
        return -EINVAL;
    pthread_mutex_lock(&s->send_lock);
    pthread_mutex_lock(&s->lock);
    bool closing = s->closing;
    pthread_mutex_unlock(&s->lock);
    if (closing) {
        pthread_mutex_unlock(&s->send_lock);
        return -EBADF;
    }
    return 0;
}

ssize_t zbuf_sock_send(zbuf_sock_t *s, zbuf_t *z, int flags)
{
    int e = send_enter(s);
    if (e < 0)
        return e;
    ssize_t r = s->type == SOCK_STREAM ? stream_send(s, s->fd, z, flags)
                                       : dgram_send(s, s->fd, z, flags, NULL, 0);
    pthread_mutex_unlock(&s->send_lock);
    return r;
}

ssize_t zbuf_sock_sendto(zbuf_sock_t *s, zbuf_t *z, int flags, const struct sockaddr *to,
                         socklen_t tolen)
{
    int e = send_enter(s);
    if (e < 0)
        return e;
    ssize_t r = dgram_send(s, s->fd, z, flags, to, tolen);
    pthread_mutex_unlock(&s->send_lock);
    return r;
}

int zbuf_sock_sendmmsg(zbuf_sock_t *s, zbuf_sock_msg_t *msgs, unsigned n, int flags)
{
    if (msgs == NULL && n > 0)
        return -EINVAL;
    int e = send_enter(s);
    if (e < 0)
        return e;
    int r = n == 0 ? 0 : dgram_batch(s, s->fd, msgs, n, flags);
    pthread_mutex_unlock(&s->send_lock);
    return r;
}

/* ------------------------------------------------------------- receiving */

/* Take up to `want` buffers covering up to `max` bytes; returns how many. */
static int take_bufs(zbuf_pool_t *pool, size_t max, unsigned want, zbuf_buf_t **bufs,
                     struct iovec *iov, int *err)
{
    unsigned k = 0;
    size_t covered = 0;
    *err = 0;
    while (k < want && covered < max) {
        size_t size;
        int e;
        if (pool != NULL) {
            e = zbuf_pool_get(pool, &bufs[k]);
            size = e == 0 ? zbuf_pool_buf_size(pool) : 0;
        } else {
            size = max - covered < ZS_HEAP_CHUNK ? max - covered : ZS_HEAP_CHUNK;
            e = zbuf_buf_alloc(size, &bufs[k]);
        }
        if (e != 0) {
            *err = e;
            break;
        }
        if (size > max - covered)
            size = max - covered;
        iov[k] = (struct iovec){ .iov_base = zbuf_buf_data(bufs[k]), .iov_len = size };
        covered += size;
        k++;
    }
    return (int)k;
}

static void drop_bufs(zbuf_buf_t **bufs, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        zbuf_buf_unref(bufs[i]);
}

/* Append the first `n` bytes spread over iov/bufs to z.  On failure z is
 * unchanged. */
static int append_filled(zbuf_t *z, zbuf_buf_t **bufs, const struct iovec *iov, size_t n)
{
    size_t before = zbuf_length(z);
    for (unsigned i = 0; n > 0; i++) {
        size_t take = iov[i].iov_len < n ? iov[i].iov_len : n;
        int e = zbuf_append_ref(z, bufs[i], 0, take);
        if (e != 0) {
            if (zbuf_length(z) > before)
                zbuf_cut(z, before, ZBUF_TO_END, NULL);
            return e;
        }
        n -= take;
    }
    return 0;
}

ssize_t zbuf_sock_recv(int fd, zbuf_pool_t *pool, size_t max, int flags, zbuf_t *z)
{
    if (fd < 0 || max == 0 || !zbuf_valid(z))
        return -EINVAL;
    zbuf_buf_t *bufs[ZS_RECV_BUFS];
    struct iovec iov[ZS_RECV_BUFS];
    int err;
    int k = take_bufs(pool, max, ZS_RECV_BUFS, bufs, iov, &err);
    if (k == 0)
        return err;
    struct msghdr mh = { .msg_iov = iov, .msg_iovlen = (size_t)k };
    ssize_t n;
    do
        n = recvmsg(fd, &mh, flags);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        n = -errno;
    else if (n > 0) {
        int e = append_filled(z, bufs, iov, (size_t)n);
        if (e != 0)
            n = e;
    }
    drop_bufs(bufs, (unsigned)k);
    return n;
}

int zbuf_sock_recvmmsg(int fd, zbuf_pool_t *pool, size_t max, zbuf_sock_msg_t *msgs, unsigned n,
                       int flags)
{
    if (fd < 0 || (msgs == NULL && n > 0))
        return -EINVAL;
    if (n == 0)
        return 0;
    if (max == 0)
        max = pool ? zbuf_pool_buf_size(pool) : 65535;
    size_t per = pool ? zbuf_pool_buf_size(pool) : ZS_HEAP_CHUNK;
    unsigned bufs_per = (unsigned)((max + per - 1) / per);
    if (bufs_per > ZS_RECV_BUFS)
        return -EINVAL;
    if (n > ZS_BATCH)
        n = ZS_BATCH;
    if (n * bufs_per > ZS_IOV_MAX)
        n = ZS_IOV_MAX / bufs_per;

    zbuf_buf_t *bufs[ZS_IOV_MAX];
    struct iovec iov[ZS_IOV_MAX];
    struct mmsghdr mm[ZS_BATCH];
    unsigned got = 0, m = 0;
    int err = 0;
    for (; m < n; m++) {
        int k = take_bufs(pool, max, bufs_per, bufs + got, iov + got, &err);
        if ((unsigned)k < bufs_per) {
            drop_bufs(bufs + got, (unsigned)k);
            break;
        }
        memset(&msgs[m].addr, 0, sizeof msgs[m].addr);
        mm[m].msg_hdr = (struct msghdr){
            .msg_name = &msgs[m].addr, .msg_namelen = sizeof msgs[m].addr,
            .msg_iov = iov + got, .msg_iovlen = bufs_per,
        };
        mm[m].msg_len = 0;
        got += bufs_per;
    }
    if (m == 0)
        return err;
    int r;
    do
        r = recvmmsg(fd, mm, m, flags, NULL);
    while (r < 0 && errno == EINTR);
    if (r < 0) {
        r = -errno;
        goto out;
    }
    for (int i = 0; i < r; i++) {
        zbuf_t *z;
        int e = zbuf_create(&z);
        if (e == 0)
            e = append_filled(z, bufs + (size_t)i * bufs_per, iov + (size_t)i * bufs_per,
                              mm[i].msg_len);
        if (e != 0) {
            /* Out of memory: the batch received is lost (documented). */
            if (e == 0 || z != NULL)
                zbuf_delete(z);
            for (int j = 0; j < i; j++) {
                zbuf_delete(msgs[j].z);
                msgs[j].z = NULL;
            }
            r = e;
            goto out;
        }
        msgs[i].z = z;
        msgs[i].addrlen = mm[i].msg_hdr.msg_namelen;
        msgs[i].flags = mm[i].msg_hdr.msg_flags;
    }
out:
    drop_bufs(bufs, got);
    return r;
}

ssize_t zbuf_sock_recvfrom(int fd, zbuf_pool_t *pool, size_t max, int flags, zbuf_sock_msg_t *msg)
{
    if (msg == NULL)
        return -EINVAL;
    msg->z = NULL;
    int r = zbuf_sock_recvmmsg(fd, pool, max, msg, 1, flags);
    if (r < 0)
        return r;
    return (ssize_t)zbuf_length(msg->z);
}

/* --------------------------------------------------------------- handles */

static void sock_free(struct zbuf_sock *s)
{
    pthread_mutex_destroy(&s->send_lock);
    pthread_mutex_destroy(&s->lock);
    free(s->ring);
    free(s);
}

/*
 * ZBUF_SOCK_THREAD: the handle is watched by the completion watcher
 * (thread.c, watch.h), which runs zbuf_sock_complete() when the socket's
 * error queue has notifications, so that release callbacks run even when
 * the program never calls back.  The watch also counts the references to
 * the handle: the owner's, and one per watcher batch that names it.
 *
 * Handles with ZBUF_SOCK_HOLD_FD keep a duplicate descriptor while sends
 * are outstanding (see sock.h).  If the program has closed its own
 * descriptor and the completions stop coming (a peer that never reads),
 * the watcher's tick aborts the connection after ZS_ORPHAN_MS, so that the
 * kernel lets go of the pages and the hold ends: a bounded deferred close.
 */
#define ZS_ORPHAN_MS 10000

static void watch_on_error(void *ctx)
{
    zbuf_sock_complete(ctx);
}

/* Under the watcher's lock.  Whether the handle holds a duplicate (and so
 * wants further ticks). */
static bool watch_on_tick(void *ctx, int64_t now)
{
    struct zbuf_sock *s = ctx;
    pthread_mutex_lock(&s->lock);
    bool held = s->hold_fd >= 0 && !s->fd_gone;
    if (held) {
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
    return held;
}

static void watch_on_free(void *ctx)
{
    sock_free(ctx);
}

void zbuf_sock_opts_init(zbuf_sock_opts_t *o)
{
    if (o == NULL)
        return;
    *o = (zbuf_sock_opts_t){
        .flags = 0,
        .zerocopy_min = 16384,
        .max_outstanding = 1024,
        .copied_limit = 1,
        .reprobe_after = 0,
    };
}

int zbuf_sock_open(int fd, const zbuf_sock_opts_t *o, zbuf_sock_t **out)
{
    zbuf_sock_opts_t def;
    if (o == NULL) {
        zbuf_sock_opts_init(&def);
        o = &def;
    }
    if (fd < 0 || out == NULL || o->max_outstanding == 0 ||
        o->max_outstanding > ZS_MAX_OUTSTANDING || o->copied_limit == 0 || o->zerocopy_min == 0)
        return -EINVAL;
    int type, domain;
    socklen_t l = sizeof type;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) != 0)
        return errno == ENOTSOCK ? -EINVAL : -errno;
    l = sizeof domain;
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &l) != 0)
        return -errno;

    struct zbuf_sock *s = calloc(1, sizeof *s);
    if (s == NULL)
        return -ENOMEM;
    uint32_t cap = 1;
    while (cap < o->max_outstanding)
        cap <<= 1;
    s->ring = calloc(cap, sizeof *s->ring);
    if (s->ring == NULL) {
        free(s);
        return -ENOMEM;
    }
    s->mask = cap - 1;
    s->fd = fd;
    s->type = type;
    s->opts = *o;
    if (s->opts.flags & ZBUF_SOCK_HOLD_FD)
        s->opts.flags |= ZBUF_SOCK_KEEP_FD;
    s->hold_fd = -1;
    zbuf__watch_init(&s->watch, fd, s, watch_on_error, watch_on_tick, watch_on_free);
    pthread_mutex_init(&s->send_lock, NULL);
    pthread_mutex_init(&s->lock, NULL);

    /* MSG_ZEROCOPY is silently ignored without SO_ZEROCOPY and on other
     * families: enable it only where a notification will come. */
    if ((o->flags & ZBUF_SOCK_ZEROCOPY) && (domain == AF_INET || domain == AF_INET6) &&
        (type == SOCK_STREAM || type == SOCK_DGRAM)) {
        int one = 1;
        if (setsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof one) == 0)
            s->zc_capable = s->zc_on = true;
    }
    if (o->flags & ZBUF_SOCK_THREAD) {
        int e = zbuf__watch_add(&s->watch);
        if (e != 0) {
            sock_free(s);
            return e;
        }
    }
    *out = s;
    return 0;
}

int zbuf_sock_fd(const zbuf_sock_t *s)
{
    return s ? s->fd : -1;
}

void zbuf_sock_get_stats(zbuf_sock_t *s, zbuf_sock_stats_t *st)
{
    if (s == NULL || st == NULL)
        return;
    pthread_mutex_lock(&s->lock);
    *st = s->st;
    st->zerocopy_on = s->zc_on;
    pthread_mutex_unlock(&s->lock);
}

int zbuf_sock_flush(zbuf_sock_t *s, int timeout_ms)
{
    if (s == NULL)
        return -EINVAL;
    int64_t deadline = timeout_ms < 0 ? INT64_MAX : now_ms() + timeout_ms;
    for (;;) {
        zbuf_sock_complete(s);
        pthread_mutex_lock(&s->lock);
        uint64_t left = s->st.outstanding + s->releasing;
        int efd = err_fd(s);
        pthread_mutex_unlock(&s->lock);
        if (left == 0)
            return 0;
        int64_t now = now_ms();
        if (now >= deadline || efd < 0)
            return -ETIMEDOUT;
        int wait = deadline - now < 10 ? (int)(deadline - now) : 10;
        /* events = 0: poll reports POLLERR when the error queue has data. */
        struct pollfd p = { .fd = efd, .events = 0 };
        int r = poll(&p, 1, wait);
        if (r > 0 && !(p.revents & POLLERR)) {
            struct timespec ms = { 0, 1000000 }; /* hung up: do not spin */
            nanosleep(&ms, NULL);
        }
    }
}

int zbuf_sock_close(zbuf_sock_t *s, int timeout_ms)
{
    if (s == NULL)
        return 0;
    /* No send is running once we hold send_lock, and none starts after. */
    pthread_mutex_lock(&s->send_lock);
    pthread_mutex_lock(&s->lock);
    s->closing = true;
    pthread_mutex_unlock(&s->lock);
    pthread_mutex_unlock(&s->send_lock);

    int ret = 0;
    if (zbuf_sock_flush(s, timeout_ms) != 0) {
        /* Step 2: make the kernel drop the data it still holds. */
        pthread_mutex_lock(&s->lock);
        struct sockaddr sa = { .sa_family = AF_UNSPEC };
        if (err_fd(s) >= 0)
            connect(err_fd(s), &sa, sizeof sa);
        pthread_mutex_unlock(&s->lock);
        int grace = timeout_ms < 100 ? 100 : timeout_ms;
        ret = zbuf_sock_flush(s, grace) == 0 ? -ECONNABORTED : -ETIMEDOUT;
    }
    /* Unregister while the descriptor is still ours, so that the thread's
     * epoll set never holds a number another socket may get next. */
    pthread_mutex_lock(&s->lock);
    bool fd_valid = !s->fd_stale; /* a forgotten number may be another file's now */
    pthread_mutex_unlock(&s->lock);
    zbuf__watch_remove(&s->watch, fd_valid);
    pthread_mutex_lock(&s->lock);
    if (ret == -ETIMEDOUT) {
        /* Step 3: abandon what the kernel may still read.  The record zbufs
         * are deliberately not deleted, so their buffers are never released. */
        for (uint64_t id = s->base; id < s->next; id++) {
            struct zbuf__zrec *r = &s->ring[id & s->mask];
            if (r->state == ZREC_PENDING) {
                r->state = ZREC_DONE;
                r->z = NULL;
                s->st.abandoned++;
            }
        }
        s->st.outstanding = 0;
    }
    s->fd_gone = true;
    if (s->hold_fd >= 0)
        close(s->hold_fd);
    s->hold_fd = -1;
    if (!(s->opts.flags & ZBUF_SOCK_KEEP_FD) && !s->fd_stale)
        close(s->fd); /* never a number zbuf_sock_forget_fd() gave up */
    pthread_mutex_unlock(&s->lock);
    zbuf__watch_retire(&s->watch);
    return ret;
}
