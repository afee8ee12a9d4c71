/* SPDX-License-Identifier: MIT */
/*
 * What a reading stream holds of a shared pool, on real loops: an idle
 * connection whose bytes were handled holds no buffer (issue 9, bug 1); a
 * buffer kept idle after its zbufs went is given back as soon as another
 * reader finds the pool dry; a stream at its own limit pauses alone while
 * the others read, fills its last buffer to the end first, and resumes (with
 * its resume callback) when one of its own buffers comes back, for example
 * when a slow subscriber's queued writes of its bytes complete.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "uvt.h"

UVT_SUITE(uv_share);

#define BIG_BUF (64 * 1024)

/* Send len bytes of stream `seed` on p->a, in one segment. */
static void send_bytes(struct uvt_pair *p, size_t len, uint32_t seed, size_t from)
{
    const size_t sizes[] = {len};
    cr_assert_eq(zbuf_uv_write(&p->a.stream, uvt_make(len, seed, from, sizes, 1, NULL), NULL, NULL),
                 0);
}

static zbuf_uv_stats_t stats(void)
{
    zbuf_uv_stats_t st;
    cr_assert_eq(zbuf_uv_stats(uvt_loop, &st), 0);
    return st;
}

/* Issue 9, bug 1: a pool of 3 x 64 KiB; three clients send 10 bytes each
 * and stay connected; the read callback deletes every zbuf.  The fourth
 * client's bytes must still be read.  Before the fix each idle stream kept
 * its buffer (libuv makes no EAGAIN read after a short read), the pool was
 * dry and the fourth stream stayed paused for good. */
Test(uv_share, idle_connections_whose_bytes_were_handled_hold_no_buffer)
{
    zbuf_pool_t *pool;
    struct uvt_pair p[4];
    struct uvt_sink sink[4];
    cr_assert_eq(zbuf_pool_create(BIG_BUF, 3, &pool), 0);
    for (int i = 0; i < 4; i++) {
        uvt_pair_open(&p[i], UVT_TCP);
        sink[i] = (struct uvt_sink){0};
        uvt_sink_start(&p[i].b, &sink[i], pool);
    }
    for (int i = 0; i < 3; i++) {
        send_bytes(&p[i], 10, 40 + (uint32_t)i, 0);
        uvt_sink_wait(&sink[i], 10, 5000);
        uvt_sink_expect(&sink[i], 10, 40 + (uint32_t)i);
    }
    uvt_run_for(20);
    cr_assert_eq(zbuf_pool_available(pool), 3, "idle streams hold %zu buffers",
                 3 - zbuf_pool_available(pool));
    zbuf_uv_stats_t st = stats();
    cr_assert_eq(st.reading, 4);
    cr_assert_eq(st.read_kept, 0);
    cr_assert_eq(st.read_held, 0);
    send_bytes(&p[3], 10, 43, 0);
    uvt_sink_wait(&sink[3], 10, 5000);
    uvt_sink_expect(&sink[3], 10, 43);
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(sink[i].enobufs, 0);
        cr_assert_eq(sink[i].eof + sink[i].errors, 0, "the clients stayed connected");
        uvt_pair_close(&p[i]);
        uvt_sink_free(&sink[i]);
    }
    cr_assert_eq(zbuf_pool_available(pool), 3);
    zbuf_pool_delete(pool);
}

/* The same when the zbufs go later, outside the read callback (a broker's
 * writes of them completing): the buffers are kept idle, reported as such,
 * and given back as soon as a fourth reader finds the pool dry. */
