/* SPDX-License-Identifier: MIT */
/*
 * The framing codec on a real loop: frames written with every possible
 * split point arrive whole, many frames of many sizes survive arbitrary
 * chunking, an echo round trip is byte-exact, and a malformed or oversized
 * length closes the connection cleanly.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "uvt.h"

UVT_SUITE(uv_frame);

/* The receiving end: feeds a decoder, checks every frame against the lens
 * it expects (payload of frame i is stream `i` of uvt_byte()). */
struct fpeer {
    zbuf_frame_decoder_t *dec;
    const size_t *lens;
    size_t nlens;
    size_t frames;
    int bad_frames;
    int proto_error;   /* the decoder's error, once the connection was closed */
    int read_errors;
    int eof;
    int closed;
};

static void check_frame(struct fpeer *f, zbuf_t *m)
{
    size_t i = f->frames++;
    if (i >= f->nlens || zbuf_length(m) != f->lens[i]) {
        f->bad_frames++;
        return;
    }
    zbuf_cursor_t c;
    cr_assert_eq(zbuf_cursor_init(&c, m, 0), 0);
    for (size_t j = 0; j < f->lens[i]; j++) {
        uint8_t b;
        cr_assert_eq(zbuf_cursor_read_u8(&c, &b), 0);
        if (b != uvt_byte((uint32_t)i, j)) {
            f->bad_frames++;
            return;
        }
    }
}

static void on_peer_closed(uv_handle_t *h)
{
    struct fpeer *f = h->data;
    f->closed++;
}

static void fpeer_read(zbuf_uv_stream_t *s, ssize_t status, zbuf_t *z)
{
    struct fpeer *f = s->handle.data;
    if (status < 0) {
        if (status == UV_EOF)
            f->eof++;
        else if (status != UV_ENOBUFS)
            f->read_errors++;
        return;
    }
    int rc = zbuf_frame_decoder_feed(f->dec, z);
    cr_assert_eq(rc, 0, "feed: %d", rc);
    zbuf_t *m;
    while ((rc = zbuf_frame_decoder_next(f->dec, &m)) == 0) {
        zt_check(m);
        check_frame(f, m);
        zbuf_delete(m);
    }
    if (rc != -EAGAIN) {
        /* Protocol error: close the connection, as a server would. */
        f->proto_error = rc;
        zbuf_uv_close(s, on_peer_closed);
    }
}

static void fpeer_start(struct fpeer *f, zbuf_uv_stream_t *s, zbuf_pool_t *pool,
                        const zbuf_frame_opts_t *o, const size_t *lens, size_t n)
{
    memset(f, 0, sizeof(*f));
    f->lens = lens;
    f->nlens = n;
    cr_assert_eq(zbuf_frame_decoder_create(o, &f->dec), 0);
    s->handle.data = f;
    cr_assert_eq(zbuf_uv_read_start(s, pool, fpeer_read), 0);
}

/* The frames lens[0..n-1], each payload stream i, as one zbuf. */
static zbuf_t *frames(const zbuf_frame_opts_t *o, const size_t *lens, size_t n)
{
    zbuf_t *all;
    cr_assert_eq(zbuf_create(&all), 0);
    for (size_t i = 0; i < n; i++) {
        zbuf_t *m;
        if (lens[i] == 0) {
            cr_assert_eq(zbuf_create(&m), 0);
        } else {
            const size_t sizes[] = {lens[i] / 3 + 1, 4096};
            m = uvt_make(lens[i], (uint32_t)i, 0, sizes, 2, NULL);
        }
        cr_assert_eq(zbuf_frame_encode(o, m), 0);
        cr_assert_eq(zbuf_append(all, m), 0);
    }
    return all;
}

struct until_buffered {
    const struct fpeer *f;
    size_t bytes, frames;
};

static bool not_yet(void *arg)
{
    const struct until_buffered *u = arg;
    return zbuf_frame_decoder_buffered(u->f->dec) != u->bytes || u->f->frames != u->frames;
}

