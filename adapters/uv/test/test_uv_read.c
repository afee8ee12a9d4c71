/* SPDX-License-Identifier: MIT */
/*
 * Reading streams as zbufs on a real loop: EOF and resets reported once,
 * pool exhaustion paused and resumed without losing a byte, small reads
 * packed into one pool buffer, stopping and closing.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "uvt.h"

UVT_SUITE(uv_read);

static const enum uvt_kind kinds[] = {UVT_TCP, UVT_UNIX, UVT_PIPE};

static int shut_calls;

static void on_shutdown(uv_shutdown_t *req, int status)
{
    (void)req;
    cr_assert_eq(status, 0);
    shut_calls++;
}

static bool write_queued(void *arg)
{
    return zbuf_uv_write_queue_size(&((zbuf_uv_stream_t *)arg)->stream) > 0;
}

Test(uv_read, eof_comes_once_after_every_byte)
{
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(4096, 32, &pool), 0);
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        struct uvt_pair p;
        struct uvt_sink sink = {0};
        uv_shutdown_t req;
        const size_t sizes[] = {333, 4096, 1};
        const size_t len = 100000;
        uvt_pair_open(&p, kinds[k]);
        uvt_sink_start(&p.b, &sink, pool);
        cr_assert_eq(zbuf_uv_write(&p.a.stream, uvt_make(len, 11, 0, sizes, 3, NULL), NULL, NULL),
                     0);
        shut_calls = 0;
        if (kinds[k] == UVT_PIPE) {
            /* A pipe has no half-close: the writer closes once its bytes left. */
            uvt_run_while(write_queued, &p.a, 5000);
            zbuf_uv_close(&p.a, NULL);
            shut_calls = 1;
        } else {
            cr_assert_eq(uv_shutdown(&req, &p.a.stream, on_shutdown), 0);
        }
        uvt_run_until(&sink.eof, 10000, "EOF");
        uvt_run_until(&shut_calls, 10000, "shutdown");
        uvt_sink_expect(&sink, len, 11);
        uvt_run_for(10);
        cr_assert_eq(sink.eof, 1, "%s: EOF told %d times", uvt_kind_name(kinds[k]), sink.eof);
        cr_assert_eq(sink.errors, 0);
        cr_assert_eq(sink.enobufs, 0);
        cr_assert_eq(zbuf_pool_available(pool), zbuf_pool_capacity(pool),
                     "after EOF the adapter keeps no pool buffer");
        if (kinds[k] == UVT_PIPE)
            zbuf_uv_close(&p.b, NULL);
        else
            uvt_pair_close(&p);
        uvt_run_for(5);
        uvt_sink_free(&sink);
    }
    zbuf_pool_delete(pool);
}

Test(uv_read, a_reset_is_reported_once_as_an_error)
{
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(4096, 8, &pool), 0);
    struct uvt_pair p;
    struct uvt_sink sink = {0};
    uvt_pair_open(&p, UVT_TCP);
    uvt_sink_start(&p.b, &sink, pool);
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_copy(z, "hello", 5), 0);
    cr_assert_eq(zbuf_uv_write(&p.a.stream, z, NULL, NULL), 0);
    uvt_sink_wait(&sink, 5, 5000);
    cr_assert_eq(sink.len, 5);
    cr_assert_eq(memcmp(sink.data, "hello", 5), 0);

    /* Abortive close: SO_LINGER with a zero timeout sends a RST. */
    struct linger lg = {1, 0};
    uv_os_fd_t fd;
    cr_assert_eq(uv_fileno(&p.a.handle, &fd), 0);
    cr_assert_eq(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
    zbuf_uv_close(&p.a, NULL);
    uvt_run_until(&sink.errors, 5000, "reset");
    cr_assert_eq(sink.last_error, UV_ECONNRESET, "got %s", uv_err_name((int)sink.last_error));
    uvt_run_for(10);
    cr_assert_eq(sink.errors, 1);
    cr_assert_eq(sink.eof, 0);
    cr_assert_eq(zbuf_pool_available(pool), zbuf_pool_capacity(pool));
    zbuf_uv_close(&p.b, NULL);
    uvt_run_for(10);
    uvt_sink_free(&sink);
    zbuf_pool_delete(pool);
}

