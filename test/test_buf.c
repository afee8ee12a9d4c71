/* SPDX-License-Identifier: MIT */
/*
 * Data buffers: library-allocated (zbuf_buf_alloc), enrolled caller memory
 * (zbuf_buf_wrap), file ranges (zbuf_buf_wrap_file), their reference counts,
 * writability, and when and where release callbacks run.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fixture.h"
#include "support.h"

ZT_SUITE(buf);

/* What a release callback received, and on which thread. */
struct seen {
    void *data;
    size_t size;
    int calls;
    pthread_t thread;
};

static void record_release(void *data, size_t size, void *arg)
{
    struct seen *s = arg;
    s->data = data;
    s->size = size;
    s->thread = pthread_self();
    s->calls++;
}

/* An unlinked temporary file holding "0123456789abcdefghij". */
static int temp_file(void)
{
    char path[] = "/tmp/zbuf-buf-XXXXXX";
    int fd = mkstemp(path);

    cr_assert_geq(fd, 0);
    unlink(path);
    cr_assert_eq(write(fd, "0123456789abcdefghij", 20), 20);
    return fd;
}

/* ---------------------------------------------------------------- alloc */

Test(buf, alloc_gives_a_private_writable_buffer)
{
    zbuf_buf_t *b = NULL;
    zbuf_stats_t st = zt_stats();
    int fd = 7;
    off_t off = 9;

    cr_assert_eq(zbuf_buf_alloc(300, &b), 0);
    cr_assert_not_null(b);
    cr_assert_not_null(zbuf_buf_data(b));
    cr_assert_eq(zbuf_buf_size(b), 300);
    cr_assert_eq(zbuf_buf_refs(b), 1);
    cr_assert(zbuf_buf_writable(b));
    cr_assert_not(zbuf_buf_file(b, &fd, &off));
    cr_assert_eq(fd, 7);
    cr_assert_eq(off, 9);
    memset(zbuf_buf_data(b), 0xab, 300);
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs + 1);
    zbuf_buf_unref(b);
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs);
}

Test(buf, alloc_data_is_aligned_for_any_type)
{
    for (size_t size = 1; size < 70; size += 3) {
        zbuf_buf_t *b;
        cr_assert_eq(zbuf_buf_alloc(size, &b), 0);
        cr_assert_eq((uintptr_t)zbuf_buf_data(b) % _Alignof(max_align_t), 0, "size %zu", size);
        zbuf_buf_unref(b);
    }
}

Test(buf, alloc_rejects_bad_arguments)
{
    zbuf_buf_t *b = NULL;
    zbuf_stats_t st = zt_stats();

    cr_assert_eq(zbuf_buf_alloc(0, &b), -EINVAL);
    cr_assert_eq(zbuf_buf_alloc(16, NULL), -EINVAL);
    /* No allocator can satisfy this; the size must not wrap around either. */
    cr_assert_eq(zbuf_buf_alloc(SIZE_MAX, &b), -ENOMEM);
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs);
}

Test(buf, a_second_reference_makes_it_shared)
{
    zbuf_buf_t *b;

    cr_assert_eq(zbuf_buf_alloc(8, &b), 0);
    cr_assert_eq(zbuf_buf_ref(b), b);
    cr_assert_eq(zbuf_buf_refs(b), 2);
    cr_assert_not(zbuf_buf_writable(b));
    zbuf_buf_unref(b);
    cr_assert_eq(zbuf_buf_refs(b), 1);
    cr_assert(zbuf_buf_writable(b));
    zbuf_buf_unref(b);
}

Test(buf, unref_null_is_a_noop)
{
    zbuf_stats_t st = zt_stats();

    zbuf_buf_unref(NULL);
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs);
}

/* ----------------------------------------------------------------- wrap */