Test(uv_frame, every_split_point_on_the_wire_gives_whole_frames)
{
    const size_t lens[] = {0, 3, 200, 1};
    const size_t n = sizeof(lens) / sizeof(lens[0]);
    const zbuf_frame_len_t fk[] = {ZBUF_FRAME_BE32, ZBUF_FRAME_VARINT};
    const enum uvt_kind kinds[] = {UVT_TCP, UVT_UNIX};
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(256, 16, &pool), 0);
    for (size_t k = 0; k < 2; k++) {
        zbuf_frame_opts_t o;
        zbuf_frame_opts_default(&o);
        o.len_kind = fk[k];
        zbuf_t *all = frames(&o, lens, n);
        size_t total = zbuf_length(all);
        /* Where each frame ends on the wire. */
        size_t ends[4], e = 0;
        for (size_t i = 0; i < n; i++)
            ends[i] = e += zbuf_frame_header_size(&o, lens[i]) + lens[i];
        for (size_t kind = 0; kind < 2; kind++) {
            struct uvt_pair p;
            uvt_pair_open(&p, kinds[kind]);
            struct fpeer f;
            fpeer_start(&f, &p.b, pool, &o, lens, n);
            size_t expect_frames = 0;
            for (size_t cut = 1; cut < total; cut++) {
                zbuf_t *head;
                /* Two writes: bytes [0, cut) then [cut, total); the first
                 * is read before the second is written. */
                zbuf_t *copy;
                cr_assert_eq(zbuf_dup(all, 0, ZBUF_TO_END, &copy), 0);
                cr_assert_eq(zbuf_split_head(copy, cut, &head), 0);
                cr_assert_eq(zbuf_uv_write(&p.a.stream, head, NULL, NULL), 0);
                size_t done = 0;
                while (done < n && ends[done] <= cut)
                    done++;
                size_t start_frames = f.frames;
                struct until_buffered u = {&f, cut - (done ? ends[done - 1] : 0),
                                           start_frames + done};
                cr_assert(uvt_run_while(not_yet, &u, 5000),
                          "split at %zu: %zu frames, %zu buffered", cut, f.frames - start_frames,
                          zbuf_frame_decoder_buffered(f.dec));
                cr_assert_eq(zbuf_uv_write(&p.a.stream, copy, NULL, NULL), 0);
                expect_frames += n;
                struct until_buffered all_in = {&f, 0, expect_frames};
                cr_assert(uvt_run_while(not_yet, &all_in, 5000), "split at %zu", cut);
                cr_assert_eq(f.bad_frames, 0, "split at %zu", cut);
                /* The checker expects frame i to be stream i: restart it. */
                f.frames = 0;
                expect_frames = 0;
            }
            cr_assert_eq(f.proto_error, 0);
            uvt_pair_close(&p);
            zbuf_frame_decoder_delete(f.dec);
        }
        zbuf_delete(all);
    }
    zbuf_pool_delete(pool);
}

Test(uv_frame, many_frames_survive_arbitrary_chunking)
{
    enum { N = 300 };
    static size_t lens[N];
    srand(7);
    for (size_t i = 0; i < N; i++)
        lens[i] = i % 10 == 0 ? (size_t)(rand() % 200000) : (size_t)(rand() % 2000);
    const enum uvt_kind kinds[] = {UVT_TCP, UVT_UNIX, UVT_PIPE};
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(16384, 64, &pool), 0);
    for (size_t kind = 0; kind < 3; kind++) {
        zbuf_frame_opts_t o;
        zbuf_frame_opts_default(&o);
        o.len_kind = kind == 1 ? ZBUF_FRAME_VARINT : ZBUF_FRAME_BE32;
        struct uvt_pair p;
        uvt_pair_open(&p, kinds[kind]);
        struct fpeer f;
        fpeer_start(&f, &p.b, pool, &o, lens, N);
        zbuf_t *all = frames(&o, lens, N);
        int writes = 0;
        while (zbuf_length(all) > 0) {
            size_t chunk = (size_t)(rand() % 70000) + 1;
            if (chunk > zbuf_length(all))
                chunk = zbuf_length(all);
            zbuf_t *head;
            cr_assert_eq(zbuf_split_head(all, chunk, &head), 0);
            cr_assert_eq(zbuf_uv_write(&p.a.stream, head, NULL, NULL), 0);
            writes++;
        }
        zbuf_delete(all);
        struct until_buffered u = {&f, 0, N};
        cr_assert(uvt_run_while(not_yet, &u, 20000), "%s: %zu of %d frames",
                  uvt_kind_name(kinds[kind]), f.frames, N);
        cr_assert_eq(f.bad_frames, 0);
        cr_assert_eq(f.proto_error, 0);
        cr_assert_gt(writes, 10);
        uvt_pair_close(&p);
        zbuf_frame_decoder_delete(f.dec);
    }
    zbuf_pool_delete(pool);
}

