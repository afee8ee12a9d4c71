/* SPDX-License-Identifier: MIT */
/*
 * The implementations of the flat Internet checksum (cksum.c), for the
 * checksum tests and benchmark; the stack itself only uses the functions in
 * stack_internal.h.
 */
#ifndef ZBUF_STACK_CKSUM_H
#define ZBUF_STACK_CKSUM_H

#include "stack_internal.h"

enum zbuf_ip__cksum_impl {
    ZBUF_IP__CKSUM_PORTABLE, /* 64-bit words, two carry-counting accumulators */
    ZBUF_IP__CKSUM_SSE2,     /* x86-64 only */
    ZBUF_IP__CKSUM_AVX2,     /* x86-64 with AVX2 */
    ZBUF_IP__CKSUM_N
};

/* Whether the implementation runs on this machine. */
ZBUF_IP__HIDDEN bool zbuf_ip__cksum_available(enum zbuf_ip__cksum_impl i);
/* Its name ("portable", "sse2", "avx2"). */
ZBUF_IP__HIDDEN const char *zbuf_ip__cksum_name(enum zbuf_ip__cksum_impl i);
/* The one zbuf_ip__sum_mem() uses for runs of 64 bytes and more. */
ZBUF_IP__HIDDEN enum zbuf_ip__cksum_impl zbuf_ip__cksum_chosen(void);
/* Use this implementation from now on (tests; portable if unavailable;
 * ZBUF_IP__CKSUM_N: choose again as at start-up). */
ZBUF_IP__HIDDEN void zbuf_ip__cksum_force(enum zbuf_ip__cksum_impl i);
/* zbuf_ip__sum_mem() through a given (available) implementation. */
ZBUF_IP__HIDDEN uint64_t zbuf_ip__sum_mem_with(enum zbuf_ip__cksum_impl i, const void *p,
                                               size_t len, uint64_t sum);

/* zbuf_ip__sum_mem() through the routine for runs of fewer than 64 bytes
 * (len < 64), which zbuf_ip__sum_mem() and zbuf_ip__sum_zbuf() use inline
 * for such runs whatever the implementation. */
ZBUF_IP__HIDDEN uint64_t zbuf_ip__sum_short(const void *p, size_t len, uint64_t sum);

#endif /* ZBUF_STACK_CKSUM_H */
