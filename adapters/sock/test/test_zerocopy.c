/* SPDX-License-Identifier: MIT */
/*
 * MSG_ZEROCOPY through a socket handle: references kept until the kernel's
 * notification, the COPIED fallback on loopback, id ranges (out of order,
 * coalesced, wrapping), the outstanding cap, ENOBUFS fallbacks (optmem in a
 * network namespace, the locked-page limit as an unprivileged user), the
 * deferred close, and the two events per send.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <unistd.h>
#include <zbuf/sock.h>

#include "sock_test_util.h"
#include "support.h"

/* Hidden test hooks of sock.c. */
struct zbuf_sock;
int zbuf__sock_test_notify(struct zbuf_sock *s, uint32_t lo, uint32_t hi, bool copied);
void zbuf__sock_test_set_ids(struct zbuf_sock *s, uint64_t id);
uint64_t zbuf__sock_test_fake_send(struct zbuf_sock *s, zbuf_t *z);

ZT_SUITE(zerocopy);

/* Skip unless this kernel takes SO_ZEROCOPY on a TCP socket. */
static void require_zerocopy(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    int r = setsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof one);
    close(fd);
    if (r != 0)
        cr_skip_test("kernel without SO_ZEROCOPY: %s", strerror(errno));
}

static zbuf_sock_t *open_zc(int fd, unsigned extra, zbuf_sock_opts_t *o_out)
{
    zbuf_sock_opts_t o;
    zbuf_sock_opts_init(&o);
    o.flags = ZBUF_SOCK_ZEROCOPY | extra;
    if (o_out) {
        o.max_outstanding = o_out->max_outstanding ? o_out->max_outstanding : o.max_outstanding;
        o.reprobe_after = o_out->reprobe_after;
        o.on_event = o_out->on_event;
        o.event_arg = o_out->event_arg;
    }
    zbuf_sock_t *s;
    cr_assert_eq(zbuf_sock_open(fd, &o, &s), 0);
    return s;
}

/* ------------------------------------------------------------ events log */

struct evlog {
    pthread_mutex_t lock;
    int n;
    zbuf_sock_event_t ev[4096];
};

static void log_event(zbuf_sock_t *s, const zbuf_sock_event_t *ev, void *arg)
{
    (void)s;
    struct evlog *l = arg;
    pthread_mutex_lock(&l->lock);
    if (l->n < 4096)
        l->ev[l->n++] = *ev;
    pthread_mutex_unlock(&l->lock);
}

/* Every ACCEPTED has exactly one RELEASED, later, with the same seq and
 * byte count.  Returns the number of pairs. */
static int check_pairs(struct evlog *l)
{
    int pairs = 0;
    for (int i = 0; i < l->n; i++) {
        if (l->ev[i].type != ZBUF_SOCK_ACCEPTED)
            continue;
        int found = 0;
        for (int j = 0; j < l->n; j++) {
            if (l->ev[j].type == ZBUF_SOCK_RELEASED && l->ev[j].seq == l->ev[i].seq) {
                found++;
                cr_assert(j > i, "RELEASED %llu before its ACCEPTED",
                          (unsigned long long)l->ev[i].seq);
                cr_assert_eq(l->ev[j].bytes, l->ev[i].bytes);
            }
        }
        cr_assert_eq(found, 1, "seq %llu released %d times", (unsigned long long)l->ev[i].seq,
                     found);
        pairs++;
    }
    int released = 0;
    for (int i = 0; i < l->n; i++)
        released += l->ev[i].type == ZBUF_SOCK_RELEASED;
    cr_assert_eq(released, pairs, "a RELEASED without ACCEPTED");
    return pairs;
}

/* ----------------------------------------------------------------- tests */