/* Echo: every frame received is sent back as it is (a new header on the
 * shared payload), and the client checks what comes back. */
struct echo_srv {
    zbuf_frame_decoder_t *dec;
    int writes, write_cbs;
};

static void echo_written(uv_stream_t *s, int status, void *arg)
{
    (void)s;
    cr_assert_eq(status, 0);
    ((struct echo_srv *)arg)->write_cbs++;
}

static void echo_read(zbuf_uv_stream_t *s, ssize_t status, zbuf_t *z)
{
    struct echo_srv *e = s->handle.data;
    if (status < 0)
        return;
    cr_assert_eq(zbuf_frame_decoder_feed(e->dec, z), 0);
    zbuf_t *m;
    while (zbuf_frame_decoder_next(e->dec, &m) == 0) {
        cr_assert_eq(zbuf_frame_encode(NULL, m), 0);
        cr_assert_eq(zbuf_uv_write(&s->stream, m, echo_written, e), 0);
        e->writes++;
    }
}

Test(uv_frame, an_echo_round_trip_is_byte_exact)
{
    const size_t lens[] = {1024, 0, 65536, 7, 1 << 20, 300000};
    const size_t n = sizeof(lens) / sizeof(lens[0]);
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(65536, 64, &pool), 0);
    struct uvt_pair p;
    uvt_pair_open(&p, UVT_TCP);
    struct echo_srv e = {0};
    cr_assert_eq(zbuf_frame_decoder_create(NULL, &e.dec), 0);
    p.b.handle.data = &e;
    cr_assert_eq(zbuf_uv_read_start(&p.b, pool, echo_read), 0);
    struct fpeer f;
    fpeer_start(&f, &p.a, pool, NULL, lens, n);
    cr_assert_eq(zbuf_uv_write(&p.a.stream, frames(NULL, lens, n), NULL, NULL), 0);
    struct until_buffered u = {&f, 0, n};
    cr_assert(uvt_run_while(not_yet, &u, 20000), "%zu of %zu frames came back", f.frames, n);
    cr_assert_eq(f.bad_frames, 0);
    uvt_run_for(10);
    cr_assert_eq(e.writes, (int)n);
    cr_assert_eq(e.write_cbs, (int)n, "one callback per echo write");
    uvt_pair_close(&p);
    zbuf_frame_decoder_delete(e.dec);
    zbuf_frame_decoder_delete(f.dec);
    zbuf_pool_delete(pool);
}

static void rejecting_close(enum uvt_kind kind, const uint8_t *bad, size_t badlen, int expect)
{
    const size_t lens[] = {10};
    zbuf_frame_opts_t o;
    zbuf_frame_opts_default(&o);
    o.max_payload = 1000;
    o.len_kind = badlen == 4 ? ZBUF_FRAME_BE32 : ZBUF_FRAME_VARINT;
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(4096, 8, &pool), 0);
    struct uvt_pair p;
    uvt_pair_open(&p, kind);
    struct fpeer srv, cli;
    fpeer_start(&srv, &p.b, pool, &o, lens, 1);
    fpeer_start(&cli, &p.a, pool, &o, NULL, 0);
    zbuf_t *z = frames(&o, lens, 1);
    cr_assert_eq(zbuf_append_copy(z, bad, badlen), 0);
    cr_assert_eq(zbuf_append_copy(z, "trailing bytes never read", 25), 0);
    cr_assert_eq(zbuf_uv_write(&p.a.stream, z, NULL, NULL), 0);
    uvt_run_until(&srv.closed, 5000, "server closing the connection");
    cr_assert_eq(srv.frames, 1, "the good frame before the bad one is delivered");
    cr_assert_eq(srv.bad_frames, 0);
    cr_assert_eq(srv.proto_error, expect);
    /* The client sees the connection end. */
    bool ended = false;
    for (int i = 0; i < 500 && !ended; i++) {
        uvt_run_for(2);
        ended = cli.eof + cli.read_errors > 0;
    }
    cr_assert(ended, "%s: the client never saw the close", uvt_kind_name(kind));
    zbuf_uv_close(&p.a, NULL);
    uvt_run_for(5);
    zbuf_frame_decoder_delete(srv.dec);
    zbuf_frame_decoder_delete(cli.dec);
    zbuf_pool_delete(pool);
}

