/* SPDX-License-Identifier: MIT */
/*
 * Finding a byte: zbuf_find() over a range and zbuf_cursor_find() from a
 * cursor give the first match, wherever the segment boundaries fall (checked
 * against a plain scan for every position in zbufs cut every way), look into
 * file segments too, copy nothing and allocate nothing, and leave the zbuf,
 * the cursor and the output untouched when they fail.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"
#include "support.h"

ZT_SUITE(find);

#define N 48

/* Text with repeated delimiters, and a 0 and a 0xff byte. */
static uint8_t text[N];

static void fill_text(void)
{
    static const char t[] = "PUB news hello world\r\nSUB x\r\n\x00\xff tail-without-end";
    memset(text, '.', N);
    memcpy(text, t, sizeof t - 1 < N ? sizeof t - 1 : N);
}

/* The text cut into segments at every position where bit k of `cuts` is set
 * (a cut before byte k), each segment its own heap buffer. */
static zbuf_t *make(uint64_t cuts)
{
    zbuf_t *z;
    size_t from = 0;
    cr_assert_eq(zbuf_create(&z), 0);
    for (size_t k = 1; k <= N; k++) {
        if (k == N || (cuts >> k & 1)) {
            cr_assert_eq(zbuf_append_copy(z, text + from, k - from), 0);
            from = k;
        }
    }
    zt_check(z);
    return z;
}

/* What zbuf_find() must say for the range [off, off + len). */
static int naive(size_t off, size_t len, int byte, size_t *pos)
{
    for (size_t i = off; i < off + len; i++) {
        if (text[i] == byte) {
            *pos = i;
            return 0;
        }
    }
    return -ENOENT;
}

static const int probes[] = {' ', '\r', '\n', 'P', 'd', 0, 0xff, 'Z', '.'};

Test(find, agrees_with_a_scan_for_every_range_and_segmentation)
{
    fill_text();
    static const uint64_t cutsets[] = {0, 0x2, 0x5555555555555554ull, 0xfffffffffffffffeull,
                                       0x0000010000100100ull, 0x123456789abcdef0ull};
    for (size_t k = 0; k < sizeof cutsets / sizeof cutsets[0]; k++) {
        zbuf_t *z = make(cutsets[k]);
        zbuf_stats_t st = zt_stats();
        for (size_t p = 0; p < sizeof probes / sizeof probes[0]; p++)
            for (size_t off = 0; off <= N; off++)
                for (size_t len = 0; off + len <= N; len += 1 + len / 3) {
                    size_t want = 999, got = 999;
                    int rw = naive(off, len, probes[p], &want);
                    int rg = zbuf_find(z, off, len, probes[p], &got);
                    cr_assert_eq(rg, rw, "byte %d in [%zu, +%zu), cuts %zu: rc %d, want %d",
                                 probes[p], off, len, k, rg, rw);
                    cr_assert_eq(got, rw == 0 ? want : 999, "byte %d in [%zu, +%zu): at %zu",
                                 probes[p], off, len, got);
                }
        zbuf_stats_t after = zt_stats();
        cr_assert_eq(after.bytes_copied, st.bytes_copied, "finding copies nothing");
        cr_assert_eq(after.allocs, st.allocs, "finding allocates nothing");
        zbuf_delete(z);
    }
}

Test(find, to_end_searches_the_rest)
{
    fill_text();
    zbuf_t *z = make(0x0101010101010100ull);
    size_t pos;
    cr_assert_eq(zbuf_find(z, 0, ZBUF_TO_END, '\n', &pos), 0);
    cr_assert_eq(pos, 21);
    cr_assert_eq(zbuf_find(z, 22, ZBUF_TO_END, '\n', &pos), 0);
    cr_assert_eq(pos, 28);
    cr_assert_eq(zbuf_find(z, 29, ZBUF_TO_END, '\n', &pos), -ENOENT);
    cr_assert_eq(zbuf_find(z, N, ZBUF_TO_END, '.', &pos), -ENOENT, "an empty range matches nothing");
    zbuf_delete(z);
}

Test(find, bad_arguments_are_rejected_and_change_nothing)
{
    fill_text();
    zbuf_t *z = make(0x10);
    size_t pos = 7;
    cr_assert_eq(zbuf_find(NULL, 0, 1, 'a', &pos), -EINVAL);
    cr_assert_eq(zbuf_find(z, 0, 1, 'a', NULL), -EINVAL);
    cr_assert_eq(zbuf_find(z, 0, 1, -1, &pos), -EINVAL);
    cr_assert_eq(zbuf_find(z, 0, 1, 256, &pos), -EINVAL);
    cr_assert_eq(zbuf_find(z, N + 1, 0, 'a', &pos), -ERANGE);
    cr_assert_eq(zbuf_find(z, 10, N - 9, 'a', &pos), -ERANGE);
    cr_assert_eq(pos, 7, "the output is untouched on error");
    zbuf_t *empty;
    cr_assert_eq(zbuf_create(&empty), 0);
    cr_assert_eq(zbuf_find(empty, 0, ZBUF_TO_END, 'a', &pos), -ENOENT);
    cr_assert_eq(pos, 7);
    zbuf_delete(empty);
    zbuf_delete(z);
}

