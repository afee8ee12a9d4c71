/* SPDX-License-Identifier: MIT */
/* The libuv driver: two streams on loopback sockets, both driven by one
 * libuv loop only (no manual process() call); the writer writes from its
 * event callback, the reader checks every byte, both close cleanly. */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zbuf/udpstream_uv.h>

#include "support.h"
#include "ustest.h"

static void fini(void)
{
    zt_assert_no_leaks();
}
TestSuite(uv, .init = zt_leak_baseline, .fini = fini, .timeout = 120);

struct side {
    zbuf_udpstream_t *s;
    zbuf_udpstream_uv_t *h;
    struct ut_dir d;
    uint64_t total;
    uint64_t rng;
    bool closed_handle;
    int callbacks;
};

static void handle_closed(void *arg)
{
    ((struct side *)arg)->closed_handle = true;
}

static void on_event(zbuf_udpstream_uv_t *h, zbuf_udpstream_t *s, unsigned ev, void *arg)
{
    struct side *me = arg;
    me->callbacks++;
    /* Write while the stream takes more. */
    while (me->d.written < me->total && (zbuf_udpstream_events(s) & ZBUF_UDPSTREAM_WRITABLE)) {
        size_t len = 1 + (size_t)(ut_rand(&me->rng) % 200000);
        if (len > me->total - me->d.written)
            len = (size_t)(me->total - me->d.written);
        cr_assert_eq(ut_write_pattern(&me->d, me->d.written, len, 30000, &me->rng), 0);
        me->d.written += len;
    }
    if (me->total > 0 && me->d.written == me->total && !me->d.shut) {
        zbuf_udpstream_shutdown(s);
        me->d.shut = true;
    }
    /* Read and check whatever came. */
    zbuf_t *z;
    ssize_t n;
    while ((n = zbuf_udpstream_read(s, 1, SIZE_MAX, &z)) > 0) {
        size_t at = 0;
        for (zbuf_seg_t *sg = zbuf_seg_first(z); sg; sg = zbuf_seg_next(z, sg)) {
            const uint8_t *p = zbuf_seg_data(z, sg);
            for (size_t k = 0; k < zbuf_seg_length(z, sg); k++, at++)
                if (p[k] != ut_pat(me->d.got + at) && me->d.bad_at == UINT64_MAX)
                    me->d.bad_at = me->d.got + at;
        }
        me->d.got += at;
        zbuf_delete(z);
    }
    if (n == 0 && !me->d.eof) {
        me->d.eof = true;
        if (!me->d.shut) {
            zbuf_udpstream_shutdown(s);
            me->d.shut = true;
        }
    }
    if (ev & (ZBUF_UDPSTREAM_CLOSED | ZBUF_UDPSTREAM_ERROR))
        zbuf_udpstream_uv_close(h, handle_closed, me);
}

static int udp_socket(struct sockaddr_in *addr)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    cr_assert_geq(fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t l = sizeof *addr;
    cr_assert_eq(getsockname(fd, (struct sockaddr *)addr, &l), 0);
    return fd;
}

static void guard_fired(uv_timer_t *t)
{
    (void)t;
    cr_assert_fail("the loop did not finish in time");
}

Test(uv, a_libuv_loop_alone_drives_a_transfer_and_the_close)
{
    uv_loop_t loop;
    cr_assert_eq(uv_loop_init(&loop), 0);
    struct sockaddr_in a[2];
    int fd[2] = {udp_socket(&a[0]), udp_socket(&a[1])};
    struct side sd[2] = {{.total = 8u << 20, .rng = 1}, {.total = 0, .rng = 2}};
    zbuf_udpstream_opts_t o;
    zbuf_udpstream_opts_init(&o);
    o.mode = ZBUF_UDPSTREAM_ZEROCOPY;
    cr_assert_eq(zbuf_udpstream_listen_fd(fd[1], &o, &sd[1].s), 0);
    cr_assert_eq(zbuf_udpstream_connect_fd(fd[0], (struct sockaddr *)&a[1], sizeof a[1], &o,
                                           &sd[0].s),
                 0);
    for (int i = 0; i < 2; i++) {
        sd[i].d = (struct ut_dir){.w = sd[i].s, .r = sd[!i].s, .bad_at = UINT64_MAX};
        cr_assert_eq(zbuf_udpstream_uv_start(&loop, sd[i].s, on_event, &sd[i], &sd[i].h), 0);
    }
    /* The first writes happen from here; the loop does the rest. */
    on_event(sd[0].h, sd[0].s, zbuf_udpstream_events(sd[0].s), &sd[0]);
    uv_timer_t guard;
    uv_timer_init(&loop, &guard);
    uv_timer_start(&guard, guard_fired, 60000, 0);
    uv_unref((uv_handle_t *)&guard);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&guard, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert_eq(uv_loop_close(&loop), 0);
    cr_assert(sd[0].closed_handle && sd[1].closed_handle);
    cr_assert_eq(zbuf_udpstream_error(sd[0].s), 0);
    cr_assert(zbuf_udpstream_events(sd[0].s) & ZBUF_UDPSTREAM_CLOSED);
    cr_assert_eq(sd[1].d.got, sd[0].total);
    cr_assert_eq(sd[1].d.bad_at, UINT64_MAX);
    cr_assert_eq(sd[0].d.released, sd[0].d.enrolled);
    cr_assert_gt(sd[1].callbacks, 1);
    for (int i = 0; i < 2; i++) {
        zbuf_udpstream_delete(sd[i].s);
        close(fd[i]);
    }
}

Test(uv, start_refuses_a_stream_without_a_socket)
{
    uv_loop_t loop;
    cr_assert_eq(uv_loop_init(&loop), 0);
    struct unet n;
    unet_init(&n, 1);
    unet_open(&n, NULL);
    zbuf_udpstream_uv_t *h;
    cr_assert_eq(zbuf_udpstream_uv_start(&loop, n.s[0], on_event, NULL, &h), -EINVAL);
    cr_assert_eq(zbuf_udpstream_uv_start(&loop, NULL, on_event, NULL, &h), -EINVAL);
    unet_free(&n);
    cr_assert_eq(uv_loop_close(&loop), 0);
}
