/* SPDX-License-Identifier: MIT */
/*
 * zbuf_uv_write() and friends on a real loop: byte-exact delivery over
 * loopback TCP, Unix domain sockets and anonymous pipes for many segment
 * layouts, the write callback exactly once, buffers released only once the
 * bytes are written, errors reported once, try-write and the queue size.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "uvt.h"

UVT_SUITE(uv_write);

/* What a write callback saw. */
struct wres {
    int calls;
    int status;
    int released_at_cb; /* *released when the callback ran */
    const int *released;
};

static void on_written(uv_stream_t *s, int status, void *arg)
{
    (void)s;
    struct wres *r = arg;
    r->calls++;
    r->status = status;
    r->released_at_cb = r->released ? *r->released : -1;
}

static const enum uvt_kind kinds[] = {UVT_TCP, UVT_UNIX, UVT_PIPE};

struct layout {
    size_t sizes[4];
    size_t nsizes;
    size_t len;
};

static const struct layout layouts[] = {
    {{1}, 1, 1},
    {{1}, 1, 3000},                   /* many one-byte segments: > IOV_MAX */
    {{7, 1, 13}, 3, 10007},
    {{4096}, 1, 4096 * 5},
    {{65536, 3}, 2, 400000},
    {{1, 1000, 100000}, 3, 1 << 20},  /* more than a socket buffer */
    {{1 << 20}, 1, 3 << 20},
};

Test(uv_write, every_segment_layout_arrives_byte_exact_with_one_callback)
{
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(16384, 64, &pool), 0);
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        for (size_t l = 0; l < sizeof(layouts) / sizeof(layouts[0]); l++) {
            const struct layout *lo = &layouts[l];
            struct uvt_pair p;
            struct uvt_sink sink = {0};
            int released = 0;
            struct wres res = {.released = &released};
            uvt_pair_open(&p, kinds[k]);
            uvt_sink_start(&p.b, &sink, pool);

            uint32_t seed = (uint32_t)(k * 100 + l);
            zbuf_t *z = uvt_make(lo->len, seed, 0, lo->sizes, lo->nsizes, &released);
            size_t nsegs = zbuf_seg_count(z);
            cr_assert_eq(zbuf_uv_write(&p.a.stream, z, on_written, &res), 0);
            cr_assert_eq(released, 0, "%s: a buffer was released before its bytes were written",
                         uvt_kind_name(kinds[k]));
            cr_assert_eq(res.calls, 0, "the callback ran inside zbuf_uv_write()");

            uvt_run_until(&res.calls, 10000, "write callback");
            cr_assert_eq(res.status, 0, "%s layout %zu: %s", uvt_kind_name(kinds[k]), l,
                         uv_strerror(res.status));
            cr_assert_eq(res.released_at_cb, (int)nsegs,
                         "every buffer is released before the callback");
            uvt_sink_wait(&sink, lo->len, 10000);
            uvt_sink_expect(&sink, lo->len, seed);
            cr_assert_eq(res.calls, 1);
            cr_assert_eq(released, (int)nsegs);
            cr_assert_eq(sink.errors + sink.eof + sink.enobufs, 0);
            uvt_pair_close(&p);
            uvt_sink_free(&sink);
        }
    }
    zbuf_pool_delete(pool);
}

Test(uv_write, more_segments_than_iov_max_go_out_in_order)
{
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(65536, 16, &pool), 0);
    struct uvt_pair p;
    struct uvt_sink sink = {0};
    int released = 0;
    struct wres res = {.released = &released};
    uvt_pair_open(&p, UVT_TCP);
    uvt_sink_start(&p.b, &sink, pool);
    const size_t sizes[] = {1, 2, 3, 5, 8};
    zbuf_t *z = uvt_make(4 * ZBUF_UV_BUFS_PER_WRITE * 4, 9, 0, sizes, 5, &released);
    size_t nsegs = zbuf_seg_count(z), len = zbuf_length(z);
    cr_assert_gt(nsegs, 3 * ZBUF_UV_BUFS_PER_WRITE, "the test needs several requests");
    cr_assert_eq(zbuf_uv_write(&p.a.stream, z, on_written, &res), 0);
    uvt_run_until(&res.calls, 10000, "write callback");
    cr_assert_eq(res.status, 0);
    cr_assert_eq(res.released_at_cb, (int)nsegs);
    uvt_sink_wait(&sink, len, 10000);
    uvt_sink_expect(&sink, len, 9);
    uvt_run_for(10);
    cr_assert_eq(res.calls, 1, "one callback for all the requests");
    uvt_pair_close(&p);
    uvt_sink_free(&sink);
    zbuf_pool_delete(pool);
}

