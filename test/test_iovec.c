/* SPDX-License-Identifier: MIT */
/*
 * zbuf_iovec(): describing a byte range as struct iovec entries pointing
 * into the zbuf's own memory, for writev()/sendmsg(), without copying.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fixture.h"
#include "support.h"

ZT_SUITE(iovec);

Test(iovec, whole_zbuf_is_one_entry_per_segment)
{
    static const size_t lens[] = {3, 1, 4, 2};
    zbuf_t *z = zt_make(lens, 4);
    struct iovec iov[8];
    size_t bytes = 0;
    zbuf_stats_t st = zt_stats();

    cr_assert_eq(zbuf_iovec(z, 0, ZBUF_TO_END, iov, 8, &bytes), 4);
    cr_assert_eq(bytes, 10);
    for (size_t k = 0; k < 4; k++) {
        cr_assert_eq(iov[k].iov_base, zt_mem[k], "entry %zu is not the segment's memory", k);
        cr_assert_eq(iov[k].iov_len, lens[k]);
    }
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(iovec, inside_one_segment_is_one_entry)
{
    static const size_t lens[] = {20};
    zbuf_t *z = zt_make(lens, 1);
    struct iovec iov[2];
    size_t bytes = 0;

    cr_assert_eq(zbuf_iovec(z, 5, 7, iov, 2, &bytes), 1);
    cr_assert_eq(iov[0].iov_base, zt_mem[0] + 5);
    cr_assert_eq(iov[0].iov_len, 7);
    cr_assert_eq(bytes, 7);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(iovec, every_range_covers_exactly_its_bytes)
{
    static const size_t lens[] = {3, 1, 4, 2};
    zbuf_t *z = zt_make(lens, 4);
    zt_snap_t before;

    zt_snap(&before, z);
    for (size_t off = 0; off <= 10; off++) {
        for (size_t len = 0; off + len <= 10; len++) {
            struct iovec iov[8];
            size_t bytes = 99, total = 0, n = 0;
            zbuf_stats_t st = zt_stats();
            int cnt = zbuf_iovec(z, off, len, iov, 8, &bytes);

            cr_assert_geq(cnt, 0, "off %zu len %zu rc %d", off, len, cnt);
            cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied);
            cr_assert_eq(bytes, len, "off %zu len %zu", off, len);
            for (int k = 0; k < cnt; k++) {
                cr_assert_gt(iov[k].iov_len, 0, "empty entry");
                for (size_t i = 0; i < iov[k].iov_len; i++, n++)
                    cr_assert_eq(((uint8_t *)iov[k].iov_base)[i], ZT_PAT(off + n));
                total += iov[k].iov_len;
            }
            cr_assert_eq(total, len);
            /* One entry per segment touched. */
            {
                size_t pos = 0, touched = 0;
                for (size_t k = 0; k < 4; k++) {
                    if (len > 0 && off < pos + lens[k] && off + len > pos)
                        touched++;
                    pos += lens[k];
                }
                cr_assert_eq((size_t)cnt, touched, "off %zu len %zu", off, len);
            }
        }
    }
    zt_assert_unchanged(&before, z);
    zt_expect_released(zt_none, 4);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(iovec, small_array_stops_early_and_says_how_much)
{
    static const size_t lens[] = {3, 1, 4, 2};
    zbuf_t *z = zt_make(lens, 4);
    struct iovec iov[4];
    size_t bytes = 0;

    memset(iov, 0, sizeof iov);
    cr_assert_eq(zbuf_iovec(z, 1, ZBUF_TO_END, iov, 2, &bytes), 2);
    cr_assert_eq(bytes, 3);
    cr_assert_eq(iov[0].iov_base, zt_mem[0] + 1);
    cr_assert_eq(iov[0].iov_len, 2);
    cr_assert_eq(iov[1].iov_base, zt_mem[1]);
    cr_assert_null(iov[2].iov_base, "wrote past iovcnt");
    cr_assert_eq(zbuf_iovec(z, 0, ZBUF_TO_END, iov, 1, &bytes), 1);
    cr_assert_eq(bytes, 3);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(iovec, empty_range_or_zbuf_fills_nothing)
{
    static const size_t lens[] = {3};
    zbuf_t *z = zt_make(lens, 1);
    zbuf_t *e;
    struct iovec iov[2];
    size_t bytes = 99;

    cr_assert_eq(zbuf_iovec(z, 1, 0, iov, 2, &bytes), 0);
    cr_assert_eq(bytes, 0);
    bytes = 99;
    cr_assert_eq(zbuf_iovec(z, 3, ZBUF_TO_END, iov, 2, &bytes), 0);
    cr_assert_eq(bytes, 0);
    cr_assert_eq(zbuf_create(&e), 0);
    bytes = 99;
    cr_assert_eq(zbuf_iovec(e, 0, ZBUF_TO_END, iov, 2, &bytes), 0);
    cr_assert_eq(bytes, 0);
    cr_assert_eq(zbuf_delete(e), 0);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(iovec, bytes_may_be_null)
{
    static const size_t lens[] = {3, 4};
    zbuf_t *z = zt_make(lens, 2);
    struct iovec iov[2];

    cr_assert_eq(zbuf_iovec(z, 0, ZBUF_TO_END, iov, 2, NULL), 2);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(iovec, stops_before_a_file_segment)
{
    char path[] = "/tmp/zbuf-iovec-XXXXXX";
    int fd = mkstemp(path);
    static const size_t lens[] = {3, 4};
    zbuf_t *z = zt_make(lens, 2);
    zbuf_buf_t *b;
    struct iovec iov[4];
    size_t bytes = 0;

    cr_assert_geq(fd, 0);
    unlink(path);
    cr_assert_eq(ftruncate(fd, 50), 0);
    cr_assert_eq(zbuf_buf_wrap_file(fd, 0, 50, NULL, NULL, &b), 0);
    cr_assert_eq(zbuf_insert_ref(z, 3, b, 10, 20, NULL), 0); /* bytes 3 .. 22 */
    zbuf_buf_unref(b);
    cr_assert_eq(zbuf_iovec(z, 0, ZBUF_TO_END, iov, 4, &bytes), 1);
    cr_assert_eq(bytes, 3);
    cr_assert_eq(iov[0].iov_base, zt_mem[0]);
    bytes = 99;
    cr_assert_eq(zbuf_iovec(z, 3, ZBUF_TO_END, iov, 4, &bytes), 0, "starts with a file segment");
    cr_assert_eq(bytes, 0);
    bytes = 99;
    cr_assert_eq(zbuf_iovec(z, 10, 5, iov, 4, &bytes), 0);
    cr_assert_eq(bytes, 0);
    cr_assert_eq(zbuf_iovec(z, 23, ZBUF_TO_END, iov, 4, &bytes), 1);
    cr_assert_eq(iov[0].iov_base, zt_mem[1]);
    cr_assert_eq(bytes, 4);
    cr_assert_eq(zbuf_delete(z), 0);
    close(fd);
}

Test(iovec, entries_feed_writev)
{
    static const size_t lens[] = {7, 1, 30, 5, 12};
    zbuf_t *z = zt_make(lens, 5);
    struct iovec iov[8];
    size_t bytes = 0;
    int fds[2], cnt;
    uint8_t got[64];

    cr_assert_eq(pipe(fds), 0);
    cnt = zbuf_iovec(z, 4, 50, iov, 8, &bytes);
    cr_assert_eq(cnt, 5);
    cr_assert_eq(writev(fds[1], iov, cnt), 50);
    cr_assert_eq(read(fds[0], got, sizeof got), 50);
    for (size_t i = 0; i < 50; i++)
        cr_assert_eq(got[i], ZT_PAT(4 + i));
    close(fds[0]);
    close(fds[1]);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(iovec, rejected_calls_fill_nothing)
{
    static const size_t lens[] = {3, 4};
    zbuf_t *z = zt_make(lens, 2);
    struct iovec iov[4];
    size_t bytes = 1234;
    zt_snap_t before;

    zt_snap(&before, z);
    memset(iov, 0, sizeof iov);
    cr_assert_eq(zbuf_iovec(z, 8, 0, iov, 4, &bytes), -ERANGE);
    cr_assert_eq(zbuf_iovec(z, 8, ZBUF_TO_END, iov, 4, &bytes), -ERANGE);
    cr_assert_eq(zbuf_iovec(z, 0, 8, iov, 4, &bytes), -ERANGE);
    cr_assert_eq(zbuf_iovec(z, 4, 4, iov, 4, &bytes), -ERANGE);
    cr_assert_eq(zbuf_iovec(z, 1, SIZE_MAX - 1, iov, 4, &bytes), -ERANGE);
    cr_assert_eq(zbuf_iovec(NULL, 0, 1, iov, 4, &bytes), -EINVAL);
    cr_assert_eq(zbuf_iovec(z, 0, 1, NULL, 4, &bytes), -EINVAL);
    cr_assert_eq(zbuf_iovec(z, 0, 1, iov, -1, &bytes), -EINVAL);
    cr_assert_eq(bytes, 1234, "bytes written on failure");
    cr_assert_null(iov[0].iov_base, "iov written on failure");
    zt_assert_unchanged(&before, z);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zbuf_iovec(z, 0, 0, iov, 4, &bytes), -EINVAL, "deleted zbuf");
}

Test(iovec, entries_stay_valid_while_a_dup_holds_the_bytes)
{
    static const size_t lens[] = {3, 4};
    zbuf_t *z = zt_make_heap(lens, 2);
    zbuf_t *d;
    struct iovec iov[2];

    cr_assert_eq(zbuf_dup(z, 0, ZBUF_TO_END, &d), 0);
    cr_assert_eq(zbuf_iovec(d, 0, ZBUF_TO_END, iov, 2, NULL), 2);
    cr_assert_eq(zbuf_delete(z), 0);
    for (size_t i = 0; i < 3; i++)
        cr_assert_eq(((uint8_t *)iov[0].iov_base)[i], ZT_PAT(i));
    cr_assert_eq(zbuf_delete(d), 0);
}