Test(zerocopy, buffers_are_released_only_after_the_notification)
{
    require_zerocopy();
    int a, b;
    st_tcp_pair(&a, &b);
    struct st_reader r = { 0 };
    st_reader_start(&r, b, 65536, 0);
    static struct evlog log = { .lock = PTHREAD_MUTEX_INITIALIZER };
    zbuf_sock_opts_t o = { .on_event = log_event, .event_arg = &log };
    zbuf_sock_t *s = open_zc(a, ZBUF_SOCK_ZEROCOPY_ALWAYS, &o);

    atomic_int released = 0;
    zbuf_t *z = st_pattern_zbuf(256 * 1024, 0, 64 * 1024, &released);
    cr_assert_eq(zbuf_sock_send(s, z, 0), 256 * 1024);
    cr_assert_eq(zbuf_length(z), 0);
    zbuf_delete(z);
    zbuf_sock_stats_t st;
    zbuf_sock_get_stats(s, &st);
    cr_assert_eq(st.zc_sends, 1);
    cr_assert_eq(st.outstanding, 1);
    cr_assert_eq(atomic_load(&released), 0,
                 "no buffer may be released before the kernel's notification");
    cr_assert_eq(zbuf_sock_flush(s, 5000), 0);
    cr_assert_eq(atomic_load(&released), 4, "each buffer released once after completion");
    zbuf_sock_get_stats(s, &st);
    cr_assert_eq(st.zc_completed, 1);
    cr_assert_eq(st.zc_copied, 1, "loopback copies");
    cr_assert_eq(check_pairs(&log), 1);
    cr_assert(log.ev[1].copied, "the RELEASED event says the kernel copied");
    cr_assert(log.ev[1].zerocopy);
    cr_assert_eq(zbuf_sock_close(s, 1000), 0);
    st_reader_join(&r);
    cr_assert_eq(r.got, 256 * 1024);
    cr_assert_eq(r.bad_at, UINT64_MAX);
    close(b);
}

Test(zerocopy, copied_fallback_turns_zero_copy_off_on_loopback)
{
    require_zerocopy();
    int a, b;
    st_tcp_pair(&a, &b);
    struct st_reader r = { 0 };
    st_reader_start(&r, b, 65536, 0);
    zbuf_sock_t *s = open_zc(a, 0, NULL);
    atomic_int released = 0;
    zbuf_t *z = st_pattern_zbuf(128 * 1024, 0, 128 * 1024, &released);
    cr_assert_eq(zbuf_sock_send(s, z, 0), 128 * 1024);
    zbuf_delete(z);
    cr_assert_eq(zbuf_sock_flush(s, 5000), 0);
    zbuf_sock_stats_t st;
    zbuf_sock_get_stats(s, &st);
    cr_assert_eq(st.zc_turned_off, 1);
    cr_assert(!st.zerocopy_on, "the COPIED notification turned zero copy off");
    /* From now on, sends copy: buffers are released before send returns. */
    for (int i = 1; i <= 10; i++) {
        z = st_pattern_zbuf(128 * 1024, (uint64_t)i * 128 * 1024, 128 * 1024, &released);
        cr_assert_eq(zbuf_sock_send(s, z, 0), 128 * 1024);
        cr_assert_eq(atomic_load(&released), i + 1);
        zbuf_delete(z);
    }
    zbuf_sock_get_stats(s, &st);
    cr_assert_eq(st.zc_sends, 1);
    cr_assert_eq(st.sends, 11);
    cr_assert_eq(st.outstanding, 0);
    cr_assert_eq(zbuf_sock_close(s, 1000), 0);
    st_reader_join(&r);
    cr_assert_eq(r.got, 11 * 128 * 1024);
    cr_assert_eq(r.bad_at, UINT64_MAX);
    close(b);
}

Test(zerocopy, reprobe_asks_for_zero_copy_again)
{
    require_zerocopy();
    int a, b;
    st_tcp_pair(&a, &b);
    struct st_reader r = { 0 };
    st_reader_start(&r, b, 65536, 0);
    zbuf_sock_opts_t o = { .reprobe_after = 5 };
    zbuf_sock_t *s = open_zc(a, 0, &o);
    atomic_int released = 0;
    for (int i = 0; i < 12; i++) {
        zbuf_t *z = st_pattern_zbuf(32768, (uint64_t)i * 32768, 32768, &released);
        cr_assert_eq(zbuf_sock_send(s, z, 0), 32768);
        zbuf_delete(z);
        cr_assert_eq(zbuf_sock_flush(s, 5000), 0);
    }
    zbuf_sock_stats_t st;
    zbuf_sock_get_stats(s, &st);
    cr_assert_eq(st.zc_sends, 3, "sends 1, 6 and 11 probe (got %llu)",
                 (unsigned long long)st.zc_sends);
    cr_assert_eq(st.zc_turned_off, 3);
    cr_assert_eq(atomic_load(&released), 12);
    cr_assert_eq(zbuf_sock_close(s, 1000), 0);
    st_reader_join(&r);
    cr_assert_eq(r.got, 12 * 32768);
    close(b);
}

