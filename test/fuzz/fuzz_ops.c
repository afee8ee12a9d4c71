/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness: the input bytes are read as a sequence of operations on
 * a small population of zbufs (every choice of operation, slot, offset and
 * length is taken from the next input bytes), run against libzbuf and the
 * byte-array model of test/model.c, which checks content, segments,
 * zero-copy placement, release callbacks and pool buffers after every step.
 * Inputs whose first byte is odd also have allocations fail at random during
 * each operation's main call: such a call must return -ENOMEM and change
 * nothing.  A failed check aborts with a message naming the step and the
 * operation.
 *
 * Each input starts from nothing and must end with every zbuf, buffer and
 * pool gone (checked with the library's live counters, and by LeakSanitizer).
 *
 *   fuzz_ops -max_total_time=60 corpus/      # explore
 *   fuzz_ops crash-<sha1>                    # replay a finding
 */
#include <stdio.h>
#include <stdlib.h>

#include <zbuf/zbuf.h>

#include "model.h"

/* Inputs are read at most this far: longer ones only slow the search. */
#define MAX_STEPS 2048

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_fail(const char *msg)
{
    fprintf(stderr, "%s\n", msg);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    zbuf_stats_t st0, st1;
    zbuf_stats_get(&st0);
    struct zm_options o = {
        .input = data,
        .input_len = size,
        .full_check_every = 1, /* every zbuf after every step */
        /* Inputs with an odd first byte also have allocations fail. */
        .fault_one_in = size && (data[0] & 1) ? 5 : 0,
        .fail = fuzz_fail,
        .trace = getenv("ZBUF_TRACE") ? stderr : NULL,
    };
    zm_t *m = zm_new(&o);
    for (int i = 0; i < MAX_STEPS && zm_step(m); i++)
        continue;
    zm_finish(m);
    zbuf_thread_cache_flush();
    zbuf_stats_get(&st1);
    if (st1.live_zbufs != st0.live_zbufs || st1.live_segs != st0.live_segs ||
        st1.live_bufs != st0.live_bufs || st1.live_pools != st0.live_pools) {
        fprintf(
            stderr, "fuzz_ops: leaked zbufs %+lld, segments %+lld, buffers %+lld, pools %+lld\n",
            (long long)(st1.live_zbufs - st0.live_zbufs),
            (long long)(st1.live_segs - st0.live_segs), (long long)(st1.live_bufs - st0.live_bufs),
            (long long)(st1.live_pools - st0.live_pools));
        abort();
    }
    return 0;
}
