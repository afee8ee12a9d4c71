/* SPDX-License-Identifier: MIT */
#include "support.h"

static zbuf_stats_t baseline;

void zt_count_release(void *data, size_t size, void *arg)
{
    (void)data;
    (void)size;
    ++*(int *)arg;
}

void zt_leak_baseline(void)
{
    zbuf_stats_get(&baseline);
}

void zt_assert_no_leaks(void)
{
    zbuf_stats_t now;
    zbuf_thread_cache_flush();
    zbuf_stats_get(&now);
    cr_assert_eq(now.live_zbufs, baseline.live_zbufs, "leaked zbufs: %lld",
                 (long long)(now.live_zbufs - baseline.live_zbufs));
    cr_assert_eq(now.live_segs, baseline.live_segs, "leaked segments: %lld",
                 (long long)(now.live_segs - baseline.live_segs));
    cr_assert_eq(now.live_bufs, baseline.live_bufs, "leaked buffers: %lld",
                 (long long)(now.live_bufs - baseline.live_bufs));
    cr_assert_eq(now.live_pools, baseline.live_pools, "leaked pools: %lld",
                 (long long)(now.live_pools - baseline.live_pools));
}