/* A zbuf of 2 memory bytes, then a file segment holding text[2 .. N). */
static zbuf_t *with_file(int *fdp, size_t claimed)
{
    char path[] = "/tmp/zbuf-find-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    unlink(path);
    cr_assert_eq(write(fd, text, N), N);
    zbuf_buf_t *b;
    zbuf_t *z;
    cr_assert_eq(zbuf_buf_wrap_file(fd, 0, claimed, NULL, NULL, &b), 0);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_copy(z, text, 2), 0);
    cr_assert_eq(zbuf_append_ref(z, b, 2, claimed - 2), 0);
    zbuf_buf_unref(b);
    *fdp = fd;
    return z;
}

Test(find, looks_into_file_segments_without_counting_a_copy)
{
    fill_text();
    int fd;
    zbuf_t *z = with_file(&fd, N);
    zbuf_stats_t st = zt_stats();
    size_t pos;
    cr_assert_eq(zbuf_find(z, 0, ZBUF_TO_END, '\n', &pos), 0);
    cr_assert_eq(pos, 21);
    cr_assert_eq(zbuf_find(z, 0, ZBUF_TO_END, 0xff, &pos), 0);
    cr_assert_eq(pos, 30);
    cr_assert_eq(zbuf_find(z, 0, ZBUF_TO_END, 'Z', &pos), -ENOENT);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied);
    zbuf_delete(z);
    close(fd);
}

Test(find, an_unreadable_file_segment_is_eio)
{
    fill_text();
    int fd;
    zbuf_t *z = with_file(&fd, N + 100); /* claims bytes the file lacks */
    size_t pos = 5;
    cr_assert_eq(zbuf_find(z, 0, ZBUF_TO_END, 'Z', &pos), -EIO);
    cr_assert_eq(pos, 5);
    cr_assert_eq(zbuf_find(z, 0, 10, 'B', &pos), 0, "the readable part is still searched");
    cr_assert_eq(pos, 2);
    zbuf_delete(z);
    close(fd);
}

/* ---------------------------------------------------------------- cursor */

Test(find, cursor_find_agrees_with_a_scan_and_does_not_move)
{
    fill_text();
    zbuf_t *z = make(0x0f0f0f0f0f0f0f0eull);
    for (size_t p = 0; p < sizeof probes / sizeof probes[0]; p++) {
        for (size_t at = 0; at <= N; at++) {
            for (size_t max = 0; max <= N + 1; max += 5) {
                zbuf_cursor_t c, saved;
                cr_assert_eq(zbuf_cursor_init(&c, z, 0), 0);
                cr_assert_eq(zbuf_cursor_skip(&c, at), 0); /* may end on a boundary */
                saved = c;
                size_t lim = max < N - at ? max : N - at, want = 0, got = 999;
                int rw = naive(at, lim, probes[p], &want);
                int rg = zbuf_cursor_find(&c, probes[p], max, &got);
                cr_assert_eq(rg, rw, "byte %d from %zu within %zu", probes[p], at, max);
                cr_assert_eq(got, rw == 0 ? want - at : 999);
                cr_assert_eq(memcmp(&c, &saved, sizeof c), 0, "the cursor did not move");
            }
        }
    }
    zbuf_delete(z);
}

Test(find, cursor_parses_a_text_command_across_segments)
{
    /* "PUB news hello world\r\n" cut inside every token. */
    fill_text();
    zbuf_t *z = make(1ull << 2 | 1ull << 6 | 1ull << 11 | 1ull << 21);
    zbuf_cursor_t c;
    size_t n;
    char word[16];
    cr_assert_eq(zbuf_cursor_init(&c, z, 0), 0);
    cr_assert_eq(zbuf_cursor_find(&c, ' ', 8, &n), 0);
    cr_assert_eq(n, 3);
    cr_assert_eq(zbuf_cursor_skip(&c, n + 1), 0);
    cr_assert_eq(zbuf_cursor_find(&c, ' ', 8, &n), 0);
    cr_assert_eq(n, 4);
    cr_assert_eq(zbuf_cursor_read(&c, word, n), 0);
    cr_assert_eq(memcmp(word, "news", 4), 0);
    cr_assert_eq(zbuf_cursor_skip(&c, 1), 0);
    cr_assert_eq(zbuf_cursor_find(&c, '\n', ZBUF_TO_END, &n), 0);
    cr_assert_eq(n, 12, "\"hello world\\r\" before the newline");
    cr_assert_eq(zbuf_cursor_find(&c, ' ', 5, &n), -ENOENT, "\"hello\" has no space");
    cr_assert_eq(zbuf_cursor_find(&c, ' ', 6, &n), 0);
    cr_assert_eq(n, 5);
    cr_assert_eq(zbuf_cursor_find(&c, '\n', 12, &n), -ENOENT, "beyond max");
    zbuf_delete(z);
}

Test(find, cursor_find_rejects_bad_arguments)
{
    fill_text();
    zbuf_t *z = make(0);
    zbuf_cursor_t c;
    size_t n = 3;
    cr_assert_eq(zbuf_cursor_init(&c, z, 0), 0);
    cr_assert_eq(zbuf_cursor_find(NULL, 'a', 1, &n), -EINVAL);
    cr_assert_eq(zbuf_cursor_find(&c, 'a', 1, NULL), -EINVAL);
    cr_assert_eq(zbuf_cursor_find(&c, 300, 1, &n), -EINVAL);
    cr_assert_eq(zbuf_cursor_find(&c, 'P', 0, &n), -ENOENT, "max 0 searches nothing");
    cr_assert_eq(n, 3);
    zbuf_delete(z);
}
