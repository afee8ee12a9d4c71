/* SPDX-License-Identifier: MIT */
/*
 * Write queues of adapter streams, on real loops: high- and low-water marks
 * with a drain callback that runs once per crossing, and the per-loop
 * figures of zbuf_uv_stats() for a fan-out (a pool buffer queued on many
 * streams pins its memory once, while each stream's queue counts it), down
 * to a running server's live counters, which it can check against those
 * figures at any quiet moment.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "uvt.h"

UVT_SUITE(uv_queue);

/* Keep the kernel from absorbing what is written, so that it queues. */
static void small_buffers(struct uvt_pair *p)
{
    int small = 8192;
    cr_assert_eq(uv_send_buffer_size(&p->a.handle, &small), 0);
    cr_assert_eq(uv_recv_buffer_size(&p->b.handle, &small), 0);
}

static zbuf_uv_stats_t stats(void)
{
    zbuf_uv_stats_t st;
    cr_assert_eq(zbuf_uv_stats(uvt_loop, &st), 0);
    return st;
}

static int drains, write_cbs;

static void count_drain(zbuf_uv_stream_t *zs)
{
    cr_assert(!zbuf_uv_write_full(zs), "told once it is no longer full");
    cr_assert_leq(zbuf_uv_write_queue_size(&zs->stream), 16 * 1024);
    drains++;
}

static void count_write(uv_stream_t *s, int status, void *arg)
{
    (void)s;
    (void)arg;
    cr_assert_eq(status, 0);
    write_cbs++;
}

Test(uv_queue, the_drain_callback_runs_once_when_the_queue_falls_to_the_low_mark)
{
    zbuf_pool_t *pool;
    struct uvt_pair p;
    struct uvt_sink sink = {0};
    const size_t chunk = 32 * 1024, n = 8;
    const size_t sizes[] = {chunk};
    cr_assert_eq(zbuf_pool_create(16384, 16, &pool), 0);
    uvt_pair_open(&p, UVT_UNIX);
    small_buffers(&p);
    drains = write_cbs = 0;
    cr_assert_eq(zbuf_uv_write_set_watermarks(&p.a, 64 * 1024, 16 * 1024, count_drain), 0);
    cr_assert(!zbuf_uv_write_full(&p.a));
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(zbuf_uv_stream_write(&p.a, uvt_make(chunk, 70, i * chunk, sizes, 1, NULL),
                                          count_write, NULL),
                     0);
    cr_assert(zbuf_uv_write_full(&p.a), "queued %zu bytes", zbuf_uv_write_queue_size(&p.a.stream));
    uvt_run_for(20);
    cr_assert_eq(drains, 0, "nobody reads: no drain");
    cr_assert(zbuf_uv_write_full(&p.a));
    uvt_sink_start(&p.b, &sink, pool);
    uvt_sink_wait(&sink, n * chunk, 10000);
    uvt_sink_expect(&sink, n * chunk, 70);
    uvt_run_for(10);
    cr_assert_eq(drains, 1);
    cr_assert_eq(write_cbs, (int)n);
    /* Below the high mark: not full, no drain to come. */
    cr_assert_eq(zbuf_uv_stream_write(&p.a, uvt_make(1000, 70, n * chunk, sizes, 1, NULL), NULL,
                                      NULL),
                 0);
    cr_assert(!zbuf_uv_write_full(&p.a));
    uvt_sink_wait(&sink, n * chunk + 1000, 5000);
    uvt_run_for(10);
    cr_assert_eq(drains, 1);
    uvt_pair_close(&p);
    uvt_sink_free(&sink);
    zbuf_pool_delete(pool);
}