Test(buf, wrap_enrols_without_copying_and_releases_once)
{
    static uint8_t area[50];
    struct seen seen = {0};
    zbuf_buf_t *b = NULL;
    zbuf_stats_t st = zt_stats();

    cr_assert_eq(zbuf_buf_wrap(area, 50, record_release, &seen, &b), 0);
    cr_assert_eq(zbuf_buf_data(b), area);
    cr_assert_eq(zbuf_buf_size(b), 50);
    cr_assert_eq(zbuf_buf_refs(b), 1);
    cr_assert_not(zbuf_buf_writable(b), "enrolled memory is read-only to the library");
    cr_assert_not(zbuf_buf_file(b, NULL, NULL));
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied);
    zbuf_buf_ref(b);
    zbuf_buf_unref(b);
    cr_assert_eq(seen.calls, 0);
    zbuf_buf_unref(b);
    cr_assert_eq(seen.calls, 1);
    cr_assert_eq(seen.data, area);
    cr_assert_eq(seen.size, 50);
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs);
}

Test(buf, wrap_with_null_callback)
{
    static uint8_t area[4];
    zbuf_buf_t *b;
    zbuf_stats_t st = zt_stats();

    cr_assert_eq(zbuf_buf_wrap(area, 4, NULL, NULL, &b), 0);
    zbuf_buf_unref(b);
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs);
}

Test(buf, wrap_rejects_bad_arguments_without_calling_back)
{
    static uint8_t area[4];
    zbuf_buf_t *b;
    int rel = 0;
    zbuf_stats_t st = zt_stats();

    cr_assert_eq(zbuf_buf_wrap(NULL, 4, zt_count_release, &rel, &b), -EINVAL);
    cr_assert_eq(zbuf_buf_wrap(area, 0, zt_count_release, &rel, &b), -EINVAL);
    cr_assert_eq(zbuf_buf_wrap(area, 4, zt_count_release, &rel, NULL), -EINVAL);
    cr_assert_eq(rel, 0);
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs);
}

Test(buf, segments_each_hold_a_reference)
{
    static uint8_t area[30];
    zbuf_buf_t *b;
    zbuf_t *z;
    int rel = 0;

    cr_assert_eq(zbuf_buf_wrap(area, 30, zt_count_release, &rel, &b), 0);
    cr_assert_eq(zbuf_create(&z), 0);
    /* Ranges that do not continue each other: three segments (a range that
     * does would grow the previous segment instead). */
    cr_assert_eq(zbuf_append_ref(z, b, 0, 10), 0);
    zt_check(z);
    cr_assert_eq(zbuf_append_ref(z, b, 20, 10), 0);
    zt_check(z);
    cr_assert_eq(zbuf_append_ref(z, b, 10, 10), 0);
    zt_check(z);
    cr_assert_eq(zbuf_seg_count(z), 3);
    cr_assert_eq(zbuf_buf_refs(b), 4);
    cr_assert_eq(zbuf_cut(z, 5, 10, NULL), 0); /* two segments shrink, none goes */
    cr_assert_eq(zbuf_buf_refs(b), 4);
    cr_assert_eq(zbuf_cut(z, 0, 5, NULL), 0); /* the first goes */
    cr_assert_eq(zbuf_buf_refs(b), 3);
    zbuf_buf_unref(b);
    cr_assert_eq(rel, 0);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(rel, 1);
}

static void free_release(void *data, size_t size, void *arg)
{
    (void)size;
    free(data);
    ++*(int *)arg;
}

Test(buf, callback_that_frees_runs_after_the_last_use)
{
    zbuf_t *z, *d;
    uint8_t *heap = malloc(64);
    int rel = 0;
    uint8_t out[8];

    cr_assert_not_null(heap);
    memset(heap, 3, 64);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_buf(z, heap, 64, free_release, &rel), 0);
    zt_check(z);
    cr_assert_eq(zbuf_dup(z, 8, 8, &d), 0);
    zt_check(z);
    zt_check(d);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(rel, 0);
    cr_assert_eq(zbuf_copyout(d, 0, out, 8), 8); /* ASan would see a use after free */
    cr_assert_eq(out[7], 3);
    cr_assert_eq(zbuf_delete(d), 0);
    cr_assert_eq(rel, 1);
}

/* A release callback that deletes another zbuf (allowed: not the zbuf whose
 * operation is running). */
struct chain {
    zbuf_t *other;
    int calls;
};

