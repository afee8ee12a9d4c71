/* SPDX-License-Identifier: MIT */
/*
 * Process-wide counters: live objects come back to where they started, every
 * copied byte is counted exactly once, zero-copy paths count nothing, and
 * counts made on other threads are included.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"
#include "support.h"

ZT_SUITE(stats);

Test(stats, live_counters_follow_objects)
{
    zbuf_stats_t st = zt_stats();
    zbuf_t *z, *t;
    zbuf_buf_t *b;
    zbuf_pool_t *p;
    static uint8_t area[16];

    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zt_stats().live_zbufs, st.live_zbufs + 1);
    cr_assert_eq(zbuf_append_buf(z, area, 16, NULL, NULL), 0);
    zt_check(z);
    cr_assert_eq(zt_stats().live_segs, st.live_segs + 1);
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs + 1);
    cr_assert_eq(zbuf_split(z, 8, &t), 0); /* splits the one segment */
    cr_assert_eq(zt_stats().live_zbufs, st.live_zbufs + 2);
    cr_assert_eq(zt_stats().live_segs, st.live_segs + 2);
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs + 1);
    cr_assert_eq(zbuf_buf_alloc(10, &b), 0);
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs + 2);
    cr_assert_eq(zbuf_pool_create(8, 2, &p), 0);
    cr_assert_eq(zt_stats().live_pools, st.live_pools + 1);
    cr_assert_eq(zbuf_insert(z, 0, t, NULL), 0);
    zt_check(z);
    cr_assert_eq(zt_stats().live_zbufs, st.live_zbufs + 1);
    cr_assert_eq(zt_stats().live_segs, st.live_segs + 2);
    zbuf_pool_delete(p);
    zbuf_buf_unref(b);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zt_stats().live_zbufs, st.live_zbufs);
    cr_assert_eq(zt_stats().live_segs, st.live_segs);
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs);
    cr_assert_eq(zt_stats().live_pools, st.live_pools);
}

Test(stats, zero_copy_paths_count_nothing)
{
    zbuf_t *z, *d, *t, *h, *m;
    zbuf_buf_t *b;
    static uint8_t a1[100], a2[100];
    struct iovec iov[8];
    const void *out;
    void *data;
    size_t abs;
    zbuf_cursor_t c;
    zbuf_stats_t st;

    cr_assert_eq(zbuf_buf_alloc(100, &b), 0);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_create(&m), 0);
    st = zt_stats();
    cr_assert_eq(zbuf_append_buf(z, a1, 100, NULL, NULL), 0);
    zt_check(z);
    cr_assert_eq(zbuf_insert_buf(z, 50, a2, 100, NULL, NULL, NULL), 0);
    zt_check(z);
    cr_assert_eq(zbuf_insert_ref(z, 10, b, 0, 100, NULL), 0);
    zt_check(z);
    cr_assert_eq(zbuf_dup(z, 5, 200, &d), 0);
    zt_check(z);
    zt_check(d);
    cr_assert_eq(zbuf_split(d, 77, &t), 0);
    zt_check(d);
    zt_check(t);
    cr_assert_eq(zbuf_split_head(t, 13, &h), 0);
    zt_check(t);
    zt_check(h);
    cr_assert_eq(zbuf_cut(z, 3, 111, NULL), 0);
    zt_check(z);
    cr_assert_eq(zbuf_append_ref(m, b, 1, 2), 0);
    zt_check(m);
    cr_assert_eq(zbuf_insert(z, 7, m, NULL), 0);
    zt_check(z);
    cr_assert_eq(zbuf_append(d, t), 0);
    zt_check(d);
    cr_assert_gt(zbuf_iovec(z, 0, ZBUF_TO_END, iov, 8, NULL), 0);
    cr_assert_eq(zbuf_peek(z, 0, 3, NULL, &out), 0);
    cr_assert_eq(zbuf_pullup(z, 0, 3, &data), 0);
    cr_assert_eq(zbuf_locate(z, zbuf_seg_last(z), -1, &abs), 0);
    cr_assert_eq(zbuf_cursor_init(&c, z, 0), 0);
    cr_assert_not_null(zbuf_cursor_peek(&c, 2));
    cr_assert_eq(zbuf_cursor_skip(&c, 50), 0);
    cr_assert(!zbuf_writable(z, 0, 1));
    zt_check(z);
    zt_check(d);
    zt_check(h);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied, "a zero-copy path copied %llu bytes",
                 (unsigned long long)(zt_stats().bytes_copied - st.bytes_copied));
    cr_assert_eq(zt_stats().copies, st.copies);
    zbuf_buf_unref(b);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zbuf_delete(d), 0);
    cr_assert_eq(zbuf_delete(h), 0);
}

