/* SPDX-License-Identifier: MIT */
/*
 * File segments (zbuf_buf_wrap_file()) written to streams with sendfile(2):
 * in order with the memory segments around them and with writes queued
 * before, through a full socket, released once sent, never read into
 * memory beyond the one-byte bounces that wait for the socket.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "uvt.h"

UVT_SUITE(uv_sendfile);

/* A temporary file holding bytes [0, len) of stream `seed`. */
static int temp_file(size_t len, uint32_t seed)
{
    char path[] = "/tmp/zbuf-uv-sendfile-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    unlink(path);
    uint8_t *p = malloc(len);
    uvt_fill(p, len, seed, 0);
    cr_assert_eq(write(fd, p, len), (ssize_t)len);
    free(p);
    return fd;
}

static void append_mem(zbuf_t *z, size_t from, size_t len, uint32_t seed)
{
    uint8_t *p = malloc(len);
    uvt_fill(p, len, seed, from);
    cr_assert_eq(zbuf_append_copy(z, p, len), 0);
    free(p);
}

static void append_file(zbuf_t *z, int fd, size_t from, size_t len, int *released)
{
    zbuf_buf_t *b;
    /* The buffer covers the file from 0; the segment only [from, from+len). */
    cr_assert_eq(zbuf_buf_wrap_file(fd, 0, from + len, zt_count_release, released, &b), 0);
    cr_assert_eq(zbuf_append_ref(z, b, from, len), 0);
    zbuf_buf_unref(b);
}

struct wres {
    int calls, status;
};

static void on_written(uv_stream_t *s, int status, void *arg)
{
    (void)s;
    struct wres *r = arg;
    r->calls++;
    r->status = status;
}

/* mem | file | mem | file | mem, the stream bytes 0..len in order. */
static zbuf_t *mixed(int fd, size_t len, uint32_t seed, int *released)
{
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    size_t a = len / 10, b = len / 2, c = b + 1000, d = len - 7;
    append_mem(z, 0, a, seed);
    append_file(z, fd, a, b - a, released);
    append_mem(z, b, c - b, seed);
    append_file(z, fd, c, d - c, released);
    append_mem(z, d, len - d, seed);
    zt_check(z);
    cr_assert_eq(zbuf_length(z), len);
    return z;
}

static void check_kind(enum uvt_kind kind, bool late_reader)
{
    const size_t len = 8u << 20;
    const uint32_t seed = 31;
    int fd = temp_file(len, seed);
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(65536, 64, &pool), 0);
    struct uvt_pair p;
    struct uvt_sink sink = {0};
    struct wres res = {0};
    int released = 0;
    uvt_pair_open(&p, kind);
    if (!late_reader)
        uvt_sink_start(&p.b, &sink, pool);
    zbuf_t *z = mixed(fd, len, seed, &released);
    zbuf_stats_t before, after;
    zbuf_stats_get(&before);
    cr_assert_eq(zbuf_uv_write(&p.a.stream, z, on_written, &res), 0);
    cr_assert_eq(res.calls, 0, "no callback from inside the call");
    if (late_reader) {
        /* 8 MiB do not fit in the socket: the write waits on a full socket. */
        uvt_run_for(50);
        cr_assert_eq(res.calls, 0);
        uvt_sink_start(&p.b, &sink, pool);
    }
    uvt_run_until(&res.calls, 20000, "write callback");
    cr_assert_eq(res.status, 0, "%s: %s", uvt_kind_name(kind), uv_strerror(res.status));
    cr_assert_eq(released, 2, "both file buffers released once");
    uvt_sink_wait(&sink, len, 20000);
    zbuf_stats_get(&after);
    uvt_sink_expect(&sink, len, seed);
    /* The sink's copy-out is counted too; what is left is the bounces. */
    uint64_t copied = after.bytes_copied - before.bytes_copied - len;
    cr_assert_lt(copied, 4096, "%llu bytes of the file went through memory",
                 (unsigned long long)copied);
    if (late_reader)
        cr_assert_gt(copied, 0, "the full socket was waited for with a bounce");
    uvt_run_for(5);
    cr_assert_eq(res.calls, 1);
    uvt_pair_close(&p);
    uvt_sink_free(&sink);
    zbuf_pool_delete(pool);
    close(fd);
}

