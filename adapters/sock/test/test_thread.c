/* SPDX-License-Identifier: MIT */
/*
 * The background completion thread: release callbacks run without the
 * program calling back, so a program that waits in its own buffer pool for
 * a release does not deadlock; handles come and go while it runs.  Built
 * and run under ThreadSanitizer by scripts/test.sh (label "threads").
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <semaphore.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zbuf/sock.h>

#include "sock_test_util.h"
#include "support.h"

ZT_SUITE(thread);

static void require_zerocopy(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    int r = setsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof one);
    close(fd);
    if (r != 0)
        cr_skip_test("kernel without SO_ZEROCOPY: %s", strerror(errno));
}

static zbuf_sock_t *open_threaded(int fd)
{
    zbuf_sock_opts_t o;
    zbuf_sock_opts_init(&o);
    o.flags = ZBUF_SOCK_ZEROCOPY | ZBUF_SOCK_ZEROCOPY_ALWAYS | ZBUF_SOCK_THREAD;
    zbuf_sock_t *s;
    cr_assert_eq(zbuf_sock_open(fd, &o, &s), 0);
    return s;
}

/* Wait until *count reaches want, at most ms milliseconds. */
static bool wait_count(atomic_int *count, int want, int ms)
{
    int64_t t0 = st_now_ms();
    while (atomic_load(count) < want) {
        if (st_now_ms() - t0 > ms)
            return false;
        usleep(1000);
    }
    return true;
}

static atomic_int on_named_thread;

static void note_thread(void *data, size_t size, void *arg)
{
    char name[32] = "";
    pthread_getname_np(pthread_self(), name, sizeof name);
    if (strcmp(name, "zbuf-sock-zc") == 0)
        atomic_fetch_add(&on_named_thread, 1);
    st_count_release(data, size, arg);
}

Test(thread, completions_are_driven_without_the_program_calling_back)
{
    require_zerocopy();
    int a, b;
    st_tcp_pair(&a, &b);
    struct st_reader r = { 0 };
    st_reader_start(&r, b, 65536, 0);
    zbuf_sock_t *s = open_threaded(a);
    atomic_int released = 0;
    atomic_store(&on_named_thread, 0);
    enum { N = 200 };
    const size_t len = 65536;
    for (int i = 0; i < N; i++) {
        zbuf_t *z;
        cr_assert_eq(zbuf_create(&z), 0);
        void *p = malloc(len);
        st_fill(p, len, (uint64_t)i * len);
        cr_assert_eq(zbuf_append_buf(z, p, len, note_thread, &released), 0);
        cr_assert_eq(zbuf_sock_send(s, z, 0), (ssize_t)len);
        zbuf_delete(z);
    }
    /* Never call zbuf_sock_complete(): the thread must do it. */
    cr_assert(wait_count(&released, N, 10000), "only %d of %d released",
              atomic_load(&released), N);
    cr_assert(atomic_load(&on_named_thread) > 0,
              "callbacks ran on the thread named zbuf-sock-zc");
    zbuf_sock_stats_t st;
    zbuf_sock_get_stats(s, &st);
    cr_assert_eq(st.zc_sends, N);
    cr_assert_eq(st.outstanding, 0);
    cr_assert_eq(zbuf_sock_close(s, 1000), 0);
    st_reader_join(&r);
    cr_assert_eq(r.got, (uint64_t)N * len);
    cr_assert_eq(r.bad_at, UINT64_MAX);
    close(b);
}

/* The application's own pool of four buffers, as in the 1995 article:
 * a buffer comes back only through its release callback. */
struct app_pool {
    sem_t free_count;
    pthread_mutex_t lock;
    void *bufs[4];
    int nfree;
};

static void app_buf_back(void *data, size_t size, void *arg)
{
    (void)size;
    struct app_pool *p = arg;
    pthread_mutex_lock(&p->lock);
    p->bufs[p->nfree++] = data;
    pthread_mutex_unlock(&p->lock);
    sem_post(&p->free_count);
}

Test(thread, waiting_in_the_programs_own_pool_does_not_deadlock)
{
    require_zerocopy();
    int a, b;
    st_tcp_pair(&a, &b);
    struct st_reader r = { 0 };
    st_reader_start(&r, b, 65536, 0);
    zbuf_sock_t *s = open_threaded(a);
    static struct app_pool pool = { .lock = PTHREAD_MUTEX_INITIALIZER };
    sem_init(&pool.free_count, 0, 4);
    const size_t len = 128 * 1024;
    for (int i = 0; i < 4; i++)
        pool.bufs[i] = malloc(len);
    pool.nfree = 4;
    enum { N = 300 };
    for (int i = 0; i < N; i++) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 5;
        /* Blocks until a buffer comes back: only the completion thread can
         * bring it. */
        cr_assert_eq(sem_timedwait(&pool.free_count, &until), 0,
                     "deadlock: no buffer came back in 5 s (send %d)", i);
        pthread_mutex_lock(&pool.lock);
        void *buf = pool.bufs[--pool.nfree];
        pthread_mutex_unlock(&pool.lock);
        st_fill(buf, len, (uint64_t)i * len);
        zbuf_t *z;
        cr_assert_eq(zbuf_create(&z), 0);
        cr_assert_eq(zbuf_append_buf(z, buf, len, app_buf_back, &pool), 0);
        cr_assert_eq(zbuf_sock_send(s, z, 0), (ssize_t)len);
        zbuf_delete(z);
    }
    cr_assert_eq(zbuf_sock_close(s, 5000), 0);
    cr_assert_eq(pool.nfree, 4, "every buffer came back");
    for (int i = 0; i < 4; i++)
        free(pool.bufs[i]);
    sem_destroy(&pool.free_count);
    st_reader_join(&r);
    cr_assert_eq(r.got, (uint64_t)N * len);
    cr_assert_eq(r.bad_at, UINT64_MAX);
    close(b);
}