Test(stats, copying_paths_count_exactly_their_bytes)
{
    static const uint8_t src[64] = {1, 2, 3};
    zbuf_t *z, *d;
    uint8_t out[64], scratch[64];
    const void *peeked;
    void *data;
    zbuf_stats_t st;

    cr_assert_eq(zbuf_create(&z), 0);

    st = zt_stats();
    cr_assert_eq(zbuf_append_copy(z, src, 40), 0);
    zt_check(z);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied + 40, "insert_copy");
    cr_assert_eq(zt_stats().copies, st.copies + 1, "one insert_copy is one copy");

    cr_assert_eq(zbuf_append_copy(z, src, 24), 0); /* two segments: 40 + 24 */
    cr_assert_eq(zbuf_seg_count(z), 2);

    st = zt_stats();
    cr_assert_eq(zbuf_copyout(z, 5, out, 30), 30);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied + 30, "copyout in one segment");
    cr_assert_eq(zt_stats().copies, st.copies + 1);

    st = zt_stats();
    cr_assert_eq(zbuf_copyout(z, 30, out, 20), 20);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied + 20, "copyout across segments");
    cr_assert_gt(zt_stats().copies, st.copies);

    st = zt_stats();
    cr_assert_eq(zbuf_peek(z, 38, 4, scratch, &peeked), 0);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied + 4, "peek across segments");

    cr_assert_eq(zbuf_dup(z, 0, ZBUF_TO_END, &d), 0);
    zt_check(z);
    zt_check(d);
    st = zt_stats();
    cr_assert_eq(zbuf_unshare(z, 0, ZBUF_TO_END), 0);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied + 64, "unshare of shared bytes");
    cr_assert_eq(zbuf_delete(d), 0);

    st = zt_stats();
    cr_assert_eq(zbuf_pullup(z, 35, 10, &data), 0);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied + 10, "pullup across segments");

    cr_assert_eq(zbuf_delete(z), 0);
}

/* The rule (zbuf/stats.h, docs/concepts.md): bytes delivered as bytes into
 * memory outside their buffer count, values decoded do not, and looking at
 * bytes in place does not; for every reader, wherever the bytes lie. */