Test(uv_sendfile, file_segments_go_out_in_order_with_memory_ones)
{
    check_kind(UVT_TCP, false);
    check_kind(UVT_UNIX, false);
}

Test(uv_sendfile, a_full_socket_is_waited_for_without_reading_the_file)
{
    check_kind(UVT_TCP, true);
    check_kind(UVT_UNIX, true);
}

Test(uv_sendfile, a_file_write_waits_for_writes_queued_before_it)
{
    const size_t mem = 32u << 20, file = 4u << 20, len = mem + file;
    int fd = temp_file(len, 32);
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(65536, 64, &pool), 0);
    struct uvt_pair p;
    struct uvt_sink sink = {0};
    struct wres r1 = {0}, r2 = {0};
    int released = 0;
    uvt_pair_open(&p, UVT_TCP);
    /* 32 MiB of memory first (more than the socket takes), then the rest of
     * the stream from the file, in a write that starts with a file segment. */
    zbuf_t *m, *f;
    cr_assert_eq(zbuf_create(&m), 0);
    append_mem(m, 0, mem, 32);
    cr_assert_eq(zbuf_create(&f), 0);
    append_file(f, fd, mem, file, &released);
    cr_assert_eq(zbuf_uv_write(&p.a.stream, m, on_written, &r1), 0);
    cr_assert_gt(zbuf_uv_write_queue_size(&p.a.stream), 0);
    cr_assert_eq(zbuf_uv_write(&p.a.stream, f, on_written, &r2), 0);
    uvt_sink_start(&p.b, &sink, pool);
    uvt_run_until(&r2.calls, 20000, "file write callback");
    cr_assert_eq(r1.calls, 1);
    cr_assert_eq(r1.status, 0);
    cr_assert_eq(r2.status, 0);
    uvt_sink_wait(&sink, len, 20000);
    uvt_sink_expect(&sink, len, 32);
    cr_assert_eq(released, 1);
    uvt_pair_close(&p);
    uvt_sink_free(&sink);
    zbuf_pool_delete(pool);
    close(fd);
}

Test(uv_sendfile, closing_mid_file_reports_once_and_releases)
{
    const size_t len = 16u << 20;
    int fd = temp_file(len, 33);
    struct uvt_pair p;
    struct wres res = {0};
    int released = 0;
    uvt_pair_open(&p, UVT_TCP);
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    append_file(z, fd, 0, len, &released);
    cr_assert_eq(zbuf_uv_write(&p.a.stream, z, on_written, &res), 0);
    uvt_run_for(30); /* sends what fits, then waits on the full socket */
    cr_assert_eq(res.calls, 0);
    uvt_pair_close(&p);
    cr_assert_eq(res.calls, 1);
    cr_assert_eq(res.status, UV_ECANCELED);
    cr_assert_eq(released, 1);
    close(fd);
}

Test(uv_sendfile, try_write_stops_at_a_file_segment)
{
    int fd = temp_file(100, 34);
    struct uvt_pair p;
    int released = 0;
    uvt_pair_open(&p, UVT_TCP);
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    append_mem(z, 0, 10, 34);
    append_file(z, fd, 10, 90, &released);
    cr_assert_eq(zbuf_uv_try_write(&p.a.stream, z), 10, "the memory part goes");
    cr_assert_eq(zbuf_length(z), 90);
    cr_assert_eq(zbuf_uv_try_write(&p.a.stream, z), -EINVAL, "a file segment needs a write");
    cr_assert_eq(zbuf_length(z), 90);
    zbuf_delete(z);
    cr_assert_eq(released, 1);
    uvt_pair_close(&p);
    close(fd);
}