Test(uv_queue, water_marks_are_checked_and_may_be_removed)
{
    struct uvt_pair p;
    uvt_pair_open(&p, UVT_UNIX);
    cr_assert_eq(zbuf_uv_write_set_watermarks(NULL, 10, 5, NULL), -EINVAL);
    cr_assert_eq(zbuf_uv_write_set_watermarks(&p.a, 10, 11, NULL), -EINVAL, "low above high");
    cr_assert_eq(zbuf_uv_write_set_watermarks(&p.a, 0, 0, NULL), 0, "none");
    cr_assert(!zbuf_uv_write_full(NULL));
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_uv_stream_write(NULL, z, NULL, NULL), -EINVAL);
    cr_assert_eq(zbuf_uv_stream_write(&p.a, NULL, NULL, NULL), -EINVAL);
    zt_check(z); /* still the caller's */
    zbuf_delete(z);
    uvt_pair_close(&p);
    cr_assert_eq(zbuf_uv_write_set_watermarks(&p.a, 10, 5, NULL), -EINVAL, "closed");
}

#define FAN 8

/* One pool buffer written to FAN streams: each queue counts its bytes,
 * the loop's figures count its memory once. */
Test(uv_queue, a_fanned_out_pool_buffer_pins_its_memory_once)
{
    zbuf_pool_t *pool;
    zbuf_buf_t *b;
    zbuf_t *msg;
    struct uvt_pair p[FAN];
    struct uvt_sink sink[FAN];
    const size_t len = 60000;
    cr_assert_eq(zbuf_pool_create(65536, 4, &pool), 0);
    cr_assert_eq(zbuf_pool_get(pool, &b), 0);
    uvt_fill(zbuf_buf_data(b), len, 71, 0);
    cr_assert_eq(zbuf_create(&msg), 0);
    cr_assert_eq(zbuf_append_ref(msg, b, 0, len), 0);
    zbuf_buf_unref(b);
    write_cbs = 0;
    for (int i = 0; i < FAN; i++) {
        uvt_pair_open(&p[i], UVT_TCP); /* runs the loop: before any write */
        small_buffers(&p[i]);
    }
    /* No loop iteration from here to the figures: no write callback runs. */
    for (int i = 0; i < FAN; i++) {
        zbuf_t *d;
        cr_assert_eq(zbuf_dup(msg, 0, ZBUF_TO_END, &d), 0);
        cr_assert_eq(zbuf_uv_stream_write(&p[i].a, d, count_write, NULL), 0);
    }
    zbuf_delete(msg);
    zbuf_uv_stats_t st = stats();
    size_t queued = 0;
    for (int i = 0; i < FAN; i++)
        queued += zbuf_uv_write_queue_size(&p[i].a.stream);
    cr_assert_eq(st.write_reqs, FAN);
    cr_assert_eq(st.write_bytes, FAN * len, "once per write");
    cr_assert_eq(st.write_bufs, 1);
    cr_assert_eq(st.write_mem, 65536, "the buffer's memory, once");
    cr_assert_eq(st.write_pool_mem, 65536);
    cr_log_info("the streams' queues add up to %zu bytes", queued);
    cr_assert_eq(st.streams, FAN, "the writers");
    for (int i = 0; i < FAN; i++) {
        sink[i] = (struct uvt_sink){0};
        uvt_sink_start(&p[i].b, &sink[i], pool);
    }
    for (int i = 0; i < FAN; i++) {
        uvt_sink_wait(&sink[i], len, 10000);
        uvt_sink_expect(&sink[i], len, 71);
    }
    uvt_run_for(10);
    cr_assert_eq(write_cbs, FAN);
    st = stats();
    cr_assert_eq(st.write_reqs, 0);
    cr_assert_eq(st.write_bytes, 0);
    cr_assert_eq(st.write_mem, 0);
    for (int i = 0; i < FAN; i++) {
        uvt_pair_close(&p[i]);
        uvt_sink_free(&sink[i]);
    }
    st = stats();
    cr_assert_eq(st.streams, 0);
    cr_assert_eq(zbuf_pool_available(pool), 4);
    zbuf_pool_delete(pool);
}

/* A little server: echoes every frame with a new header (a header slab),
 * keeps some received messages for a while (kept buffers), and checks that
 * at every quiet moment its live counters are exactly what the adapter
 * says it holds. */
struct echo {
    zbuf_frame_decoder_t *dec;
    zbuf_t *kept; /* the last message, kept until the next */
};