Test(stats, every_reader_follows_the_copy_rule)
{
    static const uint8_t src[12] = {0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 1, 2, 3, 4};
    char path[] = "/tmp/zbuf-stats-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    unlink(path);
    cr_assert_eq(write(fd, src, sizeof src), (ssize_t)sizeof src);
    /* The same 12 bytes three ways: one segment, one byte per segment, and
     * a file segment after 2 memory bytes. */
    zbuf_t *z[3];
    zbuf_buf_t *fb;
    for (int k = 0; k < 3; k++)
        cr_assert_eq(zbuf_create(&z[k]), 0);
    cr_assert_eq(zbuf_append_copy(z[0], src, 12), 0);
    for (int i = 0; i < 12; i++)
        cr_assert_eq(zbuf_append_copy(z[1], src + i, 1), 0);
    cr_assert_eq(zbuf_append_copy(z[2], src, 2), 0);
    cr_assert_eq(zbuf_buf_wrap_file(fd, 2, 10, NULL, NULL, &fb), 0);
    cr_assert_eq(zbuf_append_ref(z[2], fb, 0, 10), 0);
    zbuf_buf_unref(fb);

    for (int k = 0; k < 3; k++) {
        zbuf_cursor_t c;
        zbuf_stats_t st = zt_stats();
        uint8_t u8;
        uint16_t u16;
        uint32_t u32;
        uint64_t u64;
        size_t at;
        /* Decoding values: not copies, straddling or in a file alike. */
        cr_assert_eq(zbuf_cursor_init(&c, z[k], 0), 0);
        cr_assert_eq(zbuf_cursor_read_u8(&c, &u8), 0);
        cr_assert_eq(zbuf_cursor_read_be16(&c, &u16), 0);
        cr_assert_eq(zbuf_cursor_read_le32(&c, &u32), 0);
        cr_assert_eq(zbuf_cursor_read_be32(&c, &u32), 0);
        cr_assert_eq(zbuf_cursor_init(&c, z[k], 1), 0);
        cr_assert_eq(zbuf_cursor_read_be64(&c, &u64), 0);
        cr_assert_eq(u64, 0x3456789abcdef001ull);
        /* Looking in place: not copies. */
        cr_assert_eq(zbuf_find(z[k], 0, ZBUF_TO_END, 3, &at), 0);
        cr_assert_eq(at, 10);
        cr_assert_eq(zbuf_cursor_find(&c, 4, ZBUF_TO_END, &at), 0);
        (void)zbuf_cursor_peek(&c, 2);
        cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied, "layout %d: %llu counted", k,
                     (unsigned long long)(zt_stats().bytes_copied - st.bytes_copied));
        /* Bytes delivered as bytes: copies, however few. */
        uint8_t out[12];
        const void *pk;
        cr_assert_eq(zbuf_cursor_init(&c, z[k], 3), 0);
        cr_assert_eq(zbuf_cursor_read(&c, out, 8), 0);
        cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied + 8, "cursor_read, layout %d", k);
        cr_assert_eq(zbuf_copyout(z[k], 0, out, 1), 1);
        cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied + 9, "copyout, layout %d", k);
        cr_assert_eq(zbuf_peek(z[k], 1, 4, out, &pk), 0);
        size_t peeked = pk == out ? 4 : 0; /* in place when it lies in one segment */
        cr_assert_eq(peeked, k == 0 ? 0u : 4u, "layout %d", k);
        cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied + 9 + peeked, "peek, layout %d", k);
        zbuf_delete(z[k]);
    }
    close(fd);
}

Test(stats, count_copy_adds_an_outside_copy)
{
    zbuf_stats_t st = zt_stats();

    zbuf_stats_count_copy(1234);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied + 1234);
    cr_assert_eq(zt_stats().copies, st.copies + 1);
    zbuf_stats_count_copy(1);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied + 1235);
    cr_assert_eq(zt_stats().copies, st.copies + 2);
}

Test(stats, failed_calls_count_nothing)
{
    zbuf_t *z;
    uint8_t out[8];
    zbuf_stats_t st;
    void *data;

    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_copy(z, "abcd", 4), 0);
    zt_check(z);
    st = zt_stats();
    cr_assert_eq(zbuf_copyout(z, 0, out, 5), -ERANGE);
    cr_assert_eq(zbuf_insert_copy(z, 5, "x", 1, NULL), -ERANGE);
    cr_assert_eq(zbuf_pullup(z, 0, 5, &data), -ERANGE);
    cr_assert_eq(zbuf_unshare(z, 2, 3), -ERANGE);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied);
    cr_assert_eq(zt_stats().copies, st.copies);
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs);
    cr_assert_eq(zt_stats().live_segs, st.live_segs);
    cr_assert_eq(zbuf_delete(z), 0);
}

