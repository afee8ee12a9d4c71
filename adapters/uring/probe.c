/* SPDX-License-Identifier: MIT */
/*
 * zbuf_uring_probe(): what io_uring allows this process, found by trying
 * each feature once on a small ring of its own and an AF_UNIX socket pair
 * (no traffic leaves the process).  Kernel versions are never compared:
 * distributions backport, and a seccomp policy or the io_uring_disabled
 * sysctl refuse what the version would allow.
 *
 * The zero-copy flags are told apart by the order in which the kernel
 * checks a request: it validates the flags when it prepares the request
 * (an unknown one gives EINVAL), and only when it issues it does it find
 * that an AF_UNIX socket takes no zero-copy send (EOPNOTSUPP).  So
 * EOPNOTSUPP means "the flags are known".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "uring_internal.h"
#include "uring_compat.h"

static zbuf_uring_probe_t probed;
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;

/* The value of kernel.io_uring_disabled, or -1 if unknown. */
static int sysctl_disabled(void)
{
    FILE *f = fopen("/proc/sys/kernel/io_uring_disabled", "re");
    int v = -1;
    if (f != NULL) {
        if (fscanf(f, "%d", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

/* Submit what is prepared and wait for one completion; its res, or
 * -ETIME when none came. */
static int one_result(struct io_uring *r, uint32_t *flags)
{
    struct io_uring_cqe *cqe;
    struct __kernel_timespec ts = { .tv_sec = 1 };
    int rc = io_uring_submit_and_wait_timeout(r, &cqe, 1, &ts, NULL);
    if (rc < 0)
        return rc == -ETIME ? -ETIME : rc;
    int res = cqe->res;
    if (flags != NULL)
        *flags = cqe->flags;
    io_uring_cqe_seen(r, cqe);
    return res;
}

/* Drain every completion (the notifications of the zero-copy tries). */
static void drain(struct io_uring *r)
{
    struct io_uring_cqe *cqe;
    while (io_uring_peek_cqe(r, &cqe) == 0)
        io_uring_cqe_seen(r, cqe);
}

/* A zero-copy send with `prio` flags on an AF_UNIX socket: supported when
 * the kernel gets as far as the socket check. */
static bool zc_flags_known(struct io_uring *r, int fd, bool vectored, unsigned prio, void *buf)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(r);
    struct iovec iov = { .iov_base = buf, .iov_len = 1 };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
    if (vectored) {
        io_uring_prep_sendmsg_zc(sqe, fd, &mh, MSG_DONTWAIT);
        sqe->ioprio = (uint16_t)prio;
        sqe->buf_index = 0;
    } else {
        io_uring_prep_send_zc(sqe, fd, buf, 1, MSG_DONTWAIT, prio);
    }
    sqe->user_data = 1;
    int res = one_result(r, NULL);
    drain(r);
    return res == -EOPNOTSUPP;
}

/* Multishot receive with a buffer ring on a socket pair: one byte must
 * come back in a completion that promises more.  Then a bundle receive:
 * 100 bytes over two 64-byte buffers in one completion. */
static bool try_recv_multishot(struct io_uring *r, int sv[2], bool *buf_ring, bool *bundle)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    void *mem = mmap(NULL, page * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        return false;
    struct io_uring_buf_ring *br = mem;
    struct io_uring_buf_reg reg = { .ring_addr = (uintptr_t)mem, .ring_entries = 2, .bgid = 7 };
    bool ok = false;
    io_uring_buf_ring_init(br);
    if (io_uring_register_buf_ring(r, &reg, 0) != 0)
        goto out;
    *buf_ring = true;
    io_uring_buf_ring_add(br, (char *)mem + page, 64, 0, io_uring_buf_ring_mask(2), 0);
    io_uring_buf_ring_add(br, (char *)mem + page + 64, 64, 1, io_uring_buf_ring_mask(2), 1);
    io_uring_buf_ring_advance(br, 2);
    struct io_uring_sqe *sqe = io_uring_get_sqe(r);
    io_uring_prep_recv_multishot(sqe, sv[0], NULL, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = 7;
    sqe->user_data = 2;
    io_uring_submit(r);
    if (write(sv[1], "x", 1) == 1) {
        uint32_t fl = 0;
        int res = one_result(r, &fl);
        ok = res == 1 && (fl & IORING_CQE_F_MORE) && (fl & IORING_CQE_F_BUFFER);
    }
    sqe = io_uring_get_sqe(r);
    io_uring_prep_cancel64(sqe, 2, 0);
    sqe->user_data = 3;
    io_uring_submit(r);
    for (int i = 0; i < 2; i++)
        one_result(r, NULL);
    drain(r);
    if (ok) {
        /* Give back the buffer the byte went into: two in the ring again. */
        io_uring_buf_ring_add(br, (char *)mem + page, 64, 0, io_uring_buf_ring_mask(2), 0);
        io_uring_buf_ring_advance(br, 1);
        char out[100] = { 0 };
        if (write(sv[1], out, sizeof out) == (ssize_t)sizeof out) {
            sqe = io_uring_get_sqe(r);
            io_uring_prep_recv(sqe, sv[0], NULL, 0, 0);
            sqe->ioprio |= IORING_RECVSEND_BUNDLE;
            sqe->flags |= IOSQE_BUFFER_SELECT;
            sqe->buf_group = 7;
            sqe->user_data = 4;
            *bundle = one_result(r, NULL) == 100;
        }
        drain(r);
        char sink[128];
        while (recv(sv[0], sink, sizeof sink, MSG_DONTWAIT) > 0)
            ;
    }
    io_uring_unregister_buf_ring(r, 7);
out:
    munmap(mem, page * 2);
    return ok;
}

static void run_probe(void)
{
    zbuf_uring_probe_t *p = &probed;
    memset(p, 0, sizeof *p);
    const char *env = getenv("ZBUF_URING_DISABLE");
    if (env != NULL && env[0] != '\0' && strcmp(env, "0") != 0) {
        p->error = -EPERM;
        snprintf(p->reason, sizeof p->reason, "disabled by ZBUF_URING_DISABLE=%s", env);
        return;
    }
    struct io_uring r;
    int rc = io_uring_queue_init(8, &r, 0);
    if (rc < 0) {
        int dis = sysctl_disabled();
        p->error = rc;
        if (dis > 0)
            snprintf(p->reason, sizeof p->reason,
                     "io_uring_setup: %s (kernel.io_uring_disabled = %d)", strerror(-rc), dis);
        else if (rc == -ENOSYS)
            snprintf(p->reason, sizeof p->reason,
                     "io_uring_setup: %s (not in this kernel, or blocked by a seccomp policy)",
                     strerror(-rc));
        else if (rc == -EPERM)
            snprintf(p->reason, sizeof p->reason,
                     "io_uring_setup: %s (refused by a security policy)", strerror(-rc));
        else
            snprintf(p->reason, sizeof p->reason, "io_uring_setup: %s", strerror(-rc));
        return;
    }
    struct io_uring_probe *op = io_uring_get_probe_ring(&r);
    static const struct { int op; const char *name; } need[] = {
        { IORING_OP_SENDMSG, "SENDMSG" }, { IORING_OP_RECV, "RECV" },
        { IORING_OP_RECVMSG, "RECVMSG" }, { IORING_OP_ACCEPT, "ACCEPT" },
        { IORING_OP_CONNECT, "CONNECT" }, { IORING_OP_READ, "READ" },
        { IORING_OP_ASYNC_CANCEL, "ASYNC_CANCEL" }, { IORING_OP_SHUTDOWN, "SHUTDOWN" },
    };
    if (op == NULL) {
        p->error = -EOPNOTSUPP;
        snprintf(p->reason, sizeof p->reason, "IORING_REGISTER_PROBE refused (kernel too old)");
        io_uring_queue_exit(&r);
        return;
    }
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
        if (!io_uring_opcode_supported(op, need[i].op)) {
            p->error = -EOPNOTSUPP;
            snprintf(p->reason, sizeof p->reason, "kernel lacks IORING_OP_%s", need[i].name);
            io_uring_free_probe(op);
            io_uring_queue_exit(&r);
            return;
        }
    }
    p->send_zc = io_uring_opcode_supported(op, IORING_OP_SEND_ZC) &&
                 io_uring_opcode_supported(op, IORING_OP_SENDMSG_ZC);
    io_uring_free_probe(op);

    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0) {
        p->recv_multishot = try_recv_multishot(&r, sv, &p->buf_ring, &p->recv_bundle);
        if (p->send_zc) {
            char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                              -1, 0);
            if (page != MAP_FAILED) {
                page[0] = 'z';
                p->zc_report_usage =
                    zc_flags_known(&r, sv[0], false, IORING_SEND_ZC_REPORT_USAGE, page);
                struct iovec reg = { .iov_base = page, .iov_len = 4096 };
                if (io_uring_register_buffers(&r, &reg, 1) == 0) {
                    p->zc_fixed_vectored =
                        zc_flags_known(&r, sv[0], true, IORING_RECVSEND_FIXED_BUF, page);
                    io_uring_unregister_buffers(&r);
                }
                munmap(page, 4096);
            }
        }
        close(sv[0]);
        close(sv[1]);
    }
    /* Multishot accept came with buffer rings (Linux 5.19); ring.c falls
     * back to single accepts if the kernel refuses it anyway. */
    p->accept_multishot = p->buf_ring;
    io_uring_queue_exit(&r);

    if (!p->buf_ring) {
        p->error = -EOPNOTSUPP;
        snprintf(p->reason, sizeof p->reason, "kernel lacks provided buffer rings");
        return;
    }
    struct io_uring_params prm = { .flags = IORING_SETUP_SINGLE_ISSUER |
                                            IORING_SETUP_DEFER_TASKRUN };
    if (io_uring_queue_init_params(8, &r, &prm) == 0) {
        p->defer_taskrun = true;
        io_uring_queue_exit(&r);
    }
    p->usable = true;
    snprintf(p->reason, sizeof p->reason, "io_uring usable");
}

int zbuf_uring_probe(zbuf_uring_probe_t *out)
{
    if (out == NULL)
        return -EINVAL;
    pthread_once(&probe_once, run_probe);
    *out = probed;
    return 0;
}