Test(zerocopy, notification_ranges_out_of_order_coalesced_and_wrapping)
{
    require_zerocopy();
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    zbuf_sock_t *s = open_zc(fd, ZBUF_SOCK_ZEROCOPY_ALWAYS, NULL);
    /* Ids start 3 below 2^32: the kernel's numbers FFFFFFFD .. 00000004. */
    zbuf__sock_test_set_ids(s, (1ull << 32) - 3);
    atomic_int rel[8];
    for (int i = 0; i < 8; i++) {
        atomic_init(&rel[i], 0);
        zbuf_t *z = st_pattern_zbuf(20000, 0, 20000, &rel[i]);
        cr_assert_neq(zbuf__sock_test_fake_send(s, z), 0);
        zbuf_delete(z);
    }
    zbuf_sock_stats_t st;
    zbuf_sock_get_stats(s, &st);
    cr_assert_eq(st.outstanding, 8);

    /* [FFFFFFFF, 1] wraps: sends 2, 3, 4 (0-based). */
    cr_assert_eq(zbuf__sock_test_notify(s, 0xFFFFFFFFu, 1, false), 3);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(atomic_load(&rel[i]), i >= 2 && i <= 4, "send %d", i);
    /* The oldest two, after the younger ones. */
    cr_assert_eq(zbuf__sock_test_notify(s, 0xFFFFFFFDu, 0xFFFFFFFEu, false), 2);
    /* A coalesced range for the rest. */
    cr_assert_eq(zbuf__sock_test_notify(s, 2, 4, true), 3);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(atomic_load(&rel[i]), 1, "send %d released once", i);
    /* A duplicate matches nothing and releases nothing twice. */
    cr_assert_eq(zbuf__sock_test_notify(s, 3, 4, false), 0);
    zbuf_sock_get_stats(s, &st);
    cr_assert_eq(st.outstanding, 0);
    cr_assert_eq(st.zc_completed, 8);
    cr_assert_eq(st.zc_copied, 3);
    cr_assert_eq(st.stray, 2);
    cr_assert_eq(zbuf_sock_close(s, 100), 0);
}

Test(zerocopy, unix_sockets_never_wait_for_notifications)
{
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    zbuf_sock_t *s = open_zc(sv[0], ZBUF_SOCK_ZEROCOPY_ALWAYS, NULL);
    zbuf_sock_stats_t st;
    zbuf_sock_get_stats(s, &st);
    cr_assert(!st.zerocopy_on, "MSG_ZEROCOPY would be ignored on AF_UNIX");
    atomic_int released = 0;
    zbuf_t *z = st_pattern_zbuf(60000, 0, 60000, &released);
    struct st_reader r = { 0 };
    st_reader_start(&r, sv[1], 65536, 0);
    cr_assert_eq(zbuf_sock_send(s, z, 0), 60000);
    cr_assert_eq(atomic_load(&released), 1, "released at once: the kernel copied");
    zbuf_delete(z);
    int64_t t0 = st_now_ms();
    cr_assert_eq(zbuf_sock_close(s, 5000), 0);
    cr_assert(st_now_ms() - t0 < 1000, "close waited for a notification that cannot come");
    st_reader_join(&r);
    cr_assert_eq(r.got, 60000);
    close(sv[1]);
}