Test(stats, allocs_grow_when_memory_is_taken)
{
    zbuf_stats_t st = zt_stats();
    zbuf_buf_t *b;

    cr_assert_eq(zbuf_buf_alloc(4096, &b), 0);
    cr_assert_gt(zt_stats().allocs, st.allocs);
    zbuf_buf_unref(b);
    cr_assert_geq(zt_stats().allocs, st.allocs + 1, "allocs counts calls, it never goes down");
}

/* An allocator that counts its calls and remembers every live block, to
 * compare with the allocs counter and to check the sized-free contract. */
#define MAX_BLOCKS 256

static size_t my_allocs, my_bad_frees;
static struct {
    void *p;
    size_t size;
} blocks[MAX_BLOCKS];

static void *counting_alloc(void *ctx, size_t size)
{
    void *p = malloc(size);

    (void)ctx;
    my_allocs++;
    for (size_t i = 0; p != NULL && i < MAX_BLOCKS; i++) {
        if (blocks[i].p == NULL) {
            blocks[i].p = p;
            blocks[i].size = size;
            return p;
        }
    }
    free(p);
    return NULL;
}

static void counting_free(void *ctx, void *p, size_t size)
{
    (void)ctx;
    for (size_t i = 0; i < MAX_BLOCKS; i++) {
        if (blocks[i].p == p) {
            if (blocks[i].size != size)
                my_bad_frees++;
            blocks[i].p = NULL;
            free(p);
            return;
        }
    }
    my_bad_frees++; /* not one of ours: leak it rather than crash */
}

static size_t blocks_live(void)
{
    size_t n = 0;
    for (size_t i = 0; i < MAX_BLOCKS; i++)
        n += blocks[i].p != NULL;
    return n;
}

Test(stats, allocs_counts_every_call_to_the_allocator)
{
    zbuf_allocator_t a = {counting_alloc, counting_free, NULL};
    zbuf_stats_t st;
    zbuf_t *z, *d;
    zbuf_pool_t *p;
    zbuf_buf_t *b;

    cr_assert_eq(zbuf_set_allocator(&a), 0);
    st = zt_stats();
    my_allocs = 0;
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_copy(z, "abc", 3), 0);
    zt_check(z);
    cr_assert_eq(zbuf_append_copy(z, "def", 3), 0);
    zt_check(z);
    cr_assert_eq(zbuf_dup(z, 1, 4, &d), 0);
    zt_check(d);
    cr_assert_eq(zbuf_buf_alloc(100, &b), 0);
    void *hdr;
    cr_assert_eq(zbuf_prepend_space(d, 20, &hdr), 0); /* a small block (header) */
    zbuf_t *h;
    cr_assert_eq(zbuf_create(&h), 0);
    cr_assert_eq(zbuf_prepend_space(h, 40, &hdr), 0);
    cr_assert_eq(zbuf_delete(h), 0); /* its block goes to the thread's cache */
    cr_assert_eq(zbuf_pool_create(64, 4, &p), 0);
    cr_assert_gt(my_allocs, 0);
    cr_assert_eq(zt_stats().allocs - st.allocs, my_allocs, "allocs %llu, allocator saw %zu",
                 (unsigned long long)(zt_stats().allocs - st.allocs), my_allocs);
    zbuf_pool_delete(p);
    zbuf_buf_unref(b);
    cr_assert_eq(zbuf_delete(d), 0);
    cr_assert_eq(zbuf_delete(z), 0);
    /* Restoring the default empties this thread's cache through ours. */
    cr_assert_eq(zbuf_set_allocator(NULL), 0);
    cr_assert_eq(blocks_live(), 0, "%zu blocks never came back to their allocator",
                 blocks_live());
    cr_assert_eq(my_bad_frees, 0, "a free got the wrong size or a foreign block");
}

/* Headers made by zbuf_prepend_space() are small heap buffers that a
 * per-thread cache recycles: once warm, a packet's header costs no
 * allocator call, and the live counters still follow every buffer. */