static void echo_read(zbuf_uv_stream_t *zs, ssize_t status, zbuf_t *z)
{
    struct echo *e = zs->handle.data;
    if (status < 0)
        return;
    cr_assert_eq(zbuf_frame_decoder_feed(e->dec, z), 0);
    zbuf_t *m;
    while (zbuf_frame_decoder_next(e->dec, &m) == 0) {
        zbuf_t *copy;
        cr_assert_eq(zbuf_dup(m, 0, ZBUF_TO_END, &copy), 0);
        zbuf_delete(e->kept);
        e->kept = copy;
        cr_assert_eq(zbuf_frame_encode(NULL, m), 0);
        cr_assert_eq(zbuf_uv_stream_write(zs, m, NULL, NULL), 0);
    }
}

Test(uv_queue, a_running_servers_live_counters_are_what_the_adapter_holds)
{
    zbuf_pool_t *pool;
    struct uvt_pair p[3];
    struct echo e[3];
    struct uvt_sink sink[3];
    zbuf_stats_t base, now;
    zbuf_frame_thread_flush();
    zbuf_stats_get(&base);
    cr_assert_eq(zbuf_pool_create(4096, 32, &pool), 0);
    for (int i = 0; i < 3; i++) {
        uvt_pair_open(&p[i], i == 1 ? UVT_UNIX : UVT_TCP);
        e[i] = (struct echo){0};
        cr_assert_eq(zbuf_frame_decoder_create(NULL, &e[i].dec), 0);
        p[i].b.handle.data = &e[i];
        cr_assert_eq(zbuf_uv_read_start(&p[i].b, pool, echo_read), 0);
        sink[i] = (struct uvt_sink){0};
        uvt_sink_start(&p[i].a, &sink[i], pool);
    }
    size_t expect = 0;
    for (int round = 0; round < 5; round++) {
        for (int i = 0; i < 3; i++) {
            const size_t lens[] = {100 + (size_t)round * 500};
            zbuf_t *z = uvt_make(lens[0], 72, 0, lens, 1, NULL);
            cr_assert_eq(zbuf_frame_encode(NULL, z), 0);
            cr_assert_eq(zbuf_uv_write(&p[i].a.stream, z, NULL, NULL), 0);
        }
        expect += 4 + 100 + (size_t)round * 500;
        for (int i = 0; i < 3; i++)
            uvt_sink_wait(&sink[i], expect, 5000);
        uvt_run_for(5);
        /* Quiet: what is alive is what the adapter and the codec hold. */
        zbuf_uv_stats_t st = stats();
        zbuf_stats_get(&now);
        int64_t kept_msgs = 3; /* e[i].kept: one zbuf and one segment each */
        cr_assert_eq(now.live_zbufs - base.live_zbufs, kept_msgs);
        cr_assert_eq(now.live_bufs - base.live_bufs,
                     (int64_t)(st.read_held + zbuf_frame_header_bufs()),
                     "round %d: %lld live buffers, adapter %zu + header slabs %zu", round,
                     (long long)(now.live_bufs - base.live_bufs), st.read_held,
                     zbuf_frame_header_bufs());
        cr_assert_eq(st.write_reqs, 0);
        cr_assert_leq(st.read_held, 6, "the kept messages' buffers and the sinks' kept ones");
    }
    for (int i = 0; i < 3; i++) {
        zbuf_delete(e[i].kept);
        e[i].kept = NULL;
    }
    zbuf_stats_get(&now);
    zbuf_uv_stats_t st = stats();
    cr_assert_eq(now.live_zbufs, base.live_zbufs);
    cr_assert_eq(now.live_bufs - base.live_bufs,
                 (int64_t)(st.read_kept_idle + zbuf_frame_header_bufs()),
                 "idle: only idle holdings and header slabs are alive");
    for (int i = 0; i < 3; i++) {
        uvt_pair_close(&p[i]);
        zbuf_frame_decoder_delete(e[i].dec);
        uvt_sink_free(&sink[i]);
    }
    zbuf_pool_delete(pool);
    zbuf_frame_thread_flush();
    zbuf_stats_get(&now);
    cr_assert_eq(now.live_bufs, base.live_bufs);
    cr_assert_eq(now.live_pools, base.live_pools);
}
