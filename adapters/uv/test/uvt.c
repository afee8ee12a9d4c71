/* SPDX-License-Identifier: MIT */
#include "uvt.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static uv_loop_t loop_storage;
uv_loop_t *uvt_loop;

static uv_timer_t deadline;  /* bounds every uvt_run_*() */
static int timed_out;
static int pair_closed;

void uvt_setup(void)
{
    cr_assert_eq(uv_loop_init(&loop_storage), 0);
    uvt_loop = &loop_storage;
    cr_assert_eq(uv_timer_init(uvt_loop, &deadline), 0);
}

static void walk_report(uv_handle_t *h, void *arg)
{
    ++*(int *)arg;
    fprintf(stderr, "uvt: handle left open: type %s, active %d\n",
            uv_handle_type_name(h->type), uv_is_active(h));
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

void uvt_teardown(void)
{
    uv_close((uv_handle_t *)&deadline, NULL);
    for (int i = 0; i < 4; i++)
        uv_run(uvt_loop, UV_RUN_NOWAIT);
    int rc = uv_loop_close(uvt_loop);
    if (rc != 0) {
        int left = 0;
        uv_walk(uvt_loop, walk_report, &left);
        for (int i = 0; i < 4; i++)
            uv_run(uvt_loop, UV_RUN_NOWAIT);
        uv_loop_close(uvt_loop);
        cr_assert_fail("uv_loop_close() = %s: %d handles left open", uv_err_name(rc), left);
    }
    uvt_loop = NULL;
}

void uvt_init(void)
{
    /* Like any libuv program that writes to sockets and pipes: a peer that
     * went away must give EPIPE, not kill the process. */
    signal(SIGPIPE, SIG_IGN);
    zt_leak_baseline();
    uvt_setup();
}

void uvt_fini(void)
{
    if (uvt_loop != NULL)
        uvt_teardown();
    uvt_codec_fini();
}

void uvt_codec_fini(void)
{
    zbuf_frame_thread_flush(); /* header slabs are not leaks */
    zt_assert_no_leaks();
}

static void on_deadline(uv_timer_t *t)
{
    (void)t;
    timed_out = 1;
}

static void arm(unsigned ms)
{
    /* Repeating: if the deadline passes between two uv_run(UV_RUN_ONCE)
     * calls it fires at the start of the next one, and a one-shot timer
     * would then leave that call polling with no timeout at all. */
    timed_out = 0;
    uv_update_time(uvt_loop);
    uv_timer_start(&deadline, on_deadline, ms, ms > 10 ? 10 : ms);
}

bool uvt_run_while(bool (*pred)(void *arg), void *arg, unsigned ms)
{
    arm(ms);
    while (pred(arg) && !timed_out)
        uv_run(uvt_loop, UV_RUN_ONCE);
    uv_timer_stop(&deadline);
    return !pred(arg);
}

static bool flag_unset(void *arg)
{
    return *(const int *)arg == 0;
}

void uvt_run_until(const int *flag, unsigned ms, const char *what)
{
    bool ok = uvt_run_while(flag_unset, (void *)flag, ms);
    cr_assert(ok, "timed out after %u ms waiting for %s", ms, what);
}

void uvt_run_for(unsigned ms)
{
    arm(ms);
    while (!timed_out)
        uv_run(uvt_loop, UV_RUN_ONCE);
}

/* ------------------------------------------------------------------ pairs */

static uv_tcp_t listener;
static struct uvt_pair *accepting;
static int accepted, connected, listener_closed;

static void on_connection(uv_stream_t *server, int status)
{
    cr_assert_eq(status, 0, "listen: %s", uv_strerror(status));
    cr_assert_eq(uv_accept(server, &accepting->b.stream), 0);
    accepted = 1;
}

static void on_connect(uv_connect_t *req, int status)
{
    (void)req;
    cr_assert_eq(status, 0, "connect: %s", uv_strerror(status));
    connected = 1;
}

static void on_listener_closed(uv_handle_t *h)
{
    (void)h;
    listener_closed = 1;
}

static void open_tcp(struct uvt_pair *p)
{
    struct sockaddr_in addr;
    struct sockaddr_storage bound;
    int namelen = sizeof(bound);
    uv_connect_t req;

    cr_assert_eq(uv_tcp_init(uvt_loop, &listener), 0);
    cr_assert_eq(uv_ip4_addr("127.0.0.1", 0, &addr), 0);
    cr_assert_eq(uv_tcp_bind(&listener, (const struct sockaddr *)&addr, 0), 0);
    cr_assert_eq(uv_listen((uv_stream_t *)&listener, 8, on_connection), 0);
    cr_assert_eq(uv_tcp_getsockname(&listener, (struct sockaddr *)&bound, &namelen), 0);

    cr_assert_eq(uv_tcp_init(uvt_loop, &p->a.tcp), 0);
    cr_assert_eq(uv_tcp_init(uvt_loop, &p->b.tcp), 0);
    accepting = p;
    accepted = connected = listener_closed = 0;
    cr_assert_eq(uv_tcp_connect(&req, &p->a.tcp, (const struct sockaddr *)&bound, on_connect),
                 0);
    uvt_run_until(&connected, 5000, "connect");
    uvt_run_until(&accepted, 5000, "accept");
    uv_close((uv_handle_t *)&listener, on_listener_closed);
    uvt_run_until(&listener_closed, 5000, "listener close");
    uv_tcp_nodelay(&p->a.tcp, 1);
    uv_tcp_nodelay(&p->b.tcp, 1);
}

void uvt_pair_open(struct uvt_pair *p, enum uvt_kind kind)
{
    memset(p, 0, sizeof(*p));
    if (kind == UVT_TCP) {
        open_tcp(p);
    } else {
        uv_file fds[2];
        if (kind == UVT_UNIX)
            cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
        else
            cr_assert_eq(uv_pipe(fds, 0, 0), 0);
        /* uv_pipe(): fds[0] reads, fds[1] writes; a is the writer. */
        uv_file fa = kind == UVT_PIPE ? fds[1] : fds[0];
        uv_file fb = kind == UVT_PIPE ? fds[0] : fds[1];
        cr_assert_eq(uv_pipe_init(uvt_loop, &p->a.pipe, 0), 0);
        cr_assert_eq(uv_pipe_init(uvt_loop, &p->b.pipe, 0), 0);
        cr_assert_eq(uv_pipe_open(&p->a.pipe, fa), 0);
        cr_assert_eq(uv_pipe_open(&p->b.pipe, fb), 0);
    }
    cr_assert_eq(zbuf_uv_stream_init(&p->a), 0);
    cr_assert_eq(zbuf_uv_stream_init(&p->b), 0);
}

static void on_pair_closed(uv_handle_t *h)
{
    (void)h;
    pair_closed++;
}

static bool pair_open(void *arg)
{
    (void)arg;
    return pair_closed < 2;
}

void uvt_pair_close(struct uvt_pair *p)
{
    pair_closed = 0;
    zbuf_uv_close(&p->a, on_pair_closed);
    zbuf_uv_close(&p->b, on_pair_closed);
    cr_assert(uvt_run_while(pair_open, NULL, 5000), "pair did not close");
    p->closed = pair_closed;
}

const char *uvt_kind_name(enum uvt_kind kind)
{
    return kind == UVT_TCP ? "tcp" : kind == UVT_UNIX ? "unix" : "pipe";
}

/* ------------------------------------------------------------------- data */

void uvt_fill(uint8_t *p, size_t len, uint32_t seed, size_t from)
{
    for (size_t i = 0; i < len; i++)
        p[i] = uvt_byte(seed, from + i);
}

static void free_release(void *data, size_t size, void *arg)
{
    (void)size;
    free(data);
    if (arg)
        ++*(int *)arg;
}

zbuf_t *uvt_make(size_t len, uint32_t seed, size_t from, const size_t *sizes, size_t nsizes,
                 int *released)
{
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    size_t done = 0;
    for (size_t i = 0; done < len; i++) {
        size_t n = sizes[i % nsizes];
        if (n > len - done)
            n = len - done;
        uint8_t *p = malloc(n);
        cr_assert(p != NULL);
        uvt_fill(p, n, seed, from + done);
        cr_assert_eq(zbuf_append_buf(z, p, n, free_release, released), 0);
        done += n;
    }
    zt_check(z);
    return z;
}

/* ------------------------------------------------------------------- sink */

static void sink_read(zbuf_uv_stream_t *s, ssize_t status, zbuf_t *z)
{
    struct uvt_sink *k = s->handle.data;
    if (status > 0) {
        cr_assert(z != NULL);
        cr_assert_eq(zbuf_length(z), (size_t)status);
        zt_check(z);
        if (k->len + (size_t)status > k->cap) {
            size_t cap = k->cap ? k->cap : 4096;
            while (cap < k->len + (size_t)status)
                cap *= 2;
            k->data = realloc(k->data, cap);
            cr_assert(k->data != NULL);
            k->cap = cap;
        }
        cr_assert_eq(zbuf_copyout(z, 0, k->data + k->len, (size_t)status), status);
        k->len += (size_t)status;
        k->reads++;
        if (k->hold) {
            cr_assert(k->nheld < (int)(sizeof(k->held) / sizeof(k->held[0])));
            k->held[k->nheld++] = z;
        } else {
            zbuf_delete(z);
        }
        return;
    }
    cr_assert(z == NULL, "no zbuf with status %zd", status);
    if (status == UV_EOF)
        k->eof++;
    else if (status == UV_ENOBUFS)
        k->enobufs++;
    else {
        k->errors++;
        k->last_error = status;
    }
}

void uvt_sink_start(zbuf_uv_stream_t *s, struct uvt_sink *k, zbuf_pool_t *pool)
{
    s->handle.data = k;
    cr_assert_eq(zbuf_uv_read_start(s, pool, sink_read), 0);
}

void uvt_sink_release(struct uvt_sink *k)
{
    for (int i = 0; i < k->nheld; i++)
        zbuf_delete(k->held[i]);
    k->nheld = 0;
}

void uvt_sink_free(struct uvt_sink *k)
{
    uvt_sink_release(k);
    free(k->data);
    k->data = NULL;
    k->len = k->cap = 0;
}

struct sink_wait {
    const struct uvt_sink *k;
    size_t len;
};

static bool sink_short(void *arg)
{
    const struct sink_wait *w = arg;
    return w->k->len < w->len && w->k->eof == 0 && w->k->errors == 0;
}

void uvt_sink_wait(struct uvt_sink *k, size_t len, unsigned ms)
{
    struct sink_wait w = {k, len};
    uvt_run_while(sink_short, &w, ms);
}

void uvt_sink_expect(const struct uvt_sink *k, size_t len, uint32_t seed)
{
    cr_assert_eq(k->len, len, "received %zu bytes, expected %zu", k->len, len);
    for (size_t i = 0; i < len; i++)
        if (k->data[i] != uvt_byte(seed, i))
            cr_assert_fail("byte %zu is 0x%02x, expected 0x%02x", i, k->data[i],
                           uvt_byte(seed, i));
}