static void delete_other(void *data, size_t size, void *arg)
{
    struct chain *c = arg;
    (void)data;
    (void)size;
    c->calls++;
    cr_assert_eq(zbuf_delete(c->other), 0);
}

Test(buf, callback_may_use_libzbuf_on_other_zbufs)
{
    static uint8_t a1[8], a2[8];
    zbuf_t *z, *other;
    struct chain ch = {0};
    int rel2 = 0;

    cr_assert_eq(zbuf_create(&other), 0);
    cr_assert_eq(zbuf_append_buf(other, a2, 8, zt_count_release, &rel2), 0);
    zt_check(other);
    ch.other = other;
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_buf(z, a1, 8, delete_other, &ch), 0);
    zt_check(z);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(ch.calls, 1);
    cr_assert_eq(rel2, 1);
}

static void *delete_on_thread(void *arg)
{
    cr_assert_eq(zbuf_delete(arg), 0);
    return NULL;
}

Test(buf, callback_runs_on_the_thread_that_drops_the_last_reference)
{
    static uint8_t area[8];
    struct seen seen = {0};
    zbuf_t *z;
    pthread_t t;

    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_buf(z, area, 8, record_release, &seen), 0);
    zt_check(z);
    cr_assert_eq(pthread_create(&t, NULL, delete_on_thread, z), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(seen.calls, 1);
    cr_assert(pthread_equal(seen.thread, t));
}

/* ----------------------------------------------------------------- files */

Test(buf, wrap_file_describes_a_file_range)
{
    int fd = temp_file();
    zbuf_buf_t *b = NULL;
    struct seen seen = {0};
    int got_fd = -1;
    off_t got_off = -1;
    zbuf_stats_t st = zt_stats();

    cr_assert_eq(zbuf_buf_wrap_file(fd, 4, 12, record_release, &seen, &b), 0);
    cr_assert_null(zbuf_buf_data(b));
    cr_assert_eq(zbuf_buf_size(b), 12);
    cr_assert_eq(zbuf_buf_refs(b), 1);
    cr_assert_not(zbuf_buf_writable(b));
    cr_assert(zbuf_buf_file(b, &got_fd, &got_off));
    cr_assert_eq(got_fd, fd);
    cr_assert_eq(got_off, 4);
    cr_assert(zbuf_buf_file(b, NULL, NULL));
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs + 1);
    zbuf_buf_unref(b);
    cr_assert_eq(seen.calls, 1);
    cr_assert_null(seen.data);
    cr_assert_eq(seen.size, 12);
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs);
    close(fd);
}

Test(buf, wrap_file_rejects_bad_arguments)
{
    int fd = temp_file();
    zbuf_buf_t *b;
    int rel = 0;
    zbuf_stats_t st = zt_stats();

    cr_assert_eq(zbuf_buf_wrap_file(-1, 0, 4, zt_count_release, &rel, &b), -EINVAL);
    cr_assert_eq(zbuf_buf_wrap_file(fd, -1, 4, zt_count_release, &rel, &b), -EINVAL);
    cr_assert_eq(zbuf_buf_wrap_file(fd, 0, 0, zt_count_release, &rel, &b), -EINVAL);
    cr_assert_eq(zbuf_buf_wrap_file(fd, 0, 4, zt_count_release, &rel, NULL), -EINVAL);
    cr_assert_eq(rel, 0);
    cr_assert_eq(zt_stats().live_bufs, st.live_bufs);
    close(fd);
}

Test(buf, file_segments_are_read_by_copyout_and_counted)
{
    int fd = temp_file();
    zbuf_buf_t *b;
    zbuf_t *z;
    char out[16];
    zbuf_stats_t st;

    cr_assert_eq(zbuf_buf_wrap_file(fd, 10, 10, NULL, NULL, &b), 0); /* "abcdefghij" */
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_copy(z, "<", 1), 0);
    zt_check(z);
    cr_assert_eq(zbuf_append_ref(z, b, 2, 6), 0); /* "cdefgh" */
    cr_assert_eq(zbuf_append_copy(z, ">", 1), 0);
    zt_check(z);
    zbuf_buf_unref(b);
    zt_check(z);
    cr_assert_eq(zbuf_length(z), 8);
    st = zt_stats();
    cr_assert_eq(zbuf_copyout(z, 0, out, ZBUF_TO_END), 8);
    cr_assert_eq(memcmp(out, "<cdefgh>", 8), 0);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied + 8);
    cr_assert_eq(zbuf_copyout(z, 3, out, 2), 2);
    cr_assert_eq(memcmp(out, "ef", 2), 0);
    cr_assert_eq(zbuf_delete(z), 0);
    close(fd);
}