Test(uv_read, pool_exhaustion_pauses_and_loses_no_byte)
{
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        zbuf_pool_t *pool;
        cr_assert_eq(zbuf_pool_create(1024, 4, &pool), 0);
        struct uvt_pair p;
        struct uvt_sink sink = {.hold = true};
        const size_t sizes[] = {65536};
        const size_t len = 256 * 1024;
        int wdone = 0;
        uvt_pair_open(&p, kinds[k]);
        uvt_sink_start(&p.b, &sink, pool);
        cr_assert_eq(zbuf_uv_write(&p.a.stream, uvt_make(len, 12, 0, sizes, 1, NULL), NULL, NULL),
                     0);
        (void)wdone;
        uvt_run_until(&sink.enobufs, 5000, "UV_ENOBUFS");
        uvt_run_for(30);
        cr_assert_eq(sink.enobufs, 1, "%s: one notice per pause", uvt_kind_name(kinds[k]));
        cr_assert(zbuf_uv_read_paused(&p.b));
        cr_assert_eq(zbuf_pool_available(pool), 0);
        cr_assert_leq(sink.len, 4 * 1024, "no more bytes than the pool holds");
        cr_assert_gt(sink.len, 0);
        for (int i = 0; i < sink.nheld; i++)
            zt_check(sink.held[i]);

        /* Give the buffers back: reading resumes by itself, and every byte
         * arrives in order.  Keep releasing as we go. */
        for (int i = 0; i < sink.nheld; i++)
            zbuf_delete(sink.held[i]);
        sink.nheld = 0;
        sink.hold = false;
        uvt_sink_wait(&sink, len, 20000);
        uvt_sink_expect(&sink, len, 12);
        cr_assert(!zbuf_uv_read_paused(&p.b));
        cr_assert_eq(sink.errors, 0);
        cr_assert_eq(sink.eof, 0);
        uvt_pair_close(&p);
        uvt_sink_free(&sink);
        cr_assert_eq(zbuf_pool_available(pool), 4);
        zbuf_pool_delete(pool);
    }
}

Test(uv_read, closing_while_paused_closes_everything_and_frees_the_pool)
{
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(512, 2, &pool), 0);
    struct uvt_pair p;
    struct uvt_sink sink = {.hold = true};
    const size_t sizes[] = {8192};
    uvt_pair_open(&p, UVT_UNIX);
    uvt_sink_start(&p.b, &sink, pool);
    cr_assert_eq(zbuf_uv_write(&p.a.stream, uvt_make(8192, 13, 0, sizes, 1, NULL), NULL, NULL), 0);
    uvt_run_until(&sink.enobufs, 5000, "UV_ENOBUFS");
    cr_assert(zbuf_uv_read_paused(&p.b));
    uvt_pair_close(&p); /* the loop must close cleanly: see uvt_fini() */
    cr_assert_eq(p.closed, 2);
    uvt_sink_free(&sink);
    zbuf_pool_delete(pool);
}

/* Write one small message at a time and wait for it to be read. */
static void trickle(struct uvt_pair *p, struct uvt_sink *sink, int count, size_t each)
{
    for (int i = 0; i < count; i++) {
        const size_t sizes[] = {each};
        cr_assert_eq(zbuf_uv_write(&p->a.stream, uvt_make(each, 14, each * (size_t)i, sizes, 1, NULL),
                                   NULL, NULL),
                     0);
        uvt_sink_wait(sink, each * (size_t)(i + 1), 5000);
    }
}

Test(uv_read, small_reads_fill_one_pool_buffer)
{
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(4096, 2, &pool), 0);
    struct uvt_pair p;
    struct uvt_sink sink = {.hold = true};
    uvt_pair_open(&p, UVT_TCP);
    uvt_sink_start(&p.b, &sink, pool);
    trickle(&p, &sink, 20, 100);
    uvt_sink_expect(&sink, 2000, 14);
    cr_assert_eq(sink.reads, 20, "one read per message");
    cr_assert_eq(sink.enobufs, 0);
    /* 20 zbufs held, one pool buffer behind all of them. */
    cr_assert_eq(zbuf_pool_available(pool), 1);
    zbuf_buf_t *b = zbuf_seg_buf(sink.held[0], zbuf_seg_first(sink.held[0]));
    for (int i = 1; i < sink.nheld; i++) {
        zbuf_seg_t *s = zbuf_seg_first(sink.held[i]);
        cr_assert_eq(zbuf_seg_buf(sink.held[i], s), b, "read %d in another buffer", i);
        cr_assert_eq(zbuf_seg_buf_offset(sink.held[i], s), (size_t)i * 100);
        cr_assert(!zbuf_writable(sink.held[i], 0, 100), "a shared receive buffer is read-only");
    }
    /* Once the adapter lets go (stop) and the zbufs are deleted, it is back. */
    cr_assert_eq(zbuf_uv_read_stop(&p.b), 0);
    cr_assert_eq(zbuf_pool_available(pool), 1);
    uvt_sink_free(&sink);
    cr_assert_eq(zbuf_pool_available(pool), 2);
    uvt_pair_close(&p);
    zbuf_pool_delete(pool);
}

