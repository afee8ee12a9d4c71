/* SPDX-License-Identifier: MIT */
/*
 * Randomized differential test: long random sequences of every core
 * operation run against libzbuf and against the byte-array model of
 * model.c, which checks content, segments, zero-copy placement, release
 * callbacks and pool buffers after every step (see model.h).
 *
 * CI runs eight fixed seeds, 20,000 steps each in every build and 1.25
 * million each in optimised builds (core_random_deep: 10 million steps in
 * all).  For longer runs:
 *   ZBUF_SEED=<n> ZBUF_STEPS=<n> ./core_random --filter 'random/seed_from_environment'
 * ZBUF_STEPS alone also lengthens the fixed seeds; ZBUF_FAULTS=<n> makes one
 * allocation in n fail during each operation's main call; ZBUF_TRACE=1
 * prints every operation (to replay a failure, whose message names seed and
 * step).
 */
#include <stdlib.h>

#include "support.h"
#include "model.c"

#define FIXED_STEPS 20000

static void fail_criterion(const char *msg)
{
    cr_assert_fail("%s", msg);
    abort(); /* not reached */
}

static uint64_t env_u64(const char *name, uint64_t dflt)
{
    const char *v = getenv(name);
    return v && *v ? strtoull(v, NULL, 0) : dflt;
}

static void run_with(uint64_t seed, uint64_t steps, unsigned fault_one_in)
{
    struct zm_options o = {
        .seed = seed,
        .fault_one_in = fault_one_in,
        .fail = fail_criterion,
        .trace = getenv("ZBUF_TRACE") ? stderr : NULL,
    };
    steps = env_u64("ZBUF_STEPS", steps);
    zm_t *m = zm_new(&o);
    for (uint64_t i = 0; i < steps; i++)
        zm_step(m);
    uint64_t invalid = zm_invalid_ops(m), releases = zm_releases(m), enomem = zm_enomem_ops(m);
    zm_finish(m);
    if (fault_one_in && steps >= 1000)
        cr_expect_gt(enomem, steps / 20, "seed %llu: only %llu calls failed with -ENOMEM",
                     (unsigned long long)seed, (unsigned long long)enomem);
    /* The mix must really have exercised failures and callbacks. */
    if (steps >= 1000) {
        cr_expect_gt(invalid, steps / 50, "seed %llu: only %llu invalid calls in %llu steps",
                     (unsigned long long)seed, (unsigned long long)invalid,
                     (unsigned long long)steps);
        cr_expect_gt(releases, steps / 50, "seed %llu: only %llu release callbacks",
                     (unsigned long long)seed, (unsigned long long)releases);
    }
}

static void run(uint64_t seed, uint64_t steps)
{
    run_with(seed, steps, 0);
}

ZT_SUITE(random);

Test(random, seed_1_matches_model)
{
    run(1, FIXED_STEPS);
}
Test(random, seed_2_matches_model)
{
    run(2, FIXED_STEPS);
}
Test(random, seed_3_matches_model)
{
    run(3, FIXED_STEPS);
}
Test(random, seed_4_matches_model)
{
    run(4, FIXED_STEPS);
}
Test(random, seed_5_matches_model)
{
    run(5, FIXED_STEPS);
}
Test(random, seed_6_matches_model)
{
    run(6, FIXED_STEPS);
}
Test(random, seed_7_matches_model)
{
    run(7, FIXED_STEPS);
}
Test(random, seed_8_matches_model)
{
    run(8, FIXED_STEPS);
}

/* Many short runs: the start and the final clean-up with few zbufs. */
Test(random, many_short_runs_release_everything)
{
    for (uint64_t seed = 100; seed < 400; seed++)
        run(seed, 60);
}

/* The same mix with allocation failures injected into each operation's main
 * call: every failure must be -ENOMEM with nothing changed, from whatever
 * state the random sequence reached. */
Test(random, allocation_failures_seed_1_change_nothing)
{
    run_with(1, FIXED_STEPS / 2, 6);
}
Test(random, allocation_failures_seed_2_change_nothing)
{
    run_with(2, FIXED_STEPS / 2, 6);
}
Test(random, allocation_failures_seed_3_change_nothing)
{
    run_with(3, FIXED_STEPS / 2, 3);
}

Test(random, seed_from_environment)
{
    const char *s = getenv("ZBUF_SEED");
    if (!s || !*s)
        cr_skip_test("set ZBUF_SEED (and ZBUF_STEPS) to run a chosen seed");
    run_with(env_u64("ZBUF_SEED", 0), 100000, (unsigned)env_u64("ZBUF_FAULTS", 0));
}