Test(buf, file_segment_survives_cut_split_and_dup)
{
    int fd = temp_file();
    zbuf_buf_t *b;
    zbuf_t *z, *t, *d;
    struct seen seen = {0};
    char out[8];

    cr_assert_eq(zbuf_buf_wrap_file(fd, 0, 20, record_release, &seen, &b), 0);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_ref(z, b, 0, 20), 0);
    zt_check(z);
    zbuf_buf_unref(b);
    cr_assert_eq(zbuf_cut(z, 2, 3, NULL), 0);  /* "01" "56789abcdefghij" */
    cr_assert_eq(zbuf_split(z, 10, &t), 0);    /* "0156789abc" | "defghij" */
    cr_assert_eq(zbuf_dup(t, 1, 3, &d), 0);    /* "efg" */
    zt_check(z);
    zt_check(t);
    zt_check(d);
    cr_assert_eq(zbuf_copyout(z, 0, out, 4), 4);
    cr_assert_eq(memcmp(out, "0156", 4), 0);
    cr_assert_eq(zbuf_copyout(d, 0, out, ZBUF_TO_END), 3);
    cr_assert_eq(memcmp(out, "efg", 3), 0);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(zbuf_delete(t), 0);
    cr_assert_eq(seen.calls, 0);
    cr_assert_eq(zbuf_delete(d), 0);
    cr_assert_eq(seen.calls, 1);
    close(fd);
}

static void close_fd(void *data, size_t size, void *arg)
{
    (void)data;
    (void)size;
    close(*(int *)arg);
    *(int *)arg = -1;
}

Test(buf, callback_is_the_place_to_close_the_file)
{
    int fd = temp_file();
    int keep = fd;
    zbuf_buf_t *b;
    zbuf_t *z;

    cr_assert_eq(zbuf_buf_wrap_file(fd, 0, 20, close_fd, &keep, &b), 0);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_ref(z, b, 0, 20), 0);
    zt_check(z);
    zbuf_buf_unref(b);
    cr_assert_neq(fcntl(fd, F_GETFD), -1, "closed too early");
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(keep, -1);
    cr_assert_eq(fcntl(fd, F_GETFD), -1, "still open after the last reference");
}

Test(buf, unreadable_file_range_is_eio_and_changes_nothing)
{
    int fd = temp_file();
    zbuf_buf_t *b;
    zbuf_t *z;
    char out[40];
    zbuf_stats_t st;

    /* 30 bytes claimed from offset 10 of a 20-byte file. */
    cr_assert_eq(zbuf_buf_wrap_file(fd, 10, 30, NULL, NULL, &b), 0);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_ref(z, b, 0, 30), 0);
    zt_check(z);
    zbuf_buf_unref(b);
    cr_assert_eq(zbuf_copyout(z, 0, out, 5), 5, "the readable part reads");
    st = zt_stats();
    cr_assert_eq(zbuf_copyout(z, 0, out, 30), -EIO);
    cr_assert_eq(zbuf_copyout(z, 25, out, 2), -EIO);
    cr_assert_eq(zt_stats().bytes_copied, st.bytes_copied, "a failed read counted bytes");
    cr_assert_eq(zbuf_length(z), 30);
    cr_assert_eq(zbuf_seg_count(z), 1);
    zt_check(z);
    cr_assert_eq(zbuf_delete(z), 0);
    close(fd);
}