Test(uv_read, a_nearly_full_buffer_is_let_go)
{
    /* 16-byte buffers: the adapter keeps filling one while 2 bytes or more
     * are free, so two 8-byte reads fill it and the third takes a new one. */
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(16, 8, &pool), 0);
    struct uvt_pair p;
    struct uvt_sink sink = {.hold = true};
    uvt_pair_open(&p, UVT_UNIX);
    uvt_sink_start(&p.b, &sink, pool);
    trickle(&p, &sink, 4, 8);
    uvt_sink_expect(&sink, 32, 14);
    cr_assert_eq(sink.reads, 4);
    zbuf_buf_t *b0 = zbuf_seg_buf(sink.held[0], zbuf_seg_first(sink.held[0]));
    zbuf_buf_t *b1 = zbuf_seg_buf(sink.held[1], zbuf_seg_first(sink.held[1]));
    zbuf_buf_t *b2 = zbuf_seg_buf(sink.held[2], zbuf_seg_first(sink.held[2]));
    cr_assert_eq(b0, b1);
    cr_assert_neq(b1, b2);
    /* The first buffer is full: it went back with the first two zbufs. */
    zbuf_delete(sink.held[0]);
    zbuf_delete(sink.held[1]);
    sink.held[0] = sink.held[2];
    sink.held[1] = sink.held[3];
    sink.nheld = 2;
    cr_assert_eq(zbuf_pool_available(pool), 7);
    uvt_pair_close(&p);
    uvt_sink_free(&sink);
    cr_assert_eq(zbuf_pool_available(pool), 8);
    zbuf_pool_delete(pool);
}

static int stop_after_first_calls;

static void stop_after_first(zbuf_uv_stream_t *s, ssize_t status, zbuf_t *z)
{
    stop_after_first_calls++;
    cr_assert_gt(status, 0);
    zbuf_delete(z);
    cr_assert_eq(zbuf_uv_read_stop(s), 0);
}

Test(uv_read, no_callback_after_stop)
{
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(64, 64, &pool), 0);
    struct uvt_pair p;
    const size_t sizes[] = {1000};
    uvt_pair_open(&p, UVT_TCP);
    stop_after_first_calls = 0;
    cr_assert_eq(zbuf_uv_read_start(&p.b, pool, stop_after_first), 0);
    cr_assert_eq(zbuf_uv_read_start(&p.b, pool, stop_after_first), -EALREADY);
    cr_assert_eq(zbuf_uv_write(&p.a.stream, uvt_make(1000, 1, 0, sizes, 1, NULL), NULL, NULL), 0);
    uvt_run_until(&stop_after_first_calls, 5000, "first read");
    uvt_run_for(30);
    cr_assert_eq(stop_after_first_calls, 1);
    cr_assert_eq(zbuf_pool_available(pool), 64);
    cr_assert_eq(zbuf_uv_read_stop(&p.b), 0, "stopping twice is harmless");
    uvt_pair_close(&p);
    zbuf_pool_delete(pool);
}

Test(uv_read, bad_arguments_are_refused)
{
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(64, 1, &pool), 0);
    struct uvt_pair p;
    uvt_pair_open(&p, UVT_PIPE);
    cr_assert_eq(zbuf_uv_stream_init(NULL), -EINVAL);
    cr_assert_eq(zbuf_uv_read_start(NULL, pool, stop_after_first), -EINVAL);
    cr_assert_eq(zbuf_uv_read_start(&p.b, NULL, stop_after_first), -EINVAL);
    cr_assert_eq(zbuf_uv_read_start(&p.b, pool, NULL), -EINVAL);
    cr_assert_eq(zbuf_uv_read_stop(NULL), -EINVAL);
    cr_assert(!zbuf_uv_read_paused(NULL));
    zbuf_uv_close(NULL, NULL);
    uv_timer_t t;
    cr_assert_eq(uv_timer_init(uvt_loop, &t), 0);
    cr_assert_eq(zbuf_uv_stream_init((zbuf_uv_stream_t *)(void *)&t), -EINVAL,
                 "a timer is not a stream");
    uv_close((uv_handle_t *)&t, NULL);
    uvt_pair_close(&p);
    zbuf_pool_delete(pool);
}