/* Order of completion of back-to-back writes. */
static int order_log[256];
static int order_n;

static void on_ordered(uv_stream_t *s, int status, void *arg)
{
    (void)s;
    cr_assert_eq(status, 0);
    order_log[order_n++] = (int)(intptr_t)arg;
}

Test(uv_write, back_to_back_writes_keep_their_order)
{
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(8192, 64, &pool), 0);
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        struct uvt_pair p;
        struct uvt_sink sink = {0};
        int released = 0;
        uvt_pair_open(&p, kinds[k]);
        uvt_sink_start(&p.b, &sink, pool);
        order_n = 0;
        size_t off = 0;
        const int nwrites = 100;
        int segs = 0;
        for (int i = 0; i < nwrites; i++) {
            size_t sizes[] = {(size_t)(i % 7) + 1, 1000, (size_t)i * 37 + 1};
            size_t len = (size_t)((i * 7919) % 50000) + 1;
            zbuf_t *z = uvt_make(len, 77, off, sizes, 3, &released);
            segs += (int)zbuf_seg_count(z);
            off += len;
            cr_assert_eq(zbuf_uv_write(&p.a.stream, z, on_ordered, (void *)(intptr_t)i), 0);
        }
        uvt_sink_wait(&sink, off, 10000);
        uvt_sink_expect(&sink, off, 77);
        for (int i = 0; i < 100 && order_n < nwrites; i++)
            uvt_run_for(2);
        cr_assert_eq(order_n, nwrites);
        for (int i = 0; i < nwrites; i++)
            cr_assert_eq(order_log[i], i, "%s: callback %d came out of order",
                         uvt_kind_name(kinds[k]), i);
        cr_assert_eq(released, segs);
        uvt_pair_close(&p);
        uvt_sink_free(&sink);
    }
    zbuf_pool_delete(pool);
}

Test(uv_write, an_empty_zbuf_completes_once_from_the_loop)
{
    struct uvt_pair p;
    struct wres res = {0};
    zbuf_t *z;
    uvt_pair_open(&p, UVT_TCP);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_uv_write(&p.a.stream, z, on_written, &res), 0);
    cr_assert_eq(res.calls, 0);
    uvt_run_until(&res.calls, 5000, "write callback");
    cr_assert_eq(res.status, 0);
    uvt_run_for(5);
    cr_assert_eq(res.calls, 1);
    uvt_pair_close(&p);
}

Test(uv_write, a_refused_write_leaves_the_zbuf_with_the_caller)
{
    struct uvt_pair p;
    struct wres res = {0};
    int released = 0;
    const size_t sizes[] = {100};
    uvt_pair_open(&p, UVT_PIPE);
    zbuf_t *z = uvt_make(1000, 1, 0, sizes, 1, &released);
    /* b is the read end of the pipe: libuv refuses to write to it. */
    int rc = zbuf_uv_write(&p.b.stream, z, on_written, &res);
    cr_assert_lt(rc, 0);
    uvt_run_for(10);
    cr_assert_eq(res.calls, 0, "a refused write calls no callback");
    cr_assert_eq(released, 0);
    zt_check(z);
    cr_assert_eq(zbuf_length(z), 1000);
    cr_assert_eq(zbuf_uv_write(NULL, z, on_written, &res), -EINVAL);
    cr_assert_eq(zbuf_uv_write(&p.a.stream, NULL, on_written, &res), -EINVAL);
    zbuf_delete(z);
    cr_assert_eq(released, 10);
    uvt_pair_close(&p);
}