Test(uv_share, buffers_kept_idle_go_back_when_another_reader_finds_the_pool_dry)
{
    zbuf_pool_t *pool;
    struct uvt_pair p[4];
    struct uvt_sink sink[4];
    cr_assert_eq(zbuf_pool_create(BIG_BUF, 3, &pool), 0);
    for (int i = 0; i < 4; i++) {
        uvt_pair_open(&p[i], i % 2 ? UVT_UNIX : UVT_TCP);
        sink[i] = (struct uvt_sink){.hold = true};
        uvt_sink_start(&p[i].b, &sink[i], pool);
    }
    for (int i = 0; i < 3; i++) {
        send_bytes(&p[i], 10, 50 + (uint32_t)i, 0);
        uvt_sink_wait(&sink[i], 10, 5000);
    }
    cr_assert_eq(zbuf_pool_available(pool), 0);
    zbuf_uv_stats_t st = stats();
    cr_assert_eq(st.read_kept, 3);
    cr_assert_eq(st.read_kept_idle, 0, "the sinks' zbufs use them");
    cr_assert_eq(st.read_held, 3);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(zbuf_uv_read_held(&p[i].b), 1);
        uvt_sink_release(&sink[i]);
    }
    st = stats();
    cr_assert_eq(st.read_kept_idle, 3, "kept, but nobody uses them");
    cr_assert_eq(zbuf_pool_available(pool), 0);

    send_bytes(&p[3], 10, 53, 0);
    uvt_sink_wait(&sink[3], 10, 5000);
    uvt_sink_expect(&sink[3], 10, 53);
    uvt_sink_release(&sink[3]);
    uvt_run_for(20);
    st = stats();
    cr_assert_eq(st.read_kept_idle + (size_t)zbuf_pool_available(pool), 3,
                 "every buffer is back or kept idle");
    cr_assert_eq(st.paused, 0);
    /* The idle holders still read on. */
    for (int i = 0; i < 3; i++) {
        send_bytes(&p[i], 5, 50 + (uint32_t)i, 10);
        uvt_sink_wait(&sink[i], 15, 5000);
        uvt_sink_expect(&sink[i], 15, 50 + (uint32_t)i);
        uvt_sink_release(&sink[i]);
    }
    for (int i = 0; i < 4; i++) {
        uvt_pair_close(&p[i]);
        uvt_sink_free(&sink[i]);
    }
    cr_assert_eq(zbuf_pool_available(pool), 3);
    zbuf_pool_delete(pool);
}

/* ------------------------------------------------------------- limits */

static int resumed;

static void count_resume(zbuf_uv_stream_t *zs)
{
    cr_assert(!zbuf_uv_read_paused(zs), "told after reading restarted");
    resumed++;
}

Test(uv_share, a_stream_at_its_limit_pauses_alone_and_resumes_when_its_buffers_return)
{
    zbuf_pool_t *pool;
    struct uvt_pair a, b;
    struct uvt_sink sa = {.hold = true}, sb = {0};
    cr_assert_eq(zbuf_pool_create(4096, 8, &pool), 0);
    uvt_pair_open(&a, UVT_UNIX);
    uvt_pair_open(&b, UVT_TCP);
    cr_assert_eq(zbuf_uv_read_set_limit(&a.b, 2), 0);
    cr_assert_eq(zbuf_uv_read_set_resume_cb(&a.b, count_resume), 0);
    resumed = 0;
    uvt_sink_start(&a.b, &sa, pool);
    uvt_sink_start(&b.b, &sb, pool);
    send_bytes(&a, 64 * 1024, 60, 0);
    uvt_run_until(&sa.enobufs, 5000, "the limited stream to pause");
    cr_assert(zbuf_uv_read_paused(&a.b));
    cr_assert_eq(zbuf_uv_read_held(&a.b), 2);
    cr_assert_eq(sa.len, 2 * 4096, "it filled both its buffers to the last byte");
    cr_assert_eq(zbuf_pool_available(pool), 6, "the rest of the pool is the others'");
    cr_assert_eq(resumed, 0);

    /* Another stream reads on meanwhile. */
    send_bytes(&b, 20000, 61, 0);
    uvt_sink_wait(&sb, 20000, 5000);
    uvt_sink_expect(&sb, 20000, 61);
    cr_assert(zbuf_uv_read_paused(&a.b), "still paused: none of its buffers came back");

    /* Its own buffers come back: it resumes, once per pause. */
    for (int rounds = 0; sa.len < 64 * 1024; rounds++) {
        cr_assert_lt(rounds, 100);
        size_t had = sa.len;
        uvt_sink_release(&sa);
        uvt_sink_wait(&sa, had + 1, 5000);
        cr_assert_gt(sa.len, had, "did not resume after %zu bytes", had);
        cr_assert_leq(zbuf_uv_read_held(&a.b), 2);
    }
    uvt_sink_expect(&sa, 64 * 1024, 60);
    cr_assert_eq(resumed, sa.enobufs - (zbuf_uv_read_paused(&a.b) ? 1 : 0),
                 "%d resumes for %d pauses", resumed, sa.enobufs);
    uvt_sink_release(&sa);
    uvt_pair_close(&a);
    uvt_pair_close(&b);
    uvt_sink_free(&sa);
    uvt_sink_free(&sb);
    cr_assert_eq(zbuf_pool_available(pool), 8);
    zbuf_pool_delete(pool);
}