Test(zerocopy, outstanding_sends_are_capped_and_partial_sends_keep_the_rest)
{
    require_zerocopy();
    int a, b;
    st_tcp_pair(&a, &b);
    st_bufsizes(a, 400000, 0);
    st_bufsizes(b, 0, 32768);
    st_nonblock(a, true);
    zbuf_sock_opts_t o = { .max_outstanding = 4 };
    zbuf_sock_t *s = open_zc(a, ZBUF_SOCK_ZEROCOPY_ALWAYS, &o);
    atomic_int released = 0;
    /* The receiver does not read.  First close its window with plain bytes
     * (below the zero-copy threshold), so that the zero-copy sends that
     * follow wait unacknowledged in the send queue: no completion comes. */
    uint64_t sent = 0;
    for (int i = 0; i < 20; i++) {
        zbuf_t *z = st_pattern_zbuf(8192, sent, 8192, &released);
        cr_assert_eq(zbuf_sock_send(s, z, 0), 8192);
        sent += 8192;
        zbuf_delete(z);
    }
    usleep(20000);
    const size_t msg = 16384;
    zbuf_t *pending = NULL;
    for (int i = 0; i < 1024; i++) {
        zbuf_t *z = st_pattern_zbuf(msg, sent, 8192, &released);
        ssize_t n = zbuf_sock_send(s, z, 0);
        if (n == -EAGAIN) {
            pending = z;
            break;
        }
        cr_assert(n > 0);
        sent += (uint64_t)n;
        cr_assert_eq(zbuf_length(z), msg - (size_t)n, "the zbuf keeps exactly the rest");
        if (zbuf_length(z) > 0) {
            pending = z;
            break;
        }
        zbuf_delete(z);
    }
    zbuf_sock_stats_t st;
    zbuf_sock_get_stats(s, &st);
    cr_assert(st.outstanding <= 4, "%llu outstanding", (unsigned long long)st.outstanding);
    cr_assert_eq(st.zc_sends, 4);
    cr_assert(st.zc_capped >= 1, "sends beyond the cap went copying");
    cr_assert(pending != NULL, "the socket never filled up");
    /* Now read, finish the pending zbuf, drain. */
    struct st_reader r = { 0 };
    st_reader_start(&r, b, 65536, 0);
    int64_t t0 = st_now_ms();
    while (zbuf_length(pending) > 0 && st_now_ms() - t0 < 10000) {
        size_t before = zbuf_length(pending);
        ssize_t n = zbuf_sock_send(s, pending, 0);
        if (n == -EAGAIN) {
            struct pollfd p = { .fd = a, .events = POLLOUT };
            poll(&p, 1, 100);
            zbuf_sock_complete(s);
            continue;
        }
        cr_assert(n > 0);
        cr_assert_eq(zbuf_length(pending), before - (size_t)n);
        sent += (uint64_t)n;
    }
    zbuf_delete(pending);
    cr_assert_eq(zbuf_sock_flush(s, 5000), 0);
    cr_assert_eq(atomic_load(&released), (int)(sent / 8192), "each buffer released once");
    cr_assert_eq(zbuf_sock_close(s, 1000), 0);
    st_reader_join(&r);
    cr_assert_eq(r.got, sent);
    cr_assert_eq(r.bad_at, UINT64_MAX);
    close(b);
}

/* Send `count` zero-copy messages of `len` bytes on a TCP pair, read them
 * back, and check every byte and callback.  Returns the handle's stats. */
static zbuf_sock_stats_t zc_stream_run(int count, size_t len)
{
    int a, b;
    st_tcp_pair(&a, &b);
    struct st_reader r = { 0 };
    st_reader_start(&r, b, 65536, 0);
    zbuf_sock_t *s = open_zc(a, ZBUF_SOCK_ZEROCOPY_ALWAYS, NULL);
    atomic_int released = 0;
    for (int i = 0; i < count; i++) {
        zbuf_t *z = st_pattern_zbuf(len, (uint64_t)i * len, len, &released);
        ssize_t n = zbuf_sock_send(s, z, 0);
        cr_assert_eq(n, (ssize_t)len, "send %d: %s", i, n < 0 ? zbuf_strerror((int)n) : "");
        zbuf_delete(z);
    }
    cr_assert_eq(zbuf_sock_flush(s, 10000), 0);
    cr_assert_eq(atomic_load(&released), count);
    zbuf_sock_stats_t st;
    zbuf_sock_get_stats(s, &st);
    cr_assert_eq(zbuf_sock_close(s, 1000), 0);
    st_reader_join(&r);
    cr_assert_eq(r.got, (uint64_t)count * len, "no byte lost");
    cr_assert_eq(r.bad_at, UINT64_MAX);
    close(b);
    return st;
}