Test(uv_frame, an_oversized_length_closes_the_connection)
{
    static const uint8_t big[4] = {0x7f, 0xff, 0xff, 0xff};
    rejecting_close(UVT_TCP, big, 4, -EMSGSIZE);
    rejecting_close(UVT_UNIX, big, 4, -EMSGSIZE);
}

Test(uv_frame, a_malformed_length_closes_the_connection)
{
    static const uint8_t padded[3] = {0x85, 0x80, 0x00};
    rejecting_close(UVT_TCP, padded, 3, -EBADMSG);
    rejecting_close(UVT_UNIX, padded, 3, -EBADMSG);
}

/* ------------------------------------------ frames that can never fit */

/* Send a frame header announcing `payload` bytes, then `sent` of them. */
static void send_partial_frame(struct uvt_pair *p, size_t payload, size_t sent, uint32_t seed)
{
    zbuf_t *z;
    uint8_t hdr[4] = {(uint8_t)(payload >> 24), (uint8_t)(payload >> 16), (uint8_t)(payload >> 8),
                      (uint8_t)payload};
    cr_assert_eq(zbuf_create(&z), 0);
    cr_assert_eq(zbuf_append_copy(z, hdr, 4), 0);
    if (sent > 0) {
        const size_t sizes[] = {65536};
        cr_assert_eq(zbuf_append(z, uvt_make(sent, seed, 0, sizes, 1, NULL)), 0);
    }
    cr_assert_eq(zbuf_uv_write(&p->a.stream, z, NULL, NULL), 0);
}

static bool both_unsettled(void *arg)
{
    struct fpeer *f = arg;
    return f[0].closed == 0 || f[1].frames < f[1].nlens;
}

/* Issue 9, bug 2: with 4 x 64 KiB pool buffers and a 256 KiB frame, the
 * decoder used to hold every buffer waiting for the rest, the reader was
 * paused for good, and every other connection of the pool with it.  Now the
 * frame is refused (-EMSGSIZE, on that connection only) as soon as its
 * header shows it cannot fit, and the other connection reads on. */
Test(uv_frame, a_frame_larger_than_the_pool_is_refused_and_the_others_read_on)
{
    const size_t lens[] = {100, 70000, 5, 120000};
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(65536, 4, &pool), 0);
    struct uvt_pair big, small;
    struct fpeer f[2];
    uvt_pair_open(&big, UVT_TCP);
    uvt_pair_open(&small, UVT_UNIX);
    fpeer_start(&f[0], &big.b, pool, NULL, NULL, 0);
    fpeer_start(&f[1], &small.b, pool, NULL, lens, 4);
    send_partial_frame(&big, 256 * 1024, 256 * 1024, 7);
    cr_assert_eq(zbuf_uv_write(&small.a.stream, frames(NULL, lens, 4), NULL, NULL), 0);
    cr_assert(uvt_run_while(both_unsettled, f, 10000),
              "stalled: big connection %s, small one %zu of 4 frames",
              f[0].closed ? "closed" : "open", f[1].frames);
    cr_assert_eq(f[0].proto_error, -EMSGSIZE);
    cr_assert_eq(f[0].frames, 0);
    cr_assert_eq(f[1].bad_frames, 0);
    cr_assert_eq(f[1].proto_error, 0);
    zbuf_frame_decoder_delete(f[0].dec);
    uvt_run_for(10);
    cr_assert_eq(zbuf_pool_available(pool), 4, "the refused frame's buffers came back");
    zbuf_uv_close(&big.a, NULL);
    uvt_pair_close(&small);
    zbuf_frame_decoder_delete(f[1].dec);
    zbuf_pool_delete(pool);
}

static bool any_open(void *arg)
{
    struct fpeer *f = arg;
    for (int i = 0; i < 4; i++)
        if (f[i].closed == 0)
            return true;
    return f[4].frames < f[4].nlens;
}

