/* SPDX-License-Identifier: MIT */
/*
 * File segments (zbuf_buf_wrap_file): sendfile() for them, gather writes for
 * the memory around them, in order, without a user-space copy.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zbuf/sock.h>

#include "sock_test_util.h"
#include "support.h"

ZT_SUITE(file);

/* A temporary file whose byte i is st_pat(i). */
static int pattern_file(size_t len)
{
    char path[] = "/tmp/zbuf-sock-test-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    unlink(path);
    uint8_t *buf = malloc(65536);
    for (size_t off = 0; off < len; off += 65536) {
        size_t n = len - off < 65536 ? len - off : 65536;
        st_fill(buf, n, off);
        cr_assert_eq(pwrite(fd, buf, n, (off_t)off), (ssize_t)n);
    }
    free(buf);
    return fd;
}

static void count_file_release(void *data, size_t size, void *arg)
{
    (void)size;
    cr_assert_null(data, "a file buffer has no address");
    atomic_fetch_add((atomic_int *)arg, 1);
}

/* Append stream bytes [off, off+len) of the pattern: from memory (a copy
 * in an enrolled buffer) or as a file segment of fd. */
static void add_mem(zbuf_t *z, uint64_t off, size_t len, atomic_int *count)
{
    zbuf_t *m = st_pattern_zbuf(len, off, len, count);
    cr_assert_eq(zbuf_append(z, m), 0);
}

static void add_file(zbuf_t *z, int fd, uint64_t off, size_t len, atomic_int *count)
{
    zbuf_buf_t *b;
    cr_assert_eq(zbuf_buf_wrap_file(fd, (off_t)off, len, count_file_release, count, &b), 0);
    cr_assert_eq(zbuf_append_ref(z, b, 0, len), 0);
    zbuf_buf_unref(b);
}

Test(file, file_segments_interleave_with_memory_in_order)
{
    int ffd = pattern_file(8 << 20);
    int a, b;
    st_tcp_pair(&a, &b);
    atomic_int mem_rel = 0, file_rel = 0;
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    uint64_t off = 0;
    add_mem(z, off, 1000, &mem_rel), off += 1000;
    add_file(z, ffd, off, 1 << 20, &file_rel), off += 1 << 20;
    for (int i = 0; i < 3; i++)
        add_mem(z, off, 1700, &mem_rel), off += 1700;
    add_file(z, ffd, off, 2 << 20, &file_rel), off += 2 << 20;
    add_file(z, ffd, off, 333, &file_rel), off += 333; /* two file segments in a row */
    add_mem(z, off, 10, &mem_rel), off += 10;
    zt_check(z);

    struct st_reader r = { 0 };
    st_reader_start(&r, b, 65536, 0);
    zbuf_stats_t s0, s1;
    zbuf_stats_get(&s0);
    cr_assert_eq(zbuf_sock_send_fd(a, z, 0), (ssize_t)off);
    zbuf_stats_get(&s1);
    cr_assert_eq(s1.bytes_copied, s0.bytes_copied, "sendfile copies nothing in user space");
    cr_assert_eq(atomic_load(&mem_rel), 5);
    cr_assert_eq(atomic_load(&file_rel), 3, "each file buffer released once, when sent");
    shutdown(a, SHUT_WR);
    st_reader_join(&r);
    cr_assert_eq(r.got, off);
    cr_assert_eq(r.bad_at, UINT64_MAX, "byte %llu differs", (unsigned long long)r.bad_at);
    zbuf_delete(z);
    close(a);
    close(b);
    close(ffd);
}

static int file_events, file_events_zc;
static void on_event(zbuf_sock_t *s, const zbuf_sock_event_t *ev, void *arg)
{
    (void)s;
    (void)arg;
    if (ev->type == ZBUF_SOCK_RELEASED && ev->zerocopy && !ev->copied)
        file_events_zc++;
    file_events++;
}

Test(file, a_handle_forced_to_sendfile_reports_file_bytes_uncopied)
{
    int ffd = pattern_file(9 << 20);
    int a, b;
    st_tcp_pair(&a, &b);
    zbuf_sock_opts_t o;
    zbuf_sock_opts_init(&o);
    o.flags = ZBUF_SOCK_FILE_SENDFILE;
    o.on_event = on_event;
    zbuf_sock_t *s;
    cr_assert_eq(zbuf_sock_open(a, &o, &s), 0);
    atomic_int rel = 0;
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    add_mem(z, 0, 100, &rel);
    add_file(z, ffd, 100, (9 << 20) - 100, &rel);
    struct st_reader r = { 0 };
    st_reader_start(&r, b, 65536, 0);
    cr_assert_eq(zbuf_sock_send(s, z, 0), 9 << 20);
    zbuf_sock_stats_t st;
    zbuf_sock_get_stats(s, &st);
    cr_assert_eq(st.file_bytes, (9 << 20) - 100);
    cr_assert_eq(st.bytes, 9 << 20);
    cr_assert_geq(file_events_zc, 3, "a 9 MiB file segment goes in calls of at most 4 MiB");
    cr_assert_eq(file_events % 2, 0, "events come in pairs");
    cr_assert_eq(zbuf_sock_close(s, 1000), 0);
    st_reader_join(&r);
    cr_assert_eq(r.got, 9 << 20);
    cr_assert_eq(r.bad_at, UINT64_MAX);
    zbuf_delete(z);
    close(b);
    close(ffd);
}

