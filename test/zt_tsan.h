/* SPDX-License-Identifier: MIT */
/*
 * Tests that cross threads and run under ThreadSanitizer in CI.
 *
 * Criterion cannot start under TSan (its BoxFort arena maps at fixed
 * addresses inside TSan's reserved ranges: "Could not initialize inheritable
 * arena", Criterion issue #274).  A file that includes this header writes
 * its tests as
 *
 *     ZT_TSAN_TEST(suite, name) { ... T_CHECK(cond, "fmt", ...); T_OK(call); }
 *
 * In a normal build they are Criterion tests of suite `suite` (declare it
 * with ZT_SUITE(suite) once); under TSan they are plain functions, and the
 * file's main() runs them with zt_tsan_run(), which adds the same leak
 * check as ZT_SUITE and exits non-zero on the first failed check.
 */
#ifndef ZBUF_TEST_ZT_TSAN_H
#define ZBUF_TEST_ZT_TSAN_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "support.h"

#if defined(__SANITIZE_THREAD__)
#define ZT_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ZT_UNDER_TSAN 1
#endif
#endif

#ifdef ZT_UNDER_TSAN
__attribute__((format(printf, 3, 4), noreturn)) static inline void
zt_tsan_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s:%d: check failed: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(EXIT_FAILURE);
}
#define T_CHECK(cond, ...)                                                                         \
    do {                                                                                           \
        if (!(cond))                                                                               \
            zt_tsan_fail(__FILE__, __LINE__, __VA_ARGS__);                                         \
    } while (0)
#define T_INFO(...) (fprintf(stderr, __VA_ARGS__), fputc('\n', stderr))
#define ZT_TSAN_TEST(suite, name) static void name(void)

/** One test of a TSan build's main(). */
typedef struct zt_tsan_case {
    const char *name;
    void (*run)(void);
} zt_tsan_case_t;

/* Run `n` tests in order, each with the leak check of ZT_SUITE. */
static inline int zt_tsan_run(const char *suite, const zt_tsan_case_t *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        zbuf_stats_t st0, st1;
        zbuf_stats_get(&st0);
        fprintf(stderr, "[RUN ] %s::%s\n", suite, cases[i].name);
        cases[i].run();
        zbuf_thread_cache_flush();
        zbuf_stats_get(&st1);
        T_CHECK(st1.live_zbufs == st0.live_zbufs && st1.live_segs == st0.live_segs &&
                    st1.live_bufs == st0.live_bufs && st1.live_pools == st0.live_pools,
                "%s leaked: zbufs %+lld, segments %+lld, buffers %+lld, pools %+lld",
                cases[i].name, (long long)(st1.live_zbufs - st0.live_zbufs),
                (long long)(st1.live_segs - st0.live_segs),
                (long long)(st1.live_bufs - st0.live_bufs),
                (long long)(st1.live_pools - st0.live_pools));
        fprintf(stderr, "[PASS] %s::%s\n", suite, cases[i].name);
    }
    fprintf(stderr, "[====] Synthesis: Tested: %zu | Passing: %zu | Failing: 0\n", n, n);
    return 0;
}
#else
#define T_CHECK(cond, ...) cr_assert(cond, __VA_ARGS__)
#define T_INFO(...) cr_log_info(__VA_ARGS__)
#define ZT_TSAN_TEST(suite, name)                                                                  \
    static void name(void);                                                                        \
    Test(suite, name)                                                                              \
    {                                                                                              \
        name();                                                                                    \
    }                                                                                              \
    static void name(void)
#endif
#define T_OK(call) T_CHECK((call) == 0, "%s failed", #call)

#endif /* ZBUF_TEST_ZT_TSAN_H */
