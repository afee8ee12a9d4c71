/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the Criterion tests: release-callback counting and the
 * leak check every test file runs in its teardown.
 */
#ifndef ZBUF_TEST_SUPPORT_H
#define ZBUF_TEST_SUPPORT_H

#include <criterion/criterion.h>
#include <zbuf/zbuf.h>

/* A release callback that counts its calls in the int pointed to by arg. */
void zt_count_release(void *data, size_t size, void *arg);

/* Remember the live counters (call from .init). */
void zt_leak_baseline(void);
/* Assert that the live counters are back to the baseline (call from .fini). */
void zt_assert_no_leaks(void);

/* Run zbuf_check() and assert it passes. */
#define zt_check(z) cr_assert_eq(zbuf_check(z), 0, "chain check failed at %s:%d", __FILE__, __LINE__)

/* Suite options: every test starts from a baseline and ends leak-free. */
#define ZT_SUITE(name) TestSuite(name, .init = zt_leak_baseline, .fini = zt_assert_no_leaks)

#endif