Test(file, nonblocking_partial_file_send_keeps_the_rest)
{
    int ffd = pattern_file(4 << 20);
    int a, b;
    st_tcp_pair(&a, &b);
    st_bufsizes(a, 8192, 0);
    st_nonblock(a, true);
    atomic_int rel = 0;
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    add_file(z, ffd, 0, 4 << 20, &rel);
    ssize_t n = zbuf_sock_send_fd(a, z, 0);
    cr_assert(n > 0 && n < (4 << 20), "partial send expected, got %zd", n);
    cr_assert_eq(zbuf_length(z), (size_t)(4 << 20) - (size_t)n);
    cr_assert_eq(atomic_load(&rel), 0, "the file buffer still has bytes to send");
    struct st_reader r = { 0 };
    st_reader_start(&r, b, 65536, 0);
    uint64_t total = (uint64_t)n;
    int64_t t0 = st_now_ms();
    while (zbuf_length(z) > 0 && st_now_ms() - t0 < 20000) {
        n = zbuf_sock_send_fd(a, z, 0);
        if (n == -EAGAIN) {
            struct pollfd p = { .fd = a, .events = POLLOUT };
            poll(&p, 1, 100);
            continue;
        }
        cr_assert(n > 0, "%s", zbuf_strerror((int)n));
        total += (uint64_t)n;
    }
    cr_assert_eq(total, 4 << 20);
    cr_assert_eq(atomic_load(&rel), 1);
    shutdown(a, SHUT_WR);
    st_reader_join(&r);
    cr_assert_eq(r.got, 4 << 20);
    cr_assert_eq(r.bad_at, UINT64_MAX);
    zbuf_delete(z);
    close(a);
    close(b);
    close(ffd);
}

/* Partial writes that stop inside memory runs and inside file segments in
 * turn: each call starts at whatever the last one left in front (memory
 * or file), the bytes arrive in order, and every buffer is released once,
 * when its last byte has gone. */
Test(file, nonblocking_partial_sends_alternate_between_memory_and_file)
{
    int ffd = pattern_file(4 << 20);
    int a, b;
    st_tcp_pair(&a, &b);
    st_bufsizes(a, 8192, 0);
    st_nonblock(a, true);
    atomic_int mem_rel = 0, file_rel = 0;
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    uint64_t off = 0;
    int nmem = 0, nfile = 0;
    for (int i = 0; i < 6; i++) {
        add_mem(z, off, 1 + 9000 * (size_t)i, &mem_rel), off += 1 + 9000 * (uint64_t)i, nmem++;
        add_file(z, ffd, off, 50000 + 777 * (size_t)i, &file_rel);
        off += 50000 + 777 * (uint64_t)i, nfile++;
    }
    add_mem(z, off, 3, &mem_rel), off += 3, nmem++;
    zt_check(z);

    /* Nobody reads yet: the first call stops part way, the next takes nothing. */
    ssize_t n = zbuf_sock_send_fd(a, z, 0);
    cr_assert(n > 0 && (uint64_t)n < off, "partial send expected, got %zd", n);
    cr_assert_eq(zbuf_length(z), off - (uint64_t)n);
    cr_assert_eq(zbuf_sock_send_fd(a, z, 0), -EAGAIN);
    cr_assert_eq(zbuf_length(z), off - (uint64_t)n, "EAGAIN changes nothing");

    struct st_reader r = { 0 };
    st_reader_start(&r, b, 4096, 50);
    uint64_t total = (uint64_t)n;
    int calls = 1;
    int64_t t0 = st_now_ms();
    while (zbuf_length(z) > 0 && st_now_ms() - t0 < 30000) {
        n = zbuf_sock_send_fd(a, z, 0);
        if (n == -EAGAIN) {
            struct pollfd p = { .fd = a, .events = POLLOUT };
            poll(&p, 1, 100);
            continue;
        }
        cr_assert(n > 0, "%s", zbuf_strerror((int)n));
        calls++;
        total += (uint64_t)n;
        cr_assert_eq(zbuf_length(z), off - total, "the zbuf holds exactly what was not sent");
        cr_assert(atomic_load(&mem_rel) <= nmem && atomic_load(&file_rel) <= nfile);
    }
    cr_assert_eq(total, off);
    cr_assert_gt(calls, 2, "the small send buffer should have cut the zbuf several times");
    cr_assert_eq(atomic_load(&mem_rel), nmem, "every memory buffer released once");
    cr_assert_eq(atomic_load(&file_rel), nfile, "every file buffer released once");
    shutdown(a, SHUT_WR);
    st_reader_join(&r);
    cr_assert_eq(r.got, off);
    cr_assert_eq(r.bad_at, UINT64_MAX, "byte %llu differs", (unsigned long long)r.bad_at);
    zbuf_delete(z);
    cr_assert_eq(atomic_load(&mem_rel), nmem);
    cr_assert_eq(atomic_load(&file_rel), nfile);
    close(a);
    close(b);
    close(ffd);
}