/* Writes into a connection whose peer is gone until one fails. */
static void write_until_error(enum uvt_kind kind)
{
    struct uvt_pair p;
    struct wres res[64] = {{0}};
    int released = 0, issued = 0, made = 0, failed = -1;
    const size_t sizes[] = {65536};
    uvt_pair_open(&p, kind);
    if (kind == UVT_TCP) {
        /* Abortive close of the peer: our writes meet a reset. */
        struct linger lg = {1, 0};
        uv_os_fd_t fd;
        cr_assert_eq(uv_fileno(&p.b.handle, &fd), 0);
        cr_assert_eq(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
    }
    zbuf_uv_close(&p.b, NULL);
    uvt_run_for(20);
    for (int i = 0; i < 64 && failed < 0; i++) {
        zbuf_t *z = uvt_make(1 << 16, 3, 0, sizes, 1, &released);
        made++;
        res[i].released = &released;
        int rc = zbuf_uv_write(&p.a.stream, z, on_written, &res[i]);
        if (rc < 0) {
            /* libuv may already know the stream is dead. */
            zbuf_delete(z);
            failed = i;
            break;
        }
        issued++;
        uvt_run_for(5);
        for (int j = 0; j <= i; j++)
            if (res[j].calls && res[j].status < 0)
                failed = j;
    }
    cr_assert_geq(failed, 0, "%s: no write to a closed peer failed", uvt_kind_name(kind));
    zbuf_uv_close(&p.a, NULL);
    uvt_run_for(20);
    for (int i = 0; i < issued; i++)
        cr_assert_eq(res[i].calls, 1, "%s: write %d: %d callbacks", uvt_kind_name(kind), i,
                     res[i].calls);
    cr_assert_eq(released, made, "every buffer released once");
}

Test(uv_write, a_write_to_a_vanished_peer_fails_once)
{
    write_until_error(UVT_TCP);
    write_until_error(UVT_UNIX);
    write_until_error(UVT_PIPE);
}

Test(uv_write, closing_cancels_queued_writes_and_releases_their_buffers)
{
    struct uvt_pair p;
    int released = 0;
    struct wres res = {.released = &released};
    const size_t sizes[] = {1 << 20};
    uvt_pair_open(&p, UVT_TCP);
    zbuf_t *z = uvt_make(64u << 20, 5, 0, sizes, 1, &released);
    cr_assert_eq(zbuf_uv_write(&p.a.stream, z, on_written, &res), 0);
    cr_assert_gt(zbuf_uv_write_queue_size(&p.a.stream), 0, "64 MiB do not fit in a socket");
    uvt_pair_close(&p);
    cr_assert_eq(res.calls, 1);
    cr_assert_eq(res.status, UV_ECANCELED);
    cr_assert_eq(released, 64);
}

Test(uv_write, queue_size_grows_without_a_reader_and_drains_with_one)
{
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(65536, 64, &pool), 0);
    struct uvt_pair p;
    struct uvt_sink sink = {0};
    int released = 0;
    struct wres res = {.released = &released};
    const size_t sizes[] = {1 << 20};
    const size_t len = 32u << 20;
    uvt_pair_open(&p, UVT_TCP);
    cr_assert_eq(zbuf_uv_write_queue_size(&p.a.stream), 0);
    cr_assert_eq(zbuf_uv_write(&p.a.stream, uvt_make(len, 6, 0, sizes, 1, &released),
                               on_written, &res),
                 0);
    uvt_run_for(20);
    size_t queued = zbuf_uv_write_queue_size(&p.a.stream);
    cr_assert_gt(queued, 0);
    cr_assert_leq(queued, len);
    cr_assert_eq(res.calls, 0);
    cr_assert_lt(released, 32, "segments still queued are not released");
    uvt_sink_start(&p.b, &sink, pool);
    uvt_run_until(&res.calls, 20000, "write callback");
    cr_assert_eq(zbuf_uv_write_queue_size(&p.a.stream), 0);
    uvt_sink_wait(&sink, len, 20000);
    uvt_sink_expect(&sink, len, 6);
    cr_assert_eq(released, 32);
    cr_assert_eq(zbuf_uv_write_queue_size(NULL), 0);
    uvt_pair_close(&p);
    uvt_sink_free(&sink);
    zbuf_pool_delete(pool);
}