Test(buf, file_range_past_the_buffer_is_erange)
{
    int fd = temp_file();
    zbuf_buf_t *b;
    zbuf_t *z;

    cr_assert_eq(zbuf_buf_wrap_file(fd, 0, 20, NULL, NULL, &b), 0);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_insert_ref(z, 0, b, 15, 6, NULL), -ERANGE);
    cr_assert_eq(zbuf_length(z), 0);
    cr_assert_eq(zbuf_buf_refs(b), 1);
    zbuf_buf_unref(b);
    cr_assert_eq(zbuf_delete(z), 0);
    close(fd);
}

/* Zero every byte of @p z that the library reports as writable. */
static void scribble_writable(zbuf_t *z)
{
    size_t pos = 0;

    for (zbuf_seg_t *s = zbuf_seg_first(z); s != NULL; s = zbuf_seg_next(z, s)) {
        size_t n = zbuf_seg_length(z, s);
        if (zbuf_writable(z, pos, n))
            memset(zbuf_seg_data(z, s), 0, n);
        pos += n;
    }
}

Test(buf, enrolled_memory_is_never_written_by_any_operation)
{
    static uint8_t area[256];
    zbuf_buf_t *b;
    zbuf_t *z, *d, *t;
    void *data;
    struct iovec iov[2];
    int cnt = 0, rel = 0;
    const void *out;
    uint8_t scratch[64];
    zbuf_cursor_t c;
    uint32_t v;

    memset(area, 0xa5, sizeof area);
    cr_assert_eq(zbuf_buf_wrap(area, sizeof area, zt_count_release, &rel, &b), 0);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_ref(z, b, 64, 128), 0); /* enrolled bytes on both sides */
    zbuf_buf_unref(b);
    cr_assert_eq(zbuf_headroom(z), 0);
    cr_assert_eq(zbuf_tailroom(z), 0);

    cr_assert_eq(zbuf_prepend_space(z, 8, &data), 0);
    memset(data, 0, 8);
    cr_assert_eq(zbuf_append_space(z, 8, &data), 0);
    memset(data, 0, 8);
    cr_assert_eq(zbuf_reserve(z, 32, iov, &cnt), 0);
    for (int k = 0; k < cnt; k++)
        memset(iov[k].iov_base, 0, iov[k].iov_len);
    cr_assert_eq(zbuf_commit(z, 32), 0);
    cr_assert_eq(zbuf_insert_copy(z, 40, "copy", 4, NULL), 0);
    zt_check(z);
    cr_assert_eq(zbuf_cut(z, 20, 5, NULL), 0);
    zt_check(z);
    cr_assert_eq(zbuf_dup(z, 10, 50, &d), 0);
    zt_check(z);
    zt_check(d);
    cr_assert_eq(zbuf_split(d, 25, &t), 0);
    zt_check(d);
    zt_check(t);
    cr_assert_eq(zbuf_append(z, t), 0);
    zt_check(z);
    cr_assert_eq(zbuf_peek(z, 30, 8, scratch, &out), 0);
    cr_assert_eq(zbuf_pullup(z, 12, 20, &data), 0); /* inside the enrolled segment */
    cr_assert_eq(zbuf_pullup(z, 4, 20, &data), 0);  /* across: a private copy */
    memset(data, 0, 20);
    cr_assert_eq(zbuf_cursor_init(&c, z, 0), 0);
    while (zbuf_cursor_read_le32(&c, &v) == 0)
        ;
    zt_check(z);
    zt_check(d);
    scribble_writable(z);
    scribble_writable(d);
    for (size_t i = 0; i < sizeof area; i++)
        cr_assert_eq(area[i], 0xa5, "enrolled byte %zu was written", i);

    cr_assert_eq(zbuf_unshare(z, 0, ZBUF_TO_END), 0);
    zt_check(z);
    scribble_writable(z);
    for (size_t i = 0; i < sizeof area; i++)
        cr_assert_eq(area[i], 0xa5, "enrolled byte %zu was written after unshare", i);
    cr_assert_eq(rel, 0, "d still refers to the enrolled memory");
    cr_assert_eq(zbuf_delete(d), 0);
    cr_assert_eq(rel, 1, "z holds only private copies now");
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(rel, 1);
}

/* ------------------------------------------------ two user words, validity */

struct two_words {
    int calls;
    void *data, *arg2;
    size_t size;
};

