/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harness of the datagram parser and of a stream's input path.
 *
 * Every input is first parsed whole (zbuf_udpstream_peek()), laid out in
 * segments whose lengths come from the input, so that headers split
 * across segments are covered too.  Then a listening stream on a virtual
 * clock accepts a fixed, valid connection request and gets the input as a
 * sequence of records:
 *   u8 hi, u8 lo, u8 ctl, then len = (hi & 0x3f) << 8 | lo bytes
 *   hi >> 6: how the bytes arrive: 0 one datagram as a zbuf (custom
 *              transports, the stack); 1 one datagram lying in a buffer
 *              (the socket transport's receive path); 2 and 3 a run of
 *              datagrams received with UDP GRO, cut every seg bytes, seg
 *              being the record's first two bytes (big-endian, taken off
 *              the datagrams) modulo 1500, plus 1
 *   ctl bit 0: write the stream's real connection identifier at bytes 4..7
 *              of each datagram (so the fuzzer reaches the connected
 *              state's code)
 *   ctl bit 1: the datagram comes from another address
 *   ctl bit 2: the application writes 3000 bytes; bit 3: it reads
 *   ctl bits 4..7: the clock moves on by that many x 50 ms
 * and the stream processes after each.  The sanitizers catch memory errors;
 * the harness checks that every written byte's release callback runs
 * exactly once by the end, and that the parser of contiguous bytes agrees
 * with the parser of segmented zbufs on every input.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <zbuf/udpstream.h>

#include "internal.h"

static uint64_t now_us;
static uint32_t server_cid;
static int released, enrolled;

static uint64_t fuzz_clock(void *arg)
{
    (void)arg;
    return now_us;
}

static int capture_send(void *ctx, zbuf_t **dg, unsigned n, const struct sockaddr *to,
                        socklen_t tolen)
{
    (void)ctx, (void)to, (void)tolen;
    for (unsigned i = 0; i < n; i++) {
        struct zus_hdr h;
        if (zbuf__us_parse(dg[i], &h) == 0 && h.type == ZUS_SYNACK) {
            struct zus_hello hl;
            if (zbuf__us_parse_hello(dg[i], zbuf__us_hdr_size(&h), &hl) == 0)
                server_cid = hl.src_cid;
        }
        zbuf_delete(dg[i]);
    }
    return (int)n;
}

static void count_release(void *data, size_t size, void *arg)
{
    (void)size, (void)arg;
    free(data);
    released++;
}

/* The input as a zbuf of segments of 1..16 bytes chosen by the input. */
static zbuf_t *segmented(const uint8_t *d, size_t n)
{
    zbuf_t *z;
    if (zbuf_create(&z) < 0)
        abort();
    size_t at = 0;
    while (at < n) {
        size_t k = 1 + d[at] % 16;
        if (k > n - at)
            k = n - at;
        if (zbuf_append_copy(z, d + at, k) < 0)
            abort();
        at += k;
    }
    return z;
}

static zbuf_t *dgram(const uint8_t *d, size_t n)
{
    zbuf_t *z;
    if (zbuf_create(&z) < 0)
        abort();
    if (n > 0 && zbuf_append_copy(z, d, n) < 0)
        abort();
    return z;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    zbuf_t *whole = segmented(data, size);
    uint32_t cid;
    (void)zbuf_udpstream_peek(whole, &cid);
    struct zus_hdr h1, h2;
    int r1 = zbuf__us_parse(whole, &h1), r2 = zbuf__us_parse_mem(data, size, &h2);
    if (r1 != r2 || (r1 == 0 && (h1.type != h2.type || h1.sn != h2.sn || h1.una != h2.una ||
                                 h1.len != h2.len || h1.nsack != h2.nsack ||
                                 memcmp(h1.sack, h2.sack, sizeof h1.sack[0] * h1.nsack) != 0)))
        abort(); /* the two parsers disagree */
    zbuf_delete(whole);

    now_us = 1000000;
    server_cid = 0;
    released = enrolled = 0;
    zbuf_udpstream_opts_t o;
    zbuf_udpstream_opts_init(&o);
    o.clock = fuzz_clock;
    o.rcv_wnd = 64;
    o.snd_wnd = 64;
    o.mode = (size & 1) ? ZBUF_UDPSTREAM_ZEROCOPY : ZBUF_UDPSTREAM_COPY;
    static const zbuf_udpstream_transport_t t = {.send = capture_send};
    zbuf_udpstream_t *s;
    if (zbuf_udpstream_create(&o, &t, NULL, NULL, 0, &s) < 0)
        abort();
    struct sockaddr_in peer = {.sin_family = AF_INET, .sin_port = htons(4000),
                               .sin_addr.s_addr = htonl(0x7f000001)};
    struct sockaddr_in other = peer;
    other.sin_port = htons(4001);
    uint8_t hello[ZUS_HELLO_LEN];
    zbuf__us_write_hello(&(struct zus_hello){.src_cid = 0x11111111, .mss = 1400}, hello);
    struct zus_hdr syn = {.type = ZUS_SYN, .sn = 1000, .wnd = 64, .len = ZUS_HELLO_LEN, .ts = 5};
    uint8_t pkt[ZBUF_UDPSTREAM_HEADER + ZUS_HELLO_LEN];
    zbuf__us_write_hdr(&syn, pkt);
    memcpy(pkt + ZBUF_UDPSTREAM_HEADER, hello, sizeof hello);
    zbuf_udpstream_input(s, dgram(pkt, sizeof pkt), (struct sockaddr *)&peer, sizeof peer);
    zbuf_udpstream_process(s);

    size_t at = 0;
    while (at + 3 <= size) {
        unsigned how = data[at] >> 6;
        size_t len = (size_t)(data[at] & 0x3f) << 8 | data[at + 1];
        uint8_t ctl = data[at + 2];
        at += 3;
        if (len > size - at)
            len = size - at;
        size_t seg = 0;
        if (how >= 2 && len >= 2) {
            seg = 1 + ((size_t)data[at] << 8 | data[at + 1]) % 1500;
            at += 2;
            len -= 2;
        }
        uint8_t buf[16384];
        memcpy(buf, data + at, len);
        at += len;
        for (size_t d = 0; (ctl & 1) && d + 8 <= len; d += seg ? seg : len) {
            buf[d + 4] = (uint8_t)(server_cid >> 24);
            buf[d + 5] = (uint8_t)(server_cid >> 16);
            buf[d + 6] = (uint8_t)(server_cid >> 8);
            buf[d + 7] = (uint8_t)server_cid;
        }
        const struct sockaddr_in *from = (ctl & 2) ? &other : &peer;
        if (how == 0 || len == 0) {
            zbuf_udpstream_input(s, dgram(buf, len), (const struct sockaddr *)from, sizeof *from);
        } else {
            /* In a buffer of the receive path's kind, at an offset (as in a
             * pool buffer after other datagrams). */
            zbuf_buf_t *b;
            if (zbuf_buf_alloc(len + 64, &b) < 0)
                abort();
            memcpy((uint8_t *)zbuf_buf_data(b) + 64, buf, len);
            zbuf__us_gro_split(s, b, 64, len, seg, 1472, (const struct sockaddr *)from,
                               sizeof *from);
            zbuf_buf_unref(b);
        }
        if (ctl & 4) {
            uint8_t *m = malloc(3000);
            memset(m, 0x5a, 3000);
            zbuf_t *z;
            if (zbuf_create(&z) < 0 || zbuf_append_buf(z, m, 3000, count_release, NULL) < 0)
                abort();
            enrolled++;
            if (zbuf_udpstream_write(s, z) < 0)
                zbuf_delete(z);
        }
        if (ctl & 8) {
            zbuf_t *z;
            if (zbuf_udpstream_read(s, 1, 5000, &z) > 0)
                zbuf_delete(z);
        }
        now_us += (uint64_t)(ctl >> 4) * 50000;
        zbuf_udpstream_process(s);
    }
    zbuf_udpstream_delete(s);
    if (released != enrolled)
        abort();
    return 0;
}