Test(stats, header_buffers_are_recycled_without_the_allocator)
{
    zbuf_t *z;
    void *hdr;

    for (int warm = 0; warm < 2; warm++) {
        cr_assert_eq(zbuf_create(&z), 0);
        cr_assert_eq(zbuf_prepend_space(z, 54, &hdr), 0);
        cr_assert_eq(zbuf_delete(z), 0);
    }
    zbuf_stats_t st = zt_stats();
    for (int i = 0; i < 1000; i++) {
        cr_assert_eq(zbuf_create(&z), 0);
        cr_assert_eq(zbuf_prepend_space(z, 54, &hdr), 0);
        memset(hdr, i, 54);
        cr_assert_eq(zt_stats().live_bufs, st.live_bufs + 1);
        cr_assert_eq(zbuf_delete(z), 0);
    }
    zbuf_stats_t now = zt_stats();
    cr_assert_eq(now.live_bufs, st.live_bufs);
    cr_assert_eq(now.allocs, st.allocs, "%llu allocator calls for recycled headers",
                 (unsigned long long)(now.allocs - st.allocs));
}

static void *drop_on_thread(void *arg)
{
    cr_assert_eq(zbuf_delete(arg), 0); /* the block lands in this thread's cache */
    return NULL;
}

/* A header made on one thread and released on another goes to the second
 * thread's cache, which gives it back to the allocator when that thread
 * exits: nothing leaks, with the counting allocator's sized frees checked. */
Test(stats, header_buffers_released_on_another_thread_go_back_once)
{
    zbuf_allocator_t a = {counting_alloc, counting_free, NULL};
    zbuf_t *z;
    void *hdr;
    pthread_t t;

    cr_assert_eq(zbuf_set_allocator(&a), 0);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_prepend_space(z, 20, &hdr), 0);
    memset(hdr, 7, 20);
    cr_assert_eq(pthread_create(&t, NULL, drop_on_thread, z), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(zbuf_set_allocator(NULL), 0);
    cr_assert_eq(blocks_live(), 0, "%zu blocks never came back to their allocator",
                 blocks_live());
    cr_assert_eq(my_bad_frees, 0, "a free got the wrong size or a foreign block");
}

/* --------------------------------------------------------------- threads */

struct work {
    zbuf_t *keep; /* a zbuf the thread leaves alive for the main thread */
    size_t copied;
};

static void *copy_on_thread(void *arg)
{
    struct work *w = arg;
    uint8_t buf[1000];
    zbuf_t *z;

    memset(buf, 1, sizeof buf);
    for (int i = 0; i < 10; i++) {
        cr_assert_eq(zbuf_create(&z), 0);
        cr_assert_eq(zbuf_append_copy(z, buf, sizeof buf), 0);
        zt_check(z);
        cr_assert_eq(zbuf_delete(z), 0);
        w->copied += sizeof buf;
    }
    cr_assert_eq(zbuf_create(&w->keep), 0);
    cr_assert_eq(zbuf_append_copy(w->keep, buf, 10), 0);
    zt_check(w->keep);
    w->copied += 10;
    return NULL;
}

Test(stats, other_threads_are_added_up_even_after_they_exit)
{
    struct work w[2] = {{0}, {0}};
    pthread_t t[2];
    zbuf_stats_t st = zt_stats();

    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, copy_on_thread, &w[i]), 0);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_join(t[i], NULL), 0);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied + w[0].copied + w[1].copied);
    cr_assert_eq(zt_stats().live_zbufs, st.live_zbufs + 2);
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs + 2);
    /* Deleting here balances counts made there. */
    cr_assert_eq(zbuf_delete(w[0].keep), 0);
    cr_assert_eq(zbuf_delete(w[1].keep), 0);
    cr_assert_eq(zt_stats().live_zbufs, st.live_zbufs);
    cr_assert_eq(zt_stats().live_segs, st.live_segs);
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs);
}
