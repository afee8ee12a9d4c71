/* SPDX-License-Identifier: MIT */
/*
 * A differential model of libzbuf for the randomized test (test_random.c)
 * and the libFuzzer harness (fuzz/fuzz_ops.c).
 *
 * The model keeps, for every zbuf of a small population, a plain byte array
 * with the same content and, for every byte, where it must live: in which
 * tracked buffer (a caller's enrolled buffer, a zbuf_buf_alloc() buffer or a
 * pool buffer) at which offset, or "anonymous" for bytes the library made
 * itself (copies, prepend/append space, reservations).  After every
 * operation it compares the zbufs with the arrays byte by byte, checks that
 * bytes of tracked buffers were never copied by the operations that promise
 * not to copy (the segment must point at the very byte the model names),
 * runs zbuf_check(), and checks that each enrolled buffer's release callback
 * has run exactly once as soon as, and not before, no zbuf and no handle of
 * the test references it any more.  Pool availability is checked the same
 * way.
 *
 * Choices come from a seeded PRNG (random mode) or from the bytes of a fuzz
 * input (fuzz mode).  A failed check calls the caller's fail function with a
 * message naming the seed, the step and the operation; that function must
 * not return (the model aborts if it does).
 *
 * The model is single-threaded: one zm_t exists at a time.
 */
#ifndef ZBUF_TEST_MODEL_H
#define ZBUF_TEST_MODEL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <zbuf/zbuf.h>

/** How a model run gets its choices and reports failures. */
struct zm_options {
    uint64_t seed;        /* random mode: seed of the choices */
    const uint8_t *input; /* fuzz mode when not NULL: choices come from these bytes */
    size_t input_len;
    unsigned full_check_every;     /* verify every zbuf every N steps (0: 16); touched
                                      zbufs are verified after every step anyway */
    unsigned fault_one_in;         /* when not 0: during the main call of each operation,
                                      each allocation fails with probability 1/fault_one_in;
                                      a call that fails must return -ENOMEM and change
                                      nothing (the model installs its own allocator and
                                      switches the descriptor caches off for the run) */
    void (*fail)(const char *msg); /* a check failed; must not return */
    FILE *trace;                   /* when not NULL, one line per operation */
};

typedef struct zm zm_t;

/* Start a run: creates the population and a pool.  Returns NULL only if the
 * library cannot create them (reported through fail first). */
zm_t *zm_new(const struct zm_options *o);

/* Run one random operation and check everything it may have touched.
 * Returns false (doing nothing) once a fuzz input is used up. */
bool zm_step(zm_t *m);

/* Delete every zbuf, drop every handle and the pool, check that each release
 * callback ran exactly once and the pool got every buffer back, and free the
 * model. */
void zm_finish(zm_t *m);

/* Operations run so far, and how many of them were the deliberate invalid
 * calls (for the tests to assert that the mix really covered them). */
uint64_t zm_steps(const zm_t *m);
uint64_t zm_invalid_ops(const zm_t *m);
/* Release callbacks that ran so far. */
uint64_t zm_releases(const zm_t *m);
/* Calls that failed with an injected -ENOMEM and were checked unchanged. */
uint64_t zm_enomem_ops(const zm_t *m);

#endif /* ZBUF_TEST_MODEL_H */