/* Issue 9, bug 2, second case: four clients each send half of a 1 MiB frame
 * on a 4 MiB pool.  Each stream may hold 8 of the pool's 64 buffers: a
 * 1 MiB frame can never fit in that, so each of the four is refused at its
 * header, holding next to nothing, and a fifth client is served all along. */
Test(uv_frame, partial_frames_beyond_a_streams_limit_are_refused_one_by_one)
{
    const size_t lens[] = {1000, 200000, 3, 65536};
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(65536, 64, &pool), 0);
    struct uvt_pair p[5];
    struct fpeer f[5];
    for (int i = 0; i < 5; i++) {
        uvt_pair_open(&p[i], i % 2 ? UVT_UNIX : UVT_TCP);
        cr_assert_eq(zbuf_uv_read_set_limit(&p[i].b, 8), 0);
        fpeer_start(&f[i], &p[i].b, pool, NULL, i < 4 ? NULL : lens, i < 4 ? 0 : 4);
    }
    for (int i = 0; i < 4; i++)
        send_partial_frame(&p[i], 1 << 20, 1 << 19, 20 + (uint32_t)i);
    cr_assert_eq(zbuf_uv_write(&p[4].a.stream, frames(NULL, lens, 4), NULL, NULL), 0);
    cr_assert(uvt_run_while(any_open, f, 10000), "stalled: fifth client %zu of 4 frames",
              f[4].frames);
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(f[i].proto_error, -EMSGSIZE, "client %d: %d", i, f[i].proto_error);
        zbuf_frame_decoder_delete(f[i].dec);
        zbuf_uv_close(&p[i].a, NULL);
    }
    cr_assert_eq(f[4].bad_frames, 0);
    cr_assert_eq(f[4].proto_error, 0);
    uvt_pair_close(&p[4]);
    zbuf_frame_decoder_delete(f[4].dec);
    uvt_run_for(10);
    cr_assert_eq(zbuf_pool_available(pool), 64);
    zbuf_pool_delete(pool);
}

/* A frame that fits a stream's limit at best, but not as the bytes arrive:
 * the peer sends it in pieces a while apart, and each read leaves a tail
 * too small to lend while another buffer can be had (the adapter's minimum
 * room).  At its limit the stream fills its last buffer to the end, and
 * once that is full and the frame still short, the frame is refused
 * instead of waiting forever.  One more buffer and it arrives whole. */
static void piecewise_frame(size_t limit, int expect_frames, int expect_error)
{
    enum { PAYLOAD = 3 * 4096 - 4, PIECE = 3700 };
    const size_t lens[] = {PAYLOAD};
    zbuf_pool_t *pool;
    cr_assert_eq(zbuf_pool_create(4096, 16, &pool), 0);
    struct uvt_pair p;
    struct fpeer f;
    uvt_pair_open(&p, UVT_UNIX);
    cr_assert_eq(zbuf_uv_read_set_limit(&p.b, limit), 0);
    fpeer_start(&f, &p.b, pool, NULL, lens, 1);
    send_partial_frame(&p, PAYLOAD, 0, 0);
    for (size_t off = 0; off < PAYLOAD && f.closed == 0; off += PIECE) {
        size_t n = PAYLOAD - off < PIECE ? PAYLOAD - off : PIECE;
        const size_t sizes[] = {n};
        cr_assert_eq(zbuf_uv_write(&p.a.stream, uvt_make(n, 0, off, sizes, 1, NULL), NULL, NULL),
                     0);
        uvt_run_for(20); /* read apart */
    }
    uvt_run_for(20);
    cr_assert_eq(f.frames, (size_t)expect_frames, "limit %zu", limit);
    cr_assert_eq(f.bad_frames, 0);
    cr_assert_eq(f.proto_error, expect_error, "limit %zu: %d", limit, f.proto_error);
    if (f.closed == 0)
        uvt_pair_close(&p);
    else
        zbuf_uv_close(&p.a, NULL);
    zbuf_frame_decoder_delete(f.dec);
    uvt_run_for(10);
    cr_assert_eq(zbuf_pool_available(pool), 16);
    zbuf_pool_delete(pool);
}

Test(uv_frame, a_frame_that_cannot_complete_in_what_its_stream_holds_is_refused_when_full)
{
    piecewise_frame(4, 1, 0);
    piecewise_frame(3, 0, -EMSGSIZE);
}