struct churn {
    int id;
    atomic_int released;
    int sent;
};

static void *churn_main(void *arg)
{
    struct churn *c = arg;
    for (int round = 0; round < 10; round++) {
        int a, b;
        st_tcp_pair(&a, &b);
        struct st_reader r = { 0 };
        st_reader_start(&r, b, 65536, 0);
        zbuf_sock_t *s = open_threaded(a);
        for (int i = 0; i < 20; i++) {
            zbuf_t *z = st_pattern_zbuf(32768, (uint64_t)i * 32768, 16384, &c->released);
            if (zbuf_sock_send(s, z, 0) == 32768)
                c->sent += 2;
            zbuf_delete(z);
        }
        /* Close with sends still in flight, half the time at once. */
        zbuf_sock_close(s, round % 2 ? 0 : 1000);
        st_reader_join(&r);
        close(b);
    }
    return NULL;
}

Test(thread, handles_open_and_close_while_the_thread_runs)
{
    require_zerocopy();
    struct churn c[3];
    pthread_t t[3];
    for (int i = 0; i < 3; i++) {
        c[i].id = i;
        atomic_init(&c[i].released, 0);
        c[i].sent = 0;
        cr_assert_eq(pthread_create(&t[i], NULL, churn_main, &c[i]), 0);
    }
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < 3; i++) {
        /* A close with timeout 0 may end with an abort but never abandons
         * on loopback: every buffer is released exactly once. */
        cr_assert_eq(atomic_load(&c[i].released), c[i].sent, "worker %d: %d of %d", i,
                     atomic_load(&c[i].released), c[i].sent);
        cr_assert_eq(c[i].sent, 400);
    }
}

/* zbuf_sock_forget_fd(): the program closes the descriptor of a HOLD_FD
 * handle with a zero-copy send outstanding and the kernel gives the number
 * to a new socket.  The handle refuses new sends (the caller keeps the
 * zbuf), its completions still arrive through its duplicate, and closing it
 * leaves the new socket alone. */
Test(thread, a_forgotten_descriptor_is_never_touched_again)
{
    require_zerocopy();
    cr_assert_eq(zbuf_sock_forget_fd(NULL), -EINVAL);
    int a, b;
    st_tcp_pair(&a, &b);
    struct st_reader r = { 0 };
    st_reader_start(&r, b, 65536, 0);
    zbuf_sock_opts_t o;
    zbuf_sock_opts_init(&o);
    o.flags = ZBUF_SOCK_ZEROCOPY | ZBUF_SOCK_ZEROCOPY_ALWAYS | ZBUF_SOCK_THREAD | ZBUF_SOCK_HOLD_FD;
    zbuf_sock_t *s;
    cr_assert_eq(zbuf_sock_open(a, &o, &s), 0);
    atomic_int released = 0;
    const size_t len = 65536;
    zbuf_t *z = st_pattern_zbuf(len, 0, 16384, &released);
    cr_assert_eq(zbuf_sock_send(s, z, 0), (ssize_t)len);
    zbuf_delete(z);

    cr_assert_eq(zbuf_sock_forget_fd(s), 0);
    close(a);
    int c = socket(AF_INET, SOCK_STREAM, 0); /* most likely a's old number */
    cr_assert_geq(c, 0);
    zbuf_t *z2 = st_pattern_zbuf(100, len, 100, &released);
    cr_assert_eq(zbuf_sock_send(s, z2, 0), -EBADF);
    cr_assert_eq(zbuf_length(z2), 100, "a refused send leaves the zbuf with the caller");
    zbuf_delete(z2);
    cr_assert(wait_count(&released, 5, 10000), "released %d of 4 + 1", atomic_load(&released));

    int rc = zbuf_sock_close(s, 5000);
    cr_assert(rc == 0 || rc == -ECONNABORTED, "close: %d", rc);
    cr_assert_neq(fcntl(c, F_GETFD), -1, "the new socket on the old number is still open");
    st_reader_join(&r);
    cr_assert_eq(r.got, (uint64_t)len);
    cr_assert_eq(r.bad_at, UINT64_MAX);
    close(c);
    close(b);
}

/* The same without HOLD_FD (so without KEEP_FD): zbuf_sock_close() must not
 * close the forgotten number either. */
Test(thread, closing_a_handle_whose_descriptor_was_forgotten_spares_the_number)
{
    int a, b;
    st_tcp_pair(&a, &b);
    zbuf_sock_t *s;
    cr_assert_eq(zbuf_sock_open(a, NULL, &s), 0);
    cr_assert_eq(zbuf_sock_forget_fd(s), 0);
    close(a);
    int c = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(c, 0);
    cr_assert_eq(zbuf_sock_close(s, 1000), 0);
    cr_assert_neq(fcntl(c, F_GETFD), -1, "zbuf_sock_close() closed a number it had given up");
    close(c);
    close(b);
}