/* Bring up lo in a new network namespace.  False when not permitted. */
static bool private_netns(void)
{
    if (unshare(CLONE_NEWNET) != 0)
        return false;
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct ifreq ifr = { 0 };
    strcpy(ifr.ifr_name, "lo");
    ioctl(fd, SIOCGIFFLAGS, &ifr);
    ifr.ifr_flags |= IFF_UP;
    bool ok = ioctl(fd, SIOCSIFFLAGS, &ifr) == 0;
    close(fd);
    return ok;
}

Test(zerocopy, enobufs_from_optmem_falls_back_to_copying_without_loss)
{
    require_zerocopy();
    /* Criterion runs each test in its own process: the namespace and its
     * sysctl are private to this test. */
    if (!private_netns())
        cr_skip_test("cannot create a network namespace (needs CAP_SYS_ADMIN)");
    FILE *f = fopen("/proc/sys/net/core/optmem_max", "w");
    if (f == NULL)
        cr_skip_test("net.core.optmem_max is not per-namespace here");
    fprintf(f, "64\n");
    fclose(f);
    zbuf_sock_stats_t st = zc_stream_run(20, 100000);
    cr_assert_eq(st.zc_enobufs, 20, "every zero-copy attempt met ENOBUFS (%llu)",
                 (unsigned long long)st.zc_enobufs);
    cr_assert_eq(st.zc_sends, 0);
    cr_assert_eq(st.sends, 20);
}

Test(zerocopy, enobufs_from_the_locked_page_limit_as_unprivileged_user)
{
    require_zerocopy();
    /* Root (CAP_IPC_LOCK) is never charged for pinned pages: become nobody
     * with a 64 KiB RLIMIT_MEMLOCK, as `prlimit --memlock` would set. */
    struct rlimit rl = { 65536, 65536 };
    cr_assert_eq(setrlimit(RLIMIT_MEMLOCK, &rl), 0);
    if (geteuid() == 0) {
        if (setgid(65534) != 0 || setuid(65534) != 0)
            cr_skip_test("cannot drop to the nobody user");
    }
    zbuf_sock_stats_t st = zc_stream_run(10, 1 << 20);
    cr_assert(st.zc_enobufs >= 10, "1 MiB sends exceed a 64 KiB lock limit (%llu ENOBUFS)",
              (unsigned long long)st.zc_enobufs);
    cr_assert_eq(st.sends, 10);
}

Test(zerocopy, close_drains_outstanding_sends_first)
{
    require_zerocopy();
    int a, b;
    st_tcp_pair(&a, &b);
    struct st_reader r = { 0 };
    st_reader_start(&r, b, 65536, 0);
    zbuf_sock_t *s = open_zc(a, ZBUF_SOCK_ZEROCOPY_ALWAYS, NULL);
    atomic_int released = 0;
    for (int i = 0; i < 16; i++) {
        zbuf_t *z = st_pattern_zbuf(65536, (uint64_t)i * 65536, 65536, &released);
        cr_assert_eq(zbuf_sock_send(s, z, 0), 65536);
        zbuf_delete(z);
    }
    cr_assert_eq(zbuf_sock_close(s, 5000), 0, "everything completes in time");
    cr_assert_eq(atomic_load(&released), 16);
    st_reader_join(&r);
    cr_assert_eq(r.got, 16 * 65536);
    close(b);
}