static void release_two(void *data, size_t size, void *arg, void *arg2)
{
    struct two_words *t = arg;
    t->calls++;
    t->data = data;
    t->size = size;
    t->arg2 = arg2;
}

Test(buf, wrap2_passes_both_words_to_its_callback_once)
{
    static uint8_t area[40];
    struct two_words t = {0};
    zbuf_buf_t *b;
    zbuf_t *z;

    cr_assert_eq(zbuf_buf_wrap2(area, sizeof area, release_two, &t, (void *)&area[3], &b), 0);
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_ref(z, b, 0, 40), 0);
    zbuf_buf_unref(b);
    cr_assert_eq(t.calls, 0);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(t.calls, 1);
    cr_assert_eq(t.data, area);
    cr_assert_eq(t.size, sizeof area);
    cr_assert_eq(t.arg2, &area[3]);
}

Test(buf, insert_buf2_enrols_with_two_words_and_a_failure_enrols_nothing)
{
    static uint8_t area[16];
    struct two_words t = {0};
    zbuf_t *z;
    zbuf_seg_t *s = NULL;

    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_insert_buf2(z, 0, area, 16, release_two, &t, (void *)7, &s), 0);
    cr_assert_eq(zbuf_seg_data(z, s), area);
    cr_assert_eq(zbuf_insert_buf2(z, 17, area, 16, release_two, &t, NULL, NULL), -ERANGE);
    cr_assert_eq(zbuf_insert_buf2(z, 0, NULL, 16, release_two, &t, NULL, NULL), -EINVAL);
    cr_assert_eq(zbuf_insert_buf2(z, 0, area, 0, release_two, &t, NULL, NULL), -EINVAL);
    cr_assert_eq(zbuf_insert_buf2(NULL, 0, area, 16, release_two, &t, NULL, NULL), -EINVAL);
    cr_assert_eq(zbuf_length(z), 16);
    cr_assert_eq(zbuf_delete(z), 0);
    cr_assert_eq(t.calls, 1, "only the enrolled buffer is released");
    cr_assert_eq(t.arg2, (void *)7);
    cr_assert_eq(zbuf_buf_wrap2(NULL, 4, release_two, &t, NULL, &(zbuf_buf_t *){NULL}), -EINVAL);
    cr_assert_eq(zbuf_buf_wrap2(area, 0, release_two, &t, NULL, &(zbuf_buf_t *){NULL}), -EINVAL);
    cr_assert_eq(zbuf_buf_wrap2(area, 4, release_two, &t, NULL, NULL), -EINVAL);
    cr_assert_eq(t.calls, 1);
}

Test(buf, valid_checks_handles_in_constant_time)
{
    zbuf_t *a, *b;
    cr_assert_eq(zbuf_create(&a), 0);
    cr_assert_eq(zbuf_create(&b), 0);
    cr_assert_eq(zbuf_append_copy(a, "abcd", 4), 0);
    cr_assert_eq(zbuf_append_copy(b, "efgh", 4), 0);
    zbuf_seg_t *sa = zbuf_seg_first(a), *sb = zbuf_seg_first(b);
    cr_assert(zbuf_valid(a) && zbuf_valid(b));
    cr_assert(!zbuf_valid(NULL));
    cr_assert(zbuf_seg_valid(a, sa) && zbuf_seg_valid(b, sb));
    cr_assert(!zbuf_seg_valid(a, sb), "a segment of another zbuf");
    cr_assert(!zbuf_seg_valid(a, NULL) && !zbuf_seg_valid(NULL, sa));
    /* A segment moved to another zbuf belongs to it now. */
    cr_assert_eq(zbuf_insert(a, ZBUF_OFF_END, b, NULL), 0);
    cr_assert(zbuf_seg_valid(a, sb));
    /* Removed segments and deleted zbufs read invalid while their memory is
     * not reused (nothing is allocated in between here). */
    cr_assert_eq(zbuf_cut(a, 0, 4, NULL), 0);
    cr_assert(!zbuf_seg_valid(a, sa));
    cr_assert_eq(zbuf_delete(a), 0);
    cr_assert(!zbuf_valid(a));
    cr_assert(!zbuf_seg_valid(a, sb));
}