Test(file, a_segment_past_the_end_of_its_file_fails_with_eio)
{
    int ffd = pattern_file(5000);
    int a, b;
    st_tcp_pair(&a, &b);
    atomic_int rel = 0;
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    add_file(z, ffd, 0, 8000, &rel); /* 3000 bytes more than the file has */
    ssize_t n = zbuf_sock_send_fd(a, z, 0);
    cr_assert_eq(n, -EIO);
    cr_assert_eq(zbuf_length(z), 3000, "what the file had was sent; the rest stays");
    zbuf_delete(z);
    cr_assert_eq(atomic_load(&rel), 1);
    char buf[5000];
    size_t got = 0;
    while (got < 5000) {
        ssize_t k = read(b, buf + got, 5000 - got);
        cr_assert(k > 0);
        got += (size_t)k;
    }
    cr_assert_eq(st_mismatch(buf, 5000, 0), (size_t)-1);
    close(a);
    close(b);
    close(ffd);
}

Test(file, a_datagram_with_a_file_segment_is_read_into_a_counted_bounce)
{
    int ffd = pattern_file(10000);
    int a, b;
    st_udp_pair(&a, &b, true, NULL);
    atomic_int rel = 0;
    zbuf_t *z;
    cr_assert_eq(zbuf_create(&z), 0);
    add_mem(z, 0, 100, &rel);
    add_file(z, ffd, 100, 9000, &rel);
    zbuf_stats_t s0, s1;
    zbuf_stats_get(&s0);
    cr_assert_eq(zbuf_sock_sendto_fd(a, z, 0, NULL, 0), 9100);
    zbuf_stats_get(&s1);
    cr_assert_eq(s1.bytes_copied - s0.bytes_copied, 9100, "the bounce copy is counted");
    char buf[9200];
    cr_assert_eq(recv(b, buf, sizeof buf, 0), 9100);
    cr_assert_eq(st_mismatch(buf, 9100, 0), (size_t)-1);
    cr_assert_eq(atomic_load(&rel), 2);
    zbuf_delete(z);
    close(a);
    close(b);
    close(ffd);
}

Test(file, both_file_paths_carry_the_same_bytes)
{
    int ffd = pattern_file(20 << 20);
    unsigned ways[] = { ZBUF_SOCK_FILE_SENDFILE, ZBUF_SOCK_FILE_MMAP, 0 };
    for (int w = 0; w < 3; w++) {
        int a, b;
        st_tcp_pair(&a, &b);
        zbuf_sock_opts_t o;
        zbuf_sock_opts_init(&o);
        o.flags = ways[w];
        zbuf_sock_t *s;
        cr_assert_eq(zbuf_sock_open(a, &o, &s), 0);
        atomic_int rel = 0;
        zbuf_t *z;
        cr_assert_eq(zbuf_create(&z), 0);
        /* An unaligned start and an 8 MiB-crossing length exercise the
         * mapping windows. */
        add_mem(z, 0, 4099, &rel);
        add_file(z, ffd, 4099, (18 << 20) + 77, &rel);
        add_mem(z, 4099 + (18 << 20) + 77, 10, &rel);
        size_t len = zbuf_length(z);
        struct st_reader r = { 0 };
        st_reader_start(&r, b, 65536, 0);
        cr_assert_eq(zbuf_sock_send(s, z, 0), (ssize_t)len, "way %d", w);
        zbuf_sock_stats_t st;
        zbuf_sock_get_stats(s, &st);
        cr_assert_eq(st.file_bytes, (18 << 20) + 77);
        cr_assert_eq(atomic_load(&rel), 3);
        cr_assert_eq(zbuf_sock_close(s, 1000), 0);
        st_reader_join(&r);
        cr_assert_eq(r.got, len, "way %d", w);
        cr_assert_eq(r.bad_at, UINT64_MAX, "way %d: byte %llu differs", w,
                     (unsigned long long)r.bad_at);
        zbuf_delete(z);
        close(b);
    }
    close(ffd);
}