Test(zerocopy, close_with_a_stalled_peer_aborts_after_the_bounded_wait)
{
    require_zerocopy();
    int a, b;
    st_tcp_pair(&a, &b);
    st_nonblock(a, true);
    zbuf_sock_t *s = open_zc(a, ZBUF_SOCK_ZEROCOPY_ALWAYS, NULL);
    atomic_int released = 0;
    int sent = 0;
    for (int i = 0; i < 64; i++) {
        zbuf_t *z = st_pattern_zbuf(65536, 0, 65536, &released);
        ssize_t n = zbuf_sock_send(s, z, 0);
        zbuf_delete(z);
        if (n == -EAGAIN)
            break;
        sent++;
    }
    zbuf_sock_stats_t st;
    zbuf_sock_get_stats(s, &st);
    cr_assert(st.outstanding > 0, "nothing outstanding: the peer never stalled");
    int64_t t0 = st_now_ms();
    int r = zbuf_sock_close(s, 200);
    int64_t took = st_now_ms() - t0;
    cr_assert_eq(r, -ECONNABORTED, "got %s", zbuf_strerror(r));
    cr_assert(took >= 200 && took < 3000, "waited %lld ms", (long long)took);
    cr_assert_eq(atomic_load(&released), 64 > sent ? sent + 1 : sent,
                 "after the abort every buffer was released once");
    close(b);
}

Test(zerocopy, udp_datagrams_and_batches_complete)
{
    require_zerocopy();
    int a, b;
    st_udp_pair(&a, &b, true, NULL);
    st_bufsizes(b, 0, 4 << 20);
    static struct evlog log = { .lock = PTHREAD_MUTEX_INITIALIZER };
    zbuf_sock_opts_t o = { .on_event = log_event, .event_arg = &log };
    zbuf_sock_t *s = open_zc(a, ZBUF_SOCK_ZEROCOPY_ALWAYS, &o);
    atomic_int released = 0;
    for (int i = 0; i < 10; i++) {
        zbuf_t *z = st_pattern_zbuf(30000, (uint64_t)i, 10000, &released);
        cr_assert_eq(zbuf_sock_send(s, z, 0), 30000);
        zbuf_delete(z);
    }
    zbuf_sock_msg_t m[10];
    for (int i = 0; i < 10; i++) {
        m[i].z = st_pattern_zbuf(20000, (uint64_t)(10 + i), 20000, &released);
        m[i].addrlen = 0;
    }
    cr_assert_eq(zbuf_sock_sendmmsg(s, m, 10, 0), 10);
    for (int i = 0; i < 10; i++)
        zbuf_delete(m[i].z);
    zbuf_sock_stats_t st;
    zbuf_sock_get_stats(s, &st);
    cr_assert_eq(st.zc_sends, 20);
    cr_assert_eq(zbuf_sock_flush(s, 5000), 0);
    cr_assert_eq(atomic_load(&released), 40, "three buffers per datagram, then one");
    cr_assert_eq(check_pairs(&log), 20);
    cr_assert_eq(zbuf_sock_close(s, 1000), 0);
    uint8_t buf[30000];
    for (int i = 0; i < 20; i++) {
        size_t len = i < 10 ? 30000 : 20000;
        cr_assert_eq(recv(b, buf, sizeof buf, 0), (ssize_t)len);
        cr_assert_eq(st_mismatch(buf, len, (uint64_t)i), (size_t)-1, "datagram %d", i);
    }
    close(b);
}

Test(zerocopy, small_sends_stay_below_the_threshold)
{
    require_zerocopy();
    int a, b;
    st_tcp_pair(&a, &b);
    struct st_reader r = { 0 };
    st_reader_start(&r, b, 65536, 0);
    zbuf_sock_t *s = open_zc(a, ZBUF_SOCK_ZEROCOPY_ALWAYS, NULL);
    atomic_int released = 0;
    zbuf_t *z = st_pattern_zbuf(16383, 0, 16383, &released);
    cr_assert_eq(zbuf_sock_send(s, z, 0), 16383);
    cr_assert_eq(atomic_load(&released), 1, "a copying send releases at once");
    zbuf_delete(z);
    zbuf_sock_stats_t st;
    zbuf_sock_get_stats(s, &st);
    cr_assert_eq(st.zc_sends, 0);
    cr_assert_eq(zbuf_sock_close(s, 1000), 0);
    st_reader_join(&r);
    cr_assert_eq(r.got, 16383);
    close(b);
}