Test(uv_write, try_write_sends_what_fits_and_keeps_the_rest)
{
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(65536, 64, &pool), 0);
    struct uvt_pair p;
    struct uvt_sink sink = {0};
    int released = 0;
    struct wres res = {.released = &released};
    const size_t seg = 65536, len = 64u << 20;
    const size_t sizes[] = {seg};
    uvt_pair_open(&p, UVT_TCP);
    zbuf_t *z = uvt_make(len, 8, 0, sizes, 1, &released);
    size_t sent = 0;
    ssize_t r;
    int calls = 0;
    while ((r = zbuf_uv_try_write(&p.a.stream, z)) > 0) {
        sent += (size_t)r;
        calls++;
        zt_check(z);
        cr_assert_eq(zbuf_length(z), len - sent);
        cr_assert_eq(released, (int)(sent / seg), "fully sent buffers are released at once");
        cr_assert_lt(calls, 100000);
    }
    cr_assert_eq(r, UV_EAGAIN, "try-write ends with %s", uv_err_name((int)r));
    cr_assert_gt(sent, 0);
    cr_assert_lt(sent, len, "a socket cannot take 64 MiB unread");
    /* The rest goes out through the queue, after the bytes already sent. */
    uvt_sink_start(&p.b, &sink, pool);
    cr_assert_eq(zbuf_uv_write(&p.a.stream, z, on_written, &res), 0);
    uvt_run_until(&res.calls, 20000, "write callback");
    cr_assert_eq(res.status, 0);
    uvt_sink_wait(&sink, len, 20000);
    uvt_sink_expect(&sink, len, 8);
    cr_assert_eq(released, (int)(len / seg));

    zbuf_t *e;
    cr_assert_eq(zbuf_create(&e), 0);
    cr_assert_eq(zbuf_uv_try_write(&p.a.stream, e), -EINVAL, "nothing to write");
    zbuf_delete(e);
    uvt_pair_close(&p);
    uvt_sink_free(&sink);
    zbuf_pool_delete(pool);
}

/* A reader that checks the bytes where they lie, segment by segment. */
struct inplace {
    size_t len;
    int segs;
    int mismatches;
};

static void read_in_place(zbuf_uv_stream_t *s, ssize_t status, zbuf_t *z)
{
    struct inplace *ip = s->handle.data;
    cr_assert_gt(status, 0);
    for (zbuf_seg_t *g = zbuf_seg_first(z); g != NULL; g = zbuf_seg_next(z, g)) {
        const uint8_t *d = zbuf_seg_data(z, g);
        size_t n = zbuf_seg_length(z, g);
        for (size_t i = 0; i < n; i++)
            if (d[i] != uvt_byte(4, ip->len + i))
                ip->mismatches++;
        ip->len += n;
        ip->segs++;
    }
    zbuf_delete(z);
}

static bool inplace_short(void *arg)
{
    return ((struct inplace *)arg)->len < (1u << 20);
}

Test(uv_write, no_byte_is_copied_on_the_way_through)
{
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(65536, 64, &pool), 0);
    struct uvt_pair p;
    int released = 0;
    struct wres res = {.released = &released};
    const size_t sizes[] = {1000, 50000, 7};
    const size_t len = 1u << 20;
    struct inplace ip = {0};
    uvt_pair_open(&p, UVT_TCP);
    zbuf_t *z = uvt_make(len, 4, 0, sizes, 3, &released);
    int nsegs = (int)zbuf_seg_count(z);

    zbuf_stats_t before, after;
    zbuf_stats_get(&before);
    p.b.handle.data = &ip;
    cr_assert_eq(zbuf_uv_read_start(&p.b, pool, read_in_place), 0);
    cr_assert_eq(zbuf_uv_write(&p.a.stream, z, on_written, &res), 0);
    uvt_run_until(&res.calls, 10000, "write callback");
    cr_assert(uvt_run_while(inplace_short, &ip, 10000));
    zbuf_stats_get(&after);
    cr_assert_eq(ip.len, len);
    cr_assert_eq(ip.mismatches, 0);
    cr_assert_eq(released, nsegs);
    cr_assert_eq(after.bytes_copied, before.bytes_copied, "write+read copied %llu bytes",
                 (unsigned long long)(after.bytes_copied - before.bytes_copied));
    uvt_pair_close(&p);
    zbuf_pool_delete(pool);
}