Test(uv_share, raising_the_limit_resumes_a_stream_paused_at_it)
{
    zbuf_pool_t *pool;
    struct uvt_pair a;
    struct uvt_sink sa = {.hold = true};
    cr_assert_eq(zbuf_pool_create(4096, 8, &pool), 0);
    uvt_pair_open(&a, UVT_UNIX);
    cr_assert_eq(zbuf_uv_read_set_limit(&a.b, 1), 0);
    cr_assert_eq(zbuf_uv_read_set_resume_cb(&a.b, count_resume), 0);
    resumed = 0;
    uvt_sink_start(&a.b, &sa, pool);
    send_bytes(&a, 3 * 4096, 62, 0);
    uvt_run_until(&sa.enobufs, 5000, "pause at 1 buffer");
    cr_assert_eq(sa.len, 4096);
    cr_assert_eq(zbuf_uv_read_set_limit(&a.b, 3), 0);
    uvt_sink_wait(&sa, 3 * 4096, 5000);
    uvt_sink_expect(&sa, 3 * 4096, 62);
    cr_assert_eq(resumed, 1);
    cr_assert_eq(zbuf_uv_read_held(&a.b), 3);
    /* Lowered below what it holds: it takes nothing more until below. */
    cr_assert_eq(zbuf_uv_read_set_limit(&a.b, 1), 0);
    send_bytes(&a, 10, 62, 3 * 4096);
    uvt_run_until(&sa.enobufs, 5000, "pause below the lowered limit");
    cr_assert_eq(sa.enobufs, 2);
    /* No limit at all: the pool is the bound. */
    cr_assert_eq(zbuf_uv_read_set_limit(&a.b, 0), 0);
    uvt_sink_wait(&sa, 3 * 4096 + 10, 5000);
    uvt_sink_expect(&sa, 3 * 4096 + 10, 62);
    cr_assert_eq(resumed, 2);
    uvt_sink_release(&sa);
    uvt_pair_close(&a);
    uvt_sink_free(&sa);
    zbuf_pool_delete(pool);
}

Test(uv_share, the_resume_callback_is_not_called_for_a_start_or_a_stop)
{
    zbuf_pool_t *pool;
    struct uvt_pair a;
    struct uvt_sink sa = {.hold = true};
    cr_assert_eq(zbuf_pool_create(4096, 4, &pool), 0);
    uvt_pair_open(&a, UVT_UNIX);
    cr_assert_eq(zbuf_uv_read_set_resume_cb(&a.b, count_resume), 0);
    resumed = 0;
    uvt_sink_start(&a.b, &sa, pool);
    send_bytes(&a, 100, 63, 0);
    uvt_sink_wait(&sa, 100, 5000);
    cr_assert_eq(zbuf_uv_read_stop(&a.b), 0);
    uvt_sink_start(&a.b, &sa, pool);
    uvt_run_for(10);
    cr_assert_eq(resumed, 0);
    cr_assert_eq(zbuf_uv_read_set_resume_cb(NULL, count_resume), -EINVAL);
    cr_assert_eq(zbuf_uv_read_set_limit(NULL, 1), -EINVAL);
    cr_assert_eq(zbuf_uv_read_held(NULL), 0);
    uvt_sink_release(&sa);
    uvt_pair_close(&a);
    uvt_sink_free(&sa);
    zbuf_pool_delete(pool);
}

/* The broker: a slow subscriber's queued writes hold the
 * publisher's buffers.  With a limit on the publisher's stream the
 * publisher stalls, not the pool: a third connection is read all along, and
 * the publisher resumes as the subscriber catches up. */
struct relay {
    zbuf_uv_stream_t *out; /* where the read bytes are forwarded */
    size_t in;
    int enobufs;
};

static void relay_read(zbuf_uv_stream_t *zs, ssize_t status, zbuf_t *z)
{
    struct relay *r = zs->handle.data;
    if (status == UV_ENOBUFS) {
        r->enobufs++;
        return;
    }
    cr_assert_gt(status, 0, "relay read: %zd", status);
    r->in += (size_t)status;
    cr_assert_eq(zbuf_uv_stream_write(r->out, z, NULL, NULL), 0);
}

Test(uv_share, a_slow_subscriber_stalls_its_publisher_not_the_pool)
{
    zbuf_pool_t *pool;
    struct uvt_pair pub, sub, other;
    struct uvt_sink ss = {0}, so = {0};
    struct relay r = {.out = &sub.a};
    const size_t total = 1 << 20;
    cr_assert_eq(zbuf_pool_create(16384, 16, &pool), 0);
    uvt_pair_open(&pub, UVT_TCP);
    uvt_pair_open(&sub, UVT_TCP);
    uvt_pair_open(&other, UVT_UNIX);
    /* Small socket buffers, so that the kernel does not absorb the lot. */
    int small = 8192;
    cr_assert_eq(uv_send_buffer_size(&sub.a.handle, &small), 0);
    cr_assert_eq(uv_recv_buffer_size(&sub.b.handle, &small), 0);
    pub.b.handle.data = &r;
    cr_assert_eq(zbuf_uv_read_set_limit(&pub.b, 4), 0);
    cr_assert_eq(zbuf_uv_read_start(&pub.b, pool, relay_read), 0);
    uvt_sink_start(&other.b, &so, pool);
    send_bytes(&pub, total, 64, 0);
    /* Nobody reads sub.b yet: the relayed bytes queue up in sub.a. */
    uvt_run_until(&r.enobufs, 10000, "the publisher to stall at its limit");
    cr_assert_leq(zbuf_uv_read_held(&pub.b), 4);
    cr_assert_geq(zbuf_pool_available(pool), 12, "the pool is not drained");
    zbuf_uv_stats_t st = stats();
    cr_assert_gt(st.write_reqs, 0);
    cr_assert_leq(st.write_pool_mem, 4 * 16384, "the queued writes pin only its share");
    send_bytes(&other, 50000, 65, 0);
    uvt_sink_wait(&so, 50000, 5000);
    uvt_sink_expect(&so, 50000, 65);
    /* The subscriber catches up. */
    uvt_sink_start(&sub.b, &ss, pool);
    uvt_sink_wait(&ss, total, 30000);
    uvt_sink_expect(&ss, total, 64);
    cr_assert_eq(r.in, total);
    uvt_run_for(10);
    st = stats();
    cr_assert_eq(st.write_reqs, 0);
    cr_assert_eq(st.write_mem, 0);
    uvt_pair_close(&pub);
    uvt_pair_close(&sub);
    uvt_pair_close(&other);
    uvt_sink_free(&ss);
    uvt_sink_free(&so);
    cr_assert_eq(zbuf_pool_available(pool), 16);
    zbuf_pool_delete(pool);
}
